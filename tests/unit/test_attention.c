/* Attention as tensor programs (ops/attention.c), checked against naive references written
 * here in plain C (double precision, straight from the definitions of docs/ops.md and
 * docs/llm.md): dense `attention`, and over a paged KV cache `kv_append`, `paged_attention`,
 * `paged_decode_attention` and `attention_merge`.
 *
 * Each program is legalized from a one-op graph, then for every target (cuda sm_80 and sm_90,
 * vulkan-lavapipe, vulkan, metal-apple7) scheduled and generated: CUDA C compiled by NVRTC with
 * no spills in ptxas's report, GLSL through shaderc and spirv-val (support_pipeline.c). Every
 * case then runs (a) in the reference interpreter (the cases small enough for it), (b) as CUDA C
 * and as MSL in the SIMT emulator, (c) on Vulkan (lavapipe here) through the runtime under the
 * validation layer (support_runtime.c; any validation message fails the test), and each output
 * is compared with the reference.
 *
 * Cases: cache lengths 1, 7, 15, 16, 17, 33, 100 and 1000, several sequences of different lengths
 * in one call with shuffled, non-contiguous page ids (spare pages hold garbage that must not be
 * read), query counts 1, 7, 33 and 100 for paged_attention with query tiles that span two or more
 * sequences, GQA ratios 1, 2, 3, 4, 8 and 16, head dims 16, 64, 96 and 128, window 0, 5 and 37,
 * soft-capped scores (test_softcap),
 * f32, f16 and bf16 (GLSL keeps bf16 in 16-bit words and computes in f32), decode chunks of 256,
 * 128, 64, 32 and 16 keys (the CUDA decode kernel's cp.async stages at chunks and caches shorter
 * than its stages; it runs in the interpreter's second form and in the emulator, and must be the
 * kernel on exactly the targets with async_copy); kv_append at 1, 7, 33 and 100 tokens into
 * shuffled slots; attention_merge with empty chunks and rows of empty chunks only; dense attention
 * at s, t in {1, 7, 33, 100}, causal, with a mask, and with dv != d; dense attention with masks of
 * finfo.min (rows masked on every key give the uniform average, as PyTorch and ONNX Runtime do) and
 * of -inf (rows of -inf only are NaN).
 * paged_attention of f16 and bf16 holds three forms (ops/attention.c): FlashAttention-2 on mma.sync
 * (ops/attention_fa2.c), what CUDA sm_80 / sm_90 compile and the emulator runs, with its PTX
 * checked (mma.sync, ldmatrix, cp.async, shuffles, no local memory, no stack frame); the fragment
 * form (Metal, vulkan-nvidia); the portable one; the interpreter runs all three. test_prefill_fa2
 * adds packed batches of up to 1000 queries whose 64-row tiles span several sequences. With head
 * dims 64 and 128 a fourth form comes first: FlashAttention-3's structure on wgmma
 * (ops/attention_fa3.c), what CUDA sm_90 compiles instead of FA2 (test_prefill_fa3; the
 * interpreter runs it with rx_interp_opts.wgmma), its PTX checked the same way.
 * RX_KERNEL_SIZES (the sanitizer pass of CI sets 1,7,33) caps every cache length and query count at
 * its largest size.
 *
 * Tolerance, as normalized error max|got - want| / max(1, max|want|): f32 outputs 1e-5 (f32
 * accumulation over up to 1000 keys against double), f16 outputs 2e-3 (the output rounded once
 * to f16 is within 2^-11 relative; the inputs are the same f16 values in both), bf16 8e-3, lse
 * (f32) 1e-5. The largest errors seen are printed at the end.
 *
 * RX_ATTN_TIMES=1 prints the time of every emulated and Vulkan run.
 *
 * usage: test_attention TESTS_DIR [FILTER] */
/* test-needs: runtime */
#include "support_oneop.h"

#include "interp/interp.h"
#include "ops/legalize.h"
#include "targets/occupancy.h"
#include "targets/toolchain.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define PAGE        16   /* tokens per page of the KV cache (docs/llm.md) */
#define SPARE_PAGES 5    /* pages no sequence uses: garbage the kernels must not read */
#define TOL_F32     1e-5 /* see the header comment */
#define TOL_F16     2e-3
#define TOL_BF16    8e-3 /* bf16 keeps 8 bits: the output rounded once is within 2^-9 relative */
/* The interpreter runs the cases whose naive work (query rows x keys x head dim, over every
 * query head) is at most this: it executes every statement of every thread of the scheduled
 * program, about a million statements a second. */
#define INTERP_WORK 2000000

static rxk_stats st;
static rxk_backend vk = {.kind = RX_RT_BACKEND_VULKAN};
static const char *filter;
static int64_t size_cap = INT64_MAX;
static double worst[RX_DTYPE_COUNT]; /* the largest normalized error seen per output dtype */
/* run_case emulates only the targets with wgmma, no Vulkan (test_prefill_fa3's n = 1000: the other
 * forms run there in test_prefill_fa2, and Metal's takes minutes) */
static bool wgmma_only;

#define NTARGETS RXK_ONEOP_TARGETS

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static uint64_t rng = 0x9e3779b97f4a7c15ull; /* rxk_xorshift's state */

/* ------------------------------------------------------------------------------------------
 * programs: one op legalized, compiled for every target
 * ------------------------------------------------------------------------------------------ */

typedef rxk_oneop prog;

/* Does the program hold an `if` of target test `test` at the top of its body or in the else
 * branches of such `if`s (the nest of ops/attention.c's forms)? */
static bool has_test_in(const rx_stmt *b, rx_target_test test) {
  if (b && b->kind != RX_STMT_SEQ) {
    const rx_stmt *one[1] = {b};
    rx_stmt seq = {.kind = RX_STMT_SEQ, .body = (rx_stmt **)one, .n = 1};
    return has_test_in(&seq, test);
  }
  for (int i = 0; b && i < b->n; i++) {
    const rx_stmt *s = b->body[i];
    if (s->kind == RX_STMT_IF && s->value && s->value->kind == RX_TX_HAS_FRAG &&
        (s->value->test == test || has_test_in(s->otherwise, test)))
      return true;
  }
  return false;
}
/* The FlashAttention-2 form, `if has_mma(...)` (ops/attention_fa2.c)? */
static bool has_mma_form(const rx_tensor_fn *f) { return has_test_in(f->body, RX_TEST_MMA); }
/* The FlashAttention-3 form on wgmma, `if has_wgmma(...)` (ops/attention_fa3.c)? */
static bool has_wgmma_form(const rx_tensor_fn *f) { return has_test_in(f->body, RX_TEST_WGMMA); }

/* Does a kernel of tp hold all of the texts (NULL-ended)? */
static bool kernel_has(const rxk_prepared *tp, const char *const *texts) {
  for (int k = 0; k < tp->kl.n; k++) {
    bool all = true;
    for (int i = 0; texts[i]; i++) all &= strstr(tp->kl.kernels[k]->source, texts[i]) != NULL;
    if (all) return true;
  }
  return false;
}

/* A program with a matrix-unit form (ops/attention.c) compiles to it exactly on the targets
 * with those fragments: CUDA's fragment helpers, Metal's simdgroup matrices, GLSL's cooperative
 * matrices; the others keep the portable kernel. One with a cp.async form (decode attention)
 * compiles to it exactly on the targets with async_copy. */
static void check_form(const prog *p, const rxk_prepared *tp) {
  if (tp->ok && rxk_has_async_form(p->f)) { /* decode attention: cp.async exactly where it is */
    if (rxk_uses_async(tp) == tgt_target_has_async_copy(tp->t))
      st.passed++;
    else
      rxk_fail(&st, "%s: the kernel %s the cp.async form", tp->what,
               rxk_uses_async(tp) ? "is unexpectedly" : "is not");
  }
  if (!tp->ok || !rxk_has_frag_form(p->f)) return;
  rx_dtype t = p->f->params[0]->buf->dtype;
  bool wg = has_wgmma_form(p->f) && tgt_target_has_wgmma(tp->t, t, RX_DTYPE_F32, 64, 64, 16);
  bool mma =
      !wg && has_mma_form(p->f) && tgt_target_has_mma_sync(tp->t, t, RX_DTYPE_F32, 16, 8, 16);
  bool want = !mma && !wg &&
              (tgt_target_has_frag(tp->t, t, RX_DTYPE_F32, 16, 16, 16) ||
               tgt_target_has_frag(tp->t, t, RX_DTYPE_F32, 8, 8, 8));
  bool got = rxk_uses_frags(tp);
  if (got == want)
    st.passed++;
  else
    rxk_fail(&st, "%s: the kernel %s the matrix-unit form", tp->what,
             got ? "is unexpectedly" : "is not");
  /* the FlashAttention-2 form (ops/attention_fa2.c) on the targets with mma.sync m16n8k16 and
   * without wgmma; the FlashAttention-3 form (ops/attention_fa3.c: S by wgmma from shared, P V by
   * wgmma with P from registers and V MN-major) on those with wgmma */
  static const char *const fa2[] = {"rx_mma_16x8x16_", "__shfl_xor_sync", "rx_cp_async_16", NULL};
  static const char *const fa3[] = {"rx_wgmma_m64n64k16_", "f32_ra_tb(", "__shfl_xor_sync",
                                    "rx_cp_async_16", NULL};
  bool wgk = kernel_has(tp, fa3), sync = !wgk && kernel_has(tp, fa2);
  if (sync == mma)
    st.passed++;
  else
    rxk_fail(&st, "%s: the kernel %s the FlashAttention-2 form", tp->what,
             sync ? "is unexpectedly" : "is not");
  if (wgk == wg)
    st.passed++;
  else
    rxk_fail(&st, "%s: the kernel %s the FlashAttention-3 (wgmma) form", tp->what,
             wgk ? "is unexpectedly" : "is not");
}

