/* fuse_tensor: each primitive graph function made by fuse_ops becomes one tensor program, and
 * its call one call_tensor of that program.
 *
 * The body member keeps its loop structure: the root of the group, or, when the group is a
 * matmul-like anchor with an epilogue, the anchor. Every other member is inlined: a load of its
 * value at indices I becomes its store expression with its loop variables replaced through its
 * store indexing (a permutation of its loop point) by I, and its lets substituted (inline
 * recomputation, which keeps the scheduler's canonical forms: elementwise nests, row-reduction
 * stages, matmul reductions). Epilogue: the anchor's output becomes an `alloc acc: T[1] local`
 * inside its output loops, and after the reduction the fused output is stored at the point from
 * the root's inlined expression, where loads of the anchor's value (at the point) read acc[0].
 * Symbolic variables the inputs do not define as whole dimensions (the Prim(i64, v) parameters
 * of the primitive function) become scalar parameters, passed with dims=[...]. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "passes.h"

typedef struct fmember {
  rx_binding *b;
  rx_tensor_fn *t;
  rx_ptrvec from, to; /* program variables -> graph expressions */
} fmember;

typedef struct lmap {
  RX_VEC(const void *) from; /* rx_local* or rx_buffer* */
  RX_VEC(void *) to;         /* rx_tx* (inlined let), rx_local*, rx_buffer* */
} lmap;

typedef struct env {
  int k;              /* member */
  rx_ptrvec from, to; /* variables (program and loop) -> expressions */
  lmap locals, bufs;
  bool inl; /* inlined member (only lets and one store) */
} env;

typedef struct fctx {
  rx_module *m;
  rx_graph_fn *g;
  fmember *mem;
  int n, anchor;    /* anchor: index of the body member in epilogue mode, else -1 */
  rx_buffer **pbuf; /* per g param: the fused program's buffer (NULL for Prim params) */
  rx_buffer *out, *acc;
  const rx_expr **w; /* epilogue: the fresh output-loop variables */
  int nw;
  rx_ptrvec names;
  int depth;
  char err[256];
} fctx;

static void *lm_get(const lmap *l, const void *k) {
  for (size_t i = l->from.len; i-- > 0;)
    if (l->from.data[i] == k) return l->to.data[i];
  return NULL;
}
static void lm_put(lmap *l, const void *k, void *v) {
  RX_VEC_PUSH(&l->from, k);
  RX_VEC_PUSH(&l->to, v);
}
static void env_free(env *e) {
  base_ptrvec_free(&e->from);
  base_ptrvec_free(&e->to);
  free(e->locals.from.data);
  free(e->locals.to.data);
  free(e->bufs.from.data);
  free(e->bufs.to.data);
}

static bool name_used(fctx *fc, const char *s) {
  for (size_t i = 0; i < fc->names.len; i++)
    if (!strcmp(fc->names.data[i], s)) return true;
  return false;
}
static const char *fresh(fctx *fc, const char *base) {
  char buf[160];
  snprintf(buf, sizeof buf, "%s", base);
  for (int k = 1; name_used(fc, buf); k++) snprintf(buf, sizeof buf, "%s%d", base, k);
  const char *s = ir_module_intern(fc->m, buf, strlen(buf));
  base_ptrvec_push(&fc->names, (void *)s);
  return s;
}

static const rx_expr *sub(fctx *fc, env *e, const rx_expr *x) {
  return sym_expr_subst(fc->m->ctx, x, (const rx_expr *const *)e->from.data,
                        (const rx_expr *const *)e->to.data, e->from.len);
}

static void fail(fctx *fc, const char *msg) {
  if (!fc->err[0]) snprintf(fc->err, sizeof fc->err, "%s", msg);
}

/* The program parameter holding buf in member k, or NULL. */
static int param_index(const rx_tensor_fn *t, const rx_buffer *buf, int *input_pos) {
  int ai = 0;
  for (int i = 0; i < t->nparams; i++) {
    const rx_param *p = t->params[i];
    if (p->kind != RX_PARAM_BUFFER) continue;
    if (p->buf == buf) {
      *input_pos = p->is_output ? -1 : ai;
      return i;
    }
    if (!p->is_output) ai++;
  }
  return -1;
}

