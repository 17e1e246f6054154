/* Neural-network ops: gelu (erf and tanh forms), clip, rope (rotary position embedding),
 * attention (scaled dot-product), conv2d, max_pool2d / avg_pool2d, batch_norm (inference).
 * Conventions are documented in docs/ops.md; the window arithmetic shared with legalization is
 * ops_nn_window (ops/legalize.h). After the deduction, the legalization of rope, the pools,
 * batch_norm and conv2d's direct form (its matrix-unit forms: ops/conv.c). */
#include "deduce.h"
#include "legalize_int.h"

#include "../shapes/expr_build.h"

#include <string.h>

static bool has_shape(const rx_sinfo *t) { return t->ndim >= 0 && t->shape; }

/* Requires a == b (provably); reports "OP: what: a vs b" otherwise. */
static bool need_eq(rx_deduce_ctx *dc, const rx_expr *a, const rx_expr *b, const char *what) {
  rx_tribool eq = ops_dim_eq(dc, a, b);
  if (eq == RX_TRUE) return true;
  ops_deduce_error(dc, "%s: %s %s %s%s", what, ops_expr_str(dc, a),
                   eq == RX_FALSE ? "differs from" : "could not be proven equal to",
                   ops_expr_str(dc, b), eq == RX_FALSE ? "" : "; use match_cast");
  return false;
}

static bool same_dtype(rx_deduce_ctx *dc, const rx_node *call, const rx_sinfo *x, const rx_sinfo *w,
                       const char *what) {
  if (x->dtype == RX_DTYPE_UNKNOWN || w->dtype == RX_DTYPE_UNKNOWN || x->dtype == w->dtype)
    return true;
  ops_deduce_error(dc, "%s expects %s of the dtype of %s, got %s", call->op->name, what,
                   ops_str(dc, x), ops_str(dc, w));
  return false;
}

/* ---- gelu, clip ---- */

const rx_sinfo *ops_deduce_gelu(rx_deduce_ctx *dc, const rx_node *call) {
  const rx_attr *a = ops_call_attr(call, "approximate");
  if (a && (a->kind != RX_ATTR_STR || !a->s ||
            (strcmp(a->s, "none") != 0 && strcmp(a->s, "tanh") != 0))) {
    ops_deduce_error(dc, "gelu expects approximate=\"none\" or approximate=\"tanh\"");
    return NULL;
  }
  return ops_deduce_unary_float(dc, call);
}

const rx_sinfo *ops_deduce_clip(rx_deduce_ctx *dc, const rx_node *call) {
  const rx_attr *lo = ops_call_attr(call, "min"), *hi = ops_call_attr(call, "max");
  if (!lo || !hi) {
    ops_deduce_error(dc, "clip expects min=<number> and max=<number>");
    return NULL;
  }
  if (!(lo->f <= hi->f)) {
    ops_deduce_error(dc, "clip expects min <= max, got min=%g max=%g", lo->f, hi->f);
    return NULL;
  }
  return ops_deduce_unary(dc, call);
}

/* ---- rope ---- */

