/* frontends/onnx/import_resize.c: the ONNX importer's Resize and Upsample (per resized axis,
 * the source coordinate of each output index, then a gather of the neighbours weighted by mode)
 * and GridSample. */
#include "import_int.h"

#include <math.h>
#include <string.h>

/* ---- Resize and Upsample: per resized axis, the source coordinate of each output index (a
 * tensor computed from arange), then a gather of the neighbours (take) weighted by mode ---- */

typedef enum { RS_NEAREST, RS_LINEAR, RS_CUBIC } rs_mode;

typedef enum { RS_HALF_PIXEL, RS_PYTORCH, RS_ALIGN, RS_ASYM, RS_TF_NN, RS_TF_CROP } rs_coord;

typedef enum { RS_PREFER_FLOOR, RS_PREFER_CEIL, RS_FLOOR, RS_CEIL } rs_round;

typedef struct rs_params {
  rs_mode mode;
  rs_coord coord;
  rs_round round;
  double a;      /* cubic_coeff_a */
  bool exclude;  /* exclude_outside */
  double extrap; /* extrapolation_value (tf_crop_and_resize) */
  int rank;
  rx_node *scales;     /* f32 [rank] at run time, or NULL (sizes or fscale given) */
  const float *fscale; /* constant scales [rank] (a weight read at import), or NULL */
  rx_node *roi;        /* f32 [2 rank] (tf_crop_and_resize), or NULL */
} rs_params;

/* The index of string attribute `name` in names (nnames of them; absent: dflt), -1 if other. */
int onnx_attr_choice(const Onnx__NodeProto *n, const char *name, const char *const *names,
                     int nnames, int dflt) {
  if (onnx_attr_s_is(n, name, "")) return dflt;
  for (int i = 0; i < nnames; i++)
    if (onnx_attr_s_is(n, name, names[i])) return i;
  return -1;
}

