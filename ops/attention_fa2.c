/* ops/attention_fa2.c: paged_attention (prefill over the paged KV cache, packed ragged batches
 * alike; docs/llm.md) in FlashAttention-2's one-pass form on mma.sync m16n8k16 (ir.h
 * RX_STMT_MMA, RX_STMT_LDMATRIX, RX_STMT_ASYNC_COPY), for the targets that run it (CUDA sm_80
 * and sm_90: `if has_mma(T, f32, 16, 8, 16)`, ir.h). ops/attention.c writes it first in
 * lz_gen_paged_attention; its else holds the fragment and portable forms, with the same
 * semantics, which this kernel follows exactly (rows, token table, visible key ranges).
 *
 * A block of FA2_WARPS warps takes FA2_ROWS query rows (a row: one query token and one query
 * head; the heads of a GQA group share the block, as in attention.c, so each K/V tile serves the
 * whole group), 16 rows per warp, and walks, for each sequence of its tokens (led by the first
 * of them in the tile), the key tiles of one page (16 keys) from the first key any of those
 * tokens sees to the last (causal: nothing above the diagonal; window: nothing before it):
 *
 *   Q:    the block's rows -> shared (cp.async) -> ldmatrix x4 into A fragments of m16n8k16,
 *         held in registers for the whole kernel (D / 16 of them per lane)
 *   K, V: FA2_STAGES stages of cp.async (issued FA2_STAGES - 1 tiles ahead) into shared rows
 *         of D elements whose 16-byte chunks are rotated by the key (chunk (c + key) mod D / 8,
 *         as gemm_mma.c's stages), so the 8 rows of one ldmatrix phase fall in distinct banks;
 *         keys past the sequence's length are zero-filled, never read
 *   S = Q K^T: per warp 16 x 16 in two m16n8k16 accumulators, K's B fragments by ldmatrix x4
 *   softmax: on the accumulators in registers; a lane holds rows g and g + 8 (g = lane / 4,
 *         ir.h's C layout), their running max reduced over the 4 lanes of the quad by two
 *         shuffle_xor; scores in base 2 (the scale times log2 e folded in), p = exp2(s - m);
 *         the running sum stays per lane (reduced over the quad once, at the end)
 *   P:    the two C fragments of a row block ARE the A fragment of the next k16 (a[i] =
 *         c[i / 4][i % 4]): converted to T in registers, no round trip through shared memory
 *   O += P V: V's B fragments by ldmatrix x4 .trans; O (16 x D per warp, f32) in registers,
 *         rescaled by exp2(m_old - m_new) per row
 *   end:  O / l (0 for a row that saw no key) rounded to T into shared memory, then stored
 *         16 bytes a thread.
 *
 * Masking is by key position against the row's visible range (q_pos, kv_len, window) and its
 * sequence, so rows of other sequences in the tile and keys past the diagonal get p = 0; a warp
 * skips the tiles none of its rows sees (warp_range). Not
 * timed on a GPU yet: docs/schedules.md, "FlashAttention-2 prefill", has the PTX figures. */
#include "attention_int.h"
#include "deduce.h"
#include "ops.h"

#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define FA2_WARPS   4                /* warps per block: 128 threads */
#define FA2_THREADS (32 * FA2_WARPS) /* threads per block */
#define FA2_ROWS    (16 * FA2_WARPS) /* query rows per block: one m16 row block per warp */
#define FA2_PAGE    16               /* keys per tile: one page of the cache (docs/llm.md) */
#define FA2_STAGES  3                /* K/V tiles in shared memory: 2 in flight, 1 computed */
/* Static shared memory of a CUDA block (sm_80, sm_90 without opt-in: targets.c). */
#define FA2_SHARED 49152
/* As attention.c: the running max starts at the lowest finite f32; scores in base 2
 * (ops_attn_score). */
#define FA2_NO_SCORE (-FLT_MAX)

