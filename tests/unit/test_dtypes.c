/* The dtypes f64, u16, u32 and u64 end to end (issue 17), each program checked against a
 * reference written here in C, not against relaxc's own interpreter:
 *
 *   the reference interpreter on the unscheduled program;
 *   CUDA (sm_80) and MSL kernels run in the SIMT emulator (tests/simt);
 *   Vulkan through the runtime, where a device is present (lavapipe in CI, under the validation
 *   layer), and the device's shaderFloat64 for the f64 programs;
 *   Metal has no double: the f64 programs must fail in codegen with a message naming the kernel
 *   and the dtype; so must loading them on a Vulkan device without shaderFloat64 (lavapipe with
 *   RX_VULKAN_NO_FLOAT64).
 *
 * The u16 and u32 programs over a static row of 256 are vectorized (32-bit words, 4 at a time).
 * Unsigned inputs are mostly values at the top of the range (2^31.., 2^63.., 2^15..), where
 * signed arithmetic gives other quotients, remainders, orders and conversions. f64 results must
 * carry double precision (normalized error 1e-13; an f32 computation is off by ~1e-8), except
 * exp/log/tanh/sin/erf on Vulkan, which GLSL computes in f32 (docs/targets.md): 1e-6 there.
 *
 * usage: test_dtypes TESTS_DIR */
/* test-needs: runtime */
#include "support_pipeline.h"
#include "support_runtime.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static rxk_stats st;

#define FAIL(...) rxk_fail(&st, __VA_ARGS__)

/* ---- programs ------------------------------------------------------------------------------ */

/* Integer programs, "T" standing for the dtype. */
static const char *INT_PROGRAMS =
    "tensor_fn T_ops(a: T[n], b: T[n], out q: T[n], out r: T[n], out lt: bool[n],\n"
    "                out mx: T[n], out mn: T[n], out s: T[n], out f: f32[n], out w: i64[n]) {\n"
    "  for i in 0..n {\n"
    "    q[i] = a[i] // b[i]\n"
    "    r[i] = a[i] % b[i]\n"
    "    lt[i] = a[i] < b[i]\n"
    "    mx[i] = max(a[i], b[i])\n"
    "    mn[i] = min(a[i], abs(b[i]))\n"
    "    s[i] = a[i] * b[i] + a[i] - b[i] + 4000000000\n"
    "    f[i] = f32(a[i])\n"
    "    w[i] = i64(a[i])\n"
    "  }\n"
    "}\n"
    "tensor_fn T_vec(a: T[n, 256], b: T[n, 256], out y: T[n, 256]) {\n"
    "  for i in 0..n, j in 0..256 {\n"
    "    y[i, j] = a[i, j] * b[i, j] + a[i, j] // b[i, j]\n"
    "  }\n"
    "}\n"
    "tensor_fn T_rows(a: T[n, 33], out mx: T[n], out sm: T[n]) {\n"
    "  for i in 0..n {\n"
    "    reduce j in 0..33 {\n"
    "      init { mx[i] = 0 }\n"
    "      update { mx[i] = max(mx[i], a[i, j]) }\n"
    "    }\n"
    "  }\n"
    "  for i in 0..n {\n"
    "    reduce j in 0..33 {\n"
    "      init { sm[i] = 0 }\n"
    "      update { sm[i] = sm[i] + a[i, j] }\n"
    "    }\n"
    "  }\n"
    "}\n";

