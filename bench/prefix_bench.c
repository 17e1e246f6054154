/* bench/prefix_bench.c: prefix caching and chunked prefill in the continuous batcher
 * (runtime/llm/batch.c, relaxc/llm.h rx_llm_batcher_options), the two rows of issue 33:
 *
 * 1. Time to first token of a request that repeats a --system-token system prompt (then a
 *    different --user-token suffix per request), with the prefix cache on and off: one request
 *    first (it fills the cache when on), then --repeat requests one after another, each timed
 *    from submit to its first token (on_token), the median kept.
 * 2. Inter-token latency of --streams streams (prompts of 16 tokens, greedy, decoding) while a
 *    --long-token prompt arrives, with chunked prefill at --chunk tokens per step and off: the
 *    streams decode a few steps, the long prompt is submitted, and every gap between two tokens
 *    of a stream that ends between its submission and its first token (plus --after steps) is
 *    kept; p50 and p99 of those gaps, and the long prompt's own time to first token.
 *
 * Everything runs in one process on one model load, wall clock (each forward synchronized).
 * usage: prefix_bench MODEL.rxm [--device D] [--system 1000] [--user 16] [--repeat 5]
 *                               [--streams 8] [--long 2000] [--chunk 512] [--after 8]
 *   MODEL.rxm: a model whose max_seq_len holds --long tokens and whose --max-batch is at least
 *   --streams + 1; bench/prefix_bench.sh makes one from the tiny KJV model and runs this.
 * Prints Markdown table rows on stdout. */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include "relaxc/llm.h"
#include "relaxc/runtime.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_STREAMS 64
#define MAX_GAPS    100000
/* max_tokens of each stream: more than the steps the long prompt's prefill takes (at most one
 * per chunk) plus --after; each stream reserves its pages at admission */
#define STREAM_TOKENS 256

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int fail(const char *what, rx_status s) {
  fprintf(stderr, "prefix_bench: error: %s: %s\n", what, rx_status_message(s));
  rx_status_free(s);
  return 1;
}

static void oom(void) {
  fprintf(stderr, "prefix_bench: out of host memory\n");
  exit(1);
}

/* ids 2..vocab-1 from a pattern of seed (never BOS 0 or EOS 1 of the KJV model) */
static void fill(int32_t *ids, size_t n, unsigned seed, int32_t vocab) {
  for (size_t i = 0; i < n; i++)
    ids[i] = (int32_t)(2 + ((size_t)seed * 7919 + i * 131 + i * i * 17) % (size_t)(vocab - 2));
}

typedef struct stream {
  double last, first; /* times of the last token and of the first (0: none yet) */
  double *gaps;       /* shared log */
  size_t *ngaps;
  double from, until; /* gaps ending in [from, until] are kept */
} stream;

