/* Unit tests of shapes/: canonical forms, printing, evaluation, substitution, the analyzer,
 * and randomized differential checks (seed fixed; RX_SEED=<number> picks another).
 *
 * Inputs are written as text and parsed into RAW nodes by tests/unit/support_exprparse.c;
 * an expected canonical form is written as text too and compared by pointer after
 * simplification, and by its printed text. */
#include "check.h"
#include "shapes/shapes.h"
#include "support_exprparse.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static rx_expr_ctx *C;

static const rx_expr *P(const char *s) {
  char err[200];
  const rx_expr *e = rx_test_parse(C, s, err, sizeof err);
  if (!e) {
    fprintf(stderr, "test input does not parse: \"%s\": %s\n", s, err);
    abort();
  }
  return e;
}
static const rx_expr *S(const char *s) { return sym_expr_simplify(C, P(s)); }

/* printed text in a small ring of static buffers (no frees in the tests) */
static const char *T(const rx_expr *e) {
  static char ring[8][512];
  static int k;
  char *s = sym_expr_to_string(e);
  char *out = ring[k++ % 8];
  snprintf(out, sizeof ring[0], "%s", s);
  free(s);
  return out;
}

/* ---------------------------------------------------------------- canonical forms */

static const struct {
  const char *in, *want;
} SIMP[] = {
    {"n*4 + 2*n - n*6", "0"},
    {"(a+b)*c", "a * c + b * c"},
    {"a*c + b*c", "a * c + b * c"},
    {"c*(b+a)", "a * c + b * c"},
    {"n*4+2", "n * 4 + 2"},
    {"2 + 4*n", "n * 4 + 2"},
    {"n + -1", "n - 1"},
    {"-n + 8", "8 - n"},
    {"-n - 1", "-n - 1"},
    {"-n*4 - 1", "-n * 4 - 1"},
    {"m - n", "m - n"},
    {"-n + m", "m - n"},
    {"(n*8 + 7) // 8", "n"},
    {"(n*16) % 8", "0"},
    {"(n + 7) // 8", "(n + 7) // 8"},
    {"(n + 7) // 8 * 8", "(n + 7) // 8 * 8"},
    {"(n - 1) // 8 + 1", "(n + 7) // 8"},
    {"(n*4 + 4) // 4", "n + 1"},
    {"(n*2 + 1) // 4", "n // 2"},
    {"(n*2 + 1) % 4", "n % 2 * 2 + 1"},
    {"(n*9) // 8", "n + n // 8"},
    {"(n*9) % 8", "n % 8"},
    {"(x*6) % 4", "x % 2 * 2"},
    {"x * 2 // 2", "x"},
    {"x // 4 // 2", "x // 8"},
    {"(x // 3 + 2) // 5", "(x + 6) // 15"},
    {"(n % 16) % 8", "n % 8"},
    {"(n % 16 + 1) % 8", "(n + 1) % 8"},
    {"(i*8 + j) // 8 * 8 + (i*8 + j) % 8", "i * 8 + j"},
    {"n // 8 * 8 + n % 8", "n"},
    {"n // 8 * 16 + n % 8 * 2", "n * 2"},
    {"(x - 1) // -4", "(1 - x) // 4"},
    {"n % -8", "-(-n % 8)"},
    {"x // 1", "x"},
    {"x % 1", "0"},
    {"x % -1", "0"},
    {"x // -1", "-x"},
    {"0 // x", "0"},
    {"0 % x", "0"},
    {"x // y", "x // y"},
    {"x // 0", "x // 0"},
    {"x % 0", "x % 0"},
    {"(x // 0) * 0", "0"},
    {"-7 // 2", "-4"},
    {"-7 % 2", "1"},
    {"7 % -2", "-1"},
    {"7 // -2", "-4"},
    {"-7 // -2", "3"},
    {"-7 % -2", "-1"},
    {"-8 // 2", "-4"},
    {"-9223372036854775808 % -1", "0"},
    {"-9223372036854775808 // -1", "(-9223372036854775807 - 1) // -1"},
    {"9223372036854775807 + 1", "9223372036854775807 + 1"},
    {"-9223372036854775807 - 2", "-9223372036854775807 - 2"},
    {"9223372036854775807 * 2", "9223372036854775807 * 2"},
    {"x * 9223372036854775807 * 2", "x * 9223372036854775807 * 2"},
    {"-9223372036854775808", "(-9223372036854775807 - 1)"},
    {"x + -9223372036854775808", "x + (-9223372036854775807 - 1)"},
    {"x * -9223372036854775808", "x * (-9223372036854775807 - 1)"},
    {"(a+1)*(b+1)", "a + b + a * b + 1"},
    {"n*n - n*n", "0"},
    {"(n + 1)*(n - 1)", "n * n - 1"},
    {"(a - b) * (a + b)", "a * a - b * b"},
    {"x*y*2 + y*x", "x * y * 3"},
    {"(m*n)*4 - n", "m * n * 4 - n"},
    {"x * 0", "0"},
    {"x * 1", "x"},
    {"x - x", "0"},
    {"x + x", "x * 2"},
    {"-(x)", "-x"},
    {"-(-x)", "x"},
    {"-(n // 8)", "-(n // 8)"},
    {"min(16, n)", "min(n, 16)"},
    {"min(n, 16)", "min(n, 16)"},
    {"min(n + 1, n + 2)", "n + 1"},
    {"max(n + 1, n + 2)", "n + 2"},
    {"max(n, min(n, m))", "n"},
    {"min(n, max(n, m))", "n"},
    {"min(min(a, b), min(b, c))", "min(min(a, b), c)"},
    {"min(c, min(b, a))", "min(min(a, b), c)"},
    {"min(3, 5)", "3"},
    {"max(-3, 5)", "5"},
    {"min(x, y) - min(y, x)", "0"},
    {"max(a, b) + min(a, b)", "min(a, b) + max(a, b)"},
    {"select(n < 8, n, 8)", "select(n < 8, n, 8)"},
    {"select(8 > n, n, 8)", "select(n < 8, n, 8)"},
    {"n > m", "m < n"},
    {"m < n", "m < n"},
    {"n >= 1", "1 <= n"},
    {"2*n < 7", "n < 4"},
    {"2*n <= 7", "n <= 3"},
    {"3*n == 7", "0"},
    {"3*n != 7", "1"},
    {"2*n == 2*m + 4", "m + 2 == n"},
    {"n - 2 == m", "m + 2 == n"},
    {"n == m", "m == n"},
    {"n + 1 <= m", "n + 1 <= m"},
    {"n <= m - 1", "n + 1 <= m"},
    {"n - m < 0", "n < m"},
    {"0 < n - 3", "3 < n"},
    {"m*2 + 3 < n*2", "m + 1 < n"},
    {"n * 4 <= 4096", "n <= 1024"},
    {"-x < 5", "-5 < x"},
    {"3 < 5", "1"},
    {"5 <= 3", "0"},
    {"x == x", "1"},
    {"x < x", "0"},
    {"!(a < b)", "b <= a"},
    {"!(a <= b)", "b < a"},
    {"!(a == b)", "a != b"},
    {"!(a != b)", "a == b"},
    {"!!(a < b)", "a < b"},
    {"!(a && b < 3)", "a == 0 || 3 <= b"},
    {"!x", "x == 0"},
    {"!5", "0"},
    {"a && 1", "a != 0"},
    {"x && y", "x != 0 && y != 0"},
    {"x || !x", "1"},
    {"x && !x", "0"},
    {"a < b && b < c", "a < b && b < c"},
    {"b < c && a < b", "a < b && b < c"},
    {"a < b && a < b", "a < b"},
    {"a < b || 0", "a < b"},
    {"a < b && 0", "0"},
    {"select(1, a, b)", "a"},
    {"select(0, a, b)", "b"},
    {"select(c, a, a)", "a"},
    {"select(x, 1, 0)", "x != 0"},
    {"select(x != 0, a, b)", "select(x == 0, b, a)"},
    {"select(a < b, 1, 0)", "a < b"},
    {"select(a < b, 0, 1)", "b <= a"},
    {"(a < b) == 1", "a < b"},
    {"(a < b) == 0", "b <= a"},
    {"(a < b) != 0", "a < b"},
    {"(a < b) == 2", "0"},
    {"x == 0", "x == 0"},
};

