/* dce: dead code elimination, iterated to a fixpoint. In every graph function, a binding whose
 * variable is used nowhere (later bindings, branches, the result) is removed when its value is
 * pure: anything but call_extern of an impure extern, an in-place call_tensor, a collective op
 * (send, recv, allreduce ...: the other ranks wait for it), a call of a graph function that is
 * not primitive, an if, or a match_cast (a run-time check). Then, when the module has graph
 * functions, tensor programs called by none of them and primitive graph functions called nowhere
 * are removed. */
#include <stdlib.h>

#include "../ops/ops.h"
#include "passes.h"

/* How many times each variable, tensor program and graph function is used (pointer -> count):
 * a map, so that a function of n bindings is swept in O(n) (a list scan per lookup made a
 * 100k-binding function take minutes). */
typedef struct uses {
  rx_ptrmap count;
} uses;

static bool has(const uses *u, const void *p) { return base_ptrmap_get(&u->count, p) > 0; }

static void add(uses *u, const void *p, int d) {
  int c = base_ptrmap_get(&u->count, p);
  base_ptrmap_put(&u->count, p, (c < 0 ? 0 : c) + d);
}

static void use_seq(uses *u, const rx_seq *s, int d);
/* Counts (d = 1) or uncounts (d = -1) what n uses. */
static void use_node(uses *u, const rx_node *n, int d) {
  if (!n) return;
  if (n->kind == RX_NODE_VAR) add(u, n->var, d);
  if (n->tfn) add(u, n->tfn, d);
  if (n->gfn) add(u, n->gfn, d);
  for (int i = 0; i < n->nargs; i++) use_node(u, n->args[i], d);
  use_node(u, n->inplace, d); /* an in-place call uses its target */
  use_node(u, n->cond, d);
  if (n->then_seq) use_seq(u, n->then_seq, d);
  if (n->else_seq) use_seq(u, n->else_seq, d);
}
static void use_seq(uses *u, const rx_seq *s, int d) {
  for (int b = 0; b < s->nblocks; b++)
    for (int i = 0; i < s->blocks[b]->nbindings; i++)
      use_node(u, s->blocks[b]->bindings[i]->value, d);
  use_node(u, s->result, d);
}

static bool pure(const rx_binding *b) {
  const rx_node *n = b->value;
  if (b->cast) return false;
  switch (n->kind) {
  case RX_NODE_CALL_EXTERN:
    return n->ext && !n->ext->impure;
  case RX_NODE_CALL_TENSOR:
    return !n->inplace; /* an in-place call changes its target */
  case RX_NODE_CALL:    /* so does an op that writes an argument in place (kv_append); and a
                          collective meets the other ranks' calls (a pipeline stage's send has no use
                          here, and its peer waits for it) */
    return !n->op || (ops_op_inplace_arg(n->op) < 0 && !ops_op_is_collective(n->op));
  case RX_NODE_CALL_GRAPH:
    return n->gfn && n->gfn->primitive;
  case RX_NODE_IF:
    return false;
  default:
    return true;
  }
}

/* Removes the dead pure bindings of s, last first: a removed binding's uses are uncounted, so a
 * chain of dead bindings goes in one sweep. */
static bool sweep_seq(uses *u, rx_seq *s) {
  bool changed = false;
  for (int b = s->nblocks - 1; b >= 0; b--) {
    rx_block *blk = s->blocks[b];
    int dead = 0;
    for (int i = blk->nbindings - 1; i >= 0; i--) {
      rx_binding *bd = blk->bindings[i];
      if (bd->value->kind == RX_NODE_IF) {
        changed |= sweep_seq(u, bd->value->then_seq);
        changed |= sweep_seq(u, bd->value->else_seq);
      }
      if (pure(bd) && !has(u, bd->var)) {
        use_node(u, bd->value, -1);
        blk->bindings[i] = NULL;
        dead++;
      }
    }
    if (!dead) continue;
    changed = true;
    int w = 0;
    for (int i = 0; i < blk->nbindings; i++)
      if (blk->bindings[i]) blk->bindings[w++] = blk->bindings[i];
    blk->nbindings = w;
  }
  return changed;
}

bool pass_dce(rx_module *m, rx_diag *diag) {
  (void)diag;
  bool changed = true, any_graph = false;
  while (changed) {
    changed = false;
    for (size_t i = 0; i < m->items.len; i++) {
      if (m->items.data[i].kind != RX_ITEM_GRAPH) continue;
      any_graph = true;
      rx_graph_fn *fn = m->items.data[i].fn;
      uses u = {0};
      use_seq(&u, &fn->body, 1);
      changed |= sweep_seq(&u, &fn->body);
      base_ptrmap_free(&u.count);
    }
  }
  if (!any_graph) return true;
  /* functions: primitive graph functions and tensor programs nobody calls */
  for (changed = true; changed;) {
    changed = false;
    uses u = {0};
    for (size_t i = 0; i < m->items.len; i++)
      if (m->items.data[i].kind == RX_ITEM_GRAPH)
        use_seq(&u, &((rx_graph_fn *)m->items.data[i].fn)->body, 1);
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
    ir_module_items_changed(m);
    base_ptrmap_free(&u.count);
  }
  return true;
}
