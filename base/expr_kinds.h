/* base/expr_kinds.h: the kinds of symbolic integer expressions, listed once, with what every
 * printer and parser of them shares: the operator's text in the text syntax
 * (docs/text-format.md, "Symbolic expressions"), the arity and the precedence class. shapes/
 * builds rx_expr_kind from it and prints with it, codegen/ prints kernel index arithmetic with
 * the precedences, and the runtime's evaluator (runtime/expr.c, which may include only base/)
 * parses the same operators. No code: an X-macro and an enum. */
#ifndef RX_EXPR_KINDS_H
#define RX_EXPR_KINDS_H

/* Precedence classes, loosest first: an operand whose class is below the one its place needs is
 * parenthesized. */
typedef enum rx_prec {
  RX_PREC_TOP = 0,
  RX_PREC_OR,    /* a || b */
  RX_PREC_AND,   /* a && b */
  RX_PREC_NOT,   /* !a */
  RX_PREC_CMP,   /* comparisons, not chained */
  RX_PREC_ADD,   /* a + b, a - b */
  RX_PREC_MUL,   /* a * b, a // b, a % b */
  RX_PREC_UNARY, /* -a, negative constants */
  RX_PREC_ATOM,  /* names, non-negative constants, calls (min, max, select), parenthesized */
} rx_prec;

/* X(ENUM, operator text ("" for none; the call name for min, max, select), arity, precedence
 * class without RX_PREC_). SUB, GT and GE appear only in raw form: the canonical form uses ADD
 * with negative coefficients and LT / LE with swapped operands. */
#define RX_EXPR_KINDS(X)                                                                           \
  X(CONST, "", 0, ATOM)     /* value */                                                            \
  X(VAR, "", 0, ATOM)       /* name */                                                             \
  X(ADD, "+", 2, ADD)       /* a + b */                                                            \
  X(SUB, "-", 2, ADD)       /* a - b */                                                            \
  X(MUL, "*", 2, MUL)       /* a * b */                                                            \
  X(FLOORDIV, "//", 2, MUL) /* floor(a / b) */                                                     \
  X(FLOORMOD, "%", 2, MUL)  /* a - b * floor(a / b): the sign of b */                              \
  X(MIN, "min", 2, ATOM)    /* min(a, b) */                                                        \
  X(MAX, "max", 2, ATOM)    /* max(a, b) */                                                        \
  X(EQ, "==", 2, CMP)       /* comparisons: 0 or 1 */                                              \
  X(NE, "!=", 2, CMP)                                                                              \
  X(LT, "<", 2, CMP)                                                                               \
  X(LE, "<=", 2, CMP)                                                                              \
  X(GT, ">", 2, CMP)                                                                               \
  X(GE, ">=", 2, CMP)                                                                              \
  X(AND, "&&", 2, AND)                                                                             \
  X(OR, "||", 2, OR)                                                                               \
  X(NOT, "!", 1, NOT)                                                                              \
  X(SELECT, "select", 3, ATOM) /* a ? b : c */

#endif