static void test_simplify(void) {
  for (size_t i = 0; i < RX_ARRAY_LEN(SIMP); i++) {
    const rx_expr *got = S(SIMP[i].in), *want = S(SIMP[i].want);
    const char *gs = T(got);
    CHECK_MSG(got == want && strcmp(gs, SIMP[i].want) == 0, "simplify(%s) = %s, want %s (%s)",
              SIMP[i].in, gs, SIMP[i].want, got == want ? "same node" : "different node");
  }
  /* the canonicalizing constructors agree with simplify */
  const rx_expr *n = sym_expr_var(C, "n"), *m = sym_expr_var(C, "m");
  const rx_expr *k4 = sym_expr_const(C, 4), *k8 = sym_expr_const(C, 8);
  CHECK_MSG(sym_expr_var(C, "n") == n, "variables are interned by name");
  CHECK_MSG(sym_expr_add(C, sym_expr_mul(C, n, k4), sym_expr_const(C, 2)) == S("n*4 + 2"),
            "add/mul");
  CHECK_MSG(sym_expr_sub(C, n, n) == sym_expr_const(C, 0), "n - n");
  CHECK_MSG(sym_expr_neg(C, sym_expr_neg(C, n)) == n, "--n");
  CHECK_MSG(
      sym_expr_floordiv(C, sym_expr_add(C, sym_expr_mul(C, n, k8), sym_expr_const(C, 7)), k8) == n,
      "(n*8+7)//8");
  CHECK_MSG(sym_expr_floormod(C, sym_expr_mul(C, n, sym_expr_const(C, 16)), k8) ==
                sym_expr_const(C, 0),
            "(n*16)%%8");
  CHECK_MSG(sym_expr_min(C, n, m) == sym_expr_min(C, m, n), "min commutes");
  CHECK_MSG(sym_expr_max(C, n, m) == S("max(m, n)"), "max");
  CHECK_MSG(sym_expr_cmp(C, RX_EXPR_GT, n, m) == sym_expr_cmp(C, RX_EXPR_LT, m, n), "n > m");
  CHECK_MSG(sym_expr_cmp(C, RX_EXPR_GE, n, m) == S("m <= n"), "n >= m");
  CHECK_MSG(sym_expr_and(C, S("a < b"), S("b < c")) == S("b < c && a < b"), "and");
  CHECK_MSG(sym_expr_or(C, S("a < b"), S("b <= a")) == sym_expr_const(C, 1), "or of complements");
  CHECK_MSG(sym_expr_not(C, S("a < b")) == S("b <= a"), "not");
  CHECK_MSG(sym_expr_select(C, S("n < 8"), n, k8) == S("select(n < 8, n, 8)"), "select");
  CHECK_MSG(sym_expr_make(C, RX_EXPR_SUB, n, k4, NULL) == S("n - 4"), "make");
  const rx_expr *raw = sym_expr_raw(C, RX_EXPR_ADD, n, n, NULL);
  CHECK_MSG(raw->kind == RX_EXPR_ADD && raw->a == n, "raw stays as given");
  CHECK_MSG(sym_expr_simplify(C, raw) == S("n * 2"), "simplify(raw)");
  /* (a+b)*c and a*c+b*c are the same pointer */
  const rx_expr *a = sym_expr_var(C, "a"), *b = sym_expr_var(C, "b"), *c = sym_expr_var(C, "c");
  CHECK_MSG(sym_expr_mul(C, sym_expr_add(C, a, b), c) ==
                sym_expr_add(C, sym_expr_mul(C, a, c), sym_expr_mul(C, b, c)),
            "distributivity by pointer");
  /* idempotent */
  for (size_t i = 0; i < RX_ARRAY_LEN(SIMP); i += 7) {
    const rx_expr *e = S(SIMP[i].in);
    CHECK_MSG(sym_expr_simplify(C, e) == e, "simplify(simplify(%s))", SIMP[i].in);
  }
}

/* ---------------------------------------------------------------- printing */

static const struct {
  const char *in, *want; /* raw input printed as is */
} PRINT_RAW[] = {
    {"a - (b - c)", "a - (b - c)"},
    {"a - b - c", "a - b - c"},
    {"(a + b) * c", "(a + b) * c"},
    {"a * (b // c)", "a * (b // c)"},
    {"(a // b) // c", "a // b // c"},
    {"a // (b // c)", "a // (b // c)"},
    {"a % (b * c)", "a % (b * c)"},
    {"-(a + b)", "0 - (a + b)"},
    {"!(a < b)", "!(a < b)"},
    {"!a", "!a"},
    {"!!a", "!!a"},
    {"(!a) == b", "(!a) == b"},
    {"(a || b) && c", "(a || b) && c"},
    {"a || b && c", "a || b && c"},
    {"(a < b) == (c < d)", "(a < b) == (c < d)"},
    {"a + b < c * 2", "a + b < c * 2"},
    {"select(a, b, c) + 1", "select(a, b, c) + 1"},
    {"min(a + 1, b * 2)", "min(a + 1, b * 2)"},
    {"a - -5", "a - -5"},
    {"a * -5", "-a * 5"},
    {"(-5) * a", "-5 * a"},
    {"a // -2", "a // -2"},
    {"1 + n", "1 + n"},
    {"a > b", "a > b"},
    {"a >= b + 1", "a >= b + 1"},
};

static const struct {
  const char *in, *want; /* canonical form printed */
} PRINT_CANON[] = {
    {"n*4 + 2", "n * 4 + 2"},
    {"n - 1", "n - 1"},
    {"8 - n", "8 - n"},
    {"(n + 7) // 8", "(n + 7) // 8"},
    {"min(n, 16)", "min(n, 16)"},
    {"select(n < 8, n, 8)", "select(n < 8, n, 8)"},
    {"n % 8 * 4 + n // 8", "n // 8 + n % 8 * 4"},
    {"-(n % 8)", "-(n % 8)"},
    {"b*s*4096 + s*128", "s * 128 + b * s * 4096"},
    {"(n*2 + 3) // 4 * 2", "(n + 1) // 2 * 2"},
    {"min(n, 16) * 4 - 1", "min(n, 16) * 4 - 1"},
    {"i*4 + j < n*4", "i * 4 + j < n * 4"},
    {"n <= 4096 && n % 16 == 0", "n % 16 == 0 && n <= 4096"},
    {"select(a < b, a, b) * 2", "select(a < b, a, b) * 2"},
    {"x % y + 1", "x % y + 1"},
};

