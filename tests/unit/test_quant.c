/* quant_matmul (ops/quant.c): y = x W^T with W quantized in each scheme of base/quant.h, against
 * a reference computed here independently: the weight dequantized by a plain C loop written from
 * the scheme's definition (relaxc's own schemes) or by frontends/gguf/gguf_quant.c (GGUF's block
 * formats, bit-exact against gguf-py: test_gguf), then a double-precision matmul.
 *
 * Each scheme's op is legalized from a one-op graph, x [n, K] (f16; f32 too for two schemes)
 * times W [m, K], with n and m symbolic, so one compilation serves every size and every matmul
 * variant the rule picks (gemv at n == 1, the small-row kernels up to 16 rows, gemm above: on
 * matrix units gemm_mma_dq / gemm_frag_dq). For every target (cuda sm_80, vulkan-lavapipe,
 * vulkan, metal-apple7, vulkan-nvidia) it is scheduled and generated (CUDA C through NVRTC with
 * no spills, GLSL through shaderc and spirv-val: support_pipeline.c), every kernel checked to
 * come from the matmul rule (gemv or gemm), the f16 programs' variants past 16 rows to be the
 * matrix-unit kernels where the target has them (check_matrix_units: gemm_mma_dq's PTX with
 * mma.sync, and 64-bit loads of relaxc's packed weights) and, on CUDA, the decode GEMV of
 * relaxc's own schemes to read the packed weight with 128-bit loads (source and PTX), then run at
 * n in {1, 3, 7, 17, 33, 100, 150} and m in {33, 263} (odd: no tile divides them) in the
 * reference interpreter (n <= 7), as CUDA C (mma.sync, ldmatrix, cp.async emulated) and as MSL
 * (simdgroup matrices) in the SIMT emulator, and on Vulkan (lavapipe) through the runtime under
 * the validation layer; vulkan-nvidia's cooperative-matrix GLSL is compiled and validated only
 * (no device here runs it).
 *
 * The checkpoints' own formats (awq_gG, gptq, gptq_v2, fp8_e4m3, fp8_e4m3_ch: issue 32) the same
 * way, their reference written from the tools' documented layouts (dequantize_ckpt): AWQ's and
 * GPTQ's m rounded up to a multiple of 8 (40 and 264 outputs: eight per int32 of the zeros), GPTQ
 * with GPTQ_GROUPS groups and a random g_idx, FP8 every e4m3 code but the NaNs.
 *
 * quant_take (the embedding table of --quantize-embeddings): each scheme's rows at ids in the
 * interpreter and on Vulkan, equal to the same reference dequantization.
 *
 * Weights: relaxc's own schemes take random packed bytes, zero points and f16 scales; the GGUF
 * formats take the quantized blocks of tests/gguf/all_types.gguf (real gguf-py quantizations),
 * dealt to the weight's blocks in a shuffled order.
 *
 * Also at K = 96 (three groups of 32) for q4f16_g32, q4f16a_g32, q8f16 and Q4_0 at 33, 100 and
 * 150 rows (gemm_mma_dq's odd chunk count: its int4 path without the chunk pairs, its scales read 4
 * chunks at a time past the end).
 *
 * Tolerance, as normalized error max|got - want| / max(1, max|want|): f32 outputs 1e-5 (x and W
 * the same values in both; f32 accumulation over K = 256 against double), f16 outputs 2e-3 (one
 * rounding of the output to f16). A scheme the schedule cannot give its fused kernel still
 * computes the same numbers: every variant is checked, whichever rule took it.
 *
 * usage: test_quant TESTS_DIR [FILTER] */
/* test-needs: runtime */
#include "support_pipeline.h"
#include "support_runtime.h"

#include "base/quant.h"
#include "frontends/gguf/gguf.h"
#include "frontends/hf/hf.h"
#include "interp/interp.h"
#include "ops/legalize.h"
#include "targets/toolchain.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define K_FULL 256 /* a multiple of every block (32, 64, 128) */
/* The reduction length of the programs: K_FULL, and 96 for test_short_k (three groups of 32: an
 * odd count of gemm_mma_dq's 32-k chunks, no multiple of the 4 whose scales a lane loads). */
static int K = K_FULL;
#define TOL_F32 1e-5
#define TOL_F16 2e-3
/* The interpreter runs the row counts up to this (it executes every statement of every thread). */
#define INTERP_ROWS 7

static rxk_stats st;
static rxk_backend vk = {.kind = RX_RT_BACKEND_VULKAN};
static const char *filter;
static double worst[RX_DTYPE_COUNT];
static rx_gguf_file fixture;

static const char *const targets[] = {"cuda -arch=sm_80", "vulkan-lavapipe", "vulkan",
                                      "metal-apple7", "vulkan-nvidia"};
#define NTARGETS ((int)RX_ARRAY_LEN(targets))
/* The sizes (n rows of x, m columns of y): every row count with one of the odd column counts 33
 * and 263 (256 + 7), so each variant meets both; 17 (the first row count past the small-row
 * kernels) and 150 (two row tiles of 128) for the matrix-unit GEMMs. RX_KERNEL_SIZES (the
 * sanitizer pass of CI sets 1,7,33) caps n at its largest size, and that pass leaves out the
 * sizes marked full (1, 7 and 33 at m = 263 or 33 already run the same kernels: the GEMV, the
 * small-row kernel, the GEMM): CI's time. */
static const struct {
  int64_t n, m;
  bool full;
} sizes[] = {{1, 263, false}, {3, 33, true},     {7, 263, false},  {17, 263, true},
             {33, 33, false}, {100, 263, false}, {150, 33, false}, {1, 33, true}};
static int64_t size_cap = INT64_MAX;

static uint64_t rng = 0x2545f4914f6cdd1dull;
static uint64_t next_rand(void) {
  rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
  return rng;
}
static double uniform(void) { return (double)(next_rand() >> 11) / 9007199254740992.0; }

