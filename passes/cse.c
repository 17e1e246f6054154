/* cse: common subexpression elimination in dataflow blocks. A binding whose value is identical
 * to an earlier binding's of the same block (same kind, same op / callee, equal attributes,
 * arguments that are the same variables or equal literals, equal out= struct info and dims=,
 * same tuple index) and whose variable has the same struct info is dropped, and its uses
 * anywhere in the function read the earlier variable instead. Impure extern calls, match_cast
 * and graph calls are never merged. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "passes.h"

static bool same_attr(const rx_attr *a, const rx_attr *b) {
  if (a->name != b->name || a->kind != b->kind) return false;
  switch (a->kind) {
  case RX_ATTR_INT:
  case RX_ATTR_BOOL:
    return a->i == b->i;
  case RX_ATTR_FLOAT:
    return a->f == b->f || (a->f != a->f && b->f != b->f);
  case RX_ATTR_STR:
    return (a->s && b->s) ? !strcmp(a->s, b->s) : a->s == b->s;
  case RX_ATTR_DTYPE:
    return a->dtype == b->dtype;
  case RX_ATTR_INTS:
    return a->n == b->n && (a->n == 0 || !memcmp(a->ints, b->ints, sizeof *a->ints * (size_t)a->n));
  case RX_ATTR_EXPRS:
    if (a->n != b->n) return false;
    for (int i = 0; i < a->n; i++)
      if (a->exprs[i] != b->exprs[i]) return false;
    return true;
  }
  return false;
}

static bool same_node(const rx_node *a, const rx_node *b);

static bool same_atom(const rx_node *a, const rx_node *b) {
  if (a->kind != b->kind) return false;
  if (a->kind == RX_NODE_VAR) return a->var == b->var;
  return same_node(a, b);
}

static bool same_node(const rx_node *a, const rx_node *b) {
  if (a->kind != b->kind || a->nargs != b->nargs) return false;
  switch (a->kind) {
  case RX_NODE_VAR:
    return a->var == b->var;
  case RX_NODE_PRIM:
    return a->prim_dtype == b->prim_dtype && a->prim == b->prim &&
           (a->prim || a->fvalue == b->fvalue);
  case RX_NODE_SHAPE:
    if (a->ndims != b->ndims) return false;
    for (int i = 0; i < a->ndims; i++)
      if (a->dims[i] != b->dims[i]) return false;
    return true;
  case RX_NODE_CONST:
    return false; /* constants are not compared element by element */
  case RX_NODE_GET_ITEM:
    return a->index == b->index && same_atom(a->args[0], b->args[0]);
  case RX_NODE_TUPLE:
    break;
  case RX_NODE_CALL:
    if (a->op != b->op || a->nattrs != b->nattrs) return false;
    for (int i = 0; i < a->nattrs; i++)
      if (!same_attr(&a->attrs[i], &b->attrs[i])) return false;
    break;
  case RX_NODE_CALL_TENSOR:
  case RX_NODE_CALL_EXTERN:
    if (a->tfn != b->tfn || a->ext != b->ext || a->nextra != b->nextra) return false;
    if ((a->ext && a->ext->impure) || a->inplace || b->inplace) return false;
    if (!a->out || !b->out || !ir_sinfo_equal(a->out, b->out)) return false;
    for (int i = 0; i < a->nextra; i++)
      if (a->extra_dims[i] != b->extra_dims[i]) return false;
    break;
  case RX_NODE_CALL_GRAPH:
  case RX_NODE_IF:
    return false;
  }
  for (int i = 0; i < a->nargs; i++)
    if (!same_atom(a->args[i], b->args[i])) return false;
  return true;
}

/* A hash of a node that equal nodes (same_node) share: what same_node compares by identity or
 * value, less the struct infos (compared structurally, after a hash match). */
static uint64_t node_hash(const rx_node *n) {
  uint64_t h = rx_hash_mix((uint64_t)n->kind, (uint64_t)n->nargs);
  switch (n->kind) {
  case RX_NODE_VAR:
    return rx_hash_mix(h, (uint64_t)(uintptr_t)n->var);
  case RX_NODE_PRIM:
    return rx_hash_mix(rx_hash_mix(h, (uint64_t)n->prim_dtype), (uint64_t)(uintptr_t)n->prim);
  case RX_NODE_SHAPE:
    for (int i = 0; i < n->ndims; i++) h = rx_hash_mix(h, (uint64_t)(uintptr_t)n->dims[i]);
    return h;
  case RX_NODE_CONST:
    return rx_hash_mix(h, (uint64_t)(uintptr_t)n); /* never equal to another */
  case RX_NODE_GET_ITEM:
    h = rx_hash_mix(h, (uint64_t)n->index);
    break;
  case RX_NODE_CALL:
    h = rx_hash_mix(rx_hash_mix(h, (uint64_t)(uintptr_t)n->op), (uint64_t)n->nattrs);
    for (int i = 0; i < n->nattrs; i++) h = rx_hash_mix(h, (uint64_t)(uintptr_t)n->attrs[i].name);
    break;
  case RX_NODE_CALL_TENSOR:
  case RX_NODE_CALL_EXTERN:
    h = rx_hash_mix(rx_hash_mix(h, (uint64_t)(uintptr_t)n->tfn), (uint64_t)(uintptr_t)n->ext);
    for (int i = 0; i < n->nextra; i++) h = rx_hash_mix(h, (uint64_t)(uintptr_t)n->extra_dims[i]);
    break;
  default:
    break;
  }
  for (int i = 0; i < n->nargs; i++) h = rx_hash_mix(h, node_hash(n->args[i]));
  return h;
}

