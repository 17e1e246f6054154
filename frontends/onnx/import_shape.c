/* frontends/onnx/import_shape.c: the ONNX importer's shape and layout operators: Constant,
 * Identity, Shape, Size, Squeeze and Unsqueeze, Concat, Reshape, Expand, ConstantOfShape,
 * Transpose, Flatten, DepthToSpace and SpaceToDepth. On shape values (import.c) they stay
 * symbolic: a shape computation folds into symbolic dims. */
#include "import_int.h"

#include <stdlib.h>
#include <string.h>

/* Constant: a weight, a folded constant, or a symbolic value (value_int, value_ints, value_float)
 */
rx_status onnx_do_constant(imp *I, const Onnx__NodeProto *n, const onnx_op *row) {
  const Onnx__TensorProto *t = onnx_const_tensor(n);
  if (t) {
    if (onnx_is_weight(t, true)) return NULL; /* a parameter already */
    return onnx_def_constant(I, n, n->output[0], t);
  }
  const Onnx__AttributeProto *x;
  val *v = onnx_def(I, n->output[0]);
  if ((x = onnx_attr(n, "value_float"))) {
    v->kind = V_FCONST;
    v->f = x->f;
  } else if ((x = onnx_attr(n, "value_int"))) {
    v->kind = V_SYM;
    v->slen = 1;
    v->s[0] = rx_sym_const(I->m, x->i);
  } else if ((x = onnx_attr(n, "value_ints")) && x->n_ints <= SYM_MAX) {
    v->kind = V_SYM;
    v->sndim = 1;
    v->slen = (int)x->n_ints;
    for (size_t k = 0; k < x->n_ints; k++) v->s[k] = rx_sym_const(I->m, x->ints[k]);
  } else {
    I->nvals--;
    return onnx_node_err(I, n, "unsupported Constant attribute");
  }
  return NULL;
}

/* Identity: the input under a new name */
rx_status onnx_do_identity(imp *I, const Onnx__NodeProto *n, const onnx_op *row) {
  val *src = onnx_input(n, 0) ? onnx_get(I, onnx_input(n, 0)) : NULL;
  if (!src) return onnx_node_err(I, n, "input is not defined");
  onnx_def_alias(I, n, src);
  return NULL;
}

/* Shape: the input's dims as a symbolic value (start and end attributes) */
rx_status onnx_do_shape(imp *I, const Onnx__NodeProto *n, const onnx_op *row) {
  val *x = onnx_input(n, 0) ? onnx_get(I, onnx_input(n, 0)) : NULL;
  const rx_sinfo *si = onnx_tsinfo(x);
  const rx_expr *len = NULL; /* of a shape value: its length */
  if (x && (x->kind == V_SYM || x->kind == V_FCONST))
    len = rx_sym_const(I->m, x->kind == V_SYM ? x->slen : 1);
  else if (!si || si->kind != RX_SINFO_TENSOR || !si->shape || si->ndim > SYM_MAX)
    return onnx_node_err(I, n, "the input's shape is not known (rank and dims needed)");
  int ndim = len ? x->sndim : si->ndim;
  int64_t start = onnx_attr_i(n, "start", 0), end = onnx_attr_i(n, "end", ndim);
  if (start < 0) start += ndim;
  if (end < 0) end += ndim;
  if (start < 0) start = 0;
  if (end > ndim) end = ndim;
  val out = {.name = n->output[0], .kind = V_SYM, .sndim = 1, .slen = 0};
  for (int64_t k = start; k < end; k++) out.s[out.slen++] = len ? len : si->shape[k];
  *onnx_def(I, n->output[0]) = out;
  return NULL;
}

/* Size: the product of the input's dims as a symbolic 0-d value (an i64 tensor where used as
 * data) */
