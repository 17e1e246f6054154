/* test_simt: self-tests of the SIMT emulator (tests/simt). Each test compiles a kernel from
 * tests/simt/kernels (or an inline source), runs it and checks the result against a CPU
 * computation, or checks that misuse is reported. Usage: test_simt [SIMT_DIR].
 * Exits 0 when all ran and passed, 1 on a failure, 77 when clang is missing (all skipped). */
#define _GNU_SOURCE
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "simt_harness.h"

static int passed, failed, skipped;
static simt_options opts;
static char kdir[4096];
static int no_clang; /* set when clang cannot run: every compile-needing test is a skip */

#define CHECK(cond, ...)                                                                           \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      printf("  FAIL %s:%d: ", __FILE__, __LINE__);                                                \
      printf(__VA_ARGS__);                                                                         \
      printf("\n");                                                                                \
      return 1;                                                                                    \
    }                                                                                              \
  } while (0)

/* Compiles kernels/<file>; on a missing clang marks the run as skipped (returns NULL, *skip=1). */
static simt_module *load(const char *file, int *skip) {
  char path[4200];
  snprintf(path, sizeof path, "%s/%s", kdir, file);
  simt_lang lang = strstr(file, ".metal") ? SIMT_METAL : SIMT_CUDA;
  simt_module *m = NULL;
  char *err = NULL;
  *skip = 0;
  if (simt_module_compile_file(&opts, lang, path, &m, &err) < 0) {
    if (strstr(err, "cannot run")) {
      no_clang = 1;
      *skip = 1;
    }
    printf("  %s: %s\n", file, err);
    free(err);
    return NULL;
  }
  return m;
}

#define LOAD(m, file)                                                                              \
  int skip_;                                                                                       \
  simt_module *m = load(file, &skip_);                                                             \
  if (!m) return skip_ ? 2 : 1

static int launch(simt_module *m, const char *name, unsigned gx, unsigned gy, unsigned bx,
                  size_t smem, void **args, int nargs) {
  simt_kernel *k = simt_module_kernel(m, name);
  if (!k) {
    printf("  no kernel %s\n", name);
    return -1;
  }
  unsigned grid[3] = {gx, gy, 1}, block[3] = {bx, 1, 1};
  char *err = NULL;
  int rc = simt_launch(k, grid, block, smem, args, nargs, &err);
  if (rc) printf("  launch %s: %s\n", name, err);
  free(err);
  return rc;
}

/* A launch that must fail with a message containing `want`. */
static int launch_fails(simt_module *m, const char *name, unsigned bx, void **args, int nargs,
                        const char *want) {
  simt_kernel *k = simt_module_kernel(m, name);
  if (!k) {
    printf("  no kernel %s\n", name);
    return 1;
  }
  unsigned grid[3] = {1, 1, 1}, block[3] = {bx, 1, 1};
  char *err = NULL;
  int rc = simt_launch(k, grid, block, 0, args, nargs, &err);
  int ok = rc != 0 && err && strstr(err, want);
  if (!ok)
    printf("  %s: expected an error containing \"%s\", got rc=%d: %s\n", name, want, rc,
           err ? err : "(none)");
  else
    printf("  %s: reported: %s\n", name, err);
  free(err);
  return ok ? 0 : 1;
}

static float frand(unsigned *s) {
  *s = *s * 1664525u + 1013904223u;
  return (float)((*s >> 8) & 0xffff) / 32768.0f - 1.0f;
}

static float half_round(float f) { return (float)(_Float16)f; }

static float bf16_ref(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  u += 0x7fffu + ((u >> 16) & 1u);
  u &= 0xffff0000u;
  memcpy(&f, &u, 4);
  return f;
}

/* ---------------------------------------------------------------- CUDA */

