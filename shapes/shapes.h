/* shapes: symbolic 64-bit integer expressions.
 *
 * Expressions are hash-consed in a context: two structurally equal expressions are the same
 * pointer, so equality is `==`. Variables are interned by name: sym_expr_var(ctx, "n") returns
 * the same object every time, which is how a tensor program's `n` and the graph's `n` are one
 * object. Booleans (comparisons, and/or/not) are integers 0 or 1.
 *
 * The public constructors (sym_expr_add, ...) return the context-free canonical form: constants
 * folded, sums of products with constant coefficients, terms in a structural order (kinds, then
 * variable names, never addresses or creation order, so the printed form is the same in every
 * run), floordiv/floormod by constants with multiples of the divisor pulled out. sym_expr_raw
 * builds a node exactly as given (interned, unsimplified): for tests and for the simplifier.
 *
 * The canonical form, as printed: sums list their terms in structural order with the constant
 * last and coefficients on the right (`n * 4 + 2`, `i * 4 + j`, `n - 1`; a sum with no positive
 * term but a positive constant prints it first: `8 - n`); products are expanded (`(a+b)*c` is
 * `a * c + b * c`); floordiv/floormod have positive constant divisors with the multiples pulled
 * out (`(n * 8 + 7) // 8` is `n`, `(n + 7) // 8` stays). Comparisons keep strictness as given
 * (`n < 8` and `n <= 7` are different nodes) and put positive terms on the left, negated ones on
 * the right, the constant on the side where it is positive, coefficients divided by their gcd:
 * `m < n` (from n > m), `1 <= n` (from n >= 1), `m + 1 <= n`, `m + 2 == n`. NOT is pushed into
 * comparisons (`!(a < b)` is `b <= a`, `!x` is `x == 0`); operands of && and || are booleans
 * (`x && y` is `x != 0 && y != 0`), sorted. SUB, GT, GE and NOT appear only in raw nodes and
 * where folding would overflow int64 (then the operation is kept as given over canonical
 * operands; such nodes are still fixed points of sym_expr_simplify).
 *
 * The analyzer adds facts (ranges, divisibility, relations) and uses them to bound, prove and
 * simplify. prove() answers true only when the fact holds for every assignment satisfying the
 * facts; otherwise false (the negation is proven) or unknown.
 *
 * Overflow: constant folding that would overflow int64 is not done (the node stays symbolic);
 * evaluation that overflows or divides by zero reports failure. Nothing here is undefined
 * behaviour on any input. */
#ifndef RX_SHAPES_H
#define RX_SHAPES_H

#include "../base/base.h"
#include "../base/expr_kinds.h"

/* The expression kinds: base/expr_kinds.h lists them with their operator text, arity and
 * precedence. */
typedef enum rx_expr_kind {
#define X(e, text, arity, prec) RX_EXPR_##e,
  RX_EXPR_KINDS(X)
#undef X
      RX_EXPR_KIND_COUNT
} rx_expr_kind;
/* Its operator text in the text syntax ("//", "&&", "min"; "" for constants and names), arity
 * and precedence class. */
const char *sym_expr_kind_text(rx_expr_kind k);
int sym_expr_kind_arity(rx_expr_kind k);
rx_prec sym_expr_kind_prec(rx_expr_kind k);
/* A comparison or a logical operator: its value is 0 or 1 (the precedence classes CMP, NOT, AND
 * and OR are exactly these kinds). */
bool sym_expr_kind_is_bool(rx_expr_kind k);

typedef struct rx_expr rx_expr;
struct rx_expr {
  rx_expr_kind kind;
  uint32_t id;      /* unique per context, creation order; never used for ordering */
  uint64_t hash;    /* structural hash */
  int64_t value;    /* RX_EXPR_CONST */
  const char *name; /* RX_EXPR_VAR: interned name */
  const rx_expr *a, *b, *c;
};

typedef struct rx_expr_ctx rx_expr_ctx;

