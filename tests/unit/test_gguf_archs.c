/* GGUF files of Qwen3, Gemma 2, Gemma 3 and Phi-3 (issue 32) against transformers: the random
 * tiny models of tests/llm/models (tiny-qwen3: q/k norms, yarn, a window on its second layer;
 * tiny-gemma2: soft-caps, sandwich norms, local/global layers, query_pre_attn_scalar; tiny-gemma3:
 * q/k norms, the local rope base, linear scaling of the global layers; tiny-phi3: fused qkv and
 * gate/up, partial rotary, longrope, a window) exported by tests/gguf/gen_models.py as
 * llama.cpp's converter writes them (architecture names and keys, tensor names, Gemma's 1 + w
 * norms, no row permutation), in F16 and in Q5_0 (what llama-quantize writes for Q4_K on rows
 * that are no whole 256-weight super-block). Each file is compiled from the .gguf
 * (frontends/gguf/model.c, the one builder of frontends/hf/llama.c) in f32 and run through
 * runtime/llm on the first backend present (lavapipe here):
 *
 * - the last logits after a prefill of 1, 7, 33 and 100 tokens and after each of 8 decode steps
 *   that feed transformers' greedy tokens, against transformers in f32 on the safetensors model
 *   (tests/llm/ref/<model>): relative L2 at most TOL_F16 for the F16 files (the same weights:
 *   the bf16 and f16 checkpoints convert to f16 exactly), TOL_Q5 for the Q5_0 files;
 * - 32 greedy tokens after the reference's prompt equal to transformers', up to the first step
 *   whose best two logits are nearer than TIE_F16 (F16) or TIE_Q5 (Q5_0; the references' nearest
 *   gaps are 0.09 and up, so all 32 are compared: the Q5_0 files give transformers' 32 tokens).
 *
 * And a true K-quant of each architecture: tests/gguf/models/<model>-256-q4_k.gguf, the -256
 * variants of those models (hidden 256, 4 heads of 64, feed-forward 256, vocab 256: every 2-D
 * weight reads whole 256-weight super-blocks) with every 2-D weight in Q4_K (llama-quantize
 * --pure Q4_K_M), against transformers in f32 on the checkpoint with its 2-D weights replaced by
 * gguf-py's dequantization of the file's blocks (tests/gguf/ref/<model>-256-q4_k: the file's
 * exact weights, so TOL_Q4K and TIE_Q4K are the F16 files' bounds; the Q4_K model's logits lie
 * 3-39% from the checkpoint's, recorded in the reference as q4_k_vs_checkpoint_rel_l2): prompts of
 * 1, 7, 33 and 100 tokens, 8 decode steps each, 32 greedy tokens.
 *
 * And the mixtures of experts (tests/gguf/gen_moe_models.py): tiny-mixtral as llama with experts,
 * tiny-qwen2-moe as qwen2moe (the shared expert and its gate, a dense layer between two sparse
 * ones, q/k/v biases, windows on layers 0 and 2), tiny-qwen3-moe as qwen3moe (a dense layer
 * before the sparse one, q/k norms): the F16 files against transformers on the file's weights
 * (tiny-qwen3-moe's f16 checkpoint is them: tests/llm/ref; tiny-mixtral's f32 and
 * tiny-qwen2-moe's bf16 rounded to f16: tests/gguf/ref/<model>-f16), and the -256 Q4_K files
 * (4 experts of 256, 2 per token, 2 layers; every projection and the experts in Q4_K) against
 * transformers on gguf-py's dequantization of their blocks (tests/gguf/ref/<model>-256-q4_k),
 * both within TOL_F16 / TOL_Q4K and their greedy tokens equal. Each model routes 2 of 4 or 8
 * experts per token: the 1-token prompt and every decode step leave experts without a token
 * (empty groups of moe_matmul; moe_gemv reading only the chosen experts' rows).
 *
 * A wrong detail fails here: without the file's attention.scale (tiny-gemma2's
 * query_pre_attn_scalar) the F16 logits are off by 1e-3 to 4e-3; with the top 2 bits of the
 * mins of Q4_K sub-blocks 4-7 taken from the scales' bytes (ops/quant.c), the Q4_K logits are
 * off by 24% to 86%.
 *
 * The random tiny models have no tokenizer: prompts are token ids (the tokenizers of GGUF files
 * are checked on their own fixtures, tests/gguf/tokenizers).
 *
 * RX_LLM_MODELS and RX_GGUF_KINDS (comma-separated substrings: tiny-phi3, q4_k) pick a subset;
 * RX_GGUF_SET=moe runs the MoE files (unit.test_gguf_moe) instead of the others
 * (unit.test_gguf_archs), so that each test stays within a couple of minutes.
 *
 * RX_LLM_QUICK=1 (make asan): the four F16 files, tiny-qwen3's Q5_0 (its quantized embedding
 * table, q/k norms and fused programs) and tiny-phi3-256's Q4_K, prompts of 7 and 33 tokens with 4
 * decode steps, 8 greedy tokens (with RX_GGUF_SET=moe: the three MoE F16 files and
 * tiny-qwen2-moe-256's Q4_K): the same code paths at a fraction of the work, which ASan
 * multiplies.
 *
 * usage: test_gguf_archs TESTS_DIR */
