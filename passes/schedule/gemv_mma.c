/* passes/schedule/gemv_mma.c: matmuls on matrix units from registers (matmul.h; issue 14): the
 * GEMV of 2 to 16 rows, and a first GEMM for more rows.
 *
 *   gemv_mma    P and Q plain f16 (or bf16) loads contiguous along k (x @ W^T), k a multiple of
 *               32, on a target with mma.sync m16n8k16 into f32 (CUDA sm_80 and newer). The rows
 *               of P are the 16 rows of A, padded with zeros; a warp computes MMA_COLS groups of
 *               8 output columns (B), the block's MMA_WARPS warps split k between them and add
 *               their partial tiles through shared memory. For each chunk of 32 k a lane
 *               (g = lane / 4, t = lane % 4) loads 16 bytes of rows g and g + 8 of P and of
 *               weight row col0 + 8c + g, all at k = 32 ch + 8t .. 8t + 7, and feeds them to two
 *               mma steps: k is permuted within the chunk the same way for A and B (step s takes
 *               the elements 4s .. 4s + 3 of each lane's 8, as fragment columns 2t, 2t + 1,
 *               2t + 8, 2t + 9), which the sum over k does not see. Each weight element is read
 *               once, with 16-byte loads, for all the rows.
 *               With extra reductions (rms_norm_matmul's folded norm) P is T(x * nw) of f32 rows:
 *               read 8 k a lane it took two 16-byte loads 32 bytes apart (50% of each sector,
 *               the sum of squares 4-byte loads at 12.5%: 22-26% in test_kernel_checks). The
 *               block instead stages T(x * nw) of the tile's 16 rows in shared memory a slice of
 *               at most MMA_STAGE_K k at a time (gemv_rows' staging: consecutive threads read
 *               consecutive 16-byte vectors of x and nw, and sum the squares of their rows,
 *               reduced over the block once per row at the end), and each lane reads its 8 k of
 *               rows g and g + 8 from there with one 16-byte load (rows padded to a stride of 64
 *               bytes modulo 128: no bank conflicts). 100% of the bytes moved, 0 conflicts.
 *               (ldmatrix would need the fragment's own k order, where B's 16-byte loads of the
 *               weight need the lane's 8 consecutive k: the per-lane loads keep one permutation.)
 *
 *   gemm_mma_regs  the same kernel for any row count: a warp computes MMA_GEMM_ROWS tiles of
 *               16 rows by MMA_GEMM_COLS groups of 8 columns, a grid axis walks the row tiles.
 *               Its operands come from global memory (L1/L2) into registers, with no shared
 *               memory: the GEMM of more than 16 rows where gemm_mma.c's pipeline does not
 *               apply (operand rows not provably 16-byte aligned).
 *
 * GPU timings of the hand-written kernel it follows (bench/cuda/gemv_variants.cu, mma_c2_split4)
 * against the CUDA-core GEMV: bench/RESULTS.md, "gemv_mma's kernel by hand". */
#include "matmul.h"

/* 8-column groups per warp: two mma per step share the activation fragment (measured: 1 and 4
 * groups were slower). */
#define MMA_COLS 2
/* Warps per block, splitting k: more loads in flight per output column (measured: 4 beat 1
 * and 2). */
#define MMA_WARPS 4
/* Blocks per SM assumed: TGT_OCC_GEMV_MMA (targets/occupancy.h; test_ptx_mma checks it). */
/* The chunk loop is unrolled by 2: two chunks' 16-byte loads in flight per lane. */
#define MMA_UNROLL 2
/* gemm_mma's warp tile: 2 x 16 rows by 4 x 8 columns, 8 mma per step on 4 + 4 16-byte loads per
 * lane and chunk (32 accumulators). */
#define MMA_GEMM_ROWS 2
#define MMA_GEMM_COLS 4
#define MMA_MAX_TILES (MMA_GEMM_ROWS * MMA_GEMM_COLS)
/* The folded norm's staged row tile (gemv_mma with extra reductions): k per slice at most. Each
 * row is padded to 32 halves past a multiple of 64 (a row stride of 64 bytes modulo 128: rows g
 * and g + 1 of a quarter-warp's 16-byte reads fall on the two halves of the banks). 16 rows of
 * 512 + 32 halves: 17 KiB. */
#define MMA_STAGE_K 512

bool mm_mma_target(const rx_sctx *s, const mm_info *mi, rx_dtype ab) {
  return mi->acc_dt == RX_DTYPE_F32 && s->t->kind == RX_TARGET_CUDA && s->t->subgroup_size == 32 &&
         tgt_target_mma(s->t, ab, RX_DTYPE_F32, RX_MMA_SYNC) && mi->K->kind == RX_EXPR_CONST &&
         mi->K->value % 32 == 0 && mi->K->value > 0;
}

bool mm_mma_operands(const rx_sctx *s, const mm_info *mi) {
  const rx_tx *p = mm_plain_load(mi->p), *q = mm_plain_load(mi->q);
  return p && q && p->dtype == q->dtype && mm_mma_target(s, mi, p->dtype);
}

bool mm_same_tx(const rx_tx *a, const rx_tx *b) {
  if (a == b) return true;
  if (!a || !b || a->kind != b->kind || a->dtype != b->dtype || a->ival != b->ival ||
      a->fval != b->fval || a->sym != b->sym || a->local != b->local || a->buf != b->buf ||
      a->nidx != b->nidx || a->binop != b->binop || a->intrin != b->intrin)
    return false;
  for (int i = 0; i < a->nidx; i++)
    if (!mm_same_tx(a->idx[i], b->idx[i])) return false;
  return mm_same_tx(a->a, b->a) && mm_same_tx(a->b, b->b) && mm_same_tx(a->c, b->c);
}

