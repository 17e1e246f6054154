/* passes/schedule/matmul.c: the matmul rules GEMV and GEMM and their run-time variants on the
 * row count.
 *
 *   GEMV / GEMM    `for batch..., i, j { reduce k { init { C = v0 } update { C = C + P * Q } } }`
 *                  with C = c[batch..., i, j], P using i and k but not j, Q using k and j but not
 *                  i (P and Q may be casts of loads: f16 inputs with f32 accumulation); or the
 *                  same with the accumulator an `alloc acc: T[1] local` of the (i, j) body, the
 *                  reduce into acc[0] and then one store c[batch..., i, j] = E(acc[0]). A row
 *                  count (extent of i) statically 1 gives GEMV; a symbolic one gives variants
 *                  `n == 1` -> gemv, `n <= 16` -> small-tile gemm, otherwise gemm. */
#include "rules.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------------------------
 * matmul: GEMV and GEMM
 * ------------------------------------------------------------------------------------------ */
typedef struct mm_info {
  nest nt;                  /* batch..., i, j */
  red_info r;               /* the reduction */
  const rx_stmt *acc_alloc; /* form 2: the local accumulator's alloc, else NULL */
  const rx_stmt *epilogue;  /* form 2: the output store, else NULL */
  rx_tx *p, *q;             /* operands: P(i, k), Q(k, j) */
  bool p_first;             /* P is the left operand of the product */
  rx_dtype acc_dt;
} mm_info;

static bool mm_match(const rx_tensor_fn *f, mm_info *mi) {
  memset(mi, 0, sizeof *mi);
  if (sched_seq_len(f->body) != 1) return false;
  nest *nt = &mi->nt;
  sched_get_nest(sched_seq_at(f->body, 0), nt);
  if (nt->n < 2) return false;
  const rx_stmt *b = nt->body;
  const rx_stmt *red;
  if (sched_seq_len(b) == 1) {
    red = sched_seq_at(b, 0);
  } else if (sched_seq_len(b) == 3) {
    mi->acc_alloc = sched_seq_at(b, 0);
    red = sched_seq_at(b, 1);
    mi->epilogue = sched_seq_at(b, 2);
    if (mi->acc_alloc->kind != RX_STMT_ALLOC || mi->acc_alloc->buf->scope != RX_SCOPE_LOCAL ||
        mi->epilogue->kind != RX_STMT_STORE)
      return false;
  } else {
    return false;
  }
  if (!sched_red_parse(red, &mi->r) || mi->r.comb != RX_COMB_SUM || mi->r.nupd_lets ||
      mi->r.ninit_lets)
    return false;
  const rx_stmt *us = mi->r.upd_store;
  const rx_stmt *outst = mi->epilogue ? mi->epilogue : us;
  if (mi->epilogue && us->buf != mi->acc_alloc->buf) return false;
  if (outst->nidx != nt->n) return false;
  for (int k = 0; k < nt->n; k++)
    if (!sched_sym_is(outst->idx[k], nt->vars[k]) || !rx_expr_is_const(nt->lo[k], 0)) return false;
  if (mi->epilogue && sched_tx_uses(mi->epilogue->value, mi->r.k)) return false;
  mi->acc_dt = us->buf->dtype;
  rx_tx *x = mi->r.x;
  if (x->kind != RX_TX_BINARY || x->binop != RX_BINOP_MUL) return false;
  const rx_expr *i = nt->vars[nt->n - 2], *j = nt->vars[nt->n - 1], *k = mi->r.k;
  if (!rx_expr_is_const(mi->r.klo, 0)) return false;
  rx_tx *a = x->a, *c = x->b;
  bool a_is_p =
      sched_tx_uses(a, i) && !sched_tx_uses(a, j) && sched_tx_uses(c, j) && !sched_tx_uses(c, i);
  bool c_is_p =
      sched_tx_uses(c, i) && !sched_tx_uses(c, j) && sched_tx_uses(a, j) && !sched_tx_uses(a, i);
  if (!a_is_p && !c_is_p) return false;
  mi->p = a_is_p ? a : c;
  mi->q = a_is_p ? c : a;
  mi->p_first = a_is_p;
  if (!sched_tx_uses(mi->p, k) || !sched_tx_uses(mi->q, k)) return false;
  if (sched_tx_loads(mi->p, us->buf) || sched_tx_loads(mi->q, us->buf)) return false;
  if (mi->epilogue && (sched_tx_loads(mi->p, outst->buf) || sched_tx_loads(mi->q, outst->buf)))
    return false;
  return true;
}