rx_status onnx_do_size(imp *I, const Onnx__NodeProto *n, const onnx_op *row) {
  val *x = onnx_input(n, 0) ? onnx_get(I, onnx_input(n, 0)) : NULL;
  const rx_sinfo *si = onnx_tsinfo(x);
  const rx_expr *count = rx_sym_const(I->m, 1);
  if (x && x->kind == V_SYM) /* of a shape value: its length */
    count = rx_sym_const(I->m, x->slen);
  else if (!x || x->kind != V_FCONST) {
    if (!si || si->kind != RX_SINFO_TENSOR || !si->shape)
      return onnx_node_err(I, n, "the input's shape is not known (rank and dims needed)");
    for (int k = 0; k < si->ndim; k++) count = rx_sym_mul(I->m, count, si->shape[k]);
  }
  val out = {.name = n->output[0], .kind = V_SYM, .sndim = 0, .slen = 1};
  out.s[0] = count;
  *onnx_def(I, n->output[0]) = out;
  return NULL;
}

/* Unsqueeze and Squeeze (axes as attribute or input) */
rx_status onnx_do_squeeze(imp *I, const Onnx__NodeProto *n, const onnx_op *row) {
  const char *op = n->op_type;
  rx_node *a[5] = {0};
  const rx_attr *at[4];
  rx_var *r = NULL;
  bool unsq = op[0] == 'U';
  int64_t axes[SYM_MAX];
  int na;
  RX_RETURN_IF_ERROR(onnx_int_list(I, n, 1, "axes", axes, &na));
  val *x = onnx_input(n, 0) ? onnx_get(I, onnx_input(n, 0)) : NULL;
  if (!x) return onnx_node_err(I, n, "input is not defined");
  if (x->kind == V_SYM) {
    val out = *x;
    out.name = n->output[0];
    if (unsq && x->sndim == 0 && na == 1 && (axes[0] == 0 || axes[0] == -1))
      out.sndim = 1;
    else if (!unsq && x->sndim == 1 && x->slen == 1 && (na <= 0 || axes[0] == 0 || axes[0] == -1))
      out.sndim = 0;
    else
      return onnx_node_err(I, n, "unsupported on a shape value of rank %d", x->sndim);
    *onnx_def(I, n->output[0]) = out;
    return NULL;
  }
  RX_RETURN_IF_ERROR(onnx_arg(I, n, onnx_input(n, 0), &a[0]));
  int rank = onnx_rank_of(x);
  if (unsq) {
    if (na < 0) return onnx_node_err(I, n, "axes are required");
    for (int k = 0; k < na; k++)
      if (axes[k] < 0 && rank >= 0) axes[k] += rank + na;
    at[0] = rx_attr_ints(I->m, "axes", axes, na);
    RX_RETURN_IF_ERROR(onnx_emit(I, n, RX_OP_expand_dims, a, 1, at, 1, &r));
  } else {
    if (na > 0) at[0] = rx_attr_ints(I->m, "axes", axes, na);
    RX_RETURN_IF_ERROR(onnx_emit(I, n, RX_OP_squeeze, a, 1, at, na > 0 ? 1 : 0, &r));
  }
  onnx_def_tensor(I, n, r);
  return NULL;
}

/* Concat: of symbolic values at import, else concat */
/* Concat's operand k (k > 0) whose dims off the axis the analyzer cannot show equal to operand
 * 0's (a UNet's skip [b, c, h, w] and its upsampled input [b, c, 2 * ((h + 1) / 2) - (h % 2),
 * w]): a valid model has them equal at run time, so the operand is match_cast to operand 0's
 * dims there, which the VM checks when it runs. Provably different dims are left to concat's
 * own error. */
static rx_status concat_cast(imp *I, const Onnx__NodeProto *n, size_t k, rx_node **field) {
  val *v0 = onnx_get(I, onnx_input(n, 0)), *v = onnx_get(I, onnx_input(n, k));
  const rx_sinfo *s0 = onnx_tsinfo(v0), *sk = onnx_tsinfo(v);
  if (!s0 || !sk || s0->kind != RX_SINFO_TENSOR || sk->kind != RX_SINFO_TENSOR || !s0->shape ||
      !sk->shape || s0->ndim != sk->ndim || sk->ndim > SYM_MAX)
    return NULL;
  int64_t axis = onnx_attr_i(n, "axis", 0);
  if (axis < 0) axis += sk->ndim;
  const rx_expr *dims[SYM_MAX];
  bool cast = false;
  for (int d = 0; d < sk->ndim; d++) {
    dims[d] = sk->shape[d];
    if (d == axis || s0->shape[d] == dims[d]) continue;
    const rx_expr *eq = sym_expr_cmp(I->m->ctx, RX_EXPR_EQ, s0->shape[d], dims[d]);
    rx_tribool t = sym_analyzer_prove(I->an, eq);
    if (t == RX_UNKNOWN) {
      dims[d] = s0->shape[d];
      cast = true;
    }
  }
  rx_var *c;
  if (!cast) return NULL;
  if (!onnx_match_cast_to(I, v->var, sk->dtype, sk->ndim, dims, &c))
    return onnx_node_err(I, n, "match_cast of input %zu ('%s') to the dims of input 0 failed", k,
                         onnx_input(n, k));
  *field = rx_arg_var(I->b, c);
  return NULL;
}