typedef struct fa2 {
  lz_ctx *l;
  lz_opnd *q, *pages, *pt, *kvlen, *qseq, *qpos, *y;
  const char *t; /* T's name */
  int64_t d, heads, kvh, group, window;
  int64_t gr, gc, tq;         /* heads of a group per block, blocks per group, tokens */
  int64_t ch;                 /* 16-byte chunks per row of D */
  const char *tile, *kh, *tx; /* block and thread variables */
  const char *qs, *ks, *vs;   /* shared: Q rows, K and V stages */
  const char *tseq, *tlo, *thi, *tlead, *slo, *shi; /* shared, per token of the tile */
  const char *qf, *kx, *kb, *sc, *pa, *o, *mr, *lr; /* registers */
  const char *seq, *kvl, *rok[2], *rlo[2], *rhi[2]; /* per sequence of the tile */
} fa2;

static const char *F(fa2 *f, const char *fmt, ...) RX_PRINTF(2, 3);
static const char *F(fa2 *f, const char *fmt, ...) {
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  return lz_str(f->l, "%s", buf);
}

static int64_t shared_bytes(int64_t d) {
  return 2 * (FA2_ROWS * (d + 8) + 2 * FA2_STAGES * FA2_PAGE * d) + 4 * 6 * FA2_ROWS;
}

/* Text of the row this lane holds in half h (0: g, 1: g + 8) of its warp's 16. */
static const char *lane_row(fa2 *f, int h) {
  return F(f, "%s // 32 * 16 + %s %% 32 // 4 + %d", f->tx, f->tx, 8 * h);
}

/* The query token and head of row r (text). */
static const char *row_token(fa2 *f, const char *r) {
  return F(f, "%s * %lld + (%s) // %lld", f->tile, (long long)f->tq, r, (long long)f->gr);
}
static const char *row_head(fa2 *f, const char *r) {
  return F(f, "%s // %lld * %lld + %s %% %lld * %lld + (%s) %% %lld", f->kh, (long long)f->gc,
           (long long)f->group, f->kh, (long long)f->gc, (long long)f->gr, r, (long long)f->gr);
}
/* Row r's head exists (text; NULL: always). */
static const char *head_valid(fa2 *f, const char *r) {
  if (f->group % f->gr == 0) return NULL;
  return F(f, "%s %% %lld * %lld + (%s) %% %lld < %lld", f->kh, (long long)f->gc, (long long)f->gr,
           r, (long long)f->gr, (long long)f->group);
}

/* The block's loops and buffers. */
static void open_kernel(fa2 *f) {
  lz_ctx *l = f->l;
  const rx_expr *n = f->q->shape[0];
  lz_line(
      l, "for %s in 0..%s bind(blockIdx.x) {", f->tile,
      lz_ex(l, sym_expr_floordiv(l->cx, sym_expr_add(l->cx, n, sym_expr_const(l->cx, f->tq - 1)),
                                 sym_expr_const(l->cx, f->tq))));
  l->ind++;
  lz_line(l, "for %s in 0..%lld bind(blockIdx.y) {", f->kh, (long long)(f->kvh * f->gc));
  l->ind++;
  lz_line(l, "for %s in 0..%d bind(threadIdx.x) {", f->tx, FA2_THREADS);
  l->ind++;
  long long d = f->d;
  lz_line(l, "alloc %s: %s[%d, %lld] shared", f->qs, f->t, FA2_ROWS, d + 8);
  lz_line(l, "alloc %s: %s[%d, %d, %lld] shared", f->ks, f->t, FA2_STAGES, FA2_PAGE, d);
  lz_line(l, "alloc %s: %s[%d, %d, %lld] shared", f->vs, f->t, FA2_STAGES, FA2_PAGE, d);
  const char *tb[6] = {f->tseq, f->tlo, f->thi, f->tlead, f->slo, f->shi};
  for (int i = 0; i < 6; i++) lz_line(l, "alloc %s: i32[%d] shared", tb[i], FA2_ROWS);
  lz_line(l, "alloc %s: %s[%lld, 8] local", f->qf, f->t, d / 16);
  lz_line(l, "alloc %s: %s[8] local", f->kx, f->t);
  lz_line(l, "alloc %s: %s[2, 4] local", f->kb, f->t);
  lz_line(l, "alloc %s: f32[2, 4] local", f->sc);
  lz_line(l, "alloc %s: %s[1, 8] local", f->pa, f->t);
  lz_line(l, "alloc %s: f32[%lld, 4] local", f->o, d / 8);
  lz_line(l, "alloc %s: f32[2] local", f->mr);
  lz_line(l, "alloc %s: f32[2] local", f->lr);
  const char *n8 = lz_loopvar(l, "n"), *i4 = lz_loopvar(l, "i");
  lz_line(l, "for %s in 0..%lld unroll {", n8, d / 8);
  lz_line(l, "  for %s in 0..4 unroll {", i4);
  lz_line(l, "    %s[%s, %s] = 0.0", f->o, n8, i4);
  lz_line(l, "  }");
  lz_line(l, "}");
  for (int h = 0; h < 2; h++) {
    lz_line(l, "%s[%d] = %s", f->mr, h, lz_flit(l, FA2_NO_SCORE));
    lz_line(l, "%s[%d] = 0.0", f->lr, h);
  }
}

