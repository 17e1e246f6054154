/* The reference interpreter (interp/): programs parsed from text, run on random data and
 * compared with hand-written C references; scheduled programs (blocks, threads, shared memory,
 * barriers, subgroups) compared exactly with C code that sums in the same order; and every
 * kind of error it must report (out of bounds, shape mismatch, violated facts, barrier and
 * subgroup divergence, division by zero, step limit).
 *
 * usage: test_interp [TESTS_DIR]   (the directory is not needed: programs are inline) */
#include "check.h"
#include "interp/interp.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static float frand(void) { /* [-1, 1) */
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return (float)((double)(rng >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}
static float *rand_f32(int64_t n) {
  float *p = malloc(sizeof *p * (size_t)(n ? n : 1));
  for (int64_t i = 0; i < n; i++) p[i] = frand();
  return p;
}

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Parses and normalizes text; NULL (and a failure) when it does not. */
static rx_module *parse(const char *text) {
  rx_module *m = rx_module_new();
  rx_diag d;
  base_diag_init(&d);
  bool ok = ir_parse_module(m, "<test>", text, strlen(text), &d) && ops_module_normalize(m, &d) &&
            ir_module_verify(m, &d);
  if (!ok) {
    check_failed++;
    fprintf(stderr, "FAIL: program rejected:\n%s\n%s\n", text, rx_diag_text(&d));
    rx_module_free(m);
    m = NULL;
  }
  base_diag_free(&d);
  return m;
}

static rx_interp_arg buf1(void *data, rx_dtype t, int64_t n0) {
  rx_interp_arg a = {.data = data, .ndim = 1, .dtype = t};
  a.shape[0] = n0;
  return a;
}
static rx_interp_arg buf2(void *data, rx_dtype t, int64_t n0, int64_t n1) {
  rx_interp_arg a = {.data = data, .ndim = 2, .dtype = t};
  a.shape[0] = n0;
  a.shape[1] = n1;
  return a;
}
static rx_interp_arg scalar(int64_t v) {
  rx_interp_arg a = {.value = v};
  return a;
}

/* Runs fn of m; on error prints it and counts a failure. */
static bool run_ok(rx_module *m, const char *fn, rx_interp_arg *args, int n,
                   const rx_interp_opts *o) {
  rx_status s = interp_run(m, ir_module_tensor_fn(m, fn), args, n, o);
  if (s) {
    check_failed++;
    fprintf(stderr, "FAIL: %s: %s\n", fn, rx_status_message(s));
    rx_status_free(s);
    return false;
  }
  return true;
}

/* Runs fn expecting an error whose message contains every string of want (NULL-terminated). */
static void run_err(rx_module *m, const char *fn, rx_interp_arg *args, int n,
                    const rx_interp_opts *o, const char *const *want) {
  rx_status s = interp_run(m, ir_module_tensor_fn(m, fn), args, n, o);
  if (!s) {
    check_failed++;
    fprintf(stderr, "FAIL: %s: expected an error, got success\n", fn);
    return;
  }
  const char *msg = rx_status_message(s);
  bool all = true;
  for (int i = 0; want[i]; i++)
    if (!strstr(msg, want[i])) {
      all = false;
      fprintf(stderr, "FAIL: %s: error message lacks \"%s\": %s\n", fn, want[i], msg);
    }
  if (all)
    check_passed++;
  else
    check_failed++;
  if (getenv("RX_TEST_VERBOSE")) printf("  %s: %s\n", fn, msg);
  rx_status_free(s);
}

static int count_mismatch(const float *got, const float *want, int64_t n, float tol) {
  int bad = 0;
  for (int64_t i = 0; i < n; i++) {
    if (got[i] == want[i] || (isnan(got[i]) && isnan(want[i]))) continue;
    float d = fabsf(got[i] - want[i]);
    if (!(d <= tol * (1.0f + fabsf(want[i])))) {
      if (bad < 3)
        fprintf(stderr, "  at %lld: got %.9g want %.9g\n", (long long)i, (double)got[i],
                (double)want[i]);
      bad++;
    }
  }
  return bad;
}

/* ---- f16 / bf16 conversions ---- */
/* base_f16_to_f32 as it was before it became inline and integer-only (ldexpf for the
 * subnormals): the new one must give the same bits for every one of the 65536 inputs. */
static float f16_to_f32_ldexp(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu, u;
  float f;
  if (e == 0) {
    f = ldexpf((float)m, -24);
    return sign ? -f : f;
  }
  u = e == 31 ? sign | 0x7f800000u | (m << 13) : sign | ((e + 112u) << 23) | (m << 13);
  memcpy(&f, &u, 4);
  return f;
}

static void test_half_bits(void) {
  int bad = 0, bad_value = 0;
  for (uint32_t h = 0; h < 0x10000; h++) {
    float got = base_f16_to_f32((uint16_t)h), want = f16_to_f32_ldexp((uint16_t)h);
    if (memcmp(&got, &want, 4) != 0) bad++;
    /* and the value itself, in double: (-1)^s * m * 2^-24 below the normals */
    uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    double v = e == 0 ? ldexp((double)m, -24) : ldexp((double)(m | 0x400u), (int)e - 25);
    if (h & 0x8000u) v = -v;
    if (e != 31 && ((double)got != v || !signbit(got) != !signbit(v))) bad_value++;
  }
  CHECK_MSG(bad == 0, "f16 to f32: %d of 65536 differ in bits from the ldexpf form", bad);
  CHECK_MSG(bad_value == 0, "f16 to f32: %d finite values wrong", bad_value);
}

static void test_half(void) {
  test_half_bits();
  CHECK_MSG(base_f32_to_f16(1.0f) == 0x3c00, "1.0");
  CHECK_MSG(base_f32_to_f16(-2.0f) == 0xc000, "-2.0");
  CHECK_MSG(base_f32_to_f16(65504.0f) == 0x7bff, "max");
  CHECK_MSG(base_f32_to_f16(65519.0f) == 0x7bff, "below the inf threshold");
  CHECK_MSG(base_f32_to_f16(65520.0f) == 0x7c00, "rounds to inf");
  CHECK_MSG(base_f32_to_f16(INFINITY) == 0x7c00 && base_f32_to_f16(-INFINITY) == 0xfc00, "inf");
  CHECK_MSG((base_f32_to_f16(NAN) & 0x7c00) == 0x7c00 && (base_f32_to_f16(NAN) & 0x3ff), "nan");
  CHECK_MSG(base_f32_to_f16(-0.0f) == 0x8000, "-0");
  CHECK_MSG(base_f32_to_f16(ldexpf(1, -24)) == 0x0001, "smallest subnormal");
  CHECK_MSG(base_f32_to_f16(ldexpf(1, -25)) == 0x0000,
            "half the smallest subnormal: tie to even 0");
  CHECK_MSG(base_f32_to_f16(ldexpf(3, -26)) == 0x0001, "0.75 ulp rounds up");
  CHECK_MSG(base_f32_to_f16(ldexpf(3, -25)) == 0x0002, "1.5 ulp: tie to even 2");
  CHECK_MSG(base_f32_to_f16(ldexpf(1023, -24) + ldexpf(1, -25)) == 0x0400, "subnormal to normal");
  CHECK_MSG(base_f32_to_f16(1.0f + ldexpf(1, -11)) == 0x3c00, "tie to even down");
  CHECK_MSG(base_f32_to_f16(1.0f + ldexpf(3, -11)) == 0x3c02, "tie to even up");
  CHECK_MSG(base_f32_to_f16(1.0f + ldexpf(1, -11) + ldexpf(1, -20)) == 0x3c01, "above tie");
  CHECK_MSG(base_f32_to_f16(ldexpf(1, -14)) == 0x0400, "smallest normal");
  CHECK_MSG(base_f32_to_f16(1e-10f) == 0 && base_f32_to_f16(ldexpf(1, -130)) == 0, "tiny");
  int bad = 0;
  for (uint32_t h = 0; h < 0x10000; h++) {
    float f = base_f16_to_f32((uint16_t)h);
    uint16_t back = base_f32_to_f16(f);
    bool nan = (h & 0x7c00) == 0x7c00 && (h & 0x3ff);
    if (nan ? !isnan(f) || !((back & 0x7c00) == 0x7c00 && (back & 0x3ff)) : back != h) bad++;
  }
  CHECK_MSG(bad == 0, "f16 round trip: %d bad", bad);
  CHECK_MSG(base_f16_to_f32(0x0001) == ldexpf(1, -24) && base_f16_to_f32(0x3555) == 0.333251953125f,
            "f16 to f32");
  CHECK_MSG(base_f32_to_bf16(1.0f) == 0x3f80 && base_bf16_to_f32(0x3f80) == 1.0f, "bf16 1.0");
  CHECK_MSG(base_f32_to_bf16(1.0f + ldexpf(1, -8)) == 0x3f80, "bf16 tie to even down");
  CHECK_MSG(base_f32_to_bf16(1.0f + ldexpf(3, -8)) == 0x3f82, "bf16 tie to even up");
  CHECK_MSG(isnan(base_bf16_to_f32(base_f32_to_bf16(NAN))), "bf16 nan");
  CHECK_MSG(base_f32_to_bf16(3.4e38f) == 0x7f80, "bf16 overflow to inf");
  CHECK_MSG(base_f32_to_bf16(ldexpf(1, -133)) == 0x0001, "bf16 subnormal");
}

/* ---- elementwise, broadcast ---- */
static const char *ELEMWISE = "tensor_fn add(a: f32[n], b: f32[n], out c: f32[n]) {\n"
                              "  for i in 0..n {\n"
                              "    c[i] = a[i] + b[i]\n"
                              "  }\n"
                              "}\n"
                              "tensor_fn add2d(a: f32[n, m], b: f32[n, m], out c: f32[n, m]) {\n"
                              "  for i in 0..n, j in 0..m {\n"
                              "    c[i, j] = a[i, j] * 2 + b[i, j]\n"
                              "  }\n"
                              "}\n"
                              "tensor_fn bcast(a: f32[n, m], b: f32[m], out c: f32[n, m]) {\n"
                              "  for i in 0..n, j in 0..m {\n"
                              "    c[i, j] = a[i, j] + b[j]\n"
                              "  }\n"
                              "}\n";

static void test_elementwise(void) {
  rx_module *m = parse(ELEMWISE);
  if (!m) return;
  int64_t sizes[] = {1, 7, 33, 128, 1000, 4099};
  for (size_t k = 0; k < RX_ARRAY_LEN(sizes); k++) {
    int64_t n = sizes[k];
    float *a = rand_f32(n), *b = rand_f32(n), *c = calloc((size_t)n, sizeof *c),
          *r = malloc(sizeof *r * (size_t)n);
    for (int64_t i = 0; i < n; i++) r[i] = a[i] + b[i];
    rx_interp_arg args[] = {buf1(a, RX_DTYPE_F32, n), buf1(b, RX_DTYPE_F32, n),
                            buf1(c, RX_DTYPE_F32, n)};
    if (run_ok(m, "add", args, 3, NULL))
      CHECK_MSG(count_mismatch(c, r, n, 0) == 0, "add n=%lld", (long long)n);
    free(a), free(b), free(c), free(r);
  }
  /* 1000 x 1000 elementwise, timed */
  int64_t n = 1000, mm = 1000;
  float *a = rand_f32(n * mm), *b = rand_f32(n * mm), *c = calloc((size_t)(n * mm), sizeof *c),
        *r = malloc(sizeof *r * (size_t)(n * mm));
  for (int64_t i = 0; i < n * mm; i++) r[i] = a[i] * 2 + b[i];
  rx_interp_arg args[] = {buf2(a, RX_DTYPE_F32, n, mm), buf2(b, RX_DTYPE_F32, n, mm),
                          buf2(c, RX_DTYPE_F32, n, mm)};
  double t0 = now();
  if (run_ok(m, "add2d", args, 3, NULL)) {
    double dt = now() - t0;
    printf("  1000x1000 elementwise: %.3f s\n", dt);
    CHECK_MSG(count_mismatch(c, r, n * mm, 0) == 0, "add2d");
  }
  free(a), free(b), free(c), free(r);
  /* broadcast */
  n = 33, mm = 7;
  a = rand_f32(n * mm), b = rand_f32(mm), c = calloc((size_t)(n * mm), sizeof *c);
  r = malloc(sizeof *r * (size_t)(n * mm));
  for (int64_t i = 0; i < n; i++)
    for (int64_t j = 0; j < mm; j++) r[i * mm + j] = a[i * mm + j] + b[j];
  rx_interp_arg bargs[] = {buf2(a, RX_DTYPE_F32, n, mm), buf1(b, RX_DTYPE_F32, mm),
                           buf2(c, RX_DTYPE_F32, n, mm)};
  if (run_ok(m, "bcast", bargs, 3, NULL)) CHECK_MSG(count_mismatch(c, r, n * mm, 0) == 0, "bcast");
  free(a), free(b), free(c), free(r);
  rx_module_free(m);
}

/* ---- reductions and matmul ---- */
static const char *REDUCE =
    "tensor_fn rowsum(a: f32[n, m], out b: f32[n]) {\n"
    "  for i in 0..n {\n"
    "    reduce k in 0..m {\n"
    "      init { b[i] = 0.0 }\n"
    "      update { b[i] = b[i] + a[i, k] }\n"
    "    }\n"
    "  }\n"
    "}\n"
    "tensor_fn matmul(a: f32[n, k], b: f32[k, m], out c: f32[n, m]) {\n"
    "  for i in 0..n, j in 0..m {\n"
    "    reduce r in 0..k {\n"
    "      init { c[i, j] = 0.0 }\n"
    "      update { c[i, j] = c[i, j] + a[i, r] * b[r, j] }\n"
    "    }\n"
    "  }\n"
    "}\n"
    "tensor_fn matmul_f16(a: f16[n, k], b: f16[k, m], out c: f32[n, m]) {\n"
    "  for i in 0..n, j in 0..m {\n"
    "    reduce r in 0..k {\n"
    "      init { c[i, j] = 0.0 }\n"
    "      update { c[i, j] = c[i, j] + f32(a[i, r]) * f32(b[r, j]) }\n"
    "    }\n"
    "  }\n"
    "}\n"
    "tensor_fn sum2(a: f32[n, m], out b: f32[1]) {\n"
    "  reduce i in 0..n, j in 0..m {\n"
    "    init { b[0] = 0.0 }\n"
    "    update { b[0] = b[0] * 0.5 + a[i, j] }\n"
    "  }\n"
    "}\n"
    "tensor_fn half_ops(a: f16[n], b: f16[n], out c: f16[n], out d: bf16[n]) {\n"
    "  for i in 0..n {\n"
    "    c[i] = a[i] * b[i] + a[i] / 3.0\n"
    "    d[i] = bf16(a[i]) * bf16(b[i]) + bf16(1.0)\n"
    "  }\n"
    "}\n";

static float rf16(float x) { return base_f16_to_f32(base_f32_to_f16(x)); }
static float rbf16(float x) { return base_bf16_to_f32(base_f32_to_bf16(x)); }

static void test_reduce(void) {
  rx_module *m = parse(REDUCE);
  if (!m) return;
  int64_t n = 33, k = 1000;
  float *a = rand_f32(n * k), *b = calloc((size_t)n, sizeof *b), r[33];
  for (int64_t i = 0; i < n; i++) {
    float s = 0;
    for (int64_t j = 0; j < k; j++) s += a[i * k + j];
    r[i] = s;
  }
  rx_interp_arg args[] = {buf2(a, RX_DTYPE_F32, n, k), buf1(b, RX_DTYPE_F32, n)};
  if (run_ok(m, "rowsum", args, 2, NULL)) CHECK_MSG(count_mismatch(b, r, n, 0) == 0, "rowsum");
  /* two reduction variables, row-major order (the update is order-sensitive) */
  float s = 0, out1 = -1;
  for (int64_t i = 0; i < n; i++)
    for (int64_t j = 0; j < k; j++) s = s * 0.5f + a[i * k + j];
  rx_interp_arg sargs[] = {buf2(a, RX_DTYPE_F32, n, k), buf1(&out1, RX_DTYPE_F32, 1)};
  if (run_ok(m, "sum2", sargs, 2, NULL)) CHECK_MSG(out1 == s, "sum2: %g vs %g", out1, s);
  free(a), free(b);

  int64_t shapes[][3] = {{7, 33, 5}, {1, 1, 1}, {128, 128, 128}};
  for (size_t t = 0; t < RX_ARRAY_LEN(shapes); t++) {
    int64_t N = shapes[t][0], K = shapes[t][1], M = shapes[t][2];
    float *A = rand_f32(N * K), *B = rand_f32(K * M), *C = calloc((size_t)(N * M), sizeof *C),
          *R = malloc(sizeof *R * (size_t)(N * M));
    for (int64_t i = 0; i < N; i++)
      for (int64_t j = 0; j < M; j++) {
        float acc = 0;
        for (int64_t q = 0; q < K; q++) acc = acc + A[i * K + q] * B[q * M + j];
        R[i * M + j] = acc;
      }
    rx_interp_arg margs[] = {buf2(A, RX_DTYPE_F32, N, K), buf2(B, RX_DTYPE_F32, K, M),
                             buf2(C, RX_DTYPE_F32, N, M)};
    double t0 = now();
    if (run_ok(m, "matmul", margs, 3, NULL)) {
      double dt = now() - t0;
      if (N == 128) printf("  128x128x128 matmul: %.3f s\n", dt);
      /* a*b+c contracted to fma by the C compiler or not: allow 1e-5 */
      CHECK_MSG(count_mismatch(C, R, N * M, 1e-5f) == 0, "matmul %lldx%lldx%lld", (long long)N,
                (long long)K, (long long)M);
    }
    /* f16 inputs, f32 accumulation */
    uint16_t *A16 = malloc(2 * (size_t)(N * K)), *B16 = malloc(2 * (size_t)(K * M));
    for (int64_t i = 0; i < N * K; i++) A16[i] = base_f32_to_f16(A[i]);
    for (int64_t i = 0; i < K * M; i++) B16[i] = base_f32_to_f16(B[i]);
    for (int64_t i = 0; i < N; i++)
      for (int64_t j = 0; j < M; j++) {
        float acc = 0;
        for (int64_t q = 0; q < K; q++)
          acc = acc + base_f16_to_f32(A16[i * K + q]) * base_f16_to_f32(B16[q * M + j]);
        R[i * M + j] = acc;
      }
    rx_interp_arg hargs[] = {buf2(A16, RX_DTYPE_F16, N, K), buf2(B16, RX_DTYPE_F16, K, M),
                             buf2(C, RX_DTYPE_F32, N, M)};
    if (run_ok(m, "matmul_f16", hargs, 3, NULL))
      CHECK_MSG(count_mismatch(C, R, N * M, 1e-5f) == 0, "matmul_f16");
    free(A), free(B), free(C), free(R), free(A16), free(B16);
  }

  /* f16 / bf16 arithmetic: rounded after every operation */
  n = 257;
  uint16_t *ha = malloc(2 * (size_t)n), *hb = malloc(2 * (size_t)n), *hc = malloc(2 * (size_t)n),
           *hd = malloc(2 * (size_t)n);
  for (int64_t i = 0; i < n; i++) {
    ha[i] = base_f32_to_f16(frand() * 100);
    hb[i] = base_f32_to_f16(frand() * 100);
  }
  rx_interp_arg hargs[] = {buf1(ha, RX_DTYPE_F16, n), buf1(hb, RX_DTYPE_F16, n),
                           buf1(hc, RX_DTYPE_F16, n), buf1(hd, RX_DTYPE_BF16, n)};
  if (run_ok(m, "half_ops", hargs, 4, NULL)) {
    int bad = 0;
    for (int64_t i = 0; i < n; i++) {
      float x = base_f16_to_f32(ha[i]), y = base_f16_to_f32(hb[i]);
      float want = rf16(rf16(x * y) + rf16(x / rf16(3.0f)));
      float wantb = rbf16(rbf16(rbf16(x) * rbf16(y)) + 1.0f);
      if (base_f16_to_f32(hc[i]) != want || base_bf16_to_f32(hd[i]) != wantb) bad++;
    }
    CHECK_MSG(bad == 0, "half_ops: %d mismatches", bad);
  }
  free(ha), free(hb), free(hc), free(hd);
  rx_module_free(m);
}

/* ---- integers, casts, intrinsics, laziness ---- */
static const char *SCALARS =
    "tensor_fn ints(a: i32[n], b: i32[n], out q: i32[n], out r: i32[n], out w: i8[n],\n"
    "               out u: u8[n]) {\n"
    "  for i in 0..n {\n"
    "    q[i] = a[i] // b[i]\n"
    "    r[i] = a[i] % b[i]\n"
    "    w[i] = i8(a[i]) * i8(3)\n"
    "    u[i] = u8(a[i]) - u8(1)\n"
    "  }\n"
    "}\n"
    "tensor_fn casts(a: f32[n], out x: i32[n], out y: i8[n], out z: u8[n], out v: i64[n]) {\n"
    "  for i in 0..n {\n"
    "    x[i] = i32(a[i])\n"
    "    y[i] = i8(a[i])\n"
    "    z[i] = u8(a[i])\n"
    "    v[i] = i64(a[i])\n"
    "  }\n"
    "}\n"
    "tensor_fn math(a: f32[n], b: f32[n], out o: f32[18, n]) {\n"
    "  for i in 0..n {\n"
    "    o[0, i] = exp(a[i])\n"
    "    o[1, i] = exp2(a[i])\n"
    "    o[2, i] = log(abs(a[i]))\n"
    "    o[3, i] = log2(abs(a[i]))\n"
    "    o[4, i] = sqrt(abs(a[i]))\n"
    "    o[5, i] = rsqrt(abs(a[i]))\n"
    "    o[6, i] = tanh(a[i])\n"
    "    o[7, i] = erf(a[i])\n"
    "    o[8, i] = sigmoid(a[i])\n"
    "    o[9, i] = sin(a[i])\n"
    "    o[10, i] = cos(a[i])\n"
    "    o[11, i] = floor(a[i] * 10.0)\n"
    "    o[12, i] = ceil(a[i] * 10.0)\n"
    "    o[13, i] = pow(abs(a[i]), b[i])\n"
    "    o[14, i] = fma(a[i], b[i], 1.0)\n"
    "    o[15, i] = min(a[i], b[i])\n"
    "    o[16, i] = max(a[i], b[i])\n"
    "    o[17, i] = -a[i]\n"
    "  }\n"
    "}\n"
    "tensor_fn imath(a: i32[n], b: i32[n], out o: i32[3, n]) {\n"
    "  for i in 0..n {\n"
    "    o[0, i] = abs(a[i])\n"
    "    o[1, i] = min(a[i], b[i])\n"
    "    o[2, i] = max(a[i], b[i])\n"
    "  }\n"
    "}\n"
    "tensor_fn guarded(a: f32[n], out c: f32[n + 3]) {\n"
    "  for i in 0..n + 3 {\n"
    "    c[i] = select(i < n, a[select(i < n, i, 0)] * 2.0, -1.0)\n"
    "    if i < n && a[i] > 0.0 {\n"
    "      c[i] = 5.0\n"
    "    }\n"
    "  }\n"
    "}\n"
    "tensor_fn lets(a: f32[n], out c: f32[n]) {\n"
    "  for i in 0..n {\n"
    "    let x: f32 = a[i] * 3.0\n"
    "    let j = (i + 1) % n\n"
    "    c[j] = x + 1.0\n"
    "  }\n"
    "}\n";

static void test_scalars(void) {
  rx_module *m = parse(SCALARS);
  if (!m) return;
  int32_t a[] = {7, -7, 7, -7, INT32_MIN, 300, 0, 255};
  int32_t b[] = {2, 2, -2, -2, -1, 7, 5, 1};
  int n = 8;
  int32_t q[8], r[8];
  int8_t w[8];
  uint8_t u[8];
  rx_interp_arg args[] = {buf1(a, RX_DTYPE_I32, n), buf1(b, RX_DTYPE_I32, n),
                          buf1(q, RX_DTYPE_I32, n), buf1(r, RX_DTYPE_I32, n),
                          buf1(w, RX_DTYPE_I8, n),  buf1(u, RX_DTYPE_U8, n)};
  if (run_ok(m, "ints", args, 6, NULL)) {
    int32_t wq[] = {3, -4, -4, 3, INT32_MIN, 42, 0, 255}, wr[] = {1, 1, -1, -1, 0, 6, 0, 0};
    int bad = 0;
    for (int i = 0; i < n; i++) {
      int8_t ww = (int8_t)(uint8_t)((uint32_t)(int8_t)(uint8_t)(uint32_t)a[i] * 3u);
      uint8_t uu = (uint8_t)((uint32_t)a[i] - 1u);
      if (q[i] != wq[i] || r[i] != wr[i] || w[i] != ww || u[i] != uu) {
        bad++;
        fprintf(stderr, "  ints %d: q %d r %d w %d u %d\n", i, q[i], r[i], w[i], u[i]);
      }
    }
    CHECK_MSG(bad == 0, "integer floor div/mod and wrap-around");
  }
  /* division by zero in integer arithmetic */
  int32_t bz[] = {2, 2, 2, 0, 1, 1, 1, 1};
  args[1].data = bz;
  run_err(m, "ints", args, 6, NULL, (const char *[]){"division by zero", "-7 // 0", NULL});

  float fa[] = {1.9f, -1.9f, 300.0f, -300.0f, NAN, INFINITY, -INFINITY, 3e10f, 0.0f};
  int nf = 9;
  int32_t x[9];
  int8_t y[9];
  uint8_t z[9];
  int64_t v[9];
  rx_interp_arg cargs[] = {buf1(fa, RX_DTYPE_F32, nf), buf1(x, RX_DTYPE_I32, nf),
                           buf1(y, RX_DTYPE_I8, nf), buf1(z, RX_DTYPE_U8, nf),
                           buf1(v, RX_DTYPE_I64, nf)};
  if (run_ok(m, "casts", cargs, 5, NULL)) {
    int32_t wx[] = {1, -1, 300, -300, 0, INT32_MAX, INT32_MIN, INT32_MAX, 0};
    int8_t wy[] = {1, -1, 127, -128, 0, 127, -128, 127, 0};
    uint8_t wz[] = {1, 0, 255, 0, 0, 255, 0, 255, 0};
    int64_t wv[] = {1, -1, 300, -300, 0, INT64_MAX, INT64_MIN, 30000001024LL, 0};
    int bad = 0;
    for (int i = 0; i < nf; i++)
      if (x[i] != wx[i] || y[i] != wy[i] || z[i] != wz[i] || v[i] != wv[i]) {
        bad++;
        fprintf(stderr, "  cast %d: %d %d %d %lld\n", i, x[i], y[i], z[i], (long long)v[i]);
      }
    CHECK_MSG(bad == 0, "float to int casts saturate, NaN gives 0");
  }

  int nm = 64;
  float *ma = rand_f32(nm), *mb = rand_f32(nm), *mo = calloc(18 * (size_t)nm, sizeof *mo),
        *mr = malloc(18 * sizeof *mr * (size_t)nm);
  for (int i = 0; i < nm; i++) {
    float p = ma[i], s = mb[i];
    float want[18] = {expf(p),          exp2f(p),          logf(fabsf(p)),
                      log2f(fabsf(p)),  sqrtf(fabsf(p)),   1.0f / sqrtf(fabsf(p)),
                      tanhf(p),         erff(p),           1.0f / (1.0f + expf(-p)),
                      sinf(p),          cosf(p),           floorf(p * 10.0f),
                      ceilf(p * 10.0f), powf(fabsf(p), s), fmaf(p, s, 1.0f),
                      fminf(p, s),      fmaxf(p, s),       -p};
    for (int k = 0; k < 18; k++) mr[k * nm + i] = want[k];
  }
  rx_interp_arg margs[] = {buf1(ma, RX_DTYPE_F32, nm), buf1(mb, RX_DTYPE_F32, nm),
                           buf2(mo, RX_DTYPE_F32, 18, nm)};
  if (run_ok(m, "math", margs, 3, NULL))
    CHECK_MSG(count_mismatch(mo, mr, 18 * nm, 0) == 0, "float intrinsics");
  free(ma), free(mb), free(mo), free(mr);

  int32_t ia[] = {-5, 5, INT32_MIN, 0}, ib[] = {3, -3, 0, 0}, io[12];
  rx_interp_arg iargs[] = {buf1(ia, RX_DTYPE_I32, 4), buf1(ib, RX_DTYPE_I32, 4),
                           buf2(io, RX_DTYPE_I32, 3, 4)};
  if (run_ok(m, "imath", iargs, 3, NULL)) {
    int32_t want[] = {5, 5, INT32_MIN, 0, -5, -3, INT32_MIN, 0, 3, 5, 0, 0};
    CHECK_MSG(memcmp(io, want, sizeof want) == 0, "integer abs/min/max");
  }

  float ga[] = {1.0f, -2.0f, 3.0f, -4.0f}, gc[7];
  rx_interp_arg gargs[] = {buf1(ga, RX_DTYPE_F32, 4), buf1(gc, RX_DTYPE_F32, 7)};
  if (run_ok(m, "guarded", gargs, 2, NULL)) {
    float want[] = {5.0f, -4.0f, 5.0f, -8.0f, -1.0f, -1.0f, -1.0f};
    CHECK_MSG(memcmp(gc, want, sizeof want) == 0, "select and && are lazy (guarded loads)");
  }
  float la[] = {1, 2, 3}, lc[3];
  rx_interp_arg largs[] = {buf1(la, RX_DTYPE_F32, 3), buf1(lc, RX_DTYPE_F32, 3)};
  if (run_ok(m, "lets", largs, 2, NULL))
    CHECK_MSG(lc[0] == 10 && lc[1] == 4 && lc[2] == 7, "let: %g %g %g", lc[0], lc[1], lc[2]);
  rx_module_free(m);
}

/* ---- scheduled programs ---- */
static const char *SCHED =
    /* one block per row, 128 threads, strided partial sums, shared-memory tree */
    "tensor_fn rowsum_tree(a: f32[n, m], out b: f32[n]) {\n"
    "  for r in 0..n bind(blockIdx.x) {\n"
    "    alloc red: f32[128] shared\n"
    "    for t in 0..128 bind(threadIdx.x) {\n"
    "      alloc acc: f32[1] local\n"
    "      for k in 0..(m + 127) // 128 {\n"
    "        if k * 128 + t < m {\n"
    "          acc[0] = acc[0] + a[r, k * 128 + t]\n"
    "        }\n"
    "      }\n"
    "      red[t] = acc[0]\n"
    "    }\n"
    "    barrier\n"
    "    for t in 0..64 bind(threadIdx.x) { red[t] = red[t] + red[t + 64] }\n"
    "    barrier\n"
    "    for t in 0..32 bind(threadIdx.x) { red[t] = red[t] + red[t + 32] }\n"
    "    barrier\n"
    "    for t in 0..16 bind(threadIdx.x) { red[t] = red[t] + red[t + 16] }\n"
    "    barrier\n"
    "    for t in 0..8 bind(threadIdx.x) { red[t] = red[t] + red[t + 8] }\n"
    "    barrier\n"
    "    for t in 0..4 bind(threadIdx.x) { red[t] = red[t] + red[t + 4] }\n"
    "    barrier\n"
    "    for t in 0..2 bind(threadIdx.x) { red[t] = red[t] + red[t + 2] }\n"
    "    barrier\n"
    "    for t in 0..1 bind(threadIdx.x) { b[r] = red[0] + red[1] }\n"
    "  }\n"
    "}\n"
    /* subgroup reduction, then one partial per subgroup in shared memory */
    "tensor_fn rowsum_sg(a: f32[n, m], out b: f32[n], sg: i64) {\n"
    "  for r in 0..n bind(blockIdx.x) {\n"
    "    alloc part: f32[128] shared\n"
    "    for t in 0..128 bind(threadIdx.x) {\n"
    "      alloc acc: f32[1] local\n"
    "      for k in 0..(m + 127) // 128 {\n"
    "        if k * 128 + t < m {\n"
    "          acc[0] = acc[0] + a[r, k * 128 + t]\n"
    "        }\n"
    "      }\n"
    "      let s: f32 = subgroup_sum(acc[0])\n"
    "      if t % sg == 0 {\n"
    "        part[t // sg] = s\n"
    "      }\n"
    "    }\n"
    "    barrier\n"
    "    for t in 0..1 bind(threadIdx.x) {\n"
    "      reduce q in 0..128 // sg {\n"
    "        init { b[r] = 0.0 }\n"
    "        update { b[r] = b[r] + part[q] }\n"
    "      }\n"
    "    }\n"
    "  }\n"
    "}\n"
    /* 2-D grid and 2-D blocks, elementwise with guards, no barriers (threads run in turn) */
    "tensor_fn add_tiled(a: f32[n, m], b: f32[n, m], out c: f32[n, m]) {\n"
    "  for bi in 0..(n + 7) // 8 bind(blockIdx.y), bj in 0..(m + 15) // 16 bind(blockIdx.x) {\n"
    "    for ti in 0..8 bind(threadIdx.y), tj in 0..16 bind(threadIdx.x) {\n"
    "      if bi * 8 + ti < n && bj * 16 + tj < m {\n"
    "        c[bi * 8 + ti, bj * 16 + tj] = a[bi * 8 + ti, bj * 16 + tj] + b[bi * 8 + ti, bj * 16 "
    "+ tj]\n"
    "      }\n"
    "    }\n"
    "  }\n"
    "}\n"
    /* shared memory is fresh (zeroed) in every block, local memory in every execution */
    "tensor_fn fresh(out b: f32[n], out c: f32[n, 4]) {\n"
    "  for r in 0..n bind(blockIdx.x) {\n"
    "    alloc s: f32[1] shared\n"
    "    for t in 0..4 bind(threadIdx.x) {\n"
    "      if t == 0 { s[0] = s[0] + 1.0 }\n"
    "    }\n"
    "    barrier\n"
    "    for t in 0..4 bind(threadIdx.x) {\n"
    "      for k in 0..3 {\n"
    "        alloc l: f32[1] local\n"
    "        l[0] = l[0] + 2.0\n"
    "        c[r, t] = l[0] + s[0] + f32(t)\n"
    "      }\n"
    "    }\n"
    "    for t in 0..1 bind(threadIdx.x) { b[r] = s[0] }\n"
    "  }\n"
    "}\n"
    /* threads without blockIdx loops: the whole program is one block; subgroup_max */
    "tensor_fn maxall(a: f32[64], out b: f32[64]) {\n"
    "  for t in 0..64 bind(threadIdx.x) {\n"
    "    b[t] = subgroup_max(a[t])\n"
    "  }\n"
    "}\n"
    /* no threads at all: a subgroup op returns its operand, a barrier does nothing */
    "tensor_fn single(a: f32[n], out b: f32[n]) {\n"
    "  for i in 0..n {\n"
    "    b[i] = subgroup_sum(a[i])\n"
    "    barrier\n"
    "  }\n"
    "}\n";

/* The exact summation order of rowsum_tree / rowsum_sg. */
static void partials(const float *row, int64_t m, float part[128]) {
  for (int t = 0; t < 128; t++) {
    float acc = 0;
    for (int64_t k = 0; k < (m + 127) / 128; k++)
      if (k * 128 + t < m) acc = acc + row[k * 128 + t];
    part[t] = acc;
  }
}

/* Every float intrinsic in f32 and in f64 (the interpreter has one table for both; f64 once fell
 * through to `return x` for asin, acos and atan), against libm in double precision: one output row
 * per intrinsic, inputs a in [-1, 1) and b in [1, 2). f64 must match to 1e-15 relative, f32 to
 * 2e-6 (libm's float functions are within a few ulp). */
#define FLOAT_MATH(X)                                                                              \
  X("exp(a[i])", exp(a))                                                                           \
  X("exp2(a[i])", exp2(a))                                                                         \
  X("log(b[i])", log(b))                                                                           \
  X("log2(b[i])", log2(b))                                                                         \
  X("sqrt(b[i])", sqrt(b))                                                                         \
  X("rsqrt(b[i])", 1.0 / sqrt(b))                                                                  \
  X("tanh(a[i])", tanh(a))                                                                         \
  X("erf(a[i])", erf(a))                                                                           \
  X("sigmoid(a[i])", 1.0 / (1.0 + exp(-a)))                                                        \
  X("sin(a[i])", sin(a))                                                                           \
  X("cos(a[i])", cos(a))                                                                           \
  X("asin(a[i])", asin(a))                                                                         \
  X("acos(a[i])", acos(a))                                                                         \
  X("atan(a[i])", atan(a))                                                                         \
  X("floor(a[i] * 10.0)", floor(a * 10.0))                                                         \
  X("ceil(a[i] * 10.0)", ceil(a * 10.0))                                                           \
  X("pow(b[i], a[i])", pow(b, a))                                                                  \
  X("fma(a[i], b[i], 1.0)", fma(a, b, 1.0))                                                        \
  X("abs(a[i])", fabs(a))                                                                          \
  X("min(a[i], b[i])", fmin(a, b))                                                                 \
  X("max(a[i], b[i])", fmax(a, b))

static const char *const float_math_calls[] = {
#define X(call, want) call,
    FLOAT_MATH(X)
#undef X
};
enum { FLOAT_MATH_N = (int)RX_ARRAY_LEN(float_math_calls) };

static double float_math_want(int k, double a, double b) {
  int i = 0;
#define X(call, want)                                                                              \
  if (k == i++) return want;
  FLOAT_MATH(X)
#undef X
  return NAN;
}

static void test_float_math(void) {
  rx_strbuf sb = {0};
  for (int p = 0; p < 2; p++) {
    const char *t = p ? "f64" : "f32";
    base_strbuf_printf(&sb, "tensor_fn math_%s(a: %s[n], b: %s[n], out o: %s[%d, n]) {\n", t, t, t,
                       t, FLOAT_MATH_N);
    base_strbuf_printf(&sb, "  for i in 0..n {\n");
    for (int k = 0; k < FLOAT_MATH_N; k++)
      base_strbuf_printf(&sb, "    o[%d, i] = %s\n", k, float_math_calls[k]);
    base_strbuf_printf(&sb, "  }\n}\n");
  }
  char *text = base_strbuf_take(&sb);
  rx_module *m = parse(text);
  free(text);
  if (!m) return;
  enum { N = 33 };
  double a[N], b[N], o[FLOAT_MATH_N * N];
  float af[N], bf[N], of[FLOAT_MATH_N * N];
  for (int i = 0; i < N; i++) {
    af[i] = frand(), bf[i] = 1.5f + 0.5f * frand();
    a[i] = af[i], b[i] = bf[i];
  }
  rx_interp_arg d[] = {buf1(a, RX_DTYPE_F64, N), buf1(b, RX_DTYPE_F64, N),
                       buf2(o, RX_DTYPE_F64, FLOAT_MATH_N, N)};
  rx_interp_arg f[] = {buf1(af, RX_DTYPE_F32, N), buf1(bf, RX_DTYPE_F32, N),
                       buf2(of, RX_DTYPE_F32, FLOAT_MATH_N, N)};
  bool ok64 = run_ok(m, "math_f64", d, 3, NULL), ok32 = run_ok(m, "math_f32", f, 3, NULL);
  for (int k = 0; k < FLOAT_MATH_N && ok64 && ok32; k++) {
    double e64 = 0, e32 = 0;
    for (int i = 0; i < N; i++) {
      double w = float_math_want(k, a[i], b[i]), s = fmax(1.0, fabs(w));
      e64 = fmax(e64, fabs(o[k * N + i] - w) / s);
      e32 = fmax(e32, fabs((double)of[k * N + i] - w) / s);
    }
    CHECK_MSG(e64 <= 1e-15 && e32 <= 2e-6, "%s: f64 error %.3g, f32 error %.3g",
              float_math_calls[k], e64, e32);
  }
  rx_module_free(m);
}

static void test_scheduled(void) {
  rx_module *m = parse(SCHED);
  if (!m) return;
  /* many blocks with barriers: 4099 blocks x 128 threads x 7 barriers */
  {
    int64_t n = 4099, mm = 130;
    float *a = rand_f32(n * mm), *b = calloc((size_t)n, sizeof *b);
    rx_interp_arg args[] = {buf2(a, RX_DTYPE_F32, n, mm), buf1(b, RX_DTYPE_F32, n)};
    double t0 = now();
    if (run_ok(m, "rowsum_tree", args, 2, NULL)) {
      double dt = now() - t0;
      printf("  rowsum_tree 4099x130 (4099 blocks of 128 threads, 7 barriers): %.3f s\n", dt);
      float p[128], red[128];
      partials(a + 4098 * mm, mm, p);
      memcpy(red, p, sizeof red);
      for (int s = 64; s >= 2; s /= 2)
        for (int t = 0; t < s; t++) red[t] = red[t] + red[t + s];
      CHECK_MSG(b[4098] == red[0] + red[1], "rowsum_tree 4099x130");
    }
    free(a), free(b);
  }
  int64_t rows[] = {1, 7, 33}, cols[] = {1, 128, 1000, 4099};
  for (size_t ri = 0; ri < RX_ARRAY_LEN(rows); ri++)
    for (size_t ci = 0; ci < RX_ARRAY_LEN(cols); ci++) {
      int64_t n = rows[ri], mm = cols[ci];
      float *a = rand_f32(n * mm), *b = calloc((size_t)n, sizeof *b),
            *rt = malloc(sizeof *rt * (size_t)n), *r8 = malloc(sizeof *r8 * (size_t)n),
            *r32 = malloc(sizeof *r32 * (size_t)n);
      for (int64_t i = 0; i < n; i++) {
        float p[128], red[128];
        partials(a + i * mm, mm, p);
        memcpy(red, p, sizeof red);
        for (int s = 64; s >= 2; s /= 2)
          for (int t = 0; t < s; t++) red[t] = red[t] + red[t + s];
        rt[i] = red[0] + red[1];
        for (int sg = 8; sg <= 32; sg += 24) {
          float tot = 0;
          for (int g = 0; g < 128 / sg; g++) {
            float acc = p[g * sg];
            for (int l = 1; l < sg; l++) acc = acc + p[g * sg + l];
            tot = tot + acc;
          }
          (sg == 8 ? r8 : r32)[i] = tot;
        }
      }
      rx_interp_arg args[] = {buf2(a, RX_DTYPE_F32, n, mm), buf1(b, RX_DTYPE_F32, n), scalar(0)};
      if (run_ok(m, "rowsum_tree", args, 2, NULL))
        CHECK_MSG(count_mismatch(b, rt, n, 0) == 0, "rowsum_tree %lldx%lld", (long long)n,
                  (long long)mm);
      for (int sg = 8; sg <= 32; sg += 24) {
        rx_interp_opts o = {.subgroup_size = sg};
        args[2] = scalar(sg);
        memset(b, 0, sizeof *b * (size_t)n);
        if (run_ok(m, "rowsum_sg", args, 3, &o))
          CHECK_MSG(count_mismatch(b, sg == 8 ? r8 : r32, n, 0) == 0, "rowsum_sg %d %lldx%lld", sg,
                    (long long)n, (long long)mm);
      }
      free(a), free(b), free(rt), free(r8), free(r32);
    }

  int64_t n = 33, mm = 100;
  float *a = rand_f32(n * mm), *b = rand_f32(n * mm), *c = calloc((size_t)(n * mm), sizeof *c),
        *r = malloc(sizeof *r * (size_t)(n * mm));
  for (int64_t i = 0; i < n * mm; i++) r[i] = a[i] + b[i];
  rx_interp_arg targs[] = {buf2(a, RX_DTYPE_F32, n, mm), buf2(b, RX_DTYPE_F32, n, mm),
                           buf2(c, RX_DTYPE_F32, n, mm)};
  if (run_ok(m, "add_tiled", targs, 3, NULL))
    CHECK_MSG(count_mismatch(c, r, n * mm, 0) == 0, "add_tiled");
  free(a), free(b), free(c), free(r);

  float fb[5], fc[20];
  rx_interp_arg fargs[] = {buf1(fb, RX_DTYPE_F32, 5), buf2(fc, RX_DTYPE_F32, 5, 4)};
  if (run_ok(m, "fresh", fargs, 2, NULL)) {
    int bad = 0;
    for (int i = 0; i < 5; i++) {
      if (fb[i] != 1.0f) bad++;
      for (int t = 0; t < 4; t++)
        if (fc[i * 4 + t] != 2.0f + 1.0f + (float)t) bad++;
    }
    CHECK_MSG(bad == 0, "shared memory fresh per block, local zeroed per execution");
  }

  float ma[64], mb[64];
  for (int i = 0; i < 64; i++) ma[i] = frand();
  rx_interp_arg margs[] = {buf1(ma, RX_DTYPE_F32, 64), buf1(mb, RX_DTYPE_F32, 64)};
  rx_interp_opts o8 = {.subgroup_size = 8};
  if (run_ok(m, "maxall", margs, 2, &o8)) {
    int bad = 0;
    for (int i = 0; i < 64; i++) {
      float w = ma[i / 8 * 8];
      for (int l = 1; l < 8; l++) w = fmaxf(w, ma[i / 8 * 8 + l]);
      if (mb[i] != w) bad++;
    }
    CHECK_MSG(bad == 0, "subgroup_max with 8 lanes, program without blockIdx loops");
  }
  rx_interp_arg sargs[] = {buf1(ma, RX_DTYPE_F32, 64), buf1(mb, RX_DTYPE_F32, 64)};
  if (run_ok(m, "single", sargs, 2, NULL))
    CHECK_MSG(memcmp(ma, mb, sizeof ma) == 0, "one thread: subgroup op returns its operand");
  rx_module_free(m);
}

static const char *SCHED2 =
    /* a barrier inside a serial loop: 5 rounds of s[t] = s[t] + s[(t + 1) % 32] */
    "tensor_fn rotate(a: f32[32], out b: f32[32], rounds: i64) {\n"
    "  alloc s: f32[32] shared\n"
    "  for t in 0..32 bind(threadIdx.x) { s[t] = a[t] }\n"
    "  barrier\n"
    "  for k in 0..rounds {\n"
    "    for t in 0..32 bind(threadIdx.x) {\n"
    "      alloc tmp: f32[1] local\n"
    "      tmp[0] = s[t] + s[(t + 1) % 32]\n"
    "      barrier\n"
    "      s[t] = tmp[0]\n"
    "    }\n"
    "    barrier\n"
    "  }\n"
    "  for t in 0..32 bind(threadIdx.x) { b[t] = s[t] }\n"
    "}\n"
    /* 2-D threads: lanes are linear ids, x fastest; integer subgroup sum */
    "tensor_fn lanes(out o: i32[4, 8]) {\n"
    "  for ty in 0..4 bind(threadIdx.y), tx in 0..8 bind(threadIdx.x) {\n"
    "    o[ty, tx] = subgroup_sum(i32(ty * 8 + tx))\n"
    "  }\n"
    "}\n"
    /* a symbolic block size */
    "tensor_fn sym_threads(a: f32[n], out b: f32[n]) {\n"
    "  alloc s: f32[n] shared\n"
    "  for t in 0..n bind(threadIdx.x) { s[t] = a[t] }\n"
    "  barrier\n"
    "  for t in 0..n bind(threadIdx.x) { b[t] = s[n - 1 - t] }\n"
    "}\n"
    /* an error in one thread while the others wait at a barrier */
    "tensor_fn late_oob(out b: f32[8]) {\n"
    "  for r in 0..2 bind(blockIdx.x) {\n"
    "    for t in 0..8 bind(threadIdx.x) {\n"
    "      barrier\n"
    "      b[t + r * 3] = 1.0\n"
    "      barrier\n"
    "    }\n"
    "  }\n"
    "}\n";

static void test_scheduled2(void) {
  rx_module *m = parse(SCHED2);
  if (!m) return;
  float a[32], b[32], s[32];
  for (int i = 0; i < 32; i++) a[i] = s[i] = frand();
  for (int k = 0; k < 5; k++) {
    float tmp[32];
    for (int t = 0; t < 32; t++) tmp[t] = s[t] + s[(t + 1) % 32];
    memcpy(s, tmp, sizeof s);
  }
  rx_interp_arg args[] = {buf1(a, RX_DTYPE_F32, 32), buf1(b, RX_DTYPE_F32, 32), scalar(5)};
  if (run_ok(m, "rotate", args, 3, NULL))
    CHECK_MSG(memcmp(b, s, sizeof s) == 0, "barrier inside a serial loop");

  int32_t o[32];
  rx_interp_arg largs[] = {buf2(o, RX_DTYPE_I32, 4, 8)};
  rx_interp_opts o16 = {.subgroup_size = 16};
  if (run_ok(m, "lanes", largs, 1, &o16)) {
    int bad = 0;
    for (int i = 0; i < 32; i++) {
      int g = i / 16 * 16, want = 0;
      for (int l = 0; l < 16; l++) want += g + l;
      if (o[i] != want) bad++;
    }
    CHECK_MSG(bad == 0, "2-D lanes, integer subgroup_sum");
  }

  for (int n = 1; n <= 32; n += 31) {
    rx_interp_arg sargs[] = {buf1(a, RX_DTYPE_F32, n), buf1(b, RX_DTYPE_F32, n)};
    if (run_ok(m, "sym_threads", sargs, 2, NULL)) {
      int bad = 0;
      for (int i = 0; i < n; i++)
        if (b[i] != a[n - 1 - i]) bad++;
      CHECK_MSG(bad == 0, "symbolic block size n = %d", n);
    }
  }

  rx_interp_arg oargs[] = {buf1(b, RX_DTYPE_F32, 8)};
  run_err(m, "late_oob", oargs, 1, NULL,
          (const char *[]){"store to `b`", "indices [8]", "r = 1", "thread (5, 0, 0)", NULL});
  rx_module_free(m);
}

/* A chain of 3000 additions: deep recursion, on fibers too (stacks sized by depth). */
static void test_deep(void) {
  rx_strbuf sb = {0};
  base_strbuf_append(&sb, "tensor_fn deep(a: f32[n], out b: f32[n]) {\n"
                          "  for t in 0..n bind(threadIdx.x) {\n"
                          "    b[t] = a[t]");
  for (int i = 0; i < 3000; i++) base_strbuf_append(&sb, " + a[t]");
  base_strbuf_append(&sb, "\n    barrier\n  }\n}\n");
  rx_module *m = parse(sb.data);
  base_strbuf_free(&sb);
  if (!m) return;
  float a[64], b[64];
  for (int i = 0; i < 64; i++) a[i] = (float)i;
  rx_interp_arg args[] = {buf1(a, RX_DTYPE_F32, 64), buf1(b, RX_DTYPE_F32, 64)};
  if (run_ok(m, "deep", args, 2, NULL))
    CHECK_MSG(b[3] == 3.0f * 3001 && b[63] == 63.0f * 3001, "deep");
  rx_module_free(m);
}

/* A 1024-thread block reducing 4096 elements with a shared-memory tree (10 barriers). */
static void test_big_block(void) {
  rx_strbuf sb = {0};
  base_strbuf_append(&sb, "tensor_fn big(a: f32[4096], out b: f32[1]) {\n"
                          "  alloc red: f32[1024] shared\n"
                          "  for t in 0..1024 bind(threadIdx.x) {\n"
                          "    red[t] = a[t] + a[t + 1024] + a[t + 2048] + a[t + 3072]\n"
                          "  }\n"
                          "  barrier\n");
  for (int s = 512; s >= 1; s /= 2)
    base_strbuf_printf(&sb,
                       "  for t in 0..%d bind(threadIdx.x) { red[t] = red[t] + red[t + %d] }\n"
                       "  barrier\n",
                       s, s);
  base_strbuf_append(&sb, "  for t in 0..1 bind(threadIdx.x) { b[0] = red[0] }\n}\n");
  rx_module *m = parse(sb.data);
  base_strbuf_free(&sb);
  if (!m) return;
  float *a = rand_f32(4096), red[1024], out = 0;
  for (int t = 0; t < 1024; t++) red[t] = a[t] + a[t + 1024] + a[t + 2048] + a[t + 3072];
  for (int s = 512; s >= 1; s /= 2)
    for (int t = 0; t < s; t++) red[t] = red[t] + red[t + s];
  rx_interp_arg args[] = {buf1(a, RX_DTYPE_F32, 4096), buf1(&out, RX_DTYPE_F32, 1)};
  double t0 = now();
  if (run_ok(m, "big", args, 2, NULL)) {
    double dt = now() - t0;
    printf("  1024-thread block, 4096-element tree reduction: %.3f s\n", dt);
    CHECK_MSG(out == red[0], "big block reduction: %g vs %g", out, red[0]);
  }
  /* over the thread limit */
  rx_interp_opts o = {.max_threads_per_block = 512};
  run_err(m, "big", args, 2, &o, (const char *[]){"1024 x 1 x 1 threads", "limit of 512", NULL});
  free(a);
  rx_module_free(m);
}

/* ---- errors ---- */
static const char *ERRORS = "tensor_fn oob_store(a: f32[n], out c: f32[n]) {\n"
                            "  for i in 0..n {\n"
                            "    c[i + 1] = a[i]\n"
                            "  }\n"
                            "}\n"
                            "tensor_fn oob_load(a: f32[n, 4], out c: f32[n]) {\n"
                            "  for i in 0..n {\n"
                            "    c[i] = a[i, i]\n"
                            "  }\n"
                            "}\n"
                            "tensor_fn shapes(a: f32[n, 2 * m], b: f32[m], out c: f32[n]) {\n"
                            "  for i in 0..n { c[i] = a[i, 0] + b[0] }\n"
                            "}\n"
                            "tensor_fn facts(a: f32[n], out c: f32[n]) where n <= 16 {\n"
                            "  for i in 0..n { c[i] = a[i] }\n"
                            "}\n"
                            "tensor_fn divergent(a: f32[n], out c: f32[n]) {\n"
                            "  for r in 0..n bind(blockIdx.x) {\n"
                            "    alloc s: f32[32] shared\n"
                            "    for t in 0..32 bind(threadIdx.x) {\n"
                            "      s[t] = a[r]\n"
                            "      if t < 5 {\n"
                            "        barrier\n"
                            "      }\n"
                            "    }\n"
                            "    for t in 0..1 bind(threadIdx.x) { c[r] = s[31] }\n"
                            "  }\n"
                            "}\n"
                            "tensor_fn two_barriers(out c: f32[4]) {\n"
                            "  for t in 0..4 bind(threadIdx.x) {\n"
                            "    if t < 2 {\n"
                            "      barrier\n"
                            "    } else {\n"
                            "      barrier\n"
                            "    }\n"
                            "    c[t] = 1.0\n"
                            "  }\n"
                            "}\n"
                            "tensor_fn sg_exit(a: f32[64], out c: f32[64]) {\n"
                            "  for t in 0..50 bind(threadIdx.x) {\n"
                            "    c[t] = subgroup_sum(a[t])\n"
                            "  }\n"
                            "  for t in 0..64 bind(threadIdx.x) {\n"
                            "    c[t] = c[t] + 1.0\n"
                            "  }\n"
                            "}\n"
                            "tensor_fn divzero(a: f32[n], out c: f32[n], k: i64) {\n"
                            "  for i in 0..n {\n"
                            "    c[i] = a[i // k]\n"
                            "  }\n"
                            "}\n"
                            "tensor_fn forever(out c: f32[1]) {\n"
                            "  for i in 0..1000000000 {\n"
                            "    c[0] = c[0] + 1.0\n"
                            "  }\n"
                            "}\n"
                            "tensor_fn inner_extent(out c: f32[8]) {\n"
                            "  for r in 0..1 bind(blockIdx.x) {\n"
                            "    for k in 1..3 {\n"
                            "      for t in 0..k bind(threadIdx.x) { c[t] = 1.0 }\n"
                            "    }\n"
                            "  }\n"
                            "}\n";

static void test_errors(void) {
  rx_module *m = parse(ERRORS);
  if (!m) return;
  float a[64] = {0}, c[64] = {0};
  rx_interp_arg args[] = {buf1(a, RX_DTYPE_F32, 4), buf1(c, RX_DTYPE_F32, 4), scalar(0)};
  run_err(m, "oob_store", args, 2, NULL,
          (const char *[]){"oob_store", "store to `c`", "indices [4]", "shape [4]", ":3:", NULL});
  rx_interp_arg largs[] = {buf2(a, RX_DTYPE_F32, 8, 4), buf1(c, RX_DTYPE_F32, 8)};
  run_err(m, "oob_load", largs, 2, NULL,
          (const char *[]){"load from `a`", "indices [4, 4]", "shape [8, 4]", NULL});

  /* shape mismatch: c has 5 elements where n = 4 */
  rx_interp_arg sargs[] = {buf1(a, RX_DTYPE_F32, 4), buf1(c, RX_DTYPE_F32, 5)};
  run_err(m, "oob_store", sargs, 2, NULL,
          (const char *[]){"argument `c`", "dim 0", "expected `n` = 4", "got 5", NULL});
  /* a dim that is an expression: 2 * m cannot be 5 */
  rx_interp_arg xargs[] = {buf2(a, RX_DTYPE_F32, 4, 5), buf1(a, RX_DTYPE_F32, 2),
                           buf1(c, RX_DTYPE_F32, 4)};
  run_err(m, "shapes", xargs, 3, NULL,
          (const char *[]){"argument `a`", "dim 1", "expected `m * 2` = 4 (m = 2)", "got 5", NULL});
  xargs[0].shape[1] = 4;
  if (run_ok(m, "shapes", xargs, 3, NULL)) check_passed++;
  /* wrong dtype, wrong rank, wrong count */
  rx_interp_arg dargs[] = {buf1(a, RX_DTYPE_F16, 4), buf1(c, RX_DTYPE_F32, 4)};
  run_err(m, "oob_store", dargs, 2, NULL, (const char *[]){"argument 0 (`a`)", "got f16", NULL});
  run_err(m, "oob_store", args, 1, NULL, (const char *[]){"1 arguments given, 2 parameters", NULL});

  rx_interp_arg fargs[] = {buf1(a, RX_DTYPE_F32, 32), buf1(c, RX_DTYPE_F32, 32)};
  run_err(m, "facts", fargs, 2, NULL,
          (const char *[]){"where fact `n <= 16` does not hold (n = 32)", NULL});
  fargs[0].shape[0] = fargs[1].shape[0] = 16;
  if (run_ok(m, "facts", fargs, 2, NULL)) check_passed++;

  rx_interp_arg gargs[] = {buf1(a, RX_DTYPE_F32, 3), buf1(c, RX_DTYPE_F32, 3)};
  run_err(m, "divergent", gargs, 2, NULL,
          (const char *[]){"barrier divergence", "thread (5, 0, 0) has finished", "r = 0", NULL});
  rx_interp_arg bargs[] = {buf1(c, RX_DTYPE_F32, 4)};
  run_err(m, "two_barriers", bargs, 1, NULL,
          (const char *[]){"barrier divergence", ":32:", ":34:", NULL});
  rx_interp_arg eargs[] = {buf1(a, RX_DTYPE_F32, 64), buf1(c, RX_DTYPE_F32, 64)};
  rx_interp_opts o16 = {.subgroup_size = 16};
  run_err(m, "sg_exit", eargs, 2, &o16,
          (const char *[]){"subgroup divergence", "waits at subgroup_sum",
                           "thread (50, 0, 0) has finished", NULL});
  rx_interp_opts o2 = {.subgroup_size = 2}; /* 50 is a multiple of 2: fine */
  if (run_ok(m, "sg_exit", eargs, 2, &o2)) check_passed++;

  rx_interp_arg zargs[] = {buf1(a, RX_DTYPE_F32, 4), buf1(c, RX_DTYPE_F32, 4), scalar(0)};
  run_err(m, "divzero", zargs, 3, NULL,
          (const char *[]){"division by zero in index expression `i // k` (i = 0, k = 0)", NULL});
  zargs[2] = scalar(-1);
  run_err(m, "divzero", zargs, 3, NULL, (const char *[]){"`k`", "-1", NULL});

  rx_interp_arg oargs[] = {buf1(c, RX_DTYPE_F32, 1)};
  rx_interp_opts steps = {.max_steps = 10000};
  run_err(m, "forever", oargs, 1, &steps, (const char *[]){"step limit", NULL});
  rx_interp_arg iargs[] = {buf1(c, RX_DTYPE_F32, 8)};
  run_err(m, "inner_extent", iargs, 1, NULL,
          (const char *[]){"threadIdx.x", "`k`", "not known when the block is launched", NULL});
  rx_module_free(m);
}

/* shuffle_xor (ir.h): lane t of each subgroup gets the value of lane t ^ mask, at subgroup sizes
 * 32 and 8 (lavapipe's) and with a mask that differs per row (the same on each lane); a mask that
 * reaches no lane of the subgroup is an error naming the lane and the mask. */
static const char *SHUFFLE = "tensor_fn shfl(a: f32[n, 32], out c: f32[n, 32], mask: i64) {\n"
                             "  for r in 0..n bind(blockIdx.x) {\n"
                             "    for t in 0..32 bind(threadIdx.x) {\n"
                             "      c[r, t] = shuffle_xor(a[r, t], i32((r + mask) % 8)) + 100.0 * "
                             "shuffle_xor(a[r, t], mask)\n"
                             "    }\n"
                             "  }\n"
                             "}\n";

/* Index arithmetic of the shapes the interpreter evaluates at one call (v + w * K, v % K * M,
 * v // K * M, x * K + c): an overflow names the subexpression that overflows, and the first
 * error of an index (the left operand's) is the one reported. */
static const char *IDX_OVERFLOW =
    "tensor_fn muladd(a: f32[n], out c: f32[n], k: i64) {\n"
    "  for i in 0..n { c[i] = a[i + k * 4611686018427387904] }\n"
    "}\n"
    "tensor_fn addk(a: f32[n], out c: f32[n], k: i64) {\n"
    "  for i in 0..n { c[i] = a[k * 4611686018427387904 + 4611686018427387904 - i] }\n"
    "}\n"
    "tensor_fn modmul(a: f32[n], out c: f32[n], k: i64) {\n"
    "  for i in 0..n { c[i] = a[(i + k) % 8 * 4611686018427387904] }\n"
    "}\n"
    "tensor_fn divmul(a: f32[n], out c: f32[n], k: i64) {\n"
    "  for i in 0..n { c[i] = a[(i + k) // 8 * 2305843009213693952] }\n"
    "}\n"
    "tensor_fn first(a: f32[n], out c: f32[n], k: i64) {\n"
    "  for i in 2..n { c[i] = a[i * 4611686018427387904 + k * 4611686018427387904] }\n"
    "}\n";

static void test_index_overflow(void) {
  rx_module *m = parse(IDX_OVERFLOW);
  if (!m) return;
  float a[8] = {0}, c[8] = {0};
  rx_interp_arg args[] = {buf1(a, RX_DTYPE_F32, 8), buf1(c, RX_DTYPE_F32, 8), scalar(2)};
  const char *ovf = "64-bit overflow in index expression";
  run_err(m, "muladd", args, 3, NULL,
          (const char *[]){ovf, "`k * 4611686018427387904` (k = 2) (at <test>:2:30)", NULL});
  run_err(m, "addk", args, 3, NULL,
          (const char *[]){ovf, "`k * 4611686018427387904` (k = 2) (at <test>:5:74)", NULL});
  run_err(m, "modmul", args, 3, NULL,
          (const char *[]){ovf, "`(i + k) % 8 * 4611686018427387904` (i = 0, k = 2)", NULL});
  args[2] = scalar(32);
  run_err(m, "divmul", args, 3, NULL,
          (const char *[]){ovf, "`(i + k) // 8 * 2305843009213693952` (i = 0, k = 32)", NULL});
  run_err(m, "first", args, 3, NULL,
          (const char *[]){ovf, "`i * 4611686018427387904` (i = 2) (at <test>:14:52)", NULL});
  args[2] = scalar(1);
  run_err(m, "addk", args, 3, NULL,
          (const char *[]){
              ovf, "`k * 4611686018427387904 - i + 4611686018427387904` (i = 0, k = 1)", NULL});
  run_err(m, "muladd", args, 3, NULL,
          (const char *[]){"load from `a` out of bounds: indices [4611686018427387904]", NULL});
  rx_module_free(m);
}

static void test_shuffle(void) {
  rx_module *m = parse(SHUFFLE);
  if (!m) return;
  enum { N = 5 };
  float a[N * 32], c[N * 32], want[N * 32];
  for (int i = 0; i < N * 32; i++) a[i] = (float)i;
  static const int sizes[] = {32, 8};
  for (int si = 0; si < 2; si++)
    for (int mask = 0; mask < 8; mask += 3) {
      rx_interp_arg args[3] = {buf2(a, RX_DTYPE_F32, N, 32), buf2(c, RX_DTYPE_F32, N, 32),
                               scalar(mask)};
      rx_interp_opts o = {.subgroup_size = sizes[si]};
      for (int r = 0; r < N; r++)
        for (int t = 0; t < 32; t++)
          want[r * 32 + t] = a[r * 32 + (t ^ ((r + mask) % 8))] + 100.0f * a[r * 32 + (t ^ mask)];
      if (run_ok(m, "shfl", args, 3, &o))
        CHECK_MSG(count_mismatch(c, want, N * 32, 0) == 0, "shuffle_xor, subgroups of %d, mask %d",
                  sizes[si], mask);
    }
  rx_interp_arg args[3] = {buf2(a, RX_DTYPE_F32, N, 32), buf2(c, RX_DTYPE_F32, N, 32), scalar(8)};
  rx_interp_opts o = {.subgroup_size = 8};
  static const char *const want_err[] = {"shuffle_xor", "mask 8", "subgroup of 8", NULL};
  run_err(m, "shfl", args, 3, &o, want_err);
  rx_module_free(m);
}

int main(int argc, char **argv) {
  (void)argc;
  (void)argv;
  test_half();
  test_elementwise();
  test_reduce();
  test_scalars();
  test_float_math();
  test_scheduled();
  test_scheduled2();
  test_deep();
  test_big_block();
  test_errors();
  test_index_overflow();
  test_shuffle();
  return check_finish("interp");
}
