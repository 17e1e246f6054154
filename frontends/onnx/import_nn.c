/* frontends/onnx/import_nn.c: the ONNX importer's neural-network operators (onnx-mlir's NN):
 * Conv, ConvTranspose, the pools (Average, Max, Lp, Global), the normalizations (Batch, Layer,
 * Instance, MeanVariance, LRN), Dropout and the losses (NegativeLogLikelihood,
 * SoftmaxCrossEntropy), each composed of relaxc's ops. */
#include "import_int.h"

#include <math.h>
#include <string.h>

/* Dropout: the input under a new name, and the mask output all true. Training mode (input 2)
 * with a ratio over 0 drops at random, which relaxc does not do: refused at import when both
 * are constants, else checked when the program runs (a match_cast of training_mode && ratio >
 * 0 to 0 fails, naming dropout_training_mode_unsupported). */
rx_status onnx_do_dropout(imp *I, const Onnx__NodeProto *n, const onnx_op *row) {
  val *x = onnx_input(n, 0) ? onnx_get(I, onnx_input(n, 0)) : NULL;
  if (!x) return onnx_node_err(I, n, "input is not defined");
  val *ratio = onnx_input(n, 1) ? onnx_get(I, onnx_input(n, 1)) : NULL,
      *tm = onnx_input(n, 2) ? onnx_get(I, onnx_input(n, 2)) : NULL;
  bool zero_ratio = ratio && ratio->kind == V_FCONST && ratio->f == 0;
  if (I->opset < 12 && onnx_attr_i(n, "is_test", 1) == 0 && onnx_attr_f(n, "ratio", 0.5) != 0)
    return onnx_node_err(I, n, "is_test=0 (training: random dropout) is not supported");
  if (tm && !zero_ratio) {
    bool const_true = tm->kind == V_SYM && tm->slen == 1 && !rx_expr_is_const(tm->s[0], 0);
    if (tm->kind == V_SYM && !const_true) tm = NULL; /* constant false: inference */
    if (const_true && (!ratio || ratio->kind == V_FCONST))
      return onnx_node_err(I, n, "training_mode with ratio over 0 drops at random: not supported");
  }
  if (tm && !zero_ratio) { /* at run time: fail unless !(training_mode && ratio > 0) */
    rx_node *a[2], *t;
    rx_var *r = NULL, *sh, *chk;
    RX_RETURN_IF_ERROR(onnx_arg(I, n, onnx_input(n, 2), &t));
    if (ratio && ratio->kind != V_FCONST) {
      RX_RETURN_IF_ERROR(onnx_arg(I, n, onnx_input(n, 1), &a[0]));
      EX2(RX_OP_greater, a[0], FL(0.0), a[1]);
      EX2(RX_OP_logical_and, t, a[1], t);
    }
    const rx_attr *at = rx_attr_dtype(I->m, "dtype", RX_DTYPE_I64);
    RX_RETURN_IF_ERROR(onnx_emit(I, n, RX_OP_cast, &t, 1, &at, 1, &r));
    a[0] = rx_arg_var(I->b, r);
    RX_RETURN_IF_ERROR(onnx_at_node(I, n,
                                    rx_emit_op(I->b, onnx_op_name(RX_OP_tensor_to_shape), a, 1,
                                               NULL, 0, "dropout_training_mode_unsupported", &sh)));
    const rx_expr *zero = rx_sym_const(I->m, 0);
    RX_RETURN_IF_ERROR(
        onnx_at_node(I, n,
                     rx_emit_match_cast(I->b, rx_arg_var(I->b, sh), rx_sinfo_shape(I->m, 1, &zero),
                                        NULL, &chk)));
  }
  if (n->n_output > 1 && n->output[1] && n->output[1][0]) { /* the mask: all true */
    const rx_sinfo *si = onnx_tsinfo(x);
    if (!si || si->kind != RX_SINFO_TENSOR || !si->shape)
      return onnx_node_err(I, n, "the mask output needs the input's shape");
    rx_node *a[2] = {rx_arg_shape(I->b, si->shape, si->ndim), rx_arg_int(I->b, 1)};
    const rx_attr *at = rx_attr_dtype(I->m, "dtype", RX_DTYPE_BOOL);
    rx_var *mask;
    RX_RETURN_IF_ERROR(onnx_emit(I, n, RX_OP_full, a, 2, &at, 1, &mask));
    onnx_def_named(I, n->output[1], mask);
  }
  onnx_def_alias(I, n, x);
  return NULL;
}

/* LayerNormalization: Y by layer_norm; the Mean and InvStdDev outputs, where used, as
 * mean(x) and rsqrt(mean((x - mean)^2) + epsilon) over the normalized axes (kept as 1s), in
 * f32 (stash_type 1) */
rx_status onnx_do_layer_norm(imp *I, const Onnx__NodeProto *n, const onnx_op *row) {
  const rx_sinfo *si = onnx_tsinfo(onnx_input(n, 0) ? onnx_get(I, onnx_input(n, 0)) : NULL);
  int rank = si && si->kind == RX_SINFO_TENSOR ? si->ndim : -1;
  if (rank < 0) return onnx_node_err(I, n, "the input's rank is not known");
  if (!onnx_input(n, 2))
    return onnx_node_err(I, n, "LayerNormalization without a bias (B) is not supported yet");
  rx_node *a[5] = {0};
  const rx_attr *at[4];
  rx_var *r = NULL;
  int64_t axis = onnx_attr_i(n, "axis", -1), axes[SYM_MAX];
  if (axis < 0) axis += rank;
  if (axis < 0 || axis >= rank) return onnx_node_err(I, n, "axis out of range for rank %d", rank);
  double eps = onnx_attr_f(n, "epsilon", 1e-5);
  int na = 0;
  for (int64_t k = axis; k < rank && na < SYM_MAX; k++) axes[na++] = k;
  for (int k = 0; k < 3; k++) RX_RETURN_IF_ERROR(onnx_arg(I, n, onnx_input(n, (size_t)k), &a[k]));
  at[0] = rx_attr_ints(I->m, "axes", axes, na);
  at[1] = rx_attr_float(I->m, "epsilon", eps);
  RX_RETURN_IF_ERROR(onnx_emit(I, n, RX_OP_layer_norm, a, 3, at, 2, &r));
  onnx_def_tensor(I, n, r);
  bool mean_out = n->n_output > 1 && n->output[1] && n->output[1][0];
  bool inv_out = n->n_output > 2 && n->output[2] && n->output[2][0];
  if (!mean_out && !inv_out) return NULL;
  rx_node *x = a[0], *mean, *t;
  if (onnx_attr_i(n, "stash_type", 1) != 1)
    return onnx_node_err(I, n, "stash_type other than 1 (f32) is not supported");
  if (si->dtype != RX_DTYPE_F32) {
    at[2] = rx_attr_dtype(I->m, "dtype", RX_DTYPE_F32);
    RX_RETURN_IF_ERROR(onnx_emit(I, n, RX_OP_cast, &x, 1, &at[2], 1, &r));
    x = rx_arg_var(I->b, r);
  }
  at[1] = rx_attr_bool(I->m, "keepdims", true);
  RX_RETURN_IF_ERROR(onnx_emit(I, n, RX_OP_mean, &x, 1, at, 2, &r));
  mean = rx_arg_var(I->b, r);
  if (mean_out) onnx_def_named(I, n->output[1], r);
  if (!inv_out) return NULL;
  EX2(RX_OP_subtract, x, mean, t);
  EX2(RX_OP_multiply, t, t, t);
  RX_RETURN_IF_ERROR(onnx_emit(I, n, RX_OP_mean, &t, 1, at, 2, &r));
  t = rx_arg_var(I->b, r);
  EX2(RX_OP_add, t, FL(eps), t);
  EX1(RX_OP_rsqrt, t, t);
  onnx_def_named(I, n->output[2], r);
  return NULL;
}

