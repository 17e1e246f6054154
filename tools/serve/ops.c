/* relaxc serve's operations (ops.h): the API key's check, the metrics and their Prometheus text,
 * the request log line. The metric names follow Prometheus' conventions (base units: seconds;
 * counters end in _total) and vLLM's where one exists, so dashboards carry over:
 * https://prometheus.io/docs/instrumenting/exposition_formats/ (text format 0.0.4) and
 * https://prometheus.io/docs/practices/naming/. */
#include "tools/serve/ops.h"

#include "base/base.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

bool serve_auth_ok(const char *header, const char *key) {
  static const char bearer[] = "Bearer ";
  if (!header || !key) return false;
  size_t hl = strlen(header), pl = sizeof bearer - 1, kl = strlen(key);
  /* every byte of the expected "Bearer KEY" is compared, whatever the header holds: the time
   * depends on the key's length only (a shorter header reads as NULs, a longer one differs by
   * its length) */
  unsigned diff = (unsigned)(hl != pl + kl);
  for (size_t i = 0; i < pl + kl; i++) {
    unsigned char want = (unsigned char)(i < pl ? bearer[i] : key[i - pl]);
    unsigned char got = (unsigned char)(i < hl ? header[i] : 0);
    diff |= (unsigned)(want ^ got);
  }
  return diff == 0;
}

static const char *const endpoint_names[] = {
#define X(e, s) s,
    SERVE_ENDPOINTS(X)
#undef X
};

serve_endpoint serve_endpoint_of(const char *url) {
  for (int e = 0; e < SERVE_EP_OTHER; e++)
    if (url && !strcmp(url, endpoint_names[e])) return (serve_endpoint)e;
  return SERVE_EP_OTHER;
}

const char *serve_endpoint_name(serve_endpoint e) { return endpoint_names[e]; }

/* the statuses counted apart; the last slot is "other" */
static const unsigned statuses[SERVE_STATUSES - 1] = {200, 400, 401, 404, 405, 413,
                                                      499, 500, 503, 504, 408};

static int status_slot(unsigned status) {
  for (int i = 0; i < SERVE_STATUSES - 1; i++)
    if (statuses[i] == status) return i;
  return SERVE_STATUSES - 1;
}

/* Buckets, seconds. Time to first token: vLLM's (vllm:time_to_first_token_seconds); between
 * tokens: vLLM's inter-token latency buckets; a whole request: 10 ms to 10 minutes. */
static const double ttft_bounds[] = {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1,  0.25, 0.5,
                                     0.75,  1.0,   2.5,  5.0,  7.5,  10.0, 20.0, 40.0, 80.0};
static const double itl_bounds[] = {0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3,
                                    0.4,  0.5,   0.75, 1.0,   2.5, 5.0,  7.5, 10.0};
static const double e2e_bounds[] = {0.01, 0.05, 0.1,  0.3,  0.5,   1.0,   2.5,  5.0,
                                    10.0, 20.0, 40.0, 60.0, 120.0, 300.0, 600.0};
#define COUNT(a) ((int)(sizeof(a) / sizeof *(a)))

void serve_metrics_init(serve_metrics *m) {
  memset(m, 0, sizeof *m);
  pthread_mutex_init(&m->lock, NULL);
  m->ttft = (serve_histogram){.bounds = ttft_bounds, .n = COUNT(ttft_bounds)};
  m->itl = (serve_histogram){.bounds = itl_bounds, .n = COUNT(itl_bounds)};
  m->e2e = (serve_histogram){.bounds = e2e_bounds, .n = COUNT(e2e_bounds)};
}

void serve_metrics_destroy(serve_metrics *m) { pthread_mutex_destroy(&m->lock); }

void serve_metrics_request(serve_metrics *m, serve_endpoint e, unsigned status) {
  pthread_mutex_lock(&m->lock);
  m->requests[e][status_slot(status)]++;
  pthread_mutex_unlock(&m->lock);
}

