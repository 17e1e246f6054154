/* The public builder API (include/relaxc/compiler.h): the MLP of docs/text-format.md built
 * programmatically prints exactly like the same module parsed from text; deduction, argument
 * and verifier errors come back as statuses with clear messages. */
#include "check.h"
#include "relaxc/compiler.h"

#include "ir/ir.h" /* the verifier tests below mutate parsed IR directly */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Expects an error whose message contains each of the given strings. */
static void expect_error(int line, rx_status s, const char *const *needles, int n) {
  if (!s) {
    check_failed++;
    fprintf(stderr, "%s:%d: expected an error, got OK\n", __FILE__, line);
    return;
  }
  bool ok = rx_status_code_of(s) != RX_OK;
  for (int i = 0; i < n; i++)
    if (!strstr(rx_status_message(s), needles[i])) {
      ok = false;
      fprintf(stderr, "%s:%d: message lacks '%s': %s\n", __FILE__, line, needles[i],
              rx_status_message(s));
    }
  if (ok)
    check_passed++;
  else
    check_failed++;
  rx_status_free(s);
}
#define ERR(expr, ...)                                                                             \
  do {                                                                                             \
    const char *const nd_[] = {__VA_ARGS__};                                                       \
    expect_error(__LINE__, (expr), nd_, (int)(sizeof nd_ / sizeof nd_[0]));                        \
  } while (0)

static bool sinfo_is(const rx_sinfo *s, const char *text) {
  char *t = rx_sinfo_to_string(s);
  bool ok = strcmp(t, text) == 0;
  if (!ok) fprintf(stderr, "  struct info is %s, expected %s\n", t, text);
  rx_free(t);
  return ok;
}

/* The MLP of docs/text-format.md with its nested calls given their own bindings. */
static const char mlp_text[] =
    "tensor_fn silu_mul(a: f16[n, 11008], b: f16[n, 11008], out c: f16[n, 11008]) {\n"
    "  for i in 0..n {\n"
    "    for j in 0..11008 {\n"
    "      c[i, j] = a[i, j] * sigmoid(a[i, j]) * b[i, j]\n"
    "    }\n"
    "  }\n"
    "}\n"
    "\n"
    "graph_fn mlp(x: f16[n, 4096], wg: f16[11008, 4096], wu: f16[11008, 4096],\n"
    "             wd: f16[4096, 11008]) -> f16[n, 4096] where n <= 8192 {\n"
    "  dataflow {\n"
    "    wgT = permute(wg, axes=[1, 0])\n"
    "    g: f16[n, 11008] = matmul(x, wgT)\n"
    "    wuT = permute(wu, axes=[1, 0])\n"
    "    u: f16[n, 11008] = matmul(x, wuT)\n"
    "    h: f16[n, 11008] = call_tensor(silu_mul, g, u, out=f16[n, 11008])\n"
    "    wdT = permute(wd, axes=[1, 0])\n"
    "    y: f16[n, 4096] = matmul(h, wdT)\n"
    "  }\n"
    "  return y\n"
    "}\n";

static const rx_sinfo *t2(rx_module *m, rx_dtype dt, const rx_expr *a, const rx_expr *b) {
  const rx_expr *d[2] = {a, b};
  return rx_sinfo_tensor(m, dt, 2, d);
}

/* silu_mul: c[i, j] = a[i, j] * sigmoid(a[i, j]) * b[i, j] */
static void build_silu_mul(rx_module *m) {
  const rx_expr *n = rx_sym_var(m, "n"), *k = rx_sym_const(m, 11008);
  const rx_expr *shape[2] = {n, k};
  rx_tfn_builder *tb = rx_tfn_builder_new(m, "silu_mul");
  rx_buffer *a = rx_tfn_buffer(tb, "a", RX_DTYPE_F16, 2, shape, false);
  rx_buffer *b = rx_tfn_buffer(tb, "b", RX_DTYPE_F16, 2, shape, false);
  rx_buffer *c = rx_tfn_buffer(tb, "c", RX_DTYPE_F16, 2, shape, true);
  const rx_expr *i = rx_tfn_for(tb, "i", rx_sym_const(m, 0), n, NULL);
  const rx_expr *j = rx_tfn_for(tb, "j", rx_sym_const(m, 0), k, "serial");
  rx_tx *idx[2] = {rx_tfn_sym(tb, i), rx_tfn_sym(tb, j)};
  rx_tx *la = rx_tfn_load(tb, a, idx, 2);
  rx_tx *sig = rx_tfn_call(tb, "sigmoid", &la, 1);
  rx_tx *v = rx_tfn_binary(tb, "*", rx_tfn_binary(tb, "*", la, sig), rx_tfn_load(tb, b, idx, 2));
  rx_tfn_store(tb, c, idx, 2, v);
  rx_tfn_end(tb);
  rx_tfn_end(tb);
  CHECK_OK(rx_tfn_finish(tb, NULL));
}