/* Q's rows into qs by cp.async (rows without a query zero-filled, their source clamped), then
 * each warp's A fragments by ldmatrix x4: lane l gives row 8 (l / 8 % 2) + l % 8 of the warp's
 * 16, chunk 2 kk + l / 16 (matrices a0a1, a2a3, a4a5, a6a7). */
static void load_q(fa2 *f) {
  lz_ctx *l = f->l;
  int64_t chunks = FA2_ROWS * f->ch;
  const char *c = lz_loopvar(l, "c"), *e = F(f, "(%s + %s * %d)", f->tx, c, FA2_THREADS);
  lz_line(l, "for %s in 0..%lld unroll {", c,
          (long long)((chunks + FA2_THREADS - 1) / FA2_THREADS));
  l->ind++;
  bool g = chunks % FA2_THREADS != 0;
  if (g) {
    lz_line(l, "if %s < %lld {", e, (long long)chunks);
    l->ind++;
  }
  const char *r = F(f, "%s // %lld", e, (long long)f->ch),
             *k = F(f, "%s %% %lld", e, (long long)f->ch);
  const char *tok = row_token(f, r), *n = lz_ex(l, f->q->shape[0]);
  const char *ok =
      F(f, "(%s) // %lld < %lld && %s < %s", r, (long long)f->gr, (long long)f->tq, tok, n);
  const char *hv = head_valid(f, r);
  if (hv) ok = F(f, "%s && %s", ok, hv);
  lz_line(l, "async_copy %s[%s, (%s) * 8] = %s[min(%s, %s - 1), min(%s, %lld), (%s) * 8] if %s",
          f->qs, r, k, f->q->name, tok, n, row_head(f, r), (long long)(f->heads - 1), k, ok);
  if (g) lz_close(l);
  lz_close(l);
  lz_line(l, "async_commit");
  lz_line(l, "async_wait 0");
  lz_line(l, "barrier");
  const char *kk = lz_loopvar(l, "kk");
  lz_line(l, "for %s in 0..%lld unroll {", kk, (long long)(f->d / 16));
  lz_line(l,
          "  ldmatrix x4 %s[%s] = %s[%s // 32 * 16 + %s %% 32 // 8 %% 2 * 8 + %s %% 8, (2 * %s + "
          "%s %% 32 // 16) * 8]",
          f->qf, kk, f->qs, f->tx, f->tx, f->tx, kk, f->tx);
  lz_line(l, "}");
}

/* The tile's token table (ops_attn_token_table): tq tokens a tile, written by the first FA2_ROWS
 * threads. */
