/* passes/schedule/gemm_frag.c: the GEMM on subgroup matrix fragments (matmul.h; ir.h,
 * RX_STMT_FRAG; issue 14): Metal's simdgroup_matrix and Vulkan's cooperative matrices, through
 * the target's `.mma` table (api coop or simdgroup), not its name.
 *
 *   gemm_frag   P and Q plain loads of one dtype (a cast to f32 around them allowed) that the
 *               target multiplies on fragments of shape fm x fk times fk x fn into f32, a
 *               subgroup of the fragments' width (32). A block of FRAG_SG_ROWS x FRAG_SG_COLS
 *               subgroups computes a BM x BN tile of the output, BM = FRAG_SG_ROWS FRAG_WM fm and
 *               BN = FRAG_SG_COLS FRAG_WN fn; subgroup (wr, wc) holds FRAG_WM x FRAG_WN
 *               accumulators. For each slice of FRAG_BK k the block's threads stage the BM x BK
 *               tile of P and the BK x BN tile of Q in shared memory (zeros past n, m and K:
 *               any row count, column count and K, symbolic or not), each subgroup loads its
 *               fragments from there and multiplies; at the end the accumulators go to a BM x BN
 *               tile in shared memory, from which each thread writes its output points through
 *               the epilogue, rows past n and columns past m skipped. Q is staged with
 *               consecutive threads along k for x @ W^T (weights [out, in]) and along j for
 *               x @ W, so global reads are coalesced either way.
 *
 *   gemm_frag_dq  the same with Q dequantized (mm_q_dequant: quant_matmul's weights, ops/quant.c):
 *               each thread computes its elements of Q's BK x BN tile from the packed bytes
 *               (scales, zero points: the whole expression), converts them to P's dtype and
 *               stores them in the tile; the fragment loop and the epilogue are the same.
 *
 * Not yet: double-buffered staging, wide loads of packed weights (gemm_mma_dq has them), vector
 * loads into shared memory, bank-conflict-free layouts, several tile configurations per row count;
 * no GPU timings (none lent). */
#include "matmul.h"

/* Subgroups per block (rows x columns of subgroup tiles): 4 subgroups, 128 threads. */
#define FRAG_SG_ROWS 2
#define FRAG_SG_COLS 2
/* Fragments per subgroup along rows and columns: 2 x 2 accumulators, each A fragment used
 * twice and each B fragment twice per step. */
#define FRAG_WM 2
#define FRAG_WN 2
/* k per staged slice: a multiple of the fragments' k of the targets listed (8 on Metal, 16 on
 * NVIDIA's Vulkan driver). */
#define FRAG_BK 32

/* The load of dtype ab under e (a cast to f32 around it allowed), or NULL. */
static const rx_tx *frag_load_of(const rx_tx *e) {
  if (e->kind == RX_TX_CAST && e->dtype == RX_DTYPE_F32) e = e->a;
  return e->kind == RX_TX_LOAD ? e : NULL;
}

/* The subgroup matrix-unit shape of t for mi: the first (best) of api coop or simdgroup whose
 * operands are P's and Q's dtype and whose accumulator is f32; NULL when none fits. CUDA's
 * fragments (api sync-frag) are not asked for: there gemv_mma / gemm_mma / gemm_mma_regs use
 * mma.sync directly, with ldmatrix and cp.async. */
static const rx_mma_shape *frag_shape_for(const rx_sctx *s, const mm_info *mi) {
  const rx_tx *p = frag_load_of(mi->p), *q = frag_load_of(mi->q);
  bool dq = mm_q_dequant(mi); /* Q computed as it is staged, in P's dtype */
  if (!p || (!dq && (!q || p->dtype != q->dtype)) || mi->acc_dt != RX_DTYPE_F32) return NULL;
  for (int i = 0; i < s->t->nmma; i++) {
    const rx_mma_shape *x = &s->t->mma[i];
    if ((x->api == RX_MMA_COOP || x->api == RX_MMA_SIMDGROUP) && x->ab == p->dtype &&
        x->acc == RX_DTYPE_F32 && x->threads == s->t->subgroup_size && FRAG_BK % x->k == 0 &&
        !x->n_step)
      return x;
  }
  return NULL;
}

