/* frontends/onnx/import_reduce.c: the ONNX importer's activations and reductions: Softmax,
 * LogSoftmax, Gelu, Elu, Selu, the activations ONNX defines by formula (Celu, HardSigmoid,
 * Softplus, Mish, ...), LeakyRelu, PRelu, Hardmax, CumSum, ArgMax, ArgMin and the Reduce ops of
 * constant axes (import_rt.c: of axes given at run time), each composed of relaxc's ops. */
#include "import_int.h"

#include <math.h>
#include <string.h>

/* Softmax and LogSoftmax along an axis */
rx_status onnx_do_softmax(imp *I, const Onnx__NodeProto *n, const onnx_op *row) {
  const char *op = n->op_type;
  rx_node *a[5] = {0};
  const rx_attr *at[4];
  rx_var *r = NULL;
  int64_t axis = onnx_attr_i(n, "axis", I->opset >= 13 ? -1 : 1);
  int rank = onnx_rank_of(onnx_input(n, 0) ? onnx_get(I, onnx_input(n, 0)) : NULL);
  if (I->opset < 13 && rank >= 0 && axis != -1 && axis != rank - 1)
    return onnx_node_err(I, n, "opset < 13 Softmax over axis %lld (flattening) is not supported",
                         (long long)axis);
  RX_RETURN_IF_ERROR(onnx_arg(I, n, onnx_input(n, 0), &a[0]));
  at[0] = rx_attr_int(I->m, "axis", axis);
  RX_RETURN_IF_ERROR(
      onnx_emit(I, n, op[0] == 'S' ? RX_OP_softmax : RX_OP_log_softmax, a, 1, at, 1, &r));
  onnx_def_tensor(I, n, r);
  return NULL;
}

/* Gelu (opset 20): approximate "none" or "tanh" */
rx_status onnx_do_gelu(imp *I, const Onnx__NodeProto *n, const onnx_op *row) {
  rx_node *a[5] = {0};
  const rx_attr *at[4];
  rx_var *r = NULL;
  RX_RETURN_IF_ERROR(onnx_arg(I, n, onnx_input(n, 0), &a[0]));
  const Onnx__AttributeProto *ap = onnx_attr(n, "approximate");
  bool tanh_ = ap && ap->has_s && ap->s.len == 4 && !memcmp(ap->s.data, "tanh", 4);
  at[0] = rx_attr_str(I->m, "approximate", tanh_ ? "tanh" : "none");
  RX_RETURN_IF_ERROR(onnx_emit(I, n, RX_OP_gelu, a, 1, at, 1, &r));
  onnx_def_tensor(I, n, r);
  return NULL;
}

/* ReduceMean, ReduceSum, ReduceMax, ReduceMin (axes as attribute or input); row->op: the
 * relaxc reduction */
rx_status onnx_do_reduce(imp *I, const Onnx__NodeProto *n, const onnx_op *row) {
  rx_node *a[5] = {0};
  const rx_attr *at[4];
  rx_var *r = NULL;
  int64_t axes[SYM_MAX];
  int na;
  RX_RETURN_IF_ERROR(onnx_int_list(I, n, 1, "axes", axes, &na));
  RX_RETURN_IF_ERROR(onnx_arg(I, n, onnx_input(n, 0), &a[0]));
  int nat = 0;
  if (na > 0)
    at[nat++] = rx_attr_ints(I->m, "axes", axes, na);
  else if (na == 0 && onnx_attr_i(n, "noop_with_empty_axes", 0)) {
    onnx_def_alias(I, n, onnx_get(I, onnx_input(n, 0)));
    return NULL;
  }
  at[nat++] = rx_attr_bool(I->m, "keepdims", onnx_attr_i(n, "keepdims", 1) != 0);
  RX_RETURN_IF_ERROR(onnx_emit(I, n, row->op, a, 1, at, nat, &r));
  onnx_def_tensor(I, n, r);
  return NULL;
}

