/* Reductions (sum mean max min over axes, keepdims; argmax argmin along an axis) and normalizations
 * (softmax, log_softmax, layer_norm, rms_norm), cumsum, topk: their shape deduction, then their
 * legalization (rows with reduce stages and `local` one-element accumulators). */
#include "deduce.h"
#include "legalize_int.h"

#include "../shapes/expr_build.h"

#include <string.h>

const rx_sinfo *ops_deduce_reduce(rx_deduce_ctx *dc, const rx_node *call) {
  const rx_sinfo *x = ops_tensor_arg(dc, call, 0, "x");
  if (!x) return NULL;
  bool keep = ops_int_attr(call, "keepdims", 0) != 0;
  int *axes, na;
  bool present;
  if (!ops_axes_attr(dc, call, "axes", x->ndim, &axes, &na, &present)) return NULL;
  if (x->ndim < 0) {
    if (!present && !keep) return ops_tensor(dc, x->dtype, 0, NULL); /* a scalar */
    return ops_tensor(dc, x->dtype, -1, NULL);
  }
  bool *red = ir_module_alloc(dc->mod, sizeof(bool) * (size_t)(x->ndim + 1));
  for (int i = 0; i < x->ndim; i++) red[i] = !present;
  for (int i = 0; i < na; i++) red[axes[i]] = true;
  int n = 0;
  for (int i = 0; i < x->ndim; i++) n += keep || !red[i];
  if (!x->shape) return ops_tensor(dc, x->dtype, n, NULL);
  const rx_expr **dims = ops_dims(dc, n);
  const rx_expr *one = sym_expr_const(ops_ctx(dc), 1);
  int k = 0;
  for (int i = 0; i < x->ndim; i++) {
    if (!red[i])
      dims[k++] = x->shape[i];
    else if (keep)
      dims[k++] = one;
  }
  return ops_tensor(dc, x->dtype, n, dims);
}

/* argmax / argmin: x (numeric, rank >= 1) reduced along one axis to the i64 index of its
 * extreme; keepdims keeps that dim as 1. */
const rx_sinfo *ops_deduce_argmax(rx_deduce_ctx *dc, const rx_node *call) {
  const char *name = call->op->name;
  const rx_sinfo *x = ops_tensor_arg(dc, call, 0, "x");
  if (!x) return NULL;
  if (x->dtype == RX_DTYPE_BOOL) {
    ops_deduce_error(dc, "%s expects a numeric tensor, got %s", name, ops_str(dc, x));
    return NULL;
  }
  bool keep = ops_int_attr(call, "keepdims", 0) != 0;
  if (x->ndim < 0) return ops_tensor(dc, RX_DTYPE_I64, -1, NULL);
  if (x->ndim == 0) {
    ops_deduce_error(dc, "%s expects a tensor of rank >= 1, got %s", name, ops_str(dc, x));
    return NULL;
  }
  int axis;
  if (!ops_norm_axis(dc, ops_int_attr(call, "axis", -1), x->ndim, &axis)) return NULL;
  int n = keep ? x->ndim : x->ndim - 1;
  if (!x->shape) return ops_tensor(dc, RX_DTYPE_I64, n, NULL);
  if (rx_expr_is_const(x->shape[axis], 0)) {
    ops_deduce_error(dc, "%s over axis %d of %s: the axis is empty, there is no index to return",
                     name, axis, ops_str(dc, x));
    return NULL;
  }
  const rx_expr **dims = ops_dims(dc, n);
  int k = 0;
  for (int i = 0; i < x->ndim; i++) {
    if (i != axis)
      dims[k++] = x->shape[i];
    else if (keep)
      dims[k++] = sym_expr_const(ops_ctx(dc), 1);
  }
  return ops_tensor(dc, RX_DTYPE_I64, n, dims);
}

/* cumsum: prefix sums of x (numeric, rank >= 1) along one axis; the shape and dtype of x. */
const rx_sinfo *ops_deduce_cumsum(rx_deduce_ctx *dc, const rx_node *call) {
  const rx_sinfo *x = ops_tensor_arg(dc, call, 0, "x");
  if (!x) return NULL;
  if (x->dtype == RX_DTYPE_BOOL) {
    ops_deduce_error(dc, "cumsum expects a numeric tensor, got %s", ops_str(dc, x));
    return NULL;
  }
  if (x->ndim == 0) {
    ops_deduce_error(dc, "cumsum expects a tensor of rank >= 1, got %s", ops_str(dc, x));
    return NULL;
  }
  int axis;
  if (x->ndim > 0 && !ops_norm_axis(dc, ops_int_attr(call, "axis", -1), x->ndim, &axis))
    return NULL;
  return ops_tensor(dc, x->dtype, x->ndim, x->shape);
}

