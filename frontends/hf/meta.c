/* frontends/hf/meta.c: the sections an LLM's artifact carries for the runtime's generation loop
 * (runtime/llm/): llm.json, what the model's functions are and what they need (vocabulary,
 * special tokens, limits, the KV cache's geometry), the folder's tokenizer.json as it is, and the
 * model's chat template (chat_template.json: the template's text, bos_token, eos_token). */
#include "hf_int.h"
#include "relaxc/llm.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

/* ---- the chat template (chat_template.json) ---- */
/* A special token of tokenizer_config.json: a string, or an AddedToken dict's "content". */
static const char *config_token(const cJSON *cfg, const char *key) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(cfg, key);
  if (cJSON_IsObject(v)) v = cJSON_GetObjectItemCaseSensitive(v, "content");
  return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* tokenizer_config.json's chat_template: a string, or a list of {"name", "template"} of which
 * transformers uses "default" when no name is asked for. */
static rx_status config_template(const cJSON *v, const char *path, char **out) {
  if (cJSON_IsString(v)) {
    *out = base_strdup(v->valuestring);
    return NULL;
  }
  if (cJSON_IsArray(v)) {
    const cJSON *e;
    cJSON_ArrayForEach(e, v) {
      const cJSON *name = cJSON_GetObjectItemCaseSensitive(e, "name");
      const cJSON *text = cJSON_GetObjectItemCaseSensitive(e, "template");
      if (cJSON_IsString(name) && !strcmp(name->valuestring, "default") && cJSON_IsString(text)) {
        *out = base_strdup(text->valuestring);
        return NULL;
      }
    }
    return base_status_make(RX_ERR_INVALID,
                            "%s: chat_template is a list of named templates without one named "
                            "'default' (with a string 'template')",
                            path);
  }
  if (v && !cJSON_IsNull(v))
    return base_status_make(RX_ERR_INVALID,
                            "%s: chat_template must be a string or a list of {\"name\", "
                            "\"template\"}",
                            path);
  return NULL;
}

static rx_status read_json(const char *path, cJSON **out) {
  *out = NULL;
  struct stat st;
  if (stat(path, &st) != 0) return NULL;
  char *text = NULL;
  size_t len = 0;
  RX_RETURN_IF_ERROR(base_read_file(path, &text, &len));
  *out = cJSON_ParseWithLength(text, len);
  free(text);
  if (!*out || !cJSON_IsObject(*out)) {
    cJSON_Delete(*out);
    *out = NULL;
    return base_status_make(RX_ERR_INVALID, "%s: not a JSON object", path);
  }
  return NULL;
}

/* The folder's template (chat_template.jinja, then chat_template.json, then
 * tokenizer_config.json, transformers 5's order) and the config's special tokens. */
static rx_status folder_template(const char *dir, char **tmpl, char **bos, char **eos, char *where,
                                 size_t where_len) {
  char path[4096];
  cJSON *cfg = NULL;
  snprintf(path, sizeof path, "%s/tokenizer_config.json", dir);
  RX_RETURN_IF_ERROR(read_json(path, &cfg));
  rx_status s = NULL;
  if (cfg) {
    const char *b = config_token(cfg, "bos_token"), *e = config_token(cfg, "eos_token");
    *bos = b ? base_strdup(b) : NULL;
    *eos = e ? base_strdup(e) : NULL;
    s = config_template(cJSON_GetObjectItemCaseSensitive(cfg, "chat_template"), path, tmpl);
    snprintf(where, where_len, "%s", path);
    cJSON_Delete(cfg);
    if (s) return s;
  }
  snprintf(path, sizeof path, "%s/chat_template.json", dir);
  cJSON *j = NULL;
  RX_RETURN_IF_ERROR(read_json(path, &j));
  if (j) {
    char *t = NULL;
    s = config_template(cJSON_GetObjectItemCaseSensitive(j, "chat_template"), path, &t);
    cJSON_Delete(j);
    if (s) return s;
    if (t) {
      free(*tmpl);
      *tmpl = t;
      snprintf(where, where_len, "%s", path);
    }
  }
  snprintf(path, sizeof path, "%s/chat_template.jinja", dir);
  struct stat st;
  if (stat(path, &st) == 0) {
    char *text = NULL;
    size_t len = 0;
    RX_RETURN_IF_ERROR(base_read_file(path, &text, &len));
    if (strlen(text) != len) {
      free(text);
      return base_status_make(RX_ERR_INVALID, "%s: the template holds a NUL byte", path);
    }
    free(*tmpl);
    *tmpl = text;
    snprintf(where, where_len, "%s", path);
  }
  return NULL;
}

/* The text of token id in GGUF's tokenizer.ggml.tokens (NULL when there is none). */
static char *gguf_token(const rx_gguf_file *f, const char *key) {
  uint32_t id;
  const rx_gguf_value *toks = NULL;
  if (!gguf_find(f, key) || gguf_get_u32(f, key, &id)) return NULL; /* a bad id: no token */
  rx_status s = gguf_get_array(f, "tokenizer.ggml.tokens", RX_GGUF_V_STRING, &toks);
  if (s || id >= toks->count) {
    rx_status_free(s);
    return NULL;
  }
  rx_gguf_value v = gguf_array_at(toks, id);
  return base_strndup(v.str, (size_t)v.len);
}

rx_status hf_add_chat_template(rx_module *m, const char *dir, const rx_gguf_file *f) {
  char *tmpl = NULL, *bos = NULL, *eos = NULL, where[4200] = "";
  rx_status s = NULL;
  if (f) {
    const char *t = NULL;
    if (gguf_find(f, "tokenizer.chat_template"))
      s = gguf_get_string(f, "tokenizer.chat_template", &t);
    if (t) {
      tmpl = base_strdup(t);
      bos = gguf_token(f, "tokenizer.ggml.bos_token_id");
      eos = gguf_token(f, "tokenizer.ggml.eos_token_id");
      snprintf(where, sizeof where, "%s: tokenizer.chat_template", dir);
    }
  } else {
    s = folder_template(dir, &tmpl, &bos, &eos, where, sizeof where);
  }
  if (!s && tmpl) {
    rx_chat_template *ct = NULL;
    s = rx_chat_template_parse(tmpl, strlen(tmpl), where, bos, eos, &ct);
    rx_chat_template_free(ct);
  }
  if (!s && tmpl) {
    rx_strbuf j = {0};
    base_strbuf_append(&j, "{\"format\": 1, \"chat_template\": ");
    base_strbuf_json_string(&j, tmpl);
    base_strbuf_append(&j, ", \"bos_token\": ");
    base_strbuf_json_string(&j, bos ? bos : "");
    base_strbuf_append(&j, ", \"eos_token\": ");
    base_strbuf_json_string(&j, eos ? eos : "");
    base_strbuf_append(&j, "}\n");
    s = ir_module_add_section(m, "chat_template.json", j.data, j.len);
    base_strbuf_free(&j);
  }
  free(tmpl);
  free(bos);
  free(eos);
  return s;
}
