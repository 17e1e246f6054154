/* frontends/onnx/import_index.c: the ONNX importer's indexing operators: Gather,
 * GatherElements, GatherND, Slice, Split, Range, Trilu, Pad, Tile, TopK, OneHot and EyeLike,
 * most of them composed of arange, take and where (issue 17). */
#include "import_int.h"

#include <stdlib.h>
#include <string.h>

/* Trilu: where(keep, x, 0) with keep[i, j] = j - i >= k (upper) or j - i <= k (lower) over the
 * last two dims, built from two aranges. */
rx_status onnx_do_trilu(imp *I, const Onnx__NodeProto *n, const onnx_op *row) {
  val *x = onnx_input(n, 0) ? onnx_get(I, onnx_input(n, 0)) : NULL;
  const rx_sinfo *si = onnx_tsinfo(x);
  if (!si || si->kind != RX_SINFO_TENSOR || !si->shape || si->ndim < 2)
    return onnx_node_err(I, n, "expects an input of known shape and rank >= 2");
  const rx_expr *k = rx_sym_const(I->m, 0);
  rx_node *kt = NULL; /* k computed at run time: a tensor (it may be negative, not a size) */
  val *kin = onnx_input(n, 1) ? onnx_get(I, onnx_input(n, 1)) : NULL;
  if (kin && kin->kind == V_TENSOR) {
    if (onnx_runtime_len(kin) != 1) return onnx_node_err(I, n, "k must be one integer");
    kt = rx_arg_var(I->b, kin->var);
  } else if (onnx_input(n, 1)) {
    val *kv;
    RX_RETURN_IF_ERROR(onnx_sym_input(I, n, 1, &kv));
    if (kv->slen != 1) return onnx_node_err(I, n, "k must be a scalar");
    k = kv->s[0];
  }
  const rx_expr *rows_n = si->shape[si->ndim - 2], *cols_n = si->shape[si->ndim - 1];
  rx_node *a[3];
  rx_var *rows, *rows2, *cols, *diff, *keep, *r;
  a[0] = rx_arg_prim(I->b, RX_DTYPE_I64, rx_sym_const(I->m, 0));
  a[1] = rx_arg_prim(I->b, RX_DTYPE_I64, rows_n);
  RX_RETURN_IF_ERROR(onnx_emit(I, n, RX_OP_arange, a, 2, NULL, 0, &rows));
  int64_t ax1 = 1;
  const rx_attr *at = rx_attr_ints(I->m, "axes", &ax1, 1);
  a[0] = rx_arg_var(I->b, rows);
  RX_RETURN_IF_ERROR(onnx_emit(I, n, RX_OP_expand_dims, a, 1, &at, 1, &rows2));
  a[0] = rx_arg_prim(I->b, RX_DTYPE_I64, rx_sym_const(I->m, 0));
  a[1] = rx_arg_prim(I->b, RX_DTYPE_I64, cols_n);
  RX_RETURN_IF_ERROR(onnx_emit(I, n, RX_OP_arange, a, 2, NULL, 0, &cols));
  a[0] = rx_arg_var(I->b, cols);
  a[1] = rx_arg_var(I->b, rows2);
  RX_RETURN_IF_ERROR(onnx_emit(I, n, RX_OP_subtract, a, 2, NULL, 0, &diff));
  a[0] = rx_arg_var(I->b, diff);
  a[1] = kt ? kt : rx_arg_prim(I->b, RX_DTYPE_I64, k);
  RX_RETURN_IF_ERROR(onnx_emit(I, n,
                               onnx_attr_i(n, "upper", 1) ? RX_OP_greater_equal : RX_OP_less_equal,
                               a, 2, NULL, 0, &keep));
  a[0] = rx_arg_var(I->b, keep);
  a[1] = rx_arg_var(I->b, x->var);
  a[2] = rx_arg_float(I->b, 0.0);
  RX_RETURN_IF_ERROR(onnx_emit(I, n, RX_OP_where, a, 3, NULL, 0, &r));
  onnx_def_tensor(I, n, r);
  return NULL;
}

/* A slice bound for a dim d: constants beyond the int32 range (ONNX's "to the end" markers,
 * INT64_MAX / INT64_MIN) become d and -d - 1, which clamp the same way. */
static const rx_expr *slice_bound(imp *I, const rx_expr *v, const rx_expr *d) {
  if (v->kind != RX_EXPR_CONST || !d) return v;
  if (v->value > INT32_MAX) return d;
  if (v->value < INT32_MIN) return rx_sym_sub(I->m, rx_sym_const(I->m, -1), d);
  return v;
}

/* Split sizes must add up to the axis extent (ONNX; onnxruntime refuses others): constant ones
 * against a constant extent at import, naming the sizes and the extent; otherwise x (argument
 * *xa) is match_cast to the extent their sum, which the VM checks when it runs (sizes from data:
 * their values are bound by then, each checked to be a size). */