static rx_var *permute10(rx_module *m, rx_builder *b, rx_var *w, const char *name) {
  static const int64_t axes[2] = {1, 0};
  const rx_attr *at = rx_attr_ints(m, "axes", axes, 2);
  rx_node *arg = rx_arg_var(b, w);
  rx_var *out = NULL;
  CHECK_OK(rx_emit_op(b, "permute", &arg, 1, &at, 1, name, &out));
  return out;
}

static rx_var *matmul(rx_builder *b, rx_var *x, rx_var *y, const char *name) {
  rx_node *args[2] = {rx_arg_var(b, x), rx_arg_var(b, y)};
  rx_var *out = NULL;
  CHECK_OK(rx_emit_op(b, "matmul", args, 2, NULL, 0, name, &out));
  return out;
}

static void build_mlp(rx_module *m) {
  const rx_expr *n = rx_sym_var(m, "n");
  const rx_expr *h4 = rx_sym_const(m, 4096), *h11 = rx_sym_const(m, 11008);
  build_silu_mul(m);
  rx_builder *b = rx_builder_new(m, "mlp");
  rx_var *x, *wg, *wu, *wd;
  CHECK_OK(rx_builder_param(b, "x", t2(m, RX_DTYPE_F16, n, h4), &x));
  CHECK_OK(rx_builder_param(b, "wg", t2(m, RX_DTYPE_F16, h11, h4), &wg));
  CHECK_OK(rx_builder_param(b, "wu", t2(m, RX_DTYPE_F16, h11, h4), &wu));
  CHECK_OK(rx_builder_param(b, "wd", t2(m, RX_DTYPE_F16, h4, h11), &wd));
  rx_builder_set_result(b, t2(m, RX_DTYPE_F16, n, h4));
  CHECK_OK(rx_builder_fact(b, rx_sym_le(m, n, rx_sym_const(m, 8192))));
  CHECK_OK(rx_builder_begin_dataflow(b));
  rx_var *wgT = permute10(m, b, wg, "wgT");
  rx_var *g = matmul(b, x, wgT, "g");
  CHECK(g && sinfo_is(rx_var_sinfo(g), "f16[n, 11008]")); /* deduced at once */
  rx_var *wuT = permute10(m, b, wu, "wuT");
  rx_var *u = matmul(b, x, wuT, "u");
  rx_node *args[2] = {rx_arg_var(b, g), rx_arg_var(b, u)};
  rx_var *h = NULL;
  CHECK_OK(
      rx_emit_call_tensor(b, "silu_mul", args, 2, t2(m, RX_DTYPE_F16, n, h11), NULL, 0, "h", &h));
  rx_var *wdT = permute10(m, b, wd, "wdT");
  CHECK(wdT && sinfo_is(rx_var_sinfo(wdT), "f16[11008, 4096]"));
  rx_var *y = matmul(b, h, wdT, "y");
  CHECK(y && sinfo_is(rx_var_sinfo(y), "f16[n, 4096]"));
  CHECK_OK(rx_builder_end_dataflow(b));
  rx_graph_fn *fn = NULL;
  CHECK_OK(rx_builder_finish(b, rx_arg_var(b, y), &fn));
  CHECK(fn != NULL);
}

static char *checked_text(rx_module *m) {
  rx_diag *d = rx_diag_create();
  rx_status s = rx_module_check(m, d);
  if (s) fprintf(stderr, "check failed:\n%s\n", rx_status_message(s));
  CHECK(s == NULL);
  CHECK(rx_diag_error_count(d) == 0);
  rx_status_free(s);
  rx_diag_destroy(d);
  return rx_module_to_text(m);
}

