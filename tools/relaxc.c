/* relaxc: the command line. Commands: check, print, ops; see usage() for options and exit
 * statuses. */
#include "ir/ir.h"
#include "ops/ops.h"
#include "relaxc/compiler.h"
#include "commands.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* exit statuses */
enum {
  EXIT_OK = 0,     /* success (warnings may have been printed) */
  EXIT_ERRORS = 1, /* errors in the input, or the input file cannot be read */
  EXIT_USAGE = 2,  /* bad command line */
};

static void usage(FILE *out) {
  fputs("usage: relaxc <command> [FILE]\n"
        "\n"
        "commands:\n"
        "  check FILE   parse, normalize and verify FILE (.rx text); diagnostics on stderr\n"
        "  print FILE   as check, then print the module on stdout (nothing on error)\n"
        "  ops          list the operators with a one-line description\n"
        "  schedule FILE --target T   schedule every tensor program for target T and print\n"
        "  codegen FILE --target T [-o DIR]   emit kernels (CUDA C, GLSL+SPIR-V, MSL) and kernels.json\n"
        "  compile FILE --target T[,T...] -o OUT.rxm [--weights DIR]\n"
        "               the whole pipeline to an artifact (docs/artifact.md); FILE is .rx text or an\n"
        "               .onnx model, whose weights --weights writes as DIR/<parameter>.npy\n"
        "  run MODEL.rxm [--device D] [--fn F] --input X=FILE.npy|random:SHAPE [--weights DIR]\n"
        "               [--output OUT.npy] [--bench N]\n"
        "               call a function of an artifact; prints result shapes and checksums;\n"
        "               --weights DIR: parameters without --input from DIR/<parameter>.npy\n"
        "  inspect MODEL.rxm [--code]   an artifact's functions, facts, planned memory, kernels, sections\n"
        "  import MODEL.onnx [-o OUT.rx] [--weights DIR]\n"
        "               import an ONNX model and print it (symbolic dims kept); --weights as compile\n"
        "\n"
        "FILE may be '-' to read standard input.\n"
        "\n"
        "options:\n"
        "  -h, --help     print this help and exit\n"
        "  --version      print the version and exit\n"
        "\n"
        "exit status:\n"
        "  0  success (warnings are printed on stderr)\n"
        "  1  the input has errors, or FILE cannot be read\n"
        "  2  usage error: unknown command or option, missing or extra arguments\n",
        out);
}

static int usage_error(const char *fmt, const char *arg) {
  fputs("relaxc: ", stderr);
  fprintf(stderr, fmt, arg);
  fputs("\nTry 'relaxc --help' for more information.\n", stderr);
  return EXIT_USAGE;
}

/* check and print: parse, normalize, verify, then (print) write the module. */
static int run_file(const char *path, bool print) {
  char *text = NULL;
  size_t len = 0;
  const char *name = rx_cli_input_name(path);
  text = rx_cli_read_input(path, &len);
  if (!text) return EXIT_ERRORS;
  rx_module *m = rx_module_new();
  rx_diag diag;
  rx_diag_init(&diag);
  bool ok = rx_parse_module(m, name, text, len, &diag) && rx_module_normalize(m, &diag) &&
            rx_module_verify(m, &diag);
  ok = ok && diag.errors == 0;
  fputs(rx_diag_text(&diag), stderr);
  if (ok && print) {
    rx_strbuf out = {0};
    rx_module_print(&out, m);
    if (out.data) fputs(out.data, stdout);
    if (out.len && out.data[out.len - 1] != '\n') fputc('\n', stdout);
    rx_strbuf_free(&out);
  }
  rx_diag_free(&diag);
  rx_module_free(m);
  free(text);
  return ok ? EXIT_OK : EXIT_ERRORS;
}

static int list_ops(void) {
  int n = 0;
  const rx_op *const *ops = rx_op_all(&n);
  int width = 0;
  for (int i = 0; i < n; i++) {
    int w = (int)strlen(ops[i]->name);
    if (w > width) width = w;
  }
  for (int i = 0; i < n; i++)
    printf("%-*s  %s\n", width, ops[i]->name, ops[i]->doc ? ops[i]->doc : "");
  return EXIT_OK;
}

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "schedule") == 0) return rx_cmd_schedule(argc - 1, argv + 1);
  if (argc > 1 && strcmp(argv[1], "codegen") == 0) return rx_cmd_codegen(argc - 1, argv + 1);
  if (argc > 1 && strcmp(argv[1], "compile") == 0) return rx_cmd_compile(argc - 1, argv + 1);
  if (argc > 1 && strcmp(argv[1], "run") == 0) return rx_cmd_run(argc - 1, argv + 1);
  if (argc > 1 && strcmp(argv[1], "inspect") == 0) return rx_cmd_inspect(argc - 1, argv + 1);
  if (argc > 1 && strcmp(argv[1], "import") == 0) return rx_cmd_import(argc - 1, argv + 1);
  const char *cmd = NULL;
  const char *file = NULL;
  int nfiles = 0;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
      usage(stdout);
      return EXIT_OK;
    }
    if (strcmp(a, "--version") == 0) {
      printf("relaxc %s\n", RELAXC_VERSION);
      return EXIT_OK;
    }
    if (a[0] == '-' && a[1] != 0) return usage_error("unknown option '%s'", a);
    if (!cmd) {
      cmd = a;
    } else {
      file = a;
      nfiles++;
    }
  }
  if (!cmd) return usage_error("%s", "missing command (check, print or ops)");
  if (strcmp(cmd, "ops") == 0) {
    if (nfiles) return usage_error("'ops' takes no arguments, got '%s'", file);
    return list_ops();
  }
  bool print = strcmp(cmd, "print") == 0;
  if (!print && strcmp(cmd, "check") != 0)
    return usage_error("unknown command '%s' (expected check, print or ops)", cmd);
  if (nfiles == 0) return usage_error("'%s' needs a FILE (or '-' for standard input)", cmd);
  if (nfiles > 1) return usage_error("'%s' takes one FILE", cmd);
  return run_file(file, print);
}
