/* frontends/gguf/model.c: a GGUF file (llama.cpp's format, gguf.c reads it) as the model
 * description the Llama builder of frontends/hf/llama.c takes (docs/gguf.md): the hyperparameters
 * from the architecture's metadata keys into an rx_hf_config, the tensors by llama.cpp's names, and
 * the tokenizer of tokenizer.ggml.* rewritten as the tokenizer.json that runtime/llm reads.
 *
 * Architectures: "llama" (Mixtral too: llama with experts), "qwen2", "qwen3", "qwen2moe",
 * "qwen3moe", "gemma2", "gemma3", "phi3" (GGUF_ARCHS: each a row of the one description). Keys
 * (ARCH = the architecture's name): ARCH.embedding_length, .feed_forward_length, .block_count,
 * .attention.head_count (required), .attention.head_count_kv (default: head_count),
 * .attention.key_length (default: embedding / heads), .attention.layer_norm_rms_epsilon (required),
 * .rope.freq_base (default 10000), .context_length (required), .vocab_size (default: token_embd's
 * rows), each within the bounds of hf_int.h's HF_LIMITS (hf_check_config, shared with config.json);
 * then each architecture's (read_features, read_rope, read_windows): soft-caps, attention.scale,
 *   attention.sliding_window(_pattern), rope.freq_base_swa, rope.dimension_count (partial rotary,
 *   not for llama), rope.scaling.* (none, linear, yarn), Phi-3's longrope tensors; a mixture of
 *   experts' (read_moe: expert_count, expert_used_count, expert_feed_forward_length,
 *   expert_shared_feed_forward_length; its stacked tensors: experts.c). The keys of
 * UNIMPLEMENTED (experts outside llama and Qwen's MoE, scales, soft-caps outside Gemma) are
 * refused by name (docs/gguf.md). */
#include "gguf.h"

#include "../hf/hf_int.h"

#include <math.h>
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
  gguf_free(&g->f);
  base_unmap_file(&g->map);
  free(g->path);
  free(g);
}

bool gguf_hf_is_gguf(const char *path) {
  FILE *fp = fopen(path, "rb");
  if (!fp) return false;
  char magic[4];
  size_t n = fread(magic, 1, sizeof magic, fp);
  fclose(fp);
  return gguf_is_gguf(magic, n);
}

/* An integer key, or def when absent (def < 0: required); its bounds are hf_check_config's. */
static rx_status get_int(const rx_gguf_file *f, const char *arch, const char *key, int64_t def,
                         int64_t *out) {
  char full[128];
  snprintf(full, sizeof full, "%s.%s", arch, key);
  if (def >= 0 && !gguf_find(f, full)) {
    *out = def;
    return NULL;
  }
  uint32_t v;
  RX_RETURN_IF_ERROR(gguf_get_u32(f, full, &v));
  *out = v;
  return NULL;
}

static rx_status get_float(const rx_gguf_file *f, const char *arch, const char *key, double def,
                           double *out) {
  char full[128];
  snprintf(full, sizeof full, "%s.%s", arch, key);
  if (def >= 0 && !gguf_find(f, full)) {
    *out = def;
    return NULL;
  }
  float v;
  RX_RETURN_IF_ERROR(gguf_get_f32(f, full, &v));
  *out = v;
  return NULL;
}

/* A number of any GGUF numeric type (integers, floats, bool), or NAN for another type. */
static double number_of(const rx_gguf_value *v) {
  switch (v->type) {
  case RX_GGUF_V_UINT8:
  case RX_GGUF_V_UINT16:
  case RX_GGUF_V_UINT32:
  case RX_GGUF_V_UINT64:
  case RX_GGUF_V_BOOL:
    return (double)v->v.u;
  case RX_GGUF_V_INT8:
  case RX_GGUF_V_INT16:
  case RX_GGUF_V_INT32:
  case RX_GGUF_V_INT64:
    return (double)v->v.i;
  case RX_GGUF_V_FLOAT32:
  case RX_GGUF_V_FLOAT64:
    return v->v.f;
  default:
    return NAN;
  }
}

/* The architectures, as rows of the one decoder description (rx_hf_config) the builder of
 * frontends/hf/llama.c takes: X(general.architecture, enum, features (A_* below), the soft-caps'
 * defaults (llama.cpp's hparams: Gemma 2's 50 and 30), the default sliding_window_pattern (0:
 * every layer), the block count llama.cpp takes for the 27B model of Gemma 2 and 3 (its
 * attention scale is 1/sqrt(embedding / heads), the others' 1/sqrt(head dim))). */
#define GGUF_ARCHS(X)                                                                              \
  X("llama", RX_HF_LLAMA, A_PERMUTED | A_EXPERTS, 0, 0, 0, 0)                                      \
  X("qwen2", RX_HF_QWEN2, A_BIAS, 0, 0, 0, 0)                                                      \
  X("qwen3", RX_HF_QWEN3, A_QK_NORM, 0, 0, 0, 0)                                                   \
  X("qwen2moe", RX_HF_QWEN2_MOE, A_BIAS | A_EXPERTS | A_MOE | A_SHEXP | A_RAW_TOPK, 0, 0, 0, 0)    \
  X("qwen3moe", RX_HF_QWEN3_MOE, A_QK_NORM | A_EXPERTS | A_MOE, 0, 0, 0, 0)                        \
  X("gemma2", RX_HF_GEMMA2, A_GEMMA, 50, 30, 2, 46)                                                \
  X("gemma3", RX_HF_GEMMA3, A_GEMMA | A_QK_NORM | A_LOCAL_ROPE, 0, 0, 6, 62)                       \
  X("phi3", RX_HF_PHI3, A_PHI3, 0, 0, 0, 0)

enum {
  A_PERMUTED = 1,    /* the converter permuted attn_q/attn_k rows (interleaved rope): no partial
                        rotary embedding */
  A_BIAS = 2,        /* attn_q/k/v biases */
  A_QK_NORM = 4,     /* attn_q_norm, attn_k_norm per head */
  A_GEMMA = 8,       /* norms stored as 1 + w by the converter, the embedding times sqrt(hidden),
                        post_attention_norm and post_ffw_norm, GeGLU, soft-caps */
  A_LOCAL_ROPE = 16, /* local layers' own rope base (rope.freq_base_swa, default 10000) */
  A_PHI3 = 32,       /* ffn_up holds gate and up rows; attn_qkv the q, k and v rows */
  A_EXPERTS = 64,    /* a sparse mixture of experts when ARCH.expert_count > 0 (llama: Mixtral) */
  A_MOE = 128,       /* always one: ARCH.expert_count and expert_used_count required */
  A_SHEXP = 256,     /* Qwen2-MoE's shared expert (ffn_*_shexp, its gate ffn_gate_inp_shexp) */
  A_RAW_TOPK = 512   /* the k router probabilities not renormalized (llama.cpp's norm_w false) */
};

typedef struct gguf_arch {
  const char *name;
  rx_hf_arch arch;
  unsigned features;
  double attn_softcap, final_softcap;
  int64_t period, layers_27b;
} gguf_arch;

