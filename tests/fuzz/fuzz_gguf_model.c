/* tests/fuzz/fuzz_gguf_model.c: libFuzzer harness of a GGUF file's metadata read as a model's
 * description (frontends/gguf/model.c and frontends/hf/limits.c), as `relaxc compile FILE.gguf`
 * reads it before it builds anything: the hyperparameters into an rx_hf_config, checked against the
 * one table of bounds (HF_LIMITS) and for consistency; then tokenizer.ggml.* rewritten as a
 * tokenizer.json and loaded by the runtime's tokenizer, as compile does. Seeds are metadata-only
 * files (mostly small llama and qwen2 descriptions), so mutations reach the numbers rather than the
 * tensor table; a tiny llama with 4 experts (moe_llama.gguf) carries tensors, whose stacked
 * experts are read too (frontends/gguf/experts.c). */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "frontends/gguf/gguf.h"
#include "frontends/hf/hf_int.h"
#include "relaxc/llm.h"

/* What an accepted description promises the builder: every number inside the table's bounds,
 * kv heads dividing heads, an even head dim, the special tokens inside the vocabulary, a
 * positive finite rope scaling factor; and the check accepts it again. */
static void check_promises(const rx_hf_config *c) {
  const double v[HF_LIMIT_COUNT] = {
#define HF_LIMIT_VALUE_(f, hk, gk, lo, hi) [HF_LIMIT_##f] = (double)c->f,
      HF_LIMITS(HF_LIMIT_VALUE_)
#undef HF_LIMIT_VALUE_
  };
  for (int i = 0; i < HF_LIMIT_COUNT; i++)
    if (!(v[i] >= hf_limits[i].lo && v[i] <= hf_limits[i].hi)) abort();
  if (c->heads % c->kv_heads || c->head_dim % 2 || c->bos >= c->vocab || c->neos > 8) abort();
  for (int i = 0; i < c->neos; i++)
    if (c->eos[i] < 0 || c->eos[i] >= c->vocab) abort();
  if (strcmp(c->rope_type, "default") && !(c->rope_factor > 0 && isfinite(c->rope_factor))) abort();
  rx_status s = hf_check_config(c, "fuzz.gguf", c->arch_name);
  if (s) abort();
  if (c->experts && (c->top_k < 1 || c->top_k > c->experts || c->moe_inter < 1)) abort();
}

/* A mixture of experts' stacked tensors (frontends/gguf/experts.c) of every sparse layer, as
 * compile reads them next: found and checked, gate and up interleaved. */
static void read_experts(const rx_gguf_file *f, const rx_hf_config *c) {
  for (int64_t l = 0; l < c->layers && c->experts; l++)
    for (int gated = 0; gated < 2 && c->sparse[l]; gated++) {
      hf_gguf_experts x;
      rx_status s = hf_gguf_experts_read(f, c, l, gated, &x);
      if (!s && (!x.data || !x.row_bytes)) abort();
      free(x.owned);
      rx_status_free(s);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  uint8_t *bytes = malloc(size ? size : 1); /* an exact-size copy: ASan sees any overread */
  if (!bytes) return 0;
  if (size) memcpy(bytes, data, size);
  rx_gguf_file f;
  rx_status s = gguf_parse(bytes, size, "fuzz.gguf", &f);
  if (!s) {
    rx_hf_config c;
    rx_status cs = hf_gguf_read_config(&f, &c);
    if (!cs) {
      check_promises(&c);
      read_experts(&f, &c);
      rx_strbuf json = {0};
      if (gguf_find(&f, "tokenizer.ggml.model") && !(cs = hf_gguf_tokenizer_json(&f, &c, &json))) {
        rx_tokenizer *tok = NULL;
        rx_status ts = rx_tokenizer_load(json.data, json.len, "fuzz tokenizer.json", &tok);
        if (!ts && rx_tokenizer_vocab_size(tok) < 0) abort();
        rx_tokenizer_free(tok);
        rx_status_free(ts);
      }
      base_strbuf_free(&json);
    }
    rx_status_free(cs);
    gguf_free(&f);
  }
  rx_status_free(s);
  free(bytes);
  return 0;
}