static void test_print(void) {
  for (size_t i = 0; i < RX_ARRAY_LEN(PRINT_RAW); i++) {
    const rx_expr *e = P(PRINT_RAW[i].in);
    const char *s = T(e);
    CHECK_MSG(strcmp(s, PRINT_RAW[i].want) == 0, "print(raw %s) = %s, want %s", PRINT_RAW[i].in, s,
              PRINT_RAW[i].want);
    /* what it prints means the same */
    CHECK_MSG(S(s) == sym_expr_simplify(C, e), "print(raw %s) reparses to another value",
              PRINT_RAW[i].in);
  }
  for (size_t i = 0; i < RX_ARRAY_LEN(PRINT_CANON); i++) {
    const char *s = T(S(PRINT_CANON[i].in));
    CHECK_MSG(strcmp(s, PRINT_CANON[i].want) == 0, "print(%s) = %s, want %s", PRINT_CANON[i].in, s,
              PRINT_CANON[i].want);
  }
  rx_strbuf b = {0};
  sym_expr_print(&b, S("n + 1"));
  base_strbuf_append(&b, " | ");
  sym_expr_print(&b, S("n - 1"));
  CHECK_MSG(strcmp(b.data, "n + 1 | n - 1") == 0, "rx_expr_print appends: %s", b.data);
  base_strbuf_free(&b);
  /* a canonical form printed, parsed into a fresh context and simplified prints the same */
  rx_expr_ctx *c2 = sym_expr_ctx_new();
  for (size_t i = 0; i < RX_ARRAY_LEN(SIMP); i++) {
    char *s1 = sym_expr_to_string(S(SIMP[i].in));
    char *s2 = sym_expr_to_string(rx_test_parse_simplified(c2, s1));
    CHECK_MSG(strcmp(s1, s2) == 0, "round trip of %s: %s vs %s", SIMP[i].in, s1, s2);
    free(s1);
    free(s2);
  }
  sym_expr_ctx_free(c2);
}

/* ---------------------------------------------------------------- evaluation */

/* binds "n=3,m=-4" into env (vars/values arrays of at least 8) */
static void bind(const char *binds, rx_expr_env *env, const rx_expr **vars, int64_t *values) {
  env->vars = vars;
  env->values = values;
  env->n = 0;
  const char *p = binds;
  while (p && *p) {
    char name[32];
    long long v;
    int used = 0;
    if (sscanf(p, " %31[A-Za-z_0-9] = %lld%n", name, &v, &used) != 2) abort();
    vars[env->n] = sym_expr_var(C, name);
    values[env->n++] = (int64_t)v;
    p += used;
    if (*p == ',') p++;
  }
}

static void eval_ok(const char *e, const char *binds, int64_t want) {
  const rx_expr *vars[8];
  int64_t values[8], got = 0;
  rx_expr_env env;
  bind(binds, &env, vars, values);
  rx_eval_status s = sym_expr_eval_status(P(e), &env, &got);
  CHECK_MSG(s == RX_EVAL_OK && got == want,
            "eval(%s | %s) = %" PRId64 " (status %d), want %" PRId64, e, binds, got, (int)s, want);
  /* the canonical form agrees */
  int64_t got2 = 0;
  bool ok2 = sym_expr_eval(S(e), &env, &got2);
  CHECK_MSG(ok2 && got2 == want, "eval(simplify(%s) | %s) = %" PRId64, e, binds, got2);
}

static void eval_fail(const char *e, const char *binds, rx_eval_status want) {
  const rx_expr *vars[8];
  int64_t values[8], got = 12345;
  rx_expr_env env;
  bind(binds, &env, vars, values);
  rx_eval_status s = sym_expr_eval_status(P(e), &env, &got);
  CHECK_MSG(s == want && got == 12345 && !sym_expr_eval(P(e), &env, &got),
            "eval(%s | %s): status %d, want %d", e, binds, (int)s, (int)want);
}

static void test_eval(void) {
  eval_ok("n * 4 + 2", "n=3", 14);
  eval_ok("-7 // 2", "", -4);
  eval_ok("-7 % 2", "", 1);
  eval_ok("7 % -2", "", -1);
  eval_ok("7 // -2", "", -4);
  eval_ok("x // y", "x=-7,y=2", -4);
  eval_ok("x % y", "x=-7,y=2", 1);
  eval_ok("x % y", "x=7,y=-2", -1);
  eval_ok("x // y", "x=-7,y=-2", 3);
  eval_ok("x % y", "x=-7,y=-2", -1);
  eval_ok("x // y", "x=6,y=3", 2);
  eval_ok("x % y", "x=-6,y=3", 0);
  eval_ok("x % y", "x=-9223372036854775808,y=-1", 0);
  eval_ok("x // y", "x=-9223372036854775807,y=-1", INT64_MAX);
  eval_ok("min(x, y) + max(x, y)", "x=3,y=-5", -2);
  eval_ok("x < y", "x=1,y=2", 1);
  eval_ok("x >= y", "x=1,y=2", 0);
  eval_ok("x != y && x <= y", "x=1,y=2", 1);
  eval_ok("x > y || !x", "x=0,y=2", 1);
  eval_ok("select(x == 0, 0, 10 // x)", "x=0", 0);
  eval_ok("select(x < 3, x, 3)", "x=5", 3);
  eval_ok("(n + 7) // 8 * 8", "n=13", 16);
  eval_ok("9223372036854775807 + x", "x=-1", INT64_MAX - 1);
  eval_ok("x * y", "x=-3037000499,y=3037000499", -INT64_C(9223372030926249001));
  eval_fail("x // 0", "x=5", RX_EVAL_DIV_ZERO);
  eval_fail("x % y", "x=5,y=0", RX_EVAL_DIV_ZERO);
  eval_fail("x // y", "x=-9223372036854775808,y=-1", RX_EVAL_OVERFLOW);
  eval_fail("x + 1", "x=9223372036854775807", RX_EVAL_OVERFLOW);
  eval_fail("x - 1", "x=-9223372036854775808", RX_EVAL_OVERFLOW);
  eval_fail("x * 2", "x=4611686018427387904", RX_EVAL_OVERFLOW);
  eval_fail("-x", "x=-9223372036854775808", RX_EVAL_OVERFLOW);
  eval_fail("x + y", "x=1", RX_EVAL_UNBOUND);
  eval_fail("x && y // 0", "x=0,y=1", RX_EVAL_DIV_ZERO);
  eval_fail("select(x, y // 0, 1)", "x=1,y=1", RX_EVAL_DIV_ZERO);
  eval_fail("9223372036854775807 + 1", "", RX_EVAL_OVERFLOW);
  /* an unfolded overflow stays unfolded and still fails at evaluation */
  int64_t v;
  CHECK_MSG(!sym_expr_eval(S("9223372036854775807 + 1"), NULL, &v), "unfolded overflow evaluates");
  CHECK_MSG(sym_expr_eval(S("(x // 0) * 0"), NULL, &v) && v == 0, "simplified may succeed");
}

