/* passes/schedule/row_reduction.c: the ROW_REDUCTION rule (rows of threads, reductions across
 * them).
 *
 *   ROW_REDUCTION  `for rows... { ITEM... }` where ITEM is `alloc NAME: T[consts] local`, a
 *                  `let`, a store (not using a row-local loop), a `reduce j in 0..m { init {
 *                  LET... acc = v0 } update { LET... acc = acc + X | max(acc, X) | min(acc, X) }
 *                  }` whose X uses j only as the last index of its loads (innermost axis), or a
 *                  `for j in 0..m { ... }` stage whose stores have j as their last index.
 *
 * In short: T threads per row (RPB rows per block), V lanes of 16 bytes per access where the
 * analyzer proves them (else the aligned form: a scalar head and tail around 16-byte vectors),
 * the inputs read by two stages or more cached in registers when they fit ROW_REG_ELEMS,
 * reductions across the row's threads with init applied exactly, and a max followed by a sum of
 * exps fused into one online-softmax sweep. The plan (plan_rows) and each form in full:
 * docs/schedules.md, "Row reduction". */
#include "rules.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- tuning constants ---- */
/* Row elements a thread keeps in registers, over all the inputs it caches: 32 values (x and
 * the residual of a fused rms_norm at 4096 f32 with 256 threads are 16 each) leave ptxas most
 * of the 255 registers of a thread for the rest of the kernel. */
#define ROW_REG_ELEMS 32
/* The most threads per row that the register form takes to fit a row (8192 f32 at 512 threads
 * are 16 values per thread); one block per row then. */
#define ROW_MAX_THREADS 512
/* Steps per thread up to which a stage's loop is unrolled when the row is not in registers (a
 * constant count); longer ones stay serial. */
#define ROW_UNROLL 4
/* Inputs the register form caches at most (a fused row reads few). */
#define MAX_CACHED 8
/* Bookkeeping bound: the items of a row body. */
#define MAX_ITEMS 64
/* The aligned form needs rows of at least this many vectors (when m is bounded): a shorter row
 * holds at most one aligned vector between its scalar head and tail, nothing to gain. */
#define ALIGN_MIN_VECTORS 2

/* ------------------------------------------------------------------------------------------
 * matching
 * ------------------------------------------------------------------------------------------ */
typedef struct inner_chk {
  const rx_expr *k;
} inner_chk;
static bool innermost_load(const rx_tx *e, void *ud) {
  const rx_expr *k = ((inner_chk *)ud)->k;
  for (int i = 0; i < e->nidx - 1; i++)
    if (sched_tx_uses(e->idx[i], k)) return false;
  return true;
}

static bool stage_stores_ok(const rx_stmt *s, const rx_expr *j) {
  if (!s) return true;
  if (s->kind == RX_STMT_STORE) {
    if (s->nidx == 0 || !sched_sym_is(s->idx[s->nidx - 1], j)) return false;
    for (int i = 0; i < s->nidx - 1; i++)
      if (sched_tx_uses(s->idx[i], j)) return false;
  }
  if (s->kind == RX_STMT_REDUCE || s->kind == RX_STMT_ALLOC || sched_stmt_has_bound(s))
    return false;
  for (int i = 0; i < s->n; i++)
    if (!stage_stores_ok(s->body[i], j)) return false;
  return stage_stores_ok(s->inner, j) && stage_stores_ok(s->otherwise, j);
}

static bool row_match(const rx_tensor_fn *f, nest *nt) {
  if (sched_seq_len(f->body) != 1) return false;
  sched_get_nest(sched_seq_at(f->body, 0), nt);
  if (nt->n == 0) return false;
  int nred = 0;
  const rx_stmt *b = nt->body;
  if (sched_seq_len(b) > MAX_ITEMS) return false;
  for (int i = 0; i < sched_seq_len(b); i++) {
    const rx_stmt *st = sched_seq_at(b, i);
    switch (st->kind) {
    case RX_STMT_ALLOC:
      if (st->buf->scope != RX_SCOPE_LOCAL) return false;
      for (int d = 0; d < st->buf->ndim; d++)
        if (st->buf->shape[d]->kind != RX_EXPR_CONST) return false;
      break;
    case RX_STMT_LET:
    case RX_STMT_STORE:
      break;
    case RX_STMT_REDUCE: {
      red_info r;
      if (!sched_red_parse(st, &r)) return false;
      inner_chk ic = {r.k};
      if (!sched_all_loads(r.x, innermost_load, &ic)) return false;
      for (int l = 0; l < r.nupd_lets; l++)
        if (!sched_all_loads(r.upd_lets[l]->value, innermost_load, &ic)) return false;
      if (!ir_dtype_is_float(r.upd_store->buf->dtype) && r.comb != RX_COMB_SUM) return false;
      nred++;
      break;
    }
    case RX_STMT_FOR:
      if (st->loop_kind != RX_LOOP_SERIAL || !stage_stores_ok(st->inner, st->vars[0])) return false;
      break;
    default:
      return false;
    }
  }
  return nred > 0;
}

/* A stage of the row body (REDUCE or FOR): its variable, start and extent. */
static bool stage_of(const rx_stmt *st, const rx_expr **var, const rx_expr **lo,
                     const rx_expr **ext) {
  if (st->kind != RX_STMT_REDUCE && st->kind != RX_STMT_FOR) return false;
  *var = st->vars[0];
  *lo = st->lo[0];
  *ext = st->extent[0];
  return true;
}

static bool is_param(const rx_tensor_fn *f, const rx_buffer *b) {
  for (int i = 0; i < f->nparams; i++)
    if (f->params[i]->kind == RX_PARAM_BUFFER && f->params[i]->buf == b) return true;
  return false;
}

/* Whether b is stored anywhere in s. */
static bool stores_to(const rx_stmt *s, const rx_buffer *b) {
  if (!s) return false;
  if (s->kind == RX_STMT_STORE && s->buf == b) return true;
  for (int i = 0; i < s->n; i++)
    if (stores_to(s->body[i], b)) return true;
  return stores_to(s->inner, b) || stores_to(s->init, b) || stores_to(s->otherwise, b);
}

/* Structural equality of two expressions (symbolic parts are canonical: compared as pointers). */
static bool tx_equal(const rx_tx *a, const rx_tx *b) {
  if (!a || !b) return a == b;
  if (a->kind != b->kind || a->dtype != b->dtype || a->nidx != b->nidx) return false;
  switch (a->kind) {
  case RX_TX_INT:
    if (a->ival != b->ival) return false;
    break;
  case RX_TX_FLOAT:
    if (a->fval != b->fval) return false;
    break;
  case RX_TX_SYM:
    return a->sym == b->sym;
  case RX_TX_LOCAL:
    return a->local == b->local;
  case RX_TX_LOAD:
    if (a->buf != b->buf) return false;
    break;
  case RX_TX_BINARY:
    if (a->binop != b->binop) return false;
    break;
  case RX_TX_CALL:
    if (a->intrin != b->intrin || !a->msg != !b->msg || (a->msg && strcmp(a->msg, b->msg)))
      return false;
    break;
  default:
    break;
  }
  for (int i = 0; i < a->nidx; i++)
    if (!tx_equal(a->idx[i], b->idx[i])) return false;
  return tx_equal(a->a, b->a) && tx_equal(a->b, b->b) && tx_equal(a->c, b->c);
}

