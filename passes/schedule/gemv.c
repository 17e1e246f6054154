/* passes/schedule/gemv.c: the GEMV kernels of the matmul rule (matmul.h), for one row and for
 * low batch (up to SMALL_ROWS rows).
 *
 *   gemv_rows   Q contiguous along k (x @ W^T: Hugging Face's [out, in] weights). A group of G
 *               threads (one subgroup: a warp, a SIMD group) computes R output columns for all
 *               the rows: at each step its lanes read consecutive 8-element vectors of the R
 *               weight rows (`vectorize` loops whose index is base + v, base a multiple of 8:
 *               16-byte loads of f16, passes/schedule.h), keep them in registers, and multiply
 *               them with the same k of every row of P, so each weight element is read once
 *               for all rows. The partial sums are reduced by subgroup shuffles, and each lane
 *               of the group writes one output point (the epilogue: bias, residual, gate...).
 *               Grids too small for the GPU get smaller blocks, then k split over a block
 *               (every subgroup of the block on one column, combined through shared memory).
 *               Targets without subgroup arithmetic (generic Vulkan) reduce over the whole
 *               block with a shared-memory tree, one row only. Targets with subgroups narrower
 *               than 32 (lavapipe, Mali) take groups of one thread for several rows: each
 *               thread reads its columns' weight rows alone and keeps their sums, for any row
 *               count, in passes of GEMV_ROW_CHUNK rows (a serial loop around the k loop).
 *               Extra reductions (matmul.h, mm_extra: rms_norm_matmul) stage the block's rows
 *               of P in shared memory once, a slice of k at a time (stage_plan): the threads
 *               read the f32 row x and the norm weight coalesced (consecutive threads,
 *               consecutive 16-byte vectors), store T(x * nw) and add x^2 to their row terms'
 *               sums; after a barrier the groups' k loop reads the staged row 16 bytes a lane,
 *               as the plain f16 GEMV reads x, a second weight's vectors beside the first (a
 *               group then computes one column per row: the two weights' rows share each P
 *               vector); a barrier frees the slice. The row terms are reduced over the block
 *               once per row after the last slice. Past SMALL_ROWS rows, or without subgroup
 *               arithmetic, the form goes in passes of rows, so it never needs another
 *               schedule.
 *   gemv_cols   Q contiguous along j (x @ W: [in, out] weights), one row: consecutive threads
 *               read consecutive columns (coalesced), k split over the block's thread rows,
 *               combined through shared memory. A checkpoint's int32 words (mm_q_words: AWQ,
 *               GPTQ) take 64 columns a block, so that the block reads whole 32-byte sectors of
 *               AWQ's words and zeros (8 words: 64 columns), and each load of the element is
 *               read once by the whole warp before the product (cols_hoist). */
#include "matmul.h"

#include <string.h>

/* ---- tuning constants, named once with their reason ---- */
/* The widest vector along k: 8 lanes, 16 bytes of f16 (one 128-bit load per lane step, the
 * vector_bytes of every target in targets/targets.c). */
#define GEMV_LANES 8
/* The most loads of a weight operand a step reads once for all its lanes (rows_step): a scale
 * and a zero point for each of a gated pair's two weights; a staged Q4_K sub-block's d, dmin
 * and three scale bytes (7 bytes) for each of the two. */
#define GEMV_STEP_LETS 16
/* A grid with fewer blocks than this leaves SMs idle: two blocks for each of the 132 SMs of an
 * H100 SXM, the largest GPU the targets describe (targets.c lists no SM counts). */
#define GEMV_MIN_BLOCKS 264
/* gemv_rows halves its block down to this many threads before it splits k over a block: two
 * warps of 32, so the 32 resident blocks an SM takes (sm_80, sm_90) still fill its 2048 threads,
 * the memory parallelism a bandwidth-bound kernel needs. */
#define GEMV_MIN_THREADS 64
/* With several rows each group computes 2 columns: the activation vector loaded for a row serves
 * both weight rows, halving the activation's traffic from L1 at 16 rows (2 x 16 accumulators in
 * registers). */
#define GEMV_BATCH_COLS 2
/* The widest loop the printers vectorize (codegen/cprinter.c, pfor_vector): a packed weight's
 * step of 32 int4 weights multiplies P in two such loops. */
#define GEMV_VEC_LANES 16
/* The k loop is unrolled by 4 steps: 4 independent 16-byte weight loads in flight per thread. */
#define GEMV_UNROLL 4
/* The most shared memory the staged row of the extra-reduction form takes (rows x a slice of k):
 * 16 KiB leaves 8 blocks of 256 threads (2048 threads, an SM's full) their shared memory on
 * sm_80 (164 KiB), and fits Vulkan's guaranteed minimum (16 KiB) and Metal's 32 KiB with room
 * for the reductions' buffers. */
#define GEMV_STAGE_BYTES 16384

/* ------------------------------------------------------------------------------------------
 * gemv_rows
 * ------------------------------------------------------------------------------------------ */
typedef struct rows_plan {
  int T;       /* threads per block */
  int G;       /* threads per group: the subgroup size, or T (k split over the block) */
  int R;       /* output columns per group */
  int V;       /* vector lanes along k */
  int NB;      /* rows of P per pass over k: all of them, or GEMV_ROW_CHUNK (thread groups) */
  bool chunks; /* the rows in passes of NB (a serial loop around the k loop) */
  /* A short k folded (fold_lanes): each group's G lanes as F slots of GK = G / F lanes, each slot
   * its own column (k steps of GK * V); F = 1, GK = G otherwise. */
  int F, GK;
} rows_plan;

static bool subgroups(const rx_sctx *s, int threads) {
  int sg = s->t->subgroup_size;
  return sg > 1 && s->t->subgroup_arithmetic && threads % sg == 0;
}

/* Blocks of the grid for plan p, or -1 when M or a batch extent is symbolic. */
static int64_t plan_blocks(const mm_info *mi, const rows_plan *p) {
  int64_t n = 1;
  for (int q = 0; q < mi->nb; q++) {
    if (mi->nt.ext[q]->kind != RX_EXPR_CONST) return -1;
    n *= mi->nt.ext[q]->value;
  }
  if (mi->M->kind != RX_EXPR_CONST) return -1;
  int64_t per = (int64_t)(p->T / p->G) * p->R * p->F;
  return n * ((mi->M->value + per - 1) / per);
}

/* The narrowest subgroup whose lanes share a column in the multi-row form (rows > 1). On lavapipe
 * (subgroups of 8) the subgroup reductions of 2 x rows accumulators per lane gave wrong sums in
 * about a quarter of the runs of tests/kernels/gemv_hf.rx (batched_hf, n = 7) when llvmpipe ran
 * workgroups on more than one thread, and never with LP_NUM_THREADS=0 or 1; the cause is not
 * found (the kernel's accesses are disjoint per workgroup). Narrower subgroups (lavapipe's 8,
 * Mali's 16) take groups of one thread instead (plan_rows): each thread owns its columns and
 * reads their whole weight rows alone, 16 bytes a step, with no cross-lane reduction at all. On
 * lavapipe a thread is one SIMD lane of a CPU core, so the lanes' rows are 8 streams the core's
 * prefetchers follow, and the reduction over k stays in registers. */
#define GEMV_ROWS_MIN_SUBGROUP 32

/* With groups of one thread, the rows of P in one pass over k (the passes are a serial loop):
 * lavapipe runs a guarded row (`if (i < n)`, a row past a symbolic count) with its lanes masked
 * off, not skipped, so every row of a pass costs its multiply-adds; passes of 4 rows waste at most
 * 3 (b = 7 cost 16 rows in one pass of a bound of 16), and a pass's weights are re-read from the
 * core's cache (a block's columns: 64 threads x 2 rows x K of f16 is 32 KiB at K = 128). */
