/* relaxc serve's requests without the model (tools/serve/request.c): the route of a method and
 * URL, and the checked fields of a /v1/completions or /v1/chat/completions body. The server
 * (server.c) tokenizes and schedules what these return; the fuzzer fuzz_serve drives them with
 * arbitrary bytes. */
#ifndef RX_TOOLS_SERVE_REQUEST_H
#define RX_TOOLS_SERVE_REQUEST_H
#include "relaxc/llm.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define RX_SERVE_MAX_BODY (1 << 20) /* request bodies over 1 MiB are refused (413) */

/* An answer that refuses a request: the HTTP status, the field at fault (NULL: none) and why. */
typedef struct rx_serve_error {
  unsigned status;
  const char *param;
  char msg[512];
  char param_buf[64]; /* param, when it names a field of the body (a static string otherwise) */
} rx_serve_error;

typedef enum rx_serve_route {
  RX_SERVE_REFUSED,    /* 404 or 405: the rx_serve_error says */
  RX_SERVE_HEALTH,     /* GET /health */
  RX_SERVE_MODELS,     /* GET /v1/models */
  RX_SERVE_COMPLETION, /* POST /v1/completions */
  RX_SERVE_CHAT,       /* POST /v1/chat/completions */
  RX_SERVE_METRICS,    /* GET /metrics (Prometheus text) */
} rx_serve_route;

#define RX_SERVE_MAX_N       16  /* choices per prompt ('n') */
#define RX_SERVE_MAX_PROMPTS 64  /* prompts of a list ('prompt' as a list) */
#define RX_SERVE_MAX_CHOICES 128 /* prompts x n */

/* One prompt of a completions request: text, or token ids ('prompt' as ids). */
typedef struct rx_serve_prompt {
  char *text; /* heap, or NULL for ids; NULs kept as in rx_serve_request.prompt */
  size_t len;
  int32_t *ids; /* heap, or NULL for text */
  size_t nids;
} rx_serve_prompt;

/* What response_format asks for. */
typedef enum rx_serve_format {
  RX_SERVE_FORMAT_TEXT = 0,    /* {"type": "text"} or none */
  RX_SERVE_FORMAT_JSON_OBJECT, /* {"type": "json_object"} */
  RX_SERVE_FORMAT_JSON_SCHEMA, /* {"type": "json_schema", "json_schema": {"schema": ...}} */
} rx_serve_format;

/* A request's fields, checked. */
typedef struct rx_serve_request {
  char *prompt;      /* the text to tokenize (chat: the template applied), heap; it may hold NUL
                        bytes (a JSON "\u0000" is kept, never a place to cut the text) */
  size_t prompt_len; /* its bytes */
  bool templated;    /* chat: the model's chat template made the prompt, which carries its special
                        tokens (tokenized without adding any, as transformers does) */
  int64_t max_tokens;
  bool has_max_tokens;
  bool stream;
  rx_sampler_params sp; /* sp.biases points into logit_bias */
  /* the OpenAI fields of tools/serve/request.c's known_fields table */
  rx_serve_prompt *prompts; /* completions: one per prompt of the list (prompts[0] is also
                               prompt/prompt_len for text); chat: NULL */
  size_t nprompts;
  int64_t n;     /* choices per prompt, 1..RX_SERVE_MAX_N */
  bool has_seed; /* 'seed' given: choice i of a prompt samples with seed + i */
  char *stop[RX_LLM_MAX_STOP];
  size_t nstop;
  bool logprobs;             /* completions: 'logprobs' given (top_logprobs of them); chat: true */
  int32_t top_logprobs;      /* 0..5 (completions) or 0..20 (chat) */
  bool echo;                 /* completions: the prompt's text before the answer's */
  bool include_usage;        /* stream_options.include_usage */
  rx_logit_bias *logit_bias; /* heap, nbias entries (ids checked against the vocab later) */
  size_t nbias;
  /* response_format: text (none), json_object (any JSON object) or json_schema (schema holds
     the schema, compact JSON, heap; the key of the server's cache of compiled grammars) */
  rx_serve_format format;
  char *schema;
  size_t schema_len;
} rx_serve_request;

rx_serve_route serve_route_of(const char *method, const char *url, rx_serve_error *e);
/* Parses and checks a body of len bytes (any bytes) for /v1/completions (chat false) or
 * /v1/chat/completions; false with *e on a bad one (400, or 404 for an unknown model). A chat's
 * prompt is the model's chat template tmpl over the messages (NULL: the fallback format,
 * rx_chat_prompt); a template's error (raise_exception's message) is a 400 on 'messages'. On
 * true the caller frees *out with serve_request_free. */
bool serve_parse(const char *body, size_t len, bool chat, const char *model_name,
                 const rx_chat_template *tmpl, rx_serve_request *out, rx_serve_error *e);
void serve_request_free(rx_serve_request *r);
/* The n bytes of s (NULs included) as a JSON string literal, heap (NULL: out of memory): answers
 * put generated text in with it, as cJSON's strings end at a NUL. Quote, backslash and control
 * characters are escaped (\n \r \t, others and NUL as \u00XX); other bytes are copied. */
char *serve_json_string(const char *s, size_t n);
#endif
