/* Robustness of the ONNX importer: every .onnx file of tests/onnx is imported after truncation at
 * many lengths and after random mutations (byte flips, deleted and duplicated slices). Nothing
 * may crash, hang or leak (CI runs this in the ASan+UBSan build too); an import that succeeds
 * must leave a module that normalizes, verifies and prints. Weight extraction gets the same
 * inputs.
 *
 * usage: test_fuzz_onnx TESTS_DIR   (RX_SEED and RX_FUZZ_ITERS override the defaults) */
#include "base/base.h"
#include "ir/ir.h"

#ifdef RX_HAVE_ONNX
#include "frontends/onnx/onnx_import.h"
#endif

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef RX_HAVE_ONNX
static int passed, failed, accepted;

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint64_t rnd(void) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return rng_state;
}

static void check_input(const char *name, const unsigned char *bytes, size_t len) {
  /* a separate allocation of exactly len bytes, so ASan sees any read past the end */
  unsigned char *copy = base_malloc(len ? len : 1);
  if (len) memcpy(copy, bytes, len);
  rx_module *m = rx_module_new();
  rx_diag diag;
  base_diag_init(&diag);
  rx_status s = onnx_import(m, copy, len, name, NULL, &diag);
  if (!s) {
    accepted++;
    if (!ops_module_normalize(m, &diag) || !ir_module_verify(m, &diag)) {
      failed++;
      fprintf(stderr, "FAIL: %s (%zu bytes): imported, but the module does not check:\n%s\n", name,
              len, rx_diag_text(&diag));
    } else {
      rx_strbuf out = {0};
      ir_module_print(&out, m);
      base_strbuf_free(&out);
      passed++;
    }
  } else {
    if (!*rx_status_message(s)) {
      failed++;
      fprintf(stderr, "FAIL: %s (%zu bytes): rejected without a message\n", name, len);
    } else {
      passed++;
    }
    rx_status_free(s);
  }
  rx_onnx_weight *w = NULL;
  int nw = 0;
  rx_status ws = onnx_weights(copy, len, name, NULL, &w, &nw);
  if (!ws) onnx_weights_free(w, nw);
  rx_status_free(ws);
  base_diag_free(&diag);
  rx_module_free(m);
  free(copy);
}

static void fuzz_file(const char *path, int iters) {
  char *text;
  size_t len;
  rx_status s = base_read_file(path, &text, &len);
  if (s) {
    failed++;
    fprintf(stderr, "FAIL: %s\n", rx_status_message(s));
    rx_status_free(s);
    return;
  }
  const unsigned char *bytes = (const unsigned char *)text;
  size_t step = len / 300 + 1;
  for (size_t n = 0; n < len; n += step) check_input(path, bytes, n);
  for (int it = 0; it < iters; it++) {
    rx_strbuf b = {0};
    base_strbuf_appendn(&b, text, len);
    int edits = 1 + (int)(rnd() % 4);
    for (int e = 0; e < edits && b.len > 0; e++) {
      size_t at = rnd() % b.len;
      switch (rnd() % 3) {
      case 0:
        b.data[at] = (char)(rnd() & 0xff);
        break;
      case 1: {
        size_t n = 1 + rnd() % 16;
        if (at + n > b.len) n = b.len - at;
        memmove(b.data + at, b.data + at + n, b.len - at - n + 1);
        b.len -= n;
        break;
      }
      default: {
        rx_strbuf c = {0};
        size_t from = rnd() % b.len, n = 1 + rnd() % 40;
        if (from + n > b.len) n = b.len - from;
        base_strbuf_appendn(&c, b.data, at);
        base_strbuf_appendn(&c, b.data + from, n);
        base_strbuf_appendn(&c, b.data + at, b.len - at);
        base_strbuf_free(&b);
        b = c;
      }
      }
    }
    check_input(path, (const unsigned char *)(b.data ? b.data : ""), b.len);
    base_strbuf_free(&b);
  }
  free(text);
}

int main(int argc, char **argv) {
  const char *dir = argc > 1 ? argv[1] : "tests";
  const char *seed = getenv("RX_SEED"), *iters_env = getenv("RX_FUZZ_ITERS");
  if (seed) rng_state = strtoull(seed, NULL, 0) | 1;
  int iters = iters_env ? atoi(iters_env) : 2000;
  char odir[1024];
  snprintf(odir, sizeof odir, "%s/onnx", dir);
  DIR *d = opendir(odir);
  int files = 0;
  struct dirent *e;
  while (d && (e = readdir(d))) {
    size_t n = strlen(e->d_name);
    if (n < 6 || strcmp(e->d_name + n - 5, ".onnx") != 0) continue;
    char path[1400];
    snprintf(path, sizeof path, "%s/%s", odir, e->d_name);
    fuzz_file(path, iters);
    files++;
  }
  if (d) closedir(d);
  if (files == 0) {
    failed++;
    fprintf(stderr, "FAIL: no .onnx files in %s\n", odir);
  }
  printf("fuzz_onnx: %d files, %d inputs, %d imported\n", files, passed + failed, accepted);
  printf("fuzz_onnx: %d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
#else
int main(void) {
  printf("fuzz_onnx: ONNX support was not built (protobuf-c-compiler, libprotobuf-c-dev, "
         "libonnx-dev missing)\n");
  printf("fuzz_onnx: 0 passed, 0 failed, 1 skipped\n");
  return 77;
}
#endif
