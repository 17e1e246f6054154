/* The public compile entry point (include/relaxc/compiler.h): an embedder parses a module and
 * compiles it into an artifact with the public headers alone (this file includes nothing
 * else), then runs it with the runtime (relaxc/runtime.h) on Vulkan (lavapipe in CI) at several
 * values of the symbolic length, checked against a reference computed here. Errors (a bad
 * target, a module that does not type-check) come back as statuses that name the problem.
 *
 * rx_module_import: a Hugging Face folder (the tiny Llama of tests/llm/models/kjv-llama) and a .rx
 * file imported and compiled through the public API; its errors named.
 *
 * usage: test_compile_api [TESTS_DIR] */
/* test-needs: runtime */
#include "check.h"
#include "relaxc/compiler.h"
#include "relaxc/runtime.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* y = silu(x) * w + x over a symbolic length n: two fusable ops and a residual */
static const char *const program = "graph_fn main(x: f32[n, 7], w: f32[7]) -> f32[n, 7]\n"
                                   "    where n <= 4096 {\n"
                                   "  dataflow {\n"
                                   "    s = silu(x)\n"
                                   "    t = multiply(s, w)\n"
                                   "    y = add(t, x)\n"
                                   "  }\n"
                                   "  return y\n"
                                   "}\n";

/* Parses program and compiles it for targets; the artifact bytes or NULL (status in *out_st). */
static unsigned char *compile(const char *text, const char *targets, rx_status *out_st,
                              size_t *out_len, int *out_errors) {
  rx_module *m = rx_module_new();
  rx_diag *d = rx_diag_create();
  unsigned char *bytes = NULL;
  rx_status st = rx_module_parse(m, "api.rx", text, strlen(text), d);
  if (!st) {
    rx_compile_request req = {.targets = targets};
    st = rx_module_compile(m, &req, d, &bytes, out_len);
  }
  *out_errors = rx_diag_error_count(d);
  *out_st = st;
  rx_diag_destroy(d);
  rx_module_free(m);
  return bytes;
}

/* Runs main of the artifact at length n on d and compares with the reference. */
static void run_at(rx_rt_artifact *a, rx_rt_device *d, int64_t n) {
  float *x = malloc(sizeof(float) * (size_t)(n * 7)), w[7],
        *y = malloc(sizeof(float) * (size_t)(n * 7));
  for (int64_t i = 0; i < n * 7; i++) x[i] = (float)((i * 37) % 23) / 5.0f - 2.0f;
  for (int j = 0; j < 7; j++) w[j] = 0.25f * (float)(j + 1);
  int64_t xs[2] = {n, 7}, ws[1] = {7};
  rx_rt_tensor *in[2] = {NULL, NULL};
  rx_rt_value *out = NULL;
  rx_status st = rx_rt_tensor_from_host(d, RX_DTYPE_F32, 2, xs, x, &in[0]);
  if (!st) st = rx_rt_tensor_from_host(d, RX_DTYPE_F32, 1, ws, w, &in[1]);
  if (!st) st = rx_rt_vm_call(a, "main", in, 2, &out);
  if (!st) st = rx_rt_tensor_read(rx_rt_value_tensor(out), y, sizeof(float) * (size_t)(n * 7));
  CHECK_MSG(!st, "n=%lld: %s", (long long)n, rx_status_message(st));
  double worst = 0;
  for (int64_t i = 0; !st && i < n * 7; i++) {
    double v = x[i], want = v / (1.0 + exp(-v)) * w[i % 7] + v;
    double err = fabs(y[i] - want) / (1.0 + fabs(want));
    if (err > worst) worst = err;
  }
  CHECK_MSG(!st && worst < 1e-5, "n=%lld: worst relative error %g (tolerance 1e-5)", (long long)n,
            worst);
  rx_status_free(st);
  rx_rt_value_release(out);
  rx_rt_tensor_release(in[0]);
  rx_rt_tensor_release(in[1]);
  free(x);
  free(y);
}

