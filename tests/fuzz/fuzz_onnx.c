/* tests/fuzz/fuzz_onnx.c: libFuzzer harness of the ONNX importer: the bytes of an .onnx file
 * imported into a module (normalized and verified when accepted), and its weights read; the same
 * bytes read as a TensorProto file too (onnx_tensor_file: the node tests' input_N.pb).
 * External data is looked up in a directory that does not exist, so no file is ever read. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "frontends/onnx/onnx_import.h"
#include "relaxc/compiler.h"

#define NO_DIR "/nonexistent-relaxc-fuzz-dir"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  uint8_t *bytes = malloc(size ? size : 1);
  if (!bytes) return 0;
  if (size) memcpy(bytes, data, size);
  rx_module *m = rx_module_new();
  rx_status s = onnx_import(m, bytes, size, "fuzz.onnx", NO_DIR, NULL);
  if (!s) s = rx_module_check(m, NULL);
  if (!s) rx_free(rx_module_to_text(m));
  rx_status_free(s);
  rx_module_free(m);
  rx_onnx_weight *w = NULL;
  int n = 0;
  s = onnx_weights(bytes, size, "fuzz.onnx", NO_DIR, &w, &n);
  if (!s) onnx_weights_free(w, n);
  rx_status_free(s);
  rx_onnx_weight t;
  s = onnx_tensor_file(bytes, size, "fuzz.pb", &t);
  if (!s) {
    free(t.name);
    free(t.data);
  }
  rx_status_free(s);
  free(bytes);
  return 0;
}
