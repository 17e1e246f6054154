/* Batched inference and the continuous-batching scheduler (runtime/llm/batch.c, relaxc/llm.h
 * "continuous batching") on the trained tiny Llama of tests/llm/models (kjv-llama, f32, compiled
 * with --max-batch 64) on Vulkan (lavapipe here):
 *
 * - 8 prompts of different lengths (1 to 33 tokens) with different max_tokens, generated greedily
 *   by one batcher, equal token for token what rx_llm_generate gives for each alone (and what
 *   on_token saw); again with max_batch 3 (requests wait and join as others end), and on a model
 *   whose KV cache of 160 tokens makes admission wait for pages;
 * - sampling (temperature, top-k, top-p, repetition penalty) with a seed per request equals the
 *   single runs with the same seeds;
 * - a request cancelled mid-way, one released while running and one stopped by on_token free
 *   their sequences and pages (the cache ends as empty as it began); a request that joins while
 *   others run, and one submitted after, equal their single runs; a request that could never fit,
 * and malformed ones, are errors naming the numbers;
 * - one rx_llm_decode over 18 sequences equals each decoded alone;
 * - packed (ragged) prefill, rx_llm_prefill_batch: prompts of 1, 7, 16, 17 and 100 tokens in one
 *   call give each one's last-token logits within TOL_PACKED of its prefill alone, and their greedy
 *   continuations (decoded together) equal rx_llm_generate's token for token; a packed prefill that
 *   continues sequences holding tokens (and starts a new one beside them) equals prefilling each
 *   whole prompt alone; 40 sequences (more than the shape value's 16 the host program once took)
 *   prefilled in one packed call and decoded in one call per step equal 40 single runs;
 * - bad input: counts that do not sum to the ids given, more sequences than --max-batch, a decode
 *   of a sequence that holds no tokens, a sequence twice, all errors naming the numbers; a
 *   packed prefill that the KV cache cannot hold, split over three forwards of which the last
 *   fails, leaves the cache as it was;
 * - structured output: requests with four different grammars (three JSON schemas and
 *   json_object), greedy and sampled, batched together, equal their single runs through
 *   rx_llm_generate with the same grammar, and each one that ends before max_tokens is a whole
 *   JSON value (cJSON parses the decoded text);
 * - the host program itself (the artifact's prefill and decode called through the VM with a
 *   batch object made here): 40 sequences in one prefill call, and a batch that disagrees with
 *   the call's input_ids or batch_size is an error naming the builtin or the match_cast.
 *
 * usage: test_batch TESTS_DIR */
/* test-needs: runtime */
#include "base/base.h"
#include "check.h"
#include "driver/driver.h"
#include "frontends/hf/hf.h"
#include "relaxc/llm.h"
#include "relaxc/runtime.h"
#include "runtime/llm/kv_cache.h" /* the batch object, to call the artifact's functions directly */
#include "support_runtime.h"
#include "targets/target.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define NREQ   8
#define MAXTOK 24 /* at least the largest max_tokens below */
#define MAX_B  64 /* --max-batch of the artifact, and the cache's max_sequences */
/* Relative L2 distance allowed between the last-token logits of a prompt prefilled packed with
 * others and alone (f32): the projections of a packed forward run over more rows, where the
 * matmuls pick another variant (n == 1, n <= 16, or tiled) and so another summation order; the
 * largest seen on lavapipe is printed: 2.8e-7 */
#define TOL_PACKED 1e-5
static const size_t lengths[NREQ] = {1, 4, 7, 12, 16, 17, 25, 33};

static bool ok_status(rx_status s, const char *what) {
  CHECK_MSG(!s, "%s: %s", what, rx_status_message(s));
  rx_status_free(s);
  return !s;
}

/* kjv-llama in f32 for the Vulkan device's target, at most MAX_B sequences per decode. */
static bool compile(const char *tests, const rxk_backend *vk, const char *path) {
  char why[2048];
  bool ok = rxk_compile_llm(tests, "kjv-llama", MAX_B, &vk->target, path, why, sizeof why);
  CHECK_MSG(ok, "%s", why);
  return ok;
}

typedef struct job {
  int32_t prompt[40];
  size_t n;
  rx_llm_generate_params p;
  int32_t want[MAXTOK];
  size_t nwant;
  int32_t seen[MAXTOK + 1]; /* what on_token saw (ids >= 0) */
  size_t nseen;
  int64_t id;
  int stop_after; /* > 0: on_token returns false at this many tokens */
} job;

static bool on_token(void *user, int32_t id, const char *text, size_t len) {
  job *j = user;
  (void)text;
  (void)len;
  if (id >= 0 && j->nseen < MAXTOK + 1) j->seen[j->nseen++] = id;
  return !j->stop_after || (int)j->nseen < j->stop_after;
}

