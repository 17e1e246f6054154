/* Shape-aware scheduling of tensor programs: the default rules, specialization, the entry
 * points and the contract check (schedule.h). The primitives are in sched_prims.c.
 *
 * Accepted forms (what tests/kernels/ and legalization write; anything else goes to FALLBACK):
 *
 *   ELEMENTWISE    the body is one nest of serial loops `for i0.., i1.. { LET... STORE... }`
 *                  whose stores index exactly a permutation of the loop variables, and whose
 *                  loads of stored buffers use the same indices as the store. Loops are
 *                  reordered to follow the store (coalesced stores), fused, split by the block
 *                  size (256 or the target's limit), bound to blockIdx.x/threadIdx.x; the tail
 *                  is guarded unless the analyzer proves the total divisible. Vectorized by
 *                  vector_bytes (at most 4 lanes) when the innermost extent is provably
 *                  divisible and every access that uses the innermost variable has it as its
 *                  last index.
 *   ROW_REDUCTION  `for rows... { ITEM... }` where ITEM is `alloc NAME: T[consts] local`, a
 *                  `let`, a store (not using a row-local loop), a `reduce j in 0..m { init {
 *                  LET... acc = v0 } update { LET... acc = acc + X | max(acc, X) | min(acc, X) }
 *                  }` whose X uses j only as the last index of its loads (innermost axis), or a
 *                  `for j in 0..m { ... }` stage whose stores have j as their last index. One
 *                  block per row (rows fused); each REDUCE accumulates strided partials with
 *                  the combiner's identity, reduces them across threads (subgroup + shared, or
 *                  a shared tree) and applies init exactly: acc = combine(v0, total). A reduced
 *                  value that is not in a local buffer is kept in a per-thread local (the
 *                  broadcast) and written to memory by thread 0.
 *   GEMV / GEMM    `for batch..., i, j { reduce k { init { C = v0 } update { C = C + P * Q } } }`
 *                  with C = c[batch..., i, j], P using i and k but not j, Q using k and j but not
 *                  i (P and Q may be casts of loads: f16 inputs with f32 accumulation); or the
 *                  same with the accumulator an `alloc acc: T[1] local` of the (i, j) body, the
 *                  reduce into acc[0] and then one store c[batch..., i, j] = E(acc[0]). A row
 *                  count (extent of i) statically 1 gives GEMV; a symbolic one gives variants
 *                  `n == 1` -> gemv, `n <= 16` -> small-tile gemm, otherwise gemm.
 *   FALLBACK       every top-level statement becomes a kernel: its outer serial loops whose
 *                  iterations write disjoint elements are fused, split and bound; the rest runs
 *                  serially per thread (or in one thread when no loop is independent). */
#include "schedule.h"

#include "sched_prims.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *rx_sched_rule_name(rx_sched_rule r) {
  static const char *names[] = {
#define X(e, n) n,
      RX_SCHED_RULES(X)
#undef X
  };
  return (unsigned)r < RX_SCHED_RULE_COUNT ? names[r] : "?";
}

#define MAXN 8

/* ------------------------------------------------------------------------------------------
 * helpers
 * ------------------------------------------------------------------------------------------ */
static const rx_stmt *unwrap(const rx_stmt *s) {
  while (s && s->kind == RX_STMT_SEQ && s->n == 1) s = s->body[0];
  return s;
}
static int seq_len(const rx_stmt *s) { return s->kind == RX_STMT_SEQ ? s->n : 1; }
static const rx_stmt *seq_at(const rx_stmt *s, int i) {
  return s->kind == RX_STMT_SEQ ? s->body[i] : s;
}

typedef struct nest {
  const rx_expr *vars[MAXN], *lo[MAXN], *ext[MAXN];
  int n;
  const rx_stmt *body; /* innermost body */
} nest;

/* The perfectly nested serial loops starting at st (at most MAXN). */
static void get_nest(const rx_stmt *st, nest *out) {
  out->n = 0;
  st = unwrap(st);
  out->body = st;
  while (st && st->kind == RX_STMT_FOR && st->loop_kind == RX_LOOP_SERIAL && out->n < MAXN) {
    out->vars[out->n] = st->vars[0];
    out->lo[out->n] = st->lo[0];
    out->ext[out->n] = st->extent[0];
    out->n++;
    out->body = st->inner;
    st = unwrap(st->inner);
  }
}

static bool sym_is(const rx_tx *e, const rx_expr *v) { return e->kind == RX_TX_SYM && e->sym == v; }
static bool tx_uses(const rx_tx *e, const rx_expr *v) {
  if (!e) return false;
  if (e->kind == RX_TX_SYM) return rx_expr_uses_var(e->sym, v);
  for (int i = 0; i < e->nidx; i++)
    if (tx_uses(e->idx[i], v)) return true;
  return tx_uses(e->a, v) || tx_uses(e->b, v) || tx_uses(e->c, v);
}
static bool tx_loads(const rx_tx *e, const rx_buffer *b) {
  if (!e) return false;
  if (e->kind == RX_TX_LOAD && e->buf == b) return true;
  for (int i = 0; i < e->nidx; i++)
    if (tx_loads(e->idx[i], b)) return true;
  return tx_loads(e->a, b) || tx_loads(e->b, b) || tx_loads(e->c, b);
}
static bool stmt_has_bound(const rx_stmt *s) {
  if (!s) return false;
  if ((s->kind == RX_STMT_FOR && rx_loop_is_bound(s->loop_kind)) || s->kind == RX_STMT_BARRIER)
    return true;
  for (int i = 0; i < s->n; i++)
    if (stmt_has_bound(s->body[i])) return true;
  return stmt_has_bound(s->inner) || stmt_has_bound(s->init) || stmt_has_bound(s->otherwise);
}
static bool tx_has_subgroup(const rx_tx *e) {
  if (!e) return false;
  if (e->kind == RX_TX_CALL && rx_intrinsic_kind(e->intrin) == 's') return true;
  for (int i = 0; i < e->nidx; i++)
    if (tx_has_subgroup(e->idx[i])) return true;
  return tx_has_subgroup(e->a) || tx_has_subgroup(e->b) || tx_has_subgroup(e->c);
}
/* Index expressions equal as integers: the same canonical symbolic node or the same literal. */
static bool idx_eq(const rx_tx *a, const rx_tx *b) {
  if (a->kind == RX_TX_SYM && b->kind == RX_TX_SYM) return a->sym == b->sym;
  int64_t va, vb;
  if (a->kind == RX_TX_INT)
    va = a->ival;
  else if (a->kind == RX_TX_SYM && a->sym->kind == RX_EXPR_CONST)
    va = a->sym->value;
  else
    return false;
  if (b->kind == RX_TX_INT)
    vb = b->ival;
  else if (b->kind == RX_TX_SYM && b->sym->kind == RX_EXPR_CONST)
    vb = b->sym->value;
  else
    return false;
  return va == vb;
}
static bool same_idx(rx_tx *const *a, int na, rx_tx *const *b, int nb) {
  if (na != nb) return false;
  for (int i = 0; i < na; i++)
    if (!idx_eq(a[i], b[i])) return false;
  return true;
}

/* Visits every load in e. */
typedef bool (*load_pred)(const rx_tx *load, void *ud);
static bool all_loads(const rx_tx *e, load_pred p, void *ud) {
  if (!e) return true;
  if (e->kind == RX_TX_LOAD && !p(e, ud)) return false;
  for (int i = 0; i < e->nidx; i++)
    if (!all_loads(e->idx[i], p, ud)) return false;
  return all_loads(e->a, p, ud) && all_loads(e->b, p, ud) && all_loads(e->c, p, ud);
}
static bool all_loads_stmt(const rx_stmt *s, load_pred p, void *ud) {
  if (!s) return true;
  for (int i = 0; i < s->n; i++)
    if (!all_loads_stmt(s->body[i], p, ud)) return false;
  for (int i = 0; i < s->nidx; i++)
    if (!all_loads(s->idx[i], p, ud)) return false;
  return all_loads(s->value, p, ud) && all_loads_stmt(s->inner, p, ud) &&
         all_loads_stmt(s->init, p, ud) && all_loads_stmt(s->otherwise, p, ud);
}