/* Final value of the accumulator and the output store(s), for output point (batch, i, j) given
 * as the substitution rw, and the accumulated total. */
static void mm_epilogue(rx_sctx *s, mm_info *mi, rx_rewrite *rw, rx_tx *total, rx_stmtvec *out) {
  rx_tx *v0 = rx_sched_rewrite_tx(rw, mi->r.init_store->value);
  rx_tx *fin;
  if ((v0->kind == RX_TX_FLOAT && v0->fval == 0.0) || (v0->kind == RX_TX_INT && v0->ival == 0))
    fin = total;
  else {
    if (v0->dtype != mi->acc_dt || v0->weak) v0 = rx_tx_cast(s->m, mi->acc_dt, v0, s->loc);
    fin = mi->r.acc_first ? rx_tx_binary(s->m, RX_BINOP_ADD, v0, total, s->loc)
                          : rx_tx_binary(s->m, RX_BINOP_ADD, total, v0, s->loc);
  }
  rx_stmt *st = rx_sched_rewrite_stmt(rw, mi->r.init_store);
  st->value = fin;
  if (mi->epilogue) {
    RX_VEC_PUSH(out, rx_sched_rewrite_stmt(rw, mi->acc_alloc));
    RX_VEC_PUSH(out, st);
    RX_VEC_PUSH(out, rx_sched_rewrite_stmt(rw, mi->epilogue));
  } else {
    RX_VEC_PUSH(out, st);
  }
}

/* The kernel grid for the output: blockIdx.x over column groups, blockIdx.y over row groups,
 * blockIdx.z over the fused batch (when there is one). Fills the batch substitution. */
static rx_stmt *mm_grid(rx_sctx *s, mm_info *mi, const rx_expr *bx, const rx_expr *ncol,
                        const rx_expr *by, const rx_expr *nrow, const rx_expr *bz,
                        const rx_expr **batch_repl, rx_stmt *inner) {
  nest *nt = &mi->nt;
  int nb = nt->n - 2;
  rx_stmt *k = inner;
  if (nb > 0) {
    const rx_expr *nbatch =
        rx_analyzer_simplify(s->an, rx_sched_fuse(s, nt->ext, nb, bz, batch_repl));
    k = rx_sched_for(s, bz, nbatch, RX_LOOP_BLOCK_Z, k);
  }
  k = rx_sched_for(s, by, nrow, RX_LOOP_BLOCK_Y, k);
  return rx_sched_for(s, bx, ncol, RX_LOOP_BLOCK_X, k);
}

