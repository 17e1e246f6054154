/* relaxc serve's operations without the network or a model (tools/serve/ops.c): the API key's
 * check on exact, shorter, longer, differently-cased and missing headers; the /metrics route; the
 * metrics' Prometheus text (buckets "less or equal" at their bounds, cumulative, +Inf = _count,
 * statuses outside the list counted as "other", a client's URL never a label); the request log's
 * line. serve.client_ops (tests/serve) checks the same through the server with the openai client.
 */
#include "check.h"
#include "tools/serve/ops.h"
#include "tools/serve/request.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void auth(void) {
  const char *key = "sk-relaxc-42";
  CHECK(serve_auth_ok("Bearer sk-relaxc-42", key));
  const char *bad[] = {NULL,
                       "",
                       "Bearer",
                       "Bearer ",
                       "Bearer sk-relaxc-4",
                       "Bearer sk-relaxc-421",
                       "bearer sk-relaxc-42",
                       "Bearer  sk-relaxc-42",
                       "Basic sk-relaxc-42",
                       "Bearer sk-relaxc-43",
                       "Xearer sk-relaxc-42",
                       "sk-relaxc-42"};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
    CHECK_MSG(!serve_auth_ok(bad[i], key), "'%s' accepted", bad[i] ? bad[i] : "(null)");
  CHECK(!serve_auth_ok("Bearer x", NULL));
}

static void routes(void) {
  rx_serve_error e = {0};
  CHECK(serve_route_of("GET", "/metrics", &e) == RX_SERVE_METRICS);
  CHECK(serve_route_of("POST", "/metrics", &e) == RX_SERVE_REFUSED && e.status == 405);
  CHECK(serve_endpoint_of("/v1/chat/completions") == SERVE_EP_CHAT);
  CHECK(serve_endpoint_of("/metrics") == SERVE_EP_METRICS);
  CHECK(serve_endpoint_of("/v1/completions?x=\"") == SERVE_EP_OTHER);
  CHECK(serve_endpoint_of(NULL) == SERVE_EP_OTHER);
  CHECK_STR_EQ(serve_endpoint_name(SERVE_EP_OTHER), "other");
}

/* the value of the sample line that starts with prefix (followed by a space), or -1 */
static double sample(const char *text, const char *prefix) {
  size_t n = strlen(prefix);
  for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
    if (!strncmp(p, prefix, n) && p[n] == ' ') return strtod(p + n + 1, NULL);
  return -1;
}

