/* relaxc serve's HTTP server (tools/serve/server.c) in process, on an ephemeral loopback port,
 * with the trained tiny Llama of tests/llm/models (kjv-llama, f32, --max-batch 16) on Vulkan
 * (lavapipe here), and a client of plain sockets (HTTP/1.0, so answers end at the close):
 *
 * - the API's fields: two greedy choices streamed with a stop string, each the greedy text cut
 *   before it, and include_usage's last chunk (rx_llm_generate with the stop string alike);
 * - a non-streaming greedy /v1/completions equals rx_llm_generate's text for the prompt; a
 *   streaming one's server-sent events join to the same text and end with "data: [DONE]"; a chat
 *   completion streamed joins to the non-streamed one's message;
 * - 4xx with a JSON error naming the problem for: malformed JSON, a prompt that is not a string, a
 *   temperature that is not a number, a prompt over the context, max_tokens over it, an unknown
 *   model, a field the server does not implement ("suffix", "parallel_tool_calls"), five stop
 *   strings, echo with logprobs, a logit_bias id outside the vocabulary, a GET of a POST
 *   endpoint, an unknown path;
 * - a client that disconnects mid-stream cancels its request: the KV cache ends empty;
 * - load: 64 concurrent streaming clients (threads), each response complete and equal to the same
 *   prompt alone (greedy); throughput and latency percentiles printed (bench/RESULTS.md);
 * - a prompt with "\u0000" is tokenized whole (its prompt_tokens are those of the bytes with the
 *   NUL), and --max-batch past the artifact's is refused;
 * - hostile clients, on servers with small timeouts and limits: hundreds of idle connections,
 *   slow headers, half bodies, abandoned non-streaming and streaming requests, while a
 *   well-behaved request is answered right and soon; the idle connections hold no thread; idle,
 *   slow and half connections closed; abandoned requests cancelled; a full queue answers 503
 *   with Retry-After; a deadline ends a request with 504; the per-address and total connection
 * limits hold; stopping the server while requests wait for tokens ends them with 503 and closes
 * their connections.
 *
 * usage: test_serve TESTS_DIR */
/* test-needs: runtime */
#include "base/base.h"
#include "check.h"
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
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sys/socket.h>
#include <time.h>

#define MAX_B    16
#define NPROMPT  4
#define MAXTOK   12
#define NCLIENTS 64
static const char *prompts[NPROMPT] = {"In the beginning God", "And the LORD said unto Moses",
                                       "Blessed are", "And it came to pass"};
static char *want[NPROMPT];
static int port;

