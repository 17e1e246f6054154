/* relaxc opt FILE --passes P[,P...] [--dispatch-min-rows N]
 * Parses, normalizes and verifies FILE (.rx text), runs the named graph passes alone, in the
 * order given, each as `relaxc compile` runs it (driver/driver.h drv_pass_run: the module is
 * normalized and verified after each), and prints the module on stdout; diagnostics on stderr.
 * The names are the compile pipeline's (drv_compile_step_names): fold, cse, dce, dispatch,
 * legalize, annotate, fuse_ops, fuse_tensor, dedup, names (and verify), and inline, which
 * drv_compile does not run (passes/inline.c: calls of graph functions inlined). The steps after
 * them (plan_memory, lower_host, schedule, codegen, artifact) build what follows the module, not a
 * module: `relaxc compile --dump-after STEP` shows them, `relaxc schedule` the schedules. What a
 * pass needs first (legalize before fuse_tensor) is the user's to give. A tensor program whose
 * fusion pattern is known (annotate, which fuse_ops runs first, finds it) is printed after a
 * comment that names it, `# pattern NAME: injective`. dispatch sends matmuls
 * of at least --dispatch-min-rows rows (default 17) to cuBLASLt, as `--dispatch cublas` does.
 * Exit: 0 success, 1 errors (unreadable file, errors in FILE, a pass's error), 2 usage errors
 * (an unknown pass among them, listing the known ones). */
#include "commands.h"

#include "driver/driver.h"
#include "ir/ir.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The known passes, comma-separated (heap). */
static char *pass_list(void) {
  rx_strbuf b = {0};
  for (int i = 0; drv_pass_names[i]; i++)
    base_strbuf_printf(&b, "%s%s", i ? ", " : "", drv_pass_names[i]);
  return base_strbuf_take(&b);
}

/* The passes of "a,b,c" into names (at most max; pointers into the heap copy *out_copy): their
 * count, or -1 after a usage error naming the first unknown or empty one. */
static int split_passes(const rx_cli_command *cmd, const char *list, char **out_copy,
                        const char **names, int max) {
  char *copy = base_strdup(list);
  *out_copy = copy;
  int n = 0;
  for (char *p = copy;;) {
    char *comma = strchr(p, ',');
    if (comma) *comma = '\0';
    if (!drv_pass_known(p)) {
      char *known = pass_list();
      if (!*p)
        cli_usage_error(cmd, "--passes '%s' has an empty name; the passes: %s", list, known);
      else if (drv_compile_step_known(p) && strcmp(p, "all"))
        cli_usage_error(cmd,
                        "'%s' is a compile step that builds more than a module, not a graph "
                        "pass (see it with `relaxc compile --dump-after %s`); the passes: %s",
                        p, p, known);
      else
        cli_usage_error(cmd, "unknown pass '%s'; the passes: %s", p, known);
      free(known);
      return -1;
    }
    if (n == max) {
      cli_usage_error(cmd, "--passes takes at most %d passes", max);
      return -1;
    }
    names[n++] = p;
    if (!comma) break;
    p = comma + 1;
  }
  return n;
}

#define MAX_PASSES 64

/* `# pattern NAME: KIND` before each tensor program whose pattern is known (cli_print_module's
 * note). */
static void pattern_comment(const char *fn_name, void *ctx) {
  const rx_tensor_fn *f = ir_module_tensor_fn(ctx, fn_name);
  if (f && f->pattern != RX_PATTERN_UNKNOWN)
    printf("# pattern %s: %s\n", fn_name, ir_pattern_name(f->pattern));
}

int cli_cmd_opt(const rx_cli_command *cmd, int argc, char **argv) {
  const char *file = NULL, *passes = NULL;
  long long min_rows = 0;
  rx_cli_args args = cli_begin(cmd, argc, argv);
  while (cli_next(&args)) {
    if (!args.flag) {
      if (file) return cli_usage_error(cmd, "'opt' takes one FILE, got also '%s'", args.value);
      file = args.value;
    } else if (!strcmp(args.flag, "--passes")) {
      passes = args.value;
    } else if (!strcmp(args.flag, "--dispatch-min-rows")) {
      int rc = cli_int_option(&args, 1, INT32_MAX, &min_rows);
      if (rc) return rc;
    } else {
      return cli_unhandled(&args);
    }
  }
  if (args.status >= 0) return args.status;
  if (!file) return cli_usage_error(cmd, "%s", "'opt' needs a FILE (or '-' for standard input)");
  if (!passes) return cli_usage_error(cmd, "%s", "'opt' needs --passes (e.g. --passes fold,dce)");
  char *copy = NULL;
  const char *names[MAX_PASSES];
  int n = split_passes(cmd, passes, &copy, names, MAX_PASSES);
  if (n < 0) {
    free(copy);
    return 2;
  }
  rx_compile_options o = {0};
  rx_status st = drv_compile_options_set_dispatch(&o, "cublas", min_rows);
  if (st) { /* min_rows is in range: a bug */
    fprintf(stderr, "relaxc: error: %s\n", rx_status_message(st));
    rx_status_free(st);
    free(copy);
    return 2;
  }
  size_t len = 0;
  const char *name = cli_input_name(file);
  char *text = cli_read_input(file, RX_FILE_TEXT_IR, &len);
  if (!text) {
    free(copy);
    return 1;
  }
  rx_module *m = rx_module_new();
  rx_diag diag;
  base_diag_init(&diag);
  bool ok = ir_parse_module(m, name, text, len, &diag) && ops_module_normalize(m, &diag) &&
            ir_module_verify(m, &diag) && diag.errors == 0;
  for (int i = 0; ok && i < n; i++) ok = drv_pass_run(m, names[i], &o, &diag);
  fputs(rx_diag_text(&diag), stderr);
  if (ok) cli_print_module(m, pattern_comment, m);
  base_diag_free(&diag);
  rx_module_free(m);
  free(text);
  free(copy);
  return ok ? 0 : 1;
}
