/* tests/ccl/ccl_test.c: the collective builtins (runtime/ccl) under mpirun, one Vulkan device
 * (lavapipe) per rank. Each rank writes its own .rx module (its peer for send/recv is its own),
 * compiles it with relaxc, loads it with the runtime, attaches the MPI communicator and calls
 * each function at ragged sizes (1, 7, 33, 1000 elements; f32 and f16) on inputs every rank can
 * compute for every other; the results are checked against a reference computed here in double
 * (sums within a tolerance, everything else bit for bit).
 *
 *   mpirun -n N ccl_test            the checks (N = 2 and 4 in ctest)
 *   mpirun -n N ccl_test --die      rank N-1 exits (code 3) before an allreduce the others wait
 *                                   in: the job must end with an error, not hang (die.cmake)
 *   mpirun -n N ccl_test --kill     the same with SIGKILL
 *   mpirun -n N ccl_test --bench    time rx_ccl_allreduce of decode-sized rows (bench proposal),
 *                                   and rx_ccl_send / rx_ccl_recv round trips between rank
 *                                   pairs at a pipeline stage's activation sizes
 *   mpirun -n N ccl_test --cuda FAKE_CUDA
 *                                   the same checks on CUDA with NCCL (rx_rt_comm_enable_nccl),
 *                                   on the fake CUDA driver (FAKE_CUDA: its path, opened first)
 *                                   and the fake NCCL (RX_NCCL_LIBRARY: fake_nccl.c), whose trace
 *                                   shows the collectives went through NCCL and no misuse
 *
 * Each rank prints its failures; rank 0 prints the total over ranks and every rank exits 1 when
 * any failed. */
#include "relaxc/ccl.h"
#include "relaxc/compiler.h"
#include "relaxc/runtime.h"

#include "base/base.h"
#include "check.h"

#include <dlfcn.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int rank, world;
static const char *target = "vulkan"; /* what the ranks' modules are compiled for */

/* the input of rank r, element i: a few hundred distinct values of both signs */
static float input_value(int r, int64_t i, rx_dtype dt) {
  float v = (float)(((r * 7919 + i * 104729 + 13) % 2001) - 1000) / 250.0f;
  return dt == RX_DTYPE_F16 ? base_f16_to_f32(base_f32_to_f16(v)) : v;
}

static const char *tname(rx_dtype dt) { return dt == RX_DTYPE_F16 ? "f16" : "f32"; }

/* The module of this rank for dtype dt: every collective once, send/recv with its partner
 * (rank ^ 1; the even one sends first). */