/* Prompt k: lengths[k] ids from a fixed pattern (never BOS 0 or EOS 1); max_tokens 4 + k. */
static void make_jobs(job *jobs, bool sample) {
  for (int k = 0; k < NREQ; k++) {
    job *j = &jobs[k];
    memset(j, 0, sizeof *j);
    j->n = lengths[k];
    for (size_t i = 0; i < j->n; i++) j->prompt[i] = (int32_t)(2 + (k * 131 + i * 37) % 1000);
    j->p.sampling = rx_sampler_default_params();
    j->p.sampling.temperature = 0;
    if (sample) {
      j->p.sampling = (rx_sampler_params){.temperature = 0.9f,
                                          .top_k = 40,
                                          .top_p = 0.95f,
                                          .repetition_penalty = 1.1f,
                                          .seed = 1000 + (uint64_t)k};
    }
    j->p.max_tokens = 4 + k;
    j->p.on_token = on_token;
    j->p.user = j;
  }
}

/* Each job alone through rx_llm_generate on sequence 100: the reference tokens. */
static void single_runs(rx_llm_model *m, job *jobs) {
  for (int k = 0; k < NREQ; k++) {
    job *j = &jobs[k];
    rx_llm_generate_params p = j->p;
    p.on_token = NULL;
    rx_llm_generate_stats st;
    if (ok_status(rx_llm_generate(m, 100, j->prompt, j->n, &p, j->want, &st), "generate"))
      j->nwant = st.new_tokens;
    rx_llm_model_reset(m, 100);
  }
}

/* Every job through one batcher of max_batch; each equal to its single run. */
static rx_llm_batcher_stats batched(rx_llm_model *m, job *jobs, int64_t max_batch,
                                    const char *what) {
  rx_llm_batcher *b = NULL;
  rx_llm_batcher_options o = {.max_batch = max_batch};
  if (!ok_status(rx_llm_batcher_create(m, &o, &b), what)) return (rx_llm_batcher_stats){0};
  for (int k = 0; k < NREQ; k++) {
    jobs[k].nseen = 0;
    ok_status(rx_llm_batcher_submit(b, jobs[k].prompt, jobs[k].n, &jobs[k].p, &jobs[k].id), what);
  }
  ok_status(rx_llm_batcher_run(b), what);
  rx_llm_batcher_stats st = rx_llm_batcher_get_stats(b);
  int same = 0;
  for (int k = 0; k < NREQ; k++) {
    job *j = &jobs[k];
    rx_llm_request_info info;
    if (!ok_status(rx_llm_batcher_poll(b, j->id, &info), what)) continue;
    bool eq = info.count == j->nwant && !memcmp(info.ids, j->want, j->nwant * sizeof *j->want) &&
              j->nseen == j->nwant && !memcmp(j->seen, j->want, j->nwant * sizeof *j->want);
    bool end = info.state ==
               (j->nwant < (size_t)j->p.max_tokens ? RX_LLM_REQUEST_EOS : RX_LLM_REQUEST_LENGTH);
    CHECK_MSG(eq && end,
              "%s: request %d (prompt %zu): %zu tokens, state %d; the single run gave %zu", what, k,
              j->n, info.count, (int)info.state, j->nwant);
    same += eq && end;
    ok_status(rx_llm_batcher_release(b, j->id), what);
  }
  CHECK_MSG(st.max_rows <= max_batch && st.finished == NREQ && !st.running && !st.waiting,
            "%s: stats: largest decode %lld (max_batch %lld), %lld finished", what,
            (long long)st.max_rows, (long long)max_batch, (long long)st.finished);
  CHECK_MSG(rx_llm_model_sequences(m) == 0 &&
                rx_llm_model_kv_free_tokens(m) == rx_llm_model_kv_capacity(m),
            "%s: %lld sequences and %lld of %lld KV tokens in use after", what,
            (long long)rx_llm_model_sequences(m),
            (long long)(rx_llm_model_kv_capacity(m) - rx_llm_model_kv_free_tokens(m)),
            (long long)rx_llm_model_kv_capacity(m));
  fprintf(stderr, "  %s: %d of %d equal; %lld steps, %lld decodes, mean batch %.2f, largest %lld\n",
          what, same, NREQ, (long long)st.steps, (long long)st.decodes,
          st.decodes ? (double)st.decode_rows / (double)st.decodes : 0.0, (long long)st.max_rows);
  rx_llm_batcher_free(b);
  return st;
}

