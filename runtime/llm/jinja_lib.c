/* runtime/llm/jinja_lib.c: what a chat template calls (runtime/llm/jinja.h): jinja2's filters and
 * tests, Python's string, dict and list methods, the globals transformers gives a template
 * (raise_exception, strftime_now, plus jinja2's range, namespace, dict), and values printed as
 * Python prints them (str, repr) or as transformers' tojson writes them (json.dumps with
 * ensure_ascii=False). Each builtin is one small function, found by name in one table per kind.
 *
 * Case mapping and whitespace are ASCII's (Python's are Unicode's: a template that upper-cases
 * non-ASCII text differs); see docs/llm.md. */
#include "jinja.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- basics ---- */
const char *jj_kind_name(const jv *v) {
  switch (v->kind) {
  case JV_UNDEF:
    return "an undefined value";
  case JV_NONE:
    return "none";
  case JV_BOOL:
    return "a boolean";
  case JV_INT:
    return "an integer";
  case JV_FLOAT:
    return "a float";
  case JV_STR:
    return "a string";
  case JV_LIST:
    return v->tuple ? "a tuple" : "a list";
  case JV_DICT:
    return v->ns ? "a namespace" : "a dict";
  case JV_MACRO:
    return "a macro";
  case JV_FUNC:
    return "a function";
  }
  return "?";
}

size_t jj_utf8_len(const char *s, size_t n) {
  size_t k = 0;
  for (size_t i = 0; i < n; i++) k += ((unsigned char)s[i] & 0xC0) != 0x80;
  return k;
}

bool jj_truthy(const jv *v) {
  switch (v->kind) {
  case JV_UNDEF:
  case JV_NONE:
    return false;
  case JV_BOOL:
    return v->b;
  case JV_INT:
    return v->i != 0;
  case JV_FLOAT:
    return v->f != 0;
  case JV_STR:
    return v->n != 0;
  case JV_LIST:
    return v->len != 0;
  case JV_DICT:
    return v->ns || v->len != 0;
  default:
    return true;
  }
}

bool jj_equal(const jv *a, const jv *b) {
  if (a == b) return true;
  bool na = a->kind == JV_BOOL || a->kind == JV_INT || a->kind == JV_FLOAT;
  bool nb = b->kind == JV_BOOL || b->kind == JV_INT || b->kind == JV_FLOAT;
  if (na && nb) {
    if (a->kind != JV_FLOAT && b->kind != JV_FLOAT)
      return (a->kind == JV_BOOL ? a->b : a->i) == (b->kind == JV_BOOL ? b->b : b->i);
    double x = a->kind == JV_FLOAT ? a->f : a->kind == JV_BOOL ? a->b : (double)a->i;
    double y = b->kind == JV_FLOAT ? b->f : b->kind == JV_BOOL ? b->b : (double)b->i;
    return x == y;
  }
  if (a->kind != b->kind) return false;
  switch (a->kind) {
  case JV_UNDEF:
  case JV_NONE:
    return true;
  case JV_STR:
    return a->n == b->n && !memcmp(a->s, b->s, a->n);
  case JV_LIST:
    if (a->len != b->len || a->tuple != b->tuple) return false;
    for (size_t i = 0; i < a->len; i++)
      if (!jj_equal(a->items[i], b->items[i])) return false;
    return true;
  case JV_DICT:
    if (a->ns || b->ns || a->len != b->len) return false;
    for (size_t i = 0; i < a->len; i++) {
      size_t j = 0;
      while (j < b->len && !jj_equal(a->keys[i], b->keys[j])) j++;
      if (j == b->len || !jj_equal(a->items[i], b->items[j])) return false;
    }
    return true;
  case JV_MACRO:
    return a->macro == b->macro;
  case JV_FUNC:
    return a->fn == b->fn && a->self == b->self;
  default:
    return false;
  }
}

/* Python's repr of a float: the shortest digits that read back the same; fixed notation for
 * exponents -4 .. 15, else d.ddde+XX */
static void py_float(double f, rx_strbuf *b, bool json) {
  if (isnan(f)) {
    base_strbuf_append(b, json ? "NaN" : "nan");
    return;
  }
  if (isinf(f)) {
    base_strbuf_append(b, f < 0 ? (json ? "-Infinity" : "-inf") : (json ? "Infinity" : "inf"));
    return;
  }
  char buf[40];
  for (int p = 1; p <= 17; p++) {
    snprintf(buf, sizeof buf, "%.*e", p - 1, f);
    if (strtod(buf, NULL) == f) break;
  }
  /* buf: [-]d[.ddd]e[+-]XX */
  char digits[24];
  size_t nd = 0;
  const char *q = buf;
  bool neg = *q == '-';
  if (neg) q++;
  for (; *q && *q != 'e'; q++)
    if (*q != '.') digits[nd++] = *q;
  int e = atoi(q + 1);
  while (nd > 1 && digits[nd - 1] == '0') nd--;
  if (neg) base_strbuf_putc(b, '-');
  if (e >= -5 + 1 && e < 16) {
    if (e < 0) {
      base_strbuf_append(b, "0.");
      for (int k = -1; k > e; k--) base_strbuf_putc(b, '0');
      base_strbuf_appendn(b, digits, nd);
    } else {
      for (int k = 0; k <= e; k++) base_strbuf_putc(b, (size_t)k < nd ? digits[k] : '0');
      base_strbuf_putc(b, '.');
      if ((size_t)e + 1 < nd)
        base_strbuf_appendn(b, digits + e + 1, nd - (size_t)e - 1);
      else
        base_strbuf_putc(b, '0');
    }
    return;
  }
  base_strbuf_putc(b, digits[0]);
  if (nd > 1) {
    base_strbuf_putc(b, '.');
    base_strbuf_appendn(b, digits + 1, nd - 1);
  }
  base_strbuf_printf(b, "e%c%02d", e < 0 ? '-' : '+', e < 0 ? -e : e);
}

static void py_str_repr(const jv *v, rx_strbuf *b) {
  bool has1 = memchr(v->s, '\'', v->n) != NULL, has2 = memchr(v->s, '"', v->n) != NULL;
  char q = has1 && !has2 ? '"' : '\'';
  base_strbuf_putc(b, q);
  for (size_t i = 0; i < v->n; i++) {
    unsigned char ch = (unsigned char)v->s[i];
    if (ch == '\\' || ch == (unsigned char)q) {
      base_strbuf_putc(b, '\\');
      base_strbuf_putc(b, (char)ch);
    } else if (ch == '\n') {
      base_strbuf_append(b, "\\n");
    } else if (ch == '\r') {
      base_strbuf_append(b, "\\r");
    } else if (ch == '\t') {
      base_strbuf_append(b, "\\t");
    } else if (ch < 0x20 || ch == 0x7f) {
      base_strbuf_printf(b, "\\x%02x", ch);
    } else if (ch == 0xC2 && i + 1 < v->n && (unsigned char)v->s[i + 1] < 0xA0) {
      base_strbuf_printf(b, "\\x%02x", (unsigned char)v->s[++i]); /* C1 controls */
    } else {
      base_strbuf_putc(b, (char)ch);
    }
  }
  base_strbuf_putc(b, q);
}

