/* ops/dist.c: distributed tensors (issue 35). Two things, both forward deduction:
 *
 * 1. Placements through ops (the global view): ops_dist_place gives the result of an op call
 *    the placement (ir.h, rx_sinfo.mesh / place) that follows from its operands', by the rules
 *    of Relax's DTensor propagation and Megatron's tensor parallelism: elementwise ops keep a
 *    placement, a matmul sharded along its contracted dim leaves partial sums (P), one sharded
 *    along rows of A or columns of B keeps that, permute moves a sharded dim, normalizations and
 *    softmax keep a placement that does not shard their reduced axes. An op without a rule
 *    accepts replicated operands only. A mismatch is an error naming the op, the argument and
 *    the mesh axis. An unplaced operand among placed ones counts as replicated.
 * 2. The collective ops of ops/ops.def (allreduce, allgather, reduce_scatter, broadcast, send,
 *    recv) on the local view (what one rank holds, after passes/shard.c): their shapes.
 *    passes/legalize_dist.c turns them into the call_extern builtins of the runtime
 *    (runtime/ccl, the rx_ccl_* table of docs/distributed.md). */
#include "deduce.h"

#include <string.h>

/* The placement of operand i on mesh axis k (R for an unplaced tensor). */
static int place_of(const rx_sinfo *a, int k) {
  return a && a->kind == RX_SINFO_TENSOR && a->mesh ? a->place[k] : IR_PLACE_R;
}

static const char *place_str(rx_deduce_ctx *dc, int p) {
  if (p == IR_PLACE_R) return "R";
  if (p == IR_PLACE_P) return "P";
  return base_arena_printf(&dc->mod->arena, "S[%d]", p);
}

static bool is_tensor(const rx_sinfo *s) { return s && s->kind == RX_SINFO_TENSOR; }