/* ------------------------------------------------------------------------------------------
 * the plan
 * ------------------------------------------------------------------------------------------ */
typedef struct cached {
  rx_tx *canon;     /* the load with the stage variable renamed to rr.jc */
  int stages;       /* stages that read it */
  int last_stage;   /* the last stage counted */
  rx_buffer *local; /* the per-thread array */
} cached;

typedef struct redirect {
  rx_buffer *buf;
  rx_tx **idx;
  int nidx;
  rx_buffer *local;
} redirect;

typedef struct rr {
  rx_sctx *s;
  const rx_tensor_fn *f;
  nest nt;
  const rx_expr *lo, *m; /* the row: the first reduction's start and extent */
  int64_t mb;            /* m's upper bound; -1: unbounded */
  bool uniform;          /* every stage has that start and extent */
  int V, T, RPB, B;      /* lanes, threads per row, rows per block, threads per block */
  int64_t K;             /* steps of the register form */
  /* the aligned form (V lanes over rows whose start is not provably a multiple of V) */
  bool aligned;
  int edges;             /* its scalar parts: 2 (head and tail), 1 (a tail: R a multiple of V) */
  const rx_buffer *sbuf; /* the row access whose flat start is R, and its indices */
  rx_tx *const *sidx;
  const rx_expr *skip; /* A - R, A the first multiple of V at or after R */
  const rx_expr *head; /* min(skip, m): the head's elements */
  const rx_expr *nvec; /* the full vectors after the head */
  const rx_expr *tail; /* head + nvec * V: the tail's first element after lo */
  int64_t KE;          /* steps of the head and of the tail: ceil((V - 1) / T); 0 otherwise */
  bool regs;           /* the cached inputs stay in registers */
  const rx_expr *jc;   /* the stage variable of cached loads */
  cached cache[MAX_CACHED];
  int ncache;
  /* the kernel */
  const rx_expr *bx, *tid, *lt, *rb; /* block, thread, its lane in the row, its row in the block */
  const rx_expr *nblocks;
  const rx_expr *row_ok; /* the thread's row exists (NULL: always) */
  const rx_expr *first;  /* the thread stores the row's values */
  const rx_expr *repl[MAXN];
  redirect red[MAX_REDIRECTS];
  int nred;
  rx_stmtvec out;
} rr;

/* The largest power of two dividing e (2^20 when e is provably 0). */
static int64_t pow2_divisor(rx_sctx *s, const rx_expr *e) {
  int64_t d = sym_analyzer_divisor(s->an, e), p = 1;
  if (d == 0) return 1 << 20;
  while (p < (1 << 20) && d % (p * 2) == 0) p *= 2;
  return p;
}

/* The row accesses of a stage (variable j): the widest dtype, whether each has j as its exact
 * last index and nowhere else, and the power of two every row of their buffers is a multiple
 * of; for the aligned form, the flat offset of the first access's element lo and the power of
 * two every access's flat offset of its element lo is congruent to it modulo. */
typedef struct acc_chk {
  rx_sctx *s;
  const rx_expr *j, *lo;
  int bits;
  int64_t align;
  bool ok;
  bool flat;             /* every row access's leading indices are symbolic */
  const rx_expr *start;  /* NULL: no access yet */
  const rx_buffer *sbuf; /* the access of start, and its indices */
  rx_tx *const *sidx;
  int64_t agree;
} acc_chk;

/* The flat row-major offset of a row access's element lo (its last index at lo), with the
 * nest's variables replaced by repl when given, built as the printers flatten an access
 * (codegen/cprinter.c: Horner's form over the indices); NULL when an index is not symbolic. */
static const rx_expr *flat_start(rx_sctx *s, const rx_buffer *b, rx_tx *const *idx, int n,
                                 const rx_expr *lo, const nest *nt, const rx_expr *const *repl) {
  rx_expr_ctx *cx = s->cx;
  const rx_expr *flat = sx_const(s->cx, 0);
  for (int i = 0; i < n; i++) {
    const rx_expr *x = i == n - 1                  ? lo
                       : idx[i]->kind == RX_TX_SYM ? idx[i]->sym
                       : idx[i]->kind == RX_TX_INT ? sx_const(s->cx, idx[i]->ival)
                                                   : NULL;
    if (!x) return NULL;
    if (repl && i < n - 1) x = sym_expr_subst(cx, x, nt->vars, repl, (size_t)nt->n);
    flat = sym_expr_add(cx, sym_expr_mul(cx, flat, b->shape[i]), x);
  }
  return flat;
}

/* A row access's flat start (in the nest's variables) against the first one's. */
static void note_start(acc_chk *c, const rx_buffer *b, rx_tx *const *idx, int n) {
  const rx_expr *flat = flat_start(c->s, b, idx, n, c->lo, NULL, NULL);
  if (!flat) {
    c->flat = false;
    return;
  }
  if (!c->start) {
    c->start = flat;
    c->sbuf = b;
    c->sidx = idx;
  }
  int64_t p = pow2_divisor(c->s, sym_expr_sub(c->s->cx, flat, c->start));
  if (p < c->agree) c->agree = p;
}

static void check_access(acc_chk *c, const rx_buffer *b, rx_tx *const *idx, int n) {
  bool uses = false;
  for (int i = 0; i < n; i++) uses |= sched_tx_uses(idx[i], c->j);
  if (!uses) return;
  if (!sched_sym_is(idx[n - 1], c->j) || b->scope != RX_SCOPE_GLOBAL) c->ok = false;
  for (int i = 0; i < n - 1; i++)
    if (sched_tx_uses(idx[i], c->j)) c->ok = false;
  if (ir_dtype_bits(b->dtype) > c->bits) c->bits = ir_dtype_bits(b->dtype);
  int64_t p = pow2_divisor(c->s, b->shape[b->ndim - 1]);
  if (p < c->align) c->align = p;
  if (c->ok) note_start(c, b, idx, n);
}
static bool access_load(const rx_tx *e, void *ud) {
  check_access(ud, e->buf, e->idx, e->nidx);
  return true;
}
static void access_stores(acc_chk *c, const rx_stmt *s) {
  if (!s) return;
  if (s->kind == RX_STMT_STORE) check_access(c, s->buf, s->idx, s->nidx);
  for (int i = 0; i < s->n; i++) access_stores(c, s->body[i]);
  access_stores(c, s->inner);
  access_stores(c, s->init);
  access_stores(c, s->otherwise);
}

