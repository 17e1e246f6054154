/* frontends/hf/config.c: config.json (and generation_config.json) of a Hugging Face model folder.
 * Defaults are those of transformers' LlamaConfig, MistralConfig and Qwen2Config. */
#include "hf_int.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* The architectures, listed once: X(enum, "architectures" entry, rms_norm_eps default,
 * sliding window read, q/k/v biases) */
#define RX_HF_ARCHS(X)                                                                             \
  X(RX_HF_LLAMA, "LlamaForCausalLM", 1e-6, false, false)                                           \
  X(RX_HF_MISTRAL, "MistralForCausalLM", 1e-6, true, false)                                        \
  X(RX_HF_QWEN2, "Qwen2ForCausalLM", 1e-6, false, true)

static const struct {
  rx_hf_arch arch;
  const char *name;
  double eps;
  bool window, bias;
} archs[] = {
#define RX_HF_ARCH_ROW_(e, n, eps, w, b) {e, n, eps, w, b},
    RX_HF_ARCHS(RX_HF_ARCH_ROW_)
#undef RX_HF_ARCH_ROW_
};

bool hf_is_model_dir(const char *path) {
  struct stat st;
  if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode)) return false;
  char buf[4096];
  snprintf(buf, sizeof buf, "%s/config.json", path);
  return stat(buf, &st) == 0 && S_ISREG(st.st_mode);
}

rx_status hf_check_not_bare_dir(const char *path) {
  struct stat st;
  if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode) || hf_is_model_dir(path)) return NULL;
  return base_status_make(RX_ERR_INVALID,
                          "%s: is a directory without config.json: a Hugging Face model folder "
                          "holds config.json, the weights (model.safetensors, or "
                          "model.safetensors.index.json and its shards) and optionally "
                          "tokenizer.json and generation_config.json; other models are files "
                          "(.rx, .onnx, .gguf)",
                          path);
}

typedef struct cfg_reader {
  const char *file; /* for messages */
  const cJSON *root;
  rx_status err; /* the first error */
} cfg_reader;

static void fail(cfg_reader *r, const char *fmt, ...) RX_PRINTF(2, 3);
static void fail(cfg_reader *r, const char *fmt, ...) {
  if (r->err) return;
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  r->err = base_status_make(RX_ERR_INVALID, "%s: %s", r->file, msg);
}

static const cJSON *key(const cJSON *o, const char *k) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
  return v && !cJSON_IsNull(v) ? v : NULL;
}

#define REQUIRED INT64_MIN /* int_key's default of a key that must be there */

/* An integer key in [lo, hi]; def when absent. */
static int64_t int_key(cfg_reader *r, const cJSON *o, const char *k, int64_t def, int64_t lo,
                       int64_t hi) {
  const cJSON *v = key(o, k);
  if (!v) {
    if (def == REQUIRED)
      fail(r, "'%s' is missing: expected an integer from %lld to %lld", k, (long long)lo,
           (long long)hi);
    return def;
  }
  double d = cJSON_IsNumber(v) ? v->valuedouble : NAN;
  if (cJSON_IsNumber(v) && !isfinite(d)) {
    fail(r,
         "'%s' is not a finite number (too large for a double): expected an integer from %lld to "
         "%lld",
         k, (long long)lo, (long long)hi);
    return def;
  }
  if (!(d == floor(d)) || d < (double)lo || d > (double)hi) {
    char *t = cJSON_PrintUnformatted(v);
    fail(r, "'%s' is %.60s: expected an integer from %lld to %lld", k, t ? t : "?", (long long)lo,
         (long long)hi);
    free(t);
    return def;
  }
  return (int64_t)d;
}

static double num_key(cfg_reader *r, const cJSON *o, const char *k, double def, double lo,
                      double hi) {
  const cJSON *v = key(o, k);
  if (!v) return def;
  if (cJSON_IsNumber(v) && !isfinite(v->valuedouble)) {
    fail(r, "'%s' is not a finite number (too large for a double): expected a number from %g to %g",
         k, lo, hi);
    return def;
  }
  if (!cJSON_IsNumber(v) || !(v->valuedouble >= lo && v->valuedouble <= hi)) {
    char *t = cJSON_PrintUnformatted(v);
    fail(r, "'%s' is %.60s: expected a number from %g to %g", k, t ? t : "?", lo, hi);
    free(t);
    return def;
  }
  return v->valuedouble;
}

static bool bool_key(cfg_reader *r, const cJSON *o, const char *k, bool def) {
  const cJSON *v = key(o, k);
  if (!v) return def;
  if (!cJSON_IsBool(v)) fail(r, "'%s' must be true or false", k);
  return cJSON_IsTrue(v);
}

