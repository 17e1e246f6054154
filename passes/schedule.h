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
 * several sizes per symbolic dimension.
 *
 * VECTORIZED LOOPS: the contract between the rules and the printers (codegen/cprinter.c).
 * `for v in 0..L vectorize { body }` means the lanes v = 0..L-1 in order (the interpreter runs
 * it as a serial loop); L is a constant power of two, 2 <= L <= 16; the body holds no barrier,
 * thread loop, subgroup reduction or other vectorized loop. In it, an access to a KERNEL BUFFER
 * (a parameter of the program: global memory; shared and local arrays stay scalar) is printed
 * as vector loads or stores of L lanes, on every target, when all of these hold:
 *   - unconditional: a LOAD in a LET or STORE that sits directly in the body (through SEQs),
 *     not inside an IF, FOR or REDUCE nested in the body, nor in an arm of `select`, nor in the
 *     right operand of && or ||; or such a STORE;
 *   - contiguous: its flattened row-major offset is `base + v` with base free of v (the
 *     innermost index ends in `+ v`, every other index is free of v);
 *   - aligned: the analyzer proves base % (C / S) == 0, where S = the dtype's bytes and
 *     C = min(16, L * S) the bytes of one vector access, under the program's facts and the
 *     ranges of the enclosing loops (e.g. base = row * 4096 + tx * 8 with L = 8 f16); an
 *     index that is an integer local defined outside the body (a page id loaded before the
 *     loop) counts as an unknown integer, so page * 128 + tx * 8 is proven too;
 *   - L * S >= 4, and the dtype is f32, i32, f16 or bf16 (L * S = 32, e.g. 8 f32 lanes, is two
 *     16-byte accesses);
 *   - no hazard: a buffer stored in the body is stored by that one statement and not loaded in
 *     the body (otherwise every access to it in the loop stays scalar).
 * Each vectorized load is read before lane 0 runs (C-byte loads, unpacked into a lane array
 * that stays in registers); each vectorized store is written after lane L-1 (lanes packed, one
 * C-byte store each); the lanes compute per lane in registers in between; loads of one buffer
 * at one base share one vector load. Any other access in the body is printed as is in the
 * loop, which is unrolled (`#pragma unroll`, GLSL `[[unroll]]`): never wrong, only slower. So
 * a rule that wants 128-bit loads of f16 emits 8 lanes, makes the innermost index
 * `base + v` with base a multiple of 8, and lets the analyzer see why (constant row widths, or
 * facts such as `n % 8 == 0`). Buffers start 16-byte aligned (docs/kernel-abi.md, "Alignment").
 * Example (a decode GEMV row: 8 f16 of w and x per lane step, the accumulator a local):
 *   for v in 0..8 vectorize { acc[0] = acc[0] + f32(w[r, k * 8 + v]) * f32(x[0, k * 8 + v]) }
 * prints one 16-byte load of w and one of x, then 8 multiply-adds in registers. */
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
const char *sched_rule_name(rx_sched_rule r);

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
bool sched_schedule(rx_module *m, const rx_tensor_fn *f, const rx_target *t, rx_diag *diag,
                    rx_sched_result *out);

/* sched_schedule_module, the pass over every program, is declared in passes/passes.h. */

/* Checks that a program has the scheduled shape described above (used by codegen). */
bool sched_schedule_check(const rx_tensor_fn *f, const rx_target *t, rx_diag *diag);

#endif