/* The aligned form, when no lanes are proven: the most lanes (up to `want`) that every row
 * access's start agrees with modulo the lanes, for rows that can hold ALIGN_MIN_VECTORS. */
static void plan_aligned(rr *r, const acc_chk *c, int want) {
  int V = want;
  while (V > 1 && (V > 16 || V > c->agree)) V /= 2;
  if (V < 2 || !c->flat || !c->start || (r->mb >= 0 && r->mb < (int64_t)ALIGN_MIN_VECTORS * V))
    return;
  r->V = V;
  r->aligned = true;
  r->sbuf = c->sbuf;
  r->sidx = c->sidx;
  r->edges = pow2_divisor(r->s, c->start) >= V ? 1 : 2;
}

/* The lanes: 16 bytes (the target's vector) of the widest row access, as far as every row
 * access allows; the aligned form when that proves none. */
static void plan_lanes(rr *r) {
  rx_sctx *s = r->s;
  const rx_stmt *b = r->nt.body;
  acc_chk c = {.s = s, .lo = r->lo, .align = 1 << 20, .ok = true, .flat = true, .agree = 1 << 20};
  r->uniform = true;
  for (int i = 0; i < sched_seq_len(b); i++) {
    const rx_stmt *st = sched_seq_at(b, i);
    const rx_expr *var, *lo, *ext;
    if (!stage_of(st, &var, &lo, &ext)) continue;
    r->uniform &= lo == r->lo && ext == r->m;
    c.j = var;
    sched_all_loads_stmt(st, access_load, &c);
    access_stores(&c, st);
  }
  r->V = 1;
  if (!r->uniform || !c.ok || c.bits == 0) return;
  int V = s->t->vector_bytes * 8 / c.bits;
  int64_t lim = c.align;
  int64_t dm = pow2_divisor(s, r->m), dl = pow2_divisor(s, r->lo);
  if (dm < lim) lim = dm;
  if (dl < lim) lim = dl;
  int want = V;
  while (V > 1 && (V > 16 || V > lim)) V /= 2;
  r->V = V < 1 ? 1 : V;
  if (r->V == 1) plan_aligned(r, &c, want);
}

/* Counts the inputs each stage reads along the row (read-only kernel buffers, j the exact last
 * index): candidates for the registers. */
typedef struct cache_walk {
  rr *r;
  const rx_expr *j;
  int stage;
} cache_walk;
static bool count_load(const rx_tx *e, void *ud) {
  cache_walk *w = ud;
  rr *r = w->r;
  if (e->nidx == 0 || !sched_sym_is(e->idx[e->nidx - 1], w->j) || !is_param(r->f, e->buf) ||
      stores_to(r->f->body, e->buf))
    return true;
  for (int i = 0; i < e->nidx - 1; i++)
    if (sched_tx_uses(e->idx[i], w->j)) return true;
  rx_tx *canon = sched_subst1_tx(r->s, e, w->j, r->jc);
  for (int i = 0; i < r->ncache; i++) {
    cached *c = &r->cache[i];
    if (c->canon->buf != e->buf ||
        !sched_same_idx(c->canon->idx, c->canon->nidx, canon->idx, canon->nidx))
      continue;
    if (c->last_stage != w->stage) c->stages++;
    c->last_stage = w->stage;
    return true;
  }
  if (r->ncache < MAX_CACHED)
    r->cache[r->ncache++] = (cached){.canon = canon, .stages = 1, .last_stage = w->stage};
  return true;
}

/* Steps of the aligned form's head and tail with T threads per row (0: not the aligned form). */
static int64_t edge_steps(const rr *r, int T) { return r->aligned ? (r->V - 1 + T - 1) / T : 0; }

/* The register form: the inputs read by two stages or more, when they fit ROW_REG_ELEMS per
 * thread (the aligned form's head and tail included) with up to ROW_MAX_THREADS threads per
 * row. */
static void plan_registers(rr *r) {
  r->ncache = 0;
  r->regs = false;
  if (!r->uniform || r->mb < 0) return;
  const rx_stmt *b = r->nt.body;
  for (int i = 0; i < sched_seq_len(b); i++) {
    const rx_stmt *st = sched_seq_at(b, i);
    const rx_expr *lo, *ext;
    cache_walk w = {.r = r, .stage = i};
    if (stage_of(st, &w.j, &lo, &ext)) sched_all_loads_stmt(st, count_load, &w);
  }
  int n = 0;
  for (int i = 0; i < r->ncache; i++)
    if (r->cache[i].stages >= 2) r->cache[n++] = r->cache[i];
  r->ncache = n;
  if (n == 0) return;
  int lim = sched_block_threads(r->s, ROW_MAX_THREADS), T = r->T;
  int64_t K = (r->mb + (int64_t)T * r->V - 1) / ((int64_t)T * r->V);
  while (n * (K * r->V + r->edges * edge_steps(r, T)) > ROW_REG_ELEMS && T * 2 <= lim) {
    T *= 2;
    K = (r->mb + (int64_t)T * r->V - 1) / ((int64_t)T * r->V);
  }
  if (n * (K * r->V + r->edges * edge_steps(r, T)) > ROW_REG_ELEMS) return;
  r->regs = true;
  r->T = T;
  r->K = K < 1 ? 1 : K;
}

/* Lanes, threads per row, rows per block, registers. */
static void plan_rows(rr *r) {
  rx_sctx *s = r->s;
  const rx_stmt *b = r->nt.body;
  for (int i = 0; i < sched_seq_len(b); i++)
    if (sched_seq_at(b, i)->kind == RX_STMT_REDUCE) {
      r->lo = sched_seq_at(b, i)->lo[0];
      r->m = sched_seq_at(b, i)->extent[0];
      break;
    }
  rx_interval mi = sym_analyzer_bounds(s->an, r->m);
  r->mb = mi.hi < ((int64_t)1 << 40) ? (mi.hi < 0 ? 0 : mi.hi) : -1;
  plan_lanes(r);
  int bmax = sched_block_threads(s, BLOCK_THREADS);
  r->T = bmax;
  if (r->mb >= 0) {
    int t = sched_pow2_ceil((r->mb + r->V - 1) / r->V);
    r->T = t > bmax ? bmax : t;
  }
  r->jc = sched_fresh_var(s, "j");
  plan_registers(r);
  r->KE = edge_steps(r, r->T);
  r->RPB = r->T < bmax ? bmax / r->T : 1;
  const rx_expr *nrows = sx_const(s->cx, 1);
  for (int k = 0; k < r->nt.n; k++) nrows = sym_expr_mul(s->cx, nrows, r->nt.ext[k]);
  rx_interval ni = sym_analyzer_bounds(s->an, nrows);
  while (r->RPB > 1 && ni.hi <= r->RPB / 2) r->RPB /= 2;
  r->B = r->T * r->RPB;
}

