/* frontends/hf/llama.c: the graph functions of a Llama-family decoder (Llama 2 and 3, Mistral,
 * Qwen2), built with the C builder API over the paged KV cache (docs/llm.md):
 *
 *   create_kv_cache(capacity: Prim(i64), max_seqs: Prim(i64)) -> Object
 *   prefill(input_ids: i32[n], cache: Object, batch: Object, batch_size: Shape([b]), <weights>)
 *     -> f32[b, vocab]
 *   decode(input_ids: i32[b], cache: Object, batch: Object, <weights>) -> f32[b, vocab]
 *
 * prefill takes the new tokens of b sequences packed one after another (no padding), decode one
 * token per sequence; batch, a host object the runtime fills (runtime/llm/kv_cache.h), names the
 * sequences and each one's new tokens. Each forward reserves its tokens in the cache
 * (rx_kv_extend, which returns the page table, lengths, positions, slots and each sequence's last
 * row), then per layer: RMSNorm, the q/k/v projections (biases for Qwen2), rotary embedding at
 * the tokens' positions (inv_freq computed here, with the llama3 or linear scaling folded in), the
 * new keys and values written into the layer's pages in place (kv_append_rope: the keys rotated
 * in the same kernel, and the queries beside them into a new tensor), attention over the pages,
 * the output projection and the residual, RMSNorm and the SwiGLU MLP and the residual. Weights are
 * parameters named after their checkpoint tensors ("model.layers.0.self_attn.q_proj.weight" ->
 * model_layers_0_self_attn_q_proj_weight), bound to the module's weights of the same name. */
#include "hf_int.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HF_PI 3.14159265358979323846 /* as transformers takes it (math.pi) */

/* ---- the weights ---- */
/* Per layer, listed once: X(id, checkpoint suffix after "model.layers.N.", GGUF suffix after
 * "blk.N." as llama.cpp names the tensor). Which of them a model has follows its description
 * (list_weights): q/k norms (Qwen3, Gemma 3), the pre/post feed-forward norms (Gemma 2/3, whose
 * post_attention_layernorm norms the attention's output), Phi-3's fused qkv_proj and
 * gate_up_proj in place of q/k/v_proj and gate/up_proj, and in a sparse layer (Mixtral,
 * Qwen2/3-MoE) the router, the experts and Qwen2-MoE's shared expert in place of the MLP. The
 * experts' entries are not checkpoint tensors: the layer's E per-expert tensors stacked at load
 * into one [E, out, in] (stack_experts), as transformers 5 holds them (experts.gate_up_proj: each
 * expert's gate rows then its up rows, moe_matmul's gated layout; experts.down_proj); Mixtral's
 * names (block_sparse_moe.gate, experts.e.w1 / w3 / w2) are set by list_weights. (GGUF holds
 * ffn_gate_exps and ffn_up_exps stacked but apart: its reader would interleave them per expert.) */
#define HF_LAYER_WEIGHTS(X)                                                                        \
  X(W_IN_NORM, "input_layernorm.weight", "attn_norm.weight")                                       \
  X(W_Q, "self_attn.q_proj.weight", "attn_q.weight")                                               \
  X(W_K, "self_attn.k_proj.weight", "attn_k.weight")                                               \
  X(W_V, "self_attn.v_proj.weight", "attn_v.weight")                                               \
  X(W_BQ, "self_attn.q_proj.bias", "attn_q.bias")                                                  \
  X(W_BK, "self_attn.k_proj.bias", "attn_k.bias")                                                  \
  X(W_BV, "self_attn.v_proj.bias", "attn_v.bias")                                                  \
  X(W_O, "self_attn.o_proj.weight", "attn_output.weight")                                          \
  X(W_POST_NORM, "post_attention_layernorm.weight", "ffn_norm.weight")                             \
  X(W_GATE, "mlp.gate_proj.weight", "ffn_gate.weight")                                             \
  X(W_UP, "mlp.up_proj.weight", "ffn_up.weight")                                                   \
  X(W_DOWN, "mlp.down_proj.weight", "ffn_down.weight")                                             \
  X(W_Q_NORM, "self_attn.q_norm.weight", "attn_q_norm.weight")                                     \
  X(W_K_NORM, "self_attn.k_norm.weight", "attn_k_norm.weight")                                     \
  X(W_PRE_FF_NORM, "pre_feedforward_layernorm.weight", "ffn_norm.weight")                          \
  X(W_POST_FF_NORM, "post_feedforward_layernorm.weight", "post_ffw_norm.weight")                   \
  X(W_QKV, "self_attn.qkv_proj.weight", "attn_qkv.weight")                                         \
  X(W_GATE_UP, "mlp.gate_up_proj.weight", "ffn_up.weight")                                         \
  X(W_ROUTER, "mlp.gate.weight", "ffn_gate_inp.weight")                                            \
  X(W_EXP_GATE_UP, "mlp.experts.gate_up_proj", "ffn_gate_up_exps.weight")                          \
  X(W_EXP_DOWN, "mlp.experts.down_proj", "ffn_down_exps.weight")                                   \
  X(W_SH_GATE, "mlp.shared_expert.gate_proj.weight", "ffn_gate_shexp.weight")                      \
  X(W_SH_UP, "mlp.shared_expert.up_proj.weight", "ffn_up_shexp.weight")                            \
  X(W_SH_DOWN, "mlp.shared_expert.down_proj.weight", "ffn_down_shexp.weight")                      \
  X(W_SH_ROUTER, "mlp.shared_expert_gate.weight", "ffn_gate_inp_shexp.weight")

enum {
#define HF_W_ENUM_(e, s, gs) e,
  HF_LAYER_WEIGHTS(HF_W_ENUM_)
#undef HF_W_ENUM_
      W_PER_LAYER
};
static const char *const layer_suffix[] = {
#define HF_W_NAME_(e, s, gs) s,
    HF_LAYER_WEIGHTS(HF_W_NAME_)
#undef HF_W_NAME_
};
static const char *const layer_gguf[] = {
#define HF_W_GGUF_(e, s, gs) gs,
    HF_LAYER_WEIGHTS(HF_W_GGUF_)
#undef HF_W_GGUF_
};
/* after the layers: */
enum {
  G_EMBED,
  G_NORM,
  G_LM_HEAD,
  G_INV_FREQ,       /* the rotary inverse frequencies (computed) */
  G_INV_FREQ_LOCAL, /* those of local layers (Gemma 3's rope_local_base_freq), when they differ */
  G_INV_FREQ_LONG,  /* longrope's beyond original_max_position_embeddings */
  G_COUNT
};

typedef struct hf_w {
  char hf[160];    /* the checkpoint's name ("" for a computed weight) */
  char param[160]; /* the parameter's and the module weight's */
  char gg[64];     /* the GGUF file's name (llama.cpp's) */
  int ndim;
  int64_t shape[3]; /* [E, out, in] for the experts of a sparse layer */
  rx_dtype dtype;
  bool present; /* used by this model (biases only for Qwen2) */
  bool norm;    /* an RMSNorm's weight: stored as (norm_offset + w) (Gemma's 1 + w) */
  /* --quantize: a projection [out, in] held as quant_matmul's buffers (base/quant.h): this entry
   * the packed quants (shape [out, in / 2] or [out, in]), entries qs and qz (0: none) its f16
   * scales and u8 zero points, which `derived` marks (added with it, never read themselves) */
  int64_t in;
  size_t qs, qz;
  bool derived;
  /* a checkpoint stored quantized (quantization_config: AWQ, GPTQ, FP8; frontends/hf/ckpt_quant.c):
   * this entry the checkpoint's packed weight (qweight, or the FP8 weight) with out its output
   * features, entries qs, qz and qg (0: none) the scales, zeros and GPTQ's g_idx, all read from
   * the checkpoint as they are */
  bool ckq;
  int64_t out;
  size_t qg;
  const rx_quant_info *qi; /* the scheme of a quantized weight (in > 0) */
  /* GGUF: a projection, the output layer or the embedding table (a quantized one stays in its
   * block format), and the heads whose rows llama.cpp's converter permuted (llama's q and k; 0:
   * none) */
  bool proj;
  int64_t permuted_heads;
  /* A member of a row group (the q, k and v projections of a layer, their biases, their scales
   * and zero points; fuse_rows): grp the group's entry (0: none); put_weight holds the member's
   * source bytes here instead of adding them, until fuse_rows adds the group's rows as one
   * weight (or, when the members' formats differ, each member as it is). A group's entry has
   * `group` set: it stays absent (present false) unless the rows are fused. */
  size_t grp;
  bool group;
  const void *src;
  rx_dtype src_dtype;
  /* --tensor-parallel (tp_shard): this rank's block of the checkpoint's tensor, split along dim
   * split - 1 (1 rows, 2 columns; 0: whole) whose full size there is split_full */
  int split;
  int64_t split_full;
} hf_w;

typedef struct gb {
  rx_module *m;
  const rx_hf_config *c;
  rx_dtype T;              /* weights and matmuls */
  const rx_quant_info *qi; /* --quantize: the scheme of the projections, or NULL */
  rx_quant_scheme qsc;
  rx_dtype R; /* the residual stream and the norms: f32, whatever T is (as llama.cpp keeps its
                 activations): an f16 residual stream rounds every layer's sum, which on the
                 tests' models doubles the error of the logits against transformers in f32 */
  int64_t max_len, max_batch;
  hf_w *w; /* layers * W_PER_LAYER, then G_COUNT */
  size_t nw;
  size_t *qkv, *bqkv; /* per layer: the entry of the fused q/k/v projection and of its bias (0:
                         none, or not fused: the layer uses q, k and v) */
  rx_status err;
  int tp, tp_rank;           /* --tensor-parallel: this rank of tp (tp > 1), else 0 */
  int pp, pp_rank;           /* --pipeline-parallel: this stage of pp (pp > 1), else 0 */
  int64_t l0, l1;            /* the layers this stage holds, [l0, l1) (all without pp) */
  const rx_hf_config *whole; /* --tensor-parallel: the model's config (c: this rank's share) */
  /* the function being built */
  rx_builder *b;
  const char *fn;
  rx_var **wv; /* per weight: its parameter (NULL: absent) */
} gb;

/* The rotary dims of each head: all of head_dim unless partial_rotary_factor says fewer. */
static int64_t rot_dim(const rx_hf_config *c) {
  return c->rotary_dim > 0 ? c->rotary_dim : c->head_dim;
}

static hf_w *lw(gb *g, int64_t l, int id) { return &g->w[l * W_PER_LAYER + id]; }
static hf_w *gw(gb *g, int id) { return &g->w[g->c->layers * W_PER_LAYER + id]; }

static void set_w(hf_w *w, const char *hf, int ndim, int64_t r, int64_t c, rx_dtype dt) {
  snprintf(w->hf, sizeof w->hf, "%s", hf);
  size_t i = 0;
  for (; hf[i] && i + 1 < sizeof w->param; i++) w->param[i] = hf[i] == '.' ? '_' : hf[i];
  w->param[i] = 0;
  w->ndim = ndim;
  w->shape[0] = r;
  w->shape[1] = c;
  w->dtype = dt;
  w->present = true;
}

/* --quantize: w [out, in] (or the stacked experts [E, out, in]) as quant_matmul's (moe_matmul's)
 * buffers when in is a whole number of groups: the entry itself the packed quants, two (one) more
 * entries the scales and zero points, with the same leading dims. */
static void quantize_entry(gb *g, hf_w *w) {
  int last = w->ndim - 1;
  int64_t in = w->shape[last], G = g->qi->block;
  char sname[sizeof w->hf], zname[sizeof w->hf]; /* names too long stay unquantized */
  if (in % G != 0 || snprintf(sname, sizeof sname, "%s.scales", w->hf) >= (int)sizeof sname ||
      snprintf(zname, sizeof zname, "%s.zeros", w->hf) >= (int)sizeof zname)
    return;
  w->in = in;
  w->qi = g->qi;
  w->dtype = g->qi->kind == RX_QUANT_INT8 ? RX_DTYPE_I8 : RX_DTYPE_U8;
  w->shape[last] = g->qi->kind == RX_QUANT_INT8 ? in : in / 2;
  size_t *extra[2] = {&w->qs, &w->qz};
  for (int k = 0; k < (g->qi->kind == RX_QUANT_INT4_ZERO ? 2 : 1); k++) {
    *extra[k] = g->nw++;
    hf_w *e = &g->w[*extra[k]];
    set_w(e, k ? zname : sname, 2, w->shape[0], in / G, k ? RX_DTYPE_U8 : RX_DTYPE_F16);
    e->derived = true;
    if (last == 2) { /* [E, out, in / G] */
      e->ndim = 3;
      e->shape[1] = w->shape[1];
      e->shape[2] = in / G;
    }
  }
}

/* --quantize: the projections of every layer; with --quantize-embeddings the embedding table
 * (read by quant_take) and the output layer too, else they stay in the compute dtype, as the
 * norms do. */
static void list_quantized(gb *g, bool embeddings) {
  static const int proj[] = {W_Q,     W_K,       W_V,           W_O,       W_GATE,
                             W_UP,    W_DOWN,    W_QKV,         W_GATE_UP, W_SH_GATE,
                             W_SH_UP, W_SH_DOWN, W_EXP_GATE_UP, W_EXP_DOWN};
  for (int64_t l = 0; l < g->c->layers; l++)
    for (size_t k = 0; k < RX_ARRAY_LEN(proj); k++)
      if (lw(g, l, proj[k])->present) quantize_entry(g, lw(g, l, proj[k]));
  if (!embeddings) return;
  if (gw(g, G_EMBED)->present) quantize_entry(g, gw(g, G_EMBED)); /* not on a later stage */
  if (gw(g, G_LM_HEAD)->present) quantize_entry(g, gw(g, G_LM_HEAD));
}

/* A checkpoint stored quantized (config.json's quantization_config): every projection that the
 * config does not keep dense as quant_matmul's buffers in the checkpoint's own layout
 * (frontends/hf/ckpt_quant.c): this entry the packed weight, more entries the scales, zeros and
 * g_idx. The embedding table and lm_head stay dense, as the tools leave them. */
static void list_ckpt_quantized(gb *g) {
  static const int proj[] = {W_Q, W_K, W_V, W_O, W_GATE, W_UP, W_DOWN, W_QKV, W_GATE_UP};
  for (int64_t l = 0; l < g->c->layers; l++)
    for (size_t k = 0; k < RX_ARRAY_LEN(proj); k++) {
      hf_w *w = lw(g, l, proj[k]);
      char module[sizeof w->hf];
      size_t n = strlen(w->hf) - strlen(".weight");
      if (!w->present) continue;
      snprintf(module, sizeof module, "%.*s", (int)n, w->hf);
      if (hf_quant_keeps_dense(g->c, module)) continue;
      hf_qbufs qb;
      hf_ckpt_quant_layout(g->c, module, w->shape[0], w->shape[1], &qb);
      w->ckq = true;
      w->qi = base_quant_info_of(g->c->qscheme);
      w->out = w->shape[0];
      w->in = w->shape[1];
      size_t *extra[3] = {&w->qs, &w->qz, &w->qg};
      for (int b = 0; b < qb.n; b++) {
        hf_w *e = b ? &g->w[*extra[b - 1] = g->nw++] : w;
        set_w(e, qb.b[b].name, qb.b[b].ndim, qb.b[b].shape[0], qb.b[b].shape[1], qb.b[b].dtype);
        e->derived = b > 0;
      }
    }
}

