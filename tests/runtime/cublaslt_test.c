/* tests/runtime/cublaslt_test.c: the builtin rx_cublaslt_matmul (runtime/cuda/cublaslt.c) on the
 * fake CUDA driver (tests/runtime/fake_cuda.c: device memory is host memory) and the fake
 * cuBLASLt (tests/runtime/fake_cublaslt.c, which computes each matmul for real, column-major,
 * and refuses layouts that do not agree). Numbers are checked against a reference computed here
 * from the row-major meaning of the builtin, at rows 1, 7, 16, 17 (the default threshold's
 * boundary), 33, 100 and 1000, for f16, bf16 and f32, b plain and transposed, a of rank 3 with a
 * shared b and with a batch of b; the fake's trace is checked for the ops and leading
 * dimensions the layout derivation promises. Errors: operands that do not fit, a device that is
 * not CUDA, and (--missing) a library that cannot be opened.
 *
 *   cublaslt_test FAKE_LIBCUDA FAKE_LIBCUBLASLT | --missing */
#include <dlfcn.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "../unit/check.h"
#include "relaxc/runtime.h"
#include "runtime/vm.h"

static struct {
  size_t (*count)(void);
  const char *(*line)(size_t i);
  size_t (*errors)(void);
  size_t (*handles)(void);
} lt_fake;

static const vm_extern *builtin;

static uint16_t to_half(float f, rx_dtype t) {
  uint32_t u;
  memcpy(&u, &f, 4);
  if (t == RX_DTYPE_BF16) return (uint16_t)(u >> 16); /* the test's values are exact in bf16 */
  /* f16 of a value with few mantissa bits in the normal range: exact */
  uint32_t sign = (u >> 16) & 0x8000, e = (u >> 23) & 255, m = u & 0x7fffff;
  if (!e) return (uint16_t)sign;
  return (uint16_t)(sign | ((e - 127 + 15) << 10) | (m >> 13));
}

static double from_half(uint16_t h, rx_dtype t) {
  if (t == RX_DTYPE_BF16) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
  }
  int e = (h >> 10) & 31, m = h & 1023;
  double v = e == 0 ? m / 16777216.0 : ldexp(1024 + m, e - 25);
  return h >> 15 ? -v : v;
}

/* A device tensor of shape with values v(i) = ((i * 7 + seed) % 9 - 4) / 4 (exact in bf16). */
static rx_rt_value *tensor(rx_rt_device *d, rx_dtype t, int nd, const int64_t *shape, int seed,
                           double **out_host) {
  int64_t n = 1;
  for (int i = 0; i < nd; i++) n *= shape[i];
  double *h = calloc((size_t)n + 1, sizeof *h);
  void *raw = calloc((size_t)n + 1, 4);
  for (int64_t i = 0; i < n; i++) {
    h[i] = ((i * 7 + seed) % 9 - 4) / 4.0;
    if (t == RX_DTYPE_F32)
      ((float *)raw)[i] = (float)h[i];
    else
      ((uint16_t *)raw)[i] = to_half((float)h[i], t);
  }
  rx_rt_tensor *x = NULL;
  rx_rt_value *v = NULL;
  CHECK_OK(rx_rt_tensor_from_host(d, t, nd, shape, raw, &x));
  if (x) CHECK_OK(rx_rt_value_from_tensor(x, &v));
  rx_rt_tensor_release(x);
  free(raw);
  *out_host = h;
  return v;
}

static rx_status call(rx_rt_device *d, rx_rt_value *a, rx_rt_value *b, int trans,
                      rx_rt_value **out) {
  rx_rt_value *p = NULL;
  rx_status s = rx_rt_value_from_prim(RX_DTYPE_I64, trans, &p);
  rx_rt_value *args[3] = {a, b, p};
  vm_extern_call c = {NULL, d, "rx_cublaslt_matmul"};
  if (!s) s = builtin->fn(&c, args, 3, out);
  rx_rt_value_release(p);
  return s;
}

