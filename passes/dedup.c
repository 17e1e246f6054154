/* passes/dedup.c: structural deduplication of tensor programs. Two programs that are equal up
 * to the names of their parameters, buffers, let-bound locals, loop variables and symbolic
 * variables (renamed consistently: one bijection per pair) are one program. The first of each
 * class in module order is kept under its name; every call_tensor of the others calls it, and
 * the others leave the module. Layers of a decoder fuse into programs that differ only in names
 * (the weights' parameter names, the fused programs' names), so a model of 32 layers keeps about
 * the programs and kernels of one.
 *
 * The canonical form of a program is a sequence of 64-bit words: every field that can change
 * what the program computes or how it is scheduled (dtypes, literal values as bit patterns,
 * buffer shapes and scopes, output/input parameter kinds, scalar parameter dtypes, loop kinds
 * and ranges, facts, the fusion pattern) in a fixed walk, with each buffer, local and symbolic
 * variable replaced by the index of its first occurrence (its attributes written there). Equal
 * sequences mean a bijection between the two programs' names that maps one onto the other.
 * Classes are found by a hash of the sequence and confirmed by comparing the whole sequences:
 * the hash only picks candidates.
 *
 * Renaming symbolic variables is sound because every variable of a program is defined by it
 * (a buffer parameter's dim, a scalar parameter, a loop: the verifier checks this) and a caller
 * binds them by position (passes/lower_host.c: dims=[...] to scalar parameters in order, the
 * arguments' dims to the buffer parameters' dims). Names reach nothing else: kernel and
 * artifact names come from the program kept, which every call now names.
 *
 * A module without graph functions is left alone: its programs are its entry points, called by
 * name (passes/dce.c keeps them for the same reason).
 *
 * Not merged (conservative): programs whose canonical symbolic expressions order their terms
 * differently after renaming (the expressions' canonical order follows variable names), and
 * programs with a VALUE parameter (extern declarations only). */
#include "passes.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef RX_VEC(uint64_t) words;

/* One program's canonical form. */
typedef struct canon {
  words w;
  rx_ptrmap ids; /* rx_buffer*, rx_local*, variable rx_expr* -> first-occurrence index */
  int next;
  uint64_t hash;
} canon;

/* Tags ahead of optional parts, so that the encoding reads back one way only. */
enum { ABSENT = 0x6e6f6e65, PRESENT = 0x73756d65 };

static void put(canon *c, uint64_t x) { RX_VEC_PUSH(&c->w, x); }
static void put_f64(canon *c, double f) {
  uint64_t u;
  memcpy(&u, &f, sizeof u); /* bit patterns: -0.0 and 0.0 stay apart, as do NaN payloads */
  put(c, u);
}

/* An object's index; true on its first occurrence (the caller then writes its attributes). */
static bool ref(canon *c, const void *p) {
  int id = base_ptrmap_get(&c->ids, p);
  bool first = id < 0;
  if (first) {
    id = c->next++;
    base_ptrmap_put(&c->ids, p, id);
  }
  put(c, (uint64_t)id);
  return first;
}

static void expr(canon *c, const rx_expr *e) {
  if (!e) {
    put(c, ABSENT);
    return;
  }
  put(c, PRESENT);
  put(c, (uint64_t)e->kind);
  if (e->kind == RX_EXPR_CONST) {
    put(c, (uint64_t)e->value);
    return;
  }
  if (e->kind == RX_EXPR_VAR) {
    ref(c, e);
    return;
  }
  expr(c, e->a);
  expr(c, e->b);
  expr(c, e->c);
}

static void buffer(canon *c, const rx_buffer *b) {
  if (!b) {
    put(c, ABSENT);
    return;
  }
  put(c, PRESENT);
  if (!ref(c, b)) return;
  put(c, (uint64_t)b->dtype);
  put(c, (uint64_t)b->scope);
  put(c, (uint64_t)b->frag);
  put(c, (uint64_t)(int64_t)b->ndim);
  for (int d = 0; d < b->ndim; d++) expr(c, b->shape[d]);
}

static void local(canon *c, const rx_local *l) {
  if (!l) {
    put(c, ABSENT);
    return;
  }
  put(c, PRESENT);
  if (ref(c, l)) put(c, (uint64_t)l->dtype);
}