static rx_status rs_read(imp *I, const Onnx__NodeProto *n, rs_params *p) {
  static const char *const modes[] = {"nearest", "linear", "cubic"},
                           *coords[] = {"half_pixel", "pytorch_half_pixel",   "align_corners",
                                        "asymmetric", "tf_half_pixel_for_nn", "tf_crop_and_resize"},
                           *rounds[] = {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"};
  bool up = !strcmp(n->op_type, "Upsample"); /* Upsample: asymmetric, floor */
  int m = onnx_attr_choice(n, "mode", modes, up ? 2 : 3, RS_NEAREST);
  int c = up ? RS_ASYM
             : onnx_attr_choice(n, "coordinate_transformation_mode", coords, 6, RS_HALF_PIXEL);
  int r = up ? RS_FLOOR : onnx_attr_choice(n, "nearest_mode", rounds, 4, RS_PREFER_FLOOR);
  if (m < 0) return onnx_node_err(I, n, "mode must be nearest, linear%s", up ? "" : " or cubic");
  if (c < 0)
    return onnx_node_err(I, n,
                         "coordinate_transformation_mode must be half_pixel, pytorch_half_pixel, "
                         "align_corners, asymmetric, tf_half_pixel_for_nn or tf_crop_and_resize");
  if (r < 0)
    return onnx_node_err(I, n,
                         "nearest_mode must be round_prefer_floor, round_prefer_ceil, "
                         "floor or ceil");
  if (onnx_attr_i(n, "antialias", 0)) return onnx_node_err(I, n, "antialias=1 is not supported");
  if (onnx_attr(n, "axes")) return onnx_node_err(I, n, "the axes attribute is not supported");
  if (!onnx_attr_s_is(n, "keep_aspect_ratio_policy", "") &&
      !onnx_attr_s_is(n, "keep_aspect_ratio_policy", "stretch"))
    return onnx_node_err(I, n, "keep_aspect_ratio_policy other than stretch is not supported");
  p->mode = (rs_mode)m;
  p->coord = (rs_coord)c;
  p->round = (rs_round)r;
  p->a = onnx_attr_f(n, "cubic_coeff_a", -0.75);
  p->exclude = onnx_attr_i(n, "exclude_outside", 0) != 0;
  p->extrap = onnx_attr_f(n, "extrapolation_value", 0.0);
  return NULL;
}

/* A tensor [1] holding the symbolic value e (dtype f32 or i64): arange(e, e + 1). */
rx_status onnx_value_tensor(imp *I, const Onnx__NodeProto *n, const rx_expr *e, rx_dtype dt,
                            rx_node **out) {
  rx_node *a[2] = {rx_arg_prim(I->b, RX_DTYPE_I64, e),
                   rx_arg_prim(I->b, RX_DTYPE_I64, rx_sym_add(I->m, e, rx_sym_const(I->m, 1)))};
  const rx_attr *at = rx_attr_dtype(I->m, "dtype", dt);
  return onnx_exa(I, n, RX_OP_arange, a, 2, &at, 1, out, NULL);
}

/* Element k of a 1-D tensor as a tensor [1]. */
rx_status onnx_elem_of(imp *I, const Onnx__NodeProto *n, rx_node *t, int k, rx_node **out) {
  int64_t ax = 0;
  const rx_expr *b = rx_sym_const(I->m, k), *e = rx_sym_const(I->m, k + 1);
  const rx_attr *at[3] = {rx_attr_ints(I->m, "axes", &ax, 1), rx_attr_exprs(I->m, "begin", &b, 1),
                          rx_attr_exprs(I->m, "end", &e, 1)};
  return onnx_exa(I, n, RX_OP_strided_slice, &t, 1, at, 3, out, NULL);
}

/* The source coordinate (f32 [out]) of each output index along axis k, as ONNX's
 * coordinate_transformation_mode says. */
static rx_status rs_coord_of(imp *I, const Onnx__NodeProto *n, const rs_params *p, int k,
                             const rx_expr *in, const rx_expr *out, rx_node **x) {
  rx_node *i, *inf, *outf, *sc, *t = NULL, *u, *big = NULL;
  rx_var *r = NULL;
  rx_node *a[2] = {rx_arg_prim(I->b, RX_DTYPE_I64, rx_sym_const(I->m, 0)),
                   rx_arg_prim(I->b, RX_DTYPE_I64, out)};
  const rx_attr *at = rx_attr_dtype(I->m, "dtype", RX_DTYPE_F32);
  RX_RETURN_IF_ERROR(onnx_exa(I, n, RX_OP_arange, a, 2, &at, 1, &i, &r));
  RX_RETURN_IF_ERROR(onnx_value_tensor(I, n, in, RX_DTYPE_F32, &inf));
  if (p->fscale) { /* the resized length is in * scale, not floored (ONNX's reference) */
    sc = FL(p->fscale[k]);
    EX2(RX_OP_multiply, inf, sc, outf);
  } else if (p->scales) {
    RX_RETURN_IF_ERROR(onnx_elem_of(I, n, p->scales, k, &sc));
    EX2(RX_OP_multiply, inf, sc, outf);
  } else {
    RX_RETURN_IF_ERROR(onnx_value_tensor(I, n, out, RX_DTYPE_F32, &outf));
    EX2(RX_OP_divide, outf, inf, sc);
  }
  if (p->coord == RS_PYTORCH || p->coord == RS_ALIGN || p->coord == RS_TF_CROP)
    EX2(RX_OP_greater, outf, FL(1.0), big); /* these divide by out - 1, or need out > 1 */
  switch (p->coord) {
  case RS_HALF_PIXEL:
  case RS_PYTORCH:
  case RS_TF_NN:
    EX2(RX_OP_add, i, FL(0.5), t);
    EX2(RX_OP_divide, t, sc, t);
    if (p->coord != RS_TF_NN) EX2(RX_OP_subtract, t, FL(0.5), t);
    if (p->coord == RS_PYTORCH) EX3(RX_OP_where, big, t, FL(0.0), t);
    break;
  case RS_ALIGN: /* i (in - 1) / (out - 1) */
    EX2(RX_OP_subtract, inf, FL(1.0), t);
    EX2(RX_OP_subtract, outf, FL(1.0), u);
    EX2(RX_OP_divide, t, u, t);
    EX2(RX_OP_multiply, i, t, t);
    EX3(RX_OP_where, big, t, FL(0.0), t);
    break;
  case RS_ASYM:
    EX2(RX_OP_divide, i, sc, t);
    break;
  case RS_TF_CROP: { /* start (in - 1) + i (end - start) (in - 1) / (out - 1) */
    rx_node *s, *e, *in1, *mid;
    RX_RETURN_IF_ERROR(onnx_elem_of(I, n, p->roi, k, &s));
    RX_RETURN_IF_ERROR(onnx_elem_of(I, n, p->roi, p->rank + k, &e));
    EX2(RX_OP_subtract, inf, FL(1.0), in1);
    EX2(RX_OP_add, s, e, mid);
    EX2(RX_OP_multiply, mid, FL(0.5), mid);
    EX2(RX_OP_multiply, mid, in1, mid);
    EX2(RX_OP_subtract, e, s, t);
    EX2(RX_OP_multiply, t, in1, t);
    EX2(RX_OP_subtract, outf, FL(1.0), u);
    EX2(RX_OP_divide, t, u, t);
    EX2(RX_OP_multiply, i, t, t);
    EX2(RX_OP_multiply, s, in1, u);
    EX2(RX_OP_add, t, u, t);
    EX3(RX_OP_where, big, t, mid, t);
    break;
  }
  }
  *x = t;
  return NULL;
}

/* y + take(x, clamp(idx, 0, in - 1), axis k) w (w reshaped to broadcast along k; y NULL: none
 * yet; w NULL: weight 1); *last: the variable of the new y. */
static rx_status rs_tap(imp *I, const Onnx__NodeProto *n, const rs_params *p, rx_node *x, int k,
                        const rx_expr *in, const rx_expr *out, rx_node *idx, rx_node *w,
                        rx_node **y, rx_var **last) {
  rx_node *hi, *g;
  rx_var *r = NULL;
  RX_RETURN_IF_ERROR(onnx_value_tensor(I, n, in, RX_DTYPE_F32, &hi));
  EX2(RX_OP_subtract, hi, FL(1.0), hi);
  EX2(RX_OP_maximum, idx, FL(0.0), idx);
  EX2(RX_OP_minimum, idx, hi, idx);
  const rx_attr *at = rx_attr_dtype(I->m, "dtype", RX_DTYPE_I64);
  EXA(RX_OP_cast, idx, &at, 1, idx);
  rx_node *a[2] = {x, idx};
  at = rx_attr_int(I->m, "axis", k);
  RX_RETURN_IF_ERROR(onnx_exa(I, n, RX_OP_take, a, 2, &at, 1, &g, &r));
  if (w) {
    const rx_expr *d[SYM_MAX];
    d[0] = out;
    for (int j = k + 1; j < p->rank; j++) d[j - k] = rx_sym_const(I->m, 1);
    RX_RETURN_IF_ERROR(onnx_reshape_to(I, n, w, d, p->rank - k, &w, &r));
    EX2(RX_OP_multiply, g, w, g);
  }
  if (*y) EX2(RX_OP_add, *y, g, g);
  *y = g;
  *last = r;
  return NULL;
}

/* The cubic convolution weight of a tap at distance s (Keys, coefficient a):
 * (a + 2) s^3 - (a + 3) s^2 + 1 within 1, a s^3 - 5 a s^2 + 8 a s - 4 a from 1 to 2. */
static rx_status cubic_w(imp *I, const Onnx__NodeProto *n, double a, rx_node *s, bool outer,
                         rx_node **out) {
  rx_node *t;
  rx_var *r = NULL;
  EX2(RX_OP_multiply, s, FL(outer ? a : a + 2), t);
  EX2(RX_OP_subtract, t, FL(outer ? 5 * a : a + 3), t);
  EX2(RX_OP_multiply, t, s, t);
  if (outer) {
    EX2(RX_OP_add, t, FL(8 * a), t);
    EX2(RX_OP_multiply, t, s, t);
    EX2(RX_OP_subtract, t, FL(4 * a), *out);
  } else {
    EX2(RX_OP_multiply, t, s, t);
    EX2(RX_OP_add, t, FL(1.0), *out);
  }
  return NULL;
}

/* x resized along axis k from in to out (*y, its variable *last). */
static rx_status rs_axis(imp *I, const Onnx__NodeProto *n, const rs_params *p, rx_node *x, int k,
                         const rx_expr *in, const rx_expr *out, rx_node **y, rx_var **last) {
  rx_node *c, *f, *t, *idx;
  rx_var *r = NULL;
  *y = NULL;
  RX_RETURN_IF_ERROR(rs_coord_of(I, n, p, k, in, out, &c));
  if (p->mode == RS_NEAREST) {
    if (p->round == RS_PREFER_FLOOR) { /* ceil(c - 0.5): halves go down */
      EX2(RX_OP_subtract, c, FL(0.5), idx);
      EX1(RX_OP_ceil, idx, idx);
    } else if (p->round == RS_PREFER_CEIL) {
      EX2(RX_OP_add, c, FL(0.5), idx);
      EX1(RX_OP_floor, idx, idx);
    } else {
      EX1(p->round == RS_FLOOR ? RX_OP_floor : RX_OP_ceil, c, idx);
    }
    RX_RETURN_IF_ERROR(rs_tap(I, n, p, x, k, in, out, idx, NULL, y, last));
  } else {
    EX1(RX_OP_floor, c, f);
    EX2(RX_OP_subtract, c, f, t); /* the fraction */
    int lo = p->mode == RS_LINEAR ? 0 : -1, hi = p->mode == RS_LINEAR ? 1 : 2;
    rx_node *w[4], *sum = NULL, *hif;
    RX_RETURN_IF_ERROR(onnx_value_tensor(I, n, in, RX_DTYPE_F32, &hif));
    EX2(RX_OP_subtract, hif, FL(1.0), hif);
    for (int j = lo; j <= hi; j++) {
      rx_node *s, **wj = &w[j - lo];
      if (p->mode == RS_LINEAR) { /* 1 - t, t */
        if (j == 0)
          EX2(RX_OP_subtract, FL(1.0), t, *wj);
        else
          *wj = t;
        continue;
      }
      if (j <= 0)
        EX2(RX_OP_add, t, FL((double)-j), s);
      else
        EX2(RX_OP_subtract, FL((double)j), t, s);
      RX_RETURN_IF_ERROR(cubic_w(I, n, p->a, s, j == -1 || j == 2, wj));
      if (p->exclude) { /* taps outside the input weigh 0, the rest renormalized */
        rx_node *at_j, *ok, *ok2;
        EX2(RX_OP_add, f, FL((double)j), at_j);
        EX2(RX_OP_greater_equal, at_j, FL(0.0), ok);
        EX2(RX_OP_less_equal, at_j, hif, ok2);
        EX2(RX_OP_logical_and, ok, ok2, ok);
        EX3(RX_OP_where, ok, *wj, FL(0.0), *wj);
        if (sum)
          EX2(RX_OP_add, sum, *wj, sum);
        else
          sum = *wj;
      }
    }
    for (int j = lo; j <= hi; j++) {
      rx_node *wj = w[j - lo];
      if (sum) EX2(RX_OP_divide, wj, sum, wj);
      if (j)
        EX2(RX_OP_add, f, FL((double)j), idx);
      else
        idx = f;
      RX_RETURN_IF_ERROR(rs_tap(I, n, p, x, k, in, out, idx, wj, y, last));
    }
  }
  if (p->coord == RS_TF_CROP) { /* extrapolation_value outside the input */
    rx_node *hif, *bad, *bad2;
    RX_RETURN_IF_ERROR(onnx_value_tensor(I, n, in, RX_DTYPE_F32, &hif));
    EX2(RX_OP_subtract, hif, FL(1.0), hif);
    EX2(RX_OP_less, c, FL(0.0), bad);
    EX2(RX_OP_greater, c, hif, bad2);
    EX2(RX_OP_logical_or, bad, bad2, bad);
    const rx_expr *d[SYM_MAX];
    d[0] = out;
    for (int j = k + 1; j < p->rank; j++) d[j - k] = rx_sym_const(I->m, 1);
    RX_RETURN_IF_ERROR(onnx_reshape_to(I, n, bad, d, p->rank - k, &bad, &r));
    EX3(RX_OP_where, bad, FL(p->extrap), *y, *y);
    *last = r;
  }
  return NULL;
}

/* floor(d s) as a symbolic expression where it is one (d constant, or s a fraction p / q with
 * q <= 64 to within the float's precision: (d p) // q, or (d p - 1) // q where the float is just
 * below p / q, as floor(d s) is then for any d below about 1 / (q |s - p / q|)); NULL otherwise. */
static const rx_expr *scaled_dim(imp *I, const rx_expr *d, float s) {
  if (!(s > 0) || s > 1e6) return NULL;
  if (d->kind == RX_EXPR_CONST) return rx_sym_const(I->m, (int64_t)floor((double)d->value * s));
  for (int64_t q = 1; q <= 64; q++) {
    double pq = (double)s * (double)q, p = nearbyint(pq);
    if (p < 1 || fabs(pq - p) > 1e-6 * pq) continue;
    const rx_expr *dp = rx_sym_mul(I->m, d, rx_sym_const(I->m, (int64_t)p));
    if (pq < p) dp = rx_sym_sub(I->m, dp, rx_sym_const(I->m, 1));
    return rx_sym_floordiv(I->m, dp, rx_sym_const(I->m, q));
  }
  return NULL;
}

/* The output dims floor(in * scale) of run-time scales (p->scales), computed at run time and
 * bound then. */
static rx_status rs_runtime_dims(imp *I, const Onnx__NodeProto *n, const rs_params *p,
                                 const rx_sinfo *xs, const rx_expr **out) {
  rx_node *parts[SYM_MAX], *t;
  rx_var *r = NULL, *tup;
  for (int k = 0; k < xs->ndim; k++)
    RX_RETURN_IF_ERROR(onnx_value_tensor(I, n, xs->shape[k], RX_DTYPE_F32, &parts[k]));
  RX_RETURN_IF_ERROR(onnx_at_node(I, n, rx_emit_tuple(I->b, parts, xs->ndim, NULL, &tup)));
  t = rx_arg_var(I->b, tup);
  const rx_attr *at = rx_attr_int(I->m, "axis", 0);
  EXA(RX_OP_concat, t, &at, 1, t);
  EX2(RX_OP_multiply, t, p->scales, t);
  EX1(RX_OP_floor, t, t);
  at = rx_attr_dtype(I->m, "dtype", RX_DTYPE_I64);
  EXA(RX_OP_cast, t, &at, 1, t);
  val dims = {.kind = V_TENSOR, .var = r};
  RX_RETURN_IF_ERROR(onnx_runtime_sym(I, n, &dims));
  memcpy(out, dims.s, sizeof *out * (size_t)xs->ndim);
  return NULL;
}

/* Is input i absent: not given, or an empty constant or tensor (opset 11's empty roi and
 * scales)? */
static bool absent_input(imp *I, const Onnx__NodeProto *n, size_t i) {
  val *v = onnx_input(n, i) ? onnx_get(I, onnx_input(n, i)) : NULL;
  if (!v) return true;
  if (v->kind == V_SYM) return v->slen == 0;
  const rx_sinfo *si = onnx_tsinfo(v);
  return si && si->ndim == 1 && si->shape && rx_expr_is_const(si->shape[0], 0);
}

/* Resize (opset 11+: X, roi, scales, sizes) and Upsample (opset 9: X, scales): the output
 * dims are sizes (constants or values bound at run time), floor(in * scale) of constant scales
 * (an initializer or Constant: symbolic dims, scaled_dim), or else computed at run time from the
 * scales tensor (and bound then); each axis whose size may change is resized in turn (the modes
 * are separable, as ONNX defines them). */
rx_status onnx_do_resize(imp *I, const Onnx__NodeProto *n, const onnx_op *row) {
  (void)row;
  const rx_sinfo *xs;
  RX_RETURN_IF_ERROR(onnx_known_shape(I, n, 0, 1, SYM_MAX, &xs));
  rs_params p = {.rank = xs->ndim};
  RX_RETURN_IF_ERROR(rs_read(I, n, &p));
  bool up = !strcmp(n->op_type, "Upsample");
  size_t si = up ? 1 : 2;
  const rx_expr *out[SYM_MAX];
  if (!up && !absent_input(I, n, 3)) {
    val *v;
    RX_RETURN_IF_ERROR(onnx_sym_input(I, n, 3, &v));
    if (v->slen != xs->ndim) return onnx_node_err(I, n, "sizes must have %d values", xs->ndim);
    memcpy(out, v->s, sizeof *out * (size_t)xs->ndim);
  } else if (!absent_input(I, n, si)) {
    if (p.coord == RS_TF_CROP)
      return onnx_node_err(I, n, "tf_crop_and_resize with scales (not sizes) is not supported");
    val *sv = onnx_get(I, onnx_input(n, si));
    const rx_sinfo *ss = onnx_tsinfo(sv);
    if (!ss || ss->ndim != 1 || !ss->shape || !rx_expr_is_const(ss->shape[0], xs->ndim) ||
        ss->dtype != RX_DTYPE_F32)
      return onnx_node_err(I, n, "scales must be a f32 tensor of %d values", xs->ndim);
    if (sv->nfl == xs->ndim) { /* constant scales: symbolic output dims where they fold */
      p.fscale = sv->fl;
      for (int k = 0; k < xs->ndim && p.fscale; k++)
        if (!(out[k] = scaled_dim(I, xs->shape[k], sv->fl[k]))) p.fscale = NULL;
    }
    if (!p.fscale) {
      RX_RETURN_IF_ERROR(onnx_arg(I, n, onnx_input(n, si), &p.scales));
      RX_RETURN_IF_ERROR(rs_runtime_dims(I, n, &p, xs, out));
    }
  } else {
    return onnx_node_err(I, n, "needs scales or sizes");
  }
  if (p.coord == RS_TF_CROP) {
    if (absent_input(I, n, 1)) return onnx_node_err(I, n, "tf_crop_and_resize needs roi");
    RX_RETURN_IF_ERROR(onnx_arg(I, n, onnx_input(n, 1), &p.roi));
  }
  rx_node *x;
  RX_RETURN_IF_ERROR(onnx_arg(I, n, onnx_input(n, 0), &x));
  rx_var *r = NULL;
  for (int k = 0; k < xs->ndim; k++) {
    bool same = p.fscale ? p.fscale[k] == 1.0f : !p.scales && out[k] == xs->shape[k];
    if (same && p.coord != RS_TF_CROP && p.coord != RS_TF_NN)
      continue; /* scale 1, and a coordinate map that is then the identity */
    RX_RETURN_IF_ERROR(rs_axis(I, n, &p, x, k, xs->shape[k], out[k], &x, &r));
  }
  if (r)
    onnx_def_tensor(I, n, r);
  else /* nothing resized */
    onnx_def_alias(I, n, onnx_get(I, onnx_input(n, 0)));
  return NULL;
}

/* GridSample (4-D): grid_sample; opset 20's "linear" and "cubic" are 16's "bilinear" and
 * "bicubic" */
rx_status onnx_do_grid_sample(imp *I, const Onnx__NodeProto *n, const onnx_op *row) {
  (void)row;
  static const char *const modes[] = {"bilinear", "nearest", "bicubic", "linear", "cubic"};
  static const char *const pads[] = {"zeros", "border", "reflection"};
  static const int canon[] = {0, 1, 2, 0, 2};
  int mode = onnx_attr_choice(n, "mode", modes, 5, 0),
      pad = onnx_attr_choice(n, "padding_mode", pads, 3, 0);
  if (mode < 0 || pad < 0)
    return onnx_node_err(
        I, n,
        "mode must be bilinear, nearest or bicubic and padding_mode zeros, border or reflection");
  const rx_sinfo *xs;
  RX_RETURN_IF_ERROR(onnx_known_shape(I, n, 0, 4, 4, &xs));
  rx_node *a[2];
  for (int k = 0; k < 2; k++) RX_RETURN_IF_ERROR(onnx_arg(I, n, onnx_input(n, (size_t)k), &a[k]));
  const rx_attr *at[3] = {
      rx_attr_str(I->m, "mode", modes[canon[mode]]), rx_attr_str(I->m, "padding_mode", pads[pad]),
      rx_attr_bool(I->m, "align_corners", onnx_attr_i(n, "align_corners", 0) != 0)};
  rx_var *r = NULL;
  RX_RETURN_IF_ERROR(onnx_emit(I, n, RX_OP_grid_sample, a, 2, at, 3, &r));
  onnx_def_tensor(I, n, r);
  return NULL;
}
