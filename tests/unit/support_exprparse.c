/* Test-only recursive-descent parser of symbolic expressions (see support_exprparse.h). */
#include "support_exprparse.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct parser {
  rx_expr_ctx *ctx;
  const char *s, *p;
  char *err;
  size_t errlen;
  bool failed;
} parser;

static const rx_expr *fail(parser *ps, const char *what) {
  if (!ps->failed && ps->err && ps->errlen)
    snprintf(ps->err, ps->errlen, "col %d: %s", (int)(ps->p - ps->s) + 1, what);
  ps->failed = true;
  return NULL;
}

static void skip(parser *ps) {
  while (isspace((unsigned char)*ps->p)) ps->p++;
}

/* consumes tok when it comes next (and is not the start of a longer operator) */
static bool eat(parser *ps, const char *tok) {
  skip(ps);
  size_t n = strlen(tok);
  if (strncmp(ps->p, tok, n) != 0) return false;
  char nx = ps->p[n];
  if ((!strcmp(tok, "<") || !strcmp(tok, ">") || !strcmp(tok, "!")) && nx == '=') return false;
  if (!strcmp(tok, "/") && nx == '/') return false;
  ps->p += n;
  return true;
}

static const rx_expr *bin(parser *ps, rx_expr_kind k, const rx_expr *a, const rx_expr *b) {
  if (!a || !b) return NULL;
  return sym_expr_raw(ps->ctx, k, a, b, NULL);
}

static const rx_expr *p_or(parser *ps);

/* digits as a magnitude; *ok false past 2^63 */
static uint64_t digits(parser *ps, bool *ok) {
  uint64_t v = 0;
  *ok = true;
  while (isdigit((unsigned char)*ps->p)) {
    unsigned d = (unsigned)(*ps->p++ - '0');
    if (v > (UINT64_C(1) << 63) / 10 || v * 10 + d > (UINT64_C(1) << 63))
      *ok = false;
    else
      v = v * 10 + d;
  }
  return v;
}

static const rx_expr *p_primary(parser *ps) {
  skip(ps);
  if (isdigit((unsigned char)*ps->p)) {
    bool ok;
    uint64_t v = digits(ps, &ok);
    if (!ok || v > (uint64_t)INT64_MAX) return fail(ps, "integer out of range");
    return sym_expr_const(ps->ctx, (int64_t)v);
  }
  if (isalpha((unsigned char)*ps->p) || *ps->p == '_') {
    const char *b = ps->p;
    while (isalnum((unsigned char)*ps->p) || *ps->p == '_') ps->p++;
    size_t n = (size_t)(ps->p - b);
    int nargs = 0;
    rx_expr_kind k = RX_EXPR_VAR;
    if (n == 3 && !strncmp(b, "min", 3))
      k = RX_EXPR_MIN, nargs = 2;
    else if (n == 3 && !strncmp(b, "max", 3))
      k = RX_EXPR_MAX, nargs = 2;
    else if (n == 6 && !strncmp(b, "select", 6))
      k = RX_EXPR_SELECT, nargs = 3;
    if (k != RX_EXPR_VAR) {
      skip(ps);
      if (*ps->p == '(') {
        ps->p++;
        const rx_expr *a[3] = {0};
        for (int i = 0; i < nargs; i++) {
          if (i && !eat(ps, ",")) return fail(ps, "expected ','");
          if (!(a[i] = p_or(ps))) return NULL;
        }
        if (!eat(ps, ")")) return fail(ps, "expected ')'");
        return sym_expr_raw(ps->ctx, k, a[0], a[1], a[2]);
      }
    }
    char name[256];
    if (n >= sizeof name) return fail(ps, "name too long");
    memcpy(name, b, n);
    name[n] = 0;
    return sym_expr_var(ps->ctx, name);
  }
  if (eat(ps, "(")) {
    const rx_expr *e = p_or(ps);
    if (!e) return NULL;
    if (!eat(ps, ")")) return fail(ps, "expected ')'");
    return e;
  }
  return fail(ps, "expected an expression");
}

