/* test_moe_bytes: the weight bytes a mixture of experts' decode step reads (issue 32: at most
 * 1.1x the bytes of the active parameters per token), counted by the SIMT emulator, not by
 * arithmetic. The decode form of the experts' product, moe_gemv (ops/moe.c), as the builder calls
 * it (frontends/hf/llama.c: the gated gate-up projection, then the gathered down projection), is
 * legalized, scheduled and generated for CUDA sm_80 and run in the emulator with access tracing
 * (tests/simt, simt_launch_traced) on the weight buffer alone (and on the scales of a quantized
 * weight): the 32-byte sectors its loads touch, over every block of the grid, are the bytes the
 * kernel moves from the weight, and the bytes its lanes ask for (`used`, at most that). With b
 * tokens each routed to k distinct experts of E, the active bytes are b k experts' rows: the
 * bytes asked must be at least those (else some were not read) and the sectors moved at most
 * MAX_RATIO times them. Both forms move exactly the active bytes (1.000 x: each byte of the
 * chosen experts once, none of the others'): the f16 weight in 16-byte vectors, the q4f16_g32
 * weight 16 packed bytes a lane at a time with its scale read once per 32 weights (the matmul
 * rule's gemv_rows with the expert id as a gathered row offset, passes/schedule/gemv_packed.c),
 * each warp over consecutive rows at these short K (gemv.c, fold_lanes). The
 * relaxc inspect figure of a whole decode step (llama.c's moe_numbers) counts moe_gemv's share
 * this way, every other weight whole.
 *
 * Shapes: E = 8 experts, k = 2, hidden 256, expert intermediate 128 (the gate-up weight
 * [8, 256, 256], the down weight [8, 256, 128]), in f16 and in q4f16_g32; b = 1 (a decode step
 * of one sequence) and b = 3 (6 distinct experts of 8). And GGUF's Q4_0, Q8_0 and Q4_K (Q4_K
 * on the gate-up weight only: 128 is no whole block of 256), as a GGUF file's
 * experts are kept: their blocks staged a step at a time through shared memory by gemv_rows
 * (passes/schedule/gemv_blocks.c), 1.000 x too. Also the dense decode GEMV of the same GGUF
 * formats (quant_matmul, check_dense) at Llama-2-7B's K: the same gemv_rows, every byte of the
 * weight read once (before the staging: 2.2 x asked, 19.8 x moved for Q4_0).
 *
 * Skipped (77) without clang 16 and in sanitized builds (tracing uses ThreadSanitizer's
 * instrumentation, which cannot share a process with ASan).
 *
 * usage: test_moe_bytes TESTS_DIR */
/* test-needs: runtime */
#include "support_oneop.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The bar of issue 32: a decode step reads at most 1.1x the active parameters' bytes. */
#define MAX_RATIO 1.1
#define E         8
#define K_TOP     2
#define HIDDEN    256
#define INTER     128

static rxk_stats st;
static rxk_backend vk = {.kind = RX_RT_BACKEND_VULKAN};
static const char *filter;
/* The shared-memory phases and bank conflicts of the last kernels counted (moved_bytes). */
static simt_bank_stats bank;

/* The index in b of p's buffer parameter for the op's argument k. */
static int param_index(const rxk_oneop *p, rxk_buffers *b, int k) {
  rx_interp_arg *a = rxk_oneop_param(p, b, k);
  return (int)(a - b->arg);
}

/* The bytes moved from buffer `only` by the kernels of p's CUDA sm_80 form whose condition
 * holds, in a traced run over every block; false after counting a skip or a failure. */
