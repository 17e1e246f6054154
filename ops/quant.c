/* ops/quant.c: `quant_matmul(x, w, [s, [z]], scheme="...")`, y = x W^T with W quantized in one of
 * the schemes of base/quant.h: its shape deduction and its legalization to a matmul-shaped tensor
 * program whose weight operand is the dequantized element, loads of the packed bytes plus integer
 * and float arithmetic:
 *
 *   for i..., j in 0..out {
 *     alloc acc: f32[1] local
 *     reduce r in 0..in {
 *       init { acc[0] = 0.0 }
 *       update { let ... (the element's bytes, nibbles, scale)  acc[0] = acc[0] + f32(x[i..., r]) *
 * W }
 *     }
 *     y[i..., j] = T(acc[0])
 *   }
 *
 * Every matmul rule (passes/schedule/matmul.h) takes P and Q as any expression over loads, so the
 * dequantization is fused into whichever kernel the rule picks: GEMV dequantizes in registers,
 * the shared-memory GEMM dequantizes its tiles of Q as it stages them. Bits are taken with
 * integer // and % by powers of two (the printers emit shifts and masks for them, codegen/
 * cprinter.c), and the f16 scales inside GGUF blocks are decoded from their two bytes exactly
 * (f16_from_bytes below: the IR has no bit reinterpretation). */
#include "deduce.h"
#include "legalize_int.h"

#include "../base/quant.h"

#include <string.h>

/* ---- deduction ---- */

static bool scheme_of(rx_deduce_ctx *dc, const rx_node *call, const char *opn,
                      rx_quant_scheme *out) {
  const rx_attr *a = ops_call_attr(call, "scheme");
  if (a && a->kind == RX_ATTR_STR && base_quant_lookup(a->s, out)) return true;
  rx_strbuf names = {0};
  base_quant_names(&names);
  ops_deduce_error(dc, "%s expects scheme= one of %s, got %s%s%s", opn, names.data,
                   a && a->kind == RX_ATTR_STR ? "\"" : "",
                   a && a->kind == RX_ATTR_STR ? a->s : "none",
                   a && a->kind == RX_ATTR_STR ? "\"" : "");
  base_strbuf_free(&names);
  return false;
}

/* Argument i is a 2-D tensor of dtype dt with dims [rows, cols]; reports otherwise. */
static bool buffer_arg(rx_deduce_ctx *dc, const rx_node *call, const char *opn, int i,
                       const char *what, rx_dtype dt, const rx_expr *rows, const rx_expr *cols) {
  const rx_sinfo *s = ops_tensor_arg(dc, call, i, what);
  if (!s) return false;
  if (s->dtype != dt || s->ndim != 2 || !s->shape || ops_dim_eq(dc, s->shape[0], rows) != RX_TRUE ||
      ops_dim_eq(dc, s->shape[1], cols) != RX_TRUE) {
    ops_deduce_error(dc, "%s expects %s of %s[%s, %s], got %s", opn, what, ir_dtype_name(dt),
                     ops_expr_str(dc, rows), ops_expr_str(dc, cols), ops_str(dc, s));
    return false;
  }
  return true;
}

/* The buffers of W [out, in] (arguments a0 to a0 + nb - 1) as scheme qi lays them out; reports
 * otherwise. */
static bool buffers_at(rx_deduce_ctx *dc, const rx_node *call, const char *opn,
                       const rx_quant_info *qi, int nb, int a0, const rx_expr *out,
                       const rx_expr *in) {
  rx_expr_ctx *cx = ops_ctx(dc);
  const rx_expr *blocks = sym_expr_floordiv(cx, in, sym_expr_const(cx, qi->block));
  bool ok;
  switch (qi->kind) {
  case RX_QUANT_GGUF:
    ok = buffer_arg(dc, call, opn, a0, "w", RX_DTYPE_U8, out,
                    sym_expr_mul(cx, blocks, sym_expr_const(cx, qi->block_bytes)));
    break;
  case RX_QUANT_INT8:
    ok = buffer_arg(dc, call, opn, a0, "w", RX_DTYPE_I8, out, in);
    break;
  default:
    ok = buffer_arg(dc, call, opn, a0, "w", RX_DTYPE_U8, out,
                    sym_expr_floordiv(cx, in, sym_expr_const(cx, 2)));
  }
  if (ok && nb >= 2) ok = buffer_arg(dc, call, opn, a0 + 1, "s", RX_DTYPE_F16, out, blocks);
  if (ok && nb >= 3) ok = buffer_arg(dc, call, opn, a0 + 2, "z", RX_DTYPE_U8, out, blocks);
  return ok;
}
static bool buffers(rx_deduce_ctx *dc, const rx_node *call, const char *opn,
                    const rx_quant_info *qi, int nb, const rx_expr *out, const rx_expr *in) {
  return buffers_at(dc, call, opn, qi, nb, 1, out, in);
}

