/* tests/fuzz/fuzz_serve.c: libFuzzer harness of relaxc serve's request handling without the
 * model or the network (tools/serve/request.c): an input is "METHOD URL\n" then a body of any
 * bytes (an input without a newline is a body for POST /v1/completions). The route is looked up;
 * a completion or chat body is parsed and checked with the server's own validator, and an
 * accepted prompt is encoded with the tokenizer of the tiny test model (tests/llm/models/
 * kjv-llama, compiled in as RX_FUZZ_SERVE_TOKENIZER or given by the environment variable of that
 * name), as the server does before it queues a request.
 *
 * What the server promises and the harness checks: a refusal has a status of 400, 404 or 405 and
 * a message; an accepted request has its fields in their documented ranges (the OpenAI fields
 * too: n, stop, logprobs, penalties, logit_bias, prompt lists and ids), a text prompt of
 * prompt_len bytes ending in a NUL terminator, NUL bytes inside it only where the body had a
 * "\u0000" escape or a raw NUL (a prompt is never cut at one, nor given one it did not have),
 * that written as a JSON string (serve_json_string, as answers write text) parses back to the
 * same bytes, and token ids inside the vocab. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "relaxc/llm.h"
#include "tools/serve/request.h"

#define MODEL_NAME "kjv"
#define TEXT_MAX   2048 /* prompts are encoded up to this many bytes (encoding is the slow part) */

static rx_tokenizer *tok;

static void load_tokenizer(void) {
  const char *path = getenv("RX_FUZZ_SERVE_TOKENIZER");
#ifdef RX_FUZZ_SERVE_TOKENIZER
  if (!path) path = RX_FUZZ_SERVE_TOKENIZER;
#endif
  if (!path) return;
  rx_status s = rx_tokenizer_load_file(path, &tok);
  if (s) {
    fprintf(stderr, "fuzz_serve: %s\n", rx_status_message(s));
    rx_status_free(s);
    abort();
  }
}

/* The prompt written as a JSON string by serve_json_string (as answers write generated text)
 * parses back to the same bytes, NULs included. */
static void round_trip(const rx_serve_request *r) {
  char *lit = serve_json_string(r->prompt, r->prompt_len);
  if (!lit) abort();
  size_t n = strlen(lit);
  char *body = malloc(n + 16);
  if (!body) abort();
  n = (size_t)sprintf(body, "{\"prompt\":%s}", lit);
  free(lit);
  rx_serve_request back;
  rx_serve_error e;
  if (serve_parse(body, n, false, MODEL_NAME, NULL, &back, &e)) {
    if (back.prompt_len != r->prompt_len || memcmp(back.prompt, r->prompt, r->prompt_len)) abort();
    serve_request_free(&back);
  } else if (!strstr(e.msg, "not UTF-8")) {
    abort(); /* only a prompt holding every non-UTF-8 byte and a NUL may be refused */
  }
  free(body);
}

/* The OpenAI fields (request.c's known_fields) in their documented ranges, and each prompt of a
 * list either text or ids. */
static void check_fields(const rx_serve_request *r, bool may_have_nul) {
  if (r->n < 1 || r->n > RX_SERVE_MAX_N || r->nstop > RX_LLM_MAX_STOP || r->top_logprobs < 0 ||
      r->top_logprobs > RX_LLM_MAX_TOP_LOGPROBS || (r->echo && r->logprobs))
    abort();
  if (!(r->sp.presence_penalty >= -2 && r->sp.presence_penalty <= 2) ||
      !(r->sp.frequency_penalty >= -2 && r->sp.frequency_penalty <= 2))
    abort();
  if (r->sp.nbiases != r->nbias || (r->nbias && r->sp.biases != r->logit_bias)) abort();
  for (size_t i = 0; i < r->nbias; i++)
    if (r->logit_bias[i].id < 0 || !(r->logit_bias[i].bias >= -100 && r->logit_bias[i].bias <= 100))
      abort();
  for (size_t i = 0; i < r->nstop; i++)
    if (!r->stop[i] || !r->stop[i][0]) abort();
  if (r->nprompts > RX_SERVE_MAX_PROMPTS || (int64_t)r->nprompts * r->n > RX_SERVE_MAX_CHOICES)
    abort();
  for (size_t i = 0; i < r->nprompts; i++) {
    const rx_serve_prompt *p = &r->prompts[i];
    if (!p->text == !p->ids || (p->ids && !p->nids)) abort();
    for (size_t k = 0; p->ids && k < p->nids; k++)
      if (p->ids[k] < 0) abort();
    if (p->text && (p->text[p->len] != 0 || (!may_have_nul && memchr(p->text, 0, p->len)))) abort();
  }
}