static void test_mlp_matches_text(void) {
  rx_module *built = rx_module_new();
  build_mlp(built);
  char *a = checked_text(built);

  rx_module *parsed = rx_module_new();
  CHECK_OK(rx_module_parse(parsed, "mlp.rx", mlp_text, strlen(mlp_text), NULL));
  char *b = checked_text(parsed);
  CHECK(strcmp(a, b) == 0);
  if (strcmp(a, b) != 0) fprintf(stderr, "built:\n%s\nparsed:\n%s\n", a, b);
  CHECK(strstr(a, "sigmoid(a[i, j])") != NULL);
  CHECK(strstr(a, "where n <= 8192") != NULL);

  /* the printed text parses back to the same text */
  rx_module *again = rx_module_new();
  CHECK_OK(rx_module_parse(again, "again.rx", a, strlen(a), NULL));
  char *c = checked_text(again);
  CHECK(strcmp(a, c) == 0);

  rx_free(a);
  rx_free(b);
  rx_free(c);
  rx_module_free(built);
  rx_module_free(parsed);
  rx_module_free(again);
}

/* An elementwise add program, called from a graph function with a symbolic dim argument. */
static void test_elementwise_add(void) {
  rx_module *m = rx_module_new();
  const rx_expr *n = rx_sym_var(m, "n");
  rx_tfn_builder *tb = rx_tfn_builder_new(m, "add1");
  rx_buffer *a = rx_tfn_buffer(tb, "a", RX_DTYPE_F32, 1, &n, false);
  rx_buffer *bb = rx_tfn_buffer(tb, "b", RX_DTYPE_F32, 1, &n, false);
  rx_buffer *c = rx_tfn_buffer(tb, "c", RX_DTYPE_F32, 1, &n, true);
  const rx_expr *i = rx_tfn_for(tb, "i", rx_sym_const(m, 0), n, "vectorize");
  rx_tx *ix = rx_tfn_sym(tb, i);
  rx_tx *sum = rx_tfn_binary(tb, "+", rx_tfn_load(tb, a, &ix, 1), rx_tfn_load(tb, bb, &ix, 1));
  rx_tfn_store(tb, c, &ix, 1, rx_tfn_binary(tb, "+", sum, rx_tfn_float(tb, 1.0)));
  rx_tfn_end(tb);
  CHECK_OK(rx_tfn_finish(tb, NULL));

  rx_builder *b = rx_builder_new(m, "main");
  rx_var *x, *y, *z = NULL;
  const rx_sinfo *t = rx_sinfo_tensor(m, RX_DTYPE_F32, 1, &n);
  CHECK_OK(rx_builder_param(b, "x", t, &x));
  CHECK_OK(rx_builder_param(b, "y", t, &y));
  rx_node *args[2] = {rx_arg_var(b, x), rx_arg_var(b, y)};
  CHECK_OK(rx_emit_call_tensor(b, "add1", args, 2, t, NULL, 0, NULL, &z));
  CHECK(z && strcmp(rx_var_name(z), "add1") == 0); /* named after the callee */
  CHECK_OK(rx_builder_finish(b, rx_arg_var(b, z), NULL));
  char *text = checked_text(m);
  CHECK(strstr(text, "vectorize") != NULL);
  CHECK(strstr(text, "call_tensor(add1, x, y, out=f32[n])") != NULL);
  rx_free(text);
  rx_module_free(m);
}

/* match_cast defines a new symbolic variable that later deduction uses. */
static void test_match_cast(void) {
  rx_module *m = rx_module_new();
  rx_builder *b = rx_builder_new(m, "f");
  rx_var *x, *c = NULL, *r = NULL;
  CHECK_OK(rx_builder_param(b, "x", rx_sinfo_tensor(m, RX_DTYPE_F32, 2, NULL), &x));
  const rx_expr *mm = rx_sym_var(m, "m");
  CHECK_OK(rx_emit_match_cast(b, rx_arg_var(b, x), t2(m, RX_DTYPE_F32, mm, rx_sym_const(m, 4)), "c",
                              &c));
  rx_node *arg = rx_arg_var(b, c);
  CHECK_OK(rx_emit_op(b, "relu", &arg, 1, NULL, 0, NULL, &r));
  CHECK(r && strcmp(rx_var_name(r), "relu") == 0);
  CHECK(r && sinfo_is(rx_var_sinfo(r), "f32[m, 4]"));
  CHECK_OK(rx_builder_finish(b, rx_arg_var(b, r), NULL));
  char *text = checked_text(m);
  CHECK(strstr(text, "match_cast(x, f32[m, 4])") != NULL);
  rx_free(text);
  rx_module_free(m);
}