static rx_status split_sizes(imp *I, const Onnx__NodeProto *n, val *x, int axis,
                             const rx_expr *const *sizes, int ns, rx_node **xa) {
  const rx_sinfo *si = onnx_tsinfo(x);
  const rx_expr *sum = rx_sym_const(I->m, 0), *ext = si->shape[axis];
  rx_strbuf sb = {0};
  for (int k = 0; k < ns; k++) {
    sum = rx_sym_add(I->m, sum, sizes[k]);
    if (k) base_strbuf_printf(&sb, ", ");
    sym_expr_print(&sb, sizes[k]);
  }
  sum = sym_analyzer_simplify(I->an, sum);
  char *list = base_strbuf_take(&sb);
  rx_status s = NULL;
  for (int k = 0; k < ns && !s; k++)
    if (sizes[k]->kind == RX_EXPR_CONST && sizes[k]->value < 0)
      s = onnx_node_err(I, n, "split size %d is negative (sizes [%s])", k, list ? list : "");
  if (!s && sum->kind == RX_EXPR_CONST && ext->kind == RX_EXPR_CONST && sum->value != ext->value)
    s = onnx_node_err(I, n,
                      "the split sizes [%s] add up to %lld, but axis %d of the input has extent "
                      "%lld",
                      list ? list : "", (long long)sum->value, axis, (long long)ext->value);
  free(list);
  RX_RETURN_IF_ERROR(s);
  if (sum == ext || si->ndim > SYM_MAX) return NULL;
  const rx_expr *dims[SYM_MAX];
  memcpy(dims, si->shape, sizeof *dims * (size_t)si->ndim);
  dims[axis] = sum;
  rx_var *c;
  if (!onnx_match_cast_to(I, x->var, si->dtype, si->ndim, dims, &c))
    return onnx_node_err(I, n, "match_cast of the input to the split sizes' sum failed");
  *xa = rx_arg_var(I->b, c);
  return NULL;
}

rx_status onnx_do_split(imp *I, const Onnx__NodeProto *n, const onnx_op *row) {
  val *x = onnx_input(n, 0) ? onnx_get(I, onnx_input(n, 0)) : NULL;
  const rx_sinfo *si = onnx_tsinfo(x);
  if (!si || si->kind != RX_SINFO_TENSOR || !si->shape)
    return onnx_node_err(I, n, "the input's shape is not known (rank and dims needed)");
  int64_t axis = onnx_attr_i(n, "axis", 0);
  if (axis < 0) axis += si->ndim;
  if (axis < 0 || axis >= si->ndim) return onnx_node_err(I, n, "axis out of range");
  int nout = (int)n->n_output;
  if (nout > SYM_MAX) return onnx_node_err(I, n, "over %d outputs", SYM_MAX);
  const rx_expr *sizes[SYM_MAX];
  int ns;
  RX_RETURN_IF_ERROR(onnx_sym_list(I, n, 1, "split", sizes, &ns));
  if (ns >= 0 && ns != nout) return onnx_node_err(I, n, "%d split sizes for %d outputs", ns, nout);
  rx_node *xa = rx_arg_var(I->b, x->var);
  if (ns >= 0) RX_RETURN_IF_ERROR(split_sizes(I, n, x, (int)axis, sizes, ns, &xa));
  rx_var *tup = NULL;
  bool all_const = ns >= 0;
  for (int k = 0; k < ns; k++) all_const = all_const && sizes[k]->kind == RX_EXPR_CONST;
  const rx_attr *at[2];
  at[0] = rx_attr_int(I->m, "axis", axis);
  if (ns < 0) {
    at[1] = rx_attr_int(I->m, "sections", nout);
    RX_RETURN_IF_ERROR(onnx_emit(I, n, RX_OP_split, &xa, 1, at, 2, &tup));
  } else if (all_const) {
    int64_t idx[SYM_MAX], acc = 0;
    for (int k = 0; k + 1 < ns; k++) idx[k] = acc += sizes[k]->value;
    at[1] = rx_attr_ints(I->m, "indices", idx, ns - 1);
    RX_RETURN_IF_ERROR(onnx_emit(I, n, RX_OP_split, &xa, 1, at, 2, &tup));
  }
  const rx_expr *begin = rx_sym_const(I->m, 0);
  for (int k = 0; k < nout; k++) {
    rx_var *r;
    if (tup) {
      RX_RETURN_IF_ERROR(
          onnx_at_node(I, n, rx_emit_get_item(I->b, rx_arg_var(I->b, tup), k, NULL, &r)));
    } else { /* symbolic sizes: one strided_slice per output */
      const rx_expr *end = rx_sym_add(I->m, begin, sizes[k]);
      const rx_attr *sa[3] = {rx_attr_ints(I->m, "axes", &axis, 1),
                              rx_attr_exprs(I->m, "begin", &begin, 1),
                              rx_attr_exprs(I->m, "end", &end, 1)};
      RX_RETURN_IF_ERROR(onnx_emit(I, n, RX_OP_strided_slice, &xa, 1, sa, 3, &r));
      begin = end;
    }
    if (n->output[k] && n->output[k][0]) onnx_def_named(I, n->output[k], r);
  }
  return NULL;
}

