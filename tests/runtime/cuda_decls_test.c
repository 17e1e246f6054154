/* tests/runtime/cuda_decls_test.c: runtime/cuda/cuda_api.h, the driver API declared by hand,
 * against the CUDA toolkit's own cuda.h. Compiled beside it (RX_HAVE_CUDA_H, set by
 * runtime/runtime.cmake where it finds cuda.h), so that most checks are compile errors:
 *   - handle types: cuda_api.h repeats cuda.h's typedefs, an error unless the types are the same;
 *   - enumerations: cu_result, cu_dev_attr and cu_func_attr compatible with CUresult,
 *     CUdevice_attribute and CUfunction_attribute;
 *   - constants: each of CU_CONSTS equal to the driver's constant it names;
 *   - CUDA_KERNEL_NODE_PARAMS_v2: each field of CU_KERNEL_NODE_PARAMS_FIELDS of cuda.h's type, at
 *     cuda.h's offset, and no field missing (the sizes equal);
 *   - entry points: each member of struct cu_fns compatible with a pointer to the function
 *     that cuda.h declares under that name (cuDeviceTotalMem -> cuDeviceTotalMem_v2, ...).
 * At run time: the symbol cuda.c looks up with dlsym is the one cuda.h binds the name to, but
 * for the choices listed in `kept` (the reason beside each). Without cuda.h it reports itself
 * skipped (77). */
#include <stdio.h>

#ifndef RX_HAVE_CUDA_H
int main(void) {
  printf("SKIP: no CUDA toolkit header (cuda.h) was found when the build was configured "
         "(runtime/runtime.cmake looks under $CUDA_PATH, $CUDA_HOME, /usr/local/cuda and the "
         "system include paths): runtime/cuda/cuda_api.h is not checked\n");
  return 77;
}
#else
#include <cuda.h>
#include <stddef.h>
#include <string.h>

#include "runtime/cuda/cuda_api.h"

#define SAME(a, b) __builtin_types_compatible_p(a, b)
#define STR_(x)    #x
#define STR(x)     STR_(x)

_Static_assert(SAME(cu_result, CUresult), "cu_result is not compatible with CUresult");
_Static_assert(SAME(cu_dev_attr, CUdevice_attribute),
               "cu_dev_attr is not compatible with CUdevice_attribute");
_Static_assert(SAME(cu_func_attr, CUfunction_attribute),
               "cu_func_attr is not compatible with CUfunction_attribute");

#define X(name, driver_name, value)                                                                \
  _Static_assert((long long)name == (long long)driver_name, #name " differs from " #driver_name);
CU_CONSTS(X)
#undef X

#define X(type, name)                                                                              \
  _Static_assert(SAME(__typeof__(((CUDA_KERNEL_NODE_PARAMS_v2 *)0)->name), type),                  \
                 "CUDA_KERNEL_NODE_PARAMS_v2." #name " has another type in cuda.h");
CU_KERNEL_NODE_PARAMS_FIELDS(X)
#undef X
/* the struct cuda_api.h defines where cuda.h is absent, under another tag */
struct kernel_node_params {
#define X(type, name) type name;
  CU_KERNEL_NODE_PARAMS_FIELDS(X)
#undef X
};
#define X(type, name)                                                                              \
  _Static_assert(offsetof(struct kernel_node_params, name) ==                                      \
                     offsetof(CUDA_KERNEL_NODE_PARAMS_v2, name),                                   \
                 "CUDA_KERNEL_NODE_PARAMS_v2." #name " is at another offset in cuda.h");
CU_KERNEL_NODE_PARAMS_FIELDS(X)
#undef X
_Static_assert(sizeof(struct kernel_node_params) == sizeof(CUDA_KERNEL_NODE_PARAMS_v2),
               "CUDA_KERNEL_NODE_PARAMS_v2 has fields that CU_KERNEL_NODE_PARAMS_FIELDS lacks");

/* `name` is expanded here (cuda.h's macros), in the struct member and in the function alike */
#define X(name, sym, params)                                                                       \
  _Static_assert(SAME(__typeof__(((struct cu_fns *)0)->name), __typeof__(&name)),                  \
                 "cu_fns." #name ": the parameters or result differ from cuda.h's " STR(name));
CU_FNS(X)
#undef X

/* entry points looked up by another symbol than the one cuda.h binds, on purpose */
static const struct {
  const char *name, *sym, *why;
} kept[] = {
    {"cuEventElapsedTime", "cuEventElapsedTime",
     "in every driver; cuEventElapsedTime_v2 (CUDA 12.8) only in newer ones, same prototype"},
};

int main(void) {
  static const struct {
    const char *name, *sym, *bound;
  } fns[] = {
#define X(name, sym, params) {#name, sym, STR(name)},
      CU_FNS(X)
#undef X
  };
  int failures = 0;
  for (size_t i = 0; i < sizeof fns / sizeof fns[0]; i++) {
    if (!strcmp(fns[i].sym, fns[i].bound)) continue;
    const char *why = NULL;
    for (size_t j = 0; j < sizeof kept / sizeof kept[0]; j++)
      if (!strcmp(kept[j].name, fns[i].name) && !strcmp(kept[j].sym, fns[i].sym)) why = kept[j].why;
    if (why) {
      printf("note: %s: looks up %s, cuda.h binds %s: %s\n", fns[i].name, fns[i].sym, fns[i].bound,
             why);
    } else {
      printf("FAIL: %s: runtime/cuda/cuda_api.h looks up the symbol %s, but cuda.h (CUDA_VERSION "
             "%d) binds the name to %s\n",
             fns[i].name, fns[i].sym, CUDA_VERSION, fns[i].bound);
      failures++;
    }
  }
  printf("%s: %zu entry points, their types and constants checked against cuda.h of CUDA_VERSION "
         "%d\n",
         failures ? "FAIL" : "ok", sizeof fns / sizeof fns[0], CUDA_VERSION);
  return failures ? 1 : 0;
}
#endif
