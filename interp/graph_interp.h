/* graph_interp: a CPU evaluator of graph functions, the reference executor of graph-level
 * tests (fusion now, the VM later).
 *
 *   rx_ginterp_value in = interp_graph_tensor(RX_DTYPE_F32, 2, (int64_t[]){n, 64}, data);
 *   rx_ginterp_value out;
 *   rx_status s = interp_graph_run(m, ir_module_graph_fn(m, "main"), &in, 1, &out);
 *   ... out.data ...
 *   interp_graph_value_free(&out);
 *
 * Semantics. Symbolic variables are bound from the parameters (the first whole dimension, or
 * whole Prim value, of each variable binds it); then every parameter's struct info and every
 * `where` fact is checked: a mismatch is an error naming the function, the parameter, the
 * expected struct info (with the bound values) and the actual value. Bindings run in order:
 * call_tensor allocates its outputs from `out=` evaluated under the bound symbolic values and
 * runs the tensor program with interp_run; tuples, get_item, prim and shape values, shape
 * literals, tensor constants, match_cast (checked; binds its new variables), if (a Prim(bool) or
 * bool[] condition) and calls of other graph functions. Op calls are not run (an error: "op X
 * must be legalized first"), nor are call_extern calls, but for the library matmul of
 * passes/dispatch.c (RX_DISPATCH_CUBLASLT_MATMUL), computed here on the host.
 *
 * Values own their memory: inputs are only read; *out_result belongs to the caller (free it
 * with interp_graph_value_free). Tensor data is row-major in the dtype's storage as for
 * interp_run (f32 as float, f16/bf16 as uint16_t bits, bool as uint8_t). */
#ifndef RX_GRAPH_INTERP_H
#define RX_GRAPH_INTERP_H

#include "../ir/ir.h"
#include "interp.h"

typedef enum rx_gv_kind {
  RX_GV_NONE,   /* no value (zeroed) */
  RX_GV_TENSOR, /* dtype, ndim, shape, data */
  RX_GV_TUPLE,  /* fields[nfields] */
  RX_GV_PRIM,   /* dtype; integers and bool in i, floats in f */
  RX_GV_SHAPE,  /* ndim, shape */
} rx_gv_kind;

typedef struct rx_ginterp_value rx_ginterp_value;
struct rx_ginterp_value {
  rx_gv_kind kind;
  rx_dtype dtype;
  int ndim;
  int64_t shape[RX_MAX_NDIM];
  void *data; /* TENSOR: heap memory (owned), or borrowed for inputs */
  rx_ginterp_value *fields;
  int nfields;
  int64_t i;
  double f;
};

/* A tensor value that borrows data (for inputs). */
rx_ginterp_value interp_graph_tensor(rx_dtype dtype, int ndim, const int64_t *shape, void *data);
/* Bytes per element of a dtype's storage. */
size_t interp_graph_elem_size(rx_dtype dt);
/* Number of elements of a tensor value. */
int64_t interp_graph_numel(const rx_ginterp_value *v);
/* Frees what a value returned by interp_graph_run owns, and zeroes it. */
void interp_graph_value_free(rx_ginterp_value *v);

/* Runs graph function f of module m (normalized) on inputs[n] (one per parameter). On success
 * *out_result holds the returned value; on error it is zeroed and the status names the place. */
rx_status interp_graph_run(rx_module *m, const rx_graph_fn *f, const rx_ginterp_value *inputs,
                           int n, rx_ginterp_value *out_result);

/* interp_graph_run, where a call_extern other than the library matmul calls hook(hook_arg, its
 * name, its evaluated arguments, out) (out owned by the caller after success): how a test gives
 * the interpreter the runtime's builtins, e.g. the collectives of a tensor-parallel program
 * computed across ranks (tests/unit/test_shard.c). */
typedef rx_status (*interp_graph_extern_fn)(void *hook_arg, const char *name,
                                            const rx_ginterp_value *args, int nargs,
                                            rx_ginterp_value *out);
rx_status interp_graph_run_ext(rx_module *m, const rx_graph_fn *f, const rx_ginterp_value *inputs,
                               int n, interp_graph_extern_fn hook, void *hook_arg,
                               rx_ginterp_value *out_result);

#endif