rx_status onnx_do_concat(imp *I, const Onnx__NodeProto *n, const onnx_op *row) {
  rx_node *a[5] = {0};
  const rx_attr *at[4];
  rx_var *r = NULL;
  bool all_sym = n->n_input > 0;
  for (size_t k = 0; k < n->n_input; k++) {
    val *v = onnx_input(n, k) ? onnx_get(I, onnx_input(n, k)) : NULL;
    if (!v) return onnx_node_err(I, n, "input %zu is not defined", k);
    if (v->kind != V_SYM) all_sym = false;
  }
  if (all_sym) {
    val out = {.name = n->output[0], .kind = V_SYM, .sndim = 1};
    for (size_t k = 0; k < n->n_input; k++) {
      val *v = onnx_get(I, onnx_input(n, k));
      if (out.slen + v->slen > SYM_MAX) return onnx_node_err(I, n, "shape value too long");
      for (int j = 0; j < v->slen; j++) out.s[out.slen++] = v->s[j];
    }
    *onnx_def(I, n->output[0]) = out;
    return NULL;
  }
  rx_node **fields = base_calloc(n->n_input, sizeof *fields);
  rx_status s = NULL;
  for (size_t k = 0; k < n->n_input && !s; k++) s = onnx_arg(I, n, onnx_input(n, k), &fields[k]);
  for (size_t k = 1; k < n->n_input && !s; k++) s = concat_cast(I, n, k, &fields[k]);
  rx_var *tup = NULL;
  if (!s) s = rx_emit_tuple(I->b, fields, (int)n->n_input, NULL, &tup);
  free(fields);
  RX_RETURN_IF_ERROR(s);
  a[0] = rx_arg_var(I->b, tup);
  at[0] = rx_attr_int(I->m, "axis", onnx_attr_i(n, "axis", 0));
  RX_RETURN_IF_ERROR(onnx_emit(I, n, RX_OP_concat, a, 1, at, 1, &r));
  onnx_def_tensor(I, n, r);
  return NULL;
}

/* The one value of tensor t (ConstantOfShape's value) of dtype dt: a float's in *f, an
 * integer's or bool's exactly in *i (a double holds integers only up to 2^53; torchvision's
 * INT64_MAX is 2^63 - 1) and as a double in *f. */
static rx_status one_value(imp *I, const Onnx__NodeProto *n, const Onnx__TensorProto *t,
                           rx_dtype dt, double *f, int64_t *i) {
  if (ir_dtype_is_float(dt)) {
    size_t c;
    float *v = onnx_tensor_floats(t, &c);
    bool ok = v && c == 1;
    if (ok) *f = v[0];
    free(v);
    return ok ? NULL : onnx_node_err(I, n, "the value must be one float element");
  }
  void *d = NULL;
  size_t nb = 0;
  RX_RETURN_IF_ERROR(
      onnx_at_node(I, n, onnx_tensor_data(t, I->file, "value", I->base_dir, &d, &nb)));
  bool ok = nb == (size_t)(ir_dtype_bits(dt) + 7) / 8;
  if (ok && (dt == RX_DTYPE_I64 || dt == RX_DTYPE_U64)) memcpy(i, d, sizeof *i);
  if (ok && dt == RX_DTYPE_U32) *i = *(const uint32_t *)d;
  if (ok && dt == RX_DTYPE_U16) *i = *(const uint16_t *)d;
  if (ok && dt == RX_DTYPE_I32) *i = *(const int32_t *)d;
  if (ok && dt == RX_DTYPE_I16) *i = *(const int16_t *)d;
  if (ok && dt == RX_DTYPE_I8) *i = *(const int8_t *)d;
  if (ok && (dt == RX_DTYPE_U8 || dt == RX_DTYPE_BOOL)) *i = *(const uint8_t *)d;
  *f = (double)*i;
  free(d);
  return ok ? NULL : onnx_node_err(I, n, "the value must be one element");
}

