/* runtime/cuda/cuda.c: the CUDA backend of the device interface, over the driver API.
 *
 * libcuda.so.1 is opened with dlopen and the entry points fetched with dlsym (no cuda.h: the few
 * types, constants and entry points used are declared by hand in cuda_api.h, which
 * tests/runtime/cuda_decls_test.c checks against the toolkit's cuda.h, so this file builds where
 * no CUDA toolkit is installed). One primary context per device, one non-blocking
 * stream per opened device: launches, fills and copies are queued on it in order; reads and
 * writes synchronize it. Kernels come from the cubin (`binary`) or, where that does not load (an
 * other architecture), from the PTX, which the driver compiles. Symbolic values are int
 * parameters after the buffer pointers (docs/kernel-abi.md). Timers are pairs of events. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "runtime/cuda/cuda_api.h"
#include "runtime/device.h"

static struct cu_fns cu;

typedef struct cu_device {
  rx_rt_device base;
  CUdevice dev;
  CUcontext ctx;
  CUstream stream;
} cu_device;

typedef struct cu_buffer {
  rx_rt_buffer base;
  CUdeviceptr ptr;
} cu_buffer;

typedef struct cu_timer {
  rx_rt_timer base;
  CUevent ev[2];
} cu_timer;

typedef struct cu_kernel {
  CUmodule mod;
  CUfunction fn;
} cu_kernel;

static rx_status cufail(cu_device *d, cu_result r, const char *what) {
  const char *msg = NULL;
  if (cu.cuGetErrorString) cu.cuGetErrorString(r, &msg);
  rx_status_code code = r == RES_OUT_OF_MEMORY ? RX_ERR_OUT_OF_MEMORY : RX_ERR_DEVICE;
  rx_status s = rx_status_make(code, "cuda:%d (%s): %s failed: %s (%u)", d ? d->base.info.index : 0,
                               d ? d->base.info.name : "", what, msg ? msg : "unknown error", r);
  /* errors after which the context is unusable: sticky, like a lost device */
  if (d && (r == RES_ILLEGAL_ADDRESS || r == RES_LAUNCH_FAILED) && !d->base.lost)
    d->base.lost =
        rx_status_make(RX_ERR_DEVICE, "%s (the CUDA context is lost)", rx_status_message(s));
  return s;
}

#define CU_TRY(d, call, what)                                                                      \
  do {                                                                                             \
    cu_result r_ = (call);                                                                         \
    if (r_ != RES_SUCCESS) return cufail((d), r_, (what));                                         \
  } while (0)

/* The driver: opened once, under pthread_once (concurrent first calls are safe), and the
 * answer kept for every later caller. */
static pthread_once_t cu_once = PTHREAD_ONCE_INIT;
static rx_status cu_cached; /* why the driver cannot be used, or NULL */

static void cu_load(void) {
  static const char *const names[] = {"libcuda.so.1", "libcuda.so"};
  char why[512];
  void *lib = rt_dlopen_first(names, RX_ARRAY_LEN(names), why, sizeof why);
  if (!lib) {
    cu_cached = rx_status_make(RX_ERR_NOT_FOUND,
                               "cuda: libcuda.so.1 not found: install the NVIDIA "
                               "driver (the CUDA toolkit alone does not provide it) (dlopen: %s)",
                               why);
    return;
  }
#define X(name, sym, params)                                                                       \
  if (!cu_cached) {                                                                                \
    cu.name = (cu_result(*) params)(uintptr_t)dlsym(lib, sym);                                     \
    if (!cu.name)                                                                                  \
      cu_cached = rx_status_make(RX_ERR_NOT_FOUND,                                                 \
                                 "cuda: libcuda.so.1 lacks %s: the driver is too "                 \
                                 "old",                                                            \
                                 sym);                                                             \
  }
  CU_FNS(X)
#undef X
  if (!cu_cached) {
    cu_result r = cu.cuInit(0);
    if (r == RES_NO_DEVICE)
      cu_cached = rx_status_make(RX_ERR_NOT_FOUND, "cuda: the driver found no CUDA device");
    else if (r != RES_SUCCESS)
      cu_cached = cufail(NULL, r, "cuInit");
  }
}

static rx_status cu_check(void) {
  pthread_once(&cu_once, cu_load);
  return cu_cached
             ? rx_status_make(rx_status_code_of(cu_cached), "%s", rx_status_message(cu_cached))
             : NULL;
}

