/* frontends/onnx/import_rnn.c: ONNX RNN, GRU and LSTM (see import_rnn.h) over a sequence length
 * that may be symbolic, compiled once for every length.
 *
 * The input projection of every time step is one batched matmul at the graph level: X as
 * [1, T*B, I] times W transposed [D, I, G*H] gives XW [D, T*B, G*H] (D directions, G gates),
 * viewed as [D, T, B, G*H]. The recurrence is one tensor program per node, written here as text
 * and parsed into the module (as ops/legalize.c writes its programs), whose serial loop over the
 * steps has the symbolic T as trip count (so no graph-level loop is needed), t = s forward or
 * len - 1 - s in reverse (len: the row's sequence_lens entry, else T). A step is the
 * matrix-vector product of h_{t-1} with R (into the work row ws) and one fused pass of the gates
 * (sigmoid / tanh, peepholes, clip, the cell update) writing h_t into Y and the state; Y_h and
 * Y_c are the states after each row's last step, and Y is zero past a row's length.
 * Block form (the state fits RNN_SHARED_BYTES): a block per direction and batch row, its threads
 * sharing each step's rows of R and its gates, the state in shared memory, barriers between
 * the phases. Serial form (larger states): a thread per direction and row, the state in the
 * outputs yh, yc and ws. */
#include "import_rnn.h"

#include "import_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

typedef enum rkind { K_RNN, K_GRU, K_LSTM } rkind;
typedef enum rdir { DIR_FORWARD, DIR_REVERSE, DIR_BIDI } rdir;

typedef struct spec {
  rkind k;
  int gates;        /* G: 1, 3, 4 */
  int64_t D, H, GH; /* directions, hidden size, G*H */
  rdir dir;
  bool lbr;    /* GRU's linear_before_reset */
  double clip; /* 0: none */
  int layout;  /* 1: X [B, T, I], Y [B, T, D, H], Y_h [B, D, H] */
  bool has_b, has_seq, has_h0, has_c0, has_p;
  rx_dtype seq_dt;           /* sequence_lens' dtype (i32 in ONNX) */
  int tpb;                   /* the program's form: 0 serial, else threads per block */
  const char *hs, *cs, *wsn; /* the state h, c and the work row, each before its index */
} spec;

/* threads of a block of the block form: enough for the widest phase, at most this many */
#define RNN_THREADS 256
/* the shared memory of the block form at most: maxComputeSharedMemorySize's least value in
 * the Vulkan spec (Required Limits), which CUDA and Metal exceed */
#define RNN_SHARED_BYTES 16384

/* the default activations of each kind (ONNX's operator docs), per direction */
static const char *const default_acts[3][3] = {
    {"Tanh", NULL, NULL}, {"Sigmoid", "Tanh", NULL}, {"Sigmoid", "Tanh", "Tanh"}};

static rx_status unsupported(const char *fmt, const char *what) {
  return base_status_make(RX_ERR_UNSUPPORTED, fmt, what);
}

static bool const_dim(const rx_sinfo *si, int i, int64_t *out) {
  if (!si || si->kind != RX_SINFO_TENSOR || !si->shape || i >= si->ndim) return false;
  if (si->shape[i]->kind != RX_EXPR_CONST) return false;
  *out = si->shape[i]->value;
  return true;
}

static rx_status check_acts(const Onnx__NodeProto *n, const spec *sp) {
  const Onnx__AttributeProto *a = onnx_attr(n, "activations");
  if (!a) return NULL;
  int na = sp->k + 1; /* RNN 1, GRU 2, LSTM 3 */
  if (a->n_strings != (size_t)(na * sp->D))
    return unsupported("attribute 'activations' must name %s per direction",
                       na == 1   ? "one function"
                       : na == 2 ? "two functions"
                                 : "three functions");
  for (size_t i = 0; i < a->n_strings; i++) {
    const char *want = default_acts[sp->k][i % (size_t)na];
    if (a->strings[i].len != strlen(want) ||
        strncasecmp((const char *)a->strings[i].data, want, a->strings[i].len))
      return unsupported("attribute 'activations': only the defaults (%s) are supported",
                         sp->k == K_RNN   ? "Tanh"
                         : sp->k == K_GRU ? "Sigmoid, Tanh"
                                          : "Sigmoid, Tanh, Tanh");
  }
  return NULL;
}