const rx_sinfo *ops_deduce_rope(rx_deduce_ctx *dc, const rx_node *call) {
  const rx_sinfo *x = ops_tensor_arg(dc, call, 0, "x");
  const rx_sinfo *c = x ? ops_tensor_arg(dc, call, 1, "cos") : NULL;
  const rx_sinfo *s = c ? ops_tensor_arg(dc, call, 2, "sin") : NULL;
  if (!s || !ops_need_float(dc, x, "rope")) return NULL;
  if (!same_dtype(dc, call, x, c, "cos") || !same_dtype(dc, call, x, s, "sin")) return NULL;
  if (x->ndim >= 0 && x->ndim < 3) {
    ops_deduce_error(dc, "rope expects x of rank >= 3 ([..., s, h, d]), got %s", ops_str(dc, x));
    return NULL;
  }
  for (int k = 0; k < 2; k++) {
    const rx_sinfo *t = k ? s : c;
    if (t->ndim >= 0 && t->ndim != 2) {
      ops_deduce_error(dc, "rope expects %s of rank 2 ([s, d]), got %s", k ? "sin" : "cos",
                       ops_str(dc, t));
      return NULL;
    }
  }
  if (!has_shape(x)) return ops_tensor(dc, x->dtype, x->ndim, NULL);
  const rx_expr *sd = x->shape[x->ndim - 3], *dd = x->shape[x->ndim - 1];
  for (int k = 0; k < 2 && has_shape(c) && has_shape(s); k++) {
    const rx_sinfo *t = k ? s : c;
    const char *what = base_arena_printf(&dc->mod->arena, "rope: %s %s against x %s",
                                         k ? "sin" : "cos", ops_str(dc, t), ops_str(dc, x));
    if (!need_eq(dc, t->shape[0], sd, what) || !need_eq(dc, t->shape[1], dd, what)) return NULL;
  }
  rx_expr_ctx *cx = ops_ctx(dc);
  const rx_expr *rem = ops_simplify(dc, sym_expr_floormod(cx, dd, sym_expr_const(cx, 2)));
  if (!rx_expr_is_const(rem, 0) &&
      ops_prove(dc, sym_expr_cmp(cx, RX_EXPR_EQ, rem, sym_expr_const(cx, 0))) != RX_TRUE) {
    ops_deduce_error(
        dc, "rope expects an even head dim, got %s in %s%s", ops_expr_str(dc, dd), ops_str(dc, x),
        rem->kind == RX_EXPR_CONST ? "" : " (not provably even; add a fact d % 2 == 0)");
    return NULL;
  }
  return ops_tensor(dc, x->dtype, x->ndim, x->shape);
}

/* ---- attention ---- */

const rx_sinfo *ops_deduce_attention(rx_deduce_ctx *dc, const rx_node *call) {
  static const char *const names[] = {"q", "k", "v", "mask"};
  const rx_sinfo *t[4] = {0};
  for (int i = 0; i < call->nargs; i++) {
    t[i] = ops_tensor_arg(dc, call, i, names[i]);
    if (!t[i]) return NULL;
    if (i == 0 && !ops_need_float(dc, t[0], "attention")) return NULL;
    if (i && !same_dtype(dc, call, t[0], t[i], names[i])) return NULL;
    if (i < 3 && t[i]->ndim >= 0 && t[i]->ndim != 4) {
      ops_deduce_error(dc, "attention expects %s of rank 4 ([b, h, %s, d]), got %s", names[i],
                       i == 0 ? "s" : "t", ops_str(dc, t[i]));
      return NULL;
    }
    if (i == 3 && t[i]->ndim > 4) {
      ops_deduce_error(dc, "attention expects a mask broadcastable to [b, h, s, t], got %s",
                       ops_str(dc, t[i]));
      return NULL;
    }
  }
  const rx_sinfo *q = t[0], *k = t[1], *v = t[2], *mask = t[3];
  if (!has_shape(q) || !has_shape(k) || !has_shape(v)) return ops_tensor(dc, q->dtype, 4, NULL);
  const char *what = base_arena_printf(&dc->mod->arena, "attention of q %s, k %s, v %s",
                                       ops_str(dc, q), ops_str(dc, k), ops_str(dc, v));
  if (!need_eq(dc, k->shape[0], q->shape[0], what) ||
      !need_eq(dc, v->shape[0], q->shape[0], what) ||
      !need_eq(dc, k->shape[1], q->shape[1], what) ||
      !need_eq(dc, v->shape[1], q->shape[1], what) ||
      !need_eq(dc, k->shape[3], q->shape[3], what) || !need_eq(dc, v->shape[2], k->shape[2], what))
    return NULL;
  if (mask && has_shape(mask)) {
    const rx_expr *full[4] = {q->shape[0], q->shape[1], q->shape[2], k->shape[2]};
    const rx_expr *one = sym_expr_const(ops_ctx(dc), 1);
    for (int i = 0; i < mask->ndim; i++) {
      const rx_expr *md = mask->shape[i], *fd = full[4 - mask->ndim + i];
      if (ops_dim_eq(dc, md, fd) == RX_TRUE || ops_dim_eq(dc, md, one) == RX_TRUE) continue;
      ops_deduce_error(dc,
                       "attention: the mask %s does not provably broadcast to the scores "
                       "[b, h, s, t] = [%s, %s, %s, %s] (dim %s)",
                       ops_str(dc, mask), ops_expr_str(dc, full[0]), ops_expr_str(dc, full[1]),
                       ops_expr_str(dc, full[2]), ops_expr_str(dc, full[3]), ops_expr_str(dc, md));
      return NULL;
    }
  }
  const rx_expr **dims = ops_dims(dc, 4);
  dims[0] = q->shape[0];
  dims[1] = q->shape[1];
  dims[2] = q->shape[2];
  dims[3] = v->shape[3];
  return ops_tensor(dc, q->dtype, 4, dims);
}

