/* relaxc serve's HTTP server (server.h). Threads:
 *   - libmicrohttpd's pool of POOL_THREADS on epoll, for every connection (at most
 *     max_connections, max_connections_per_ip from one address; a connection silent for
 *     idle_timeout_s is closed by libmicrohttpd): read the body, validate and tokenize it (the
 *     tokenizer is immutable, so shared), queue a job (503 when max_queue jobs already wait),
 *     and suspend the connection until the job has news (accepted, text, its end); the
 *     scheduler lists the news (wake) and resumes the connection, and the pool thread sends
 *     what came (a stream's events, or the whole answer). No thread ever waits for tokens;
 *   - the scheduler: submits queued jobs to the batcher, cancels those whose client went away or
 *     whose deadline passed, and runs rx_llm_batcher_step while any is pending; on_token appends
 *     each token's text to its job under the lock. Every model call is on this thread;
 *   - the watchdog, every WATCH_MS: shuts the socket of a connection whose request has not
 *     arrived whole within read_timeout_ms (slow headers or bodies: libmicrohttpd's timeout
 *     only sees silence), marks cancelled the job of a connection whose client closed it (a
 *     suspended connection's socket is not watched by libmicrohttpd), and wakes a stream with
 *     nothing new for KEEPALIVE_S so that it sends a keep-alive comment.
 * A job is shared by the connection, the streaming response and the scheduler (refs); the last
 * one to drop it frees it. Lock order: the server's lock is never held while calling
 * libmicrohttpd's suspend or resume. */
#include "tools/serve/server.h"

#include "base/base.h"
#include "tools/serve/grammars.h"
#include "tools/serve/request.h"

#include <arpa/inet.h>
#include <assert.h>
#include <cjson/cJSON.h>
#include <errno.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <time.h>

#define MAX_BODY    RX_SERVE_MAX_BODY
#define KEEPALIVE_S 5  /* a stream with nothing new for this long sends an SSE comment */
#define WATCH_MS    50 /* the watchdog's period: how late a gone client or a slow request is seen */
#define RETRY_AFTER "1" /* seconds a 503 for a full queue asks the client to wait */
/* libmicrohttpd's threads: they parse, tokenize and write answers (the model runs on the
 * scheduler thread), and never wait for tokens, so a few serve every connection */
#define POOL_THREADS  4u
#define STOP_GRACE_MS 1000 /* how long stopping lets ended requests send their answers */
#define GRAMMAR_CACHE 16   /* compiled response_format schemas kept (grammars.h) */

typedef struct job {
  struct job *next; /* in the server's queue, or the scheduler's active list */
  int refs;
  /* the request (written before it is queued, read-only after) */
  int32_t *prompt;
  size_t count;
  rx_llm_generate_params params;
  bool chat, stream;
  char id[40];
  long created;
  double deadline; /* now_ms() past which it ends with an error; 0: none */
  /* under the server's lock */
  bool accepted, done, cancelled, timed_out;
  struct MHD_Connection *conn; /* the connection waiting for news of it */
  bool suspended;              /* conn is suspended until there is news (wake) */
  struct job *wake_next;       /* in the server's list of connections to resume */
  double last_event;           /* now_ms() of the stream's last event */
  int64_t batch_id;
  char *text; /* generated text so far */
  size_t len, cap;
  size_t completion_tokens;
  const char *finish; /* "stop", "length" or NULL */
  char *error;        /* the request failed: this message */
  int error_status;
  /* the streaming response's own (the connection thread only) */
  size_t sent; /* bytes of text already in events */
  char *out;   /* the events not yet handed to libmicrohttpd */
  size_t out_len, out_pos;
  bool finished_stream;
} job;

/* A connection (MHD's socket context), in the server's list while open; under the lock. */
typedef struct sock {
  struct sock *prev, *next;
  int fd;
  double start; /* now_ms() when the request being read began */
  bool reading; /* its request has not arrived whole yet */
  job *j;       /* the job it waits on (the connection holds the ref), or NULL */
} sock;

struct rx_server {
  rx_llm_model *m;
  rx_llm_batcher *b;
  struct MHD_Daemon *d;
  pthread_t thread, watchdog;
  bool thread_started, watchdog_started;
  pthread_mutex_t lock;
  pthread_cond_t work; /* the scheduler waits for jobs on it */
  pthread_cond_t tick; /* the watchdog sleeps on it, so that stopping wakes it */
  job *queue, *queue_tail;
  job *wake; /* jobs whose suspended connections are to be resumed (resume_woken) */
  bool stopping, watchdog_stop;
  int port;
  char *model_name;
  int64_t max_seq_len, kv_capacity, max_batch;
  rx_server_options o; /* the limits, defaults filled in */
  int64_t inflight;    /* jobs queued or in the batcher, not ended */
  sock *socks;         /* the open connections */
  long next_id;
  rx_server_stats stats;
  serve_grammars *grammars; /* response_format's compiled schemas */
};

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

/* ---- jobs ---- */

static void job_unref(rx_server *s, job *j) {
  pthread_mutex_lock(&s->lock);
  bool last = --j->refs == 0;
  pthread_mutex_unlock(&s->lock);
  if (!last) return;
  rx_llm_free(j->prompt);
  rx_llm_grammar_free(j->params.grammar);
  free(j->text);
  free(j->error);
  free(j->out);
  free(j);
}

