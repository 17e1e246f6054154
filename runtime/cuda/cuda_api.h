/* runtime/cuda/cuda_api.h: the part of the CUDA driver API that cuda.c uses, declared by hand.
 * cuda.c opens libcuda.so.1 with dlopen, so it builds where no CUDA toolkit is installed; only
 * cuda.c includes this header, and tests/runtime/cuda_decls_test.c, which compiles it beside the
 * toolkit's own cuda.h and checks every type, constant and entry point below against it.
 *
 * - Handle types keep the driver's names and definitions: C11 lets a typedef be repeated with
 *   the same type, so with cuda.h included first any difference is a compile error.
 * - The driver's enumerations (CUresult, CUdevice_attribute, CUfunction_attribute) cannot be
 *   repeated without all their values: here they are unsigned int, the type GCC and clang make
 *   compatible with an enumeration that has no negative value (the test checks it). Their
 *   constants get short names of our own, each beside the driver's name in CU_CONSTS.
 * - The one struct passed to the driver (CUDA_KERNEL_NODE_PARAMS_v2) cannot be repeated either:
 *   its fields are listed once (CU_KERNEL_NODE_PARAMS_FIELDS) and the test checks them.
 * - CU_FNS lists the entry points once (CU_BASE_FNS, then the optional CU_GRAPH_FNS): our
 *   name, the symbol dlsym looks up (the versioned one that cuda.h binds the name to), the
 *   parameters. All return a cu_result. */
#ifndef RX_RUNTIME_CUDA_API_H
#define RX_RUNTIME_CUDA_API_H

#include <stddef.h>

typedef unsigned cu_result;    /* CUresult (enum cudaError_enum) */
typedef unsigned cu_dev_attr;  /* CUdevice_attribute */
typedef unsigned cu_func_attr; /* CUfunction_attribute */
typedef int CUdevice;
typedef unsigned long long CUdeviceptr; /* 64-bit hosts only (cuda.h: unsigned int on 32-bit) */
typedef struct CUctx_st *CUcontext;
typedef struct CUmod_st *CUmodule;
typedef struct CUfunc_st *CUfunction;
typedef struct CUstream_st *CUstream;
typedef struct CUevent_st *CUevent;
typedef struct CUkern_st *CUkernel; /* only as a field of CUDA_KERNEL_NODE_PARAMS_v2 */
typedef struct CUgraph_st *CUgraph;
typedef struct CUgraphNode_st *CUgraphNode;
typedef struct CUgraphExec_st *CUgraphExec;

/* CUDA_KERNEL_NODE_PARAMS_v2 (cuda.h's CUDA_KERNEL_NODE_PARAMS since CUDA 12.0, which the _v2
 * graph entry points below take). A struct cannot be defined twice in one translation unit, so
 * its fields are listed once here: the struct is defined from them unless cuda.h came first (the
 * test), which checks each field's type and offset, and the size, against cuda.h's. The typedef
 * is repeated as the handles' are, so the entry points' types are checked as they are. */
#define CU_KERNEL_NODE_PARAMS_FIELDS(X)                                                            \
  X(CUfunction, func)                                                                              \
  X(unsigned int, gridDimX)                                                                        \
  X(unsigned int, gridDimY)                                                                        \
  X(unsigned int, gridDimZ)                                                                        \
  X(unsigned int, blockDimX)                                                                       \
  X(unsigned int, blockDimY)                                                                       \
  X(unsigned int, blockDimZ)                                                                       \
  X(unsigned int, sharedMemBytes) /* dynamic shared memory */                                      \
  X(void **, kernelParams)        /* a pointer to each parameter's value, copied by the call */    \
  X(void **, extra)                                                                                \
  X(CUkernel, kern) /* used only where func is NULL */                                             \
  X(CUcontext, ctx) /* ignored where func is set */
typedef struct CUDA_KERNEL_NODE_PARAMS_v2_st CUDA_KERNEL_NODE_PARAMS_v2;
#ifndef __cuda_cuda_h__
struct CUDA_KERNEL_NODE_PARAMS_v2_st {
#define X(type, name) type name;
  CU_KERNEL_NODE_PARAMS_FIELDS(X)
#undef X
};
#endif

