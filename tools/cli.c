/* Helpers shared by the subcommands of the relaxc command line. */
#include "commands.h"

#include "base/base.h"
#include "base/npy.h"

#ifdef RX_HAVE_ONNX
#include "frontends/onnx/onnx_import.h"
#endif

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

char *rx_cli_read_input(const char *path, size_t *out_len) {
  *out_len = 0;
  if (strcmp(path, "-") != 0) {
    char *text = NULL;
    rx_status st = rx_read_file(path, &text, out_len);
    if (st) {
      fprintf(stderr, "relaxc: error: %s\n", rx_status_message(st));
      rx_status_free(st);
      return NULL;
    }
    return text;
  }
  rx_strbuf b = {0};
  char buf[65536];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, stdin)) > 0) rx_strbuf_appendn(&b, buf, n);
  if (ferror(stdin)) {
    rx_strbuf_free(&b);
    fputs("relaxc: error: cannot read standard input\n", stderr);
    return NULL;
  }
  *out_len = b.len;
  return rx_strbuf_take(&b);
}

const char *rx_cli_input_name(const char *path) { return strcmp(path, "-") == 0 ? "<stdin>" : path; }

char *rx_cli_dir_of(const char *path) {
  if (!strcmp(path, "-")) return NULL;
  const char *slash = strrchr(path, '/');
  if (!slash) return rx_strdup(".");
  if (slash == path) return rx_strdup("/");
  return rx_strndup(path, (size_t)(slash - path));
}

bool rx_cli_is_onnx(const char *path, const char *bytes, size_t len) {
  size_t n = strlen(path);
  if (n > 5 && !strcmp(path + n - 5, ".onnx")) return true;
  if (!len) return false;
  unsigned char c = (unsigned char)bytes[0];
  return c < 0x20 && c != '\t' && c != '\n' && c != '\r' && c != '\f' && c != '\v';
}

bool rx_cli_make_dir(const char *dir) {
  char *p = rx_strdup(dir);
  int err = *p ? 0 : ENOENT;
  for (char *q = p + 1; !err; q++) { /* each prefix ending before a '/', then the whole path */
    if (*q && *q != '/') continue;
    char c = *q;
    *q = 0;
    if (mkdir(p, 0777) != 0 && errno != EEXIST) err = errno;
    *q = c;
    if (!c) break;
  }
  struct stat st;
  if (!err && (stat(p, &st) != 0 || !S_ISDIR(st.st_mode))) err = ENOTDIR;
  if (err) fprintf(stderr, "relaxc: error: cannot create directory '%s': %s\n", dir, strerror(err));
  free(p);
  return !err;
}

#ifdef RX_HAVE_ONNX
int rx_cli_write_onnx_weights(const char *in, const void *bytes, size_t len, const char *dir) {
  char *base = rx_cli_dir_of(in);
  rx_onnx_weight *w = NULL;
  int nw = 0;
  rx_status s = rx_onnx_weights(bytes, len, rx_cli_input_name(in), base, &w, &nw);
  free(base);
  if (!s && !rx_cli_make_dir(dir)) {
    rx_onnx_weights_free(w, nw);
    return 1;
  }
  for (int i = 0; i < nw && !s; i++) {
    rx_npy a = {w[i].dtype, w[i].ndim, {0}, w[i].data, w[i].nbytes};
    memcpy(a.shape, w[i].shape, (size_t)w[i].ndim * sizeof *a.shape);
    rx_strbuf path = {0};
    rx_strbuf_printf(&path, "%s/%s.npy", dir, w[i].name);
    s = rx_npy_write(path.data, &a);
    rx_strbuf_free(&path);
  }
  rx_onnx_weights_free(w, nw);
  if (s) {
    fprintf(stderr, "relaxc: error: %s\n", rx_status_message(s));
    rx_status_free(s);
    return 1;
  }
  return 0;
}
#endif