/* Legalizes the op call of `main` in text and compiles its program for every target
 * (support_oneop.c), checking the matrix-unit form of each. */
static bool prog_build(prog *p, const char *text, const char *what) {
  if (!rxk_oneop_build(p, text, what, "attn", filter, &st, &vk)) return false;
  for (int i = 0; i < NTARGETS; i++) check_form(p, &p->tp[i]);
  return true;
}

static void prog_free(prog *p) { rxk_oneop_free(p); }

/* The program's symbolic variables at the given values (names[i] = values[i]) and random
 * inputs for them; false after counting a failure. */
static bool make_inputs(const prog *p, const char *const *names, const int64_t *values, int n,
                        rxk_env *e, rxk_buffers *in) {
  rxk_program_vars(p->f, e);
  for (int i = 0; i < e->n; i++)
    for (int k = 0; k < n; k++)
      if (!strcmp(e->vars[i]->name, names[k])) e->values[i] = values[k];
  char why[256];
  if (rxk_make_buffers(p->f, e, in, why, sizeof why)) return true;
  rxk_fail(&st, "%s: %s", p->what, why);
  return false;
}

/* Normalized error of every output against want (one array per output, in parameter order);
 * -inf matches only -inf, NaN only NaN. */
static bool compare(const prog *p, const rxk_buffers *got, double *const *want, char *msg,
                    size_t n) {
  int o = 0;
  for (int i = 0; i < p->f->nparams; i++) {
    const rx_param *pr = p->f->params[i];
    if (pr->kind != RX_PARAM_BUFFER || !pr->is_output) continue;
    const double *w = want[o++];
    rx_dtype t = pr->buf->dtype;
    size_t cnt = rxk_numel(&got->arg[i]), at = 0;
    double maxdiff = 0, maxref = 1;
    for (size_t k = 0; k < cnt; k++) {
      double g = rxk_load_elem(got->arg[i].data, t, k), d;
      if (isnan(g) || isnan(w[k]))
        d = isnan(g) && isnan(w[k]) ? 0 : INFINITY;
      else if (isinf(g) || isinf(w[k]))
        d = g == w[k] ? 0 : INFINITY;
      else
        d = fabs(g - w[k]);
      if (!(d <= maxdiff)) maxdiff = d, at = k;
      if (isfinite(w[k]) && fabs(w[k]) > maxref) maxref = fabs(w[k]);
    }
    double tol = t == RX_DTYPE_F32 ? TOL_F32 : t == RX_DTYPE_BF16 ? TOL_BF16 : TOL_F16;
    double err = maxdiff / maxref;
    if (!(err <= tol)) {
      snprintf(msg, n, "output %s: normalized error %.3g > %.0e (element %zu: got %.6g, want %.6g)",
               pr->buf->name, err, tol, at, rxk_load_elem(got->arg[i].data, t, at), w[at]);
      return false;
    }
    if (err > worst[t]) worst[t] = err;
  }
  return true;
}

/* Runs the program on `in` everywhere (the interpreter when `interp`, the SIMT emulator, Vulkan)
 * and compares the outputs with want. */
static void run_case(prog *p, const rxk_env *e, const rxk_buffers *in, double *const *want,
                     bool interp, const char *at) {
  char why[512];
  rxk_buffers got;
  /* the interpreter: the portable form, the matrix-unit (or cp.async) one where the program has
   * it, and the FlashAttention-2 one (mma.sync) where it has that */
  for (int fr = 0; fr < 1 + (rxk_has_frag_form(p->f) || rxk_has_async_form(p->f)) +
                            has_mma_form(p->f) + has_wgmma_form(p->f);
       fr++) {
    if (!interp) {
      st.skipped++;
      continue;
    }
    rxk_copy_buffers(in, &got);
    rx_interp_opts o = {.fragments = fr >= 1, .mma_sync = fr >= 2, .wgmma = fr == 3};
    rx_status s = interp_run(p->m, p->f, got.arg, got.n, &o);
    const char *form = fr == 3                    ? "interpreter (wgmma)"
                       : fr == 2                  ? "interpreter (mma.sync)"
                       : !fr                      ? "interpreter"
                       : rxk_has_async_form(p->f) ? "interpreter (cp.async form)"
                                                  : "interpreter (fragments)";
    if (s)
      rxk_fail(&st, "%s at %s: %s: %s", p->what, at, form, rx_status_message(s));
    else if (!compare(p, &got, want, why, sizeof why))
      rxk_fail(&st, "%s at %s: %s: %s", p->what, at, form, why);
    else
      st.passed++;
    rx_status_free(s);
    rxk_free_buffers(&got);
  }
  for (int i = 0; i < NTARGETS; i++) {
    rxk_prepared *tp = &p->tp[i];
    if (!tp->ok || !tp->emulate) continue;
    if (wgmma_only &&
        !tgt_target_has_wgmma(tp->t, p->f->params[0]->buf->dtype, RX_DTYPE_F32, 64, 64, 16)) {
      st.skipped++;
      continue;
    }
    rxk_copy_buffers(in, &got);
    double t0 = now_s();
    bool ran = rxk_run_simt(tp, e, &got, why, sizeof why);
    if (getenv("RX_ATTN_TIMES")) printf("    %s: %.1f s\n", tp->t->name, now_s() - t0);
    if (!ran)
      rxk_fail(&st, "%s at %s: %s", tp->what, at, why);
    else if (!compare(p, &got, want, why, sizeof why))
      rxk_fail(&st, "%s at %s: emulated %s: %s", tp->what, at,
               tp->t->kind == RX_TARGET_CUDA ? "CUDA C" : "MSL", why);
    else
      st.passed++;
    rxk_free_buffers(&got);
  }
  if (!p->lib || wgmma_only) {
    st.skipped++;
    return;
  }
  rxk_copy_buffers(in, &got);
  double t0 = now_s();
  rx_status s = rxk_rt_run(&vk, p->lib, p->f, e, &got, 0, NULL);
  if (getenv("RX_ATTN_TIMES")) printf("    Vulkan: %.1f s\n", now_s() - t0);
  if (s)
    rxk_fail(&st, "%s at %s: Vulkan: %s", p->what, at, rx_status_message(s));
  else if (!compare(p, &got, want, why, sizeof why))
    rxk_fail(&st, "%s at %s: Vulkan (%s): %s", p->what, at, vk.target.name, why);
  else
    st.passed++;
  rx_status_free(s);
  rxk_free_buffers(&got);
}

static int64_t cap(int64_t v) { return v < size_cap ? v : size_cap; }

/* ------------------------------------------------------------------------------------------
 * the paged KV cache: sequences, their pages, the references
 * ------------------------------------------------------------------------------------------ */

/* A call over the cache: per sequence its keys in the cache (new ones included) and how many of
 * them are new (the queries of paged_attention, at the last positions). */
typedef struct scene {
  int nseq;
  int kv[8];
  int nnew[8];
} scene;

/* The cache as the kernels see it, with its dims. */
typedef struct cache {
  int b, mp, p, kvh, d;
  rx_dtype t;
  int32_t *page_table; /* [b, mp] */
  int32_t *kv_len;     /* [b] */
  const void *pages;   /* [p, 2, kvh, 16, d] */
} cache;

static void scene_cap(scene *s) {
  for (int i = 0; i < s->nseq; i++) {
    s->kv[i] = (int)cap(s->kv[i]);
    if (s->nnew[i] > s->kv[i]) s->nnew[i] = s->kv[i];
  }
}

static int scene_tokens(const scene *s) {
  int n = 0;
  for (int i = 0; i < s->nseq; i++) n += s->nnew[i];
  return n;
}