static rx_stmt *gemv_schedule(rx_sctx *s, mm_info *mi) {
  rx_expr_ctx *cx = s->cx;
  nest *nt = &mi->nt;
  int n = nt->n;
  int T = sched_block_threads(s, BLOCK_THREADS);
  int CB = T >= GEMV_COLUMNS ? GEMV_COLUMNS : T, KS = T / CB;
  const rx_expr *M = nt->ext[n - 1], *N = nt->ext[n - 2], *K = mi->r.kext;
  const rx_expr *bx = rx_sched_fresh_var(s, "bx"), *by = rx_sched_fresh_var(s, "by");
  const rx_expr *bz = n > 2 ? rx_sched_fresh_var(s, "bz") : NULL;
  const rx_expr *tx = rx_sched_fresh_var(s, "tx");
  const rx_expr *ncol;
  const rx_expr *jj = rx_expr_floormod(cx, tx, E(s, CB)), *ks = rx_expr_floordiv(cx, tx, E(s, CB));
  const rx_expr *jg = rx_sched_split(s, M, CB, bx, jj, &ncol);
  const rx_expr *j = ADD(s, MUL(s, bx, CB), jj);
  const rx_expr *vars[MAXN + 1], *rp[MAXN + 1];
  const rx_expr *brepl[MAXN];
  rx_stmtvec body = {0};
  rx_stmt *al;
  int64_t one[1] = {1}, rs[2] = {KS, CB};
  rx_buffer *red = rx_sched_alloc(s, "red_buf", mi->acc_dt, RX_SCOPE_SHARED, rs, 2, &al);
  RX_VEC_PUSH(&body, al);
  rx_buffer *part = rx_sched_alloc(s, "part", mi->acc_dt, RX_SCOPE_LOCAL, one, 1, &al);
  RX_VEC_PUSH(&body, al);
  const rx_expr *z = E(s, 0);
  rx_tx *zero;
  rx_sched_identity(s, RX_COMB_SUM, mi->acc_dt, &zero);
  RX_VEC_PUSH(&body, rx_sched_store_e(s, part, &z, 1, zero));
  const rx_expr *ko = rx_sched_fresh_var(s, "ko");
  const rx_expr *nk;
  const rx_expr *kg = rx_sched_split(s, K, KS, ko, ks, &nk);
  /* substitution: batch, i = by, j, k = ko * KS + ks */
  rx_stmt *grid_dummy = NULL;
  (void)grid_dummy;
  if (n > 2) rx_sched_fuse(s, nt->ext, n - 2, bz, brepl);
  for (int q = 0; q < n - 2; q++) {
    vars[q] = nt->vars[q];
    rp[q] = brepl[q];
  }
  vars[n - 2] = nt->vars[n - 2];
  rp[n - 2] = by;
  vars[n - 1] = nt->vars[n - 1];
  rp[n - 1] = j;
  vars[n] = mi->r.k;
  rp[n] = ADD(s, MUL(s, ko, KS), ks);
  rx_rewrite rw = {.s = s, .vars = vars, .repl = rp, .n = n + 1};
  rx_tx *x = rx_sched_rewrite_tx(&rw, mi->r.x);
  rx_tx *pl = rx_sched_load(s, part, &z, 1);
  rx_stmt *upd =
      rx_sched_store_e(s, part, &z, 1,
                       mi->r.acc_first ? rx_tx_binary(s->m, RX_BINOP_ADD, pl, x, s->loc)
                                       : rx_tx_binary(s->m, RX_BINOP_ADD, x, pl, s->loc));
  RX_VEC_PUSH(&body,
              rx_sched_for(s, ko, nk, RX_LOOP_SERIAL, rx_sched_guard(s, AND(s, kg, jg), upd)));
  const rx_expr *ri[2] = {ks, jj};
  RX_VEC_PUSH(&body, rx_sched_store_e(s, red, ri, 2, rx_sched_load(s, part, &z, 1)));
  RX_VEC_PUSH(&body, rx_sched_barrier(s));
  /* the first CB threads sum the KS partials of their column, in order */
  rx_tx *tot = NULL;
  for (int q = 0; q < KS; q++) {
    const rx_expr *ix[2] = {E(s, q), tx};
    rx_tx *l = rx_sched_load(s, red, ix, 2);
    tot = tot ? rx_tx_binary(s->m, RX_BINOP_ADD, tot, l, s->loc) : l;
  }
  rx_stmtvec fin = {0};
  rw.n = n; /* no k in the epilogue; j = bx*CB + tx there (tx < CB) */
  rp[n - 1] = ADD(s, MUL(s, bx, CB), tx);
  mm_epilogue(s, mi, &rw, tot, &fin);
  const rx_expr *jlim = sched_bound_guard(s, rp[n - 1], M);
  const rx_expr *c = AND(s, rx_expr_cmp(cx, RX_EXPR_LT, tx, E(s, CB)), jlim);
  RX_VEC_PUSH(&body, rx_sched_guard(s, c, rx_sched_seq(s, &fin)));
  rx_stmt *thr = rx_sched_for(s, tx, E(s, T), RX_LOOP_THREAD_X, rx_sched_seq(s, &body));
  return mm_grid(s, mi, bx, ncol, by, N, bz, brepl, thr);
}

typedef struct tile {
  int bm, bn, bk, tm, tn;
} tile;

static bool tile_fits(rx_sctx *s, mm_info *mi, tile t, int pbytes, int qbytes) {
  int T = (t.bm / t.tm) * (t.bn / t.tn);
  (void)mi;
  if (T > s->t->max_threads_per_block || T > s->t->max_block_dim[0]) return false;
  if ((t.bm * t.bk) % T || (t.bk * t.bn) % T) return false;
  int sh = t.bk * t.bm * pbytes + t.bk * t.bn * qbytes;
  return sh <= s->t->shared_bytes;
}

