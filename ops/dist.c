/* ops/dist.c: distributed tensors (issue 35). Two things, both forward deduction:
 *
 * 1. Placements through ops (the global view): ops_dist_place gives the result of an op call
 *    the placement (ir.h, rx_sinfo.mesh / place) that follows from its operands', by the rules
 *    of Relax's DTensor propagation and Megatron's tensor parallelism: elementwise ops keep a
 *    placement, a matmul sharded along its contracted dim leaves partial sums (P), one sharded
 *    along rows of A or columns of B keeps that, permute moves a sharded dim, normalizations and
 *    softmax keep a placement that does not shard their reduced axes. Where a rule needs an
 *    operand whole (partial sums into anything but add/subtract, a sharded dim that an op
 *    reduces, any sharded operand of an op without a rule), it is taken as replicated and
 *    passes/shard.c inserts the allreduce or allgather there (ops_dist_rule says where). Operands
 *    that cannot be reconciled (a matmul of S[0] x S[1], operands sharding different dims, two
 *    meshes) are an error naming the op, the argument and the mesh axis. An unplaced operand
 *    among placed ones counts as replicated.
 * 2. The collective ops of ops/ops.def (allreduce, allgather, reduce_scatter, broadcast, send,
 *    recv) on the local view (what one rank holds, after passes/shard.c): their shapes.
 *    passes/legalize_dist.c turns them into the call_extern builtins of the runtime
 *    (runtime/ccl, the rx_ccl_* table of docs/distributed.md). */
#include "deduce.h"

#include <stdlib.h>
#include <string.h>

/* The placement of operand i on mesh axis k (R for an unplaced tensor). */
static int place_of(const rx_sinfo *a, int k) {
  return a && a->kind == RX_SINFO_TENSOR && a->mesh && k < a->nplace ? a->place[k] : IR_PLACE_R;
}

static const char *place_str(rx_deduce_ctx *dc, int p) {
  if (p == IR_PLACE_R) return "R";
  if (p == IR_PLACE_P) return "P";
  return base_arena_printf(&dc->mod->arena, "S[%d]", p);
}

static bool is_tensor(const rx_sinfo *s) { return s && s->kind == RX_SINFO_TENSOR; }

/* Each rule below takes need[i], operand i's placement on mesh axis k, and may lower it to R
 * where the op needs the whole value (the lowering then inserts allreduce for P, allgather for
 * S[d]: passes/shard.c); it sets *out to the result's placement, or reports and returns false. */

/* P and S[d] operands the rule cannot use whole: made replicated. */
static void need_whole(int *need, int i) { need[i] = IR_PLACE_R; }

/* Elementwise and broadcasting ops: operand dims align from the right. */
static bool rule_broadcast(rx_deduce_ctx *dc, const rx_node *n, const rx_sinfo *r, int k, int *need,
                           int *out) {
  bool linear = n->op->id == RX_OP_add || n->op->id == RX_OP_subtract;
  int nparts = 0, ntensors = 0, res = IR_PLACE_R;
  for (int i = 0; i < n->nargs; i++)
    if (is_tensor(n->args[i]->sinfo)) {
      ntensors++;
      nparts += need[i] == IR_PLACE_P;
    }
  if (nparts && linear && nparts == ntensors) {
    *out = IR_PLACE_P;
    return true;
  }
  for (int i = 0; i < n->nargs; i++)
    if (need[i] == IR_PLACE_P) need_whole(need, i); /* allreduce first */
  for (int i = 0; i < n->nargs; i++) {
    const rx_sinfo *a = n->args[i]->sinfo;
    if (!is_tensor(a) || need[i] < 0) continue;
    int d = need[i] + (r->ndim - a->ndim);
    if (res >= 0 && res != d) {
      ops_deduce_error(dc,
                       "%s: argument %d is S[%d] on mesh axis %d, another argument shards "
                       "result dim %d: place them alike",
                       n->op->name, i, need[i], k, res);
      return false;
    }
    res = d;
  }
  /* every operand that is R along a sharded result dim must broadcast there (size 1 or absent) */
  for (int i = 0; res >= 0 && i < n->nargs; i++) {
    const rx_sinfo *a = n->args[i]->sinfo;
    if (!is_tensor(a) || need[i] != IR_PLACE_R) continue;
    int d = res - (r->ndim - a->ndim);
    if (d < 0 || !a->shape || rx_expr_is_const(a->shape[d], 1)) continue;
    ops_deduce_error(dc,
                     "%s: argument %d is R on mesh axis %d, but another argument shards "
                     "dim %d there: place them alike",
                     n->op->name, i, k, res);
    return false;
  }
  *out = res;
  return true;
}

