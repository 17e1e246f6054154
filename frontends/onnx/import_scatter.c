/* frontends/onnx/import_scatter.c: the ONNX importer's Scatter, ScatterElements, ScatterND
 * and the operators built on scatter: MaxUnpool, ReverseSequence; and Einsum (ops/scatter.c). */
#include "import_int.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

/* ---- scatter and its users, einsum, ReverseSequence (ops/scatter.c) ---- */

static const char *const scatter_reds[] = {"none", "add", "mul", "min", "max"};

/* scatter_elements(x, idx, upd) along axis, combined by the node's reduction attribute */
static rx_status scatter_to(imp *I, const Onnx__NodeProto *n, rx_node *x, rx_node *idx,
                            rx_node *upd, int64_t axis, rx_node **out, rx_var **r) {
  int red = onnx_attr_choice(n, "reduction", scatter_reds, (int)RX_ARRAY_LEN(scatter_reds), 0);
  if (red < 0) return onnx_node_err(I, n, "reduction must be none, add, mul, min or max");
  rx_node *a[3] = {x, idx, upd};
  const rx_attr *at[2] = {rx_attr_int(I->m, "axis", axis),
                          rx_attr_str(I->m, "reduction", scatter_reds[red])};
  return onnx_exa(I, n, RX_OP_scatter_elements, a, 3, at, 2, out, r);
}

/* ScatterElements and its deprecated alias Scatter: scatter_elements */
rx_status onnx_do_scatter(imp *I, const Onnx__NodeProto *n, const onnx_op *row) {
  (void)row;
  rx_node *a[3], *t;
  rx_var *r = NULL;
  for (int k = 0; k < 3; k++) RX_RETURN_IF_ERROR(onnx_arg(I, n, onnx_input(n, (size_t)k), &a[k]));
  RX_RETURN_IF_ERROR(scatter_to(I, n, a[0], a[1], a[2], onnx_attr_i(n, "axis", 0), &t, &r));
  onnx_def_tensor(I, n, r);
  return NULL;
}

/* zeros of dims in dtype dt */
static rx_status zeros_of(imp *I, const Onnx__NodeProto *n, const rx_expr *const *dims, int k,
                          rx_dtype dt, rx_node **out) {
  rx_node *sh = rx_arg_shape(I->b, dims, k);
  const rx_attr *at = rx_attr_dtype(I->m, "dtype", dt);
  return onnx_exa(I, n, RX_OP_zeros, &sh, 1, &at, 1, out, NULL);
}

/* ScatterND(data, indices [..., m], updates): data flattened to [P, rest...] (P the product of
 * its first m dims), the updates to [N, rest...] and each index vector's flat index (as
 * GatherND's) broadcast over rest; scatter_elements along axis 0, reshaped back. */
rx_status onnx_do_scatter_nd(imp *I, const Onnx__NodeProto *n, const onnx_op *row) {
  (void)row;
  const rx_sinfo *ds = onnx_shaped(I, n, 0), *is = onnx_shaped(I, n, 1), *us = onnx_shaped(I, n, 2);
  if (!ds || !is || !us || is->ndim < 1)
    return onnx_node_err(I, n, "the shapes of data, indices and updates are not known");
  const rx_expr *mlast = is->shape[is->ndim - 1];
  if (mlast->kind != RX_EXPR_CONST)
    return onnx_node_err(I, n, "the last dim of indices must be a constant");
  int64_t m = mlast->value;
  if (m < 1 || m > ds->ndim || us->ndim != is->ndim - 1 + ds->ndim - (int)m)
    return onnx_node_err(
        I, n,
        "indices of rank %d with %lld values and updates of rank %d do not fit data of rank %d",
        is->ndim, (long long)m, us->ndim, ds->ndim);
  rx_var *r = NULL;
  rx_node *lin, *x, *u, *z;
  const rx_expr *stride, *nf = rx_sym_const(I->m, 1), *fd[SYM_MAX], *ud[SYM_MAX], *ld[SYM_MAX];
  RX_RETURN_IF_ERROR(onnx_nd_flat_index(I, n, ds, is, 0, m, &lin, &stride));
  for (int k = 0; k < is->ndim - 1; k++) nf = rx_sym_mul(I->m, nf, is->shape[k]);
  int nr = ds->ndim - (int)m;
  fd[0] = stride;
  ud[0] = ld[0] = nf;
  for (int k = 0; k < nr; k++) {
    fd[k + 1] = ud[k + 1] = ds->shape[m + k];
    ld[k + 1] = rx_sym_const(I->m, 1);
  }
  RX_RETURN_IF_ERROR(onnx_arg(I, n, onnx_input(n, 0), &x));
  RX_RETURN_IF_ERROR(onnx_reshape_to(I, n, x, fd, nr + 1, &x, NULL));
  RX_RETURN_IF_ERROR(onnx_arg(I, n, onnx_input(n, 2), &u));
  RX_RETURN_IF_ERROR(onnx_reshape_to(I, n, u, ud, nr + 1, &u, NULL));
  RX_RETURN_IF_ERROR(onnx_reshape_to(I, n, lin, ld, nr + 1, &lin, NULL));
  if (nr > 0) {
    RX_RETURN_IF_ERROR(zeros_of(I, n, ud, nr + 1, RX_DTYPE_I64, &z));
    EX2(RX_OP_add, lin, z, lin);
  }
  RX_RETURN_IF_ERROR(scatter_to(I, n, x, lin, u, 0, &x, &r));
  RX_RETURN_IF_ERROR(onnx_reshape_to(I, n, x, ds->shape, ds->ndim, &x, &r));
  onnx_def_tensor(I, n, r);
  return NULL;
}

