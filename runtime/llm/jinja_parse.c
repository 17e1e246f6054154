/* runtime/llm/jinja_parse.c: the chat-template lexer and parser (runtime/llm/jinja.h).
 *
 * The lexer follows jinja2's (3.1) as transformers configures it: newlines normalized to "\n" and
 * one trailing newline dropped (keep_trailing_newline=False); `{%-`/`-%}` (and the same on `{{ }}`
 * and `{# #}`) strip all whitespace on that side; trim_blocks drops the first newline after a
 * block or comment tag; lstrip_blocks drops the spaces and tabs before a block or comment tag
 * that starts a line (`{%+` keeps them); `{% raw %}` keeps its text. The parser is recursive
 * descent with jinja2's precedence (or, and, not, comparisons, + -, ~, * / // %, **, unary, then
 * postfix, filters and tests). */
#include "jinja.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef enum tk_kind {
  TK_TEXT,
  TK_VAR_BEGIN, /* {{ */
  TK_VAR_END,
  TK_BLOCK_BEGIN, /* {% */
  TK_BLOCK_END,
  TK_NAME,
  TK_STRING, /* s, n: the unescaped text */
  TK_INT,
  TK_FLOAT,
  TK_OP, /* s: the operator's text */
  TK_EOF,
} tk_kind;

typedef struct tk {
  tk_kind kind;
  int line, col;
  const char *s;
  size_t n;
  int64_t i;
  double f;
} tk;

typedef struct lexer {
  rx_chat_template *t;
  const char *src; /* normalized source */
  size_t len, pos;
  int line, col;
  RX_VEC(tk) toks;
  char err[400];
  bool failed;
} lexer;

static void lex_fail(lexer *L, int line, int col, const char *fmt, ...) RX_PRINTF(4, 5);
static void lex_fail(lexer *L, int line, int col, const char *fmt, ...) {
  if (L->failed) return;
  L->failed = true;
  int k = snprintf(L->err, sizeof L->err, "%s:%d:%d: ", L->t->name, line, col);
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(L->err + k, sizeof L->err - (size_t)k, fmt, ap);
  va_end(ap);
}

