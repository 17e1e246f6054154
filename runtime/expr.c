/* runtime/expr.c: evaluates symbolic expressions written in the text syntax of kernels.json
 * (docs/text-format.md, "Symbolic expressions") for given values of their names.
 *
 * A recursive-descent parser that evaluates as it parses, with 64-bit integers. Precedence,
 * loosest first: ||, &&, !, comparisons (not chained), + -, * // %, unary -. `//` and `%` are
 * floor division and floor modulo (the result of % has the sign of the divisor). The branches
 * that do not count (the unselected arm of select, the right side of a short-circuited && or ||)
 * are parsed but their arithmetic errors (division by zero, overflow) are ignored, so
 * `select(n == 0, 0, m // n)` is fine at n = 0. */
#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "runtime/device.h"

typedef struct ep {
  const char *text, *p;
  const rx_rt_symbols *syms;
  rx_status err; /* the first error */
} ep;

static bool fail(ep *e, rx_status_code code, const char *fmt, const char *arg) {
  if (!e->err) {
    char msg[256];
    snprintf(msg, sizeof msg, fmt, arg);
    e->err = rx_status_make(code, "in expression '%s': column %d: %s", e->text,
                            (int)(e->p - e->text) + 1, msg);
  }
  return false;
}

static void skip(ep *e) {
  while (*e->p == ' ' || *e->p == '\t' || *e->p == '\n' || *e->p == '\r') e->p++;
}

/* Consumes tok (after spaces) when it is next. */
static bool eat(ep *e, const char *tok) {
  skip(e);
  size_t n = strlen(tok);
  if (strncmp(e->p, tok, n) != 0) return false;
  e->p += n;
  return true;
}

static bool expect(ep *e, const char *tok) {
  if (eat(e, tok)) return true;
  return fail(e, RX_ERR_INVALID, "expected '%s'", tok);
}

static bool arith_error(ep *e, bool live, const char *what) {
  if (!live) return true; /* a branch that does not count */
  return fail(e, RX_ERR_INVALID, "%s", what);
}

static bool floordiv(ep *e, bool live, int64_t a, int64_t b, int64_t *out) {
  *out = 0;
  if (b == 0) return arith_error(e, live, "division by zero");
  if (a == INT64_MIN && b == -1) return arith_error(e, live, "64-bit overflow in //");
  int64_t q = a / b;
  if (a % b != 0 && ((a < 0) != (b < 0))) q--;
  *out = q;
  return true;
}

static bool floormod(ep *e, bool live, int64_t a, int64_t b, int64_t *out) {
  *out = 0;
  if (b == 0) return arith_error(e, live, "modulo by zero");
  if (b == -1) return true; /* also avoids INT64_MIN % -1 */
  int64_t r = a % b;
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  *out = r;
  return true;
}

static bool parse_or(ep *e, bool live, int64_t *out);

static bool parse_primary(ep *e, bool live, int64_t *out) {
  *out = 0;
  skip(e);
  const char *s = e->p;
  if (*s == '(') {
    e->p++;
    if (!parse_or(e, live, out)) return false;
    return expect(e, ")");
  }
  if (isdigit((unsigned char)*s)) {
    int64_t v = 0;
    while (isdigit((unsigned char)*e->p)) {
      int d = *e->p - '0';
      if (v > (INT64_MAX - d) / 10) return fail(e, RX_ERR_INVALID, "%s", "integer out of range");
      v = v * 10 + d;
      e->p++;
    }
    if (isalpha((unsigned char)*e->p) || *e->p == '_')
      return fail(e, RX_ERR_INVALID, "%s", "malformed number");
    *out = v;
    return true;
  }
  if (isalpha((unsigned char)*s) || *s == '_') {
    while (isalnum((unsigned char)*e->p) || *e->p == '_') e->p++;
    size_t n = (size_t)(e->p - s);
    const char *after = e->p;
    skip(e);
    if (*e->p == '(') {
      bool is_min = n == 3 && !strncmp(s, "min", 3), is_max = n == 3 && !strncmp(s, "max", 3);
      bool is_sel = n == 6 && !strncmp(s, "select", 6);
      if (!is_min && !is_max && !is_sel) {
        e->p = s;
        char name[64];
        snprintf(name, sizeof name, "%.*s", (int)(n < 63 ? n : 63), s);
        return fail(e, RX_ERR_INVALID, "unknown function '%s' (expected min, max or select)", name);
      }
      e->p++;
      int64_t a, b;
      if (is_sel) {
        int64_t c;
        if (!parse_or(e, live, &c) || !expect(e, ",")) return false;
        if (!parse_or(e, live && c != 0, &a) || !expect(e, ",")) return false;
        if (!parse_or(e, live && c == 0, &b) || !expect(e, ")")) return false;
        *out = c ? a : b;
        return true;
      }
      if (!parse_or(e, live, &a) || !expect(e, ",") || !parse_or(e, live, &b) || !expect(e, ")"))
        return false;
      *out = is_min ? (a < b ? a : b) : (a > b ? a : b);
      return true;
    }
    e->p = after;
    if (e->syms)
      for (size_t i = 0; i < e->syms->count; i++)
        if (e->syms->names[i] && strlen(e->syms->names[i]) == n &&
            !strncmp(e->syms->names[i], s, n)) {
          *out = e->syms->values[i];
          return true;
        }
    e->p = s;
    char name[64];
    snprintf(name, sizeof name, "%.*s", (int)(n < 63 ? n : 63), s);
    return fail(e, RX_ERR_NOT_FOUND, "no value given for the symbolic variable '%s'", name);
  }
  if (*s == '\0') return fail(e, RX_ERR_INVALID, "%s", "unexpected end of expression");
  char c[2] = {*s, 0};
  return fail(e, RX_ERR_INVALID, "unexpected character '%s'", c);
}