/* ---------------------------------------------------------------- queries, substitution */

static void test_queries(void) {
  CHECK_MSG(sym_expr_is_bool(S("a < b")) && sym_expr_is_bool(S("a && b")) &&
                sym_expr_is_bool(S("1")),
            "is_bool");
  CHECK_MSG(!sym_expr_is_bool(S("a")) && !sym_expr_is_bool(S("2")) && !sym_expr_is_bool(S("a + 1")),
            "!is_bool");
  CHECK_MSG(rx_expr_is_const(S("3 * 4"), 12), "is_const");
  rx_ptrvec v = {0};
  sym_expr_collect_vars(P("b * (a + b) // c + a"), &v);
  CHECK_MSG(v.len == 3 && v.data[0] == sym_expr_var(C, "b") && v.data[1] == sym_expr_var(C, "a") &&
                v.data[2] == sym_expr_var(C, "c"),
            "collect_vars: %zu", v.len);
  sym_expr_collect_vars(P("select(d, a, e)"), &v);
  CHECK_MSG(v.len == 5, "collect_vars appends distinct: %zu", v.len);
  base_ptrvec_free(&v);
  CHECK_MSG(sym_expr_uses_var(S("min(x, y + 1)"), sym_expr_var(C, "y")), "uses_var");
  CHECK_MSG(!sym_expr_uses_var(S("x * 0 + y"), sym_expr_var(C, "x")), "!uses_var");
  CHECK_MSG(sym_expr_compare(S("a"), S("b")) < 0 && sym_expr_compare(S("b"), S("a")) > 0 &&
                sym_expr_compare(S("a + 1"), S("a + 1")) == 0,
            "compare");
  CHECK_MSG(sym_expr_compare(S("n"), S("16")) < 0, "compare: constants last");
  /* the order is structural: a fresh context with other creation order agrees */
  rx_expr_ctx *c2 = sym_expr_ctx_new();
  rx_test_parse_simplified(c2, "zz + yy * 3 + xx");
  CHECK_MSG(strcmp(T(rx_test_parse_simplified(c2, "xx + yy * 3 + zz")), T(S("zz + xx + yy * 3"))) ==
                0,
            "order independent of creation");
  sym_expr_ctx_free(c2);
}

static void subst1(const char *e, const char *names, const char *repls, const char *want) {
  const rx_expr *vars[4], *repl[4];
  size_t n = 0;
  char nb[64], rb[256];
  snprintf(nb, sizeof nb, "%s", names);
  snprintf(rb, sizeof rb, "%s", repls);
  char *sn = NULL, *sr = NULL;
  for (char *t = strtok_r(nb, ",", &sn); t; t = strtok_r(NULL, ",", &sn))
    vars[n++] = sym_expr_var(C, t);
  size_t m = 0;
  for (char *t = strtok_r(rb, ";", &sr); t; t = strtok_r(NULL, ";", &sr)) repl[m++] = P(t);
  const rx_expr *got = sym_expr_subst(C, P(e), vars, repl, n);
  CHECK_MSG(m == n && got == S(want), "subst(%s; %s := %s) = %s, want %s", e, names, repls, T(got),
            want);
}

static void test_subst(void) {
  subst1("n * 2", "n", "m + 1", "m * 2 + 2");
  subst1("a - b", "a,b", "b;a", "b - a");
  subst1("(n + 7) // 8", "n", "k * 8", "k");
  subst1("n * m", "n", "3", "m * 3");
  subst1("x + x", "y", "1", "x * 2");
  subst1("min(n, 16) + n", "n", "4", "8");
  subst1("select(n < 8, n, 8)", "n", "i + 1", "select(i < 7, i + 1, 8)");
  subst1("(a + b) * (a - b)", "a,b", "b;a", "b * b - a * a");
  subst1("x // y", "y", "0", "x // 0");
}

/* ---------------------------------------------------------------- analyzer */

/* an analyzer holding facts "f1; f2; ..." (each must be accepted) */
static rx_analyzer *A(const char *facts) {
  rx_analyzer *an = sym_analyzer_new(C);
  char buf[512];
  snprintf(buf, sizeof buf, "%s", facts);
  char *save = NULL;
  for (char *t = strtok_r(buf, ";", &save); t; t = strtok_r(NULL, ";", &save)) {
    bool ok = sym_analyzer_assume(an, P(t));
    if (!ok) fprintf(stderr, "fact rejected: %s (in %s)\n", t, facts);
  }
  return an;
}

static void asimp(const char *facts, const char *e, const char *want) {
  rx_analyzer *an = A(facts);
  const rx_expr *got = sym_analyzer_simplify(an, P(e));
  CHECK_MSG(got == S(want), "[%s] simplify(%s) = %s, want %s", facts, e, T(got), want);
  sym_analyzer_free(an);
}

static const char *TRI[] = {"false", "true", "unknown"};

static void prove(const char *facts, const char *cond, rx_tribool want) {
  rx_analyzer *an = A(facts);
  rx_tribool got = sym_analyzer_prove(an, P(cond));
  CHECK_MSG(got == want, "[%s] prove(%s) = %s, want %s", facts, cond, TRI[got], TRI[want]);
  sym_analyzer_free(an);
}

static void bounds(const char *facts, const char *e, int64_t lo, int64_t hi) {
  rx_analyzer *an = A(facts);
  rx_interval b = sym_analyzer_bounds(an, P(e));
  CHECK_MSG(b.lo == lo && b.hi == hi,
            "[%s] bounds(%s) = [%" PRId64 ", %" PRId64 "], want [%" PRId64 ", %" PRId64 "]", facts,
            e, b.lo, b.hi, lo, hi);
  sym_analyzer_free(an);
}

static void divisor(const char *facts, const char *e, int64_t want) {
  rx_analyzer *an = A(facts);
  int64_t got = sym_analyzer_divisor(an, P(e));
  CHECK_MSG(got == want, "[%s] divisor(%s) = %" PRId64 ", want %" PRId64, facts, e, got, want);
  sym_analyzer_free(an);
}

#define MIN64 INT64_MIN
#define MAX64 INT64_MAX