static char *module_text(rx_dtype dt) {
  const char *t = tname(dt);
  int peer = rank ^ 1;
  rx_strbuf b = {0};
  base_strbuf_printf(
      &b,
      "impure extern_fn rx_ccl_allreduce(x: %s[...], op: Prim(i64)) -> %s[ndim=1]\n"
      "impure extern_fn rx_ccl_allgather(x: %s[...], axis: Prim(i64)) -> %s[ndim=2]\n"
      "impure extern_fn rx_ccl_reduce_scatter(x: %s[...], axis: Prim(i64), op: Prim(i64)) -> "
      "%s[ndim=2]\n"
      "impure extern_fn rx_ccl_broadcast(x: %s[...], root: Prim(i64)) -> %s[ndim=1]\n"
      "impure extern_fn rx_ccl_send(x: %s[...], peer: Prim(i64)) -> %s[ndim=1]\n"
      "impure extern_fn rx_ccl_recv(peer: Prim(i64), dtype: Prim(i64), d0: Prim(i64)) -> "
      "%s[ndim=1]\n",
      t, t, t, t, t, t, t, t, t, t, t);
  base_strbuf_printf(&b,
                     "graph_fn ar_sum(x: %s[n]) -> %s[ndim=1] {\n  y = "
                     "call_extern(rx_ccl_allreduce, x, prim(0))\n  return y\n}\n"
                     "graph_fn ar_max(x: %s[n]) -> %s[ndim=1] {\n  y = "
                     "call_extern(rx_ccl_allreduce, x, prim(1))\n  return y\n}\n"
                     "graph_fn ag1(x: %s[m, n]) -> %s[ndim=2] {\n  y = "
                     "call_extern(rx_ccl_allgather, x, prim(1))\n  return y\n}\n"
                     "graph_fn ag0(x: %s[m, n]) -> %s[ndim=2] {\n  y = "
                     "call_extern(rx_ccl_allgather, x, prim(0))\n  return y\n}\n"
                     "graph_fn rs1(x: %s[m, n]) -> %s[ndim=2] {\n  y = "
                     "call_extern(rx_ccl_reduce_scatter, x, prim(1), prim(0))\n  return y\n}\n"
                     "graph_fn rs0max(x: %s[m, n]) -> %s[ndim=2] {\n  y = "
                     "call_extern(rx_ccl_reduce_scatter, x, prim(0), prim(1))\n  return y\n}\n"
                     "graph_fn bc(x: %s[n]) -> %s[ndim=1] {\n  y = call_extern(rx_ccl_broadcast, "
                     "x, prim(%d))\n  return y\n}\n",
                     t, t, t, t, t, t, t, t, t, t, t, t, t, t, world - 1);
  if (rank % 2 == 0)
    base_strbuf_printf(
        &b,
        "graph_fn sr(x: %s[n]) -> %s[ndim=1] {\n  s = call_extern(rx_ccl_send, x, prim(%d))\n"
        "  y = call_extern(rx_ccl_recv, prim(%d), prim(%d), prim(n))\n  return y\n}\n",
        t, t, peer, peer, (int)dt);
  else
    base_strbuf_printf(&b,
                       "graph_fn sr(x: %s[n]) -> %s[ndim=1] {\n  y = call_extern(rx_ccl_recv, "
                       "prim(%d), prim(%d), prim(n))\n"
                       "  s = call_extern(rx_ccl_send, x, prim(%d))\n  return y\n}\n",
                       t, t, peer, (int)dt, peer);
  return b.data;
}

static rx_rt_artifact *compile_rank(rx_rt_device *dev, rx_rt_comm *comm, rx_dtype dt) {
  char *text = module_text(dt);
  rx_module *m = rx_module_new();
  rx_diag *diag = rx_diag_create();
  unsigned char *bytes = NULL;
  size_t len = 0;
  rx_rt_artifact *a = NULL;
  char name[64];
  snprintf(name, sizeof name, "ccl_rank%d_%s.rx", rank, tname(dt));
  rx_compile_request req = {.targets = target};
  CHECK_OK(rx_module_parse(m, name, text, strlen(text), diag));
  if (!check_failed) CHECK_OK(rx_module_compile(m, &req, diag, &bytes, &len));
  if (bytes) CHECK_OK(rx_rt_artifact_load_memory(dev, bytes, len, name, &a));
  if (check_failed) fprintf(stderr, "%s", rx_diag_text(diag));
  if (a) rx_rt_artifact_set_comm(a, comm);
  rx_free(bytes);
  rx_diag_destroy(diag);
  rx_module_free(m);
  free(text);
  return a;
}

/* x as a device tensor: shape [m, n] (m = 0: [n]) of rank r's inputs, offset by salt */
static rx_rt_value *input(rx_rt_device *dev, rx_dtype dt, int r, int64_t m, int64_t n) {
  int64_t total = (m ? m : 1) * n;
  uint16_t *h16 = malloc((size_t)total * 2 + 2);
  float *h32 = malloc((size_t)total * 4 + 4);
  for (int64_t i = 0; i < total; i++) {
    h32[i] = input_value(r, i, dt);
    h16[i] = base_f32_to_f16(h32[i]);
  }
  int64_t shape[2] = {m, n};
  rx_rt_tensor *t = NULL;
  rx_rt_value *v = NULL;
  CHECK_OK(rx_rt_tensor_from_host(dev, dt, m ? 2 : 1, m ? shape : shape + 1,
                                  dt == RX_DTYPE_F16 ? (void *)h16 : (void *)h32, &t));
  if (t) CHECK_OK(rx_rt_value_from_tensor(t, &v));
  rx_rt_tensor_release(t);
  free(h16);
  free(h32);
  return v;
}

