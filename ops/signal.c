/* ops/signal.c: signal, detection and text-feature ops whose programs are loops that ONNX's
 * reference runs serially: dft (a direct sum per output point, ONNX DFT and STFT),
 * non_max_suppression (greedy box selection, ONNX NonMaxSuppression), roi_align (bilinear
 * samples per bin, ONNX RoiAlign) and tfidf (n-gram counts over a pool of integer n-grams, ONNX
 * TfIdfVectorizer). Each has its shape deduction and its generator (named in ops.def); the
 * programs are one thread, or one thread per output point, which the fallback schedule rule runs
 * as they are. */
#include "deduce.h"
#include "legalize_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- non_max_suppression ---- */

/* boxes [B, N, 4] and scores [B, C, N] (one float dtype), then max_out (integer), iou and
 * score thresholds (float), each a scalar or a one-element tensor, give (selected i64 [B C N, 3],
 * count i64 [1]): the selected (batch, class, box) triples in their first count rows. */
const rx_sinfo *ops_deduce_nms(rx_deduce_ctx *dc, const rx_node *call) {
  const rx_sinfo *bx = ops_tensor_arg(dc, call, 0, "boxes");
  const rx_sinfo *sc = bx ? ops_tensor_arg(dc, call, 1, "scores") : NULL;
  if (!sc) return NULL;
  const char *what[3] = {"max_output_boxes_per_class", "iou_threshold", "score_threshold"};
  for (int i = 2; i < call->nargs; i++) {
    const rx_sinfo *t = ops_tensor_arg(dc, call, i, what[i - 2]);
    if (!t) return NULL;
    if (t->dtype != RX_DTYPE_UNKNOWN && ir_dtype_is_float(t->dtype) != (i > 2)) {
      ops_deduce_error(dc, "non_max_suppression: %s must be %s, got %s", what[i - 2],
                       i > 2 ? "a float" : "an integer", ops_str(dc, t));
      return NULL;
    }
  }
  if (!ops_need_float(dc, bx, "non_max_suppression boxes") ||
      !ops_need_float(dc, sc, "non_max_suppression scores"))
    return NULL;
  rx_expr_ctx *cx = ops_ctx(dc);
  const rx_expr *one = sym_expr_const(cx, 1);
  const rx_sinfo *f[2];
  f[1] = ops_tensor(dc, RX_DTYPE_I64, 1, (const rx_expr *[]){one});
  if (bx->ndim < 0 || !bx->shape || sc->ndim < 0 || !sc->shape) {
    f[0] = ops_tensor(dc, RX_DTYPE_I64, 2, NULL);
    return rx_sinfo_tuple(dc->mod, f, 2);
  }
  if (bx->ndim != 3 || sc->ndim != 3 ||
      ops_dim_eq(dc, bx->shape[2], sym_expr_const(cx, 4)) == RX_FALSE ||
      ops_dim_eq(dc, bx->shape[0], sc->shape[0]) == RX_FALSE ||
      ops_dim_eq(dc, bx->shape[1], sc->shape[2]) == RX_FALSE) {
    ops_deduce_error(dc,
                     "non_max_suppression expects boxes [B, N, 4] and scores [B, C, N], got %s "
                     "and %s",
                     ops_str(dc, bx), ops_str(dc, sc));
    return NULL;
  }
  const rx_expr **d = ops_dims(dc, 2);
  d[0] = ops_prod(dc, sc->shape, 3);
  d[1] = sym_expr_const(cx, 3);
  f[0] = ops_tensor(dc, RX_DTYPE_I64, 2, d);
  return rx_sinfo_tuple(dc->mod, f, 2);
}

/* The value of scalar operand o (a literal, a symbolic value or element 0 of a buffer) as text
 * of dtype dt (i64 or f32). */
static const char *scalar_text(lz_ctx *l, const lz_opnd *o, rx_dtype dt) {
  bool fl = ir_dtype_is_float(dt);
  if (o->literal)
    return fl ? lz_flit(l, o->fval) : lz_ilit(l, o->is_int ? o->ival : (int64_t)o->fval);
  const char *t = o->text;
  if (!o->scalar) {
    const char *idx[LZ_MAXR];
    for (int k = 0; k < o->ndim; k++) idx[k] = "0";
    t = lz_load(l, o, idx);
  }
  return lz_str(l, "%s(%s)", ir_dtype_name(dt), t);
}

/* The box of index text bi in batch b as f32 `let` bindings named in out: x0, x1, y0, y1 from
 * corners [y1, x1, y2, x2] in either order, or from [x_center, y_center, width, height]. */
