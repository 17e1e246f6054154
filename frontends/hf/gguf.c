/* frontends/hf/gguf.c: a GGUF file (llama.cpp's format, base/gguf.c reads it) as the model
 * description the Llama builder of llama.c takes (docs/gguf.md): the hyperparameters from the
 * architecture's metadata keys into an rx_hf_config, the tensors by llama.cpp's names, and the
 * tokenizer of tokenizer.ggml.* rewritten as the tokenizer.json that runtime/llm reads.
 *
 * Architectures: "llama" and "qwen2". Keys (ARCH = the architecture's name):
 *   ARCH.embedding_length, .feed_forward_length, .block_count, .attention.head_count (required),
 *   .attention.head_count_kv (default: head_count), .attention.key_length (default: embedding /
 *   heads), .attention.layer_norm_rms_epsilon (required), .rope.freq_base (default 10000),
 *   .context_length (required), .vocab_size (default: token_embd's rows).
 * A rope scaling other than none is refused (ARCH.rope.scaling.type). */
#include "hf_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct hf_gguf {
  char *path;
  rx_mapped_file map;
  rx_gguf_file f;
};

void hf_gguf_close(void *p) {
  hf_gguf *g = p;
  if (!g) return;
  rx_gguf_free(&g->f);
  rx_unmap_file(&g->map);
  free(g->path);
  free(g);
}

bool rx_hf_is_gguf(const char *path) {
  FILE *fp = fopen(path, "rb");
  if (!fp) return false;
  char magic[4];
  size_t n = fread(magic, 1, sizeof magic, fp);
  fclose(fp);
  return rx_gguf_is_gguf(magic, n);
}

/* An integer key, or def when absent (def < 0: required). */
static rx_status get_int(const rx_gguf_file *f, const char *arch, const char *key, int64_t def,
                         int64_t *out) {
  char full[128];
  snprintf(full, sizeof full, "%s.%s", arch, key);
  if (def >= 0 && !rx_gguf_find(f, full)) {
    *out = def;
    return NULL;
  }
  uint32_t v;
  RX_RETURN_IF_ERROR(rx_gguf_get_u32(f, full, &v));
  if (v == 0)
    return rx_status_make(RX_ERR_INVALID, "%s: key '%s' is 0: expected a positive count", f->name,
                          full);
  *out = v;
  return NULL;
}

static rx_status get_float(const rx_gguf_file *f, const char *arch, const char *key, double def,
                           double *out) {
  char full[128];
  snprintf(full, sizeof full, "%s.%s", arch, key);
  if (def >= 0 && !rx_gguf_find(f, full)) {
    *out = def;
    return NULL;
  }
  float v;
  RX_RETURN_IF_ERROR(rx_gguf_get_f32(f, full, &v));
  *out = v;
  return NULL;
}

/* the special-token ids of tokenizer.ggml.* (-1 when absent) */
static rx_status special_ids(const rx_gguf_file *f, rx_hf_config *c) {
  c->bos = -1;
  c->neos = 0;
  uint32_t v;
  if (rx_gguf_find(f, "tokenizer.ggml.bos_token_id")) {
    RX_RETURN_IF_ERROR(rx_gguf_get_u32(f, "tokenizer.ggml.bos_token_id", &v));
    c->bos = v;
  }
  if (rx_gguf_find(f, "tokenizer.ggml.eos_token_id")) {
    RX_RETURN_IF_ERROR(rx_gguf_get_u32(f, "tokenizer.ggml.eos_token_id", &v));
    c->eos[c->neos++] = v;
  }
  if (rx_gguf_find(f, "tokenizer.ggml.eot_token_id")) {
    RX_RETURN_IF_ERROR(rx_gguf_get_u32(f, "tokenizer.ggml.eot_token_id", &v));
    if (!c->neos || c->eos[0] != v) c->eos[c->neos++] = v;
  }
  for (int i = 0; i < c->neos; i++)
    if (c->eos[i] >= c->vocab)
      return rx_status_make(RX_ERR_INVALID,
                            "%s: end-of-sequence id %lld is outside the vocabulary "
                            "of %lld tokens",
                            f->name, (long long)c->eos[i], (long long)c->vocab);
  if (c->bos >= c->vocab)
    return rx_status_make(RX_ERR_INVALID,
                          "%s: tokenizer.ggml.bos_token_id %lld is outside the vocabulary of %lld "
                          "tokens",
                          f->name, (long long)c->bos, (long long)c->vocab);
  return NULL;
}