/* test-needs: runtime */
#include "base/base.h"
#include "base/npy.h"
#include "driver/driver.h"
#include "frontends/hf/hf.h"
#include "relaxc/llm.h"
#include "relaxc/runtime.h"
#include "support_runtime.h"
#include "targets/target.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define TOL_F16 1e-4 /* relative L2 of the logits: the checkpoint's weights, computed in f32 */
#define TOL_Q5  6e-2 /* Q5_0 weights (5 bits and a scale per 32): 3 to 4.5% measured */
#define TIE_F16 1e-3
#define TOL_Q4K 1e-4 /* the Q4_K files against transformers on their dequantized weights (f32) */
#define TIE_Q4K 1e-3 /* their references' nearest gaps: 0.013 (tiny-gemma2-256) and up */
#define TIE_Q5  5e-2
#define STEPS   8 /* decode steps after each prompt */

static int passed, failed;

#define FAIL(...)                                                                                  \
  do {                                                                                             \
    failed++;                                                                                      \
    fprintf(stderr, "FAIL: " __VA_ARGS__);                                                         \
    fputc('\n', stderr);                                                                           \
  } while (0)

static bool ok_status(rx_status s, const char *what) {
  if (!s) return true;
  FAIL("%s: %s", what, rx_status_message(s));
  rx_status_free(s);
  return false;
}

static const char *const lengths[] = {"1", "7", "33", "100"};
static bool quick; /* RX_LLM_QUICK */

/* An int array of the reference into ids (heap); its length. */
static size_t ids_of(const cJSON *arr, int32_t **ids) {
  size_t n = (size_t)cJSON_GetArraySize(arr);
  *ids = base_calloc(n + 1, sizeof **ids);
  for (size_t i = 0; i < n; i++) (*ids)[i] = (int32_t)cJSON_GetArrayItem(arr, (int)i)->valueint;
  return n;
}

/* tests/llm/ref/<model>/<file> as f32 (count values), or NULL after reporting. */
static float *load_npy(const char *dir, const char *file, size_t *count) {
  char path[1200];
  snprintf(path, sizeof path, "%s/%s", dir, file ? file : "(none)");
  rx_npy a;
  if (!ok_status(base_npy_read(path, &a), path)) return NULL;
  if (a.dtype != RX_DTYPE_F32) {
    FAIL("%s: expected f32", path);
    free(a.data);
    return NULL;
  }
  *count = a.nbytes / sizeof(float);
  return (float *)a.data;
}

/* The .gguf at src compiled in f32 for bs's target into path. */
static bool compile(const char *src, const rxk_backend *bs, const char *path) {
  rx_module *m = rx_module_new();
  rx_hf_options ho = {.dtype = RX_DTYPE_F32, .max_batch = 4};
  bool ok = ok_status(hf_import(m, src, &ho), src);
  rx_compile_options o = {0};
  o.cache = rxk_kcache(); /* support_kcache.c */
  o.targets[o.ntargets++] = &bs->target;
  rx_compile_result r;
  memset(&r, 0, sizeof r);
  rx_diag diag;
  base_diag_init(&diag);
  if (ok && !(ok = drv_compile(m, &o, &diag, &r))) FAIL("compile %s: %s", src, rx_diag_text(&diag));
  if (ok) ok = ok_status(drv_artifact_write_file(path, r.artifact, r.artifact_len), path);
  drv_compile_result_free(&r);
  base_diag_free(&diag);
  rx_module_free(m);
  return ok;
}

static void check(const char *what, const float *got, const float *want, size_t n, double tol,
                  double *worst) {
  double e = rxk_rel_l2(got, want, n);
  if (e > *worst || e != e) *worst = e;
  if (!(e <= tol))
    FAIL("%s: relative L2 error %.3g > %.3g", what, e, tol);
  else
    passed++;
}

