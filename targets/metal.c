/* toolchains: Metal Shading Language to a metallib with Apple's command-line tools.
 *
 *   xcrun -sdk macosx metal -std=metal3.1 -c NAME.metal -o NAME.air
 *   xcrun -sdk macosx metallib NAME.air -o NAME.metallib
 *
 * Only macOS has them; elsewhere the call says so (tests skip, and MSL is checked by the CPU
 * SIMT emulation instead). */
#include "toolchain.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__APPLE__)

static char *in_dir(const char *dir, const char *file) {
  size_t n = strlen(dir) + strlen(file) + 2;
  char *p = base_malloc(n);
  strcpy(p, dir);
  strcat(p, "/");
  strcat(p, file);
  return p;
}

/* Runs argv; a failure to start is a status, a nonzero exit is RX_ERR_INVALID with the output.
 * The output is appended to log either way. */
static rx_status step(char *const argv[], const char *what, const char *name, rx_strbuf *log) {
  char *output = NULL;
  int code = 0;
  rx_status st = tgt_tc_run(argv, &output, &code);
  if (st) {
    return base_status_annotate(
        st, "%s (%s needs the Xcode command line tools: xcode-select --install)", name, what);
  }
  base_strbuf_append(log, output);
  if (code != 0)
    st = base_status_make(RX_ERR_INVALID, "%s failed for %s (exit %d):\n%s", what, name, code,
                          output);
  free(output);
  return st;
}

rx_status tgt_metal_compile(const char *msl, const char *name, char **out_lib, size_t *out_len,
                            char **out_log) {
  *out_lib = NULL;
  *out_len = 0;
  if (out_log) *out_log = NULL;
  if (!name) name = "kernel.metal";
  char *dir = NULL;
  RX_RETURN_IF_ERROR(tgt_tc_temp_dir(&dir));
  char *src = in_dir(dir, "kernel.metal");
  char *air = in_dir(dir, "kernel.air");
  char *lib = in_dir(dir, "kernel.metallib");
  rx_strbuf log = {0};
  rx_status st = tgt_tc_write_file(src, msl, strlen(msl));
  if (!st) {
    char *argv[] = {"xcrun", "-sdk", "macosx", "metal", "-std=metal3.1",
                    "-c",    src,    "-o",     air,     NULL};
    st = step(argv, "xcrun metal", name, &log);
  }
  if (!st) {
    char *argv[] = {"xcrun", "-sdk", "macosx", "metallib", air, "-o", lib, NULL};
    st = step(argv, "xcrun metallib", name, &log);
  }
  if (!st) {
    FILE *f = fopen(lib, "rb");
    if (!f) {
      st = base_status_make(RX_ERR_IO, "%s: xcrun metallib wrote no %s", name, lib);
    } else {
      rx_strbuf bin = {0};
      char buf[8192];
      size_t n;
      while ((n = fread(buf, 1, sizeof buf, f)) > 0) base_strbuf_appendn(&bin, buf, n);
      fclose(f);
      *out_len = bin.len;
      *out_lib = base_strbuf_take(&bin);
    }
  }
  if (out_log)
    *out_log = base_strbuf_take(&log);
  else
    base_strbuf_free(&log);
  tgt_tc_remove_dir(dir);
  free(src);
  free(air);
  free(lib);
  free(dir);
  return st;
}

#else

rx_status tgt_metal_compile(const char *msl, const char *name, char **out_lib, size_t *out_len,
                            char **out_log) {
  (void)msl;
  *out_lib = NULL;
  *out_len = 0;
  if (out_log) *out_log = NULL;
  return base_status_make(RX_ERR_UNSUPPORTED,
                          "cannot compile %s: xcrun metal is only available on macOS",
                          name ? name : "MSL");
}

#endif
