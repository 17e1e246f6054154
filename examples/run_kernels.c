/* run_kernels: runs kernels emitted by `relaxc codegen` on the default device.
 *
 *   relaxc codegen examples/softmax.rx --target vulkan-lavapipe -o out/softmax
 *   run_kernels out/softmax softmax n=5 m=1000
 *
 * It loads the kernel description (kernels.json) and binaries from the directory, opens the
 * device named by RX_DEVICE (e.g. vulkan:0, cuda:0) or else the first backend present, makes
 * every input of the program with a deterministic pattern for the symbolic sizes given on the
 * command line, runs the program (each of its kernels whose condition holds: variants are
 * picked by the sizes), and prints the first values of every output and its sum.
 * Only the relaxc runtime is used: nothing of the compiler. f32 buffers only. */
#include <relaxc/runtime.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_PARAMS 16
#define MAX_SYMS   8

static int fail(rx_status s) {
  fprintf(stderr, "run_kernels: %s\n", rx_status_message(s));
  rx_status_free(s);
  return 1;
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: run_kernels DIR PROGRAM NAME=VALUE...\n"
                    "  DIR      a directory written by `relaxc codegen ... -o DIR`\n"
                    "  PROGRAM  the tensor program to run\n"
                    "  n=5      a value for each symbolic size of the program\n");
    return 2;
  }
  const char *names[MAX_SYMS];
  int64_t values[MAX_SYMS];
  size_t nsyms = 0;
  for (int i = 3; i < argc && nsyms < MAX_SYMS; i++) {
    char *eq = strchr(argv[i], '=');
    if (!eq) {
      fprintf(stderr, "run_kernels: expected NAME=VALUE, got '%s'\n", argv[i]);
      return 2;
    }
    *eq = 0;
    names[nsyms] = argv[i];
    values[nsyms++] = strtoll(eq + 1, NULL, 10);
  }
  rx_rt_symbols syms = {.names = names, .values = values, .count = nsyms};

  rx_rt_device *dev = NULL;
  rx_rt_library *lib = NULL;
  rx_status s = rx_rt_device_open(NULL, NULL, &dev); /* RX_DEVICE, or the first backend present */
  if (s) return fail(s);
  printf("device: %s (%s)\n", rx_rt_device_get_info(dev)->name,
         rx_rt_backend_name(rx_rt_device_get_info(dev)->backend));
  if ((s = rx_rt_library_load(dev, argv[1], &lib))) {
    rx_rt_device_release(dev);
    return fail(s);
  }

  rx_rt_program_param params[MAX_PARAMS];
  size_t nparams = 0;
  rx_rt_buffer *bufs[MAX_PARAMS] = {0};
  float *host[MAX_PARAMS] = {0};
  size_t count[MAX_PARAMS] = {0};
  s = rx_rt_library_program_params(lib, argv[2], params, MAX_PARAMS, &nparams);
  if (!s && nparams > MAX_PARAMS) {
    fprintf(stderr, "run_kernels: '%s' has %zu parameters; this example takes at most %d\n",
            argv[2], nparams, MAX_PARAMS);
    nparams = 0;
    s = rx_rt_device_synchronize(dev); /* nothing to run; fall through to the clean-up */
  }
  /* allocate every buffer for the sizes given; inputs get a deterministic pattern */
  for (size_t i = 0; !s && i < nparams; i++) {
    if (!params[i].is_buffer) continue;
    if (!params[i].dtype || strcmp(params[i].dtype, "f32") != 0) {
      fprintf(stderr, "run_kernels: parameter '%s' is %s; this example handles f32 only\n",
              params[i].name, params[i].dtype ? params[i].dtype : "?");
      rx_rt_library_release(lib);
      rx_rt_device_release(dev);
      return 1;
    }
    count[i] = 1;
    for (size_t d = 0; !s && d < params[i].rank; d++) {
      int64_t extent = 0;
      s = rx_rt_eval(params[i].shape[d], &syms, &extent);
      count[i] *= (size_t)(extent > 0 ? extent : 0);
    }
    if (s) break;
    host[i] = calloc(count[i] ? count[i] : 1, sizeof(float));
    for (size_t k = 0; !params[i].output && k < count[i]; k++)
      host[i][k] = (float)((k * 7 + i * 3) % 23) / 23.0f - 0.5f;
    s = rx_rt_buffer_alloc(dev, (count[i] ? count[i] : 1) * sizeof(float), &bufs[i]);
    if (!s && count[i]) s = rx_rt_buffer_write(bufs[i], 0, host[i], count[i] * sizeof(float));
  }
  if (!s) s = rx_rt_library_run(lib, argv[2], bufs, nparams, &syms);
  if (!s) s = rx_rt_device_synchronize(dev);
  for (size_t i = 0; !s && i < nparams; i++) {
    if (!params[i].is_buffer || !params[i].output) continue;
    if (count[i]) s = rx_rt_buffer_read(bufs[i], 0, host[i], count[i] * sizeof(float));
    if (s) break;
    double sum = 0;
    printf("%s[%zu]:", params[i].name, count[i]);
    for (size_t k = 0; k < count[i]; k++) {
      sum += host[i][k];
      if (k < 8) printf(" %.6f", host[i][k]);
    }
    printf("%s\n%s: sum %.4f\n", count[i] > 8 ? " ..." : "", params[i].name, sum);
  }
  for (size_t i = 0; i < nparams; i++) {
    rx_rt_buffer_release(bufs[i]);
    free(host[i]);
  }
  rx_rt_library_release(lib);
  rx_rt_device_release(dev);
  return s ? fail(s) : 0;
}
