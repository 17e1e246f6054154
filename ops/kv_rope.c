/* ops/kv_rope.c: kv_append_rope, the new keys rotated (rope, rotate_half) and written with the new
 * values into the paged KV cache in one kernel, and optionally the queries rotated beside them:
 * its deduction and its generator.
 *
 *   kv_append_rope(pages [P, 2, KVH, 16, D], k [N, WK], v [N, WV], slot i32[N], cos [N, D],
 *                  sin [N, D], k_offset=a, v_offset=b) -> pages (written in place)
 *   kv_append_rope(..., sin, q [N, WQ], k_offset=a, v_offset=b, q_offset=c, q_heads=H)
 *     -> (pages (written in place), q roped [N, H, D] (a new tensor))
 *
 * the keys being columns a .. a + KVH * D of k's rows, the values columns b .. b + KVH * D of v's
 * (offsets 0 by default), the queries columns c .. c + H * D of q's. It stands for
 * rope(reshape(k[:, a:a + KVH * D], [N, KVH, D]), cos, sin) and
 * reshape(v[:, b:b + KVH * D], [N, KVH, D]) followed by kv_append (ops/attention.c), and
 * rope(reshape(q[:, c:c + H * D], [N, H, D]), cos, sin): the LLM builder's decoder layer
 * (frontends/hf/llama.c) ran those as three or more kernels (rope of q with its slice and
 * reshape, rope of k with its reshape, the reshape of v, the append) per layer and forward. k, v
 * and q come as the projections' outputs: [N, KVH * D] and [N, H * D], or the one
 * [N, (H + 2 KVH) * D] of the fused q/k/v projection passed as all three (q_offset 0, k_offset
 * H * D, v_offset (H + KVH) * D), so no slice or reshape is left either. The queries are not
 * updated in place: the projection's rows stay as they are and the roped queries are a second
 * output (an in-place call with out= beside inplace=, ir.h's fresh_out).
 * The rotation is rope's arithmetic exactly (ops/nn.c, lz_gen_rope: the f32 math of x * cos +
 * rotate_half(x) * sin rounded once to the cache's dtype), so the cache and the queries hold the
 * same bits as rope's. */
#include "../shapes/expr_build.h"
#include "deduce.h"
#include "legalize_int.h"

#include <stdio.h>

/* Threads per block: one block per token, its threads over the KVH * D elements of the token's
 * keys and values (kv_append's 128: the generic Vulkan target's maxComputeWorkGroupInvocations,
 * targets.c, so the one program runs on every target). */
#define KVR_THREADS 128
/* Tokens per page of the cache (ops/attention.c's ATTN_PAGE, runtime/llm's RX_KV_PAGE). */
#define KVR_PAGE 16

static bool need_dim(rx_deduce_ctx *dc, const rx_expr *got, const rx_expr *want, const char *what,
                     const rx_sinfo *t) {
  rx_tribool eq = ops_dim_eq(dc, got, want);
  if (eq == RX_TRUE) return true;
  ops_deduce_error(dc, "kv_append_rope expects %s %s, got %s (%s)", what, ops_expr_str(dc, want),
                   ops_str(dc, t), eq == RX_FALSE ? "differs" : "cannot be proven; use match_cast");
  return false;
}

/* Columns off .. off + width of a's rows, width the number of heads given times D (the keys',
 * the values' or the queries'); false with an error otherwise. */
static bool need_cols(rx_deduce_ctx *dc, const rx_sinfo *a, const char *name, int64_t off,
                      const rx_expr *width, const char *heads) {
  rx_expr_ctx *cx = ops_ctx(dc);
  const rx_expr *end = ops_simplify(dc, sym_expr_add(cx, sym_expr_const(cx, off), width));
  if (off >= 0 && ops_prove(dc, sym_expr_cmp(cx, RX_EXPR_LE, end, a->shape[1])) == RX_TRUE)
    return true;
  ops_deduce_error(dc,
                   "kv_append_rope expects %s's rows to hold columns %lld .. %s (%s_offset and "
                   "%s * D), got %s",
                   name, (long long)off, ops_expr_str(dc, end), name, heads, ops_str(dc, a));
  return false;
}

