/* relaxc serve's HTTP server (tools/serve/server.c) in process, on an ephemeral loopback port,
 * with the trained tiny Llama of tests/llm/models (kjv-llama, f32, --max-batch 16) on Vulkan
 * (lavapipe here), and a client of plain sockets (HTTP/1.0, so answers end at the close):
 *
 * - a non-streaming greedy /v1/completions equals rx_llm_generate's text for the prompt; a
 *   streaming one's server-sent events join to the same text and end with "data: [DONE]"; a chat
 *   completion streamed joins to the non-streamed one's message;
 * - 4xx with a JSON error naming the problem for: malformed JSON, a prompt that is not a string, a
 *   temperature that is not a number, a prompt over the context, max_tokens over it, an unknown
 *   model, "stop", a GET of a POST endpoint, an unknown path;
 * - a client that disconnects mid-stream cancels its request: the KV cache ends empty;
 * - load: 64 concurrent streaming clients (threads), each response complete and equal to the same
 *   prompt alone (greedy); throughput and latency percentiles printed (bench/RESULTS.md).
 *
 * usage: test_serve TESTS_DIR */
#include "base/base.h"
#include "driver/driver.h"
#include "frontends/hf/hf.h"
#include "relaxc/llm.h"
#include "relaxc/runtime.h"
#include "support_runtime.h"
#include "targets/target.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifdef RX_HAVE_MICROHTTPD
#include "tools/serve/server.h"

#include <arpa/inet.h>
#include <cjson/cJSON.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sys/socket.h>
#include <time.h>

static int passed, failed;
static pthread_mutex_t check_lock = PTHREAD_MUTEX_INITIALIZER;

#define CHECK(cond, ...)                                                                           \
  do {                                                                                             \
    pthread_mutex_lock(&check_lock);                                                               \
    if (cond) {                                                                                    \
      passed++;                                                                                    \
    } else {                                                                                       \
      failed++;                                                                                    \
      fprintf(stderr, "FAIL: " __VA_ARGS__);                                                       \
      fputc('\n', stderr);                                                                         \
    }                                                                                              \
    pthread_mutex_unlock(&check_lock);                                                             \
  } while (0)

#define MAX_B    16
#define NPROMPT  4
#define MAXTOK   12
#define NCLIENTS 64
static const char *prompts[NPROMPT] = {"In the beginning God", "And the LORD said unto Moses",
                                       "Blessed are", "And it came to pass"};
static char *want[NPROMPT];
static int port;

static bool ok_status(rx_status s, const char *what) {
  CHECK(!s, "%s: %s", what, rx_status_message(s));
  rx_status_free(s);
  return !s;
}

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

/* kjv-llama in f32 for the Vulkan device's target, at most MAX_B sequences per decode. */
static bool compile(const char *tests, const rxk_backend *vk, const char *path) {
  char why[2048];
  bool ok = rxk_compile_llm(tests, "kjv-llama", MAX_B, &vk->target, path, why, sizeof why);
  CHECK(ok, "%s", why);
  return ok;
}

/* ---- the reference: rx_llm_generate alone, greedy, MAXTOK tokens ---- */

typedef struct text {
  char *s;
  size_t len;
} text;

static bool collect(void *user, int32_t id, const char *t, size_t len) {
  (void)id;
  text *x = user;
  char *s = realloc(x->s, x->len + len + 1);
  if (!s) return false;
  memcpy(s + x->len, t, len);
  x->s = s;
  x->len += len;
  s[x->len] = 0;
  return true;
}