static rx_status read_spec(const Onnx__NodeProto *n, const onnx_rnn_in *in, spec *sp) {
  memset(sp, 0, sizeof *sp);
  sp->k = !strcmp(n->op_type, "LSTM") ? K_LSTM : !strcmp(n->op_type, "GRU") ? K_GRU : K_RNN;
  sp->gates = sp->k == K_LSTM ? 4 : sp->k == K_GRU ? 3 : 1;
  const Onnx__AttributeProto *da = onnx_attr(n, "direction");
  sp->dir = DIR_FORWARD;
  if (da && da->has_s) {
    size_t l = da->s.len;
    const char *s = (const char *)da->s.data;
    if (l == 7 && !strncmp(s, "reverse", 7))
      sp->dir = DIR_REVERSE;
    else if (l == 13 && !strncmp(s, "bidirectional", 13))
      sp->dir = DIR_BIDI;
    else if (!(l == 7 && !strncmp(s, "forward", 7)))
      return unsupported("attribute 'direction' %s: not forward, reverse or bidirectional",
                         "is bad");
  }
  sp->D = sp->dir == DIR_BIDI ? 2 : 1;
  sp->layout = (int)onnx_attr_i(n, "layout", 0);
  if (sp->layout != 0 && sp->layout != 1)
    return unsupported("attribute 'layout' %s: must be 0 or 1", "is bad");
  sp->lbr = onnx_attr_i(n, "linear_before_reset", 0) != 0;
  if (sp->k != K_GRU && onnx_attr(n, "linear_before_reset"))
    return unsupported("attribute '%s' belongs to GRU", "linear_before_reset");
  if (onnx_attr_i(n, "input_forget", 0) != 0)
    return unsupported("attribute '%s' (coupled input and forget gates) is not supported",
                       "input_forget");
  sp->clip = onnx_attr(n, "clip") ? onnx_attr_f(n, "clip", 0) : 0;
  if (onnx_attr(n, "clip") && !(sp->clip > 0))
    return unsupported("attribute '%s' must be positive", "clip");
  RX_RETURN_IF_ERROR(check_acts(n, sp));

  const rx_sinfo *xs = in->xs;
  if (!xs || xs->kind != RX_SINFO_TENSOR || xs->ndim != 3 || !xs->shape)
    return unsupported("input 0 (%s) must be a tensor of rank 3 and known shape", "X");
  if (xs->dtype != RX_DTYPE_F32)
    return unsupported("input 0 (X) is %s: only f32 is supported", ir_dtype_name(xs->dtype));
  int64_t wd, wgh, rd, rgh, rh;
  if (!const_dim(in->ws, 0, &wd) || !const_dim(in->ws, 1, &wgh) || in->ws->ndim != 3)
    return unsupported("input 1 (%s) must be a rank-3 tensor of constant dims [D, G*H, I]", "W");
  if (!const_dim(in->rs, 0, &rd) || !const_dim(in->rs, 1, &rgh) || !const_dim(in->rs, 2, &rh) ||
      in->rs->ndim != 3)
    return unsupported("input 2 (%s) must be a rank-3 tensor of constant dims [D, G*H, H]", "R");
  sp->H = rh;
  sp->GH = sp->gates * rh;
  int64_t hs = onnx_attr_i(n, "hidden_size", rh);
  if (hs != rh || wd != sp->D || rd != sp->D || wgh != sp->GH || rgh != sp->GH)
    return unsupported("inputs W, R and attributes hidden_size, direction %s (W [D, G*H, I], "
                       "R [D, G*H, H], D 2 when bidirectional)",
                       "do not agree");
  if (in->ws->dtype != RX_DTYPE_F32 || in->rs->dtype != RX_DTYPE_F32)
    return unsupported("inputs W and R must be %s like X", "f32");
  sp->has_b = in->b;
  sp->has_seq = in->seq;
  sp->has_h0 = in->h0;
  sp->has_c0 = in->c0 && sp->k == K_LSTM;
  sp->has_p = in->p && sp->k == K_LSTM;
  sp->seq_dt = in->seqs && in->seqs->kind == RX_SINFO_TENSOR ? in->seqs->dtype : RX_DTYPE_I32;
  if (sp->has_seq && sp->seq_dt != RX_DTYPE_I32 && sp->seq_dt != RX_DTYPE_I64)
    return unsupported("input 4 (%s) must be an integer tensor", "sequence_lens");
  return NULL;
}

/* ---- the recurrence's tensor program ---- */