static const rx_expr *p_unary(parser *ps) {
  skip(ps);
  if (*ps->p == '-') {
    ps->p++;
    skip(ps);
    if (isdigit((unsigned char)*ps->p)) {
      bool ok;
      uint64_t v = digits(ps, &ok);
      if (!ok) return fail(ps, "integer out of range");
      return sym_expr_const(ps->ctx, v == (UINT64_C(1) << 63) ? INT64_MIN : -(int64_t)v);
    }
    const rx_expr *x = p_unary(ps);
    return x ? sym_expr_raw(ps->ctx, RX_EXPR_SUB, sym_expr_const(ps->ctx, 0), x, NULL) : NULL;
  }
  return p_primary(ps);
}

static const rx_expr *p_mul(parser *ps) {
  const rx_expr *e = p_unary(ps);
  while (e) {
    if (eat(ps, "*"))
      e = bin(ps, RX_EXPR_MUL, e, p_unary(ps));
    else if (eat(ps, "//"))
      e = bin(ps, RX_EXPR_FLOORDIV, e, p_unary(ps));
    else if (eat(ps, "%"))
      e = bin(ps, RX_EXPR_FLOORMOD, e, p_unary(ps));
    else
      break;
  }
  return e;
}

static const rx_expr *p_add(parser *ps) {
  const rx_expr *e = p_mul(ps);
  while (e) {
    if (eat(ps, "+"))
      e = bin(ps, RX_EXPR_ADD, e, p_mul(ps));
    else if (eat(ps, "-"))
      e = bin(ps, RX_EXPR_SUB, e, p_mul(ps));
    else
      break;
  }
  return e;
}

static const rx_expr *p_cmp(parser *ps) {
  static const struct {
    const char *tok;
    rx_expr_kind k;
  } ops[] = {{"==", RX_EXPR_EQ}, {"!=", RX_EXPR_NE}, {"<=", RX_EXPR_LE},
             {">=", RX_EXPR_GE}, {"<", RX_EXPR_LT},  {">", RX_EXPR_GT}};
  const rx_expr *e = p_add(ps);
  while (e) {
    size_t i = 0;
    while (i < RX_ARRAY_LEN(ops) && !eat(ps, ops[i].tok)) i++;
    if (i == RX_ARRAY_LEN(ops)) break;
    e = bin(ps, ops[i].k, e, p_add(ps));
  }
  return e;
}

static const rx_expr *p_not(parser *ps) {
  if (eat(ps, "!")) {
    const rx_expr *x = p_not(ps);
    return x ? sym_expr_raw(ps->ctx, RX_EXPR_NOT, x, NULL, NULL) : NULL;
  }
  return p_cmp(ps);
}

static const rx_expr *p_and(parser *ps) {
  const rx_expr *e = p_not(ps);
  while (e && eat(ps, "&&")) e = bin(ps, RX_EXPR_AND, e, p_not(ps));
  return e;
}

static const rx_expr *p_or(parser *ps) {
  const rx_expr *e = p_and(ps);
  while (e && eat(ps, "||")) e = bin(ps, RX_EXPR_OR, e, p_and(ps));
  return e;
}

const rx_expr *rx_test_parse(rx_expr_ctx *ctx, const char *text, char *err, size_t errlen) {
  parser ps = {ctx, text, text, err, errlen, false};
  if (err && errlen) err[0] = 0;
  const rx_expr *e = p_or(&ps);
  skip(&ps);
  if (e && *ps.p) return fail(&ps, "unexpected text after the expression");
  return ps.failed ? NULL : e;
}

const rx_expr *rx_test_parse_simplified(rx_expr_ctx *ctx, const char *text) {
  char err[200];
  const rx_expr *e = rx_test_parse(ctx, text, err, sizeof err);
  if (!e) {
    fprintf(stderr, "test expression does not parse: \"%s\": %s\n", text, err);
    abort();
  }
  return sym_expr_simplify(ctx, e);
}