/* reshape(x, dims) */
rx_status onnx_reshape_to(imp *I, const Onnx__NodeProto *n, rx_node *x, const rx_expr *const *dims,
                          int k, rx_node **out, rx_var **last) {
  rx_node *a[2] = {x, rx_arg_shape(I->b, dims, k)};
  return onnx_exa(I, n, RX_OP_reshape, a, 2, NULL, 0, out, last);
}

/* The shape of tensor input i: rank and dims known, rank within [lo, hi]. */
rx_status onnx_known_shape(imp *I, const Onnx__NodeProto *n, size_t i, int lo, int hi,
                           const rx_sinfo **out) {
  const rx_sinfo *si = onnx_tsinfo(onnx_input(n, i) ? onnx_get(I, onnx_input(n, i)) : NULL);
  *out = si;
  if (!si || si->kind != RX_SINFO_TENSOR || !si->shape || si->ndim < lo || si->ndim > hi)
    return onnx_node_err(I, n, "input %zu must be a tensor of known shape and rank %d to %d", i, lo,
                         hi);
  return NULL;
}

/* NegativeLogLikelihoodLoss of log-probabilities x [N, C, d1, ...] (input 0 of NLL, the
 * log_softmax of SoftmaxCrossEntropyLoss) and targets [N, d1, ...] (input 1): the loss
 * -x[n, t, d...] w[t] with the optional class weights w (input 2), 0 where t is ignore_index
 * (read at class 0 there, so an ignore_index outside [0, C) is never loaded); reduction "none",
 * "sum" or "mean" (the sum over the sum of the weights of the targets counted). */
static rx_status nll_of(imp *I, const Onnx__NodeProto *n, rx_node *x, rx_dtype dt, rx_var **out) {
  bool none = onnx_attr_s_is(n, "reduction", "none"), sum = onnx_attr_s_is(n, "reduction", "sum");
  if (!none && !sum && !onnx_attr_s_is(n, "reduction", "mean") &&
      !onnx_attr_s_is(n, "reduction", ""))
    return onnx_node_err(I, n, "reduction must be \"none\", \"sum\" or \"mean\"");
  const Onnx__AttributeProto *ii = onnx_attr(n, "ignore_index");
  rx_node *t, *valid = NULL, *g, *w = NULL, *loss;
  rx_var *r = NULL;
  RX_RETURN_IF_ERROR(onnx_arg(I, n, onnx_input(n, 1), &t));
  if (ii && ii->has_i) {
    EX2(RX_OP_not_equal, t, rx_arg_int(I->b, ii->i), valid);
    EX3(RX_OP_where, valid, t, rx_arg_int(I->b, 0), t);
  }
  int64_t ax1 = 1;
  const rx_attr *at[2] = {rx_attr_ints(I->m, "axes", &ax1, 1), NULL};
  EXA(RX_OP_expand_dims, t, at, 1, g);
  rx_node *a[2] = {x, g};
  at[0] = rx_attr_int(I->m, "axis", 1);
  RX_RETURN_IF_ERROR(onnx_exa(I, n, RX_OP_take_along_axis, a, 2, at, 1, &g, &r));
  at[0] = rx_attr_ints(I->m, "axes", &ax1, 1);
  EXA(RX_OP_squeeze, g, at, 1, g);
  EX1(RX_OP_neg, g, loss);
  if (onnx_input(n, 2)) {
    RX_RETURN_IF_ERROR(onnx_arg(I, n, onnx_input(n, 2), &a[0]));
    a[1] = t;
    at[0] = rx_attr_int(I->m, "axis", 0);
    RX_RETURN_IF_ERROR(onnx_exa(I, n, RX_OP_take, a, 2, at, 1, &w, &r));
  }
  if (valid) {
    at[0] = rx_attr_dtype(I->m, "dtype", dt);
    EXA(RX_OP_cast, valid, at, 1, valid);
    if (w)
      EX2(RX_OP_multiply, w, valid, w);
    else
      w = valid;
  }
  if (w) EX2(RX_OP_multiply, loss, w, loss);
  if (!none) {
    at[0] = rx_attr_bool(I->m, "keepdims", false);
    EXA(sum || w ? RX_OP_sum : RX_OP_mean, loss, at, 1, loss);
    if (!sum && w) {
      EXA(RX_OP_sum, w, at, 1, w);
      EX2(RX_OP_divide, loss, w, loss);
    }
  }
  *out = r;
  return NULL;
}

/* NegativeLogLikelihoodLoss (nll_of) and SoftmaxCrossEntropyLoss: nll_of the log_softmax of
 * the scores over the classes (axis 1), which is the optional second output log_prob. */
rx_status onnx_do_nll_loss(imp *I, const Onnx__NodeProto *n, const onnx_op *row) {
  const rx_sinfo *xs;
  RX_RETURN_IF_ERROR(onnx_known_shape(I, n, 0, 2, SYM_MAX, &xs));
  rx_node *x;
  rx_var *r = NULL, *lp = NULL;
  RX_RETURN_IF_ERROR(onnx_arg(I, n, onnx_input(n, 0), &x));
  if (row->form == ONNX_FORM_sce) {
    const rx_attr *at = rx_attr_int(I->m, "axis", 1);
    EXA(RX_OP_log_softmax, x, &at, 1, x);
    lp = r;
  }
  RX_RETURN_IF_ERROR(nll_of(I, n, x, xs->dtype, &r));
  onnx_def_tensor(I, n, r);
  if (n->n_output > 1 && n->output[1] && n->output[1][0]) {
    if (!lp) return onnx_node_err(I, n, "has one output");
    onnx_def_named(I, n->output[1], lp);
  }
  return NULL;
}

/* (x - mean) / sqrt(var + eps) over axes, mean and variance kept as dims of 1 (*out, its
 * variable *last). */
static rx_status standardize(imp *I, const Onnx__NodeProto *n, rx_node *x, const int64_t *axes,
                             int na, double eps, rx_node **out, rx_var **last) {
  rx_node *mu, *d, *v;
  rx_var *r = NULL;
  const rx_attr *at[2] = {rx_attr_ints(I->m, "axes", axes, na),
                          rx_attr_bool(I->m, "keepdims", true)};
  EXA(RX_OP_mean, x, at, 2, mu);
  EX2(RX_OP_subtract, x, mu, d);
  EX2(RX_OP_multiply, d, d, v);
  EXA(RX_OP_mean, v, at, 2, v);
  EX2(RX_OP_add, v, FL(eps), v);
  EX1(RX_OP_rsqrt, v, v);
  EX2(RX_OP_multiply, d, v, *out);
  *last = r;
  return NULL;
}

/* InstanceNormalization: standardize over the spatial axes, then scale and bias [C] per
 * channel; MeanVarianceNormalization: standardize over axes (default [0, 2, 3]); its ONNX
 * function body adds 1e-9 to the standard deviation, here 1e-18 is added to the variance (the
 * same guard against 0; the results differ far below the float tolerance). */
