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
#include "tools/serve/answer.h"
#include "tools/serve/grammars.h"
#include "tools/serve/ops.h"
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
#include <unistd.h>

#define MAX_BODY    RX_SERVE_MAX_BODY
#define KEEPALIVE_S 5  /* a stream with nothing new for this long sends an SSE comment */
#define WATCH_MS    50 /* the watchdog's period: how late a gone client or a slow request is seen */
#define RETRY_AFTER "1" /* seconds a 503 for a full queue asks the client to wait */
/* libmicrohttpd's threads: they parse, tokenize and write answers (the model runs on the
 * scheduler thread), and never wait for tokens, so a few serve every connection */
#define POOL_THREADS     4u
#define STOP_GRACE_MS    1000 /* how long stopping lets ended requests send their answers */
#define RX_SERVE_KV_PAGE 16   /* tokens per KV page (runtime/llm/kv_cache.h's RX_KV_PAGE) */
#define GRAMMAR_CACHE    16   /* compiled response_format schemas kept (grammars.h) */

typedef struct job {
  struct job *next; /* in the server's queue, or the scheduler's active list */
  int refs;
  /* the request (written before it is queued, read-only after) */
  int32_t **pids; /* per prompt: its ids (pcount[i]) */
  size_t *pcount, nprompts;
  size_t count;                  /* the prompts' tokens, all together */
  rx_llm_generate_params params; /* the stop strings and logit_bias point into stop and bias */
  char *stop[RX_LLM_MAX_STOP];
  rx_logit_bias *bias;
  int64_t n; /* choices per prompt: choice k is prompt k / n, with seed + k % n */
  bool chat, stream, logprobs, include_usage;
  char id[40];
  long created;
  double deadline; /* now_ms() past which it ends with an error; 0: none */
  double arrive;   /* now_ms() when it arrived (metrics, the request log) */
  /* the scheduler's (on_token): when its first and latest tokens came, 0 before */
  double first_token, last_token;
  /* under the server's lock */
  bool accepted, done, cancelled, timed_out;
  struct MHD_Connection *conn; /* the connection waiting for news of it */
  bool suspended;              /* conn is suspended until there is news (wake) */
  struct job *wake_next;       /* in the server's list of connections to resume */
  double last_event;           /* now_ms() of the stream's last event */
  serve_choice *ch;            /* nch choices (answer.h) */
  size_t completion_tokens;    /* the choices' tokens, all together */
  size_t nch, remaining;       /* remaining: submitted and not ended */
  bool failing, stopped_any;   /* a choice failed (the others are cancelled); one was stopped */
  const char *finish;          /* "stop" once done normally (each choice has its own), or NULL */
  char *error;                 /* the request failed: this message */
  int error_status;
  /* the streaming response's own (the connection thread only) */
  char *out; /* the events not yet handed to libmicrohttpd */
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
  rx_llm_batcher_stats bstats; /* the batcher's, after the scheduler's last step */
  bool draining;               /* serve_server_quiesce: new requests get 503 */
  int listen_fd;               /* the listening socket, once quiesced (closed at the stop); -1 */
  serve_metrics metrics;
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
  for (size_t i = 0; i < j->nprompts; i++) rx_llm_free(j->pids[i]);
  free(j->pids);
  free(j->pcount);
  for (size_t i = 0; i < RX_LLM_MAX_STOP; i++) free(j->stop[i]);
  free(j->bias);
  for (size_t i = 0; i < j->nch; i++) serve_choice_free(&j->ch[i]);
  free(j->ch);
  rx_llm_grammar_free(j->params.grammar);
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
  serve_metrics_tokens(&s->metrics, j->accepted ? (int64_t)j->count : 0,
                       (int64_t)j->completion_tokens);
  serve_metrics_e2e(&s->metrics, (now_ms() - j->arrive) / 1e3);
}

static void ignore(rx_status st) { rx_status_free(st); }

/* ---- the scheduler thread ---- */

typedef struct token_cb {
  rx_server *s;
  job *j;
  size_t k; /* the choice */
} token_cb;