static bool on_token(void *user, int32_t id, const char *text, size_t len) {
  (void)text;
  (void)len;
  stream *s = user;
  if (id < 0) return true;
  double t = now_ms();
  if (s->last > 0 && s->gaps && t >= s->from && t <= s->until && *s->ngaps < MAX_GAPS)
    s->gaps[(*s->ngaps)++] = t - s->last;
  if (s->first == 0) s->first = t;
  s->last = t;
  return true;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double quantile(double *v, size_t n, double q) {
  if (!n) return 0;
  qsort(v, n, sizeof *v, cmp_double);
  size_t k = (size_t)(q * (double)(n - 1) + 0.5);
  return v[k];
}

static rx_llm_generate_params greedy(int64_t max_tokens, stream *s) {
  rx_llm_generate_params p = {0};
  p.sampling = rx_sampler_default_params();
  p.sampling.temperature = 0;
  p.max_tokens = max_tokens;
  p.on_token = on_token;
  p.user = s;
  return p;
}

/* Row 1: the median time to first token of requests repeating the system prompt. */
static rx_status ttft(rx_llm_model *m, bool cache, long sys, long user, long repeat, double *out_ms,
                      long *out_cached) {
  int32_t vocab = rx_llm_model_vocab_size(m);
  int32_t *ids = malloc((size_t)(sys + user) * sizeof *ids);
  double *t = calloc((size_t)repeat, sizeof *t);
  rx_llm_batcher *b = NULL;
  rx_llm_batcher_options o = {.prefix_cache = cache};
  if (!ids || !t) oom();
  rx_status s = rx_llm_batcher_create(m, &o, &b);
  fill(ids, (size_t)sys, 1, vocab);
  for (long r = 0; r <= repeat && !s; r++) { /* r == 0: the request that fills the cache */
    fill(ids + sys, (size_t)user, 100 + (unsigned)r, vocab);
    stream st = {0};
    rx_llm_generate_params p = greedy(1, &st);
    int64_t id = 0;
    double t0 = now_ms();
    s = rx_llm_batcher_submit(b, ids, (size_t)(sys + user), &p, &id);
    if (!s) s = rx_llm_batcher_run(b);
    rx_llm_request_info info;
    if (!s) s = rx_llm_batcher_poll(b, id, &info);
    if (!s && r) {
      t[r - 1] = st.first - t0;
      *out_cached = (long)info.cached_tokens;
    }
    if (!s) s = rx_llm_batcher_release(b, id);
  }
  if (!s) *out_ms = quantile(t, (size_t)repeat, 0.5);
  rx_llm_batcher_free(b);
  free(ids);
  free(t);
  return s;
}

typedef struct itl_result {
  double p50, p99, max, long_ttft;
  size_t gaps;
} itl_result;

/* Row 2: the streams' inter-token latency while a long prompt arrives. */
static rx_status itl(rx_llm_model *m, long streams, long long_len, long chunk, long after,
                     itl_result *out) {
  int32_t vocab = rx_llm_model_vocab_size(m);
  int32_t *ids = malloc((size_t)long_len * sizeof *ids);
  double *gaps = malloc(MAX_GAPS * sizeof *gaps);
  size_t ngaps = 0;
  stream st[MAX_STREAMS + 1];
  memset(st, 0, sizeof st);
  rx_llm_batcher *b = NULL;
  rx_llm_batcher_options o = {.prefill_chunk = chunk};
  if (!ids || !gaps) oom();
  rx_status s = rx_llm_batcher_create(m, &o, &b);
  int64_t rid[MAX_STREAMS + 1] = {0};
  for (long k = 0; k < streams && !s; k++) {
    int32_t p16[16];
    fill(p16, 16, 200 + (unsigned)k, vocab);
    st[k] = (stream){.gaps = gaps, .ngaps = &ngaps, .from = 1e300, .until = 1e300};
    rx_llm_generate_params p = greedy(STREAM_TOKENS, &st[k]); /* cancelled before the end */
    s = rx_llm_batcher_submit(b, p16, 16, &p, &rid[k]);
  }
  for (int k = 0; k < 4 && !s; k++) s = rx_llm_batcher_step(b, NULL); /* all decoding */
  fill(ids, (size_t)long_len, 300, vocab);
  stream *ls = &st[streams];
  rx_llm_generate_params lp = greedy(1, ls);
  double t0 = now_ms();
  for (long k = 0; k < streams; k++) st[k].from = t0;
  if (!s) s = rx_llm_batcher_submit(b, ids, (size_t)long_len, &lp, &rid[streams]);
  while (!s && ls->first == 0) s = rx_llm_batcher_step(b, NULL);
  for (long k = 0; k < after && !s; k++) s = rx_llm_batcher_step(b, NULL);
  if (!s) {
    out->long_ttft = ls->first - t0;
    out->gaps = ngaps;
    out->max = quantile(gaps, ngaps, 1.0);
    out->p50 = quantile(gaps, ngaps, 0.5);
    out->p99 = quantile(gaps, ngaps, 0.99);
  }
  rx_llm_batcher_free(b); /* cancels the streams */
  free(ids);
  free(gaps);
  return s;
}

static long num(const char *v) { return strtol(v, NULL, 10); }

int main(int argc, char **argv) {
  const char *path = NULL, *device = NULL;
  long sys = 1000, user = 16, repeat = 5, streams = 8, long_len = 2000, chunk = 512, after = 8;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    long *slot = !strcmp(a, "--system")    ? &sys
                 : !strcmp(a, "--user")    ? &user
                 : !strcmp(a, "--repeat")  ? &repeat
                 : !strcmp(a, "--streams") ? &streams
                 : !strcmp(a, "--long")    ? &long_len
                 : !strcmp(a, "--chunk")   ? &chunk
                 : !strcmp(a, "--after")   ? &after
                                           : NULL;
    if (slot && v) {
      *slot = num(v);
      i++;
    } else if (!strcmp(a, "--device") && v) {
      device = v;
      i++;
    } else if (a[0] != '-' && !path) {
      path = a;
    } else {
      fprintf(stderr, "prefix_bench: unknown or incomplete option '%s'\n", a);
      return 2;
    }
  }
  if (!path || sys < 16 || user < 1 || repeat < 1 || streams < 1 || streams > MAX_STREAMS ||
      long_len < 1 || chunk < 1 || after < 0) {
    fprintf(stderr, "usage: prefix_bench MODEL.rxm [--device D] [--system 1000] [--user 16] "
                    "[--repeat 5] [--streams 8] [--long 2000] [--chunk 512] [--after 8]\n");
    return 2;
  }
  rx_llm_model_options mo = {.device = device,
                             .capacity = 2 * (sys + user + 16) + streams * (STREAM_TOKENS + 32) +
                                         long_len + 64,
                             .max_sequences = streams + 1};
  setvbuf(stdout, NULL, _IOLBF, 0);
  rx_llm_model *m = NULL;
  rx_status s = rx_llm_model_load(path, &mo, &m);
  if (s) return fail(path, s);
  printf("device: %s\n\n", rx_llm_model_device_name(m));
  double on = 0, off = 0;
  long cached_on = 0, cached_off = 0;
  if ((s = ttft(m, true, sys, user, repeat, &on, &cached_on)) ||
      (s = ttft(m, false, sys, user, repeat, &off, &cached_off))) {
    rx_llm_model_free(m);
    return fail("time to first token", s);
  }
  printf("| time to first token, %ld-token system prompt + %ld new tokens (median of %ld) | "
         "prefix cache on | prefix cache off | speedup |\n|---|---|---|---|\n",
         sys, user, repeat);
  printf("| ms (cached tokens) | %.1f (%ld) | %.1f (%ld) | %.1fx |\n\n", on, cached_on, off,
         cached_off, on > 0 ? off / on : 0);
  itl_result c = {0}, u = {0};
  if ((s = itl(m, streams, long_len, chunk, after, &c)) ||
      (s = itl(m, streams, long_len, 0, after, &u))) {
    rx_llm_model_free(m);
    return fail("inter-token latency", s);
  }
  printf("| %ld streams decoding while a %ld-token prompt arrives | ITL p50 ms | ITL p99 ms | "
         "ITL max ms | gaps | the long prompt's TTFT ms |\n|---|---|---|---|---|---|\n",
         streams, long_len);
  printf("| chunked prefill, %ld tokens per step | %.1f | %.1f | %.1f | %zu | %.1f |\n", chunk,
         c.p50, c.p99, c.max, c.gaps, c.long_ttft);
  printf("| chunked prefill off | %.1f | %.1f | %.1f | %zu | %.1f |\n", u.p50, u.p99, u.max, u.gaps,
         u.long_ttft);
  rx_llm_model_free(m);
  return 0;
}
