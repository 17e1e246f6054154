/* The op registry a module holds (rx_module.ops, ir/ir.h): rx_module_new gives every module the
 * op library's (ops_registry), through which ir/'s parser, printer and verifier know the ops;
 * a module made without one (ir_module_new(NULL)) refuses op calls with an error, never a
 * crash, and still parses and prints everything else. */
#include "base/base.h"
#include "ir/ir.h"
#include "ops/ops.h"

#include <stdio.h>
#include <string.h>

static int failures;
#define CHECK(c)                                                                                   \
  do {                                                                                             \
    if (!(c)) {                                                                                    \
      fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #c);                        \
      failures++;                                                                                  \
    }                                                                                              \
  } while (0)

static const char *graph_text = "graph_fn f(x: f32[n, 4]) {\n"
                                "  y = add(x, x)\n"
                                "  return y\n"
                                "}\n";
static const char *tensor_text = "tensor_fn g(a: f32[n], out b: f32[n]) {\n"
                                 "  for i in 0..n {\n"
                                 "    b[i] = a[i] + 1.0\n"
                                 "  }\n"
                                 "}\n";

static void test_with_registry(void) {
  rx_module *m = rx_module_new();
  CHECK(m->ops == &ops_registry);
  rx_diag d;
  base_diag_init(&d);
  CHECK(ir_parse_module(m, "t.rx", graph_text, strlen(graph_text), &d));
  CHECK(ops_module_normalize(m, &d) && ir_module_verify(m, &d));
  rx_strbuf out = {0};
  ir_module_print(&out, m);
  CHECK(out.data && strstr(out.data, "add(x, x)"));
  base_strbuf_free(&out);
  base_diag_free(&d);
  rx_module_free(m);
}

static void test_without_registry(void) {
  rx_module *m = ir_module_new(NULL);
  rx_diag d;
  base_diag_init(&d);
  /* an op call is an error that says why, at the call */
  CHECK(!ir_parse_module(m, "t.rx", graph_text, strlen(graph_text), &d));
  CHECK(d.errors == 1);
  CHECK(strstr(rx_diag_text(&d), "t.rx:2:7: error: operator 'add' in a module that knows no ops"));
  base_diag_free(&d);
  /* what names no op parses and prints as in any module */
  base_diag_init(&d);
  CHECK(ir_parse_module(m, "u.rx", tensor_text, strlen(tensor_text), &d));
  CHECK(ir_module_verify(m, &d));
  rx_strbuf out = {0};
  ir_module_print(&out, m);
  CHECK(out.data && strstr(out.data, "tensor_fn g("));
  base_strbuf_free(&out);
  base_diag_free(&d);

  /* an op call made while the module had the registry: the verifier reports it, the printer
   * does not crash */
  m->ops = &ops_registry;
  base_diag_init(&d);
  CHECK(ir_parse_module(m, "t.rx", graph_text, strlen(graph_text), &d));
  base_diag_free(&d);
  m->ops = NULL;
  base_diag_init(&d);
  CHECK(!ir_module_verify(m, &d));
  CHECK(strstr(rx_diag_text(&d), "call of an op in a module that knows no ops"));
  base_diag_free(&d);
  ir_module_print(&out, m);
  CHECK(out.data && strstr(out.data, "y = ?(x, x)"));
  base_strbuf_free(&out);
  rx_module_free(m);
}

int main(void) {
  test_with_registry();
  test_without_registry();
  if (failures) {
    fprintf(stderr, "test_ir_registry: %d failures\n", failures);
    return 1;
  }
  printf("test_ir_registry: ok\n");
  return 0;
}
