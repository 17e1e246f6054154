/* Schedule primitives: rewriting with substitution, split, fuse, cross-thread reduction, and
 * the constructors the rules use. See prims.h. */
#include "prims.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- names ---- */
static bool name_used(rx_sctx *s, const char *name) {
  for (size_t i = 0; i < s->names.len; i++)
    if (strcmp((const char *)s->names.data[i], name) == 0) return true;
  return false;
}
static void add_name(rx_sctx *s, const char *name) {
  if (name && !name_used(s, name)) rx_ptrvec_push(&s->names, (void *)name);
}
static void add_expr_names(rx_sctx *s, const rx_expr *e) {
  if (!e) return;
  rx_ptrvec vs = {0};
  rx_expr_collect_vars(e, &vs);
  for (size_t i = 0; i < vs.len; i++) add_name(s, ((const rx_expr *)vs.data[i])->name);
  rx_ptrvec_free(&vs);
}
static void collect_tx_names(rx_sctx *s, const rx_tx *e) {
  if (!e) return;
  if (e->kind == RX_TX_SYM) add_expr_names(s, e->sym);
  if (e->kind == RX_TX_LOCAL && e->local) add_name(s, e->local->name);
  for (int i = 0; i < e->nidx; i++) collect_tx_names(s, e->idx[i]);
  collect_tx_names(s, e->a);
  collect_tx_names(s, e->b);
  collect_tx_names(s, e->c);
}
static void collect_names(rx_sctx *s, const rx_stmt *st) {
  if (!st) return;
  for (int i = 0; i < st->n; i++) collect_names(s, st->body[i]);
  for (int i = 0; i < st->nvars; i++) {
    add_expr_names(s, st->vars[i]);
    add_expr_names(s, st->lo[i]);
    add_expr_names(s, st->extent[i]);
  }
  if (st->buf) add_name(s, st->buf->name);
  if (st->local) add_name(s, st->local->name);
  for (int i = 0; i < st->nidx; i++) collect_tx_names(s, st->idx[i]);
  collect_tx_names(s, st->value);
  collect_names(s, st->inner);
  collect_names(s, st->init);
  collect_names(s, st->otherwise);
}

void rx_sctx_init(rx_sctx *s, rx_module *m, const rx_tensor_fn *f, const rx_target *t,
                  rx_diag *diag) {
  memset(s, 0, sizeof *s);
  s->m = m;
  s->cx = m->ctx;
  s->t = t;
  s->diag = diag;
  s->f = f;
  s->loc = f->loc;
  s->an = rx_analyzer_new(m->ctx);
  add_name(s, f->name);
  for (int i = 0; i < f->nparams; i++) {
    const rx_param *p = f->params[i];
    if (p->kind == RX_PARAM_BUFFER) {
      add_name(s, p->buf->name);
      for (int d = 0; d < p->buf->ndim; d++) {
        add_expr_names(s, p->buf->shape[d]);
        rx_ptrvec vs = {0};
        rx_expr_collect_vars(p->buf->shape[d], &vs);
        for (size_t k = 0; k < vs.len; k++)
          rx_analyzer_assume(s->an, rx_expr_cmp(s->cx, RX_EXPR_LE, rx_expr_const(s->cx, 0),
                                                (const rx_expr *)vs.data[k]));
        rx_ptrvec_free(&vs);
      }
    } else {
      add_expr_names(s, p->var);
      rx_analyzer_assume(s->an, rx_expr_cmp(s->cx, RX_EXPR_LE, rx_expr_const(s->cx, 0), p->var));
    }
  }
  for (int i = 0; i < f->nfacts; i++) rx_analyzer_assume(s->an, f->facts[i]);
  collect_names(s, f->body);
}

void rx_sctx_free(rx_sctx *s) {
  rx_analyzer_free(s->an);
  rx_ptrvec_free(&s->names);
}

const char *rx_sched_fresh(rx_sctx *s, const char *base) {
  char buf[96];
  snprintf(buf, sizeof buf, "%s", base);
  for (int k = 1; name_used(s, buf); k++) snprintf(buf, sizeof buf, "%s_%d", base, k);
  const char *n = rx_module_intern(s->m, buf, strlen(buf));
  add_name(s, n);
  return n;
}

const rx_expr *rx_sched_fresh_var(rx_sctx *s, const char *base) {
  return rx_expr_var(s->cx, rx_sched_fresh(s, base));
}

