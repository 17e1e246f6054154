/* ops/attention_fa3.c: paged_attention (prefill over the paged KV cache, packed ragged batches
 * alike; docs/llm.md) on sm_90's warpgroup MMA (wgmma.mma_async; ir.h RX_STMT_WGMMA), in
 * FlashAttention-3's structure without TMA and without warp specialization (issue 31), for the
 * targets that run it (CUDA sm_90: `if has_wgmma(T, f32, 64, 64, 16)`, ir.h). ops/attention.c
 * writes it first in lz_gen_paged_attention, before FlashAttention-2 (ops/attention_fa2.c), whose
 * semantics (rows, token table, visible key ranges, masking) it follows exactly; head dims 64
 * and 128 (the others keep FA2 on sm_90).
 *
 * A block of FA3_GROUPS warpgroups takes FA3_ROWS query rows (a row: one query token and one
 * query head; the heads of a GQA group share the block, so each K/V tile serves the whole group),
 * 64 rows per warpgroup (16 per warp: wgmma's D layout), and walks, for each sequence of its
 * tokens (led by the first of them in the tile), the key tiles of FA3_KEYS keys (four pages of
 * 16) from the first key any of those tokens sees to the last:
 *
 *   Q:    the block's rows -> shared (cp.async), in the 128-byte swizzle wgmma reads (ir.h: D / 64
 *         panels of rows of 64 elements, chunk q of row r at chunk q xor (r % 8)); it stays there
 *         as A of every S = Q K^T
 *   K, V: `stages` stages of cp.async (issued stages - 1 tiles ahead, one commit group a tile),
 *         each [D / 64, FA3_KEYS, 64] in the same swizzle; keys at or past the sequence's length
 *         zero-filled (their page clamped to the sequence's last), never read; each thread's
 *         landed copies fenced to wgmma's async proxy (wgmma_fence) before the tile's barrier
 *   S = Q K^T: per warpgroup D / 16 wgmma m64n64k16, A = its 64 rows of Q, B = the tile's keys
 *         (both K-major: x @ W^T), into 32 f32 accumulators a thread (ir.h's D layout: a thread
 *         holds rows g and g + 8 of its warp's 16, mma.m16n8's C layout repeated along N)
 *   softmax: on the accumulators in registers, as FA2: the running max reduced over the quad by
 *         two shuffle_xor, scores in base 2 (ops_attn_score: the scale times log2 e folded in, and
 * a softcap), p = exp2(s - m) P:    the accumulators ARE wgmma's A fragments in registers: acc[8 s
 * + j] is a[j] of the k16 step s (ir.h), converted to T, no round trip through shared memory O += P
 * V: per 64 columns of D, 4 wgmma m64n64k16 trans with A = P from registers and B = V MN-major from
 * shared (k = the key along V's rows: imm-trans-b 1); O (f32, D / 2 a thread) in registers,
 * rescaled by exp2(m_old - m_new) per row end:  O / l (0 for a row that saw no key) rounded to T
 * into Q's shared panels (swizzled: conflict-free), then stored 16 bytes a thread.
 *
 * Each wgmma group is waited for at once (wgmma_wait 0): no overlap of softmax and MMA inside a
 * warpgroup (FA3's ping-pong and intra-warpgroup pipelining need warp specialization). A
 * warpgroup skips the tiles none of its rows sees (its range: the warps' ranges by shuffle_xor,
 * combined in shared memory). Shared memory, dynamic (the wgmma kernels' buffers: codegen/lower.c):
 * D = 64: 16 KiB of Q + 3 stages x 16 KiB = 64 KiB; D = 128: 32 KiB + 2 stages x 32 KiB =
 * 96 KiB (two blocks an SM), plus the token table. Not timed on a GPU yet: docs/schedules.md,
 * "FlashAttention-3 prefill (sm_90)", has the PTX figures. */
#include "attention_int.h"
#include "deduce.h"
#include "ops.h"