rx_expr_ctx *sym_expr_ctx_new(void);
void sym_expr_ctx_free(rx_expr_ctx *ctx);
/* The context's arena and string table (for owners that want to share them). */
rx_arena *sym_expr_ctx_arena(rx_expr_ctx *ctx);
const char *sym_expr_ctx_intern(rx_expr_ctx *ctx, const char *s, size_t n);

/* ---- construction: canonicalizing ---- */
const rx_expr *sym_expr_const(rx_expr_ctx *ctx, int64_t v);
const rx_expr *sym_expr_var(rx_expr_ctx *ctx, const char *name);
const rx_expr *sym_expr_add(rx_expr_ctx *ctx, const rx_expr *a, const rx_expr *b);
const rx_expr *sym_expr_sub(rx_expr_ctx *ctx, const rx_expr *a, const rx_expr *b);
const rx_expr *sym_expr_mul(rx_expr_ctx *ctx, const rx_expr *a, const rx_expr *b);
const rx_expr *sym_expr_neg(rx_expr_ctx *ctx, const rx_expr *a);
const rx_expr *sym_expr_floordiv(rx_expr_ctx *ctx, const rx_expr *a, const rx_expr *b);
const rx_expr *sym_expr_floormod(rx_expr_ctx *ctx, const rx_expr *a, const rx_expr *b);
const rx_expr *sym_expr_min(rx_expr_ctx *ctx, const rx_expr *a, const rx_expr *b);
const rx_expr *sym_expr_max(rx_expr_ctx *ctx, const rx_expr *a, const rx_expr *b);
const rx_expr *sym_expr_cmp(rx_expr_ctx *ctx, rx_expr_kind cmp, const rx_expr *a, const rx_expr *b);
const rx_expr *sym_expr_and(rx_expr_ctx *ctx, const rx_expr *a, const rx_expr *b);
const rx_expr *sym_expr_or(rx_expr_ctx *ctx, const rx_expr *a, const rx_expr *b);
const rx_expr *sym_expr_not(rx_expr_ctx *ctx, const rx_expr *a);
const rx_expr *sym_expr_select(rx_expr_ctx *ctx, const rx_expr *c, const rx_expr *t,
                               const rx_expr *f);
/* Any kind through one entry point (unused operands NULL). */
const rx_expr *sym_expr_make(rx_expr_ctx *ctx, rx_expr_kind kind, const rx_expr *a,
                             const rx_expr *b, const rx_expr *c);

/* ---- construction: raw (interned, not simplified) ---- */
const rx_expr *sym_expr_raw(rx_expr_ctx *ctx, rx_expr_kind kind, const rx_expr *a, const rx_expr *b,
                            const rx_expr *c);

/* Context-free canonical form of any expression (raw ones included). Idempotent. */
const rx_expr *sym_expr_simplify(rx_expr_ctx *ctx, const rx_expr *e);

/* ---- queries ---- */
static inline bool rx_expr_is_const(const rx_expr *e, int64_t v) {
  return e->kind == RX_EXPR_CONST && e->value == v;
}
bool sym_expr_is_bool(const rx_expr *e); /* comparison, logic, or a constant 0/1 */
/* Appends the distinct variables of e to out (each once, in first-seen order). */
void sym_expr_collect_vars(const rx_expr *e, rx_ptrvec *out);
bool sym_expr_uses_var(const rx_expr *e, const rx_expr *var);
/* Structural total order (for sorting terms and printing deterministically). */
int sym_expr_compare(const rx_expr *a, const rx_expr *b);

/* ---- substitution and evaluation ---- */
/* Replaces vars[i] by repl[i] simultaneously, then canonicalizes. */
const rx_expr *sym_expr_subst(rx_expr_ctx *ctx, const rx_expr *e, const rx_expr *const *vars,
                              const rx_expr *const *repl, size_t n);

typedef struct rx_expr_env {
  const rx_expr *const *vars; /* variables ... */
  const int64_t *values;      /* ... and their values */
  size_t n;
} rx_expr_env;
/* Evaluates e. Returns false (and leaves *out unchanged) on an unbound variable, division or
 * modulo by zero, or int64 overflow. */
