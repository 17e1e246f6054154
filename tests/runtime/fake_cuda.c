/* tests/runtime/fake_cuda.c: a fake CUDA driver on the host, for tests/runtime/cuda_graph_test.c.
 * runtime/runtime.cmake builds it as libcuda.so.1 in a directory of its own (fake_cuda/ in the
 * build tree), which the test puts first on LD_LIBRARY_PATH and opens before the runtime does,
 * so that runtime/cuda/cuda.c loads it as it would the NVIDIA driver, and nothing of the test
 * depends on a real libcuda.
 *
 * It implements every entry point of CU_FNS (runtime/cuda/cuda_api.h) under the symbol cuda.c
 * looks up. One device; device memory is host memory (a CUdeviceptr is a host pointer), and
 * copies and fills are done at once for real. Modules accept any image; a function is a name
 * that the test declared (fake_cuda_kernel) with its count of pointer and int32 parameters.
 * Kernels run nothing: a launch, direct or as a node of a launched graph, appends a line to a
 * trace with the function, grid, block, shared bytes and the parameter values read through the
 * kernelParams pointers; copies, fills and events append theirs to the same trace, so that the
 * order of everything is checked. Pointers are shown as the allocation they point into ("#3",
 * "#3+16": the third allocation since the last reset), so that the test can write the lines it
 * expects.
 *
 * Graphs keep their own copy of every node's parameters, as the driver does: an instantiation
 * is a snapshot of its graph, cuGraphExecKernelNodeSetParams changes the instantiation only, and
 * a launch runs the snapshot, so a node that was not updated shows its old values. Among nodes
 * whose dependencies are met, the one added last runs first: a missing dependency shows as
 * launches out of order. A misuse the driver would refuse or that is undefined (a handle not
 * live, a range outside an allocation, a launch of a function whose module was unloaded, a
 * pointer parameter outside every live allocation) returns an error and appends an "ERROR:" line;
 * fake_cuda_count("misuse") counts them. Test-only functions (fake_cuda_*) are exported beside
 * the driver's, for the test to find with dlsym. */
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/cuda/cuda_api.h"

#define API __attribute__((visibility("default")))
/* FAKE_CUDA_NO_GRAPHS: a driver older than CUDA 12.0, without the graph entry points cuda.c uses
 * (CU_GRAPH_FNS): they are compiled, not exported */
#ifdef FAKE_CUDA_NO_GRAPHS
#define GRAPH_API static __attribute__((unused))
#else
#define GRAPH_API API
#endif

/* results beside cuda_api.h's (cuda.h's values) */
enum {
  RES_INVALID_VALUE = 1,     /* CUDA_ERROR_INVALID_VALUE */
  RES_INVALID_CONTEXT = 201, /* CUDA_ERROR_INVALID_CONTEXT */
  RES_INVALID_HANDLE = 400,  /* CUDA_ERROR_INVALID_HANDLE */
  RES_NOT_FOUND = 500,       /* CUDA_ERROR_NOT_FOUND */
  RES_NOT_SUPPORTED = 801,   /* CUDA_ERROR_NOT_SUPPORTED: what an injected failure returns */
};

#define MAX_PARAMS 16           /* pointer parameters, and int32 parameters, of a fake kernel */
#define MAX_FAILS  8            /* failures injected at once */
#define MAX_MEMORY (1ull << 40) /* a larger allocation is out of memory */

/* ---- state ---- */
typedef struct decl {
  char name[64];
  int nptrs, nints;
  struct decl *next;
} decl;

struct CUctx_st {
  int refs;
};
struct CUmod_st {
  struct CUmod_st *next;
};
struct CUfunc_st {
  const decl *kernel;
  CUmodule mod;    /* NULL once the module is unloaded */
  int max_dynamic; /* CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES: 48 KiB until raised */
  struct CUfunc_st *next;
};
struct CUstream_st {
  struct CUstream_st *next;
};
struct CUevent_st {
  struct CUevent_st *next;
};

typedef struct alloc {
  uint8_t *p;
  size_t n;
  long id;
  bool host; /* registered host memory (cuMemHostRegister): the caller's, not freed here */
  struct alloc *next;
} alloc;

/* a kernel's launch as the driver keeps it: the parameters' values, not pointers to them */
typedef struct kparams {
  CUfunction fn;
  unsigned grid[3], block[3], shared;
  CUdeviceptr ptrs[MAX_PARAMS];
  int32_t ints[MAX_PARAMS];
} kparams;

struct CUgraphNode_st {
  kparams k;
  CUgraph graph;
  size_t index; /* in graph->nodes */
  CUgraphNode *deps;
  size_t ndeps;
};
struct CUgraph_st {
  CUgraphNode *nodes;
  size_t n, cap;
  struct CUgraph_st *next;
};
struct CUgraphExec_st {
  CUgraphNode *handles; /* the graph's nodes in the order they run (compared, never read) */
  kparams *k;           /* their parameters, as instantiated or set since */
  size_t n;
  struct CUgraphExec_st *next;
};

