/* passes/schedule/gemm.c: the GEMM kernel of the matmul rule (matmul.h): P and Q tiles in
 * shared memory per k step, a micro-tile of accumulators per thread, the epilogue at each output
 * point of the micro-tile.
 *
 * Each operand's tile is loaded with consecutive threads along its contiguous axis: along k for
 * an operand read as X[row, k] (activations, Hugging Face's [out, in] weights), along the rows
 * or columns otherwise ([in, out] weights), so a warp's loads are coalesced in both layouts. A
 * tile loaded along k is stored with its rows padded by 4 bytes, so the threads of a warp that
 * store one column of it fall in different shared-memory banks. */
#include "matmul.h"

#include <string.h>

typedef struct tile {
  int bm, bn, bk, tm, tn;
} tile;

/* Elements added to a tile row loaded along k (4 bytes: an odd number of 32-bit words per row). */
static int row_pad(bool along_k, int bytes) { return along_k ? (bytes >= 4 ? 1 : 4 / bytes) : 0; }

static bool tile_fits(rx_sctx *s, const mm_info *mi, tile t, int pbytes, int qbytes) {
  int T = (t.bm / t.tm) * (t.bn / t.tn);
  if (T > s->t->max_threads_per_block || T > s->t->max_block_dim[0]) return false;
  if ((t.bm * t.bk) % T || (t.bk * t.bn) % T) return false;
  int sh = t.bk * (t.bm + row_pad(mi->p_along_k, pbytes)) * pbytes +
           t.bk * (t.bn + row_pad(mi->q_along_k, qbytes)) * qbytes;
  return sh <= s->t->shared_bytes;
}

/* The expression cached in shared memory for an operand: the operand without an outer cast. */
static rx_tx *cache_core(rx_tx *e) { return e->kind == RX_TX_CAST ? e->a : e; }

/* What the parts of a GEMM schedule share: the tile, the block and thread variables, the
 * shared tiles and the accumulator. */
typedef struct gemm {
  rx_sctx *s;
  const mm_info *mi;
  tile t;
  int T, TX;                   /* threads per block, threads along a tile row */
  const rx_expr *M, *N, *K;    /* columns (j), rows (i), reduction (k) */
  const rx_expr *bx, *by, *tx; /* column block, row block, thread */
  const rx_expr *ko;           /* the k tile */
  const rx_expr *ty, *tx2;     /* the thread's row and column in the tile grid */
  const rx_expr *ua, *ub;      /* the micro-tile's row and column */
  const rx_expr *brepl[MAXN];  /* the batch loop variables as functions of bz */
  rx_tx *pc, *qc;              /* the loaded operands (casts removed) */
  rx_buffer *As, *Bs, *acc;    /* the shared tiles of P and Q, the local accumulator */
} gemm;

/* The tile: among the candidates that fit the target (shared memory, threads), the first the
 * analyzer proves exact on M and N, else the one exact on more of them. Candidates {bm, bn, bk,
 * tm, tn}: block tile rows x columns x k step, micro-tile rows x columns per thread; the large
 * ones first (64 x 64 with 4 x 4 per thread: 256 threads, 16 accumulators each, 2 x 64 x 16
 * shared elements), down to 8 x 8 for tiny matrices. Small-row candidates (n <= SMALL_ROWS) keep
 * the rows in one tile and spread the threads along the columns. */
static tile gemm_tile(rx_sctx *s, const mm_info *mi, bool small, int pb, int qb) {
  static const tile big[] = {{64, 64, 16, 4, 4},
                             {32, 64, 16, 4, 4},
                             {32, 32, 16, 4, 4},
                             {16, 16, 16, 2, 2},
                             {8, 8, 8, 1, 1}};
  static const tile sm[] = {
      {16, 64, 16, 1, 4}, {16, 64, 16, 2, 4}, {16, 32, 16, 2, 4}, {8, 8, 8, 1, 1}};
  const tile *cands = small ? sm : big;
  int nc = small ? 4 : 5;
  tile t = cands[nc - 1];
  int best = -1;
  int64_t dm = sym_analyzer_divisor(s->an, mi->M), dn = sym_analyzer_divisor(s->an, mi->N);
  for (int c = 0; c < nc; c++) {
    if (!tile_fits(s, mi, cands[c], pb, qb)) continue;
    /* prefer tiles the analyzer proves exact on M and N */
    int score = (dm == 0 || dm % cands[c].bn == 0) + (dn == 0 || dn % cands[c].bm == 0);
    if (best < 0 || score > best) {
      best = score;
      t = cands[c];
    }
    if (score == 2) break;
  }
  return t;
}