/* topk: x (numeric, rank >= 1) and k=[K] (one symbolic value) give the tuple (values, i64
 * indices), each x's shape with K along axis; K provably negative or beyond the axis is an
 * error. */
const rx_sinfo *ops_deduce_topk(rx_deduce_ctx *dc, const rx_node *call) {
  const rx_sinfo *x = ops_tensor_arg(dc, call, 0, "x");
  if (!x) return NULL;
  const rx_attr *ka = ops_call_attr(call, "k");
  if (!ka || ka->kind != RX_ATTR_EXPRS || ka->n != 1) {
    ops_deduce_error(dc, "topk expects k=[K], one symbolic value");
    return NULL;
  }
  if (x->dtype == RX_DTYPE_BOOL || x->ndim == 0) {
    ops_deduce_error(dc, "topk expects a numeric tensor of rank >= 1, got %s", ops_str(dc, x));
    return NULL;
  }
  const rx_sinfo *f[2];
  if (x->ndim < 0 || !x->shape) {
    f[0] = ops_tensor(dc, x->dtype, x->ndim, NULL);
    f[1] = ops_tensor(dc, RX_DTYPE_I64, x->ndim, NULL);
    return rx_sinfo_tuple(dc->mod, f, 2);
  }
  int axis;
  if (!ops_norm_axis(dc, ops_int_attr(call, "axis", -1), x->ndim, &axis)) return NULL;
  rx_expr_ctx *cx = ops_ctx(dc);
  const rx_expr *k = ka->exprs[0];
  if (ops_prove(dc, sym_expr_cmp(cx, RX_EXPR_LT, k, sym_expr_const(cx, 0))) == RX_TRUE) {
    ops_deduce_error(dc, "topk: k=%s is negative (axis %d of %s)", ops_expr_str(dc, k), axis,
                     ops_str(dc, x));
    return NULL;
  }
  if (ops_prove(dc, sym_expr_cmp(cx, RX_EXPR_LT, x->shape[axis], k)) == RX_TRUE) {
    /* ONNX Runtime's words (TopK, "k argument [K] should not be greater than ...") */
    ops_deduce_error(dc,
                     "topk: k argument [%s] should not be greater than specified axis dim value "
                     "[%s] (axis %d of %s)",
                     ops_expr_str(dc, k), ops_expr_str(dc, x->shape[axis]), axis, ops_str(dc, x));
    return NULL;
  }
  const rx_expr **dims = ops_dims(dc, x->ndim);
  for (int i = 0; i < x->ndim; i++) dims[i] = i == axis ? ops_simplify(dc, k) : x->shape[i];
  f[0] = ops_tensor(dc, x->dtype, x->ndim, dims);
  f[1] = ops_tensor(dc, RX_DTYPE_I64, x->ndim, dims);
  return rx_sinfo_tuple(dc->mod, f, 2);
}

const rx_sinfo *ops_deduce_softmax(rx_deduce_ctx *dc, const rx_node *call) {
  const rx_sinfo *x = ops_tensor_arg(dc, call, 0, "x");
  if (!x || !ops_need_float(dc, x, call->op->name)) return NULL;
  int axis;
  if (x->ndim >= 0 && !ops_norm_axis(dc, ops_int_attr(call, "axis", -1), x->ndim, &axis))
    return NULL;
  return ops_tensor(dc, x->dtype, x->ndim, x->shape);
}

/* x normalized over axes (default [-1]) with per-axis parameters: each of the params args
 * (from index 1) must have the shape of x's normalized dims and x's dtype. */