/* P of a form with extra reductions (rms_norm_matmul): an f16/bf16 value (a load, or a prologue
 * such as the norm weight's product rounded to f16) under an optional cast to f32: the f16 value,
 * which the kernel stores into its vectors of P as they are; else NULL. */
static const rx_tx *half_operand(const rx_tx *e) {
  if (e->kind == RX_TX_CAST) e = e->a;
  return e->dtype == RX_DTYPE_F16 || e->dtype == RX_DTYPE_BF16 ? e : NULL;
}

/* The extra reductions gemv_mma takes: row terms (their f32 sums per lane, rows g and g + 8), and
 * projections with P the main one's and Q a plain load of the main Q's dtype (a second tile of B
 * per column group). */
static bool extras_fit(const mm_info *mi, rx_dtype ab) {
  for (int t = 0; t < mi->nx; t++) {
    const mm_extra *x = &mi->x[t];
    if (!x->q) continue;
    const rx_tx *q = mm_plain_load(x->q);
    if (!q || q->dtype != ab || !mm_same_tx(x->p, mi->p) || x->p_first != mi->p_first) return false;
  }
  return true;
}

bool gemv_mma_fits(const rx_sctx *s, const mm_info *mi) {
  if (!mi->nx) return mm_mma_operands(s, mi) && mi->p_along_k && mi->q_along_k;
  const rx_tx *p = half_operand(mi->p), *q = mm_plain_load(mi->q);
  return p && q && p->dtype == q->dtype && mm_mma_target(s, mi, q->dtype) && mi->p_along_k &&
         mi->q_along_k && extras_fit(mi, q->dtype);
}

/* What the parts of the kernel share. */
typedef struct mma_k {
  rx_sctx *s;
  const mm_info *mi;
  const rx_tx *p, *q;           /* the plain loads of P and Q */
  const rx_expr *g, *t, *w;     /* the lane's group, its thread in the group, the warp */
  int RM, C;                    /* row tiles of 16 and column groups of 8 per warp */
  const rx_expr *row0, *col0;   /* the block's first row and column */
  const rx_expr *brepl[MAXN];   /* the batch loop variables as functions of the batch block */
  rx_buffer *xr, *wr;           /* 16-byte vectors of P's rows [2 RM, 8] (g, g + 8 of each tile)
                                   and of Q's [C, 8] */
  rx_buffer *fa, *fb;           /* the fragments of A [8] and B [4] */
  rx_buffer *fc[MMA_MAX_TILES]; /* the accumulators [4], tile (m, q) at m * C + q */
  /* Extra reduction t (gemv_mma, one row tile): a projection's vectors of Q [C, 8] and its
   * accumulator tiles, or a row term's f32 sums of rows g and g + 8 [2] (per lane: its 8 k of
   * each chunk) */
  rx_buffer *wrx[MM_MAX_EXTRA], *fcx[MM_MAX_EXTRA][MMA_COLS], *rt[MM_MAX_EXTRA];
  /* The staged form (extra reductions; mm_stage_slice): T(x * nw) of the tile's 16 rows [16, KC +
   * pad] in shared memory a slice of KC k at a time; the row terms' sums in rtb [nx * 16] (extra
   * t's row ii at 16 t + ii: the thread's staging sums) and their block totals in rts (shared,
   * the same layout); tx the thread, kl the chunk's k in the slice. */
  rx_buffer *xs, *rtb, *rts;
  int64_t KC;
  const rx_expr *tx, *kl;
  rx_buffer *red;      /* the partial sums [MMA_WARPS, slots, 32] (finish) */
  const rx_expr *lane; /* the thread's lane */
} mma_k;

/* dst[row, 0..8) = operand at (i, j, kb + v) with 16-byte loads where cond holds, else zeros;
 * e NULL: the staged row tile's row i at kb + v of the slice instead. */
static rx_stmt *load_vec(mma_k *c, rx_buffer *dst, int64_t row, const rx_tx *e, const rx_expr *i,
                         const rx_expr *j, const rx_expr *kb, const rx_expr *cond) {
  rx_sctx *s = c->s;
  const rx_expr *v = sched_fresh_var(s, "v"), *idx[2] = {sx_const(s->cx, row), v};
  const rx_expr *si[2] = {i, sx_add(s->cx, kb, v)};
  rx_tx *val = e ? mm_operand_at(s, c->mi, c->brepl, e, i, j, sx_add(s->cx, kb, v))
                 : sched_load(s, c->xs, si, 2);
  rx_stmt *ld =
      sched_for(s, v, sx_const(s->cx, 8), RX_LOOP_VECTORIZE, sched_store_e(s, dst, idx, 2, val));
  if (!cond || sched_proves(s, cond)) return ld;
  const rx_expr *u = sched_fresh_var(s, "v"), *zi[2] = {sx_const(s->cx, row), u};
  rx_tx *zero = NULL;
  sched_identity(s, RX_COMB_SUM, dst->dtype, &zero);
  rx_stmt *z =
      sched_for(s, u, sx_const(s->cx, 8), RX_LOOP_UNROLL, sched_store_e(s, dst, zi, 2, zero));
  return sched_if(s, sched_cond(s, cond), ld, z);
}

