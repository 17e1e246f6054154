/* frontends/onnx/import_quant.c: the ONNX quantization operators (QuantizeLinear,
 * DequantizeLinear, DynamicQuantizeLinear, MatMulInteger, ConvInteger, QLinearMatMul,
 * QLinearConv), Pow of mixed dtypes and BitShift, each a composition of relaxc's ops.
 *
 * Integer products are exact: the 8-bit operands less their zero points are i32, and matmul and
 * conv2d accumulate in their operands' dtype (i32), as ONNX's reference does. Rounding is
 * half to even (onnx_do_select_act's Round) and saturates by a clip to the integer type's range
 * before the cast. A composite that needs another ONNX handler (Round, Conv) calls it with a
 * node of the same name and attributes whose inputs are values defined here (q_sub). */
#include "import_int.h"

#include <assert.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

/* a fresh value name, printable in messages, unique among the composites (N counts every
 * value defined); a model's own value named "<composite N>" would be shadowed by it */
static const char *q_fresh(imp *I) {
  char buf[32];
  snprintf(buf, sizeof buf, "<composite %d>", I->nvals);
  return ir_module_intern(I->m, buf, strlen(buf));
}

/* var under a fresh value name */
static const char *q_val(imp *I, rx_var *var) {
  const char *nm = q_fresh(I);
  onnx_def_named(I, nm, var);
  return nm;
}

/* The handler of table row `row` (onnx_find_op) run on a node like n (its name, type and
 * attributes) with the inputs in[0..nin) (NULL: absent) and one output; *out: that output. */
static rx_status q_sub(imp *I, const Onnx__NodeProto *n, const onnx_op *row, const char **in,
                       int nin, rx_var **out) {
  assert(row); /* a type of onnx_ops[] */
  Onnx__NodeProto f = *n;
  char *ins[8] = {0}, *outs[1] = {(char *)q_fresh(I)};
  for (int k = 0; k < nin; k++) ins[k] = (char *)(in[k] ? in[k] : "");
  f.input = ins;
  f.n_input = (size_t)nin;
  f.output = outs;
  f.n_output = 1;
  RX_RETURN_IF_ERROR(row->handler(I, &f, row));
  val *v = onnx_get(I, outs[0]);
  if (!v || v->kind != V_TENSOR) return onnx_node_err(I, n, "internal: a composite has no tensor");
  *out = v->var;
  return NULL;
}

/* op(args[, attrs]) as a variable */
static rx_status q_op(imp *I, const Onnx__NodeProto *n, rx_op_id op, rx_var *x, rx_var *y,
                      const rx_attr *const *at, int nat, rx_var **out) {
  rx_node *a[2] = {rx_arg_var(I->b, x), y ? rx_arg_var(I->b, y) : NULL};
  return onnx_emit(I, n, op, a, y ? 2 : 1, at, nat, out);
}

/* op(x, c) with a float literal c */
static rx_status q_opf(imp *I, const Onnx__NodeProto *n, rx_op_id op, rx_var *x, double c,
                       rx_var **out) {
  rx_node *a[2] = {rx_arg_var(I->b, x), rx_arg_float(I->b, c)};
  return onnx_emit(I, n, op, a, 2, NULL, 0, out);
}

static rx_status q_cast(imp *I, const Onnx__NodeProto *n, rx_var *x, rx_dtype dt, rx_var **out) {
  const rx_sinfo *si = rx_var_sinfo(x);
  if (si->kind == RX_SINFO_TENSOR && si->dtype == dt) {
    *out = x;
    return NULL;
  }
  const rx_attr *at = rx_attr_dtype(I->m, "dtype", dt);
  return q_op(I, n, RX_OP_cast, x, NULL, &at, 1, out);
}

