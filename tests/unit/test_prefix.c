/* Prefix caching and chunked prefill in the continuous batcher (runtime/llm/batch.c,
 * prefix_cache.c, the shared pages of kv_cache.c; relaxc/llm.h rx_llm_batcher_options) on the
 * trained tiny Llama of tests/llm/models (kjv-llama, f32) on Vulkan (lavapipe here). The
 * reference is rx_llm_generate of each prompt alone (no cache, no chunks), greedy:
 *
 * - at prompt lengths 1, 7, 15, 16, 17, 33 and 100, a prompt run twice (the second starts from
 *   its cached pages), one that diverges from it halfway and one that extends it give the
 *   reference's tokens, and each reports the cached tokens the pages allow (whole pages, at most
 *   prompt - 1 tokens);
 * - 6 identical prompts of 100 tokens submitted together prefill once: the others start from the
 *   first one's 6 pages, 12 pages in use (not 42), and their tokens equal the reference;
 * - a KV cache of 160 tokens (10 pages) and 8 different prompts one after another: cached pages
 *   are evicted, least recently used first (the last prompt still cached, the first not), tokens
 *   equal the reference;
 * - chunked prefill at chunk sizes 1, 7, 16 and 100 (with and without the prefix cache) gives the
 *   reference's tokens, and a running stream gets a token every step while a long prompt is
 *   prefilled in chunks beside it;
 * - after each batcher is freed, no sequence is held, every page is free and every reference
 *   count is zero.
 *
 * usage: test_prefix TESTS_DIR */
/* test-needs: runtime */
#include "base/base.h"
#include "check.h"
#include "relaxc/llm.h"
#include "relaxc/runtime.h"
#include "runtime/llm/prefix_cache.h" /* llm_model_kv, the reference counts */
#include "support_runtime.h"
#include "targets/target.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_B   16  /* --max-batch of the artifact, and the cache's max_sequences */
#define MAXP    200 /* the longest prompt */
#define MAXTOK  24
#define REF_SEQ 100 /* the sequence of the reference runs (outside the batchers' 0..MAX_B) */

typedef struct job {
  int32_t prompt[MAXP];
  size_t n;
  int64_t max_tokens;
  int32_t want[MAXTOK];
  size_t nwant;
  int64_t id;
} job;

static bool ok_status(rx_status s, const char *what) {
  CHECK_MSG(!s, "%s: %s", what, rx_status_message(s));
  rx_status_free(s);
  return !s;
}

static rx_llm_generate_params greedy(int64_t max_tokens) {
  rx_llm_generate_params p = {0};
  p.sampling = rx_sampler_default_params();
  p.sampling.temperature = 0;
  p.max_tokens = max_tokens;
  return p;
}

/* The reference: j alone through rx_llm_generate. */
static void reference(rx_llm_model *m, job *j) {
  rx_llm_generate_params p = greedy(j->max_tokens);
  rx_llm_generate_stats st;
  if (ok_status(rx_llm_generate(m, REF_SEQ, j->prompt, j->n, &p, j->want, &st), "generate"))
    j->nwant = st.new_tokens;
  rx_llm_model_reset(m, REF_SEQ);
}

/* ids 2..1001 from a pattern of seed (never BOS 0 or EOS 1). */
static void fill(int32_t *ids, size_t n, int seed) {
  for (size_t i = 0; i < n; i++)
    ids[i] = (int32_t)(2 + ((size_t)seed * 131 + i * 37 + i * i) % 1000);
}

static void submit(rx_llm_batcher *b, job *j, const char *what) {
  rx_llm_generate_params p = greedy(j->max_tokens);
  ok_status(rx_llm_batcher_submit(b, j->prompt, j->n, &p, &j->id), what);
}

/* j's tokens equal the reference; returns its cached tokens (-1 when it failed). */
static long check_job(rx_llm_batcher *b, const job *j, const char *what) {
  rx_llm_request_info info;
  if (!ok_status(rx_llm_batcher_poll(b, j->id, &info), what)) return -1;
  bool eq = info.count == j->nwant && !memcmp(info.ids, j->want, j->nwant * sizeof *j->want);
  CHECK_MSG(eq, "%s: prompt of %zu: %zu tokens (state %d%s%s) differ from the reference's %zu",
            what, j->n, info.count, (int)info.state, info.error ? ": " : "",
            info.error ? info.error : "", j->nwant);
  long cached = (long)info.cached_tokens;
  ok_status(rx_llm_batcher_release(b, j->id), what);
  return eq ? cached : -1;
}