static const gguf_arch ARCHS[] = {
#define GGUF_ARCH_ROW_(n, e, f, sa, sf, p, l27) {n, e, f, sa, sf, p, l27},
    GGUF_ARCHS(GGUF_ARCH_ROW_)
#undef GGUF_ARCH_ROW_
};

/* Keys of llama.cpp's architectures that change the math the builder does not do: present with
 * another value than the neutral one, the file is refused by the key's name. The soft-caps are
 * Gemma's (read there, refused elsewhere). */
static const struct {
  const char *key; /* after "ARCH." */
  double neutral;
  const char *what;
  unsigned impl; /* implemented for the architectures with one of these features (0: none) */
} UNIMPLEMENTED[] = {
    {"expert_count", 0, "mixture of experts", A_EXPERTS},
    {"expert_used_count", 0, "mixture of experts", A_EXPERTS},
    {"expert_gating_func", 1, "expert gating other than softmax (1)", 0},
    {"expert_weights_scale", 1, "scaled expert weights", 0},
    {"expert_shared_count", 0, "shared experts", A_SHEXP},
    {"attention.clamp_kqv", 0, "clamped q, k, v", 0},
    {"attn_logit_softcapping", 0, "attention logit soft-capping", A_GEMMA},
    {"final_logit_softcapping", 0, "final logit soft-capping", A_GEMMA},
    {"logit_scale", 1, "scaled output logits", 0},
    {"embedding_scale", 1, "scaled embeddings", 0},
    {"residual_scale", 1, "scaled residuals", 0},
    {"rope.scaling.yarn_log_multiplier", 0, "yarn's log multiplier (DeepSeek's mscale)", 0},
};

static rx_status refuse_unimplemented(const rx_gguf_file *f, const gguf_arch *a) {
  char key[128];
  for (size_t i = 0; i < RX_ARRAY_LEN(UNIMPLEMENTED); i++) {
    if (UNIMPLEMENTED[i].impl & a->features) continue;
    snprintf(key, sizeof key, "%s.%s", a->name, UNIMPLEMENTED[i].key);
    const rx_gguf_kv *kv = gguf_find(f, key);
    if (!kv) continue;
    double v = number_of(&kv->value), neutral = UNIMPLEMENTED[i].neutral;
    if (v == neutral) continue;
    return base_status_make(RX_ERR_UNSUPPORTED, "%s: '%s' %g is not supported (%s; expected %g)",
                            f->name, key, v, UNIMPLEMENTED[i].what, neutral);
  }
  return NULL;
}

/* A float key within [lo, hi], def when absent. */
static rx_status get_float_in(const rx_gguf_file *f, const char *arch, const char *key, double def,
                              double lo, double hi, double *out) {
  RX_RETURN_IF_ERROR(get_float(f, arch, key, def, out));
  if (*out >= lo && *out <= hi) return NULL;
  return base_status_make(RX_ERR_INVALID, "%s: '%s.%s' is %g: expected a number from %g to %g",
                          f->name, arch, key, *out, lo, hi);
}

/* Phi-3's longrope: rope_factors_short.weight and rope_factors_long.weight (f32, a factor per
 * rotary pair, as the converter writes short_factor and long_factor), the original context
 * (rope.scaling.original_context_length) below which the short factors apply, and the factor
 * of cos and sin (rope.scaling.attn_factor; default transformers' sqrt(1 + ln(s) / ln(orig)) of
 * s = context_length / orig). */
static rx_status read_longrope(const rx_gguf_file *f, const char *arch, rx_hf_config *c) {
  const char *names[2] = {"rope_factors_short.weight", "rope_factors_long.weight"};
  float *dst[2] = {c->rope_short, c->rope_long};
  int64_t half = (c->rotary_dim ? c->rotary_dim : c->head_dim) / 2;
  for (int k = 0; k < 2; k++) {
    const rx_gguf_tensor *t = gguf_find_tensor(f, names[k]);
    if (!t || t->type != RX_GGUF_TYPE_F32 || t->ndim != 1 || t->elems != half)
      return base_status_make(RX_ERR_INVALID,
                              "%s: tensor '%s' is %s: expected f32 [%lld] (longrope: a factor per "
                              "rotary pair, with '%s')",
                              f->name, names[k], t ? "of another type or shape" : "missing",
                              (long long)half, names[1 - k]);
    for (int64_t i = 0; i < half; i++) {
      memcpy(&dst[k][i], f->data + t->offset + (size_t)i * sizeof(float), sizeof(float));
      if (!(dst[k][i] > 0 && dst[k][i] < 1e6))
        return base_status_make(RX_ERR_INVALID,
                                "%s: tensor '%s' [%lld] is %g: expected a positive factor below "
                                "1e6",
                                f->name, names[k], (long long)i, dst[k][i]);
    }
  }
  snprintf(c->rope_type, sizeof c->rope_type, "longrope");
  int64_t orig;
  RX_RETURN_IF_ERROR(get_int(f, arch, "rope.scaling.original_context_length", -1, &orig));
  if (orig < 1)
    return base_status_make(RX_ERR_INVALID,
                            "%s: '%s.rope.scaling.original_context_length' is 0: expected the "
                            "positive context of the short factors",
                            f->name, arch);
  c->rope_original_max = orig;
  double s = (double)c->max_positions / (double)orig;
  double def = s <= 1 ? 1 : sqrt(1 + log(s) / log((double)orig));
  return get_float_in(f, arch, "rope.scaling.attn_factor", def, 1e-6, 1e6, &c->rope_attn_factor);
}

/* yarn (rope.scaling.type "yarn"): the factor, the original context (default context_length),
 * yarn_beta_fast and yarn_beta_slow (llama.cpp's defaults 32 and 1), corrections floored and
 * ceiled as ggml_rope_yarn_corr_dims does, cos and sin times yarn_attn_factor (default 1) times
 * 1 + 0.1 ln(factor) (ggml's mscale, transformers' default attention factor). */
static rx_status read_yarn(const rx_gguf_file *f, const char *arch, double factor,
                           rx_hf_config *c) {
  snprintf(c->rope_type, sizeof c->rope_type, "yarn");
  c->rope_factor = factor;
  RX_RETURN_IF_ERROR(get_int(f, arch, "rope.scaling.original_context_length", c->max_positions,
                             &c->rope_original_max));
  if (c->rope_original_max < 1) c->rope_original_max = c->max_positions;
  RX_RETURN_IF_ERROR(
      get_float_in(f, arch, "rope.scaling.yarn_beta_fast", 32, 1e-6, 1e6, &c->rope_beta_fast));
  RX_RETURN_IF_ERROR(
      get_float_in(f, arch, "rope.scaling.yarn_beta_slow", 1, 1e-6, 1e6, &c->rope_beta_slow));
  c->rope_truncate = true;
  double attn;
  RX_RETURN_IF_ERROR(get_float_in(f, arch, "rope.scaling.yarn_attn_factor", 1, 1e-6, 1e6, &attn));
  c->rope_attn_factor = attn * (factor <= 1 ? 1.0 : 0.1 * log(factor) + 1.0);
  return NULL;
}