/* Flat indices over dims `from` re-encoded as flat indices over dims `to` (same rank): each
 * coordinate taken off by floor division, from the last dim. */
static rx_status relinearize(imp *I, const Onnx__NodeProto *n, rx_node *idx,
                             const rx_expr *const *from, const rx_expr *const *to, int rank,
                             rx_node **out) {
  rx_var *r = NULL;
  rx_node *rem = idx, *acc = NULL, *q, *c;
  const rx_expr *stride = rx_sym_const(I->m, 1);
  for (int k = rank - 1; k >= 0; k--) {
    EX2(RX_OP_divide, rem, I64(from[k]), q);
    EX2(RX_OP_multiply, q, I64(from[k]), c);
    EX2(RX_OP_subtract, rem, c, c);
    EX2(RX_OP_multiply, c, I64(stride), c);
    if (acc) EX2(RX_OP_add, acc, c, c);
    acc = c;
    rem = q;
    stride = rx_sym_mul(I->m, stride, to[k]);
  }
  *out = acc;
  return NULL;
}

/* MaxUnpool(X, I[, output_shape]): X's values written at I's flat indices into zeros of the
 * output shape. I counts in the default shape ((in - 1) stride - pads + kernel per spatial dim);
 * a given output_shape pads that at the end of each dim, so I is re-encoded for it. */
rx_status onnx_do_max_unpool(imp *I, const Onnx__NodeProto *n, const onnx_op *row) {
  (void)row;
  const rx_sinfo *xs;
  RX_RETURN_IF_ERROR(onnx_known_shape(I, n, 0, 3, SYM_MAX, &xs));
  int sp = xs->ndim - 2;
  int64_t kern[SYM_MAX], st[SYM_MAX], pads[2 * SYM_MAX];
  RX_RETURN_IF_ERROR(onnx_ints_attr(I, n, "kernel_shape", sp, 1, kern));
  RX_RETURN_IF_ERROR(onnx_ints_attr(I, n, "strides", sp, 1, st));
  RX_RETURN_IF_ERROR(onnx_ints_attr(I, n, "pads", 2 * sp, 0, pads));
  const rx_expr *od[SYM_MAX], *dd[SYM_MAX], *total = rx_sym_const(I->m, 1), *in_total = total;
  dd[0] = od[0] = xs->shape[0];
  dd[1] = od[1] = xs->shape[1];
  for (int k = 0; k < sp; k++) {
    const rx_expr *d = rx_sym_add(I->m, xs->shape[k + 2], rx_sym_const(I->m, -1));
    d = rx_sym_mul(I->m, d, rx_sym_const(I->m, st[k]));
    dd[k + 2] = od[k + 2] =
        rx_sym_add(I->m, d, rx_sym_const(I->m, kern[k] - pads[k] - pads[k + sp]));
  }
  if (onnx_input(n, 2)) {
    val *v;
    RX_RETURN_IF_ERROR(onnx_sym_input(I, n, 2, &v));
    if (v->slen != xs->ndim)
      return onnx_node_err(I, n, "output_shape must have %d values", xs->ndim);
    for (int k = 0; k < xs->ndim; k++) od[k] = v->s[k];
  }
  for (int k = 0; k < xs->ndim; k++) {
    total = rx_sym_mul(I->m, total, od[k]);
    in_total = rx_sym_mul(I->m, in_total, xs->shape[k]);
  }
  rx_var *r = NULL;
  rx_node *x, *idx, *z;
  RX_RETURN_IF_ERROR(onnx_arg(I, n, onnx_input(n, 0), &x));
  RX_RETURN_IF_ERROR(onnx_arg(I, n, onnx_input(n, 1), &idx));
  RX_RETURN_IF_ERROR(onnx_reshape_to(I, n, x, &in_total, 1, &x, NULL));
  RX_RETURN_IF_ERROR(onnx_reshape_to(I, n, idx, &in_total, 1, &idx, NULL));
  if (onnx_input(n, 2)) RX_RETURN_IF_ERROR(relinearize(I, n, idx, dd, od, xs->ndim, &idx));
  RX_RETURN_IF_ERROR(zeros_of(I, n, &total, 1, xs->dtype, &z));
  RX_RETURN_IF_ERROR(scatter_to(I, n, z, idx, x, 0, &z, &r));
  RX_RETURN_IF_ERROR(onnx_reshape_to(I, n, z, od, xs->ndim, &z, &r));
  onnx_def_tensor(I, n, r);
  return NULL;
}