rx_status onnx_do_slice(imp *I, const Onnx__NodeProto *n, const onnx_op *row) {
  val *x = onnx_input(n, 0) ? onnx_get(I, onnx_input(n, 0)) : NULL;
  if (!x) return onnx_node_err(I, n, "input is not defined");
  const rx_expr *st[SYM_MAX], *en[SYM_MAX], *ax[SYM_MAX], *sp[SYM_MAX];
  int nst, nen, nax, nsp;
  RX_RETURN_IF_ERROR(onnx_sym_list(I, n, 1, "starts", st, &nst));
  RX_RETURN_IF_ERROR(onnx_sym_list(I, n, 2, "ends", en, &nen));
  RX_RETURN_IF_ERROR(onnx_sym_list(I, n, 3, "axes", ax, &nax));
  RX_RETURN_IF_ERROR(onnx_sym_list(I, n, 4, "steps", sp, &nsp));
  if (nst < 0 || nen != nst || (nax >= 0 && nax != nst) || (nsp >= 0 && nsp != nst))
    return onnx_node_err(I, n, "starts, ends, axes and steps must be given with one length");
  int64_t axes[SYM_MAX], steps[SYM_MAX];
  int rank = x->kind == V_SYM ? 1 : onnx_rank_of(x);
  if (rank < 0) return onnx_node_err(I, n, "the input's rank is not known");
  for (int k = 0; k < nst; k++) {
    if (nax >= 0 && ax[k]->kind != RX_EXPR_CONST)
      return onnx_node_err(I, n, "axes must be constant");
    if (nsp >= 0 && (sp[k]->kind != RX_EXPR_CONST || sp[k]->value == 0))
      return onnx_node_err(I, n, "steps must be nonzero constants");
    axes[k] = nax >= 0 ? ax[k]->value : k;
    if (axes[k] < 0) axes[k] += rank;
    if (axes[k] < 0 || axes[k] >= rank) return onnx_node_err(I, n, "axis out of range");
    steps[k] = nsp >= 0 ? sp[k]->value : 1;
  }
  if (x->kind == V_SYM) { /* slicing a shape value: Python slice semantics on constants */
    if (x->sndim != 1 || nst != 1) return onnx_node_err(I, n, "slicing a scalar shape value");
    if (st[0]->kind != RX_EXPR_CONST || en[0]->kind != RX_EXPR_CONST)
      return onnx_node_err(I, n, "slicing a shape value needs constant starts and ends");
    int64_t len = x->slen, s = steps[0], b = st[0]->value, e = en[0]->value;
    if (b < 0) b += len;
    if (e < 0) e += len;
    int64_t lo = s > 0 ? 0 : -1, hi = s > 0 ? len : len - 1;
    b = b < lo ? lo : b > hi ? hi : b;
    e = e < lo ? lo : e > hi ? hi : e;
    val out = {.name = n->output[0], .kind = V_SYM, .sndim = 1, .slen = 0};
    for (int64_t i = b; s > 0 ? i < e : i > e; i += s) out.s[out.slen++] = x->s[i];
    *onnx_def(I, n->output[0]) = out;
    return NULL;
  }
  const rx_sinfo *si = onnx_tsinfo(x);
  for (int k = 0; k < nst; k++) {
    const rx_expr *d = si && si->shape ? si->shape[axes[k]] : NULL;
    st[k] = slice_bound(I, st[k], d);
    en[k] = slice_bound(I, en[k], d);
  }
  rx_node *xa = rx_arg_var(I->b, x->var);
  const rx_attr *at[4] = {
      rx_attr_ints(I->m, "axes", axes, nst), rx_attr_exprs(I->m, "begin", st, nst),
      rx_attr_exprs(I->m, "end", en, nst), rx_attr_ints(I->m, "strides", steps, nst)};
  rx_var *r;
  RX_RETURN_IF_ERROR(onnx_emit(I, n, RX_OP_strided_slice, &xa, 1, at, 4, &r));
  onnx_def_tensor(I, n, r);
  return NULL;
}

/* Gather: of a symbolic value at import, else take */
rx_status onnx_do_gather(imp *I, const Onnx__NodeProto *n, const onnx_op *row) {
  rx_node *a[5] = {0};
  const rx_attr *at[4];
  rx_var *r = NULL;
  val *x = onnx_input(n, 0) ? onnx_get(I, onnx_input(n, 0)) : NULL,
      *idx = onnx_input(n, 1) ? onnx_get(I, onnx_input(n, 1)) : NULL;
  if (!x || !idx) return onnx_node_err(I, n, "an input is not defined");
  int64_t axis = onnx_attr_i(n, "axis", 0);
  if (x->kind == V_SYM && idx->kind == V_SYM) {
    if (x->sndim != 1 || axis != 0) return onnx_node_err(I, n, "gather from a scalar shape value");
    val out = {.name = n->output[0], .kind = V_SYM, .sndim = idx->sndim, .slen = idx->slen};
    for (int k = 0; k < idx->slen; k++) {
      if (idx->s[k]->kind != RX_EXPR_CONST)
        return onnx_node_err(I, n, "gather from a shape value at a non-constant index");
      int64_t i = idx->s[k]->value;
      if (i < 0) i += x->slen;
      if (i < 0 || i >= x->slen)
        return onnx_node_err(I, n, "index %lld out of range for a shape of length %d",
                             (long long)idx->s[k]->value, x->slen);
      out.s[k] = x->s[i];
    }
    *onnx_def(I, n->output[0]) = out;
    return NULL;
  }
  RX_RETURN_IF_ERROR(onnx_arg(I, n, onnx_input(n, 0), &a[0]));
  const rx_sinfo *si = onnx_tsinfo(x);
  if (idx->kind == V_SYM) { /* constant indices: their tensor, negative ones from the end */
    val iv = *idx;
    iv.tvar = NULL;
    int64_t ax = si && axis < 0 ? axis + si->ndim : axis;
    const rx_expr *dim = si && si->shape && ax >= 0 && ax < si->ndim ? si->shape[ax] : NULL;
    for (int k = 0; k < iv.slen && dim && dim->kind == RX_EXPR_CONST; k++)
      if (iv.s[k]->kind == RX_EXPR_CONST &&
          (iv.s[k]->value < -dim->value || iv.s[k]->value >= dim->value))
        return onnx_node_err(I, n, "index %lld out of range [-%lld, %lld) on axis %lld",
                             (long long)iv.s[k]->value, (long long)dim->value,
                             (long long)dim->value, (long long)ax);
    for (int k = 0; k < iv.slen; k++)
      if (iv.s[k]->kind == RX_EXPR_CONST && iv.s[k]->value < 0 && si && si->shape && ax >= 0 &&
          ax < si->ndim)
        iv.s[k] = rx_sym_add(I->m, iv.s[k], si->shape[ax]);
    rx_var *t;
    RX_RETURN_IF_ERROR(onnx_sym_tensor(I, n, &iv, &t));
    a[1] = rx_arg_var(I->b, t);
  } else {
    RX_RETURN_IF_ERROR(onnx_arg(I, n, onnx_input(n, 1), &a[1]));
  }
  at[0] = rx_attr_int(I->m, "axis", axis);
  RX_RETURN_IF_ERROR(onnx_emit(I, n, RX_OP_take, a, 2, at, 1, &r));
  onnx_def_tensor(I, n, r);
  return NULL;
}

