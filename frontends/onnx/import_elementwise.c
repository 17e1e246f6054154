/* frontends/onnx/import_elementwise.c: the ONNX importer's elementwise math (onnx-mlir's Math):
 * the unary and binary ops (on tensors, shape values and float constants), Where, Clip, Cast,
 * CastLike, Mod, the variadic Sum, Mean, Max and Min, the functions ONNX defines by formula
 * (Tan, Sinh, Sign, ...), IsInf, Round and Shrink, and MatMul, Gemm and Det. */
#include "import_int.h"

#include <math.h>
#include <string.h>

rx_status onnx_do_clip(imp *I, const Onnx__NodeProto *n, const onnx_op *row) {
  rx_node *x, *a[2];
  rx_var *r;
  RX_RETURN_IF_ERROR(onnx_arg(I, n, onnx_input(n, 0), &x));
  rx_node *lo = NULL, *hi = NULL;
  bool lo_c = true, hi_c = true;
  double lo_f = 0, hi_f = 0;
  if (I->opset < 11) {
    const Onnx__AttributeProto *m;
    if ((m = onnx_attr(n, "min")) && m->has_f) lo = rx_arg_float(I->b, lo_f = m->f);
    if ((m = onnx_attr(n, "max")) && m->has_f) hi = rx_arg_float(I->b, hi_f = m->f);
  } else {
    for (int k = 1; k <= 2; k++) {
      if (!onnx_input(n, (size_t)k)) continue;
      val *v = onnx_get(I, onnx_input(n, (size_t)k));
      rx_node **dst = k == 1 ? &lo : &hi;
      RX_RETURN_IF_ERROR(onnx_arg(I, n, onnx_input(n, (size_t)k), dst));
      if (v->kind == V_FCONST)
        *(k == 1 ? &lo_f : &hi_f) = v->f;
      else
        *(k == 1 ? &lo_c : &hi_c) = false;
    }
  }
  if (lo && hi && lo_c && hi_c) {
    const rx_attr *at[2] = {rx_attr_float(I->m, "min", lo_f), rx_attr_float(I->m, "max", hi_f)};
    RX_RETURN_IF_ERROR(onnx_emit(I, n, RX_OP_clip, &x, 1, at, 2, &r));
    onnx_def_tensor(I, n, r);
    return NULL;
  }
  rx_node *cur = x;
  r = NULL;
  if (lo) {
    a[0] = cur;
    a[1] = lo;
    RX_RETURN_IF_ERROR(onnx_emit(I, n, RX_OP_maximum, a, 2, NULL, 0, &r));
    cur = rx_arg_var(I->b, r);
  }
  if (hi) {
    a[0] = cur;
    a[1] = hi;
    RX_RETURN_IF_ERROR(onnx_emit(I, n, RX_OP_minimum, a, 2, NULL, 0, &r));
  }
  if (!r) { /* no bounds: the identity */
    onnx_def_alias(I, n, onnx_get(I, onnx_input(n, 0)));
    return NULL;
  }
  onnx_def_tensor(I, n, r);
  return NULL;
}

/* elementwise unary ops; row->op: the relaxc op. Neg, Abs and Not of a shape value stay symbolic.
 */
rx_status onnx_do_unary(imp *I, const Onnx__NodeProto *n, const onnx_op *row) {
  rx_node *a[5] = {0};
  rx_var *r = NULL;
  val *x = onnx_input(n, 0) ? onnx_get(I, onnx_input(n, 0)) : NULL;
  bool neg = row->op == RX_OP_neg, abs_ = row->op == RX_OP_abs, not_ = row->op == RX_OP_not_;
  if (x && x->kind == V_SYM && (neg || abs_ || not_)) {
    val out = *x;
    out.name = n->output[0];
    out.tvar = NULL;
    rx_expr_ctx *c = I->m->ctx;
    for (int k = 0; k < x->slen; k++) {
      const rx_expr *e = x->s[k], *m = rx_sym_sub(I->m, rx_sym_const(I->m, 0), e);
      if (abs_) m = sym_expr_select(c, rx_sym_lt(I->m, e, rx_sym_const(I->m, 0)), m, e);
      if (not_) m = rx_sym_eq(I->m, e, rx_sym_const(I->m, 0));
      out.s[k] = sym_analyzer_simplify(I->an, m);
    }
    *onnx_def(I, n->output[0]) = out;
    return NULL;
  }
  RX_RETURN_IF_ERROR(onnx_arg(I, n, onnx_input(n, 0), &a[0]));
  RX_RETURN_IF_ERROR(onnx_emit(I, n, row->op, a, 1, NULL, 0, &r));
  onnx_def_tensor(I, n, r);
  return NULL;
}

