/* runtime/cuda/cuda.c: the CUDA backend of the device interface, over the driver API.
 *
 * libcuda.so.1 is opened with dlopen and the entry points fetched with dlsym (no cuda.h: the few
 * types, constants and entry points used are declared by hand in cuda_api.h, which
 * tests/runtime/cuda_decls_test.c checks against the toolkit's cuda.h, so this file builds where
 * no CUDA toolkit is installed). One primary context per device, one non-blocking
 * stream per opened device: launches, fills and copies are queued on it in order; reads and
 * writes synchronize it. Kernels come from the cubin (`binary`) or, where that does not load (an
 * other architecture), from the PTX, which the driver compiles. Symbolic values are int
 * parameters after the buffer pointers (docs/kernel-abi.md). Timers are pairs of events.
 *
 * Launches are logged and replayed as CUDA graphs (runtime/replay.c, update mode;
 * runtime/device.h, "replaying launches"): the log is flushed before anything else that uses the
 * stream or its order, a sequence seen a second time becomes a graph whose changed nodes are
 * updated before each replay, and a graph the driver refuses falls back to direct launches.
 * Buffers come from a per-device cache of freed blocks in size classes, reused without
 * synchronizing (every use is ordered on the one stream). RX_CUDA_GRAPHS=0 and RX_CUDA_CACHE=0
 * turn each off. Both in full: docs/backends.md, "Replaying launches" and "CUDA memory". */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/cuda/cuda_api.h"
#include "runtime/device.h"

static struct cu_fns cu;

/* The log is flushed when it holds this many launches: a long one-off sequence (a prefill of
 * many layers) would otherwise wait whole for the next read while the GPU idles, and the log
 * (about 100 bytes a launch) grow without bound. A longer sequence that repeats is replayed as
 * graphs of this many nodes. */
#define CU_LOG_MAX 4096
/* A kernel's buffers, and its symbolic values, at most: its parameters are gathered on the C
 * stack (no generated kernel comes near). */
#define CU_MAX_ARGS 64
/* The alignment of imported host memory (rx_rt_buffer_import_host): cuMemAlloc's. */
#define CU_IMPORT_ALIGN 256

/* A freed allocation kept for reuse (see "memory" below). */
typedef struct cu_block {
  CUdeviceptr ptr;
  size_t bytes; /* its size class */
} cu_block;

typedef struct cu_device {
  rx_rt_device base;
  CUdevice dev;
  CUcontext ctx;
  CUstream stream;
  bool graphs;      /* launches replayed as graphs (the driver can; not RX_CUDA_GRAPHS=0) */
  rt_replay replay; /* the launches not yet issued, and the graphs of earlier sequences */
  pthread_mutex_t free_lock; /* guards the cache of freed blocks */
  cu_block *free;            /* freed blocks, kept for reuse */
  size_t nfree, cap_free;
  bool free_lock_made;
  bool cache; /* released blocks are kept (not RX_CUDA_CACHE=0) */
} cu_device;

typedef struct cu_buffer {
  rx_rt_buffer base;
  CUdeviceptr ptr;
  size_t bytes; /* the size class allocated (>= base.size) */
  void *host;   /* imported: the caller's memory, registered (cuMemHostRegister), ptr its address */
} cu_buffer;

typedef struct cu_timer {
  rx_rt_timer base;
  CUevent ev[2];
} cu_timer;

typedef struct cu_kernel {
  CUmodule mod;
  CUfunction fn;
} cu_kernel;

/* A sequence of launches as a graph (rt_replay_entry.impl): the graph, its instantiation, and
 * its kernel nodes in launch order (the handles by which the instantiation's nodes are updated;
 * they live as long as the graph). */
typedef struct cu_graph {
  CUgraph graph;
  CUgraphExec exec;
  size_t n;
  CUgraphNode nodes[];
} cu_graph;

