/* relaxc serve's requests without the model (request.h): routes, and the fields of a body checked
 * one by one, each refusal naming its field. */
#include "tools/serve/request.h"

#include "base/base.h"

#include <cjson/cJSON.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

rx_serve_route serve_route_of(const char *method, const char *url, rx_serve_error *e) {
  e->param = NULL;
  bool chat = !strcmp(url, "/v1/chat/completions");
  bool health = !strcmp(url, "/health"), metrics = !strcmp(url, "/metrics");
  if (health || metrics || !strcmp(url, "/v1/models")) {
    if (strcmp(method, "GET")) {
      e->status = 405;
      snprintf(e->msg, sizeof e->msg, "%s takes GET", url);
      return RX_SERVE_REFUSED;
    }
    return health ? RX_SERVE_HEALTH : metrics ? RX_SERVE_METRICS : RX_SERVE_MODELS;
  }
  if (!chat && strcmp(url, "/v1/completions")) {
    e->status = 404;
    snprintf(e->msg, sizeof e->msg, "no endpoint %s", url);
    return RX_SERVE_REFUSED;
  }
  if (strcmp(method, "POST")) {
    e->status = 405;
    snprintf(e->msg, sizeof e->msg, "%s takes POST", url);
    return RX_SERVE_REFUSED;
  }
  return chat ? RX_SERVE_CHAT : RX_SERVE_COMPLETION;
}

static bool refuse(rx_serve_error *e, const char *param, const char *fmt, ...) RX_PRINTF(3, 4);
static bool refuse(rx_serve_error *e, const char *param, const char *fmt, ...) {
  e->param = param;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(e->msg, sizeof e->msg, fmt, ap);
  va_end(ap);
  return false;
}

static bool get_number(const cJSON *root, const char *name, double lo, double hi, bool integer,
                       double *out, rx_serve_error *e) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, name);
  if (!v || cJSON_IsNull(v)) return true;
  if (!cJSON_IsNumber(v)) return refuse(e, name, "'%s' must be a number", name);
  double x = v->valuedouble;
  /* the range first: converting a double past int64_t's range is undefined (fuzz_serve) */
  if (!(x >= lo && x <= hi))
    return refuse(e, name, "'%s' is %g, outside [%g, %g]", name, x, lo, hi);
  if (integer && x != (double)(int64_t)x)
    return refuse(e, name, "'%s' must be an integer, not %g", name, x);
  *out = x;
  return true;
}

/* The chat's prompt (rx_chat_prompt): the model's template (NULL: the fallback format) over the
 * messages, with the request's tools and chat_template_kwargs (vLLM's field: enable_thinking,
 * ...) as the template's variables. */
static bool chat_prompt(const cJSON *root, const rx_chat_template *tmpl, rx_serve_request *r,
                        rx_serve_error *e) {
  const cJSON *msgs = cJSON_GetObjectItemCaseSensitive(root, "messages");
  const cJSON *kw = cJSON_GetObjectItemCaseSensitive(root, "chat_template_kwargs");
  const cJSON *tools = cJSON_GetObjectItemCaseSensitive(root, "tools");
  if (kw && !cJSON_IsNull(kw) && !cJSON_IsObject(kw))
    return refuse(e, "chat_template_kwargs", "'chat_template_kwargs' must be an object");
  if (tools && !cJSON_IsNull(tools) && !cJSON_IsArray(tools))
    return refuse(e, "tools", "'tools' must be an array");
  if (!msgs) return refuse(e, "messages", "'messages' must be a non-empty array");
  cJSON *extra = cJSON_IsObject(kw) ? cJSON_Duplicate(kw, true) : cJSON_CreateObject();
  if (extra && cJSON_IsArray(tools) && cJSON_GetArraySize(tools)) {
    cJSON_DeleteItemFromObjectCaseSensitive(extra, "tools");
    cJSON_AddItemToObject(extra, "tools", cJSON_Duplicate(tools, true));
  }
  char *mj = cJSON_PrintUnformatted(msgs), *xj = extra ? cJSON_PrintUnformatted(extra) : NULL;
  cJSON_Delete(extra);
  rx_status s =
      mj && xj ? rx_chat_prompt(tmpl, mj, strlen(mj), xj, strlen(xj), &r->prompt, &r->prompt_len)
               : NULL;
  bool ok = mj && xj;
  free(mj);
  free(xj);
  if (!ok) return refuse(e, NULL, "out of memory");
  if (s) {
    refuse(e, "messages", "%s", rx_status_message(s));
    rx_status_free(s);
    return false;
  }
  r->templated = tmpl != NULL;
  return true;
}