static int t_cuda_elementwise(void) {
  LOAD(m, "elementwise.cu");
  static const int sizes[] = {1, 7, 33, 1000, 5000};
  for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
    int n = sizes[si], pad = 300; /* c has room past n: the guard must leave it alone */
    float *a = malloc(sizeof(float) * n), *b = malloc(sizeof(float) * n),
          *c = malloc(sizeof(float) * (n + pad));
    unsigned s = 7u + (unsigned)n;
    for (int i = 0; i < n; i++) a[i] = frand(&s), b[i] = frand(&s);
    for (int i = 0; i < n + pad; i++) c[i] = -123.0f;
    float sc = 1.5f;
    void *args[] = {&a, &b, &c, &n, &sc};
    int rc = launch(m, "scale_add", (unsigned)(n + 255) / 256, 1, 256, 0, args, 5);
    int bad = -1;
    for (int i = 0; i < n + pad && !rc && bad < 0; i++) {
      float want = i < n ? fmaf(a[i], sc, expf(b[i])) : -123.0f;
      if (fabsf(c[i] - want) > 1e-6f * fmaxf(1.0f, fabsf(want))) bad = i;
    }
    free(a), free(b), free(c);
    simt_module *mm = m;
    if (rc || bad >= 0) simt_module_free(mm);
    CHECK(!rc, "scale_add n=%d launch failed", n);
    CHECK(bad < 0, "scale_add n=%d: wrong value at %d", n, bad);
  }
  /* 2-D grid */
  int rows = 5, cols = 40;
  float x[200], y[200];
  for (int i = 0; i < 200; i++) x[i] = (float)i, y[i] = 0;
  float *px = x, *py = y;
  void *args[] = {&px, &py, &rows, &cols};
  int rc = launch(m, "add_rows", 2, 2, 32, 0, args, 4);
  simt_module_free(m);
  CHECK(!rc, "add_rows launch failed");
  for (int r = 0; r < rows; r++)
    for (int c = 0; c < cols; c++)
      CHECK(y[r * cols + c] == x[r * cols + c] + r, "add_rows wrong at %d,%d", r, c);
  return 0;
}

static int t_cuda_reduce(void) {
  LOAD(m, "reduce.cu");
  static const int sizes[] = {1, 7, 33, 1000, 5000};
  static const unsigned blocks[] = {32, 96, 256, 256, 1024};
  for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
    int n = sizes[si], rows = 3;
    float *x = malloc(sizeof(float) * n * rows), out[3] = {0}, total = 0.0f;
    unsigned s = 99u;
    for (int i = 0; i < n * rows; i++) x[i] = frand(&s);
    float *pout = out, *ptot = &total;
    void *args[] = {&x, &pout, &ptot, &n};
    int rc = launch(m, "row_sum", (unsigned)rows, 1, blocks[si], 0, args, 4);
    double all = 0;
    int bad = -1;
    for (int r = 0; r < rows && !rc; r++) {
      double want = 0;
      for (int j = 0; j < n; j++) want += x[r * n + j];
      all += want;
      if (fabs(out[r] - want) > 1e-4 * (1.0 + fabs(want))) bad = r;
    }
    free(x);
    if (rc || bad >= 0 || fabs(total - all) > 1e-3 * (1 + fabs(all))) simt_module_free(m);
    CHECK(!rc, "row_sum n=%d launch failed", n);
    CHECK(bad < 0, "row_sum n=%d block=%u: row %d wrong (%g)", n, blocks[si], bad,
          out[bad < 0 ? 0 : bad]);
    CHECK(fabs(total - all) <= 1e-3 * (1 + fabs(all)), "row_sum n=%d: atomicAdd total %g, want %g",
          n, total, all);
  }
  int out[32 * 5];
  int *po = out;
  void *args[] = {&po};
  int rc = launch(m, "shuffles", 1, 1, 32, 0, args, 1);
  simt_module_free(m);
  CHECK(!rc, "shuffles launch failed");
  unsigned ballot = 0;
  for (int l = 0; l < 32; l += 3) ballot |= 1u << l;
  for (int l = 0; l < 32; l++) {
    CHECK(out[l * 5 + 0] == 30, "__shfl_sync lane %d: %d", l, out[l * 5]);
    CHECK(out[l * 5 + 1] == (l >= 1 ? (l - 1) * 10 : 0), "__shfl_up_sync lane %d: %d", l,
          out[l * 5 + 1]);
    int dn = (l % 8) + 2 < 8 ? (l + 2) * 10 : l * 10;
    CHECK(out[l * 5 + 2] == dn, "__shfl_down_sync width 8 lane %d: %d, want %d", l, out[l * 5 + 2],
          dn);
    CHECK((unsigned)out[l * 5 + 3] == ballot, "__ballot_sync lane %d: %x", l,
          (unsigned)out[l * 5 + 3]);
    CHECK(out[l * 5 + 4] == 496, "__reduce_add_sync lane %d: %d", l, out[l * 5 + 4]);
  }
  return 0;
}