/* A call of another graph function: its declared result, arguments checked by normalization;
 * a missing callee, a wrong argument count and a callee without a declared result are errors. */
static void test_call_graph(void) {
  rx_module *m = rx_module_new();
  const rx_expr *n = rx_sym_var(m, "n");
  rx_builder *h = rx_builder_new(m, "helper");
  rx_var *a, *r, *x, *y;
  CHECK_OK(rx_builder_param(h, "a", rx_sinfo_tensor(m, RX_DTYPE_F32, 1, &n), &a));
  rx_node *arg = rx_arg_var(h, a);
  CHECK_OK(rx_emit_op(h, "relu", &arg, 1, NULL, 0, NULL, &r));
  rx_builder_set_result(h, rx_var_sinfo(r));
  CHECK_OK(rx_builder_finish(h, rx_arg_var(h, r), NULL));
  rx_builder *u = rx_builder_new(m, "undeclared");
  CHECK_OK(rx_builder_param(u, "a", rx_sinfo_tensor(m, RX_DTYPE_F32, 1, &n), &a));
  CHECK_OK(rx_builder_finish(u, rx_arg_var(u, a), NULL));
  rx_builder *b = rx_builder_new(m, "f");
  CHECK_OK(rx_builder_param(b, "x", rx_sinfo_tensor(m, RX_DTYPE_F32, 1, &n), &x));
  rx_node *xs[2] = {rx_arg_var(b, x), rx_arg_var(b, x)};
  ERR(rx_emit_call_graph(b, "nothing", xs, 1, NULL, NULL, NULL), "no graph_fn 'nothing'");
  ERR(rx_emit_call_graph(b, "helper", xs, 2, NULL, NULL, NULL), "helper expects 1 arguments");
  ERR(rx_emit_call_graph(b, "undeclared", xs, 1, NULL, NULL, NULL), "result's struct info");
  CHECK_OK(rx_emit_call_graph(b, "helper", xs, 1, NULL, NULL, &y));
  CHECK(y && sinfo_is(rx_var_sinfo(y), "f32[n]"));
  CHECK_OK(rx_builder_finish(b, rx_arg_var(b, y), NULL));
  char *text = checked_text(m);
  CHECK(strstr(text, "helper(x)") != NULL);
  rx_free(text);
  rx_module_free(m);
}