/* Under the lock: there is news of j, so its connection, if suspended waiting for it, is to be
 * resumed (by resume_woken, outside the lock: libmicrohttpd takes its own locks). A suspended
 * connection is never closed, so conn stays valid until it is resumed; the ref keeps j. */
static void wake(rx_server *s, job *j) {
  if (!j->suspended) return;
  j->suspended = false;
  j->refs++;
  j->wake_next = s->wake;
  s->wake = j;
}

static void job_unref(rx_server *s, job *j);

/* Resumes the connections that wake listed. */
static void resume_woken(rx_server *s) {
  pthread_mutex_lock(&s->lock);
  job *w = s->wake;
  s->wake = NULL;
  pthread_mutex_unlock(&s->lock);
  while (w) {
    job *j = w;
    w = w->wake_next;
    MHD_resume_connection(j->conn);
    job_unref(s, j);
  }
}

/* Ends j (under the lock) with an error message or a finish reason. */
static void job_finish(rx_server *s, job *j, int status, const char *error, const char *finish) {
  assert(!j->done);
  if (error && !j->error) {
    j->error = base_strdup(error);
    j->error_status = status;
  }
  j->finish = finish;
  j->done = true;
  wake(s, j);
}

/* Ends a job the scheduler took (under the lock), counted in the stats. */
static void job_end(rx_server *s, job *j, int status, const char *error, const char *finish) {
  job_finish(s, j, status, error, finish);
  s->stats.completed++;
  s->inflight--;
}

static void ignore(rx_status st) { rx_status_free(st); }

/* ---- the scheduler thread ---- */

typedef struct token_cb {
  rx_server *s;
  job *j;
} token_cb;

static bool job_on_token(void *user, int32_t id, const char *text, size_t len) {
  (void)id;
  token_cb *cb = user;
  job *j = cb->j;
  pthread_mutex_lock(&cb->s->lock);
  bool go = !j->cancelled;
  if (go && len) {
    if (j->len + len + 1 > j->cap) {
      size_t cap = (j->len + len + 1) * 2;
      char *t = realloc(j->text, cap);
      if (!t)
        go = false;
      else {
        j->text = t;
        j->cap = cap;
      }
    }
    if (go) {
      memcpy(j->text + j->len, text, len);
      j->len += len;
      j->text[j->len] = 0;
    }
  }
  j->completion_tokens++;
  if (len) wake(cb->s, j);
  pthread_mutex_unlock(&cb->s->lock);
  return go;
}

typedef struct active {
  struct active *next;
  job *j;
  token_cb cb;
} active;

/* Submits the queued jobs (taken from the queue under the lock) in their order. */
static void submit_queued(rx_server *s, active **list) {
  pthread_mutex_lock(&s->lock);
  job *q = s->queue;
  s->queue = s->queue_tail = NULL;
  pthread_mutex_unlock(&s->lock);
  while (q) {
    job *j = q;
    q = q->next;
    j->next = NULL;
    pthread_mutex_lock(&s->lock);
    bool gone = j->cancelled;
    if (gone) {
      job_end(s, j, 503, "cancelled", NULL);
      s->stats.cancelled++;
    }
    pthread_mutex_unlock(&s->lock);
    if (gone) {
      job_unref(s, j);
      continue;
    }
    active *a = calloc(1, sizeof *a);
    rx_status st = a ? NULL : base_status_make(RX_ERR_OUT_OF_MEMORY, "out of memory");
    int64_t id = 0;
    if (a) {
      a->j = j;
      a->cb = (token_cb){s, j};
      rx_llm_generate_params p = j->params;
      p.on_token = job_on_token;
      p.user = &a->cb;
      st = rx_llm_batcher_submit(s->b, j->prompt, j->count, &p, &id);
    }
    pthread_mutex_lock(&s->lock);
    if (st) {
      job_end(s, j, 400, rx_status_message(st), NULL);
    } else {
      j->accepted = true;
      j->batch_id = id;
      wake(s, j);
    }
    pthread_mutex_unlock(&s->lock);
    if (st) {
      rx_status_free(st);
      free(a);
      job_unref(s, j);
    } else {
      a->next = *list;
      *list = a;
    }
  }
}

static const char *finish_reason(rx_llm_request_state st) {
  return st == RX_LLM_REQUEST_EOS ? "stop" : "length";
}

/* After a step: ends the jobs whose requests ended, and cancels those whose clients left or whose
 * deadline passed. */