static int t_cuda_half(void) {
  LOAD(m, "half.cu");
  int n = 1000;
  _Float16 x[1000], w[1000], y[1000], y2[1000];
  unsigned s = 5u;
  for (int i = 0; i < n; i++) x[i] = (_Float16)(3.0f * frand(&s)), w[i] = (_Float16)frand(&s);
  _Float16 *px = x, *pw = w, *py = y, *py2 = y2;
  void *args[] = {&px, &pw, &py, &n};
  int rc = launch(m, "gelu_mul", 4, 1, 256, 0, args, 4);
  void *args2[] = {&px, &py2, &n};
  int rc2 = rc ? rc : launch(m, "half_ops", 8, 1, 128, 0, args2, 3);
  simt_module_free(m);
  CHECK(!rc && !rc2, "half launches failed");
  for (int i = 0; i < n; i++) {
    float v = (float)x[i];
    float g = 0.5f * v * (1.0f + tanhf(0.7978845608f * (v + 0.044715f * v * v * v))) * (float)w[i];
    CHECK(fabsf((float)y[i] - g) <= 1e-3f + 1e-3f * fabsf(g), "gelu_mul %d: %g, want %g", i,
          (float)y[i], g);
    /* one rounding per half operation, like the kernel */
    float e = half_round(expf(v)), p = half_round(half_round(e * v) + 1.0f), want = fmaxf(p, -v);
    CHECK((float)y2[i] == want, "half_ops %d: %g, want %g", i, (float)y2[i], want);
  }
  return 0;
}

static int t_cuda_bf16(void) {
  LOAD(m, "half.cu");
  enum { N = 9 };
  float x[N] = {1.0f,     1.00390625f, 1.01171875f, 3.14159265f, -2.5e-3f,
                65504.0f, 1e30f,       0.0f,        -7.0f};
  x[1] = 1.0f + 1.0f / 256.0f; /* halfway between two bf16 values: rounds to even (1.0) */
  x[2] = 1.0f + 3.0f / 256.0f; /* halfway: rounds to even (1 + 4/256) */
  uint16_t b[N];
  float y[N];
  int n = N;
  float *px = x, *py = y;
  uint16_t *pb = b;
  void *args[] = {&px, &pb, &py, &n};
  int rc = launch(m, "bf16_roundtrip", 1, 1, 32, 0, args, 4);
  simt_module_free(m);
  CHECK(!rc, "bf16_roundtrip launch failed");
  CHECK(y[1] == 1.0f, "bf16 tie 1+1/256 rounds to %g, want 1", y[1]);
  CHECK(y[2] == 1.0f + 4.0f / 256.0f, "bf16 tie 1+3/256 rounds to %.9g", y[2]);
  for (int i = 0; i < N; i++) {
    float want = bf16_ref(x[i]);
    uint32_t u;
    memcpy(&u, &want, 4);
    CHECK(y[i] == want, "bf16 %d: %.9g -> %.9g, want %.9g", i, x[i], y[i], want);
    CHECK(b[i] == (uint16_t)(u >> 16), "bf16 bits %d: %04x, want %04x", i, b[i],
          (unsigned)(u >> 16));
  }
  return 0;
}

static int t_cuda_vector(void) {
  LOAD(m, "vector.cu");
  static const int sizes[] = {1, 7, 33, 1000};
  for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
    int n = sizes[si];
    float *a = aligned_alloc(16, 4096 * 4), *b = aligned_alloc(16, 4096 * 4);
    for (int i = 0; i < 4096; i++) a[i] = (float)i, b[i] = -1.0f;
    void *args[] = {&a, &b, &n};
    unsigned threads = (unsigned)(n + 3) / 4;
    int rc = launch(m, "copy4", (threads + 63) / 64, 1, 64, 0, args, 3);
    int bad = -1;
    for (int i = 0; i < 4096 && !rc && bad < 0; i++)
      if (b[i] != (i < n ? 2.0f * i : -1.0f)) bad = i;
    free(a), free(b);
    if (rc || bad >= 0) simt_module_free(m);
    CHECK(!rc, "copy4 n=%d launch failed", n);
    CHECK(bad < 0, "copy4 n=%d wrong at %d", n, bad);
  }
  float a[256], b[256];
  for (int i = 0; i < 256; i++) a[i] = (float)i;
  float *pa = a, *pb = b;
  void *args[] = {&pa, &pb};
  int rc = launch(m, "reverse_block", 4, 1, 64, 64 * sizeof(float), args, 2);
  simt_module_free(m);
  CHECK(!rc, "reverse_block launch failed");
  for (int i = 0; i < 256; i++)
    CHECK(b[i] == a[(i / 64) * 64 + 63 - i % 64], "reverse_block wrong at %d", i);
  return 0;
}