#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define FA3_GROUPS  2                  /* warpgroups per block */
#define FA3_THREADS (128 * FA3_GROUPS) /* threads per block */
#define FA3_WARPS   (4 * FA3_GROUPS)   /* warps per block */
#define FA3_ROWS    (64 * FA3_GROUPS)  /* query rows per block: m64 per warpgroup */
#define FA3_KEYS    64                 /* keys per tile: wgmma's N of S, 4 k16 steps of P V */
#define FA3_PAGE    16                 /* keys per page of the cache (docs/llm.md) */
/* As attention.c: the running max starts at the lowest finite f32; scores in base 2. */
#define FA3_NO_SCORE (-FLT_MAX)

typedef struct fa3 {
  lz_ctx *l;
  lz_opnd *q, *pages, *pt, *kvlen, *qseq, *qpos, *y;
  const char *t; /* T's name */
  int64_t d, heads, kvh, group, window;
  int64_t gr, gc, tq;            /* heads of a group per block, blocks per group, tokens */
  int64_t ch, np, stages;        /* 16-byte chunks per row of D, 64-wide panels of D, K/V stages */
  const char *tile, *kh, *tx;    /* block and thread variables */
  const char *qs, *ks, *vs, *wr; /* shared: Q rows, K and V stages, the warps' key ranges */
  const char *tseq, *tlo, *thi, *tlead, *slo, *shi; /* shared, per token of the tile */
  const char *sc, *pa, *o[2], *mr, *lr;             /* registers */
  const char *seq, *kvl, *rok[2], *rlo[2], *rhi[2]; /* per sequence of the tile */
} fa3;

static const char *F(fa3 *f, const char *fmt, ...) RX_PRINTF(2, 3);
static const char *F(fa3 *f, const char *fmt, ...) {
  char buf[4096];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  return lz_str(f->l, "%s", buf);
}

/* Text of the row this lane holds in half h (0: g, 1: g + 8) of its warp's 16 (ir.h's D layout:
 * warpgroup tx / 128's rows 64 wg + 16 w + g + 8 h, w its warp in the warpgroup). */
static const char *lane_row(fa3 *f, int h) {
  return F(f, "%s // 32 * 16 + %s %% 32 // 4 + %d", f->tx, f->tx, 8 * h);
}

/* The query token and head of row r (text). */
static const char *row_token(fa3 *f, const char *r) {
  return F(f, "%s * %lld + (%s) // %lld", f->tile, (long long)f->tq, r, (long long)f->gr);
}
static const char *row_head(fa3 *f, const char *r) {
  return F(f, "%s // %lld * %lld + %s %% %lld * %lld + (%s) %% %lld", f->kh, (long long)f->gc,
           (long long)f->group, f->kh, (long long)f->gc, (long long)f->gr, r, (long long)f->gr);
}
/* Row r's head exists (text; NULL: always). */
static const char *head_valid(fa3 *f, const char *r) {
  if (f->group % f->gr == 0) return NULL;
  return F(f, "%s %% %lld * %lld + (%s) %% %lld < %lld", f->kh, (long long)f->gc, (long long)f->gr,
           r, (long long)f->gr, (long long)f->group);
}

/* a xor b of two texts in 0..7, as arithmetic (the IR has no xor): bit j is (bit j of a + bit j
 * of b) % 2. */
static const char *xor8(fa3 *f, const char *a, const char *b) {
  return F(f,
           "((%s) %% 2 + (%s) %% 2) %% 2 + ((%s) // 2 %% 2 + (%s) // 2 %% 2) %% 2 * 2 + ((%s) // 4 "
           "%% 2 + (%s) // 4 %% 2) %% 2 * 4",
           a, b, a, b, a, b);
}

/* The index texts "panel, row, column" of chunk c (text, 0 .. D / 8 - 1) of row r of a buffer of
 * 64-wide swizzled panels: chunk c % 8 of panel c / 8 at chunk (c % 8) xor (r % 8). */