/* fn(x) and its elements as floats (*out_n of them; NULL on error, checked) */
static float *call(rx_rt_artifact *a, const char *fn, rx_rt_value *x, int64_t *out_shape,
                   int *out_ndim, int64_t *out_n) {
  rx_rt_value *res = NULL;
  CHECK_OK(rx_rt_vm_call_values(a, fn, &x, 1, &res));
  rx_rt_tensor *t = res ? rx_rt_value_tensor(res) : NULL;
  if (!t) {
    rx_rt_value_release(res);
    return NULL;
  }
  int nd = rx_rt_tensor_ndim(t);
  int64_t n = 1;
  for (int i = 0; i < nd; i++) n *= (out_shape[i] = rx_rt_tensor_shape(t)[i]);
  *out_ndim = nd;
  *out_n = n;
  size_t es = rx_rt_dtype_size(rx_rt_tensor_dtype(t));
  uint8_t *raw = malloc((size_t)n * es + 1);
  float *f = malloc((size_t)n * sizeof *f + 1);
  CHECK_OK(rx_rt_tensor_read(t, raw, (size_t)n * es));
  for (int64_t i = 0; i < n; i++)
    f[i] = es == 2 ? base_f16_to_f32(((uint16_t *)raw)[i]) : ((float *)raw)[i];
  free(raw);
  rx_rt_value_release(res);
  return f;
}

/* a check of the result's shape: true when it holds */
static bool expect(bool cond, const char *what, int nd, const int64_t *shape) {
  if (cond) return true;
  CHECK_MSG(0, "rank %d: %s: wrong shape: ndim %d, dims %lld, %lld", rank, what, nd,
            (long long)shape[0], (long long)(nd > 1 ? shape[1] : -1));
  return false;
}

/* got[i] against want[i] within tol[i] (0: exactly); one failure line per call */
static void compare(const char *what, const float *got, const double *want, const double *tol,
                    int64_t n) {
  for (int64_t i = 0; i < n; i++) {
    double d = fabs((double)got[i] - want[i]);
    if (tol ? d > tol[i] : (double)got[i] != want[i]) {
      CHECK_MSG(0, "rank %d: %s: element %lld: got %.9g, want %.9g", rank, what, (long long)i,
                got[i], want[i]);
      return;
    }
  }
  check_passed++;
}

/* the tolerance of a sum of world values: f32 rounding, or f16's once per reduction step */
static double sum_tol(rx_dtype dt, double abs_sum) {
  return dt == RX_DTYPE_F16 ? 1e-3 * world * abs_sum + 1e-3 : 1e-6 * abs_sum + 1e-7;
}

static void check_allreduce(rx_rt_artifact *a, rx_rt_device *dev, rx_dtype dt, int64_t n) {
  char what[96];
  double *want = malloc((size_t)n * 16 + 16), *tol = want + n, *mx = malloc((size_t)n * 8 + 8);
  for (int64_t i = 0; i < n; i++) {
    double s = 0, as = 0, m = -INFINITY;
    for (int r = 0; r < world; r++) {
      double v = input_value(r, i, dt);
      s += v, as += fabs(v), m = v > m ? v : m;
    }
    want[i] = s, tol[i] = sum_tol(dt, as), mx[i] = m;
  }
  rx_rt_value *x = input(dev, dt, rank, 0, n);
  int64_t shape[4];
  int nd = 0;
  int64_t got_n = 0;
  float *got = call(a, "ar_sum", x, shape, &nd, &got_n);
  snprintf(what, sizeof what, "allreduce sum %s[%lld]", tname(dt), (long long)n);
  if (got && expect(got_n == n && nd == 1, what, nd, shape)) compare(what, got, want, tol, n);
  free(got);
  got = call(a, "ar_max", x, shape, &nd, &got_n);
  snprintf(what, sizeof what, "allreduce max %s[%lld]", tname(dt), (long long)n);
  if (got && expect(got_n == n, what, nd, shape)) compare(what, got, mx, NULL, n);
  free(got);
  /* broadcast from the last rank */
  for (int64_t i = 0; i < n; i++) mx[i] = input_value(world - 1, i, dt);
  got = call(a, "bc", x, shape, &nd, &got_n);
  snprintf(what, sizeof what, "broadcast %s[%lld]", tname(dt), (long long)n);
  if (got && expect(got_n == n, what, nd, shape)) compare(what, got, mx, NULL, n);
  free(got);
  /* send/recv with the partner */
  if ((rank ^ 1) < world) {
    for (int64_t i = 0; i < n; i++) mx[i] = input_value(rank ^ 1, i, dt);
    got = call(a, "sr", x, shape, &nd, &got_n);
    snprintf(what, sizeof what, "recv %s[%lld] from rank %d", tname(dt), (long long)n, rank ^ 1);
    if (got && expect(got_n == n, what, nd, shape)) compare(what, got, mx, NULL, n);
    free(got);
  }
  rx_rt_value_release(x);
  free(want);
  free(mx);
}