static int t_cuda_misuse(void) {
  LOAD(m, "divergence.cu");
  float x[256];
  for (int i = 0; i < 256; i++) x[i] = (float)i;
  float *px = x;
  int n = 100;
  void *args[] = {&px, &n};
  int bad = 0;
  bad |= launch_fails(m, "early_exit", 128, args, 2, "barrier divergence");
  bad |= launch_fails(m, "shuffle_after_exit", 32, args, 1, "has exited");
  bad |= launch_fails(m, "shuffle_missing_lane", 16, args, 1, "does not take part");
  /* the same kernel used correctly runs */
  n = 128;
  int rc = launch(m, "early_exit", 1, 1, 128, 0, args, 2);
  /* argument count and launch shape errors */
  simt_kernel *k = simt_module_kernel(m, "early_exit");
  char *err = NULL;
  unsigned g[3] = {1, 1, 1}, blk[3] = {2048, 1, 1};
  int rc_args = simt_launch(k, g, g, 0, args, 1, &err);
  int args_msg = err && strstr(err, "takes 2 argument");
  free(err);
  int rc_blk = simt_launch(k, g, blk, 0, args, 2, &err);
  int blk_msg = err && strstr(err, "threads per block");
  free(err);
  simt_module_free(m);
  CHECK(!bad, "misuse not reported");
  CHECK(!rc, "early_exit with n == block size failed");
  for (int i = 0; i < 128; i++) CHECK(x[i] == (float)(127 - i), "early_exit wrong at %d", i);
  CHECK(rc_args && args_msg, "wrong argument count not reported");
  CHECK(rc_blk && blk_msg, "oversized block not reported");
  return 0;
}

static int t_compile_error(void) {
  if (no_clang) return 2;
  const char *src = "extern \"C\" __global__ void broken(float *x) {\n"
                    "  x[threadIdx.x] = undeclared_thing;\n"
                    "}\n";
  simt_module *m = NULL;
  char *err = NULL;
  int rc = simt_module_compile(&opts, SIMT_CUDA, src, "broken.cu", &m, &err);
  int ok = rc != 0 && !m && err && strstr(err, "broken.cu:2") && strstr(err, "undeclared_thing");
  if (!ok)
    printf("  got rc=%d: %s\n", rc, err ? err : "(none)");
  else
    printf("  reported: %.120s...\n", err);
  free(err);
  CHECK(ok, "compile error not reported with clang's message");
  /* MSL has no erf: a kernel calling it must not compile */
  const char *msl =
      "#include <metal_stdlib>\nusing namespace metal;\n"
      "kernel void k(device float* x [[buffer(0)]], uint i [[thread_position_in_grid]]) {\n"
      "  x[i] = erf(x[i]);\n}\n";
  rc = simt_module_compile(&opts, SIMT_METAL, msl, "erf.metal", &m, &err);
  ok = rc != 0 && err && strstr(err, "erf.metal:4");
  if (!ok) printf("  erf: got rc=%d: %s\n", rc, err ? err : "(none)");
  free(err);
  simt_module_free(m);
  CHECK(ok, "erf in MSL accepted");
  /* source errors found before clang runs */
  rc = simt_module_compile(&opts, SIMT_METAL, "kernel void k(device float* x) {}", "noattr.metal",
                           &m, &err);
  ok = rc != 0 && err && strstr(err, "no [[...]] attribute");
  free(err);
  CHECK(ok, "Metal parameter without attribute accepted");
  rc = simt_module_compile(&opts, SIMT_CUDA, "int f(void) { return 1; }", "none.cu", &m, &err);
  ok = rc != 0 && err && strstr(err, "no kernel found");
  free(err);
  CHECK(ok, "source without kernel accepted");
  return 0;
}