static char *reference(rx_llm_model *m, const char *prompt) {
  int32_t *ids = NULL;
  size_t n = 0;
  text t = {calloc(1, 1), 0};
  if (ok_status(rx_tokenizer_encode(rx_llm_model_tokenizer(m), prompt, strlen(prompt),
                                    RX_TOKENIZER_ADD_SPECIAL, &ids, &n),
                "encode")) {
    rx_llm_generate_params p = {.sampling = rx_sampler_default_params(),
                                .max_tokens = MAXTOK,
                                .on_token = collect,
                                .user = &t};
    p.sampling.temperature = 0;
    ok_status(rx_llm_generate(m, 0, ids, n, &p, NULL, NULL), "generate");
    rx_llm_model_reset(m, 0);
  }
  rx_llm_free(ids);
  return t.s;
}

/* ---- the client ---- */

static int connect_server(void) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
  if (fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof a)) {
    close(fd);
    fd = -1;
  }
  return fd;
}

static bool send_request(int fd, const char *method, const char *path, const char *body) {
  char head[512];
  size_t blen = body ? strlen(body) : 0;
  int n = snprintf(head, sizeof head,
                   "%s %s HTTP/1.0\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                   "Content-Length: %zu\r\n\r\n",
                   method, path, blen);
  return write(fd, head, (size_t)n) == n && (!blen || write(fd, body, blen) == (ssize_t)blen);
}

/* One request; the status, and the body (heap) in *out. */
static int http(const char *method, const char *path, const char *body, char **out) {
  *out = NULL;
  int fd = connect_server();
  if (fd < 0 || !send_request(fd, method, path, body)) {
    if (fd >= 0) close(fd);
    return -1;
  }
  text r = {calloc(1, 1), 0};
  char buf[4096];
  ssize_t k;
  while ((k = read(fd, buf, sizeof buf)) > 0) collect(&r, 0, buf, (size_t)k);
  close(fd);
  int status = -1;
  if (sscanf(r.s, "HTTP/1.%*d %d", &status) != 1) status = -1;
  char *b = strstr(r.s, "\r\n\r\n");
  *out = rx_strdup(b ? b + 4 : "");
  free(r.s);
  return status;
}

static char *completion_body(const char *prompt, int max_tokens, bool stream) {
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "model", "kjv");
  cJSON_AddStringToObject(o, "prompt", prompt);
  cJSON_AddNumberToObject(o, "max_tokens", max_tokens);
  cJSON_AddNumberToObject(o, "temperature", 0);
  cJSON_AddBoolToObject(o, "stream", stream);
  char *s = cJSON_PrintUnformatted(o);
  cJSON_Delete(o);
  return s;
}

/* choices[0].text, or .message.content / .delta.content (chat), of one JSON object; "" if
 * absent. */
static const char *choice_text(const cJSON *o) {
  const cJSON *c0 = cJSON_GetArrayItem(cJSON_GetObjectItem(o, "choices"), 0);
  const cJSON *t = cJSON_GetObjectItem(c0, "text");
  if (!t) t = cJSON_GetObjectItem(cJSON_GetObjectItem(c0, "message"), "content");
  if (!t) t = cJSON_GetObjectItem(cJSON_GetObjectItem(c0, "delta"), "content");
  return cJSON_IsString(t) ? t->valuestring : "";
}

/* The events of an SSE body joined; *done: the last event was [DONE]. NULL if an event is not
 * JSON. */
static char *join_events(const char *body, bool *done, int *events) {
  text t = {calloc(1, 1), 0};
  *done = false;
  *events = 0;
  for (const char *p = body; p && *p;) {
    const char *e = strstr(p, "\n\n");
    size_t n = e ? (size_t)(e - p) : strlen(p);
    if (n > 6 && !strncmp(p, "data: ", 6)) {
      char *ev = strndup(p + 6, n - 6);
      if (!strcmp(ev, "[DONE]"))
        *done = true;
      else {
        cJSON *o = cJSON_Parse(ev);
        if (!o) {
          free(ev);
          free(t.s);
          return NULL;
        }
        const char *x = choice_text(o);
        collect(&t, 0, x, strlen(x));
        cJSON_Delete(o);
        *done = false;
        (*events)++;
      }
      free(ev);
    }
    p = e ? e + 2 : NULL;
  }
  return t.s;
}