typedef struct prog {
  char what[200];
  rx_quant_scheme sc;
  rx_dtype xdt;
  rx_module *m;
  rx_tensor_fn *f;
  rxk_prepared tp[NTARGETS];
  rx_rt_library *lib;
} prog;

/* The checkpoints' formats (AWQ, GPTQ, FP8; base/quant.h): AWQ and GPTQ pack eight outputs in an
 * int32 of the zeros, so their programs' m counts those words (8 m outputs); GPTQ takes
 * GPTQ_GROUPS groups, its g_idx random (desc_act's permuted grouping). */
#define GPTQ_GROUPS 5
static bool ckpt_packed(const rx_quant_info *qi) {
  return qi->kind == RX_QUANT_AWQ || qi->kind == RX_QUANT_GPTQ || qi->kind == RX_QUANT_GPTQ_V2;
}
static void ckpt_params(rx_strbuf *b, const rx_quant_info *qi) {
  switch (qi->kind) {
  case RX_QUANT_AWQ:
    base_strbuf_printf(b, "w: i32[%d, m], s: f16[%d, m * 8], z: i32[%d, m]", K, K / qi->block,
                       K / qi->block);
    break;
  case RX_QUANT_GPTQ:
  case RX_QUANT_GPTQ_V2:
    base_strbuf_printf(b, "w: i32[%d, m * 8], s: f16[%d, m * 8], z: i32[%d, m], g: i32[%d]", K / 8,
                       GPTQ_GROUPS, GPTQ_GROUPS, K);
    break;
  default:
    base_strbuf_printf(b, "w: u8[m, %d], s: f32[%s, 1]", K, qi->kind == RX_QUANT_FP8 ? "1" : "m");
  }
}

/* The graph `main` calling quant_matmul for scheme sc on x of dtype xdt. */
static char *graph_text(rx_quant_scheme sc, rx_dtype xdt) {
  const rx_quant_info *qi = base_quant_info_of(sc);
  rx_strbuf b = {0};
  int nb = base_quant_nbuffers(sc), blocks = K / qi->block;
  base_strbuf_printf(&b, "graph_fn main(x: %s[n, %d], ", ir_dtype_name(xdt), K);
  if (!base_quant_is_own(sc) && qi->kind != RX_QUANT_GGUF) {
    ckpt_params(&b, qi);
    base_strbuf_printf(&b,
                       ") -> %s[n, %s] {\n  dataflow {\n    y = quant_matmul(x, w, s%s%s, "
                       "scheme=\"%s\")\n  }\n  return y\n}\n",
                       ir_dtype_name(xdt), ckpt_packed(qi) ? "m * 8" : "m", nb >= 3 ? ", z" : "",
                       nb >= 4 ? ", g" : "", qi->name);
    return base_strbuf_take(&b);
  }
  if (qi->kind == RX_QUANT_GGUF)
    base_strbuf_printf(&b, "w: u8[m, %d]", blocks * qi->block_bytes);
  else if (qi->kind == RX_QUANT_INT8)
    base_strbuf_printf(&b, "w: i8[m, %d]", K);
  else
    base_strbuf_printf(&b, "w: u8[m, %d]", K / 2);
  if (nb >= 2) base_strbuf_printf(&b, ", s: f16[m, %d]", blocks);
  if (nb >= 3) base_strbuf_printf(&b, ", z: u8[m, %d]", blocks);
  base_strbuf_printf(
      &b,
      ") -> %s[n, m] {\n  dataflow {\n    y = quant_matmul(x, w%s%s, scheme=\"%s\")\n"
      "  }\n  return y\n}\n",
      ir_dtype_name(xdt), nb >= 2 ? ", s" : "", nb >= 3 ? ", z" : "", qi->name);
  return base_strbuf_take(&b);
}

static void check_kernels(const prog *p, const rxk_prepared *tp);

/* The variants past 16 rows (passes/schedule/matmul.c): of an f16 program (x f16 beside the
 * dequantized weight) on matrix units, on CUDA sm_80 gemm_mma_dq_64 (n <= 64) and gemm_mma_dq, on
 * Metal simdgroups and NVIDIA's Vulkan cooperative matrices gemm_frag_dq; on the targets without
 * matrix units, and for f32 x everywhere (the matrix units multiply f16), the SIMT gemm. On CUDA
 * the gemm_mma_dq kernel's PTX (where NVRTC is present) has mma.sync, P's cp.async and ldmatrix,
 * for relaxc's own schemes 64-bit loads of the packed weight (8 bytes a lane: 4 lanes read a
 * row's 32, passes/schedule/gemm_mma.c's stage_dq), and no local memory (no spills
 * either: rxk_prepare checks every kernel with ptxas). AWQ's and GPTQ's int32 words (which pack
 * k or the outputs, not k along a row: mm_q_words) take the same kernels, their stage's lanes
 * laid along the columns. */