static rx_tx *gen_tx(fctx *fc, env *e, const rx_tx *x);
static rx_tx *inline_member(fctx *fc, int q, rx_tx **idx, int nidx);

static rx_tx *copy_tx(fctx *fc, const rx_tx *x) {
  rx_tx *r = ir_module_alloc(fc->m, sizeof *r);
  *r = *x;
  return r;
}

static bool at_w(fctx *fc, rx_tx **idx, int n) {
  if (n != fc->nw) return false;
  for (int i = 0; i < n; i++)
    if (idx[i]->kind != RX_TX_SYM || idx[i]->sym != fc->w[i]) return false;
  return true;
}

static rx_tx **zero_idx(fctx *fc, rx_loc loc) {
  rx_tx **z = ir_module_alloc(fc->m, sizeof *z);
  z[0] = ir_tx_int(fc->m, 0, RX_DTYPE_I64, true, loc);
  return z;
}

static rx_tx *gen_load(fctx *fc, env *e, const rx_tx *x) {
  rx_tx **idx = ir_module_alloc(fc->m, sizeof *idx * (size_t)(x->nidx + 1));
  for (int i = 0; i < x->nidx; i++) {
    idx[i] = gen_tx(fc, e, x->idx[i]);
    if (!idx[i]) return NULL;
  }
  rx_tx *r = copy_tx(fc, x);
  r->idx = idx;
  rx_buffer *nb = lm_get(&e->bufs, x->buf);
  if (nb) {
    r->buf = nb;
    return r;
  }
  fmember *mk = &fc->mem[e->k];
  int ai;
  if (param_index(mk->t, x->buf, &ai) < 0) {
    fail(fc, "a load of an unknown buffer");
    return NULL;
  }
  if (ai < 0) { /* the member's own output, read back */
    if (e->inl) {
      fail(fc, "an inlined program reads its own output");
      return NULL;
    }
    if (e->k == fc->anchor) {
      if (!at_w(fc, idx, x->nidx)) {
        fail(fc, "the anchor reads its output away from the loop point");
        return NULL;
      }
      r->buf = fc->acc;
      r->idx = zero_idx(fc, x->loc);
      r->nidx = 1;
    } else {
      r->buf = fc->out;
    }
    return r;
  }
  rx_var *v = mk->b->value->args[ai]->var;
  for (int j = 0; j < fc->g->nparams; j++)
    if (fc->g->params[j] == v) {
      r->buf = fc->pbuf[j];
      return r;
    }
  for (int q = 0; q < fc->n; q++) {
    if (fc->mem[q].b->var != v) continue;
    if (q == fc->anchor) {
      if (!at_w(fc, idx, x->nidx)) {
        fail(fc, "an epilogue reads the matmul result away from the output point");
        return NULL;
      }
      r->buf = fc->acc;
      r->idx = zero_idx(fc, x->loc);
      r->nidx = 1;
      return r;
    }
    return inline_member(fc, q, idx, x->nidx);
  }
  fail(fc, "an argument that is neither an input nor a member");
  return NULL;
}

static rx_tx *gen_tx(fctx *fc, env *e, const rx_tx *x) {
  if (!x) return NULL;
  rx_tx *r;
  switch (x->kind) {
  case RX_TX_INT:
  case RX_TX_FLOAT:
    return copy_tx(fc, x);
  case RX_TX_SYM:
    r = copy_tx(fc, x);
    r->sym = sub(fc, e, x->sym);
    return r;
  case RX_TX_LOCAL: {
    void *t = lm_get(&e->locals, x->local);
    if (!t) {
      fail(fc, "an unknown local");
      return NULL;
    }
    if (e->inl) return t; /* the let's value, inlined */
    return ir_tx_local(fc->m, t, x->loc);
  }
  case RX_TX_LOAD:
    return gen_load(fc, e, x);
  default:
    r = copy_tx(fc, x);
    if (x->a && !(r->a = gen_tx(fc, e, x->a))) return NULL;
    if (x->b && !(r->b = gen_tx(fc, e, x->b))) return NULL;
    if (x->c && !(r->c = gen_tx(fc, e, x->c))) return NULL;
    return r;
  }
}