static const rx_sinfo *norm(rx_deduce_ctx *dc, const rx_node *call, int nparams) {
  static const char *const ln[] = {"x", "gamma", "beta"}, *const rms[] = {"x", "weight"};
  const char *const *pn = nparams == 1 ? rms : ln;
  const rx_sinfo *x = ops_tensor_arg(dc, call, 0, "x");
  if (!x || !ops_need_float(dc, x, call->op->name)) return NULL;
  int *axes, na;
  bool present;
  if (!ops_axes_attr(dc, call, "axes", x->ndim, &axes, &na, &present)) return NULL;
  if (!present && x->ndim >= 0) {
    if (x->ndim == 0) {
      ops_deduce_error(dc, "%s expects a tensor of rank >= 1, got %s", call->op->name,
                       ops_str(dc, x));
      return NULL;
    }
    axes = ir_module_alloc(dc->mod, sizeof(int));
    axes[0] = x->ndim - 1;
    na = 1;
  }
  for (int p = 1; p <= nparams; p++) {
    const rx_sinfo *w = ops_tensor_arg(dc, call, p, pn[p]);
    if (!w) return NULL;
    if (w->dtype != RX_DTYPE_UNKNOWN && x->dtype != RX_DTYPE_UNKNOWN && w->dtype != x->dtype) {
      ops_deduce_error(dc, "%s expects %s of the dtype of x (%s), got %s", call->op->name, pn[p],
                       ops_str(dc, x), ops_str(dc, w));
      return NULL;
    }
    if (x->ndim < 0 || w->ndim < 0) continue;
    if (w->ndim != na) {
      ops_deduce_error(dc, "%s expects %s of rank %d (the normalized axes of %s), got %s",
                       call->op->name, pn[p], na, ops_str(dc, x), ops_str(dc, w));
      return NULL;
    }
    if (!x->shape || !w->shape) continue;
    for (int i = 0; i < na; i++) {
      const rx_expr *xd = x->shape[axes[i]], *wd = w->shape[i];
      rx_tribool eq = ops_dim_eq(dc, xd, wd);
      if (eq == RX_TRUE) continue;
      ops_deduce_error(dc, "%s expects %s to match the normalized dims of %s: %s %s %s%s",
                       call->op->name, pn[p], ops_str(dc, x), ops_str(dc, w),
                       eq == RX_FALSE ? "differs in dim" : "cannot be proven to match in dim",
                       ops_expr_str(dc, wd), eq == RX_FALSE ? "" : "; use match_cast");
      return NULL;
    }
  }
  const rx_attr *da = ops_call_attr(call, "dtype");
  if (da && !ir_dtype_is_float(da->dtype)) {
    ops_deduce_error(dc, "%s expects a floating-point dtype, got %s", call->op->name,
                     ir_dtype_name(da->dtype));
    return NULL;
  }
  return ops_tensor(dc, da ? da->dtype : x->dtype, x->ndim, x->shape);
}

const rx_sinfo *ops_deduce_layer_norm(rx_deduce_ctx *dc, const rx_node *call) {
  return norm(dc, call, 2);
}
const rx_sinfo *ops_deduce_rms_norm(rx_deduce_ctx *dc, const rx_node *call) {
  return norm(dc, call, 1);
}

/* ------------------------------------------------------------------------------------------
 * legalization: the generators named in ops.def (the writer they use: ops/legalize.c)
 * ------------------------------------------------------------------------------------------ */

/* ---- reductions ---- */

