/* Robustness of the front end: every .rx file under tests/ is parsed, normalized, verified and
 * printed after truncation at many lengths and after random mutations (byte flips, deletions,
 * duplicated slices, spliced tokens). Nothing may crash, hang or leak; the ASan+UBSan build
 * of CI runs this same test. Where a mutated input is accepted, its print must parse again
 * and print identically (the round trip holds for everything the front end accepts).
 *
 * usage: test_fuzz_parser TESTS_DIR   (RX_SEED and RX_FUZZ_ITERS override the defaults) */
#include "base/base.h"
#include "ir/ir.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static int passed, failed;

static uint64_t rng_state = 0x853c49e6748fea9bull;
static uint64_t rnd(void) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return rng_state;
}

/* Pieces of the language, spliced into inputs to reach deeper into the parser. */
static const char *dict[] = {
    "graph_fn",
    "tensor_fn",
    "extern_fn",
    "dataflow",
    "return",
    "match_cast",
    "call_tensor",
    "call_extern",
    "if",
    "else",
    "for",
    "reduce",
    "init",
    "update",
    "let",
    "alloc",
    "barrier",
    "where",
    "out",
    "prim(",
    "const(",
    "f32[",
    "f16[n, 4]",
    "[ndim=2]",
    "[...]",
    "Shape(",
    "Prim(",
    "Object",
    "(",
    ")",
    "[",
    "]",
    "{",
    "}",
    ",",
    ":",
    "=",
    "->",
    "..",
    "//",
    "%",
    "9223372036854775807",
    "-9223372036854775808",
    "99999999999999999999",
    "1e400",
    "0.5",
    "\"",
    "#",
    "\n",
    "n",
    "m * 4",
    "bind(threadIdx.x)",
    "bind(blockIdx.z)",
    "unroll",
    ".0",
    "matmul(",
    "reshape(",
    "add(",
    "sum(",
    "axes=[1, 0]",
    "keepdims=true",
    "x",
    "y",
};

/* Parses, normalizes, verifies and prints text; returns the print or NULL when rejected. */
static char *front_end(const char *name, const char *text, size_t len) {
  rx_module *m = rx_module_new();
  rx_diag diag;
  base_diag_init(&diag);
  char *printed = NULL;
  if (ir_parse_module(m, name, text, len, &diag) && ops_module_normalize(m, &diag) &&
      ir_module_verify(m, &diag)) {
    rx_strbuf out = {0};
    ir_module_print(&out, m);
    printed = base_strbuf_take(&out);
  }
  /* the diagnostics must be renderable whatever happened */
  (void)strlen(rx_diag_text(&diag));
  base_diag_free(&diag);
  rx_module_free(m);
  return printed;
}

static void check_input(const char *name, const char *text, size_t len) {
  char *p1 = front_end(name, text, len);
  if (p1) {
    char *p2 = front_end("<reprint>", p1, strlen(p1));
    if (!p2 || strcmp(p1, p2) != 0) {
      failed++;
      fprintf(stderr,
              "FAIL: %s: an accepted input does not round-trip:\n--- input\n%.*s\n"
              "--- first print\n%s\n--- second print\n%s\n",
              name, (int)len, text, p1, p2 ? p2 : "(rejected)");
      free(p1);
      free(p2);
      return;
    }
    free(p2);
    free(p1);
  }
  passed++;
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
  /* truncations: every length for small files, a spread of lengths otherwise */
  size_t step = len / 400 + 1;
  for (size_t n = 0; n < len; n += step) {
    char *t = base_strndup(text, n); /* a separate allocation so ASan sees reads past the end */
    check_input(path, t, n);
    free(t);
  }
  /* mutations */
  for (int it = 0; it < iters; it++) {
    rx_strbuf b = {0};
    base_strbuf_appendn(&b, text, len);
    int edits = 1 + (int)(rnd() % 4);
    for (int e = 0; e < edits && b.len > 0; e++) {
      size_t at = rnd() % b.len;
      switch (rnd() % 5) {
      case 0:
        b.data[at] = (char)(rnd() & 0xff);
        break;  /* flip a byte */
      case 1: { /* delete a slice */
        size_t n = 1 + rnd() % 16;
        if (at + n > b.len) n = b.len - at;
        memmove(b.data + at, b.data + at + n, b.len - at - n + 1);
        b.len -= n;
        break;
      }
      case 2:   /* duplicate a slice */
      case 3: { /* splice a token */
        rx_strbuf c = {0};
        base_strbuf_appendn(&c, b.data, at);
        if (e % 2) {
          size_t from = rnd() % b.len, n = 1 + rnd() % 40;
          if (from + n > b.len) n = b.len - from;
          base_strbuf_appendn(&c, b.data + from, n);
        } else {
          base_strbuf_append(&c, dict[rnd() % RX_ARRAY_LEN(dict)]);
        }
        base_strbuf_appendn(&c, b.data + at, b.len - at);
        base_strbuf_free(&b);
        b = c;
        break;
      }
      default: /* deep nesting */
        if (it % 50 == 0) {
          rx_strbuf c = {0};
          base_strbuf_appendn(&c, b.data, at);
          for (int k = 0; k < 2000; k++) base_strbuf_putc(&c, "([{"[rnd() % 3]);
          base_strbuf_appendn(&c, b.data + at, b.len - at);
          base_strbuf_free(&b);
          b = c;
        }
      }
    }
    check_input(path, b.data ? b.data : "", b.len);
    base_strbuf_free(&b);
  }
  free(text);
}

static void walk(const char *dir, rx_ptrvec *files) {
  DIR *d = opendir(dir);
  if (!d) return;
  struct dirent *e;
  while ((e = readdir(d))) {
    if (e->d_name[0] == '.') continue;
    char *path = base_malloc(strlen(dir) + strlen(e->d_name) + 2);
    sprintf(path, "%s/%s", dir, e->d_name);
    struct stat st;
    size_t n = strlen(path);
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
      walk(path, files);
      free(path);
    } else if (n > 3 && strcmp(path + n - 3, ".rx") == 0) {
      base_ptrvec_push(files, path);
    } else {
      free(path);
    }
  }
  closedir(d);
}

static int cmp_str(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

int main(int argc, char **argv) {
  const char *dir = argc > 1 ? argv[1] : "tests";
  const char *seed = getenv("RX_SEED"), *iters_env = getenv("RX_FUZZ_ITERS");
  if (seed) rng_state = strtoull(seed, NULL, 0) | 1;
  int iters = iters_env ? atoi(iters_env) : 150;
  rx_ptrvec files = {0};
  walk(dir, &files);
  if (files.len > 1) qsort(files.data, files.len, sizeof *files.data, cmp_str);
  if (files.len == 0) {
    fprintf(stderr, "FAIL: no .rx files under %s\n", dir);
    return 1;
  }
  for (size_t i = 0; i < files.len; i++) {
    fuzz_file(files.data[i], iters);
    free(files.data[i]);
  }
  printf("fuzz: %zu files, %d inputs\n", files.len, passed + failed);
  printf("fuzz: %d passed, %d failed\n", passed, failed);
  base_ptrvec_free(&files);
  return failed ? 1 : 0;
}