/* The fields relaxc serve knows (OpenAI's completions and chat references, and vLLM's top_k and
 * chat_template_kwargs), each for the endpoints that take it: any other field that is not null,
 * or one of these on the other endpoint, is a 400 naming it (never silently ignored). Fields
 * that only describe the request (user, metadata) are accepted and change nothing. */
enum { COMPL = 1, CHAT = 2, BOTH = 3 };
static const struct {
  const char *name;
  int where;
} known_fields[] = {
    {"model", BOTH},
    {"prompt", COMPL},
    {"messages", CHAT},
    {"stream", BOTH},
    {"stream_options", BOTH},
    {"max_tokens", BOTH},
    {"max_completion_tokens", CHAT},
    {"temperature", BOTH},
    {"top_p", BOTH},
    {"top_k", BOTH},
    {"n", BOTH},
    {"stop", BOTH},
    {"seed", BOTH},
    {"presence_penalty", BOTH},
    {"frequency_penalty", BOTH},
    {"logit_bias", BOTH},
    {"logprobs", BOTH},
    {"top_logprobs", CHAT},
    {"echo", COMPL},
    {"best_of", COMPL}, /* 1 only */
    {"user", BOTH},
    {"metadata", CHAT},
    {"store", CHAT}, /* false only */
    {"tools", CHAT},
    {"chat_template_kwargs", CHAT},
    {"response_format", BOTH},
};

static bool check_known(const cJSON *root, bool chat, rx_serve_error *e) {
  for (const cJSON *f = root->child; f; f = f->next) {
    if (cJSON_IsNull(f)) continue;
    size_t i = 0, n = sizeof known_fields / sizeof *known_fields;
    while (i < n && strcmp(known_fields[i].name, f->string)) i++;
    if (i < n && known_fields[i].where & (chat ? CHAT : COMPL)) continue;
    snprintf(e->param_buf, sizeof e->param_buf, "%s", f->string);
    return refuse(e, e->param_buf, "'%s' is not supported by relaxc serve's %s endpoint", f->string,
                  chat ? "/v1/chat/completions" : "/v1/completions");
  }
  return true;
}

static bool get_bool(const cJSON *root, const char *name, bool *out, rx_serve_error *e) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, name);
  if (!v || cJSON_IsNull(v)) return true;
  if (!cJSON_IsBool(v)) return refuse(e, name, "'%s' must be a boolean", name);
  *out = cJSON_IsTrue(v);
  return true;
}

/* 'stop': a string or a list of up to RX_LLM_MAX_STOP non-empty strings. */
static bool parse_stop(const cJSON *root, rx_serve_request *r, rx_serve_error *e) {
  const cJSON *stop = cJSON_GetObjectItemCaseSensitive(root, "stop");
  if (!stop || cJSON_IsNull(stop)) return true;
  if (!cJSON_IsString(stop) && !cJSON_IsArray(stop))
    return refuse(e, "stop", "'stop' must be a string or a list of strings");
  int n = cJSON_IsString(stop) ? 1 : cJSON_GetArraySize(stop);
  if (n > RX_LLM_MAX_STOP)
    return refuse(e, "stop", "'stop' has %d strings, more than %d", n, RX_LLM_MAX_STOP);
  for (int i = 0; i < n; i++) {
    const cJSON *v = cJSON_IsString(stop) ? stop : cJSON_GetArrayItem(stop, i);
    if (!cJSON_IsString(v) || !v->valuestring[0])
      return refuse(e, "stop", "'stop' must hold non-empty strings (item %d is not one)", i);
    r->stop[r->nstop++] = base_strdup(v->valuestring);
  }
  return true;
}