/* ArgMax / ArgMin: axis (default 0), keepdims (default 1), select_last_index (opset 12) */
rx_status onnx_do_arg_extreme(imp *I, const Onnx__NodeProto *n, const onnx_op *row) {
  rx_node *a[5] = {0};
  const rx_attr *at[4];
  rx_var *r = NULL;
  RX_RETURN_IF_ERROR(onnx_arg(I, n, onnx_input(n, 0), &a[0]));
  at[0] = rx_attr_int(I->m, "axis", onnx_attr_i(n, "axis", 0));
  at[1] = rx_attr_bool(I->m, "keepdims", onnx_attr_i(n, "keepdims", 1) != 0);
  at[2] = rx_attr_bool(I->m, "select_last_index", onnx_attr_i(n, "select_last_index", 0) != 0);
  RX_RETURN_IF_ERROR(onnx_emit(I, n, row->op, a, 1, at, 3, &r));
  onnx_def_tensor(I, n, r);
  return NULL;
}

/* CumSum: the axis input a constant gives one cumsum; a run-time axis (a graph input) gives the
 * scan along every axis, chosen by where(axis == k || axis == k - rank) (an axis out of range
 * is not detected at run time: it gives the last axis's scan). */
rx_status onnx_do_cumsum(imp *I, const Onnx__NodeProto *n, const onnx_op *row) {
  rx_node *a[5] = {0};
  const rx_attr *at[4];
  rx_var *r = NULL;
  int rank = onnx_rank_of(onnx_input(n, 0) ? onnx_get(I, onnx_input(n, 0)) : NULL);
  val *av = onnx_input(n, 1) ? onnx_get(I, onnx_input(n, 1)) : NULL;
  if (!av) return onnx_node_err(I, n, "the axis input is missing");
  RX_RETURN_IF_ERROR(onnx_arg(I, n, onnx_input(n, 0), &a[0]));
  at[1] = rx_attr_bool(I->m, "exclusive", onnx_attr_i(n, "exclusive", 0) != 0);
  at[2] = rx_attr_bool(I->m, "reverse", onnx_attr_i(n, "reverse", 0) != 0);
  if (av->kind == V_SYM && av->slen == 1 && av->s[0]->kind == RX_EXPR_CONST) {
    at[0] = rx_attr_int(I->m, "axis", av->s[0]->value);
    RX_RETURN_IF_ERROR(onnx_emit(I, n, RX_OP_cumsum, a, 1, at, 3, &r));
    onnx_def_tensor(I, n, r);
    return NULL;
  }
  if (rank < 1) return onnx_node_err(I, n, "a run-time axis needs the input's rank (got none)");
  rx_node *ax;
  RX_RETURN_IF_ERROR(onnx_arg(I, n, onnx_input(n, 1), &ax));
  for (int k = rank - 1; k >= 0; k--) {
    rx_var *c, *e0, *e1, *cond;
    at[0] = rx_attr_int(I->m, "axis", k);
    RX_RETURN_IF_ERROR(onnx_emit(I, n, RX_OP_cumsum, a, 1, at, 3, &c));
    if (!r) {
      r = c;
      continue;
    }
    rx_node *b[3] = {ax, rx_arg_int(I->b, k)};
    RX_RETURN_IF_ERROR(onnx_emit(I, n, RX_OP_equal, b, 2, NULL, 0, &e0));
    b[1] = rx_arg_int(I->b, k - rank);
    RX_RETURN_IF_ERROR(onnx_emit(I, n, RX_OP_equal, b, 2, NULL, 0, &e1));
    b[0] = rx_arg_var(I->b, e0);
    b[1] = rx_arg_var(I->b, e1);
    RX_RETURN_IF_ERROR(onnx_emit(I, n, RX_OP_logical_or, b, 2, NULL, 0, &cond));
    b[0] = rx_arg_var(I->b, cond);
    b[1] = rx_arg_var(I->b, c);
    b[2] = rx_arg_var(I->b, r);
    RX_RETURN_IF_ERROR(onnx_emit(I, n, RX_OP_where, b, 3, NULL, 0, &r));
  }
  onnx_def_tensor(I, n, r);
  return NULL;
}

