/* The ONNX frontend (frontends/onnx): models exported from PyTorch with dynamic axes
 * (tests/onnx/export.py: an MLP, self-attention, a GPT-style causal block, a Llama-style RMSNorm +
 * SwiGLU block, a small CNN; and single-operator graphs checked against NumPy) imported, compiled
 * once for Vulkan into one artifact that holds the weights, and run through the runtime's VM with
 * their inputs alone at every recorded shape (tests/onnx/data/manifest.txt; at the first one also
 * with the weights passed, which overrides them), compared with PyTorch's outputs; plus the
 * errors: a model with
 * unsupported operators (all of them listed) and truncated files.
 *
 * Tolerance: normalized error max|got - want| / max(1, max|want|) <= 1e-4.
 * Without Vulkan the import and error checks still run and the run cases are skipped.
 *
 * usage: test_onnx TESTS_DIR */
/* test-needs: runtime */
#include "base/base.h"
#include "base/npy.h"
#include "driver/driver.h"
#include "ir/ir.h"
#include "relaxc/runtime.h"
#include "support_kernels.h"
#include "targets/target.h"
#include "vm_check.h"

#ifdef RX_HAVE_ONNX
#include "frontends/onnx/onnx_import.h"
#endif

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef RX_HAVE_ONNX

#define TOL 1e-4

static int passed, failed, skipped;

#define FAIL(...)                                                                                  \
  do {                                                                                             \
    failed++;                                                                                      \
    fprintf(stderr, "FAIL: " __VA_ARGS__);                                                         \
    fputc('\n', stderr);                                                                           \
  } while (0)

static char *read_model(const char *dir, const char *model, size_t *len) {
  char path[1024];
  snprintf(path, sizeof path, "%s/onnx/%s.onnx", dir, model);
  char *bytes = NULL;
  rx_status s = base_read_file(path, &bytes, len);
  if (s) {
    FAIL("%s", rx_status_message(s));
    rx_status_free(s);
    return NULL;
  }
  return bytes;
}

/* Imports and compiles a model for Vulkan; the artifact bytes (heap) or NULL. */
static unsigned char *compile_model(const char *bytes, size_t blen, const char *model,
                                    size_t *len) {
  rx_module *m = rx_module_new();
  rx_diag diag;
  base_diag_init(&diag);
  unsigned char *art = NULL;
  rx_status s = onnx_import(m, bytes, blen, model, NULL, &diag);
  if (!s) s = onnx_add_weights(m, bytes, blen, model, NULL); /* in the artifact, bound */
  if (s) {
    FAIL("%s: import: %s", model, rx_status_message(s));
    rx_status_free(s);
  } else {
    rx_compile_options o = {0};
    o.cache = rxk_kcache(); /* support_kcache.c */
    rx_status ts = tgt_target_parse("vulkan-lavapipe", &o.targets[o.ntargets++]);
    RX_ASSERT(!ts);
    rx_compile_result r;
    if (!drv_compile(m, &o, &diag, &r)) {
      FAIL("%s: does not compile:\n%s", model, rx_diag_text(&diag));
    } else {
      passed++; /* imported and compiled */
      art = r.artifact;
      *len = r.artifact_len;
      r.artifact = NULL;
      printf("%s: imported, %d tensor programs, artifact %zu bytes\n", model, r.nprograms, *len);
    }
    drv_compile_result_free(&r);
  }
  base_diag_free(&diag);
  rx_module_free(m);
  return art;
}

/* One case of the manifest: the model run with its inputs alone (the artifact binds its
 * weights); with all, once more with every parameter given, the weights from the model passed
 * as inputs (an override of the same values). */
static void run_case(rx_rt_device *dev, rx_rt_artifact *art, const rx_onnx_weight *w, int nw,
                     bool all, const char *dir, char *line) {
  char *model = strtok(line, "|"), *dims = strtok(NULL, "|"), *ins = strtok(NULL, "|"),
       *out = strtok(NULL, "|\n");
  if (!model || !dims || !ins || !out) {
    FAIL("malformed manifest line");
    return;
  }
  char what[256];
  snprintf(what, sizeof what, "%s at %s", model, dims);
  rx_rt_tensor *inputs[64] = {0};
  size_t n = 0;
  rx_status s = NULL;
  char path[1024];
  for (char *f = strtok(ins, ","); f && !s && n < 16; f = strtok(NULL, ",")) {
    snprintf(path, sizeof path, "%s/onnx/data/%s", dir, f);
    s = rx_vm_tensor_from_npy(dev, path, &inputs[n++]);
  }
  size_t ninputs = n;
  for (int i = 0; all && i < nw && !s && n < 64; i++)
    s = rx_rt_tensor_from_host(dev, w[i].dtype, w[i].ndim, w[i].shape, w[i].data, &inputs[n++]);
  snprintf(path, sizeof path, "%s/onnx/data/%s", dir, out);
  char why[512];
  double err;
  for (int pass = 0; pass < (all ? 2 : 1); pass++) {
    size_t count = pass ? n : ninputs;
    if (s) {
      FAIL("%s: %s", what, rx_status_message(s));
      break;
    } else if (rx_vm_check(art, "main", inputs, count, path, TOL, &err, why, sizeof why)) {
      passed++;
      printf("  %s%s: normalized error %.2g\n", what, pass ? ", weights passed" : "", err);
    } else {
      FAIL("%s%s: %s", what, pass ? ", weights passed" : "", why);
    }
  }
  rx_status_free(s);
  for (size_t i = 0; i < n; i++) rx_rt_tensor_release(inputs[i]);
}

