/* passes/schedule/row_reduction.c: the ROW_REDUCTION rule (one block per row, reductions across
 * threads).
 *
 *   ROW_REDUCTION  `for rows... { ITEM... }` where ITEM is `alloc NAME: T[consts] local`, a
 *                  `let`, a store (not using a row-local loop), a `reduce j in 0..m { init {
 *                  LET... acc = v0 } update { LET... acc = acc + X | max(acc, X) | min(acc, X) }
 *                  }` whose X uses j only as the last index of its loads (innermost axis), or a
 *                  `for j in 0..m { ... }` stage whose stores have j as their last index. One
 *                  block per row (rows fused); each REDUCE accumulates strided partials with
 *                  the combiner's identity, reduces them across threads (subgroup + shared, or
 *                  a shared tree) and applies init exactly: acc = combine(v0, total). A reduced
 *                  value that is not in a local buffer is kept in a per-thread local (the
 *                  broadcast) and written to memory by thread 0. */
#include "rules.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------------------------
 * ROW_REDUCTION
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
  for (int i = 0; i < sched_seq_len(b); i++) {
    const rx_stmt *st = sched_seq_at(b, i);
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
      if (!sched_red_parse(st, &r)) return false;
      inner_chk ic = {r.k};
      if (!sched_all_loads(r.x, innermost_load, &ic)) return false;
      for (int l = 0; l < r.nupd_lets; l++)
        if (!sched_all_loads(r.upd_lets[l]->value, innermost_load, &ic)) return false;
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
  redirect r[MAX_REDIRECTS];
  int n;
} row_ud;

static rx_tx *row_hook(rx_rewrite *rw, rx_tx *load) {
  row_ud *u = rw->ud;
  for (int i = 0; i < u->n; i++) {
    if (u->r[i].buf == load->buf &&
        sched_same_idx(load->idx, load->nidx, u->r[i].idx, u->r[i].nidx)) {
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
  for (int i = 0; i < sched_seq_len(b); i++)
    if (sched_seq_at(b, i)->kind == RX_STMT_REDUCE) {
      const rx_expr *e = sched_seq_at(b, i)->extent[0];
      if (e->kind == RX_EXPR_CONST) m = e->value;
      break;
    }
  int want = BLOCK_THREADS;
  if (m >= 0) {
    int minb = s->t->subgroup_size > MIN_ROW_THREADS ? s->t->subgroup_size : MIN_ROW_THREADS;
    want = sched_pow2_ceil(m);
    if (want < minb) want = minb;
    if (want > BLOCK_THREADS) want = BLOCK_THREADS;
  }
  int B = sched_block_threads(s, want);
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
  for (int i = 0; i < sched_seq_len(b); i++) {
    const rx_stmt *st = sched_seq_at(b, i);
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
      sched_red_parse(st, &r);
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
        if (ud.n < MAX_REDIRECTS) {
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
  return sched_kernel1(s, bx, nrows, tx, B, rx_sched_seq(s, &out));
}

bool sched_row_reduction(rx_sctx *s, const rx_tensor_fn *f, sched_out *o) {
  nest rn;
  if (!row_match(f, &rn)) return false;
  o->body = row_schedule(s, &rn);
  rx_sched_variant v = {NULL, RX_SCHED_ROW_REDUCTION, NULL};
  sched_set_variants(o->m, o->res, &v, 1);
  return true;
}
