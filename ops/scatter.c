/* ops/scatter.c: scatter_elements and einsum, their shape deduction and their tensor programs.
 *
 * scatter_elements(x, indices, updates, axis=, reduction=) is x with each update written (or
 * combined by add / mul / min / max) at its own position along the other axes and at its index
 * along axis (ONNX ScatterElements; ScatterND, Scatter and MaxUnpool are imported as it). Its
 * program copies x to the result, then walks the updates in order: the store's index along axis
 * is data, so the fallback rule binds the other dims to threads and runs each line along axis
 * serially, in the updates' order, which makes duplicate indices deterministic.
 *
 * einsum(a[, b[, c]], equation="ij,jk->ik") is the sum over the letters that are not in the
 * output of the product of the operands at their letters (a letter repeated in one operand
 * reads its diagonal); the equation is explicit (an output after "->", letters only, no
 * ellipsis: the ONNX importer expands those). Its program is one reduce per output point. */
#include "deduce.h"
#include "legalize_int.h"

#include <stdio.h>
#include <string.h>

/* ---- scatter_elements ---- */

static const char *const scatter_reductions[] = {"none", "add", "mul", "min", "max"};

/* The reduction attribute as an index into scatter_reductions, or -1. */
static int scatter_reduction(const rx_node *call) {
  const rx_attr *a = ops_call_attr(call, "reduction");
  if (!a || !a->s) return 0;
  for (int i = 0; i < (int)RX_ARRAY_LEN(scatter_reductions); i++)
    if (!strcmp(a->s, scatter_reductions[i])) return i;
  return -1;
}

const rx_sinfo *ops_deduce_scatter_elements(rx_deduce_ctx *dc, const rx_node *call) {
  const rx_sinfo *x = ops_tensor_arg(dc, call, 0, "x");
  const rx_sinfo *idx = x ? ops_tensor_arg(dc, call, 1, "indices") : NULL;
  const rx_sinfo *upd = idx ? ops_tensor_arg(dc, call, 2, "updates") : NULL;
  if (!upd) return NULL;
  if (scatter_reduction(call) < 0) {
    ops_deduce_error(dc, "scatter_elements: reduction must be none, add, mul, min or max");
    return NULL;
  }
  if (idx->dtype != RX_DTYPE_UNKNOWN && !ir_dtype_is_int(idx->dtype)) {
    ops_deduce_error(dc, "scatter_elements expects integer indices, got %s", ops_str(dc, idx));
    return NULL;
  }
  if (x->dtype != RX_DTYPE_UNKNOWN && upd->dtype != RX_DTYPE_UNKNOWN && x->dtype != upd->dtype) {
    ops_deduce_error(dc, "scatter_elements expects updates of the dtype of x (%s), got %s",
                     ops_str(dc, x), ops_str(dc, upd));
    return NULL;
  }
  if (x->ndim == 0) {
    ops_deduce_error(dc, "scatter_elements expects a tensor of rank >= 1, got %s", ops_str(dc, x));
    return NULL;
  }
  if (x->ndim < 0 || idx->ndim < 0 || upd->ndim < 0)
    return ops_tensor(dc, x->dtype, x->ndim, x->shape);
  if (x->ndim != idx->ndim || idx->ndim != upd->ndim) {
    ops_deduce_error(
        dc, "scatter_elements expects indices and updates of the rank of x (%s), got %s and %s",
        ops_str(dc, x), ops_str(dc, idx), ops_str(dc, upd));
    return NULL;
  }
  int axis;
  if (!ops_norm_axis(dc, ops_int_attr(call, "axis", 0), x->ndim, &axis)) return NULL;
  for (int i = 0; idx->shape && upd->shape && i < x->ndim; i++)
    if (ops_dim_eq(dc, idx->shape[i], upd->shape[i]) == RX_FALSE) {
      ops_deduce_error(dc, "scatter_elements: indices %s and updates %s differ in dim %d",
                       ops_str(dc, idx), ops_str(dc, upd), i);
      return NULL;
    }
  return ops_tensor(dc, x->dtype, x->ndim, x->shape);
}

