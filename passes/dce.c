/* dce: dead code elimination, iterated to a fixpoint. In every graph function, a binding whose
 * variable is used nowhere (later bindings, branches, the result) is removed when its value is
 * pure: anything but call_extern of an impure extern, an in-place call_tensor, a call of a
 * graph function that is not primitive, an if, or a match_cast (a run-time check). Then, when the
 * module has graph functions, tensor programs called by none of them and primitive graph functions
 * called nowhere are removed. */
#include <stdlib.h>

#include "passes.h"

typedef struct uses {
  RX_VEC(const void *) p;
} uses;

static bool has(const uses *u, const void *p) {
  for (size_t i = 0; i < u->p.len; i++)
    if (u->p.data[i] == p) return true;
  return false;
}

static void use_seq(uses *u, const rx_seq *s);
static void use_node(uses *u, const rx_node *n) {
  if (!n) return;
  if (n->kind == RX_NODE_VAR) RX_VEC_PUSH(&u->p, n->var);
  if (n->tfn) RX_VEC_PUSH(&u->p, n->tfn);
  if (n->gfn) RX_VEC_PUSH(&u->p, n->gfn);
  for (int i = 0; i < n->nargs; i++) use_node(u, n->args[i]);
  use_node(u, n->cond);
  if (n->then_seq) use_seq(u, n->then_seq);
  if (n->else_seq) use_seq(u, n->else_seq);
}
static void use_seq(uses *u, const rx_seq *s) {
  for (int b = 0; b < s->nblocks; b++)
    for (int i = 0; i < s->blocks[b]->nbindings; i++) use_node(u, s->blocks[b]->bindings[i]->value);
  use_node(u, s->result);
}

static bool pure(const rx_binding *b) {
  const rx_node *n = b->value;
  if (b->cast) return false;
  switch (n->kind) {
  case RX_NODE_CALL_EXTERN:
    return n->ext && !n->ext->impure;
  case RX_NODE_CALL_TENSOR:
    return !n->inplace; /* an in-place call changes its target */
  case RX_NODE_CALL:    /* so does an op that writes an argument in place (kv_append) */
    return !n->op || rx_op_inplace_arg(n->op) < 0;
  case RX_NODE_CALL_GRAPH:
    return n->gfn && n->gfn->primitive;
  case RX_NODE_IF:
    return false;
  default:
    return true;
  }
}

static bool sweep_seq(const uses *u, rx_seq *s) {
  bool changed = false;
  for (int b = 0; b < s->nblocks; b++) {
    rx_block *blk = s->blocks[b];
    int w = 0;
    for (int i = 0; i < blk->nbindings; i++) {
      rx_binding *bd = blk->bindings[i];
      if (bd->value->kind == RX_NODE_IF) {
        changed |= sweep_seq(u, bd->value->then_seq);
        changed |= sweep_seq(u, bd->value->else_seq);
      }
      if (pure(bd) && !has(u, bd->var)) {
        changed = true;
        continue;
      }
      blk->bindings[w++] = bd;
    }
    blk->nbindings = w;
  }
  return changed;
}

bool rx_pass_dce(rx_module *m, rx_diag *diag) {
  (void)diag;
  bool changed = true, any_graph = false;
  while (changed) {
    changed = false;
    for (size_t i = 0; i < m->items.len; i++) {
      if (m->items.data[i].kind != RX_ITEM_GRAPH) continue;
      any_graph = true;
      rx_graph_fn *fn = m->items.data[i].fn;
      uses u = {0};
      use_seq(&u, &fn->body);
      changed |= sweep_seq(&u, &fn->body);
      free(u.p.data);
    }
  }
  if (!any_graph) return true;
  /* functions: primitive graph functions and tensor programs nobody calls */
  for (changed = true; changed;) {
    changed = false;
    uses u = {0};
    for (size_t i = 0; i < m->items.len; i++)
      if (m->items.data[i].kind == RX_ITEM_GRAPH)
        use_seq(&u, &((rx_graph_fn *)m->items.data[i].fn)->body);
    size_t w = 0;
    for (size_t i = 0; i < m->items.len; i++) {
      rx_item it = m->items.data[i];
      bool dead =
          (it.kind == RX_ITEM_TENSOR && !has(&u, it.fn)) ||
          (it.kind == RX_ITEM_GRAPH && ((rx_graph_fn *)it.fn)->primitive && !has(&u, it.fn));
      if (dead) {
        changed = true;
        continue;
      }
      m->items.data[w++] = it;
    }
    m->items.len = w;
    free(u.p.data);
  }
  return true;
}