/* ---- rewriting ---- */
static const rx_expr *rw_sym(rx_rewrite *rw, const rx_expr *e) {
  if (!e || rw->n == 0) return e;
  return rx_expr_subst(rw->s->cx, e, rw->vars, rw->repl, (size_t)rw->n);
}

rx_tx *rx_sched_rewrite_tx(rx_rewrite *rw, const rx_tx *e) {
  if (!e) return NULL;
  rx_module *m = rw->s->m;
  rx_tx *r;
  switch (e->kind) {
  case RX_TX_SYM:
    r = rx_tx_sym(m, rw_sym(rw, e->sym), e->loc);
    r->dtype = e->dtype; /* substitution keeps the type (a comparison may fold to 0 or 1) */
    return r;
  case RX_TX_LOAD: {
    rx_tx **idx = rx_module_alloc(m, sizeof *idx * (size_t)(e->nidx ? e->nidx : 1));
    for (int i = 0; i < e->nidx; i++) idx[i] = rx_sched_rewrite_tx(rw, e->idx[i]);
    r = rx_tx_load(m, e->buf, idx, e->nidx, e->loc);
    return rw->hook ? rw->hook(rw, r) : r;
  }
  default:
    r = rx_module_alloc(m, sizeof *r);
    *r = *e;
    r->a = rx_sched_rewrite_tx(rw, e->a);
    r->b = rx_sched_rewrite_tx(rw, e->b);
    r->c = rx_sched_rewrite_tx(rw, e->c);
    return r;
  }
}

rx_stmt *rx_sched_rewrite_stmt(rx_rewrite *rw, const rx_stmt *st) {
  if (!st) return NULL;
  rx_module *m = rw->s->m;
  rx_stmt *r = rx_module_alloc(m, sizeof *r);
  *r = *st;
  if (st->n) {
    r->body = rx_module_alloc(m, sizeof *r->body * (size_t)st->n);
    for (int i = 0; i < st->n; i++) r->body[i] = rx_sched_rewrite_stmt(rw, st->body[i]);
  }
  if (st->nvars) {
    r->lo = rx_module_alloc(m, sizeof *r->lo * (size_t)st->nvars);
    r->extent = rx_module_alloc(m, sizeof *r->extent * (size_t)st->nvars);
    for (int i = 0; i < st->nvars; i++) {
      r->lo[i] = rw_sym(rw, st->lo[i]);
      r->extent[i] = rw_sym(rw, st->extent[i]);
    }
  }
  if (st->nidx) {
    r->idx = rx_module_alloc(m, sizeof *r->idx * (size_t)st->nidx);
    for (int i = 0; i < st->nidx; i++) r->idx[i] = rx_sched_rewrite_tx(rw, st->idx[i]);
  }
  r->value = rx_sched_rewrite_tx(rw, st->value);
  r->cond = rx_sched_rewrite_tx(rw, st->cond);
  r->inner = rx_sched_rewrite_stmt(rw, st->inner);
  r->init = rx_sched_rewrite_stmt(rw, st->init);
  r->otherwise = rx_sched_rewrite_stmt(rw, st->otherwise);
  return r;
}

rx_stmt *rx_sched_subst1(rx_sctx *s, const rx_stmt *st, const rx_expr *var, const rx_expr *by) {
  rx_rewrite rw = {.s = s, .vars = &var, .repl = &by, .n = 1};
  return rx_sched_rewrite_stmt(&rw, st);
}
rx_tx *rx_sched_subst1_tx(rx_sctx *s, const rx_tx *e, const rx_expr *var, const rx_expr *by) {
  rx_rewrite rw = {.s = s, .vars = &var, .repl = &by, .n = 1};
  return rx_sched_rewrite_tx(&rw, e);
}