/* Reciprocal: 1 / x */
rx_status onnx_do_reciprocal(imp *I, const Onnx__NodeProto *n, const onnx_op *row) {
  rx_node *a[5] = {0};
  rx_var *r = NULL;
  a[0] = rx_arg_float(I->b, 1.0);
  RX_RETURN_IF_ERROR(onnx_arg(I, n, onnx_input(n, 0), &a[1]));
  RX_RETURN_IF_ERROR(onnx_emit(I, n, RX_OP_divide, a, 2, NULL, 0, &r));
  onnx_def_tensor(I, n, r);
  return NULL;
}

/* elementwise binary ops with broadcasting (row->op: the relaxc op); shape values and float
 * constants are computed at import */
rx_status onnx_do_binary(imp *I, const Onnx__NodeProto *n, const onnx_op *row) {
  const char *op = n->op_type;
  rx_node *a[5] = {0};
  rx_var *r = NULL;
  val *x = onnx_input(n, 0) ? onnx_get(I, onnx_input(n, 0)) : NULL,
      *y = onnx_input(n, 1) ? onnx_get(I, onnx_input(n, 1)) : NULL;
  if (!x || !y) return onnx_node_err(I, n, "an input is not defined");
  if (x->kind == V_SYM && y->kind == V_SYM && onnx_sym_binary(I, op, x->s[0], y->s[0])) {
    /* shape arithmetic, with broadcasting of one-element values */
    int len = x->slen > y->slen ? x->slen : y->slen;
    if ((x->slen != len && x->slen != 1) || (y->slen != len && y->slen != 1))
      return onnx_node_err(I, n, "shape values of lengths %d and %d do not broadcast", x->slen,
                           y->slen);
    val out = {.name = n->output[0],
               .kind = V_SYM,
               .sndim = x->sndim > y->sndim ? x->sndim : y->sndim,
               .slen = len,
               .sdt = onnx_sym_is_logic(op) ? RX_DTYPE_BOOL : x->sdt};
    for (int k = 0; k < len; k++)
      out.s[k] = onnx_sym_binary(I, op, x->s[x->slen == 1 ? 0 : k], y->s[y->slen == 1 ? 0 : k]);
    *onnx_def(I, n->output[0]) = out;
    return NULL;
  }
  if (x->kind == V_FCONST && y->kind == V_FCONST &&
      (!strcmp(op, "Add") || !strcmp(op, "Sub") || !strcmp(op, "Mul") || !strcmp(op, "Div") ||
       !strcmp(op, "Pow"))) {
    val *v = onnx_def(I, n->output[0]);
    v->kind = V_FCONST;
    v->f = onnx_fconst_binary(op, x->f, y->f);
    return NULL;
  }
  RX_RETURN_IF_ERROR(onnx_arg(I, n, onnx_input(n, 0), &a[0]));
  RX_RETURN_IF_ERROR(onnx_arg(I, n, onnx_input(n, 1), &a[1]));
  rx_status es = rx_emit_op(I->b, onnx_op_name(row->op), a, 2, NULL, 0, NULL, &r);
  if (es && onnx_cast_to_common(I, x, y, &a[0], &a[1])) {
    rx_status again = rx_emit_op(I->b, onnx_op_name(row->op), a, 2, NULL, 0, NULL, &r);
    if (!again) {
      rx_status_free(es);
      es = NULL;
    } else {
      rx_status_free(again);
    }
  }
  RX_RETURN_IF_ERROR(onnx_at_node(I, n, es));
  onnx_def_tensor(I, n, r);
  return NULL;
}

