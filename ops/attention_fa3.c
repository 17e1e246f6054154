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
 *         two shuffle_xor, scores in base 2 (ops_attn_score: the scale times log2 e folded in,
 *         and a softcap), p = exp2(s - m)
 *   P:    the accumulators ARE wgmma's A fragments in registers: acc[8 s + j] is a[j] of the
 *         k16 step s (ir.h), converted to T, no round trip through shared memory
 *   O += P V: per 64 columns of D, 4 wgmma m64n64k16 trans with A = P from registers and B = V
 *         MN-major from shared (k = the key along V's rows: imm-trans-b 1); O (f32, D / 2 a
 *         thread) in registers, rescaled by exp2(m_old - m_new) per row
 *   end:  O / l (0 for a row that saw no key) rounded to T into Q's shared panels (swizzled:
 *         conflict-free), then stored 16 bytes a thread.
 *
 * Each wgmma group is waited for at once (wgmma_wait 0): no overlap of softmax and MMA inside a
 * warpgroup (FA3's ping-pong and intra-warpgroup pipelining need warp specialization). A
 * warpgroup skips the tiles none of its rows sees (its range: the warps' ranges by shuffle_xor,
 * combined in shared memory). Shared memory, dynamic (the wgmma kernels' buffers: codegen/lower.c):
 * D = 64: 16 KiB of Q + 3 stages x 16 KiB = 64 KiB; D = 128: 32 KiB + 2 stages x 32 KiB =
 * 96 KiB (two blocks an SM), plus the token table. The block skeleton it shares with FA2
 * (operands, rows, token table, Q's cp.async, the key walk through the stages, the masked scores
 * and the quad's running max, the store of O) is ops_attn_tile (ops/attention_tile.c); this file
 * holds the wgmma form: its buffers, the swizzled layout, the page-clamped K/V copy, the
 * warpgroup's key range, the wgmma S = Q K^T and P V, and O into Q's panels. Not timed on a GPU
 * yet: docs/schedules.md, "FlashAttention-3 prefill (sm_90)", has the PTX figures. */
#include "attention_int.h"
#include "deduce.h"
#include "ops.h"

#include <stdio.h>

#define FA3_GROUPS  2                  /* warpgroups per block */
#define FA3_THREADS (128 * FA3_GROUPS) /* threads per block */
#define FA3_WARPS   (4 * FA3_GROUPS)   /* warps per block */
#define FA3_ROWS    (64 * FA3_GROUPS)  /* query rows per block: m64 per warpgroup */
#define FA3_KEYS    64                 /* keys per tile: wgmma's N of S, 4 k16 steps of P V */
#define FA3_PAGE    16                 /* keys per page of the cache (docs/llm.md) */

/* FA3's context: the block skeleton (first: the callbacks cast back), D's 64-wide panels, the
 * warps' key ranges in shared memory and its registers. */
typedef struct fa3 {
  ops_attn_tile a;
  int64_t np;                 /* 64-wide panels of D */
  const char *wr;             /* shared: the warps' key ranges */
  const char *sc, *pa, *o[2]; /* registers */
} fa3;

#define F(f, ...) lz_str((f)->a.l, __VA_ARGS__)

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
  ops_attn_tile *a = &f->a;
  lz_ctx *l = a->l;
  ops_attn_open_block(a);
  long long np = f->np, st = a->stages;
  lz_line(l, "alloc %s: %s[%lld, %d, 64] shared", a->qs, a->t, np, FA3_ROWS);
  lz_line(l, "alloc %s: %s[%lld, %lld, %d, 64] shared", a->ks, a->t, st, np, FA3_KEYS);
  lz_line(l, "alloc %s: %s[%lld, %lld, %d, 64] shared", a->vs, a->t, st, np, FA3_KEYS);
  lz_line(l, "alloc %s: i32[2, %d] shared", f->wr, FA3_WARPS);
  ops_attn_alloc_table(a);
  lz_line(l, "alloc %s: f32[%d] local", f->sc, FA3_KEYS / 2);
  lz_line(l, "alloc %s: %s[%d, 8] local", f->pa, a->t, FA3_KEYS / 16);
  for (int p = 0; p < f->np; p++) lz_line(l, "alloc %s: f32[32] local", f->o[p]);
  lz_line(l, "alloc %s: f32[2] local", a->mr);
  lz_line(l, "alloc %s: f32[2] local", a->lr);
  const char *i = lz_loopvar(l, "i");
  lz_line(l, "for %s in 0..32 unroll {", i);
  for (int p = 0; p < f->np; p++) lz_line(l, "  %s[%s] = 0.0", f->o[p], i);
  lz_line(l, "}");
  ops_attn_init_rows(a);
}

/* Q's chunk c of row r in qs: "panel, row, column" in the 128-byte swizzle wgmma reads (swz), so
 * Q's rows are loaded (ops_attn_load_q) and O stored through the same layout. */
static const char *q_index(ops_attn_tile *a, const char *r, const char *c) {
  return swz((fa3 *)a, r, c);
}

/* cp.async of key tile kt (text) of the sequence into stage st (text): K and V, 16 bytes a
 * thread at a time, swizzled; keys at or past kv_len zero-filled (their page clamped to the
 * sequence's last: the page table has no column past it). */
static void copy_tile(ops_attn_tile *a, const char *kt, const char *st) {
  fa3 *f = (fa3 *)a;
  lz_ctx *l = a->l;
  int levels = 0;
  const char *key = NULL, *k = NULL; /* FA3_KEYS * ch: a multiple of FA3_THREADS */
  ops_attn_open_chunks(a, FA3_KEYS * a->ch, true, &levels, &key, &k);
  const char *pos = F(f, "i32((%s) * %d + %s)", kt, FA3_KEYS, key);
  const char *pid = lz_fresh(l, "pid");
  lz_line(l, "let %s: i32 = %s[%s, min(%s // %d, (%s - 1) // %d)]", pid, a->pt->name, a->seq, pos,
          FA3_PAGE, a->kvl, FA3_PAGE);
  for (int w = 0; w < 2; w++)
    lz_line(l, "async_copy %s[%s, %s] = %s[%s, %d, %s // %lld, %s %% %d, (%s) * 8] if %s < %s",
            w ? a->vs : a->ks, st, swz(f, key, k), a->pages->name, pid, w, a->kh, (long long)a->gc,
            pos, FA3_PAGE, k, pos, a->kvl);
  for (int i = 0; i < levels; i++) lz_close(l);
}

/* S = Q K^T of stage st into sc: the warpgroup's D / 16 wgmma on its 64 rows of Q and the 64 keys
 * (k steps of 16 elements along the swizzled rows, panel kk / 4), one group, waited for. */
static void scores(ops_attn_tile *a, const char *st) {
  fa3 *f = (fa3 *)a;
  lz_ctx *l = a->l;
  const char *i = lz_loopvar(l, "i"), *kk = lz_loopvar(l, "kk");
  lz_line(l, "for %s in 0..%d unroll {", i, FA3_KEYS / 2);
  lz_line(l, "  %s[%s] = 0.0", f->sc, i);
  lz_line(l, "}");
  lz_line(l, "wgmma_fence"); /* the zeroed accumulators before the wgmma */
  lz_line(l, "for %s in 0..%lld unroll {", kk, (long long)(a->d / 16));
  lz_line(l,
          "  wgmma m64n%dk16 %s, %s[%s // 4, %s // 128 * 64, %s %% 4 * 16], %s[%s, %s // 4, 0, "
          "%s %% 4 * 16]",
          FA3_KEYS, f->sc, a->qs, kk, a->tx, kk, a->ks, st, kk, kk);
  lz_line(l, "}");
  lz_line(l, "wgmma_commit");
  lz_line(l, "wgmma_wait 0, %s", f->sc);
}

/* The online softmax of tile kt on the accumulators: per row half h (sc[i], i / 2 % 2 == h: key
 * 8 (i / 4) + 2 t + i % 2) the quad's max by shuffle_xor 1 and 2, p = exp2(s - m) of the visible
 * keys (0 elsewhere) into pa as T (pa[i / 8, i % 8] = p of sc[i]: wgmma's A fragments), the
 * lane's partial sum, and O rescaled. */
static void softmax(ops_attn_tile *a, const char *kt) {
  fa3 *f = (fa3 *)a;
  lz_ctx *l = a->l;
  const char *al[2];
  for (int h = 0; h < 2; h++) {
    const char *x[FA3_KEYS / 4], *vis[FA3_KEYS / 4];
    int idx[FA3_KEYS / 4];
    for (int k = 0; k < FA3_KEYS / 4; k++) { /* k = 2 n + e: n-tile n, column 2 t + e */
      idx[k] = 4 * (k / 2) + 2 * h + k % 2;
      x[k] = ops_attn_masked_score(a, kt, h, k, F(f, "%s[%d]", f->sc, idx[k]), &vis[k]);
    }
    const char *mx = x[0], *mn = NULL;
    for (int k = 1; k < FA3_KEYS / 4; k++) {
      const char *m = lz_fresh(l, "mx");
      lz_line(l, "let %s: f32 = max(%s, %s)", m, mx, x[k]);
      mx = m;
    }
    al[h] = ops_attn_quad_max(a, h, mx, &mn);
    const char *sum = "0.0";
    for (int k = 0; k < FA3_KEYS / 4; k++) {
      const char *p = lz_fresh(l, "p"), *ns = lz_fresh(l, "ps");
      lz_line(l, "let %s: f32 = select(%s, exp2(%s - %s), 0.0)", p, vis[k], x[k], mn);
      lz_line(l, "%s[%d, %d] = %s", f->pa, idx[k] / 8, idx[k] % 8, lz_down(l, a->q->dtype, p));
      lz_line(l, "let %s: f32 = %s + %s", ns, sum, p);
      sum = ns;
    }
    lz_line(l, "%s[%d] = %s[%d] * %s + %s", a->lr, h, a->lr, h, al[h], sum);
    lz_line(l, "%s[%d] = %s", a->mr, h, mn);
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
static void pv(ops_attn_tile *a, const char *st) {
  fa3 *f = (fa3 *)a;
  lz_ctx *l = a->l;
  lz_line(l, "wgmma_fence"); /* P and the rescaled O (registers) before the wgmma */
  for (int p = 0; p < f->np; p++) {
    const char *s = lz_loopvar(l, "s");
    lz_line(l, "for %s in 0..%d unroll {", s, FA3_KEYS / 16);
    lz_line(l, "  wgmma m64n64k16 trans %s, %s[%s, 0], %s[%s, %d, %s * 16, 0]", f->o[p], f->pa, s,
            a->vs, st, p, s);
    lz_line(l, "}");
  }
  lz_line(l, "wgmma_commit");
  for (int p = 0; p < f->np; p++) lz_line(l, "wgmma_wait 0, %s", f->o[p]);
}

/* The first and last key any row of this thread's warpgroup sees in the sequence, into *lo and
 * *hi (warpgroup-uniform: the warp's range (ops_attn_warp_range), then the 4 warps' ranges
 * through shared memory); a warpgroup with no row in the sequence gets an empty range, and
 * computes only the tiles that hold a key one of its rows sees. */
static void group_range(ops_attn_tile *a, const char **lo, const char **hi) {
  fa3 *f = (fa3 *)a;
  lz_ctx *l = a->l;
  static const char *const comb[2] = {"min", "max"};
  const char *v[2];
  ops_attn_warp_range(a, v);
  lz_line(l, "if %s %% 32 == 0 {", a->tx);
  for (int w = 0; w < 2; w++) lz_line(l, "  %s[%d, %s // 32] = %s", f->wr, w, a->tx, v[w]);
  lz_line(l, "}");
  lz_line(l, "barrier");
  for (int w = 0; w < 2; w++) {
    const char *g = lz_fresh(l, w ? "ghi" : "glo"), *b = F(f, "%s // 128 * 4", a->tx);
    lz_line(l,
            "let %s: i32 = %s(%s(%s[%d, %s], %s[%d, %s + 1]), %s(%s[%d, %s + 2], %s[%d, %s + 3]))",
            g, comb[w], comb[w], f->wr, w, b, f->wr, w, b, comb[w], f->wr, w, b, f->wr, w, b);
    *(w ? hi : lo) = g;
  }
}

/* O / l of the lane's rows (l summed over the quad; 0 where the row saw no key), rounded to T
 * into qs (swizzled; free once every warpgroup's last wgmma on Q is done), then from qs into y 16
 * bytes a thread at a time (ops_attn_store_rows). */
static void finish(fa3 *f) {
  ops_attn_tile *a = &f->a;
  lz_ctx *l = a->l;
  const char *lt[2];
  ops_attn_row_sums(a, lt);
  lz_line(l, "barrier"); /* every warpgroup's wgmma reading Q is done (waited for) */
  const char *n = lz_loopvar(l, "n");
  lz_line(l, "for %s in 0..8 unroll {", n);
  for (int p = 0; p < f->np; p++)
    for (int i = 0; i < 4; i++) {
      const char *row = ops_attn_lane_row(a, i / 2);
      const char *col = F(f, "%s %% 4 * 2 + %d", a->tx, i % 2);
      lz_line(l, "  %s[%d, %s, (%s) * 8 + %s] = %s", a->qs, p, row,
              xor8(f, n, F(f, "(%s) %% 8", row)), col,
              lz_down(l, a->q->dtype,
                      F(f, "select(%s > 0.0, %s[%s * 4 + %d] / %s, 0.0)", lt[i / 2], f->o[p], n, i,
                        lt[i / 2])));
    }
  lz_line(l, "}");
  ops_attn_store_rows(a);
}

bool lz_gen_paged_attention_fa3(lz_ctx *l) {
  static const ops_attn_form form = {FA3_ROWS,    FA3_THREADS, FA3_KEYS, true,    q_index,
                                     group_range, copy_tile,   scores,   softmax, pv};
  fa3 f = {.np = 0};
  ops_attn_tile *a = &f.a;
  if (!ops_attn_tile_args(l, a, &form)) return false;
  if (a->d != 64 && a->d != 128) return false; /* other head dims keep FA2 */
  f.np = a->d / 64;
  a->stages = a->d == 64 ? 3 : 2;
  ops_attn_tile_setup(a);
  const char **own[] = {&f.wr, &f.sc, &f.pa, &f.o[0], &f.o[1]};
  static const char *const base[] = {"wrange", "sacc", "pa", "oacc", "oacc"};
  for (size_t i = 0; i < RX_ARRAY_LEN(own); i++) *own[i] = lz_fresh(l, base[i]);
  lz_line(l, "if has_wgmma(%s, f32, 64, %d, 16) {", a->t, FA3_KEYS);
  l->ind++;
  open_kernel(&f);
  ops_attn_tile_table(a);
  ops_attn_load_q(a);
  ops_attn_walk(a);
  finish(&f);
  for (int i = 0; i < 3; i++) lz_close(l);
  return true; /* the `if has_wgmma` stays open: the caller writes the else */
}