static bool moved_bytes(const rxk_oneop *p, const rxk_env *e, rxk_buffers *b, int only,
                        simt_access_stats *out) {
  static simt_options opts = {.trace = 1};
  const rxk_prepared *tp = &p->tp[0]; /* cuda -arch=sm_80 */
  char why[512];
  memset(out, 0, sizeof *out);
  memset(&bank, 0, sizeof bank);
  for (int k = 0; k < tp->kl.n; k++) {
    const rx_kernel *kn = tp->kl.kernels[k];
    int64_t v;
    if (kn->cond && (!rxk_eval(kn->cond, e, &v) || !v)) continue;
    simt_module *mod = NULL;
    char *err = NULL, label[200];
    snprintf(label, sizeof label, "%s.cu", kn->name);
    if (simt_module_compile(&opts, SIMT_CUDA, kn->source, label, &mod, &err)) {
      bool skip = err && (strstr(err, "cannot run") || strstr(err, "sanitizer"));
      if (skip) {
        st.skipped++;
        printf("SKIP %s: %s\n", kn->name, err);
      } else {
        rxk_fail(&st, "%s: %s does not compile for the emulator: %s", p->what, kn->name,
                 err ? err : "");
      }
      free(err);
      return false;
    }
    simt_coalescing c = {0};
    bool ok = rxk_simt_launch_only(kn, mod, e, b, &c, 0, only, why, sizeof why);
    if (!ok) rxk_fail(&st, "%s: %s", p->what, why);
    out->requests += c.loads.requests;
    out->used += c.loads.used;
    out->moved += c.loads.moved;
    bank.phases += c.shared_loads.phases + c.shared_stores.phases;
    bank.conflicts += c.shared_loads.conflicts + c.shared_stores.conflicts;
    simt_coalescing_free(&c);
    simt_module_free(mod);
    if (!ok) return false;
  }
  return true;
}

/* The weight formats: f16 (scheme NULL), relaxc's q4f16_g32 (packed nibbles and f16 scales per
 * group of 32: two buffers) and GGUF's block formats (one u8 buffer of blocks, scale inside:
 * Q4_0's 18 bytes per 32 weights, Q4_K's 144 per 256), as a GGUF file's experts are kept
 * (frontends/gguf/experts.c). */
typedef struct wformat {
  const char *scheme;
  int block, bytes; /* weights per block and its bytes (GGUF); q4f16_g32: the group, 0 */
  /* an expected failure of MAX_RATIO where a row's bytes are no multiple of 4 (the cases the
   * reason names), with its reason (NULL: none): its figures printed, and a failure of its own
   * once such a case passes (then the reason goes) */
  const char *xfail;
} wformat;
/* GGUF's blocks: a block's quants start 2 (Q4_0) or 16 (Q4_K) bytes into it, not where
 * gemv_rows' packed 16-byte staging reads (gemv_packed.c); read weight by weight through quant.c's
 * reader they measured 2.2x asked and 19.8x moved for Q4_0, 23x and 40x for Q4_K. gemv_rows
 * copies each step's bytes of a warp's rows into shared memory instead, consecutive lanes on
 * consecutive 16-byte units (passes/schedule/gemv_blocks.c): 1.000x both. Q8_0 (34 bytes a
 * block) the same way, and Q6_K (210 bytes per 256) where a row's bytes are a multiple of 4 (K /
 * 256 even: 1.000x at K = 4096). Q6_K rows of 2 mod 4 bytes (K = 256, 11008) are copied 2 bytes
 * a lane, which the printers emit as byte loads (their vectors start at 4 bytes): 1.000x asked,
 * 2.8x moved (35.9x before), an expected failure. */
#define Q6K_XFAIL                                                                                  \
  "Q6_K rows of 2 mod 4 bytes copied a byte a load (the printers' vectors start at 4 bytes): the " \
  "copy would start 4-aligned below the row (issue 32)"
static const wformat FORMATS[] = {{NULL, 0, 0, NULL},     {"q4f16_g32", 32, 0, NULL},
                                  {"Q4_0", 32, 18, NULL}, {"Q4_K", 256, 144, NULL},
                                  {"Q8_0", 32, 34, NULL}, {"Q6_K", 256, 210, Q6K_XFAIL}};

/* The verdict on a kernel that asks for `used` and moves `moved` times the bytes it must read. */
static void verdict(const wformat *fm, int64_t row_bytes, const char *what, double used,
                    double moved) {
  const char *xfail = row_bytes % 4 ? fm->xfail : NULL;
  if (bank.phases)
    printf("  shared memory: %llu phases, %llu bank conflicts\n", bank.phases, bank.conflicts);
  /* fewer bytes asked than the rows hold: some were not read (a wrong product, which test_moe
   * and test_quant would see too); more sectors moved than MAX_RATIO times them: the kernel reads
   * more than the active parameters (other experts' rows, or the same bytes again) */
  if (used < 1) {
    rxk_fail(&st, "%s: the lanes ask for %.3f x the active bytes (expected at least 1)", what,
             used);
  } else if (moved <= MAX_RATIO && xfail) {
    rxk_fail(&st, "%s: moves %.3f x, at most %.1f: an expected failure passes (remove it: %s)",
             what, moved, MAX_RATIO, xfail);
  } else if (moved <= MAX_RATIO) {
    st.passed++;
  } else if (xfail) {
    printf("  expected failure: %s\n", xfail);
    st.passed++;
  } else {
    rxk_fail(&st, "%s: the warps move %.3f x the active bytes (expected at most %.1f)", what, moved,
             MAX_RATIO);
  }
}