/* ---- windows: conv2d and pooling ---- */

/* A pair or quadruple INTS attribute. */
static bool pair_attr(rx_deduce_ctx *dc, const rx_node *call, const char *name, int64_t dflt,
                      bool allow4, int64_t minv, int64_t out[4]) {
  const rx_attr *a = ops_call_attr(call, name);
  out[0] = out[1] = out[2] = out[3] = dflt;
  if (!a) return true;
  if (a->kind != RX_ATTR_INTS || !(a->n == 2 || (allow4 && a->n == 4))) {
    ops_deduce_error(dc, "%s expects %s=[h, w]%s", call->op->name, name,
                     allow4 ? " or [top, left, bottom, right]" : "");
    return false;
  }
  for (int i = 0; i < a->n; i++) {
    if (a->ints[i] < minv || a->ints[i] > (1 << 20)) {
      ops_deduce_error(dc, "%s expects %s between %lld and %d, got %lld", call->op->name, name,
                       (long long)minv, 1 << 20, (long long)a->ints[i]);
      return false;
    }
  }
  if (a->n == 2) {
    out[0] = out[2] = a->ints[0];
    out[1] = out[3] = a->ints[1];
  } else {
    for (int i = 0; i < 4; i++) out[i] = a->ints[i];
  }
  return true;
}

/* Reads and checks the window attributes (kernel for pools, strides, padding, dilation, groups,
 * count_include_pad); reports and returns false when malformed. */
static bool ops_nn_window(rx_deduce_ctx *dc, const rx_node *call, bool pool, rx_nn_win *w) {
  memset(w, 0, sizeof *w);
  int64_t k[4], s[4], p[4], d[4];
  if (pool) {
    if (!pair_attr(dc, call, "kernel", 1, false, 1, k)) return false;
    if (!ops_call_attr(call, "kernel")) {
      ops_deduce_error(dc, "%s expects kernel=[kh, kw]", call->op->name);
      return false;
    }
    w->kh = k[0];
    w->kw = k[1];
  }
  if (!pair_attr(dc, call, "strides", 1, false, 1, s) ||
      !pair_attr(dc, call, "padding", 0, true, 0, p) ||
      !pair_attr(dc, call, "dilation", 1, false, 1, d))
    return false;
  if (pool && !ops_call_attr(call, "strides")) {
    s[0] = w->kh;
    s[1] = w->kw;
  }
  w->sh = s[0];
  w->sw = s[1];
  w->pt = p[0];
  w->pl = p[1];
  w->pb = p[2];
  w->pr = p[3];
  w->dh = d[0];
  w->dw = d[1];
  w->groups = ops_int_attr(call, "groups", 1);
  w->include_pad = ops_int_attr(call, "count_include_pad", 1) != 0;
  if (w->groups < 1 || w->groups > (1 << 20)) {
    ops_deduce_error(dc, "conv2d expects groups >= 1, got %lld", (long long)w->groups);
    return false;
  }
  const rx_attr *lay = pool ? NULL : ops_call_attr(call, "data_layout");
  if (lay && (lay->kind != RX_ATTR_STR || !lay->s ||
              (strcmp(lay->s, "NCHW") != 0 && strcmp(lay->s, "NHWC") != 0))) {
    ops_deduce_error(dc, "conv2d expects data_layout=\"NCHW\" or data_layout=\"NHWC\"");
    return false;
  }
  w->nhwc = lay && strcmp(lay->s, "NHWC") == 0;
  return true;
}