bool sym_expr_eval(const rx_expr *e, const rx_expr_env *env, int64_t *out);
/* Why an evaluation failed. Evaluation is strict (every operand is evaluated, && and ||
 * included) except select, which evaluates only the chosen branch. A simplified expression
 * evaluates to the same value as the original wherever the original evaluates, except that
 * it may succeed where the original failed (x // 0 * 0 is 0, 0 && y is 0) and may overflow where
 * a reassociated intermediate leaves int64 (e.g. the expansion of (a + b) * c). */
typedef enum rx_eval_status {
  RX_EVAL_OK = 0,
  RX_EVAL_UNBOUND,  /* a variable not in the environment */
  RX_EVAL_DIV_ZERO, /* // or % by zero */
  RX_EVAL_OVERFLOW, /* an int64 overflow (INT64_MIN // -1 included) */
} rx_eval_status;
/* As sym_expr_eval, with the reason of a failure (*out unchanged then). */
rx_eval_status sym_expr_eval_status(const rx_expr *e, const rx_expr_env *env, int64_t *out);

/* ---- printing ----
 * Text syntax, also what the IR parser reads: integers, names, + - * // % (floor division and
 * floor modulo), unary -, min(a, b), max(a, b), == != < <= > >=, && || !, select(c, a, b),
 * parentheses only where precedence needs them. Precedence, loosest first:
 * ||, &&, !, comparisons, + -, * // %, unary -. */
void sym_expr_print(rx_strbuf *out, const rx_expr *e);
/* Heap string of sym_expr_print (caller frees). */
char *sym_expr_to_string(const rx_expr *e);

/* ---- analyzer ---- */
typedef enum rx_tribool { RX_FALSE = 0, RX_TRUE = 1, RX_UNKNOWN = 2 } rx_tribool;

typedef struct rx_interval {
  int64_t lo, hi; /* INT64_MIN / INT64_MAX: unbounded on that side */
} rx_interval;

typedef struct rx_analyzer rx_analyzer;

rx_analyzer *sym_analyzer_new(rx_expr_ctx *ctx);
void sym_analyzer_free(rx_analyzer *an);
rx_expr_ctx *sym_analyzer_ctx(rx_analyzer *an);

/* Adds a fact. Understood forms (after canonicalization), possibly joined by &&:
 *   e <= c, e < c, e >= c, e > c, e == c  for e a variable or an expression bounded through its
 *   variables; x % c == 0 (divisibility of a variable); a <= b, a < b between expressions
 *   (relations like m <= n, m + 1 <= n).
 * A fact not understood is still remembered: prove() of exactly that fact answers true.
 * Returns false when the fact contradicts earlier facts (provably false under them). */
bool sym_analyzer_assume(rx_analyzer *an, const rx_expr *fact);
/* lo <= var < lo + extent (a loop variable). */
void sym_analyzer_bind_range(rx_analyzer *an, const rx_expr *var, const rx_expr *lo,
                             const rx_expr *extent);
/* Facts are a stack: mark, add facts for a scope, then reset to the mark. */
size_t sym_analyzer_mark(rx_analyzer *an);
void sym_analyzer_reset(rx_analyzer *an, size_t mark);

rx_interval sym_analyzer_bounds(rx_analyzer *an, const rx_expr *e);
rx_tribool sym_analyzer_prove(rx_analyzer *an, const rx_expr *cond);
/* Simplify using the facts: comparisons proven become 0/1, min/max of ordered operands, div/mod
 * by constants using bounds and divisibility, select with a proven condition. */
const rx_expr *sym_analyzer_simplify(rx_analyzer *an, const rx_expr *e);
/* Largest known c > 0 such that e % c == 0 for all assignments satisfying the facts (1 when
 * nothing is known; 0 when e is provably 0, which every c divides). */
int64_t sym_analyzer_divisor(rx_analyzer *an, const rx_expr *e);

#endif