static void nms_box(lz_ctx *l, const lz_opnd *bx, const char *b, const char *bi, bool center,
                    const char **out) {
  const char *v[4];
  for (int k = 0; k < 4; k++) {
    const char *idx[3] = {b, bi, lz_str(l, "%d", k)};
    v[k] = lz_fresh(l, "bv");
    lz_line(l, "let %s: f32 = f32(%s)", v[k], lz_load(l, bx, idx));
  }
  const char *nm[4] = {"x0", "x1", "y0", "y1"};
  for (int k = 0; k < 4; k++) out[k] = lz_fresh(l, nm[k]);
  for (int k = 0; k < 4; k++) {
    int c = k < 2 ? 0 : 1; /* the center (x, y) and extent (w, h) of the box */
    if (center)
      lz_line(l, "let %s: f32 = %s %s %s / 2.0", out[k], v[c], k % 2 ? "+" : "-", v[c + 2]);
    else
      lz_line(l, "let %s: f32 = %s(%s, %s)", out[k], k % 2 ? "max" : "min", v[1 - c], v[3 - c]);
  }
}

/* Greedy non-maximum suppression in one thread, as ONNX's reference: per batch and class, the
 * candidates in order of score (ties by the lower box index; with a score threshold only those
 * above it), each pass picking the best one ordered after the previous pick (as topk), kept
 * unless its IoU with a box kept before in the class is over the threshold, until max_out are
 * kept. The kept triples are appended to y0 (read back from it for the IoU tests) and their
 * number stored in y1. O(C N^2) per batch. */
void lz_gen_nms(lz_ctx *l) {
  if (l->nouts != 2 || l->call->nargs < 4) {
    lz_fail(l, "non_max_suppression expects 4 or 5 arguments and gives two results");
    return;
  }
  const lz_opnd *bx = lz_arg(l, 0), *sc = lz_arg(l, 1), *y = &l->outs[0], *yc = &l->outs[1];
  bool center = ops_int_attr(l->call, "center_point_box", 0) != 0;
  bool has_st = l->call->nargs > 4;
  const char *u = lz_loopvar(l, "u"), *b = lz_loopvar(l, "b"), *c = lz_loopvar(l, "c");
  const char *s = lz_loopvar(l, "s"), *r = lz_loopvar(l, "r"), *j = lz_loopvar(l, "j");
  const char *cnt = lz_fresh(l, "cnt"), *ncl = lz_fresh(l, "ncl"), *ps = lz_fresh(l, "ps");
  const char *pi = lz_fresh(l, "pi"), *bs = lz_fresh(l, "bs"), *bi = lz_fresh(l, "bi");
  const char *keep = lz_fresh(l, "keep"), *mo = lz_fresh(l, "mo"), *th = lz_fresh(l, "th");
  const char *st = lz_fresh(l, "st"), *v = lz_fresh(l, "v"), *tk = lz_fresh(l, "take");
  const char *q = lz_fresh(l, "q"), *sup = lz_fresh(l, "sup");
  const char *N = lz_ex(l, sc->shape[2]);
  lz_line(l, "for %s in 0..1 {", u);
  l->ind++;
  const char *loc[7] = {cnt, ncl, ps, pi, bs, bi, keep};
  for (int k = 0; k < 7; k++)
    lz_line(l, "alloc %s: %s[1] local", loc[k], k == 2 || k == 4 ? "f32" : "i64");
  lz_line(l, "let %s: i64 = %s", mo, scalar_text(l, lz_arg(l, 2), RX_DTYPE_I64));
  lz_line(l, "let %s: f32 = %s", th, scalar_text(l, lz_arg(l, 3), RX_DTYPE_F32));
  if (has_st) lz_line(l, "let %s: f32 = %s", st, scalar_text(l, lz_arg(l, 4), RX_DTYPE_F32));
  lz_line(l, "%s[0] = 0", cnt);
  lz_line(l, "for %s in 0..%s {", b, lz_ex(l, sc->shape[0]));
  l->ind++;
  lz_line(l, "for %s in 0..%s {", c, lz_ex(l, sc->shape[1]));
  l->ind++;
  lz_line(l, "%s[0] = 0", ncl);
  lz_line(l, "%s[0] = inf", ps);
  lz_line(l, "%s[0] = (-1)", pi);
  lz_line(l, "for %s in 0..%s {", s, N);
  l->ind++;
  lz_line(l, "%s[0] = (-inf)", bs);
  lz_line(l, "%s[0] = (-1)", bi);
  lz_line(l, "for %s in 0..%s {", r, N);
  l->ind++;
  const char *si[3] = {b, c, r};
  lz_line(l, "let %s: f32 = f32(%s)", v, lz_load(l, sc, si));
  lz_line(l,
          "let %s: bool = (%s < %s[0] || (%s == %s[0] && i64(%s) > %s[0])) && (%s[0] < 0 || %s > "
          "%s[0])",
          tk, v, ps, v, ps, r, pi, bi, v, bs);
  lz_line(l, "%s[0] = select(%s, i64(%s), %s[0])", bi, tk, r, bi);
  lz_line(l, "%s[0] = select(%s, %s, %s[0])", bs, tk, v, bs);
  lz_close(l);
  lz_line(l, "%s[0] = %s[0]", ps, bs);
  lz_line(l, "%s[0] = %s[0]", pi, bi);
  lz_line(l, "if %s[0] >= 0 && %s[0] < %s%s {", bi, ncl, mo,
          has_st ? lz_str(l, " && %s[0] > %s", bs, st) : "");
  l->ind++;
  lz_line(l, "%s[0] = 1", keep);
  lz_line(l, "for %s in 0..%s {", j, N);
  l->ind++;
  lz_line(l, "if i64(%s) < %s[0] {", j, ncl);
  l->ind++;
  lz_line(l, "let %s: i64 = %s[%s[0] - %s[0] + i64(%s), 2]", q, y->name, cnt, ncl, j);
  const char *A[4], *E[4];
  nms_box(l, bx, b, lz_str(l, "%s[0]", bi), center, A);
  nms_box(l, bx, b, q, center, E);
  const char *iw = lz_fresh(l, "iw"), *ih = lz_fresh(l, "ih"), *it = lz_fresh(l, "it");
  const char *aa = lz_fresh(l, "aa"), *ae = lz_fresh(l, "ae"), *un = lz_fresh(l, "un");
  lz_line(l, "let %s: f32 = min(%s, %s) - max(%s, %s)", iw, A[1], E[1], A[0], E[0]);
  lz_line(l, "let %s: f32 = min(%s, %s) - max(%s, %s)", ih, A[3], E[3], A[2], E[2]);
  lz_line(l, "let %s: f32 = %s * %s", it, iw, ih);
  lz_line(l, "let %s: f32 = (%s - %s) * (%s - %s)", aa, A[1], A[0], A[3], A[2]);
  lz_line(l, "let %s: f32 = (%s - %s) * (%s - %s)", ae, E[1], E[0], E[3], E[2]);
  lz_line(l, "let %s: f32 = %s + %s - %s", un, aa, ae, it);
  lz_line(l,
          "let %s: bool = %s > 0.0 && %s > 0.0 && %s > 0.0 && %s > 0.0 && %s > 0.0 && %s > 0.0 "
          "&& %s / %s > %s",
          sup, iw, ih, it, aa, ae, un, it, un, th);
  lz_line(l, "%s[0] = select(%s, 0, %s[0])", keep, sup, keep);
  lz_close(l);
  lz_close(l);
  lz_line(l, "if %s[0] == 1 {", keep);
  l->ind++;
  lz_line(l, "%s[%s[0], 0] = i64(%s)", y->name, cnt, b);
  lz_line(l, "%s[%s[0], 1] = i64(%s)", y->name, cnt, c);
  lz_line(l, "%s[%s[0], 2] = %s[0]", y->name, cnt, bi);
  lz_line(l, "%s[0] = %s[0] + 1", cnt, cnt);
  lz_line(l, "%s[0] = %s[0] + 1", ncl, ncl);
  for (int k = 0; k < 5; k++) lz_close(l); /* if keep, if picked, s, c, b */
  lz_line(l, "%s[0] = %s[0]", yc->name, cnt);
  lz_close(l);
}

