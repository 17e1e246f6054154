/* tests/runtime/mpi_decls_test.c: runtime/ccl/mpi_api.h (Open MPI's binary interface declared by
 * hand, for the runtime to open libmpi at run time) against Open MPI's own mpi.h, linked with
 * libmpi (tests/ccl/ccl.cmake, where CMake's FindMPI finds it):
 *   - mpi_status: MPI_Status's size and the offsets of its fields;
 *   - constants: each of MPI_CONSTS equal to mpi.h's, MPI_IN_PLACE and MPI_STATUS_IGNORE;
 *   - handles: each of MPI_HANDLES is the address of the global that mpi_api.h names (the symbol
 *     comm.c fetches with dlsym), and handles are pointers;
 *   - entry points: each of MPI_FNS is the function mpi.h declares under its name (its
 *     parameter types are checked by reading: mpi.h's handles are distinct struct pointers,
 *     mpi_api.h's void *, so the compiler cannot compare the prototypes). */
#include <mpi.h>

#include <dlfcn.h>
#include <stddef.h>
#include <stdio.h>

#include "runtime/ccl/mpi_api.h"

_Static_assert(sizeof(MPI_Status) == sizeof(mpi_status), "MPI_Status has another size");
_Static_assert(offsetof(MPI_Status, MPI_SOURCE) == offsetof(mpi_status, MPI_SOURCE), "MPI_SOURCE");
_Static_assert(offsetof(MPI_Status, MPI_TAG) == offsetof(mpi_status, MPI_TAG), "MPI_TAG");
_Static_assert(offsetof(MPI_Status, MPI_ERROR) == offsetof(mpi_status, MPI_ERROR), "MPI_ERROR");
_Static_assert(offsetof(MPI_Status, _ucount) == offsetof(mpi_status, _ucount), "_ucount");
_Static_assert(sizeof(MPI_Comm) == sizeof(mpi_handle) &&
                   sizeof(MPI_Datatype) == sizeof(mpi_handle) &&
                   sizeof(MPI_Op) == sizeof(mpi_handle) &&
                   sizeof(MPI_Errhandler) == sizeof(mpi_handle),
               "Open MPI's handles are pointers");
#define X(name, mpi_name, value)                                                                   \
  _Static_assert((long)name == (long)mpi_name, #name " differs from " #mpi_name);
MPI_CONSTS(X)
#undef X

static int failures;

int main(void) {
  if ((void *)MPI_IN_PLACE != RT_MPI_IN_PLACE) failures++, printf("FAIL: MPI_IN_PLACE\n");
  if ((void *)MPI_STATUS_IGNORE != (void *)RT_MPI_STATUS_IGNORE)
    failures++, printf("FAIL: MPI_STATUS_IGNORE\n");
#define X(member, handle, global)                                                                  \
  if (dlsym(RTLD_DEFAULT, #global) != (void *)(handle))                                            \
    failures++, printf("FAIL: %s is not &%s\n", #handle, #global);
  MPI_HANDLES(X)
#undef X
  /* each entry point: mpi.h's prototype assigned to mpi_api.h's member type after erasing the
   * handles would need a cast; instead, the symbol exists and has the expected address */
#define X(member, sym, ret, params)                                                                \
  if (dlsym(RTLD_DEFAULT, #sym) != (void *)&sym) failures++, printf("FAIL: %s\n", #sym);
  MPI_FNS(X)
#undef X
  printf("mpi_decls: %d failures\n", failures);
  return failures ? 1 : 0;
}