/* A group entry named after the layer's "self_attn.qkv_proj.<what>" (not a checkpoint tensor: made
 * by fuse_rows) with members m[0..n) (entries, 0: none), or 0 when a member is absent. */
static size_t group_entry(gb *g, int64_t l, const char *what, const size_t *m, int n) {
  for (int i = 0; i < n; i++)
    if (!m[i] || !g->w[m[i]].present) return 0;
  size_t e = g->nw++;
  char name[160];
  snprintf(name, sizeof name, "model.layers.%lld.self_attn.qkv_proj.%s", (long long)l, what);
  const hf_w *a = &g->w[m[0]];
  set_w(&g->w[e], name, a->ndim, 0, a->shape[1], a->dtype);
  g->w[e].present = false;
  g->w[e].group = true;
  g->w[e].derived = a->derived;
  for (int i = 0; i < n; i++) g->w[m[i]].grp = e;
  return e;
}

/* The q, k and v projections of every layer as one row group (one matmul of the three weights'
 * rows, concatenated at compile time: fuse_rows), with their biases, and with --quantize their
 * scales and zero points as groups of their own. */
static void list_groups(gb *g) {
  g->qkv = base_calloc((size_t)g->c->layers, sizeof *g->qkv);
  g->bqkv = base_calloc((size_t)g->c->layers, sizeof *g->bqkv);
  for (int64_t l = g->l0; l < g->l1; l++) { /* this stage's layers */
    size_t w[3], b[3], s[3], z[3];
    for (int i = 0; i < 3; i++) {
      hf_w *p = lw(g, l, W_Q + i);
      w[i] = (size_t)(p - g->w);
      b[i] = (size_t)(lw(g, l, W_BQ + i) - g->w);
      s[i] = p->qs;
      z[i] = p->qz;
    }
    if (g->c->fused_qkv) { /* Phi-3: the checkpoint's one qkv_proj, no group to fuse */
      g->qkv[l] = (size_t)(lw(g, l, W_QKV) - g->w);
      continue;
    }
    if (lw(g, l, W_Q)->ckq || lw(g, l, W_K)->ckq || lw(g, l, W_V)->ckq)
      continue; /* a checkpoint's own packing (AWQ's and GPTQ's columns are the outputs, FP8's
                   scales per tensor): q, k and v stay three projections */
    g->qkv[l] = group_entry(g, l, "weight", w, 3);
    g->bqkv[l] = group_entry(g, l, "bias", b, 3);
    hf_w *e = &g->w[g->qkv[l]];
    e->proj = true;
    if (lw(g, l, W_Q)->qs) {
      e->qs = group_entry(g, l, "scales", s, 3);
      if (lw(g, l, W_Q)->qz) e->qz = group_entry(g, l, "zeros", z, 3);
    }
  }
}

/* --pipeline-parallel: what this stage does not hold is absent: the weights of the layers outside
 * [l0, l1), the embedding table on all stages but the first (the last keeps it when lm_head is
 * tied to it), the final norm and lm_head on all but the last. What list_weights adds after
 * (quantized buffers, the q/k/v row groups) follows the weights present. */
static void pp_drop(gb *g) {
  for (int64_t l = 0; l < g->c->layers; l++)
    if (l < g->l0 || l >= g->l1)
      for (int id = 0; id < W_PER_LAYER; id++) lw(g, l, id)->present = false;
  bool first = g->pp_rank == 0, last = g->pp_rank == g->pp - 1;
  if (!first && !(last && g->c->tie_embeddings)) gw(g, G_EMBED)->present = false;
  if (!last) {
    gw(g, G_NORM)->present = false;
    gw(g, G_LM_HEAD)->present = false;
  }
}

/* The weights the config implies, with their shapes. */
static void list_weights(gb *g, bool quantize_embeddings) {
  const rx_hf_config *c = g->c;
  int64_t H = c->hidden, D = c->head_dim, q = c->heads * D, kv = c->kv_heads * D,
          I = c->intermediate;
  g->nw = (size_t)(c->layers * W_PER_LAYER + G_COUNT);
  /* room for the scales and zero points of every projection, the embedding and the output, and
   * per layer the four entries of the fused q/k/v rows (list_groups) */
  g->w = base_calloc(g->nw + (size_t)((3 * W_PER_LAYER + 4) * c->layers + 4), sizeof *g->w);
  for (int64_t l = 0; l < c->layers; l++) {
    const int64_t dims[W_PER_LAYER][4] = {
        [W_IN_NORM] = {1, H, 0, 1},
        [W_Q] = {2, q, H},
        [W_K] = {2, kv, H},
        [W_V] = {2, kv, H},
        [W_BQ] = {1, q, 0},
        [W_BK] = {1, kv, 0},
        [W_BV] = {1, kv, 0},
        [W_O] = {2, H, q},
        [W_POST_NORM] = {1, H, 0, 1},
        [W_GATE] = {2, c->intermediate, H},
        [W_UP] = {2, c->intermediate, H},
        [W_DOWN] = {2, H, I},
        [W_Q_NORM] = {1, D, 0, 0}, /* in T: they norm q and k, in T (transformers' Qwen3 too) */
        [W_K_NORM] = {1, D, 0, 0},
        [W_PRE_FF_NORM] = {1, H, 0, 1},
        [W_POST_FF_NORM] = {1, H, 0, 1},
        [W_QKV] = {2, q + 2 * kv, H},
        [W_GATE_UP] = {2, 2 * I, H},
        [W_ROUTER] = {2, c->experts, H},
        [W_EXP_GATE_UP] = {3, 2 * c->moe_inter, H}, /* [experts, dims] */
        [W_EXP_DOWN] = {3, H, c->moe_inter},
        [W_SH_GATE] = {2, c->shared_inter, H},
        [W_SH_UP] = {2, c->shared_inter, H},
        [W_SH_DOWN] = {2, H, c->shared_inter},
        [W_SH_ROUTER] = {2, 1, H}}; /* rank, dims, stored as R (the norms) */
    bool moe = c->experts > 0 && c->sparse[l], shared = moe && c->shared_inter > 0;
    const bool has[W_PER_LAYER] = {[W_IN_NORM] = true,
                                   [W_Q] = !c->fused_qkv,
                                   [W_K] = !c->fused_qkv,
                                   [W_V] = !c->fused_qkv,
                                   [W_BQ] = c->qkv_bias,
                                   [W_BK] = c->qkv_bias,
                                   [W_BV] = c->qkv_bias,
                                   [W_O] = true,
                                   [W_POST_NORM] = true,
                                   [W_GATE] = !c->fused_gate_up && !moe,
                                   [W_UP] = !c->fused_gate_up && !moe,
                                   [W_DOWN] = !moe,
                                   [W_Q_NORM] = c->qk_norm,
                                   [W_K_NORM] = c->qk_norm,
                                   [W_PRE_FF_NORM] = c->sandwich,
                                   [W_POST_FF_NORM] = c->sandwich,
                                   [W_QKV] = c->fused_qkv,
                                   [W_GATE_UP] = c->fused_gate_up,
                                   [W_ROUTER] = moe,
                                   [W_EXP_GATE_UP] = moe,
                                   [W_EXP_DOWN] = moe,
                                   [W_SH_GATE] = shared,
                                   [W_SH_UP] = shared,
                                   [W_SH_DOWN] = shared,
                                   [W_SH_ROUTER] = shared};
    for (int id = 0; id < W_PER_LAYER; id++) {
      char name[160];
      snprintf(name, sizeof name, "model.layers.%lld.%s", (long long)l, layer_suffix[id]);
      set_w(lw(g, l, id), name, (int)dims[id][0], dims[id][1], dims[id][2],
            dims[id][3] ? g->R : g->T);
      lw(g, l, id)->present = has[id];
      lw(g, l, id)->norm = dims[id][3] != 0 || id == W_Q_NORM || id == W_K_NORM;
      snprintf(lw(g, l, id)->gg, sizeof lw(g, l, id)->gg, "blk.%lld.%s", (long long)l,
               layer_gguf[id]);
      lw(g, l, id)->proj = dims[id][0] == 2;
      if (dims[id][0] == 3) { /* the experts stacked: [E, out, in] */
        hf_w *w = lw(g, l, id);
        w->shape[2] = w->shape[1];
        w->shape[1] = w->shape[0];
        w->shape[0] = c->experts;
      }
    }
    if (c->moe_names == RX_HF_MOE_MIXTRAL) /* block_sparse_moe.gate, its experts */
      for (int id = W_ROUTER; id <= W_EXP_DOWN; id++) {
        static const char *const mix[] = {"gate.weight", "experts.gate_up_proj",
                                          "experts.down_proj"};
        hf_w *w = lw(g, l, id);
        char name[160];
        snprintf(name, sizeof name, "model.layers.%lld.block_sparse_moe.%s", (long long)l,
                 mix[id - W_ROUTER]);
        int64_t sh[3] = {w->shape[0], w->shape[1], w->shape[2]};
        bool present = w->present;
        set_w(w, name, w->ndim, sh[0], sh[1], w->dtype);
        w->shape[2] = sh[2];
        w->present = present;
      }
  }
  for (int64_t l = 0; l < c->layers; l++) {
    if (c->arch == RX_HF_LLAMA) { /* llama.cpp's converter permutes llama's q and k rows only */
      lw(g, l, W_Q)->permuted_heads = c->heads;
      lw(g, l, W_K)->permuted_heads = c->kv_heads;
    }
    if (c->sandwich) /* Gemma's post_attention_layernorm norms the attention's output */
      snprintf(lw(g, l, W_POST_NORM)->gg, sizeof lw(g, l, W_POST_NORM)->gg,
               "blk.%lld.post_attention_norm.weight", (long long)l);
  }
  set_w(gw(g, G_EMBED), "model.embed_tokens.weight", 2, c->vocab, H, g->T);
  set_w(gw(g, G_NORM), "model.norm.weight", 1, H, 0, g->R);
  gw(g, G_NORM)->norm = true;
  set_w(gw(g, G_LM_HEAD), "lm_head.weight", 2, c->vocab, H, g->T);
  snprintf(gw(g, G_EMBED)->gg, sizeof gw(g, G_EMBED)->gg, "token_embd.weight");
  snprintf(gw(g, G_NORM)->gg, sizeof gw(g, G_NORM)->gg, "output_norm.weight");
  snprintf(gw(g, G_LM_HEAD)->gg, sizeof gw(g, G_LM_HEAD)->gg, "output.weight");
  gw(g, G_LM_HEAD)->proj = true;
  gw(g, G_EMBED)->proj = true; /* a quantized table is read by quant_take */
  gw(g, G_LM_HEAD)->present = !c->tie_embeddings;
  int64_t half = rot_dim(c) / 2; /* the rotary pairs */
  set_w(gw(g, G_INV_FREQ), "rope_inv_freq", 1, half, 0, RX_DTYPE_F32);
  gw(g, G_INV_FREQ)->hf[0] = 0; /* computed, not read */
  set_w(gw(g, G_INV_FREQ_LOCAL), "rope_inv_freq_local", 1, half, 0, RX_DTYPE_F32);
  gw(g, G_INV_FREQ_LOCAL)->hf[0] = 0;
  gw(g, G_INV_FREQ_LOCAL)->present = c->rope_local_theta > 0;
  set_w(gw(g, G_INV_FREQ_LONG), "rope_inv_freq_long", 1, half, 0, RX_DTYPE_F32);
  gw(g, G_INV_FREQ_LONG)->hf[0] = 0;
  gw(g, G_INV_FREQ_LONG)->present = !strcmp(c->rope_type, "longrope");
  if (g->pp) pp_drop(g);
  if (g->qi) list_quantized(g, quantize_embeddings);
  if (c->quantized) list_ckpt_quantized(g);
  list_groups(g);
}

/* --tensor-parallel, the Megatron preset: the weights this rank holds a block of. g->c is the
 * rank's share of the config already (heads, KV heads and intermediate divided by g->tp), so the
 * shapes list_weights gave are the local ones; here each split weight learns its dim and full
 * size: q, k, v (and their biases), gate and up by rows (column-parallel: the rank's heads, its
 * intermediate columns; fuse_rows then packs the rank's [q | k | v] rows), o and down by columns
 * (row-parallel: the rank's partial sums, allreduced after), lm_head by rows (the rank's block
 * of the vocabulary, the logits allgathered after; a tied one reads the embedding table's rows
 * into a parameter of its own). The embedding table and the norms stay whole on every rank. */
static void tp_shard(gb *g, bool tied) {
  static const int rows[] = {W_Q, W_K, W_V, W_BQ, W_BK, W_BV, W_GATE, W_UP}, cols[] = {W_O, W_DOWN};
  for (int64_t l = 0; l < g->c->layers; l++) {
    for (size_t k = 0; k < RX_ARRAY_LEN(rows); k++) {
      lw(g, l, rows[k])->split = 1;
      lw(g, l, rows[k])->split_full = lw(g, l, rows[k])->shape[0] * g->tp;
    }
    for (size_t k = 0; k < RX_ARRAY_LEN(cols); k++) { /* --quantize: in, not the packed dim */
      hf_w *w = lw(g, l, cols[k]);
      w->split = 2;
      w->split_full = (w->in ? w->in : w->shape[1]) * g->tp;
    }
  }
  /* g->c is untied, so list_weights listed lm_head (and --quantize-embeddings quantized it, each
   * row on its own as the table's rows are: the same groups): tied, only the checkpoint tensor it
   * reads changes */
  hf_w *lm = gw(g, G_LM_HEAD);
  if (tied) snprintf(lm->hf, sizeof lm->hf, "model.embed_tokens.weight");
  lm->present = true;
  lm->shape[0] = g->c->vocab / g->tp;
  lm->split = 1;
  lm->split_full = g->c->vocab;
  /* --quantize-embeddings: list_quantized gave the scales (zero points) the whole vocabulary */
  const size_t extra[2] = {lm->qs, lm->qz};
  for (int k = 0; k < 2; k++)
    if (extra[k]) g->w[extra[k]].shape[0] = lm->shape[0];
}

/* --tensor-parallel: this rank's block of w's checkpoint tensor src (dtype dt, w->split_full
 * along the split dim): rows are a span of the mapping, columns a copy the module owns. A weight
 * that --quantize packs is cut before it is quantized, in its checkpoint's columns (w->in): its
 * groups run along the columns, so a rank's rows quantize to the whole model's rows bit for bit,
 * and so do its columns where they start at a group (hf_tp_check). */