bool gemm_frag_fits(const rx_sctx *s, const mm_info *mi) {
  const rx_mma_shape *x = frag_shape_for(s, mi);
  if (!x) return false;
  int64_t bm = FRAG_SG_ROWS * FRAG_WM * x->m, bn = FRAG_SG_COLS * FRAG_WN * x->n;
  int64_t bytes = (bm + bn) * FRAG_BK * (ir_dtype_bits(x->ab) / 8) + bm * bn * 4;
  int threads = FRAG_SG_ROWS * FRAG_SG_COLS * x->threads;
  return bytes <= s->t->shared_bytes && threads <= s->t->max_threads_per_block;
}

/* What the parts of the kernel share. */
typedef struct frag_k {
  rx_sctx *s;
  const mm_info *mi;
  const rx_mma_shape *x;
  int64_t BM, BN, T;
  const rx_expr *tx, *wr, *wc; /* the thread, its subgroup's row and column in the block */
  const rx_expr *row0, *col0;  /* the block's first output row and column */
  const rx_expr *k0;           /* the first k of the slice being staged */
  const rx_expr *brepl[MAXN];  /* the batch loop variables as functions of the batch block */
  rx_buffer *as, *bs, *cs;     /* shared: P [BM, BK], Q [BK, BN], the results [BM, BN] */
  rx_buffer *fa[FRAG_WM], *fb[FRAG_WN], *fc[FRAG_WM * FRAG_WN]; /* the fragments */
} frag_k;

/* A frag statement of op on fragment f (RX_STMT_FRAG) */
static rx_stmt *frag_new(rx_sctx *s, rx_frag_op op, rx_buffer *f) {
  rx_stmt *st = ir_stmt_new(s->m, RX_STMT_FRAG, s->loc);
  st->frag_op = op;
  st->buf = f;
  return st;
}

/* frag load/store of f at mem[r, c] with the given stride */
static rx_stmt *frag_mem(rx_sctx *s, rx_frag_op op, rx_buffer *f, rx_buffer *mem, const rx_expr *r,
                         const rx_expr *c, int64_t stride) {
  rx_stmt *st = frag_new(s, op, f);
  st->mem = mem;
  st->nidx = 2;
  st->idx = ir_module_alloc(s->m, sizeof *st->idx * 2);
  st->idx[0] = sched_sym(s, r);
  st->idx[1] = sched_sym(s, c);
  st->value = sched_sym(s, sx_const(s->cx, stride));
  return st;
}

/* for r in 0..elems / T: e = r T + tx, (a, b) = (e // inner, e % inner): dst[a, b] (or [b, a]
 * when swap) = e_at(a, b) where cond(a, b) holds, else zero. The callback gives the operand and
 * the condition at the element. */
typedef rx_tx *(*stage_at)(frag_k *c, const rx_expr *a, const rx_expr *b, const rx_expr **cond);
static rx_stmt *stage(frag_k *c, rx_buffer *dst, int64_t outer, int64_t inner, bool swap,
                      stage_at at) {
  rx_sctx *s = c->s;
  const rx_expr *r = sched_fresh_var(s, "r");
  size_t mk = sym_analyzer_mark(s->an);
  sym_analyzer_bind_range(s->an, r, sx_const(s->cx, 0), sx_const(s->cx, outer * inner / c->T));
  const rx_expr *e = sx_add(s->cx, sx_mul_c(s->cx, r, c->T), c->tx);
  const rx_expr *a =
      sym_analyzer_simplify(s->an, sym_expr_floordiv(s->cx, e, sx_const(s->cx, inner)));
  const rx_expr *b =
      sym_analyzer_simplify(s->an, sym_expr_floormod(s->cx, e, sx_const(s->cx, inner)));
  const rx_expr *cond = NULL;
  rx_tx *v = at(c, a, b, &cond);
  const rx_expr *idx[2] = {swap ? b : a, swap ? a : b};
  rx_stmt *st = sched_store_e(s, dst, idx, 2, v);
  if (cond && !sched_proves(s, cond)) {
    rx_tx *zero = NULL;
    sched_identity(s, RX_COMB_SUM, dst->dtype, &zero);
    st = sched_if(s, sched_cond(s, cond), st, sched_store_e(s, dst, idx, 2, zero));
  }
  sym_analyzer_reset(s->an, mk);
  return sched_for(s, r, sx_const(s->cx, outer * inner / c->T), RX_LOOP_UNROLL, st);
}

