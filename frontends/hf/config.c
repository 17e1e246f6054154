/* frontends/hf/config.c: config.json (and generation_config.json) of a Hugging Face model folder.
 * Defaults are those of transformers' configuration classes of each architecture (LlamaConfig,
 * MistralConfig, Qwen2Config, Qwen3Config, Gemma2Config, Gemma3TextConfig, Phi3Config,
 * MixtralConfig, Qwen2MoeConfig, Qwen3MoeConfig of transformers 5). */
#include "hf_int.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* The architectures as rows of one decoder's description (rx_hf_config), listed once:
 * X(enum, "architectures" entry, rms_norm_eps default, features (F_* below), head_dim default (0:
 * hidden_size / heads), rope_theta default, tie_word_embeddings default, the period of local
 * layers when config.json has no layer_types (0: none)). The keys of config.json then refine the
 * row (read_keys); a new architecture is a new row plus what is truly new in its math. */
#define RX_HF_ARCHS(X)                                                                             \
  X(RX_HF_LLAMA, "LlamaForCausalLM", 1e-6, 0, 0, 10000, false, 0)                                  \
  X(RX_HF_MISTRAL, "MistralForCausalLM", 1e-6, F_WINDOW, 0, 10000, false, 0)                       \
  X(RX_HF_QWEN2, "Qwen2ForCausalLM", 1e-6, F_BIAS | F_QWEN_WINDOW, 0, 10000, false, 0)             \
  X(RX_HF_QWEN3, "Qwen3ForCausalLM", 1e-6, F_QWEN_WINDOW | F_QK_NORM, 128, 10000, false, 0)        \
  X(RX_HF_GEMMA2, "Gemma2ForCausalLM", 1e-6, F_GEMMA | F_SOFTCAP, 256, 10000, true, 2)             \
  X(RX_HF_GEMMA3, "Gemma3ForCausalLM", 1e-6, F_GEMMA | F_QK_NORM | F_LOCAL_ROPE, 256, 1e6, true,   \
    6)                                                                                             \
  X(RX_HF_PHI3, "Phi3ForCausalLM", 1e-5, F_WINDOW | F_FUSED, 0, 10000, false, 0)                   \
  X(RX_HF_MIXTRAL, "MixtralForCausalLM", 1e-5, F_WINDOW | F_MOE, 0, 1e6, false, 0)                 \
  X(RX_HF_QWEN2_MOE, "Qwen2MoeForCausalLM", 1e-6, F_BIAS | F_MOE | F_MOE_QWEN | F_SHARED_EXPERT,   \
    0, 10000, false, 0)                                                                            \
  X(RX_HF_QWEN3_MOE, "Qwen3MoeForCausalLM", 1e-6, F_QK_NORM | F_MOE | F_MOE_QWEN, 128, 10000,      \
    false, 0)

/* The features of a row. */
enum {
  F_WINDOW = 1,      /* sliding_window on every layer (Mistral, Phi-3) */
  F_BIAS = 2,        /* q, k and v biases (Qwen2) */
  F_QWEN_WINDOW = 4, /* use_sliding_window: windows on the layers from max_window_layers on */
  F_QK_NORM = 8,     /* q_norm and k_norm per head */
  F_GEMMA = 16,      /* (1 + w) norms, the embedding times sqrt(hidden), sandwich norms,
                        hidden_activation, query_pre_attn_scalar, sliding_window on local layers */
  F_SOFTCAP = 32,    /* Gemma 2's defaults: attn_logit_softcapping 50, final_logit_softcapping 30 */
  F_LOCAL_ROPE = 64, /* Gemma 3: local layers' rope base (rope_local_base_freq, or
                        rope_parameters.sliding_attention) */
  F_FUSED = 128,     /* Phi-3: qkv_proj and gate_up_proj */
  F_MOE = 256,       /* a sparse mixture of experts (num_local_experts or num_experts,
                        num_experts_per_tok); Mixtral's names and renormalized top k */
  F_MOE_QWEN = 512,  /* Qwen's: mlp.gate and mlp.experts, moe_intermediate_size, norm_topk_prob,
                        decoder_sparse_step, mlp_only_layers; use_sliding_window as transformers 5
                        has it per architecture (read_windows) */
  F_SHARED_EXPERT = 1024 /* Qwen2-MoE: mlp.shared_expert, scaled by sigmoid(shared_expert_gate) */
};

