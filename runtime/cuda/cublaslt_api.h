/* runtime/cuda/cublaslt_api.h: the part of cuBLASLt (cublasLt.h, CUDA 11 to 13) that
 * cublaslt.c uses, declared by hand: the library is opened with dlopen at the first dispatched
 * matmul, so the runtime builds and runs where no CUDA toolkit is installed. Included by
 * cublaslt.c and by tests/runtime/fake_cublaslt.c (the fake library of the tests).
 *
 * Handles are opaque pointers; the library's enumerations are int (cublasStatus_t,
 * cublasComputeType_t, cudaDataType_t, the attribute enums: C enums without negative values),
 * their values copied from cublas_api.h, library_types.h and cublasLt.h with their names beside.
 * LT_FNS lists the entry points once: our name, the symbol, the parameters. */
#ifndef RX_RUNTIME_CUBLASLT_API_H
#define RX_RUNTIME_CUBLASLT_API_H

#include <stddef.h>
#include <stdint.h>

typedef int lt_status;                  /* cublasStatus_t */
typedef struct lt_context *lt_handle;   /* cublasLtHandle_t */
typedef struct lt_desc_st *lt_desc;     /* cublasLtMatmulDesc_t */
typedef struct lt_layout_st *lt_layout; /* cublasLtMatrixLayout_t */
typedef struct lt_pref_st *lt_pref;     /* cublasLtMatmulPreference_t */
typedef struct lt_algo {                /* cublasLtMatmulAlgo_t */
  uint64_t data[8];
} lt_algo;
typedef struct lt_heuristic { /* cublasLtMatmulHeuristicResult_t */
  lt_algo algo;
  size_t workspace_size;
  lt_status state;
  float waves_count;
  int reserved[4];
} lt_heuristic;

enum {
  LT_STATUS_SUCCESS = 0,              /* CUBLAS_STATUS_SUCCESS */
  LT_STATUS_INVALID_VALUE = 7,        /* CUBLAS_STATUS_INVALID_VALUE */
  LT_STATUS_NOT_SUPPORTED = 15,       /* CUBLAS_STATUS_NOT_SUPPORTED */
  LT_OP_N = 0,                        /* CUBLAS_OP_N */
  LT_OP_T = 1,                        /* CUBLAS_OP_T */
  LT_COMPUTE_32F = 68,                /* CUBLAS_COMPUTE_32F */
  LT_R_32F = 0,                       /* CUDA_R_32F */
  LT_R_16F = 2,                       /* CUDA_R_16F */
  LT_R_16BF = 14,                     /* CUDA_R_16BF */
  LT_DESC_TRANSA = 3,                 /* CUBLASLT_MATMUL_DESC_TRANSA: int32_t */
  LT_DESC_TRANSB = 4,                 /* CUBLASLT_MATMUL_DESC_TRANSB: int32_t */
  LT_LAYOUT_BATCH_COUNT = 5,          /* CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT: int32_t */
  LT_LAYOUT_STRIDED_BATCH_OFFSET = 6, /* CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET: int64_t */
  LT_PREF_MAX_WORKSPACE_BYTES = 1,    /* CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES: uint64_t */
};

/* X(our name, symbol, parameters): every entry point returns an lt_status */
#define LT_FNS(X)                                                                                  \
  X(create, "cublasLtCreate", (lt_handle * h))                                                     \
  X(destroy, "cublasLtDestroy", (lt_handle h))                                                     \
  X(desc_create, "cublasLtMatmulDescCreate", (lt_desc * d, int compute, int scale))                \
  X(desc_destroy, "cublasLtMatmulDescDestroy", (lt_desc d))                                        \
  X(desc_set, "cublasLtMatmulDescSetAttribute", (lt_desc d, int attr, const void *v, size_t n))    \
  X(layout_create, "cublasLtMatrixLayoutCreate",                                                   \
    (lt_layout * l, int type, uint64_t rows, uint64_t cols, int64_t ld))                           \
  X(layout_destroy, "cublasLtMatrixLayoutDestroy", (lt_layout l))                                  \
  X(layout_set, "cublasLtMatrixLayoutSetAttribute",                                                \
    (lt_layout l, int attr, const void *v, size_t n))                                              \
  X(pref_create, "cublasLtMatmulPreferenceCreate", (lt_pref * p))                                  \
  X(pref_destroy, "cublasLtMatmulPreferenceDestroy", (lt_pref p))                                  \
  X(pref_set, "cublasLtMatmulPreferenceSetAttribute",                                              \
    (lt_pref p, int attr, const void *v, size_t n))                                                \
  X(heuristic, "cublasLtMatmulAlgoGetHeuristic",                                                   \
    (lt_handle h, lt_desc d, lt_layout a, lt_layout b, lt_layout c, lt_layout dd, lt_pref p,       \
     int requested, lt_heuristic *results, int *returned))                                         \
  X(matmul, "cublasLtMatmul",                                                                      \
    (lt_handle h, lt_desc d, const void *alpha, const void *a, lt_layout la, const void *b,        \
     lt_layout lb, const void *beta, const void *c, lt_layout lc, void *dd, lt_layout ld,          \
     const lt_algo *algo, void *workspace, size_t workspace_bytes, void *stream))

#endif
