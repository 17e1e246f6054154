/* The parser's output structure below the text: node kinds, locations, scoping, positional
 * attributes, loop nests, forward resolution, and error recovery across items. */
#include "base/base.h"
#include "check.h"
#include "ir/ir.h"
#include "ops/ops.h"

#include <stdio.h>
#include <string.h>

static rx_module *parse(const char *text, rx_diag *d, bool *ok) {
  rx_module *m = rx_module_new();
  base_diag_init(d);
  *ok = ir_parse_module(m, "t.rx", text, strlen(text), d);
  return m;
}

static void test_graph(void) {
  const char *text = "graph_fn main(x: f32[n, 4]) {\n"
                     "  y = permute(x, [1, 0])\n"
                     "  z = helper(y)\n"
                     "  return z.0\n"
                     "}\n"
                     "graph_fn helper(a: f32[4, n]) {\n"
                     "  return (a,)\n"
                     "}\n";
  rx_diag d;
  bool ok;
  rx_module *m = parse(text, &d, &ok);
  CHECK(ok);
  CHECK_INT_EQ(m->items.len, 2);
  rx_graph_fn *f = ir_module_graph_fn(m, "main");
  rx_graph_fn *h = ir_module_graph_fn(m, "helper");
  CHECK(f && h);
  if (f && h) {
    CHECK(f->nparams == 1 && f->body.nblocks == 1 && f->body.blocks[0]->nbindings == 2);
    rx_binding *b0 = f->body.blocks[0]->bindings[0];
    CHECK(b0->loc.line == 2 && b0->loc.col == 3);
    CHECK(b0->value->kind == RX_NODE_CALL && b0->value->nattrs == 1);
    CHECK(strcmp(b0->value->attrs[0].name, "axes") == 0 && b0->value->attrs[0].n == 2 &&
          b0->value->attrs[0].ints[0] == 1 && b0->value->attrs[0].ints[1] == 0);
    CHECK(b0->value->args[0]->kind == RX_NODE_VAR && b0->value->args[0]->var == f->params[0]);
    rx_binding *b1 = f->body.blocks[0]->bindings[1];
    CHECK(b1->value->kind == RX_NODE_CALL_GRAPH && b1->value->gfn == h); /* forward reference */
    CHECK(b1->value->args[0]->var == b0->var);
    CHECK(f->body.result->kind == RX_NODE_GET_ITEM && f->body.result->index == 0);
    CHECK(f->params[0]->sinfo->shape[0] == sym_expr_var(m->ctx, "n"));
  }
  base_diag_free(&d);
  rx_module_free(m);
}

static void test_tensor(void) {
  const char *text = "tensor_fn t(a: f32[n, m], out b: f32[n, m]) {\n"
                     "  for i in 0..n bind(blockIdx.x), j in 1..m {\n"
                     "    let v: f32 = a[i, j - 1]\n"
                     "    b[i, j] = v * 2.0\n"
                     "  }\n"
                     "}\n";
  rx_diag d;
  bool ok;
  rx_module *m = parse(text, &d, &ok);
  CHECK(ok);
  rx_tensor_fn *t = ir_module_tensor_fn(m, "t");
  CHECK(t && t->nparams == 2 && t->params[1]->is_output);
  if (t) {
    CHECK(t->body->kind == RX_STMT_SEQ && t->body->n == 1);
    rx_stmt *outer = t->body->body[0];
    CHECK(outer->kind == RX_STMT_FOR && outer->loop_kind == RX_LOOP_BLOCK_X);
    CHECK(outer->loc.line == 2 && outer->loc.col == 3);
    /* the shorthand is a nest: outer { inner { ... } } */
    rx_stmt *seq = outer->inner;
    CHECK(seq->kind == RX_STMT_SEQ && seq->n == 1 && seq->body[0]->kind == RX_STMT_FOR);
    rx_stmt *inner = seq->body[0];
    CHECK(inner->loop_kind == RX_LOOP_SERIAL && rx_expr_is_const(inner->lo[0], 1));
    CHECK(inner->extent[0] ==
          sym_expr_sub(m->ctx, sym_expr_var(m->ctx, "m"), sym_expr_const(m->ctx, 1)));
    rx_stmt *let = inner->inner->body[0], *st = inner->inner->body[1];
    CHECK(let->kind == RX_STMT_LET && let->value->kind == RX_TX_LOAD);
    CHECK(let->value->idx[1]->kind == RX_TX_SYM); /* j - 1 folded to one symbolic node */
    CHECK(st->kind == RX_STMT_STORE && st->buf == t->params[1]->buf);
    CHECK(st->value->kind == RX_TX_BINARY && st->value->a->kind == RX_TX_LOCAL &&
          st->value->a->local == let->local);
  }
  base_diag_free(&d);
  rx_module_free(m);
}

/* An error abandons one item; the others still parse and the diagnostic has a caret. */
static void test_recovery(void) {
  const char *text = "graph_fn bad(x: f32[n]) {\n"
                     "  y = add(x,\n"
                     "  return y\n"
                     "}\n"
                     "graph_fn good(x: f32[n]) {\n"
                     "  return x\n"
                     "}\n"
                     "tensor_fn t(a: f32[n]) { $ }\n";
  rx_diag d;
  bool ok;
  rx_module *m = parse(text, &d, &ok);
  CHECK(!ok);
  CHECK_INT_EQ(d.errors, 2);
  CHECK(ir_module_graph_fn(m, "good") != NULL);
  CHECK(ir_module_graph_fn(m, "bad") == NULL);
  CHECK(strstr(rx_diag_text(&d),
               "t.rx:3:3: error: expected an expression, found keyword 'return'") != NULL);
  CHECK(strstr(rx_diag_text(&d), "t.rx:8:26: error: unexpected character '$'") != NULL);
  CHECK(strstr(rx_diag_text(&d), "\n    ^\n") != NULL);
  base_diag_free(&d);
  rx_module_free(m);
}

/* print(parse(print(M))) == print(M) on one text with every construct the printer folds. */
static void test_roundtrip(void) {
  const char *text =
      "tensor_fn t(a: f32[n], out b: f32[n], k: i32) where n % 4 == 0 {\n"
      "  for i in 0..n // 4 vectorize { b[i * 4] = -(a[i] - -1.5) * f32(k + 1) }\n"
      "  if !(n > 3) { barrier } else if n == 2 { b[0] = 1e-7 } else { b[0] = nan }\n"
      "}\n"
      "impure extern_fn e(a: f32[n], out b: f32[n])\n";
  rx_diag d;
  bool ok;
  rx_module *m = parse(text, &d, &ok);
  CHECK(ok);
  rx_strbuf p1 = {0};
  ir_module_print(&p1, m);
  rx_diag d2;
  rx_module *m2 = parse(p1.data, &d2, &ok);
  CHECK(ok);
  rx_strbuf p2 = {0};
  ir_module_print(&p2, m2);
  CHECK(p1.data && p2.data && strcmp(p1.data, p2.data) == 0);
  CHECK(strstr(p1.data, "b[i * 4] = -(a[i] - -1.5) * f32(k + 1)") != NULL);
  CHECK(strstr(p1.data, "b[0] = 1e-07") != NULL);
  base_strbuf_free(&p1);
  base_strbuf_free(&p2);
  base_diag_free(&d);
  base_diag_free(&d2);
  rx_module_free(m);
  rx_module_free(m2);
}

int main(void) {
  test_graph();
  test_tensor();
  test_recovery();
  test_roundtrip();
  return check_finish("test_parser");
}