static const uint8_t *tp_block(gb *g, const hf_w *w, rx_dtype dt, const uint8_t *src) {
  size_t es = (size_t)(ir_dtype_bits(dt) / 8);
  int64_t cols = w->ndim == 2 ? (w->in ? w->in : w->shape[1]) : 1, rows = w->shape[0];
  if (w->split == 1) return src + (size_t)(g->tp_rank * rows * cols) * es;
  uint8_t *dst = base_malloc((size_t)(rows * cols) * es);
  rx_module_on_free(g->m, free, dst);
  for (int64_t r = 0; r < rows; r++)
    memcpy(dst + (size_t)(r * cols) * es,
           src + (size_t)(r * w->split_full + g->tp_rank * cols) * es, (size_t)cols * es);
  return dst;
}

static void shape_text(char *buf, size_t n, int ndim, const int64_t *shape) {
  size_t k = (size_t)snprintf(buf, n, "[");
  for (int i = 0; i < ndim && k < n; i++)
    k += (size_t)snprintf(buf + k, n - k, "%s%lld", i ? ", " : "", (long long)shape[i]);
  if (k < n) snprintf(buf + k, n - k, "]");
}

/* yarn's inverse frequency of rotary pair i (exponent e = 2 i / rotary dims), in f32 as
 * transformers' _compute_yarn_parameters: the original 1 / base^e and the interpolated
 * 1 / (factor base^e) blended by a ramp over the pairs between the correction dims. */
static float yarn_inv_freq(const rx_hf_config *c, int64_t i, float e) {
  double dim = (double)rot_dim(c), base = c->rope_theta, orig = (double)c->rope_original_max;
  double lo = dim * log(orig / (c->rope_beta_fast * 2 * HF_PI)) / (2 * log(base));
  double hi = dim * log(orig / (c->rope_beta_slow * 2 * HF_PI)) / (2 * log(base));
  if (c->rope_truncate) {
    lo = floor(lo);
    hi = ceil(hi);
  }
  lo = lo > 0 ? lo : 0;
  hi = hi < dim - 1 ? hi : dim - 1;
  if (lo == hi) hi += 0.001; /* transformers' guard against a zero-width ramp */
  float ramp = ((float)i - (float)lo) / (float)(hi - lo);
  ramp = ramp < 0 ? 0 : ramp > 1 ? 1 : ramp;
  float pf = powf((float)base, e), extra = 1.0f / pf, inter = 1.0f / ((float)c->rope_factor * pf);
  float ef = 1.0f - ramp; /* the extrapolation's (original frequencies') share */
  return inter * (1.0f - ef) + extra * ef;
}

/* rotary inverse frequencies (f32, as transformers computes them), with rope_scaling folded in:
 * which G_INV_FREQ* entry: the global layers' (longrope's short factors), the local layers' (their
 * own base, no scaling: Gemma 3) or longrope's long factors */
static float *inv_freq(const rx_hf_config *c, int which) {
  int64_t half = rot_dim(c) / 2;
  float *f = base_calloc((size_t)half, sizeof *f);
  bool local = which == G_INV_FREQ_LOCAL, longrope = !strcmp(c->rope_type, "longrope");
  for (int64_t i = 0; i < half; i++) {
    float e = (float)(2 * i) / (float)rot_dim(c);
    if (local) { /* default rope at the local base */
      f[i] = (float)(1.0 / (double)powf((float)c->rope_local_theta, e));
      continue;
    }
    if (longrope) { /* 1 / (ext_factors * base^e), in f32 as transformers */
      float ext = which == G_INV_FREQ_LONG ? c->rope_long[i] : c->rope_short[i];
      f[i] = 1.0f / (ext * powf((float)c->rope_theta, e));
      continue;
    }
    if (!strcmp(c->rope_type, "yarn")) {
      f[i] = yarn_inv_freq(c, i, e);
      continue;
    }
    double inv = 1.0 / (double)powf((float)c->rope_theta, e);
    if (!strcmp(c->rope_type, "linear")) inv /= c->rope_factor;
    if (!strcmp(c->rope_type, "llama3")) {
      double wavelen = 2 * HF_PI / inv, orig = (double)c->rope_original_max;
      double low_wavelen = orig / c->rope_low_freq, high_wavelen = orig / c->rope_high_freq;
      if (wavelen > low_wavelen) {
        inv /= c->rope_factor;
      } else if (wavelen >= high_wavelen) { /* between: a smooth blend */
        double smooth =
            (orig / wavelen - c->rope_low_freq) / (c->rope_high_freq - c->rope_low_freq);
        inv = (1 - smooth) * inv / c->rope_factor + smooth * inv;
      }
    }
    f[i] = (float)inv;
  }
  return f;
}

/* Element i of checkpoint bytes of dtype t (f32, f16 or bf16, little-endian) as a float. */
static float src_elem(const uint8_t *p, rx_dtype t, int64_t i) {
  if (t == RX_DTYPE_F32) {
    float f;
    memcpy(&f, p + 4 * i, sizeof f);
    return f;
  }
  uint16_t h = (uint16_t)(p[2 * i] | p[2 * i + 1] << 8);
  return t == RX_DTYPE_F16 ? base_f16_to_f32(h) : base_bf16_to_f32(h);
}

/* w's data (src_dtype, w's shape) as the module's weight of w's name; a member of a row group
 * (w->grp) is held in w until fuse_rows. */
static rx_status put_weight(gb *g, hf_w *w, rx_dtype src_dtype, const void *src) {
  if (w->grp) {
    w->src = src;
    w->src_dtype = src_dtype;
    return NULL;
  }
  return rx_module_add_weight(g->m, w->param, w->dtype, w->ndim, w->shape, src_dtype, src);
}

/* --quantize: w's checkpoint tensor [out, in] quantized (frontends/hf/quantize.c) into buffers the
 * module owns, added as the weights of w and of its scales (and zero points) entries. */
static rx_status add_quantized(gb *g, hf_w *w, rx_dtype src, const uint8_t *data) {
  /* the rows of every expert at once: each row is quantized on its own */
  int64_t out = w->ndim == 3 ? w->shape[0] * w->shape[1] : w->shape[0], in = w->in,
          groups = out * (in / g->qi->block);
  float *f = base_malloc(sizeof *f * (size_t)(out * in));
  for (int64_t i = 0; i < out * in; i++) f[i] = src_elem(data, src, i);
  uint8_t *q = base_calloc((size_t)(out * w->shape[w->ndim - 1]), 1),
          *z = w->qz ? base_calloc((size_t)groups, 1) : NULL;
  uint16_t *sc = base_calloc((size_t)groups, sizeof *sc);
  rx_module_on_free(g->m, free, q);
  rx_module_on_free(g->m, free, sc);
  if (z) rx_module_on_free(g->m, free, z);
  rx_status s = hf_quantize(g->qsc, f, out, in, q, sc, z);
  free(f);
  if (s) return base_status_annotate(s, "tensor '%s'", w->hf);
  RX_RETURN_IF_ERROR(put_weight(g, w, w->dtype, q));
  RX_RETURN_IF_ERROR(put_weight(g, &g->w[w->qs], RX_DTYPE_F16, sc));
  return z ? put_weight(g, &g->w[w->qz], RX_DTYPE_U8, z) : NULL;
}

/* A projection stored quantized (list_ckpt_quantized): its buffers found and checked in the
 * checkpoint (frontends/hf/ckpt_quant.c) and added as they are (FP8 scales widened to f32). */
static rx_status add_ckpt_quantized(gb *g, hf_ckpt *ck, hf_w *w) {
  char module[sizeof w->hf];
  const char *dot = strrchr(w->hf, '.');
  snprintf(module, sizeof module, "%.*s", (int)(dot - w->hf), w->hf);
  hf_qbufs qb;
  RX_RETURN_IF_ERROR(hf_ckpt_quant_read(ck, g->c, module, w->out, w->in, &qb));
  const size_t at[4] = {0, w->qs, w->qz, w->qg};
  for (int b = 0; b < qb.n; b++)
    RX_RETURN_IF_ERROR(put_weight(g, b ? &g->w[at[b]] : w, qb.b[b].src, qb.b[b].data));
  return NULL;
}

static rx_status add_gguf_weight(gb *g, const rx_gguf_file *f, hf_w *w);

/* The experts entry w ([E, out, in]) of layer l from a GGUF file, gate and up interleaved
 * (gated): a block format kept as the u8 buffer [E, out, in / block * bytes] of moe_matmul's
 * scheme, a float one converted to w's dtype. */
static rx_status add_gguf_experts(gb *g, const rx_gguf_file *f, hf_w *w, int64_t l, bool gated) {
  hf_gguf_experts x;
  RX_RETURN_IF_ERROR(hf_gguf_experts_read(f, g->c, l, gated, &x));
  if (x.owned) rx_module_on_free(g->m, free, x.owned);
  if (x.qi) {
    w->qi = x.qi;
    w->in = w->shape[2];
    w->dtype = RX_DTYPE_U8;
    w->shape[2] = (int64_t)x.row_bytes;
  }
  return put_weight(g, w, x.src, x.data);
}

/* llama.cpp's per-dimension rope frequency factors (tensor rope_freqs.weight, f32 [head_dim / 2]:
 * how llama.cpp's converter writes Llama 3.1's rope scaling): each inverse frequency divided by
 * its factor, as ggml_rope_ext does. Ignoring them would compute other frequencies than the
 * file's model without a word. */
static rx_status gguf_rope_factors(const rx_gguf_file *f, const rx_hf_config *c, float *inv) {
  const rx_gguf_tensor *t = gguf_find_tensor(f, "rope_freqs.weight");
  if (!t) return NULL;
  int64_t half = rot_dim(c) / 2;
  if (t->type != RX_GGUF_TYPE_F32 || t->ndim != 1 || t->elems != half)
    return base_status_make(
        RX_ERR_INVALID,
        "tensor 'rope_freqs.weight' is %s with %lld elements: expected f32 [%lld] "
        "(a factor per rotary pair of the head dim %lld)",
        gguf_type_name(t->type), (long long)t->elems, (long long)half, (long long)c->head_dim);
  for (int64_t i = 0; i < half; i++) {
    float v;
    memcpy(&v, f->data + t->offset + (size_t)i * sizeof v, sizeof v);
    if (!(v > 0) || !isfinite(v))
      return base_status_make(RX_ERR_INVALID,
                              "tensor 'rope_freqs.weight' [%lld] is %g: expected a positive finite "
                              "factor",
                              (long long)i, v);
    inv[i] /= v;
  }
  return NULL;
}

/* The members of group entry e (entries whose grp is e), in order; their count. */
static int members(const gb *g, size_t e, hf_w **out) {
  int n = 0;
  for (size_t i = 0; i < g->nw && n < 3; i++)
    if (g->w[i].grp == e && e) out[n++] = &g->w[i];
  return n;
}

/* The members of e can be one weight: the same format and row width, and all held in the same
 * source dtype (or none held: --no-weights). */
static bool rows_fusable(const gb *g, size_t e) {
  hf_w *m[3];
  int n = members(g, e, m);
  if (n != 3) return false;
  for (int i = 1; i < n; i++)
    if (m[i]->dtype != m[0]->dtype || m[i]->ndim != m[0]->ndim ||
        m[i]->shape[1] != m[0]->shape[1] || m[i]->in != m[0]->in || m[i]->qi != m[0]->qi ||
        !m[i]->src != !m[0]->src || (m[0]->src && m[i]->src_dtype != m[0]->src_dtype))
      return false;
  return true;
}

/* Group entry e as the members' rows one after another (a copy the module owns, in their source
 * dtype), added as one weight; the members are no longer parameters. */
static rx_status fuse_group(gb *g, size_t e) {
  hf_w *m[3] = {NULL, NULL, NULL}, *w = &g->w[e];
  int n = members(g, e, m);
  RX_ASSERT(n == 3); /* rows_fusable said so */
  w->ndim = m[0]->ndim;
  w->dtype = m[0]->dtype;
  w->shape[0] = 0;
  w->shape[1] = m[0]->shape[1];
  w->in = m[0]->in;
  w->qi = m[0]->qi;
  w->present = true;
  for (int i = 0; i < n; i++) w->shape[0] += m[i]->shape[0];
  for (int i = 0; i < n; i++) m[i]->present = false;
  if (!m[0]->src) return NULL; /* --no-weights */
  size_t row =
      (size_t)(w->ndim == 2 ? w->shape[1] : 1) * (size_t)(ir_dtype_bits(m[0]->src_dtype) / 8);
  uint8_t *data = base_malloc(row * (size_t)w->shape[0]), *at = data;
  rx_module_on_free(g->m, free, data);
  for (int i = 0; i < n; i++) {
    memcpy(at, m[i]->src, row * (size_t)m[i]->shape[0]);
    at += row * (size_t)m[i]->shape[0];
  }
  if (w->ndim == 1) w->shape[1] = 0;
  return rx_module_add_weight(g->m, w->param, w->dtype, w->ndim, w->shape, m[0]->src_dtype, data);
}

/* After every weight is read: each layer's q/k/v rows (and their biases, scales and zero points)
 * fused into one weight where every group of the layer can be (a GGUF file may hold q, k and v
 * in different block formats: then the layer keeps three projections), else the members added
 * as they are. */
static rx_status fuse_rows(gb *g) {
  for (int64_t l = 0; l < g->c->layers; l++) {
    if (!g->qkv[l] || !g->w[g->qkv[l]].group) continue; /* none, or the checkpoint's own */
    size_t grp[4] = {g->qkv[l], g->bqkv[l], g->w[g->qkv[l]].qs, g->w[g->qkv[l]].qz};
    bool ok = true;
    for (int k = 0; k < 4; k++) ok = ok && (!grp[k] || rows_fusable(g, grp[k]));
    for (int k = 0; k < 4; k++) {
      if (!grp[k]) continue;
      if (ok) {
        RX_RETURN_IF_ERROR(fuse_group(g, grp[k]));
        continue;
      }
      hf_w *m[3];
      int n = members(g, grp[k], m);
      for (int i = 0; i < n; i++)
        if (m[i]->src)
          RX_RETURN_IF_ERROR(rx_module_add_weight(g->m, m[i]->param, m[i]->dtype, m[i]->ndim,
                                                  m[i]->shape, m[i]->src_dtype, m[i]->src));
    }
    if (!ok) g->qkv[l] = g->bqkv[l] = 0;
  }
  return NULL;
}

/* The checkpoint's tensor name, checked against the shape [full] of ndim dims the config implies
 * and for a dtype the importer converts (f32, f16, bf16): *out_t and its bytes *out_data. */
