/* The Mixture-of-Experts ops (ops/moe.c; docs/ops.md "Mixture of experts"): moe_group, the
 * grouped GEMM moe_matmul and the gathered-expert GEMV moe_gemv, each legalized from a one-op
 * graph with the token count n symbolic, then for every target (cuda sm_80 and sm_90,
 * vulkan-lavapipe, vulkan, metal-apple7, vulkan-nvidia) scheduled and generated (NVRTC with no
 * spills, shaderc + spirv-val where present: support_pipeline.c), and run (a) in the reference
 * interpreter (n <= 7; both forms of moe_matmul: the portable one and, f16 and bf16, the
 * matrix-unit one, with rx_interp_opts.fragments), (b) as CUDA C and as MSL in the SIMT emulator,
 * (c) on Vulkan (lavapipe here) through the runtime under the validation layer. Every output is
 * compared with a reference computed here and with the interpreter's output:
 *
 *   moe_group: indptr and order exactly equal to a stable sort of the (token, slot) pairs by
 *     (expert, pair index) with qsort (not a counting sort, so not the kernel's algorithm);
 *   moe_matmul / moe_gemv: a double-precision product of x and the weight dequantized by a plain
 *     C loop written from each format's definition (q4f16_g32: nibble - 8 times the group's f16
 *     scale; GGUF Q4_0: block_q4_0 {f16 d; u8 qs[16]}, element j < 16 the low nibble of qs[j],
 *     else the high nibble of qs[j - 16], minus 8, times d), gated ones rounded as the op says
 *     (gate and up to T, silu(gate) to T).
 *
 * Routing: each token's k experts distinct (as topk gives them), drawn from the experts that are
 * not 1 mod 3 (so experts 1, 4, 7, ... get no token: empty groups) unless k needs them all.
 * Cases: n in {1, 7, 33, 100} (1000 for the plain f16 forms; moe_group 1000 and 4099), E in {4,
 * 8, 60}, k in {1, 2, 4, 8}, N and K not multiples of the tiles (72, 200, 144; K 72, 96, 64), f16,
 * bf16, f32, q4f16_g32 and Q4_0 weights, gathered and gated forms, i32 and i64 expert ids.
 *
 * The token counts stop at the largest of RX_KERNEL_SIZES (support_kernels.h; CI's sanitized pass:
 * 33).
 *
 * Tolerance, as normalized error max|got - want| / max(1, max|want|): exact for the integer
 * outputs of moe_group; f32 outputs 1e-5 (f32 accumulation over K <= 96 against double); f16
 * and bf16 outputs 2e-3 and 8e-3 (one rounding of the output, 2^-11 and 2^-8 relative, and in the
 * gated form one more of gate and up: the reference rounds them too, from a double sum, so a
 * tie may round the other way: one more unit).
 *
 * moe_matmul's matrix-unit form on CUDA sm_80: its PTX (NVRTC) has mma.sync m16n8k16 and no local
 * memory. The emulator's coalescing figures of the CUDA kernels at a decode-like shape are
 * printed, and moe_gemv's (f16 and q4f16_g32 weights) must reach 90% (test_coalescing's bar).
 *
 * Bad input: wrong dtypes, ranks and sizes give errors naming the op and the operand; an expert
 * id outside 0 .. E - 1 fails the call at run time with a message naming it.
 *
 * usage: test_moe TESTS_DIR [FILTER] */
/* test-needs: runtime */
#include "support_oneop.h"

#include "base/quant.h"
#include "interp/interp.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TOL_F32  1e-5 /* see the header comment */
#define TOL_F16  2e-3
#define TOL_BF16 8e-3
#define MAX_E    60 /* the most experts of a case */
/* The interpreter runs the products up to this many tokens (slow, serial). */
#define INTERP_MAX_N 7

static rxk_stats st;
static rxk_backend vk = {.kind = RX_RT_BACKEND_VULKAN};
static const char *filter;
static uint64_t rng = 0x2545F4914F6CDD1Dull;
static double worst[RX_DTYPE_COUNT];

typedef rxk_oneop prog;

/* One output of a program against a want array. */
typedef struct out_want {
  int param; /* its buffer parameter's index (the call's arguments, then the outputs) */
  double *v;
} out_want;

static double tol_of(rx_dtype t) {
  return t == RX_DTYPE_F16    ? TOL_F16
         : t == RX_DTYPE_BF16 ? TOL_BF16
         : t == RX_DTYPE_F32  ? TOL_F32
                              : 0;
}

