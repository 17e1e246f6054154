/* passes/schedule/gemm_wgmma.c: the GEMM of more than 16 rows on sm_90's warpgroup MMA
 * (wgmma.mma_async; ir/ir.h RX_STMT_WGMMA; issue 31), the sm_90 counterpart of gemm_mma.c.
 *
 * gemm_wgmma: P and Q plain f16 (or bf16) loads contiguous along k (x @ W^T: W as [out, in], so
 * both operands are K-major, as wgmma reads them without transposing), their runs starting at
 * multiples of 16 bytes (mm_runs_aligned), K a multiple of WG_BK, on a target whose `.mma` table
 * lists wgmma for the dtype into f32 (CUDA sm_90). A block of WG_GROUPS warpgroups computes a
 * WG_BM x WG_BN (128 x 128) tile of the output over WG_STAGES cp.async stages of WG_BK; each
 * warpgroup, per stage, WG_BK / 16 wgmma m64nWG_BNk16 on its 64 rows of P's stage and all of Q's,
 * both read from shared memory in the 128-byte swizzle that ir.h defines (chunk q of row r at
 * chunk q xor (r % 8)), written so by the cp.async copies; the epilogue of matmul.h per 8 columns
 * a lane (direct, or staged over the stages) or, M not a multiple of 8, staged an element a lane
 * (matmul.h, mm_staged). Rows and columns past the output's are zero-filled in
 * the stages and not stored.
 *
 * Shared memory: 3 x (128 + 128) x 64 halves = 96 KiB, over the 48 KiB a kernel may declare
 * statically: a wgmma kernel's shared buffers live in dynamic shared memory (codegen/lower.c,
 * codegen/cuda.c), up to the target's opt-in limit (227 KiB on sm_90), which the runtime asks for
 * at load (runtime/cuda/cuda.c). No TMA: cp.async needs no tensor map built on the host, and the
 * emulator runs it already. The pipeline, its fences and the PTX figures: docs/schedules.md,
 * "GEMM on sm_90 (wgmma)". Not yet timed on a GPU; checked in CI in the emulator, the interpreter
 * and by NVRTC/ptxas for sm_90a (tests/unit/test_wgmma.c). */
#include "matmul.h"

#define WG_GROUPS  2                /* warpgroups per block, one above the other */
#define WG_BM      (64 * WG_GROUPS) /* rows of the tile: each warpgroup's m64 */
#define WG_BN      128              /* columns: wgmma's N (acc: WG_BN / 2 floats per thread) */
#define WG_BK      64               /* k per stage: a row of 128 bytes, the 128-byte swizzle */
#define WG_STAGES  3                /* 3 x (128 + 128) x 64 halves = 96 KiB (dynamic) */
#define WG_THREADS (128 * WG_GROUPS)

bool gemm_wgmma_fits(rx_sctx *s, const mm_info *mi) {
  const rx_tx *p = mm_plain_load(mi->p), *q = mm_plain_load(mi->q);
  if (!p || !q || p->dtype != q->dtype || mm_q_dequant(mi) || !mi->q_along_k || !mi->i)
    return false;
  if (mi->K->kind != RX_EXPR_CONST || mi->K->value <= 0 || mi->K->value % WG_BK) return false;
  int64_t shared = (int64_t)WG_STAGES * (WG_BM + WG_BN) * WG_BK * 2;
  return tgt_target_mma(s->t, p->dtype, RX_DTYPE_F32, RX_MMA_WGMMA) && mm_mma_operands(s, mi) &&
         rx_expr_is_const(mi->r.klo, 0) && mm_runs_aligned(s, p, mi->r.k, mi->K) &&
         mm_runs_aligned(s, q, mi->r.k, mi->K) && shared <= s->t->shared_bytes_optin &&
         WG_THREADS <= s->t->max_threads_per_block;
}