/* The cooperative load of one operand's tile into shared memory (which 0: P, 1: Q): the tile is
 * [bk, rows (+ pad)]; consecutive threads take consecutive k when the operand is contiguous along
 * k, else consecutive rows (i for P, j for Q); zero outside the matrix. */
static rx_stmt *gemm_load(gemm *gm, int which) {
  rx_sctx *s = gm->s;
  rx_expr_ctx *cx = s->cx;
  const mm_info *mi = gm->mi;
  tile t = gm->t;
  int T = gm->T;
  int rows = which == 0 ? t.bm : t.bn; /* extent of the tile along i or j */
  bool along_k = which == 0 ? mi->p_along_k : mi->q_along_k;
  int per = t.bk * rows / T;
  const rx_expr *l = sched_fresh_var(s, which == 0 ? "la" : "lb");
  const rx_expr *e = sx_add(s->cx, sx_mul_c(s->cx, l, T), gm->tx);
  const rx_expr *kk, *rr;
  if (along_k) {
    kk = sym_expr_floormod(cx, e, sx_const(s->cx, t.bk));
    rr = sym_expr_floordiv(cx, e, sx_const(s->cx, t.bk));
  } else {
    rr = sym_expr_floormod(cx, e, sx_const(s->cx, rows));
    kk = sym_expr_floordiv(cx, e, sx_const(s->cx, rows));
  }
  const rx_expr *gk = sx_add(s->cx, sx_mul_c(s->cx, gm->ko, t.bk), kk);
  const rx_expr *gr = sx_add(s->cx, sx_mul_c(s->cx, which == 0 ? gm->by : gm->bx, rows), rr);
  size_t m2 = sym_analyzer_mark(s->an);
  sym_analyzer_bind_range(s->an, l, sx_const(s->cx, 0), sx_const(s->cx, per));
  const rx_expr *g = sx_and_opt(s->cx, sched_bound_guard(s, gk, gm->K),
                                sched_bound_guard(s, gr, which == 0 ? gm->N : gm->M));
  sym_analyzer_reset(s->an, m2);
  const rx_expr *vars[MAXN + 1], *rp[MAXN + 1];
  rx_rewrite rw;
  const rx_expr *z = sx_const(s->cx, 0);
  mm_point_rewrite(s, mi, gm->brepl, which == 0 ? gr : z, which == 0 ? z : gr, vars, rp, &rw);
  vars[rw.n] = mi->r.k;
  rp[rw.n] = gk;
  rw.n++;
  rx_tx *v = sched_rewrite_tx(&rw, which == 0 ? gm->pc : gm->qc);
  if (g) {
    rx_tx *zz = ir_dtype_is_float(v->dtype) ? ir_tx_float(s->m, 0.0, v->dtype, false, s->loc)
                                            : ir_tx_int(s->m, 0, v->dtype, false, s->loc);
    v = ir_tx_select(s->m, sched_cond(s, g), v, zz, s->loc);
  }
  const rx_expr *ix[2] = {kk, rr};
  rx_stmt *st = sched_store_e(s, which == 0 ? gm->As : gm->Bs, ix, 2, v);
  return sched_for(s, l, sx_const(s->cx, per), RX_LOOP_UNROLL, st);
}

/* The micro-tile: thread (ty, tx2) accumulates rows ty * tm + ua and columns tx2 * tn + ub
 * over the k tile, from the shared tiles. */