/* One chunk of 32 k, the lane's 8 at kb (32 ch + 8 t): the loads, then two mma steps per tile. */
static rx_stmt *chunk(mma_k *c, const rx_expr *kb) {
  rx_sctx *s = c->s;
  const mm_info *mi = c->mi;
  rx_stmtvec st = {0};
  for (int h = 0; h < 2 * c->RM; h++) {
    const rx_expr *row =
        sx_add(s->cx, sx_add(s->cx, c->row0, sx_const(s->cx, 16 * (h / 2) + 8 * (h % 2))), c->g);
    const rx_expr *guard = sched_bound_guard(s, row, mi->N);
    if (c->xs) /* the staged tile: row - row0 (row0 is 0: one row tile) at the slice's k */
      RX_VEC_PUSH(&st,
                  load_vec(c, c->xr, h, NULL, sx_add(s->cx, sx_const(s->cx, 8 * (h % 2)), c->g),
                           NULL, c->kl, guard));
    else
      RX_VEC_PUSH(&st, load_vec(c, c->xr, h, c->p, row, c->col0, kb, guard));
  }
  for (int q = 0; q < c->C; q++) {
    const rx_expr *j = sx_add(s->cx, sx_add(s->cx, c->col0, sx_const(s->cx, 8 * q)), c->g);
    RX_VEC_PUSH(&st, load_vec(c, c->wr, q, c->q, sx_const(s->cx, 0), j, kb,
                              sched_bound_guard(s, j, mi->M)));
    for (int t = 0; t < mi->nx; t++)
      if (mi->x[t].q)
        RX_VEC_PUSH(&st, load_vec(c, c->wrx[t], q, mm_plain_load(mi->x[t].q), sx_const(s->cx, 0), j,
                                  kb, sched_bound_guard(s, j, mi->M)));
  }
  for (int t = 0; t < mi->nx; t++) { /* row terms: rows g and g + 8 at the lane's 8 k */
    if (mi->x[t].q || c->xs) continue;
    for (int h = 0; h < 2; h++) {
      const rx_expr *row = sx_add(s->cx, sx_add(s->cx, c->row0, sx_const(s->cx, 8 * h)), c->g);
      const rx_expr *v = sched_fresh_var(s, "v"), *hi = sx_const(s->cx, h);
      rx_tx *term = mm_operand_at(s, mi, c->brepl, mi->x[t].p, row, c->col0, sx_add(s->cx, kb, v));
      rx_tx *cur = sched_load(s, c->rt[t], &hi, 1);
      rx_stmt *add =
          sched_store_e(s, c->rt[t], &hi, 1,
                        mi->x[t].r.acc_first ? ir_tx_binary(s->m, RX_BINOP_ADD, cur, term, s->loc)
                                             : ir_tx_binary(s->m, RX_BINOP_ADD, term, cur, s->loc));
      RX_VEC_PUSH(&st, sched_guard(s, sched_bound_guard(s, row, mi->N),
                                   sched_for(s, v, sx_const(s->cx, 8), RX_LOOP_UNROLL, add)));
    }
  }
  for (int step = 0; step < 2; step++)
    for (int m = 0; m < c->RM; m++) {
      /* fa[i] = xr[2m + i // 2 % 2, 4 step + i % 2 + 2 (i // 4)]; fb[i] = wr[q, 4 step + i] */
      const rx_expr *i = sched_fresh_var(s, "i");
      const rx_expr *xi[2] = {
          sx_add(s->cx, sx_const(s->cx, 2 * m),
                 sym_expr_floormod(s->cx, sym_expr_floordiv(s->cx, i, sx_const(s->cx, 2)),
                                   sx_const(s->cx, 2))),
          sx_add(s->cx, sx_const(s->cx, 4 * step),
                 sx_add(s->cx, sym_expr_floormod(s->cx, i, sx_const(s->cx, 2)),
                        sx_mul_c(s->cx, sym_expr_floordiv(s->cx, i, sx_const(s->cx, 4)), 2)))};
      RX_VEC_PUSH(&st, sched_for(s, i, sx_const(s->cx, 8), RX_LOOP_UNROLL,
                                 sched_store_e(s, c->fa, &i, 1, sched_load(s, c->xr, xi, 2))));
      for (int q = 0; q < c->C; q++) {
        const rx_expr *b = sched_fresh_var(s, "i");
        const rx_expr *wi[2] = {sx_const(s->cx, q), sx_add(s->cx, sx_const(s->cx, 4 * step), b)};
        RX_VEC_PUSH(&st, sched_for(s, b, sx_const(s->cx, 4), RX_LOOP_UNROLL,
                                   sched_store_e(s, c->fb, &b, 1, sched_load(s, c->wr, wi, 2))));
        rx_stmt *mma = ir_stmt_new(s->m, RX_STMT_MMA, s->loc);
        mma->buf = c->fc[m * c->C + q];
        mma->mma_a = c->fa;
        mma->mma_b = c->fb;
        RX_VEC_PUSH(&st, mma);
        for (int t = 0; t < mi->nx; t++) { /* a second weight: its B fragment, its tile */
          if (!mi->x[t].q) continue;
          const rx_expr *b2 = sched_fresh_var(s, "i");
          const rx_expr *w2[2] = {sx_const(s->cx, q), sx_add(s->cx, sx_const(s->cx, 4 * step), b2)};
          RX_VEC_PUSH(&st,
                      sched_for(s, b2, sx_const(s->cx, 4), RX_LOOP_UNROLL,
                                sched_store_e(s, c->fb, &b2, 1, sched_load(s, c->wrx[t], w2, 2))));
          rx_stmt *m2 = ir_stmt_new(s->m, RX_STMT_MMA, s->loc);
          m2->buf = c->fcx[t][q];
          m2->mma_a = c->fa;
          m2->mma_b = c->fb;
          RX_VEC_PUSH(&st, m2);
        }
      }
    }
  return sched_seq(s, &st);
}