static void fill_info(CUdevice dev, int index, rx_rt_device_info *info) {
  memset(info, 0, sizeof *info);
  info->backend = RX_RT_BACKEND_CUDA;
  info->index = index;
  cu.cuDeviceGetName(info->name, (int)sizeof info->name, dev);
  size_t mem = 0;
  cu.cuDeviceTotalMem(&mem, dev);
  info->memory_bytes = mem;
  int v = 0, major = 0, minor = 0;
  cu.cuDeviceGetAttribute(&v, ATTR_WARP_SIZE, dev);
  info->subgroup_size = (uint32_t)v;
  v = 0;
  if (cu.cuDeviceGetAttribute(&v, ATTR_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, dev) != RES_SUCCESS || !v)
    cu.cuDeviceGetAttribute(&v, ATTR_MAX_SHARED_MEMORY_PER_BLOCK, dev);
  info->shared_memory_bytes = (uint32_t)v;
  cu.cuDeviceGetAttribute(&v, ATTR_MAX_THREADS_PER_BLOCK, dev);
  info->max_threads_per_block = (uint32_t)v;
  cu.cuDeviceGetAttribute(&major, ATTR_CC_MAJOR, dev);
  cu.cuDeviceGetAttribute(&minor, ATTR_CC_MINOR, dev);
  info->fp16 = major * 10 + minor >= 53;
  info->int8 = true;
  info->timestamps = true;
  info->unified_memory = false;
  info->push_constant_bytes = 0;
}

static rx_status cu_enumerate(rx_rt_device_info **out_infos, size_t *out_count,
                              const rx_rt_allocator *a) {
  int n = 0;
  CU_TRY(NULL, cu.cuDeviceGetCount(&n), "cuDeviceGetCount");
  if (n <= 0) return NULL;
  rx_rt_device_info *infos = rt_alloc(a, (size_t)n * sizeof *infos);
  if (!infos) return rt_oom("device infos", (size_t)n * sizeof *infos);
  for (int i = 0; i < n; i++) {
    CUdevice dev = 0;
    cu.cuDeviceGet(&dev, i);
    fill_info(dev, i, &infos[i]);
  }
  *out_infos = infos;
  *out_count = (size_t)n;
  return NULL;
}

static rx_status cu_device_init(rx_rt_device *base, int index, const rx_rt_device_options *opts) {
  (void)opts;
  cu_device *d = (cu_device *)base;
  int n = 0;
  CU_TRY(NULL, cu.cuDeviceGetCount(&n), "cuDeviceGetCount");
  if (index >= n)
    return rx_status_make(RX_ERR_NOT_FOUND, "cuda:%d: there are %d CUDA devices", index, n);
  CU_TRY(NULL, cu.cuDeviceGet(&d->dev, index), "cuDeviceGet");
  fill_info(d->dev, index, &d->base.info);
  CU_TRY(d, cu.cuDevicePrimaryCtxRetain(&d->ctx, d->dev), "cuDevicePrimaryCtxRetain");
  CU_TRY(d, cu.cuCtxSetCurrent(d->ctx), "cuCtxSetCurrent");
  CU_TRY(d, cu.cuStreamCreate(&d->stream, STREAM_NON_BLOCKING), "cuStreamCreate");
  return NULL;
}

static void cu_device_destroy(rx_rt_device *base) {
  cu_device *d = (cu_device *)base;
  if (d->ctx) {
    cu.cuCtxSetCurrent(d->ctx);
    if (d->stream) {
      cu.cuStreamSynchronize(d->stream);
      cu.cuStreamDestroy(d->stream);
    }
    cu.cuDevicePrimaryCtxRelease(d->dev);
  }
}

/* Every call makes the device's context current: one thread may use several devices. */
#define CTX(d) CU_TRY((d), cu.cuCtxSetCurrent((d)->ctx), "cuCtxSetCurrent")

static rx_status cu_synchronize(rx_rt_device *base) {
  cu_device *d = (cu_device *)base;
  CTX(d);
  CU_TRY(d, cu.cuStreamSynchronize(d->stream), "cuStreamSynchronize");
  return NULL;
}

