/* relaxc serve's answer shapes (tools/serve/answer.c): the choices of a request (one per prompt
 * and 'n'), what each has generated (text, tokens with their log-probabilities, finish reason),
 * and the JSON of OpenAI's answers built from them: a whole /v1/completions or
 * /v1/chat/completions answer, a stream's chunk for one choice, the usage chunk of
 * stream_options.include_usage. server.c owns the locking; nothing here knows about HTTP. */
#ifndef RX_TOOLS_SERVE_ANSWER_H
#define RX_TOOLS_SERVE_ANSWER_H
#include "relaxc/llm.h"

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A generated token with its log-probabilities; offset: where its text starts in the choice's
 * text (the token strings' lengths summed, after the echoed prompt). */
typedef struct serve_token {
  rx_token_logprobs lp;
  size_t offset;
} serve_token;

typedef struct serve_choice {
  size_t prompt;    /* the index of its prompt */
  int64_t batch_id; /* its request in the batcher (0: never submitted) */
  bool ended;
  const char *finish; /* "stop" or "length" once ended normally; NULL otherwise */
  size_t completion_tokens;
  size_t cached_tokens; /* prompt tokens its request took from the prefix cache */
  char *text;           /* the echoed prompt (echo) and the text so far, NULs kept */
  size_t len, cap;
  serve_token *toks; /* logprobs: the tokens so far */
  size_t ntoks, captoks;
  size_t tok_offset; /* the next token's offset */
  /* a stream's progress */
  size_t sent, toks_sent;
  bool role_sent, finish_sent; /* chat: the first chunk's delta carries the role */
} serve_choice;

/* Appends text (false: out of memory). */
bool serve_choice_append(serve_choice *c, const char *text, size_t len);
/* Appends a token's log-probabilities; tok gives its text's length (text_offset). */
bool serve_choice_token(serve_choice *c, const rx_tokenizer *tok, const rx_token_logprobs *lp);
void serve_choice_free(serve_choice *c);

/* What every answer of a request carries. */
typedef struct serve_answer {
  const char *id, *model;
  long created;
  bool chat;
  bool logprobs;           /* the choices carry logprobs in the endpoint's shape */
  const rx_tokenizer *tok; /* the token strings of logprobs */
} serve_answer;

/* The whole answer: every choice (index = its place in ch) and the usage. */
cJSON *serve_answer_full(const serve_answer *a, const serve_choice *ch, size_t n,
                         size_t prompt_tokens);
/* A stream's chunk for choice `index`: its text and tokens not sent yet (marked sent), and
 * finish (NULL: not yet; the choice's finish_reason then null). */
cJSON *serve_answer_chunk(const serve_answer *a, serve_choice *c, size_t index, const char *finish);
/* stream_options.include_usage's last chunk: no choices, the usage. */
cJSON *serve_answer_usage_chunk(const serve_answer *a, const serve_choice *ch, size_t n,
                                size_t prompt_tokens);
#endif
