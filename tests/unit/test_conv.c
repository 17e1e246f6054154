/* conv2d as tensor programs (ops/conv.c: implicit GEMM on matrix units beside the direct
 * kernel), checked against a direct convolution written here in double precision from the
 * definition of docs/ops.md, NCHW with OIHW weights and NHWC with HWIO weights.
 *
 * Each program is legalized from a one-op graph, then for every target (cuda sm_80 and sm_90,
 * vulkan-lavapipe, vulkan, metal-apple7, vulkan-nvidia) scheduled and generated: CUDA C through
 * NVRTC with no spills, GLSL through shaderc and spirv-val (support_pipeline.c); each target must
 * have compiled the form its matrix units run (CUDA's rx_frag_mma_ for f16 and bf16 on sm_80 and
 * sm_90, Metal's simdgroup_multiply_accumulate for f16, vulkan-nvidia's coopMatMulAddNV for f16)
 * and the others the direct kernel, as every target for f32 (ops/conv.c says why). Every case then
 * runs in the reference interpreter with and without its fragment form (the cases small enough for
 * it), as CUDA C (16 x 16 fragments) and MSL (8 x 8) in the SIMT emulator, and on Vulkan (lavapipe
 * here: the direct kernel) under the validation layer.
 *
 * Cases: batch 1, 2 and 3; channels 3, 5, 6, 17 and 64; spatial 1x1, 7x7, 13x11, 23x23 and
 * 28x28; kernels 1x1, 3x3, 5x5 with dilation 2, 7x7 with stride 2; symmetric and asymmetric
 * padding; groups 2 and depthwise (which keeps the direct kernel: a 1-wide GEMM); symbolic
 * batch, height and width run at several sizes; f32, f16 and bf16 (GLSL has no bf16).
 *
 * RX_KERNEL_SIZES (the sanitizer pass of CI sets it) skips the runs of more than
 * SANITIZED_WORK multiply-adds.
 *
 * Tolerance, as normalized error max|got - want| / max(1, max|want|): f32 1e-5 (f32
 * accumulation over at most 576 products against double), f16 2e-3 (products accumulated in
 * f32, the output rounded once to f16: within 2^-11 relative; the inputs are the same f16
 * values in both), bf16 8e-3 (2^-9 relative).
 *
 * usage: test_conv TESTS_DIR [FILTER] */
/* test-needs: runtime */
#include "support_pipeline.h"
#include "support_runtime.h"

#include "interp/interp.h"
#include "ops/legalize.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TOL_F32  1e-5 /* see the header comment */
#define TOL_F16  2e-3
#define TOL_BF16 8e-3
/* The interpreter runs the cases whose multiply-adds (output points x K) are at most this: it
 * executes every statement of every thread, about a million a second. */
#define INTERP_WORK 60000
/* With RX_KERNEL_SIZES set (the sanitizer pass of CI, tests/CMakeLists.txt), only the runs of at
 * most this many multiply-adds: the emulated kernels are compiled and run with ASan there. */
#define SANITIZED_WORK 1000000

static rxk_stats st;
static rxk_backend vk = {.kind = RX_RT_BACKEND_VULKAN};
static const char *filter;
static int64_t work_cap = INT64_MAX; /* the most multiply-adds of a run (RX_KERNEL_SIZES) */
static double worst[RX_DTYPE_COUNT];

static const char *const targets[] = {"cuda -arch=sm_80", "cuda -arch=sm_90", "vulkan-lavapipe",
                                      "vulkan",           "metal-apple7",     "vulkan-nvidia"};
#define NTARGETS ((int)RX_ARRAY_LEN(targets))

/* A convolution: its dtype, layout and attributes; the dims of x other than the batch and the
 * spatial ones, which are symbolic when sym (n, h, w) and run at the sizes of runs. */
typedef struct cfg {
  rx_dtype t;
  bool nhwc, sym;
  int64_t c, o, kh, kw, sh, sw, pad[4], dh, dw, groups;
  int64_t runs[4][3]; /* (n, h, w) of each run; n == 0 ends the list */
} cfg;

typedef struct prog {
  char what[200];
  rx_module *m;
  rx_tensor_fn *f;
  rxk_prepared tp[NTARGETS];
  rx_rt_library *lib; /* on Vulkan */
} prog;

static bool depthwise(const cfg *c) {
  return c->groups > 1 && c->c == c->groups && c->o == c->groups;
}