/* Frees b, then: no sequence held, every page free, every reference count zero. */
static void free_and_check(rx_llm_model *m, rx_llm_batcher *b, const char *what) {
  rx_llm_batcher_free(b);
  rx_kv_cache *kv = llm_model_kv(m);
  CHECK_MSG(rx_llm_model_sequences(m) == 0 &&
                rx_llm_model_kv_free_tokens(m) == rx_llm_model_kv_capacity(m) &&
                llm_kv_cache_refs_held(kv) == 0,
            "%s: after the batcher: %lld sequences, %lld of %lld KV tokens free, %lld references",
            what, (long long)rx_llm_model_sequences(m), (long long)rx_llm_model_kv_free_tokens(m),
            (long long)rx_llm_model_kv_capacity(m), (long long)llm_kv_cache_refs_held(kv));
}

static long whole(size_t tokens) { return (long)(tokens / 16 * 16); }

/* At each length: the prompt twice, one diverging halfway, one extending it. */
static void repeated(rx_llm_model *m) {
  static const size_t lens[] = {1, 7, 15, 16, 17, 33, 100};
  rx_llm_batcher_options o = {.prefix_cache = true};
  rx_llm_batcher *b = NULL;
  if (!ok_status(rx_llm_batcher_create(m, &o, &b), "create")) return;
  for (size_t li = 0; li < sizeof lens / sizeof *lens; li++) {
    size_t L = lens[li], h = L / 2;
    job j[4];
    memset(j, 0, sizeof j);
    fill(j[0].prompt, L, 1);
    j[0].n = L;
    j[1] = j[0];
    j[2] = j[0]; /* diverges after h tokens */
    fill(j[2].prompt + h, L - h, 2);
    j[3] = j[0]; /* extends it by 5 */
    fill(j[3].prompt + L, 5, 3);
    j[3].n = L + 5;
    for (int k = 0; k < 4; k++) {
      j[k].max_tokens = 8;
      reference(m, &j[k]);
    }
    rx_llm_batcher_clear_cache(b);
    long want[4] = {0, whole(L - 1), whole(h) < whole(L - 1) ? whole(h) : whole(L - 1), whole(L)};
    char what[96];
    for (int k = 0; k < 4; k++) {
      snprintf(what, sizeof what, "length %zu, %s", L,
               (const char *[]){"first", "repeated", "diverging", "extending"}[k]);
      submit(b, &j[k], what);
      ok_status(rx_llm_batcher_run(b), what);
      long cached = check_job(b, &j[k], what);
      CHECK_MSG(cached == want[k], "%s: %ld cached tokens, expected %ld", what, cached, want[k]);
    }
  }
  rx_llm_batcher_stats st = rx_llm_batcher_get_stats(b);
  fprintf(stderr, "  repeated prompts: %lld tokens prefilled, %lld from the cache\n",
          (long long)st.prompt_tokens, (long long)st.cached_tokens);
  free_and_check(m, b, "repeated prompts");
}

