/* ops/legalize.h: legalization of high-level op calls to tensor programs (ops/legalize*.c),
 * and the window arithmetic conv2d and pooling share between deduction and legalization.
 * Internal to ops/ and passes/legalize.c. */
#ifndef RX_OPS_LEGALIZE_H
#define RX_OPS_LEGALIZE_H

#include "ops.h"

/* Builds a tensor program named `name` (made unique in m when taken: name_1, name_2, ...) that
 * computes the op call `call` for the struct info of its arguments (call->sinfo and every
 * argument's sinfo must be deduced: run ops_module_normalize first) and adds it to m's items.
 *
 * Parameters, in order: one input buffer per tensor argument, with exactly the argument's
 * struct info (the same rx_expr variables); a tuple argument (concat) gives one buffer per field;
 * a Prim argument with a known value (a literal, prim(n + 1)) is folded into the program and
 * gets no parameter; a Prim argument of unknown value is a 0-d input buffer. Then the outputs
 * (`out`), one per field of the call's result (split: several). Then one i64 scalar parameter per
 * symbolic variable the program uses that no buffer parameter defines as a whole dim (input
 * f32[n * 4] gives the scalar parameter n): the caller passes those variables, in parameter
 * order, as call_tensor(..., dims=[...]).
 *
 * The loop forms are the canonical ones of tests/kernels (elementwise nests, rows with reduce
 * stages and `local` scalars, matmul reductions with f32 accumulation for f16).
 * Returns NULL after reporting an error at the call (unknown rank or shape, unknown dtype). */
rx_tensor_fn *ops_legalize_call(rx_module *m, const rx_node *call, const char *name, rx_diag *diag);
/* ops_legalize_call with the place of the call for the messages of its run-time checks of values
 * from data (site: "main: binding `y` (take)"; ir.h, RX_INTRIN_CHECK); *out_site_used tells
 * whether the program names it (then it serves only that call). */
rx_tensor_fn *ops_legalize_call_at(rx_module *m, const rx_node *call, const char *name,
                                   const char *site, rx_diag *diag, bool *out_site_used);

/* The tensor arguments that ops_legalize_call made input buffers, in parameter order: tuple
 * fields and Prim arguments of unknown value included, folded Prim literals left out. Each entry
 * is the argument node itself, or for a field of a tuple-typed variable, a GET_ITEM node built in
 * m. Returns the count written to out (at most max). */
int ops_legalize_args(rx_module *m, const rx_node *call, rx_node **out, int max);

/* Whether ops.def gives op a generator (every op but the host-level ones, NOT_LEGALIZED). */
bool ops_legalize_has_generator(const rx_op *op);

/* The argument an op writes in place (kv_append: 0, the pages), or -1. Its program takes that
 * argument as its output parameter and not as an input (ops_legalize_args leaves it out): the
 * call must be an in-place call_tensor whose destination is that argument, so that what the
 * program does not write keeps its value (ops/attention.c). */
int ops_legalize_inplace_arg(const rx_op *op);

/* ---- conv2d and pooling windows (ops/nn.c) ---- */
typedef struct rx_nn_win {
  int64_t kh, kw;         /* pooling kernel (conv2d: from the weight) */
  int64_t sh, sw;         /* strides */
  int64_t pt, pl, pb, pr; /* padding: top, left, bottom, right */
  int64_t dh, dw;         /* dilation */
  int64_t groups;         /* conv2d */
  bool include_pad;       /* avg_pool2d count_include_pad */
  bool nhwc;              /* conv2d data_layout="NHWC": x [N, H, W, C], weight HWIO
                             [KH, KW, C / groups, O], y [N, OH, OW, O]; else NCHW and OIHW */
} rx_nn_win;

/* The axes of conv2d's operands in a layout: x's (and y's) channel, height and width; the
 * weight's output channel, input channel, kernel height and width. */
typedef struct rx_nn_axes {
  int xc, xh, xw;
  int wo, wi, wh, ww;
} rx_nn_axes;
rx_nn_axes ops_nn_conv_axes(bool nhwc);

#endif
