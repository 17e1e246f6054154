/* Reductions (sum mean max min over axes, keepdims; argmax argmin along an axis) and normalizations
 * (softmax, log_softmax, layer_norm, rms_norm). */
#include "deduce.h"

const rx_sinfo *rx_deduce_reduce(rx_deduce_ctx *dc, const rx_node *call) {
  const rx_sinfo *x = rx_ops_tensor_arg(dc, call, 0, "x");
  if (!x) return NULL;
  bool keep = rx_ops_int_attr(call, "keepdims", 0) != 0;
  int *axes, na;
  bool present;
  if (!rx_ops_axes_attr(dc, call, "axes", x->ndim, &axes, &na, &present)) return NULL;
  if (x->ndim < 0) {
    if (!present && !keep) return rx_ops_tensor(dc, x->dtype, 0, NULL); /* a scalar */
    return rx_ops_tensor(dc, x->dtype, -1, NULL);
  }
  bool *red = rx_module_alloc(dc->mod, sizeof(bool) * (size_t)(x->ndim + 1));
  for (int i = 0; i < x->ndim; i++) red[i] = !present;
  for (int i = 0; i < na; i++) red[axes[i]] = true;
  int n = 0;
  for (int i = 0; i < x->ndim; i++) n += keep || !red[i];
  if (!x->shape) return rx_ops_tensor(dc, x->dtype, n, NULL);
  const rx_expr **dims = rx_ops_dims(dc, n);
  const rx_expr *one = rx_expr_const(rx_ops_ctx(dc), 1);
  int k = 0;
  for (int i = 0; i < x->ndim; i++) {
    if (!red[i])
      dims[k++] = x->shape[i];
    else if (keep)
      dims[k++] = one;
  }
  return rx_ops_tensor(dc, x->dtype, n, dims);
}

/* argmax / argmin: x (numeric, rank >= 1) reduced along one axis to the i64 index of its
 * extreme; keepdims keeps that dim as 1. */
const rx_sinfo *rx_deduce_argmax(rx_deduce_ctx *dc, const rx_node *call) {
  const char *name = call->op->name;
  const rx_sinfo *x = rx_ops_tensor_arg(dc, call, 0, "x");
  if (!x) return NULL;
  if (x->dtype == RX_DTYPE_BOOL) {
    rx_deduce_error(dc, "%s expects a numeric tensor, got %s", name, rx_ops_str(dc, x));
    return NULL;
  }
  bool keep = rx_ops_int_attr(call, "keepdims", 0) != 0;
  if (x->ndim < 0) return rx_ops_tensor(dc, RX_DTYPE_I64, -1, NULL);
  if (x->ndim == 0) {
    rx_deduce_error(dc, "%s expects a tensor of rank >= 1, got %s", name, rx_ops_str(dc, x));
    return NULL;
  }
  int axis;
  if (!rx_ops_norm_axis(dc, rx_ops_int_attr(call, "axis", -1), x->ndim, &axis)) return NULL;
  int n = keep ? x->ndim : x->ndim - 1;
  if (!x->shape) return rx_ops_tensor(dc, RX_DTYPE_I64, n, NULL);
  if (rx_expr_is_const(x->shape[axis], 0)) {
    rx_deduce_error(dc, "%s over axis %d of %s: the axis is empty, there is no index to return",
                    name, axis, rx_ops_str(dc, x));
    return NULL;
  }
  const rx_expr **dims = rx_ops_dims(dc, n);
  int k = 0;
  for (int i = 0; i < x->ndim; i++) {
    if (i != axis)
      dims[k++] = x->shape[i];
    else if (keep)
      dims[k++] = rx_expr_const(rx_ops_ctx(dc), 1);
  }
  return rx_ops_tensor(dc, RX_DTYPE_I64, n, dims);
}

/* cumsum: prefix sums of x (numeric, rank >= 1) along one axis; the shape and dtype of x. */
const rx_sinfo *rx_deduce_cumsum(rx_deduce_ctx *dc, const rx_node *call) {
  const rx_sinfo *x = rx_ops_tensor_arg(dc, call, 0, "x");
  if (!x) return NULL;
  if (x->dtype == RX_DTYPE_BOOL) {
    rx_deduce_error(dc, "cumsum expects a numeric tensor, got %s", rx_ops_str(dc, x));
    return NULL;
  }
  if (x->ndim == 0) {
    rx_deduce_error(dc, "cumsum expects a tensor of rank >= 1, got %s", rx_ops_str(dc, x));
    return NULL;
  }
  int axis;
  if (x->ndim > 0 && !rx_ops_norm_axis(dc, rx_ops_int_attr(call, "axis", -1), x->ndim, &axis))
    return NULL;
  return rx_ops_tensor(dc, x->dtype, x->ndim, x->shape);
}

/* topk: x (numeric, rank >= 1) and k=[K] (one symbolic value) give the tuple (values, i64
 * indices), each x's shape with K along axis; K provably negative or beyond the axis is an
 * error. */