bool jj_repr(jj_ctx *c, const jv *v, rx_strbuf *b) {
  if (++c->depth > JJ_MAX_DEPTH) return jj_fail(c, "a value nests too deeply to print"), false;
  bool ok = true;
  switch (v->kind) {
  case JV_STR:
    py_str_repr(v, b);
    break;
  case JV_LIST:
    base_strbuf_putc(b, v->tuple ? '(' : '[');
    for (size_t i = 0; ok && i < v->len; i++) {
      if (i) base_strbuf_append(b, ", ");
      ok = jj_repr(c, v->items[i], b);
    }
    if (v->tuple && v->len == 1) base_strbuf_putc(b, ',');
    base_strbuf_putc(b, v->tuple ? ')' : ']');
    break;
  case JV_DICT:
    if (v->ns) base_strbuf_append(b, "<Namespace ");
    base_strbuf_putc(b, '{');
    for (size_t i = 0; ok && i < v->len; i++) {
      if (i) base_strbuf_append(b, ", ");
      ok = jj_repr(c, v->keys[i], b);
      base_strbuf_append(b, ": ");
      ok = ok && jj_repr(c, v->items[i], b);
    }
    base_strbuf_putc(b, '}');
    if (v->ns) base_strbuf_putc(b, '>');
    break;
  case JV_UNDEF:
    base_strbuf_append(b, "Undefined");
    break; /* jinja2's repr of Undefined */
  default:
    ok = jj_str_of(c, v, b);
  }
  if (b->len > JJ_MAX_OUTPUT) return jj_fail(c, "a value too long to print"), false;
  c->depth--;
  return ok;
}

bool jj_str_of(jj_ctx *c, const jv *v, rx_strbuf *b) {
  switch (v->kind) {
  case JV_UNDEF:
    return true;
  case JV_NONE:
    base_strbuf_append(b, "None");
    return true;
  case JV_BOOL:
    base_strbuf_append(b, v->b ? "True" : "False");
    return true;
  case JV_INT:
    base_strbuf_printf(b, "%lld", (long long)v->i);
    return true;
  case JV_FLOAT:
    py_float(v->f, b, false);
    return true;
  case JV_STR:
    base_strbuf_appendn(b, v->s, v->n);
    return true;
  case JV_MACRO:
    base_strbuf_printf(b, "<Macro '%s'>", v->macro->name);
    return true;
  case JV_FUNC:
    base_strbuf_printf(b, "<built-in function %s>", v->fname);
    return true;
  default:
    return jj_repr(c, v, b);
  }
}

jv *jj_to_string(jj_ctx *c, const jv *v) {
  if (v->kind == JV_STR) return (jv *)v;
  rx_strbuf b = {0};
  base_strbuf_append(&b, "");
  jv *r = jj_str_of(c, v, &b) ? jj_str(c, b.data, b.len) : NULL;
  base_strbuf_free(&b);
  return r;
}

static void json_string(const char *s, size_t n, rx_strbuf *b) {
  base_strbuf_putc(b, '"');
  for (size_t i = 0; i < n; i++) {
    unsigned char ch = (unsigned char)s[i];
    switch (ch) {
    case '"':
      base_strbuf_append(b, "\\\"");
      break;
    case '\\':
      base_strbuf_append(b, "\\\\");
      break;
    case '\n':
      base_strbuf_append(b, "\\n");
      break;
    case '\r':
      base_strbuf_append(b, "\\r");
      break;
    case '\t':
      base_strbuf_append(b, "\\t");
      break;
    case '\b':
      base_strbuf_append(b, "\\b");
      break;
    case '\f':
      base_strbuf_append(b, "\\f");
      break;
    default:
      if (ch < 0x20)
        base_strbuf_printf(b, "\\u%04x", ch);
      else
        base_strbuf_putc(b, (char)ch);
    }
  }
  base_strbuf_putc(b, '"');
}

static void newline_indent(rx_strbuf *b, int indent, int level) {
  base_strbuf_putc(b, '\n');
  for (int k = 0; k < indent * level; k++) base_strbuf_putc(b, ' ');
}

/* a dict key as json.dumps writes it (strings; numbers, booleans and None as their text) */
static bool json_key(jj_ctx *c, const jv *k, rx_strbuf *b) {
  rx_strbuf t = {0};
  base_strbuf_append(&t, "");
  switch (k->kind) {
  case JV_STR:
    base_strbuf_appendn(&t, k->s, k->n);
    break;
  case JV_INT:
    base_strbuf_printf(&t, "%lld", (long long)k->i);
    break;
  case JV_FLOAT:
    py_float(k->f, &t, true);
    break;
  case JV_BOOL:
    base_strbuf_append(&t, k->b ? "true" : "false");
    break;
  case JV_NONE:
    base_strbuf_append(&t, "null");
    break;
  default:
    base_strbuf_free(&t);
    return jj_fail(c, "tojson: keys must be strings, not %s", jj_kind_name(k)), false;
  }
  json_string(t.data, t.len, b);
  base_strbuf_free(&t);
  return true;
}

static int cmp_keys(const jv *a, const jv *b) {
  if (a->kind == JV_STR && b->kind == JV_STR) {
    size_t m = a->n < b->n ? a->n : b->n;
    int r = memcmp(a->s, b->s, m);
    return r ? r : (a->n > b->n) - (a->n < b->n);
  }
  return 0;
}

bool jj_json(jj_ctx *c, const jv *v, int indent, bool sort_keys, int level, rx_strbuf *b) {
  if (level > JJ_MAX_DEPTH) return jj_fail(c, "tojson: a value nests too deeply"), false;
  if (b->len > JJ_MAX_OUTPUT) return jj_fail(c, "tojson: the text passes the output limit"), false;
  switch (v->kind) {
  case JV_NONE:
    base_strbuf_append(b, "null");
    return true;
  case JV_BOOL:
    base_strbuf_append(b, v->b ? "true" : "false");
    return true;
  case JV_INT:
    base_strbuf_printf(b, "%lld", (long long)v->i);
    return true;
  case JV_FLOAT:
    py_float(v->f, b, true);
    return true;
  case JV_STR:
    json_string(v->s, v->n, b);
    return true;
  case JV_LIST:
    if (!v->len) {
      base_strbuf_append(b, "[]");
      return true;
    }
    base_strbuf_putc(b, '[');
    for (size_t i = 0; i < v->len; i++) {
      if (i) base_strbuf_append(b, indent >= 0 ? "," : ", ");
      if (indent >= 0) newline_indent(b, indent, level + 1);
      if (!jj_json(c, v->items[i], indent, sort_keys, level + 1, b)) return false;
    }
    if (indent >= 0) newline_indent(b, indent, level);
    base_strbuf_putc(b, ']');
    return true;
  case JV_DICT: {
    if (v->ns) return jj_fail(c, "tojson: a namespace is not JSON serializable"), false;
    if (!v->len) {
      base_strbuf_append(b, "{}");
      return true;
    }
    size_t *order = jj_alloc(c, v->len * sizeof *order);
    if (!order) return false;
    for (size_t i = 0; i < v->len; i++) order[i] = i;
    if (sort_keys) /* insertion sort: stable, and dicts in templates are small */
      for (size_t i = 1; i < v->len; i++)
        for (size_t j = i; j > 0 && cmp_keys(v->keys[order[j - 1]], v->keys[order[j]]) > 0; j--) {
          size_t t = order[j];
          order[j] = order[j - 1];
          order[j - 1] = t;
        }
    base_strbuf_putc(b, '{');
    for (size_t k = 0; k < v->len; k++) {
      size_t i = order[k];
      if (k) base_strbuf_append(b, indent >= 0 ? "," : ", ");
      if (indent >= 0) newline_indent(b, indent, level + 1);
      if (!json_key(c, v->keys[i], b)) return false;
      base_strbuf_append(b, ": ");
      if (!jj_json(c, v->items[i], indent, sort_keys, level + 1, b)) return false;
    }
    if (indent >= 0) newline_indent(b, indent, level);
    base_strbuf_putc(b, '}');
    return true;
  }
  default:
    return jj_fail(c, "tojson: %s is not JSON serializable", jj_kind_name(v)), false;
  }
}

jv *jj_iter_list(jj_ctx *c, jv *v) {
  switch (v->kind) {
  case JV_LIST:
    return v;
  case JV_UNDEF:
    return jj_list(c);
  case JV_DICT: {
    if (v->ns) break;
    jv *l = jj_list(c);
    for (size_t i = 0; l && i < v->len; i++)
      if (!jj_push(c, l, v->keys[i])) return NULL;
    return l;
  }
  case JV_STR: {
    jv *l = jj_list(c);
    for (size_t i = 0; l && i < v->n;) {
      size_t j = i + 1;
      while (j < v->n && ((unsigned char)v->s[j] & 0xC0) == 0x80) j++;
      if (!jj_push(c, l, jj_str(c, v->s + i, j - i))) return NULL;
      i = j;
    }
    return l;
  }
  default:
    break;
  }
  return jj_fail(c, "%s is not iterable", jj_kind_name(v));
}