static struct {
  struct CUctx_st ctx;
  CUcontext current;
  decl *decls;
  struct CUmod_st *modules;
  struct CUfunc_st *fns;
  struct CUstream_st *streams;
  struct CUevent_st *events;
  alloc *allocs;
  long nallocs;        /* ids handed out */
  size_t live_bytes;   /* of the live allocations */
  size_t memory_limit; /* fake_cuda_set_memory_limit */
  CUgraph graphs;
  CUgraphExec execs;
  char **trace;
  size_t ntrace, captrace;
  long graph_launches, node_updates, instantiations, misuse;
  struct {
    char entry[64];
    int skip, count;
  } fails[MAX_FAILS];
} F;

/* ---- the trace ---- */
__attribute__((format(printf, 1, 2))) static void trace(const char *fmt, ...) {
  char line[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  if (F.ntrace == F.captrace) {
    size_t cap = F.captrace ? 2 * F.captrace : 256;
    char **t = realloc(F.trace, cap * sizeof *t);
    if (!t) abort(); /* a test double out of host memory */
    F.trace = t;
    F.captrace = cap;
  }
  char *copy = malloc(strlen(line) + 1);
  if (!copy) abort();
  strcpy(copy, line);
  F.trace[F.ntrace++] = copy;
}

/* A misuse of the API: counted, traced, and returned. */
static cu_result misuse(cu_result r, const char *entry, const char *why) {
  F.misuse++;
  trace("ERROR: %s: %s", entry, why);
  return r;
}

/* A failure injected by fake_cuda_fail for entry, now. */
static bool injected(const char *entry) {
  for (int i = 0; i < MAX_FAILS; i++) {
    if (strcmp(F.fails[i].entry, entry) != 0 || !F.fails[i].count) continue;
    if (F.fails[i].skip > 0) {
      F.fails[i].skip--;
      return false;
    }
    F.fails[i].count--;
    return true;
  }
  return false;
}

/* ---- memory ---- */
/* The live allocation holding [p, p + n), or NULL. */
static alloc *find(CUdeviceptr p, size_t n) {
  for (alloc *a = F.allocs; a; a = a->next) {
    CUdeviceptr base = (CUdeviceptr)(uintptr_t)a->p;
    if (p >= base && p - base <= a->n && n <= a->n - (p - base)) return a;
  }
  return NULL;
}

/* "#id" or "#id+offset" for a pointer into a live allocation, else its value. */
static const char *name_of(CUdeviceptr p, char *buf, size_t size) {
  alloc *a = find(p, 0);
  CUdeviceptr off = a ? p - (CUdeviceptr)(uintptr_t)a->p : 0;
  if (!a)
    snprintf(buf, size, "0x%llx", p);
  else if (off)
    snprintf(buf, size, "#%ld+%llu", a->id, off);
  else
    snprintf(buf, size, "#%ld", a->id);
  return buf;
}

API cu_result cuMemAlloc_v2(CUdeviceptr *out, size_t n) {
  if (!out) return misuse(RES_INVALID_VALUE, "cuMemAlloc", "NULL output");
  if (n > MAX_MEMORY || (F.memory_limit && F.live_bytes + n > F.memory_limit))
    return RES_OUT_OF_MEMORY;
  alloc *a = calloc(1, sizeof *a);
  if (a) a->p = calloc(n ? n : 1, 1);
  if (!a || !a->p) {
    free(a);
    return RES_OUT_OF_MEMORY;
  }
  a->n = n;
  F.live_bytes += n;
  a->id = ++F.nallocs;
  a->next = F.allocs;
  F.allocs = a;
  *out = (CUdeviceptr)(uintptr_t)a->p;
  return RES_SUCCESS;
}

API cu_result cuMemFree_v2(CUdeviceptr p) {
  for (alloc **pa = &F.allocs; *pa; pa = &(*pa)->next)
    if ((CUdeviceptr)(uintptr_t)(*pa)->p == p && !(*pa)->host) {
      alloc *a = *pa;
      *pa = a->next;
      F.live_bytes -= a->n;
      free(a->p);
      free(a);
      return RES_SUCCESS;
    }
  return misuse(RES_INVALID_VALUE, "cuMemFree", "not an allocation");
}

/* Host memory registration: the range becomes an allocation whose device address is its host
 * address (as with unified addressing); a range overlapping a registered one is refused as the
 * driver does. fake_cuda_fail("cuMemHostRegister_v2", ...) makes it fail (not supported). */
API cu_result cuMemHostRegister_v2(void *p, size_t n, unsigned flags) {
  if (!p || !n) return misuse(RES_INVALID_VALUE, "cuMemHostRegister", "NULL or empty range");
  if (injected("cuMemHostRegister_v2")) return 801; /* CUDA_ERROR_NOT_SUPPORTED */
  uintptr_t lo = (uintptr_t)p;
  for (alloc *a = F.allocs; a; a = a->next)
    if (a->host && lo < (uintptr_t)a->p + a->n && (uintptr_t)a->p < lo + n)
      return RES_HOST_MEMORY_ALREADY_REGISTERED;
  alloc *a = calloc(1, sizeof *a);
  if (!a) return RES_OUT_OF_MEMORY;
  *a = (alloc){(uint8_t *)p, n, ++F.nallocs, true, F.allocs};
  F.allocs = a;
  trace("register #%ld %zu flags %u", a->id, n, flags);
  return RES_SUCCESS;
}

API cu_result cuMemHostGetDevicePointer_v2(CUdeviceptr *out, void *p, unsigned flags) {
  if (!out || flags) return misuse(RES_INVALID_VALUE, "cuMemHostGetDevicePointer", "arguments");
  for (alloc *a = F.allocs; a; a = a->next)
    if (a->host && (uint8_t *)p >= a->p && (uint8_t *)p < a->p + a->n) {
      *out = (CUdeviceptr)(uintptr_t)p;
      return RES_SUCCESS;
    }
  return misuse(RES_INVALID_VALUE, "cuMemHostGetDevicePointer", "not registered");
}

API cu_result cuMemHostUnregister(void *p) {
  for (alloc **pa = &F.allocs; *pa; pa = &(*pa)->next)
    if ((*pa)->p == p && (*pa)->host) {
      alloc *a = *pa;
      *pa = a->next;
      trace("unregister #%ld", a->id);
      free(a);
      return RES_SUCCESS;
    }
  return misuse(RES_INVALID_VALUE, "cuMemHostUnregister", "not registered");
}

static bool live_stream(CUstream s) {
  for (struct CUstream_st *x = F.streams; x; x = x->next)
    if (x == s) return true;
  return false;
}

API cu_result cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void *src, size_t n, CUstream s) {
  char b[64];
  if (!live_stream(s)) return misuse(RES_INVALID_HANDLE, "cuMemcpyHtoDAsync", "stream");
  if (!find(dst, n)) return misuse(RES_INVALID_VALUE, "cuMemcpyHtoDAsync", "out of range");
  memcpy((void *)(uintptr_t)dst, src, n);
  trace("write %s %zu", name_of(dst, b, sizeof b), n);
  return RES_SUCCESS;
}