/* Dims of the scene's cache: most pages per sequence, pages in the pool. */
static void scene_dims(const scene *s, int *mp, int *p) {
  *mp = 1;
  *p = SPARE_PAGES;
  for (int i = 0; i < s->nseq; i++) {
    int n = (s->kv[i] + PAGE - 1) / PAGE;
    if (n > *mp) *mp = n;
    *p += n;
  }
}

/* Deals the pool's pages, shuffled, to the sequences in order; unused entries 0. */
static void deal_pages(const scene *s, cache *c) {
  int32_t *perm = base_malloc(sizeof(int32_t) * (size_t)c->p);
  for (int i = 0; i < c->p; i++) perm[i] = i;
  for (int i = c->p - 1; i > 0; i--) {
    int j = (int)(rxk_xorshift(&rng) % (uint64_t)(i + 1));
    int32_t t = perm[i];
    perm[i] = perm[j];
    perm[j] = t;
  }
  memset(c->page_table, 0, sizeof(int32_t) * (size_t)(c->b * c->mp));
  int next = 0;
  for (int q = 0; q < s->nseq; q++) {
    c->kv_len[q] = s->kv[q];
    for (int i = 0; i < (s->kv[q] + PAGE - 1) / PAGE; i++)
      c->page_table[q * c->mp + i] = perm[next++];
  }
  free(perm);
}

/* Element d of the key (which 0) or value (1) at position j of sequence s, kv head h. */
static double kv_elem(const cache *c, int which, int s, int h, int j, int d) {
  int64_t pid = c->page_table[s * c->mp + j / PAGE];
  size_t at = (size_t)((((pid * 2 + which) * c->kvh + h) * PAGE + j % PAGE) * c->d + d);
  return rxk_load_elem(c->pages, c->t, at);
}

/* The soft-cap of the case under test (test_softcap; 0: none): scores tanh(s / c) * c. */
static double ref_softcap;

/* Softmax attention of query row q over keys lo..hi of sequence s, kv head h, into out[d];
 * returns the log-sum-exp of the scaled (and soft-capped) scores (-inf, with out 0, when there is
 * no key). */
static double ref_row(const cache *c, int s, int h, const double *q, int lo, int hi, double scale,
                      double *out) {
  memset(out, 0, sizeof(double) * (size_t)c->d);
  if (lo > hi) return -INFINITY;
  double *sc = base_malloc(sizeof(double) * (size_t)(hi - lo + 1)), m = -INFINITY, l = 0;
  for (int j = lo; j <= hi; j++) {
    double dot = 0;
    for (int d = 0; d < c->d; d++) dot += q[d] * kv_elem(c, 0, s, h, j, d);
    sc[j - lo] = dot * scale;
    if (ref_softcap > 0) sc[j - lo] = tanh(sc[j - lo] / ref_softcap) * ref_softcap;
    if (sc[j - lo] > m) m = sc[j - lo];
  }
  for (int j = lo; j <= hi; j++) {
    double w = exp(sc[j - lo] - m);
    l += w;
    for (int d = 0; d < c->d; d++) out[d] += w * kv_elem(c, 1, s, h, j, d);
  }
  for (int d = 0; d < c->d; d++) out[d] /= l;
  free(sc);
  return m + log(l);
}

/* Query row (token n, head h) of q [N, H, D] as doubles. */
static void q_row(const rx_interp_arg *q, int n, int h, double *out) {
  int64_t heads = q->shape[1], d = q->shape[2];
  for (int k = 0; k < d; k++)
    out[k] = rxk_load_elem(q->data, q->dtype, (size_t)((n * heads + h) * d + k));
}

/* A paged op's text: its graph over q [N or b, H, D] and the cache. */
typedef struct paged_cfg {
  int64_t d, heads, kvh, window, chunk;
  rx_dtype t;
} paged_cfg;

static double scale_of(const paged_cfg *c) { return 1.0 / sqrt((double)c->d); }

static void fill_cache(const prog *p, rxk_buffers *in, const scene *s, const paged_cfg *pc,
                       cache *c) {
  int mp, np;
  scene_dims(s, &mp, &np);
  *c = (cache){.b = s->nseq, .mp = mp, .p = np, .kvh = (int)pc->kvh, .d = (int)pc->d, .t = pc->t};
  c->page_table = rxk_oneop_named(p, in, "page_table")->data;
  c->kv_len = rxk_oneop_named(p, in, "kv_len")->data;
  c->pages = rxk_oneop_named(p, in, "pages")->data;
  deal_pages(s, c);
}

/* A scene's symbolic values (n: the query tokens, for paged_attention), random inputs and its
 * cache dealt into them; false after counting a failure. */
static bool scene_buffers(prog *p, const scene *s, const paged_cfg *pc, int n, rxk_env *e,
                          rxk_buffers *in, cache *c) {
  int mp, np;
  scene_dims(s, &mp, &np);
  static const char *const names[] = {"p", "b", "mp", "n"};
  int64_t values[] = {np, s->nseq, mp, n};
  if (!make_inputs(p, names, values, 4, e, in)) return false;
  fill_cache(p, in, s, pc, c);
  return true;
}

static int scene_max_kv(const scene *s) {
  int m = 0;
  for (int i = 0; i < s->nseq; i++) m = s->kv[i] > m ? s->kv[i] : m;
  return m;
}

/* ---- paged_attention ---- */

static void check_paged_scene(prog *p, const paged_cfg *pc, scene s) {
  scene_cap(&s);
  int n = scene_tokens(&s), maxkv = scene_max_kv(&s);
  rxk_env e;
  rxk_buffers in;
  cache c;
  char at[160];
  if (!scene_buffers(p, &s, pc, n, &e, &in, &c)) return;
  int32_t *qs = rxk_oneop_named(p, &in, "q_seq")->data,
          *qp = rxk_oneop_named(p, &in, "q_pos")->data;
  int r = 0;
  for (int q = 0; q < s.nseq; q++)
    for (int i = 0; i < s.nnew[q]; i++, r++) qs[r] = q, qp[r] = s.kv[q] - s.nnew[q] + i;
  /* the reference */
  const rx_interp_arg *qa = rxk_oneop_named(p, &in, "q");
  double *want = base_malloc(sizeof(double) * (size_t)(n * pc->heads * pc->d) + 1);
  double qrow[256];
  int64_t g = pc->heads / pc->kvh;
  for (int t = 0; t < n; t++) {
    int lo = pc->window > 0 && qp[t] - pc->window + 1 > 0 ? qp[t] - (int)pc->window + 1 : 0;
    int hi = qp[t] < c.kv_len[qs[t]] - 1 ? qp[t] : c.kv_len[qs[t]] - 1;
    for (int h = 0; h < pc->heads; h++) {
      q_row(qa, t, h, qrow);
      ref_row(&c, qs[t], (int)(h / g), qrow, lo, hi, scale_of(pc),
              want + (t * pc->heads + h) * pc->d);
    }
  }
  int len = snprintf(at, sizeof at, "n=%d, kv=", n);
  for (int q = 0; q < s.nseq; q++)
    len += snprintf(at + len, sizeof at - (size_t)len, "%s%d/%d", q ? "," : "", s.kv[q], s.nnew[q]);
  double *outs[1] = {want};
  double t0 = now_s();
  run_case(p, &e, &in, outs, (int64_t)n * pc->heads * maxkv * pc->d <= INTERP_WORK, at);
  printf("  %s: %.1f s\n", at, now_s() - t0);
  free(want);
  rxk_free_buffers(&in);
}

static const char *paged_text(const paged_cfg *c, const char *op, const char *extra) {
  static char text[1024];
  const char *t = ir_dtype_name(c->t);
  bool decode = !strcmp(op, "paged_decode_attention");
  snprintf(text, sizeof text,
           "graph_fn main(q: %s[%s, %lld, %lld], pages: %s[p, 2, %lld, %d, %lld], "
           "page_table: i32[b, mp], kv_len: i32[b]%s) {\n"
           "  y = %s(q, pages, page_table, kv_len%s, window=%lld%s)\n  return y\n}\n",
           t, decode ? "b" : "n", (long long)c->heads, (long long)c->d, t, (long long)c->kvh, PAGE,
           (long long)c->d, decode ? "" : ", q_seq: i32[n], q_pos: i32[n]", op,
           decode ? "" : ", q_seq, q_pos", (long long)c->window, extra);
  return text;
}