static void token_table(fa2 *f) {
  ops_token_table t = {f->tseq,
                       f->tlo,
                       f->thi,
                       f->tlead,
                       f->slo,
                       f->shi,
                       f->tx,
                       f->tile,
                       FA2_ROWS,
                       f->tq,
                       F(f, "%lld", (long long)f->tq),
                       f->q,
                       f->qseq,
                       f->qpos,
                       f->kvlen,
                       f->window};
  ops_attn_token_table(f->l, &t);
}

/* The swizzled column (elements) of chunk c (text) of key row `key` (text) of a stage. */
static const char *swz(fa2 *f, const char *key, const char *c) {
  return F(f, "((%s) + (%s)) %% %lld * 8", c, key, (long long)f->ch);
}

/* cp.async of key tile kt (text) of the sequence into stage st (text): K and V, 16 bytes a
 * thread at a time; keys at or past kv_len zero-filled. */
static void copy_tile(fa2 *f, const char *kt, const char *st) {
  lz_ctx *l = f->l;
  int64_t chunks = FA2_PAGE * f->ch;
  const char *pid = lz_fresh(l, "pid");
  lz_line(l, "let %s: i32 = %s[%s, %s]", pid, f->pt->name, f->seq, kt);
  const char *c = lz_loopvar(l, "c"), *e = F(f, "(%s + %s * %d)", f->tx, c, FA2_THREADS);
  lz_line(l, "for %s in 0..%lld unroll {", c,
          (long long)((chunks + FA2_THREADS - 1) / FA2_THREADS));
  l->ind++;
  bool g = chunks % FA2_THREADS != 0;
  if (g) {
    lz_line(l, "if %s < %lld {", e, (long long)chunks);
    l->ind++;
  }
  const char *key = F(f, "%s // %lld", e, (long long)f->ch),
             *k = F(f, "%s %% %lld", e, (long long)f->ch);
  const char *in = F(f, "i32((%s) * %d + %s) < %s", kt, FA2_PAGE, key, f->kvl);
  for (int w = 0; w < 2; w++)
    lz_line(l, "async_copy %s[%s, %s, %s] = %s[%s, %d, %s // %lld, %s, (%s) * 8] if %s",
            w ? f->vs : f->ks, st, key, swz(f, key, k), f->pages->name, pid, w, f->kh,
            (long long)f->gc, key, k, in);
  if (g) lz_close(l);
  lz_close(l);
}

/* S = Q K^T of stage st into sc: per k16 step, ldmatrix x4 of K (lane l: key 8 (l / 16) + l % 8,
 * chunk 2 kk + l / 8 % 2; registers 0..3 the keys 0..7, 4..7 the keys 8..15). */
static void scores(fa2 *f, const char *st) {
  lz_ctx *l = f->l;
  const char *n = lz_loopvar(l, "n"), *i = lz_loopvar(l, "i"), *kk = lz_loopvar(l, "kk");
  lz_line(l, "for %s in 0..2 unroll {", n);
  lz_line(l, "  for %s in 0..4 unroll {", i);
  lz_line(l, "    %s[%s, %s] = 0.0", f->sc, n, i);
  lz_line(l, "  }");
  lz_line(l, "}");
  lz_line(l, "for %s in 0..%lld unroll {", kk, (long long)(f->d / 16));
  l->ind++;
  const char *key = F(f, "%s %% 32 // 16 * 8 + %s %% 8", f->tx, f->tx);
  lz_line(l, "ldmatrix x4 %s = %s[%s, %s, %s]", f->kx, f->ks, st, key,
          swz(f, key, F(f, "2 * %s + %s %% 32 // 8 %% 2", kk, f->tx)));
  const char *h = lz_loopvar(l, "h"), *j = lz_loopvar(l, "j");
  lz_line(l, "for %s in 0..2 unroll {", h);
  lz_line(l, "  for %s in 0..4 unroll {", j);
  lz_line(l, "    %s[%s, %s] = %s[%s * 4 + %s]", f->kb, h, j, f->kx, h, j);
  lz_line(l, "  }");
  lz_line(l, "  mma m16n8k16 %s[%s], %s[%s], %s[%s]", f->sc, h, f->qf, kk, f->kb, h);
  lz_line(l, "}");
  lz_close(l);
}