/* Reshape of x (argument xa, struct info si) to dims with a -1 whose divisibility the analyzer
 * cannot show (x: f32[n] to [-1, 2]): the shape as a run-time value, the VM's reshape infers the
 * -1 and checks the element count, then a match_cast to dims with the -1 as x's element count
 * over the product of the others (checked by the VM too). False when there is no such -1, or
 * the count is provably not divisible (the reshape's own error stands). */
static bool reshape_checked(imp *I, const Onnx__NodeProto *n, rx_node *xa, const rx_sinfo *si,
                            const rx_expr **dims, int nd, rx_var **out) {
  int infer = -1;
  const rx_expr *po = rx_sym_const(I->m, 1);
  for (int k = 0; k < nd; k++) {
    if (rx_expr_is_const(dims[k], -1))
      infer = k;
    else if (dims[k]->kind == RX_EXPR_CONST && dims[k]->value < 0)
      return false;
    else
      po = rx_sym_mul(I->m, po, dims[k]);
  }
  if (infer < 0 || !si || si->kind != RX_SINFO_TENSOR || !si->shape || rx_expr_is_const(po, 0))
    return false;
  const rx_expr *px = rx_sym_const(I->m, 1);
  for (int k = 0; k < si->ndim; k++) px = rx_sym_mul(I->m, px, si->shape[k]);
  const rx_expr *rem = sym_analyzer_simplify(I->an, sym_expr_floormod(I->m->ctx, px, po));
  if (rem->kind == RX_EXPR_CONST) return false; /* provably (not) divisible: not this case */
  val sv = {.kind = V_SYM, .sndim = 1, .slen = nd};
  memcpy(sv.s, dims, sizeof *dims * (size_t)nd);
  rx_var *t, *st, *rr;
  rx_node *a[2];
  rx_status e = onnx_sym_tensor(I, n, &sv, &t);
  a[0] = e ? NULL : rx_arg_var(I->b, t);
  if (!e) e = rx_emit_op(I->b, onnx_op_name(RX_OP_tensor_to_shape), a, 1, NULL, 0, NULL, &st);
  a[0] = xa;
  a[1] = e ? NULL : rx_arg_var(I->b, st);
  if (!e) e = rx_emit_op(I->b, onnx_op_name(RX_OP_reshape), a, 2, NULL, 0, NULL, &rr);
  if (e) {
    rx_status_free(e);
    return false;
  }
  const rx_expr *want[SYM_MAX];
  memcpy(want, dims, sizeof *dims * (size_t)nd);
  want[infer] = sym_analyzer_simplify(I->an, rx_sym_floordiv(I->m, px, po));
  return onnx_match_cast_to(I, rr, si->dtype, nd, want, out);
}

/* Expand of x to the shape dims[0..nd): bidirectional broadcast, x + zeros(the result's shape)
 * (x || false for bool). Each result dim from x's dim a and the shape's b (aligned at the right):
 * a where b is 1, b where a is 1, else a constant a (a valid model has b equal to it or 1: a shape
 * from run time need not be known), else b. A dim of x that the analyzer cannot show equal to
 * the result's (BERT's token types [1, min(seq, 512)] to [batch, seq]) is match_cast to it,
 * which the VM checks when it runs. */