static rx_status find_tensor(gb *g, hf_ckpt *ck, const char *name, int ndim, const int64_t *full,
                             const rx_st_tensor **out_t, const uint8_t **out_data) {
  const rx_st_tensor *t = *out_t = hf_ckpt_find(ck, name, out_data);
  if (!t) {
    rx_strbuf files = {0};
    rx_status s =
        base_status_make(RX_ERR_NOT_FOUND, "tensor '%s' (%s) is missing from the checkpoint (%s)",
                         name, g->c->arch_name, hf_ckpt_files(ck, &files));
    base_strbuf_free(&files);
    return s;
  }
  bool same = t->ndim == ndim;
  for (int d = 0; same && d < ndim; d++) same = t->shape[d] == full[d];
  const rx_hf_config *c = g->whole ? g->whole : g->c; /* the whole model's numbers */
  if (!same) {
    char want[96], got[96];
    shape_text(want, sizeof want, ndim, full);
    shape_text(got, sizeof got, t->ndim, t->shape);
    char moe[96] = ""; /* the sparse layers' sizes, for a MoE model */
    if (g->c->experts)
      snprintf(moe, sizeof moe, ", experts %lld, expert intermediate %lld",
               (long long)g->c->experts, (long long)g->c->moe_inter);
    return base_status_make(RX_ERR_INVALID,
                            "tensor '%s' has shape %s, expected %s (from config.json: hidden_size "
                            "%lld, heads %lld, kv heads %lld, head_dim %lld, intermediate %lld, "
                            "vocab %lld%s)",
                            name, got, want, (long long)c->hidden, (long long)c->heads,
                            (long long)c->kv_heads, (long long)c->head_dim,
                            (long long)c->intermediate, (long long)c->vocab, moe);
  }
  if (t->dtype != RX_DTYPE_F32 && t->dtype != RX_DTYPE_F16 && t->dtype != RX_DTYPE_BF16)
    return base_status_make(RX_ERR_UNSUPPORTED, "tensor '%s' is %s: expected f32, f16 or bf16%s",
                            name, t->f8_e4m3 ? "F8_E4M3" : ir_dtype_name(t->dtype),
                            t->f8_e4m3 ? " (a dense weight: no quantization_config, or one that "
                                         "keeps this module dense, names it)"
                                       : "");
  return NULL;
}

/* The experts entry w ([E, out, in], layer l, entry id W_EXP_*) from the checkpoint's E
 * per-expert tensors, stacked in their source dtype into one tensor the module owns (every
 * expert's tensors in one dtype): for W_EXP_GATE_UP each expert's gate rows then its up rows
 * (Mixtral's experts.e.w1 and w3, Qwen's experts.e.gate_proj and up_proj, [out / 2, in] each),
 * for W_EXP_DOWN its down projection (w2, down_proj). */
static rx_status stack_experts(gb *g, hf_ckpt *ck, hf_w *w, int64_t l, int id) {
  static const char *const mix[2][2] = {{"w1", "w3"}, {"w2", NULL}};
  static const char *const qwen[2][2] = {{"gate_proj", "up_proj"}, {"down_proj", NULL}};
  int k = id == W_EXP_DOWN, parts = k ? 1 : 2;
  const int64_t full[2] = {w->shape[1] / parts, w->in ? w->in : w->shape[2]};
  uint8_t *data = NULL;
  rx_dtype dt = RX_DTYPE_UNKNOWN;
  size_t bytes = 0; /* of one part */
  for (int64_t e = 0; e < w->shape[0]; e++)
    for (int p = 0; p < parts; p++) {
      char name[160];
      if (g->c->moe_names == RX_HF_MOE_MIXTRAL)
        snprintf(name, sizeof name, "model.layers.%lld.block_sparse_moe.experts.%lld.%s.weight",
                 (long long)l, (long long)e, mix[k][p]);
      else
        snprintf(name, sizeof name, "model.layers.%lld.mlp.experts.%lld.%s.weight", (long long)l,
                 (long long)e, qwen[k][p]);
      const rx_st_tensor *t;
      const uint8_t *src;
      RX_RETURN_IF_ERROR(find_tensor(g, ck, name, 2, full, &t, &src));
      if (!data) {
        dt = t->dtype;
        bytes = (size_t)(full[0] * full[1]) * (size_t)(ir_dtype_bits(dt) / 8);
        data = base_malloc(bytes * (size_t)(parts * w->shape[0]));
        rx_module_on_free(g->m, free, data);
      } else if (t->dtype != dt) {
        return base_status_make(RX_ERR_INVALID,
                                "tensor '%s' is %s where expert 0's is %s: the experts of a layer "
                                "are stacked into one tensor of one dtype",
                                name, ir_dtype_name(t->dtype), ir_dtype_name(dt));
      }
      memcpy(data + (size_t)(e * parts + p) * bytes, src, bytes);
    }
  return w->in ? add_quantized(g, w, dt, data) : put_weight(g, w, dt, data);
}

/* Finds, checks and adds every weight to the module, from the checkpoint ck or the GGUF file gf
 * (sources stay mapped: the module unmaps them when it is freed). */
static rx_status add_weights(gb *g, hf_ckpt *ck, const rx_gguf_file *gf) {
  for (size_t i = 0; i < g->nw; i++) {
    hf_w *w = &g->w[i];
    if (!w->present || w->derived || w->group) continue;
    if (!w->hf[0]) { /* rope_inv_freq, _local, _long */
      float *f = inv_freq(g->c, (int)(i - (size_t)(g->c->layers * W_PER_LAYER)));
      rx_module_on_free(g->m, free, f);
      if (gf) RX_RETURN_IF_ERROR(gguf_rope_factors(gf, g->c, f));
      RX_RETURN_IF_ERROR(
          rx_module_add_weight(g->m, w->param, w->dtype, w->ndim, w->shape, RX_DTYPE_F32, f));
      continue;
    }
    if (gf && w->permuted_heads && w->shape[0] % (2 * w->permuted_heads) != 0)
      return base_status_make(RX_ERR_INVALID,
                              "tensor '%s': %lld rows are not %lld heads of an even head dim",
                              w->gg, (long long)w->shape[0], (long long)w->permuted_heads);
    if (gf && w->ndim == 3) { /* a sparse layer's experts (frontends/gguf/experts.c) */
      RX_RETURN_IF_ERROR(
          add_gguf_experts(g, gf, w, (int64_t)(i / W_PER_LAYER), i % W_PER_LAYER == W_EXP_GATE_UP));
      continue;
    }
    if (gf) {
      RX_RETURN_IF_ERROR(add_gguf_weight(g, gf, w));
      continue;
    }
    if (!ck) continue; /* --no-weights: the parameter stays unbound */
    if (w->ckq) {
      RX_RETURN_IF_ERROR(add_ckpt_quantized(g, ck, w));
      continue;
    }
    if (w->ndim == 3) {
      RX_RETURN_IF_ERROR(
          stack_experts(g, ck, w, (int64_t)(i / W_PER_LAYER), (int)(i % W_PER_LAYER)));
      continue;
    }
    const uint8_t *data;
    const int64_t full[2] = {w->split == 1 ? w->split_full : w->shape[0], w->split == 2
                                                                              ? w->split_full
                                                                          : w->in ? w->in
                                                                                  : w->shape[1]};
    const rx_st_tensor *t;
    RX_RETURN_IF_ERROR(find_tensor(g, ck, w->hf, w->ndim, full, &t, &data));
    if (w->split) data = tp_block(g, w, t->dtype, data);
    if (w->in) {
      RX_RETURN_IF_ERROR(add_quantized(g, w, t->dtype, data));
      continue;
    }
    if (w->norm && g->c->norm_offset != 0) { /* Gemma: (1 + w) in f32, as its RMSNorm adds */
      int64_t n = w->shape[0];
      float *f = base_malloc(sizeof *f * (size_t)n);
      rx_module_on_free(g->m, free, f);
      for (int64_t k = 0; k < n; k++) f[k] = (float)g->c->norm_offset + src_elem(data, t->dtype, k);
      RX_RETURN_IF_ERROR(put_weight(g, w, RX_DTYPE_F32, f));
      continue;
    }
    RX_RETURN_IF_ERROR(put_weight(g, w, t->dtype, data));
  }
  return fuse_rows(g);
}

/* ---- the weights of a GGUF file ---- */
/* rows [heads * d] of row_bytes each back in the checkpoint's order: llama.cpp's converter put
 * row (h, j, i) (j < 2, i < d/2: the rotary pair (i, i + d/2)) at (h, i, j); a copy the module
 * owns. Whole rows move, so a block format's rows move as they are. */
static const uint8_t *unpermute(gb *g, const uint8_t *src, int64_t rows, int64_t heads,
                                size_t row_bytes) {
  uint8_t *dst = base_malloc((size_t)rows * row_bytes);
  rx_module_on_free(g->m, free, dst);
  int64_t d = rows / heads, half = d / 2;
  for (int64_t h = 0; h < heads; h++)
    for (int64_t j = 0; j < 2; j++)
      for (int64_t i = 0; i < half; i++)
        memcpy(dst + (size_t)(h * d + j * half + i) * row_bytes,
               src + (size_t)(h * d + i * 2 + j) * row_bytes, row_bytes);
  return dst;
}

static rx_status gguf_shape_error(const gb *g, const hf_w *w, const rx_gguf_tensor *t) {
  char want[96], got[96];
  shape_text(want, sizeof want, w->ndim, w->shape);
  shape_text(got, sizeof got, t->ndim, t->shape);
  return base_status_make(RX_ERR_INVALID,
                          "tensor '%s' has shape %s (outermost first), expected %s (from the %s.* "
                          "metadata: embedding %lld, heads %lld, kv heads %lld, head dim %lld, "
                          "feed-forward %lld, vocab %lld)",
                          w->gg, got, want, g->c->arch_name, (long long)g->c->hidden,
                          (long long)g->c->heads, (long long)g->c->kv_heads,
                          (long long)g->c->head_dim, (long long)g->c->intermediate,
                          (long long)g->c->vocab);
}

/* w from the GGUF file: F32, F16 and BF16 tensors converted to w's dtype as the checkpoint's are;
 * a quantized projection, output layer or embedding table kept in its block format as the one u8
 * buffer [out, in / block * bytes] of quant_matmul (quant_take for the table); any other
 * quantized tensor (a norm) dequantized here, at compile time, to f32 and stored in w's dtype. */
static rx_status add_gguf_weight(gb *g, const rx_gguf_file *f, hf_w *w) {
  const rx_gguf_tensor *t = gguf_find_tensor(f, w->gg);
  if (!t)
    return base_status_make(RX_ERR_NOT_FOUND, "tensor '%s' (%s) is missing from the file", w->gg,
                            g->c->arch_name);
  bool same = t->ndim == w->ndim;
  for (int d = 0; same && d < w->ndim; d++) same = t->shape[d] == w->shape[d];
  /* a [1, K] weight written as [K] (ffn_gate_inp_shexp: llama.cpp's {n_embd}) */
  same = same || (w->ndim == 2 && w->shape[0] == 1 && t->ndim == 1 && t->shape[0] == w->shape[1]);
  if (!same) return gguf_shape_error(g, w, t);
  const uint8_t *data = f->data + t->offset;
  int64_t rows = w->shape[0], cols = w->ndim == 2 ? w->shape[1] : 1;
  rx_dtype src = t->type == RX_GGUF_TYPE_F32    ? RX_DTYPE_F32
                 : t->type == RX_GGUF_TYPE_F16  ? RX_DTYPE_F16
                 : t->type == RX_GGUF_TYPE_BF16 ? RX_DTYPE_BF16
                                                : RX_DTYPE_UNKNOWN;
  if (src == RX_DTYPE_UNKNOWN && w->proj) {
    rx_quant_scheme sc;
    if (!base_quant_lookup(gguf_type_name(t->type), &sc))
      return base_status_make(RX_ERR_UNSUPPORTED, "tensor '%s' is %s: no quant_matmul scheme",
                              w->gg, gguf_type_name(t->type));
    w->qi = base_quant_info_of(sc);
    w->in = cols;
    w->dtype = RX_DTYPE_U8;
    w->shape[1] = cols / w->qi->block * w->qi->block_bytes;
    if (w->permuted_heads) data = unpermute(g, data, rows, w->permuted_heads, (size_t)w->shape[1]);
    return put_weight(g, w, RX_DTYPE_U8, data);
  }
  if (src == RX_DTYPE_UNKNOWN) {
    float *deq = base_malloc(sizeof *deq * (size_t)t->elems);
    rx_module_on_free(g->m, free, deq);
    gguf_dequantize(t->type, data, t->elems, deq);
    data = (const uint8_t *)deq;
    src = RX_DTYPE_F32;
  }
  if (w->permuted_heads)
    data = unpermute(g, data, rows, w->permuted_heads,
                     (size_t)cols * (size_t)(ir_dtype_bits(src) / 8));
  return put_weight(g, w, src, data);
}

/* ---- building: the first error is kept, later steps do nothing ---- */
static rx_node *A(gb *g, rx_var *v) { return v && !g->err ? rx_arg_var(g->b, v) : NULL; }

static rx_var *op(gb *g, const char *name, const char *opname, rx_node *const *args, int n,
                  const rx_attr *const *attrs, int nattrs) {
  if (g->err) return NULL;
  for (int i = 0; i < n; i++)
    if (!args[i]) return NULL;
  rx_var *v = NULL;
  rx_status s = rx_emit_op(g->b, opname, args, n, attrs, nattrs, name, &v);
  if (s) g->err = base_status_annotate(s, "%s: building %s", g->fn, name ? name : opname);
  return v;
}
static rx_var *op1(gb *g, const char *name, const char *opname, rx_var *x) {
  rx_node *a[1] = {A(g, x)};
  return op(g, name, opname, a, 1, NULL, 0);
}
static rx_var *op2(gb *g, const char *name, const char *opname, rx_var *x, rx_var *y) {
  rx_node *a[2] = {A(g, x), A(g, y)};
  return op(g, name, opname, a, 2, NULL, 0);
}
static rx_var *cast(gb *g, const char *name, rx_var *x, rx_dtype t) {
  const rx_attr *at[1] = {rx_attr_dtype(g->m, "dtype", t)};
  rx_node *a[1] = {A(g, x)};
  return op(g, name, "cast", a, 1, at, 1);
}
static rx_var *to(gb *g, const char *name, rx_var *x, rx_dtype t) {
  return g->T == g->R ? x : cast(g, name, x, t);
}

static rx_var *reshape(gb *g, const char *name, rx_var *x, const rx_expr *const *dims, int n) {
  if (g->err) return NULL;
  rx_node *a[2] = {A(g, x), rx_arg_shape(g->b, dims, n)};
  return op(g, name, "reshape", a, 2, NULL, 0);
}

/* --tensor-parallel: x's sum over the ranks (a row-parallel projection's partial sums), and the
 * ranks' x [rows, cols] side by side (the logits of each rank's block of the vocabulary). */
static rx_var *allreduce(gb *g, const char *name, rx_var *x) {
  rx_node *a[1] = {A(g, x)};
  return op(g, name, "allreduce", a, 1, NULL, 0);
}
static rx_var *allgather_cols(gb *g, const char *name, rx_var *x) {
  const rx_attr *at[2] = {rx_attr_int(g->m, "axis", 1), rx_attr_int(g->m, "world", g->tp)};
  rx_node *a[1] = {A(g, x)};
  return op(g, name, "allgather", a, 1, at, 2);
}