/* GatherElements: take_along_axis (axis default 0) */
rx_status onnx_do_gather_elements(imp *I, const Onnx__NodeProto *n, const onnx_op *row) {
  rx_node *a[2];
  rx_var *r = NULL;
  RX_RETURN_IF_ERROR(onnx_arg(I, n, onnx_input(n, 0), &a[0]));
  RX_RETURN_IF_ERROR(onnx_arg(I, n, onnx_input(n, 1), &a[1]));
  const rx_attr *at = rx_attr_int(I->m, "axis", onnx_attr_i(n, "axis", 0));
  RX_RETURN_IF_ERROR(onnx_emit(I, n, RX_OP_take_along_axis, a, 2, &at, 1, &r));
  onnx_def_tensor(I, n, r);
  return NULL;
}

/* Range: of symbolic values at import, else arange */
rx_status onnx_do_range(imp *I, const Onnx__NodeProto *n, const onnx_op *row) {
  rx_node *a[5] = {0};
  rx_var *r = NULL;
  val *v[3];
  bool all_const = true;
  for (int k = 0; k < 3; k++) {
    RX_RETURN_IF_ERROR(onnx_sym_input(I, n, (size_t)k, &v[k]));
    if (v[k]->s[0]->kind != RX_EXPR_CONST) all_const = false;
  }
  if (all_const) {
    int64_t st = v[0]->s[0]->value, en = v[1]->s[0]->value, step = v[2]->s[0]->value;
    if (step == 0) /* ONNX Runtime's words */
      return onnx_node_err(I, n, "delta in Range operator can not be zero!");
    val out = {.name = n->output[0], .kind = V_SYM, .sndim = 1};
    for (int64_t i = st; step > 0 ? i < en : i > en; i += step) {
      if (out.slen == SYM_MAX) goto tensor_range;
      out.s[out.slen++] = rx_sym_const(I->m, i);
    }
    *onnx_def(I, n->output[0]) = out;
    return NULL;
  }
tensor_range:
  for (int k = 0; k < 3; k++) a[k] = rx_arg_prim(I->b, RX_DTYPE_I64, v[k]->s[0]);
  RX_RETURN_IF_ERROR(onnx_emit(I, n, RX_OP_arange, a, 3, NULL, 0, &r));
  onnx_def_tensor(I, n, r);
  return NULL;
}

/* arange(lo, hi) as i64, a 1-D tensor of length hi - lo */
rx_status onnx_iota(imp *I, const Onnx__NodeProto *n, const rx_expr *lo, const rx_expr *hi,
                    rx_node **out) {
  rx_node *a[2] = {I64(lo), I64(hi)};
  const rx_attr *at = rx_attr_dtype(I->m, "dtype", RX_DTYPE_I64);
  rx_var *r;
  RX_RETURN_IF_ERROR(onnx_emit(I, n, RX_OP_arange, a, 2, &at, 1, &r));
  *out = rx_arg_var(I->b, r);
  return NULL;
}

/* x with `count` unit dims appended (a 1-D index along axis a of a rank-(a + 1 + count) result,
 * shaped to broadcast against it); x itself when count is 0 */
rx_status onnx_trailing_units(imp *I, const Onnx__NodeProto *n, rx_node *x, int count,
                              rx_node **out) {
  *out = x;
  if (count <= 0) return NULL;
  int64_t axes[SYM_MAX];
  for (int k = 0; k < count && k < SYM_MAX; k++) axes[k] = k + 1;
  const rx_attr *at = rx_attr_ints(I->m, "axes", axes, count < SYM_MAX ? count : SYM_MAX);
  rx_var *r;
  RX_RETURN_IF_ERROR(onnx_emit(I, n, RX_OP_expand_dims, &x, 1, &at, 1, &r));
  *out = rx_arg_var(I->b, r);
  return NULL;
}

/* a mod m of an i64 tensor a and a positive m, floored: a - (a // m) m (relaxc's integer divide
 * floors), so the result is in [0, m) */
rx_status onnx_imod(imp *I, const Onnx__NodeProto *n, rx_node *a, const rx_expr *m, rx_node **out) {
  rx_var *r;
  rx_node *q;
  EX2(RX_OP_divide, a, I64(m), q);
  EX2(RX_OP_multiply, q, I64(m), q);
  EX2(RX_OP_subtract, a, q, *out);
  return NULL;
}

/* cols - rows of an [nr, nc] grid of i64 (the diagonal offset j - i of each element; Trilu and
 * EyeLike compare it with k) */
static rx_status diag_offset(imp *I, const Onnx__NodeProto *n, const rx_expr *nr, const rx_expr *nc,
                             rx_node **out) {
  rx_var *r;
  rx_node *rows, *cols;
  const rx_expr *zero = rx_sym_const(I->m, 0);
  RX_RETURN_IF_ERROR(onnx_iota(I, n, zero, nr, &rows));
  RX_RETURN_IF_ERROR(onnx_trailing_units(I, n, rows, 1, &rows));
  RX_RETURN_IF_ERROR(onnx_iota(I, n, zero, nc, &cols));
  EX2(RX_OP_subtract, cols, rows, *out);
  return NULL;
}