static void check_matrix_units(const prog *p, const rxk_prepared *tp) {
  bool f16 = p->xdt == RX_DTYPE_F16, mma = f16 && tp->t->kind == RX_TARGET_CUDA;
  const char *want[2] = {"gemm", "gemm"};
  if (mma)
    want[0] = "gemm_mma_dq_64", want[1] = "gemm_mma_dq";
  else if (f16 && tp->t->matrix_units)
    want[0] = want[1] = "gemm_frag_dq";
  int nv = tp->sr.nvariants, first = nv - (mma ? 2 : 1);
  for (int v = first; v < nv; v++) {
    const char *got = tp->sr.variants[v].name ? tp->sr.variants[v].name : "(none)";
    if (!strcmp(got, want[v == nv - 1]))
      st.passed++;
    else
      rxk_fail(&st, "%s: variant %d is %s, want %s", tp->what, v, got, want[v == nv - 1]);
  }
  if (!mma || nv < 1 || nv - 1 >= tp->kl.n) return;
  const rx_kernel *kn = tp->kl.kernels[nv - 1];
  char *ptx = NULL, *log = NULL;
  size_t len = 0;
  rx_status s = tgt_nvrtc_compile(kn->source, kn->name, "sm_80", false, &ptx, &len, &log);
  if (s) {
    st.skipped++;
  } else {
    rx_quant_kind kind = base_quant_info_of(p->sc)->kind;
    bool packed = base_quant_is_own(p->sc); /* relaxc's own packing: gemm_mma_dq's wide loads */
    /* int4 at an odd count of 32-k chunks: 4 bytes a lane (its chunk's), not a pair's 8 */
    bool half = kind != RX_QUANT_INT8 && (K / 32) % 2;
    const char *need[] = {"mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32",
                          "cp.async.cg.shared.global", "ldmatrix.sync.aligned.m8n8.x4.shared.b16",
                          !packed ? NULL
                          : half  ? "ld.global.nc.u32"
                                  : "ld.global.nc.v2.u32"};
    for (size_t i = 0; i < RX_ARRAY_LEN(need); i++)
      if (!need[i] || strstr(ptx, need[i]))
        st.passed++;
      else
        rxk_fail(&st, "%s: no %s in the gemm_mma_dq kernel's PTX", tp->what, need[i]);
    /* the staged packed bytes stay in registers (indexed by constants) */
    if (strstr(ptx, "ld.local") || strstr(ptx, "st.local"))
      rxk_fail(&st, "%s: local memory in the gemm_mma_dq kernel's PTX", tp->what);
    else
      st.passed++;
  }
  rx_status_free(s);
  free(ptx);
  free(log);
}

static bool prog_build(prog *p, rx_quant_scheme sc, rx_dtype xdt) {
  memset(p, 0, sizeof *p);
  p->sc = sc;
  p->xdt = xdt;
  snprintf(p->what, sizeof p->what, "quant_matmul %s x %s%s", base_quant_info_of(sc)->name,
           ir_dtype_name(xdt), K == K_FULL ? "" : " K=96");
  if (filter && !strstr(p->what, filter)) return false;
  printf("%s\n", p->what);
  char *text = graph_text(sc, xdt);
  p->m = rx_module_new();
  rx_diag d;
  base_diag_init(&d);
  bool ok =
      ir_parse_module(p->m, p->what, text, strlen(text), &d) && ops_module_normalize(p->m, &d);
  if (ok) {
    rx_graph_fn *g = ir_module_graph_fn(p->m, "main");
    p->f = ops_legalize_call(p->m, g->body.blocks[0]->bindings[0]->value, "qmm", &d);
    ok = p->f && ir_module_verify(p->m, &d);
  }
  if (!ok) rxk_fail(&st, "%s: does not legalize:\n%s\n%s", p->what, rx_diag_text(&d), text);
  base_diag_free(&d);
  free(text);
  if (!ok) return false;
  for (int i = 0; i < NTARGETS; i++) {
    const rx_target *t;
    rx_status ts = tgt_target_parse(targets[i], &t);
    RX_ASSERT(!ts);
    rxk_prepare(p->m, p->f, t, &st, &p->tp[i]);
    check_kernels(p, &p->tp[i]);
  }
  if (vk.dev) {
    rx_strbuf msg = {0};
    if (!rxk_rt_load(p->m, p->f, &vk, &p->lib, &msg))
      rxk_fail(&st, "%s: compiling for %s: %s", p->what, vk.target.name, msg.data ? msg.data : "");
    base_strbuf_free(&msg);
  }
  return true;
}

/* What the schedule made of the program on one target: every kernel from the matmul rule (gemv
 * or gemm, never the fallback); on CUDA, the decode GEMV (the n == 1 variant, the first kernel)
 * of relaxc's own schemes reads the packed weight 16 bytes at a time (passes/schedule/
 * gemv_packed.c): a uint4 load of w in the source and, where NVRTC is present, 128-bit loads in
 * the PTX. */
static void check_kernels(const prog *p, const rxk_prepared *tp) {
  if (!tp->ok) return;
  for (int v = 0; v < tp->sr.nvariants; v++) {
    rx_sched_rule rule = tp->sr.variants[v].rule;
    if (rule == RX_SCHED_GEMV || rule == RX_SCHED_GEMM)
      st.passed++;
    else
      rxk_fail(&st, "%s: variant %d from rule %s, not the matmul rule", tp->what, v,
               sched_rule_name(rule));
  }
  check_matrix_units(p, tp);
  if (tp->t->kind != RX_TARGET_CUDA || !base_quant_is_own(p->sc)) return;
  const rx_kernel *gemv = tp->kl.kernels[0];
  char want[128];
  snprintf(want, sizeof want, "((const uint4*)%s)", p->f->params[1]->buf->name);
  if (strstr(gemv->source, want))
    st.passed++;
  else
    rxk_fail(&st, "%s: the gemv kernel does not load the packed weight as %s\n%s", tp->what, want,
             gemv->source);
  int mj, mn;
  rx_status s = tgt_nvrtc_load(&mj, &mn);
  char *ptx = NULL, *log = NULL;
  size_t len = 0;
  if (!s) s = tgt_nvrtc_compile(gemv->source, gemv->name, "sm_80", false, &ptx, &len, &log);
  if (s)
    st.skipped++;
  else if (strstr(ptx, "ld.global.nc.v4.u32"))
    st.passed++;
  else
    rxk_fail(&st, "%s: no ld.global.nc.v4.u32 in the gemv kernel's PTX", tp->what);
  rx_status_free(s);
  free(ptx);
  free(log);
}

static void prog_free(prog *p) {
  for (int i = 0; i < NTARGETS; i++) rxk_release(&p->tp[i]);
  rx_rt_library_release(p->lib);
  if (p->m) rx_module_free(p->m);
}

/* ---- the weight and its reference dequantization ---- */