#define GEMV_ROW_CHUNK 4

/* Whether the multi-row form on s->t puts each group of columns on one thread (see above). */
static bool thread_groups(const rx_sctx *s, int rows) {
  int sg = s->t->subgroup_size;
  return rows != 1 && sg > 0 && sg < GEMV_ROWS_MIN_SUBGROUP;
}

/* A gathered weight's rows (moe_gemv: mm_info.nhoist) with a constant K shorter than a group's
 * step (G * V: 32 lanes x 32 k of a packed int4 weight) leave lanes idle, and each warp's request
 * for a row's scales (K / 32 of them) fills part of a 32-byte sector. Folded, a group computes
 * F = G / GK columns, GK lanes each (GK * V >= K): one request then reads consecutive rows'
 * bytes and scales (an expert's rows are contiguous), whole sectors. One row, one column a
 * slot; groups of a subgroup only. */
static void fold_lanes(const mm_info *mi, rows_plan *p) {
  if (!mi->nhoist || p->R != 1 || p->NB != 1 || p->chunks || p->G < 2 ||
      mi->K->kind != RX_EXPR_CONST)
    return;
  int64_t need = (mi->K->value + p->V - 1) / p->V, gk = 1;
  while (gk < need) gk *= 2;
  if (gk >= p->G) return;
  p->GK = (int)gk;
  p->F = p->G / p->GK;
}

static rows_plan plan_rows(rx_sctx *s, const mm_info *mi, int rows, const mm_packed *pk,
                           const mm_blocks *bk) {
  int tmax = sched_block_threads(s, BLOCK_THREADS);
  int V = pk->n ? pk->lanes : bk->n ? bk->V : mm_vector_lanes(s, mi, GEMV_LANES);
  rows_plan p = {.T = tmax, .G = tmax, .R = 1, .V = V, .NB = rows, .F = 1, .GK = tmax};
  bool one = thread_groups(s, rows);
  if (!one && !subgroups(s, tmax)) { /* the block reduces each column: one row per pass */
    p.NB = 1;
    p.chunks = rows != 1;
    return p;
  }
  int sg = one ? 1 : s->t->subgroup_size;
  p.G = sg;
  if (one && (rows == 0 || rows > GEMV_ROW_CHUNK)) p.NB = GEMV_ROW_CHUNK;
  p.chunks = one;
  if (!one && (rows == 0 || rows > SMALL_ROWS)) { /* extra reductions: any row count */
    p.NB = SMALL_ROWS;
    p.chunks = true;
  }
  bool two = false; /* a second weight (gate and up): its rows already share each P vector */
  for (int t = 0; t < mi->nx; t++) two |= mi->x[t].q != NULL;
  p.R = rows > 1 && !two && !bk->n ? GEMV_BATCH_COLS : 1; /* block rows: one a slot */
  p.GK = p.G;
  fold_lanes(mi, &p);
  int tmin = GEMV_MIN_THREADS > sg ? GEMV_MIN_THREADS : sg;
  while (p.T > tmin && plan_blocks(mi, &p) >= 0 && plan_blocks(mi, &p) < GEMV_MIN_BLOCKS) p.T /= 2;
  bool long_k = mi->K->kind == RX_EXPR_CONST && mi->K->value >= (int64_t)tmax * p.V;
  int64_t nb = plan_blocks(mi, &p);
  if (nb >= 0 && nb < GEMV_MIN_BLOCKS && rows == 1 && long_k && sched_use_subgroups(s, tmax)) {
    p.T = tmax; /* split k: the block's subgroups on one column */
    p.G = tmax;
    p.F = 1;
    p.GK = tmax;
  }
  return p;
}

/* With groups of one thread, the most rows the multi-row form takes: passes of GEMV_ROW_CHUNK
 * rows re-read a block's weights n / 4 times, which a decode batch pays back (18x over the tiled
 * gemm on lavapipe at 4 rows) but a prefill of hundreds of rows does not: those keep the gemm. */
#define GEMV_ROWS_MAX_PASSES 64

bool gemv_rows_fits(const rx_sctx *s, const mm_info *mi, int rows) {
  if (mi->nx) return mi->q_along_k; /* the one schedule of extra reductions: passes of rows */
  if (thread_groups(s, rows)) {     /* a bound up to the limit, or facts that bound n to it */
    rx_expr_ctx *cx = s->cx;
    const rx_expr *le =
        sym_expr_cmp(cx, RX_EXPR_LE, mi->N, sym_expr_const(cx, GEMV_ROWS_MAX_PASSES));
    return (rows > 0 && rows <= GEMV_ROWS_MAX_PASSES) || sym_analyzer_prove(s->an, le) == RX_TRUE;
  }
  return rows >= 1 && rows <= SMALL_ROWS &&
         (rows == 1 || subgroups(s, sched_block_threads(s, BLOCK_THREADS)));
}

/* What the parts of a gemv_rows kernel share. */
typedef struct rows_k {
  rx_sctx *s;
  const mm_info *mi;
  rows_plan p;
  const rx_expr *tx, *l;      /* the thread, its lane in the group (in its slot when folded) */
  const rx_expr *slot;        /* the folded group's slot (plan F), else 0 */
  const rx_expr *col0;        /* the group's first column */
  const rx_expr *row0;        /* the pass's first row (p.chunks), else 0 */
  const rx_expr *brepl[MAXN]; /* the batch loop variables as functions of the batch block */
  rx_buffer *acc, *wv;        /* accumulators [A], the weight vectors [R, V] */
  /* Accumulators of each reduction (0 the main one, 1 + t extra t), from off[t]: NB * R of
   * them (row ii, column r at ii * R + r), or NB for a row term (row ii at ii). */
  int off[1 + MM_MAX_EXTRA], A;
  rx_buffer *wvx[MM_MAX_EXTRA]; /* the extras' weight vectors [R, V] (row terms: none) */
  mm_packed pk;                 /* Q's packed weight bytes (gemv_packed.c), staged in pkb */
  rx_buffer *pkb[MM_MAX_PACKED];
  mm_blocks bk;       /* Q's GGUF block rows (gemv_blocks.c), staged in bs.sh a step */
  mm_blocks_stage bs; /* bs.k0: in rows_kloop_blocks, the staged steps' first k */
  int BU;             /* steps staged at once (the k loop's unroll) */
  /* The staged row (extra reductions, stage_plan): P's value sp (P itself, or the f16/bf16 value
   * under P's cast) for the pass's NB rows and a slice of KC k, in shared xs [NB, KC], written VS
   * lanes a thread; the row terms' sums in rt [nx * NB] (extra t's row ii at t * NB + ii), each
   * thread's part of the slices it staged, then the block's total. */
  bool stage;
  const rx_tx *sp;
  int KC, VS;
  rx_buffer *xs, *rt;
  const rx_expr *kl; /* in rows_step: the step's start within the slice (staged), else NULL */
} rows_k;

/* e (an operand) at row i, column j, reduction index k. */
static rx_tx *operand_at(rows_k *c, const rx_tx *e, const rx_expr *i, const rx_expr *j,
                         const rx_expr *k) {
  return mm_operand_at(c->s, c->mi, c->brepl, e, i, j, k);
}

static rx_tx *bin(rx_sctx *s, rx_binop op, rx_tx *a, rx_tx *b) {
  return ir_tx_binary(s->m, op, a, b, s->loc);
}