/* The rotary embedding: ARCH.rope.dimension_count (default the head dim) leading dims of each
 * head (a partial rotary embedding: not for "llama", whose rows the converter permuted per whole
 * head); ARCH.rope.scaling.type none, linear or yarn (llama.cpp takes a rope.scaling.factor, or
 * the older rope.scale_linear, without a type as linear; a factor with type none is refused as
 * ambiguous); Phi-3's longrope when the file holds rope_factors_short/long. */
static rx_status read_rope(const rx_gguf_file *f, const gguf_arch *a, rx_hf_config *c) {
  const char *arch = a->name;
  char key[128], fkey[128];
  snprintf(key, sizeof key, "%s.rope.dimension_count", arch);
  if (gguf_find(f, key)) {
    uint32_t n;
    RX_RETURN_IF_ERROR(gguf_get_u32(f, key, &n));
    if (n != (uint64_t)c->head_dim && (a->features & A_PERMUTED))
      return base_status_make(RX_ERR_UNSUPPORTED,
                              "%s: '%s' %u is not the head dim %lld ('%s.attention.key_length', or "
                              "embedding_length / head_count): a partial rotary embedding is not "
                              "supported for %s (its q and k rows are permuted per whole head)",
                              f->name, key, n, (long long)c->head_dim, arch, arch);
    if (n < 2 || n % 2 || n > (uint64_t)c->head_dim)
      return base_status_make(RX_ERR_INVALID,
                              "%s: '%s' is %u: expected an even number of rotary dims from 2 to "
                              "the head dim %lld",
                              f->name, key, n, (long long)c->head_dim);
    c->rotary_dim = n == (uint64_t)c->head_dim ? 0 : n;
  }
  snprintf(c->rope_type, sizeof c->rope_type, "default");
  snprintf(key, sizeof key, "%s.rope.scaling.type", arch);
  snprintf(fkey, sizeof fkey, "%s.rope.scaling.factor", arch);
  const char *scaling = NULL;
  if (gguf_find(f, key)) RX_RETURN_IF_ERROR(gguf_get_string(f, key, &scaling));
  char old[128]; /* the older key llama.cpp still reads */
  snprintf(old, sizeof old, "%s.rope.scale_linear", arch);
  if (!gguf_find(f, fkey) && gguf_find(f, old)) memcpy(fkey, old, sizeof fkey);
  double factor = 0;
  if (gguf_find(f, fkey))
    RX_RETURN_IF_ERROR(get_float(f, arch, fkey + strlen(arch) + 1, -1, &factor));
  bool longrope = gguf_find_tensor(f, "rope_factors_long.weight") ||
                  gguf_find_tensor(f, "rope_factors_short.weight");
  if (scaling && strcmp(scaling, "none") && strcmp(scaling, "linear") && strcmp(scaling, "yarn"))
    return base_status_make(RX_ERR_UNSUPPORTED,
                            "%s: '%s' '%.64s' is not supported (supported: none, linear, yarn; "
                            "longrope by the tensors rope_factors_short/long)",
                            f->name, key, scaling);
  if (scaling && !strcmp(scaling, "none") && factor != 0 && factor != 1)
    return base_status_make(
        RX_ERR_UNSUPPORTED,
        "%s: '%s' %g with '%s' none is not supported (scaled or not: expected no "
        "factor, or 1)",
        f->name, fkey, factor, key);
  bool linear = scaling ? !strcmp(scaling, "linear") : factor != 0 && factor != 1;
  bool yarn = scaling && !strcmp(scaling, "yarn");
  if (longrope && (linear || yarn))
    return base_status_make(RX_ERR_UNSUPPORTED,
                            "%s: '%s' with the longrope tensors rope_factors_short/long: expected "
                            "one rope scaling",
                            f->name, key);
  if (longrope) return read_longrope(f, arch, c);
  if (!linear && !yarn) return NULL;
  if (!(factor > 0 && factor <= 1e6)) /* NaN too */
    return base_status_make(RX_ERR_INVALID,
                            "%s: '%s' is %g: expected a number from 1e-06 to 1e+06 (%s rope "
                            "scaling)",
                            f->name, fkey, factor, yarn ? "yarn" : "linear");
  if (yarn) return read_yarn(f, arch, factor, c);
  snprintf(c->rope_type, sizeof c->rope_type, "linear");
  c->rope_factor = factor;
  return NULL;
}

/* Which layers are sliding-window layers, with ARCH.attention.sliding_window > 0:
 * ARCH.attention.sliding_window_pattern as gguf-py writes it, a bool per layer (true: sliding) or
 * a period n (llama.cpp's set_swa_pattern: layer l slides unless l % n == n - 1; 0: every
 * layer), by default the architecture's (Gemma 2: 2, Gemma 3: 6, the others every layer). */
static rx_status read_windows(const rx_gguf_file *f, const gguf_arch *a, rx_hf_config *c) {
  if (!c->window) return NULL;
  char key[128];
  snprintf(key, sizeof key, "%s.attention.sliding_window_pattern", a->name);
  const rx_gguf_kv *kv = gguf_find(f, key);
  c->layer_kinds = true;
  if (kv && kv->value.type == RX_GGUF_V_ARRAY) {
    const rx_gguf_value *p;
    RX_RETURN_IF_ERROR(gguf_get_array(f, key, RX_GGUF_V_BOOL, &p));
    if (p->count != (uint64_t)c->layers)
      return base_status_make(
          RX_ERR_INVALID,
          "%s: '%s' holds %llu entries: expected one per layer ('%s.block_count' "
          "%lld)",
          f->name, key, (unsigned long long)p->count, a->name, (long long)c->layers);
    for (int64_t l = 0; l < c->layers; l++) c->local[l] = gguf_array_at(p, (uint64_t)l).v.u != 0;
    return NULL;
  }
  int64_t n = a->period;
  if (kv) {
    uint32_t v;
    RX_RETURN_IF_ERROR(gguf_get_u32(f, key, &v));
    n = v;
  }
  for (int64_t l = 0; l < c->layers; l++) c->local[l] = n == 0 || l % n < n - 1;
  return NULL;
}

/* Gemma's math, which llama.cpp takes from the architecture: norms of 1 + w (stored so by the
 * converter: norm_offset 1 says so to the description, and the builder adds nothing to a GGUF
 * file's norms), the embedding scale, sandwich norms, GeGLU, the soft-caps (ARCH.*_softcapping,
 * Gemma 2's defaults 50 and 30), Gemma 3's local rope base (ARCH.rope.freq_base_swa, default
 * 10000). The attention scale: ARCH.attention.scale when given (any architecture), else
 * llama.cpp's for Gemma: 1/sqrt(head dim), 1/sqrt(embedding / heads) for the 27B model (its
 * query_pre_attn_scalar; llama.cpp knows it by its block count). */