static void test_paged_attention(void) {
  static const paged_cfg cfgs[] = {
      {16, 2, 2, 0, 0, RX_DTYPE_F32},  {64, 4, 2, 5, 0, RX_DTYPE_F16},
      {128, 8, 2, 0, 0, RX_DTYPE_F32}, {128, 4, 1, 5, 0, RX_DTYPE_F16},
      {64, 4, 1, 0, 0, RX_DTYPE_F32},  {64, 4, 2, 0, 0, RX_DTYPE_BF16},
      {96, 6, 2, 0, 0, RX_DTYPE_F32}, /* a group of 3: tiles with rows left unused */
  };
  static const scene scenes[] = {
      {1, {1}, {1}},                             /* n = 1 */
      {2, {15, 17}, {3, 4}},                     /* n = 7: tiles over two sequences */
      {3, {16, 100, 1}, {16, 16, 1}},            /* n = 33: a whole prefill of 16 */
      {4, {1000, 17, 100, 15}, {60, 10, 25, 5}}, /* n = 100 */
      {5, {2, 3, 1, 16, 7}, {2, 1, 1, 3, 7}},    /* n = 14: five sequences in a tile */
  };
  for (size_t i = 0; i < RX_ARRAY_LEN(cfgs); i++) {
    char what[160];
    snprintf(what, sizeof what, "paged_attention %s d=%lld heads=%lld/%lld window=%lld",
             ir_dtype_name(cfgs[i].t), (long long)cfgs[i].d, (long long)cfgs[i].heads,
             (long long)cfgs[i].kvh, (long long)cfgs[i].window);
    prog p;
    if (prog_build(&p, paged_text(&cfgs[i], "paged_attention", ""), what))
      for (size_t k = 0; k < RX_ARRAY_LEN(scenes); k++) check_paged_scene(&p, &cfgs[i], scenes[k]);
    prog_free(&p);
  }
}

/* Prefill on matrix units (ops/attention.c, the fragment form: CUDA's 16x16 and Metal's 8x8 in
 * the emulator, the interpreter with fragments where the case is small; Vulkan/lavapipe runs
 * the portable form): one sequence of n new tokens after `cache` tokens already in the cache, n
 * in {1, 7, 33, 100, 1000} against cache in {0, 17, 1000}, f16, head dim 64. GQA, windows,
 * bf16, head dims 128 and several sequences per query tile go through the same forms in
 * test_paged_attention (its f16 and bf16 programs have them). */
static void test_prefill_matrix(void) {
  static const paged_cfg cfgs[] = {{64, 1, 1, 0, 0, RX_DTYPE_F16}};
  static const int ns[] = {1, 7, 33, 100, 1000}, caches[] = {0, 17, 1000};
  for (size_t i = 0; i < RX_ARRAY_LEN(cfgs); i++) {
    char what[160];
    snprintf(what, sizeof what, "prefill %s d=%lld heads=%lld/%lld", ir_dtype_name(cfgs[i].t),
             (long long)cfgs[i].d, (long long)cfgs[i].heads, (long long)cfgs[i].kvh);
    prog p;
    if (prog_build(&p, paged_text(&cfgs[i], "paged_attention", ""), what)) {
      if (!rxk_has_frag_form(p.f)) rxk_fail(&st, "%s: no matrix-unit form was legalized", what);
      int64_t done[RX_ARRAY_LEN(ns) * RX_ARRAY_LEN(caches)][2];
      size_t ndone = 0;
      for (size_t a = 0; a < RX_ARRAY_LEN(ns); a++)
        for (size_t c = 0; c < RX_ARRAY_LEN(caches); c++) {
          scene sc = {1, {caches[c] + ns[a]}, {ns[a]}};
          scene_cap(&sc); /* RX_KERNEL_SIZES: capped scenes that repeat run once */
          bool again = false;
          for (size_t k = 0; k < ndone; k++)
            again |= done[k][0] == sc.kv[0] && done[k][1] == sc.nnew[0];
          if (again) continue;
          done[ndone][0] = sc.kv[0];
          done[ndone++][1] = sc.nnew[0];
          check_paged_scene(&p, &cfgs[i], sc);
        }
    }
    prog_free(&p);
  }
}

/* The FlashAttention-2 form (ops/attention_fa2.c: CUDA sm_80 / sm_90 in the emulator, the
 * interpreter with mma_sync where the case is small; the other targets run their forms of the
 * same program): packed batches whose query tiles of 64 rows span several sequences, up to
 * n = 1000 queries, GQA 16 (4 tokens a tile) and 3 (21 tokens and one row unused), head dims
 * 16, 96 (12 chunks a row: the swizzle's rotation is not a power of two) and 128, a window,
 * f16 and bf16. */
/* The prefill kernel's PTX on the CUDA targets (NVRTC, ptxas -v): FA2 (fa3 false) on those
 * without wgmma: mma.sync m16n8k16 of its dtype, ldmatrix (plain for Q and K, .trans for V);
 * FA3 (fa3 true) on those with it: wgmma m64n64k16 of its dtype from shared (S = Q K^T) and with
 * A in registers and B MN-major (P V: `{%r..}, desc, p, 1, 1, 1`), its fence, commit and wait;
 * both: cp.async with its waits, the quad's shuffles (shfl.sync.bfly), 16-byte output stores, no
 * local memory (no ld.local / st.local, a stack frame of 0 bytes, no spills). Prints the
 * registers and shared memory ptxas reports; FA3's registers allow TGT_OCC_ATTN_FA3 blocks of
 * 256 threads an SM (tgt_occupancy_blocks). */
static void check_attn_ptx(const prog *p, rx_dtype t, bool fa3) {
  static const char *const want2[] = {NULL,
                                      "ldmatrix.sync.aligned.m8n8.x4.shared.b16",
                                      "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16",
                                      "cp.async.cg.shared.global",
                                      "cp.async.wait_group",
                                      "shfl.sync.bfly.b32",
                                      "st.global.v4"};
  static const char *const want3[] = {NULL,
                                      ", p, 1, 1, 0, 0;",
                                      ", p, 1, 1, 1;",
                                      "wgmma.fence.sync.aligned",
                                      "wgmma.commit_group.sync.aligned",
                                      "wgmma.wait_group.sync.aligned",
                                      "cp.async.cg.shared.global",
                                      "cp.async.wait_group",
                                      "shfl.sync.bfly.b32",
                                      "st.global.v4"};
  const char *const *want = fa3 ? want3 : want2;
  size_t nwant = fa3 ? RX_ARRAY_LEN(want3) : RX_ARRAY_LEN(want2);
  const char *form = fa3 ? "FA3" : "FA2";
  char mma[96];
  if (fa3)
    snprintf(mma, sizeof mma, "wgmma.mma_async.sync.aligned.m64n64k16.f32.%s.%s", ir_dtype_name(t),
             ir_dtype_name(t));
  else
    snprintf(mma, sizeof mma, "mma.sync.aligned.m16n8k16.row.col.f32.%s.%s.f32", ir_dtype_name(t),
             ir_dtype_name(t));
  for (int i = 0; i < NTARGETS; i++) {
    const rxk_prepared *tp = &p->tp[i];
    if (!tp->ok || tp->t->kind != RX_TARGET_CUDA ||
        fa3 != (has_wgmma_form(p->f) && tgt_target_has_wgmma(tp->t, t, RX_DTYPE_F32, 64, 64, 16)))
      continue;
    for (int k = 0; k < tp->kl.n; k++) {
      const rx_kernel *kn = tp->kl.kernels[k];
      char *ptx = NULL, *log = NULL;
      size_t len = 0;
      rx_status s =
          tgt_nvrtc_compile(kn->source, kn->name, tp->t->cuda_arch, false, &ptx, &len, &log);
      if (s) {
        if (rx_status_code_of(s) == RX_ERR_NOT_FOUND)
          st.skipped++;
        else
          rxk_fail(&st, "%s: NVRTC: %s", tp->what, rx_status_message(s));
        rx_status_free(s);
        free(ptx);
        free(log);
        continue;
      }
      for (size_t w = 0; w < nwant; w++) {
        const char *needle = w ? want[w] : mma;
        if (strstr(ptx, needle))
          st.passed++;
        else
          rxk_fail(&st, "%s: the %s kernel's PTX has no %s", tp->what, form, needle);
      }
      if (strstr(ptx, "ld.local") || strstr(ptx, "st.local"))
        rxk_fail(&st, "%s: the %s kernel's PTX uses local memory", tp->what, form);
      else
        st.passed++;
      rx_ptxas_info info;
      rx_status ps = tgt_ptxas_report(ptx, tp->t->cuda_arch, &info);
      if (rx_status_code_of(ps) == RX_ERR_NOT_FOUND) {
        st.skipped++;
      } else if (ps) {
        rxk_fail(&st, "%s: ptxas: %s", tp->what, rx_status_message(ps));
      } else {
        for (int f = 0; f < info.nfuncs; f++) {
          const rx_ptxas_func *fn = &info.funcs[f];
          if (!fn->entry) continue;
          /* ptxas counts static shared memory; FA3's is dynamic (kernels.json shared_dynamic) */
          int shared = fn->shared_bytes + (kn->shared_dynamic ? (int)kn->shared_bytes : 0);
          printf("  %s %s: %d registers, %d bytes shared%s, %d bytes stack, %d spill bytes\n", form,
                 tp->t->name, fn->registers, shared, kn->shared_dynamic ? " (dynamic)" : "",
                 fn->stack_bytes, fn->spill_stores + fn->spill_loads);
          if (fn->stack_bytes || fn->spill_stores || fn->spill_loads)
            rxk_fail(&st, "%s: the %s kernel has a stack frame of %d bytes", tp->what, form,
                     fn->stack_bytes);
          else
            st.passed++;
          if (!fa3) continue;
          const tgt_sm_limits *lim = tgt_sm_limits_of(tp->t->sm);
          int blocks = lim ? tgt_blocks_per_sm(lim, fn->registers, 256, shared) : 0;
          if (blocks < TGT_OCC_ATTN_FA3)
            rxk_fail(&st,
                     "%s: the FA3 kernel's %d registers and %d shared bytes let %d blocks of 256 "
                     "threads run per SM; it assumes %d",
                     tp->what, fn->registers, shared, blocks, TGT_OCC_ATTN_FA3);
          else
            st.passed++;
        }
        tgt_ptxas_info_free(&info);
      }
      rx_status_free(ps);
      free(ptx);
      free(log);
    }
  }
}