/* The scheme of an op call `opn(first, w, [s, [z]], scheme=...)`, its buffer count, and its first
 * two arguments; NULL, reported, when the scheme, the argument count or a tensor is wrong. */
static const rx_quant_info *quant_call(rx_deduce_ctx *dc, const rx_node *call, const char *opn,
                                       const char *first, int *nb, const rx_sinfo **a0,
                                       const rx_sinfo **w) {
  rx_quant_scheme sc;
  if (!scheme_of(dc, call, opn, &sc)) return NULL;
  const rx_quant_info *qi = base_quant_info_of(sc);
  *nb = base_quant_nbuffers(sc);
  if (call->nargs != 1 + *nb) {
    ops_deduce_error(dc, "%s with scheme \"%s\" expects %d arguments (%s and %s), got %d", opn,
                     qi->name, 1 + *nb, first,
                     *nb == 1   ? "the blocks w"
                     : *nb == 2 ? "w, s"
                                : "w, s, z",
                     call->nargs);
    return NULL;
  }
  *a0 = ops_tensor_arg(dc, call, 0, first);
  *w = *a0 ? ops_tensor_arg(dc, call, 1, "w") : NULL;
  return *w ? qi : NULL;
}

/* quant_take(ids, w, [s, [z]], scheme=..., dtype=...): the rows of W [rows, in] at ids, as
 * ids' shape + [in] of dtype (f32 or f16); in from w's columns and the scheme. */
const rx_sinfo *ops_deduce_quant_take(rx_deduce_ctx *dc, const rx_node *call) {
  const rx_attr *dt = ops_call_attr(call, "dtype");
  rx_dtype t = dt && dt->kind == RX_ATTR_DTYPE ? dt->dtype : RX_DTYPE_UNKNOWN;
  if (t != RX_DTYPE_F32 && t != RX_DTYPE_F16) {
    ops_deduce_error(dc, "quant_take expects dtype=f32 or dtype=f16");
    return NULL;
  }
  int nb;
  const rx_sinfo *ids, *w;
  const rx_quant_info *qi = quant_call(dc, call, "quant_take", "ids", &nb, &ids, &w);
  if (!qi) return NULL;
  if ((ids->dtype != RX_DTYPE_I32 && ids->dtype != RX_DTYPE_I64) || !ids->shape || w->ndim != 2 ||
      !w->shape) {
    ops_deduce_error(dc,
                     "quant_take expects ids of i32 or i64 with a known shape and w [rows, ...], "
                     "got %s and %s",
                     ops_str(dc, ids), ops_str(dc, w));
    return NULL;
  }
  rx_expr_ctx *cx = ops_ctx(dc);
  const rx_expr *cols = w->shape[1],
                *unit = sym_expr_const(cx, qi->kind == RX_QUANT_GGUF ? qi->block_bytes : 1);
  if (ops_prove(dc, sym_expr_cmp(cx, RX_EXPR_EQ, sym_expr_floormod(cx, cols, unit),
                                 sym_expr_const(cx, 0))) != RX_TRUE) {
    ops_deduce_error(dc,
                     "quant_take with scheme \"%s\" needs w's columns (%s) a provable multiple "
                     "of %d",
                     qi->name, ops_expr_str(dc, cols), qi->block_bytes);
    return NULL;
  }
  const rx_expr *in =
      qi->kind == RX_QUANT_GGUF
          ? sym_expr_mul(cx, sym_expr_floordiv(cx, cols, unit), sym_expr_const(cx, qi->block))
      : qi->kind == RX_QUANT_INT8 ? cols
                                  : sym_expr_mul(cx, cols, sym_expr_const(cx, 2));
  if (!buffers(dc, call, "quant_take", qi, nb, w->shape[0], in)) return NULL;
  const rx_expr **dims = ops_dims(dc, ids->ndim + 1);
  for (int i = 0; i < ids->ndim; i++) dims[i] = ids->shape[i];
  dims[ids->ndim] = in;
  return ops_tensor(dc, t, ids->ndim + 1, dims);
}