/* ---------------------------------------------------------------- Metal */

static int t_metal_elementwise(void) {
  LOAD(m, "elementwise.metal");
  struct {
    int n;
    float s;
  } p;
  static const int sizes[] = {1, 7, 33, 1000, 5000};
  for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
    int n = sizes[si], pad = 200;
    float *a = malloc(sizeof(float) * n), *b = malloc(sizeof(float) * n),
          *c = malloc(sizeof(float) * (n + pad));
    unsigned s = 3u + (unsigned)n;
    for (int i = 0; i < n; i++) a[i] = frand(&s), b[i] = frand(&s);
    for (int i = 0; i < n + pad; i++) c[i] = 7.0f;
    p.n = n;
    p.s = -0.5f;
    void *args[] = {a, b, c, &p};
    int rc = launch(m, "scale_add", (unsigned)(n + 127) / 128, 1, 128, 0, args, 4);
    int bad = -1;
    for (int i = 0; i < n + pad && !rc && bad < 0; i++) {
      float want = i < n ? fmaf(a[i], p.s, expf(b[i])) : 7.0f;
      if (fabsf(c[i] - want) > 1e-6f * fmaxf(1.0f, fabsf(want))) bad = i;
    }
    free(a), free(b), free(c);
    if (rc || bad >= 0) simt_module_free(m);
    CHECK(!rc, "metal scale_add n=%d launch failed", n);
    CHECK(bad < 0, "metal scale_add n=%d wrong at %d", n, bad);
  }
  float *a = aligned_alloc(16, 400 * 4), *b = aligned_alloc(16, 400 * 4);
  for (int i = 0; i < 400; i++) a[i] = (float)i, b[i] = 0;
  unsigned n4 = 99; /* 396 floats */
  void *args[] = {a, b, &n4};
  int rc = launch(m, "copy4", 4, 1, 32, 0, args, 3);
  simt_module_free(m);
  int bad = -1;
  for (int i = 0; i < 400 && bad < 0; i++)
    if (b[i] != (i < 396 ? 2.0f * i + (float)(i % 4) : 0.0f)) bad = i;
  free(a), free(b);
  CHECK(!rc, "metal copy4 launch failed");
  CHECK(bad < 0, "metal copy4 wrong at %d", bad);
  return 0;
}

static int t_metal_reduce(void) {
  LOAD(m, "reduce.metal");
  static const int sizes[] = {1, 7, 33, 1000, 5000};
  static const unsigned blocks[] = {32, 64, 96, 256, 1024};
  for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
    int n = sizes[si], rows = 3;
    float *x = malloc(sizeof(float) * n * rows), out[3] = {0}, mx[3] = {0};
    unsigned s = 11u;
    for (int i = 0; i < n * rows; i++) x[i] = frand(&s);
    void *args[] = {x, out, &n};
    void *args2[] = {x, mx, &n};
    int rc = launch(m, "row_sum", (unsigned)rows, 1, blocks[si], 0, args, 3);
    if (!rc) rc = launch(m, "row_max", (unsigned)rows, 1, blocks[si], 0, args2, 3);
    int bad = -1;
    for (int r = 0; r < rows && !rc; r++) {
      double want = 0;
      float wmax = -INFINITY;
      for (int j = 0; j < n; j++) want += x[r * n + j], wmax = fmaxf(wmax, x[r * n + j]);
      if (fabs(out[r] - want) > 1e-4 * (1.0 + fabs(want)) || mx[r] != wmax) bad = r;
    }
    free(x);
    if (rc || bad >= 0) simt_module_free(m);
    CHECK(!rc, "metal reductions n=%d launch failed", n);
    CHECK(bad < 0, "metal reductions n=%d block=%u: row %d wrong", n, blocks[si], bad);
  }
  simt_module_free(m);
  return 0;
}