static rx_status expand_to(imp *I, const Onnx__NodeProto *n, val *x, const rx_expr **dims, int nd,
                           rx_var **out) {
  rx_node *a[2];
  const rx_attr *at;
  rx_var *xv = x->kind == V_TENSOR ? x->var : NULL;
  if (x->kind == V_SYM) /* a shape value (a small integer ConstantOfShape): as a tensor */
    RX_RETURN_IF_ERROR(onnx_sym_tensor(I, n, x, &xv));
  if (x->kind == V_FCONST) { /* a float constant: full([1, ...], f) */
    const rx_expr *ones[SYM_MAX];
    for (int k = 0; k < x->sndim && k < SYM_MAX; k++) ones[k] = rx_sym_const(I->m, 1);
    a[0] = rx_arg_shape(I->b, ones, x->sndim < SYM_MAX ? x->sndim : SYM_MAX);
    a[1] = rx_arg_float(I->b, x->f);
    at = rx_attr_dtype(I->m, "dtype", x->sdt ? x->sdt : RX_DTYPE_F32);
    RX_RETURN_IF_ERROR(onnx_emit(I, n, RX_OP_full, a, 2, &at, 1, &xv));
  }
  const rx_sinfo *si = xv ? rx_var_sinfo(xv) : NULL;
  if (!si || si->kind != RX_SINFO_TENSOR)
    return onnx_node_err(I, n, "input 0 ('%s') must be a tensor", onnx_input(n, 0));
  const rx_expr *res[SYM_MAX], *xd[SYM_MAX];
  int rn = si->shape && si->ndim > nd ? si->ndim : nd;
  memcpy(res, dims, sizeof *dims * (size_t)nd);
  if (si->shape && rn <= SYM_MAX) {
    const rx_expr *one = rx_sym_const(I->m, 1);
    bool cast = false;
    for (int k = 0; k < rn; k++) {
      int ka = k - (rn - si->ndim), kb = k - (rn - nd);
      const rx_expr *da = ka >= 0 ? si->shape[ka] : one, *db = kb >= 0 ? dims[kb] : one;
      bool a_fixed = da->kind == RX_EXPR_CONST && da->value != 1;
      res[k] = rx_expr_is_const(db, 1) || da == db || a_fixed ? da : db;
      if (ka < 0) continue;
      xd[ka] = da;
      if (da != res[k] && da->kind != RX_EXPR_CONST &&
          sym_analyzer_prove(I->an, sym_expr_cmp(I->m->ctx, RX_EXPR_EQ, da, res[k])) != RX_TRUE) {
        xd[ka] = res[k];
        cast = true;
      }
    }
    if (cast && !onnx_match_cast_to(I, xv, si->dtype, si->ndim, xd, &xv))
      return onnx_node_err(I, n, "match_cast of input 0 to the expanded dims failed");
  }
  a[0] = rx_arg_shape(I->b, res, rn);
  at = rx_attr_dtype(I->m, "dtype", si->dtype);
  rx_var *z;
  RX_RETURN_IF_ERROR(onnx_emit(I, n, RX_OP_zeros, a, 1, &at, 1, &z));
  a[0] = rx_arg_var(I->b, xv);
  a[1] = rx_arg_var(I->b, z);
  return onnx_emit(I, n, si->dtype == RX_DTYPE_BOOL ? RX_OP_logical_or : RX_OP_add, a, 2, NULL, 0,
                   out);
}