/* The online softmax of tile kt on the accumulators: per row half h the quad's max by
 * shuffle_xor 1 and 2, p = exp2(s - m) of the visible keys (0 elsewhere) into pa as T (a[i] =
 * p[i / 4][i % 4]), the lane's partial sum, and O rescaled. */
static void softmax(fa2 *f, const char *kt) {
  lz_ctx *l = f->l;
  const char *al[2];
  for (int h = 0; h < 2; h++) {
    const char *x[4], *vis[4];
    for (int k = 0; k < 4; k++) { /* k = 2 n + e: n-tile n, column 2 t + e */
      int n = k / 2, e = k % 2;
      const char *pos =
          F(f, "i32((%s) * %d + %d + %s %% 4 * 2 + %d)", kt, FA2_PAGE, 8 * n, f->tx, e);
      vis[k] = F(f, "%s && %s >= %s && %s <= %s", f->rok[h], pos, f->rlo[h], pos, f->rhi[h]);
      x[k] = lz_fresh(l, "x");
      lz_line(l, "let %s: f32 = select(%s, %s, %s)", x[k], vis[k],
              ops_attn_score(l, 1.0 / sqrt((double)f->d), F(f, "%s[%d, %d]", f->sc, n, 2 * h + e)),
              lz_flit(l, FA2_NO_SCORE));
    }
    const char *mx = lz_fresh(l, "mx"), *m1 = lz_fresh(l, "mq"), *m2 = lz_fresh(l, "mq");
    const char *mn = lz_fresh(l, "mn");
    al[h] = lz_fresh(l, "al");
    lz_line(l, "let %s: f32 = max(max(%s, %s), max(%s, %s))", mx, x[0], x[1], x[2], x[3]);
    lz_line(l, "let %s: f32 = max(%s, shuffle_xor(%s, 1))", m1, mx, mx);
    lz_line(l, "let %s: f32 = max(%s, shuffle_xor(%s, 2))", m2, m1, m1);
    lz_line(l, "let %s: f32 = max(%s[%d], %s)", mn, f->mr, h, m2);
    lz_line(l, "let %s: f32 = exp2(%s[%d] - %s)", al[h], f->mr, h, mn);
    const char *p[4];
    for (int k = 0; k < 4; k++) {
      p[k] = lz_fresh(l, "p");
      lz_line(l, "let %s: f32 = select(%s, exp2(%s - %s), 0.0)", p[k], vis[k], x[k], mn);
      lz_line(l, "%s[0, %d] = %s", f->pa, (k / 2) * 4 + 2 * h + k % 2,
              lz_down(l, f->q->dtype, p[k]));
    }
    lz_line(l, "%s[%d] = %s[%d] * %s + (%s + %s + %s + %s)", f->lr, h, f->lr, h, al[h], p[0], p[1],
            p[2], p[3]);
    lz_line(l, "%s[%d] = %s", f->mr, h, mn);
  }
  const char *n = lz_loopvar(l, "n");
  lz_line(l, "for %s in 0..%lld unroll {", n, (long long)(f->d / 8));
  for (int i = 0; i < 4; i++)
    lz_line(l, "  %s[%s, %d] = %s[%s, %d] * %s", f->o, n, i, f->o, n, i, al[i / 2]);
  lz_line(l, "}");
}

/* O += P V of stage st: per pair of n-tiles, ldmatrix x4 .trans of V (lane l: key
 * 8 (l / 8 % 2) + l % 8, chunk 2 np + l / 16). */
