/* frontends/hf/config.c: config.json (and generation_config.json) of a Hugging Face model folder.
 * Defaults are those of transformers' LlamaConfig, MistralConfig and Qwen2Config. */
#include "hf.h"

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

bool rx_hf_is_model_dir(const char *path) {
  struct stat st;
  if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode)) return false;
  char buf[4096];
  snprintf(buf, sizeof buf, "%s/config.json", path);
  return stat(buf, &st) == 0 && S_ISREG(st.st_mode);
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
  r->err = rx_status_make(RX_ERR_INVALID, "%s: %s", r->file, msg);
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
    rx_strbuf_printf(&list, "%s%s", i ? ", " : "", archs[i].name);
  fail(r, "architecture %s%.100s%s is not supported (supported: %s)", name ? "'" : "",
       name ? name : "(no 'architectures' entry)", name ? "'" : "", list.data);
  rx_strbuf_free(&list);
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
  c->rope_theta = num_key(r, s, "rope_theta", c->rope_theta, 1e-6, 1e12);
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

/* eos_token_id: an integer or a list of them. */
static void read_eos(cfg_reader *r, const cJSON *o, rx_hf_config *c) {
  const cJSON *e = key(o, "eos_token_id");
  if (!e) return;
  c->neos = 0;
  if (cJSON_IsNumber(e)) {
    c->eos[c->neos++] = int_key(r, o, "eos_token_id", -1, 0, INT32_MAX);
    return;
  }
  const cJSON *it;
  cJSON_ArrayForEach(it, e) {
    if (!cJSON_IsNumber(it) || it->valuedouble < 0 || it->valuedouble > INT32_MAX) {
      fail(r, "'eos_token_id' must be a token id or a list of them");
      return;
    }
    if (c->neos < (int)RX_ARRAY_LEN(c->eos)) c->eos[c->neos++] = (int64_t)it->valuedouble;
  }
}

static void read_keys(cfg_reader *r, rx_hf_config *c) {
  const cJSON *o = r->root;
  c->hidden = int_key(r, o, "hidden_size", REQUIRED, 1, 1 << 20);
  c->intermediate = int_key(r, o, "intermediate_size", REQUIRED, 1, 1 << 22);
  c->layers = int_key(r, o, "num_hidden_layers", REQUIRED, 1, 4096);
  c->heads = int_key(r, o, "num_attention_heads", REQUIRED, 1, 4096);
  c->kv_heads = int_key(r, o, "num_key_value_heads", c->heads, 1, c->heads);
  c->vocab = int_key(r, o, "vocab_size", REQUIRED, 1, INT32_MAX);
  c->max_positions = int_key(r, o, "max_position_embeddings", 2048, 1, INT32_MAX);
  c->head_dim = int_key(r, o, "head_dim", c->heads ? c->hidden / c->heads : 0, 1, 1024);
  c->rms_eps = num_key(r, o, "rms_norm_eps", c->rms_eps, 0, 1);
  c->rope_theta = num_key(r, o, "rope_theta", 10000, 1e-6, 1e12);
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
      if (archs[i].window) c->window = int_key(r, o, "sliding_window", 0, 0, INT32_MAX);
    }
  if (c->arch == RX_HF_QWEN2 && bool_key(r, o, "use_sliding_window", false))
    fail(r, "use_sliding_window true is not supported for Qwen2 (its per-layer windows)");
  if (bool_key(r, o, "mlp_bias", false)) fail(r, "mlp_bias true is not supported");
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

/* The text of a JSON object into *out (NULL: not an object, after a status naming name). */
static rx_status parse_object(const char *text, size_t len, const char *name, cJSON **out) {
  *out = cJSON_ParseWithLength(text, len);
  if (*out && cJSON_IsObject(*out)) return NULL;
  cJSON_Delete(*out);
  *out = NULL;
  return rx_status_make(RX_ERR_INVALID, "%s: expected a JSON object", name);
}

rx_status rx_hf_parse_config(const char *text, size_t len, const char *name, rx_hf_config *out) {
  memset(out, 0, sizeof *out);
  cJSON *root;
  RX_RETURN_IF_ERROR(parse_object(text, len, name, &root));
  cfg_reader r = {name, root, NULL};
  read_arch(&r, out);
  if (!r.err) read_keys(&r, out);
  cJSON_Delete(root);
  return r.err;
}

rx_status rx_hf_parse_generation_config(const char *text, size_t len, const char *name,
                                        rx_hf_config *c) {
  cJSON *root;
  RX_RETURN_IF_ERROR(parse_object(text, len, name, &root));
  cfg_reader r = {name, root, NULL};
  read_eos(&r, root, c);
  cJSON_Delete(root);
  return r.err;
}

rx_status rx_hf_read_config(const char *dir, rx_hf_config *out) {
  memset(out, 0, sizeof *out);
  char path[4096];
  snprintf(path, sizeof path, "%s/config.json", dir);
  char *text = NULL;
  size_t len = 0;
  RX_RETURN_IF_ERROR(rx_read_file(path, &text, &len));
  rx_status s = rx_hf_parse_config(text, len, path, out);
  free(text);
  if (s) return s;
  /* generation_config.json, when present, says which tokens end generation */
  snprintf(path, sizeof path, "%s/generation_config.json", dir);
  s = rx_read_file(path, &text, &len);
  if (s && rx_status_code_of(s) == RX_ERR_NOT_FOUND) {
    rx_status_free(s);
    return NULL;
  }
  if (!s) s = rx_hf_parse_generation_config(text, len, path, out);
  free(text);
  return s;
}
