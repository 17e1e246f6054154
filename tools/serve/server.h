/* relaxc serve's HTTP server (tools/serve/server.c): OpenAI-style /v1/completions and
 * /v1/chat/completions over one LLM artifact, on libmicrohttpd (built only when CMake finds it:
 * RX_HAVE_MICROHTTPD). One scheduler thread drives an rx_llm_batcher and makes every model call;
 * libmicrohttpd's pool of threads parses and tokenizes requests, hands them over through a
 * mutex-protected queue and suspends each connection until its tokens come (streamed as
 * server-sent events, or one JSON answer at the end). A watchdog thread closes connections whose
 * requests arrive too slowly and cancels the requests of clients that went away. README "relaxc
 * serve" and docs/serve.md list what is supported. */
#ifndef RX_TOOLS_SERVE_SERVER_H
#define RX_TOOLS_SERVE_SERVER_H
#include "relaxc/llm.h"

#include <stdint.h>

typedef struct rx_server rx_server;

/* The limits that keep hostile or vanished clients from holding the server: 0 in any of them
 * takes the default named beside it (README "relaxc serve" has the command's options). */
#define RX_SERVE_IDLE_TIMEOUT_S  15     /* a connection silent this long is closed */
#define RX_SERVE_READ_TIMEOUT_MS 30000  /* a request's headers and body must all arrive in this */
#define RX_SERVE_DEADLINE_MS     600000 /* a request not answered in this ends with an error */
#define RX_SERVE_MAX_CONNECTIONS 256    /* connections open at once */
#define RX_SERVE_MAX_PER_IP      64     /* connections open at once from one address */
#define RX_SERVE_MAX_QUEUE       64     /* requests waiting for a batch slot; more get 503 */

typedef struct rx_server_options {
  const char *host;           /* an IPv4 address to listen on; NULL: 127.0.0.1 */
  int port;                   /* 0: an ephemeral port (serve_server_port says which) */
  int64_t max_batch;          /* requests running at once; 0: the model's max_batch capped by its KV
                                 cache's max_sequences; more than that is refused */
  const char *model_name;     /* the name requests' "model" must match (NULL: "relaxc") */
  int idle_timeout_s;         /* seconds a connection may stay silent (MHD's connection timeout) */
  int64_t read_timeout_ms;    /* from the connection's opening (or its previous answer's end)
                                 until its next request has arrived whole */
  int64_t deadline_ms;        /* from a request's arrival to its answer's end; < 0: none */
  int max_connections;        /* connections at once (past it, new ones wait in the backlog) */
  int max_connections_per_ip; /* connections at once from one IPv4 address */
  int64_t max_queue;          /* requests waiting beyond the max_batch running ones */
  const char *api_key;   /* NULL: none; else every /v1 route needs "Authorization: Bearer KEY" (401
                            otherwise); /health and /metrics stay open */
  bool prefix_cache;     /* the batcher's prefix cache (rx_llm_batcher_options) */
  int64_t prefill_chunk; /* the batcher's prompt tokens per step; 0: whole prompts */
} rx_server_options;

/* What the scheduler last saw (read under the server's lock). */
typedef struct rx_server_stats {
  int64_t pending;        /* requests queued, waiting or running in the batcher */
  int64_t kv_free_tokens; /* the model's free KV cache tokens after the last step */
  int64_t sequences;      /* sequences the model's KV cache holds */
  int64_t completed;      /* requests that ended (any way) */
  int64_t cancelled;      /* of those, ended because their client went away */
  int64_t timed_out;      /* of those, ended by their deadline */
  int64_t refused_busy;   /* requests answered 503 because the queue was full */
  int64_t connections;    /* connections open now */
  int64_t inflight;       /* requests queued or in the batcher, not ended */
} rx_server_stats;

/* Starts listening and the scheduler thread. The model must outlive the server, and nothing else
 * may use it until serve_server_stop. */
rx_status serve_server_start(rx_llm_model *m, const rx_server_options *o, rx_server **out_server);
int serve_server_port(const rx_server *s);
/* The requests that run at once: options.max_batch, or its default. */
int64_t serve_server_max_batch(const rx_server *s);
rx_server_stats serve_server_get_stats(rx_server *s);
/* Graceful shutdown's first step: stops accepting connections, and requests that arrive on open
 * ones get 503; those in flight go on (stats' inflight says how many are left). */
void serve_server_quiesce(rx_server *s);
/* Stops: requests in flight end with an error, connections close, threads are joined. NULL is
 * fine. */
void serve_server_stop(rx_server *s);
#endif