/* Where(cond, x, y); of three shape values, a symbolic select per value (with broadcasting of
 * one-value operands), as PyTorch's Expand(x, Where(Equal(shape, -1), ones, shape)) */
rx_status onnx_do_where(imp *I, const Onnx__NodeProto *n, const onnx_op *row) {
  rx_node *a[5] = {0};
  rx_var *r = NULL;
  val *v[3];
  bool all_sym = true;
  for (int k = 0; k < 3; k++) {
    v[k] = onnx_input(n, (size_t)k) ? onnx_get(I, onnx_input(n, (size_t)k)) : NULL;
    all_sym = all_sym && v[k] && v[k]->kind == V_SYM;
  }
  if (all_sym) {
    val out = {.name = n->output[0], .kind = V_SYM, .sdt = v[1]->sdt};
    for (int k = 0; k < 3; k++) {
      if (v[k]->slen > out.slen) out.slen = v[k]->slen;
      if (v[k]->sndim > out.sndim) out.sndim = v[k]->sndim;
    }
    for (int k = 0; k < 3; k++)
      if (v[k]->slen != 1 && v[k]->slen != out.slen)
        return onnx_node_err(I, n, "shape values of lengths %d and %d do not broadcast", out.slen,
                             v[k]->slen);
    for (int j = 0; j < out.slen; j++) {
      const rx_expr *e[3];
      for (int k = 0; k < 3; k++) e[k] = v[k]->s[v[k]->slen == 1 ? 0 : j];
      out.s[j] = sym_analyzer_simplify(I->an, sym_expr_select(I->m->ctx, e[0], e[1], e[2]));
    }
    *onnx_def(I, n->output[0]) = out;
    return NULL;
  }
  for (int k = 0; k < 3; k++) RX_RETURN_IF_ERROR(onnx_arg(I, n, onnx_input(n, (size_t)k), &a[k]));
  RX_RETURN_IF_ERROR(onnx_emit(I, n, RX_OP_where, a, 3, NULL, 0, &r));
  onnx_def_tensor(I, n, r);
  return NULL;
}

/* MatMul: NumPy matmul */
rx_status onnx_do_matmul(imp *I, const Onnx__NodeProto *n, const onnx_op *row) {
  rx_node *a[5] = {0};
  rx_var *r = NULL;
  RX_RETURN_IF_ERROR(onnx_arg(I, n, onnx_input(n, 0), &a[0]));
  RX_RETURN_IF_ERROR(onnx_arg(I, n, onnx_input(n, 1), &a[1]));
  RX_RETURN_IF_ERROR(onnx_emit(I, n, RX_OP_matmul, a, 2, NULL, 0, &r));
  onnx_def_tensor(I, n, r);
  return NULL;
}