API cu_result cuMemcpyDtoHAsync_v2(void *dst, CUdeviceptr src, size_t n, CUstream s) {
  char b[64];
  if (!live_stream(s)) return misuse(RES_INVALID_HANDLE, "cuMemcpyDtoHAsync", "stream");
  if (!find(src, n)) return misuse(RES_INVALID_VALUE, "cuMemcpyDtoHAsync", "out of range");
  memcpy(dst, (const void *)(uintptr_t)src, n);
  trace("read %s %zu", name_of(src, b, sizeof b), n);
  return RES_SUCCESS;
}

API cu_result cuMemcpyDtoDAsync_v2(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s) {
  char b[64], c[64];
  if (!live_stream(s)) return misuse(RES_INVALID_HANDLE, "cuMemcpyDtoDAsync", "stream");
  if (!find(dst, n) || !find(src, n))
    return misuse(RES_INVALID_VALUE, "cuMemcpyDtoDAsync", "out of range");
  memmove((void *)(uintptr_t)dst, (const void *)(uintptr_t)src, n);
  trace("copy %s %s %zu", name_of(src, b, sizeof b), name_of(dst, c, sizeof c), n);
  return RES_SUCCESS;
}

API cu_result cuMemsetD8Async(CUdeviceptr dst, unsigned char v, size_t n, CUstream s) {
  char b[64];
  if (!live_stream(s)) return misuse(RES_INVALID_HANDLE, "cuMemsetD8Async", "stream");
  if (!find(dst, n)) return misuse(RES_INVALID_VALUE, "cuMemsetD8Async", "out of range");
  memset((void *)(uintptr_t)dst, v, n);
  trace("fill %s %zu %u", name_of(dst, b, sizeof b), n, (unsigned)v);
  return RES_SUCCESS;
}

/* ---- the device and its context ---- */
API cu_result cuInit(unsigned flags) { return flags ? RES_INVALID_VALUE : RES_SUCCESS; }

API cu_result cuDeviceGetCount(int *n) {
  *n = 1;
  return RES_SUCCESS;
}

API cu_result cuDeviceGet(CUdevice *dev, int i) {
  if (i != 0) return RES_INVALID_VALUE;
  *dev = 0;
  return RES_SUCCESS;
}

API cu_result cuDeviceGetName(char *name, int n, CUdevice dev) {
  snprintf(name, (size_t)n, "fake CUDA device %d", dev);
  return RES_SUCCESS;
}

API cu_result cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev) {
  *bytes = (size_t)1 << 34;
  return RES_SUCCESS;
}

API cu_result cuDeviceGetAttribute(int *v, cu_dev_attr attr, CUdevice dev) {
  switch (attr) {
  case ATTR_MAX_THREADS_PER_BLOCK:
    *v = 1024;
    break;
  case ATTR_MAX_SHARED_MEMORY_PER_BLOCK:
    *v = 48 * 1024;
    break;
  case ATTR_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN:
    *v = 99 * 1024;
    break;
  case ATTR_WARP_SIZE:
    *v = 32;
    break;
  case ATTR_CC_MAJOR:
    *v = 8;
    break;
  case ATTR_CC_MINOR:
    *v = 0;
    break;
  default:
    *v = 0;
  }
  return RES_SUCCESS;
}

