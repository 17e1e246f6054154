/* runtime/ccl/nccl.c: NCCL beside a communicator's MPI (rx_rt_comm_enable_nccl), for the
 * collective builtins on a CUDA device: libnccl.so.2 opened at run time (runtime/ccl/nccl_api.h),
 * its unique id made by rank 0 and broadcast over MPI, each collective queued on the device's
 * stream (rt_native.queue: the logged launches issued first, the context made current) on the
 * buffers' device addresses. RX_NCCL_LIBRARY names another library to open first (the tests'
 * fake, tests/runtime/fake_nccl.c). */
#include "runtime/ccl/ccl.h"
#include "runtime/ccl/nccl_api.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

typedef struct nccl_fns {
#define X(member, sym, params) nccl_result(*member) params;
  NCCL_FNS(X)
#undef X
  const char *(*error_string)(nccl_result);
} nccl_fns;

static nccl_fns N;
static char nccl_why[512];
static pthread_once_t nccl_once = PTHREAD_ONCE_INIT;

static void nccl_load(void) {
  const char *env = getenv("RX_NCCL_LIBRARY");
  const char *names[] = {env && *env ? env : "libnccl.so.2", "libnccl.so.2"};
  void *lib = NULL;
  for (size_t i = 0; i < 2 && !lib; i++) lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char *e = dlerror();
    snprintf(nccl_why, sizeof nccl_why, "NCCL: cannot open libnccl.so.2: %s", e ? e : "?");
    return;
  }
  nccl_fns f;