/* the pre-activation of gate g from X: XW plus W's bias */
static void xterm(rx_strbuf *sb, const spec *sp, int g) {
  base_strbuf_printf(sb, "xw[d, t, b, %lld + j]", (long long)(g * sp->H));
  if (sp->has_b) base_strbuf_printf(sb, " + bias[d, %lld + j]", (long long)(g * sp->H));
}

/* the pre-activation of gate g from h_{t-1}: ws plus R's bias */
static void rterm(rx_strbuf *sb, const spec *sp, int g) {
  base_strbuf_printf(sb, "%s%lld + j]", sp->wsn, (long long)(g * sp->H));
  if (sp->has_b) base_strbuf_printf(sb, " + bias[d, %lld + j]", (long long)(sp->GH + g * sp->H));
}

static void clip_open(rx_strbuf *sb, const spec *sp) {
  if (sp->clip > 0) base_strbuf_printf(sb, "min(max(");
}
static void clip_close(rx_strbuf *sb, const spec *sp) {
  if (sp->clip > 0) base_strbuf_printf(sb, ", %.9g), %.9g)", -sp->clip, sp->clip);
}

/* `let NAME: f32 = FN(clip(x_g + r_g EXTRA))` */
static void gate(rx_strbuf *sb, const spec *sp, const char *name, const char *fn, int g,
                 const char *extra) {
  base_strbuf_printf(sb, "          let %s: f32 = %s(", name, fn);
  clip_open(sb, sp);
  xterm(sb, sp, g);
  base_strbuf_printf(sb, " + ");
  rterm(sb, sp, g);
  base_strbuf_printf(sb, "%s", extra);
  clip_close(sb, sp);
  base_strbuf_printf(sb, ")\n");
}

/* the step's time index t of step s (ln: the row's length) */
static void put_lets(rx_strbuf *sb, const spec *sp) {
  base_strbuf_printf(sb, "        let ln: i64 = %s\n", sp->has_seq ? "i64(sl[b])" : "rnn_t");
  base_strbuf_printf(sb, "        let t: i64 = %s\n",
                     sp->dir == DIR_FORWARD   ? "s"
                     : sp->dir == DIR_REVERSE ? "ln - 1 - s"
                                              : "select(d == 1, ln - 1 - s, s)");
}

/* Opens one phase of a step, VAR over 0..n: serially a loop; in a block (sp->tpb) each thread
 * takes every tpb-th, and a phase of the step proper (step) runs while s < ln. */
static void phase_open(rx_strbuf *sb, const spec *sp, const char *var, int64_t n, bool step) {
  if (!sp->tpb) {
    base_strbuf_printf(sb, "        for %s in 0..%lld {\n", var, (long long)n);
    return;
  }
  base_strbuf_printf(sb,
                     "    for tx in 0..%d bind(threadIdx.x) {\n      for i in 0..%lld {\n"
                     "        let %s: i64 = tx + i * %d\n        if %s < %lld {\n",
                     sp->tpb, (long long)((n + sp->tpb - 1) / sp->tpb), var, sp->tpb, var,
                     (long long)n);
  if (step) {
    put_lets(sb, sp);
    base_strbuf_printf(sb, "        if s < ln {\n");
  }
}

/* Closes a phase (zero: Y is 0 at the steps past the row's length), then a barrier. */
static void phase_close(rx_strbuf *sb, const spec *sp, bool step, bool zero) {
  if (!sp->tpb) {
    base_strbuf_printf(sb, "        }\n");
    return;
  }
  if (step && zero)
    base_strbuf_printf(sb, "        } else {\n          y[s, d, b, j] = 0.0\n        }\n");
  else if (step)
    base_strbuf_printf(sb, "        }\n");
  base_strbuf_printf(sb, "        }\n      }\n    }\n    barrier\n");
}

/* WS[q0 + q] = sum_k SRC[k] * r[d, q0 + q, k] for q in 0..nq (SRC, WS: sp's buffer names) */
static void matvec(rx_strbuf *sb, const spec *sp, const char *acc, int64_t q0, int64_t nq,
                   const char *src) {
  phase_open(sb, sp, "q", nq, false);
  base_strbuf_printf(sb,
                     "          alloc %s: f32[1] local\n"
                     "          %s[0] = 0.0\n"
                     "          for k in 0..%lld {\n"
                     "            %s[0] = %s[0] + %sk] * r[d, %lld + q, k]\n"
                     "          }\n"
                     "          %s%lld + q] = %s[0]\n",
                     acc, acc, (long long)sp->H, acc, acc, src, (long long)q0, sp->wsn,
                     (long long)q0, acc);
  phase_close(sb, sp, false, false);
}

