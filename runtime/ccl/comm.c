/* runtime/ccl/comm.c: rx_rt_comm (relaxc/ccl.h) and its host-memory collectives over MPI.
 *
 * libmpi is opened at run time, like the device drivers (runtime/ccl/mpi_api.h: Open MPI's
 * binary interface declared by hand), on the first rx_rt_comm_create_mpi: the runtime builds
 * without MPI and a program that never makes a communicator never loads it. RX_MPI_LIBRARY
 * names another libmpi (Open MPI's) to open first.
 *
 * f16 and bf16 have no MPI type: they travel as 16-bit words and are reduced by user operations
 * that add or compare in f32 and round once per step (the interpreter's rounding,
 * base/half.c). */
#include "runtime/ccl/ccl.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "runtime/ccl/mpi_api.h"

#include <dlfcn.h>
#include <pthread.h>

double rt_ccl_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void rt_ccl_account(rx_rt_comm *c, rx_ccl_kind kind, size_t bytes, double seconds) {
  c->seconds += seconds;
  c->calls++;
  c->counters[kind].calls++;
  c->counters[kind].bytes += bytes;
  c->counters[kind].seconds += seconds;
}

static const char *const kind_names[] = {"allreduce", "allgather", "reduce_scatter",
                                         "broadcast", "send",      "recv"};
_Static_assert(sizeof kind_names / sizeof kind_names[0] == RX_CCL_KIND_COUNT,
               "a name for every rx_ccl_kind");

const char *rx_ccl_kind_name(rx_ccl_kind kind) {
  return (unsigned)kind < RX_CCL_KIND_COUNT ? kind_names[kind] : NULL;
}

rx_rt_comm_counter rx_rt_comm_counter_of(const rx_rt_comm *c, rx_ccl_kind kind) {
  rx_rt_comm_counter none = {0};
  return (unsigned)kind < RX_CCL_KIND_COUNT ? c->counters[kind] : none;
}

bool rt_ccl_reducible(rx_dtype t) {
  return t == RX_DTYPE_F32 || t == RX_DTYPE_F16 || t == RX_DTYPE_BF16 || t == RX_DTYPE_F64 ||
         t == RX_DTYPE_I32 || t == RX_DTYPE_I64;
}

void rx_rt_comm_retain(rx_rt_comm *c) { c->refs++; }
int rx_rt_comm_rank(const rx_rt_comm *c) { return c->rank; }
int rx_rt_comm_size(const rx_rt_comm *c) { return c->size; }
const char *rx_rt_comm_backend(const rx_rt_comm *c) { return c->nccl ? "nccl" : "mpi"; }
void rx_rt_comm_stats(const rx_rt_comm *c, double *out_seconds, uint64_t *out_calls) {
  if (out_seconds) *out_seconds = c->seconds;
  if (out_calls) *out_calls = c->calls;
}
void rx_rt_comm_stats_reset(rx_rt_comm *c) {
  c->seconds = 0;
  c->calls = 0;
  memset(c->counters, 0, sizeof c->counters);
}

static mpi_api M; /* libmpi's entry points and handles, once loaded */
static char mpi_why[512];
static pthread_once_t mpi_once = PTHREAD_ONCE_INIT;