/* Normalized error of output o of got against want; false with a message. */
static bool compare(const prog *p, rxk_buffers *got, const out_want *o, const double *want,
                    char *msg, size_t n) {
  rx_interp_arg *a = rxk_oneop_param(p, got, o->param);
  size_t cnt = rxk_numel(a), at = 0;
  double maxdiff = 0, maxref = 1;
  for (size_t k = 0; k < cnt; k++) {
    double g = rxk_load_elem(a->data, a->dtype, k);
    double d = isfinite(g) ? fabs(g - want[k]) : INFINITY;
    if (!(d <= maxdiff)) maxdiff = d, at = k;
    if (fabs(want[k]) > maxref) maxref = fabs(want[k]);
  }
  double tol = tol_of(a->dtype), err = maxdiff / maxref;
  if (!(err <= tol)) {
    snprintf(msg, n, "output %d: normalized error %.3g > %.0e (element %zu: got %.6g, want %.6g)",
             o->param, err, tol, at, cnt ? rxk_load_elem(a->data, a->dtype, at) : 0.0,
             cnt ? want[at] : 0.0);
    return false;
  }
  if (err > worst[a->dtype]) worst[a->dtype] = err;
  return true;
}

/* Checks every output of got (from `where`) against the reference and the interpreter's. */
static void check(const prog *p, rxk_buffers *got, const out_want *outs, int nouts,
                  double *const *oracle, const char *where, const char *at) {
  char why[512];
  for (int i = 0; i < nouts; i++) {
    if (!compare(p, got, &outs[i], outs[i].v, why, sizeof why)) {
      rxk_fail(&st, "%s at %s: %s against the reference: %s", p->what, at, where, why);
      return;
    }
    if (oracle && !compare(p, got, &outs[i], oracle[i], why, sizeof why)) {
      rxk_fail(&st, "%s at %s: %s against the interpreter: %s", p->what, at, where, why);
      return;
    }
  }
  st.passed++;
}

/* Runs p on `in` in the interpreter (when interp), the SIMT emulator and on Vulkan. */
static void run_case(prog *p, const rxk_env *e, const rxk_buffers *in, const out_want *outs,
                     int nouts, bool interp, const char *at) {
  char why[512];
  rxk_buffers got;
  double *oracle[4] = {NULL};
  bool have_oracle = false;
  if (interp) {
    rxk_copy_buffers(in, &got);
    rx_status s = interp_run(p->m, p->f, got.arg, got.n, NULL);
    if (s) {
      rxk_fail(&st, "%s at %s: interpreter: %s", p->what, at, rx_status_message(s));
    } else {
      check(p, &got, outs, nouts, NULL, "interpreter", at);
      for (int i = 0; i < nouts; i++) {
        rx_interp_arg *a = rxk_oneop_param(p, &got, outs[i].param);
        size_t cnt = rxk_numel(a);
        oracle[i] = base_malloc(sizeof(double) * (cnt ? cnt : 1));
        for (size_t k = 0; k < cnt; k++) oracle[i][k] = rxk_load_elem(a->data, a->dtype, k);
      }
      have_oracle = true;
    }
    rx_status_free(s);
    rxk_free_buffers(&got);
    if (rxk_has_frag_form(p->f)) { /* the matrix-unit form too */
      rx_interp_opts o = {.fragments = true};
      rxk_copy_buffers(in, &got);
      s = interp_run(p->m, p->f, got.arg, got.n, &o);
      if (s)
        rxk_fail(&st, "%s at %s: interpreter (fragments): %s", p->what, at, rx_status_message(s));
      else
        check(p, &got, outs, nouts, NULL, "interpreter (fragments)", at);
      rx_status_free(s);
      rxk_free_buffers(&got);
    }
  }
  for (int i = 0; i < RXK_ONEOP_TARGETS; i++) {
    rxk_prepared *tp = &p->tp[i];
    if (!tp->ok || !tp->emulate) continue;
    rxk_copy_buffers(in, &got);
    if (!rxk_run_simt(tp, e, &got, why, sizeof why))
      rxk_fail(&st, "%s at %s: %s", tp->what, at, why);
    else
      check(p, &got, outs, nouts, have_oracle ? oracle : NULL,
            tp->t->kind == RX_TARGET_CUDA ? "emulated CUDA C" : "emulated MSL", at);
    rxk_free_buffers(&got);
  }
  if (p->lib) {
    rxk_copy_buffers(in, &got);
    rx_status s = rxk_rt_run(&vk, p->lib, p->f, e, &got, 0, NULL);
    if (s)
      rxk_fail(&st, "%s at %s: Vulkan: %s", p->what, at, rx_status_message(s));
    else
      check(p, &got, outs, nouts, have_oracle ? oracle : NULL, vk.target.name, at);
    rx_status_free(s);
    rxk_free_buffers(&got);
  } else {
    st.skipped++;
  }
  for (int i = 0; i < nouts; i++) free(oracle[i]);
}