/* input i as a tensor variable (NULL when absent); a constant becomes a tensor */
static rx_status q_in(imp *I, const Onnx__NodeProto *n, size_t i, rx_var **out) {
  *out = NULL;
  if (!onnx_input(n, i)) return NULL;
  val *v = onnx_get(I, onnx_input(n, i));
  if (!v) return onnx_node_err(I, n, "input %zu '%s' is not defined", i, onnx_input(n, i));
  if (v->kind == V_TENSOR) {
    *out = v->var;
    return NULL;
  }
  if (v->kind == V_SYM) return onnx_sym_tensor(I, n, v, out);
  if (v->kind == V_FCONST) {
    const rx_expr *none = NULL;
    rx_node *a[2] = {rx_arg_shape(I->b, &none, 0), rx_arg_float(I->b, v->f)};
    const rx_attr *at = rx_attr_dtype(I->m, "dtype", RX_DTYPE_F32);
    return onnx_emit(I, n, RX_OP_full, a, 2, &at, 1, out);
  }
  return onnx_node_err(I, n, "input %zu '%s' failed to import", i, onnx_input(n, i));
}

/* A 1-D per-axis parameter p [C] of a tensor of rank r as [1, .., C (at axis), .., 1] so that
 * it broadcasts; a scalar (or r < 2) stays. */
static rx_status q_per_axis(imp *I, const Onnx__NodeProto *n, rx_var *p, int r, int64_t axis,
                            rx_var **out) {
  const rx_sinfo *si = rx_var_sinfo(p);
  *out = p;
  if (si->kind != RX_SINFO_TENSOR || si->ndim != 1 || !si->shape || r < 2 || r > SYM_MAX)
    return NULL;
  if (axis < -r || axis >= r)
    return onnx_node_err(I, n, "axis %lld is out of range", (long long)axis);
  if (axis < 0) axis += r;
  const rx_expr *dims[SYM_MAX];
  for (int k = 0; k < r; k++) dims[k] = k == axis ? si->shape[0] : rx_sym_const(I->m, 1);
  rx_node *a;
  return onnx_reshape_to(I, n, rx_arg_var(I->b, p), dims, r, &a, out);
}

/* The integer range of a quantized dtype; false for others. */
static bool q_range(rx_dtype dt, double *lo, double *hi) {
  switch (dt) {
  case RX_DTYPE_U8:
    *lo = 0, *hi = 255;
    return true;
  case RX_DTYPE_I8:
    *lo = -128, *hi = 127;
    return true;
  case RX_DTYPE_U16:
    *lo = 0, *hi = 65535;
    return true;
  case RX_DTYPE_I16:
    *lo = -32768, *hi = 32767;
    return true;
  case RX_DTYPE_I32:
    *lo = -2147483648.0, *hi = 2147483647.0;
    return true;
  default:
    return false;
  }
}

/* round half to even of f32 t, plus zero point zp (a tensor or NULL), saturated to dt's range,
 * as dt */
static rx_status q_saturate(imp *I, const Onnx__NodeProto *n, rx_var *t, rx_var *zp, rx_dtype dt,
                            rx_var **out) {
  double lo, hi;
  if (!q_range(dt, &lo, &hi))
    return onnx_node_err(I, n, "the quantized type must be u8, i8, u16, i16 or i32, got %s",
                         ir_dtype_name(dt));
  const char *in = q_val(I, t);
  RX_RETURN_IF_ERROR(q_sub(I, n, onnx_find_op("Round"), &in, 1, &t));
  if (zp) {
    rx_var *z;
    RX_RETURN_IF_ERROR(q_cast(I, n, zp, RX_DTYPE_F32, &z));
    RX_RETURN_IF_ERROR(q_op(I, n, RX_OP_add, t, z, NULL, 0, &t));
  }
  const rx_attr *at[2] = {rx_attr_float(I->m, "min", lo), rx_attr_float(I->m, "max", hi)};
  RX_RETURN_IF_ERROR(q_op(I, n, RX_OP_clip, t, NULL, at, 2, &t));
  return q_cast(I, n, t, dt, out);
}

static rx_dtype q_dtype(rx_var *v, rx_dtype dflt) {
  const rx_sinfo *si = v ? rx_var_sinfo(v) : NULL;
  return si && si->kind == RX_SINFO_TENSOR ? si->dtype : dflt;
}

