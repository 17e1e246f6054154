/* tests/fuzz/fuzz_gguf.c: libFuzzer harness of the GGUF reader and its dequantization
 * (frontends/gguf/gguf.c, gguf_quant.c), and of what the GGUF model front end reads of an accepted
 * file's metadata (frontends/gguf/model.c: the hyperparameters, and tokenizer.ggml.* rewritten as a
 * tokenizer.json). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "frontends/gguf/gguf.h"
#include "frontends/hf/hf_int.h"

/* Every lookup of an accepted file: each key found, each value and array element read, the
 * getters called (their errors are statuses). */
static void read_metadata(const rx_gguf_file *f) {
  volatile uint64_t sink = 0;
  for (size_t i = 0; i < f->nkvs; i++) {
    const rx_gguf_kv *kv = &f->kvs[i];
    if (gguf_find(f, kv->key) != kv) abort(); /* keys are unique */
    const rx_gguf_value *v = &kv->value;
    if (v->type == RX_GGUF_V_STRING && (strlen(v->str) > v->len || v->str[v->len])) abort();
    for (uint64_t k = 0; v->type == RX_GGUF_V_ARRAY && k < v->count; k++) {
      rx_gguf_value e = gguf_array_at(v, k);
      sink += e.v.u + e.len + (e.str ? (uint8_t)e.str[e.len] : 0);
    }
    uint32_t u;
    int32_t i32;
    float x;
    const char *s;
    const rx_gguf_value *a;
    rx_status st[] = {gguf_get_u32(f, kv->key, &u), gguf_get_i32(f, kv->key, &i32),
                      gguf_get_f32(f, kv->key, &x), gguf_get_string(f, kv->key, &s),
                      gguf_get_array(f, kv->key, v->elem, &a)};
    for (size_t k = 0; k < sizeof st / sizeof st[0]; k++) rx_status_free(st[k]);
  }
  (void)sink;
}

/* What the reader promises of every tensor: inside the data, found by its name, its bytes those
 * of its shape and type; then it is dequantized. */
static void read_tensors(const rx_gguf_file *f) {
  for (size_t i = 0; i < f->ntensors; i++) {
    const rx_gguf_tensor *t = &f->tensors[i];
    if (t->offset > f->data_size || t->size > f->data_size - t->offset) abort();
    if (t->offset % f->alignment || gguf_find_tensor(f, t->name) != t) abort();
    int64_t block = gguf_block_elems(t->type);
    if (!gguf_type_supported(t->type) || t->elems % block ||
        t->size != (uint64_t)(t->elems / block) * (uint64_t)gguf_block_bytes(t->type))
      abort();
    float *out = malloc((size_t)t->elems * sizeof *out + 1);
    if (!out) continue;
    gguf_dequantize(t->type, f->data + t->offset, t->elems, out);
    free(out);
  }
}

/* The model front end's reading of the metadata: the config, then the tokenizer rewritten (with
 * the config read, or a vocabulary of the tokens' count when the config is refused). */
static void read_model(const rx_gguf_file *f) {
  rx_hf_config c;
  rx_status s = hf_gguf_read_config(f, &c);
  if (s) {
    rx_status_free(s);
    memset(&c, 0, sizeof c);
    const rx_gguf_kv *kv = gguf_find(f, "tokenizer.ggml.tokens");
    c.vocab = kv && kv->value.type == RX_GGUF_V_ARRAY ? (int64_t)kv->value.count : 0;
    c.bos = c.vocab > 0 ? 0 : -1;
  }
  rx_strbuf out = {0};
  rx_status_free(hf_gguf_tokenizer_json(f, &c, &out));
  base_strbuf_free(&out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  uint8_t *bytes = malloc(size ? size : 1); /* an exact-size copy: ASan sees any overread */
  if (!bytes) return 0;
  if (size) memcpy(bytes, data, size);
  rx_gguf_file f;
  rx_status s = gguf_parse(bytes, size, "fuzz.gguf", &f);
  if (!s) {
    read_metadata(&f);
    read_tensors(&f);
    read_model(&f);
    gguf_free(&f);
  }
  rx_status_free(s);
  free(bytes);
  return 0;
}
