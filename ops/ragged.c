/* ops/ragged.c: ops over ragged (packed) tensors, CoRa-style: the rows of b sequences of
 * different lengths packed one after the other along a leading axis of `total` rows, without
 * padding, with an offsets tensor indptr: i32[b + 1] (sequence s is rows indptr[s] ..
 * indptr[s + 1] - 1; indptr[0] = 0 and indptr[b] = total). docs/ops.md, section "Ragged tensors".
 *
 *   ragged_softmax(x, indptr): x [total] or [total, H]; softmax over the rows of each sequence
 *     (per column h): y[j, h] = exp(x[j, h] - max) / sum over the sequence of j.
 *   ragged_attention(q, k, v, indptr, scale=): q [total, H, d], k and v [total, KVH, d] (H a
 *     multiple of KVH: grouped-query attention), causal within each sequence: the query at row t
 *     of sequence s attends to rows indptr[s] .. t. Output [total, H, d].
 *
 * Their programs loop over each sequence's own rows with loop bounds loaded from indptr
 * (symbolic lets, ir.h rx_local.sym): no padding, no work on other sequences' rows. Rows outside
 * every sequence (when indptr[0] > 0 or indptr[b] < total) are not written; the runtime checks
 * cheaply where indptr is a host tensor (docs/ops.md). Scores, the running max and sum and the
 * output accumulator are f32 whatever the dtype. */
#include "deduce.h"
#include "legalize_int.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* The lowest finite f32: the running max of a row before its first score. */
#define RAGGED_LOWEST "(-3.4028234663852886e38)"
/* The largest head dim of ragged_attention: the output accumulator of a (token, head) is a
 * local array of this many f32 per thread. */
#define RAGGED_MAX_HEAD_DIM 256

/* ------------------------------------------------------------------------------------------
 * shape deduction
 * ------------------------------------------------------------------------------------------ */

/* indptr (argument i): i32 of rank 1. */
static bool check_indptr(rx_deduce_ctx *dc, const rx_node *call, int i) {
  const rx_sinfo *s = ops_tensor_arg(dc, call, i, "indptr");
  if (!s) return false;
  if ((s->dtype != RX_DTYPE_I32 && s->dtype != RX_DTYPE_UNKNOWN) ||
      (s->ndim != 1 && s->ndim >= 0)) {
    ops_deduce_error(dc, "%s expects indptr (argument %d) as i32[b + 1], got %s", call->op->name, i,
                     ops_str(dc, s));
    return false;
  }
  return true;
}

const rx_sinfo *ops_deduce_ragged_softmax(rx_deduce_ctx *dc, const rx_node *call) {
  const rx_sinfo *x = ops_tensor_arg(dc, call, 0, "x");
  if (!x || !ops_need_float(dc, x, call->op->name) || !check_indptr(dc, call, 1)) return NULL;
  if (x->ndim == 0 || x->ndim > 2) {
    ops_deduce_error(dc, "ragged_softmax expects x as [total] or [total, H], got %s",
                     ops_str(dc, x));
    return NULL;
  }
  return ops_tensor(dc, x->dtype, x->ndim, x->shape);
}

/* Operand i of ragged_attention: rank 3 of q's dtype, dims 0 and 2 those of q. */
static bool check_kv(rx_deduce_ctx *dc, const rx_node *call, int i, const char *name,
                     const rx_sinfo *q) {
  const rx_sinfo *s = ops_tensor_arg(dc, call, i, name);
  if (!s) return false;
  bool bad = s->ndim != 3 || s->dtype != q->dtype;
  if (!bad && s->shape && q->shape)
    bad = ops_dim_eq(dc, s->shape[0], q->shape[0]) != RX_TRUE ||
          ops_dim_eq(dc, s->shape[2], q->shape[2]) != RX_TRUE;
  if (bad)
    ops_deduce_error(
        dc,
        "ragged_attention expects %s (argument %d) as %s[total, KVH, d] with q's total "
        "and d, got %s (q is %s)",
        name, i, ir_dtype_name(q->dtype), ops_str(dc, s), ops_str(dc, q));
  return !bad;
}

