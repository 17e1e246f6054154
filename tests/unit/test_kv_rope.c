/* kv_append_rope (ops/kv_rope.c), checked against a naive reference written here in plain C
 * (double precision, from docs/ops.md: kv_append of rope(reshape(k)) and reshape(v)): the new
 * keys rotated (rotate_half with cos and sin at each token) and the values written into a paged
 * KV cache at shuffled, non-contiguous slots, in place (every other slot keeps its value); the keys
 * and values read at column offsets of wider rows (k_offset, v_offset: the fused q/k/v
 * projection's rows, where q's heads come first).
 *
 * The program is legalized from a one-op graph, then for every target (cuda sm_80 and sm_90,
 * vulkan-lavapipe, vulkan, metal-apple7, vulkan-nvidia) scheduled and generated (support_oneop.c:
 * NVRTC, shaderc and spirv-val where present); every case then runs in the reference
 * interpreter, as CUDA C and MSL in the SIMT emulator, and on Vulkan (lavapipe here) under the
 * validation layer, and the whole cache is compared with the reference.
 *
 * Cases: 1, 7, 33 and 100 tokens; (kv heads, head dim) (2, 64), (1, 16), (8, 128) (1024
 * elements a token: eight per thread) and (3, 96) (288: a partial last step); f16, f32, bf16;
 * rows of the keys' and values' width and rows of (H + 2 KVH) * D with the keys and values after
 * H = 2 KVH query heads (as the fused projection's rows) or in other places.
 * Tolerance, as normalized error max|got - want| / max(1, max|want|): f32 1e-5, f16 2e-3 (the
 * value is the f32 math rounded once to f16: within 2^-11 relative), bf16 8e-3 (2^-9); the
 * values (v, and the slots not written) must come back exactly, which these bounds include.
 *
 * usage: test_kv_rope TESTS_DIR [FILTER] */
/* test-needs: runtime */
#include "support_oneop.h"

#include "interp/interp.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PAGE        16 /* tokens per page of the KV cache (docs/llm.md) */
#define SPARE_PAGES 3  /* pages no token goes to: their contents must stay as they are */
#define TOL_F32     1e-5
#define TOL_F16     2e-3
#define TOL_BF16    8e-3

static rxk_stats st;
static rxk_backend vk = {.kind = RX_RT_BACKEND_VULKAN};
static const char *filter;

static uint64_t rng = 0x2545f4914f6cdd1dull;
static uint64_t next_rand(void) {
  rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
  return rng;
}

static rx_interp_arg *param(const rxk_oneop *p, rxk_buffers *b, const char *name) {
  for (int i = 0; i < p->f->nparams; i++)
    if (p->f->params[i]->kind == RX_PARAM_BUFFER && !strcmp(p->f->params[i]->buf->name, name))
      return &b->arg[i];
  RX_ASSERT(!"no such parameter");
  return NULL;
}

static size_t count_of(const rx_interp_arg *a) {
  size_t n = 1;
  for (int d = 0; d < a->ndim; d++) n *= (size_t)a->shape[d];
  return n;
}

/* The normalized error of the pages in got against want; false with a message past the
 * tolerance of dtype t. */
static bool compare(const rx_interp_arg *got, rx_dtype t, const double *want, char *msg, size_t n) {
  size_t cnt = count_of(got), at = 0;
  double maxdiff = 0, maxref = 1;
  for (size_t k = 0; k < cnt; k++) {
    double d = fabs(rxk_load_elem(got->data, t, k) - want[k]);
    if (!(d <= maxdiff)) maxdiff = d, at = k;
    if (fabs(want[k]) > maxref) maxref = fabs(want[k]);
  }
  double tol = t == RX_DTYPE_F32 ? TOL_F32 : t == RX_DTYPE_BF16 ? TOL_BF16 : TOL_F16;
  if (maxdiff / maxref <= tol) return true;
  snprintf(msg, n, "pages: normalized error %.3g > %.0e (element %zu: got %.6g, want %.6g)",
           maxdiff / maxref, tol, at, rxk_load_elem(got->data, t, at), want[at]);
  return false;
}

/* Runs the program on `in` in the interpreter, the SIMT emulator and on Vulkan, and compares
 * the pages with want. */