/* Gemm: alpha * A' B' + beta * C */
rx_status onnx_do_gemm(imp *I, const Onnx__NodeProto *n, const onnx_op *row) {
  rx_node *a[5] = {0};
  rx_var *r = NULL;
  rx_node *A, *B;
  RX_RETURN_IF_ERROR(onnx_arg(I, n, onnx_input(n, 0), &A));
  RX_RETURN_IF_ERROR(onnx_arg(I, n, onnx_input(n, 1), &B));
  if (onnx_attr_i(n, "transA", 0)) {
    RX_RETURN_IF_ERROR(onnx_emit(I, n, RX_OP_permute, &A, 1, NULL, 0, &r));
    A = rx_arg_var(I->b, r);
  }
  if (onnx_attr_i(n, "transB", 0)) {
    RX_RETURN_IF_ERROR(onnx_emit(I, n, RX_OP_permute, &B, 1, NULL, 0, &r));
    B = rx_arg_var(I->b, r);
  }
  a[0] = A;
  a[1] = B;
  RX_RETURN_IF_ERROR(onnx_emit(I, n, RX_OP_matmul, a, 2, NULL, 0, &r));
  double alpha = onnx_attr_f(n, "alpha", 1.0), beta = onnx_attr_f(n, "beta", 1.0);
  if (alpha != 1.0) {
    a[0] = rx_arg_var(I->b, r);
    a[1] = rx_arg_float(I->b, alpha);
    RX_RETURN_IF_ERROR(onnx_emit(I, n, RX_OP_multiply, a, 2, NULL, 0, &r));
  }
  if (onnx_input(n, 2) && beta != 0.0) {
    rx_node *C;
    RX_RETURN_IF_ERROR(onnx_arg(I, n, onnx_input(n, 2), &C));
    if (beta != 1.0) {
      rx_var *c;
      a[0] = C;
      a[1] = rx_arg_float(I->b, beta);
      RX_RETURN_IF_ERROR(onnx_emit(I, n, RX_OP_multiply, a, 2, NULL, 0, &c));
      C = rx_arg_var(I->b, c);
    }
    a[0] = rx_arg_var(I->b, r);
    a[1] = C;
    RX_RETURN_IF_ERROR(onnx_emit(I, n, RX_OP_add, a, 2, NULL, 0, &r));
  }
  onnx_def_tensor(I, n, r);
  return NULL;
}

/* Cast: of symbolic values and float constants at import (a shape value cast to a float type,
 * unless one constant, becomes its tensor and a cast), else cast */
rx_status onnx_do_cast(imp *I, const Onnx__NodeProto *n, const onnx_op *row) {
  rx_node *a[5] = {0};
  const rx_attr *at[4];
  rx_var *r = NULL;
  val *x = onnx_input(n, 0) ? onnx_get(I, onnx_input(n, 0)) : NULL;
  rx_dtype dt;
  if (!x) return onnx_node_err(I, n, "input is not defined");
  if (!onnx_dtype_of((int32_t)onnx_attr_i(n, "to", 0), &dt))
    return onnx_node_err(I, n, "unsupported target type %lld", (long long)onnx_attr_i(n, "to", 0));
  bool fl = ir_dtype_is_float(dt);
  if (x->kind == V_FCONST || (x->kind == V_SYM && !fl) ||
      (x->kind == V_SYM && x->slen == 1 && x->s[0]->kind == RX_EXPR_CONST)) {
    val out = *x;
    out.name = n->output[0];
    out.sdt = dt;
    out.tvar = NULL;
    if (x->kind == V_SYM && fl) { /* one integer constant as a float */
      out.kind = V_FCONST;
      out.f = (double)x->s[0]->value;
    } else if (x->kind == V_FCONST && !fl) { /* a float constant as an integer (truncated) */
      out.kind = V_SYM;
      out.slen = 1;
      out.s[0] = rx_sym_const(I->m, dt == RX_DTYPE_BOOL ? x->f != 0 : (int64_t)x->f);
    } else if (dt == RX_DTYPE_BOOL) {
      for (int k = 0; k < out.slen; k++)
        out.s[k] = sym_analyzer_simplify(
            I->an, sym_expr_cmp(I->m->ctx, RX_EXPR_NE, x->s[k], rx_sym_const(I->m, 0)));
    }
    *onnx_def(I, n->output[0]) = out;
    return NULL;
  }
  if (x->kind == V_SYM) {
    RX_RETURN_IF_ERROR(onnx_sym_tensor(I, n, x, &r));
    a[0] = rx_arg_var(I->b, r);
  } else {
    RX_RETURN_IF_ERROR(onnx_arg(I, n, onnx_input(n, 0), &a[0]));
  }
  at[0] = rx_attr_dtype(I->m, "dtype", dt);
  RX_RETURN_IF_ERROR(onnx_emit(I, n, RX_OP_cast, a, 1, at, 1, &r));
  onnx_def_tensor(I, n, r);
  return NULL;
}