rx_status onnx_do_instance_norm(imp *I, const Onnx__NodeProto *n, const onnx_op *row) {
  const rx_sinfo *xs;
  RX_RETURN_IF_ERROR(onnx_known_shape(I, n, 0, 3, SYM_MAX, &xs));
  bool mvn = row->form == ONNX_FORM_mvn;
  int64_t axes[SYM_MAX];
  int na = 0;
  if (mvn) {
    static const int64_t dflt[3] = {0, 2, 3};
    const Onnx__AttributeProto *a = onnx_attr(n, "axes");
    if (a && a->n_ints > SYM_MAX) return onnx_node_err(I, n, "attribute 'axes' too long");
    na = a && a->n_ints ? (int)a->n_ints : 3;
    for (int k = 0; k < na; k++) axes[k] = a && a->n_ints ? a->ints[k] : dflt[k];
  } else {
    for (int k = 2; k < xs->ndim; k++) axes[na++] = k;
  }
  rx_node *x, *y, *p;
  rx_var *r = NULL;
  RX_RETURN_IF_ERROR(onnx_arg(I, n, onnx_input(n, 0), &x));
  RX_RETURN_IF_ERROR(
      standardize(I, n, x, axes, na, mvn ? 1e-18 : onnx_attr_f(n, "epsilon", 1e-5), &y, &r));
  if (!mvn) { /* scale and bias [C] as [C, 1, ...] */
    const rx_expr *dims[SYM_MAX];
    dims[0] = xs->shape[1];
    for (int k = 1; k < xs->ndim - 1; k++) dims[k] = rx_sym_const(I->m, 1);
    for (size_t i = 1; i <= 2; i++) {
      RX_RETURN_IF_ERROR(onnx_arg(I, n, onnx_input(n, i), &p));
      RX_RETURN_IF_ERROR(onnx_reshape_to(I, n, p, dims, xs->ndim - 1, &p, &r));
      EX2(i == 1 ? RX_OP_multiply : RX_OP_add, y, p, y);
    }
  }
  onnx_def_tensor(I, n, r);
  return NULL;
}

/* LRN: x / (bias + alpha / size * s)^beta with s the sum of squares over the size channels
 * around each (floor((size - 1) / 2) before, the rest after): an avg_pool2d counting its
 * padding (a mean over size, alpha / size * s = alpha * mean) of x^2 as [N, 1, C, rest]. */
rx_status onnx_do_lrn(imp *I, const Onnx__NodeProto *n, const onnx_op *row) {
  (void)row;
  const rx_sinfo *xs;
  RX_RETURN_IF_ERROR(onnx_known_shape(I, n, 0, 3, SYM_MAX, &xs));
  int64_t size = onnx_attr_i(n, "size", 0);
  if (size < 1 || size > (1 << 16)) return onnx_node_err(I, n, "size must be a positive integer");
  int64_t lo = (size - 1) / 2, hi = size - 1 - lo;
  const rx_expr *one = rx_sym_const(I->m, 1), *rest = one;
  for (int k = 2; k < xs->ndim; k++) rest = rx_sym_mul(I->m, rest, xs->shape[k]);
  const rx_expr *dims[4] = {xs->shape[0], one, xs->shape[1], rest};
  rx_node *x, *s;
  rx_var *r = NULL;
  RX_RETURN_IF_ERROR(onnx_arg(I, n, onnx_input(n, 0), &x));
  EX2(RX_OP_multiply, x, x, s);
  RX_RETURN_IF_ERROR(onnx_reshape_to(I, n, s, dims, 4, &s, &r));
  int64_t kern[2] = {size, 1}, st[2] = {1, 1}, pads[4] = {lo, 0, hi, 0};
  const rx_attr *at[4] = {
      rx_attr_ints(I->m, "kernel", kern, 2), rx_attr_ints(I->m, "strides", st, 2),
      rx_attr_ints(I->m, "padding", pads, 4), rx_attr_bool(I->m, "count_include_pad", true)};
  EXA(RX_OP_avg_pool2d, s, at, 4, s);
  RX_RETURN_IF_ERROR(onnx_reshape_to(I, n, s, xs->shape, xs->ndim, &s, &r));
  EX2(RX_OP_multiply, s, FL(onnx_attr_f(n, "alpha", 1e-4)), s);
  EX2(RX_OP_add, s, FL(onnx_attr_f(n, "bias", 1.0)), s);
  EX2(RX_OP_power, s, FL(onnx_attr_f(n, "beta", 0.75)), s);
  EX2(RX_OP_divide, x, s, s);
  onnx_def_tensor(I, n, r);
  return NULL;
}

/* The padding [begin..., end...] of an ONNX window op over k spatial dims (in: the input's
 * spatial dims) from `pads` or `auto_pad`, for kernel extents ext[i] = dilation * (kernel - 1)
 * + 1 and strides st. SAME pads to ceil(in / stride) outputs: with a stride above 1 that needs
 * the input size, so a constant one. */
static rx_status window_pads(imp *I, const Onnx__NodeProto *n, int k, const rx_expr *const *in,
                             const int64_t *ext, const int64_t *st, int64_t *pads) {
  if (onnx_attr_s_is(n, "auto_pad", "") || onnx_attr_s_is(n, "auto_pad", "NOTSET"))
    return onnx_ints_attr(I, n, "pads", 2 * k, 0, pads);
  if (onnx_attr_s_is(n, "auto_pad", "VALID")) {
    memset(pads, 0, 2 * (size_t)k * sizeof *pads);
    return NULL;
  }
  bool upper = onnx_attr_s_is(n, "auto_pad", "SAME_UPPER");
  if (!upper && !onnx_attr_s_is(n, "auto_pad", "SAME_LOWER"))
    return onnx_node_err(I, n, "auto_pad must be NOTSET, VALID, SAME_UPPER or SAME_LOWER");
  for (int i = 0; i < k; i++) {
    int64_t total = ext[i] - 1;
    if (st[i] != 1) {
      if (in[i]->kind != RX_EXPR_CONST)
        return onnx_node_err(I, n,
                             "auto_pad SAME with stride %lld: the padding would depend on the "
                             "input size; give explicit pads or a constant spatial size",
                             (long long)st[i]);
      int64_t d = in[i]->value, out = (d + st[i] - 1) / st[i];
      total = (out - 1) * st[i] + ext[i] - d;
      if (total < 0) total = 0;
    }
    pads[i] = upper ? total / 2 : total - total / 2;
    pads[i + k] = total - pads[i];
  }
  return NULL;
}

/* ceil_mode=1 of a pooling op: the end padding of each spatial dim grows so that floor mode
 * gives the ceil mode's outputs (a last window starting in the end padding is dropped, as ONNX
 * says); needs constant spatial dims. *grew: some padding grew. */
static rx_status ceil_pads(imp *I, const Onnx__NodeProto *n, int k, const rx_expr *const *in,
                           const int64_t *ext, const int64_t *st, int64_t *pads, bool *grew) {
  *grew = false;
  for (int i = 0; i < k; i++) {
    if (in[i]->kind != RX_EXPR_CONST)
      return onnx_node_err(I, n,
                           "ceil_mode=1 needs constant spatial dims (floor mode has no such need)");
    int64_t span = in[i]->value + pads[i] + pads[i + k] - ext[i];
    if (span < 0) continue; /* the window does not fit: deduction reports it */
    int64_t out = (span + st[i] - 1) / st[i] + 1;
    if ((out - 1) * st[i] >= in[i]->value + pads[i]) out--;
    int64_t extra = (out - 1) * st[i] - span;
    if (extra > 0) {
      pads[i + k] += extra;
      *grew = true;
    }
  }
  return NULL;
}

/* The attributes of a window op over k = 1, 2 or 3 spatial dims, read once for Conv and the
 * pools: kernel (from kernel_shape, or the weight's dims), strides, dilations and pads. */
typedef struct win {
  int k;                /* spatial dims */
  const rx_expr *in[3]; /* the input's spatial dims */
  int64_t kern[3], st[3], dil[3], ext[3];
  int64_t pads[6]; /* [begin..., end...] */
} win;

