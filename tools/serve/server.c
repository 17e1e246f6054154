/* relaxc serve's HTTP server (server.h). Threads:
 *   - libmicrohttpd's, one per connection: read the body, validate and tokenize it (the tokenizer
 *     is immutable, so shared), queue a job, wait for the scheduler to accept it, then wait on the
 *     job's condition for text (streaming: each wake-up sends what came; otherwise one answer);
 *   - the scheduler: submits queued jobs to the batcher, cancels those whose client went away,
 *     and runs rx_llm_batcher_step while any is pending; on_token appends each token's text to
 *     its job under the lock. Every model call is on this thread.
 * A job is shared by the connection, the streaming response and the scheduler (refs); the last
 * one to drop it frees it. */
#include "tools/serve/server.h"

#include "base/base.h"

#include <arpa/inet.h>
#include <cjson/cJSON.h>
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

#define MAX_BODY    (1 << 20) /* request bodies over 1 MiB are refused (413) */
#define KEEPALIVE_S 5         /* a stream with nothing new for this long sends an SSE comment */

typedef struct job {
  struct job *next; /* in the server's queue, or the scheduler's active list */
  pthread_cond_t cond;
  int refs;
  /* the request (written before it is queued, read-only after) */
  int32_t *prompt;
  size_t count;
  rx_llm_generate_params params;
  bool chat, stream;
  char id[40];
  long created;
  /* under the server's lock */
  bool accepted, done, cancelled;
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

struct rx_server {
  rx_llm_model *m;
  rx_llm_batcher *b;
  struct MHD_Daemon *d;
  pthread_t thread;
  bool thread_started;
  pthread_mutex_t lock;
  pthread_cond_t work; /* the scheduler waits for jobs on it */
  job *queue, *queue_tail;
  bool stopping;
  int port;
  char *model_name;
  int64_t max_seq_len, kv_capacity;
  long next_id;
  rx_server_stats stats;
};

/* ---- jobs ---- */

static void job_unref(rx_server *s, job *j) {
  pthread_mutex_lock(&s->lock);
  bool last = --j->refs == 0;
  pthread_mutex_unlock(&s->lock);
  if (!last) return;
  pthread_cond_destroy(&j->cond);
  rx_llm_free(j->prompt);
  free(j->text);
  free(j->error);
  free(j->out);
  free(j);
}

/* Ends j (under the lock) with an error message or a finish reason. */
static void job_finish(job *j, int status, const char *error, const char *finish) {
  if (error && !j->error) {
    j->error = rx_strdup(error);
    j->error_status = status;
  }
  j->finish = finish;
  j->done = true;
  pthread_cond_broadcast(&j->cond);
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
  pthread_cond_broadcast(&j->cond);
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
    active *a = calloc(1, sizeof *a);
    rx_status st = a ? NULL : rx_status_make(RX_ERR_OUT_OF_MEMORY, "out of memory");
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
      job_finish(j, 400, rx_status_message(st), NULL);
      s->stats.completed++;
    } else {
      j->accepted = true;
      j->batch_id = id;
      pthread_cond_broadcast(&j->cond);
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

/* After a step: ends the jobs whose requests ended, and cancels those whose clients left. */
static void reap(rx_server *s, active **list, bool all) {
  for (active **pa = list; *pa;) {
    active *a = *pa;
    job *j = a->j;
    pthread_mutex_lock(&s->lock);
    bool cancel = j->cancelled || all;
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
    if (st)
      job_finish(j, 500, rx_status_message(st), NULL);
    else if (info.state == RX_LLM_REQUEST_FAILED)
      job_finish(j, 500, info.error, NULL);
    else if (info.state == RX_LLM_REQUEST_CANCELLED || info.state == RX_LLM_REQUEST_STOPPED) {
      job_finish(j, 503, all ? "the server is stopping" : "cancelled", NULL);
      s->stats.cancelled += !all;
    } else
      job_finish(j, 200, NULL, finish_reason(info.state));
    s->stats.completed++;
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
    if (list) {
      size_t n = 0;
      rx_status st = rx_llm_batcher_step(s->b, &n);
      if (st) {
        fprintf(stderr, "relaxc serve: %s\n", rx_status_message(st));
        rx_status_free(st);
      }
      reap(s, &list, false);
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
  for (job *j = q; j; j = j->next) job_finish(j, 503, "the server is stopping", NULL);
  s->stats.pending = 0;
  s->stats.kv_free_tokens = rx_llm_model_kv_free_tokens(s->m);
  s->stats.sequences = rx_llm_model_sequences(s->m);
  pthread_mutex_unlock(&s->lock);
  while (q) {
    job *j = q;
    q = q->next;
    job_unref(s, j);
  }
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
static enum MHD_Result send_json(struct MHD_Connection *c, unsigned status, cJSON *body) {
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
  enum MHD_Result ret = MHD_queue_response(c, status, r);
  MHD_destroy_response(r);
  return ret;
}

static enum MHD_Result send_error(struct MHD_Connection *c, unsigned status, const char *param,
                                  const char *fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  cJSON *root = cJSON_CreateObject(), *e = cJSON_AddObjectToObject(root, "error");
  cJSON_AddStringToObject(e, "message", msg);
  cJSON_AddStringToObject(e, "type", status < 500 ? "invalid_request_error" : "server_error");
  if (param)
    cJSON_AddStringToObject(e, "param", param);
  else
    cJSON_AddNullToObject(e, "param");
  cJSON_AddNullToObject(e, "code");
  return send_json(c, status, root);
}

/* A request's fields, checked: *param names the offending field and msg says why. */
typedef struct parsed {
  char *prompt; /* the text to tokenize (chat: the template applied) */
  int64_t max_tokens;
  bool has_max_tokens;
  bool stream;
  rx_sampler_params sp;
} parsed;

static bool get_number(const cJSON *root, const char *name, double lo, double hi, bool integer,
                       double *out, const char **param, char *msg, size_t cap) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, name);
  if (!v || cJSON_IsNull(v)) return true;
  *param = name;
  if (!cJSON_IsNumber(v)) return snprintf(msg, cap, "'%s' must be a number", name), false;
  double x = v->valuedouble;
  if (integer && x != (double)(int64_t)x)
    return snprintf(msg, cap, "'%s' must be an integer, not %g", name, x), false;
  if (!(x >= lo && x <= hi))
    return snprintf(msg, cap, "'%s' is %g, outside [%g, %g]", name, x, lo, hi), false;
  *param = NULL;
  *out = x;
  return true;
}

/* The chat template (relaxc has no chat-template engine): each message as "ROLE: CONTENT\n",
 * then "assistant:". */
static bool chat_prompt(const cJSON *msgs, char **out, const char **param, char *msg, size_t cap) {
  *param = "messages";
  if (!cJSON_IsArray(msgs) || !cJSON_GetArraySize(msgs))
    return snprintf(msg, cap, "'messages' must be a non-empty array"), false;
  size_t len = 0;
  const cJSON *m;
  int i = 0;
  cJSON_ArrayForEach(m, msgs) {
    const cJSON *role = cJSON_GetObjectItemCaseSensitive(m, "role");
    const cJSON *content = cJSON_GetObjectItemCaseSensitive(m, "content");
    if (!cJSON_IsString(role) || !cJSON_IsString(content))
      return snprintf(msg, cap, "messages[%d] needs string 'role' and 'content'", i), false;
    len += strlen(role->valuestring) + strlen(content->valuestring) + 3;
    i++;
  }
  char *p = malloc(len + 16);
  if (!p) return snprintf(msg, cap, "out of memory"), false;
  size_t n = 0;
  cJSON_ArrayForEach(m, msgs) {
    n +=
        (size_t)sprintf(p + n, "%s: %s\n", cJSON_GetObjectItemCaseSensitive(m, "role")->valuestring,
                        cJSON_GetObjectItemCaseSensitive(m, "content")->valuestring);
  }
  strcpy(p + n, "assistant:");
  *out = p;
  *param = NULL;
  return true;
}

/* Checks the fields of a request; false with *status, *param and msg on a bad one. */
static bool parse_fields(rx_server *s, const cJSON *root, bool chat, parsed *r, unsigned *status,
                         const char **param, char *msg, size_t cap) {
  *status = 400;
  *param = NULL;
  if (!cJSON_IsObject(root)) return snprintf(msg, cap, "the body must be a JSON object"), false;
  const cJSON *model = cJSON_GetObjectItemCaseSensitive(root, "model");
  if (model && !cJSON_IsNull(model)) {
    *param = "model";
    if (!cJSON_IsString(model)) return snprintf(msg, cap, "'model' must be a string"), false;
    if (strcmp(model->valuestring, s->model_name)) {
      *status = 404;
      return snprintf(msg, cap, "model '%s' not found: this server has '%s'", model->valuestring,
                      s->model_name),
             false;
    }
  }
  const cJSON *stream = cJSON_GetObjectItemCaseSensitive(root, "stream");
  if (stream && !cJSON_IsNull(stream)) {
    *param = "stream";
    if (!cJSON_IsBool(stream)) return snprintf(msg, cap, "'stream' must be a boolean"), false;
    r->stream = cJSON_IsTrue(stream);
  }
  const cJSON *stop = cJSON_GetObjectItemCaseSensitive(root, "stop");
  if (stop && !cJSON_IsNull(stop) && !(cJSON_IsArray(stop) && !cJSON_GetArraySize(stop))) {
    *param = "stop";
    return snprintf(msg, cap, "'stop' is not supported by relaxc serve"), false;
  }
  double x = 1;
  r->sp = (rx_sampler_params){.temperature = 1, .top_k = 0, .top_p = 1, .repetition_penalty = 1};
  if (!get_number(root, "temperature", 0, 2, false, &x, param, msg, cap)) return false;
  r->sp.temperature = (float)x;
  x = 1;
  if (!get_number(root, "top_p", 1e-9, 1, false, &x, param, msg, cap)) return false;
  r->sp.top_p = (float)x;
  x = 0;
  if (!get_number(root, "top_k", 0, 1e9, true, &x, param, msg, cap)) return false;
  r->sp.top_k = (int32_t)x;
  x = 0;
  if (!get_number(root, "seed", 0, 9007199254740992.0, true, &x, param, msg, cap)) return false;
  r->sp.seed = (uint64_t)x;
  x = 0;
  if (!get_number(root, "max_tokens", 1, 1e15, true, &x, param, msg, cap)) return false;
  r->has_max_tokens = x > 0;
  r->max_tokens = (int64_t)x;
  if (chat) {
    if (!chat_prompt(cJSON_GetObjectItemCaseSensitive(root, "messages"), &r->prompt, param, msg,
                     cap))
      return false;
  } else {
    const cJSON *p = cJSON_GetObjectItemCaseSensitive(root, "prompt");
    *param = "prompt";
    if (!cJSON_IsString(p)) return snprintf(msg, cap, "'prompt' must be a string"), false;
    if (!(r->prompt = rx_strdup(p->valuestring))) return snprintf(msg, cap, "out of memory"), false;
    *param = NULL;
  }
  return true;
}

/* Tokenizes and checks the lengths; a job with one ref for the connection and one for the
 * scheduler, or NULL after sending the error. */
static job *make_job(rx_server *s, struct MHD_Connection *c, parsed *r, bool chat,
                     enum MHD_Result *ret) {
  const rx_tokenizer *tok = rx_llm_model_tokenizer(s->m);
  int32_t *ids = NULL;
  size_t n = 0;
  rx_status st =
      rx_tokenizer_encode(tok, r->prompt, strlen(r->prompt), RX_TOKENIZER_ADD_SPECIAL, &ids, &n);
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
  pthread_cond_init(&j->cond, NULL);
  j->refs = 2;
  j->prompt = ids;
  j->count = n;
  j->chat = chat;
  j->stream = r->stream;
  j->params.sampling = r->sp;
  j->params.max_tokens = r->max_tokens;
  j->created = (long)time(NULL);
  pthread_mutex_lock(&s->lock);
  snprintf(j->id, sizeof j->id, "%s-%ld", chat ? "chatcmpl" : "cmpl", ++s->next_id);
  pthread_mutex_unlock(&s->lock);
  return j;
}

/* The object of an answer or of a stream's event: choices[0] holds text (chat: message or
 * delta) and finish (null while streaming). */
static cJSON *answer(rx_server *s, const job *j, const char *text, const char *finish, bool event) {
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
    if (text) cJSON_AddStringToObject(m, "content", text);
  } else {
    cJSON_AddStringToObject(c0, "text", text ? text : "");
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
} stream_ctx;

/* libmicrohttpd's content reader of a stream: blocks (this connection's own thread) until the
 * job has new text, and hands out the events. */
static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max) {
  (void)pos;
  stream_ctx *sc = cls;
  job *j = sc->j;
  rx_server *s = sc->s;
  if (j->out_pos == j->out_len && j->finished_stream) return MHD_CONTENT_READER_END_OF_STREAM;
  while (j->out_pos == j->out_len) {
    pthread_mutex_lock(&s->lock);
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += KEEPALIVE_S;
    int rc = 0;
    while (!j->done && j->sent == j->len && rc == 0)
      rc = pthread_cond_timedwait(&j->cond, &s->lock, &until);
    bool ok = true;
    if (j->sent < j->len) {
      char *piece = rx_strdup(j->text + j->sent);
      j->sent = j->len;
      ok = piece && push_event(j, answer(s, j, piece, NULL, true), NULL);
      free(piece);
    } else if (j->done) {
      if (j->error) {
        cJSON *e = cJSON_CreateObject(), *eo = cJSON_AddObjectToObject(e, "error");
        cJSON_AddStringToObject(eo, "message", j->error);
        cJSON_AddStringToObject(eo, "type", "server_error");
        ok = push_event(j, e, NULL);
      } else {
        ok = push_event(j, answer(s, j, NULL, j->finish, true), NULL);
      }
      ok = ok && push_event(j, NULL, "data: [DONE]\n\n");
      j->finished_stream = true;
    } else {
      ok = push_event(j, NULL, ": keep-alive\n\n");
    }
    pthread_mutex_unlock(&s->lock);
    if (!ok) return MHD_CONTENT_READER_END_WITH_ERROR;
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

/* Queues j for the scheduler and waits until it is accepted or has ended. */
static void enqueue(rx_server *s, job *j) {
  pthread_mutex_lock(&s->lock);
  if (s->stopping) {
    job_finish(j, 503, "the server is stopping", NULL);
    j->refs--; /* the scheduler's, never taken */
  } else {
    if (s->queue_tail)
      s->queue_tail->next = j;
    else
      s->queue = j;
    s->queue_tail = j;
    pthread_cond_signal(&s->work);
  }
  while (!j->accepted && !j->done) pthread_cond_wait(&j->cond, &s->lock);
  pthread_mutex_unlock(&s->lock);
}

static enum MHD_Result respond(rx_server *s, struct MHD_Connection *c, conn *cn, job *j) {
  enqueue(s, j);
  pthread_mutex_lock(&s->lock);
  bool failed = j->done && j->error;
  pthread_mutex_unlock(&s->lock);
  if (failed) return send_error(c, (unsigned)j->error_status, NULL, "%s", j->error);
  if (j->stream) {
    stream_ctx *sc = malloc(sizeof *sc);
    if (!sc) return send_error(c, 500, NULL, "out of memory");
    pthread_mutex_lock(&s->lock);
    j->refs++;
    pthread_mutex_unlock(&s->lock);
    *sc = (stream_ctx){s, j};
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
  (void)cn;
  pthread_mutex_lock(&s->lock);
  while (!j->done) pthread_cond_wait(&j->cond, &s->lock);
  pthread_mutex_unlock(&s->lock);
  if (j->error) return send_error(c, (unsigned)j->error_status, NULL, "%s", j->error);
  return send_json(c, 200, answer(s, j, j->text ? j->text : "", j->finish, false));
}

static enum MHD_Result handle_post(rx_server *s, struct MHD_Connection *c, conn *cn, bool chat) {
  if (cn->too_large) return send_error(c, 413, NULL, "the body is over %d bytes", MAX_BODY);
  cJSON *root = cJSON_ParseWithLength(cn->body ? cn->body : "", cn->len);
  if (!root) return send_error(c, 400, NULL, "malformed JSON in the request body");
  parsed r = {0};
  unsigned status = 400;
  const char *param = NULL;
  char msg[512];
  enum MHD_Result ret = MHD_NO;
  if (!parse_fields(s, root, chat, &r, &status, &param, msg, sizeof msg)) {
    ret = send_error(c, status, param, "%s", msg);
  } else if (!rx_llm_model_tokenizer(s->m)) {
    ret = send_error(c, 400, NULL, "the model has no tokenizer: text requests are impossible");
  } else {
    cn->j = make_job(s, c, &r, chat, &ret);
    if (cn->j) ret = respond(s, c, cn, cn->j);
  }
  free(r.prompt);
  cJSON_Delete(root);
  return ret;
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
  bool chat = !strcmp(url, "/v1/chat/completions");
  bool completions = chat || !strcmp(url, "/v1/completions");
  if (!strcmp(url, "/v1/models") || !strcmp(url, "/health")) {
    if (strcmp(method, "GET")) return send_error(c, 405, NULL, "%s takes GET", url);
    if (!strcmp(url, "/health")) return send_json(c, 200, cJSON_CreateObject());
    return handle_models(s, c);
  }
  if (!completions) return send_error(c, 404, NULL, "no endpoint %s", url);
  if (strcmp(method, "POST")) return send_error(c, 405, NULL, "%s takes POST", url);
  return handle_post(s, c, cn, chat);
}

/* The request ended (answered, or the client left): a job not done is cancelled. */
static void completed(void *cls, struct MHD_Connection *c, void **con_cls,
                      enum MHD_RequestTerminationCode why) {
  (void)c;
  (void)why;
  rx_server *s = cls;
  conn *cn = *con_cls;
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

/* ---- the server ---- */

rx_status rx_server_start(rx_llm_model *m, const rx_server_options *o, rx_server **out_server) {
  *out_server = NULL;
  const char *host = o && o->host ? o->host : "127.0.0.1";
  struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons((uint16_t)(o ? o->port : 0))};
  if (inet_pton(AF_INET, host, &addr.sin_addr) != 1)
    return rx_status_make(RX_ERR_INVALID, "--host %s: not an IPv4 address", host);
  if (!rx_llm_model_tokenizer(m))
    return rx_status_make(RX_ERR_INVALID, "the model has no tokenizer (no tokenizer.json)");
  rx_server *s = calloc(1, sizeof *s);
  if (!s) return rx_status_make(RX_ERR_OUT_OF_MEMORY, "out of memory");
  s->m = m;
  s->model_name = rx_strdup(o && o->model_name ? o->model_name : "relaxc");
  s->max_seq_len = rx_llm_model_max_seq_len(m);
  s->kv_capacity = rx_llm_model_kv_capacity(m);
  s->stats.kv_free_tokens = rx_llm_model_kv_free_tokens(m);
  pthread_mutex_init(&s->lock, NULL);
  pthread_cond_init(&s->work, NULL);
  rx_llm_batcher_options bo = {.max_batch = o ? o->max_batch : 0};
  rx_status st = rx_llm_batcher_create(m, &bo, &s->b);
  if (!st && pthread_create(&s->thread, NULL, scheduler, s))
    st = rx_status_make(RX_ERR_INTERNAL, "cannot start the scheduler thread");
  s->thread_started = !st;
  if (!st) {
    s->d = MHD_start_daemon(MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD |
                                MHD_USE_POLL,
                            0, NULL, NULL, access_handler, s, MHD_OPTION_SOCK_ADDR, &addr,
                            MHD_OPTION_NOTIFY_COMPLETED, completed, s, MHD_OPTION_END);
    if (!s->d)
      st = rx_status_make(RX_ERR_IO, "cannot listen on %s:%d (in use, or not this machine's)", host,
                          o ? o->port : 0);
  }
  if (st) {
    rx_server_stop(s);
    return st;
  }
  const union MHD_DaemonInfo *info = MHD_get_daemon_info(s->d, MHD_DAEMON_INFO_BIND_PORT);
  s->port = info ? info->port : 0;
  *out_server = s;
  return NULL;
}

int rx_server_port(const rx_server *s) { return s->port; }

rx_server_stats rx_server_get_stats(rx_server *s) {
  pthread_mutex_lock(&s->lock);
  rx_server_stats st = s->stats;
  pthread_mutex_unlock(&s->lock);
  return st;
}

void rx_server_stop(rx_server *s) {
  if (!s) return;
  if (s->thread_started) {
    pthread_mutex_lock(&s->lock);
    s->stopping = true;
    pthread_cond_signal(&s->work);
    pthread_mutex_unlock(&s->lock);
    pthread_join(s->thread, NULL);
  }
  if (s->d) MHD_stop_daemon(s->d);
  rx_llm_batcher_free(s->b);
  pthread_cond_destroy(&s->work);
  pthread_mutex_destroy(&s->lock);
  free(s->model_name);
  free(s);
}