static int t_metal_half(void) {
  LOAD(m, "half.metal");
  int n = 1000;
  _Float16 x[1000], y[1000];
  uint16_t yb[1000];
  unsigned s = 17u;
  for (int i = 0; i < n; i++) x[i] = (_Float16)(4.0f * frand(&s));
  void *args[] = {x, y, yb, &n};
  int rc = launch(m, "silu", 8, 1, 128, 0, args, 4);
  simt_module_free(m);
  CHECK(!rc, "metal silu launch failed");
  for (int i = 0; i < n; i++) {
    float v = (float)x[i], want = v / (1.0f + expf(-v));
    CHECK(fabsf((float)y[i] - want) <= 2e-3f * (1.0f + fabsf(want)), "silu %d: %g want %g", i,
          (float)y[i], want);
    float wb = bf16_ref(want);
    uint32_t u;
    memcpy(&u, &wb, 4);
    CHECK(yb[i] == (uint16_t)(u >> 16), "silu bfloat %d: %04x want %04x", i, yb[i],
          (unsigned)(u >> 16));
  }
  return 0;
}

static int t_metal_misuse(void) {
  LOAD(m, "divergence.metal");
  float x[64];
  for (int i = 0; i < 64; i++) x[i] = 1.0f;
  unsigned n = 40;
  void *args[] = {x, &n};
  int bad = launch_fails(m, "early_exit", 64, args, 2, "barrier divergence");
  int rc = launch(m, "sum_after_exit", 1, 1, 64, 0, args, 2);
  simt_module_free(m);
  CHECK(!bad, "Metal barrier divergence not reported");
  CHECK(!rc, "sum_after_exit failed");
  for (int i = 0; i < 64; i++) {
    float want = i < 32 ? 32.0f : i < 40 ? 8.0f : 1.0f;
    CHECK(x[i] == want, "sum_after_exit %d: %g want %g", i, x[i], want);
  }
  return 0;
}

/* The coalescing report on access patterns with known answers (kernels/coalescing.*): each case
 * is one traced launch over 2 blocks of 64 threads, with its buffers as the global ranges. */
static float cf_a[128 * 32], cf_b[128], cf_f4[128 * 4 * 4], cf_g4[128 * 4];
static uint16_t cf_h[128 * 2 * 8], cf_hb[128 * 8];
static const struct coalescing_case {
  int metal;
  const char *kernel;
  void *x, *y; /* the two buffers */
  size_t xb, yb;
  int stride, nargs; /* nargs 3: the stride is the third argument */
  double load_pct, store_pct;
  unsigned long long load_requests; /* 0: not checked */
} coalescing_cases[] = {
    {0, "f32_strided", cf_a, cf_b, sizeof cf_a, sizeof cf_b, 1, 3, 100.0, 100.0, 4},
    {0, "f32_strided", cf_a, cf_b, sizeof cf_a, sizeof cf_b, 32, 3, 12.5, 100.0, 4},
    {0, "half_strided", cf_h, cf_hb, sizeof cf_h, sizeof cf_hb, 1, 3, 100.0, 100.0, 4},
    {0, "half_strided", cf_h, cf_hb, sizeof cf_h, sizeof cf_hb, 2, 3, 50.0, 100.0, 4},
    {0, "vec16", cf_h, cf_hb, sizeof cf_h, sizeof cf_hb, 0, 2, 100.0, 100.0, 4},
    {0, "broadcast", cf_a, cf_b, sizeof cf_a, sizeof cf_b, 0, 2, 100.0, 100.0, 4},
    {1, "f4_strided", cf_f4, cf_g4, sizeof cf_f4, sizeof cf_g4, 1, 3, 100.0, 100.0, 4},
    {1, "f4_strided", cf_f4, cf_g4, sizeof cf_f4, sizeof cf_g4, 4, 3, 50.0, 100.0, 4},
};

