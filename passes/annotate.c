/* annotate: the fusion pattern of every tensor program, computed from its loop body (not from
 * the op it came from), so hand-written programs fuse as well as legalized ones.
 *
 * elementwise  one perfect nest of serial loops from 0; its innermost body only lets and
 *              stores; every store at the loop point (indices = the loop variables in nest
 *              order); every load at the point too
 * broadcast    as elementwise, but some loads at a projection of the point (a subsequence of
 *              the loop variables in order, or 0)
 * injective    stores at a permutation of the point, loads at any index expressions
 * out-fusable  a perfect nest over the output point whose body is [alloc local] reduce with an
 *              init storing a constant and an update `acc = acc + x * y` (casts allowed; lets
 *              before it, as quant_matmul's dequantization, which mm_match substitutes), then
 *              optionally the output at the point from the accumulator: matmul-like
 * reduction    anything else made of loops, reductions, lets, local allocs and stores (row
 *              sums, softmax-like staged rows)
 * opaque       anything else (bound loops, barriers, ifs, global/shared allocs) */
#include "passes.h"

#define MAXL 16

typedef struct nest {
  const rx_expr *vars[MAXL];
  int n;
  rx_stmt **body; /* innermost statements */
  int nbody;
  rx_stmt *single[1];
} nest;

/* Extracts a perfect nest of serial loops from 0 starting at s (a SEQ or FOR), with
 * ir_stmt_peel_serial; false when a loop starts elsewhere than 0 or the nest goes on past MAXL
 * loops or into a bound loop. */
static bool get_nest(rx_stmt *s, nest *out) {
  const rx_stmt *loops[MAXL], *inner;
  out->n = ir_stmt_peel_serial(s, MAXL, loops, &inner);
  for (int i = 0; i < out->n; i++) {
    if (!rx_expr_is_const(loops[i]->lo[0], 0)) return false;
    out->vars[i] = loops[i]->vars[0];
  }
  rx_stmt *body = (rx_stmt *)ir_stmt_unwrap(inner);
  if (body->kind == RX_STMT_FOR) return false;
  if (body->kind == RX_STMT_SEQ) {
    out->body = body->body;
    out->nbody = body->n;
  } else {
    out->single[0] = body;
    out->body = out->single;
    out->nbody = 1;
  }
  return out->n > 0;
}

/* -1: not a loop variable */
static int var_pos(const nest *ns, const rx_tx *t) {
  if (t->kind != RX_TX_SYM || t->sym->kind != RX_EXPR_VAR) return -1;
  for (int i = 0; i < ns->n; i++)
    if (ns->vars[i] == t->sym) return i;
  return -1;
}

static bool at_point(const nest *ns, rx_tx *const *idx, int n) {
  if (n != ns->n) return false;
  for (int i = 0; i < n; i++)
    if (var_pos(ns, idx[i]) != i) return false;
  return true;
}

static bool is_perm(const nest *ns, rx_tx *const *idx, int n) {
  if (n != ns->n) return false;
  unsigned seen = 0;
  for (int i = 0; i < n; i++) {
    int p = var_pos(ns, idx[i]);
    if (p < 0 || (seen >> p) & 1) return false;
    seen |= 1u << p;
  }
  return true;
}

static bool is_projection(const nest *ns, rx_tx *const *idx, int n) {
  int last = -1;
  for (int i = 0; i < n; i++) {
    if ((idx[i]->kind == RX_TX_SYM && rx_expr_is_const(idx[i]->sym, 0)) ||
        (idx[i]->kind == RX_TX_INT && idx[i]->ival == 0))
      continue;
    int p = var_pos(ns, idx[i]);
    if (p <= last) return false;
    last = p;
  }
  return true;
}

/* Worst load kind in e: 0 at point, 1 projection, 2 other. */
static int loads(const nest *ns, const rx_tx *e) {
  if (!e) return 0;
  int w = 0;
  if (e->kind == RX_TX_LOAD) {
    w = at_point(ns, e->idx, e->nidx) ? 0 : is_projection(ns, e->idx, e->nidx) ? 1 : 2;
    for (int i = 0; i < e->nidx; i++) {
      int k = loads(ns, e->idx[i]);
      if (k) w = 2;
    }
    return w;
  }
  int a = loads(ns, e->a), b = loads(ns, e->b), c = loads(ns, e->c);
  w = a > w ? a : w;
  w = b > w ? b : w;
  return c > w ? c : w;
}