/* The combined value of the old value o and the update u (texts in dtype t) by reduction r. */
static const char *scatter_combine(lz_ctx *l, int r, rx_dtype t, const char *o, const char *u) {
  bool b = t == RX_DTYPE_BOOL;
  switch (r) {
  case 1:
    return b ? lz_str(l, "%s || %s", o, u)
             : lz_down(l, t, lz_str(l, "%s + %s", lz_up(l, t, o), lz_up(l, t, u)));
  case 2:
    return b ? lz_str(l, "%s && %s", o, u)
             : lz_down(l, t, lz_str(l, "%s * %s", lz_up(l, t, o), lz_up(l, t, u)));
  case 3:
    return lz_str(l, "min(%s, %s)", o, u);
  case 4:
    return lz_str(l, "max(%s, %s)", o, u);
  default:
    return u;
  }
}

void lz_gen_scatter_elements(lz_ctx *l) {
  lz_opnd *x = lz_arg(l, 0), *ind = lz_arg(l, 1), *upd = lz_arg(l, 2), *y = &l->outs[0];
  if (x->scalar || ind->scalar || upd->scalar || x->ndim == 0) {
    lz_fail(l, "scatter_elements expects tensors of rank >= 1");
    return;
  }
  int64_t a = ops_int_attr(l->call, "axis", 0);
  int axis = (int)(a < 0 ? a + x->ndim : a), r = scatter_reduction(l->call);
  const char *iv[LZ_MAXR], *yi[LZ_MAXR];
  for (int d = 0; d < x->ndim; d++) iv[d] = lz_loopvar(l, lz_str(l, "i%d", d));
  for (int d = 0; d < x->ndim; d++) {
    lz_line(l, "for %s in 0..%s {", iv[d], lz_ex(l, x->shape[d]));
    l->ind++;
  }
  lz_line(l, "%s = %s", lz_load(l, y, iv), lz_load(l, x, iv));
  for (int d = 0; d < x->ndim; d++) lz_close(l);
  const char *jv[LZ_MAXR];
  for (int d = 0; d < x->ndim; d++) jv[d] = lz_loopvar(l, lz_str(l, "j%d", d));
  for (int d = 0; d < x->ndim; d++) {
    lz_line(l, "for %s in 0..%s {", jv[d], lz_ex(l, upd->shape[d]));
    l->ind++;
  }
  const char *t = lz_fresh(l, "t"), *k;
  const char *tv = lz_load(l, ind, jv);
  if (ind->dtype != RX_DTYPE_I64) tv = lz_str(l, "i64(%s)", tv);
  lz_line(l, "let %s: i64 = %s", t, tv);
  k = lz_data_index(l, t, x->shape[axis], axis);
  for (int d = 0; d < x->ndim; d++) yi[d] = d == axis ? k : jv[d];
  const char *yv = lz_load(l, y, yi);
  lz_line(l, "%s = %s", yv, scatter_combine(l, r, x->dtype, yv, lz_load(l, upd, jv)));
  for (int d = 0; d < x->ndim; d++) lz_close(l);
}

/* ---- einsum ---- */

#define EINSUM_MAXOP 3 /* most operands (ops.def's max_args) */

/* An equation split into its operands' letters and the output's. */
typedef struct einsum_eq {
  char in[EINSUM_MAXOP][LZ_MAXR + 1];
  char out[LZ_MAXR + 1];
  int nin;
} einsum_eq;

