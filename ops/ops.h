/* ops: the operator library. Each op is registered once (ops/ops.def, an X-macro list) with
 * its arguments, its attributes, its forward shape deduction, its legalization to a tensor
 * program (ops/legalize.h), its pattern kind and its batching rule. Internal header. */
#ifndef RX_OPS_H
#define RX_OPS_H

#include "../ir/ir.h"

/* Each op's pattern kind (ops.def) is an rx_pattern (ir/ir.h, shared with the loop-level
 * annotation of tensor programs), named by ir_pattern_name. */

/* What deduction sees: the module (to build struct info), the analyzer holding the function's
 * facts (and n >= 0 for every symbolic variable in scope), diagnostics and the call's place. */
typedef struct rx_deduce_ctx {
  rx_module *mod;
  rx_analyzer *an;
  rx_diag *diag;
  rx_loc loc; /* the call */
} rx_deduce_ctx;

/* Returns the struct info of the call's result, or NULL after reporting an error with
 * ops_deduce_error. Arguments already have their struct info (call->args[i]->sinfo). */
typedef const rx_sinfo *(*rx_deduce_fn)(rx_deduce_ctx *dc, const rx_node *call);

/* How passes/batch_fn.c rewrites a call of the op whose operand gained a leading batch axis
 * (ops.def's batch column, without the RX_BATCH_ prefix). */
typedef enum rx_batch_rule {
  RX_BATCH_NONE,      /* no rule: a batched operand is an error naming the op */
  RX_BATCH_BROADCAST, /* elementwise and broadcasting: batched operands expanded to the result's
                         rank + 1 first */
  RX_BATCH_MATMUL,    /* matmul: batch dims and vectors aligned with expand_dims, squeezed back */
  RX_BATCH_RESHAPE,   /* reshape to a literal shape: the batch dim put in front of it */
  RX_BATCH_AXES,      /* reductions: "axes" shift by one; none means every axis (written out) */
  RX_BATCH_AXIS,      /* "axis" / "axes" shift by one (the op's own default kept) */
  RX_BATCH_AXIS0,     /* as AXIS, "axis" defaulting to 0 (written out as 1) */
  RX_BATCH_TAKE,      /* as AXIS0, or batched indices into a shared table along axis 0 */
  RX_BATCH_PERMUTE,   /* "axes" shift by one behind a leading 0 (default: reversed, written out) */
  RX_BATCH_SQUEEZE,   /* "axes" shift by one; none: the dims provably 1 (written out) */
} rx_batch_rule;

/* The ops by id, in ops.def order: RX_OP_add, RX_OP_matmul, ... */
typedef enum rx_op_id {
#define OP(id, name, min_args, max_args, attrs, deduce, pattern, legalize, formula, batch, doc)    \
  RX_OP_##id,
#include "ops.def"
#undef OP
  RX_OP_COUNT
} rx_op_id;

struct rx_op {
  rx_op_id id; /* its row of ops.def (generator and formula: ops/legalize.c reads them) */
  const char *name;
  int min_args, max_args; /* positional (non-attribute) arguments; max_args -1: variadic */
  const rx_attr_schema *attrs;
  int nattrs;
  rx_deduce_fn deduce;
  const char *doc;     /* one line for docs/ops.md and `relaxc ops` */
  rx_pattern pattern;  /* its pattern kind (ops.def) */
  rx_batch_rule batch; /* its batching rule (ops.def; passes/batch_fn.c) */
};

/* ---- the registry (ops/registry.c) ---- */
/* The table of functions below, which every module holds (rx_module.ops: ir/ reads ops only
 * through it; rx_module_new sets it). */
extern const ir_op_registry ops_registry;
/* The op named name[0..len), or NULL when there is none. */
const rx_op *ops_op_lookup(const char *name, size_t len);
const char *ops_op_name(const rx_op *op);
/* Positional (non-attribute) arguments: at least min, at most max (-1: variadic). */
int ops_op_min_args(const rx_op *op);
int ops_op_max_args(const rx_op *op);
/* Its attributes, in positional order: ops_op_attr(op, i) for 0 <= i < ops_op_nattrs(op). */
int ops_op_nattrs(const rx_op *op);
const rx_attr_schema *ops_op_attr(const rx_op *op, int i);
/* The argument the op writes in place (kv_append: 0, the KV pages), or -1: such a call changes a
 * value and so is impure (never inside dataflow, never removed). */
int ops_op_inplace_arg(const rx_op *op);
/* The struct info of a call of the op (its arguments already carry theirs), deduced with the
 * facts of an; NULL after reporting an error to diag at loc. */
const rx_sinfo *ops_op_deduce_call(rx_module *m, rx_analyzer *an, rx_diag *diag, rx_loc loc,
                                   const rx_node *call);
/* All ops, in registration order (for documentation and tests). */
const rx_op *const *ops_op_all(int *out_count);
/* The attribute of a call by name, or NULL when absent. */
const rx_attr *ops_call_attr(const rx_node *call, const char *name);

/* A host-level op call: one the host program (the VM, the graph interpreter) executes itself
 * instead of a legalized tensor program. tensor_to_shape always (the tensor is read back to
 * the host); reshape when the input's or the result's shape is not known (a rank-only result,
 * e.g. reshape(x, t) with t: Shape(ndim=2) from tensor_to_shape): a view of the same buffer
 * with the new shape, whose element count is checked at run time. Legalization leaves these
 * calls in place. call must be normalized (struct info deduced). */
bool ops_op_is_host_call(const rx_node *call);
/* allreduce, allgather, reduce_scatter, broadcast, send, recv (ops/dist.c): legalized to the
 * runtime's rx_ccl_* builtins by passes/legalize_dist.c, not to tensor programs. */
bool ops_op_is_collective(const rx_op *op);
/* ---- distributed tensors (ops/dist.c) ---- */
/* r, the deduced result of call n, with the placement its operands' give it (ir.h,
 * rx_sinfo.mesh); r itself when no operand is distributed; NULL after an error. */
const rx_sinfo *ops_dist_place(rx_deduce_ctx *dc, const rx_node *n, const rx_sinfo *r);
/* The rule of call n (deduced global result r) on mesh axis k: need[i] (n->nargs entries) is the
 * placement operand i must have (its own, or R where the op needs it whole: a collective), *out
 * the result's. false after an error. */
bool ops_dist_rule(rx_deduce_ctx *dc, const rx_node *n, const rx_sinfo *r, int k, int *need,
                   int *out);

/* Errors and warnings from deduction, at the call's location. */
void ops_deduce_error(rx_deduce_ctx *dc, const char *fmt, ...) RX_PRINTF(2, 3);
void ops_deduce_warn(rx_deduce_ctx *dc, const char *fmt, ...) RX_PRINTF(2, 3);

#endif