/* ---- tfidf ---- */

/* The n-grams of tfidf's pool: gram g (in pool order) has length len[g] and starts at pool
 * element at[g]; counts[i] is where the grams of length i + 1 start. Returns the number of
 * grams, or -1 (reported through err) when the attributes do not describe a pool. */
typedef struct tf_grams {
  const int64_t *pool, *index;
  int npool, nindex;
  int64_t min_gram, max_gram, max_skip, size;
} tf_grams;

static bool tf_read(const rx_node *call, tf_grams *t, const char **why) {
  const rx_attr *p = ops_call_attr(call, "pool"), *c = ops_call_attr(call, "counts"),
                *x = ops_call_attr(call, "indexes");
  memset(t, 0, sizeof *t);
  if (!p || !c || !x || p->kind != RX_ATTR_INTS || c->kind != RX_ATTR_INTS ||
      x->kind != RX_ATTR_INTS) {
    *why = "expects the pool, counts and indexes attributes";
    return false;
  }
  t->pool = p->ints;
  t->npool = p->n;
  t->index = x->ints;
  t->nindex = x->n;
  t->min_gram = ops_int_attr(call, "min_gram", 1);
  t->max_gram = ops_int_attr(call, "max_gram", 1);
  t->max_skip = ops_int_attr(call, "max_skip", 0);
  if (t->min_gram < 1 || t->max_gram < t->min_gram || t->max_skip < 0) {
    *why = "needs 1 <= min_gram <= max_gram and max_skip >= 0";
    return false;
  }
  int ng = 0;
  for (int i = 0; i < c->n; i++) {
    int64_t start = c->ints[i], end = i + 1 < c->n ? c->ints[i + 1] : p->n;
    if (start < 0 || end < start || end > p->n) {
      *why = "counts must be ascending starts within the pool";
      return false;
    }
    ng += (int)((end - start) / (i + 1));
  }
  if (ng > x->n) {
    *why = "indexes must give an output index for every n-gram of the pool";
    return false;
  }
  t->size = 0;
  for (int g = 0; g < x->n; g++) {
    if (x->ints[g] < 0) {
      *why = "indexes must not be negative";
      return false;
    }
    if (x->ints[g] + 1 > t->size) t->size = x->ints[g] + 1;
  }
  return true;
}