static rx_status read_win(imp *I, const Onnx__NodeProto *n, const rx_sinfo *xs, const int64_t *kern,
                          win *w) {
  w->k = xs->ndim - 2;
  for (int i = 0; i < w->k; i++) {
    w->in[i] = xs->shape[2 + i];
    w->kern[i] = kern[i];
  }
  RX_RETURN_IF_ERROR(onnx_ints_attr(I, n, "strides", w->k, 1, w->st));
  RX_RETURN_IF_ERROR(onnx_ints_attr(I, n, "dilations", w->k, 1, w->dil));
  for (int i = 0; i < w->k; i++) {
    if (w->st[i] < 1 || w->dil[i] < 1 || w->kern[i] < 1)
      return onnx_node_err(I, n, "kernel, strides and dilations must be positive");
    w->ext[i] = w->dil[i] * (w->kern[i] - 1) + 1;
  }
  return window_pads(I, n, w->k, w->in, w->ext, w->st, w->pads);
}

/* The 2-D attributes of spatial dims i and j of w (i < 0: a dim of size 1 before j). */
static void win2(const win *w, int i, int j, int64_t *kern, int64_t *st, int64_t *dil,
                 int64_t *pads) {
  kern[0] = i < 0 ? 1 : w->kern[i];
  st[0] = i < 0 ? 1 : w->st[i];
  dil[0] = i < 0 ? 1 : w->dil[i];
  pads[0] = i < 0 ? 0 : w->pads[i];
  pads[2] = i < 0 ? 0 : w->pads[i + w->k];
  kern[1] = w->kern[j];
  st[1] = w->st[j];
  dil[1] = w->dil[j];
  pads[1] = w->pads[j];
  pads[3] = w->pads[j + w->k];
}

/* x (its variable xv) with lo zeros before and hi after along axis (zeros, then a concat). */
static rx_status pad_zeros(imp *I, const Onnx__NodeProto *n, rx_node *x, rx_var *xv, int axis,
                           int64_t lo, int64_t hi, rx_node **out, rx_var **last) {
  const rx_sinfo *xs = rx_var_sinfo(xv);
  rx_node *f[3], *t;
  rx_var *r = xv, *tup;
  int nf = 0;
  for (int side = 0; side < 2; side++) {
    int64_t cnt = side ? hi : lo;
    if (side) f[nf++] = x;
    if (!cnt) continue;
    const rx_expr *zd[SYM_MAX];
    memcpy(zd, xs->shape, sizeof *zd * (size_t)xs->ndim);
    zd[axis] = rx_sym_const(I->m, cnt);
    rx_node *shape = rx_arg_shape(I->b, zd, xs->ndim);
    const rx_attr *at = rx_attr_dtype(I->m, "dtype", xs->dtype);
    EXA(RX_OP_zeros, shape, &at, 1, f[nf]);
    nf++;
  }
  *out = x;
  *last = xv;
  if (nf == 1) return NULL;
  RX_RETURN_IF_ERROR(onnx_at_node(I, n, rx_emit_tuple(I->b, f, nf, NULL, &tup)));
  t = rx_arg_var(I->b, tup);
  const rx_attr *at = rx_attr_int(I->m, "axis", axis);
  EXA(RX_OP_concat, t, &at, 1, *out);
  *last = r;
  return NULL;
}

/* A 3-D convolution (x [N, C, D, H, W], its variable xv; the weight w [O, C/g, KD, KH, KW] of
 * shape ws) as KD 2-D ones: for each depth tap kd, the depth slices kd dil_d, kd dil_d + s_d,
 * ... of the input (its depth padding added as zeros first) as a batch [N OD, C, H, W],
 * convolved with the weight's slice kd over (H, W); the sum over kd as [N, O, OD, OH, OW]. */
static rx_status conv3(imp *I, const Onnx__NodeProto *n, rx_node *x, rx_var *xv, rx_node *w,
                       const rx_sinfo *ws, const win *wn, int64_t groups, rx_node **out,
                       rx_var **last) {
  rx_var *r = NULL;
  RX_RETURN_IF_ERROR(pad_zeros(I, n, x, xv, 2, wn->pads[0], wn->pads[3], &x, &xv));
  const rx_sinfo *xs = rx_var_sinfo(xv);
  int64_t sd = wn->st[0], dd = wn->dil[0], k2[2], st[2], dil[2], pads[4], ax2 = 2;
  int64_t perm[5] = {0, 2, 1, 3, 4};
  win2(wn, 1, 2, k2, st, dil, pads);
  const rx_expr *od = rx_sym_add(
      I->m,
      rx_sym_floordiv(I->m, rx_sym_sub(I->m, xs->shape[2], rx_sym_const(I->m, wn->ext[0])),
                      rx_sym_const(I->m, sd)),
      rx_sym_const(I->m, 1));
  const rx_expr *span = rx_sym_add(
      I->m, rx_sym_mul(I->m, rx_sym_sub(I->m, od, rx_sym_const(I->m, 1)), rx_sym_const(I->m, sd)),
      rx_sym_const(I->m, 1));
  rx_node *acc = NULL;
  for (int64_t kd = 0; kd < wn->kern[0]; kd++) {
    rx_node *xk, *wk;
    const rx_expr *b = rx_sym_const(I->m, kd * dd), *e = rx_sym_add(I->m, b, span);
    const rx_attr *at[4] = {rx_attr_ints(I->m, "axes", &ax2, 1),
                            rx_attr_exprs(I->m, "begin", &b, 1), rx_attr_exprs(I->m, "end", &e, 1),
                            rx_attr_ints(I->m, "strides", &sd, 1)};
    EXA(RX_OP_strided_slice, x, at, 4, xk);
    /* every tap's slice has od depths; deduction may give each tap's its own form */
    const rx_expr *sd5[5] = {xs->shape[0], xs->shape[1], od, xs->shape[3], xs->shape[4]};
    if (!onnx_match_cast_to(I, r, xs->dtype, 5, sd5, &r))
      return onnx_node_err(I, n, "internal: the depth slices of a 3-D convolution");
    xk = rx_arg_var(I->b, r);
    at[0] = rx_attr_ints(I->m, "axes", perm, 5);
    EXA(RX_OP_permute, xk, at, 1, xk);
    const rx_sinfo *ps = rx_var_sinfo(r);
    const rx_expr *bd[4] = {rx_sym_mul(I->m, ps->shape[0], ps->shape[1]), ps->shape[2],
                            ps->shape[3], ps->shape[4]};
    RX_RETURN_IF_ERROR(onnx_reshape_to(I, n, xk, bd, 4, &xk, &r));
    const rx_expr *wb = rx_sym_const(I->m, kd), *we = rx_sym_const(I->m, kd + 1);
    at[0] = rx_attr_ints(I->m, "axes", &ax2, 1);
    at[1] = rx_attr_exprs(I->m, "begin", &wb, 1);
    at[2] = rx_attr_exprs(I->m, "end", &we, 1);
    EXA(RX_OP_strided_slice, w, at, 3, wk);
    const rx_expr *wd[4] = {ws->shape[0], ws->shape[1], ws->shape[3], ws->shape[4]};
    RX_RETURN_IF_ERROR(onnx_reshape_to(I, n, wk, wd, 4, &wk, &r));
    at[0] = rx_attr_ints(I->m, "strides", st, 2);
    at[1] = rx_attr_ints(I->m, "padding", pads, 4);
    at[2] = rx_attr_ints(I->m, "dilation", dil, 2);
    at[3] = rx_attr_int(I->m, "groups", groups);
    rx_node *a[2] = {xk, wk};
    RX_RETURN_IF_ERROR(onnx_exa(I, n, RX_OP_conv2d, a, 2, at, 4, &xk, &r));
    if (acc)
      EX2(RX_OP_add, acc, xk, acc);
    else
      acc = xk;
  }
  const rx_sinfo *ys = rx_var_sinfo(r), *ps = rx_var_sinfo(xv);
  const rx_expr *yd[5] = {ps->shape[0], od, ys->shape[1], ys->shape[2], ys->shape[3]};
  RX_RETURN_IF_ERROR(onnx_reshape_to(I, n, acc, yd, 5, &acc, &r));
  const rx_attr *at = rx_attr_ints(I->m, "axes", perm, 5);
  EXA(RX_OP_permute, acc, &at, 1, *out);
  *last = r;
  return NULL;
}