/* P at tile element (ii, kk) of the slice */
static rx_tx *p_at(frag_k *c, const rx_expr *ii, const rx_expr *kk, const rx_expr **cond) {
  rx_sctx *s = c->s;
  const rx_expr *row = sx_add(s->cx, c->row0, ii), *k = sx_add(s->cx, c->k0, kk);
  *cond = sx_and_opt(s->cx, sched_bound_guard(s, row, c->mi->N), sched_bound_guard(s, k, c->mi->K));
  return mm_operand_at(s, c->mi, c->brepl, frag_load_of(c->mi->p), row, c->col0, k);
}
/* Q at tile element (kk, jj) (x @ W: consecutive threads along j); dequantized (gemm_frag_dq),
 * the whole expression converted to the fragments' dtype */
static rx_tx *q_at_kj(frag_k *c, const rx_expr *kk, const rx_expr *jj, const rx_expr **cond) {
  rx_sctx *s = c->s;
  const rx_expr *col = sx_add(s->cx, c->col0, jj), *k = sx_add(s->cx, c->k0, kk);
  *cond = sx_and_opt(s->cx, sched_bound_guard(s, col, c->mi->M), sched_bound_guard(s, k, c->mi->K));
  if (!mm_q_dequant(c->mi))
    return mm_operand_at(s, c->mi, c->brepl, frag_load_of(c->mi->q), c->row0, col, k);
  rx_tx *q = mm_operand_at(s, c->mi, c->brepl, c->mi->q, c->row0, col, k);
  return q->dtype == c->x->ab ? q : ir_tx_cast(s->m, c->x->ab, q, s->loc);
}
/* Q at tile element (jj, kk), stored at (kk, jj) (x @ W^T: consecutive threads along k) */
static rx_tx *q_at_jk(frag_k *c, const rx_expr *jj, const rx_expr *kk, const rx_expr **cond) {
  return q_at_kj(c, kk, jj, cond);
}

/* One slice of FRAG_BK k at kt: stage P and Q, then the fragment steps. */
static rx_stmt *slice(frag_k *c, const rx_expr *kt) {
  rx_sctx *s = c->s;
  const rx_mma_shape *x = c->x;
  rx_stmtvec st = {0};
  c->k0 = sx_mul_c(s->cx, kt, FRAG_BK);
  RX_VEC_PUSH(&st, stage(c, c->as, c->BM, FRAG_BK, false, p_at));
  if (c->mi->q_along_k)
    RX_VEC_PUSH(&st, stage(c, c->bs, c->BN, FRAG_BK, true, q_at_jk));
  else
    RX_VEC_PUSH(&st, stage(c, c->bs, FRAG_BK, c->BN, false, q_at_kj));
  RX_VEC_PUSH(&st, sched_barrier(s));
  for (int ks = 0; ks < FRAG_BK / x->k; ks++) {
    for (int m = 0; m < FRAG_WM; m++) {
      const rx_expr *r =
          sx_add(s->cx, sx_mul_c(s->cx, c->wr, FRAG_WM * x->m), sx_const(s->cx, m * x->m));
      RX_VEC_PUSH(&st, frag_mem(s, RX_FRAG_OP_LOAD, c->fa[m], c->as, r, sx_const(s->cx, ks * x->k),
                                FRAG_BK));
    }
    for (int n = 0; n < FRAG_WN; n++) {
      const rx_expr *col =
          sx_add(s->cx, sx_mul_c(s->cx, c->wc, FRAG_WN * x->n), sx_const(s->cx, n * x->n));
      RX_VEC_PUSH(&st, frag_mem(s, RX_FRAG_OP_LOAD, c->fb[n], c->bs, sx_const(s->cx, ks * x->k),
                                col, c->BN));
    }
    for (int q = 0; q < FRAG_WM * FRAG_WN; q++) {
      rx_stmt *mma = frag_new(s, RX_FRAG_OP_MMA, c->fc[q]);
      mma->mma_a = c->fa[q / FRAG_WN];
      mma->mma_b = c->fb[q % FRAG_WN];
      mma->mma_c = c->fc[q];
      RX_VEC_PUSH(&st, mma);
    }
  }
  RX_VEC_PUSH(&st, sched_barrier(s)); /* the tiles are overwritten by the next slice */
  return sched_seq(s, &st);
}