static const char *swz(fa3 *f, const char *r, const char *c) {
  return F(f, "(%s) // 8, %s, (%s) * 8", c, r, xor8(f, F(f, "(%s) %% 8", c), F(f, "(%s) %% 8", r)));
}

/* The block's loops and buffers. */
static void open_kernel(fa3 *f) {
  lz_ctx *l = f->l;
  const rx_expr *n = f->q->shape[0];
  lz_line(
      l, "for %s in 0..%s bind(blockIdx.x) {", f->tile,
      lz_ex(l, sym_expr_floordiv(l->cx, sym_expr_add(l->cx, n, sym_expr_const(l->cx, f->tq - 1)),
                                 sym_expr_const(l->cx, f->tq))));
  l->ind++;
  lz_line(l, "for %s in 0..%lld bind(blockIdx.y) {", f->kh, (long long)(f->kvh * f->gc));
  l->ind++;
  lz_line(l, "for %s in 0..%d bind(threadIdx.x) {", f->tx, FA3_THREADS);
  l->ind++;
  long long np = f->np, st = f->stages;
  lz_line(l, "alloc %s: %s[%lld, %d, 64] shared", f->qs, f->t, np, FA3_ROWS);
  lz_line(l, "alloc %s: %s[%lld, %lld, %d, 64] shared", f->ks, f->t, st, np, FA3_KEYS);
  lz_line(l, "alloc %s: %s[%lld, %lld, %d, 64] shared", f->vs, f->t, st, np, FA3_KEYS);
  lz_line(l, "alloc %s: i32[2, %d] shared", f->wr, FA3_WARPS);
  const char *tb[6] = {f->tseq, f->tlo, f->thi, f->tlead, f->slo, f->shi};
  for (int i = 0; i < 6; i++) lz_line(l, "alloc %s: i32[%d] shared", tb[i], FA3_ROWS);
  lz_line(l, "alloc %s: f32[%d] local", f->sc, FA3_KEYS / 2);
  lz_line(l, "alloc %s: %s[%d, 8] local", f->pa, f->t, FA3_KEYS / 16);
  for (int p = 0; p < f->np; p++) lz_line(l, "alloc %s: f32[32] local", f->o[p]);
  lz_line(l, "alloc %s: f32[2] local", f->mr);
  lz_line(l, "alloc %s: f32[2] local", f->lr);
  const char *i = lz_loopvar(l, "i");
  lz_line(l, "for %s in 0..32 unroll {", i);
  for (int p = 0; p < f->np; p++) lz_line(l, "  %s[%s] = 0.0", f->o[p], i);
  lz_line(l, "}");
  for (int h = 0; h < 2; h++) {
    lz_line(l, "%s[%d] = %s", f->mr, h, lz_flit(l, FA3_NO_SCORE));
    lz_line(l, "%s[%d] = 0.0", f->lr, h);
  }
}

/* Q's rows into qs by cp.async, swizzled (rows without a query zero-filled, their source
 * clamped); waited for here. */
static void load_q(fa3 *f) {
  lz_ctx *l = f->l;
  int64_t chunks = FA3_ROWS * f->ch; /* a multiple of FA3_THREADS for D = 64, 128 */
  const char *c = lz_loopvar(l, "c"), *e = F(f, "(%s + %s * %d)", f->tx, c, FA3_THREADS);
  lz_line(l, "for %s in 0..%lld unroll {", c, (long long)(chunks / FA3_THREADS));
  l->ind++;
  const char *r = F(f, "%s // %lld", e, (long long)f->ch),
             *k = F(f, "%s %% %lld", e, (long long)f->ch);
  const char *tok = row_token(f, r), *n = lz_ex(l, f->q->shape[0]);
  const char *ok =
      F(f, "(%s) // %lld < %lld && %s < %s", r, (long long)f->gr, (long long)f->tq, tok, n);
  const char *hv = head_valid(f, r);
  if (hv) ok = F(f, "%s && %s", ok, hv);
  lz_line(l, "async_copy %s[%s] = %s[min(%s, %s - 1), min(%s, %lld), (%s) * 8] if %s", f->qs,
          swz(f, r, k), f->q->name, tok, n, row_head(f, r), (long long)(f->heads - 1), k, ok);
  lz_close(l);
  lz_line(l, "async_commit");
  lz_line(l, "async_wait 0");
  lz_line(l, "barrier");
}