/* The loads of a weight operand that stay the same over a step's lanes (a quantized weight's
 * scale and zero point: one per 32 k of relaxc's int4, one per GGUF block), read once into lets
 * before the step's vector loop instead of once per lane: each scale byte is asked for once
 * (test_moe_bytes counts requests). */
typedef struct step_lets {
  rx_sctx *s;
  const rx_expr *v;
  const rx_buffer *staged; /* the staged block rows (gemv_blocks.c): shared, read once too */
  const rx_tx *ld[GEMV_STEP_LETS];
  rx_local *loc[GEMV_STEP_LETS];
  int n;
  rx_stmtvec *out;
} step_lets;

static rx_tx *step_let(rx_rewrite *rw, rx_tx *l) {
  step_lets *sl = rw->ud;
  rx_sctx *s = sl->s;
  if (l->buf->scope == RX_SCOPE_LOCAL || (l->buf->scope == RX_SCOPE_SHARED && l->buf != sl->staged))
    return l;
  rx_tx **idx = ir_module_alloc(s->m, sizeof *idx * (size_t)(l->nidx ? l->nidx : 1));
  for (int i = 0; i < l->nidx; i++) {
    rx_tx *x = l->idx[i];
    if (x->kind == RX_TX_SYM) {
      const rx_expr *e = sym_analyzer_simplify(s->an, x->sym);
      if (sym_expr_uses_var(e, sl->v)) return l;
      x = ir_tx_sym(s->m, e, x->loc);
      x->dtype = l->idx[i]->dtype;
    } else if (sched_tx_uses(x, sl->v)) {
      return l;
    }
    idx[i] = x;
  }
  l = ir_tx_load(s->m, l->buf, idx, l->nidx, l->loc);
  for (int i = 0; i < sl->n; i++)
    if (mm_same_tx(sl->ld[i], l)) return ir_tx_local(s->m, sl->loc[i], s->loc);
  if (sl->n == GEMV_STEP_LETS) return l;
  rx_local *lv = sched_local(s, "ws", l->dtype);
  RX_VEC_PUSH(sl->out, sched_let(s, lv, l));
  sl->ld[sl->n] = l;
  sl->loc[sl->n++] = lv;
  return ir_tx_local(s->m, lv, s->loc);
}

/* One step of k at kb: the R weight vectors into wv, then every row's vector of P times them. */
static rx_stmt *rows_step(rows_k *c, const rx_expr *kb) {
  rx_sctx *s = c->s;
  const mm_info *mi = c->mi;
  rows_plan p = c->p;
  const rx_expr *v = p.V > 1 ? sched_fresh_var(s, "v") : sx_const(s->cx, 0),
                *kv = sx_add(s->cx, kb, v);
  rx_stmtvec st = {0};
  for (int r = 0; r < p.R; r++) {
    const rx_expr *j = sx_add(s->cx, c->col0, sx_const(s->cx, r)), *wi[2] = {sx_const(s->cx, r), v};
    rx_stmt *stage = NULL;
    const rx_tx *qs[1 + MM_MAX_EXTRA] = {mi->q};
    rx_buffer *dst[1 + MM_MAX_EXTRA] = {c->wv};
    rx_tx *q[1 + MM_MAX_EXTRA];
    int nq = 1;
    for (int t = 0; t < mi->nx; t++)
      if (mi->x[t].q) {
        dst[nq] = c->wvx[t];
        qs[nq++] = mi->x[t].q;
      }
    if (c->pk.n) {
      stage =
          mm_packed_stage(s, mi, &c->pk, c->pkb, MM_PACKED_BYTES, c->brepl, j, kb, v, nq, qs, q);
    } else {
      for (int t = 0; t < nq; t++) {
        q[t] = operand_at(c, qs[t], sx_const(s->cx, 0), j, kv);
        if (c->bk.n) q[t] = mm_blocks_rewrite(s, mi, &c->bs, j, c->slot, kv, q[t]);
      }
    }
    rx_stmtvec lds = {0}, both = {0};
    if (stage) RX_VEC_PUSH(&both, stage);
    if (p.V > 1) { /* the step's invariant loads of Q as lets before its vector loop */
      size_t mk = sym_analyzer_mark(s->an);
      sym_analyzer_bind_range(s->an, v, sx_const(s->cx, 0), sx_const(s->cx, p.V));
      step_lets sl = {.s = s, .v = v, .staged = c->bk.n ? c->bs.sh : NULL, .n = 0, .out = &both};
      rx_rewrite rw = {.s = s, .n = 0, .hook = step_let, .ud = &sl};
      for (int t = 0; t < nq; t++) q[t] = sched_rewrite_tx(&rw, q[t]);
      sym_analyzer_reset(s->an, mk);
    }
    for (int t = 0; t < nq; t++) RX_VEC_PUSH(&lds, sched_store_e(s, dst[t], wi, 2, q[t]));
    rx_stmt *ld = sched_seq(s, &lds);
    if (p.V > 1) ld = sched_for(s, v, sx_const(s->cx, p.V), RX_LOOP_VECTORIZE, ld);
    if (both.len) {
      RX_VEC_PUSH(&both, ld);
      ld = sched_seq(s, &both);
    }
    RX_VEC_PUSH(&st, sched_guard(s, sched_bound_guard(s, j, mi->M), ld));
  }
  /* P's lanes: vectorized loops of at most GEMV_VEC_LANES, unrolled above that (packed steps) */
  const rx_expr *ii = sched_fresh_var(s, "ii"), *vi = v, *vo = NULL, *lv = v;
  if (p.V > GEMV_VEC_LANES) {
    vo = sched_fresh_var(s, "vo");
    vi = sched_fresh_var(s, "v");
    lv = sx_add(s->cx, sx_mul_c(s->cx, vo, GEMV_VEC_LANES), vi);
  }
  rx_local *xv = sched_local(s, "xv", mi->p->dtype);
  rx_stmtvec lane = {0};
  rx_tx *pv;
  if (c->kl) { /* the staged row: P's value from shared memory, under P's cast */
    const rx_expr *xi[2] = {ii, sx_add(s->cx, c->kl, lv)};
    pv = sched_load(s, c->xs, xi, 2);
    if (c->sp != mi->p) pv = ir_tx_cast(s->m, mi->p->dtype, pv, s->loc);
  } else {
    pv = operand_at(c, mi->p, sx_add(s->cx, c->row0, ii), c->col0, sx_add(s->cx, kb, lv));
  }
  RX_VEC_PUSH(&lane, sched_let(s, xv, pv));
  for (int t = -1; t < mi->nx; t++) { /* the main reduction, then the extras */
    const mm_extra *x = t < 0 ? NULL : &mi->x[t];
    rx_local *xl = xv;
    if (x && c->stage && !x->q) continue; /* a row term: summed where the row is staged */
    if (x && !c->stage) { /* staged, an extra projection's P is the main one's (stage_plan) */
      xl = sched_local(s, "xv", x->p->dtype);
      RX_VEC_PUSH(&lane, sched_let(s, xl,
                                   operand_at(c, x->p, sx_add(s->cx, c->row0, ii), c->col0,
                                              sx_add(s->cx, kb, lv))));
    }
    bool first = x ? x->p_first : mi->p_first, accf = x ? x->r.acc_first : mi->r.acc_first;
    rx_buffer *wb = x ? c->wvx[t] : c->wv;
    const rx_expr *base = sx_const(s->cx, c->off[t + 1]);
    for (int r = 0; r < (x && !x->q ? 1 : p.R); r++) {
      const rx_expr *ai =
          x && !x->q
              ? sx_add(s->cx, base, ii)
              : sx_add(s->cx, base, sx_add(s->cx, sx_mul_c(s->cx, ii, p.R), sx_const(s->cx, r)));
      const rx_expr *wi[2] = {sx_const(s->cx, r), lv};
      rx_tx *xe = ir_tx_local(s->m, xl, s->loc), *prod = xe;
      if (!x || x->q) {
        rx_tx *w = sched_load(s, wb, wi, 2);
        prod = first ? bin(s, RX_BINOP_MUL, xe, w) : bin(s, RX_BINOP_MUL, w, xe);
      }
      rx_tx *cur = sched_load(s, c->acc, &ai, 1);
      rx_tx *sum = accf ? bin(s, RX_BINOP_ADD, cur, prod) : bin(s, RX_BINOP_ADD, prod, cur);
      RX_VEC_PUSH(&lane, sched_store_e(s, c->acc, &ai, 1, sum));
    }
  }
  rx_stmt *row = sched_seq(s, &lane);
  if (vo) {
    row = sched_for(s, vi, sx_const(s->cx, GEMV_VEC_LANES), RX_LOOP_VECTORIZE, row);
    row = sched_for(s, vo, sx_const(s->cx, p.V / GEMV_VEC_LANES), RX_LOOP_UNROLL, row);
  } else if (p.V > 1) {
    row = sched_for(s, v, sx_const(s->cx, p.V), RX_LOOP_VECTORIZE, row);
  }
  size_t mk = sym_analyzer_mark(s->an);
  sym_analyzer_bind_range(s->an, ii, sx_const(s->cx, 0), sx_const(s->cx, p.NB));
  row = sched_guard(s, sched_bound_guard(s, sx_add(s->cx, c->row0, ii), mi->N), row);
  sym_analyzer_reset(s->an, mk);
  RX_VEC_PUSH(&st, sched_for(s, ii, sx_const(s->cx, p.NB), RX_LOOP_UNROLL, row));
  return sched_seq(s, &st);
}