const rx_sinfo *ops_deduce_ragged_attention(rx_deduce_ctx *dc, const rx_node *call) {
  const rx_sinfo *q = ops_tensor_arg(dc, call, 0, "q");
  if (!q || !ops_need_float(dc, q, call->op->name)) return NULL;
  if (q->ndim != 3) {
    ops_deduce_error(dc, "ragged_attention expects q as [total, H, d], got %s", ops_str(dc, q));
    return NULL;
  }
  if (!check_kv(dc, call, 1, "k", q) || !check_kv(dc, call, 2, "v", q) ||
      !check_indptr(dc, call, 3))
    return NULL;
  const rx_sinfo *k = call->args[1]->sinfo, *v = call->args[2]->sinfo;
  if (k->shape && v->shape && ops_dim_eq(dc, k->shape[1], v->shape[1]) != RX_TRUE) {
    ops_deduce_error(dc, "ragged_attention expects k and v with the same heads, got %s and %s",
                     ops_str(dc, k), ops_str(dc, v));
    return NULL;
  }
  if (q->shape && k->shape) {
    const rx_expr *h = q->shape[1], *kvh = k->shape[1];
    const rx_expr *rem = sym_expr_floormod(ops_ctx(dc), h, kvh);
    if (ops_prove(dc, sym_expr_cmp(ops_ctx(dc), RX_EXPR_EQ, rem, sym_expr_const(ops_ctx(dc), 0))) ==
        RX_FALSE) {
      ops_deduce_error(dc, "ragged_attention expects q's heads (%s) a multiple of k's (%s)",
                       ops_expr_str(dc, h), ops_expr_str(dc, kvh));
      return NULL;
    }
  }
  return ops_tensor(dc, q->dtype, 3, q->shape);
}

/* ------------------------------------------------------------------------------------------
 * legalization
 * ------------------------------------------------------------------------------------------ */

/* The number of sequences b (indptr's length - 1) as text. */
static const char *rows_text(lz_ctx *l, const lz_opnd *indptr) {
  return lz_ex(l, sym_expr_sub(l->cx, indptr->shape[0], sym_expr_const(l->cx, 1)));
}

/* Offset indptr[at] clamped into 0 .. total: a bad table (rx_rt_check_indptr) never makes a
 * kernel read or write outside the packed rows. An i32, like the table's entries: lowering then
 * bounds the loop ranges it makes and can keep 32-bit indices. */
static const char *offset(lz_ctx *l, const lz_opnd *indptr, const char *at, const rx_expr *total) {
  return lz_str(l, "min(max(%s[%s], 0), i32(%s))", indptr->name, at, lz_ex(l, total));
}

/* Are the first n operands tensors of known shape? False, reported, when one is not. */
static bool tensors(lz_ctx *l, int n) {
  for (int i = 0; i < n; i++) {
    lz_opnd *o = lz_arg(l, i);
    if (o->scalar || !o->shape) {
      lz_fail(l, "argument %d is not a tensor of known shape", i);
      return false;
    }
  }
  return true;
}

/* One thread per (sequence, column): the row max, the sum of exponentials and the normalized
 * rows, each a loop over the sequence's rows indptr[s] .. indptr[s + 1] - 1. */
void lz_gen_ragged_softmax(lz_ctx *l) {
  if (!tensors(l, 2)) return;
  lz_opnd *x = lz_arg(l, 0), *ip = lz_arg(l, 1), *y = &l->outs[0];
  rx_dtype t = x->dtype;
  const char *s = lz_loopvar(l, "s"), *h = NULL, *j = lz_loopvar(l, "j");
  if (x->ndim == 2) {
    h = lz_loopvar(l, "h");
    lz_line(l, "for %s in 0..%s, %s in 0..%s {", s, rows_text(l, ip), h, lz_ex(l, x->shape[1]));
  } else {
    lz_line(l, "for %s in 0..%s {", s, rows_text(l, ip));
  }
  l->ind++;
  const char *lo = lz_fresh(l, "lo"), *hi = lz_fresh(l, "hi");
  lz_line(l, "let sym %s = %s", lo, offset(l, ip, s, x->shape[0]));
  lz_line(l, "let sym %s = %s", hi, offset(l, ip, lz_str(l, "%s + 1", s), x->shape[0]));
  const char *xi[2] = {j, h};
  const char *xv = lz_up(l, t, lz_load(l, x, xi));
  const char *mx = lz_fresh(l, "mx"), *sm = lz_fresh(l, "sm"), *inv = lz_fresh(l, "inv");
  lz_line(l, "alloc %s: f32[1] local", mx);
  lz_line(l, "%s[0] = %s", mx, RAGGED_LOWEST);
  lz_line(l, "for %s in %s..%s { %s[0] = max(%s[0], %s) }", j, lo, hi, mx, mx, xv);
  lz_line(l, "alloc %s: f32[1] local", sm);
  lz_line(l, "%s[0] = 0.0", sm);
  const char *e = lz_str(l, "exp(%s - %s[0])", xv, mx);
  lz_line(l, "for %s in %s..%s { %s[0] = %s[0] + %s }", j, lo, hi, sm, sm, e);
  lz_line(l, "let %s: f32 = 1.0 / %s[0]", inv, sm);
  lz_line(l, "for %s in %s..%s { %s = %s }", j, lo, hi, lz_load(l, y, xi),
          lz_down(l, t, lz_str(l, "%s * %s", e, inv)));
  lz_close(l);
}