/* GGUF: the blocks of the fixture's tensor of the scheme's type, dealt in a shuffled order. */
static bool gguf_blocks(const rx_quant_info *qi, uint8_t *w, int64_t nblocks) {
  const rx_gguf_tensor *src = NULL;
  for (size_t i = 0; i < fixture.ntensors; i++)
    if ((int)fixture.tensors[i].type == qi->gguf) src = &fixture.tensors[i];
  if (!src) {
    rxk_fail(&st, "%s: all_types.gguf holds no tensor of that type", qi->name);
    return false;
  }
  const uint8_t *data = fixture.data + src->offset;
  int64_t have = (int64_t)src->size / qi->block_bytes;
  for (int64_t b = 0; b < nblocks; b++)
    memcpy(w + b * qi->block_bytes,
           data + (int64_t)(next_rand() % (uint64_t)have) * qi->block_bytes,
           (size_t)qi->block_bytes);
  return true;
}

/* The 4-bit field i (bits 4i..4i+3) of a little-endian int32 word. */
static int field(const int32_t *w, int64_t word, int i) {
  return (int)(((uint32_t)w[word] >> (4 * i)) & 15u);
}

/* float8 e4m3fn from the OCP FP8 definition: (-1)^s 2^(e-7) (1 + m/8), e = 0: 2^-6 m/8. */
static double e4m3(uint8_t b) {
  int e = b >> 3 & 15, m = b & 7;
  double v = e ? ldexp(1 + m / 8.0, e - 7) : ldexp(m / 8.0, -6);
  return b & 128 ? -v : v;
}

/* W [m, K] of a checkpoint format (m outputs), written from the tools' documentation: AutoAWQ's
 * pack order (output 8c + AWQ_ORDER[i] in field i), GPTQ's consecutive k per word and g_idx. */
static void dequantize_ckpt(const rx_quant_info *qi, int64_t m, const rxk_buffers *in,
                            double *out) {
  static const int awq_order[8] = {0, 2, 4, 6, 1, 3, 5, 7};
  const int32_t *w = in->arg[1].data, *z = in->n > 4 ? in->arg[3].data : NULL,
                *g = in->n > 5 ? in->arg[4].data : NULL;
  const uint16_t *s = in->arg[2].data;
  if (qi->kind == RX_QUANT_FP8 || qi->kind == RX_QUANT_FP8_CH) {
    const float *sc = in->arg[2].data;
    for (int64_t j = 0; j < m; j++)
      for (int k = 0; k < K; k++)
        out[j * K + k] = e4m3(((const uint8_t *)in->arg[1].data)[j * K + k]) *
                         sc[qi->kind == RX_QUANT_FP8 ? 0 : j];
    return;
  }
  for (int k = 0; k < K; k++)
    for (int64_t c = 0; c < m / 8; c++)
      for (int i = 0; i < 8; i++) {
        int64_t j;
        int q, zero, grp;
        if (qi->kind == RX_QUANT_AWQ) {
          j = 8 * c + awq_order[i];
          grp = k / qi->block;
          q = field(w, k * (m / 8) + c, i);
          zero = field(z, grp * (m / 8) + c, i);
        } else {
          j = 8 * c + i;
          grp = g[k];
          q = field(w, (k / 8) * m + j, k % 8);
          zero = field(z, grp * (m / 8) + c, i);
          if (qi->kind == RX_QUANT_GPTQ) zero = (zero + 1) & 15; /* v1 stores zero - 1 */
        }
        out[j * K + k] = base_f16_to_f32(s[grp * m + j]) * (q - zero);
      }
}

/* W [m, K] in double from the weight's buffers, by the scheme's definition (base/quant.h). */
static void dequantize(const rx_quant_info *qi, int64_t m, const rxk_buffers *in, double *out) {
  if (qi->kind != RX_QUANT_GGUF && qi->kind != RX_QUANT_INT4 && qi->kind != RX_QUANT_INT4_ZERO &&
      qi->kind != RX_QUANT_INT8) {
    dequantize_ckpt(qi, m, in, out);
    return;
  }
  const void *w = in->arg[1].data;
  const uint16_t *s = in->n > 3 ? in->arg[2].data : NULL;
  const uint8_t *z = in->n > 4 ? in->arg[3].data : NULL;
  int blocks = K / qi->block;
  if (qi->kind == RX_QUANT_GGUF) {
    float *row = base_malloc(sizeof *row * K);
    for (int64_t j = 0; j < m; j++) {
      gguf_dequantize((rx_gguf_type)qi->gguf, (const uint8_t *)w + j * blocks * qi->block_bytes, K,
                      row);
      for (int k = 0; k < K; k++) out[j * K + k] = row[k];
    }
    free(row);
    return;
  }
  for (int64_t j = 0; j < m; j++)
    for (int k = 0; k < K; k++) {
      double scale = base_f16_to_f32(s[j * blocks + k / qi->block]);
      int q;
      if (qi->kind == RX_QUANT_INT8) {
        q = ((const int8_t *)w)[j * K + k];
      } else {
        int byte = ((const uint8_t *)w)[j * (K / 2) + k / 2];
        q = (k % 2 ? byte >> 4 : byte & 15) -
            (qi->kind == RX_QUANT_INT4_ZERO ? z[j * blocks + k / qi->block] : 8);
      }
      out[j * K + k] = scale * q;
    }
}