/* What the parts of the kernel share. */
typedef struct wg_k {
  rx_sctx *s;
  const mm_info *mi;
  const rx_tx *p, *q;         /* the plain loads of P and Q */
  const rx_expr *tx;          /* the thread */
  const rx_expr *row0, *col0; /* the block's first row and column */
  const rx_expr *brepl[MAXN]; /* the batch loop variables as functions of the batch block */
  rx_buffer *sa, *sb;         /* the stages: [WG_STAGES, WG_BM, WG_BK], [.., WG_BN, WG_BK] */
  rx_buffer *acc;             /* the accumulators: local f32[WG_BN / 2] (ir.h's D layout) */
} wg_k;

/* a xor b for a, b in 0..7, as arithmetic: bit j of the result is (bit j of a + bit j of b) % 2. */
static const rx_expr *xor8(rx_sctx *s, const rx_expr *a, const rx_expr *b) {
  rx_expr_ctx *cx = s->cx;
  const rx_expr *r = sx_const(cx, 0);
  for (int j = 0; j < 3; j++) {
    const rx_expr *d = sx_const(cx, 1 << j), *two = sx_const(cx, 2);
    const rx_expr *ba = sym_expr_floormod(cx, sym_expr_floordiv(cx, a, d), two);
    const rx_expr *bb = sym_expr_floormod(cx, sym_expr_floordiv(cx, b, d), two);
    r = sx_add(cx, r, sx_mul_c(cx, sym_expr_floormod(cx, sx_add(cx, ba, bb), two), 1 << j));
  }
  return sym_analyzer_simplify(s->an, r);
}

/* async_copy of chunk kt of P (a) or Q into stage st: the tile's rows x 8 chunks of 16 bytes,
 * rows * 8 / WG_THREADS per thread; chunk q of row r lands at chunk q xor (r % 8) (the 128-byte
 * swizzle of ir.h); rows past the operand's extent are zero-filled, their source index clamped to
 * its last row. */
static void copy_tile(wg_k *c, const rx_expr *kt, const rx_expr *st, bool a, rx_stmtvec *out) {
  rx_sctx *s = c->s;
  rx_expr_ctx *cx = s->cx;
  const mm_info *mi = c->mi;
  int rows = a ? WG_BM : WG_BN;
  const rx_expr *ext = a ? mi->N : mi->M, *first = a ? c->row0 : c->col0;
  for (int r = 0; r < rows * 8 / WG_THREADS; r++) {
    const rx_expr *idx = sx_add(cx, c->tx, sx_const(cx, (int64_t)WG_THREADS * r));
    const rx_expr *row = sym_analyzer_simplify(s->an, sym_expr_floordiv(cx, idx, sx_const(cx, 8)));
    const rx_expr *q = sym_analyzer_simplify(s->an, sym_expr_floormod(cx, idx, sx_const(cx, 8)));
    const rx_expr *g = sx_add(cx, first, row);
    const rx_expr *gs = sym_expr_min(cx, g, sx_add(cx, ext, sx_const(cx, -1)));
    const rx_expr *k = sx_add(cx, sx_mul_c(cx, kt, WG_BK), sx_mul_c(cx, q, 8));
    rx_tx *src = a ? mm_operand_at(s, mi, c->brepl, c->p, gs, c->col0, k)
                   : mm_operand_at(s, mi, c->brepl, c->q, c->row0, gs, k);
    const rx_expr *r8 = sym_analyzer_simplify(s->an, sym_expr_floormod(cx, row, sx_const(cx, 8)));
    const rx_expr *di[3] = {st, row, sx_mul_c(cx, xor8(s, q, r8), 8)};
    rx_stmt *cp = sched_store_e(s, a ? c->sa : c->sb, di, 3, src);
    cp->kind = RX_STMT_ASYNC_COPY;
    const rx_expr *in = sched_bound_guard(s, g, ext);
    if (in && !sched_proves(s, in)) cp->cond = sched_cond(s, in);
    RX_VEC_PUSH(out, cp);
  }
}

/* The wgmma work on stage st: WG_BK / 16 wgmma (k steps of 32 bytes into the swizzled rows) of
 * each warpgroup on its 64 rows of A and all of B, one group, waited for at once (the next step's
 * copies overwrite the stage read two steps before: the barrier after this wait frees it). */