void lz_gen_reduce(lz_ctx *l) {
  rx_op_id op = l->call->op->id;
  const char *name = l->call->op->name;
  lz_opnd *x = lz_arg(l, 0), *y = &l->outs[0];
  if (x->scalar) {
    lz_fail(l, "%s of a scalar", name);
    return;
  }
  int axes[LZ_MAXR];
  int na = lz_axes_attr(l, "axes", x->ndim, true, axes);
  bool keep = ops_int_attr(l->call, "keepdims", 0) != 0;
  bool red[LZ_MAXR] = {false};
  for (int i = 0; i < na; i++) red[axes[i]] = true;
  const char *iv[LZ_MAXR], *rv[LZ_MAXR], *xi[LZ_MAXR], *yi[LZ_MAXR];
  const rx_expr *ie[LZ_MAXR], *re[LZ_MAXR];
  int ni = 0, nr = 0, ny = 0;
  const rx_expr *count = sx_const(l->cx, 1);
  for (int d = 0; d < x->ndim; d++) {
    if (red[d]) {
      rv[nr] = lz_loopvar(l, lz_str(l, "r%d", nr));
      re[nr] = x->shape[d];
      xi[d] = rv[nr++];
      count = sym_expr_mul(l->cx, count, x->shape[d]);
      if (keep) yi[ny++] = "0";
    } else {
      iv[ni] = lz_loopvar(l, lz_str(l, "i%d", ni));
      ie[ni] = x->shape[d];
      xi[d] = iv[ni++];
      yi[ny++] = iv[ni - 1];
    }
  }
  rx_dtype t = x->dtype;
  bool sum = op == RX_OP_sum || op == RX_OP_mean, prod = op == RX_OP_prod;
  rx_dtype at = (sum || prod) ? lz_mathdt(t) : t;
  lz_for_nest(l, iv, ie, ni);
  const char *acc = lz_fresh(l, sum ? "s" : prod ? "p" : "m");
  lz_line(l, "alloc %s: %s[1] local", acc, ir_dtype_name(at));
  lz_reduce_open(l, rv, re, nr);
  const char *xv = lz_load(l, x, xi);
  if (at != t) xv = lz_str(l, "%s(%s)", ir_dtype_name(at), xv);
  if (sum || prod) {
    lz_line(l, "init { %s[0] = %s }", acc, lz_lit(l, at, prod ? 1 : 0));
    lz_line(l, "update { %s[0] = %s[0] %s %s }", acc, acc, prod ? "*" : "+", xv);
  } else {
    bool mx = op == RX_OP_max;
    lz_line(l, "init { %s[0] = %s }", acc, lz_lowest(l, t, !mx));
    lz_line(l, "update { %s[0] = %s(%s[0], %s) }", acc, mx ? "max" : "min", acc, xv);
  }
  lz_close(l);
  const char *v = lz_str(l, "%s[0]", acc);
  if (op == RX_OP_mean) {
    if (!ir_dtype_is_float(t)) {
      lz_fail(l, "mean of an integer tensor (cast to a float dtype first)");
      return;
    }
    v = lz_str(l, "%s / %s(%s)", v, ir_dtype_name(at), lz_ex(l, count));
  }
  if (at != t) v = lz_str(l, "%s(%s)", ir_dtype_name(t), v);
  lz_line(l, "%s = %s", lz_load(l, y, yi), v);
  lz_close_n(l, ni);
}

/* argmax / argmin along one axis: per output point a reduce that keeps the extreme m and its
 * index k, taking element r when it is strictly beyond m (first of ties), or beyond or equal
 * with select_last_index (last of ties); a NaN is taken before any number and then kept (the
 * first NaN; the last with select_last_index), as NumPy's argmax. f16/bf16 compare in f32. The
 * update is no combiner of the row_reduction rule, so the fallback runs each row serially in one
 * thread. */
void lz_gen_argmax(lz_ctx *l) {
  bool amax = l->call->op->id == RX_OP_argmax;
  bool last = ops_int_attr(l->call, "select_last_index", 0) != 0;
  bool keep = ops_int_attr(l->call, "keepdims", 0) != 0;
  lz_opnd *x = lz_arg(l, 0), *y = &l->outs[0];
  if (x->scalar || x->ndim == 0) {
    lz_fail(l, "%s of a 0-d tensor", l->call->op->name);
    return;
  }
  int axis = lz_axis_attr(l, "axis", -1, x->ndim);
  const char *iv[LZ_MAXR], *xi[LZ_MAXR], *yi[LZ_MAXR];
  const rx_expr *ie[LZ_MAXR];
  int ni = 0, ny = 0;
  for (int d = 0; d < x->ndim; d++) {
    if (d == axis) {
      if (keep) yi[ny++] = "0";
      continue;
    }
    iv[ni] = lz_loopvar(l, lz_str(l, "i%d", ni));
    ie[ni] = x->shape[d];
    xi[d] = yi[ny++] = iv[ni++];
  }
  const char *r = lz_loopvar(l, "r");
  xi[axis] = r;
  rx_dtype t = x->dtype, mt = lz_mathdt(t);
  lz_for_nest(l, iv, ie, ni);
  const char *m = lz_fresh(l, "m"), *k = lz_fresh(l, "k"), *v = lz_fresh(l, "v"),
             *tk = lz_fresh(l, "take");
  lz_line(l, "alloc %s: %s[1] local", m, ir_dtype_name(mt));
  lz_line(l, "alloc %s: i64[1] local", k);
  lz_reduce_open(l, &r, &x->shape[axis], 1);
  lz_line(l, "init { %s[0] = %s; %s[0] = 0 }", m, lz_lowest(l, mt, !amax), k);
  lz_line(l, "update {");
  l->ind++;
  lz_line(l, "let %s: %s = %s", v, ir_dtype_name(mt), lz_up(l, t, lz_load(l, x, xi)));
  const char *cmp = amax ? (last ? ">=" : ">") : (last ? "<=" : "<");
  const char *nan = !ir_dtype_is_float(t) ? ""
                    : last                ? lz_str(l, " || %s != %s", v, v)
                           : lz_str(l, " || (%s != %s && %s[0] == %s[0])", v, v, m, m);
  lz_line(l, "let %s: bool = %s %s %s[0]%s", tk, v, cmp, m, nan);
  lz_line(l, "%s[0] = select(%s, i64(%s), %s[0])", k, tk, r, k);
  lz_line(l, "%s[0] = select(%s, %s, %s[0])", m, tk, v, m);
  lz_close(l);
  lz_close(l);
  lz_line(l, "%s = %s[0]", lz_load(l, y, yi), k);
  lz_close_n(l, ni);
}