static rx_status read_features(const rx_gguf_file *f, const gguf_arch *a, rx_hf_config *c) {
  const char *arch = a->name;
  c->qkv_bias = a->features & A_BIAS;
  c->qk_norm = a->features & A_QK_NORM;
  if (a->features & A_PHI3) {
    c->fused_gate_up = true;
    c->fused_qkv = gguf_find_tensor(f, "blk.0.attn_qkv.weight") != NULL;
  }
  if (a->features & A_GEMMA) {
    c->norm_offset = 1;
    c->embed_scale = c->sandwich = true;
    c->act = RX_HF_ACT_GELU_TANH;
    RX_RETURN_IF_ERROR(get_float_in(f, arch, "attn_logit_softcapping", a->attn_softcap, 0, 1e12,
                                    &c->attn_softcap));
    RX_RETURN_IF_ERROR(get_float_in(f, arch, "final_logit_softcapping", a->final_softcap, 0, 1e12,
                                    &c->final_softcap));
    double d =
        c->layers == a->layers_27b ? (double)c->hidden / (double)c->heads : (double)c->head_dim;
    c->attn_scale = 1 / sqrt(d);
  }
  if (a->features & A_LOCAL_ROPE)
    RX_RETURN_IF_ERROR(
        get_float_in(f, arch, "rope.freq_base_swa", 10000, 1e-6, 1e12, &c->rope_local_theta));
  char key[128];
  snprintf(key, sizeof key, "%s.attention.scale", arch);
  if (gguf_find(f, key))
    RX_RETURN_IF_ERROR(get_float_in(f, arch, "attention.scale", -1, 1e-12, 1e6, &c->attn_scale));
  return read_windows(f, a, c);
}

static rx_status get_bool(const rx_gguf_file *f, const char *key, bool def, bool *out);

/* A sparse mixture of experts (llama.cpp's llama with ARCH.expert_count > 0, as the converter
 * writes Mixtral; qwen2moe; qwen3moe): ARCH.expert_count E and expert_used_count k (1 <= k <= E
 * <= HF_MAX_EXPERTS), an expert's intermediate size (ARCH.expert_feed_forward_length; llama: the
 * feed_forward_length, llama.cpp's n_ff; qwen's default llama.cpp's feed_forward_length / k),
 * Qwen2-MoE's shared expert (ARCH.expert_shared_feed_forward_length, default
 * feed_forward_length; ARCH.expert_shared_count 1 when given), the k probabilities renormalized
 * as llama.cpp's build_moe_ffn is told (norm_w: llama and qwen3moe yes, qwen2moe no;
 * ARCH.expert_weights_norm when the file says). A layer is sparse when the file holds its router
 * blk.N.ffn_gate_inp.weight (llama.cpp's test too), dense otherwise (feed_forward_length): the
 * dense layers of Qwen's mlp_only_layers and decoder_sparse_step. */
static rx_status read_moe(const rx_gguf_file *f, const gguf_arch *a, rx_hf_config *c) {
  const char *arch = a->name;
  char key[160];
  bool need = a->features & A_MOE;
  RX_RETURN_IF_ERROR(get_int(f, arch, "expert_count", need ? -1 : 0, &c->experts));
  bool any = false;
  for (int64_t l = 0; l < c->layers; l++) {
    snprintf(key, sizeof key, "blk.%lld.ffn_gate_inp.weight", (long long)l);
    c->sparse[l] = gguf_find_tensor(f, key) != NULL;
    any = any || c->sparse[l];
  }
  if (!c->experts && !any) return NULL;
  if (!c->experts)
    return base_status_make(RX_ERR_INVALID,
                            "%s: the file holds expert routers (blk.N.ffn_gate_inp.weight) but "
                            "'%s.expert_count' is 0 or absent: expected the number of experts",
                            f->name, arch);
  if (c->experts < 1 || c->experts > HF_MAX_EXPERTS)
    return base_status_make(RX_ERR_INVALID, "%s: '%s.expert_count' is %lld: expected 1 to %d",
                            f->name, arch, (long long)c->experts, HF_MAX_EXPERTS);
  RX_RETURN_IF_ERROR(get_int(f, arch, "expert_used_count", -1, &c->top_k));
  if (c->top_k < 1 || c->top_k > c->experts)
    return base_status_make(RX_ERR_INVALID,
                            "%s: '%s.expert_used_count' is %lld: expected 1 to '%s.expert_count' "
                            "%lld (the experts each token runs)",
                            f->name, arch, (long long)c->top_k, arch, (long long)c->experts);
  if (!any)
    return base_status_make(RX_ERR_INVALID,
                            "%s: '%s.expert_count' is %lld but no layer holds its router "
                            "(blk.N.ffn_gate_inp.weight): expected the experts' tensors",
                            f->name, arch, (long long)c->experts);
  int64_t def = a->features & A_PERMUTED ? c->intermediate : c->intermediate / c->top_k;
  RX_RETURN_IF_ERROR(get_int(f, arch, "expert_feed_forward_length", def, &c->moe_inter));
  if (c->moe_inter < 1 || c->moe_inter > (1 << 22))
    return base_status_make(RX_ERR_INVALID,
                            "%s: '%s.expert_feed_forward_length' is %lld: expected 1 to %d",
                            f->name, arch, (long long)c->moe_inter, 1 << 22);
  if (a->features & A_SHEXP) {
    int64_t n;
    RX_RETURN_IF_ERROR(get_int(f, arch, "expert_shared_count", 1, &n));
    if (n != 1)
      return base_status_make(RX_ERR_UNSUPPORTED,
                              "%s: '%s.expert_shared_count' %lld is not supported (expected 1: "
                              "Qwen2-MoE's one shared expert)",
                              f->name, arch, (long long)n);
    RX_RETURN_IF_ERROR(
        get_int(f, arch, "expert_shared_feed_forward_length", c->intermediate, &c->shared_inter));
    if (c->shared_inter < 1 || c->shared_inter > (1 << 22))
      return base_status_make(RX_ERR_INVALID,
                              "%s: '%s.expert_shared_feed_forward_length' is %lld: expected 1 to "
                              "%d",
                              f->name, arch, (long long)c->shared_inter, 1 << 22);
  }
  c->norm_topk = !(a->features & A_RAW_TOPK);
  RX_RETURN_IF_ERROR(get_bool(f, (snprintf(key, sizeof key, "%s.expert_weights_norm", arch), key),
                              c->norm_topk, &c->norm_topk));
  c->moe_names = a->features & A_PERMUTED ? RX_HF_MOE_MIXTRAL : RX_HF_MOE_QWEN;
  return NULL;
}

/* the special-token ids of tokenizer.ggml.* (-1 when absent); hf_check_config checks them
 * against the vocabulary */