/* 6 identical prompts of 100 tokens at once share the first one's pages. */
static void identical(rx_llm_model *m) {
  enum { N = 6 };
  job j[N];
  memset(j, 0, sizeof j);
  fill(j[0].prompt, 100, 4);
  j[0].n = 100;
  j[0].max_tokens = 6;
  reference(m, &j[0]);
  for (int k = 1; k < N; k++) j[k] = j[0];
  rx_llm_batcher_options o = {.prefix_cache = true};
  rx_llm_batcher *b = NULL;
  if (!ok_status(rx_llm_batcher_create(m, &o, &b), "create")) return;
  for (int k = 0; k < N; k++) submit(b, &j[k], "identical");
  ok_status(rx_llm_batcher_step(b, NULL), "step 1");
  ok_status(rx_llm_batcher_step(b, NULL), "step 2");
  /* the first: 6 full pages (cached) and 1 of 4 tokens (+ 2 decoded); the others: its 6 pages
   * and one page each */
  int64_t used = (rx_llm_model_kv_capacity(m) - rx_llm_model_kv_free_tokens(m)) / 16;
  rx_llm_batcher_stats st = rx_llm_batcher_get_stats(b);
  CHECK_MSG(used == 7 + (N - 1) && st.running == N,
            "%d identical prompts of 100 tokens: %lld pages in use with %lld running, expected %d",
            N, (long long)used, (long long)st.running, 7 + (N - 1));
  ok_status(rx_llm_batcher_run(b), "identical");
  st = rx_llm_batcher_get_stats(b);
  CHECK_MSG(st.prompt_tokens == 100 + (N - 1) * 4 && st.cached_tokens == (N - 1) * 96,
            "identical prompts: %lld tokens prefilled and %lld cached, expected %d and %d",
            (long long)st.prompt_tokens, (long long)st.cached_tokens, 100 + (N - 1) * 4,
            (N - 1) * 96);
  for (int k = 0; k < N; k++) check_job(b, &j[k], "identical");
  fprintf(stderr, "  %d identical prompts: %lld pages in use, %lld tokens prefilled\n", N,
          (long long)used, (long long)st.prompt_tokens);
  free_and_check(m, b, "identical prompts");
}

/* A cache of 10 pages: 8 different prompts of 40 tokens, one at a time, evict the oldest. */
static void eviction(rx_llm_model *m) {
  enum { N = 8 };
  job j[N];
  memset(j, 0, sizeof j);
  for (int k = 0; k < N; k++) {
    fill(j[k].prompt, 40, 10 + k);
    j[k].n = 40;
    j[k].max_tokens = 4;
    reference(m, &j[k]);
  }
  rx_llm_batcher_options o = {.prefix_cache = true, .max_batch = 2};
  rx_llm_batcher *b = NULL;
  if (!ok_status(rx_llm_batcher_create(m, &o, &b), "create")) return;
  for (int k = 0; k < N; k++) submit(b, &j[k], "eviction");
  ok_status(rx_llm_batcher_run(b), "eviction");
  for (int k = 0; k < N; k++) check_job(b, &j[k], "eviction");
  rx_llm_batcher_stats st = rx_llm_batcher_get_stats(b);
  CHECK_MSG(st.pages_evicted > 0 && st.pages_cached <= 10,
            "eviction: %lld pages evicted, %lld cached in a cache of 10",
            (long long)st.pages_evicted, (long long)st.pages_cached);
  submit(b, &j[N - 1], "the last again");
  ok_status(rx_llm_batcher_run(b), "the last again");
  long last = check_job(b, &j[N - 1], "the last again");
  submit(b, &j[0], "the first again");
  ok_status(rx_llm_batcher_run(b), "the first again");
  long first = check_job(b, &j[0], "the first again");
  CHECK_MSG(last == 32 && first == 0,
            "least recent use: the last prompt again had %ld cached tokens (expected 32), the "
            "first %ld (expected 0: evicted)",
            last, first);
  fprintf(stderr, "  eviction: %lld pages evicted, %lld cached\n", (long long)st.pages_evicted,
          (long long)st.pages_cached);
  free_and_check(m, b, "eviction");
}