API cu_result cuDevicePrimaryCtxRetain(CUcontext *ctx, CUdevice dev) {
  F.ctx.refs++;
  *ctx = &F.ctx;
  return RES_SUCCESS;
}

API cu_result cuDevicePrimaryCtxRelease_v2(CUdevice dev) {
  if (F.ctx.refs <= 0) return misuse(RES_INVALID_CONTEXT, "cuDevicePrimaryCtxRelease", "unheld");
  F.ctx.refs--;
  return RES_SUCCESS;
}

API cu_result cuCtxSetCurrent(CUcontext ctx) {
  if (ctx && ctx != &F.ctx) return misuse(RES_INVALID_CONTEXT, "cuCtxSetCurrent", "not a context");
  F.current = ctx;
  return RES_SUCCESS;
}

API cu_result cuGetErrorString(cu_result r, const char **msg) {
  static const struct {
    cu_result r;
    const char *msg;
  } msgs[] = {{RES_SUCCESS, "no error"},
              {RES_INVALID_VALUE, "invalid argument"},
              {RES_OUT_OF_MEMORY, "out of memory"},
              {RES_INVALID_CONTEXT, "invalid device context"},
              {RES_INVALID_HANDLE, "invalid resource handle"},
              {RES_NOT_FOUND, "named symbol not found"},
              {RES_NOT_SUPPORTED, "operation not supported (injected by the fake driver)"}};
  for (size_t i = 0; i < sizeof msgs / sizeof msgs[0]; i++)
    if (msgs[i].r == r) {
      *msg = msgs[i].msg;
      return RES_SUCCESS;
    }
  *msg = NULL;
  return RES_INVALID_VALUE;
}

/* ---- streams and events ---- */
API cu_result cuStreamCreate(CUstream *out, unsigned flags) {
  struct CUstream_st *s = calloc(1, sizeof *s);
  if (!s) return RES_OUT_OF_MEMORY;
  s->next = F.streams;
  F.streams = s;
  *out = s;
  return RES_SUCCESS;
}

API cu_result cuStreamDestroy_v2(CUstream s) {
  for (struct CUstream_st **p = &F.streams; *p; p = &(*p)->next)
    if (*p == s) {
      *p = s->next;
      free(s);
      return RES_SUCCESS;
    }
  return misuse(RES_INVALID_HANDLE, "cuStreamDestroy", "not a stream");
}

API cu_result cuStreamSynchronize(CUstream s) {
  if (!F.current) return misuse(RES_INVALID_CONTEXT, "cuStreamSynchronize", "no context");
  return live_stream(s) ? RES_SUCCESS : misuse(RES_INVALID_HANDLE, "cuStreamSynchronize", "stream");
}

static bool live_event(CUevent e) {
  for (struct CUevent_st *x = F.events; x; x = x->next)
    if (x == e) return true;
  return false;
}

API cu_result cuEventCreate(CUevent *out, unsigned flags) {
  struct CUevent_st *e = calloc(1, sizeof *e);
  if (!e) return RES_OUT_OF_MEMORY;
  e->next = F.events;
  F.events = e;
  *out = e;
  return RES_SUCCESS;
}

API cu_result cuEventDestroy_v2(CUevent e) {
  for (struct CUevent_st **p = &F.events; *p; p = &(*p)->next)
    if (*p == e) {
      *p = e->next;
      free(e);
      return RES_SUCCESS;
    }
  return misuse(RES_INVALID_HANDLE, "cuEventDestroy", "not an event");
}

API cu_result cuEventRecord(CUevent e, CUstream s) {
  if (!live_event(e) || !live_stream(s))
    return misuse(RES_INVALID_HANDLE, "cuEventRecord", "event or stream");
  trace("event");
  return RES_SUCCESS;
}

API cu_result cuEventSynchronize(CUevent e) {
  return live_event(e) ? RES_SUCCESS : misuse(RES_INVALID_HANDLE, "cuEventSynchronize", "event");
}

API cu_result cuEventElapsedTime(float *ms, CUevent a, CUevent b) {
  if (!live_event(a) || !live_event(b))
    return misuse(RES_INVALID_HANDLE, "cuEventElapsedTime", "event");
  *ms = 1.0f;
  return RES_SUCCESS;
}

/* ---- modules and functions ---- */
API cu_result cuModuleLoadData(CUmodule *out, const void *image) {
  if (!image) return misuse(RES_INVALID_VALUE, "cuModuleLoadData", "NULL image");
  CUmodule m = calloc(1, sizeof *m);
  if (!m) return RES_OUT_OF_MEMORY;
  m->next = F.modules;
  F.modules = m;
  *out = m;
  return RES_SUCCESS;
}

API cu_result cuModuleUnload(CUmodule m) {
  for (CUmodule *p = &F.modules; *p; p = &(*p)->next)
    if (*p == m) {
      *p = m->next;
      for (struct CUfunc_st *f = F.fns; f; f = f->next)
        if (f->mod == m) f->mod = NULL;
      free(m);
      return RES_SUCCESS;
    }
  return misuse(RES_INVALID_HANDLE, "cuModuleUnload", "not a module");
}