/* The value of member q at indices idx: its store expression under its loop point. */
static rx_tx *inline_member(fctx *fc, int q, rx_tx **idx, int nidx) {
  if (++fc->depth > 64) {
    fail(fc, "inlining too deep");
    return NULL;
  }
  fmember *mq = &fc->mem[q];
  const rx_stmt *s = mq->t->body;
  const rx_expr *vars[16];
  int nv = 0;
  for (;;) {
    while (s->kind == RX_STMT_SEQ && s->n == 1) s = s->body[0];
    if (s->kind != RX_STMT_FOR || nv >= 16) break;
    vars[nv++] = s->vars[0];
    s = s->inner;
  }
  const rx_stmt *const *body = &s;
  int nb = 1;
  if (s->kind == RX_STMT_SEQ) {
    body = (const rx_stmt *const *)s->body;
    nb = s->n;
  }
  env e = {0};
  e.k = q;
  e.inl = true;
  for (size_t i = 0; i < mq->from.len; i++) {
    base_ptrvec_push(&e.from, mq->from.data[i]);
    base_ptrvec_push(&e.to, mq->to.data[i]);
  }
  rx_tx *result = NULL;
  bool bound = false;
  for (int i = 0; i < nb && !fc->err[0]; i++) {
    const rx_stmt *st = body[i];
    if (!bound && st->kind == RX_STMT_STORE) {
      /* the store's indices are loop variables: bind each to the load's index */
      if (st->nidx != nidx || nidx != nv) {
        fail(fc, "an inlined store does not cover its loop point");
        break;
      }
      for (int d = 0; d < nidx; d++) {
        /* a literal index (a broadcast dim's 0) is the constant expression */
        const rx_expr *at = idx[d]->kind == RX_TX_SYM   ? idx[d]->sym
                            : idx[d]->kind == RX_TX_INT ? sym_expr_const(fc->m->ctx, idx[d]->ival)
                                                        : NULL;
        if (st->idx[d]->kind != RX_TX_SYM || st->idx[d]->sym->kind != RX_EXPR_VAR || !at) {
          fail(fc, "an inlined store or load with a data-dependent index");
          break;
        }
        base_ptrvec_push(&e.from, (void *)st->idx[d]->sym);
        base_ptrvec_push(&e.to, (void *)at);
      }
      bound = true;
    }
    (void)vars;
  }
  /* lets may precede the store: bind the loop variables first (above), then evaluate */
  for (int i = 0; i < nb && bound && !fc->err[0]; i++) {
    const rx_stmt *st = body[i];
    if (st->kind == RX_STMT_LET) {
      rx_tx *v = gen_tx(fc, &e, st->value);
      if (v) lm_put(&e.locals, st->local, v);
    } else if (st->kind == RX_STMT_STORE) {
      result = gen_tx(fc, &e, st->value);
      break;
    } else {
      fail(fc, "an inlined program with a statement other than let and store");
    }
  }
  env_free(&e);
  fc->depth--;
  if (!result) fail(fc, "an inlined program without a store");
  return fc->err[0] ? NULL : result;
}

static rx_stmt *gen_stmt(fctx *fc, env *e, const rx_stmt *s);

static rx_stmt **gen_list(fctx *fc, env *e, rx_stmt *const *body, int n) {
  rx_stmt **r = ir_module_alloc(fc->m, sizeof *r * (size_t)(n + 1));
  for (int i = 0; i < n; i++)
    if (!(r[i] = gen_stmt(fc, e, body[i]))) return NULL;
  return r;
}