/* The accumulators through shared memory to the output: thread tx writes the points
 * e = r T + tx of the tile with the epilogue, where they are inside the output. */
static void finish(frag_k *c, rx_stmtvec *body) {
  rx_sctx *s = c->s;
  const rx_mma_shape *x = c->x;
  for (int q = 0; q < FRAG_WM * FRAG_WN; q++) {
    const rx_expr *r =
        sx_add(s->cx, sx_mul_c(s->cx, c->wr, FRAG_WM * x->m), sx_const(s->cx, q / FRAG_WN * x->m));
    const rx_expr *col =
        sx_add(s->cx, sx_mul_c(s->cx, c->wc, FRAG_WN * x->n), sx_const(s->cx, q % FRAG_WN * x->n));
    RX_VEC_PUSH(body, frag_mem(s, RX_FRAG_OP_STORE, c->fc[q], c->cs, r, col, c->BN));
  }
  RX_VEC_PUSH(body, sched_barrier(s));
  const rx_expr *rv = sched_fresh_var(s, "r");
  size_t mk = sym_analyzer_mark(s->an);
  sym_analyzer_bind_range(s->an, rv, sx_const(s->cx, 0), sx_const(s->cx, c->BM * c->BN / c->T));
  const rx_expr *e = sx_add(s->cx, sx_mul_c(s->cx, rv, c->T), c->tx);
  const rx_expr *ii =
      sym_analyzer_simplify(s->an, sym_expr_floordiv(s->cx, e, sx_const(s->cx, c->BN)));
  const rx_expr *jj =
      sym_analyzer_simplify(s->an, sym_expr_floormod(s->cx, e, sx_const(s->cx, c->BN)));
  const rx_expr *row = sx_add(s->cx, c->row0, ii), *col = sx_add(s->cx, c->col0, jj),
                *idx[2] = {ii, jj};
  const rx_expr *vars[MAXN], *repl[MAXN];
  rx_rewrite rw;
  mm_point_rewrite(s, c->mi, c->brepl, row, col, vars, repl, &rw);
  rx_stmtvec fin = {0};
  mm_epilogue(s, c->mi, &rw, sched_load(s, c->cs, idx, 2), &fin);
  const rx_expr *g =
      sx_and_opt(s->cx, sched_bound_guard(s, row, c->mi->N), sched_bound_guard(s, col, c->mi->M));
  rx_stmt *st = sched_guard(s, g, sched_seq(s, &fin));
  sym_analyzer_reset(s->an, mk);
  RX_VEC_PUSH(body, sched_for(s, rv, sx_const(s->cx, c->BM * c->BN / c->T), RX_LOOP_SERIAL, st));
}

/* The allocations of the kernel: shared tiles, fragments, accumulators set to zero. */
static void allocs(frag_k *c, rx_stmtvec *body) {
  rx_sctx *s = c->s;
  const rx_mma_shape *x = c->x;
  rx_stmt *al;
  int64_t as[2] = {c->BM, FRAG_BK}, bs[2] = {FRAG_BK, c->BN}, cs[2] = {c->BM, c->BN};
  int64_t fa[2] = {x->m, x->k}, fb[2] = {x->k, x->n}, fc[2] = {x->m, x->n};
  c->as = sched_alloc(s, "as", x->ab, RX_SCOPE_SHARED, as, 2, &al);
  RX_VEC_PUSH(body, al);
  c->bs = sched_alloc(s, "bs", x->ab, RX_SCOPE_SHARED, bs, 2, &al);
  RX_VEC_PUSH(body, al);
  c->cs = sched_alloc(s, "cs", RX_DTYPE_F32, RX_SCOPE_SHARED, cs, 2, &al);
  RX_VEC_PUSH(body, al);
  for (int m = 0; m < FRAG_WM; m++) {
    c->fa[m] = sched_alloc(s, "fa", x->ab, RX_SCOPE_LOCAL, fa, 2, &al);
    c->fa[m]->frag = RX_FRAG_A;
    RX_VEC_PUSH(body, al);
  }
  for (int n = 0; n < FRAG_WN; n++) {
    c->fb[n] = sched_alloc(s, "fb", x->ab, RX_SCOPE_LOCAL, fb, 2, &al);
    c->fb[n]->frag = RX_FRAG_B;
    RX_VEC_PUSH(body, al);
  }
  rx_tx *zero = NULL;
  sched_identity(s, RX_COMB_SUM, RX_DTYPE_F32, &zero);
  for (int q = 0; q < FRAG_WM * FRAG_WN; q++) {
    c->fc[q] = sched_alloc(s, "fc", RX_DTYPE_F32, RX_SCOPE_LOCAL, fc, 2, &al);
    c->fc[q]->frag = RX_FRAG_ACC;
    RX_VEC_PUSH(body, al);
    rx_stmt *fill = frag_new(s, RX_FRAG_OP_FILL, c->fc[q]);
    fill->value = zero;
    RX_VEC_PUSH(body, fill);
  }
}

