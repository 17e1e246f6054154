/* Host memory used in place (rx_rt_buffer_import_host, rx_rt_tensor_import_host,
 * rx_rt_buffer_map, rx_rt_buffer_kept; include/relaxc/runtime.h): on Vulkan (lavapipe in CI,
 * which has VK_EXT_external_memory_host) a page-aligned array is imported and used in place,
 * which the test proves by changing the host memory after the import (the call sees the change)
 * and by device writes landing in the caller's memory; the results of a call on imported
 * arguments equal those of the copying path (rx_rt_tensor_from_host) bit for bit, and a float64
 * reference within 1e-5 (relative), at n = 1, 7, 33, 100, 1000, also 64 and 4032 bytes into a
 * page. A pointer 4 bytes into a page (unaligned for a storage buffer), a size that
 * is not a multiple of 4 bytes and a device without the extension (RX_VULKAN_NO_HOST_IMPORT=1) fall
 * back to a copy and say so; bad pointers and sizes are refused by name; a release waits for the
 * queued work on the memory; results are mapped without a copy, and rx_rt_buffer_kept says which
 * results the next call overwrites (runtime.vm checks a result in planned storage, test_weights
 * the weights).
 *
 * usage: test_host_import [TESTS_DIR]   (the directory is not used) */
/* test-needs: runtime */
#include "check.h"
#include "relaxc/compiler.h"
#include "relaxc/runtime.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* b = x * y + x; c = b + y: c is the result, b an intermediate */
static const char *const program = "graph_fn main(x: f32[n], y: f32[n]) -> f32[n]\n"
                                   "    where n <= 4096 {\n"
                                   "  a = multiply(x, y)\n"
                                   "  b = add(a, x)\n"
                                   "  c = exp(b)\n"
                                   "  d = add(c, y)\n"
                                   "  return d\n"
                                   "}\n";

static unsigned char *compile(size_t *out_len) {
  rx_module *m = rx_module_new();
  rx_diag *d = rx_diag_create();
  unsigned char *bytes = NULL;
  rx_status st = rx_module_parse(m, "import.rx", program, strlen(program), d);
  if (!st) {
    rx_compile_request req = {.targets = "vulkan"};
    st = rx_module_compile(m, &req, d, &bytes, out_len);
  }
  CHECK_MSG(!st, "compile: %s", rx_status_message(st));
  rx_status_free(st);
  rx_diag_destroy(d);
  rx_module_free(m);
  return bytes;
}

/* n floats in fresh page-aligned memory, shifted by skew bytes (0: aligned). */
static float *host_floats(int64_t n, size_t skew, void **out_base) {
  size_t bytes = ((size_t)n * sizeof(float) + skew + 8191) / 4096 * 4096;
  uint8_t *base = aligned_alloc(4096, bytes);
  memset(base, 0, bytes);
  *out_base = base;
  return (float *)(void *)(base + skew);
}

static void fill(float *x, float *y, int64_t n, int seed) {
  for (int64_t i = 0; i < n; i++) {
    x[i] = (float)((i * 37 + seed) % 23) / 11.0f - 1.0f;
    y[i] = (float)((i * 13 + 5 * seed) % 17) / 8.0f - 1.0f;
  }
}

/* main(x, y) with x and y given as tensors; the result's floats copied into out. */
static rx_status call(rx_rt_artifact *a, rx_rt_tensor *x, rx_rt_tensor *y, float *out, int64_t n) {
  rx_rt_tensor *in[2] = {x, y};
  rx_rt_value *v = NULL;
  rx_status st = rx_rt_vm_call(a, "main", in, 2, &v);
  if (!st) st = rx_rt_tensor_read(rx_rt_value_tensor(v), out, sizeof(float) * (size_t)n);
  rx_rt_value_release(v);
  return st;
}

/* Worst error of out against the float64 reference, relative to 1 + |reference| (GLSL's exp is
 * good to 3 + 2|x| ulp: lavapipe's measured 0.5e-5 here). */