static bool is_ws(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

/* moves pos to p, counting lines and columns */
static void advance(lexer *L, size_t p) {
  for (; L->pos < p; L->pos++) {
    if (L->src[L->pos] == '\n') {
      L->line++;
      L->col = 1;
    } else {
      L->col++;
    }
  }
}

static void push(lexer *L, tk_kind k, int line, int col, const char *s, size_t n) {
  tk t = {k, line, col, s, n, 0, 0};
  RX_VEC_PUSH(&L->toks, t);
}

/* Emits text src[a, b) (after whitespace control) as a TEXT token. */
static void emit_text(lexer *L, size_t a, size_t b, int line, int col) {
  if (b > a) push(L, TK_TEXT, line, col, L->src + a, b - a);
}

/* The end of the text before the tag at src[tag] (kind '{', '%' or '#', its sign after), with
 * `-` and lstrip_blocks applied; line_starting: the previous tag ended a line. */
static size_t text_end(lexer *L, size_t start, size_t tag, char kind, char sign,
                       bool line_starting) {
  size_t e = tag;
  if (sign == '-') {
    while (e > start && is_ws(L->src[e - 1])) e--;
    return e;
  }
  if (sign == '+' || kind == '{') return e;
  size_t l = e;
  while (l > start && L->src[l - 1] != '\n') l--;
  if (l == start && !line_starting) return e; /* the tag does not start a line */
  for (size_t k = l; k < e; k++)
    if (!is_ws(L->src[k])) return e;
  return l;
}

/* After a closing tag at pos (already past it): `-` strips all whitespace, trim_blocks one
 * newline (blocks and comments). Returns whether the skipped part ended in a newline. */
static bool after_tag(lexer *L, char sign, bool block) {
  size_t p = L->pos;
  if (sign == '-') {
    while (p < L->len && is_ws(L->src[p])) p++;
  } else if (sign != '+' && block && p < L->len && L->src[p] == '\n') {
    p++;
  }
  bool nl = p > L->pos && L->src[p - 1] == '\n';
  advance(L, p);
  return nl;
}

static int64_t parse_escape_hex(const char *s, int n, bool *ok) {
  int64_t v = 0;
  for (int i = 0; i < n; i++) {
    char c = s[i];
    int d = c >= '0' && c <= '9'   ? c - '0'
            : c >= 'a' && c <= 'f' ? c - 'a' + 10
            : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                   : -1;
    if (d < 0) {
      *ok = false;
      return 0;
    }
    v = v * 16 + d;
  }
  return v;
}

static void put_utf8(rx_strbuf *b, uint32_t cp) {
  char u[4];
  if (cp < 0x80) {
    base_strbuf_putc(b, (char)cp);
    return;
  }
  size_t n;
  if (cp < 0x800) {
    u[0] = (char)(0xC0 | (cp >> 6));
    u[1] = (char)(0x80 | (cp & 63));
    n = 2;
  } else if (cp < 0x10000) {
    u[0] = (char)(0xE0 | (cp >> 12));
    u[1] = (char)(0x80 | ((cp >> 6) & 63));
    u[2] = (char)(0x80 | (cp & 63));
    n = 3;
  } else {
    u[0] = (char)(0xF0 | (cp >> 18));
    u[1] = (char)(0x80 | ((cp >> 12) & 63));
    u[2] = (char)(0x80 | ((cp >> 6) & 63));
    u[3] = (char)(0x80 | (cp & 63));
    n = 4;
  }
  base_strbuf_appendn(b, u, n);
}

/* A string literal at pos (its quote); Python's escapes as jinja2 decodes them. */
static void lex_string(lexer *L) {
  int line = L->line, col = L->col;
  char q = L->src[L->pos];
  size_t p = L->pos + 1;
  rx_strbuf b = {0};
  base_strbuf_append(&b, "");
  while (p < L->len && L->src[p] != q) {
    char c = L->src[p];
    if (c != '\\') {
      base_strbuf_putc(&b, c);
      p++;
      continue;
    }
    if (p + 1 >= L->len) break;
    char e = L->src[p + 1];
    p += 2;
    bool ok = true;
    switch (e) {
    case 'n':
      base_strbuf_putc(&b, '\n');
      break;
    case 't':
      base_strbuf_putc(&b, '\t');
      break;
    case 'r':
      base_strbuf_putc(&b, '\r');
      break;
    case '0':
      base_strbuf_putc(&b, '\0');
      break;
    case 'a':
      base_strbuf_putc(&b, '\a');
      break;
    case 'b':
      base_strbuf_putc(&b, '\b');
      break;
    case 'f':
      base_strbuf_putc(&b, '\f');
      break;
    case 'v':
      base_strbuf_putc(&b, '\v');
      break;
    case '\\':
      base_strbuf_putc(&b, '\\');
      break;
    case '\'':
      base_strbuf_putc(&b, '\'');
      break;
    case '"':
      base_strbuf_putc(&b, '"');
      break;
    case '\n':
      break; /* a line continuation */
    case 'x':
    case 'u':
    case 'U': {
      int nd = e == 'x' ? 2 : e == 'u' ? 4 : 8;
      if (p + (size_t)nd > L->len) {
        ok = false;
        break;
      }
      int64_t v = parse_escape_hex(L->src + p, nd, &ok);
      if (ok && v > 0x10FFFF) ok = false;
      if (ok) put_utf8(&b, (uint32_t)v);
      p += (size_t)nd;
      break;
    }
    default: /* Python keeps an unknown escape as written */
      base_strbuf_putc(&b, '\\');
      base_strbuf_putc(&b, e);
    }
    if (!ok) {
      base_strbuf_free(&b);
      lex_fail(L, line, col, "a bad \\%c escape in a string literal", e);
      return;
    }
  }
  if (p >= L->len) {
    base_strbuf_free(&b);
    lex_fail(L, line, col, "a string literal that never ends (expected a closing %c)", q);
    return;
  }
  char *s = base_arena_strndup(&L->t->arena, b.data, b.len);
  push(L, TK_STRING, line, col, s, b.len);
  base_strbuf_free(&b);
  advance(L, p + 1);
}

static const char *const OPS[] = {"//", "**", "==", "!=", "<=", ">=", "+", "-", "*",
                                  "/",  "%",  "~",  "<",  ">",  "=",  ".", ",", ":",
                                  "|",  "(",  ")",  "[",  "]",  "{",  "}"};

/* The tokens of one tag up to its end ("}}" or "%}"); returns the sign before the end. */
static char lex_tag(lexer *L, char close) {
  int depth = 0; /* brackets open: "}}" inside a dict literal is two braces */
  for (;;) {
    while (L->pos < L->len && is_ws(L->src[L->pos])) advance(L, L->pos + 1);
    if (L->pos >= L->len) {
      lex_fail(L, L->line, L->col, "the template ends inside a tag (expected '%c}')", close);
      return 0;
    }
    const char *p = L->src + L->pos;
    size_t left = L->len - L->pos;
    int line = L->line, col = L->col;
    for (int k = 0; k < 2 && depth == 0; k++) {
      char sign = k == 0 ? '-' : '+';
      if (left >= 3 && p[0] == sign && p[1] == close && p[2] == '}') {
        if (close == '}' && sign == '+') break;
        advance(L, L->pos + 3);
        push(L, close == '}' ? TK_VAR_END : TK_BLOCK_END, line, col, NULL, 0);
        return sign;
      }
    }
    if (depth == 0 && left >= 2 && p[0] == close && p[1] == '}') {
      advance(L, L->pos + 2);
      push(L, close == '}' ? TK_VAR_END : TK_BLOCK_END, line, col, NULL, 0);
      return ' ';
    }
    char c = *p;
    if (c == '\'' || c == '"') {
      lex_string(L);
      if (L->failed) return 0;
      continue;
    }
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_') {
      size_t n = 1;
      while (n < left && ((p[n] >= 'a' && p[n] <= 'z') || (p[n] >= 'A' && p[n] <= 'Z') ||
                          (p[n] >= '0' && p[n] <= '9') || p[n] == '_'))
        n++;
      push(L, TK_NAME, line, col, base_arena_strndup(&L->t->arena, p, n), n);
      advance(L, L->pos + n);
      continue;
    }
    if (c >= '0' && c <= '9') {
      size_t n = 0;
      bool flt = false;
      char num[64];
      size_t k = 0;
      while (n < left && ((p[n] >= '0' && p[n] <= '9') || p[n] == '_')) {
        if (p[n] != '_' && k < sizeof num - 1) num[k++] = p[n];
        n++;
      }
      if (n + 1 < left && p[n] == '.' && p[n + 1] >= '0' && p[n + 1] <= '9') {
        flt = true;
        num[k < sizeof num - 1 ? k++ : k] = '.';
        n++;
        while (n < left && ((p[n] >= '0' && p[n] <= '9') || p[n] == '_')) {
          if (p[n] != '_' && k < sizeof num - 1) num[k++] = p[n];
          n++;
        }
      }
      if (n < left && (p[n] == 'e' || p[n] == 'E')) {
        size_t m = n + 1;
        if (m < left && (p[m] == '+' || p[m] == '-')) m++;
        if (m < left && p[m] >= '0' && p[m] <= '9') {
          flt = true;
          while (n < m && k < sizeof num - 1) num[k++] = p[n++];
          while (n < left && p[n] >= '0' && p[n] <= '9') {
            if (k < sizeof num - 1) num[k++] = p[n];
            n++;
          }
        }
      }
      num[k] = 0;
      if (!flt && num[0] == '0' && strspn(num, "0") != k) {
        lex_fail(L, line, col, "leading zeros in an integer literal are not allowed ('%s')", num);
        return 0;
      }
      tk t = {flt ? TK_FLOAT : TK_INT, line, col, NULL, 0, 0, 0};
      if (flt) {
        t.f = strtod(num, NULL);
      } else {
        char *end;
        t.i = strtoll(num, &end, 10);
        if (k > 18) {
          lex_fail(L, line, col, "an integer literal too large (at most 18 digits)");
          return 0;
        }
      }
      RX_VEC_PUSH(&L->toks, t);
      advance(L, L->pos + n);
      continue;
    }
    const char *op = NULL;
    for (size_t k = 0; k < RX_ARRAY_LEN(OPS); k++) {
      size_t n = strlen(OPS[k]);
      if (left >= n && !memcmp(p, OPS[k], n)) {
        op = OPS[k];
        break;
      }
    }
    if (!op) {
      lex_fail(L, line, col, "unexpected character '%c' in a tag", c);
      return 0;
    }
    if (op[0] == '(' || op[0] == '[' || op[0] == '{') depth++;
    if ((op[0] == ')' || op[0] == ']' || op[0] == '}') && depth > 0) depth--;
    push(L, TK_OP, line, col, op, strlen(op));
    advance(L, L->pos + strlen(op));
  }
}