/* The tile's token table (ops_attn_token_table): tq tokens a tile, written by the first FA3_ROWS
 * threads. */
static void token_table(fa3 *f) {
  ops_token_table t = {f->tseq,
                       f->tlo,
                       f->thi,
                       f->tlead,
                       f->slo,
                       f->shi,
                       f->tx,
                       f->tile,
                       FA3_ROWS,
                       f->tq,
                       F(f, "%lld", (long long)f->tq),
                       f->q,
                       f->qseq,
                       f->qpos,
                       f->kvlen,
                       f->window};
  ops_attn_token_table(f->l, &t);
}

/* cp.async of key tile kt (text) of the sequence into stage st (text): K and V, 16 bytes a
 * thread at a time, swizzled; keys at or past kv_len zero-filled (their page clamped to the
 * sequence's last: the page table has no column past it). */
static void copy_tile(fa3 *f, const char *kt, const char *st) {
  lz_ctx *l = f->l;
  int64_t chunks = FA3_KEYS * f->ch; /* a multiple of FA3_THREADS */
  const char *c = lz_loopvar(l, "c"), *e = F(f, "(%s + %s * %d)", f->tx, c, FA3_THREADS);
  lz_line(l, "for %s in 0..%lld unroll {", c, (long long)(chunks / FA3_THREADS));
  l->ind++;
  const char *key = F(f, "%s // %lld", e, (long long)f->ch),
             *k = F(f, "%s %% %lld", e, (long long)f->ch);
  const char *pos = F(f, "i32((%s) * %d + %s)", kt, FA3_KEYS, key);
  const char *pid = lz_fresh(l, "pid");
  lz_line(l, "let %s: i32 = %s[%s, min(%s // %d, (%s - 1) // %d)]", pid, f->pt->name, f->seq, pos,
          FA3_PAGE, f->kvl, FA3_PAGE);
  for (int w = 0; w < 2; w++)
    lz_line(l, "async_copy %s[%s, %s] = %s[%s, %d, %s // %lld, %s %% %d, (%s) * 8] if %s < %s",
            w ? f->vs : f->ks, st, swz(f, key, k), f->pages->name, pid, w, f->kh, (long long)f->gc,
            pos, FA3_PAGE, k, pos, f->kvl);
  lz_close(l);
}

/* S = Q K^T of stage st into sc: the warpgroup's D / 16 wgmma on its 64 rows of Q and the 64 keys
 * (k steps of 16 elements along the swizzled rows, panel kk / 4), one group, waited for. */
static void scores(fa3 *f, const char *st) {
  lz_ctx *l = f->l;
  const char *i = lz_loopvar(l, "i"), *kk = lz_loopvar(l, "kk");
  lz_line(l, "for %s in 0..%d unroll {", i, FA3_KEYS / 2);
  lz_line(l, "  %s[%s] = 0.0", f->sc, i);
  lz_line(l, "}");
  lz_line(l, "wgmma_fence"); /* the zeroed accumulators before the wgmma */
  lz_line(l, "for %s in 0..%lld unroll {", kk, (long long)(f->d / 16));
  lz_line(l,
          "  wgmma m64n%dk16 %s, %s[%s // 4, %s // 128 * 64, %s %% 4 * 16], %s[%s, %s // 4, 0, "
          "%s %% 4 * 16]",
          FA3_KEYS, f->sc, f->qs, kk, f->tx, kk, f->ks, st, kk, kk);
  lz_line(l, "}");
  lz_line(l, "wgmma_commit");
  lz_line(l, "wgmma_wait 0, %s", f->sc);
}