static int pow2_floor(int x) {
  int p = 1;
  while (p * 2 <= x) p *= 2;
  return p;
}
static int pow2_ceil(int64_t x) {
  int p = 1;
  while (p < x && p < (1 << 20)) p *= 2;
  return p;
}
/* Threads of a 1-D block: 256 or the target's (power-of-two) limit. */
static int block_threads(const rx_sctx *s, int want) {
  int lim = s->t->max_threads_per_block;
  if (s->t->max_block_dim[0] > 0 && s->t->max_block_dim[0] < lim) lim = s->t->max_block_dim[0];
  int b = want < lim ? want : lim;
  return pow2_floor(b < 1 ? 1 : b);
}

static rx_stmt *kernel1(rx_sctx *s, const rx_expr *bx, const rx_expr *nblocks, const rx_expr *tx,
                        int threads, rx_stmt *body) {
  rx_stmt *t = rx_sched_for(s, tx, rx_expr_const(s->cx, threads), RX_LOOP_THREAD_X, body);
  return rx_sched_for(s, bx, nblocks, RX_LOOP_BLOCK_X, t);
}

static const rx_expr *E(rx_sctx *s, int64_t v) { return rx_expr_const(s->cx, v); }
static const rx_expr *ADD(rx_sctx *s, const rx_expr *a, const rx_expr *b) {
  return rx_expr_add(s->cx, a, b);
}
static const rx_expr *MUL(rx_sctx *s, const rx_expr *a, int64_t c) {
  return rx_expr_mul(s->cx, a, E(s, c));
}
static const rx_expr *LT(rx_sctx *s, const rx_expr *a, const rx_expr *b) {
  return rx_expr_cmp(s->cx, RX_EXPR_LT, a, b);
}
static const rx_expr *AND(rx_sctx *s, const rx_expr *a, const rx_expr *b) {
  if (!a) return b;
  if (!b) return a;
  return rx_expr_and(s->cx, a, b);
}
/* `v < ext` unless the analyzer proves it with the given ranges already bound. */
static const rx_expr *bound_guard(rx_sctx *s, const rx_expr *v, const rx_expr *ext) {
  const rx_expr *c = rx_analyzer_simplify(s->an, LT(s, v, ext));
  if (rx_expr_is_const(c, 1) || rx_sched_proves(s, c)) return NULL;
  return c;
}

/* ------------------------------------------------------------------------------------------
 * ELEMENTWISE
 * ------------------------------------------------------------------------------------------ */
typedef struct ew_info {
  nest nt;
  int perm[MAXN]; /* store index k is loop var perm[k] (of the first store) */
  bool same_perm;
} ew_info;

typedef struct store_ref {
  const rx_stmt *st;
} store_ref;

static bool ew_match(const rx_tensor_fn *f, ew_info *w) {
  if (seq_len(f->body) != 1) return false;
  get_nest(seq_at(f->body, 0), &w->nt);
  nest *nt = &w->nt;
  if (nt->n == 0) return false;
  const rx_stmt *b = nt->body;
  int nst = 0;
  w->same_perm = true;
  for (int i = 0; i < seq_len(b); i++) {
    const rx_stmt *st = seq_at(b, i);
    if (st->kind == RX_STMT_LET) continue;
    if (st->kind != RX_STMT_STORE || st->nidx != nt->n) return false;
    int perm[MAXN];
    bool seen[MAXN] = {0};
    for (int k = 0; k < st->nidx; k++) {
      int which = -1;
      for (int v = 0; v < nt->n; v++)
        if (sym_is(st->idx[k], nt->vars[v])) which = v;
      if (which < 0 || seen[which]) return false;
      seen[which] = true;
      perm[k] = which;
    }
    if (nst == 0)
      memcpy(w->perm, perm, sizeof perm);
    else if (memcmp(w->perm, perm, sizeof(int) * (size_t)nt->n) != 0)
      w->same_perm = false;
    nst++;
  }
  if (nst == 0) return false;
  /* loads of stored buffers must read the point being written */
  for (int i = 0; i < seq_len(b); i++) {
    const rx_stmt *st = seq_at(b, i);
    if (st->kind != RX_STMT_STORE) continue;
    for (int j = 0; j < seq_len(b); j++) {
      const rx_stmt *u = seq_at(b, j);
      /* every load of st->buf anywhere in the body */
      struct chk {
        const rx_stmt *st;
      } c = {st};
      (void)c;
      if (!tx_loads(u->value, st->buf)) continue;
      /* check each load of the buffer has the same indices */
      const rx_stmt *target = st;
      bool ok = true;
      /* small recursive lambda substitute */
      const rx_tx *stack[256];
      int sp = 0;
      stack[sp++] = u->value;
      while (sp > 0 && ok) {
        const rx_tx *e = stack[--sp];
        if (!e) continue;
        if (e->kind == RX_TX_LOAD && e->buf == target->buf &&
            !same_idx(e->idx, e->nidx, target->idx, target->nidx))
          ok = false;
        if (sp + 3 + e->nidx >= 256) return false;
        for (int k = 0; k < e->nidx; k++) stack[sp++] = e->idx[k];
        stack[sp++] = e->a;
        stack[sp++] = e->b;
        stack[sp++] = e->c;
      }
      if (!ok) return false;
    }
  }
  return true;
}

typedef struct vec_chk {
  const rx_expr *v;
} vec_chk;
static bool vec_load_ok(const rx_tx *e, void *ud) {
  const rx_expr *v = ((vec_chk *)ud)->v;
  for (int k = 0; k < e->nidx; k++) {
    bool last = k == e->nidx - 1;
    if (last) {
      if (tx_uses(e->idx[k], v) && !sym_is(e->idx[k], v)) return false;
    } else if (tx_uses(e->idx[k], v)) {
      return false;
    }
  }
  return true;
}

static int max_bits_tx(const rx_tx *e) {
  if (!e) return 0;
  int b = e->kind == RX_TX_LOAD ? rx_dtype_bits(e->buf->dtype) : 0;
  for (int i = 0; i < e->nidx; i++) {
    int x = max_bits_tx(e->idx[i]);
    if (x > b) b = x;
  }
  int x = max_bits_tx(e->a);
  if (x > b) b = x;
  x = max_bits_tx(e->b);
  if (x > b) b = x;
  x = max_bits_tx(e->c);
  return x > b ? x : b;
}

