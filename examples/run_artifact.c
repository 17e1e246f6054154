/* run_artifact: loads a compiled model and runs one of its functions through the runtime's public
 * API alone (docs/install.md). Every parameter gets an f32 tensor of N elements holding 0, 0.5,
 * 1, ...; the result, an f32 tensor, is printed. RX_DEVICE names the device (default: vulkan).
 *   relaxc compile model.rx --target vulkan -o model.rxm && run_artifact model.rxm main 7 */
#include <relaxc/runtime.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TRY(call)                                                                                  \
  do {                                                                                             \
    rx_status s_ = (call);                                                                         \
    if (s_) return fprintf(stderr, "run_artifact: %s\n", rx_status_message(s_)), 1;                \
  } while (0)

int main(int argc, char **argv) {
  if (argc != 4) return fprintf(stderr, "usage: run_artifact MODEL.rxm FUNCTION N\n"), 2;
  int64_t n = atoll(argv[3]);
  const char *spec = getenv("RX_DEVICE") ? getenv("RX_DEVICE") : "vulkan";
  rx_rt_device *dev = NULL;
  rx_rt_artifact *model = NULL;
  TRY(rx_rt_device_open(spec, NULL, &dev));
  TRY(rx_rt_artifact_load(dev, argv[1], &model));
  size_t fn = 0, np; /* the function's index, then its parameter count (0: no such function) */
  while (fn < rx_rt_artifact_function_count(model) &&
         strcmp(rx_rt_artifact_function_name(model, fn), argv[2]))
    fn++;
  np = rx_rt_artifact_function_param_count(model, fn);
  float *x = calloc((size_t)n + 1, sizeof *x), *y = calloc((size_t)n + 1, sizeof *y);
  rx_rt_tensor **in = calloc(np + 1, sizeof *in);
  for (int64_t i = 0; i < n; i++) x[i] = 0.5f * (float)i;
  for (size_t p = 0; p < np; p++) TRY(rx_rt_tensor_from_host(dev, RX_DTYPE_F32, 1, &n, x, &in[p]));
  rx_rt_value *result = NULL;
  TRY(rx_rt_vm_call(model, argv[2], in, np, &result));
  rx_rt_tensor *out = rx_rt_value_tensor(result);
  if (!out || rx_rt_tensor_dtype(out) != RX_DTYPE_F32 || rx_rt_tensor_bytes(out) > n * sizeof *y)
    return fprintf(stderr, "run_artifact: %s does not return f32[<= %s]\n", argv[2], argv[3]), 1;
  TRY(rx_rt_tensor_read(out, y, rx_rt_tensor_bytes(out)));
  printf("%s(%s) on %s, relaxc %s:", argv[2], argv[3], spec, rx_version_string());
  for (size_t i = 0; i < rx_rt_tensor_bytes(out) / sizeof *y; i++) printf(" %.9g", y[i]);
  printf("\n");
  for (size_t p = 0; p < np; p++) rx_rt_tensor_release(in[p]);
  rx_rt_value_release(result);
  rx_rt_artifact_release(model);
  rx_rt_device_release(dev);
  free(x), free(y), free(in);
  return 0;
}