/* x taken along axis at the i64 indices idx (*r: its variable) */
rx_status onnx_take_at(imp *I, const Onnx__NodeProto *n, rx_node *x, rx_node *idx, int64_t axis,
                       rx_node **out, rx_var **r) {
  rx_node *a[2] = {x, idx};
  const rx_attr *at = rx_attr_int(I->m, "axis", axis);
  RX_RETURN_IF_ERROR(onnx_emit(I, n, RX_OP_take, a, 2, &at, 1, r));
  *out = rx_arg_var(I->b, *r);
  return NULL;
}

/* The input's tensor struct info with known shape, or NULL. */
const rx_sinfo *onnx_shaped(imp *I, const Onnx__NodeProto *n, size_t i) {
  const rx_sinfo *si = onnx_tsinfo(onnx_input(n, i) ? onnx_get(I, onnx_input(n, i)) : NULL);
  return si && si->kind == RX_SINFO_TENSOR && si->shape && si->ndim <= SYM_MAX ? si : NULL;
}

/* x (shape si) at the grid of the per-axis i64 index vectors idx[k] (NULL: arange of the dim):
 * one take from x flattened, at sum_k idx[k] * stride_k with each idx[k] shaped to broadcast
 * along its axis (one gather, so that fusion inlines the index arithmetic; a chain of takes
 * along each axis would load an intermediate at a data-dependent index, which it cannot). */
rx_status onnx_gather_grid(imp *I, const Onnx__NodeProto *n, const rx_sinfo *si, rx_node *x,
                           rx_node **idx, rx_var **out) {
  int rank = si->ndim;
  rx_var *r = NULL;
  rx_node *flat = NULL, *t;
  const rx_expr *stride = rx_sym_const(I->m, 1);
  for (int k = rank - 1; k >= 0; k--) {
    t = idx[k];
    if (!t) RX_RETURN_IF_ERROR(onnx_iota(I, n, rx_sym_const(I->m, 0), si->shape[k], &t));
    if (!rx_expr_is_const(stride, 1)) EX2(RX_OP_multiply, t, I64(stride), t);
    RX_RETURN_IF_ERROR(onnx_trailing_units(I, n, t, rank - 1 - k, &t));
    if (flat) EX2(RX_OP_add, t, flat, t);
    flat = t;
    stride = rx_sym_mul(I->m, stride, si->shape[k]);
  }
  rx_node *a[2] = {x, rx_arg_shape(I->b, &stride, 1)};
  RX_RETURN_IF_ERROR(onnx_emit(I, n, RX_OP_reshape, a, 2, NULL, 0, &r));
  return onnx_take_at(I, n, rx_arg_var(I->b, r), flat, 0, &t, out);
}

/* Pad (pads and value attributes before opset 11; then inputs, and axes from 18): along each
 * padded axis of length d with pads b (before) and e (after), the index o = arange(-b, d + e)
 * mapped into [0, d): clamped (edge; constant too, whose positions outside [0, d) a mask then
 * sets to the value), folded back at the ends (reflect, period 2 (d - 1)) or wrapped (wrap);
 * x gathered at the grid of those indices. Constant pads may be negative (they crop); pads
 * computed at run time are bound as sizes, so the VM rejects a negative one. */
rx_status onnx_do_pad(imp *I, const Onnx__NodeProto *n, const onnx_op *row) {
  (void)row;
  const rx_sinfo *si = onnx_shaped(I, n, 0);
  if (!si || si->ndim < 1)
    return onnx_node_err(I, n, "the input's shape is not known (rank and dims needed)");
  int rank = si->ndim;
  const rx_expr *pads[SYM_MAX];
  int np, na = -1;
  int64_t axes[SYM_MAX];
  RX_RETURN_IF_ERROR(onnx_sym_list(I, n, 1, "pads", pads, &np));
  if (onnx_input(n, 3)) RX_RETURN_IF_ERROR(onnx_int_list(I, n, 3, "axes", axes, &na));
  if (na < 0)
    for (na = 0; na < rank; na++) axes[na] = na;
  if (np != 2 * na)
    return onnx_node_err(I, n, "expects %d pads (a begin and an end per axis), got %d", 2 * na, np);
  int mode = onnx_attr_s_is(n, "mode", "") || onnx_attr_s_is(n, "mode", "constant") ? 'c'
             : onnx_attr_s_is(n, "mode", "edge")                                    ? 'e'
             : onnx_attr_s_is(n, "mode", "reflect")                                 ? 'r'
             : onnx_attr_s_is(n, "mode", "wrap")                                    ? 'w'
                                                                                    : 0;
  if (!mode) return onnx_node_err(I, n, "mode must be constant, edge, reflect or wrap");
  rx_var *r = NULL;
  rx_node *idx[SYM_MAX] = {0}, *mask = NULL;
  bool any = false;
  const rx_expr *zero = rx_sym_const(I->m, 0), *one = rx_sym_const(I->m, 1);
  for (int k = 0; k < na; k++) {
    int64_t ax = axes[k] < 0 ? axes[k] + rank : axes[k];
    if (ax < 0 || ax >= rank)
      return onnx_node_err(I, n, "axis %lld out of range", (long long)axes[k]);
    const rx_expr *b = pads[k], *e = pads[k + na], *d = si->shape[ax];
    if (rx_expr_is_const(b, 0) && rx_expr_is_const(e, 0)) continue;
    any = true;
    rx_node *o, *t, *u;
    RX_RETURN_IF_ERROR(onnx_iota(I, n, rx_sym_sub(I->m, zero, b), rx_sym_add(I->m, d, e), &o));
    if (mode == 'c' || mode == 'e') { /* clamp to [0, d - 1] */
      EX2(RX_OP_maximum, o, I64(zero), idx[ax]);
      EX2(RX_OP_minimum, idx[ax], I64(rx_sym_sub(I->m, d, one)), idx[ax]);
    } else if (mode == 'w') {
      RX_RETURN_IF_ERROR(onnx_imod(I, n, o, d, &idx[ax]));
    } else { /* reflect: t = o mod 2 (d - 1), then t or 2 (d - 1) - t */
      const rx_expr *per =
          rx_sym_max(I->m, rx_sym_mul(I->m, rx_sym_const(I->m, 2), rx_sym_sub(I->m, d, one)), one);
      RX_RETURN_IF_ERROR(onnx_imod(I, n, o, per, &t));
      EX2(RX_OP_subtract, I64(per), t, u);
      EX2(RX_OP_less, t, I64(d), idx[ax]);
      EX3(RX_OP_where, idx[ax], t, u, idx[ax]);
    }
    if (mode == 'c') { /* inside: 0 <= o < d, shaped to broadcast along ax */
      EX2(RX_OP_greater_equal, o, I64(zero), t);
      EX2(RX_OP_less, o, I64(d), u);
      EX2(RX_OP_logical_and, t, u, t);
      RX_RETURN_IF_ERROR(onnx_trailing_units(I, n, t, rank - 1 - (int)ax, &t));
      if (mask) EX2(RX_OP_logical_and, mask, t, t);
      mask = t;
    }
  }
  if (!any) { /* nothing padded */
    onnx_def_alias(I, n, onnx_get(I, onnx_input(n, 0)));
    return NULL;
  }
  rx_node *cur;
  RX_RETURN_IF_ERROR(
      onnx_gather_grid(I, n, si, rx_arg_var(I->b, onnx_get(I, onnx_input(n, 0))->var), idx, &r));
  cur = rx_arg_var(I->b, r);
  if (mask) {
    rx_node *value = FL(I->opset < 11 ? onnx_attr_f(n, "value", 0.0) : 0.0);
    if (I->opset >= 11 && onnx_input(n, 2))
      RX_RETURN_IF_ERROR(onnx_arg(I, n, onnx_input(n, 2), &value));
    EX3(RX_OP_where, mask, cur, value, cur);
  }
  onnx_def_tensor(I, n, r);
  return NULL;
}