/* Tan, Sinh, Cosh, Asinh, Acosh, Atanh and Sign by their formulas over relaxc's ops (float
 * math: Sinh and Cosh overflow where exp(|x|) does; Asinh uses its odd symmetry so that large
 * negative x keeps its digits). Sign: x * 0 plus or minus 1 by the sign of x, so that NaN stays
 * NaN and integers stay integers. */
rx_status onnx_do_formula(imp *I, const Onnx__NodeProto *n, const onnx_op *row) {
  rx_node *x, *t, *u, *z;
  rx_var *r = NULL;
  RX_RETURN_IF_ERROR(onnx_arg(I, n, onnx_input(n, 0), &x));
  if (row->form == ONNX_FORM_sign) {
    const rx_sinfo *si = onnx_tsinfo(onnx_get(I, onnx_input(n, 0)));
    bool fl = !si || ir_dtype_is_float(si->dtype);
    rx_node *zero = fl ? FL(0.0) : rx_arg_int(I->b, 0), *one = fl ? FL(1.0) : rx_arg_int(I->b, 1);
    EX2(RX_OP_multiply, x, zero, z);
    EX2(RX_OP_add, z, one, t);
    EX2(RX_OP_subtract, z, one, u);
    rx_node *lt, *gt;
    EX2(RX_OP_less, x, zero, lt);
    EX2(RX_OP_greater, x, zero, gt);
    EX3(RX_OP_where, lt, u, z, u);
    EX3(RX_OP_where, gt, t, u, t);
  } else if (row->form == ONNX_FORM_tan) { /* sin(x) / cos(x) */
    EX1(RX_OP_sin, x, t);
    EX1(RX_OP_cos, x, u);
    EX2(RX_OP_divide, t, u, t);
  } else if (row->form == ONNX_FORM_sinh || row->form == ONNX_FORM_cosh) { /* (e^x -+ e^-x) / 2 */
    EX1(RX_OP_exp, x, t);
    EX1(RX_OP_neg, x, u);
    EX1(RX_OP_exp, u, u);
    EX2(row->form == ONNX_FORM_sinh ? RX_OP_subtract : RX_OP_add, t, u, t);
    EX2(RX_OP_multiply, t, FL(0.5), t);
  } else if (row->form == ONNX_FORM_asinh) { /* sign(x) log(|x| + sqrt(x^2 + 1)) */
    EX1(RX_OP_abs, x, u);
    EX2(RX_OP_multiply, x, x, t);
    EX2(RX_OP_add, t, FL(1.0), t);
    EX1(RX_OP_sqrt, t, t);
    EX2(RX_OP_add, u, t, t);
    EX1(RX_OP_log, t, t);
    EX2(RX_OP_less, x, FL(0.0), u);
    EX1(RX_OP_neg, t, z);
    EX3(RX_OP_where, u, z, t, t);
  } else if (row->form == ONNX_FORM_acosh) { /* log(x + sqrt(x^2 - 1)) */
    EX2(RX_OP_multiply, x, x, t);
    EX2(RX_OP_subtract, t, FL(1.0), t);
    EX1(RX_OP_sqrt, t, t);
    EX2(RX_OP_add, x, t, t);
    EX1(RX_OP_log, t, t);
  } else if (row->form == ONNX_FORM_atanh) { /* log((1 + x) / (1 - x)) / 2 */
    EX2(RX_OP_add, x, FL(1.0), t);
    EX2(RX_OP_subtract, FL(1.0), x, u);
    EX2(RX_OP_divide, t, u, t);
    EX1(RX_OP_log, t, t);
    EX2(RX_OP_multiply, t, FL(0.5), t);
  } else {
    return onnx_node_err(I, n, "internal: no formula '%s'", onnx_form_name(row->form));
  }
  onnx_def_tensor(I, n, r);
  return NULL;
}

/* Mod. fmod=0 (integers only, as ONNX says): a - (a // b) b with relaxc's flooring integer
 * divide, so the result has the sign of the divisor. fmod=1: the sign of the dividend, as C's
 * fmod and %: floats a - trunc(a / b) b (trunc: ceil below 0, floor above); integers the floored
 * remainder minus b where it is not 0 and its sign differs from a's. */