static int coalescing_case(simt_module *m, const struct coalescing_case *c) {
  simt_kernel *k = simt_module_kernel(m, c->kernel);
  CHECK(k, "no kernel %s", c->kernel);
  void *x = c->x, *y = c->y;
  int stride = c->stride;
  void *args[3] = {&x, &y, &stride};
  if (c->metal) args[0] = x, args[1] = y;
  unsigned grid[3] = {2, 1, 1}, block[3] = {64, 1, 1};
  simt_range ranges[2] = {{x, c->xb}, {y, c->yb}};
  simt_coalescing r = {0};
  char *err = NULL, where[256] = "";
  int rc = simt_launch_traced(k, grid, block, 0, args, c->nargs, ranges, 2, 0, &r, &err);
  double l = 100.0 * (double)r.loads.used / (double)(r.loads.moved ? r.loads.moved : 1);
  double s = 100.0 * (double)r.stores.used / (double)(r.stores.moved ? r.stores.moved : 1);
  if (!rc && r.nsites > 0 && simt_site_where(k, r.sites[0].site, where, sizeof where) != 0)
    snprintf(where, sizeof where, "(not found)");
  unsigned long long req = r.loads.requests;
  simt_coalescing_free(&r);
  CHECK(!rc, "traced launch of %s: %s", c->kernel, err ? err : "");
  free(err);
  CHECK(l == c->load_pct && s == c->store_pct && (!c->load_requests || req == c->load_requests),
        "%s, stride %d: loads %g%% stores %g%% in %llu load requests (want %g%%, %g%%, %llu)",
        c->kernel, c->stride, l, s, req, c->load_pct, c->store_pct, c->load_requests);
  CHECK(strstr(where, c->metal ? "coalescing.metal:" : "coalescing.cu:"),
        "%s: its first access site is at '%s', not in the kernel's source", c->kernel, where);
  return 0;
}

static int t_coalescing(void) {
  simt_options o = opts;
  o.trace = 1;
  for (int metal = 0; metal < 2; metal++) {
    char path[4200];
    snprintf(path, sizeof path, "%s/coalescing.%s", kdir, metal ? "metal" : "cu");
    simt_module *m = NULL;
    char *err = NULL;
    if (simt_module_compile_file(&o, metal ? SIMT_METAL : SIMT_CUDA, path, &m, &err) < 0) {
      int skip = err && strstr(err, "sanitizer");
      printf("  %s: %s\n", path, err ? err : "(no message)");
      free(err);
      return skip ? 2 : 1;
    }
    int bad = 0;
    for (size_t i = 0; i < sizeof coalescing_cases / sizeof coalescing_cases[0] && !bad; i++)
      if (coalescing_cases[i].metal == metal) bad = coalescing_case(m, &coalescing_cases[i]);
    simt_module_free(m);
    if (bad) return 1;
  }
  return 0;
}

/* Bank conflicts of shared-memory patterns with known answers (kernels/banks.cu): each case is
 * one traced launch of one warp; per direction its (requests, phases, conflicts, max degree). */
static const struct bank_case {
  const char *kernel;
  int arg;        /* the stride, or the swizzle of rows16 */
  unsigned ld[4]; /* shared loads: requests, phases, conflicts, max degree */
  unsigned st[4]; /* shared stores (cp.async's destinations too) */
} bank_cases[] = {
    {"word_stride", 1, {1, 1, 0, 1}, {1, 1, 0, 1}},
    {"word_stride", 33, {1, 1, 0, 1}, {1, 1, 0, 1}},
    {"word_stride", 2, {1, 1, 1, 2}, {1, 1, 1, 2}},
    {"word_stride", 32, {1, 1, 31, 32}, {1, 1, 31, 32}},
    {"same_word", 0, {1, 1, 0, 1}, {1, 1, 0, 1}},
    {"pair_stride", 1, {1, 2, 0, 1}, {1, 2, 0, 1}},
    {"pair_stride", 2, {1, 2, 2, 2}, {1, 2, 2, 2}},
    {"rows16", 0, {1, 4, 28, 8}, {1, 4, 28, 8}},
    {"rows16", 1, {1, 4, 0, 1}, {1, 4, 0, 1}},
};