/* Loop variables i0, i1, ... over the dims of x other than axis: the loops in iv and ie (their
 * count returned), xi[d] the variable of dim d (xi[axis] is the caller's). */
static int other_dims(lz_ctx *l, const lz_opnd *x, int axis, const char **iv, const rx_expr **ie,
                      const char **xi) {
  int ni = 0;
  for (int d = 0; d < x->ndim; d++) {
    if (d == axis) continue;
    iv[ni] = lz_loopvar(l, lz_str(l, "i%d", ni));
    ie[ni] = x->shape[d];
    xi[d] = iv[ni++];
  }
  return ni;
}

/* cumsum along one axis: per point of the other dims a serial loop over the axis (from its end
 * with reverse) that adds each element to a local running sum (f32 for f16/bf16) and stores the
 * sum after the add, or before it when exclusive. A scan: the fallback binds the other dims to
 * threads and each thread runs its line serially (correct; no parallel scan yet): a 1-D x is one
 * thread. */
void lz_gen_cumsum(lz_ctx *l) {
  bool excl = ops_int_attr(l->call, "exclusive", 0) != 0;
  bool rev = ops_int_attr(l->call, "reverse", 0) != 0;
  lz_opnd *x = lz_arg(l, 0), *y = &l->outs[0];
  if (x->scalar || x->ndim == 0) {
    lz_fail(l, "cumsum of a 0-d tensor");
    return;
  }
  int axis = lz_axis_attr(l, "axis", -1, x->ndim);
  const char *iv[LZ_MAXR], *xi[LZ_MAXR];
  const rx_expr *ie[LZ_MAXR];
  int ni = other_dims(l, x, axis, iv, ie, xi);
  const char *r = lz_loopvar(l, "r");
  const rx_expr *len = x->shape[axis];
  xi[axis] = rev ? lz_ex(l, sym_expr_sub(l->cx, sym_expr_sub(l->cx, len, sx_const(l->cx, 1)),
                                         sx_var(l->cx, r)))
                 : r;
  rx_dtype t = x->dtype, at = lz_mathdt(t);
  if (ni == 0) { /* a 1-D x: one line, in a loop of one so that the local has a kernel */
    iv[ni] = lz_loopvar(l, "u");
    ie[ni++] = sx_const(l->cx, 1);
  }
  lz_for_nest(l, iv, ie, ni);
  const char *s = lz_fresh(l, "s");
  lz_line(l, "alloc %s: %s[1] local", s, ir_dtype_name(at));
  lz_line(l, "%s[0] = %s", s, lz_lit(l, at, 0));
  lz_line(l, "for %s in 0..%s {", r, lz_ex(l, len));
  l->ind++;
  const char *xv = lz_load(l, x, xi), *yv = lz_load(l, y, xi);
  if (at != t) xv = lz_str(l, "%s(%s)", ir_dtype_name(at), xv);
  const char *sv = at != t ? lz_str(l, "%s(%s[0])", ir_dtype_name(t), s) : lz_str(l, "%s[0]", s);
  if (excl) lz_line(l, "%s = %s", yv, sv);
  lz_line(l, "%s[0] = %s[0] + %s", s, s, xv);
  if (!excl) lz_line(l, "%s = %s", yv, sv);
  lz_close(l);
  lz_close_n(l, ni);
}

/* topk along one axis: per point of the other dims (a loop of one for a 1-D x), K serial passes
 * over the axis; pass s takes the best element among those ordered after the one pass s - 1
 * took (largest: a smaller value, or an equal one at a higher index), keeping the first index
 * of ties, so the result is sorted and ties come by the lower index as ONNX says. O(K n) per
 * line, one thread per line on the fallback rule (correct; no parallel selection yet). f16/bf16
 * compare in f32; NaNs are not ordered. */