typedef struct arch_row {
  rx_hf_arch arch;
  const char *name;
  double eps;
  unsigned features;
  int64_t head_dim;
  double theta;
  bool tie;
  int period;
} arch_row;

static const arch_row archs[] = {
#define RX_HF_ARCH_ROW_(e, n, eps, f, hd, th, tie, per) {e, n, eps, f, hd, th, tie, per},
    RX_HF_ARCHS(RX_HF_ARCH_ROW_)
#undef RX_HF_ARCH_ROW_
};

static const arch_row *row_of(rx_hf_arch a) {
  for (size_t i = 0; i < RX_ARRAY_LEN(archs); i++)
    if (archs[i].arch == a) return &archs[i];
  RX_ASSERT(!"an architecture without its row");
  return NULL;
}

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
  rx_status err;  /* the first error */
  bool text_part; /* a multimodal model's config.json: its text_config is read (text_root) */
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

/* Gemma3ForConditionalGeneration (gemma-3-4b/12b/27b-it): read as its text model, a
 * Gemma3ForCausalLM (the vision tower is not read: docs/llm.md). */
#define HF_GEMMA3_MM "Gemma3ForConditionalGeneration"

static void read_arch(cfg_reader *r, rx_hf_config *c) {
  const cJSON *a = key(r->root, "architectures");
  const cJSON *first = a && cJSON_IsArray(a) ? cJSON_GetArrayItem(a, 0) : NULL;
  const char *name = first && cJSON_IsString(first) ? first->valuestring : NULL;
  if (name && !strcmp(name, HF_GEMMA3_MM)) {
    c->arch = RX_HF_GEMMA3;
    c->arch_name = HF_GEMMA3_MM;
    c->rms_eps = row_of(RX_HF_GEMMA3)->eps;
    r->text_part = true;
    return;
  }
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
  fail(r,
       "architecture %s%.100s%s is not supported (supported: %s) (and %s, read as its text "
       "model)",
       name ? "'" : "", name ? name : "(no 'architectures' entry)", name ? "'" : "", list.data,
       HF_GEMMA3_MM);
  base_strbuf_free(&list);
}

/* The rotary dims of partial_rotary_factor prf (Phi-4-mini's 0.75): head_dim * prf truncated, as
 * transformers takes it; they must be an even number of at least 2. */
static void set_rotary(cfg_reader *r, rx_hf_config *c, double prf) {
  int64_t rd = (int64_t)((double)c->head_dim * prf);
  if (!r->err && (rd < 2 || rd % 2))
    fail(r,
         "partial_rotary_factor %g gives %lld rotary dims of head_dim %lld: expected an even "
         "number, at least 2",
         prf, (long long)rd, (long long)c->head_dim);
  c->rotary_dim = rd;
}

/* longrope (Phi-3's "su"): short_factor and long_factor, a number per rotary pair, and the
 * attention factor transformers derives (_compute_longrope_parameters). */
static void read_longrope(cfg_reader *r, const cJSON *s, const char *what, rx_hf_config *c) {
  c->rope_original_max = int_key(r, s, "original_max_position_embeddings", 0, 1, INT32_MAX);
  if (!c->rope_original_max)
    c->rope_original_max =
        int_key(r, r->root, "original_max_position_embeddings", REQUIRED, 1, INT32_MAX);
  if (r->err) return;
  const char *names[2] = {"short_factor", "long_factor"};
  float *dst[2] = {c->rope_short, c->rope_long};
  int64_t half = (c->rotary_dim ? c->rotary_dim : c->head_dim) / 2;
  for (int k = 0; k < 2; k++) {
    const cJSON *v = key(s, names[k]), *it;
    if (!v || !cJSON_IsArray(v) || cJSON_GetArraySize(v) != half) {
      fail(r, "%s.%s must be a list of %lld numbers (one per rotary pair of the %lld rotary dims)",
           what, names[k], (long long)half, (long long)(2 * half));
      return;
    }
    int i = 0;
    cJSON_ArrayForEach(it, v) {
      if (!cJSON_IsNumber(it) || !(it->valuedouble > 0 && it->valuedouble < 1e6)) {
        fail(r, "%s.%s[%d] must be a positive number", what, names[k], i);
        return;
      }
      dst[k][i++] = (float)it->valuedouble;
    }
  }
  double factor = num_key(r, s, "factor", 0, 1e-6, 1e6);
  if (factor <= 0) factor = (double)c->max_positions / (double)c->rope_original_max;
  double def = factor <= 1 ? 1 : sqrt(1 + log(factor) / log((double)c->rope_original_max));
  c->rope_attn_factor = num_key(r, s, "attention_factor", def, 1e-6, 1e6);
}

