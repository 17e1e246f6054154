/* simt_trace.h: the coalescing and bank-conflict analysis of a traced launch
 * (simt_launch_traced), between the scheduler (simt_harness.c), which forwards the access
 * callbacks of a traced kernel object, and simt_trace.c, which groups the accesses into warp-wide
 * requests. Internal to tests/simt.
 *
 * Attribution: an access made in the kernel function itself belongs to its own site (the return
 * address of the callback, inside the kernel); one made in a helper the kernel calls (an
 * operator of __half, a memcpy of a struct copy) belongs to the kernel's call of that helper,
 * found on a shadow stack of return addresses kept from the function entry and exit callbacks.
 * So each source-level access of the kernel text is one site. */
#ifndef SIMT_TRACE_H
#define SIMT_TRACE_H

#include "simt_harness.h"

#include <stdint.h>

typedef struct simt_trace simt_trace;

/* A trace of the blocks of one launch: ranges are the global buffers (accesses elsewhere, to
 * stacks, are not counted; shared memory is added by simt_trace_add_shared); [fn_lo, fn_hi) the
 * kernel function's code; obj_base the load address of the kernel object (sites are reported
 * relative to it). */
simt_trace *simt_trace_new(const simt_range *ranges, int nranges, unsigned nthreads,
                           uintptr_t fn_lo, uintptr_t fn_hi, uintptr_t obj_base);
void simt_trace_free(simt_trace *t);
/* Adds [lo, lo + bytes) to the shared memory whose accesses are counted for bank conflicts (the
 * kernel object's `__shared__` variables, the launch's dynamic shared memory). */
void simt_trace_add_shared(simt_trace *t, const void *lo, size_t bytes);

/* Per block: clears the per-thread state before the block's threads start. */
void simt_trace_block_begin(simt_trace *t);
/* Thread `thread` (linear index in the block) entered a function called from caller_pc, or left
 * one. */
void simt_trace_enter(simt_trace *t, unsigned thread, const void *caller_pc);
void simt_trace_exit(simt_trace *t, unsigned thread);
/* Thread `thread` (its lane: thread % 32) of warp `warp` accessed [addr, addr + bytes); pc:
 * the callback's return address. */
void simt_trace_access(simt_trace *t, unsigned thread, unsigned warp, const void *pc,
                       const void *addr, unsigned long bytes, int store);
/* After the block: its requests added to acc. */
void simt_trace_block_end(simt_trace *t, simt_coalescing *acc);

#endif