static rx_pattern injective_like(rx_stmt *body) {
  nest ns;
  if (!get_nest(body, &ns)) return RX_PATTERN_UNKNOWN;
  int worst = 0, stores = 0;
  bool perm_only = false;
  for (int i = 0; i < ns.nbody; i++) {
    rx_stmt *s = ns.body[i];
    if (s->kind == RX_STMT_LET) {
      int w = loads(&ns, s->value);
      worst = w > worst ? w : worst;
    } else if (s->kind == RX_STMT_STORE) {
      stores++;
      if (!at_point(&ns, s->idx, s->nidx)) {
        if (!is_perm(&ns, s->idx, s->nidx)) return RX_PATTERN_UNKNOWN;
        perm_only = true;
      }
      int w = loads(&ns, s->value);
      worst = w > worst ? w : worst;
    } else {
      return RX_PATTERN_UNKNOWN;
    }
  }
  if (!stores) return RX_PATTERN_UNKNOWN;
  if (perm_only || worst == 2) return RX_PATTERN_INJECTIVE;
  return worst == 1 ? RX_PATTERN_BROADCAST : RX_PATTERN_ELEMWISE;
}

static const rx_tx *strip_cast(const rx_tx *e) {
  while (e && e->kind == RX_TX_CAST) e = e->a;
  return e;
}

static bool const_tx(const rx_tx *e) {
  e = strip_cast(e);
  return e && (e->kind == RX_TX_FLOAT || e->kind == RX_TX_INT);
}

static bool same_index(const rx_tx *a, const rx_tx *b) {
  if (a->kind == RX_TX_SYM && b->kind == RX_TX_SYM) return a->sym == b->sym;
  if (a->kind == RX_TX_INT && b->kind == RX_TX_INT) return a->ival == b->ival;
  return false;
}

static bool same_access(const rx_tx *load, const rx_stmt *store) {
  if (load->kind != RX_TX_LOAD || load->buf != store->buf || load->nidx != store->nidx)
    return false;
  for (int i = 0; i < load->nidx; i++)
    if (!same_index(load->idx[i], store->idx[i])) return false;
  return true;
}

static const rx_stmt *only_store(const rx_stmt *s) {
  while (s && s->kind == RX_STMT_SEQ && s->n == 1) s = s->body[0];
  return s && s->kind == RX_STMT_STORE ? s : NULL;
}

/* The store of a reduction's update: the store alone, or lets then the store. */
static const rx_stmt *update_store(const rx_stmt *s) {
  while (s && s->kind == RX_STMT_SEQ && s->n == 1) s = s->body[0];
  if (!s || s->kind != RX_STMT_SEQ || s->n < 2) return only_store(s);
  for (int i = 0; i + 1 < s->n; i++)
    if (s->body[i]->kind != RX_STMT_LET) return NULL;
  return only_store(s->body[s->n - 1]);
}

/* r is a sum reduction `acc = acc + x * y` (casts allowed, lets before it) from a constant init;
 * its update's store into *up. */
static bool sum_of_products(const rx_stmt *r, const rx_stmt **out_up) {
  const rx_stmt *init = only_store(r->init), *up = update_store(r->inner);
  *out_up = up;
  if (!init || !up || init->buf != up->buf || !const_tx(init->value)) return false;
  const rx_tx *v = up->value;
  if (v->kind != RX_TX_BINARY || v->binop != RX_BINOP_ADD) return false;
  const rx_tx *acc = v->a, *prod = v->b;
  if (!same_access(acc, up)) {
    acc = v->b;
    prod = v->a;
  }
  if (!same_access(acc, up)) return false;
  prod = strip_cast(prod);
  return prod->kind == RX_TX_BINARY && prod->binop == RX_BINOP_MUL;
}

/* [allocs] reduce [store at the point], or with several reductions over local accumulators (an
 * RMSNorm's sum of squares beside the projection, two projections: rms_norm_matmul) allocs,
 * reduces, then lets and stores to locals and the one store at the point. */