API cu_result cuModuleGetFunction(CUfunction *out, CUmodule m, const char *name) {
  bool live = false;
  for (CUmodule x = F.modules; x; x = x->next) live = live || x == m;
  if (!live) return misuse(RES_INVALID_HANDLE, "cuModuleGetFunction", "not a module");
  const decl *k = F.decls;
  while (k && strcmp(k->name, name) != 0) k = k->next;
  if (!k) return RES_NOT_FOUND; /* not declared by the test: "no such function in the module" */
  struct CUfunc_st *f = calloc(1, sizeof *f);
  if (!f) return RES_OUT_OF_MEMORY;
  f->kernel = k;
  f->mod = m;
  f->next = F.fns; /* kept until fake_cuda_reset: a handle used after its module shows */
  F.fns = f;
  *out = f;
  return RES_SUCCESS;
}

API cu_result cuFuncSetAttribute(CUfunction f, cu_func_attr attr, int value) {
  if (!f || !f->mod) return misuse(RES_INVALID_HANDLE, "cuFuncSetAttribute", "function");
  if (attr == FUNC_ATTR_MAX_DYNAMIC_SHARED_SIZE_BYTES) f->max_dynamic = value;
  return RES_SUCCESS;
}

/* ---- launches ---- */
/* Reads a launch's parameters, through its kernelParams, into k. */
static cu_result read_params(const char *entry, const CUDA_KERNEL_NODE_PARAMS_v2 *p, kparams *k) {
  if (!p->func || !p->func->mod) return misuse(RES_INVALID_HANDLE, entry, "function not loaded");
  if (p->extra || (!p->kernelParams && p->func->kernel->nptrs + p->func->kernel->nints))
    return misuse(RES_INVALID_VALUE, entry, "no kernelParams");
  if (!p->gridDimX || !p->gridDimY || !p->gridDimZ || !p->blockDimX || !p->blockDimY ||
      !p->blockDimZ)
    return misuse(RES_INVALID_VALUE, entry, "an empty grid or block");
  /* as the driver: dynamic shared memory past 48 KiB needs the function's limit raised first */
  int limit = p->func->max_dynamic ? p->func->max_dynamic : 48 * 1024;
  if (p->sharedMemBytes > (unsigned)limit)
    return misuse(RES_INVALID_VALUE, entry, "more dynamic shared memory than the function's limit");
  *k = (kparams){p->func,
                 {p->gridDimX, p->gridDimY, p->gridDimZ},
                 {p->blockDimX, p->blockDimY, p->blockDimZ},
                 p->sharedMemBytes,
                 {0},
                 {0}};
  const decl *d = p->func->kernel;
  for (int i = 0; i < d->nptrs; i++) memcpy(&k->ptrs[i], p->kernelParams[i], sizeof k->ptrs[i]);
  for (int i = 0; i < d->nints; i++)
    memcpy(&k->ints[i], p->kernelParams[d->nptrs + i], sizeof k->ints[i]);
  return RES_SUCCESS;
}

/* Runs a launch: checked, then traced. */
static cu_result run(const char *entry, const kparams *k) {
  if (!k->fn->mod) return misuse(RES_INVALID_HANDLE, entry, "a function of an unloaded module");
  const decl *d = k->fn->kernel;
  for (int i = 0; i < d->nptrs; i++)
    if (!find(k->ptrs[i], 0))
      return misuse(RES_INVALID_VALUE, entry, "a pointer parameter outside every allocation");
  char args[2 * MAX_PARAMS * 64] = "", b[64];
  size_t len = 0;
  for (int i = 0; i < d->nptrs + d->nints; i++) {
    if (i < d->nptrs)
      name_of(k->ptrs[i], b, sizeof b);
    else
      snprintf(b, sizeof b, "%d", (int)k->ints[i - d->nptrs]);
    len += (size_t)snprintf(args + len, sizeof args - len, "%s%s", i ? "," : "", b);
  }
  trace("launch %s grid=%u,%u,%u block=%u,%u,%u shared=%u args=%s", d->name, k->grid[0], k->grid[1],
        k->grid[2], k->block[0], k->block[1], k->block[2], k->shared, args);
  return RES_SUCCESS;
}

API cu_result cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                             unsigned by, unsigned bz, unsigned shared, CUstream s, void **params,
                             void **extra) {
  if (!F.current) return misuse(RES_INVALID_CONTEXT, "cuLaunchKernel", "no context");
  if (!live_stream(s)) return misuse(RES_INVALID_HANDLE, "cuLaunchKernel", "stream");
  if (injected("cuLaunchKernel")) return RES_NOT_SUPPORTED;
  CUDA_KERNEL_NODE_PARAMS_v2 p = {f, gx, gy, gz, bx, by, bz, shared, params, extra, NULL, NULL};
  kparams k;
  cu_result r = read_params("cuLaunchKernel", &p, &k);
  return r ? r : run("cuLaunchKernel", &k);
}

/* ---- graphs ---- */
static bool live_graph(CUgraph g) {
  for (CUgraph x = F.graphs; x; x = x->next)
    if (x == g) return true;
  return false;
}

static bool live_exec(CUgraphExec e) {
  for (CUgraphExec x = F.execs; x; x = x->next)
    if (x == e) return true;
  return false;
}