/* h_t: Y's row t and the state */
static void put_h(rx_strbuf *sb, const spec *sp, const char *value) {
  base_strbuf_printf(
      sb, "          let hn: f32 = %s\n          y[t, d, b, j] = hn\n          %sj] = hn\n", value,
      sp->hs);
}

static void step_lstm(rx_strbuf *sb, const spec *sp) {
  char ex[96];
  phase_open(sb, sp, "j", sp->H, true);
  ex[0] = 0;
  if (sp->has_p) snprintf(ex, sizeof ex, " + p[d, j] * %sj]", sp->cs);
  gate(sb, sp, "gi", "sigmoid", 0, ex);
  if (sp->has_p)
    snprintf(ex, sizeof ex, " + p[d, %lld + j] * %sj]", (long long)(2 * sp->H), sp->cs);
  gate(sb, sp, "gf", "sigmoid", 2, ex);
  gate(sb, sp, "gg", "tanh", 3, "");
  base_strbuf_printf(sb, "          let cn: f32 = gf * %sj] + gi * gg\n", sp->cs);
  ex[0] = 0;
  if (sp->has_p) snprintf(ex, sizeof ex, " + p[d, %lld + j] * cn", (long long)sp->H);
  gate(sb, sp, "go", "sigmoid", 1, ex);
  base_strbuf_printf(sb, "          %sj] = cn\n", sp->cs);
  put_h(sb, sp, "go * tanh(cn)");
  phase_close(sb, sp, true, true);
}

static void step_gru(rx_strbuf *sb, const spec *sp) {
  long long H = (long long)sp->H;
  if (!sp->lbr) { /* n = tanh(x_n + (r * h) R_n + Rb_n): r first, r * h after the gates' ws */
    phase_open(sb, sp, "j", sp->H, true);
    gate(sb, sp, "gr", "sigmoid", 1, "");
    base_strbuf_printf(sb, "          %s%lld + j] = gr * %sj]\n", sp->wsn, 3 * H, sp->hs);
    phase_close(sb, sp, true, false);
    char src[48];
    snprintf(src, sizeof src, "%s%lld + ", sp->wsn, 3 * H);
    matvec(sb, sp, "acc2", 2 * sp->H, sp->H, src);
  }
  phase_open(sb, sp, "j", sp->H, true);
  gate(sb, sp, "gz", "sigmoid", 0, "");
  if (sp->lbr) { /* n = tanh(x_n + r * (h R_n + Rb_n)) */
    gate(sb, sp, "gr", "sigmoid", 1, "");
    base_strbuf_printf(sb, "          let gn: f32 = tanh(");
    clip_open(sb, sp);
    xterm(sb, sp, 2);
    base_strbuf_printf(sb, " + gr * (");
    rterm(sb, sp, 2);
    base_strbuf_printf(sb, ")");
    clip_close(sb, sp);
    base_strbuf_printf(sb, ")\n");
  } else {
    gate(sb, sp, "gn", "tanh", 2, "");
  }
  char v[64];
  snprintf(v, sizeof v, "(1.0 - gz) * gn + gz * %sj]", sp->hs);
  put_h(sb, sp, v);
  phase_close(sb, sp, true, true);
}

static void step_rnn(rx_strbuf *sb, const spec *sp) {
  phase_open(sb, sp, "j", sp->H, true);
  gate(sb, sp, "gh", "tanh", 0, "");
  put_h(sb, sp, "gh");
  phase_close(sb, sp, true, true);
}

/* the work buffer's length per row: h_{t-1} R for every gate (GRU: r * h_{t-1} after them) */
static int64_t ws_len(const spec *sp) {
  return sp->k == K_GRU && !sp->lbr ? sp->GH + sp->H : sp->GH;
}

/* one step: h_{t-1} R, then the gates */
static void put_step(rx_strbuf *sb, const spec *sp) {
  char src[32];
  snprintf(src, sizeof src, "%s", sp->hs);
  matvec(sb, sp, "acc", 0, sp->k == K_GRU && !sp->lbr ? 2 * sp->H : sp->GH, src);
  if (sp->k == K_LSTM)
    step_lstm(sb, sp);
  else if (sp->k == K_GRU)
    step_gru(sb, sp);
  else
    step_rnn(sb, sp);
}