static rx_status cufail(cu_device *d, cu_result r, const char *what) {
  const char *msg = NULL;
  if (cu.cuGetErrorString) cu.cuGetErrorString(r, &msg);
  rx_status_code code = r == RES_OUT_OF_MEMORY ? RX_ERR_OUT_OF_MEMORY : RX_ERR_DEVICE;
  rx_status s =
      base_status_make(code, "cuda:%d (%s): %s failed: %s (%u)", d ? d->base.info.index : 0,
                       d ? d->base.info.name : "", what, msg ? msg : "unknown error", r);
  /* errors after which the context is unusable: sticky, like a lost device */
  if (d && (r == RES_ILLEGAL_ADDRESS || r == RES_LAUNCH_FAILED) && !d->base.lost)
    d->base.lost =
        base_status_make(RX_ERR_DEVICE, "%s (the CUDA context is lost)", rx_status_message(s));
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
static bool cu_graphs;      /* the driver has every entry point of CU_GRAPH_FNS (CUDA 12.0) */
static bool cu_host;        /* the driver has every entry point of CU_HOST_FNS */

static void cu_load(void) {
  static const char *const names[] = {"libcuda.so.1", "libcuda.so"};
  char why[512];
  void *lib = rt_dlopen_first(names, RX_ARRAY_LEN(names), why, sizeof why);
  if (!lib) {
    cu_cached = base_status_make(RX_ERR_NOT_FOUND,
                                 "cuda: libcuda.so.1 not found: install the NVIDIA "
                                 "driver (the CUDA toolkit alone does not provide it) (dlopen: %s)",
                                 why);
    return;
  }
#define X(name, sym, params)                                                                       \
  if (!cu_cached) {                                                                                \
    cu.name = (cu_result(*) params)(uintptr_t)dlsym(lib, sym);                                     \
    if (!cu.name)                                                                                  \
      cu_cached = base_status_make(RX_ERR_NOT_FOUND,                                               \
                                   "cuda: libcuda.so.1 lacks %s: the driver is too "               \
                                   "old",                                                          \
                                   sym);                                                           \
  }
  CU_BASE_FNS(X)
#undef X
  /* optional: a driver older than CUDA 12.0 lacks some, and its launches are issued directly */
  cu_graphs = true;
#define X(name, sym, params)                                                                       \
  cu.name = (cu_result(*) params)(uintptr_t)dlsym(lib, sym);                                       \
  cu_graphs = cu_graphs && cu.name;
  CU_GRAPH_FNS(X)
#undef X
  cu_host = true;
#define X(name, sym, params)                                                                       \
  cu.name = (cu_result(*) params)(uintptr_t)dlsym(lib, sym);                                       \
  cu_host = cu_host && cu.name;
  CU_HOST_FNS(X)
#undef X
  if (!cu_cached) {
    cu_result r = cu.cuInit(0);
    if (r == RES_NO_DEVICE)
      cu_cached = base_status_make(RX_ERR_NOT_FOUND, "cuda: the driver found no CUDA device");
    else if (r != RES_SUCCESS)
      cu_cached = cufail(NULL, r, "cuInit");
  }
}

static rx_status cu_check(void) {
  pthread_once(&cu_once, cu_load);
  return cu_cached
             ? base_status_make(rx_status_code_of(cu_cached), "%s", rx_status_message(cu_cached))
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
  /* rx_rt_buffer_import_host: cuMemAlloc's alignment, which kernels' vector accesses assume */
  info->host_import_alignment = cu_host ? CU_IMPORT_ALIGN : 0;
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

/* ---- launches (defined below, with cu_launch) ---- */
static rx_status flush(cu_device *d);
static void graph_destroy(void *ctx, void *impl);

static const rt_native cu_native; /* below */

static rx_status cu_device_init(rx_rt_device *base, int index, const rx_rt_device_options *opts) {
  (void)opts;
  cu_device *d = (cu_device *)base;
  d->base.native = &cu_native;
  d->replay =
      (rt_replay){.alloc = &d->base.alloc, .exact = false, .destroy = graph_destroy, .ctx = d};
  const char *graphs = getenv("RX_CUDA_GRAPHS");
  d->graphs = cu_graphs && (!graphs || strcmp(graphs, "0") != 0);
  d->base.replay = d->graphs ? &d->replay.stats : NULL;
  const char *cache = getenv("RX_CUDA_CACHE");
  d->cache = !cache || strcmp(cache, "0") != 0;
  int n = 0;
  CU_TRY(NULL, cu.cuDeviceGetCount(&n), "cuDeviceGetCount");
  if (index >= n)
    return base_status_make(RX_ERR_NOT_FOUND, "cuda:%d: there are %d CUDA devices", index, n);
  CU_TRY(NULL, cu.cuDeviceGet(&d->dev, index), "cuDeviceGet");
  fill_info(d->dev, index, &d->base.info);
  CU_TRY(d, cu.cuDevicePrimaryCtxRetain(&d->ctx, d->dev), "cuDevicePrimaryCtxRetain");
  CU_TRY(d, cu.cuCtxSetCurrent(d->ctx), "cuCtxSetCurrent");
  CU_TRY(d, cu.cuStreamCreate(&d->stream, STREAM_NON_BLOCKING), "cuStreamCreate");
  if (pthread_mutex_init(&d->free_lock, NULL) != 0)
    return base_status_make(RX_ERR_INTERNAL, "cuda:%d: pthread_mutex_init failed", index);
  d->free_lock_made = true;
  return NULL;
}

/* Returns every cached block to the driver; the stream must be idle (synchronized). */
static void release_free_blocks(cu_device *d) {
  for (size_t i = 0; i < d->nfree; i++) cu.cuMemFree(d->free[i].ptr);
  d->nfree = 0;
}

static void cu_device_destroy(rx_rt_device *base) {
  cu_device *d = (cu_device *)base;
  if (!d->ctx) return; /* nothing was logged or built */
  cu.cuCtxSetCurrent(d->ctx);
  if (d->stream) {
    rx_status_free(flush(d)); /* nobody is left to be told of an error */
    cu.cuStreamSynchronize(d->stream);
  }
  rt_replay_free(&d->replay); /* its graphs, before the context may go */
  release_free_blocks(d);
  rt_free(&d->base.alloc, d->free);
  d->free = NULL;
  d->cap_free = 0;
  if (d->free_lock_made) pthread_mutex_destroy(&d->free_lock);
  if (d->stream) cu.cuStreamDestroy(d->stream);
  cu.cuDevicePrimaryCtxRelease(d->dev);
}

/* Every call makes the device's context current: one thread may use several devices. */
#define CTX(d) CU_TRY((d), cu.cuCtxSetCurrent((d)->ctx), "cuCtxSetCurrent")

static rx_status cu_synchronize(rx_rt_device *base) {
  cu_device *d = (cu_device *)base;
  CTX(d);
  RX_RETURN_IF_ERROR(flush(d));
  CU_TRY(d, cu.cuStreamSynchronize(d->stream), "cuStreamSynchronize");
  return NULL;
}

/* The size class of a buffer of n bytes: a power of two up to 1 MiB (256 bytes at least), a
 * multiple of 2 MiB above. */
static size_t size_class(size_t n) {
  if (n > ((size_t)1 << 20)) {
    size_t m = (size_t)2 << 20;
    return n > SIZE_MAX - m ? n : (n + m - 1) / m * m;
  }
  size_t c = 256;
  while (c < n) c <<= 1;
  return c;
}

static rx_status cu_buffer_init(rx_rt_buffer *base) {
  cu_device *d = (cu_device *)base->device;
  cu_buffer *b = (cu_buffer *)base;
  b->bytes = size_class(base->size);
  pthread_mutex_lock(&d->free_lock);
  for (size_t i = d->nfree; i-- > 0;) {
    if (d->free[i].bytes != b->bytes) continue;
    b->ptr = d->free[i].ptr; /* the most recently freed block of the class */
    d->free[i] = d->free[--d->nfree];
    pthread_mutex_unlock(&d->free_lock);
    return NULL;
  }
  pthread_mutex_unlock(&d->free_lock);
  CTX(d);
  cu_result r = cu.cuMemAlloc(&b->ptr, b->bytes);
  if (r == RES_OUT_OF_MEMORY && d->nfree) { /* give the cache back and try once more */
    RX_RETURN_IF_ERROR(flush(d));
    CU_TRY(d, cu.cuStreamSynchronize(d->stream), "cuStreamSynchronize");
    pthread_mutex_lock(&d->free_lock);
    release_free_blocks(d);
    pthread_mutex_unlock(&d->free_lock);
    r = cu.cuMemAlloc(&b->ptr, b->bytes);
  }
  if (r == RES_OUT_OF_MEMORY)
    return base_status_make(RX_ERR_OUT_OF_MEMORY,
                            "cuda:%d (%s): out of device memory allocating "
                            "%zu bytes",
                            d->base.info.index, d->base.info.name, base->size);
  if (r != RES_SUCCESS) return cufail(d, r, "cuMemAlloc");
  return NULL;
}

/* The block goes to the device's cache (no synchronization: see "memory" at the top); where the
 * cache cannot grow, back to the driver after the queued work. */
static void cu_buffer_destroy(rx_rt_buffer *base) {
  cu_device *d = (cu_device *)base->device;
  cu_buffer *b = (cu_buffer *)base;
  if (b->host) { /* imported: unregistered once the queued work is done with it */
    cu.cuCtxSetCurrent(d->ctx);
    rx_status_free(flush(d));
    cu.cuStreamSynchronize(d->stream);
    cu.cuMemHostUnregister(b->host);
    b->host = NULL;
    return;
  }
  pthread_mutex_lock(&d->free_lock);
  if (d->cache && d->nfree == d->cap_free) {
    size_t cap = d->cap_free ? 2 * d->cap_free : 16;
    cu_block *nb = rt_alloc(&d->base.alloc, cap * sizeof *nb);
    if (nb) {
      if (d->nfree) memcpy(nb, d->free, d->nfree * sizeof *nb);
      rt_free(&d->base.alloc, d->free);
      d->free = nb;
      d->cap_free = cap;
    }
  }
  if (d->cache && d->nfree < d->cap_free) {
    d->free[d->nfree++] = (cu_block){b->ptr, b->bytes};
    pthread_mutex_unlock(&d->free_lock);
    return;
  }
  pthread_mutex_unlock(&d->free_lock);
  cu.cuCtxSetCurrent(d->ctx);
  rx_status_free(flush(d));          /* logged launches may use it (an error: no one to tell) */
  cu.cuStreamSynchronize(d->stream); /* queued work may still use it */
  cu.cuMemFree(b->ptr);
}

/* The caller's memory registered as mapped pinned memory (cuMemHostRegister with DEVICEMAP) and
 * used through its device address. Declines (*kind, NULL) where the driver lacks registration,
 * where ptr is not aligned as cuMemAlloc's memory is (kernels' vector accesses assume it) or the
 * size is not whole 4-byte words, and where the driver refuses the range (already registered,
 * for one: a range registers once). */
static rx_status cu_buffer_import(rx_rt_buffer *base, void *ptr, rx_rt_import *kind) {
  cu_device *d = (cu_device *)base->device;
  cu_buffer *b = (cu_buffer *)base;
  *kind = RX_RT_IMPORT_COPY_UNSUPPORTED;
  if (!cu_host) return NULL;
  *kind = RX_RT_IMPORT_COPY_UNALIGNED;
  if ((uintptr_t)ptr % CU_IMPORT_ALIGN || base->size % 4) return NULL;
  CTX(d);
  *kind = RX_RT_IMPORT_COPY_REFUSED;
  if (cu.cuMemHostRegister(ptr, base->size, HOSTREGISTER_DEVICEMAP) != RES_SUCCESS) return NULL;
  CUdeviceptr dp = 0;
  cu_result r = cu.cuMemHostGetDevicePointer(&dp, ptr, 0);
  if (r != RES_SUCCESS) {
    cu.cuMemHostUnregister(ptr);
    return cufail(d, r, "cuMemHostGetDevicePointer");
  }
  b->ptr = dp;
  b->host = ptr;
  *kind = RX_RT_IMPORT_IN_PLACE;
  return NULL;
}

/* Only imported buffers are host memory: device memory is read with a copy. */
static rx_status cu_buffer_map(rx_rt_buffer *base, void **out_ptr) {
  cu_device *d = (cu_device *)base->device;
  cu_buffer *b = (cu_buffer *)base;
  if (!b->host)
    return base_status_make(RX_ERR_UNSUPPORTED,
                            "cuda:%d (%s): the buffer is in device memory the host cannot map "
                            "(read it with rx_rt_buffer_read)",
                            d->base.info.index, d->base.info.name);
  RX_RETURN_IF_ERROR(cu_synchronize(base->device));
  *out_ptr = b->host;
  return NULL;
}

static rx_status cu_buffer_write(rx_rt_buffer *base, size_t off, const void *src, size_t n) {
  cu_device *d = (cu_device *)base->device;
  CTX(d);
  RX_RETURN_IF_ERROR(flush(d));
  CU_TRY(d, cu.cuMemcpyHtoDAsync(((cu_buffer *)base)->ptr + off, src, n, d->stream),
         "cuMemcpyHtoDAsync");
  CU_TRY(d, cu.cuStreamSynchronize(d->stream), "cuStreamSynchronize");
  return NULL;
}

static rx_status cu_buffer_read(rx_rt_buffer *base, size_t off, void *dst, size_t n) {
  cu_device *d = (cu_device *)base->device;
  CTX(d);
  RX_RETURN_IF_ERROR(flush(d));
  CU_TRY(d, cu.cuMemcpyDtoHAsync(dst, ((cu_buffer *)base)->ptr + off, n, d->stream),
         "cuMemcpyDtoHAsync");
  CU_TRY(d, cu.cuStreamSynchronize(d->stream), "cuStreamSynchronize");
  return NULL;
}

static rx_status cu_buffer_fill(rx_rt_buffer *base, size_t off, size_t n, uint8_t value) {
  cu_device *d = (cu_device *)base->device;
  CTX(d);
  RX_RETURN_IF_ERROR(flush(d));
  CU_TRY(d, cu.cuMemsetD8Async(((cu_buffer *)base)->ptr + off, value, n, d->stream),
         "cuMemsetD8Async");
  return NULL;
}

static rx_status cu_buffer_copy(rx_rt_buffer *src, size_t so, rx_rt_buffer *dst, size_t dof,
                                size_t n) {
  cu_device *d = (cu_device *)src->device;
  CTX(d);
  RX_RETURN_IF_ERROR(flush(d));
  CU_TRY(d,
         cu.cuMemcpyDtoDAsync(((cu_buffer *)dst)->ptr + dof, ((cu_buffer *)src)->ptr + so, n,
                              d->stream),
         "cuMemcpyDtoDAsync");
  return NULL;
}

/* Frees k's module (the context current, nothing queued using it). */
static void kernel_free(cu_device *d, rx_rt_kernel *k) {
  cu_kernel *ck = k->impl;
  if (ck->mod) cu.cuModuleUnload(ck->mod);
  rt_free(&d->base.alloc, ck);
  k->impl = NULL;
}

static void cu_kernel_destroy(rx_rt_device *base, rx_rt_kernel *k) {
  cu_device *d = (cu_device *)base;
  if (!k->impl) return;
  cu.cuCtxSetCurrent(d->ctx);
  rx_status_free(flush(d));    /* logged launches may use it (an error: no one to tell) */
  rt_replay_clear(&d->replay); /* graphs hold its CUfunction, and its address may come back */
  cu.cuStreamSynchronize(d->stream);
  kernel_free(d, k);
}

static rx_status cu_kernel_create(rx_rt_device *base, rx_rt_kernel *k) {
  cu_device *d = (cu_device *)base;
  if (k->scalar_location != RT_SCALARS_NONE && k->scalar_location != RT_SCALARS_PARAMETERS)
    return base_status_make(RX_ERR_INVALID, "scalars.location must be parameters for CUDA");
  if (k->subgroup_size && k->subgroup_size != d->base.info.subgroup_size)
    return base_status_make(RX_ERR_UNSUPPORTED,
                            "cuda:%d (%s): kernel '%s' was scheduled for warps of %u threads; the "
                            "device's warps have %u",
                            d->base.info.index, d->base.info.name, k->name, k->subgroup_size,
                            d->base.info.subgroup_size);
  CTX(d);
  cu_kernel *ck = rt_alloc(&d->base.alloc, sizeof *ck);
  if (!ck) return rt_oom("a kernel", sizeof *ck);
  k->impl = ck;
  cu_result r = RES_INVALID_IMAGE; /* neither a cubin nor PTX (library.c requires one) */
  if (k->binary) r = cu.cuModuleLoadData(&ck->mod, k->binary);
  if (r != RES_SUCCESS && k->ptx) r = cu.cuModuleLoadData(&ck->mod, k->ptx); /* JIT */
  if (r != RES_SUCCESS) {
    ck->mod = NULL;
    kernel_free(d, k);
    return cufail(d, r, "cuModuleLoadData (cubin and PTX)");
  }
  r = cu.cuModuleGetFunction(&ck->fn, ck->mod, k->name);
  if (r != RES_SUCCESS) {
    kernel_free(d, k);
    return base_status_make(RX_ERR_NOT_FOUND,
                            "the module has no function '%s' (extern \"C\" "
                            "__global__ expected)",
                            k->name);
  }
  if (k->shared_dynamic && k->shared_bytes > 48 * 1024) {
    r = cu.cuFuncSetAttribute(ck->fn, FUNC_ATTR_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                              (int)k->shared_bytes);
    if (r != RES_SUCCESS) {
      kernel_free(d, k);
      return cufail(d, r, "cuFuncSetAttribute (shared memory)");
    }
  }
  return NULL;
}

/* ---- launches: logged, issued or replayed as a graph at a flush ---- */
/* A launch's words in the log: its buffers' device pointers, its symbolic values (int32, as
 * uint64) and its block. kernels.json fixes the block (runtime.c checks it) and the dynamic
 * shared memory (taken from the kernel); the block is a word all the same, so that a launch with
 * another block can never be replayed with a stale one. */
static uint32_t launch_words(const rx_rt_kernel *k) {
  return (uint32_t)(k->nbuffers + k->nscalars + 3);
}

/* A launch's parameters, and the values its kernelParams point to. */
typedef struct cu_args {
  CUDA_KERNEL_NODE_PARAMS_v2 p;
  void *args[2 * CU_MAX_ARGS];
  CUdeviceptr ptrs[CU_MAX_ARGS];
  int32_t vals[CU_MAX_ARGS];
} cu_args;

/* Fills a with the launch of k over grid and words w (launch_words of them). */
static void args_of(const rx_rt_kernel *k, const uint32_t grid[3], const uint64_t *w, cu_args *a) {
  size_t na = 0;
  for (size_t i = 0; i < k->nbuffers; i++) {
    a->ptrs[i] = (CUdeviceptr)*w++;
    a->args[na++] = &a->ptrs[i];
  }
  for (size_t i = 0; i < k->nscalars; i++) {
    a->vals[i] = (int32_t)(uint32_t)*w++;
    a->args[na++] = &a->vals[i];
  }
  a->p = (CUDA_KERNEL_NODE_PARAMS_v2){
      .func = ((const cu_kernel *)k->impl)->fn,
      .gridDimX = grid[0],
      .gridDimY = grid[1],
      .gridDimZ = grid[2],
      .blockDimX = (unsigned)w[0],
      .blockDimY = (unsigned)w[1],
      .blockDimZ = (unsigned)w[2],
      /* dynamic shared memory only: a kernel's static __shared__ arrays need none, and asking for
       * their size again would double its shared memory (past 48 KiB: a failed launch) */
      .sharedMemBytes = k->shared_dynamic ? k->shared_bytes : 0,
      .kernelParams = a->args,
  };
}

/* Launch i of the log. */
static void log_args(const rt_replay_log *l, size_t i, cu_args *a) {
  const rt_replay_launch *x = &l->launches[i];
  RX_ASSERT(x->n == launch_words(x->k));
  args_of(x->k, x->grid, l->words + x->off, a);
}

static rx_status issue(cu_device *d, const CUDA_KERNEL_NODE_PARAMS_v2 *p) {
  CU_TRY(d,
         cu.cuLaunchKernel(p->func, p->gridDimX, p->gridDimY, p->gridDimZ, p->blockDimX,
                           p->blockDimY, p->blockDimZ, p->sharedMemBytes, d->stream,
                           p->kernelParams, NULL),
         "cuLaunchKernel");
  return NULL;
}

/* The launches of the log, issued one by one; the first error ends it. */
static rx_status issue_log(cu_device *d) {
  const rt_replay_log *l = &d->replay.log;
  for (size_t i = 0; i < l->n; i++) {
    cu_args a;
    log_args(l, i, &a);
    RX_RETURN_IF_ERROR(issue(d, &a.p));
  }
  return NULL;
}

/* rt_replay.destroy. An instantiation still running is freed when it completes (cuda.h). */
static void graph_destroy(void *ctx, void *impl) {
  cu_device *d = ctx;
  cu_graph *g = impl;
  cu.cuCtxSetCurrent(d->ctx);
  if (g->exec) cu.cuGraphExecDestroy(g->exec);
  if (g->graph) cu.cuGraphDestroy(g->graph);
  rt_free(&d->base.alloc, g);
}

/* The log as an instantiated graph, or NULL where the driver or host memory fails (what was
 * made is destroyed). */
static cu_graph *graph_build(cu_device *d) {
  const rt_replay_log *l = &d->replay.log;
  cu_graph *g = rt_alloc(&d->base.alloc, sizeof *g + l->n * sizeof *g->nodes);
  if (!g) return NULL;
  g->n = l->n;
  bool ok = cu.cuGraphCreate(&g->graph, 0) == RES_SUCCESS;
  if (!ok) g->graph = NULL;
  for (size_t i = 0; ok && i < l->n; i++) {
    cu_args a;
    log_args(l, i, &a);
    const CUgraphNode *after = i ? &g->nodes[i - 1] : NULL; /* in order: each after the last */
    ok = cu.cuGraphAddKernelNode(&g->nodes[i], g->graph, after, i ? 1 : 0, &a.p) == RES_SUCCESS;
  }
  if (ok && cu.cuGraphInstantiate(&g->exec, g->graph, 0) != RES_SUCCESS) {
    g->exec = NULL;
    ok = false;
  }
  if (ok) return g;
  graph_destroy(d, g);
  return NULL;
}

/* A replay: the launches of the log that differ from e's last run are given to their nodes. */
static bool graph_update(cu_device *d, rt_replay_entry *e) {
  const rt_replay_log *l = &d->replay.log;
  cu_graph *g = e->impl;
  RX_ASSERT(g->n == l->n);
  for (size_t i = 0; i < l->n; i++) {
    if (!rt_replay_changed(&d->replay, e, i)) continue;
    cu_args a;
    log_args(l, i, &a);
    if (cu.cuGraphExecKernelNodeSetParams(g->exec, g->nodes[i], &a.p) != RES_SUCCESS) return false;
    d->replay.stats.updated++;
  }
  return true;
}

/* Issues the log (the context current): directly, or as a graph built or updated. A graph that
 * cannot be built, updated or launched is given up (rt_replay_done, ok false) and the log issued
 * directly: a cuGraphLaunch that fails is taken to have enqueued nothing. Where the context is
 * broken, the direct launches fail too and report it. */
static rx_status flush(cu_device *d) {
  if (!d->replay.log.n) return NULL;
  rt_replay_entry *e = NULL;
  rt_replay_action act = rt_replay_find(&d->replay, &e);
  bool ok = false;
  if (act == RT_REPLAY_BUILD)
    ok = (e->impl = graph_build(d)) != NULL;
  else if (act == RT_REPLAY_HIT)
    ok = graph_update(d, e);
  if (ok) ok = cu.cuGraphLaunch(((cu_graph *)e->impl)->exec, d->stream) == RES_SUCCESS;
  rx_status s = ok ? NULL : issue_log(d);
  rt_replay_done(&d->replay, e, ok); /* empties the log, whatever happened */
  return s;
}

static rx_status cu_launch(rx_rt_device *base, rx_rt_kernel *k, const rx_rt_launch_params *p) {
  cu_device *d = (cu_device *)base;
  if (k->nbuffers > CU_MAX_ARGS || k->nscalars > CU_MAX_ARGS)
    return base_status_make(RX_ERR_UNSUPPORTED, "kernel '%s': more than %d arguments of a kind",
                            k->name, CU_MAX_ARGS);
  uint64_t w[2 * CU_MAX_ARGS + 3];
  uint32_t n = 0;
  for (size_t i = 0; i < k->nbuffers; i++) w[n++] = ((const cu_buffer *)p->buffers[i])->ptr;
  for (size_t i = 0; i < k->nscalars; i++) w[n++] = (uint32_t)p->scalars[i];
  for (int i = 0; i < 3; i++) w[n++] = p->block[i];
  RX_ASSERT(n == launch_words(k));
  if (d->graphs) {
    RX_RETURN_IF_ERROR(rt_replay_add(&d->replay, k, p->grid, w, n));
    if (d->replay.log.n < CU_LOG_MAX) return NULL;
    CTX(d);
    return flush(d);
  }
  cu_args a;
  args_of(k, p->grid, w, &a);
  CTX(d);
  return issue(d, &a.p);
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
  RX_RETURN_IF_ERROR(flush(d));
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

/* ---- native handles for libraries (runtime/cuda/cublaslt.c) ---- */
static rx_status cu_native_queue(rx_rt_device *base, void **out_queue) {
  cu_device *d = (cu_device *)base;
  *out_queue = NULL;
  CTX(d);
  RX_RETURN_IF_ERROR(flush(d)); /* the library's work follows the launches logged before it */
  *out_queue = d->stream;
  return NULL;
}

static uint64_t cu_native_address(rx_rt_buffer *b) { return ((cu_buffer *)b)->ptr; }

static const rt_native cu_native = {cu_native_queue, cu_native_address};

const rt_backend rt_cuda_backend = {
    cu_check,          cu_enumerate,      sizeof(cu_device), sizeof(cu_buffer), sizeof(cu_timer),
    cu_device_init,    cu_device_destroy, cu_synchronize,    cu_buffer_init,    cu_buffer_destroy,
    cu_buffer_write,   cu_buffer_read,    cu_buffer_fill,    cu_buffer_copy,    cu_kernel_create,
    cu_kernel_destroy, cu_launch,         cu_timer_init,     cu_timer_destroy,  cu_timer_record,
    cu_timer_elapsed,  cu_buffer_import,  cu_buffer_map,
};