/* Hardmax: 1 where the index along axis is argmax's (the first of ties), else 0:
 * equal(arange(d) with a unit dim per axis after it, argmax(x, keepdims)) cast to x's dtype.
 * Opsets before 13 coerce the input to 2-D at axis (default 1); only the last-axis form is
 * taken. */
rx_status onnx_do_hardmax(imp *I, const Onnx__NodeProto *n, const onnx_op *row) {
  const rx_sinfo *si = onnx_tsinfo(onnx_input(n, 0) ? onnx_get(I, onnx_input(n, 0)) : NULL);
  if (!si || si->kind != RX_SINFO_TENSOR || !si->shape || si->ndim < 1)
    return onnx_node_err(I, n, "expects an input of known shape and rank >= 1");
  int rank = si->ndim;
  int64_t axis = onnx_attr_i(n, "axis", I->opset >= 13 ? -1 : 1);
  if (axis < -rank || axis >= rank)
    return onnx_node_err(I, n, "axis %lld is out of range for rank %d", (long long)axis, rank);
  if (axis < 0) axis += rank;
  if (I->opset < 13 && axis != rank - 1)
    return onnx_node_err(I, n, "opset < 13 Hardmax over axis %lld (flattening) is not supported",
                         (long long)axis);
  rx_node *a[3];
  const rx_attr *at[2];
  rx_var *idx, *io, *eq, *r;
  RX_RETURN_IF_ERROR(onnx_arg(I, n, onnx_input(n, 0), &a[0]));
  at[0] = rx_attr_int(I->m, "axis", axis);
  at[1] = rx_attr_bool(I->m, "keepdims", true);
  RX_RETURN_IF_ERROR(onnx_emit(I, n, RX_OP_argmax, a, 1, at, 2, &idx));
  a[0] = rx_arg_prim(I->b, RX_DTYPE_I64, rx_sym_const(I->m, 0));
  a[1] = rx_arg_prim(I->b, RX_DTYPE_I64, si->shape[axis]);
  at[0] = rx_attr_dtype(I->m, "dtype", RX_DTYPE_I64);
  RX_RETURN_IF_ERROR(onnx_emit(I, n, RX_OP_arange, a, 2, at, 1, &io));
  if (axis < rank - 1) {
    int64_t axes[SYM_MAX];
    int na = 0;
    for (int64_t k = 1; k < rank - axis && na < SYM_MAX; k++) axes[na++] = k;
    at[0] = rx_attr_ints(I->m, "axes", axes, na);
    a[0] = rx_arg_var(I->b, io);
    RX_RETURN_IF_ERROR(onnx_emit(I, n, RX_OP_expand_dims, a, 1, at, 1, &io));
  }
  a[0] = rx_arg_var(I->b, io);
  a[1] = rx_arg_var(I->b, idx);
  RX_RETURN_IF_ERROR(onnx_emit(I, n, RX_OP_equal, a, 2, NULL, 0, &eq));
  a[0] = rx_arg_var(I->b, eq);
  at[0] = rx_attr_dtype(I->m, "dtype", si->dtype);
  RX_RETURN_IF_ERROR(onnx_emit(I, n, RX_OP_cast, a, 1, at, 1, &r));
  onnx_def_tensor(I, n, r);
  return NULL;
}

