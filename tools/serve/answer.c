/* relaxc serve's answer shapes (answer.h): choices and their JSON, in the shapes of OpenAI's API
 * reference: completions' text and logprobs {tokens, token_logprobs, top_logprobs, text_offset};
 * chat's message (or delta) and logprobs {content: [{token, logprob, bytes, top_logprobs}]};
 * usage {prompt_tokens, completion_tokens, total_tokens}. */
#include "tools/serve/answer.h"

#include "tools/serve/request.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* OpenAI reports a log-probability of -inf as -9999 (JSON has no infinities) */
#define LOGPROB_FLOOR (-9999.0)

bool serve_choice_append(serve_choice *c, const char *text, size_t len) {
  if (c->len + len + 1 > c->cap) {
    size_t cap = (c->len + len + 1) * 2;
    char *t = realloc(c->text, cap);
    if (!t) return false;
    c->text = t;
    c->cap = cap;
  }
  memcpy(c->text + c->len, text, len);
  c->len += len;
  c->text[c->len] = 0;
  return true;
}

/* A token's text (heap; NULL: out of memory): decoded alone, special tokens kept. */
static char *token_text(const rx_tokenizer *tok, int32_t id, size_t *len) {
  char *t = NULL;
  *len = 0;
  rx_status s = rx_tokenizer_decode(tok, &id, 1, 0, &t, len);
  rx_status_free(s);
  return s ? NULL : t;
}

bool serve_choice_token(serve_choice *c, const rx_tokenizer *tok, const rx_token_logprobs *lp) {
  if (c->ntoks == c->captoks) {
    size_t cap = c->captoks ? c->captoks * 2 : 16;
    serve_token *t = realloc(c->toks, cap * sizeof *t);
    if (!t) return false;
    c->toks = t;
    c->captoks = cap;
  }
  size_t len = 0;
  rx_llm_free(token_text(tok, lp->id, &len));
  c->toks[c->ntoks++] = (serve_token){*lp, c->tok_offset};
  c->tok_offset += len;
  return true;
}

void serve_choice_free(serve_choice *c) {
  free(c->text);
  free(c->toks);
}

/* Generated text (len bytes, NULs kept) as a cJSON item. */
static cJSON *text_item(const char *text, size_t len) {
  char *lit = serve_json_string(text, len);
  cJSON *item = lit ? cJSON_CreateRaw(lit) : NULL;
  free(lit);
  return item;
}

static double logprob_value(float lp) { return isinf(lp) || isnan(lp) ? LOGPROB_FLOOR : lp; }

/* Chat's {token, logprob, bytes}, into o. */
static void chat_token(cJSON *o, const rx_tokenizer *tok, int32_t id, float lp) {
  size_t len = 0;
  char *t = token_text(tok, id, &len);
  cJSON_AddItemToObject(o, "token", text_item(t ? t : "", t ? len : 0));
  cJSON_AddNumberToObject(o, "logprob", logprob_value(lp));
  cJSON *bytes = cJSON_AddArrayToObject(o, "bytes");
  for (size_t i = 0; t && i < len; i++)
    cJSON_AddItemToArray(bytes, cJSON_CreateNumber((unsigned char)t[i]));
  rx_llm_free(t);
}

/* The logprobs object of tokens [from, to) of c, in the endpoint's shape. */
static cJSON *logprobs_json(const serve_answer *a, const serve_choice *c, size_t from, size_t to) {
  cJSON *o = cJSON_CreateObject();
  if (a->chat) {
    cJSON *content = cJSON_AddArrayToObject(o, "content");
    for (size_t i = from; i < to; i++) {
      const rx_token_logprobs *lp = &c->toks[i].lp;
      cJSON *e = cJSON_CreateObject(), *top;
      chat_token(e, a->tok, lp->id, lp->logprob);
      top = cJSON_AddArrayToObject(e, "top_logprobs");
      for (int32_t k = 0; k < lp->ntop; k++) {
        cJSON *t = cJSON_CreateObject();
        chat_token(t, a->tok, lp->top_ids[k], lp->top_logprobs[k]);
        cJSON_AddItemToArray(top, t);
      }
      cJSON_AddItemToArray(content, e);
    }
    return o;
  }
  cJSON *tokens = cJSON_AddArrayToObject(o, "tokens");
  cJSON *lps = cJSON_AddArrayToObject(o, "token_logprobs");
  cJSON *tops = cJSON_AddArrayToObject(o, "top_logprobs");
  cJSON *offs = cJSON_AddArrayToObject(o, "text_offset");
  for (size_t i = from; i < to; i++) {
    const rx_token_logprobs *lp = &c->toks[i].lp;
    size_t len = 0;
    char *t = token_text(a->tok, lp->id, &len);
    cJSON_AddItemToArray(tokens, text_item(t ? t : "", t ? len : 0));
    rx_llm_free(t);
    cJSON_AddItemToArray(lps, cJSON_CreateNumber(logprob_value(lp->logprob)));
    cJSON *top = cJSON_CreateObject(); /* {token: logprob}; of two ids with one text, the first */
    for (int32_t k = 0; k < lp->ntop; k++) {
      char *tt = token_text(a->tok, lp->top_ids[k], &len);
      if (tt && !cJSON_GetObjectItemCaseSensitive(top, tt))
        cJSON_AddNumberToObject(top, tt, logprob_value(lp->top_logprobs[k]));
      rx_llm_free(tt);
    }
    cJSON_AddItemToArray(tops, top);
    cJSON_AddItemToArray(offs, cJSON_CreateNumber((double)c->toks[i].offset));
  }
  return o;
}