/* Inputs at n rows, m columns: x in [-1, 1), the weight's buffers as the header says. */
static bool make_inputs(prog *p, int64_t n, int64_t m, rxk_env *e, rxk_buffers *in) {
  rxk_program_vars(p->f, e);
  const rx_quant_info *qi0 = base_quant_info_of(p->sc);
  for (int i = 0; i < e->n; i++)
    e->values[i] = !strcmp(e->vars[i]->name, "n") ? n : ckpt_packed(qi0) ? m / 8 : m;
  char why[256];
  if (!rxk_make_buffers(p->f, e, in, why, sizeof why)) {
    rxk_fail(&st, "%s: %s", p->what, why);
    return false;
  }
  const rx_quant_info *qi = base_quant_info_of(p->sc);
  for (int i = 1; i < in->n - 1; i++) {
    rx_interp_arg *a = &in->arg[i];
    uint8_t *bytes = a->data;
    if (i == 1 && qi->kind == RX_QUANT_GGUF) {
      if (!gguf_blocks(qi, bytes, m * (K / qi->block))) return false;
    } else if (a->dtype == RX_DTYPE_F32) { /* FP8 scales: 2^-9 to 2^-5 */
      float *f = a->data;
      for (size_t k = 0; k < in->bytes[i] / 4; k++)
        f[k] = (float)ldexp(1 + uniform(), -9 + (int)(next_rand() % 5));
    } else if (i == 4) { /* GPTQ's g_idx: any group for any k */
      int32_t *gi = a->data;
      for (size_t k = 0; k < in->bytes[i] / 4; k++) gi[k] = (int32_t)(next_rand() % GPTQ_GROUPS);
    } else if (i == 1 && (qi->kind == RX_QUANT_FP8 || qi->kind == RX_QUANT_FP8_CH)) {
      /* e4m3: every code but the NaNs (0x7f, 0xff) */
      for (size_t k = 0; k < in->bytes[i]; k++)
        bytes[k] = (uint8_t)(next_rand() % 255), bytes[k] += (bytes[k] & 127) == 127;
    } else if (i == 3 && a->dtype == RX_DTYPE_I32) { /* packed zeros: any word */
      for (size_t k = 0; k < in->bytes[i]; k++) bytes[k] = (uint8_t)next_rand();
    } else if (a->dtype == RX_DTYPE_F16) { /* scales: 2^-7 to 2^-3, either sign */
      uint16_t *h = a->data;
      for (size_t k = 0; k < in->bytes[i] / 2; k++)
        h[k] = base_f32_to_f16((float)((uniform() < 0.5 ? -1 : 1) *
                                       ldexp(1 + uniform(), -7 + (int)(next_rand() % 5))));
    } else if (i == 3) { /* zero points 0..15 */
      for (size_t k = 0; k < in->bytes[i]; k++) bytes[k] = (uint8_t)(next_rand() % 16);
    } else {
      for (size_t k = 0; k < in->bytes[i]; k++) bytes[k] = (uint8_t)next_rand();
    }
  }
  return true;
}

/* want [n, m] = x W^T in double. */
static double *reference(const prog *p, int64_t n, int64_t m, const rxk_buffers *in) {
  double *wd = base_malloc(sizeof *wd * (size_t)(m * K)),
         *y = base_malloc(sizeof *y * (size_t)(n * m));
  dequantize(base_quant_info_of(p->sc), m, in, wd);
  for (int64_t i = 0; i < n; i++)
    for (int64_t j = 0; j < m; j++) {
      double acc = 0;
      for (int k = 0; k < K; k++)
        acc += rxk_load_elem(in->arg[0].data, p->xdt, (size_t)(i * K + k)) * wd[j * K + k];
      y[i * m + j] = acc;
    }
  free(wd);
  return y;
}

static bool compare(const prog *p, const rxk_buffers *got, const double *want, char *msg,
                    size_t len) {
  const rx_interp_arg *y = &got->arg[got->n - 1];
  size_t cnt = (size_t)(y->shape[0] * y->shape[1]), at = 0;
  double maxdiff = 0, maxref = 1;
  for (size_t k = 0; k < cnt; k++) {
    double d = fabs(rxk_load_elem(y->data, p->xdt, k) - want[k]);
    if (!(d <= maxdiff)) maxdiff = d, at = k;
    if (fabs(want[k]) > maxref) maxref = fabs(want[k]);
  }
  double tol = p->xdt == RX_DTYPE_F32 ? TOL_F32 : TOL_F16, err = maxdiff / maxref;
  if (err > worst[p->xdt]) worst[p->xdt] = err;
  if (err <= tol) return true;
  snprintf(msg, len, "normalized error %.3g > %.0e (element %zu: got %.6g, want %.6g)", err, tol,
           at, rxk_load_elem(y->data, p->xdt, at), want[at]);
  return false;
}

/* One size everywhere: the interpreter (small n), the emulator, Vulkan. */
static void run_size(prog *p, int64_t n, int64_t m) {
  if (ckpt_packed(base_quant_info_of(p->sc))) m = (m + 7) / 8 * 8; /* 33 -> 40, 263 -> 264 */
  rxk_env e;
  rxk_buffers in, got;
  if (!make_inputs(p, n, m, &e, &in)) return;
  double *want = reference(p, n, m, &in);
  char at[64], why[512];
  snprintf(at, sizeof at, "n=%lld m=%lld", (long long)n, (long long)m);
  if (n <= INTERP_ROWS) {
    rxk_copy_buffers(&in, &got);
    rx_status s = interp_run(p->m, p->f, got.arg, got.n, NULL);
    if (s)
      rxk_fail(&st, "%s at %s: interpreter: %s", p->what, at, rx_status_message(s));
    else if (!compare(p, &got, want, why, sizeof why))
      rxk_fail(&st, "%s at %s: interpreter: %s", p->what, at, why);
    else
      st.passed++;
    rx_status_free(s);
    rxk_free_buffers(&got);
  }
  for (int i = 0; i < NTARGETS; i++) {
    rxk_prepared *tp = &p->tp[i];
    if (!tp->ok || !tp->emulate) continue;
    rxk_copy_buffers(&in, &got);
    if (!rxk_run_simt(tp, &e, &got, why, sizeof why))
      rxk_fail(&st, "%s at %s: %s", tp->what, at, why);
    else if (!compare(p, &got, want, why, sizeof why))
      rxk_fail(&st, "%s at %s: emulated: %s", tp->what, at, why);
    else
      st.passed++;
    rxk_free_buffers(&got);
  }
  if (p->lib) {
    rxk_copy_buffers(&in, &got);
    rx_status s = rxk_rt_run(&vk, p->lib, p->f, &e, &got, 0, NULL);
    if (s)
      rxk_fail(&st, "%s at %s: Vulkan: %s", p->what, at, rx_status_message(s));
    else if (!compare(p, &got, want, why, sizeof why))
      rxk_fail(&st, "%s at %s: Vulkan (%s): %s", p->what, at, vk.target.name, why);
    else
      st.passed++;
    rx_status_free(s);
    rxk_free_buffers(&got);
  } else {
    st.skipped++;
  }
  free(want);
  rxk_free_buffers(&in);
}

