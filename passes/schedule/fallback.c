/* passes/schedule/fallback.c: the FALLBACK rule: every top-level statement a kernel.
 *
 *   FALLBACK       every top-level statement becomes a kernel: its outer serial loops whose
 *                  iterations write disjoint elements are fused, split and bound; the rest runs
 *                  serially per thread (or in one thread when no loop is independent). */
#include "rules.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------------------------
 * FALLBACK
 * ------------------------------------------------------------------------------------------ */
typedef struct indep_chk {
  const rx_expr *v;
  rx_buffer *bufs[MAX_TRACKED];
  int pos[MAX_TRACKED];
  int n;
  bool ok;
} indep_chk;

static void indep_stores(const rx_stmt *s, indep_chk *c) {
  if (!s || !c->ok) return;
  if (s->kind == RX_STMT_STORE) {
    int p = -1;
    for (int k = 0; k < s->nidx; k++)
      if (sched_sym_is(s->idx[k], c->v)) p = k;
    if (p < 0 || s->buf->scope != RX_SCOPE_GLOBAL) {
      if (s->buf->scope == RX_SCOPE_GLOBAL) c->ok = false;
      return;
    }
    for (int i = 0; i < c->n; i++)
      if (c->bufs[i] == s->buf && c->pos[i] != p) c->ok = false;
    if (c->n < MAX_TRACKED) {
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
      if (p >= e->nidx || !sched_sym_is(e->idx[p], c->v)) return false;
    }
  return true;
}
/* Iterations of loop variable v in body write disjoint elements (each store has v as a plain
 * index at a fixed position per buffer, and loads of stored buffers read at that position). */
static bool independent(const rx_stmt *body, const rx_expr *v) {
  indep_chk c = {.v = v, .ok = true};
  indep_stores(body, &c);
  return c.ok && sched_all_loads_stmt(body, indep_load, &c);
}

static bool fallback_schedule(rx_sctx *s, rx_stmtvec *out) {
  const rx_stmt *b = s->f->body;
  for (int i = 0; i < sched_seq_len(b); i++) {
    const rx_stmt *st = sched_seq_at(b, i);
    if (st->kind == RX_STMT_ALLOC || st->kind == RX_STMT_LET) {
      base_diag_report(s->diag, RX_DIAG_ERROR, st->loc,
                       "cannot schedule '%s': a top-level %s outside every loop nest cannot be "
                       "placed in a kernel",
                       s->f->name, st->kind == RX_STMT_ALLOC ? "alloc" : "let");
      return false;
    }
    nest nt;
    sched_get_nest(st, &nt);
    int nf = 0;
    while (nf < nt.n) {
      /* the body below loop nf */
      const rx_stmt *inner = st;
      for (int q = 0; q <= nf; q++) inner = sched_unwrap(inner)->inner;
      if (!independent(inner, nt.vars[nf])) break;
      nf++;
    }
    const rx_expr *bx = sched_fresh_var(s, "bx"), *tx = sched_fresh_var(s, "tx");
    if (nf == 0) {
      /* one thread runs it */
      rx_stmt *body = sched_rewrite_stmt(&(rx_rewrite){.s = s}, st);
      RX_VEC_PUSH(out, sched_kernel1(s, bx, sx_const(s->cx, 1), tx, 1, body));
      continue;
    }
    const rx_stmt *inner = st;
    for (int q = 0; q < nf; q++) inner = sched_unwrap(inner)->inner;
    int B = sched_block_threads(s, BLOCK_THREADS);
    const rx_expr *repl[MAXN];
    const rx_expr *g = sx_add(s->cx, sx_mul_c(s->cx, bx, B), tx);
    const rx_expr *total = sym_analyzer_simplify(s->an, sched_fuse(s, nt.ext, nf, g, repl));
    for (int k = 0; k < nf; k++) repl[k] = sx_add(s->cx, nt.lo[k], repl[k]);
    const rx_expr *nblocks;
    const rx_expr *guard = sched_split(s, total, B, bx, tx, &nblocks);
    rx_rewrite rw = {.s = s, .vars = nt.vars, .repl = repl, .n = nf};
    rx_stmt *body = sched_guard(s, guard, sched_rewrite_stmt(&rw, inner));
    RX_VEC_PUSH(out, sched_kernel1(s, bx, nblocks, tx, B, body));
  }
  return true;
}

bool sched_fallback(rx_sctx *s, const rx_tensor_fn *f, sched_out *o) {
  rx_stmtvec ks = {0};
  o->ok = fallback_schedule(s, &ks);
  if (o->ok) o->body = sched_seq(s, &ks);
  free(ks.data);
  rx_sched_variant v = {NULL, RX_SCHED_FALLBACK, NULL};
  sched_set_variants(o->m, o->res, &v, 1);
  return true;
}