/* The largest token count the run takes: the largest of support_kernels' sizes (RX_KERNEL_SIZES:
 * the sanitized pass of CI runs 1, 7 and 33 only). */
static int64_t max_tokens(void) {
  int64_t m = 1;
  for (size_t i = 0; i < rxk_size_count(); i++)
    if (rxk_size_at(i) > m) m = rxk_size_at(i);
  return m;
}

/* Binds n (the tokens) and nk (their (token, slot) pairs, n k) and makes random buffers. */
static bool make_inputs(prog *p, int64_t n, int64_t k, rxk_env *e, rxk_buffers *in) {
  rxk_program_vars(p->f, e);
  for (int i = 0; i < e->n; i++) e->values[i] = !strcmp(e->vars[i]->name, "nk") ? n * k : n;
  char why[256];
  if (!rxk_make_buffers(p->f, e, in, why, sizeof why)) {
    rxk_fail(&st, "%s: %s", p->what, why);
    return false;
  }
  return true;
}

/* ------------------------------------------------------------------------------------------
 * routing and its reference grouping
 * ------------------------------------------------------------------------------------------ */

/* ex[t k + s]: token t's k distinct experts, from those not 1 mod 3 unless k needs them all. */
static void make_routing(int64_t n, int k, int E, int32_t *ex) {
  int pool[MAX_E], np = 0;
  for (int e = 0; e < E; e++)
    if (e % 3 != 1) pool[np++] = e;
  if (np < k)
    for (int e = np = 0; e < E; e++) pool[np++] = e;
  for (int64_t t = 0; t < n; t++) {
    int c[MAX_E];
    memcpy(c, pool, sizeof(int) * (size_t)np);
    for (int s = 0; s < k; s++) { /* a partial Fisher-Yates draw */
      int j = s + (int)(rxk_xorshift(&rng) % (uint64_t)(np - s));
      int tmp = c[s];
      c[s] = c[j], c[j] = tmp;
      ex[t * k + s] = c[s];
    }
  }
}

static const int32_t *sort_ids; /* the ids qsort's comparison reads */
static int by_expert(const void *a, const void *b) {
  int32_t pa = *(const int32_t *)a, pb = *(const int32_t *)b;
  if (sort_ids[pa] != sort_ids[pb]) return sort_ids[pa] < sort_ids[pb] ? -1 : 1;
  return pa < pb ? -1 : pa > pb;
}

/* The pairs sorted by (expert, pair), and indptr from the sorted ids. */
static void ref_group(const int32_t *ex, int64_t nk, int E, int32_t *indptr, int32_t *order) {
  for (int64_t p = 0; p < nk; p++) order[p] = (int32_t)p;
  sort_ids = ex;
  qsort(order, (size_t)nk, sizeof *order, by_expert);
  for (int e = 0, j = 0; e <= E; e++) {
    while (j < nk && ex[order[j]] < e) j++;
    indptr[e] = j;
  }
}

/* Stores ids into a buffer of i32 or i64. */
static void store_ids(rx_interp_arg *a, const int32_t *ids, int64_t cnt) {
  for (int64_t i = 0; i < cnt; i++)
    if (a->dtype == RX_DTYPE_I64)
      ((int64_t *)a->data)[i] = ids[i];
    else
      ((int32_t *)a->data)[i] = ids[i];
}

/* ------------------------------------------------------------------------------------------
 * moe_group
 * ------------------------------------------------------------------------------------------ */

static void test_group(void) {
  static const struct {
    int E, k;
    rx_dtype idt;
  } cfgs[] = {{4, 1, RX_DTYPE_I32}, {8, 2, RX_DTYPE_I64}, {60, 8, RX_DTYPE_I32}};
  static const int64_t ns[] = {1, 7, 33, 100, 1000, 4099};
  for (size_t ci = 0; ci < RX_ARRAY_LEN(cfgs); ci++) {
    int E = cfgs[ci].E, k = cfgs[ci].k;
    char text[512], what[128];
    snprintf(text, sizeof text,
             "graph_fn main(ex: %s[n, %d]) {\n  g = moe_group(ex, num_experts=%d)\n"
             "  return g\n}\n",
             ir_dtype_name(cfgs[ci].idt), k, E);
    snprintf(what, sizeof what, "moe_group %s[n, %d] E=%d", ir_dtype_name(cfgs[ci].idt), k, E);
    prog p;
    if (!rxk_oneop_build(&p, text, what, "prog", filter, &st, &vk)) {
      rxk_oneop_free(&p);
      continue;
    }
    for (size_t ni = 0; ni < RX_ARRAY_LEN(ns) && ns[ni] <= max_tokens(); ni++) {
      int64_t n = ns[ni], nk = n * k;
      rxk_env e;
      rxk_buffers in;
      if (!make_inputs(&p, n, k, &e, &in)) continue;
      int32_t *ex = base_malloc(sizeof(int32_t) * (size_t)nk), indptr[MAX_E + 1];
      int32_t *order = base_malloc(sizeof(int32_t) * (size_t)nk);
      make_routing(n, k, E, ex);
      store_ids(rxk_oneop_param(&p, &in, 0), ex, nk);
      ref_group(ex, nk, E, indptr, order);
      double *wi = base_malloc(sizeof(double) * (size_t)(E + 1));
      double *wo = base_malloc(sizeof(double) * (size_t)nk);
      for (int i = 0; i <= E; i++) wi[i] = indptr[i];
      for (int64_t i = 0; i < nk; i++) wo[i] = order[i];
      out_want outs[2] = {{1, wi}, {2, wo}};
      char at[64];
      snprintf(at, sizeof at, "n=%lld", (long long)n);
      run_case(&p, &e, &in, outs, 2, true, at);
      free(ex);
      free(order);
      free(wi);
      free(wo);
      rxk_free_buffers(&in);
    }
    rxk_oneop_free(&p);
  }
}

