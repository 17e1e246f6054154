/* tests/runtime/expr_test.c: the runtime's symbolic expressions: the one-shot evaluator
 * (rx_rt_eval), and expressions compiled once and evaluated over slots (rt_expr, what the loader
 * makes of kernels.json and the host program). */
#include <stdint.h>

#include "../unit/check.h"
#include "relaxc/runtime.h"
#include "runtime/device.h"

static const char *const names[] = {"n", "m", "neg", "big", "n_2", "min"};
static const int64_t values[] = {10, 3, -7, INT64_MAX, 5, 100};
static const rx_rt_symbols syms = {names, values, 6};

static void expect(const char *text, int64_t want) {
  int64_t got = -12345;
  rx_status s = rx_rt_eval(text, &syms, &got);
  CHECK_MSG(s == NULL && got == want, "'%s': want %lld, got %lld (%s)", text, (long long)want,
            (long long)got, rx_status_message(s));
  rx_status_free(s);
}

static void expect_err(const char *text, rx_status_code code, const char *msg) {
  int64_t got = -12345;
  CHECK_ERR(rx_rt_eval(text, &syms, &got), code, msg);
  CHECK_MSG(got == 0, "'%s': out value must be zeroed on error, got %lld", text, (long long)got);
}

/* Compiled once, evaluated over changing values: the slots of one name table, shared by the
 * expressions of one kernel or host program; an unbound slot is an error naming the variable. */
static void test_compiled(void) {
  rt_names tab = {.alloc = &rt_default_allocator};
  rt_expr *grid = NULL, *cond = NULL, *sel = NULL, *bad = NULL;
  CHECK_OK(rt_expr_compile("(n * 4 + 255) // 256", &tab, &grid));
  CHECK_OK(rt_expr_compile("m <= 16 && n % 16 == 0", &tab, &cond));
  CHECK_OK(rt_expr_compile("select(m == 0, 0, n // m)", &tab, &sel));
  CHECK_MSG(tab.count == 2 && !strcmp(tab.names[0], "n") && !strcmp(tab.names[1], "m"), "%u names",
            tab.count);
  CHECK_MSG(rt_expr_var_count(cond) == 2 && rt_expr_var_slot(cond, 0) == 1,
            "the variables of cond");
  int64_t vals[2] = {0, 0}, v = -1;
  uint8_t bound[2] = {1, 0};
  CHECK_ERR(rt_expr_eval(cond, vals, bound, &v), RX_ERR_NOT_FOUND,
            "in expression 'm <= 16 && n % 16 == 0': column 1: no value given for the symbolic "
            "variable 'm'");
  bound[1] = 1;
  for (int64_t n = 0; n < 100; n += 7)
    for (int64_t m = 0; m < 40; m += 13) {
      vals[0] = n, vals[1] = m;
      CHECK_OK(rt_expr_eval(grid, vals, bound, &v));
      CHECK_MSG(v == (n * 4 + 255) / 256, "grid at n = %lld: %lld", (long long)n, (long long)v);
      CHECK_OK(rt_expr_eval(cond, vals, bound, &v));
      CHECK_MSG(v == (m <= 16 && n % 16 == 0), "cond at n = %lld, m = %lld", (long long)n,
                (long long)m);
      CHECK_OK(rt_expr_eval(sel, vals, bound, &v));
      CHECK_MSG(v == (m == 0 ? 0 : n / m), "select at n = %lld, m = %lld", (long long)n,
                (long long)m);
    }
  int64_t c = 0;
  CHECK_MSG(rt_expr_constant(grid, &c) == false, "not a constant");
  CHECK_OK(rt_expr_compile(" 4096 ", &tab, &bad));
  CHECK_MSG(rt_expr_constant(bad, &c) && c == 4096, "a constant: %lld", (long long)c);
  rt_expr_free(tab.alloc, bad);
  bad = NULL;
  CHECK_ERR(rt_expr_compile("n +", &tab, &bad), RX_ERR_INVALID, "column 4: unexpected end");
  CHECK_MSG(bad == NULL, "no expression on error");
  /* nesting: 60 levels compile, more do not (the parser recurses per level) */
  char deep[256] = "";
  for (int i = 0; i < 60; i++) strcat(deep, i % 2 ? "(" : "-");
  strcat(deep, "n");
  for (int i = 0; i < 30; i++) strcat(deep, ")");
  CHECK_OK(rt_expr_compile(deep, &tab, &bad));
  vals[0] = 5;
  CHECK_OK(rt_expr_eval(bad, vals, bound, &v));
  CHECK_MSG(v == 5, "60 levels: %lld", (long long)v);
  rt_expr_free(tab.alloc, bad);
  bad = NULL;
  CHECK_ERR(rt_expr_compile("-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(-(n)"
                            ")))))))))))))))))))))))))))))))))",
                            &tab, &bad),
            RX_ERR_INVALID, "nested more than 60 levels deep");
  rt_expr_free(tab.alloc, grid);
  rt_expr_free(tab.alloc, cond);
  rt_expr_free(tab.alloc, sel);
  rt_names_free(&tab);
}

int main(void) {
  test_compiled();
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
  CHECK_MSG(v == 12, "got %lld", (long long)v);
  CHECK_ERR(rx_rt_eval("n", NULL, &v), RX_ERR_NOT_FOUND, "'n'");
  return check_finish("runtime.expr");
}