/* x (integers) [L] or [B, L] gives the f32 counts [O] or [B, O] of the pool's n-grams, O the
 * largest of indexes plus one. */
const rx_sinfo *ops_deduce_tfidf(rx_deduce_ctx *dc, const rx_node *call) {
  const rx_sinfo *x = ops_tensor_arg(dc, call, 0, "x");
  if (!x) return NULL;
  tf_grams t;
  const char *why;
  if (!tf_read(call, &t, &why)) {
    ops_deduce_error(dc, "tfidf %s", why);
    return NULL;
  }
  if (x->dtype != RX_DTYPE_UNKNOWN && !ir_dtype_is_int(x->dtype)) {
    ops_deduce_error(dc, "tfidf expects an integer tensor, got %s", ops_str(dc, x));
    return NULL;
  }
  if (x->ndim < 0 || !x->shape) return ops_tensor(dc, RX_DTYPE_F32, x->ndim, NULL);
  if (x->ndim != 1 && x->ndim != 2) {
    ops_deduce_error(dc, "tfidf expects x [L] or [B, L], got %s", ops_str(dc, x));
    return NULL;
  }
  const rx_expr **d = ops_dims(dc, x->ndim);
  d[0] = x->shape[0];
  d[x->ndim - 1] = sym_expr_const(ops_ctx(dc), t.size);
  return ops_tensor(dc, RX_DTYPE_F32, x->ndim, d);
}

/* The count of gram g (length n, pool elements from `at`) in the row of x: per skip distance
 * (one for unigrams, 1..max_skip + 1 for longer grams, as ONNX's reference counts them) and
 * start i, a match of its n elements i, i + d, ... within the row. */
static void tf_gram(lz_ctx *l, const lz_opnd *x, const tf_grams *t, const char *row,
                    const char *cnt, int n, int at) {
  const char *s = lz_loopvar(l, "s"), *i = lz_loopvar(l, "i");
  const char *L = lz_ex(l, x->shape[x->ndim - 1]);
  lz_line(l, "for %s in 0..%lld {", s, n == 1 ? 1LL : (long long)t->max_skip + 1);
  l->ind++;
  lz_line(l, "for %s in 0..%s {", i, L);
  l->ind++;
  lz_line(l, "if %s + %d * (%s + 1) < %s {", i, n - 1, s, L);
  l->ind++;
  rx_strbuf cond = {0};
  for (int k = 0; k < n; k++) {
    const char *idx[2] = {row, lz_str(l, "%s + %d * (%s + 1)", i, k, s)};
    if (x->ndim == 1) idx[0] = idx[1];
    base_strbuf_printf(&cond, "%si64(%s) == %s", k ? " && " : "", lz_load(l, x, idx),
                       lz_str(l, "(%lld)", (long long)t->pool[at + k]));
  }
  char *h = base_strbuf_take(&cond);
  lz_line(l, "if %s {", h);
  free(h);
  l->ind++;
  lz_line(l, "%s[0] = %s[0] + 1.0", cnt, cnt);
  for (int k = 0; k < 4; k++) lz_close(l); /* if match, if in row, i, s */
}

/* tfidf: one thread per output point (row, o), which counts each pool gram whose output index
 * is o (the grams unrolled in the program, so a pool of P elements is O(P) statements). */
void lz_gen_tfidf(lz_ctx *l) {
  const lz_opnd *x = lz_arg(l, 0), *y = &l->outs[0];
  tf_grams t;
  const char *why;
  if (!tf_read(l->call, &t, &why)) {
    lz_fail(l, "%s", why);
    return;
  }
  const rx_attr *c = ops_call_attr(l->call, "counts");
  const char *row = x->ndim == 2 ? lz_loopvar(l, "b") : NULL, *o = lz_loopvar(l, "o");
  if (row) {
    lz_line(l, "for %s in 0..%s {", row, lz_ex(l, x->shape[0]));
    l->ind++;
  }
  lz_line(l, "for %s in 0..%lld {", o, (long long)t.size);
  l->ind++;
  const char *cnt = lz_fresh(l, "cnt");
  lz_line(l, "alloc %s: f32[1] local", cnt);
  lz_line(l, "%s[0] = 0.0", cnt);
  int g = 0;
  for (int lv = 0; lv < c->n; lv++) {
    int n = lv + 1;
    int64_t start = c->ints[lv], end = lv + 1 < c->n ? c->ints[lv + 1] : t.npool;
    for (int64_t at = start; at + n <= end; at += n, g++) {
      if (n < t.min_gram || n > t.max_gram) continue;
      lz_line(l, "if %s == %lld {", o, (long long)t.index[g]);
      l->ind++;
      tf_gram(l, x, &t, row, cnt, n, (int)at);
      lz_close(l);
    }
  }
  const char *yi[2] = {row, o};
  if (!row) yi[0] = o;
  lz_line(l, "%s = %s[0]", lz_load(l, y, yi), cnt);
  lz_close(l);
  if (row) lz_close(l);
}