static bool ok_status(rx_status s, const char *what) {
  CHECK_MSG(!s, "%s: %s", what, rx_status_message(s));
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
  CHECK_MSG(ok, "%s", why);
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
  *out = base_strdup(b ? b + 4 : "");
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
  CHECK_MSG(st == 200 && o, "non-streaming completion: status %d, body %s", st, out);
  CHECK_MSG(!strcmp(choice_text(o), want[0]), "non-streaming: '%s', rx_llm_generate gave '%s'",
            choice_text(o), want[0]);
  cJSON_Delete(o);
  free(out);
  free(body);

  body = completion_body(prompts[0], MAXTOK, true);
  st = http("POST", "/v1/completions", body, &out);
  bool done = false;
  int events = 0;
  char *joined = out ? join_events(out, &done, &events) : NULL;
  CHECK_MSG(st == 200 && joined && done && events > 1,
            "streaming: status %d, %d events, done %d, body %s", st, events, done, out ? out : "");
  CHECK_MSG(joined && !strcmp(joined, want[0]), "streaming: joined '%s', rx_llm_generate gave '%s'",
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
  char *whole = base_strdup(choice_text(o));
  CHECK_MSG(st == 200 && o && *whole, "chat: status %d, body %s", st, out);
  cJSON_Delete(o);
  free(out);
  snprintf(req, sizeof req, chat, "true");
  st = http("POST", "/v1/chat/completions", req, &out);
  joined = out ? join_events(out, &done, &events) : NULL;
  CHECK_MSG(st == 200 && done && joined && !strcmp(joined, whole),
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
      {"POST", "/v1/completions", "{\"prompt\": \"a\", \"max_tokens\": 1e49}", 400,
       "'max_tokens' is 1e+49, outside [1, 1e+15]"},
      {"POST", "/v1/completions", "{\"prompt\": \"a\", \"model\": \"gpt-9\"}", 404,
       "model 'gpt-9' not found"},
      {"POST", "/v1/completions", "{\"prompt\": \"a\", \"suffix\": \"b\"}", 400,
       "'suffix' is not supported"},
      {"POST", "/v1/completions",
       "{\"prompt\": \"a\", \"stop\": [\"1\", \"2\", \"3\", \"4\", \"5\"]}", 400,
       "'stop' has 5 strings, more than 4"},
      {"POST", "/v1/completions", "{\"prompt\": \"a\", \"logprobs\": 1, \"echo\": true}", 400,
       "'echo' with 'logprobs' needs"},
      {"POST", "/v1/completions", "{\"prompt\": \"a\", \"logit_bias\": {\"99999999\": 1}}", 400,
       "'logit_bias' names token 99999999"},
      {"POST", "/v1/chat/completions",
       "{\"messages\": [{\"role\": \"user\", \"content\": \"a\"}], \"parallel_tool_calls\": true}",
       400, "'parallel_tool_calls' is not supported"},
      {"POST", "/v1/chat/completions", "{\"messages\": [{\"role\": 1, \"content\": \"a\"}]}", 400,
       "messages[0] needs"},
      {"GET", "/v1/completions", NULL, 405, "takes POST"},
      {"POST", "/v1/nothing", "{}", 404, "no endpoint /v1/nothing"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    char *out = NULL;
    int st = http(cases[i].method, cases[i].path, cases[i].body, &out);
    cJSON *o = cJSON_Parse(out ? out : "");
    const cJSON *msg = cJSON_GetObjectItem(cJSON_GetObjectItem(o, "error"), "message");
    CHECK_MSG(st == cases[i].status && cJSON_IsString(msg) &&
                  strstr(msg->valuestring, cases[i].says),
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
    rx_server_stats st = serve_server_get_stats(s);
    if (!st.pending && !st.sequences && st.kv_free_tokens == capacity) return true;
    nanosleep(&(struct timespec){0, 10000000}, NULL);
  }
  (void)m;
  return false;
}

static void disconnect(rx_server *s, rx_llm_model *m, int64_t capacity) {
  int64_t before = serve_server_get_stats(s).cancelled;
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
  CHECK_MSG(sent && got, "disconnect: no events came");
  struct linger lg = {1, 0}; /* close with a reset */
  if (fd >= 0) {
    setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
    close(fd);
  }
  /* the cancellation, then the cache empty (stats lag the scheduler by one step) */
  rx_server_stats st = serve_server_get_stats(s);
  for (int i = 0; i < 1000 && st.cancelled == before; i++) {
    nanosleep(&(struct timespec){0, 10000000}, NULL);
    st = serve_server_get_stats(s);
  }
  CHECK_MSG(st.cancelled == before + 1,
            "disconnect: the request was not cancelled (cancelled %lld before, %lld after; pending "
            "%lld, completed %lld)",
            (long long)before, (long long)st.cancelled, (long long)st.pending,
            (long long)st.completed);
  CHECK_MSG(settled(s, m, capacity), "disconnect: the server still holds requests or KV pages");
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
  CHECK_MSG(c->ok, "load: client %d got '%s' (done %d), alone '%s'", c->k, joined, done, want[p]);
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
  int64_t before = serve_server_get_stats(s).completed;
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
  int64_t done = serve_server_get_stats(s).completed - before;
  CHECK_MSG(ok == NCLIENTS && done == NCLIENTS, "load: %d of %d complete, the server ended %lld",
            ok, NCLIENTS, (long long)done);
  qsort(lat, NCLIENTS, sizeof *lat, cmp_double);
  qsort(ttft, NCLIENTS, sizeof *ttft, cmp_double);
  fprintf(stderr,
          "load: %d streaming clients x %d tokens in %.0f ms: %.1f requests/s, %.1f tokens/s; "
          "latency p50 %.0f p90 %.0f p99 %.0f ms; first token p50 %.0f p90 %.0f p99 %.0f ms\n",
          NCLIENTS, MAXTOK, wall, NCLIENTS * 1e3 / wall, NCLIENTS * MAXTOK * 1e3 / wall,
          lat[NCLIENTS / 2], lat[NCLIENTS * 9 / 10], lat[NCLIENTS * 99 / 100], ttft[NCLIENTS / 2],
          ttft[NCLIENTS * 9 / 10], ttft[NCLIENTS * 99 / 100]);
}

/* ---- item 10 of issue 29: what was asked is what is answered ---- */

/* "\u0000" in a prompt is kept: its prompt_tokens are those of all its bytes, not of the text
 * before the NUL. */
static void nul_prompt(rx_llm_model *m) {
  static const char prompt[] = "And God\0 said, Let there be light";
  int32_t *ids = NULL;
  size_t whole = 0, cut = 0;
  ok_status(rx_tokenizer_encode(rx_llm_model_tokenizer(m), prompt, sizeof prompt - 1,
                                RX_TOKENIZER_ADD_SPECIAL, &ids, &whole),
            "encode with a NUL");
  rx_llm_free(ids);
  ids = NULL;
  ok_status(rx_tokenizer_encode(rx_llm_model_tokenizer(m), prompt, strlen(prompt),
                                RX_TOKENIZER_ADD_SPECIAL, &ids, &cut),
            "encode without");
  rx_llm_free(ids);
  CHECK_MSG(whole > cut, "the NUL test needs a text whose tail has tokens (%zu, %zu)", whole, cut);
  const char *req[] = {
      "{\"prompt\":\"And God\\u0000 said, Let there be light\",\"max_tokens\":1,\"temperature\":0}",
      "{\"messages\":[{\"role\":\"user\",\"content\":\"x\\u0000y\"}],\"max_tokens\":1}"};
  char *out = NULL;
  int st = http("POST", "/v1/completions", req[0], &out);
  cJSON *o = cJSON_Parse(out ? out : "");
  const cJSON *pt = cJSON_GetObjectItem(cJSON_GetObjectItem(o, "usage"), "prompt_tokens");
  CHECK_MSG(
      st == 200 && cJSON_IsNumber(pt) && pt->valuedouble == (double)whole,
      "a prompt with \\u0000: status %d, body %s; its %zu tokens expected (%zu cut at the NUL)", st,
      out, whole, cut);
  cJSON_Delete(o);
  free(out);
  /* chat: "user: x\0y\nassistant:" has more tokens than "user: x" */
  st = http("POST", "/v1/chat/completions", req[1], &out);
  o = cJSON_Parse(out ? out : "");
  pt = cJSON_GetObjectItem(cJSON_GetObjectItem(o, "usage"), "prompt_tokens");
  ids = NULL;
  static const char chat[] = "user: x\0y\nassistant:";
  ok_status(rx_tokenizer_encode(rx_llm_model_tokenizer(m), chat, sizeof chat - 1,
                                RX_TOKENIZER_ADD_SPECIAL, &ids, &whole),
            "encode the chat prompt");
  rx_llm_free(ids);
  CHECK_MSG(st == 200 && cJSON_IsNumber(pt) && pt->valuedouble == (double)whole,
            "a chat message with \\u0000: status %d, body %s; %zu prompt tokens expected", st, out,
            whole);
  cJSON_Delete(o);
  free(out);
}

/* --max-batch past what the artifact runs is refused by name; 0 announces the real value. */
static void max_batch(rx_llm_model *m) {
  rx_server_options so = {.max_batch = MAX_B * 4, .model_name = "kjv"};
  rx_server *s = NULL;
  rx_status st = serve_server_start(m, &so, &s);
  CHECK_MSG(st && strstr(rx_status_message(st), "--max-batch 64"),
            "max_batch %d on an artifact for %d: %s", MAX_B * 4, MAX_B,
            st ? rx_status_message(st) : "accepted");
  rx_status_free(st);
  serve_server_stop(s);
  so.max_batch = 0;
  s = NULL;
  if (ok_status(serve_server_start(m, &so, &s), "start with max_batch 0"))
    CHECK_MSG(serve_server_max_batch(s) == MAX_B, "max_batch 0 runs %lld at once, not %d",
              (long long)serve_server_max_batch(s), MAX_B);
  serve_server_stop(s);
}

/* ---- hostile clients (item 3 of issue 29) ---- */

#define NIDLE      200 /* idle connections that never send */
#define NSLOW      3   /* connections that send their headers a byte every SLOW_MS */
#define SLOW_MS    200
#define NHALF      3 /* connections that send half their body, then nothing */
#define NABANDON   8 /* abandoned non-streaming requests, and as many streaming ones */
#define LONG_TOKEN 480
#define IDLE_S     1    /* the hostile server's idle timeout */
#define READ_MS    1500 /* and its read timeout */
/* the well-behaved request's bound, with room for a loaded CI machine: it took 31 s when the
 * abandoned requests ran to their end, under 1 s now */
#define GOOD_MS 10000

/* Waits up to ms for the server to close fd (a read gives 0 or an error); true if it did. */
static bool closed_within(int fd, int ms) {
  double end = now_ms() + ms;
  for (;;) {
    int left = (int)(end - now_ms());
    struct pollfd p = {.fd = fd, .events = POLLIN};
    if (poll(&p, 1, left > 0 ? left : 0) > 0) {
      char b[256];
      ssize_t k = recv(fd, b, sizeof b, MSG_DONTWAIT);
      if (k == 0 || (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK)) return true;
      continue; /* an answer's bytes: read on until the close */
    }
    if (left <= 0) return false;
  }
}

typedef struct slow {
  int fd[NSLOW];
  double closed_at[NSLOW]; /* ms after the start, 0: still open */
  double start;
} slow;

/* Sends the slow connections' headers a byte every SLOW_MS for at most 8 s, noting when each was
 * closed. */
static void *slow_thread(void *arg) {
  slow *w = arg;
  static const char head[] =
      "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
      "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
  for (size_t i = 0; i < sizeof head - 1 && now_ms() - w->start < 8000; i++) {
    int open = 0;
    for (int k = 0; k < NSLOW; k++) {
      if (w->closed_at[k]) continue;
      struct pollfd p = {.fd = w->fd[k], .events = POLLIN};
      char b;
      bool gone = poll(&p, 1, 0) > 0 && recv(w->fd[k], &b, 1, MSG_DONTWAIT) <= 0;
      if (gone || send(w->fd[k], head + i, 1, MSG_NOSIGNAL) != 1)
        w->closed_at[k] = now_ms() - w->start;
      else
        open++;
    }
    if (!open) break;
    nanosleep(&(struct timespec){0, SLOW_MS * 1000000L}, NULL);
  }
  return NULL;
}

/* The threads of this process (/proc/self/status), or -1. */
static int process_threads(void) {
  FILE *f = fopen("/proc/self/status", "r");
  char line[256];
  int n = -1;
  while (f && fgets(line, sizeof line, f))
    if (sscanf(line, "Threads: %d", &n) == 1) break;
  if (f) fclose(f);
  return n;
}

/* Sends a request and closes at once (abandoned). */
static void abandon(const char *body) {
  int fd = connect_server();
  if (fd >= 0 && send_request(fd, "POST", "/v1/completions", body))
    close(fd);
  else if (fd >= 0)
    close(fd);
}

/* Hundreds of idle connections, slow headers, half bodies and abandoned requests at once; a
 * well-behaved request meanwhile is answered right and soon, the hostile connections are closed
 * by the timeouts, and the abandoned requests are cancelled. */
static void hostile(rx_llm_model *m, int64_t capacity) {
  rx_server_options so = {.max_batch = 4,
                          .model_name = "kjv",
                          .idle_timeout_s = IDLE_S,
                          .read_timeout_ms = READ_MS,
                          .max_connections = 1000,
                          .max_connections_per_ip = 1000};
  rx_server *s = NULL;
  if (!ok_status(serve_server_start(m, &so, &s), "start the hostile server")) return;
  port = serve_server_port(s);
  int threads0 = process_threads();
  static int idle[NIDLE];
  for (int i = 0; i < NIDLE; i++) idle[i] = connect_server();
  slow w = {.start = now_ms()};
  for (int k = 0; k < NSLOW; k++) w.fd[k] = connect_server();
  pthread_t th;
  pthread_create(&th, NULL, slow_thread, &w);
  int half[NHALF];
  static const char part[] = "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: "
                             "application/json\r\nContent-Length: 100\r\n\r\n{\"prompt\": \"In";
  for (int k = 0; k < NHALF; k++) {
    half[k] = connect_server();
    if (half[k] >= 0 && write(half[k], part, sizeof part - 1) < 0) CHECK_MSG(false, "half body");
  }
  int64_t before = serve_server_get_stats(s).cancelled;
  char *lng = completion_body(prompts[1], LONG_TOKEN, false);
  for (int k = 0; k < NABANDON; k++) abandon(lng);
  free(lng);
  lng = completion_body(prompts[2], LONG_TOKEN, true);
  for (int k = 0; k < NABANDON; k++) abandon(lng);
  free(lng);
  /* the well-behaved request: 4 tokens, the start of the 12 of the prompt alone */
  double t0 = now_ms();
  char *body = completion_body(prompts[0], 4, false), *out = NULL;
  int st = http("POST", "/v1/completions", body, &out);
  double took = now_ms() - t0;
  cJSON *o = cJSON_Parse(out ? out : "");
  const char *got = choice_text(o);
  CHECK_MSG(st == 200 && *got && !strncmp(got, want[0], strlen(got)) && took < GOOD_MS,
            "hostile: a 4-token request took %.0f ms (at most %d): status %d, '%s' (alone: '%s')",
            took, GOOD_MS, st, out, want[0]);
  cJSON_Delete(o);
  free(out);
  free(body);
  /* the idle connections hold no thread (libmicrohttpd's pool, not a thread per connection) */
  int threads = process_threads();
  CHECK_MSG(threads > 0 && threads - threads0 < NIDLE / 4,
            "hostile: the process runs %d threads with %d idle connections open, %d before",
            threads, NIDLE, threads0);
  /* the abandoned requests are cancelled, not run to their end */
  rx_server_stats ss = serve_server_get_stats(s);
  for (int i = 0; i < 300 && ss.cancelled < before + 2 * NABANDON; i++) {
    nanosleep(&(struct timespec){0, 10000000}, NULL);
    ss = serve_server_get_stats(s);
  }
  CHECK_MSG(ss.cancelled == before + 2 * NABANDON,
            "hostile: %lld of %d abandoned requests cancelled (completed %lld)",
            (long long)(ss.cancelled - before), 2 * NABANDON, (long long)ss.completed);
  CHECK_MSG(settled(s, m, capacity), "hostile: the server still holds requests or KV pages");
  /* the idle connections and the half bodies are closed by the idle timeout */
  int open_idle = 0, open_half = 0;
  double end = now_ms() + 3000; /* one bound for all */
  for (int i = 0; i < NIDLE; i++)
    open_idle += idle[i] < 0 || !closed_within(idle[i], (int)(end - now_ms()));
  for (int k = 0; k < NHALF; k++)
    open_half += half[k] < 0 || !closed_within(half[k], (int)(end - now_ms()));
  CHECK_MSG(!open_idle && !open_half,
            "hostile: %d of %d idle connections and %d of %d half bodies still open %d s after "
            "the idle timeout of %d s",
            open_idle, NIDLE, open_half, NHALF, 3, IDLE_S);
  for (int i = 0; i < NIDLE; i++)
    if (idle[i] >= 0) close(idle[i]);
  for (int k = 0; k < NHALF; k++)
    if (half[k] >= 0) close(half[k]);
  /* the slow headers are closed by the read timeout, though they never stay silent */
  pthread_join(th, NULL);
  for (int k = 0; k < NSLOW; k++) {
    CHECK_MSG(w.closed_at[k] && w.closed_at[k] < READ_MS + 2000,
              "hostile: slow headers %d closed at %.0f ms (0: never; read timeout %d ms)", k,
              w.closed_at[k], READ_MS);
    if (w.fd[k] >= 0) close(w.fd[k]);
  }
  serve_server_stop(s);
}

/* Starts the streaming request of a held connection and waits for its answer's headers. */
static int held_stream(const char *body) {
  int fd = connect_server();
  if (fd < 0 || !send_request(fd, "POST", "/v1/completions", body)) return fd;
  char buf[512];
  size_t got = 0;
  double end = now_ms() + 10000;
  while (got < sizeof buf - 1 && now_ms() < end) {
    struct pollfd p = {.fd = fd, .events = POLLIN};
    if (poll(&p, 1, 100) <= 0) continue;
    ssize_t k = recv(fd, buf + got, sizeof buf - 1 - got, 0);
    if (k <= 0) break;
    got += (size_t)k;
    buf[got] = 0;
    if (strstr(buf, "\r\n\r\n")) break;
  }
  return fd;
}

/* max_batch 2 and max_queue 1: three requests held, the fourth is answered 503 with
 * Retry-After; a deadline ends a request with 504. */
static void queue_and_deadline(rx_llm_model *m, int64_t capacity) {
  rx_server_options so = {.max_batch = 2, .max_queue = 1, .model_name = "kjv", .deadline_ms = 150};
  rx_server *s = NULL;
  if (!ok_status(serve_server_start(m, &so, &s), "start the queue server")) return;
  port = serve_server_port(s);
  /* the deadline first: a request of LONG_TOKEN tokens cannot end in 150 ms */
  char *body = completion_body(prompts[3], LONG_TOKEN, false), *out = NULL;
  int st = http("POST", "/v1/completions", body, &out);
  free(body);
  CHECK_MSG(st == 504 && out && strstr(out, "deadline of 150 ms passed"),
            "deadline: status %d, body %s", st, out);
  free(out);
  CHECK_MSG(serve_server_get_stats(s).timed_out == 1, "deadline: %lld timed out",
            (long long)serve_server_get_stats(s).timed_out);
  serve_server_stop(s);

  so.deadline_ms = 0;
  s = NULL;
  if (!ok_status(serve_server_start(m, &so, &s), "start the queue server")) return;
  port = serve_server_port(s);
  body = completion_body(prompts[3], LONG_TOKEN, true);
  int held[3];
  for (int k = 0; k < 3; k++) held[k] = held_stream(body);
  free(body);
  rx_server_stats ss = serve_server_get_stats(s);
  for (int i = 0; i < 200 && ss.pending != 3; i++) { /* the stats lag the scheduler by a step */
    nanosleep(&(struct timespec){0, 10000000}, NULL);
    ss = serve_server_get_stats(s);
  }
  CHECK_MSG(ss.pending == 3, "queue: %lld requests pending, 3 expected", (long long)ss.pending);
  int fd = connect_server();
  body = completion_body(prompts[0], 4, false);
  char buf[2048] = {0};
  size_t got = 0;
  if (fd >= 0 && send_request(fd, "POST", "/v1/completions", body)) {
    ssize_t k;
    while (got < sizeof buf - 1 && (k = read(fd, buf + got, sizeof buf - 1 - got)) > 0)
      got += (size_t)k;
  }
  if (fd >= 0) close(fd);
  free(body);
  CHECK_MSG(!strncmp(buf, "HTTP/1.", 7) && !strncmp(buf + 8, " 503", 4) &&
                strstr(buf, "Retry-After: 1") && strstr(buf, "--max-queue"),
            "queue: a request past a full queue got: %s", buf);
  for (int k = 0; k < 3; k++)
    if (held[k] >= 0) close(held[k]);
  CHECK_MSG(settled(s, m, capacity), "queue: the server still holds requests or KV pages");
  serve_server_stop(s);
}

typedef struct waiting_client {
  int status;
  char *body;
} waiting_client;

static void *waiting_thread(void *arg) {
  waiting_client *w = arg;
  char *req = completion_body(prompts[1], LONG_TOKEN, false);
  w->status = http("POST", "/v1/completions", req, &w->body);
  free(req);
  return NULL;
}

/* Stopping the server while requests wait for their tokens (their connections suspended) ends
 * them with "the server is stopping" and closes them. */
static void stop_while_waiting(rx_llm_model *m) {
  rx_server_options so = {.max_batch = 2, .model_name = "kjv"};
  rx_server *s = NULL;
  if (!ok_status(serve_server_start(m, &so, &s), "start the stopping server")) return;
  port = serve_server_port(s);
  waiting_client w = {0};
  pthread_t th;
  pthread_create(&th, NULL, waiting_thread, &w);
  char *body = completion_body(prompts[2], LONG_TOKEN, true);
  int fd = held_stream(body);
  free(body);
  rx_server_stats ss = serve_server_get_stats(s);
  for (int i = 0; i < 500 && ss.pending != 2; i++) {
    nanosleep(&(struct timespec){0, 10000000}, NULL);
    ss = serve_server_get_stats(s);
  }
  CHECK_MSG(ss.pending == 2, "stop: %lld requests pending, 2 expected", (long long)ss.pending);
  serve_server_stop(s);
  pthread_join(th, NULL);
  CHECK_MSG(w.status == 503 && w.body && strstr(w.body, "the server is stopping"),
            "stop: the waiting request got %d %s", w.status, w.body ? w.body : "");
  free(w.body);
  CHECK_MSG(fd >= 0 && closed_within(fd, 2000), "stop: the stream was not closed");
  if (fd >= 0) close(fd);
}

/* At most max_connections_per_ip from 127.0.0.1, and at most max_connections in all: the
 * connection past the limit is closed or never answered while the others are open. */
static void connection_limits(rx_llm_model *m) {
  for (int total = 0; total < 2; total++) {
    rx_server_options so = {.model_name = "kjv",
                            .max_connections = total ? 3 : 100,
                            .max_connections_per_ip = total ? 100 : 3};
    rx_server *s = NULL;
    if (!ok_status(serve_server_start(m, &so, &s), "start the limits server")) return;
    port = serve_server_port(s);
    int fd[3];
    for (int k = 0; k < 3; k++) fd[k] = connect_server();
    nanosleep(&(struct timespec){0, 100000000}, NULL);
    int extra = connect_server();
    char buf[256] = {0};
    if (extra >= 0 && send_request(extra, "GET", "/health", NULL)) {
      struct pollfd p = {.fd = extra, .events = POLLIN};
      if (poll(&p, 1, 500) > 0 && recv(extra, buf, sizeof buf - 1, MSG_DONTWAIT) < 0) buf[0] = 0;
    }
    CHECK_MSG(!strstr(buf, " 200 "), "%s limit of 3: a fourth connection was answered: %s",
              total ? "the" : "the per-IP", buf);
    for (int k = 0; k < 3; k++)
      if (fd[k] >= 0) close(fd[k]);
    if (extra >= 0) close(extra);
    /* with the others gone, a new connection is answered */
    char *out = NULL;
    int st = -1;
    for (int i = 0; i < 20 && st != 200; i++) {
      free(out);
      st = http("GET", "/health", NULL, &out);
      if (st != 200) nanosleep(&(struct timespec){0, 50000000}, NULL);
    }
    CHECK_MSG(st == 200, "limits: after the others closed, /health gave %d", st);
    free(out);
    serve_server_stop(s);
  }
}

/* The text of choice `index` over a stream's events joined; *finish: that choice's last
 * finish_reason ("" if none); *usage: the last event had no choices and a usage object. */
static char *join_choice(const char *body, int index, char *finish, bool *usage) {
  text t = {calloc(1, 1), 0};
  *finish = 0;
  *usage = false;
  for (const char *p = body; p && *p;) {
    const char *e = strstr(p, "\n\n");
    size_t n = e ? (size_t)(e - p) : strlen(p);
    char *ev = n > 6 && !strncmp(p, "data: ", 6) ? strndup(p + 6, n - 6) : NULL;
    cJSON *o = ev && strcmp(ev, "[DONE]") ? cJSON_Parse(ev) : NULL;
    const cJSON *chs = cJSON_GetObjectItem(o, "choices"), *c;
    if (o) *usage = !cJSON_GetArraySize(chs) && cJSON_IsObject(cJSON_GetObjectItem(o, "usage"));
    cJSON_ArrayForEach(c, chs) {
      if (cJSON_GetNumberValue(cJSON_GetObjectItem(c, "index")) != index) continue;
      const cJSON *x = cJSON_GetObjectItem(c, "text"), *f = cJSON_GetObjectItem(c, "finish_reason");
      if (cJSON_IsString(x)) collect(&t, 0, x->valuestring, strlen(x->valuestring));
      if (cJSON_IsString(f)) snprintf(finish, 16, "%s", f->valuestring);
    }
    cJSON_Delete(o);
    free(ev);
    p = e ? e + 2 : NULL;
  }
  return t.s;
}

/* The API's fields through the server (tests/serve/client_api.py drives them all with the openai
 * client): n = 2 greedy choices streamed with a stop string taken from the greedy answer, each
 * the answer cut before it with finish_reason "stop", and stream_options.include_usage's last
 * chunk; rx_llm_generate with the same stop string gives the same cut. */
static void api_fields(rx_llm_model *m) {
  size_t len = strlen(want[0]);
  CHECK_MSG(len > 8, "the greedy answer '%s' is too short", want[0]);
  if (len <= 8) return;
  char stop[8] = {0};
  memcpy(stop, want[0] + len / 2, 3);
  size_t cut = (size_t)(strstr(want[0], stop) - want[0]); /* one stop string: its first place */
  const char *stops[] = {stop};
  int32_t *ids = NULL;
  size_t n = 0;
  text t = {calloc(1, 1), 0};
  rx_llm_generate_stats st = {0};
  if (ok_status(rx_tokenizer_encode(rx_llm_model_tokenizer(m), prompts[0], strlen(prompts[0]),
                                    RX_TOKENIZER_ADD_SPECIAL, &ids, &n),
                "encode")) {
    rx_llm_generate_params p = {.sampling = rx_sampler_default_params(),
                                .max_tokens = MAXTOK,
                                .on_token = collect,
                                .user = &t,
                                .stop = stops,
                                .nstop = 1};
    p.sampling.temperature = 0;
    ok_status(rx_llm_generate(m, 0, ids, n, &p, NULL, &st), "generate with a stop string");
    rx_llm_model_reset(m, 0);
  }
  CHECK_MSG(t.len == cut && !memcmp(t.s, want[0], cut) && st.stopped_by_string,
            "rx_llm_generate with stop '%s': '%s', expected '%.*s' (stopped %d)", stop, t.s,
            (int)cut, want[0], st.stopped_by_string);
  free(t.s);
  rx_llm_free(ids);
  cJSON *o = cJSON_CreateObject(), *so;
  cJSON_AddStringToObject(o, "prompt", prompts[0]);
  cJSON_AddNumberToObject(o, "max_tokens", MAXTOK);
  cJSON_AddNumberToObject(o, "temperature", 0);
  cJSON_AddNumberToObject(o, "n", 2);
  cJSON_AddBoolToObject(o, "stream", true);
  cJSON_AddStringToObject(o, "stop", stop);
  so = cJSON_AddObjectToObject(o, "stream_options");
  cJSON_AddBoolToObject(so, "include_usage", true);
  char *body = cJSON_PrintUnformatted(o), *out = NULL;
  cJSON_Delete(o);
  int status = http("POST", "/v1/completions", body, &out);
  for (int i = 0; i < 2; i++) {
    char finish[16];
    bool usage = false;
    char *got = out ? join_choice(out, i, finish, &usage) : NULL;
    CHECK_MSG(status == 200 && got && strlen(got) == cut && !memcmp(got, want[0], cut) &&
                  !strcmp(finish, "stop") && usage,
              "n=2 with stop '%s', choice %d: status %d, '%s' (finish %s, usage %d), expected "
              "'%.*s'",
              stop, i, status, got ? got : "", finish, usage, (int)cut, want[0]);
    free(got);
  }
  free(out);
  free(body);
}

static void serve(rx_llm_model *m) {
  int64_t capacity = rx_llm_model_kv_capacity(m);
  for (int p = 0; p < NPROMPT; p++) want[p] = reference(m, prompts[p]);
  rx_server_options so = {
      .port = 0, .max_batch = MAX_B, .model_name = "kjv", .max_connections_per_ip = 2 * NCLIENTS};
  rx_server *s = NULL;
  if (!ok_status(serve_server_start(m, &so, &s), "start the server")) return;
  port = serve_server_port(s);
  CHECK_MSG(port > 0, "the server's port is %d", port);
  basic();
  api_fields(m);
  bad_requests();
  disconnect(s, m, capacity);
  nul_prompt(m);
  load(s);
  CHECK_MSG(settled(s, m, capacity), "after the load the server still holds requests or KV pages");
  serve_server_stop(s);
  max_batch(m);
  hostile(m, capacity);
  queue_and_deadline(m, capacity);
  stop_while_waiting(m);
  connection_limits(m);
  for (int p = 0; p < NPROMPT; p++) free(want[p]);
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: test_serve TESTS_DIR\n");
    return 2;
  }
  rxk_backend vk = {.kind = RX_RT_BACKEND_VULKAN};
  if (!rxk_rt_first_present(&vk, 1)) {
    fprintf(stderr, "SKIP: no Vulkan device: %s\n", vk.why);
    return 77;
  }
  char path[256];
  snprintf(path, sizeof path, "/tmp/rx_test_serve_%d.rxm", (int)getpid());
  if (compile(argv[1], &vk, path)) {
    rx_llm_model_options mo = {.device = "vulkan:0", .capacity = 2048, .max_sequences = MAX_B};
    rx_llm_model *m = NULL;
    if (ok_status(rx_llm_model_load(path, &mo, &m), path)) serve(m);
    rx_llm_model_free(m);
  }
  unlink(path);
  return check_finish("test_serve");
}
#else
int main(void) {
  fprintf(stderr, "SKIP: relaxc was built without libmicrohttpd (no relaxc serve)\n");
  return 77;
}
#endif
