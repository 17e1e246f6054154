/* shapes/print.c: expressions as text, with parentheses only where precedence needs them.
 * Sums print as terms: `n * 4 + 2`, `n - 1`, `8 - n` (a positive term or constant first when
 * there is one), products with a negative coefficient as `-n * 4`. */
#include "shapes_int.h"

#include <inttypes.h>
#include <stdlib.h>

/* precedence levels, loosest first */

#define MIN_TEXT "(-9223372036854775807 - 1)"

static void put_int(rx_strbuf *o, int64_t v) {
  if (v == INT64_MIN)
    base_strbuf_append(o, MIN_TEXT);
  else
    base_strbuf_printf(o, "%" PRId64, v);
}

static const struct {
  const char *text;
  int arity;
  rx_prec prec;
} kinds[] = {
#define X(e, text, arity, prec) {text, arity, RX_PREC_##prec},
    RX_EXPR_KINDS(X)
#undef X
};

const char *sym_expr_kind_text(rx_expr_kind k) { return kinds[k].text; }
int sym_expr_kind_arity(rx_expr_kind k) { return kinds[k].arity; }
rx_prec sym_expr_kind_prec(rx_expr_kind k) { return kinds[k].prec; }
bool sym_expr_kind_is_bool(rx_expr_kind k) {
  rx_prec p = kinds[k].prec;
  return p == RX_PREC_CMP || p == RX_PREC_NOT || p == RX_PREC_AND || p == RX_PREC_OR;
}

/* The precedence of e as printed: its kind's, except that a negative constant and a product
 * with -1 print as a negation. */
static int prec_of(const rx_expr *e) {
  if (e->kind == RX_EXPR_CONST)
    return e->value < 0 && e->value != INT64_MIN ? RX_PREC_UNARY : RX_PREC_ATOM;
  if (e->kind == RX_EXPR_MUL && e->b->kind == RX_EXPR_CONST && e->b->value == -1)
    return RX_PREC_UNARY;
  return sym_expr_kind_prec(e->kind);
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
  pr(o, t.x, RX_PREC_MUL);
  if (a != 1) {
    base_strbuf_append(o, " * ");
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
  base_strbuf_putc(o, '-');
  pr(o, t.x, RX_PREC_ATOM);
  if (t.k != -1) {
    base_strbuf_append(o, " * ");
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
    base_strbuf_append(o, is_neg(v.data[i]) ? " - " : " + ");
    pr_abs(o, v.data[i]);
  }
  free(v.data);
}

static void pr_bin(rx_strbuf *o, const rx_expr *e, int left, int right) {
  pr(o, e->a, left);
  base_strbuf_printf(o, " %s ", sym_expr_kind_text(e->kind));
  pr(o, e->b, right);
}

static void pr(rx_strbuf *o, const rx_expr *e, int need) {
  bool paren = prec_of(e) < need;
  if (paren) base_strbuf_putc(o, '(');
  switch (e->kind) {
  case RX_EXPR_CONST:
    put_int(o, e->value);
    break;
  case RX_EXPR_VAR:
    base_strbuf_append(o, e->name);
    break;
  case RX_EXPR_ADD:
    pr_sum(o, e);
    break;
  case RX_EXPR_SUB:
    pr_bin(o, e, RX_PREC_ADD, RX_PREC_MUL);
    break;
  case RX_EXPR_MUL:
    if (e->b->kind == RX_EXPR_CONST)
      pr_first(o, split_term(e));
    else
      pr_bin(o, e, RX_PREC_MUL, RX_PREC_UNARY);
    break;
  case RX_EXPR_FLOORDIV:
  case RX_EXPR_FLOORMOD:
    pr_bin(o, e, RX_PREC_MUL, RX_PREC_UNARY);
    break;
  case RX_EXPR_MIN:
  case RX_EXPR_MAX:
    base_strbuf_printf(o, "%s(", sym_expr_kind_text(e->kind));
    pr(o, e->a, RX_PREC_TOP);
    base_strbuf_append(o, ", ");
    pr(o, e->b, RX_PREC_TOP);
    base_strbuf_putc(o, ')');
    break;
  case RX_EXPR_EQ:
  case RX_EXPR_NE:
  case RX_EXPR_LT:
  case RX_EXPR_LE:
  case RX_EXPR_GT:
  case RX_EXPR_GE:
    pr_bin(o, e, RX_PREC_ADD, RX_PREC_ADD);
    break;
  case RX_EXPR_AND:
    pr_bin(o, e, RX_PREC_AND, RX_PREC_NOT);
    break;
  case RX_EXPR_OR:
    pr_bin(o, e, RX_PREC_OR, RX_PREC_AND);
    break;
  case RX_EXPR_NOT:
    base_strbuf_append(o, sym_expr_kind_text(e->kind));
    pr(o, e->a, e->a->kind == RX_EXPR_NOT ? RX_PREC_NOT : RX_PREC_ATOM);
    break;
  case RX_EXPR_SELECT:
    base_strbuf_printf(o, "%s(", sym_expr_kind_text(e->kind));
    pr(o, e->a, RX_PREC_TOP);
    base_strbuf_append(o, ", ");
    pr(o, e->b, RX_PREC_TOP);
    base_strbuf_append(o, ", ");
    pr(o, e->c, RX_PREC_TOP);
    base_strbuf_putc(o, ')');
    break;
  default:
    RX_ASSERT(!"rx_expr_print: bad kind");
  }
  if (paren) base_strbuf_putc(o, ')');
}

void sym_expr_print(rx_strbuf *out, const rx_expr *e) {
  if (!e) {
    base_strbuf_append(out, "<null>");
    return;
  }
  pr(out, e, RX_PREC_TOP);
}

char *sym_expr_to_string(const rx_expr *e) {
  rx_strbuf b = {0};
  sym_expr_print(&b, e);
  return base_strbuf_take(&b);
}