/* Conv's input channels (*xv, struct info *xs) against the weight's C/group times group: a
 * symbolic count the analyzer cannot show equal (a UNet's concat of a skip and an upsampled
 * map padded by amounts from run time, [b, 4 + 8 + d1 + d5, h, w] for 12) is match_cast to it,
 * which the VM checks when it runs. */
static rx_status conv_channels(imp *I, const Onnx__NodeProto *n, rx_var **xv, const rx_sinfo **xs,
                               const rx_sinfo *ws, int64_t g) {
  const rx_expr *c = (*xs)->shape[1];
  if (c->kind == RX_EXPR_CONST || ws->shape[1]->kind != RX_EXPR_CONST || g < 1 ||
      (*xs)->ndim > SYM_MAX)
    return NULL;
  const rx_expr *want = rx_sym_const(I->m, ws->shape[1]->value * g);
  if (sym_analyzer_prove(I->an, sym_expr_cmp(I->m->ctx, RX_EXPR_EQ, c, want)) != RX_UNKNOWN)
    return NULL; /* equal, or provably not (conv2d's own error) */
  const rx_expr *dims[SYM_MAX];
  memcpy(dims, (*xs)->shape, sizeof *dims * (size_t)(*xs)->ndim);
  dims[1] = want;
  if (!onnx_match_cast_to(I, *xv, (*xs)->dtype, (*xs)->ndim, dims, xv))
    return onnx_node_err(I, n, "match_cast of the input to %lld channels failed",
                         (long long)want->value);
  *xs = rx_var_sinfo(*xv);
  return NULL;
}

rx_status onnx_do_conv(imp *I, const Onnx__NodeProto *n, const onnx_op *row) {
  const rx_sinfo *xs, *ws;
  RX_RETURN_IF_ERROR(onnx_known_shape(I, n, 0, 3, 5, &xs));
  RX_RETURN_IF_ERROR(onnx_known_shape(I, n, 1, xs->ndim, xs->ndim, &ws));
  int64_t kern[3];
  for (int i = 2; i < ws->ndim; i++) {
    if (ws->shape[i]->kind != RX_EXPR_CONST)
      return onnx_node_err(I, n, "the weight must be [O, C/group, k...] with constant kernel dims");
    kern[i - 2] = ws->shape[i]->value;
  }
  win w;
  RX_RETURN_IF_ERROR(read_win(I, n, xs, kern, &w));
  int64_t k2[2], st[2], dil[2], pads[4], g = onnx_attr_i(n, "group", 1);
  win2(&w, w.k == 1 ? -1 : w.k - 2, w.k - 1, k2, st, dil, pads);
  rx_node *a[2];
  rx_var *r = NULL, *b2;
  rx_var *xv = onnx_get(I, onnx_input(n, 0))->var;
  RX_RETURN_IF_ERROR(conv_channels(I, n, &xv, &xs, ws, g));
  a[0] = rx_arg_var(I->b, xv);
  RX_RETURN_IF_ERROR(onnx_arg(I, n, onnx_input(n, 1), &a[1]));
  const rx_expr *one = rx_sym_const(I->m, 1);
  if (w.k == 3) RX_RETURN_IF_ERROR(conv3(I, n, a[0], xv, a[1], ws, &w, g, &a[0], &r));
  if (w.k == 1) { /* [N, C, L] as [N, C, 1, L], the weight [O, C/g, K] as [O, C/g, 1, K] */
    const rx_expr *xd[4] = {xs->shape[0], xs->shape[1], one, xs->shape[2]},
                  *wd[4] = {ws->shape[0], ws->shape[1], one, ws->shape[2]};
    RX_RETURN_IF_ERROR(onnx_reshape_to(I, n, a[0], xd, 4, &a[0], &r));
    RX_RETURN_IF_ERROR(onnx_reshape_to(I, n, a[1], wd, 4, &a[1], &r));
  }
  const rx_attr *at[4] = {rx_attr_ints(I->m, "strides", st, 2),
                          rx_attr_ints(I->m, "padding", pads, 4),
                          rx_attr_ints(I->m, "dilation", dil, 2), rx_attr_int(I->m, "groups", g)};
  if (w.k < 3) RX_RETURN_IF_ERROR(onnx_emit(I, n, RX_OP_conv2d, a, 2, at, 4, &r));
  if (w.k == 1) {
    const rx_sinfo *ys = rx_var_sinfo(r);
    const rx_expr *yd[3] = {ys->shape[0], ys->shape[1], ys->shape[3]};
    RX_RETURN_IF_ERROR(onnx_reshape_to(I, n, rx_arg_var(I->b, r), yd, 3, &a[0], &r));
  }
  if (onnx_input(n, 2)) { /* bias [O] as [1, O, 1...] */
    const rx_expr *dims[5] = {one, ws->shape[0], one, one, one};
    RX_RETURN_IF_ERROR(onnx_arg(I, n, onnx_input(n, 2), &a[0]));
    a[1] = rx_arg_shape(I->b, dims, xs->ndim);
    RX_RETURN_IF_ERROR(onnx_emit(I, n, RX_OP_reshape, a, 2, NULL, 0, &b2));
    a[0] = rx_arg_var(I->b, r);
    a[1] = rx_arg_var(I->b, b2);
    RX_RETURN_IF_ERROR(onnx_emit(I, n, RX_OP_add, a, 2, NULL, 0, &r));
  }
  onnx_def_tensor(I, n, r);
  return NULL;
}

/* max_pool2d or avg_pool2d of x with the 2-D attributes of spatial dims i, j of w. */
static rx_status pool2(imp *I, const Onnx__NodeProto *n, rx_op_id op, rx_node *x, const win *w,
                       int i, int j, bool cip, rx_node **out, rx_var **last) {
  int64_t kern[2], st[2], dil[2], pads[4];
  win2(w, i, j, kern, st, dil, pads);
  const rx_attr *at[5] = {
      rx_attr_ints(I->m, "kernel", kern, 2), rx_attr_ints(I->m, "strides", st, 2),
      rx_attr_ints(I->m, "padding", pads, 4), rx_attr_ints(I->m, "dilation", dil, 2),
      rx_attr_bool(I->m, "count_include_pad", cip)};
  return onnx_exa(I, n, op, &x, 1, at, op == RX_OP_max_pool2d ? 4 : 5, out, last);
}

/* MaxPool's Indices output (2-D): max_pool2d_index over the node's window */
static rx_status pool_indices(imp *I, const Onnx__NodeProto *n, const win *w) {
  int64_t kern[2], st[2], dil[2], pads[4];
  win2(w, 0, 1, kern, st, dil, pads);
  const rx_attr *at[5] = {
      rx_attr_ints(I->m, "kernel", kern, 2), rx_attr_ints(I->m, "strides", st, 2),
      rx_attr_ints(I->m, "padding", pads, 4), rx_attr_ints(I->m, "dilation", dil, 2),
      rx_attr_int(I->m, "storage_order", onnx_attr_i(n, "storage_order", 0))};
  rx_node *x;
  rx_var *r = NULL;
  RX_RETURN_IF_ERROR(onnx_arg(I, n, onnx_input(n, 0), &x));
  RX_RETURN_IF_ERROR(onnx_exa(I, n, RX_OP_max_pool2d_index, &x, 1, at, 5, &x, &r));
  onnx_def_named(I, n->output[1], r);
  return NULL;
}