static void test_errors(void) {
  rx_module *m = rx_module_new();
  const rx_expr *n = rx_sym_var(m, "n");
  build_silu_mul(m);
  rx_builder *b = rx_builder_new(m, "bad");
  rx_var *x, *w, *v = NULL;
  CHECK_OK(rx_builder_param(b, "x", t2(m, RX_DTYPE_F16, n, rx_sym_const(m, 4096)), &x));
  CHECK_OK(
      rx_builder_param(b, "w", t2(m, RX_DTYPE_F16, rx_sym_const(m, 4095), rx_sym_const(m, 8)), &w));
  ERR(rx_builder_param(b, "x", t2(m, RX_DTYPE_F16, n, n), NULL), "'x' is already defined");
  rx_node *args[2] = {rx_arg_var(b, x), rx_arg_var(b, w)};

  /* shape mismatch: the message names both shapes */
  rx_status s = rx_emit_op(b, "matmul", args, 2, NULL, 0, NULL, &v);
  CHECK(v == NULL);
  ERR(s, "matmul", "f16[n, 4096]", "f16[4095, 8]");

  ERR(rx_emit_op(b, "no_such_op", args, 2, NULL, 0, NULL, NULL), "unknown op 'no_such_op'");
  ERR(rx_emit_op(b, "matmul", args, 1, NULL, 0, NULL, NULL), "matmul takes 2 arguments, got 1");
  const rx_attr *bogus = rx_attr_int(m, "bogus", 1);
  ERR(rx_emit_op(b, "permute", args, 1, &bogus, 1, NULL, NULL), "no attribute 'bogus'", "axes");
  static const int64_t ax[2] = {1, 0};
  const rx_attr *axes = rx_attr_ints(m, "axes", ax, 2);
  ERR(rx_emit_op(b, "relu", args, 1, &axes, 1, NULL, NULL), "relu has no attribute 'axes'");

  /* a variable of another function */
  rx_builder *other = rx_builder_new(m, "other");
  rx_var *ox;
  CHECK_OK(rx_builder_param(other, "ox", t2(m, RX_DTYPE_F16, n, n), &ox));
  rx_node *foreign = rx_arg_var(b, ox);
  ERR(rx_emit_op(b, "relu", &foreign, 1, NULL, 0, NULL, NULL), "not a variable of this function");
  rx_builder_free(other);

  /* destination-passing calls */
  const rx_sinfo *o = t2(m, RX_DTYPE_F16, n, rx_sym_const(m, 11008));
  ERR(rx_emit_call_tensor(b, "nope", args, 2, o, NULL, 0, NULL, NULL), "no tensor program 'nope'");
  ERR(rx_emit_call_tensor(b, "silu_mul", args, 1, o, NULL, 0, NULL, NULL),
      "'silu_mul' takes 2 inputs, got 1");
  const rx_sinfo *two[2] = {o, o};
  ERR(rx_emit_call_tensor(b, "silu_mul", args, 2, rx_sinfo_tuple(m, two, 2), NULL, 0, NULL, NULL),
      "1 output parameter but out= gives 2");
  ERR(rx_emit_call_extern(b, "ext", args, 2, o, NULL, NULL), "no extern_fn 'ext'");
  rx_node *tup = rx_arg_var(b, x);
  ERR(rx_emit_get_item(b, tup, 0, NULL, NULL), "needs a tuple", "f16[n, 4096]");

  /* structure */
  ERR(rx_builder_end_dataflow(b), "no dataflow block is open");
  CHECK_OK(rx_builder_begin_dataflow(b));
  ERR(rx_builder_begin_dataflow(b), "do not nest");
  ERR(rx_builder_finish(b, rx_arg_var(b, x), NULL), "dataflow block is still open");

  /* tensor-program builder errors are sticky and reported at the end */
  rx_tfn_builder *tb = rx_tfn_builder_new(m, "t");
  rx_buffer *a = rx_tfn_buffer(tb, "a", RX_DTYPE_F32, 1, &n, true);
  const rx_expr *i = rx_tfn_for(tb, "i", rx_sym_const(m, 0), n, "sideways");
  rx_tx *ix = rx_tfn_sym(tb, i);
  rx_tfn_store(tb, a, &ix, 1, rx_tfn_call(tb, "frobnicate", &ix, 1));
  rx_tfn_end(tb);
  ERR(rx_tfn_finish(tb, NULL), "tensor program 't'", "unknown loop kind 'sideways'");
  tb = rx_tfn_builder_new(m, "t");
  rx_tfn_for(tb, "i", rx_sym_const(m, 0), n, NULL);
  ERR(rx_tfn_finish(tb, NULL), "not closed");
  tb = rx_tfn_builder_new(m, "silu_mul");
  ERR(rx_tfn_finish(tb, NULL), "'silu_mul' is already defined");
  rx_module_free(m);
}

/* The verifier catches what the builders let through: a store into an input buffer and a
 * type mismatch. */
static void test_verifier_errors(void) {
  rx_module *m = rx_module_new();
  const rx_expr *n = rx_sym_var(m, "n");
  rx_tfn_builder *tb = rx_tfn_builder_new(m, "bad");
  rx_buffer *a = rx_tfn_buffer(tb, "a", RX_DTYPE_F32, 1, &n, false);
  rx_buffer *c = rx_tfn_buffer(tb, "c", RX_DTYPE_F16, 1, &n, true);
  const rx_expr *i = rx_tfn_for(tb, "i", rx_sym_const(m, 0), n, NULL);
  rx_tx *ix = rx_tfn_sym(tb, i);
  rx_tfn_store(tb, a, &ix, 1, rx_tfn_float(tb, 0.0));
  rx_tfn_store(tb, c, &ix, 1, rx_tfn_load(tb, a, &ix, 1));
  rx_tfn_end(tb);
  CHECK_OK(rx_tfn_finish(tb, NULL));
  rx_diag *d = rx_diag_create();
  ERR(rx_module_check(m, d), "store to input buffer 'a'; mark it `out`",
      "buffer 'c' has dtype f16 but the value has dtype f32");
  CHECK(rx_diag_error_count(d) == 2);
  rx_diag_destroy(d);
  rx_module_free(m);

  /* a parse error comes back with its location */
  m = rx_module_new();
  const char *bad = "graph_fn f(x: f32[n]) {\n  return x +\n}\n";
  ERR(rx_module_parse(m, "bad.rx", bad, strlen(bad), NULL), "bad.rx:");
  rx_module_free(m);
}

