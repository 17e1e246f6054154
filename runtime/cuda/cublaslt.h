/* runtime/cuda/cublaslt.h: the builtin of cuBLASLt dispatch (runtime/cuda/cublaslt.c), for the
 * builtins' table (runtime/externs.c). */
#ifndef RX_RUNTIME_CUBLASLT_H
#define RX_RUNTIME_CUBLASLT_H

#include "runtime/vm.h"

/* rx_cublaslt_matmul(a, b, trans_b) -> a @ b (b^T when trans_b is 1), on the device's stream
 * (a returning vm_extern_fn). */
rx_status rt_cublaslt_builtin_matmul(const vm_extern_call *c, rx_rt_value *const *args,
                                     size_t nargs, rx_rt_value **result);

#endif