/* Is src[p..] "{% endraw %}"-like ("{%", optional sign, spaces, "endraw", spaces, end)? Sets the
 * signs and the end. */
static bool at_endraw(lexer *L, size_t p, char *sign_l, char *sign_r, size_t *end) {
  const char *s = L->src;
  if (p + 2 > L->len || s[p] != '{' || s[p + 1] != '%') return false;
  p += 2;
  *sign_l = ' ';
  if (p < L->len && (s[p] == '-' || s[p] == '+')) *sign_l = s[p++];
  while (p < L->len && is_ws(s[p])) p++;
  if (p + 6 > L->len || memcmp(s + p, "endraw", 6)) return false;
  p += 6;
  while (p < L->len && is_ws(s[p])) p++;
  *sign_r = ' ';
  if (p < L->len && (s[p] == '-' || s[p] == '+')) *sign_r = s[p++];
  if (p + 2 > L->len || s[p] != '%' || s[p + 1] != '}') return false;
  *end = p + 2;
  return true;
}

/* The text of a raw block, from pos to its endraw. */
static bool lex_raw(lexer *L, bool *line_starting) {
  size_t start = L->pos;
  int line = L->line, col = L->col;
  for (size_t p = start; p < L->len; p++) {
    char sl, sr;
    size_t end;
    if (!at_endraw(L, p, &sl, &sr, &end)) continue;
    emit_text(L, start, text_end(L, start, p, '%', sl, false), line, col);
    advance(L, end);
    *line_starting = after_tag(L, sr, true);
    return true;
  }
  lex_fail(L, line, col, "a raw block without its endraw");
  return false;
}

/* Is the block tag whose tokens start at index k "raw"? */
static bool tag_is_raw(lexer *L, size_t k) {
  return L->toks.len == k + 3 && L->toks.data[k].kind == TK_BLOCK_BEGIN &&
         L->toks.data[k + 1].kind == TK_NAME && !strcmp(L->toks.data[k + 1].s, "raw");
}

static void lex(lexer *L) {
  bool line_starting = true;
  while (L->pos < L->len && !L->failed) {
    size_t start = L->pos;
    int line = L->line, col = L->col;
    size_t p = start;
    while (p + 1 < L->len && !(L->src[p] == '{' && (L->src[p + 1] == '{' || L->src[p + 1] == '%' ||
                                                    L->src[p + 1] == '#')))
      p++;
    if (p + 1 >= L->len) {
      emit_text(L, start, L->len, line, col);
      advance(L, L->len);
      break;
    }
    char kind = L->src[p + 1];
    char sign =
        p + 2 < L->len && (L->src[p + 2] == '-' || L->src[p + 2] == '+') ? L->src[p + 2] : ' ';
    emit_text(L, start, text_end(L, start, p, kind, sign, line_starting), line, col);
    advance(L, p);
    int tl = L->line, tc = L->col;
    advance(L, p + 2 + (sign != ' '));
    if (kind == '#') {
      size_t q = L->pos;
      while (q + 1 < L->len && !(L->src[q] == '#' && L->src[q + 1] == '}')) q++;
      if (q + 1 >= L->len) {
        lex_fail(L, tl, tc, "a comment that never ends (expected '#}')");
        return;
      }
      char cs = q > L->pos && (L->src[q - 1] == '-' || L->src[q - 1] == '+') ? L->src[q - 1] : ' ';
      advance(L, q + 2);
      line_starting = after_tag(L, cs, true);
      continue;
    }
    size_t k = L->toks.len;
    push(L, kind == '{' ? TK_VAR_BEGIN : TK_BLOCK_BEGIN, tl, tc, NULL, 0);
    char end_sign = lex_tag(L, kind == '{' ? '}' : '%');
    if (L->failed) return;
    if (kind == '%' && tag_is_raw(L, k)) { /* no trim_blocks after {% raw %} */
      L->toks.len = k;
      after_tag(L, end_sign == '-' ? '-' : '+', true);
      if (!lex_raw(L, &line_starting)) return;
      continue;
    }
    line_starting = after_tag(L, end_sign, kind == '%');
  }
}