/* The chunk loop of the warp: chunks w, w + W, w + 2W, ... (W warps), unrolled by MMA_UNROLL. */
static rx_stmt *kloop(mma_k *c) {
  rx_sctx *s = c->s;
  int64_t chunks = c->mi->K->value / 32, per = MMA_WARPS * MMA_UNROLL;
  int64_t nko = (chunks + per - 1) / per;
  const rx_expr *ko = sched_fresh_var(s, "ko"), *ku = sched_fresh_var(s, "ku");
  const rx_expr *ch = sx_add(
      s->cx, sx_mul_c(s->cx, sx_add(s->cx, sx_mul_c(s->cx, ko, MMA_UNROLL), ku), MMA_WARPS), c->w);
  size_t mk = sym_analyzer_mark(s->an);
  sym_analyzer_bind_range(s->an, ko, sx_const(s->cx, 0), sx_const(s->cx, nko));
  sym_analyzer_bind_range(s->an, ku, sx_const(s->cx, 0), sx_const(s->cx, MMA_UNROLL));
  const rx_expr *kb = sx_add(s->cx, sx_mul_c(s->cx, ch, 32), sx_mul_c(s->cx, c->t, 8));
  rx_stmt *body = sched_guard(s, sx_lt(s->cx, ch, sx_const(s->cx, chunks)), chunk(c, kb));
  sym_analyzer_reset(s->an, mk);
  return sched_for(s, ko, sx_const(s->cx, nko), RX_LOOP_SERIAL,
                   sched_for(s, ku, sx_const(s->cx, MMA_UNROLL), RX_LOOP_UNROLL, body));
}

/* The k loop of the staged form: per slice of KC k, the staging, a barrier, the warps' chunks of
 * the slice (w, w + W, ..., unrolled by MMA_UNROLL) reading the rows' A vectors from the tile, a
 * barrier; then each row term's block totals into rts (the epilogue's barrier follows). */
static void kloop_staged(mma_k *c, rx_stmtvec *out) {
  rx_sctx *s = c->s;
  const mm_info *mi = c->mi;
  int64_t K = mi->K->value, nsl = (K + c->KC - 1) / c->KC, cps = c->KC / 32;
  int64_t per = MMA_WARPS * MMA_UNROLL, nko = (cps + per - 1) / per;
  const rx_expr *sl = sched_fresh_var(s, "sl"), *ko = sched_fresh_var(s, "ko"),
                *ku = sched_fresh_var(s, "ku");
  size_t mk = sym_analyzer_mark(s->an);
  sym_analyzer_bind_range(s->an, sl, sx_const(s->cx, 0), sx_const(s->cx, nsl));
  sym_analyzer_bind_range(s->an, ko, sx_const(s->cx, 0), sx_const(s->cx, nko));
  sym_analyzer_bind_range(s->an, ku, sx_const(s->cx, 0), sx_const(s->cx, MMA_UNROLL));
  const rx_expr *k0 = sx_mul_c(s->cx, sl, c->KC);
  const rx_expr *ch = sx_add(
      s->cx, sx_mul_c(s->cx, sx_add(s->cx, sx_mul_c(s->cx, ko, MMA_UNROLL), ku), MMA_WARPS), c->w);
  c->kl = sx_add(s->cx, sx_mul_c(s->cx, ch, 32), sx_mul_c(s->cx, c->t, 8));
  const rx_expr *in =
      sx_and_opt(s->cx, sx_lt(s->cx, ch, sx_const(s->cx, cps)),
                 sx_lt(s->cx, sx_add(s->cx, k0, sx_mul_c(s->cx, ch, 32)), sx_const(s->cx, K)));
  rx_stmt *stp = sched_guard(s, in, chunk(c, sx_add(s->cx, k0, c->kl)));
  c->kl = NULL;
  rx_stmtvec body = {0};
  mm_stage sg = {.xs = c->xs,
                 .rt = c->rtb,
                 .sp = c->p,
                 .brepl = c->brepl,
                 .tx = c->tx,
                 .row0 = c->row0,
                 .col0 = c->col0,
                 .T = 32 * MMA_WARPS,
                 .VS = 4, /* 16 bytes of the f32 row */
                 .NB = 16,
                 .KC = c->KC};
  RX_VEC_PUSH(&body, mm_stage_slice(s, mi, &sg, k0));
  RX_VEC_PUSH(&body, sched_barrier(s));
  RX_VEC_PUSH(&body, sched_for(s, ko, sx_const(s->cx, nko), RX_LOOP_SERIAL,
                               sched_for(s, ku, sx_const(s->cx, MMA_UNROLL), RX_LOOP_UNROLL, stp)));
  RX_VEC_PUSH(&body, sched_barrier(s));
  sym_analyzer_reset(s->an, mk);
  RX_VEC_PUSH(out, sched_for(s, sl, sx_const(s->cx, nsl), RX_LOOP_SERIAL, sched_seq(s, &body)));
  for (int t = 0; t < mi->nx; t++) {
    if (mi->x[t].q) continue;
    for (int ii = 0; ii < 16; ii++) {
      const rx_expr *oi = sx_const(s->cx, 16 * t + ii);
      rx_tx *tot = sched_xreduce(s, out, sched_load(s, c->rtb, &oi, 1), RX_COMB_SUM, mi->acc_dt,
                                 32 * MMA_WARPS, c->tx);
      RX_VEC_PUSH(out, sched_guard(s, sym_expr_cmp(s->cx, RX_EXPR_EQ, c->tx, sx_const(s->cx, 0)),
                                   sched_store_e(s, c->rts, &oi, 1, tot)));
    }
  }
}