const rx_sinfo *ops_deduce_kv_append_rope(rx_deduce_ctx *dc, const rx_node *call) {
  static const char *const names[7] = {"pages", "k", "v", "slot", "cos", "sin", "q"};
  static const int rank[7] = {5, 2, 2, 1, 2, 2, 2};
  const rx_sinfo *a[7];
  int nargs = call->nargs; /* 6, or 7 with the queries */
  for (int i = 0; i < nargs; i++) {
    a[i] = ops_tensor_arg(dc, call, i, names[i]);
    if (!a[i]) return NULL;
    if (a[i]->ndim != rank[i] || !a[i]->shape) {
      ops_deduce_error(dc, "kv_append_rope expects %s of rank %d with a known shape, got %s",
                       names[i], rank[i], ops_str(dc, a[i]));
      return NULL;
    }
    bool want_i32 = i == 3;
    if (want_i32 ? a[i]->dtype != RX_DTYPE_I32
                 : !ir_dtype_is_float(a[i]->dtype) || a[i]->dtype != a[0]->dtype) {
      ops_deduce_error(dc, "kv_append_rope expects %s of dtype %s, got %s", names[i],
                       want_i32 ? "i32" : ir_dtype_name(a[0]->dtype), ops_str(dc, a[i]));
      return NULL;
    }
  }
  rx_expr_ctx *cx = ops_ctx(dc);
  const rx_expr *const *p = a[0]->shape, *n = a[1]->shape[0], *d = p[4];
  const rx_expr *row = ops_simplify(dc, sym_expr_mul(cx, p[2], d));
  if (!need_dim(dc, p[1], sym_expr_const(cx, 2), "pages [P, 2, KVH, 16, D] with dim 1", a[0]) ||
      !need_dim(dc, p[3], sym_expr_const(cx, KVR_PAGE), "pages [P, 2, KVH, 16, D] with dim 3",
                a[0]))
    return NULL;
  for (int i = 1; i < nargs; i++) {
    char what[64];
    snprintf(what, sizeof what, "%s with %s rows", names[i], "the keys'");
    if (!need_dim(dc, a[i]->shape[0], n, what, a[i])) return NULL;
    if (i == 4 || i == 5)
      if (!need_dim(dc, a[i]->shape[1], d, "cos and sin of a row of", a[i])) return NULL;
  }
  /* the keys' and values' columns within k's and v's rows */
  if (!need_cols(dc, a[1], "k", ops_int_attr(call, "k_offset", 0), row, "KVH") ||
      !need_cols(dc, a[2], "v", ops_int_attr(call, "v_offset", 0), row, "KVH"))
    return NULL;
  const rx_expr *rem = ops_simplify(dc, sym_expr_floormod(cx, d, sym_expr_const(cx, 2)));
  if (!rx_expr_is_const(rem, 0)) {
    ops_deduce_error(dc, "kv_append_rope expects an even head dim, got %s", ops_expr_str(dc, d));
    return NULL;
  }
  int64_t heads = ops_int_attr(call, "q_heads", 0);
  if (nargs == 6) {
    if (heads || ops_call_attr(call, "q_offset")) {
      ops_deduce_error(dc, "kv_append_rope has q_heads or q_offset but no q (argument 7)");
      return NULL;
    }
    return a[0]; /* the pages, written in place */
  }
  if (heads < 1) {
    ops_deduce_error(dc, "kv_append_rope with q (argument 7) expects q_heads >= 1, got %lld",
                     (long long)heads);
    return NULL;
  }
  const rx_expr *qh = sym_expr_const(cx, heads);
  if (!need_cols(dc, a[6], "q", ops_int_attr(call, "q_offset", 0),
                 ops_simplify(dc, sym_expr_mul(cx, qh, d)), "q_heads"))
    return NULL;
  /* the pages written in place, then the roped queries [N, H, D] */
  const rx_expr **qd = ops_dims(dc, 3);
  qd[0] = n;
  qd[1] = qh;
  qd[2] = d;
  const rx_sinfo *f[2] = {a[0], ops_tensor(dc, a[0]->dtype, 3, qd)};
  return rx_sinfo_tuple(dc->mod, f, 2);
}

/* The rope of src's element e = h * D + dd of the heads from column off of token tok's row, as
 * an expression of dtype t (rope's arithmetic, lz_gen_rope): rot, the partner element
 * src[tok, off + h * D + (dd + D / 2) % D] negated for dd < D / 2, bound to a fresh let. */
static const char *rope_elem(lz_ctx *l, lz_opnd *src, const rx_expr *off, const rx_expr *e,
                             const rx_expr *d, const char *tok) {
  rx_expr_ctx *cx = l->cx;
  rx_dtype t = l->outs[0].dtype;
  lz_opnd *cs = lz_arg(l, 4), *sn = lz_arg(l, 5);
  const rx_expr *half = sym_expr_floordiv(cx, d, sym_expr_const(cx, 2));
  const rx_expr *h = sym_expr_floordiv(cx, e, d), *dd = sym_expr_floormod(cx, e, d);
  const rx_expr *partner = sym_expr_add(cx, sym_expr_mul(cx, h, d),
                                        sym_expr_floormod(cx, sym_expr_add(cx, dd, half), d));
  const char *xi[2] = {tok, lz_ex(l, sym_expr_add(cx, off, e))},
             *pi[2] = {tok, lz_ex(l, sym_expr_add(cx, off, partner))}, *ci[2] = {tok, lz_ex(l, dd)};
  const char *rot = lz_fresh(l, "rot"), *xp = lz_up(l, t, lz_load(l, src, pi));
  lz_line(l, "let %s: f32 = select(%s < %s, -%s, %s)", rot, lz_ex(l, dd), lz_ex(l, half), xp, xp);
  return lz_down(l, t,
                 lz_str(l, "%s * %s + %s * %s", lz_up(l, t, lz_load(l, src, xi)),
                        lz_up(l, t, lz_load(l, cs, ci)), rot, lz_up(l, t, lz_load(l, sn, ci))));
}