static void compute(wg_k *c, const rx_expr *st, rx_stmtvec *out) {
  rx_sctx *s = c->s;
  const rx_expr *wg = sym_expr_floordiv(s->cx, c->tx, sx_const(s->cx, 128));
  for (int ks = 0; ks < WG_BK / 16; ks++) {
    rx_stmt *w = mm_stmt_count(s, RX_STMT_WGMMA, WG_BN);
    w->buf = c->acc;
    const rx_expr *ia[3] = {st, sx_mul_c(s->cx, wg, 64), sx_const(s->cx, 16 * ks)};
    const rx_expr *ib[3] = {st, sx_const(s->cx, 0), sx_const(s->cx, 16 * ks)};
    w->value = sched_load(s, c->sa, ia, 3);
    w->wg_b = sched_load(s, c->sb, ib, 3);
    RX_VEC_PUSH(out, w);
  }
  RX_VEC_PUSH(out, mm_stmt_count(s, RX_STMT_WGMMA_COMMIT, 0));
  rx_stmt *wait = mm_stmt_count(s, RX_STMT_WGMMA_WAIT, 0);
  wait->buf = c->acc;
  RX_VEC_PUSH(out, wait);
}

/* Both operands' copies of chunk kt into stage st (mm_pipeline's issue). */
static void issue_chunk(void *ctx, const rx_expr *kt, const rx_expr *st, rx_stmtvec *out) {
  copy_tile(ctx, kt, st, true, out);
  copy_tile(ctx, kt, st, false, out);
}

static void compute_stage(void *ctx, const rx_expr *st, rx_stmtvec *out) { compute(ctx, st, out); }

/* The pipeline over K / WG_BK chunks (mm_pipeline_emit), with wgmma_fence after each wait: the
 * chunk's bytes, landed through the generic proxy, are seen by wgmma's async proxy, and the
 * accumulators' last writes are ordered before the wgmma. */
static void pipeline(wg_k *c, rx_stmtvec *body) {
  mm_pipeline p = {WG_STAGES, RX_STMT_WGMMA_FENCE, c, issue_chunk, compute_stage, false};
  mm_pipeline_emit(c->s, c->mi->K->value / WG_BK, &p, body);
}

/* Per 8 consecutive columns a lane (matmul.h, mm_quad_transpose and mm_epilogue_row8): for each
 * row (h) and group q of 4 tiles of 8 columns (tile 4 q + n in acc[4 (4 q + n) + 2 h + e]), the
 * quad's transpose gives lane t tile 4 q + t's 8 columns; row row0 + 16 w + g + 8 h, columns
 * col0 + 8 (4 q + t) + v. */
static void epilogue_vec(wg_k *c, rx_stmtvec *body) {
  rx_sctx *s = c->s;
  rx_expr_ctx *cx = s->cx;
  int64_t eight[1] = {8};
  rx_stmt *al;
  rx_buffer *ft = sched_alloc(s, "ft", RX_DTYPE_F32, RX_SCOPE_LOCAL, eight, 1, &al);
  RX_VEC_PUSH(body, al);
  const rx_expr *lane = sym_expr_floormod(cx, c->tx, sx_const(cx, 32));
  const rx_expr *w = sym_expr_floordiv(cx, c->tx, sx_const(cx, 32)); /* 4 wg + w: 16-row band */
  const rx_expr *g = sym_expr_floordiv(cx, lane, sx_const(cx, 4));
  const rx_expr *t = sym_expr_floormod(cx, c->tx, sx_const(cx, 4));
  size_t mk = sym_analyzer_mark(s->an);
  const rx_expr *h = mm_bound_var(s, "h", 2), *q = mm_bound_var(s, "q", WG_BN / 32);
  rx_stmtvec qs = {0}, hs = {0};
  rx_tx *src[8];
  for (int j = 0; j < 8; j++) {
    const rx_expr *i = sx_add(cx, sx_mul_c(cx, q, 16),
                              sx_add(cx, sx_mul_c(cx, h, 2), sx_const(cx, 4 * (j / 2) + j % 2)));
    src[j] = sched_load(s, c->acc, &i, 1);
  }
  mm_quad_transpose(s, lane, src, ft, &qs);
  const rx_expr *row =
      sx_add(cx, sx_add(cx, c->row0, sx_mul_c(cx, w, 16)), sx_add(cx, g, sx_mul_c(cx, h, 8)));
  const rx_expr *cb = sx_add(cx, c->col0, sx_add(cx, sx_mul_c(cx, q, 32), sx_mul_c(cx, t, 8)));
  RX_VEC_PUSH(&qs, mm_epilogue_row8(s, c->mi, c->brepl, row, cb, ft));
  sym_analyzer_reset(s->an, mk);
  RX_VEC_PUSH(&hs, sched_for(s, q, sx_const(cx, WG_BN / 32), RX_LOOP_UNROLL, sched_seq(s, &qs)));
  RX_VEC_PUSH(body, sched_for(s, h, sx_const(cx, 2), RX_LOOP_UNROLL, sched_seq(s, &hs)));
}