/* matmul(a [..., m, q], b [..., q, c]) (2-D and more; 1-D operands replicated only). */
static bool rule_matmul(rx_deduce_ctx *dc, const rx_node *n, const rx_sinfo *r, int k, int *need,
                        int *out) {
  const rx_sinfo *a = n->args[0]->sinfo, *b = n->args[1]->sinfo;
  for (int i = 0; i < 2; i++)
    if (need[i] == IR_PLACE_P) need_whole(need, i);
  int pa = need[0], pb = need[1];
  int ra = r->ndim - a->ndim, rb = r->ndim - b->ndim;
  if (pa == IR_PLACE_R && pb == IR_PLACE_R)
    *out = IR_PLACE_R;
  else if (a->ndim < 2 || b->ndim < 2)
    goto bad;
  else if (pa == a->ndim - 1 && pb == b->ndim - 2) /* contracted dim: partial sums */
    *out = IR_PLACE_P;
  else if (pa == a->ndim - 2 && pb == IR_PLACE_R) /* rows of A */
    *out = r->ndim - 2;
  else if (pa == IR_PLACE_R && pb == b->ndim - 1) /* columns of B (column parallel) */
    *out = r->ndim - 1;
  else if (pa >= 0 && pa < a->ndim - 2 && (pb == pa + ra - rb || pb == IR_PLACE_R))
    *out = pa + ra; /* a batch dim, alike in both or broadcast in b */
  else if (pb >= 0 && pb < b->ndim - 2 && pa == IR_PLACE_R)
    *out = pb + rb;
  else
    goto bad;
  return true;
bad:
  ops_deduce_error(dc,
                   "matmul: no sharding rule for %s x %s on mesh axis %d (rules: S[-1] x "
                   "S[-2] -> P, S[-2] x R -> S[-2], R x S[-1] -> S[-1], batch dims alike)",
                   place_str(dc, pa), place_str(dc, pb), k);
  return false;
}

/* An op over operand 0 whose reduced axes (attribute `axes`, or `axis`, default -1) must be
 * whole; its other operands (a norm's weights) replicated. */
static bool rule_reduced(rx_deduce_ctx *dc, const rx_node *n, int k, int *need, int *out) {
  const rx_sinfo *x = n->args[0]->sinfo;
  (void)k;
  for (int i = 0; i < n->nargs; i++)
    if (need[i] == IR_PLACE_P || (i > 0 && need[i] >= 0)) need_whole(need, i);
  if (need[0] >= 0) {
    int *axes, na;
    bool present;
    const char *an = ops_call_attr(n, "axes") ? "axes" : "axis";
    if (!ops_axes_attr(dc, n, an, x->ndim, &axes, &na, &present)) return false;
    bool hit = !present && need[0] == x->ndim - 1;
    for (int i = 0; i < na; i++) hit = hit || axes[i] == need[0];
    if (hit) need_whole(need, 0); /* allgather the reduced dim */
  }
  *out = need[0];
  return true;
}

