/* relaxc serve's requests without the model, the network or a GPU (tools/serve/request.c): routes;
 * bodies parsed and checked, each refusal with its status, field and message; NULs kept in
 * prompts ("\u0000" escaped, raw, and in chat messages, never cut at) and in generated text put
 * into answers (serve_json_string). test_serve runs the same through the server on Vulkan. */
#include "check.h"
#include "tools/serve/request.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void routes(void) {
  struct {
    const char *method, *url;
    rx_serve_route route;
    unsigned status;
  } cases[] = {
      {"POST", "/v1/completions", RX_SERVE_COMPLETION, 0},
      {"POST", "/v1/chat/completions", RX_SERVE_CHAT, 0},
      {"GET", "/health", RX_SERVE_HEALTH, 0},
      {"GET", "/v1/models", RX_SERVE_MODELS, 0},
      {"GET", "/v1/completions", RX_SERVE_REFUSED, 405},
      {"POST", "/v1/models", RX_SERVE_REFUSED, 405},
      {"POST", "/v1/nothing", RX_SERVE_REFUSED, 404},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    rx_serve_error e = {0};
    rx_serve_route r = serve_route_of(cases[i].method, cases[i].url, &e);
    CHECK_MSG(r == cases[i].route && (r != RX_SERVE_REFUSED ||
                                      (e.status == cases[i].status && strstr(e.msg, cases[i].url))),
              "%s %s: route %d status %u '%s'", cases[i].method, cases[i].url, (int)r, e.status,
              e.msg);
  }
}

/* A body that parses: its prompt must be the len bytes of want. */
static void kept(const char *body, size_t blen, bool chat, const char *want, size_t len) {
  rx_serve_request r;
  rx_serve_error e;
  bool ok = serve_parse(body, blen, chat, "kjv", NULL, &r, &e);
  CHECK_MSG(ok && r.prompt_len == len && !memcmp(r.prompt, want, len) && !r.prompt[len],
            "%.*s: %s; prompt of %zu bytes, %zu expected", (int)blen, body, ok ? "parsed" : e.msg,
            ok ? r.prompt_len : 0, len);
  if (ok) serve_request_free(&r);
}

static void nuls(void) {
  static const char esc[] = "{\"prompt\": \"a\\u0000b\"}";
  kept(esc, sizeof esc - 1, false, "a\0b", 3);
  static const char two[] = "{\"prompt\": \"\\u0000\\u0000x\\u0000\"}";
  kept(two, sizeof two - 1, false, "\0\0x\0", 4);
  /* an escaped backslash before u0000 is text, not a NUL */
  static const char text[] = "{\"prompt\": \"a\\\\u0000b\"}";
  kept(text, sizeof text - 1, false, "a\\u0000b", 8);
  static const char raw[] = "{\"prompt\": \"a\0b\"}";
  kept(raw, sizeof raw - 1, false, "a\0b", 3);
  static const char chat[] = "{\"messages\": [{\"role\": \"user\", \"content\": \"x\\u0000y\"}]}";
  static const char want_chat[] = "user: x\0y\nassistant:";
  kept(chat, sizeof chat - 1, true, want_chat, sizeof want_chat - 1);
  /* UTF-8 around a NUL stays as it is */
  static const char utf8[] = "{\"prompt\": \"\xc3\xa9\\u0000\\u00e9\"}";
  kept(utf8, sizeof utf8 - 1, false, "\xc3\xa9\0\xc3\xa9", 5);
  /* a body that holds every byte that never occurs in UTF-8 leaves no sentinel: refused by name */
  static const char full[] =
      "{\"prompt\": \"\\u0000\xc0\xc1\xf5\xf6\xf7\xf8\xf9\xfa\xfb\xfc\xfd\xfe\xff\"}";
  rx_serve_request r;
  rx_serve_error e;
  bool ok = serve_parse(full, sizeof full - 1, false, "kjv", NULL, &r, &e);
  CHECK_MSG(!ok && e.status == 400 && e.param && !strcmp(e.param, "prompt") && strstr(e.msg, "NUL"),
            "a NUL in a body that is not UTF-8: %s", ok ? "parsed" : e.msg);
  if (ok) serve_request_free(&r);
}