/* ---- dft ---- */

/* x [..., N, ..., c] (float; c 1: real, 2: real and imaginary parts) and its signal axis give
 * [..., K, ..., 2]: K the length L (attribute length=[L], default N), or L / 2 + 1 onesided. */
const rx_sinfo *ops_deduce_dft(rx_deduce_ctx *dc, const rx_node *call) {
  const rx_sinfo *x = ops_tensor_arg(dc, call, 0, "x");
  if (!x || !ops_need_float(dc, x, "dft")) return NULL;
  const rx_attr *la = ops_call_attr(call, "length");
  if (la && (la->kind != RX_ATTR_EXPRS || la->n != 1)) {
    ops_deduce_error(dc, "dft expects length=[L], one symbolic value");
    return NULL;
  }
  if (x->ndim < 0 || !x->shape) return ops_tensor(dc, x->dtype, x->ndim, NULL);
  rx_expr_ctx *cx = ops_ctx(dc);
  const rx_expr *c = x->ndim >= 2 ? x->shape[x->ndim - 1] : NULL;
  if (!c || c->kind != RX_EXPR_CONST || (c->value != 1 && c->value != 2)) {
    ops_deduce_error(dc, "dft expects x [..., N, ..., c] with a last dim c of 1 or 2, got %s",
                     ops_str(dc, x));
    return NULL;
  }
  int axis;
  if (!ops_norm_axis(dc, ops_int_attr(call, "axis", 1), x->ndim, &axis)) return NULL;
  if (axis == x->ndim - 1) {
    ops_deduce_error(dc, "dft: the signal axis cannot be the last (real, imaginary) dim");
    return NULL;
  }
  const rx_expr *L = la ? la->exprs[0] : x->shape[axis];
  if (ops_prove(dc, sym_expr_cmp(cx, RX_EXPR_LT, L, sym_expr_const(cx, 1))) == RX_TRUE) {
    ops_deduce_error(dc, "dft: the length %s is not positive", ops_expr_str(dc, L));
    return NULL;
  }
  bool one = ops_int_attr(call, "onesided", 0) != 0;
  const rx_expr **d = ops_dims(dc, x->ndim);
  for (int k = 0; k < x->ndim; k++) d[k] = x->shape[k];
  d[axis] = one ? ops_simplify(dc, sym_expr_add(cx, sym_expr_floordiv(cx, L, sym_expr_const(cx, 2)),
                                                sym_expr_const(cx, 1)))
                : ops_simplify(dc, L);
  d[x->ndim - 1] = sym_expr_const(cx, 2);
  return ops_tensor(dc, x->dtype, x->ndim, d);
}

/* The twiddle e^(-2 pi i m / L) of m = k n mod L as `let`s cw (cos) and sw (sin) of dtype mt:
 * the angle's quadrant qd = 4 m // L picks the sign and the function of the remainder angle
 * (pi / 2) (4 m - qd L) / L in [0, pi / 2), so that multiples of a quarter turn are exact. */
static void dft_twiddle(lz_ctx *l, const char *k, const char *n, const char *L, const char *mt,
                        const char *cw, const char *sw) {
  const char *m = lz_fresh(l, "m"), *qd = lz_fresh(l, "qd"), *a = lz_fresh(l, "ang");
  const char *ca = lz_fresh(l, "ca"), *sa = lz_fresh(l, "sa");
  lz_line(l, "let %s: i64 = 4 * (i64(%s) * i64(%s) %% %s)", m, k, n, L);
  lz_line(l, "let %s: i64 = %s // %s", qd, m, L);
  lz_line(l, "let %s: %s = %s(%s - %s * %s) * (1.5707963267948966 / %s(%s))", a, mt, mt, m, qd, L,
          mt, L);
  lz_line(l, "let %s: %s = cos(%s)", ca, mt, a);
  lz_line(l, "let %s: %s = sin(%s)", sa, mt, a);
  lz_line(
      l,
      "let %s: %s = select(%s == 0, %s, select(%s == 1, 0.0 - %s, select(%s == 2, 0.0 - %s, %s)))",
      cw, mt, qd, ca, qd, sa, qd, ca, sa);
  lz_line(
      l,
      "let %s: %s = select(%s == 0, %s, select(%s == 1, %s, select(%s == 2, 0.0 - %s, 0.0 - %s)))",
      sw, mt, qd, sa, qd, ca, qd, sa, ca);
}

