/* frontends/onnx/import_rt.c: the ONNX importer's operator inputs given at run time (axes,
 * starts, ends, steps, Range's bounds) for Squeeze, Unsqueeze, the Reduce ops, Slice and Range,
 * and the operators whose result size is known only at run time: NonZero, Compress, Unique. */
#include "import_int.h"

#include <math.h>
#include <stdio.h>

/* ---- operator inputs given at run time: axes, starts, ends, steps, Range's bounds ----
 * ONNX passes these as tensors. A constant or a shape value takes the compile-time paths
 * (onnx_do_squeeze, onnx_do_reduce, onnx_do_slice, onnx_do_range: no run-time cost); a tensor
 * computed when the program runs (a graph input) gets the result's dims computed by small i64
 * kernels over the input's dims, bound to fresh dims by tensor_to_shape and a match_cast
 * (onnx_runtime_sym), and the data moved by a reshape (a view) or one gather at run-time indices
 * (onnx_gather_grid). Axes are normalized (a negative one counts from the end) but an axis out of
 * range or repeated is not detected at run time: it selects no axis, and the VM's checks of the
 * element count and the bound dims report what follows. */

/* Is input i a tensor computed when the program runs? */
static bool rt_tensor_input(imp *I, const Onnx__NodeProto *n, size_t i) {
  val *v = onnx_input(n, i) ? onnx_get(I, onnx_input(n, i)) : NULL;
  return v && v->kind == V_TENSOR;
}

/* The number of values of integer input i (a scalar: 1), -1 when absent or not known. */
static int rt_len(imp *I, const Onnx__NodeProto *n, size_t i) {
  val *v = onnx_input(n, i) ? onnx_get(I, onnx_input(n, i)) : NULL;
  if (v && v->kind == V_SYM) return v->slen;
  return v ? onnx_runtime_len(v) : -1;
}

/* cast(x, dt) */
rx_status onnx_rt_cast(imp *I, const Onnx__NodeProto *n, rx_node *x, rx_dtype dt, rx_node **out) {
  const rx_attr *at = rx_attr_dtype(I->m, "dtype", dt);
  return onnx_exa(I, n, RX_OP_cast, &x, 1, &at, 1, out, NULL);
}

/* op(x, axes=[axis], keepdims) */
static rx_status rt_reduce(imp *I, const Onnx__NodeProto *n, rx_op_id op, rx_node *x, int64_t axis,
                           bool keepdims, rx_node **out) {
  const rx_attr *at[2] = {rx_attr_ints(I->m, "axes", &axis, 1),
                          rx_attr_bool(I->m, "keepdims", keepdims)};
  return onnx_exa(I, n, op, &x, 1, at, 2, out, NULL);
}

/* The sum of x (bool or integer) along axis as i64: counts of true elements, indices. */
static rx_status rt_count(imp *I, const Onnx__NodeProto *n, rx_node *x, int64_t axis, bool keepdims,
                          rx_node **out) {
  RX_RETURN_IF_ERROR(onnx_rt_cast(I, n, x, RX_DTYPE_I64, &x));
  return rt_reduce(I, n, RX_OP_sum, x, axis, keepdims, out);
}

/* Integer input i (a scalar or 1-D; a graph input or a shape value) as an i64 tensor. */
static rx_status rt_i64(imp *I, const Onnx__NodeProto *n, size_t i, rx_node **out) {
  val *v = onnx_input(n, i) ? onnx_get(I, onnx_input(n, i)) : NULL;
  rx_var *t = NULL;
  if (v && v->kind == V_SYM)
    RX_RETURN_IF_ERROR(onnx_sym_tensor(I, n, v, &t));
  else if (v && v->kind == V_TENSOR)
    t = v->var;
  const rx_sinfo *si = t ? rx_var_sinfo(t) : NULL;
  if (!si || si->kind != RX_SINFO_TENSOR || !ir_dtype_is_int(si->dtype) || si->ndim > 1 ||
      si->ndim < 0)
    return onnx_node_err(I, n, "input %zu must be an integer scalar or 1-D tensor", i);
  *out = rx_arg_var(I->b, t);
  return si->dtype == RX_DTYPE_I64 ? NULL : onnx_rt_cast(I, n, *out, RX_DTYPE_I64, out);
}

/* Axes ax (i64) normalized for a rank: where(ax < 0, ax + rank, ax). */
static rx_status rt_norm_axes(imp *I, const Onnx__NodeProto *n, rx_node *ax, int rank,
                              rx_node **out) {
  rx_var *r;
  rx_node *neg, *up;
  EX2(RX_OP_less, ax, rx_arg_int(I->b, 0), neg);
  EX2(RX_OP_add, ax, rx_arg_int(I->b, rank), up);
  EX3(RX_OP_where, neg, up, ax, *out);
  return NULL;
}

/* The bool [rank, k] matrix of (p == ax[j]) for each position p < rank and axis ax[j]. */
static rx_status rt_axis_matrix(imp *I, const Onnx__NodeProto *n, rx_node *ax, int rank,
                                rx_node **out) {
  rx_var *r;
  rx_node *p;
  RX_RETURN_IF_ERROR(onnx_iota(I, n, rx_sym_const(I->m, 0), rx_sym_const(I->m, rank), &p));
  RX_RETURN_IF_ERROR(onnx_trailing_units(I, n, p, 1, &p));
  EX2(RX_OP_equal, p, ax, *out);
  return NULL;
}

/* The sum along axis 1 of where(m, v, 0) (v NULL: 1), i64 [rank]: how many of the axes are p,
 * or the value given for axis p. A where, not a product: a multiply and a sum of i64 would be
 * scheduled as a GEMV with subgroup operations on i64, which Vulkan devices may lack
 * (shaderSubgroupExtendedTypes). */
