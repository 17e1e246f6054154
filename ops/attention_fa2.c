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
 * skips the tiles none of its rows sees (warp_range). The block skeleton FA2 shares with FA3
 * (operands, rows, token table, Q's cp.async, the key walk through the stages, the masked scores
 * and the quad's running max, the store of O) is ops_attn_tile (ops/attention_tile.c); this file
 * holds the mma.sync form: its buffers, Q's ldmatrix, the rotated K/V stages, S = Q K^T, P as A
 * fragments and O += P V. Not timed on a GPU yet: docs/schedules.md, "FlashAttention-2 prefill",
 * has the PTX figures. */
#include "attention_int.h"
#include "deduce.h"
#include "ops.h"

#include <stdio.h>

#define FA2_WARPS   4                /* warps per block: 128 threads */
#define FA2_THREADS (32 * FA2_WARPS) /* threads per block */
#define FA2_ROWS    (16 * FA2_WARPS) /* query rows per block: one m16 row block per warp */
#define FA2_PAGE    16               /* keys per tile: one page of the cache (docs/llm.md) */
#define FA2_STAGES  3                /* K/V tiles in shared memory: 2 in flight, 1 computed */
/* Static shared memory of a CUDA block (sm_80, sm_90 without opt-in: targets.c). */
#define FA2_SHARED 49152

/* FA2's context: the block skeleton (first: the callbacks cast back) and its registers. */
typedef struct fa2 {
  ops_attn_tile a;
  const char *qf, *kx, *kb, *sc, *pa, *o; /* registers */
} fa2;

#define F(f, ...) lz_str((f)->a.l, __VA_ARGS__)

static int64_t shared_bytes(int64_t d) {
  return 2 * (FA2_ROWS * (d + 8) + 2 * FA2_STAGES * FA2_PAGE * d) + 4 * 6 * FA2_ROWS;
}

/* The block's loops and buffers. */
static void open_kernel(fa2 *f) {
  ops_attn_tile *a = &f->a;
  lz_ctx *l = a->l;
  ops_attn_open_block(a);
  long long d = a->d;
  lz_line(l, "alloc %s: %s[%d, %lld] shared", a->qs, a->t, FA2_ROWS, d + 8);
  lz_line(l, "alloc %s: %s[%d, %d, %lld] shared", a->ks, a->t, FA2_STAGES, FA2_PAGE, d);
  lz_line(l, "alloc %s: %s[%d, %d, %lld] shared", a->vs, a->t, FA2_STAGES, FA2_PAGE, d);
  ops_attn_alloc_table(a);
  lz_line(l, "alloc %s: %s[%lld, 8] local", f->qf, a->t, d / 16);
  lz_line(l, "alloc %s: %s[8] local", f->kx, a->t);
  lz_line(l, "alloc %s: %s[2, 4] local", f->kb, a->t);
  lz_line(l, "alloc %s: f32[2, 4] local", f->sc);
  lz_line(l, "alloc %s: %s[1, 8] local", f->pa, a->t);
  lz_line(l, "alloc %s: f32[%lld, 4] local", f->o, d / 8);
  lz_line(l, "alloc %s: f32[2] local", a->mr);
  lz_line(l, "alloc %s: f32[2] local", a->lr);
  const char *n8 = lz_loopvar(l, "n"), *i4 = lz_loopvar(l, "i");
  lz_line(l, "for %s in 0..%lld unroll {", n8, d / 8);
  lz_line(l, "  for %s in 0..4 unroll {", i4);
  lz_line(l, "    %s[%s, %s] = 0.0", f->o, n8, i4);
  lz_line(l, "  }");
  lz_line(l, "}");
  ops_attn_init_rows(a);
}

/* Q's chunk c of row r in qs: rows of D + 8 elements, unswizzled (ldmatrix's 8 rows of a phase
 * fall in distinct banks by the padding). */
static const char *q_index(ops_attn_tile *a, const char *r, const char *c) {
  return lz_str(a->l, "%s, (%s) * 8", r, c);
}

/* Q's rows into qs by cp.async (ops_attn_load_q), then each warp's A fragments by ldmatrix x4:
 * lane l gives row 8 (l / 8 % 2) + l % 8 of the warp's 16, chunk 2 kk + l / 16 (matrices a0a1,
 * a2a3, a4a5, a6a7). */
static void load_q(fa2 *f) {
  ops_attn_tile *a = &f->a;
  lz_ctx *l = a->l;
  ops_attn_load_q(a);
  const char *kk = lz_loopvar(l, "kk");
  lz_line(l, "for %s in 0..%lld unroll {", kk, (long long)(a->d / 16));
  lz_line(l,
          "  ldmatrix x4 %s[%s] = %s[%s // 32 * 16 + %s %% 32 // 8 %% 2 * 8 + %s %% 8, (2 * %s + "
          "%s %% 32 // 16) * 8]",
          f->qf, kk, a->qs, a->tx, a->tx, a->tx, kk, a->tx);
  lz_line(l, "}");
}

/* The swizzled column (elements) of chunk c (text) of key row `key` (text) of a stage. */
static const char *swz(fa2 *f, const char *key, const char *c) {
  return F(f, "((%s) + (%s)) %% %lld * 8", c, key, (long long)f->a.ch);
}

/* cp.async of key tile kt (text) of the sequence into stage st (text): K and V, 16 bytes a
 * thread at a time; keys at or past kv_len zero-filled. */
static void copy_tile(ops_attn_tile *a, const char *kt, const char *st) {
  fa2 *f = (fa2 *)a;
  lz_ctx *l = a->l;
  const char *pid = lz_fresh(l, "pid");
  lz_line(l, "let %s: i32 = %s[%s, %s]", pid, a->pt->name, a->seq, kt);
  int levels = 0;
  const char *key = NULL, *k = NULL;
  ops_attn_open_chunks(a, FA2_PAGE * a->ch, true, &levels, &key, &k);
  const char *in = F(f, "i32((%s) * %d + %s) < %s", kt, FA2_PAGE, key, a->kvl);
  for (int w = 0; w < 2; w++)
    lz_line(l, "async_copy %s[%s, %s, %s] = %s[%s, %d, %s // %lld, %s, (%s) * 8] if %s",
            w ? a->vs : a->ks, st, key, swz(f, key, k), a->pages->name, pid, w, a->kh,
            (long long)a->gc, key, k, in);
  for (int i = 0; i < levels; i++) lz_close(l);
}

/* S = Q K^T of stage st into sc: per k16 step, ldmatrix x4 of K (lane l: key 8 (l / 16) + l % 8,
 * chunk 2 kk + l / 8 % 2; registers 0..3 the keys 0..7, 4..7 the keys 8..15). */
static void scores(ops_attn_tile *a, const char *st) {
  fa2 *f = (fa2 *)a;
  lz_ctx *l = a->l;
  const char *n = lz_loopvar(l, "n"), *i = lz_loopvar(l, "i"), *kk = lz_loopvar(l, "kk");
  lz_line(l, "for %s in 0..2 unroll {", n);
  lz_line(l, "  for %s in 0..4 unroll {", i);
  lz_line(l, "    %s[%s, %s] = 0.0", f->sc, n, i);
  lz_line(l, "  }");
  lz_line(l, "}");
  lz_line(l, "for %s in 0..%lld unroll {", kk, (long long)(a->d / 16));
  l->ind++;
  const char *key = F(f, "%s %% 32 // 16 * 8 + %s %% 8", a->tx, a->tx);
  lz_line(l, "ldmatrix x4 %s = %s[%s, %s, %s]", f->kx, a->ks, st, key,
          swz(f, key, F(f, "2 * %s + %s %% 32 // 8 %% 2", kk, a->tx)));
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
static void softmax(ops_attn_tile *a, const char *kt) {
  fa2 *f = (fa2 *)a;
  lz_ctx *l = a->l;
  const char *al[2];
  for (int h = 0; h < 2; h++) {
    const char *x[4], *vis[4];
    for (int k = 0; k < 4; k++) /* k = 2 n + e: n-tile n, column 2 t + e */
      x[k] = ops_attn_masked_score(a, kt, h, k, F(f, "%s[%d, %d]", f->sc, k / 2, 2 * h + k % 2),
                                   &vis[k]);
    const char *mx = lz_fresh(l, "mx"), *mn = NULL;
    lz_line(l, "let %s: f32 = max(max(%s, %s), max(%s, %s))", mx, x[0], x[1], x[2], x[3]);
    al[h] = ops_attn_quad_max(a, h, mx, &mn);
    const char *p[4];
    for (int k = 0; k < 4; k++) {
      p[k] = lz_fresh(l, "p");
      lz_line(l, "let %s: f32 = select(%s, exp2(%s - %s), 0.0)", p[k], vis[k], x[k], mn);
      lz_line(l, "%s[0, %d] = %s", f->pa, (k / 2) * 4 + 2 * h + k % 2,
              lz_down(l, a->q->dtype, p[k]));
    }
    lz_line(l, "%s[%d] = %s[%d] * %s + (%s + %s + %s + %s)", a->lr, h, a->lr, h, al[h], p[0], p[1],
            p[2], p[3]);
    lz_line(l, "%s[%d] = %s", a->mr, h, mn);
  }
  const char *n = lz_loopvar(l, "n");
  lz_line(l, "for %s in 0..%lld unroll {", n, (long long)(a->d / 8));
  for (int i = 0; i < 4; i++)
    lz_line(l, "  %s[%s, %d] = %s[%s, %d] * %s", f->o, n, i, f->o, n, i, al[i / 2]);
  lz_line(l, "}");
}

/* O += P V of stage st: per pair of n-tiles, ldmatrix x4 .trans of V (lane l: key
 * 8 (l / 8 % 2) + l % 8, chunk 2 np + l / 16). */
static void pv(ops_attn_tile *a, const char *st) {
  fa2 *f = (fa2 *)a;
  lz_ctx *l = a->l;
  const char *np = lz_loopvar(l, "np"), *h = lz_loopvar(l, "h"), *j = lz_loopvar(l, "j");
  lz_line(l, "for %s in 0..%lld unroll {", np, (long long)(a->d / 16));
  l->ind++;
  const char *key = F(f, "%s %% 32 // 8 %% 2 * 8 + %s %% 8", a->tx, a->tx);
  lz_line(l, "ldmatrix x4 trans %s = %s[%s, %s, %s]", f->kx, a->vs, st, key,
          swz(f, key, F(f, "2 * %s + %s %% 32 // 16", np, a->tx)));
  lz_line(l, "for %s in 0..2 unroll {", h);
  lz_line(l, "  for %s in 0..4 unroll {", j);
  lz_line(l, "    %s[%s, %s] = %s[%s * 4 + %s]", f->kb, h, j, f->kx, h, j);
  lz_line(l, "  }");
  lz_line(l, "  mma m16n8k16 %s[2 * %s + %s], %s[0], %s[%s]", f->o, np, h, f->pa, f->kb, h);
  lz_line(l, "}");
  lz_close(l);
}

/* A warp computes only the tiles that hold a key one of its rows sees (its own diagonal, window
 * and sequence: in a tile of many short sequences each warp works on its own). */
static void warp_range(ops_attn_tile *a, const char **lo, const char **hi) {
  const char *v[2];
  ops_attn_warp_range(a, v);
  *lo = v[0];
  *hi = v[1];
}

/* O / l of the lane's rows (l summed over the quad; 0 where the row saw no key), rounded to T
 * into qs (free since Q went to registers), then from qs into y 16 bytes a thread at a time
 * (ops_attn_store_rows: one 128-bit store, rows contiguous in y). */
static void finish(fa2 *f) {
  ops_attn_tile *a = &f->a;
  lz_ctx *l = a->l;
  const char *lt[2];
  ops_attn_row_sums(a, lt);
  const char *n = lz_loopvar(l, "n");
  lz_line(l, "barrier"); /* every warp's ldmatrix of Q is done (a block without keys too) */
  lz_line(l, "for %s in 0..%lld unroll {", n, (long long)(a->d / 8));
  for (int i = 0; i < 4; i++)
    lz_line(
        l, "  %s[%s, %s * 8 + %s %% 4 * 2 + %d] = %s", a->qs, ops_attn_lane_row(a, i / 2), n, a->tx,
        i % 2,
        lz_down(l, a->q->dtype,
                F(f, "select(%s > 0.0, %s[%s, %d] / %s, 0.0)", lt[i / 2], f->o, n, i, lt[i / 2])));
  lz_line(l, "}");
  ops_attn_store_rows(a);
}

bool lz_gen_paged_attention_fa2(lz_ctx *l) {
  static const ops_attn_form form = {FA2_ROWS,   FA2_THREADS, FA2_PAGE, false,   q_index,
                                     warp_range, copy_tile,   scores,   softmax, pv};
  fa2 f = {.a = {.stages = FA2_STAGES}};
  ops_attn_tile *a = &f.a;
  if (!ops_attn_tile_args(l, a, &form)) return false;
  if (a->d % 16 || a->d < 16 || shared_bytes(a->d) > FA2_SHARED) return false;
  ops_attn_tile_setup(a);
  const char **own[] = {&f.qf, &f.kx, &f.kb, &f.sc, &f.pa, &f.o};
  static const char *const base[] = {"qf", "kx", "kb", "sc", "pa", "oacc"};
  for (size_t i = 0; i < RX_ARRAY_LEN(own); i++) *own[i] = lz_fresh(l, base[i]);
  lz_line(l, "if has_mma(%s, f32, 16, 8, 16) {", a->t);
  l->ind++;
  open_kernel(&f);
  ops_attn_tile_table(a);
  load_q(&f);
  ops_attn_walk(a);
  finish(&f);
  for (int i = 0; i < 3; i++) lz_close(l);
  return true; /* the `if has_mma` stays open: the caller writes the else */
}