/* Parses "ab,bc->ac" (letters only, at most LZ_MAXR per term); false when malformed. */
static bool einsum_parse(const char *s, einsum_eq *e) {
  memset(e, 0, sizeof *e);
  const char *arrow = s ? strstr(s, "->") : NULL;
  if (!arrow) return false;
  int n = 0;
  e->nin = 1;
  for (const char *p = s; p < arrow; p++) {
    if (*p == ',') {
      if (e->nin == EINSUM_MAXOP) return false;
      e->nin++;
      n = 0;
    } else if (((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z')) && n < LZ_MAXR) {
      e->in[e->nin - 1][n++] = *p;
    } else {
      return false;
    }
  }
  n = 0;
  for (const char *p = arrow + 2; *p; p++) {
    if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z')) || n == LZ_MAXR) return false;
    if (strchr(e->out, *p)) return false;
    bool found = false;
    for (int k = 0; k < e->nin; k++) found = found || strchr(e->in[k], *p);
    if (!found) return false;
    e->out[n++] = *p;
  }
  return true;
}

static const char *einsum_eq_attr(const rx_node *call) {
  const rx_attr *a = ops_call_attr(call, "equation");
  return a ? a->s : NULL;
}

const rx_sinfo *ops_deduce_einsum(rx_deduce_ctx *dc, const rx_node *call) {
  einsum_eq e;
  if (!einsum_parse(einsum_eq_attr(call), &e)) {
    ops_deduce_error(dc,
                     "einsum: the equation must be explicit, like \"ij,jk->ik\" (letters, "
                     "at most %d per term, every output letter in an operand once)",
                     LZ_MAXR);
    return NULL;
  }
  if (e.nin != call->nargs) {
    ops_deduce_error(dc, "einsum: the equation names %d operands, the call has %d", e.nin,
                     call->nargs);
    return NULL;
  }
  const rx_sinfo *in[EINSUM_MAXOP];
  rx_dtype dt = RX_DTYPE_UNKNOWN;
  for (int k = 0; k < e.nin; k++) {
    if (!(in[k] = ops_tensor_arg(dc, call, k, "operand"))) return NULL;
    if (k && in[k]->dtype != in[0]->dtype) {
      ops_deduce_error(dc, "einsum expects operands of one dtype, got %s and %s",
                       ops_str(dc, in[0]), ops_str(dc, in[k]));
      return NULL;
    }
    dt = in[k]->dtype;
    if (in[k]->ndim >= 0 && in[k]->ndim != (int)strlen(e.in[k])) {
      ops_deduce_error(dc, "einsum: operand %d %s does not have the rank of '%s'", k,
                       ops_str(dc, in[k]), e.in[k]);
      return NULL;
    }
  }
  int no = (int)strlen(e.out);
  const rx_expr **dims = ops_dims(dc, no);
  for (int j = 0; j < no; j++) dims[j] = NULL;
  for (int k = 0; k < e.nin; k++)
    for (int d = 0; in[k]->shape && e.in[k][d]; d++) {
      const char *o = strchr(e.out, e.in[k][d]);
      if (o && !dims[o - e.out]) dims[o - e.out] = in[k]->shape[d];
      for (int k2 = 0; k2 <= k; k2++)
        for (int d2 = 0; in[k2]->shape && e.in[k2][d2]; d2++)
          if (e.in[k2][d2] == e.in[k][d] &&
              ops_dim_eq(dc, in[k2]->shape[d2], in[k]->shape[d]) == RX_FALSE) {
            ops_deduce_error(dc, "einsum: letter '%c' has dims %s and %s", e.in[k][d],
                             ops_expr_str(dc, in[k2]->shape[d2]),
                             ops_expr_str(dc, in[k]->shape[d]));
            return NULL;
          }
    }
  for (int j = 0; j < no; j++)
    if (!dims[j]) return ops_tensor(dc, dt, no, NULL);
  return ops_tensor(dc, dt, no, dims);
}

void lz_gen_einsum(lz_ctx *l) {
  einsum_eq e;
  lz_opnd *y = &l->outs[0];
  if (!einsum_parse(einsum_eq_attr(l->call), &e)) {
    lz_fail(l, "bad equation");
    return;
  }
  /* one variable and extent per letter: the output's loops, then the summed letters' reduce */
  char letters[4 * LZ_MAXR];
  const char *var[4 * LZ_MAXR];
  const rx_expr *ext[4 * LZ_MAXR];
  int nl = 0, no = (int)strlen(e.out);
  for (int j = 0; j < no; j++) {
    letters[nl] = e.out[j];
    ext[nl] = y->shape[j];
    var[nl++] = lz_loopvar(l, lz_str(l, "i%d", j));
  }
  int first_red = nl;
  for (int k = 0; k < e.nin; k++) {
    lz_opnd *o = lz_arg(l, k);
    if (o->scalar) {
      lz_fail(l, "einsum expects tensor operands");
      return;
    }
    for (int d = 0; e.in[k][d]; d++) {
      if (memchr(letters, e.in[k][d], (size_t)nl)) continue;
      letters[nl] = e.in[k][d];
      ext[nl] = o->shape[d];
      var[nl] = lz_loopvar(l, lz_str(l, "r%d", nl - first_red));
      nl++;
    }
  }
  rx_dtype t = y->dtype;
  rx_dtype at = t == RX_DTYPE_F16 || t == RX_DTYPE_BF16 ? RX_DTYPE_F32 : t;
  const char *an = ir_dtype_name(at);
  rx_strbuf prod = {0};
  for (int k = 0; k < e.nin; k++) {
    lz_opnd *o = lz_arg(l, k);
    const char *idx[LZ_MAXR];
    for (int d = 0; e.in[k][d]; d++)
      idx[d] = var[(char *)memchr(letters, e.in[k][d], (size_t)nl) - letters];
    const char *v = lz_load(l, o, idx);
    base_strbuf_printf(&prod, "%s%s", k ? " * " : "", at != t ? lz_str(l, "%s(%s)", an, v) : v);
  }
  const char *pv = lz_str(l, "%s", prod.data ? prod.data : "");
  base_strbuf_free(&prod);
  const char *yi[LZ_MAXR];
  for (int j = 0; j < no; j++) yi[j] = var[j];
  int nloop = no;
  if (no == 0) { /* a 0-d result: a loop of one so that the local has a kernel */
    var[nl] = lz_loopvar(l, "u");
    ext[nl] = sym_expr_const(l->cx, 1);
    lz_line(l, "for %s in 0..1 {", var[nl]);
    l->ind++;
  }
  for (int j = 0; j < nloop; j++) {
    lz_line(l, "for %s in 0..%s {", var[j], lz_ex(l, ext[j]));
    l->ind++;
  }
  const char *out = lz_load(l, y, yi);
  if (nl == first_red) {
    lz_line(l, "%s = %s", out, at != t ? lz_str(l, "%s(%s)", ir_dtype_name(t), pv) : pv);
  } else {
    const char *s = lz_fresh(l, "s");
    lz_line(l, "alloc %s: %s[1] local", s, an);
    rx_strbuf b = {0};
    for (int i = first_red; i < nl; i++)
      base_strbuf_printf(&b, "%s%s in 0..%s", i > first_red ? ", " : "", var[i], lz_ex(l, ext[i]));
    lz_line(l, "reduce %s {", b.data);
    base_strbuf_free(&b);
    l->ind++;
    lz_line(l, "init { %s[0] = %s }", s, ir_dtype_is_float(at) ? "0.0" : "0");
    lz_line(l, "update { %s[0] = %s[0] + %s }", s, s, pv);
    lz_close(l);
    const char *sv = lz_str(l, "%s[0]", s);
    lz_line(l, "%s = %s", out, at != t ? lz_str(l, "%s(%s)", ir_dtype_name(t), sv) : sv);
  }
  for (int j = 0; j < nloop + (no == 0); j++) lz_close(l);
}