/* ---- parser ---- */
typedef struct parser {
  lexer *L;
  rx_chat_template *t;
  size_t i;
  int depth;
} parser;

static tk *cur(parser *P) { return &P->L->toks.data[P->i]; }
static tk *peek(parser *P, size_t k) {
  size_t j = P->i + k;
  return &P->L->toks.data[j < P->L->toks.len ? j : P->L->toks.len - 1];
}

static const char *tk_desc(const tk *t, char *buf, size_t n) {
  switch (t->kind) {
  case TK_TEXT:
    return "template text";
  case TK_VAR_BEGIN:
    return "'{{'";
  case TK_VAR_END:
    return "'}}'";
  case TK_BLOCK_BEGIN:
    return "'{%'";
  case TK_BLOCK_END:
    return "'%}'";
  case TK_STRING:
    return "a string";
  case TK_INT:
    return "an integer";
  case TK_FLOAT:
    return "a float";
  case TK_EOF:
    return "the end of the template";
  case TK_NAME:
  case TK_OP:
    snprintf(buf, n, "'%s'", t->s);
    return buf;
  }
  return "?";
}

static void *p_fail(parser *P, const char *fmt, ...) RX_PRINTF(2, 3);
static void *p_fail(parser *P, const char *fmt, ...) {
  if (P->L->failed) return NULL;
  char msg[300], buf[64];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  tk *t = cur(P);
  lex_fail(P->L, t->line, t->col, "%s, found %s", msg, tk_desc(t, buf, sizeof buf));
  return NULL;
}

static bool is_op(parser *P, const char *op) {
  return cur(P)->kind == TK_OP && !strcmp(cur(P)->s, op);
}
static bool is_name(parser *P, const char *name) {
  return cur(P)->kind == TK_NAME && !strcmp(cur(P)->s, name);
}
static bool accept_op(parser *P, const char *op) {
  if (!is_op(P, op)) return false;
  P->i++;
  return true;
}
static bool accept_name(parser *P, const char *name) {
  if (!is_name(P, name)) return false;
  P->i++;
  return true;
}
static bool expect_op(parser *P, const char *op) {
  if (accept_op(P, op)) return true;
  p_fail(P, "expected '%s'", op);
  return false;
}

static jj_node *node(parser *P, jn_kind k, const tk *at) {
  jj_node *n = base_arena_alloc(&P->t->arena, sizeof *n);
  n->kind = k;
  n->line = at->line;
  n->col = at->col;
  return n;
}

static void list_push(parser *P, jn_list *l, jj_node *x) {
  if (l->n == l->cap) {
    size_t cap = l->cap ? l->cap * 2 : 4;
    jj_node **v = base_arena_alloc(&P->t->arena, cap * sizeof *v);
    if (l->n) memcpy(v, l->v, l->n * sizeof *v);
    l->v = v;
    l->cap = cap;
  }
  l->v[l->n++] = x;
}

static void names_push(parser *P, jj_node *n, const char *name) {
  const char **v = base_arena_alloc(&P->t->arena, (n->nnames + 1) * sizeof *v);
  if (n->nnames) memcpy(v, n->names, n->nnames * sizeof *v);
  v[n->nnames++] = name;
  n->names = v;
}

static jj_node *expr(parser *P);
static jj_node *expr_nocond(parser *P);
static jj_node *unary(parser *P, bool with_filter);

/* call arguments after '(' up to ')': positional into args, keywords into names/body2 */
static bool call_args(parser *P, jj_node *n) {
  while (!is_op(P, ")")) {
    if (n->args.n + n->body2.n && !expect_op(P, ",")) return false;
    if (is_op(P, ")")) break; /* a trailing comma */
    if (cur(P)->kind == TK_NAME && peek(P, 1)->kind == TK_OP && !strcmp(peek(P, 1)->s, "=")) {
      names_push(P, n, cur(P)->s);
      P->i += 2;
      jj_node *v = expr(P);
      if (!v) return false;
      list_push(P, &n->body2, v);
    } else {
      if (n->body2.n) return p_fail(P, "a positional argument after a keyword argument");
      jj_node *v = expr(P);
      if (!v) return false;
      list_push(P, &n->args, v);
    }
  }
  P->i++;
  return true;
}

static jj_node *constant(parser *P, const tk *at, jv_kind k) {
  jj_node *n = node(P, JN_CONST, at);
  jv *v = base_arena_alloc(&P->t->arena, sizeof *v);
  v->kind = k;
  n->value = v;
  return n;
}