/* The prefill cases of FlashAttention-2 (fa3 false) or -3 (fa3 true) that test_prefill_fa2 and
 * test_prefill_fa3 list: each program has the form (has_mma_form / has_wgmma_form), its PTX
 * passes check_attn_ptx, and it runs every scene against the reference; the last scene (n = 1000)
 * for the first program only (the other targets' forms take minutes there), on sm_90 alone for
 * FA3 (wgmma_only). */
static void check_prefill_form(bool fa3, const paged_cfg *cfgs, size_t ncfgs, const scene *scenes,
                               size_t nscenes) {
  for (size_t i = 0; i < ncfgs; i++) {
    char what[160];
    snprintf(what, sizeof what, "prefill fa%d %s d=%lld heads=%lld/%lld window=%lld", fa3 ? 3 : 2,
             ir_dtype_name(cfgs[i].t), (long long)cfgs[i].d, (long long)cfgs[i].heads,
             (long long)cfgs[i].kvh, (long long)cfgs[i].window);
    prog p;
    if (prog_build(&p, paged_text(&cfgs[i], "paged_attention", ""), what)) {
      if (!(fa3 ? has_wgmma_form(p.f) : has_mma_form(p.f)))
        rxk_fail(&st, "%s: no FlashAttention-%d form was legalized", what, fa3 ? 3 : 2);
      check_attn_ptx(&p, cfgs[i].t, fa3);
      for (size_t k = 0; k < nscenes - (i > 0); k++) {
        wgmma_only = fa3 && k + 1 == nscenes; /* FA3's n = 1000: sm_90 alone */
        check_paged_scene(&p, &cfgs[i], scenes[k]);
        wgmma_only = false;
      }
    }
    prog_free(&p);
  }
}

static void test_prefill_fa2(void) {
  static const paged_cfg cfgs[] = {
      {128, 4, 1, 0, 0, RX_DTYPE_BF16},
      {96, 6, 2, 7, 0, RX_DTYPE_F16},
      {16, 16, 1, 0, 0, RX_DTYPE_F16},
  };
  static const scene scenes[] = {
      {1, {1}, {1}},                                         /* n = 1 */
      {2, {15, 17}, {3, 4}},                                 /* n = 7 */
      {6, {33, 1, 70, 16, 17, 100}, {33, 1, 20, 16, 9, 21}}, /* n = 100, 6 sequences */
      {3, {900, 300, 40}, {700, 270, 30}},                   /* n = 1000 (last) */
  };
  check_prefill_form(false, cfgs, RX_ARRAY_LEN(cfgs), scenes, RX_ARRAY_LEN(scenes));
  /* the PTX alone at the shapes of Llama 3 8B (GQA 4, d = 128) and Llama 2 7B (d = 128, no GQA)
   * and of a d = 64 model, f16: no spills, no local memory (the figures in docs/schedules.md) */
  static const paged_cfg llm[] = {
      {128, 32, 8, 0, 0, RX_DTYPE_F16},
      {128, 32, 32, 0, 0, RX_DTYPE_F16},
      {64, 16, 16, 0, 0, RX_DTYPE_F16},
  };
  for (size_t i = 0; i < RX_ARRAY_LEN(llm); i++) {
    char what[160];
    snprintf(what, sizeof what, "prefill fa2 ptx %s d=%lld heads=%lld/%lld",
             ir_dtype_name(llm[i].t), (long long)llm[i].d, (long long)llm[i].heads,
             (long long)llm[i].kvh);
    prog p;
    if (prog_build(&p, paged_text(&llm[i], "paged_attention", ""), what)) {
      check_attn_ptx(&p, llm[i].t, false);
      check_attn_ptx(&p, llm[i].t, true);
    }
    prog_free(&p);
  }
}

/* The FlashAttention-3 form on wgmma (ops/attention_fa3.c: CUDA sm_90 in the emulator, the
 * interpreter with wgmma where the case is small; sm_80 runs FA2, the other targets their forms
 * of the same program): head dims 64 and 128, GQA 1, 2, 3 (a tile of 42 tokens, two rows
 * unused), 4 and 8, f16 and bf16, windows 5 and 37, and packed batches whose 128-row tiles span
 * several sequences: n = 1, 7, 33, 100 (6 sequences) and 1000 (the first program, on sm_90
 * alone: the other targets' forms run n = 1000 in test_prefill_fa2). Its PTX: wgmma
 * in both forms, no local memory, the registers the occupancy assumes (check_attn_ptx). */
static void test_prefill_fa3(void) {
  static const paged_cfg cfgs[] = {
      {64, 2, 1, 0, 0, RX_DTYPE_F16},   {128, 4, 4, 0, 0, RX_DTYPE_BF16},
      {128, 6, 2, 37, 0, RX_DTYPE_F16}, {64, 8, 1, 5, 0, RX_DTYPE_BF16},
      {128, 16, 4, 0, 0, RX_DTYPE_F16},
  };
  static const scene scenes[] = {
      {1, {1}, {1}},                                         /* n = 1 */
      {2, {15, 17}, {3, 4}},                                 /* n = 7 */
      {3, {16, 100, 1}, {16, 16, 1}},                        /* n = 33 */
      {6, {33, 1, 70, 16, 17, 100}, {33, 1, 20, 16, 9, 21}}, /* n = 100, 6 sequences */
      {3, {900, 300, 40}, {700, 270, 30}},                   /* n = 1000 (last) */
  };
  check_prefill_form(true, cfgs, RX_ARRAY_LEN(cfgs), scenes, RX_ARRAY_LEN(scenes));
}

/* ---- paged_decode_attention and attention_merge ---- */

/* o [b, H, S, D], lse [b, H, S] of the chunks of the reference; also the merged rows [b, H, D]
 * straight from all keys (to check the merge). */
static void ref_decode(const cache *c, const rx_interp_arg *qa, const paged_cfg *pc, int chunks,
                       double *o, double *lse, double *full) {
  int64_t g = pc->heads / pc->kvh;
  double qrow[256];
  for (int s = 0; s < c->b; s++) {
    int hi = c->kv_len[s] - 1;
    int lo = pc->window > 0 && hi - pc->window + 1 > 0 ? hi - (int)pc->window + 1 : 0;
    for (int h = 0; h < pc->heads; h++) {
      q_row(qa, s, h, qrow);
      size_t row = (size_t)(s * pc->heads + h);
      ref_row(c, s, (int)(h / g), qrow, lo, hi, scale_of(pc), full + row * (size_t)pc->d);
      for (int k = 0; k < chunks; k++) {
        int clo = k * (int)pc->chunk, chi = clo + (int)pc->chunk - 1;
        lse[row * (size_t)chunks + (size_t)k] =
            ref_row(c, s, (int)(h / g), qrow, clo > lo ? clo : lo, chi < hi ? chi : hi,
                    scale_of(pc), o + (row * (size_t)chunks + (size_t)k) * (size_t)pc->d);
      }
    }
  }
}

/* The merge of chunks (o, lse) as docs/llm.md defines it, rows of d; all chunks empty: 0. */
static void ref_merge(const double *o, const double *lse, int rows, int chunks, int d,
                      double *out) {
  for (int r = 0; r < rows; r++) {
    double m = -INFINITY, den = 0;
    for (int k = 0; k < chunks; k++) m = lse[r * chunks + k] > m ? lse[r * chunks + k] : m;
    for (int x = 0; x < d; x++) out[r * d + x] = 0;
    if (m == -INFINITY) continue;
    for (int k = 0; k < chunks; k++) {
      double w = exp(lse[r * chunks + k] - m);
      den += w;
      for (int x = 0; x < d; x++) out[r * d + x] += w * o[(r * chunks + k) * d + x];
    }
    for (int x = 0; x < d; x++) out[r * d + x] /= den;
  }
}