static rx_status rt_axis_sum(imp *I, const Onnx__NodeProto *n, rx_node *m, rx_node *v,
                             rx_node **out) {
  rx_var *r;
  rx_node *t;
  if (!v) return rt_count(I, n, m, 1, false, out);
  EX3(RX_OP_where, m, v, rx_arg_int(I->b, 0), t);
  return rt_reduce(I, n, RX_OP_sum, t, 1, false, out);
}

/* The dims of a tensor of known shape as an i64 tensor [rank]. */
static rx_status rt_dims_tensor(imp *I, const Onnx__NodeProto *n, const rx_sinfo *si,
                                rx_node **out) {
  val xs = {.kind = V_SYM, .sndim = 1, .slen = si->ndim};
  for (int k = 0; k < si->ndim; k++) xs.s[k] = si->shape[k];
  rx_var *t;
  RX_RETURN_IF_ERROR(onnx_sym_tensor(I, n, &xs, &t));
  *out = rx_arg_var(I->b, t);
  return NULL;
}

/* The dims dims [rank] (i64) without those where drop [rank] (i64) is not 0, as an i64 tensor
 * [kept]: kept position q takes the dim whose exclusive count of kept dims before it is q. */
static rx_status rt_kept_dims(imp *I, const Onnx__NodeProto *n, rx_node *dims, rx_node *drop,
                              int kept, rx_node **out) {
  rx_var *r;
  rx_node *keep, *pos, *q, *sel;
  EX2(RX_OP_equal, drop, rx_arg_int(I->b, 0), keep);
  RX_RETURN_IF_ERROR(onnx_rt_cast(I, n, keep, RX_DTYPE_I64, &pos));
  const rx_attr *at[2] = {rx_attr_int(I->m, "axis", 0), rx_attr_bool(I->m, "exclusive", true)};
  RX_RETURN_IF_ERROR(onnx_exa(I, n, RX_OP_cumsum, &pos, 1, at, 2, &pos, NULL));
  RX_RETURN_IF_ERROR(onnx_iota(I, n, rx_sym_const(I->m, 0), rx_sym_const(I->m, kept), &q));
  RX_RETURN_IF_ERROR(onnx_trailing_units(I, n, q, 1, &q));
  EX2(RX_OP_equal, pos, q, sel);
  EX2(RX_OP_logical_and, sel, keep, sel);
  EX3(RX_OP_where, sel, dims, rx_arg_int(I->b, 0), sel);
  return rt_reduce(I, n, RX_OP_sum, sel, 1, false, out);
}

/* The i64 tensor shp ([len], or a scalar) computed at run time as fresh dims (onnx_runtime_sym). */
static rx_status rt_bind(imp *I, const Onnx__NodeProto *n, rx_node *shp, const rx_expr **dims) {
  val tmp = {.kind = V_TENSOR, .var = shp->var};
  RX_RETURN_IF_ERROR(onnx_runtime_sym(I, n, &tmp));
  for (int k = 0; k < tmp.slen; k++) dims[k] = tmp.s[k];
  return NULL;
}

/* x reshaped (a view) to the shape held by the i64 tensor shp [len] computed at run time; the
 * result's dims are fresh, bound when the program runs (as Reshape by a run-time shape). */
static rx_status rt_reshape(imp *I, const Onnx__NodeProto *n, rx_var *x, rx_node *shp, int len,
                            rx_var **out) {
  rx_var *t, *rr;
  RX_RETURN_IF_ERROR(onnx_emit(I, n, RX_OP_tensor_to_shape, &shp, 1, NULL, 0, &t));
  rx_node *a[2] = {rx_arg_var(I->b, x), rx_arg_var(I->b, t)};
  RX_RETURN_IF_ERROR(onnx_emit(I, n, RX_OP_reshape, a, 2, NULL, 0, &rr));
  const rx_expr *dims[SYM_MAX];
  for (int k = 0; k < len; k++) dims[k] = onnx_fresh_dim(I);
  if (!onnx_match_cast_to(I, rr, rx_var_sinfo(x)->dtype, len, dims, out))
    return onnx_node_err(I, n, "match_cast of the reshaped value failed");
  return NULL;
}

/* The input's shape for the run-time paths: a tensor of known rank and dims. */
static rx_status rt_input_shape(imp *I, const Onnx__NodeProto *n, const char *what,
                                const rx_sinfo **out) {
  val *x = onnx_input(n, 0) ? onnx_get(I, onnx_input(n, 0)) : NULL;
  *out = x && x->kind == V_TENSOR ? onnx_shaped(I, n, 0) : NULL;
  if (!*out)
    return onnx_node_err(I, n, "%s computed at run time need input 0 to be a tensor of known rank",
                         what);
  return NULL;
}

/* Unsqueeze's result dims [rank] for the normalized axes ax of a rank-r input with dims xs:
 * 1 at an axis, else the input's dim at p - (the number of axes before p). */
static rx_status rt_unsqueeze_dims(imp *I, const Onnx__NodeProto *n, rx_node *ax, rx_node *xs,
                                   int r, int rank, rx_node **out) {
  rx_var *rv;
  rx_node *cnt, *p, *pc, *before;
  RX_RETURN_IF_ERROR(rt_axis_matrix(I, n, ax, rank, &cnt));
  RX_RETURN_IF_ERROR(rt_axis_sum(I, n, cnt, NULL, &cnt));
  RX_RETURN_IF_ERROR(onnx_iota(I, n, rx_sym_const(I->m, 0), rx_sym_const(I->m, rank), &p));
  RX_RETURN_IF_ERROR(onnx_trailing_units(I, n, p, 1, &pc));
  RX_RETURN_IF_ERROR(onnx_ex(I, n, RX_OP_less, 2, ax, pc, NULL, &before, &rv));
  RX_RETURN_IF_ERROR(rt_count(I, n, before, 1, false, &before));
  RX_RETURN_IF_ERROR(onnx_ex(I, n, RX_OP_subtract, 2, p, before, NULL, &p, &rv));
  RX_RETURN_IF_ERROR(onnx_ex(I, n, RX_OP_maximum, 2, p, rx_arg_int(I->b, 0), NULL, &p, &rv));
  RX_RETURN_IF_ERROR(onnx_ex(I, n, RX_OP_minimum, 2, p, rx_arg_int(I->b, r - 1), NULL, &p, &rv));
  RX_RETURN_IF_ERROR(onnx_take_at(I, n, xs, p, 0, &p, &rv));
  RX_RETURN_IF_ERROR(onnx_ex(I, n, RX_OP_greater, 2, cnt, rx_arg_int(I->b, 0), NULL, &cnt, &rv));
  return onnx_ex(I, n, RX_OP_where, 3, cnt, rx_arg_int(I->b, 1), p, out, &rv);
}