static void test_analyzer(void) {
  const char *R = "1 <= n; n <= 4096";
  bounds(R, "n", 1, 4096);
  bounds(R, "n * 2 + 1", 3, 8193);
  bounds(R, "n // 8", 0, 512);
  bounds(R, "n % 8", 0, 7);
  bounds(R, "min(n, 100)", 1, 100);
  bounds(R, "4096 - n", 0, 4095);
  bounds(R, "n * n", 1, 4096 * 4096);
  bounds(R, "n - m", MIN64, MAX64);
  bounds(R, "select(n < 100, n, 100)", 1, 100);
  bounds("", "n", MIN64, MAX64);
  bounds("", "n % 8", 0, 7);
  bounds("", "n % -8", -7, 0);
  bounds("", "x * x", 0, MAX64);
  bounds("", "n < m", 0, 1);
  bounds("0 <= x; x <= 10; 1 <= y; y <= 3", "x // y", 0, 10);
  bounds("-10 <= x; x <= 10; 1 <= y; y <= 3", "x // y", -10, 10);
  bounds("0 <= x; x <= 10; 1 <= y; y <= 3", "x % y", 0, 2);
  bounds("0 <= x; x <= 10; -3 <= y; y <= 3", "x // y", -10, 10);
  bounds("5 <= x; x <= 7", "x % 8", 5, 7);
  bounds("9 <= x; x <= 11", "x % 8", 1, 3);
  bounds("9223372036854775800 <= x", "x + 100", 9223372036854775807, MAX64);
  bounds("x <= -9223372036854775800", "x * 2", MIN64, MIN64);

  const char *D = "n % 16 == 0; 1 <= n; n <= 4096";
  bounds(D, "n", 16, 4096);
  divisor(D, "n", 16);
  divisor(D, "n * 3", 48);
  divisor(D, "n + 8", 8);
  divisor(D, "n + 16", 16);
  divisor(D, "n * m", 16);
  divisor(D, "n // 4", 4);
  divisor(D, "n % 32", 16);
  divisor(D, "max(n, 64)", 16);
  asimp(D, "n % 16", "0");
  asimp(D, "n % 8", "0");
  asimp(D, "(n + 7) // 8 * 8", "n");
  asimp(D, "(n + 15) // 16", "n // 16");
  asimp(D, "(n + 3) % 4", "3");
  asimp(D, "(n + 15) // 16 * 16", "n");
  asimp(D, "min(n, 4096)", "n");
  asimp(D, "n // 16 * 16", "n");
  prove(D, "n == 17", RX_FALSE);
  prove(D, "n != 5", RX_TRUE);
  prove(D, "n % 4 == 0", RX_TRUE);
  prove(D, "n >= 16", RX_TRUE);
  prove(D, "n > 16", RX_UNKNOWN);
  prove(D, "n % 32 == 0", RX_UNKNOWN);

  divisor("", "n * 4", 4);
  divisor("", "n * 4 + 2", 2);
  divisor("", "6", 6);
  divisor("", "-6", 6);
  divisor("", "0", 0);
  divisor("", "n", 1);
  divisor("", "n * 4 // 2", 2);
  divisor("", "n * 6 + m * 9", 3);
  divisor("n % 4 == 2", "n", 2);
  divisor("n % 4 == 2", "n * 2", 4);

  asimp("n <= 4096", "min(n, 4096)", "n");
  asimp("n <= 4096", "max(n, 4096)", "4096");
  asimp("n <= 4096", "n <= 4096", "1");
  prove("n <= 4096", "n < 4097", RX_TRUE);
  prove("n <= 4096", "n <= 4095", RX_UNKNOWN);
  prove("n <= 4096", "n > 4096", RX_FALSE);
  prove("n <= 4096", "4097 <= n", RX_FALSE);

  const char *J = "0 <= j; j < 4";
  asimp(J, "(i*4 + j) // 4", "i");
  asimp(J, "(i*4 + j) % 4", "j");
  asimp(J, "j // 4", "0");
  asimp(J, "(j + 4) // 4", "1");
  asimp(J, "(i*8 + j*2) // 8", "i");
  asimp(J, "(i*8 + j*2 + 1) % 8", "j * 2 + 1");
  asimp(J, "j < 4 && i < n", "i < n");
  asimp(J, "j < 3", "j < 3");
  bounds(J, "j * 2 + 1", 1, 7);
  asimp("", "(n*8 + 7) // 8", "n");
  /* split at a divisor of the modulus: the rest within one period of 8 (analyzer split_rule) */
  asimp("0 <= u; 0 <= w; w < 8", "(u*8 + w) // 32", "(u*8) // 32");
  asimp("0 <= u; 0 <= w; w < 8", "(u*8 + w) % 32", "(u*8) % 32 + w");
  asimp("0 <= u; 0 <= w; w < 8", "(u*8 + w + 8) // 32", "(u*8 + 8) // 32");
  asimp("0 <= tx; tx < 256", "(b*256 + tx) % 1024", "tx + b % 4 * 256");
  asimp("0 <= u; 0 <= w; w < 9", "(u*8 + w) // 32", "(u*8 + w) // 32"); /* w may carry */
  asimp("", "min(n, n + 1)", "n");
  asimp("0 <= n", "(n + 7) // 8 * 8 - n", "(n + 7) // 8 * 8 - n");

  const char *M = "m <= n";
  prove(M, "m <= n + 1", RX_TRUE);
  prove(M, "m < n", RX_UNKNOWN);
  prove(M, "n < m", RX_FALSE);
  prove(M, "m - 1 < n", RX_TRUE);
  prove(M, "m * 2 <= n * 2", RX_TRUE);
  prove(M, "m * 2 <= n + m", RX_TRUE);
  prove(M, "n >= m", RX_TRUE);
  prove(M, "m == n", RX_UNKNOWN);
  prove(M, "m != n + 1", RX_TRUE);
  prove(M, "m + 1 <= n", RX_UNKNOWN);
  asimp(M, "min(m, n)", "m");
  asimp(M, "max(m, n)", "n");
  asimp(M, "m <= n", "1");
  asimp(M, "n < m", "0");
  asimp(M, "select(m <= n, m, n)", "m");

  prove("m <= n; n <= k", "m <= k", RX_TRUE);
  prove("m <= n; n <= k", "k < m", RX_FALSE);
  prove("m <= n; n < k", "m < k", RX_TRUE);
  prove("m + 2 <= n; n <= k", "m + 2 <= k", RX_TRUE);
  prove("i < n; 0 <= j; j < 4", "i * 4 + j < n * 4", RX_TRUE);
  prove("i < n; 0 <= j; j < 4", "i * 4 + j < n * 4 - 4", RX_UNKNOWN);
  prove("2 * m <= n", "m * 4 <= n * 2", RX_TRUE);
  prove("i < n // 16; n % 16 == 0", "i * 16 + 15 < n", RX_TRUE);
  prove("i < n // 16", "i * 16 + 15 < n", RX_TRUE);
  prove("0 <= i; i < (n + 15) // 16; 0 <= j; j < 16", "i * 16 + j < n", RX_UNKNOWN);
  prove("0 <= i; i < (n + 15) // 16; 0 <= j; j < 16; n % 16 == 0", "i * 16 + j < n", RX_TRUE);
  prove("n == m * 2", "n <= m * 2", RX_TRUE);
  prove("n == m * 2", "n == m * 2 + 1", RX_FALSE);
  prove("1 <= n", "n >= 1 && n >= 0", RX_TRUE);
  prove("1 <= n", "n < 0 || n == 0", RX_FALSE);
  prove("1 <= n", "n < 5 || m < 3", RX_UNKNOWN);
  prove("n % 2 == 1", "n == 4", RX_FALSE);
  prove("n % 2 == 1", "n % 2 == 0", RX_FALSE);
  prove("n >= 0; n != 0", "n > 0", RX_TRUE);
  prove("x || y", "y || x", RX_TRUE);
  prove("x || y", "x", RX_UNKNOWN);
  prove("", "n < n + 1", RX_TRUE);
  prove("", "n * n >= 0", RX_TRUE);
  prove("", "n % 8 < 8", RX_TRUE);
  prove("", "n < m", RX_UNKNOWN);
  prove("1 <= b; 1 <= s; b * s <= 4096", "b * s <= 8192", RX_TRUE);
  bounds("1 <= b; 1 <= s; b * s <= 4096", "b * s", 1, 4096);
  bounds("n == 8", "n * 2", 16, 16);
  asimp("n == 8", "n * 2 + m", "m + 16");
  asimp("n <= 4", "select(n < 8, n, 8)", "n");
  asimp("", "select(n < 8, min(n, 8), 8)", "select(n < 8, n, 8)");
  asimp("", "select(n < 8, select(n < 9, a, b), c)", "select(n < 8, a, c)");
  asimp("0 <= i; i < 16", "i < 16 && j < 4", "j < 4");

  /* scopes, loop variables, contradictions */
  rx_analyzer *an = A("n <= 1024; 1 <= n");
  const rx_expr *i = sym_expr_var(C, "i"), *n = sym_expr_var(C, "n");
  size_t mk = sym_analyzer_mark(an);
  sym_analyzer_bind_range(an, i, sym_expr_const(C, 0), n);
  rx_interval b = sym_analyzer_bounds(an, i);
  CHECK_MSG(b.lo == 0 && b.hi == 1023, "bind_range bounds: [%" PRId64 ", %" PRId64 "]", b.lo, b.hi);
  CHECK_MSG(sym_analyzer_prove(an, S("i < n")) == RX_TRUE, "bind_range: i < n");
  CHECK_MSG(sym_analyzer_prove(an, S("i + 1 <= n")) == RX_TRUE, "bind_range: i + 1 <= n");
  CHECK_MSG(sym_analyzer_simplify(an, S("i // n")) == S("0"), "i // n");
  CHECK_MSG(sym_analyzer_simplify(an, S("i % n")) == i, "i %% n");
  CHECK_MSG(sym_analyzer_simplify(an, S("min(i, n)")) == i, "min(i, n)");
  size_t mk2 = sym_analyzer_mark(an);
  CHECK_MSG(sym_analyzer_assume(an, S("i >= 512")), "nested fact");
  b = sym_analyzer_bounds(an, i);
  CHECK_MSG(b.lo == 512 && b.hi == 1023, "nested bounds [%" PRId64 ", %" PRId64 "]", b.lo, b.hi);
  sym_analyzer_reset(an, mk2);
  b = sym_analyzer_bounds(an, i);
  CHECK_MSG(b.lo == 0 && b.hi == 1023, "reset to inner mark");
  sym_analyzer_reset(an, mk);
  b = sym_analyzer_bounds(an, i);
  CHECK_MSG(b.lo == MIN64 && b.hi == MAX64, "reset forgets the loop variable");
  CHECK_MSG(sym_analyzer_prove(an, S("i < n")) == RX_UNKNOWN, "reset forgets relations");
  b = sym_analyzer_bounds(an, n);
  CHECK_MSG(b.lo == 1 && b.hi == 1024, "reset keeps earlier facts");
  sym_analyzer_bind_range(an, i, sym_expr_const(C, 4), sym_expr_const(C, 8));
  b = sym_analyzer_bounds(an, i);
  CHECK_MSG(b.lo == 4 && b.hi == 11, "bind_range with constants");
  CHECK_MSG(sym_analyzer_ctx(an) == C, "analyzer ctx");
  sym_analyzer_free(an);

  an = A("n <= 3");
  CHECK_MSG(!sym_analyzer_assume(an, S("n >= 5")), "contradiction: n >= 5");
  CHECK_MSG(!sym_analyzer_assume(an, S("n == 4")), "contradiction: n == 4");
  CHECK_MSG(sym_analyzer_assume(an, S("n <= 10")), "implied fact");
  CHECK_MSG(sym_analyzer_assume(an, S("0 <= n")), "new fact");
  CHECK_MSG(!sym_analyzer_assume(an, S("0")), "false fact");
  CHECK_MSG(sym_analyzer_assume(an, S("select(a, b, c) < d * d")), "fact not understood is kept");
  CHECK_MSG(sym_analyzer_prove(an, S("select(a, b, c) < d * d")) == RX_TRUE, "prove of exactly it");
  b = sym_analyzer_bounds(an, n);
  CHECK_MSG(b.lo == 0 && b.hi == 3, "bounds after rejected facts");
  CHECK_MSG(!sym_analyzer_assume(an, S("n % 8 == 5")) || true, "residue fact");
  sym_analyzer_free(an);

  an = A("n % 8 == 0");
  CHECK_MSG(!sym_analyzer_assume(an, S("n % 4 == 1")), "contradicting residues");
  sym_analyzer_free(an);
}