/* Cancel, release and stop mid-way free their pages; a later request still runs. */
static void leaving(rx_llm_model *m, job *jobs) {
  rx_llm_batcher *b = NULL;
  if (!ok_status(rx_llm_batcher_create(m, NULL, &b), "leaving")) return;
  for (int k = 0; k < 4; k++) jobs[k].nseen = 0;
  jobs[3].stop_after = 3;
  for (int k = 0; k < 4; k++)
    ok_status(rx_llm_batcher_submit(b, jobs[k].prompt, jobs[k].n, &jobs[k].p, &jobs[k].id),
              "submit");
  for (int i = 0; i < 2; i++) ok_status(rx_llm_batcher_step(b, NULL), "step");
  /* slots are taken in admission order: request k runs on sequence k */
  int64_t held = rx_llm_model_seq_len(m, 1), free0 = rx_llm_model_kv_free_tokens(m);
  ok_status(rx_llm_batcher_cancel(b, jobs[1].id), "cancel");
  CHECK_MSG(held > 0 && rx_llm_model_seq_len(m, 1) == 0 && rx_llm_model_kv_free_tokens(m) > free0,
            "cancel: sequence 1 held %lld tokens, now %lld; free KV tokens %lld, were %lld",
            (long long)held, (long long)rx_llm_model_seq_len(m, 1),
            (long long)rx_llm_model_kv_free_tokens(m), (long long)free0);
  ok_status(rx_llm_batcher_release(b, jobs[2].id), "release");
  CHECK_MSG(rx_llm_model_seq_len(m, 2) == 0, "release: sequence 2 still holds tokens");
  rx_llm_request_info info;
  rx_status s = rx_llm_batcher_poll(b, jobs[2].id, &info);
  CHECK_MSG(s != NULL, "poll of a released request");
  rx_status_free(s);
  jobs[4].nseen = 0; /* a request that joins while others run */
  ok_status(rx_llm_batcher_submit(b, jobs[4].prompt, jobs[4].n, &jobs[4].p, &jobs[4].id), "submit");
  ok_status(rx_llm_batcher_run(b), "run");
  if (ok_status(rx_llm_batcher_poll(b, jobs[4].id, &info), "poll"))
    CHECK_MSG(info.count == jobs[4].nwant && !memcmp(info.ids, jobs[4].want, info.count * 4),
              "a request that joined mid-way differs from its single run");
  if (ok_status(rx_llm_batcher_poll(b, jobs[1].id, &info), "poll"))
    CHECK_MSG(info.state == RX_LLM_REQUEST_CANCELLED && info.count == 3 && /* 2 in the 1st step */
                  !memcmp(info.ids, jobs[1].want, 3 * sizeof(int32_t)),
              "cancel: state %d, %zu tokens", (int)info.state, info.count);
  if (ok_status(rx_llm_batcher_poll(b, jobs[3].id, &info), "poll"))
    CHECK_MSG(info.state == RX_LLM_REQUEST_STOPPED && info.count == 3,
              "stopped by on_token: state %d, %zu tokens", (int)info.state, info.count);
  if (ok_status(rx_llm_batcher_poll(b, jobs[0].id, &info), "poll"))
    CHECK_MSG(info.count == jobs[0].nwant && !memcmp(info.ids, jobs[0].want, info.count * 4),
              "a request beside the cancelled ones differs from its single run");
  CHECK_MSG(rx_llm_model_sequences(m) == 0 &&
                rx_llm_model_kv_free_tokens(m) == rx_llm_model_kv_capacity(m),
            "after leaving: %lld sequences held", (long long)rx_llm_model_sequences(m));
  jobs[7].nseen = 0;
  ok_status(rx_llm_batcher_submit(b, jobs[7].prompt, jobs[7].n, &jobs[7].p, &jobs[7].id), "submit");
  ok_status(rx_llm_batcher_run(b), "run");
  if (ok_status(rx_llm_batcher_poll(b, jobs[7].id, &info), "poll"))
    CHECK_MSG(info.count == jobs[7].nwant && !memcmp(info.ids, jobs[7].want, info.count * 4),
              "a request after the cancelled ones differs from its single run");
  jobs[3].stop_after = 0;
  rx_llm_batcher_free(b);
}

/* A decode over more than 16 sequences (run as calls of at most 16: the host program takes the
 * ids as a shape value) gives each row the logits of that sequence decoded alone. */