void serve_metrics_tokens(serve_metrics *m, int64_t prompt, int64_t generated) {
  pthread_mutex_lock(&m->lock);
  m->prompt_tokens += (uint64_t)(prompt > 0 ? prompt : 0);
  m->generation_tokens += (uint64_t)(generated > 0 ? generated : 0);
  pthread_mutex_unlock(&m->lock);
}

static void observe(serve_metrics *m, serve_histogram *h, double v) {
  if (v < 0) v = 0;
  pthread_mutex_lock(&m->lock);
  int i = 0;
  while (i < h->n && v > h->bounds[i]) i++; /* Prometheus' buckets are "less or equal" */
  h->counts[i]++;
  h->sum += v;
  h->count++;
  pthread_mutex_unlock(&m->lock);
}

void serve_metrics_ttft(serve_metrics *m, double s) { observe(m, &m->ttft, s); }
void serve_metrics_itl(serve_metrics *m, double s) { observe(m, &m->itl, s); }
void serve_metrics_e2e(serve_metrics *m, double s) { observe(m, &m->e2e, s); }

static void head(rx_strbuf *b, const char *name, const char *type, const char *help) {
  base_strbuf_printf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void scalar(rx_strbuf *b, const char *name, const char *type, const char *help, double v) {
  head(b, name, type, help);
  base_strbuf_printf(b, "%s %.17g\n", name, v);
}

static void histogram(rx_strbuf *b, const char *name, const char *help, const serve_histogram *h) {
  head(b, name, "histogram", help);
  uint64_t cum = 0;
  for (int i = 0; i < h->n; i++) {
    cum += h->counts[i];
    base_strbuf_printf(b, "%s_bucket{le=\"%g\"} %llu\n", name, h->bounds[i],
                       (unsigned long long)cum);
  }
  base_strbuf_printf(b, "%s_bucket{le=\"+Inf\"} %llu\n", name, (unsigned long long)h->count);
  base_strbuf_printf(b, "%s_sum %.17g\n%s_count %llu\n", name, h->sum, name,
                     (unsigned long long)h->count);
}

/* the batcher's totals and the server's gauges (g) */
static void gauges_text(rx_strbuf *b, const serve_gauges *g) {
  const rx_llm_batcher_stats *s = &g->batcher;
  scalar(b, "relaxc_requests_running", "gauge", "Requests in the batch, decoding.",
         (double)g->running);
  scalar(b, "relaxc_requests_waiting", "gauge",
         "Requests accepted and waiting for a batch slot or KV pages.", (double)g->waiting);
  scalar(b, "relaxc_kv_pages_used", "gauge", "KV cache pages (16 tokens each) in use.",
         (double)g->kv_pages_used);
  scalar(b, "relaxc_kv_pages_total", "gauge", "KV cache pages (16 tokens each) in all.",
         (double)g->kv_pages_total);
  scalar(b, "relaxc_connections", "gauge", "HTTP connections open.", (double)g->connections);
  scalar(b, "relaxc_requests_cancelled_total", "counter",
         "Generation requests cancelled because their client went away.", (double)g->cancelled);
  scalar(b, "relaxc_requests_timed_out_total", "counter",
         "Generation requests ended by relaxc serve --request-timeout.", (double)g->timed_out);
  scalar(b, "relaxc_requests_refused_busy_total", "counter",
         "Generation requests answered 503 because the queue was full.", (double)g->refused_busy);
  scalar(b, "relaxc_batcher_steps_total", "counter", "Batcher steps that did work.",
         (double)s->steps);
  scalar(b, "relaxc_batcher_prefills_total", "counter", "Packed prefill calls.",
         (double)s->prefills);
  scalar(b, "relaxc_batcher_prefill_rows_total", "counter", "Requests prefilled.",
         (double)s->prefill_rows);
  scalar(b, "relaxc_batcher_prefill_tokens_total", "counter", "Prompt tokens prefilled.",
         (double)s->prompt_tokens);
  scalar(b, "relaxc_batcher_decodes_total", "counter", "Decode calls.", (double)s->decodes);
  scalar(b, "relaxc_batcher_decode_rows_total", "counter",
         "Sequences over all decode calls (over decodes: the mean batch).", (double)s->decode_rows);
  scalar(b, "relaxc_batcher_decode_rows_max", "gauge", "The largest decode batch so far.",
         (double)s->max_rows);
  scalar(b, "relaxc_batcher_new_tokens_total", "counter", "Tokens sampled.", (double)s->new_tokens);
  scalar(b, "relaxc_prefix_cache_tokens_total", "counter",
         "Prompt tokens taken from the prefix cache instead of prefilled.",
         (double)s->cached_tokens);
  scalar(b, "relaxc_prefix_cache_pages", "gauge",
         "KV pages the prefix cache holds now (counted in kv_pages_used; evictable when unshared).",
         (double)s->pages_cached);
  scalar(b, "relaxc_prefix_cache_evicted_pages_total", "counter",
         "KV pages evicted from the prefix cache.", (double)s->pages_evicted);
  scalar(b, "relaxc_batcher_prefill_seconds_total", "counter", "Wall-clock time in prefill.",
         s->prefill_ms / 1e3);
  scalar(b, "relaxc_batcher_decode_seconds_total", "counter", "Wall-clock time in decode.",
         s->decode_ms / 1e3);
}

char *serve_metrics_text(serve_metrics *m, const serve_gauges *g) {
  rx_strbuf b = {0};
  pthread_mutex_lock(&m->lock);
  head(&b, "relaxc_requests_total", "counter",
       "HTTP requests answered, by endpoint and status (499: the client left first).");
  for (int e = 0; e < SERVE_EP_COUNT; e++)
    for (int i = 0; i < SERVE_STATUSES; i++)
      if (m->requests[e][i]) {
        char st[16];
        if (i < SERVE_STATUSES - 1)
          snprintf(st, sizeof st, "%u", statuses[i]);
        else
          snprintf(st, sizeof st, "other");
        base_strbuf_printf(&b, "relaxc_requests_total{endpoint=\"%s\",status=\"%s\"} %llu\n",
                           endpoint_names[e], st, (unsigned long long)m->requests[e][i]);
      }
  scalar(&b, "relaxc_prompt_tokens_total", "counter", "Prompt tokens of generation requests.",
         (double)m->prompt_tokens);
  scalar(&b, "relaxc_generation_tokens_total", "counter", "Tokens generated.",
         (double)m->generation_tokens);
  histogram(&b, "relaxc_time_to_first_token_seconds",
            "From a request's arrival to its first generated token.", &m->ttft);
  histogram(&b, "relaxc_inter_token_latency_seconds",
            "Between two consecutive tokens of one request.", &m->itl);
  histogram(&b, "relaxc_request_duration_seconds",
            "From a generation request's arrival to its end.", &m->e2e);
  pthread_mutex_unlock(&m->lock);
  gauges_text(&b, g);
  return base_strbuf_take(&b);
}

void serve_log_request(FILE *f, const serve_log_entry *e) {
  struct timespec t;
  clock_gettime(CLOCK_REALTIME, &t);
  struct tm tm;
  gmtime_r(&t.tv_sec, &tm);
  char when[40], line[512], tok[160] = "";
  strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%S", &tm);
  if (e->prompt_tokens >= 0) {
    char ttft[32] = "-";
    if (e->ttft_ms >= 0) snprintf(ttft, sizeof ttft, "%.1f", e->ttft_ms);
    snprintf(tok, sizeof tok, " prompt=%lld new=%lld ttft_ms=%s", (long long)e->prompt_tokens,
             (long long)e->new_tokens, ttft);
  }
  snprintf(line, sizeof line, "relaxc serve: %s.%03ldZ %s %s %s %u%s total_ms=%.1f%s%s\n", when,
           t.tv_nsec / 1000000L, e->id ? e->id : "-", e->method ? e->method : "-",
           serve_endpoint_name(e->endpoint), e->status, tok, e->total_ms,
           e->finish ? " finish=" : "", e->finish ? e->finish : "");
  fputs(line, f);
}