static double worst_err(const float *x, const float *y, const float *out, int64_t n) {
  double worst = 0;
  for (int64_t i = 0; i < n; i++) {
    double b = (double)x[i] * y[i] + x[i], want = exp(b) + y[i];
    double e = fabs(out[i] - want) / (1 + fabs(want));
    if (e > worst) worst = e;
  }
  return worst;
}

/* At length n: imported arguments (skew 0: in place where the device imports) against the
 * copying path and the reference; then the host memory changed after the import. */
static void run_at(rx_rt_artifact *a, rx_rt_device *d, int64_t n, size_t skew, rx_rt_import want) {
  void *bx, *by;
  float *x = host_floats(n, skew, &bx), *y = host_floats(n, skew, &by);
  float *ref = malloc(sizeof(float) * (size_t)n), *got = malloc(sizeof(float) * (size_t)n);
  fill(x, y, n, 1);
  int64_t shape[1] = {n};
  rx_rt_tensor *cx = NULL, *cy = NULL, *ix = NULL, *iy = NULL;
  rx_rt_import kx = RX_RT_IMPORT_NONE, ky = RX_RT_IMPORT_NONE;
  CHECK_OK(rx_rt_tensor_from_host(d, RX_DTYPE_F32, 1, shape, x, &cx));
  CHECK_OK(rx_rt_tensor_from_host(d, RX_DTYPE_F32, 1, shape, y, &cy));
  CHECK_OK(rx_rt_tensor_import_host(d, RX_DTYPE_F32, 1, shape, x, &ix, &kx));
  CHECK_OK(rx_rt_tensor_import_host(d, RX_DTYPE_F32, 1, shape, y, &iy, &ky));
  CHECK_MSG(kx == want && ky == want, "n=%lld skew %zu: imported %s and %s, expected %s",
            (long long)n, skew, rx_rt_import_name(kx), rx_rt_import_name(ky),
            rx_rt_import_name(want));
  CHECK(rx_rt_buffer_import_kind(rx_rt_tensor_buffer(ix)) == kx);
  CHECK(rx_rt_buffer_import_kind(rx_rt_tensor_buffer(cx)) == RX_RT_IMPORT_NONE);
  if (cx && cy && ix && iy) {
    CHECK_OK(call(a, cx, cy, ref, n));
    CHECK_OK(call(a, ix, iy, got, n));
    CHECK_MSG(!memcmp(ref, got, sizeof(float) * (size_t)n),
              "n=%lld skew %zu: the imported call differs from the copying one", (long long)n,
              skew);
    double e = worst_err(x, y, got, n);
    CHECK_MSG(e <= 1e-5, "n=%lld: relative error %g from the float64 reference (tolerance 1e-5)",
              (long long)n, e);
    /* the host memory changes after the import: seen in place, not through a copy */
    float *x0 = malloc(sizeof(float) * (size_t)n), *y0 = malloc(sizeof(float) * (size_t)n);
    memcpy(x0, x, sizeof(float) * (size_t)n);
    memcpy(y0, y, sizeof(float) * (size_t)n);
    fill(x, y, n, 7);
    CHECK_OK(call(a, ix, iy, got, n));
    if (want == RX_RT_IMPORT_IN_PLACE) {
      e = worst_err(x, y, got, n);
      CHECK_MSG(e <= 1e-5,
                "n=%lld: after the host wrote the imported memory: relative error %g from the new "
                "inputs' reference (the call did not read the memory in place)",
                (long long)n, e);
    } else {
      CHECK_MSG(!memcmp(ref, got, sizeof(float) * (size_t)n),
                "n=%lld: a copied import changed with the host memory", (long long)n);
      e = worst_err(x0, y0, got, n);
      CHECK_MSG(e <= 1e-5, "n=%lld: a copy: relative error %g from the first inputs' reference",
                (long long)n, e);
    }
    free(x0);
    free(y0);
  }
  rx_rt_tensor_release(cx);
  rx_rt_tensor_release(cy);
  rx_rt_tensor_release(ix);
  rx_rt_tensor_release(iy);
  free(bx);
  free(by);
  free(ref);
  free(got);
}