static void pv(fa2 *f, const char *st) {
  lz_ctx *l = f->l;
  const char *np = lz_loopvar(l, "np"), *h = lz_loopvar(l, "h"), *j = lz_loopvar(l, "j");
  lz_line(l, "for %s in 0..%lld unroll {", np, (long long)(f->d / 16));
  l->ind++;
  const char *key = F(f, "%s %% 32 // 8 %% 2 * 8 + %s %% 8", f->tx, f->tx);
  lz_line(l, "ldmatrix x4 trans %s = %s[%s, %s, %s]", f->kx, f->vs, st, key,
          swz(f, key, F(f, "2 * %s + %s %% 32 // 16", np, f->tx)));
  lz_line(l, "for %s in 0..2 unroll {", h);
  lz_line(l, "  for %s in 0..4 unroll {", j);
  lz_line(l, "    %s[%s, %s] = %s[%s * 4 + %s]", f->kb, h, j, f->kx, h, j);
  lz_line(l, "  }");
  lz_line(l, "  mma m16n8k16 %s[2 * %s + %s], %s[0], %s[%s]", f->o, np, h, f->pa, f->kb, h);
  lz_line(l, "}");
  lz_close(l);
}

/* The first and last key any row of this lane's warp sees in the sequence, into *lo and *hi
 * (warp-uniform: the lane's two rows, then shuffle_xor over the 8 quads); a warp with no row in
 * the sequence gets an empty range. */
static void warp_range(fa2 *f, const char **lo, const char **hi) {
  lz_ctx *l = f->l;
  static const char *const comb[2] = {"min", "max"};
  for (int w = 0; w < 2; w++) { /* w 0: the first key (min), 1: the last (max) */
    const char *const *rv = w ? f->rhi : f->rlo, *none = w ? "(-1)" : "2147483647";
    const char *v = lz_fresh(l, w ? "whi" : "wlo");
    lz_line(l, "let %s: i32 = %s(select(%s, %s, %s), select(%s, %s, %s))", v, comb[w], f->rok[0],
            rv[0], none, f->rok[1], rv[1], none);
    for (int m = 4; m < 32; m *= 2) {
      const char *nv = lz_fresh(l, w ? "whi" : "wlo");
      lz_line(l, "let %s: i32 = %s(%s, shuffle_xor(%s, %d))", nv, comb[w], v, v, m);
      v = nv;
    }
    *(w ? hi : lo) = v;
  }
}

/* The key tiles of the sequence led by token u of the tile, through the cp.async stages; a warp
 * computes only the tiles that hold a key one of its rows sees (its own diagonal, window and
 * sequence: in a tile of many short sequences each warp works on its own). */
