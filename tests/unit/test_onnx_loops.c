/* test_onnx_loops: ONNX Loop and Scan at trip counts 0, 1, 63, 64, 1000 and 100,000, compiled
 * for Vulkan and run on its device (lavapipe in CI), checked against closed forms (every value is
 * exact in f32: multiples of 1/4 far below 2^24).
 *
 * A loop is a tail-recursive graph function (frontends/onnx/import_control.c) that the
 * host program's TAIL_CALL_FN runs in constant frames; before it, every count past 63 failed
 * with "calls nested more than 64 deep". The models (tests/onnx/loops, written by
 * tests/onnx/gen_loop_models.py; loop_count from tests/lit/onnx/Inputs):
 *   loop_count  Loop of M steps (no condition): s += x, scan output s after each step
 *   loop_cond   the same with a condition from data: min(M, L) steps
 *   loop_while  no trip count, the condition alone: L steps
 *   scan_dirs   Scan over x: f32[t, n], forward and reversed inputs, a state and three scan
 *               outputs, forward and reversed
 * Condition-ended loops read the condition back each step (one device round trip a step), so the
 * 100,000-step one is loop_while only; the others stop at 1000 steps. */
/* test-needs: runtime */
#include "base/base.h"
#include "driver/driver.h"
#include "ir/ir.h"
#include "relaxc/runtime.h"
#include "support_kernels.h"
#include "targets/target.h"

#ifdef RX_HAVE_ONNX
#include "frontends/onnx/onnx_import.h"
#endif

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifdef RX_HAVE_ONNX

static int passed, failed;

#define FAIL(...)                                                                                  \
  do {                                                                                             \
    failed++;                                                                                      \
    fprintf(stderr, "FAIL: " __VA_ARGS__);                                                         \
    fputc('\n', stderr);                                                                           \
  } while (0)