/* Each prompt's prefill, then its decode steps, against the reference's logits. */
static void check_lengths(rx_llm_model *m, const cJSON *ref, const char *dir, const char *name,
                          double tol, double *worst) {
  int32_t vocab = rx_llm_model_vocab_size(m);
  float *logits = base_calloc((size_t)vocab, sizeof *logits);
  const cJSON *pre = cJSON_GetObjectItem(ref, "prefill"), *dec = cJSON_GetObjectItem(ref, "decode");
  for (size_t li = quick ? 1 : 0; li < (quick ? 3 : RX_ARRAY_LEN(lengths)); li++) {
    const char *L = lengths[li];
    const cJSON *d = cJSON_GetObjectItem(dec, L);
    int32_t *ids, *toks;
    size_t n = ids_of(cJSON_GetObjectItem(cJSON_GetObjectItem(ref, "prompts"), L), &ids);
    size_t nt = ids_of(cJSON_GetObjectItem(d, "tokens"), &toks), cnt = 0, dcnt = 0;
    float *want = load_npy(dir, cJSON_GetStringValue(cJSON_GetObjectItem(pre, L)), &cnt);
    float *dwant = load_npy(dir, cJSON_GetStringValue(cJSON_GetObjectItem(d, "logits")), &dcnt);
    char what[256];
    if (nt > (quick ? STEPS / 2 : STEPS)) nt = quick ? STEPS / 2 : STEPS;
    if (want && dwant && cnt == (size_t)vocab && dcnt >= nt * (size_t)vocab &&
        ok_status(rx_llm_prefill(m, 1, ids, n, logits), name)) {
      snprintf(what, sizeof what, "%s: prefill of %s", name, L);
      check(what, logits, want, (size_t)vocab, tol, worst);
      int64_t seq = 1;
      for (size_t i = 0; i < nt; i++) {
        if (!ok_status(rx_llm_decode(m, &seq, &toks[i], 1, logits), name)) break;
        snprintf(what, sizeof what, "%s: decode step %zu after %s", name, i + 1, L);
        check(what, logits, dwant + i * (size_t)vocab, (size_t)vocab, tol, worst);
      }
    } else if (want && dwant) {
      FAIL("%s: the reference of %s holds %zu and %zu logits for a vocabulary of %d", name, L, cnt,
           dcnt, (int)vocab);
    }
    rx_llm_model_reset(m, 1);
    free(ids);
    free(toks);
    free(want);
    free(dwant);
  }
  free(logits);
}

/* The reference's greedy tokens, compared up to its first near-tie (a gap below tie). */
static void check_greedy(rx_llm_model *m, const cJSON *ref, const char *name, double tie) {
  const cJSON *g = cJSON_GetObjectItem(ref, "greedy");
  int32_t *prompt, *want;
  size_t n = ids_of(cJSON_GetObjectItem(g, "prompt"), &prompt);
  size_t nw = ids_of(cJSON_GetObjectItem(g, "tokens"), &want), upto;
  if (quick && nw > 8) nw = 8;
  upto = nw;
  const cJSON *gaps = cJSON_GetObjectItem(g, "gaps");
  for (size_t i = 0; i < nw && upto == nw; i++)
    if (cJSON_GetArrayItem(gaps, (int)i)->valuedouble < tie) upto = i;
  int32_t *got = base_calloc(nw + 1, sizeof *got);
  rx_llm_generate_params p = {.max_tokens = (int64_t)nw};
  p.sampling.temperature = 0;
  p.sampling.top_p = 1;
  p.sampling.repetition_penalty = 1;
  rx_llm_generate_stats st;
  if (ok_status(rx_llm_generate(m, 2, prompt, n, &p, got, &st), name)) {
    size_t i = 0;
    while (i < upto && i < st.new_tokens && got[i] == want[i]) i++;
    if (i < upto || upto < 8)
      FAIL("%s: greedy token %zu is %d, transformers says %d (compared up to %zu, at least 8)",
           name, i, i < st.new_tokens ? got[i] : -1, i < nw ? want[i] : -1, upto);
    else
      passed++;
    fprintf(stderr, "  %s: %zu greedy tokens equal to transformers' (of %zu; near-tie after %zu)\n",
            name, i, nw, upto);
  }
  rx_llm_model_reset(m, 2);
  free(prompt);
  free(want);
  free(got);
}

