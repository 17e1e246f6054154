/* ir/bounds.c: accesses provably outside their buffer (ir_tensor_fn_check_bounds, ir.h).
 *
 * For each load and store whose index along a dimension is a symbolic expression (RX_TX_SYM, or a
 * literal),
 * the analyzer (shapes/) is given the program's facts, the ranges of the enclosing loops and the
 * conditions of the enclosing `if`s; an index that is provably >= the dimension's extent, or
 * provably < 0, for every value they allow is an error naming the program, the buffer, the
 * access and the extent. Only what is provable is refused: an index loaded from data, or one
 * whose range is unknown, stays allowed (the run-time checks of ops with data indices cover
 * those). Code the analyzer proves unreachable (a loop of extent <= 0, an `if` whose condition
 * contradicts the facts) is not checked. */
#include "ir.h"

#include <stdio.h>
#include <stdlib.h>

typedef struct bctx {
  rx_analyzer *an;
  rx_expr_ctx *cx;
  rx_diag *diag;
  const rx_tensor_fn *fn;
  int errors;
} bctx;

static char *interval_str(rx_interval r, char *buf, size_t n) {
  char lo[32], hi[32];
  if (r.lo == INT64_MIN)
    snprintf(lo, sizeof lo, "-inf");
  else
    snprintf(lo, sizeof lo, "%lld", (long long)r.lo);
  if (r.hi == INT64_MAX)
    snprintf(hi, sizeof hi, "+inf");
  else
    snprintf(hi, sizeof hi, "%lld", (long long)r.hi);
  snprintf(buf, n, "[%s, %s]", lo, hi);
  return buf;
}

static void access(bctx *b, const rx_buffer *buf, rx_tx *const *idx, int n, rx_loc loc,
                   bool store) {
  if (!buf || buf->frag || !buf->shape || n != buf->ndim) return;
  for (int d = 0; d < n; d++) {
    if (!idx[d] || !buf->shape[d]) continue;
    const rx_expr *e = idx[d]->kind == RX_TX_SYM   ? idx[d]->sym
                       : idx[d]->kind == RX_TX_INT ? sym_expr_const(b->cx, idx[d]->ival)
                                                   : NULL,
                  *ext = buf->shape[d];
    if (!e) continue;
    bool above = sym_analyzer_prove(b->an, sym_expr_cmp(b->cx, RX_EXPR_LE, ext, e)) == RX_TRUE;
    bool below =
        !above && sym_analyzer_prove(b->an, sym_expr_cmp(b->cx, RX_EXPR_LT, e,
                                                         sym_expr_const(b->cx, 0))) == RX_TRUE;
    if (!above && !below) continue;
    char *es = sym_expr_to_string(e), *xs = sym_expr_to_string(ext), range[100] = "";
    rx_interval r = sym_analyzer_bounds(b->an, e);
    if (r.lo != INT64_MIN || r.hi != INT64_MAX) {
      char iv[80];
      snprintf(range, sizeof range, " (the index is in %s)", interval_str(r, iv, sizeof iv));
    }
    base_diag_report(
        b->diag, RX_DIAG_ERROR, loc,
        "tensor program '%s': %s of buffer '%s' at index %d (%s) is outside its extent "
        "[0, %s) for every value of the loop ranges and facts%s",
        b->fn->name, store ? "store" : "load", buf->name, d, es, xs, range);
    free(es);
    free(xs);
    b->errors++;
  }
}

static void walk_tx(bctx *b, const rx_tx *e);

/* e, evaluated only where cond (negated: where it fails) holds: `select` and `&&` / `||` are
 * lazy, so a load they guard is checked under that condition, and not at all when the condition
 * is no symbolic expression the analyzer can take. */
static void walk_guarded(bctx *b, const rx_tx *cond, bool negate, const rx_tx *e) {
  if (!e || !cond || cond->kind != RX_TX_SYM) return;
  size_t m = sym_analyzer_mark(b->an);
  const rx_expr *c = negate ? sym_expr_not(b->cx, cond->sym) : cond->sym;
  if (sym_analyzer_prove(b->an, c) != RX_FALSE && sym_analyzer_assume(b->an, c)) walk_tx(b, e);
  sym_analyzer_reset(b->an, m);
}

