/* shapes/expr_build.h: short constructors of symbolic expressions, for the code that builds many
 * of them (the generators of ops/, the schedule rules of passes/schedule/). Each is exactly the
 * rx_expr_* constructor of shapes.h it names, in the canonical form and with no facts (simplify
 * under an analyzer where facts matter); the _c forms take a constant right operand. Header
 * only: static inline functions, so including it costs nothing. */
#ifndef RX_SHAPES_EXPR_BUILD_H
#define RX_SHAPES_EXPR_BUILD_H

#include "shapes.h"

/* the constant v; the variable named name (interned: the same object every time) */
static inline const rx_expr *sx_const(rx_expr_ctx *cx, int64_t v) { return sym_expr_const(cx, v); }
static inline const rx_expr *sx_var(rx_expr_ctx *cx, const char *name) {
  return sym_expr_var(cx, name);
}

/* a + b, a * b, a * c */
static inline const rx_expr *sx_add(rx_expr_ctx *cx, const rx_expr *a, const rx_expr *b) {
  return sym_expr_add(cx, a, b);
}
static inline const rx_expr *sx_mul(rx_expr_ctx *cx, const rx_expr *a, const rx_expr *b) {
  return sym_expr_mul(cx, a, b);
}
static inline const rx_expr *sx_mul_c(rx_expr_ctx *cx, const rx_expr *a, int64_t c) {
  return sym_expr_mul(cx, a, sym_expr_const(cx, c));
}

/* floor division and floor modulo: a // b, a % b, a // c, a % c */
static inline const rx_expr *sx_div(rx_expr_ctx *cx, const rx_expr *a, const rx_expr *b) {
  return sym_expr_floordiv(cx, a, b);
}
static inline const rx_expr *sx_mod(rx_expr_ctx *cx, const rx_expr *a, const rx_expr *b) {
  return sym_expr_floormod(cx, a, b);
}
static inline const rx_expr *sx_div_c(rx_expr_ctx *cx, const rx_expr *a, int64_t c) {
  return sym_expr_floordiv(cx, a, sym_expr_const(cx, c));
}
static inline const rx_expr *sx_mod_c(rx_expr_ctx *cx, const rx_expr *a, int64_t c) {
  return sym_expr_floormod(cx, a, sym_expr_const(cx, c));
}
/* ceil(a / k) for k > 0, as (a + k - 1) // k */
static inline const rx_expr *sx_ceildiv_c(rx_expr_ctx *cx, const rx_expr *a, int64_t k) {
  return sym_expr_floordiv(cx, sym_expr_add(cx, a, sym_expr_const(cx, k - 1)),
                           sym_expr_const(cx, k));
}

/* a < b; a && b; a && b where a NULL operand is no condition (the other is returned) */
static inline const rx_expr *sx_lt(rx_expr_ctx *cx, const rx_expr *a, const rx_expr *b) {
  return sym_expr_cmp(cx, RX_EXPR_LT, a, b);
}
static inline const rx_expr *sx_and(rx_expr_ctx *cx, const rx_expr *a, const rx_expr *b) {
  return sym_expr_and(cx, a, b);
}
static inline const rx_expr *sx_and_opt(rx_expr_ctx *cx, const rx_expr *a, const rx_expr *b) {
  if (!a) return b;
  if (!b) return a;
  return sym_expr_and(cx, a, b);
}

#endif