/* allgather along axis 1 of [3, n] and axis 0 of [2, n] */
static void check_allgather(rx_rt_artifact *a, rx_rt_device *dev, rx_dtype dt, int64_t n) {
  char what[96];
  int64_t shape[4], got_n = 0;
  int nd = 0;
  double *want = malloc((size_t)(3 * n * world) * 8 + 8);
  rx_rt_value *x = input(dev, dt, rank, 3, n);
  for (int64_t o = 0; o < 3; o++)
    for (int r = 0; r < world; r++)
      for (int64_t i = 0; i < n; i++) want[(o * world + r) * n + i] = input_value(r, o * n + i, dt);
  float *got = call(a, "ag1", x, shape, &nd, &got_n);
  snprintf(what, sizeof what, "allgather axis 1 %s[3, %lld]", tname(dt), (long long)n);
  if (got && expect(nd == 2 && shape[0] == 3 && shape[1] == n * world, what, nd, shape))
    compare(what, got, want, NULL, got_n);
  free(got);
  for (int r = 0; r < world; r++)
    for (int64_t i = 0; i < 3 * n; i++) want[r * 3 * n + i] = input_value(r, i, dt);
  got = call(a, "ag0", x, shape, &nd, &got_n);
  snprintf(what, sizeof what, "allgather axis 0 %s[3, %lld]", tname(dt), (long long)n);
  if (got && expect(nd == 2 && shape[0] == 3 * world && shape[1] == n, what, nd, shape))
    compare(what, got, want, NULL, got_n);
  free(got);
  rx_rt_value_release(x);
  free(want);
}

/* reduce_scatter: sum along axis 1 of [2, world*n] (rank r gets columns r*n..), max along axis
 * 0 of [world*2, n] (rank r gets rows 2r, 2r+1) */
static void check_reduce_scatter(rx_rt_artifact *a, rx_rt_device *dev, rx_dtype dt, int64_t n) {
  char what[96];
  int64_t shape[4], got_n = 0, cols = world * n;
  int nd = 0;
  double *want = malloc((size_t)(2 * n) * 16 + 16), *tol = want + 2 * n;
  for (int64_t o = 0; o < 2; o++)
    for (int64_t i = 0; i < n; i++) {
      double s = 0, as = 0;
      for (int r = 0; r < world; r++) {
        double v = input_value(r, o * cols + rank * n + i, dt);
        s += v, as += fabs(v);
      }
      want[o * n + i] = s, tol[o * n + i] = sum_tol(dt, as);
    }
  rx_rt_value *x = input(dev, dt, rank, 2, cols);
  float *got = call(a, "rs1", x, shape, &nd, &got_n);
  snprintf(what, sizeof what, "reduce_scatter sum axis 1 %s[2, %lld]", tname(dt), (long long)cols);
  if (got && expect(nd == 2 && shape[0] == 2 && shape[1] == n, what, nd, shape))
    compare(what, got, want, tol, got_n);
  free(got);
  rx_rt_value_release(x);
  x = input(dev, dt, rank, 2 * world, n);
  for (int64_t i = 0; i < 2 * n; i++) {
    double m = -INFINITY;
    for (int r = 0; r < world; r++) {
      double v = input_value(r, rank * 2 * n + i, dt);
      m = v > m ? v : m;
    }
    want[i] = m;
  }
  got = call(a, "rs0max", x, shape, &nd, &got_n);
  snprintf(what, sizeof what, "reduce_scatter max axis 0 %s[%d, %lld]", tname(dt), 2 * world,
           (long long)n);
  if (got && expect(nd == 2 && shape[0] == 2 && shape[1] == n, what, nd, shape))
    compare(what, got, want, NULL, got_n);
  free(got);
  rx_rt_value_release(x);
  free(want);
}

