/* runtime/ccl/mpi_api.h: the part of the MPI C API that runtime/ccl/comm.c calls, declared by
 * hand for Open MPI's binary interface (libmpi.so.40, Open MPI 3.0 and later), so that the
 * runtime opens libmpi at run time like the device drivers and needs no MPI to build or to
 * start (librelaxc_runtime.so needs nothing but libc, libm, libdl and pthreads).
 *
 * Open MPI's handles are pointers: MPI_COMM_WORLD, MPI_FLOAT, MPI_SUM ... are the addresses of
 * the library's globals ompi_mpi_comm_world, ompi_mpi_float, ompi_mpi_op_sum (mpi.h's
 * OMPI_PREDEFINED_GLOBAL), fetched here with dlsym. MPICH's are integers, so another
 * implementation would need its own table (not done: Debian's default MPI is Open MPI).
 * tests/runtime/mpi_decls_test.c checks these declarations against Open MPI's mpi.h. */
#ifndef RX_RUNTIME_MPI_API_H
#define RX_RUNTIME_MPI_API_H

#include <stddef.h>

typedef void *mpi_handle; /* MPI_Comm, MPI_Datatype, MPI_Op, MPI_Errhandler, MPI_Request */

/* MPI_Status (struct ompi_status_public_t) */
typedef struct mpi_status {
  int MPI_SOURCE;
  int MPI_TAG;
  int MPI_ERROR;
  int _cancelled;
  size_t _ucount;
} mpi_status;

typedef void mpi_user_function(void *invec, void *inoutvec, int *len, mpi_handle *datatype);

/* X(value name, mpi.h's name, value) */
#define MPI_CONSTS(X)                                                                              \
  X(RT_MPI_SUCCESS, MPI_SUCCESS, 0)                                                                \
  X(RT_MPI_THREAD_FUNNELED, MPI_THREAD_FUNNELED, 1)                                                \
  X(RT_MPI_MAX_ERROR_STRING, MPI_MAX_ERROR_STRING, 256)
#define X(name, mpi_name, value) enum { name = value };
MPI_CONSTS(X)
#undef X
#define RT_MPI_IN_PLACE      ((void *)1)          /* MPI_IN_PLACE */
#define RT_MPI_STATUS_IGNORE ((mpi_status *)NULL) /* MPI_STATUS_IGNORE */

/* X(member, symbol, return type, parameters) */
#define MPI_FNS(X)                                                                                 \
  X(init_thread, MPI_Init_thread, int, (int *, char ***, int, int *))                              \
  X(initialized, MPI_Initialized, int, (int *))                                                    \
  X(finalized, MPI_Finalized, int, (int *))                                                        \
  X(finalize, MPI_Finalize, int, (void))                                                           \
  X(abort, MPI_Abort, int, (mpi_handle, int))                                                      \
  X(comm_dup, MPI_Comm_dup, int, (mpi_handle, mpi_handle *))                                       \
  X(comm_free, MPI_Comm_free, int, (mpi_handle *))                                                 \
  X(comm_set_errhandler, MPI_Comm_set_errhandler, int, (mpi_handle, mpi_handle))                   \
  X(comm_rank, MPI_Comm_rank, int, (mpi_handle, int *))                                            \
  X(comm_size, MPI_Comm_size, int, (mpi_handle, int *))                                            \
  X(error_string, MPI_Error_string, int, (int, char *, int *))                                     \
  X(allreduce, MPI_Allreduce, int,                                                                 \
    (const void *, void *, int, mpi_handle, mpi_handle, mpi_handle))                               \
  X(allgather, MPI_Allgather, int,                                                                 \
    (const void *, int, mpi_handle, void *, int, mpi_handle, mpi_handle))                          \
  X(reduce_scatter_block, MPI_Reduce_scatter_block, int,                                           \
    (const void *, void *, int, mpi_handle, mpi_handle, mpi_handle))                               \
  X(bcast, MPI_Bcast, int, (void *, int, mpi_handle, int, mpi_handle))                             \
  X(ibcast, MPI_Ibcast, int, (void *, int, mpi_handle, int, mpi_handle, mpi_handle *))             \
  X(test, MPI_Test, int, (mpi_handle *, int *, mpi_status *))                                      \
  X(send, MPI_Send, int, (const void *, int, mpi_handle, int, int, mpi_handle))                    \
  X(recv, MPI_Recv, int, (void *, int, mpi_handle, int, int, mpi_handle, mpi_status *))            \
  X(probe, MPI_Probe, int, (int, int, mpi_handle, mpi_status *))                                   \
  X(iprobe, MPI_Iprobe, int, (int, int, mpi_handle, int *, mpi_status *))                          \
  X(get_count, MPI_Get_count, int, (const mpi_status *, mpi_handle, int *))                        \
  X(op_create, MPI_Op_create, int, (mpi_user_function *, int, mpi_handle *))                       \
  X(op_free, MPI_Op_free, int, (mpi_handle *))

/* X(member, mpi.h's handle, Open MPI's global) */
#define MPI_HANDLES(X)                                                                             \
  X(comm_world, MPI_COMM_WORLD, ompi_mpi_comm_world)                                               \
  X(errors_return, MPI_ERRORS_RETURN, ompi_mpi_errors_return)                                      \
  X(t_byte, MPI_BYTE, ompi_mpi_byte)                                                               \
  X(t_int, MPI_INT, ompi_mpi_int)                                                                  \
  X(t_float, MPI_FLOAT, ompi_mpi_float)                                                            \
  X(t_double, MPI_DOUBLE, ompi_mpi_double)                                                         \
  X(t_int32, MPI_INT32_T, ompi_mpi_int32_t)                                                        \
  X(t_int64, MPI_INT64_T, ompi_mpi_int64_t)                                                        \
  X(t_uint16, MPI_UINT16_T, ompi_mpi_uint16_t)                                                     \
  X(op_sum, MPI_SUM, ompi_mpi_op_sum)                                                              \
  X(op_max, MPI_MAX, ompi_mpi_op_max)                                                              \
  X(op_min, MPI_MIN, ompi_mpi_op_min)

typedef struct mpi_api {
#define X(member, sym, ret, params) ret(*member) params;
  MPI_FNS(X)
#undef X
#define X(member, handle, global) mpi_handle member;
  MPI_HANDLES(X)
#undef X
} mpi_api;

#endif