/* One case: a [batch..., m, k] @ b (2-D, or batched when bbatch) transposed or not. */
static void check_case(rx_rt_device *d, rx_dtype t, int64_t batch, int64_t m, int64_t k, int64_t n,
                       bool bbatch, int trans) {
  int64_t ash[3] = {batch, m, k}, bsh[3] = {batch, trans ? n : k, trans ? k : n};
  int and_ = batch > 1 ? 3 : 2, bnd = bbatch ? 3 : 2;
  double *ha = NULL, *hb = NULL;
  rx_rt_value *a = tensor(d, t, and_, batch > 1 ? ash : ash + 1, 1, &ha);
  rx_rt_value *b = tensor(d, t, bnd, bbatch ? bsh : bsh + 1, 5, &hb);
  rx_rt_value *out = NULL;
  size_t errors0 = lt_fake.errors();
  rx_status s = a && b ? call(d, a, b, trans, &out) : NULL;
  CHECK_MSG(!s && out, "%s [%lld, %lld, %lld] @ %s%s: %s", rx_rt_dtype_name(t), (long long)batch,
            (long long)m, (long long)k, bbatch ? "batched b" : "b", trans ? "^T" : "",
            rx_status_message(s));
  rx_status_free(s);
  CHECK_MSG(lt_fake.errors() == errors0, "the fake refused: %s",
            lt_fake.line(lt_fake.count() ? lt_fake.count() - 1 : 0));
  rx_rt_tensor *y = out ? rx_rt_value_tensor(out) : NULL;
  size_t es = rx_rt_dtype_size(t);
  void *got = calloc((size_t)(batch * m * n) + 1, es);
  if (y) CHECK_OK(rx_rt_tensor_read(y, got, (size_t)(batch * m * n) * es));
  double tol = t == RX_DTYPE_F32 ? 1e-5 : t == RX_DTYPE_F16 ? 1e-3 : 1e-2;
  int64_t bad = 0;
  for (int64_t q = 0; q < batch && y; q++)
    for (int64_t i = 0; i < m; i++)
      for (int64_t j = 0; j < n; j++) {
        double ref = 0;
        const double *bq = hb + (bbatch ? q * k * n : 0);
        for (int64_t r = 0; r < k; r++)
          ref += ha[(q * m + i) * k + r] * (trans ? bq[j * k + r] : bq[r * n + j]);
        int64_t o = (q * m + i) * n + j;
        double g = t == RX_DTYPE_F32 ? ((float *)got)[o] : from_half(((uint16_t *)got)[o], t);
        if (fabs(g - ref) > tol * (1 + fabs(ref)) && bad++ < 3)
          fprintf(stderr, "  [%lld, %lld, %lld]: got %g, expected %g\n", (long long)q, (long long)i,
                  (long long)j, g, ref);
      }
  CHECK_MSG(y && !bad, "%s m %lld trans %d: %lld values off", rx_rt_dtype_name(t), (long long)m,
            trans, (long long)bad);
  /* the layouts: the library's first operand is b, its second a (see cublaslt.c) */
  char want[256];
  int64_t rows = bbatch ? m : batch * m;
  snprintf(want, sizeof want, "op %cN m %lld n %lld k %lld lda %lld ldb %lld ldc %lld batch %lld",
           trans ? 'T' : 'N', (long long)n, (long long)rows, (long long)k,
           (long long)(trans ? k : n), (long long)k, (long long)n, (long long)(bbatch ? batch : 1));
  const char *line = lt_fake.count() ? lt_fake.line(lt_fake.count() - 1) : "";
  CHECK_MSG(y && strstr(line, want), "trace '%s' lacks '%s'", line, want);
  free(got);
  free(ha);
  free(hb);
  rx_rt_value_release(a);
  rx_rt_value_release(b);
  rx_rt_value_release(out);
}