static rx_status cu_buffer_init(rx_rt_buffer *base) {
  cu_device *d = (cu_device *)base->device;
  CTX(d);
  cu_result r = cu.cuMemAlloc(&((cu_buffer *)base)->ptr, base->size);
  if (r == RES_OUT_OF_MEMORY)
    return rx_status_make(RX_ERR_OUT_OF_MEMORY,
                          "cuda:%d (%s): out of device memory allocating "
                          "%zu bytes",
                          d->base.info.index, d->base.info.name, base->size);
  if (r != RES_SUCCESS) return cufail(d, r, "cuMemAlloc");
  return NULL;
}

static void cu_buffer_destroy(rx_rt_buffer *base) {
  cu_device *d = (cu_device *)base->device;
  cu.cuCtxSetCurrent(d->ctx);
  cu.cuStreamSynchronize(d->stream); /* queued work may still use it */
  cu.cuMemFree(((cu_buffer *)base)->ptr);
}

static rx_status cu_buffer_write(rx_rt_buffer *base, size_t off, const void *src, size_t n) {
  cu_device *d = (cu_device *)base->device;
  CTX(d);
  CU_TRY(d, cu.cuMemcpyHtoDAsync(((cu_buffer *)base)->ptr + off, src, n, d->stream),
         "cuMemcpyHtoDAsync");
  CU_TRY(d, cu.cuStreamSynchronize(d->stream), "cuStreamSynchronize");
  return NULL;
}

static rx_status cu_buffer_read(rx_rt_buffer *base, size_t off, void *dst, size_t n) {
  cu_device *d = (cu_device *)base->device;
  CTX(d);
  CU_TRY(d, cu.cuMemcpyDtoHAsync(dst, ((cu_buffer *)base)->ptr + off, n, d->stream),
         "cuMemcpyDtoHAsync");
  CU_TRY(d, cu.cuStreamSynchronize(d->stream), "cuStreamSynchronize");
  return NULL;
}

static rx_status cu_buffer_fill(rx_rt_buffer *base, size_t off, size_t n, uint8_t value) {
  cu_device *d = (cu_device *)base->device;
  CTX(d);
  CU_TRY(d, cu.cuMemsetD8Async(((cu_buffer *)base)->ptr + off, value, n, d->stream),
         "cuMemsetD8Async");
  return NULL;
}

static rx_status cu_buffer_copy(rx_rt_buffer *src, size_t so, rx_rt_buffer *dst, size_t dof,
                                size_t n) {
  cu_device *d = (cu_device *)src->device;
  CTX(d);
  CU_TRY(d,
         cu.cuMemcpyDtoDAsync(((cu_buffer *)dst)->ptr + dof, ((cu_buffer *)src)->ptr + so, n,
                              d->stream),
         "cuMemcpyDtoDAsync");
  return NULL;
}

static void cu_kernel_destroy(rx_rt_device *base, rx_rt_kernel *k) {
  cu_device *d = (cu_device *)base;
  cu_kernel *ck = k->impl;
  if (!ck) return;
  cu.cuCtxSetCurrent(d->ctx);
  cu.cuStreamSynchronize(d->stream);
  if (ck->mod) cu.cuModuleUnload(ck->mod);
  rt_free(&d->base.alloc, ck);
  k->impl = NULL;
}

static rx_status cu_kernel_create(rx_rt_device *base, rx_rt_kernel *k) {
  cu_device *d = (cu_device *)base;
  if (k->scalar_location != RT_SCALARS_NONE && k->scalar_location != RT_SCALARS_PARAMETERS)
    return rx_status_make(RX_ERR_INVALID, "scalars.location must be parameters for CUDA");
  CTX(d);
  cu_kernel *ck = rt_alloc(&d->base.alloc, sizeof *ck);
  if (!ck) return rt_oom("a kernel", sizeof *ck);
  k->impl = ck;
  cu_result r = RES_INVALID_IMAGE; /* neither a cubin nor PTX (library.c requires one) */
  if (k->binary) r = cu.cuModuleLoadData(&ck->mod, k->binary);
  if (r != RES_SUCCESS && k->ptx) r = cu.cuModuleLoadData(&ck->mod, k->ptx); /* JIT */
  if (r != RES_SUCCESS) {
    ck->mod = NULL;
    cu_kernel_destroy(base, k);
    return cufail(d, r, "cuModuleLoadData (cubin and PTX)");
  }
  r = cu.cuModuleGetFunction(&ck->fn, ck->mod, k->name);
  if (r != RES_SUCCESS) {
    cu_kernel_destroy(base, k);
    return rx_status_make(RX_ERR_NOT_FOUND,
                          "the module has no function '%s' (extern \"C\" "
                          "__global__ expected)",
                          k->name);
  }
  if (k->shared_bytes > 48 * 1024) {
    r = cu.cuFuncSetAttribute(ck->fn, FUNC_ATTR_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                              (int)k->shared_bytes);
    if (r != RES_SUCCESS) {
      cu_kernel_destroy(base, k);
      return cufail(d, r, "cuFuncSetAttribute (shared memory)");
    }
  }
  return NULL;
}