void lz_gen_topk(lz_ctx *l) {
  bool big = ops_int_attr(l->call, "largest", 1) != 0;
  lz_opnd *x = lz_arg(l, 0), *yv = &l->outs[0], *yi = &l->outs[1];
  if (x->scalar || x->ndim == 0 || l->nouts != 2) {
    lz_fail(l, "topk expects a tensor of rank >= 1 and gives two results");
    return;
  }
  int axis = lz_axis_attr(l, "axis", -1, x->ndim);
  const char *iv[LZ_MAXR], *xi[LZ_MAXR], *oi[LZ_MAXR];
  const rx_expr *ie[LZ_MAXR];
  int ni = other_dims(l, x, axis, iv, ie, xi);
  const char *s = lz_loopvar(l, "s"), *r = lz_loopvar(l, "r");
  memcpy(oi, xi, sizeof oi);
  xi[axis] = r;
  oi[axis] = s;
  rx_dtype t = x->dtype, mt = lz_mathdt(t);
  const char *mn = ir_dtype_name(mt);
  if (ni == 0) { /* a 1-D x: one line, in a loop of one so that the locals have a kernel */
    iv[ni] = lz_loopvar(l, "u");
    ie[ni++] = sx_const(l->cx, 1);
  }
  lz_for_nest(l, iv, ie, ni);
  const char *pv = lz_fresh(l, "pv"), *pi = lz_fresh(l, "pi"), *m = lz_fresh(l, "m"),
             *k = lz_fresh(l, "k");
  const char *v = lz_fresh(l, "v"), *tk = lz_fresh(l, "take");
  /* k from data (bound at run time) may exceed the axis: checked as ONNX Runtime does; the
   * indices stored go through the check (with k <= d it is their value) */
  const char *kc = NULL;
  const rx_expr *K = yv->shape[axis], *D = x->shape[axis];
  const rx_expr *slack = sym_expr_sub(l->cx, D, K); /* d - k: a constant >= 0 needs no check */
  if (slack->kind != RX_EXPR_CONST || slack->value < 0) {
    rx_strbuf msg = {0}, lit = {0};
    if (l->site) l->site_used = true;
    base_strbuf_printf(&msg,
                       "%s: k argument [%%v] should not be greater than specified axis dim value "
                       "[%s] (axis %d)",
                       l->site ? l->site : "topk", lz_ex(l, D), axis);
    base_strbuf_json_string(&lit, msg.data);
    kc = lit.data ? lz_str(l, "%s", lit.data) : NULL;
    base_strbuf_free(&msg);
    base_strbuf_free(&lit);
  }
  lz_line(l, "alloc %s: %s[1] local", pv, mn);
  lz_line(l, "alloc %s: i64[1] local", pi);
  lz_line(l, "alloc %s: %s[1] local", m, mn);
  lz_line(l, "alloc %s: i64[1] local", k);
  lz_line(l, "%s[0] = %s", pv, lz_lowest(l, mt, big));
  lz_line(l, "%s[0] = (-1)", pi);
  lz_line(l, "for %s in 0..%s {", s, lz_ex(l, yv->shape[axis]));
  l->ind++;
  lz_line(l, "%s[0] = %s", m, lz_lowest(l, mt, !big));
  lz_line(l, "%s[0] = (-1)", k);
  lz_line(l, "for %s in 0..%s {", r, lz_ex(l, x->shape[axis]));
  l->ind++;
  lz_line(l, "let %s: %s = %s", v, mn, lz_up(l, t, lz_load(l, x, xi)));
  const char *lt = big ? "<" : ">", *gt = big ? ">" : "<";
  lz_line(
      l,
      "let %s: bool = (%s == 0 || %s %s %s[0] || (%s == %s[0] && i64(%s) > %s[0])) && (%s[0] < 0 "
      "|| %s %s %s[0])",
      tk, s, v, lt, pv, v, pv, r, pi, k, v, gt, m);
  lz_line(l, "%s[0] = select(%s, i64(%s), %s[0])", k, tk, r, k);
  lz_line(l, "%s[0] = select(%s, %s, %s[0])", m, tk, v, m);
  lz_close(l);
  lz_line(l, "%s = %s", lz_load(l, yv, oi), lz_down(l, t, lz_str(l, "%s[0]", m)));
  if (kc)
    lz_line(l, "%s = select(check(%s <= %s, %s, %s) > 0, %s[0], %s[0])", lz_load(l, yi, oi),
            lz_ex(l, K), lz_ex(l, D), lz_ex(l, K), kc, k, k);
  else
    lz_line(l, "%s = %s[0]", lz_load(l, yi, oi), k);
  lz_line(l, "%s[0] = %s[0]", pv, m);
  lz_line(l, "%s[0] = %s[0]", pi, k);
  lz_close(l);
  lz_close_n(l, ni);
}