static void bind_loop_vars(fctx *fc, env *e, rx_stmt *r, const rx_stmt *s) {
  const rx_expr **vars = ir_module_alloc(fc->m, sizeof *vars * (size_t)(s->nvars + 1));
  const rx_expr **lo = ir_module_alloc(fc->m, sizeof *lo * (size_t)(s->nvars + 1));
  const rx_expr **ext = ir_module_alloc(fc->m, sizeof *ext * (size_t)(s->nvars + 1));
  for (int i = 0; i < s->nvars; i++) {
    lo[i] = sub(fc, e, s->lo[i]);
    ext[i] = sub(fc, e, s->extent[i]);
  }
  for (int i = 0; i < s->nvars; i++) {
    const char *nm = fresh(fc, s->vars[i]->name);
    vars[i] = sym_expr_var(fc->m->ctx, nm);
    size_t k = 0;
    while (k < e->from.len && e->from.data[k] != s->vars[i]) k++;
    if (k < e->from.len) { /* a sibling loop reusing the name: rebind */
      e->to.data[k] = (void *)vars[i];
      continue;
    }
    base_ptrvec_push(&e->from, (void *)s->vars[i]);
    base_ptrvec_push(&e->to, (void *)vars[i]);
  }
  r->vars = vars;
  r->lo = lo;
  r->extent = ext;
}

static rx_stmt *gen_stmt(fctx *fc, env *e, const rx_stmt *s) {
  if (!s || fc->err[0]) return NULL;
  rx_stmt *r = ir_module_alloc(fc->m, sizeof *r);
  *r = *s;
  switch (s->kind) {
  case RX_STMT_SEQ:
    if (!(r->body = gen_list(fc, e, s->body, s->n))) return NULL;
    return r;
  case RX_STMT_FOR:
    bind_loop_vars(fc, e, r, s);
    if (!(r->inner = gen_stmt(fc, e, s->inner))) return NULL;
    return r;
  case RX_STMT_REDUCE:
    if (!(r->init = gen_stmt(fc, e, s->init))) return NULL;
    bind_loop_vars(fc, e, r, s);
    if (!(r->inner = gen_stmt(fc, e, s->inner))) return NULL;
    return r;
  case RX_STMT_STORE: {
    r->idx = ir_module_alloc(fc->m, sizeof *r->idx * (size_t)(s->nidx + 1));
    for (int i = 0; i < s->nidx; i++)
      if (!(r->idx[i] = gen_tx(fc, e, s->idx[i]))) return NULL;
    if (!(r->value = gen_tx(fc, e, s->value))) return NULL;
    rx_buffer *nb = lm_get(&e->bufs, s->buf);
    if (nb) {
      r->buf = nb;
      return r;
    }
    int ai;
    if (param_index(fc->mem[e->k].t, s->buf, &ai) < 0 || ai >= 0) {
      fail(fc, "a store to something other than the output");
      return NULL;
    }
    if (e->k == fc->anchor) {
      if (!at_w(fc, r->idx, s->nidx)) {
        fail(fc, "the anchor stores away from its output point");
        return NULL;
      }
      r->buf = fc->acc;
      r->idx = zero_idx(fc, s->loc);
      r->nidx = 1;
    } else {
      r->buf = fc->out;
    }
    return r;
  }
  case RX_STMT_LET: {
    if (s->local->sym) { /* a data-dependent loop's bound (ir.h, rx_local.sym) */
      fail(fc, "a symbolic let (a data-dependent loop) is not fused");
      return NULL;
    }
    rx_local *l = ir_module_alloc(fc->m, sizeof *l);
    *l = *s->local;
    l->name = fresh(fc, s->local->name);
    if (!(r->value = gen_tx(fc, e, s->value))) return NULL;
    lm_put(&e->locals, s->local, l);
    r->local = l;
    return r;
  }
  case RX_STMT_ALLOC: {
    rx_buffer *b = ir_module_alloc(fc->m, sizeof *b);
    *b = *s->buf;
    b->name = fresh(fc, s->buf->name);
    b->shape = ir_module_alloc(fc->m, sizeof *b->shape * (size_t)(b->ndim + 1));
    for (int i = 0; i < b->ndim; i++) b->shape[i] = sub(fc, e, s->buf->shape[i]);
    lm_put(&e->bufs, s->buf, b);
    r->buf = b;
    return r;
  }
  case RX_STMT_IF:
    if (!(r->value = gen_tx(fc, e, s->value))) return NULL;
    if (!(r->inner = gen_stmt(fc, e, s->inner))) return NULL;
    if (s->otherwise && !(r->otherwise = gen_stmt(fc, e, s->otherwise))) return NULL;
    return r;
  case RX_STMT_BARRIER:
    return r;
  case RX_STMT_MMA: /* only schedules write these; a scheduled program is not fused */
  case RX_STMT_ASYNC_COPY:
  case RX_STMT_ASYNC_COMMIT:
  case RX_STMT_ASYNC_WAIT:
  case RX_STMT_LDMATRIX:
  case RX_STMT_FRAG:
  case RX_STMT_WGMMA:
  case RX_STMT_WGMMA_FENCE:
  case RX_STMT_WGMMA_COMMIT:
  case RX_STMT_WGMMA_WAIT:
    return NULL;
  }
  return NULL;
}