static rx_status special_ids(const rx_gguf_file *f, rx_hf_config *c) {
  c->bos = -1;
  c->neos = 0;
  uint32_t v;
  if (gguf_find(f, "tokenizer.ggml.bos_token_id")) {
    RX_RETURN_IF_ERROR(gguf_get_u32(f, "tokenizer.ggml.bos_token_id", &v));
    c->bos = v;
  }
  if (gguf_find(f, "tokenizer.ggml.eos_token_id")) {
    RX_RETURN_IF_ERROR(gguf_get_u32(f, "tokenizer.ggml.eos_token_id", &v));
    c->eos[c->neos++] = v;
  }
  if (gguf_find(f, "tokenizer.ggml.eot_token_id")) {
    RX_RETURN_IF_ERROR(gguf_get_u32(f, "tokenizer.ggml.eot_token_id", &v));
    if (!c->neos || c->eos[0] != v) c->eos[c->neos++] = v;
  }
  return NULL;
}

static rx_status read_sizes(const rx_gguf_file *f, const char *arch, rx_hf_config *c) {
  RX_RETURN_IF_ERROR(get_int(f, arch, "embedding_length", -1, &c->hidden));
  RX_RETURN_IF_ERROR(get_int(f, arch, "feed_forward_length", -1, &c->intermediate));
  RX_RETURN_IF_ERROR(get_int(f, arch, "block_count", -1, &c->layers));
  RX_RETURN_IF_ERROR(get_int(f, arch, "attention.head_count", -1, &c->heads));
  RX_RETURN_IF_ERROR(get_int(f, arch, "attention.head_count_kv", c->heads, &c->kv_heads));
  char key[128];
  snprintf(key, sizeof key, "%s.attention.key_length", arch);
  if (!gguf_find(f, key) && c->heads && c->hidden % c->heads)
    return base_status_make(RX_ERR_INVALID,
                            "%s: '%s.embedding_length' %lld is not a multiple of "
                            "'%s.attention.head_count' %lld, and '%s' (the head dim) is not given",
                            f->name, arch, (long long)c->hidden, arch, (long long)c->heads, key);
  RX_RETURN_IF_ERROR(
      get_int(f, arch, "attention.key_length", c->heads ? c->hidden / c->heads : 0, &c->head_dim));
  int64_t vdim;
  RX_RETURN_IF_ERROR(get_int(f, arch, "attention.value_length", c->head_dim, &vdim));
  if (vdim != c->head_dim)
    return base_status_make(
        RX_ERR_UNSUPPORTED,
        "%s: '%s.attention.value_length' %lld differs from the key length %lld: "
        "value heads of another size are not supported",
        f->name, arch, (long long)vdim, (long long)c->head_dim);
  RX_RETURN_IF_ERROR(get_int(f, arch, "context_length", -1, &c->max_positions));
  const rx_gguf_tensor *emb = gguf_find_tensor(f, "token_embd.weight");
  RX_RETURN_IF_ERROR(
      get_int(f, arch, "vocab_size", emb && emb->ndim == 2 ? emb->shape[0] : -1, &c->vocab));
  RX_RETURN_IF_ERROR(get_float(f, arch, "attention.layer_norm_rms_epsilon", -1, &c->rms_eps));
  RX_RETURN_IF_ERROR(get_int(f, arch, "attention.sliding_window", 0, &c->window));
  return get_float(f, arch, "rope.freq_base", 10000.0, &c->rope_theta);
}

rx_status hf_gguf_read_config(const rx_gguf_file *f, rx_hf_config *c) {
  memset(c, 0, sizeof *c);
  const char *name;
  RX_RETURN_IF_ERROR(gguf_get_string(f, "general.architecture", &name));
  const gguf_arch *a = NULL;
  for (size_t i = 0; i < RX_ARRAY_LEN(ARCHS) && !a; i++)
    if (!strcmp(name, ARCHS[i].name)) a = &ARCHS[i];
  if (!a) {
    rx_strbuf list = {0};
    for (size_t i = 0; i < RX_ARRAY_LEN(ARCHS); i++)
      base_strbuf_printf(&list, "%s%s", i ? ", " : "", ARCHS[i].name);
    rx_status s = base_status_make(
        RX_ERR_UNSUPPORTED, "%s: general.architecture '%.64s' is not supported (supported: %s)",
        f->name, name, list.data);
    base_strbuf_free(&list);
    return s;
  }
  c->arch = a->arch;
  c->arch_name = a->name; /* static, for messages */
  RX_RETURN_IF_ERROR(read_sizes(f, a->name, c));
  RX_RETURN_IF_ERROR(refuse_unimplemented(f, a));
  RX_RETURN_IF_ERROR(special_ids(f, c));
  snprintf(c->rope_type, sizeof c->rope_type, "default");
  RX_RETURN_IF_ERROR(hf_check_config(c, f->name, a->name));
  RX_RETURN_IF_ERROR(read_features(f, a, c));
  if (a->features & A_EXPERTS) RX_RETURN_IF_ERROR(read_moe(f, a, c));
  RX_RETURN_IF_ERROR(read_rope(f, a, c));
  c->tie_embeddings = !gguf_find_tensor(f, "output.weight");
  c->file_dtype = RX_DTYPE_UNKNOWN;
  return NULL;
}

rx_status hf_gguf_open(const char *path, rx_hf_config *c, hf_gguf **out) {
  *out = NULL;
  hf_gguf *g = base_calloc(1, sizeof *g);
  g->path = base_strdup(path);
  rx_status s = base_map_file(path, &g->map);
  if (!s) s = gguf_parse(g->map.data, g->map.size, path, &g->f);
  if (!s) s = hf_gguf_read_config(&g->f, c);
  if (s) {
    hf_gguf_close(g);
    return s;
  }
  *out = g;
  return NULL;
}

const rx_gguf_file *hf_gguf_file(const hf_gguf *g) { return &g->f; }

/* ---- the tokenizer ----
 * tokenizer.ggml.model "gpt2": byte-level BPE with the file's merges; tokenizer.ggml.pre names
 * the pre-tokenizer (PRE_KINDS: the regex runtime/llm implements for it). "llama": SentencePiece
 * BPE (tokens with scores) as Hugging Face's LlamaConverter rewrites it: merges made from the
 * vocabulary (every split of a piece into two pieces, ordered by the merged piece's score,
 * highest first), byte_fallback, and its "legacy" normalizer: "▁" for a space, and one prepended
 * to the text when tokenizer.ggml.add_space_prefix (default true) (as sentencepiece does, even
 * before a space, and as llama.cpp does, again after each special token in the text); the
 * decoder back.
 * SentencePiece merges the adjacent pair whose merged piece scores highest; ranking the merges by
 * that score makes the BPE of runtime/llm take the same pairs (tests/gguf/tokenizers/). */
static const char *const byte_level =
    "{\"type\": \"ByteLevel\", \"add_prefix_space\": false, \"trim_offsets\": true, "
    "\"use_regex\": true}";

/* The Split regexes of Llama 3's and Qwen2's tokenizer.json (runtime/llm/tok_encode.c knows
 * them by these exact patterns). */
static const char *const LLAMA3_REGEX =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| "
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
static const char *const QWEN2_REGEX =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| "
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

/* The tokenizer.ggml.pre values of a byte-level BPE that relaxc reads, as llama.cpp's
 * llama-vocab.cpp groups them: the Split regex before ByteLevel (NULL: GPT-2's, inside
 * ByteLevel), whether merges are skipped for a whole word in the vocabulary, the default of
 * add_bos_token, and the normalizer of the Hugging Face file the group comes from. */
