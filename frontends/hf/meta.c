/* frontends/hf/meta.c: the sections an LLM's artifact carries for the runtime's generation loop
 * (runtime/llm/): llm.json, what the model's functions are and what they need (vocabulary,
 * special tokens, limits, the KV cache's geometry), and the folder's tokenizer.json as it is. */
#include "hf_int.h"
#include "relaxc/llm.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

/* The tokenizer the artifact will carry, loaded as the runtime will load it (so an inconsistent
 * file fails now, naming its place, not at the first generate), and its ids inside the model's
 * vocabulary (the embedding has a row for each). */
static rx_status check_tokenizer(const char *json, size_t len, const char *name,
                                 const rx_hf_config *c) {
  rx_tokenizer *tok = NULL;
  RX_RETURN_IF_ERROR(rx_tokenizer_load(json, len, name, &tok));
  int64_t n = rx_tokenizer_vocab_size(tok);
  rx_tokenizer_free(tok);
  if (n > c->vocab)
    return base_status_make(RX_ERR_INVALID,
                            "%s: the tokenizer has ids up to %lld, past the model's vocabulary of "
                            "%lld tokens (the embedding has no row for them)",
                            name, (long long)n - 1, (long long)c->vocab);
  return NULL;
}

rx_status hf_add_sections(rx_module *m, const char *dir, const rx_hf_config *c, rx_dtype t,
                          int64_t max_len, int64_t max_batch, const char *formats, const char *moe,
                          const char *tok_json, size_t tok_len) {
  rx_strbuf j = {0};
  base_strbuf_append(&j, "{\"format\": 1, \"architecture\": ");
  base_strbuf_json_string(&j, c->arch_name);
  base_strbuf_printf(&j,
                     ", \"dtype\": \"%s\", \"vocab_size\": %lld, \"max_seq_len\": %lld, "
                     "\"max_batch\": %lld, \"bos_token_id\": ",
                     ir_dtype_name(t), (long long)c->vocab, (long long)max_len,
                     (long long)max_batch);
  if (c->bos >= 0)
    base_strbuf_printf(&j, "%lld", (long long)c->bos);
  else
    base_strbuf_append(&j, "null");
  base_strbuf_append(&j, ", \"eos_token_ids\": [");
  for (int i = 0; i < c->neos; i++)
    base_strbuf_printf(&j, "%s%lld", i ? ", " : "", (long long)c->eos[i]);
  base_strbuf_printf(&j,
                     "], \"kv_cache\": {\"layers\": %lld, \"kv_heads\": %lld, \"head_dim\": %lld, "
                     "\"page_size\": 16, \"dtype\": \"%s\"}, \"functions\": {\"create_kv_cache\": "
                     "\"create_kv_cache\", \"prefill\": \"prefill\", \"decode\": \"decode\"}",
                     (long long)c->layers, (long long)c->kv_heads, (long long)c->head_dim,
                     ir_dtype_name(t));
  if (formats) base_strbuf_printf(&j, ", \"weight_formats\": %s", formats);
  if (moe) base_strbuf_printf(&j, ", \"moe\": %s", moe);
  base_strbuf_append(&j, "}\n");
  rx_status s = ir_module_add_section(m, "llm.json", j.data, j.len);
  base_strbuf_free(&j);
  if (s) return s;
  if (tok_json) {
    /* hf_import's message puts the file's path before */
    RX_RETURN_IF_ERROR(check_tokenizer(tok_json, tok_len, "tokenizer.ggml.* as tokenizer.json", c));
    return ir_module_add_section(m, "tokenizer.json", tok_json, tok_len);
  }
  char path[4096];
  snprintf(path, sizeof path, "%s/tokenizer.json", dir);
  struct stat st;
  if (stat(path, &st) != 0) return NULL; /* generation then takes token ids */
  char *text = NULL;
  size_t len = 0;
  RX_RETURN_IF_ERROR(base_read_file(path, &text, &len));
  s = check_tokenizer(text, len, "tokenizer.json", c); /* after the folder's path */
  if (!s) s = ir_module_add_section(m, "tokenizer.json", text, len);
  free(text);
  return s;
}