/* The partial-sum buffer's lane of (slot, lane): lane xor f, f = (q + 2 h) % 4 for the slot's
 * tile column group q (slot / 4 % C) and row half h (slot % 4 / 2), so that the transposed read
 * (epilogue_vec: at one column v, the lanes of a warp on rows g (+ 8 h) and groups q) finds
 * 8 g + (v / 2 xor f) in 32 different banks; each warp's writes (a slot at a time) stay a
 * permutation of the banks. */
static const rx_expr *part_lane(mma_k *c, const rx_expr *slot, const rx_expr *lane) {
  rx_expr_ctx *cx = c->s->cx;
  const rx_expr *two = sx_const(cx, 2), *four = sx_const(cx, 4);
  const rx_expr *q = sym_expr_floormod(cx, sym_expr_floordiv(cx, slot, four), sx_const(cx, c->C));
  const rx_expr *h = sym_expr_floordiv(cx, sym_expr_floormod(cx, slot, four), two);
  const rx_expr *f = sym_expr_floormod(cx, sx_add(cx, q, sx_mul_c(cx, h, 2)), four);
  const rx_expr *lo = sym_expr_floormod(cx, lane, four);
  const rx_expr *b0 = sym_expr_floormod(
      cx, sx_add(cx, sym_expr_floormod(cx, lo, two), sym_expr_floormod(cx, f, two)), two);
  const rx_expr *b1 = sym_expr_floormod(
      cx, sx_add(cx, sym_expr_floordiv(cx, lo, two), sym_expr_floordiv(cx, f, two)), two);
  return sym_analyzer_simplify(
      c->s->an, sx_add(cx, sym_expr_sub(cx, lane, lo), sx_add(cx, b0, sx_mul_c(cx, b1, 2))));
}

/* The lanes' slots in the partial-sum buffer: the main tiles' 4 accumulators, each extra
 * projection's, then 2 sums per row term; base[t] the first slot of extra t. */
static int part_slots(mma_k *c, int *base) {
  const mm_info *mi = c->mi;
  int tiles = c->RM * c->C, slots = tiles * 4;
  for (int t = 0; t < mi->nx; t++) {
    base[t] = slots;
    slots += mi->x[t].q ? tiles * 4 : c->xs ? 0 : 2;
  }
  return slots;
}

/* The epilogue at the accumulators' points (M not a multiple of 8): warp 0, accumulator i of
 * tile (m, q) is the output point (row0 + 16m + g + 8 (i // 2), col0 + 8q + 2t + i % 2). */
static void epilogue_frag(mma_k *c, rx_stmtvec *body) {
  rx_sctx *s = c->s;
  const mm_info *mi = c->mi;
  int tiles = c->RM * c->C, base[MM_MAX_EXTRA];
  part_slots(c, base);
  const rx_expr *lane = c->lane;
  rx_stmtvec out = {0};
  for (int q = 0; q < tiles; q++) {
    const rx_expr *i = sched_fresh_var(s, "i");
    size_t mk = sym_analyzer_mark(s->an);
    sym_analyzer_bind_range(s->an, i, sx_const(s->cx, 0), sx_const(s->cx, 4));
    rx_tx *tot[1 + MM_MAX_EXTRA];
    for (int t = -1; t < mi->nx; t++) {
      bool rowterm = t >= 0 && !mi->x[t].q;
      const rx_expr *slot = rowterm
                                ? sx_add(s->cx, sx_const(s->cx, base[t]),
                                         sym_expr_floordiv(s->cx, i, sx_const(s->cx, 2)))
                                : sx_add(s->cx, sx_const(s->cx, (t < 0 ? 0 : base[t]) + 4 * q), i);
      rx_tx *sum = NULL;
      bool staged = rowterm && c->xs;
      if (staged) { /* the row's block total (row0 is 0: one row tile) */
        const rx_expr *ri =
            sx_add(s->cx, sx_const(s->cx, 16 * t),
                   sx_add(s->cx, c->g,
                          sx_mul_c(s->cx, sym_expr_floordiv(s->cx, i, sx_const(s->cx, 2)), 8)));
        sum = sched_load(s, c->rts, &ri, 1);
      }
      for (int w = 0; w < (staged ? 0 : MMA_WARPS); w++)
        for (int u = 0; u < (rowterm ? 4 : 1); u++) { /* a row term: the 4 lanes of group g */
          const rx_expr *ln =
              rowterm ? sx_add(s->cx, sx_mul_c(s->cx, c->g, 4), sx_const(s->cx, u)) : lane;
          const rx_expr *ri[3] = {sx_const(s->cx, w), slot, part_lane(c, slot, ln)};
          rx_tx *l = sched_load(s, c->red, ri, 3);
          sum = sum ? ir_tx_binary(s->m, RX_BINOP_ADD, sum, l, s->loc) : l;
        }
      tot[t + 1] = sum;
    }
    const rx_expr *row = sx_add(
        s->cx, sx_add(s->cx, c->row0, sx_const(s->cx, 16 * (q / c->C))),
        sx_add(s->cx, c->g, sx_mul_c(s->cx, sym_expr_floordiv(s->cx, i, sx_const(s->cx, 2)), 8)));
    const rx_expr *col = sx_add(
        s->cx, sx_add(s->cx, c->col0, sx_const(s->cx, 8 * (q % c->C))),
        sx_add(s->cx, sx_mul_c(s->cx, c->t, 2), sym_expr_floormod(s->cx, i, sx_const(s->cx, 2))));
    const rx_expr *vars[MAXN], *repl[MAXN];
    rx_rewrite rw;
    mm_point_rewrite(s, mi, c->brepl, row, col, vars, repl, &rw);
    rx_stmtvec fin = {0};
    mm_epilogue_n(s, mi, &rw, tot, &fin);
    const rx_expr *g =
        sx_and_opt(s->cx, sched_bound_guard(s, row, mi->N), sched_bound_guard(s, col, mi->M));
    rx_stmt *st = sched_guard(s, g, sched_seq(s, &fin));
    sym_analyzer_reset(s->an, mk);
    RX_VEC_PUSH(&out, sched_for(s, i, sx_const(s->cx, 4), RX_LOOP_UNROLL, st));
  }
  RX_VEC_PUSH(body, sched_guard(s, sym_expr_cmp(s->cx, RX_EXPR_EQ, c->w, sx_const(s->cx, 0)),
                                sched_seq(s, &out)));
}