static void run_model(rx_rt_device *dev, const char *dir, const char *manifest, const char *model) {
  size_t blen, alen = 0;
  char *bytes = read_model(dir, model, &blen);
  if (!bytes) return;
  unsigned char *art_bytes = compile_model(bytes, blen, model, &alen);
  rx_onnx_weight *w = NULL;
  int nw = 0;
  rx_status s = onnx_weights(bytes, blen, model, NULL, &w, &nw);
  if (s) {
    FAIL("%s: weights: %s", model, rx_status_message(s));
    rx_status_free(s);
  }
  rx_rt_artifact *art = NULL;
  if (art_bytes && dev && !s) {
    s = rx_rt_artifact_load_memory(dev, art_bytes, alen, model, &art);
    if (s) {
      FAIL("%s: loading its artifact: %s", model, rx_status_message(s));
      rx_status_free(s);
      art = NULL;
    }
  }
  char *copy = base_strdup(manifest), *save = NULL;
  int cases = 0;
  for (char *line = strtok_r(copy, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
    size_t ml = strlen(model);
    if (strncmp(line, model, ml) != 0 || line[ml] != '|') continue;
    cases++;
    if (!art) {
      if (!dev) skipped++;
      continue;
    }
    char *l = base_strdup(line);
    run_case(dev, art, w, nw, cases == 1, dir, l);
    free(l);
  }
  if (cases == 0) FAIL("%s: no cases in the manifest", model);
  free(copy);
  rx_rt_artifact_release(art);
  onnx_weights_free(w, nw);
  free(art_bytes);
  free(bytes);
}

/* Unsupported operators: one error that lists every unsupported node (Det; the model's CumSum
 * and TopK, unsupported when it was made, import now and are not listed). */
static void test_unsupported(const char *dir) {
  size_t len;
  char *bytes = read_model(dir, "unsupported", &len);
  if (!bytes) return;
  rx_module *m = rx_module_new();
  rx_status s = onnx_import(m, bytes, len, "unsupported.onnx", NULL, NULL);
  const char *msg = rx_status_message(s);
  if (!s)
    FAIL("unsupported.onnx: imported without an error");
  else if (rx_status_code_of(s) != RX_ERR_UNSUPPORTED || !strstr(msg, "1 unsupported") ||
           strstr(msg, "CumSum") || strstr(msg, "TopK") ||
           !strstr(msg, "'bern0': Bernoulli (opset 17)") || strstr(msg, "Relu"))
    FAIL("unsupported.onnx: unexpected error: %s", msg);
  else
    passed++;
  rx_status_free(s);
  rx_module_free(m);
  free(bytes);
}

/* Supported operators with unsupported attributes: an error naming the node and the reason. */
static void test_op_errors(const char *dir) {
  static const char *const cases[][3] = {
      {"err_conv4d", "node 'conv4d' (Conv, opset 17)", "known shape and rank 3 to 5"},
      {"err_ceil", "node 'pool_ceil' (MaxPool, opset 17)", "ceil_mode=1 needs constant spatial"},
      {"err_same", "node 'pool_same' (AveragePool, opset 17)",
       "auto_pad SAME with stride 2: the padding would depend on the input size"},
  };
  for (size_t i = 0; i < RX_ARRAY_LEN(cases); i++) {
    size_t len;
    char *bytes = read_model(dir, cases[i][0], &len);
    if (!bytes) continue;
    rx_module *m = rx_module_new();
    rx_status s = onnx_import(m, bytes, len, cases[i][0], NULL, NULL);
    const char *msg = rx_status_message(s);
    if (!s)
      FAIL("%s: imported without an error", cases[i][0]);
    else if (rx_status_code_of(s) != RX_ERR_UNSUPPORTED || !strstr(msg, cases[i][1]) ||
             !strstr(msg, cases[i][2]))
      FAIL("%s: unexpected error: %s", cases[i][0], msg);
    else
      passed++;
    rx_status_free(s);
    rx_module_free(m);
    free(bytes);
  }
}

/* Two failing nodes: both listed in one error, the nodes using their outputs not. */
static void test_multi_errors(const char *dir) {
  size_t len;
  char *bytes = read_model(dir, "err_multi", &len);
  if (!bytes) return;
  rx_module *m = rx_module_new();
  rx_status s = onnx_import(m, bytes, len, "err_multi", NULL, NULL);
  const char *msg = rx_status_message(s);
  if (!s || !strstr(msg, "err_multi: 2 nodes cannot be imported:") ||
      !strstr(msg, "\n  node 'pool_a' (MaxPool, opset 17): ceil_mode=1") ||
      !strstr(msg, "\n  node 'pool_c' (AveragePool, opset 17): auto_pad SAME") ||
      strstr(msg, "relu_b") || strstr(msg, "add_y"))
    FAIL("err_multi: unexpected result: %s", s ? msg : "imported");
  else
    passed++;
  rx_status_free(s);
  rx_module_free(m);
  free(bytes);
}

/* Truncated and corrupted files: a clean error (or, rarely, a valid prefix), never a crash. */
static void test_malformed(const char *dir) {
  size_t len;
  char *bytes = read_model(dir, "attention", &len);
  if (!bytes) return;
  int errors = 0, tries = 0;
  for (size_t cut = 0; cut < len; cut += len / 97 + 1, tries++) {
    rx_module *m = rx_module_new();
    rx_status s = onnx_import(m, bytes, cut, "truncated.onnx", NULL, NULL);
    if (s) errors++;
    rx_status_free(s);
    rx_module_free(m);
  }
  /* flip bytes */
  unsigned char *mut = base_calloc(len, 1);
  for (size_t i = 0; i < 200; i++, tries++) {
    memcpy(mut, bytes, len);
    size_t at = (i * 7919u) % len;
    mut[at] ^= (unsigned char)(0x5a + i);
    rx_module *m = rx_module_new();
    rx_status s = onnx_import(m, mut, len, "mutated.onnx", NULL, NULL);
    if (s) errors++;
    rx_status_free(s);
    rx_module_free(m);
  }
  free(mut);
  /* a truncated file in the middle: must be the decode error */
  rx_module *m = rx_module_new();
  rx_status s = onnx_import(m, bytes, len / 2, "half.onnx", NULL, NULL);
  if (!s || !strstr(rx_status_message(s), "not a valid ONNX model"))
    FAIL("half.onnx: expected the decode error, got: %s", s ? rx_status_message(s) : "success");
  else
    passed++;
  rx_status_free(s);
  rx_module_free(m);
  printf("malformed: %d of %d truncated/mutated files rejected, none crashed\n", errors, tries);
  passed++;
  free(bytes);
}

int main(int argc, char **argv) {
  const char *dir = argc > 1 ? argv[1] : "tests";
  setvbuf(stdout, NULL, _IOLBF, 0);
  test_unsupported(dir);
  test_op_errors(dir);
  test_multi_errors(dir);
  test_malformed(dir);
  rx_rt_device *dev = NULL;
  rx_rt_device_options dopts = {.validation = 1};
  rx_status s = rx_rt_device_open("vulkan:0", &dopts, &dev);
  if (s) {
    printf("onnx: Vulkan unavailable (%s): run cases skipped\n", rx_status_message(s));
    rx_status_free(s);
    dev = NULL;
  }
  char mpath[1024];
  snprintf(mpath, sizeof mpath, "%s/onnx/data/manifest.txt", dir);
  char *manifest;
  size_t mlen;
  s = base_read_file(mpath, &manifest, &mlen);
  if (s) {
    FAIL("%s", rx_status_message(s));
    rx_status_free(s);
    manifest = base_strdup("");
  }
  const char *models[] = {"mlp",          "attention", "gpt",      "llama",
                          "cnn",          "op_trilu",  "op_slice", "op_split",
                          "op_split_sym", "op_clip",   "op_pool",  "op_dynshape"};
  for (size_t i = 0; i < RX_ARRAY_LEN(models); i++) run_model(dev, dir, manifest, models[i]);
  if (dev) {
    const char *last = NULL;
    size_t nmsg = rx_rt_device_validation_messages(dev, &last);
    if (nmsg) FAIL("%zu Vulkan validation messages; the last: %s", nmsg, last ? last : "");
    rx_rt_device_release(dev);
  }
  free(manifest);
  printf("onnx: %d passed, %d failed, %d skipped\n", passed, failed, skipped);
  return failed ? 1 : 0;
}

#else

int main(void) {
  printf("onnx: ONNX support was not built: install protobuf-c-compiler libprotobuf-c-dev "
         "libonnx-dev\n");
  printf("onnx: 0 passed, 0 failed, 1 skipped\n");
  return 77;
}

#endif