static void test_scheme(rx_quant_scheme sc, rx_dtype xdt) {
  prog p;
  if (prog_build(&p, sc, xdt))
    for (size_t i = 0; i < RX_ARRAY_LEN(sizes); i++)
      if (sizes[i].n <= size_cap && !(sizes[i].full && size_cap != INT64_MAX))
        run_size(&p, sizes[i].n, sizes[i].m);
  prog_free(&p);
}

/* Bad calls are errors that name what was expected. */
static void test_errors(void) {
  static const struct {
    const char *args, *want;
  } cases[] = {
      {"x, w, s, scheme=\"q4f16_g48\"", "expects scheme= one of q4f16_g32"},
      {"x, w, scheme=\"q4f16_g32\"", "expects 3 arguments (x and w, s), got 2"},
      {"x, s, s, scheme=\"q4f16_g32\"", "expects w of u8[33, 32], got f16[33, 2]"},
      {"x, w, w, scheme=\"q4f16_g32\"", "expects s of f16[33, 2], got u8[33, 32]"},
      {"x, w, scheme=\"Q4_K\"", "needs in (64) a provable multiple of 256"},
      {"x, w, scheme=\"Q8_0\"", "expects w of u8[33, 68], got u8[33, 32]"},
  };
  for (size_t i = 0; i < RX_ARRAY_LEN(cases); i++) {
    char text[512];
    snprintf(text, sizeof text,
             "graph_fn main(x: f16[n, 64], w: u8[33, 32], s: f16[33, 2]) -> f16[n, 33] {\n"
             "  dataflow {\n    y = quant_matmul(%s)\n  }\n  return y\n}\n",
             cases[i].args);
    char *diag = rxk_verify_text("bad.rx", text, NULL);
    if (diag && strstr(diag, cases[i].want) && strstr(diag, "bad.rx:3:"))
      st.passed++;
    else
      rxk_fail(&st, "quant_matmul(%s): want an error at bad.rx:3 with \"%s\", got: %s",
               cases[i].args, cases[i].want, diag ? diag : "no error");
    free(diag);
  }
}

/* hf_quantize (round to nearest, frontends/hf/quantize.c) into each of relaxc's own schemes:
 * the weights it writes, dequantized as the scheme defines them (dequantize above), are within
 * half a step of the input (a step: the group's stored scale; a full step for the asymmetric
 * schemes, whose zero point is rounded too), a group of zeros stays zeros; bad shapes and GGUF
 * schemes are errors that name them. */
static void test_quantizer(void) {
  enum { ROWS = 3 };
  for (int sc = 0; sc < RX_QUANT_COUNT; sc++) {
    const rx_quant_info *qi = base_quant_info_of((rx_quant_scheme)sc);
    if (!base_quant_is_own((rx_quant_scheme)sc)) continue; /* --quantize writes these alone */
    int blocks = K_FULL / qi->block;
    float w[ROWS * K_FULL];
    for (int i = 0; i < ROWS * K_FULL; i++) w[i] = (float)(uniform() * 2 - 1);
    for (int i = 0; i < qi->block; i++) w[i] = 0; /* row 0, group 0: zeros */
    w[K_FULL + 5] = 9.5f;                         /* row 1: an outlier in its first group */
    for (int i = 0; i < K_FULL; i++)
      w[2 * K_FULL + i] += 3; /* row 2: all positive (asymmetric: z = 0) */
    uint8_t qw[ROWS * K_FULL], z[ROWS * K_FULL / 32];
    uint16_t scales[ROWS * K_FULL / 32];
    rx_status s = hf_quantize((rx_quant_scheme)sc, w, ROWS, K_FULL, qw, scales,
                              qi->kind == RX_QUANT_INT4_ZERO ? z : NULL);
    if (s) {
      rxk_fail(&st, "quantize %s: %s", qi->name, rx_status_message(s));
      rx_status_free(s);
      continue;
    }
    rxk_buffers b = {.n = qi->kind == RX_QUANT_INT4_ZERO ? 5 : 4};
    b.arg[1].data = qw;
    b.arg[2].data = scales;
    b.arg[3].data = z;
    double deq[ROWS * K_FULL], worst_step = 0;
    dequantize(qi, ROWS, &b, deq);
    for (int i = 0; i < ROWS * K_FULL; i++) {
      double step = base_f16_to_f32(scales[i / K_FULL * blocks + i % K_FULL / qi->block]);
      double err = fabs(deq[i] - w[i]), bound = step * (qi->kind == RX_QUANT_INT4_ZERO ? 1 : 0.5);
      if (!(err <= bound * (1 + 1e-6) + 1e-12) || (i < qi->block && deq[i] != 0)) {
        rxk_fail(&st, "quantize %s: element %d: %g dequantizes to %g (step %g)", qi->name, i,
                 (double)w[i], deq[i], step);
        break;
      }
      if (step > 0 && err / step > worst_step) worst_step = err / step;
    }
    st.passed++;
    printf("quantize %s: largest error %.3f steps\n", qi->name, worst_step);
  }
  static const struct {
    rx_quant_scheme sc;
    int64_t in;
    const char *want;
  } bad[] = {{RX_QUANT_Q4F16_G128, 192,
              "a [2, 192] weight into q4f16_g128: the input dimension "
              "must be a positive multiple of 128"},
             {RX_QUANT_GGUF_Q4_0, 256, "quantizing into Q4_0: GGUF's block formats"}};
  for (size_t i = 0; i < RX_ARRAY_LEN(bad); i++) {
    float w[2 * 256] = {0};
    uint8_t qw[2 * 256];
    uint16_t scales[16];
    rx_status s = hf_quantize(bad[i].sc, w, 2, bad[i].in, qw, scales, NULL);
    if (s && strstr(rx_status_message(s), bad[i].want))
      st.passed++;
    else
      rxk_fail(&st, "quantize: want an error with \"%s\", got %s", bad[i].want,
               s ? rx_status_message(s) : "none");
    rx_status_free(s);
  }
}