const rx_sinfo *ops_deduce_quant_matmul(rx_deduce_ctx *dc, const rx_node *call) {
  int nb;
  const rx_sinfo *x, *w;
  const rx_quant_info *qi = quant_call(dc, call, "quant_matmul", "x", &nb, &x, &w);
  if (!qi) return NULL;
  if (x->dtype != RX_DTYPE_F32 && x->dtype != RX_DTYPE_F16) {
    ops_deduce_error(dc, "quant_matmul expects x of f32 or f16, got %s", ops_str(dc, x));
    return NULL;
  }
  if (x->ndim < 1 || !x->shape || w->ndim != 2 || !w->shape) {
    ops_deduce_error(dc,
                     "quant_matmul expects x [..., in] and w [out, ...] with known shapes, "
                     "got %s and %s",
                     ops_str(dc, x), ops_str(dc, w));
    return NULL;
  }
  rx_expr_ctx *cx = ops_ctx(dc);
  const rx_expr *in = x->shape[x->ndim - 1], *out = w->shape[0];
  if (ops_prove(dc, sym_expr_cmp(cx, RX_EXPR_EQ,
                                 sym_expr_floormod(cx, in, sym_expr_const(cx, qi->block)),
                                 sym_expr_const(cx, 0))) != RX_TRUE) {
    ops_deduce_error(dc, "quant_matmul with scheme \"%s\" needs in (%s) a provable multiple of %d",
                     qi->name, ops_expr_str(dc, in), qi->block);
    return NULL;
  }
  if (!buffers(dc, call, "quant_matmul", qi, nb, out, in)) return NULL;
  const rx_expr **dims = ops_dims(dc, x->ndim);
  for (int i = 0; i + 1 < x->ndim; i++) dims[i] = x->shape[i];
  dims[x->ndim - 1] = out;
  return ops_tensor(dc, x->dtype, x->ndim, dims);
}

/* rms_norm_matmul(x, norm_w, w, [s, [z]], [w2, [s2, [z2]]], epsilon=, dtype=, scheme=, gated=):
 * an RMSNorm of x's rows folded into the projection that follows it, a matmul whose output point
 * has two or three reductions over the same k (issue 31's decode step):
 *
 *   y[i, j] = T(rsqrt(sum_k x[i, k]^2 / K + eps) * sum_k T(x[i, k] norm_w[k]) W[j, k])
 *
 * and, gated, the SwiGLU of two projections W (gate) and W2 (up) of the same normalized row:
 *   y[i, j] = T(silu(g) * u), g = T(rs * sum_k T(x norm_w) W[j, k]), u the same with W2.
 * The norm weight is a prologue of the operand and the sum of squares a second accumulator in
 * the same k loop: the kernel reads each weight once, with no kernel for the norm. W (and W2)
 * are [M, K] of f16, bf16 or f32, or, with scheme=, quant_matmul's buffers of that scheme. */
const rx_sinfo *ops_deduce_rms_norm_matmul(rx_deduce_ctx *dc, const rx_node *call) {
  const char *opn = "rms_norm_matmul";
  const rx_attr *sa = ops_call_attr(call, "scheme"), *ga = ops_call_attr(call, "gated");
  const rx_quant_info *qi = NULL;
  int nb = 1, sets = ga && ga->i ? 2 : 1;
  if (sa) {
    rx_quant_scheme sc;
    if (!scheme_of(dc, call, opn, &sc)) return NULL;
    qi = base_quant_info_of(sc);
    nb = base_quant_nbuffers(sc);
  }
  if (call->nargs != 2 + nb * sets) {
    ops_deduce_error(dc, "%s expects %d arguments (x, norm_w and %d weight buffers), got %d", opn,
                     2 + nb * sets, nb * sets, call->nargs);
    return NULL;
  }
  const rx_sinfo *x = ops_tensor_arg(dc, call, 0, "x"), *nw = ops_tensor_arg(dc, call, 1, "norm_w");
  if (!x || !nw) return NULL;
  if (!ir_dtype_is_float(x->dtype) || x->ndim < 1 || !x->shape || nw->ndim != 1 || !nw->shape ||
      !ir_dtype_is_float(nw->dtype)) {
    ops_deduce_error(dc, "%s expects float x [..., K] and norm_w [K], got %s and %s", opn,
                     ops_str(dc, x), ops_str(dc, nw));
    return NULL;
  }
  rx_expr_ctx *cx = ops_ctx(dc);
  const rx_expr *K = x->shape[x->ndim - 1], *M = NULL;
  if (ops_dim_eq(dc, nw->shape[0], K) != RX_TRUE) {
    ops_deduce_error(dc, "%s expects norm_w of x's last dim %s, got %s", opn, ops_expr_str(dc, K),
                     ops_str(dc, nw));
    return NULL;
  }
  rx_dtype t = qi ? x->dtype : RX_DTYPE_UNKNOWN;
  for (int k = 0; k < sets; k++) {
    int a0 = 2 + k * nb;
    const rx_sinfo *w = ops_tensor_arg(dc, call, a0, "w");
    if (!w) return NULL;
    if (w->ndim != 2 || !w->shape || (!qi && !ir_dtype_is_float(w->dtype))) {
      ops_deduce_error(dc, "%s expects w [M, ...] with a known shape, got %s", opn, ops_str(dc, w));
      return NULL;
    }
    if (!M) M = w->shape[0];
    if (qi) {
      const rx_expr *rem = sym_expr_floormod(cx, K, sym_expr_const(cx, qi->block));
      if (ops_prove(dc, sym_expr_cmp(cx, RX_EXPR_EQ, rem, sym_expr_const(cx, 0))) != RX_TRUE) {
        ops_deduce_error(dc, "%s with scheme \"%s\" needs K (%s) a provable multiple of %d", opn,
                         qi->name, ops_expr_str(dc, K), qi->block);
        return NULL;
      }
      if (!buffers_at(dc, call, opn, qi, nb, a0, M, K)) return NULL;
    } else if (!buffer_arg(dc, call, opn, a0, "w", w->dtype, M, K)) {
      return NULL;
    } else {
      t = w->dtype;
    }
  }
  const rx_attr *dt = ops_call_attr(call, "dtype");
  if (dt && dt->kind == RX_ATTR_DTYPE) t = dt->dtype;
  if (!ir_dtype_is_float(t)) {
    ops_deduce_error(dc, "%s expects a float dtype=", opn);
    return NULL;
  }
  const rx_expr **dims = ops_dims(dc, x->ndim);
  for (int i = 0; i + 1 < x->ndim; i++) dims[i] = x->shape[i];
  dims[x->ndim - 1] = M;
  return ops_tensor(dc, t, x->ndim, dims);
}