/* ------------------------------------------------------------------------------------------
 * moe_matmul and moe_gemv
 * ------------------------------------------------------------------------------------------ */

typedef struct prod_cfg {
  bool gemv;          /* moe_gemv (else moe_matmul) */
  rx_dtype t;         /* x's dtype, the output's */
  const char *scheme; /* NULL: w of dtype t */
  int E, k, N, K;     /* N: w's rows (2F when gated) */
  bool gathered, gated;
  rx_dtype idt; /* moe_gemv's expert ids */
} prod_cfg;

/* w's element (e, j, r) in double from the buffers of argument 1 (and 2: the scales). */
static double weight_at(const prod_cfg *c, const rx_quant_info *qi, rxk_buffers *in, const prog *p,
                        int64_t e, int64_t j, int64_t r) {
  rx_interp_arg *w = rxk_oneop_param(p, in, 1);
  int64_t row = e * c->N + j;
  if (!qi) return rxk_load_elem(w->data, w->dtype, (size_t)(row * c->K + r));
  const uint8_t *b = w->data;
  if (qi->kind == RX_QUANT_GGUF) { /* Q4_0 */
    int64_t bpr = c->K / 32 * 18;
    const uint8_t *blk = b + row * bpr + r / 32 * 18;
    double d = base_f16_to_f32((uint16_t)(blk[0] | blk[1] << 8));
    int o = (int)(r % 32), q = o < 16 ? blk[2 + o] & 15 : blk[2 + o - 16] >> 4;
    return d * (q - 8);
  }
  rx_interp_arg *s = rxk_oneop_param(p, in, 2);
  int byte = b[row * (c->K / 2) + r / 2], q = r % 2 ? byte >> 4 : byte & 15;
  return base_f16_to_f32(((const uint16_t *)s->data)[row * (c->K / 32) + r / 32]) * (q - 8);
}

/* v rounded to dtype t. */
static double round_to(rx_dtype t, double v) {
  if (t == RX_DTYPE_F16) return base_f16_to_f32(base_f32_to_f16((float)v));
  if (t == RX_DTYPE_BF16) return base_bf16_to_f32(base_f32_to_bf16((float)v));
  return (float)v;
}

/* y [n k, F] from x, w and the routing ex. */
static void ref_product(const prod_cfg *c, const rx_quant_info *qi, const prog *p, rxk_buffers *in,
                        const int32_t *ex, int64_t n, double *y) {
  rx_interp_arg *x = rxk_oneop_param(p, in, 0);
  int F = c->gated ? c->N / 2 : c->N;
  for (int64_t pr = 0; pr < n * c->k; pr++) {
    int64_t row = c->gathered ? pr : pr / c->k, e = ex[pr];
    for (int j = 0; j < F; j++) {
      double a = 0, u = 0;
      for (int r = 0; r < c->K; r++) {
        double xv = rxk_load_elem(x->data, x->dtype, (size_t)(row * c->K + r));
        a += xv * weight_at(c, qi, in, p, e, j, r);
        if (c->gated) u += xv * weight_at(c, qi, in, p, e, F + j, r);
      }
      if (c->gated) {
        double g = round_to(c->t, a);
        a = round_to(c->t, g / (1 + exp(-g))) * round_to(c->t, u);
      }
      y[pr * F + j] = a;
    }
  }
}

