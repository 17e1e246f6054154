/* relaxc import MODEL.onnx [-o OUT.rx] [--weights DIR]: imports an ONNX model (frontends/onnx)
 * and prints the module, normalized, in the text format (to OUT.rx with -o). The model's weights
 * become parameters of `main` after its inputs (artifacts do not hold weights yet); --weights
 * writes each as DIR/<parameter name>.npy (DIR created if missing), for `relaxc run --weights`.
 * External data files are read relative to the model's directory.
 * Exit: 0 success, 1 an unreadable, malformed or unsupported model, 2 usage. */
#include "commands.h"

#include "relaxc/compiler.h"

#ifdef RX_HAVE_ONNX
#include "frontends/onnx/onnx_import.h"
#endif

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int usage_err(const char *msg, const char *arg) {
  fprintf(stderr, "relaxc: ");
  fprintf(stderr, msg, arg);
  fputs("\nusage: relaxc import MODEL.onnx [-o OUT.rx] [--weights DIR]\n", stderr);
  return 2;
}

int rx_cmd_import(int argc, char **argv) {
  const char *in = NULL, *out = NULL, *wdir = NULL;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "-o")) {
      if (++i >= argc) return usage_err("%s", "-o needs a file");
      out = argv[i];
    } else if (!strcmp(argv[i], "--weights")) {
      if (++i >= argc) return usage_err("%s", "--weights needs a directory");
      wdir = argv[i];
    } else if (argv[i][0] == '-' && argv[i][1]) {
      return usage_err("unknown option '%s'", argv[i]);
    } else if (in) {
      return usage_err("'import' takes one model, got '%s' too", argv[i]);
    } else {
      in = argv[i];
    }
  }
  if (!in) return usage_err("%s", "'import' needs a MODEL.onnx (or '-' for standard input)");
#ifndef RX_HAVE_ONNX
  (void)out;
  (void)wdir;
  fputs("relaxc: ONNX support was not built: install protobuf-c-compiler libprotobuf-c-dev "
        "libonnx-dev and rebuild\n",
        stderr);
  return 1;
#else
  size_t len;
  char *bytes = rx_cli_read_input(in, &len);
  if (!bytes) return 1;
  rx_module *m = rx_module_new();
  char *base = rx_cli_dir_of(in);
  rx_status s = rx_onnx_import(m, bytes, len, rx_cli_input_name(in), base, NULL);
  free(base);
  if (!s) s = rx_module_check(m, NULL);
  int rc = 0;
  if (s) {
    fprintf(stderr, "relaxc: %s\n", rx_status_message(s));
    rx_status_free(s);
    rc = 1;
  } else {
    char *text = rx_module_to_text(m);
    FILE *f = out ? fopen(out, "w") : stdout;
    if (!f) {
      fprintf(stderr, "relaxc: cannot write '%s'\n", out);
      rc = 1;
    } else {
      fputs(text, f);
      if (text[0] && text[strlen(text) - 1] != '\n') fputc('\n', f);
      if (out && fclose(f) != 0) {
        fprintf(stderr, "relaxc: writing '%s' failed\n", out);
        rc = 1;
      }
    }
    rx_free(text);
  }
  if (!rc && wdir) rc = rx_cli_write_onnx_weights(in, bytes, len, wdir);
  rx_module_free(m);
  free(bytes);
  return rc;
#endif
}