/* The k loop: steps of G * V elements, unrolled by GEMV_UNROLL, the tail guarded. */
static rx_stmt *rows_kloop(rows_k *c) {
  rx_sctx *s = c->s;
  rows_plan p = c->p;
  int64_t step = (int64_t)p.GK * p.V;
  const rx_expr *nk = sched_ceildiv(s, c->mi->K, step);
  int U = GEMV_UNROLL;
  if (nk->kind == RX_EXPR_CONST && nk->value < U) U = nk->value < 1 ? 1 : (int)nk->value;
  const rx_expr *ko = sched_fresh_var(s, "ko"), *ku = sched_fresh_var(s, "ku");
  const rx_expr *nko = sched_ceildiv(s, nk, U);
  const rx_expr *kb = sx_mul_c(
      s->cx, sx_add(s->cx, sx_mul_c(s->cx, sx_add(s->cx, sx_mul_c(s->cx, ko, U), ku), p.GK), c->l),
      p.V);
  size_t mk = sym_analyzer_mark(s->an);
  sym_analyzer_bind_range(s->an, ko, sx_const(s->cx, 0), nko);
  sym_analyzer_bind_range(s->an, ku, sx_const(s->cx, 0), sx_const(s->cx, U));
  rx_stmt *body = sched_guard(s, sched_bound_guard(s, kb, c->mi->K), rows_step(c, kb));
  sym_analyzer_reset(s->an, mk);
  return sched_for(s, ko, nko, RX_LOOP_SERIAL,
                   sched_for(s, ku, sx_const(s->cx, U), RX_LOOP_UNROLL, body));
}

/* The k loop of GGUF block rows: per BU steps, the group's copy of their bytes into shared
 * memory (mm_blocks_copy), a barrier, the steps reading it (the tail guarded), a barrier. */
static rx_stmt *rows_kloop_blocks(rows_k *c) {
  rx_sctx *s = c->s;
  rows_plan p = c->p;
  int64_t step = (int64_t)p.GK * p.V;
  int U = c->BU;
  const rx_expr *nko = sched_ceildiv(s, sched_ceildiv(s, c->mi->K, step), U);
  const rx_expr *ko = sched_fresh_var(s, "ko"), *ku = sched_fresh_var(s, "ku");
  const rx_expr *kb = sx_mul_c(
      s->cx, sx_add(s->cx, sx_mul_c(s->cx, sx_add(s->cx, sx_mul_c(s->cx, ko, U), ku), p.GK), c->l),
      p.V);
  size_t mk = sym_analyzer_mark(s->an);
  sym_analyzer_bind_range(s->an, ko, sx_const(s->cx, 0), nko);
  sym_analyzer_bind_range(s->an, ku, sx_const(s->cx, 0), sx_const(s->cx, U));
  c->bs.k0 = sx_mul_c(s->cx, ko, (int64_t)U * step);
  rx_stmtvec body = {0};
  RX_VEC_PUSH(&body, mm_blocks_copy(s, c->mi, &c->bs));
  RX_VEC_PUSH(&body, sched_barrier(s));
  rx_stmt *stp = sched_guard(s, sched_bound_guard(s, kb, c->mi->K), rows_step(c, kb));
  RX_VEC_PUSH(&body, sched_for(s, ku, sx_const(s->cx, U), RX_LOOP_UNROLL, stp));
  RX_VEC_PUSH(&body, sched_barrier(s));
  sym_analyzer_reset(s->an, mk);
  return sched_for(s, ko, nko, RX_LOOP_SERIAL, sched_seq(s, &body));
}

/* Whether the form stages its row (c->stage) and how: extra reductions (rms_norm_matmul) whose
 * extra projections share the main P. The staged value is P's f16/bf16 value under its cast (the
 * op's T(x * nw)), else P itself; VS lanes a thread when it is written (16 bytes of the widest
 * load under it or the row terms: an f32 row's loads are consecutive 16-byte vectors over the
 * block), KC k a slice: at least one step of every group (G * V) and a vector for every thread
 * (T * VS), GEMV_UNROLL steps when the slice fits GEMV_STAGE_BYTES for the pass's rows. False
 * when even one step does not fit (16 rows of a packed int4 weight: steps of 32 lanes x 32 k,
 * 32 KiB): each group then reads P itself in its k loop. */
static bool stage_plan(rows_k *c) {
  rx_sctx *s = c->s;
  const mm_info *mi = c->mi;
  /* a gathered packed weight (moe_gemv) stages its row too: a lane reads 2 V bytes of it a step
   * (64 at V = 32 k of int4), 16-byte loads 64 bytes apart (half of each sector) when read as
   * they are; staged, the threads read it in consecutive 16-byte vectors */
  if (c->bk.n || (!mi->nx && !(c->pk.n && mi->nhoist))) return false;
  for (int t = 0; t < mi->nx; t++)
    if (mi->x[t].q && !mm_same_tx(mi->x[t].p, mi->p)) return false;
  const rx_tx *e = mi->p->kind == RX_TX_CAST ? mi->p->a : mi->p;
  c->sp = e->dtype == RX_DTYPE_F16 || e->dtype == RX_DTYPE_BF16 ? e : mi->p;
  int bits = sched_max_load_bits(c->sp);
  for (int t = 0; t < mi->nx; t++) {
    int b = mi->x[t].q ? 0 : sched_max_load_bits(mi->x[t].p);
    if (b > bits) bits = b;
  }
  int vs = bits > 0 ? s->t->vector_bytes * 8 / bits : 1;
  if (vs > GEMV_VEC_LANES) vs = GEMV_VEC_LANES;
  if (vs < 1) vs = 1;
  int64_t d = sym_analyzer_divisor(s->an, mi->K);
  while (vs > 1 && d != 0 && d % vs != 0) vs /= 2;
  c->VS = sched_pow2_floor(vs);
  int64_t step = (int64_t)c->p.GK * c->p.V, kc = step * GEMV_UNROLL;
  int64_t all = (int64_t)c->p.T * c->VS, bytes = ir_dtype_bits(c->sp->dtype) / 8;
  if (kc < all) kc = all;
  int budget =
      s->t->shared_bytes / 2 < GEMV_STAGE_BYTES ? s->t->shared_bytes / 2 : GEMV_STAGE_BYTES;
  while (kc > step && (int64_t)c->p.NB * kc * bytes > budget) kc /= 2;
  c->KC = (int)kc;
  return (int64_t)c->p.NB * kc * bytes <= budget;
}