/* alpha (exp(x) - 1) for x <= 0, x above (Elu; Selu scales it by gamma) */
rx_status onnx_do_elu(imp *I, const Onnx__NodeProto *n, const onnx_op *row) {
  bool selu = row->form == ONNX_FORM_selu;
  double alpha = onnx_attr_f(n, "alpha", selu ? 1.67326319217681884765625 : 1.0);
  rx_node *x, *t, *pos;
  rx_var *r = NULL;
  RX_RETURN_IF_ERROR(onnx_arg(I, n, onnx_input(n, 0), &x));
  EX1(RX_OP_exp, x, t);
  EX2(RX_OP_subtract, t, FL(1.0), t);
  EX2(RX_OP_multiply, t, FL(alpha), t);
  EX2(RX_OP_greater, x, FL(0.0), pos);
  EX3(RX_OP_where, pos, x, t, t);
  if (selu) EX2(RX_OP_multiply, t, FL(onnx_attr_f(n, "gamma", 1.05070102214813232421875)), t);
  onnx_def_tensor(I, n, r);
  return NULL;
}

/* The element-wise functions of one input that ONNX defines by formula: row->form names which. */
rx_status onnx_do_act(imp *I, const Onnx__NodeProto *n, const onnx_op *row) {
  rx_node *x, *t, *u;
  rx_var *r = NULL;
  RX_RETURN_IF_ERROR(onnx_arg(I, n, onnx_input(n, 0), &x));
  if (row->form == ONNX_FORM_celu) { /* max(0, x) + min(0, alpha (exp(x / alpha) - 1)) */
    double alpha = onnx_attr_f(n, "alpha", 1.0);
    EX2(RX_OP_divide, x, FL(alpha), t);
    EX1(RX_OP_exp, t, t);
    EX2(RX_OP_subtract, t, FL(1.0), t);
    EX2(RX_OP_multiply, t, FL(alpha), t);
    EX2(RX_OP_minimum, t, FL(0.0), t);
    EX2(RX_OP_maximum, x, FL(0.0), u);
    EX2(RX_OP_add, u, t, t);
  } else if (row->form == ONNX_FORM_hard_sigmoid || row->form == ONNX_FORM_hard_swish) {
    bool swish = row->form == ONNX_FORM_hard_swish; /* x hard_sigmoid(x) with alpha 1/6, beta 0.5 */
    EX2(RX_OP_multiply, x, FL(swish ? 1.0 / 6 : onnx_attr_f(n, "alpha", 0.2)), t);
    EX2(RX_OP_add, t, FL(swish ? 0.5 : onnx_attr_f(n, "beta", 0.5)), t);
    EX2(RX_OP_minimum, t, FL(1.0), t);
    EX2(RX_OP_maximum, t, FL(0.0), t);
    if (swish) EX2(RX_OP_multiply, x, t, t);
  } else if (row->form == ONNX_FORM_softplus) { /* log(exp(x) + 1) */
    EX1(RX_OP_exp, x, t);
    EX2(RX_OP_add, t, FL(1.0), t);
    EX1(RX_OP_log, t, t);
  } else if (row->form == ONNX_FORM_softsign) { /* x / (1 + |x|) */
    EX1(RX_OP_abs, x, t);
    EX2(RX_OP_add, t, FL(1.0), t);
    EX2(RX_OP_divide, x, t, t);
  } else if (row->form == ONNX_FORM_thresholded_relu) { /* x where x > alpha, else 0 */
    EX2(RX_OP_greater, x, FL(onnx_attr_f(n, "alpha", 1.0)), u);
    EX2(RX_OP_multiply, x, FL(0.0), t);
    EX3(RX_OP_where, u, x, t, t);
  } else if (row->form == ONNX_FORM_mish) { /* x tanh(log(exp(x) + 1)) */
    EX1(RX_OP_exp, x, t);
    EX2(RX_OP_add, t, FL(1.0), t);
    EX1(RX_OP_log, t, t);
    EX1(RX_OP_tanh, t, t);
    EX2(RX_OP_multiply, x, t, t);
  } else if (row->form == ONNX_FORM_is_nan) { /* NaN is the one value not equal to itself */
    EX2(RX_OP_not_equal, x, x, t);
  } else {
    return onnx_node_err(I, n, "internal: no activation '%s'", onnx_form_name(row->form));
  }
  onnx_def_tensor(I, n, r);
  return NULL;
}

