/* passes/schedule/common.c: the loop-nest, load and reduction queries the rules share
 * (rules.h). */
#include "rules.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------------------------
 * helpers
 * ------------------------------------------------------------------------------------------ */
const rx_stmt *sched_unwrap(const rx_stmt *s) { return ir_stmt_unwrap(s); }
int sched_seq_len(const rx_stmt *s) { return s->kind == RX_STMT_SEQ ? s->n : 1; }
const rx_stmt *sched_seq_at(const rx_stmt *s, int i) {
  return s->kind == RX_STMT_SEQ ? s->body[i] : s;
}

/* The perfectly nested serial loops starting at st (at most MAXN). */
void sched_get_nest(const rx_stmt *st, nest *out) {
  const rx_stmt *loops[MAXN];
  out->n = ir_stmt_peel_serial(st, MAXN, loops, &out->body);
  for (int i = 0; i < out->n; i++) {
    out->vars[i] = loops[i]->vars[0];
    out->lo[i] = loops[i]->lo[0];
    out->ext[i] = loops[i]->extent[0];
  }
}

bool sched_sym_is(const rx_tx *e, const rx_expr *v) { return e->kind == RX_TX_SYM && e->sym == v; }
bool sched_tx_uses(const rx_tx *e, const rx_expr *v) {
  if (!e) return false;
  if (e->kind == RX_TX_SYM) return sym_expr_uses_var(e->sym, v);
  for (int i = 0; i < e->nidx; i++)
    if (sched_tx_uses(e->idx[i], v)) return true;
  return sched_tx_uses(e->a, v) || sched_tx_uses(e->b, v) || sched_tx_uses(e->c, v);
}
bool sched_tx_loads(const rx_tx *e, const rx_buffer *b) {
  if (!e) return false;
  if (e->kind == RX_TX_LOAD && e->buf == b) return true;
  for (int i = 0; i < e->nidx; i++)
    if (sched_tx_loads(e->idx[i], b)) return true;
  return sched_tx_loads(e->a, b) || sched_tx_loads(e->b, b) || sched_tx_loads(e->c, b);
}
bool sched_stmt_has_bound(const rx_stmt *s) {
  if (!s) return false;
  if ((s->kind == RX_STMT_FOR && rx_loop_is_bound(s->loop_kind)) || s->kind >= RX_STMT_BARRIER)
    return true; /* barriers and the matrix-unit statements (ir.h: listed after BARRIER) */
  for (int i = 0; i < s->n; i++)
    if (sched_stmt_has_bound(s->body[i])) return true;
  return sched_stmt_has_bound(s->inner) || sched_stmt_has_bound(s->init) ||
         sched_stmt_has_bound(s->otherwise);
}
bool sched_tx_has_subgroup(const rx_tx *e) {
  if (!e) return false;
  if (e->kind == RX_TX_CALL && ir_intrinsic_kind(e->intrin) == 's') return true;
  for (int i = 0; i < e->nidx; i++)
    if (sched_tx_has_subgroup(e->idx[i])) return true;
  return sched_tx_has_subgroup(e->a) || sched_tx_has_subgroup(e->b) || sched_tx_has_subgroup(e->c);
}
/* Index expressions equal as integers: the same canonical symbolic node or the same literal. */
bool sched_idx_eq(const rx_tx *a, const rx_tx *b) {
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
bool sched_same_idx(rx_tx *const *a, int na, rx_tx *const *b, int nb) {
  if (na != nb) return false;
  for (int i = 0; i < na; i++)
    if (!sched_idx_eq(a[i], b[i])) return false;
  return true;
}

/* Visits every load in e. */
bool sched_all_loads(const rx_tx *e, load_pred p, void *ud) {
  if (!e) return true;
  if (e->kind == RX_TX_LOAD && !p(e, ud)) return false;
  for (int i = 0; i < e->nidx; i++)
    if (!sched_all_loads(e->idx[i], p, ud)) return false;
  return sched_all_loads(e->a, p, ud) && sched_all_loads(e->b, p, ud) &&
         sched_all_loads(e->c, p, ud);
}
bool sched_all_loads_stmt(const rx_stmt *s, load_pred p, void *ud) {
  if (!s) return true;
  for (int i = 0; i < s->n; i++)
    if (!sched_all_loads_stmt(s->body[i], p, ud)) return false;
  for (int i = 0; i < s->nidx; i++)
    if (!sched_all_loads(s->idx[i], p, ud)) return false;
  return sched_all_loads(s->value, p, ud) && sched_all_loads_stmt(s->inner, p, ud) &&
         sched_all_loads_stmt(s->init, p, ud) && sched_all_loads_stmt(s->otherwise, p, ud);
}

/* The widest dtype (bits) that e loads; 0 when it loads nothing. */
int sched_max_load_bits(const rx_tx *e) {
  if (!e) return 0;
  int b = e->kind == RX_TX_LOAD ? ir_dtype_bits(e->buf->dtype) : 0;
  for (int i = 0; i < e->nidx; i++) {
    int x = sched_max_load_bits(e->idx[i]);
    if (x > b) b = x;
  }
  int x = sched_max_load_bits(e->a);
  if (x > b) b = x;
  x = sched_max_load_bits(e->b);
  if (x > b) b = x;
  x = sched_max_load_bits(e->c);
  return x > b ? x : b;
}

int sched_pow2_floor(int x) {
  int p = 1;
  while (p * 2 <= x) p *= 2;
  return p;
}
int sched_pow2_ceil(int64_t x) {
  int p = 1;
  while (p < x && p < (1 << 20)) p *= 2;
  return p;
}
/* Threads of a 1-D block: 256 or the target's (power-of-two) limit. */
int sched_block_threads(const rx_sctx *s, int want) {
  int lim = s->t->max_threads_per_block;
  if (s->t->max_block_dim[0] > 0 && s->t->max_block_dim[0] < lim) lim = s->t->max_block_dim[0];
  int b = want < lim ? want : lim;
  return sched_pow2_floor(b < 1 ? 1 : b);
}

rx_stmt *sched_kernel1(rx_sctx *s, const rx_expr *bx, const rx_expr *nblocks, const rx_expr *tx,
                       int threads, rx_stmt *body) {
  rx_stmt *t = sched_for(s, tx, sym_expr_const(s->cx, threads), RX_LOOP_THREAD_X, body);
  return sched_for(s, bx, nblocks, RX_LOOP_BLOCK_X, t);
}

/* `v < ext` unless the analyzer proves it with the given ranges already bound. */
const rx_expr *sched_bound_guard(rx_sctx *s, const rx_expr *v, const rx_expr *ext) {
  const rx_expr *c = sym_analyzer_simplify(s->an, sx_lt(s->cx, v, ext));
  if (rx_expr_is_const(c, 1) || sched_proves(s, c)) return NULL;
  return c;
}

/* ------------------------------------------------------------------------------------------
 * reductions: parsing a REDUCE stage
 * ------------------------------------------------------------------------------------------ */

bool sched_split_lets(const rx_stmt *b, const rx_stmt **lets, int *nlets, const rx_stmt **store) {
  *nlets = 0;
  int n = sched_seq_len(b);
  if (n < 1 || n > RED_MAX_LETS + 1) return false;
  for (int i = 0; i < n - 1; i++) {
    if (sched_seq_at(b, i)->kind != RX_STMT_LET) return false;
    lets[(*nlets)++] = sched_seq_at(b, i);
  }
  *store = sched_seq_at(b, n - 1);
  return (*store)->kind == RX_STMT_STORE;
}

bool sched_is_acc_load(const rx_tx *e, const rx_stmt *store) {
  return e->kind == RX_TX_LOAD && e->buf == store->buf &&
         sched_same_idx(e->idx, e->nidx, store->idx, store->nidx);
}

bool sched_red_parse(const rx_stmt *st, red_info *r) {
  memset(r, 0, sizeof *r);
  if (st->kind != RX_STMT_REDUCE || st->nvars != 1 || !st->init || !st->inner) return false;
  r->st = st;
  r->k = st->vars[0];
  r->klo = st->lo[0];
  r->kext = st->extent[0];
  if (!sched_split_lets(st->init, r->init_lets, &r->ninit_lets, &r->init_store)) return false;
  if (!sched_split_lets(st->inner, r->upd_lets, &r->nupd_lets, &r->upd_store)) return false;
  const rx_stmt *is = r->init_store, *us = r->upd_store;
  if (is->buf != us->buf || !sched_same_idx(is->idx, is->nidx, us->idx, us->nidx)) return false;
  for (int i = 0; i < us->nidx; i++)
    if (sched_tx_uses(us->idx[i], r->k)) return false;
  if (sched_tx_loads(is->value, is->buf)) return false;
  const rx_tx *v = us->value;
  if (v->kind == RX_TX_BINARY && v->binop == RX_BINOP_ADD) {
    r->comb = RX_COMB_SUM;
  } else if (v->kind == RX_TX_CALL && (v->intrin == RX_INTRIN_MAX || v->intrin == RX_INTRIN_MIN)) {
    r->comb = v->intrin == RX_INTRIN_MAX ? RX_COMB_MAX : RX_COMB_MIN;
  } else {
    return false;
  }
  if (sched_is_acc_load(v->a, us)) {
    r->x = v->b;
    r->acc_first = true;
  } else if (sched_is_acc_load(v->b, us)) {
    r->x = v->a;
  } else {
    return false;
  }
  if (sched_tx_loads(r->x, us->buf)) return false;
  for (int i = 0; i < r->nupd_lets; i++)
    if (sched_tx_loads(r->upd_lets[i]->value, us->buf)) return false;
  return true;
}
