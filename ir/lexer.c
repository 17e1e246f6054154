/* The lexer of the text format (docs/text-format.md): the whole source to a token array. */
#include "parse.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct lexer {
  rx_module *m;
  const rx_source *src;
  const char *error; /* message of the current token's lexical error, or NULL */
  size_t pos;
  uint32_t line, col;
  RX_VEC(rx_tok) toks;
} lexer;

static bool is_alpha(int c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
static bool is_digit(int c) { return c >= '0' && c <= '9'; }
static int peek(const lexer *L, size_t k) {
  return L->pos + k < L->src->len ? (unsigned char)L->src->text[L->pos + k] : -1;
}

static rx_loc here(const lexer *L) {
  return (rx_loc){.src = L->src, .line = L->line, .col = L->col, .offset = (uint32_t)L->pos};
}

static void advance(lexer *L, size_t n) {
  for (size_t i = 0; i < n && L->pos < L->src->len; i++) {
    if (L->src->text[L->pos] == '\n') {
      L->line++;
      L->col = 1;
    } else {
      L->col++;
    }
    L->pos++;
  }
}

static bool lex_number(lexer *L, rx_tok *t, bool after_dot) {
  size_t start = L->pos;
  uint64_t u = 0;
  bool overflow = false;
  while (is_digit(peek(L, 0))) {
    unsigned d = (unsigned)(peek(L, 0) - '0');
    if (u > (UINT64_C(1) << 63) / 10 || u * 10 + d > (UINT64_C(1) << 63)) overflow = true;
    if (!overflow) u = u * 10 + d;
    advance(L, 1);
  }
  bool is_float = false;
  if (!after_dot) {
    if (peek(L, 0) == '.' && is_digit(peek(L, 1))) {
      is_float = true;
      advance(L, 1);
      while (is_digit(peek(L, 0))) advance(L, 1);
    }
    int e1 = peek(L, 1);
    if ((peek(L, 0) == 'e' || peek(L, 0) == 'E') &&
        (is_digit(e1) || ((e1 == '+' || e1 == '-') && is_digit(peek(L, 2))))) {
      is_float = true;
      advance(L, 2);
      while (is_digit(peek(L, 0))) advance(L, 1);
    }
  }
  if (is_alpha(peek(L, 0))) {
    L->error = base_arena_printf(&L->m->arena, "expected a separator after a number, found '%c'",
                                 (char)peek(L, 0));
    while (is_alpha(peek(L, 0)) || is_digit(peek(L, 0))) advance(L, 1);
    return false;
  }
  if (is_float) {
    char *s = base_arena_strndup(&L->m->arena, L->src->text + start, L->pos - start);
    t->kind = RX_TOK_FLOAT;
    t->f = strtod(s, NULL);
  } else {
    t->kind = RX_TOK_INT;
    t->u = u;
    t->overflow = overflow;
  }
  return true;
}

static bool lex_string(lexer *L, rx_tok *t) {
  advance(L, 1);
  rx_strbuf b = {0};
  for (;;) {
    int c = peek(L, 0);
    if (c < 0 || c == '\n') {
      base_strbuf_free(&b);
      L->error = "unterminated string literal: expected '\"' before the end of the line";
      return false;
    }
    if (c == '"') break;
    if (c == '\\') {
      int e = peek(L, 1);
      if (e != '"' && e != '\\') {
        base_strbuf_free(&b);
        L->error = "unknown escape in string literal: expected '\\\"' or '\\\\'";
        while (peek(L, 0) >= 0 && peek(L, 0) != '\n') advance(L, 1);
        return false;
      }
      base_strbuf_putc(&b, (char)e);
      advance(L, 2);
      continue;
    }
    base_strbuf_putc(&b, (char)c);
    advance(L, 1);
  }
  advance(L, 1);
  t->kind = RX_TOK_STRING;
  t->s = base_arena_strndup(&L->m->arena, b.data ? b.data : "", b.len);
  base_strbuf_free(&b);
  return true;
}

/* Punctuation, longest first. */
static const struct {
  const char *text;
  rx_tok_kind kind;
} puncts[] = {
    {"...", RX_TOK_ELLIPSIS}, {"..", RX_TOK_DOTDOT},     {"->", RX_TOK_ARROW},
    {"==", RX_TOK_EQ},        {"!=", RX_TOK_NE},         {"<=", RX_TOK_LE},
    {">=", RX_TOK_GE},        {"//", RX_TOK_SLASHSLASH}, {"&&", RX_TOK_ANDAND},
    {"||", RX_TOK_OROR},      {"(", RX_TOK_LPAREN},      {")", RX_TOK_RPAREN},
    {"[", RX_TOK_LBRACKET},   {"]", RX_TOK_RBRACKET},    {"{", RX_TOK_LBRACE},
    {"}", RX_TOK_RBRACE},     {",", RX_TOK_COMMA},       {":", RX_TOK_COLON},
    {";", RX_TOK_SEMI},       {".", RX_TOK_DOT},         {"=", RX_TOK_ASSIGN},
    {"<", RX_TOK_LT},         {">", RX_TOK_GT},          {"+", RX_TOK_PLUS},
    {"-", RX_TOK_MINUS},      {"*", RX_TOK_STAR},        {"/", RX_TOK_SLASH},
    {"%", RX_TOK_PERCENT},    {"!", RX_TOK_BANG},        {"@", RX_TOK_AT},
};

bool ir_lex(rx_module *m, const rx_source *src, rx_diag *diag, rx_tok **out_toks, int *out_n) {
  lexer L = {.m = m, .src = src, .line = 1, .col = 1};
  bool nl = true;
  *out_toks = NULL;
  *out_n = 0;
  for (;;) {
    int c = peek(&L, 0);
    if (c == '\n') {
      nl = true;
      advance(&L, 1);
      continue;
    }
    if (c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v') {
      advance(&L, 1);
      continue;
    }
    if (c == '#') {
      while (peek(&L, 0) >= 0 && peek(&L, 0) != '\n') advance(&L, 1);
      continue;
    }
    rx_tok t = {.loc = here(&L), .nl = nl};
    size_t start = L.pos;
    if (c < 0) {
      t.kind = RX_TOK_EOF;
      RX_VEC_PUSH(&L.toks, t);
      break;
    }
    if (is_alpha(c)) {
      while (is_alpha(peek(&L, 0)) || is_digit(peek(&L, 0))) advance(&L, 1);
      /* dotted names: threadIdx.x */
      while (peek(&L, 0) == '.' && is_alpha(peek(&L, 1))) {
        advance(&L, 1);
        while (is_alpha(peek(&L, 0)) || is_digit(peek(&L, 0))) advance(&L, 1);
      }
      size_t n = L.pos - start;
      const char *s = src->text + start;
      t.kind = RX_TOK_IDENT;
      if (n == 3 && memcmp(s, "inf", 3) == 0) {
        t.kind = RX_TOK_FLOAT;
        t.f = INFINITY;
      } else if (n == 3 && memcmp(s, "nan", 3) == 0) {
        t.kind = RX_TOK_FLOAT;
        t.f = NAN;
      }
    } else if (is_digit(c)) {
      bool after_dot = L.toks.len > 0 && L.toks.data[L.toks.len - 1].kind == RX_TOK_DOT &&
                       L.toks.data[L.toks.len - 1].loc.offset + 1 == start;
      lex_number(&L, &t, after_dot);
    } else if (c == '"') {
      lex_string(&L, &t);
    } else {
      bool found = false;
      for (size_t i = 0; i < RX_ARRAY_LEN(puncts); i++) {
        size_t n = strlen(puncts[i].text);
        if (L.pos + n <= src->len && memcmp(src->text + L.pos, puncts[i].text, n) == 0) {
          t.kind = puncts[i].kind;
          advance(&L, n);
          found = true;
          break;
        }
      }
      if (!found) {
        if (c >= 0x20 && c < 0x7f)
          L.error = base_arena_printf(&m->arena, "unexpected character '%c'", (char)c);
        else
          L.error = base_arena_printf(&m->arena, "unexpected byte 0x%02x", (unsigned)c);
        advance(&L, 1);
      }
    }
    if (L.error) {
      t.kind = RX_TOK_ERROR;
      t.s = L.error;
      L.error = NULL;
    }
    t.len = (uint32_t)(L.pos - start);
    nl = false;
    RX_VEC_PUSH(&L.toks, t);
  }
  (void)diag;
  *out_toks = base_arena_dup(&m->arena, L.toks.data, sizeof *L.toks.data * L.toks.len);
  *out_n = (int)L.toks.len;
  free(L.toks.data);
  return true;
}

const char *ir_tok_describe(rx_module *m, const rx_tok *t) {
  if (t->kind == RX_TOK_EOF) return "end of file";
  if (t->kind == RX_TOK_ERROR) return "invalid input";
  uint32_t n = t->len > 40 ? 40 : t->len;
  return base_arena_printf(&m->arena, "'%.*s%s'", (int)n, t->loc.src->text + t->loc.offset,
                           t->len > 40 ? "..." : "");
}
