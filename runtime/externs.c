/* runtime/externs.c: the builtins the host program reaches through CALL_EXTERN (vm.h), listed
 * once. An artifact's `extern_fn` declarations name them; a name missing here is an error at the
 * call that names the extern and lists these. */
#include "runtime/ccl/ccl.h"
#include "runtime/cuda/cublaslt.h"
#include "runtime/llm/kv_cache.h"

#include <string.h>

/* cuBLASLt goes with the CUDA backend: a runtime built without it (RX_RT_NO_CUDA) leaves it out,
 * and an artifact that names it fails at load like any unknown extern */
#ifndef RX_RT_NO_CUDA
#define RX_BUILTINS_CUDA(X)                                                                        \
  X("rx_cublaslt_matmul", rt_cublaslt_builtin_matmul, true) /* RX_DISPATCH_CUBLASLT_MATMUL */
#else
#define RX_BUILTINS_CUDA(X)
#endif

/* X(name, function, returning) */
#define RX_BUILTINS(X)                                                                             \
  X("rx_kv_create", llm_kv_builtin_create, true)                                                   \
  X("rx_kv_extend", llm_kv_builtin_extend, true)                                                   \
  X("rx_kv_pages", llm_kv_builtin_pages, true)                                                     \
  X("rx_ccl_allreduce", rt_ccl_builtin_allreduce, true)                                            \
  X("rx_ccl_allgather", rt_ccl_builtin_allgather, true)                                            \
  X("rx_ccl_reduce_scatter", rt_ccl_builtin_reduce_scatter, true)                                  \
  X("rx_ccl_broadcast", rt_ccl_builtin_broadcast, true)                                            \
  X("rx_ccl_send", rt_ccl_builtin_send, true)                                                      \
  X("rx_ccl_recv", rt_ccl_builtin_recv, true)                                                      \
  RX_BUILTINS_CUDA(X)

static const vm_extern builtins[] = {
#define RX_BUILTIN_ENTRY_(n, f, r) {n, f, r},
    RX_BUILTINS(RX_BUILTIN_ENTRY_)
#undef RX_BUILTIN_ENTRY_
};

const vm_extern *vm_extern_find(const char *name) {
  for (size_t i = 0; i < sizeof builtins / sizeof builtins[0]; i++)
    if (!strcmp(builtins[i].name, name)) return &builtins[i];
  return NULL;
}

const char *vm_extern_names(void) {
  static const char names[] = ""
#define RX_BUILTIN_NAME_(n, f, r) ", " n
      RX_BUILTINS(RX_BUILTIN_NAME_)
#undef RX_BUILTIN_NAME_
      ;
  return names + 2; /* past the first ", " */
}

rx_status vm_extern_arg_int(const vm_extern_call *c, rx_rt_value *const *args, size_t i,
                            const char *what, int64_t lo, int64_t hi, int64_t *out) {
  rx_dtype dt = args[i]->dtype;
  bool is_float =
      dt == RX_DTYPE_F32 || dt == RX_DTYPE_F16 || dt == RX_DTYPE_BF16 || dt == RX_DTYPE_F64;
  if (args[i]->kind != RX_RT_VALUE_PRIM || is_float)
    return base_status_make(RX_ERR_INVALID, "%s: argument %zu (%s) must be an integer Prim",
                            c->name, i + 1, what);
  int64_t v = args[i]->prim;
  if (v < lo || v > hi)
    return base_status_make(RX_ERR_INVALID, "%s: %s is %lld, expected %lld..%lld", c->name, what,
                            (long long)v, (long long)lo, (long long)hi);
  *out = v;
  return NULL;
}