/* dft: one thread per output point but the last dim, which sums the L-periodic twiddles times
 * the first min(N, L) samples (the rest are zeros; a loop to min(N, L), as a guard `i64(n) < L`
 * with a constant L ran as always false on lavapipe) into a real and an imaginary accumulator;
 * inverse turns the twiddles the other way and divides by L. O(N) per point. */
void lz_gen_dft(lz_ctx *l) {
  const lz_opnd *x = lz_arg(l, 0), *y = &l->outs[0];
  int r = x->ndim, axis = (int)ops_int_attr(l->call, "axis", 1);
  if (axis < 0) axis += r;
  bool inv = ops_int_attr(l->call, "inverse", 0) != 0;
  bool cplx = rx_expr_is_const(x->shape[r - 1], 2);
  const rx_attr *la = ops_call_attr(l->call, "length");
  const char *L = lz_ex(l, la ? la->exprs[0] : x->shape[axis]);
  rx_dtype mt = x->dtype == RX_DTYPE_F64 ? RX_DTYPE_F64 : RX_DTYPE_F32;
  const char *mn = ir_dtype_name(mt);
  const char *ov[LZ_MAXR], *xi[LZ_MAXR];
  for (int d = 0; d < r - 1; d++) {
    ov[d] = lz_loopvar(l, lz_str(l, "i%d", d));
    lz_line(l, "for %s in 0..%s {", ov[d], lz_ex(l, y->shape[d]));
    l->ind++;
  }
  const char *n = lz_loopvar(l, "n"), *re = lz_fresh(l, "re"), *im = lz_fresh(l, "im");
  const char *cw = lz_fresh(l, "cw"), *sw = lz_fresh(l, "sw"), *xr = lz_fresh(l, "xr"),
             *xm = lz_fresh(l, "xm");
  lz_line(l, "alloc %s: %s[1] local", re, mn);
  lz_line(l, "alloc %s: %s[1] local", im, mn);
  lz_line(l, "%s[0] = 0.0", re);
  lz_line(l, "%s[0] = 0.0", im);
  const rx_expr *Le = la ? la->exprs[0] : x->shape[axis];
  lz_line(l, "for %s in 0..%s {", n, lz_ex(l, sym_expr_min(l->cx, x->shape[axis], Le)));
  l->ind++;
  dft_twiddle(l, ov[axis], n, L, mn, cw, sw);
  memcpy(xi, ov, sizeof xi);
  xi[axis] = n;
  xi[r - 1] = "0";
  lz_line(l, "let %s: %s = %s(%s)", xr, mn, mn, lz_load(l, x, xi));
  xi[r - 1] = "1";
  lz_line(l, "let %s: %s = %s", xm, mn, cplx ? lz_str(l, "%s(%s)", mn, lz_load(l, x, xi)) : "0.0");
  const char *sg = inv ? "-" : "+", *sg2 = inv ? "+" : "-";
  lz_line(l, "%s[0] = %s[0] + (%s * %s %s %s * %s)", re, re, xr, cw, sg, xm, sw);
  lz_line(l, "%s[0] = %s[0] + (%s * %s %s %s * %s)", im, im, xm, cw, sg2, xr, sw);
  lz_close(l);
  const char *sc = inv ? lz_str(l, " / %s(%s)", mn, L) : "";
  const char *yn = ir_dtype_name(y->dtype);
  memcpy(xi, ov, sizeof xi);
  xi[r - 1] = "0";
  lz_line(l, "%s = %s(%s[0]%s)", lz_load(l, y, xi), yn, re, sc);
  xi[r - 1] = "1";
  lz_line(l, "%s = %s(%s[0]%s)", lz_load(l, y, xi), yn, im, sc);
  for (int d = 0; d < r - 1; d++) lz_close(l);
}

/* ---- roi_align ---- */

/* x [N, C, H, W] (float), rois [R, 4] (x's dtype) and batch indices [R] (integer) give
 * [R, C, output_height, output_width] in x's dtype. */