/* ---- constructors ---- */
rx_stmt *rx_sched_seq(rx_sctx *s, rx_stmtvec *v) {
  rx_stmt *r = rx_stmt_new(s->m, RX_STMT_SEQ, s->loc);
  r->n = (int)v->len;
  r->body = rx_module_alloc(s->m, sizeof *r->body * (v->len ? v->len : 1));
  if (v->len) memcpy(r->body, v->data, sizeof *r->body * v->len);
  free(v->data);
  v->data = NULL;
  v->len = v->cap = 0;
  return r;
}
rx_stmt *rx_sched_seq1(rx_sctx *s, rx_stmt *a) {
  if (a && a->kind == RX_STMT_SEQ) return a;
  rx_stmtvec v = {0};
  RX_VEC_PUSH(&v, a);
  return rx_sched_seq(s, &v);
}
rx_stmt *rx_sched_for(rx_sctx *s, const rx_expr *var, const rx_expr *extent, rx_loop_kind k,
                      rx_stmt *body) {
  rx_stmt *r = rx_stmt_new(s->m, RX_STMT_FOR, s->loc);
  r->nvars = 1;
  r->vars = rx_module_alloc(s->m, sizeof *r->vars);
  r->lo = rx_module_alloc(s->m, sizeof *r->lo);
  r->extent = rx_module_alloc(s->m, sizeof *r->extent);
  r->vars[0] = var;
  r->lo[0] = rx_expr_const(s->cx, 0);
  r->extent[0] = extent;
  r->loop_kind = k;
  r->inner = rx_sched_seq1(s, body);
  return r;
}
rx_stmt *rx_sched_store(rx_sctx *s, rx_buffer *b, rx_tx **idx, int n, rx_tx *v) {
  rx_stmt *r = rx_stmt_new(s->m, RX_STMT_STORE, s->loc);
  r->buf = b;
  r->nidx = n;
  r->idx = rx_arena_dup(&s->m->arena, idx, sizeof *idx * (size_t)(n ? n : 1));
  r->value = v;
  return r;
}
rx_stmt *rx_sched_let(rx_sctx *s, rx_local *l, rx_tx *v) {
  rx_stmt *r = rx_stmt_new(s->m, RX_STMT_LET, s->loc);
  r->local = l;
  r->value = v;
  return r;
}
rx_local *rx_sched_local(rx_sctx *s, const char *base, rx_dtype t) {
  rx_local *l = rx_module_alloc(s->m, sizeof *l);
  l->name = rx_sched_fresh(s, base);
  l->dtype = t;
  l->loc = s->loc;
  return l;
}
rx_stmt *rx_sched_if(rx_sctx *s, rx_tx *cond, rx_stmt *then, rx_stmt *otherwise) {
  rx_stmt *r = rx_stmt_new(s->m, RX_STMT_IF, s->loc);
  r->value = cond;
  r->inner = rx_sched_seq1(s, then);
  r->otherwise = otherwise ? rx_sched_seq1(s, otherwise) : NULL;
  return r;
}
rx_stmt *rx_sched_barrier(rx_sctx *s) { return rx_stmt_new(s->m, RX_STMT_BARRIER, s->loc); }

rx_buffer *rx_sched_alloc(rx_sctx *s, const char *base, rx_dtype t, rx_scope scope,
                          const int64_t *shape, int ndim, rx_stmt **out_alloc) {
  rx_buffer *b = rx_module_alloc(s->m, sizeof *b);
  b->name = rx_sched_fresh(s, base);
  b->dtype = t;
  b->ndim = ndim;
  b->shape = rx_module_alloc(s->m, sizeof *b->shape * (size_t)ndim);
  for (int i = 0; i < ndim; i++) b->shape[i] = rx_expr_const(s->cx, shape[i]);
  b->scope = scope;
  b->loc = s->loc;
  rx_stmt *a = rx_stmt_new(s->m, RX_STMT_ALLOC, s->loc);
  a->buf = b;
  *out_alloc = a;
  return b;
}
rx_tx *rx_sched_sym(rx_sctx *s, const rx_expr *e) {
  rx_tx *r = rx_tx_sym(s->m, e, s->loc);
  if (e->kind == RX_EXPR_CONST) r->dtype = RX_DTYPE_I64; /* an index, not a folded condition */
  return r;
}
rx_tx *rx_sched_cond(rx_sctx *s, const rx_expr *e) {
  rx_tx *r = rx_tx_sym(s->m, e, s->loc);
  r->dtype = RX_DTYPE_BOOL;
  return r;
}
rx_tx *rx_sched_load(rx_sctx *s, rx_buffer *b, const rx_expr *const *idx, int n) {
  rx_tx *ix[RX_MAX_IDX];
  for (int i = 0; i < n; i++) ix[i] = rx_sched_sym(s, idx[i]);
  return rx_tx_load(s->m, b, ix, n, s->loc);
}
rx_stmt *rx_sched_store_e(rx_sctx *s, rx_buffer *b, const rx_expr *const *idx, int n, rx_tx *v) {
  rx_tx *ix[RX_MAX_IDX];
  for (int i = 0; i < n; i++) ix[i] = rx_sched_sym(s, idx[i]);
  return rx_sched_store(s, b, ix, n, v);
}
rx_stmt *rx_sched_guard(rx_sctx *s, const rx_expr *cond, rx_stmt *body) {
  if (!cond) return body;
  cond = rx_analyzer_simplify(s->an, cond);
  if (rx_expr_is_const(cond, 1)) return body;
  return rx_sched_if(s, rx_sched_cond(s, cond), body, NULL);
}