/* Chunked prefill of prompts of 1 to 150 tokens at several chunk sizes. */
static void chunked(rx_llm_model *m) {
  static const size_t lens[] = {1, 7, 16, 17, 33, 100, 150};
  enum { N = sizeof lens / sizeof *lens };
  job j[N];
  memset(j, 0, sizeof j);
  for (int k = 0; k < N; k++) {
    fill(j[k].prompt, lens[k], 20 + k);
    if (k == N - 1) memcpy(j[k].prompt, j[k - 1].prompt, 100 * sizeof(int32_t)); /* shares 96 */
    j[k].n = lens[k];
    j[k].max_tokens = 6;
    reference(m, &j[k]);
  }
  static const int64_t chunks[] = {1, 7, 16, 100};
  for (int pc = 0; pc < 2; pc++)
    for (size_t c = 0; c < sizeof chunks / sizeof *chunks; c++) {
      char what[64];
      snprintf(what, sizeof what, "chunks of %lld%s", (long long)chunks[c],
               pc ? ", prefix cache" : "");
      rx_llm_batcher_options o = {.prefill_chunk = chunks[c], .prefix_cache = pc};
      rx_llm_batcher *b = NULL;
      if (!ok_status(rx_llm_batcher_create(m, &o, &b), what)) continue;
      for (int k = 0; k < N; k++) submit(b, &j[k], what);
      ok_status(rx_llm_batcher_run(b), what);
      rx_llm_batcher_stats st = rx_llm_batcher_get_stats(b);
      int64_t total = 0;
      for (int k = 0; k < N; k++) total += (int64_t)lens[k];
      CHECK_MSG(st.prompt_tokens + st.cached_tokens == total,
                "%s: %lld tokens prefilled and %lld cached, the prompts have %lld", what,
                (long long)st.prompt_tokens, (long long)st.cached_tokens, (long long)total);
      for (int k = 0; k < N; k++) check_job(b, &j[k], what);
      fprintf(stderr, "  %s: %lld steps, %lld prefill calls, %lld cached tokens\n", what,
              (long long)st.steps, (long long)st.prefills, (long long)st.cached_tokens);
      free_and_check(m, b, what);
    }
}

/* A stream keeps getting a token every step while a long prompt is prefilled in chunks. */
static void interleaved(rx_llm_model *m) {
  job s = {0}, l = {0};
  fill(s.prompt, 5, 30);
  s.n = 5;
  s.max_tokens = 20;
  fill(l.prompt, 150, 31);
  l.n = 150;
  l.max_tokens = 4;
  reference(m, &s);
  reference(m, &l);
  rx_llm_batcher_options o = {.prefill_chunk = 16};
  rx_llm_batcher *b = NULL;
  if (!ok_status(rx_llm_batcher_create(m, &o, &b), "create")) return;
  submit(b, &s, "short");
  ok_status(rx_llm_batcher_step(b, NULL), "step");
  submit(b, &l, "long");
  int steady = 0;
  for (int k = 0; k < 8; k++) {
    rx_llm_request_info a, c;
    ok_status(rx_llm_batcher_poll(b, s.id, &a), "poll");
    size_t before = a.count;
    ok_status(rx_llm_batcher_step(b, NULL), "step");
    ok_status(rx_llm_batcher_poll(b, s.id, &a), "poll");
    ok_status(rx_llm_batcher_poll(b, l.id, &c), "poll");
    steady += a.count == before + 1 && c.state == RX_LLM_REQUEST_RUNNING && c.count == 0;
  }
  CHECK_MSG(steady == 8,
            "chunks of 16: the short stream got a token in %d of the 8 steps while the 150-token "
            "prompt was prefilled",
            steady);
  ok_status(rx_llm_batcher_run(b), "run");
  check_job(b, &s, "short beside a chunked prefill");
  check_job(b, &l, "the chunked prompt");
  free_and_check(m, b, "interleaved");
}

static rx_llm_model *load(const char *path, int64_t capacity) {
  rx_llm_model_options mo = {.device = "vulkan:0", .capacity = capacity, .max_sequences = MAX_B};
  rx_llm_model *m = NULL;
  return ok_status(rx_llm_model_load(path, &mo, &m), path) ? m : NULL;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: test_prefix TESTS_DIR\n");
    return 2;
  }
  rxk_backend vk = {.kind = RX_RT_BACKEND_VULKAN};
  if (!rxk_rt_first_present(&vk, 1)) {
    fprintf(stderr, "SKIP: no Vulkan device: %s\n", vk.why);
    return 77;
  }
  char path[256], why[2048];
  snprintf(path, sizeof path, "/tmp/rx_test_prefix_%d.rxm", (int)getpid());
  bool ok = rxk_compile_llm(argv[1], "kjv-llama", MAX_B, &vk.target, path, why, sizeof why);
  CHECK_MSG(ok, "%s", why);
  if (ok) {
    rx_llm_model *m = load(path, 2048);
    if (m) {
      repeated(m);
      identical(m);
      chunked(m);
      interleaved(m);
    }
    rx_llm_model_free(m);
    if ((m = load(path, 160))) eviction(m);
    rx_llm_model_free(m);
  }
  unlink(path);
  return check_finish("test_prefix");
}