static cJSON *head(const serve_answer *a, bool chunk) {
  cJSON *root = cJSON_CreateObject();
  cJSON_AddStringToObject(root, "id", a->id);
  cJSON_AddStringToObject(root, "object",
                          a->chat ? (chunk ? "chat.completion.chunk" : "chat.completion")
                                  : "text_completion");
  cJSON_AddNumberToObject(root, "created", (double)a->created);
  cJSON_AddStringToObject(root, "model", a->model);
  return root;
}

/* One choice: text [from, to) of c, tokens [tfrom, tto), finish (NULL: null). */
static cJSON *choice_json(const serve_answer *a, const serve_choice *c, size_t index, bool chunk,
                          size_t from, size_t to, size_t tfrom, size_t tto, const char *finish) {
  cJSON *o = cJSON_CreateObject();
  cJSON_AddNumberToObject(o, "index", (double)index);
  if (a->chat) {
    cJSON *m = cJSON_AddObjectToObject(o, chunk ? "delta" : "message");
    if (!chunk || !c->role_sent) cJSON_AddStringToObject(m, "role", "assistant");
    if (!chunk || to > from)
      cJSON_AddItemToObject(m, "content", text_item(c->text + from, to - from));
  } else {
    cJSON_AddItemToObject(o, "text", text_item(c->text ? c->text + from : "", to - from));
  }
  if (a->logprobs)
    cJSON_AddItemToObject(o, "logprobs", logprobs_json(a, c, tfrom, tto));
  else
    cJSON_AddNullToObject(o, "logprobs");
  if (finish)
    cJSON_AddStringToObject(o, "finish_reason", finish);
  else
    cJSON_AddNullToObject(o, "finish_reason");
  return o;
}

static void add_usage(cJSON *root, const serve_choice *ch, size_t n, size_t prompt_tokens) {
  size_t done = 0;
  for (size_t i = 0; i < n; i++) done += ch[i].completion_tokens;
  cJSON *u = cJSON_AddObjectToObject(root, "usage");
  cJSON_AddNumberToObject(u, "prompt_tokens", (double)prompt_tokens);
  cJSON_AddNumberToObject(u, "completion_tokens", (double)done);
  cJSON_AddNumberToObject(u, "total_tokens", (double)(prompt_tokens + done));
  /* a prompt's cached tokens are its first choice's: the n choices of one prompt share its pages
   * (the prefix cache), which is the prompt read once */
  size_t cached = 0;
  for (size_t i = 0; i < n; i++)
    if (i == 0 || ch[i].prompt != ch[i - 1].prompt) cached += ch[i].cached_tokens;
  cJSON_AddNumberToObject(cJSON_AddObjectToObject(u, "prompt_tokens_details"), "cached_tokens",
                          (double)cached);
}

cJSON *serve_answer_full(const serve_answer *a, const serve_choice *ch, size_t n,
                         size_t prompt_tokens) {
  cJSON *root = head(a, false), *arr = cJSON_AddArrayToObject(root, "choices");
  for (size_t i = 0; i < n; i++)
    cJSON_AddItemToArray(arr, choice_json(a, &ch[i], i, false, 0, ch[i].len, 0, ch[i].ntoks,
                                          ch[i].finish ? ch[i].finish : "stop"));
  add_usage(root, ch, n, prompt_tokens);
  return root;
}

cJSON *serve_answer_chunk(const serve_answer *a, serve_choice *c, size_t index,
                          const char *finish) {
  cJSON *root = head(a, true), *arr = cJSON_AddArrayToObject(root, "choices");
  cJSON_AddItemToArray(
      arr, choice_json(a, c, index, true, c->sent, c->len, c->toks_sent, c->ntoks, finish));
  c->sent = c->len;
  c->toks_sent = c->ntoks;
  c->role_sent = true;
  if (finish) c->finish_sent = true;
  return root;
}

cJSON *serve_answer_usage_chunk(const serve_answer *a, const serve_choice *ch, size_t n,
                                size_t prompt_tokens) {
  cJSON *root = head(a, true);
  cJSON_AddArrayToObject(root, "choices");
  add_usage(root, ch, n, prompt_tokens);
  return root;
}