rx_stmt *gemm_frag_schedule(rx_sctx *s, const mm_info *mi) {
  rx_expr_ctx *cx = s->cx;
  frag_k c = {.s = s, .mi = mi, .x = frag_shape_for(s, mi)};
  RX_ASSERT(c.x);
  c.BM = FRAG_SG_ROWS * FRAG_WM * c.x->m;
  c.BN = FRAG_SG_COLS * FRAG_WN * c.x->n;
  c.T = FRAG_SG_ROWS * FRAG_SG_COLS * c.x->threads;
  const rx_expr *bx = sched_fresh_var(s, "bx"), *br = sched_fresh_var(s, "br");
  const rx_expr *by = NULL, *nbatch = NULL;
  c.tx = sched_fresh_var(s, "tx");
  if (mi->nb > 0) {
    by = sched_fresh_var(s, "bz");
    nbatch = sym_analyzer_simplify(s->an, sched_fuse(s, mi->nt.ext, mi->nb, by, c.brepl));
  }
  const rx_expr *nrow = sched_ceildiv(s, mi->N, c.BM);
  const rx_expr *ncol = sched_ceildiv(s, mi->M, c.BN);
  const rx_expr *nk = sched_ceildiv(s, mi->K, FRAG_BK);
  size_t mk = sym_analyzer_mark(s->an);
  sym_analyzer_bind_range(s->an, bx, sx_const(s->cx, 0), ncol);
  sym_analyzer_bind_range(s->an, br, sx_const(s->cx, 0), nrow);
  sym_analyzer_bind_range(s->an, c.tx, sx_const(s->cx, 0), sx_const(s->cx, c.T));
  if (by) sym_analyzer_bind_range(s->an, by, sx_const(s->cx, 0), nbatch);
  const rx_expr *w = sym_expr_floordiv(cx, c.tx, sx_const(s->cx, c.x->threads));
  c.wr = sym_analyzer_simplify(s->an, sym_expr_floordiv(cx, w, sx_const(s->cx, FRAG_SG_COLS)));
  c.wc = sym_analyzer_simplify(s->an, sym_expr_floormod(cx, w, sx_const(s->cx, FRAG_SG_COLS)));
  c.row0 = sx_mul_c(s->cx, br, c.BM);
  c.col0 = sx_mul_c(s->cx, bx, c.BN);
  rx_stmtvec body = {0};
  allocs(&c, &body);
  const rx_expr *kt = sched_fresh_var(s, "kt");
  size_t mk2 = sym_analyzer_mark(s->an);
  sym_analyzer_bind_range(s->an, kt, sx_const(s->cx, 0), nk);
  rx_stmt *sl = slice(&c, kt);
  sym_analyzer_reset(s->an, mk2);
  RX_VEC_PUSH(&body, sched_for(s, kt, nk, RX_LOOP_SERIAL, sl));
  finish(&c, &body);
  sym_analyzer_reset(s->an, mk);
  rx_stmt *k = sched_for(s, c.tx, sx_const(s->cx, c.T), RX_LOOP_THREAD_X, sched_seq(s, &body));
  if (by) k = sched_for(s, by, nbatch, RX_LOOP_BLOCK_Z, k);
  k = sched_for(s, br, nrow, RX_LOOP_BLOCK_Y, k);
  return sched_for(s, bx, ncol, RX_LOOP_BLOCK_X, k);
}
