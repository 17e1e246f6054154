/* Linear algebra: matmul with NumPy semantics. [..., m, k] x [..., k, n] -> [..., m, n]; the
 * batch dims broadcast (by proof, as for elementwise ops); a 1-D left operand is [1, k] with the
 * 1 removed from the result, a 1-D right operand is [k, 1] likewise. The inner dims must be
 * provably equal. Its legalization (below): a multiply-accumulate reduce per output point. */
#include "deduce.h"
#include "legalize_int.h"

#include "../shapes/expr_build.h"

/* Batch dims broadcast: same rule as elementwise ops. */
static const rx_expr *bdim(rx_deduce_ctx *dc, const rx_sinfo *a, const rx_sinfo *b,
                           const rx_expr *x, const rx_expr *y) {
  rx_tribool eq = ops_dim_eq(dc, x, y);
  if (eq == RX_TRUE) return x;
  const rx_expr *one = sym_expr_const(ops_ctx(dc), 1);
  rx_tribool x1 = ops_dim_eq(dc, x, one), y1 = ops_dim_eq(dc, y, one);
  if (x1 == RX_TRUE) return y;
  if (y1 == RX_TRUE) return x;
  if (eq == RX_FALSE && x1 == RX_FALSE && y1 == RX_FALSE)
    ops_deduce_error(dc, "matmul cannot broadcast the batch dims of %s and %s: %s and %s differ",
                     ops_str(dc, a), ops_str(dc, b), ops_expr_str(dc, x), ops_expr_str(dc, y));
  else
    ops_deduce_error(dc,
                     "matmul cannot prove that the batch dims of %s and %s broadcast: %s and %s "
                     "are not provably equal and neither is provably 1; use match_cast",
                     ops_str(dc, a), ops_str(dc, b), ops_expr_str(dc, x), ops_expr_str(dc, y));
  return NULL;
}

const rx_sinfo *ops_deduce_matmul(rx_deduce_ctx *dc, const rx_node *call) {
  const rx_sinfo *a = ops_tensor_arg(dc, call, 0, "a");
  const rx_sinfo *b = a ? ops_tensor_arg(dc, call, 1, "b") : NULL;
  if (!b) return NULL;
  rx_dtype dt = a->dtype;
  if (a->dtype == RX_DTYPE_UNKNOWN) {
    dt = b->dtype;
  } else if (b->dtype != RX_DTYPE_UNKNOWN && a->dtype != b->dtype) {
    ops_deduce_error(dc, "matmul expects operands of the same dtype, got %s and %s", ops_str(dc, a),
                     ops_str(dc, b));
    return NULL;
  }
  if (a->ndim == 0 || b->ndim == 0) {
    ops_deduce_error(dc, "matmul expects operands of rank >= 1, got %s and %s", ops_str(dc, a),
                     ops_str(dc, b));
    return NULL;
  }
  if (a->ndim < 0 || b->ndim < 0) return ops_tensor(dc, dt, -1, NULL);
  int ra = a->ndim < 2 ? 0 : a->ndim - 2, rb = b->ndim < 2 ? 0 : b->ndim - 2; /* batch ranks */
  int batch = ra > rb ? ra : rb;
  int n = batch + (a->ndim >= 2) + (b->ndim >= 2);
  if (!a->shape || !b->shape) return ops_tensor(dc, dt, n, NULL);

  const rx_expr *ka = a->shape[a->ndim - 1];
  const rx_expr *kb = b->shape[b->ndim >= 2 ? b->ndim - 2 : 0];
  rx_tribool eq = ops_dim_eq(dc, ka, kb);
  if (eq == RX_FALSE) {
    ops_deduce_error(dc, "matmul inner dims differ: %s x %s (%s vs %s)", ops_str(dc, a),
                     ops_str(dc, b), ops_expr_str(dc, ka), ops_expr_str(dc, kb));
    return NULL;
  }
  if (eq == RX_UNKNOWN) {
    ops_deduce_error(dc,
                     "matmul cannot prove the inner dims equal: %s x %s (%s vs %s); use match_cast",
                     ops_str(dc, a), ops_str(dc, b), ops_expr_str(dc, ka), ops_expr_str(dc, kb));
    return NULL;
  }
  const rx_expr **dims = ops_dims(dc, n);
  for (int i = 0; i < batch; i++) {
    int ia = ra - batch + i, ib = rb - batch + i;
    if (ia < 0) {
      dims[i] = b->shape[ib];
    } else if (ib < 0) {
      dims[i] = a->shape[ia];
    } else if (!(dims[i] = bdim(dc, a, b, a->shape[ia], b->shape[ib]))) {
      return NULL;
    }
  }
  int k = batch;
  if (a->ndim >= 2) dims[k++] = a->shape[a->ndim - 2];
  if (b->ndim >= 2) dims[k++] = b->shape[b->ndim - 1];
  return ops_tensor(dc, dt, n, dims);
}

