/* tests/fuzz/fuzz_artifact.c: libFuzzer harness of the artifact loader (runtime/artifact.c,
 * runtime/weights.c). The section CRCs of the mutated image are recomputed first, so mutations
 * reach the section parsers (manifest.json and its weight bindings, vulkan/kernels.json,
 * host.rxvm, the SPIR-V sections, weights.safetensors). Loaded twice: for inspection (no device;
 * the accessors, the weights' among them, and the disassembler run over it) and on the fuzz
 * device (fuzz_device.h: kernels are checked and "created", weights uploaded, without a GPU),
 * where each function is called with no arguments: the weights bound to its parameters, or a
 * count error. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_device.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  uint8_t *img = malloc(size ? size : 1);
  if (!img) return 0;
  if (size) memcpy(img, data, size);
  fz_fix_crcs(img, size);
  rx_rt_artifact *a = NULL;
  rx_status s = rx_rt_artifact_load_memory(NULL, img, size, "fuzz.rxm", &a);
  if (!s) {
    (void)rx_rt_artifact_targets(a);
    for (size_t f = 0; f < rx_rt_artifact_function_count(a); f++) {
      rx_rt_param_info info;
      for (size_t p = 0; p < rx_rt_artifact_function_param_count(a, f); p++)
        (void)rx_rt_artifact_function_param(a, f, p, &info);
      rx_rt_string_free(rx_rt_artifact_disassemble(a, f));
      for (size_t p = 0; p < rx_rt_artifact_function_param_count(a, f); p++)
        (void)rx_rt_artifact_param_weight(a, f, p, NULL);
    }
    rx_rt_weight_info w;
    for (size_t i = 0; i < rx_rt_artifact_weight_count(a); i++)
      (void)rx_rt_artifact_weight(a, i, &w);
    (void)rx_rt_artifact_weights_file(a);
    rx_rt_artifact_release(a);
  }
  rx_status_free(s);
  rx_rt_device *d = fz_device_new();
  if (d) {
    s = rx_rt_artifact_load_memory(d, img, size, "fuzz.rxm", &a);
    for (size_t f = 0; !s && f < rx_rt_artifact_function_count(a); f++) {
      rx_rt_value *r = NULL;
      rx_status_free(rx_rt_vm_call_values(a, rx_rt_artifact_function_name(a, f), NULL, 0, &r));
      rx_rt_value_release(r);
    }
    if (!s) rx_rt_artifact_release(a);
    rx_status_free(s);
    rx_rt_device_release(d);
  }
  free(img);
  return 0;
}