static void reap(rx_server *s, active **list, bool all) {
  double now = now_ms();
  for (active **pa = list; *pa;) {
    active *a = *pa;
    job *j = a->j;
    pthread_mutex_lock(&s->lock);
    if (!j->cancelled && j->deadline && now > j->deadline) j->timed_out = true;
    bool cancel = j->cancelled || j->timed_out || all;
    pthread_mutex_unlock(&s->lock);
    if (cancel) ignore(rx_llm_batcher_cancel(s->b, j->batch_id));
    rx_llm_request_info info;
    rx_status st = rx_llm_batcher_poll(s->b, j->batch_id, &info);
    bool ended = st || info.state >= RX_LLM_REQUEST_EOS;
    if (!ended) {
      pa = &a->next;
      continue;
    }
    pthread_mutex_lock(&s->lock);
    j->completion_tokens = st ? j->completion_tokens : info.count;
    bool stopped = info.state == RX_LLM_REQUEST_CANCELLED || info.state == RX_LLM_REQUEST_STOPPED;
    if (st) {
      job_end(s, j, 500, rx_status_message(st), NULL);
    } else if (info.state == RX_LLM_REQUEST_FAILED) {
      job_end(s, j, 500, info.error, NULL);
    } else if (stopped && j->timed_out && !all) {
      char msg[256];
      snprintf(msg, sizeof msg,
               "the request's deadline of %lld ms passed after %zu generated tokens (relaxc "
               "serve --request-timeout)",
               (long long)s->o.deadline_ms, j->completion_tokens);
      job_end(s, j, 504, msg, NULL);
      s->stats.timed_out++;
    } else if (stopped) {
      job_end(s, j, 503, all ? "the server is stopping" : "cancelled", NULL);
      s->stats.cancelled += !all;
    } else {
      job_end(s, j, 200, NULL, finish_reason(info.state));
    }
    pthread_mutex_unlock(&s->lock);
    rx_status_free(st);
    ignore(rx_llm_batcher_release(s->b, j->batch_id));
    *pa = a->next;
    free(a);
    job_unref(s, j);
  }
}

static void *scheduler(void *arg) {
  rx_server *s = arg;
  active *list = NULL;
  for (;;) {
    pthread_mutex_lock(&s->lock);
    while (!s->stopping && !s->queue && !list) pthread_cond_wait(&s->work, &s->lock);
    bool stop = s->stopping;
    pthread_mutex_unlock(&s->lock);
    if (stop) break;
    submit_queued(s, &list);
    reap(s, &list, false);
    resume_woken(s);
    if (list) {
      size_t n = 0;
      rx_status st = rx_llm_batcher_step(s->b, &n);
      if (st) {
        fprintf(stderr, "relaxc serve: %s\n", rx_status_message(st));
        rx_status_free(st);
      }
      reap(s, &list, false);
      resume_woken(s);
    }
    rx_llm_batcher_stats bs = rx_llm_batcher_get_stats(s->b);
    int64_t kv_free = rx_llm_model_kv_free_tokens(s->m);
    int64_t seqs = rx_llm_model_sequences(s->m);
    pthread_mutex_lock(&s->lock);
    s->stats.pending = bs.waiting + bs.running;
    s->stats.kv_free_tokens = kv_free;
    s->stats.sequences = seqs;
    pthread_mutex_unlock(&s->lock);
  }
  reap(s, &list, true);
  /* jobs queued but never submitted */
  pthread_mutex_lock(&s->lock);
  job *q = s->queue;
  s->queue = s->queue_tail = NULL;
  for (job *j = q; j; j = j->next) job_end(s, j, 503, "the server is stopping", NULL);
  s->stats.pending = 0;
  s->stats.kv_free_tokens = rx_llm_model_kv_free_tokens(s->m);
  s->stats.sequences = rx_llm_model_sequences(s->m);
  pthread_mutex_unlock(&s->lock);
  while (q) {
    job *j = q;
    q = q->next;
    job_unref(s, j);
  }
  resume_woken(s);
  return NULL;
}

/* ---- requests ---- */

typedef struct conn {
  char *body;
  size_t len;
  bool too_large;
  job *j;
} conn;

/* A 4xx/5xx answer: {"error": {"message": ..., "type": ..., "param": ...}}. */
static enum MHD_Result send_error(struct MHD_Connection *c, unsigned status, const char *param,
                                  const char *fmt, ...) RX_PRINTF(4, 5);
/* A JSON answer; retry_after (NULL: none) is a 503's Retry-After header. */
static enum MHD_Result send_answer(struct MHD_Connection *c, unsigned status, cJSON *body,
                                   const char *retry_after) {
  char *text = body ? cJSON_PrintUnformatted(body) : NULL;
  cJSON_Delete(body);
  if (!text) return MHD_NO;
  struct MHD_Response *r =
      MHD_create_response_from_buffer(strlen(text), text, MHD_RESPMEM_MUST_FREE);
  if (!r) {
    free(text);
    return MHD_NO;
  }
  MHD_add_response_header(r, "Content-Type", "application/json");
  if (retry_after) MHD_add_response_header(r, "Retry-After", retry_after);
  enum MHD_Result ret = MHD_queue_response(c, status, r);
  MHD_destroy_response(r);
  return ret;
}

static enum MHD_Result send_json(struct MHD_Connection *c, unsigned status, cJSON *body) {
  return send_answer(c, status, body, NULL);
}

static cJSON *error_object(unsigned status, const char *param, const char *msg) {
  cJSON *root = cJSON_CreateObject(), *e = cJSON_AddObjectToObject(root, "error");
  cJSON_AddStringToObject(e, "message", msg);
  cJSON_AddStringToObject(e, "type", status < 500 ? "invalid_request_error" : "server_error");
  if (param)
    cJSON_AddStringToObject(e, "param", param);
  else
    cJSON_AddNullToObject(e, "param");
  cJSON_AddNullToObject(e, "code");
  return root;
}

static enum MHD_Result send_error(struct MHD_Connection *c, unsigned status, const char *param,
                                  const char *fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return send_json(c, status, error_object(status, param, msg));
}

/* Tokenizes and checks the lengths; a job with one ref for the connection and one for the
 * scheduler, or NULL after sending the error. */