/* The quantized weight's buffers: random nibbles, f16 scales (and Q4_0's d) in [0.02, 0.1). */
static void fill_weights(const prod_cfg *c, const rx_quant_info *qi, const prog *p,
                         rxk_buffers *in) {
  if (!qi) return;
  rx_interp_arg *w = rxk_oneop_param(p, in, 1);
  uint8_t *b = w->data;
  size_t nbytes = rxk_numel(w);
  for (size_t i = 0; i < nbytes; i++) b[i] = (uint8_t)rxk_xorshift(&rng);
  if (qi->kind == RX_QUANT_GGUF) {
    for (size_t blk = 0; blk < nbytes / 18; blk++) {
      uint16_t d = base_f32_to_f16(0.02f + (float)(rxk_xorshift(&rng) % 1000) * 8e-5f);
      b[blk * 18] = (uint8_t)(d & 255), b[blk * 18 + 1] = (uint8_t)(d >> 8);
    }
    return;
  }
  rx_interp_arg *s = rxk_oneop_param(p, in, 2);
  for (size_t i = 0; i < rxk_numel(s); i++)
    ((uint16_t *)s->data)[i] = base_f32_to_f16(0.02f + (float)(rxk_xorshift(&rng) % 1000) * 8e-5f);
  (void)c;
}

/* The one-op graph of a product case. */
static void prod_text(const prod_cfg *c, const rx_quant_info *qi, char *text, size_t n, char *what,
                      size_t wn) {
  const char *t = ir_dtype_name(c->t);
  char xrows[32], odrows[32], wbufs[200], args[64] = "w", attrs[128] = "";
  /* moe_matmul's gathered x and order have nk = n k rows (no parameter has n alone) */
  snprintf(xrows, sizeof xrows, c->gathered ? (c->gemv ? "n * %d" : "nk") : "n", c->k);
  snprintf(odrows, sizeof odrows, "n * %d", c->k);
  if (!qi) {
    snprintf(wbufs, sizeof wbufs, "w: %s[%d, %d, %d]", t, c->E, c->N, c->K);
  } else if (qi->kind == RX_QUANT_GGUF) {
    snprintf(wbufs, sizeof wbufs, "w: u8[%d, %d, %d]", c->E, c->N,
             c->K / qi->block * qi->block_bytes);
  } else {
    snprintf(wbufs, sizeof wbufs, "w: u8[%d, %d, %d], s: f16[%d, %d, %d]", c->E, c->N, c->K / 2,
             c->E, c->N, c->K / qi->block);
    snprintf(args, sizeof args, "w, s");
  }
  size_t al = 0;
  if (qi) al += (size_t)snprintf(attrs + al, sizeof attrs - al, ", scheme=\"%s\"", qi->name);
  if (c->gathered) al += (size_t)snprintf(attrs + al, sizeof attrs - al, ", gathered=true");
  if (c->gated) snprintf(attrs + al, sizeof attrs - al, ", gated=true");
  if (c->gemv)
    snprintf(text, n,
             "graph_fn main(x: %s[%s, %d], %s, ex: %s[n, %d]) {\n"
             "  y = moe_gemv(x, %s, ex%s)\n  return y\n}\n",
             t, xrows, c->K, wbufs, ir_dtype_name(c->idt), c->k, args, attrs);
  else
    snprintf(text, n,
             "graph_fn main(x: %s[%s, %d], %s, ip: i32[%d], od: i32[%s]) {\n"
             "  y = moe_matmul(x, %s, ip, od, top_k=%d%s)\n  return y\n}\n",
             t, xrows, c->K, wbufs, c->E + 1, c->gathered ? "nk" : odrows, args, c->k, attrs);
  snprintf(what, wn, "%s %s w=%s E=%d k=%d N=%d K=%d%s%s", c->gemv ? "moe_gemv" : "moe_matmul", t,
           qi ? qi->name : t, c->E, c->k, c->N, c->K, c->gathered ? " gathered" : "",
           c->gated ? " gated" : "");
}

/* The PTX (NVRTC, sm_80) of a matrix-unit form: mma.sync present, no local memory. */
static void check_ptx(prog *p) {
  rxk_prepared *tp = &p->tp[0];
  for (int i = 0; tp->ok && i < tp->kl.n; i++) {
    char *ptx = rxk_nvrtc_ptx(tp, tp->kl.kernels[i], &st);
    if (!ptx) continue; /* counted: no NVRTC (skipped) or its failure */
    bool mma = strstr(ptx, "mma.sync.aligned.m16n8k16") != NULL;
    bool local = strstr(ptx, ".local") != NULL;
    if (!mma || local)
      rxk_fail(&st, "%s: PTX of %s: %s", tp->what, tp->kl.kernels[i]->name,
               !mma ? "no mma.sync.aligned.m16n8k16" : "local memory (.local)");
    else
      st.passed++;
    free(ptx);
  }
}