/* Tile: along each axis of length d repeated r times, the index arange(0, d r) mod d; x
 * gathered at the grid of those indices */
rx_status onnx_do_tile(imp *I, const Onnx__NodeProto *n, const onnx_op *row) {
  (void)row;
  const rx_sinfo *si = onnx_shaped(I, n, 0);
  if (!si) return onnx_node_err(I, n, "the input's shape is not known (rank and dims needed)");
  const rx_expr *reps[SYM_MAX];
  int nr;
  RX_RETURN_IF_ERROR(onnx_sym_list(I, n, 1, "repeats", reps, &nr));
  if (nr != si->ndim)
    return onnx_node_err(I, n, "expects %d repeats (one per axis), got %d", si->ndim, nr);
  rx_var *r = NULL;
  rx_node *idx[SYM_MAX] = {0};
  bool any = false;
  for (int ax = 0; ax < si->ndim; ax++) {
    if (rx_expr_is_const(reps[ax], 1)) continue;
    rx_node *o;
    const rx_expr *d = si->shape[ax];
    RX_RETURN_IF_ERROR(onnx_iota(I, n, rx_sym_const(I->m, 0), rx_sym_mul(I->m, d, reps[ax]), &o));
    RX_RETURN_IF_ERROR(onnx_imod(I, n, o, d, &idx[ax]));
    any = true;
  }
  if (!any) {
    onnx_def_alias(I, n, onnx_get(I, onnx_input(n, 0)));
    return NULL;
  }
  RX_RETURN_IF_ERROR(
      onnx_gather_grid(I, n, si, rx_arg_var(I->b, onnx_get(I, onnx_input(n, 0))->var), idx, &r));
  onnx_def_tensor(I, n, r);
  return NULL;
}

/* A scalar integer (a symbolic value) of input i: a constant, a shape value, or a tensor bound
 * at run time (a float tensor is cast to i64 first, as OneHot's depth may be). */
rx_status onnx_scalar_input(imp *I, const Onnx__NodeProto *n, size_t i, const rx_expr **out) {
  val *v = onnx_input(n, i) ? onnx_get(I, onnx_input(n, i)) : NULL;
  const rx_sinfo *si = onnx_tsinfo(v);
  if (v && v->kind == V_FCONST) {
    *out = rx_sym_const(I->m, (int64_t)v->f);
    return NULL;
  }
  if (si && si->kind == RX_SINFO_TENSOR && ir_dtype_is_float(si->dtype)) {
    rx_node *a = rx_arg_var(I->b, v->var);
    const rx_attr *at = rx_attr_dtype(I->m, "dtype", RX_DTYPE_I64);
    val tmp = {.name = NULL, .kind = V_TENSOR};
    RX_RETURN_IF_ERROR(onnx_emit(I, n, RX_OP_cast, &a, 1, &at, 1, &tmp.var));
    RX_RETURN_IF_ERROR(onnx_runtime_sym(I, n, &tmp));
    *out = tmp.s[0];
    return tmp.slen == 1 ? NULL : onnx_node_err(I, n, "input %zu must be a scalar", i);
  }
  RX_RETURN_IF_ERROR(onnx_sym_input(I, n, i, &v));
  if (v->slen != 1) return onnx_node_err(I, n, "input %zu must be a scalar", i);
  *out = v->s[0];
  return NULL;
}

/* TopK: topk(x, k=[K]), K from input 1 (opset 10; a constant or a value bound at run time) or
 * the k attribute; the values and the i64 indices. sorted=0 gets them sorted too (ONNX allows
 * any order then). */