/* ---- the cases ---- */

static void basic(void) {
  char *body = completion_body(prompts[0], MAXTOK, false), *out = NULL;
  int st = http("POST", "/v1/completions", body, &out);
  cJSON *o = cJSON_Parse(out ? out : "");
  CHECK(st == 200 && o, "non-streaming completion: status %d, body %s", st, out);
  CHECK(!strcmp(choice_text(o), want[0]), "non-streaming: '%s', rx_llm_generate gave '%s'",
        choice_text(o), want[0]);
  cJSON_Delete(o);
  free(out);
  free(body);

  body = completion_body(prompts[0], MAXTOK, true);
  st = http("POST", "/v1/completions", body, &out);
  bool done = false;
  int events = 0;
  char *joined = out ? join_events(out, &done, &events) : NULL;
  CHECK(st == 200 && joined && done && events > 1,
        "streaming: status %d, %d events, done %d, body %s", st, events, done, out ? out : "");
  CHECK(joined && !strcmp(joined, want[0]), "streaming: joined '%s', rx_llm_generate gave '%s'",
        joined ? joined : "(none)", want[0]);
  free(joined);
  free(out);
  free(body);

  /* chat: streamed equals not streamed */
  const char *chat = "{\"messages\":[{\"role\":\"user\",\"content\":\"Who begat Isaac?\"}],"
                     "\"max_tokens\":10,\"temperature\":0,\"stream\":%s}";
  char req[256];
  snprintf(req, sizeof req, chat, "false");
  st = http("POST", "/v1/chat/completions", req, &out);
  o = cJSON_Parse(out ? out : "");
  char *whole = rx_strdup(choice_text(o));
  CHECK(st == 200 && o && *whole, "chat: status %d, body %s", st, out);
  cJSON_Delete(o);
  free(out);
  snprintf(req, sizeof req, chat, "true");
  st = http("POST", "/v1/chat/completions", req, &out);
  joined = out ? join_events(out, &done, &events) : NULL;
  CHECK(st == 200 && done && joined && !strcmp(joined, whole),
        "chat streamed: status %d, '%s', not streamed '%s'", st, joined, whole);
  free(joined);
  free(whole);
  free(out);
}