/* The staging of slice k0 .. k0 + KC of the pass's rows (mm_stage_slice). */
rx_stmt *mm_stage_slice(rx_sctx *s, const mm_info *mi, const mm_stage *c, const rx_expr *k0) {
  int64_t per = (int64_t)c->T * c->VS, nsv = (c->KC + per - 1) / per;
  const rx_expr *ii = sched_fresh_var(s, "ii"), *sv = sched_fresh_var(s, "sv");
  const rx_expr *v = c->VS > 1 ? sched_fresh_var(s, "v") : sx_const(s->cx, 0);
  size_t mk = sym_analyzer_mark(s->an);
  sym_analyzer_bind_range(s->an, ii, sx_const(s->cx, 0), sx_const(s->cx, c->NB));
  sym_analyzer_bind_range(s->an, sv, sx_const(s->cx, 0), sx_const(s->cx, nsv));
  const rx_expr *li = sx_mul_c(s->cx, sx_add(s->cx, sx_mul_c(s->cx, sv, c->T), c->tx), c->VS);
  const rx_expr *row = sx_add(s->cx, c->row0, ii), *k = sx_add(s->cx, k0, li);
  rx_stmtvec st = {0};
  const rx_expr *xi[2] = {ii, sx_add(s->cx, li, v)}, *kv = sx_add(s->cx, k, v);
  RX_VEC_PUSH(
      &st, sched_store_e(s, c->xs, xi, 2, mm_operand_at(s, mi, c->brepl, c->sp, row, c->col0, kv)));
  for (int t = 0; t < mi->nx; t++) {
    const mm_extra *x = &mi->x[t];
    if (x->q) continue;
    const rx_expr *ri = sx_add(s->cx, sx_const(s->cx, (int64_t)t * c->NB), ii);
    rx_tx *cur = sched_load(s, c->rt, &ri, 1);
    rx_tx *add = mm_operand_at(s, mi, c->brepl, x->p, row, c->col0, kv);
    rx_tx *sum = x->r.acc_first ? bin(s, RX_BINOP_ADD, cur, add) : bin(s, RX_BINOP_ADD, add, cur);
    RX_VEC_PUSH(&st, sched_store_e(s, c->rt, &ri, 1, sum));
  }
  rx_stmt *body = sched_seq(s, &st);
  if (c->VS > 1) body = sched_for(s, v, sx_const(s->cx, c->VS), RX_LOOP_VECTORIZE, body);
  const rx_expr *g =
      sx_and_opt(s->cx, sched_bound_guard(s, row, mi->N), sched_bound_guard(s, k, mi->K));
  if (per * nsv > c->KC) g = sx_and_opt(s->cx, g, sched_bound_guard(s, li, sx_const(s->cx, c->KC)));
  body = sched_guard(s, g, body);
  sym_analyzer_reset(s->an, mk);
  body = sched_for(s, sv, sx_const(s->cx, nsv), RX_LOOP_UNROLL, body);
  return sched_for(s, ii, sx_const(s->cx, c->NB), RX_LOOP_UNROLL, body);
}

/* The k loop of the staged form: per slice of KC k, the staging, a barrier, the groups' steps of
 * G * V k reading the row from shared memory (unrolled by up to GEMV_UNROLL, the tail guarded),
 * a barrier (the slice is free for the next); then each row term's block total in rt. */
static void rows_kloop_staged(rows_k *c, rx_stmtvec *out) {
  rx_sctx *s = c->s;
  const mm_info *mi = c->mi;
  rows_plan p = c->p;
  int64_t step = (int64_t)p.GK * p.V, nst = c->KC / step;
  int U = nst < GEMV_UNROLL ? (int)nst : GEMV_UNROLL;
  const rx_expr *sl = sched_fresh_var(s, "sl"), *nsl = sched_ceildiv(s, mi->K, c->KC);
  const rx_expr *ko = sched_fresh_var(s, "ko"), *ku = sched_fresh_var(s, "ku");
  size_t mk = sym_analyzer_mark(s->an);
  sym_analyzer_bind_range(s->an, sl, sx_const(s->cx, 0), nsl);
  sym_analyzer_bind_range(s->an, ko, sx_const(s->cx, 0), sx_const(s->cx, nst / U));
  sym_analyzer_bind_range(s->an, ku, sx_const(s->cx, 0), sx_const(s->cx, U));
  const rx_expr *k0 = sx_mul_c(s->cx, sl, c->KC);
  c->kl = sx_mul_c(
      s->cx, sx_add(s->cx, sx_mul_c(s->cx, sx_add(s->cx, sx_mul_c(s->cx, ko, U), ku), p.GK), c->l),
      p.V);
  const rx_expr *kb = sx_add(s->cx, k0, c->kl);
  rx_stmt *stp = sched_guard(s, sched_bound_guard(s, kb, mi->K), rows_step(c, kb));
  c->kl = NULL;
  rx_stmtvec body = {0};
  mm_stage sg = {.xs = c->xs,
                 .rt = c->rt,
                 .sp = c->sp,
                 .brepl = c->brepl,
                 .tx = c->tx,
                 .row0 = c->row0,
                 .col0 = c->col0,
                 .T = p.T,
                 .VS = c->VS,
                 .NB = p.NB,
                 .KC = c->KC};
  RX_VEC_PUSH(&body, mm_stage_slice(s, mi, &sg, k0));
  RX_VEC_PUSH(&body, sched_barrier(s));
  RX_VEC_PUSH(&body, sched_for(s, ko, sx_const(s->cx, nst / U), RX_LOOP_SERIAL,
                               sched_for(s, ku, sx_const(s->cx, U), RX_LOOP_UNROLL, stp)));
  RX_VEC_PUSH(&body, sched_barrier(s));
  sym_analyzer_reset(s->an, mk);
  RX_VEC_PUSH(out, sched_for(s, sl, nsl, RX_LOOP_SERIAL, sched_seq(s, &body)));
  for (int t = 0; t < mi->nx; t++) {
    if (mi->x[t].q) continue;
    for (int ii = 0; ii < p.NB; ii++) {
      const rx_expr *ri = sx_const(s->cx, (int64_t)t * p.NB + ii);
      rx_tx *tot =
          sched_xreduce(s, out, sched_load(s, c->rt, &ri, 1), RX_COMB_SUM, mi->acc_dt, p.T, c->tx);
      RX_VEC_PUSH(out, sched_store_e(s, c->rt, &ri, 1, tot));
    }
  }
}

/* The totals of the output point of main accumulator a (0 <= a < NB * R), each reduction's, read
 * from buf (acc, or tot after the subgroup sums; laid out as acc). */