static rx_status cu_launch(rx_rt_device *base, rx_rt_kernel *k, const rx_rt_launch_params *p) {
  cu_device *d = (cu_device *)base;
  cu_kernel *ck = k->impl;
  void *args[128];
  CUdeviceptr ptrs[64];
  int32_t vals[64];
  if (k->nbuffers > 64 || k->nscalars > 64)
    return rx_status_make(RX_ERR_UNSUPPORTED, "kernel '%s': more than 64 arguments of a kind",
                          k->name);
  size_t na = 0;
  for (size_t i = 0; i < k->nbuffers; i++) {
    ptrs[i] = ((cu_buffer *)p->buffers[i])->ptr;
    args[na++] = &ptrs[i];
  }
  for (size_t i = 0; i < k->nscalars; i++) {
    vals[i] = p->scalars[i];
    args[na++] = &vals[i];
  }
  CTX(d);
  /* shared_bytes is the kernel's dynamic shared memory (static shared memory needs none) */
  CU_TRY(d,
         cu.cuLaunchKernel(ck->fn, p->grid[0], p->grid[1], p->grid[2], p->block[0], p->block[1],
                           p->block[2], k->shared_bytes, d->stream, args, NULL),
         "cuLaunchKernel");
  return NULL;
}

static rx_status cu_timer_init(rx_rt_timer *base) {
  cu_device *d = (cu_device *)base->device;
  cu_timer *t = (cu_timer *)base;
  CTX(d);
  CU_TRY(d, cu.cuEventCreate(&t->ev[0], EVENT_DEFAULT), "cuEventCreate");
  cu_result r = cu.cuEventCreate(&t->ev[1], EVENT_DEFAULT);
  if (r != RES_SUCCESS) {
    cu.cuEventDestroy(t->ev[0]);
    return cufail(d, r, "cuEventCreate");
  }
  return NULL;
}

static void cu_timer_destroy(rx_rt_timer *base) {
  cu_device *d = (cu_device *)base->device;
  cu.cuCtxSetCurrent(d->ctx);
  cu.cuEventDestroy(((cu_timer *)base)->ev[0]);
  cu.cuEventDestroy(((cu_timer *)base)->ev[1]);
}

static rx_status cu_timer_record(rx_rt_timer *base, int which) {
  cu_device *d = (cu_device *)base->device;
  CTX(d);
  CU_TRY(d, cu.cuEventRecord(((cu_timer *)base)->ev[which], d->stream), "cuEventRecord");
  return NULL;
}

static rx_status cu_timer_elapsed(rx_rt_timer *base, double *out_ms) {
  cu_device *d = (cu_device *)base->device;
  cu_timer *t = (cu_timer *)base;
  CTX(d);
  CU_TRY(d, cu.cuEventSynchronize(t->ev[1]), "cuEventSynchronize");
  float ms = 0;
  CU_TRY(d, cu.cuEventElapsedTime(&ms, t->ev[0], t->ev[1]), "cuEventElapsedTime");
  *out_ms = ms;
  return NULL;
}

const rt_backend rt_cuda_backend = {
    RX_RT_BACKEND_CUDA, "cuda",
    cu_check,           cu_enumerate,
    sizeof(cu_device),  sizeof(cu_buffer),
    sizeof(cu_timer),   cu_device_init,
    cu_device_destroy,  cu_synchronize,
    cu_buffer_init,     cu_buffer_destroy,
    cu_buffer_write,    cu_buffer_read,
    cu_buffer_fill,     cu_buffer_copy,
    cu_kernel_create,   cu_kernel_destroy,
    cu_launch,          cu_timer_init,
    cu_timer_destroy,   cu_timer_record,
    cu_timer_elapsed,
};