/* Squeeze and Unsqueeze; axes computed at run time (input 1 a graph input) give the result's
 * dims as a run-time shape and x reshaped to it. */
rx_status onnx_do_squeeze_any(imp *I, const Onnx__NodeProto *n, const onnx_op *row) {
  if (onnx_attr(n, "axes") || !rt_tensor_input(I, n, 1)) return onnx_do_squeeze(I, n, row);
  const rx_sinfo *si;
  RX_RETURN_IF_ERROR(rt_input_shape(I, n, "axes", &si));
  bool unsq = n->op_type[0] == 'U';
  int k = rt_len(I, n, 1), r = si->ndim, rank = unsq ? r + k : r - k;
  if (k < 0)
    return onnx_node_err(I, n, "input 1 (axes) must be a 1-D integer tensor of constant length");
  if (rank < 0 || rank > SYM_MAX)
    return onnx_node_err(I, n, "%d axes for an input of rank %d: a result of rank %d", k, r, rank);
  rx_var *x = onnx_get(I, onnx_input(n, 0))->var, *out;
  const rx_expr *ones[SYM_MAX];
  for (int i = 0; i < rank; i++) ones[i] = rx_sym_const(I->m, 1);
  if ((unsq && r == 0) || (!unsq && rank == 0)) { /* every dim is 1 */
    rx_node *t;
    RX_RETURN_IF_ERROR(onnx_reshape_to(I, n, rx_arg_var(I->b, x), ones, rank, &t, &out));
    onnx_def_tensor(I, n, out);
    return NULL;
  }
  rx_node *ax, *xs, *shp;
  RX_RETURN_IF_ERROR(rt_i64(I, n, 1, &ax));
  RX_RETURN_IF_ERROR(rt_norm_axes(I, n, ax, unsq ? rank : r, &ax));
  RX_RETURN_IF_ERROR(rt_dims_tensor(I, n, si, &xs));
  if (unsq) {
    RX_RETURN_IF_ERROR(rt_unsqueeze_dims(I, n, ax, xs, r, rank, &shp));
  } else {
    rx_node *drop;
    RX_RETURN_IF_ERROR(rt_axis_matrix(I, n, ax, r, &drop));
    RX_RETURN_IF_ERROR(rt_axis_sum(I, n, drop, NULL, &drop));
    RX_RETURN_IF_ERROR(rt_kept_dims(I, n, xs, drop, rank, &shp));
  }
  RX_RETURN_IF_ERROR(rt_reshape(I, n, x, shp, rank, &out));
  onnx_def_tensor(I, n, out);
  return NULL;
}

/* ReduceMax, ReduceMean, ReduceMin, ReduceProd, ReduceSum with axes computed at run time: for
 * each axis d, where(d is an axis, the reduction along d kept as 1 (broadcast back), the value
 * so far); then the first element along each reduced axis, gathered at arange of the result's
 * run-time dims (1 at an axis), and without keepdims reshaped to the dims kept. */
rx_status onnx_do_reduce_any(imp *I, const Onnx__NodeProto *n, const onnx_op *row) {
  if (onnx_attr(n, "axes") || !rt_tensor_input(I, n, 1) || rt_len(I, n, 1) == 0)
    return onnx_do_reduce(I, n, row); /* constant axes, or none (all, or noop_with_empty_axes) */
  const rx_sinfo *si;
  RX_RETURN_IF_ERROR(rt_input_shape(I, n, "axes", &si));
  int k = rt_len(I, n, 1), r = si->ndim, rank = r - k;
  if (k < 0)
    return onnx_node_err(I, n, "input 1 (axes) must be a 1-D integer tensor of constant length");
  if (rank < 0) return onnx_node_err(I, n, "%d axes for an input of rank %d", k, r);
  bool keep = onnx_attr_i(n, "keepdims", 1) != 0;
  rx_var *r_, *out;
  rx_node *ax, *cnt, *mask, *y = rx_arg_var(I->b, onnx_get(I, onnx_input(n, 0))->var), *md, *s, *xs,
                            *shp;
  RX_RETURN_IF_ERROR(rt_i64(I, n, 1, &ax));
  RX_RETURN_IF_ERROR(rt_norm_axes(I, n, ax, r, &ax));
  RX_RETURN_IF_ERROR(rt_axis_matrix(I, n, ax, r, &cnt));
  RX_RETURN_IF_ERROR(rt_axis_sum(I, n, cnt, NULL, &cnt));
  RX_RETURN_IF_ERROR(onnx_ex(I, n, RX_OP_greater, 2, cnt, rx_arg_int(I->b, 0), NULL, &mask, &r_));
  for (int d = 0; d < r; d++) {
    RX_RETURN_IF_ERROR(onnx_elem_of(I, n, mask, d, &md));
    RX_RETURN_IF_ERROR(rt_reduce(I, n, row->op, y, d, true, &s));
    RX_RETURN_IF_ERROR(onnx_ex(I, n, RX_OP_where, 3, md, s, y, &y, &r_));
  }
  RX_RETURN_IF_ERROR(rt_dims_tensor(I, n, si, &xs));
  RX_RETURN_IF_ERROR(onnx_ex(I, n, RX_OP_where, 3, mask, rx_arg_int(I->b, 1), xs, &shp, &r_));
  const rx_expr *dims[SYM_MAX];
  rx_node *idx[SYM_MAX];
  RX_RETURN_IF_ERROR(rt_bind(I, n, shp, dims));
  for (int d = 0; d < r; d++)
    RX_RETURN_IF_ERROR(onnx_iota(I, n, rx_sym_const(I->m, 0), dims[d], &idx[d]));
  RX_RETURN_IF_ERROR(onnx_gather_grid(I, n, si, y, idx, &out));
  if (!keep) {
    RX_RETURN_IF_ERROR(rt_kept_dims(I, n, shp, cnt, rank, &shp));
    RX_RETURN_IF_ERROR(rt_reshape(I, n, out, shp, rank, &out));
  }
  onnx_def_tensor(I, n, out);
  return NULL;
}