/* ReverseSequence(x, sequence_lens [B]): take_along_axis over the time axis at t' = len - 1 - t
 * for t < len of the batch, t elsewhere */
rx_status onnx_do_reverse_sequence(imp *I, const Onnx__NodeProto *n, const onnx_op *row) {
  (void)row;
  const rx_sinfo *xs;
  RX_RETURN_IF_ERROR(onnx_known_shape(I, n, 0, 2, SYM_MAX, &xs));
  int64_t ta = onnx_attr_i(n, "time_axis", 0), ba = onnx_attr_i(n, "batch_axis", 1);
  if (ta < 0 || ta > 1 || ba < 0 || ba > 1 || ta == ba)
    return onnx_node_err(I, n, "time_axis and batch_axis must be 0 and 1 or 1 and 0");
  const rx_expr *td[SYM_MAX], *bd[SYM_MAX];
  for (int k = 0; k < xs->ndim; k++) {
    td[k] = k == ta ? xs->shape[k] : rx_sym_const(I->m, 1);
    bd[k] = k == ba ? xs->shape[k] : rx_sym_const(I->m, 1);
  }
  rx_var *r = NULL;
  rx_node *t, *len, *lt, *rv, *z;
  RX_RETURN_IF_ERROR(onnx_iota(I, n, rx_sym_const(I->m, 0), xs->shape[ta], &t));
  RX_RETURN_IF_ERROR(onnx_reshape_to(I, n, t, td, xs->ndim, &t, NULL));
  RX_RETURN_IF_ERROR(onnx_arg(I, n, onnx_input(n, 1), &len));
  const rx_attr *ca = rx_attr_dtype(I->m, "dtype", RX_DTYPE_I64);
  RX_RETURN_IF_ERROR(onnx_exa(I, n, RX_OP_cast, &len, 1, &ca, 1, &len, NULL));
  RX_RETURN_IF_ERROR(onnx_reshape_to(I, n, len, bd, xs->ndim, &len, NULL));
  EX2(RX_OP_less, t, len, lt);
  EX2(RX_OP_subtract, len, I64(rx_sym_const(I->m, 1)), rv);
  EX2(RX_OP_subtract, rv, t, rv);
  EX3(RX_OP_where, lt, rv, t, t);
  RX_RETURN_IF_ERROR(zeros_of(I, n, xs->shape, xs->ndim, RX_DTYPE_I64, &z));
  EX2(RX_OP_add, t, z, t);
  rx_node *a[2];
  RX_RETURN_IF_ERROR(onnx_arg(I, n, onnx_input(n, 0), &a[0]));
  a[1] = t;
  const rx_attr *at = rx_attr_int(I->m, "axis", ta);
  RX_RETURN_IF_ERROR(onnx_exa(I, n, RX_OP_take_along_axis, a, 2, &at, 1, &t, &r));
  onnx_def_tensor(I, n, r);
  return NULL;
}

/* Einsum: the equation made explicit for relaxc's einsum: spaces dropped, each "..." replaced
 * by unused letters (the last ones of the longest ellipsis, aligned right as broadcasting
 * does), an implicit output spelled out (the ellipsis, then the letters used once, sorted). */