/* The target compiled the form its matrix units run: fragments where it lists them for the
 * dtype (16 x 16 x 16 or 8 x 8 x 8, f32 accumulators), the direct kernel elsewhere and for f32
 * and depthwise convolutions everywhere. */
static void check_form(const cfg *c, const prog *p, const rxk_prepared *tp) {
  if (!tp->ok) return;
  bool form = c->t != RX_DTYPE_F32 && !depthwise(c); /* the program has a fragment form */
  bool want = form && (tgt_target_has_frag(tp->t, c->t, RX_DTYPE_F32, 16, 16, 16) ||
                       tgt_target_has_frag(tp->t, c->t, RX_DTYPE_F32, 8, 8, 8));
  bool got = rxk_uses_frags(tp);
  if (got == want && rxk_has_frag_form(p->f) == form)
    st.passed++;
  else
    rxk_fail(&st, "%s: the kernel %s the matrix-unit form (the program %s one)", tp->what,
             got ? "is unexpectedly" : "is not", form ? "has" : "has not");
}

/* The graph of the case: x [n, C, h, w] (NHWC: [n, h, w, C]) with literal dims unless sym. */
static void graph_text(const cfg *c, char *text, size_t size) {
  const char *t = ir_dtype_name(c->t);
  char n[32] = "n", h[32] = "h", w[32] = "w", x[160], wt[160];
  if (!c->sym) {
    snprintf(n, sizeof n, "%lld", (long long)c->runs[0][0]);
    snprintf(h, sizeof h, "%lld", (long long)c->runs[0][1]);
    snprintf(w, sizeof w, "%lld", (long long)c->runs[0][2]);
  }
  long long ci = c->c / c->groups;
  if (c->nhwc) {
    snprintf(x, sizeof x, "%s[%s, %s, %s, %lld]", t, n, h, w, (long long)c->c);
    snprintf(wt, sizeof wt, "%s[%lld, %lld, %lld, %lld]", t, (long long)c->kh, (long long)c->kw, ci,
             (long long)c->o);
  } else {
    snprintf(x, sizeof x, "%s[%s, %lld, %s, %s]", t, n, (long long)c->c, h, w);
    snprintf(wt, sizeof wt, "%s[%lld, %lld, %lld, %lld]", t, (long long)c->o, ci, (long long)c->kh,
             (long long)c->kw);
  }
  snprintf(text, size,
           "graph_fn main(x: %s, wt: %s) {\n"
           "  y = conv2d(x, wt, strides=[%lld, %lld], padding=[%lld, %lld, %lld, %lld], "
           "dilation=[%lld, %lld], groups=%lld%s)\n  return y\n}\n",
           x, wt, (long long)c->sh, (long long)c->sw, (long long)c->pad[0], (long long)c->pad[1],
           (long long)c->pad[2], (long long)c->pad[3], (long long)c->dh, (long long)c->dw,
           (long long)c->groups, c->nhwc ? ", data_layout=\"NHWC\"" : "");
}

/* Legalizes the conv of the case and compiles it for every target (bf16: not Vulkan). */
static bool prog_build(const cfg *c, prog *p) {
  memset(p, 0, sizeof *p);
  snprintf(p->what, sizeof p->what,
           "conv2d %s %s%s C=%lld O=%lld k=%lldx%lld s=%lld d=%lld pad=[%lld,%lld,%lld,%lld] "
           "groups=%lld",
           ir_dtype_name(c->t), c->nhwc ? "NHWC" : "NCHW", c->sym ? " symbolic" : "",
           (long long)c->c, (long long)c->o, (long long)c->kh, (long long)c->kw, (long long)c->sh,
           (long long)c->dh, (long long)c->pad[0], (long long)c->pad[1], (long long)c->pad[2],
           (long long)c->pad[3], (long long)c->groups);
  if (filter && !strstr(p->what, filter)) return false;
  printf("%s\n", p->what);
  char text[1024];
  graph_text(c, text, sizeof text);
  p->m = rx_module_new();
  rx_diag d;
  base_diag_init(&d);
  bool ok =
      ir_parse_module(p->m, p->what, text, strlen(text), &d) && ops_module_normalize(p->m, &d);
  if (ok) {
    rx_graph_fn *g = ir_module_graph_fn(p->m, "main");
    p->f = ops_legalize_call(p->m, g->body.blocks[0]->bindings[0]->value, "conv", &d);
    ok = p->f && ir_module_verify(p->m, &d);
  }
  if (!ok) rxk_fail(&st, "%s: does not legalize:\n%s", p->what, rx_diag_text(&d));
  base_diag_free(&d);
  if (!ok) return false;
  bool bf16 = c->t == RX_DTYPE_BF16;
  for (int i = 0; i < NTARGETS; i++) {
    const rx_target *t;
    rx_status ts = tgt_target_parse(targets[i], &t);
    RX_ASSERT(!ts);
    if (t->kind == RX_TARGET_VULKAN && bf16) {
      st.skipped++;
      continue;
    }
    rxk_prepare(p->m, p->f, t, &st, &p->tp[i]);
    check_form(c, p, &p->tp[i]);
  }
  if (vk.dev && !bf16) {
    rx_strbuf msg = {0};
    if (!rxk_rt_load(p->m, p->f, &vk, &p->lib, &msg))
      rxk_fail(&st, "%s: compiling for %s: %s", p->what, vk.target.name, msg.data ? msg.data : "");
    base_strbuf_free(&msg);
  }
  return true;
}