/* ---- argument helpers ---- */
/* the argument named name: positional index pos, or the keyword; NULL when absent */
static jv *arg(jv **args, size_t n, const char **kn, jv **kv, size_t nk, size_t pos,
               const char *name) {
  if (pos < n) return args[pos];
  for (size_t k = 0; k < nk; k++)
    if (!strcmp(kn[k], name)) return kv[k];
  return NULL;
}

static bool need_str(jj_ctx *c, const jv *v, const char *what) {
  if (v && v->kind == JV_STR) return true;
  jj_fail(c, "%s needs a string, not %s", what, v ? jj_kind_name(v) : "nothing");
  return false;
}

static bool is_space(unsigned char ch) {
  return ch == ' ' || (ch >= '\t' && ch <= '\r') || (ch >= 0x1c && ch <= 0x1f);
}

static bool in_set(unsigned char ch, const jv *chars) {
  if (!chars) return is_space(ch);
  return memchr(chars->s, ch, chars->n) != NULL;
}

/* strip (which: 1 left, 2 right, 3 both), chars NULL: whitespace. chars are matched byte by byte
 * (exact for ASCII sets, the ones templates use) */
static jv *strip(jj_ctx *c, const jv *s, const jv *chars, int which) {
  size_t a = 0, e = s->n;
  if (which & 1)
    while (a < e && in_set((unsigned char)s->s[a], chars)) a++;
  if (which & 2)
    while (e > a && in_set((unsigned char)s->s[e - 1], chars)) e--;
  return jj_str(c, s->s + a, e - a);
}

static jv *case_map(jj_ctx *c, const jv *s,
                    int mode) { /* 0 lower, 1 upper, 2 capitalize, 3 title */
  jv *r = jj_str(c, s->s, s->n);
  if (!r) return NULL;
  char *p = (char *)r->s;
  bool prev_cased = false;
  for (size_t i = 0; i < r->n; i++) {
    char ch = p[i];
    bool alpha = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z');
    bool up = mode == 1 || (mode == 2 && i == 0) || (mode == 3 && !prev_cased);
    if (alpha) p[i] = up ? (char)(ch & ~0x20) : (char)(ch | 0x20);
    prev_cased = alpha || ((unsigned char)ch >= 0x80);
  }
  return r;
}

/* jinja2's title filter: each word (split at whitespace and -({[<) capitalized */
static jv *title_filter(jj_ctx *c, const jv *s) {
  jv *r = jj_str(c, s->s, s->n);
  if (!r) return NULL;
  char *p = (char *)r->s;
  bool start = true;
  for (size_t i = 0; i < r->n; i++) {
    char ch = p[i];
    bool sep = is_space((unsigned char)ch) || strchr("-({[<", ch);
    if (sep && ch) {
      start = true;
      continue;
    }
    if (ch >= 'A' && ch <= 'Z' && !start) p[i] = (char)(ch | 0x20);
    if (ch >= 'a' && ch <= 'z' && start) p[i] = (char)(ch & ~0x20);
    start = false;
  }
  return r;
}

static jv *replace(jj_ctx *c, const jv *s, const jv *old, const jv *new_, int64_t count) {
  rx_strbuf b = {0};
  base_strbuf_append(&b, "");
  size_t i = 0;
  int64_t done = 0;
  if (!old->n) { /* Python inserts new_ around every character */
    size_t chars = 0;
    for (; i <= s->n; i++) {
      bool boundary = i == s->n || ((unsigned char)s->s[i] & 0xC0) != 0x80;
      if (boundary && (count < 0 || done < count) && chars <= s->n) {
        base_strbuf_appendn(&b, new_->s, new_->n);
        done++;
      }
      if (i < s->n) base_strbuf_putc(&b, s->s[i]);
      chars++;
      if (b.len > JJ_MAX_OUTPUT) break;
    }
  } else {
    while (i < s->n) {
      if ((count < 0 || done < count) && i + old->n <= s->n && !memcmp(s->s + i, old->s, old->n)) {
        base_strbuf_appendn(&b, new_->s, new_->n);
        i += old->n;
        done++;
        if (b.len > JJ_MAX_OUTPUT) break;
      } else {
        base_strbuf_putc(&b, s->s[i++]);
      }
    }
  }
  jv *r = b.len > JJ_MAX_OUTPUT ? jj_fail(c, "replace: the text passes the output limit")
                                : jj_str(c, b.data, b.len);
  base_strbuf_free(&b);
  return r;
}

/* str.split(sep=None, maxsplit=-1) (rsplit when right) */
static jv *split(jj_ctx *c, const jv *s, const jv *sep, int64_t maxsplit, bool right) {
  jv *l = jj_list(c);
  if (!l) return NULL;
  if (sep && sep->kind == JV_STR && !sep->n) return jj_fail(c, "split: empty separator");
  if (!sep || sep->kind != JV_STR) { /* runs of whitespace; no empty pieces */
    size_t i = 0;
    int64_t done = 0;
    if (right) { /* rare in templates: only without maxsplit */
      if (maxsplit >= 0) return jj_fail(c, "rsplit with maxsplit needs a separator here");
    }
    while (i < s->n) {
      while (i < s->n && is_space((unsigned char)s->s[i])) i++;
      if (i >= s->n) break;
      size_t j = i;
      if (maxsplit >= 0 && done >= maxsplit) {
        j = s->n;
        while (j > i && is_space((unsigned char)s->s[j - 1])) j--;
      } else {
        while (j < s->n && !is_space((unsigned char)s->s[j])) j++;
      }
      if (!jj_push(c, l, jj_str(c, s->s + i, j - i))) return NULL;
      done++;
      i = j;
    }
    return l;
  }
  /* pieces between occurrences; right: from the end */
  size_t starts[2] = {0, 0};
  (void)starts;
  if (!right) {
    size_t i = 0, from = 0;
    int64_t done = 0;
    while (i + sep->n <= s->n && (maxsplit < 0 || done < maxsplit)) {
      if (!memcmp(s->s + i, sep->s, sep->n)) {
        if (!jj_push(c, l, jj_str(c, s->s + from, i - from))) return NULL;
        i += sep->n;
        from = i;
        done++;
      } else {
        i++;
      }
    }
    return jj_push(c, l, jj_str(c, s->s + from, s->n - from)) ? l : NULL;
  }
  jv *rev = jj_list(c);
  size_t end = s->n;
  int64_t done = 0;
  size_t i = s->n;
  while (rev && i >= sep->n && (maxsplit < 0 || done < maxsplit)) {
    if (!memcmp(s->s + i - sep->n, sep->s, sep->n)) {
      if (!jj_push(c, rev, jj_str(c, s->s + i, end - i))) return NULL;
      i -= sep->n;
      end = i;
      done++;
    } else {
      i--;
    }
  }
  if (!rev || !jj_push(c, rev, jj_str(c, s->s, end))) return NULL;
  for (size_t k = rev->len; k-- > 0;)
    if (!jj_push(c, l, rev->items[k])) return NULL;
  return l;
}

static bool affix(const jv *s, const jv *a, bool end) {
  if (a->n > s->n) return false;
  return !memcmp(s->s + (end ? s->n - a->n : 0), a->s, a->n);
}

/* ---- methods: obj.name(...) ---- */
typedef struct method {
  const char *name;
  jv_kind on;
  jj_fn fn;
} method;

#define METHOD(name)                                                                               \
  static jv *m_##name(jj_ctx *c, jv *self, jv **args, size_t n, const char **kn, jv **kv, size_t nk)