/* ------------------------------------------------------------------------------------------
 * the kernel: rows of threads, stages
 * ------------------------------------------------------------------------------------------ */

/* Block and thread variables, the rows (the last block's missing rows read the last row), and
 * the analyzer's ranges for them (left bound until the kernel is built). */
static void setup_rows(rr *r) {
  rx_sctx *s = r->s;
  rx_expr_ctx *cx = s->cx;
  r->bx = sched_fresh_var(s, "row");
  r->tid = sched_fresh_var(s, "tx");
  r->lt = r->T == r->B ? r->tid
          : r->T == 1  ? sx_const(s->cx, 0)
                       : sym_expr_floormod(cx, r->tid, sx_const(s->cx, r->T));
  r->rb = r->RPB == 1 ? sx_const(s->cx, 0) : sym_expr_floordiv(cx, r->tid, sx_const(s->cx, r->T));
  const rx_expr *nrows = sx_const(s->cx, 1);
  for (int k = 0; k < r->nt.n; k++) nrows = sym_expr_mul(cx, nrows, r->nt.ext[k]);
  nrows = sym_analyzer_simplify(s->an, nrows);
  r->nblocks = r->RPB == 1 ? nrows : sched_ceildiv(s, nrows, r->RPB);
  sym_analyzer_bind_range(s->an, r->bx, sx_const(s->cx, 0), r->nblocks);
  sym_analyzer_bind_range(s->an, r->tid, sx_const(s->cx, 0), sx_const(s->cx, r->B));
  const rx_expr *row = r->RPB == 1 ? r->bx : sx_add(s->cx, sx_mul_c(s->cx, r->bx, r->RPB), r->rb);
  r->row_ok = r->RPB == 1 ? NULL : sched_bound_guard(s, row, nrows);
  if (r->row_ok) row = sym_expr_min(cx, row, sym_expr_sub(cx, nrows, sx_const(s->cx, 1)));
  sched_fuse(s, r->nt.ext, r->nt.n, row, r->repl);
  for (int k = 0; k < r->nt.n; k++)
    r->repl[k] = sym_analyzer_simplify(s->an, sx_add(s->cx, r->nt.lo[k], r->repl[k]));
  const rx_expr *lead = r->T == 1 ? NULL : sym_expr_cmp(cx, RX_EXPR_EQ, r->lt, sx_const(s->cx, 0));
  r->first = sx_and_opt(s->cx, lead, r->row_ok);
}

/* The aligned form's row: its flat start R (in the row's variables, built as the printers
 * flatten the accesses, so that R cancels in every flat offset of the vectors), A - R with
 * A = (R + V - 1) // V * V (written so that the analyzer sees A is a multiple of V; 0 when R is
 * one), the head, the vectors, the tail. */
static void setup_aligned(rr *r) {
  rx_sctx *s = r->s;
  rx_expr_ctx *cx = s->cx;
  const rx_expr *R = flat_start(s, r->sbuf, r->sidx, r->sbuf->ndim, r->lo, &r->nt, r->repl);
  const rx_expr *A = sx_mul_c(
      s->cx,
      sym_expr_floordiv(cx, sx_add(s->cx, R, sx_const(s->cx, r->V - 1)), sx_const(s->cx, r->V)),
      r->V);
  r->skip = r->edges == 2 ? sym_expr_sub(cx, A, R) : sx_const(s->cx, 0);
  r->head = sym_analyzer_simplify(s->an, sym_expr_min(cx, r->skip, r->m));
  r->nvec = sym_analyzer_simplify(
      s->an, sym_expr_floordiv(cx, sym_expr_sub(cx, r->m, r->head), sx_const(s->cx, r->V)));
  r->tail = sym_analyzer_simplify(s->an, sx_add(s->cx, r->head, sx_mul_c(s->cx, r->nvec, r->V)));
}

/* The parts of a stage: one, or the aligned form's head, vectors and tail, in this order. */
typedef enum part_kind { PART_MAIN, PART_HEAD, PART_TAIL } part_kind;
static int nparts(const rr *r) { return r->aligned ? 1 + r->edges : 1; }
static part_kind part_at(const rr *r, int i) {
  static const part_kind aligned[] = {PART_HEAD, PART_MAIN, PART_TAIL};
  return r->aligned ? aligned[i + 3 - nparts(r)] : PART_MAIN;
}

/* One stage's loops: `for k in 0..K { if GUARD { for v in 0..V vectorize { BODY } } }` with
 * j = lo + (k * T + lt) * V + v (a part of the aligned form: see steps), and the rewriting of
 * its body. */
typedef struct stage {
  rr *r;
  const rx_expr *ko, *v, *K, *guard;
  int V;
  int64_t slot; /* the register form: the part's first element in the per-thread arrays */
  rx_loop_kind kind;
  bool planned; /* the row of the plan: its lanes and registers */
  rx_tx *expect[MAX_CACHED];
  const rx_expr *vars[MAXN + 1], *repl[MAXN + 1];
  rx_rewrite rw;
  size_t mark;
} stage;

static rx_tx *row_hook(rx_rewrite *rw, rx_tx *load) {
  stage *g = rw->ud;
  rr *r = g->r;
  const rx_expr *z = sx_const(rw->s->cx, 0);
  for (int i = 0; i < r->nred; i++)
    if (r->red[i].buf == load->buf &&
        sched_same_idx(load->idx, load->nidx, r->red[i].idx, r->red[i].nidx))
      return sched_load(rw->s, r->red[i].local, &z, 1);
  if (!g->planned || !r->regs) return load;
  for (int i = 0; i < r->ncache; i++) {
    const rx_tx *x = g->expect[i];
    if (x->buf != load->buf || !sched_same_idx(load->idx, load->nidx, x->idx, x->nidx)) continue;
    const rx_expr *at =
        sx_add(rw->s->cx, sx_const(rw->s->cx, g->slot),
               sx_add(rw->s->cx, sx_mul_c(rw->s->cx, g->ko, g->V), g->v ? g->v : z));
    return sched_load(rw->s, r->cache[i].local, &at, 1);
  }
  return load;
}

/* The rewriting of statements outside the stages (row variables only). */
static void outer_stage(rr *r, stage *g) {
  memset(g, 0, sizeof *g);
  g->r = r;
  g->rw = (rx_rewrite){
      .s = r->s, .vars = r->nt.vars, .repl = r->repl, .n = r->nt.n, .hook = row_hook, .ud = g};
}

/* A part's steps: their count K, the element of thread lt's step `step` after lo (lane 0), the
 * guard `val < bound` (none when bound is NULL), the part's slot in the register form. */
typedef struct steps {
  const rx_expr *K, *off, *val, *bound;
  int64_t slot;
} steps;