#define X(member, sym, params)                                                                     \
  if (!(*(void **)&f.member = dlsym(lib, #sym))) {                                                 \
    snprintf(nccl_why, sizeof nccl_why, "NCCL: libnccl.so.2 has no %s (NCCL 2.7 or later)", #sym); \
    return;                                                                                        \
  }
  NCCL_FNS(X)
#undef X
  *(void **)&f.error_string = dlsym(lib, "ncclGetErrorString");
  N = f;
}

static rx_status nccl_error(nccl_result r, const char *what) {
  return base_status_make(RX_ERR_DEVICE, "NCCL: %s: %s (%d)", what,
                          N.error_string ? N.error_string(r) : "error", r);
}
#define NCCL_CHECK(call, what)                                                                     \
  do {                                                                                             \
    nccl_result r_ = (call);                                                                       \
    if (r_) return nccl_error(r_, what);                                                           \
  } while (0)

/* every rank's ok, and this rank's reason or the other ranks' */
static rx_status agree_ok(rx_rt_comm *c, rx_status mine, const char *step) {
  bool all = false;
  rx_status s = rt_ccl_all_ok(c, mine == NULL, &all);
  if (s) {
    rx_status_free(mine);
    return s;
  }
  if (mine) return mine;
  if (!all)
    return base_status_make(RX_ERR_DEVICE, "NCCL: another rank failed to %s (see its error)", step);
  return NULL;
}

rx_status rx_rt_comm_enable_nccl(rx_rt_comm *c, rx_rt_device *d) {
  if (c->nccl) return base_status_make(RX_ERR_INVALID, "NCCL: the communicator has it already");
  pthread_once(&nccl_once, nccl_load);
  rx_status s = NULL;
  if (!N.comm_init_rank)
    s = base_status_make(RX_ERR_NOT_FOUND, "%s", nccl_why);
  else if (!d || !d->native)
    s = base_status_make(RX_ERR_UNSUPPORTED, "NCCL: needs a CUDA device, got %s",
                         d ? rx_rt_backend_name(d->info.backend) : "none");
  RX_RETURN_IF_ERROR(agree_ok(c, s, "open NCCL"));
  nccl_unique_id id = {{0}};
  nccl_result r = c->rank == 0 ? N.get_unique_id(&id) : 0;
  RX_RETURN_IF_ERROR(agree_ok(c, r ? nccl_error(r, "ncclGetUniqueId") : NULL, "make the id"));
  RX_RETURN_IF_ERROR(rt_ccl_bcast(c, &id, sizeof id, 0));
  void *stream = NULL;
  s = d->native->queue(d, &stream); /* the device's context current */
  nccl_comm comm = NULL;
  if (!s && (r = N.comm_init_rank(&comm, c->size, id, c->rank)))
    s = nccl_error(r, "ncclCommInitRank");
  RX_RETURN_IF_ERROR(agree_ok(c, s, "join the communicator"));
  c->nccl = comm;
  c->nccl_device = d;
  rx_rt_device_retain(d);
  return NULL;
}

bool rt_nccl_on(const rx_rt_comm *c, const rx_rt_device *d) {
  return c && c->nccl && c->nccl_device == d;
}

void rt_nccl_free(rx_rt_comm *c) {
  if (!c->nccl) return;
  void *stream = NULL;
  rx_status_free(c->nccl_device->native->queue(c->nccl_device, &stream));
  N.comm_destroy(c->nccl);
  c->nccl = NULL;
  rx_rt_device_release(c->nccl_device);
  c->nccl_device = NULL;
}

static int nccl_type(rx_dtype t) {
  switch (t) {
  case RX_DTYPE_F32:
    return NCCL_FLOAT32;
  case RX_DTYPE_F16:
    return NCCL_FLOAT16;
  case RX_DTYPE_BF16:
    return NCCL_BFLOAT16;
  case RX_DTYPE_F64:
    return NCCL_FLOAT64;
  case RX_DTYPE_I32:
    return NCCL_INT32;
  default:
    return NCCL_INT64; /* rt_ccl_reducible: i64 */
  }
}

/* the stream, and the addresses of a and b (b may be NULL) */
static rx_status prepare(rx_rt_comm *c, rx_rt_buffer *a, rx_rt_buffer *b, void **stream, void **pa,
                         void **pb) {
  rx_rt_device *d = c->nccl_device;
  RX_RETURN_IF_ERROR(d->native->queue(d, stream));
  *pa = (void *)(uintptr_t)d->native->address(a);
  *pb = b ? (void *)(uintptr_t)d->native->address(b) : NULL;
  return NULL;
}

rx_status rt_nccl_allreduce(rx_rt_comm *c, rx_rt_buffer *src, rx_rt_buffer *dst, size_t count,
                            rx_dtype t, rt_ccl_op op) {
  void *st = NULL, *ps = NULL, *pd = NULL;
  RX_RETURN_IF_ERROR(prepare(c, src, dst, &st, &ps, &pd));
  NCCL_CHECK(N.all_reduce(ps, pd, count, nccl_type(t), op == RT_CCL_MAX ? NCCL_MAX : NCCL_SUM,
                          c->nccl, st),
             "ncclAllReduce");
  return NULL;
}

rx_status rt_nccl_allgather(rx_rt_comm *c, rx_rt_buffer *src, rx_rt_buffer *dst, size_t bytes) {
  void *st = NULL, *ps = NULL, *pd = NULL;
  RX_RETURN_IF_ERROR(prepare(c, src, dst, &st, &ps, &pd));
  NCCL_CHECK(N.all_gather(ps, pd, bytes, NCCL_INT8, c->nccl, st), "ncclAllGather");
  return NULL;
}

rx_status rt_nccl_reduce_scatter(rx_rt_comm *c, rx_rt_buffer *src, rx_rt_buffer *dst, size_t count,
                                 rx_dtype t, rt_ccl_op op) {
  void *st = NULL, *ps = NULL, *pd = NULL;
  RX_RETURN_IF_ERROR(prepare(c, src, dst, &st, &ps, &pd));
  NCCL_CHECK(N.reduce_scatter(ps, pd, count, nccl_type(t), op == RT_CCL_MAX ? NCCL_MAX : NCCL_SUM,
                              c->nccl, st),
             "ncclReduceScatter");
  return NULL;
}

rx_status rt_nccl_bcast(rx_rt_comm *c, rx_rt_buffer *src, rx_rt_buffer *dst, size_t bytes,
                        int root) {
  void *st = NULL, *ps = NULL, *pd = NULL;
  RX_RETURN_IF_ERROR(prepare(c, src, dst, &st, &ps, &pd));
  NCCL_CHECK(N.broadcast(ps, pd, bytes, NCCL_INT8, root, c->nccl, st), "ncclBroadcast");
  return NULL;
}

rx_status rt_nccl_send(rx_rt_comm *c, rx_rt_buffer *src, size_t bytes, int peer) {
  void *st = NULL, *ps = NULL, *pd = NULL;
  RX_RETURN_IF_ERROR(prepare(c, src, NULL, &st, &ps, &pd));
  NCCL_CHECK(N.send(ps, bytes, NCCL_INT8, peer, c->nccl, st), "ncclSend");
  return NULL;
}

rx_status rt_nccl_recv(rx_rt_comm *c, rx_rt_buffer *dst, size_t bytes, int peer) {
  void *st = NULL, *pd = NULL, *unused = NULL;
  RX_RETURN_IF_ERROR(prepare(c, dst, NULL, &st, &pd, &unused));
  NCCL_CHECK(N.recv(pd, bytes, NCCL_INT8, peer, c->nccl, st), "ncclRecv");
  return NULL;
}