const rx_sinfo *ops_deduce_roi_align(rx_deduce_ctx *dc, const rx_node *call) {
  const rx_sinfo *x = ops_tensor_arg(dc, call, 0, "x");
  const rx_sinfo *ro = x ? ops_tensor_arg(dc, call, 1, "rois") : NULL;
  const rx_sinfo *bi = ro ? ops_tensor_arg(dc, call, 2, "batch_indices") : NULL;
  if (!bi || !ops_need_float(dc, x, "roi_align") || !ops_need_float(dc, ro, "roi_align"))
    return NULL;
  int64_t oh = ops_int_attr(call, "output_height", 1), ow = ops_int_attr(call, "output_width", 1);
  if (oh < 1 || ow < 1) {
    ops_deduce_error(dc, "roi_align: output_height and output_width must be positive");
    return NULL;
  }
  if (bi->dtype != RX_DTYPE_UNKNOWN && !ir_dtype_is_int(bi->dtype)) {
    ops_deduce_error(dc, "roi_align: batch_indices must be integers, got %s", ops_str(dc, bi));
    return NULL;
  }
  if (x->ndim < 0 || !x->shape || ro->ndim < 0 || !ro->shape)
    return ops_tensor(dc, x->dtype, 4, NULL);
  rx_expr_ctx *cx = ops_ctx(dc);
  if (x->ndim != 4 || ro->ndim != 2 ||
      ops_dim_eq(dc, ro->shape[1], sym_expr_const(cx, 4)) == RX_FALSE ||
      (bi->ndim >= 0 && bi->shape &&
       (bi->ndim != 1 || ops_dim_eq(dc, bi->shape[0], ro->shape[0]) == RX_FALSE))) {
    ops_deduce_error(dc,
                     "roi_align expects x [N, C, H, W], rois [R, 4] and batch_indices [R], got "
                     "%s, %s and %s",
                     ops_str(dc, x), ops_str(dc, ro), ops_str(dc, bi));
    return NULL;
  }
  const rx_expr **d = ops_dims(dc, 4);
  d[0] = ro->shape[0];
  d[1] = x->shape[1];
  d[2] = sym_expr_const(cx, oh);
  d[3] = sym_expr_const(cx, ow);
  return ops_tensor(dc, x->dtype, 4, d);
}

/* The value of one sampling point (yy, xx) of the bin, as ONNX's reference: zero outside
 * [-1, H] x [-1, W], else the bilinear interpolation at the point clamped to the image (avg),
 * or the largest of its four weighted corners (max), as the f32 `let` named v. */
static void roi_sample(lz_ctx *l, const lz_opnd *x, const char *b, const char *c, const char *yy,
                       const char *xx, bool mx, const char *v) {
  const char *H = lz_ex(l, x->shape[2]), *W = lz_ex(l, x->shape[3]);
  const char *pt[2] = {yy, xx}, *dim[2] = {H, W}, *lo[2], *hi[2], *fr[2];
  for (int k = 0; k < 2; k++) {
    const char *p0 = lz_fresh(l, "p"), *l0 = lz_fresh(l, "l"), *top = lz_fresh(l, "top");
    lo[k] = lz_fresh(l, "lo");
    hi[k] = lz_fresh(l, "hi");
    fr[k] = lz_fresh(l, "fr");
    lz_line(l, "let %s: f32 = max(%s, 0.0)", p0, pt[k]);
    lz_line(l, "let %s: i64 = i64(%s)", l0, p0);
    lz_line(l, "let %s: bool = %s >= %s - 1", top, l0, dim[k]);
    lz_line(l, "let %s: i64 = select(%s, %s - 1, %s)", lo[k], top, dim[k], l0);
    lz_line(l, "let %s: i64 = select(%s, %s - 1, %s + 1)", hi[k], top, dim[k], l0);
    lz_line(l, "let %s: f32 = select(%s, 0.0, %s - f32(%s))", fr[k], top, p0, l0);
  }
  const char *w[4], *cv[4];
  for (int k = 0; k < 4; k++) {
    const char *yi = k < 2 ? lo[0] : hi[0], *xi = k % 2 ? hi[1] : lo[1];
    const char *idx[4] = {b, c, yi, xi};
    w[k] = lz_str(l, "(%s%s) * (%s%s)", k < 2 ? "1.0 - " : "", fr[0], k % 2 ? "" : "1.0 - ", fr[1]);
    cv[k] = lz_fresh(l, "cv");
    lz_line(l, "let %s: f32 = %s * f32(%s)", cv[k], w[k], lz_load(l, x, idx));
  }
  const char *val = mx ? lz_str(l, "max(max(%s, %s), max(%s, %s))", cv[0], cv[1], cv[2], cv[3])
                       : lz_str(l, "%s + %s + %s + %s", cv[0], cv[1], cv[2], cv[3]);
  lz_line(l,
          "let %s: f32 = select(%s < (-1.0) || %s > f32(%s) || %s < (-1.0) || %s > f32(%s), "
          "0.0, %s)",
          v, yy, yy, H, xx, xx, W, val);
}

/* roi_align: one thread per output point (r, c, ph, pw) over the bin's gh x gw sampling points
 * (sampling_ratio, or ceil of the bin's size when it is 0: the loops then run to H + 1 and
 * W + 1 with a guard, so a bin of more points than that is cut short), averaged or maxed. */