/* errors on every rank, and no hang: a dim not divisible by the world size, ranks that disagree
 * on a shape */
static void check_errors(rx_rt_artifact *a, rx_rt_device *dev) {
  rx_rt_value *x = input(dev, RX_DTYPE_F32, rank, 2, world * 3 + 1), *res = NULL;
  char want[96];
  snprintf(want, sizeof want, "f32[2, %d]: dim 1 (%d) is not divisible by the world size %d",
           world * 3 + 1, world * 3 + 1, world);
  CHECK_ERR(rx_rt_vm_call_values(a, "rs1", &x, 1, &res), RX_ERR_INVALID, want);
  rx_rt_value_release(res);
  rx_rt_value_release(x);
  x = input(dev, RX_DTYPE_F32, rank, 0, rank == 0 ? 7 : 8);
  res = NULL;
  snprintf(want, sizeof want, "rank %d passes f32[%d], op sum", rank, rank == 0 ? 7 : 8);
  CHECK_ERR(rx_rt_vm_call_values(a, "ar_sum", &x, 1, &res), RX_ERR_INVALID, want);
  rx_rt_value_release(res);
  rx_rt_value_release(x);
}

/* rx_rt_comm_broadcast_host_idle from each root, at ragged sizes: every byte as the root sent it.
 * The root waits 5 ms first (rank 0's call after a pause), so that the others are past their
 * polling and asleep when it comes; a broadcast right after (no pause) is caught while polling. */
static void check_broadcast_idle(rx_rt_comm *comm) {
  size_t sizes[] = {1, 7, 33, 1000, 100000};
  for (int root = 0; root < world; root++) {
    for (size_t k = 0; k < 5; k++) {
      unsigned char *buf = malloc(sizes[k]);
      if (!buf) return;
      for (size_t i = 0; i < sizes[k]; i++)
        buf[i] = rank == root ? (unsigned char)(i * 31 + (size_t)root * 7 + k) : 0xEE;
      if (rank == root && k % 2 == 0) {
        struct timespec ts = {0, 5000000};
        nanosleep(&ts, NULL);
      }
      CHECK_OK(rx_rt_comm_broadcast_host_idle(comm, buf, sizes[k], root));
      size_t bad = 0;
      for (size_t i = 0; i < sizes[k]; i++)
        bad += buf[i] != (unsigned char)(i * 31 + (size_t)root * 7 + k);
      CHECK_MSG(bad == 0, "rank %d: broadcast_host_idle of %zu bytes from rank %d: %zu differ",
                rank, sizes[k], root, bad);
      free(buf);
    }
  }
  rx_status s = rx_rt_comm_broadcast_host_idle(comm, NULL, 0, world); /* no such root */
  CHECK(s != NULL && strstr(rx_status_message(s), "root") != NULL);
  rx_status_free(s);
}

static void bench(rx_rt_artifact *a, rx_rt_device *dev, rx_rt_comm *comm) {
  int64_t sizes[] = {4096, 8192, 32000};
  for (size_t k = 0; k < 3; k++) {
    rx_rt_value *x = input(dev, RX_DTYPE_F32, rank, 0, sizes[k]), *res = NULL;
    int iters = 200;
    rx_rt_comm_stats_reset(comm);
    struct timespec c0, c1; /* rank 0's CPU time too: the wall clock of a loaded machine is noise */
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c0);
    for (int i = 0; i < iters && !check_failed; i++) {
      CHECK_OK(rx_rt_vm_call_values(a, "ar_sum", &x, 1, &res));
      rx_rt_value_release(res);
      res = NULL;
    }
    double sec = 0;
    uint64_t calls = 0;
    rx_rt_comm_stats(comm, &sec, &calls);
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c1);
    double cpu = (double)(c1.tv_sec - c0.tv_sec) + (double)(c1.tv_nsec - c0.tv_nsec) * 1e-9;
    if (rank == 0)
      printf("bench: %d ranks: rx_ccl_allreduce f32[%lld]: %.1f us per call, %.1f us of rank 0's "
             "CPU time per call (%llu calls)\n",
             world, (long long)sizes[k], sec / (double)calls * 1e6, cpu / (double)iters * 1e6,
             (unsigned long long)calls);
    rx_rt_value_release(x);
  }
}