static const char *F64_PROGRAMS =
    "tensor_fn f64_arith(a: f64[n], b: f64[n], out y: f64[n], out k: i64[n], out u: u64[n],\n"
    "                    out h: f32[n], out c: bool[n], out g: f64[n], out d: f64[n]) {\n"
    "  for i in 0..n {\n"
    "    y[i] = a[i] * b[i] + a[i] / (b[i] + 3.0) - 0.1\n"
    "    k[i] = i64(a[i] * 1000000000000.0)\n"
    "    u[i] = u64(abs(a[i]) * 10000000000000000000.0)\n"
    "    h[i] = f32(a[i])\n"
    "    c[i] = a[i] < b[i]\n"
    "    g[i] = floor(a[i] * 100.0) + sqrt(abs(b[i])) + max(a[i], b[i])\n"
    "    d[i] = f64(i64(a[i] * 1000000000000.0) // 3) +\n"
    "           f64(u64(abs(b[i]) * 10000000000000000000.0))\n"
    "  }\n"
    "}\n"
    "tensor_fn f64_math(a: f64[n], out e: f64[n]) {\n"
    "  for i in 0..n {\n"
    "    e[i] = exp(a[i]) + log(abs(a[i]) + 1.0) + tanh(a[i]) + sigmoid(a[i]) + sin(a[i]) +\n"
    "           erf(a[i])\n"
    "  }\n"
    "}\n"
    "tensor_fn f64_rows(a: f64[n, 100], out s: f64[n], out m: f64[n]) {\n"
    "  for i in 0..n {\n"
    "    reduce j in 0..100 {\n"
    "      init { s[i] = 0.0 }\n"
    "      update { s[i] = s[i] + a[i, j] }\n"
    "    }\n"
    "  }\n"
    "  for i in 0..n {\n"
    "    reduce j in 0..100 {\n"
    "      init { m[i] = -inf }\n"
    "      update { m[i] = max(m[i], a[i, j]) }\n"
    "    }\n"
    "  }\n"
    "}\n";

/* text with every "T" (as a whole word or a name prefix "T_") replaced by the dtype's name */
static char *subst(const char *text, const char *dt) {
  rx_strbuf b = {0};
  for (const char *p = text; *p; p++) {
    bool word = *p == 'T' && (p == text || !(p[-1] == '_' || (p[-1] >= 'a' && p[-1] <= 'z')));
    if (word)
      base_strbuf_append(&b, dt);
    else
      base_strbuf_putc(&b, *p);
  }
  return b.data;
}

/* ---- values -------------------------------------------------------------------------------- */