static bool rule_permute(rx_deduce_ctx *dc, const rx_node *n, int *need, int *out) {
  const rx_sinfo *x = n->args[0]->sinfo;
  *out = need[0];
  if (need[0] < 0) return true; /* R stays R, P stays P (a permutation is linear) */
  int *axes, na;
  bool present;
  if (!ops_axes_attr(dc, n, "axes", x->ndim, &axes, &na, &present)) return false;
  for (int i = 0; i < x->ndim; i++)
    if ((present ? axes[i] : x->ndim - 1 - i) == need[0]) *out = i;
  return true;
}

bool ops_dist_rule(rx_deduce_ctx *dc, const rx_node *n, const rx_sinfo *r, int k, int *need,
                   int *out) {
  for (int i = 0; i < n->nargs; i++) need[i] = place_of(n->args[i]->sinfo, k);
  switch (n->op->id) {
  case RX_OP_matmul:
    return rule_matmul(dc, n, r, k, need, out);
  case RX_OP_permute:
  case RX_OP_transpose:
    return rule_permute(dc, n, need, out);
  case RX_OP_rms_norm:
  case RX_OP_layer_norm:
  case RX_OP_softmax:
  case RX_OP_log_softmax:
    return rule_reduced(dc, n, k, need, out);
  default:
    break;
  }
  if (n->op->pattern == RX_PATTERN_ELEMWISE || n->op->pattern == RX_PATTERN_BROADCAST)
    return rule_broadcast(dc, n, r, k, need, out);
  for (int i = 0; i < n->nargs; i++) need_whole(need, i); /* no rule: whole operands */
  *out = IR_PLACE_R;
  return true;
}

const rx_sinfo *ops_dist_place(rx_deduce_ctx *dc, const rx_node *n, const rx_sinfo *r) {
  const char *mesh = NULL;
  int nplace = 0;
  for (int i = 0; i < n->nargs; i++) {
    const rx_sinfo *a = n->args[i]->sinfo;
    if (!is_tensor(a) || !a->mesh) continue;
    if (mesh && a->mesh != mesh) {
      ops_deduce_error(dc, "%s: argument %d is on mesh '%s', another on mesh '%s'", n->op->name, i,
                       a->mesh, mesh);
      return NULL;
    }
    if (mesh && a->nplace != nplace) {
      ops_deduce_error(dc, "%s: argument %d has %d placements on mesh '%s', another %d",
                       n->op->name, i, a->nplace, mesh, nplace);
      return NULL;
    }
    for (int k = 0; k < a->nplace; k++)
      if (a->place[k] >= 0 && (a->ndim < 0 || a->place[k] >= a->ndim)) {
        ops_deduce_error(dc, "%s: argument %d is S[%d] on mesh axis %d, but has %s %d", n->op->name,
                         i, a->place[k], k, a->ndim < 0 ? "an unknown rank, not" : "rank", a->ndim);
        return NULL;
      }
    mesh = a->mesh;
    nplace = a->nplace;
  }
  if (!mesh) return r;
  if (!is_tensor(r) || r->ndim < 0) {
    ops_deduce_error(dc, "%s: a distributed operand needs a tensor result of known rank, got %s",
                     n->op->name, ops_str(dc, r));
    return NULL;
  }
  int place[IR_MESH_MAX_NDIM];
  int *need = base_calloc((size_t)n->nargs + 1, sizeof *need);
  bool ok = true;
  for (int k = 0; k < nplace && ok; k++) ok = ops_dist_rule(dc, n, r, k, need, &place[k]);
  free(need);
  return ok ? ir_sinfo_placed(dc->mod, r, mesh, place, nplace) : NULL;
}

/* ---- collectives (local view) ---- */

bool ops_op_is_collective(const rx_op *op) {
  if (!op) return false;
  switch (op->id) {
  case RX_OP_allreduce:
  case RX_OP_allgather:
  case RX_OP_reduce_scatter:
  case RX_OP_broadcast:
  case RX_OP_send:
  case RX_OP_recv:
    return true;
  default:
    return false;
  }
}

