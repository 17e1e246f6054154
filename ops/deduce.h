/* ops/deduce.h: what the op deduction files share (internal to ops/).
 *
 * The deduce functions named in ops/ops.def are declared here from that list; the helpers
 * below read arguments and attributes, compare symbolic dims with the analyzer and report
 * errors in one voice. Every helper that can fail reports the error itself and returns
 * NULL/false, so a deduce function just propagates the failure. */
#ifndef RX_OPS_DEDUCE_H
#define RX_OPS_DEDUCE_H

#include "ops.h"

#define OP(id, name, min_args, max_args, attrs, deduce, pattern, legalize, formula, batch, doc)    \
  const rx_sinfo *deduce(rx_deduce_ctx *dc, const rx_node *call);
#include "ops.def"
#undef OP

/* ---- struct info ---- */
/* The text of s in the module arena (for messages). */
const char *ops_str(rx_deduce_ctx *dc, const rx_sinfo *s);
/* Argument i viewed as a tensor: a Prim argument is a 0-d tensor of its dtype. Reports "OP
 * expects a tensor as argument i (what), got ..." and returns NULL for anything else. An
 * Object argument gives an unknown-rank tensor of unknown dtype. */
const rx_sinfo *ops_tensor_arg(rx_deduce_ctx *dc, const rx_node *call, int i, const char *what);
/* Argument i is a bare literal (weakly typed: adopts the other operand's dtype). */
bool ops_is_weak(const rx_node *call, int i);
/* Tensor struct info that copies dims (dims may be NULL: rank only; a 0-d result always has
 * its (empty) shape known). */
const rx_sinfo *ops_tensor(rx_deduce_ctx *dc, rx_dtype dtype, int ndim, const rx_expr **dims);
/* Rank-only result where the inputs had known shapes: warns "OP falls back to rank-only
 * (why); use match_cast to recover the shape" and returns dtype[ndim=ndim] (ndim -1: [...]). */
const rx_sinfo *ops_fallback(rx_deduce_ctx *dc, rx_dtype dtype, int ndim, const char *why);
/* Requires a floating-point (or unknown) dtype; reports and returns false otherwise. */
bool ops_need_float(rx_deduce_ctx *dc, const rx_sinfo *t, const char *what);
/* An array of n dims in the arena. */
const rx_expr **ops_dims(rx_deduce_ctx *dc, int n);

/* ---- symbolic dims ---- */
rx_expr_ctx *ops_ctx(rx_deduce_ctx *dc);
const rx_expr *ops_simplify(rx_deduce_ctx *dc, const rx_expr *e);
/* a == b: pointer-equal (after simplification with the facts) or proven. */
rx_tribool ops_dim_eq(rx_deduce_ctx *dc, const rx_expr *a, const rx_expr *b);
/* prove(cond) with the function's facts; unknown without an analyzer. */
rx_tribool ops_prove(rx_deduce_ctx *dc, const rx_expr *cond);
/* Product of dims (1 for none), simplified. */
const rx_expr *ops_prod(rx_deduce_ctx *dc, const rx_expr *const *dims, int n);
/* Text of an expression in the arena. */
const char *ops_expr_str(rx_deduce_ctx *dc, const rx_expr *e);

/* ---- attributes ---- */
/* Integer attribute (INT or BOOL), or dflt when absent. */
int64_t ops_int_attr(const rx_node *call, const char *name, int64_t dflt);
/* Normalizes axis against ndim (negative counts from the end); reports "axis A is out of
 * range for rank R" and returns false when out of range. */
bool ops_norm_axis(rx_deduce_ctx *dc, int64_t axis, int ndim, int *out);
/* A list-of-axes attribute (INTS, or a single INT) normalized against ndim, checked for range
 * and duplicates; *present false (and *n 0) when absent. Returns false after an error. */
bool ops_axes_attr(rx_deduce_ctx *dc, const rx_node *call, const char *name, int ndim,
                   int **out_axes, int *out_n, bool *present);

#endif