static void program_head(rx_strbuf *sb, const spec *sp, const char *name) {
  long long D = (long long)sp->D, H = (long long)sp->H, GH = (long long)sp->GH;
  base_strbuf_printf(sb, "tensor_fn %s(xw: f32[%lld, rnn_t, rnn_b, %lld], r: f32[%lld, %lld, %lld]",
                     name, D, GH, D, GH, H);
  if (sp->has_b) base_strbuf_printf(sb, ", bias: f32[%lld, %lld]", D, 2 * GH);
  if (sp->has_seq) base_strbuf_printf(sb, ", sl: %s[rnn_b]", ir_dtype_name(sp->seq_dt));
  if (sp->has_h0) base_strbuf_printf(sb, ", h0: f32[%lld, rnn_b, %lld]", D, H);
  if (sp->has_c0) base_strbuf_printf(sb, ", c0: f32[%lld, rnn_b, %lld]", D, H);
  if (sp->has_p) base_strbuf_printf(sb, ", p: f32[%lld, %lld]", D, 3 * H);
  base_strbuf_printf(sb, ", out y: f32[rnn_t, %lld, rnn_b, %lld], out yh: f32[%lld, rnn_b, %lld]",
                     D, H, D, H);
  if (sp->k == K_LSTM) base_strbuf_printf(sb, ", out yc: f32[%lld, rnn_b, %lld]", D, H);
  base_strbuf_printf(sb, ", out ws: f32[%lld, rnn_b, %lld]) {\n", D, (long long)ws_len(sp));
}

/* Serially: a thread per direction and row walks the steps, the state in yh, yc, ws. */
static char *program_serial(spec *sp, const char *name) {
  rx_strbuf sb = {0};
  sp->tpb = 0;
  sp->hs = "yh[d, b, ";
  sp->cs = "yc[d, b, ";
  sp->wsn = "ws[d, b, ";
  program_head(&sb, sp, name);
  long long H = (long long)sp->H;
  base_strbuf_printf(&sb, "  for d in 0..%lld {\n    for b in 0..rnn_b {\n", (long long)sp->D);
  base_strbuf_printf(&sb, "      for j in 0..%lld {\n        yh[d, b, j] = %s\n", H,
                     sp->has_h0 ? "h0[d, b, j]" : "0.0");
  if (sp->k == K_LSTM)
    base_strbuf_printf(&sb, "        yc[d, b, j] = %s\n", sp->has_c0 ? "c0[d, b, j]" : "0.0");
  base_strbuf_printf(&sb, "      }\n      for s in 0..rnn_t {\n");
  put_lets(&sb, sp);
  base_strbuf_printf(&sb, "        if s < ln {\n");
  put_step(&sb, sp);
  base_strbuf_printf(&sb,
                     "        } else {\n"
                     "          for j in 0..%lld {\n"
                     "            y[s, d, b, j] = 0.0\n"
                     "          }\n"
                     "        }\n      }\n    }\n  }\n}\n",
                     H);
  return base_strbuf_take(&sb);
}

/* In a block per direction and row: its threads share each step's products and gates, the
 * state in shared memory (barriers order the phases; global memory would need device-scope
 * fences on Vulkan and Metal). */
static char *program_block(spec *sp, const char *name) {
  rx_strbuf sb = {0};
  int64_t widest = sp->GH > sp->H ? sp->GH : sp->H;
  sp->tpb = (int)(widest >= RNN_THREADS ? RNN_THREADS : (widest + 31) / 32 * 32);
  sp->hs = "hs[";
  sp->cs = "cs[";
  sp->wsn = "wsh[";
  program_head(&sb, sp, name);
  long long H = (long long)sp->H;
  base_strbuf_printf(&sb, "  for b in 0..rnn_b bind(blockIdx.x), d in 0..%lld bind(blockIdx.y) {\n",
                     (long long)sp->D);
  base_strbuf_printf(&sb, "    alloc hs: f32[%lld] shared\n    alloc wsh: f32[%lld] shared\n", H,
                     (long long)ws_len(sp));
  if (sp->k == K_LSTM) base_strbuf_printf(&sb, "    alloc cs: f32[%lld] shared\n", H);
  phase_open(&sb, sp, "j", sp->H, false);
  base_strbuf_printf(&sb, "          hs[j] = %s\n", sp->has_h0 ? "h0[d, b, j]" : "0.0");
  if (sp->k == K_LSTM)
    base_strbuf_printf(&sb, "          cs[j] = %s\n", sp->has_c0 ? "c0[d, b, j]" : "0.0");
  phase_close(&sb, sp, false, false);
  base_strbuf_printf(&sb, "    for s in 0..rnn_t {\n");
  put_step(&sb, sp);
  base_strbuf_printf(&sb, "    }\n");
  phase_open(&sb, sp, "j", sp->H, false);
  base_strbuf_printf(&sb, "          yh[d, b, j] = hs[j]\n");
  if (sp->k == K_LSTM) base_strbuf_printf(&sb, "          yc[d, b, j] = cs[j]\n");
  phase_close(&sb, sp, false, false);
  base_strbuf_printf(&sb, "  }\n}\n");
  return base_strbuf_take(&sb);
}