/* The one part of a stage: T V elements a step, a guard unless the steps are exact. */
static steps plain_steps(rr *r, const stage *g, const rx_expr *ext, const rx_expr *step) {
  rx_sctx *s = r->s;
  int64_t tv = (int64_t)r->T * g->V;
  int64_t d = sym_analyzer_divisor(s->an, ext);
  bool exact = d == 0 || d % tv == 0, regs = g->planned && r->regs;
  const rx_expr *at = sx_mul_c(s->cx, step, g->V);
  steps st = {.off = at, .val = at, .bound = exact && !regs ? NULL : ext};
  if (regs)
    st.K = sx_const(s->cx, r->K);
  else
    st.K = sym_analyzer_simplify(
        s->an, sym_expr_floordiv(s->cx, exact ? ext : sx_add(s->cx, ext, sx_const(s->cx, tv - 1)),
                                 sx_const(s->cx, tv)));
  return st;
}

/* A part of the aligned form: the head's elements lo + step (step < head), the vectors at
 * lo + skip + step * V (step < nvec: the flat offset A + step * V, A a multiple of V), the
 * tail's elements lo + tail + step (fewer than V). The register form keeps the vectors' K V
 * elements first, then the head's KE, then the tail's KE. */
static steps aligned_steps(rr *r, part_kind p, const rx_expr *step) {
  rx_sctx *s = r->s;
  int64_t vec = r->regs ? r->K * r->V : 0;
  if (p == PART_HEAD) return (steps){sx_const(s->cx, r->KE), step, step, r->head, vec};
  if (p == PART_TAIL)
    return (steps){sx_const(s->cx, r->KE), sx_add(s->cx, r->tail, step), step,
                   sym_expr_sub(s->cx, r->m, r->tail), vec + (r->edges - 1) * r->KE};
  const rx_expr *K =
      r->regs
          ? sx_const(s->cx, r->K)
          : sym_analyzer_simplify(
                s->an, sym_expr_floordiv(s->cx, sx_add(s->cx, r->nvec, sx_const(s->cx, r->T - 1)),
                                         sx_const(s->cx, r->T)));
  return (steps){K, sx_add(s->cx, r->skip, sx_mul_c(s->cx, step, r->V)), step, r->nvec, 0};
}

static void stage_open(rr *r, const rx_expr *var, const rx_expr *lo, const rx_expr *ext,
                       part_kind p, stage *g) {
  rx_sctx *s = r->s;
  outer_stage(r, g);
  g->planned = r->uniform && lo == r->lo && ext == r->m;
  bool aligned = g->planned && r->aligned, regs = g->planned && r->regs;
  RX_ASSERT(aligned || p == PART_MAIN);
  g->V = g->planned && p == PART_MAIN ? r->V : 1;
  g->ko = sched_fresh_var(s, "ko");
  g->v = g->V > 1 ? sched_fresh_var(s, "v") : NULL;
  const rx_expr *step = sx_add(s->cx, sx_mul_c(s->cx, g->ko, r->T), r->lt);
  steps st = aligned ? aligned_steps(r, p, step) : plain_steps(r, g, ext, step);
  const rx_expr *j = sx_add(s->cx, lo, st.off);
  if (g->v) j = sx_add(s->cx, j, g->v);
  g->K = st.K;
  g->slot = st.slot;
  g->mark = sym_analyzer_mark(s->an);
  sym_analyzer_bind_range(s->an, g->ko, sx_const(s->cx, 0), g->K);
  if (g->v) sym_analyzer_bind_range(s->an, g->v, sx_const(s->cx, 0), sx_const(s->cx, g->V));
  g->guard = st.bound ? sched_bound_guard(s, st.val, st.bound) : NULL;
  g->kind = regs || (g->K->kind == RX_EXPR_CONST && g->K->value <= ROW_UNROLL) ? RX_LOOP_UNROLL
                                                                               : RX_LOOP_SERIAL;
  for (int k = 0; k < r->nt.n; k++) {
    g->vars[k] = r->nt.vars[k];
    g->repl[k] = r->repl[k];
  }
  g->repl[r->nt.n] = j;
  g->rw.vars = g->vars;
  g->rw.repl = g->repl;
  g->rw.n = r->nt.n + 1;
  if (!regs) {
    g->vars[r->nt.n] = var;
    return;
  }
  g->vars[r->nt.n] = r->jc; /* the cached loads as this stage reads them */
  rx_rewrite plain = g->rw;
  plain.hook = NULL;
  for (int i = 0; i < r->ncache; i++) g->expect[i] = sched_rewrite_tx(&plain, r->cache[i].canon);
  g->vars[r->nt.n] = var;
}

/* The stage's loops around body (lanes_inside: body has its own lane loops over g->v). */
static rx_stmt *stage_close(stage *g, rx_stmt *body, bool lanes_inside) {
  rx_sctx *s = g->r->s;
  if (g->v && !lanes_inside)
    body = sched_for(s, g->v, sx_const(s->cx, g->V), RX_LOOP_VECTORIZE, body);
  body = sched_guard(s, g->guard, body);
  sym_analyzer_reset(s->an, g->mark);
  return sched_for(s, g->ko, g->K, g->kind, body);
}

/* The register form's prologue: each cached input read once into its per-thread array. */
static void load_cache(rr *r) {
  rx_sctx *s = r->s;
  for (int i = 0; i < r->ncache; i++) {
    cached *c = &r->cache[i];
    rx_stmt *al;
    int64_t n = r->K * r->V + (r->aligned ? r->edges * r->KE : 0);
    c->local = sched_alloc(s, "xr", c->canon->buf->dtype, RX_SCOPE_LOCAL, &n, 1, &al);
    RX_VEC_PUSH(&r->out, al);
    for (int q = 0; q < nparts(r); q++) {
      stage g;
      stage_open(r, r->jc, r->lo, r->m, part_at(r, q), &g);
      rx_rewrite plain = g.rw;
      plain.hook = NULL;
      const rx_expr *at =
          sx_add(s->cx, sx_const(s->cx, g.slot),
                 sx_add(s->cx, sx_mul_c(s->cx, g.ko, g.V), g.v ? g.v : sx_const(s->cx, 0)));
      rx_stmt *st = sched_store_e(s, c->local, &at, 1, sched_rewrite_tx(&plain, c->canon));
      RX_VEC_PUSH(&r->out, stage_close(&g, st, false));
    }
  }
}

/* ------------------------------------------------------------------------------------------
 * reductions across the threads of a row
 * ------------------------------------------------------------------------------------------ */

/* The total of val over the T threads of each row (every thread of the row gets it): the
 * block's reduction when a block is one row; else subgroup operations when subgroups are
 * segments of a row, then a shared array; or a shared tree over each row's segment. */
