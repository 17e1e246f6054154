/* GGUF models end to end (issue 15): the trained tiny Llama (tests/llm/models/kjv-llama) as
 * tests/gguf/gen_models.py exports it with gguf-py (F16, Q8_0, Q4_0, and Q5_0: what llama.cpp's
 * Q4_K quantization writes for this model, whose rows of 128 and 352 weights are no whole Q4_K
 * super-block, so llama-quantize falls back to Q5_0 for every tensor; llama.cpp's tensor names,
 * its converter's q/k row permutation, the byte-level BPE tokenizer in tokenizer.ggml.*), compiled
 * from the .gguf file (frontends/gguf/model.c) and run through runtime/llm on the first backend
 * present (lavapipe here), next to the same model compiled from its safetensors folder in f16 and
 * with --quantize q8f16 and q4f16_g32, and with those and --quantize-embeddings (the embedding
 * table through quant_take and the output layer through quant_matmul in the same scheme); and
 * the trained kjv-llama-256 (the same text and tokenizer, hidden 256 and feed-forward 768, so
 * that every row is whole Q4_K super-blocks) from its folder in f16 and as GGUF F16 and Q4_K
 * (every 2-D tensor in Q4_K, as llama-quantize --pure Q4_K_M writes it):
 *
 * - the perplexity of each on the held-back text (tests/llm/models/<model>/heldout.txt,
 *   tokenized by each artifact's own tokenizer: the GGUF files' comes from tokenizer.ggml.*, so
 *   the token ids must equal the folder's), over NWIN windows of <s> + WIN tokens, all decoded
 *   at once (BATCH sequences of one decode call); each token's probability from the
 *   logits of the step before it. Within TOL_SAME of its safetensors f16 model for the GGUF F16
 *   file (the same f16 weights), 5% for the 8-bit ones and 20% for the 4-bit ones (issue 15);
 *   every figure printed (docs/gguf.md and README quote them);
 * - with --quantize-embeddings, the prompt's last logits against the folder's in f16: the largest
 *   difference within LOGIT_8BIT / LOGIT_4BIT of the largest f16 logit (printed);
 * - 16 greedy tokens of the f16 and 8-bit variants equal to transformers' (the prompt and the
 *   first 16 tokens of tests/llm/ref/<model>.json's "greedy"; lit's gguf.test checks the text
 *   of `relaxc generate`).
 *
 * RX_LLM_QUICK=1 (make asan): the folder's f16 and the Q8_0 and Q4_0 files only (the variants
 * marked quick), the same code paths (the GGUF F16 and Q5_0 files and --quantize run no code the
 * others do not, but for quant_take, which test_quant runs; Q4_K's, lit's gguf.test runs on
 * tiny-llama-q4_k.gguf).
 *
 * usage: test_gguf_llm TESTS_DIR */
/* test-needs: runtime */
#include "base/base.h"
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

#define NWIN     8     /* windows of the held-back text, */
#define WIN      31    /* each <s> and 31 tokens (the model was trained on windows of 128), */
#define BATCH    8     /* decoded together: 31 decode steps per variant, seconds on lavapipe */
#define TOL_SAME 0.002 /* GGUF F16 against the folder in f16: the same weights */
#define TOL_8BIT 0.05
#define TOL_4BIT 0.20
#define GREEDY   16
/* --quantize-embeddings: the prompt's last logits against f16's, max |d| / max |f16 logit| */
#define LOGIT_8BIT 0.05
#define LOGIT_4BIT 0.25

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