static void totals_at(rows_k *c, rx_buffer *buf, const rx_expr *a, rx_tx **out) {
  rx_sctx *s = c->s;
  out[0] = sched_load(s, buf, &a, 1);
  for (int t = 0; t < c->mi->nx; t++) {
    const rx_expr *at =
        c->mi->x[t].q ? a : sym_expr_floordiv(s->cx, a, sx_const(s->cx, c->p.R)); /* row ii */
    if (c->stage && !c->mi->x[t].q) { /* a row term's block total */
      at = sx_add(s->cx, sx_const(s->cx, (int64_t)t * c->p.NB), at);
      out[1 + t] = sched_load(s, c->rt, &at, 1);
      continue;
    }
    at = sx_add(s->cx, sx_const(s->cx, c->off[t + 1]), at);
    out[1 + t] = sched_load(s, buf, &at, 1);
  }
}

/* The output point of accumulator a (row a // R, column col0 + a % R) and its store(s), from
 * each reduction's total (totals[0] the main one's). */
static rx_stmt *rows_store(rows_k *c, const rx_expr *a, rx_tx *const *totals, const rx_expr *who) {
  rx_sctx *s = c->s;
  const mm_info *mi = c->mi;
  int R = c->p.R;
  const rx_expr *i = sx_add(s->cx, c->row0, sym_expr_floordiv(s->cx, a, sx_const(s->cx, R)));
  const rx_expr *j = sx_add(s->cx, c->col0, sym_expr_floormod(s->cx, a, sx_const(s->cx, R)));
  const rx_expr *vars[MAXN], *repl[MAXN];
  rx_rewrite rw;
  mm_point_rewrite(s, mi, c->brepl, i, j, vars, repl, &rw);
  rx_stmtvec fin = {0};
  mm_epilogue_n(s, mi, &rw, totals, &fin);
  const rx_expr *g =
      sx_and_opt(s->cx, who,
                 sx_and_opt(s->cx, sched_bound_guard(s, i, mi->N), sched_bound_guard(s, j, mi->M)));
  return sched_guard(s, g, sched_seq(s, &fin));
}

/* The reduction of each accumulator over its group and the stores: by subgroup shuffles (lane
 * a % G of the group stores accumulator a), over the whole block (thread 0 stores), or none for
 * a group of one thread. */
static void rows_finish(rows_k *c, rx_stmtvec *body) {
  rx_sctx *s = c->s;
  rows_plan p = c->p;
  int A = p.NB * p.R;
  const rx_expr *z = sx_const(s->cx, 0);
  rx_tx *tv[1 + MM_MAX_EXTRA];
  if (p.G == p.T && !(subgroups(s, p.T) && p.T == s->t->subgroup_size)) { /* NB = R = 1 */
    if (c->A == 1 && c->mi->nx == 0) {
      tv[0] = sched_xreduce(s, body, sched_load(s, c->acc, &z, 1), RX_COMB_SUM, c->mi->acc_dt, p.T,
                            c->tx);
      RX_VEC_PUSH(body, rows_store(c, z, tv, sym_expr_cmp(s->cx, RX_EXPR_EQ, c->tx, z)));
      return;
    }
    rx_stmt *al;
    int64_t shp[1] = {c->A};
    rx_buffer *tot = sched_alloc(s, "tot", c->mi->acc_dt, RX_SCOPE_LOCAL, shp, 1, &al);
    RX_VEC_PUSH(body, al);
    for (int a = 0; a < c->A; a++) {
      const rx_expr *ai = sx_const(s->cx, a);
      rx_tx *t = sched_xreduce(s, body, sched_load(s, c->acc, &ai, 1), RX_COMB_SUM, c->mi->acc_dt,
                               p.T, c->tx);
      RX_VEC_PUSH(body, sched_store_e(s, tot, &ai, 1, t));
    }
    totals_at(c, tot, z, tv);
    RX_VEC_PUSH(body, rows_store(c, z, tv, sym_expr_cmp(s->cx, RX_EXPR_EQ, c->tx, z)));
    return;
  }
  if (p.G == 1) { /* a group of one thread: its accumulators are the totals */
    const rx_expr *a = sched_fresh_var(s, "a");
    size_t mk = sym_analyzer_mark(s->an);
    sym_analyzer_bind_range(s->an, a, z, sx_const(s->cx, A));
    totals_at(c, c->acc, a, tv);
    rx_stmt *st = rows_store(c, a, tv, NULL);
    sym_analyzer_reset(s->an, mk);
    RX_VEC_PUSH(body, sched_for(s, a, sx_const(s->cx, A), RX_LOOP_UNROLL, st));
    return;
  }
  rx_stmt *al;
  int64_t shp[1] = {c->A};
  rx_buffer *tot = sched_alloc(s, "tot", c->mi->acc_dt, RX_SCOPE_LOCAL, shp, 1, &al);
  RX_VEC_PUSH(body, al);
  const rx_expr *a = sched_fresh_var(s, "a");
  rx_tx *part = sched_load(s, c->acc, &a, 1);
  rx_stmt *red;
  if (p.F == 1) {
    red = sched_store_e(s, tot, &a, 1, ir_tx_call(s->m, RX_INTRIN_SUBGROUP_SUM, &part, 1, s->loc));
  } else { /* folded: one sum per slot, each over the subgroup with the other slots' zeros */
    rx_stmtvec fs = {0};
    rx_tx *zero = NULL;
    sched_identity(s, RX_COMB_SUM, c->mi->acc_dt, &zero);
    for (int f = 0; f < p.F; f++) {
      const rx_expr *mine = sym_expr_cmp(s->cx, RX_EXPR_EQ, c->slot, sx_const(s->cx, f));
      rx_tx *x = ir_tx_select(s->m, ir_tx_sym(s->m, mine, s->loc), part, zero, s->loc);
      rx_local *t = sched_local(s, "ts", c->mi->acc_dt);
      RX_VEC_PUSH(&fs, sched_let(s, t, ir_tx_call(s->m, RX_INTRIN_SUBGROUP_SUM, &x, 1, s->loc)));
      RX_VEC_PUSH(&fs,
                  sched_guard(s, mine, sched_store_e(s, tot, &a, 1, ir_tx_local(s->m, t, s->loc))));
    }
    red = sched_seq(s, &fs);
  }
  RX_VEC_PUSH(body, sched_for(s, a, sx_const(s->cx, c->A), RX_LOOP_UNROLL, red));
  const rx_expr *b = sched_fresh_var(s, "a");
  size_t mk = sym_analyzer_mark(s->an);
  sym_analyzer_bind_range(s->an, b, z, sx_const(s->cx, A));
  const rx_expr *who =
      sym_expr_cmp(s->cx, RX_EXPR_EQ, c->l, sym_expr_floormod(s->cx, b, sx_const(s->cx, p.GK)));
  totals_at(c, tot, b, tv);
  rx_stmt *st = rows_store(c, b, tv, who);
  sym_analyzer_reset(s->an, mk);
  RX_VEC_PUSH(body, sched_for(s, b, sx_const(s->cx, A), RX_LOOP_UNROLL, st));
}