bool rx_sched_proves(rx_sctx *s, const rx_expr *cond) {
  return rx_analyzer_prove(s->an, cond) == RX_TRUE;
}

/* ---- split and fuse ---- */
const rx_expr *rx_sched_split(rx_sctx *s, const rx_expr *extent, int64_t factor,
                              const rx_expr *outer, const rx_expr *inner,
                              const rx_expr **out_outer_extent) {
  rx_expr_ctx *cx = s->cx;
  const rx_expr *f = rx_expr_const(cx, factor);
  int64_t d = rx_analyzer_divisor(s->an, extent);
  bool exact = d == 0 || d % factor == 0;
  *out_outer_extent =
      exact ? rx_analyzer_simplify(s->an, rx_expr_floordiv(cx, extent, f))
            : rx_analyzer_simplify(
                  s->an,
                  rx_expr_floordiv(cx, rx_expr_add(cx, extent, rx_expr_const(cx, factor - 1)), f));
  if (exact) return NULL;
  const rx_expr *pos = rx_expr_add(cx, rx_expr_mul(cx, outer, f), inner);
  const rx_expr *cond = rx_expr_cmp(cx, RX_EXPR_LT, pos, extent);
  /* with the ranges of outer and inner bound, the analyzer may still prove it (e.g. extent a
   * constant multiple after simplification) */
  size_t mk = rx_analyzer_mark(s->an);
  if (outer->kind == RX_EXPR_VAR)
    rx_analyzer_bind_range(s->an, outer, rx_expr_const(cx, 0), *out_outer_extent);
  if (inner->kind == RX_EXPR_VAR) rx_analyzer_bind_range(s->an, inner, rx_expr_const(cx, 0), f);
  bool proven = rx_sched_proves(s, cond);
  rx_analyzer_reset(s->an, mk);
  return proven ? NULL : cond;
}

const rx_expr *rx_sched_fuse(rx_sctx *s, const rx_expr *const *extents, int n, const rx_expr *fused,
                             const rx_expr **repl) {
  rx_expr_ctx *cx = s->cx;
  const rx_expr *stride = rx_expr_const(cx, 1);
  for (int i = n - 1; i >= 0; i--) {
    const rx_expr *q = rx_expr_floordiv(cx, fused, stride);
    repl[i] = i == 0 ? q : rx_expr_floormod(cx, q, extents[i]);
    stride = rx_expr_mul(cx, stride, extents[i]);
  }
  return stride;
}

/* ---- reductions ---- */
rx_tx *rx_sched_combine(rx_sctx *s, rx_combiner c, rx_tx *a, rx_tx *b) {
  if (c == RX_COMB_SUM) return rx_tx_binary(s->m, RX_BINOP_ADD, a, b, s->loc);
  rx_tx *args[2] = {a, b};
  return rx_tx_call(s->m, c == RX_COMB_MAX ? RX_INTRIN_MAX : RX_INTRIN_MIN, args, 2, s->loc);
}

bool rx_sched_identity(rx_sctx *s, rx_combiner c, rx_dtype t, rx_tx **out) {
  if (rx_dtype_is_float(t)) {
    double v = c == RX_COMB_SUM ? 0.0 : c == RX_COMB_MAX ? -INFINITY : INFINITY;
    *out = rx_tx_float(s->m, v, t, false, s->loc);
    return true;
  }
  if (c == RX_COMB_SUM && rx_dtype_is_int(t)) {
    *out = rx_tx_int(s->m, 0, t, false, s->loc);
    return true;
  }
  return false;
}

bool rx_sched_use_subgroups(const rx_sctx *s, int threads) {
  int sg = s->t->subgroup_size;
  return sg > 1 && s->t->subgroup_arithmetic && threads % sg == 0 && threads / sg <= 64;
}