GRAPH_API cu_result cuGraphCreate(CUgraph *out, unsigned flags) {
  if (flags) return misuse(RES_INVALID_VALUE, "cuGraphCreate", "flags");
  if (injected("cuGraphCreate")) return RES_NOT_SUPPORTED;
  CUgraph g = calloc(1, sizeof *g);
  if (!g) return RES_OUT_OF_MEMORY;
  g->next = F.graphs;
  F.graphs = g;
  *out = g;
  return RES_SUCCESS;
}

static void node_free(CUgraphNode n) {
  free(n->deps);
  free(n);
}

GRAPH_API cu_result cuGraphAddKernelNode_v2(CUgraphNode *out, CUgraph g, const CUgraphNode *deps,
                                            size_t ndeps, const CUDA_KERNEL_NODE_PARAMS_v2 *p) {
  const char *e = "cuGraphAddKernelNode";
  if (!live_graph(g)) return misuse(RES_INVALID_HANDLE, e, "not a graph");
  if (ndeps && !deps) return misuse(RES_INVALID_VALUE, e, "NULL dependencies");
  for (size_t i = 0; i < ndeps; i++)
    if (!deps[i] || deps[i]->graph != g)
      return misuse(RES_INVALID_VALUE, e, "a dependency elsewhere");
  if (injected("cuGraphAddKernelNode_v2")) return RES_NOT_SUPPORTED;
  CUgraphNode n = calloc(1, sizeof *n);
  if (!n) return RES_OUT_OF_MEMORY;
  cu_result r = read_params(e, p, &n->k);
  if (!r && ndeps && !(n->deps = malloc(ndeps * sizeof *deps))) r = RES_OUT_OF_MEMORY;
  if (!r && g->n == g->cap) {
    size_t cap = g->cap ? 2 * g->cap : 16;
    CUgraphNode *nodes = realloc(g->nodes, cap * sizeof *nodes);
    if (!nodes) r = RES_OUT_OF_MEMORY;
    if (nodes) g->nodes = nodes, g->cap = cap;
  }
  if (r) {
    node_free(n);
    return r;
  }
  if (ndeps) memcpy(n->deps, deps, ndeps * sizeof *deps);
  n->ndeps = ndeps;
  n->graph = g;
  n->index = g->n;
  g->nodes[g->n++] = n;
  *out = n;
  return RES_SUCCESS;
}

/* Whether node n is ready: all its dependencies done. */
static bool ready(CUgraphNode n, const bool *done) {
  for (size_t j = 0; j < n->ndeps; j++)
    if (!done[n->deps[j]->index]) return false;
  return true;
}

static void exec_free(CUgraphExec x) {
  free(x->handles);
  free(x->k);
  free(x);
}

GRAPH_API cu_result cuGraphInstantiateWithFlags(CUgraphExec *out, CUgraph g,
                                                unsigned long long flags) {
  const char *e = "cuGraphInstantiate";
  if (!live_graph(g)) return misuse(RES_INVALID_HANDLE, e, "not a graph");
  if (!g->n) return misuse(RES_INVALID_VALUE, e, "an empty graph");
  if (injected("cuGraphInstantiateWithFlags")) return RES_NOT_SUPPORTED;
  CUgraphExec x = calloc(1, sizeof *x);
  bool *done = calloc(g->n, sizeof *done);
  if (x) x->handles = calloc(g->n, sizeof *x->handles), x->k = calloc(g->n, sizeof *x->k);
  if (!x || !done || !x->handles || !x->k) {
    if (x) exec_free(x);
    free(done);
    return RES_OUT_OF_MEMORY;
  }
  /* a topological order; among the nodes ready, the last added first */
  for (x->n = 0; x->n < g->n;) {
    size_t pick = g->n;
    for (size_t i = g->n; i-- > 0 && pick == g->n;)
      if (!done[i] && ready(g->nodes[i], done)) pick = i;
    if (pick == g->n) {
      exec_free(x);
      free(done);
      return misuse(RES_INVALID_VALUE, e, "a cycle");
    }
    done[pick] = true;
    x->handles[x->n] = g->nodes[pick];
    x->k[x->n++] = g->nodes[pick]->k;
  }
  free(done);
  x->next = F.execs;
  F.execs = x;
  F.instantiations++;
  *out = x;
  return RES_SUCCESS;
}

GRAPH_API cu_result cuGraphExecKernelNodeSetParams_v2(CUgraphExec x, CUgraphNode n,
                                                      const CUDA_KERNEL_NODE_PARAMS_v2 *p) {
  const char *e = "cuGraphExecKernelNodeSetParams";
  if (!live_exec(x)) return misuse(RES_INVALID_HANDLE, e, "not an instantiated graph");
  size_t i = 0;
  while (i < x->n && x->handles[i] != n) i++;
  if (i == x->n) return misuse(RES_INVALID_VALUE, e, "a node of another graph");
  if (injected("cuGraphExecKernelNodeSetParams_v2")) return RES_NOT_SUPPORTED;
  kparams k;
  cu_result r = read_params(e, p, &k);
  if (r) return r;
  x->k[i] = k;
  F.node_updates++;
  return RES_SUCCESS;
}

