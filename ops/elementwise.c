/* Elementwise ops: unary, binary with NumPy broadcasting, comparisons, logic, where, cast.
 *
 * Broadcasting of symbolic dims is decided by proof only: dims a and b give a when a == b is
 * proven, the other one when one of them is provably 1, an error naming both shapes when they
 * provably differ (and neither can be 1), and an error suggesting match_cast when nothing can
 * be proven (`add(x: f32[n], y: f32[m])`): the result shape would depend on run-time values. */
#include "deduce.h"

/* ---- dtypes ---- */

static bool is_bool_or_any(rx_dtype t) { return t == RX_DTYPE_BOOL || t == RX_DTYPE_UNKNOWN; }

/* The common dtype of two operands; weak literals adopt the other operand's dtype. */
static bool common_dtype(rx_deduce_ctx *dc, const rx_node *call, int ia, const rx_sinfo *a, int ib,
                         const rx_sinfo *b, rx_dtype *out) {
  bool wa = rx_ops_is_weak(call, ia), wb = rx_ops_is_weak(call, ib);
  if (wa && wb) {
    *out = rx_dtype_is_float(a->dtype) ? a->dtype : b->dtype;
    return true;
  }
  if (wa || a->dtype == RX_DTYPE_UNKNOWN) {
    *out = b->dtype;
    return true;
  }
  if (wb || b->dtype == RX_DTYPE_UNKNOWN || a->dtype == b->dtype) {
    *out = a->dtype;
    return true;
  }
  rx_deduce_error(dc, "%s expects operands of the same dtype, got %s and %s", call->op->name,
                  rx_ops_str(dc, a), rx_ops_str(dc, b));
  return false;
}

/* ---- broadcasting ---- */

/* One dim of the broadcast; NULL after reporting. */
static const rx_expr *bcast_dim(rx_deduce_ctx *dc, const rx_node *call, const rx_sinfo *a,
                                const rx_sinfo *b, const rx_expr *x, const rx_expr *y) {
  rx_tribool eq = rx_ops_dim_eq(dc, x, y);
  if (eq == RX_TRUE) return x;
  const rx_expr *one = rx_expr_const(rx_ops_ctx(dc), 1);
  rx_tribool x1 = rx_ops_dim_eq(dc, x, one), y1 = rx_ops_dim_eq(dc, y, one);
  if (x1 == RX_TRUE) return y;
  if (y1 == RX_TRUE) return x;
  if (eq == RX_FALSE && x1 == RX_FALSE && y1 == RX_FALSE) {
    rx_deduce_error(dc, "%s cannot broadcast %s and %s: dims %s and %s differ", call->op->name,
                    rx_ops_str(dc, a), rx_ops_str(dc, b), rx_ops_expr_str(dc, x),
                    rx_ops_expr_str(dc, y));
  } else {
    rx_deduce_error(dc,
                    "%s cannot broadcast %s and %s: dims %s and %s are not provably equal and "
                    "neither is provably 1; use match_cast to give the operands a common shape",
                    call->op->name, rx_ops_str(dc, a), rx_ops_str(dc, b), rx_ops_expr_str(dc, x),
                    rx_ops_expr_str(dc, y));
  }
  return NULL;
}

/* The broadcast of two tensors' shapes as a tensor of dtype; NULL after reporting. */
static const rx_sinfo *bcast(rx_deduce_ctx *dc, const rx_node *call, const rx_sinfo *a,
                             const rx_sinfo *b, rx_dtype dtype) {
  if (a->ndim < 0 || b->ndim < 0) return rx_ops_tensor(dc, dtype, -1, NULL);
  int n = a->ndim > b->ndim ? a->ndim : b->ndim;
  if (!a->shape || !b->shape) return rx_ops_tensor(dc, dtype, n, NULL);
  const rx_expr **dims = rx_ops_dims(dc, n);
  for (int i = 0; i < n; i++) {
    int ia = a->ndim - n + i, ib = b->ndim - n + i;
    if (ia < 0) {
      dims[i] = b->shape[ib];
    } else if (ib < 0) {
      dims[i] = a->shape[ia];
    } else {
      dims[i] = bcast_dim(dc, call, a, b, a->shape[ia], b->shape[ib]);
      if (!dims[i]) return NULL;
    }
  }
  return rx_ops_tensor(dc, dtype, n, dims);
}

/* ---- unary ---- */

static const rx_sinfo *same_shape(rx_deduce_ctx *dc, const rx_sinfo *t, rx_dtype dtype) {
  return rx_ops_tensor(dc, dtype, t->ndim, t->shape);
}