static double max_abs_diff(const double *a, const double *b, size_t n) {
  double m = 0;
  for (size_t i = 0; i < n; i++) m = fabs(a[i] - b[i]) > m ? fabs(a[i] - b[i]) : m;
  return m;
}

static void check_decode_scene(prog *p, const paged_cfg *pc, scene s) {
  scene_cap(&s);
  int maxkv = scene_max_kv(&s);
  rxk_env e;
  rxk_buffers in;
  cache c;
  char at[160];
  if (!scene_buffers(p, &s, pc, 0, &e, &in, &c)) return;
  int chunks = (int)((c.mp * PAGE + pc->chunk - 1) / pc->chunk);
  size_t rows = (size_t)(s.nseq * pc->heads);
  double *o = base_malloc(sizeof(double) * rows * (size_t)(chunks * pc->d));
  double *lse = base_malloc(sizeof(double) * rows * (size_t)chunks);
  double *full = base_malloc(sizeof(double) * rows * (size_t)pc->d);
  double *merged = base_malloc(sizeof(double) * rows * (size_t)pc->d);
  ref_decode(&c, rxk_oneop_named(p, &in, "q"), pc, chunks, o, lse, full);
  /* the references agree with each other: merging the chunks gives attention over all keys */
  ref_merge(o, lse, (int)rows, chunks, (int)pc->d, merged);
  double gap = max_abs_diff(merged, full, rows * (size_t)pc->d);
  if (gap > 1e-12) rxk_fail(&st, "%s: the references disagree by %g", p->what, gap);
  int len = snprintf(at, sizeof at, "b=%d, chunks=%d, kv=", s.nseq, chunks);
  for (int q = 0; q < s.nseq; q++)
    len += snprintf(at + len, sizeof at - (size_t)len, "%s%d", q ? "," : "", s.kv[q]);
  double *outs[2] = {o, lse};
  run_case(p, &e, &in, outs, (int64_t)s.nseq * pc->heads * maxkv * pc->d <= INTERP_WORK, at);
  free(o);
  free(lse);
  free(full);
  free(merged);
  rxk_free_buffers(&in);
}

/* On the targets with async_copy the decode kernel serves a kv head's whole GQA group (up to 16
 * heads of 128 dims: every case here) in one block: KVH blocks along y, so each key and value
 * is read once per chunk. */
static void check_one_block_per_kv_head(const prog *p, const paged_cfg *pc) {
  for (int i = 0; i < NTARGETS; i++) {
    const rxk_prepared *tp = &p->tp[i];
    if (!tp->ok || !tgt_target_has_async_copy(tp->t)) continue;
    const rx_expr *g = tp->kl.n == 1 ? tp->kl.kernels[0]->grid[1] : NULL;
    if (g && rx_expr_is_const(g, pc->kvh))
      st.passed++;
    else
      rxk_fail(&st, "%s: %d kernel(s), blocks along y not the %lld kv heads", tp->what, tp->kl.n,
               (long long)pc->kvh);
  }
}

static void test_decode(void) {
  static const paged_cfg cfgs[] = {
      {64, 4, 1, 0, 256, RX_DTYPE_F16},
      {128, 8, 4, 0, 256, RX_DTYPE_F32},
      {16, 4, 2, 5, 32, RX_DTYPE_F32},
      {128, 8, 2, 0, 32, RX_DTYPE_F16},
      {128, 4, 2, 5, 64, RX_DTYPE_BF16},
      {128, 16, 1, 0, 256, RX_DTYPE_F16},  /* a group of 16: one block with cp.async (CUDA),
                                              two in the portable kernel */
      {64, 8, 2, 0, 16, RX_DTYPE_F16},     /* one tile per chunk: the cp.async prologue issues
                                              one tile of its three */
      {128, 8, 1, 37, 128, RX_DTYPE_BF16}, /* a group of 8; the window starts inside a tile and
                                              skips whole tiles of the chunk */
      {128, 4, 4, 0, 256, RX_DTYPE_F16},   /* no GQA: one row a block, its 8 lanes a key */
      {64, 6, 2, 0, 64, RX_DTYPE_F16},     /* a group of 3 in blocks of 4 rows */
  };
  static const scene scenes[] = {
      {6, {1, 15, 16, 17, 100, 1000}, {1, 1, 1, 1, 1, 1}},
      {1, {1000}, {1}},
      {3, {33, 7, 64}, {1, 1, 1}},
  };
  for (size_t i = 0; i < RX_ARRAY_LEN(cfgs); i++) {
    char what[160], extra[32];
    snprintf(what, sizeof what,
             "paged_decode_attention %s d=%lld heads=%lld/%lld window=%lld chunk=%lld",
             ir_dtype_name(cfgs[i].t), (long long)cfgs[i].d, (long long)cfgs[i].heads,
             (long long)cfgs[i].kvh, (long long)cfgs[i].window, (long long)cfgs[i].chunk);
    snprintf(extra, sizeof extra, ", chunk=%lld", (long long)cfgs[i].chunk);
    prog p;
    if (prog_build(&p, paged_text(&cfgs[i], "paged_decode_attention", extra), what)) {
      check_one_block_per_kv_head(&p, &cfgs[i]);
      for (size_t k = 0; k < RX_ARRAY_LEN(scenes); k++) check_decode_scene(&p, &cfgs[i], scenes[k]);
    }
    prog_free(&p);
  }
}

/* Soft-capped scores (Gemma 2's attn_logit_softcapping: softcap=c, the scores tanh(s / c) * c
 * before the softmax) in every form of the paged ops: f16 paged_attention at head dim 64 runs as
 * the FlashAttention-2 kernel on CUDA sm_80 and the FlashAttention-3 one on sm_90 (emulator), the
 * fragment form on Metal (emulator) and the portable kernel on Vulkan and in the interpreter; the
 * decode kernel with a window and a GQA group. A cap of 0.3, about the standard deviation of these
 * random inputs' scores, bends every row. */
static void test_softcap(void) {
  static const paged_cfg pre = {64, 4, 2, 5, 0, RX_DTYPE_F16},
                         dec = {64, 4, 2, 37, 32, RX_DTYPE_F16};
  static const scene scenes[] = {
      {1, {1}, {1}},                             /* n = 1 */
      {2, {15, 17}, {3, 4}},                     /* n = 7 */
      {3, {16, 100, 1}, {16, 16, 1}},            /* n = 33 */
      {4, {1000, 17, 100, 15}, {60, 10, 25, 5}}, /* n = 100 */
  };
  static const scene dscenes[] = {{6, {1, 15, 16, 17, 100, 1000}, {1, 1, 1, 1, 1, 1}}};
  ref_softcap = 0.3;
  prog p;
  if (prog_build(&p, paged_text(&pre, "paged_attention", ", softcap=0.3"),
                 "softcap paged_attention f16 d=64 heads=4/2 window=5")) {
    if (!has_mma_form(p.f)) rxk_fail(&st, "softcap: no FlashAttention-2 form was legalized");
    for (size_t k = 0; k < RX_ARRAY_LEN(scenes); k++) check_paged_scene(&p, &pre, scenes[k]);
  }
  prog_free(&p);
  if (prog_build(&p, paged_text(&dec, "paged_decode_attention", ", softcap=0.3, chunk=32"),
                 "softcap paged_decode_attention f16 d=64 heads=4/2 window=37 chunk=32"))
    for (size_t k = 0; k < RX_ARRAY_LEN(dscenes); k++) check_decode_scene(&p, &dec, dscenes[k]);
  prog_free(&p);
  ref_softcap = 0;
}