static void mpi_load(void) {
  const char *env = getenv("RX_MPI_LIBRARY");
  const char *names[] = {env && *env ? env : "libmpi.so.40", "libmpi.so.40", "libmpi.so"};
  /* RTLD_GLOBAL: Open MPI's components (dlopen'ed by libmpi) resolve libmpi's symbols */
  void *lib = NULL;
  for (size_t i = 0; i < sizeof names / sizeof names[0] && !lib; i++)
    lib = dlopen(names[i], RTLD_NOW | RTLD_GLOBAL);
  if (!lib) {
    const char *e = dlerror();
    snprintf(mpi_why, sizeof mpi_why,
             "MPI: cannot open libmpi.so.40 (Open MPI; Debian: apt-get install openmpi-bin): %s",
             e ? e : "?");
    return;
  }
  mpi_api m;
#define X(member, sym, ret, params)                                                                \
  if (!(*(void **)&m.member = dlsym(lib, #sym))) {                                                 \
    snprintf(mpi_why, sizeof mpi_why, "MPI: libmpi has no %s (Open MPI 3.0 or later expected)",    \
             #sym);                                                                                \
    return;                                                                                        \
  }
  MPI_FNS(X)
#undef X
#define X(member, handle, global)                                                                  \
  if (!(m.member = dlsym(lib, #global))) {                                                         \
    snprintf(mpi_why, sizeof mpi_why,                                                              \
             "MPI: libmpi has no %s: not Open MPI (the only MPI this runtime speaks)", #global);   \
    return;                                                                                        \
  }
  MPI_HANDLES(X)
#undef X
  M = m; /* the library stays open for the process's life */
}

bool rx_rt_comm_mpi_available(void) {
  pthread_once(&mpi_once, mpi_load);
  return M.init_thread != NULL;
}

static bool mpi_ours; /* this library called MPI_Init_thread: the last release finalizes */
static int mpi_comms; /* live communicators */

static rx_status mpi_error(int err, const char *what) {
  char text[RT_MPI_MAX_ERROR_STRING] = "";
  int len = 0;
  M.error_string(err, text, &len);
  return base_status_make(RX_ERR_DEVICE, "MPI: %s: %s", what, text);
}
#define MPI_CHECK(call, what)                                                                      \
  do {                                                                                             \
    int err_ = (call);                                                                             \
    if (err_ != RT_MPI_SUCCESS) return mpi_error(err_, what);                                      \
  } while (0)

/* the user operations of f16 and bf16: f32 arithmetic, one rounding per step */
#define HALF_OP(name, to_f, from_f, expr)                                                          \
  static void name(void *in, void *inout, int *len, mpi_handle *t) {                               \
    (void)t;                                                                                       \
    const uint16_t *a = in;                                                                        \
    uint16_t *b = inout;                                                                           \
    for (int i = 0; i < *len; i++) {                                                               \
      float x = to_f(a[i]), y = to_f(b[i]);                                                        \
      b[i] = from_f(expr);                                                                         \
    }                                                                                              \
  }
HALF_OP(f16_sum, base_f16_to_f32, base_f32_to_f16, x + y)
HALF_OP(f16_max, base_f16_to_f32, base_f32_to_f16, x > y ? x : y)
HALF_OP(bf16_sum, base_bf16_to_f32, base_f32_to_bf16, x + y)
HALF_OP(bf16_max, base_bf16_to_f32, base_f32_to_bf16, x > y ? x : y)

rx_status rx_rt_comm_create_mpi(rx_rt_comm **out_comm) {
  *out_comm = NULL;
  if (!rx_rt_comm_mpi_available()) return base_status_make(RX_ERR_NOT_FOUND, "%s", mpi_why);
  int inited = 0, finalized = 0;
  M.finalized(&finalized);
  if (finalized)
    return base_status_make(RX_ERR_INVALID, "MPI was finalized: a process initializes it once");
  M.initialized(&inited);
  if (!inited) {
    int provided = 0;
    MPI_CHECK(M.init_thread(NULL, NULL, RT_MPI_THREAD_FUNNELED, &provided), "MPI_Init_thread");
    mpi_ours = true;
  }
  rx_rt_comm *c = calloc(1, sizeof *c);
  if (!c) return rt_oom("a communicator", sizeof *c);
  c->refs = 1;
  int err = M.comm_dup(M.comm_world, &c->comm);
  if (err != RT_MPI_SUCCESS) {
    free(c);
    return mpi_error(err, "MPI_Comm_dup");
  }
  mpi_comms++;
  M.comm_set_errhandler(c->comm, M.errors_return);
  M.comm_rank(c->comm, &c->rank);
  M.comm_size(c->comm, &c->size);
  mpi_user_function *fns[2][2] = {{f16_sum, f16_max}, {bf16_sum, bf16_max}};
  for (int i = 0; i < 2; i++)
    for (int j = 0; j < 2; j++) M.op_create(fns[i][j], 1, &c->half_ops[i][j]);
  *out_comm = c;
  return NULL;
}

void rx_rt_comm_release(rx_rt_comm *c) {
  if (!c || --c->refs > 0) return;
  rt_nccl_free(c);
  for (int i = 0; i < 2; i++)
    for (int j = 0; j < 2; j++) M.op_free(&c->half_ops[i][j]);
  M.comm_free(&c->comm);
  free(c);
  if (--mpi_comms == 0 && mpi_ours) {
    M.finalize();
    mpi_ours = false;
  }
}

void rx_rt_comm_abort(rx_rt_comm *c, int code) {
  if (M.abort) M.abort(c ? c->comm : M.comm_world, code);
  exit(code); /* MPI_Abort does not return; should it, the process still ends */
}

static rx_status mpi_type(const rx_rt_comm *c, rx_dtype t, rt_ccl_op op, mpi_handle *out_type,
                          mpi_handle *out_op) {
  *out_op = op == RT_CCL_MAX ? M.op_max : M.op_sum;
  switch (t) {
  case RX_DTYPE_F32:
    *out_type = M.t_float;
    return NULL;
  case RX_DTYPE_F64:
    *out_type = M.t_double;
    return NULL;
  case RX_DTYPE_I32:
    *out_type = M.t_int32;
    return NULL;
  case RX_DTYPE_I64:
    *out_type = M.t_int64;
    return NULL;
  case RX_DTYPE_F16:
  case RX_DTYPE_BF16:
    *out_type = M.t_uint16;
    *out_op = c->half_ops[t == RX_DTYPE_BF16][op == RT_CCL_MAX];
    return NULL;
  default:
    return base_status_make(RX_ERR_UNSUPPORTED,
                            "%s: no reduction of this dtype (f32, f16, bf16, f64, i32, i64)",
                            rx_rt_dtype_name(t));
  }
}

static rx_status int_count(size_t n, const char *what, int *out) {
  if (n > INT_MAX)
    return base_status_make(RX_ERR_UNSUPPORTED, "%s: %zu elements, MPI counts stop at %d", what, n,
                            INT_MAX);
  *out = (int)n;
  return NULL;
}

rx_status rt_ccl_allreduce(rx_rt_comm *c, void *buf, size_t count, rx_dtype t, rt_ccl_op op) {
  mpi_handle mt = M.t_byte;
  mpi_handle mo = M.op_sum;
  int n = 0;
  RX_RETURN_IF_ERROR(mpi_type(c, t, op, &mt, &mo));
  RX_RETURN_IF_ERROR(int_count(count, "allreduce", &n));
  MPI_CHECK(M.allreduce(RT_MPI_IN_PLACE, buf, n, mt, mo, c->comm), "MPI_Allreduce");
  return NULL;
}

rx_status rt_ccl_allgather(rx_rt_comm *c, const void *send, void *recv, size_t bytes) {
  int n = 0;
  RX_RETURN_IF_ERROR(int_count(bytes, "allgather", &n));
  MPI_CHECK(M.allgather(send, n, M.t_byte, recv, n, M.t_byte, c->comm), "MPI_Allgather");
  return NULL;
}

rx_status rt_ccl_reduce_scatter(rx_rt_comm *c, const void *send, void *recv, size_t count,
                                rx_dtype t, rt_ccl_op op) {
  mpi_handle mt = M.t_byte;
  mpi_handle mo = M.op_sum;
  int n = 0;
  RX_RETURN_IF_ERROR(mpi_type(c, t, op, &mt, &mo));
  RX_RETURN_IF_ERROR(int_count(count, "reduce_scatter", &n));
  MPI_CHECK(M.reduce_scatter_block(send, recv, n, mt, mo, c->comm), "MPI_Reduce_scatter_block");
  return NULL;
}

rx_status rt_ccl_bcast(rx_rt_comm *c, void *buf, size_t bytes, int root) {
  int n = 0;
  RX_RETURN_IF_ERROR(int_count(bytes, "broadcast", &n));
  MPI_CHECK(M.bcast(buf, n, M.t_byte, root, c->comm), "MPI_Bcast");
  return NULL;
}

#define RT_CCL_TAG 35 /* the tag of rx_ccl_send's messages */

rx_status rt_ccl_send(rx_rt_comm *c, const void *buf, size_t bytes, int peer) {
  int n = 0;
  RX_RETURN_IF_ERROR(int_count(bytes, "send", &n));
  MPI_CHECK(M.send(buf, n, M.t_byte, peer, RT_CCL_TAG, c->comm), "MPI_Send");
  return NULL;
}

rx_status rt_ccl_recv(rx_rt_comm *c, int peer, void **out, size_t *out_bytes) {
  *out = NULL;
  *out_bytes = 0;
  mpi_status st;
  int n = 0, arrived = 0;
  /* The sender may be a pipeline stage still running its layers (milliseconds): polled without a
   * pause for about 200 us, then with sleeps of 10 us doubling up to 100 us (at most that much
   * later than the message), so that a waiting rank leaves the host's cores to the ranks that
   * compute (with host staging, lavapipe's threads are among them). */
  long pause_ns = 0;
  double t0 = rt_ccl_now();
  for (;;) {
    MPI_CHECK(M.iprobe(peer, RT_CCL_TAG, c->comm, &arrived, &st), "MPI_Iprobe");
    if (arrived) break;
    if (rt_ccl_now() - t0 < 200e-6) continue;
    pause_ns = pause_ns ? (pause_ns * 2 > 100000 ? 100000 : pause_ns * 2) : 10000;
    struct timespec ts = {0, pause_ns};
    nanosleep(&ts, NULL);
  }
  MPI_CHECK(M.get_count(&st, M.t_byte, &n), "MPI_Get_count");
  void *buf = malloc(n > 0 ? (size_t)n : 1);
  if (!buf) return rt_oom("a received message", (size_t)n);
  int err = M.recv(buf, n, M.t_byte, peer, RT_CCL_TAG, c->comm, RT_MPI_STATUS_IGNORE);
  if (err != RT_MPI_SUCCESS) {
    free(buf);
    return mpi_error(err, "MPI_Recv");
  }
  *out = buf;
  *out_bytes = (size_t)n;
  return NULL;
}

rx_status rt_ccl_all_ok(rx_rt_comm *c, bool ok, bool *out_all) {
  int v = ok ? 1 : 0;
  MPI_CHECK(M.allreduce(RT_MPI_IN_PLACE, &v, 1, M.t_int, M.op_min, c->comm), "MPI_Allreduce");
  *out_all = v == 1;
  return NULL;
}

rx_status rt_ccl_same(rx_rt_comm *c, int64_t key, bool *out_same) {
  int64_t v[2] = {key, ~key}; /* the maximum, and ~ the minimum, in one call */
  MPI_CHECK(M.allreduce(RT_MPI_IN_PLACE, v, 2, M.t_int64, M.op_max, c->comm), "MPI_Allreduce");
  *out_same = v[0] == key && ~v[1] == key;
  return NULL;
}

rx_status rx_rt_comm_broadcast_host(rx_rt_comm *c, void *data, size_t bytes, int root) {
  if (root < 0 || root >= c->size)
    return base_status_make(RX_ERR_INVALID, "broadcast: root %d, expected 0..%d", root,
                            c->size - 1);
  return rt_ccl_bcast(c, data, bytes, root);
}

rx_status rx_rt_comm_broadcast_host_idle(rx_rt_comm *c, void *data, size_t bytes, int root) {
  if (root < 0 || root >= c->size)
    return base_status_make(RX_ERR_INVALID, "broadcast: root %d, expected 0..%d", root,
                            c->size - 1);
  int n = 0, done = 0;
  RX_RETURN_IF_ERROR(int_count(bytes, "broadcast", &n));
  mpi_handle req = NULL;
  MPI_CHECK(M.ibcast(data, n, M.t_byte, root, c->comm, &req), "MPI_Ibcast");
  /* polls without a pause for about 200 us (a call that follows another soon: no added delay),
   * then sleeps 20 us, doubling up to 1 ms (an idle follower costs next to no CPU) */
  long pause_ns = 0;
  double t0 = rt_ccl_now();
  for (;;) {
    MPI_CHECK(M.test(&req, &done, RT_MPI_STATUS_IGNORE), "MPI_Test");
    if (done) return NULL;
    if (c->rank == root || rt_ccl_now() - t0 < 200e-6) continue;
    pause_ns = pause_ns ? (pause_ns * 2 > 1000000 ? 1000000 : pause_ns * 2) : 20000;
    struct timespec ts = {0, pause_ns};
    nanosleep(&ts, NULL);
  }
}

rx_status rx_rt_comm_max_host(rx_rt_comm *c, int64_t *inout_value) {
  MPI_CHECK(M.allreduce(RT_MPI_IN_PLACE, inout_value, 1, M.t_int64, M.op_max, c->comm),
            "MPI_Allreduce");
  return NULL;
}