/* MaxPool, AveragePool and LpPool over 1, 2 or 3 spatial dims: 1-D as 2-D over [N, C, 1, L];
 * 3-D as a 2-D pool over (H, W) of [N, C D, H, W], then one over (D, 1) of [N, C, D, OH OW]
 * (both max and the mean, over the window or over its in-bounds part, split that way). LpPool:
 * (the mean of |x|^p counting the padding, times the window's size)^(1 / p). ceil_mode:
 * ceil_pads. */
rx_status onnx_do_pool(imp *I, const Onnx__NodeProto *n, const onnx_op *row) {
  bool lp = n->op_type[0] == 'L';
  rx_op_id op = n->op_type[0] == 'M' ? RX_OP_max_pool2d : RX_OP_avg_pool2d;
  const rx_sinfo *xs;
  RX_RETURN_IF_ERROR(onnx_known_shape(I, n, 0, 3, 5, &xs));
  bool want_idx = n->n_output > 1 && n->output[1] && n->output[1][0];
  if (want_idx && (op != RX_OP_max_pool2d || xs->ndim != 4))
    return onnx_node_err(I, n, "the Indices output is supported for 2-D MaxPool only");
  const Onnx__AttributeProto *ka = onnx_attr(n, "kernel_shape");
  if (!ka || (int)ka->n_ints != xs->ndim - 2)
    return onnx_node_err(I, n, "kernel_shape of %d values is required", xs->ndim - 2);
  win w;
  RX_RETURN_IF_ERROR(read_win(I, n, xs, ka->ints, &w));
  bool cip = lp || onnx_attr_i(n, "count_include_pad", 0) != 0, grew = false;
  if (onnx_attr_i(n, "ceil_mode", 0))
    RX_RETURN_IF_ERROR(ceil_pads(I, n, w.k, w.in, w.ext, w.st, w.pads, &grew));
  if (grew && cip && !lp && op == RX_OP_avg_pool2d) /* (LpPool's sum is the same with more zeros) */
    return onnx_node_err(I, n,
                         "ceil_mode=1 with count_include_pad=1 where the last window passes the "
                         "padding is not supported");
  rx_node *x;
  rx_var *r = NULL;
  RX_RETURN_IF_ERROR(onnx_arg(I, n, onnx_input(n, 0), &x));
  double p = (double)onnx_attr_i(n, "p", 2), size = 1;
  if (lp) {
    if (p < 1) return onnx_node_err(I, n, "p must be at least 1");
    for (int i = 0; i < w.k; i++) size *= (double)w.kern[i];
    EX1(RX_OP_abs, x, x);
    if (p != 1) EX2(RX_OP_power, x, FL(p), x);
  }
  const rx_expr *one = rx_sym_const(I->m, 1), *d[5];
  const rx_sinfo *ys;
  if (w.k == 1) {
    const rx_expr *xd[4] = {xs->shape[0], xs->shape[1], one, xs->shape[2]};
    RX_RETURN_IF_ERROR(onnx_reshape_to(I, n, x, xd, 4, &x, &r));
    RX_RETURN_IF_ERROR(pool2(I, n, op, x, &w, -1, 0, cip, &x, &r));
    ys = rx_var_sinfo(r);
    const rx_expr *yd[3] = {ys->shape[0], ys->shape[1], ys->shape[3]};
    RX_RETURN_IF_ERROR(onnx_reshape_to(I, n, x, yd, 3, &x, &r));
  } else if (w.k == 2) {
    RX_RETURN_IF_ERROR(pool2(I, n, op, x, &w, 0, 1, cip, &x, &r));
  } else {
    const rx_expr *xd[4] = {xs->shape[0], rx_sym_mul(I->m, xs->shape[1], xs->shape[2]),
                            xs->shape[3], xs->shape[4]};
    RX_RETURN_IF_ERROR(onnx_reshape_to(I, n, x, xd, 4, &x, &r));
    RX_RETURN_IF_ERROR(pool2(I, n, op, x, &w, 1, 2, cip, &x, &r));
    ys = rx_var_sinfo(r);
    d[3] = ys->shape[2];
    d[4] = ys->shape[3];
    const rx_expr *yd[4] = {xs->shape[0], xs->shape[1], xs->shape[2], rx_sym_mul(I->m, d[3], d[4])};
    RX_RETURN_IF_ERROR(onnx_reshape_to(I, n, x, yd, 4, &x, &r));
    win wd = w; /* (D, 1): the dim of size 1 has kernel 1, stride 1, no padding */
    wd.k = 2;
    wd.kern[1] = wd.st[1] = wd.dil[1] = 1;
    wd.pads[0] = w.pads[0];
    wd.pads[2] = w.pads[3];
    wd.pads[1] = wd.pads[3] = 0;
    RX_RETURN_IF_ERROR(pool2(I, n, op, x, &wd, 0, 1, cip, &x, &r));
    ys = rx_var_sinfo(r);
    const rx_expr *od[5] = {xs->shape[0], xs->shape[1], ys->shape[2], d[3], d[4]};
    RX_RETURN_IF_ERROR(onnx_reshape_to(I, n, x, od, 5, &x, &r));
  }
  if (lp) {
    EX2(RX_OP_multiply, x, FL(size), x);
    if (p != 1) EX2(RX_OP_power, x, FL(1.0 / p), x);
  }
  onnx_def_tensor(I, n, r);
  return want_idx ? pool_indices(I, n, &w) : NULL;
}

/* x with stride - 1 zeros after each element along axis (a reshape of the concat of x and
 * zeros along a new axis after it). */
static rx_status zero_insert(imp *I, const Onnx__NodeProto *n, rx_node *x, int axis, int64_t s,
                             rx_node **out, rx_var **last) {
  const rx_sinfo *xs = rx_var_sinfo(*last);
  rx_dtype dt = xs->dtype;
  int rank = xs->ndim;
  const rx_expr *zd[SYM_MAX], *od[SYM_MAX];
  for (int i = 0; i < rank; i++) od[i] = zd[i < axis + 1 ? i : i + 1] = xs->shape[i];
  zd[axis + 1] = rx_sym_const(I->m, s - 1);
  od[axis] = rx_sym_mul(I->m, xs->shape[axis], rx_sym_const(I->m, s));
  int64_t ax = axis + 1;
  rx_var *r = NULL;
  rx_node *f[2], *t;
  const rx_attr *at = rx_attr_ints(I->m, "axes", &ax, 1);
  EXA(RX_OP_expand_dims, x, &at, 1, f[0]);
  rx_node *shape = rx_arg_shape(I->b, zd, rank + 1);
  at = rx_attr_dtype(I->m, "dtype", dt);
  EXA(RX_OP_zeros, shape, &at, 1, f[1]);
  rx_var *tup;
  RX_RETURN_IF_ERROR(onnx_at_node(I, n, rx_emit_tuple(I->b, f, 2, NULL, &tup)));
  t = rx_arg_var(I->b, tup);
  at = rx_attr_int(I->m, "axis", ax);
  EXA(RX_OP_concat, t, &at, 1, t);
  RX_RETURN_IF_ERROR(onnx_reshape_to(I, n, t, od, rank, out, last));
  return NULL;
}