rx_status onnx_do_topk(imp *I, const Onnx__NodeProto *n, const onnx_op *row) {
  const rx_expr *k;
  if (I->opset < 10) {
    const Onnx__AttributeProto *ka = onnx_attr(n, "k");
    if (!ka || !ka->has_i) return onnx_node_err(I, n, "the k attribute is required");
    k = rx_sym_const(I->m, ka->i);
  } else {
    RX_RETURN_IF_ERROR(onnx_scalar_input(I, n, 1, &k));
  }
  rx_node *x;
  RX_RETURN_IF_ERROR(onnx_arg(I, n, onnx_input(n, 0), &x));
  const rx_attr *at[3] = {rx_attr_exprs(I->m, "k", &k, 1),
                          rx_attr_int(I->m, "axis", onnx_attr_i(n, "axis", -1)),
                          rx_attr_bool(I->m, "largest", onnx_attr_i(n, "largest", 1) != 0)};
  rx_var *tup, *r;
  RX_RETURN_IF_ERROR(onnx_emit(I, n, row->op, &x, 1, at, 3, &tup));
  for (int j = 0; j < 2 && j < (int)n->n_output; j++) {
    if (!n->output[j] || !n->output[j][0]) continue;
    RX_RETURN_IF_ERROR(
        onnx_at_node(I, n, rx_emit_get_item(I->b, rx_arg_var(I->b, tup), j, NULL, &r)));
    onnx_def_named(I, n->output[j], r);
  }
  return NULL;
}

/* OneHot(indices, depth, values [off, on]): equal(indices with a unit dim at axis (negative
 * ones counted from depth), arange(depth) along axis) as 0 / 1 indices into values */
rx_status onnx_do_one_hot(imp *I, const Onnx__NodeProto *n, const onnx_op *row) {
  (void)row;
  const rx_sinfo *si = onnx_shaped(I, n, 0);
  if (!si) return onnx_node_err(I, n, "the indices' shape is not known (rank and dims needed)");
  const rx_expr *depth;
  RX_RETURN_IF_ERROR(onnx_scalar_input(I, n, 1, &depth));
  int rank = si->ndim;
  int64_t axis = onnx_attr_i(n, "axis", -1);
  if (axis < -rank - 1 || axis > rank)
    return onnx_node_err(I, n, "axis %lld out of range for indices of rank %d", (long long)axis,
                         rank);
  if (axis < 0) axis += rank + 1;
  rx_var *r = NULL;
  rx_node *idx, *vals, *t, *ar;
  RX_RETURN_IF_ERROR(onnx_arg(I, n, onnx_input(n, 0), &idx));
  RX_RETURN_IF_ERROR(onnx_arg(I, n, onnx_input(n, 2), &vals));
  const rx_attr *at = rx_attr_dtype(I->m, "dtype", RX_DTYPE_I64);
  if (si->dtype != RX_DTYPE_I64) {
    RX_RETURN_IF_ERROR(onnx_emit(I, n, RX_OP_cast, &idx, 1, &at, 1, &r));
    idx = rx_arg_var(I->b, r);
  }
  EX2(RX_OP_less, idx, I64(rx_sym_const(I->m, 0)), t);
  EX2(RX_OP_add, idx, I64(depth), ar);
  EX3(RX_OP_where, t, ar, idx, idx);
  const rx_attr *ea = rx_attr_ints(I->m, "axes", &axis, 1);
  RX_RETURN_IF_ERROR(onnx_emit(I, n, RX_OP_expand_dims, &idx, 1, &ea, 1, &r));
  idx = rx_arg_var(I->b, r);
  RX_RETURN_IF_ERROR(onnx_iota(I, n, rx_sym_const(I->m, 0), depth, &ar));
  RX_RETURN_IF_ERROR(onnx_trailing_units(I, n, ar, rank - (int)axis, &ar));
  EX2(RX_OP_equal, idx, ar, t);
  RX_RETURN_IF_ERROR(onnx_emit(I, n, RX_OP_cast, &t, 1, &at, 1, &r));
  RX_RETURN_IF_ERROR(onnx_take_at(I, n, vals, rx_arg_var(I->b, r), 0, &t, &r));
  onnx_def_tensor(I, n, r);
  return NULL;
}

/* EyeLike: ones where j - i == k over the 2-D input's shape, in dtype (default the input's) */
rx_status onnx_do_eye_like(imp *I, const Onnx__NodeProto *n, const onnx_op *row) {
  (void)row;
  const rx_sinfo *si = onnx_shaped(I, n, 0);
  if (!si || si->ndim != 2) return onnx_node_err(I, n, "expects a 2-D input of known shape");
  rx_dtype dt = si->dtype;
  if (onnx_attr(n, "dtype") && !onnx_dtype_of((int32_t)onnx_attr_i(n, "dtype", 0), &dt))
    return onnx_node_err(I, n, "unsupported dtype %lld", (long long)onnx_attr_i(n, "dtype", 0));
  rx_var *r = NULL;
  rx_node *t;
  RX_RETURN_IF_ERROR(diag_offset(I, n, si->shape[0], si->shape[1], &t));
  EX2(RX_OP_equal, t, I64(rx_sym_const(I->m, onnx_attr_i(n, "k", 0))), t);
  const rx_attr *at = rx_attr_dtype(I->m, "dtype", dt);
  RX_RETURN_IF_ERROR(onnx_emit(I, n, RX_OP_cast, &t, 1, &at, 1, &r));
  onnx_def_tensor(I, n, r);
  return NULL;
}

/* The flat index of each index vector (the last axis of indices, m values for data's dims
 * from b on): the sum of each index (negative counted from its dim) times its stride in those
 * dims, squeezed to indices' other dims; *stride the product of the m dims. */