static void run_product(const prod_cfg *c, const int64_t *ns, int nn) {
  const rx_quant_info *qi = NULL;
  rx_quant_scheme sc;
  if (c->scheme) {
    RX_ASSERT(base_quant_lookup(c->scheme, &sc));
    qi = base_quant_info_of(sc);
  }
  char text[1024], what[200];
  prod_text(c, qi, text, sizeof text, what, sizeof what);
  prog p;
  if (!rxk_oneop_build(&p, text, what, "prog", filter, &st, &vk)) {
    rxk_oneop_free(&p);
    return;
  }
  if (!c->gemv && (c->t == RX_DTYPE_F16 || c->t == RX_DTYPE_BF16)) check_ptx(&p);
  int nin = 2 + (qi ? base_quant_nbuffers(sc) - 1 : 0) + (c->gemv ? 1 : 2);
  int F = c->gated ? c->N / 2 : c->N;
  for (int ni = 0; ni < nn && ns[ni] <= max_tokens(); ni++) {
    int64_t n = ns[ni], nk = n * c->k;
    rxk_env e;
    rxk_buffers in;
    if (!make_inputs(&p, n, c->k, &e, &in)) continue;
    fill_weights(c, qi, &p, &in);
    int32_t *ex = base_malloc(sizeof(int32_t) * (size_t)nk), indptr[MAX_E + 1];
    int32_t *order = base_malloc(sizeof(int32_t) * (size_t)nk);
    make_routing(n, c->k, c->E, ex);
    if (c->gemv) {
      store_ids(rxk_oneop_param(&p, &in, nin - 1), ex, nk);
    } else {
      ref_group(ex, nk, c->E, indptr, order);
      store_ids(rxk_oneop_param(&p, &in, nin - 2), indptr, c->E + 1);
      store_ids(rxk_oneop_param(&p, &in, nin - 1), order, nk);
    }
    double *want = base_malloc(sizeof(double) * (size_t)(nk * F));
    ref_product(c, qi, &p, &in, ex, n, want);
    out_want outs[1] = {{nin, want}};
    char at[64];
    snprintf(at, sizeof at, "n=%lld", (long long)n);
    run_case(&p, &e, &in, outs, 1, n <= INTERP_MAX_N, at);
    free(ex);
    free(order);
    free(want);
    rxk_free_buffers(&in);
  }
  rxk_oneop_free(&p);
}

static void test_products(void) {
  static const int64_t ns[] = {1, 7, 33, 100, 1000}, small[] = {1, 7, 33, 100};
  const rx_dtype f16 = RX_DTYPE_F16, bf16 = RX_DTYPE_BF16, f32 = RX_DTYPE_F32;
  const rx_dtype i32 = RX_DTYPE_I32, i64 = RX_DTYPE_I64;
  const prod_cfg cfgs[] = {
      /* gemv, t, scheme, E, k, N, K, gathered, gated, ids */
      {false, f16, NULL, 8, 2, 200, 72, false, false, i32},
      {false, bf16, NULL, 4, 1, 144, 72, false, true, i32},
      {false, f32, NULL, 60, 4, 72, 72, true, false, i32},
      {false, f16, "q4f16_g32", 8, 8, 144, 96, false, true, i32},
      {false, f16, "Q4_0", 8, 2, 200, 64, true, false, i32},
      {true, f16, NULL, 8, 2, 200, 72, false, false, i64},
      {true, bf16, NULL, 60, 8, 144, 72, false, true, i32},
      {true, f16, "q4f16_g32", 4, 2, 144, 96, false, true, i64},
      {true, f16, "Q4_0", 8, 4, 72, 64, true, false, i32},
  };
  for (size_t i = 0; i < RX_ARRAY_LEN(cfgs); i++) {
    /* n = 1000 for the plain f16 forms only: the others' references are slow */
    bool big = !cfgs[i].scheme && cfgs[i].t == f16 && !cfgs[i].gated;
    run_product(&cfgs[i], big ? ns : small, big ? 5 : 4);
  }
}

/* ------------------------------------------------------------------------------------------
 * coalescing of the CUDA kernels at a decode-like shape (the SIMT emulator's access tracing)
 * ------------------------------------------------------------------------------------------ */

/* The coalescing bar of the memory-bound decode kernels (tests/unit/test_coalescing.c). */
#define MIN_EFFICIENCY 90.0
#define TRACE_BLOCKS   8 /* blocks traced per kernel, spread over the grid */

/* Traces every CUDA (sm_80) kernel of case c at n tokens: the bytes the lanes use over the
 * 32-byte sectors their warp-wide requests touch. bar > 0: each kernel must reach it; 0: the
 * figure is printed only. */