/* ConvTranspose (1-D, 2-D and 3-D) as the convolution whose gradient it is: the input with
 * stride - 1 zeros between its elements, padded by dilation (kernel - 1) - pad at the begin
 * and that plus output_padding at the end (a negative padding crops), convolved at stride 1
 * with the weight [C, O / group, k...] as [O, C / group, k...] (in and out channels swapped
 * within each group) with its kernel flipped (1-D as 2-D, 3-D by conv3). output_shape and
 * auto_pad SAME set the pads from the constant input size, as ONNX says (the odd one at the
 * begin unless SAME_UPPER). */
rx_status onnx_do_conv_transpose(imp *I, const Onnx__NodeProto *n, const onnx_op *row) {
  (void)row;
  const rx_sinfo *xs, *ws;
  RX_RETURN_IF_ERROR(onnx_known_shape(I, n, 0, 3, 5, &xs));
  RX_RETURN_IF_ERROR(onnx_known_shape(I, n, 1, xs->ndim, xs->ndim, &ws));
  int k = xs->ndim - 2, K = k == 1 ? 2 : k; /* K: the dims of the convolution made */
  int64_t g = onnx_attr_i(n, "group", 1), kern[3], st[3], dil[3], opad[3], pads[6], ext[3];
  for (int i = 0; i < k; i++) {
    if (ws->shape[2 + i]->kind != RX_EXPR_CONST)
      return onnx_node_err(I, n, "the weight must be [C, O/group, k...] with constant kernel dims");
    kern[i] = ws->shape[2 + i]->value;
  }
  if (g < 1 || ws->shape[0]->kind != RX_EXPR_CONST || ws->shape[0]->value % g)
    return onnx_node_err(I, n, "group must be positive and divide the weight's constant dim 0");
  RX_RETURN_IF_ERROR(onnx_ints_attr(I, n, "strides", k, 1, st));
  RX_RETURN_IF_ERROR(onnx_ints_attr(I, n, "dilations", k, 1, dil));
  RX_RETURN_IF_ERROR(onnx_ints_attr(I, n, "output_padding", k, 0, opad));
  for (int i = 0; i < k; i++) {
    if (st[i] < 1 || dil[i] < 1 || opad[i] < 0 || st[i] > (1 << 16))
      return onnx_node_err(I, n,
                           "strides and dilations must be positive, output_padding not negative");
    ext[i] = dil[i] * (kern[i] - 1) + 1;
  }
  const Onnx__AttributeProto *os = onnx_attr(n, "output_shape");
  bool same =
      onnx_attr_s_is(n, "auto_pad", "SAME_UPPER") || onnx_attr_s_is(n, "auto_pad", "SAME_LOWER");
  if ((os && os->n_ints) || same) {
    if (os && os->n_ints && (int)os->n_ints != k)
      return onnx_node_err(I, n, "output_shape must have %d values (the spatial dims)", k);
    for (int i = 0; i < k; i++) {
      const rx_expr *in = xs->shape[2 + i];
      if (in->kind != RX_EXPR_CONST)
        return onnx_node_err(I, n, "output_shape and auto_pad SAME need constant spatial dims");
      int64_t want = os && os->n_ints ? os->ints[i] : in->value * st[i];
      /* a negative total (output_shape beyond the natural size) pads the output's end, as
       * ONNX's reference halves it rounding down */
      int64_t total = st[i] * (in->value - 1) + opad[i] + ext[i] - want;
      int64_t half = total >= 0 ? total / 2 : -((1 - total) / 2);
      bool upper = onnx_attr_s_is(n, "auto_pad", "SAME_UPPER");
      pads[i] = upper ? half : total - half;
      pads[i + k] = total - pads[i];
    }
  } else if (onnx_attr_s_is(n, "auto_pad", "VALID")) {
    memset(pads, 0, sizeof pads);
  } else {
    RX_RETURN_IF_ERROR(onnx_ints_attr(I, n, "pads", 2 * k, 0, pads));
  }
  rx_node *x, *w;
  rx_var *r = NULL, *xv = onnx_get(I, onnx_input(n, 0))->var;
  RX_RETURN_IF_ERROR(onnx_arg(I, n, onnx_input(n, 0), &x));
  RX_RETURN_IF_ERROR(onnx_arg(I, n, onnx_input(n, 1), &w));
  const rx_expr *one = rx_sym_const(I->m, 1), *d[6];
  if (k == 1) { /* as 2-D over [N, C, 1, L] */
    const rx_expr *xd[4] = {xs->shape[0], xs->shape[1], one, xs->shape[2]},
                  *wd[4] = {ws->shape[0], ws->shape[1], one, ws->shape[2]};
    RX_RETURN_IF_ERROR(onnx_reshape_to(I, n, x, xd, 4, &x, &xv));
    RX_RETURN_IF_ERROR(onnx_reshape_to(I, n, w, wd, 4, &w, &r));
    kern[1] = kern[0], st[1] = st[0], dil[1] = dil[0], opad[1] = opad[0], ext[1] = ext[0];
    pads[3] = pads[1], pads[1] = pads[0];
    kern[0] = st[0] = dil[0] = ext[0] = 1, opad[0] = pads[0] = pads[2] = 0;
  }
  /* the weight: [g, C/g, O/g, k...] -> [g, O/g, C/g, k...] -> [O, C/g, k...], flipped */
  int64_t cg = ws->shape[0]->value / g, perm[6] = {0, 2, 1, 3, 4, 5};
  d[0] = rx_sym_const(I->m, g), d[1] = rx_sym_const(I->m, cg), d[2] = ws->shape[1];
  for (int i = 0; i < K; i++) d[3 + i] = rx_sym_const(I->m, kern[i]);
  RX_RETURN_IF_ERROR(onnx_reshape_to(I, n, w, d, K + 3, &w, &r));
  const rx_attr *at[4] = {rx_attr_ints(I->m, "axes", perm, K + 3)};
  EXA(RX_OP_permute, w, at, 1, w);
  d[1] = rx_sym_mul(I->m, d[0], ws->shape[1]), d[2] = rx_sym_const(I->m, cg);
  RX_RETURN_IF_ERROR(onnx_reshape_to(I, n, w, d + 1, K + 2, &w, &r));
  rx_var *wv = r;
  for (int i = 0; i < K; i++) {
    if (kern[i] == 1) continue;
    rx_node *a[3] = {rx_arg_prim(I->b, RX_DTYPE_I64, rx_sym_const(I->m, kern[i] - 1)),
                     rx_arg_prim(I->b, RX_DTYPE_I64, rx_sym_const(I->m, -1)),
                     rx_arg_prim(I->b, RX_DTYPE_I64, rx_sym_const(I->m, -1))},
            *rev;
    at[0] = rx_attr_dtype(I->m, "dtype", RX_DTYPE_I64);
    RX_RETURN_IF_ERROR(onnx_exa(I, n, RX_OP_arange, a, 3, at, 1, &rev, &r));
    a[0] = w;
    a[1] = rev;
    at[0] = rx_attr_int(I->m, "axis", 2 + i);
    RX_RETURN_IF_ERROR(onnx_exa(I, n, RX_OP_take, a, 2, at, 1, &w, &wv));
  }
  /* the input, zeros inserted; the padding of each side, its negative part cropped */
  int64_t cp[6], crop[6], axes[3] = {2, 3, 4};
  for (int i = 0; i < K; i++) {
    if (st[i] > 1) RX_RETURN_IF_ERROR(zero_insert(I, n, x, 2 + i, st[i], &x, &xv));
    cp[i] = ext[i] - 1 - pads[i];
    cp[i + K] = ext[i] - 1 - pads[i + K] + opad[i] - (st[i] - 1);
  }
  bool cropping = false;
  for (int i = 0; i < 2 * K; i++) {
    crop[i] = cp[i] < 0 ? -cp[i] : 0;
    if (cp[i] < 0) cp[i] = 0, cropping = true;
  }
  if (cropping) {
    const rx_sinfo *cs = rx_var_sinfo(xv);
    const rx_expr *b[3], *e[3];
    for (int i = 0; i < K; i++) {
      b[i] = rx_sym_const(I->m, crop[i]);
      e[i] = rx_sym_sub(I->m, cs->shape[2 + i], rx_sym_const(I->m, crop[i + K]));
    }
    at[0] = rx_attr_ints(I->m, "axes", axes, K);
    at[1] = rx_attr_exprs(I->m, "begin", b, K);
    at[2] = rx_attr_exprs(I->m, "end", e, K);
    EXA(RX_OP_strided_slice, x, at, 3, x);
    xv = r;
  }
  if (K == 3) { /* stride 1, the dilations, the padding cp */
    win cw = {.k = 3};
    for (int i = 0; i < 3; i++) {
      cw.kern[i] = kern[i], cw.st[i] = 1, cw.dil[i] = dil[i], cw.ext[i] = ext[i];
      cw.pads[i] = cp[i], cw.pads[i + 3] = cp[i + 3];
    }
    RX_RETURN_IF_ERROR(conv3(I, n, x, xv, w, rx_var_sinfo(wv), &cw, g, &x, &r));
  } else {
    int64_t one2[2] = {1, 1};
    at[0] = rx_attr_ints(I->m, "strides", one2, 2);
    at[1] = rx_attr_ints(I->m, "padding", cp, 4);
    at[2] = rx_attr_ints(I->m, "dilation", dil, 2);
    at[3] = rx_attr_int(I->m, "groups", g);
    RX_RETURN_IF_ERROR(onnx_exa(I, n, RX_OP_conv2d, (rx_node *[]){x, w}, 2, at, 4, &x, &r));
  }
  const rx_sinfo *ys = rx_var_sinfo(r);
  if (k == 1) {
    d[0] = ys->shape[0], d[1] = ys->shape[1], d[2] = ys->shape[3];
    RX_RETURN_IF_ERROR(onnx_reshape_to(I, n, x, d, 3, &x, &r));
  }
  if (onnx_input(n, 2)) { /* bias [O] as [1, O, 1...] */
    rx_node *bias;
    const rx_expr *bd[5] = {one, ys->shape[1], one, one, one};
    RX_RETURN_IF_ERROR(onnx_arg(I, n, onnx_input(n, 2), &bias));
    RX_RETURN_IF_ERROR(onnx_reshape_to(I, n, bias, bd, k + 2, &bias, &r));
    EX2(RX_OP_add, x, bias, x);
  }
  onnx_def_tensor(I, n, r);
  return NULL;
}