static void wide_decode(rx_llm_model *m) {
  enum { B = 18 };
  int32_t vocab = rx_llm_model_vocab_size(m);
  float *all = malloc((size_t)B * (size_t)vocab * sizeof *all), *one = malloc((size_t)vocab * 4);
  int64_t seqs[B];
  int32_t ids[B];
  bool ok = all && one;
  for (int k = 0; k < B && ok; k++) {
    seqs[k] = 200 + k;
    ids[k] = 5 + k;
    int32_t prompt[2] = {2 + k, 40 + 3 * k};
    ok = ok_status(rx_llm_prefill(m, seqs[k], prompt, 1 + (size_t)(k % 2), one), "prefill");
  }
  ok = ok && ok_status(rx_llm_decode(m, seqs, ids, B, all), "a decode of 18 sequences");
  for (int k = 0; k < B && ok; k++) {
    rx_llm_model_reset(m, seqs[k]);
    int32_t prompt[3] = {2 + k, 40 + 3 * k, 0};
    prompt[1 + k % 2] = ids[k];
    ok = ok_status(rx_llm_prefill(m, seqs[k], prompt, 2 + (size_t)(k % 2), one), "prefill");
    double num = 0, den = 0;
    for (int32_t v = 0; ok && v < vocab; v++) {
      double d = (double)all[(size_t)k * (size_t)vocab + (size_t)v] - one[v];
      num += d * d;
      den += (double)one[v] * one[v];
    }
    CHECK_MSG(ok && num <= 1e-8 * den,
              "a decode of 18 sequences: row %d differs from the sequence "
              "alone (relative L2 %.3g)",
              k, den > 0 ? num / den : num);
  }
  for (int k = 0; k < B; k++) rx_llm_model_reset(m, seqs[k]);
  free(all);
  free(one);
}

static int32_t argmax(const float *x, int32_t n) {
  int32_t best = 0;
  for (int32_t v = 1; v < n; v++)
    if (x[v] > x[best]) best = v;
  return best;
}

/* Prompt k of length len: ids from a fixed pattern (never BOS 0 or EOS 1). */
static void pattern(int32_t *ids, size_t len, int k) {
  for (size_t i = 0; i < len; i++) ids[i] = (int32_t)(2 + (k * 211 + i * 53) % 1000);
}

/* nb prompts of lengths len[] on sequences base + k: one packed prefill, each row against that
 * prompt's prefill alone (TOL_PACKED), then steps greedy tokens decoded together in one call per
 * step, each sequence's tokens against rx_llm_generate's alone. */
static void packed_greedy(rx_llm_model *m, const size_t *len, int nb, int steps, int64_t base,
                          const char *what) {
  int32_t vocab = rx_llm_model_vocab_size(m);
  size_t n = 0;
  for (int k = 0; k < nb; k++) n += len[k];
  int32_t *packed = malloc(n * sizeof *packed), *want = calloc((size_t)(nb * steps), 4);
  int32_t *got = calloc((size_t)(nb * steps), 4), *step = malloc((size_t)nb * 4);
  float *rows = malloc((size_t)nb * (size_t)vocab * 4), *one = malloc((size_t)vocab * 4);
  float *alone = malloc((size_t)nb * (size_t)vocab * 4);
  int64_t *seqs = malloc((size_t)nb * sizeof *seqs);
  size_t *wn = calloc((size_t)nb, sizeof *wn);
  bool ok = packed && want && got && step && rows && one && alone && seqs && wn;
  double worst = 0;
  size_t at = 0;
  for (int k = 0; k < nb && ok; k++) { /* the references, alone on sequence 100 */
    pattern(packed + at, len[k], k);
    seqs[k] = base + k;
    rx_llm_generate_params p = {.max_tokens = steps};
    p.sampling = rx_sampler_default_params();
    p.sampling.temperature = 0;
    rx_llm_generate_stats st;
    ok = ok_status(rx_llm_generate(m, 100, packed + at, len[k], &p, want + k * steps, &st), what);
    wn[k] = st.new_tokens;
    rx_llm_model_reset(m, 100);
    ok = ok && ok_status(rx_llm_prefill(m, 100, packed + at, len[k], one), what);
    rx_llm_model_reset(m, 100);
    at += len[k];
    if (ok) memcpy(alone + (size_t)k * (size_t)vocab, one, (size_t)vocab * 4);
  }
  ok = ok && ok_status(rx_llm_prefill_batch(m, seqs, (size_t)nb, packed, n, len, rows), what);
  for (int k = 0; k < nb && ok; k++) {
    double e = rxk_rel_l2(rows + (size_t)k * (size_t)vocab, alone + (size_t)k * (size_t)vocab,
                          (size_t)vocab);
    if (e > worst) worst = e;
    CHECK_MSG(e <= TOL_PACKED,
              "%s: the prompt of %zu tokens: packed logits at relative L2 %.3g from "
              "its prefill alone (tolerance %.0e)",
              what, len[k], e, TOL_PACKED);
    CHECK_MSG(rx_llm_model_seq_len(m, seqs[k]) == (int64_t)len[k],
              "%s: sequence %lld holds %lld tokens after its prefill of %zu", what,
              (long long)seqs[k], (long long)rx_llm_model_seq_len(m, seqs[k]), len[k]);
    got[k * steps] = argmax(rows + (size_t)k * (size_t)vocab, vocab);
  }
  for (int i = 1; i < steps && ok; i++) { /* every sequence, one decode call per step */
    for (int k = 0; k < nb; k++) step[k] = got[k * steps + i - 1];
    ok = ok_status(rx_llm_decode(m, seqs, step, (size_t)nb, rows), what);
    for (int k = 0; k < nb && ok; k++)
      got[k * steps + i] = argmax(rows + (size_t)k * (size_t)vocab, vocab);
  }
  int same = 0;
  for (int k = 0; k < nb && ok; k++) {
    size_t upto = wn[k]; /* the single run stops at EOS */
    bool eq = !memcmp(got + k * steps, want + k * steps, upto * sizeof *got);
    CHECK_MSG(eq, "%s: the prompt of %zu tokens: greedy tokens differ from its single run", what,
              len[k]);
    same += eq;
  }
  fprintf(stderr, "  %s: %d of %d equal over %d greedy tokens; worst packed logits %.3g\n", what,
          same, nb, steps, worst);
  for (int k = 0; k < nb && ok; k++) rx_llm_model_reset(m, seqs[k]);
  free(packed);
  free(want);
  free(got);
  free(step);
  free(rows);
  free(one);
  free(alone);
  free(seqs);
  free(wn);
}

