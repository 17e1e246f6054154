/* ops/grid_sample.c: grid_sample, its shape deduction and its tensor program.
 *
 * grid_sample(x [N, C, H, W], grid [N, Ho, Wo, 2], mode=, padding_mode=, align_corners=) reads
 * x at the points grid holds ((x, y) in [-1, 1], the corners' centers with align_corners, else
 * the corners' edges): nearest (the coordinate rounded half to even), bilinear (2 x 2 taps) or
 * bicubic (4 x 4 taps, Keys' a = -0.75); a point outside is clamped to the border or reflected
 * at the border (0.5 pixel beyond it unless align_corners), and a tap outside reads 0 (zeros),
 * the nearest edge (border) or its reflection. The ONNX reference (GridSample, opset 16) step by
 * step: one output point per loop iteration, every value a `let`, math in f32 (f64 for f64). */
#include "deduce.h"
#include "legalize_int.h"

#include <string.h>

static const char *const gs_modes[] = {"bilinear", "nearest", "bicubic"};
static const char *const gs_pads[] = {"zeros", "border", "reflection"};

/* Index of attribute name's string in names (dflt when absent), or -1. */
static int gs_choice(const rx_node *call, const char *name, const char *const *names, int n) {
  const rx_attr *a = ops_call_attr(call, name);
  if (!a || !a->s) return 0;
  for (int i = 0; i < n; i++)
    if (!strcmp(a->s, names[i])) return i;
  return -1;
}

const rx_sinfo *ops_deduce_grid_sample(rx_deduce_ctx *dc, const rx_node *call) {
  const rx_sinfo *x = ops_tensor_arg(dc, call, 0, "x");
  const rx_sinfo *g = x ? ops_tensor_arg(dc, call, 1, "grid") : NULL;
  if (!g) return NULL;
  if (gs_choice(call, "mode", gs_modes, 3) < 0 || gs_choice(call, "padding_mode", gs_pads, 3) < 0) {
    ops_deduce_error(dc, "grid_sample: mode must be bilinear, nearest or bicubic and padding_mode "
                         "zeros, border or reflection");
    return NULL;
  }
  if (!ops_need_float(dc, x, "x") || !ops_need_float(dc, g, "grid")) return NULL;
  if ((x->ndim >= 0 && x->ndim != 4) || (g->ndim >= 0 && g->ndim != 4)) {
    ops_deduce_error(dc,
                     "grid_sample expects x [N, C, H, W] and grid [N, Ho, Wo, 2], got %s and %s",
                     ops_str(dc, x), ops_str(dc, g));
    return NULL;
  }
  if (!x->shape || !g->shape) return ops_tensor(dc, x->dtype, 4, NULL);
  if (ops_dim_eq(dc, g->shape[3], sym_expr_const(ops_ctx(dc), 2)) == RX_FALSE ||
      ops_dim_eq(dc, g->shape[0], x->shape[0]) == RX_FALSE) {
    ops_deduce_error(dc, "grid_sample expects grid [N, Ho, Wo, 2] with x's N, got %s and %s",
                     ops_str(dc, x), ops_str(dc, g));
    return NULL;
  }
  const rx_expr **d = ops_dims(dc, 4);
  d[0] = x->shape[0];
  d[1] = x->shape[1];
  d[2] = g->shape[1];
  d[3] = g->shape[2];
  return ops_tensor(dc, x->dtype, 4, d);
}

typedef struct gs {
  lz_ctx *l;
  const char *t;       /* the math dtype's name */
  const char *n, *c;   /* loop variables of N and C */
  const char *size[2]; /* H, W as text */
  const char *last[2]; /* H - 1, W - 1 as text */
  const char *bmin[2], *bmax[2];
  int pad;
  lz_opnd *x;
} gs;

/* A fresh `let` of dtype dt holding text; its name. */
static const char *let(gs *g, const char *base, const char *dt, const char *text) {
  const char *v = lz_fresh(g->l, base);
  lz_line(g->l, "let %s: %s = %s", v, dt, text);
  return v;
}