void lz_gen_roi_align(lz_ctx *l) {
  const lz_opnd *x = lz_arg(l, 0), *ro = lz_arg(l, 1), *bx = lz_arg(l, 2), *y = &l->outs[0];
  const rx_attr *ma = ops_call_attr(l->call, "mode");
  bool mx = ma && ma->kind == RX_ATTR_STR && !strcmp(ma->s, "max");
  bool half = ops_int_attr(l->call, "half_pixel", 1) != 0;
  int64_t sr = ops_int_attr(l->call, "sampling_ratio", 0);
  const rx_attr *sa = ops_call_attr(l->call, "spatial_scale");
  double scale = sa && sa->kind == RX_ATTR_FLOAT ? sa->f : 1.0;
  const char *ov[4];
  const char *base[4] = {"r", "c", "ph", "pw"};
  for (int d = 0; d < 4; d++) {
    ov[d] = lz_loopvar(l, base[d]);
    lz_line(l, "for %s in 0..%s {", ov[d], lz_ex(l, y->shape[d]));
    l->ind++;
  }
  const char *b = lz_fresh(l, "bi"), *st[4], *rh = lz_fresh(l, "rh"), *rw = lz_fresh(l, "rw");
  const char *gh = lz_fresh(l, "gh"), *gw = lz_fresh(l, "gw"), *acc = lz_fresh(l, "acc");
  const char *idx0[1] = {ov[0]};
  lz_line(l, "let %s: i64 = i64(%s)", b, lz_load(l, bx, idx0));
  for (int k = 0; k < 4; k++) {
    const char *idx[2] = {ov[0], lz_str(l, "%d", k)};
    st[k] = lz_fresh(l, k == 0 ? "x0" : k == 1 ? "y0" : k == 2 ? "x1" : "y1");
    lz_line(l, "let %s: f32 = f32(%s) * %s - %s", st[k], lz_load(l, ro, idx), lz_flit(l, scale),
            half ? "0.5" : "0.0");
  }
  lz_line(l, "let %s: f32 = %s(%s - %s%s)", rh, half ? "" : "max", st[3], st[1],
          half ? "" : ", 1.0");
  lz_line(l, "let %s: f32 = %s(%s - %s%s)", rw, half ? "" : "max", st[2], st[0],
          half ? "" : ", 1.0");
  const int64_t OH = y->shape[2]->value, OW = y->shape[3]->value;
  if (sr > 0) {
    lz_line(l, "let %s: i64 = %lld", gh, (long long)sr);
    lz_line(l, "let %s: i64 = %lld", gw, (long long)sr);
  } else {
    lz_line(l, "let %s: i64 = i64(ceil(%s / %lld.0))", gh, rh, (long long)OH);
    lz_line(l, "let %s: i64 = i64(ceil(%s / %lld.0))", gw, rw, (long long)OW);
  }
  lz_line(l, "alloc %s: f32[1] local", acc);
  lz_line(l, "%s[0] = %s", acc, mx ? "(-inf)" : "0.0");
  const char *iy = lz_loopvar(l, "iy"), *ix = lz_loopvar(l, "ix");
  const rx_expr *one = sym_expr_const(l->cx, 1);
  lz_line(l, "for %s in 0..%s {", iy,
          sr > 0 ? lz_str(l, "%lld", (long long)sr)
                 : lz_ex(l, sym_expr_add(l->cx, x->shape[2], one)));
  l->ind++;
  lz_line(l, "for %s in 0..%s {", ix,
          sr > 0 ? lz_str(l, "%lld", (long long)sr)
                 : lz_ex(l, sym_expr_add(l->cx, x->shape[3], one)));
  l->ind++;
  if (sr <= 0) {
    lz_line(l, "if i64(%s) < %s && i64(%s) < %s {", iy, gh, ix, gw);
    l->ind++;
  }
  const char *yy = lz_fresh(l, "yy"), *xx = lz_fresh(l, "xx"), *v = lz_fresh(l, "v");
  lz_line(l,
          "let %s: f32 = %s + f32(%s) * (%s / %lld.0) + (f32(%s) + 0.5) * (%s / %lld.0) / f32(%s)",
          yy, st[1], ov[2], rh, (long long)OH, iy, rh, (long long)OH, gh);
  lz_line(l,
          "let %s: f32 = %s + f32(%s) * (%s / %lld.0) + (f32(%s) + 0.5) * (%s / %lld.0) / f32(%s)",
          xx, st[0], ov[3], rw, (long long)OW, ix, rw, (long long)OW, gw);
  roi_sample(l, x, b, ov[1], yy, xx, mx, v);
  if (mx)
    lz_line(l, "%s[0] = max(%s[0], %s)", acc, acc, v);
  else
    lz_line(l, "%s[0] = %s[0] + %s", acc, acc, v);
  for (int k = sr > 0 ? 2 : 3; k > 0; k--) lz_close(l);
  const char *res =
      mx ? lz_str(l, "%s[0]", acc) : lz_str(l, "%s[0] / f32(max(%s * %s, 1))", acc, gh, gw);
  lz_line(l, "%s = %s(%s)", lz_load(l, y, ov), ir_dtype_name(y->dtype), res);
  for (int d = 0; d < 4; d++) lz_close(l);
}