/* Sequences that hold tokens already, continued by one packed prefill beside a new sequence:
 * each row equals the whole prompt prefilled alone. */
static void packed_continuation(rx_llm_model *m) {
  enum { B = 4 };
  static const size_t first[B - 1] = {3, 20, 1}, second[B] = {5, 1, 30, 9};
  int32_t vocab = rx_llm_model_vocab_size(m);
  int32_t prompt[B][40], packed[200];
  int64_t seqs[B] = {500, 501, 502, 503};
  float *rows = malloc((size_t)B * (size_t)vocab * 4), *one = malloc((size_t)vocab * 4);
  bool ok = rows && one;
  size_t n1 = 0, n2 = 0;
  for (int k = 0; k < B; k++) {
    size_t whole = (k < B - 1 ? first[k] : 0) + second[k];
    pattern(prompt[k], whole, k + 10);
    if (k < B - 1) {
      memcpy(packed + n1, prompt[k], first[k] * 4);
      n1 += first[k];
    }
  }
  ok = ok && ok_status(rx_llm_prefill_batch(m, seqs, B - 1, packed, n1, first, rows), "first part");
  for (int k = 0; k < B; k++) {
    memcpy(packed + n2, prompt[k] + (k < B - 1 ? first[k] : 0), second[k] * 4);
    n2 += second[k];
  }
  ok = ok && ok_status(rx_llm_prefill_batch(m, seqs, B, packed, n2, second, rows), "continuation");
  for (int k = 0; k < B && ok; k++) {
    size_t whole = (k < B - 1 ? first[k] : 0) + second[k];
    CHECK_MSG(rx_llm_model_seq_len(m, seqs[k]) == (int64_t)whole,
              "continuation: sequence %d holds %lld tokens, expected %zu", k,
              (long long)rx_llm_model_seq_len(m, seqs[k]), whole);
    ok = ok_status(rx_llm_prefill(m, 100, prompt[k], whole, one), "prefill alone");
    rx_llm_model_reset(m, 100);
    double e = ok ? rxk_rel_l2(rows + (size_t)k * (size_t)vocab, one, (size_t)vocab) : 1;
    CHECK_MSG(e <= TOL_PACKED,
              "continuation: sequence %d (%zu cached + %zu new tokens): relative L2 %.3g from the "
              "whole prompt prefilled alone",
              k, whole - second[k], second[k], e);
  }
  for (int k = 0; k < B; k++) rx_llm_model_reset(m, seqs[k]);
  free(rows);
  free(one);
}

typedef struct bad_case {
  const char *what;
  rx_status s;
  const char *want; /* in the message */
} bad_case;