/* The epilogue per 8 consecutive columns a lane (M a multiple of 8, known or tested: matmul.h,
 * mm_epilogue_by_m): thread tx takes tile row r = tx / C (16 RM rows: threads past them idle)
 * and the 8 columns of group q = tx % C, and reads their partial sums transposed from the
 * buffer: column v of them is accumulator 2 (r % 16 / 8) + v % 2 of tile (r / 16, q) in lane
 * 4 (r % 8) + v / 2 (part_lane's place: no bank conflicts); then mm_epilogue_row8_n, the output's
 * 16 bytes a lane, C lanes a row (gemv_mma: warp 0 holds the 16 rows x 16 columns, 512 bytes). */
static void epilogue_vec(mma_k *c, rx_stmtvec *body) {
  rx_sctx *s = c->s;
  rx_expr_ctx *cx = s->cx;
  const mm_info *mi = c->mi;
  int T = 32 * MMA_WARPS, rows = 16 * c->RM, base[MM_MAX_EXTRA];
  RX_ASSERT(T / c->C >= rows);
  part_slots(c, base);
  const rx_expr *r = sym_expr_floordiv(cx, c->tx, sx_const(cx, c->C));
  const rx_expr *q = sym_expr_floormod(cx, c->tx, sx_const(cx, c->C));
  rx_buffer *fts[1 + MM_MAX_EXTRA];
  rx_stmtvec in = {0};
  int64_t eight[1] = {8};
  for (int t = -1; t < mi->nx; t++) {
    rx_stmt *al;
    rx_buffer *ft = fts[t + 1] = sched_alloc(s, "ft", RX_DTYPE_F32, RX_SCOPE_LOCAL, eight, 1, &al);
    RX_VEC_PUSH(&in, al);
    bool rowterm = t >= 0 && !mi->x[t].q;
    RX_ASSERT(!rowterm || c->xs); /* a row term's sums are the staged form's block totals */
    size_t mk = sym_analyzer_mark(s->an);
    const rx_expr *v = mm_bound_var(s, "v", 8);
    rx_tx *sum = NULL;
    if (rowterm) {
      const rx_expr *ri = sx_add(cx, sx_const(cx, 16 * t), r);
      sum = sched_load(s, c->rts, &ri, 1);
    }
    const rx_expr *tile =
        sx_add(cx, sx_mul_c(cx, sym_expr_floordiv(cx, r, sx_const(cx, 16)), c->C), q);
    const rx_expr *acc = sx_add(
        cx,
        sx_mul_c(cx,
                 sym_expr_floordiv(cx, sym_expr_floormod(cx, r, sx_const(cx, 16)), sx_const(cx, 8)),
                 2),
        sym_expr_floormod(cx, v, sx_const(cx, 2)));
    const rx_expr *slot =
        sx_add(cx, sx_const(cx, t < 0 ? 0 : base[t]), sx_add(cx, sx_mul_c(cx, tile, 4), acc));
    const rx_expr *ln = sx_add(cx, sx_mul_c(cx, sym_expr_floormod(cx, r, sx_const(cx, 8)), 4),
                               sym_expr_floordiv(cx, v, sx_const(cx, 2)));
    for (int w = 0; !rowterm && w < MMA_WARPS; w++) {
      const rx_expr *ri[3] = {sx_const(cx, w), slot, part_lane(c, slot, ln)};
      rx_tx *l = sched_load(s, c->red, ri, 3);
      sum = sum ? ir_tx_binary(s->m, RX_BINOP_ADD, sum, l, s->loc) : l;
    }
    rx_stmt *st = sched_store_e(s, ft, &v, 1, sum);
    sym_analyzer_reset(s->an, mk);
    RX_VEC_PUSH(&in, sched_for(s, v, sx_const(cx, 8), RX_LOOP_UNROLL, st));
  }
  const rx_expr *row = sx_add(cx, c->row0, r), *cb = sx_add(cx, c->col0, sx_mul_c(cx, q, 8));
  RX_VEC_PUSH(&in, mm_epilogue_row8_n(s, mi, c->brepl, row, cb, fts, 1 + mi->nx));
  const rx_expr *mine = sx_lt(cx, c->tx, sx_const(cx, rows * c->C));
  RX_VEC_PUSH(body, sched_guard(s, mine, sched_seq(s, &in)));
}