static rx_stmt *seq_of(fctx *fc, rx_stmt **body, int n, rx_loc loc) {
  rx_stmt *s = ir_stmt_new(fc->m, RX_STMT_SEQ, loc);
  s->body = body;
  s->n = n;
  return s;
}

/* Binds member k's program variables from its call's argument and output shapes and dims. */
static bool bind_member(fctx *fc, fmember *mk) {
  const rx_node *c = mk->b->value;
  int ai = 0, si = 0;
  for (int i = 0; i < mk->t->nparams; i++) {
    const rx_param *p = mk->t->params[i];
    if (p->kind == RX_PARAM_SCALAR) {
      if (si >= c->nextra) return false;
      base_ptrvec_push(&mk->from, (void *)p->var);
      base_ptrvec_push(&mk->to, (void *)c->extra_dims[si++]);
      continue;
    }
    const rx_sinfo *s = p->is_output ? c->out : c->args[ai++]->var->sinfo;
    if (!s || s->kind != RX_SINFO_TENSOR || !s->shape || s->ndim != p->buf->ndim) return false;
    for (int d = 0; d < s->ndim; d++) {
      const rx_expr *v = p->buf->shape[d];
      if (v->kind != RX_EXPR_VAR) continue;
      bool have = false;
      for (size_t j = 0; j < mk->from.len; j++) have = have || mk->from.data[j] == v;
      if (have) continue;
      base_ptrvec_push(&mk->from, (void *)v);
      base_ptrvec_push(&mk->to, (void *)s->shape[d]);
    }
  }
  return true;
}

static rx_buffer *new_buf(fctx *fc, const char *name, const rx_sinfo *s, rx_loc loc) {
  rx_buffer *b = ir_module_alloc(fc->m, sizeof *b);
  b->name = fresh(fc, name);
  b->dtype = s->dtype;
  b->ndim = s->ndim;
  b->shape = ir_module_alloc(fc->m, sizeof *b->shape * (size_t)(s->ndim + 1));
  for (int i = 0; i < s->ndim; i++) b->shape[i] = s->shape[i];
  b->scope = RX_SCOPE_GLOBAL;
  b->loc = loc;
  return b;
}

static void names_of_sinfo(fctx *fc, const rx_sinfo *s) {
  rx_ptrvec v = {0};
  if ((s->kind == RX_SINFO_TENSOR || s->kind == RX_SINFO_SHAPE) && s->shape)
    for (int i = 0; i < s->ndim; i++) sym_expr_collect_vars(s->shape[i], &v);
  if (s->kind == RX_SINFO_PRIM && s->value) sym_expr_collect_vars(s->value, &v);
  for (size_t i = 0; i < v.len; i++) {
    const char *nm = ((const rx_expr *)v.data[i])->name;
    if (!name_used(fc, nm)) base_ptrvec_push(&fc->names, (void *)nm);
  }
  base_ptrvec_free(&v);
}