static job *make_job(rx_server *s, struct MHD_Connection *c, rx_serve_request *r, bool chat,
                     enum MHD_Result *ret) {
  const rx_tokenizer *tok = rx_llm_model_tokenizer(s->m);
  int32_t *ids = NULL;
  size_t n = 0;
  rx_status st = rx_tokenizer_encode(tok, r->prompt, r->prompt_len,
                                     r->templated ? 0 : RX_TOKENIZER_ADD_SPECIAL, &ids, &n);
  if (st) {
    *ret = send_error(c, 400, chat ? "messages" : "prompt", "%s", rx_status_message(st));
    rx_status_free(st);
    return NULL;
  }
  int64_t room = s->max_seq_len - (int64_t)n;
  const char *why = NULL;
  if (!n)
    why = "the prompt has no tokens";
  else if (room < 1)
    why = "prompt";
  else if (!r->has_max_tokens) {
    /* completions: 16, as OpenAI's; chat: the rest of the context, as far as the KV cache goes */
    int64_t fit = s->kv_capacity + 1 - (int64_t)n;
    r->max_tokens = chat ? (room < fit ? room : fit) : (room < 16 ? room : 16);
    if (r->max_tokens < 1) why = "kv";
  } else if (r->max_tokens > room)
    why = "max_tokens";
  if (!why && (int64_t)n + r->max_tokens - 1 > s->kv_capacity) why = "kv";
  if (why) {
    const char *param = chat ? "messages" : "prompt";
    if (!strcmp(why, "max_tokens"))
      *ret = send_error(c, 400, "max_tokens",
                        "max_tokens is %lld, but the prompt's %zu tokens leave room for %lld in "
                        "the model's context of %lld",
                        (long long)r->max_tokens, n, (long long)room, (long long)s->max_seq_len);
    else if (!strcmp(why, "prompt"))
      *ret = send_error(c, 400, param,
                        "the prompt has %zu tokens, more than the model's context of %lld "
                        "leaves room for (at least one new token)",
                        n, (long long)s->max_seq_len);
    else if (!strcmp(why, "kv"))
      *ret = send_error(c, 400, "max_tokens",
                        "the prompt's %zu tokens and max_tokens %lld need more than the KV "
                        "cache's %lld tokens",
                        n, (long long)r->max_tokens, (long long)s->kv_capacity);
    else
      *ret = send_error(c, 400, param, "%s", why);
    rx_llm_free(ids);
    return NULL;
  }
  job *j = calloc(1, sizeof *j);
  if (!j) {
    rx_llm_free(ids);
    *ret = send_error(c, 500, NULL, "out of memory");
    return NULL;
  }
  j->refs = 2;
  j->prompt = ids;
  j->count = n;
  j->chat = chat;
  j->stream = r->stream;
  j->params.sampling = r->sp;
  j->params.max_tokens = r->max_tokens;
  if (r->format != RX_SERVE_FORMAT_TEXT) { /* structured output: the schema's grammar */
    bool any = r->format == RX_SERVE_FORMAT_JSON_OBJECT;
    rx_status gs = s->grammars ? serve_grammars_get(s->grammars, any ? NULL : r->schema,
                                                    any ? 0 : r->schema_len, &j->params.grammar)
                               : base_status_make(RX_ERR_OUT_OF_MEMORY, "out of memory");
    if (gs) {
      *ret = send_error(c, 400, "response_format", "%s", rx_status_message(gs));
      rx_status_free(gs);
      rx_llm_free(ids);
      free(j);
      return NULL;
    }
  }
  j->created = (long)time(NULL);
  j->deadline = s->o.deadline_ms > 0 ? now_ms() + (double)s->o.deadline_ms : 0;
  pthread_mutex_lock(&s->lock);
  snprintf(j->id, sizeof j->id, "%s-%ld", chat ? "chatcmpl" : "cmpl", ++s->next_id);
  pthread_mutex_unlock(&s->lock);
  return j;
}

/* Generated text (len bytes, NULs kept) as a cJSON item. */
static cJSON *text_item(const char *text, size_t len) {
  char *lit = serve_json_string(text, len);
  cJSON *item = lit ? cJSON_CreateRaw(lit) : NULL;
  free(lit);
  return item;
}

/* The object of an answer or of a stream's event: choices[0] holds text (len bytes; chat: message
 * or delta) and finish (null while streaming). */
static cJSON *answer(rx_server *s, const job *j, const char *text, size_t len, const char *finish,
                     bool event) {
  cJSON *root = cJSON_CreateObject();
  cJSON_AddStringToObject(root, "id", j->id);
  cJSON_AddStringToObject(root, "object",
                          j->chat ? (event ? "chat.completion.chunk" : "chat.completion")
                                  : "text_completion");
  cJSON_AddNumberToObject(root, "created", (double)j->created);
  cJSON_AddStringToObject(root, "model", s->model_name);
  cJSON *ch = cJSON_AddArrayToObject(root, "choices"), *c0 = cJSON_CreateObject();
  cJSON_AddItemToArray(ch, c0);
  cJSON_AddNumberToObject(c0, "index", 0);
  if (j->chat) {
    cJSON *m = cJSON_AddObjectToObject(c0, event ? "delta" : "message");
    if (!event) cJSON_AddStringToObject(m, "role", "assistant");
    if (text) cJSON_AddItemToObject(m, "content", text_item(text, len));
  } else {
    cJSON_AddItemToObject(c0, "text", text_item(text ? text : "", text ? len : 0));
  }
  if (finish)
    cJSON_AddStringToObject(c0, "finish_reason", finish);
  else
    cJSON_AddNullToObject(c0, "finish_reason");
  if (!event) {
    cJSON *u = cJSON_AddObjectToObject(root, "usage");
    cJSON_AddNumberToObject(u, "prompt_tokens", (double)j->count);
    cJSON_AddNumberToObject(u, "completion_tokens", (double)j->completion_tokens);
    cJSON_AddNumberToObject(u, "total_tokens", (double)(j->count + j->completion_tokens));
  }
  return root;
}