static bool job_on_token(void *user, int32_t id, const char *text, size_t len) {
  (void)id;
  token_cb *cb = user;
  job *j = cb->j;
  double now = now_ms();
  pthread_mutex_lock(&cb->s->lock);
  if (id >= 0) {
    if (j->first_token == 0) {
      j->first_token = now;
      serve_metrics_ttft(&cb->s->metrics, (now - j->arrive) / 1e3);
    } else {
      serve_metrics_itl(&cb->s->metrics, (now - j->last_token) / 1e3);
    }
    j->last_token = now;
  }
  bool go = !j->cancelled && !j->failing;
  if (go && len) go = serve_choice_append(&j->ch[cb->k], text, len);
  j->ch[cb->k].completion_tokens += id >= 0;
  j->completion_tokens += id >= 0;
  if (len) wake(cb->s, j);
  pthread_mutex_unlock(&cb->s->lock);
  return go;
}

/* logprobs: each token's, kept for the answer (an end-of-sequence token is not text, and OpenAI
 * lists none) */
static void job_on_info(void *user, const rx_token_logprobs *lp) {
  token_cb *cb = user;
  if (rx_llm_model_is_eos(cb->s->m, lp->id)) return;
  pthread_mutex_lock(&cb->s->lock);
  if (!serve_choice_token(&cb->j->ch[cb->k], rx_llm_model_tokenizer(cb->s->m), lp))
    cb->j->failing = true;
  pthread_mutex_unlock(&cb->s->lock);
}

typedef struct active {
  struct active *next;
  job *j;
  token_cb cb;
} active;

/* Submits j's choices to the batcher, each an active on *list; a choice the batcher refuses
 * ends j with that error (400) once the others submitted have ended. */
static void submit_job(rx_server *s, job *j, active **list) {
  rx_status st = NULL;
  for (size_t k = 0; k < j->nch && !st; k++) {
    active *a = calloc(1, sizeof *a);
    if (!a) {
      st = base_status_make(RX_ERR_OUT_OF_MEMORY, "out of memory");
      break;
    }
    a->j = j;
    a->cb = (token_cb){s, j, k};
    rx_llm_generate_params p = j->params;
    p.on_token = job_on_token;
    p.on_token_info = j->logprobs ? job_on_info : NULL;
    p.user = &a->cb;
    p.sampling.seed += (uint64_t)((int64_t)k % j->n);
    size_t pi = j->ch[k].prompt;
    int64_t id = 0;
    st = rx_llm_batcher_submit(s->b, j->pids[pi], j->pcount[pi], &p, &id);
    if (st) {
      free(a);
      break;
    }
    pthread_mutex_lock(&s->lock);
    j->ch[k].batch_id = id;
    j->remaining++;
    pthread_mutex_unlock(&s->lock);
    a->next = *list;
    *list = a;
  }
  pthread_mutex_lock(&s->lock);
  if (st && !j->error) {
    j->error = base_strdup(rx_status_message(st));
    j->error_status = 400;
  }
  j->failing = st != NULL;
  bool none = !j->remaining;
  if (none)
    job_end(s, j, 400, j->error, NULL);
  else {
    j->accepted = true;
    wake(s, j);
  }
  pthread_mutex_unlock(&s->lock);
  rx_status_free(st);
  if (none) job_unref(s, j);
}

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
    if (gone)
      job_unref(s, j);
    else
      submit_job(s, j, list);
  }
}

static const char *finish_reason(rx_llm_request_state st) {
  return st == RX_LLM_REQUEST_EOS || st == RX_LLM_REQUEST_STOP_STRING ? "stop" : "length";
}

/* Under the lock: the last choice of j ended; j ends as its choices did (the first error, a
 * deadline, a cancel, or normally). */
static void end_job(rx_server *s, job *j, bool all) {
  size_t made = j->completion_tokens;
  if (j->error) {
    job_end(s, j, j->error_status, j->error, NULL);
  } else if (j->stopped_any && j->timed_out && !all) {
    char msg[256];
    snprintf(msg, sizeof msg,
             "the request's deadline of %lld ms passed after %zu generated tokens (relaxc "
             "serve --request-timeout)",
             (long long)s->o.deadline_ms, made);
    job_end(s, j, 504, msg, NULL);
    s->stats.timed_out++;
  } else if (j->stopped_any) {
    job_end(s, j, 503, all ? "the server is stopping" : "cancelled", NULL);
    s->stats.cancelled += !all;
  } else {
    job_end(s, j, 200, NULL, "stop");
  }
}

/* After a step: ends the choices whose requests ended (and their jobs, with the last), and
 * cancels those whose clients left, whose deadline passed or whose sibling failed. */