static void coalescing_case(const prod_cfg *c, int64_t n, double bar) {
  const rx_quant_info *qi = NULL;
  rx_quant_scheme sc;
  if (c->scheme) {
    RX_ASSERT(base_quant_lookup(c->scheme, &sc));
    qi = base_quant_info_of(sc);
  }
  char text[1024], what[200], why[512];
  prod_text(c, qi, text, sizeof text, what, sizeof what);
  strncat(what, " (coalescing)", sizeof what - strlen(what) - 1);
  prog p;
  if (!rxk_oneop_build(&p, text, what, "prog", filter, &st, &vk) || !p.tp[0].ok) {
    rxk_oneop_free(&p);
    return;
  }
  int nin = 2 + (qi ? base_quant_nbuffers(sc) - 1 : 0) + (c->gemv ? 1 : 2);
  rxk_env e;
  rxk_buffers in;
  int64_t nk = n * c->k;
  if (make_inputs(&p, n, c->k, &e, &in)) {
    fill_weights(c, qi, &p, &in);
    int32_t *ex = base_malloc(sizeof(int32_t) * (size_t)nk), indptr[MAX_E + 1];
    int32_t *order = base_malloc(sizeof(int32_t) * (size_t)nk);
    make_routing(n, c->k, c->E, ex);
    if (c->gemv) {
      store_ids(rxk_oneop_param(&p, &in, nin - 1), ex, nk);
    } else {
      ref_group(ex, nk, c->E, indptr, order);
      store_ids(rxk_oneop_param(&p, &in, nin - 2), indptr, c->E + 1);
      store_ids(rxk_oneop_param(&p, &in, nin - 1), order, nk);
    }
    static simt_options opts = {.trace = 1};
    for (int i = 0; i < p.tp[0].kl.n; i++) {
      const rx_kernel *kn = p.tp[0].kl.kernels[i];
      simt_module *mod = NULL;
      char *err = NULL, label[200];
      snprintf(label, sizeof label, "%s.cu", kn->name);
      if (simt_module_compile(&opts, SIMT_CUDA, kn->source, label, &mod, &err)) {
        if (err && (strstr(err, "cannot run") || strstr(err, "sanitizer")))
          st.skipped++;
        else
          rxk_fail(&st, "%s: %s does not compile traced: %s", what, kn->name, err ? err : "");
        free(err);
        continue;
      }
      rxk_buffers b;
      rxk_copy_buffers(&in, &b);
      simt_coalescing cv = {0};
      if (!rxk_simt_launch(kn, mod, &e, &b, &cv, TRACE_BLOCKS, why, sizeof why)) {
        rxk_fail(&st, "%s: %s: %s", what, kn->name, why);
      } else {
        unsigned long long used = cv.loads.used + cv.stores.used;
        unsigned long long moved = cv.loads.moved + cv.stores.moved;
        double eff = moved ? 100.0 * (double)used / (double)moved : 100.0;
        printf("coalescing %s at n=%lld: %s %.1f%% of the bytes moved are used (loads %llu "
               "requests)\n",
               what, (long long)n, kn->name, eff, cv.loads.requests);
        if (bar > 0 && eff < bar)
          rxk_fail(&st, "%s: %s: %.1f%% of the bytes moved are used (< %.0f%%)", what, kn->name,
                   eff, bar);
        else
          st.passed++;
      }
      simt_coalescing_free(&cv);
      rxk_free_buffers(&b);
      simt_module_free(mod);
    }
    free(ex);
    free(order);
    rxk_free_buffers(&in);
  }
  rxk_oneop_free(&p);
}

static void test_coalescing(void) {
  const rx_dtype f16 = RX_DTYPE_F16, i32 = RX_DTYPE_I32;
  /* decode: 4 tokens, E = 8, k = 2, N = 512, K = 1024: the gathered expert rows */
  const prod_cfg gemv = {true, f16, NULL, 8, 2, 512, 1024, false, false, i32};
  const prod_cfg gemv_q = {true, f16, "q4f16_g32", 8, 2, 512, 1024, false, false, i32};
  const prod_cfg mm = {false, f16, NULL, 8, 2, 512, 1024, false, false, i32};
  coalescing_case(&gemv, 4, MIN_EFFICIENCY);
  coalescing_case(&gemv_q, 4, MIN_EFFICIENCY);
  coalescing_case(&mm, 64, 0);
}

/* ------------------------------------------------------------------------------------------
 * bad input
 * ------------------------------------------------------------------------------------------ */