/* ------------------------------------------------------------------------------------------
 * legalization: the generators named in ops.def (the writer they use: ops/legalize.c)
 * ------------------------------------------------------------------------------------------ */

/* ---- matmul ---- */

void lz_gen_matmul(lz_ctx *l) {
  lz_opnd *a = lz_arg(l, 0), *b = lz_arg(l, 1), *y = &l->outs[0];
  if (a->scalar || b->scalar || a->ndim < 1 || b->ndim < 1) {
    lz_fail(l, "matmul expects tensor operands of rank >= 1");
    return;
  }
  int ra = a->ndim >= 2 ? a->ndim - 2 : 0, rb = b->ndim >= 2 ? b->ndim - 2 : 0;
  int batch = y->ndim - (a->ndim >= 2) - (b->ndim >= 2);
  const char *iv[LZ_MAXR];
  lz_nest_vars(l, "i", y->ndim, iv);
  const char *r = lz_loopvar(l, "r");
  const rx_expr *k = a->shape[a->ndim - 1];
  const char *ai[LZ_MAXR], *bi[LZ_MAXR];
  for (int d = 0; d < ra; d++) {
    int j = batch - ra + d;
    ai[d] = rx_expr_is_const(a->shape[d], 1) && !rx_expr_is_const(y->shape[j], 1) ? "0"
            : a->shape[d] == y->shape[j]
                ? iv[j]
                : lz_ex(l, sym_expr_floormod(l->cx, sx_var(l->cx, iv[j]), a->shape[d]));
  }
  for (int d = 0; d < rb; d++) {
    int j = batch - rb + d;
    bi[d] = rx_expr_is_const(b->shape[d], 1) && !rx_expr_is_const(y->shape[j], 1) ? "0"
            : b->shape[d] == y->shape[j]
                ? iv[j]
                : lz_ex(l, sym_expr_floormod(l->cx, sx_var(l->cx, iv[j]), b->shape[d]));
  }
  int pos = batch;
  if (a->ndim >= 2) ai[ra] = iv[pos++];
  ai[a->ndim - 1] = r;
  if (b->ndim >= 2) {
    bi[rb] = r;
    bi[rb + 1] = iv[pos++];
  } else {
    bi[0] = r;
  }
  lz_for_nest(l, iv, y->shape, y->ndim);
  const char *av = lz_load(l, a, ai), *bv = lz_load(l, b, bi), *yv = lz_load(l, y, iv);
  const char *kv[1] = {r};
  const rx_expr *ke[1] = {k};
  rx_dtype t = y->dtype;
  if (lz_is_half(t))
    lz_sum_of_products(l, yv, t, kv, ke, 1, lz_str(l, "f32(%s)", av), lz_str(l, "f32(%s)", bv));
  else
    lz_sum_of_products(l, yv, t, kv, ke, 1, av, bv);
  lz_close_n(l, y->ndim);
}