/* x, scale, [zero point] of QuantizeLinear and DequantizeLinear, x's rank and the axis */
static rx_status q_linear_inputs(imp *I, const Onnx__NodeProto *n, rx_var **x, rx_var **s,
                                 rx_var **z, int *r, int64_t *axis) {
  RX_RETURN_IF_ERROR(q_in(I, n, 0, x));
  RX_RETURN_IF_ERROR(q_in(I, n, 1, s));
  RX_RETURN_IF_ERROR(q_in(I, n, 2, z));
  if (!*x || !*s) return onnx_node_err(I, n, "expects x and its scale");
  if (onnx_attr_i(n, "block_size", 0)) return onnx_node_err(I, n, "block_size is not supported");
  *r = rx_var_sinfo(*x)->ndim;
  *axis = onnx_attr_i(n, "axis", 1);
  return NULL;
}

/* where(c, a, b) */
static rx_status q_where(imp *I, const Onnx__NodeProto *n, rx_var *c, rx_var *a, rx_var *b,
                         rx_var **out) {
  rx_node *args[3] = {rx_arg_var(I->b, c), rx_arg_var(I->b, a), rx_arg_var(I->b, b)};
  return onnx_emit(I, n, RX_OP_where, args, 3, NULL, 0, out);
}

/* QuantizeLinear(x, y_scale, [y_zero_point]): saturate(round(x / y_scale) + y_zero_point), per
 * tensor or along `axis`; the type of y_zero_point (u8 without one) */
rx_status onnx_do_quantize(imp *I, const Onnx__NodeProto *n, const onnx_op *row) {
  (void)row;
  rx_var *x, *s, *z, *t;
  int r = 0;
  int64_t axis = 0;
  RX_RETURN_IF_ERROR(q_linear_inputs(I, n, &x, &s, &z, &r, &axis));
  RX_RETURN_IF_ERROR(q_cast(I, n, x, RX_DTYPE_F32, &x));
  RX_RETURN_IF_ERROR(q_cast(I, n, s, RX_DTYPE_F32, &s));
  RX_RETURN_IF_ERROR(q_per_axis(I, n, s, r, axis, &s));
  if (z) RX_RETURN_IF_ERROR(q_per_axis(I, n, z, r, axis, &z));
  RX_RETURN_IF_ERROR(q_op(I, n, RX_OP_divide, x, s, NULL, 0, &t));
  RX_RETURN_IF_ERROR(q_saturate(I, n, t, z, q_dtype(z, RX_DTYPE_U8), &t));
  onnx_def_tensor(I, n, t);
  return NULL;
}

/* DequantizeLinear(x, x_scale, [x_zero_point]): (x - x_zero_point) * x_scale, the difference in
 * i32 (exact), per tensor or along `axis`; the scale's type */
rx_status onnx_do_dequantize(imp *I, const Onnx__NodeProto *n, const onnx_op *row) {
  (void)row;
  rx_var *x, *s, *z, *t;
  int r = 0;
  int64_t axis = 0;
  RX_RETURN_IF_ERROR(q_linear_inputs(I, n, &x, &s, &z, &r, &axis));
  rx_dtype ft = q_dtype(s, RX_DTYPE_F32);
  if (!ir_dtype_is_float(ft)) return onnx_node_err(I, n, "x_scale must be a float tensor");
  RX_RETURN_IF_ERROR(q_cast(I, n, x, RX_DTYPE_I32, &t));
  if (z) {
    RX_RETURN_IF_ERROR(q_per_axis(I, n, z, r, axis, &z));
    RX_RETURN_IF_ERROR(q_cast(I, n, z, RX_DTYPE_I32, &z));
    RX_RETURN_IF_ERROR(q_op(I, n, RX_OP_subtract, t, z, NULL, 0, &t));
  }
  RX_RETURN_IF_ERROR(q_per_axis(I, n, s, r, axis, &s));
  RX_RETURN_IF_ERROR(q_cast(I, n, t, ft, &t));
  RX_RETURN_IF_ERROR(q_op(I, n, RX_OP_multiply, t, s, NULL, 0, &t));
  onnx_def_tensor(I, n, t);
  return NULL;
}

/* the max (or min) of every element of x and 0, as a 0-d tensor */
static rx_status q_extreme(imp *I, const Onnx__NodeProto *n, rx_var *x, bool hi, rx_var **out) {
  const rx_attr *at = rx_attr_bool(I->m, "keepdims", false);
  RX_RETURN_IF_ERROR(q_op(I, n, hi ? RX_OP_max : RX_OP_min, x, NULL, &at, 1, out));
  return q_opf(I, n, hi ? RX_OP_maximum : RX_OP_minimum, *out, 0.0, out);
}