rx_nn_axes ops_nn_conv_axes(bool nhwc) {
  if (nhwc) return (rx_nn_axes){.xc = 3, .xh = 1, .xw = 2, .wo = 3, .wi = 2, .wh = 0, .ww = 1};
  return (rx_nn_axes){.xc = 1, .xh = 2, .xw = 3, .wo = 0, .wi = 1, .wh = 2, .ww = 3};
}

/* (in + pad_lo + pad_hi - dil * (kernel - 1) - 1) // stride + 1, canonical. */
static const rx_expr *ops_nn_out_dim(rx_expr_ctx *cx, const rx_expr *in, const rx_expr *kernel,
                                     int64_t stride, int64_t pad_lo, int64_t pad_hi, int64_t dil) {
  /* (in + pad_lo + pad_hi - dil * (kernel - 1) - 1) // stride + 1 */
  const rx_expr *span = sym_expr_add(
      cx,
      sym_expr_mul(cx, sym_expr_const(cx, dil), sym_expr_sub(cx, kernel, sym_expr_const(cx, 1))),
      sym_expr_const(cx, 1));
  const rx_expr *e =
      sym_expr_sub(cx, sym_expr_add(cx, in, sym_expr_const(cx, pad_lo + pad_hi)), span);
  return sym_expr_add(cx, sym_expr_floordiv(cx, e, sym_expr_const(cx, stride)),
                      sym_expr_const(cx, 1));
}

/* The spatial output dims (x's height and width at axes xh, xw); reports a window larger than
 * the padded input. */
static bool out_hw(rx_deduce_ctx *dc, const rx_sinfo *x, int xh, int xw, const rx_expr *kh,
                   const rx_expr *kw, const rx_nn_win *w, const rx_expr **oh, const rx_expr **ow) {
  rx_expr_ctx *cx = ops_ctx(dc);
  *oh = ops_simplify(dc, ops_nn_out_dim(cx, x->shape[xh], kh, w->sh, w->pt, w->pb, w->dh));
  *ow = ops_simplify(dc, ops_nn_out_dim(cx, x->shape[xw], kw, w->sw, w->pl, w->pr, w->dw));
  for (int i = 0; i < 2; i++) {
    const rx_expr *o = i ? *ow : *oh;
    if (ops_prove(dc, sym_expr_cmp(cx, RX_EXPR_LT, o, sym_expr_const(cx, 1))) == RX_TRUE) {
      ops_deduce_error(dc, "%s: the window does not fit the padded input %s (output dim %s)",
                       "window op", ops_str(dc, x), ops_expr_str(dc, o));
      return false;
    }
  }
  return true;
}

const rx_sinfo *ops_deduce_conv2d(rx_deduce_ctx *dc, const rx_node *call) {
  const rx_sinfo *x = ops_tensor_arg(dc, call, 0, "x");
  const rx_sinfo *wt = x ? ops_tensor_arg(dc, call, 1, "weight") : NULL;
  if (!wt || !same_dtype(dc, call, x, wt, "weight")) return NULL;
  if (x->dtype == RX_DTYPE_BOOL) {
    ops_deduce_error(dc, "conv2d expects a numeric tensor, got %s", ops_str(dc, x));
    return NULL;
  }
  rx_nn_win w;
  if (!ops_nn_window(dc, call, false, &w)) return NULL;
  if ((x->ndim >= 0 && x->ndim != 4) || (wt->ndim >= 0 && wt->ndim != 4)) {
    ops_deduce_error(dc, "conv2d expects x %s and weight %s, got %s and %s",
                     w.nhwc ? "[N, H, W, C]" : "[N, C, H, W]",
                     w.nhwc ? "[KH, KW, C / groups, O]" : "[O, C / groups, KH, KW]", ops_str(dc, x),
                     ops_str(dc, wt));
    return NULL;
  }
  rx_nn_axes ax = ops_nn_conv_axes(w.nhwc);
  if (!has_shape(x) || !has_shape(wt)) return ops_tensor(dc, x->dtype, 4, NULL);
  rx_expr_ctx *cx = ops_ctx(dc);
  const char *what = base_arena_printf(&dc->mod->arena,
                                       "conv2d of %s with weight %s, groups %lld: "
                                       "input channels",
                                       ops_str(dc, x), ops_str(dc, wt), (long long)w.groups);
  const rx_expr *cin =
      ops_simplify(dc, sym_expr_mul(cx, wt->shape[ax.wi], sym_expr_const(cx, w.groups)));
  if (!need_eq(dc, x->shape[ax.xc], cin, what)) return NULL;
  const rx_expr *rem =
      ops_simplify(dc, sym_expr_floormod(cx, wt->shape[ax.wo], sym_expr_const(cx, w.groups)));
  if (!rx_expr_is_const(rem, 0) &&
      ops_prove(dc, sym_expr_cmp(cx, RX_EXPR_EQ, rem, sym_expr_const(cx, 0))) != RX_TRUE) {
    ops_deduce_error(
        dc, "conv2d: the output channels %s of weight %s are not %s divisible by groups %lld",
        ops_expr_str(dc, wt->shape[ax.wo]), ops_str(dc, wt),
        rem->kind == RX_EXPR_CONST ? "" : "provably", (long long)w.groups);
    return NULL;
  }
  const rx_expr **dims = ops_dims(dc, 4);
  dims[0] = x->shape[0];
  dims[ax.xc] = wt->shape[ax.wo];
  if (!out_hw(dc, x, ax.xh, ax.xw, wt->shape[ax.wh], wt->shape[ax.ww], &w, &dims[ax.xh],
              &dims[ax.xw]))
    return NULL;
  return ops_tensor(dc, x->dtype, 4, dims);
}