const rx_sinfo *rx_deduce_topk(rx_deduce_ctx *dc, const rx_node *call) {
  const rx_sinfo *x = rx_ops_tensor_arg(dc, call, 0, "x");
  if (!x) return NULL;
  const rx_attr *ka = rx_call_attr(call, "k");
  if (!ka || ka->kind != RX_ATTR_EXPRS || ka->n != 1) {
    rx_deduce_error(dc, "topk expects k=[K], one symbolic value");
    return NULL;
  }
  if (x->dtype == RX_DTYPE_BOOL || x->ndim == 0) {
    rx_deduce_error(dc, "topk expects a numeric tensor of rank >= 1, got %s", rx_ops_str(dc, x));
    return NULL;
  }
  const rx_sinfo *f[2];
  if (x->ndim < 0 || !x->shape) {
    f[0] = rx_ops_tensor(dc, x->dtype, x->ndim, NULL);
    f[1] = rx_ops_tensor(dc, RX_DTYPE_I64, x->ndim, NULL);
    return rx_sinfo_tuple(dc->mod, f, 2);
  }
  int axis;
  if (!rx_ops_norm_axis(dc, rx_ops_int_attr(call, "axis", -1), x->ndim, &axis)) return NULL;
  rx_expr_ctx *cx = rx_ops_ctx(dc);
  const rx_expr *k = ka->exprs[0];
  if (rx_ops_prove(dc, rx_expr_cmp(cx, RX_EXPR_LT, k, rx_expr_const(cx, 0))) == RX_TRUE) {
    rx_deduce_error(dc, "topk: k=%s is negative (axis %d of %s)", rx_ops_expr_str(dc, k), axis,
                    rx_ops_str(dc, x));
    return NULL;
  }
  if (rx_ops_prove(dc, rx_expr_cmp(cx, RX_EXPR_LT, x->shape[axis], k)) == RX_TRUE) {
    /* ONNX Runtime's words (TopK, "k argument [K] should not be greater than ...") */
    rx_deduce_error(dc,
                    "topk: k argument [%s] should not be greater than specified axis dim value "
                    "[%s] (axis %d of %s)",
                    rx_ops_expr_str(dc, k), rx_ops_expr_str(dc, x->shape[axis]), axis,
                    rx_ops_str(dc, x));
    return NULL;
  }
  const rx_expr **dims = rx_ops_dims(dc, x->ndim);
  for (int i = 0; i < x->ndim; i++) dims[i] = i == axis ? rx_ops_simplify(dc, k) : x->shape[i];
  f[0] = rx_ops_tensor(dc, x->dtype, x->ndim, dims);
  f[1] = rx_ops_tensor(dc, RX_DTYPE_I64, x->ndim, dims);
  return rx_sinfo_tuple(dc->mod, f, 2);
}

const rx_sinfo *rx_deduce_softmax(rx_deduce_ctx *dc, const rx_node *call) {
  const rx_sinfo *x = rx_ops_tensor_arg(dc, call, 0, "x");
  if (!x || !rx_ops_need_float(dc, x, call->op->name)) return NULL;
  int axis;
  if (x->ndim >= 0 && !rx_ops_norm_axis(dc, rx_ops_int_attr(call, "axis", -1), x->ndim, &axis))
    return NULL;
  return rx_ops_tensor(dc, x->dtype, x->ndim, x->shape);
}

/* x normalized over axes (default [-1]) with per-axis parameters: each of the params args
 * (from index 1) must have the shape of x's normalized dims and x's dtype. */
static const rx_sinfo *norm(rx_deduce_ctx *dc, const rx_node *call, int nparams) {
  static const char *const ln[] = {"x", "gamma", "beta"}, *const rms[] = {"x", "weight"};
  const char *const *pn = nparams == 1 ? rms : ln;
  const rx_sinfo *x = rx_ops_tensor_arg(dc, call, 0, "x");
  if (!x || !rx_ops_need_float(dc, x, call->op->name)) return NULL;
  int *axes, na;
  bool present;
  if (!rx_ops_axes_attr(dc, call, "axes", x->ndim, &axes, &na, &present)) return NULL;
  if (!present && x->ndim >= 0) {
    if (x->ndim == 0) {
      rx_deduce_error(dc, "%s expects a tensor of rank >= 1, got %s", call->op->name,
                      rx_ops_str(dc, x));
      return NULL;
    }
    axes = rx_module_alloc(dc->mod, sizeof(int));
    axes[0] = x->ndim - 1;
    na = 1;
  }
  for (int p = 1; p <= nparams; p++) {
    const rx_sinfo *w = rx_ops_tensor_arg(dc, call, p, pn[p]);
    if (!w) return NULL;
    if (w->dtype != RX_DTYPE_UNKNOWN && x->dtype != RX_DTYPE_UNKNOWN && w->dtype != x->dtype) {
      rx_deduce_error(dc, "%s expects %s of the dtype of x (%s), got %s", call->op->name, pn[p],
                      rx_ops_str(dc, x), rx_ops_str(dc, w));
      return NULL;
    }
    if (x->ndim < 0 || w->ndim < 0) continue;
    if (w->ndim != na) {
      rx_deduce_error(dc, "%s expects %s of rank %d (the normalized axes of %s), got %s",
                      call->op->name, pn[p], na, rx_ops_str(dc, x), rx_ops_str(dc, w));
      return NULL;
    }
    if (!x->shape || !w->shape) continue;
    for (int i = 0; i < na; i++) {
      const rx_expr *xd = x->shape[axes[i]], *wd = w->shape[i];
      rx_tribool eq = rx_ops_dim_eq(dc, xd, wd);
      if (eq == RX_TRUE) continue;
      rx_deduce_error(dc, "%s expects %s to match the normalized dims of %s: %s %s %s%s",
                      call->op->name, pn[p], rx_ops_str(dc, x), rx_ops_str(dc, w),
                      eq == RX_FALSE ? "differs in dim" : "cannot be proven to match in dim",
                      rx_ops_expr_str(dc, wd), eq == RX_FALSE ? "" : "; use match_cast");
      return NULL;
    }
  }
  return rx_ops_tensor(dc, x->dtype, x->ndim, x->shape);
}

const rx_sinfo *rx_deduce_layer_norm(rx_deduce_ctx *dc, const rx_node *call) {
  return norm(dc, call, 2);
}
const rx_sinfo *rx_deduce_rms_norm(rx_deduce_ctx *dc, const rx_node *call) {
  return norm(dc, call, 1);
}