/* --pipeline-parallel: x sent to stage peer (its value is x), a [rows, cols] f32 tensor received
 * from stage peer, and the [rows, cols] f32 zeros a middle stage returns for the logits it does
 * not compute. send and recv are ordered effects: the callers emit them outside dataflow. */
static rx_var *pp_send(gb *g, const char *name, rx_var *x, int peer) {
  const rx_attr *at[1] = {rx_attr_int(g->m, "peer", peer)};
  rx_node *a[1] = {A(g, x)};
  return op(g, name, "send", a, 1, at, 1);
}
static rx_var *pp_recv(gb *g, const char *name, const rx_expr *rows, int64_t cols, int peer) {
  if (g->err) return NULL;
  const rx_expr *d[2] = {rows, rx_sym_const(g->m, cols)};
  rx_node *a[1] = {rx_arg_shape(g->b, d, 2)};
  const rx_attr *at[2] = {rx_attr_int(g->m, "peer", peer),
                          rx_attr_dtype(g->m, "dtype", RX_DTYPE_F32)};
  return op(g, name, "recv", a, 1, at, 2);
}
static rx_var *zeros_f32(gb *g, const char *name, const rx_expr *rows, int64_t cols) {
  if (g->err) return NULL;
  const rx_expr *d[2] = {rows, rx_sym_const(g->m, cols)};
  rx_node *a[1] = {rx_arg_shape(g->b, d, 2)};
  const rx_attr *at[1] = {rx_attr_dtype(g->m, "dtype", RX_DTYPE_F32)};
  return op(g, name, "zeros", a, 1, at, 1);
}

/* The entry of a quantized weight whose parameter is w, or NULL. */
static const hf_w *quantized(gb *g, rx_var *w) {
  for (size_t i = 0; w && i < g->nw; i++)
    if (g->wv[i] == w && g->w[i].in) return &g->w[i];
  return NULL;
}

static int weight_args(gb *g, rx_var *w, rx_node **a);

/* x @ w^T (+ bias): the checkpoint's [out, in] layout; quant_matmul for a quantized w */
static rx_var *linear(gb *g, const char *name, rx_var *x, rx_var *w, rx_var *bias) {
  const hf_w *qw = quantized(g, w);
  if (qw) {
    rx_node *a[5] = {A(g, x)};
    int n = 1 + weight_args(g, w, a + 1); /* a GGUF block format: the one buffer */
    const rx_attr *at[1] = {rx_attr_str(g->m, "scheme", qw->qi->name)};
    rx_var *y = op(g, bias ? NULL : name, "quant_matmul", a, n, at, 1);
    return bias ? op2(g, name, "add", y, bias) : y;
  }
  int64_t axes[2] = {1, 0};
  const rx_attr *at[1] = {rx_attr_ints(g->m, "axes", axes, 2)};
  rx_node *a[1] = {A(g, w)};
  rx_var *wt = op(g, NULL, "permute", a, 1, at, 1);
  rx_var *y = op2(g, bias ? NULL : name, "matmul", x, wt);
  return bias ? op2(g, name, "add", y, bias) : y;
}

/* x (R) to dtype t, or x itself when it is t already */
static rx_var *to(gb *g, const char *name, rx_var *x, rx_dtype t);

/* RMSNorm of the residual stream x (R) with weight w (R), in the matmuls' dtype T: computed in
 * R and rounded to T by the norm's own kernel (its dtype attr), not by a cast kernel after it */
static rx_var *rms_norm(gb *g, const char *name, rx_var *x, rx_var *w) {
  int64_t axes[1] = {-1};
  const rx_attr *at[3] = {rx_attr_ints(g->m, "axes", axes, 1),
                          rx_attr_float(g->m, "epsilon", g->c->rms_eps),
                          rx_attr_dtype(g->m, "dtype", g->T)};
  rx_node *a[2] = {A(g, x), A(g, w)};
  return op(g, name, "rms_norm", a, 2, at, 3);
}

/* A decode step folds each RMSNorm into the projections after it (rms_norm_matmul: the norm's sum
 * of squares a second reduction of the GEMV, no kernel of its own) when its batch bound is at
 * most this: the GEMV schedule that takes the fused form (gemv_rows) reads each weight once for
 * up to 16 rows (passes/schedule SMALL_ROWS), and again per 16 more. */
#define HF_FOLD_MAX_BATCH 16

/* Whether the norms fold into the layers' projections: not for AWQ and GPTQ checkpoints, whose
 * words pack outputs, not k: the matmul rule takes their quant_matmul as a GEMV but not with the
 * norm's extra reduction (test_matmul_rules), so their norms keep their own kernel. */
static bool fold_layers(const gb *g) {
  if (!g->c->quantized) return true;
  rx_quant_kind k = base_quant_info_of(g->c->qscheme)->kind;
  return k != RX_QUANT_AWQ && k != RX_QUANT_GPTQ && k != RX_QUANT_GPTQ_V2;
}

/* The buffers of projection weight w (its parameter, and a quantized one's scales and zero
 * points) into a; their count (0 when g->err). */
static int weight_args(gb *g, rx_var *w, rx_node **a) {
  const hf_w *qw = quantized(g, w);
  a[0] = A(g, w);
  if (!qw) return 1;
  int n = 1;
  if (qw->qs) a[n++] = A(g, g->wv[qw->qs]);
  if (qw->qz) a[n++] = A(g, g->wv[qw->qz]);
  if (qw->qg) a[n++] = A(g, g->wv[qw->qg]);
  return n;
}

/* Whether w and w2 can be the two weights of one gated rms_norm_matmul: the same format. */
static bool same_format(gb *g, rx_var *w, rx_var *w2) {
  const hf_w *a = quantized(g, w), *b = quantized(g, w2);
  if (!w || !w2 || !a != !b) return false;
  if (a) return a->qi == b->qi && !a->qs == !b->qs && !a->qz == !b->qz && !a->qg == !b->qg;
  return rx_var_sinfo(w)->dtype == rx_var_sinfo(w2)->dtype;
}

/* rms_norm(h, nw) @ w^T as one rms_norm_matmul (the norm folded into the projection), or, with
 * w2, silu(rms_norm(h, nw) @ w^T) * (rms_norm(h, nw) @ w2^T) (gated: gate and up in one). */
static rx_var *norm_matmul(gb *g, const char *name, rx_var *h, rx_var *nw, rx_var *w, rx_var *w2) {
  rx_node *a[10] = {A(g, h), A(g, nw)};
  int n = 2 + weight_args(g, w, a + 2);
  if (w2) n += weight_args(g, w2, a + n);
  const hf_w *qw = quantized(g, w);
  const rx_attr *at[4] = {rx_attr_float(g->m, "epsilon", g->c->rms_eps),
                          rx_attr_dtype(g->m, "dtype", g->T), rx_attr_bool(g->m, "gated", w2),
                          qw ? rx_attr_str(g->m, "scheme", qw->qi->name) : NULL};
  return op(g, name, "rms_norm_matmul", a, n, at, qw ? 4 : 3);
}

static rx_var *match_cast(gb *g, const char *name, rx_node *v, const rx_sinfo *s) {
  if (g->err || !v) return NULL;
  rx_var *out = NULL;
  rx_status st = rx_emit_match_cast(g->b, v, s, name, &out);
  if (st) g->err = base_status_annotate(st, "%s: %s", g->fn, name);
  return out;
}

static rx_var *extern_call(gb *g, const char *name, const char *ext, rx_node *const *args, int n) {
  if (g->err) return NULL;
  for (int i = 0; i < n; i++)
    if (!args[i]) return NULL;
  rx_var *v = NULL;
  rx_status s = rx_emit_call_extern(g->b, ext, args, n, NULL, name, &v);
  if (s) g->err = base_status_annotate(s, "%s: %s", g->fn, ext);
  return v;
}

static void begin_df(gb *g) {
  if (!g->err) g->err = rx_builder_begin_dataflow(g->b);
}
static void end_df(gb *g) {
  if (!g->err) g->err = rx_builder_end_dataflow(g->b);
}

static const rx_sinfo *tensor(gb *g, rx_dtype dt, int ndim, const rx_expr *const *dims) {
  return rx_sinfo_tensor(g->m, dt, ndim, dims);
}

/* ---- one forward ---- */
typedef struct fwd {
  const rx_expr *n; /* new tokens in all */
  const rx_expr *b; /* sequences */
  rx_var *ids, *cache, *batch, *batch_size;
  rx_var *table, *kv_len, *q_seq, *q_pos, *slot, *last;
  rx_var *cos, *sin;       /* the rotation of every layer, or of the global ones */
  rx_var *cos_l, *sin_l;   /* of the local layers when their base differs (Gemma 3), else NULL */
  rx_var *cos_id, *sin_id; /* a partial rotary embedding: ones and zeros [n, head_dim], which
                              kv_append_rope rotates the keys (rotated before it) by, unchanged */
  bool decode;
  bool fold; /* the norms folded into the projections (decode, HF_FOLD_MAX_BATCH) */
} fwd;

/* The aux tensors of rx_kv_extend, given their shapes: the match_casts check the batch's
 * sequences against b and its tokens against n (rx_kv_extend checks that the counts sum to n). */
static void reserve(gb *g, fwd *f) {
  rx_node *a[3] = {A(g, f->cache), A(g, f->batch),
                   g->err ? NULL : rx_arg_prim(g->b, RX_DTYPE_I64, f->n)};
  rx_var *aux = extern_call(g, "aux", "rx_kv_extend", a, 3);
  const rx_expr *mp = rx_sym_var(g->m, "mp");
  const rx_expr *bt[2] = {f->b, mp}, *b1[1] = {f->b}, *n1[1] = {f->n};
  const char *names[6] = {"page_table", "kv_len", "q_seq", "q_pos", "slot", "last"};
  rx_var **dst[6] = {&f->table, &f->kv_len, &f->q_seq, &f->q_pos, &f->slot, &f->last};
  for (int i = 0; i < (f->decode ? 5 : 6) && !g->err; i++) {
    rx_var *item = NULL;
    char nm[32]; /* what a failed match_cast names: "aux_page_table" */
    snprintf(nm, sizeof nm, "aux_%s", names[i]);
    rx_status s = rx_emit_get_item(g->b, A(g, aux), i, nm, &item);
    if (s) {
      g->err = s;
      break;
    }
    const rx_sinfo *want = i == 0             ? tensor(g, RX_DTYPE_I32, 2, bt)
                           : i == 1 || i == 5 ? tensor(g, RX_DTYPE_I32, 1, b1)
                                              : tensor(g, RX_DTYPE_I32, 1, n1);
    *dst[i] = match_cast(g, names[i], A(g, item), want);
  }
}

/* The inverse frequencies of each token [n, head_dim / 2] under longrope: the long factors' for
 * the tokens of a sequence longer than original_max_position_embeddings (its length after this
 * forward, kv_len: the seq_len transformers chooses by, per sequence), the short ones' otherwise.
 */
static rx_var *longrope_freqs(gb *g, fwd *f, rx_var *col) {
  const rx_hf_config *c = g->c;
  int64_t base = c->layers * W_PER_LAYER;
  const rx_attr *tat[1] = {rx_attr_int(g->m, "axis", 0)};
  rx_node *ta[2] = {A(g, f->kv_len), A(g, f->q_seq)};
  rx_var *len = op(g, "seq_len", "take", ta, 2, tat, 1);
  rx_node *ga[2] = {A(g, len), g->err ? NULL : rx_arg_int(g->b, c->rope_original_max)};
  rx_var *is_long = op(g, "rope_long", "greater", ga, 2, NULL, 0);
  int64_t ax[1] = {1};
  const rx_attr *eat[1] = {rx_attr_ints(g->m, "axes", ax, 1)};
  rx_node *ea[1] = {A(g, is_long)};
  rx_var *sel = op(g, NULL, "expand_dims", ea, 1, eat, 1);
  rx_node *wa[3] = {A(g, sel), A(g, g->wv[base + G_INV_FREQ_LONG]), A(g, g->wv[base + G_INV_FREQ])};
  rx_var *inv = op(g, "rope_inv_freq_tok", "where", wa, 3, NULL, 0);
  return op2(g, "freqs", "multiply", col, inv);
}

/* cos and sin of the tokens' positions times the inverse frequencies of entry which, [n, head_dim],
 * in the compute dtype (times longrope's attention factor) */

/* x and y concatenated along axis. */
static rx_var *concat2(gb *g, const char *name, rx_var *x, rx_var *y, int64_t axis) {
  rx_var *pair = NULL;
  if (!g->err) {
    rx_node *fields[2] = {A(g, x), A(g, y)};
    rx_status s = rx_emit_tuple(g->b, fields, 2, NULL, &pair);
    if (s) g->err = s;
  }
  const rx_attr *cat[1] = {rx_attr_int(g->m, "axis", axis)};
  rx_node *ca[1] = {A(g, pair)};
  return op(g, name, "concat", ca, 1, cat, 1);
}
static void rotary_table(gb *g, fwd *f, rx_var *col, int which, rx_var **cos, rx_var **sin) {
  const rx_hf_config *c = g->c;
  bool local = which == G_INV_FREQ_LOCAL;
  rx_var *freqs = !local && !strcmp(c->rope_type, "longrope")
                      ? longrope_freqs(g, f, col)
                      : op2(g, local ? "freqs_local" : "freqs", "multiply", col,
                            g->wv[c->layers * W_PER_LAYER + which]);
  rx_var *emb = concat2(g, local ? "rope_angles_local" : "rope_angles", freqs, freqs, 1);
  rx_var *cs = op1(g, NULL, "cos", emb), *sn = op1(g, NULL, "sin", emb);
  if (!local && c->rope_attn_factor > 0 && c->rope_attn_factor != 1) { /* longrope, yarn */
    rx_node *m1[2] = {A(g, cs), g->err ? NULL : rx_arg_float(g->b, c->rope_attn_factor)};
    rx_node *m2[2] = {A(g, sn), g->err ? NULL : rx_arg_float(g->b, c->rope_attn_factor)};
    cs = op(g, NULL, "multiply", m1, 2, NULL, 0);
    sn = op(g, NULL, "multiply", m2, 2, NULL, 0);
  }
  *cos = cast(g, local ? "rope_cos_local" : "rope_cos", cs, g->T);
  *sin = cast(g, local ? "rope_sin_local" : "rope_sin", sn, g->T);
}

/* cos and sin of the tokens' positions, [n, head_dim], in the compute dtype: every layer's, and
 * the local layers' own when they have a base of their own */