/* The expression cached in shared memory for an operand: the operand without an outer cast. */
static rx_tx *cache_core(rx_tx *e) { return e->kind == RX_TX_CAST ? e->a : e; }

/* What the parts of a GEMM schedule share: the tile, the block and thread variables, the
 * shared tiles and the accumulator. */
typedef struct gemm {
  rx_sctx *s;
  mm_info *mi;
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
static tile gemm_tile(rx_sctx *s, mm_info *mi, bool small, const rx_expr *M, const rx_expr *N,
                      int pb, int qb) {
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
  for (int c = 0; c < nc; c++) {
    if (!tile_fits(s, mi, cands[c], pb, qb)) continue;
    /* prefer tiles the analyzer proves exact on M and N */
    int64_t dm = rx_analyzer_divisor(s->an, M), dn = rx_analyzer_divisor(s->an, N);
    int score = (dm == 0 || dm % cands[c].bn == 0) + (dn == 0 || dn % cands[c].bm == 0);
    if (best < 0 || score > best) {
      best = score;
      t = cands[c];
    }
    if (score == 2) break;
  }
  return t;
}

/* The cooperative loads of the P and Q tiles into shared memory: consecutive threads load
 * consecutive k (P) or j (Q); zero outside the matrix. */
static void gemm_loads(gemm *gm, rx_stmtvec *kb) {
  rx_sctx *s = gm->s;
  rx_expr_ctx *cx = s->cx;
  mm_info *mi = gm->mi;
  nest *nt = &mi->nt;
  int n = nt->n;
  tile t = gm->t;
  int T = gm->T;
  const rx_expr *tx = gm->tx, *ko = gm->ko, *bx = gm->bx, *by = gm->by, *K = gm->K, *N = gm->N,
                *M = gm->M;
  const rx_expr *i_var = nt->vars[n - 2], *j_var = nt->vars[n - 1], *k_var = mi->r.k;
  const rx_expr *const *brepl = gm->brepl;
  rx_tx *pc = gm->pc, *qc = gm->qc;
  rx_buffer *As = gm->As, *Bs = gm->Bs;
  for (int which = 0; which < 2; which++) {
    int rows = which == 0 ? t.bm : t.bn; /* extent of the tile along i or j */
    int per = t.bk * rows / T;
    const rx_expr *l = rx_sched_fresh_var(s, which == 0 ? "la" : "lb");
    const rx_expr *e = ADD(s, MUL(s, l, T), tx);
    const rx_expr *kk, *rr;
    if (which == 0) {
      kk = rx_expr_floormod(cx, e, E(s, t.bk));
      rr = rx_expr_floordiv(cx, e, E(s, t.bk));
    } else {
      rr = rx_expr_floormod(cx, e, E(s, t.bn));
      kk = rx_expr_floordiv(cx, e, E(s, t.bn));
    }
    const rx_expr *gk = ADD(s, MUL(s, ko, t.bk), kk);
    const rx_expr *gr = ADD(s, MUL(s, which == 0 ? by : bx, which == 0 ? t.bm : t.bn), rr);
    size_t m2 = rx_analyzer_mark(s->an);
    rx_analyzer_bind_range(s->an, l, E(s, 0), E(s, per));
    const rx_expr *g =
        AND(s, sched_bound_guard(s, gk, K), sched_bound_guard(s, gr, which == 0 ? N : M));
    rx_analyzer_reset(s->an, m2);
    const rx_expr *vars[MAXN + 1], *rp[MAXN + 1];
    int nv = 0;
    for (int q = 0; q < n - 2; q++) {
      vars[nv] = nt->vars[q];
      rp[nv++] = brepl[q];
    }
    vars[nv] = which == 0 ? i_var : j_var;
    rp[nv++] = gr;
    vars[nv] = k_var;
    rp[nv++] = gk;
    rx_rewrite rw = {.s = s, .vars = vars, .repl = rp, .n = nv};
    rx_tx *v = rx_sched_rewrite_tx(&rw, which == 0 ? pc : qc);
    if (g) {
      rx_tx *zz = rx_dtype_is_float(v->dtype) ? rx_tx_float(s->m, 0.0, v->dtype, false, s->loc)
                                              : rx_tx_int(s->m, 0, v->dtype, false, s->loc);
      v = rx_tx_select(s->m, rx_sched_cond(s, g), v, zz, s->loc);
    }
    const rx_expr *ix[2] = {kk, rr};
    rx_stmt *st = rx_sched_store_e(s, which == 0 ? As : Bs, ix, 2, v);
    RX_VEC_PUSH(kb, rx_sched_for(s, l, E(s, per), RX_LOOP_UNROLL, st));
  }
}

/* The micro-tile: thread (ty, tx2) accumulates rows ty * tm + ua and columns tx2 * tn + ub
 * over the k tile, from the shared tiles. */
static rx_stmt *gemm_micro_tile(gemm *gm) {
  rx_sctx *s = gm->s;
  mm_info *mi = gm->mi;
  tile t = gm->t;
  const rx_expr *ty = gm->ty, *tx2 = gm->tx2, *ua = gm->ua, *ub = gm->ub;
  rx_buffer *As = gm->As, *Bs = gm->Bs, *acc = gm->acc;
  const rx_expr *kk = rx_sched_fresh_var(s, "kk");
  const rx_expr *ai[2] = {kk, ADD(s, MUL(s, ty, t.tm), ua)};
  const rx_expr *bi[2] = {kk, ADD(s, MUL(s, tx2, t.tn), ub)};
  rx_tx *pa = rx_sched_load(s, As, ai, 2), *qa = rx_sched_load(s, Bs, bi, 2);
  if (mi->p->kind == RX_TX_CAST) pa = rx_tx_cast(s->m, mi->p->dtype, pa, s->loc);
  if (mi->q->kind == RX_TX_CAST) qa = rx_tx_cast(s->m, mi->q->dtype, qa, s->loc);
  rx_tx *prod = mi->p_first ? rx_tx_binary(s->m, RX_BINOP_MUL, pa, qa, s->loc)
                            : rx_tx_binary(s->m, RX_BINOP_MUL, qa, pa, s->loc);
  const rx_expr *ci[2] = {ua, ub};
  rx_tx *cur = rx_sched_load(s, acc, ci, 2);
  rx_tx *sum = mi->r.acc_first ? rx_tx_binary(s->m, RX_BINOP_ADD, cur, prod, s->loc)
                               : rx_tx_binary(s->m, RX_BINOP_ADD, prod, cur, s->loc);
  rx_stmt *st = rx_sched_store_e(s, acc, ci, 2, sum);
  rx_stmt *lp = rx_sched_for(s, ua, E(s, t.tm), RX_LOOP_UNROLL,
                             rx_sched_for(s, ub, E(s, t.tn), RX_LOOP_UNROLL, st));
  return rx_sched_for(s, kk, E(s, t.bk), RX_LOOP_SERIAL, lp);
}

/* The epilogue: the micro-tile's stores (with the matmul's epilogue), guarded at the edges. */
static rx_stmt *gemm_epilogue(gemm *gm) {
  rx_sctx *s = gm->s;
  mm_info *mi = gm->mi;
  nest *nt = &mi->nt;
  int n = nt->n;
  tile t = gm->t;
  const rx_expr *bx = gm->bx, *by = gm->by, *ty = gm->ty, *tx2 = gm->tx2, *ua = gm->ua,
                *ub = gm->ub;
  const rx_expr *N = gm->N, *M = gm->M, *i_var = nt->vars[n - 2], *j_var = nt->vars[n - 1];
  const rx_expr *const *brepl = gm->brepl;
  rx_buffer *acc = gm->acc;
  const rx_expr *gi = ADD(s, ADD(s, MUL(s, by, t.bm), MUL(s, ty, t.tm)), ua);
  const rx_expr *gj = ADD(s, ADD(s, MUL(s, bx, t.bn), MUL(s, tx2, t.tn)), ub);
  size_t m2 = rx_analyzer_mark(s->an);
  rx_analyzer_bind_range(s->an, ua, E(s, 0), E(s, t.tm));
  rx_analyzer_bind_range(s->an, ub, E(s, 0), E(s, t.tn));
  const rx_expr *g = AND(s, sched_bound_guard(s, gi, N), sched_bound_guard(s, gj, M));
  rx_analyzer_reset(s->an, m2);
  const rx_expr *vars[MAXN], *rp[MAXN];
  for (int q = 0; q < n - 2; q++) {
    vars[q] = nt->vars[q];
    rp[q] = brepl[q];
  }
  vars[n - 2] = i_var;
  rp[n - 2] = gi;
  vars[n - 1] = j_var;
  rp[n - 1] = gj;
  rx_rewrite rw = {.s = s, .vars = vars, .repl = rp, .n = n};
  const rx_expr *ci[2] = {ua, ub};
  rx_stmtvec fin = {0};
  mm_epilogue(s, mi, &rw, rx_sched_load(s, acc, ci, 2), &fin);
  rx_stmt *st = rx_sched_guard(s, g, rx_sched_seq(s, &fin));
  return rx_sched_for(s, ua, E(s, t.tm), RX_LOOP_UNROLL,
                      rx_sched_for(s, ub, E(s, t.tn), RX_LOOP_UNROLL, st));
}

/* GEMM tiled in shared memory (P and Q tiles per k step) and in registers (a micro-tile per
 * thread): tile choice, cooperative loads, micro-tile, epilogue. */
static rx_stmt *gemm_schedule(rx_sctx *s, mm_info *mi, bool small) {
  rx_expr_ctx *cx = s->cx;
  nest *nt = &mi->nt;
  int n = nt->n;
  gemm gm = {.s = s, .mi = mi};
  gm.M = nt->ext[n - 1];
  gm.N = nt->ext[n - 2];
  gm.K = mi->r.kext;
  gm.pc = cache_core(mi->p);
  gm.qc = cache_core(mi->q);
  int pb = rx_dtype_bits(gm.pc->dtype) / 8, qb = rx_dtype_bits(gm.qc->dtype) / 8;
  if (pb < 1) pb = 1;
  if (qb < 1) qb = 1;
  tile t = gm.t = gemm_tile(s, mi, small, gm.M, gm.N, pb, qb);
  gm.TX = t.bn / t.tn;
  gm.T = (t.bm / t.tm) * gm.TX;
  gm.bx = rx_sched_fresh_var(s, "bx");
  gm.by = rx_sched_fresh_var(s, "by");
  const rx_expr *bz = n > 2 ? rx_sched_fresh_var(s, "bz") : NULL;
  gm.tx = rx_sched_fresh_var(s, "tx");
  const rx_expr *ncol, *nrow, *nk;
  gm.ko = rx_sched_fresh_var(s, "ko");
  if (n > 2) rx_sched_fuse(s, nt->ext, n - 2, bz, gm.brepl);
  rx_sched_split(s, gm.M, t.bn, gm.bx, E(s, 0), &ncol);
  rx_sched_split(s, gm.N, t.bm, gm.by, E(s, 0), &nrow);
  rx_sched_split(s, gm.K, t.bk, gm.ko, E(s, 0), &nk);
  size_t mk = rx_analyzer_mark(s->an);
  rx_analyzer_bind_range(s->an, gm.bx, E(s, 0), ncol);
  rx_analyzer_bind_range(s->an, gm.by, E(s, 0), nrow);
  rx_analyzer_bind_range(s->an, gm.tx, E(s, 0), E(s, gm.T));
  rx_analyzer_bind_range(s->an, gm.ko, E(s, 0), nk);
  rx_stmtvec body = {0};
  rx_stmt *al;
  int64_t as_shape[2] = {t.bk, t.bm}, bs_shape[2] = {t.bk, t.bn}, acc_shape[2] = {t.tm, t.tn};
  gm.As = rx_sched_alloc(s, "a_tile", gm.pc->dtype, RX_SCOPE_SHARED, as_shape, 2, &al);
  RX_VEC_PUSH(&body, al);
  gm.Bs = rx_sched_alloc(s, "b_tile", gm.qc->dtype, RX_SCOPE_SHARED, bs_shape, 2, &al);
  RX_VEC_PUSH(&body, al);
  gm.acc = rx_sched_alloc(s, "acc_tile", mi->acc_dt, RX_SCOPE_LOCAL, acc_shape, 2, &al);
  RX_VEC_PUSH(&body, al);
  rx_tx *zero;
  rx_sched_identity(s, RX_COMB_SUM, mi->acc_dt, &zero);
  gm.ua = rx_sched_fresh_var(s, "ua");
  gm.ub = rx_sched_fresh_var(s, "ub");
  {
    const rx_expr *ix[2] = {gm.ua, gm.ub};
    rx_stmt *st = rx_sched_store_e(s, gm.acc, ix, 2, zero);
    RX_VEC_PUSH(&body, rx_sched_for(s, gm.ua, E(s, t.tm), RX_LOOP_UNROLL,
                                    rx_sched_for(s, gm.ub, E(s, t.tn), RX_LOOP_UNROLL, st)));
  }
  rx_stmtvec kb = {0};
  gemm_loads(&gm, &kb);
  RX_VEC_PUSH(&kb, rx_sched_barrier(s));
  gm.ty = rx_expr_floordiv(cx, gm.tx, E(s, gm.TX));
  gm.tx2 = rx_expr_floormod(cx, gm.tx, E(s, gm.TX));
  RX_VEC_PUSH(&kb, gemm_micro_tile(&gm));
  RX_VEC_PUSH(&kb, rx_sched_barrier(s));
  RX_VEC_PUSH(&body, rx_sched_for(s, gm.ko, nk, RX_LOOP_SERIAL, rx_sched_seq(s, &kb)));
  RX_VEC_PUSH(&body, gemm_epilogue(&gm));
  rx_analyzer_reset(s->an, mk);
  rx_stmt *thr = rx_sched_for(s, gm.tx, E(s, gm.T), RX_LOOP_THREAD_X, rx_sched_seq(s, &body));
  return mm_grid(s, mi, gm.bx, ncol, gm.by, nrow, bz, gm.brepl, thr);
}

/* GEMV when the row count is 1, GEMM (small tiles up to 16 rows) when it is constant, else the
 * variants n == 1 -> gemv, n <= 16 -> small-tile gemm, otherwise gemm, chosen at run time. */
bool sched_matmul(rx_sctx *s, const rx_tensor_fn *f, sched_out *o) {
  mm_info mi;
  if (!mm_match(f, &mi)) return false;
  rx_module *m = o->m;
  const rx_expr *rows = mi.nt.ext[mi.nt.n - 2];
  if (rx_expr_is_const(rows, 1)) {
    o->body = gemv_schedule(s, &mi);
    rx_sched_variant v = {NULL, RX_SCHED_GEMV, NULL};
    sched_set_variants(m, o->res, &v, 1);
  } else if (rows->kind == RX_EXPR_CONST) {
    o->body = gemm_schedule(s, &mi, rows->value <= SMALL_ROWS);
    rx_sched_variant v = {NULL, RX_SCHED_GEMM, NULL};
    sched_set_variants(m, o->res, &v, 1);
  } else {
    const rx_expr *c1 = rx_expr_cmp(s->cx, RX_EXPR_EQ, rows, E(s, 1));
    const rx_expr *c2 = rx_expr_cmp(s->cx, RX_EXPR_LE, rows, E(s, SMALL_ROWS));
    size_t mk = rx_analyzer_mark(s->an);
    rx_analyzer_assume(s->an, c1);
    rx_stmt *k1 = gemv_schedule(s, &mi);
    rx_analyzer_reset(s->an, mk);
    rx_analyzer_assume(s->an, c2);
    rx_stmt *k2 = gemm_schedule(s, &mi, true);
    rx_analyzer_reset(s->an, mk);
    rx_stmt *k3 = gemm_schedule(s, &mi, false);
    rx_stmt *inner = rx_sched_if(s, rx_sched_cond(s, c2), k2, k3);
    o->body = rx_sched_if(s, rx_sched_cond(s, c1), k1, inner);
    rx_sched_variant v[3] = {{c1, RX_SCHED_GEMV, "gemv"},
                             {c2, RX_SCHED_GEMM, "gemm_small"},
                             {NULL, RX_SCHED_GEMM, "gemm"}};
    sched_set_variants(m, o->res, v, 3);
  }
  return true;
}