static void bad_requests(void) {
  char *big = malloc(8 * 700 + 64);
  strcpy(big, "{\"prompt\":\"");
  for (int i = 0; i < 700; i++) strcat(big, "and the ");
  strcat(big, "\"}");
  struct {
    const char *method, *path, *body;
    int status;
    const char *says; /* in the error's message */
  } cases[] = {
      {"POST", "/v1/completions", "{\"prompt\": \"x\",", 400, "malformed JSON"},
      {"POST", "/v1/completions", "{\"prompt\": 3}", 400, "'prompt' must be a string"},
      {"POST", "/v1/completions", "{\"prompt\": \"a\", \"temperature\": \"hot\"}", 400,
       "'temperature' must be a number"},
      {"POST", "/v1/completions", big, 400, "more than the model's context"},
      {"POST", "/v1/completions", "{\"prompt\": \"a\", \"max_tokens\": 100000}", 400,
       "max_tokens is 100000"},
      {"POST", "/v1/completions", "{\"prompt\": \"a\", \"max_tokens\": 2.5}", 400,
       "'max_tokens' must be an integer"},
      {"POST", "/v1/completions", "{\"prompt\": \"a\", \"model\": \"gpt-9\"}", 404,
       "model 'gpt-9' not found"},
      {"POST", "/v1/completions", "{\"prompt\": \"a\", \"stop\": \"\\n\"}", 400,
       "'stop' is not supported"},
      {"POST", "/v1/chat/completions", "{\"messages\": [{\"role\": \"user\"}]}", 400,
       "messages[0] needs"},
      {"GET", "/v1/completions", NULL, 405, "takes POST"},
      {"POST", "/v1/nothing", "{}", 404, "no endpoint /v1/nothing"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    char *out = NULL;
    int st = http(cases[i].method, cases[i].path, cases[i].body, &out);
    cJSON *o = cJSON_Parse(out ? out : "");
    const cJSON *msg = cJSON_GetObjectItem(cJSON_GetObjectItem(o, "error"), "message");
    CHECK(st == cases[i].status && cJSON_IsString(msg) && strstr(msg->valuestring, cases[i].says),
          "bad request %zu: status %d (expected %d), body %s (expected '%s')", i, st,
          cases[i].status, out, cases[i].says);
    cJSON_Delete(o);
    free(out);
  }
  free(big);
}

/* Waits (up to 10 s) until the server holds no request and the KV cache is empty. */
static bool settled(rx_server *s, rx_llm_model *m, int64_t capacity) {
  for (int i = 0; i < 1000; i++) {
    rx_server_stats st = rx_server_get_stats(s);
    if (!st.pending && !st.sequences && st.kv_free_tokens == capacity) return true;
    nanosleep(&(struct timespec){0, 10000000}, NULL);
  }
  (void)m;
  return false;
}

static void disconnect(rx_server *s, rx_llm_model *m, int64_t capacity) {
  int64_t before = rx_server_get_stats(s).cancelled;
  int fd = connect_server();
  char *body = completion_body(prompts[1], 400, true);
  bool sent = fd >= 0 && send_request(fd, "POST", "/v1/completions", body);
  free(body);
  char buf[2048];
  size_t got = 0;
  /* read until two events came (the generation is under way) */
  while (sent && got < sizeof buf - 1) {
    ssize_t k = read(fd, buf + got, sizeof buf - 1 - got);
    if (k <= 0) break;
    got += (size_t)k;
    buf[got] = 0;
    char *first = strstr(buf, "data: ");
    if (first && strstr(first + 6, "data: ")) break;
  }
  CHECK(sent && got, "disconnect: no events came");
  struct linger lg = {1, 0}; /* close with a reset */
  if (fd >= 0) {
    setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
    close(fd);
  }
  /* the cancellation, then the cache empty (stats lag the scheduler by one step) */
  rx_server_stats st = rx_server_get_stats(s);
  for (int i = 0; i < 1000 && st.cancelled == before; i++) {
    nanosleep(&(struct timespec){0, 10000000}, NULL);
    st = rx_server_get_stats(s);
  }
  CHECK(st.cancelled == before + 1,
        "disconnect: the request was not cancelled (cancelled %lld before, %lld after; pending "
        "%lld, completed %lld)",
        (long long)before, (long long)st.cancelled, (long long)st.pending, (long long)st.completed);
  CHECK(settled(s, m, capacity), "disconnect: the server still holds requests or KV pages");
}

typedef struct client {
  int k;
  double start, first, end;
  bool ok;
} client;

static void *client_thread(void *arg) {
  client *c = arg;
  int p = c->k % NPROMPT;
  char *body = completion_body(prompts[p], MAXTOK, true);
  c->start = now_ms();
  int fd = connect_server();
  text r = {calloc(1, 1), 0};
  if (fd >= 0 && send_request(fd, "POST", "/v1/completions", body)) {
    char buf[4096];
    ssize_t k;
    while ((k = read(fd, buf, sizeof buf)) > 0) {
      collect(&r, 0, buf, (size_t)k);
      if (!c->first && strstr(r.s, "data: ")) c->first = now_ms();
    }
  }
  if (fd >= 0) close(fd);
  c->end = now_ms();
  char *b = strstr(r.s, "\r\n\r\n");
  bool done = false;
  int events = 0;
  char *joined = b ? join_events(b + 4, &done, &events) : NULL;
  c->ok = joined && done && !strcmp(joined, want[p]);
  CHECK(c->ok, "load: client %d got '%s' (done %d), alone '%s'", c->k, joined, done, want[p]);
  free(joined);
  free(r.s);
  free(body);
  return NULL;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static void load(rx_server *s) {
  static client cs[NCLIENTS];
  pthread_t th[NCLIENTS];
  int64_t before = rx_server_get_stats(s).completed;
  double t0 = now_ms();
  for (int k = 0; k < NCLIENTS; k++) {
    cs[k] = (client){.k = k};
    pthread_create(&th[k], NULL, client_thread, &cs[k]);
  }
  for (int k = 0; k < NCLIENTS; k++) pthread_join(th[k], NULL);
  double wall = now_ms() - t0;
  int ok = 0;
  double lat[NCLIENTS], ttft[NCLIENTS];
  for (int k = 0; k < NCLIENTS; k++) {
    ok += cs[k].ok;
    lat[k] = cs[k].end - cs[k].start;
    ttft[k] = cs[k].first ? cs[k].first - cs[k].start : lat[k];
  }
  int64_t done = rx_server_get_stats(s).completed - before;
  CHECK(ok == NCLIENTS && done == NCLIENTS, "load: %d of %d complete, the server ended %lld", ok,
        NCLIENTS, (long long)done);
  qsort(lat, NCLIENTS, sizeof *lat, cmp_double);
  qsort(ttft, NCLIENTS, sizeof *ttft, cmp_double);
  fprintf(stderr,
          "load: %d streaming clients x %d tokens in %.0f ms: %.1f requests/s, %.1f tokens/s; "
          "latency p50 %.0f p90 %.0f p99 %.0f ms; first token p50 %.0f p90 %.0f p99 %.0f ms\n",
          NCLIENTS, MAXTOK, wall, NCLIENTS * 1e3 / wall, NCLIENTS * MAXTOK * 1e3 / wall,
          lat[NCLIENTS / 2], lat[NCLIENTS * 9 / 10], lat[NCLIENTS * 99 / 100], ttft[NCLIENTS / 2],
          ttft[NCLIENTS * 9 / 10], ttft[NCLIENTS * 99 / 100]);
}

static void serve(rx_llm_model *m) {
  int64_t capacity = rx_llm_model_kv_capacity(m);
  for (int p = 0; p < NPROMPT; p++) want[p] = reference(m, prompts[p]);
  rx_server_options so = {.port = 0, .max_batch = MAX_B, .model_name = "kjv"};
  rx_server *s = NULL;
  if (!ok_status(rx_server_start(m, &so, &s), "start the server")) return;
  port = rx_server_port(s);
  CHECK(port > 0, "the server's port is %d", port);
  basic();
  bad_requests();
  disconnect(s, m, capacity);
  load(s);
  CHECK(settled(s, m, capacity), "after the load the server still holds requests or KV pages");
  rx_server_stop(s);
  for (int p = 0; p < NPROMPT; p++) free(want[p]);
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: test_serve TESTS_DIR\n");
    return 2;
  }
  rxk_backend vk = {.kind = RX_RT_BACKEND_VULKAN};
  rxk_rt_open(&vk, "vulkan:0");
  if (!vk.dev) {
    fprintf(stderr, "SKIP: no Vulkan device: %s\n", vk.why);
    return 77;
  }
  rx_rt_device_release(vk.dev);
  vk.dev = NULL;
  char path[256];
  snprintf(path, sizeof path, "/tmp/rx_test_serve_%d.rxm", (int)getpid());
  if (compile(argv[1], &vk, path)) {
    rx_llm_model_options mo = {.device = "vulkan:0", .capacity = 2048, .max_sequences = MAX_B};
    rx_llm_model *m = NULL;
    if (ok_status(rx_llm_model_load(path, &mo, &m), path)) serve(m);
    rx_llm_model_free(m);
  }
  unlink(path);
  fprintf(stderr, "test_serve: %d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
#else
int main(void) {
  fprintf(stderr, "SKIP: relaxc was built without libmicrohttpd (no relaxc serve)\n");
  return 77;
}
#endif