static rx_tx *seg_reduce(rr *r, rx_tx *val, rx_combiner c, rx_dtype t) {
  rx_sctx *s = r->s;
  rx_expr_ctx *cx = s->cx;
  if (r->RPB == 1) return sched_xreduce(s, &r->out, val, c, t, r->B, r->tid);
  rx_local *tot = sched_local(s, "total", t);
  if (r->T == 1) {
    RX_VEC_PUSH(&r->out, sched_let(s, tot, val));
    return ir_tx_local(s->m, tot, s->loc);
  }
  int sg = s->t->subgroup_size;
  bool sub = sg > 1 && tgt_target_subgroup_dtype(s->t, t) && r->T % sg == 0;
  int per = sub ? r->T / sg : r->T; /* shared entries of a row */
  if (sub) {
    rx_intrinsic op = c == RX_COMB_SUM   ? RX_INTRIN_SUBGROUP_SUM
                      : c == RX_COMB_MAX ? RX_INTRIN_SUBGROUP_MAX
                                         : RX_INTRIN_SUBGROUP_MIN;
    rx_local *w = sched_local(s, "warp_red", t);
    RX_VEC_PUSH(&r->out, sched_let(s, w, ir_tx_call(s->m, op, &val, 1, s->loc)));
    val = ir_tx_local(s->m, w, s->loc);
    if (per == 1) {
      RX_VEC_PUSH(&r->out, sched_let(s, tot, val));
      return ir_tx_local(s->m, tot, s->loc);
    }
  }
  rx_stmt *al;
  int64_t shp[1] = {(int64_t)r->RPB * per};
  rx_buffer *red = sched_alloc(s, "red_buf", t, RX_SCOPE_SHARED, shp, 1, &al);
  RX_VEC_PUSH(&r->out, al);
  const rx_expr *slot = sub ? sym_expr_floordiv(cx, r->tid, sx_const(s->cx, sg)) : r->tid;
  const rx_expr *lead =
      sub ? sym_expr_cmp(cx, RX_EXPR_EQ, sym_expr_floormod(cx, r->tid, sx_const(s->cx, sg)),
                         sx_const(s->cx, 0))
          : NULL;
  RX_VEC_PUSH(&r->out, sched_guard(s, lead, sched_store_e(s, red, &slot, 1, val)));
  RX_VEC_PUSH(&r->out, sched_barrier(s));
  const rx_expr *base = sx_mul_c(s->cx, r->rb, per);
  for (int half = per / 2; half >= 1 && !sub; half /= 2) {
    const rx_expr *other = sx_add(s->cx, r->tid, sx_const(s->cx, half));
    rx_stmt *st = sched_store_e(
        s, red, &r->tid, 1,
        sched_combine(s, c, sched_load(s, red, &r->tid, 1), sched_load(s, red, &other, 1)));
    RX_VEC_PUSH(&r->out, sched_guard(s, sx_lt(s->cx, r->lt, sx_const(s->cx, half)), st));
    RX_VEC_PUSH(&r->out, sched_barrier(s));
  }
  if (!sub) {
    RX_VEC_PUSH(&r->out, sched_let(s, tot, sched_load(s, red, &base, 1)));
    return ir_tx_local(s->m, tot, s->loc);
  }
  /* every thread combines its row's subgroup values, in order */
  int64_t one[1] = {1};
  rx_buffer *acc = sched_alloc(s, "red_acc", t, RX_SCOPE_LOCAL, one, 1, &al);
  RX_VEC_PUSH(&r->out, al);
  const rx_expr *z = sx_const(s->cx, 0), *q = sched_fresh_var(s, "q");
  const rx_expr *at = sx_add(s->cx, base, sx_add(s->cx, q, sx_const(s->cx, 1)));
  RX_VEC_PUSH(&r->out, sched_store_e(s, acc, &z, 1, sched_load(s, red, &base, 1)));
  rx_stmt *upd = sched_store_e(
      s, acc, &z, 1, sched_combine(s, c, sched_load(s, acc, &z, 1), sched_load(s, red, &at, 1)));
  RX_VEC_PUSH(&r->out, sched_for(s, q, sx_const(s->cx, per - 1), RX_LOOP_UNROLL, upd));
  RX_VEC_PUSH(&r->out, sched_let(s, tot, sched_load(s, acc, &z, 1)));
  return ir_tx_local(s->m, tot, s->loc);
}

/* The reduction's init, exactly: acc = combine(v0, total); a global accumulator is kept in a
 * per-thread local (the broadcast; later loads of it read the local) and stored by the row's
 * first thread. Returns the accumulator's value as later code reads it. */
static rx_tx *finish_reduce(rr *r, const red_info *red, rx_tx *tot) {
  rx_sctx *s = r->s;
  stage g;
  outer_stage(r, &g);
  rx_dtype dt = red->upd_store->buf->dtype;
  for (int l = 0; l < red->ninit_lets; l++)
    RX_VEC_PUSH(&r->out, sched_rewrite_stmt(&g.rw, red->init_lets[l]));
  rx_tx *v0 = sched_rewrite_tx(&g.rw, red->init_store->value);
  if (v0->dtype != dt || v0->weak) v0 = ir_tx_cast(s->m, dt, v0, s->loc);
  rx_tx *fin =
      red->acc_first ? sched_combine(s, red->comb, v0, tot) : sched_combine(s, red->comb, tot, v0);
  rx_stmt *accst = sched_rewrite_stmt(&g.rw, red->init_store);
  if (red->upd_store->buf->scope == RX_SCOPE_LOCAL) {
    accst->value = fin;
    RX_VEC_PUSH(&r->out, accst);
    return ir_tx_load(s->m, accst->buf, accst->idx, accst->nidx, s->loc);
  }
  rx_stmt *al;
  int64_t one[1] = {1};
  const rx_expr *z = sx_const(s->cx, 0);
  rx_buffer *lb = sched_alloc(s, "rowval", dt, RX_SCOPE_LOCAL, one, 1, &al);
  RX_VEC_PUSH(&r->out, al);
  RX_VEC_PUSH(&r->out, sched_store_e(s, lb, &z, 1, fin));
  accst->value = sched_load(s, lb, &z, 1);
  RX_VEC_PUSH(&r->out, sched_guard(s, r->first, accst));
  if (r->nred < MAX_REDIRECTS)
    r->red[r->nred++] = (redirect){accst->buf, accst->idx, accst->nidx, lb};
  return sched_load(s, lb, &z, 1);
}