static void prog_free(prog *p) {
  for (int i = 0; i < NTARGETS; i++) rxk_release(&p->tp[i]);
  rx_rt_library_release(p->lib);
  if (p->m) rx_module_free(p->m);
}

/* ------------------------------------------------------------------------------------------
 * the reference: a direct convolution in double precision
 * ------------------------------------------------------------------------------------------ */

static int64_t out_dim(int64_t in, int64_t k, int64_t s, int64_t lo, int64_t hi, int64_t d) {
  return (in + lo + hi - d * (k - 1) - 1) / s + 1;
}

/* y (as the layout orders it) of x and the weight at batch n, spatial h x w. */
static double *reference(const cfg *c, const rx_interp_arg *x, const rx_interp_arg *w, int64_t n,
                         int64_t h, int64_t wd, size_t *count) {
  int64_t oh = out_dim(h, c->kh, c->sh, c->pad[0], c->pad[2], c->dh);
  int64_t ow = out_dim(wd, c->kw, c->sw, c->pad[1], c->pad[3], c->dw);
  int64_t cg = c->c / c->groups, og = c->o / c->groups;
  *count = (size_t)(n * c->o * oh * ow);
  double *y = base_malloc(sizeof(double) * *count);
  for (int64_t b = 0; b < n; b++)
    for (int64_t o = 0; o < c->o; o++)
      for (int64_t p = 0; p < oh; p++)
        for (int64_t q = 0; q < ow; q++) {
          double acc = 0;
          for (int64_t ci = 0; ci < cg; ci++)
            for (int64_t i = 0; i < c->kh; i++)
              for (int64_t j = 0; j < c->kw; j++) {
                int64_t ih = p * c->sh - c->pad[0] + i * c->dh;
                int64_t iw = q * c->sw - c->pad[1] + j * c->dw;
                if (ih < 0 || ih >= h || iw < 0 || iw >= wd) continue;
                int64_t ch = o / og * cg + ci;
                size_t xi = c->nhwc ? (size_t)(((b * h + ih) * wd + iw) * c->c + ch)
                                    : (size_t)(((b * c->c + ch) * h + ih) * wd + iw);
                size_t wi = c->nhwc ? (size_t)(((i * c->kw + j) * cg + ci) * c->o + o)
                                    : (size_t)(((o * cg + ci) * c->kh + i) * c->kw + j);
                acc += rxk_load_elem(x->data, x->dtype, xi) * rxk_load_elem(w->data, w->dtype, wi);
              }
          size_t yi = c->nhwc ? (size_t)(((b * oh + p) * ow + q) * c->o + o)
                              : (size_t)(((b * c->o + o) * oh + p) * ow + q);
          y[yi] = acc;
        }
  return y;
}

/* Normalized error of y (the program's output) against want. */
static bool compare(const prog *p, const rxk_buffers *got, const double *want, size_t count,
                    char *msg, size_t n) {
  int yi = p->f->nparams - 1;
  RX_ASSERT(p->f->params[yi]->is_output);
  rx_dtype t = p->f->params[yi]->buf->dtype;
  double maxdiff = 0, maxref = 1;
  size_t at = 0;
  for (size_t k = 0; k < count; k++) {
    double d = fabs(rxk_load_elem(got->arg[yi].data, t, k) - want[k]);
    if (!(d <= maxdiff)) maxdiff = d, at = k;
    if (fabs(want[k]) > maxref) maxref = fabs(want[k]);
  }
  double tol = t == RX_DTYPE_F32 ? TOL_F32 : t == RX_DTYPE_BF16 ? TOL_BF16 : TOL_F16;
  double err = maxdiff / maxref;
  if (!(err <= tol)) {
    snprintf(msg, n, "normalized error %.3g > %.0e (element %zu: got %.6g, want %.6g)", err, tol,
             at, rxk_load_elem(got->arg[yi].data, t, at), want[at]);
    return false;
  }
  if (err > worst[t]) worst[t] = err;
  return true;
}