static uint64_t rng = 0x243f6a8885a308d3ull;
static uint64_t next(void) { /* splitmix64 */
  uint64_t z = (rng += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
static double drand(void) { return (double)(next() >> 11) / 9007199254740992.0 * 2.0 - 1.0; }

static int bits_of(rx_dtype t) { return ir_dtype_bits(t); }
static uint64_t mask_of(rx_dtype t) {
  return bits_of(t) == 64 ? UINT64_MAX : ((uint64_t)1 << bits_of(t)) - 1;
}

static uint64_t getu(const void *p, rx_dtype t, size_t i) {
  switch (bits_of(t)) {
  case 16:
    return ((const uint16_t *)p)[i];
  case 32:
    return ((const uint32_t *)p)[i];
  default:
    return ((const uint64_t *)p)[i];
  }
}
static void setu(void *p, rx_dtype t, size_t i, uint64_t v) {
  switch (bits_of(t)) {
  case 16:
    ((uint16_t *)p)[i] = (uint16_t)v;
    break;
  case 32:
    ((uint32_t *)p)[i] = (uint32_t)v;
    break;
  default:
    ((uint64_t *)p)[i] = v;
    break;
  }
}

/* An unsigned value of t: three in four in the top half of the range, never 0. */
static uint64_t uvalue(rx_dtype t) {
  uint64_t r = next() & mask_of(t), top = (uint64_t)1 << (bits_of(t) - 1);
  if (next() % 4) r |= top;
  if (next() % 8 == 0) r &= 0xff; /* some small ones */
  return r ? r : 1;
}

/* ---- the runs ------------------------------------------------------------------------------ */

typedef struct prog {
  const rx_tensor_fn *f;
  rx_dtype t;  /* the integer dtype, or f64 */
  double tol;  /* float outputs: normalized error */
  double vtol; /* ... on Vulkan */
} prog;

static bool is_out(const rx_tensor_fn *f, int i) {
  return f->params[i]->kind == RX_PARAM_BUFFER && f->params[i]->is_output;
}

/* Compares the outputs: integers and bools bit for bit, floats by normalized error. */
static bool compare(const prog *pg, const rxk_buffers *got, const rxk_buffers *want, double tol,
                    char *msg, size_t n) {
  const rx_tensor_fn *f = pg->f;
  for (int i = 0; i < f->nparams; i++) {
    if (!is_out(f, i)) continue;
    rx_dtype t = f->params[i]->buf->dtype;
    size_t es = (size_t)ir_dtype_bits(t) / 8, count = want->bytes[i] / es;
    const char *name = f->params[i]->buf->name;
    if (!ir_dtype_is_float(t)) {
      for (size_t k = 0; k < count; k++)
        if (memcmp((const char *)got->arg[i].data + k * es,
                   (const char *)want->arg[i].data + k * es, es)) {
          uint64_t g = 0, w = 0;
          memcpy(&g, (const char *)got->arg[i].data + k * es, es);
          memcpy(&w, (const char *)want->arg[i].data + k * es, es);
          snprintf(msg, n, "output %s element %zu: got %llu, want %llu (bits)", name, k,
                   (unsigned long long)g, (unsigned long long)w);
          return false;
        }
      continue;
    }
    double maxdiff = 0, maxref = 1;
    size_t worst = 0;
    for (size_t k = 0; k < count; k++) {
      double g = rxk_load_elem(got->arg[i].data, t, k), w = rxk_load_elem(want->arg[i].data, t, k);
      double d = isnan(g) != isnan(w) ? INFINITY : isnan(g) ? 0 : fabs(g - w);
      if (!(d <= maxdiff)) maxdiff = d, worst = k;
      if (fabs(w) > maxref) maxref = fabs(w);
    }
    double lim = t == RX_DTYPE_F32 ? 1e-7 : tol;
    if (!(maxdiff / maxref <= lim)) {
      snprintf(msg, n,
               "output %s: normalized error %.3g > %.0e (element %zu: got %.17g, want %.17g)", name,
               maxdiff / maxref, lim, worst, rxk_load_elem(got->arg[i].data, t, worst),
               rxk_load_elem(want->arg[i].data, t, worst));
      return false;
    }
  }
  return true;
}

/* The inputs of pg at n rows, and the reference outputs computed in C. */
static bool make_case(const prog *pg, rxk_env *e, int64_t n, rxk_buffers *in, rxk_buffers *want) {
  const rx_tensor_fn *f = pg->f;
  rxk_program_vars(f, e);
  for (int i = 0; i < e->n; i++) e->values[i] = n;
  char why[256];
  if (!rxk_make_buffers(f, e, in, why, sizeof why)) {
    FAIL("%s: %s", f->name, why);
    return false;
  }
  rx_dtype t = pg->t;
  size_t cnt[RXK_MAX_PARAMS];
  for (int i = 0; i < f->nparams; i++) {
    if (f->params[i]->kind != RX_PARAM_BUFFER) continue;
    rx_dtype pt = f->params[i]->buf->dtype;
    cnt[i] = in->bytes[i] / ((size_t)ir_dtype_bits(pt) / 8);
    if (is_out(f, i)) continue;
    for (size_t k = 0; k < cnt[i]; k++) {
      if (pt == RX_DTYPE_F64) /* every bit of the mantissa used */
        ((double *)in->arg[i].data)[k] = drand();
      else
        setu(in->arg[i].data, pt, k, uvalue(pt));
    }
  }
  rxk_copy_buffers(in, want);
#define W(i) (want->arg[i].data)
  const char *nm = f->name;
  uint64_t M = mask_of(t);
  if (strstr(nm, "_ops")) {
    for (size_t k = 0; k < cnt[0]; k++) {
      uint64_t a = getu(W(0), t, k), b = getu(W(1), t, k);
      setu(W(2), t, k, a / b);
      setu(W(3), t, k, a % b);
      ((uint8_t *)W(4))[k] = a < b;
      setu(W(5), t, k, a > b ? a : b);
      setu(W(6), t, k, a < b ? a : b);
      setu(W(7), t, k, (a * b + a - b + 4000000000u) & M);
      ((float *)W(8))[k] = (float)a;
      ((int64_t *)W(9))[k] = (int64_t)a; /* u64 to i64 wraps */
    }
  } else if (strstr(nm, "_vec")) {
    for (size_t k = 0; k < cnt[0]; k++) {
      uint64_t a = getu(W(0), t, k), b = getu(W(1), t, k);
      setu(W(2), t, k, (a * b + a / b) & M);
    }
  } else if (strstr(nm, "_rows") && t != RX_DTYPE_F64) {
    for (int64_t r = 0; r < n; r++) {
      uint64_t mx = 0, sm = 0;
      for (int j = 0; j < 33; j++) {
        uint64_t a = getu(W(0), t, (size_t)(r * 33 + j));
        mx = a > mx ? a : mx;
        sm = (sm + a) & M;
      }
      setu(W(1), t, (size_t)r, mx);
      setu(W(2), t, (size_t)r, sm);
    }
  } else if (!strcmp(nm, "f64_arith")) {
    for (size_t k = 0; k < cnt[0]; k++) {
      double a = ((double *)W(0))[k], b = ((double *)W(1))[k];
      int64_t kk = (int64_t)(a * 1e12);
      ((double *)W(2))[k] = a * b + a / (b + 3.0) - 0.1;
      ((int64_t *)W(3))[k] = kk;
      ((uint64_t *)W(4))[k] = (uint64_t)(fabs(a) * 1e19);
      ((float *)W(5))[k] = (float)a;
      ((uint8_t *)W(6))[k] = a < b;
      ((double *)W(7))[k] = floor(a * 100.0) + sqrt(fabs(b)) + fmax(a, b);
      int64_t q = kk / 3 - (kk % 3 != 0 && kk < 0); /* floor division */
      ((double *)W(8))[k] = (double)q + (double)(uint64_t)(fabs(b) * 1e19);
    }
  } else if (!strcmp(nm, "f64_math")) {
    for (size_t k = 0; k < cnt[0]; k++) {
      double a = ((double *)W(0))[k];
      ((double *)W(1))[k] =
          exp(a) + log(fabs(a) + 1.0) + tanh(a) + 1.0 / (1.0 + exp(-a)) + sin(a) + erf(a);
    }
  } else if (!strcmp(nm, "f64_rows")) {
    for (int64_t r = 0; r < n; r++) {
      double s = 0, m = -INFINITY;
      for (int j = 0; j < 100; j++) {
        double a = ((double *)W(0))[r * 100 + j];
        s += a;
        m = fmax(m, a);
      }
      ((double *)W(1))[r] = s;
      ((double *)W(2))[r] = m;
    }
  } else {
    RX_ASSERT(!"a program without a reference");
  }
#undef W
  return true;
}

static void check_interp(rx_module *m, const prog *pg, const rxk_buffers *in,
                         const rxk_buffers *want, const char *at) {
  rxk_buffers got;
  rxk_copy_buffers(in, &got);
  rx_interp_opts o = {0};
  rx_status s = interp_run(m, pg->f, got.arg, got.n, &o);
  char why[512];
  if (s)
    FAIL("%s [interpreter]: %s", at, rx_status_message(s));
  else if (!compare(pg, &got, want, pg->tol, why, sizeof why))
    FAIL("%s [interpreter]: %s", at, why);
  else
    st.passed++;
  rx_status_free(s);
  rxk_free_buffers(&got);
}

static void check_simt(rxk_prepared *p, const prog *pg, const rxk_env *e, const rxk_buffers *in,
                       const rxk_buffers *want, const char *at) {
  if (!p->ok || !p->emulate) return;
  rxk_buffers got;
  rxk_copy_buffers(in, &got);
  char why[512];
  if (!rxk_run_simt(p, e, &got, why, sizeof why))
    FAIL("%s [%s]: %s", at, p->t->name, why);
  else if (!compare(pg, &got, want, pg->tol, why, sizeof why))
    FAIL("%s [%s, emulated]: %s", at, p->t->name, why);
  else
    st.passed++;
  rxk_free_buffers(&got);
}

static void check_vulkan(rxk_backend *vk, rx_rt_library *lib, const prog *pg, const rxk_env *e,
                         const rxk_buffers *in, const rxk_buffers *want, const char *at) {
  if (!lib) return;
  rxk_buffers got;
  rxk_copy_buffers(in, &got);
  rx_status s = rxk_rt_run(vk, lib, pg->f, e, &got, 0, NULL);
  char why[512];
  if (s)
    FAIL("%s [vulkan]: %s", at, rx_status_message(s));
  else if (!compare(pg, &got, want, pg->vtol, why, sizeof why))
    FAIL("%s [vulkan]: %s", at, why);
  else
    st.passed++;
  rx_status_free(s);
  rxk_free_buffers(&got);
}

/* Metal has no double: codegen must refuse an f64 program, naming the kernel and the dtype. */
static void check_metal_refuses(rx_module *m, const rx_tensor_fn *f, const rx_target *t) {
  rx_diag diag;
  base_diag_init(&diag);
  rx_sched_result sr;
  rx_kernel_list kl;
  if (!sched_schedule(m, f, t, &diag, &sr)) {
    FAIL("%s [metal]: schedule failed: %s", f->name, rx_diag_text(&diag));
  } else if (rxk_codegen(m, sr.fn, t, &diag, &kl)) {
    FAIL("%s [metal]: codegen accepted an f64 program", f->name);
  } else if (!strstr(rx_diag_text(&diag), "f64 has no type in msl") ||
             !strstr(rx_diag_text(&diag), f->name)) {
    FAIL("%s [metal]: codegen failed with another message: %s", f->name, rx_diag_text(&diag));
  } else {
    st.passed++;
  }
  base_diag_free(&diag);
}

static void check_program(rx_module *m, const prog *pg, rxk_backend *vk, bool emulate_metal) {
  const rx_target *cuda, *metal;
  RX_ASSERT(!tgt_target_parse("cuda -arch=sm_80", &cuda));
  RX_ASSERT(!tgt_target_parse("metal-apple7", &metal));
  rxk_prepared pc, pm = {0};
  rxk_prepare(m, pg->f, cuda, &st, &pc);
  if (emulate_metal)
    rxk_prepare(m, pg->f, metal, &st, &pm);
  else
    check_metal_refuses(m, pg->f, metal);
  rx_rt_library *lib = NULL;
  if (vk->dev) {
    rx_strbuf msg = {0};
    if (!rxk_rt_load(m, pg->f, vk, &lib, &msg))
      FAIL("%s [vulkan]: %s", pg->f->name, msg.data ? msg.data : "");
    base_strbuf_free(&msg);
  } else {
    st.skipped++;
  }
  static const int64_t sizes[] = {1, 7, 1000};
  for (size_t si = 0; si < RX_ARRAY_LEN(sizes); si++) {
    rxk_env e;
    rxk_buffers in, want;
    if (!make_case(pg, &e, sizes[si], &in, &want)) continue;
    char at[128];
    snprintf(at, sizeof at, "%s at n=%lld", pg->f->name, (long long)sizes[si]);
    check_interp(m, pg, &in, &want, at);
    check_simt(&pc, pg, &e, &in, &want, at);
    if (emulate_metal) check_simt(&pm, pg, &e, &in, &want, at);
    check_vulkan(vk, lib, pg, &e, &in, &want, at);
    rxk_free_buffers(&in);
    rxk_free_buffers(&want);
  }
  rx_rt_library_release(lib);
  rxk_release(&pc);
  if (emulate_metal) rxk_release(&pm);
}

static void check_text(const char *text, rx_dtype t, rxk_backend *vk) {
  rx_module *m = NULL;
  char *err = rxk_verify_text(ir_dtype_name(t), text, &m);
  if (err) {
    FAIL("the %s programs do not verify:\n%s", ir_dtype_name(t), err);
    free(err);
    return;
  }
  for (size_t it = 0; it < m->items.len; it++) {
    if (m->items.data[it].kind != RX_ITEM_TENSOR) continue;
    prog pg = {m->items.data[it].fn, t, 1e-13, 1e-13};
    if (!strcmp(pg.f->name, "f64_math")) pg.vtol = 1e-6; /* GLSL: through f32 */
    check_program(m, &pg, vk, t != RX_DTYPE_F64);
  }
  rx_module_free(m);
}

/* On a Vulkan device without shaderFloat64 (RX_VULKAN_NO_FLOAT64 makes lavapipe one), loading an
 * f64 kernel fails with a message naming the kernel and f64; a u32 kernel still loads. */
static void check_no_float64(void) {
  setenv("RX_VULKAN_NO_FLOAT64", "1", 1);
  rxk_backend vk = {.kind = RX_RT_BACKEND_VULKAN};
  rxk_rt_open(&vk, "vulkan:0");
  unsetenv("RX_VULKAN_NO_FLOAT64");
  if (!vk.dev) {
    st.skipped++;
    return;
  }
  char *u32 = subst(INT_PROGRAMS, "u32");
  const char *texts[2] = {F64_PROGRAMS, u32};
  const char *names[2] = {"f64_arith", "u32_ops"};
  for (int i = 0; i < 2; i++) {
    rx_module *m = NULL;
    char *err = rxk_verify_text(names[i], texts[i], &m);
    RX_ASSERT(!err); /* verified by check_text already */
    rx_rt_library *lib = NULL;
    rx_strbuf msg = {0};
    bool ok = rxk_rt_load(m, rxk_find_fn(m, names[i]), &vk, &lib, &msg);
    const char *why = msg.data ? msg.data : "";
    if (i == 0 && ok)
      FAIL("f64_arith loaded on a Vulkan device without shaderFloat64");
    else if (i == 0 && !(strstr(why, "kernel 'f64_arith") && strstr(why, "uses f64") &&
                         strstr(why, "shaderFloat64")))
      FAIL("f64_arith without shaderFloat64: another message: %s", why);
    else if (i == 1 && !ok)
      FAIL("u32_ops without shaderFloat64: %s", why);
    else
      st.passed++;
    if (i == 0) printf("  without shaderFloat64: %s\n", why);
    base_strbuf_free(&msg);
    rx_rt_library_release(lib);
    rx_module_free(m);
  }
  free(u32);
  char msg[512];
  if (!rxk_rt_close(&vk, msg, sizeof msg)) FAIL("vulkan without shaderFloat64: %s", msg);
}

int main(int argc, char **argv) {
  (void)argc;
  (void)argv;
  rxk_backend vk = {.kind = RX_RT_BACKEND_VULKAN};
  unsetenv("LD_PRELOAD"); /* as test_attention: the emulator's compilers must not inherit it */
  rxk_rt_open(&vk, "vulkan:0");
  static const rx_dtype ints[] = {RX_DTYPE_U16, RX_DTYPE_U32, RX_DTYPE_U64};
  for (size_t i = 0; i < RX_ARRAY_LEN(ints); i++) {
    char *text = subst(INT_PROGRAMS, ir_dtype_name(ints[i]));
    check_text(text, ints[i], &vk);
    free(text);
  }
  check_text(F64_PROGRAMS, RX_DTYPE_F64, &vk);
  if (vk.dev) check_no_float64();
  char msg[512];
  if (vk.dev && !rxk_rt_close(&vk, msg, sizeof msg)) FAIL("vulkan: %s", msg);
  printf("test_dtypes: %d passed, %d failed, %d skipped\n", st.passed, st.failed, st.skipped);
  return st.failed ? 1 : 0;
}