static bool parse_unary(ep *e, bool live, int64_t *out) {
  if (eat(e, "-")) {
    int64_t v;
    if (!parse_unary(e, live, &v)) return false;
    if (v == INT64_MIN) return arith_error(e, live, "64-bit overflow in unary -");
    *out = -v;
    return true;
  }
  return parse_primary(e, live, out);
}

static bool parse_mul(ep *e, bool live, int64_t *out) {
  if (!parse_unary(e, live, out)) return false;
  for (;;) {
    int op;
    if (eat(e, "*"))
      op = '*';
    else if (eat(e, "//"))
      op = '/';
    else if (eat(e, "%"))
      op = '%';
    else {
      skip(e);
      if (*e->p == '/') return fail(e, RX_ERR_INVALID, "%s", "'/' is not integer division: use //");
      return true;
    }
    int64_t b, r = 0;
    if (!parse_unary(e, live, &b)) return false;
    if (op == '*') {
      if (__builtin_mul_overflow(*out, b, &r) && !arith_error(e, live, "64-bit overflow in *"))
        return false;
    } else if (op == '/') {
      if (!floordiv(e, live, *out, b, &r)) return false;
    } else if (!floormod(e, live, *out, b, &r))
      return false;
    *out = r;
  }
}

static bool parse_add(ep *e, bool live, int64_t *out) {
  if (!parse_mul(e, live, out)) return false;
  for (;;) {
    int op;
    if (eat(e, "+"))
      op = '+';
    else if (eat(e, "-"))
      op = '-';
    else
      return true;
    int64_t b, r = 0;
    if (!parse_mul(e, live, &b)) return false;
    bool ovf =
        op == '+' ? __builtin_add_overflow(*out, b, &r) : __builtin_sub_overflow(*out, b, &r);
    if (ovf && !arith_error(e, live, op == '+' ? "64-bit overflow in +" : "64-bit overflow in -"))
      return false;
    *out = r;
  }
}

static int cmp_op(ep *e) {
  static const char *const ops[] = {"==", "!=", "<=", ">=", "<", ">"};
  for (int i = 0; i < 6; i++)
    if (eat(e, ops[i])) return i + 1;
  return 0;
}

static bool parse_cmp(ep *e, bool live, int64_t *out) {
  if (!parse_add(e, live, out)) return false;
  int op = cmp_op(e);
  if (!op) return true;
  int64_t b;
  if (!parse_add(e, live, &b)) return false;
  int64_t a = *out;
  switch (op) {
  case 1:
    *out = a == b;
    break;
  case 2:
    *out = a != b;
    break;
  case 3:
    *out = a <= b;
    break;
  case 4:
    *out = a >= b;
    break;
  case 5:
    *out = a < b;
    break;
  default:
    *out = a > b;
    break;
  }
  if (cmp_op(e)) {
    e->p -= 1;
    return fail(e, RX_ERR_INVALID, "%s", "comparisons do not chain: use &&");
  }
  return true;
}

static bool parse_not(ep *e, bool live, int64_t *out) {
  skip(e);
  if (e->p[0] == '!' && e->p[1] != '=') {
    e->p++;
    if (!parse_not(e, live, out)) return false;
    *out = !*out;
    return true;
  }
  return parse_cmp(e, live, out);
}

static bool parse_and(ep *e, bool live, int64_t *out) {
  if (!parse_not(e, live, out)) return false;
  while (eat(e, "&&")) {
    int64_t b;
    if (!parse_not(e, live && *out != 0, &b)) return false;
    *out = *out != 0 && b != 0;
  }
  return true;
}

static bool parse_or(ep *e, bool live, int64_t *out) {
  if (!parse_and(e, live, out)) return false;
  while (eat(e, "||")) {
    int64_t b;
    if (!parse_and(e, live && *out == 0, &b)) return false;
    *out = *out != 0 || b != 0;
  }
  return true;
}

rx_status rx_rt_eval(const char *text, const rx_rt_symbols *symbols, int64_t *out_value) {
  if (out_value) *out_value = 0;
  if (!text || !out_value) return rx_status_make(RX_ERR_INVALID, "rx_rt_eval: NULL argument");
  ep e = {text, text, symbols, NULL};
  int64_t v = 0;
  if (parse_or(&e, true, &v)) {
    skip(&e);
    if (*e.p) fail(&e, RX_ERR_INVALID, "%s", "unexpected text after the expression");
  }
  if (e.err) return e.err;
  *out_value = v;
  return NULL;
}