static rx_stmt *ew_schedule(rx_sctx *s, ew_info *w) {
  nest *nt = &w->nt;
  int n = nt->n;
  const rx_expr *ov[MAXN], *olo[MAXN], *oe[MAXN];
  for (int k = 0; k < n; k++) {
    int v = w->same_perm ? w->perm[k] : k; /* reorder: loops follow the store's index order */
    ov[k] = nt->vars[v];
    olo[k] = nt->lo[v];
    oe[k] = nt->ext[v];
  }
  const rx_stmt *body = nt->body;
  /* vector width */
  int V = 1;
  {
    int bits = 0;
    bool ok = true;
    vec_chk vc = {ov[n - 1]};
    for (int i = 0; i < seq_len(body); i++) {
      const rx_stmt *st = seq_at(body, i);
      int b = max_bits_tx(st->value);
      if (st->kind == RX_STMT_STORE) {
        if (rx_dtype_bits(st->buf->dtype) > b) b = rx_dtype_bits(st->buf->dtype);
        if (!sym_is(st->idx[st->nidx - 1], ov[n - 1])) ok = false;
      }
      if (b > bits) bits = b;
      if (!all_loads(st->value, vec_load_ok, &vc)) ok = false;
    }
    if (ok && bits > 0) {
      V = s->t->vector_bytes * 8 / bits;
      if (V > 4) V = 4;
      if (V < 1) V = 1;
      while (V > 1) {
        int64_t d = rx_analyzer_divisor(s->an, oe[n - 1]);
        if (d != 0 && d % V == 0) break;
        V /= 2;
      }
    }
  }
  int B = block_threads(s, 256);
  const rx_expr *bx = rx_sched_fresh_var(s, "bx"), *tx = rx_sched_fresh_var(s, "tx");
  const rx_expr *lane = V > 1 ? rx_sched_fresh_var(s, "vec") : NULL;
  const rx_expr *ext2[MAXN];
  for (int k = 0; k < n; k++) ext2[k] = oe[k];
  if (V > 1) ext2[n - 1] = rx_analyzer_simplify(s->an, rx_expr_floordiv(s->cx, oe[n - 1], E(s, V)));
  const rx_expr *g = ADD(s, MUL(s, bx, B), tx);
  const rx_expr *repl[MAXN];
  const rx_expr *total = rx_sched_fuse(s, ext2, n, g, repl);
  total = rx_analyzer_simplify(s->an, total);
  const rx_expr *nblocks;
  const rx_expr *guard = rx_sched_split(s, total, B, bx, tx, &nblocks);
  size_t mk = rx_analyzer_mark(s->an);
  rx_analyzer_bind_range(s->an, bx, E(s, 0), nblocks);
  rx_analyzer_bind_range(s->an, tx, E(s, 0), E(s, B));
  if (guard) rx_analyzer_assume(s->an, guard);
  for (int k = 0; k < n; k++) {
    if (V > 1 && k == n - 1) repl[k] = ADD(s, MUL(s, repl[k], V), lane);
    repl[k] = rx_analyzer_simplify(s->an, ADD(s, olo[k], repl[k]));
  }
  rx_analyzer_reset(s->an, mk);
  rx_rewrite rw = {.s = s, .vars = ov, .repl = repl, .n = n};
  rx_stmt *inner = rx_sched_rewrite_stmt(&rw, body);
  if (V > 1) inner = rx_sched_for(s, lane, E(s, V), RX_LOOP_VECTORIZE, inner);
  inner = rx_sched_guard(s, guard, inner);
  return kernel1(s, bx, nblocks, tx, B, inner);
}

/* ------------------------------------------------------------------------------------------
 * reductions: parsing a REDUCE stage
 * ------------------------------------------------------------------------------------------ */
typedef struct red_info {
  const rx_stmt *st;
  const rx_expr *k, *klo, *kext;
  const rx_stmt *init_store, *upd_store;
  const rx_stmt *init_lets[16], *upd_lets[16];
  int ninit_lets, nupd_lets;
  rx_combiner comb;
  rx_tx *x;       /* the combined value */
  bool acc_first; /* acc is the first operand of the combine */
} red_info;

static bool split_lets(const rx_stmt *b, const rx_stmt **lets, int *nlets, const rx_stmt **store) {
  *nlets = 0;
  int n = seq_len(b);
  if (n < 1 || n > 16) return false;
  for (int i = 0; i < n - 1; i++) {
    if (seq_at(b, i)->kind != RX_STMT_LET) return false;
    lets[(*nlets)++] = seq_at(b, i);
  }
  *store = seq_at(b, n - 1);
  return (*store)->kind == RX_STMT_STORE;
}

static bool is_acc_load(const rx_tx *e, const rx_stmt *store) {
  return e->kind == RX_TX_LOAD && e->buf == store->buf &&
         same_idx(e->idx, e->nidx, store->idx, store->nidx);
}

static bool red_parse(const rx_stmt *st, red_info *r) {
  memset(r, 0, sizeof *r);
  if (st->kind != RX_STMT_REDUCE || st->nvars != 1 || !st->init || !st->inner) return false;
  r->st = st;
  r->k = st->vars[0];
  r->klo = st->lo[0];
  r->kext = st->extent[0];
  if (!split_lets(st->init, r->init_lets, &r->ninit_lets, &r->init_store)) return false;
  if (!split_lets(st->inner, r->upd_lets, &r->nupd_lets, &r->upd_store)) return false;
  const rx_stmt *is = r->init_store, *us = r->upd_store;
  if (is->buf != us->buf || !same_idx(is->idx, is->nidx, us->idx, us->nidx)) return false;
  for (int i = 0; i < us->nidx; i++)
    if (tx_uses(us->idx[i], r->k)) return false;
  if (tx_loads(is->value, is->buf)) return false;
  const rx_tx *v = us->value;
  if (v->kind == RX_TX_BINARY && v->binop == RX_BINOP_ADD) {
    r->comb = RX_COMB_SUM;
  } else if (v->kind == RX_TX_CALL && (v->intrin == RX_INTRIN_MAX || v->intrin == RX_INTRIN_MIN)) {
    r->comb = v->intrin == RX_INTRIN_MAX ? RX_COMB_MAX : RX_COMB_MIN;
  } else {
    return false;
  }
  if (is_acc_load(v->a, us)) {
    r->x = v->b;
    r->acc_first = true;
  } else if (is_acc_load(v->b, us)) {
    r->x = v->a;
  } else {
    return false;
  }
  if (tx_loads(r->x, us->buf)) return false;
  for (int i = 0; i < r->nupd_lets; i++)
    if (tx_loads(r->upd_lets[i]->value, us->buf)) return false;
  return true;
}

/* ------------------------------------------------------------------------------------------
 * ROW_REDUCTION
 * ------------------------------------------------------------------------------------------ */
typedef struct inner_chk {
  const rx_expr *k;
} inner_chk;
static bool innermost_load(const rx_tx *e, void *ud) {
  const rx_expr *k = ((inner_chk *)ud)->k;
  for (int i = 0; i < e->nidx - 1; i++)
    if (tx_uses(e->idx[i], k)) return false;
  return true;
}

static bool stage_stores_ok(const rx_stmt *s, const rx_expr *j) {
  if (!s) return true;
  if (s->kind == RX_STMT_STORE) {
    if (s->nidx == 0 || !sym_is(s->idx[s->nidx - 1], j)) return false;
    for (int i = 0; i < s->nidx - 1; i++)
      if (tx_uses(s->idx[i], j)) return false;
  }
  if (s->kind == RX_STMT_REDUCE || s->kind == RX_STMT_ALLOC || stmt_has_bound(s)) return false;
  for (int i = 0; i < s->n; i++)
    if (!stage_stores_ok(s->body[i], j)) return false;
  return stage_stores_ok(s->inner, j) && stage_stores_ok(s->otherwise, j);
}