static void walk_sequence(fa2 *f, const char *u) {
  lz_ctx *l = f->l;
  lz_line(l, "if %s[%s] != 0 {", f->tlead, u);
  l->ind++;
  const char *k0 = lz_fresh(l, "k0"), *nk = lz_fresh(l, "nk");
  lz_line(l, "let %s: i32 = %s[%s]", f->seq, f->tseq, u);
  lz_line(l, "let %s: i32 = %s[%s]", f->kvl, f->kvlen->name, f->seq);
  lz_line(l, "let sym %s = %s[%s] // %d", k0, f->slo, u, FA2_PAGE);
  lz_line(l, "let sym %s = max(0, %s[%s] // %d - %s[%s] // %d + 1)", nk, f->shi, u, FA2_PAGE,
          f->slo, u, FA2_PAGE);
  for (int h = 0; h < 2; h++) {
    const char *r = lane_row(f, h), *tk = F(f, "(%s) // %lld", r, (long long)f->gr);
    const char *hv = head_valid(f, r);
    lz_line(l, "let %s: bool = %s[%s] == %s%s%s", f->rok[h], f->tseq, tk, f->seq, hv ? " && " : "",
            hv ? hv : "");
    lz_line(l, "let %s: i32 = %s[%s]", f->rlo[h], f->tlo, tk);
    lz_line(l, "let %s: i32 = %s[%s]", f->rhi[h], f->thi, tk);
  }
  const char *wlo = NULL, *whi = NULL;
  warp_range(f, &wlo, &whi);
  for (int s = 0; s < FA2_STAGES - 1; s++) {
    lz_line(l, "if %d < %s {", s, nk);
    l->ind++;
    copy_tile(f, F(f, "%s + %d", k0, s), F(f, "%d", s));
    lz_close(l);
    lz_line(l, "async_commit");
  }
  const char *it = lz_loopvar(l, "it");
  lz_line(l, "for %s in 0..%s {", it, nk);
  l->ind++;
  lz_line(l, "async_wait %d", FA2_STAGES - 2);
  lz_line(l, "barrier");
  const char *ahead = F(f, "%s + %d", it, FA2_STAGES - 1);
  lz_line(l, "if %s < %s {", ahead, nk);
  l->ind++;
  copy_tile(f, F(f, "%s + %s", k0, ahead), F(f, "(%s) %% %d", ahead, FA2_STAGES));
  lz_close(l);
  lz_line(l, "async_commit");
  const char *st = F(f, "%s %% %d", it, FA2_STAGES), *kt = F(f, "%s + %s", k0, it);
  lz_line(l, "if i32((%s) * %d) <= %s && i32((%s) * %d + %d) >= %s {", kt, FA2_PAGE, whi, kt,
          FA2_PAGE, FA2_PAGE - 1, wlo);
  l->ind++;
  scores(f, st);
  softmax(f, kt);
  pv(f, st);
  lz_close(l);
  lz_close(l);
  lz_line(l, "async_wait 0");
  lz_line(l, "barrier"); /* the stages are free for the next sequence */
  lz_close(l);
}

/* O / l of the lane's rows (l summed over the quad; 0 where the row saw no key), rounded to T
 * into qs (free since Q went to registers), then from qs into y 16 bytes a thread at a time (a
 * `vectorize` loop over 8 elements of a row: one 128-bit store, rows contiguous in y). */
static void finish(fa2 *f) {
  lz_ctx *l = f->l;
  const char *lt[2];
  for (int h = 0; h < 2; h++) {
    const char *l1 = lz_fresh(l, "lq");
    lt[h] = lz_fresh(l, "lt");
    lz_line(l, "let %s: f32 = %s[%d] + shuffle_xor(%s[%d], 1)", l1, f->lr, h, f->lr, h);
    lz_line(l, "let %s: f32 = %s + shuffle_xor(%s, 2)", lt[h], l1, l1);
  }
  const char *n = lz_loopvar(l, "n");
  lz_line(l, "barrier"); /* every warp's ldmatrix of Q is done (a block without keys too) */
  lz_line(l, "for %s in 0..%lld unroll {", n, (long long)(f->d / 8));
  for (int i = 0; i < 4; i++)
    lz_line(
        l, "  %s[%s, %s * 8 + %s %% 4 * 2 + %d] = %s", f->qs, lane_row(f, i / 2), n, f->tx, i % 2,
        lz_down(l, f->q->dtype,
                F(f, "select(%s > 0.0, %s[%s, %d] / %s, 0.0)", lt[i / 2], f->o, n, i, lt[i / 2])));
  lz_line(l, "}");
  lz_line(l, "barrier");
  int64_t chunks = FA2_ROWS * f->ch;
  const char *c = lz_loopvar(l, "c"), *e = F(f, "(%s + %s * %d)", f->tx, c, FA2_THREADS);
  lz_line(l, "for %s in 0..%lld unroll {", c,
          (long long)((chunks + FA2_THREADS - 1) / FA2_THREADS));
  l->ind++;
  const char *r = F(f, "%s // %lld", e, (long long)f->ch),
             *k = F(f, "%s %% %lld", e, (long long)f->ch);
  const char *ok = F(f, "%s[(%s) // %lld] >= 0", f->tseq, r, (long long)f->gr);
  if (chunks % FA2_THREADS) ok = F(f, "%s < %lld && %s", e, (long long)chunks, ok);
  const char *hv = head_valid(f, r);
  if (hv) ok = F(f, "%s && %s", ok, hv);
  lz_line(l, "if %s {", ok);
  const char *v = lz_loopvar(l, "v");
  lz_line(l, "  for %s in 0..8 vectorize {", v);
  lz_line(l, "    %s[%s, %s, (%s) * 8 + %s] = %s[%s, (%s) * 8 + %s]", f->y->name, row_token(f, r),
          row_head(f, r), k, v, f->qs, r, k, v);
  lz_line(l, "  }");
  lz_line(l, "}");
  lz_close(l);
}

