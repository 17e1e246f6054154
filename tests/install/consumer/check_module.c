/* check_module: the compiler's public API (relaxc/compiler.h) from outside relaxc's tree: parses
 * and checks the text IR of FILE and prints the module back, or the diagnostics. */
#include <relaxc/compiler.h>

#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
  if (argc != 2) return fprintf(stderr, "usage: check_module FILE.rx\n"), 2;
  FILE *f = fopen(argv[1], "rb");
  if (!f) return fprintf(stderr, "check_module: cannot open %s\n", argv[1]), 1;
  static char text[1 << 16];
  size_t len = fread(text, 1, sizeof text, f);
  fclose(f);
  rx_module *m = rx_module_new();
  rx_status s = rx_module_parse(m, argv[1], text, len, NULL);
  if (!s) s = rx_module_check(m, NULL);
  int rc = s != NULL;
  if (s) {
    fprintf(stderr, "%s\n", rx_status_message(s));
    rx_status_free(s);
  } else {
    char *out = rx_module_to_text(m);
    printf("relaxc %s:\n%s", rx_version_string(), out);
    rx_free(out);
  }
  rx_module_free(m);
  return rc;
}