static const struct pre_kind {
  const char *name, *regex;
  bool ignore_merges, add_bos, nfc;
} PRE_KINDS[] = {
    {"default", NULL, false, false, false},
    {"gpt-2", NULL, false, false, false},
    {"llama3", LLAMA3_REGEX, true, true, false},
    {"llama-v3", LLAMA3_REGEX, true, true, false},
    {"llama-bpe", LLAMA3_REGEX, true, true, false},
    {"falcon3", LLAMA3_REGEX, true, true, false},
    {"qwen2", QWEN2_REGEX, false, false, true},
    {"deepseek-r1-qwen", QWEN2_REGEX, false, false, true},
};

/* llama.cpp's token types */
enum { TT_NORMAL = 1, TT_UNKNOWN = 2, TT_CONTROL = 3, TT_USER = 4, TT_UNUSED = 5, TT_BYTE = 6 };

/* A boolean key, or def when absent. */
static rx_status get_bool(const rx_gguf_file *f, const char *key, bool def, bool *out) {
  const rx_gguf_kv *kv = gguf_find(f, key);
  *out = def;
  if (!kv) return NULL;
  if (kv->value.type != RX_GGUF_V_BOOL)
    return base_status_make(RX_ERR_INVALID, "%s: %s is a %s: expected bool", f->name, key,
                            gguf_vtype_name(kv->value.type));
  *out = kv->value.v.u != 0;
  return NULL;
}

/* tokenizer.ggml.merges ("a b" strings, ranked by order) into out as a JSON list */
static rx_status put_merges(const rx_gguf_file *f, rx_strbuf *out) {
  const rx_gguf_value *m;
  RX_RETURN_IF_ERROR(gguf_get_array(f, "tokenizer.ggml.merges", RX_GGUF_V_STRING, &m));
  base_strbuf_append(out, "[");
  for (uint64_t i = 0; i < m->count; i++) {
    if (strlen(m->strs[i]) != m->lens[i] || !strchr(m->strs[i], ' '))
      return base_status_make(RX_ERR_INVALID,
                              "%s: tokenizer.ggml.merges[%llu]: expected two tokens separated by a "
                              "space, without NUL bytes",
                              f->name, (unsigned long long)i);
    if (i) base_strbuf_append(out, ", ");
    base_strbuf_json_string(out, m->strs[i]);
  }
  base_strbuf_append(out, "]");
  return NULL;
}

/* The tokens, their types (NULL: all normal) and, for SentencePiece, their scores. */
typedef struct vocab {
  const rx_gguf_value *toks, *types, *scores;
} vocab;

static int64_t token_type(const vocab *v, uint64_t i) {
  return v->types ? gguf_array_at(v->types, i).v.i : TT_NORMAL;
}

static rx_status read_vocab(const rx_gguf_file *f, const rx_hf_config *c, bool spm, vocab *v) {
  memset(v, 0, sizeof *v);
  RX_RETURN_IF_ERROR(gguf_get_array(f, "tokenizer.ggml.tokens", RX_GGUF_V_STRING, &v->toks));
  uint64_t n = v->toks->count;
  if (n != (uint64_t)c->vocab)
    return base_status_make(RX_ERR_INVALID,
                            "%s: tokenizer.ggml.tokens holds %llu tokens, but the model's "
                            "vocabulary ('%s.vocab_size', or token_embd.weight's rows) has %lld: "
                            "expected one token per row",
                            f->name, (unsigned long long)n, c->arch_name ? c->arch_name : "ARCH",
                            (long long)c->vocab);
  if (gguf_find(f, "tokenizer.ggml.token_type"))
    RX_RETURN_IF_ERROR(gguf_get_array(f, "tokenizer.ggml.token_type", RX_GGUF_V_INT32, &v->types));
  if (spm)
    RX_RETURN_IF_ERROR(gguf_get_array(f, "tokenizer.ggml.scores", RX_GGUF_V_FLOAT32, &v->scores));
  const rx_gguf_value *per[] = {v->types, v->scores};
  const char *names[] = {"token_type", "scores"};
  for (int k = 0; k < 2; k++)
    if (per[k] && per[k]->count != n)
      return base_status_make(
          RX_ERR_INVALID,
          "%s: tokenizer.ggml.%s holds %llu entries, tokenizer.ggml.tokens %llu: "
          "expected one per token",
          f->name, names[k], (unsigned long long)per[k]->count, (unsigned long long)n);
  if (n > (uint64_t)INT32_MAX)
    return base_status_make(RX_ERR_INVALID,
                            "%s: tokenizer.ggml.tokens holds %llu tokens: expected "
                            "at most %d",
                            f->name, (unsigned long long)n, INT32_MAX);
  for (uint64_t i = 0; i < n; i++) {
    if (v->scores && !isfinite(gguf_array_at(v->scores, i).v.f))
      return base_status_make(RX_ERR_INVALID,
                              "%s: tokenizer.ggml.scores[%llu] is not a finite number", f->name,
                              (unsigned long long)i);
    if (strlen(v->toks->strs[i]) != v->toks->lens[i])
      return base_status_make(RX_ERR_INVALID, "%s: tokenizer.ggml.tokens[%llu] holds a NUL byte",
                              f->name, (unsigned long long)i);
    int64_t ty = token_type(v, i);
    if (ty < TT_NORMAL || ty > TT_BYTE)
      return base_status_make(RX_ERR_INVALID,
                              "%s: tokenizer.ggml.token_type[%llu] is %lld: expected 1 (normal) to "
                              "6 (byte)",
                              f->name, (unsigned long long)i, (long long)ty);
  }
  return NULL;
}

/* The vocabulary ({"token": id}) and the added tokens: control (and, for SentencePiece, the
 * unknown token) special, user-defined not. */
static void put_vocab(const vocab *v, bool spm, rx_strbuf *vocab_out, rx_strbuf *added) {
  base_strbuf_append(vocab_out, "{");
  base_strbuf_append(added, "[");
  for (uint64_t i = 0, na = 0; i < v->toks->count; i++) {
    base_strbuf_append(vocab_out, i ? ", " : "");
    base_strbuf_json_string(vocab_out, v->toks->strs[i]);
    base_strbuf_printf(vocab_out, ": %llu", (unsigned long long)i);
    int64_t ty = token_type(v, i);
    if (ty != TT_CONTROL && ty != TT_USER && !(spm && ty == TT_UNKNOWN)) continue;
    base_strbuf_printf(added, "%s{\"id\": %llu, \"content\": ", na++ ? ", " : "",
                       (unsigned long long)i);
    base_strbuf_json_string(added, v->toks->strs[i]);
    base_strbuf_printf(added,
                       ", \"single_word\": false, \"lstrip\": false, \"rstrip\": false, "
                       "\"normalized\": false, \"special\": %s}",
                       ty == TT_USER ? "false" : "true");
  }
  base_strbuf_append(vocab_out, "}");
  base_strbuf_append(added, "]");
}