static void run_case(rxk_oneop *p, const rxk_env *e, const rxk_buffers *in, const double *want,
                     rx_dtype t, const char *at) {
  char why[512];
  rxk_buffers got;
  int pi = p->f->nparams - 1; /* out pages */
  rxk_copy_buffers(in, &got);
  rx_interp_opts o = {.fragments = false};
  rx_status s = interp_run(p->m, p->f, got.arg, got.n, &o);
  if (s)
    rxk_fail(&st, "%s at %s: interpreter: %s", p->what, at, rx_status_message(s));
  else if (!compare(&got.arg[pi], t, want, why, sizeof why))
    rxk_fail(&st, "%s at %s: interpreter: %s", p->what, at, why);
  else
    st.passed++;
  rx_status_free(s);
  rxk_free_buffers(&got);
  for (int i = 0; i < RXK_ONEOP_TARGETS; i++) {
    rxk_prepared *tp = &p->tp[i];
    if (!tp->ok || !tp->emulate) continue;
    rxk_copy_buffers(in, &got);
    if (!rxk_run_simt(tp, e, &got, why, sizeof why))
      rxk_fail(&st, "%s at %s: %s", tp->what, at, why);
    else if (!compare(&got.arg[pi], t, want, why, sizeof why))
      rxk_fail(&st, "%s at %s: emulated %s: %s", tp->what, at,
               tp->t->kind == RX_TARGET_CUDA ? "CUDA C" : "MSL", why);
    else
      st.passed++;
    rxk_free_buffers(&got);
  }
  if (!p->lib) {
    st.skipped++;
    return;
  }
  rxk_copy_buffers(in, &got);
  s = rxk_rt_run(&vk, p->lib, p->f, e, &got, 0, NULL);
  if (s)
    rxk_fail(&st, "%s at %s: Vulkan: %s", p->what, at, rx_status_message(s));
  else if (!compare(&got.arg[pi], t, want, why, sizeof why))
    rxk_fail(&st, "%s at %s: Vulkan (%s): %s", p->what, at, vk.target.name, why);
  else
    st.passed++;
  rx_status_free(s);
  rxk_free_buffers(&got);
}

/* The cache after the call: the cache before, with each token's rotated keys and values at its
 * slot. */
static void reference(rxk_buffers *in, const rxk_oneop *p, rx_dtype t, int64_t n, int64_t kvh,
                      int64_t d, int64_t width, int64_t koff, int64_t voff, double *want) {
  rx_interp_arg *pa = param(p, in, "pages"), *ka = param(p, in, "k"), *va = param(p, in, "v");
  rx_interp_arg *ca = param(p, in, "cs"), *sa = param(p, in, "sn");
  const int32_t *slot = param(p, in, "slot")->data;
  size_t cnt = count_of(pa);
  for (size_t x = 0; x < cnt; x++) want[x] = rxk_load_elem(pa->data, t, x);
  for (int64_t x = 0; x < n; x++)
    for (int64_t h = 0; h < kvh; h++)
      for (int64_t j = 0; j < d; j++) {
        size_t row = (size_t)(x * width), e = (size_t)(h * d + j);
        double kv = rxk_load_elem(ka->data, t, row + (size_t)koff + e);
        double partner = rxk_load_elem(ka->data, t, row + (size_t)(koff + h * d + (j + d / 2) % d));
        double rot = j < d / 2 ? -partner : partner;
        double c = rxk_load_elem(ca->data, t, (size_t)(x * d + j));
        double s = rxk_load_elem(sa->data, t, (size_t)(x * d + j));
        int64_t pg = slot[x] / PAGE, off = slot[x] % PAGE;
        for (int w = 0; w < 2; w++)
          want[(((pg * 2 + w) * kvh + h) * PAGE + off) * d + j] =
              w ? rxk_load_elem(va->data, t, row + (size_t)voff + e) : kv * c + rot * s;
      }
}