static void test_merge(void) {
  static const struct {
    int64_t d;
    rx_dtype t;
  } cfgs[] = {/* 16-byte loads of 4 columns per thread; 600: 150 groups, two steps of 128
                 threads; 30: not a multiple of 4, one column per thread */
              {64, RX_DTYPE_F32},
              {128, RX_DTYPE_F16},
              {200, RX_DTYPE_F32},
              {600, RX_DTYPE_F32},
              {30, RX_DTYPE_F16}};
  static const int64_t sizes[][3] = {{1, 1, 1}, {3, 4, 5}, {2, 8, 33}}; /* b, H, S */
  for (size_t i = 0; i < RX_ARRAY_LEN(cfgs); i++) {
    char text[512], what[96];
    snprintf(text, sizeof text,
             "graph_fn main(o: f32[b, h, s, %lld], lse: f32[b, h, s]) {\n"
             "  y = attention_merge(o, lse, dtype=%s)\n  return y\n}\n",
             (long long)cfgs[i].d, ir_dtype_name(cfgs[i].t));
    snprintf(what, sizeof what, "attention_merge %s d=%lld", ir_dtype_name(cfgs[i].t),
             (long long)cfgs[i].d);
    prog p;
    if (!prog_build(&p, text, what)) {
      prog_free(&p);
      continue;
    }
    for (size_t k = 0; k < RX_ARRAY_LEN(sizes); k++) {
      static const char *const names[] = {"b", "h", "s"};
      rxk_env e;
      rxk_buffers in;
      char at[96];
      if (!make_inputs(&p, names, sizes[k], 3, &e, &in)) continue;
      /* log-sum-exps in [-4, 4), every third chunk empty, and the first row all empty */
      rx_interp_arg *la = rxk_oneop_named(&p, &in, "lse"), *oa = rxk_oneop_named(&p, &in, "o");
      int rows = (int)(sizes[k][0] * sizes[k][1]), chunks = (int)sizes[k][2];
      float *lse = la->data;
      for (int x = 0; x < rows * chunks; x++)
        lse[x] = x < chunks || x % 3 == 2 ? -INFINITY : lse[x] * 4;
      double *ld = base_malloc(sizeof(double) * (size_t)(rows * chunks));
      double *od = base_malloc(sizeof(double) * rxk_numel(oa));
      double *want = base_malloc(sizeof(double) * (size_t)(rows * cfgs[i].d));
      for (int x = 0; x < rows * chunks; x++) ld[x] = lse[x];
      for (size_t x = 0; x < rxk_numel(oa); x++) od[x] = ((float *)oa->data)[x];
      ref_merge(od, ld, rows, chunks, (int)cfgs[i].d, want);
      snprintf(at, sizeof at, "b=%lld, h=%lld, s=%lld", (long long)sizes[k][0],
               (long long)sizes[k][1], (long long)sizes[k][2]);
      double *outs[1] = {want};
      run_case(&p, &e, &in, outs, true, at);
      free(ld);
      free(od);
      free(want);
      rxk_free_buffers(&in);
    }
    prog_free(&p);
  }
}

/* ---- kv_append ---- */

static void test_kv_append(void) {
  static const struct {
    int64_t kvh, d;
    rx_dtype t;
  } cfgs[] = {{2, 64, RX_DTYPE_F16}, {1, 16, RX_DTYPE_F32}, {8, 128, RX_DTYPE_F32}};
  static const int64_t tokens[] = {1, 7, 33, 100};
  for (size_t i = 0; i < RX_ARRAY_LEN(cfgs); i++) {
    char text[512], what[96];
    const char *t = ir_dtype_name(cfgs[i].t);
    snprintf(text, sizeof text,
             "graph_fn main(pages: %s[p, 2, %lld, %d, %lld], k: %s[n, %lld, %lld], "
             "v: %s[n, %lld, %lld], slot: i32[n]) {\n"
             "  y = kv_append(pages, k, v, slot)\n  return y\n}\n",
             t, (long long)cfgs[i].kvh, PAGE, (long long)cfgs[i].d, t, (long long)cfgs[i].kvh,
             (long long)cfgs[i].d, t, (long long)cfgs[i].kvh, (long long)cfgs[i].d);
    snprintf(what, sizeof what, "kv_append %s kvh=%lld d=%lld", t, (long long)cfgs[i].kvh,
             (long long)cfgs[i].d);
    prog p;
    if (!prog_build(&p, text, what)) {
      prog_free(&p);
      continue;
    }
    /* the program writes the cache in place: its parameters are k, v, slot and out pages */
    const rx_param *last = p.f->params[p.f->nparams - 1];
    if (p.f->nparams != 4 || !last->is_output || strcmp(last->buf->name, "pages") != 0)
      rxk_fail(&st, "%s: parameters are not (k, v, slot, out pages)", what);
    for (size_t k = 0; k < RX_ARRAY_LEN(tokens); k++) {
      int64_t n = cap(tokens[k]), np = (n + PAGE - 1) / PAGE + SPARE_PAGES;
      static const char *const names[] = {"n", "p"};
      int64_t values[] = {n, np};
      rxk_env e;
      rxk_buffers in;
      char at[64];
      if (!make_inputs(&p, names, values, 2, &e, &in)) continue;
      /* the cache before: random values; the slots: distinct, shuffled over the pool */
      rx_interp_arg *pa = rxk_oneop_named(&p, &in, "pages"), *ka = rxk_oneop_named(&p, &in, "k");
      rx_interp_arg *va = rxk_oneop_named(&p, &in, "v");
      int32_t *slot = rxk_oneop_named(&p, &in, "slot")->data;
      size_t cnt = rxk_numel(pa), es = (size_t)ir_dtype_bits(cfgs[i].t) / 8;
      for (size_t x = 0; x < cnt * es; x++)
        ((unsigned char *)pa->data)[x] = (unsigned char)(rxk_xorshift(&rng) >> 40) & 0x3f;
      rxk_shuffle_slots(slot, n, np * PAGE, &rng);
      double *want = base_malloc(sizeof(double) * cnt);
      for (size_t x = 0; x < cnt; x++) want[x] = rxk_load_elem(pa->data, cfgs[i].t, x);
      int64_t kvh = cfgs[i].kvh, d = cfgs[i].d;
      for (int64_t x = 0; x < n; x++)
        for (int64_t h = 0; h < kvh; h++)
          for (int64_t j = 0; j < d; j++)
            for (int w = 0; w < 2; w++) {
              int64_t pg = slot[x] / PAGE, off = slot[x] % PAGE;
              want[(((pg * 2 + w) * kvh + h) * PAGE + off) * d + j] =
                  rxk_load_elem((w ? va : ka)->data, cfgs[i].t, (size_t)((x * kvh + h) * d + j));
            }
      snprintf(at, sizeof at, "n=%lld, p=%lld", (long long)n, (long long)np);
      double *outs[1] = {want};
      run_case(&p, &e, &in, outs, true, at);
      free(want);
      rxk_free_buffers(&in);
    }
    prog_free(&p);
  }
}

/* ------------------------------------------------------------------------------------------
 * dense attention
 * ------------------------------------------------------------------------------------------ */

typedef struct dense_cfg {
  int64_t b, h, d, dv;
  rx_dtype t;
  bool causal;
  const char *mask; /* the mask's shape, or NULL */
} dense_cfg;

/* softmax(q k^T * scale + mask) v as docs/ops.md defines it (causal: key j visible to query i
 * iff j <= i + t - s; a row without visible key is NaN). */
static void ref_dense(const dense_cfg *c, int64_t s, int64_t t, const rx_interp_arg *q,
                      const rx_interp_arg *k, const rx_interp_arg *v, const rx_interp_arg *mask,
                      double *out) {
  double scale = 1.0 / sqrt((double)c->d), *sc = base_malloc(sizeof(double) * (size_t)(t + 1));
  for (int64_t bh = 0; bh < c->b * c->h; bh++)
    for (int64_t i = 0; i < s; i++) {
      double m = -INFINITY, l = 0;
      for (int64_t j = 0; j < t; j++) {
        double dot = 0;
        for (int64_t x = 0; x < c->d; x++)
          dot += rxk_load_elem(q->data, c->t, (size_t)((bh * s + i) * c->d + x)) *
                 rxk_load_elem(k->data, c->t, (size_t)((bh * t + j) * c->d + x));
        sc[j] = dot * scale;
        if (mask) { /* [s, t] or [b, 1, s, t]; the sum in f32, as PyTorch and ONNX Runtime add
                     * it: q k^T * scale + finfo.min is finfo.min on every key of the row */
          int64_t mb = mask->ndim == 4 ? bh / c->h : 0;
          sc[j] = (float)(sc[j] + rxk_load_elem(mask->data, c->t, (size_t)((mb * s + i) * t + j)));
        }
        if (c->causal && j > i + t - s) sc[j] = -INFINITY;
        if (sc[j] > m) m = sc[j];
      }
      for (int64_t j = 0; j < t; j++) l += sc[j] == -INFINITY ? 0 : exp(sc[j] - m);
      for (int64_t x = 0; x < c->dv; x++) {
        double acc = 0;
        for (int64_t j = 0; j < t; j++)
          if (sc[j] != -INFINITY)
            acc +=
                exp(sc[j] - m) * rxk_load_elem(v->data, c->t, (size_t)((bh * t + j) * c->dv + x));
        out[(bh * s + i) * c->dv + x] = acc / l;
      }
    }
  free(sc);
}