/* ---------------------------------------------------------------- randomized checks */

static uint64_t rng;
static uint64_t rnd(void) {
  rng ^= rng >> 12;
  rng ^= rng << 25;
  rng ^= rng >> 27;
  return rng * 0x2545f4914f6cdd1dull;
}
static int64_t rnd_in(int64_t lo, int64_t hi) {
  return lo + (int64_t)(rnd() % (uint64_t)(hi - lo + 1));
}

static const char *VARS[] = {"a", "b", "c", "d"};
#define NV 4

/* extreme: constants near the int64 limits half of the time (overflow paths) */
static bool extreme;

static const rx_expr *gen(int depth) {
  if (depth <= 0 || rnd() % 5 == 0) {
    if (rnd() % 2) return sym_expr_var(C, VARS[rnd() % NV]);
    static const int64_t special[] = {0, 1, -1, 2, 4, 8, 16, -8};
    static const int64_t huge[] = {INT64_MIN,        INT64_MAX,           INT64_MIN + 1,
                                   INT64_MAX - 1,    INT64_C(1) << 62,    -(INT64_C(1) << 62),
                                   INT64_C(1) << 32, INT64_C(3037000499), -INT64_C(3037000500)};
    if (extreme && rnd() % 2) return sym_expr_const(C, huge[rnd() % RX_ARRAY_LEN(huge)]);
    if (rnd() % 4 == 0) return sym_expr_const(C, special[rnd() % 8]);
    return sym_expr_const(C, rnd_in(-9, 9));
  }
  static const rx_expr_kind kinds[] = {
      RX_EXPR_ADD,      RX_EXPR_ADD,      RX_EXPR_SUB,      RX_EXPR_MUL,      RX_EXPR_MUL,
      RX_EXPR_FLOORDIV, RX_EXPR_FLOORDIV, RX_EXPR_FLOORMOD, RX_EXPR_FLOORMOD, RX_EXPR_MIN,
      RX_EXPR_MAX,      RX_EXPR_EQ,       RX_EXPR_NE,       RX_EXPR_LT,       RX_EXPR_LE,
      RX_EXPR_GT,       RX_EXPR_GE,       RX_EXPR_AND,      RX_EXPR_OR,       RX_EXPR_NOT,
      RX_EXPR_SELECT,
  };
  rx_expr_kind k = kinds[rnd() % RX_ARRAY_LEN(kinds)];
  const rx_expr *a = gen(depth - 1);
  if (k == RX_EXPR_NOT) return sym_expr_raw(C, k, a, NULL, NULL);
  const rx_expr *b;
  /* divisors: mostly constants, so the div/mod rules get exercised */
  if ((k == RX_EXPR_FLOORDIV || k == RX_EXPR_FLOORMOD) && rnd() % 3)
    b = sym_expr_const(C, rnd_in(-9, 9));
  else if (k == RX_EXPR_MUL && rnd() % 2)
    b = sym_expr_const(C, rnd_in(-9, 9));
  else
    b = gen(depth - 1);
  if (k == RX_EXPR_SELECT) return sym_expr_raw(C, k, a, b, gen(depth - 1));
  return sym_expr_raw(C, k, a, b, NULL);
}