static void refusals(void) {
  struct {
    const char *body;
    bool chat;
    unsigned status;
    const char *param, *says;
  } cases[] = {
      {"{\"prompt\": \"x\",", false, 400, NULL, "malformed JSON"},
      {"[1]", false, 400, NULL, "must be a JSON object"},
      {"{\"prompt\": 3}", false, 400, "prompt", "'prompt' must be a string"},
      {"{\"prompt\": \"a\", \"temperature\": \"hot\"}", false, 400, "temperature", "a number"},
      {"{\"prompt\": \"a\", \"temperature\": 3}", false, 400, "temperature", "outside [0, 2]"},
      {"{\"prompt\": \"a\", \"max_tokens\": 2.5}", false, 400, "max_tokens", "an integer"},
      {"{\"prompt\": \"a\", \"max_tokens\": 1e49}", false, 400, "max_tokens",
       "'max_tokens' is 1e+49, outside [1, 1e+15]"},
      {"{\"prompt\": \"a\", \"seed\": -1e300}", false, 400, "seed", "outside"},
      {"{\"prompt\": \"a\", \"model\": \"gpt-9\"}", false, 404, "model", "model 'gpt-9' not found"},
      {"{\"prompt\": \"a\", \"stream\": 1}", false, 400, "stream", "a boolean"},
      {"{\"prompt\": \"a\", \"stop\": 3}", false, 400, "stop", "a string or a list"},
      {"{\"prompt\": \"a\", \"stop\": [\"\"]}", false, 400, "stop", "non-empty strings"},
      {"{\"prompt\": \"a\", \"stop\": [\"a\", \"b\", \"c\", \"d\", \"e\"]}", false, 400, "stop",
       "5 strings, more than 4"},
      {"{\"prompt\": \"a\", \"suffix\": \"z\"}", false, 400, "suffix",
       "'suffix' is not supported by relaxc serve's /v1/completions endpoint"},
      {"{\"prompt\": \"a\", \"best_of\": 2}", false, 400, "best_of", "outside [1, 1]"},
      {"{\"prompt\": \"a\", \"messages\": []}", false, 400, "messages", "not supported"},
      {"{\"prompt\": \"a\", \"top_logprobs\": 2}", false, 400, "top_logprobs", "not supported"},
      {"{\"prompt\": \"a\", \"n\": 17}", false, 400, "n", "outside [1, 16]"},
      {"{\"prompt\": \"a\", \"logprobs\": 6}", false, 400, "logprobs", "outside [0, 5]"},
      {"{\"prompt\": \"a\", \"logprobs\": 2, \"echo\": true}", false, 400, "echo",
       "prefill gives only the last position's logits"},
      {"{\"prompt\": \"a\", \"presence_penalty\": 2.5}", false, 400, "presence_penalty",
       "outside [-2, 2]"},
      {"{\"prompt\": \"a\", \"logit_bias\": {\"x\": 1}}", false, 400, "logit_bias",
       "key 'x' is not a token id"},
      {"{\"prompt\": \"a\", \"logit_bias\": {\"5\": 101}}", false, 400, "logit_bias",
       "in [-100, 100]"},
      {"{\"prompt\": \"a\", \"stream_options\": {\"include_usage\": true}}", false, 400,
       "stream_options", "only allowed with 'stream': true"},
      {"{\"prompt\": \"a\", \"stream\": true, \"stream_options\": {\"x\": 1}}", false, 400,
       "stream_options", "'stream_options.x' is not supported"},
      {"{\"prompt\": [1, -2]}", false, 400, "prompt", "not a token id"},
      {"{\"prompt\": [[1], \"a\"]}", false, 400, "prompt", "item 1 is neither"},
      {"{\"prompt\": []}", false, 400, "prompt", "0 prompts"},
      {"{\"prompt\": [\"a\", \"b\"], \"n\": 16, \"x\": null}", true, 400, "prompt",
       "not supported by relaxc serve's /v1/chat/completions"},
      {"{\"messages\": [{\"role\": \"user\", \"content\": \"a\"}], \"top_logprobs\": 2}", true, 400,
       "top_logprobs", "needs 'logprobs': true"},
      {"{\"messages\": [{\"role\": \"user\", \"content\": \"a\"}], \"echo\": true}", true, 400,
       "echo", "not supported"},
      {"{\"messages\": [{\"role\": \"user\", \"content\": \"a\"}], \"store\": true}", true, 400,
       "store", "keeps nothing"},
      {"{\"messages\": []}", true, 400, "messages", "non-empty array"},
      {"{\"messages\": [{\"role\": 3}]}", true, 400, "messages", "messages[0] needs"},
      {"{\"messages\": [{\"role\": \"user\", \"content\": 5}]}", true, 400, "messages",
       "'content' must be a string, a list of parts or null"},
      {"{\"messages\": [{\"role\": \"user\", \"content\": [{\"type\": \"image\"}]}]}", true, 400,
       "messages", "without a chat template"},
      {"{\"messages\": [{\"role\": \"user\", \"content\": \"a\"}], \"tools\": 1}", true, 400,
       "tools", "'tools' must be an array"},
      {"{\"prompt\": \"a\", \"response_format\": \"json\"}", false, 400, "response_format",
       "must be an object with a 'type'"},
      {"{\"prompt\": \"a\", \"response_format\": {\"type\": \"xml\"}}", false, 400,
       "response_format", "'xml'"},
      {"{\"prompt\": \"a\", \"response_format\": {\"type\": \"json_schema\"}}", false, 400,
       "response_format", "'response_format.json_schema' must be an object"},
      {"{\"prompt\": \"a\", \"response_format\": {\"type\": \"json_schema\", \"json_schema\": "
       "{\"name\": \"x\"}}}",
       false, 400, "response_format", "'response_format.json_schema.schema' must be"},
      {"{\"prompt\": \"a\", \"response_format\": {\"type\": \"json_schema\", \"json_schema\": "
       "{\"name\": 3, \"schema\": {}}}}",
       false, 400, "response_format", "name' must be a string"},
      {"{\"messages\": [{\"role\": \"user\", \"content\": \"a\"}], \"response_format\": "
       "{\"type\": \"json_schema\", \"json_schema\": {\"schema\": {}, \"strict\": 1}}}",
       true, 400, "response_format", "strict' must be a boolean"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    rx_serve_request r;
    rx_serve_error e;
    bool ok = serve_parse(cases[i].body, strlen(cases[i].body), cases[i].chat, "kjv", NULL, &r, &e);
    bool param = cases[i].param ? e.param && !strcmp(e.param, cases[i].param) : !e.param;
    CHECK_MSG(!ok && e.status == cases[i].status && param && strstr(e.msg, cases[i].says),
              "%s: %s (status %u, param %s), expected %u, %s, '%s'", cases[i].body,
              ok ? "parsed" : e.msg, e.status, e.param ? e.param : "null", cases[i].status,
              cases[i].param ? cases[i].param : "null", cases[i].says);
    if (ok) serve_request_free(&r);
  }
  /* and the fields of a good one */
  static const char good[] = "{\"model\": \"kjv\", \"prompt\": \"hi\", \"max_tokens\": 5, "
                             "\"temperature\": 0, \"top_p\": 0.5, \"top_k\": 3, \"seed\": 9, "
                             "\"stream\": true, \"stop\": []}";
  rx_serve_request r;
  rx_serve_error e;
  bool ok = serve_parse(good, sizeof good - 1, false, "kjv", NULL, &r, &e);
  CHECK_MSG(ok && r.max_tokens == 5 && r.has_max_tokens && r.stream && r.sp.temperature == 0 &&
                r.sp.top_p == 0.5f && r.sp.top_k == 3 && r.sp.seed == 9 && r.prompt_len == 2,
            "a good request: %s", ok ? "fields differ" : e.msg);
  if (ok) serve_request_free(&r);
  /* the OpenAI fields of a completions request: a list of id lists, n, stops, logprobs, ... */
  static const char full[] =
      "{\"prompt\": [[1, 2, 3], [4]], \"n\": 3, \"stop\": [\"x\", \"yz\"], \"logprobs\": 2, "
      "\"presence_penalty\": 0.5, \"frequency_penalty\": -1, \"logit_bias\": {\"7\": -100, "
      "\"9\": 2.5}, \"stream\": true, \"stream_options\": {\"include_usage\": true}, "
      "\"user\": \"u\", \"best_of\": 1, \"suffix\": null}";
  ok = serve_parse(full, sizeof full - 1, false, "kjv", NULL, &r, &e);
  CHECK_MSG(ok && r.nprompts == 2 && r.prompts[0].nids == 3 && r.prompts[1].ids[0] == 4 &&
                r.n == 3 && r.nstop == 2 && !strcmp(r.stop[1], "yz") && r.logprobs &&
                r.top_logprobs == 2 && r.sp.presence_penalty == 0.5f &&
                r.sp.frequency_penalty == -1 && r.sp.nbiases == 2 && r.sp.biases[0].id == 7 &&
                r.sp.biases[0].bias == -100 && r.sp.biases[1].bias == 2.5f && r.include_usage &&
                !r.has_seed,
            "a full completions request: %s", ok ? "fields differ" : e.msg);
  if (ok) serve_request_free(&r);
  static const char strs[] = "{\"prompt\": [\"a\", \"bc\"], \"echo\": true, \"stop\": \"q\"}";
  ok = serve_parse(strs, sizeof strs - 1, false, "kjv", NULL, &r, &e);
  CHECK_MSG(ok && r.nprompts == 2 && r.prompts[1].len == 2 && r.echo && r.nstop == 1 && r.n == 1,
            "a list of prompts: %s", ok ? "fields differ" : e.msg);
  if (ok) serve_request_free(&r);
  static const char chat[] = "{\"messages\": [{\"role\": \"user\", \"content\": \"a\"}], "
                             "\"logprobs\": true, \"top_logprobs\": 20, "
                             "\"max_completion_tokens\": 7, \"metadata\": {\"k\": \"v\"}}";
  ok = serve_parse(chat, sizeof chat - 1, true, "kjv", NULL, &r, &e);
  CHECK_MSG(ok && r.logprobs && r.top_logprobs == 20 && r.max_tokens == 7 && r.has_max_tokens,
            "a chat request's fields: %s", ok ? "fields differ" : e.msg);
  if (ok) serve_request_free(&r);
  /* response_format: text, json_object, json_schema (the schema kept as compact JSON) */
  static const char *const formats[] = {
      "{\"prompt\": \"a\", \"response_format\": {\"type\": \"text\"}}",
      "{\"prompt\": \"a\", \"response_format\": {\"type\": \"json_object\"}}",
      "{\"prompt\": \"a\", \"response_format\": {\"type\": \"json_schema\", \"json_schema\": "
      "{\"name\": \"x\", \"strict\": true, \"schema\": {\"type\" : \"object\", \"properties\": "
      "{\"a\": {\"type\": \"string\"}}}}}}"};
  static const rx_serve_format want[] = {RX_SERVE_FORMAT_TEXT, RX_SERVE_FORMAT_JSON_OBJECT,
                                         RX_SERVE_FORMAT_JSON_SCHEMA};
  for (int i = 0; i < 3; i++) {
    ok = serve_parse(formats[i], strlen(formats[i]), false, "kjv", NULL, &r, &e);
    const char *schema = "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"string\"}}}";
    CHECK_MSG(ok && r.format == want[i] &&
                  (i < 2 ? !r.schema
                         : r.schema && r.schema_len == strlen(schema) && !strcmp(r.schema, schema)),
              "response_format %d: %s", i, ok ? (r.schema ? r.schema : "no schema") : e.msg);
    if (ok) serve_request_free(&r);
  }
}

/* Generated text with a NUL reaches the answer whole (cJSON's strings would end at it). */
static void answers(void) {
  static const char text[] = "a\0b\"c\\\n\t\x01\xc3\xa9";
  char *lit = serve_json_string(text, sizeof text - 1);
  const char *want = "\"a\\u0000b\\\"c\\\\\\n\\t\\u0001\xc3\xa9\"";
  CHECK_MSG(lit && !strcmp(lit, want), "json string: %s, expected %s", lit ? lit : "(null)", want);
  free(lit);
  lit = serve_json_string("", 0);
  CHECK_MSG(lit && !strcmp(lit, "\"\""), "empty json string: %s", lit ? lit : "(null)");
  free(lit);
}

/* The chat endpoint with a model that carries a chat template: the messages rendered by it (parts
 * joined by the template, tools and chat_template_kwargs as its variables), raise_exception as a
 * 400, and the prompt's tokens with the one BOS the template wrote (the server tokenizes a
 * template's text without adding special tokens, as transformers' apply_chat_template does);
 * without a template, the fallback format with the tokenizer's BOS. */
static void templates(const char *root) {
  static const char text[] =
      "{{ bos_token }}{% for m in messages %}<|{{ m.role }}|>"
      "{% if m.content is string %}{{ m.content }}{% elif m.content %}{% for p in m.content %}"
      "{{ p.text }}{% endfor %}{% endif %}{% if m.tool_calls %}{{ m.tool_calls[0].function|tojson "
      "}}"
      "{% endif %}\n{% endfor %}{% if tools %}tools:{{ tools|length }}\n{% endif %}"
      "{% if enable_thinking is false %}no-think\n{% endif %}"
      "{% if add_generation_prompt %}<|assistant|>{% endif %}"
      "{% if messages[0].role == 'tool' %}{{ raise_exception('a tool message cannot come first') }}"
      "{% endif %}";
  rx_chat_template *t = NULL;
  CHECK_OK(rx_chat_template_parse(text, sizeof text - 1, "chat_template", "<s>", "</s>", &t));
  if (!t) return;
  static const char body[] =
      "{\"messages\": [{\"role\": \"system\", \"content\": \"Be brief.\"}, {\"role\": \"user\", "
      "\"content\": [{\"type\": \"text\", \"text\": \"In the \"}, {\"type\": \"text\", \"text\": "
      "\"beginning\"}]}, {\"role\": \"assistant\", \"content\": null, \"tool_calls\": [{\"id\": "
      "\"c1\", \"type\": \"function\", \"function\": {\"name\": \"f\", \"arguments\": {\"x\": "
      "1}}}]}],"
      " \"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"f\"}}], "
      "\"chat_template_kwargs\": {\"enable_thinking\": false}}";
  /* jinja2's rendering (trim_blocks eats the newline after each {% endif %}) */
  static const char want[] = "<s><|system|>Be brief.<|user|>In the beginning<|assistant|>"
                             "{\"name\": \"f\", \"arguments\": {\"x\": 1}}tools:1\nno-think\n"
                             "<|assistant|>";
  rx_serve_request r;
  rx_serve_error e;
  bool ok = serve_parse(body, sizeof body - 1, true, "kjv", t, &r, &e);
  CHECK_MSG(ok && r.templated && r.prompt_len == sizeof want - 1 && !strcmp(r.prompt, want),
            "templated chat: %s", ok ? r.prompt : e.msg);
  /* the tokens: the template's BOS once, then the text */
  char path[4096];
  snprintf(path, sizeof path, "%s/llm/models/kjv-llama/tokenizer.json", root);
  FILE *f = fopen(path, "rb");
  char *json = NULL;
  size_t n = 0;
  if (f) {
    fseek(f, 0, SEEK_END);
    n = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    json = malloc(n + 1);
    n = fread(json, 1, n, f);
    fclose(f);
  }
  rx_tokenizer *tok = NULL;
  CHECK_MSG(json != NULL, "%s: cannot read", path);
  if (json) CHECK_OK(rx_tokenizer_load(json, n, path, &tok));
  free(json);
  if (ok && tok) {
    int32_t *ids = NULL, *doubled = NULL;
    size_t nids = 0, ndoubled = 0, nbos = 0;
    int32_t bos = rx_tokenizer_bos_id(tok);
    CHECK_OK(rx_tokenizer_encode(tok, r.prompt, r.prompt_len, 0, &ids, &nids));
    for (size_t i = 0; i < nids; i++) nbos += ids[i] == bos;
    CHECK_MSG(bos >= 0 && nids > 1 && ids[0] == bos && nbos == 1,
              "templated prompt: %zu tokens, first %d, %zu BOS (id %d)", nids,
              ids && nids ? ids[0] : -1, nbos, bos);
    /* what adding special tokens would give: a second BOS before the template's */
    CHECK_OK(rx_tokenizer_encode(tok, r.prompt, r.prompt_len, RX_TOKENIZER_ADD_SPECIAL, &doubled,
                                 &ndoubled));
    CHECK_MSG(ndoubled == nids + 1 && doubled[0] == bos && doubled[1] == bos,
              "with special tokens added: %zu tokens", ndoubled);
    rx_llm_free(ids);
    rx_llm_free(doubled);
  }
  if (ok) serve_request_free(&r);
  /* raise_exception: a 400 on messages with its message and place */
  static const char bad[] = "{\"messages\": [{\"role\": \"tool\", \"content\": \"x\"}]}";
  ok = serve_parse(bad, sizeof bad - 1, true, "kjv", t, &r, &e);
  CHECK_MSG(!ok && e.status == 400 && e.param && !strcmp(e.param, "messages") &&
                strstr(e.msg, "raise_exception: a tool message cannot come first") &&
                strstr(e.msg, "chat_template:4:"),
            "raise_exception: %s", ok ? "parsed" : e.msg);
  if (ok) serve_request_free(&r);
  /* no template: the fallback, tokenized with the tokenizer's BOS */
  static const char plain_body[] = "{\"messages\": [{\"role\": \"user\", \"content\": [{\"type\": "
                                   "\"text\", \"text\": \"hi\"}]}]}";
  ok = serve_parse(plain_body, sizeof plain_body - 1, true, "kjv", NULL, &r, &e);
  CHECK_MSG(ok && !r.templated && !strcmp(r.prompt, "user: hi\nassistant:"), "fallback: %s",
            ok ? r.prompt : e.msg);
  if (ok && tok) {
    int32_t *ids = NULL;
    size_t nids = 0;
    CHECK_OK(
        rx_tokenizer_encode(tok, r.prompt, r.prompt_len, RX_TOKENIZER_ADD_SPECIAL, &ids, &nids));
    CHECK_MSG(nids > 1 && ids[0] == rx_tokenizer_bos_id(tok) && ids[1] != ids[0],
              "fallback prompt: BOS once");
    rx_llm_free(ids);
  }
  if (ok) serve_request_free(&r);
  rx_tokenizer_free(tok);
  rx_chat_template_free(t);
}

int main(int argc, char **argv) {
  routes();
  nuls();
  refusals();
  answers();
  templates(argc > 1 ? argv[1] : "tests");
  return check_finish("test_serve_request");
}