/* Appends "data: JSON\n\n" (or text as it is, json NULL) to the job's pending events. */
static bool push_event(job *j, cJSON *json, const char *raw) {
  char *t = json ? cJSON_PrintUnformatted(json) : NULL;
  cJSON_Delete(json);
  if (json && !t) return false;
  const char *body = t ? t : raw;
  size_t need = strlen(body) + (t ? 8 : 0);
  char *o = malloc(j->out_len - j->out_pos + need + 1);
  if (!o) {
    free(t);
    return false;
  }
  size_t n = j->out_len - j->out_pos;
  memcpy(o, j->out ? j->out + j->out_pos : "", n);
  n += (size_t)sprintf(o + n, t ? "data: %s\n\n" : "%s", body);
  free(j->out);
  free(t);
  j->out = o;
  j->out_len = n;
  j->out_pos = 0;
  return true;
}

typedef struct stream_ctx {
  rx_server *s;
  job *j;
  struct MHD_Connection *c;
} stream_ctx;

/* Whether a connection waiting on j has news: for a stream, new text, or the end. */
static bool stream_news(const job *j) { return j->sent < j->len || j->done; }
/* before a stream's response, its start (or the end); before a whole answer, the end */
static bool start_news(const job *j) { return j->done || (j->stream && j->accepted); }

/* Called in a libmicrohttpd callback of c with nothing to send: suspends c until the scheduler
 * has news of j (wake); if news came meanwhile, resumes it at once (the callback is called
 * again). Only a suspended connection is ever resumed, and only once. */
static void wait_for_news(rx_server *s, struct MHD_Connection *c, job *j,
                          bool (*news)(const job *)) {
  MHD_suspend_connection(c);
  pthread_mutex_lock(&s->lock);
  bool now = news(j);
  if (!now) {
    j->conn = c;
    j->suspended = true;
  }
  pthread_mutex_unlock(&s->lock);
  if (now) MHD_resume_connection(c);
}

/* libmicrohttpd's content reader of a stream: hands out the events; with none ready, suspends
 * the connection until the job has news (or the watchdog asks for a keep-alive). */
static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max) {
  (void)pos;
  stream_ctx *sc = cls;
  job *j = sc->j;
  rx_server *s = sc->s;
  if (j->out_pos == j->out_len && j->finished_stream) return MHD_CONTENT_READER_END_OF_STREAM;
  if (j->out_pos == j->out_len) {
    pthread_mutex_lock(&s->lock);
    bool ok = true;
    double now = now_ms();
    if (j->sent < j->len) {
      ok = push_event(j, answer(s, j, j->text + j->sent, j->len - j->sent, NULL, true), NULL);
      j->sent = j->len;
    } else if (j->done) {
      if (j->error) {
        cJSON *e = cJSON_CreateObject(), *eo = cJSON_AddObjectToObject(e, "error");
        cJSON_AddStringToObject(eo, "message", j->error);
        cJSON_AddStringToObject(eo, "type", "server_error");
        ok = push_event(j, e, NULL);
      } else {
        ok = push_event(j, answer(s, j, NULL, 0, j->finish, true), NULL);
      }
      ok = ok && push_event(j, NULL, "data: [DONE]\n\n");
      j->finished_stream = true;
    } else if (now - j->last_event >= KEEPALIVE_S * 1e3) {
      ok = push_event(j, NULL, ": keep-alive\n\n");
    }
    if (j->out_pos < j->out_len) j->last_event = now;
    pthread_mutex_unlock(&s->lock);
    if (!ok) return MHD_CONTENT_READER_END_WITH_ERROR;
    if (j->out_pos == j->out_len) {
      wait_for_news(s, sc->c, j, stream_news);
      return 0;
    }
  }
  size_t n = j->out_len - j->out_pos;
  if (n > max) n = max;
  memcpy(buf, j->out + j->out_pos, n);
  j->out_pos += n;
  return (ssize_t)n;
}

static void stream_free(void *cls) {
  stream_ctx *sc = cls;
  job_unref(sc->s, sc->j);
  free(sc);
}

/* The connection's socket context (MHD_OPTION_NOTIFY_CONNECTION's). */
static sock *sock_of(struct MHD_Connection *c) {
  const union MHD_ConnectionInfo *ci =
      MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
  return ci ? ci->socket_context : NULL;
}

/* Queues j for the scheduler; false (j not queued, and the scheduler's ref dropped) when the
 * queue is full. */
static bool enqueue(rx_server *s, struct MHD_Connection *c, job *j) {
  pthread_mutex_lock(&s->lock);
  bool full = !s->stopping && s->inflight >= s->max_batch + s->o.max_queue;
  if (s->stopping || full) {
    job_finish(s, j, 503, full ? "the queue is full" : "the server is stopping", NULL);
    j->refs--; /* the scheduler's, never taken */
    s->stats.refused_busy += full;
  } else {
    if (s->queue_tail)
      s->queue_tail->next = j;
    else
      s->queue = j;
    s->queue_tail = j;
    s->inflight++;
    sock *k = sock_of(c);
    if (k) k->j = j; /* the watchdog now watches for the client leaving */
    pthread_cond_signal(&s->work);
  }
  pthread_mutex_unlock(&s->lock);
  return !full;
}