/* Slice's per-axis start, end and step ([rank] i64 each) of the starts, ends, normalized axes
 * and steps (absent: 1) given at run time: the sum over the matrix of (p == axes[j]) picks each
 * axis's values; an axis not sliced keeps 0, its dim and 1. */
static rx_status rt_slice_params(imp *I, const Onnx__NodeProto *n, rx_node *ax, rx_node *xs, int r,
                                 rx_node **st, rx_node **en, rx_node **sp) {
  rx_var *rv;
  rx_node *m, *has, *v[3];
  RX_RETURN_IF_ERROR(rt_axis_matrix(I, n, ax, r, &m));
  RX_RETURN_IF_ERROR(rt_axis_sum(I, n, m, NULL, &has));
  RX_RETURN_IF_ERROR(onnx_ex(I, n, RX_OP_greater, 2, has, rx_arg_int(I->b, 0), NULL, &has, &rv));
  for (int k = 0; k < 3; k++) {
    size_t i = k == 2 ? 4 : (size_t)k + 1;
    if (!onnx_input(n, i)) { /* steps absent: 1 (the where below keeps 1 at every axis) */
      RX_RETURN_IF_ERROR(onnx_ex(I, n, RX_OP_where, 3, has, rx_arg_int(I->b, 1), xs, &v[k], &rv));
      continue;
    }
    RX_RETURN_IF_ERROR(rt_i64(I, n, i, &v[k]));
    RX_RETURN_IF_ERROR(rt_axis_sum(I, n, m, v[k], &v[k]));
  }
  RX_RETURN_IF_ERROR(onnx_ex(I, n, RX_OP_where, 3, has, v[0], rx_arg_int(I->b, 0), st, &rv));
  RX_RETURN_IF_ERROR(onnx_ex(I, n, RX_OP_where, 3, has, v[1], xs, en, &rv));
  return onnx_ex(I, n, RX_OP_where, 3, has, v[2], rx_arg_int(I->b, 1), sp, &rv);
}

/* A start or end index v clamped as ONNX's Slice does: v + dim when negative, then into [0, dim]
 * for a positive step, [lo, dim - 1] for a negative one (lo: 0 for a start, -1 for an end). */
static rx_status rt_clamp_index(imp *I, const Onnx__NodeProto *n, rx_node *v, rx_node *xs,
                                rx_node *pos, int lo, rx_node **out) {
  rx_var *r;
  rx_node *neg, *up, *hi, *low;
  EX2(RX_OP_less, v, rx_arg_int(I->b, 0), neg);
  EX2(RX_OP_add, v, xs, up);
  EX3(RX_OP_where, neg, up, v, v);
  EX2(RX_OP_subtract, xs, rx_arg_int(I->b, 1), hi);
  EX3(RX_OP_where, pos, xs, hi, hi);
  EX3(RX_OP_where, pos, rx_arg_int(I->b, 0), rx_arg_int(I->b, lo), low);
  EX2(RX_OP_maximum, v, low, v);
  EX2(RX_OP_minimum, v, hi, *out);
  return NULL;
}

/* Slice with axes or steps computed at run time (a graph input): every axis of x gets its start,
 * step and length at run time (an axis not sliced: 0, 1 and its dim); the lengths are bound to
 * fresh dims and x gathered at start + step * arange(length) along each axis. A step of 0 (an
 * error in ONNX) is taken as 1. Constant axes and steps keep strided_slice (onnx_do_slice). */