#define ARG(pos, name) arg(args, n, kn, kv, nk, pos, name)
#define UNUSED_ARGS                                                                                \
  (void)args;                                                                                      \
  (void)n;                                                                                         \
  (void)kn;                                                                                        \
  (void)kv;                                                                                        \
  (void)nk

static const jv *chars_arg(jj_ctx *c, jv *v) {
  if (!v || v->kind == JV_NONE) return NULL;
  return need_str(c, v, "strip's characters") ? v : NULL;
}
METHOD(strip) {
  jv *ch = ARG(0, "chars");
  const jv *set = chars_arg(c, ch);
  return c->failed ? NULL : strip(c, self, set, 3);
}
METHOD(lstrip) {
  jv *ch = ARG(0, "chars");
  const jv *set = chars_arg(c, ch);
  return c->failed ? NULL : strip(c, self, set, 1);
}
METHOD(rstrip) {
  jv *ch = ARG(0, "chars");
  const jv *set = chars_arg(c, ch);
  return c->failed ? NULL : strip(c, self, set, 2);
}
static int64_t int_arg(jj_ctx *c, jv *v, int64_t dflt, const char *what) {
  if (!v || v->kind == JV_NONE) return dflt;
  if (v->kind == JV_INT) return v->i;
  jj_fail(c, "%s needs an integer, not %s", what, jj_kind_name(v));
  return dflt;
}
METHOD(split) {
  int64_t m = int_arg(c, ARG(1, "maxsplit"), -1, "split's maxsplit");
  jv *sep = ARG(0, "sep");
  if (sep && sep->kind != JV_NONE && !need_str(c, sep, "split's separator")) return NULL;
  return c->failed ? NULL : split(c, self, sep, m, false);
}
METHOD(rsplit) {
  int64_t m = int_arg(c, ARG(1, "maxsplit"), -1, "rsplit's maxsplit");
  jv *sep = ARG(0, "sep");
  if (sep && sep->kind != JV_NONE && !need_str(c, sep, "rsplit's separator")) return NULL;
  return c->failed ? NULL : split(c, self, sep, m, true);
}
static jv *starts_ends(jj_ctx *c, jv *self, jv *a, bool end) {
  if (a && a->kind == JV_LIST && a->tuple) {
    for (size_t i = 0; i < a->len; i++) {
      if (!need_str(c, a->items[i], end ? "endswith" : "startswith")) return NULL;
      if (affix(self, a->items[i], end)) return jj_bool(c, true);
    }
    return jj_bool(c, false);
  }
  if (!need_str(c, a, end ? "endswith" : "startswith")) return NULL;
  return jj_bool(c, affix(self, a, end));
}
METHOD(startswith) {
  UNUSED_ARGS;
  return starts_ends(c, self, ARG(0, "prefix"), false);
}
METHOD(endswith) {
  UNUSED_ARGS;
  return starts_ends(c, self, ARG(0, "suffix"), true);
}
METHOD(upper) {
  UNUSED_ARGS;
  return case_map(c, self, 1);
}
METHOD(lower) {
  UNUSED_ARGS;
  return case_map(c, self, 0);
}
METHOD(capitalize) {
  UNUSED_ARGS;
  return case_map(c, self, 2);
}
METHOD(title) {
  UNUSED_ARGS;
  return case_map(c, self, 3);
}
METHOD(replace) {
  jv *a = ARG(0, "old"), *b = ARG(1, "new");
  if (!need_str(c, a, "replace") || !need_str(c, b, "replace")) return NULL;
  int64_t k = int_arg(c, ARG(2, "count"), -1, "replace's count");
  return c->failed ? NULL : replace(c, self, a, b, k);
}
METHOD(find) {
  jv *a = ARG(0, "sub");
  if (!need_str(c, a, "find")) return NULL;
  for (size_t i = 0; i + a->n <= self->n; i++)
    if (!memcmp(self->s + i, a->s, a->n)) return jj_int(c, (int64_t)jj_utf8_len(self->s, i));
  return jj_int(c, -1);
}
METHOD(count) {
  jv *a = ARG(0, "sub");
  if (!need_str(c, a, "count")) return NULL;
  if (!a->n) return jj_int(c, (int64_t)jj_utf8_len(self->s, self->n) + 1);
  int64_t k = 0;
  for (size_t i = 0; i + a->n <= self->n;)
    if (!memcmp(self->s + i, a->s, a->n)) {
      k++;
      i += a->n;
    } else {
      i++;
    }
  return jj_int(c, k);
}
METHOD(join) {
  jv *items = ARG(0, "iterable");
  if (!items || !(items = jj_iter_list(c, items)))
    return c->failed ? NULL : jj_fail(c, "join needs a list");
  rx_strbuf b = {0};
  base_strbuf_append(&b, "");
  for (size_t i = 0; i < items->len; i++) {
    if (i) base_strbuf_appendn(&b, self->s, self->n);
    if (items->items[i]->kind != JV_STR) {
      base_strbuf_free(&b);
      return jj_fail(c, "str.join: item %zu is %s, not a string", i, jj_kind_name(items->items[i]));
    }
    base_strbuf_appendn(&b, items->items[i]->s, items->items[i]->n);
  }
  jv *r = jj_str(c, b.data, b.len);
  base_strbuf_free(&b);
  return r;
}
/* "{}" / "{0}" / "{name}" replaced by str() of the arguments (no format specs) */
METHOD(format) {
  rx_strbuf b = {0};
  base_strbuf_append(&b, "");
  size_t auto_i = 0;
  for (size_t i = 0; i < self->n; i++) {
    char ch = self->s[i];
    if ((ch == '{' || ch == '}') && i + 1 < self->n && self->s[i + 1] == ch) {
      base_strbuf_putc(&b, ch);
      i++;
      continue;
    }
    if (ch != '{') {
      base_strbuf_putc(&b, ch);
      continue;
    }
    const char *close = memchr(self->s + i, '}', self->n - i);
    if (!close) {
      base_strbuf_free(&b);
      return jj_fail(c, "format: a '{' without its '}'");
    }
    size_t len = (size_t)(close - self->s) - i - 1;
    const char *field = self->s + i + 1;
    jv *v = NULL;
    if (!len) {
      v = auto_i < n ? args[auto_i++] : NULL;
    } else if (field[0] >= '0' && field[0] <= '9') {
      size_t k = (size_t)atoi(field);
      v = k < n ? args[k] : NULL;
    } else {
      for (size_t k = 0; k < nk; k++)
        if (strlen(kn[k]) == len && !memcmp(kn[k], field, len)) v = kv[k];
    }
    if (!v || !jj_str_of(c, v, &b)) {
      base_strbuf_free(&b);
      return c->failed ? NULL : jj_fail(c, "format: no argument for '{%.*s}'", (int)len, field);
    }
    i = (size_t)(close - self->s);
  }
  jv *r = jj_str(c, b.data, b.len);
  base_strbuf_free(&b);
  return r;
}
static jv *str_class(jj_ctx *c, jv *self, int kind) { /* isdigit isalpha isspace isupper islower */
  bool any = false;
  for (size_t i = 0; i < self->n; i++) {
    unsigned char ch = (unsigned char)self->s[i];
    bool ok = kind == 0   ? ch >= '0' && ch <= '9'
              : kind == 1 ? (ch | 0x20) >= 'a' && (ch | 0x20) <= 'z'
              : kind == 2 ? is_space(ch)
              : kind == 3 ? !(ch >= 'a' && ch <= 'z')
                          : !(ch >= 'A' && ch <= 'Z');
    if (!ok) return jj_bool(c, false);
    if (kind < 3 || (ch | 0x20) >= 'a')
      any = any || kind < 3 || ((ch | 0x20) >= 'a' && (ch | 0x20) <= 'z');
  }
  return jj_bool(c, any);
}
METHOD(isdigit) {
  UNUSED_ARGS;
  return str_class(c, self, 0);
}
METHOD(isalpha) {
  UNUSED_ARGS;
  return str_class(c, self, 1);
}
METHOD(isspace) {
  UNUSED_ARGS;
  return str_class(c, self, 2);
}
METHOD(isupper) {
  UNUSED_ARGS;
  return str_class(c, self, 3);
}
METHOD(islower) {
  UNUSED_ARGS;
  return str_class(c, self, 4);
}
METHOD(items) {
  UNUSED_ARGS;
  jv *l = jj_list(c);
  for (size_t i = 0; l && i < self->len; i++) {
    jv *t = jj_list(c);
    if (!t) return NULL;
    t->tuple = true;
    if (!jj_push(c, t, self->keys[i]) || !jj_push(c, t, self->items[i]) || !jj_push(c, l, t))
      return NULL;
  }
  return l;
}
METHOD(keys) {
  UNUSED_ARGS;
  return jj_iter_list(c, self);
}
METHOD(values) {
  UNUSED_ARGS;
  jv *l = jj_list(c);
  for (size_t i = 0; l && i < self->len; i++)
    if (!jj_push(c, l, self->items[i])) return NULL;
  return l;
}
METHOD(get) {
  jv *k = ARG(0, "key"), *d = ARG(1, "default");
  if (!k) return jj_fail(c, "dict.get needs a key");
  for (size_t i = 0; i < self->len; i++)
    if (jj_equal(self->keys[i], k)) return self->items[i];
  return d ? d : jj_none(c);
}
METHOD(index) {
  jv *x = ARG(0, "value");
  if (!x) return jj_fail(c, "list.index needs a value");
  for (size_t i = 0; i < self->len; i++)
    if (jj_equal(self->items[i], x)) return jj_int(c, (int64_t)i);
  return jj_fail(c, "list.index: the value is not in the list");
}