static bool out_fusable(rx_stmt *body) {
  nest ns;
  if (!get_nest(body, &ns)) return false;
  int i = 0;
  for (; i < ns.nbody && ns.body[i]->kind == RX_STMT_ALLOC; i++)
    if (ns.body[i]->buf->scope != RX_SCOPE_LOCAL) return false;
  int nalloc = i, nred = 0;
  bool acc_is_out = false;
  for (; i < ns.nbody && ns.body[i]->kind == RX_STMT_REDUCE; i++, nred++) {
    const rx_stmt *up;
    if (!sum_of_products(ns.body[i], &up)) return false;
    acc_is_out = at_point(&ns, up->idx, up->nidx);
    if (acc_is_out && nred > 0) return false;
  }
  if (nred == 0 || (nred == 1 && nalloc > 1)) return false;
  if (i == ns.nbody) return acc_is_out && nred == 1;
  if (acc_is_out) return false;
  if (nred == 1) {
    const rx_stmt *st = ns.body[i];
    return i + 1 == ns.nbody && st->kind == RX_STMT_STORE && at_point(&ns, st->idx, st->nidx);
  }
  for (; i + 1 < ns.nbody; i++) {
    const rx_stmt *st = ns.body[i];
    if (st->kind != RX_STMT_LET && !(st->kind == RX_STMT_STORE && st->buf->scope == RX_SCOPE_LOCAL))
      return false;
  }
  const rx_stmt *st = ns.body[i];
  return st->kind == RX_STMT_STORE && at_point(&ns, st->idx, st->nidx);
}

/* Everything is loops, reductions, lets, local allocs and stores (at least one reduce). */
static bool plain(const rx_stmt *s, int *reduces) {
  if (!s) return true;
  switch (s->kind) {
  case RX_STMT_SEQ:
    for (int i = 0; i < s->n; i++)
      if (!plain(s->body[i], reduces)) return false;
    return true;
  case RX_STMT_FOR:
    return s->loop_kind == RX_LOOP_SERIAL && plain(s->inner, reduces);
  case RX_STMT_REDUCE:
    (*reduces)++;
    return plain(s->init, reduces) && plain(s->inner, reduces);
  case RX_STMT_STORE:
  case RX_STMT_LET:
    return true;
  case RX_STMT_ALLOC:
    return s->buf->scope == RX_SCOPE_LOCAL;
  case RX_STMT_IF:
  case RX_STMT_BARRIER:
  case RX_STMT_MMA:
  case RX_STMT_ASYNC_COPY:
  case RX_STMT_ASYNC_COMMIT:
  case RX_STMT_ASYNC_WAIT:
  case RX_STMT_LDMATRIX:
  case RX_STMT_FRAG:
  case RX_STMT_WGMMA:
  case RX_STMT_WGMMA_FENCE:
  case RX_STMT_WGMMA_COMMIT:
  case RX_STMT_WGMMA_WAIT:
    return false;
  }
  return false;
}

/* Does s hold a symbolic let (a loop bound loaded from a buffer, ir.h rx_local.sym)? */
static bool has_sym_let(const rx_stmt *s) {
  if (!s) return false;
  if (s->kind == RX_STMT_LET && s->local && s->local->sym) return true;
  for (int i = 0; i < s->n; i++)
    if (has_sym_let(s->body[i])) return true;
  return has_sym_let(s->inner) || has_sym_let(s->init) || has_sym_let(s->otherwise);
}

static rx_pattern classify(rx_tensor_fn *t) {
  /* data-dependent loops: no fusion pattern assumes them */
  if (!t->body || has_sym_let(t->body)) return RX_PATTERN_OPAQUE;
  int nout = 0;
  for (int i = 0; i < t->nparams; i++)
    if (t->params[i]->kind == RX_PARAM_BUFFER && t->params[i]->is_output) nout++;
  rx_pattern p = injective_like(t->body);
  if (p != RX_PATTERN_UNKNOWN) return p;
  if (nout == 1 && out_fusable(t->body)) return RX_PATTERN_OUT_FUSABLE;
  int reduces = 0;
  if (plain(t->body, &reduces) && reduces > 0) return RX_PATTERN_REDUCTION;
  return RX_PATTERN_OPAQUE;
}

bool pass_annotate(rx_module *m, rx_diag *diag) {
  (void)diag;
  for (size_t i = 0; i < m->items.len; i++)
    if (m->items.data[i].kind == RX_ITEM_TENSOR) {
      rx_tensor_fn *t = m->items.data[i].fn;
      t->pattern = classify(t);
    }
  return true;
}