/* ---- legalization ---- */

/* What the element writers share: the weight's buffers, the row j and reduction index r (loop
 * variable names), and the lets written so far into the update. */
typedef struct qel {
  lz_ctx *l;
  const rx_quant_info *qi;
  const char *w, *s, *z, *j, *r;
  rx_strbuf lets;
} qel;

/* `let NAME: T = value` into the update; returns NAME. */
static const char *qlet(qel *q, const char *base, const char *type, const char *value) {
  const char *n = lz_fresh(q->l, base);
  base_strbuf_printf(&q->lets, "let %s: %s = %s\n", n, type, value);
  return n;
}

/* Byte `off` (index text) of row j as an i32. */
static const char *qbyte(qel *q, const char *off) {
  return lz_str(q->l, "i32(%s[%s, %s])", q->w, q->j, off);
}

/* The f16 whose little-endian bytes start at off, as an f32 local, decoded exactly: sign,
 * exponent e and mantissa m of h = b0 + 256 b1; 2^e as the product of its binary digits (powers
 * of two, exact in f32); subnormals (e = 0) as m 2^-24. Infinities and NaNs (e = 31) are not
 * scales a quantizer writes and decode as large finite values. */
static const char *f16_from_bytes(qel *q, const char *off) {
  lz_ctx *l = q->l;
  const char *h = qlet(
      q, "h", "i32", lz_str(l, "%s + 256 * %s", qbyte(q, off), qbyte(q, lz_str(l, "%s + 1", off))));
  const char *e = qlet(q, "e", "i32", lz_str(l, "%s // 1024 %% 32", h));
  const char *p = qlet(
      q, "p2", "f32",
      lz_str(l,
             "select(%1$s %% 2 == 1, 2.0, 1.0) * select(%1$s // 2 %% 2 == 1, 4.0, 1.0) * "
             "select(%1$s // 4 %% 2 == 1, 16.0, 1.0) * select(%1$s // 8 %% 2 == 1, 256.0, 1.0) * "
             "select(%1$s // 16 == 1, 65536.0, 1.0)",
             e));
  const char *mag = lz_str(l,
                           "select(%1$s == 0, f32(%2$s %% 1024) * 0.000000059604644775390625, "
                           "f32(%2$s %% 1024 + 1024) * %3$s * 0.0000000298023223876953125)",
                           e, h, p);
  return qlet(q, "d", "f32", lz_str(l, "select(%s >= 32768, 0.0 - %s, %s)", h, mag, mag));
}

/* Nibble of byte b: the high one when `high` (a condition text), else the low one. */
static const char *nibble(qel *q, const char *b, const char *high) {
  return qlet(q, "nib", "i32", lz_str(q->l, "select(%s, %s // 16, %s %% 16)", high, b, b));
}

/* Byte b shifted right by t (an index text, 0 <= t < 8): by 4, 2 and 1 as t's binary digits say,
 * each a shift by a constant. */
static const char *shr(qel *q, const char *b, const char *t) {
  lz_ctx *l = q->l;
  const char *h4 = qlet(q, "sh", "i32", lz_str(l, "select(%s >= 4, %s // 16, %s)", t, b, b));
  const char *h2 = qlet(q, "sh", "i32", lz_str(l, "select(%s %% 4 >= 2, %s // 4, %s)", t, h4, h4));
  return qlet(q, "sh", "i32", lz_str(l, "select(%s %% 2 == 1, %s // 2, %s)", t, h2, h2));
}

