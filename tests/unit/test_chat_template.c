/* tests/unit/test_chat_template.c: the chat-template engine (runtime/llm/jinja*.c) against
 * Python's jinja2. Every template of tests/chat/templates/ (written to use every construct of the
 * Llama 2, Llama 3.1, Mistral v0.1/v0.3, Qwen2.5, Qwen3, Gemma and Phi-3 templates, plus
 * constructs.jinja for the rest of the subset) is rendered with every conversation of
 * tests/chat/conversations/ and compared byte for byte with tests/chat/expected/, which
 * tests/chat/render_expected.py made with jinja2 configured as transformers configures it. A pair
 * jinja2 refused (.err) must fail here too, with raise_exception's message or the same undefined
 * attribute. Then the errors of bad templates: each names its line and column. */
#include "check.h"
#include "relaxc/llm.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NOW 1717243200 /* render_expected.py's NOW: 2024-06-01 12:00:00 UTC */

static char *slurp(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *s = malloc((size_t)n + 1);
  size_t got = fread(s, 1, (size_t)n, f);
  fclose(f);
  s[got] = 0;
  if (len) *len = got;
  return s;
}

static int cmp_names(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

/* the sorted names in dir ending in ext, NULL-terminated */
static char **list_dir(const char *dir, const char *ext, size_t *count) {
  DIR *d = opendir(dir);
  char **v = calloc(256, sizeof *v);
  size_t n = 0;
  struct dirent *e;
  while (d && (e = readdir(d)) && n < 255) {
    size_t l = strlen(e->d_name), k = strlen(ext);
    if (l > k && !strcmp(e->d_name + l - k, ext)) v[n++] = strdup(e->d_name);
  }
  if (d) closedir(d);
  qsort(v, n, sizeof *v, cmp_names);
  *count = n;
  return v;
}

static void free_list(char **v) {
  for (size_t i = 0; v[i]; i++) free(v[i]);
  free(v);
}

/* where two texts first differ, for the failure message */
static size_t first_diff(const char *a, size_t na, const char *b, size_t nb) {
  size_t i = 0;
  while (i < na && i < nb && a[i] == b[i]) i++;
  return i;
}

static void check_pair(const char *root, const char *tname, const char *cname) {
  char path[4096], stem[512];
  snprintf(path, sizeof path, "%s/chat/templates/%s", root, tname);
  size_t tlen = 0;
  char *text = slurp(path, &tlen);
  snprintf(path, sizeof path, "%s/chat/conversations/%s", root, cname);
  size_t clen = 0;
  char *ctx = slurp(path, &clen);
  snprintf(stem, sizeof stem, "%.*s__%.*s", (int)(strlen(tname) - 6), tname,
           (int)(strlen(cname) - 5), cname);
  snprintf(path, sizeof path, "%s/chat/expected/%s.txt", root, stem);
  size_t want_len = 0;
  char *want = slurp(path, &want_len), *err = NULL;
  if (!want) {
    snprintf(path, sizeof path, "%s/chat/expected/%s.err", root, stem);
    err = slurp(path, NULL);
  }
  CHECK_MSG(text && ctx && (want || err), "%s: a missing input or expected file", stem);
  rx_chat_template *t = NULL;
  rx_status s = text ? rx_chat_template_parse(text, tlen, tname, "<s>", "</s>", &t) : NULL;
  CHECK_MSG(!s, "%s: %s", tname, rx_status_message(s));
  rx_status_free(s);
  if (t && ctx && (want || err)) {
    char *got = NULL;
    size_t got_len = 0;
    s = rx_chat_template_render(t, ctx, clen, NOW, &got, &got_len);
    if (want) {
      CHECK_MSG(!s, "%s: %s", stem, rx_status_message(s));
      if (got) {
        size_t at = first_diff(got, got_len, want, want_len);
        CHECK_MSG(got_len == want_len && at == want_len,
                  "%s: differs from jinja2 at byte %zu (got %zu bytes, want %zu):\n got: "
                  "%.60s\nwant: %.60s",
                  stem, at, got_len, want_len, got + at, want + (at < want_len ? at : want_len));
      }
    } else {
      /* .err: "raise\nMESSAGE\n" or "error\nTYPE: MESSAGE\n" */
      char *nl = strchr(err, '\n'), *msg = nl ? nl + 1 : err;
      char *end = strchr(msg, '\n');
      if (end) *end = 0;
      CHECK_MSG(s != NULL, "%s: jinja2 failed (%s) but the engine rendered", stem, msg);
      const char *m = rx_status_message(s);
      if (s && !strncmp(err, "raise", 5))
        CHECK_MSG(strstr(m, "raise_exception: ") && strstr(m, msg), "%s: '%s' lacks '%s'", stem, m,
                  msg);
      if (s && !strncmp(msg, "UndefinedError: ", 16))
        CHECK_MSG(strstr(m, msg + 16) != NULL, "%s: '%s' lacks '%s'", stem, m, msg + 16);
      if (s) CHECK_MSG(strstr(m, tname) && strchr(m, ':'), "%s: '%s' names no place", stem, m);
    }
    rx_status_free(s);
    rx_llm_free(got);
  }
  rx_chat_template_free(t);
  free(text);
  free(ctx);
  free(want);
  free(err);
}

/* a template that must fail to parse or render with a message holding want */
static void check_error(const char *tmpl, const char *ctx, const char *want) {
  rx_chat_template *t = NULL;
  rx_status s = rx_chat_template_parse(tmpl, strlen(tmpl), "chat_template", "<s>", "</s>", &t);
  char *out = NULL;
  if (!s) s = rx_chat_template_render(t, ctx, strlen(ctx), NOW, &out, NULL);
  CHECK_MSG(s != NULL, "%s: no error (rendered '%s')", tmpl, out ? out : "");
  if (s)
    CHECK_MSG(strstr(rx_status_message(s), want), "%s: '%s' lacks '%s'", tmpl, rx_status_message(s),
              want);
  rx_status_free(s);
  rx_llm_free(out);
  rx_chat_template_free(t);
}

/* a small render, for checks written here */
static void check_render(const char *tmpl, const char *ctx, const char *want) {
  rx_chat_template *t = NULL;
  char *out = NULL;
  rx_status s = rx_chat_template_parse(tmpl, strlen(tmpl), "chat_template", "<s>", "</s>", &t);
  if (!s) s = rx_chat_template_render(t, ctx, strlen(ctx), NOW, &out, NULL);
  CHECK_MSG(!s, "%s: %s", tmpl, rx_status_message(s));
  if (out) CHECK_STR_EQ(out, want);
  rx_status_free(s);
  rx_llm_free(out);
  rx_chat_template_free(t);
}

static void errors(void) {
  const char *m = "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}]}";
  check_error("{% if x %}never closed", m, "chat_template:1:4: this 'if' has no end");
  check_error("a\n{{ 1 + }}", m, "chat_template:2:8: expected an expression, found '}}'");
  check_error("{% for %}{% endfor %}", m, "chat_template:1:8: expected a variable name");
  check_error("{% endif %}", m, "chat_template:1:4: an unexpected tag");
  check_error("{% frobnicate %}", m, "chat_template:1:4: expected a statement");
  check_error("{{ 'open }}", m, "chat_template:1:4: a string literal that never ends");
  check_error("{# comment", m, "chat_template:1:1: a comment that never ends");
  check_error("{{ x", m, "the template ends inside a tag (expected '}}')");
  check_error("{{ 1 $ 2 }}", m, "chat_template:1:6: unexpected character '$'");
  check_error("\n\n  {{ raise_exception('Bad role: ' ~ messages[0].role) }}", m,
              "chat_template:3:6: raise_exception: Bad role: user");
  check_error("{{ messages[0].nope.deeper }}", m,
              "chat_template:1:20: 'dict object' has no attribute 'nope'");
  check_error("{{ undefined_var.attr }}", m, "'undefined_var' is undefined");
  check_error("{{ 'a' + 1 }}", m, "unsupported operand types for +: a string and an integer");
  check_error("{{ 1 / 0 }}", m, "division by zero");
  check_error("{{ x | nofilter }}", m, "no filter named 'nofilter'");
  check_error("{{ x is notatest }}", m, "no test named 'notatest'");
  check_error("{% set y = 1 %}{% set y.a = 2 %}", m, "it is not a namespace()");
  check_error("{% macro f(a) %}{{ f(a) }}{% endmacro %}{{ f(1) }}", m, "recurses too deeply");
  check_error("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}", m,
              "MiB while rendering");
  check_error("{% for i in range(100000) %}{% for j in range(1000) %}{{ i < j < i }}{{ i < j < i "
              "}}{% endfor %}{% endfor %}",
              m, "too many steps");
  check_error(
      "{% set s = 'xxxxxxxxxxxxxxxx' %}{% for i in range(40) %}{% set s = s ~ s %}{% endfor %}", m,
      "MiB");
  check_error("{{ messages }}", "[1, 2]", "the render's context must be a JSON object");
  check_error("{{ range(05) }}", m, "chat_template:1:10: leading zeros in an integer literal");
  check_error("{{ [1]|list(2) }}", m,
              "filter 'list' takes at most 0 positional arguments, 1 given");
  check_error("{{ 3.C|int }}", m, "'int object' has no attribute 'C'");
  check_error("{{ 1.5 is in('abc') }}", m, "'in <string>' needs a string on the left, not a float");
  check_error("{{ 5 < 'a' }}", m, "'<' is not supported between an integer and a string");
  check_error("{{ none.x.y }}", m, "None has no attribute 'x'");
  /* what the engine must get right beyond the corpus */
  check_render("{{ bos_token }}{{ eos_token }}{{ add_generation_prompt }}", "{}", "<s></s>False");
  check_render("{{ bos_token }}", "{\"bos_token\": \"B\"}", "B");
  check_render("  {% if 1 %}x{% endif %}\n  y", "{}", "x  y");
  check_render("{{ 'a' }}\n{% if 1 %}\nb\n{% endif %}\n", "{}", "a\nb\n");
  check_render("{{ x }}|{{ x is defined }}|{{ x|length }}|{% for i in x %}n{% endfor %}", "{}",
               "|False|0|");
  check_render("{{ 3 }}\r\n{{ 4 }}\r\n", "{}", "3\n4");
}

int main(int argc, char **argv) {
  const char *root = argc > 1 ? argv[1] : "tests";
  char dir[4096];
  size_t nt, nc;
  snprintf(dir, sizeof dir, "%s/chat/templates", root);
  char **templates = list_dir(dir, ".jinja", &nt);
  snprintf(dir, sizeof dir, "%s/chat/conversations", root);
  char **convs = list_dir(dir, ".json", &nc);
  CHECK_MSG(nt >= 9 && nc >= 8, "the corpus: %zu templates, %zu conversations", nt, nc);
  for (size_t i = 0; i < nt; i++)
    for (size_t k = 0; k < nc; k++) check_pair(root, templates[i], convs[k]);
  free_list(templates);
  free_list(convs);
  errors();
  return check_finish("test_chat_template");
}
