/* runtime/ccl/nccl_api.h: the part of NCCL's C API (nccl.h, NCCL 2.x) that runtime/ccl/nccl.c
 * calls, declared by hand: libnccl.so.2 is opened at run time like the CUDA driver, so the
 * runtime builds without NCCL and starts where it is absent. Also implemented by the fake NCCL
 * of the tests (tests/runtime/fake_nccl.c). */
#ifndef RX_RUNTIME_NCCL_API_H
#define RX_RUNTIME_NCCL_API_H

#include <stddef.h>

typedef int nccl_result;   /* ncclResult_t: 0 ncclSuccess */
typedef void *nccl_comm;   /* ncclComm_t */
typedef void *nccl_stream; /* cudaStream_t (the driver's CUstream) */
typedef struct nccl_unique_id {
  char internal[128]; /* NCCL_UNIQUE_ID_BYTES */
} nccl_unique_id;

/* ncclDataType_t and ncclRedOp_t values */
enum {
  NCCL_INT8 = 0,
  NCCL_INT32 = 2,
  NCCL_INT64 = 4,
  NCCL_FLOAT16 = 6,
  NCCL_FLOAT32 = 7,
  NCCL_FLOAT64 = 8,
  NCCL_BFLOAT16 = 9,
};
enum { NCCL_SUM = 0, NCCL_MAX = 2 };

/* X(member, symbol, parameters) (each returns nccl_result) */
#define NCCL_FNS(X)                                                                                \
  X(get_unique_id, ncclGetUniqueId, (nccl_unique_id *))                                            \
  X(comm_init_rank, ncclCommInitRank, (nccl_comm *, int, nccl_unique_id, int))                     \
  X(comm_destroy, ncclCommDestroy, (nccl_comm))                                                    \
  X(all_reduce, ncclAllReduce, (const void *, void *, size_t, int, int, nccl_comm, nccl_stream))   \
  X(all_gather, ncclAllGather, (const void *, void *, size_t, int, nccl_comm, nccl_stream))        \
  X(reduce_scatter, ncclReduceScatter,                                                             \
    (const void *, void *, size_t, int, int, nccl_comm, nccl_stream))                              \
  X(broadcast, ncclBroadcast, (const void *, void *, size_t, int, int, nccl_comm, nccl_stream))    \
  X(send, ncclSend, (const void *, size_t, int, int, nccl_comm, nccl_stream))                      \
  X(recv, ncclRecv, (void *, size_t, int, int, nccl_comm, nccl_stream))

#endif