rx_status onnx_nd_flat_index(imp *I, const Onnx__NodeProto *n, const rx_sinfo *ds,
                             const rx_sinfo *is, int64_t b, int64_t m, rx_node **out,
                             const rx_expr **stride) {
  rx_var *r = NULL;
  rx_node *idx, *lin = NULL, *t, *u;
  RX_RETURN_IF_ERROR(onnx_arg(I, n, onnx_input(n, 1), &idx));
  int64_t last = is->ndim - 1;
  *stride = rx_sym_const(I->m, 1);
  for (int64_t k = m - 1; k >= 0; k--) { /* idx[..., k] * stride, summed */
    const rx_expr *d = ds->shape[b + k], *bk = rx_sym_const(I->m, k),
                  *ek = rx_sym_const(I->m, k + 1);
    const rx_attr *sa[3] = {rx_attr_ints(I->m, "axes", &last, 1),
                            rx_attr_exprs(I->m, "begin", &bk, 1),
                            rx_attr_exprs(I->m, "end", &ek, 1)};
    RX_RETURN_IF_ERROR(onnx_emit(I, n, RX_OP_strided_slice, &idx, 1, sa, 3, &r));
    t = rx_arg_var(I->b, r);
    const rx_attr *ca = rx_attr_dtype(I->m, "dtype", RX_DTYPE_I64);
    if (is->dtype != RX_DTYPE_I64) {
      RX_RETURN_IF_ERROR(onnx_emit(I, n, RX_OP_cast, &t, 1, &ca, 1, &r));
      t = rx_arg_var(I->b, r);
    }
    EX2(RX_OP_less, t, I64(rx_sym_const(I->m, 0)), u);
    rx_node *w;
    EX2(RX_OP_add, t, I64(d), w);
    EX3(RX_OP_where, u, w, t, t);
    EX2(RX_OP_multiply, t, I64(*stride), t);
    if (lin) EX2(RX_OP_add, lin, t, t);
    lin = t;
    *stride = rx_sym_mul(I->m, *stride, d);
  }
  const rx_attr *sq = rx_attr_ints(I->m, "axes", &last, 1);
  RX_RETURN_IF_ERROR(onnx_emit(I, n, RX_OP_squeeze, &lin, 1, &sq, 1, &r));
  *out = rx_arg_var(I->b, r);
  return NULL;
}

/* GatherND(data, indices [..., m], batch_dims b): data flattened to [B P, rest...] (B the batch
 * dims' product, P that of the m indexed dims), taken at the flat index: the batch position
 * times P plus the sum over the last axis of indices of each index (negative counted from its
 * dim) times its stride. */
rx_status onnx_do_gather_nd(imp *I, const Onnx__NodeProto *n, const onnx_op *row) {
  (void)row;
  const rx_sinfo *ds = onnx_shaped(I, n, 0), *is = onnx_shaped(I, n, 1);
  if (!ds || !is || is->ndim < 1)
    return onnx_node_err(I, n,
                         "the shapes of data and indices are not known (rank and dims needed)");
  int64_t b = onnx_attr_i(n, "batch_dims", 0);
  const rx_expr *mlast = is->shape[is->ndim - 1];
  if (mlast->kind != RX_EXPR_CONST)
    return onnx_node_err(I, n, "the last dim of indices must be a constant");
  int64_t m = mlast->value;
  if (m < 1 || b < 0 || b >= is->ndim || b + m > ds->ndim)
    return onnx_node_err(I, n,
                         "batch_dims %lld and an index of %lld values do not fit data of rank "
                         "%d and indices of rank %d",
                         (long long)b, (long long)m, ds->ndim, is->ndim);
  rx_var *r = NULL;
  rx_node *lin, *t;
  const rx_expr *stride, *batch = rx_sym_const(I->m, 1);
  RX_RETURN_IF_ERROR(onnx_nd_flat_index(I, n, ds, is, b, m, &lin, &stride));
  for (int64_t k = 0; k < b; k++) batch = rx_sym_mul(I->m, batch, ds->shape[k]);
  if (b > 0) { /* + the flat batch position times P, arange(B) shaped to the batch dims */
    const rx_expr *bd[SYM_MAX];
    int nb = 0;
    for (int64_t k = 0; k < is->ndim - 1; k++)
      bd[nb++] = k < b ? is->shape[k] : rx_sym_const(I->m, 1);
    RX_RETURN_IF_ERROR(onnx_iota(I, n, rx_sym_const(I->m, 0), batch, &t));
    rx_node *a[2] = {t, rx_arg_shape(I->b, bd, nb)};
    RX_RETURN_IF_ERROR(onnx_emit(I, n, RX_OP_reshape, a, 2, NULL, 0, &r));
    t = rx_arg_var(I->b, r);
    EX2(RX_OP_multiply, t, I64(stride), t);
    EX2(RX_OP_add, lin, t, lin);
  }
  const rx_expr *fd[SYM_MAX];
  int nf = 0;
  fd[nf++] = rx_sym_mul(I->m, batch, stride);
  for (int64_t k = b + m; k < ds->ndim; k++) fd[nf++] = ds->shape[k];
  rx_node *a[2];
  RX_RETURN_IF_ERROR(onnx_arg(I, n, onnx_input(n, 0), &a[0]));
  a[1] = rx_arg_shape(I->b, fd, nf);
  RX_RETURN_IF_ERROR(onnx_emit(I, n, RX_OP_reshape, a, 2, NULL, 0, &r));
  RX_RETURN_IF_ERROR(onnx_take_at(I, n, rx_arg_var(I->b, r), lin, 0, &t, &r));
  onnx_def_tensor(I, n, r);
  return NULL;
}