rx_status onnx_do_slice_any(imp *I, const Onnx__NodeProto *n, const onnx_op *row) {
  val *x = onnx_input(n, 0) ? onnx_get(I, onnx_input(n, 0)) : NULL;
  if (!x || x->kind != V_TENSOR || n->n_input < 4 ||
      !(rt_tensor_input(I, n, 3) || rt_tensor_input(I, n, 4)))
    return onnx_do_slice(I, n, row);
  const rx_sinfo *si;
  RX_RETURN_IF_ERROR(rt_input_shape(I, n, "axes or steps", &si));
  int k = rt_len(I, n, 1), r = si->ndim;
  for (size_t i = 2; i < 5; i++)
    if (onnx_input(n, i) && rt_len(I, n, i) != k)
      return onnx_node_err(I, n, "starts, ends, axes and steps must be given with one length");
  if (k < 0 || r == 0)
    return onnx_node_err(I, n, "starts must be a 1-D integer tensor of constant length");
  rx_var *rv, *out;
  rx_node *ax, *xs, *st, *en, *sp, *pos, *len, *a;
  if (onnx_input(n, 3)) {
    RX_RETURN_IF_ERROR(rt_i64(I, n, 3, &ax));
  } else {
    RX_RETURN_IF_ERROR(onnx_iota(I, n, rx_sym_const(I->m, 0), rx_sym_const(I->m, k), &ax));
  }
  RX_RETURN_IF_ERROR(rt_norm_axes(I, n, ax, r, &ax));
  RX_RETURN_IF_ERROR(rt_dims_tensor(I, n, si, &xs));
  RX_RETURN_IF_ERROR(rt_slice_params(I, n, ax, xs, r, &st, &en, &sp));
  RX_RETURN_IF_ERROR(
      onnx_ex(I, n, RX_OP_greater_equal, 2, sp, rx_arg_int(I->b, 0), NULL, &pos, &rv));
  RX_RETURN_IF_ERROR(rt_clamp_index(I, n, st, xs, pos, 0, &st));
  RX_RETURN_IF_ERROR(rt_clamp_index(I, n, en, xs, pos, -1, &en));
  /* length: max(0, ceil(|end - start| / |step|)) in the step's direction */
  RX_RETURN_IF_ERROR(onnx_ex(I, n, RX_OP_abs, 1, sp, NULL, NULL, &a, &rv));
  RX_RETURN_IF_ERROR(onnx_ex(I, n, RX_OP_maximum, 2, a, rx_arg_int(I->b, 1), NULL, &a, &rv));
  rx_node *back;
  RX_RETURN_IF_ERROR(onnx_ex(I, n, RX_OP_neg, 1, a, NULL, NULL, &back, &rv));
  RX_RETURN_IF_ERROR(onnx_ex(I, n, RX_OP_where, 3, pos, a, back, &sp, &rv));
  RX_RETURN_IF_ERROR(onnx_ex(I, n, RX_OP_subtract, 2, en, st, NULL, &len, &rv));
  /* the distance in the step's direction, (end - start) * step / |step| (exact) */
  RX_RETURN_IF_ERROR(onnx_ex(I, n, RX_OP_multiply, 2, len, sp, NULL, &len, &rv));
  RX_RETURN_IF_ERROR(onnx_ex(I, n, RX_OP_divide, 2, len, a, NULL, &len, &rv));
  RX_RETURN_IF_ERROR(onnx_ex(I, n, RX_OP_add, 2, len, a, NULL, &len, &rv));
  RX_RETURN_IF_ERROR(onnx_ex(I, n, RX_OP_subtract, 2, len, rx_arg_int(I->b, 1), NULL, &len, &rv));
  RX_RETURN_IF_ERROR(onnx_ex(I, n, RX_OP_divide, 2, len, a, NULL, &len, &rv));
  RX_RETURN_IF_ERROR(onnx_ex(I, n, RX_OP_maximum, 2, len, rx_arg_int(I->b, 0), NULL, &len, &rv));
  const rx_expr *dims[SYM_MAX];
  rx_node *idx[SYM_MAX], *s, *p;
  RX_RETURN_IF_ERROR(rt_bind(I, n, len, dims));
  for (int d = 0; d < r; d++) {
    RX_RETURN_IF_ERROR(onnx_iota(I, n, rx_sym_const(I->m, 0), dims[d], &idx[d]));
    RX_RETURN_IF_ERROR(onnx_elem_of(I, n, sp, d, &p));
    RX_RETURN_IF_ERROR(onnx_elem_of(I, n, st, d, &s));
    RX_RETURN_IF_ERROR(onnx_ex(I, n, RX_OP_multiply, 2, idx[d], p, NULL, &idx[d], &rv));
    RX_RETURN_IF_ERROR(onnx_ex(I, n, RX_OP_add, 2, idx[d], s, NULL, &idx[d], &rv));
  }
  RX_RETURN_IF_ERROR(onnx_gather_grid(I, n, si, rx_arg_var(I->b, x->var), idx, &out));
  onnx_def_tensor(I, n, out);
  return NULL;
}

/* Range's scalar input i (a graph input, a float constant, a shape value) as a tensor [1] of
 * dtype dt ([1], not a scalar: the scheduler places no 0-d unary math op in a kernel). */
static rx_status rt_scalar(imp *I, const Onnx__NodeProto *n, size_t i, rx_dtype dt, rx_node **out) {
  val *v = onnx_input(n, i) ? onnx_get(I, onnx_input(n, i)) : NULL;
  rx_var *t = NULL;
  const rx_expr *one = rx_sym_const(I->m, 1);
  if (v && v->kind == V_FCONST) {
    rx_node *a[2] = {rx_arg_shape(I->b, &one, 1), rx_arg_float(I->b, v->f)};
    const rx_attr *at = rx_attr_dtype(I->m, "dtype", dt);
    return onnx_exa(I, n, RX_OP_full, a, 2, &at, 1, out, NULL);
  }
  if (v && v->kind == V_SYM && v->sndim == 0)
    RX_RETURN_IF_ERROR(onnx_sym_tensor(I, n, v, &t));
  else if (v && v->kind == V_TENSOR)
    t = v->var;
  const rx_sinfo *si = t ? rx_var_sinfo(t) : NULL;
  if (!si || si->kind != RX_SINFO_TENSOR || si->ndim != 0)
    return onnx_node_err(I, n, "input %zu must be a scalar", i);
  RX_RETURN_IF_ERROR(onnx_reshape_to(I, n, rx_arg_var(I->b, t), &one, 1, out, NULL));
  return si->dtype == dt ? NULL : onnx_rt_cast(I, n, *out, dt, out);
}

/* Range whose bounds are computed at run time where the compile-time form cannot take them (a
 * float input, or a step that is a graph input): the length max(0, ceil((limit - start) /
 * delta)) computed by a kernel and bound to a fresh dim n, then start + delta * arange(n) in
 * the inputs' dtype. An integer delta of 0 (an error in ONNX) fails the call (check_nonzero). */