/* The answer to a queued job: a stream's response once the batcher took it, a whole answer once
 * it ended, an error; until then the connection is suspended (the handler is called again when
 * it is resumed). */
static enum MHD_Result respond(rx_server *s, struct MHD_Connection *c, job *j) {
  pthread_mutex_lock(&s->lock);
  bool ready = start_news(j), failed = j->done && j->error;
  pthread_mutex_unlock(&s->lock);
  if (!ready) {
    wait_for_news(s, c, j, start_news);
    return MHD_YES;
  }
  if (failed) return send_error(c, (unsigned)j->error_status, NULL, "%s", j->error);
  if (j->stream) {
    stream_ctx *sc = malloc(sizeof *sc);
    if (!sc) return send_error(c, 500, NULL, "out of memory");
    pthread_mutex_lock(&s->lock);
    j->refs++;
    j->last_event = now_ms();
    pthread_mutex_unlock(&s->lock);
    *sc = (stream_ctx){s, j, c};
    struct MHD_Response *r =
        MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096, stream_read, sc, stream_free);
    if (!r) {
      stream_free(sc);
      return MHD_NO;
    }
    MHD_add_response_header(r, "Content-Type", "text/event-stream");
    MHD_add_response_header(r, "Cache-Control", "no-cache");
    enum MHD_Result ret = MHD_queue_response(c, 200, r);
    MHD_destroy_response(r);
    return ret;
  }
  return send_json(c, 200, answer(s, j, j->text ? j->text : "", j->len, j->finish, false));
}

static enum MHD_Result handle_post(rx_server *s, struct MHD_Connection *c, conn *cn, bool chat) {
  if (cn->too_large) return send_error(c, 413, NULL, "the body is over %d bytes", MAX_BODY);
  rx_serve_request r;
  rx_serve_error e;
  if (!serve_parse(cn->body, cn->len, chat, s->model_name, rx_llm_model_chat_template(s->m), &r,
                   &e))
    return send_error(c, e.status, e.param, "%s", e.msg);
  enum MHD_Result ret = MHD_NO;
  cn->j = make_job(s, c, &r, chat, &ret);
  serve_request_free(&r);
  if (!cn->j) return ret;
  if (enqueue(s, c, cn->j)) return respond(s, c, cn->j);
  char msg[256];
  snprintf(msg, sizeof msg,
           "the server is busy: %lld requests run and %lld wait (relaxc serve --max-queue); "
           "retry after %s s",
           (long long)s->max_batch, (long long)s->o.max_queue, RETRY_AFTER);
  return send_answer(c, 503, error_object(503, NULL, msg), RETRY_AFTER);
}

static enum MHD_Result handle_models(rx_server *s, struct MHD_Connection *c) {
  cJSON *root = cJSON_CreateObject(), *data = cJSON_CreateObject();
  cJSON_AddStringToObject(root, "object", "list");
  cJSON_AddItemToArray(cJSON_AddArrayToObject(root, "data"), data);
  cJSON_AddStringToObject(data, "id", s->model_name);
  cJSON_AddStringToObject(data, "object", "model");
  cJSON_AddStringToObject(data, "owned_by", "relaxc");
  cJSON_AddNumberToObject(data, "max_seq_len", (double)s->max_seq_len);
  return send_json(c, 200, root);
}

static enum MHD_Result access_handler(void *cls, struct MHD_Connection *c, const char *url,
                                      const char *method, const char *version, const char *upload,
                                      size_t *upload_size, void **con_cls) {
  (void)version;
  rx_server *s = cls;
  conn *cn = *con_cls;
  if (!cn) {
    if (!(cn = calloc(1, sizeof *cn))) return MHD_NO;
    *con_cls = cn;
    return MHD_YES;
  }
  if (*upload_size) {
    if (cn->len + *upload_size > MAX_BODY)
      cn->too_large = true;
    else {
      char *b = realloc(cn->body, cn->len + *upload_size + 1);
      if (!b) return MHD_NO;
      memcpy(b + cn->len, upload, *upload_size);
      cn->body = b;
      cn->len += *upload_size;
    }
    *upload_size = 0;
    return MHD_YES;
  }
  /* the request arrived whole: the read timeout no longer applies */
  pthread_mutex_lock(&s->lock);
  sock *k = sock_of(c);
  if (k) k->reading = false;
  pthread_mutex_unlock(&s->lock);
  if (cn->j) return respond(s, c, cn->j); /* resumed: the job has news */
  rx_serve_error e;
  switch (serve_route_of(method, url, &e)) {
  case RX_SERVE_REFUSED:
    return send_error(c, e.status, e.param, "%s", e.msg);
  case RX_SERVE_HEALTH:
    return send_json(c, 200, cJSON_CreateObject());
  case RX_SERVE_MODELS:
    return handle_models(s, c);
  case RX_SERVE_COMPLETION:
    return handle_post(s, c, cn, false);
  case RX_SERVE_CHAT:
    return handle_post(s, c, cn, true);
  }
  return MHD_NO;
}

/* The request ended (answered, or the client left): a job not done is cancelled; the connection
 * may read its next request from now on. */
