/* relaxc serve's operations (tools/serve/ops.c), apart from the HTTP plumbing of server.c: the
 * API key's constant-time check, the Prometheus metrics (their registry and the text exposition
 * format, version 0.0.4, of GET /metrics) and the request log line. Nothing here touches
 * libmicrohttpd or the model, so each piece is a plain function the server calls. */
#ifndef RX_TOOLS_SERVE_OPS_H
#define RX_TOOLS_SERVE_OPS_H
#include "relaxc/llm.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

/* Whether an Authorization header's value (NULL: none) is "Bearer KEY". The time it takes depends
 * on the lengths only, never on where the first differing byte is. */
bool serve_auth_ok(const char *header, const char *key);

/* The endpoints requests are counted by: a fixed list, so that a client's URL never becomes a
 * label (unbounded series, text to escape); anything else is "other". */
#define SERVE_ENDPOINTS(X)                                                                         \
  X(COMPLETIONS, "/v1/completions")                                                                \
  X(CHAT, "/v1/chat/completions")                                                                  \
  X(MODELS, "/v1/models")                                                                          \
  X(HEALTH, "/health")                                                                             \
  X(METRICS, "/metrics")                                                                           \
  X(OTHER, "other")
typedef enum serve_endpoint {
#define X(e, s) SERVE_EP_##e,
  SERVE_ENDPOINTS(X)
#undef X
      SERVE_EP_COUNT
} serve_endpoint;
serve_endpoint serve_endpoint_of(const char *url);
const char *serve_endpoint_name(serve_endpoint e);

/* HTTP statuses counted apart (others fall into the last slot, labelled "other"); 499 is a client
 * that closed its connection before it was answered (nginx's code). */
#define SERVE_STATUSES 12
/* Histogram buckets' upper bounds, in seconds (the +Inf bucket is implicit). */
#define SERVE_BUCKETS_MAX 20

typedef struct serve_histogram {
  const double *bounds; /* ascending, n of them */
  int n;
  uint64_t counts[SERVE_BUCKETS_MAX + 1]; /* per bucket (not cumulative); [n]: past the last */
  double sum;
  uint64_t count;
} serve_histogram;

/* The counters and histograms, under their own lock (taken after the server's, never before). */
typedef struct serve_metrics {
  pthread_mutex_t lock;
  uint64_t requests[SERVE_EP_COUNT][SERVE_STATUSES];
  uint64_t prompt_tokens, generation_tokens; /* of generation requests that ended */
  serve_histogram ttft;                      /* arrival to first token, per request */
  serve_histogram itl;                       /* between two tokens of one request */
  serve_histogram e2e;                       /* arrival to end, per generation request */
} serve_metrics;

/* What /metrics reports as gauges and the batcher's totals, read by the server under its lock. */
typedef struct serve_gauges {
  int64_t running, waiting; /* requests in the batcher (waiting: queued too) */
  int64_t kv_pages_used, kv_pages_total;
  int64_t connections;
  int64_t cancelled, timed_out, refused_busy; /* requests ended that way, since the start */
  rx_llm_batcher_stats batcher;
} serve_gauges;

void serve_metrics_init(serve_metrics *m);
void serve_metrics_destroy(serve_metrics *m);
void serve_metrics_request(serve_metrics *m, serve_endpoint e, unsigned status);
void serve_metrics_tokens(serve_metrics *m, int64_t prompt, int64_t generated);
void serve_metrics_ttft(serve_metrics *m, double seconds);
void serve_metrics_itl(serve_metrics *m, double seconds);
void serve_metrics_e2e(serve_metrics *m, double seconds);
/* The exposition text (heap; NULL: out of memory). */
char *serve_metrics_text(serve_metrics *m, const serve_gauges *g);

/* One request's line of the log. */
typedef struct serve_log_entry {
  const char *id;     /* the answer's id ("cmpl-7"), or "-" for a request without a generation */
  const char *method; /* "GET", "POST" */
  serve_endpoint endpoint;
  unsigned status;       /* the HTTP status sent, 499 when the client left before any */
  int64_t prompt_tokens; /* -1: not a generation */
  int64_t new_tokens;    /* generated */
  double ttft_ms;        /* < 0: no token came */
  double total_ms;       /* arrival to the end of the answer */
  const char *finish;    /* "stop", "length", "error", "cancelled", "timeout", or NULL */
} serve_log_entry;

/* Writes "relaxc serve: TIME ID METHOD ENDPOINT STATUS prompt=N new=N ttft_ms=X total_ms=Y
 * finish=F\n" (TIME: UTC, ISO 8601 with milliseconds) in one fputs, so lines of concurrent
 * requests never interleave. */
void serve_log_request(FILE *f, const serve_log_entry *e);
#endif