/* The element W[j, r] of relaxc's own schemes as an f32 expression. */
static const char *own_element(qel *q) {
  lz_ctx *l = q->l;
  const char *r = q->r, *scale = lz_str(l, "f32(%s[%s, %s // %d])", q->s, q->j, r, q->qi->block);
  if (q->qi->kind == RX_QUANT_INT8) return lz_str(l, "%s * f32(%s[%s, %s])", scale, q->w, q->j, r);
  const char *b = qlet(q, "b", "i32", qbyte(q, lz_str(l, "%s // 2", r)));
  const char *n = nibble(q, b, lz_str(l, "%s %% 2 == 1", r));
  const char *zero = q->qi->kind == RX_QUANT_INT4_ZERO
                         ? lz_str(l, "i32(%s[%s, %s // %d])", q->z, q->j, r, q->qi->block)
                         : "8";
  return lz_str(l, "%s * f32(%s - %s)", scale, n, zero);
}

/* Q4_K and Q5_K (block_q4_K / block_q5_K): f16 d, f16 dmin, 12 bytes of 6-bit scales and mins
 * of the eight sub-blocks of 32 (ggml's get_scale_min_k4), Q5_K's qh[32], then qs[128]; element
 * o is l = o % 32 of sub-block sb = o // 32: the low (sb even) or high nibble of
 * qs[32 (sb // 2) + l], Q5_K's bit sb of qh[l] above it; (d sc) q - dmin m. */
static const char *k4_element(qel *q, const char *base, const char *o, bool five) {
  lz_ctx *l = q->l;
  const char *sb = lz_str(l, "(%s // 32)", o), *lo = lz_str(l, "(%s %% 32)", o);
  const char *d = f16_from_bytes(q, base), *dmin = f16_from_bytes(q, lz_str(l, "%s + 2", base));
  /* every byte the scale and min of sb may need, in the block's 12 scale bytes for any sb */
  const char *a = qlet(q, "sa", "i32", qbyte(q, lz_str(l, "%s + 4 + %s", base, sb)));
  const char *b = qlet(q, "sb", "i32", qbyte(q, lz_str(l, "%s + 8 + %s", base, sb)));
  const char *c = qlet(q, "sc", "i32", qbyte(q, lz_str(l, "%s + %s", base, sb)));
  const char *sc =
      qlet(q, "scl", "i32",
           lz_str(l, "select(%s < 4, %s %% 64, %s %% 16 + %s // 64 * 16)", sb, a, b, c));
  const char *mn = qlet(
      q, "mn", "i32", lz_str(l, "select(%s < 4, %s %% 64, %s // 16 + %s // 64 * 16)", sb, b, b, a));
  const char *qb =
      qlet(q, "b", "i32",
           qbyte(q, lz_str(l, "%s + %d + %s // 2 * 32 + %s", base, five ? 48 : 16, sb, lo)));
  const char *nib = nibble(q, qb, lz_str(l, "%s %% 2 == 1", sb));
  if (five) {
    const char *hb = qlet(q, "hb", "i32", qbyte(q, lz_str(l, "%s + 16 + %s", base, lo)));
    nib = qlet(q, "q5", "i32", lz_str(l, "%s + 16 * (%s %% 2)", nib, shr(q, hb, sb)));
  }
  const char *d1 = qlet(q, "d1", "f32", lz_str(l, "%s * f32(%s)", d, sc));
  const char *m1 = qlet(q, "m1", "f32", lz_str(l, "%s * f32(%s)", dmin, mn));
  return lz_str(l, "%s * f32(%s) - %s", d1, nib, m1);
}

/* Q6_K (block_q6_K): ql[128], qh[64], int8 scales[16], f16 d; element o is l = o % 32 of
 * quarter s = o % 128 // 32 of half h = o // 128: the low (s < 2) or high nibble of
 * ql[64 h + 32 (s % 2) + l], bits 2s and 2s + 1 of qh[32 h + l] above it, minus 32, times d
 * times scales[o // 16]. */
static const char *q6k_element(qel *q, const char *base, const char *o) {
  lz_ctx *l = q->l;
  const char *h = lz_str(l, "(%s // 128)", o), *s = lz_str(l, "(%s %% 128 // 32)", o);
  const char *lo = lz_str(l, "(%s %% 32)", o);
  const char *ql =
      qlet(q, "ql", "i32", qbyte(q, lz_str(l, "%s + %s * 64 + %s %% 2 * 32 + %s", base, h, s, lo)));
  const char *nib = nibble(q, ql, lz_str(l, "%s >= 2", s));
  const char *qh =
      qlet(q, "qh", "i32", qbyte(q, lz_str(l, "%s + 128 + %s * 32 + %s", base, h, lo)));
  const char *hi = shr(q, qh, lz_str(l, "%s * 2", s));
  const char *sb = qlet(q, "s8", "i32", qbyte(q, lz_str(l, "%s + 192 + %s // 16", base, o)));
  const char *d = f16_from_bytes(q, lz_str(l, "%s + 208", base));
  const char *ds =
      qlet(q, "ds", "f32", lz_str(l, "%s * f32(select(%s >= 128, %s - 256, %s))", d, sb, sb, sb));
  return lz_str(l, "%s * f32(%s + 16 * (%s %% 4) - 32)", ds, nib, hi);
}