const rx_sinfo *ops_deduce_pool2d(rx_deduce_ctx *dc, const rx_node *call) {
  const rx_sinfo *x = ops_tensor_arg(dc, call, 0, "x");
  if (!x) return NULL;
  bool avg = call->op->id == RX_OP_avg_pool2d;
  if (avg ? !ops_need_float(dc, x, call->op->name) : x->dtype == RX_DTYPE_BOOL) {
    if (!avg) ops_deduce_error(dc, "max_pool2d expects a numeric tensor, got %s", ops_str(dc, x));
    return NULL;
  }
  if (x->ndim >= 0 && x->ndim != 4) {
    ops_deduce_error(dc, "%s expects x [N, C, H, W], got %s", call->op->name, ops_str(dc, x));
    return NULL;
  }
  rx_nn_win w;
  if (!ops_nn_window(dc, call, true, &w)) return NULL;
  if (!avg && ops_call_attr(call, "count_include_pad")) {
    ops_deduce_error(dc, "max_pool2d has no count_include_pad (avg_pool2d only)");
    return NULL;
  }
  /* padding below the window's extent, so that the first and (in floor mode) the last window
   * of each dim reach into the input (ONNX allows more than PyTorch's half the kernel) */
  int64_t eh = w.dh * (w.kh - 1) + 1, ew = w.dw * (w.kw - 1) + 1;
  if (w.pt >= eh || w.pb >= eh || w.pl >= ew || w.pr >= ew) {
    ops_deduce_error(dc, "%s expects padding below the window extent [%lld, %lld]", call->op->name,
                     (long long)eh, (long long)ew);
    return NULL;
  }
  if (!has_shape(x)) return ops_tensor(dc, x->dtype, 4, NULL);
  rx_expr_ctx *cx = ops_ctx(dc);
  const rx_expr **dims = ops_dims(dc, 4);
  dims[0] = x->shape[0];
  dims[1] = x->shape[1];
  if (!out_hw(dc, x, 2, 3, sym_expr_const(cx, w.kh), sym_expr_const(cx, w.kw), &w, &dims[2],
              &dims[3]))
    return NULL;
  return ops_tensor(dc, x->dtype, 4, dims);
}

/* ---- batch_norm ---- */