static const method METHODS[] = {
    {"strip", JV_STR, m_strip},       {"lstrip", JV_STR, m_lstrip},
    {"rstrip", JV_STR, m_rstrip},     {"split", JV_STR, m_split},
    {"rsplit", JV_STR, m_rsplit},     {"startswith", JV_STR, m_startswith},
    {"endswith", JV_STR, m_endswith}, {"upper", JV_STR, m_upper},
    {"lower", JV_STR, m_lower},       {"capitalize", JV_STR, m_capitalize},
    {"title", JV_STR, m_title},       {"replace", JV_STR, m_replace},
    {"find", JV_STR, m_find},         {"count", JV_STR, m_count},
    {"join", JV_STR, m_join},         {"format", JV_STR, m_format},
    {"isdigit", JV_STR, m_isdigit},   {"isalpha", JV_STR, m_isalpha},
    {"isspace", JV_STR, m_isspace},   {"isupper", JV_STR, m_isupper},
    {"islower", JV_STR, m_islower},   {"items", JV_DICT, m_items},
    {"keys", JV_DICT, m_keys},        {"values", JV_DICT, m_values},
    {"get", JV_DICT, m_get},          {"index", JV_LIST, m_index},
};

jv *jj_getattr(jj_ctx *c, jv *obj, const char *name) {
  if (obj->kind == JV_UNDEF) return jj_fail(c, "%s", obj->s);
  if (obj->kind == JV_DICT && obj->ns) {
    jv *v = jj_dict_get(obj, name, strlen(name));
    return v ? v
             : jj_undef(c,
                        base_arena_printf(&c->arena, "the namespace has no attribute '%s'", name));
  }
  for (size_t i = 0; i < RX_ARRAY_LEN(METHODS); i++)
    if (METHODS[i].on == obj->kind && !strcmp(METHODS[i].name, name))
      return jj_func(c, METHODS[i].name, METHODS[i].fn, obj);
  if (obj->kind == JV_DICT) {
    jv *v = jj_dict_get(obj, name, strlen(name));
    if (v) return v;
  }
  /* Python's type names, as jinja2's messages give them */
  static const char *const TYPES[] = {
      [JV_UNDEF] = "Undefined",      [JV_NONE] = "None",
      [JV_BOOL] = "'bool object'",   [JV_INT] = "'int object'",
      [JV_FLOAT] = "'float object'", [JV_STR] = "'str object'",
      [JV_LIST] = "'list object'",   [JV_DICT] = "'dict object'",
      [JV_MACRO] = "'Macro object'", [JV_FUNC] = "'builtin_function_or_method object'"};
  const char *type = obj->kind == JV_LIST && obj->tuple ? "'tuple object'" : TYPES[obj->kind];
  return jj_undef(c, base_arena_printf(&c->arena, "%s has no attribute '%s'", type, name));
}

/* ---- tests ---- */
typedef int (*test_fn)(jj_ctx *c, jv *x, jv **args, size_t n);
#define TEST(name) static int t_##name(jj_ctx *c, jv *x, jv **args, size_t n)
#define UNUSED_T                                                                                   \
  (void)c;                                                                                         \
  (void)args;                                                                                      \
  (void)n

TEST(defined) {
  UNUSED_T;
  return x->kind != JV_UNDEF;
}
TEST(undefined) {
  UNUSED_T;
  return x->kind == JV_UNDEF;
}
TEST(none) {
  UNUSED_T;
  return x->kind == JV_NONE;
}
TEST(string) {
  UNUSED_T;
  return x->kind == JV_STR;
}
TEST(mapping) {
  UNUSED_T;
  return x->kind == JV_DICT && !x->ns;
}
TEST(iterable) {
  UNUSED_T;
  return x->kind == JV_STR || x->kind == JV_LIST || (x->kind == JV_DICT && !x->ns) ||
         x->kind == JV_UNDEF;
}
TEST(sequence) { return t_iterable(c, x, args, n); }
TEST(number) {
  UNUSED_T;
  return x->kind == JV_INT || x->kind == JV_FLOAT || x->kind == JV_BOOL;
}
TEST(integer) {
  UNUSED_T;
  return x->kind == JV_INT;
}
TEST(float) {
  UNUSED_T;
  return x->kind == JV_FLOAT;
}
TEST(boolean) {
  UNUSED_T;
  return x->kind == JV_BOOL;
}
TEST(true) {
  UNUSED_T;
  return x->kind == JV_BOOL && x->b;
}
TEST(false) {
  UNUSED_T;
  return x->kind == JV_BOOL && !x->b;
}
TEST(callable) { /* jinja2's Undefined has __call__ (that raises): callable too */
  UNUSED_T;
  return x->kind == JV_MACRO || x->kind == JV_FUNC || x->kind == JV_UNDEF;
}
static int int_of(jj_ctx *c, jv *x, const char *test) {
  if (x->kind == JV_INT || x->kind == JV_BOOL) return 1;
  jj_fail(c, "the '%s' test needs an integer, not %s", test, jj_kind_name(x));
  return 0;
}
TEST(odd) {
  UNUSED_T;
  return int_of(c, x, "odd") ? (int)((x->kind == JV_INT ? x->i : x->b) & 1) : -1;
}
TEST(even) {
  UNUSED_T;
  return int_of(c, x, "even") ? !((x->kind == JV_INT ? x->i : x->b) & 1) : -1;
}
TEST(divisibleby) {
  if (n != 1 || !int_of(c, x, "divisibleby") || !int_of(c, args[0], "divisibleby")) {
    if (!c->failed) jj_fail(c, "divisibleby takes one integer");
    return -1;
  }
  if (!args[0]->i) return jj_fail(c, "divisibleby 0"), -1;
  return x->i % args[0]->i == 0;
}
static int arg1(jj_ctx *c, size_t n, const char *test) {
  if (n == 1) return 1;
  jj_fail(c, "the '%s' test takes one argument", test);
  return 0;
}
TEST(eq) { return arg1(c, n, "eq") ? jj_equal(x, args[0]) : -1; }
TEST(ne) { return arg1(c, n, "ne") ? !jj_equal(x, args[0]) : -1; }
TEST(sameas) {
  if (!arg1(c, n, "sameas")) return -1;
  if (x->kind != args[0]->kind) return 0;
  if (x->kind == JV_NONE) return 1;
  if (x->kind == JV_BOOL) return x->b == args[0]->b;
  return x == args[0];
}
TEST(lower) {
  UNUSED_T;
  if (x->kind != JV_STR) return 0;
  jv *l = case_map(c, x, 0);
  return l ? jj_equal(l, x) : -1;
}
TEST(upper) {
  UNUSED_T;
  if (x->kind != JV_STR) return 0;
  jv *l = case_map(c, x, 1);
  return l ? jj_equal(l, x) : -1;
}
TEST(in) {
  if (!arg1(c, n, "in")) return -1;
  jv *box = args[0];
  if (box->kind == JV_STR && x->kind != JV_STR) {
    jj_fail(c, "'in <string>' needs a string on the left, not %s", jj_kind_name(x));
    return -1;
  }
  if (box->kind == JV_STR) {
    if (!x->n) return 1;
    for (size_t i = 0; i + x->n <= box->n; i++)
      if (!memcmp(box->s + i, x->s, x->n)) return 1;
    return 0;
  }
  jv *l = jj_iter_list(c, box);
  if (!l) return -1;
  for (size_t i = 0; i < l->len; i++)
    if (jj_equal(l->items[i], x)) return 1;
  return 0;
}