static void completed(void *cls, struct MHD_Connection *c, void **con_cls,
                      enum MHD_RequestTerminationCode why) {
  (void)why;
  rx_server *s = cls;
  conn *cn = *con_cls;
  pthread_mutex_lock(&s->lock);
  sock *k = sock_of(c);
  if (k) {
    k->j = NULL;
    k->reading = true;
    k->start = now_ms();
  }
  pthread_mutex_unlock(&s->lock);
  if (!cn) return;
  if (cn->j) {
    pthread_mutex_lock(&s->lock);
    if (!cn->j->done) cn->j->cancelled = true;
    pthread_cond_signal(&s->work);
    pthread_mutex_unlock(&s->lock);
    job_unref(s, cn->j);
  }
  free(cn->body);
  free(cn);
  *con_cls = NULL;
}

/* A connection opened or closed: its sock joins or leaves the server's list. MHD calls CLOSED
 * before it closes the socket, so the watchdog never shuts a reused descriptor. */
static void connection_event(void *cls, struct MHD_Connection *c, void **socket_context,
                             enum MHD_ConnectionNotificationCode code) {
  rx_server *s = cls;
  if (code == MHD_CONNECTION_NOTIFY_STARTED) {
    sock *k = calloc(1, sizeof *k);
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (!k || !ci) {
      free(k);
      return;
    }
    k->fd = ci->connect_fd;
    k->start = now_ms();
    k->reading = true;
    pthread_mutex_lock(&s->lock);
    k->next = s->socks;
    if (s->socks) s->socks->prev = k;
    s->socks = k;
    s->stats.connections++;
    pthread_mutex_unlock(&s->lock);
    *socket_context = k;
  } else if (*socket_context) {
    sock *k = *socket_context;
    pthread_mutex_lock(&s->lock);
    if (k->prev)
      k->prev->next = k->next;
    else
      s->socks = k->next;
    if (k->next) k->next->prev = k->prev;
    s->stats.connections--;
    pthread_mutex_unlock(&s->lock);
    free(k);
    *socket_context = NULL;
  }
}