/* One moe_gemv: w [E, N, HIDDEN or INTER] in format fm, x of b rows (gathered: b k rows); the
 * bytes it moves from the weight (and its scales) against b k experts' rows. */
static void check_case(const wformat *fm, bool gated, int64_t b) {
  int64_t N = gated ? 2 * INTER : HIDDEN, K = gated ? HIDDEN : INTER, G = 32;
  const char *scheme = fm->scheme;
  bool q4 = scheme != NULL && !fm->bytes, gguf = fm->bytes > 0;
  if (gguf && K % fm->block) return; /* Q4_K's 256-weight blocks: the gate-up projection only */
  char text[1024], what[160];
  if (q4)
    snprintf(text, sizeof text,
             "graph_fn main(x: f16[%s, %lld], w: u8[%d, %lld, %lld], s: f16[%d, %lld, %lld], ex: "
             "i32[b, %d]) {\n  y = moe_gemv(x, w, s, ex, gathered=%s, gated=%s, scheme=\"%s\")\n"
             "  return y\n}\n",
             gated ? "b" : "b * 2", (long long)K, E, (long long)N, (long long)K / 2, E,
             (long long)N, (long long)(K / G), K_TOP, gated ? "false" : "true",
             gated ? "true" : "false", scheme);
  else if (gguf)
    snprintf(text, sizeof text,
             "graph_fn main(x: f16[%s, %lld], w: u8[%d, %lld, %lld], ex: i32[b, %d]) {\n  y = "
             "moe_gemv(x, w, ex, gathered=%s, gated=%s, scheme=\"%s\")\n  return y\n}\n",
             gated ? "b" : "b * 2", (long long)K, E, (long long)N,
             (long long)(K / fm->block * fm->bytes), K_TOP, gated ? "false" : "true",
             gated ? "true" : "false", scheme);
  else
    snprintf(text, sizeof text,
             "graph_fn main(x: f16[%s, %lld], w: f16[%d, %lld, %lld], ex: i32[b, %d]) {\n  y = "
             "moe_gemv(x, w, ex, gathered=%s, gated=%s)\n  return y\n}\n",
             gated ? "b" : "b * 2", (long long)K, E, (long long)N, (long long)K, K_TOP,
             gated ? "false" : "true", gated ? "true" : "false");
  snprintf(what, sizeof what, "moe_gemv %s %s w [%d, %lld, %lld] b=%lld", scheme ? scheme : "f16",
           gated ? "gate-up (gated)" : "down (gathered)", E, (long long)N, (long long)K,
           (long long)b);
  rxk_oneop p;
  if (!rxk_oneop_build(&p, text, what, "moe_gemv", filter, &st, &vk)) {
    rxk_oneop_free(&p);
    return;
  }
  rxk_env e;
  rxk_program_vars(p.f, &e);
  for (int i = 0; i < e.n; i++) e.values[i] = b;
  rxk_buffers bufs;
  char why[256];
  if (!rxk_make_buffers(p.f, &e, &bufs, why, sizeof why)) {
    rxk_fail(&st, "%s: %s", what, why);
    rxk_oneop_free(&p);
    return;
  }
  rx_interp_arg *ex = rxk_oneop_param(&p, &bufs, q4 ? 3 : 2);
  for (int64_t i = 0; i < b * K_TOP; i++) ((int32_t *)ex->data)[i] = (int32_t)((i * 3) % E);
  /* the bytes of one expert's rows: its weight, and its scales when quantized */
  double row_bytes = q4     ? (double)(N * K / 2 + N * (K / G) * 2)
                     : gguf ? (double)(N * (K / fm->block) * fm->bytes)
                            : (double)(N * K * 2);
  double active = (double)(b * K_TOP) * row_bytes;
  simt_access_stats w, sc = {0};
  bool ok = moved_bytes(&p, &e, &bufs, param_index(&p, &bufs, 1), &w);
  if (ok && q4) ok = moved_bytes(&p, &e, &bufs, param_index(&p, &bufs, 2), &sc);
  if (ok) {
    double used = (double)(w.used + sc.used) / active,
           moved = (double)(w.moved + sc.moved) / active;
    printf("%s: the lanes ask for %.3f x the active experts' bytes (%.0f: %lld tokens x %d "
           "experts%s), the warps move %.3f x in 32-byte sectors\n",
           what, used, active, (long long)b, K_TOP,
           q4     ? ", weight and scales"
           : gguf ? ", blocks"
                  : "",
           moved);
    verdict(fm, gguf ? K / fm->block * fm->bytes : 0, what, used, moved);
  }
  rxk_free_buffers(&bufs);
  rxk_oneop_free(&p);
}