static void tx(canon *c, const rx_tx *e) {
  if (!e) {
    put(c, ABSENT);
    return;
  }
  put(c, PRESENT);
  put(c, (uint64_t)e->kind);
  put(c, (uint64_t)e->dtype);
  put(c, (uint64_t)e->weak);
  switch (e->kind) {
  case RX_TX_INT:
    put(c, (uint64_t)e->ival);
    break;
  case RX_TX_FLOAT:
    put_f64(c, e->fval);
    break;
  case RX_TX_SYM:
    expr(c, e->sym);
    break;
  case RX_TX_LOCAL:
    local(c, e->local);
    break;
  case RX_TX_LOAD:
    buffer(c, e->buf);
    put(c, (uint64_t)(int64_t)e->nidx);
    for (int i = 0; i < e->nidx; i++) tx(c, e->idx[i]);
    break;
  case RX_TX_BINARY:
    put(c, (uint64_t)e->binop);
    break;
  case RX_TX_CALL:
    put(c, (uint64_t)e->intrin);
    if (e->msg) { /* a check's message names its op and binding: programs differ by it */
      size_t n = strlen(e->msg);
      put(c, (uint64_t)n);
      for (size_t i = 0; i < n; i += 8) {
        uint64_t w = 0;
        memcpy(&w, e->msg + i, n - i < 8 ? n - i : 8);
        put(c, w);
      }
    }
    break;
  case RX_TX_HAS_FRAG:
    put(c, (uint64_t)e->frag_ab);
    put(c, (uint64_t)e->frag_acc);
    put(c, (uint64_t)(e->frag_m * 1000000 + e->frag_n * 1000 + e->frag_k));
    put(c, (uint64_t)e->test);
    break;
  case RX_TX_NEG:
  case RX_TX_NOT:
  case RX_TX_SELECT:
  case RX_TX_CAST:
    break;
  }
  tx(c, e->a);
  tx(c, e->b);
  tx(c, e->c);
}

static void stmt(canon *c, const rx_stmt *s) {
  if (!s) {
    put(c, ABSENT);
    return;
  }
  put(c, PRESENT);
  put(c, (uint64_t)s->kind);
  put(c, (uint64_t)(int64_t)s->n);
  for (int i = 0; i < s->n; i++) stmt(c, s->body[i]);
  put(c, (uint64_t)(int64_t)s->nvars);
  for (int i = 0; i < s->nvars; i++) {
    expr(c, s->vars[i]);
    expr(c, s->lo ? s->lo[i] : NULL);
    expr(c, s->extent ? s->extent[i] : NULL);
  }
  put(c, (uint64_t)s->loop_kind);
  stmt(c, s->inner);
  stmt(c, s->init);
  stmt(c, s->otherwise);
  buffer(c, s->buf);
  put(c, (uint64_t)(int64_t)s->nidx);
  for (int i = 0; i < s->nidx; i++) tx(c, s->idx[i]);
  tx(c, s->value);
  local(c, s->local);
  buffer(c, s->mma_a);
  buffer(c, s->mma_b);
  tx(c, s->cond);
  put(c, (uint64_t)(int64_t)s->count);
  put(c, (uint64_t)s->trans);
  put(c, (uint64_t)s->frag_op);
  buffer(c, s->mma_c);
  buffer(c, s->mem);
  put(c, (uint64_t)s->col_major);
}

static void canonicalize(canon *c, const rx_tensor_fn *f) {
  put(c, (uint64_t)f->pattern);
  put(c, (uint64_t)(int64_t)f->nparams);
  for (int i = 0; i < f->nparams; i++) {
    const rx_param *p = f->params[i];
    put(c, (uint64_t)p->kind);
    put(c, (uint64_t)p->is_output);
    switch (p->kind) {
    case RX_PARAM_BUFFER:
      buffer(c, p->buf);
      break;
    case RX_PARAM_SCALAR:
      put(c, (uint64_t)p->dtype);
      expr(c, p->var);
      break;
    case RX_PARAM_VALUE: /* not in tensor programs; never merged */
      put(c, (uint64_t)(uintptr_t)p);
      break;
    }
  }
  put(c, (uint64_t)(int64_t)f->nfacts);
  for (int i = 0; i < f->nfacts; i++) expr(c, f->facts[i]);
  stmt(c, f->body);
  c->hash = base_hash_bytes(c->w.data, c->w.len * sizeof *c->w.data);
}