/* Counts the outcome of one run of the program's output against want. */
static void outcome(const prog *p, const char *where, const char *at, bool ran, const char *why,
                    const rxk_buffers *got, const double *want, size_t count) {
  char msg[512];
  if (!ran)
    rxk_fail(&st, "%s at %s: %s: %s", p->what, at, where, why);
  else if (!compare(p, got, want, count, msg, sizeof msg))
    rxk_fail(&st, "%s at %s: %s: %s", p->what, at, where, msg);
  else
    st.passed++;
}

/* One run at (n, h, w): the interpreter (both forms) when small, the emulator, Vulkan. */
static void run_at(const cfg *c, prog *p, const int64_t *nhw) {
  rxk_env e;
  rxk_buffers in, got;
  char why[512], at[64];
  snprintf(at, sizeof at, "n=%lld h=%lld w=%lld", (long long)nhw[0], (long long)nhw[1],
           (long long)nhw[2]);
  rxk_program_vars(p->f, &e);
  static const char *const names[] = {"n", "h", "w"};
  for (int i = 0; i < e.n; i++)
    for (int k = 0; k < 3; k++)
      if (!strcmp(e.vars[i]->name, names[k])) e.values[i] = nhw[k];
  if (!rxk_make_buffers(p->f, &e, &in, why, sizeof why)) {
    rxk_fail(&st, "%s: %s", p->what, why);
    return;
  }
  int64_t work = nhw[0] * c->o * c->c / c->groups * c->kh * c->kw *
                 out_dim(nhw[1], c->kh, c->sh, c->pad[0], c->pad[2], c->dh) *
                 out_dim(nhw[2], c->kw, c->sw, c->pad[1], c->pad[3], c->dw);
  if (work > work_cap) {
    st.skipped++;
    rxk_free_buffers(&in);
    return;
  }
  size_t count;
  double *want = reference(c, &in.arg[0], &in.arg[1], nhw[0], nhw[1], nhw[2], &count);
  bool small = work <= INTERP_WORK;
  for (int fr = 0; fr < 2; fr++) {
    if (!small || (fr && !rxk_has_frag_form(p->f))) {
      st.skipped++;
      continue;
    }
    rxk_copy_buffers(&in, &got);
    rx_interp_opts o = {.fragments = fr == 1};
    rx_status s = interp_run(p->m, p->f, got.arg, got.n, &o);
    outcome(p, fr ? "interpreter (fragments)" : "interpreter", at, !s,
            s ? rx_status_message(s) : "", &got, want, count);
    rx_status_free(s);
    rxk_free_buffers(&got);
  }
  for (int i = 0; i < NTARGETS; i++) {
    rxk_prepared *tp = &p->tp[i];
    if (!tp->ok || !tp->emulate) continue;
    rxk_copy_buffers(&in, &got);
    bool ran = rxk_run_simt(tp, &e, &got, why, sizeof why);
    outcome(p, tp->what, at, ran, why, &got, want, count);
    rxk_free_buffers(&got);
  }
  if (p->lib) {
    rxk_copy_buffers(&in, &got);
    rx_status s = rxk_rt_run(&vk, p->lib, p->f, &e, &got, 0, NULL);
    outcome(p, vk.target.name, at, !s, s ? rx_status_message(s) : "", &got, want, count);
    rx_status_free(s);
    rxk_free_buffers(&got);
  } else {
    st.skipped++;
  }
  free(want);
  rxk_free_buffers(&in);
}

#define F32  RX_DTYPE_F32
#define F16  RX_DTYPE_F16
#define BF16 RX_DTYPE_BF16