rx_status onnx_do_mod(imp *I, const Onnx__NodeProto *n, const onnx_op *row) {
  rx_node *a, *b, *t, *q, *c, *u;
  rx_var *r = NULL;
  RX_RETURN_IF_ERROR(onnx_arg(I, n, onnx_input(n, 0), &a));
  RX_RETURN_IF_ERROR(onnx_arg(I, n, onnx_input(n, 1), &b));
  const rx_sinfo *si = onnx_tsinfo(onnx_get(I, onnx_input(n, 0)));
  bool fl = si && ir_dtype_is_float(si->dtype), fm = onnx_attr_i(n, "fmod", 0) != 0;
  if (fl && !fm)
    return onnx_node_err(I, n, "fmod=0 on floating-point inputs (ONNX requires fmod=1 for them)");
  EX2(RX_OP_divide, a, b, q);
  if (fl) {
    EX1(RX_OP_floor, q, t);
    EX1(RX_OP_ceil, q, c);
    EX2(RX_OP_less, q, FL(0.0), u);
    EX3(RX_OP_where, u, c, t, q);
  }
  EX2(RX_OP_multiply, q, b, t);
  EX2(RX_OP_subtract, a, t, t);
  if (!fl && fm) {
    rx_node *zero = rx_arg_int(I->b, 0);
    EX2(RX_OP_less, t, zero, u);
    EX2(RX_OP_less, a, zero, c);
    EX2(RX_OP_not_equal, u, c, u);
    EX2(RX_OP_not_equal, t, zero, c);
    EX2(RX_OP_logical_and, u, c, u);
    EX2(RX_OP_subtract, t, b, c);
    EX3(RX_OP_where, u, c, t, t);
  }
  onnx_def_tensor(I, n, r);
  return NULL;
}

/* Sum, Mean, Max and Min of one or more inputs (broadcast): a chain of row->op. */
rx_status onnx_do_variadic(imp *I, const Onnx__NodeProto *n, const onnx_op *row) {
  rx_node *acc = NULL, *x;
  rx_var *r = NULL;
  size_t count = 0;
  if (n->n_input == 2 && row->op != RX_OP_mean && row->op != RX_OP_add)
    return onnx_do_binary(I, n, row); /* Max, Min of two: shape values too */
  for (size_t i = 0; i < n->n_input; i++) {
    if (!onnx_input(n, i)) continue;
    if (count++ == 0) {
      val *v = onnx_get(I, onnx_input(n, i));
      if (v && n->n_input == 1) { /* one input: that value */
        onnx_def_alias(I, n, v);
        return NULL;
      }
      RX_RETURN_IF_ERROR(onnx_arg(I, n, onnx_input(n, i), &acc));
      continue;
    }
    RX_RETURN_IF_ERROR(onnx_arg(I, n, onnx_input(n, i), &x));
    EX2(row->op == RX_OP_mean ? RX_OP_add : row->op, acc, x, acc);
  }
  if (count == 0) return onnx_node_err(I, n, "needs at least one input");
  if (row->op == RX_OP_mean) EX2(RX_OP_divide, acc, FL((double)count), acc);
  onnx_def_tensor(I, n, r);
  return NULL;
}

/* CastLike: Cast to the dtype of input 1. */
rx_status onnx_do_cast_like(imp *I, const Onnx__NodeProto *n, const onnx_op *row) {
  (void)row;
  const rx_sinfo *like = onnx_tsinfo(onnx_input(n, 1) ? onnx_get(I, onnx_input(n, 1)) : NULL);
  rx_node *x;
  rx_var *r = NULL;
  if (!like) return onnx_node_err(I, n, "input 1 (the dtype to cast to) is not a tensor");
  RX_RETURN_IF_ERROR(onnx_arg(I, n, onnx_input(n, 0), &x));
  const rx_attr *at[1] = {rx_attr_dtype(I->m, "dtype", like->dtype)};
  RX_RETURN_IF_ERROR(onnx_emit(I, n, RX_OP_cast, &x, 1, at, 1, &r));
  onnx_def_tensor(I, n, r);
  return NULL;
}