/* DynamicQuantizeLinear(x) -> (y, y_scale, y_zero_point): the u8 range over [min(x, 0),
 * max(x, 0)] as ONNX's reference computes it */
rx_status onnx_do_dynamic_quantize(imp *I, const Onnx__NodeProto *n, const onnx_op *row) {
  (void)row;
  rx_var *x, *hi, *lo, *rng, *s, *z, *t, *eq, *one;
  RX_RETURN_IF_ERROR(q_in(I, n, 0, &x));
  if (!x || q_dtype(x, RX_DTYPE_UNKNOWN) != RX_DTYPE_F32)
    return onnx_node_err(I, n, "expects f32 x");
  RX_RETURN_IF_ERROR(q_extreme(I, n, x, true, &hi));
  RX_RETURN_IF_ERROR(q_extreme(I, n, x, false, &lo));
  RX_RETURN_IF_ERROR(q_op(I, n, RX_OP_subtract, hi, lo, NULL, 0, &rng));
  RX_RETURN_IF_ERROR(q_opf(I, n, RX_OP_equal, rng, 0.0, &eq));
  RX_RETURN_IF_ERROR(q_opf(I, n, RX_OP_add, rng, 1.0, &one)); /* 1.0 where rng is 0 */
  RX_RETURN_IF_ERROR(q_where(I, n, eq, one, rng, &rng));
  RX_RETURN_IF_ERROR(q_opf(I, n, RX_OP_divide, rng, 255.0, &s));
  RX_RETURN_IF_ERROR(q_op(I, n, RX_OP_divide, lo, s, NULL, 0, &z));
  RX_RETURN_IF_ERROR(q_opf(I, n, RX_OP_multiply, z, -1.0, &z));
  const rx_attr *at[2] = {rx_attr_float(I->m, "min", 0), rx_attr_float(I->m, "max", 255)};
  RX_RETURN_IF_ERROR(q_op(I, n, RX_OP_clip, z, NULL, at, 2, &z));
  const char *in = q_val(I, z);
  RX_RETURN_IF_ERROR(q_sub(I, n, onnx_find_op("Round"), &in, 1, &z));
  RX_RETURN_IF_ERROR(q_op(I, n, RX_OP_divide, x, s, NULL, 0, &t));
  RX_RETURN_IF_ERROR(q_saturate(I, n, t, z, RX_DTYPE_U8, &t));
  onnx_def_tensor(I, n, t);
  if (n->n_output > 1 && n->output[1] && n->output[1][0]) onnx_def_named(I, n->output[1], s);
  if (n->n_output > 2 && n->output[2] && n->output[2][0]) {
    RX_RETURN_IF_ERROR(q_cast(I, n, z, RX_DTYPE_U8, &z));
    onnx_def_named(I, n->output[2], z);
  }
  return NULL;
}

/* input i as i32 less the zero point input iz (per row: zp_axis -2, per column or channel: -1
 * or 0 as q_per_axis reads it) */
static rx_status q_centered(imp *I, const Onnx__NodeProto *n, size_t i, size_t iz, int64_t zp_axis,
                            rx_var **out) {
  rx_var *x, *z;
  RX_RETURN_IF_ERROR(q_in(I, n, i, &x));
  RX_RETURN_IF_ERROR(q_in(I, n, iz, &z));
  if (!x) return onnx_node_err(I, n, "input %zu is missing", i);
  RX_RETURN_IF_ERROR(q_cast(I, n, x, RX_DTYPE_I32, out));
  if (!z) return NULL;
  RX_RETURN_IF_ERROR(q_per_axis(I, n, z, rx_var_sinfo(x)->ndim, zp_axis, &z));
  RX_RETURN_IF_ERROR(q_cast(I, n, z, RX_DTYPE_I32, &z));
  return q_op(I, n, RX_OP_subtract, *out, z, NULL, 0, out);
}

/* (a - a_zero_point) @ (b - b_zero_point) in i32: inputs a, b at ia, ib, their zero points at
 * iaz, ibz */