/* Reshape, Expand and ConstantOfShape to a shape computed from symbolic values or at run time */
rx_status onnx_do_reshape_expand(imp *I, const Onnx__NodeProto *n, const onnx_op *row) {
  const char *op = n->op_type;
  rx_node *a[5] = {0};
  const rx_attr *at[4];
  rx_var *r = NULL;
  val *shp;
  bool cos_ = op[0] == 'C';
  RX_RETURN_IF_ERROR(onnx_sym_input(I, n, cos_ ? 0 : 1, &shp));
  const rx_expr *dims[SYM_MAX];
  val *x = cos_ ? NULL : onnx_get(I, onnx_input(n, 0));
  if (!cos_ && !x) return onnx_node_err(I, n, "input is not defined");
  const rx_sinfo *si = onnx_tsinfo(x);
  for (int k = 0; k < shp->slen; k++) {
    dims[k] = shp->s[k];
    if (op[0] != 'R' && dims[k]->kind == RX_EXPR_CONST && dims[k]->value < 0)
      return onnx_node_err(I, n,
                           "dim %d of the shape is negative (%lld); each must be a size (>= 0)", k,
                           (long long)dims[k]->value);
    if (op[0] == 'R' && rx_expr_is_const(dims[k], 0) && !onnx_attr_i(n, "allowzero", 0)) {
      if (!si || !si->shape || k >= si->ndim)
        return onnx_node_err(I, n, "a 0 in the target shape copies an unknown input dim");
      dims[k] = si->shape[k];
    }
  }
  if (op[0] == 'R') {
    RX_RETURN_IF_ERROR(onnx_arg(I, n, onnx_input(n, 0), &a[0]));
    a[1] = rx_arg_shape(I->b, dims, shp->slen);
    rx_status e = rx_emit_op(I->b, onnx_op_name(RX_OP_reshape), a, 2, NULL, 0, NULL, &r);
    if (e && reshape_checked(I, n, a[0], si, dims, shp->slen, &r)) {
      rx_status_free(e); /* the -1's divisibility is checked when the program runs */
      e = NULL;
    }
    RX_RETURN_IF_ERROR(onnx_at_node(I, n, e));
  } else if (op[0] == 'E') {
    RX_RETURN_IF_ERROR(expand_to(I, n, x, dims, shp->slen, &r));
  } else {
    const Onnx__AttributeProto *va = onnx_attr(n, "value");
    rx_dtype dt = RX_DTYPE_F32;
    double fill = 0;
    int64_t ifill = 0;
    if (va && va->t) {
      const Onnx__TensorProto *t = va->t;
      if (!onnx_dtype_of(t->data_type, &dt)) return onnx_node_err(I, n, "unsupported value type");
      RX_RETURN_IF_ERROR(one_value(I, n, t, dt, &fill, &ifill));
    }
    /* a short integer or bool vector stays a shape value (the Expand shapes of PyTorch) */
    int64_t count = 1;
    for (int k = 0; k < shp->slen; k++)
      count = dims[k]->kind == RX_EXPR_CONST && count <= SYM_MAX ? count * dims[k]->value : -1;
    if (!ir_dtype_is_float(dt) && shp->slen <= 1 && count >= 0 && count <= SYM_MAX) {
      val out = {.name = n->output[0], .kind = V_SYM, .sndim = shp->slen, .sdt = dt};
      out.slen = (int)count;
      for (int k = 0; k < out.slen; k++) out.s[k] = rx_sym_const(I->m, ifill);
      *onnx_def(I, n->output[0]) = out;
      return NULL;
    }
    a[0] = rx_arg_shape(I->b, dims, shp->slen);
    a[1] = ir_dtype_is_float(dt) ? rx_arg_float(I->b, fill) : rx_arg_int(I->b, ifill);
    at[0] = rx_attr_dtype(I->m, "dtype", dt);
    RX_RETURN_IF_ERROR(onnx_emit(I, n, RX_OP_full, a, 2, at, 1, &r));
  }
  onnx_def_tensor(I, n, r);
  return NULL;
}