static rx_stmt *gemm_micro_tile(gemm *gm) {
  rx_sctx *s = gm->s;
  const mm_info *mi = gm->mi;
  tile t = gm->t;
  const rx_expr *ty = gm->ty, *tx2 = gm->tx2, *ua = gm->ua, *ub = gm->ub;
  rx_buffer *As = gm->As, *Bs = gm->Bs, *acc = gm->acc;
  const rx_expr *kk = sched_fresh_var(s, "kk");
  const rx_expr *ai[2] = {kk, sx_add(s->cx, sx_mul_c(s->cx, ty, t.tm), ua)};
  const rx_expr *bi[2] = {kk, sx_add(s->cx, sx_mul_c(s->cx, tx2, t.tn), ub)};
  rx_tx *pa = sched_load(s, As, ai, 2), *qa = sched_load(s, Bs, bi, 2);
  if (mi->p->kind == RX_TX_CAST) pa = ir_tx_cast(s->m, mi->p->dtype, pa, s->loc);
  if (mi->q->kind == RX_TX_CAST) qa = ir_tx_cast(s->m, mi->q->dtype, qa, s->loc);
  rx_tx *prod = mi->p_first ? ir_tx_binary(s->m, RX_BINOP_MUL, pa, qa, s->loc)
                            : ir_tx_binary(s->m, RX_BINOP_MUL, qa, pa, s->loc);
  const rx_expr *ci[2] = {ua, ub};
  rx_tx *cur = sched_load(s, acc, ci, 2);
  rx_tx *sum = mi->r.acc_first ? ir_tx_binary(s->m, RX_BINOP_ADD, cur, prod, s->loc)
                               : ir_tx_binary(s->m, RX_BINOP_ADD, prod, cur, s->loc);
  rx_stmt *st = sched_store_e(s, acc, ci, 2, sum);
  rx_stmt *lp = sched_for(s, ua, sx_const(s->cx, t.tm), RX_LOOP_UNROLL,
                          sched_for(s, ub, sx_const(s->cx, t.tn), RX_LOOP_UNROLL, st));
  return sched_for(s, kk, sx_const(s->cx, t.bk), RX_LOOP_SERIAL, lp);
}

/* The epilogue: the micro-tile's stores (with the matmul's epilogue), guarded at the edges. */
static rx_stmt *gemm_epilogue(gemm *gm) {
  rx_sctx *s = gm->s;
  tile t = gm->t;
  const rx_expr *ua = gm->ua, *ub = gm->ub;
  const rx_expr *gi = sx_add(
      s->cx, sx_add(s->cx, sx_mul_c(s->cx, gm->by, t.bm), sx_mul_c(s->cx, gm->ty, t.tm)), ua);
  const rx_expr *gj = sx_add(
      s->cx, sx_add(s->cx, sx_mul_c(s->cx, gm->bx, t.bn), sx_mul_c(s->cx, gm->tx2, t.tn)), ub);
  size_t m2 = sym_analyzer_mark(s->an);
  sym_analyzer_bind_range(s->an, ua, sx_const(s->cx, 0), sx_const(s->cx, t.tm));
  sym_analyzer_bind_range(s->an, ub, sx_const(s->cx, 0), sx_const(s->cx, t.tn));
  const rx_expr *g =
      sx_and_opt(s->cx, sched_bound_guard(s, gi, gm->N), sched_bound_guard(s, gj, gm->M));
  sym_analyzer_reset(s->an, m2);
  const rx_expr *vars[MAXN], *rp[MAXN];
  rx_rewrite rw;
  mm_point_rewrite(s, gm->mi, gm->brepl, gi, gj, vars, rp, &rw);
  const rx_expr *ci[2] = {ua, ub};
  rx_stmtvec fin = {0};
  mm_epilogue(s, gm->mi, &rw, sched_load(s, gm->acc, ci, 2), &fin);
  rx_stmt *st = sched_guard(s, g, sched_seq(s, &fin));
  return sched_for(s, ua, sx_const(s->cx, t.tm), RX_LOOP_UNROLL,
                   sched_for(s, ub, sx_const(s->cx, t.tn), RX_LOOP_UNROLL, st));
}

/* The shared tiles and the accumulator (zeroed), appended to body. */
static void gemm_allocs(gemm *gm, rx_stmtvec *body) {
  rx_sctx *s = gm->s;
  tile t = gm->t;
  rx_stmt *al;
  int pb = ir_dtype_bits(gm->pc->dtype) / 8, qb = ir_dtype_bits(gm->qc->dtype) / 8;
  int64_t as_shape[2] = {t.bk, t.bm + row_pad(gm->mi->p_along_k, pb < 1 ? 1 : pb)};
  int64_t bs_shape[2] = {t.bk, t.bn + row_pad(gm->mi->q_along_k, qb < 1 ? 1 : qb)};
  int64_t acc_shape[2] = {t.tm, t.tn};
  gm->As = sched_alloc(s, "a_tile", gm->pc->dtype, RX_SCOPE_SHARED, as_shape, 2, &al);
  RX_VEC_PUSH(body, al);
  gm->Bs = sched_alloc(s, "b_tile", gm->qc->dtype, RX_SCOPE_SHARED, bs_shape, 2, &al);
  RX_VEC_PUSH(body, al);
  gm->acc = sched_alloc(s, "acc_tile", gm->mi->acc_dt, RX_SCOPE_LOCAL, acc_shape, 2, &al);
  RX_VEC_PUSH(body, al);
  rx_tx *zero = NULL;
  sched_identity(s, RX_COMB_SUM, gm->mi->acc_dt, &zero);
  const rx_expr *ix[2] = {gm->ua, gm->ub};
  rx_stmt *st = sched_store_e(s, gm->acc, ix, 2, zero);
  RX_VEC_PUSH(body, sched_for(s, gm->ua, sx_const(s->cx, t.tm), RX_LOOP_UNROLL,
                              sched_for(s, gm->ub, sx_const(s->cx, t.tn), RX_LOOP_UNROLL, st)));
}