/* Round trips of sr (rank 2k sends to 2k + 1, which sends back) at a pipeline stage boundary's
 * sizes: decode hidden states of one token at hidden 4096 and 8192, a logits row of 32000, and
 * prefill chunks of 128 and 512 tokens at hidden 4096. Half a round trip is one stage-to-stage
 * transfer: a device-to-host read, MPI_Send, MPI_Recv and an upload. */
static void bench_sendrecv(rx_rt_artifact *a, rx_rt_device *dev) {
  int64_t sizes[] = {4096, 8192, 32000, 128 * 4096, 512 * 4096};
  for (size_t k = 0; k < sizeof sizes / sizeof sizes[0] && world % 2 == 0; k++) {
    rx_rt_value *x = input(dev, RX_DTYPE_F32, rank, 0, sizes[k]), *res = NULL;
    int iters = sizes[k] > 100000 ? 20 : 200;
    CHECK_OK(rx_rt_vm_call_values(a, "sr", &x, 1, &res)); /* warm: the programs, the buffers */
    rx_rt_value_release(res);
    res = NULL;
    struct timespec w0, w1, c0, c1;
    clock_gettime(CLOCK_MONOTONIC, &w0);
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c0);
    for (int i = 0; i < iters && !check_failed; i++) {
      CHECK_OK(rx_rt_vm_call_values(a, "sr", &x, 1, &res));
      rx_rt_value_release(res);
      res = NULL;
    }
    clock_gettime(CLOCK_MONOTONIC, &w1);
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c1);
    double wall = (double)(w1.tv_sec - w0.tv_sec) + (double)(w1.tv_nsec - w0.tv_nsec) * 1e-9;
    double cpu = (double)(c1.tv_sec - c0.tv_sec) + (double)(c1.tv_nsec - c0.tv_nsec) * 1e-9;
    double one_way = wall / iters / 2, bytes = 4.0 * (double)sizes[k];
    if (rank == 0)
      printf("bench: %d ranks: rx_ccl_send + rx_ccl_recv f32[%lld] (%.0f KB): %.1f us one way "
             "(half a round trip), %.2f GB/s, %.1f us of rank 0's CPU time per round trip\n",
             world, (long long)sizes[k], bytes / 1024, one_way * 1e6, bytes / one_way * 1e-9,
             cpu / iters * 1e6);
    rx_rt_value_release(x);
  }
}

/* The per-builtin counters (rx_rt_comm_counter_of) of a known sequence of calls: calls and bytes
 * exact (this rank's tensor argument; recv: the tensor received), every time > 0, and their sum
 * rx_rt_comm_stats's. */