/* The online softmax of tile kt on the accumulators: per row half h (sc[i], i / 2 % 2 == h: key
 * 8 (i / 4) + 2 t + i % 2) the quad's max by shuffle_xor 1 and 2, p = exp2(s - m) of the visible
 * keys (0 elsewhere) into pa as T (pa[i / 8, i % 8] = p of sc[i]: wgmma's A fragments), the
 * lane's partial sum, and O rescaled. */
static void softmax(fa3 *f, const char *kt) {
  lz_ctx *l = f->l;
  const char *al[2];
  for (int h = 0; h < 2; h++) {
    const char *x[FA3_KEYS / 4], *vis[FA3_KEYS / 4];
    int idx[FA3_KEYS / 4];
    for (int k = 0; k < FA3_KEYS / 4; k++) { /* k = 2 n + e: n-tile n, column 2 t + e */
      int n = k / 2, e = k % 2;
      idx[k] = 4 * n + 2 * h + e;
      const char *pos =
          F(f, "i32((%s) * %d + %d + %s %% 4 * 2 + %d)", kt, FA3_KEYS, 8 * n, f->tx, e);
      vis[k] = F(f, "%s && %s >= %s && %s <= %s", f->rok[h], pos, f->rlo[h], pos, f->rhi[h]);
      x[k] = lz_fresh(l, "x");
      lz_line(l, "let %s: f32 = select(%s, %s, %s)", x[k], vis[k],
              ops_attn_score(l, 1.0 / sqrt((double)f->d), F(f, "%s[%d]", f->sc, idx[k])),
              lz_flit(l, FA3_NO_SCORE));
    }
    const char *mx = x[0];
    for (int k = 1; k < FA3_KEYS / 4; k++) {
      const char *m = lz_fresh(l, "mx");
      lz_line(l, "let %s: f32 = max(%s, %s)", m, mx, x[k]);
      mx = m;
    }
    const char *m1 = lz_fresh(l, "mq"), *m2 = lz_fresh(l, "mq"), *mn = lz_fresh(l, "mn");
    al[h] = lz_fresh(l, "al");
    lz_line(l, "let %s: f32 = max(%s, shuffle_xor(%s, 1))", m1, mx, mx);
    lz_line(l, "let %s: f32 = max(%s, shuffle_xor(%s, 2))", m2, m1, m1);
    lz_line(l, "let %s: f32 = max(%s[%d], %s)", mn, f->mr, h, m2);
    lz_line(l, "let %s: f32 = exp2(%s[%d] - %s)", al[h], f->mr, h, mn);
    const char *sum = "0.0";
    for (int k = 0; k < FA3_KEYS / 4; k++) {
      const char *p = lz_fresh(l, "p"), *ns = lz_fresh(l, "ps");
      lz_line(l, "let %s: f32 = select(%s, exp2(%s - %s), 0.0)", p, vis[k], x[k], mn);
      lz_line(l, "%s[%d, %d] = %s", f->pa, idx[k] / 8, idx[k] % 8, lz_down(l, f->q->dtype, p));
      lz_line(l, "let %s: f32 = %s + %s", ns, sum, p);
      sum = ns;
    }
    lz_line(l, "%s[%d] = %s[%d] * %s + %s", f->lr, h, f->lr, h, al[h], sum);
    lz_line(l, "%s[%d] = %s", f->mr, h, mn);
  }
  const char *i = lz_loopvar(l, "i");
  lz_line(l, "for %s in 0..8 unroll {", i);
  for (int p = 0; p < f->np; p++)
    for (int j = 0; j < 4; j++)
      lz_line(l, "  %s[%s * 4 + %d] = %s[%s * 4 + %d] * %s", f->o[p], i, j, f->o[p], i, j,
              al[j / 2]);
  lz_line(l, "}");
}