/* Elementwise and broadcasting ops: operand dims align from the right. */
static bool place_broadcast(rx_deduce_ctx *dc, const rx_node *n, const rx_sinfo *r, int k,
                            int *out) {
  bool linear = n->op->id == RX_OP_add || n->op->id == RX_OP_subtract;
  int res = IR_PLACE_R, nparts = 0, ntensors = 0;
  for (int i = 0; i < n->nargs; i++) {
    const rx_sinfo *a = n->args[i]->sinfo;
    if (!is_tensor(a)) continue;
    ntensors++;
    int p = place_of(a, k);
    if (p == IR_PLACE_P) {
      nparts++;
      continue;
    }
    if (p < 0) continue;
    int d = p + (r->ndim - a->ndim);
    if (res >= 0 && res != d) {
      ops_deduce_error(dc,
                       "%s: argument %d is S[%d] on mesh axis %d, another argument shards "
                       "result dim %d: place them alike",
                       n->op->name, i, p, k, res);
      return false;
    }
    res = d;
  }
  if (nparts && (!linear || nparts != ntensors || res >= 0)) {
    ops_deduce_error(dc,
                     "%s: an argument holds partial sums (P) on mesh axis %d; only add and "
                     "subtract of partial sums alone stay partial: allreduce it first",
                     n->op->name, k);
    return false;
  }
  if (nparts) res = IR_PLACE_P;
  /* every operand that is R along a sharded result dim must broadcast there (size 1 or absent) */
  for (int i = 0; res >= 0 && i < n->nargs; i++) {
    const rx_sinfo *a = n->args[i]->sinfo;
    if (!is_tensor(a) || place_of(a, k) != IR_PLACE_R) continue;
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
static bool place_matmul(rx_deduce_ctx *dc, const rx_node *n, const rx_sinfo *r, int k, int *out) {
  const rx_sinfo *a = n->args[0]->sinfo, *b = n->args[1]->sinfo;
  int pa = place_of(a, k), pb = place_of(b, k);
  if (pa == IR_PLACE_R && pb == IR_PLACE_R) {
    *out = IR_PLACE_R;
    return true;
  }
  if (a->ndim < 2 || b->ndim < 2 || pa == IR_PLACE_P || pb == IR_PLACE_P) goto bad;
  int ra = r->ndim - a->ndim, rb = r->ndim - b->ndim;
  if (pa == a->ndim - 1 && pb == b->ndim - 2) { /* contracted dim: partial sums */
    *out = IR_PLACE_P;
    return true;
  }
  if (pa == a->ndim - 2 && pb == IR_PLACE_R) { /* rows of A */
    *out = r->ndim - 2;
    return true;
  }
  if (pa == IR_PLACE_R && pb == b->ndim - 1) { /* columns of B (column parallel) */
    *out = r->ndim - 1;
    return true;
  }
  /* a batch dim: sharded alike in both, or in one where the other broadcasts */
  if (pa >= 0 && pa < a->ndim - 2 && (pb == pa + ra - rb || pb == IR_PLACE_R)) {
    *out = pa + ra;
    return true;
  }
  if (pb >= 0 && pb < b->ndim - 2 && pa == IR_PLACE_R) {
    *out = pb + rb;
    return true;
  }
bad:
  ops_deduce_error(dc,
                   "matmul: no sharding rule for %s x %s on mesh axis %d (rules: S[-1] x "
                   "S[-2] -> P, S[-2] x R -> S[-2], R x S[-1] -> S[-1], batch dims alike)",
                   place_str(dc, pa), place_str(dc, pb), k);
  return false;
}

/* An op whose reduced axes (attribute `axes`, or `axis`, default -1) must not be sharded. */
static bool place_reduced(rx_deduce_ctx *dc, const rx_node *n, const rx_sinfo *r, int k, int *out) {
  const rx_sinfo *x = n->args[0]->sinfo;
  int p = place_of(x, k);
  for (int i = 1; i < n->nargs; i++)
    if (place_of(n->args[i]->sinfo, k) != IR_PLACE_R) {
      ops_deduce_error(dc, "%s: argument %d must be replicated on mesh axis %d, not %s",
                       n->op->name, i, k, place_str(dc, place_of(n->args[i]->sinfo, k)));
      return false;
    }
  if (p == IR_PLACE_P) {
    ops_deduce_error(dc,
                     "%s: its input holds partial sums (P) on mesh axis %d: allreduce it "
                     "first",
                     n->op->name, k);
    return false;
  }
  if (p >= 0) {
    int *axes, na;
    bool present;
    const char *an = ops_call_attr(n, "axes") ? "axes" : "axis";
    if (!ops_axes_attr(dc, n, an, x->ndim, &axes, &na, &present)) return false;
    bool hit = present ? false : p == x->ndim - 1;
    for (int i = 0; i < na; i++) hit = hit || axes[i] == p;
    if (hit) {
      ops_deduce_error(dc,
                       "%s reduces dim %d, which is sharded (S[%d]) on mesh axis %d: "
                       "allgather it first",
                       n->op->name, p, p, k);
      return false;
    }
  }
  (void)r;
  *out = p;
  return true;
}

static bool place_permute(rx_deduce_ctx *dc, const rx_node *n, int k, int *out) {
  const rx_sinfo *x = n->args[0]->sinfo;
  int p = place_of(x, k);
  *out = p;
  if (p < 0) return true;
  int *axes, na;
  bool present;
  if (!ops_axes_attr(dc, n, "axes", x->ndim, &axes, &na, &present)) return false;
  for (int i = 0; i < x->ndim; i++)
    if ((present ? axes[i] : x->ndim - 1 - i) == p) *out = i;
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
  for (int k = 0; k < nplace; k++) {
    bool ok;
    if (n->op->id == RX_OP_matmul)
      ok = place_matmul(dc, n, r, k, &place[k]);
    else if (n->op->id == RX_OP_permute || n->op->id == RX_OP_transpose)
      ok = place_permute(dc, n, k, &place[k]);
    else if (n->op->id == RX_OP_rms_norm || n->op->id == RX_OP_layer_norm ||
             n->op->id == RX_OP_softmax || n->op->id == RX_OP_log_softmax)
      ok = place_reduced(dc, n, r, k, &place[k]);
    else if (n->op->pattern == RX_PATTERN_ELEMWISE || n->op->pattern == RX_PATTERN_BROADCAST)
      ok = place_broadcast(dc, n, r, k, &place[k]);
    else {
      for (int i = 0; i < n->nargs; i++)
        if (place_of(n->args[i]->sinfo, k) != IR_PLACE_R) {
          ops_deduce_error(dc,
                           "%s has no sharding rule: its operands must be replicated, but "
                           "argument %d is %s on mesh axis %d of '%s'",
                           n->op->name, i, place_str(dc, place_of(n->args[i]->sinfo, k)), k, mesh);
          return NULL;
        }
      place[k] = IR_PLACE_R;
      ok = true;
    }
    if (!ok) return NULL;
  }
  return ir_sinfo_placed(dc->mod, r, mesh, place, nplace);
}

/* ---- collectives (local view) ---- */

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