/* v reflected at bmin and bmax until inside (the reference's _gs_reflect) */
static const char *reflect(gs *g, int k, const char *v) {
  lz_ctx *l = g->l;
  const char *lo = g->bmin[k], *hi = g->bmax[k], *t = g->t;
  const char *d =
      let(g, "d", t, lz_str(l, "select(%s < %s, %s - %s, %s - %s)", v, lo, lo, v, v, hi));
  const char *q = let(g, "q", t, lz_str(l, "floor(%s / (%s - %s))", d, hi, lo));
  const char *r = let(g, "r", t, lz_str(l, "%s - %s * (%s - %s)", d, q, hi, lo));
  const char *ev = let(g, "even", "bool", lz_str(l, "%s - 2.0 * floor(%s * 0.5) == 0.0", q, q));
  return let(g, "f", t,
             lz_str(l,
                    "select(%s < %s, select(%s, %s + %s, %s - %s), select(%s > %s, select(%s, %s - "
                    "%s, %s + %s), %s))",
                    v, lo, ev, lo, r, hi, r, v, hi, ev, hi, r, lo, r, v));
}

/* The index of tap i (an i64 text) along dim k, inside [0, size): clamped (zeros: the load is
 * masked by gs_inside; border), or reflected at the borders and truncated (reflection). */
static const char *tap_index(gs *g, int k, const char *i) {
  lz_ctx *l = g->l;
  const char *v = i;
  if (g->pad == 2) {
    const char *f = reflect(g, k, let(g, "fi", g->t, lz_str(l, "%s(%s)", g->t, i)));
    v = lz_str(l, "i64(floor(max(%s, 0.0)))", f);
  }
  return let(g, "ix", "i64", lz_str(l, "min(max(%s, 0), %s)", v, g->last[k]));
}

/* The value of x at taps iy, ix (i64 texts), in the math dtype. */
static const char *tap(gs *g, const char *iy, const char *ix) {
  lz_ctx *l = g->l;
  const char *idx[4] = {g->n, g->c, tap_index(g, 0, iy), tap_index(g, 1, ix)};
  const char *v = lz_up(l, g->x->dtype, lz_load(l, g->x, idx));
  if (g->pad == 0)
    v = lz_str(l, "select(%s >= 0 && %s < %s && %s >= 0 && %s < %s, %s, 0.0)", iy, iy, g->size[0],
               ix, ix, g->size[1], v);
  return let(g, "p", g->t, v);
}

/* Keys' cubic weights (a = -0.75) of the 4 taps at fraction s (texts) */
static void cubic_weights(gs *g, const char *s, const char **w) {
  lz_ctx *l = g->l;
  const char *x[4] = {lz_str(l, "(%s + 1.0)", s), s, lz_str(l, "(1.0 - %s)", s),
                      lz_str(l, "(2.0 - %s)", s)};
  for (int k = 0; k < 4; k++) {
    const char *f = k == 0 || k == 3 ? "((-0.75 * %1$s + 3.75) * %1$s - 6.0) * %1$s + 3.0"
                                     : "(1.25 * %1$s - 2.25) * %1$s * %1$s + 1.0";
    w[k] = let(g, "w", g->t, lz_str(l, f, x[k]));
  }
}

/* i + k as text */
static const char *offset(lz_ctx *l, const char *i, int k) {
  return k == 0 ? i : lz_str(l, k < 0 ? "%s - %d" : "%s + %d", i, k < 0 ? -k : k);
}