/* 'logit_bias': an object of token ids (as strings) to biases in [-100, 100]. */
static bool parse_logit_bias(const cJSON *root, rx_serve_request *r, rx_serve_error *e) {
  const cJSON *lb = cJSON_GetObjectItemCaseSensitive(root, "logit_bias");
  if (!lb || cJSON_IsNull(lb)) return true;
  if (!cJSON_IsObject(lb))
    return refuse(e, "logit_bias", "'logit_bias' must be an object of token ids to biases");
  int n = cJSON_GetArraySize(lb);
  r->logit_bias = base_calloc((size_t)n + 1, sizeof *r->logit_bias);
  for (const cJSON *v = lb->child; v; v = v->next) {
    char *endp = NULL;
    long id = strtol(v->string, &endp, 10);
    if (!v->string[0] || *endp || id < 0 || id > INT32_MAX)
      return refuse(e, "logit_bias", "'logit_bias' key '%s' is not a token id", v->string);
    if (!cJSON_IsNumber(v) || !(v->valuedouble >= -100 && v->valuedouble <= 100))
      return refuse(e, "logit_bias", "'logit_bias' of token %ld must be a number in [-100, 100]",
                    id);
    r->logit_bias[r->nbias++] = (rx_logit_bias){(int32_t)id, (float)v->valuedouble};
  }
  r->sp.biases = r->logit_bias;
  r->sp.nbiases = r->nbias;
  return true;
}

/* A list of token ids (item `at` of 'prompt', or -1 for 'prompt' itself). */
static bool parse_ids(const cJSON *a, int at, rx_serve_prompt *p, rx_serve_error *e) {
  int n = cJSON_GetArraySize(a);
  if (!n) return refuse(e, "prompt", "'prompt' item %d is an empty list of token ids", at);
  p->ids = base_malloc((size_t)n * sizeof *p->ids);
  for (const cJSON *v = a->child; v; v = v->next) {
    if (!cJSON_IsNumber(v) || !(v->valuedouble >= 0 && v->valuedouble <= INT32_MAX) ||
        v->valuedouble != (double)(int32_t)v->valuedouble)
      return refuse(e, "prompt", "'prompt' holds %s that is not a token id (an integer >= 0)",
                    cJSON_IsNumber(v) ? "a number" : "an item");
    p->ids[p->nids++] = (int32_t)v->valuedouble;
  }
  return true;
}

/* 'prompt': a string, a list of strings, a list of token ids, or a list of lists of ids. */
static bool parse_prompts(const cJSON *root, rx_serve_request *r, rx_serve_error *e) {
  const cJSON *p = cJSON_GetObjectItemCaseSensitive(root, "prompt");
  const char *what = "'prompt' must be a string, a list of strings, a list of token ids or a "
                     "list of lists of token ids";
  if (!cJSON_IsString(p) && !cJSON_IsArray(p)) return refuse(e, "prompt", "%s", what);
  bool ids = cJSON_IsArray(p) && cJSON_IsNumber(p->child);
  int n = cJSON_IsString(p) || ids ? 1 : cJSON_GetArraySize(p);
  if (n < 1 || n > RX_SERVE_MAX_PROMPTS)
    return refuse(e, "prompt", "'prompt' has %d prompts; 1 to %d are served", n,
                  RX_SERVE_MAX_PROMPTS);
  r->prompts = base_calloc((size_t)n, sizeof *r->prompts);
  r->nprompts = (size_t)n;
  for (int i = 0; i < n; i++) {
    const cJSON *v = cJSON_IsString(p) || ids ? p : cJSON_GetArrayItem(p, i);
    rx_serve_prompt *q = &r->prompts[i];
    if (cJSON_IsString(v)) {
      if (cJSON_IsArray(p->child)) return refuse(e, "prompt", "%s (item %d is neither)", what, i);
      q->text = base_strdup(v->valuestring);
      q->len = strlen(q->text);
    } else if (cJSON_IsArray(v) && !cJSON_IsString(p->child)) {
      if (!parse_ids(v, i, q, e)) return false;
    } else {
      return refuse(e, "prompt", "%s (item %d is neither)", what, i);
    }
  }
  if (r->prompts[0].text) {
    r->prompt = r->prompts[0].text;
    r->prompt_len = r->prompts[0].len;
  }
  return true;
}