/* rx_module_import of a model folder and a program file, and its errors. */
static void test_import(const char *tests) {
  char path[4096];
  rx_module *m = rx_module_new();
  snprintf(path, sizeof path, "%s/llm/models/kjv-llama", tests);
  rx_status st = rx_module_import(m, path, NULL, NULL);
  CHECK_MSG(!st, "import %s: %s", path, rx_status_message(st));
  rx_status_free(st);
  unsigned char *bytes = NULL;
  size_t len = 0;
  rx_compile_request req = {.targets = "vulkan"};
  if (!st) {
    st = rx_module_compile(m, &req, NULL, &bytes, &len);
    CHECK_MSG(!st, "compile the imported model: %s", rx_status_message(st));
    rx_status_free(st);
  }
  rx_rt_artifact *a = NULL;
  if (bytes) CHECK_OK(rx_rt_artifact_load_memory(NULL, bytes, len, "kjv.rxm", &a));
  if (a) { /* prefill, decode and the KV cache's constructor */
    CHECK_MSG(rx_rt_artifact_function_count(a) == 3, "%zu functions",
              rx_rt_artifact_function_count(a));
    CHECK(rx_rt_artifact_weight_count(a) > 0);
  }
  rx_rt_artifact_release(a);
  rx_free(bytes);
  rx_module_free(m);
  /* a .rx file */
  m = rx_module_new();
  snprintf(path, sizeof path, "%s/../examples/mlp.rx", tests);
  CHECK_OK(rx_module_import(m, path, NULL, NULL));
  rx_import_options o = {.dtype = RX_DTYPE_F32};
  rx_module_free(m);
  m = rx_module_new();
  CHECK_ERR(rx_module_import(m, path, &o, NULL), RX_ERR_INVALID,
            "are for a Hugging Face model folder or a GGUF file");
  snprintf(path, sizeof path, "%s/llm", tests);
  CHECK_ERR(rx_module_import(m, path, NULL, NULL), RX_ERR_INVALID, "without config.json");
  snprintf(path, sizeof path, "%s/no/such.onnx", tests);
  CHECK_ERR(rx_module_import(m, path, NULL, NULL), RX_ERR_NOT_FOUND, "such.onnx");
  CHECK_ERR(rx_module_import(m, NULL, NULL, NULL), RX_ERR_INVALID, "NULL path");
  rx_module_free(m);
}

int main(int argc, char **argv) {
  if (argc > 1) test_import(argv[1]);
  rx_status st;
  size_t len = 0;
  int errors = 0;

  /* errors: a bad target, a module that does not type-check */
  unsigned char *bad = compile(program, "vulkan,nosuchgpu", &st, &len, &errors);
  CHECK_MSG(!bad && st && strstr(rx_status_message(st), "nosuchgpu"), "bad target: %s",
            rx_status_message(st));
  rx_status_free(st);
  bad = compile("graph_fn main(x: f32[n]) -> f32[n] {\n  y = matmul(x, x)\n  return y\n}\n",
                "vulkan", &st, &len, &errors);
  CHECK_MSG(!bad && st && errors > 0 && strstr(rx_status_message(st), "does not match"),
            "a type error is an error status naming it (errors %d): %s", errors,
            rx_status_message(st));
  /* a status carries no level: the CLI prints "relaxc: error: " once (it printed "error: error:")
   */
  CHECK_MSG(st && !strstr(rx_status_message(st), "error: "), "a level in the status: %s",
            rx_status_message(st));
  rx_status_free(st);
  rx_module *pm = rx_module_new();
  st = rx_module_parse(pm, "t.rx", "graph_fn main(x f32) {}\n", 24, NULL);
  CHECK_MSG(st && !strncmp(rx_status_message(st), "t.rx:1:", 7) &&
                !strstr(rx_status_message(st), "error: "),
            "a parse error: the place, then the message without a level: %s",
            rx_status_message(st));
  rx_status_free(st);
  rx_module_free(pm);

  /* the artifact, for every target at once */
  unsigned char *bytes = compile(program, "vulkan,cuda,metal", &st, &len, &errors);
  CHECK_MSG(bytes && !st && len > 0, "compile: %s", rx_status_message(st));
  rx_status_free(st);
  rx_rt_artifact *a = NULL;
  st = bytes ? rx_rt_artifact_load_memory(NULL, bytes, len, "api.rxm", &a) : NULL;
  CHECK_MSG(a && !st, "load: %s", rx_status_message(st));
  rx_status_free(st);
  if (a) {
    CHECK_MSG(rx_rt_artifact_function_count(a) == 1, "one function");
    const char *t = rx_rt_artifact_targets(a);
    CHECK_MSG(t && strstr(t, "vulkan") && strstr(t, "cuda") && strstr(t, "metal"), "targets: %s",
              t);
    rx_rt_artifact_release(a);
    a = NULL;
  }

  /* and it runs, on Vulkan where a device is present */
  rx_rt_device *dev = NULL;
  st = rx_rt_device_open("vulkan", NULL, &dev);
  if (st) {
    printf("note: no Vulkan device (%s): the artifact was checked, not run\n",
           rx_status_message(st));
    rx_status_free(st);
  } else {
    st = rx_rt_artifact_load_memory(dev, bytes, len, "api.rxm", &a);
    CHECK_MSG(a && !st, "load on vulkan: %s", rx_status_message(st));
    rx_status_free(st);
    const int64_t sizes[] = {1, 2, 7, 33, 257, 4096}; /* 1, primes, non-multiples, the bound */
    for (size_t i = 0; a && i < sizeof sizes / sizeof *sizes; i++) run_at(a, dev, sizes[i]);
    rx_rt_artifact_release(a);
    rx_rt_device_release(dev);
  }
  rx_free(bytes);
  return check_finish("test_compile_api");
}