/* yarn: factor, original_max_position_embeddings, beta_fast and beta_slow, truncate, and the
 * attention factor transformers derives from mscale and mscale_all_dim
 * (_compute_yarn_parameters). */
static void read_yarn(cfg_reader *r, const cJSON *s, rx_hf_config *c) {
  c->rope_original_max = int_key(r, s, "original_max_position_embeddings", 0, 1, INT32_MAX);
  if (!c->rope_original_max)
    c->rope_original_max =
        int_key(r, r->root, "original_max_position_embeddings", c->max_positions, 1, INT32_MAX);
  c->rope_factor = num_key(r, s, "factor", 0, 1e-6, 1e6);
  if (c->rope_factor <= 0) c->rope_factor = (double)c->max_positions / (double)c->rope_original_max;
  c->rope_beta_fast = num_key(r, s, "beta_fast", 32, 1e-6, 1e6);
  c->rope_beta_slow = num_key(r, s, "beta_slow", 1, 1e-6, 1e6);
  c->rope_truncate = bool_key(r, s, "truncate", true);
  double f = c->rope_factor, ms = num_key(r, s, "mscale", 0, 0, 1e6),
         all = num_key(r, s, "mscale_all_dim", 0, 0, 1e6);
#define HF_YARN_MSCALE(m) (f <= 1 ? 1.0 : 0.1 * (m)*log(f) + 1.0)
  double def = ms > 0 && all > 0 ? HF_YARN_MSCALE(ms) / HF_YARN_MSCALE(all) : HF_YARN_MSCALE(1);
#undef HF_YARN_MSCALE
  c->rope_attn_factor = num_key(r, s, "attention_factor", def, 1e-6, 1e6);
}

/* rope_scaling (transformers 4, with rope_theta beside it) or rope_parameters (transformers 5,
 * with rope_theta inside; Gemma 3's holds one object per layer kind). */