/* ---- SentencePiece merges ---- */
typedef struct spm_merge {
  float score;
  int32_t piece, left, right;
} spm_merge;

static int by_score(const void *a, const void *b) {
  const spm_merge *x = a, *y = b;
  if (x->score != y->score) return x->score > y->score ? -1 : 1;
  if (x->piece != y->piece) return x->piece < y->piece ? -1 : 1;
  if (x->left != y->left) return x->left < y->left ? -1 : 1;
  return (x->right > y->right) - (x->right < y->right);
}

/* A token's text and id, sorted by the text (then the id) to look tokens up by text. */
typedef struct text_id {
  const char *s;
  size_t n;
  int32_t id;
} text_id;

static int cmp_bytes(const char *a, size_t an, const char *b, size_t bn) {
  int c = memcmp(a, b, an < bn ? an : bn);
  return c ? c : (an > bn) - (an < bn);
}

static int by_text(const void *a, const void *b) {
  const text_id *x = a, *y = b;
  int c = cmp_bytes(x->s, x->n, y->s, y->n);
  return c ? c : (x->id > y->id) - (x->id < y->id);
}

/* The id of the token s[0..n) among the count sorted ones, or -1. */
static int32_t find_token(const text_id *sorted, size_t count, const char *s, size_t n) {
  size_t lo = 0, hi = count;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    int c = cmp_bytes(sorted[mid].s, sorted[mid].n, s, n);
    if (!c) return sorted[mid].id;
    if (c < 0)
      lo = mid + 1;
    else
      hi = mid;
  }
  return -1;
}

/* A piece SentencePiece's BPE can make by a merge and merge further: normal and user-defined
 * (control, unknown and byte tokens are never the result of a merge; unused ones are treated as
 * absent). */
static bool mergeable(const vocab *v, int32_t id) {
  if (id < 0) return false;
  int64_t ty = token_type(v, (uint64_t)id);
  return ty == TT_NORMAL || ty == TT_USER;
}

/* Every split of a mergeable piece into two mergeable pieces at a character boundary, as JSON
 * pairs ordered by the piece's score (highest first), then by the ids. Two tokens with the same
 * text are refused (the tokenizer.json vocabulary maps text to one id). A piece longer than
 * SPM_MAX_PIECE bytes is not split (sentencepiece's pieces are at most 16 characters by
 * default; the bound keeps a hostile file's cost linear). */
#define SPM_MAX_PIECE 1024
static rx_status put_spm_merges(const rx_gguf_file *f, const vocab *v, rx_strbuf *out) {
  const rx_gguf_value *t = v->toks;
  size_t count = (size_t)t->count;
  text_id *sorted = base_calloc(count + 1, sizeof *sorted);
  for (size_t i = 0; i < count; i++) sorted[i] = (text_id){t->strs[i], t->lens[i], (int32_t)i};
  qsort(sorted, count, sizeof *sorted, by_text);
  rx_status s = NULL;
  for (size_t i = 1; i < count && !s; i++)
    if (!cmp_bytes(sorted[i - 1].s, sorted[i - 1].n, sorted[i].s, sorted[i].n))
      s = base_status_make(RX_ERR_INVALID,
                           "%s: tokenizer.ggml.tokens[%d] and [%d] are both '%.64s': expected "
                           "distinct tokens",
                           f->name, (int)sorted[i - 1].id, (int)sorted[i].id, sorted[i].s);
  RX_VEC(spm_merge) merges = {0};
  for (uint64_t i = 0; i < t->count && !s; i++) {
    if (!mergeable(v, (int32_t)i)) continue;
    const char *p = t->strs[i];
    size_t n = t->lens[i];
    for (size_t k = 1; k < n && n <= SPM_MAX_PIECE; k++) {
      if (((unsigned char)p[k] & 0xC0) == 0x80) continue; /* inside a character */
      int32_t l = find_token(sorted, count, p, k), r = find_token(sorted, count, p + k, n - k);
      if (l < 0 || r < 0 || !mergeable(v, l) || !mergeable(v, r)) continue;
      spm_merge m = {(float)gguf_array_at(v->scores, i).v.f, (int32_t)i, l, r};
      RX_VEC_PUSH(&merges, m);
    }
  }
  if (!s) {
    if (merges.len) qsort(merges.data, merges.len, sizeof *merges.data, by_score);
    base_strbuf_append(out, "[");
    for (size_t i = 0; i < merges.len; i++) {
      base_strbuf_append(out, i ? ", [" : "[");
      base_strbuf_json_string(out, t->strs[merges.data[i].left]);
      base_strbuf_append(out, ", ");
      base_strbuf_json_string(out, t->strs[merges.data[i].right]);
      base_strbuf_append(out, "]");
    }
    base_strbuf_append(out, "]");
  }
  free(merges.data);
  free(sorted);
  return s;
}

/* ---- the post-processor ---- */
static void put_special(rx_strbuf *out, const char *tok, int64_t id) {
  base_strbuf_json_string(out, tok);
  base_strbuf_append(out, ": {\"id\": ");
  base_strbuf_json_string(out, tok);
  base_strbuf_printf(out, ", \"ids\": [%lld], \"tokens\": [", (long long)id);
  base_strbuf_json_string(out, tok);
  base_strbuf_append(out, "]}");
}

/* The BOS token before the text when tokenizer.ggml.add_bos_token (default add_bos), the EOS
 * token after it when tokenizer.ggml.add_eos_token (default false); null when neither. */
static rx_status put_post(const rx_gguf_file *f, const rx_hf_config *c, const vocab *v,
                          bool add_bos, rx_strbuf *out) {
  bool add_eos;
  RX_RETURN_IF_ERROR(get_bool(f, "tokenizer.ggml.add_bos_token", add_bos, &add_bos));
  RX_RETURN_IF_ERROR(get_bool(f, "tokenizer.ggml.add_eos_token", false, &add_eos));
  add_bos = add_bos && c->bos >= 0;
  add_eos = add_eos && c->neos > 0;
  if (!add_bos && !add_eos) {
    base_strbuf_append(out, "null");
    return NULL;
  }
  const char *bos = add_bos ? v->toks->strs[c->bos] : NULL;
  const char *eos = add_eos ? v->toks->strs[c->eos[0]] : NULL;
  base_strbuf_append(out, "{\"type\": \"TemplateProcessing\", \"single\": [");
  if (bos) {
    base_strbuf_append(out, "{\"SpecialToken\": {\"id\": ");
    base_strbuf_json_string(out, bos);
    base_strbuf_append(out, ", \"type_id\": 0}}, ");
  }
  base_strbuf_append(out, "{\"Sequence\": {\"id\": \"A\", \"type_id\": 0}}");
  if (eos) {
    base_strbuf_append(out, ", {\"SpecialToken\": {\"id\": ");
    base_strbuf_json_string(out, eos);
    base_strbuf_append(out, ", \"type_id\": 0}}");
  }
  base_strbuf_append(out, "], \"special_tokens\": {");
  if (bos) put_special(out, bos, c->bos);
  if (eos && !(bos && c->bos == c->eos[0])) {
    if (bos) base_strbuf_append(out, ", ");
    put_special(out, eos, c->eos[0]);
  }
  base_strbuf_append(out, "}}");
  return NULL;
}