GRAPH_API cu_result cuGraphLaunch(CUgraphExec x, CUstream s) {
  if (!F.current) return misuse(RES_INVALID_CONTEXT, "cuGraphLaunch", "no context");
  if (!live_exec(x) || !live_stream(s))
    return misuse(RES_INVALID_HANDLE, "cuGraphLaunch", "instantiated graph or stream");
  if (injected("cuGraphLaunch")) return RES_NOT_SUPPORTED;
  for (size_t i = 0; i < x->n; i++)
    if (!x->k[i].fn->mod)
      return misuse(RES_INVALID_HANDLE, "cuGraphLaunch", "a node of an unloaded module");
  F.graph_launches++;
  for (size_t i = 0; i < x->n; i++) {
    cu_result r = run("cuGraphLaunch", &x->k[i]);
    if (r) return r;
  }
  return RES_SUCCESS;
}

GRAPH_API cu_result cuGraphExecDestroy(CUgraphExec x) {
  for (CUgraphExec *p = &F.execs; *p; p = &(*p)->next)
    if (*p == x) {
      *p = x->next;
      exec_free(x);
      return RES_SUCCESS;
    }
  return misuse(RES_INVALID_HANDLE, "cuGraphExecDestroy", "not an instantiated graph");
}

static void graph_free(CUgraph g) {
  for (size_t i = 0; i < g->n; i++) node_free(g->nodes[i]);
  free(g->nodes);
  free(g);
}

GRAPH_API cu_result cuGraphDestroy(CUgraph g) {
  for (CUgraph *p = &F.graphs; *p; p = &(*p)->next)
    if (*p == g) {
      *p = g->next;
      graph_free(g);
      return RES_SUCCESS;
    }
  return misuse(RES_INVALID_HANDLE, "cuGraphDestroy", "not a graph");
}