static char *load_fixture(const char *dir, size_t *len) {
  char path[1024];
  snprintf(path, sizeof path, "%s/gguf/all_types.gguf", dir);
  FILE *fp = fopen(path, "rb");
  if (!fp) return NULL;
  fseek(fp, 0, SEEK_END);
  long n = ftell(fp);
  fseek(fp, 0, SEEK_SET);
  char *buf = base_malloc(n > 0 ? (size_t)n : 1);
  *len = fread(buf, 1, n > 0 ? (size_t)n : 0, fp);
  fclose(fp);
  return buf;
}

/* ---- quant_take: the rows of a quantized table at ids ---- */
/* The graph `main` calling quant_take for scheme sc on i32 ids [n] of a table of TAKE_ROWS rows
 * of K weights, dequantized to f32 (the legalization's own element writers, as quant_matmul's). */
#define TAKE_ROWS 33
static char *take_text(rx_quant_scheme sc, const char *extra) {
  const rx_quant_info *qi = base_quant_info_of(sc);
  rx_strbuf b = {0};
  int nb = base_quant_nbuffers(sc), blocks = K / qi->block;
  base_strbuf_printf(&b, "graph_fn main(ids: i32[n], w: %s[%d, %d]",
                     qi->kind == RX_QUANT_INT8 ? "i8" : "u8", TAKE_ROWS,
                     qi->kind == RX_QUANT_GGUF   ? blocks * qi->block_bytes
                     : qi->kind == RX_QUANT_INT8 ? K
                                                 : K / 2);
  if (nb >= 2) base_strbuf_printf(&b, ", s: f16[%d, %d]", TAKE_ROWS, blocks);
  if (nb >= 3) base_strbuf_printf(&b, ", z: u8[%d, %d]", TAKE_ROWS, blocks);
  base_strbuf_printf(
      &b,
      ") -> f32[n, %d] {\n  dataflow {\n    y = quant_take(ids, w%s%s, scheme=\"%s\", "
      "dtype=f32%s)\n  }\n  return y\n}\n",
      K, nb >= 2 ? ", s" : "", nb >= 3 ? ", z" : "", qi->name, extra);
  return base_strbuf_take(&b);
}

/* Each scheme's quant_take at n = 7 ids (the first and the last row among them) in the
 * interpreter and on Vulkan, against the rows of `dequantize` above: equal within 1e-6 of
 * the largest weight (both compute each weight in f32 from the same bytes). */