static void check_counters(rx_rt_artifact *a, rx_rt_device *dev, rx_rt_comm *comm, rx_dtype dt) {
  size_t es = dt == RX_DTYPE_F16 ? 2 : 4;
  bool partner = (rank ^ 1) < world; /* sr: a send and a recv */
  struct {
    const char *fn;
    int64_t m, n;
  } calls[] = {{"ar_sum", 0, 7},      {"ar_max", 0, 1000}, {"ag1", 3, 5},
               {"rs1", 3, 2 * world}, {"bc", 0, 33},       {"sr", 0, 7}};
  const uint64_t want_calls[RX_CCL_KIND_COUNT] = {2, 1, 1, 1, partner, partner},
                 want_bytes[RX_CCL_KIND_COUNT] = {(7 + 1000) * es,
                                                  15 * es,
                                                  (uint64_t)(6 * world) * es,
                                                  33 * es,
                                                  partner ? 7 * es : 0,
                                                  partner ? 7 * es : 0};
  rx_rt_comm_stats_reset(comm);
  for (size_t k = 0; k < RX_ARRAY_LEN(calls) && (partner || k < 5); k++) {
    rx_rt_value *x = input(dev, dt, rank, calls[k].m, calls[k].n), *res = NULL;
    CHECK_OK(rx_rt_vm_call_values(a, calls[k].fn, &x, 1, &res));
    rx_rt_value_release(res);
    rx_rt_value_release(x);
  }
  double total = 0, sum = 0;
  uint64_t ncalls = 0, nsum = 0;
  rx_rt_comm_stats(comm, &total, &ncalls);
  for (int k = 0; k < RX_CCL_KIND_COUNT; k++) {
    rx_rt_comm_counter c = rx_rt_comm_counter_of(comm, (rx_ccl_kind)k);
    const char *name = rx_ccl_kind_name((rx_ccl_kind)k);
    CHECK_MSG(name != NULL, "rx_ccl_kind_name(%d) is NULL", k);
    CHECK_MSG(c.calls == want_calls[k], "%s %s: %llu calls counted, expected %llu", tname(dt), name,
              (unsigned long long)c.calls, (unsigned long long)want_calls[k]);
    CHECK_MSG(c.bytes == want_bytes[k], "%s %s: %llu bytes counted, expected %llu", tname(dt), name,
              (unsigned long long)c.bytes, (unsigned long long)want_bytes[k]);
    CHECK_MSG(!c.calls || c.seconds > 0, "%s %s: %g seconds for %llu calls", tname(dt), name,
              c.seconds, (unsigned long long)c.calls);
    sum += c.seconds, nsum += c.calls;
  }
  CHECK_INT_EQ(ncalls, nsum);
  CHECK_MSG(fabs(total - sum) <= 1e-9 * (1 + total), "the counters' time %g, the total %g", sum,
            total);
  CHECK_MSG(rx_ccl_kind_name(RX_CCL_KIND_COUNT) == NULL, "a name for a kind out of range");
  CHECK_INT_EQ(rx_rt_comm_counter_of(comm, RX_CCL_KIND_COUNT).calls, 0);
  rx_rt_comm_stats_reset(comm);
  CHECK_INT_EQ(rx_rt_comm_counter_of(comm, RX_CCL_ALLREDUCE).calls, 0);
}