rx_status onnx_do_range_any(imp *I, const Onnx__NodeProto *n, const onnx_op *row) {
  bool rt = false;
  rx_dtype dt = RX_DTYPE_UNKNOWN;
  for (size_t k = 0; k < 3; k++) {
    val *v = onnx_input(n, k) ? onnx_get(I, onnx_input(n, k)) : NULL;
    const rx_sinfo *si = onnx_tsinfo(v);
    if (si && si->kind == RX_SINFO_TENSOR && dt == RX_DTYPE_UNKNOWN) dt = si->dtype;
    if ((v && v->kind == V_FCONST) || (si && (ir_dtype_is_float(si->dtype) || k == 2))) rt = true;
  }
  if (!rt) return onnx_do_range(I, n, row);
  if (dt == RX_DTYPE_UNKNOWN) dt = RX_DTYPE_F32; /* float constants and shape values */
  rx_var *r;
  rx_node *s, *l, *d, *len, *y;
  RX_RETURN_IF_ERROR(rt_scalar(I, n, 0, dt, &s));
  RX_RETURN_IF_ERROR(rt_scalar(I, n, 1, dt, &l));
  RX_RETURN_IF_ERROR(rt_scalar(I, n, 2, dt, &d));
  if (ir_dtype_is_float(dt)) {
    EX2(RX_OP_subtract, l, s, len);
    EX2(RX_OP_divide, len, d, len);
    EX1(RX_OP_ceil, len, len);
    RX_RETURN_IF_ERROR(onnx_rt_cast(I, n, len, RX_DTYPE_I64, &len));
  } else { /* ceil(a / b) = -floor(-a / b), relaxc's integer divide floors */
    rx_node *z, *dd, *s64;
    RX_RETURN_IF_ERROR(onnx_rt_cast(I, n, s, RX_DTYPE_I64, &s64));
    RX_RETURN_IF_ERROR(onnx_rt_cast(I, n, l, RX_DTYPE_I64, &l));
    RX_RETURN_IF_ERROR(onnx_rt_cast(I, n, d, RX_DTYPE_I64, &dd));
    { /* a delta of 0 fails the call, as ONNX Runtime refuses it */
      char msg[300];
      snprintf(msg, sizeof msg, "node '%.200s' (Range): delta in Range operator can not be zero!",
               n->name && n->name[0] ? n->name : n->output[0]);
      const rx_attr *ma = rx_attr_str(I->m, "message", msg);
      RX_RETURN_IF_ERROR(onnx_exa(I, n, RX_OP_check_nonzero, &dd, 1, &ma, 1, &dd, NULL));
    }
    EX2(RX_OP_equal, dd, rx_arg_int(I->b, 0), z);
    EX3(RX_OP_where, z, rx_arg_int(I->b, 1), dd, dd);
    EX2(RX_OP_subtract, s64, l, len);
    EX2(RX_OP_divide, len, dd, len);
    EX1(RX_OP_neg, len, len);
    EX3(RX_OP_where, z, rx_arg_int(I->b, 0), len, len);
  }
  EX2(RX_OP_maximum, len, rx_arg_int(I->b, 0), len);
  const rx_expr *e;
  RX_RETURN_IF_ERROR(rt_bind(I, n, len, &e));
  rx_node *a[2] = {I64(rx_sym_const(I->m, 0)), I64(e)};
  const rx_attr *at = rx_attr_dtype(I->m, "dtype", dt);
  RX_RETURN_IF_ERROR(onnx_exa(I, n, RX_OP_arange, a, 2, &at, 1, &y, NULL));
  EX2(RX_OP_multiply, y, d, y);
  EX2(RX_OP_add, y, s, y);
  onnx_def_tensor(I, n, r);
  return NULL;
}

/* The positions of the true elements of the bool vector m [len], in order, as an i64 tensor
 * [count] with the count bound to a fresh dim at run time (*count): position j is the number
 * of elements whose inclusive running count of trues is at most j (a [count, len] reduction:
 * O(count len) work, in parallel). */
static rx_status rt_true_positions(imp *I, const Onnx__NodeProto *n, rx_node *m,
                                   const rx_expr **count, rx_node **out) {
  rx_var *r;
  rx_node *c, *total, *j;
  RX_RETURN_IF_ERROR(onnx_rt_cast(I, n, m, RX_DTYPE_I64, &c));
  RX_RETURN_IF_ERROR(rt_count(I, n, m, 0, true, &total));
  RX_RETURN_IF_ERROR(rt_bind(I, n, total, count));
  const rx_attr *at = rx_attr_int(I->m, "axis", 0);
  RX_RETURN_IF_ERROR(onnx_exa(I, n, RX_OP_cumsum, &c, 1, &at, 1, &c, NULL));
  RX_RETURN_IF_ERROR(onnx_iota(I, n, rx_sym_const(I->m, 0), *count, &j));
  RX_RETURN_IF_ERROR(onnx_trailing_units(I, n, j, 1, &j));
  EX2(RX_OP_less_equal, c, j, c);
  return rt_count(I, n, c, 1, false, out);
}

/* Input 0 of NonZero, Compress and Unique (a tensor of known rank, at least 1) and their axis
 * attribute normalized (*axis: -1 when absent). */
static rx_status data_input(imp *I, const Onnx__NodeProto *n, const rx_sinfo **si, int64_t *axis) {
  *si = onnx_shaped(I, n, 0);
  *axis = -1;
  if (!*si || (*si)->ndim == 0 || onnx_get(I, onnx_input(n, 0))->kind != V_TENSOR)
    return onnx_node_err(I, n, "input 0 must be a tensor of known rank of at least 1");
  if (!onnx_attr(n, "axis")) return NULL;
  int64_t a = onnx_attr_i(n, "axis", 0);
  *axis = a < 0 ? a + (*si)->ndim : a;
  if (*axis < 0 || *axis >= (*si)->ndim)
    return onnx_node_err(I, n, "axis %lld out of range for rank %d", (long long)a, (*si)->ndim);
  return NULL;
}

