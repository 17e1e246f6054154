/* driver/api.c: the public face of the compile driver (include/relaxc/compiler.h):
 * rx_module_compile runs drv_compile with options made from an rx_compile_request, so that an
 * embedder compiles a module into an artifact with the public header alone. */
#include "driver.h"

#include "relaxc/compiler.h"

#include <stdlib.h>
#include <string.h>

rx_status drv_compile_options_set_targets(rx_compile_options *o, const char *list) {
  const char *p = list ? list : "";
  while (*p) {
    const char *e = strchr(p, ',');
    size_t n = e ? (size_t)(e - p) : strlen(p);
    char *one = base_strndup(p, n);
    const rx_target *t = NULL;
    rx_status st = tgt_target_parse(one, &t);
    free(one);
    if (st) return st;
    if (o->ntargets == RX_COMPILE_MAX_TARGETS)
      return base_status_make(RX_ERR_INVALID, "at most %d targets", RX_COMPILE_MAX_TARGETS);
    o->targets[o->ntargets++] = t;
    p = e ? e + 1 : p + n;
  }
  if (!o->ntargets)
    return base_status_make(RX_ERR_INVALID, "the target list names no target (e.g. vulkan,cuda)");
  return NULL;
}

rx_status drv_compile_options_set_dispatch(rx_compile_options *o, const char *library,
                                           int64_t min_rows) {
  if (!library || !strcmp(library, "none"))
    o->dispatch.library = RX_DISPATCH_NONE;
  else if (!strcmp(library, "cublas"))
    o->dispatch.library = RX_DISPATCH_CUBLAS;
  else
    return base_status_make(RX_ERR_INVALID, "dispatch library '%s': expected none or cublas",
                            library);
  if (min_rows < 0)
    return base_status_make(
        RX_ERR_INVALID, "dispatch threshold %lld: expected a row count >= 1 (0: the default %d)",
        (long long)min_rows, RX_DISPATCH_DEFAULT_MIN_ROWS);
  o->dispatch.min_rows = min_rows ? min_rows : RX_DISPATCH_DEFAULT_MIN_ROWS;
  return NULL;
}

/* The diagnostics of local as one status (the first error line), appended to user if given. */
static rx_status diag_status(rx_diag *local, rx_diag *user) {
  if (user) {
    base_strbuf_append(&user->text, rx_diag_text(local));
    user->errors += local->errors;
    user->warnings += local->warnings;
  }
  const char *t = rx_diag_text(local); /* no "error: ": the printer of the status adds it */
  return base_diag_status(RX_ERR_INVALID, t, strcspn(t, "\n"), "compilation failed");
}

/* Compiles m with options made from req into *r (free it in every case): for a file at path
 * (NULL: in memory) with its weights streamed, into weights_file when given. Warnings go to
 * diag; a failure is the status of its first error. */
static rx_status compile(rx_module *m, const rx_compile_request *req, const char *path,
                         const char *weights_file, rx_diag *diag, rx_compile_result *r) {
  memset(r, 0, sizeof *r);
  rx_compile_options o;
  memset(&o, 0, sizeof o);
  o.no_fuse = req->no_fuse;
  o.no_nvrtc = req->no_nvrtc;
  RX_RETURN_IF_ERROR(drv_compile_options_set_dispatch(&o, req->dispatch, req->dispatch_min_rows));
  o.weights_file = weights_file;
  o.artifact_path = path;
  o.stream_weights = path != NULL;
  RX_RETURN_IF_ERROR(drv_compile_options_set_targets(&o, req->targets));
  rx_diag local;
  base_diag_init(&local);
  rx_status st = NULL;
  if (drv_compile(m, &o, &local, r)) {
    if (diag) { /* warnings only */
      base_strbuf_append(&diag->text, rx_diag_text(&local));
      diag->warnings += local.warnings;
    }
  } else {
    st = diag_status(&local, diag);
  }
  base_diag_free(&local);
  return st;
}

rx_status rx_module_compile(rx_module *m, const rx_compile_request *req, rx_diag *diag,
                            unsigned char **out_bytes, size_t *out_len) {
  *out_bytes = NULL;
  *out_len = 0;
  if (!m || !req)
    return base_status_make(RX_ERR_INVALID, "rx_module_compile: no module or request");
  rx_compile_result r;
  rx_status st = compile(m, req, NULL, NULL, diag, &r);
  if (!st) {
    *out_bytes = r.artifact; /* heap memory: the caller frees it with rx_free */
    *out_len = r.artifact_len;
    r.artifact = NULL;
  }
  drv_compile_result_free(&r);
  return st;
}

rx_status rx_module_compile_to_file(rx_module *m, const rx_compile_request *req, const char *path,
                                    const char *weights_file, rx_diag *diag) {
  if (!m || !req || !path)
    return base_status_make(RX_ERR_INVALID,
                            "rx_module_compile_to_file: no module, request or path");
  rx_compile_result r;
  rx_status st = compile(m, req, path, weights_file, diag, &r);
  if (!st) st = drv_artifact_write(path, weights_file, m, &r);
  drv_compile_result_free(&r);
  return st;
}

rx_status rx_artifact_save(const char *path, const unsigned char *bytes, size_t len) {
  return drv_artifact_write_file(path, bytes, len);
}