static jj_node *primary(parser *P) {
  tk *t = cur(P);
  jj_node *n;
  if (t->kind == TK_NAME) {
    P->i++;
    if (!strcmp(t->s, "true") || !strcmp(t->s, "True") || !strcmp(t->s, "false") ||
        !strcmp(t->s, "False")) {
      n = constant(P, t, JV_BOOL);
      n->value->b = t->s[0] == 't' || t->s[0] == 'T';
    } else if (!strcmp(t->s, "none") || !strcmp(t->s, "None")) {
      n = constant(P, t, JV_NONE);
    } else {
      n = node(P, JN_NAME, t);
      n->name = t->s;
    }
    return n;
  }
  if (t->kind == TK_STRING) {
    rx_strbuf b = {0};
    base_strbuf_append(&b, "");
    while (cur(P)->kind == TK_STRING) { /* adjacent literals join */
      base_strbuf_appendn(&b, cur(P)->s, cur(P)->n);
      P->i++;
    }
    n = constant(P, t, JV_STR);
    n->value->s = base_arena_strndup(&P->t->arena, b.data, b.len);
    n->value->n = b.len;
    base_strbuf_free(&b);
    return n;
  }
  if (t->kind == TK_INT || t->kind == TK_FLOAT) {
    P->i++;
    n = constant(P, t, t->kind == TK_INT ? JV_INT : JV_FLOAT);
    n->value->i = t->i;
    n->value->f = t->f;
    return n;
  }
  if (accept_op(P, "(")) {
    if (accept_op(P, ")")) return node(P, JN_TUPLE, t);
    jj_node *e = expr(P);
    if (!e) return NULL;
    if (accept_op(P, ")")) return e;
    n = node(P, JN_TUPLE, t);
    list_push(P, &n->args, e);
    while (accept_op(P, ",")) {
      if (is_op(P, ")")) break;
      if (!(e = expr(P))) return NULL;
      list_push(P, &n->args, e);
    }
    return expect_op(P, ")") ? n : NULL;
  }
  if (accept_op(P, "[") || accept_op(P, "{")) {
    bool dict = t->s[0] == '{';
    n = node(P, dict ? JN_DICT : JN_LIST, t);
    const char *close = dict ? "}" : "]";
    while (!is_op(P, close)) {
      if (n->args.n && !expect_op(P, ",")) return NULL;
      if (is_op(P, close)) break;
      jj_node *e = expr(P);
      if (!e) return NULL;
      list_push(P, &n->args, e);
      if (dict) {
        if (!expect_op(P, ":") || !(e = expr(P))) return NULL;
        list_push(P, &n->args, e);
      }
    }
    P->i++;
    return n;
  }
  return p_fail(P, "expected an expression");
}

/* a[...] after '[': an index or a slice */
static jj_node *subscript(parser *P, jj_node *obj, const tk *at) {
  jj_node *parts[3] = {NULL, NULL, NULL};
  int k = 0;
  bool slice = false;
  for (;;) {
    if (!is_op(P, ":") && !is_op(P, "]")) {
      if (!(parts[k] = expr(P))) return NULL;
    }
    if (accept_op(P, ":")) {
      slice = true;
      if (++k > 2) return p_fail(P, "expected ']' (a slice has at most two ':')");
      continue;
    }
    break;
  }
  if (!expect_op(P, "]")) return NULL;
  if (!slice && !parts[0]) return p_fail(P, "expected an index inside '[]'");
  jj_node *n = node(P, slice ? JN_SLICE : JN_ITEM, at);
  n->a = obj;
  n->b = parts[0];
  n->c = parts[1];
  n->d = parts[2];
  return n;
}

static jj_node *postfix(parser *P, jj_node *n) {
  for (;;) {
    tk *t = cur(P);
    if (accept_op(P, ".")) {
      jj_node *a = node(P, JN_ATTR, t);
      a->a = n;
      if (cur(P)->kind == TK_NAME) {
        a->name = cur(P)->s;
      } else if (cur(P)->kind == TK_INT) { /* x.0 is x[0] */
        a->kind = JN_ITEM;
        a->b = constant(P, cur(P), JV_INT);
        a->b->value->i = cur(P)->i;
      } else {
        return p_fail(P, "expected an attribute name after '.'");
      }
      P->i++;
      n = a;
    } else if (accept_op(P, "[")) {
      if (!(n = subscript(P, n, t))) return NULL;
    } else if (accept_op(P, "(")) {
      jj_node *c = node(P, JN_CALL, t);
      c->line = n->line; /* errors of a call point at what is called */
      c->col = n->col;
      c->a = n;
      if (!call_args(P, c)) return NULL;
      n = c;
    } else {
      return n;
    }
  }
}