/* A REDUCE stage: per-thread partials over the row, then across the row's threads. */
static void emit_reduce(rr *r, const rx_stmt *st) {
  rx_sctx *s = r->s;
  red_info red;
  sched_red_parse(st, &red);
  rx_dtype dt = red.upd_store->buf->dtype;
  rx_tx *ident = NULL;
  sched_identity(s, red.comb, dt, &ident);
  rx_stmt *al;
  int64_t one[1] = {1};
  const rx_expr *z = sx_const(s->cx, 0);
  rx_buffer *part = sched_alloc(s, "part", dt, RX_SCOPE_LOCAL, one, 1, &al);
  RX_VEC_PUSH(&r->out, al);
  RX_VEC_PUSH(&r->out, sched_store_e(s, part, &z, 1, ident));
  for (int q = 0; q < nparts(r); q++) {
    stage g;
    stage_open(r, red.k, red.klo, red.kext, part_at(r, q), &g);
    rx_stmtvec ub = {0};
    for (int l = 0; l < red.nupd_lets; l++)
      RX_VEC_PUSH(&ub, sched_rewrite_stmt(&g.rw, red.upd_lets[l]));
    rx_tx *xv = sched_rewrite_tx(&g.rw, red.x), *pl = sched_load(s, part, &z, 1);
    RX_VEC_PUSH(&ub, sched_store_e(s, part, &z, 1,
                                   red.acc_first ? sched_combine(s, red.comb, pl, xv)
                                                 : sched_combine(s, red.comb, xv, pl)));
    RX_VEC_PUSH(&r->out, stage_close(&g, sched_seq(s, &ub), false));
  }
  finish_reduce(r, &red, seg_reduce(r, sched_load(s, part, &z, 1), red.comb, dt));
}

/* ------------------------------------------------------------------------------------------
 * online softmax
 * ------------------------------------------------------------------------------------------ */
typedef struct online {
  red_info mx, sum;
  rx_intrinsic ex;        /* EXP or EXP2 */
  rx_tx *pscale, *qscale; /* the literal factors of X and of mx[0] (NULL: none) */
} online;

/* e as x * lit (or lit * x): x, and the literal in *lit (NULL when e is not such a product). */
static const rx_tx *scaled(const rx_tx *e, rx_tx **lit) {
  *lit = NULL;
  if (e->kind != RX_TX_BINARY || e->binop != RX_BINOP_MUL) return e;
  if (e->b->kind == RX_TX_FLOAT) {
    *lit = e->b;
    return e->a;
  }
  if (e->a->kind == RX_TX_FLOAT) {
    *lit = e->a;
    return e->b;
  }
  return e;
}

/* a (a max into a local mx) and b (a sum of exp(X - mx[0]), exp2((X - mx[0]) * c) or
 * exp2(X * c - mx[0] * c), c > 0, into a local, X the max's) over the same range, neither with
 * lets in its update. */
static bool match_online(rr *r, const rx_stmt *a, const rx_stmt *b, online *on) {
  memset(on, 0, sizeof *on);
  if (r->regs || !sched_red_parse(a, &on->mx) || !sched_red_parse(b, &on->sum)) return false;
  const red_info *mx = &on->mx, *sm = &on->sum;
  rx_dtype dt = mx->upd_store->buf->dtype;
  if (mx->comb != RX_COMB_MAX || sm->comb != RX_COMB_SUM || mx->nupd_lets || sm->nupd_lets ||
      mx->upd_store->buf->scope != RX_SCOPE_LOCAL || sm->upd_store->buf->scope != RX_SCOPE_LOCAL ||
      !ir_dtype_is_float(dt) || mx->x->dtype != dt || sm->upd_store->buf->dtype != dt ||
      mx->klo != sm->klo || mx->kext != sm->kext)
    return false;
  const rx_tx *e = sm->x;
  if (e->kind != RX_TX_CALL || (e->intrin != RX_INTRIN_EXP && e->intrin != RX_INTRIN_EXP2) ||
      e->dtype != dt)
    return false;
  on->ex = e->intrin;
  rx_tx *dscale;
  const rx_tx *d = scaled(e->a, &dscale), *p, *q; /* (X - mx[0]) * c */
  if (d->kind != RX_TX_BINARY || d->binop != RX_BINOP_SUB) return false;
  if (dscale) {
    p = d->a;
    q = d->b;
    on->pscale = on->qscale = dscale;
  } else { /* X * c - mx[0] * c */
    p = scaled(d->a, &on->pscale);
    q = scaled(d->b, &on->qscale);
  }
  if (!sched_is_acc_load(q, mx->upd_store) || (on->pscale == NULL) != (on->qscale == NULL))
    return false;
  if (on->pscale &&
      (on->pscale->fval != on->qscale->fval || !(on->pscale->fval > 0) || on->pscale->dtype != dt))
    return false;
  rx_tx *x1 = sched_subst1_tx(r->s, mx->x, mx->k, r->jc);
  rx_tx *x2 = sched_subst1_tx(r->s, p, sm->k, r->jc);
  return tx_equal(x1, x2) && !sched_tx_loads(p, mx->upd_store->buf);
}

static rx_tx *scale_by(rr *r, rx_tx *x, rx_tx *lit) {
  return lit ? ir_tx_binary(r->s->m, RX_BINOP_MUL, x, lit, r->s->loc) : x;
}

/* exp(x - m) in the sum's form: exp(x - m) or exp2((x - m) * c). The difference is taken
 * before the scaling: x * c - m * c overflows to -inf - -inf = NaN where x and m are both about
 * -FLT_MAX (a row masked with finfo.min, as Hugging Face's attention masks are), while
 * (x - m) * c is 0 there, as onnxruntime computes it. */
static rx_tx *rel_exp(rr *r, const online *on, rx_tx *x, rx_tx *m) {
  rx_tx *d = scale_by(r, ir_tx_binary(r->s->m, RX_BINOP_SUB, x, m, r->s->loc), on->pscale);
  return ir_tx_call(r->s->m, on->ex, &d, 1, r->s->loc);
}

/* v, or 0 when the max m is -inf (no element yet: v would be inf - inf). */
static rx_tx *if_seen(rr *r, rx_tx *m, rx_tx *v, rx_dtype dt) {
  rx_module *mod = r->s->m;
  rx_loc loc = r->s->loc;
  rx_tx *none = ir_tx_binary(mod, RX_BINOP_EQ, m, ir_tx_float(mod, -INFINITY, dt, false, loc), loc);
  return ir_tx_select(mod, none, ir_tx_float(mod, 0.0, dt, false, loc), v, loc);
}

static rx_buffer *local1(rr *r, rx_stmtvec *out, const char *name, rx_dtype dt, int64_t n,
                         rx_tx *init) {
  rx_stmt *al;
  const rx_expr *z = sx_const(r->s->cx, 0);
  rx_buffer *b = sched_alloc(r->s, name, dt, RX_SCOPE_LOCAL, &n, 1, &al);
  RX_VEC_PUSH(out, al);
  if (init) RX_VEC_PUSH(out, sched_store_e(r->s, b, &z, 1, init));
  return b;
}

#define LD(b, i) sched_load(s, (b), &(i), 1)
/* One part of the sweep: per step, the V elements into registers, the new running max (pm),
 * the running sum (ps) rescaled to it plus the step's terms. */