/* name, the driver's name, value */
#define CU_CONSTS(X)                                                                               \
  X(RES_SUCCESS, CUDA_SUCCESS, 0)                                                                  \
  X(RES_OUT_OF_MEMORY, CUDA_ERROR_OUT_OF_MEMORY, 2)                                                \
  X(RES_NO_DEVICE, CUDA_ERROR_NO_DEVICE, 100)                                                      \
  X(RES_INVALID_IMAGE, CUDA_ERROR_INVALID_IMAGE, 200)                                              \
  X(RES_ILLEGAL_ADDRESS, CUDA_ERROR_ILLEGAL_ADDRESS, 700)                                          \
  X(RES_LAUNCH_FAILED, CUDA_ERROR_LAUNCH_FAILED, 719)                                              \
  X(ATTR_MAX_THREADS_PER_BLOCK, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, 1)                      \
  X(ATTR_MAX_SHARED_MEMORY_PER_BLOCK, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK, 8)          \
  X(ATTR_WARP_SIZE, CU_DEVICE_ATTRIBUTE_WARP_SIZE, 10)                                             \
  X(ATTR_CC_MAJOR, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, 75)                               \
  X(ATTR_CC_MINOR, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, 76)                               \
  X(ATTR_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, \
    97)                                                                                            \
  X(FUNC_ATTR_MAX_DYNAMIC_SHARED_SIZE_BYTES, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 8)   \
  X(STREAM_NON_BLOCKING, CU_STREAM_NON_BLOCKING, 1)                                                \
  X(EVENT_DEFAULT, CU_EVENT_DEFAULT, 0)                                                            \
  X(HOSTREGISTER_DEVICEMAP, CU_MEMHOSTREGISTER_DEVICEMAP, 2)                                       \
  X(RES_HOST_MEMORY_ALREADY_REGISTERED, CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED, 712)

enum {
#define X(name, driver_name, value) name = value,
  CU_CONSTS(X)
#undef X
};

/* CU_FNS: CU_BASE_FNS, which every driver cuda.c runs on must have, and CU_GRAPH_FNS, without
 * which launches are issued directly rather than replayed as graphs.
 *
 * cuEventElapsedTime: cuda.h binds it to cuEventElapsedTime_v2 since CUDA 12.8 (same prototype;
 * _v2 does not report errors of earlier asynchronous work). The plain symbol is in every driver,
 * _v2 only in 12.8's and later, so the plain one is looked up (the test knows this choice). */
#define CU_BASE_FNS(X)                                                                             \
  X(cuInit, "cuInit", (unsigned))                                                                  \
  X(cuDeviceGetCount, "cuDeviceGetCount", (int *))                                                 \
  X(cuDeviceGet, "cuDeviceGet", (CUdevice *, int))                                                 \
  X(cuDeviceGetName, "cuDeviceGetName", (char *, int, CUdevice))                                   \
  X(cuDeviceTotalMem, "cuDeviceTotalMem_v2", (size_t *, CUdevice))                                 \
  X(cuDeviceGetAttribute, "cuDeviceGetAttribute", (int *, cu_dev_attr, CUdevice))                  \
  X(cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain", (CUcontext *, CUdevice))                 \
  X(cuDevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2", (CUdevice))                         \
  X(cuCtxSetCurrent, "cuCtxSetCurrent", (CUcontext))                                               \
  X(cuModuleLoadData, "cuModuleLoadData", (CUmodule *, const void *))                              \
  X(cuModuleUnload, "cuModuleUnload", (CUmodule))                                                  \
  X(cuModuleGetFunction, "cuModuleGetFunction", (CUfunction *, CUmodule, const char *))            \
  X(cuFuncSetAttribute, "cuFuncSetAttribute", (CUfunction, cu_func_attr, int))                     \
  X(cuMemAlloc, "cuMemAlloc_v2", (CUdeviceptr *, size_t))                                          \
  X(cuMemFree, "cuMemFree_v2", (CUdeviceptr))                                                      \
  X(cuMemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2", (CUdeviceptr, const void *, size_t, CUstream))      \
  X(cuMemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2", (void *, CUdeviceptr, size_t, CUstream))            \
  X(cuMemcpyDtoDAsync, "cuMemcpyDtoDAsync_v2", (CUdeviceptr, CUdeviceptr, size_t, CUstream))       \
  X(cuMemsetD8Async, "cuMemsetD8Async", (CUdeviceptr, unsigned char, size_t, CUstream))            \
  X(cuStreamCreate, "cuStreamCreate", (CUstream *, unsigned))                                      \
  X(cuStreamDestroy, "cuStreamDestroy_v2", (CUstream))                                             \
  X(cuStreamSynchronize, "cuStreamSynchronize", (CUstream))                                        \
  X(cuEventCreate, "cuEventCreate", (CUevent *, unsigned))                                         \
  X(cuEventDestroy, "cuEventDestroy_v2", (CUevent))                                                \
  X(cuEventRecord, "cuEventRecord", (CUevent, CUstream))                                           \
  X(cuEventSynchronize, "cuEventSynchronize", (CUevent))                                           \
  X(cuEventElapsedTime, "cuEventElapsedTime", (float *, CUevent, CUevent))                         \
  X(cuLaunchKernel, "cuLaunchKernel",                                                              \
    (CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, CUstream,   \
     void **, void **))                                                                            \
  X(cuGetErrorString, "cuGetErrorString", (cu_result, const char **))

