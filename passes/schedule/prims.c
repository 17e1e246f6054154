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
  if (name && !name_used(s, name)) base_ptrvec_push(&s->names, (void *)name);
}
static void add_expr_names(rx_sctx *s, const rx_expr *e) {
  if (!e) return;
  rx_ptrvec vs = {0};
  sym_expr_collect_vars(e, &vs);
  for (size_t i = 0; i < vs.len; i++) add_name(s, ((const rx_expr *)vs.data[i])->name);
  base_ptrvec_free(&vs);
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

void sched_sctx_init(rx_sctx *s, rx_module *m, const rx_tensor_fn *f, const rx_target *t,
                     rx_diag *diag) {
  memset(s, 0, sizeof *s);
  s->m = m;
  s->cx = m->ctx;
  s->t = t;
  s->diag = diag;
  s->f = f;
  s->loc = f->loc;
  s->an = sym_analyzer_new(m->ctx);
  add_name(s, f->name);
  for (int i = 0; i < f->nparams; i++) {
    const rx_param *p = f->params[i];
    if (p->kind == RX_PARAM_BUFFER) {
      add_name(s, p->buf->name);
      for (int d = 0; d < p->buf->ndim; d++) {
        add_expr_names(s, p->buf->shape[d]);
        rx_ptrvec vs = {0};
        sym_expr_collect_vars(p->buf->shape[d], &vs);
        for (size_t k = 0; k < vs.len; k++)
          sym_analyzer_assume(s->an, sym_expr_cmp(s->cx, RX_EXPR_LE, sym_expr_const(s->cx, 0),
                                                  (const rx_expr *)vs.data[k]));
        base_ptrvec_free(&vs);
      }
    } else {
      add_expr_names(s, p->var);
      sym_analyzer_assume(s->an, sym_expr_cmp(s->cx, RX_EXPR_LE, sym_expr_const(s->cx, 0), p->var));
    }
  }
  for (int i = 0; i < f->nfacts; i++) sym_analyzer_assume(s->an, f->facts[i]);
  collect_names(s, f->body);
}

void sched_sctx_free(rx_sctx *s) {
  sym_analyzer_free(s->an);
  base_ptrvec_free(&s->names);
}

static const char *sched_fresh(rx_sctx *s, const char *base) {
  char buf[96];
  snprintf(buf, sizeof buf, "%s", base);
  for (int k = 1; name_used(s, buf); k++) snprintf(buf, sizeof buf, "%s_%d", base, k);
  const char *n = ir_module_intern(s->m, buf, strlen(buf));
  add_name(s, n);
  return n;
}

const rx_expr *sched_fresh_var(rx_sctx *s, const char *base) {
  return sym_expr_var(s->cx, sched_fresh(s, base));
}

/* ---- rewriting ---- */
static const rx_expr *rw_sym(rx_rewrite *rw, const rx_expr *e) {
  if (!e || rw->n == 0) return e;
  return sym_expr_subst(rw->s->cx, e, rw->vars, rw->repl, (size_t)rw->n);
}

rx_tx *sched_rewrite_tx(rx_rewrite *rw, const rx_tx *e) {
  if (!e) return NULL;
  rx_module *m = rw->s->m;
  rx_tx *r;
  switch (e->kind) {
  case RX_TX_SYM:
    r = ir_tx_sym(m, rw_sym(rw, e->sym), e->loc);
    r->dtype = e->dtype; /* substitution keeps the type (a comparison may fold to 0 or 1) */
    return r;
  case RX_TX_LOAD: {
    rx_tx **idx = ir_module_alloc(m, sizeof *idx * (size_t)(e->nidx ? e->nidx : 1));
    for (int i = 0; i < e->nidx; i++) idx[i] = sched_rewrite_tx(rw, e->idx[i]);
    r = ir_tx_load(m, e->buf, idx, e->nidx, e->loc);
    return rw->hook ? rw->hook(rw, r) : r;
  }
  default:
    r = ir_module_alloc(m, sizeof *r);
    *r = *e;
    r->a = sched_rewrite_tx(rw, e->a);
    r->b = sched_rewrite_tx(rw, e->b);
    r->c = sched_rewrite_tx(rw, e->c);
    return r;
  }
}

rx_stmt *sched_rewrite_stmt(rx_rewrite *rw, const rx_stmt *st) {
  if (!st) return NULL;
  rx_module *m = rw->s->m;
  rx_stmt *r = ir_module_alloc(m, sizeof *r);
  *r = *st;
  if (st->n) {
    r->body = ir_module_alloc(m, sizeof *r->body * (size_t)st->n);
    for (int i = 0; i < st->n; i++) r->body[i] = sched_rewrite_stmt(rw, st->body[i]);
  }
  if (st->nvars) {
    r->lo = ir_module_alloc(m, sizeof *r->lo * (size_t)st->nvars);
    r->extent = ir_module_alloc(m, sizeof *r->extent * (size_t)st->nvars);
    for (int i = 0; i < st->nvars; i++) {
      r->lo[i] = rw_sym(rw, st->lo[i]);
      r->extent[i] = rw_sym(rw, st->extent[i]);
    }
  }
  if (st->nidx) {
    r->idx = ir_module_alloc(m, sizeof *r->idx * (size_t)st->nidx);
    for (int i = 0; i < st->nidx; i++) r->idx[i] = sched_rewrite_tx(rw, st->idx[i]);
  }
  r->value = sched_rewrite_tx(rw, st->value);
  r->cond = sched_rewrite_tx(rw, st->cond);
  r->inner = sched_rewrite_stmt(rw, st->inner);
  r->init = sched_rewrite_stmt(rw, st->init);
  r->otherwise = sched_rewrite_stmt(rw, st->otherwise);
  return r;
}

rx_stmt *sched_subst1(rx_sctx *s, const rx_stmt *st, const rx_expr *var, const rx_expr *by) {
  rx_rewrite rw = {.s = s, .vars = &var, .repl = &by, .n = 1};
  return sched_rewrite_stmt(&rw, st);
}
rx_tx *sched_subst1_tx(rx_sctx *s, const rx_tx *e, const rx_expr *var, const rx_expr *by) {
  rx_rewrite rw = {.s = s, .vars = &var, .repl = &by, .n = 1};
  return sched_rewrite_tx(&rw, e);
}

/* ---- constructors ---- */
rx_stmt *sched_seq(rx_sctx *s, rx_stmtvec *v) {
  rx_stmt *r = ir_stmt_new(s->m, RX_STMT_SEQ, s->loc);
  r->n = (int)v->len;
  r->body = ir_module_alloc(s->m, sizeof *r->body * (v->len ? v->len : 1));
  if (v->len) memcpy(r->body, v->data, sizeof *r->body * v->len);
  free(v->data);
  v->data = NULL;
  v->len = v->cap = 0;
  return r;
}
rx_stmt *sched_seq1(rx_sctx *s, rx_stmt *a) {
  if (a && a->kind == RX_STMT_SEQ) return a;
  rx_stmtvec v = {0};
  RX_VEC_PUSH(&v, a);
  return sched_seq(s, &v);
}
rx_stmt *sched_for(rx_sctx *s, const rx_expr *var, const rx_expr *extent, rx_loop_kind k,
                   rx_stmt *body) {
  rx_stmt *r = ir_stmt_new(s->m, RX_STMT_FOR, s->loc);
  r->nvars = 1;
  r->vars = ir_module_alloc(s->m, sizeof *r->vars);
  r->lo = ir_module_alloc(s->m, sizeof *r->lo);
  r->extent = ir_module_alloc(s->m, sizeof *r->extent);
  r->vars[0] = var;
  r->lo[0] = sym_expr_const(s->cx, 0);
  r->extent[0] = extent;
  r->loop_kind = k;
  r->inner = sched_seq1(s, body);
  return r;
}
static rx_stmt *sched_store(rx_sctx *s, rx_buffer *b, rx_tx **idx, int n, rx_tx *v) {
  rx_stmt *r = ir_stmt_new(s->m, RX_STMT_STORE, s->loc);
  r->buf = b;
  r->nidx = n;
  r->idx = base_arena_dup(&s->m->arena, idx, sizeof *idx * (size_t)(n ? n : 1));
  r->value = v;
  return r;
}
rx_stmt *sched_let(rx_sctx *s, rx_local *l, rx_tx *v) {
  rx_stmt *r = ir_stmt_new(s->m, RX_STMT_LET, s->loc);
  r->local = l;
  r->value = v;
  return r;
}
rx_local *sched_local(rx_sctx *s, const char *base, rx_dtype t) {
  rx_local *l = ir_module_alloc(s->m, sizeof *l);
  l->name = sched_fresh(s, base);
  l->dtype = t;
  l->loc = s->loc;
  return l;
}
rx_stmt *sched_if(rx_sctx *s, rx_tx *cond, rx_stmt *then, rx_stmt *otherwise) {
  rx_stmt *r = ir_stmt_new(s->m, RX_STMT_IF, s->loc);
  r->value = cond;
  r->inner = sched_seq1(s, then);
  r->otherwise = otherwise ? sched_seq1(s, otherwise) : NULL;
  return r;
}
rx_stmt *sched_barrier(rx_sctx *s) { return ir_stmt_new(s->m, RX_STMT_BARRIER, s->loc); }

rx_buffer *sched_alloc(rx_sctx *s, const char *base, rx_dtype t, rx_scope scope,
                       const int64_t *shape, int ndim, rx_stmt **out_alloc) {
  rx_buffer *b = ir_module_alloc(s->m, sizeof *b);
  b->name = sched_fresh(s, base);
  b->dtype = t;
  b->ndim = ndim;
  b->shape = ir_module_alloc(s->m, sizeof *b->shape * (size_t)ndim);
  for (int i = 0; i < ndim; i++) b->shape[i] = sym_expr_const(s->cx, shape[i]);
  b->scope = scope;
  b->loc = s->loc;
  rx_stmt *a = ir_stmt_new(s->m, RX_STMT_ALLOC, s->loc);
  a->buf = b;
  *out_alloc = a;
  return b;
}
rx_tx *sched_sym(rx_sctx *s, const rx_expr *e) {
  rx_tx *r = ir_tx_sym(s->m, e, s->loc);
  if (e->kind == RX_EXPR_CONST) r->dtype = RX_DTYPE_I64; /* an index, not a folded condition */
  return r;
}
rx_tx *sched_cond(rx_sctx *s, const rx_expr *e) {
  rx_tx *r = ir_tx_sym(s->m, e, s->loc);
  r->dtype = RX_DTYPE_BOOL;
  return r;
}
rx_tx *sched_load(rx_sctx *s, rx_buffer *b, const rx_expr *const *idx, int n) {
  rx_tx *ix[RX_MAX_IDX];
  for (int i = 0; i < n; i++) ix[i] = sched_sym(s, idx[i]);
  return ir_tx_load(s->m, b, ix, n, s->loc);
}
rx_stmt *sched_store_e(rx_sctx *s, rx_buffer *b, const rx_expr *const *idx, int n, rx_tx *v) {
  rx_tx *ix[RX_MAX_IDX];
  for (int i = 0; i < n; i++) ix[i] = sched_sym(s, idx[i]);
  return sched_store(s, b, ix, n, v);
}
rx_stmt *sched_guard(rx_sctx *s, const rx_expr *cond, rx_stmt *body) {
  if (!cond) return body;
  cond = sym_analyzer_simplify(s->an, cond);
  if (rx_expr_is_const(cond, 1)) return body;
  return sched_if(s, sched_cond(s, cond), body, NULL);
}

bool sched_proves(rx_sctx *s, const rx_expr *cond) {
  return sym_analyzer_prove(s->an, cond) == RX_TRUE;
}

/* ---- split and fuse ---- */
const rx_expr *sched_split(rx_sctx *s, const rx_expr *extent, int64_t factor, const rx_expr *outer,
                           const rx_expr *inner, const rx_expr **out_outer_extent) {
  rx_expr_ctx *cx = s->cx;
  const rx_expr *f = sym_expr_const(cx, factor);
  int64_t d = sym_analyzer_divisor(s->an, extent);
  bool exact = d == 0 || d % factor == 0;
  *out_outer_extent =
      exact
          ? sym_analyzer_simplify(s->an, sym_expr_floordiv(cx, extent, f))
          : sym_analyzer_simplify(
                s->an,
                sym_expr_floordiv(cx, sym_expr_add(cx, extent, sym_expr_const(cx, factor - 1)), f));
  if (exact) return NULL;
  const rx_expr *pos = sym_expr_add(cx, sym_expr_mul(cx, outer, f), inner);
  const rx_expr *cond = sym_expr_cmp(cx, RX_EXPR_LT, pos, extent);
  /* with the ranges of outer and inner bound, the analyzer may still prove it (e.g. extent a
   * constant multiple after simplification) */
  size_t mk = sym_analyzer_mark(s->an);
  if (outer->kind == RX_EXPR_VAR)
    sym_analyzer_bind_range(s->an, outer, sym_expr_const(cx, 0), *out_outer_extent);
  if (inner->kind == RX_EXPR_VAR) sym_analyzer_bind_range(s->an, inner, sym_expr_const(cx, 0), f);
  bool proven = sched_proves(s, cond);
  sym_analyzer_reset(s->an, mk);
  return proven ? NULL : cond;
}

const rx_expr *sched_fuse(rx_sctx *s, const rx_expr *const *extents, int n, const rx_expr *fused,
                          const rx_expr **repl) {
  rx_expr_ctx *cx = s->cx;
  const rx_expr *stride = sym_expr_const(cx, 1);
  for (int i = n - 1; i >= 0; i--) {
    const rx_expr *q = sym_expr_floordiv(cx, fused, stride);
    repl[i] = i == 0 ? q : sym_expr_floormod(cx, q, extents[i]);
    stride = sym_expr_mul(cx, stride, extents[i]);
  }
  return stride;
}

/* ---- reductions ---- */
rx_tx *sched_combine(rx_sctx *s, rx_combiner c, rx_tx *a, rx_tx *b) {
  if (c == RX_COMB_SUM) return ir_tx_binary(s->m, RX_BINOP_ADD, a, b, s->loc);
  rx_tx *args[2] = {a, b};
  return ir_tx_call(s->m, c == RX_COMB_MAX ? RX_INTRIN_MAX : RX_INTRIN_MIN, args, 2, s->loc);
}

bool sched_identity(rx_sctx *s, rx_combiner c, rx_dtype t, rx_tx **out) {
  if (ir_dtype_is_float(t)) {
    double v = c == RX_COMB_SUM ? 0.0 : c == RX_COMB_MAX ? -INFINITY : INFINITY;
    *out = ir_tx_float(s->m, v, t, false, s->loc);
    return true;
  }
  if (c == RX_COMB_SUM && ir_dtype_is_int(t)) {
    *out = ir_tx_int(s->m, 0, t, false, s->loc);
    return true;
  }
  return false;
}

bool sched_use_subgroups(const rx_sctx *s, int threads) {
  int sg = s->t->subgroup_size;
  return sg > 1 && s->t->subgroup_arithmetic && threads % sg == 0 && threads / sg <= 64;
}

rx_tx *sched_xreduce(rx_sctx *s, rx_stmtvec *out, rx_tx *val, rx_combiner c, rx_dtype t,
                     int threads, const rx_expr *tx) {
  rx_expr_ctx *cx = s->cx;
  rx_tx *ident = NULL;
  sched_identity(s, c, t, &ident); /* callers check that it exists */
  rx_local *tot = sched_local(s, "total", t);
  if (threads == 1) {
    RX_VEC_PUSH(out, sched_let(s, tot, val));
    return ir_tx_local(s->m, tot, s->loc);
  }
  if (sched_use_subgroups(s, threads) && tgt_target_subgroup_dtype(s->t, t)) {
    int sg = s->t->subgroup_size, nw = threads / sg;
    rx_intrinsic op = c == RX_COMB_SUM   ? RX_INTRIN_SUBGROUP_SUM
                      : c == RX_COMB_MAX ? RX_INTRIN_SUBGROUP_MAX
                                         : RX_INTRIN_SUBGROUP_MIN;
    rx_local *w = sched_local(s, "warp_red", t);
    RX_VEC_PUSH(out, sched_let(s, w, ir_tx_call(s->m, op, &val, 1, s->loc)));
    if (nw == 1) {
      RX_VEC_PUSH(out, sched_let(s, tot, ir_tx_local(s->m, w, s->loc)));
      return ir_tx_local(s->m, tot, s->loc);
    }
    rx_stmt *al;
    int64_t shp[1] = {nw};
    rx_buffer *red = sched_alloc(s, "red_buf", t, RX_SCOPE_SHARED, shp, 1, &al);
    RX_VEC_PUSH(out, al);
    const rx_expr *sgc = sym_expr_const(cx, sg);
    const rx_expr *widx = sym_expr_floordiv(cx, tx, sgc);
    rx_stmt *st = sched_store_e(s, red, &widx, 1, ir_tx_local(s->m, w, s->loc));
    RX_VEC_PUSH(out, sched_guard(s,
                                 sym_expr_cmp(cx, RX_EXPR_EQ, sym_expr_floormod(cx, tx, sgc),
                                              sym_expr_const(cx, 0)),
                                 st));
    RX_VEC_PUSH(out, sched_barrier(s));
    /* every thread combines the per-subgroup values, in order */
    int64_t one[1] = {1};
    rx_buffer *acc = sched_alloc(s, "red_acc", t, RX_SCOPE_LOCAL, one, 1, &al);
    RX_VEC_PUSH(out, al);
    const rx_expr *z = sym_expr_const(cx, 0);
    RX_VEC_PUSH(out, sched_store_e(s, acc, &z, 1, sched_load(s, red, &z, 1)));
    const rx_expr *q = sched_fresh_var(s, "q");
    const rx_expr *q1 = sym_expr_add(cx, q, sym_expr_const(cx, 1));
    rx_stmt *upd = sched_store_e(
        s, acc, &z, 1, sched_combine(s, c, sched_load(s, acc, &z, 1), sched_load(s, red, &q1, 1)));
    RX_VEC_PUSH(out, sched_for(s, q, sym_expr_const(cx, nw - 1), RX_LOOP_UNROLL, upd));
    RX_VEC_PUSH(out, sched_let(s, tot, sched_load(s, acc, &z, 1)));
    return ir_tx_local(s->m, tot, s->loc);
  }
  /* shared-memory tree: threads must be a power of two */
  rx_stmt *al;
  int64_t shp[1] = {threads};
  rx_buffer *red = sched_alloc(s, "red_buf", t, RX_SCOPE_SHARED, shp, 1, &al);
  RX_VEC_PUSH(out, al);
  RX_VEC_PUSH(out, sched_store_e(s, red, &tx, 1, val));
  RX_VEC_PUSH(out, sched_barrier(s));
  for (int half = threads / 2; half >= 1; half /= 2) {
    const rx_expr *other = sym_expr_add(cx, tx, sym_expr_const(cx, half));
    rx_stmt *st = sched_store_e(
        s, red, &tx, 1,
        sched_combine(s, c, sched_load(s, red, &tx, 1), sched_load(s, red, &other, 1)));
    RX_VEC_PUSH(out,
                sched_guard(s, sym_expr_cmp(cx, RX_EXPR_LT, tx, sym_expr_const(cx, half)), st));
    RX_VEC_PUSH(out, sched_barrier(s));
  }
  const rx_expr *z = sym_expr_const(cx, 0);
  RX_VEC_PUSH(out, sched_let(s, tot, sched_load(s, red, &z, 1)));
  (void)ident;
  return ir_tx_local(s->m, tot, s->loc);
}