/* Calls that are errors, each naming its numbers, and that leave the cache as it was. */
static void bad_batches(rx_llm_model *m) {
  int32_t vocab = rx_llm_model_vocab_size(m);
  enum { MANY = MAX_B + 1 };
  int64_t seqs[MANY];
  int32_t ids[1100];
  size_t counts[MANY];
  float *out = malloc((size_t)MANY * (size_t)vocab * 4);
  if (!out) return;
  for (int k = 0; k < MANY; k++) {
    seqs[k] = 600 + k;
    counts[k] = 1;
  }
  pattern(ids, 1100, 3);
  int64_t free0 = rx_llm_model_kv_free_tokens(m), held0 = rx_llm_model_sequences(m);
  bad_case cases[7];
  int nc = 0;
  size_t c3[3] = {2, 3, 4}; /* 9 tokens, 8 given */
  cases[nc++] =
      (bad_case){"counts that do not sum to n", rx_llm_prefill_batch(m, seqs, 3, ids, 8, c3, out),
                 "sum to 9 tokens, but 8 ids"};
  cases[nc++] = (bad_case){"more sequences than --max-batch",
                           rx_llm_prefill_batch(m, seqs, MANY, ids, MANY, counts, out),
                           "65 sequences in one call, more than the model's maximum of 64"};
  cases[nc++] = (bad_case){"a decode of more than --max-batch",
                           rx_llm_decode(m, seqs, ids, MANY, out), "maximum of 64"};
  cases[nc++] = (bad_case){"a decode of an unknown sequence", rx_llm_decode(m, seqs, ids, 2, out),
                           "sequence 600 (at 0) holds no tokens"};
  int64_t twice[2] = {7, 7};
  cases[nc++] =
      (bad_case){"a sequence twice", rx_llm_prefill_batch(m, twice, 2, ids, 2, counts, out),
                 "sequence 7 appears twice"};
  size_t zero[2] = {2, 0};
  cases[nc++] =
      (bad_case){"a sequence with no tokens", rx_llm_prefill_batch(m, seqs, 2, ids, 2, zero, out),
                 "sequence 601 (at 1) has no new tokens"};
  /* 400 + 400 + 300 tokens: three forwards (at most 512 tokens each); the cache of 1024 tokens
   * holds the first two, not the third: the two that ran are undone */
  size_t big[3] = {400, 400, 300};
  cases[nc++] =
      (bad_case){"a packed prefill larger than the KV cache",
                 rx_llm_prefill_batch(m, seqs, 3, ids, 1100, big, out), "the KV cache is full"};
  for (int i = 0; i < nc; i++) {
    const char *msg = cases[i].s ? rx_status_message(cases[i].s) : "success";
    CHECK_MSG(cases[i].s && strstr(msg, cases[i].want),
              "%s: got \"%s\", expected a message with \"%s\"", cases[i].what, msg, cases[i].want);
    rx_status_free(cases[i].s);
  }
  CHECK_MSG(rx_llm_model_kv_free_tokens(m) == free0 && rx_llm_model_sequences(m) == held0,
            "after the bad calls: %lld KV tokens free (were %lld), %lld sequences (were %lld)",
            (long long)rx_llm_model_kv_free_tokens(m), (long long)free0,
            (long long)rx_llm_model_sequences(m), (long long)held0);
  free(out);
}

/* Requests that are errors at submit, each naming its numbers. */
static void bad_requests(rx_llm_model *m, const job *j) {
  rx_llm_batcher *b = NULL;
  if (!ok_status(rx_llm_batcher_create(m, NULL, &b), "bad requests")) return;
  rx_llm_generate_params p = j->p;
  int64_t id = 7;
  int32_t bad[2] = {5, 5000};
  struct {
    const int32_t *ids;
    size_t n;
    int64_t max_tokens;
    const char *want; /* in the message */
  } cases[] = {{bad, 2, 4, "5000"},
               {j->prompt, j->n, 0, "max_tokens"},
               {j->prompt, j->n, 1000, "capacity of 160"}};
  for (size_t i = 0; i < RX_ARRAY_LEN(cases); i++) {
    p.max_tokens = cases[i].max_tokens;
    rx_status s = rx_llm_batcher_submit(b, cases[i].ids, cases[i].n, &p, &id);
    CHECK_MSG(s && strstr(rx_status_message(s), cases[i].want) && id == 0,
              "bad request %zu: got \"%s\", expected a message naming %s", i,
              s ? rx_status_message(s) : "success", cases[i].want);
    rx_status_free(s);
  }
  rx_llm_batcher_stats st = rx_llm_batcher_get_stats(b);
  CHECK_MSG(st.waiting == 0, "a bad request was queued");
  rx_llm_batcher_free(b);
}

/* args[0..n) of fn through the VM; the message of the error (copied into msg), or "" on success
 * with the bytes of the resulting tensor in *bytes (-1: not a tensor). */
static void call_fn(rx_rt_artifact *a, const char *fn, rx_rt_value *const *args, size_t n,
                    char *msg, size_t size, int64_t *bytes) {
  rx_rt_value *res = NULL;
  rx_status s = rx_rt_vm_call_values(a, fn, args, n, &res);
  snprintf(msg, size, "%s", s ? rx_status_message(s) : "");
  rx_status_free(s);
  rx_rt_tensor *t = res ? rx_rt_value_tensor(res) : NULL;
  *bytes = t ? (int64_t)rx_rt_tensor_bytes(t) : -1;
  rx_rt_value_release(res);
}

