/* Elementwise ops: unary, binary with NumPy broadcasting, comparisons, logic, where, cast: their
 * shape deduction, then their legalization (one loop nest over the output, ops.def's formula or
 * the generator's own value per element).
 *
 * Broadcasting of symbolic dims is decided by proof only: dims a and b give a when a == b is
 * proven, the other one when one of them is provably 1, an error naming both shapes when they
 * provably differ (and neither can be 1), and an error suggesting match_cast when nothing can
 * be proven (`add(x: f32[n], y: f32[m])`): the result shape would depend on run-time values. */
#include "deduce.h"
#include "legalize_int.h"

#include "../shapes/expr_build.h"

#include <math.h>
#include <string.h>

/* ---- dtypes ---- */

static bool is_bool_or_any(rx_dtype t) { return t == RX_DTYPE_BOOL || t == RX_DTYPE_UNKNOWN; }

/* The common dtype of two operands; weak literals adopt the other operand's dtype. */
static bool common_dtype(rx_deduce_ctx *dc, const rx_node *call, int ia, const rx_sinfo *a, int ib,
                         const rx_sinfo *b, rx_dtype *out) {
  bool wa = ops_is_weak(call, ia), wb = ops_is_weak(call, ib);
  if (wa && wb) {
    *out = ir_dtype_is_float(a->dtype) ? a->dtype : b->dtype;
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
  ops_deduce_error(dc, "%s expects operands of the same dtype, got %s and %s", call->op->name,
                   ops_str(dc, a), ops_str(dc, b));
  return false;
}

/* ---- broadcasting ---- */

/* One dim of the broadcast; NULL after reporting. */
static const rx_expr *bcast_dim(rx_deduce_ctx *dc, const rx_node *call, const rx_sinfo *a,
                                const rx_sinfo *b, const rx_expr *x, const rx_expr *y) {
  rx_tribool eq = ops_dim_eq(dc, x, y);
  if (eq == RX_TRUE) return x;
  const rx_expr *one = sym_expr_const(ops_ctx(dc), 1);
  rx_tribool x1 = ops_dim_eq(dc, x, one), y1 = ops_dim_eq(dc, y, one);
  if (x1 == RX_TRUE) return y;
  if (y1 == RX_TRUE) return x;
  if (eq == RX_FALSE && x1 == RX_FALSE && y1 == RX_FALSE) {
    ops_deduce_error(dc, "%s cannot broadcast %s and %s: dims %s and %s differ", call->op->name,
                     ops_str(dc, a), ops_str(dc, b), ops_expr_str(dc, x), ops_expr_str(dc, y));
  } else {
    ops_deduce_error(dc,
                     "%s cannot broadcast %s and %s: dims %s and %s are not provably equal and "
                     "neither is provably 1; use match_cast to give the operands a common shape",
                     call->op->name, ops_str(dc, a), ops_str(dc, b), ops_expr_str(dc, x),
                     ops_expr_str(dc, y));
  }
  return NULL;
}

/* The broadcast of two tensors' shapes as a tensor of dtype; NULL after reporting. */
static const rx_sinfo *bcast(rx_deduce_ctx *dc, const rx_node *call, const rx_sinfo *a,
                             const rx_sinfo *b, rx_dtype dtype) {
  if (a->ndim < 0 || b->ndim < 0) return ops_tensor(dc, dtype, -1, NULL);
  int n = a->ndim > b->ndim ? a->ndim : b->ndim;
  if (!a->shape || !b->shape) return ops_tensor(dc, dtype, n, NULL);
  const rx_expr **dims = ops_dims(dc, n);
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
  return ops_tensor(dc, dtype, n, dims);
}

/* ---- unary ---- */

static const rx_sinfo *same_shape(rx_deduce_ctx *dc, const rx_sinfo *t, rx_dtype dtype) {
  return ops_tensor(dc, dtype, t->ndim, t->shape);
}

const rx_sinfo *ops_deduce_unary(rx_deduce_ctx *dc, const rx_node *call) {
  const rx_sinfo *t = ops_tensor_arg(dc, call, 0, "x");
  if (!t) return NULL;
  if (t->dtype == RX_DTYPE_BOOL) {
    ops_deduce_error(dc, "%s expects a numeric tensor, got %s", call->op->name, ops_str(dc, t));
    return NULL;
  }
  return same_shape(dc, t, t->dtype);
}

const rx_sinfo *ops_deduce_unary_float(rx_deduce_ctx *dc, const rx_node *call) {
  const rx_sinfo *t = ops_tensor_arg(dc, call, 0, "x");
  if (!t || !ops_need_float(dc, t, call->op->name)) return NULL;
  return same_shape(dc, t, t->dtype);
}

const rx_sinfo *ops_deduce_unary_bool(rx_deduce_ctx *dc, const rx_node *call) {
  const rx_sinfo *t = ops_tensor_arg(dc, call, 0, "x");
  if (!t) return NULL;
  if (!is_bool_or_any(t->dtype)) {
    ops_deduce_error(dc, "%s expects a bool tensor, got %s", call->op->name, ops_str(dc, t));
    return NULL;
  }
  return same_shape(dc, t, RX_DTYPE_BOOL);
}

const rx_sinfo *ops_deduce_cast(rx_deduce_ctx *dc, const rx_node *call) {
  const rx_sinfo *t = ops_tensor_arg(dc, call, 0, "x");
  if (!t) return NULL;
  const rx_attr *a = ops_call_attr(call, "dtype");
  if (!a || a->kind != RX_ATTR_DTYPE || a->dtype == RX_DTYPE_UNKNOWN) {
    ops_deduce_error(dc, "cast expects dtype=<f32|f16|bf16|i64|i32|i16|i8|u8|bool>");
    return NULL;
  }
  return same_shape(dc, t, a->dtype);
}

/* ---- binary ---- */

/* kind: 'a' arithmetic (result: the common dtype), 'c' comparison (result bool), 'l' logic
 * (bool operands, result bool). */
static const rx_sinfo *binary(rx_deduce_ctx *dc, const rx_node *call, char kind) {
  const rx_sinfo *a = ops_tensor_arg(dc, call, 0, "a");
  const rx_sinfo *b = a ? ops_tensor_arg(dc, call, 1, "b") : NULL;
  if (!b) return NULL;
  rx_dtype dt;
  if (!common_dtype(dc, call, 0, a, 1, b, &dt)) return NULL;
  if (kind == 'l' && !is_bool_or_any(dt)) {
    ops_deduce_error(dc, "%s expects bool operands, got %s and %s", call->op->name, ops_str(dc, a),
                     ops_str(dc, b));
    return NULL;
  }
  if (kind == 'a' && dt == RX_DTYPE_BOOL) {
    ops_deduce_error(dc, "%s expects numeric operands, got %s and %s", call->op->name,
                     ops_str(dc, a), ops_str(dc, b));
    return NULL;
  }
  return bcast(dc, call, a, b, kind == 'a' ? dt : RX_DTYPE_BOOL);
}

const rx_sinfo *ops_deduce_binary(rx_deduce_ctx *dc, const rx_node *call) {
  return binary(dc, call, 'a');
}
const rx_sinfo *ops_deduce_compare(rx_deduce_ctx *dc, const rx_node *call) {
  return binary(dc, call, 'c');
}
const rx_sinfo *ops_deduce_logical(rx_deduce_ctx *dc, const rx_node *call) {
  return binary(dc, call, 'l');
}

const rx_sinfo *ops_deduce_where(rx_deduce_ctx *dc, const rx_node *call) {
  const rx_sinfo *c = ops_tensor_arg(dc, call, 0, "cond");
  const rx_sinfo *a = c ? ops_tensor_arg(dc, call, 1, "a") : NULL;
  const rx_sinfo *b = a ? ops_tensor_arg(dc, call, 2, "b") : NULL;
  if (!b) return NULL;
  if (!is_bool_or_any(c->dtype)) {
    ops_deduce_error(dc, "where expects a bool condition, got %s", ops_str(dc, c));
    return NULL;
  }
  rx_dtype dt;
  if (!common_dtype(dc, call, 1, a, 2, b, &dt)) return NULL;
  const rx_sinfo *ab = bcast(dc, call, a, b, dt);
  return ab ? bcast(dc, call, c, ab, dt) : NULL;
}

/* ------------------------------------------------------------------------------------------
 * legalization: the generators named in ops.def (the writer they use: ops/legalize.c)
 * ------------------------------------------------------------------------------------------ */

/* ---- elementwise unary ---- */

/* One output element's value from the loaded input xv (of dtype xt; the output's is yt). */
typedef const char *(*unary_value)(lz_ctx *l, const char *xv, rx_dtype xt, rx_dtype yt);

static const char *v_math(lz_ctx *l, const char *xv, rx_dtype xt, rx_dtype yt);
static const char *v_gelu(lz_ctx *l, const char *xv, rx_dtype xt, rx_dtype yt);

/* The loop nest of a unary op: y[i...] = value(x[i...]). */
static void unary(lz_ctx *l, unary_value value) {
  lz_opnd *x = lz_arg(l, 0), *y = &l->outs[0];
  lz_scalars_to(l, x->dtype == RX_DTYPE_UNKNOWN ? y->dtype : x->dtype);
  const char *iv[LZ_MAXR + 1];
  const rx_expr *ie[LZ_MAXR + 1];
  int n = y->ndim;
  lz_nest_vars(l, "i", n, iv);
  for (int d = 0; d < n; d++) ie[d] = y->shape[d];
  if (n == 0) { /* a 0-d y: a loop of one, so that value's lets have a kernel */
    iv[n] = lz_loopvar(l, "u");
    ie[n++] = sx_const(l->cx, 1);
  }
  lz_for_nest(l, iv, ie, n);
  const char *v = value(l, lz_load(l, x, iv), x->dtype, y->dtype);
  lz_line(l, "%s = %s", lz_load(l, y, iv), v);
  lz_close_n(l, n);
}

/* ops.def's formula over the loaded value (neg, abs, not) */
static const char *v_formula(lz_ctx *l, const char *xv, rx_dtype xt, rx_dtype yt) {
  return lz_str(l, lz_formula(l), xv);
}

/* ops.def's formula over the value in f32 (exp, log, ..., silu), rounded back to the dtype */
static const char *v_math(lz_ctx *l, const char *xv, rx_dtype xt, rx_dtype yt) {
  lz_line(l, "let t: %s = %s", ir_dtype_name(lz_mathdt(xt)), lz_up(l, xt, xv));
  return lz_down(l, xt, lz_str(l, lz_formula(l), "t"));
}

static const char *v_cast(lz_ctx *l, const char *xv, rx_dtype xt, rx_dtype yt) {
  return xt == yt ? xv : lz_str(l, "%s(%s)", ir_dtype_name(yt), xv);
}

static const char *v_relu(lz_ctx *l, const char *xv, rx_dtype xt, rx_dtype yt) {
  return lz_str(l, "max(%s, %s)", xv, lz_lit(l, xt, 0));
}

/* Integral bound v (or +-inf) of a clip of integer dtype t as a literal of t: past t's range,
 * t's lowest / highest value (a bound of i32 x of inf is 2147483647, not a literal that i32
 * cannot hold). */
static const char *int_bound(lz_ctx *l, rx_dtype t, double v) {
  bool uns = t == RX_DTYPE_U8 || t == RX_DTYPE_U16 || t == RX_DTYPE_U32 || t == RX_DTYPE_U64;
  int bits = t == RX_DTYPE_BOOL ? 1 : ir_dtype_bits(t);
  double lo = uns || bits == 1 ? 0 : -ldexp(1, bits - 1), hi = ldexp(1, uns ? bits : bits - 1);
  if (bits == 1) hi = 2;
  if (isnan(v) || v <= lo) return lz_lowest(l, t, false);
  if (v >= hi - (bits == 64 ? 0 : 1)) return lz_lowest(l, t, true);
  if (v >= 9223372036854775808.0) /* u64 from 2^63 on: through a wrap */
    return lz_str(l, "u64(%s)", lz_ilit(l, (int64_t)(uint64_t)v));
  return lz_lit(l, t, v);
}

/* min(max(x, lo), hi); on integers the bounds rounded inwards and held to the dtype's range */
static const char *v_clip(lz_ctx *l, const char *xv, rx_dtype xt, rx_dtype yt) {
  const rx_attr *lo = ops_call_attr(l->call, "min"), *hi = ops_call_attr(l->call, "max");
  double a = lo ? lo->f : -INFINITY, b = hi ? hi->f : INFINITY;
  if (!ir_dtype_is_float(xt))
    return lz_str(l, "min(max(%s, %s), %s)", xv, int_bound(l, xt, ceil(a)),
                  int_bound(l, xt, floor(b)));
  return lz_str(l, "min(max(%s, %s), %s)", xv, lz_lit(l, xt, a), lz_lit(l, xt, b));
}

/* the erf form, or the tanh approximation (approximate="tanh") */
static const char *v_gelu(lz_ctx *l, const char *xv, rx_dtype xt, rx_dtype yt) {
  lz_line(l, "let t: %s = %s", ir_dtype_name(lz_mathdt(xt)), lz_up(l, xt, xv));
  const rx_attr *ap = ops_call_attr(l->call, "approximate");
  if (ap && ap->s && !strcmp(ap->s, "tanh"))
    return lz_down(l, xt,
                   "0.5 * t * (1.0 + tanh(0.7978845608028654 * (t + 0.044715 * t * t * t)))");
  return lz_down(l, xt, "0.5 * t * (1.0 + erf(t * 0.70710678118654757))");
}

/* check_nonzero: the value, checked (ir.h, RX_INTRIN_CHECK): a 0 fails with the message */
static const char *v_nonzero(lz_ctx *l, const char *xv, rx_dtype xt, rx_dtype yt) {
  (void)yt;
  const rx_attr *a = ops_call_attr(l->call, "message");
  if (!ir_dtype_is_int(xt) || !a || a->kind != RX_ATTR_STR) {
    lz_fail(l, "check_nonzero expects an integer tensor and a message");
    return "0";
  }
  rx_strbuf msg = {0}, lit = {0};
  if (l->site) l->site_used = true;
  base_strbuf_printf(&msg, "%s: %s", l->site ? l->site : "check_nonzero", a->s);
  base_strbuf_json_string(&lit, msg.data);
  const char *v = lz_fresh(l, "v"),
             *r = lz_str(l, "%s(check(%s != 0, i64(%s), %s))", ir_dtype_name(xt), v, v, lit.data);
  lz_line(l, "let %s: %s = %s", v, ir_dtype_name(xt), xv);
  base_strbuf_free(&msg);
  base_strbuf_free(&lit);
  return r;
}

void lz_gen_unary(lz_ctx *l) { unary(l, v_formula); }

void lz_gen_check_nonzero(lz_ctx *l) { unary(l, v_nonzero); }

void lz_gen_unary_math(lz_ctx *l) { unary(l, v_math); }

void lz_gen_cast(lz_ctx *l) { unary(l, v_cast); }

void lz_gen_relu(lz_ctx *l) { unary(l, v_relu); }

void lz_gen_clip(lz_ctx *l) { unary(l, v_clip); }

void lz_gen_gelu(lz_ctx *l) { unary(l, v_gelu); }

/* ---- elementwise binary and where (broadcast) ---- */

/* a ^ b of floats (math dtype t) as C's pow defines it where the languages' pow does not (GLSL
 * and Metal leave a negative a or a 0 with b <= 0 undefined): a negative a to an integer b
 * takes the sign of that power (odd b: negative), to any other b is NaN, and a ^ 0 is 1. */
static const char *float_power(lz_ctx *l, const char *av, const char *bv, rx_dtype t) {
  const char *a = lz_fresh(l, "pa"), *b = lz_fresh(l, "pb"), *m = lz_fresh(l, "pm");
  const char *tn = ir_dtype_name(t), *zero = lz_lit(l, t, 0);
  lz_line(l, "let %s: %s = %s", a, tn, av);
  lz_line(l, "let %s: %s = %s", b, tn, bv);
  lz_line(l, "let %s: %s = pow(abs(%s), %s)", m, tn, a, b);
  return lz_str(
      l,
      "select(%s == %s, %s, select(%s < %s, select(floor(%s) == %s, select(floor(%s * %s) * "
      "%s == %s, %s, -%s), nan), %s))",
      b, zero, lz_lit(l, t, 1), a, zero, b, b, b, lz_lit(l, t, 0.5), lz_lit(l, t, 2), b, m, m, m);
}

/* a ^ b of integers (dtype t) as the text of the value, exactly (wrapping as the dtype's
 * products do), by repeated squaring over the bits of b; a negative b counts as 0 (a ^ b is 1). */
static const char *int_power(lz_ctx *l, const char *av, const char *bv, rx_dtype t) {
  const char *tn = ir_dtype_name(t), *p = lz_fresh(l, "p"), *k = lz_loopvar(l, "k");
  lz_line(l, "alloc %s: %s[3] local", p, tn); /* the result, the base squared k times, b >> k */
  lz_line(l, "%s[0] = %s", p, lz_lit(l, t, 1));
  lz_line(l, "%s[1] = %s", p, av);
  lz_line(l, "%s[2] = max(%s, %s)", p, bv, lz_lit(l, t, 0));
  lz_line(l, "for %s in 0..%d {", k, ir_dtype_bits(t));
  l->ind++;
  lz_line(l, "if %s[2] %% 2 == 1 {", p);
  lz_line(l, "  %s[0] = %s[0] * %s[1]", p, p, p);
  lz_line(l, "}");
  lz_line(l, "if %s[2] > 1 {", p);
  lz_line(l, "  %s[1] = %s[1] * %s[1]", p, p, p);
  lz_line(l, "}");
  lz_line(l, "%s[2] = %s[2] // 2", p, p);
  lz_close(l);
  return lz_str(l, "%s[0]", p);
}

/* power of operands a, b of dtype t: one element per point of the output (a loop of one for a
 * 0-d output, so that the lets and locals have a kernel) */
static void gen_power(lz_ctx *l, lz_opnd *a, lz_opnd *b, rx_dtype t) {
  lz_opnd *y = &l->outs[0];
  const char *iv[LZ_MAXR + 1];
  const rx_expr *ie[LZ_MAXR + 1];
  int n = y->ndim;
  lz_nest_vars(l, "i", n, iv);
  for (int d = 0; d < n; d++) ie[d] = y->shape[d];
  if (n == 0) {
    iv[n] = lz_loopvar(l, "u");
    ie[n++] = sx_const(l->cx, 1);
  }
  lz_for_nest(l, iv, ie, n);
  const char *av = lz_load_bcast(l, a, iv, y->shape, y->ndim);
  const char *bv = lz_load_bcast(l, b, iv, y->shape, y->ndim);
  const char *v =
      ir_dtype_is_float(t)
          ? lz_down(l, t, float_power(l, lz_up(l, t, av), lz_up(l, t, bv), lz_mathdt(t)))
          : int_power(l, av, bv, t);
  lz_line(l, "%s = %s", lz_load(l, y, iv), v);
  lz_close_n(l, n);
}

void lz_gen_binary(lz_ctx *l) {
  rx_op_id op = l->call->op->id;
  const char *f = lz_formula(l);
  lz_opnd *y = &l->outs[0];
  bool is_where = op == RX_OP_where;
  lz_opnd *a = lz_arg(l, is_where ? 1 : 0), *b = lz_arg(l, is_where ? 2 : 1);
  rx_dtype ct = !a->scalar ? a->dtype : !b->scalar ? b->dtype : is_where ? y->dtype : a->dtype;
  if (ct == RX_DTYPE_UNKNOWN) ct = y->dtype;
  if (is_where) {
    lz_opnd *c = lz_arg(l, 0);
    if (c->scalar) c->text = lz_scalar_as(l, c, RX_DTYPE_BOOL);
    if (a->scalar) a->text = lz_scalar_as(l, a, ct);
    if (b->scalar) b->text = lz_scalar_as(l, b, ct);
  } else {
    lz_scalars_to(l, ct);
  }
  if (op == RX_OP_power || op == RX_OP_pow) {
    gen_power(l, a, b, ct);
    return;
  }
  bool fl = ir_dtype_is_float(ct);
  const char *iv[LZ_MAXR];
  lz_nest_vars(l, "i", y->ndim, iv);
  lz_for_nest(l, iv, y->shape, y->ndim);
  const char *av = lz_load_bcast(l, a, iv, y->shape, y->ndim);
  const char *bv = lz_load_bcast(l, b, iv, y->shape, y->ndim);
  const char *v;
  if (is_where) {
    v = lz_str(l, "select(%s, %s, %s)", lz_load_bcast(l, lz_arg(l, 0), iv, y->shape, y->ndim), av,
               bv);
  } else if (f) { /* ops.def's formula; max and min take the typed operand first */
    bool swap = a->scalar && (op == RX_OP_maximum || op == RX_OP_minimum);
    v = swap ? lz_str(l, f, bv, av) : lz_str(l, f, av, bv);
  } else { /* divide */
    v = lz_str(l, fl ? "%s / %s" : "%s // %s", av, bv);
  }
  lz_line(l, "%s = %s", lz_load(l, y, iv), v);
  lz_close_n(l, y->ndim);
}
