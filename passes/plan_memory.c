/* passes/plan_memory.c: liveness-based storage reuse over each graph function's call_tensor
 * outputs, sized at the upper bounds the function's facts give (see passes/passes.h). */
#include "passes.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- one function ---- */
typedef RX_VEC(int) intvec;
typedef RX_VEC(const rx_expr *) exprvec;

typedef struct fplan {
  rx_module *m;
  const rx_graph_fn *fn;
  rx_analyzer *an;
  rx_ptrmap var_index;  /* rx_var* -> index into roots */
  RX_VEC(intvec) roots; /* per variable: the allocations it may refer to */
  RX_VEC(rx_mem_alloc) allocs;
} fplan;

static void add_root(intvec *v, int a) {
  for (size_t i = 0; i < v->len; i++)
    if (v->data[i] == a) return;
  RX_VEC_PUSH(v, a);
}

static intvec *roots_of(fplan *p, const rx_var *v) {
  int i = base_ptrmap_get(&p->var_index, v);
  return i < 0 ? NULL : &p->roots.data[i];
}

/* The size in bytes of a tensor struct info; NULL when the shape or dtype is unknown. */
static const rx_expr *tensor_bytes(rx_module *m, const rx_sinfo *s) {
  if (!s || s->kind != RX_SINFO_TENSOR || !s->shape || s->ndim < 0 || s->dtype == RX_DTYPE_UNKNOWN)
    return NULL;
  int bits = ir_dtype_bits(s->dtype);
  const rx_expr *e = sym_expr_const(m->ctx, (bits + 7) / 8);
  for (int i = 0; i < s->ndim; i++) e = sym_expr_mul(m->ctx, e, s->shape[i]);
  return e;
}

/* Assumes 0 <= v for every variable of e (dims are sizes). */
static void assume_nonneg(fplan *p, const rx_expr *e) {
  rx_ptrvec vars = {0};
  sym_expr_collect_vars(e, &vars);
  for (size_t i = 0; i < vars.len; i++)
    sym_analyzer_assume(
        p->an, sym_expr_cmp(p->m->ctx, RX_EXPR_LE, sym_expr_const(p->m->ctx, 0), vars.data[i]));
  base_ptrvec_free(&vars);
}
static void assume_sinfo_nonneg(fplan *p, const rx_sinfo *s) {
  if (!s) return;
  if ((s->kind == RX_SINFO_TENSOR || s->kind == RX_SINFO_SHAPE) && s->shape)
    for (int i = 0; i < s->ndim; i++) assume_nonneg(p, s->shape[i]);
  if (s->kind == RX_SINFO_TUPLE)
    for (int i = 0; i < s->nfields; i++) assume_sinfo_nonneg(p, s->fields[i]);
}

static void new_alloc(fplan *p, const rx_var *v, int field, const rx_sinfo *s, int pos,
                      intvec *roots) {
  rx_mem_alloc a = {
      .var = v, .field = field, .bound = -1, .upper = -1, .storage = -1, .def = pos, .last = pos};
  a.bytes = tensor_bytes(p->m, s);
  if (a.bytes) {
    assume_sinfo_nonneg(p, s);
    rx_interval iv = sym_analyzer_bounds(p->an, a.bytes);
    if (iv.hi != INT64_MAX && iv.hi >= 0) a.upper = iv.hi;
    /* past RX_PLAN_MAX_STATIC_BYTES a symbolic size is allocated at the call's sizes */
    if (a.upper >= 0 && (a.upper <= RX_PLAN_MAX_STATIC_BYTES || a.bytes->kind == RX_EXPR_CONST))
      a.bound = a.upper;
  }
  add_root(roots, (int)p->allocs.len);
  RX_VEC_PUSH(&p->allocs, a);
}

/* The roots of every variable n reads: what a value made of them may alias. */
static void alias_roots(fplan *p, const rx_node *n, intvec *out) {
  rx_varvec uses = {0};
  ir_node_uses(n, &uses);
  for (size_t i = 0; i < uses.len; i++) {
    intvec *r = roots_of(p, uses.data[i]);
    if (r)
      for (size_t k = 0; k < r->len; k++) add_root(out, r->data[k]);
  }
  free(uses.data);
}

/* Roots of the value a binding defines (its own allocations, or what it aliases). */
static void binding_roots(fplan *p, const rx_binding *b, int pos, intvec *out) {
  const rx_node *n = b->value;
  switch (n->kind) {
  case RX_NODE_CALL_TENSOR:
    if (n->inplace) { /* its value is the target: the target's roots */
      alias_roots(p, n->inplace, out);
      if (!n->fresh_out) return;
    }
    if (n->out->kind == RX_SINFO_TUPLE) /* (after the targets, the outputs it allocates) */
      for (int f = ir_inplace_targets(n); f < n->out->nfields; f++)
        new_alloc(p, b->var, f, n->out->fields[f], pos, out);
    else
      new_alloc(p, b->var, -1, n->out, pos, out);
    return;
  case RX_NODE_CALL_EXTERN: /* destination-passing outputs: dynamic, never aliasing; a returning
                               extern's result is the runtime's own (a builtin's buffers) */
  case RX_NODE_CONST:
  case RX_NODE_PRIM:
  case RX_NODE_SHAPE:
    return;
  default: /* moves, tuples, get_item, match_cast, if, graph calls: may alias what they use */
    alias_roots(p, n, out);
    return;
  }
}