static const struct {
  const char *name;
  test_fn fn;
} TESTS[] = {
    {"defined", t_defined},
    {"undefined", t_undefined},
    {"none", t_none},
    {"string", t_string},
    {"mapping", t_mapping},
    {"iterable", t_iterable},
    {"sequence", t_sequence},
    {"number", t_number},
    {"integer", t_integer},
    {"float", t_float},
    {"boolean", t_boolean},
    {"true", t_true},
    {"false", t_false},
    {"callable", t_callable},
    {"odd", t_odd},
    {"even", t_even},
    {"divisibleby", t_divisibleby},
    {"eq", t_eq},
    {"equalto", t_eq},
    {"==", t_eq},
    {"ne", t_ne},
    {"!=", t_ne},
    {"sameas", t_sameas},
    {"lower", t_lower},
    {"upper", t_upper},
    {"in", t_in},
};

int jj_test(jj_ctx *c, const char *name, jv *x, jv **args, size_t n) {
  for (size_t i = 0; i < RX_ARRAY_LEN(TESTS); i++)
    if (!strcmp(TESTS[i].name, name)) return TESTS[i].fn(c, x, args, n);
  jj_fail(c, "no test named '%s'", name);
  return -1;
}

/* ---- filters: x | name(args) ---- */
typedef jv *(*filter_fn)(jj_ctx *c, jv *x, jv **args, size_t n, const char **kn, jv **kv,
                         size_t nk);
#define FILTER(name)                                                                               \
  static jv *f_##name(jj_ctx *c, jv *x, jv **args, size_t n, const char **kn, jv **kv, size_t nk)

static jv *need_string(jj_ctx *c, jv *x, const char *filter) {
  if (x->kind == JV_STR) return x;
  if (x->kind == JV_UNDEF) return jj_str(c, "", 0);
  (void)filter;
  return jj_to_string(c, x);
}