/* Builds the tensor program for primitive function g; NULL with fc->err set on failure. */
static rx_tensor_fn *build(fctx *fc) {
  rx_graph_fn *g = fc->g;
  if (g->body.nblocks != 1) {
    fail(fc, "a primitive function with more than one block");
    return NULL;
  }
  rx_block *blk = g->body.blocks[0];
  fc->n = blk->nbindings;
  fc->mem = base_calloc((size_t)fc->n + 1, sizeof *fc->mem);
  fc->anchor = -1;
  int root = fc->n - 1;
  for (int k = 0; k < fc->n; k++) {
    fc->mem[k].b = blk->bindings[k];
    fc->mem[k].t = blk->bindings[k]->value->tfn;
    if (blk->bindings[k]->value->kind != RX_NODE_CALL_TENSOR || !fc->mem[k].t ||
        !bind_member(fc, &fc->mem[k])) {
      fail(fc, "a member that is not a call_tensor with known shapes");
      return NULL;
    }
    if (fc->mem[k].t->pattern == RX_PATTERN_OUT_FUSABLE && k != root) fc->anchor = k;
  }
  if (!g->body.result || g->body.result->kind != RX_NODE_VAR ||
      g->body.result->var != blk->bindings[root]->var) {
    fail(fc, "a primitive function that does not return its last binding");
    return NULL;
  }
  for (int j = 0; j < g->nparams; j++) names_of_sinfo(fc, g->params[j]->sinfo);
  names_of_sinfo(fc, blk->bindings[root]->value->out);
  rx_tensor_fn *t = ir_module_alloc(fc->m, sizeof *t);
  t->name = g->name;
  t->loc = g->loc;
  t->params = ir_module_alloc(fc->m, sizeof *t->params * (size_t)(g->nparams + 2));
  fc->pbuf = ir_module_alloc(fc->m, sizeof *fc->pbuf * (size_t)(g->nparams + 1));
  for (int j = 0; j < g->nparams; j++) {
    const rx_sinfo *s = g->params[j]->sinfo;
    if (s->kind != RX_SINFO_TENSOR) continue;
    rx_param *p = ir_module_alloc(fc->m, sizeof *p);
    p->kind = RX_PARAM_BUFFER;
    p->buf = fc->pbuf[j] = new_buf(fc, g->params[j]->name, s, g->params[j]->loc);
    p->loc = g->params[j]->loc;
    t->params[t->nparams++] = p;
  }
  rx_param *op = ir_module_alloc(fc->m, sizeof *op);
  op->kind = RX_PARAM_BUFFER;
  op->is_output = true;
  op->buf = fc->out = new_buf(fc, "res", blk->bindings[root]->value->out, g->loc);
  t->params[t->nparams++] = op;
  for (int j = 0; j < g->nparams; j++) {
    const rx_sinfo *s = g->params[j]->sinfo;
    if (s->kind != RX_SINFO_PRIM) continue;
    if (!s->value || s->value->kind != RX_EXPR_VAR) {
      fail(fc, "a Prim parameter without a symbolic variable");
      return NULL;
    }
    rx_param *p = ir_module_alloc(fc->m, sizeof *p);
    p->kind = RX_PARAM_SCALAR;
    p->var = s->value;
    p->dtype = RX_DTYPE_I64;
    p->loc = g->params[j]->loc;
    t->params[t->nparams++] = p;
  }
  t->facts = g->facts;
  t->nfacts = g->nfacts;

  env e = {0};
  if (fc->anchor < 0) {
    e.k = root;
    for (size_t i = 0; i < fc->mem[root].from.len; i++) {
      base_ptrvec_push(&e.from, fc->mem[root].from.data[i]);
      base_ptrvec_push(&e.to, fc->mem[root].to.data[i]);
    }
    t->body = gen_stmt(fc, &e, fc->mem[root].t->body);
    env_free(&e);
    return fc->err[0] ? NULL : t;
  }
  /* epilogue: the anchor's output loops, the reduction into acc, then the root's value */
  fmember *ma = &fc->mem[fc->anchor];
  e.k = fc->anchor;
  for (size_t i = 0; i < ma->from.len; i++) {
    base_ptrvec_push(&e.from, ma->from.data[i]);
    base_ptrvec_push(&e.to, ma->to.data[i]);
  }
  const rx_stmt *s = ma->t->body;
  rx_stmt *loops[16];
  int nl = 0;
  fc->w = ir_module_alloc(fc->m, sizeof *fc->w * 16);
  for (;;) {
    while (s->kind == RX_STMT_SEQ && s->n == 1) s = s->body[0];
    if (s->kind != RX_STMT_FOR || nl >= 16) break;
    loops[nl] = ir_module_alloc(fc->m, sizeof *loops[nl]);
    *loops[nl] = *s;
    bind_loop_vars(fc, &e, loops[nl], s);
    fc->w[nl] = loops[nl]->vars[0];
    nl++;
    s = s->inner;
  }
  fc->nw = nl;
  rx_stmt *const *body = (rx_stmt *const *)&s;
  int nb = 1;
  if (s->kind == RX_STMT_SEQ) {
    body = s->body;
    nb = s->n;
  }
  const rx_sinfo *aout = ma->b->value->out;
  fc->acc = ir_module_alloc(fc->m, sizeof *fc->acc);
  fc->acc->name = fresh(fc, "acc");
  fc->acc->dtype = aout->dtype;
  fc->acc->ndim = 1;
  fc->acc->shape = ir_module_alloc(fc->m, sizeof *fc->acc->shape);
  fc->acc->shape[0] = sym_expr_const(fc->m->ctx, 1);
  fc->acc->scope = RX_SCOPE_LOCAL;
  rx_stmt **inner = ir_module_alloc(fc->m, sizeof *inner * (size_t)(nb + 3));
  int ni = 0;
  rx_stmt *al = ir_stmt_new(fc->m, RX_STMT_ALLOC, g->loc);
  al->buf = fc->acc;
  inner[ni++] = al;
  for (int i = 0; i < nb && !fc->err[0]; i++) inner[ni++] = gen_stmt(fc, &e, body[i]);
  env_free(&e);
  if (fc->err[0] || nl != fc->out->ndim) {
    fail(fc, "the matmul's loops do not match the output");
    return NULL;
  }
  rx_tx **widx = ir_module_alloc(fc->m, sizeof *widx * (size_t)(nl + 1));
  for (int i = 0; i < nl; i++) widx[i] = ir_tx_sym(fc->m, fc->w[i], g->loc);
  rx_tx *v = inline_member(fc, root, widx, nl);
  if (!v) return NULL;
  rx_stmt *st = ir_stmt_new(fc->m, RX_STMT_STORE, g->loc);
  st->buf = fc->out;
  st->idx = widx;
  st->nidx = nl;
  st->value = v;
  inner[ni++] = st;
  rx_stmt *cur = seq_of(fc, inner, ni, g->loc);
  for (int i = nl; i-- > 0;) {
    loops[i]->inner = cur;
    cur = loops[i];
  }
  rx_stmt **top = ir_module_alloc(fc->m, sizeof *top);
  top[0] = cur;
  t->body = seq_of(fc, top, 1, g->loc);
  return t;
}

