/* tests/fuzz/fuzz_chat_template.c: libFuzzer harness of the chat-template engine
 * (runtime/llm/jinja*.c, rx_chat_template_* and rx_chat_prompt of relaxc/llm.h).
 *
 * An input is a template's text; it is parsed and, when it parses, rendered with a fixed context
 * (a conversation of every role: system, user with list-of-parts content, assistant with
 * tool_calls, tool; tools; add_generation_prompt; enable_thinking) and through rx_chat_prompt.
 * What the engine promises and the harness checks: a parse or render either succeeds with text
 * (NUL-terminated, out_len bytes) or fails with a message that names the template's place
 * ("chat_template:LINE:COL: ..."), never a crash, a hang (the step, depth, memory and output
 * limits) or a leak; the same template renders the same text twice (no state kept between
 * renders). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "relaxc/llm.h"

static const char CONTEXT[] =
    "{\"messages\": [{\"role\": \"system\", \"content\": \"Be brief.\"}, {\"role\": \"user\", "
    "\"content\": [{\"type\": \"text\", \"text\": \"Weather in Paris?\"}, {\"type\": \"image\"}]}, "
    "{\"role\": \"assistant\", \"content\": \"\", \"tool_calls\": [{\"id\": \"call12345\", "
    "\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"arguments\": {\"city\": "
    "\"Paris\", \"days\": 2, \"hot\": 21.5, \"ok\": true, \"x\": null}}}]}, {\"role\": \"tool\", "
    "\"content\": \"sunny\"}, {\"role\": \"user\", \"content\": \"<think>é</think>ü\"}], "
    "\"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", "
    "\"parameters\": {\"type\": \"object\"}}}], \"add_generation_prompt\": true, "
    "\"enable_thinking\": false}";

static void check_error(rx_status s) {
  const char *m = rx_status_message(s);
  if (!m || strncmp(m, "chat_template:", 14)) abort(); /* every error names the place */
  rx_status_free(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size > 64 * 1024) return 0; /* real templates are a few KB */
  rx_chat_template *t = NULL;
  rx_status s =
      rx_chat_template_parse((const char *)data, size, "chat_template", "<s>", "</s>", &t);
  if (s) {
    if (t) abort();
    check_error(s);
    return 0;
  }
  char *a = NULL, *b = NULL;
  size_t na = 0, nb = 0;
  s = rx_chat_template_render(t, CONTEXT, sizeof CONTEXT - 1, 1717243200, &a, &na);
  if (s) {
    if (a) abort();
    check_error(s);
  } else {
    if (!a || a[na] != 0) abort();
    s = rx_chat_template_render(t, CONTEXT, sizeof CONTEXT - 1, 1717243200, &b, &nb);
    if (s || nb != na || memcmp(a, b, na)) abort();
  }
  rx_llm_free(a);
  rx_llm_free(b);
  /* the server's path: messages and extra variables given apart */
  static const char msgs[] =
      "[{\"role\": \"user\", \"content\": \"hi\"}, {\"role\": \"assistant\", "
      "\"content\": null}]";
  static const char extra[] = "{\"tools\": []}";
  char *p = NULL;
  s = rx_chat_prompt(t, msgs, sizeof msgs - 1, extra, sizeof extra - 1, &p, NULL);
  if (s) {
    if (p) abort();
    check_error(s);
  }
  rx_llm_free(p);
  rx_chat_template_free(t);
  return 0;
}