/* Verifier checks that the parser and normalizer normally make unreachable, reached by
 * mutating a checked module (as a faulty pass could). */
static const char verify_text[] = "graph_fn f(x: f32[n], c: Prim(bool)) -> f32[n] {\n"
                                  "  y = if c {\n"
                                  "    t = relu(x)\n"
                                  "    t\n"
                                  "  } else {\n"
                                  "    x\n"
                                  "  }\n"
                                  "  z = (y, x)\n"
                                  "  w = z.1\n"
                                  "  return w\n"
                                  "}\n";

static rx_module *checked(const char *text) {
  rx_module *m = rx_module_new();
  CHECK_OK(rx_module_parse(m, "v.rx", text, strlen(text), NULL));
  CHECK_OK(rx_module_check(m, NULL));
  return m;
}

static void expect_verify(rx_module *m, const char *needle) {
  rx_diag d;
  base_diag_init(&d);
  CHECK(!ir_module_verify(m, &d));
  if (!strstr(rx_diag_text(&d), needle))
    fprintf(stderr, "verifier output lacks '%s':\n%s", needle, rx_diag_text(&d));
  CHECK(strstr(rx_diag_text(&d), needle) != NULL);
  base_diag_free(&d);
}

static void test_verifier_mutations(void) {
  rx_module *m = checked(verify_text);
  rx_graph_fn *f = ir_module_graph_fn(m, "f");
  rx_binding *ybind = f->body.blocks[0]->bindings[0];
  rx_var *t = ybind->value->then_seq->blocks[0]->bindings[0]->var;

  /* a branch binding used outside its branch */
  rx_node *w = f->body.result;
  rx_var *saved = w->var;
  w->var = t;
  expect_verify(m, "use of undefined variable 't'");
  w->var = saved;

  /* `if` inside a dataflow block */
  f->body.blocks[0]->dataflow = true;
  expect_verify(m, "`if` is not allowed inside a dataflow block");
  f->body.blocks[0]->dataflow = false;

  /* a bad condition */
  rx_node *cond = ybind->value->cond;
  const rx_sinfo *cs = cond->sinfo;
  cond->sinfo = rx_sinfo_prim(m, RX_DTYPE_I64, NULL);
  expect_verify(m, "if condition must be Prim(bool) or bool[], got Prim(i64)");
  cond->sinfo = cs;

  /* a tuple index out of range */
  rx_binding *wb = f->body.blocks[0]->bindings[2];
  RX_ASSERT(wb->value->kind == RX_NODE_GET_ITEM);
  wb->value->index = 2;
  expect_verify(m, "tuple index 2 out of range");
  wb->value->index = 1;

  /* missing struct info */
  const rx_sinfo *ws = wb->var->sinfo;
  wb->var->sinfo = NULL;
  expect_verify(m, "binding 'w' has no struct info");
  wb->var->sinfo = ws;

  /* an undefined symbolic variable in a binding's struct info */
  const rx_expr *k = rx_sym_var(m, "k");
  wb->var->sinfo = rx_sinfo_tensor(m, RX_DTYPE_F32, 1, &k);
  expect_verify(m, "symbolic variable 'k' in the struct info of the binding is not defined");
  wb->var->sinfo = ws;

  rx_diag d;
  base_diag_init(&d);
  CHECK(ir_module_verify(m, &d)); /* restored: valid again */
  base_diag_free(&d);
  rx_module_free(m);
}

int main(void) {
  test_mlp_matches_text();
  test_elementwise_add();
  test_match_cast();
  test_call_graph();
  test_errors();
  test_verifier_errors();
  test_verifier_mutations();
  return check_finish("builder");
}