FILTER(trim) {
  jv *s = need_string(c, x, "trim"), *ch = ARG(0, "chars");
  const jv *set = chars_arg(c, ch);
  return s && !c->failed ? strip(c, s, set, 3) : NULL;
}
FILTER(tojson) {
  /* transformers' tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False) */
  jv *ea = ARG(0, "ensure_ascii"), *ind = ARG(1, "indent"), *sep = ARG(2, "separators"),
     *sk = ARG(3, "sort_keys");
  if (sep && sep->kind != JV_NONE) return jj_fail(c, "tojson: separators are not supported");
  int indent = -1;
  if (ind && ind->kind != JV_NONE) {
    if (ind->kind != JV_INT || ind->i < 0 || ind->i > 64)
      return jj_fail(c, "tojson: indent must be an integer from 0 to 64");
    indent = (int)ind->i;
  }
  if (ea && jj_truthy(ea)) return jj_fail(c, "tojson: ensure_ascii=True is not supported");
  if (x->kind == JV_UNDEF) return jj_fail(c, "tojson: %s", x->s);
  rx_strbuf b = {0};
  base_strbuf_append(&b, "");
  jv *r = jj_json(c, x, indent, sk && jj_truthy(sk), 0, &b) ? jj_str(c, b.data, b.len) : NULL;
  base_strbuf_free(&b);
  return r;
}
FILTER(length) {
  UNUSED_ARGS;
  switch (x->kind) {
  case JV_STR:
    return jj_int(c, (int64_t)jj_utf8_len(x->s, x->n));
  case JV_LIST:
  case JV_DICT:
    return jj_int(c, (int64_t)x->len);
  case JV_UNDEF:
    return jj_int(c, 0);
  default:
    return jj_fail(c, "length: %s has no length", jj_kind_name(x));
  }
}
FILTER(first) {
  UNUSED_ARGS;
  jv *l = jj_iter_list(c, x);
  if (!l) return NULL;
  return l->len ? l->items[0] : jj_undef(c, "first: the sequence is empty");
}
FILTER(last) {
  UNUSED_ARGS;
  jv *l = jj_iter_list(c, x);
  if (!l) return NULL;
  return l->len ? l->items[l->len - 1] : jj_undef(c, "last: the sequence is empty");
}
FILTER(lower) {
  UNUSED_ARGS;
  jv *s = need_string(c, x, "lower");
  return s ? case_map(c, s, 0) : NULL;
}
FILTER(upper) {
  UNUSED_ARGS;
  jv *s = need_string(c, x, "upper");
  return s ? case_map(c, s, 1) : NULL;
}
FILTER(capitalize) {
  UNUSED_ARGS;
  jv *s = need_string(c, x, "capitalize");
  return s ? case_map(c, s, 2) : NULL;
}
FILTER(title) {
  UNUSED_ARGS;
  jv *s = need_string(c, x, "title");
  return s ? title_filter(c, s) : NULL;
}
FILTER(replace) {
  jv *s = need_string(c, x, "replace"), *a = ARG(0, "old"), *b = ARG(1, "new");
  if (!s || !a || !b) return c->failed ? NULL : jj_fail(c, "replace needs old and new");
  if (!(a = jj_to_string(c, a)) || !(b = jj_to_string(c, b))) return NULL;
  int64_t k = int_arg(c, ARG(2, "count"), -1, "replace's count");
  return c->failed ? NULL : replace(c, s, a, b, k);
}
FILTER(join) {
  jv *sep = ARG(0, "d"), *attr = ARG(1, "attribute");
  jv *l = jj_iter_list(c, x);
  if (!l) return NULL;
  if (sep && !(sep = jj_to_string(c, sep))) return NULL;
  rx_strbuf b = {0};
  base_strbuf_append(&b, "");
  bool ok = true;
  for (size_t i = 0; ok && i < l->len; i++) {
    if (i && sep) base_strbuf_appendn(&b, sep->s, sep->n);
    jv *v = l->items[i];
    if (attr && !(v = jj_getattr(c, v, attr->kind == JV_STR ? attr->s : ""))) ok = false;
    ok = ok && jj_str_of(c, v, &b);
    if (b.len > JJ_MAX_OUTPUT) ok = jj_fail(c, "join: the text passes the output limit") != NULL;
  }
  jv *r = ok ? jj_str(c, b.data, b.len) : NULL;
  base_strbuf_free(&b);
  return r;
}
FILTER(default) {
  jv *d = ARG(0, "default_value"), *boolean = ARG(1, "boolean");
  bool use = x->kind == JV_UNDEF || (boolean && jj_truthy(boolean) && !jj_truthy(x));
  if (!use) return x;
  return d ? d : jj_str(c, "", 0);
}
FILTER(list) {
  UNUSED_ARGS;
  jv *l = jj_iter_list(c, x);
  if (!l || l != x) return l;
  jv *copy = jj_list(c);
  for (size_t i = 0; copy && i < x->len; i++)
    if (!jj_push(c, copy, x->items[i])) return NULL;
  return copy;
}
FILTER(int) {
  jv *d = ARG(0, "default");
  if (x->kind == JV_UNDEF) return jj_fail(c, "%s", x->s); /* int(Undefined) raises in jinja2 */
  switch (x->kind) {
  case JV_INT:
    return x;
  case JV_BOOL:
    return jj_int(c, x->b);
  case JV_FLOAT:
    if (isfinite(x->f) && fabs(x->f) < 9.2e18) return jj_int(c, (int64_t)x->f);
    break;
  case JV_STR: {
    char buf[64];
    size_t k = x->n < sizeof buf - 1 ? x->n : sizeof buf - 1;
    memcpy(buf, x->s, k);
    buf[k] = 0;
    char *end;
    long long v = strtoll(buf, &end, 10);
    while (*end && is_space((unsigned char)*end)) end++;
    if (end != buf && !*end) return jj_int(c, v);
    double f = strtod(buf, &end);
    while (*end && is_space((unsigned char)*end)) end++;
    if (end != buf && !*end && isfinite(f) && fabs(f) < 9.2e18) return jj_int(c, (int64_t)f);
    break;
  }
  default:
    break;
  }
  return d ? d : jj_int(c, 0);
}
FILTER(float) {
  jv *d = ARG(0, "default");
  if (x->kind == JV_UNDEF) return jj_fail(c, "%s", x->s); /* float(Undefined) raises in jinja2 */
  switch (x->kind) {
  case JV_FLOAT:
    return x;
  case JV_INT:
    return jj_float(c, (double)x->i);
  case JV_BOOL:
    return jj_float(c, x->b);
  case JV_STR: {
    char buf[64];
    size_t k = x->n < sizeof buf - 1 ? x->n : sizeof buf - 1;
    memcpy(buf, x->s, k);
    buf[k] = 0;
    char *end;
    double f = strtod(buf, &end);
    if (end != buf && !*end) return jj_float(c, f);
    break;
  }
  default:
    break;
  }
  return d ? d : jj_float(c, 0.0);
}
FILTER(string) {
  UNUSED_ARGS;
  return jj_to_string(c, x);
}
FILTER(safe) {
  UNUSED_ARGS;
  (void)c;
  return x;
}
FILTER(escape) {
  UNUSED_ARGS;
  jv *s = need_string(c, x, "escape");
  if (!s) return NULL;
  rx_strbuf b = {0};
  base_strbuf_append(&b, "");
  for (size_t i = 0; i < s->n; i++) {
    switch (s->s[i]) {
    case '&':
      base_strbuf_append(&b, "&amp;");
      break;
    case '<':
      base_strbuf_append(&b, "&lt;");
      break;
    case '>':
      base_strbuf_append(&b, "&gt;");
      break;
    case '"':
      base_strbuf_append(&b, "&#34;");
      break;
    case '\'':
      base_strbuf_append(&b, "&#39;");
      break;
    default:
      base_strbuf_putc(&b, s->s[i]);
    }
  }
  jv *r = jj_str(c, b.data, b.len);
  base_strbuf_free(&b);
  return r;
}
FILTER(items) {
  if (x->kind == JV_UNDEF) return jj_list(c);
  if (x->kind != JV_DICT) return jj_fail(c, "items: %s is not a mapping", jj_kind_name(x));
  return m_items(c, x, args, n, kn, kv, nk);
}
FILTER(reverse) {
  UNUSED_ARGS;
  if (x->kind == JV_STR) {
    jv *l = jj_iter_list(c, x);
    rx_strbuf b = {0};
    base_strbuf_append(&b, "");
    for (size_t i = l ? l->len : 0; i-- > 0;)
      base_strbuf_appendn(&b, l->items[i]->s, l->items[i]->n);
    jv *r = l ? jj_str(c, b.data, b.len) : NULL;
    base_strbuf_free(&b);
    return r;
  }
  jv *l = jj_iter_list(c, x), *r = jj_list(c);
  for (size_t i = l && r ? l->len : 0; i-- > 0;)
    if (!jj_push(c, r, l->items[i])) return NULL;
  return l ? r : NULL;
}
FILTER(unique) {
  UNUSED_ARGS;
  jv *l = jj_iter_list(c, x), *r = jj_list(c);
  for (size_t i = 0; l && r && i < l->len; i++) {
    size_t j = 0;
    while (j < r->len && !jj_equal(r->items[j], l->items[i])) j++;
    if (j == r->len && !jj_push(c, r, l->items[i])) return NULL;
  }
  return l ? r : NULL;
}
FILTER(abs) {
  UNUSED_ARGS;
  if (x->kind == JV_INT) return jj_int(c, x->i < 0 && x->i != INT64_MIN ? -x->i : x->i);
  if (x->kind == JV_FLOAT) return jj_float(c, fabs(x->f));
  return jj_fail(c, "abs: %s is not a number", jj_kind_name(x));
}
FILTER(indent) { /* jinja2's indent(width=4, first=False, blank=False) */
  jv *s = need_string(c, x, "indent"), *w = ARG(0, "width"), *first = ARG(1, "first"),
     *blank = ARG(2, "blank");
  if (!s) return NULL;
  rx_strbuf pad = {0};
  base_strbuf_append(&pad, "");
  if (w && w->kind == JV_STR)
    base_strbuf_appendn(&pad, w->s, w->n);
  else
    for (int64_t k = int_arg(c, w, 4, "indent's width"); k > 0 && k < 256; k--)
      base_strbuf_putc(&pad, ' ');
  rx_strbuf b = {0};
  base_strbuf_append(&b, "");
  bool line_start = first && jj_truthy(first);
  for (size_t i = 0; i < s->n; i++) {
    if (line_start) {
      bool empty = s->s[i] == '\n';
      if (!empty || (blank && jj_truthy(blank))) base_strbuf_appendn(&b, pad.data, pad.len);
    }
    base_strbuf_putc(&b, s->s[i]);
    line_start = s->s[i] == '\n';
  }
  jv *r = c->failed ? NULL : jj_str(c, b.data, b.len);
  base_strbuf_free(&b);
  base_strbuf_free(&pad);
  return r;
}