/* logprobs, top_logprobs, echo and stream_options, each in its endpoint's shape. */
static bool parse_outputs(const cJSON *root, bool chat, rx_serve_request *r, rx_serve_error *e) {
  double x = -1;
  if (chat) {
    if (!get_bool(root, "logprobs", &r->logprobs, e)) return false;
    if (!get_number(root, "top_logprobs", 0, RX_LLM_MAX_TOP_LOGPROBS, true, &x, e)) return false;
    if (x >= 0 && !r->logprobs)
      return refuse(e, "top_logprobs", "'top_logprobs' needs 'logprobs': true");
  } else {
    if (!get_number(root, "logprobs", 0, 5, true, &x, e)) return false;
    r->logprobs = x >= 0;
    if (!get_bool(root, "echo", &r->echo, e)) return false;
    if (r->echo && r->logprobs)
      return refuse(e, "echo",
                    "'echo' with 'logprobs' needs the log-probabilities of the prompt's tokens, "
                    "and the model's prefill gives only the last position's logits");
    double best_of = 1;
    if (!get_number(root, "best_of", 1, 1, true, &best_of, e)) return false;
  }
  r->top_logprobs = x > 0 ? (int32_t)x : 0;
  const cJSON *so = cJSON_GetObjectItemCaseSensitive(root, "stream_options");
  if (so && !cJSON_IsNull(so)) {
    if (!cJSON_IsObject(so))
      return refuse(e, "stream_options", "'stream_options' must be an object");
    if (!r->stream)
      return refuse(e, "stream_options", "'stream_options' is only allowed with 'stream': true");
    for (const cJSON *f = so->child; f; f = f->next)
      if (strcmp(f->string, "include_usage") && !cJSON_IsNull(f))
        return refuse(e, "stream_options", "'stream_options.%s' is not supported", f->string);
    if (!get_bool(so, "include_usage", &r->include_usage, e)) return false;
  }
  const cJSON *md = cJSON_GetObjectItemCaseSensitive(root, "metadata");
  const cJSON *user = cJSON_GetObjectItemCaseSensitive(root, "user");
  if (md && !cJSON_IsNull(md) && !cJSON_IsObject(md))
    return refuse(e, "metadata", "'metadata' must be an object");
  if (user && !cJSON_IsNull(user) && !cJSON_IsString(user))
    return refuse(e, "user", "'user' must be a string");
  bool store = false;
  if (!get_bool(root, "store", &store, e)) return false;
  if (store)
    return refuse(e, "store", "'store': true is not supported (relaxc serve keeps nothing)");
  return true;
}

/* The sampling fields: temperature, top_p, top_k, seed, the penalties, logit_bias and n. */
static bool parse_sampling(const cJSON *root, rx_serve_request *r, rx_serve_error *e) {
  double x = 1;
  r->sp = (rx_sampler_params){.temperature = 1, .top_k = 0, .top_p = 1, .repetition_penalty = 1};
  if (!get_number(root, "temperature", 0, 2, false, &x, e)) return false;
  r->sp.temperature = (float)x;
  x = 1;
  if (!get_number(root, "top_p", 1e-9, 1, false, &x, e)) return false;
  r->sp.top_p = (float)x;
  x = 0;
  if (!get_number(root, "top_k", 0, 1e9, true, &x, e)) return false;
  r->sp.top_k = (int32_t)x;
  x = -1;
  if (!get_number(root, "seed", 0, 9007199254740992.0, true, &x, e)) return false;
  r->has_seed = x >= 0;
  r->sp.seed = x >= 0 ? (uint64_t)x : 0;
  x = 0;
  if (!get_number(root, "presence_penalty", -2, 2, false, &x, e)) return false;
  r->sp.presence_penalty = (float)x;
  x = 0;
  if (!get_number(root, "frequency_penalty", -2, 2, false, &x, e)) return false;
  r->sp.frequency_penalty = (float)x;
  x = 1;
  if (!get_number(root, "n", 1, RX_SERVE_MAX_N, true, &x, e)) return false;
  r->n = (int64_t)x;
  return parse_logit_bias(root, r, e);
}

/* response_format (both endpoints, as OpenAI's): {"type": "text"}, {"type": "json_object"} or
 * {"type": "json_schema", "json_schema": {"name": ..., "schema": {...}, "strict": ...}}. The
 * schema is compiled by the server (a schema it cannot compile is its 400). */