/* Marks, for every allocation some use at position pos refers to, that it lives until pos. */
static void mark_uses(fplan *p, const rx_node *n, int pos, bool result) {
  rx_varvec uses = {0};
  ir_node_uses(n, &uses);
  for (size_t i = 0; i < uses.len; i++) {
    intvec *r = roots_of(p, uses.data[i]);
    if (!r) continue;
    for (size_t k = 0; k < r->len; k++) {
      rx_mem_alloc *a = &p->allocs.data[r->data[k]];
      if (pos > a->last) a->last = pos;
      if (result) a->escapes = true;
    }
  }
  free(uses.data);
}

/* Allocations without a bound that do not escape (the decode attention's partial results over a
 * cache of unbounded length, in every layer): storages sized at run time, numbered from first,
 * shared by the tenants of one size expression (hash-consed: the same pointer) whose lifetimes do
 * not overlap. end holds each storage's last use (the constant ones' first); exprs gets the size
 * expression of each new storage. */
static void plan_runtime_sized(fplan *p, intvec *end, exprvec *exprs, int first) {
  for (size_t i = 0; i < p->allocs.len; i++) {
    rx_mem_alloc *a = &p->allocs.data[i];
    if (a->bound >= 0 || a->escapes || !a->bytes) continue;
    int best = -1;
    for (size_t s = 0; s < exprs->len && best < 0; s++)
      if (exprs->data[s] == a->bytes && end->data[first + (int)s] < a->def) best = (int)s;
    if (best < 0) {
      best = (int)exprs->len;
      RX_VEC_PUSH(exprs, a->bytes);
      RX_VEC_PUSH(end, 0);
    }
    end->data[first + best] = a->last;
    a->storage = first + best;
  }
}

/* Each storage's bytes at the facts' upper bounds (a constant one: its size; one sized at run
 * time: its tenants' largest bound, -1 when one has none) and their sum. */
static void plan_upper(const fplan *p, rx_fn_plan *out, int nconst) {
  out->storage_upper =
      ir_module_alloc(p->m, sizeof *out->storage_upper * (size_t)(out->nstorages + 1));
  for (int s = 0; s < out->nstorages; s++)
    out->storage_upper[s] = s < nconst ? out->storage_bytes[s] : -2;
  for (size_t i = 0; i < p->allocs.len; i++) {
    const rx_mem_alloc *a = &p->allocs.data[i];
    if (a->storage < nconst) continue;
    int64_t *u = &out->storage_upper[a->storage];
    if (a->upper < 0 || *u == -1)
      *u = -1;
    else if (a->upper > *u)
      *u = a->upper;
  }
  out->upper_bytes = 0;
  for (int s = 0; s < out->nstorages; s++) {
    int64_t u = out->storage_upper[s];
    if (u < 0) continue;
    out->upper_bytes = u > INT64_MAX - out->upper_bytes ? INT64_MAX : out->upper_bytes + u;
  }
}

