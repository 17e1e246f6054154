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
  int trace;             /* compile with access tracing, for simt_launch_traced (also when
                            $SIMT_TRACE is 1); refused with sanitizer flags in cflags */
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

/* ---- the coalescing report ---------------------------------------------------------------
 * A kernel object compiled with simt_options.trace reports every memory access it makes: clang's
 * ThreadSanitizer instrumentation (-fsanitize=thread) with its callbacks answered by the emulator
 * (simt_common.h) instead of TSan's runtime. simt_launch_traced groups the accesses that fall in
 * the given global buffers into warp-wide requests, as a GPU's load/store unit sees them: the
 * k-th execution of one access site by each lane of a warp is one request (simt_trace.h says what
 * a site is). Per request: `moved`, 32 bytes per 32-byte sector it touches (sectors counted
 * from the buffer's start: device buffers start 256-byte aligned), and `used`, the bytes its lanes
 * asked for, at most `moved` (NVIDIA's global load efficiency: requested over transferred bytes;
 * lanes reading one word are served by one sector). Efficiency = used / moved over a kernel's
 * requests: 100% when the lanes of a warp access consecutive 4-, 8- or 16-byte words or one
 * word, 50% for 2-byte lanes 4 bytes apart, 6.25% for 2-byte lanes 32 or more bytes apart. */
typedef struct simt_range {
  const void *base;
  size_t bytes;
} simt_range;

typedef struct simt_access_stats {
  unsigned long long requests; /* warp-wide executions of access sites */
  unsigned long long used;     /* bytes the lanes asked for, at most moved per request */
  unsigned long long moved;    /* 32 x the 32-byte sectors touched */
} simt_access_stats;

/* Shared-memory bank conflicts (README.md, "Shared-memory bank conflicts"): each warp-wide
 * request to shared memory is split into the phases the hardware serves at once (accesses of 4
 * bytes or less: one phase of 32 lanes; 8 bytes: two of 16 lanes; 16 bytes, so also each 8x8
 * matrix of an ldmatrix and the destinations of cp.async: four of 8 lanes); a phase's degree is
 * the largest number of different 4-byte words that fall in one of the 32 banks (lanes reading
 * one word share it: a broadcast), and it takes that many passes: degree - 1 of them conflicts. */
typedef struct simt_bank_stats {
  unsigned long long requests;  /* warp-wide executions of shared-memory access sites */
  unsigned long long phases;    /* the phases they split into (passes without conflicts) */
  unsigned long long conflicts; /* sum over phases of degree - 1 */
  unsigned max_degree;          /* the largest degree of a phase (1: conflict-free) */
} simt_bank_stats;

typedef struct simt_site_stats {
  size_t site; /* the access site: offset of its code in the kernel object */
  int store;
  int shared; /* 1: an access to shared memory (b counts it), 0: to global (s) */
  int matrix; /* shared: a matrix-unit helper's access (an ldmatrix row read, a cp.async
                 destination), not a plain load or store */
  simt_access_stats s;
  simt_bank_stats b;
} simt_site_stats;

/* Accumulated over launches; zero-initialize, release with simt_coalescing_free. */
typedef struct simt_coalescing {
  simt_access_stats loads, stores;             /* global memory */
  simt_bank_stats shared_loads, shared_stores; /* shared memory (cp.async: a store) */
  simt_site_stats *sites; /* per site, space and direction, in order of first request */
  int nsites;
} simt_coalescing;

/* Whether m was compiled with tracing. */
int simt_module_traced(const simt_module *m);
/* simt_launch, for a kernel of a traced module, adding its requests to global memory (the
 * nglobal ranges) and to shared memory (the kernel object's `__shared__` variables and the
 * launch's dynamic shared memory) to *acc. max_blocks > 0: runs only that many blocks of the grid,
 * evenly spaced (the outputs of the others are not written), to keep large grids quick. */
int simt_launch_traced(simt_kernel *k, const unsigned grid[3], const unsigned block[3],
                       size_t dyn_smem_bytes, void **args, int nargs, const simt_range *global,
                       int nglobal, unsigned max_blocks, simt_coalescing *acc, char **out_err);
void simt_coalescing_free(simt_coalescing *c);
/* "file:line" of an access site of k's object (addr2line), or -1 when it cannot be found. */
int simt_site_where(const simt_kernel *k, size_t site, char *out, size_t n);

#ifdef __cplusplus
}
#endif

#endif