rx_tx *rx_sched_xreduce(rx_sctx *s, rx_stmtvec *out, rx_tx *val, rx_combiner c, rx_dtype t,
                        int threads, const rx_expr *tx) {
  rx_expr_ctx *cx = s->cx;
  rx_tx *ident = NULL;
  rx_sched_identity(s, c, t, &ident); /* callers check that it exists */
  rx_local *tot = rx_sched_local(s, "total", t);
  if (threads == 1) {
    RX_VEC_PUSH(out, rx_sched_let(s, tot, val));
    return rx_tx_local(s->m, tot, s->loc);
  }
  if (rx_sched_use_subgroups(s, threads) && rx_target_subgroup_dtype(s->t, t)) {
    int sg = s->t->subgroup_size, nw = threads / sg;
    rx_intrinsic op = c == RX_COMB_SUM   ? RX_INTRIN_SUBGROUP_SUM
                      : c == RX_COMB_MAX ? RX_INTRIN_SUBGROUP_MAX
                                         : RX_INTRIN_SUBGROUP_MIN;
    rx_local *w = rx_sched_local(s, "warp_red", t);
    RX_VEC_PUSH(out, rx_sched_let(s, w, rx_tx_call(s->m, op, &val, 1, s->loc)));
    if (nw == 1) {
      RX_VEC_PUSH(out, rx_sched_let(s, tot, rx_tx_local(s->m, w, s->loc)));
      return rx_tx_local(s->m, tot, s->loc);
    }
    rx_stmt *al;
    int64_t shp[1] = {nw};
    rx_buffer *red = rx_sched_alloc(s, "red_buf", t, RX_SCOPE_SHARED, shp, 1, &al);
    RX_VEC_PUSH(out, al);
    const rx_expr *sgc = rx_expr_const(cx, sg);
    const rx_expr *widx = rx_expr_floordiv(cx, tx, sgc);
    rx_stmt *st = rx_sched_store_e(s, red, &widx, 1, rx_tx_local(s->m, w, s->loc));
    RX_VEC_PUSH(out, rx_sched_guard(s,
                                    rx_expr_cmp(cx, RX_EXPR_EQ, rx_expr_floormod(cx, tx, sgc),
                                                rx_expr_const(cx, 0)),
                                    st));
    RX_VEC_PUSH(out, rx_sched_barrier(s));
    /* every thread combines the per-subgroup values, in order */
    int64_t one[1] = {1};
    rx_buffer *acc = rx_sched_alloc(s, "red_acc", t, RX_SCOPE_LOCAL, one, 1, &al);
    RX_VEC_PUSH(out, al);
    const rx_expr *z = rx_expr_const(cx, 0);
    RX_VEC_PUSH(out, rx_sched_store_e(s, acc, &z, 1, rx_sched_load(s, red, &z, 1)));
    const rx_expr *q = rx_sched_fresh_var(s, "q");
    const rx_expr *q1 = rx_expr_add(cx, q, rx_expr_const(cx, 1));
    rx_stmt *upd = rx_sched_store_e(
        s, acc, &z, 1,
        rx_sched_combine(s, c, rx_sched_load(s, acc, &z, 1), rx_sched_load(s, red, &q1, 1)));
    RX_VEC_PUSH(out, rx_sched_for(s, q, rx_expr_const(cx, nw - 1), RX_LOOP_UNROLL, upd));
    RX_VEC_PUSH(out, rx_sched_let(s, tot, rx_sched_load(s, acc, &z, 1)));
    return rx_tx_local(s->m, tot, s->loc);
  }
  /* shared-memory tree: threads must be a power of two */
  rx_stmt *al;
  int64_t shp[1] = {threads};
  rx_buffer *red = rx_sched_alloc(s, "red_buf", t, RX_SCOPE_SHARED, shp, 1, &al);
  RX_VEC_PUSH(out, al);
  RX_VEC_PUSH(out, rx_sched_store_e(s, red, &tx, 1, val));
  RX_VEC_PUSH(out, rx_sched_barrier(s));
  for (int half = threads / 2; half >= 1; half /= 2) {
    const rx_expr *other = rx_expr_add(cx, tx, rx_expr_const(cx, half));
    rx_stmt *st = rx_sched_store_e(
        s, red, &tx, 1,
        rx_sched_combine(s, c, rx_sched_load(s, red, &tx, 1), rx_sched_load(s, red, &other, 1)));
    RX_VEC_PUSH(out,
                rx_sched_guard(s, rx_expr_cmp(cx, RX_EXPR_LT, tx, rx_expr_const(cx, half)), st));
    RX_VEC_PUSH(out, rx_sched_barrier(s));
  }
  const rx_expr *z = rx_expr_const(cx, 0);
  RX_VEC_PUSH(out, rx_sched_let(s, tot, rx_sched_load(s, red, &z, 1)));
  (void)ident;
  return rx_tx_local(s->m, tot, s->loc);
}