bool lz_gen_paged_attention_fa2(lz_ctx *l) {
  fa2 f = {.l = l};
  for (int i = 0; i < 6; i++)
    if (lz_arg(l, i)->scalar) return false;
  f.q = lz_arg(l, 0);
  f.pages = lz_arg(l, 1);
  f.pt = lz_arg(l, 2);
  f.kvlen = lz_arg(l, 3);
  f.qseq = lz_arg(l, 4);
  f.qpos = lz_arg(l, 5);
  f.y = &l->outs[0];
  rx_dtype t = f.q->dtype;
  if ((t != RX_DTYPE_F16 && t != RX_DTYPE_BF16) || f.pages->dtype != t || f.y->dtype != t)
    return false;
  const rx_expr *hd = f.q->shape[1], *dd = f.q->shape[2], *kv = f.pages->shape[2];
  if (hd->kind != RX_EXPR_CONST || dd->kind != RX_EXPR_CONST || kv->kind != RX_EXPR_CONST ||
      kv->value < 1 || hd->value % kv->value)
    return false;
  f.heads = hd->value;
  f.d = dd->value;
  f.kvh = kv->value;
  if (f.d % 16 || f.d < 16 || shared_bytes(f.d) > FA2_SHARED) return false;
  f.t = ir_dtype_name(t);
  f.ch = f.d / 8;
  f.group = f.heads / f.kvh;
  f.window = ops_int_attr(l->call, "window", 0);
  f.gr = f.group < FA2_ROWS ? f.group : FA2_ROWS;
  f.gc = (f.group + f.gr - 1) / f.gr;
  f.tq = FA2_ROWS / f.gr;
  f.tile = lz_loopvar(l, "tile");
  f.kh = lz_loopvar(l, "kh");
  f.tx = lz_loopvar(l, "tx");
  const char **names[] = {&f.qs,     &f.ks,     &f.vs,     &f.tseq,  &f.tlo, &f.thi,    &f.tlead,
                          &f.slo,    &f.shi,    &f.qf,     &f.kx,    &f.kb,  &f.sc,     &f.pa,
                          &f.o,      &f.mr,     &f.lr,     &f.seq,   &f.kvl, &f.rok[0], &f.rok[1],
                          &f.rlo[0], &f.rlo[1], &f.rhi[0], &f.rhi[1]};
  static const char *const base[] = {
      "qs", "ks",   "vs",   "tseq", "tlo", "thi", "tlead", "slo", "shi", "qf",  "kx",  "kb", "sc",
      "pa", "oacc", "mrow", "lrow", "seq", "kvl", "rok",   "rok", "rlo", "rlo", "rhi", "rhi"};
  for (size_t i = 0; i < RX_ARRAY_LEN(names); i++) *names[i] = lz_fresh(l, base[i]);
  lz_line(l, "if has_mma(%s, f32, 16, 8, 16) {", f.t);
  l->ind++;
  open_kernel(&f);
  token_table(&f);
  load_q(&f);
  const char *u = lz_loopvar(l, "u");
  lz_line(l, "for %s in 0..%lld {", u, (long long)f.tq);
  l->ind++;
  walk_sequence(&f, u);
  lz_close(l);
  finish(&f);
  for (int i = 0; i < 3; i++) lz_close(l);
  return true; /* the `if has_mma` stays open: the caller writes the else */
}