static int bank_case(simt_module *m, const struct bank_case *c) {
  simt_kernel *k = simt_module_kernel(m, c->kernel);
  CHECK(k, "no kernel %s", c->kernel);
  static float out[32];
  static _Alignas(16) uint16_t g[32 * 8];
  float *o = out;
  uint16_t *gp = g;
  int arg = c->arg, rows = !strcmp(c->kernel, "rows16");
  void *args[3] = {&o, &arg, NULL};
  if (rows) args[0] = &gp, args[1] = &o, args[2] = &arg;
  unsigned grid[3] = {1, 1, 1}, block[3] = {32, 1, 1};
  simt_range ranges[2] = {{out, sizeof out}, {g, sizeof g}};
  simt_coalescing r = {0};
  char *err = NULL;
  int rc = simt_launch_traced(k, grid, block, 0, args, rows ? 3 : 2, ranges, 2, 0, &r, &err);
  const simt_bank_stats *b[2] = {&r.shared_loads, &r.shared_stores};
  unsigned got[2][4];
  for (int d = 0; d < 2; d++) {
    got[d][0] = (unsigned)b[d]->requests, got[d][1] = (unsigned)b[d]->phases;
    got[d][2] = (unsigned)b[d]->conflicts, got[d][3] = b[d]->max_degree;
  }
  int shared_sites = 0, matrix_sites = 0;
  for (int i = 0; i < r.nsites; i++)
    shared_sites += r.sites[i].shared, matrix_sites += r.sites[i].matrix;
  simt_coalescing_free(&r);
  CHECK(!rc, "traced launch of %s: %s", c->kernel, err ? err : "");
  free(err);
  CHECK(!memcmp(got[0], c->ld, sizeof got[0]) && !memcmp(got[1], c->st, sizeof got[1]),
        "%s(%d): loads %u requests, %u phases, %u conflicts, degree %u; stores %u, %u, %u, %u "
        "(want %u, %u, %u, %u; %u, %u, %u, %u)",
        c->kernel, c->arg, got[0][0], got[0][1], got[0][2], got[0][3], got[1][0], got[1][1],
        got[1][2], got[1][3], c->ld[0], c->ld[1], c->ld[2], c->ld[3], c->st[0], c->st[1], c->st[2],
        c->st[3]);
  CHECK(shared_sites == 2, "%s: %d shared access sites, want 2", c->kernel, shared_sites);
  /* rows16's are the ldmatrix's reads and the cp.async's destinations */
  CHECK(matrix_sites == 2 * rows, "%s: %d matrix-unit sites, want %d", c->kernel, matrix_sites,
        2 * rows);
  return 0;
}

static int t_banks(void) {
  simt_options o = opts;
  o.trace = 1;
  char path[4200];
  snprintf(path, sizeof path, "%s/banks.cu", kdir);
  simt_module *m = NULL;
  char *err = NULL;
  if (simt_module_compile_file(&o, SIMT_CUDA, path, &m, &err) < 0) {
    int skip = err && strstr(err, "sanitizer");
    printf("  %s: %s\n", path, err ? err : "(no message)");
    free(err);
    return skip ? 2 : 1;
  }
  int bad = 0;
  for (size_t i = 0; i < sizeof bank_cases / sizeof bank_cases[0] && !bad; i++)
    bad = bank_case(m, &bank_cases[i]);
  simt_module_free(m);
  return bad;
}

int main(int argc, char **argv) {
  const char *dir = argc > 1 ? argv[1] : getenv("SIMT_DIR");
#ifdef SIMT_DEFAULT_DIR
  if (!dir) dir = SIMT_DEFAULT_DIR;
#endif
  if (!dir) dir = "tests/simt";
  opts.simt_dir = dir;
  snprintf(kdir, sizeof kdir, "%s/kernels", dir);
  static const struct {
    const char *name;
    int (*fn)(void);
  } tests[] = {
      {"cuda_elementwise", t_cuda_elementwise},
      {"cuda_reduce", t_cuda_reduce},
      {"cuda_half", t_cuda_half},
      {"cuda_bf16", t_cuda_bf16},
      {"cuda_vector", t_cuda_vector},
      {"cuda_misuse", t_cuda_misuse},
      {"compile_error", t_compile_error},
      {"metal_elementwise", t_metal_elementwise},
      {"metal_reduce", t_metal_reduce},
      {"metal_half", t_metal_half},
      {"metal_misuse", t_metal_misuse},
      {"coalescing", t_coalescing},
      {"banks", t_banks},
  };
  for (size_t i = 0; i < sizeof tests / sizeof tests[0]; i++) {
    if (no_clang) {
      printf("SKIP %s (clang cannot run)\n", tests[i].name);
      skipped++;
      continue;
    }
    int r = tests[i].fn();
    printf("%s %s\n", r == 0 ? "PASS" : r == 2 ? "SKIP" : "FAIL", tests[i].name);
    if (r == 0)
      passed++;
    else if (r == 2)
      skipped++;
    else
      failed++;
  }
  printf("simt_selftest: %d passed, %d failed, %d skipped\n", passed, failed, skipped);
  if (failed) return 1;
  return skipped ? 77 : 0;
}
