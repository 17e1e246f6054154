/* simt_rt.h: the interface between the SIMT emulator's scheduler (simt_harness.c, C) and a
 * compiled kernel shared object (C++, built with simt_cuda.h or simt_metal.h). Shared by both
 * sides, so it is plain C. Internal to tests/simt. */
#ifndef SIMT_RT_H
#define SIMT_RT_H

#include <stdint.h>

#define SIMT_WARP       32 /* lanes per warp (CUDA) and per simdgroup (Metal) */
#define SIMT_PAYLOAD    16 /* bytes one lane contributes to one warp exchange */
#define SIMT_RT_VERSION 2  /* bumped whenever this interface changes */

typedef struct simt_dim3 {
  unsigned x, y, z;
} simt_dim3;

/* What one emulated GPU thread (one fiber) sees. Owned by the scheduler. */
typedef struct simt_thread {
  simt_dim3 thread_idx; /* threadIdx / thread_position_in_threadgroup */
  simt_dim3 block_idx;  /* blockIdx / threadgroup_position_in_grid */
  simt_dim3 block_dim;  /* blockDim / threads_per_threadgroup */
  simt_dim3 grid_dim;   /* gridDim / threadgroups_per_grid */
  unsigned linear;      /* x + y*bx + z*bx*by: index of the thread in its block */
  unsigned lane;        /* linear % 32 */
  unsigned warp;        /* linear / 32 */
  unsigned warp_lanes; /* how many lanes this thread's warp has (32 except the last, partial one) */
  void *dyn_smem;      /* CUDA dynamic shared memory of the launch (NULL when none asked) */
} simt_thread;

/* Services of the scheduler, called from kernel code. Every function suspends the calling fiber
 * where the GPU would make the thread wait. `line` is the kernel source line, for messages. */
typedef struct simt_rt {
  int version; /* SIMT_RT_VERSION */
  /* the thread running now; valid only inside a launch */
  simt_thread *const *current;
  /* block-wide barrier (__syncthreads, threadgroup_barrier) */
  void (*barrier)(int line);
  /* warp exchange: the calling lane contributes `in` (SIMT_PAYLOAD bytes) and waits until every
   * participating lane of its warp has contributed; then `out` (SIMT_WARP * SIMT_PAYLOAD bytes)
   * holds each lane's contribution (zeros for lanes that did not take part) and `*out_members`
   * the participating lanes. mask != 0: exactly the lanes of mask take part (CUDA *_sync; a lane
   * of mask that does not exist or has exited is an error). mask == 0: every lane of the warp
   * that has not exited takes part (Metal simd_* functions). */
  void (*warp_exchange)(unsigned mask, const void *in, void *out, unsigned *out_members, int line);
  /* report an error in kernel code (bad shuffle source, __trap, ...): the launch fails with this
   * message and the calling thread never resumes */
  void (*fail)(int line, const char *msg);
  /* access tracing (objects compiled with SIMT_TRACE, simt_common.h; ignored outside a traced
   * launch): every load and store of bytes at addr (pc: the return address in the function that
   * made it), and every function entry (caller_pc: the return address in its caller) and exit.
   * store: SIMT_ACCESS_STORE for a store, | SIMT_ACCESS_MATRIX for the shared-memory side of a
   * matrix-unit helper (an ldmatrix row read, a cp.async destination) */
  void (*trace_access)(const void *pc, const void *addr, unsigned long bytes, int store);
  void (*trace_enter)(const void *caller_pc);
  void (*trace_exit)(void);
} simt_rt;
#define SIMT_ACCESS_STORE  1
#define SIMT_ACCESS_MATRIX 2

#endif