/* The element W[j, r] of a GGUF block format (frontends/gguf/gguf_quant.c defines each). */
static const char *gguf_element(qel *q) {
  lz_ctx *l = q->l;
  const rx_quant_info *qi = q->qi;
  const char *base = lz_str(l, "%s // %d * %d", q->r, qi->block, qi->block_bytes);
  const char *o = lz_str(l, "(%s %% %d)", q->r, qi->block);
  if (qi->gguf == RX_GGUF_TYPE_Q4_K || qi->gguf == RX_GGUF_TYPE_Q5_K)
    return k4_element(q, base, o, qi->gguf == RX_GGUF_TYPE_Q5_K);
  if (qi->gguf == RX_GGUF_TYPE_Q6_K) return q6k_element(q, base, o);
  const char *d = f16_from_bytes(q, base);
  switch (qi->gguf) {
  case RX_GGUF_TYPE_Q8_0: { /* f16 d, int8 qs[32] */
    const char *b = qlet(q, "b", "i32", qbyte(q, lz_str(l, "%s + 2 + %s", base, o)));
    return lz_str(l, "f32(select(%1$s >= 128, %1$s - 256, %1$s)) * %2$s", b, d);
  }
  case RX_GGUF_TYPE_Q4_0: { /* f16 d, qs[16]: element o < 16 low nibble of qs[o], else high */
    const char *b = qlet(q, "b", "i32", qbyte(q, lz_str(l, "%s + 2 + %s %% 16", base, o)));
    return lz_str(l, "f32(%s - 8) * %s", nibble(q, b, lz_str(l, "%s >= 16", o)), d);
  }
  case RX_GGUF_TYPE_Q4_1: { /* f16 d, f16 m, qs[16]; q d + m */
    const char *m = f16_from_bytes(q, lz_str(l, "%s + 2", base));
    const char *b = qlet(q, "b", "i32", qbyte(q, lz_str(l, "%s + 4 + %s %% 16", base, o)));
    return lz_str(l, "f32(%s) * %s + %s", nibble(q, b, lz_str(l, "%s >= 16", o)), d, m);
  }
  default: { /* Q5_0: f16 d, u32 qh (bit o: the fifth bit of element o), qs[16] as Q4_0 */
    RX_ASSERT(qi->gguf == RX_GGUF_TYPE_Q5_0);
    const char *b = qlet(q, "b", "i32", qbyte(q, lz_str(l, "%s + 6 + %s %% 16", base, o)));
    const char *n = nibble(q, b, lz_str(l, "%s >= 16", o));
    const char *hb = qlet(q, "hb", "i32", qbyte(q, lz_str(l, "%s + 2 + %s // 8", base, o)));
    const char *bit =
        qlet(q, "hi", "i32", lz_str(l, "%s %% 2", shr(q, hb, lz_str(l, "(%s %% 8)", o))));
    return lz_str(l, "f32(%s + 16 * %s - 16) * %s", n, bit, d);
  }
  }
}

/* The call's scheme and buffers into *q, and the loop nest over the output y (its variables in
 * iv); false, reported, when the call has no scheme or y too many dims. */
static bool qel_open(lz_ctx *l, qel *q, const char **iv) {
  const rx_attr *a = ops_call_attr(l->call, "scheme");
  rx_quant_scheme sc;
  lz_opnd *y = &l->outs[0];
  if (!a || !base_quant_lookup(a->s, &sc) || y->ndim > LZ_MAXR) {
    lz_fail(l, "no quantization scheme, or more than %d dims", LZ_MAXR);
    return false;
  }
  int nb = base_quant_nbuffers(sc);
  *q = (qel){.l = l, .qi = base_quant_info_of(sc), .w = lz_arg(l, 1)->name};
  q->s = nb >= 2 ? lz_arg(l, 2)->name : NULL;
  q->z = nb >= 3 ? lz_arg(l, 3)->name : NULL;
  for (int d = 0; d < y->ndim; d++) {
    iv[d] = lz_loopvar(l, lz_str(l, "i%d", d));
    lz_line(l, "for %s in 0..%s {", iv[d], lz_ex(l, y->shape[d]));
    l->ind++;
  }
  return true;
}

/* W[j, r] of q's scheme, its lets written out at the current indentation. */
static const char *qel_element(qel *q) {
  const char *wv = q->qi->kind == RX_QUANT_GGUF ? gguf_element(q) : own_element(q);
  for (char *line = q->lets.data, *nl; line && *line; line = nl + 1) {
    nl = strchr(line, '\n');
    lz_line(q->l, "%.*s", (int)(nl - line), line);
  }
  return wv;
}

