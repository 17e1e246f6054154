/* runtime/llm/chat.c: a chat's messages to the prompt text (rx_chat_prompt, relaxc/llm.h), shared
 * by relaxc serve's chat endpoint and relaxc generate --chat: the model's chat template when it
 * has one (runtime/llm/jinja*.c), else the fallback format of docs/llm.md. The messages are
 * checked here, so both callers refuse the same bad ones with the same words. */
#include "base/base.h"
#include "relaxc/llm.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

/* A message's content as text for the fallback format: a string, or the text parts of a list
 * joined; NULL when it is neither (or holds another kind of part). */
static bool content_text(const cJSON *content, rx_strbuf *out) {
  if (cJSON_IsString(content)) {
    base_strbuf_append(out, content->valuestring);
    return true;
  }
  if (!content || cJSON_IsNull(content)) return true;
  if (!cJSON_IsArray(content)) return false;
  const cJSON *p;
  cJSON_ArrayForEach(p, content) {
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(p, "type");
    const cJSON *text = cJSON_GetObjectItemCaseSensitive(p, "text");
    if (!cJSON_IsString(type) || strcmp(type->valuestring, "text") || !cJSON_IsString(text))
      return false;
    base_strbuf_append(out, text->valuestring);
  }
  return true;
}

static rx_status check_messages(const cJSON *msgs) {
  if (!cJSON_IsArray(msgs) || !cJSON_GetArraySize(msgs))
    return base_status_make(RX_ERR_INVALID, "'messages' must be a non-empty array");
  int i = 0;
  const cJSON *m;
  cJSON_ArrayForEach(m, msgs) {
    const cJSON *role = cJSON_GetObjectItemCaseSensitive(m, "role");
    const cJSON *content = cJSON_GetObjectItemCaseSensitive(m, "content");
    if (!cJSON_IsObject(m) || !cJSON_IsString(role))
      return base_status_make(RX_ERR_INVALID, "messages[%d] needs a string 'role'", i);
    if (content && !cJSON_IsNull(content) && !cJSON_IsString(content) && !cJSON_IsArray(content))
      return base_status_make(
          RX_ERR_INVALID, "messages[%d]: 'content' must be a string, a list of parts or null", i);
    i++;
  }
  return NULL;
}

/* The fallback: "ROLE: CONTENT\n" per message, then "assistant:" */
static rx_status fallback(const cJSON *msgs, rx_strbuf *out) {
  int i = 0;
  const cJSON *m;
  cJSON_ArrayForEach(m, msgs) {
    base_strbuf_append(out, cJSON_GetObjectItemCaseSensitive(m, "role")->valuestring);
    base_strbuf_append(out, ": ");
    if (!content_text(cJSON_GetObjectItemCaseSensitive(m, "content"), out))
      return base_status_make(RX_ERR_INVALID,
                              "messages[%d]: without a chat template, 'content' must be a string "
                              "or a list of {\"type\": \"text\", \"text\": ...} parts",
                              i);
    base_strbuf_putc(out, '\n');
    i++;
  }
  base_strbuf_append(out, "assistant:");
  return NULL;
}

rx_status rx_chat_prompt(const rx_chat_template *t, const char *messages_json, size_t len,
                         const char *extra_json, size_t extra_len, char **out_text,
                         size_t *out_len) {
  *out_text = NULL;
  if (out_len) *out_len = 0;
  cJSON *msgs = cJSON_ParseWithLength(messages_json ? messages_json : "", messages_json ? len : 0);
  cJSON *ctx = extra_json ? cJSON_ParseWithLength(extra_json, extra_len) : cJSON_CreateObject();
  rx_status s = check_messages(msgs);
  if (!s && !cJSON_IsObject(ctx))
    s = base_status_make(RX_ERR_INVALID, "the chat's variables must be a JSON object");
  rx_strbuf out = {0};
  base_strbuf_append(&out, "");
  if (!s && !t) s = fallback(msgs, &out);
  if (!s && t) {
    cJSON_DeleteItemFromObjectCaseSensitive(ctx, "messages");
    cJSON_AddItemToObject(ctx, "messages", msgs);
    msgs = NULL;
    if (!cJSON_GetObjectItemCaseSensitive(ctx, "add_generation_prompt"))
      cJSON_AddTrueToObject(ctx, "add_generation_prompt");
    char *json = cJSON_PrintUnformatted(ctx);
    char *text = NULL;
    size_t n = 0;
    s = json ? rx_chat_template_render(t, json, strlen(json), 0, &text, &n)
             : base_status_make(RX_ERR_OUT_OF_MEMORY, "out of memory");
    free(json);
    if (!s) base_strbuf_appendn(&out, text, n);
    free(text);
  }
  cJSON_Delete(msgs);
  cJSON_Delete(ctx);
  if (s) {
    base_strbuf_free(&out);
    return s;
  }
  if (out_len) *out_len = out.len;
  *out_text = base_strbuf_take(&out);
  return NULL;
}
