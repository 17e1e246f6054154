/* runtime/expr.c: symbolic expressions in the text syntax of kernels.json and the host program
 * (docs/text-format.md, "Symbolic expressions"), compiled once, when an artifact or a kernel
 * library loads, into a small stack program (rt_expr, runtime/device.h) that is then evaluated at
 * every launch over values given per variable slot, without allocation or text.
 *
 * The compiler is a recursive-descent parser over 64-bit integers. Precedence, loosest first:
 * ||, &&, !, comparisons (not chained), + -, * // %, unary -. `//` and `%` are floor division
 * and floor modulo (the result of % has the sign of the divisor). Each variable's name becomes a
 * slot of a name table (rt_names) shared by the expressions of one artifact or one kernel.
 * Malformed text is an error of the compiler, with its column; what depends on the values is an
 * error of the evaluation, with the column where the old one-pass evaluator stopped: an unknown
 * variable (anywhere in the text, even in a branch that does not count), and the arithmetic of
 * the branches that count (division by zero, 64-bit overflow). The unselected arm of select and
 * the right side of a short-circuited && or || are jumped over, so `select(n == 0, 0, m // n)`
 * is fine at n = 0. rx_rt_eval (the public one-shot evaluator) compiles, evaluates and frees. */
#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "runtime/device.h"

/* Nesting (parentheses, function arguments, unary operators) the compiler follows: its parser
 * recurses once per level, and a level holds at most 4 values on the stack (the pending left
 * operands of a comparison, a sum and a product, and min/max's first argument), so the
 * evaluator's stack of RT_EXPR_MAX_STACK values always suffices. Generated expressions nest a
 * few levels deep. */
#define EXPR_MAX_NESTING 60
_Static_assert(4 * (EXPR_MAX_NESTING + 1) <= RT_EXPR_MAX_STACK, "the stack bounds the nesting");

/* ---- name tables ---- */
uint32_t rt_names_slot(rt_names *t, const char *name, size_t len) {
  for (uint32_t i = 0; i < t->count; i++)
    if (strlen(t->names[i]) == len && !memcmp(t->names[i], name, len)) return i;
  if (t->count == UINT32_MAX - 1) return RT_NO_SLOT;
  if (t->count == t->cap) {
    uint32_t cap = t->cap ? 2 * t->cap : 8;
    char **n = rt_alloc(t->alloc, cap * sizeof *n);
    if (!n) return RT_NO_SLOT;
    if (t->count) memcpy(n, t->names, t->count * sizeof *n);
    rt_free(t->alloc, t->names);
    t->names = n;
    t->cap = cap;
  }
  char *s = rt_alloc(t->alloc, len + 1);
  if (!s) return RT_NO_SLOT;
  memcpy(s, name, len);
  t->names[t->count] = s;
  return t->count++;
}

uint32_t rt_names_find(const rt_names *t, const char *name) {
  for (uint32_t i = 0; i < t->count; i++)
    if (!strcmp(t->names[i], name)) return i;
  return RT_NO_SLOT;
}

void rt_names_free(rt_names *t) {
  for (uint32_t i = 0; i < t->count; i++) rt_free(t->alloc, t->names[i]);
  rt_free(t->alloc, t->names);
  t->names = NULL;
  t->count = t->cap = 0;
}

/* ---- the compiled form ---- */
/* The evaluator's instructions: X(name). Binary operators pop b, then replace a with the result;
 * the jumps' arg is the instruction to go on at. */
#define EXPR_OPS(X)                                                                                \
  X(CONST) /* push arg */                                                                          \
  X(VAR)   /* push values[arg] */                                                                  \
  X(NEG)                                                                                           \
  X(ADD)                                                                                           \
  X(SUB)                                                                                           \
  X(MUL)                                                                                           \
  X(DIV) /* floor division */                                                                      \
  X(MOD) /* floor modulo */                                                                        \
  X(MIN)                                                                                           \
  X(MAX)                                                                                           \
  X(EQ)                                                                                            \
  X(NE)                                                                                            \
  X(LE)                                                                                            \
  X(GE)                                                                                            \
  X(LT)                                                                                            \
  X(GT)                                                                                            \
  X(NOT)                                                                                           \
  X(BOOL)      /* top = top != 0 */                                                                \
  X(JUMP_ZERO) /* pop; jump when it was 0 (select) */                                              \
  X(JUMP)                                                                                          \
  X(AND) /* top == 0: jump, keeping the 0; else pop */                                             \
  X(OR)  /* top != 0: top = 1 and jump; else pop */

