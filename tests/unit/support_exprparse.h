/* Test-only parser of symbolic expressions, in the syntax sym_expr_print prints:
 * integers, names, + - * // %, unary -, min(a, b), max(a, b), select(c, a, b),
 * == != < <= > >=, && || !, parentheses. It builds RAW nodes (sym_expr_raw), so tests can write
 * unsimplified inputs as text: "-x" is 0 - x, "-5" is the constant -5. */
#ifndef RX_TEST_EXPRPARSE_H
#define RX_TEST_EXPRPARSE_H

#include "shapes/shapes.h"

/* The raw expression of text, or NULL on a syntax error (then err, when given, holds a message
 * of at most errlen bytes). */
const rx_expr *rx_test_parse(rx_expr_ctx *ctx, const char *text, char *err, size_t errlen);
/* rx_test_parse then sym_expr_simplify; aborts the test program on a syntax error. */
const rx_expr *rx_test_parse_simplified(rx_expr_ctx *ctx, const char *text);

#endif