static void test_errors(void) {
  static const struct {
    const char *text, *want;
  } bad[] = {
      {"graph_fn main(ex: f32[n, 2]) {\n  g = moe_group(ex, num_experts=8)\n  return g\n}\n",
       "moe_group expects experts (argument 0) as i32 or i64 [n, k], got f32[n, 2]"},
      {"graph_fn main(ex: i32[n, 2]) {\n  g = moe_group(ex, num_experts=0)\n  return g\n}\n",
       "moe_group expects num_experts= from 1 to 65536, got 0"},
      {"graph_fn main(x: f16[n, 8], w: f16[4, 8], ip: i32[5], od: i32[n]) {\n"
       "  y = moe_matmul(x, w, ip, od, top_k=1)\n  return y\n}\n",
       "moe_matmul expects w as [E, N, K] (experts stacked) of a float dtype, got f16[4, 8]"},
      {"graph_fn main(x: f16[n, 8], w: f16[4, 6, 8], ip: i32[4], od: i32[n]) {\n"
       "  y = moe_matmul(x, w, ip, od, top_k=1)\n  return y\n}\n",
       "moe_matmul expects indptr (argument 2) as i32[E + 1] = i32[5], got i32[4]"},
      {"graph_fn main(x: f16[n, 8], w: f16[4, 6, 7], ip: i32[5], od: i32[n]) {\n"
       "  y = moe_matmul(x, w, ip, od, top_k=1)\n  return y\n}\n",
       "moe_matmul expects w (argument 1) of f16[4, 6, 8], got f16[4, 6, 7]"},
      {"graph_fn main(x: f16[n, 8], w: f16[4, 7, 8], ex: i32[n, 2]) {\n"
       "  y = moe_gemv(x, w, ex, gated=true)\n  return y\n}\n",
       "moe_gemv gated=true expects w's rows (7) as 2F (gate, then up): even"},
      {"graph_fn main(x: f16[n, 48], w: u8[4, 6, 24], s: f16[4, 6, 1], ex: i32[n, 2]) {\n"
       "  y = moe_gemv(x, w, s, ex, scheme=\"q4f16_g32\")\n  return y\n}\n",
       "moe_gemv with scheme \"q4f16_g32\" needs K (48) a provable multiple of 32"},
      {"graph_fn main(x: f16[7, 8], w: f16[4, 6, 8], ex: i32[5, 2]) {\n"
       "  y = moe_gemv(x, w, ex)\n  return y\n}\n",
       "moe_gemv expects x with a row per token: n rows (5), got f16[7, 8]"},
      {"graph_fn main(x: f16[7, 8], w: f16[4, 6, 8], ex: i32[7, 2]) {\n"
       "  y = moe_gemv(x, w, ex, gathered=true)\n  return y\n}\n",
       "moe_gemv expects x with a row per (token, slot) pair: n k rows (14), got f16[7, 8]"},
      {"graph_fn main(x: f16[n, 8], w: f16[4, 6, 8], ip: i32[5], od: i32[n]) {\n"
       "  y = moe_matmul(x, w, ip, od)\n  return y\n}\n",
       "top_k"},
  };
  for (size_t i = 0; i < RX_ARRAY_LEN(bad); i++) {
    char *msg = rxk_verify_text("bad.rx", bad[i].text, NULL);
    if (msg && strstr(msg, bad[i].want) && strstr(msg, "bad.rx:"))
      st.passed++;
    else
      rxk_fail(&st, "bad input %zu: want an error with '%s' and its place, got: %s", i, bad[i].want,
               msg ? msg : "(none)");
    free(msg);
  }
  /* an expert id out of range fails the call, in the interpreter and on the device */
  prog p;
  if (!rxk_oneop_build(&p,
                       "graph_fn main(ex: i32[n, 2]) {\n  g = moe_group(ex, num_experts=4)\n"
                       "  return g\n}\n",
                       "moe_group with a bad id", "prog", filter, &st, &vk)) {
    rxk_oneop_free(&p);
    return;
  }
  rxk_env e;
  rxk_buffers in;
  if (make_inputs(&p, 3, 2, &e, &in)) {
    int32_t ids[6] = {0, 1, 2, 3, 4, 0};
    store_ids(rxk_oneop_param(&p, &in, 0), ids, 6);
    rx_status s = interp_run(p.m, p.f, in.arg, in.n, NULL);
    const char *m = s ? rx_status_message(s) : "";
    if (s && strstr(m, "expert id 4 is outside 0 .. 3") && strstr(m, "moe_group"))
      st.passed++;
    else
      rxk_fail(&st, "an expert id of 4 with E=4: want a run-time error naming it, got: %s",
               s ? m : "success");
    rx_status_free(s);
    rxk_free_buffers(&in);
  }
  rxk_oneop_free(&p);
}

int main(int argc, char **argv) {
  rxk_oneop_main_begin(argc, argv, &filter, &vk);
  test_errors();
  test_group();
  test_products();
  test_coalescing();
  printf("largest normalized errors: f32 %.2g, f16 %.2g, bf16 %.2g\n", worst[RX_DTYPE_F32],
         worst[RX_DTYPE_F16], worst[RX_DTYPE_BF16]);
  return rxk_oneop_main_end(&st, &vk, "moe");
}