static void test_errors(rx_rt_device *d) {
  double *h1 = NULL, *h2 = NULL;
  rx_rt_value *a = tensor(d, RX_DTYPE_F16, 2, (int64_t[]){7, 12}, 0, &h1);
  rx_rt_value *b = tensor(d, RX_DTYPE_F16, 2, (int64_t[]){13, 5}, 0, &h2);
  rx_rt_value *out = NULL;
  CHECK_ERR(call(d, a, b, 0, &out), RX_ERR_INVALID, "f16[7, 12] @ f16[13, 5]");
  CHECK_ERR(call(d, a, b, 2, &out), RX_ERR_INVALID, "trans_b 0 or 1");
  /* a device that is not CUDA, and no device */
  struct rx_rt_device other;
  memset(&other, 0, sizeof other);
  other.be = &rt_null_backend;
  other.info.backend = RX_RT_BACKEND_NULL;
  CHECK_ERR(call(&other, a, b, 0, &out), RX_ERR_UNSUPPORTED, "CUDA devices only");
  CHECK_ERR(call(NULL, a, b, 0, &out), RX_ERR_UNSUPPORTED, "compile without --dispatch");
  CHECK_MSG(!out, "no result after an error");
  rx_rt_value_release(a);
  rx_rt_value_release(b);
  free(h1);
  free(h2);
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: cublaslt_test FAKE_LIBCUDA FAKE_LIBCUBLASLT | --missing\n");
    return 2;
  }
  if (!dlopen(argv[1], RTLD_NOW | RTLD_GLOBAL)) {
    fprintf(stderr, "FAIL: cannot open the fake driver %s: %s\n", argv[1], dlerror());
    return 1;
  }
  bool missing = !strcmp(argv[2], "--missing");
  setenv("RX_CUBLASLT_LIBRARY", missing ? "/nonexistent/libcublasLt.so.13" : argv[2], 1);
  builtin = vm_extern_find("rx_cublaslt_matmul");
  CHECK_MSG(builtin && builtin->returning, "the builtin is in the table and returns its result");
  if (!builtin) return check_finish("runtime.cublaslt");
  rx_rt_device *d = NULL;
  CHECK_OK(rx_rt_device_open("cuda:0", NULL, &d));
  if (!d) return check_finish("runtime.cublaslt");
  if (missing) {
    double *h = NULL;
    rx_rt_value *a = tensor(d, RX_DTYPE_F16, 2, (int64_t[]){4, 4}, 0, &h);
    rx_rt_value *out = NULL;
    CHECK_ERR(call(d, a, a, 0, &out), RX_ERR_NOT_FOUND, "libcublasLt");
    CHECK_ERR(call(d, a, a, 0, &out), RX_ERR_NOT_FOUND, "compile without --dispatch");
    rx_rt_value_release(a);
    free(h);
    rx_rt_device_release(d);
    return check_finish("runtime.cublaslt_missing");
  }
  void *lib = dlopen(argv[2], RTLD_NOW | RTLD_LOCAL);
#define SYM(field, name)                                                                           \
  lt_fake.field = lib ? (__typeof__(lt_fake.field))(uintptr_t)dlsym(lib, name) : NULL;
  SYM(count, "fake_lt_trace_count")
  SYM(line, "fake_lt_trace_line")
  SYM(errors, "fake_lt_errors")
  SYM(handles, "fake_lt_handles")
#undef SYM
  CHECK_MSG(lt_fake.count && lt_fake.line && lt_fake.errors && lt_fake.handles, "%s is the fake",
            argv[2]);
  if (!lt_fake.handles) return check_finish("runtime.cublaslt");
  static const int64_t rows[] = {1, 7, 16, 17, 33, 100, 1000};
  static const rx_dtype types[] = {RX_DTYPE_F16, RX_DTYPE_BF16, RX_DTYPE_F32};
  for (size_t ti = 0; ti < 3; ti++)
    for (size_t ri = 0; ri < sizeof rows / sizeof rows[0]; ri++)
      for (int trans = 0; trans < 2; trans++)
        check_case(d, types[ti], 1, rows[ri], 67, 45, false, trans);
  for (int trans = 0; trans < 2; trans++) {
    check_case(d, RX_DTYPE_F16, 3, 11, 40, 24, false, trans); /* a [3, 11, k], one b */
    check_case(d, RX_DTYPE_BF16, 3, 11, 40, 24, true, trans); /* a strided batch of b */
  }
  CHECK_MSG(lt_fake.handles() == 1, "one handle per device, got %zu", lt_fake.handles());
  test_errors(d);
  rx_rt_device_release(d);
  CHECK_MSG(lt_fake.handles() == 0, "the handle goes with the device, %zu left", lt_fake.handles());
  return check_finish("runtime.cublaslt");
}