/* Writes wg_k's tile into cs (mm_staged's write, one pass: 128 rows of 136 floats, 68 KiB over
 * the 96 KiB of stages): accumulator pair (h, e) of 8-column group q is
 * acc[4 q + 2 h + e], at cs[16 w + g + 8 h, mm_staged_col(q, t) + e]. */
static void staged_write(void *ctx, rx_buffer *cs, int pass, rx_stmtvec *out) {
  wg_k *c = ctx;
  rx_sctx *s = c->s;
  rx_expr_ctx *cx = s->cx;
  RX_ASSERT(pass == 0);
  const rx_expr *lane = sym_expr_floormod(cx, c->tx, sx_const(cx, 32));
  const rx_expr *w = sym_expr_floordiv(cx, c->tx, sx_const(cx, 32)); /* 4 wg + w: 16-row band */
  const rx_expr *g = sym_expr_floordiv(cx, lane, sx_const(cx, 4));
  const rx_expr *t = sym_expr_floormod(cx, c->tx, sx_const(cx, 4));
  size_t mk = sym_analyzer_mark(s->an);
  const rx_expr *h = mm_bound_var(s, "h", 2), *q = mm_bound_var(s, "q", WG_BN / 8);
  const rx_expr *row = sx_add(cx, sx_mul_c(cx, w, 16), sx_add(cx, g, sx_mul_c(cx, h, 8)));
  const rx_expr *ai = sx_add(cx, sx_mul_c(cx, q, 4), sx_mul_c(cx, h, 2));
  rx_stmt *st = mm_staged_pair(s, cs, row, q, t, c->acc, &ai, 1);
  sym_analyzer_reset(s->an, mk);
  rx_stmt *hs = sched_for(s, h, sx_const(cx, 2), RX_LOOP_UNROLL, st);
  RX_VEC_PUSH(out, sched_for(s, q, sx_const(cx, WG_BN / 8), RX_LOOP_UNROLL, hs));
}

static void epilogue_vec_form(void *k, rx_stmtvec *body) {
  wg_k *c = k;
  if (mm_staged_pays(c->s, c->mi)) {
    int64_t stages = (int64_t)WG_STAGES * (WG_BM + WG_BN) * WG_BK * 2;
    mm_staged st = {WG_BM, WG_BN,        WG_THREADS, mm_staged_rows(WG_BM, WG_BN, WG_BM, stages),
                    c->tx, c->row0,      c->col0,    c->brepl,
                    c,     staged_write, false};
    mm_epilogue_staged(c->s, c->mi, &st, body);
    return;
  }
  epilogue_vec(k, body);
}
static void epilogue_frag_form(void *k, rx_stmtvec *body) {
  wg_k *c = k;
  int64_t stages = (int64_t)WG_STAGES * (WG_BM + WG_BN) * WG_BK * 2;
  mm_staged st = {WG_BM, WG_BN,        WG_THREADS, mm_staged_rows(WG_BM, WG_BN, WG_BM, stages),
                  c->tx, c->row0,      c->col0,    c->brepl,
                  c,     staged_write, true};
  mm_epilogue_staged(c->s, c->mi, &st, body);
}