/* Transpose: permute */
/* Reshape; with a target shape known at import, a reshape to it */
rx_status onnx_do_reshape(imp *I, const Onnx__NodeProto *n, const onnx_op *row) {
  rx_node *a[5] = {0};
  rx_var *r = NULL;
  val *xv = onnx_input(n, 0) ? onnx_get(I, onnx_input(n, 0)) : NULL,
      *tv = onnx_input(n, 1) ? onnx_get(I, onnx_input(n, 1)) : NULL;
  if (xv && tv && xv->kind == V_SYM && tv->kind == V_SYM && tv->slen <= 1) {
    /* a shape value to a vector ([-1], [0] or [its length]) or to a scalar ([], one value):
     * the same values */
    int64_t want = tv->slen ? (tv->s[0]->kind == RX_EXPR_CONST ? tv->s[0]->value : -2) : 1;
    if (want == -1 || want == xv->slen || (want == 0 && !onnx_attr_i(n, "allowzero", 0))) {
      val out = *xv;
      out.name = n->output[0];
      out.sndim = tv->slen;
      out.tvar = NULL;
      *onnx_def(I, n->output[0]) = out;
      return NULL;
    }
  }
  if (onnx_input(n, 1) && onnx_get(I, onnx_input(n, 1)) &&
      onnx_get(I, onnx_input(n, 1))->kind == V_TENSOR) {
    /* a target shape computed at run time: reshape to the Shape value (rank-only; the VM checks
     * the element count, and infers a -1), then match_cast to fresh dims */
    val *x = onnx_input(n, 0) ? onnx_get(I, onnx_input(n, 0)) : NULL,
        *sv = onnx_get(I, onnx_input(n, 1));
    int len = onnx_runtime_len(sv);
    const rx_sinfo *si = onnx_tsinfo(x);
    if (!si || len < 0 || onnx_rank_of(sv) != 1)
      return onnx_node_err(I, n,
                           "a target shape computed at run time must be a 1-D integer tensor "
                           "of constant length at most %d",
                           SYM_MAX);
    rx_var *t, *rr;
    a[0] = rx_arg_var(I->b, sv->var);
    if (!onnx_attr_i(n, "allowzero", 0) && si->shape) {
      /* a 0 copies x's dim at its index: where(shape == 0, x's dims (0 past x's rank), shape);
       * the VM's reshape infers a -1 after that */
      val xs = {.kind = V_SYM, .sndim = 1, .slen = len};
      for (int k = 0; k < len; k++) xs.s[k] = rx_sym_const(I->m, 0);
      for (int k = 0; k < len && k < si->ndim; k++) xs.s[k] = si->shape[k];
      rx_var *xt, *z;
      RX_RETURN_IF_ERROR(onnx_sym_tensor(I, n, &xs, &xt));
      a[1] = rx_arg_int(I->b, 0);
      RX_RETURN_IF_ERROR(onnx_emit(I, n, RX_OP_equal, a, 2, NULL, 0, &z));
      rx_node *w[3] = {rx_arg_var(I->b, z), rx_arg_var(I->b, xt), a[0]};
      RX_RETURN_IF_ERROR(onnx_emit(I, n, RX_OP_where, w, 3, NULL, 0, &z));
      a[0] = rx_arg_var(I->b, z);
    }
    RX_RETURN_IF_ERROR(onnx_emit(I, n, RX_OP_tensor_to_shape, a, 1, NULL, 0, &t));
    a[0] = rx_arg_var(I->b, x->var);
    a[1] = rx_arg_var(I->b, t);
    RX_RETURN_IF_ERROR(onnx_emit(I, n, RX_OP_reshape, a, 2, NULL, 0, &rr));
    const rx_expr *dims[SYM_MAX];
    for (int k = 0; k < len; k++) dims[k] = sv->rt ? sv->s[k] : onnx_fresh_dim(I);
    if (!onnx_match_cast_to(I, rr, si->dtype, len, dims, &r))
      return onnx_node_err(I, n, "match_cast of the reshaped value failed");
    onnx_def_tensor(I, n, r);
    return NULL;
  }
  return onnx_do_reshape_expand(I, n, row);
}

rx_status onnx_do_transpose(imp *I, const Onnx__NodeProto *n, const onnx_op *row) {
  rx_node *a[5] = {0};
  const rx_attr *at[4];
  rx_var *r = NULL;
  RX_RETURN_IF_ERROR(onnx_arg(I, n, onnx_input(n, 0), &a[0]));
  const Onnx__AttributeProto *p = onnx_attr(n, "perm");
  int na = 0;
  if (p && p->n_ints) {
    at[0] = rx_attr_ints(I->m, "axes", p->ints, (int)p->n_ints);
    na = 1;
  }
  RX_RETURN_IF_ERROR(onnx_emit(I, n, RX_OP_permute, a, 1, at, na, &r));
  onnx_def_tensor(I, n, r);
  return NULL;
}

/* DepthToSpace (mode DCR or CRD) and SpaceToDepth of x [N, C, H, W] with blocksize b: a
 * reshape to rank 6, a permute and a reshape back. */