const rx_sinfo *rx_deduce_unary(rx_deduce_ctx *dc, const rx_node *call) {
  const rx_sinfo *t = rx_ops_tensor_arg(dc, call, 0, "x");
  if (!t) return NULL;
  if (t->dtype == RX_DTYPE_BOOL) {
    rx_deduce_error(dc, "%s expects a numeric tensor, got %s", call->op->name, rx_ops_str(dc, t));
    return NULL;
  }
  return same_shape(dc, t, t->dtype);
}

const rx_sinfo *rx_deduce_unary_float(rx_deduce_ctx *dc, const rx_node *call) {
  const rx_sinfo *t = rx_ops_tensor_arg(dc, call, 0, "x");
  if (!t || !rx_ops_need_float(dc, t, call->op->name)) return NULL;
  return same_shape(dc, t, t->dtype);
}

const rx_sinfo *rx_deduce_unary_bool(rx_deduce_ctx *dc, const rx_node *call) {
  const rx_sinfo *t = rx_ops_tensor_arg(dc, call, 0, "x");
  if (!t) return NULL;
  if (!is_bool_or_any(t->dtype)) {
    rx_deduce_error(dc, "%s expects a bool tensor, got %s", call->op->name, rx_ops_str(dc, t));
    return NULL;
  }
  return same_shape(dc, t, RX_DTYPE_BOOL);
}

const rx_sinfo *rx_deduce_cast(rx_deduce_ctx *dc, const rx_node *call) {
  const rx_sinfo *t = rx_ops_tensor_arg(dc, call, 0, "x");
  if (!t) return NULL;
  const rx_attr *a = rx_call_attr(call, "dtype");
  if (!a || a->kind != RX_ATTR_DTYPE || a->dtype == RX_DTYPE_UNKNOWN) {
    rx_deduce_error(dc, "cast expects dtype=<f32|f16|bf16|i64|i32|i16|i8|u8|bool>");
    return NULL;
  }
  return same_shape(dc, t, a->dtype);
}

/* ---- binary ---- */

/* kind: 'a' arithmetic (result: the common dtype), 'c' comparison (result bool), 'l' logic
 * (bool operands, result bool). */
static const rx_sinfo *binary(rx_deduce_ctx *dc, const rx_node *call, char kind) {
  const rx_sinfo *a = rx_ops_tensor_arg(dc, call, 0, "a");
  const rx_sinfo *b = a ? rx_ops_tensor_arg(dc, call, 1, "b") : NULL;
  if (!b) return NULL;
  rx_dtype dt;
  if (!common_dtype(dc, call, 0, a, 1, b, &dt)) return NULL;
  if (kind == 'l' && !is_bool_or_any(dt)) {
    rx_deduce_error(dc, "%s expects bool operands, got %s and %s", call->op->name,
                    rx_ops_str(dc, a), rx_ops_str(dc, b));
    return NULL;
  }
  if (kind == 'a' && dt == RX_DTYPE_BOOL) {
    rx_deduce_error(dc, "%s expects numeric operands, got %s and %s", call->op->name,
                    rx_ops_str(dc, a), rx_ops_str(dc, b));
    return NULL;
  }
  return bcast(dc, call, a, b, kind == 'a' ? dt : RX_DTYPE_BOOL);
}

const rx_sinfo *rx_deduce_binary(rx_deduce_ctx *dc, const rx_node *call) {
  return binary(dc, call, 'a');
}
const rx_sinfo *rx_deduce_compare(rx_deduce_ctx *dc, const rx_node *call) {
  return binary(dc, call, 'c');
}
const rx_sinfo *rx_deduce_logical(rx_deduce_ctx *dc, const rx_node *call) {
  return binary(dc, call, 'l');
}

const rx_sinfo *rx_deduce_where(rx_deduce_ctx *dc, const rx_node *call) {
  const rx_sinfo *c = rx_ops_tensor_arg(dc, call, 0, "cond");
  const rx_sinfo *a = c ? rx_ops_tensor_arg(dc, call, 1, "a") : NULL;
  const rx_sinfo *b = a ? rx_ops_tensor_arg(dc, call, 2, "b") : NULL;
  if (!b) return NULL;
  if (!is_bool_or_any(c->dtype)) {
    rx_deduce_error(dc, "where expects a bool condition, got %s", rx_ops_str(dc, c));
    return NULL;
  }
  rx_dtype dt;
  if (!common_dtype(dc, call, 1, a, 2, b, &dt)) return NULL;
  const rx_sinfo *ab = bcast(dc, call, a, b, dt);
  return ab ? bcast(dc, call, c, ab, dt) : NULL;
}