static void read_rope_scaling(cfg_reader *r, rx_hf_config *c) {
  snprintf(c->rope_type, sizeof c->rope_type, "default");
  const char *what = key(r->root, "rope_scaling") ? "rope_scaling" : "rope_parameters";
  const cJSON *s = key(r->root, what);
  bool local_rope = row_of(c->arch)->features & F_LOCAL_ROPE;
  if (local_rope)
    c->rope_local_theta = num_key(r, r->root, "rope_local_base_freq", 10000, 1e-6, 1e12);
  if (!s) return;
  if (!cJSON_IsObject(s)) {
    fail(r, "'%s' must be an object or null", what);
    return;
  }
  const cJSON *local = key(s, "sliding_attention");
  if (local_rope && (local || key(s, "full_attention"))) { /* per layer kind */
    if (local) {
      const char *lt = str_key(local, "rope_type");
      if (lt && strcmp(lt, "default"))
        fail(r, "%s.sliding_attention type '%.40s' is not supported (supported: default)", what,
             lt);
      c->rope_local_theta = lim_num(r, local, HF_LIMIT_rope_theta, c->rope_local_theta);
    }
    what = "rope_parameters.full_attention";
    s = key(s, "full_attention");
    if (!s) return;
  }
  c->rope_theta = lim_num(r, s, HF_LIMIT_rope_theta, c->rope_theta);
  if (key(s, "partial_rotary_factor"))
    set_rotary(r, c, num_key(r, s, "partial_rotary_factor", 1, 0, 1));
  const char *t = str_key(s, "rope_type");
  if (!t) t = str_key(s, "type");
  if (!t) t = "default";
  /* Phi3Config reads "su" and "yarn" as longrope (its backward compatibility) */
  if (!strcmp(t, "su") || (c->arch == RX_HF_PHI3 && !strcmp(t, "yarn"))) t = "longrope";
  if (strcmp(t, "default") && strcmp(t, "linear") && strcmp(t, "llama3") && strcmp(t, "longrope") &&
      strcmp(t, "yarn")) {
    fail(r, "%s type '%.40s' is not supported (supported: default, linear, llama3, longrope, yarn)",
         what, t);
    return;
  }
  snprintf(c->rope_type, sizeof c->rope_type, "%s", t);
  if (!strcmp(t, "default")) return;
  if (!strcmp(t, "longrope")) {
    read_longrope(r, s, what, c);
    return;
  }
  if (!strcmp(t, "yarn")) {
    read_yarn(r, s, c);
    return;
  }
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

/* The attention kind of every layer: the row's window rule (every layer: Mistral, Phi-3; from
 * max_window_layers on with use_sliding_window: Qwen2, Qwen3; every layer but each period-th:
 * Gemma 2, Gemma 3 with sliding_window_pattern), then layer_types where config.json has it (as
 * transformers 5 writes it). A sliding layer of an architecture without windows is refused. */
static void read_windows(cfg_reader *r, rx_hf_config *c, const arch_row *row) {
  const cJSON *o = r->root;
  if (row->features & F_WINDOW) c->window = lim_int(r, o, HF_LIMIT_window, 0);
  if (row->features & F_QWEN_WINDOW && bool_key(r, o, "use_sliding_window", false)) {
    c->window = lim_int(r, o, HF_LIMIT_window, 4096);
    int64_t from = int_key(r, o, "max_window_layers", 28, 0, INT32_MAX);
    c->layer_kinds = true;
    for (int64_t l = 0; l < c->layers; l++) c->local[l] = l >= from;
  }
  if (row->features & F_MOE_QWEN && bool_key(r, o, "use_sliding_window", false)) {
    /* transformers 5: Qwen3-MoE windows every layer; Qwen2-MoE the layers l < max_window_layers
     * with l + 1 odd (Qwen2MoeConfig's layer_types) */
    c->window = lim_int(r, o, HF_LIMIT_window, 4096);
    int64_t below = int_key(r, o, "max_window_layers", 28, 0, INT32_MAX);
    c->layer_kinds = true;
    for (int64_t l = 0; l < c->layers; l++)
      c->local[l] = c->arch == RX_HF_QWEN3_MOE || ((l + 1) % 2 && l < below);
  }
  if (row->features & F_GEMMA) {
    c->window = lim_int(r, o, HF_LIMIT_window, 4096);
    int64_t period = row->period;
    if (row->features & F_LOCAL_ROPE)
      period = int_key(r, o, "sliding_window_pattern", period, 1, INT32_MAX);
    c->layer_kinds = true;
    for (int64_t l = 0; l < c->layers; l++) c->local[l] = (l + 1) % period != 0;
  }
  const cJSON *lt = key(o, "layer_types"), *it;
  if (!lt) return;
  if (!cJSON_IsArray(lt) || cJSON_GetArraySize(lt) != c->layers) {
    fail(r, "'layer_types' must be a list of num_hidden_layers (%lld) layer kinds",
         (long long)c->layers);
    return;
  }
  bool can = row->features & (F_WINDOW | F_QWEN_WINDOW | F_GEMMA | F_MOE_QWEN);
  int i = 0;
  cJSON_ArrayForEach(it, lt) {
    const char *t = cJSON_IsString(it) ? it->valuestring : "(not a string)";
    bool sliding = !strcmp(t, "sliding_attention");
    if (strcmp(t, "full_attention") && !(sliding && can)) {
      fail(r, "layer_types[%d] '%.40s' is not supported (supported: full_attention%s)", i, t,
           can ? ", sliding_attention" : "");
      return;
    }
    c->local[i++] = sliding;
  }
  c->layer_kinds = true;
}

/* The activation: hidden_act, or Gemma's hidden_activation. */
static void read_act(cfg_reader *r, rx_hf_config *c, const arch_row *row) {
  const char *k = row->features & F_GEMMA ? "hidden_activation" : "hidden_act";
  const char *act = str_key(r->root, k);
  if (!act) act = row->features & F_GEMMA ? "gelu_pytorch_tanh" : "silu";
  if (!strcmp(act, "silu")) {
    c->act = RX_HF_ACT_SILU;
  } else if (!strcmp(act, "gelu_pytorch_tanh")) {
    c->act = RX_HF_ACT_GELU_TANH;
  } else {
    fail(r, "%s '%.40s' is not supported (supported: silu, gelu_pytorch_tanh)", k, act);
  }
}

/* The sparse layers' description: experts, k, the expert's intermediate size, the shared
 * expert, renormalization, and which layers are sparse (Qwen: not in mlp_only_layers, and
 * (l + 1) % decoder_sparse_step == 0). router_jitter_noise only acts in training. */
static void read_moe(cfg_reader *r, rx_hf_config *c, const arch_row *row) {
  const cJSON *o = r->root;
  bool qwen = row->features & F_MOE_QWEN;
  /* Qwen2-MoE's config class writes num_experts, Qwen3-MoE's num_local_experts (its
   * attribute_map), published Qwen3-MoE configs num_experts */
  const char *ek = key(o, "num_experts") ? "num_experts" : "num_local_experts";
  c->experts = int_key(r, o, ek, qwen ? REQUIRED : 8, 1, HF_MAX_EXPERTS);
  c->top_k = int_key(r, o, "num_experts_per_tok", qwen ? REQUIRED : 2, 1, HF_MAX_EXPERTS);
  if (!r->err && c->top_k > c->experts)
    fail(r, "num_experts_per_tok %lld exceeds the %lld experts (%s)", (long long)c->top_k,
         (long long)c->experts, ek);
  c->moe_names = qwen ? RX_HF_MOE_QWEN : RX_HF_MOE_MIXTRAL;
  c->moe_inter =
      qwen ? int_key(r, o, "moe_intermediate_size", REQUIRED, 1, 1 << 22) : c->intermediate;
  if (row->features & F_SHARED_EXPERT)
    c->shared_inter = int_key(r, o, "shared_expert_intermediate_size", REQUIRED, 1, 1 << 22);
  c->norm_topk = !qwen || bool_key(r, o, "norm_topk_prob", false);
  int64_t step = qwen ? int_key(r, o, "decoder_sparse_step", 1, 1, INT32_MAX) : 1;
  for (int64_t l = 0; l < c->layers; l++) c->sparse[l] = (l + 1) % step == 0;
  const cJSON *only = qwen ? key(o, "mlp_only_layers") : NULL, *it;
  if (only && !cJSON_IsArray(only)) fail(r, "'mlp_only_layers' must be a list of layer indices");
  int i = 0;
  cJSON_ArrayForEach(it, only) {
    if (!cJSON_IsNumber(it) || it->valuedouble != floor(it->valuedouble) || it->valuedouble < 0 ||
        it->valuedouble >= (double)c->layers) {
      fail(r, "mlp_only_layers[%d] must be a layer index from 0 to %lld", i,
           (long long)c->layers - 1);
      return;
    }
    c->sparse[(int64_t)it->valuedouble] = 0;
    i++;
  }
}

/* The row's features as the description's fields, with the keys that refine them. */
static void read_features(cfg_reader *r, rx_hf_config *c, const arch_row *row) {
  const cJSON *o = r->root;
  /* Qwen2MoeConfig's qkv_bias (default true) */
  c->qkv_bias = ((row->features & F_BIAS) && bool_key(r, o, "qkv_bias", true)) ||
                bool_key(r, o, "attention_bias", false);
  c->qk_norm = row->features & F_QK_NORM;
  c->fused_qkv = c->fused_gate_up = row->features & F_FUSED;
  if (row->features & F_GEMMA) {
    c->norm_offset = 1;
    c->embed_scale = c->sandwich = true;
    c->attn_scale = 1 / sqrt(num_key(r, o, "query_pre_attn_scalar", 256, 1e-6, 1e12));
    bool cap = row->features & F_SOFTCAP;
    c->attn_softcap = num_key(r, o, "attn_logit_softcapping", cap ? 50 : 0, 1e-6, 1e12);
    c->final_softcap = num_key(r, o, "final_logit_softcapping", cap ? 30 : 0, 1e-6, 1e12);
    if (bool_key(r, o, "use_bidirectional_attention", false))
      fail(r, "use_bidirectional_attention true is not supported (a causal decoder)");
  }
  read_act(r, c, row);
  read_windows(r, c, row);
  if (row->features & F_MOE) read_moe(r, c, row);
  if (bool_key(r, o, "mlp_bias", false)) fail(r, "mlp_bias true is not supported");
  set_rotary(r, c, num_key(r, o, "partial_rotary_factor", 1, 0, 1));
}

static void read_keys(cfg_reader *r, rx_hf_config *c) {
  const cJSON *o = r->root;
  const arch_row *row = row_of(c->arch);
  c->hidden = lim_int(r, o, HF_LIMIT_hidden, REQUIRED);
  c->intermediate = lim_int(r, o, HF_LIMIT_intermediate, REQUIRED);
  c->layers = lim_int(r, o, HF_LIMIT_layers, REQUIRED);
  c->heads = lim_int(r, o, HF_LIMIT_heads, REQUIRED);
  c->kv_heads = int_key(r, o, "num_key_value_heads", c->heads, 1, c->heads);
  c->vocab = lim_int(r, o, HF_LIMIT_vocab, REQUIRED);
  c->max_positions = lim_int(r, o, HF_LIMIT_max_positions, 2048);
  if (!r->err && !key(o, "head_dim") && !row->head_dim && c->hidden % c->heads)
    fail(r,
         "hidden_size %lld is not a multiple of num_attention_heads %lld, and head_dim (the "
         "size of a head) is not given",
         (long long)c->hidden, (long long)c->heads);
  c->head_dim = lim_int(r, o, HF_LIMIT_head_dim,
                        row->head_dim ? row->head_dim
                        : c->heads    ? c->hidden / c->heads
                                      : 0);
  c->rms_eps = lim_num(r, o, HF_LIMIT_rms_eps, c->rms_eps);
  c->rope_theta = lim_num(r, o, HF_LIMIT_rope_theta, row->theta);
  c->tie_embeddings = bool_key(r, o, "tie_word_embeddings", row->tie);
  if (r->err) return;
  if (c->heads % c->kv_heads)
    fail(r, "num_attention_heads %lld is not a multiple of num_key_value_heads %lld",
         (long long)c->heads, (long long)c->kv_heads);
  if (c->head_dim < 2 || c->head_dim % 2) /* head_dim defaults to hidden_size / heads */
    fail(r,
         "head_dim %lld (hidden_size %lld / num_attention_heads %lld unless given) must be even "
         "and at least 2 (rotary embedding)",
         (long long)c->head_dim, (long long)c->hidden, (long long)c->heads);
  read_features(r, c, row);
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

/* A multimodal config.json's text_config as the root to read: a copy where the keys the hub's
 * files leave out (transformers saves a sub-config's keys that differ from its class's
 * defaults) hold Gemma3TextConfig's defaults, and the special ids and dtype of the outer config
 * when the text_config has none. NULL after fail(). */
static cJSON *text_root(cfg_reader *r) {
  const cJSON *t = key(r->root, "text_config");
  if (!t || !cJSON_IsObject(t)) {
    fail(r,
         "'text_config' is missing or not an object: expected the text model's configuration "
         "(%s)",
         HF_GEMMA3_MM);
    return NULL;
  }
  cJSON *c = cJSON_Duplicate(t, true);
  static const struct {
    const char *k;
    double v;
  } defaults[] = {{"hidden_size", 2304},
                  {"intermediate_size", 9216},
                  {"num_hidden_layers", 26},
                  {"num_attention_heads", 8},
                  {"num_key_value_heads", 4},
                  {"vocab_size", 262208},
                  {"max_position_embeddings", 131072}};
  for (size_t i = 0; c && i < RX_ARRAY_LEN(defaults); i++)
    if (!cJSON_HasObjectItem(c, defaults[i].k))
      cJSON_AddNumberToObject(c, defaults[i].k, defaults[i].v);
  const char *outer[] = {"eos_token_id", "bos_token_id", "torch_dtype", "dtype",
                         "tie_word_embeddings"};
  for (size_t i = 0; c && i < RX_ARRAY_LEN(outer); i++)
    if (!key(c, outer[i]) && key(r->root, outer[i]))
      cJSON_AddItemToObject(c, outer[i], cJSON_Duplicate(key(r->root, outer[i]), true));
  return c;
}

rx_status hf_parse_config(const char *text, size_t len, const char *name, rx_hf_config *out) {
  memset(out, 0, sizeof *out);
  cJSON *root, *text_part = NULL;
  RX_RETURN_IF_ERROR(hf_json_object(text, len, name, &root));
  cfg_reader r = {name, root, NULL, false};
  read_arch(&r, out);
  if (!r.err && r.text_part && (text_part = text_root(&r))) r.root = text_part;
  if (!r.err) read_keys(&r, out);
  if (!r.err) r.err = hf_read_quant_config(root, name, out);
  if (!r.err && out->quantized && out->experts)
    r.err = base_status_make(RX_ERR_UNSUPPORTED,
                             "%s: 'quantization_config' (%s) of a mixture of experts: quantized "
                             "experts come only from --quantize of a dense checkpoint",
                             name, out->qmethod);
  cJSON_Delete(text_part);
  cJSON_Delete(root);
  if (!r.err) r.err = hf_check_config(out, name, NULL);
  return r.err;
}

rx_status hf_parse_generation_config(const char *text, size_t len, const char *name,
                                     rx_hf_config *c) {
  cJSON *root;
  RX_RETURN_IF_ERROR(hf_json_object(text, len, name, &root));
  cfg_reader r = {name, root, NULL, false};
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