static bool same(const canon *a, const canon *b) {
  return a->hash == b->hash && a->w.len == b->w.len &&
         !memcmp(a->w.data, b->w.data, a->w.len * sizeof *a->w.data);
}

/* Every call_tensor under n (arguments, branches) calls keep[its program's index]. */
static void redirect_seq(rx_seq *s, const rx_ptrmap *index, rx_tensor_fn **keep);
static void redirect(rx_node *n, const rx_ptrmap *index, rx_tensor_fn **keep) {
  if (!n) return;
  if (n->kind == RX_NODE_CALL_TENSOR && n->tfn) {
    int i = base_ptrmap_get(index, n->tfn);
    if (i >= 0 && keep[i] != n->tfn) {
      n->tfn = keep[i];
      n->callee = keep[i]->name;
    }
  }
  for (int i = 0; i < n->nargs; i++) redirect(n->args[i], index, keep);
  redirect(n->inplace, index, keep);
  redirect(n->cond, index, keep);
  if (n->then_seq) redirect_seq(n->then_seq, index, keep);
  if (n->else_seq) redirect_seq(n->else_seq, index, keep);
}
static void redirect_seq(rx_seq *s, const rx_ptrmap *index, rx_tensor_fn **keep) {
  for (int b = 0; b < s->nblocks; b++)
    for (int i = 0; i < s->blocks[b]->nbindings; i++)
      redirect(s->blocks[b]->bindings[i]->value, index, keep);
  redirect(s->result, index, keep);
}

bool pass_dedup(rx_module *m, rx_diag *diag) {
  (void)diag;
  bool any_graph = false;
  for (size_t i = 0; i < m->items.len; i++) any_graph |= m->items.data[i].kind == RX_ITEM_GRAPH;
  if (!any_graph) return true; /* the programs are the entry points, by name (as in dce) */

  rx_ptrmap index = {0}; /* program -> its position among the programs */
  int n = 0;
  for (size_t i = 0; i < m->items.len; i++)
    if (m->items.data[i].kind == RX_ITEM_TENSOR) base_ptrmap_put(&index, m->items.data[i].fn, n++);
  canon *forms = base_calloc((size_t)n + 1, sizeof *forms);
  rx_tensor_fn **keep = base_calloc((size_t)n + 1, sizeof *keep); /* per program: its class's */
  int *kept = base_calloc((size_t)n + 1, sizeof *kept);           /* positions of the kept ones */
  int nkept = 0, k = 0;
  for (size_t i = 0; i < m->items.len; i++) {
    if (m->items.data[i].kind != RX_ITEM_TENSOR) continue;
    rx_tensor_fn *f = m->items.data[i].fn;
    canonicalize(&forms[k], f);
    keep[k] = f;
    for (int j = 0; j < nkept; j++)
      if (same(&forms[kept[j]], &forms[k])) {
        keep[k] = keep[kept[j]];
        break;
      }
    if (keep[k] == f) kept[nkept++] = k;
    k++;
  }
  if (nkept < n) {
    for (size_t i = 0; i < m->items.len; i++)
      if (m->items.data[i].kind == RX_ITEM_GRAPH)
        redirect_seq(&((rx_graph_fn *)m->items.data[i].fn)->body, &index, keep);
    size_t w = 0;
    for (size_t i = 0; i < m->items.len; i++) {
      rx_item it = m->items.data[i];
      if (it.kind == RX_ITEM_TENSOR && keep[base_ptrmap_get(&index, it.fn)] != it.fn) continue;
      m->items.data[w++] = it;
    }
    m->items.len = w;
    ir_module_items_changed(m);
  }
  for (int i = 0; i < n; i++) {
    free(forms[i].w.data);
    base_ptrmap_free(&forms[i].ids);
  }
  free(forms);
  free(keep);
  free(kept);
  base_ptrmap_free(&index);
  return true;
}