rx_status onnx_do_depth_space(imp *I, const Onnx__NodeProto *n, const onnx_op *row) {
  const rx_sinfo *xs;
  RX_RETURN_IF_ERROR(onnx_known_shape(I, n, 0, 4, 4, &xs));
  int64_t bs = onnx_attr_i(n, "blocksize", 0);
  if (bs < 1 || bs > (1 << 16)) return onnx_node_err(I, n, "blocksize must be a positive integer");
  bool to_space = row->form == ONNX_FORM_depth_to_space, crd = onnx_attr_s_is(n, "mode", "CRD");
  if (!crd && !onnx_attr_s_is(n, "mode", "DCR") && !onnx_attr_s_is(n, "mode", ""))
    return onnx_node_err(I, n, "mode must be \"DCR\" or \"CRD\"");
  rx_module *m = I->m;
  const rx_expr *const *d = xs->shape, *b = rx_sym_const(m, bs), *bb = rx_sym_const(m, bs * bs);
  const rx_expr *mid[6], *fin[4];
  int64_t perm[6];
  if (to_space) {
    const rx_expr *c = rx_sym_floordiv(m, d[1], bb);
    const rx_expr *dcr[6] = {d[0], b, b, c, d[2], d[3]}, *cr[6] = {d[0], c, b, b, d[2], d[3]};
    static const int64_t p_dcr[6] = {0, 3, 4, 1, 5, 2}, p_crd[6] = {0, 1, 4, 2, 5, 3};
    memcpy(mid, crd ? cr : dcr, sizeof mid);
    memcpy(perm, crd ? p_crd : p_dcr, sizeof perm);
    const rx_expr *f[4] = {d[0], c, rx_sym_mul(m, d[2], b), rx_sym_mul(m, d[3], b)};
    memcpy(fin, f, sizeof fin);
  } else {
    const rx_expr *h = rx_sym_floordiv(m, d[2], b), *w = rx_sym_floordiv(m, d[3], b);
    const rx_expr *s[6] = {d[0], d[1], h, b, w, b};
    static const int64_t p[6] = {0, 3, 5, 1, 2, 4};
    memcpy(mid, s, sizeof mid);
    memcpy(perm, p, sizeof perm);
    const rx_expr *f[4] = {d[0], rx_sym_mul(m, d[1], bb), h, w};
    memcpy(fin, f, sizeof fin);
  }
  rx_node *x;
  rx_var *r = NULL;
  RX_RETURN_IF_ERROR(onnx_arg(I, n, onnx_input(n, 0), &x));
  RX_RETURN_IF_ERROR(onnx_reshape_to(I, n, x, mid, 6, &x, &r));
  const rx_attr *at = rx_attr_ints(m, "axes", perm, 6);
  EXA(RX_OP_permute, x, &at, 1, x);
  RX_RETURN_IF_ERROR(onnx_reshape_to(I, n, x, fin, 4, &x, &r));
  onnx_def_tensor(I, n, r);
  return NULL;
}

/* Flatten: reshape to 2-D at axis */
rx_status onnx_do_flatten(imp *I, const Onnx__NodeProto *n, const onnx_op *row) {
  rx_node *a[5] = {0};
  rx_var *r = NULL;
  val *x = onnx_input(n, 0) ? onnx_get(I, onnx_input(n, 0)) : NULL;
  const rx_sinfo *si = onnx_tsinfo(x);
  if (!si || si->kind != RX_SINFO_TENSOR || !si->shape)
    return onnx_node_err(I, n, "the input's shape is not known (rank and dims needed)");
  int64_t axis = onnx_attr_i(n, "axis", 1);
  if (axis < 0) axis += si->ndim;
  if (axis < 0 || axis > si->ndim)
    return onnx_node_err(I, n, "axis %lld out of range for rank %d",
                         (long long)onnx_attr_i(n, "axis", 1), si->ndim);
  const rx_expr *dims[2] = {rx_sym_const(I->m, 1), rx_sym_const(I->m, 1)};
  for (int k = 0; k < si->ndim; k++)
    dims[k >= axis] = rx_sym_mul(I->m, dims[k >= axis], si->shape[k]);
  a[0] = rx_arg_var(I->b, x->var);
  a[1] = rx_arg_shape(I->b, dims, 2);
  RX_RETURN_IF_ERROR(onnx_emit(I, n, RX_OP_reshape, a, 2, NULL, 0, &r));
  onnx_def_tensor(I, n, r);
  return NULL;
}
