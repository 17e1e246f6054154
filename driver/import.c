/* driver/import.c: rx_module_import (include/relaxc/compiler.h), the one entry point that turns a
 * model on disk into a module: a Hugging Face folder or a GGUF file (frontends/hf, hf_import), an
 * ONNX model with its weights bound (frontends/onnx), or a .rx program. `relaxc compile` and
 * `relaxc import` reach the Hugging Face importer through it (tools/cli.c, cli_import_hf), and the
 * Python package's relaxc.compile takes model folders and files through it. */
#include "driver.h"
#include "frontends/hf/hf.h"
#include "ir/ir.h"
#include "relaxc/compiler.h"

#ifdef RX_HAVE_ONNX
#include "frontends/onnx/onnx_import.h"
#endif

#include <stdlib.h>
#include <string.h>

/* ONNX: a .onnx name, or a protobuf's first byte (a field tag: a control character), as the
 * command line decides (tools/cli.c, cli_is_onnx). */
static bool is_onnx(const char *path, const char *bytes, size_t len) {
  size_t n = strlen(path);
  if (n > 5 && !strcmp(path + n - 5, ".onnx")) return true;
  if (!len) return false;
  unsigned char c = (unsigned char)bytes[0];
  return c < 0x20 && c != '\t' && c != '\n' && c != '\r' && c != '\f' && c != '\v';
}

static bool hf_options_set(const rx_import_options *o) {
  return o->dtype != RX_DTYPE_UNKNOWN || o->max_seq_len || o->max_batch || o->no_weights ||
         o->quantize || o->quantize_embeddings || o->tensor_parallel > 1 ||
         o->pipeline_parallel > 1;
}

#ifdef RX_HAVE_ONNX
/* path's folder ("." for a bare name), for the ONNX importer's external data */
static char *dir_of(const char *path) {
  const char *slash = strrchr(path, '/');
  if (!slash) return base_strdup(".");
  if (slash == path) return base_strdup("/");
  return base_strndup(path, (size_t)(slash - path));
}
#endif

static rx_status import_file(rx_module *m, const char *path, rx_diag *diag) {
  char *text = NULL;
  size_t len = 0;
  RX_RETURN_IF_ERROR(base_read_file_kind(path, RX_FILE_MODEL, &text, &len));
  rx_status st = NULL;
  if (is_onnx(path, text, len)) {
#ifdef RX_HAVE_ONNX
    char *base = dir_of(path);
    st = onnx_import(m, text, len, path, base, diag);
    if (!st) st = onnx_add_weights(m, text, len, path, base);
    free(base);
#else
    st =
        base_status_make(RX_ERR_UNSUPPORTED,
                         "%s: an ONNX model, and this relaxc was built without ONNX support", path);
#endif
  } else {
    rx_diag *own = diag ? NULL : rx_diag_create();
    rx_diag *d = diag ? diag : own;
    if (!ir_parse_module(m, path, text, len, d) || d->errors)
      st = base_status_make(RX_ERR_INVALID, "%s: %d error%s in the program%s%s", path, d->errors,
                            d->errors == 1 ? "" : "s", d->text.data ? ":\n" : "",
                            d->text.data ? d->text.data : "");
    rx_diag_destroy(own);
  }
  free(text);
  return st;
}

rx_status rx_module_import(rx_module *m, const char *path, const rx_import_options *opts,
                           rx_diag *diag) {
  if (!m || !path)
    return base_status_make(RX_ERR_INVALID, "rx_module_import: NULL %s", m ? "path" : "module");
  rx_import_options none = {0};
  const rx_import_options *o = opts ? opts : &none;
  RX_RETURN_IF_ERROR(hf_check_not_bare_dir(path));
  if (hf_is_model_dir(path) || gguf_hf_is_gguf(path)) {
    rx_hf_options h = {.dtype = o->dtype,
                       .max_seq_len = o->max_seq_len,
                       .max_batch = o->max_batch,
                       .no_weights = o->no_weights,
                       .quantize = o->quantize,
                       .quantize_embeddings = o->quantize_embeddings,
                       .tp_world = o->tensor_parallel > 1 ? o->tensor_parallel : 0,
                       .tp_rank = o->tensor_parallel > 1 ? o->tensor_rank : 0,
                       .pp_world = o->pipeline_parallel > 1 ? o->pipeline_parallel : 0,
                       .pp_rank = o->pipeline_parallel > 1 ? o->pipeline_rank : 0};
    return hf_import(m, path, &h);
  }
  if (hf_options_set(o))
    return base_status_make(RX_ERR_INVALID,
                            "%s: the dtype, max_seq_len, max_batch, no_weights, quantize, "
                            "tensor_parallel and pipeline_parallel options are for a Hugging Face "
                            "model folder or a GGUF file, and this is neither",
                            path);
  return import_file(m, path, diag);
}