/* x (shape si) flattened to 1-D (*count: its element count). */
static rx_status flatten_all(imp *I, const Onnx__NodeProto *n, const rx_sinfo *si, rx_node *x,
                             const rx_expr **count, rx_node **out) {
  *count = rx_sym_const(I->m, 1);
  for (int d = 0; d < si->ndim; d++) *count = rx_sym_mul(I->m, *count, si->shape[d]);
  return onnx_reshape_to(I, n, x, count, 1, out, NULL);
}

/* NonZero: the indices [rank, count] of the nonzero elements in row-major order; the positions
 * in x flattened (rt_true_positions), each split into its coordinates. */
rx_status onnx_do_nonzero(imp *I, const Onnx__NodeProto *n, const onnx_op *row) {
  (void)row;
  const rx_sinfo *si;
  int64_t axis;
  RX_RETURN_IF_ERROR(data_input(I, n, &si, &axis));
  rx_var *r;
  rx_node *x, *pos, *rows[SYM_MAX], *c;
  const rx_expr *total, *count;
  RX_RETURN_IF_ERROR(
      flatten_all(I, n, si, rx_arg_var(I->b, onnx_get(I, onnx_input(n, 0))->var), &total, &x));
  if (si->dtype != RX_DTYPE_BOOL) RX_RETURN_IF_ERROR(onnx_rt_cast(I, n, x, RX_DTYPE_BOOL, &x));
  RX_RETURN_IF_ERROR(rt_true_positions(I, n, x, &count, &pos));
  const rx_expr *stride = rx_sym_const(I->m, 1);
  for (int d = si->ndim - 1; d >= 0; d--) {
    c = pos;
    if (!rx_expr_is_const(stride, 1)) EX2(RX_OP_divide, c, I64(stride), c);
    if (d > 0) RX_RETURN_IF_ERROR(onnx_imod(I, n, c, si->shape[d], &c));
    int64_t zero = 0;
    const rx_attr *at = rx_attr_ints(I->m, "axes", &zero, 1);
    RX_RETURN_IF_ERROR(onnx_exa(I, n, RX_OP_expand_dims, &c, 1, &at, 1, &rows[d], NULL));
    stride = rx_sym_mul(I->m, stride, si->shape[d]);
  }
  rx_var *tup, *out;
  RX_RETURN_IF_ERROR(onnx_at_node(I, n, rx_emit_tuple(I->b, rows, si->ndim, NULL, &tup)));
  rx_node *a = rx_arg_var(I->b, tup);
  const rx_attr *ax = rx_attr_int(I->m, "axis", 0);
  RX_RETURN_IF_ERROR(onnx_emit(I, n, RX_OP_concat, &a, 1, &ax, 1, &out));
  onnx_def_tensor(I, n, out);
  return NULL;
}

/* Compress: x (flattened when axis is absent) at the positions along axis where the 1-D
 * condition is true (rt_true_positions; a condition shorter than the axis selects among the
 * first elements). */
rx_status onnx_do_compress(imp *I, const Onnx__NodeProto *n, const onnx_op *row) {
  (void)row;
  const rx_sinfo *si, *cs = onnx_shaped(I, n, 1);
  int64_t axis;
  RX_RETURN_IF_ERROR(data_input(I, n, &si, &axis));
  if (!cs || cs->ndim != 1 || onnx_get(I, onnx_input(n, 1))->kind != V_TENSOR)
    return onnx_node_err(I, n, "input 1 (condition) must be a 1-D tensor");
  rx_var *r;
  rx_node *x = rx_arg_var(I->b, onnx_get(I, onnx_input(n, 0))->var), *m, *pos;
  const rx_expr *total;
  if (axis < 0) RX_RETURN_IF_ERROR(flatten_all(I, n, si, x, &total, &x));
  m = rx_arg_var(I->b, onnx_get(I, onnx_input(n, 1))->var);
  if (cs->dtype != RX_DTYPE_BOOL) RX_RETURN_IF_ERROR(onnx_rt_cast(I, n, m, RX_DTYPE_BOOL, &m));
  const rx_expr *count;
  RX_RETURN_IF_ERROR(rt_true_positions(I, n, m, &count, &pos));
  RX_RETURN_IF_ERROR(onnx_take_at(I, n, x, pos, axis < 0 ? 0 : axis, &x, &r));
  onnx_def_tensor(I, n, r);
  return NULL;
}

/* Unique's input as rows [count, len]: x flattened to [N, 1] without an axis, else x's axis
 * moved first and the other dims flattened (*cnt: the row count N). */
static rx_status unique_rows(imp *I, const Onnx__NodeProto *n, const rx_sinfo *si, int64_t axis,
                             rx_node **out, const rx_expr **cnt) {
  rx_node *x = rx_arg_var(I->b, onnx_get(I, onnx_input(n, 0))->var);
  const rx_expr *total = rx_sym_const(I->m, 1), *dims[2];
  for (int d = 0; d < si->ndim; d++)
    if (d != axis) total = rx_sym_mul(I->m, total, si->shape[d]);
  dims[0] = axis < 0 ? total : si->shape[axis];
  dims[1] = axis < 0 ? rx_sym_const(I->m, 1) : total;
  if (axis > 0) {
    int64_t perm[SYM_MAX];
    perm[0] = axis;
    for (int d = 0, k = 1; d < si->ndim; d++)
      if (d != axis) perm[k++] = d;
    const rx_attr *at = rx_attr_ints(I->m, "axes", perm, si->ndim);
    RX_RETURN_IF_ERROR(onnx_exa(I, n, RX_OP_permute, &x, 1, &at, 1, &x, NULL));
  }
  *cnt = dims[0];
  return onnx_reshape_to(I, n, x, dims, 2, out, NULL);
}

/* The i64 sort key [N] of Unique's rows (xi [N, 1, len], xj [1, N, len], ne: their not_equal
 * as i64), counted among the first occurrences (first [N]): with sorted, how many first rows
 * are lexicographically less (a row j is less than row i where, at the first element they
 * differ, j's is less); else how many first rows come before. */