const rx_sinfo *ops_deduce_batch_norm(rx_deduce_ctx *dc, const rx_node *call) {
  static const char *const names[] = {"x", "gamma", "beta", "mean", "var"};
  const rx_sinfo *x = ops_tensor_arg(dc, call, 0, "x");
  if (!x || !ops_need_float(dc, x, "batch_norm")) return NULL;
  int axis = 0;
  if (x->ndim >= 0 && !ops_norm_axis(dc, ops_int_attr(call, "axis", 1), x->ndim, &axis))
    return NULL;
  for (int i = 1; i < 5; i++) {
    const rx_sinfo *p = ops_tensor_arg(dc, call, i, names[i]);
    if (!p || !same_dtype(dc, call, x, p, names[i])) return NULL;
    if (p->ndim >= 0 && p->ndim != 1) {
      ops_deduce_error(dc, "batch_norm expects %s of rank 1 (the channels), got %s", names[i],
                       ops_str(dc, p));
      return NULL;
    }
    if (!has_shape(x) || !has_shape(p)) continue;
    const char *what = base_arena_printf(&dc->mod->arena,
                                         "batch_norm: %s %s against the channel "
                                         "dim of x %s",
                                         names[i], ops_str(dc, p), ops_str(dc, x));
    if (!need_eq(dc, p->shape[0], x->shape[axis], what)) return NULL;
  }
  return ops_tensor(dc, x->dtype, x->ndim, x->shape);
}

/* ------------------------------------------------------------------------------------------
 * legalization: the generators named in ops.def (the writer they use: ops/legalize.c)
 * ------------------------------------------------------------------------------------------ */

/* ---- neural-network ops ---- */

void lz_gen_rope(lz_ctx *l) {
  lz_opnd *x = lz_arg(l, 0), *c = lz_arg(l, 1), *s = lz_arg(l, 2), *y = &l->outs[0];
  if (x->scalar || c->scalar || s->scalar) {
    lz_fail(l, "rope expects tensor operands");
    return;
  }
  int r = y->ndim;
  if (r < 1) {
    lz_fail(l, "rope expects operands of rank 1 or more");
    return;
  }
  const char *iv[LZ_MAXR] = {NULL}, *xa[LZ_MAXR], *xb[LZ_MAXR];
  lz_nest_vars(l, "i", r, iv);
  const rx_expr *d = x->shape[r - 1];
  const rx_expr *half = sym_expr_floordiv(l->cx, d, sx_const(l->cx, 2));
  const char *js = iv[r - 1];
  for (int k = 0; k < r; k++) xa[k] = xb[k] = iv[k];
  xa[r - 1] = lz_ex(l, sym_expr_add(l->cx, sx_var(l->cx, js), half));
  xb[r - 1] = lz_ex(l, sym_expr_sub(l->cx, sx_var(l->cx, js), half));
  const char *ci[2] = {iv[r - 3], js};
  rx_dtype t = x->dtype;
  lz_for_nest(l, iv, y->shape, r);
  lz_line(l, "let rot: f32 = select(%s < %s, -%s, %s)", js, lz_ex(l, half),
          lz_up(l, t, lz_load(l, x, xa)), lz_up(l, t, lz_load(l, x, xb)));
  lz_line(l, "%s = %s", lz_load(l, y, iv),
          lz_down(l, t,
                  lz_str(l, "%s * %s + rot * %s", lz_up(l, t, lz_load(l, x, iv)),
                         lz_up(l, t, lz_load(l, c, ci)), lz_up(l, t, lz_load(l, s, ci)))));
  lz_close_n(l, r);
}

/* Window index: out * stride - pad + kernel_index * dilation. */
static const rx_expr *win_index(lz_ctx *l, const char *o, int64_t stride, int64_t pad,
                                const char *k, int64_t dil) {
  return sym_expr_add(l->cx,
                      sym_expr_sub(l->cx,
                                   sym_expr_mul(l->cx, sx_var(l->cx, o), sx_const(l->cx, stride)),
                                   sx_const(l->cx, pad)),
                      sym_expr_mul(l->cx, sx_var(l->cx, k), sx_const(l->cx, dil)));
}

bool lz_window(lz_ctx *l, bool pool, rx_nn_win *w) {
  rx_deduce_ctx dc = {l->m, NULL, l->diag, l->call->loc};
  if (!ops_nn_window(&dc, l->call, pool, w)) {
    l->failed = true;
    return false;
  }
  return true;
}

/* The direct convolution: a multiply-accumulate reduce over (c, kh, kw) per output point, the
 * portable form of conv2d (ops/conv.c). */