/* One thread per (token t, query head h): finds t's sequence s (a scan of indptr, b
 * comparisons), then an online softmax over the keys indptr[s] .. t of kv head h / (H / KVH),
 * the output row accumulated in f32 registers. */
void lz_gen_ragged_attention(lz_ctx *l) {
  if (!tensors(l, 4)) return;
  lz_opnd *q = lz_arg(l, 0), *k = lz_arg(l, 1), *v = lz_arg(l, 2), *ip = lz_arg(l, 3);
  lz_opnd *o = &l->outs[0];
  const rx_expr *dexp = q->shape[2], *hq = q->shape[1], *hkv = k->shape[1];
  if (dexp->kind != RX_EXPR_CONST || dexp->value < 1 || dexp->value > RAGGED_MAX_HEAD_DIM) {
    lz_fail(l, "the head dim must be a constant from 1 to %d, got %s", RAGGED_MAX_HEAD_DIM,
            lz_ex(l, dexp));
    return;
  }
  int64_t d = dexp->value;
  double scale = 1.0 / sqrt((double)d);
  const rx_attr *sa = ops_call_attr(l->call, "scale");
  if (sa) scale = sa->f;
  rx_dtype t = q->dtype;
  const char *tv = lz_loopvar(l, "t"), *h = lz_loopvar(l, "h"), *s = lz_loopvar(l, "s");
  const char *j = lz_loopvar(l, "j"), *c = lz_loopvar(l, "c");
  /* the kv head of query head h: h // (H / KVH) */
  const char *kh =
      lz_ex(l, sym_expr_floordiv(l->cx, sym_expr_var(l->cx, h), sym_expr_floordiv(l->cx, hq, hkv)));
  lz_line(l, "for %s in 0..%s, %s in 0..%s {", tv, lz_ex(l, q->shape[0]), h, lz_ex(l, hq));
  l->ind++;
  lz_line(l, "for %s in 0..%s {", s, rows_text(l, ip));
  l->ind++;
  lz_line(l, "if i64(%s[%s]) <= %s && %s < i64(%s[%s + 1]) {", ip->name, s, tv, tv, ip->name, s);
  l->ind++;
  const char *lo = lz_fresh(l, "lo"), *acc = lz_fresh(l, "acc"), *ml = lz_fresh(l, "ml");
  const char *sc = lz_fresh(l, "sc"), *sv = lz_fresh(l, "sv"), *mn = lz_fresh(l, "mn");
  const char *cf = lz_fresh(l, "cf"), *pv = lz_fresh(l, "pv");
  lz_line(l, "let sym %s = %s", lo, offset(l, ip, s, q->shape[0]));
  lz_line(l, "alloc %s: f32[%lld] local", acc, (long long)d);
  lz_line(l, "alloc %s: f32[2] local", ml);
  lz_line(l, "alloc %s: f32[1] local", sc);
  lz_line(l, "%s[0] = %s", ml, RAGGED_LOWEST);
  lz_line(l, "%s[1] = 0.0", ml);
  lz_line(l, "for %s in 0..%lld { %s[%s] = 0.0 }", c, (long long)d, acc, c);
  lz_line(l, "for %s in %s..%s + 1 {", j, lo, tv);
  l->ind++;
  const char *qi[3] = {tv, h, c}, *ki[3] = {j, kh, c};
  lz_line(l, "%s[0] = 0.0", sc);
  lz_line(l, "for %s in 0..%lld { %s[0] = %s[0] + %s * %s }", c, (long long)d, sc, sc,
          lz_up(l, t, lz_load(l, q, qi)), lz_up(l, t, lz_load(l, k, ki)));
  lz_line(l, "let %s: f32 = %s[0] * %s", sv, sc, lz_flit(l, scale));
  lz_line(l, "let %s: f32 = max(%s[0], %s)", mn, ml, sv);
  lz_line(l, "let %s: f32 = exp(%s[0] - %s)", cf, ml, mn);
  lz_line(l, "let %s: f32 = exp(%s - %s)", pv, sv, mn);
  lz_line(l, "%s[1] = %s[1] * %s + %s", ml, ml, cf, pv);
  lz_line(l, "for %s in 0..%lld { %s[%s] = %s[%s] * %s + %s * %s }", c, (long long)d, acc, c, acc,
          c, cf, pv, lz_up(l, t, lz_load(l, v, ki)));
  lz_line(l, "%s[0] = %s", ml, mn);
  lz_close(l);
  lz_line(l, "for %s in 0..%lld { %s = %s }", c, (long long)d, lz_load(l, o, qi),
          lz_down(l, t, lz_str(l, "%s[%s] / %s[1]", acc, c, ml)));
  lz_close(l);
  lz_close(l);
  lz_close(l);
}
