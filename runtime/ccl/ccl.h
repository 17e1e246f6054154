/* runtime/ccl/ccl.h: the communicators' internal interface (runtime/ccl/comm.c), used by the
 * collective builtins (runtime/ccl/builtins.c). Every call works on host memory; the builtins
 * stage device tensors through it. Every rank must make the same calls in the same order (the
 * builtins check the shapes agree first, so that a mismatch is an error, not a hang). */
#ifndef RX_RUNTIME_CCL_H
#define RX_RUNTIME_CCL_H

#include "relaxc/ccl.h"
#include "runtime/vm.h"

/* A communicator: MPI's (host memory, launching, bootstrapping), and NCCL's on one CUDA device
 * where rx_rt_comm_enable_nccl made it (runtime/ccl/nccl.c). */
struct rx_rt_comm {
  int refs;
  int rank, size;
  double seconds; /* in the builtins (rt_ccl_account) */
  uint64_t calls;
  rx_rt_comm_counter counters[RX_CCL_KIND_COUNT]; /* the same, builtin by builtin */
  void *comm;                                     /* MPI_Comm (Open MPI: a pointer) */
  void *half_ops[2][2];                           /* MPI_Op of [f16, bf16][sum, max] */
  void *nccl;                                     /* ncclComm_t; NULL: none */
  rx_rt_device *nccl_device; /* the CUDA device NCCL's communicator lives on (retained) */
};

typedef enum rt_ccl_op { RT_CCL_SUM = 0, RT_CCL_MAX = 1 } rt_ccl_op;

/* true when dtype can be reduced (f32, f16, bf16, f64, i32, i64). */
bool rt_ccl_reducible(rx_dtype dtype);
/* buf (count elements of dtype) becomes the reduction over ranks, in place. */
rx_status rt_ccl_allreduce(rx_rt_comm *c, void *buf, size_t count, rx_dtype dtype, rt_ccl_op op);
/* Block r of recv (bytes each) is rank r's send. */
rx_status rt_ccl_allgather(rx_rt_comm *c, const void *send, void *recv, size_t bytes);
/* send holds size blocks of count elements; recv (count) gets block rank of the reduction. */
rx_status rt_ccl_reduce_scatter(rx_rt_comm *c, const void *send, void *recv, size_t count,
                                rx_dtype dtype, rt_ccl_op op);
rx_status rt_ccl_bcast(rx_rt_comm *c, void *buf, size_t bytes, int root);
rx_status rt_ccl_send(rx_rt_comm *c, const void *buf, size_t bytes, int peer);
/* The next message from peer, whatever its size: *out (malloc'd, free with free) and *out_bytes. */
rx_status rt_ccl_recv(rx_rt_comm *c, int peer, void **out, size_t *out_bytes);
/* *out_all: ok on every rank (a collective: every rank calls it). */
rx_status rt_ccl_all_ok(rx_rt_comm *c, bool ok, bool *out_all);
/* *out_same: every rank passed the same key (a collective). */
rx_status rt_ccl_same(rx_rt_comm *c, int64_t key, bool *out_same);
/* ---- NCCL (runtime/ccl/nccl.c): collectives on a CUDA device's memory, in its stream order ----
 */
/* true when c has NCCL on device d (the builtins then skip the staging through host memory) */
bool rt_nccl_on(const rx_rt_comm *c, const rx_rt_device *d);
void rt_nccl_free(rx_rt_comm *c); /* at the communicator's release */
rx_status rt_nccl_allreduce(rx_rt_comm *c, rx_rt_buffer *src, rx_rt_buffer *dst, size_t count,
                            rx_dtype dtype, rt_ccl_op op);
rx_status rt_nccl_allgather(rx_rt_comm *c, rx_rt_buffer *src, rx_rt_buffer *dst, size_t bytes);
/* src: size blocks of count elements; dst: count */
rx_status rt_nccl_reduce_scatter(rx_rt_comm *c, rx_rt_buffer *src, rx_rt_buffer *dst, size_t count,
                                 rx_dtype dtype, rt_ccl_op op);
rx_status rt_nccl_bcast(rx_rt_comm *c, rx_rt_buffer *src, rx_rt_buffer *dst, size_t bytes,
                        int root);
rx_status rt_nccl_send(rx_rt_comm *c, rx_rt_buffer *src, size_t bytes, int peer);
rx_status rt_nccl_recv(rx_rt_comm *c, rx_rt_buffer *dst, size_t bytes, int peer);

/* A builtin's call of kind, its tensor's bytes and its time (rx_rt_comm_stats, counters). */
void rt_ccl_account(rx_rt_comm *c, rx_ccl_kind kind, size_t bytes, double seconds);
double rt_ccl_now(void);

/* ---- the builtins (runtime/externs.c's table; arguments: docs/distributed.md) ---- */
rx_status rt_ccl_builtin_allreduce(const vm_extern_call *c, rx_rt_value *const *args, size_t nargs,
                                   rx_rt_value **result);
rx_status rt_ccl_builtin_allgather(const vm_extern_call *c, rx_rt_value *const *args, size_t nargs,
                                   rx_rt_value **result);
rx_status rt_ccl_builtin_reduce_scatter(const vm_extern_call *c, rx_rt_value *const *args,
                                        size_t nargs, rx_rt_value **result);
rx_status rt_ccl_builtin_broadcast(const vm_extern_call *c, rx_rt_value *const *args, size_t nargs,
                                   rx_rt_value **result);
rx_status rt_ccl_builtin_send(const vm_extern_call *c, rx_rt_value *const *args, size_t nargs,
                              rx_rt_value **result);
rx_status rt_ccl_builtin_recv(const vm_extern_call *c, rx_rt_value *const *args, size_t nargs,
                              rx_rt_value **result);

#endif