static const int64_t COUNTS[] = {0, 1, 63, 64, 1000, 100000};
enum { NS = 3, NX = 2 }; /* the loops' state length, the scan's row length */
static const float S0[NS] = {1, 2, 3}, X[NS] = {0.5f, 1, -1};

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Imports tests/PATH, compiles it for Vulkan (lavapipe's target) and loads it on dev. */
static rx_rt_artifact *load(rx_rt_device *dev, const char *dir, const char *path) {
  char full[1024];
  snprintf(full, sizeof full, "%s/%s", dir, path);
  char *bytes = NULL;
  size_t len = 0;
  rx_status s = base_read_file(full, &bytes, &len);
  rx_module *m = rx_module_new();
  rx_diag diag;
  base_diag_init(&diag);
  rx_rt_artifact *art = NULL;
  if (!s) s = onnx_import(m, bytes, len, path, NULL, &diag);
  if (!s) {
    rx_compile_options o = {0};
    o.cache = rxk_kcache(); /* support_kcache.c */
    rx_status ts = tgt_target_parse("vulkan-lavapipe", &o.targets[o.ntargets++]);
    RX_ASSERT(!ts);
    rx_compile_result r;
    if (!drv_compile(m, &o, &diag, &r))
      FAIL("%s: does not compile:\n%s", path, rx_diag_text(&diag));
    else
      s = rx_rt_artifact_load_memory(dev, r.artifact, r.artifact_len, path, &art);
    drv_compile_result_free(&r);
  }
  if (s) {
    FAIL("%s: %s", path, rx_status_message(s));
    rx_status_free(s);
  }
  base_diag_free(&diag);
  rx_module_free(m);
  free(bytes);
  return art;
}

static rx_rt_tensor *scalar(rx_rt_device *dev, int64_t v) {
  rx_rt_tensor *t = NULL;
  rx_status s = rx_rt_tensor_from_host(dev, RX_DTYPE_I64, 0, NULL, &v, &t);
  RX_ASSERT(!s);
  return t;
}

static rx_rt_tensor *floats(rx_rt_device *dev, int ndim, const int64_t *shape, const float *v) {
  rx_rt_tensor *t = NULL;
  rx_status s = rx_rt_tensor_from_host(dev, RX_DTYPE_F32, ndim, shape, v, &t);
  RX_ASSERT(!s);
  return t;
}

/* Result i of r as floats of shape [rows, cols] (rows -1: a vector of cols), heap; NULL after a
 * FAIL naming what. */
static float *result(const rx_rt_value *r, size_t i, int64_t rows, int64_t cols, const char *what) {
  rx_rt_tensor *t = rx_rt_value_tensor(rx_rt_value_tuple_item(r, i));
  int nd = rows < 0 ? 1 : 2;
  const int64_t *sh = t ? rx_rt_tensor_shape(t) : NULL;
  if (!t || rx_rt_tensor_ndim(t) != nd || (nd == 2 && sh[0] != rows) || sh[nd - 1] != cols) {
    FAIL("%s: result %zu is not f32[%lld, %lld]", what, i, (long long)rows, (long long)cols);
    return NULL;
  }
  size_t n = (size_t)(rows < 0 ? 1 : rows) * (size_t)cols;
  float *v = malloc(n * sizeof *v + 1);
  rx_status s = rx_rt_tensor_read(t, v, n * sizeof *v);
  if (s) {
    FAIL("%s: reading result %zu: %s", what, i, rx_status_message(s));
    rx_status_free(s);
    free(v);
    return NULL;
  }
  return v;
}

/* Compares got (n values) with want exactly; FAILs at the first difference. */
static bool same(const char *what, const char *name, const float *got, const float *want,
                 size_t n) {
  for (size_t i = 0; got && i < n; i++)
    if (got[i] != want[i]) {
      FAIL("%s: %s[%zu] = %g, expected %g", what, name, i, got[i], want[i]);
      return false;
    }
  return got != NULL;
}

/* A Loop model run with inputs in (M and/or L, then s0, x); `steps` steps expected. */
static void check_loop(rx_rt_artifact *art, const char *what, rx_rt_tensor **in, size_t nin,
                       int64_t steps) {
  double t0 = now_s();
  rx_rt_value *r = NULL;
  rx_status s = rx_rt_vm_call(art, "main", in, nin, &r);
  if (s) {
    FAIL("%s: %s", what, rx_status_message(s));
    rx_status_free(s);
    return;
  }
  float *st = result(r, 0, -1, NS, what), *sc = result(r, 1, steps, NS, what);
  double dt = now_s() - t0; /* the results read: the device is done */
  float *want = malloc((size_t)(steps + 1) * NS * sizeof *want);
  float cur[NS];
  memcpy(cur, S0, sizeof cur);
  for (int64_t k = 0; k < steps; k++)
    for (int j = 0; j < NS; j++) want[k * NS + j] = cur[j] += X[j];
  if (same(what, "s", st, cur, NS) && same(what, "scans", sc, want, (size_t)steps * NS)) {
    passed++;
    printf("  %s: %lld steps in %.3f s\n", what, (long long)steps, dt);
  }
  free(want);
  free(st);
  free(sc);
  rx_rt_value_release(r);
}

static void test_loops(rx_rt_device *dev, const char *dir) {
  rx_rt_artifact *count = load(dev, dir, "lit/onnx/Inputs/loop_count.onnx"),
                 *cond = load(dev, dir, "onnx/loops/loop_cond.onnx"),
                 *wh = load(dev, dir, "onnx/loops/loop_while.onnx");
  const int64_t n = NS;
  rx_rt_tensor *s0 = floats(dev, 1, &n, S0), *x = floats(dev, 1, &n, X);
  char what[160];
  for (size_t i = 0; i < RX_ARRAY_LEN(COUNTS); i++) {
    int64_t c = COUNTS[i];
    rx_rt_tensor *m = scalar(dev, c), *big = scalar(dev, (int64_t)1 << 40), *l = scalar(dev, c),
                 *lmore = scalar(dev, c + 7);
    if (count) {
      snprintf(what, sizeof what, "loop_count M=%lld", (long long)c);
      check_loop(count, what, (rx_rt_tensor *[]){m, s0, x}, 3, c);
    }
    if (wh) {
      snprintf(what, sizeof what, "loop_while L=%lld", (long long)c);
      check_loop(wh, what, (rx_rt_tensor *[]){l, s0, x}, 3, c);
    }
    if (cond && c <= 1000) { /* M ends it; then the condition, M = 2^40 never allocated */
      snprintf(what, sizeof what, "loop_cond M=%lld L=%lld", (long long)c, (long long)c + 7);
      check_loop(cond, what, (rx_rt_tensor *[]){m, lmore, s0, x}, 4, c);
      snprintf(what, sizeof what, "loop_cond M=2^40 L=%lld", (long long)c);
      check_loop(cond, what, (rx_rt_tensor *[]){big, l, s0, x}, 4, c);
    }
    rx_rt_tensor_release(m);
    rx_rt_tensor_release(big);
    rx_rt_tensor_release(l);
    rx_rt_tensor_release(lmore);
  }
  rx_rt_tensor_release(s0);
  rx_rt_tensor_release(x);
  rx_rt_artifact_release(count);
  rx_rt_artifact_release(cond);
  rx_rt_artifact_release(wh);
}

/* scan_dirs over t rows: s = s0 + the sum of x's rows; y1 the running sums; y2 = x (read
 * reversed, written reversed); y3 = x upside down (read reversed, written forward). */
static void check_scan(rx_rt_device *dev, rx_rt_artifact *art, int64_t t) {
  static const float s0v[NX] = {0.5f, -1};
  float *x = malloc((size_t)(t + 1) * NX * sizeof *x), *y1 = malloc((size_t)(t + 1) * NX * 4),
        *y3 = malloc((size_t)(t + 1) * NX * 4), s[NX] = {s0v[0], s0v[1]};
  for (int64_t k = 0; k < t; k++)
    for (int j = 0; j < NX; j++) x[k * NX + j] = (float)(k % 7) + 0.25f * (float)j;
  for (int64_t k = 0; k < t; k++)
    for (int j = 0; j < NX; j++) {
      y1[k * NX + j] = s[j] += x[k * NX + j];
      y3[k * NX + j] = x[(t - 1 - k) * NX + j];
    }
  const int64_t ns = NX, xs[2] = {t, NX};
  rx_rt_tensor *in[2] = {floats(dev, 1, &ns, s0v), floats(dev, 2, xs, x)};
  char what[80];
  snprintf(what, sizeof what, "scan_dirs t=%lld", (long long)t);
  double t0 = now_s();
  rx_rt_value *r = NULL;
  rx_status st = rx_rt_vm_call(art, "main", in, 2, &r);
  if (st) {
    FAIL("%s: %s", what, rx_status_message(st));
    rx_status_free(st);
  } else {
    float *g[4] = {result(r, 0, -1, NX, what), result(r, 1, t, NX, what), result(r, 2, t, NX, what),
                   result(r, 3, t, NX, what)};
    double dt = now_s() - t0;
    size_t cnt = (size_t)t * NX;
    if (same(what, "s", g[0], s, NX) && same(what, "y1", g[1], y1, cnt) &&
        same(what, "y2", g[2], x, cnt) && same(what, "y3", g[3], y3, cnt)) {
      passed++;
      printf("  %s: %lld steps in %.3f s\n", what, (long long)t, dt);
    }
    for (int i = 0; i < 4; i++) free(g[i]);
  }
  rx_rt_value_release(r);
  rx_rt_tensor_release(in[0]);
  rx_rt_tensor_release(in[1]);
  free(x);
  free(y1);
  free(y3);
}

int main(int argc, char **argv) {
  const char *dir = argc > 1 ? argv[1] : "tests";
  setvbuf(stdout, NULL, _IOLBF, 0);
  rx_rt_device *dev = NULL;
  rx_rt_device_options dopts = {.validation = 1};
  rx_status s = rx_rt_device_open("vulkan:0", &dopts, &dev);
  if (s) {
    printf("onnx_loops: Vulkan unavailable (%s): skipped\n", rx_status_message(s));
    rx_status_free(s);
    return 77;
  }
  test_loops(dev, dir);
  rx_rt_artifact *scan = load(dev, dir, "onnx/loops/scan_dirs.onnx");
  for (size_t i = 0; scan && i < RX_ARRAY_LEN(COUNTS); i++) check_scan(dev, scan, COUNTS[i]);
  rx_rt_artifact_release(scan);
  const char *last = NULL;
  size_t nmsg = rx_rt_device_validation_messages(dev, &last);
  if (nmsg) FAIL("%zu Vulkan validation messages; the last: %s", nmsg, last ? last : "");
  rx_rt_device_release(dev);
  printf("onnx_loops: %d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}

#else

int main(void) {
  printf("onnx_loops: ONNX support was not built: install protobuf-c-compiler libprotobuf-c-dev "
         "libonnx-dev\n");
  return 77;
}

#endif
