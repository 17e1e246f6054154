/* ops/legalize_int.h: what ops/legalize.c (the driver and the writer) shares with the generators
 * of the family files (ops/elementwise.c, linalg.c, manip.c, reduce.c, create.c, nn.c,
 * attention.c, conv.c, ...), and nothing else includes: the legalization context of one op call
 * (its operands, the program text being written, the names taken), the helpers a generator
 * writes its program with, and the generators named in ops.def's legalization column.
 *
 * A generator writes the body of a tensor program as text (docs/text-format.md) with lz_line;
 * ops_legalize_call (ops/legalize.c) adds the signature and parses it into the module. Names of
 * buffers, loop variables and locals come from lz_fresh / lz_loopvar, so they never collide with
 * the symbolic variables of the call; symbolic expressions are written with lz_ex, which records
 * the variables the program uses (those no buffer defines become scalar parameters). */
#ifndef RX_OPS_LEGALIZE_INT_H
#define RX_OPS_LEGALIZE_INT_H

#include "legalize.h"

#define LZ_MAXR      8  /* most dims of an operand */
#define LZ_MAXOP     64 /* most tensor operands */
#define LZ_MAXARGS   16 /* most arguments of a call */
#define LZ_ARG_NAMES 8  /* arguments named after the op's own names (the rest are "x") */

/* A tensor operand: a buffer parameter, or a scalar folded into the program as text. */
typedef struct lz_opnd {
  bool scalar;
  const char *text; /* scalar: expression text (in the dtype `dtype`, or a weak literal) */
  double fval;      /* scalar literal value (for clip-like uses) */
  bool literal;     /* scalar is a literal */
  bool is_int;      /* literal: an integer, exactly ival (fval may round it past 2^53) */
  int64_t ival;
  const char *name; /* buffer */
  rx_dtype dtype;
  int ndim;
  const rx_expr *const *shape;
  rx_node *node; /* the argument node (what the call_tensor passes) */
  bool inplace;  /* the argument the program writes in place (ops_legalize_inplace_arg): it is
                    the program's output parameter, not an input */
} lz_opnd;

typedef struct lz_ctx {
  rx_module *m;
  rx_expr_ctx *cx;
  const rx_node *call;
  rx_diag *diag;
  bool failed;
  rx_strbuf body;
  int ind;
  rx_ptrvec names; /* taken names (interned in m) */
  rx_ptrvec used;  /* symbolic variables the program text uses */
  rx_ptrvec loops; /* loop variables (rx_expr vars) */
  lz_opnd ops[LZ_MAXOP];
  int nops;
  int argop[LZ_MAXARGS]; /* first operand index of each call argument; -1: not an operand */
  int argn[LZ_MAXARGS];  /* operands of each call argument (tuples: fields) */
  lz_opnd outs[64];
  int nouts;
  char lit[64];
  /* where the call is, for the messages of run-time checks ("main: binding `y` (take)"), or
   * NULL (then the op's name); site_used: a check named it (ops_legalize_call_at) */
  const char *site;
  bool site_used;
} lz_ctx;

/* Reports "cannot legalize OP: ..." at the call (once) and marks the context failed. */
void lz_fail(lz_ctx *l, const char *fmt, ...) RX_PRINTF(2, 3);
/* printf into the module arena. */
const char *lz_str(lz_ctx *l, const char *fmt, ...) RX_PRINTF(2, 3);
/* One line of program text at the current indentation (l->ind). */
void lz_line(lz_ctx *l, const char *fmt, ...) RX_PRINTF(2, 3);
/* `}` one level out. */
void lz_close(lz_ctx *l);
/* A fresh name from base (base, base_1, ...), reserved for the program. */
const char *lz_fresh(lz_ctx *l, const char *base);
/* A fresh loop variable named from base. */
const char *lz_loopvar(lz_ctx *l, const char *base);
/* Opens `for c in 0..ceil(count / threads) { if e < count {` over a block's `threads` threads
 * (thread variable tx, loop variable c) and returns e = tx + c * threads, the thread's item of
 * the step (two levels to close). */
const rx_expr *lz_open_thread_items(lz_ctx *l, const char *tx, const char *c, int64_t threads,
                                    const rx_expr *count);