typedef enum xop_kind {
#define X(n) X_##n,
  EXPR_OPS(X)
#undef X
} xop_kind;

typedef struct xop {
  uint32_t kind;
  uint32_t col; /* 1-based column where an arithmetic error is reported */
  int64_t arg;
} xop;

typedef struct xvar {
  uint32_t slot, col, len; /* the name is text[col - 1 .. col - 1 + len) */
} xvar;

struct rt_expr {
  char *text; /* for messages */
  uint32_t nops, nvars;
  xop *ops;
  xvar *vars; /* each distinct variable once, in the order of the text */
};

/* ---- the compiler ---- */
typedef struct ep {
  const char *text, *p;
  rt_names *names;
  const rx_rt_allocator *a;
  xop *ops;
  uint32_t nops, cap;
  xvar *vars;
  uint32_t nvars, capvars;
  int depth, nesting;
  rx_status err; /* the first error */
} ep;

static bool fail(ep *e, rx_status_code code, const char *fmt, const char *arg) {
  if (!e->err) {
    char msg[256];
    snprintf(msg, sizeof msg, fmt, arg);
    e->err = base_status_make(code, "in expression '%s': column %d: %s", e->text,
                              (int)(e->p - e->text) + 1, msg);
  }
  return false;
}

static bool oom(ep *e, size_t n) {
  if (!e->err) e->err = rt_oom("a compiled expression", n);
  return false;
}

/* Appends an instruction (col: the current position) and follows the stack's depth. */
static bool emit(ep *e, xop_kind k, int64_t arg, int pushes, int pops) {
  if (e->nops == e->cap) {
    uint32_t cap = e->cap ? 2 * e->cap : 16;
    xop *n = rt_alloc(e->a, cap * sizeof *n);
    if (!n) return oom(e, cap * sizeof *n);
    if (e->nops) memcpy(n, e->ops, e->nops * sizeof *n);
    rt_free(e->a, e->ops);
    e->ops = n;
    e->cap = cap;
  }
  e->ops[e->nops++] = (xop){(uint32_t)k, (uint32_t)(e->p - e->text) + 1, arg};
  e->depth += pushes - pops;
  if (e->depth > RT_EXPR_MAX_STACK) /* EXPR_MAX_NESTING keeps it below: never seen */
    return fail(e, RX_ERR_INVALID, "%s", "too many values pending: nested too deeply");
  return true;
}

/* Where the jump emitted at `at` goes: the next instruction. */
static void patch(ep *e, uint32_t at) { e->ops[at].arg = e->nops; }

static bool add_var(ep *e, const char *s, size_t n) {
  uint32_t slot = rt_names_slot(e->names, s, n);
  if (slot == RT_NO_SLOT) return oom(e, n + 1);
  bool seen = false;
  for (uint32_t i = 0; i < e->nvars && !seen; i++) seen = e->vars[i].slot == slot;
  if (!seen) {
    if (e->nvars == e->capvars) {
      uint32_t cap = e->capvars ? 2 * e->capvars : 4;
      xvar *v = rt_alloc(e->a, cap * sizeof *v);
      if (!v) return oom(e, cap * sizeof *v);
      if (e->nvars) memcpy(v, e->vars, e->nvars * sizeof *v);
      rt_free(e->a, e->vars);
      e->vars = v;
      e->capvars = cap;
    }
    e->vars[e->nvars++] = (xvar){slot, (uint32_t)(s - e->text) + 1, (uint32_t)n};
  }
  return emit(e, X_VAR, slot, 1, 0);
}