/* BatchNormalization with training_mode=1: Y normalized by the batch's own mean and (biased)
 * variance over every axis but 1, and the running mean and variance outputs, each input_mean /
 * input_var * momentum + the batch's * (1 - momentum) (the ONNX reference) */
static rx_status batch_norm_training(imp *I, const Onnx__NodeProto *n) {
  const rx_sinfo *xs;
  RX_RETURN_IF_ERROR(onnx_known_shape(I, n, 0, 2, SYM_MAX, &xs));
  int64_t axes[SYM_MAX];
  int na = 0;
  for (int k = 0; k < xs->ndim; k++)
    if (k != 1) axes[na++] = k;
  double mom = onnx_attr_f(n, "momentum", 0.9);
  rx_node *a[5] = {0}, *mu, *d, *var, *t;
  rx_var *r = NULL;
  for (int k = 0; k < 5; k++) RX_RETURN_IF_ERROR(onnx_arg(I, n, onnx_input(n, (size_t)k), &a[k]));
  const rx_attr *at[2] = {rx_attr_ints(I->m, "axes", axes, na),
                          rx_attr_bool(I->m, "keepdims", true)};
  RX_RETURN_IF_ERROR(onnx_exa(I, n, RX_OP_mean, &a[0], 1, at, 2, &mu, NULL));
  EX2(RX_OP_subtract, a[0], mu, d);
  EX2(RX_OP_multiply, d, d, d);
  RX_RETURN_IF_ERROR(onnx_exa(I, n, RX_OP_mean, &d, 1, at, 1, &var, NULL));
  RX_RETURN_IF_ERROR(onnx_exa(I, n, RX_OP_mean, &a[0], 1, at, 1, &mu, NULL));
  rx_node *y[5] = {a[0], a[1], a[2], mu, var};
  const rx_attr *ea = rx_attr_float(I->m, "epsilon", onnx_attr_f(n, "epsilon", 1e-5));
  RX_RETURN_IF_ERROR(onnx_emit(I, n, RX_OP_batch_norm, y, 5, &ea, 1, &r));
  onnx_def_tensor(I, n, r);
  for (int k = 1; k < 3 && k < (int)n->n_output; k++) {
    if (!n->output[k] || !n->output[k][0]) continue;
    EX2(RX_OP_multiply, a[2 + k], FL(mom), t);
    EX2(RX_OP_multiply, k == 1 ? mu : var, FL(1 - mom), d);
    EX2(RX_OP_add, t, d, t);
    onnx_def_named(I, n->output[k], r);
  }
  return NULL;
}

/* GlobalAveragePool and GlobalMaxPool: a mean or max over H and W */
rx_status onnx_do_global_pool(imp *I, const Onnx__NodeProto *n, const onnx_op *row) {
  const char *op = n->op_type;
  rx_node *a[5] = {0};
  const rx_attr *at[4];
  rx_var *r = NULL;
  int rank = onnx_rank_of(onnx_input(n, 0) ? onnx_get(I, onnx_input(n, 0)) : NULL);
  if (rank < 3) return onnx_node_err(I, n, "expects an input of known rank >= 3");
  int64_t axes[SYM_MAX];
  int na = 0;
  for (int k = 2; k < rank && na < SYM_MAX; k++) axes[na++] = k;
  RX_RETURN_IF_ERROR(onnx_arg(I, n, onnx_input(n, 0), &a[0]));
  at[0] = rx_attr_ints(I->m, "axes", axes, na);
  at[1] = rx_attr_bool(I->m, "keepdims", true);
  RX_RETURN_IF_ERROR(onnx_emit(I, n, op[6] == 'A' ? RX_OP_mean : RX_OP_max, a, 1, at, 2, &r));
  onnx_def_tensor(I, n, r);
  return NULL;
}

/* BatchNormalization (inference: the Y output) */
rx_status onnx_do_batch_norm(imp *I, const Onnx__NodeProto *n, const onnx_op *row) {
  rx_node *a[5] = {0};
  const rx_attr *at[4];
  rx_var *r = NULL;
  if (onnx_attr_i(n, "training_mode", 0)) return batch_norm_training(I, n);
  for (size_t k = 1; k < n->n_output; k++)
    if (n->output[k] && n->output[k][0])
      return onnx_node_err(I, n, "the running mean / variance outputs are not supported");
  for (int k = 0; k < 5; k++) RX_RETURN_IF_ERROR(onnx_arg(I, n, onnx_input(n, (size_t)k), &a[k]));
  at[0] = rx_attr_float(I->m, "epsilon", onnx_attr_f(n, "epsilon", 1e-5));
  RX_RETURN_IF_ERROR(onnx_emit(I, n, RX_OP_batch_norm, a, 5, at, 1, &r));
  onnx_def_tensor(I, n, r);
  return NULL;
}