/* The key of limit i of the table HF_LIMITS (hf_int.h, shared with GGUF) within its bounds. */
static int64_t lim_int(cfg_reader *r, const cJSON *o, hf_limit_id i, int64_t def) {
  return int_key(r, o, hf_limits[i].hf, def, (int64_t)hf_limits[i].lo, (int64_t)hf_limits[i].hi);
}

static double lim_num(cfg_reader *r, const cJSON *o, hf_limit_id i, double def) {
  return num_key(r, o, hf_limits[i].hf, def, hf_limits[i].lo, hf_limits[i].hi);
}

static const char *str_key(const cJSON *o, const char *k) {
  const cJSON *v = key(o, k);
  return v && cJSON_IsString(v) ? v->valuestring : NULL;
}

static void read_arch(cfg_reader *r, rx_hf_config *c) {
  const cJSON *a = key(r->root, "architectures");
  const cJSON *first = a && cJSON_IsArray(a) ? cJSON_GetArrayItem(a, 0) : NULL;
  const char *name = first && cJSON_IsString(first) ? first->valuestring : NULL;
  for (size_t i = 0; name && i < RX_ARRAY_LEN(archs); i++)
    if (!strcmp(name, archs[i].name)) {
      c->arch = archs[i].arch;
      c->arch_name = archs[i].name;
      c->rms_eps = archs[i].eps;
      return;
    }
  rx_strbuf list = {0};
  for (size_t i = 0; i < RX_ARRAY_LEN(archs); i++)
    base_strbuf_printf(&list, "%s%s", i ? ", " : "", archs[i].name);
  fail(r, "architecture %s%.100s%s is not supported (supported: %s)", name ? "'" : "",
       name ? name : "(no 'architectures' entry)", name ? "'" : "", list.data);
  base_strbuf_free(&list);
}

static void read_rope_scaling(cfg_reader *r, rx_hf_config *c) {
  snprintf(c->rope_type, sizeof c->rope_type, "default");
  /* transformers 4 writes rope_scaling (and rope_theta beside it), transformers 5
   * rope_parameters (with rope_theta inside) */
  const char *what = key(r->root, "rope_scaling") ? "rope_scaling" : "rope_parameters";
  const cJSON *s = key(r->root, what);
  if (!s) return;
  if (!cJSON_IsObject(s)) {
    fail(r, "'%s' must be an object or null", what);
    return;
  }
  c->rope_theta = lim_num(r, s, HF_LIMIT_rope_theta, c->rope_theta);
  const char *t = str_key(s, "rope_type");
  if (!t) t = str_key(s, "type");
  if (!t) t = "default";
  if (strcmp(t, "default") && strcmp(t, "linear") && strcmp(t, "llama3")) {
    fail(r, "%s type '%.40s' is not supported (supported: default, linear, llama3)", what, t);
    return;
  }
  snprintf(c->rope_type, sizeof c->rope_type, "%s", t);
  if (!strcmp(t, "default")) return;
  c->rope_factor = num_key(r, s, "factor", 0, 1e-6, 1e6);
  if (c->rope_factor <= 0) fail(r, "%s.factor is missing: expected a positive number", what);
  if (!strcmp(t, "llama3")) {
    c->rope_low_freq = num_key(r, s, "low_freq_factor", 1, 1e-6, 1e6);
    c->rope_high_freq = num_key(r, s, "high_freq_factor", 4, 1e-6, 1e6);
    c->rope_original_max = int_key(r, s, "original_max_position_embeddings", 8192, 1, INT32_MAX);
    if (c->rope_high_freq <= c->rope_low_freq)
      fail(r, "%s: high_freq_factor %g must exceed low_freq_factor %g", what, c->rope_high_freq,
           c->rope_low_freq);
  }
}