static void check_accepted(const rx_serve_request *r, bool may_have_nul) {
  check_fields(r, may_have_nul);
  if (!r->prompt && r->nprompts && r->prompts[0].ids) return; /* a prompt of ids */
  if (!r->prompt || r->prompt[r->prompt_len] != 0) abort();
  if (!may_have_nul && memchr(r->prompt, 0, r->prompt_len)) abort();
  if (!(r->sp.temperature >= 0 && r->sp.temperature <= 2)) abort();
  round_trip(r);
  if (!(r->sp.top_p > 0 && r->sp.top_p <= 1) || r->sp.top_k < 0) abort();
  if (r->has_max_tokens != (r->max_tokens > 0) || r->max_tokens < 0) abort();
  if (!tok) return;
  int32_t *ids = NULL;
  size_t n = 0;
  size_t len = r->prompt_len < TEXT_MAX ? r->prompt_len : TEXT_MAX;
  rx_status s = rx_tokenizer_encode(tok, r->prompt, len, RX_TOKENIZER_ADD_SPECIAL, &ids, &n);
  if (s) {
    rx_status_free(s);
    return;
  }
  for (size_t i = 0; i < n; i++)
    if (ids[i] < 0 || ids[i] >= rx_tokenizer_vocab_size(tok)) abort();
  rx_llm_free(ids);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static bool loaded;
  if (!loaded) {
    load_tokenizer();
    loaded = true;
  }
  const char *bytes = (const char *)data;
  const char *nl = memchr(bytes, '\n', size);
  char method[16] = "POST", url[256] = "/v1/completions";
  const char *body = bytes;
  size_t len = size;
  if (nl) {
    size_t line = (size_t)(nl - bytes);
    const char *sp = memchr(bytes, ' ', line);
    size_t ml = sp ? (size_t)(sp - bytes) : line;
    size_t ul = sp ? line - ml - 1 : 0;
    if (ml >= sizeof method || ul >= sizeof url || memchr(bytes, 0, line)) return 0;
    memcpy(method, bytes, ml);
    method[ml] = 0;
    memcpy(url, sp ? sp + 1 : "", ul);
    url[ul] = 0;
    body = nl + 1;
    len = size - line - 1;
  }
  rx_serve_error e;
  rx_serve_route route = serve_route_of(method, url, &e);
  if (route == RX_SERVE_REFUSED && ((e.status != 404 && e.status != 405) || !e.msg[0])) abort();
  if (route != RX_SERVE_COMPLETION && route != RX_SERVE_CHAT) return 0;
  if (len > RX_SERVE_MAX_BODY) return 0; /* the server answers 413 before parsing */
  /* the NULs a prompt may hold: those the body wrote as \u0000 or as raw bytes */
  bool nul = memchr(body, 0, len) != NULL;
  for (size_t i = 0; !nul && i + 6 <= len; i++)
    if (body[i] == '\\') nul = !memcmp(body + i + 1, "u0000", 5), i++;
  rx_serve_request r;
  if (serve_parse(body, len, route == RX_SERVE_CHAT, MODEL_NAME, NULL, &r, &e)) {
    check_accepted(&r, nul);
    serve_request_free(&r);
  } else if ((e.status != 400 && e.status != 404) || !e.msg[0]) {
    abort();
  }
  return 0;
}
