/* Shape-aware scheduling of tensor programs (issue 3). Internal header.
 *
 * A schedule turns a tensor program written as plain loops (a compute definition, as the
 * text format or legalization writes it) into a SCHEDULED program in the same IR, whose shape
 * is the contract with the interpreter (interp/interp.h) and the code generators (codegen/):
 *
 *   host level   the body is a SEQ of host statements:
 *                - a KERNEL ROOT: a FOR bound to blockIdx.x (optionally directly nesting FORs
 *                  bound to blockIdx.y, blockIdx.z; each axis at most once), lo 0, symbolic
 *                  extent = the number of blocks along that axis;
 *                - an IF whose condition is a RX_TX_SYM over the program's symbolic variables
 *                  only (a specialization: variants selected at run time), with host-level
 *                  SEQs in its branches.
 *                Nothing else at host level (no stores, lets or allocations outside kernels).
 *   kernel       inside a kernel root: any statements; FORs bound to threadIdx.{x,y,z} with
 *                lo 0 and CONSTANT extents (the block size along an axis is the largest
 *                extent bound to it; a thread loop with a smaller extent runs its body only
 *                on threads below it); `alloc ... shared` and `alloc ... local` with constant
 *                shapes; barriers; subgroup reductions (lanes are consecutive linear thread
 *                ids, x fastest, grouped by the target's subgroup size); serial, unrolled and
 *                vectorized loops.
 *
 * Every scheduled program computes exactly what the original computes, for every value of
 * its symbolic variables allowed by its facts: tests check this with the interpreter at
 * several sizes per symbolic dimension. */
#ifndef RX_SCHEDULE_H
#define RX_SCHEDULE_H

#include "../ir/ir.h"
#include "../targets/target.h"
#include "passes.h"

/* The default rules, tried in order; the first that accepts a program schedules it. */
#define RX_SCHED_RULES(X)                                                                          \
  X(ELEMENTWISE, "elementwise")     /* injective: every store at the loop nest's point */          \
  X(GEMV, "gemv")                   /* matmul whose row count is 1 */                              \
  X(GEMM, "gemm")                   /* matmul tiled in registers and shared memory */              \
  X(ROW_REDUCTION, "row_reduction") /* softmax, norms: reductions over the innermost axis */       \
  X(FALLBACK, "fallback")           /* anything else: fuse, split, bind */

typedef enum rx_sched_rule {
#define X(e, n) RX_SCHED_##e,
  RX_SCHED_RULES(X)
#undef X
      RX_SCHED_RULE_COUNT
} rx_sched_rule;
const char *rx_sched_rule_name(rx_sched_rule r);

/* One variant of a specialized program: its condition (NULL: the otherwise branch) and the
 * rule that scheduled it. */
typedef struct rx_sched_variant {
  const rx_expr *cond;
  rx_sched_rule rule;
  const char *name; /* the variant's name for messages: "gemv", "gemm_small", "gemm"... */
} rx_sched_variant;

typedef struct rx_sched_result {
  rx_tensor_fn *fn;           /* the scheduled program: same name and parameters, new body */
  rx_sched_variant *variants; /* in the order the host tests them; one when not specialized */
  int nvariants;
} rx_sched_result;

/* Schedules f for target t. The result lives in m's arena and is NOT added to m's items (the
 * original stays as it is, so the two can be compared). Returns false after reporting to diag
 * when f cannot be scheduled (e.g. a construct no rule accepts and the fallback cannot bind).
 * A program that is already scheduled (it has bound loops) is returned unchanged, validated
 * against the contract above. */
bool rx_schedule(rx_module *m, const rx_tensor_fn *f, const rx_target *t, rx_diag *diag,
                 rx_sched_result *out);

/* rx_schedule_module, the pass over every program, is declared in passes/passes.h. */

/* Checks that a program has the scheduled shape described above (used by codegen). */
bool rx_schedule_check(const rx_tensor_fn *f, const rx_target *t, rx_diag *diag);

#endif