/* select/reject (by a test) and selectattr/rejectattr (by an attribute and a test) */
static jv *select_by(jj_ctx *c, jv *x, jv **args, size_t n, bool attr, bool keep) {
  jv *l = jj_iter_list(c, x), *r = jj_list(c);
  if (!l || !r) return NULL;
  size_t k = attr ? 1 : 0;
  if (attr && (!n || args[0]->kind != JV_STR))
    return jj_fail(c, "%s needs an attribute name", keep ? "selectattr" : "rejectattr");
  const char *test = n > k ? (args[k]->kind == JV_STR ? args[k]->s : NULL) : NULL;
  if (n > k && !test) return jj_fail(c, "the test's name must be a string");
  for (size_t i = 0; i < l->len; i++) {
    jv *v = l->items[i];
    if (attr) {
      /* a dotted attribute ("function.name") walks the path */
      const char *p = args[0]->s;
      while (v && *p) {
        const char *dot = strchr(p, '.');
        size_t len = dot ? (size_t)(dot - p) : strlen(p);
        char *part = base_arena_strndup(&c->arena, p, len);
        if (v->kind == JV_UNDEF) break;
        v = jj_getattr(c, v, part);
        p += len + (dot != NULL);
      }
      if (!v) return NULL;
    }
    int t = test ? jj_test(c, test, v, args + k + 1, n - k - 1) : jj_truthy(v);
    if (t < 0) return NULL;
    if ((t != 0) == keep && !jj_push(c, r, l->items[i])) return NULL;
  }
  return r;
}
FILTER(select) {
  UNUSED_ARGS;
  return select_by(c, x, args, n, false, true);
}
FILTER(reject) {
  UNUSED_ARGS;
  return select_by(c, x, args, n, false, false);
}
FILTER(selectattr) {
  UNUSED_ARGS;
  return select_by(c, x, args, n, true, true);
}
FILTER(rejectattr) {
  UNUSED_ARGS;
  return select_by(c, x, args, n, true, false);
}
/* map(attribute="name", default=...) or map("filter", args...) */
FILTER(map) {
  jv *l = jj_iter_list(c, x), *r = jj_list(c);
  if (!l || !r) return NULL;
  jv *attr = ARG(99, "attribute"), *dflt = ARG(99, "default");
  if (!attr && (!n || args[0]->kind != JV_STR))
    return jj_fail(c, "map needs attribute= or a filter's name");
  for (size_t i = 0; i < l->len; i++) {
    jv *v;
    if (attr) {
      if (attr->kind != JV_STR) return jj_fail(c, "map: attribute must be a string");
      v = jj_getattr(c, l->items[i], attr->s);
      if (v && v->kind == JV_UNDEF && dflt) v = dflt;
    } else {
      v = jj_filter(c, args[0]->s, l->items[i], args + 1, n - 1, NULL, NULL, 0);
    }
    if (!v || !jj_push(c, r, v)) return NULL;
  }
  return r;
}
FILTER(sum) {
  UNUSED_ARGS;
  jv *l = jj_iter_list(c, x);
  if (!l) return NULL;
  int64_t si = 0;
  double sf = 0;
  bool flt = false;
  for (size_t i = 0; i < l->len; i++) {
    jv *v = l->items[i];
    if (v->kind == JV_FLOAT) {
      flt = true;
      sf += v->f;
    } else if (v->kind == JV_INT || v->kind == JV_BOOL) {
      si += v->kind == JV_INT ? v->i : v->b;
    } else {
      return jj_fail(c, "sum: %s is not a number", jj_kind_name(v));
    }
  }
  return flt ? jj_float(c, sf + (double)si) : jj_int(c, si);
}
FILTER(wordcount) {
  UNUSED_ARGS;
  jv *s = need_string(c, x, "wordcount"), *w = s ? split(c, s, NULL, -1, false) : NULL;
  return w ? jj_int(c, (int64_t)w->len) : NULL;
}

/* each filter with the most positional arguments jinja2's takes (-1: any number) */
static const struct {
  const char *name;
  filter_fn fn;
  int max_args;
} FILTERS[] = {
    {"trim", f_trim, 1},
    {"tojson", f_tojson, 4},
    {"length", f_length, 0},
    {"count", f_length, 0},
    {"first", f_first, 0},
    {"last", f_last, 0},
    {"lower", f_lower, 0},
    {"upper", f_upper, 0},
    {"capitalize", f_capitalize, 0},
    {"title", f_title, 0},
    {"replace", f_replace, 3},
    {"join", f_join, 2},
    {"default", f_default, 2},
    {"d", f_default, 2},
    {"list", f_list, 0},
    {"int", f_int, 2},
    {"float", f_float, 1},
    {"string", f_string, 0},
    {"safe", f_safe, 0},
    {"escape", f_escape, 0},
    {"e", f_escape, 0},
    {"items", f_items, 0},
    {"reverse", f_reverse, 0},
    {"unique", f_unique, 2},
    {"abs", f_abs, 0},
    {"indent", f_indent, 3},
    {"select", f_select, -1},
    {"reject", f_reject, -1},
    {"selectattr", f_selectattr, -1},
    {"rejectattr", f_rejectattr, -1},
    {"map", f_map, -1},
    {"sum", f_sum, 2},
    {"wordcount", f_wordcount, 0},
};

jv *jj_filter(jj_ctx *c, const char *name, jv *x, jv **args, size_t n, const char **kn, jv **kv,
              size_t nk) {
  for (size_t i = 0; i < RX_ARRAY_LEN(FILTERS); i++) {
    if (strcmp(FILTERS[i].name, name)) continue;
    if (FILTERS[i].max_args >= 0 && n > (size_t)FILTERS[i].max_args)
      return jj_fail(c, "filter '%s' takes at most %d positional arguments, %zu given", name,
                     FILTERS[i].max_args, n);
    return FILTERS[i].fn(c, x, args, n, kn, kv, nk);
  }
  return jj_fail(c, "no filter named '%s'", name);
}

/* ---- globals ---- */
#define GLOBAL(name)                                                                               \
  static jv *g_##name(jj_ctx *c, jv *self, jv **args, size_t n, const char **kn, jv **kv, size_t nk)

GLOBAL(raise_exception) {
  (void)self;
  jv *m = ARG(0, "message");
  rx_strbuf b = {0};
  base_strbuf_append(&b, "");
  if (m) jj_str_of(c, m, &b);
  jj_fail(c, "raise_exception: %s", b.data);
  base_strbuf_free(&b);
  return NULL;
}
/* jinja2's sandbox allows ranges of at most 100000 items (MAX_RANGE) */
GLOBAL(range) {
  (void)self;
  (void)kn;
  (void)kv;
  if (nk || !n || n > 3) return jj_fail(c, "range takes 1 to 3 integers");
  int64_t v[3] = {0, 0, 1};
  for (size_t i = 0; i < n; i++) {
    if (args[i]->kind != JV_INT && args[i]->kind != JV_BOOL)
      return jj_fail(c, "range takes integers");
    v[i] = args[i]->kind == JV_INT ? args[i]->i : args[i]->b;
  }
  int64_t start = n == 1 ? 0 : v[0], stop = n == 1 ? v[0] : v[1], step = n == 3 ? v[2] : 1;
  if (!step) return jj_fail(c, "range: the step must not be zero");
  jv *l = jj_list(c);
  for (int64_t i = start; l && (step > 0 ? i < stop : i > stop); i += step) {
    if (l->len >= 100000) return jj_fail(c, "range: more than 100000 items (the sandbox's limit)");
    if (!jj_push(c, l, jj_int(c, i))) return NULL;
  }
  return l;
}
GLOBAL(namespace) {
  (void)self;
  jv *d = jj_dict(c);
  if (!d) return NULL;
  d->ns = true;
  for (size_t i = 0; i < n; i++) {
    if (args[i]->kind != JV_DICT) return jj_fail(c, "namespace() takes a dict or keywords");
    for (size_t k = 0; k < args[i]->len; k++)
      if (!jj_dict_set(c, d, args[i]->keys[k], args[i]->items[k])) return NULL;
  }
  for (size_t k = 0; k < nk; k++)
    if (!jj_dict_set(c, d, jj_str(c, kn[k], strlen(kn[k])), kv[k])) return NULL;
  return d;
}
GLOBAL(dict) {
  jv *d = g_namespace(c, self, args, n, kn, kv, nk);
  if (d) d->ns = false;
  return d;
}
/* transformers' strftime_now(format): the time now (local), or the render's fixed time (UTC) */
GLOBAL(strftime_now) {
  (void)self;
  jv *f = ARG(0, "format");
  if (!need_str(c, f, "strftime_now")) return NULL;
  time_t t = c->now ? (time_t)c->now : time(NULL);
  struct tm tm;
  if (c->now)
    gmtime_r(&t, &tm);
  else
    localtime_r(&t, &tm);
  char buf[256];
  size_t k = f->n ? strftime(buf, sizeof buf, f->s, &tm) : 0;
  if (f->n && !k) return jj_fail(c, "strftime_now: the format gives nothing or too much");
  return jj_str(c, buf, k);
}

static const struct {
  const char *name;
  jj_fn fn;
} GLOBALS[] = {
    {"raise_exception", g_raise_exception},
    {"range", g_range},
    {"namespace", g_namespace},
    {"dict", g_dict},
    {"strftime_now", g_strftime_now},
};

jv *jj_global(jj_ctx *c, const char *name) {
  for (size_t i = 0; i < RX_ARRAY_LEN(GLOBALS); i++)
    if (!strcmp(GLOBALS[i].name, name)) return jj_func(c, GLOBALS[i].name, GLOBALS[i].fn, NULL);
  return NULL;
}