rx_status hf_gguf_read_config(const rx_gguf_file *f, rx_hf_config *c) {
  memset(c, 0, sizeof *c);
  const char *arch;
  RX_RETURN_IF_ERROR(rx_gguf_get_string(f, "general.architecture", &arch));
  if (!strcmp(arch, "llama")) {
    c->arch = RX_HF_LLAMA;
    c->arch_name = "llama";
  } else if (!strcmp(arch, "qwen2")) {
    c->arch = RX_HF_QWEN2;
    c->arch_name = "qwen2";
    c->qkv_bias = true;
  } else {
    return rx_status_make(RX_ERR_UNSUPPORTED,
                          "%s: general.architecture '%.64s' is not supported (supported: llama, "
                          "qwen2)",
                          f->name, arch);
  }
  RX_RETURN_IF_ERROR(get_int(f, arch, "embedding_length", -1, &c->hidden));
  RX_RETURN_IF_ERROR(get_int(f, arch, "feed_forward_length", -1, &c->intermediate));
  RX_RETURN_IF_ERROR(get_int(f, arch, "block_count", -1, &c->layers));
  RX_RETURN_IF_ERROR(get_int(f, arch, "attention.head_count", -1, &c->heads));
  RX_RETURN_IF_ERROR(get_int(f, arch, "attention.head_count_kv", c->heads, &c->kv_heads));
  RX_RETURN_IF_ERROR(get_int(f, arch, "attention.key_length", c->hidden / c->heads, &c->head_dim));
  RX_RETURN_IF_ERROR(get_int(f, arch, "context_length", -1, &c->max_positions));
  const rx_gguf_tensor *emb = rx_gguf_find_tensor(f, "token_embd.weight");
  RX_RETURN_IF_ERROR(
      get_int(f, arch, "vocab_size", emb && emb->ndim == 2 ? emb->shape[0] : -1, &c->vocab));
  RX_RETURN_IF_ERROR(get_float(f, arch, "attention.layer_norm_rms_epsilon", -1, &c->rms_eps));
  RX_RETURN_IF_ERROR(get_float(f, arch, "rope.freq_base", 10000.0, &c->rope_theta));
  char key[128];
  snprintf(key, sizeof key, "%s.rope.scaling.type", arch);
  const char *scaling = "none";
  if (rx_gguf_find(f, key)) RX_RETURN_IF_ERROR(rx_gguf_get_string(f, key, &scaling));
  if (strcmp(scaling, "none") != 0)
    return rx_status_make(RX_ERR_UNSUPPORTED, "%s: %s '%.64s' is not supported (only none)",
                          f->name, key, scaling);
  snprintf(c->rope_type, sizeof c->rope_type, "default");
  if (c->heads % c->kv_heads != 0 || c->head_dim % 2 != 0)
    return rx_status_make(RX_ERR_INVALID,
                          "%s: %lld heads, %lld kv heads, head dim %lld: expected heads a multiple "
                          "of kv heads and an even head dim",
                          f->name, (long long)c->heads, (long long)c->kv_heads,
                          (long long)c->head_dim);
  c->tie_embeddings = !rx_gguf_find_tensor(f, "output.weight");
  c->file_dtype = RX_DTYPE_UNKNOWN;
  return special_ids(f, c);
}

rx_status hf_gguf_open(const char *path, rx_hf_config *c, hf_gguf **out) {
  *out = NULL;
  hf_gguf *g = rx_calloc(1, sizeof *g);
  g->path = rx_strdup(path);
  rx_status s = rx_map_file(path, &g->map);
  if (!s) s = rx_gguf_parse(g->map.data, g->map.size, path, &g->f);
  if (!s) s = hf_gguf_read_config(&g->f, c);
  if (s) {
    hf_gguf_close(g);
    return s;
  }
  *out = g;
  return NULL;
}