static void plan_fn(rx_module *m, const rx_graph_fn *fn, rx_fn_plan *out) {
  fplan p = {.m = m, .fn = fn, .an = sym_analyzer_new(m->ctx)};
  for (int i = 0; i < fn->nparams; i++) assume_sinfo_nonneg(&p, fn->params[i]->sinfo);
  for (int i = 0; i < fn->nfacts; i++) sym_analyzer_assume(p.an, fn->facts[i]);
  int pos = 0;
  for (int b = 0; b < fn->body.nblocks; b++)
    for (int i = 0; i < fn->body.blocks[b]->nbindings; i++, pos++) {
      const rx_binding *bd = fn->body.blocks[b]->bindings[i];
      mark_uses(&p, bd->value, pos, false);
      intvec r = {0};
      binding_roots(&p, bd, pos, &r);
      base_ptrmap_put(&p.var_index, bd->var, (int)p.roots.len);
      RX_VEC_PUSH(&p.roots, r);
    }
  mark_uses(&p, fn->body.result, pos, true);

  /* greedy best fit, in definition order */
  RX_VEC(int64_t) size = {0};
  intvec end = {0};
  int64_t unplanned = 0;
  int ndyn = 0;
  for (size_t i = 0; i < p.allocs.len; i++) {
    rx_mem_alloc *a = &p.allocs.data[i];
    if (a->bound < 0 || a->escapes) continue;
    unplanned += a->bound;
    int best = -1, largest = -1;
    for (size_t s = 0; s < size.len; s++) {
      if (end.data[s] >= a->def) continue; /* its tenant is still alive */
      if (size.data[s] >= a->bound && (best < 0 || size.data[s] < size.data[best])) best = (int)s;
      if (largest < 0 || size.data[s] > size.data[largest]) largest = (int)s;
    }
    if (best < 0) best = largest;
    if (best < 0) {
      best = (int)size.len;
      RX_VEC_PUSH(&size, 0);
      RX_VEC_PUSH(&end, 0);
    }
    if (size.data[best] < a->bound) size.data[best] = a->bound;
    end.data[best] = a->last;
    a->storage = best;
  }
  int nconst = (int)size.len;
  exprvec exprs = {0};
  plan_runtime_sized(&p, &end, &exprs, nconst);
  for (size_t i = 0; i < p.allocs.len; i++) ndyn += p.allocs.data[i].storage < 0;
  for (size_t s = 0; s < exprs.len; s++) RX_VEC_PUSH(&size, -1);
  out->storage_exprs = ir_module_alloc(m, sizeof *out->storage_exprs * (size.len + 1));
  for (size_t s = 0; s < exprs.len; s++) out->storage_exprs[nconst + (int)s] = exprs.data[s];
  free(exprs.data);
  out->fn = fn;
  out->nallocs = (int)p.allocs.len;
  out->allocs = ir_module_alloc(m, sizeof *out->allocs * (p.allocs.len + 1));
  if (p.allocs.len) memcpy(out->allocs, p.allocs.data, sizeof *out->allocs * p.allocs.len);
  out->nstorages = (int)size.len;
  out->storage_bytes = ir_module_alloc(m, sizeof *out->storage_bytes * (size.len + 1));
  out->peak_bytes = 0;
  for (size_t s = 0; s < size.len; s++) {
    out->storage_bytes[s] = size.data[s];
    if (size.data[s] > 0) out->peak_bytes += size.data[s];
  }
  out->unplanned_bytes = unplanned;
  out->ndynamic = ndyn;
  plan_upper(&p, out, nconst);
  free(size.data);
  free(end.data);
  for (size_t i = 0; i < p.roots.len; i++) free(p.roots.data[i].data);
  free(p.roots.data);
  free(p.allocs.data);
  base_ptrmap_free(&p.var_index);
  sym_analyzer_free(p.an);
}

bool pass_plan_memory(rx_module *m, rx_mem_plan *out, rx_diag *diag) {
  (void)diag;
  memset(out, 0, sizeof *out);
  int n = 0;
  for (size_t i = 0; i < m->items.len; i++)
    n += m->items.data[i].kind == RX_ITEM_GRAPH && !((rx_graph_fn *)m->items.data[i].fn)->primitive;
  out->fns = ir_module_alloc(m, sizeof *out->fns * (size_t)(n + 1));
  for (size_t i = 0; i < m->items.len; i++) {
    if (m->items.data[i].kind != RX_ITEM_GRAPH) continue;
    const rx_graph_fn *g = m->items.data[i].fn;
    if (g->primitive) continue;
    plan_fn(m, g, &out->fns[out->nfns++]);
  }
  return true;
}

const rx_fn_plan *pass_mem_plan_fn(const rx_mem_plan *p, const rx_graph_fn *f) {
  for (int i = 0; p && i < p->nfns; i++)
    if (p->fns[i].fn == f) return &p->fns[i];
  return NULL;
}

void pass_mem_plan_print(rx_strbuf *out, const rx_mem_plan *p) {
  for (int i = 0; i < p->nfns; i++) {
    const rx_fn_plan *f = &p->fns[i];
    base_strbuf_printf(out,
                       "memory plan of %s: %d storage%s, %lld bytes planned (%lld without reuse), "
                       "%d dynamic allocation%s\n",
                       f->fn->name, f->nstorages, f->nstorages == 1 ? "" : "s",
                       (long long)f->peak_bytes, (long long)f->unplanned_bytes, f->ndynamic,
                       f->ndynamic == 1 ? "" : "s");
    for (int s = 0; s < f->nstorages; s++) {
      if (f->storage_bytes[s] >= 0) {
        base_strbuf_printf(out, "  storage %d: %lld bytes\n", s, (long long)f->storage_bytes[s]);
        continue;
      }
      base_strbuf_printf(out, "  storage %d: ", s);
      sym_expr_print(out, f->storage_exprs[s]);
      base_strbuf_append(out, " bytes, sized at run time\n");
    }
    for (int a = 0; a < f->nallocs; a++) {
      const rx_mem_alloc *x = &f->allocs[a];
      base_strbuf_printf(out, "  %s", x->var->name);
      if (x->field >= 0) base_strbuf_printf(out, ".%d", x->field);
      base_strbuf_append(out, ": ");
      if (x->bytes)
        sym_expr_print(out, x->bytes);
      else
        base_strbuf_append(out, "?");
      base_strbuf_printf(out, " bytes, live %d..%d, ", x->def, x->last);
      if (x->storage >= 0 && x->bound < 0)
        base_strbuf_printf(out, "storage %d (unbounded)\n", x->storage);
      else if (x->storage >= 0)
        base_strbuf_printf(out, "storage %d (bound %lld)\n", x->storage, (long long)x->bound);
      else
        base_strbuf_printf(out, "dynamic (%s)\n", x->escapes ? "returned" : "unbounded");
    }
  }
}