static void walk_tx(bctx *b, const rx_tx *e) {
  if (!e) return;
  if (e->kind == RX_TX_LOAD) {
    access(b, e->buf, e->idx, e->nidx, e->loc, false);
    for (int i = 0; i < e->nidx; i++) walk_tx(b, e->idx[i]);
  }
  walk_tx(b, e->a);
  if (e->kind == RX_TX_SELECT) {
    walk_guarded(b, e->a, false, e->b);
    walk_guarded(b, e->a, true, e->c);
    return;
  }
  if (e->kind == RX_TX_BINARY && (e->binop == RX_BINOP_AND || e->binop == RX_BINOP_OR)) {
    walk_guarded(b, e->a, e->binop == RX_BINOP_OR, e->b);
    return;
  }
  walk_tx(b, e->b);
  walk_tx(b, e->c);
}

static void walk(bctx *b, const rx_stmt *s);

/* Binds the ranges of a FOR or REDUCE; false when one is provably empty (the body never runs). */
static bool bind_ranges(bctx *b, const rx_stmt *s) {
  for (int i = 0; i < s->nvars; i++) {
    if (sym_analyzer_prove(b->an, sym_expr_cmp(b->cx, RX_EXPR_LE, s->extent[i],
                                               sym_expr_const(b->cx, 0))) == RX_TRUE)
      return false;
    sym_analyzer_bind_range(b->an, s->vars[i], s->lo[i], s->extent[i]);
  }
  return true;
}

/* A branch under cond (negated: the else branch), unless the facts contradict it. */
static void walk_branch(bctx *b, const rx_tx *cond, bool negate, const rx_stmt *body) {
  if (!body) return;
  size_t m = sym_analyzer_mark(b->an);
  bool live = true;
  if (cond && cond->kind == RX_TX_SYM) {
    const rx_expr *c = negate ? sym_expr_not(b->cx, cond->sym) : cond->sym;
    live = sym_analyzer_prove(b->an, c) != RX_FALSE && sym_analyzer_assume(b->an, c);
  }
  if (live) walk(b, body);
  sym_analyzer_reset(b->an, m);
}

static void walk(bctx *b, const rx_stmt *s) {
  if (!s) return;
  switch (s->kind) {
  case RX_STMT_SEQ:
    for (int i = 0; i < s->n; i++) walk(b, s->body[i]);
    break;
  case RX_STMT_FOR:
  case RX_STMT_REDUCE: {
    if (s->kind == RX_STMT_REDUCE) walk(b, s->init);
    size_t m = sym_analyzer_mark(b->an);
    if (bind_ranges(b, s)) walk(b, s->inner);
    sym_analyzer_reset(b->an, m);
    break;
  }
  case RX_STMT_STORE:
    access(b, s->buf, s->idx, s->nidx, s->loc, true);
    for (int i = 0; i < s->nidx; i++) walk_tx(b, s->idx[i]);
    walk_tx(b, s->value);
    break;
  case RX_STMT_LET:
    walk_tx(b, s->value);
    break;
  case RX_STMT_IF:
    if (s->value && s->value->kind == RX_TX_HAS_FRAG) {
      walk(b, s->inner);
      walk(b, s->otherwise);
      break;
    }
    walk_tx(b, s->value);
    walk_branch(b, s->value, false, s->inner);
    walk_branch(b, s->value, true, s->otherwise);
    break;
  default: /* allocations, barriers, matrix-unit and async statements: not checked */
    break;
  }
}

int ir_tensor_fn_check_bounds(rx_module *m, const rx_tensor_fn *fn, rx_diag *diag) {
  bctx b = {.an = sym_analyzer_new(m->ctx), .cx = m->ctx, .diag = diag, .fn = fn};
  bool ok = true;
  for (int i = 0; i < fn->nfacts; i++) ok = sym_analyzer_assume(b.an, fn->facts[i]) && ok;
  if (ok) walk(&b, fn->body); /* contradictory facts: nothing is provable */
  sym_analyzer_free(b.an);
  return b.errors;
}