static void online_part(rr *r, const online *on, rx_buffer *pm, rx_buffer *ps, part_kind p) {
  rx_sctx *s = r->s;
  rx_dtype dt = on->mx.upd_store->buf->dtype;
  const rx_expr *z = sx_const(s->cx, 0);
  rx_tx *zero = ir_tx_float(s->m, 0.0, dt, false, s->loc);
  stage g;
  stage_open(r, on->mx.k, on->mx.klo, on->mx.kext, p, &g);
  rx_stmtvec body = {0};
  rx_buffer *xs = local1(r, &body, "xs", dt, g.V, NULL);
  const rx_expr *lane = g.v ? g.v : z;
  rx_stmt *cp = sched_store_e(s, xs, &lane, 1, sched_rewrite_tx(&g.rw, on->mx.x));
  RX_VEC_PUSH(&body, g.v ? sched_for(s, g.v, sx_const(s->cx, g.V), RX_LOOP_VECTORIZE, cp) : cp);
  rx_buffer *nm = local1(r, &body, "nmax", dt, 1, LD(pm, z));
  const rx_expr *u = sched_fresh_var(s, "u"), *u2 = sched_fresh_var(s, "u");
  rx_tx *mx = sched_combine(s, RX_COMB_MAX, LD(nm, z), LD(xs, u));
  RX_VEC_PUSH(&body, sched_for(s, u, sx_const(s->cx, g.V), RX_LOOP_UNROLL,
                               sched_store_e(s, nm, &z, 1, mx)));
  rx_buffer *es = local1(r, &body, "esum", dt, 1, zero);
  rx_tx *term = sched_combine(s, RX_COMB_SUM, LD(es, z), rel_exp(r, on, LD(xs, u2), LD(nm, z)));
  RX_VEC_PUSH(&body, sched_for(s, u2, sx_const(s->cx, g.V), RX_LOOP_UNROLL,
                               sched_store_e(s, es, &z, 1, term)));
  rx_tx *old =
      ir_tx_binary(s->m, RX_BINOP_MUL, LD(ps, z), rel_exp(r, on, LD(pm, z), LD(nm, z)), s->loc);
  rx_tx *sum = sched_combine(s, RX_COMB_SUM, old, LD(es, z));
  RX_VEC_PUSH(&body, sched_store_e(s, ps, &z, 1, if_seen(r, LD(nm, z), sum, dt)));
  RX_VEC_PUSH(&body, sched_store_e(s, pm, &z, 1, LD(nm, z)));
  RX_VEC_PUSH(&r->out, stage_close(&g, sched_seq(s, &body), true));
}

/* The max and the sum in one sweep (online_part, over each part of the row), then across the
 * row's threads. */
static void emit_online(rr *r, const online *on) {
  rx_sctx *s = r->s;
  rx_dtype dt = on->mx.upd_store->buf->dtype;
  const rx_expr *z = sx_const(s->cx, 0);
  rx_tx *ninf = NULL, *zero = ir_tx_float(s->m, 0.0, dt, false, s->loc);
  sched_identity(s, RX_COMB_MAX, dt, &ninf);
  rx_buffer *pm = local1(r, &r->out, "pmax", dt, 1, ninf);
  rx_buffer *ps = local1(r, &r->out, "psum", dt, 1, zero);
  for (int q = 0; q < nparts(r); q++) online_part(r, on, pm, ps, part_at(r, q));
  rx_tx *mxv = finish_reduce(r, &on->mx, seg_reduce(r, LD(pm, z), RX_COMB_MAX, dt));
  rx_tx *mine = ir_tx_binary(s->m, RX_BINOP_MUL, LD(ps, z), rel_exp(r, on, LD(pm, z), mxv), s->loc);
  finish_reduce(r, &on->sum, seg_reduce(r, if_seen(r, LD(pm, z), mine, dt), RX_COMB_SUM, dt));
}
#undef LD

/* ------------------------------------------------------------------------------------------
 * the rule
 * ------------------------------------------------------------------------------------------ */
static void emit_item(rr *r, const rx_stmt *st) {
  stage g;
  switch (st->kind) {
  case RX_STMT_ALLOC:
  case RX_STMT_LET:
    outer_stage(r, &g);
    RX_VEC_PUSH(&r->out, sched_rewrite_stmt(&g.rw, st));
    break;
  case RX_STMT_STORE:
    outer_stage(r, &g);
    RX_VEC_PUSH(&r->out, sched_guard(r->s, r->first, sched_rewrite_stmt(&g.rw, st)));
    break;
  case RX_STMT_FOR:
    for (int q = 0; q < nparts(r); q++) {
      stage_open(r, st->vars[0], st->lo[0], st->extent[0], part_at(r, q), &g);
      rx_stmt *body = sched_rewrite_stmt(&g.rw, st->inner);
      RX_VEC_PUSH(&r->out, sched_guard(r->s, r->row_ok, stage_close(&g, body, false)));
    }
    break;
  case RX_STMT_REDUCE:
    emit_reduce(r, st);
    break;
  default:
    break;
  }
}

static rx_stmt *row_schedule(rx_sctx *s, const rx_tensor_fn *f, const nest *nt) {
  rr *r = base_calloc(1, sizeof *r);
  r->s = s;
  r->f = f;
  r->nt = *nt;
  size_t mk = sym_analyzer_mark(s->an);
  plan_rows(r);
  setup_rows(r);
  if (r->aligned) setup_aligned(r);
  if (r->regs) load_cache(r);
  const rx_stmt *b = nt->body;
  int n = sched_seq_len(b);
  for (int i = 0; i < n; i++) {
    const rx_stmt *st = sched_seq_at(b, i);
    int k = i + 1;
    while (k < n && sched_seq_at(b, k)->kind == RX_STMT_ALLOC) k++;
    online on;
    if (st->kind == RX_STMT_REDUCE && k < n && match_online(r, st, sched_seq_at(b, k), &on)) {
      for (int a = i + 1; a < k; a++) emit_item(r, sched_seq_at(b, a));
      emit_online(r, &on);
      i = k;
    } else {
      emit_item(r, st);
    }
  }
  sym_analyzer_reset(s->an, mk);
  rx_stmt *kernel = sched_kernel1(s, r->bx, r->nblocks, r->tid, r->B, sched_seq(s, &r->out));
  free(r);
  return kernel;
}

bool sched_row_reduction(rx_sctx *s, const rx_tensor_fn *f, sched_out *o) {
  nest rn;
  if (!row_match(f, &rn)) return false;
  o->body = row_schedule(s, f, &rn);
  rx_sched_variant v = {NULL, RX_SCHED_ROW_REDUCTION, NULL};
  sched_set_variants(o->m, o->res, &v, 1);
  return true;
}