void lz_gen_grid_sample(lz_ctx *l) {
  lz_opnd *x = lz_arg(l, 0), *gr = lz_arg(l, 1), *y = &l->outs[0];
  if (x->scalar || gr->scalar || x->ndim != 4 || gr->ndim != 4) {
    lz_fail(l, "grid_sample expects x [N, C, H, W] and grid [N, Ho, Wo, 2]");
    return;
  }
  rx_dtype mt = x->dtype == RX_DTYPE_F64 ? RX_DTYPE_F64 : RX_DTYPE_F32;
  gs g = {.l = l,
          .t = ir_dtype_name(mt),
          .x = x,
          .pad = gs_choice(l->call, "padding_mode", gs_pads, 3)};
  int mode = gs_choice(l->call, "mode", gs_modes, 3);
  bool ac = ops_int_attr(l->call, "align_corners", 0) != 0;
  const char *iv[4];
  for (int d = 0; d < 4; d++) iv[d] = lz_loopvar(l, lz_str(l, "i%d", d));
  g.n = iv[0];
  g.c = iv[1];
  for (int d = 0; d < 4; d++) {
    lz_line(l, "for %s in 0..%s {", iv[d], lz_ex(l, y->shape[d]));
    l->ind++;
  }
  const char *u[2]; /* the point's y and x in pixels, padded */
  for (int k = 0; k < 2; k++) {
    g.size[k] = lz_ex(l, x->shape[2 + k]);
    g.last[k] = lz_ex(l, sym_expr_sub(l->cx, x->shape[2 + k], sym_expr_const(l->cx, 1)));
    const char *fs = lz_str(l, "%s(%s)", g.t, g.size[k]);
    g.bmin[k] = ac ? "0.0" : "(-0.5)";
    g.bmax[k] = let(&g, "hi", g.t, lz_str(l, ac ? "%s - 1.0" : "%s - 0.5", fs));
    const char *gi[4] = {iv[0], iv[2], iv[3], k == 0 ? "1" : "0"};
    const char *gv = let(&g, "g", g.t, lz_str(l, "%s(%s)", g.t, lz_load(l, gr, gi)));
    const char *v = let(&g, "u", g.t,
                        ac ? lz_str(l, "(%s + 1.0) * 0.5 * (%s - 1.0)", gv, fs)
                           : lz_str(l, "((%s + 1.0) * %s - 1.0) * 0.5", gv, fs));
    if (mode == 1) { /* round half to even (np.rint) */
      const char *f = let(&g, "fl", g.t, lz_str(l, "floor(%s)", v));
      v = let(&g, "rn", g.t,
              lz_str(l,
                     "select(%1$s - %2$s > 0.5 || (%1$s - %2$s == 0.5 && %2$s - 2.0 * floor(%2$s * "
                     "0.5) != 0.0), %2$s + 1.0, %2$s)",
                     v, f));
    }
    if (g.pad == 1)
      v = let(&g, "cl", g.t,
              lz_str(l, "select(%1$s < %2$s || %1$s > %3$s, min(max(%1$s, 0.0), %4$s - 1.0), %1$s)",
                     v, g.bmin[k], g.bmax[k], fs));
    else if (g.pad == 2)
      v = reflect(&g, k, v);
    u[k] = v;
  }
  const char *out;
  if (mode == 1) {
    out = tap(&g, lz_str(l, "i64(%s)", u[0]), lz_str(l, "i64(%s)", u[1]));
  } else {
    int nt = mode == 0 ? 2 : 4;
    const char *base[2], *w[2][4];
    for (int k = 0; k < 2; k++) {
      const char *f = let(&g, "b", g.t, lz_str(l, "floor(%s)", u[k]));
      base[k] = let(&g, "bi", "i64", lz_str(l, "i64(%s)", f));
      const char *s = let(&g, "s", g.t, lz_str(l, "%s - %s", u[k], f));
      if (mode == 0) {
        w[k][0] = lz_str(l, "(1.0 - %s)", s);
        w[k][1] = s;
      } else {
        cubic_weights(&g, s, w[k]);
      }
    }
    rx_strbuf sum = {0};
    int first = mode == 0 ? 0 : -1;
    for (int a = 0; a < nt; a++)
      for (int b = 0; b < nt; b++) {
        const char *p = tap(&g, offset(l, base[0], a + first), offset(l, base[1], b + first));
        base_strbuf_printf(&sum, "%s%s * %s * %s", a || b ? " + " : "", w[0][a], w[1][b], p);
      }
    out = lz_str(l, "%s", sum.data);
    base_strbuf_free(&sum);
  }
  lz_line(l, "%s = %s", lz_load(l, y, iv),
          x->dtype == mt ? out : lz_str(l, "%s(%s)", ir_dtype_name(x->dtype), out));
  for (int d = 0; d < 4; d++) lz_close(l);
}