/* The cases (header comment); the large spatial sizes run only in the emulator and on Vulkan. */
// clang-format off
static const cfg cases[] = {
    /* 3 -> 5 channels, 3x3 pad 1, 7x7: channels far below a fragment */
    {F16, false, false, 3, 5, 3, 3, 1, 1, {1, 1, 1, 1}, 1, 1, 1, {{1, 7, 7}}},
    /* 1x1 kernel and 1x1 spatial, 64 channels */
    {F16, false, false, 64, 64, 1, 1, 1, 1, {0, 0, 0, 0}, 1, 1, 1, {{3, 1, 1}}},
    /* 5x5 with dilation 2, 13x11, 5 -> 17 */
    {F16, false, false, 5, 17, 5, 5, 1, 1, {4, 4, 4, 4}, 2, 2, 1, {{1, 13, 11}}},
    /* 7x7 stride 2 pad 3 (a ResNet stem), 3 -> 16 on 23x23 */
    {F16, false, false, 3, 16, 7, 7, 2, 2, {3, 3, 3, 3}, 1, 1, 1, {{1, 23, 23}}},
    /* groups 2, asymmetric padding */
    {F16, false, false, 6, 10, 3, 3, 1, 1, {1, 0, 2, 1}, 1, 1, 2, {{1, 7, 7}}},
    /* depthwise: the direct kernel only */
    {F16, false, false, 8, 8, 3, 3, 1, 1, {1, 1, 1, 1}, 1, 1, 8, {{1, 7, 7}}},
    /* symbolic batch and spatial dims, 17 -> 17 channels, 3x3 pad 1 */
    {F16, false, true, 17, 17, 3, 3, 1, 1, {1, 1, 1, 1}, 1, 1, 1, {{1, 7, 7}, {3, 13, 11}, {2, 28, 28}}},
    /* NHWC with groups 2, symbolic */
    {F16, true, true, 6, 10, 3, 3, 1, 1, {1, 1, 1, 1}, 1, 1, 2, {{1, 7, 7}, {3, 13, 11}}},
    /* NHWC 64 -> 64, 3x3, 28x28: the large case */
    {F16, true, false, 64, 64, 3, 3, 1, 1, {1, 1, 1, 1}, 1, 1, 1, {{2, 28, 28}}},
    {BF16, false, false, 5, 17, 3, 3, 1, 1, {1, 1, 1, 1}, 1, 1, 1, {{1, 7, 7}}},
    {BF16, true, true, 17, 5, 3, 3, 2, 2, {1, 1, 1, 1}, 1, 1, 1, {{1, 7, 7}, {3, 13, 11}}},
    /* f32: the direct kernel everywhere */
    {F32, false, true, 3, 17, 3, 3, 1, 1, {1, 1, 1, 1}, 1, 1, 1, {{1, 7, 7}, {3, 13, 11}}},
    {F32, true, false, 17, 64, 5, 5, 1, 1, {2, 2, 2, 2}, 2, 2, 1, {{1, 13, 11}}},
};
// clang-format on

int main(int argc, char **argv) {
  (void)argv;
  setvbuf(stdout, NULL, _IOLBF, 0);
  filter = argc > 2 ? argv[2] : getenv("RX_KERNEL_FILTER");
  if (getenv("RX_KERNEL_SIZES") && *getenv("RX_KERNEL_SIZES")) {
    work_cap = SANITIZED_WORK;
    printf("runs of more than %d multiply-adds skipped (RX_KERNEL_SIZES)\n", SANITIZED_WORK);
  }
  /* In a sanitized build the Vulkan tests run with the sanitizer runtime and lavapipe preloaded
   * (tests/CMakeLists.txt); the compilers the SIMT emulator starts must not inherit that. */
  unsetenv("LD_PRELOAD");
  rxk_rt_open(&vk, "vulkan:0");
  for (size_t i = 0; i < RX_ARRAY_LEN(cases); i++) {
    prog p;
    if (prog_build(&cases[i], &p))
      for (int r = 0; r < 4 && cases[i].runs[r][0]; r++) run_at(&cases[i], &p, cases[i].runs[r]);
    prog_free(&p);
  }
  char why[600];
  if (!rxk_rt_close(&vk, why, sizeof why)) rxk_fail(&st, "Vulkan: %s", why);
  printf("largest normalized errors: f32 %.2g, f16 %.2g, bf16 %.2g\n", worst[RX_DTYPE_F32],
         worst[RX_DTYPE_F16], worst[RX_DTYPE_BF16]);
  printf("conv: %d passed, %d failed, %d skipped\n", st.passed, st.failed, st.skipped);
  return st.failed ? 1 : 0;
}