static void metrics(void) {
  serve_metrics m;
  serve_metrics_init(&m);
  serve_metrics_request(&m, SERVE_EP_COMPLETIONS, 200);
  serve_metrics_request(&m, SERVE_EP_COMPLETIONS, 200);
  serve_metrics_request(&m, SERVE_EP_CHAT, 499);
  serve_metrics_request(&m, SERVE_EP_OTHER, 418);
  serve_metrics_tokens(&m, 7, 33);
  serve_metrics_tokens(&m, 1, 0);
  serve_metrics_ttft(&m, 0.001);  /* on the first bound: in it ("less or equal") */
  serve_metrics_ttft(&m, 0.0011); /* past it: in the next */
  serve_metrics_ttft(&m, 1000);   /* past every bound: +Inf only */
  serve_metrics_itl(&m, -1);      /* a clock that went back counts as 0 */
  serve_gauges g = {.running = 3, .waiting = 2, .kv_pages_used = 5, .kv_pages_total = 512};
  g.batcher.steps = 100;
  g.batcher.decode_ms = 1500;
  char *t = serve_metrics_text(&m, &g);
  CHECK(strstr(t, "# TYPE relaxc_requests_total counter\n") != NULL);
  CHECK(sample(t, "relaxc_requests_total{endpoint=\"/v1/completions\",status=\"200\"}") == 2);
  CHECK(sample(t, "relaxc_requests_total{endpoint=\"/v1/chat/completions\",status=\"499\"}") == 1);
  CHECK(sample(t, "relaxc_requests_total{endpoint=\"other\",status=\"other\"}") == 1);
  CHECK(sample(t, "relaxc_prompt_tokens_total") == 8);
  CHECK(sample(t, "relaxc_generation_tokens_total") == 33);
  CHECK(sample(t, "relaxc_time_to_first_token_seconds_bucket{le=\"0.001\"}") == 1);
  CHECK(sample(t, "relaxc_time_to_first_token_seconds_bucket{le=\"0.005\"}") == 2);
  CHECK(sample(t, "relaxc_time_to_first_token_seconds_bucket{le=\"80\"}") == 2);
  CHECK(sample(t, "relaxc_time_to_first_token_seconds_bucket{le=\"+Inf\"}") == 3);
  CHECK(sample(t, "relaxc_time_to_first_token_seconds_count") == 3);
  CHECK(sample(t, "relaxc_time_to_first_token_seconds_sum") == 0.001 + 0.0011 + 1000);
  CHECK(sample(t, "relaxc_inter_token_latency_seconds_bucket{le=\"0.01\"}") == 1);
  CHECK(sample(t, "relaxc_inter_token_latency_seconds_sum") == 0);
  CHECK(sample(t, "relaxc_request_duration_seconds_count") == 0);
  CHECK(sample(t, "relaxc_requests_running") == 3 && sample(t, "relaxc_requests_waiting") == 2);
  CHECK(sample(t, "relaxc_kv_pages_used") == 5 && sample(t, "relaxc_kv_pages_total") == 512);
  CHECK(sample(t, "relaxc_batcher_steps_total") == 100);
  CHECK(sample(t, "relaxc_batcher_decode_seconds_total") == 1.5);
  /* every line: a comment, or NAME[{...}] VALUE; every counter's name ends in _total */
  for (char *line = t; *line;) {
    char *end = strchr(line, '\n');
    CHECK_MSG(end != NULL, "the text does not end in a newline");
    if (!end) break;
    *end = 0;
    if (!strncmp(line, "# TYPE ", 7) && strstr(line, " counter"))
      CHECK_MSG(strstr(line, "_total counter") != NULL, "%s", line);
    else if (line[0] != '#')
      CHECK_MSG(strchr(line, ' ') && strchr(line, ' ') == strrchr(line, ' '), "%s", line);
    line = end + 1;
  }
  free(t);
  serve_metrics_destroy(&m);
}

static void log_line(void) {
  FILE *f = tmpfile();
  CHECK(f != NULL);
  if (!f) return;
  serve_log_entry e = {.id = "cmpl-7",
                       .method = "POST",
                       .endpoint = SERVE_EP_COMPLETIONS,
                       .status = 200,
                       .prompt_tokens = 5,
                       .new_tokens = 16,
                       .ttft_ms = 12.34,
                       .total_ms = 100.06,
                       .finish = "length"};
  serve_log_request(f, &e);
  serve_log_entry h = {.method = "GET",
                       .endpoint = SERVE_EP_HEALTH,
                       .status = 200,
                       .prompt_tokens = -1,
                       .total_ms = 0.04};
  serve_log_request(f, &h);
  rewind(f);
  char a[512] = "", b[512] = "";
  CHECK(fgets(a, sizeof a, f) && fgets(b, sizeof b, f));
  fclose(f);
  /* relaxc serve: YYYY-MM-DDTHH:MM:SS.mmmZ ... */
  CHECK_MSG(strlen(a) > 38 && !strncmp(a, "relaxc serve: ", 14) && a[24] == 'T' && a[37] == 'Z',
            "%s", a);
  CHECK_STR_EQ(a + 38, " cmpl-7 POST /v1/completions 200 prompt=5 new=16 ttft_ms=12.3 "
                       "total_ms=100.1 finish=length\n");
  CHECK_STR_EQ(b + 38, " - GET /health 200 total_ms=0.0\n");
}

int main(void) {
  auth();
  routes();
  metrics();
  log_line();
  return check_finish("test_serve_ops");
}