/* Whether the client of a connection waiting for its answer has closed it (or reset it). */
static bool client_gone(int fd) {
  char b;
  ssize_t n = recv(fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
  return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

static void *watchdog(void *arg) {
  rx_server *s = arg;
  pthread_mutex_lock(&s->lock);
  while (!s->watchdog_stop) {
    double now = now_ms();
    for (sock *k = s->socks; k; k = k->next) {
      if (k->reading && now - k->start > (double)s->o.read_timeout_ms) {
        shutdown(k->fd, SHUT_RDWR); /* MHD's thread sees the end and closes the connection */
        k->reading = false;
      } else if (k->j && !k->j->done && !k->j->cancelled && client_gone(k->fd)) {
        k->j->cancelled = true;
        pthread_cond_signal(&s->work);
      } else if (k->j && k->j->stream && k->j->accepted &&
                 now - k->j->last_event >= KEEPALIVE_S * 1e3) {
        wake(s, k->j); /* a stream with nothing new for a while sends a keep-alive comment */
      }
    }
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_nsec += WATCH_MS * 1000000L;
    until.tv_sec += until.tv_nsec / 1000000000L;
    until.tv_nsec %= 1000000000L;
    pthread_mutex_unlock(&s->lock);
    resume_woken(s);
    pthread_mutex_lock(&s->lock);
    if (!s->watchdog_stop) pthread_cond_timedwait(&s->tick, &s->lock, &until);
  }
  pthread_mutex_unlock(&s->lock);
  return NULL;
}

/* ---- the server ---- */

/* The options with their defaults filled in; an error names a value out of range. */
static rx_status fill_options(const rx_server_options *in, rx_llm_model *m, rx_server_options *o) {
  *o = in ? *in : (rx_server_options){0};
  int64_t cap = rx_llm_model_max_batch(m), seqs = rx_llm_model_max_sequences(m);
  if (o->max_batch > cap || o->max_batch > seqs || o->max_batch < 0)
    return base_status_make(RX_ERR_INVALID,
                            "--max-batch %lld: the artifact runs at most %lld sequences per decode "
                            "(compiled with max_batch %lld) and the KV cache holds %lld sequences",
                            (long long)o->max_batch, (long long)(cap < seqs ? cap : seqs),
                            (long long)cap, (long long)seqs);
  if (!o->max_batch) o->max_batch = cap < seqs ? cap : seqs;
  if (o->idle_timeout_s < 0 || o->read_timeout_ms < 0 || o->max_connections < 0 ||
      o->max_connections_per_ip < 0 || o->max_queue < 0)
    return base_status_make(RX_ERR_INVALID, "relaxc serve: a timeout or limit is negative");
  if (!o->idle_timeout_s) o->idle_timeout_s = RX_SERVE_IDLE_TIMEOUT_S;
  if (!o->read_timeout_ms) o->read_timeout_ms = RX_SERVE_READ_TIMEOUT_MS;
  if (!o->deadline_ms) o->deadline_ms = RX_SERVE_DEADLINE_MS;
  if (!o->max_connections) o->max_connections = RX_SERVE_MAX_CONNECTIONS;
  if (!o->max_connections_per_ip) o->max_connections_per_ip = RX_SERVE_MAX_PER_IP;
  if (!o->max_queue) o->max_queue = RX_SERVE_MAX_QUEUE;
  return NULL;
}

rx_status serve_server_start(rx_llm_model *m, const rx_server_options *o, rx_server **out_server) {
  *out_server = NULL;
  rx_server_options opt;
  rx_status st = fill_options(o, m, &opt);
  if (st) return st;
  const char *host = opt.host ? opt.host : "127.0.0.1";
  struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons((uint16_t)opt.port)};
  if (inet_pton(AF_INET, host, &addr.sin_addr) != 1)
    return base_status_make(RX_ERR_INVALID, "--host %s: not an IPv4 address", host);
  if (!rx_llm_model_tokenizer(m))
    return base_status_make(RX_ERR_INVALID, "the model has no tokenizer (no tokenizer.json)");
  rx_server *s = calloc(1, sizeof *s);
  if (!s) return base_status_make(RX_ERR_OUT_OF_MEMORY, "out of memory");
  s->o = opt;
  s->max_batch = opt.max_batch;
  s->m = m;
  s->model_name = base_strdup(opt.model_name ? opt.model_name : "relaxc");
  s->max_seq_len = rx_llm_model_max_seq_len(m);
  s->kv_capacity = rx_llm_model_kv_capacity(m);
  s->stats.kv_free_tokens = rx_llm_model_kv_free_tokens(m);
  pthread_mutex_init(&s->lock, NULL);
  pthread_cond_init(&s->work, NULL);
  pthread_cond_init(&s->tick, NULL);
  s->grammars = serve_grammars_new(rx_llm_model_tokenizer(m), GRAMMAR_CACHE);
  rx_llm_batcher_options bo = {.max_batch = opt.max_batch};
  st = rx_llm_batcher_create(m, &bo, &s->b);
  if (!st && pthread_create(&s->thread, NULL, scheduler, s))
    st = base_status_make(RX_ERR_INTERNAL, "cannot start the scheduler thread");
  s->thread_started = !st;
  if (!st && pthread_create(&s->watchdog, NULL, watchdog, s))
    st = base_status_make(RX_ERR_INTERNAL, "cannot start the watchdog thread");
  s->watchdog_started = !st;
  if (!st) {
    /* a pool of threads on epoll: a connection waiting for tokens is suspended, so idle or
     * waiting connections hold no thread; libmicrohttpd splits max_connections over the pool */
    unsigned pool =
        (unsigned)opt.max_connections < POOL_THREADS ? (unsigned)opt.max_connections : POOL_THREADS;
    s->d = MHD_start_daemon(
        MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME, 0, NULL, NULL,
        access_handler, s, MHD_OPTION_THREAD_POOL_SIZE, pool, MHD_OPTION_SOCK_ADDR, &addr,
        MHD_OPTION_NOTIFY_COMPLETED, completed, s, MHD_OPTION_NOTIFY_CONNECTION, connection_event,
        s, MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)opt.idle_timeout_s, MHD_OPTION_CONNECTION_LIMIT,
        (unsigned)opt.max_connections, MHD_OPTION_PER_IP_CONNECTION_LIMIT,
        (unsigned)opt.max_connections_per_ip, MHD_OPTION_END);
    if (!s->d)
      st = base_status_make(RX_ERR_IO, "cannot listen on %s:%d (in use, or not this machine's)",
                            host, opt.port);
  }
  if (st) {
    serve_server_stop(s);
    return st;
  }
  const union MHD_DaemonInfo *info = MHD_get_daemon_info(s->d, MHD_DAEMON_INFO_BIND_PORT);
  s->port = info ? info->port : 0;
  *out_server = s;
  return NULL;
}

int serve_server_port(const rx_server *s) { return s->port; }
int64_t serve_server_max_batch(const rx_server *s) { return s->max_batch; }

rx_server_stats serve_server_get_stats(rx_server *s) {
  pthread_mutex_lock(&s->lock);
  rx_server_stats st = s->stats;
  pthread_mutex_unlock(&s->lock);
  return st;
}

/* Sets *flag under the lock, wakes the thread waiting on c and joins it. */
static void end_thread(rx_server *s, bool *flag, pthread_cond_t *c, pthread_t t) {
  pthread_mutex_lock(&s->lock);
  *flag = true;
  pthread_cond_signal(c);
  pthread_mutex_unlock(&s->lock);
  pthread_join(t, NULL);
}

void serve_server_stop(rx_server *s) {
  if (!s) return;
  if (s->thread_started) end_thread(s, &s->stopping, &s->work, s->thread);
  /* the jobs have ended ("the server is stopping"): their connections, resumed, may send that
   * before the daemon closes them */
  for (int i = 0; s->d && i < STOP_GRACE_MS / 10; i++) {
    pthread_mutex_lock(&s->lock);
    bool waiting = false;
    for (sock *k = s->socks; k && !waiting; k = k->next) waiting = k->j != NULL;
    pthread_mutex_unlock(&s->lock);
    if (!waiting) break;
    nanosleep(&(struct timespec){0, 10000000}, NULL);
  }
  if (s->d) MHD_stop_daemon(s->d);
  if (s->watchdog_started) end_thread(s, &s->watchdog_stop, &s->tick, s->watchdog);
  rx_llm_batcher_free(s->b);
  serve_grammars_free(s->grammars);
  pthread_cond_destroy(&s->tick);
  pthread_cond_destroy(&s->work);
  pthread_mutex_destroy(&s->lock);
  free(s->model_name);
  free(s);
}