/* gguf/models/<model>-<kind>.gguf against the reference <refs>/<ref>.json (and its folder). */
static void run_file(const char *tests, const char *model, const char *kind, const char *refs,
                     const char *refname, double tol, double tie, const rxk_backend *bs) {
  char src[1024], refpath[1024], dir[1024], path[256], spec[64], name[128];
  snprintf(src, sizeof src, "%s/gguf/models/%s-%s.gguf", tests, model, kind);
  snprintf(refpath, sizeof refpath, "%s/%s/%s.json", tests, refs, refname);
  snprintf(dir, sizeof dir, "%s/%s/%s", tests, refs, refname);
  snprintf(path, sizeof path, "/tmp/rx_test_gguf_archs_%d.rxm", (int)getpid());
  snprintf(spec, sizeof spec, "%s:0", rx_rt_backend_name(bs->kind));
  snprintf(name, sizeof name, "%s-%s.gguf", model, kind);
  const char *kinds = getenv("RX_GGUF_KINDS"); /* a comma-separated subset, for debugging */
  if (kinds && !strstr(kinds, kind)) return;
  char *text = NULL;
  size_t len = 0;
  if (!ok_status(base_read_file(refpath, &text, &len), refpath)) return;
  cJSON *ref = cJSON_ParseWithLength(text, len);
  free(text);
  if (!ref) {
    FAIL("%s: not JSON", refpath);
    return;
  }
  if (compile(src, bs, path)) {
    rx_llm_model_options mo = {.device = spec, .capacity = 2048, .max_sequences = 4};
    rx_llm_model *m = NULL;
    if (ok_status(rx_llm_model_load(path, &mo, &m), name)) {
      double worst = 0;
      check_lengths(m, ref, dir, name, tol, &worst);
      check_greedy(m, ref, name, tie);
      fprintf(stderr, "  %s: logits' largest relative L2 error %.3g (bound %.3g)\n", name, worst,
              tol);
    }
    rx_llm_model_free(m);
  }
  unlink(path);
  cJSON_Delete(ref);
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: test_gguf_archs TESTS_DIR\n");
    return 2;
  }
  rxk_backend bs[2] = {{.kind = RX_RT_BACKEND_VULKAN}, {.kind = RX_RT_BACKEND_CUDA}};
  rxk_backend *use = rxk_rt_first_present(bs, 2);
  if (!use) {
    fprintf(stderr, "SKIP: no backend present\n");
    return 77;
  }
  const char *models[] = {"tiny-qwen3", "tiny-gemma2", "tiny-gemma3", "tiny-phi3"};
  const char *only = getenv("RX_LLM_MODELS"); /* a comma-separated subset, for debugging */
  const char *q = getenv("RX_LLM_QUICK");
  quick = q && *q && strcmp(q, "0");
  const char *set = getenv("RX_GGUF_SET"); /* "moe": the MoE files only (unit.test_gguf_moe) */
  bool moe_set = set && !strcmp(set, "moe");
  for (size_t i = 0; i < RX_ARRAY_LEN(models) && !moe_set; i++) {
    if (only && !strstr(only, models[i])) continue;
    run_file(argv[1], models[i], "f16", "llm/ref", models[i], TOL_F16, TIE_F16, use);
    if (!quick || i == 0)
      run_file(argv[1], models[i], "q5_0", "llm/ref", models[i], TOL_Q5, TIE_Q5, use);
    char k256[64], kref[80];
    snprintf(k256, sizeof k256, "%s-256", models[i]);
    snprintf(kref, sizeof kref, "%s-q4_k", k256);
    if (!quick || i == 3) run_file(argv[1], k256, "q4_k", "gguf/ref", kref, TOL_Q4K, TIE_Q4K, use);
  }
  /* the mixtures of experts (tests/gguf/gen_moe_models.py): F16 against the checkpoint's
   * reference (tiny-qwen3-moe's f16 weights are the file's) or against transformers on the
   * weights rounded to f16 (the file's: tiny-mixtral's f32, tiny-qwen2-moe's bf16),
   * the -256 Q4_K files against transformers on their dequantized blocks */
  const char *moe[] = {"tiny-mixtral", "tiny-qwen2-moe", "tiny-qwen3-moe"};
  for (size_t i = 0; i < RX_ARRAY_LEN(moe) && moe_set; i++) {
    if (only && !strstr(only, moe[i])) continue;
    char k256[64], kref[80], fref[80];
    snprintf(fref, sizeof fref, "%s-f16", moe[i]);
    bool f32_ckpt = i < 2; /* the file rounds the checkpoint's weights */
    run_file(argv[1], moe[i], "f16", f32_ckpt ? "gguf/ref" : "llm/ref", f32_ckpt ? fref : moe[i],
             TOL_F16, TIE_F16, use);
    snprintf(k256, sizeof k256, "%s-256", moe[i]);
    snprintf(kref, sizeof kref, "%s-q4_k", k256);
    if (!quick || i == 1) run_file(argv[1], k256, "q4_k", "gguf/ref", kref, TOL_Q4K, TIE_Q4K, use);
  }
  fprintf(stderr, "test_gguf_archs: %d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