/* O += P V of stage st: per 64-column panel p of D, FA3_KEYS / 16 wgmma m64n64k16 trans, A = P
 * from registers (pa[s]: the k16 step s of the keys), B = V's rows 16 s .. 16 s + 15 MN-major;
 * one group, waited for (each panel's accumulator named by a wait). */
static void pv(fa3 *f, const char *st) {
  lz_ctx *l = f->l;
  lz_line(l, "wgmma_fence"); /* P and the rescaled O (registers) before the wgmma */
  for (int p = 0; p < f->np; p++) {
    const char *s = lz_loopvar(l, "s");
    lz_line(l, "for %s in 0..%d unroll {", s, FA3_KEYS / 16);
    lz_line(l, "  wgmma m64n64k16 trans %s, %s[%s, 0], %s[%s, %d, %s * 16, 0]", f->o[p], f->pa, s,
            f->vs, st, p, s);
    lz_line(l, "}");
  }
  lz_line(l, "wgmma_commit");
  for (int p = 0; p < f->np; p++) lz_line(l, "wgmma_wait 0, %s", f->o[p]);
}

/* The first and last key any row of this thread's warpgroup sees in the sequence, into *lo and
 * *hi (warpgroup-uniform: the lane's two rows, shuffle_xor over the warp's 8 quads, then the 4
 * warps' ranges through shared memory); a warpgroup with no row in the sequence gets an empty
 * range. */
static void group_range(fa3 *f, const char **lo, const char **hi) {
  lz_ctx *l = f->l;
  static const char *const comb[2] = {"min", "max"};
  const char *v[2];
  for (int w = 0; w < 2; w++) { /* w 0: the first key (min), 1: the last (max) */
    const char *const *rv = w ? f->rhi : f->rlo, *none = w ? "(-1)" : "2147483647";
    v[w] = lz_fresh(l, w ? "whi" : "wlo");
    lz_line(l, "let %s: i32 = %s(select(%s, %s, %s), select(%s, %s, %s))", v[w], comb[w], f->rok[0],
            rv[0], none, f->rok[1], rv[1], none);
    for (int m = 4; m < 32; m *= 2) {
      const char *nv = lz_fresh(l, w ? "whi" : "wlo");
      lz_line(l, "let %s: i32 = %s(%s, shuffle_xor(%s, %d))", nv, comb[w], v[w], v[w], m);
      v[w] = nv;
    }
  }
  lz_line(l, "if %s %% 32 == 0 {", f->tx);
  for (int w = 0; w < 2; w++) lz_line(l, "  %s[%d, %s // 32] = %s", f->wr, w, f->tx, v[w]);
  lz_line(l, "}");
  lz_line(l, "barrier");
  for (int w = 0; w < 2; w++) {
    const char *g = lz_fresh(l, w ? "ghi" : "glo"), *b = F(f, "%s // 128 * 4", f->tx);
    lz_line(l,
            "let %s: i32 = %s(%s(%s[%d, %s], %s[%d, %s + 1]), %s(%s[%d, %s + 2], %s[%d, %s + 3]))",
            g, comb[w], comb[w], f->wr, w, b, f->wr, w, b, comb[w], f->wr, w, b, f->wr, w, b);
    *(w ? hi : lo) = g;
  }
}

/* The key tiles of the sequence led by token u of the tile, through the cp.async stages; a
 * warpgroup computes only the tiles that hold a key one of its rows sees. */