const rx_gguf_file *hf_gguf_file(const hf_gguf *g) { return &g->f; }

/* ---- the tokenizer ---- */
static const char *const byte_level =
    "{\"type\": \"ByteLevel\", \"add_prefix_space\": false, \"trim_offsets\": true, "
    "\"use_regex\": true}";

/* tokenizer.ggml.merges ("a b" strings, ranked by order) into out as a JSON list */
static rx_status put_merges(const rx_gguf_file *f, rx_strbuf *out) {
  const rx_gguf_value *m;
  RX_RETURN_IF_ERROR(rx_gguf_get_array(f, "tokenizer.ggml.merges", RX_GGUF_V_STRING, &m));
  rx_strbuf_append(out, "[");
  for (uint64_t i = 0; i < m->count; i++) {
    if (strlen(m->strs[i]) != m->lens[i] || !strchr(m->strs[i], ' '))
      return rx_status_make(RX_ERR_INVALID,
                            "%s: tokenizer.ggml.merges[%llu]: expected two tokens separated by a "
                            "space, without NUL bytes",
                            f->name, (unsigned long long)i);
    if (i) rx_strbuf_append(out, ", ");
    rx_strbuf_json_string(out, m->strs[i]);
  }
  rx_strbuf_append(out, "]");
  return NULL;
}

/* The vocabulary ({"token": id}) and the control tokens as added special tokens. */
static rx_status put_vocab(const rx_gguf_file *f, const rx_hf_config *c, rx_strbuf *vocab,
                           rx_strbuf *added) {
  const rx_gguf_value *toks, *types = NULL;
  RX_RETURN_IF_ERROR(rx_gguf_get_array(f, "tokenizer.ggml.tokens", RX_GGUF_V_STRING, &toks));
  if (toks->count != (uint64_t)c->vocab)
    return rx_status_make(RX_ERR_INVALID,
                          "%s: tokenizer.ggml.tokens holds %llu tokens, the model's vocabulary "
                          "%lld",
                          f->name, (unsigned long long)toks->count, (long long)c->vocab);
  if (rx_gguf_find(f, "tokenizer.ggml.token_type")) {
    RX_RETURN_IF_ERROR(rx_gguf_get_array(f, "tokenizer.ggml.token_type", RX_GGUF_V_INT32, &types));
    if (types->count != toks->count)
      return rx_status_make(
          RX_ERR_INVALID, "%s: tokenizer.ggml.token_type holds %llu entries, tokens %llu", f->name,
          (unsigned long long)types->count, (unsigned long long)toks->count);
  }
  rx_strbuf_append(vocab, "{");
  rx_strbuf_append(added, "[");
  for (uint64_t i = 0, na = 0; i < toks->count; i++) {
    if (strlen(toks->strs[i]) != toks->lens[i])
      return rx_status_make(RX_ERR_INVALID, "%s: tokenizer.ggml.tokens[%llu] holds a NUL byte",
                            f->name, (unsigned long long)i);
    rx_strbuf_append(vocab, i ? ", " : "");
    rx_strbuf_json_string(vocab, toks->strs[i]);
    rx_strbuf_printf(vocab, ": %llu", (unsigned long long)i);
    /* llama.cpp's token types: 1 normal, 2 unknown, 3 control, 4 user defined, 5 unused, 6 byte */
    int64_t ty = types ? rx_gguf_array_at(types, i).v.i : 1;
    if (ty != 3 && ty != 4) continue;
    rx_strbuf_printf(added, "%s{\"id\": %llu, \"content\": ", na++ ? ", " : "",
                     (unsigned long long)i);
    rx_strbuf_json_string(added, toks->strs[i]);
    rx_strbuf_printf(added,
                     ", \"single_word\": false, \"lstrip\": false, \"rstrip\": false, "
                     "\"normalized\": false, \"special\": %s}",
                     ty == 3 ? "true" : "false");
  }
  rx_strbuf_append(vocab, "}");
  rx_strbuf_append(added, "]");
  return NULL;
}

