/* ops/det.c: det, the determinant of each square matrix of x [..., n, n], its shape deduction
 * and its tensor program: per matrix a copy in local memory and Gaussian elimination with
 * partial pivoting (each row swap flips the sign; the product of the pivots is the
 * determinant), in f32 (f64 for f64). The batch loops write disjoint results, so the fallback
 * rule gives each matrix a thread; the elimination runs serially in it. n is a constant of at
 * most DET_MAX_N: the matrix is one thread's local array. */
#include "deduce.h"
#include "legalize_int.h"

#include <string.h>

/* the largest n: an n x n local array per thread (16 x 16 f32: 1 KiB, within what every target
 * gives a thread's private memory before it spills far) */
#define DET_MAX_N 16

const rx_sinfo *ops_deduce_det(rx_deduce_ctx *dc, const rx_node *call) {
  const rx_sinfo *x = ops_tensor_arg(dc, call, 0, "x");
  if (!x || !ops_need_float(dc, x, "x")) return NULL;
  if (x->ndim < 0) return ops_tensor(dc, x->dtype, -1, NULL);
  if (x->ndim < 2) {
    ops_deduce_error(dc, "det expects square matrices x [..., n, n], got %s", ops_str(dc, x));
    return NULL;
  }
  if (!x->shape) return ops_tensor(dc, x->dtype, x->ndim - 2, NULL);
  if (ops_dim_eq(dc, x->shape[x->ndim - 2], x->shape[x->ndim - 1]) == RX_FALSE) {
    ops_deduce_error(dc, "det expects square matrices x [..., n, n], got %s", ops_str(dc, x));
    return NULL;
  }
  const rx_expr **d = ops_dims(dc, x->ndim - 2);
  for (int k = 0; k < x->ndim - 2; k++) d[k] = x->shape[k];
  return ops_tensor(dc, x->dtype, x->ndim - 2, d);
}

void lz_gen_det(lz_ctx *l) {
  lz_opnd *x = lz_arg(l, 0), *y = &l->outs[0];
  if (x->scalar || x->ndim < 2) {
    lz_fail(l, "det expects square matrices x [..., n, n]");
    return;
  }
  const rx_expr *ne = x->shape[x->ndim - 1];
  if (ne->kind != RX_EXPR_CONST || ne->value < 1 || ne->value > DET_MAX_N) {
    lz_fail(l, "the matrices' size must be a constant from 1 to %d (one thread's local array)",
            DET_MAX_N);
    return;
  }
  long long n = (long long)ne->value;
  int nb = x->ndim - 2;
  const char *iv[LZ_MAXR], *xi[LZ_MAXR];
  for (int d = 0; d < nb; d++) iv[d] = lz_loopvar(l, lz_str(l, "i%d", d));
  if (nb == 0)
    iv[0] = lz_loopvar(l, "u"); /* one matrix: a loop of one so that locals have a kernel */
  for (int d = 0; d < (nb ? nb : 1); d++) {
    lz_line(l, "for %s in 0..%s {", iv[d], nb ? lz_ex(l, x->shape[d]) : "1");
    l->ind++;
  }
  const char *t = ir_dtype_name(x->dtype == RX_DTYPE_F64 ? RX_DTYPE_F64 : RX_DTYPE_F32);
  const char *a = lz_fresh(l, "a"), *det = lz_fresh(l, "det"), *piv = lz_fresh(l, "piv");
  const char *r = lz_loopvar(l, "r"), *c = lz_loopvar(l, "c"), *k = lz_loopvar(l, "k");
  const char *r2 = lz_loopvar(l, "r"), *r3 = lz_loopvar(l, "r"), *c2 = lz_loopvar(l, "c"),
             *c3 = lz_loopvar(l, "c");
  const char *v = lz_fresh(l, "v"), *p = lz_fresh(l, "p"), *f = lz_fresh(l, "f");
  lz_line(l, "alloc %s: %s[%lld, %lld] local", a, t, n, n);
  lz_line(l, "alloc %s: %s[1] local", det, t);
  lz_line(l, "alloc %s: i64[1] local", piv);
  for (int d = 0; d < nb; d++) xi[d] = iv[d];
  xi[nb] = r;
  xi[nb + 1] = c;
  lz_line(l, "for %s in 0..%lld, %s in 0..%lld {", r, n, c, n);
  l->ind++;
  lz_line(l, "%s[%s, %s] = %s(%s)", a, r, c, t, lz_load(l, x, xi));
  lz_close(l);
  lz_line(l, "%s[0] = 1.0", det);
  lz_line(l, "for %s in 0..%lld {", k, n);
  l->ind++;
  lz_line(l, "%s[0] = i64(%s)", piv, k); /* the row of the largest |a[r, k]|, r >= k */
  lz_line(l, "for %s in %s + 1..%lld {", r2, k, n);
  l->ind++;
  lz_line(l, "if abs(%s[%s, %s]) > abs(%s[%s[0], %s]) { %s[0] = i64(%s) }", a, r2, k, a, piv, k,
          piv, r2);
  lz_close(l);
  lz_line(l, "let %s: i64 = %s[0]", p, piv);
  lz_line(l, "if %s != i64(%s) {", p, k);
  l->ind++;
  lz_line(l, "for %s in 0..%lld {", c2, n);
  l->ind++;
  lz_line(l, "let %s: %s = %s[%s, %s]", v, t, a, k, c2);
  lz_line(l, "%s[%s, %s] = %s[%s, %s]", a, k, c2, a, p, c2);
  lz_line(l, "%s[%s, %s] = %s", a, p, c2, v);
  lz_close(l);
  lz_line(l, "%s[0] = -%s[0]", det, det);
  lz_close(l);
  lz_line(l, "%s[0] = %s[0] * %s[%s, %s]", det, det, a, k, k);
  lz_line(l, "if %s[%s, %s] != 0.0 {", a, k, k);
  l->ind++;
  lz_line(l, "for %s in %s + 1..%lld {", r3, k, n);
  l->ind++;
  lz_line(l, "let %s: %s = %s[%s, %s] / %s[%s, %s]", f, t, a, r3, k, a, k, k);
  lz_line(l, "for %s in 0..%lld {", c3, n);
  l->ind++;
  lz_line(l, "%s[%s, %s] = %s[%s, %s] - %s * %s[%s, %s]", a, r3, c3, a, r3, c3, f, a, k, c3);
  lz_close(l);
  lz_close(l);
  lz_close(l);
  lz_close(l);
  const char *out = lz_str(l, "%s[0]", det);
  if (strcmp(t, ir_dtype_name(x->dtype))) out = lz_str(l, "%s(%s)", ir_dtype_name(x->dtype), out);
  lz_line(l, "%s = %s", lz_load(l, y, iv), out);
  for (int d = 0; d < (nb ? nb : 1); d++) lz_close(l);
}