/* The element W[row, r] of qi's buffers w, s, z (names; s and z NULL where the scheme has none)
 * as an f32 expression, its lets written at the current indentation. row is the index text of
 * the weight's leading dims, so stacked weights [E, N, ...] pass "e, j" (ops/moe.c). */
const char *lz_quant_element(lz_ctx *l, const rx_quant_info *qi, const char *w, const char *s,
                             const char *z, const char *row, const char *r) {
  qel q = {.l = l, .qi = qi, .w = w, .s = s, .z = z, .j = row, .r = r};
  const char *wv = lz_str(l, "(%s)", qel_element(&q));
  base_strbuf_free(&q.lets);
  return wv;
}

void lz_gen_quant_matmul(lz_ctx *l) {
  lz_opnd *x = lz_arg(l, 0), *y = &l->outs[0];
  qel q;
  const char *iv[LZ_MAXR], *xi[LZ_MAXR];
  if (!qel_open(l, &q, iv)) return;
  q.j = iv[y->ndim - 1];
  q.r = lz_loopvar(l, "r");
  for (int d = 0; d + 1 < x->ndim; d++) xi[d] = iv[d];
  xi[x->ndim - 1] = q.r;
  const char *acc = lz_fresh(l, "acc");
  lz_line(l, "alloc %s: f32[1] local", acc);
  lz_line(l, "reduce %s in 0..%s {", q.r, lz_ex(l, x->shape[x->ndim - 1]));
  l->ind++;
  lz_line(l, "init { %s[0] = 0.0 }", acc);
  lz_line(l, "update {");
  l->ind++;
  const char *wv = qel_element(&q);
  lz_line(l, "%s[0] = %s[0] + %s * (%s)", acc, acc, lz_up(l, x->dtype, lz_load(l, x, xi)), wv);
  lz_close(l);
  lz_close(l);
  lz_line(l, "%s = %s(%s[0])", lz_load(l, y, iv), ir_dtype_name(y->dtype), acc);
  for (int d = 0; d < y->ndim; d++) lz_close(l);
  base_strbuf_free(&q.lets);
}

/* rms_norm_matmul (its deduction above): per output point the sum of squares of x's row, then
 * one reduction per weight (two when gated), then the scale and the epilogue:
 *
 *   for i..., j in 0..M {
 *     alloc ss: f32[1] local   alloc acc: f32[1] local   [alloc acc2: f32[1] local]
 *     reduce r in 0..K { init { ss[0] = 0.0 } update { ss[0] = ss[0] + f32(x) * f32(x) } }
 *     reduce r1 in 0..K { init { acc[0] = 0.0 }
 *                         update { let ...  acc[0] = acc[0] + f32(T(x nw)) * W[j, r1] } }
 *     [reduce r2 ... acc2 with W2]
 *     let rs: f32 = rsqrt(ss[0] / f32(K) + eps)
 *     y[i..., j] = T(acc[0] * rs)        or, gated:
 *     let g: T = T(acc[0] * rs)   let u: T = T(acc2[0] * rs)   y[i..., j] = T(f32(g) *
 * sigmoid(f32(g))) * u
 *   }
 *
 * The operand rounds x nw to T, where the rms_norm kernel rounded x rs nw: the same rounding of
 * a different value (rs scales both). */
