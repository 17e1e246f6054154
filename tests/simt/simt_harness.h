/* simt_harness.h: run CUDA C and Metal Shading Language kernels on the CPU, for tests.
 *
 * A source is compiled with clang++ (16 or newer) as C++17 against a prelude (simt_cuda.h or
 * simt_metal.h) into a shared object, cached by a hash of everything that goes into it, and
 * loaded. A launch runs the blocks of the grid one after the other on the calling OS thread;
 * inside a block every GPU thread is a fiber with its own stack, so barriers and warp/SIMD-group
 * functions really wait for the other threads. Misuse that a GPU would hang on or leave
 * undefined (barrier divergence, a shuffle from a lane that does not take part) fails the
 * launch with a message. Not thread-safe: one launch at a time per process. See README.md.
 *
 * Errors: functions returning int return 0 on success and -1 on failure, with a heap message
 * in *out_err (the caller frees it); *out_err is set to NULL on success. */
#ifndef SIMT_HARNESS_H
#define SIMT_HARNESS_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum simt_lang {
  SIMT_CUDA,  /* CUDA C: `extern "C" __global__ void k(...)` */
  SIMT_METAL, /* MSL: `kernel void k(...)` with [[buffer(i)]] and builtin attributes */
} simt_lang;

typedef struct simt_options {
  const char *simt_dir;  /* tests/simt (preludes, include/); NULL: $SIMT_DIR or SIMT_DEFAULT_DIR */
  const char *clang;     /* NULL: $SIMT_CLANG or "clang++-16" */
  const char *cache_dir; /* NULL: $SIMT_CACHE_DIR or $TMPDIR/relaxc-simt-<uid> */
  const char *cflags;    /* extra clang flags, space-separated (e.g. "-fsanitize=undefined");
                            NULL: $SIMT_CFLAGS or none */
} simt_options;

typedef struct simt_module simt_module;
typedef struct simt_kernel simt_kernel;

/* Compile `source` (a whole .cu or .metal text; `label` names it in diagnostics) and load it.
 * Every kernel of the source is found (CUDA: each non-template `__global__` function; Metal:
 * each `kernel void NAME(`). A compile error returns clang's diagnostics in *out_err. */
int simt_module_compile(const simt_options *opts, simt_lang lang, const char *source,
                        const char *label, simt_module **out_module, char **out_err);
/* The same, reading the source from a file. */
int simt_module_compile_file(const simt_options *opts, simt_lang lang, const char *path,
                             simt_module **out_module, char **out_err);
void simt_module_free(simt_module *m);
/* clang's warnings from the compilation ("" when none or when the object came from the cache). */
const char *simt_module_log(const simt_module *m);

/* A kernel of the module by name; NULL when there is none. Owned by the module. */
simt_kernel *simt_module_kernel(simt_module *m, const char *name);
/* CUDA: the number of parameters. Metal: the number of buffer slots (highest [[buffer(i)]] + 1). */
int simt_kernel_nargs(const simt_kernel *k);

/* Run kernel k over grid[0..2] blocks of block[0..2] threads (Metal: threadgroups per grid and
 * threads per threadgroup, as with dispatchThreadgroups).
 * CUDA: args[i] points to the value of parameter i, as with cuLaunchKernel (for a `float *a`
 * parameter, args[i] is a `float **`). dyn_smem_bytes sizes `extern __shared__` memory.
 * Metal: args[i] is what is bound at [[buffer(i)]]: the buffer's address for `device T *` and
 * `constant T *`, the address of the bytes for `constant T &` (setBytes). dyn_smem_bytes: 0.
 * nargs must equal simt_kernel_nargs(k). */
int simt_launch(simt_kernel *k, const unsigned grid[3], const unsigned block[3],
                size_t dyn_smem_bytes, void **args, int nargs, char **out_err);

#ifdef __cplusplus
}
#endif

#endif