/* Text of a symbolic expression (parenthesized unless atomic); its variables are recorded. */
const char *lz_ex(lz_ctx *l, const rx_expr *e);
/* A float literal that reads back as a float (inf, nan and negatives parenthesized). */
const char *lz_flit(lz_ctx *l, double v);
/* An integer literal of value v, exact over the whole i64 range. */
const char *lz_ilit(lz_ctx *l, int64_t v);
/* text of dtype t converted to the dtype its math is done in (f32 for f16/bf16), and back. */
const char *lz_up(lz_ctx *l, rx_dtype t, const char *text);
const char *lz_down(lz_ctx *l, rx_dtype t, const char *text);
/* Load of operand o at index texts idx (o->ndim of them). */
const char *lz_load(lz_ctx *l, const lz_opnd *o, const char *const *idx);
/* Load of o broadcast (NumPy, from the right) to an r-dim nest with vars ov and dims od. */
const char *lz_load_bcast(lz_ctx *l, const lz_opnd *o, const char *const *ov,
                          const rx_expr *const *od, int r);
/* An index read from data (t: the name of an i64 local) along an axis of extent d: checked
 * against [-d, d) at run time (ir.h, RX_INTRIN_CHECK; negative indices count from the end, as
 * ONNX says), wrapped, and clamped into [0, d) so the read never leaves the buffer. Writes the
 * lets; returns the name of the local to index with. */
const char *lz_data_index(lz_ctx *l, const char *t, const rx_expr *d, int axis);
/* The operand of call argument i. */
lz_opnd *lz_arg(lz_ctx *l, int i);

/* A literal of dtype dt with value v (an integer one: v truncated, saturated to the i64 range;
 * NaN 0). */
const char *lz_lit(lz_ctx *l, rx_dtype dt, double v);
/* Scalar literal o as a literal of dtype dt (an integer one keeps its exact value). */
const char *lz_olit(lz_ctx *l, const lz_opnd *o, rx_dtype dt);
/* Scalar operand o as text of dtype dt. */
const char *lz_scalar_as(lz_ctx *l, const lz_opnd *o, rx_dtype dt);
/* Makes the scalar operands' text of dtype dt (the op's compute dtype). */
void lz_scalars_to(lz_ctx *l, rx_dtype dt);
/* f16 or bf16; the dtype float math is done in for values of dtype t (f32 for those). */
bool lz_is_half(rx_dtype t);
rx_dtype lz_mathdt(rx_dtype t);
/* The lowest (hi false) or highest value of dtype t as text (init of max / min reductions). */
const char *lz_lowest(lz_ctx *l, rx_dtype t, bool hi);
/* Opens nested loops `for v in 0..ext {` for each dim (a perfect nest); closes n levels. */
void lz_for_nest(lz_ctx *l, const char *const *vars, const rx_expr *const *ext, int n);
void lz_close_n(lz_ctx *l, int n);
/* `reduce r0 in 0..e0, r1 in 0..e1 {` */
void lz_reduce_open(lz_ctx *l, const char *const *vars, const rx_expr *const *ext, int n);
/* Loop variables for an n-dim nest: i0, i1, ... */
void lz_nest_vars(lz_ctx *l, const char *base, int n, const char **out);
/* Axis attribute normalized against ndim (dflt when absent); reported when out of range. */
int lz_axis_attr(lz_ctx *l, const char *name, int64_t dflt, int ndim);
/* Axes attribute normalized into out; none -> all (dflt_all) or the last axis. Returns the
 * count. */
int lz_axes_attr(lz_ctx *l, const char *name, int ndim, bool dflt_all, int *out);
/* yv = the sum over the reduce variables kv (extents ke) of av * bv; f16 and bf16 results
 * accumulate in an f32 local, rounded once at the end (matmul, conv2d's direct form). */
void lz_sum_of_products(lz_ctx *l, const char *yv, rx_dtype t, const char *const *kv,
                        const rx_expr *const *ke, int nk, const char *av, const char *bv);
/* ops.def's formula column for the call's op (NULL where the generator computes the value). */
const char *lz_formula(const lz_ctx *l);