void lz_conv2d_direct(lz_ctx *l, const rx_nn_win *win) {
  lz_opnd *x = lz_arg(l, 0), *w = lz_arg(l, 1), *y = &l->outs[0];
  rx_nn_axes ax = ops_nn_conv_axes(win->nhwc);
  const char *n = lz_loopvar(l, "n"), *o = lz_loopvar(l, "o"), *p = lz_loopvar(l, "p"),
             *qv = lz_loopvar(l, "q");
  const char *c = lz_loopvar(l, "c"), *kh = lz_loopvar(l, "kh"), *kw = lz_loopvar(l, "kw");
  const rx_expr *ih = win_index(l, p, win->sh, win->pt, kh, win->dh);
  const rx_expr *iw = win_index(l, qv, win->sw, win->pl, kw, win->dw);
  rx_expr_ctx *cx = l->cx;
  const rx_expr *inb =
      sym_expr_and(cx,
                   sym_expr_and(cx, sym_expr_cmp(cx, RX_EXPR_LE, sx_const(l->cx, 0), ih),
                                sym_expr_cmp(cx, RX_EXPR_LT, ih, x->shape[ax.xh])),
                   sym_expr_and(cx, sym_expr_cmp(cx, RX_EXPR_LE, sx_const(l->cx, 0), iw),
                                sym_expr_cmp(cx, RX_EXPR_LT, iw, x->shape[ax.xw])));
  const rx_expr *ch = sx_var(l->cx, c);
  if (win->groups > 1) {
    const rx_expr *og = sym_expr_floordiv(cx, w->shape[ax.wo], sx_const(l->cx, win->groups));
    ch = sym_expr_add(
        cx, sym_expr_mul(cx, sym_expr_floordiv(cx, sx_var(l->cx, o), og), w->shape[ax.wi]), ch);
  }
  const char *xi[4], *wi[4], *ov[4];
  xi[0] = ov[0] = n;
  xi[ax.xc] = lz_ex(l, ch);
  xi[ax.xh] = lz_ex(l, ih);
  xi[ax.xw] = lz_ex(l, iw);
  ov[ax.xc] = o;
  ov[ax.xh] = p;
  ov[ax.xw] = qv;
  wi[ax.wo] = o;
  wi[ax.wi] = c;
  wi[ax.wh] = kh;
  wi[ax.ww] = kw;
  const char *rv[3] = {c, kh, kw};
  const rx_expr *re[3] = {w->shape[ax.wi], w->shape[ax.wh], w->shape[ax.ww]};
  rx_dtype t = x->dtype;
  rx_dtype at = lz_is_half(t) ? RX_DTYPE_F32 : t;
  const char *xv = lz_str(l, "select(%s, %s, %s)", lz_ex(l, inb), lz_up(l, t, lz_load(l, x, xi)),
                          lz_lit(l, at, 0));
  const char *wv = lz_up(l, t, lz_load(l, w, wi));
  lz_for_nest(l, ov, y->shape, 4);
  const char *yv = lz_load(l, y, ov);
  lz_sum_of_products(l, yv, t, rv, re, 3, xv, wv);
  lz_close_n(l, 4);
}