/* ReduceL1, ReduceL2, ReduceSumSquare, ReduceLogSum, ReduceLogSumExp: an element-wise step, the
 * sum (onnx_do_reduce's axes and keepdims), and a step after. */
rx_status onnx_do_reduce_by(imp *I, const Onnx__NodeProto *n, const onnx_op *row) {
  rx_node *x, *t;
  rx_var *r = NULL;
  RX_RETURN_IF_ERROR(onnx_arg(I, n, onnx_input(n, 0), &x));
  if (row->form == ONNX_FORM_l1)
    EX1(RX_OP_abs, x, t);
  else if (row->form == ONNX_FORM_l2 || row->form == ONNX_FORM_sum_square)
    EX2(RX_OP_multiply, x, x, t);
  else if (row->form == ONNX_FORM_log_sum_exp)
    EX1(RX_OP_exp, x, t);
  else
    t = x;
  int64_t axes[SYM_MAX];
  int na;
  RX_RETURN_IF_ERROR(onnx_int_list(I, n, 1, "axes", axes, &na));
  const rx_attr *at[2];
  int nat = 0;
  if (na > 0)
    at[nat++] = rx_attr_ints(I->m, "axes", axes, na);
  else if (na == 0 && onnx_attr_i(n, "noop_with_empty_axes", 0)) /* no reduction */
    return onnx_node_err(I, n, "noop_with_empty_axes with no axes is not supported");
  at[nat++] = rx_attr_bool(I->m, "keepdims", onnx_attr_i(n, "keepdims", 1) != 0);
  RX_RETURN_IF_ERROR(onnx_emit(I, n, RX_OP_sum, &t, 1, at, nat, &r));
  t = rx_arg_var(I->b, r);
  if (row->form == ONNX_FORM_l2) EX1(RX_OP_sqrt, t, t);
  if (row->form == ONNX_FORM_log_sum || row->form == ONNX_FORM_log_sum_exp) EX1(RX_OP_log, t, t);
  onnx_def_tensor(I, n, r);
  return NULL;
}

/* PRelu: where(x < 0, slope x, x), slope broadcast to x */
rx_status onnx_do_prelu(imp *I, const Onnx__NodeProto *n, const onnx_op *row) {
  (void)row;
  rx_node *x, *slope, *neg, *t;
  rx_var *r = NULL;
  RX_RETURN_IF_ERROR(onnx_arg(I, n, onnx_input(n, 0), &x));
  RX_RETURN_IF_ERROR(onnx_arg(I, n, onnx_input(n, 1), &slope));
  EX2(RX_OP_less, x, FL(0.0), neg);
  EX2(RX_OP_multiply, x, slope, t);
  EX3(RX_OP_where, neg, t, x, t);
  onnx_def_tensor(I, n, r);
  return NULL;
}

/* LeakyRelu: where(x >= 0, x, alpha * x) */
rx_status onnx_do_leaky_relu(imp *I, const Onnx__NodeProto *n, const onnx_op *row) {
  rx_node *a[5] = {0};
  rx_var *r = NULL;
  /* where(x >= 0, x, alpha * x) */
  rx_var *ge, *ax;
  RX_RETURN_IF_ERROR(onnx_arg(I, n, onnx_input(n, 0), &a[0]));
  a[1] = rx_arg_float(I->b, 0.0);
  RX_RETURN_IF_ERROR(onnx_emit(I, n, RX_OP_greater_equal, a, 2, NULL, 0, &ge));
  a[1] = rx_arg_float(I->b, onnx_attr_f(n, "alpha", 0.01));
  RX_RETURN_IF_ERROR(onnx_emit(I, n, RX_OP_multiply, a, 2, NULL, 0, &ax));
  rx_node *w[3] = {rx_arg_var(I->b, ge), a[0], rx_arg_var(I->b, ax)};
  RX_RETURN_IF_ERROR(onnx_emit(I, n, RX_OP_where, w, 3, NULL, 0, &r));
  onnx_def_tensor(I, n, r);
  return NULL;
}