/* ---- the generators named in ops.def's legalization column, by family file ---- */
/* ops/elementwise.c */
void lz_gen_unary(lz_ctx *l);
void lz_gen_unary_math(lz_ctx *l);
void lz_gen_relu(lz_ctx *l);
void lz_gen_gelu(lz_ctx *l);
void lz_gen_clip(lz_ctx *l);
void lz_gen_cast(lz_ctx *l);
void lz_gen_check_nonzero(lz_ctx *l);
void lz_gen_binary(lz_ctx *l);
/* ops/linalg.c */
void lz_gen_matmul(lz_ctx *l);
/* ops/manip.c */
void lz_gen_reshape(lz_ctx *l);
void lz_gen_permute(lz_ctx *l);
void lz_gen_expand(lz_ctx *l);
void lz_gen_squeeze(lz_ctx *l);
void lz_gen_concat(lz_ctx *l);
void lz_gen_split(lz_ctx *l);
void lz_gen_strided_slice(lz_ctx *l);
void lz_gen_take(lz_ctx *l);
void lz_gen_take_along_axis(lz_ctx *l);
/* ops/reduce.c */
void lz_gen_reduce(lz_ctx *l);
void lz_gen_argmax(lz_ctx *l);
void lz_gen_cumsum(lz_ctx *l);
void lz_gen_topk(lz_ctx *l);
void lz_gen_softmax(lz_ctx *l);
void lz_gen_layer_norm(lz_ctx *l);
void lz_gen_rms_norm(lz_ctx *l);
/* ops/create.c */
void lz_gen_full(lz_ctx *l);
void lz_gen_arange(lz_ctx *l);
/* ops/nn.c */
void lz_gen_rope(lz_ctx *l);
void lz_gen_pool(lz_ctx *l);
void lz_gen_batch_norm(lz_ctx *l);

/* conv2d's and the pools' window attributes (ops_nn_window); false, reported, when malformed. */
bool lz_window(lz_ctx *l, bool pool, rx_nn_win *w);
/* conv2d as a direct multiply-accumulate reduce per output point (ops/nn.c): the
 * portable form beside ops/conv.c's matrix-unit forms. */
void lz_conv2d_direct(lz_ctx *l, const rx_nn_win *win);
/* conv2d: implicit GEMM on matrix units where the target has them, else the direct form
 * (ops/conv.c, named in ops.def). */
void lz_gen_conv2d(lz_ctx *l);

/* ops/attention.c */
void lz_gen_attention(lz_ctx *l);
void lz_gen_kv_append(lz_ctx *l);
void lz_gen_paged_attention(lz_ctx *l);
void lz_gen_paged_decode_attention(lz_ctx *l);
void lz_gen_attention_merge(lz_ctx *l);
/* ops/kv_rope.c */
void lz_gen_kv_append_rope(lz_ctx *l);
/* ops/ragged.c */
void lz_gen_ragged_softmax(lz_ctx *l);
void lz_gen_ragged_attention(lz_ctx *l);
/* ops/quant.c */
void lz_gen_quant_matmul(lz_ctx *l);
void lz_gen_rms_norm_matmul(lz_ctx *l);
void lz_gen_quant_take(lz_ctx *l);
/* The element W[row, r] of a quantized weight (qi's buffers w, s, z: names, s and z NULL where
 * the scheme has none) as an f32 expression, its lets written at the current indentation; row
 * is the index text of the weight's leading dims ("e, j" for experts stacked [E, N, ...]). */
struct rx_quant_info;
const char *lz_quant_element(lz_ctx *l, const struct rx_quant_info *qi, const char *w,
                             const char *s, const char *z, const char *row, const char *r);
/* ops/moe.c */
void lz_gen_moe_group(lz_ctx *l);
void lz_gen_moe_matmul(lz_ctx *l);
void lz_gen_moe_gemv(lz_ctx *l);
/* ops/signal.c */
void lz_gen_dft(lz_ctx *l);
void lz_gen_nms(lz_ctx *l);
void lz_gen_roi_align(lz_ctx *l);
void lz_gen_tfidf(lz_ctx *l);

/* ops/scatter.c */
void lz_gen_scatter_elements(lz_ctx *l);
void lz_gen_einsum(lz_ctx *l);
/* ops/det.c */
void lz_gen_det(lz_ctx *l);
/* ops/pool_index.c */
void lz_gen_max_pool2d_index(lz_ctx *l);
/* ops/grid_sample.c */
void lz_gen_grid_sample(lz_ctx *l);

#endif