rx_stmt *gemv_rows_schedule(rx_sctx *s, const mm_info *mi, int rows) {
  rx_expr_ctx *cx = s->cx;
  rows_k c = {.s = s, .mi = mi};
  mm_packed_find(s, mi, &c.pk);
  /* GGUF block rows: staged by a group of lanes, so not with groups of one thread */
  if (!thread_groups(s, rows) && mm_blocks_find(s, mi, &c.pk, &c.bk)) c.pk.n = 0;
  c.p = plan_rows(s, mi, rows, &c.pk, &c.bk);
  if (c.bk.n && (c.p.G < 2 || ((int64_t)c.p.GK * c.p.V) % c.bk.B != 0)) {
    c.bk.n = 0; /* a step of no whole blocks: read as they are */
    c.p = plan_rows(s, mi, rows, &c.pk, &c.bk);
  }
  rows_plan p = c.p;
  const rx_expr *bx = sched_fresh_var(s, "bx"), *by = NULL, *nbatch = NULL;
  c.tx = sched_fresh_var(s, "tx");
  if (mi->nb > 0) {
    by = sched_fresh_var(s, "by");
    nbatch = sym_analyzer_simplify(s->an, sched_fuse(s, mi->nt.ext, mi->nb, by, c.brepl));
  }
  int per = (p.T / p.G) * p.R * p.F;
  const rx_expr *ncol = sched_ceildiv(s, mi->M, per);
  size_t mk = sym_analyzer_mark(s->an);
  sym_analyzer_bind_range(s->an, bx, sx_const(s->cx, 0), ncol);
  sym_analyzer_bind_range(s->an, c.tx, sx_const(s->cx, 0), sx_const(s->cx, p.T));
  if (by) sym_analyzer_bind_range(s->an, by, sx_const(s->cx, 0), nbatch);
  const rx_expr *g =
      sym_analyzer_simplify(s->an, sym_expr_floordiv(cx, c.tx, sx_const(s->cx, p.G)));
  const rx_expr *lg =
      sym_analyzer_simplify(s->an, sym_expr_floormod(cx, c.tx, sx_const(s->cx, p.G)));
  c.l = sym_analyzer_simplify(s->an, sym_expr_floormod(cx, lg, sx_const(s->cx, p.GK)));
  c.slot = sym_analyzer_simplify(s->an, sym_expr_floordiv(cx, lg, sx_const(s->cx, p.GK)));
  const rx_expr *grp = sx_add(s->cx, sx_mul_c(s->cx, bx, p.T / p.G), g);
  c.col0 = sx_mul_c(s->cx, sx_add(s->cx, sx_mul_c(s->cx, grp, p.F), c.slot), p.R);
  rx_stmtvec body = {0};
  mm_hoist_emit(s, mi, c.brepl, &body); /* a gathered weight's row offset (moe_gemv) */
  rx_stmt *al;
  c.off[0] = 0;
  c.A = p.NB * p.R;
  c.stage = stage_plan(&c);
  for (int t = 0; t < mi->nx; t++) {
    c.off[t + 1] = c.A;
    if (!c.stage || mi->x[t].q) c.A += mi->x[t].q ? p.NB * p.R : p.NB; /* staged: rt's */
  }
  int64_t ashape[1] = {c.A}, wshape[2] = {p.R, p.V};
  c.acc = sched_alloc(s, "acc", mi->acc_dt, RX_SCOPE_LOCAL, ashape, 1, &al);
  RX_VEC_PUSH(&body, al);
  c.wv = sched_alloc(s, "wv", mi->q->dtype, RX_SCOPE_LOCAL, wshape, 2, &al);
  RX_VEC_PUSH(&body, al);
  for (int t = 0; t < mi->nx; t++) {
    if (!mi->x[t].q) continue;
    c.wvx[t] = sched_alloc(s, "wv", mi->x[t].q->dtype, RX_SCOPE_LOCAL, wshape, 2, &al);
    RX_VEC_PUSH(&body, al);
  }
  if (c.stage) {
    int64_t xshape[2] = {p.NB, c.KC}, rshape[1] = {(int64_t)mi->nx * p.NB};
    c.xs = sched_alloc(s, "xs", c.sp->dtype, RX_SCOPE_SHARED, xshape, 2, &al);
    RX_VEC_PUSH(&body, al);
    if (mi->nx) {
      c.rt = sched_alloc(s, "rt", mi->acc_dt, RX_SCOPE_LOCAL, rshape, 1, &al);
      RX_VEC_PUSH(&body, al);
    }
  }
  if (c.bk.n) { /* the groups' staged block rows: BU steps, as many as fit GEMV_STAGE_BYTES */
    int64_t step = (int64_t)p.GK * p.V, nk = -1, groups = p.T / p.G;
    const rx_expr *nke = sched_ceildiv(s, mi->K, step);
    if (nke->kind == RX_EXPR_CONST) nk = nke->value;
    int budget =
        s->t->shared_bytes / 2 < GEMV_STAGE_BYTES ? s->t->shared_bytes / 2 : GEMV_STAGE_BYTES;
    c.BU = GEMV_UNROLL;
    while (c.BU > 1 && ((nk >= 0 && c.BU > nk) ||
                        groups * c.bk.n * p.F * (c.BU * step / c.bk.B * c.bk.BB) > budget))
      c.BU /= 2;
    int64_t span = c.BU * step / c.bk.B * c.bk.BB, shb[1] = {groups * c.bk.n * p.F * span};
    c.bs = (mm_blocks_stage){.bk = &c.bk,
                             .batch = c.brepl,
                             .base = sx_mul_c(s->cx, g, (int64_t)c.bk.n * p.F * span),
                             .col0 = sx_mul_c(s->cx, grp, p.F),
                             .lane = lg,
                             .G = p.G,
                             .F = p.F,
                             .unit = mm_blocks_unit(s, mi, &c.bk, span),
                             .span = span};
    c.bs.sh = sched_alloc(s, "wq", c.bk.load[0]->buf->dtype, RX_SCOPE_SHARED, shb, 1, &al);
    RX_VEC_PUSH(&body, al);
  }
  for (int i = 0; i < c.pk.n; i++) {
    int64_t pshape[1] = {16};
    c.pkb[i] = sched_alloc(s, "pk", c.pk.load[i]->buf->dtype, RX_SCOPE_LOCAL, pshape, 1, &al);
    RX_VEC_PUSH(&body, al);
  }
  /* one pass over k for rows row0 .. row0 + NB: its accumulators zeroed, the k loop, the stores */
  const rx_expr *rc = sched_fresh_var(s, "rc"), *npass = sched_ceildiv(s, mi->N, p.NB);
  if (p.chunks) sym_analyzer_bind_range(s->an, rc, sx_const(s->cx, 0), npass);
  c.row0 = p.chunks ? sx_mul_c(s->cx, rc, p.NB) : sx_const(s->cx, 0);
  rx_stmtvec pass = {0};
  rx_tx *zero = NULL;
  sched_identity(s, RX_COMB_SUM, mi->acc_dt, &zero);
  const rx_expr *a = sched_fresh_var(s, "a");
  RX_VEC_PUSH(&pass, sched_for(s, a, sx_const(s->cx, ashape[0]), RX_LOOP_UNROLL,
                               sched_store_e(s, c.acc, &a, 1, zero)));
  if (c.stage) {
    const rx_expr *b = sched_fresh_var(s, "a");
    if (mi->nx) /* the row terms' sums (none for a staged gathered row: c.rt NULL) */
      RX_VEC_PUSH(&pass, sched_for(s, b, sx_const(s->cx, (int64_t)mi->nx * p.NB), RX_LOOP_UNROLL,
                                   sched_store_e(s, c.rt, &b, 1, zero)));
    rows_kloop_staged(&c, &pass);
  } else {
    RX_VEC_PUSH(&pass, c.bk.n ? rows_kloop_blocks(&c) : rows_kloop(&c));
  }
  rows_finish(&c, &pass);
  rx_stmt *passes = sched_seq(s, &pass);
  if (p.chunks) passes = sched_for(s, rc, npass, RX_LOOP_SERIAL, passes);
  RX_VEC_PUSH(&body, passes);
  sym_analyzer_reset(s->an, mk);
  rx_stmt *k = sched_for(s, c.tx, sx_const(s->cx, p.T), RX_LOOP_THREAD_X, sched_seq(s, &body));
  if (by) k = sched_for(s, by, nbatch, RX_LOOP_BLOCK_Y, k);
  return sched_for(s, bx, ncol, RX_LOOP_BLOCK_X, k);
}