static void free_fc(fctx *fc) {
  for (int k = 0; k < fc->n && fc->mem; k++) {
    base_ptrvec_free(&fc->mem[k].from);
    base_ptrvec_free(&fc->mem[k].to);
  }
  free(fc->mem);
  base_ptrvec_free(&fc->names);
}

/* A group left unfused is called as a graph function, and the host program binds symbolic
 * values only from tensor and shape parameters: its Prim(i64, v) parameters become Shape([v])
 * ones (and its calls pass shape literals, in replace_calls). */
static void prims_to_shapes(rx_module *m, rx_graph_fn *g) {
  for (int i = 0; i < g->nparams; i++) {
    const rx_sinfo *s = g->params[i]->sinfo;
    if (s->kind == RX_SINFO_PRIM && s->value) g->params[i]->sinfo = rx_sinfo_shape(m, 1, &s->value);
  }
}

/* Replaces calls of primitive functions in seq by call_tensor of their fused programs (the calls
 * of an unfused one: Prim arguments as shape literals, prims_to_shapes). */
static void replace_calls(rx_module *m, rx_seq *seq, rx_graph_fn **prims, rx_tensor_fn **progs,
                          int np) {
  for (int b = 0; b < seq->nblocks; b++)
    for (int i = 0; i < seq->blocks[b]->nbindings; i++) {
      rx_binding *bd = seq->blocks[b]->bindings[i];
      rx_node *n = bd->value;
      if (n->kind == RX_NODE_IF) {
        replace_calls(m, n->then_seq, prims, progs, np);
        replace_calls(m, n->else_seq, prims, progs, np);
        continue;
      }
      if (n->kind != RX_NODE_CALL_GRAPH) continue;
      int k = 0;
      while (k < np && prims[k] != n->gfn) k++;
      if (k == np) continue;
      if (!progs[k]) {
        for (int a = 0; a < n->nargs; a++)
          if (prims[k]->params[a]->sinfo->kind == RX_SINFO_SHAPE &&
              n->args[a]->kind == RX_NODE_PRIM && n->args[a]->prim) {
            rx_node *sh = ir_node_new(m, RX_NODE_SHAPE, n->args[a]->loc);
            sh->dims = ir_module_alloc(m, sizeof *sh->dims);
            sh->dims[0] = n->args[a]->prim;
            sh->ndims = 1;
            sh->sinfo = rx_sinfo_shape(m, 1, sh->dims);
            n->args[a] = sh;
          }
        continue;
      }
      rx_graph_fn *g = prims[k];
      rx_node *c = ir_node_new(m, RX_NODE_CALL_TENSOR, n->loc);
      c->callee = progs[k]->name;
      c->tfn = progs[k];
      c->out = g->body.blocks[0]->bindings[g->body.blocks[0]->nbindings - 1]->value->out;
      c->args = ir_module_alloc(m, sizeof *c->args * (size_t)(n->nargs + 1));
      c->extra_dims = ir_module_alloc(m, sizeof *c->extra_dims * (size_t)(n->nargs + 1));
      for (int a = 0; a < n->nargs; a++) {
        if (g->params[a]->sinfo->kind == RX_SINFO_PRIM) {
          RX_ASSERT(n->args[a]->kind == RX_NODE_PRIM && n->args[a]->prim);
          c->extra_dims[c->nextra++] = n->args[a]->prim;
        } else {
          c->args[c->nargs++] = n->args[a];
        }
      }
      bd->value = c;
    }
}