/* Det: det (a constant matrix size of at most 16) */
rx_status onnx_do_det(imp *I, const Onnx__NodeProto *n, const onnx_op *row) {
  (void)row;
  rx_node *x;
  rx_var *r = NULL;
  RX_RETURN_IF_ERROR(onnx_arg(I, n, onnx_input(n, 0), &x));
  RX_RETURN_IF_ERROR(onnx_emit(I, n, RX_OP_det, &x, 1, NULL, 0, &r));
  onnx_def_tensor(I, n, r);
  return NULL;
}

/* IsInf (|x| beyond the largest finite f32, or x beyond it on the detected side), Round (half
 * to even: floor(x), plus 1 where the fraction is over a half, or a half and floor(x) odd) and
 * Shrink (x + bias below -lambd, x - bias above lambd, else 0): comparisons and where. */
rx_status onnx_do_select_act(imp *I, const Onnx__NodeProto *n, const onnx_op *row) {
  const rx_sinfo *si = onnx_tsinfo(onnx_input(n, 0) ? onnx_get(I, onnx_input(n, 0)) : NULL);
  if (!si) return onnx_node_err(I, n, "the input is not a tensor");
  rx_node *x = rx_arg_var(I->b, onnx_get(I, onnx_input(n, 0))->var), *t, *u, *z;
  rx_var *r = NULL;
  if (row->form == ONNX_FORM_is_inf) {
    rx_dtype dt = si->dtype; /* the largest finite value of dt */
    double big = dt == RX_DTYPE_F16    ? 65504.0
                 : dt == RX_DTYPE_BF16 ? 3.3895313892515355e38
                                       : 3.4028234663852886e38;
    bool pos = onnx_attr_i(n, "detect_positive", 1) != 0,
         neg = onnx_attr_i(n, "detect_negative", 1) != 0;
    if (pos && neg) {
      EX1(RX_OP_abs, x, t);
      EX2(RX_OP_greater, t, FL(big), t);
    } else if (pos) {
      EX2(RX_OP_greater, x, FL(big), t);
    } else if (neg) {
      EX2(RX_OP_less, x, FL(-big), t);
    } else { /* neither: false everywhere */
      EX2(RX_OP_not_equal, x, x, t);
      EX2(RX_OP_equal, x, x, u);
      EX2(RX_OP_logical_and, t, u, t);
    }
  } else if (row->form == ONNX_FORM_round) {
    EX1(RX_OP_floor, x, z);
    EX2(RX_OP_subtract, x, z, t); /* the fraction */
    EX2(RX_OP_multiply, z, FL(0.5), u);
    EX1(RX_OP_floor, u, u);
    EX2(RX_OP_multiply, u, FL(2.0), u);
    EX2(RX_OP_not_equal, u, z, u); /* floor(x) odd */
    rx_node *half;
    EX2(RX_OP_equal, t, FL(0.5), half);
    EX2(RX_OP_logical_and, half, u, u);
    EX2(RX_OP_greater, t, FL(0.5), t);
    EX2(RX_OP_logical_or, t, u, u);
    EX2(RX_OP_add, z, FL(1.0), t);
    EX3(RX_OP_where, u, t, z, t);
  } else if (row->form == ONNX_FORM_shrink) {
    double lambd = onnx_attr_f(n, "lambd", 0.5), bias = onnx_attr_f(n, "bias", 0.0);
    EX2(RX_OP_multiply, x, FL(0.0), z);
    EX2(RX_OP_subtract, x, FL(bias), t);
    EX2(RX_OP_greater, x, FL(lambd), u);
    EX3(RX_OP_where, u, t, z, z);
    EX2(RX_OP_add, x, FL(bias), t);
    EX2(RX_OP_less, x, FL(-lambd), u);
    EX3(RX_OP_where, u, t, z, t);
  } else {
    return onnx_node_err(I, n, "internal: no activation '%s'", onnx_form_name(row->form));
  }
  onnx_def_tensor(I, n, r);
  return NULL;
}