/* ------------------------------------------------------------------------------------------
 * gemv_cols
 * ------------------------------------------------------------------------------------------ */
/* The words' columns a block (mm_q_words): 8 int32 words of 8 outputs, a 32-byte sector of a row
 * of AWQ's qweight and qzeros. */
#define GEMV_WORD_COLUMNS 64
/* The distinct global loads of a product hoisted (AWQ 5, GPTQ 6 with x). */
#define COLS_MAX_HOISTED 16
typedef struct cols_hoist {
  rx_stmtvec *lets;
  const rx_tx *seen[COLS_MAX_HOISTED];
  rx_tx *as[COLS_MAX_HOISTED];
  int n;
} cols_hoist;

/* A global load of the product into a let of its own, once (the same load in each arm of the
 * element's selects among a word's 8 fields: otherwise some lanes' request each, half sectors in
 * the emulator's count); nested loads (GPTQ's g_idx under its scale and zero) first. */
static rx_tx *cols_hoist_load(rx_rewrite *rw, rx_tx *l) {
  cols_hoist *h = rw->ud;
  if (l->buf->scope != RX_SCOPE_GLOBAL) return l;
  for (int i = 0; i < h->n; i++)
    if (mm_same_tx(h->seen[i], l)) return h->as[i];
  if (h->n == COLS_MAX_HOISTED) return l;
  rx_local *loc = sched_local(rw->s, "ql", l->dtype);
  RX_VEC_PUSH(h->lets, sched_let(rw->s, loc, l));
  h->seen[h->n] = l;
  return h->as[h->n++] = ir_tx_local(rw->s->m, loc, rw->s->loc);
}

rx_stmt *gemv_cols_schedule(rx_sctx *s, const mm_info *mi) {
  rx_expr_ctx *cx = s->cx;
  int T = sched_block_threads(s, BLOCK_THREADS);
  bool words = mm_q_words(mi);
  int want = words ? GEMV_WORD_COLUMNS : GEMV_COLUMNS;
  int CB = T >= want ? want : T, KS = T / CB;
  const rx_expr *M = mi->M, *K = mi->K;
  const rx_expr *bx = sched_fresh_var(s, "bx"), *by = NULL, *nbatch = NULL;
  const rx_expr *tx = sched_fresh_var(s, "tx");
  const rx_expr *brepl[MAXN];
  if (mi->nb > 0) {
    by = sched_fresh_var(s, "by");
    nbatch = sym_analyzer_simplify(s->an, sched_fuse(s, mi->nt.ext, mi->nb, by, brepl));
  }
  const rx_expr *ncol;
  const rx_expr *jj = sym_expr_floormod(cx, tx, sx_const(s->cx, CB)),
                *ks = sym_expr_floordiv(cx, tx, sx_const(s->cx, CB));
  const rx_expr *jg = sched_split(s, M, CB, bx, jj, &ncol);
  rx_stmtvec body = {0};
  mm_hoist_emit(s, mi, brepl, &body);
  rx_stmt *al;
  int64_t one[1] = {1}, rs[2] = {KS, CB};
  rx_buffer *red = sched_alloc(s, "red_buf", mi->acc_dt, RX_SCOPE_SHARED, rs, 2, &al);
  RX_VEC_PUSH(&body, al);
  rx_buffer *part = sched_alloc(s, "part", mi->acc_dt, RX_SCOPE_LOCAL, one, 1, &al);
  RX_VEC_PUSH(&body, al);
  const rx_expr *z = sx_const(s->cx, 0);
  rx_tx *zero = NULL;
  sched_identity(s, RX_COMB_SUM, mi->acc_dt, &zero);
  RX_VEC_PUSH(&body, sched_store_e(s, part, &z, 1, zero));
  const rx_expr *ko = sched_fresh_var(s, "ko");
  const rx_expr *nk;
  const rx_expr *kg = sched_split(s, K, KS, ko, ks, &nk);
  /* the product at i = 0, j = bx * CB + jj, k = ko * KS + ks */
  const rx_expr *vars[MAXN + 1], *rp[MAXN + 1];
  rx_rewrite rw;
  mm_point_rewrite(s, mi, brepl, z, sx_add(s->cx, sx_mul_c(s->cx, bx, CB), jj), vars, rp, &rw);
  vars[rw.n] = mi->r.k;
  rp[rw.n] = sx_add(s->cx, sx_mul_c(s->cx, ko, KS), ks);
  rw.n++;
  rx_tx *prod = mi->p_first ? ir_tx_binary(s->m, RX_BINOP_MUL, sched_rewrite_tx(&rw, mi->p),
                                           sched_rewrite_tx(&rw, mi->q), s->loc)
                            : ir_tx_binary(s->m, RX_BINOP_MUL, sched_rewrite_tx(&rw, mi->q),
                                           sched_rewrite_tx(&rw, mi->p), s->loc);
  rx_stmtvec step = {0};
  if (words) {
    cols_hoist h = {.lets = &step, .n = 0};
    rx_rewrite hw = {.s = s, .n = 0, .hook = cols_hoist_load, .ud = &h};
    prod = sched_rewrite_tx(&hw, prod);
  }
  rx_tx *pl = sched_load(s, part, &z, 1);
  RX_VEC_PUSH(&step,
              sched_store_e(s, part, &z, 1,
                            mi->r.acc_first ? ir_tx_binary(s->m, RX_BINOP_ADD, pl, prod, s->loc)
                                            : ir_tx_binary(s->m, RX_BINOP_ADD, prod, pl, s->loc)));
  RX_VEC_PUSH(&body, sched_for(s, ko, nk, RX_LOOP_SERIAL,
                               sched_guard(s, sx_and_opt(s->cx, kg, jg), sched_seq(s, &step))));
  const rx_expr *ri[2] = {ks, jj};
  RX_VEC_PUSH(&body, sched_store_e(s, red, ri, 2, sched_load(s, part, &z, 1)));
  RX_VEC_PUSH(&body, sched_barrier(s));
  /* the first CB threads sum the KS partials of their column, in order */
  rx_tx *tot = NULL;
  for (int q = 0; q < KS; q++) {
    const rx_expr *ix[2] = {sx_const(s->cx, q), tx};
    rx_tx *l = sched_load(s, red, ix, 2);
    tot = tot ? ir_tx_binary(s->m, RX_BINOP_ADD, tot, l, s->loc) : l;
  }
  rx_stmtvec fin = {0};
  const rx_expr *j = sx_add(s->cx, sx_mul_c(s->cx, bx, CB), tx); /* tx < CB there */
  mm_point_rewrite(s, mi, brepl, z, j, vars, rp, &rw);
  mm_epilogue(s, mi, &rw, tot, &fin);
  const rx_expr *c = sx_and_opt(s->cx, sym_expr_cmp(cx, RX_EXPR_LT, tx, sx_const(s->cx, CB)),
                                sched_bound_guard(s, j, M));
  RX_VEC_PUSH(&body, sched_guard(s, c, sched_seq(s, &fin)));
  rx_stmt *k = sched_for(s, tx, sx_const(s->cx, T), RX_LOOP_THREAD_X, sched_seq(s, &body));
  if (by) k = sched_for(s, by, nbatch, RX_LOOP_BLOCK_Y, k);
  return sched_for(s, bx, ncol, RX_LOOP_BLOCK_X, k);
}