/* Device writes (a fill and a copy, queued) land in the caller's memory; the release waits. */
static void test_device_writes(rx_rt_device *d) {
  void *base;
  float *x = host_floats(1000, 0, &base);
  rx_rt_buffer *b = NULL, *src = NULL;
  rx_rt_import k;
  CHECK_OK(rx_rt_buffer_import_host(d, x, 4000, &b, &k));
  CHECK_OK(rx_rt_buffer_alloc(d, 400, &src));
  if (b && src && k == RX_RT_IMPORT_IN_PLACE) {
    CHECK_OK(rx_rt_buffer_fill(src, 0, 400, 0x3f)); /* queued */
    CHECK_OK(rx_rt_buffer_copy(src, 0, b, 800, 400));
    CHECK_OK(rx_rt_buffer_fill(b, 0, 400, 0x40));
    void *p = NULL;
    CHECK_OK(rx_rt_buffer_map(b, &p)); /* synchronizes */
    CHECK_MSG(p == x, "the map of an imported buffer is the caller's memory");
    const uint8_t *u = (const uint8_t *)x;
    CHECK_MSG(u[0] == 0x40 && u[399] == 0x40 && u[400] == 0 && u[800] == 0x3f && u[1199] == 0x3f &&
                  u[1200] == 0,
              "device writes in place: %02x %02x %02x %02x %02x %02x", u[0], u[399], u[400], u[800],
              u[1199], u[1200]);
    /* queued, then released without a synchronization: the release waits for it */
    CHECK_OK(rx_rt_buffer_fill(b, 1600, 400, 0x41));
    rx_rt_buffer_release(b);
    b = NULL;
    CHECK_MSG(u[1600] == 0x41 && u[1999] == 0x41, "the release waited for the queued fill");
  }
  rx_rt_buffer_release(b);
  rx_rt_buffer_release(src);
  free(base);
}

static void test_bad_args(rx_rt_device *d) {
  void *base;
  float *x = host_floats(16, 0, &base);
  rx_rt_buffer *b = NULL;
  rx_rt_import k = RX_RT_IMPORT_IN_PLACE;
  CHECK_ERR(rx_rt_buffer_import_host(d, NULL, 64, &b, &k), RX_ERR_INVALID, "ptr is NULL");
  CHECK(!b && k == RX_RT_IMPORT_NONE);
  CHECK_ERR(rx_rt_buffer_import_host(d, x, 0, &b, &k), RX_ERR_INVALID, "bytes is 0");
  CHECK_ERR(rx_rt_buffer_import_host(d, (void *)(UINTPTR_MAX - 63), 128, &b, &k), RX_ERR_INVALID,
            "wraps around");
  CHECK_ERR(rx_rt_buffer_import_host(NULL, x, 64, &b, &k), RX_ERR_INVALID, "NULL device");
  CHECK_ERR(rx_rt_buffer_import_host(d, x, 64, NULL, &k), RX_ERR_INVALID, "NULL out_buffer");
  /* larger than a storage buffer may be (refused before the memory is touched) */
  rx_status st = rx_rt_buffer_import_host(d, x, (size_t)1 << 40, &b, &k);
  CHECK_MSG(st && !b &&
                (strstr(rx_status_message(st), "maxStorageBufferRange") ||
                 strstr(rx_status_message(st), "out of device memory")),
            "a size past the device's largest buffer: %s", rx_status_message(st));
  rx_status_free(st);
  int64_t shape[1] = {-1};
  rx_rt_tensor *t = NULL;
  CHECK_ERR(rx_rt_tensor_import_host(d, RX_DTYPE_F32, 1, shape, x, &t, &k), RX_ERR_INVALID,
            "negative");
  shape[0] = 16;
  CHECK_ERR(rx_rt_tensor_import_host(d, RX_DTYPE_F32, 1, shape, NULL, &t, &k), RX_ERR_INVALID,
            "ptr is NULL");
  CHECK(!t);
  CHECK_ERR(rx_rt_buffer_map(NULL, NULL), RX_ERR_INVALID, "NULL");
  free(base);
}