/* log2(e): softmax's exponentials are exp2((x - max) * log2(e)), a subtract, a multiply and the
 * hardware's exp2 per element (CUDA's accurate expf is several instructions more). Not
 * x * log2(e) - max * log2(e): with x and max both about -FLT_MAX (a row masked with
 * finfo.min, as Hugging Face's attention masks are) the products overflow to -inf and their
 * difference is NaN; onnxruntime gives the row's uniform distribution there. */
#define LZ_LOG2E 1.4426950408889634

/* softmax / log_softmax along one axis: loops over the other dims, then the row max, the sum of
 * exponentials (the row_reduction rule runs the two as one online sweep, passes/schedule) and
 * the normalization, a multiply by the sum's reciprocal (log_softmax: x - (max + log sum)). */
void lz_gen_softmax(lz_ctx *l) {
  bool logsm = l->call->op->id == RX_OP_log_softmax;
  lz_opnd *x = lz_arg(l, 0), *y = &l->outs[0];
  if (x->scalar || x->ndim == 0) {
    lz_fail(l, "%s of a 0-d tensor", l->call->op->name);
    return;
  }
  int axis = lz_axis_attr(l, "axis", -1, x->ndim);
  const char *iv[LZ_MAXR], *xi[LZ_MAXR];
  const rx_expr *ie[LZ_MAXR];
  int ni = 0;
  const char *j = NULL;
  for (int d = 0; d < x->ndim; d++) {
    if (d == axis) continue;
    iv[ni] = lz_loopvar(l, lz_str(l, "i%d", ni));
    ie[ni] = x->shape[d];
    xi[d] = iv[ni++];
  }
  j = lz_loopvar(l, "j");
  xi[axis] = j;
  rx_dtype t = x->dtype;
  lz_for_nest(l, iv, ie, ni);
  const char *mx = lz_fresh(l, "mx"), *s = lz_fresh(l, "s"), *k = lz_flit(l, LZ_LOG2E);
  const char *xv = lz_up(l, t, lz_load(l, x, xi));
  const char *jv[1] = {j};
  const rx_expr *je[1] = {x->shape[axis]};
  const char *e = lz_str(l, "exp2((%s - %s[0]) * %s)", xv, mx, k);
  lz_line(l, "alloc %s: f32[1] local", mx);
  lz_reduce_open(l, jv, je, 1);
  lz_line(l, "init { %s[0] = (-inf) }", mx);
  lz_line(l, "update { %s[0] = max(%s[0], %s) }", mx, mx, xv);
  lz_close(l);
  lz_line(l, "alloc %s: f32[1] local", s);
  lz_reduce_open(l, jv, je, 1);
  lz_line(l, "init { %s[0] = 0.0 }", s);
  lz_line(l, "update { %s[0] = %s[0] + %s }", s, s, e);
  lz_close(l);
  const char *f = lz_fresh(l, logsm ? "lse" : "inv");
  if (logsm)
    lz_line(l, "let %s: f32 = %s[0] + log(%s[0])", f, mx, s);
  else
    lz_line(l, "let %s: f32 = 1.0 / %s[0]", f, s);
  lz_for_nest(l, jv, je, 1);
  const char *v = logsm ? lz_str(l, "%s - %s", xv, f) : lz_str(l, "%s * %s", e, f);
  lz_line(l, "%s = %s", lz_load(l, y, xi), lz_down(l, t, v));
  lz_close(l);
  lz_close_n(l, ni);
}

/* layer_norm (nparams 2) / rms_norm (nparams 1) over axes: rows like tests/kernels. The math is
 * in f32 (x's dtype when wider), rounded once to the output's dtype (x's, or the dtype attr). */
