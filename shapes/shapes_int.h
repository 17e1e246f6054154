/* shapes internal: the context, linear forms ("polys") and overflow-safe integer helpers,
 * shared by expr.c, eval.c, print.c and analyzer.c. Not part of the API other folders use.
 *
 * Canonical form (cross-file invariant, produced by expr.c, relied on by analyzer.c and
 * print.c):
 *   atom   any node that is not CONST, ADD, SUB or MUL (vars, // %, min, max, select, ...)
 *   mono   one atom, or MUL(mono, atom): a left chain of atoms in sym_expr_compare order
 *   term   mono (coefficient 1) or MUL(mono, CONST k), k not 0 or 1
 *   sum    term, or ADD(sum, term) in term order, optionally ADD(sum, CONST c) last (c != 0)
 * A MUL node whose right operand is a CONST is always a term, never a mono. */
#ifndef RX_SHAPES_INT_H
#define RX_SHAPES_INT_H

#include "shapes.h"

struct rx_expr_ctx {
  rx_arena arena;        /* nodes, interned names */
  rx_strtab names;       /* variable names */
  rx_expr **slots;       /* hash-consing table, open addressing, power-of-two capacity */
  size_t cap, count;     /* capacity and number of nodes */
  const rx_expr **canon; /* canon[id]: canonical form of node id, NULL until computed */
  size_t canon_cap;
};

/* ---- overflow-safe integer helpers ---- */
static inline bool rx_i64_add(int64_t a, int64_t b, int64_t *out) {
  return !__builtin_add_overflow(a, b, out);
}
static inline bool rx_i64_sub(int64_t a, int64_t b, int64_t *out) {
  return !__builtin_sub_overflow(a, b, out);
}
static inline bool rx_i64_mul(int64_t a, int64_t b, int64_t *out) {
  return !__builtin_mul_overflow(a, b, out);
}
/* floor(a / b); false for b == 0 and INT64_MIN / -1 */
static inline bool rx_i64_floordiv(int64_t a, int64_t b, int64_t *out) {
  *out = 0; /* written on failure too: callers stay free of maybe-uninitialized warnings */
  if (b == 0 || (a == INT64_MIN && b == -1)) return false;
  int64_t q = a / b;
  if (a % b != 0 && ((a < 0) != (b < 0))) q--;
  *out = q;
  return true;
}
/* a - b * floor(a / b), the sign of b; false only for b == 0 */
static inline bool rx_i64_floormod(int64_t a, int64_t b, int64_t *out) {
  *out = 0;
  if (b == 0) return false;
  if (b == -1) {
    *out = 0;
    return true;
  }
  int64_t r = a % b;
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  *out = r;
  return true;
}
static inline uint64_t rx_u64_abs(int64_t a) { return a < 0 ? 0 - (uint64_t)a : (uint64_t)a; }
static inline uint64_t rx_u64_gcd(uint64_t a, uint64_t b) {
  while (b) {
    uint64_t t = a % b;
    a = b;
    b = t;
  }
  return a;
}

/* ---- linear forms: c + sum of k * mono ---- */
typedef struct rx_term {
  const rx_expr *m; /* a mono (canonical) */
  int64_t k;        /* its coefficient */
} rx_term;

typedef struct rx_poly {
  rx_term *t; /* points at buf or at a heap array */
  size_t n, cap;
  int64_t c; /* constant part */
  bool ovf;  /* some coefficient arithmetic overflowed: the poly is unusable */
  rx_term buf[8];
} rx_poly;

/* A poly must not be copied by value (t may point into buf). */
void sym_poly_init(rx_poly *p);
void sym_poly_free(rx_poly *p);
void sym_poly_push(rx_poly *p, const rx_expr *m, int64_t k);
/* p += k * e, e canonical (flattens sums and coefficient terms) */
void sym_poly_add_expr(rx_poly *p, const rx_expr *e, int64_t k);
/* p += k * q */
void sym_poly_add_poly(rx_poly *p, const rx_poly *q, int64_t k);
/* Sorts terms, merges equal monos, drops zero coefficients. */
void sym_poly_norm(rx_poly *p);
/* The canonical sum of a normalized poly without overflow. */
const rx_expr *sym_poly_build(rx_expr_ctx *ctx, rx_poly *p);

/* Canonical negation of a comparison/logic value (x == 0 for a non-boolean x). */
const rx_expr *sym_expr_canon_not(rx_expr_ctx *ctx, const rx_expr *e);

#endif