/* The fake NCCL's trace (--cuda): every collective went through NCCL, and nothing was misused. */
static void check_fake_nccl(void *fake, bool after_release) {
  int (*count)(const char *) = (int (*)(const char *))dlsym(fake, "fake_nccl_count");
  int (*ntrace)(void) = (int (*)(void))dlsym(fake, "fake_nccl_trace_count");
  const char *(*line)(int) = (const char *(*)(int))dlsym(fake, "fake_nccl_trace_line");
  int (*live)(void) = (int (*)(void))dlsym(fake, "fake_nccl_live");
  if (!count || !ntrace || !line || !live) {
    CHECK_MSG(0, "RX_NCCL_LIBRARY is not the fake NCCL (no fake_nccl_count)");
    return;
  }
  if (after_release) {
    CHECK_MSG(live() == 0, "rank %d: %d NCCL communicators not destroyed", rank, live());
    return;
  }
  CHECK_MSG(count("misuse") == 0, "rank %d: the fake NCCL saw %d misuses", rank, count("misuse"));
  const char *want[] = {"ncclCommInitRank rank=",
                        "ncclAllReduce count=1000 float32 sum",
                        "ncclAllReduce count=33 float16 max",
                        "ncclAllGather count=",
                        "ncclReduceScatter count=2000 float32 sum",
                        "ncclReduceScatter count=66 float16 max",
                        "ncclBroadcast count=2000 int8"};
  char p2p[64];
  snprintf(p2p, sizeof p2p, "ncclRecv count=4000 int8 peer=%d", rank ^ 1);
  for (size_t k = 0; k <= sizeof want / sizeof want[0]; k++) {
    const char *w = k < sizeof want / sizeof want[0] ? want[k] : p2p;
    bool found = false;
    for (int i = 0; i < ntrace() && !found; i++) found = strstr(line(i), w) == line(i);
    CHECK_MSG(found, "rank %d: no '%s' in the fake NCCL's trace", rank, w);
  }
}

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "";
  bool cuda = !strcmp(mode, "--cuda");
  void *fake_cuda = NULL, *fake_nccl = NULL;
  if (cuda) { /* the fakes first, so that the runtime's dlopen finds them (ccl.cmake) */
    const char *nccl = getenv("RX_NCCL_LIBRARY");
    fake_cuda = argc > 2 ? dlopen(argv[2], RTLD_NOW | RTLD_GLOBAL) : NULL;
    fake_nccl = nccl ? dlopen(nccl, RTLD_NOW | RTLD_LOCAL) : NULL;
    if (!fake_cuda || !fake_nccl) {
      fprintf(stderr, "--cuda FAKE_CUDA with RX_NCCL_LIBRARY=FAKE_NCCL: %s\n", dlerror());
      return 1;
    }
    target = "cuda";
  }
  bool die = !strcmp(mode, "--die") || !strcmp(mode, "--kill"), do_bench = !strcmp(mode, "--bench");
  setvbuf(stdout, NULL, _IOLBF, 0);
  rx_rt_comm *comm = NULL;
  rx_status s = rx_rt_comm_create_mpi(&comm);
  if (s) {
    printf("SKIP: %s\n", rx_status_message(s));
    rx_status_free(s);
    return 77;
  }
  rank = rx_rt_comm_rank(comm), world = rx_rt_comm_size(comm);
  rx_rt_device_options o = {.validation = -1};
  rx_rt_device *dev = NULL;
  s = rx_rt_device_open(cuda ? "cuda:0" : "vulkan:0", &o, &dev);
  int64_t absent = s != NULL;
  CHECK_OK(rx_rt_comm_max_host(comm, &absent));
  if (absent) {
    if (rank == 0)
      printf("SKIP: %s:0: %s\n", target, s ? rx_status_message(s) : "absent on a rank");
    rx_status_free(s);
    rx_rt_device_release(dev);
    rx_rt_comm_release(comm);
    return 77;
  }
  if (cuda) CHECK_OK(rx_rt_comm_enable_nccl(comm, dev));
  if (cuda && rank == 0) printf("communicator: %s\n", rx_rt_comm_backend(comm));
  for (int di = 0; di < 2 && !check_failed; di++) {
    rx_dtype dt = di ? RX_DTYPE_F16 : RX_DTYPE_F32;
    rx_rt_artifact *a = compile_rank(dev, comm, dt);
    if (!a) break;
    if (die && rank == world - 1) {
      fprintf(stderr, "rank %d: exiting in the middle (%s)\n", rank, mode);
      if (!strcmp(mode, "--kill")) raise(SIGKILL);
      _exit(3);
    }
    if (do_bench) {
      bench(a, dev, comm);
      bench_sendrecv(a, dev);
      rx_rt_artifact_release(a);
      break;
    }
    int64_t sizes[] = {1, 7, 33, 1000};
    for (int k = 0; k < 4; k++) {
      check_allreduce(a, dev, dt, sizes[k]);
      check_allgather(a, dev, dt, sizes[k]);
      check_reduce_scatter(a, dev, dt, sizes[k]);
    }
    check_counters(a, dev, comm, dt);
    if (di == 0) check_errors(a, dev);
    if (di == 0 && !cuda) check_broadcast_idle(comm);
    rx_rt_artifact_release(a);
  }
  if (cuda) check_fake_nccl(fake_nccl, false);
  int64_t failed = check_failed, passed = check_passed;
  rx_status s2 = rx_rt_comm_max_host(comm, &failed);
  if (s2) {
    fprintf(stderr, "rank %d: %s\n", rank, rx_status_message(s2));
    rx_status_free(s2);
    failed = 1;
  }
  if (rank == 0)
    printf("ccl_test: %d ranks: rank 0 %lld passed, %s\n", world, (long long)passed,
           failed ? "failures (above)" : "no rank failed");
  size_t vmsgs = rx_rt_device_validation_messages(dev, NULL);
  rx_rt_device_release(dev);
  rx_rt_comm_release(comm);
  if (cuda) {
    int before = check_failed;
    check_fake_nccl(fake_nccl, true);
    failed += check_failed - before;
    dlclose(fake_nccl);
    dlclose(fake_cuda);
  }
  return failed || vmsgs ? 1 : 0;
}