static rx_status q_matmul(imp *I, const Onnx__NodeProto *n, size_t ia, size_t iaz, size_t ib,
                          size_t ibz, rx_var **out) {
  rx_var *a, *b;
  RX_RETURN_IF_ERROR(q_centered(I, n, ia, iaz, -2, &a));
  RX_RETURN_IF_ERROR(q_centered(I, n, ib, ibz, -1, &b));
  return q_op(I, n, RX_OP_matmul, a, b, NULL, 0, out);
}

/* (x - x_zero_point) conv (w - w_zero_point) [+ bias] in i32, by the Conv handler */
static rx_status q_conv(imp *I, const Onnx__NodeProto *n, size_t ix, size_t ixz, size_t iw,
                        size_t iwz, size_t ibias, rx_var **out) {
  rx_var *x, *w;
  RX_RETURN_IF_ERROR(q_centered(I, n, ix, ixz, 1, &x));
  RX_RETURN_IF_ERROR(q_centered(I, n, iw, iwz, 0, &w));
  const char *in[3] = {q_val(I, x), q_val(I, w), ibias ? onnx_input(n, ibias) : NULL};
  return q_sub(I, n, onnx_find_op("Conv"), in, 3, out);
}

/* acc (i32) * (scale_a * scale_b / y_scale) + y_zero_point, rounded and saturated: the inputs
 * at ia, ib, iy are the scales, iy + 1 the zero point; scale_a, scale_b per row or channel
 * along axes aa, ab of the result */
static rx_status q_requantize(imp *I, const Onnx__NodeProto *n, rx_var *acc, size_t ia, int64_t aa,
                              size_t ib, int64_t ab, size_t iy, rx_var **out) {
  rx_var *sa, *sb, *sy, *zy, *t;
  int r = rx_var_sinfo(acc)->ndim;
  RX_RETURN_IF_ERROR(q_in(I, n, ia, &sa));
  RX_RETURN_IF_ERROR(q_in(I, n, ib, &sb));
  RX_RETURN_IF_ERROR(q_in(I, n, iy, &sy));
  RX_RETURN_IF_ERROR(q_in(I, n, iy + 1, &zy));
  if (!sa || !sb || !sy) return onnx_node_err(I, n, "expects the three scales");
  RX_RETURN_IF_ERROR(q_per_axis(I, n, sa, r, aa, &sa));
  RX_RETURN_IF_ERROR(q_per_axis(I, n, sb, r, ab, &sb));
  RX_RETURN_IF_ERROR(q_op(I, n, RX_OP_multiply, sa, sb, NULL, 0, &t));
  RX_RETURN_IF_ERROR(q_op(I, n, RX_OP_divide, t, sy, NULL, 0, &t));
  RX_RETURN_IF_ERROR(q_cast(I, n, acc, RX_DTYPE_F32, &acc));
  RX_RETURN_IF_ERROR(q_op(I, n, RX_OP_multiply, acc, t, NULL, 0, &t));
  rx_var *a0;
  RX_RETURN_IF_ERROR(q_in(I, n, 0, &a0));
  return q_saturate(I, n, t, zy, q_dtype(zy, q_dtype(a0, RX_DTYPE_U8)), out);
}

/* MatMulInteger(A, B, [a_zp], [b_zp]) and ConvInteger(x, w, [x_zp], [w_zp]) -> i32;
 * QLinearMatMul(a, a_scale, a_zp, b, b_scale, b_zp, y_scale, y_zp) and QLinearConv(x, x_scale,
 * x_zp, w, w_scale, w_zp, y_scale, y_zp, [B]), scales per row / column of a matmul, per output
 * channel of w; row->form: ONNX_FORM_matmul, ONNX_FORM_conv, or qmatmul and qconv for the
 * QLinear forms */
rx_status onnx_do_integer_op(imp *I, const Onnx__NodeProto *n, const onnx_op *row) {
  bool q = row->form == ONNX_FORM_qmatmul || row->form == ONNX_FORM_qconv,
       conv = row->form == ONNX_FORM_conv || row->form == ONNX_FORM_qconv;
  rx_var *r;
  if (conv)
    RX_RETURN_IF_ERROR(q ? q_conv(I, n, 0, 2, 3, 5, 8, &r) : q_conv(I, n, 0, 2, 1, 3, 0, &r));
  else
    RX_RETURN_IF_ERROR(q ? q_matmul(I, n, 0, 2, 3, 5, &r) : q_matmul(I, n, 0, 2, 1, 3, &r));
  if (q) RX_RETURN_IF_ERROR(q_requantize(I, n, r, 1, conv ? 1 : -2, 4, conv ? 1 : -1, 6, &r));
  onnx_def_tensor(I, n, r);
  return NULL;
}