static void gen_norm(lz_ctx *l, bool layer) {
  lz_opnd *x = lz_arg(l, 0), *y = &l->outs[0];
  lz_opnd *g = lz_arg(l, 1), *b = layer ? lz_arg(l, 2) : NULL;
  if (x->scalar || g->scalar || (b && b->scalar)) {
    lz_fail(l, "%s expects tensor operands", l->call->op->name);
    return;
  }
  int axes[LZ_MAXR];
  int na = lz_axes_attr(l, "axes", x->ndim, false, axes);
  double eps = 1e-5;
  const rx_attr *ea = ops_call_attr(l->call, "epsilon");
  if (ea) eps = ea->f;
  bool red[LZ_MAXR] = {false};
  for (int i = 0; i < na; i++) red[axes[i]] = true;
  const char *iv[LZ_MAXR], *rv[LZ_MAXR], *xi[LZ_MAXR], *gi[LZ_MAXR];
  const rx_expr *ie[LZ_MAXR], *re[LZ_MAXR];
  int ni = 0, nr = 0;
  const rx_expr *count = sx_const(l->cx, 1);
  for (int d = 0; d < x->ndim; d++) {
    if (red[d]) {
      rv[nr] = lz_loopvar(l, lz_str(l, "j%d", nr));
      re[nr] = x->shape[d];
      xi[d] = rv[nr++];
      count = sym_expr_mul(l->cx, count, x->shape[d]);
    } else {
      iv[ni] = lz_loopvar(l, lz_str(l, "i%d", ni));
      ie[ni] = x->shape[d];
      xi[d] = iv[ni++];
    }
  }
  for (int i = 0; i < na; i++) gi[i] = xi[axes[i]];
  rx_dtype t = x->dtype;
  const char *xv = lz_up(l, t, lz_load(l, x, xi)), *cnt = lz_str(l, "f32(%s)", lz_ex(l, count));
  lz_for_nest(l, iv, ie, ni);
  const char *r = lz_fresh(l, "r");
  if (layer) {
    const char *s = lz_fresh(l, "s"), *mean = lz_fresh(l, "mean"), *var = lz_fresh(l, "v");
    lz_line(l, "alloc %s: f32[1] local", s);
    lz_reduce_open(l, rv, re, nr);
    lz_line(l, "init { %s[0] = 0.0 }", s);
    lz_line(l, "update { %s[0] = %s[0] + %s }", s, s, xv);
    lz_close(l);
    lz_line(l, "let %s: f32 = %s[0] / %s", mean, s, cnt);
    lz_line(l, "alloc %s: f32[1] local", var);
    lz_reduce_open(l, rv, re, nr);
    lz_line(l, "init { %s[0] = 0.0 }", var);
    lz_line(l, "update { %s[0] = %s[0] + (%s - %s) * (%s - %s) }", var, var, xv, mean, xv, mean);
    lz_close(l);
    lz_line(l, "let %s: f32 = rsqrt(%s[0] / %s + %s)", r, var, cnt, lz_flit(l, eps));
    lz_for_nest(l, rv, re, nr);
    lz_line(l, "%s = %s", lz_load(l, y, xi),
            lz_down(l, y->dtype,
                    lz_str(l, "(%s - %s) * %s * %s + %s", xv, mean, r,
                           lz_up(l, t, lz_load(l, g, gi)), lz_up(l, t, lz_load(l, b, gi)))));
    lz_close_n(l, nr);
  } else {
    const char *ss = lz_fresh(l, "ss");
    lz_line(l, "alloc %s: f32[1] local", ss);
    lz_reduce_open(l, rv, re, nr);
    lz_line(l, "init { %s[0] = 0.0 }", ss);
    lz_line(l, "update { %s[0] = %s[0] + %s * %s }", ss, ss, xv, xv);
    lz_close(l);
    lz_line(l, "let %s: f32 = rsqrt(%s[0] / %s + %s)", r, ss, cnt, lz_flit(l, eps));
    lz_for_nest(l, rv, re, nr);
    lz_line(l, "%s = %s", lz_load(l, y, xi),
            lz_down(l, y->dtype, lz_str(l, "%s * %s * %s", xv, r, lz_up(l, t, lz_load(l, g, gi)))));
    lz_close_n(l, nr);
  }
  lz_close_n(l, ni);
}

void lz_gen_layer_norm(lz_ctx *l) { gen_norm(l, true); }

void lz_gen_rms_norm(lz_ctx *l) { gen_norm(l, false); }