/* The post-processor: the BOS token before the text when tokenizer.ggml.add_bos_token is true;
 * absent, none (llama.cpp's default for a byte-level BPE vocabulary). */
static rx_status put_post(const rx_gguf_file *f, const rx_hf_config *c, rx_strbuf *out) {
  const rx_gguf_kv *kv = rx_gguf_find(f, "tokenizer.ggml.add_bos_token");
  if (kv && kv->value.type != RX_GGUF_V_BOOL)
    return rx_status_make(RX_ERR_INVALID, "%s: tokenizer.ggml.add_bos_token is a %s: expected bool",
                          f->name, rx_gguf_vtype_name(kv->value.type));
  if (!kv || !kv->value.v.u || c->bos < 0) {
    rx_strbuf_append(out, "null");
    return NULL;
  }
  const rx_gguf_value *toks;
  RX_RETURN_IF_ERROR(rx_gguf_get_array(f, "tokenizer.ggml.tokens", RX_GGUF_V_STRING, &toks));
  if ((uint64_t)c->bos >= toks->count) return NULL; /* put_vocab refused it already */
  const char *bos = toks->strs[c->bos];
  rx_strbuf_append(out, "{\"type\": \"TemplateProcessing\", \"single\": [{\"SpecialToken\": "
                        "{\"id\": ");
  rx_strbuf_json_string(out, bos);
  rx_strbuf_append(out, ", \"type_id\": 0}}, {\"Sequence\": {\"id\": \"A\", \"type_id\": 0}}], "
                        "\"special_tokens\": {");
  rx_strbuf_json_string(out, bos);
  rx_strbuf_append(out, ": {\"id\": ");
  rx_strbuf_json_string(out, bos);
  rx_strbuf_printf(out, ", \"ids\": [%lld], \"tokens\": [", (long long)c->bos);
  rx_strbuf_json_string(out, bos);
  rx_strbuf_append(out, "]}}}");
  return NULL;
}

rx_status hf_gguf_tokenizer_json(const rx_gguf_file *f, const rx_hf_config *c, rx_strbuf *out) {
  const char *model, *pre = "default";
  RX_RETURN_IF_ERROR(rx_gguf_get_string(f, "tokenizer.ggml.model", &model));
  if (strcmp(model, "gpt2") != 0)
    return rx_status_make(RX_ERR_UNSUPPORTED,
                          "%s: tokenizer.ggml.model '%.64s' is not supported (supported: gpt2, "
                          "byte-level BPE)",
                          f->name, model);
  if (rx_gguf_find(f, "tokenizer.ggml.pre"))
    RX_RETURN_IF_ERROR(rx_gguf_get_string(f, "tokenizer.ggml.pre", &pre));
  if (strcmp(pre, "default") != 0 && strcmp(pre, "gpt-2") != 0)
    return rx_status_make(RX_ERR_UNSUPPORTED,
                          "%s: tokenizer.ggml.pre '%.64s' is not supported (supported: default, "
                          "gpt-2: the GPT-2 pre-tokenizer)",
                          f->name, pre);
  rx_strbuf vocab = {0}, added = {0}, merges = {0}, post = {0};
  rx_status s = put_vocab(f, c, &vocab, &added);
  if (!s) s = put_merges(f, &merges);
  if (!s) s = put_post(f, c, &post);
  if (!s) {
    const char *parts[] = {"{\"version\": \"1.0\", \"added_tokens\": ",
                           added.data,
                           ", \"normalizer\": null, \"pre_tokenizer\": ",
                           byte_level,
                           ", \"post_processor\": ",
                           post.data,
                           ", \"decoder\": ",
                           byte_level,
                           ", \"model\": {\"type\": \"BPE\", \"byte_fallback\": false, "
                           "\"ignore_merges\": false, \"vocab\": ",
                           vocab.data,
                           ", \"merges\": ",
                           merges.data,
                           "}}\n"};
    for (size_t i = 0; i < RX_ARRAY_LEN(parts); i++) rx_strbuf_append(out, parts[i]);
  }
  rx_strbuf_free(&vocab);
  rx_strbuf_free(&added);
  rx_strbuf_free(&merges);
  rx_strbuf_free(&post);
  return s;
}