/* eos_token_id: an integer or a list of them, each inside the vocabulary (once it is known). */
static void read_eos(cfg_reader *r, const cJSON *o, rx_hf_config *c) {
  const cJSON *e = key(o, "eos_token_id");
  if (!e) return;
  c->neos = 0;
  if (cJSON_IsNumber(e)) {
    c->eos[c->neos++] = int_key(r, o, "eos_token_id", -1, 0, INT32_MAX);
    if (!r->err && c->vocab > 0 && c->eos[0] >= c->vocab)
      fail(r,
           "eos_token_id %lld is outside the vocabulary of %lld tokens (ids 0 to %lld): "
           "generation would never stop at it",
           (long long)c->eos[0], (long long)c->vocab, (long long)c->vocab - 1);
    return;
  }
  const cJSON *it;
  int i = 0;
  cJSON_ArrayForEach(it, e) {
    if (!cJSON_IsNumber(it) || it->valuedouble < 0 || it->valuedouble > INT32_MAX) {
      fail(r, "'eos_token_id' must be a token id or a list of them");
      return;
    }
    if (c->vocab > 0 && it->valuedouble >= (double)c->vocab) {
      fail(r,
           "eos_token_id [%d] %.0f is outside the vocabulary of %lld tokens (ids 0 to %lld): "
           "generation would never stop at it",
           i, it->valuedouble, (long long)c->vocab, (long long)c->vocab - 1);
      return;
    }
    if (c->neos < (int)RX_ARRAY_LEN(c->eos)) c->eos[c->neos++] = (int64_t)it->valuedouble;
    i++;
  }
}

/* Keys that change the math the builder does not do, refused by name: a partial rotary
 * embedding, per-layer attention kinds other than full attention (a sliding window is read only
 * where the architecture has it, as one window for all layers). */
static void read_unimplemented(cfg_reader *r, const rx_hf_config *c) {
  double prf = num_key(r, r->root, "partial_rotary_factor", 1, 0, 1);
  if (!r->err && prf != 1)
    fail(r,
         "partial_rotary_factor %g is not supported (a rotary embedding over all of head_dim: 1)",
         prf);
  const cJSON *lt = key(r->root, "layer_types"), *it;
  int i = 0;
  cJSON_ArrayForEach(it, lt) {
    const char *t = cJSON_IsString(it) ? it->valuestring : "(not a string)";
    bool window = c->window > 0 && !strcmp(t, "sliding_attention");
    if (strcmp(t, "full_attention") && !window) {
      fail(r, "layer_types[%d] '%.40s' is not supported (supported: full_attention%s)", i, t,
           c->window > 0 ? ", sliding_attention" : "");
      return;
    }
    i++;
  }
}

static void read_keys(cfg_reader *r, rx_hf_config *c) {
  const cJSON *o = r->root;
  c->hidden = lim_int(r, o, HF_LIMIT_hidden, REQUIRED);
  c->intermediate = lim_int(r, o, HF_LIMIT_intermediate, REQUIRED);
  c->layers = lim_int(r, o, HF_LIMIT_layers, REQUIRED);
  c->heads = lim_int(r, o, HF_LIMIT_heads, REQUIRED);
  c->kv_heads = int_key(r, o, "num_key_value_heads", c->heads, 1, c->heads);
  c->vocab = lim_int(r, o, HF_LIMIT_vocab, REQUIRED);
  c->max_positions = lim_int(r, o, HF_LIMIT_max_positions, 2048);
  if (!r->err && !key(o, "head_dim") && c->hidden % c->heads)
    fail(r,
         "hidden_size %lld is not a multiple of num_attention_heads %lld, and head_dim (the "
         "size of a head) is not given",
         (long long)c->hidden, (long long)c->heads);
  c->head_dim = lim_int(r, o, HF_LIMIT_head_dim, c->heads ? c->hidden / c->heads : 0);
  c->rms_eps = lim_num(r, o, HF_LIMIT_rms_eps, c->rms_eps);
  c->rope_theta = lim_num(r, o, HF_LIMIT_rope_theta, 10000);
  c->tie_embeddings = bool_key(r, o, "tie_word_embeddings", false);
  if (r->err) return;
  if (c->heads % c->kv_heads)
    fail(r, "num_attention_heads %lld is not a multiple of num_key_value_heads %lld",
         (long long)c->heads, (long long)c->kv_heads);
  if (c->head_dim < 2 || c->head_dim % 2) /* head_dim defaults to hidden_size / heads */
    fail(r,
         "head_dim %lld (hidden_size %lld / num_attention_heads %lld unless given) must be even "
         "and at least 2 (rotary embedding)",
         (long long)c->head_dim, (long long)c->hidden, (long long)c->heads);
  const char *act = str_key(o, "hidden_act");
  if (act && strcmp(act, "silu"))
    fail(r, "hidden_act '%.40s' is not supported (supported: silu)", act);
  for (size_t i = 0; i < RX_ARRAY_LEN(archs); i++)
    if (archs[i].arch == c->arch) {
      c->qkv_bias = archs[i].bias || bool_key(r, o, "attention_bias", false);
      if (archs[i].window) c->window = lim_int(r, o, HF_LIMIT_window, 0);
    }
  if (c->arch == RX_HF_QWEN2 && bool_key(r, o, "use_sliding_window", false))
    fail(r, "use_sliding_window true is not supported for Qwen2 (its per-layer windows)");
  if (bool_key(r, o, "mlp_bias", false)) fail(r, "mlp_bias true is not supported");
  read_unimplemented(r, c);
  read_rope_scaling(r, c);
  const char *dt = str_key(o, "torch_dtype"); /* transformers 5: "dtype" */
  if (!dt) dt = str_key(o, "dtype");
  c->file_dtype = !dt                       ? RX_DTYPE_UNKNOWN
                  : !strcmp(dt, "float32")  ? RX_DTYPE_F32
                  : !strcmp(dt, "float16")  ? RX_DTYPE_F16
                  : !strcmp(dt, "bfloat16") ? RX_DTYPE_BF16
                                            : RX_DTYPE_UNKNOWN;
  c->bos = int_key(r, o, "bos_token_id", -1, 0, INT32_MAX);
  read_eos(r, o, c);
}