/* The block form where its shared state fits the least shared memory Vulkan guarantees. */
static char *program_text(spec *sp, const char *name) {
  int64_t bytes = 4 * (ws_len(sp) + 2 * sp->H);
  return bytes <= RNN_SHARED_BYTES ? program_block(sp, name) : program_serial(sp, name);
}

/* ---- the graph ---- */

static rx_status op1(rx_builder *b, rx_op_id op, rx_node *x, const rx_attr *at, rx_node **out) {
  rx_var *v;
  RX_RETURN_IF_ERROR(rx_emit_op(b, onnx_op_name(op), &x, 1, at ? &at : NULL, at ? 1 : 0, NULL, &v));
  *out = rx_arg_var(b, v);
  return NULL;
}

static rx_status reshape(rx_builder *b, rx_node *x, const rx_expr *const *dims, int k,
                         rx_node **out) {
  rx_node *a[2] = {x, rx_arg_shape(b, dims, k)};
  rx_var *v;
  RX_RETURN_IF_ERROR(rx_emit_op(b, onnx_op_name(RX_OP_reshape), a, 2, NULL, 0, NULL, &v));
  *out = rx_arg_var(b, v);
  return NULL;
}

static rx_status permute(rx_module *m, rx_builder *b, rx_node *x, const int64_t *axes, int k,
                         rx_node **out) {
  return op1(b, RX_OP_permute, x, rx_attr_ints(m, "axes", axes, k), out);
}

/* XW [D, T, B, G*H] = X [T, B, I] W^T, one batched matmul for every step and direction */
static rx_status project(rx_module *m, rx_builder *b, const spec *sp, const onnx_rnn_in *in,
                         const rx_expr *T, const rx_expr *B, const rx_expr *I, rx_node **out) {
  rx_node *x = in->x;
  static const int64_t tbi[3] = {1, 0, 2}, wt[3] = {0, 2, 1};
  if (sp->layout == 1) RX_RETURN_IF_ERROR(permute(m, b, x, tbi, 3, &x));
  const rx_expr *d3[3] = {rx_sym_const(m, 1), rx_sym_mul(m, T, B), I};
  RX_RETURN_IF_ERROR(reshape(b, x, d3, 3, &x));
  rx_node *w;
  RX_RETURN_IF_ERROR(permute(m, b, in->w, wt, 3, &w));
  rx_node *a[2] = {x, w};
  rx_var *v;
  RX_RETURN_IF_ERROR(rx_emit_op(b, onnx_op_name(RX_OP_matmul), a, 2, NULL, 0, NULL, &v));
  const rx_expr *d4[4] = {rx_sym_const(m, sp->D), T, B, rx_sym_const(m, sp->GH)};
  return reshape(b, rx_arg_var(b, v), d4, 4, out);
}

static const rx_sinfo *f32t(rx_module *m, const rx_expr *const *dims, int k) {
  return rx_sinfo_tensor(m, RX_DTYPE_F32, k, dims);
}

/* the program's name: the op in lower case and the first free number (short: kernel names are
 * limited, and an underscore is escaped in them) */
static char *program_name(rx_module *m, const Onnx__NodeProto *n) {
  char op[8] = {0};
  for (int i = 0; i < 7 && n->op_type[i]; i++)
    op[i] = (char)(n->op_type[i] >= 'A' && n->op_type[i] <= 'Z' ? n->op_type[i] - 'A' + 'a'
                                                                : n->op_type[i]);
  for (int k = 0;; k++) {
    rx_strbuf sb = {0};
    base_strbuf_printf(&sb, "onnx%s%d", op, k);
    char *s = base_strbuf_take(&sb);
    if (!ir_module_tensor_fn(m, s)) return s;
    free(s);
  }
}