bool pass_fuse_tensor(rx_module *m, rx_diag *diag) {
  rx_ptrvec prims = {0};
  for (size_t i = 0; i < m->items.len; i++)
    if (m->items.data[i].kind == RX_ITEM_GRAPH && ((rx_graph_fn *)m->items.data[i].fn)->primitive)
      base_ptrvec_push(&prims, m->items.data[i].fn);
  int np = (int)prims.len;
  rx_tensor_fn **progs = base_calloc((size_t)np + 1, sizeof *progs);
  bool ok = true;
  for (int k = 0; k < np; k++) {
    fctx fc = {0};
    fc.m = m;
    fc.g = prims.data[k];
    progs[k] = build(&fc);
    /* A group whose members cannot be combined (an index this pass cannot substitute) stays a
     * graph function of its own, run member by member: unfused, never an error. */
    if (!progs[k]) {
      fc.g->primitive = false;
      prims_to_shapes(m, fc.g);
    }
    free_fc(&fc);
  }
  if (ok) {
    for (size_t i = 0; i < m->items.len; i++)
      if (m->items.data[i].kind == RX_ITEM_GRAPH &&
          !((rx_graph_fn *)m->items.data[i].fn)->primitive)
        replace_calls(m, &((rx_graph_fn *)m->items.data[i].fn)->body, (rx_graph_fn **)prims.data,
                      progs, np);
    /* drop the primitive functions; add the programs */
    size_t w = 0;
    for (size_t i = 0; i < m->items.len; i++) {
      rx_item it = m->items.data[i];
      if (it.kind == RX_ITEM_GRAPH && ((rx_graph_fn *)it.fn)->primitive) continue; /* fused */
      m->items.data[w++] = it;
    }
    m->items.len = w;
    ir_module_items_changed(m);
    for (int k = 0; k < np; k++) {
      if (!progs[k]) continue; /* left unfused */
      rx_item it = {RX_ITEM_TENSOR, progs[k]};
      RX_VEC_PUSH(&m->items, it);
    }
    pass_annotate(m, diag);
  }
  free(progs);
  base_ptrvec_free(&prims);
  return ok;
}