static bool response_format(const cJSON *root, rx_serve_request *r, rx_serve_error *e) {
  const cJSON *rf = cJSON_GetObjectItemCaseSensitive(root, "response_format");
  if (!rf || cJSON_IsNull(rf)) return true;
  const cJSON *type = cJSON_GetObjectItemCaseSensitive(rf, "type");
  if (!cJSON_IsObject(rf) || !cJSON_IsString(type))
    return refuse(e, "response_format",
                  "'response_format' must be an object with a 'type': \"text\", \"json_object\" "
                  "or \"json_schema\"");
  if (!strcmp(type->valuestring, "text")) return true;
  if (!strcmp(type->valuestring, "json_object")) {
    r->format = RX_SERVE_FORMAT_JSON_OBJECT;
    return true;
  }
  if (strcmp(type->valuestring, "json_schema"))
    return refuse(e, "response_format",
                  "'response_format.type' is '%.100s', not \"text\", \"json_object\" or "
                  "\"json_schema\"",
                  type->valuestring);
  const cJSON *js = cJSON_GetObjectItemCaseSensitive(rf, "json_schema");
  if (!cJSON_IsObject(js))
    return refuse(e, "response_format", "'response_format.json_schema' must be an object");
  const cJSON *name = cJSON_GetObjectItemCaseSensitive(js, "name");
  const cJSON *strict = cJSON_GetObjectItemCaseSensitive(js, "strict");
  const cJSON *schema = cJSON_GetObjectItemCaseSensitive(js, "schema");
  if (name && !cJSON_IsString(name))
    return refuse(e, "response_format", "'response_format.json_schema.name' must be a string");
  if (strict && !cJSON_IsBool(strict) && !cJSON_IsNull(strict))
    return refuse(e, "response_format", "'response_format.json_schema.strict' must be a boolean");
  if (!cJSON_IsObject(schema))
    return refuse(e, "response_format",
                  "'response_format.json_schema.schema' must be a JSON schema (an object)");
  if (!(r->schema = cJSON_PrintUnformatted(schema))) return refuse(e, NULL, "out of memory");
  r->schema_len = strlen(r->schema);
  r->format = RX_SERVE_FORMAT_JSON_SCHEMA;
  return true;
}

/* Checks the fields of a request's JSON object. */
static bool parse_fields(const cJSON *root, bool chat, const char *model_name,
                         const rx_chat_template *tmpl, rx_serve_request *r, rx_serve_error *e) {
  if (!cJSON_IsObject(root)) return refuse(e, NULL, "the body must be a JSON object");
  const cJSON *model = cJSON_GetObjectItemCaseSensitive(root, "model");
  if (model && !cJSON_IsNull(model)) {
    if (!cJSON_IsString(model)) return refuse(e, "model", "'model' must be a string");
    if (strcmp(model->valuestring, model_name)) {
      e->status = 404;
      return refuse(e, "model", "model '%s' not found: this server has '%s'", model->valuestring,
                    model_name);
    }
  }
  if (!check_known(root, chat, e)) return false;
  if (!get_bool(root, "stream", &r->stream, e)) return false;
  if (!parse_stop(root, r, e) || !parse_sampling(root, r, e) || !parse_outputs(root, chat, r, e))
    return false;
  double x = 0;
  if (!get_number(root, "max_tokens", 1, 1e15, true, &x, e)) return false;
  if (chat && !get_number(root, "max_completion_tokens", 1, 1e15, true, &x, e)) return false;
  r->has_max_tokens = x > 0;
  r->max_tokens = (int64_t)x;
  if (!response_format(root, r, e)) return false;
  if (chat) return chat_prompt(root, tmpl, r, e);
  if (!parse_prompts(root, r, e)) return false;
  if ((int64_t)r->nprompts * r->n > RX_SERVE_MAX_CHOICES)
    return refuse(e, "n", "%zu prompts of %lld choices each: more than %d choices in all",
                  r->nprompts, (long long)r->n, RX_SERVE_MAX_CHOICES);
  return true;
}

/* cJSON's strings end at a NUL, so a "\u0000" escape (or a raw NUL byte) would cut them. Before
 * parsing, each becomes a sentinel byte that never occurs in UTF-8 and is absent from the body
 * (*sentinel; 0 when the body has no NUL to keep, and *out is then NULL); after, the sentinels of
 * the prompt become NULs again. False if every candidate byte occurs in the body. */