static void test_kv_append_rope(void) {
  /* rows of width (w times KVH * D), the keys from column ko, the values from vo (in KVH * D) */
  static const struct {
    int64_t kvh, d;
    rx_dtype t;
    int64_t w, ko, vo;
  } cfgs[] = {{2, 64, RX_DTYPE_F16, 1, 0, 0},  {1, 16, RX_DTYPE_F32, 1, 0, 0},
              {8, 128, RX_DTYPE_F32, 1, 0, 0}, {3, 96, RX_DTYPE_BF16, 1, 0, 0},
              {2, 64, RX_DTYPE_F16, 4, 2, 3},  {3, 96, RX_DTYPE_F32, 4, 2, 3},
              {1, 16, RX_DTYPE_BF16, 3, 1, 0}};
  static const int64_t tokens[] = {1, 7, 33, 100};
  for (size_t i = 0; i < RX_ARRAY_LEN(cfgs); i++) {
    char text[640], what[128];
    const char *t = ir_dtype_name(cfgs[i].t);
    long long kvh = (long long)cfgs[i].kvh, d = (long long)cfgs[i].d, w = cfgs[i].w * kvh * d;
    long long ko = cfgs[i].ko * kvh * d, vo = cfgs[i].vo * kvh * d;
    snprintf(text, sizeof text,
             "graph_fn main(pages: %s[p, 2, %lld, %d, %lld], k: %s[n, %lld], v: %s[n, %lld], "
             "slot: i32[n], cs: %s[n, %lld], sn: %s[n, %lld]) {\n"
             "  y = kv_append_rope(pages, k, v, slot, cs, sn, k_offset=%lld, v_offset=%lld)\n"
             "  return y\n}\n",
             t, kvh, PAGE, d, t, w, t, w, t, d, t, d, ko, vo);
    snprintf(what, sizeof what, "kv_append_rope %s kvh=%lld d=%lld row=%lld k@%lld v@%lld", t, kvh,
             d, w, ko, vo);
    rxk_oneop p;
    if (!rxk_oneop_build(&p, text, what, "kv_append_rope", filter, &st, &vk)) {
      rxk_oneop_free(&p);
      continue;
    }
    /* in place: the program's parameters are k, v, slot, cs, sn and out pages */
    const rx_param *last = p.f->params[p.f->nparams - 1];
    if (p.f->nparams != 6 || !last->is_output || strcmp(last->buf->name, "pages") != 0)
      rxk_fail(&st, "%s: parameters are not (k, v, slot, cs, sn, out pages)", what);
    for (size_t k = 0; k < RX_ARRAY_LEN(tokens); k++) {
      int64_t n = tokens[k], np = (n + PAGE - 1) / PAGE + SPARE_PAGES;
      rxk_env e;
      rxk_buffers in;
      rxk_program_vars(p.f, &e);
      for (int v = 0; v < e.n; v++) e.values[v] = !strcmp(e.vars[v]->name, "n") ? n : np;
      char why[256], at[64];
      if (!rxk_make_buffers(p.f, &e, &in, why, sizeof why)) {
        rxk_fail(&st, "%s: %s", what, why);
        continue;
      }
      /* the slots: distinct, shuffled over the whole pool */
      int32_t *slot = param(&p, &in, "slot")->data;
      int64_t nslots = np * PAGE;
      int32_t *perm = base_malloc(sizeof(int32_t) * (size_t)nslots);
      for (int64_t x = 0; x < nslots; x++) perm[x] = (int32_t)x;
      for (int64_t x = nslots - 1; x > 0; x--) {
        int64_t y = (int64_t)(next_rand() % (uint64_t)(x + 1));
        int32_t tmp = perm[x];
        perm[x] = perm[y];
        perm[y] = tmp;
      }
      for (int64_t x = 0; x < n; x++) slot[x] = perm[x];
      double *want = base_malloc(sizeof(double) * count_of(param(&p, &in, "pages")));
      reference(&in, &p, cfgs[i].t, n, cfgs[i].kvh, cfgs[i].d, w, ko, vo, want);
      snprintf(at, sizeof at, "n=%lld, p=%lld", (long long)n, (long long)np);
      run_case(&p, &e, &in, want, cfgs[i].t, at);
      free(perm);
      free(want);
      rxk_free_buffers(&in);
    }
    rxk_oneop_free(&p);
  }
}

int main(int argc, char **argv) {
  (void)argv;
  setvbuf(stdout, NULL, _IOLBF, 0);
  filter = argc > 2 ? argv[2] : getenv("RX_KERNEL_FILTER");
  /* In a sanitized build the Vulkan tests run with the sanitizer runtime and lavapipe preloaded
   * (tests/CMakeLists.txt); the compilers the SIMT emulator starts must not inherit that. */
  unsetenv("LD_PRELOAD");
  rxk_rt_open(&vk, "vulkan:0");
  test_kv_append_rope();
  char why[600];
  if (!rxk_rt_close(&vk, why, sizeof why)) rxk_fail(&st, "Vulkan: %s", why);
  printf("kv_append_rope: %d passed, %d failed, %d skipped\n", st.passed, st.failed, st.skipped);
  return st.failed ? 1 : 0;
}
