/* relaxc import MODEL.onnx [-o OUT.rx] [--weights DIR]: imports an ONNX model (frontends/onnx)
 * and prints the module, normalized, in the text format (to OUT.rx with -o). The model's weights
 * become parameters of `main` after its inputs (artifacts do not hold weights yet); --weights
 * writes each as DIR/<parameter name>.npy (DIR created if missing), for `relaxc run --weights`.
 * External data files are read relative to the model's directory. --list-ops prints the
 * supported operators (the importer's table) as the Markdown table README.md holds.
 * Exit: 0 success, 1 an unreadable, malformed or unsupported model, 2 usage. */
#include "commands.h"

#include "frontends/hf/hf.h"
#include "relaxc/compiler.h"

#ifdef RX_HAVE_ONNX
#include "frontends/onnx/onnx_import.h"
#endif

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Writes m as text to out (NULL: stdout); 0 or 1 after printing why. */
static int write_text(rx_module *m, const char *out) {
  int rc = 0;
  char *text = rx_module_to_text(m);
  FILE *f = out ? fopen(out, "w") : stdout;
  if (!f) {
    fprintf(stderr, "relaxc: error: cannot write '%s': %s\n", out, strerror(errno));
    rc = 1;
  } else {
    fputs(text, f);
    if (text[0] && text[strlen(text) - 1] != '\n') fputc('\n', f);
    if (out && fclose(f) != 0) {
      fprintf(stderr, "relaxc: error: writing '%s' failed\n", out);
      rc = 1;
    }
  }
  rx_free(text);
  return rc;
}

/* A Hugging Face model folder: its graph functions (the weights stay in the checkpoint). */
static int import_hf(const char *dir, const char *out, const rx_hf_options *o) {
  if (out && !cli_can_write(out)) return 1;
  rx_module *m = rx_module_new();
  int rc = 1;
  if (cli_import_hf(m, dir, o)) {
    rx_status s = rx_module_check(m, NULL);
    if (s) {
      fprintf(stderr, "relaxc: error: %s\n", rx_status_message(s));
      rx_status_free(s);
    } else {
      rc = write_text(m, out);
    }
  }
  rx_module_free(m);
  return rc;
}

int cli_cmd_import(const rx_cli_command *cmd, int argc, char **argv) {
  const char *in = NULL, *out = NULL, *wdir = NULL;
  bool list = false;
  rx_hf_options hfo = {0};
  rx_cli_args it = cli_begin(cmd, argc, argv);
  while (cli_next(&it)) {
    if (!it.flag) {
      if (in) return cli_usage_error(cmd, "'import' takes one model, got '%s' too", it.value);
      in = it.value;
    } else if (!strcmp(it.flag, "-o")) {
      out = it.value;
    } else if (!strcmp(it.flag, "--weights")) {
      wdir = it.value;
    } else if (!strcmp(it.flag, "--list-ops")) {
      list = true;
    } else if (!strcmp(it.flag, "--dtype") || !strcmp(it.flag, "--max-seq-len") ||
               !strcmp(it.flag, "--max-batch") || !strcmp(it.flag, "--no-weights") ||
               !strcmp(it.flag, "--quantize") || !strcmp(it.flag, "--quantize-embeddings")) {
      int rc = cli_hf_flag(&it, &hfo);
      if (rc) return rc;
    } else {
      return cli_unhandled(&it);
    }
  }
  if (it.status >= 0) return it.status;
#ifdef RX_HAVE_ONNX
  if (list) {
    rx_strbuf b = {0};
    base_strbuf_append(&b, "| ONNX operator | opsets | notes |\n| --- | --- | --- |\n");
    onnx_supported_ops(&b);
    fputs(b.data, stdout);
    base_strbuf_free(&b);
    return 0;
  }
#endif
  if (!in)
    return cli_usage_error(
        cmd, "%s",
        "'import' needs a MODEL.onnx, a MODEL.gguf or a Hugging Face model folder (or '-' "
        "for an ONNX model on standard input)");
  if (hf_is_model_dir(in) || gguf_hf_is_gguf(in)) {
    if (wdir)
      return cli_usage_error(cmd, "--weights is for an ONNX model; '%s' is a model folder", in);
    return import_hf(in, out, &hfo);
  }
  if (hfo.dtype || hfo.max_seq_len || hfo.max_batch || hfo.no_weights || hfo.quantize ||
      hfo.quantize_embeddings)
    return cli_usage_error(
        cmd,
        "--dtype, --max-seq-len, --max-batch, --no-weights and --quantize are for a Hugging Face "
        "model folder; '%s' is not one (no config.json)",
        in);
#ifndef RX_HAVE_ONNX
  (void)out;
  (void)wdir;
  (void)list;
  fputs("relaxc: ONNX support was not built: install protobuf-c-compiler libprotobuf-c-dev "
        "libonnx-dev and rebuild\n",
        stderr);
  return 1;
#else
  if (out && !cli_can_write(out)) return 1;   /* before any work */
  rx_status bare = hf_check_not_bare_dir(in); /* not "is a directory" alone */
  if (bare) {
    fprintf(stderr, "relaxc: error: %s\n", rx_status_message(bare));
    rx_status_free(bare);
    return 1;
  }
  size_t len;
  char *bytes = cli_read_input(in, RX_FILE_ONNX, &len);
  if (!bytes) return 1;
  rx_module *m = rx_module_new();
  char *base = cli_dir_of(in);
  rx_status s = onnx_import(m, bytes, len, cli_input_name(in), base, NULL);
  free(base);
  if (!s) s = rx_module_check(m, NULL);
  int rc = 0;
  if (s) {
    fprintf(stderr, "relaxc: error: %s\n", rx_status_message(s));
    rx_status_free(s);
    rc = 1;
  } else {
    rc = write_text(m, out);
  }
  if (!rc && wdir) rc = cli_write_onnx_weights(in, bytes, len, wdir);
  rx_module_free(m);
  free(bytes);
  return rc;
#endif
}