/* One level of nesting more; false (the error) past EXPR_MAX_NESTING. */
static bool nest(ep *e) {
  if (++e->nesting <= EXPR_MAX_NESTING) return true;
  char lim[16];
  snprintf(lim, sizeof lim, "%d", EXPR_MAX_NESTING);
  return fail(e, RX_ERR_INVALID, "nested more than %s levels deep", lim);
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

static bool parse_or(ep *e);

/* min(a, b), max(a, b), select(c, a, b): after the name, at '('. */
static bool parse_call(ep *e, const char *s, size_t n) {
  bool is_min = n == 3 && !strncmp(s, "min", 3), is_max = n == 3 && !strncmp(s, "max", 3);
  bool is_sel = n == 6 && !strncmp(s, "select", 6);
  if (!is_min && !is_max && !is_sel) {
    e->p = s;
    char name[64];
    snprintf(name, sizeof name, "%.*s", (int)(n < 63 ? n : 63), s);
    return fail(e, RX_ERR_INVALID, "unknown function '%s' (expected min, max or select)", name);
  }
  e->p++;
  if (is_sel) {
    if (!parse_or(e) || !expect(e, ",")) return false;
    uint32_t jz = e->nops;
    if (!emit(e, X_JUMP_ZERO, 0, 0, 1) || !parse_or(e) || !expect(e, ",")) return false;
    uint32_t jmp = e->nops;
    if (!emit(e, X_JUMP, 0, 0, 1)) return false; /* the other arm starts at the same depth */
    patch(e, jz);
    if (!parse_or(e) || !expect(e, ")")) return false;
    patch(e, jmp);
    return true;
  }
  if (!parse_or(e) || !expect(e, ",") || !parse_or(e) || !expect(e, ")")) return false;
  return emit(e, is_min ? X_MIN : X_MAX, 0, 0, 1);
}

static bool parse_primary(ep *e) {
  skip(e);
  const char *s = e->p;
  if (*s == '(') {
    e->p++;
    if (!nest(e) || !parse_or(e)) return false;
    e->nesting--;
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
    return emit(e, X_CONST, v, 1, 0);
  }
  if (isalpha((unsigned char)*s) || *s == '_') {
    while (isalnum((unsigned char)*e->p) || *e->p == '_') e->p++;
    size_t n = (size_t)(e->p - s);
    const char *after = e->p;
    skip(e);
    if (*e->p == '(') {
      if (!nest(e) || !parse_call(e, s, n)) return false;
      e->nesting--;
      return true;
    }
    e->p = after;
    return add_var(e, s, n);
  }
  if (*s == '\0') return fail(e, RX_ERR_INVALID, "%s", "unexpected end of expression");
  char c[2] = {*s, 0};
  return fail(e, RX_ERR_INVALID, "unexpected character '%s'", c);
}

static bool parse_unary(ep *e) {
  if (eat(e, "-")) {
    if (!nest(e) || !parse_unary(e)) return false;
    e->nesting--;
    return emit(e, X_NEG, 0, 0, 0);
  }
  return parse_primary(e);
}

static bool parse_mul(ep *e) {
  if (!parse_unary(e)) return false;
  for (;;) {
    xop_kind op;
    if (eat(e, "*"))
      op = X_MUL;
    else if (eat(e, "//"))
      op = X_DIV;
    else if (eat(e, "%"))
      op = X_MOD;
    else {
      skip(e);
      if (*e->p == '/') return fail(e, RX_ERR_INVALID, "%s", "'/' is not integer division: use //");
      return true;
    }
    if (!parse_unary(e) || !emit(e, op, 0, 0, 1)) return false;
  }
}

static bool parse_add(ep *e) {
  if (!parse_mul(e)) return false;
  for (;;) {
    xop_kind op;
    if (eat(e, "+"))
      op = X_ADD;
    else if (eat(e, "-"))
      op = X_SUB;
    else
      return true;
    if (!parse_mul(e) || !emit(e, op, 0, 0, 1)) return false;
  }
}

static bool cmp_op(ep *e, xop_kind *out) {
  static const char *const toks[] = {"==", "!=", "<=", ">=", "<", ">"};
  static const xop_kind kinds[] = {X_EQ, X_NE, X_LE, X_GE, X_LT, X_GT};
  for (int i = 0; i < 6; i++)
    if (eat(e, toks[i])) {
      *out = kinds[i];
      return true;
    }
  return false;
}

static bool parse_cmp(ep *e) {
  if (!parse_add(e)) return false;
  xop_kind op = X_EQ;
  if (!cmp_op(e, &op)) return true;
  if (!parse_add(e) || !emit(e, op, 0, 0, 1)) return false;
  if (cmp_op(e, &op)) {
    e->p -= 1;
    return fail(e, RX_ERR_INVALID, "%s", "comparisons do not chain: use &&");
  }
  return true;
}

static bool parse_not(ep *e) {
  skip(e);
  if (e->p[0] == '!' && e->p[1] != '=') {
    e->p++;
    if (!nest(e) || !parse_not(e)) return false;
    e->nesting--;
    return emit(e, X_NOT, 0, 0, 0);
  }
  return parse_cmp(e);
}

static bool parse_and(ep *e) {
  if (!parse_not(e)) return false;
  while (eat(e, "&&")) {
    uint32_t j = e->nops;
    if (!emit(e, X_AND, 0, 0, 1) || !parse_not(e) || !emit(e, X_BOOL, 0, 0, 0)) return false;
    patch(e, j);
  }
  return true;
}

static bool parse_or(ep *e) {
  if (!parse_and(e)) return false;
  while (eat(e, "||")) {
    uint32_t j = e->nops;
    if (!emit(e, X_OR, 0, 0, 1) || !parse_and(e) || !emit(e, X_BOOL, 0, 0, 0)) return false;
    patch(e, j);
  }
  return true;
}

rx_status rt_expr_compile(const char *text, rt_names *names, rt_expr **out) {
  *out = NULL;
  const rx_rt_allocator *a = names->alloc;
  ep e = {.text = text, .p = text, .names = names, .a = a};
  if (parse_or(&e)) {
    skip(&e);
    if (*e.p) fail(&e, RX_ERR_INVALID, "%s", "unexpected text after the expression");
  }
  size_t len = strlen(text);
  rt_expr *x = e.err ? NULL : rt_alloc(a, sizeof *x);
  char *copy = x ? rt_alloc(a, len + 1) : NULL;
  if (!e.err && !copy) oom(&e, len + 1);
  if (e.err) {
    rt_free(a, x);
    rt_free(a, e.ops);
    rt_free(a, e.vars);
    return e.err;
  }
  memcpy(copy, text, len);
  *x = (rt_expr){copy, e.nops, e.nvars, e.ops, e.vars};
  *out = x;
  return NULL;
}

void rt_expr_free(const rx_rt_allocator *a, rt_expr *x) {
  if (!x) return;
  rt_free(a, x->text);
  rt_free(a, x->ops);
  rt_free(a, x->vars);
  rt_free(a, x);
}

const char *rt_expr_text(const rt_expr *x) { return x->text; }

bool rt_expr_constant(const rt_expr *x, int64_t *out) {
  *out = x->nops == 1 && x->ops[0].kind == X_CONST ? x->ops[0].arg : 0;
  return x->nops == 1 && x->ops[0].kind == X_CONST;
}

uint32_t rt_expr_var_count(const rt_expr *x) { return x->nvars; }
uint32_t rt_expr_var_slot(const rt_expr *x, uint32_t i) { return x->vars[i].slot; }

/* ---- the evaluator ---- */
static rx_status eval_error(const rt_expr *x, rx_status_code code, uint32_t col, const char *msg) {
  return base_status_make(code, "in expression '%s': column %u: %s", x->text, col, msg);
}

static rx_status unknown(const rt_expr *x, const xvar *v) {
  char msg[128];
  int n = v->len < 63 ? (int)v->len : 63;
  snprintf(msg, sizeof msg, "no value given for the symbolic variable '%.*s'", n,
           x->text + v->col - 1);
  return eval_error(x, RX_ERR_NOT_FOUND, v->col, msg);
}

/* a op b for the arithmetic and comparison instructions; false on an arithmetic error (*why) */
static bool binary(xop_kind k, int64_t a, int64_t b, int64_t *out, const char **why) {
  switch (k) {
  case X_ADD:
    *why = "64-bit overflow in +";
    return !__builtin_add_overflow(a, b, out);
  case X_SUB:
    *why = "64-bit overflow in -";
    return !__builtin_sub_overflow(a, b, out);
  case X_MUL:
    *why = "64-bit overflow in *";
    return !__builtin_mul_overflow(a, b, out);
  case X_DIV:
    *why = b == 0 ? "division by zero" : "64-bit overflow in //";
    if (b == 0 || (a == INT64_MIN && b == -1)) return false;
    *out = a / b - (a % b != 0 && ((a < 0) != (b < 0)));
    return true;
  case X_MOD:
    *why = "modulo by zero";
    if (b == 0) return false;
    *out = b == -1 ? 0 : a % b; /* b == -1 also avoids INT64_MIN % -1 */
    if (*out != 0 && ((*out < 0) != (b < 0))) *out += b;
    return true;
  case X_MIN:
    *out = a < b ? a : b;
    return true;
  case X_MAX:
    *out = a > b ? a : b;
    return true;
  case X_EQ:
    *out = a == b;
    return true;
  case X_NE:
    *out = a != b;
    return true;
  case X_LE:
    *out = a <= b;
    return true;
  case X_GE:
    *out = a >= b;
    return true;
  case X_LT:
    *out = a < b;
    return true;
  default:
    *out = a > b;
    return true;
  }
}

rx_status rt_expr_eval(const rt_expr *x, const int64_t *values, const uint8_t *bound,
                       int64_t *out) {
  *out = 0;
  for (uint32_t i = 0; i < x->nvars; i++)
    if (!bound[x->vars[i].slot]) return unknown(x, &x->vars[i]);
  int64_t st[RT_EXPR_MAX_STACK];
  uint32_t sp = 0;
  for (uint32_t pc = 0; pc < x->nops; pc++) {
    const xop *o = &x->ops[pc];
    const char *why = NULL;
    switch ((xop_kind)o->kind) {
    case X_CONST:
      st[sp++] = o->arg;
      break;
    case X_VAR:
      st[sp++] = values[o->arg];
      break;
    case X_NEG:
      if (st[sp - 1] == INT64_MIN)
        return eval_error(x, RX_ERR_INVALID, o->col, "64-bit overflow in unary -");
      st[sp - 1] = -st[sp - 1];
      break;
    case X_NOT:
      st[sp - 1] = !st[sp - 1];
      break;
    case X_BOOL:
      st[sp - 1] = st[sp - 1] != 0;
      break;
    case X_JUMP_ZERO:
      if (st[--sp] == 0) pc = (uint32_t)o->arg - 1;
      break;
    case X_JUMP:
      pc = (uint32_t)o->arg - 1;
      break;
    case X_AND:
      if (st[sp - 1] == 0)
        pc = (uint32_t)o->arg - 1;
      else
        sp--;
      break;
    case X_OR:
      if (st[sp - 1] != 0) {
        st[sp - 1] = 1;
        pc = (uint32_t)o->arg - 1;
      } else {
        sp--;
      }
      break;
    default:
      sp--;
      if (!binary((xop_kind)o->kind, st[sp - 1], st[sp], &st[sp - 1], &why))
        return eval_error(x, RX_ERR_INVALID, o->col, why);
    }
  }
  RX_ASSERT(sp == 1); /* the compiler's stack discipline */
  *out = st[0];
  return NULL;
}

rx_status rx_rt_eval(const char *text, const rx_rt_symbols *symbols, int64_t *out_value) {
  if (out_value) *out_value = 0;
  if (!text || !out_value) return base_status_make(RX_ERR_INVALID, "rx_rt_eval: NULL argument");
  rt_names names = {.alloc = &rt_default_allocator};
  rt_expr *x = NULL;
  rx_status s = rt_expr_compile(text, &names, &x);
  int64_t *values = NULL;
  uint8_t *bound = NULL;
  if (!s) {
    values = rt_alloc(names.alloc, (names.count + 1) * sizeof *values);
    bound = rt_alloc(names.alloc, names.count + 1);
    if (!values || !bound) s = rt_oom("expression values", names.count * sizeof *values);
  }
  if (!s) {
    rt_symbols_gather(symbols, &names, values, bound);
    s = rt_expr_eval(x, values, bound, out_value);
  }
  rt_free(names.alloc, values);
  rt_free(names.alloc, bound);
  rt_expr_free(names.alloc, x);
  rt_names_free(&names);
  return s;
}

void rt_symbols_gather(const rx_rt_symbols *symbols, const rt_names *names, int64_t *values,
                       uint8_t *bound) {
  for (uint32_t i = 0; i < names->count; i++) {
    values[i] = 0;
    bound[i] = 0;
    for (size_t j = 0; symbols && j < symbols->count && !bound[i]; j++)
      if (symbols->names[j] && !strcmp(symbols->names[j], names->names[i])) {
        values[i] = symbols->values[j];
        bound[i] = 1;
      }
  }
}