static void epilogue_vec_form(void *k, rx_stmtvec *body) { epilogue_vec(k, body); }
static void epilogue_frag_form(void *k, rx_stmtvec *body) { epilogue_frag(k, body); }

/* The warps' partial tiles summed through shared memory (c->red, lanes placed by part_lane),
 * then the epilogue: per 8 columns a lane where M is a multiple of 8 (known or tested at run
 * time), else warp 0 at the accumulators' points. */
static void finish(mma_k *c, const rx_expr *lane, rx_stmtvec *body) {
  rx_sctx *s = c->s;
  const mm_info *mi = c->mi;
  int tiles = c->RM * c->C, base[MM_MAX_EXTRA];
  int slots = part_slots(c, base);
  rx_stmt *al;
  int64_t shp[3] = {MMA_WARPS, slots, 32};
  rx_buffer *red = c->red = sched_alloc(s, "part", RX_DTYPE_F32, RX_SCOPE_SHARED, shp, 3, &al);
  RX_VEC_PUSH(body, al);
  c->lane = lane;
  for (int t = -1; t < mi->nx; t++)
    for (int q = 0; q < (t < 0 || mi->x[t].q ? tiles : c->xs ? 0 : 1); q++) {
      rx_buffer *src = t < 0 ? c->fc[q] : mi->x[t].q ? c->fcx[t][q] : c->rt[t];
      int n = t < 0 || mi->x[t].q ? 4 : 2, at = (t < 0 ? 0 : base[t]) + 4 * q;
      const rx_expr *i = sched_fresh_var(s, "i");
      size_t mk = sym_analyzer_mark(s->an);
      sym_analyzer_bind_range(s->an, i, sx_const(s->cx, 0), sx_const(s->cx, n));
      const rx_expr *slot = sx_add(s->cx, sx_const(s->cx, at), i);
      const rx_expr *ri[3] = {c->w, slot, part_lane(c, slot, lane)};
      rx_stmt *st = sched_store_e(s, red, ri, 3, sched_load(s, src, &i, 1));
      sym_analyzer_reset(s->an, mk);
      RX_VEC_PUSH(body, sched_for(s, i, sx_const(s->cx, n), RX_LOOP_UNROLL, st));
    }
  RX_VEC_PUSH(body, sched_barrier(s));
  mm_epilogue_by_m(s, mi->M, false, epilogue_vec_form, epilogue_frag_form, c, body);
}

/* The kernel for RM row tiles of 16 and C column groups of 8 per warp; rows: with RM > 1 the
 * grid's y axis walks the row tiles (batch on z), else the rows fit one tile (batch on y). */
