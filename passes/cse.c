/* cse: common subexpression elimination in dataflow blocks. A binding whose value is identical
 * to an earlier binding's of the same block (same kind, same op / callee, equal attributes,
 * arguments that are the same variables or equal literals, equal out= struct info and dims=,
 * same tuple index) and whose variable has the same struct info is dropped, and its uses
 * anywhere in the function read the earlier variable instead. Impure extern calls, match_cast
 * and graph calls are never merged. */
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
    if (!a->out || !b->out || !rx_sinfo_equal(a->out, b->out)) return false;
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

typedef struct rmap {
  RX_VEC(const rx_var *) from;
  RX_VEC(rx_var *) to;
} rmap;

static void rename_seq(const rmap *r, rx_seq *s);
static void rename_node(const rmap *r, rx_node *n) {
  if (!n) return;
  if (n->kind == RX_NODE_VAR)
    for (size_t i = 0; i < r->from.len; i++)
      if (r->from.data[i] == n->var) n->var = r->to.data[i];
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
    int w = 0;
    for (int i = 0; i < blk->nbindings; i++) {
      rx_binding *bd = blk->bindings[i];
      rename_node(r, bd->value); /* earlier merges first */
      rx_binding *same = NULL;
      if (!bd->cast)
        for (int j = 0; j < w && !same; j++) {
          rx_binding *e = blk->bindings[j];
          if (!e->cast && rx_sinfo_equal(e->var->sinfo, bd->var->sinfo) &&
              same_node(e->value, bd->value))
            same = e;
        }
      if (same) {
        RX_VEC_PUSH(&r->from, bd->var);
        RX_VEC_PUSH(&r->to, same->var);
        continue;
      }
      blk->bindings[w++] = bd;
    }
    blk->nbindings = w;
  }
}

bool rx_pass_cse(rx_module *m, rx_diag *diag) {
  (void)diag;
  for (size_t i = 0; i < m->items.len; i++) {
    if (m->items.data[i].kind != RX_ITEM_GRAPH) continue;
    rx_graph_fn *fn = m->items.data[i].fn;
    rmap r = {0};
    cse_seq(&r, &fn->body);
    if (r.from.len) rename_seq(&r, &fn->body);
    free(r.from.data);
    free(r.to.data);
  }
  return true;
}
