/* relaxc schedule FILE.rx --target T: parse, normalize and verify FILE, schedule every tensor
 * program for target T with the default rules (passes/schedule.h), and print the module with
 * the scheduled bodies. Before each tensor program a comment line names the rule (and the
 * variants of a specialized program):
 *   # schedule f: rule gemm (variants: n == 1 -> gemv, n <= 16 -> gemm_small, otherwise gemm)
 * The output parses back and runs in the interpreter. */
#include "commands.h"

#include "ir/ir.h"
#include "passes/schedule.h"
#include "targets/target.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The rule comments of the scheduled programs, by name (cli_print_module's note). */
typedef struct rule_comments {
  const char **names;
  char **comments;
  int n;
} rule_comments;

static void rule_comment(const char *fn_name, void *ctx) {
  const rule_comments *c = ctx;
  for (int i = 0; i < c->n; i++)
    if (!strcmp(c->names[i], fn_name)) fputs(c->comments[i], stdout);
}

int cli_cmd_schedule(const rx_cli_command *cmd, int argc, char **argv) {
  const char *file = NULL, *target = NULL;
  rx_cli_args args = cli_begin(cmd, argc, argv);
  while (cli_next(&args)) {
    if (!args.flag) {
      if (file) return cli_usage_error(cmd, "'schedule' takes one FILE, got also '%s'", args.value);
      file = args.value;
    } else if (!strcmp(args.flag, "--target")) {
      target = args.value;
    } else {
      return cli_unhandled(&args);
    }
  }
  if (args.status >= 0) return args.status;
  if (!file)
    return cli_usage_error(cmd, "%s", "'schedule' needs a FILE (or '-' for standard input)");
  if (!target) return cli_usage_error(cmd, "%s", "'schedule' needs --target (e.g. --target cuda)");
  const rx_target *t = NULL;
  rx_status st = tgt_target_parse(target, &t);
  if (st) {
    fprintf(stderr, "relaxc: error: %s\n", rx_status_message(st));
    rx_status_free(st);
    return 2;
  }
  char *text = NULL;
  size_t len = 0;
  const char *name = cli_input_name(file);
  text = cli_read_input(file, RX_FILE_TEXT_IR, &len);
  if (!text) return 1;
  rx_module *m = rx_module_new();
  rx_diag diag;
  base_diag_init(&diag);
  bool ok = ir_parse_module(m, name, text, len, &diag) && ops_module_normalize(m, &diag) &&
            ir_module_verify(m, &diag) && diag.errors == 0;
  int ntf = 0;
  for (size_t i = 0; i < m->items.len; i++) ntf += m->items.data[i].kind == RX_ITEM_TENSOR;
  const char **names = base_calloc((size_t)ntf + 1, sizeof *names); /* aborts when out of memory */
  char **comments = base_calloc((size_t)ntf + 1, sizeof *comments);
  int nc = 0;
  if (ok) {
    for (size_t i = 0; i < m->items.len; i++) {
      rx_item *it = &m->items.data[i];
      if (it->kind != RX_ITEM_TENSOR) continue;
      rx_tensor_fn *f = it->fn;
      rx_sched_result r;
      if (!sched_schedule(m, f, t, &diag, &r)) {
        ok = false;
        continue;
      }
      it->fn = r.fn;
      rx_strbuf c = {0};
      base_strbuf_printf(&c, "# schedule %s: rule %s", f->name,
                         sched_rule_name(r.variants[r.nvariants - 1].rule));
      if (r.nvariants > 1) {
        base_strbuf_printf(&c, " (variants: ");
        for (int v = 0; v < r.nvariants; v++) {
          if (v) base_strbuf_printf(&c, ", ");
          if (r.variants[v].cond) {
            char *cs = sym_expr_to_string(r.variants[v].cond);
            base_strbuf_printf(&c, "%s -> %s", cs, r.variants[v].name);
            free(cs);
          } else {
            base_strbuf_printf(&c, "otherwise -> %s", r.variants[v].name);
          }
        }
        base_strbuf_printf(&c, ")");
      }
      base_strbuf_printf(&c, "\n");
      names[nc] = f->name;
      comments[nc++] = base_strbuf_take(&c);
    }
  }
  /* the scheduled module must still verify */
  if (ok && !ir_module_verify(m, &diag)) ok = false;
  fputs(rx_diag_text(&diag), stderr);
  if (ok) cli_print_module(m, rule_comment, &(rule_comments){names, comments, nc});
  for (int i = 0; i < nc; i++) free(comments[i]);
  free(comments);
  free(names);
  base_diag_free(&diag);
  rx_module_free(m);
  free(text);
  return ok ? 0 : 1;
}