static void walk_sequence(fa3 *f, const char *u) {
  lz_ctx *l = f->l;
  lz_line(l, "if %s[%s] != 0 {", f->tlead, u);
  l->ind++;
  const char *k0 = lz_fresh(l, "k0"), *nk = lz_fresh(l, "nk");
  lz_line(l, "let %s: i32 = %s[%s]", f->seq, f->tseq, u);
  lz_line(l, "let %s: i32 = %s[%s]", f->kvl, f->kvlen->name, f->seq);
  lz_line(l, "let sym %s = %s[%s] // %d", k0, f->slo, u, FA3_KEYS);
  lz_line(l, "let sym %s = max(0, %s[%s] // %d - %s[%s] // %d + 1)", nk, f->shi, u, FA3_KEYS,
          f->slo, u, FA3_KEYS);
  for (int h = 0; h < 2; h++) {
    const char *r = lane_row(f, h), *tk = F(f, "(%s) // %lld", r, (long long)f->gr);
    const char *hv = head_valid(f, r);
    lz_line(l, "let %s: bool = %s[%s] == %s%s%s", f->rok[h], f->tseq, tk, f->seq, hv ? " && " : "",
            hv ? hv : "");
    lz_line(l, "let %s: i32 = %s[%s]", f->rlo[h], f->tlo, tk);
    lz_line(l, "let %s: i32 = %s[%s]", f->rhi[h], f->thi, tk);
  }
  const char *glo = NULL, *ghi = NULL;
  group_range(f, &glo, &ghi);
  for (int s = 0; s < f->stages - 1; s++) {
    lz_line(l, "if %d < %s {", s, nk);
    l->ind++;
    copy_tile(f, F(f, "%s + %d", k0, s), F(f, "%d", s));
    lz_close(l);
    lz_line(l, "async_commit");
  }
  const char *it = lz_loopvar(l, "it");
  lz_line(l, "for %s in 0..%s {", it, nk);
  l->ind++;
  lz_line(l, "async_wait %lld", (long long)(f->stages - 2));
  /* the thread's landed copies (and Q's, the first time) seen by wgmma's async proxy, before the
   * barrier after which any warpgroup reads them (as gemm_wgmma's pipeline) */
  lz_line(l, "wgmma_fence");
  lz_line(l, "barrier");
  const char *ahead = F(f, "%s + %lld", it, (long long)(f->stages - 1));
  lz_line(l, "if %s < %s {", ahead, nk);
  l->ind++;
  copy_tile(f, F(f, "%s + %s", k0, ahead), F(f, "(%s) %% %lld", ahead, (long long)f->stages));
  lz_close(l);
  lz_line(l, "async_commit");
  const char *st = F(f, "%s %% %lld", it, (long long)f->stages), *kt = F(f, "%s + %s", k0, it);
  lz_line(l, "if i32((%s) * %d) <= %s && i32((%s) * %d + %d) >= %s {", kt, FA3_KEYS, ghi, kt,
          FA3_KEYS, FA3_KEYS - 1, glo);
  l->ind++;
  scores(f, st);
  softmax(f, kt);
  pv(f, st);
  lz_close(l);
  lz_close(l);
  lz_line(l, "async_wait 0");
  lz_line(l, "barrier"); /* the stages and the warps' ranges are free for the next sequence */
  lz_close(l);
}

/* O / l of the lane's rows (l summed over the quad; 0 where the row saw no key), rounded to T
 * into qs (swizzled; free once every warpgroup's last wgmma on Q is done), then from qs into y 16
 * bytes a thread at a time (a `vectorize` loop over the 8 elements of a chunk). */