/* filters (| name(args)) and tests (is [not] name(args)) after a unary expression */
static jj_node *filter_expr(parser *P, jj_node *n) {
  for (;;) {
    tk *t = cur(P);
    if (accept_op(P, "|")) {
      if (cur(P)->kind != TK_NAME) return p_fail(P, "expected a filter name after '|'");
      jj_node *f = node(P, JN_FILTER, t);
      f->a = n;
      f->name = cur(P)->s;
      P->i++;
      while (accept_op(P, ".")) { /* a dotted filter name */
        if (cur(P)->kind != TK_NAME) return p_fail(P, "expected a name after '.'");
        f->name = base_arena_printf(&P->t->arena, "%s.%s", f->name, cur(P)->s);
        P->i++;
      }
      if (accept_op(P, "(") && !call_args(P, f)) return NULL;
      n = f;
    } else if (accept_name(P, "is")) {
      jj_node *f = node(P, JN_TEST, t);
      f->a = n;
      f->neg = accept_name(P, "not");
      if (cur(P)->kind != TK_NAME) return p_fail(P, "expected a test name after 'is'");
      f->name = cur(P)->s;
      P->i++;
      if (accept_op(P, "(")) {
        if (!call_args(P, f)) return NULL;
      } else if (cur(P)->kind == TK_STRING || cur(P)->kind == TK_INT || cur(P)->kind == TK_FLOAT ||
                 (cur(P)->kind == TK_NAME && !is_name(P, "and") && !is_name(P, "or") &&
                  !is_name(P, "else") && !is_name(P, "if") && !is_name(P, "in") &&
                  !is_name(P, "not") && !is_name(P, "is"))) {
        jj_node *arg = unary(P, false); /* `is sameas false`, `is equalto 3` */
        if (!arg) return NULL;
        list_push(P, &f->args, arg);
      }
      n = f;
    } else if (accept_op(P, "(")) {
      jj_node *c = node(P, JN_CALL, t);
      c->line = n->line; /* errors of a call point at what is called */
      c->col = n->col;
      c->a = n;
      if (!call_args(P, c)) return NULL;
      n = c;
    } else {
      return n;
    }
  }
}

static jj_node *unary(parser *P, bool with_filter) {
  if (++P->depth > JJ_MAX_DEPTH) return p_fail(P, "expressions nested too deeply");
  tk *t = cur(P);
  jj_node *n;
  if (accept_op(P, "-") || accept_op(P, "+")) {
    n = node(P, t->s[0] == '-' ? JN_NEG : JN_POS, t);
    if (!(n->a = unary(P, false))) return NULL;
  } else {
    if (!(n = primary(P))) return NULL;
  }
  if (!(n = postfix(P, n))) return NULL;
  if (with_filter && !(n = filter_expr(P, n))) return NULL;
  P->depth--;
  return n;
}

static jj_node *binop(parser *P, jj_node *a, int op, const tk *at, jj_node *b) {
  if (!b) return NULL;
  jj_node *n = node(P, JN_BINOP, at);
  n->op = op;
  n->a = a;
  n->b = b;
  return n;
}

static jj_node *power(parser *P) {
  jj_node *a = unary(P, true);
  while (a && is_op(P, "**")) {
    tk *t = cur(P);
    P->i++;
    a = binop(P, a, JJ_POW, t, unary(P, true));
  }
  return a;
}

static jj_node *math2(parser *P) {
  jj_node *a = power(P);
  static const char *const ops[] = {"*", "/", "//", "%"};
  static const int codes[] = {JJ_MUL, JJ_DIV, JJ_FLOORDIV, JJ_MOD};
  for (int k = 0; a && k < 4; k++) {
    if (is_op(P, ops[k])) {
      tk *t = cur(P);
      P->i++;
      a = binop(P, a, codes[k], t, power(P));
      k = -1;
    }
  }
  return a;
}

static jj_node *concat(parser *P) {
  jj_node *a = math2(P);
  while (a && is_op(P, "~")) {
    tk *t = cur(P);
    P->i++;
    a = binop(P, a, JJ_CONCAT, t, math2(P));
  }
  return a;
}

static jj_node *math1(parser *P) {
  jj_node *a = concat(P);
  while (a && (is_op(P, "+") || is_op(P, "-"))) {
    tk *t = cur(P);
    P->i++;
    a = binop(P, a, t->s[0] == '+' ? JJ_ADD : JJ_SUB, t, concat(P));
  }
  return a;
}

static jj_node *compare(parser *P) {
  jj_node *a = math1(P);
  if (!a) return NULL;
  jj_node *n = NULL;
  for (;;) {
    tk *t = cur(P);
    int op = -1;
    static const char *const ops[] = {"==", "!=", "<", "<=", ">", ">="};
    static const int codes[] = {JJ_EQ, JJ_NE, JJ_LT, JJ_LE, JJ_GT, JJ_GE};
    for (int k = 0; k < 6; k++)
      if (is_op(P, ops[k])) op = codes[k];
    if (op >= 0) {
      P->i++;
    } else if (is_name(P, "in")) {
      P->i++;
      op = JJ_IN;
    } else if (is_name(P, "not") && peek(P, 1)->kind == TK_NAME && !strcmp(peek(P, 1)->s, "in")) {
      P->i += 2;
      op = JJ_NOTIN;
    } else {
      return n ? n : a;
    }
    if (!n) {
      n = node(P, JN_COMPARE, t);
      n->a = a;
    }
    jj_node *b = math1(P);
    if (!b) return NULL;
    list_push(P, &n->args, b);
    int *codes2 = base_arena_alloc(&P->t->arena, n->args.n * sizeof *codes2);
    if (n->args.n > 1) memcpy(codes2, n->ops, (n->args.n - 1) * sizeof *codes2);
    codes2[n->args.n - 1] = op;
    n->ops = codes2;
  }
}

static jj_node *not_expr(parser *P) {
  tk *t = cur(P);
  if (accept_name(P, "not")) {
    if (++P->depth > JJ_MAX_DEPTH) return p_fail(P, "expressions nested too deeply");
    jj_node *n = node(P, JN_NOT, t);
    if (!(n->a = not_expr(P))) return NULL;
    P->depth--;
    return n;
  }
  return compare(P);
}

static jj_node *and_expr(parser *P) {
  jj_node *a = not_expr(P);
  while (a && is_name(P, "and")) {
    tk *t = cur(P);
    P->i++;
    jj_node *n = node(P, JN_AND, t);
    n->a = a;
    if (!(n->b = not_expr(P))) return NULL;
    a = n;
  }
  return a;
}