/* Results mapped without a copy; which of them the next call overwrites. */
static void test_results(rx_rt_artifact *a, rx_rt_device *d) {
  int64_t n = 33, shape[1] = {n};
  float x[33], y[33], want[33];
  fill(x, y, n, 3);
  rx_rt_tensor *tx = NULL, *ty = NULL;
  CHECK_OK(rx_rt_tensor_from_host(d, RX_DTYPE_F32, 1, shape, x, &tx));
  CHECK_OK(rx_rt_tensor_from_host(d, RX_DTYPE_F32, 1, shape, y, &ty));
  rx_rt_tensor *in[2] = {tx, ty};
  rx_rt_value *v1 = NULL, *v2 = NULL;
  CHECK_OK(rx_rt_vm_call(a, "main", in, 2, &v1));
  if (v1) {
    rx_rt_tensor *t = rx_rt_value_tensor(v1);
    CHECK_OK(rx_rt_tensor_read(t, want, sizeof want));
    void *p = NULL;
    CHECK_OK(rx_rt_buffer_map(rx_rt_tensor_buffer(t), &p));
    CHECK_MSG(p && !memcmp(p, want, sizeof want), "the mapped result equals the read one");
    bool planned = rx_rt_buffer_kept(rx_rt_tensor_buffer(t));
    printf("the result is %skept by the artifact\n", planned ? "" : "not ");
    /* a second call with other inputs: a result of its own stays, a planned one is overwritten */
    float x2[33], y2[33];
    fill(x2, y2, n, 9);
    CHECK_OK(rx_rt_buffer_write(rx_rt_tensor_buffer(tx), 0, x2, sizeof x2));
    CHECK_OK(rx_rt_buffer_write(rx_rt_tensor_buffer(ty), 0, y2, sizeof y2));
    CHECK_OK(rx_rt_vm_call(a, "main", in, 2, &v2));
    CHECK_OK(rx_rt_buffer_map(rx_rt_tensor_buffer(t), &p));
    bool same = p && !memcmp(p, want, sizeof want);
    CHECK_MSG(same == !planned, "planned %d, the first result after the second call %s", planned,
              same ? "unchanged" : "overwritten");
  }
  rx_rt_value_release(v1);
  rx_rt_value_release(v2);
  /* the flag is set on an artifact's buffers: a buffer of one's own is never kept */
  CHECK(!rx_rt_buffer_kept(rx_rt_tensor_buffer(tx)));
  rx_rt_tensor_release(tx);
  rx_rt_tensor_release(ty);
}

