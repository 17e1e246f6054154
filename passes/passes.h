/* passes: graph-level and loop-level passes, one file each, one entry point each. Each takes
 * the module (normalized), transforms it in place, reports problems to diag and returns false
 * on an error. The module stays valid: rx_module_normalize and rx_module_verify succeed after
 * each pass. Internal header. */
#ifndef RX_PASSES_H
#define RX_PASSES_H

#include "../ir/ir.h"

/* passes/fold.c: constant folding of Prim arithmetic and shape expressions: Prim and Shape
 * values re-simplified under the function's facts, struct info of bindings re-simplified,
 * call_tensor out= and dims= simplified under the facts, Prim/Shape variables whose values are
 * known replaced by literals at their uses. */
bool rx_pass_fold(rx_module *m, rx_diag *diag);

/* passes/cse.c: common subexpression elimination in dataflow blocks: a pure binding identical
 * to an earlier one of the same block (same kind, op/callee, attrs, arguments by variable
 * identity, out struct info, dims) is replaced by a use of the earlier variable. */
bool rx_pass_cse(rx_module *m, rx_diag *diag);

/* passes/dce.c: dead code elimination to a fixpoint: unused pure bindings (everything but
 * call_extern of impure externs and calls of graph functions that may have such calls), then
 * tensor programs called nowhere and primitive graph functions called nowhere. */
bool rx_pass_dce(rx_module *m, rx_diag *diag);

/* passes/annotate.c: the fusion pattern of every tensor program from its loop body
 * (rx_tensor_fn.pattern). */
bool rx_pass_annotate(rx_module *m, rx_diag *diag);
const char *rx_pattern_name(rx_pattern p);

/* passes/fuse_ops.c: groups call_tensor bindings of dataflow blocks by pattern and outlines each
 * group of two or more into a primitive graph function (rx_graph_fn.primitive) called in its
 * place. Runs rx_pass_annotate first. */
bool rx_pass_fuse_ops(rx_module *m, rx_diag *diag);

/* passes/fuse_tensor.c: each call of a primitive graph function becomes one call_tensor of one
 * tensor program built from the group's programs; the primitive functions are removed. */
bool rx_pass_fuse_tensor(rx_module *m, rx_diag *diag);

#endif