rx_status onnx_rnn_import(rx_module *m, rx_builder *b, const Onnx__NodeProto *n,
                          const onnx_rnn_in *in, rx_var *out[3]) {
  out[0] = out[1] = out[2] = NULL;
  spec sp;
  RX_RETURN_IF_ERROR(read_spec(n, in, &sp));
  const rx_expr *T = in->xs->shape[sp.layout], *B = in->xs->shape[1 - sp.layout],
                *I = in->xs->shape[2];
  rx_node *xw;
  RX_RETURN_IF_ERROR(project(m, b, &sp, in, T, B, I, &xw));

  char *name = program_name(m, n);
  char *text = program_text(&sp, name);
  rx_status s = rx_module_parse(m, "<onnx recurrence>", text, strlen(text), NULL);
  free(text);
  if (s) {
    free(name);
    return s;
  }
  rx_node *args[7];
  int na = 0;
  args[na++] = xw;
  args[na++] = in->r;
  if (sp.has_b) args[na++] = in->b;
  if (sp.has_seq) args[na++] = in->seq;
  if (sp.has_h0) args[na++] = in->h0;
  if (sp.has_c0) args[na++] = in->c0;
  if (sp.has_p) args[na++] = in->p;
  const rx_expr *Dc = rx_sym_const(m, sp.D), *Hc = rx_sym_const(m, sp.H);
  const rx_expr *dy[4] = {T, Dc, B, Hc}, *dh[3] = {Dc, B, Hc},
                *dw[3] = {Dc, B, rx_sym_const(m, ws_len(&sp))};
  const rx_sinfo *outs[4];
  int no = 0;
  outs[no++] = f32t(m, dy, 4);
  outs[no++] = f32t(m, dh, 3);
  if (sp.k == K_LSTM) outs[no++] = f32t(m, dh, 3);
  outs[no++] = f32t(m, dw, 3);
  rx_var *tup;
  s = rx_emit_call_tensor(b, name, args, na, rx_sinfo_tuple(m, outs, no), NULL, 0, NULL, &tup);
  free(name);
  RX_RETURN_IF_ERROR(s);
  static const int64_t y_bt[4] = {2, 0, 1, 3}, h_bt[3] = {1, 0, 2};
  for (int i = 0; i < no - 1; i++) {
    rx_var *v;
    RX_RETURN_IF_ERROR(rx_emit_get_item(b, rx_arg_var(b, tup), i, NULL, &v));
    if (sp.layout == 1) {
      rx_node *p;
      RX_RETURN_IF_ERROR(permute(m, b, rx_arg_var(b, v), i ? h_bt : y_bt, i ? 3 : 4, &p));
      v = p->var;
    }
    out[i] = v;
  }
  return NULL;
}

/* ---- the handler (onnx_ops[] in import.c) ---- */

/* RNN, GRU, LSTM: import_rnn.c, given the inputs as arguments */
rx_status onnx_do_rnn(imp *I, const Onnx__NodeProto *n, const onnx_op *row) {
  (void)row;
  onnx_rnn_in in = {0};
  rx_node **slot[8] = {&in.x, &in.w, &in.r, &in.b, &in.seq, &in.h0, &in.c0, &in.p};
  for (size_t i = 0; i < 8; i++)
    if (onnx_input(n, i)) RX_RETURN_IF_ERROR(onnx_arg(I, n, onnx_input(n, i), slot[i]));
  if (!in.x || !in.w || !in.r) return onnx_node_err(I, n, "inputs X, W and R are required");
  in.xs = in.x->sinfo; /* a shape value made a tensor too */
  in.ws = in.w->sinfo;
  in.rs = in.r->sinfo;
  in.seqs = in.seq ? in.seq->sinfo : NULL;
  rx_var *out[3];
  RX_RETURN_IF_ERROR(onnx_at_node(I, n, onnx_rnn_import(I->m, I->b, n, &in, out)));
  for (size_t i = 0; i < n->n_output && i < 3; i++)
    if (n->output[i] && n->output[i][0]) {
      if (!out[i]) return onnx_node_err(I, n, "output %zu is not defined for %s", i, n->op_type);
      onnx_def_named(I, n->output[i], out[i]);
    }
  return NULL;
}