static bool row_match(const rx_tensor_fn *f, nest *nt) {
  if (seq_len(f->body) != 1) return false;
  get_nest(seq_at(f->body, 0), nt);
  if (nt->n == 0) return false;
  int nred = 0;
  const rx_stmt *b = nt->body;
  for (int i = 0; i < seq_len(b); i++) {
    const rx_stmt *st = seq_at(b, i);
    switch (st->kind) {
    case RX_STMT_ALLOC:
      if (st->buf->scope != RX_SCOPE_LOCAL) return false;
      for (int d = 0; d < st->buf->ndim; d++)
        if (st->buf->shape[d]->kind != RX_EXPR_CONST) return false;
      break;
    case RX_STMT_LET:
      break;
    case RX_STMT_STORE:
      break;
    case RX_STMT_REDUCE: {
      red_info r;
      if (!red_parse(st, &r)) return false;
      inner_chk ic = {r.k};
      if (!all_loads(r.x, innermost_load, &ic)) return false;
      for (int l = 0; l < r.nupd_lets; l++)
        if (!all_loads(r.upd_lets[l]->value, innermost_load, &ic)) return false;
      rx_tx *id;
      rx_sctx dummy = {.m = NULL};
      (void)dummy;
      if (!rx_dtype_is_float(r.upd_store->buf->dtype) && r.comb != RX_COMB_SUM) return false;
      (void)id;
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

typedef struct redirect {
  rx_buffer *buf;
  rx_tx **idx;
  int nidx;
  rx_buffer *local;
} redirect;
typedef struct row_ud {
  redirect r[32];
  int n;
} row_ud;

static rx_tx *row_hook(rx_rewrite *rw, rx_tx *load) {
  row_ud *u = rw->ud;
  for (int i = 0; i < u->n; i++) {
    if (u->r[i].buf == load->buf && same_idx(load->idx, load->nidx, u->r[i].idx, u->r[i].nidx)) {
      const rx_expr *z = rx_expr_const(rw->s->cx, 0);
      return rx_sched_load(rw->s, u->r[i].local, &z, 1);
    }
  }
  return load;
}

static rx_stmt *row_schedule(rx_sctx *s, nest *nt) {
  rx_expr_ctx *cx = s->cx;
  const rx_stmt *b = nt->body;
  /* block size from the first reduction's extent */
  int64_t m = -1;
  for (int i = 0; i < seq_len(b); i++)
    if (seq_at(b, i)->kind == RX_STMT_REDUCE) {
      const rx_expr *e = seq_at(b, i)->extent[0];
      if (e->kind == RX_EXPR_CONST) m = e->value;
      break;
    }
  int want = 256;
  if (m >= 0) {
    int minb = s->t->subgroup_size > 32 ? s->t->subgroup_size : 32;
    want = pow2_ceil(m);
    if (want < minb) want = minb;
    if (want > 256) want = 256;
  }
  int B = block_threads(s, want);
  const rx_expr *bx = rx_sched_fresh_var(s, "row"), *tx = rx_sched_fresh_var(s, "tx");
  const rx_expr *repl[MAXN];
  const rx_expr *nrows = rx_analyzer_simplify(s->an, rx_sched_fuse(s, nt->ext, nt->n, bx, repl));
  for (int k = 0; k < nt->n; k++) repl[k] = ADD(s, nt->lo[k], repl[k]);
  size_t mk = rx_analyzer_mark(s->an);
  rx_analyzer_bind_range(s->an, bx, E(s, 0), nrows);
  rx_analyzer_bind_range(s->an, tx, E(s, 0), E(s, B));
  row_ud ud = {.n = 0};
  rx_rewrite rw = {.s = s, .vars = nt->vars, .repl = repl, .n = nt->n, .hook = row_hook, .ud = &ud};
  rx_stmtvec out = {0};
  const rx_expr *tx0 = rx_expr_cmp(cx, RX_EXPR_EQ, tx, E(s, 0));
  for (int i = 0; i < seq_len(b); i++) {
    const rx_stmt *st = seq_at(b, i);
    switch (st->kind) {
    case RX_STMT_ALLOC:
    case RX_STMT_LET:
      RX_VEC_PUSH(&out, rx_sched_rewrite_stmt(&rw, st));
      break;
    case RX_STMT_STORE:
      RX_VEC_PUSH(&out, rx_sched_guard(s, tx0, rx_sched_rewrite_stmt(&rw, st)));
      break;
    case RX_STMT_FOR: {
      const rx_expr *jo = rx_sched_fresh_var(s, "jo");
      const rx_expr *nit;
      const rx_expr *g = rx_sched_split(s, st->extent[0], B, jo, tx, &nit);
      const rx_expr *vars[MAXN + 1], *rp[MAXN + 1];
      for (int k = 0; k < nt->n; k++) {
        vars[k] = nt->vars[k];
        rp[k] = repl[k];
      }
      vars[nt->n] = st->vars[0];
      rp[nt->n] = ADD(s, st->lo[0], ADD(s, MUL(s, jo, B), tx));
      rx_rewrite rw2 = rw;
      rw2.vars = vars;
      rw2.repl = rp;
      rw2.n = nt->n + 1;
      rx_stmt *body = rx_sched_rewrite_stmt(&rw2, st->inner);
      RX_VEC_PUSH(&out, rx_sched_for(s, jo, nit, RX_LOOP_SERIAL, rx_sched_guard(s, g, body)));
      break;
    }
    case RX_STMT_REDUCE: {
      red_info r;
      red_parse(st, &r);
      rx_dtype dt = r.upd_store->buf->dtype;
      rx_tx *ident = NULL;
      rx_sched_identity(s, r.comb, dt, &ident);
      /* partial per thread, strided over the row: consecutive threads, consecutive elements */
      rx_stmt *al;
      int64_t one[1] = {1};
      rx_buffer *part = rx_sched_alloc(s, "part", dt, RX_SCOPE_LOCAL, one, 1, &al);
      RX_VEC_PUSH(&out, al);
      const rx_expr *z = E(s, 0);
      RX_VEC_PUSH(&out, rx_sched_store_e(s, part, &z, 1, ident));
      const rx_expr *jo = rx_sched_fresh_var(s, "ko");
      const rx_expr *nit;
      const rx_expr *g = rx_sched_split(s, r.kext, B, jo, tx, &nit);
      const rx_expr *vars[MAXN + 1], *rp[MAXN + 1];
      for (int k = 0; k < nt->n; k++) {
        vars[k] = nt->vars[k];
        rp[k] = repl[k];
      }
      vars[nt->n] = r.k;
      rp[nt->n] = ADD(s, r.klo, ADD(s, MUL(s, jo, B), tx));
      rx_rewrite rw2 = rw;
      rw2.vars = vars;
      rw2.repl = rp;
      rw2.n = nt->n + 1;
      rx_stmtvec ub = {0};
      for (int l = 0; l < r.nupd_lets; l++)
        RX_VEC_PUSH(&ub, rx_sched_rewrite_stmt(&rw2, r.upd_lets[l]));
      rx_tx *xv = rx_sched_rewrite_tx(&rw2, r.x);
      rx_tx *pl = rx_sched_load(s, part, &z, 1);
      RX_VEC_PUSH(&ub, rx_sched_store_e(s, part, &z, 1,
                                        r.acc_first ? rx_sched_combine(s, r.comb, pl, xv)
                                                    : rx_sched_combine(s, r.comb, xv, pl)));
      RX_VEC_PUSH(&out, rx_sched_for(s, jo, nit, RX_LOOP_SERIAL,
                                     rx_sched_guard(s, g, rx_sched_seq(s, &ub))));
      rx_tx *tot = rx_sched_xreduce(s, &out, rx_sched_load(s, part, &z, 1), r.comb, dt, B, tx);
      /* init semantics: acc = combine(init value, total) */
      for (int l = 0; l < r.ninit_lets; l++)
        RX_VEC_PUSH(&out, rx_sched_rewrite_stmt(&rw, r.init_lets[l]));
      rx_tx *v0 = rx_sched_rewrite_tx(&rw, r.init_store->value);
      if (v0->dtype != dt || v0->weak) v0 = rx_tx_cast(s->m, dt, v0, s->loc);
      rx_tx *fin =
          r.acc_first ? rx_sched_combine(s, r.comb, v0, tot) : rx_sched_combine(s, r.comb, tot, v0);
      rx_stmt *accst = rx_sched_rewrite_stmt(&rw, r.init_store);
      if (r.upd_store->buf->scope == RX_SCOPE_LOCAL) {
        accst->value = fin;
        RX_VEC_PUSH(&out, accst);
      } else {
        rx_buffer *lb = rx_sched_alloc(s, "rowval", dt, RX_SCOPE_LOCAL, one, 1, &al);
        RX_VEC_PUSH(&out, al);
        RX_VEC_PUSH(&out, rx_sched_store_e(s, lb, &z, 1, fin));
        accst->value = rx_sched_load(s, lb, &z, 1);
        RX_VEC_PUSH(&out, rx_sched_guard(s, tx0, accst));
        if (ud.n < 32) {
          ud.r[ud.n].buf = accst->buf;
          ud.r[ud.n].idx = accst->idx;
          ud.r[ud.n].nidx = accst->nidx;
          ud.r[ud.n].local = lb;
          ud.n++;
        }
      }
      break;
    }
    default:
      break;
    }
  }
  rx_analyzer_reset(s->an, mk);
  return kernel1(s, bx, nrows, tx, B, rx_sched_seq(s, &out));
}

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
  if (seq_len(f->body) != 1) return false;
  nest *nt = &mi->nt;
  get_nest(seq_at(f->body, 0), nt);
  if (nt->n < 2) return false;
  const rx_stmt *b = nt->body;
  const rx_stmt *red;
  if (seq_len(b) == 1) {
    red = seq_at(b, 0);
  } else if (seq_len(b) == 3) {
    mi->acc_alloc = seq_at(b, 0);
    red = seq_at(b, 1);
    mi->epilogue = seq_at(b, 2);
    if (mi->acc_alloc->kind != RX_STMT_ALLOC || mi->acc_alloc->buf->scope != RX_SCOPE_LOCAL ||
        mi->epilogue->kind != RX_STMT_STORE)
      return false;
  } else {
    return false;
  }
  if (!red_parse(red, &mi->r) || mi->r.comb != RX_COMB_SUM || mi->r.nupd_lets || mi->r.ninit_lets)
    return false;
  const rx_stmt *us = mi->r.upd_store;
  const rx_stmt *outst = mi->epilogue ? mi->epilogue : us;
  if (mi->epilogue && us->buf != mi->acc_alloc->buf) return false;
  if (outst->nidx != nt->n) return false;
  for (int k = 0; k < nt->n; k++)
    if (!sym_is(outst->idx[k], nt->vars[k]) || !rx_expr_is_const(nt->lo[k], 0)) return false;
  if (mi->epilogue && tx_uses(mi->epilogue->value, mi->r.k)) return false;
  mi->acc_dt = us->buf->dtype;
  rx_tx *x = mi->r.x;
  if (x->kind != RX_TX_BINARY || x->binop != RX_BINOP_MUL) return false;
  const rx_expr *i = nt->vars[nt->n - 2], *j = nt->vars[nt->n - 1], *k = mi->r.k;
  if (!rx_expr_is_const(mi->r.klo, 0)) return false;
  rx_tx *a = x->a, *c = x->b;
  bool a_is_p = tx_uses(a, i) && !tx_uses(a, j) && tx_uses(c, j) && !tx_uses(c, i);
  bool c_is_p = tx_uses(c, i) && !tx_uses(c, j) && tx_uses(a, j) && !tx_uses(a, i);
  if (!a_is_p && !c_is_p) return false;
  mi->p = a_is_p ? a : c;
  mi->q = a_is_p ? c : a;
  mi->p_first = a_is_p;
  if (!tx_uses(mi->p, k) || !tx_uses(mi->q, k)) return false;
  if (tx_loads(mi->p, us->buf) || tx_loads(mi->q, us->buf)) return false;
  if (mi->epilogue && (tx_loads(mi->p, outst->buf) || tx_loads(mi->q, outst->buf))) return false;
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
  int T = block_threads(s, 256);
  int CB = T >= 32 ? 32 : T, KS = T / CB;
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
  const rx_expr *jlim = bound_guard(s, rp[n - 1], M);
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

static rx_stmt *gemm_schedule(rx_sctx *s, mm_info *mi, bool small) {
  rx_expr_ctx *cx = s->cx;
  nest *nt = &mi->nt;
  int n = nt->n;
  const rx_expr *M = nt->ext[n - 1], *N = nt->ext[n - 2], *K = mi->r.kext;
  rx_tx *pc = cache_core(mi->p), *qc = cache_core(mi->q);
  int pb = rx_dtype_bits(pc->dtype) / 8, qb = rx_dtype_bits(qc->dtype) / 8;
  if (pb < 1) pb = 1;
  if (qb < 1) qb = 1;
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
  int TX = t.bn / t.tn, T = (t.bm / t.tm) * TX;
  const rx_expr *bx = rx_sched_fresh_var(s, "bx"), *by = rx_sched_fresh_var(s, "by");
  const rx_expr *bz = n > 2 ? rx_sched_fresh_var(s, "bz") : NULL;
  const rx_expr *tx = rx_sched_fresh_var(s, "tx");
  const rx_expr *ncol, *nrow, *nk;
  const rx_expr *ko = rx_sched_fresh_var(s, "ko");
  const rx_expr *brepl[MAXN];
  if (n > 2) rx_sched_fuse(s, nt->ext, n - 2, bz, brepl);
  const rx_expr *colg = rx_sched_split(s, M, t.bn, bx, E(s, 0), &ncol);
  const rx_expr *rowg = rx_sched_split(s, N, t.bm, by, E(s, 0), &nrow);
  const rx_expr *kgd = rx_sched_split(s, K, t.bk, ko, E(s, 0), &nk);
  (void)colg;
  (void)rowg;
  (void)kgd;
  size_t mk = rx_analyzer_mark(s->an);
  rx_analyzer_bind_range(s->an, bx, E(s, 0), ncol);
  rx_analyzer_bind_range(s->an, by, E(s, 0), nrow);
  rx_analyzer_bind_range(s->an, tx, E(s, 0), E(s, T));
  rx_analyzer_bind_range(s->an, ko, E(s, 0), nk);
  rx_stmtvec body = {0};
  rx_stmt *al;
  int64_t as_shape[2] = {t.bk, t.bm}, bs_shape[2] = {t.bk, t.bn}, acc_shape[2] = {t.tm, t.tn};
  rx_buffer *As = rx_sched_alloc(s, "a_tile", pc->dtype, RX_SCOPE_SHARED, as_shape, 2, &al);
  RX_VEC_PUSH(&body, al);
  rx_buffer *Bs = rx_sched_alloc(s, "b_tile", qc->dtype, RX_SCOPE_SHARED, bs_shape, 2, &al);
  RX_VEC_PUSH(&body, al);
  rx_buffer *acc = rx_sched_alloc(s, "acc_tile", mi->acc_dt, RX_SCOPE_LOCAL, acc_shape, 2, &al);
  RX_VEC_PUSH(&body, al);
  rx_tx *zero;
  rx_sched_identity(s, RX_COMB_SUM, mi->acc_dt, &zero);
  const rx_expr *ua = rx_sched_fresh_var(s, "ua"), *ub = rx_sched_fresh_var(s, "ub");
  {
    const rx_expr *ix[2] = {ua, ub};
    rx_stmt *st = rx_sched_store_e(s, acc, ix, 2, zero);
    RX_VEC_PUSH(&body, rx_sched_for(s, ua, E(s, t.tm), RX_LOOP_UNROLL,
                                    rx_sched_for(s, ub, E(s, t.tn), RX_LOOP_UNROLL, st)));
  }
  const rx_expr *i_var = nt->vars[n - 2], *j_var = nt->vars[n - 1], *k_var = mi->r.k;
  /* cooperative loads of the A (P) and B (Q) tiles: consecutive threads, consecutive k (A) or
   * j (B); zero outside the matrix */
  rx_stmtvec kb = {0};
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
    const rx_expr *g = AND(s, bound_guard(s, gk, K), bound_guard(s, gr, which == 0 ? N : M));
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
    RX_VEC_PUSH(&kb, rx_sched_for(s, l, E(s, per), RX_LOOP_UNROLL, st));
  }
  RX_VEC_PUSH(&kb, rx_sched_barrier(s));
  /* the micro-tile: thread (ty, tx2) computes rows ty*TM + a and columns tx2*TN + b */
  const rx_expr *ty = rx_expr_floordiv(cx, tx, E(s, TX)), *tx2 = rx_expr_floormod(cx, tx, E(s, TX));
  const rx_expr *kk = rx_sched_fresh_var(s, "kk");
  {
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
    RX_VEC_PUSH(&kb, rx_sched_for(s, kk, E(s, t.bk), RX_LOOP_SERIAL, lp));
  }
  RX_VEC_PUSH(&kb, rx_sched_barrier(s));
  RX_VEC_PUSH(&body, rx_sched_for(s, ko, nk, RX_LOOP_SERIAL, rx_sched_seq(s, &kb)));
  /* epilogue: guarded stores of the micro-tile */
  {
    const rx_expr *gi = ADD(s, ADD(s, MUL(s, by, t.bm), MUL(s, ty, t.tm)), ua);
    const rx_expr *gj = ADD(s, ADD(s, MUL(s, bx, t.bn), MUL(s, tx2, t.tn)), ub);
    size_t m2 = rx_analyzer_mark(s->an);
    rx_analyzer_bind_range(s->an, ua, E(s, 0), E(s, t.tm));
    rx_analyzer_bind_range(s->an, ub, E(s, 0), E(s, t.tn));
    const rx_expr *g = AND(s, bound_guard(s, gi, N), bound_guard(s, gj, M));
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
    RX_VEC_PUSH(&body, rx_sched_for(s, ua, E(s, t.tm), RX_LOOP_UNROLL,
                                    rx_sched_for(s, ub, E(s, t.tn), RX_LOOP_UNROLL, st)));
  }
  rx_analyzer_reset(s->an, mk);
  rx_stmt *thr = rx_sched_for(s, tx, E(s, T), RX_LOOP_THREAD_X, rx_sched_seq(s, &body));
  return mm_grid(s, mi, bx, ncol, by, nrow, bz, brepl, thr);
}

/* ------------------------------------------------------------------------------------------
 * FALLBACK
 * ------------------------------------------------------------------------------------------ */
typedef struct indep_chk {
  const rx_expr *v;
  rx_buffer *bufs[32];
  int pos[32];
  int n;
  bool ok;
} indep_chk;

static void indep_stores(const rx_stmt *s, indep_chk *c) {
  if (!s || !c->ok) return;
  if (s->kind == RX_STMT_STORE) {
    int p = -1;
    for (int k = 0; k < s->nidx; k++)
      if (sym_is(s->idx[k], c->v)) p = k;
    if (p < 0 || s->buf->scope != RX_SCOPE_GLOBAL) {
      if (s->buf->scope == RX_SCOPE_GLOBAL) c->ok = false;
      return;
    }
    for (int i = 0; i < c->n; i++)
      if (c->bufs[i] == s->buf && c->pos[i] != p) c->ok = false;
    if (c->n < 32) {
      c->bufs[c->n] = s->buf;
      c->pos[c->n++] = p;
    } else {
      c->ok = false;
    }
  }
  if (s->kind == RX_STMT_ALLOC && s->buf->scope != RX_SCOPE_LOCAL) c->ok = false;
  for (int i = 0; i < s->n; i++) indep_stores(s->body[i], c);
  indep_stores(s->inner, c);
  indep_stores(s->init, c);
  indep_stores(s->otherwise, c);
}
static bool indep_load(const rx_tx *e, void *ud) {
  indep_chk *c = ud;
  for (int i = 0; i < c->n; i++)
    if (c->bufs[i] == e->buf) {
      int p = c->pos[i];
      if (p >= e->nidx || !sym_is(e->idx[p], c->v)) return false;
    }
  return true;
}
/* Iterations of loop variable v in body write disjoint elements (each store has v as a plain
 * index at a fixed position per buffer, and loads of stored buffers read at that position). */
static bool independent(const rx_stmt *body, const rx_expr *v) {
  indep_chk c = {.v = v, .ok = true};
  indep_stores(body, &c);
  return c.ok && all_loads_stmt(body, indep_load, &c);
}

static bool fallback_schedule(rx_sctx *s, rx_stmtvec *out) {
  const rx_stmt *b = s->f->body;
  for (int i = 0; i < seq_len(b); i++) {
    const rx_stmt *st = seq_at(b, i);
    if (st->kind == RX_STMT_ALLOC || st->kind == RX_STMT_LET) {
      rx_diag_report(s->diag, RX_DIAG_ERROR, st->loc,
                     "cannot schedule '%s': a top-level %s outside every loop nest cannot be "
                     "placed in a kernel",
                     s->f->name, st->kind == RX_STMT_ALLOC ? "alloc" : "let");
      return false;
    }
    nest nt;
    get_nest(st, &nt);
    int nf = 0;
    while (nf < nt.n) {
      /* the body below loop nf */
      const rx_stmt *inner = st;
      for (int q = 0; q <= nf; q++) inner = unwrap(inner)->inner;
      if (!independent(inner, nt.vars[nf])) break;
      nf++;
    }
    const rx_expr *bx = rx_sched_fresh_var(s, "bx"), *tx = rx_sched_fresh_var(s, "tx");
    if (nf == 0) {
      /* one thread runs it */
      rx_stmt *body = rx_sched_rewrite_stmt(&(rx_rewrite){.s = s}, st);
      RX_VEC_PUSH(out, kernel1(s, bx, E(s, 1), tx, 1, body));
      continue;
    }
    const rx_stmt *inner = st;
    for (int q = 0; q < nf; q++) inner = unwrap(inner)->inner;
    int B = block_threads(s, 256);
    const rx_expr *repl[MAXN];
    const rx_expr *g = ADD(s, MUL(s, bx, B), tx);
    const rx_expr *total = rx_analyzer_simplify(s->an, rx_sched_fuse(s, nt.ext, nf, g, repl));
    for (int k = 0; k < nf; k++) repl[k] = ADD(s, nt.lo[k], repl[k]);
    const rx_expr *nblocks;
    const rx_expr *guard = rx_sched_split(s, total, B, bx, tx, &nblocks);
    rx_rewrite rw = {.s = s, .vars = nt.vars, .repl = repl, .n = nf};
    rx_stmt *body = rx_sched_guard(s, guard, rx_sched_rewrite_stmt(&rw, inner));
    RX_VEC_PUSH(out, kernel1(s, bx, nblocks, tx, B, body));
  }
  return true;
}

/* ------------------------------------------------------------------------------------------
 * the contract check
 * ------------------------------------------------------------------------------------------ */
typedef struct chk {
  const rx_tensor_fn *f;
  const rx_target *t;
  rx_diag *diag;
  bool ok;
  int64_t shared;
  int64_t threads[3];
} chk;

#define CHK_FAIL(c, loc, ...)                                                                      \
  do {                                                                                             \
    rx_diag_report((c)->diag, RX_DIAG_ERROR, loc, __VA_ARGS__);                                    \
    (c)->ok = false;                                                                               \
  } while (0)

static void chk_kernel(chk *c, const rx_stmt *s) {
  if (!s || !c->ok) return;
  switch (s->kind) {
  case RX_STMT_FOR:
    if (s->loop_kind >= RX_LOOP_BLOCK_X && s->loop_kind <= RX_LOOP_BLOCK_Z) {
      CHK_FAIL(c, s->loc, "'%s': a blockIdx loop inside a kernel", c->f->name);
      return;
    }
    if (s->loop_kind >= RX_LOOP_THREAD_X) {
      int ax = s->loop_kind - RX_LOOP_THREAD_X;
      if (!rx_expr_is_const(s->lo[0], 0) || s->extent[0]->kind != RX_EXPR_CONST) {
        CHK_FAIL(c, s->loc, "'%s': a thread loop must start at 0 and have a constant extent",
                 c->f->name);
        return;
      }
      if (s->extent[0]->value > c->threads[ax]) c->threads[ax] = s->extent[0]->value;
      if (c->t->max_block_dim[ax] > 0 && s->extent[0]->value > c->t->max_block_dim[ax])
        CHK_FAIL(c, s->loc, "'%s': %lld threads along %s exceed the target's %d", c->f->name,
                 (long long)s->extent[0]->value, rx_loop_kind_name(s->loop_kind),
                 c->t->max_block_dim[ax]);
    }
    break;
  case RX_STMT_ALLOC: {
    if (s->buf->scope == RX_SCOPE_GLOBAL) {
      CHK_FAIL(c, s->loc, "'%s': a global allocation inside a kernel", c->f->name);
      return;
    }
    int64_t count = 1;
    for (int d = 0; d < s->buf->ndim; d++) {
      if (s->buf->shape[d]->kind != RX_EXPR_CONST) {
        CHK_FAIL(c, s->loc, "'%s': allocation '%s' needs a constant shape", c->f->name,
                 s->buf->name);
        return;
      }
      count *= s->buf->shape[d]->value;
    }
    if (s->buf->scope == RX_SCOPE_SHARED) c->shared += count * (rx_dtype_bits(s->buf->dtype) / 8);
    break;
  }
  default:
    break;
  }
  if ((s->kind == RX_STMT_LET || s->kind == RX_STMT_STORE) && tx_has_subgroup(s->value) &&
      (c->t->subgroup_size <= 0 || !c->t->subgroup_arithmetic))
    CHK_FAIL(c, s->loc, "'%s': subgroup operation on a target without a fixed subgroup size",
             c->f->name);
  for (int i = 0; i < s->n; i++) chk_kernel(c, s->body[i]);
  chk_kernel(c, s->inner);
  chk_kernel(c, s->init);
  chk_kernel(c, s->otherwise);
}

static void chk_host(chk *c, const rx_stmt *s) {
  if (!s || !c->ok) return;
  if (s->kind == RX_STMT_SEQ) {
    for (int i = 0; i < s->n; i++) chk_host(c, s->body[i]);
    return;
  }
  if (s->kind == RX_STMT_IF) {
    if (!s->value || s->value->kind != RX_TX_SYM) {
      CHK_FAIL(c, s->loc, "'%s': a host-level if needs a symbolic condition", c->f->name);
      return;
    }
    /* the condition may use only the program's symbolic variables */
    rx_ptrvec vs = {0};
    rx_expr_collect_vars(s->value->sym, &vs);
    for (size_t i = 0; i < vs.len && c->ok; i++) {
      const rx_expr *v = vs.data[i];
      bool found = false;
      for (int p = 0; p < c->f->nparams && !found; p++) {
        const rx_param *pp = c->f->params[p];
        if (pp->kind == RX_PARAM_SCALAR)
          found = pp->var == v;
        else
          for (int d = 0; d < pp->buf->ndim && !found; d++)
            found = rx_expr_uses_var(pp->buf->shape[d], v);
      }
      if (!found)
        CHK_FAIL(c, s->loc, "'%s': host-level condition uses '%s', not a symbolic variable",
                 c->f->name, v->name);
    }
    rx_ptrvec_free(&vs);
    if (!s->inner || s->inner->kind != RX_STMT_SEQ ||
        (s->otherwise && s->otherwise->kind != RX_STMT_SEQ)) {
      CHK_FAIL(c, s->loc, "'%s': host-level if branches must be sequences", c->f->name);
      return;
    }
    chk_host(c, s->inner);
    chk_host(c, s->otherwise);
    return;
  }
  if (s->kind != RX_STMT_FOR || s->loop_kind != RX_LOOP_BLOCK_X) {
    CHK_FAIL(c, s->loc,
             "'%s': only kernel roots (loops bound to blockIdx.x) and ifs on symbolic values "
             "may appear at host level",
             c->f->name);
    return;
  }
  const rx_stmt *k = s;
  bool seen[3] = {false, false, false};
  for (;;) {
    int ax = k->loop_kind - RX_LOOP_BLOCK_X;
    if (seen[ax]) {
      CHK_FAIL(c, k->loc, "'%s': %s bound twice", c->f->name, rx_loop_kind_name(k->loop_kind));
      return;
    }
    seen[ax] = true;
    if (!rx_expr_is_const(k->lo[0], 0)) {
      CHK_FAIL(c, k->loc, "'%s': a block loop must start at 0", c->f->name);
      return;
    }
    const rx_stmt *in = unwrap(k->inner);
    if (in && in->kind == RX_STMT_FOR &&
        (in->loop_kind == RX_LOOP_BLOCK_Y || in->loop_kind == RX_LOOP_BLOCK_Z)) {
      k = in;
      continue;
    }
    break;
  }
  c->shared = 0;
  c->threads[0] = c->threads[1] = c->threads[2] = 1;
  chk_kernel(c, k->inner);
  if (!c->ok) return;
  int64_t nt = c->threads[0] * c->threads[1] * c->threads[2];
  if (nt > c->t->max_threads_per_block)
    CHK_FAIL(c, s->loc, "'%s': %lld threads per block exceed the target's %d", c->f->name,
             (long long)nt, c->t->max_threads_per_block);
  if (c->shared > c->t->shared_bytes)
    CHK_FAIL(c, s->loc, "'%s': %lld bytes of shared memory exceed the target's %d", c->f->name,
             (long long)c->shared, c->t->shared_bytes);
}

bool rx_schedule_check(const rx_tensor_fn *f, const rx_target *t, rx_diag *diag) {
  chk c = {.f = f, .t = t, .diag = diag, .ok = true};
  if (!f->body) return false;
  chk_host(&c, f->body);
  return c.ok;
}

/* ------------------------------------------------------------------------------------------
 * grid limits
 *
 * A block loop `for b in 0..E blockIdx.A` whose extent the analyzer cannot prove within the
 * target's max_grid_dim[A] (L; Vulkan guarantees 65535 per axis, CUDA 65535 along y and z)
 * becomes a grid-stride loop: the grid takes min(E, L) blocks along A and each block runs
 *   for b_i in 0..ceil(E / L) { if b_o + b_i * L < E { BODY[b := b_o + b_i * L] } }
 * inside the innermost block loop of the kernel (the chain of block loops stays intact). The
 * condition depends only on block indices, so it is uniform across a block and a barrier inside
 * stays legal; a body with barriers gets one more at the end of each iteration, so shared memory
 * is not overwritten while another thread still reads the previous iteration's values; its
 * top-level allocations move in front of the loop. Axes whose limit is 2^31-1 (CUDA's x) are
 * left alone: the runtime's 32-bit grid arithmetic has the same bound.
 * ------------------------------------------------------------------------------------------ */
static bool stmt_has_barrier(const rx_stmt *s) {
  if (!s) return false;
  if (s->kind == RX_STMT_BARRIER) return true;
  for (int i = 0; i < s->n; i++)
    if (stmt_has_barrier(s->body[i])) return true;
  return stmt_has_barrier(s->inner) || stmt_has_barrier(s->init) || stmt_has_barrier(s->otherwise);
}

static void bound_kernel(rx_sctx *s, rx_stmt *root) {
  rx_stmt *chain[3];
  int nc = 0;
  for (rx_stmt *k = root;;) {
    chain[nc++] = k;
    rx_stmt *in = (rx_stmt *)unwrap(k->inner);
    if (nc < 3 && in && in->kind == RX_STMT_FOR &&
        (in->loop_kind == RX_LOOP_BLOCK_Y || in->loop_kind == RX_LOOP_BLOCK_Z)) {
      k = in;
      continue;
    }
    break;
  }
  const rx_expr *vars[3], *repl[3], *ext[3], *inner_vars[3];
  int64_t lim[3];
  int n = 0;
  for (int i = 0; i < nc; i++) {
    rx_stmt *k = chain[i];
    int ax = k->loop_kind - RX_LOOP_BLOCK_X;
    int64_t L = s->t->max_grid_dim[ax];
    const rx_expr *e = k->extent[0];
    if (L <= 0 || L >= 2147483647) continue;
    if (rx_sched_proves(s, rx_expr_cmp(s->cx, RX_EXPR_LE, e, E(s, L)))) continue;
    const rx_expr *outer = rx_sched_fresh_var(s, "bo"), *inner = rx_sched_fresh_var(s, "bi");
    vars[n] = k->vars[0];
    repl[n] = ADD(s, outer, MUL(s, inner, L));
    ext[n] = e;
    inner_vars[n] = inner;
    lim[n] = L;
    n++;
    const rx_expr **nv = rx_module_alloc(s->m, sizeof *nv),
                  **ne = rx_module_alloc(s->m, sizeof *ne);
    nv[0] = outer;
    ne[0] = rx_expr_min(s->cx, e, E(s, L));
    k->vars = nv;
    k->extent = ne;
  }
  if (!n) return;
  rx_stmt *last = chain[nc - 1];
  rx_rewrite rw = {.s = s, .vars = vars, .repl = repl, .n = n};
  rx_stmt *body = rx_sched_rewrite_stmt(&rw, last->inner);
  /* top-level allocations stay at the top of the kernel */
  rx_stmtvec top = {0}, rest = {0};
  for (int i = 0; i < seq_len(body); i++) {
    rx_stmt *st = (rx_stmt *)seq_at(body, i);
    if (st->kind == RX_STMT_ALLOC)
      RX_VEC_PUSH(&top, st);
    else
      RX_VEC_PUSH(&rest, st);
  }
  bool barrier = stmt_has_barrier(body);
  const rx_expr *cond = NULL;
  for (int i = 0; i < n; i++) {
    const rx_expr *c = rx_expr_cmp(s->cx, RX_EXPR_LT, repl[i], ext[i]);
    cond = cond ? rx_expr_and(s->cx, cond, c) : c;
  }
  rx_stmt *it = rx_sched_if(s, rx_sched_cond(s, cond), rx_sched_seq(s, &rest), NULL);
  if (barrier) {
    rx_stmtvec v = {0};
    RX_VEC_PUSH(&v, it);
    RX_VEC_PUSH(&v, rx_sched_barrier(s));
    it = rx_sched_seq(s, &v);
  }
  for (int i = n - 1; i >= 0; i--) {
    const rx_expr *trips = rx_expr_floordiv(s->cx, ADD(s, ext[i], E(s, lim[i] - 1)), E(s, lim[i]));
    it = rx_sched_for(s, inner_vars[i], trips, RX_LOOP_SERIAL, it);
  }
  RX_VEC_PUSH(&top, it);
  last->inner = rx_sched_seq(s, &top);
}

/* Every kernel root of a scheduled host-level body (sequences and ifs on symbolic values). */
static void bound_grids(rx_sctx *s, rx_stmt *st) {
  if (!st) return;
  if (st->kind == RX_STMT_SEQ) {
    for (int i = 0; i < st->n; i++) bound_grids(s, st->body[i]);
  } else if (st->kind == RX_STMT_IF) {
    size_t mk = rx_analyzer_mark(s->an);
    if (st->value && st->value->kind == RX_TX_SYM) rx_analyzer_assume(s->an, st->value->sym);
    bound_grids(s, st->inner);
    rx_analyzer_reset(s->an, mk);
    bound_grids(s, st->otherwise);
  } else if (st->kind == RX_STMT_FOR && st->loop_kind == RX_LOOP_BLOCK_X) {
    bound_kernel(s, st);
  }
}

/* ------------------------------------------------------------------------------------------
 * entry points
 * ------------------------------------------------------------------------------------------ */
static rx_tensor_fn *with_body(rx_sctx *s, rx_stmt *body) {
  rx_tensor_fn *g = rx_module_alloc(s->m, sizeof *g);
  *g = *s->f;
  g->body = rx_sched_seq1(s, body);
  return g;
}

static void set_variants(rx_module *m, rx_sched_result *out, const rx_sched_variant *v, int n) {
  out->variants = rx_module_alloc(m, sizeof *out->variants * (size_t)n);
  memcpy(out->variants, v, sizeof *v * (size_t)n);
  for (int i = 0; i < n; i++)
    if (!out->variants[i].name) out->variants[i].name = rx_sched_rule_name(v[i].rule);
  out->nvariants = n;
}

/* A reduction to a 0-d result (sum of every element) has its reduce at the top level, with no
 * output loop to give rows to blocks: it becomes one row, `for unit_row in 0..1 { body }`, which
 * the row-reduction rule schedules as one block reducing the whole extent. */
static const rx_tensor_fn *as_one_row(rx_module *m, const rx_tensor_fn *f) {
  const rx_stmt *b = unwrap(f->body);
  bool top_reduce = false;
  for (int i = 0; i < seq_len(b); i++) top_reduce |= seq_at(b, i)->kind == RX_STMT_REDUCE;
  if (!top_reduce) return f;
  rx_stmt *loop = rx_stmt_new(m, RX_STMT_FOR, f->body->loc);
  loop->nvars = 1;
  loop->vars = rx_module_alloc(m, sizeof *loop->vars);
  loop->lo = rx_module_alloc(m, sizeof *loop->lo);
  loop->extent = rx_module_alloc(m, sizeof *loop->extent);
  loop->vars[0] = rx_expr_var(m->ctx, "unit_row");
  loop->lo[0] = rx_expr_const(m->ctx, 0);
  loop->extent[0] = rx_expr_const(m->ctx, 1);
  loop->loop_kind = RX_LOOP_SERIAL;
  loop->inner = f->body;
  rx_tensor_fn *g = rx_module_alloc(m, sizeof *g);
  *g = *f;
  g->body = loop;
  return g;
}

bool rx_schedule(rx_module *m, const rx_tensor_fn *f, const rx_target *t, rx_diag *diag,
                 rx_sched_result *out) {
  memset(out, 0, sizeof *out);
  if (!f || !f->body || !t) return false;
  f = as_one_row(m, f);
  if (stmt_has_bound(f->body)) {
    if (!rx_schedule_check(f, t, diag)) return false;
    out->fn = (rx_tensor_fn *)f;
    rx_sched_variant v = {NULL, RX_SCHED_FALLBACK, NULL};
    set_variants(m, out, &v, 1);
    return true;
  }
  rx_sctx s;
  rx_sctx_init(&s, m, f, t, diag);
  bool ok = true;
  rx_stmt *body = NULL;
  ew_info ew;
  nest rn;
  mm_info mi;
  if (ew_match(f, &ew)) {
    body = ew_schedule(&s, &ew);
    rx_sched_variant v = {NULL, RX_SCHED_ELEMENTWISE, NULL};
    set_variants(m, out, &v, 1);
  } else if (row_match(f, &rn)) {
    body = row_schedule(&s, &rn);
    rx_sched_variant v = {NULL, RX_SCHED_ROW_REDUCTION, NULL};
    set_variants(m, out, &v, 1);
  } else if (mm_match(f, &mi)) {
    const rx_expr *rows = mi.nt.ext[mi.nt.n - 2];
    if (rx_expr_is_const(rows, 1)) {
      body = gemv_schedule(&s, &mi);
      rx_sched_variant v = {NULL, RX_SCHED_GEMV, NULL};
      set_variants(m, out, &v, 1);
    } else if (rows->kind == RX_EXPR_CONST) {
      body = gemm_schedule(&s, &mi, rows->value <= 16);
      rx_sched_variant v = {NULL, RX_SCHED_GEMM, NULL};
      set_variants(m, out, &v, 1);
    } else {
      /* specialization on the row count: n == 1 -> gemv, n <= 16 -> small tiles, otherwise */
      const rx_expr *c1 = rx_expr_cmp(s.cx, RX_EXPR_EQ, rows, E(&s, 1));
      const rx_expr *c2 = rx_expr_cmp(s.cx, RX_EXPR_LE, rows, E(&s, 16));
      size_t mk = rx_analyzer_mark(s.an);
      rx_analyzer_assume(s.an, c1);
      rx_stmt *k1 = gemv_schedule(&s, &mi);
      rx_analyzer_reset(s.an, mk);
      rx_analyzer_assume(s.an, c2);
      rx_stmt *k2 = gemm_schedule(&s, &mi, true);
      rx_analyzer_reset(s.an, mk);
      rx_stmt *k3 = gemm_schedule(&s, &mi, false);
      rx_stmt *inner = rx_sched_if(&s, rx_sched_cond(&s, c2), k2, k3);
      body = rx_sched_if(&s, rx_sched_cond(&s, c1), k1, inner);
      rx_sched_variant v[3] = {{c1, RX_SCHED_GEMV, "gemv"},
                               {c2, RX_SCHED_GEMM, "gemm_small"},
                               {NULL, RX_SCHED_GEMM, "gemm"}};
      set_variants(m, out, v, 3);
    }
  } else {
    rx_stmtvec ks = {0};
    ok = fallback_schedule(&s, &ks);
    if (ok) body = rx_sched_seq(&s, &ks);
    free(ks.data);
    rx_sched_variant v = {NULL, RX_SCHED_FALLBACK, NULL};
    set_variants(m, out, &v, 1);
  }
  if (ok) {
    bound_grids(&s, body);
    out->fn = with_body(&s, body);
    ok = rx_schedule_check(out->fn, t, diag);
  }
  rx_sctx_free(&s);
  if (!ok) memset(out, 0, sizeof *out);
  return ok;
}

bool rx_schedule_module(rx_module *m, const rx_target *t, rx_diag *diag) {
  bool ok = true;
  for (size_t i = 0; i < m->items.len; i++) {
    rx_item *it = &m->items.data[i];
    if (it->kind != RX_ITEM_TENSOR) continue;
    rx_sched_result r;
    if (rx_schedule(m, it->fn, t, diag, &r))
      it->fn = r.fn;
    else
      ok = false;
  }
  return ok;
}