static jj_node *or_expr(parser *P) {
  jj_node *a = and_expr(P);
  while (a && is_name(P, "or")) {
    tk *t = cur(P);
    P->i++;
    jj_node *n = node(P, JN_OR, t);
    n->a = a;
    if (!(n->b = and_expr(P))) return NULL;
    a = n;
  }
  return a;
}

static jj_node *expr_nocond(parser *P) { return or_expr(P); }

/* a if b else c (right-nested) */
static jj_node *expr(parser *P) {
  if (++P->depth > JJ_MAX_DEPTH) return p_fail(P, "expressions nested too deeply");
  jj_node *a = or_expr(P);
  while (a && is_name(P, "if")) {
    tk *t = cur(P);
    P->i++;
    jj_node *n = node(P, JN_COND, t);
    n->a = a;
    if (!(n->b = or_expr(P))) return NULL;
    if (accept_name(P, "else") && !(n->c = expr(P))) return NULL;
    a = n;
  }
  P->depth--;
  return a;
}

/* ---- statements ---- */
static bool body(parser *P, jn_list *out, const char *const *stops, const char *opener,
                 const tk *at);

static bool block_end(parser *P) {
  if (cur(P)->kind == TK_BLOCK_END) {
    P->i++;
    return true;
  }
  p_fail(P, "expected '%%}'");
  return false;
}

/* for/set targets: a name or names separated by commas (optionally in parentheses) */
static bool targets(parser *P, jj_node *n) {
  bool paren = accept_op(P, "(");
  do {
    if (cur(P)->kind != TK_NAME) return p_fail(P, "expected a variable name");
    names_push(P, n, cur(P)->s);
    P->i++;
  } while (accept_op(P, ","));
  return !paren || expect_op(P, ")");
}

static jj_node *stmt_if(parser *P, const tk *at) {
  static const char *const stops[] = {"elif", "else", "endif", NULL};
  jj_node *n = node(P, JN_IF, at);
  if (!(n->a = expr(P)) || !block_end(P) || !body(P, &n->args, stops, "if", at)) return NULL;
  tk *t = cur(P);
  if (accept_name(P, "elif")) {
    jj_node *e = stmt_if(P, t);
    if (!e) return NULL;
    list_push(P, &n->body2, e);
    return n; /* the nested if consumed the endif */
  }
  if (accept_name(P, "else")) {
    static const char *const stops2[] = {"endif", NULL};
    if (!block_end(P) || !body(P, &n->body2, stops2, "if", at)) return NULL;
  }
  if (!accept_name(P, "endif")) return p_fail(P, "expected 'endif'");
  return block_end(P) ? n : NULL;
}

static jj_node *stmt_for(parser *P, const tk *at) {
  static const char *const stops[] = {"else", "endfor", NULL};
  jj_node *n = node(P, JN_FOR, at);
  if (!targets(P, n)) return NULL;
  if (!accept_name(P, "in")) return p_fail(P, "expected 'in'");
  if (!(n->a = expr_nocond(P))) return NULL;
  if (accept_name(P, "if") && !(n->b = expr_nocond(P))) return NULL;
  accept_name(P, "recursive");
  if (!block_end(P) || !body(P, &n->args, stops, "for", at)) return NULL;
  if (accept_name(P, "else")) {
    static const char *const stops2[] = {"endfor", NULL};
    if (!block_end(P) || !body(P, &n->body2, stops2, "for", at)) return NULL;
  }
  if (!accept_name(P, "endfor")) return p_fail(P, "expected 'endfor'");
  return block_end(P) ? n : NULL;
}

static jj_node *stmt_set(parser *P, const tk *at) {
  jj_node *n = node(P, JN_SET, at);
  if (cur(P)->kind == TK_NAME && peek(P, 1)->kind == TK_OP && !strcmp(peek(P, 1)->s, ".")) {
    n->name = cur(P)->s;
    P->i += 2;
    if (cur(P)->kind != TK_NAME) return p_fail(P, "expected an attribute name");
    n->name2 = cur(P)->s;
    P->i++;
  } else {
    if (!targets(P, n)) return NULL;
    n->name = n->names[0];
  }
  if (cur(P)->kind == TK_BLOCK_END && !n->name2 &&
      n->nnames == 1) { /* {% set x %}...{% endset %} */
    static const char *const stops[] = {"endset", NULL};
    n->kind = JN_SETBLOCK;
    P->i++;
    if (!body(P, &n->args, stops, "set", at)) return NULL;
    P->i++;
    return block_end(P) ? n : NULL;
  }
  if (!expect_op(P, "=")) return NULL;
  if (!(n->a = expr(P))) return NULL;
  if (is_op(P, ",")) { /* set a, b = 1, 2: the right side is a tuple */
    jj_node *tup = node(P, JN_TUPLE, at);
    list_push(P, &tup->args, n->a);
    while (accept_op(P, ",")) {
      jj_node *e = expr(P);
      if (!e) return NULL;
      list_push(P, &tup->args, e);
    }
    n->a = tup;
  }
  return block_end(P) ? n : NULL;
}

