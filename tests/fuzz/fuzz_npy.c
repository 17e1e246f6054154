/* tests/fuzz/fuzz_npy.c: libFuzzer harness of the .npy reader (base/npy.c). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/npy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  uint8_t *bytes = malloc(size ? size : 1);
  if (!bytes) return 0;
  if (size) memcpy(bytes, data, size);
  rx_npy a;
  rx_status s = base_npy_parse(bytes, size, "fuzz.npy", &a);
  if (!s) {
    /* what a reader promises: the data holds count elements of the dtype */
    if (a.nbytes != base_npy_count(&a) * base_npy_elem_size(a.dtype)) abort();
    volatile uint8_t sum = 0;
    for (size_t i = 0; i < a.nbytes; i++) sum += ((const uint8_t *)a.data)[i];
    (void)sum;
    base_npy_free(&a);
  }
  rx_status_free(s);
  free(bytes);
  return 0;
}