/* Graphs (cuda.c replays a sequence of launches as one, runtime/replay.c): every symbol here is in
 * drivers of CUDA 12.0 and later. cuda.h binds cuGraphAddKernelNode and
 * cuGraphExecKernelNodeSetParams to their _v2 (CUDA 12.0, CUDA_KERNEL_NODE_PARAMS_v2) and
 * cuGraphInstantiate to cuGraphInstantiateWithFlags (CUDA 11.4; the name's CUDA 12 prototype);
 * cuGraphCreate, cuGraphLaunch, cuGraphExecDestroy and cuGraphDestroy are CUDA 10.0's. */
#define CU_GRAPH_FNS(X)                                                                            \
  X(cuGraphCreate, "cuGraphCreate", (CUgraph *, unsigned))                                         \
  X(cuGraphAddKernelNode, "cuGraphAddKernelNode_v2",                                               \
    (CUgraphNode *, CUgraph, const CUgraphNode *, size_t, const CUDA_KERNEL_NODE_PARAMS_v2 *))     \
  X(cuGraphInstantiate, "cuGraphInstantiateWithFlags",                                             \
    (CUgraphExec *, CUgraph, unsigned long long))                                                  \
  X(cuGraphExecKernelNodeSetParams, "cuGraphExecKernelNodeSetParams_v2",                           \
    (CUgraphExec, CUgraphNode, const CUDA_KERNEL_NODE_PARAMS_v2 *))                                \
  X(cuGraphLaunch, "cuGraphLaunch", (CUgraphExec, CUstream))                                       \
  X(cuGraphExecDestroy, "cuGraphExecDestroy", (CUgraphExec))                                       \
  X(cuGraphDestroy, "cuGraphDestroy", (CUgraph))

/* Host memory registration (rx_rt_buffer_import_host: the caller's memory pinned and mapped for
 * the device): CUDA 4.0's; cuda.h binds cuMemHostRegister and cuMemHostGetDevicePointer to their
 * _v2 (CUDA 6.5 and 3.2). Optional: without them imports copy. */
#define CU_HOST_FNS(X)                                                                             \
  X(cuMemHostRegister, "cuMemHostRegister_v2", (void *, size_t, unsigned))                         \
  X(cuMemHostUnregister, "cuMemHostUnregister", (void *))                                          \
  X(cuMemHostGetDevicePointer, "cuMemHostGetDevicePointer_v2", (CUdeviceptr *, void *, unsigned))

#define CU_FNS(X) CU_BASE_FNS(X) CU_GRAPH_FNS(X) CU_HOST_FNS(X)

/* the entry points, as cuda.c fetches them */
struct cu_fns {
#define X(name, sym, params) cu_result(*name) params;
  CU_FNS(X)
#undef X
};

#endif
