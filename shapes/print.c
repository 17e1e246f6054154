/* shapes/print.c: expressions as text, with parentheses only where precedence needs them.
 * Sums print as terms: `n * 4 + 2`, `n - 1`, `8 - n` (a positive term or constant first when
 * there is one), products with a negative coefficient as `-n * 4`. */
#include "shapes_int.h"

#include <inttypes.h>
#include <stdlib.h>

/* precedence levels, loosest first */
enum {
  P_TOP = 0,
  P_OR,
  P_AND,
  P_NOT,
  P_CMP,
  P_ADD,
  P_MUL,
  P_UNARY, /* -x, negative constants */
  P_ATOM,  /* names, non-negative constants, calls, parenthesized */
};

#define MIN_TEXT "(-9223372036854775807 - 1)"

static void put_int(rx_strbuf *o, int64_t v) {
  if (v == INT64_MIN)
    rx_strbuf_append(o, MIN_TEXT);
  else
    rx_strbuf_printf(o, "%" PRId64, v);
}

static int prec_of(const rx_expr *e) {
  switch (e->kind) {
  case RX_EXPR_CONST:
    return e->value < 0 && e->value != INT64_MIN ? P_UNARY : P_ATOM;
  case RX_EXPR_ADD:
  case RX_EXPR_SUB:
    return P_ADD;
  case RX_EXPR_MUL:
    return e->b->kind == RX_EXPR_CONST && e->b->value == -1 ? P_UNARY : P_MUL;
  case RX_EXPR_FLOORDIV:
  case RX_EXPR_FLOORMOD:
    return P_MUL;
  case RX_EXPR_EQ:
  case RX_EXPR_NE:
  case RX_EXPR_LT:
  case RX_EXPR_LE:
  case RX_EXPR_GT:
  case RX_EXPR_GE:
    return P_CMP;
  case RX_EXPR_AND:
    return P_AND;
  case RX_EXPR_OR:
    return P_OR;
  case RX_EXPR_NOT:
    return P_NOT;
  default:
    return P_ATOM;
  }
}

static void pr(rx_strbuf *o, const rx_expr *e, int need);

/* one term of a sum: x * k, or a constant (x NULL) */
typedef struct pterm {
  const rx_expr *x;
  int64_t k;
} pterm;

static pterm split_term(const rx_expr *e) {
  if (e->kind == RX_EXPR_CONST) return (pterm){NULL, e->value};
  if (e->kind == RX_EXPR_MUL && e->b->kind == RX_EXPR_CONST) return (pterm){e->a, e->b->value};
  return (pterm){e, 1};
}

/* printed with a leading '-' (INT64_MIN prints as a positive-looking product) */
static bool is_neg(pterm t) { return t.k < 0 && t.k != INT64_MIN; }

/* |t|, as the right operand of + or - */
static void pr_abs(rx_strbuf *o, pterm t) {
  int64_t a = is_neg(t) ? -t.k : t.k;
  if (!t.x) {
    put_int(o, a);
    return;
  }
  pr(o, t.x, P_MUL);
  if (a != 1) {
    rx_strbuf_append(o, " * ");
    put_int(o, a);
  }
}

/* t as the first operand of a sum, or alone */
static void pr_first(rx_strbuf *o, pterm t) {
  if (!is_neg(t) || !t.x) {
    if (!t.x)
      put_int(o, t.k);
    else
      pr_abs(o, t);
    return;
  }
  rx_strbuf_putc(o, '-');
  pr(o, t.x, P_ATOM);
  if (t.k != -1) {
    rx_strbuf_append(o, " * ");
    put_int(o, -t.k);
  }
}

static void pr_sum(rx_strbuf *o, const rx_expr *e) {
  RX_VEC(pterm) v = {0};
  for (; e->kind == RX_EXPR_ADD; e = e->a) RX_VEC_PUSH(&v, split_term(e->b));
  RX_VEC_PUSH(&v, split_term(e));
  /* v holds the terms last to first; print a non-negative one first when there is one */
  size_t n = v.len, first = n - 1;
  if (is_neg(v.data[first]))
    for (size_t i = n; i-- > 0;)
      if (!is_neg(v.data[i])) {
        first = i;
        break;
      }
  pr_first(o, v.data[first]);
  for (size_t i = n; i-- > 0;) {
    if (i == first) continue;
    rx_strbuf_append(o, is_neg(v.data[i]) ? " - " : " + ");
    pr_abs(o, v.data[i]);
  }
  free(v.data);
}