static rx_stmt *mma_schedule(rx_sctx *s, const mm_info *mi, int RM, int C) {
  rx_expr_ctx *cx = s->cx;
  mma_k c = {.s = s,
             .mi = mi,
             .p = mi->nx ? half_operand(mi->p) : mm_plain_load(mi->p),
             .q = mm_plain_load(mi->q),
             .RM = RM,
             .C = C};
  RX_ASSERT(!mi->nx || (RM == 1 && C == MMA_COLS));
  int T = 32 * MMA_WARPS, per = 8 * C;
  const rx_expr *bx = sched_fresh_var(s, "bx"), *by = NULL, *nbatch = NULL, *br = NULL;
  const rx_expr *tx = sched_fresh_var(s, "tx"), *nrow = NULL;
  if (mi->nb > 0) {
    by = sched_fresh_var(s, "by");
    nbatch = sym_analyzer_simplify(s->an, sched_fuse(s, mi->nt.ext, mi->nb, by, c.brepl));
  }
  if (RM > 1) {
    br = sched_fresh_var(s, "br");
    nrow = sched_ceildiv(s, mi->N, 16 * RM);
  }
  const rx_expr *ncol = sched_ceildiv(s, mi->M, per);
  size_t mk = sym_analyzer_mark(s->an);
  sym_analyzer_bind_range(s->an, bx, sx_const(s->cx, 0), ncol);
  sym_analyzer_bind_range(s->an, tx, sx_const(s->cx, 0), sx_const(s->cx, T));
  if (by) sym_analyzer_bind_range(s->an, by, sx_const(s->cx, 0), nbatch);
  if (br) sym_analyzer_bind_range(s->an, br, sx_const(s->cx, 0), nrow);
  const rx_expr *lane =
      sym_analyzer_simplify(s->an, sym_expr_floormod(cx, tx, sx_const(s->cx, 32)));
  c.w = sym_analyzer_simplify(s->an, sym_expr_floordiv(cx, tx, sx_const(s->cx, 32)));
  c.g = sym_analyzer_simplify(s->an, sym_expr_floordiv(cx, lane, sx_const(s->cx, 4)));
  c.t = sym_analyzer_simplify(s->an, sym_expr_floormod(cx, lane, sx_const(s->cx, 4)));
  c.col0 = sx_mul_c(s->cx, bx, per);
  c.row0 = br ? sx_mul_c(s->cx, br, 16 * RM) : sx_const(s->cx, 0);
  rx_stmtvec body = {0};
  rx_stmt *al;
  rx_dtype ab = c.p->dtype;
  int64_t xs[2] = {2 * RM, 8}, ws[2] = {C, 8}, fa[1] = {8}, fb[1] = {4};
  c.xr = sched_alloc(s, "xr", ab, RX_SCOPE_LOCAL, xs, 2, &al);
  RX_VEC_PUSH(&body, al);
  c.wr = sched_alloc(s, "wr", ab, RX_SCOPE_LOCAL, ws, 2, &al);
  RX_VEC_PUSH(&body, al);
  c.fa = sched_alloc(s, "fa", ab, RX_SCOPE_LOCAL, fa, 1, &al);
  RX_VEC_PUSH(&body, al);
  c.fb = sched_alloc(s, "fb", ab, RX_SCOPE_LOCAL, fb, 1, &al);
  RX_VEC_PUSH(&body, al);
  rx_tx *zero = NULL;
  sched_identity(s, RX_COMB_SUM, RX_DTYPE_F32, &zero);
  for (int q = 0; q < RM * C; q++) {
    c.fc[q] = sched_alloc(s, "fc", RX_DTYPE_F32, RX_SCOPE_LOCAL, fb, 1, &al);
    RX_VEC_PUSH(&body, al);
    const rx_expr *i = sched_fresh_var(s, "i");
    RX_VEC_PUSH(&body, sched_for(s, i, sx_const(s->cx, 4), RX_LOOP_UNROLL,
                                 sched_store_e(s, c.fc[q], &i, 1, zero)));
  }
  c.tx = tx;
  if (mi->nx) { /* the staged row tile, the rows' totals */
    int64_t K = mi->K->value, kc = K < MMA_STAGE_K ? K : MMA_STAGE_K;
    c.KC = kc;
    int64_t ts[2] = {16, kc + ((96 - kc % 64) % 64)}, rs[1] = {16 * mi->nx};
    c.xs = sched_alloc(s, "xs", ab, RX_SCOPE_SHARED, ts, 2, &al);
    RX_VEC_PUSH(&body, al);
    c.rts = sched_alloc(s, "rts", RX_DTYPE_F32, RX_SCOPE_SHARED, rs, 1, &al);
    RX_VEC_PUSH(&body, al);
    c.rtb = sched_alloc(s, "rt", RX_DTYPE_F32, RX_SCOPE_LOCAL, rs, 1, &al);
    RX_VEC_PUSH(&body, al);
    const rx_expr *i = sched_fresh_var(s, "i");
    RX_VEC_PUSH(&body, sched_for(s, i, sx_const(s->cx, rs[0]), RX_LOOP_UNROLL,
                                 sched_store_e(s, c.rtb, &i, 1, zero)));
  }
  for (int t = 0; t < mi->nx; t++) {
    if (!mi->x[t].q && c.xs) continue; /* its sums in rtb */
    rx_buffer **accs = mi->x[t].q ? c.fcx[t] : &c.rt[t];
    int64_t n[1] = {mi->x[t].q ? 4 : 2};
    if (mi->x[t].q) {
      c.wrx[t] = sched_alloc(s, "wr", ab, RX_SCOPE_LOCAL, ws, 2, &al);
      RX_VEC_PUSH(&body, al);
    }
    for (int q = 0; q < (mi->x[t].q ? C : 1); q++) {
      accs[q] = sched_alloc(s, mi->x[t].q ? "fc" : "rt", RX_DTYPE_F32, RX_SCOPE_LOCAL, n, 1, &al);
      RX_VEC_PUSH(&body, al);
      const rx_expr *i = sched_fresh_var(s, "i");
      RX_VEC_PUSH(&body, sched_for(s, i, sx_const(s->cx, n[0]), RX_LOOP_UNROLL,
                                   sched_store_e(s, accs[q], &i, 1, zero)));
    }
  }
  if (c.xs)
    kloop_staged(&c, &body);
  else
    RX_VEC_PUSH(&body, kloop(&c));
  finish(&c, lane, &body);
  sym_analyzer_reset(s->an, mk);
  rx_stmt *k = sched_for(s, tx, sx_const(s->cx, T), RX_LOOP_THREAD_X, sched_seq(s, &body));
  if (br && by) k = sched_for(s, by, nbatch, RX_LOOP_BLOCK_Z, k);
  if (br) k = sched_for(s, br, nrow, RX_LOOP_BLOCK_Y, k);
  if (!br && by) k = sched_for(s, by, nbatch, RX_LOOP_BLOCK_Y, k);
  return sched_for(s, bx, ncol, RX_LOOP_BLOCK_X, k);
}

rx_stmt *gemv_mma_schedule(rx_sctx *s, const mm_info *mi) {
  return mma_schedule(s, mi, 1, MMA_COLS);
}

rx_stmt *gemm_mma_regs_schedule(rx_sctx *s, const mm_info *mi) {
  return mma_schedule(s, mi, MMA_GEMM_ROWS, MMA_GEMM_COLS);
}