static void finish(fa3 *f) {
  lz_ctx *l = f->l;
  const char *lt[2];
  for (int h = 0; h < 2; h++) {
    const char *l1 = lz_fresh(l, "lq");
    lt[h] = lz_fresh(l, "lt");
    lz_line(l, "let %s: f32 = %s[%d] + shuffle_xor(%s[%d], 1)", l1, f->lr, h, f->lr, h);
    lz_line(l, "let %s: f32 = %s + shuffle_xor(%s, 2)", lt[h], l1, l1);
  }
  lz_line(l, "barrier"); /* every warpgroup's wgmma reading Q is done (waited for) */
  const char *n = lz_loopvar(l, "n");
  lz_line(l, "for %s in 0..8 unroll {", n);
  for (int p = 0; p < f->np; p++)
    for (int i = 0; i < 4; i++) {
      const char *row = lane_row(f, i / 2);
      const char *col = F(f, "%s %% 4 * 2 + %d", f->tx, i % 2);
      lz_line(l, "  %s[%d, %s, (%s) * 8 + %s] = %s", f->qs, p, row,
              xor8(f, n, F(f, "(%s) %% 8", row)), col,
              lz_down(l, f->q->dtype,
                      F(f, "select(%s > 0.0, %s[%s * 4 + %d] / %s, 0.0)", lt[i / 2], f->o[p], n, i,
                        lt[i / 2])));
    }
  lz_line(l, "}");
  lz_line(l, "barrier");
  int64_t chunks = FA3_ROWS * f->ch;
  const char *c = lz_loopvar(l, "c"), *e = F(f, "(%s + %s * %d)", f->tx, c, FA3_THREADS);
  lz_line(l, "for %s in 0..%lld unroll {", c, (long long)(chunks / FA3_THREADS));
  l->ind++;
  const char *r = F(f, "%s // %lld", e, (long long)f->ch),
             *k = F(f, "%s %% %lld", e, (long long)f->ch);
  const char *ok = F(f, "%s[(%s) // %lld] >= 0", f->tseq, r, (long long)f->gr);
  const char *hv = head_valid(f, r);
  if (hv) ok = F(f, "%s && %s", ok, hv);
  lz_line(l, "if %s {", ok);
  const char *v = lz_loopvar(l, "v");
  lz_line(l, "  for %s in 0..8 vectorize {", v);
  lz_line(l, "    %s[%s, %s, (%s) * 8 + %s] = %s[%s + %s]", f->y->name, row_token(f, r),
          row_head(f, r), k, v, f->qs, swz(f, r, k), v);
  lz_line(l, "  }");
  lz_line(l, "}");
  lz_close(l);
}

bool lz_gen_paged_attention_fa3(lz_ctx *l) {
  fa3 f = {.l = l};
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
  if (f.d != 64 && f.d != 128) return false; /* other head dims keep FA2 */
  f.t = ir_dtype_name(t);
  f.ch = f.d / 8;
  f.np = f.d / 64;
  f.stages = f.d == 64 ? 3 : 2;
  f.group = f.heads / f.kvh;
  f.window = ops_int_attr(l->call, "window", 0);
  f.gr = f.group < FA3_ROWS ? f.group : FA3_ROWS;
  f.gc = (f.group + f.gr - 1) / f.gr;
  f.tq = FA3_ROWS / f.gr;
  f.tile = lz_loopvar(l, "tile");
  f.kh = lz_loopvar(l, "kh");
  f.tx = lz_loopvar(l, "tx");
  const char **names[] = {&f.qs,     &f.ks,     &f.vs,     &f.wr,     &f.tseq,   &f.tlo,
                          &f.thi,    &f.tlead,  &f.slo,    &f.shi,    &f.sc,     &f.pa,
                          &f.o[0],   &f.o[1],   &f.mr,     &f.lr,     &f.seq,    &f.kvl,
                          &f.rok[0], &f.rok[1], &f.rlo[0], &f.rlo[1], &f.rhi[0], &f.rhi[1]};
  static const char *const base[] = {
      "qs",   "ks",   "vs",   "wrange", "tseq", "tlo", "thi", "tlead", "slo", "shi", "sacc", "pa",
      "oacc", "oacc", "mrow", "lrow",   "seq",  "kvl", "rok", "rok",   "rlo", "rlo", "rhi",  "rhi"};
  for (size_t i = 0; i < RX_ARRAY_LEN(names); i++) *names[i] = lz_fresh(l, base[i]);
  lz_line(l, "if has_wgmma(%s, f32, 64, %d, 16) {", f.t, FA3_KEYS);
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
  return true; /* the `if has_wgmma` stays open: the caller writes the else */
}