/* The artifact's prefill and decode through the VM with a batch object of this test's making. */
static void host_program(const char *path, int32_t vocab) {
  rx_rt_device *dev = NULL;
  rx_rt_artifact *a = NULL;
  rx_rt_value *cache = NULL, *batch = NULL, *lim[2] = {NULL, NULL}, *bs = NULL, *ids = NULL;
  rx_rt_tensor *t = NULL;
  bool ok = ok_status(rx_rt_device_open("vulkan:0", NULL, &dev), "device") &&
            ok_status(rx_rt_artifact_load(dev, path, &a), path) &&
            ok_status(rx_rt_value_from_prim(RX_DTYPE_I64, 1024, &lim[0]), "prim") &&
            ok_status(rx_rt_value_from_prim(RX_DTYPE_I64, MAX_B, &lim[1]), "prim") &&
            ok_status(rx_rt_vm_call_values(a, "create_kv_cache", lim, 2, &cache), "cache") &&
            ok_status(llm_kv_batch_new(&batch), "batch");
  enum { B = 40 };
  int32_t tok[B + 1];
  int64_t seqs[B + 1], counts[B], n = B + 1, b = B; /* seqs + 1: the batches of sequences 1.. */
  pattern(tok, B + 1, 1);
  seqs[B] = B;
  for (int k = 0; k < B; k++) {
    seqs[k] = k;
    counts[k] = 1 + (k == 0); /* 41 tokens: 2 for the first sequence, then 1 each */
  }
  ok = ok && ok_status(rx_rt_tensor_from_host(dev, RX_DTYPE_I32, 1, &n, tok, &t), "ids") &&
       ok_status(rx_rt_value_from_tensor(t, &ids), "ids") &&
       ok_status(rx_rt_value_from_shape(&b, 1, &bs), "shape") &&
       ok_status(llm_kv_batch_set(batch, seqs, counts, B), "batch");
  char msg[1024];
  int64_t bytes = 0;
  if (ok) { /* 40 sequences, 41 tokens, one call */
    rx_rt_value *args[4] = {ids, cache, batch, bs};
    call_fn(a, "prefill", args, 4, msg, sizeof msg, &bytes);
    CHECK_MSG(!*msg && bytes == (int64_t)B * vocab * 4,
              "prefill of 40 sequences in one VM call: \"%s\", %lld bytes of logits", msg,
              (long long)bytes);
  }
  if (ok) { /* counts summing to 40 for 41 ids */
    counts[0] = 1;
    ok_status(llm_kv_batch_set(batch, seqs + 1, counts, B), "batch");
    rx_rt_value *args[4] = {ids, cache, batch, bs};
    call_fn(a, "prefill", args, 4, msg, sizeof msg, &bytes);
    CHECK_MSG(strstr(msg, "rx_kv_extend: the batch's 40 sequences have 40 new tokens in all, the "
                          "forward has 41") != NULL,
              "counts that do not sum to n: \"%s\"", msg);
  }
  if (ok) { /* 39 sequences (41 tokens) for batch_size [40] */
    counts[0] = 3;
    ok_status(llm_kv_batch_set(batch, seqs + 1, counts, B - 1), "batch");
    rx_rt_value *args[4] = {ids, cache, batch, bs};
    call_fn(a, "prefill", args, 4, msg, sizeof msg, &bytes);
    CHECK_MSG(strstr(msg, "prefill: match_cast of 'aux_page_table': expected i32[b, mp], got "
                          "i32[39, ") &&
                  strstr(msg, "expected b = 40"),
              "a batch of 39 sequences for batch_size [40]: \"%s\"", msg);
  }
  if (ok) { /* decode: 41 ids for a batch of 40 sequences */
    for (int k = 0; k < B; k++) counts[k] = 1;
    ok_status(llm_kv_batch_set(batch, seqs, counts, B), "batch");
    rx_rt_value *args[3] = {ids, cache, lim[0]};
    call_fn(a, "decode", args, 3, msg, sizeof msg, &bytes);
    CHECK_MSG(strstr(msg, "rx_kv_extend: argument 2 must be a KV batch or a shape of sequence ids, "
                          "got a prim") != NULL,
              "decode with a prim for the batch: \"%s\"", msg);
    args[2] = batch;
    call_fn(a, "decode", args, 3, msg, sizeof msg, &bytes);
    CHECK_MSG(strstr(msg, "the batch's 40 sequences have 40 new tokens in all, the forward has 41"),
              "decode of 41 ids for 40 sequences: \"%s\"", msg);
  }
  rx_rt_value_release(ids);
  rx_rt_tensor_release(t);
  rx_rt_value_release(bs);
  rx_rt_value_release(batch);
  rx_rt_value_release(cache);
  rx_rt_value_release(lim[0]);
  rx_rt_value_release(lim[1]);
  rx_rt_artifact_release(a);
  rx_rt_device_release(dev);
}

/* Structured output: jobs k of greedy and sampled with grammars of different schemas, batched
 * together against their single runs; the whole values parse as JSON. */
