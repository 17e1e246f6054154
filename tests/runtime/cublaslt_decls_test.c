/* tests/runtime/cublaslt_decls_test.c: runtime/cuda/cublaslt_api.h (cuBLASLt declared by hand)
 * against the toolkit's own cublasLt.h, where one is installed: every constant's value, the
 * sizes and field offsets of the structs passed to the library. Checked at compile time; the
 * program only reports. Without the header (RX_HAVE_CUBLASLT_H undefined) it reports itself
 * skipped (77). */
#include <stdio.h>

#ifdef RX_HAVE_CUBLASLT_H
#include <cublasLt.h>
#include <stddef.h>

#include "runtime/cuda/cublaslt_api.h"

#define SAME(ours, theirs) _Static_assert((int)(ours) == (int)(theirs), #ours " != " #theirs);
SAME(LT_STATUS_SUCCESS, CUBLAS_STATUS_SUCCESS)
SAME(LT_STATUS_INVALID_VALUE, CUBLAS_STATUS_INVALID_VALUE)
SAME(LT_STATUS_NOT_SUPPORTED, CUBLAS_STATUS_NOT_SUPPORTED)
SAME(LT_OP_N, CUBLAS_OP_N)
SAME(LT_OP_T, CUBLAS_OP_T)
SAME(LT_COMPUTE_32F, CUBLAS_COMPUTE_32F)
SAME(LT_R_32F, CUDA_R_32F)
SAME(LT_R_16F, CUDA_R_16F)
SAME(LT_R_16BF, CUDA_R_16BF)
SAME(LT_DESC_TRANSA, CUBLASLT_MATMUL_DESC_TRANSA)
SAME(LT_DESC_TRANSB, CUBLASLT_MATMUL_DESC_TRANSB)
SAME(LT_LAYOUT_BATCH_COUNT, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT)
SAME(LT_LAYOUT_STRIDED_BATCH_OFFSET, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET)
SAME(LT_PREF_MAX_WORKSPACE_BYTES, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES)
/* the enums are int-sized, as lt_status and the int parameters of LT_FNS take them */
_Static_assert(sizeof(cublasStatus_t) == sizeof(lt_status), "cublasStatus_t");
_Static_assert(sizeof(cublasComputeType_t) == sizeof(int), "cublasComputeType_t");
_Static_assert(sizeof(cudaDataType_t) == sizeof(int), "cudaDataType_t");
_Static_assert(sizeof(cublasLtMatmulDescAttributes_t) == sizeof(int), "desc attributes");
_Static_assert(sizeof(cublasLtMatrixLayoutAttribute_t) == sizeof(int), "layout attributes");
_Static_assert(sizeof(cublasLtMatmulPreferenceAttributes_t) == sizeof(int), "pref attributes");
/* the structs passed by pointer */
_Static_assert(sizeof(lt_algo) == sizeof(cublasLtMatmulAlgo_t), "cublasLtMatmulAlgo_t");
_Static_assert(sizeof(lt_heuristic) == sizeof(cublasLtMatmulHeuristicResult_t),
               "cublasLtMatmulHeuristicResult_t");
#define FIELD(ours, theirs)                                                                        \
  _Static_assert(                                                                                  \
      offsetof(lt_heuristic, ours) == offsetof(cublasLtMatmulHeuristicResult_t, theirs), #theirs);
FIELD(algo, algo)
FIELD(workspace_size, workspaceSize)
FIELD(state, state)
FIELD(waves_count, wavesCount)

int main(void) {
  printf("runtime.cublaslt_decls: cublaslt_api.h agrees with cublasLt.h %d.%d\n", CUBLAS_VER_MAJOR,
         CUBLAS_VER_MINOR);
  return 0;
}
#else
int main(void) {
  printf("runtime.cublaslt_decls: skipped: no cublasLt.h (the CUDA toolkit) at build time\n");
  return 77;
}
#endif