static bool hide_nuls(const char *body, size_t len, char **out, unsigned char *sentinel) {
  static const unsigned char never_utf8[] = {0xff, 0xfe, 0xfd, 0xfc, 0xfb, 0xfa, 0xf9,
                                             0xf8, 0xf7, 0xf6, 0xf5, 0xc1, 0xc0};
  *out = NULL;
  *sentinel = 0;
  bool any = memchr(body, 0, len) != NULL;
  for (size_t i = 0; !any && i + 6 <= len; i++) {
    if (body[i] != '\\') continue;
    any = !memcmp(body + i + 1, "u0000", 5);
    i++; /* an escape's second byte is never the start of another */
  }
  if (!any) return true;
  bool seen[256] = {false};
  for (size_t i = 0; i < len; i++) seen[(unsigned char)body[i]] = true;
  for (size_t k = 0; k < sizeof never_utf8 && !*sentinel; k++)
    if (!seen[never_utf8[k]]) *sentinel = never_utf8[k];
  if (!*sentinel) return false;
  char *o = malloc(len + 1);
  if (!o) return false;
  size_t n = 0;
  for (size_t i = 0; i < len;) {
    if (body[i] == '\\' && i + 6 <= len && !memcmp(body + i + 1, "u0000", 5)) {
      o[n++] = (char)*sentinel;
      i += 6;
    } else if (body[i] == '\\' && i + 1 < len) {
      o[n++] = body[i++];
      o[n++] = body[i++];
    } else {
      o[n++] = body[i] ? body[i] : (char)*sentinel;
      i++;
    }
  }
  o[n] = 0;
  *out = o;
  return true;
}

bool serve_parse(const char *body, size_t len, bool chat, const char *model_name,
                 const rx_chat_template *tmpl, rx_serve_request *out, rx_serve_error *e) {
  memset(out, 0, sizeof *out);
  e->status = 400;
  e->param = NULL;
  e->msg[0] = 0;
  char *copy = NULL;
  unsigned char sentinel = 0;
  if (!hide_nuls(body ? body : "", body ? len : 0, &copy, &sentinel))
    return refuse(e, chat ? "messages" : "prompt",
                  "the body has a NUL character (\\u0000) and is not UTF-8, so relaxc serve "
                  "cannot keep the NUL");
  cJSON *root = copy ? cJSON_Parse(copy) : cJSON_ParseWithLength(body ? body : "", len);
  free(copy);
  if (!root) return refuse(e, NULL, "malformed JSON in the request body");
  bool ok = parse_fields(root, chat, model_name, tmpl, out, e);
  cJSON_Delete(root);
  if (!ok) {
    serve_request_free(out);
    return false;
  }
  for (size_t k = 0; sentinel && k < (out->nprompts ? out->nprompts : 1); k++) {
    char *t = out->nprompts ? out->prompts[k].text : out->prompt;
    size_t n = out->nprompts ? out->prompts[k].len : out->prompt_len;
    for (size_t i = 0; t && i < n; i++)
      if ((unsigned char)t[i] == sentinel) t[i] = 0;
  }
  if (sentinel && out->schema && memchr(out->schema, sentinel, out->schema_len)) {
    serve_request_free(out); /* a schema's "\u0000": not worth keeping through the sentinel */
    return refuse(e, "response_format", "the schema holds a NUL character (\\u0000)");
  }
  return true;
}

void serve_request_free(rx_serve_request *r) {
  if (!r->prompts) free(r->prompt); /* else prompts[0]'s */
  for (size_t i = 0; i < r->nprompts; i++) {
    free(r->prompts[i].text);
    free(r->prompts[i].ids);
  }
  free(r->prompts);
  for (size_t i = 0; i < r->nstop; i++) free(r->stop[i]);
  free(r->logit_bias);
  free(r->schema); /* cJSON_PrintUnformatted's: the C library's malloc (cJSON's default hooks) */
  memset(r, 0, sizeof *r);
}

char *serve_json_string(const char *s, size_t n) {
  if (n > (SIZE_MAX - 3) / 6) return NULL;
  char *o = malloc(n * 6 + 3), *w = o; /* at worst every byte becomes \u00XX */
  if (!o) return NULL;
  *w++ = '"';
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)s[i];
    const char *esc = c == '"'    ? "\\\""
                      : c == '\\' ? "\\\\"
                      : c == '\n' ? "\\n"
                      : c == '\r' ? "\\r"
                      : c == '\t' ? "\\t"
                                  : NULL;
    if (esc) {
      memcpy(w, esc, 2);
      w += 2;
    } else if (c < 0x20) {
      w += sprintf(w, "\\u%04x", c);
    } else {
      *w++ = (char)c;
    }
  }
  *w++ = '"';
  *w = 0;
  return o;
}