static rx_status einsum_equation(imp *I, const Onnx__NodeProto *n, char *out, size_t cap) {
  const Onnx__AttributeProto *a = onnx_attr(n, "equation");
  if (!a || !a->has_s || a->s.len == 0 || a->s.len >= 256)
    return onnx_node_err(I, n, "the equation attribute is required");
  char eq[256];
  size_t k = 0;
  for (size_t i = 0; i < a->s.len; i++)
    if (a->s.data[i] != ' ') eq[k++] = (char)a->s.data[i];
  eq[k] = 0;
  int count[128] = {0}, ell = 0, nop = 0, dots = 0;
  char *arrow = strstr(eq, "->");
  size_t lhs = arrow ? (size_t)(arrow - eq) : strlen(eq);
  for (size_t i = 0, term = 0; i <= lhs; i++) { /* letters and each operand's ellipsis rank */
    if (i == lhs || eq[i] == ',') {
      const rx_sinfo *si =
          onnx_tsinfo(onnx_input(n, (size_t)nop) ? onnx_get(I, onnx_input(n, (size_t)nop)) : NULL);
      if (!si || si->ndim < 0) return onnx_node_err(I, n, "operand %d's rank is not known", nop);
      if (dots) ell = si->ndim - (int)term > ell ? si->ndim - (int)term : ell;
      nop++, term = 0, dots = 0;
    } else if (eq[i] == '.') {
      dots = 1;
    } else if ((unsigned char)eq[i] < 128) {
      count[(unsigned char)eq[i]]++, term++;
    }
  }
  char el[SYM_MAX + 1] = {0};
  for (int c = 'A', j = 0; j < ell && c <= 'z'; c++)
    if (isalpha(c) && !count[c] && !strchr(eq, c)) el[j++] = (char)c;
  if ((int)strlen(el) < ell || ell > SYM_MAX)
    return onnx_node_err(I, n, "the ellipsis covers too many dims");
  rx_strbuf sb = {0};
  nop = 0;
  for (size_t i = 0, term = 0; i < lhs; i++) {
    if (eq[i] == ',') nop++, term = 0;
    if (eq[i] == '.' && eq[i + 1] == '.' && eq[i + 2] == '.') {
      const rx_sinfo *si = onnx_tsinfo(onnx_get(I, onnx_input(n, (size_t)nop)));
      int have = 0;
      for (size_t j = i + 3; j < lhs && eq[j] != ','; j++) have++;
      int e = si->ndim - (int)term - have;
      base_strbuf_append(&sb, el + ell - (e > 0 ? e : 0));
      i += 2;
      continue;
    }
    term++;
    base_strbuf_putc(&sb, eq[i]);
  }
  base_strbuf_append(&sb, "->");
  if (arrow) {
    for (const char *p = arrow + 2; *p; p++)
      if (*p == '.' && p[1] == '.' && p[2] == '.')
        base_strbuf_append(&sb, el), p += 2;
      else
        base_strbuf_putc(&sb, *p);
  } else {
    base_strbuf_append(&sb, el);
    for (int c = 'A'; c <= 'z'; c++)
      if (isalpha(c) && count[c] == 1) base_strbuf_putc(&sb, (char)c);
  }
  snprintf(out, cap, "%s", sb.data);
  bool fit = sb.len < cap;
  base_strbuf_free(&sb);
  return fit ? NULL : onnx_node_err(I, n, "the equation is too long");
}

rx_status onnx_do_einsum(imp *I, const Onnx__NodeProto *n, const onnx_op *row) {
  (void)row;
  if (n->n_input < 1 || n->n_input > 3)
    return onnx_node_err(I, n, "1 to 3 operands are supported, got %zu", n->n_input);
  char eq[320];
  RX_RETURN_IF_ERROR(einsum_equation(I, n, eq, sizeof eq));
  rx_node *a[3];
  for (size_t k = 0; k < n->n_input; k++)
    RX_RETURN_IF_ERROR(onnx_arg(I, n, onnx_input(n, k), &a[k]));
  const rx_attr *at = rx_attr_str(I->m, "equation", eq);
  rx_var *r = NULL;
  RX_RETURN_IF_ERROR(onnx_emit(I, n, RX_OP_einsum, a, (int)n->n_input, &at, 1, &r));
  onnx_def_tensor(I, n, r);
  return NULL;
}