static void structured(rx_llm_model *m, job *greedy, job *sampled) {
  static const char *const schemas[] = {
      "{\"type\":\"object\",\"properties\":{\"color\":{\"enum\":[\"red\",\"green\"]},"
      "\"n\":{\"type\":\"integer\"}},\"required\":[\"color\",\"n\"]}",
      "{\"type\":\"array\",\"items\":{\"type\":\"string\",\"maxLength\":3},\"maxItems\":2}",
      "{\"type\":\"object\",\"properties\":{\"ok\":{\"type\":\"boolean\"},\"v\":{\"type\":"
      "[\"number\",\"null\"]}},\"required\":[\"ok\",\"v\"]}",
      NULL};
  rx_llm_grammar *g[4] = {NULL};
  const rx_tokenizer *tok = rx_llm_model_tokenizer(m);
  for (int i = 0; i < 4; i++)
    ok_status(rx_llm_grammar_compile(tok, schemas[i], schemas[i] ? strlen(schemas[i]) : 0, &g[i]),
              "grammar");
  job jobs[NREQ];
  for (int k = 0; k < NREQ; k++) {
    jobs[k] = k < NREQ / 2 ? greedy[k] : sampled[k];
    jobs[k].p.max_tokens = MAXTOK;
    jobs[k].p.grammar = g[k % 4];
    jobs[k].p.user = &jobs[k];
  }
  single_runs(m, jobs);
  batched(m, jobs, NREQ, "structured output, 4 grammars, greedy and sampled");
  int whole = 0;
  for (int k = 0; k < NREQ; k++) {
    if (jobs[k].nwant >= MAXTOK) continue;
    char *text = NULL;
    size_t len = 0;
    if (!ok_status(rx_tokenizer_decode(tok, jobs[k].want, jobs[k].nwant, RX_TOKENIZER_SKIP_SPECIAL,
                                       &text, &len),
                   "decode"))
      continue;
    cJSON *v = cJSON_ParseWithLength(text, len);
    CHECK_MSG(v && (k % 4 != 3 || cJSON_IsObject(v)), "request %d: \"%s\" is not whole JSON", k,
              text);
    whole += v != NULL;
    cJSON_Delete(v);
    rx_llm_free(text);
  }
  fprintf(stderr, "  structured output: %d of %d ended as whole values before max_tokens\n", whole,
          NREQ);
  for (int i = 0; i < 4; i++) rx_llm_grammar_free(g[i]);
}

static rx_llm_model *load(const char *path, int64_t capacity) {
  rx_llm_model_options mo = {.device = "vulkan:0", .capacity = capacity, .max_sequences = MAX_B};
  rx_llm_model *m = NULL;
  return ok_status(rx_llm_model_load(path, &mo, &m), path) ? m : NULL;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: test_batch TESTS_DIR\n");
    return 2;
  }
  rxk_backend vk = {.kind = RX_RT_BACKEND_VULKAN};
  if (!rxk_rt_first_present(&vk, 1)) {
    fprintf(stderr, "SKIP: no Vulkan device: %s\n", vk.why);
    return 77;
  }
  char path[256];
  snprintf(path, sizeof path, "/tmp/rx_test_batch_%d.rxm", (int)getpid());
  job greedy[NREQ], sampled[NREQ];
  make_jobs(greedy, false);
  make_jobs(sampled, true);
  if (compile(argv[1], &vk, path)) {
    rx_llm_model *m = load(path, 1024);
    if (m) {
      single_runs(m, greedy);
      single_runs(m, sampled);
      batched(m, greedy, NREQ, "greedy, max_batch 8");
      batched(m, greedy, 3, "greedy, max_batch 3");
      batched(m, sampled, NREQ, "sampled, max_batch 8");
      structured(m, greedy, sampled);
      leaving(m, greedy);
      wide_decode(m);
      static const size_t mixed[5] = {1, 7, 16, 17, 100};
      packed_greedy(m, mixed, 5, 8, 300, "packed prefill of 1, 7, 16, 17, 100 tokens");
      size_t wide[40];
      for (int k = 0; k < 40; k++) wide[k] = 1 + (size_t)(k * 5) % 19;
      packed_greedy(m, wide, 40, 6, 400, "40 sequences, one prefill and one decode per step");
      packed_continuation(m);
      bad_batches(m);
      host_program(path, rx_llm_model_vocab_size(m));
    }
    rx_llm_model_free(m);
    /* 160 tokens: 10 pages; each request reserves 1 to 4 of them */
    m = load(path, 160);
    if (m) {
      rx_llm_batcher_stats st = batched(m, greedy, NREQ, "greedy, KV cache of 160 tokens");
      CHECK_MSG(st.max_rows > 1 && st.max_rows < NREQ,
                "a KV cache of 160 tokens: the largest decode had %lld sequences, expected 2 to 7",
                (long long)st.max_rows);
      bad_requests(m, &greedy[0]);
      const char *last = NULL;
      size_t nv = rx_rt_device_validation_messages(rx_llm_model_device(m), &last);
      CHECK_MSG(!nv, "%zu validation messages, the last: %s", nv, last);
    }
    rx_llm_model_free(m);
  }
  unlink(path);
  return check_finish("test_batch");
}
