/* legalize_dist: the collective ops (ops/ops.def's allreduce ... recv, on a rank's local
 * tensors) become call_extern bindings of the runtime's returning builtins, the table of
 * docs/distributed.md that runtime/ccl implements:
 *
 *   y = allreduce(x, op="max")              ->  y = call_extern(rx_ccl_allreduce, x, prim(1),
 * out=...) y = allgather(x, axis=1, world=4)       ->  y = call_extern(rx_ccl_allgather, x,
 * prim(1), out=...) y = reduce_scatter(x, axis=0, world=4)  ->  call_extern(rx_ccl_reduce_scatter,
 * x, prim(0), prim(0)) y = broadcast(x, root=0)                ->  call_extern(rx_ccl_broadcast, x,
 * prim(0)) y = send(x, peer=1)                     ->  call_extern(rx_ccl_send, x, prim(1)) y =
 * recv([n, 64], peer=0, dtype=f16)    ->  call_extern(rx_ccl_recv, prim(0), prim(DT), prim(n),
 * prim(64))
 *
 * The call keeps the op's deduced struct info as its out=; each builtin is declared in the module
 * on first use (send and recv impure: they are ordered, never removed). Called by
 * passes/legalize.c for every collective op call. */
#include "../ops/ops.h"
#include "passes.h"

#include <stdio.h>
#include <string.h>

/* recv: the most dims its shape may have (the runtime's RX_MAX_NDIM for its tensors) */
#define IR_COLLECTIVE_MAX_NDIM 8

static int64_t reduce_code(const rx_node *call) {
  const rx_attr *a = ops_call_attr(call, "op");
  return a && a->s && !strcmp(a->s, "max") ? 1 : 0;
}

static int64_t int_attr(const rx_node *call, const char *name, int64_t dflt) {
  const rx_attr *a = ops_call_attr(call, name);
  return a ? a->i : dflt;
}

/* The declaration of builtin name with nprims Prim(i64) parameters after x (has_x). */
static rx_extern_fn *declare(rx_module *m, const char *name, bool has_x, int nprims, bool impure,
                             rx_diag *diag) {
  rx_extern_fn *e = ir_module_extern_fn(m, ir_module_intern(m, name, strlen(name)));
  if (e) {
    if (e->nparams != (has_x ? 1 : 0) + nprims) {
      base_diag_report(diag, RX_DIAG_ERROR, e->loc,
                       "%s is declared with %d parameters; this call needs %d (one module "
                       "receives tensors of one rank only)",
                       name, e->nparams, (has_x ? 1 : 0) + nprims);
      return NULL;
    }
    return e;
  }
  rx_strbuf t = {0};
  base_strbuf_printf(&t, "%sextern_fn %s(", impure ? "impure " : "", name);
  if (has_x) base_strbuf_append(&t, "x: Object");
  for (int i = 0; i < nprims; i++)
    base_strbuf_printf(&t, "%sa%d: Prim(i64)", i || has_x ? ", " : "", i);
  base_strbuf_append(&t, ") -> Object\n");
  bool ok = ir_parse_module(m, "<collectives>", t.data, t.len, diag);
  base_strbuf_free(&t);
  return ok ? ir_module_extern_fn(m, ir_module_intern(m, name, strlen(name))) : NULL;
}

rx_node *pass_collective_extern(rx_module *m, const rx_node *call, rx_diag *diag) {
  if (!call || call->kind != RX_NODE_CALL || !call->op) return NULL;
  rx_expr_ctx *c = m->ctx;
  const rx_expr *prims[2 + IR_COLLECTIVE_MAX_NDIM];
  int np = 0;
  bool has_x = true, impure = false;
  const char *name;
  switch (call->op->id) {
  case RX_OP_allreduce:
    name = "rx_ccl_allreduce";
    prims[np++] = sym_expr_const(c, reduce_code(call));
    break;
  case RX_OP_allgather:
    name = "rx_ccl_allgather";
    prims[np++] = sym_expr_const(c, int_attr(call, "axis", 0));
    break;
  case RX_OP_reduce_scatter:
    name = "rx_ccl_reduce_scatter";
    prims[np++] = sym_expr_const(c, int_attr(call, "axis", 0));
    prims[np++] = sym_expr_const(c, reduce_code(call));
    break;
  case RX_OP_broadcast:
    name = "rx_ccl_broadcast";
    prims[np++] = sym_expr_const(c, int_attr(call, "root", 0));
    break;
  case RX_OP_send:
    name = "rx_ccl_send";
    impure = true;
    prims[np++] = sym_expr_const(c, int_attr(call, "peer", 0));
    break;
  case RX_OP_recv: {
    name = "rx_ccl_recv";
    impure = true;
    has_x = false;
    const rx_sinfo *s = call->sinfo;
    if (!s || s->kind != RX_SINFO_TENSOR || !s->shape || s->ndim > IR_COLLECTIVE_MAX_NDIM) {
      base_diag_report(diag, RX_DIAG_ERROR, call->loc, "recv needs a known shape of rank <= %d",
                       IR_COLLECTIVE_MAX_NDIM);
      return NULL;
    }
    prims[np++] = sym_expr_const(c, int_attr(call, "peer", 0));
    prims[np++] = sym_expr_const(c, (int64_t)s->dtype);
    for (int d = 0; d < s->ndim; d++) prims[np++] = s->shape[d];
    break;
  }
  default:
    return NULL;
  }
  rx_extern_fn *e = declare(m, name, has_x, np, impure, diag);
  if (!e) return NULL;
  rx_node *n = ir_node_new(m, RX_NODE_CALL_EXTERN, call->loc);
  n->callee = e->name;
  n->ext = e;
  n->out = call->sinfo;
  n->args = ir_module_alloc(m, sizeof *n->args * (size_t)(np + 1));
  if (has_x) n->args[n->nargs++] = call->args[0];
  for (int i = 0; i < np; i++)
    n->args[n->nargs++] = ir_node_int(m, RX_DTYPE_I64, prims[i], call->loc);
  return n;
}