typedef struct point {
  int64_t v[NV];
} point;

static rx_expr_env env_of(const point *p, const rx_expr **vars) {
  for (int i = 0; i < NV; i++) vars[i] = sym_expr_var(C, VARS[i]);
  return (rx_expr_env){vars, p->v, NV};
}

static void print_point(const point *p) {
  fprintf(stderr, "  at a=%" PRId64 " b=%" PRId64 " c=%" PRId64 " d=%" PRId64 "\n", p->v[0],
          p->v[1], p->v[2], p->v[3]);
}

static long rnd_points, rnd_compared;

/* raw and simplified evaluate alike wherever raw evaluates (overflow of the reassociated form
 * aside); the canonical form round-trips through text */
static bool check_simplify_one(const rx_expr *raw, int npts) {
  const rx_expr *s = sym_expr_simplify(C, raw);
  const rx_expr *vars[NV];
  for (int k = 0; k < npts; k++) {
    point p;
    for (int i = 0; i < NV; i++)
      p.v[i] = extreme && rnd() % 3 == 0 ? (int64_t)rnd() : rnd_in(-50, 50);
    rx_expr_env env = env_of(&p, vars);
    int64_t x = 0, y = 0;
    rx_eval_status sx = sym_expr_eval_status(raw, &env, &x);
    rx_eval_status sy = sym_expr_eval_status(s, &env, &y);
    rnd_points++;
    if (sx != RX_EVAL_OK || sy == RX_EVAL_OVERFLOW) continue;
    rnd_compared++;
    if (sy != RX_EVAL_OK || x != y) {
      fprintf(stderr,
              "random simplify: %s\n  => %s\n  raw %" PRId64 " simplified %" PRId64
              " (status %d)\n",
              T(raw), T(s), x, y, (int)sy);
      print_point(&p);
      return false;
    }
  }
  if (sym_expr_simplify(C, s) != s) {
    fprintf(stderr, "random simplify not idempotent: %s\n", T(raw));
    return false;
  }
  /* printed canonical form -> fresh context -> simplify -> same text */
  char *s1 = sym_expr_to_string(s);
  rx_expr_ctx *c2 = sym_expr_ctx_new();
  char *s2 = sym_expr_to_string(rx_test_parse_simplified(c2, s1));
  char *s3 = sym_expr_to_string(rx_test_parse_simplified(c2, s2));
  /* (where folding would overflow int64 the operation stays as given, and the printed text of
   * such a node may reparse into another unfolded shape: then only a second trip is stable) */
  bool ok = (extreme || strcmp(s1, s2) == 0) && strcmp(s2, s3) == 0;
  if (!ok) fprintf(stderr, "random round trip: %s\n  %s\n  %s\n  %s\n", T(raw), s1, s2, s3);
  /* printing a raw expression keeps its meaning */
  char *r1 = sym_expr_to_string(raw);
  if (ok && !extreme && S(r1) != s) {
    fprintf(stderr, "random raw print: %s reparses as %s\n", r1, T(S(r1)));
    ok = false;
  }
  free(r1);
  free(s1);
  free(s2);
  free(s3);
  sym_expr_ctx_free(c2);
  return ok;
}

static void test_random_simplify(int n) {
  int bad = 0;
  for (int i = 0; i < n && bad < 5; i++)
    if (!check_simplify_one(gen(1 + (int)(rnd() % 5)), 10)) bad++;
  CHECK_MSG(bad == 0, "random simplify: %d failures", bad);
}

/* random facts over the variables; points satisfying them */
typedef struct facts {
  int64_t lo[NV], hi[NV], mod[NV], rem[NV];
  const rx_expr *rel; /* a relation between two variables, or NULL */
  const rx_expr *all[3 * NV + 2];
  int n;
  bool contra; /* the analyzer rejected a fact as contradicting the others */
} facts;

static void gen_facts(facts *f, rx_analyzer *an) {
  f->n = 0;
  f->rel = NULL;
  for (int i = 0; i < NV; i++) {
    const rx_expr *x = sym_expr_var(C, VARS[i]);
    int64_t lo = rnd_in(-30, 20), hi = lo + rnd_in(0, 40);
    f->lo[i] = -50;
    f->hi[i] = 50;
    f->mod[i] = 1;
    f->rem[i] = 0;
    if (rnd() % 4) {
      f->lo[i] = lo;
      f->all[f->n++] = sym_expr_cmp(C, RX_EXPR_LE, sym_expr_const(C, lo), x);
    }
    if (rnd() % 4) {
      f->hi[i] = hi;
      f->all[f->n++] = sym_expr_cmp(C, RX_EXPR_GE, sym_expr_const(C, hi), x);
    }
    if (rnd() % 3 == 0) {
      static const int64_t mods[] = {2, 3, 4, 8};
      f->mod[i] = mods[rnd() % 4];
      f->rem[i] = rnd() % 2 ? 0 : rnd_in(0, f->mod[i] - 1);
      f->all[f->n++] =
          sym_expr_cmp(C, RX_EXPR_EQ, sym_expr_floormod(C, x, sym_expr_const(C, f->mod[i])),
                       sym_expr_const(C, f->rem[i]));
    }
  }
  if (rnd() % 2) {
    int i = (int)(rnd() % NV), j = (int)((i + 1 + rnd() % (NV - 1)) % NV);
    f->rel =
        sym_expr_cmp(C, rnd() % 2 ? RX_EXPR_LE : RX_EXPR_LT, sym_expr_var(C, VARS[i]),
                     sym_expr_add(C, sym_expr_var(C, VARS[j]), sym_expr_const(C, rnd_in(-3, 3))));
    f->all[f->n++] = f->rel;
  }
  if (rnd() % 3 == 0) {
    /* a fact between random expressions: linear relations, div/mod, ==, != */
    static const rx_expr_kind k[] = {RX_EXPR_LE, RX_EXPR_LT, RX_EXPR_GE, RX_EXPR_EQ, RX_EXPR_NE};
    f->all[f->n++] = sym_expr_raw(C, k[rnd() % 5], gen(2), gen(2), NULL);
  }
  f->contra = false;
  for (int i = 0; i < f->n; i++) f->contra |= !sym_analyzer_assume(an, f->all[i]);
}

