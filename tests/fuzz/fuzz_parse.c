/* tests/fuzz/fuzz_parse.c: libFuzzer harness of the text format: parse, then normalize + verify
 * (rx_module_check) and print what was accepted. The text is copied to a buffer of exactly its
 * length (no NUL after it), so a read past the end is an ASan report. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "relaxc/compiler.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *text = malloc(size ? size : 1);
  if (!text) return 0;
  if (size) memcpy(text, data, size);
  rx_module *m = rx_module_new();
  rx_diag *diag = rx_diag_create();
  rx_status s = rx_module_parse(m, "fuzz.rx", text, size, diag);
  if (!s) s = rx_module_check(m, diag);
  if (!s) rx_free(rx_module_to_text(m));
  rx_status_free(s);
  (void)rx_diag_text(diag);
  rx_diag_destroy(diag);
  rx_module_free(m);
  free(text);
  return 0;
}