/* The model at src (a folder or a .gguf file) compiled for bs's target into path. */
static bool compile(const char *src, const char *quantize, bool emb, const rxk_backend *bs,
                    const char *path) {
  rx_module *m = rx_module_new();
  rx_hf_options ho = {
      .dtype = RX_DTYPE_F16, .max_batch = BATCH, .quantize = quantize, .quantize_embeddings = emb};
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

/* -log p(want) of one row of logits */
static double nll(const float *logits, int32_t vocab, int32_t want) {
  double mx = logits[0], sum = 0;
  for (int32_t i = 1; i < vocab; i++) mx = logits[i] > mx ? logits[i] : mx;
  for (int32_t i = 0; i < vocab; i++) sum += exp((double)logits[i] - mx);
  return log(sum) + mx - (double)logits[want];
}

/* The perplexity over NWIN windows of ids (each <s> then WIN tokens), BATCH at a time: a prefill
 * of <s> per window, then decode steps feeding each window's tokens. */
static bool perplexity(rx_llm_model *m, const int32_t *ids, size_t n, const char *name,
                       double *out) {
  int32_t vocab = rx_llm_model_vocab_size(m), bos = rx_llm_model_bos_id(m);
  if (n < (size_t)(NWIN * WIN) || bos < 0) {
    FAIL("%s: %zu tokens of held-back text (want %d), BOS %d", name, n, NWIN * WIN, (int)bos);
    return false;
  }
  float *logits = base_calloc((size_t)(BATCH * vocab), sizeof *logits);
  double sum = 0;
  bool ok = true;
  for (int w0 = 0; ok && w0 < NWIN; w0 += BATCH) {
    int64_t seqs[BATCH];
    int32_t feed[BATCH];
    for (int b = 0; ok && b < BATCH; b++) {
      seqs[b] = b;
      ok = ok_status(rx_llm_prefill(m, b, &bos, 1, logits + b * vocab), name);
    }
    for (int t = 0; ok && t < WIN; t++) {
      for (int b = 0; b < BATCH; b++) {
        feed[b] = ids[(size_t)(w0 + b) * WIN + (size_t)t];
        sum += nll(logits + b * vocab, vocab, feed[b]);
      }
      if (t + 1 < WIN) ok = ok_status(rx_llm_decode(m, seqs, feed, BATCH, logits), name);
    }
    for (int b = 0; b < BATCH; b++) rx_llm_model_reset(m, b);
  }
  free(logits);
  *out = exp(sum / (NWIN * WIN));
  return ok;
}

/* GREEDY greedy tokens after the reference's prompt against the reference's */
static void check_greedy(rx_llm_model *m, const char *name, const int32_t *prompt, size_t n,
                         const int32_t *want) {
  int32_t vocab = rx_llm_model_vocab_size(m);
  float *logits = base_calloc((size_t)vocab, sizeof *logits);
  bool ok = ok_status(rx_llm_prefill(m, 0, prompt, n, logits), name);
  for (int i = 0; ok && i < GREEDY; i++) {
    int32_t best = 0;
    for (int32_t v = 1; v < vocab; v++) best = logits[v] > logits[best] ? v : best;
    if (best != want[i]) {
      FAIL("%s: greedy token %d is %d, transformers' %d", name, i, (int)best, (int)want[i]);
      ok = false;
      break;
    }
    int64_t seq = 0;
    if (i + 1 < GREEDY) ok = ok_status(rx_llm_decode(m, &seq, &best, 1, logits), name);
  }
  if (ok) passed++;
  rx_llm_model_reset(m, 0);
  free(logits);
}

typedef struct variant {
  const char *model;                  /* the folder under tests/llm/models */
  const char *name, *file, *quantize; /* file: under tests/gguf/models, NULL: the folder */
  double tol;       /* against the model's folder in f16; < 0: the reference itself (first) */
  bool emb;         /* --quantize-embeddings */
  double logit_tol; /* > 0: the prompt's last logits against f16's, max|d| / max|f16| */
  bool quick;       /* run under RX_LLM_QUICK too */
} variant;

#define KJV     "kjv-llama"
#define KJV_256 "kjv-llama-256"
/* Grouped by model, each group's reference first. */
static const variant variants[] = {
    {KJV, "safetensors f16", NULL, NULL, -1, false, 0, true},
    {KJV, "GGUF F16", "kjv-llama-f16.gguf", NULL, TOL_SAME, false, 0, false},
    {KJV, "GGUF Q8_0", "kjv-llama-q8_0.gguf", NULL, TOL_8BIT, false, 0, true},
    {KJV, "GGUF Q4_0", "kjv-llama-q4_0.gguf", NULL, TOL_4BIT, false, 0, true},
    /* llama.cpp's Q4_K of this model: no row is a whole 256-weight super-block, so every tensor
       falls back to Q5_0 (tests/gguf/gen_models.py) */
    {KJV, "GGUF Q4_K (all Q5_0)", "kjv-llama-q5_0.gguf", NULL, TOL_4BIT, false, 0, false},
    {KJV, "--quantize q8f16", NULL, "q8f16", TOL_8BIT, false, 0, false},
    {KJV, "--quantize q4f16_g32", NULL, "q4f16_g32", TOL_4BIT, false, 0, false},
    {KJV, "q8f16 + embeddings", NULL, "q8f16", TOL_8BIT, true, LOGIT_8BIT, false},
    {KJV, "q4f16_g32 + embeddings", NULL, "q4f16_g32", TOL_4BIT, true, LOGIT_4BIT, false},
    /* the same text and tokenizer, rows of 256 and 768 weights: every 2-D tensor in Q4_K */
    {KJV_256, "safetensors f16", NULL, NULL, -1, false, 0, false},
    {KJV_256, "GGUF F16", "kjv-llama-256-f16.gguf", NULL, TOL_SAME, false, 0, false},
    {KJV_256, "GGUF Q4_K", "kjv-llama-256-q4_k.gguf", NULL, TOL_4BIT, false, 0, false},
};
static float *f16_logits; /* the prompt's last logits of the current model's folder in f16 */

/* The prompt's last logits of m against the folder's in f16: the largest difference over the
 * largest f16 logit, within v->logit_tol. */
static void check_logits(rx_llm_model *m, const variant *v, const int32_t *prompt, size_t n) {
  int32_t vocab = rx_llm_model_vocab_size(m);
  float *logits = base_calloc((size_t)vocab, sizeof *logits);
  if (ok_status(rx_llm_prefill(m, 0, prompt, n, logits), v->name)) {
    if (v->tol < 0) {
      free(f16_logits);
      f16_logits = logits;
      logits = NULL;
    } else if (f16_logits) {
      double dmax = 0, ref = 0;
      for (int32_t i = 0; i < vocab; i++) {
        dmax = fmax(dmax, fabs((double)logits[i] - f16_logits[i]));
        ref = fmax(ref, fabs((double)f16_logits[i]));
      }
      fprintf(stderr,
              "  %-13s %-22s logits: max |d| %.3f, %.2f%% of max |f16| %.3f (bound %.0f%%)\n",
              v->model, v->name, dmax, 100 * dmax / ref, ref, 100 * v->logit_tol);
      if (!(dmax <= v->logit_tol * ref))
        FAIL("%s: logits differ from f16's by %.3f, more than %.0f%% of %.3f", v->name, dmax,
             100 * v->logit_tol, ref);
      else
        passed++;
    }
  }
  rx_llm_model_reset(m, 0);
  free(logits);
}

/* the held-back text's tokens by the folder's own tokenizer.json, the greedy reference */
typedef struct inputs {
  int32_t *ids; /* the held-back text */
  size_t n;
  int32_t prompt[64], greedy[GREEDY];
  size_t nprompt;
} inputs;

static bool load_inputs(const char *tests, const char *model, inputs *in) {
  char path[1024];
  snprintf(path, sizeof path, "%s/llm/models/%s/tokenizer.json", tests, model);
  rx_tokenizer *tok = NULL;
  char *text = NULL, *ref = NULL;
  size_t len = 0, rlen = 0;
  bool ok = ok_status(rx_tokenizer_load_file(path, &tok), path);
  snprintf(path, sizeof path, "%s/llm/models/%s/heldout.txt", tests, model);
  if (ok) ok = ok_status(base_read_file(path, &text, &len), path);
  if (ok) ok = ok_status(rx_tokenizer_encode(tok, text, len, 0, &in->ids, &in->n), path);
  snprintf(path, sizeof path, "%s/llm/ref/%s.json", tests, model);
  if (ok) ok = ok_status(base_read_file(path, &ref, &rlen), path);
  cJSON *j = ok ? cJSON_ParseWithLength(ref, rlen) : NULL;
  const cJSON *g = j ? cJSON_GetObjectItem(j, "greedy") : NULL;
  const cJSON *p = cJSON_GetObjectItem(g, "prompt"), *t = cJSON_GetObjectItem(g, "tokens");
  int np = cJSON_GetArraySize(p);
  if (ok && (cJSON_GetArraySize(t) < GREEDY || np < 1 || np > 64)) {
    FAIL("%s: no \"greedy\" prompt and %d tokens", path, GREEDY);
    ok = false;
  }
  for (int i = 0; ok && i < GREEDY; i++) in->greedy[i] = cJSON_GetArrayItem(t, i)->valueint;
  for (int i = 0; ok && i < np; i++) in->prompt[i] = cJSON_GetArrayItem(p, i)->valueint;
  in->nprompt = ok ? (size_t)np : 0;
  cJSON_Delete(j);
  free(ref);
  free(text);
  rx_tokenizer_free(tok);
  return ok;
}

/* Each variant compiled, loaded, its tokens of the text checked, its perplexity measured. */
static void run_variant(const char *tests, const variant *v, const rxk_backend *bs,
                        const inputs *in, double *ppl) {
  char src[1024], path[256], spec[64];
  if (v->file)
    snprintf(src, sizeof src, "%s/gguf/models/%s", tests, v->file);
  else
    snprintf(src, sizeof src, "%s/llm/models/%s", tests, v->model);
  snprintf(path, sizeof path, "/tmp/rx_test_gguf_llm_%d.rxm", (int)getpid());
  snprintf(spec, sizeof spec, "%s:0", rx_rt_backend_name(bs->kind));
  *ppl = NAN;
  if (!compile(src, v->quantize, v->emb, bs, path)) return;
  rx_llm_model_options mo = {.device = spec, .capacity = 4096, .max_sequences = BATCH};
  rx_llm_model *m = NULL;
  if (ok_status(rx_llm_model_load(path, &mo, &m), v->name)) {
    int32_t *own = NULL;
    size_t nown = 0;
    const rx_tokenizer *tok = rx_llm_model_tokenizer(m);
    char *text = NULL;
    size_t len = 0;
    snprintf(src, sizeof src, "%s/llm/models/%s/heldout.txt", tests, v->model);
    if (tok && ok_status(base_read_file(src, &text, &len), src) &&
        ok_status(rx_tokenizer_encode(tok, text, len, 0, &own, &nown), v->name)) {
      if (nown != in->n || memcmp(own, in->ids, in->n * sizeof *own) != 0)
        FAIL("%s: its tokenizer gives %zu tokens of the held-back text, the folder's %zu (or "
             "other ids)",
             v->name, nown, in->n);
      else
        passed++;
    }
    free(text);
    rx_llm_free(own);
    if (v->tol < 0 || v->logit_tol > 0) check_logits(m, v, in->prompt, in->nprompt);
    if (v->tol <= TOL_8BIT) check_greedy(m, v->name, in->prompt, in->nprompt, in->greedy);
    if (!perplexity(m, in->ids, in->n, v->name, ppl)) *ppl = NAN;
  }
  rx_llm_model_free(m);
  unlink(path);
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: test_gguf_llm TESTS_DIR\n");
    return 2;
  }
  rxk_backend bs[2] = {{.kind = RX_RT_BACKEND_VULKAN}, {.kind = RX_RT_BACKEND_CUDA}};
  rxk_backend *use = rxk_rt_first_present(bs, 2);
  if (!use) {
    fprintf(stderr, "SKIP: no backend present\n");
    return 77;
  }
  const char *q = getenv("RX_LLM_QUICK");
  bool quick = q && *q && strcmp(q, "0");
  double ppl[RX_ARRAY_LEN(variants)];
  inputs in = {0};
  bool have = false;
  for (size_t i = 0; i < RX_ARRAY_LEN(variants); i++) {
    ppl[i] = NAN;
    if (quick && !variants[i].quick) continue;
    if (variants[i].tol < 0) { /* a model's first variant: its text and references */
      rx_llm_free(in.ids);
      memset(&in, 0, sizeof in);
      have = load_inputs(argv[1], variants[i].model, &in);
    }
    if (have) run_variant(argv[1], &variants[i], use, &in, &ppl[i]);
  }
  for (size_t i = 0, ref = 0; i < RX_ARRAY_LEN(variants); i++) {
    if (variants[i].tol < 0) ref = i;
    if (quick && !variants[i].quick) continue;
    double rel = ppl[i] / ppl[ref] - 1;
    fprintf(stderr, "  %-13s %-22s perplexity %.3f (%+.2f%% of f16", variants[i].model,
            variants[i].name, ppl[i], 100 * rel);
    if (variants[i].tol >= 0) fprintf(stderr, ", tolerance %.1f%%", 100 * variants[i].tol);
    fprintf(stderr, ") on %s, %d windows of <s> + %d tokens\n", rx_rt_backend_name(use->kind), NWIN,
            WIN);
    if (isnan(ppl[i]) || (variants[i].tol >= 0 && !(fabs(rel) <= variants[i].tol)))
      FAIL("%s %s: perplexity %.3f against f16's %.3f: outside %.1f%%", variants[i].model,
           variants[i].name, ppl[i], ppl[ref], 100 * variants[i].tol);
    else
      passed++;
  }
  rx_llm_free(in.ids);
  free(f16_logits);
  fprintf(stderr, "test_gguf_llm: %d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