static rx_status unique_key(imp *I, const Onnx__NodeProto *n, bool sorted, rx_node *xi, rx_node *xj,
                            rx_node *ne, rx_node *first, rx_node **out) {
  rx_var *r;
  rx_node *c, *lt;
  if (!sorted) {
    RX_RETURN_IF_ERROR(onnx_rt_cast(I, n, first, RX_DTYPE_I64, &c));
    const rx_attr *at[2] = {rx_attr_int(I->m, "axis", 0), rx_attr_bool(I->m, "exclusive", true)};
    return onnx_exa(I, n, RX_OP_cumsum, &c, 1, at, 2, out, NULL);
  }
  const rx_attr *at[2] = {rx_attr_int(I->m, "axis", 2), rx_attr_bool(I->m, "exclusive", true)};
  RX_RETURN_IF_ERROR(onnx_exa(I, n, RX_OP_cumsum, &ne, 1, at, 2, &c, NULL));
  EX2(RX_OP_equal, c, rx_arg_int(I->b, 0), c);
  EX2(RX_OP_less, xj, xi, lt);
  EX2(RX_OP_logical_and, lt, c, lt);
  RX_RETURN_IF_ERROR(rt_count(I, n, lt, 2, false, &lt));
  EX2(RX_OP_greater, lt, rx_arg_int(I->b, 0), lt);
  EX2(RX_OP_logical_and, lt, first, lt);
  return rt_count(I, n, lt, 1, false, out);
}

/* Unique (axis absent: of x flattened; sorted default 1): rows i and j compared elementwise in
 * an [N, N, len] grid; rep[i], the first row equal to row i (argmax of the equal row), makes
 * the first occurrences (rep[i] == i) and the counts; the U first rows (bound at run time)
 * go to output slot key[i] (unique_key), gathered as a [U, N] reduction. O(N^2 len) work: a
 * fallback for the small tensors Unique is used on. */
rx_status onnx_do_unique(imp *I, const Onnx__NodeProto *n, const onnx_op *row) {
  (void)row;
  const rx_sinfo *si;
  int64_t axis;
  RX_RETURN_IF_ERROR(data_input(I, n, &si, &axis));
  rx_var *r;
  rx_node *x, *xi, *xj, *ne, *eq, *rep, *cnt, *ii, *first, *key, *tot, *sl, *order, *o[4];
  const rx_expr *N, *U, *zero = rx_sym_const(I->m, 0);
  RX_RETURN_IF_ERROR(unique_rows(I, n, si, axis, &x, &N));
  int64_t ax1 = 1, ax0 = 0;
  const rx_attr *a1 = rx_attr_ints(I->m, "axes", &ax1, 1),
                *a0 = rx_attr_ints(I->m, "axes", &ax0, 1);
  RX_RETURN_IF_ERROR(onnx_exa(I, n, RX_OP_expand_dims, &x, 1, &a1, 1, &xi, NULL));
  RX_RETURN_IF_ERROR(onnx_exa(I, n, RX_OP_expand_dims, &x, 1, &a0, 1, &xj, NULL));
  EX2(RX_OP_not_equal, xi, xj, ne);
  RX_RETURN_IF_ERROR(onnx_rt_cast(I, n, ne, RX_DTYPE_I64, &ne));
  RX_RETURN_IF_ERROR(rt_count(I, n, ne, 2, false, &eq));
  EX2(RX_OP_equal, eq, rx_arg_int(I->b, 0), eq);
  RX_RETURN_IF_ERROR(onnx_rt_cast(I, n, eq, RX_DTYPE_I64, &eq));
  const rx_attr *am[2] = {rx_attr_int(I->m, "axis", 1), rx_attr_bool(I->m, "keepdims", false)};
  RX_RETURN_IF_ERROR(onnx_exa(I, n, RX_OP_argmax, &eq, 1, am, 2, &rep, NULL));
  RX_RETURN_IF_ERROR(rt_count(I, n, eq, 1, false, &cnt));
  RX_RETURN_IF_ERROR(onnx_iota(I, n, zero, N, &ii));
  EX2(RX_OP_equal, rep, ii, first);
  RX_RETURN_IF_ERROR(unique_key(I, n, onnx_attr_i(n, "sorted", 1) != 0, xi, xj, ne, first, &key));
  RX_RETURN_IF_ERROR(rt_count(I, n, first, 0, true, &tot));
  RX_RETURN_IF_ERROR(rt_bind(I, n, tot, &U));
  RX_RETURN_IF_ERROR(onnx_iota(I, n, zero, U, &sl));
  RX_RETURN_IF_ERROR(onnx_trailing_units(I, n, sl, 1, &sl));
  EX2(RX_OP_equal, key, sl, sl);
  EX2(RX_OP_logical_and, sl, first, sl);
  EX3(RX_OP_where, sl, ii, rx_arg_int(I->b, 0), order);
  RX_RETURN_IF_ERROR(rt_count(I, n, order, 1, false, &order));
  if (axis >= 0) {
    RX_RETURN_IF_ERROR(onnx_take_at(I, n, rx_arg_var(I->b, onnx_get(I, onnx_input(n, 0))->var),
                                    order, axis, &o[0], &r));
  } else {
    RX_RETURN_IF_ERROR(onnx_reshape_to(I, n, x, &N, 1, &x, NULL));
    RX_RETURN_IF_ERROR(onnx_take_at(I, n, x, order, 0, &o[0], &r));
  }
  o[1] = order;
  RX_RETURN_IF_ERROR(onnx_take_at(I, n, key, rep, 0, &o[2], &r));
  RX_RETURN_IF_ERROR(onnx_take_at(I, n, cnt, order, 0, &o[3], &r));
  for (size_t k = 0; k < 4 && k < n->n_output; k++)
    if (n->output[k] && n->output[k][0]) onnx_def_named(I, n->output[k], o[k]->var);
  return NULL;
}