static void rotary_tables(gb *g, fwd *f) {
  rx_var *pos = cast(g, "pos", f->q_pos, RX_DTYPE_F32);
  int64_t ax[1] = {1};
  const rx_attr *at[1] = {rx_attr_ints(g->m, "axes", ax, 1)};
  rx_node *a[1] = {A(g, pos)};
  rx_var *col = op(g, NULL, "expand_dims", a, 1, at, 1);
  rotary_table(g, f, col, G_INV_FREQ, &f->cos, &f->sin);
  if (g->c->rope_local_theta > 0) rotary_table(g, f, col, G_INV_FREQ_LOCAL, &f->cos_l, &f->sin_l);
  if (rot_dim(g->c) == g->c->head_dim || g->err) return;
  const rx_expr *d[2] = {f->n, rx_sym_const(g->m, g->c->head_dim)};
  const rx_attr *dt[1] = {rx_attr_dtype(g->m, "dtype", g->T)};
  rx_node *sa[1] = {rx_arg_shape(g->b, d, 2)};
  f->cos_id = op(g, "rope_cos_identity", "ones", sa, 1, dt, 1);
  rx_node *za[1] = {rx_arg_shape(g->b, d, 2)};
  f->sin_id = op(g, "rope_sin_identity", "zeros", za, 1, dt, 1);
}

static rx_var *W(gb *g, int64_t l, int id) { return g->wv[l * W_PER_LAYER + id]; }

/* Attention of the new tokens' queries q [n, heads, head_dim] over the pages (which hold their
 * keys and values already). Prefill: paged_attention (query tiles, causal, online softmax).
 * Decode: one query per sequence, split over the cache in chunks (paged_decode_attention) so a
 * long cache fills the device, then the chunks merged by their log-sum-exp. */
static rx_var *attention(gb *g, fwd *f, const char *name, rx_var *q, rx_var *pages,
                         int64_t window) {
  const rx_hf_config *c = g->c;
  double scale = c->attn_scale > 0 ? c->attn_scale : 1.0 / sqrt((double)c->head_dim);
  /* scale, window, Gemma 2's soft-cap of the scores when it has one, decode's chunk */
  const rx_attr *at[4] = {rx_attr_float(g->m, "scale", scale), rx_attr_int(g->m, "window", window),
                          rx_attr_float(g->m, "softcap", c->attn_softcap),
                          rx_attr_int(g->m, "chunk", RX_HF_DECODE_CHUNK)};
  int nat = 2;
  if (c->attn_softcap > 0)
    nat++;
  else
    at[2] = at[3];
  if (!f->decode) {
    rx_node *a[6] = {A(g, q),         A(g, pages),    A(g, f->table),
                     A(g, f->kv_len), A(g, f->q_seq), A(g, f->q_pos)};
    return op(g, name, "paged_attention", a, 6, at, nat);
  }
  rx_node *a[4] = {A(g, q), A(g, pages), A(g, f->table), A(g, f->kv_len)};
  rx_var *parts = op(g, NULL, "paged_decode_attention", a, 4, at, nat + 1);
  rx_var *o = NULL, *lse = NULL;
  if (!g->err) g->err = rx_emit_get_item(g->b, A(g, parts), 0, NULL, &o);
  if (!g->err) g->err = rx_emit_get_item(g->b, A(g, parts), 1, NULL, &lse);
  const rx_attr *mat[1] = {rx_attr_dtype(g->m, "dtype", g->T)};
  rx_node *ma[2] = {A(g, o), A(g, lse)};
  return op(g, name, "attention_merge", ma, 2, mat, 1);
}

/* Indices lo .. hi of x along axis. */
static rx_var *slice(gb *g, const char *name, rx_var *x, int64_t axis, int64_t lo, int64_t hi) {
  int64_t ax[1] = {axis};
  const rx_expr *b0[1] = {rx_sym_const(g->m, lo)}, *e0[1] = {rx_sym_const(g->m, hi)};
  const rx_attr *sat[3] = {rx_attr_ints(g->m, "axes", ax, 1), rx_attr_exprs(g->m, "begin", b0, 1),
                           rx_attr_exprs(g->m, "end", e0, 1)};
  rx_node *sa[1] = {A(g, x)};
  return op(g, name, "strided_slice", sa, 1, sat, 3);
}

/* Columns lo .. hi of x [n, w]. */
static rx_var *cols(gb *g, const char *name, rx_var *x, int64_t lo, int64_t hi) {
  return slice(g, name, x, 1, lo, hi);
}

/* x [n, heads, head_dim] rotated by cos and sin [n, R] (rotate_half over its first R dims, the
 * rotary dims of partial_rotary_factor; the others pass through): one rope when R is head_dim */
static rx_var *rope_heads(gb *g, const char *name, rx_var *x, rx_var *cos, rx_var *sin) {
  int64_t D = g->c->head_dim, R = rot_dim(g->c);
  if (R == D) {
    rx_node *a[3] = {A(g, x), A(g, cos), A(g, sin)};
    return op(g, name, "rope", a, 3, NULL, 0);
  }
  rx_var *rot = slice(g, NULL, x, 2, 0, R), *pass = slice(g, NULL, x, 2, R, D);
  rx_node *a[3] = {A(g, rot), A(g, cos), A(g, sin)};
  return concat2(g, name, op(g, NULL, "rope", a, 3, NULL, 0), pass, 2);
}

/* RMSNorm of x over its last axis with weight w of x's dtype, rounded to dtype t: the q/k norms
 * per head (x and w in T) and Gemma's norms of the attention's and the MLP's outputs (in R) */
static rx_var *norm_as(gb *g, const char *name, rx_var *x, rx_var *w, rx_dtype t) {
  int64_t axes[1] = {-1};
  const rx_attr *at[3] = {rx_attr_ints(g->m, "axes", axes, 1),
                          rx_attr_float(g->m, "epsilon", g->c->rms_eps),
                          rx_attr_dtype(g->m, "dtype", t)};
  rx_node *a[2] = {A(g, x), A(g, w)};
  return op(g, name, "rms_norm", a, 2, at, 3);
}

/* x [n, heads * head_dim] as [n, heads, head_dim], each head RMS-normed by weight id (Qwen3,
 * Gemma 3's q_norm and k_norm) when the model has them */
static rx_var *heads_of(gb *g, fwd *f, int64_t l, const char *name, rx_var *x, int64_t heads,
                        int id) {
  const rx_expr *d[3] = {f->n, rx_sym_const(g->m, heads), rx_sym_const(g->m, g->c->head_dim)};
  if (!g->c->qk_norm) return reshape(g, name, x, d, 3);
  return norm_as(g, name, reshape(g, NULL, x, d, 3), W(g, l, id), g->T);
}

/* rms_norm(h, nw) @ w^T (+ bias): x, the norm's output, when the norm has its own kernel, else
 * (f->fold) one rms_norm_matmul of h. */
static rx_var *normed(gb *g, const fwd *f, const char *name, rx_var *h, rx_var *nw, rx_var *x,
                      rx_var *w, rx_var *bias) {
  if (!f->fold) return linear(g, name, x, w, bias);
  rx_var *y = norm_matmul(g, bias ? NULL : name, h, nw, w, NULL);
  return bias ? op2(g, name, "add", y, bias) : y;
}

/* The experts' product of x for each token's k experts (MoE ops, ops/moe.c): y [n k, out] in
 * (token, slot) order. Prefill: the grouped GEMM over the tokens grouped by expert (moe_matmul
 * with moe_group's indptr and order); decode: each (token, slot) reads only its expert's rows
 * (moe_gemv over the experts [b, k] directly). gathered: x [n k, in] already in (token, slot)
 * order (the down projection's input); gated: w holds each expert's gate rows then its up rows,
 * and y = silu(x gate^T) * (x up^T). */
static rx_var *experts_mm(gb *g, const fwd *f, const char *name, rx_var *x, rx_var *w, rx_var *ids,
                          rx_var *indptr, rx_var *order, bool gathered, bool gated) {
  rx_node *a[6] = {A(g, x)};
  int n = 1 + weight_args(g, w, a + 1);
  if (f->decode) {
    a[n++] = A(g, ids);
  } else {
    a[n++] = A(g, indptr);
    a[n++] = A(g, order);
  }
  const hf_w *qw = quantized(g, w);
  const rx_attr *at[4] = {rx_attr_bool(g->m, "gathered", gathered),
                          rx_attr_bool(g->m, "gated", gated),
                          rx_attr_int(g->m, "top_k", g->c->top_k),
                          qw ? rx_attr_str(g->m, "scheme", qw->qi->name) : NULL};
  if (f->decode) at[2] = at[3];
  int nat = (f->decode ? 2 : 3) + (qw != NULL);
  return op(g, name, f->decode ? "moe_gemv" : "moe_matmul", a, n, at, nat);
}

/* A sparse layer's MLP of rms_norm(h, nw), in R (Mixtral, Qwen2-MoE, Qwen3-MoE as transformers
 * computes them): the router's logits softmaxed over every expert in f32, the k largest
 * (topk: sorted, ties by the lower index, as torch.topk), renormalized to sum to 1 where the
 * description says (norm_topk); each token's k experts' SwiGLU (experts_mm), combined as
 * sum_s w[t, s] y[t, s, :] in f32; Qwen2-MoE's shared expert, a SwiGLU of its own, scaled by
 * sigmoid(shared_expert_gate x) and added. */
static rx_var *moe(gb *g, const fwd *f, int64_t l, rx_var *h, rx_var *nw) {
  const rx_hf_config *c = g->c;
  char nm[64];
#define NM(s) (snprintf(nm, sizeof nm, s "_%lld", (long long)l), nm)
  rx_var *x = rms_norm(g, NM("moe_in"), h, nw);
  rx_var *logits = to(g, NULL, linear(g, NM("router"), x, W(g, l, W_ROUTER), NULL), g->R);
  const rx_attr *sat[1] = {rx_attr_int(g->m, "axis", -1)};
  rx_node *sa[1] = {A(g, logits)};
  rx_var *probs = op(g, NM("router_probs"), "softmax", sa, 1, sat, 1);
  const rx_expr *kd[1] = {rx_sym_const(g->m, c->top_k)};
  const rx_attr *tat[1] = {rx_attr_exprs(g->m, "k", kd, 1)};
  rx_node *ta[1] = {A(g, probs)};
  rx_var *top = op(g, NM("router_top"), "topk", ta, 1, tat, 1), *wts = NULL, *ids = NULL;
  if (!g->err) g->err = rx_emit_get_item(g->b, A(g, top), 0, NM("router_weights"), &wts);
  if (!g->err) g->err = rx_emit_get_item(g->b, A(g, top), 1, NM("experts"), &ids);
  if (c->norm_topk) {
    int64_t ax[1] = {-1};
    const rx_attr *rat[2] = {rx_attr_ints(g->m, "axes", ax, 1),
                             rx_attr_bool(g->m, "keepdims", true)};
    rx_node *ra[1] = {A(g, wts)};
    wts = op2(g, NM("router_weights_norm"), "divide", wts, op(g, NULL, "sum", ra, 1, rat, 2));
  }
  rx_var *indptr = NULL, *order = NULL;
  if (!f->decode) { /* the (token, slot) pairs grouped by expert: the ragged packing */
    const rx_attr *gat[1] = {rx_attr_int(g->m, "num_experts", c->experts)};
    rx_node *ga[1] = {A(g, ids)};
    rx_var *grp = op(g, NM("expert_groups"), "moe_group", ga, 1, gat, 1);
    if (!g->err) g->err = rx_emit_get_item(g->b, A(g, grp), 0, NM("expert_indptr"), &indptr);
    if (!g->err) g->err = rx_emit_get_item(g->b, A(g, grp), 1, NM("expert_order"), &order);
  }
  rx_var *act = experts_mm(g, f, NM("experts_act"), x, W(g, l, W_EXP_GATE_UP), ids, indptr, order,
                           false, true);
  rx_var *y = experts_mm(g, f, NM("experts_out"), act, W(g, l, W_EXP_DOWN), ids, indptr, order,
                         true, false);
  const rx_expr *yd[3] = {f->n, rx_sym_const(g->m, c->top_k), rx_sym_const(g->m, c->hidden)};
  y = to(g, NULL, reshape(g, NULL, y, yd, 3), g->R);
  int64_t e2[1] = {2}, s1[1] = {1};
  const rx_attr *eat[1] = {rx_attr_ints(g->m, "axes", e2, 1)};
  rx_node *ea[1] = {A(g, wts)};
  y = op2(g, NULL, "multiply", y, op(g, NULL, "expand_dims", ea, 1, eat, 1));
  const rx_attr *cat[1] = {rx_attr_ints(g->m, "axes", s1, 1)};
  rx_node *ca[1] = {A(g, y)};
  rx_var *out = op(g, c->shared_inter ? NULL : NM("moe_out"), "sum", ca, 1, cat, 1);
  if (!c->shared_inter) return out;
  rx_var *sg = linear(g, NM("shared_gate"), x, W(g, l, W_SH_GATE), NULL);
  rx_var *su = linear(g, NM("shared_up"), x, W(g, l, W_SH_UP), NULL);
  rx_var *sa2 = op2(g, NM("shared_act"), "multiply", op1(g, NULL, "silu", sg), su);
  rx_var *sd = to(g, NULL, linear(g, NM("shared_out"), sa2, W(g, l, W_SH_DOWN), NULL), g->R);
  rx_var *gate = to(g, NULL, linear(g, NM("shared_score"), x, W(g, l, W_SH_ROUTER), NULL), g->R);
  rx_var *scaled = op2(g, NULL, "multiply", op1(g, NULL, "sigmoid", gate), sd);
  return op2(g, NM("moe_out"), "add", out, scaled);
#undef NM
}

/* The MLP of rms_norm(h, nw): act(gate) * up, then down: SwiGLU (silu) or GeGLU (tanh GELU), from
 * gate_proj and up_proj or Phi-3's one gate_up_proj (its gate rows first). With f->fold the norm
 * is folded into the projections, and SwiGLU's gate and up of one format are one kernel. */
static rx_var *mlp(gb *g, const fwd *f, int64_t l, rx_var *h, rx_var *nw) {
  const rx_hf_config *c = g->c;
  char nm[64];
#define NM(s) (snprintf(nm, sizeof nm, s "_%lld", (long long)l), nm)
  rx_var *x = f->fold ? NULL : rms_norm(g, NM("mlp_in"), h, nw);
  rx_var *gate, *up, *act;
  if (c->fused_gate_up) {
    rx_var *gu = normed(g, f, NULL, h, nw, x, W(g, l, W_GATE_UP), NULL);
    gate = cols(g, NM("gate"), gu, 0, c->intermediate);
    up = cols(g, NM("up"), gu, c->intermediate, 2 * c->intermediate);
  } else if (f->fold && c->act == RX_HF_ACT_SILU &&
             same_format(g, W(g, l, W_GATE), W(g, l, W_UP))) { /* gate and up: one kernel */
    act = norm_matmul(g, NM("act"), h, nw, W(g, l, W_GATE), W(g, l, W_UP));
    return linear(g, NM("mlp_out"), act, W(g, l, W_DOWN), NULL);
  } else {
    gate = normed(g, f, NM("gate"), h, nw, x, W(g, l, W_GATE), NULL);
    up = normed(g, f, NM("up"), h, nw, x, W(g, l, W_UP), NULL);
  }
  rx_var *a;
  if (c->act == RX_HF_ACT_GELU_TANH) {
    const rx_attr *gat[1] = {rx_attr_str(g->m, "approximate", "tanh")};
    rx_node *ga[1] = {A(g, gate)};
    a = op(g, NULL, "gelu", ga, 1, gat, 1);
  } else {
    a = op1(g, NULL, "silu", gate);
  }
  act = op2(g, NM("act"), "multiply", a, up);
  return linear(g, NM("mlp_out"), act, W(g, l, W_DOWN), NULL);
#undef NM
}