/* The epilogue: per 8 columns a lane where M is a multiple of 8 (known, or tested at run time),
 * else staged and stored an element a lane (matmul.h, mm_epilogue_by_m, mm_staged). */
static void epilogue(wg_k *c, rx_stmtvec *body) {
  mm_epilogue_by_m(c->s, c->mi->M, false, epilogue_vec_form, epilogue_frag_form, c, body);
}

/* The buffers: the stages (shared) and the zeroed accumulators (local; the pipeline's first
 * wgmma_fence orders the zeros before the first wgmma). */
static void buffers(wg_k *c, rx_stmtvec *body) {
  rx_sctx *s = c->s;
  rx_stmt *al;
  int64_t sa[3] = {WG_STAGES, WG_BM, WG_BK}, sb[3] = {WG_STAGES, WG_BN, WG_BK}, ac[1] = {WG_BN / 2};
  c->sa = sched_alloc(s, "sa", c->p->dtype, RX_SCOPE_SHARED, sa, 3, &al);
  RX_VEC_PUSH(body, al);
  c->sb = sched_alloc(s, "sb", c->p->dtype, RX_SCOPE_SHARED, sb, 3, &al);
  RX_VEC_PUSH(body, al);
  c->acc = sched_alloc(s, "acc", RX_DTYPE_F32, RX_SCOPE_LOCAL, ac, 1, &al);
  RX_VEC_PUSH(body, al);
  rx_tx *zero = NULL;
  sched_identity(s, RX_COMB_SUM, RX_DTYPE_F32, &zero);
  size_t mk = sym_analyzer_mark(s->an);
  const rx_expr *i = mm_bound_var(s, "i", WG_BN / 2);
  rx_stmt *z = sched_store_e(s, c->acc, &i, 1, zero);
  sym_analyzer_reset(s->an, mk);
  RX_VEC_PUSH(body, sched_for(s, i, sx_const(s->cx, WG_BN / 2), RX_LOOP_UNROLL, z));
}

rx_stmt *gemm_wgmma_schedule(rx_sctx *s, const mm_info *mi) {
  rx_expr_ctx *cx = s->cx;
  wg_k c = {.s = s, .mi = mi, .p = mm_plain_load(mi->p), .q = mm_plain_load(mi->q)};
  const rx_expr *bx = sched_fresh_var(s, "bx"), *by = sched_fresh_var(s, "by");
  const rx_expr *bz = NULL, *nbatch = NULL;
  c.tx = sched_fresh_var(s, "tx");
  if (mi->nb > 0) {
    bz = sched_fresh_var(s, "bz");
    nbatch = sym_analyzer_simplify(s->an, sched_fuse(s, mi->nt.ext, mi->nb, bz, c.brepl));
  }
  const rx_expr *nrow = sched_ceildiv(s, mi->N, WG_BM);
  const rx_expr *ncol = sched_ceildiv(s, mi->M, WG_BN);
  size_t mk = sym_analyzer_mark(s->an);
  sym_analyzer_bind_range(s->an, bx, sx_const(cx, 0), ncol);
  sym_analyzer_bind_range(s->an, by, sx_const(cx, 0), nrow);
  sym_analyzer_bind_range(s->an, c.tx, sx_const(cx, 0), sx_const(cx, WG_THREADS));
  if (bz) sym_analyzer_bind_range(s->an, bz, sx_const(cx, 0), nbatch);
  c.row0 = sx_mul_c(cx, by, WG_BM);
  c.col0 = sx_mul_c(cx, bx, WG_BN);
  rx_stmtvec body = {0};
  buffers(&c, &body);
  pipeline(&c, &body);
  epilogue(&c, &body);
  sym_analyzer_reset(s->an, mk);
  rx_stmt *k = sched_for(s, c.tx, sx_const(cx, WG_THREADS), RX_LOOP_THREAD_X, sched_seq(s, &body));
  if (bz) k = sched_for(s, bz, nbatch, RX_LOOP_BLOCK_Z, k);
  k = sched_for(s, by, nrow, RX_LOOP_BLOCK_Y, k);
  return sched_for(s, bx, ncol, RX_LOOP_BLOCK_X, k);
}