static void test_take(void) {
  enum { N = 7 };
  for (int sc = 0; sc < RX_QUANT_COUNT; sc++) {
    prog p = {.sc = (rx_quant_scheme)sc, .xdt = RX_DTYPE_F32};
    const rx_quant_info *qi = base_quant_info_of(p.sc);
    if (!base_quant_is_own(p.sc) && qi->kind != RX_QUANT_GGUF) continue; /* dense tables */
    snprintf(p.what, sizeof p.what, "quant_take %s", qi->name);
    if (filter && !strstr(p.what, filter)) continue;
    char *text = take_text(p.sc, "");
    p.m = rx_module_new();
    rx_diag d;
    base_diag_init(&d);
    bool ok = ir_parse_module(p.m, p.what, text, strlen(text), &d) && ops_module_normalize(p.m, &d);
    if (ok) {
      rx_graph_fn *g = ir_module_graph_fn(p.m, "main");
      p.f = ops_legalize_call(p.m, g->body.blocks[0]->bindings[0]->value, "qtake", &d);
      ok = p.f && ir_module_verify(p.m, &d);
    }
    if (!ok) rxk_fail(&st, "%s: does not legalize:\n%s\n%s", p.what, rx_diag_text(&d), text);
    base_diag_free(&d);
    free(text);
    rxk_env e;
    rxk_buffers in, got;
    if (ok && make_inputs(&p, N, TAKE_ROWS, &e, &in)) {
      int32_t *ids = in.arg[0].data;
      for (int i = 0; i < N; i++) ids[i] = (int32_t)(next_rand() % TAKE_ROWS);
      ids[0] = TAKE_ROWS - 1, ids[1] = 0;
      double *wd = base_malloc(sizeof *wd * TAKE_ROWS * K), maxw = 0;
      dequantize(qi, TAKE_ROWS, &in, wd);
      for (int k = 0; k < TAKE_ROWS * K; k++) maxw = fmax(maxw, fabs(wd[k]));
      rx_strbuf msg = {0};
      if (vk.dev && !rxk_rt_load(p.m, p.f, &vk, &p.lib, &msg))
        rxk_fail(&st, "%s: compiling for %s: %s", p.what, vk.target.name, msg.data);
      base_strbuf_free(&msg);
      for (int where = 0; where < 2; where++) {
        if (where == 1 && !p.lib) {
          st.skipped++;
          continue;
        }
        rxk_copy_buffers(&in, &got);
        rx_status s = where == 0 ? interp_run(p.m, p.f, got.arg, got.n, NULL)
                                 : rxk_rt_run(&vk, p.lib, p.f, &e, &got, 0, NULL);
        double worst_d = 0;
        const float *y = got.arg[got.n - 1].data;
        for (int i = 0; !s && i < N; i++) {
          for (int k = 0; k < K; k++)
            worst_d = fmax(worst_d, fabs(y[i * K + k] - wd[ids[i] * K + k]));
        }
        if (s || !(worst_d <= 1e-6 * fmax(maxw, 1)))
          rxk_fail(&st, "%s on %s: %s (largest difference %.3g)", p.what,
                   where ? "Vulkan" : "the interpreter", s ? rx_status_message(s) : "wrong rows",
                   worst_d);
        else
          st.passed++;
        rx_status_free(s);
        rxk_free_buffers(&got);
      }
      free(wd);
      rxk_free_buffers(&in);
    }
    rx_rt_library_release(p.lib);
    rx_module_free(p.m);
  }
  /* bad calls name what was expected */
  static const struct {
    const char *extra, *want;
  } bad[] = {{", dtype=i32", "quant_take expects dtype=f32 or dtype=f16"},
             {", scheme=\"q4f16_g48\"", "quant_take expects scheme= one of"}};
  for (size_t i = 0; i < RX_ARRAY_LEN(bad); i++) {
    char *text = take_text(RX_QUANT_Q4F16_G32, "");
    /* the bad attribute replaces the good one */
    char *at = strstr(text, strstr(bad[i].extra, "dtype") ? "dtype=f32" : "scheme=\"q4f16_g32\"");
    rx_strbuf b = {0};
    base_strbuf_printf(&b, "%.*s%s%s", (int)(at - text), text, bad[i].extra + 2,
                       strchr(at, strstr(bad[i].extra, "dtype") ? ')' : ','));
    char *diag = rxk_verify_text("bad.rx", b.data, NULL);
    if (diag && strstr(diag, bad[i].want) && strstr(diag, "bad.rx:3:"))
      st.passed++;
    else
      rxk_fail(&st, "%s: want an error at bad.rx:3 with \"%s\", got: %s", b.data, bad[i].want,
               diag ? diag : "no error");
    free(diag);
    free(text);
    base_strbuf_free(&b);
  }
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: test_quant TESTS_DIR [FILTER]\n");
    return 2;
  }
  setvbuf(stdout, NULL, _IOLBF, 0);
  filter = argc > 2 ? argv[2] : NULL;
  unsetenv("LD_PRELOAD"); /* as test_attention: the emulator's compilers must not inherit it */
  size_t len = 0;
  char *buf = load_fixture(argv[1], &len);
  rx_status s = buf ? gguf_parse(buf, len, "all_types.gguf", &fixture)
                    : base_status_make(RX_ERR_IO, "cannot read %s/gguf/all_types.gguf", argv[1]);
  if (s) {
    fprintf(stderr, "FAIL: %s\n", rx_status_message(s));
    return 1;
  }
  if (getenv("RX_KERNEL_SIZES") && *getenv("RX_KERNEL_SIZES")) {
    size_cap = 0;
    for (size_t i = 0; i < rxk_size_count(); i++)
      if (rxk_size_at(i) > size_cap) size_cap = rxk_size_at(i);
    printf("row counts capped at %lld (RX_KERNEL_SIZES)\n", (long long)size_cap);
  }
  test_errors();
  test_quantizer();
  rxk_rt_open(&vk, "vulkan:0");
  /* the sanitizer pass (size_cap set) leaves out the 64- and 128-wide groups of relaxc's own
   * schemes (the same legalization and rules as their 32-wide group, other constants), the
   * f32 runs and the sizes marked full: CI's time; the full pass runs them all */
  bool sanitizer_pass = size_cap != INT64_MAX;
  test_take();
  for (int sc = 0; sc < RX_QUANT_COUNT; sc++) {
    const rx_quant_info *qi = base_quant_info_of((rx_quant_scheme)sc);
    if (sanitizer_pass && (base_quant_is_own((rx_quant_scheme)sc) || qi->kind == RX_QUANT_AWQ) &&
        qi->block != 32)
      continue;
    test_scheme((rx_quant_scheme)sc, RX_DTYPE_F16);
  }
  /* K = 96: gemm_mma_dq with an odd chunk count (int4 reads its chunk's own 4 bytes) and scales
   * loaded 4 chunks at a time past the last chunk (clamped), at the row counts of its variants */
  K = 96;
  static const rx_quant_scheme short_k[] = {RX_QUANT_Q4F16_G32, RX_QUANT_Q4F16A_G32, RX_QUANT_Q8F16,
                                            RX_QUANT_GGUF_Q4_0};
  for (size_t i = 0; i < RX_ARRAY_LEN(short_k); i++) {
    prog p;
    if (prog_build(&p, short_k[i], RX_DTYPE_F16)) {
      run_size(&p, 33, 263);
      if (size_cap >= 150) run_size(&p, 100, 33), run_size(&p, 150, 263);
    }
    prog_free(&p);
  }
  K = K_FULL;
  if (!sanitizer_pass) {
    test_scheme(RX_QUANT_Q4F16_G32, RX_DTYPE_F32);
    test_scheme(RX_QUANT_GGUF_Q5_0, RX_DTYPE_F32);
  } else {
    printf("sanitizer pass: groups of 64 and 128, the f32 runs, n = 3, n = 17 and n = 1 at m = 33 "
           "left out\n");
  }
  if (vk.dev) {
    const char *last = NULL;
    size_t nmsg = rx_rt_device_validation_messages(vk.dev, &last);
    if (nmsg)
      rxk_fail(&st, "Vulkan: %zu validation messages; the last: %s", nmsg, last ? last : "");
    rx_rt_device_release(vk.dev);
  }
  gguf_free(&fixture);
  free(buf);
  printf("largest normalized errors: f32 %.2g, f16 %.2g\n", worst[RX_DTYPE_F32],
         worst[RX_DTYPE_F16]);
  printf("quant: %d passed, %d failed, %d skipped\n", st.passed, st.failed, st.skipped);
  return st.failed ? 1 : 0;
}