int main(void) {
  size_t len = 0;
  unsigned char *bytes = compile(&len);
  rx_rt_device *d = NULL;
  rx_status st = bytes ? rx_rt_device_open("vulkan", NULL, &d) : NULL;
  if (st) {
    CHECK_SKIP("no Vulkan device: %s", rx_status_message(st));
    rx_status_free(st);
    rx_free(bytes);
    return check_finish("test_host_import");
  }
  rx_rt_artifact *a = NULL;
  if (d) CHECK_OK(rx_rt_artifact_load_memory(d, bytes, len, "import.rxm", &a));
  uint64_t align = d ? rx_rt_device_get_info(d)->host_import_alignment : 0;
  printf("%s: host import alignment %llu\n", d ? rx_rt_device_get_info(d)->name : "-",
         (unsigned long long)align);
  /* lavapipe has VK_EXT_external_memory_host; the CI device is lavapipe */
  if (d && strstr(rx_rt_device_get_info(d)->name, "llvmpipe"))
    CHECK_MSG(align > 0, "lavapipe imports host memory (VK_EXT_external_memory_host)");
  rx_rt_import in_place = align ? RX_RT_IMPORT_IN_PLACE : RX_RT_IMPORT_COPY_UNSUPPORTED;
  const int64_t sizes[] = {1, 7, 33, 100, 1000};
  for (size_t i = 0; a && i < sizeof sizes / sizeof *sizes; i++)
    run_at(a, d, sizes[i], 0, in_place);
  /* 64 bytes into a page: the page imported, the buffer bound at offset 64 (lavapipe's
   * minStorageBufferOffsetAlignment is at most 64) */
  bool lvp = d && strstr(rx_rt_device_get_info(d)->name, "llvmpipe");
  if (a && lvp) run_at(a, d, 100, 64, in_place);
  if (a && lvp) run_at(a, d, 1000, 4032, in_place); /* across a page boundary */
  /* 4 bytes into a page: a float's alignment, not a storage buffer's (lavapipe binds at 64) */
  if (a && lvp) run_at(a, d, 100, 4, RX_RT_IMPORT_COPY_UNALIGNED);
  if (a && !align) run_at(a, d, 100, 4, in_place);
  if (d && align) {
    /* a size that is not whole 4-byte words: copied (kernels may write whole words) */
    void *base;
    float *x = host_floats(4, 0, &base);
    rx_rt_buffer *b = NULL;
    rx_rt_import k;
    CHECK_OK(rx_rt_buffer_import_host(d, x, 6, &b, &k));
    CHECK_MSG(k == RX_RT_IMPORT_COPY_UNALIGNED, "6 bytes: %s", rx_rt_import_name(k));
    rx_rt_buffer_release(b);
    free(base);
    test_device_writes(d);
  }
  if (d) test_bad_args(d);
  if (a) test_results(a, d);
  rx_rt_artifact_release(a);
  if (d) { /* under the validation layer (RX_VULKAN_VALIDATION=1 in ctest): imports are valid use */
    const char *last = NULL;
    size_t nval = rx_rt_device_validation_messages(d, &last);
    CHECK_MSG(nval == 0, "%zu validation messages, the last: %s", nval, last);
  }
  rx_rt_device_release(d);

  /* a device without the extension: every import a copy, the same results */
  setenv("RX_VULKAN_NO_HOST_IMPORT", "1", 1);
  d = NULL;
  a = NULL;
  CHECK_OK(rx_rt_device_open("vulkan", NULL, &d));
  if (d) {
    CHECK(rx_rt_device_get_info(d)->host_import_alignment == 0);
    CHECK_OK(rx_rt_artifact_load_memory(d, bytes, len, "import.rxm", &a));
    for (size_t i = 0; a && i < 2; i++)
      run_at(a, d, sizes[i * 4], 0, RX_RT_IMPORT_COPY_UNSUPPORTED);
  }
  rx_rt_artifact_release(a);
  rx_rt_device_release(d);
  unsetenv("RX_VULKAN_NO_HOST_IMPORT");

  /* staging (a discrete GPU's layout): device buffers cannot be mapped */
  rx_rt_device_options o = {NULL, -1, true};
  d = NULL;
  CHECK_OK(rx_rt_device_open("vulkan", &o, &d));
  if (d) {
    rx_rt_buffer *b = NULL;
    CHECK_OK(rx_rt_buffer_alloc(d, 64, &b));
    void *p = (void *)1;
    if (b) CHECK_ERR(rx_rt_buffer_map(b, &p), RX_ERR_UNSUPPORTED, "rx_rt_buffer_read");
    CHECK(p == NULL);
    rx_rt_buffer_release(b);
  }
  rx_rt_device_release(d);
  rx_free(bytes);
  return check_finish("test_host_import");
}
