/* relaxc serve's HTTP server (tools/serve/server.c): OpenAI-style /v1/completions and
 * /v1/chat/completions over one LLM artifact, on libmicrohttpd (built only when CMake finds it:
 * RX_HAVE_MICROHTTPD). One scheduler thread drives an rx_llm_batcher and makes every model call;
 * the HTTP threads (one per connection) parse and tokenize requests, hand them over through a
 * mutex-protected queue and wait on a condition for the tokens (streamed as server-sent events,
 * or one JSON answer at the end). README "relaxc serve" lists what is supported. */
#ifndef RX_TOOLS_SERVE_SERVER_H
#define RX_TOOLS_SERVE_SERVER_H
#include "relaxc/llm.h"

#include <stdint.h>

typedef struct rx_server rx_server;

typedef struct rx_server_options {
  const char *host;       /* an IPv4 address to listen on; NULL: 127.0.0.1 */
  int port;               /* 0: an ephemeral port (rx_server_port says which) */
  int64_t max_batch;      /* requests running at once; 0: the batcher's default */
  const char *model_name; /* the name requests' "model" must match (NULL: "relaxc") */
} rx_server_options;

/* What the scheduler last saw (read under the server's lock). */
typedef struct rx_server_stats {
  int64_t pending;        /* requests queued, waiting or running in the batcher */
  int64_t kv_free_tokens; /* the model's free KV cache tokens after the last step */
  int64_t sequences;      /* sequences the model's KV cache holds */
  int64_t completed;      /* requests that ended (any way) */
  int64_t cancelled;      /* of those, ended because their client went away */
} rx_server_stats;

/* Starts listening and the scheduler thread. The model must outlive the server, and nothing else
 * may use it until rx_server_stop. */
rx_status rx_server_start(rx_llm_model *m, const rx_server_options *o, rx_server **out_server);
int rx_server_port(const rx_server *s);
rx_server_stats rx_server_get_stats(rx_server *s);
/* Stops: requests in flight end with an error, connections close, threads are joined. NULL is
 * fine. */
void rx_server_stop(rx_server *s);
#endif