/* Opens the loop of the block's threads over count elements (lz_open_thread_items): returns
 * e = tx + c * threads (two scopes to close). */
static const rx_expr *open_elems(lz_ctx *l, const char *tx, const rx_expr *count) {
  return lz_open_thread_items(l, tx, lz_loopvar(l, "c"), KVR_THREADS, count);
}

/* A block per token t, its threads over the elements e = h * D + dd of the token's keys:
 *   pages[slot // 16, 0, h, slot % 16, dd] = rope(k[t, a:])[e]
 *   pages[slot // 16, 1, h, slot % 16, dd] = v[t, b + e]
 * where rope's partner element is k[t, a + h * D + (dd + D / 2) % D], negated for dd < D / 2;
 * with q, then over the elements e = h * D + dd of its queries: qr[t, h, dd] = rope(q[t, c:])[e].
 * The program's parameters are k, v, slot, cos, sin (, q) and `out pages`
 * (ops_legalize_inplace_arg)
 * (, `out` the roped queries): it writes only the slots given. */
void lz_gen_kv_append_rope(lz_ctx *l) {
  int nargs = l->call->nargs;
  for (int i = 0; i < nargs; i++)
    if (lz_arg(l, i)->scalar) {
      lz_fail(l, "expects tensor operands");
      return;
    }
  lz_opnd *k = lz_arg(l, 1), *v = lz_arg(l, 2), *slot = lz_arg(l, 3), *pages = &l->outs[0];
  rx_expr_ctx *cx = l->cx;
  const rx_expr *n = k->shape[0], *d = pages->shape[4];
  const rx_expr *row = sym_expr_mul(cx, pages->shape[2], d);
  const rx_expr *koff = sym_expr_const(cx, ops_int_attr(l->call, "k_offset", 0));
  const rx_expr *voff = sym_expr_const(cx, ops_int_attr(l->call, "v_offset", 0));
  const char *tok = lz_loopvar(l, "t"), *tx = lz_loopvar(l, "tx");
  const char *sl = lz_fresh(l, "sl");
  lz_line(l, "for %s in 0..%s bind(blockIdx.x) {", tok, lz_ex(l, n));
  l->ind++;
  lz_line(l, "for %s in 0..%d bind(threadIdx.x) {", tx, KVR_THREADS);
  l->ind++;
  lz_line(l, "let %s: i32 = %s[%s]", sl, slot->name, tok);
  const rx_expr *e = open_elems(l, tx, row);
  const rx_expr *h = sym_expr_floordiv(cx, e, d), *dd = sym_expr_floormod(cx, e, d);
  const char *vi[2] = {tok, lz_ex(l, sym_expr_add(cx, voff, e))};
  const char *val = rope_elem(l, k, koff, e, d, tok);
  for (int which = 0; which < 2; which++)
    lz_line(l, "%s[%s // %d, %d, %s, %s %% %d, %s] = %s", pages->name, sl, KVR_PAGE, which,
            lz_ex(l, h), sl, KVR_PAGE, lz_ex(l, dd), which ? lz_load(l, v, vi) : val);
  lz_close(l);
  lz_close(l);
  if (nargs == 7) { /* the queries, into the second output [N, H, D] */
    lz_opnd *q = lz_arg(l, 6), *qr = &l->outs[1];
    const rx_expr *qoff = sym_expr_const(cx, ops_int_attr(l->call, "q_offset", 0));
    const rx_expr *qe = open_elems(l, tx, sym_expr_mul(cx, qr->shape[1], d));
    const char *qv = rope_elem(l, q, qoff, qe, d, tok);
    const char *oi[3] = {tok, lz_ex(l, sym_expr_floordiv(cx, qe, d)),
                         lz_ex(l, sym_expr_floormod(cx, qe, d))};
    lz_line(l, "%s = %s", lz_load(l, qr, oi), qv);
    lz_close(l);
    lz_close(l);
  }
  lz_close(l);
  lz_close(l);
}