static const char *op_text(rx_expr_kind k) {
  switch (k) {
  case RX_EXPR_SUB:
    return " - ";
  case RX_EXPR_MUL:
    return " * ";
  case RX_EXPR_FLOORDIV:
    return " // ";
  case RX_EXPR_FLOORMOD:
    return " % ";
  case RX_EXPR_EQ:
    return " == ";
  case RX_EXPR_NE:
    return " != ";
  case RX_EXPR_LT:
    return " < ";
  case RX_EXPR_LE:
    return " <= ";
  case RX_EXPR_GT:
    return " > ";
  case RX_EXPR_GE:
    return " >= ";
  case RX_EXPR_AND:
    return " && ";
  case RX_EXPR_OR:
    return " || ";
  default:
    return "?";
  }
}

static void pr_bin(rx_strbuf *o, const rx_expr *e, int left, int right) {
  pr(o, e->a, left);
  rx_strbuf_append(o, op_text(e->kind));
  pr(o, e->b, right);
}

static void pr(rx_strbuf *o, const rx_expr *e, int need) {
  bool paren = prec_of(e) < need;
  if (paren) rx_strbuf_putc(o, '(');
  switch (e->kind) {
  case RX_EXPR_CONST:
    put_int(o, e->value);
    break;
  case RX_EXPR_VAR:
    rx_strbuf_append(o, e->name);
    break;
  case RX_EXPR_ADD:
    pr_sum(o, e);
    break;
  case RX_EXPR_SUB:
    pr_bin(o, e, P_ADD, P_MUL);
    break;
  case RX_EXPR_MUL:
    if (e->b->kind == RX_EXPR_CONST)
      pr_first(o, split_term(e));
    else
      pr_bin(o, e, P_MUL, P_UNARY);
    break;
  case RX_EXPR_FLOORDIV:
  case RX_EXPR_FLOORMOD:
    pr_bin(o, e, P_MUL, P_UNARY);
    break;
  case RX_EXPR_MIN:
  case RX_EXPR_MAX:
    rx_strbuf_append(o, e->kind == RX_EXPR_MIN ? "min(" : "max(");
    pr(o, e->a, P_TOP);
    rx_strbuf_append(o, ", ");
    pr(o, e->b, P_TOP);
    rx_strbuf_putc(o, ')');
    break;
  case RX_EXPR_EQ:
  case RX_EXPR_NE:
  case RX_EXPR_LT:
  case RX_EXPR_LE:
  case RX_EXPR_GT:
  case RX_EXPR_GE:
    pr_bin(o, e, P_ADD, P_ADD);
    break;
  case RX_EXPR_AND:
    pr_bin(o, e, P_AND, P_NOT);
    break;
  case RX_EXPR_OR:
    pr_bin(o, e, P_OR, P_AND);
    break;
  case RX_EXPR_NOT:
    rx_strbuf_putc(o, '!');
    pr(o, e->a, e->a->kind == RX_EXPR_NOT ? P_NOT : P_ATOM);
    break;
  case RX_EXPR_SELECT:
    rx_strbuf_append(o, "select(");
    pr(o, e->a, P_TOP);
    rx_strbuf_append(o, ", ");
    pr(o, e->b, P_TOP);
    rx_strbuf_append(o, ", ");
    pr(o, e->c, P_TOP);
    rx_strbuf_putc(o, ')');
    break;
  default:
    RX_ASSERT(!"rx_expr_print: bad kind");
  }
  if (paren) rx_strbuf_putc(o, ')');
}

void rx_expr_print(rx_strbuf *out, const rx_expr *e) {
  if (!e) {
    rx_strbuf_append(out, "<null>");
    return;
  }
  pr(out, e, P_TOP);
}

char *rx_expr_to_string(const rx_expr *e) {
  rx_strbuf b = {0};
  rx_expr_print(&b, e);
  return rx_strbuf_take(&b);
}