static void test_dense(void) {
  static const dense_cfg cfgs[] = {
      {1, 2, 16, 16, RX_DTYPE_F32, true, NULL},
      {2, 3, 8, 4, RX_DTYPE_F32, false, NULL},
      {2, 2, 64, 64, RX_DTYPE_F16, false, "2, 1, s, t"},
      {1, 2, 128, 128, RX_DTYPE_F32, true, "s, t"},
  };
  static const int64_t sizes[] = {1, 7, 33, 100};
  for (size_t i = 0; i < RX_ARRAY_LEN(cfgs); i++) {
    const dense_cfg *c = &cfgs[i];
    const char *t = ir_dtype_name(c->t);
    char text[768], what[160], mask[64] = "";
    if (c->mask) snprintf(mask, sizeof mask, ", mask: %s[%s]", t, c->mask);
    snprintf(text, sizeof text,
             "graph_fn main(q: %s[%lld, %lld, s, %lld], k: %s[%lld, %lld, t, %lld], "
             "v: %s[%lld, %lld, t, %lld]%s) {\n  y = attention(q, k, v%s, causal=%s)\n"
             "  return y\n}\n",
             t, (long long)c->b, (long long)c->h, (long long)c->d, t, (long long)c->b,
             (long long)c->h, (long long)c->d, t, (long long)c->b, (long long)c->h,
             (long long)c->dv, mask, c->mask ? ", mask" : "", c->causal ? "true" : "false");
    snprintf(what, sizeof what, "attention %s [%lld, %lld, s, %lld] dv=%lld%s%s%s", t,
             (long long)c->b, (long long)c->h, (long long)c->d, (long long)c->dv,
             c->causal ? " causal" : "", c->mask ? " mask " : "", c->mask ? c->mask : "");
    prog p;
    if (!prog_build(&p, text, what)) {
      prog_free(&p);
      continue;
    }
    for (size_t si = 0; si < RX_ARRAY_LEN(sizes); si++)
      for (size_t ti = 0; ti < RX_ARRAY_LEN(sizes); ti++) {
        int64_t s = cap(sizes[si]), tt = cap(sizes[ti]);
        if (c->causal && s > tt) continue; /* rows with no visible key are NaN by definition */
        static const char *const names[] = {"s", "t"};
        int64_t values[] = {s, tt};
        rxk_env e;
        rxk_buffers in;
        char at[64];
        if (!make_inputs(&p, names, values, 2, &e, &in)) continue;
        double *want = base_malloc(sizeof(double) * (size_t)(c->b * c->h * s * c->dv));
        ref_dense(c, s, tt, rxk_oneop_named(&p, &in, "q"), rxk_oneop_named(&p, &in, "k"),
                  rxk_oneop_named(&p, &in, "v"), c->mask ? rxk_oneop_named(&p, &in, "mask") : NULL,
                  want);
        snprintf(at, sizeof at, "s=%lld, t=%lld", (long long)s, (long long)tt);
        double *outs[1] = {want};
        run_case(&p, &e, &in, outs, c->b * c->h * s * tt * c->d <= INTERP_WORK, at);
        free(want);
        rxk_free_buffers(&in);
      }
    prog_free(&p);
  }
}

/* Stores the lowest finite value of dtype t (torch.finfo(t).min), or -inf when `inf`, as
 * element i of host data. */
static void store_low(void *data, rx_dtype t, size_t i, bool inf) {
  if (t == RX_DTYPE_F32)
    ((float *)data)[i] = inf ? -INFINITY : -FLT_MAX;
  else if (t == RX_DTYPE_BF16)
    ((uint16_t *)data)[i] = inf ? 0xff80 : 0xff7f;
  else if (t == RX_DTYPE_F16)
    ((uint16_t *)data)[i] = inf ? 0xfc00 : 0xfbff;
  else
    RX_ASSERT(!"a floating-point mask");
}

/* Masks as Hugging Face and torch's exporters make them (Where(mask, 0, finfo.min)): row i of
 * every [s, t] plane is, by i % 6, fully finfo.min (PyTorch and ONNX Runtime give the uniform
 * average of v: every score rounds to finfo.min in f32), finfo.min on odd keys, fully -inf
 * (NaN), -inf on the first half and finfo.min on the rest (uniform over the rest), finfo.min on
 * the first 16 keys only (the running max of the later tiles must drop the first), unchanged. */
static void hf_mask(rx_interp_arg *m, rx_dtype t) {
  int64_t s = m->shape[m->ndim - 2], tt = m->shape[m->ndim - 1];
  size_t planes = rxk_numel(m) / (size_t)(s * tt);
  for (size_t pl = 0; pl < planes; pl++)
    for (int64_t i = 0; i < s; i++)
      for (int64_t j = 0; j < tt; j++) {
        size_t at = (pl * (size_t)s + (size_t)i) * (size_t)tt + (size_t)j;
        switch (i % 6) {
        case 0:
          store_low(m->data, t, at, false);
          break;
        case 1:
          if (j % 2) store_low(m->data, t, at, false);
          break;
        case 2:
          store_low(m->data, t, at, true);
          break;
        case 3:
          store_low(m->data, t, at, j < tt / 2);
          break;
        case 4:
          if (j < 16) store_low(m->data, t, at, false);
          break;
        default:
          break;
        }
      }
}

/* Dense attention with masks of finfo.min and -inf rows (hf_mask) against ref_dense: uniform
 * rows where a row is all finfo.min, NaN where it is all -inf, as PyTorch gives. */
static void test_dense_low_mask(void) {
  static const dense_cfg cfgs[] = {
      {1, 2, 16, 16, RX_DTYPE_F32, false, "s, t"},
      {2, 1, 16, 16, RX_DTYPE_BF16, false, "2, 1, s, t"},
      {1, 1, 16, 16, RX_DTYPE_F16, false, "s, t"},
  };
  static const int64_t sizes[][2] = {{7, 7}, {7, 33}};
  for (size_t i = 0; i < RX_ARRAY_LEN(cfgs); i++) {
    const dense_cfg *c = &cfgs[i];
    const char *t = ir_dtype_name(c->t);
    char text[768], what[160];
    snprintf(text, sizeof text,
             "graph_fn main(q: %s[%lld, %lld, s, %lld], k: %s[%lld, %lld, t, %lld], "
             "v: %s[%lld, %lld, t, %lld], mask: %s[%s]) {\n  y = attention(q, k, v, mask)\n"
             "  return y\n}\n",
             t, (long long)c->b, (long long)c->h, (long long)c->d, t, (long long)c->b,
             (long long)c->h, (long long)c->d, t, (long long)c->b, (long long)c->h,
             (long long)c->dv, t, c->mask);
    snprintf(what, sizeof what, "attention %s [%lld, %lld, s, %lld] finfo.min mask %s", t,
             (long long)c->b, (long long)c->h, (long long)c->d, c->mask);
    prog p;
    if (!prog_build(&p, text, what)) {
      prog_free(&p);
      continue;
    }
    for (size_t si = 0; si < RX_ARRAY_LEN(sizes); si++) {
      static const char *const names[] = {"s", "t"};
      int64_t s = sizes[si][0], tt = sizes[si][1];
      rxk_env e;
      rxk_buffers in;
      char at[64];
      if (!make_inputs(&p, names, sizes[si], 2, &e, &in)) continue;
      rx_interp_arg *mask = rxk_oneop_named(&p, &in, "mask");
      hf_mask(mask, c->t);
      double *want = base_malloc(sizeof(double) * (size_t)(c->b * c->h * s * c->dv));
      ref_dense(c, s, tt, rxk_oneop_named(&p, &in, "q"), rxk_oneop_named(&p, &in, "k"),
                rxk_oneop_named(&p, &in, "v"), mask, want);
      snprintf(at, sizeof at, "s=%lld, t=%lld", (long long)s, (long long)tt);
      double *outs[1] = {want};
      run_case(&p, &e, &in, outs, true, at);
      free(want);
      rxk_free_buffers(&in);
    }
    prog_free(&p);
  }
}

int main(int argc, char **argv) {
  rxk_oneop_main_begin(argc, argv, &filter, &vk);
  if (getenv("RX_KERNEL_SIZES") && *getenv("RX_KERNEL_SIZES")) {
    size_cap = 0;
    for (size_t i = 0; i < rxk_size_count(); i++)
      if (rxk_size_at(i) > size_cap) size_cap = rxk_size_at(i);
    printf("cache lengths and query counts capped at %lld (RX_KERNEL_SIZES)\n",
           (long long)size_cap);
  }
  test_kv_append();
  test_merge();
  test_paged_attention();
  test_prefill_matrix();
  test_prefill_fa2();
  test_prefill_fa3();
  test_decode();
  test_softcap();
  test_dense();
  test_dense_low_mask();
  printf("largest normalized errors: f32 %.2g, f16 %.2g, bf16 %.2g\n", worst[RX_DTYPE_F32],
         worst[RX_DTYPE_F16], worst[RX_DTYPE_BF16]);
  return rxk_oneop_main_end(&st, &vk, "attention");
}