static jj_node *stmt_macro(parser *P, const tk *at) {
  static const char *const stops[] = {"endmacro", NULL};
  jj_node *n = node(P, JN_MACRO, at);
  if (cur(P)->kind != TK_NAME) return p_fail(P, "expected the macro's name");
  n->name = cur(P)->s;
  P->i++;
  if (!expect_op(P, "(")) return NULL;
  while (!is_op(P, ")")) {
    if (n->nnames && !expect_op(P, ",")) return NULL;
    if (cur(P)->kind != TK_NAME) return p_fail(P, "expected a parameter name");
    names_push(P, n, cur(P)->s);
    P->i++;
    jj_node *def = NULL;
    if (accept_op(P, "=") && !(def = expr(P))) return NULL;
    if (!def && n->body2.n) {
      for (size_t k = 0; k < n->body2.n; k++)
        if (n->body2.v[k]) return p_fail(P, "a parameter without a default after one with");
    }
    list_push(P, &n->body2, def);
  }
  P->i++;
  if (!block_end(P) || !body(P, &n->args, stops, "macro", at)) return NULL;
  P->i++;
  if (cur(P)->kind == TK_NAME) P->i++; /* {% endmacro name %} */
  return block_end(P) ? n : NULL;
}

/* one {% ... %} statement, after its '{%' */
static jj_node *statement(parser *P) {
  tk *t = cur(P);
  if (t->kind != TK_NAME) return p_fail(P, "expected a statement name after '{%%'");
  P->i++;
  if (!strcmp(t->s, "if")) return stmt_if(P, t);
  if (!strcmp(t->s, "for")) return stmt_for(P, t);
  if (!strcmp(t->s, "set")) return stmt_set(P, t);
  if (!strcmp(t->s, "macro")) return stmt_macro(P, t);
  if (!strcmp(t->s, "break") || !strcmp(t->s, "continue")) {
    jj_node *n = node(P, t->s[0] == 'b' ? JN_BREAK : JN_CONTINUE, t);
    return block_end(P) ? n : NULL;
  }
  if (!strcmp(t->s, "generation")) { /* transformers' AssistantTracker: renders its body */
    static const char *const stops[] = {"endgeneration", NULL};
    jj_node *n = node(P, JN_BLOCK, t);
    if (!block_end(P) || !body(P, &n->args, stops, "generation", t)) return NULL;
    P->i++;
    return block_end(P) ? n : NULL;
  }
  P->i--;
  return p_fail(P, "expected a statement (if, for, set, macro, break, continue, generation)");
}

/* Statements and text until a block whose name is in stops (left unconsumed, past its '{%'), or
 * the end of the template when stops is NULL. */
static bool body(parser *P, jn_list *out, const char *const *stops, const char *opener,
                 const tk *at) {
  if (++P->depth > JJ_MAX_DEPTH) return p_fail(P, "statements nested too deeply");
  for (;;) {
    tk *t = cur(P);
    if (t->kind == TK_EOF) {
      if (!stops) break;
      lex_fail(P->L, at->line, at->col,
               "this '%s' has no end (expected '%s' before the end of "
               "the template)",
               opener, stops[0] && strcmp(stops[0], "elif") ? stops[0] : "endif");
      return false;
    }
    if (t->kind == TK_TEXT) {
      jj_node *n = node(P, JN_TEXT, t);
      n->name = t->s;
      n->len = t->n;
      list_push(P, out, n);
      P->i++;
    } else if (t->kind == TK_VAR_BEGIN) {
      P->i++;
      jj_node *n = node(P, JN_OUTPUT, t);
      if (!(n->a = expr(P))) return false;
      if (cur(P)->kind != TK_VAR_END) return p_fail(P, "expected '}}'");
      P->i++;
      list_push(P, out, n);
    } else if (t->kind == TK_BLOCK_BEGIN) {
      tk *name = peek(P, 1);
      if (name->kind == TK_NAME && stops)
        for (const char *const *s = stops; *s; s++)
          if (!strcmp(*s, name->s)) {
            P->i++;
            P->depth--;
            return true;
          }
      if (name->kind == TK_NAME &&
          (!strncmp(name->s, "end", 3) || !strcmp(name->s, "elif") || !strcmp(name->s, "else"))) {
        P->i++;
        p_fail(P, stops ? "expected '%s' to close the '%s'" : "an unexpected tag%s%s",
               stops ? stops[0] : "", stops ? opener : "");
        return false;
      }
      P->i++;
      jj_node *n = statement(P);
      if (!n) return false;
      list_push(P, out, n);
    } else {
      p_fail(P, "expected template text or a tag");
      return false;
    }
  }
  P->depth--;
  return true;
}

rx_status jj_parse(rx_chat_template *t, const char *text, size_t len) {
  /* newlines as jinja2 reads them: \r\n and \r are \n; one trailing newline dropped */
  char *src = base_arena_alloc(&t->arena, len + 1);
  size_t n = 0;
  for (size_t i = 0; i < len; i++) {
    if (text[i] == '\r') {
      src[n++] = '\n';
      if (i + 1 < len && text[i + 1] == '\n') i++;
    } else {
      src[n++] = text[i];
    }
  }
  if (n && src[n - 1] == '\n') n--;
  src[n] = 0;
  lexer L = {.t = t, .src = src, .len = n, .line = 1, .col = 1};
  lex(&L);
  push(&L, TK_EOF, L.line, L.col, NULL, 0);
  if (!L.failed) {
    parser P = {.L = &L, .t = t};
    body(&P, &t->body, NULL, NULL, NULL);
  }
  free(L.toks.data);
  if (L.failed) return base_status_make(RX_ERR_INVALID, "%s", L.err);
  return NULL;
}