/* The line and column (from 1) of byte pos of text. */
static void line_col(const char *text, size_t pos, int *line, int *col) {
  *line = 1;
  *col = 1;
  for (size_t i = 0; i < pos; i++) {
    if (text[i] == '\n') {
      ++*line;
      *col = 1;
    } else if (((unsigned char)text[i] & 0xC0) != 0x80) { /* a character, not a UTF-8 tail */
      ++*col;
    }
  }
}

rx_status hf_json_object(const char *text, size_t len, const char *name, cJSON **out) {
  const char *end = NULL;
  *out = cJSON_ParseWithLengthOpts(text, len, &end, false);
  size_t pos = end && end >= text && end <= text + len ? (size_t)(end - text) : len;
  if (*out) { /* only white space may follow the value */
    while (pos < len && strchr(" \t\r\n", text[pos]) && text[pos]) pos++;
    if (pos < len) {
      cJSON_Delete(*out);
      *out = NULL;
    } else if (cJSON_IsObject(*out)) {
      return NULL;
    } else {
      cJSON_Delete(*out);
      *out = NULL;
      return base_status_make(RX_ERR_INVALID,
                              "%s: expected a JSON object ({...}), not another value", name);
    }
  }
  int line, col;
  line_col(text, pos, &line, &col);
  if (pos >= len)
    return base_status_make(RX_ERR_INVALID,
                            "%s:%d:%d: JSON syntax error: the text ends inside a value (expected a "
                            "JSON object)",
                            name, line, col);
  char near[24];
  size_t n = 0;
  for (size_t i = pos; i < len && n < 16 && text[i] != '\n' && text[i]; i++) near[n++] = text[i];
  near[n] = 0;
  return base_status_make(RX_ERR_INVALID,
                          "%s:%d:%d: JSON syntax error at '%s' (expected a JSON object)", name,
                          line, col, near);
}

rx_status hf_parse_config(const char *text, size_t len, const char *name, rx_hf_config *out) {
  memset(out, 0, sizeof *out);
  cJSON *root;
  RX_RETURN_IF_ERROR(hf_json_object(text, len, name, &root));
  cfg_reader r = {name, root, NULL};
  read_arch(&r, out);
  if (!r.err) read_keys(&r, out);
  cJSON_Delete(root);
  if (!r.err) r.err = hf_check_config(out, name, NULL);
  return r.err;
}

rx_status hf_parse_generation_config(const char *text, size_t len, const char *name,
                                     rx_hf_config *c) {
  cJSON *root;
  RX_RETURN_IF_ERROR(hf_json_object(text, len, name, &root));
  cfg_reader r = {name, root, NULL};
  read_eos(&r, root, c);
  cJSON_Delete(root);
  return r.err;
}

rx_status hf_read_config(const char *dir, rx_hf_config *out) {
  memset(out, 0, sizeof *out);
  char path[4096];
  snprintf(path, sizeof path, "%s/config.json", dir);
  char *text = NULL;
  size_t len = 0;
  RX_RETURN_IF_ERROR(base_read_file(path, &text, &len));
  rx_status s = hf_parse_config(text, len, path, out);
  free(text);
  if (s) return s;
  /* generation_config.json, when present, says which tokens end generation */
  snprintf(path, sizeof path, "%s/generation_config.json", dir);
  s = base_read_file(path, &text, &len);
  if (s && rx_status_code_of(s) == RX_ERR_NOT_FOUND) {
    rx_status_free(s);
    return NULL;
  }
  if (!s) s = hf_parse_generation_config(text, len, path, out);
  free(text);
  return s;
}