/* Each entry point above has the type cuda.c calls it through. */
#define SAME(a, b) __builtin_types_compatible_p(a, b)
#define CHECK_SIGNATURE(member, symbol)                                                            \
  _Static_assert(SAME(__typeof__(&symbol), __typeof__(((struct cu_fns *)0)->member)),              \
                 #symbol " differs from cu_fns." #member);
CHECK_SIGNATURE(cuInit, cuInit)
CHECK_SIGNATURE(cuDeviceGetCount, cuDeviceGetCount)
CHECK_SIGNATURE(cuDeviceGet, cuDeviceGet)
CHECK_SIGNATURE(cuDeviceGetName, cuDeviceGetName)
CHECK_SIGNATURE(cuDeviceTotalMem, cuDeviceTotalMem_v2)
CHECK_SIGNATURE(cuDeviceGetAttribute, cuDeviceGetAttribute)
CHECK_SIGNATURE(cuDevicePrimaryCtxRetain, cuDevicePrimaryCtxRetain)
CHECK_SIGNATURE(cuDevicePrimaryCtxRelease, cuDevicePrimaryCtxRelease_v2)
CHECK_SIGNATURE(cuCtxSetCurrent, cuCtxSetCurrent)
CHECK_SIGNATURE(cuModuleLoadData, cuModuleLoadData)
CHECK_SIGNATURE(cuModuleUnload, cuModuleUnload)
CHECK_SIGNATURE(cuModuleGetFunction, cuModuleGetFunction)
CHECK_SIGNATURE(cuFuncSetAttribute, cuFuncSetAttribute)
CHECK_SIGNATURE(cuMemAlloc, cuMemAlloc_v2)
CHECK_SIGNATURE(cuMemFree, cuMemFree_v2)
CHECK_SIGNATURE(cuMemHostRegister, cuMemHostRegister_v2)
CHECK_SIGNATURE(cuMemHostUnregister, cuMemHostUnregister)
CHECK_SIGNATURE(cuMemHostGetDevicePointer, cuMemHostGetDevicePointer_v2)
CHECK_SIGNATURE(cuMemcpyHtoDAsync, cuMemcpyHtoDAsync_v2)
CHECK_SIGNATURE(cuMemcpyDtoHAsync, cuMemcpyDtoHAsync_v2)
CHECK_SIGNATURE(cuMemcpyDtoDAsync, cuMemcpyDtoDAsync_v2)
CHECK_SIGNATURE(cuMemsetD8Async, cuMemsetD8Async)
CHECK_SIGNATURE(cuStreamCreate, cuStreamCreate)
CHECK_SIGNATURE(cuStreamDestroy, cuStreamDestroy_v2)
CHECK_SIGNATURE(cuStreamSynchronize, cuStreamSynchronize)
CHECK_SIGNATURE(cuEventCreate, cuEventCreate)
CHECK_SIGNATURE(cuEventDestroy, cuEventDestroy_v2)
CHECK_SIGNATURE(cuEventRecord, cuEventRecord)
CHECK_SIGNATURE(cuEventSynchronize, cuEventSynchronize)
CHECK_SIGNATURE(cuEventElapsedTime, cuEventElapsedTime)
CHECK_SIGNATURE(cuLaunchKernel, cuLaunchKernel)
CHECK_SIGNATURE(cuGetErrorString, cuGetErrorString)
CHECK_SIGNATURE(cuGraphCreate, cuGraphCreate)
CHECK_SIGNATURE(cuGraphAddKernelNode, cuGraphAddKernelNode_v2)
CHECK_SIGNATURE(cuGraphInstantiate, cuGraphInstantiateWithFlags)
CHECK_SIGNATURE(cuGraphExecKernelNodeSetParams, cuGraphExecKernelNodeSetParams_v2)
CHECK_SIGNATURE(cuGraphLaunch, cuGraphLaunch)
CHECK_SIGNATURE(cuGraphExecDestroy, cuGraphExecDestroy)
CHECK_SIGNATURE(cuGraphDestroy, cuGraphDestroy)

/* ---- the test's side ---- */
/* Declares kernel name, taking nptrs pointers then nints int32 values. */
API void fake_cuda_kernel(const char *name, int nptrs, int nints) {
  if (nptrs < 0 || nints < 0 || nptrs > MAX_PARAMS || nints > MAX_PARAMS ||
      strlen(name) >= sizeof F.decls->name)
    abort(); /* the test's mistake */
  decl *d = calloc(1, sizeof *d);
  if (!d) abort();
  strcpy(d->name, name);
  d->nptrs = nptrs;
  d->nints = nints;
  d->next = F.decls;
  F.decls = d;
}

/* The id of the last allocation (shown "#id" in the trace). */
API long fake_cuda_last_alloc(void) { return F.nallocs; }

/* Device memory: cuMemAlloc runs out of memory where the live allocations would pass limit bytes
 * (0: no limit but MAX_MEMORY per allocation). fake_cuda_count("bytes") gives what is live. */
API void fake_cuda_set_memory_limit(size_t limit) { F.memory_limit = limit; }

API size_t fake_cuda_trace_count(void) { return F.ntrace; }
API const char *fake_cuda_trace_line(size_t i) { return i < F.ntrace ? F.trace[i] : NULL; }
API void fake_cuda_trace_clear(void) {
  for (size_t i = 0; i < F.ntrace; i++) free(F.trace[i]);
  F.ntrace = 0;
}

/* The next calls of entry (its symbol) fail with CUDA_ERROR_NOT_SUPPORTED: count of them, after
 * skip calls that succeed. count 0 cancels. */
API void fake_cuda_fail(const char *entry, int skip, int count) {
  int i = 0;
  while (i < MAX_FAILS && F.fails[i].entry[0] && strcmp(F.fails[i].entry, entry) != 0) i++;
  if (i == MAX_FAILS || strlen(entry) >= sizeof F.fails[i].entry) abort();
  snprintf(F.fails[i].entry, sizeof F.fails[i].entry, "%s", entry);
  F.fails[i].skip = skip;
  F.fails[i].count = count;
}

/* Live objects and counts: "allocs", "graphs", "execs", "modules", "streams", "events",
 * "contexts" (primary context references), "graph_launches", "node_updates", "instantiations",
 * "misuse". -1 for another name. */
API long fake_cuda_count(const char *what) {
  long n = 0;
  if (!strcmp(what, "allocs"))
    for (alloc *a = F.allocs; a; a = a->next) n++;
  else if (!strcmp(what, "bytes"))
    n = (long)F.live_bytes;
  else if (!strcmp(what, "graphs"))
    for (CUgraph g = F.graphs; g; g = g->next) n++;
  else if (!strcmp(what, "execs"))
    for (CUgraphExec x = F.execs; x; x = x->next) n++;
  else if (!strcmp(what, "streams"))
    for (struct CUstream_st *s = F.streams; s; s = s->next) n++;
  else if (!strcmp(what, "events"))
    for (struct CUevent_st *e = F.events; e; e = e->next) n++;
  else if (!strcmp(what, "modules"))
    for (CUmodule m = F.modules; m; m = m->next) n++;
  else if (!strcmp(what, "contexts"))
    n = F.ctx.refs;
  else if (!strcmp(what, "graph_launches"))
    n = F.graph_launches;
  else if (!strcmp(what, "node_updates"))
    n = F.node_updates;
  else if (!strcmp(what, "instantiations"))
    n = F.instantiations;
  else if (!strcmp(what, "misuse"))
    n = F.misuse;
  else
    n = -1;
  return n;
}

/* Frees everything the fake holds (what the runtime leaked too: the test checks the counts
 * first) and starts afresh. */
API void fake_cuda_reset(void) {
  fake_cuda_trace_clear();
  free(F.trace);
  while (F.decls) {
    decl *d = F.decls;
    F.decls = d->next;
    free(d);
  }
  while (F.fns) {
    struct CUfunc_st *f = F.fns;
    F.fns = f->next;
    free(f);
  }
  while (F.modules) cuModuleUnload(F.modules);
  while (F.allocs)
    if (F.allocs->host)
      cuMemHostUnregister(F.allocs->p);
    else
      cuMemFree_v2((CUdeviceptr)(uintptr_t)F.allocs->p);
  while (F.streams) cuStreamDestroy_v2(F.streams);
  while (F.events) cuEventDestroy_v2(F.events);
  while (F.execs) cuGraphExecDestroy(F.execs);
  while (F.graphs) cuGraphDestroy(F.graphs);
  memset(&F, 0, sizeof F);
}
