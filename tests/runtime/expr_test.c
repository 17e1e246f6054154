/* tests/runtime/expr_test.c: the runtime's evaluator of symbolic expressions (rx_rt_eval). */
#include <stdint.h>

#include "rt_test.h"

static const char *const names[] = {"n", "m", "neg", "big", "n_2", "min"};
static const int64_t values[] = {10, 3, -7, INT64_MAX, 5, 100};
static const rx_rt_symbols syms = {names, values, 6};

static void expect(const char *text, int64_t want) {
  int64_t got = -12345;
  rx_status s = rx_rt_eval(text, &syms, &got);
  CHECK(s == NULL && got == want, "'%s': want %lld, got %lld (%s)", text, (long long)want,
        (long long)got, rx_status_message(s));
  rx_status_free(s);
}

static void expect_err(const char *text, rx_status_code code, const char *msg) {
  int64_t got = -12345;
  CHECK_ERR(rx_rt_eval(text, &syms, &got), code, msg);
  CHECK(got == 0, "'%s': out value must be zeroed on error, got %lld", text, (long long)got);
}

int main(void) {
  /* literals, names, precedence */
  expect("42", 42);
  expect("n", 10);
  expect("n_2", 5);
  expect("min", 100); /* a name, not the function, without '(' */
  expect("1 + 2 * 3", 7);
  expect("(1 + 2) * 3", 9);
  expect("n - m - 2", 5); /* left associative */
  expect("n * 4 + 255", 295);
  expect("(n * 4 + 255) // 256", 1);
  expect("-n + 3", -7);
  expect("- -n", 10);
  expect("2 * -m", -6);
  /* floor division and modulo with negatives */
  expect("7 // 2", 3);
  expect("-7 // 2", -4);
  expect("7 // -2", -4);
  expect("-7 // -2", 3);
  expect("neg // 2", -4);
  expect("-8 // 2", -4);
  expect("7 % 3", 1);
  expect("-7 % 3", 2);
  expect("7 % -3", -2);
  expect("-7 % -3", -1);
  expect("neg % n", 3);
  expect("-6 % 3", 0);
  expect("n // 3 * 3 + n % 3", 10);
  expect("1 - 7 // 2", -2); /* // binds tighter than - */
  /* min, max, select */
  expect("min(n, m)", 3);
  expect("max(n, m) + 1", 11);
  expect("min(max(neg, 0), 5)", 0);
  expect("select(n > 5, 1, 2)", 1);
  expect("select(n < 5, 1, 2)", 2);
  expect("select(n == 0, 0, m // n)", 0);
  expect("select(m == 3, 7, n // 0)", 7); /* the unselected arm's division by zero is not taken */
  /* comparisons and logic; ! is looser than comparisons */
  expect("n == 10", 1);
  expect("n != 10", 0);
  expect("n <= 10 && m >= 3", 1);
  expect("n < 10 || m > 3", 0);
  expect("!n == 10", 0);
  expect("!(n == 1)", 1);
  expect("!0", 1);
  expect("1 || 0 && 0", 1); /* && binds tighter than || */
  expect("0 && n // 0", 0); /* short circuit */
  expect("1 || n // 0", 1);
  expect("n % 2 == 0 && n >= 8", 1);
  expect("  n\t+\n1 ", 11);
  /* errors */
  expect_err("", RX_ERR_INVALID, "unexpected end");
  expect_err("n +", RX_ERR_INVALID, "unexpected end");
  expect_err("(n + 1", RX_ERR_INVALID, "expected ')'");
  expect_err("n + 1)", RX_ERR_INVALID, "unexpected text");
  expect_err("n $ 2", RX_ERR_INVALID, "column 3");
  expect_err("n / 2", RX_ERR_INVALID, "use //");
  expect_err("k + 1", RX_ERR_NOT_FOUND, "'k'");
  expect_err("foo(1, 2)", RX_ERR_INVALID, "unknown function 'foo'");
  expect_err("min(1)", RX_ERR_INVALID, "expected ','");
  expect_err("select(1, 2)", RX_ERR_INVALID, "expected ','");
  expect_err("n // 0", RX_ERR_INVALID, "division by zero");
  expect_err("n % (m - 3)", RX_ERR_INVALID, "modulo by zero");
  expect_err("big + 1", RX_ERR_INVALID, "overflow");
  expect_err("big * 2", RX_ERR_INVALID, "overflow");
  expect_err("99999999999999999999", RX_ERR_INVALID, "out of range");
  expect_err("1 < 2 < 3", RX_ERR_INVALID, "do not chain");
  expect_err("2n", RX_ERR_INVALID, "malformed number");
  /* no symbols at all */
  int64_t v = 0;
  CHECK_OK(rx_rt_eval("3 * 4", NULL, &v));
  CHECK(v == 12, "got %lld", (long long)v);
  CHECK_ERR(rx_rt_eval("n", NULL, &v), RX_ERR_NOT_FOUND, "'n'");
  return t_finish("runtime.expr");
}