/* The kept bindings of a block by hash (open hashing): a binding is compared only with the
 * earlier ones of its hash, so a block of n bindings is searched in O(n), not O(n^2). */
typedef struct seen {
  int *head;      /* per bucket: the last kept binding index of that bucket, -1: none */
  int *next;      /* per kept binding index: the previous one of its bucket */
  uint64_t *hash; /* per kept binding index */
  size_t mask;
} seen;

typedef struct rmap {
  RX_VEC(const rx_var *) from;
  RX_VEC(rx_var *) to;
  rx_ptrmap index; /* from[i] -> i */
} rmap;

static void rename_seq(const rmap *r, rx_seq *s);
static void rename_node(const rmap *r, rx_node *n) {
  if (!n) return;
  if (n->kind == RX_NODE_VAR) {
    int i = r->from.len ? base_ptrmap_get(&r->index, n->var) : -1;
    if (i >= 0) n->var = r->to.data[i];
  }
  for (int i = 0; i < n->nargs; i++) rename_node(r, n->args[i]);
  rename_node(r, n->cond);
  if (n->then_seq) rename_seq(r, n->then_seq);
  if (n->else_seq) rename_seq(r, n->else_seq);
}
static void rename_seq(const rmap *r, rx_seq *s) {
  for (int b = 0; b < s->nblocks; b++)
    for (int i = 0; i < s->blocks[b]->nbindings; i++)
      rename_node(r, s->blocks[b]->bindings[i]->value);
  rename_node(r, s->result);
}

static void cse_seq(rmap *r, rx_seq *s) {
  for (int b = 0; b < s->nblocks; b++) {
    rx_block *blk = s->blocks[b];
    for (int i = 0; i < blk->nbindings; i++) {
      rx_node *v = blk->bindings[i]->value;
      if (v->kind == RX_NODE_IF) {
        cse_seq(r, v->then_seq);
        cse_seq(r, v->else_seq);
      }
    }
    if (!blk->dataflow) continue;
    size_t nb = 16;
    while (nb < 2 * (size_t)blk->nbindings) nb *= 2;
    seen t = {.head = base_malloc(nb * sizeof(int)),
              .next = base_malloc(((size_t)blk->nbindings + 1) * sizeof(int)),
              .hash = base_malloc(((size_t)blk->nbindings + 1) * sizeof(uint64_t)),
              .mask = nb - 1};
    memset(t.head, 0xff, nb * sizeof(int)); /* -1 */
    int w = 0;
    for (int i = 0; i < blk->nbindings; i++) {
      rx_binding *bd = blk->bindings[i];
      rename_node(r, bd->value); /* earlier merges first */
      uint64_t h = node_hash(bd->value);
      rx_binding *same = NULL;
      if (!bd->cast)
        for (int j = t.head[h & t.mask]; j >= 0 && !same; j = t.next[j]) {
          rx_binding *e = blk->bindings[j];
          if (t.hash[j] == h && !e->cast && ir_sinfo_equal(e->var->sinfo, bd->var->sinfo) &&
              same_node(e->value, bd->value))
            same = e;
        }
      if (same) {
        base_ptrmap_put(&r->index, bd->var, (int)r->from.len);
        RX_VEC_PUSH(&r->from, bd->var);
        RX_VEC_PUSH(&r->to, same->var);
        continue;
      }
      t.hash[w] = h;
      t.next[w] = t.head[h & t.mask];
      t.head[h & t.mask] = w;
      blk->bindings[w++] = bd;
    }
    blk->nbindings = w;
    free(t.head);
    free(t.next);
    free(t.hash);
  }
}

bool pass_cse(rx_module *m, rx_diag *diag) {
  (void)diag;
  for (size_t i = 0; i < m->items.len; i++) {
    if (m->items.data[i].kind != RX_ITEM_GRAPH) continue;
    rx_graph_fn *fn = m->items.data[i].fn;
    rmap r = {0};
    cse_seq(&r, &fn->body);
    if (r.from.len) rename_seq(&r, &fn->body);
    free(r.from.data);
    free(r.to.data);
    base_ptrmap_free(&r.index);
  }
  return true;
}
