/* tests/fuzz/fuzz_safetensors.c: libFuzzer harness of the safetensors reader
 * (base/safetensors.c). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  uint8_t *bytes = malloc(size ? size : 1);
  if (!bytes) return 0;
  if (size) memcpy(bytes, data, size);
  rx_st_file f;
  rx_status s = base_st_parse(bytes, size, "fuzz.safetensors", &f);
  if (!s) {
    /* what the reader promises: every tensor lies inside the data and holds its shape */
    volatile uint8_t sum = 0;
    for (size_t i = 0; i < f.ntensors; i++) {
      const rx_st_tensor *t = &f.tensors[i];
      if (t->offset > f.data_size || t->size > f.data_size - t->offset) abort();
      if (base_st_find(&f, t->name) == NULL) abort();
      if (t->f8_e4m3 && t->dtype != RX_DTYPE_U8) abort(); /* FP8 bytes are U8 to everyone else */
      for (uint64_t k = 0; k < t->size; k++) sum += f.data[t->offset + k];
    }
    (void)sum;
    base_st_free(&f);
  }
  rx_status_free(s);
  free(bytes);
  return 0;
}