/* One decoder layer on h [n, hidden]; returns the new h. Its attention is local (the window, and
 * the local layers' rotation where they have one) or global as the description says. */
static rx_var *layer(gb *g, fwd *f, int64_t l, rx_var *h, rx_var *pages) {
  const rx_hf_config *c = g->c;
  char nm[64];
#define NM(s) (snprintf(nm, sizeof nm, s "_%lld", (long long)l), nm)
  bool local = !c->layer_kinds || c->local[l];
  rx_var *cos = local && c->layer_kinds && f->cos_l ? f->cos_l : f->cos;
  rx_var *sin = local && c->layer_kinds && f->sin_l ? f->sin_l : f->sin;
  rx_var *x = f->fold ? NULL : rms_norm(g, NM("attn_in"), h, W(g, l, W_IN_NORM));
  rx_var *q, *k, *v;
  int64_t qw = c->heads * c->head_dim, kw = c->kv_heads * c->head_dim, koff = 0, voff = 0;
  if (g->qkv[l]) { /* one projection of the q, k and v rows (fuse_rows, or Phi-3's qkv_proj): q
                      its first qw columns, the keys and values the next kw each, which
                      kv_append_rope reads there */
    rx_var *qkv = normed(g, f, NM("qkv"), h, W(g, l, W_IN_NORM), x, g->wv[g->qkv[l]],
                         g->bqkv[l] ? g->wv[g->bqkv[l]] : NULL);
    q = k = v = qkv;
    koff = qw;
    voff = qw + kw;
  } else {
    q = normed(g, f, NM("q"), h, W(g, l, W_IN_NORM), x, W(g, l, W_Q), W(g, l, W_BQ));
    k = normed(g, f, NM("k"), h, W(g, l, W_IN_NORM), x, W(g, l, W_K), W(g, l, W_BK));
    v = normed(g, f, NM("v"), h, W(g, l, W_IN_NORM), x, W(g, l, W_V), W(g, l, W_BV));
  }
  bool partial = rot_dim(c) < c->head_dim;
  rx_var *qr = NULL; /* the queries rotated here (partial rotary), else by kv_append_rope */
  if (c->qk_norm || partial) { /* q and the keys normed per head before they are rotated; with a
                                  partial rotary embedding rotated here, which kv_append_rope's
                                  identity tables leave as they are */
    rx_var *q3 = heads_of(g, f, l, NM("q_heads"), g->qkv[l] ? cols(g, NM("q"), q, 0, qw) : q,
                          c->heads, W_Q_NORM);
    rx_var *kh = heads_of(g, f, l, NM("k_heads"), koff ? cols(g, NULL, k, koff, koff + kw) : k,
                          c->kv_heads, W_K_NORM);
    if (partial) {
      qr = rope_heads(g, NM("q_rot"), q3, cos, sin);
      kh = rope_heads(g, NM("k_rot"), kh, cos, sin);
      cos = f->cos_id;
      sin = f->sin_id;
    } else {
      const rx_expr *qd[2] = {f->n, rx_sym_const(g->m, qw)};
      q = reshape(g, NM("q_rows"), q3, qd, 2);
    }
    const rx_expr *kd[2] = {f->n, rx_sym_const(g->m, kw)};
    k = reshape(g, NM("k_rows"), kh, kd, 2);
    koff = 0;
  }
  end_df(g);
  /* the new keys rotated and the values into the layer's pages, and (unless rotated above) the
   * queries rotated into [n, heads, head_dim], one kernel (kv_append_rope, which reads them in
   * the projections' rows): the pages in place, so outside dataflow */
  rx_node *pa[7] = {A(g, pages), A(g, k), A(g, v), A(g, f->slot), A(g, cos), A(g, sin), A(g, q)};
  const rx_attr *pat[3] = {rx_attr_int(g->m, "k_offset", koff), rx_attr_int(g->m, "v_offset", voff),
                           rx_attr_int(g->m, "q_heads", c->heads)};
  rx_var *kvq = op(g, NM("kv_q"), "kv_append_rope", pa, qr ? 6 : 7, pat, qr ? 2 : 3);
  begin_df(g);
  rx_var *filled = kvq;
  if (!qr) {
    if (!g->err) g->err = rx_emit_get_item(g->b, A(g, kvq), 0, NM("pages_filled"), &filled);
    if (!g->err) g->err = rx_emit_get_item(g->b, A(g, kvq), 1, NM("q_rot"), &qr);
  }
  rx_var *att = attention(g, f, NM("attn"), qr, filled, local ? c->window : 0);
  const rx_expr *od[2] = {f->n, rx_sym_const(g->m, c->heads * c->head_dim)};
  rx_var *o = linear(g, NM("attn_out"), reshape(g, NULL, att, od, 2), W(g, l, W_O), NULL);
  o = to(g, NULL, o, g->R);
  if (g->tp) o = allreduce(g, NM("attn_sum"), o); /* in R: the residual stream's dtype */
  if (c->sandwich) o = norm_as(g, NM("attn_post"), o, W(g, l, W_POST_NORM), g->R);
  h = op2(g, NM("h_attn"), "add", h, o);
  rx_var *down;
  if (c->experts && c->sparse[l]) { /* its result in R already */
    down = moe(g, f, l, h, W(g, l, W_POST_NORM));
  } else {
    down = mlp(g, f, l, h, W(g, l, c->sandwich ? W_PRE_FF_NORM : W_POST_NORM));
    down = to(g, NULL, down, g->R);
    if (g->tp) down = allreduce(g, NM("mlp_sum"), down);
  }
  if (c->sandwich) down = norm_as(g, NM("mlp_post"), down, W(g, l, W_POST_FF_NORM), g->R);
  return op2(g, NM("h"), "add", h, down);
#undef NM
}

/* The weights as parameters of the function being built. */
static void weight_params(gb *g) {
  g->wv = base_calloc(g->nw, sizeof *g->wv);
  for (size_t i = 0; i < g->nw && !g->err; i++) {
    hf_w *w = &g->w[i];
    if (!w->present) continue;
    const rx_expr *d[3] = {rx_sym_const(g->m, w->shape[0]), rx_sym_const(g->m, w->shape[1]),
                           rx_sym_const(g->m, w->shape[2])};
    g->err = rx_builder_param(g->b, w->param, tensor(g, w->dtype, w->ndim, d), &g->wv[i]);
  }
  if (!g->c->tie_embeddings) return;
  size_t lm = (size_t)(g->c->layers * W_PER_LAYER + G_LM_HEAD);
  g->wv[lm] = g->wv[lm - (G_LM_HEAD - G_EMBED)]; /* tied: the embedding is the output layer */
}

static rx_var *embed(gb *g, const fwd *f, const rx_attr *const *tat);
static rx_var *pp_forward(gb *g, const fwd *f, rx_var *h);
static rx_var *head(gb *g, const fwd *f, rx_var *h, const rx_attr *const *tat);

static rx_status build_forward(gb *g, bool decode) {
  const rx_hf_config *c = g->c;
  g->fn = decode ? "decode" : "prefill";
  g->b = rx_builder_new(g->m, g->fn);
  fwd f = {.decode = decode, .fold = decode && g->max_batch <= HF_FOLD_MAX_BATCH && fold_layers(g)};
  f.b = rx_sym_var(g->m, "b");
  f.n = decode ? f.b : rx_sym_var(g->m, "n");
  const rx_expr *nd[1] = {f.n}, *bd[1] = {f.b};
  g->err = rx_builder_param(g->b, "input_ids", tensor(g, RX_DTYPE_I32, 1, nd), &f.ids);
  if (!g->err) g->err = rx_builder_param(g->b, "cache", rx_sinfo_object(g->m), &f.cache);
  /* the batch: a host object with the sequences' ids and new-token counts, which rx_kv_extend
   * reads; prefill's b comes as a shape value, so that b has its bound at entry (the memory plan
   * sizes the last rows' activations with it) */
  if (!g->err) g->err = rx_builder_param(g->b, "batch", rx_sinfo_object(g->m), &f.batch);
  if (!g->err && !decode)
    g->err = rx_builder_param(g->b, "batch_size", rx_sinfo_shape(g->m, 1, bd), &f.batch_size);
  weight_params(g);
  if (!g->err) g->err = rx_builder_fact(g->b, rx_sym_le(g->m, rx_sym_const(g->m, 1), f.b));
  if (!g->err)
    g->err = rx_builder_fact(g->b, rx_sym_le(g->m, f.b, rx_sym_const(g->m, g->max_batch)));
  if (!g->err && !decode) g->err = rx_builder_fact(g->b, rx_sym_le(g->m, f.b, f.n));
  if (!g->err && !decode)
    g->err = rx_builder_fact(g->b, rx_sym_le(g->m, f.n, rx_sym_const(g->m, g->max_len)));
  const rx_expr *vd[2] = {f.b, rx_sym_const(g->m, c->vocab)};
  rx_builder_set_result(g->b, tensor(g, RX_DTYPE_F32, 2, vd));
  reserve(g, &f);
  /* every layer's pages, before the dataflow blocks */
  rx_var **pages = base_calloc((size_t)c->layers, sizeof *pages);
  const rx_expr *pd[5] = {rx_sym_var(g->m, "pages"), rx_sym_const(g->m, 2),
                          rx_sym_const(g->m, c->kv_heads), rx_sym_const(g->m, 16),
                          rx_sym_const(g->m, c->head_dim)};
  for (int64_t l = g->l0; l < g->l1 && !g->err; l++) { /* the stage's cache holds its layers */
    rx_node *a[2] = {A(g, f.cache), rx_arg_prim(g->b, RX_DTYPE_I64, rx_sym_const(g->m, l - g->l0))};
    char nm[64];
    snprintf(nm, sizeof nm, "kv_pages_%lld", (long long)l);
    rx_var *raw = extern_call(g, NULL, "rx_kv_pages", a, 2);
    pages[l] = match_cast(g, nm, A(g, raw), tensor(g, g->T, 5, pd));
  }
  begin_df(g);
  rotary_tables(g, &f);
  const rx_attr *tat[1] = {rx_attr_int(g->m, "axis", 0)};
  rx_var *h = NULL;
  if (g->pp_rank > 0) { /* a later stage: the hidden states of the stage before */
    end_df(g);
    h = pp_recv(g, "h_in", f.n, c->hidden, g->pp_rank - 1);
    begin_df(g);
  } else {
    h = embed(g, &f, tat);
  }
  for (int64_t l = g->l0; l < g->l1; l++) h = layer(g, &f, l, h, pages[l]);
  free(pages);
  rx_var *out = g->pp && g->pp_rank < g->pp - 1 ? pp_forward(g, &f, h) : head(g, &f, h, tat);
  end_df(g);
  rx_status s = g->err;
  if (!s)
    s = rx_builder_finish(g->b, A(g, out), NULL);
  else
    rx_builder_free(g->b);
  g->b = NULL;
  g->err = NULL;
  free(g->wv);
  g->wv = NULL;
  return s;
}

/* The token ids' rows of the embedding table, in the residual stream's dtype. */
static rx_var *embed(gb *g, const fwd *f, const rx_attr *const *tat) {
  const rx_hf_config *c = g->c;
  rx_var *table = g->wv[c->layers * W_PER_LAYER + G_EMBED], *rows;
  const hf_w *qe = quantized(g, table);
  if (qe) { /* --quantize-embeddings or a quantized GGUF token_embd: each id's row dequantized
               from the packed table */
    rx_node *qa[4] = {A(g, f->ids), A(g, table), qe->qs ? A(g, g->wv[qe->qs]) : NULL,
                      qe->qz ? A(g, g->wv[qe->qz]) : NULL};
    const rx_attr *qat[2] = {rx_attr_str(g->m, "scheme", qe->qi->name),
                             rx_attr_dtype(g->m, "dtype", g->T)};
    int n = qe->qz ? 4 : qe->qs ? 3 : 2; /* a GGUF block format: the one buffer */
    rows = op(g, g->T == g->R ? "embed" : NULL, "quant_take", qa, n, qat, 2);
  } else {
    rx_node *ta[2] = {A(g, table), A(g, f->ids)};
    rows = op(g, g->T == g->R ? "embed" : NULL, "take", ta, 2, tat, 1);
  }
  if (c->embed_scale) { /* Gemma: the rows times sqrt(hidden) rounded to their dtype (a weak
                          constant takes the rows' dtype), as transformers' embed_scale */
    rx_node *ea[2] = {A(g, rows), g->err ? NULL : rx_arg_float(g->b, sqrt((double)c->hidden))};
    rows = op(g, g->T == g->R ? "embed_scaled" : NULL, "multiply", ea, 2, NULL, 0);
  }
  return to(g, "embed", rows, g->R);
}

/* --pipeline-parallel, a stage before the last: h to the next stage; the logits from the last
 * stage on stage 0 (its sampler's), zeros on a middle stage (every stage returns [b, vocab]). */
static rx_var *pp_forward(gb *g, const fwd *f, rx_var *h) {
  end_df(g);
  pp_send(g, "h_out", h, g->pp_rank + 1);
  rx_var *out = g->pp_rank == 0 ? pp_recv(g, "logits", f->b, g->c->vocab, g->pp - 1) : NULL;
  begin_df(g);
  return out ? out : zeros_f32(g, "logits", f->b, g->c->vocab);
}

/* The final norm and lm_head on h: f32 logits [b, vocab] (prefill: each sequence's last row);
 * the last stage of a pipeline sends them to stage 0 too. */
static rx_var *head(gb *g, const fwd *f, rx_var *h, const rx_attr *const *tat) {
  const rx_hf_config *c = g->c;
  if (!f->decode) { /* prefill: each sequence's last token's logits only, so their rows alone */
    rx_node *la[2] = {A(g, h), A(g, f->last)};
    h = op(g, "last_rows", "take", la, 2, tat, 1);
  }
  /* the final norm folds into lm_head in prefill too: its rows are the b <= max_batch last ones */
  fwd last = *f;
  last.fold = g->max_batch <= HF_FOLD_MAX_BATCH;
  rx_var *fnw = g->wv[c->layers * W_PER_LAYER + G_NORM];
  rx_var *xf = last.fold ? NULL : rms_norm(g, "final_norm", h, fnw);
  rx_var *logits =
      normed(g, &last, "logits_t", h, fnw, xf, g->wv[c->layers * W_PER_LAYER + G_LM_HEAD], NULL);
  if (g->tp) logits = allgather_cols(g, "logits_all", logits); /* each rank's vocabulary block */
  rx_var *out = cast(g, c->final_softcap > 0 ? NULL : "logits", logits, RX_DTYPE_F32);
  if (c->final_softcap > 0) { /* Gemma 2: tanh(logits / c) * c */
    rx_node *da[2] = {A(g, out), g->err ? NULL : rx_arg_float(g->b, c->final_softcap)};
    rx_var *t = op1(g, NULL, "tanh", op(g, NULL, "divide", da, 2, NULL, 0));
    rx_node *ma[2] = {A(g, t), g->err ? NULL : rx_arg_float(g->b, c->final_softcap)};
    out = op(g, "logits", "multiply", ma, 2, NULL, 0);
  }
  if (g->pp) { /* the last stage: the logits to stage 0, whose sampler reads them */
    end_df(g);
    out = pp_send(g, "logits_sent", out, 0);
    begin_df(g);
  }
  return out;
}