static void reap(rx_server *s, active **list, bool all) {
  double now = now_ms();
  for (active **pa = list; *pa;) {
    active *a = *pa;
    job *j = a->j;
    serve_choice *c = &j->ch[a->cb.k];
    pthread_mutex_lock(&s->lock);
    if (!j->cancelled && j->deadline && now > j->deadline) j->timed_out = true;
    bool cancel = j->cancelled || j->timed_out || j->failing || all;
    pthread_mutex_unlock(&s->lock);
    if (cancel) ignore(rx_llm_batcher_cancel(s->b, c->batch_id));
    rx_llm_request_info info;
    rx_status st = rx_llm_batcher_poll(s->b, c->batch_id, &info);
    bool ended = st || info.state >= RX_LLM_REQUEST_EOS;
    if (!ended) {
      pa = &a->next;
      continue;
    }
    pthread_mutex_lock(&s->lock);
    size_t made = st ? c->completion_tokens : info.count;
    j->completion_tokens += made - c->completion_tokens;
    c->completion_tokens = made;
    c->ended = true;
    c->cached_tokens = st ? 0 : info.cached_tokens;
    const char *err = st                                    ? rx_status_message(st)
                      : info.state == RX_LLM_REQUEST_FAILED ? info.error
                                                            : NULL;
    if (err) {
      if (!j->error) {
        j->error = base_strdup(err);
        j->error_status = 500;
      }
      j->failing = true;
    } else if (info.state == RX_LLM_REQUEST_CANCELLED || info.state == RX_LLM_REQUEST_STOPPED) {
      j->stopped_any = true;
    } else {
      c->finish = finish_reason(info.state);
    }
    wake(s, j);
    bool last = --j->remaining == 0;
    if (last) end_job(s, j, all);
    pthread_mutex_unlock(&s->lock);
    rx_status_free(st);
    ignore(rx_llm_batcher_release(s->b, c->batch_id));
    *pa = a->next;
    free(a);
    if (last) job_unref(s, j);
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
    s->bstats = bs;
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
  /* for the metrics and the request log */
  serve_endpoint ep;
  char method[8];
  double start; /* now_ms() when its headers came */
  bool counted; /* its answer is counted in the metrics (when queued, so that a client that reads
                 * /metrics right after an answer sees it counted) */
} conn;

/* A 4xx/5xx answer: {"error": {"message": ..., "type": ..., "param": ...}}. */
static enum MHD_Result send_error(struct MHD_Connection *c, unsigned status, const char *param,
                                  const char *fmt, ...) RX_PRINTF(4, 5);
/* A JSON answer with one more header (header NULL: none), e.g. a 503's Retry-After or a 401's
 * WWW-Authenticate. */
static enum MHD_Result send_answer(struct MHD_Connection *c, unsigned status, cJSON *body,
                                   const char *header, const char *value) {
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
  if (header) MHD_add_response_header(r, header, value);
  enum MHD_Result ret = MHD_queue_response(c, status, r);
  MHD_destroy_response(r);
  return ret;
}

static enum MHD_Result send_json(struct MHD_Connection *c, unsigned status, cJSON *body) {
  return send_answer(c, status, body, NULL, NULL);
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

/* Why a prompt of n tokens cannot run with r's max_tokens (which it may set, when absent, to the
 * default: 16 for completions as OpenAI's, for chat the rest of the context as far as the KV cache
 * goes), into *ret after sending the error; false then. */
static bool check_lengths(rx_server *s, struct MHD_Connection *c, rx_serve_request *r, bool chat,
                          size_t n, int64_t *max_tokens, enum MHD_Result *ret) {
  int64_t room = s->max_seq_len - (int64_t)n;
  const char *param = chat ? "messages" : "prompt", *mt = r->has_max_tokens ? "max_tokens" : NULL;
  if (!n) {
    *ret = send_error(c, 400, param, "the prompt has no tokens");
    return false;
  }
  if (room < 1) {
    *ret = send_error(c, 400, param,
                      "the prompt has %zu tokens, more than the model's context of %lld leaves "
                      "room for (at least one new token)",
                      n, (long long)s->max_seq_len);
    return false;
  }
  int64_t want = r->max_tokens;
  if (!r->has_max_tokens) {
    int64_t fit = s->kv_capacity + 1 - (int64_t)n;
    want = chat ? (room < fit ? room : fit) : (room < 16 ? room : 16);
  } else if (want > room) {
    *ret = send_error(c, 400, "max_tokens",
                      "max_tokens is %lld, but the prompt's %zu tokens leave room for %lld in the "
                      "model's context of %lld",
                      (long long)want, n, (long long)room, (long long)s->max_seq_len);
    return false;
  }
  if (want < 1 || (int64_t)n + want - 1 > s->kv_capacity) {
    *ret = send_error(c, 400, mt ? mt : "max_tokens",
                      "the prompt's %zu tokens and max_tokens %lld need more than the KV cache's "
                      "%lld tokens",
                      n, (long long)want, (long long)s->kv_capacity);
    return false;
  }
  if (!*max_tokens || want < *max_tokens) *max_tokens = want;
  return true;
}

/* Tokenizes prompt i of r (or the chat's prompt) into j, checking its ids and lengths; false after
 * sending the error. */
static bool take_prompt(rx_server *s, struct MHD_Connection *c, rx_serve_request *r, bool chat,
                        job *j, size_t i, int64_t *max_tokens, enum MHD_Result *ret) {
  const rx_tokenizer *tok = rx_llm_model_tokenizer(s->m);
  const rx_serve_prompt *p = r->nprompts ? &r->prompts[i] : NULL;
  int32_t *ids = NULL;
  size_t n = 0;
  if (p && p->ids) {
    int32_t vocab = rx_llm_model_vocab_size(s->m);
    for (size_t k = 0; k < p->nids; k++)
      if (p->ids[k] >= vocab) {
        *ret = send_error(c, 400, "prompt",
                          "prompt %zu: token id %d is outside the vocabulary (0..%d)", i,
                          (int)p->ids[k], (int)vocab - 1);
        return false;
      }
    ids = malloc(p->nids * sizeof *ids);
    if (ids) memcpy(ids, p->ids, p->nids * sizeof *ids);
    n = p->nids;
  } else {
    rx_status st = rx_tokenizer_encode(tok, p ? p->text : r->prompt, p ? p->len : r->prompt_len,
                                       r->templated ? 0 : RX_TOKENIZER_ADD_SPECIAL, &ids, &n);
    if (st) {
      *ret = send_error(c, 400, chat ? "messages" : "prompt", "%s", rx_status_message(st));
      rx_status_free(st);
      return false;
    }
  }
  if (!ids) {
    *ret = send_error(c, 500, NULL, "out of memory");
    return false;
  }
  j->pids[i] = ids;
  j->pcount[i] = n;
  j->count += n;
  return check_lengths(s, c, r, chat, n, max_tokens, ret);
}

/* The choices of j: n per prompt, each starting with its prompt's text when r echoes. */
static bool make_choices(rx_server *s, rx_serve_request *r, job *j) {
  j->nch = j->nprompts * (size_t)j->n;
  j->ch = calloc(j->nch, sizeof *j->ch);
  if (!j->ch) return false;
  for (size_t k = 0; k < j->nch; k++) {
    serve_choice *c = &j->ch[k];
    c->prompt = k / (size_t)j->n;
    if (!r->echo) continue;
    const rx_serve_prompt *p = &r->prompts[c->prompt];
    char *t = NULL;
    size_t len = 0;
    if (p->ids) {
      rx_status st = rx_tokenizer_decode(rx_llm_model_tokenizer(s->m), p->ids, p->nids,
                                         RX_TOKENIZER_SKIP_SPECIAL, &t, &len);
      rx_status_free(st);
      if (st) return false;
    }
    bool ok = serve_choice_append(c, p->ids ? t : p->text, p->ids ? len : p->len);
    rx_llm_free(t);
    if (!ok) return false;
    c->tok_offset = c->len;
  }
  return true;
}

/* The request's generation parameters in j (stop strings and logit_bias copied into it); false
 * after sending the error. */
static bool take_params(rx_server *s, struct MHD_Connection *c, rx_serve_request *r, job *j,
                        bool chat, enum MHD_Result *ret) {
  int32_t vocab = rx_llm_model_vocab_size(s->m);
  for (size_t i = 0; i < r->nbias; i++)
    if (r->logit_bias[i].id >= vocab) {
      *ret = send_error(c, 400, "logit_bias",
                        "'logit_bias' names token %d, outside the vocabulary (0..%d)",
                        (int)r->logit_bias[i].id, (int)vocab - 1);
      return false;
    }
  j->params.sampling = r->sp;
  if (r->nbias) {
    j->bias = malloc(r->nbias * sizeof *j->bias);
    if (!j->bias) return false;
    memcpy(j->bias, r->logit_bias, r->nbias * sizeof *j->bias);
  }
  j->params.sampling.biases = j->bias;
  for (size_t i = 0; i < r->nstop; i++)
    if (!(j->stop[i] = base_strdup(r->stop[i]))) return false;
  j->params.stop = (const char *const *)j->stop;
  j->params.nstop = r->nstop;
  j->params.top_logprobs = r->top_logprobs;
  j->n = r->n ? r->n : 1;
  j->chat = chat;
  j->stream = r->stream;
  j->logprobs = r->logprobs;
  j->include_usage = r->include_usage;
  if (r->format != RX_SERVE_FORMAT_TEXT) { /* structured output: the schema's grammar */
    bool any = r->format == RX_SERVE_FORMAT_JSON_OBJECT;
    rx_status gs = s->grammars ? serve_grammars_get(s->grammars, any ? NULL : r->schema,
                                                    any ? 0 : r->schema_len, &j->params.grammar)
                               : base_status_make(RX_ERR_OUT_OF_MEMORY, "out of memory");
    if (gs) {
      *ret = send_error(c, 400, "response_format", "%s", rx_status_message(gs));
      rx_status_free(gs);
      return false;
    }
  }
  return true;
}

/* Tokenizes and checks the prompts; a job with one ref for the connection and one for the
 * scheduler, or NULL after sending the error. */
static job *make_job(rx_server *s, struct MHD_Connection *c, rx_serve_request *r, bool chat,
                     enum MHD_Result *ret) {
  job *j = calloc(1, sizeof *j);
  size_t np = r->nprompts ? r->nprompts : 1;
  if (j) {
    j->refs = 2;
    j->nprompts = np;
    j->pids = calloc(np, sizeof *j->pids);
    j->pcount = calloc(np, sizeof *j->pcount);
  }
  if (!j || !j->pids || !j->pcount) {
    *ret = send_error(c, 500, NULL, "out of memory");
    if (j) j->refs = 1;
    if (j) job_unref(s, j);
    return NULL;
  }
  int64_t max_tokens = 0;
  bool ok = true;
  for (size_t i = 0; i < np && ok; i++) ok = take_prompt(s, c, r, chat, j, i, &max_tokens, ret);
  if (ok) ok = take_params(s, c, r, j, chat, ret);
  if (ok && !make_choices(s, r, j)) {
    *ret = send_error(c, 500, NULL, "out of memory");
    ok = false;
  }
  if (!ok) {
    j->refs = 1;
    job_unref(s, j);
    return NULL;
  }
  j->params.max_tokens = max_tokens;
  j->created = (long)time(NULL);
  j->arrive = now_ms();
  j->deadline = s->o.deadline_ms > 0 ? j->arrive + (double)s->o.deadline_ms : 0;
  pthread_mutex_lock(&s->lock);
  snprintf(j->id, sizeof j->id, "%s-%ld", chat ? "chatcmpl" : "cmpl", ++s->next_id);
  pthread_mutex_unlock(&s->lock);
  return j;
}

/* The fields every answer of j carries. */
static serve_answer answer_head(rx_server *s, const job *j) {
  return (serve_answer){j->id,   s->model_name, j->created,
                        j->chat, j->logprobs,   rx_llm_model_tokenizer(s->m)};
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

/* Whether choice c of a stream has something to send: text, tokens, or its end. */
static bool choice_news(const serve_choice *c) {
  return c->sent < c->len || c->toks_sent < c->ntoks || (c->finish && !c->finish_sent);
}

/* Whether a connection waiting on j has news: for a stream, a choice's, or the end. */
static bool stream_news(const job *j) {
  for (size_t k = 0; k < j->nch; k++)
    if (choice_news(&j->ch[k])) return true;
  return j->done;
}
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
    serve_answer h = answer_head(s, j);
    bool any = false; /* a chunk for each choice with news, its index in it */
    for (size_t k = 0; k < j->nch && ok; k++)
      if (choice_news(&j->ch[k]) && !(j->done && j->error)) {
        serve_choice *ch = &j->ch[k];
        ok = push_event(j, serve_answer_chunk(&h, ch, k, ch->finish), NULL);
        any = true;
      }
    if (any) {
    } else if (j->done) {
      if (j->error) {
        cJSON *e = cJSON_CreateObject(), *eo = cJSON_AddObjectToObject(e, "error");
        cJSON_AddStringToObject(eo, "message", j->error);
        cJSON_AddStringToObject(eo, "type", "server_error");
        ok = push_event(j, e, NULL);
      } else if (j->include_usage) {
        ok = push_event(j, serve_answer_usage_chunk(&h, j->ch, j->nch, j->count), NULL);
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
  bool closing = s->stopping || s->draining;
  bool full = !closing && s->inflight >= s->max_batch + s->o.max_queue;
  if (closing || full) {
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
  serve_answer h = answer_head(s, j);
  pthread_mutex_lock(&s->lock); /* done: nothing writes the choices now, but the lock says so */
  cJSON *body = serve_answer_full(&h, j->ch, j->nch, j->count);
  pthread_mutex_unlock(&s->lock);
  return send_json(c, 200, body);
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
  return send_answer(c, 503, error_object(503, NULL, msg), "Retry-After", RETRY_AFTER);
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

/* GET /metrics: Prometheus' text format 0.0.4 (ops.c). */
static enum MHD_Result handle_metrics(rx_server *s, struct MHD_Connection *c) {
  pthread_mutex_lock(&s->lock);
  int64_t pages = s->kv_capacity / RX_SERVE_KV_PAGE;
  int64_t free_pages = s->stats.kv_free_tokens / RX_SERVE_KV_PAGE;
  serve_gauges g = {.running = s->bstats.running,
                    .waiting =
                        s->bstats.waiting +
                        (s->inflight - s->stats.pending > 0 ? s->inflight - s->stats.pending : 0),
                    .kv_pages_used = pages - free_pages,
                    .kv_pages_total = pages,
                    .connections = s->stats.connections,
                    .cancelled = s->stats.cancelled,
                    .timed_out = s->stats.timed_out,
                    .refused_busy = s->stats.refused_busy,
                    .batcher = s->bstats};
  pthread_mutex_unlock(&s->lock);
  char *text = serve_metrics_text(&s->metrics, &g);
  struct MHD_Response *r =
      MHD_create_response_from_buffer(strlen(text), text, MHD_RESPMEM_MUST_FREE);
  if (!r) {
    free(text);
    return MHD_NO;
  }
  MHD_add_response_header(r, "Content-Type", "text/plain; version=0.0.4; charset=utf-8");
  enum MHD_Result ret = MHD_queue_response(c, 200, r);
  MHD_destroy_response(r);
  return ret;
}

/* --api-key: a /v1 route without "Authorization: Bearer KEY" gets OpenAI's 401 answer. */
static enum MHD_Result refuse_unauthorized(struct MHD_Connection *c) {
  cJSON *body = error_object(401, NULL,
                             "Incorrect API key provided: relaxc serve --api-key (or "
                             "RELAXC_API_KEY) is set, and this request's 'Authorization: Bearer "
                             "KEY' header does not match it");
  cJSON_ReplaceItemInObject(cJSON_GetObjectItem(body, "error"), "code",
                            cJSON_CreateString("invalid_api_key"));
  return send_answer(c, 401, body, "WWW-Authenticate", "Bearer");
}

static enum MHD_Result handle_access(rx_server *s, struct MHD_Connection *c, const char *url,
                                     const char *method, const char *upload, size_t *upload_size,
                                     void **con_cls) {
  conn *cn = *con_cls;
  if (!cn) {
    if (!(cn = calloc(1, sizeof *cn))) return MHD_NO;
    *con_cls = cn;
    cn->ep = serve_endpoint_of(url);
    cn->start = now_ms();
    snprintf(cn->method, sizeof cn->method, "%s", method);
    /* refused before its body is read: the key's check never waits for an upload */
    if (s->o.api_key && !strncmp(url, "/v1", 3) &&
        !serve_auth_ok(MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization"),
                       s->o.api_key))
      return refuse_unauthorized(c);
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
  case RX_SERVE_METRICS:
    return handle_metrics(s, c);
  case RX_SERVE_COMPLETION:
    return handle_post(s, c, cn, false);
  case RX_SERVE_CHAT:
    return handle_post(s, c, cn, true);
  }
  return MHD_NO;
}

/* Every call of MHD's: the request's answer is counted in the metrics as soon as it is queued (a
 * stream's at its head), before a byte of it is sent; requests that end unanswered are counted
 * when they end (log_request). */
static enum MHD_Result access_handler(void *cls, struct MHD_Connection *c, const char *url,
                                      const char *method, const char *version, const char *upload,
                                      size_t *upload_size, void **con_cls) {
  (void)version;
  rx_server *s = cls;
  enum MHD_Result ret = handle_access(s, c, url, method, upload, upload_size, con_cls);
  conn *cn = *con_cls;
  if (cn && !cn->counted) {
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_HTTP_STATUS);
    if (ci && ci->http_status) {
      serve_metrics_request(&s->metrics, cn->ep, ci->http_status);
      cn->counted = true;
    }
  }
  return ret;
}

/* The request's line of the log, and its count in the metrics if no answer was queued. */
static void log_request(rx_server *s, struct MHD_Connection *c, const conn *cn,
                        enum MHD_RequestTerminationCode why) {
  const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_HTTP_STATUS);
  unsigned status = ci && ci->http_status ? ci->http_status : 499;
  double now = now_ms();
  serve_log_entry e = {.id = "-",
                       .method = cn->method,
                       .endpoint = cn->ep,
                       .status = status,
                       .prompt_tokens = -1,
                       .ttft_ms = -1,
                       .total_ms = now - cn->start};
  char id[40];
  if (cn->j) {
    job *j = cn->j;
    pthread_mutex_lock(&s->lock);
    snprintf(id, sizeof id, "%s", j->id);
    e.id = id;
    e.prompt_tokens = (int64_t)j->count;
    e.new_tokens = (int64_t)j->completion_tokens;
    e.ttft_ms = j->first_token > 0 ? j->first_token - j->arrive : -1;
    e.total_ms = now - j->arrive;
    e.finish = j->timed_out                                  ? "timeout"
               : j->cancelled && !j->finish                  ? "cancelled"
               : j->error                                    ? "error"
               : j->finish && j->nch == 1 && j->ch[0].finish ? j->ch[0].finish
               : j->finish                                   ? j->finish
               : why != MHD_REQUEST_TERMINATED_COMPLETED_OK  ? "cancelled"
                                                             : NULL;
    pthread_mutex_unlock(&s->lock);
  }
  if (!cn->counted) serve_metrics_request(&s->metrics, cn->ep, status);
  serve_log_request(stderr, &e);
}

/* The request ended (answered, or the client left): a job not done is cancelled; the connection
 * may read its next request from now on. */
static void completed(void *cls, struct MHD_Connection *c, void **con_cls,
                      enum MHD_RequestTerminationCode why) {
  rx_server *s = cls;
  conn *cn = *con_cls;
  if (cn) log_request(s, c, cn, why);
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
  s->listen_fd = -1;
  serve_metrics_init(&s->metrics);
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
  rx_llm_batcher_options bo = {.max_batch = opt.max_batch,
                               .prefix_cache = opt.prefix_cache,
                               .prefill_chunk = opt.prefill_chunk};
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
        MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ITC, 0,
        NULL, NULL, access_handler, s, MHD_OPTION_THREAD_POOL_SIZE, pool, MHD_OPTION_SOCK_ADDR,
        &addr, MHD_OPTION_NOTIFY_COMPLETED, completed, s, MHD_OPTION_NOTIFY_CONNECTION,
        connection_event, s, MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)opt.idle_timeout_s,
        MHD_OPTION_CONNECTION_LIMIT, (unsigned)opt.max_connections,
        MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned)opt.max_connections_per_ip, MHD_OPTION_END);
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
  st.inflight = s->inflight;
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

void serve_server_quiesce(rx_server *s) {
  pthread_mutex_lock(&s->lock);
  bool first = !s->draining;
  s->draining = true;
  pthread_mutex_unlock(&s->lock);
  if (first && s->d) s->listen_fd = MHD_quiesce_daemon(s->d);
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
  if (s->listen_fd >= 0)
    close(s->listen_fd); /* after MHD_stop_daemon, as MHD_quiesce_daemon asks */
  if (s->watchdog_started) end_thread(s, &s->watchdog_stop, &s->tick, s->watchdog);
  rx_llm_batcher_free(s->b);
  serve_grammars_free(s->grammars);
  pthread_cond_destroy(&s->tick);
  pthread_cond_destroy(&s->work);
  pthread_mutex_destroy(&s->lock);
  serve_metrics_destroy(&s->metrics);
  free(s->model_name);
  free(s);
}