static const rx_sinfo *local_arg(rx_deduce_ctx *dc, const rx_node *call) {
  const rx_sinfo *x = ops_tensor_arg(dc, call, 0, "x");
  if (!x) return NULL;
  if (x->mesh) {
    ops_deduce_error(dc,
                     "%s works on a rank's local tensor, got the distributed %s (lower the "
                     "module to ranks first: passes/shard.c)",
                     call->op->name, ops_str(dc, x));
    return NULL;
  }
  return x;
}

static bool reduce_op_ok(rx_deduce_ctx *dc, const rx_node *call) {
  const rx_attr *a = ops_call_attr(call, "op");
  if (!a || !strcmp(a->s, "sum") || !strcmp(a->s, "max")) return true;
  ops_deduce_error(dc, "%s: op must be \"sum\" or \"max\", got \"%s\"", call->op->name, a->s);
  return false;
}

/* allreduce(x, op="sum"), broadcast(x, root=0), send(x, peer=p): x's shape. */
const rx_sinfo *ops_deduce_collective_same(rx_deduce_ctx *dc, const rx_node *call) {
  const rx_sinfo *x = local_arg(dc, call);
  if (!x || !reduce_op_ok(dc, call)) return NULL;
  return ops_tensor(dc, x->dtype, x->ndim, x->shape ? (const rx_expr **)x->shape : NULL);
}

/* allgather(x, axis=a, world=w): dim a times w; reduce_scatter(x, axis, world, op): divided. */
const rx_sinfo *ops_deduce_collective_axis(rx_deduce_ctx *dc, const rx_node *call) {
  const rx_sinfo *x = local_arg(dc, call);
  if (!x || !reduce_op_ok(dc, call)) return NULL;
  int64_t world = ops_int_attr(call, "world", 0);
  if (world < 1) {
    ops_deduce_error(dc, "%s: world must be at least 1, got %lld", call->op->name,
                     (long long)world);
    return NULL;
  }
  if (x->ndim < 0) return ops_tensor(dc, x->dtype, -1, NULL);
  int axis;
  if (!ops_norm_axis(dc, ops_int_attr(call, "axis", 0), x->ndim, &axis)) return NULL;
  if (!x->shape) return ops_tensor(dc, x->dtype, x->ndim, NULL);
  const rx_expr **dims = ops_dims(dc, x->ndim);
  memcpy(dims, x->shape, sizeof *dims * (size_t)x->ndim);
  rx_expr_ctx *c = ops_ctx(dc);
  const rx_expr *w = sym_expr_const(c, world);
  if (call->op->id == RX_OP_allgather) {
    dims[axis] = ops_simplify(dc, sym_expr_mul(c, x->shape[axis], w));
  } else {
    const rx_expr *ok =
        sym_expr_cmp(c, RX_EXPR_EQ, sym_expr_floormod(c, x->shape[axis], w), sym_expr_const(c, 0));
    if (ops_prove(dc, ok) != RX_TRUE) {
      ops_deduce_error(dc,
                       "reduce_scatter: dim %d (%s) of %s cannot be proven divisible by the "
                       "world size %lld",
                       axis, ops_expr_str(dc, x->shape[axis]), ops_str(dc, x), (long long)world);
      return NULL;
    }
    dims[axis] = ops_simplify(dc, sym_expr_floordiv(c, x->shape[axis], w));
  }
  return ops_tensor(dc, x->dtype, x->ndim, dims);
}

/* recv(shape, peer=p, dtype=f32): a new tensor of that shape. */
const rx_sinfo *ops_deduce_recv(rx_deduce_ctx *dc, const rx_node *call) {
  const rx_sinfo *s = call->args[0]->sinfo;
  if (s->kind != RX_SINFO_SHAPE || !s->shape) {
    ops_deduce_error(dc, "recv expects a shape as argument 1 (e.g. [n, 4]), got %s",
                     ops_str(dc, s));
    return NULL;
  }
  const rx_attr *dt = ops_call_attr(call, "dtype");
  return ops_tensor(dc, dt ? dt->dtype : RX_DTYPE_F32, s->ndim, (const rx_expr **)s->shape);
}