/* create_kv_cache(capacity, max_seqs): the cache of this model's geometry */
static rx_status build_create(gb *g) {
  g->fn = "create_kv_cache";
  g->b = rx_builder_new(g->m, g->fn);
  rx_var *cap = NULL, *seqs = NULL;
  g->err = rx_builder_param(g->b, "capacity", rx_sinfo_prim(g->m, RX_DTYPE_I64, NULL), &cap);
  if (!g->err)
    g->err = rx_builder_param(g->b, "max_seqs", rx_sinfo_prim(g->m, RX_DTYPE_I64, NULL), &seqs);
  rx_builder_set_result(g->b, rx_sinfo_object(g->m));
  int64_t geo[4] = {g->l1 - g->l0, g->c->kv_heads, g->c->head_dim, (int64_t)g->T};
  rx_node *a[7];
  for (int i = 0; i < 4 && !g->err; i++)
    a[i] = rx_arg_prim(g->b, RX_DTYPE_I64, rx_sym_const(g->m, geo[i]));
  a[4] = A(g, cap);
  a[5] = A(g, seqs);
  a[6] = g->err ? NULL : rx_arg_prim(g->b, RX_DTYPE_I64, rx_sym_const(g->m, g->max_len));
  rx_var *cache = extern_call(g, "cache", "rx_kv_create", a, 7);
  rx_status s = g->err;
  if (!s)
    s = rx_builder_finish(g->b, A(g, cache), NULL);
  else
    rx_builder_free(g->b);
  g->b = NULL;
  g->err = NULL;
  return s;
}

/* The KV cache's builtins, as the module declares them. */
static rx_status declare_externs(gb *g) {
  char text[1024];
  snprintf(text, sizeof text,
           "impure extern_fn rx_kv_create(layers: Prim(i64), kv_heads: Prim(i64), head_dim: "
           "Prim(i64), dtype: Prim(i64), capacity: Prim(i64), max_seqs: Prim(i64), max_seq_len: "
           "Prim(i64)) -> Object\n"
           "impure extern_fn rx_kv_extend(cache: Object, batch: Object, count: Prim(i64)) -> "
           "(i32[ndim=2], i32[ndim=1], i32[ndim=1], i32[ndim=1], i32[ndim=1], i32[ndim=1])\n"
           "impure extern_fn rx_kv_pages(cache: Object, layer: Prim(i64)) -> %s[ndim=5]\n",
           ir_dtype_name(g->T));
  return rx_module_parse(g->m, "<kv cache builtins>", text, strlen(text), NULL);
}

/* The weights by format, for llm.json (relaxc inspect prints them): [{"format": "q4f16_g32" (a
 * quantization scheme, or the dtype of a plain weight), "tensors": N, "weights": W, "bytes": B
 * (packed weights with their scales and zero points)}, ...], in order of first use. */
typedef struct wformat {
  const char *name;
  long long tensors, weights, bytes;
} wformat;

/* The bytes entry w is stored in, with its scales, zero points and GPTQ's g_idx. */
static long long entry_bytes(const gb *g, const hf_w *w) {
  long long b = 0;
  const hf_w *parts[4] = {w, w->qi && w->qs ? &g->w[w->qs] : NULL,
                          w->qi && w->qz ? &g->w[w->qz] : NULL,
                          w->qi && w->qg ? &g->w[w->qg] : NULL};
  for (int k = 0; k < 4; k++) {
    if (!parts[k]) continue;
    long long e = parts[k]->shape[0];
    for (int d = 1; d < parts[k]->ndim; d++) e *= parts[k]->shape[d];
    b += e * (ir_dtype_bits(parts[k]->dtype) / 8);
  }
  return b;
}

static void weight_formats(const gb *g, rx_strbuf *out) {
  enum { MAXF = 16 };
  wformat f[MAXF];
  int nf = 0;
  for (size_t i = 0; i < g->nw; i++) {
    const hf_w *w = &g->w[i];
    if (!w->present || w->derived) continue;
    long long elems =
        w->shape[0] * (w->ndim >= 2 ? w->shape[1] : 1) * (w->ndim == 3 ? w->shape[2] : 1);
    long long bytes = entry_bytes(g, w); /* with the scales and zero points */
    const char *name = w->qi ? w->qi->name : ir_dtype_name(w->dtype);
    int at = 0;
    while (at < nf && strcmp(f[at].name, name)) at++;
    if (at == MAXF) continue;
    if (at == nf) f[nf++] = (wformat){name, 0, 0, 0};
    f[at].tensors++;
    f[at].weights += w->qi ? (w->out ? w->out : elems / w->shape[w->ndim - 1]) * w->in : elems;
    f[at].bytes += bytes;
  }
  base_strbuf_append(out, "[");
  for (int k = 0; k < nf; k++)
    base_strbuf_printf(out,
                       "%s{\"format\": \"%s\", \"tensors\": %lld, \"weights\": %lld, "
                       "\"bytes\": %lld}",
                       k ? ", " : "", f[k].name, f[k].tensors, f[k].weights, f[k].bytes);
  base_strbuf_append(out, "]");
}

/* A mixture of experts' numbers for llm.json (relaxc inspect prints them), NULL for a dense
 * model: {"experts": E, "top_k": k, "sparse_layers": S, "params": P, "active_params": A,
 * "active_bytes": AB, "decode_bytes": D}. P counts every weight of the checkpoint once (the
 * computed rope tables aside); A the weights one token runs through: everything dense (the
 * embedding table and the output layer whole, as model cards count them) and k of the E experts
 * of each sparse layer; AB their bytes as stored. D is what a decode step of one token reads, by
 * what each kernel reads: moe_gemv the rows of the token's k experts only (k / E of each experts
 * tensor), take one row of the embedding table (all of it when it is the tied output layer),
 * every other weight whole. */
static void moe_numbers(const gb *g, rx_strbuf *out) {
  const rx_hf_config *c = g->c;
  long long params = 0, sparse = 0, embed_rows = c->tie_embeddings ? 1 : c->vocab;
  double active = 0, active_bytes = 0, decode = 0;
  for (int64_t l = 0; l < c->layers; l++) sparse += c->sparse[l];
  for (size_t i = 0; i < g->nw; i++) {
    const hf_w *w = &g->w[i];
    if (!w->present || w->derived || !w->hf[0]) continue;
    long long n = w->qi ? w->shape[0] * w->in : w->shape[0];
    for (int d = 1; d < w->ndim && !w->qi; d++) n *= w->shape[d];
    if (w->qi && w->ndim == 3) n = w->shape[0] * w->shape[1] * w->in;
    double share = w->ndim == 3 ? (double)c->top_k / (double)c->experts : 1; /* of the experts */
    double b = (double)entry_bytes(g, w);
    params += n;
    active += share * (double)n;
    active_bytes += share * b;
    decode += i == (size_t)(c->layers * W_PER_LAYER + G_EMBED) ? b / (double)embed_rows : share * b;
  }
  base_strbuf_printf(
      out,
      "{\"experts\": %lld, \"top_k\": %lld, \"sparse_layers\": %lld, \"params\": "
      "%lld, \"active_params\": %.0f, \"active_bytes\": %.0f, \"decode_bytes\": %.0f}",
      (long long)c->experts, (long long)c->top_k, sparse, params, active, active_bytes, decode);
}

/* The tokenizer.json of a GGUF file's tokenizer.ggml.* (none without tokenizer.ggml.model), and
 * the sections. */
static rx_status gguf_sections(gb *g, const char *path, const rx_gguf_file *f) {
  rx_strbuf tok = {0};
  rx_status s = NULL;
  if (gguf_find(f, "tokenizer.ggml.model")) s = hf_gguf_tokenizer_json(f, g->c, &tok);
  if (!s) {
    rx_strbuf fm = {0};
    weight_formats(g, &fm);
    rx_strbuf moe = {0};
    if (g->c->experts) moe_numbers(g, &moe);
    rx_hf_config sc = *g->c; /* llm.json's kv_cache: this stage's layers */
    sc.layers = g->l1 - g->l0;
    s = hf_add_sections(g->m, path, &sc, g->T, g->max_len, g->max_batch, fm.data, moe.data,
                        tok.data, tok.len);
    base_strbuf_free(&moe);
    if (!s) s = hf_add_chat_template(g->m, path, f);
    base_strbuf_free(&fm);
  }
  base_strbuf_free(&tok);
  return s;
}

rx_status hf_import(rx_module *m, const char *dir, const rx_hf_options *o) {
  rx_hf_config c;
  hf_gguf *gf = NULL;
  if (gguf_hf_is_gguf(dir)) {
    if (o && (o->quantize || o->quantize_embeddings || o->no_weights))
      return base_status_make(RX_ERR_INVALID,
                              "%s: --quantize, --quantize-embeddings and --no-weights are for a "
                              "Hugging Face folder; a GGUF "
                              "file's weights are compiled in the formats it holds them in",
                              dir);
    RX_RETURN_IF_ERROR(hf_gguf_open(dir, &c, &gf));
    rx_module_on_free(m, hf_gguf_close, gf); /* the weights point into its mapping */
  } else {
    RX_RETURN_IF_ERROR(hf_read_config(dir, &c));
  }
  gb g = {.m = m, .c = &c};
  rx_hf_config lc; /* --tensor-parallel: this rank's share of c */
  if (o && o->tp_world > 1) {
    rx_status ts = hf_tp_check(&c, o, gf != NULL, o->tp_world);
    if (ts) return base_status_annotate(ts, "%s", dir);
    lc = c;
    lc.heads /= o->tp_world;
    lc.kv_heads /= o->tp_world;
    lc.intermediate /= o->tp_world;
    lc.tie_embeddings = false; /* lm_head is the rank's rows (of the embedding table if tied) */
    g = (gb){.m = m, .c = &lc, .whole = &c, .tp = o->tp_world, .tp_rank = o->tp_rank};
  }
  g.l1 = c.layers;
  if (o && o->pp_world > 1) { /* --pipeline-parallel: this stage's layers */
    rx_status ps = hf_pp_check(&c, o);
    if (ps) return base_status_annotate(ps, "%s", dir);
    g.pp = o->pp_world;
    g.pp_rank = o->pp_rank;
    hf_pp_layers(c.layers, g.pp, g.pp_rank, &g.l0, &g.l1);
  }
  g.T = o && o->dtype != RX_DTYPE_UNKNOWN ? o->dtype : RX_DTYPE_F16;
  g.R = RX_DTYPE_F32;
  if (g.T != RX_DTYPE_F32 && g.T != RX_DTYPE_F16 && g.T != RX_DTYPE_BF16)
    return base_status_make(RX_ERR_INVALID, "%s: dtype %s: expected f32, f16 or bf16", dir,
                            ir_dtype_name(g.T));
  g.max_len = o && o->max_seq_len > 0 ? o->max_seq_len : c.max_positions;
  if (g.max_len > c.max_positions)
    return base_status_make(
        RX_ERR_INVALID, "%s: --max-seq-len %lld exceeds the model's max_position_embeddings %lld",
        dir, (long long)g.max_len, (long long)c.max_positions);
  g.max_batch = o && o->max_batch > 0 ? o->max_batch : RX_HF_DEFAULT_BATCH;
  if (o && o->quantize) {
    if (!base_quant_lookup(o->quantize, &g.qsc) || base_quant_info_of(g.qsc)->kind == RX_QUANT_GGUF)
      return base_status_make(RX_ERR_INVALID,
                              "%s: --quantize %s: expected q4f16_g32, q4f16_g64, q4f16_g128, "
                              "q4f16a_g32, q4f16a_g64, q4f16a_g128, q8f16, q8f16_g64 or q8f16_g128",
                              dir, o->quantize);
    if (g.T == RX_DTYPE_BF16)
      return base_status_make(RX_ERR_UNSUPPORTED,
                              "%s: --quantize computes in f16 or f32, not bf16 (--dtype)", dir);
    g.qi = base_quant_info_of(g.qsc);
  } else if (o && o->quantize_embeddings) {
    return base_status_make(RX_ERR_INVALID,
                            "%s: --quantize-embeddings goes with --quantize SCHEME (the scheme the "
                            "embedding table and the output layer take)",
                            dir);
  }
  if (c.quantized && g.qi)
    return base_status_make(RX_ERR_INVALID,
                            "%s: --quantize %s: the checkpoint is quantized already "
                            "(quantization_config: %s); it compiles in its own format",
                            dir, g.qi->name, c.qmethod);
  if (c.quantized && g.T == RX_DTYPE_BF16)
    return base_status_make(RX_ERR_UNSUPPORTED,
                            "%s: a quantized checkpoint (%s) computes in f16 or f32, not bf16 "
                            "(--dtype)",
                            dir, c.qmethod);
  hf_ckpt *ck = NULL;
  if (!gf && (!o || !o->no_weights)) {
    RX_RETURN_IF_ERROR(hf_ckpt_open(dir, &ck));
    rx_module_on_free(m, hf_ckpt_close, ck); /* the weights point into its mappings */
  }
  list_weights(&g, o && o->quantize_embeddings);
  if (g.tp) tp_shard(&g, c.tie_embeddings);
  rx_status s = add_weights(&g, ck, gf ? hf_gguf_file(gf) : NULL);
  if (!s) s = declare_externs(&g);
  if (!s) s = build_create(&g);
  if (!s) s = build_forward(&g, false);
  if (!s) s = build_forward(&g, true);
  if (!s && gf) s = gguf_sections(&g, dir, hf_gguf_file(gf));
  if (!s && !gf) {
    rx_strbuf fm = {0};
    weight_formats(&g, &fm);
    rx_strbuf moe = {0};
    if (c.experts) moe_numbers(&g, &moe);
    rx_hf_config sc = *g.c; /* llm.json's kv_cache: this stage's layers */
    sc.layers = g.l1 - g.l0;
    s = hf_add_sections(m, dir, &sc, g.T, g.max_len, g.max_batch, fm.data, moe.data, NULL, 0);
    base_strbuf_free(&moe);
    if (!s) s = hf_add_chat_template(m, dir, NULL);
    base_strbuf_free(&fm);
  }
  free(g.w);
  free(g.qkv);
  free(g.bqkv);
  if (s) return base_status_annotate(s, "%s", dir);
  return NULL;
}