/* up to max points satisfying every fact (rejection sampling) */
static int gen_points(const facts *f, point *pts, int max) {
  const rx_expr *vars[NV];
  int n = 0;
  for (int tries = 0; tries < max * 20 && n < max; tries++) {
    point p;
    bool ok = true;
    for (int i = 0; i < NV && ok; i++) {
      int64_t v = rnd_in(f->lo[i], f->hi[i]),
              r = ((v - f->rem[i]) % f->mod[i] + f->mod[i]) % f->mod[i];
      v -= r; /* v % mod == rem */
      if (v < f->lo[i]) v += f->mod[i];
      ok = v >= f->lo[i] && v <= f->hi[i];
      p.v[i] = v;
    }
    if (!ok) continue;
    rx_expr_env env = env_of(&p, vars);
    for (int i = 0; i < f->n && ok; i++) {
      int64_t t;
      ok = sym_expr_eval(f->all[i], &env, &t) && t == 1;
    }
    if (ok) pts[n++] = p;
  }
  return n;
}

static void print_facts(const facts *f) {
  fprintf(stderr, "  facts:");
  for (int i = 0; i < f->n; i++) fprintf(stderr, " %s;", T(f->all[i]));
  fputc('\n', stderr);
}

static long an_points, an_true, an_false, an_unknown, an_simpl_changed;

static void test_random_analyzer(int rounds) {
  int bad = 0;
  const rx_expr *vars[NV];
  for (int r = 0; r < rounds && bad < 5; r++) {
    rx_analyzer *an = sym_analyzer_new(C);
    facts f;
    gen_facts(&f, an);
    point pts[24];
    int np = gen_points(&f, pts, 24);
    if (f.contra && np > 0) {
      fprintf(stderr, "random assume: facts called contradictory but satisfiable\n");
      print_facts(&f);
      print_point(&pts[0]);
      bad++;
    }
    if (np == 0 || f.contra) {
      sym_analyzer_free(an);
      continue;
    }
    for (int q = 0; q < 6 && bad < 5; q++) {
      const rx_expr *e = gen(1 + (int)(rnd() % 4));
      const rx_expr *s = sym_analyzer_simplify(an, e);
      if (s != sym_expr_simplify(C, e)) an_simpl_changed++;
      rx_interval b = sym_analyzer_bounds(an, e);
      int64_t dv = sym_analyzer_divisor(an, e);
      /* a comparison, sometimes of a variable against a constant near its range */
      const rx_expr *cond;
      static const rx_expr_kind cmps[] = {RX_EXPR_EQ, RX_EXPR_NE, RX_EXPR_LT,
                                          RX_EXPR_LE, RX_EXPR_GT, RX_EXPR_GE};
      rx_expr_kind ck = cmps[rnd() % 6];
      if (rnd() % 3 == 0) {
        int vi = (int)(rnd() % NV);
        cond = sym_expr_raw(C, ck, sym_expr_var(C, VARS[vi]), sym_expr_const(C, rnd_in(-35, 35)),
                            NULL);
      } else if (rnd() % 2) {
        cond = sym_expr_raw(C, ck, e, gen(1 + (int)(rnd() % 2)), NULL);
      } else {
        cond = sym_expr_raw(C, ck, gen(2), gen(2), NULL);
      }
      rx_tribool t = sym_analyzer_prove(an, cond);
      an_true += t == RX_TRUE;
      an_false += t == RX_FALSE;
      an_unknown += t == RX_UNKNOWN;
      for (int k = 0; k < np && bad < 5; k++) {
        rx_expr_env env = env_of(&pts[k], vars);
        int64_t x, y, c;
        an_points++;
        rx_eval_status sx = sym_expr_eval_status(e, &env, &x);
        if (sx == RX_EVAL_OK) {
          rx_eval_status sy = sym_expr_eval_status(s, &env, &y);
          if (sy != RX_EVAL_OVERFLOW && (sy != RX_EVAL_OK || x != y)) {
            fprintf(stderr,
                    "random analyzer simplify: %s\n  => %s\n  raw %" PRId64 " simplified %" PRId64
                    " (status %d)\n",
                    T(e), T(s), x, y, (int)sy);
            print_facts(&f);
            print_point(&pts[k]);
            bad++;
          }
          if (x < b.lo || x > b.hi) {
            fprintf(stderr, "random bounds: %s = %" PRId64 " outside [%" PRId64 ", %" PRId64 "]\n",
                    T(e), x, b.lo, b.hi);
            print_facts(&f);
            print_point(&pts[k]);
            bad++;
          }
          if (dv == 0 ? x != 0 : x % dv != 0) {
            fprintf(stderr, "random divisor: %s = %" PRId64 ", divisor %" PRId64 "\n", T(e), x, dv);
            print_facts(&f);
            print_point(&pts[k]);
            bad++;
          }
        }
        if (t != RX_UNKNOWN && sym_expr_eval(cond, &env, &c) && c != (t == RX_TRUE)) {
          fprintf(stderr, "random prove: %s proven %s but is %" PRId64 "\n", T(cond), TRI[t], c);
          print_facts(&f);
          print_point(&pts[k]);
          bad++;
        }
      }
    }
    sym_analyzer_free(an);
  }
  CHECK_MSG(bad == 0, "random analyzer: %d failures", bad);
  CHECK_MSG(an_true + an_false > 50, "random analyzer proves something: %ld true, %ld false",
            an_true, an_false);
}

/* many shape expressions in one context stay fast */
static void test_scale(void) {
  clock_t t0 = clock();
  const rx_expr *acc = sym_expr_const(C, 0);
  for (int i = 0; i < 20000; i++) {
    const rx_expr *n = sym_expr_var(C, VARS[i % NV]);
    const rx_expr *e =
        sym_expr_floordiv(C,
                          sym_expr_add(C, sym_expr_mul(C, n, sym_expr_const(C, i % 64 + 1)),
                                       sym_expr_const(C, i % 7)),
                          sym_expr_const(C, 8));
    acc = sym_expr_max(C, sym_expr_min(C, e, sym_expr_const(C, 4096)), sym_expr_const(C, i % 13));
  }
  double secs = (double)(clock() - t0) / CLOCKS_PER_SEC;
  CHECK_MSG(acc && secs < 3.0, "20000 constructions took %.2f s", secs);
}

int main(void) {
  const char *seed = getenv("RX_SEED");
  rng = seed && *seed ? strtoull(seed, NULL, 0) : 0x5eed2025ull;
  if (!rng) rng = 1;
  C = sym_expr_ctx_new();
  test_simplify();
  test_print();
  test_eval();
  test_queries();
  test_subst();
  test_analyzer();
  clock_t t0 = clock();
  test_random_simplify(4000);
  test_random_analyzer(1500);
  extreme = true;
  test_random_simplify(1000);
  test_random_analyzer(300);
  extreme = false;
  test_scale();
  fprintf(stderr,
          "random: seed %" PRIu64 ", %ld points (%ld compared), analyzer %ld points, "
          "prove %ld true / %ld false / %ld unknown, %ld simplified further, %.2f s\n",
          seed && *seed ? (uint64_t)strtoull(seed, NULL, 0) : (uint64_t)0x5eed2025ull, rnd_points,
          rnd_compared, an_points, an_true, an_false, an_unknown, an_simpl_changed,
          (double)(clock() - t0) / CLOCKS_PER_SEC);
  sym_expr_ctx_free(C);
  return check_finish("shapes");
}
