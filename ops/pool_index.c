/* ops/pool_index.c: max_pool2d_index, the flat index in x of the element each max_pool2d window
 * takes (ONNX MaxPool's Indices output): its shape deduction (max_pool2d's shape, i64) and its
 * tensor program, per output point a serial scan of the window in row-major order keeping the
 * first largest in-bounds element. The index counts over all of x, [N, C, H, W] row-major
 * (storage_order 0) or with H and W swapped (storage_order 1: ((n C + c) W + w) H + h). */
#include "deduce.h"
#include "legalize_int.h"

const rx_sinfo *ops_deduce_max_pool2d_index(rx_deduce_ctx *dc, const rx_node *call) {
  const rx_sinfo *y = ops_deduce_pool2d(dc, call);
  if (!y) return NULL;
  return ops_tensor(dc, RX_DTYPE_I64, y->ndim, y->shape ? (const rx_expr **)y->shape : NULL);
}

void lz_gen_max_pool2d_index(lz_ctx *l) {
  lz_opnd *x = lz_arg(l, 0), *y = &l->outs[0];
  rx_nn_win w;
  if (x->scalar || x->ndim != 4) {
    lz_fail(l, "max_pool2d_index expects x [N, C, H, W]");
    return;
  }
  if (!lz_window(l, true, &w)) return;
  bool col = ops_int_attr(l->call, "storage_order", 0) != 0;
  const char *ov[4];
  for (int d = 0; d < 4; d++) ov[d] = lz_loopvar(l, lz_str(l, "i%d", d));
  const char *kh = lz_loopvar(l, "kh"), *kw = lz_loopvar(l, "kw");
  for (int d = 0; d < 4; d++) {
    lz_line(l, "for %s in 0..%s {", ov[d], lz_ex(l, y->shape[d]));
    l->ind++;
  }
  const char *t = ir_dtype_name(x->dtype);
  const char *m = lz_fresh(l, "m"), *k = lz_fresh(l, "k"), *ih = lz_fresh(l, "ih"),
             *iw = lz_fresh(l, "iw"), *v = lz_fresh(l, "v");
  const char *H = lz_ex(l, x->shape[2]), *W = lz_ex(l, x->shape[3]);
  lz_line(l, "alloc %s: %s[1] local", m, t);
  lz_line(l, "alloc %s: i64[1] local", k);
  lz_line(l, "%s[0] = %s(0)", m, t);
  lz_line(l, "%s[0] = (-1)", k);
  lz_line(l, "for %s in 0..%lld, %s in 0..%lld {", kh, (long long)w.kh, kw, (long long)w.kw);
  l->ind++;
  lz_line(l, "let %s: i64 = i64(%s * %lld + %s * %lld) - %lld", ih, ov[2], (long long)w.sh, kh,
          (long long)w.dh, (long long)w.pt);
  lz_line(l, "let %s: i64 = i64(%s * %lld + %s * %lld) - %lld", iw, ov[3], (long long)w.sw, kw,
          (long long)w.dw, (long long)w.pl);
  lz_line(l, "if %s >= 0 && %s < %s && %s >= 0 && %s < %s {", ih, ih, H, iw, iw, W);
  l->ind++;
  const char *xi[4] = {ov[0], ov[1], ih, iw};
  lz_line(l, "let %s: %s = %s", v, t, lz_load(l, x, xi));
  const char *plane = lz_str(l, "(i64(%s) * %s + i64(%s))", ov[0], lz_ex(l, x->shape[1]), ov[1]);
  const char *idx = col ? lz_str(l, "(%s * %s + %s) * %s + %s", plane, W, iw, H, ih)
                        : lz_str(l, "(%s * %s + %s) * %s + %s", plane, H, ih, W, iw);
  lz_line(l, "if %s[0] < 0 || %s > %s[0] {", k, v, m);
  l->ind++;
  lz_line(l, "%s[0] = %s", m, v);
  lz_line(l, "%s[0] = %s", k, idx);
  lz_close(l);
  lz_close(l);
  lz_close(l);
  lz_line(l, "%s = %s[0]", lz_load(l, y, ov), k);
  for (int d = 0; d < 4; d++) lz_close(l);
}