/* GEMM tiled in shared memory (P and Q tiles per k step) and in registers (a micro-tile per
 * thread): tile choice, cooperative loads, micro-tile, epilogue. The grid: blockIdx.x over
 * column tiles, blockIdx.y over row tiles, blockIdx.z over the fused batch (when there is one). */
rx_stmt *gemm_schedule(rx_sctx *s, const mm_info *mi, bool small) {
  rx_expr_ctx *cx = s->cx;
  gemm gm = {.s = s, .mi = mi, .M = mi->M, .N = mi->N, .K = mi->K};
  gm.pc = cache_core(mi->p);
  gm.qc = cache_core(mi->q);
  int pb = ir_dtype_bits(gm.pc->dtype) / 8, qb = ir_dtype_bits(gm.qc->dtype) / 8;
  tile t = gm.t = gemm_tile(s, mi, small, pb < 1 ? 1 : pb, qb < 1 ? 1 : qb);
  gm.TX = t.bn / t.tn;
  gm.T = (t.bm / t.tm) * gm.TX;
  gm.bx = sched_fresh_var(s, "bx");
  gm.by = sched_fresh_var(s, "by");
  const rx_expr *bz = mi->nb > 0 ? sched_fresh_var(s, "bz") : NULL, *nbatch = NULL;
  gm.tx = sched_fresh_var(s, "tx");
  const rx_expr *ncol, *nrow, *nk;
  gm.ko = sched_fresh_var(s, "ko");
  if (bz) nbatch = sym_analyzer_simplify(s->an, sched_fuse(s, mi->nt.ext, mi->nb, bz, gm.brepl));
  sched_split(s, gm.M, t.bn, gm.bx, sx_const(s->cx, 0), &ncol);
  sched_split(s, gm.N, t.bm, gm.by, sx_const(s->cx, 0), &nrow);
  sched_split(s, gm.K, t.bk, gm.ko, sx_const(s->cx, 0), &nk);
  size_t mk = sym_analyzer_mark(s->an);
  sym_analyzer_bind_range(s->an, gm.bx, sx_const(s->cx, 0), ncol);
  sym_analyzer_bind_range(s->an, gm.by, sx_const(s->cx, 0), nrow);
  sym_analyzer_bind_range(s->an, gm.tx, sx_const(s->cx, 0), sx_const(s->cx, gm.T));
  sym_analyzer_bind_range(s->an, gm.ko, sx_const(s->cx, 0), nk);
  gm.ua = sched_fresh_var(s, "ua");
  gm.ub = sched_fresh_var(s, "ub");
  rx_stmtvec body = {0};
  gemm_allocs(&gm, &body);
  rx_stmtvec kb = {0};
  RX_VEC_PUSH(&kb, gemm_load(&gm, 0));
  RX_VEC_PUSH(&kb, gemm_load(&gm, 1));
  RX_VEC_PUSH(&kb, sched_barrier(s));
  gm.ty = sym_expr_floordiv(cx, gm.tx, sx_const(s->cx, gm.TX));
  gm.tx2 = sym_expr_floormod(cx, gm.tx, sx_const(s->cx, gm.TX));
  RX_VEC_PUSH(&kb, gemm_micro_tile(&gm));
  RX_VEC_PUSH(&kb, sched_barrier(s));
  RX_VEC_PUSH(&body, sched_for(s, gm.ko, nk, RX_LOOP_SERIAL, sched_seq(s, &kb)));
  RX_VEC_PUSH(&body, gemm_epilogue(&gm));
  sym_analyzer_reset(s->an, mk);
  rx_stmt *k = sched_for(s, gm.tx, sx_const(s->cx, gm.T), RX_LOOP_THREAD_X, sched_seq(s, &body));
  if (bz) k = sched_for(s, bz, nbatch, RX_LOOP_BLOCK_Z, k);
  k = sched_for(s, gm.by, nrow, RX_LOOP_BLOCK_Y, k);
  return sched_for(s, gm.bx, ncol, RX_LOOP_BLOCK_X, k);
}
