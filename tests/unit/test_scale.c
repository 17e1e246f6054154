/* The front end at scale: a graph function of 400,000 bindings (each nested, so normalization
 * makes 400,000 more with fresh names, and each reading a random earlier binding, so no name is
 * found by luck at the end of a list) parses, normalizes, verifies and prints. Not timed: the
 * ctest TIMEOUT (60 s, tests/CMakeLists.txt) fails it if any step turns quadratic again (40k
 * bindings took 18 s when lookup was a list scan; 400k now take about a second, bench/).
 * Errors at scale are still found: a duplicate name and an undefined name at the very end.
 *
 * usage: test_scale [TESTS_DIR] [BINDINGS] */
#include "base/base.h"
#include "check.h"
#include "ir/ir.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* v_k = add(multiply(v_{k-1}, 1.001), v_r) for a pseudo-random r < k; then `tail` (a last line,
 * possibly wrong) and the return of v_{n-1}. */
static char *chain_text(int n, const char *tail) {
  rx_strbuf b = {0};
  base_strbuf_append(&b, "graph_fn chain(x: f32[n, 16]) -> f32[n, 16] where n <= 4096 {\n"
                         "  dataflow {\n");
  uint64_t seed = 88172645463325252ull;
  for (int k = 0; k < n; k++) {
    seed ^= seed << 13, seed ^= seed >> 7, seed ^= seed << 17;
    if (k == 0) {
      base_strbuf_append(&b, "    v0 = add(multiply(x, 1.001), x)\n");
      continue;
    }
    base_strbuf_printf(&b, "    v%d = add(multiply(v%d, 1.001), v%d)\n", k, k - 1,
                       (int)(seed % (uint64_t)k));
  }
  base_strbuf_append(&b, tail);
  base_strbuf_printf(&b, "  }\n  return v%d\n}\n", n - 1);
  return base_strbuf_take(&b);
}

/* Occurrences of needle in s, by a plain scan (ASan's strstr measures the whole rest of the
 * string on every call, which makes a strstr loop quadratic). */
static size_t count_lines_with(const char *s, const char *needle) {
  size_t n = 0, k = strlen(needle);
  for (const char *p = s; *p; p++)
    if (*p == needle[0] && strncmp(p, needle, k) == 0) n++;
  return n;
}

static void test_big_chain(int n) {
  char *text = chain_text(n, "");
  rx_module *m = rx_module_new();
  rx_diag d;
  base_diag_init(&d);
  bool ok = ir_parse_module(m, "chain.rx", text, strlen(text), &d) && ops_module_normalize(m, &d) &&
            ir_module_verify(m, &d);
  CHECK(ok);
  if (!ok) fprintf(stderr, "%s", rx_diag_text(&d));
  rx_graph_fn *f = ir_module_graph_fn(m, "chain");
  CHECK(f && f->body.nblocks == 1);
  if (ok && f) {
    /* normalization names each nested multiply: 2n bindings, every name distinct */
    CHECK(f->body.blocks[0]->nbindings == 2 * n);
    rx_strbuf out = {0};
    ir_module_print(&out, m);
    CHECK(count_lines_with(out.data, " = multiply(") == (size_t)n);
    CHECK(count_lines_with(out.data, " = add(") == (size_t)n);
    char last[64];
    snprintf(last, sizeof last, "return v%d\n", n - 1);
    CHECK(strstr(out.data, last) != NULL);
    base_strbuf_free(&out);
  }
  base_diag_free(&d);
  rx_module_free(m);
  free(text);
  printf("chain of %d bindings: %s\n", n, ok ? "checked" : "FAILED");
}

/* An error on the last line of a big function is reported at its place. */
static void test_big_error(int n, const char *tail, const char *want) {
  char *text = chain_text(n, tail);
  rx_module *m = rx_module_new();
  rx_diag d;
  base_diag_init(&d);
  bool ok = ir_parse_module(m, "chain.rx", text, strlen(text), &d);
  CHECK(!ok);
  const char *msg = rx_diag_text(&d);
  CHECK(strstr(msg, want) != NULL);
  if (!strstr(msg, want)) fprintf(stderr, "expected '%s' in:\n%s", want, msg);
  base_diag_free(&d);
  rx_module_free(m);
  free(text);
}

int main(int argc, char **argv) {
  int n = argc > 2 ? atoi(argv[2]) : 400000;
  if (n < 2) n = 2;
  test_big_chain(n);
  /* errors at the end of a tenth of the size (the same lookups, less time under ASan) */
  n = n / 10 > 2 ? n / 10 : 2;
  char tail[128], want[128];
  /* the duplicate of v1 (line 4) sits at line n + 3 */
  snprintf(tail, sizeof tail, "    v1 = add(x, x)\n");
  snprintf(want, sizeof want, "chain.rx:%d:5: error: duplicate name 'v1': first defined at line 4",
           n + 3);
  test_big_error(n, tail, want);
  snprintf(tail, sizeof tail, "    w = add(v%d, x)\n", n);
  snprintf(want, sizeof want, "error: undefined variable 'v%d'", n);
  test_big_error(n, tail, want);
  return check_finish("test_scale");
}