/* ---- the two models ---- */
typedef struct tok_parts {
  rx_strbuf normalizer, pre, decoder, model;
  bool add_bos; /* the default of tokenizer.ggml.add_bos_token */
} tok_parts;

static rx_status byte_level_bpe(const rx_gguf_file *f, tok_parts *p) {
  const char *pre = "default";
  if (gguf_find(f, "tokenizer.ggml.pre"))
    RX_RETURN_IF_ERROR(gguf_get_string(f, "tokenizer.ggml.pre", &pre));
  const struct pre_kind *k = NULL;
  for (size_t i = 0; i < RX_ARRAY_LEN(PRE_KINDS) && !k; i++)
    if (!strcmp(pre, PRE_KINDS[i].name)) k = &PRE_KINDS[i];
  if (!k) {
    rx_strbuf names = {0};
    for (size_t i = 0; i < RX_ARRAY_LEN(PRE_KINDS); i++)
      base_strbuf_printf(&names, "%s%s", i ? ", " : "", PRE_KINDS[i].name);
    rx_status s = base_status_make(
        RX_ERR_UNSUPPORTED, "%s: tokenizer.ggml.pre '%.64s' is not supported (supported: %s)",
        f->name, pre, names.data);
    base_strbuf_free(&names);
    return s;
  }
  p->add_bos = k->add_bos;
  base_strbuf_append(&p->normalizer, k->nfc ? "{\"type\": \"NFC\"}" : "null");
  if (k->regex) {
    base_strbuf_append(&p->pre,
                       "{\"type\": \"Sequence\", \"pretokenizers\": [{\"type\": \"Split\", "
                       "\"pattern\": {\"Regex\": ");
    base_strbuf_json_string(&p->pre, k->regex);
    base_strbuf_append(&p->pre, "}, \"behavior\": \"Isolated\", \"invert\": false}, {\"type\": "
                                "\"ByteLevel\", \"add_prefix_space\": false, \"trim_offsets\": "
                                "true, \"use_regex\": false}]}");
  } else {
    base_strbuf_append(&p->pre, byte_level);
  }
  base_strbuf_append(&p->decoder, byte_level);
  base_strbuf_printf(&p->model,
                     "{\"type\": \"BPE\", \"byte_fallback\": false, \"ignore_merges\": %s, "
                     "\"merges\": ",
                     k->ignore_merges ? "true" : "false");
  return put_merges(f, &p->model);
}

static rx_status sentencepiece(const rx_gguf_file *f, const vocab *v, tok_parts *p) {
  bool prefix, extra_ws;
  RX_RETURN_IF_ERROR(get_bool(f, "tokenizer.ggml.add_space_prefix", true, &prefix));
  RX_RETURN_IF_ERROR(get_bool(f, "tokenizer.ggml.remove_extra_whitespaces", false, &extra_ws));
  if (extra_ws)
    return base_status_make(RX_ERR_UNSUPPORTED,
                            "%s: tokenizer.ggml.remove_extra_whitespaces true is not supported (a "
                            "SentencePiece model with the identity normalizer, as Llama's)",
                            f->name);
  const char *unk = NULL;
  for (uint64_t i = 0; i < v->toks->count && !unk; i++)
    if (token_type(v, i) == TT_UNKNOWN) unk = v->toks->strs[i];
  p->add_bos = true;
  /* the Replace of a space by "▁", after the Prepend of one when add_space_prefix */
  base_strbuf_printf(&p->normalizer,
                     "{\"type\": \"Sequence\", \"normalizers\": [%s{\"type\": \"Replace\", "
                     "\"pattern\": {\"String\": \" \"}, \"content\": \"\xe2\x96\x81\"}]}",
                     prefix ? "{\"type\": \"Prepend\", \"prepend\": \"\xe2\x96\x81\"}, " : "");
  base_strbuf_append(&p->pre, "null");
  base_strbuf_printf(
      &p->decoder,
      "{\"type\": \"Sequence\", \"decoders\": [{\"type\": \"Replace\", \"pattern\": "
      "{\"String\": \"\xe2\x96\x81\"}, \"content\": \" \"}, {\"type\": "
      "\"ByteFallback\"}, {\"type\": \"Fuse\"}%s]}",
      prefix ? ", {\"type\": \"Strip\", \"content\": \" \", \"start\": 1, \"stop\": 0}" : "");
  base_strbuf_append(&p->model, "{\"type\": \"BPE\", \"byte_fallback\": true, \"fuse_unk\": true, "
                                "\"ignore_merges\": false, \"unk_token\": ");
  if (unk)
    base_strbuf_json_string(&p->model, unk);
  else
    base_strbuf_append(&p->model, "null");
  base_strbuf_append(&p->model, ", \"merges\": ");
  return put_spm_merges(f, v, &p->model);
}

rx_status hf_gguf_tokenizer_json(const rx_gguf_file *f, const rx_hf_config *c, rx_strbuf *out) {
  const char *model;
  RX_RETURN_IF_ERROR(gguf_get_string(f, "tokenizer.ggml.model", &model));
  bool spm = !strcmp(model, "llama");
  if (!spm && strcmp(model, "gpt2") != 0)
    return base_status_make(RX_ERR_UNSUPPORTED,
                            "%s: tokenizer.ggml.model '%.64s' is not supported (supported: gpt2, "
                            "byte-level BPE; llama, SentencePiece BPE)",
                            f->name, model);
  vocab v;
  RX_RETURN_IF_ERROR(read_vocab(f, c, spm, &v));
  tok_parts p = {0};
  rx_strbuf vocab_json = {0}, added = {0}, post = {0};
  rx_status s = spm ? sentencepiece(f, &v, &p) : byte_level_bpe(f, &p);
  if (!s) s = put_post(f, c, &v, p.add_bos, &post);
  if (!s) {
    put_vocab(&v, spm, &vocab_json, &added);
    const char *parts[] = {"{\"version\": \"1.0\", \"added_tokens\": ",
                           added.data,
                           ", \"normalizer\": ",
                           p.normalizer.data,
                           ", \"pre_tokenizer\": ",
                           p.pre.data,
                           ", \"post_processor\": ",
                           post.data,
                           ", \"decoder\": ",
                           p.decoder.data,
                           ", \"model\": ",
                           p.model.data,
                           ", \"vocab\": ",
                           vocab_json.data,
                           "}}\n"};
    for (size_t i = 0; i < RX_ARRAY_LEN(parts); i++) base_strbuf_append(out, parts[i]);
  }
  rx_strbuf *bufs[] = {&p.normalizer, &p.pre, &p.decoder, &p.model, &vocab_json, &added, &post};
  for (size_t i = 0; i < RX_ARRAY_LEN(bufs); i++) base_strbuf_free(bufs[i]);
  return s;
}
