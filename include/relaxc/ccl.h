/* relaxc/ccl.h: communicators of the relaxc runtime (tensor parallelism, issue 35).
 *
 * One process per device; the processes of a job form a communicator with a rank (0..size-1)
 * each. An artifact compiled per rank calls the collectives as builtins (rx_ccl_allreduce,
 * rx_ccl_allgather, rx_ccl_reduce_scatter, rx_ccl_broadcast, rx_ccl_send, rx_ccl_recv: see
 * docs/distributed.md) on the communicator attached to it with rx_rt_artifact_set_comm; with
 * none, the world has one rank (allreduce, allgather, reduce_scatter and broadcast copy their
 * argument, send and recv are errors).
 *
 * Backends: MPI (Open MPI's libmpi.so.40, opened at run time like the device drivers: the
 * runtime needs no MPI to build or to start; RX_MPI_LIBRARY names another path). The builtins stage
 * device tensors through host memory (device -> host -> MPI -> host -> device), which serves every
 * device backend (Vulkan, CUDA, Metal).
 *
 * Errors are statuses as everywhere in the runtime: a communication error (a peer that died, a
 * message that does not match) is returned with MPI's text, never an abort from this library
 * (the communicator is set to return errors; mpirun itself ends the job when a rank dies). */
#ifndef RELAXC_CCL_H
#define RELAXC_CCL_H

#include "runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct rx_rt_comm rx_rt_comm; /* a communicator (reference-counted) */

/* true when libmpi (Open MPI) opens here (the first call opens it). */
RX_API bool rx_rt_comm_mpi_available(void);
/* A communicator over every process of the MPI job (a duplicate of MPI_COMM_WORLD, errors
 * returned). Initializes MPI (thread level FUNNELED) unless the program already did; then the
 * release of the last communicator finalizes it. A process started without mpirun is a job of
 * one rank. RX_ERR_NOT_FOUND, saying why, when libmpi does not open. */
RX_API rx_status rx_rt_comm_create_mpi(rx_rt_comm **out_comm);
RX_API void rx_rt_comm_retain(rx_rt_comm *c);
RX_API void rx_rt_comm_release(rx_rt_comm *c); /* NULL is fine */
RX_API int rx_rt_comm_rank(const rx_rt_comm *c);
RX_API int rx_rt_comm_size(const rx_rt_comm *c);
RX_API const char *rx_rt_comm_backend(const rx_rt_comm *c); /* "mpi", or "nccl" once enabled */
/* Makes NCCL's communicator beside MPI's, on CUDA device d (a collective: every rank calls it,
 * each with its own device): libnccl.so.2 opened at run time, ncclUniqueId made by rank 0 and
 * broadcast over MPI. From then on the builtins of an artifact on d run NCCL's collectives on
 * the device's memory in its stream order (no staging through host memory); MPI still carries
 * the ranks' agreement checks and rx_rt_comm_*_host. Fails on every rank, saying why, when any
 * rank cannot (no libnccl, not a CUDA device). */
RX_API rx_status rx_rt_comm_enable_nccl(rx_rt_comm *c, rx_rt_device *d);

/* Host-memory collectives for drivers (rank 0 broadcasting the sampled tokens, agreeing on a
 * count): bytes from root's data into every rank's data; and an integer maximum over ranks. */
RX_API rx_status rx_rt_comm_broadcast_host(rx_rt_comm *c, void *data, size_t bytes, int root);
RX_API rx_status rx_rt_comm_max_host(rx_rt_comm *c, int64_t *inout_value);
/* rx_rt_comm_broadcast_host for a message that may take long to come (a follower waiting for
 * rank 0's next call): a rank other than root polls for it, then sleeps between polls (up to
 * 1 ms), so that it does not busy-wait a core the way MPI_Bcast does. Every rank of one broadcast
 * must call this one (a non-blocking broadcast, which does not match MPI_Bcast). */
RX_API rx_status rx_rt_comm_broadcast_host_idle(rx_rt_comm *c, void *data, size_t bytes, int root);
/* Ends every process of the job (MPI_Abort) with the given exit code: for a rank that cannot go
 * on while the others wait in a collective. Does not return. */
RX_API void rx_rt_comm_abort(rx_rt_comm *c, int code);

/* Time spent in the collective builtins since the communicator was made (or the last reset):
 * wall-clock seconds including the staging through host memory, and the number of calls. */
RX_API void rx_rt_comm_stats(const rx_rt_comm *c, double *out_seconds, uint64_t *out_calls);
/* Zeroes rx_rt_comm_stats and every rx_rt_comm_counter. */
RX_API void rx_rt_comm_stats_reset(rx_rt_comm *c);

/* The collective builtins, counted one by one (rx_rt_comm_counter). */
typedef enum rx_ccl_kind {
  RX_CCL_ALLREDUCE = 0,
  RX_CCL_ALLGATHER,
  RX_CCL_REDUCE_SCATTER,
  RX_CCL_BROADCAST,
  RX_CCL_SEND,
  RX_CCL_RECV,
  RX_CCL_KIND_COUNT
} rx_ccl_kind;

/* One builtin's share of rx_rt_comm_stats, since the communicator was made or last reset. */
typedef struct rx_rt_comm_counter {
  uint64_t calls; /* calls that returned (an error too) */
  /* this rank's tensor argument (what it contributes: allgather's block, reduce_scatter's
   * whole input, broadcast's tensor on every rank; recv: the tensor received) */
  uint64_t bytes;
  /* wall clock inside the builtin: the ranks' agreement check, the staging through host memory,
   * and the collective itself, waiting for the slowest rank included */
  double seconds;
} rx_rt_comm_counter;

/* The name of kind as the builtin's without "rx_ccl_" ("allreduce", ...); NULL when not a kind. */
RX_API const char *rx_ccl_kind_name(rx_ccl_kind kind);
/* kind's counter on c (all zero for a kind out of range). */
RX_API rx_rt_comm_counter rx_rt_comm_counter_of(const rx_rt_comm *c, rx_ccl_kind kind);

/* Attaches c (retained; NULL detaches) to the artifact: its collective builtins use it. */
RX_API void rx_rt_artifact_set_comm(rx_rt_artifact *a, rx_rt_comm *c);
RX_API rx_rt_comm *rx_rt_artifact_comm(const rx_rt_artifact *a); /* borrowed; NULL: none */

#ifdef __cplusplus
}
#endif
#endif