/* ---- Pow of mixed dtypes, BitShift ---- */

/* Pow(x, y): the result has x's dtype. y is cast to it, except a float y of an integer x: then
 * x^y in y's dtype, truncated back to x's (as NumPy's power(x, y).astype(x.dtype)). Integer
 * powers are exact (power's legalization). */
rx_status onnx_do_pow(imp *I, const Onnx__NodeProto *n, const onnx_op *row) {
  val *x = onnx_input(n, 0) ? onnx_get(I, onnx_input(n, 0)) : NULL,
      *y = onnx_input(n, 1) ? onnx_get(I, onnx_input(n, 1)) : NULL;
  const rx_sinfo *xs = onnx_tsinfo(x), *ys = onnx_tsinfo(y);
  if (!xs || !ys || xs->kind != RX_SINFO_TENSOR || ys->kind != RX_SINFO_TENSOR ||
      xs->dtype == ys->dtype)
    return onnx_do_binary(I, n, row);
  rx_var *a = x->var, *b = y->var, *r;
  bool back = !ir_dtype_is_float(xs->dtype) && ir_dtype_is_float(ys->dtype);
  if (back)
    RX_RETURN_IF_ERROR(q_cast(I, n, a, ys->dtype, &a));
  else
    RX_RETURN_IF_ERROR(q_cast(I, n, b, xs->dtype, &b));
  RX_RETURN_IF_ERROR(q_op(I, n, row->op, a, b, NULL, 0, &r));
  if (back) RX_RETURN_IF_ERROR(q_cast(I, n, r, xs->dtype, &r));
  onnx_def_tensor(I, n, r);
  return NULL;
}

/* BitShift(x, y) of unsigned integers: x * 2^y (LEFT, wrapping) or x // 2^y (RIGHT); a shift by
 * the width or more gives 0 */
rx_status onnx_do_bitshift(imp *I, const Onnx__NodeProto *n, const onnx_op *row) {
  (void)row;
  rx_var *x, *y, *p, *r, *big, *zero;
  RX_RETURN_IF_ERROR(q_in(I, n, 0, &x));
  RX_RETURN_IF_ERROR(q_in(I, n, 1, &y));
  if (!x || !y) return onnx_node_err(I, n, "expects X and Y");
  rx_dtype dt = q_dtype(x, RX_DTYPE_UNKNOWN);
  if (dt != q_dtype(y, RX_DTYPE_UNKNOWN) ||
      (dt != RX_DTYPE_U8 && dt != RX_DTYPE_U16 && dt != RX_DTYPE_U32 && dt != RX_DTYPE_U64))
    return onnx_node_err(I, n, "expects X and Y of one unsigned integer type (u8, u16, u32, u64)");
  bool left = onnx_attr_s_is(n, "direction", "LEFT");
  if (!left && !onnx_attr_s_is(n, "direction", "RIGHT"))
    return onnx_node_err(I, n, "direction must be \"LEFT\" or \"RIGHT\"");
  double bits = ir_dtype_bits(dt);
  RX_RETURN_IF_ERROR(q_opf(I, n, RX_OP_minimum, y, bits - 1, &p));
  rx_node *a[2] = {rx_arg_float(I->b, 2.0), rx_arg_var(I->b, p)};
  RX_RETURN_IF_ERROR(onnx_emit(I, n, RX_OP_power, a, 2, NULL, 0, &p));
  RX_RETURN_IF_ERROR(q_op(I, n, left ? RX_OP_multiply : RX_OP_divide, x, p, NULL, 0, &r));
  RX_RETURN_IF_ERROR(q_opf(I, n, RX_OP_greater_equal, y, bits, &big));
  RX_RETURN_IF_ERROR(q_opf(I, n, RX_OP_multiply, x, 0.0, &zero));
  RX_RETURN_IF_ERROR(q_where(I, n, big, zero, r, &r));
  onnx_def_tensor(I, n, r);
  return NULL;
}