void lz_gen_rms_norm_matmul(lz_ctx *l) {
  lz_opnd *x = lz_arg(l, 0), *nw = lz_arg(l, 1), *y = &l->outs[0];
  const rx_attr *sa = ops_call_attr(l->call, "scheme"), *ga = ops_call_attr(l->call, "gated"),
                *ea = ops_call_attr(l->call, "epsilon");
  double eps = ea ? ea->f : 1e-5;
  int sets = ga && ga->i ? 2 : 1, nb = 1;
  qel q = {.l = l};
  rx_quant_scheme sc;
  if (sa) {
    if (!base_quant_lookup(sa->s, &sc)) {
      lz_fail(l, "unknown scheme");
      return;
    }
    q.qi = base_quant_info_of(sc);
    nb = base_quant_nbuffers(sc);
  }
  if (y->ndim > LZ_MAXR) {
    lz_fail(l, "more than %d dims", LZ_MAXR);
    return;
  }
  const char *iv[LZ_MAXR], *xi[LZ_MAXR];
  for (int d = 0; d < y->ndim; d++) {
    iv[d] = lz_loopvar(l, lz_str(l, "i%d", d));
    lz_line(l, "for %s in 0..%s {", iv[d], lz_ex(l, y->shape[d]));
    l->ind++;
  }
  q.j = iv[y->ndim - 1];
  const rx_expr *K = x->shape[x->ndim - 1];
  const char *ss = lz_fresh(l, "ss"), *acc[2] = {NULL, NULL};
  lz_line(l, "alloc %s: f32[1] local", ss);
  for (int k = 0; k < sets; k++) {
    acc[k] = lz_fresh(l, k ? "acc2" : "acc");
    lz_line(l, "alloc %s: f32[1] local", acc[k]);
  }
  const char *r = lz_loopvar(l, "r");
  for (int d = 0; d + 1 < x->ndim; d++) xi[d] = iv[d];
  xi[x->ndim - 1] = r;
  const char *xv = lz_up(l, x->dtype, lz_load(l, x, xi));
  lz_line(l, "reduce %s in 0..%s {", r, lz_ex(l, K));
  l->ind++;
  lz_line(l, "init { %s[0] = 0.0 }", ss);
  lz_line(l, "update { %s[0] = %s[0] + %s * %s }", ss, ss, xv, xv);
  lz_close(l);
  const char *tn = ir_dtype_name(y->dtype);
  for (int k = 0; k < sets; k++) {
    q.r = lz_loopvar(l, "r");
    xi[x->ndim - 1] = q.r;
    const char *xn = lz_str(l, "%s * %s", lz_up(l, x->dtype, lz_load(l, x, xi)),
                            lz_up(l, nw->dtype, lz_load(l, nw, &q.r)));
    if (y->dtype != RX_DTYPE_F32) xn = lz_str(l, "f32(%s(%s))", tn, xn);
    lz_line(l, "reduce %s in 0..%s {", q.r, lz_ex(l, K));
    l->ind++;
    lz_line(l, "init { %s[0] = 0.0 }", acc[k]);
    lz_line(l, "update {");
    l->ind++;
    lz_opnd *w = lz_arg(l, 2 + k * nb);
    const char *wv;
    if (q.qi) {
      q.w = w->name;
      q.s = nb >= 2 ? lz_arg(l, 3 + k * nb)->name : NULL;
      q.z = nb >= 3 ? lz_arg(l, 4 + k * nb)->name : NULL;
      q.lets = (rx_strbuf){0};
      wv = lz_str(l, "(%s)", qel_element(&q));
      base_strbuf_free(&q.lets);
    } else {
      const char *wi[2] = {q.j, q.r};
      wv = lz_up(l, w->dtype, lz_load(l, w, wi));
    }
    lz_line(l, "%s[0] = %s[0] + %s * %s", acc[k], acc[k], xn, wv);
    lz_close(l);
    lz_close(l);
  }
  const char *rs = lz_fresh(l, "rs");
  lz_line(l, "let %s: f32 = rsqrt(%s[0] / f32(%s) + %s)", rs, ss, lz_ex(l, K), lz_flit(l, eps));
  const char *out = lz_load(l, y, iv);
  if (sets == 1) {
    lz_line(l, "%s = %s(%s[0] * %s)", out, tn, acc[0], rs);
  } else {
    const char *g = lz_fresh(l, "g"), *u = lz_fresh(l, "u");
    lz_line(l, "let %s: %s = %s(%s[0] * %s)", g, tn, tn, acc[0], rs);
    lz_line(l, "let %s: %s = %s(%s[0] * %s)", u, tn, tn, acc[1], rs);
    const char *gv = lz_up(l, y->dtype, g);
    lz_line(l, "%s = %s(%s * sigmoid(%s)) * %s", out, tn, gv, gv, u);
  }
  for (int d = 0; d < y->ndim; d++) lz_close(l);
}

/* quant_take: per id and column c, W[id, c] dequantized as quant_matmul's element (ids are rows,
 * 0 <= id < rows, not checked at run time: token ids of an embedding table):
 *
 *   for i..., c in 0..in {
 *     let row: i64 = i64(ids[i...])
 *     let ... (the element's bytes, nibbles, scale)
 *     y[i..., c] = T(W)
 *   } */
void lz_gen_quant_take(lz_ctx *l) {
  lz_opnd *ids = lz_arg(l, 0), *y = &l->outs[0];
  qel q;
  const char *iv[LZ_MAXR];
  if (!qel_open(l, &q, iv)) return;
  const char *ld = lz_load(l, ids, iv);
  const char *t = lz_fresh(l, "t");
  lz_line(l, "let %s: i64 = %s", t, ids->dtype == RX_DTYPE_I64 ? ld : lz_str(l, "i64(%s)", ld));
  q.j = lz_data_index(l, t, lz_arg(l, 1)->shape[0], 0);
  q.r = iv[y->ndim - 1];
  const char *wv = qel_element(&q);
  lz_line(l, "%s = %s(%s)", lz_load(l, y, iv), ir_dtype_name(y->dtype), wv);
  for (int d = 0; d < y->ndim; d++) lz_close(l);
  base_strbuf_free(&q.lets);
}