void lz_gen_pool(lz_ctx *l) {
  bool avg = l->call->op->id == RX_OP_avg_pool2d;
  lz_opnd *x = lz_arg(l, 0), *y = &l->outs[0];
  rx_nn_win win;
  if (!lz_window(l, true, &win)) return;
  const char *n = lz_loopvar(l, "n"), *c = lz_loopvar(l, "c"), *p = lz_loopvar(l, "p"),
             *qv = lz_loopvar(l, "q");
  const char *kh = lz_loopvar(l, "kh"), *kw = lz_loopvar(l, "kw");
  const rx_expr *ih = win_index(l, p, win.sh, win.pt, kh, win.dh);
  const rx_expr *iw = win_index(l, qv, win.sw, win.pl, kw, win.dw);
  rx_expr_ctx *cx = l->cx;
  const rx_expr *inb =
      sym_expr_and(cx,
                   sym_expr_and(cx, sym_expr_cmp(cx, RX_EXPR_LE, sx_const(l->cx, 0), ih),
                                sym_expr_cmp(cx, RX_EXPR_LT, ih, x->shape[2])),
                   sym_expr_and(cx, sym_expr_cmp(cx, RX_EXPR_LE, sx_const(l->cx, 0), iw),
                                sym_expr_cmp(cx, RX_EXPR_LT, iw, x->shape[3])));
  const char *xi[4] = {n, c, lz_ex(l, ih), lz_ex(l, iw)};
  const char *ov[4] = {n, c, p, qv};
  const char *rv[2] = {kh, kw};
  const rx_expr *re[2] = {sx_const(l->cx, win.kh), sx_const(l->cx, win.kw)};
  rx_dtype t = x->dtype;
  const char *cond = lz_ex(l, inb);
  lz_for_nest(l, ov, y->shape, 4);
  const char *yv = lz_load(l, y, ov);
  const char *acc = lz_fresh(l, "acc");
  if (avg) {
    lz_line(l, "alloc %s: f32[1] local", acc);
    const char *cnt = win.include_pad ? NULL : lz_fresh(l, "cnt");
    if (cnt) lz_line(l, "alloc %s: f32[1] local", cnt);
    lz_reduce_open(l, rv, re, 2);
    if (cnt)
      lz_line(l, "init { %s[0] = 0.0; %s[0] = 0.0 }", acc, cnt);
    else
      lz_line(l, "init { %s[0] = 0.0 }", acc);
    lz_line(l, "update {");
    l->ind++;
    lz_line(l, "%s[0] = %s[0] + select(%s, %s, 0.0)", acc, acc, cond,
            lz_up(l, t, lz_load(l, x, xi)));
    if (cnt) lz_line(l, "%s[0] = %s[0] + select(%s, 1.0, 0.0)", cnt, cnt, cond);
    lz_close(l);
    lz_close(l);
    const char *den = cnt ? lz_str(l, "%s[0]", cnt) : lz_flit(l, (double)(win.kh * win.kw));
    lz_line(l, "%s = %s", yv, lz_down(l, t, lz_str(l, "%s[0] / %s", acc, den)));
  } else {
    lz_line(l, "alloc %s: %s[1] local", acc, ir_dtype_name(t));
    lz_reduce_open(l, rv, re, 2);
    lz_line(l, "init { %s[0] = %s }", acc, lz_lowest(l, t, false));
    lz_line(l, "update { %s[0] = max(%s[0], select(%s, %s, %s)) }", acc, acc, cond,
            lz_load(l, x, xi), lz_lowest(l, t, false));
    lz_close(l);
    lz_line(l, "%s = %s[0]", yv, acc);
  }
  lz_close_n(l, 4);
}

void lz_gen_batch_norm(lz_ctx *l) {
  lz_opnd *x = lz_arg(l, 0), *y = &l->outs[0];
  for (int i = 1; i < 5; i++)
    if (lz_arg(l, i)->scalar) {
      lz_fail(l, "batch_norm expects tensor parameters");
      return;
    }
  int axis = lz_axis_attr(l, "axis", 1, x->ndim);
  const rx_attr *ea = ops_call_attr(l->call, "epsilon");
  double eps = ea ? ea->f : 1e-5;
  const char *iv[LZ_MAXR] = {
      NULL}; /* set by nest_vars (gcc -O3 cannot see it: maybe-uninitialized) */
  lz_nest_vars(l, "i", y->ndim, iv);
  const char *ci[1] = {iv[axis]};
  rx_dtype t = x->dtype;
  lz_for_nest(l, iv, y->shape, y->ndim);
  lz_line(l, "%s = %s", lz_load(l, y, iv),
          lz_down(l, t,
                  lz_str(l, "(%s - %s) * rsqrt(%s + %s) * %s + %s", lz_up(l, t, lz_load(l, x, iv)),
                         lz_up(l, t, lz_load(l, lz_arg(l, 3), ci)),
                         lz_up(l, t, lz_load(l, lz_arg(l, 4), ci)), lz_flit(l, eps),
                         lz_up(l, t, lz_load(l, lz_arg(l, 1), ci)),
                         lz_up(l, t, lz_load(l, lz_arg(l, 2), ci)))));
  lz_close_n(l, y->ndim);
}