/* The dense decode GEMV of a GGUF weight (quant_matmul, as a GGUF model's projections are
 * legalized): x [1, K] times W [M, K] in format fm, at Llama-2-7B's K (4096: the hidden size;
 * 11008: the MLP's, no multiple of a warp's step of 1024 Q4_0 weights) and M = 7 rows (the
 * pattern is the same for every row; fewer keep the traced run short). Every byte of W must be
 * read once. */
static void check_dense(const wformat *fm, int64_t K, int64_t M) {
  if (K % fm->block) return;
  int64_t rb = K / fm->block * fm->bytes;
  char text[512], what[160];
  snprintf(text, sizeof text,
           "graph_fn main(x: f16[1, %lld], w: u8[%lld, %lld]) -> f16[1, %lld] {\n  dataflow {\n"
           "    y = quant_matmul(x, w, scheme=\"%s\")\n  }\n  return y\n}\n",
           (long long)K, (long long)M, (long long)rb, (long long)M, fm->scheme);
  snprintf(what, sizeof what, "quant_matmul %s w [%lld, %lld] (dense decode GEMV)", fm->scheme,
           (long long)M, (long long)K);
  rxk_oneop p;
  if (!rxk_oneop_build(&p, text, what, "quant_matmul", filter, &st, &vk)) {
    rxk_oneop_free(&p);
    return;
  }
  rxk_env e;
  rxk_program_vars(p.f, &e);
  rxk_buffers bufs;
  char why[256];
  if (!rxk_make_buffers(p.f, &e, &bufs, why, sizeof why)) {
    rxk_fail(&st, "%s: %s", what, why);
    rxk_oneop_free(&p);
    return;
  }
  simt_access_stats w;
  double active = (double)(M * rb);
  if (moved_bytes(&p, &e, &bufs, param_index(&p, &bufs, 1), &w)) {
    double used = (double)w.used / active, moved = (double)w.moved / active;
    printf("%s: the lanes ask for %.3f x the weight's bytes (%.0f), the warps move %.3f x in "
           "32-byte sectors\n",
           what, used, active, moved);
    verdict(fm, rb, what, used, moved);
  }
  rxk_free_buffers(&bufs);
  rxk_oneop_free(&p);
}

int main(int argc, char **argv) {
  rxk_oneop_main_begin(argc, argv, &filter, &vk);
  static const int64_t batches[] = {1, 3};
  for (size_t i = 0; i < RX_ARRAY_LEN(batches); i++)
    for (size_t f = 0; f < RX_ARRAY_LEN(FORMATS); f++)
      for (int gated = 1; gated >= 0; gated--) check_case(&FORMATS[f], gated, batches[i]);
  static const int64_t dense_k[] = {4096, 11008};
  for (size_t f = 0; f < RX_ARRAY_LEN(FORMATS); f++)
    for (size_t i = 0; i < RX_ARRAY_LEN(dense_k); i++)
      if (FORMATS[f].bytes) check_dense(&FORMATS[f], dense_k[i], 7);
  int rc = rxk_oneop_main_end(&st, &vk, "test_moe_bytes");
  return rc ? rc : st.skipped && !st.passed ? 77 : 0;
}
