/* End to end: whole graph functions with symbolic shapes compiled once into one artifact and run
 * at several values of their symbolic dimension.
 *
 * For each model of tests/e2e (an MLP over n rows, a decoder layer over a sequence length s, a
 * conv net over a batch b): relaxc_compile for vulkan, cuda and metal together (one artifact),
 * each for the target of the device it runs on), then, for every case of
 * tests/e2e/data/manifest.txt, the artifact runs through the runtime's VM on every backend present
 * (Vulkan: lavapipe here, under the validation layer; CUDA where a GPU is; an absent backend's
 * cases count as skipped, with the reason) and its output is compared with the NumPy reference
 * (tests/e2e/gen_e2e.py, float64 from the float32 inputs). The same is done with fusion off: fused
 * and unfused artifacts must both match.
 *
 * Tolerance: normalized error max|got - want| / max(1, max|want|) <= 1e-4 (f32 with reductions
 * of up to 512 terms in another order than NumPy's).
 *
 * usage: test_e2e TESTS_DIR */
/* test-needs: runtime */
#include "base/base.h"
#include "base/npy.h"
#include "driver/driver.h"
#include "ir/ir.h"
#include "relaxc/runtime.h"
#include "support_runtime.h"
#include "targets/target.h"
#include "vm_check.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TOL 1e-4

static int passed, failed, skipped;

#define FAIL(...)                                                                                  \
  do {                                                                                             \
    failed++;                                                                                      \
    fprintf(stderr, "FAIL: " __VA_ARGS__);                                                         \
    fputc('\n', stderr);                                                                           \
  } while (0)

/* Compiles tests/e2e/MODEL.rx for the targets tg into artifact bytes (heap); NULL on failure. */
static unsigned char *compile_model(const char *dir, const char *model, bool fuse,
                                    const rx_target *const *tg, int ntg, size_t *len) {
  char path[1024];
  snprintf(path, sizeof path, "%s/e2e/%s.rx", dir, model);
  char *text;
  size_t n;
  rx_status s = base_read_file(path, &text, &n);
  if (s) {
    FAIL("%s", rx_status_message(s));
    rx_status_free(s);
    return NULL;
  }
  rx_module *m = rx_module_new();
  rx_diag diag;
  base_diag_init(&diag);
  rx_compile_options o = {.no_fuse = !fuse};
  o.cache = rxk_kcache(); /* support_kcache.c */
  for (int i = 0; i < ntg; i++) o.targets[o.ntargets++] = tg[i];
  rx_compile_result r;
  unsigned char *bytes = NULL;
  if (!ir_parse_module(m, path, text, n, &diag) || !drv_compile(m, &o, &diag, &r)) {
    FAIL("%s (fuse %d): does not compile:\n%s", model, fuse, rx_diag_text(&diag));
  } else {
    bytes = r.artifact;
    *len = r.artifact_len;
    r.artifact = NULL;
    printf("%s (fusion %s): %d tensor programs, artifact %zu bytes\n", model, fuse ? "on" : "off",
           r.nprograms, *len);
  }
  drv_compile_result_free(&r);
  base_diag_free(&diag);
  rx_module_free(m);
  free(text);
  return bytes;
}

/* Runs one manifest case: returns after counting a pass or a failure. */
static void run_case(rx_rt_device *dev, rx_rt_artifact *art, const char *dir, char *line,
                     const char *label) {
  char *model = strtok(line, "|"), *dims = strtok(NULL, "|"), *ins = strtok(NULL, "|"),
       *out = strtok(NULL, "|\n");
  if (!model || !dims || !ins || !out) {
    FAIL("malformed manifest line");
    return;
  }
  char what[256];
  snprintf(what, sizeof what, "%s at %s (%s)", model, dims, label);
  rx_rt_tensor *inputs[16] = {0};
  size_t n = 0;
  rx_status s = NULL;
  char path[1024];
  for (char *f = strtok(ins, ","); f && !s && n < 16; f = strtok(NULL, ",")) {
    snprintf(path, sizeof path, "%s/e2e/data/%s", dir, f);
    s = rx_vm_tensor_from_npy(dev, path, &inputs[n++]);
  }
  snprintf(path, sizeof path, "%s/e2e/data/%s", dir, out);
  char why[512];
  double err;
  if (s) {
    FAIL("%s: %s", what, rx_status_message(s));
  } else if (rx_vm_check(art, "main", inputs, n, path, TOL, &err, why, sizeof why)) {
    passed++;
    printf("  %s: normalized error %.2g\n", what, err);
  } else {
    FAIL("%s: %s", what, why);
  }
  rx_status_free(s);
  for (size_t i = 0; i < n; i++) rx_rt_tensor_release(inputs[i]);
}

/* The cases of model in the manifest, run on b's device from art (NULL: b is absent, and they
 * are counted as skipped); returns how many there are. */
static int run_model(const char *manifest, const char *model, rxk_backend *b, rx_rt_artifact *art,
                     const char *dir, bool fuse) {
  char *copy = base_strdup(manifest), *save = NULL, label[64];
  snprintf(label, sizeof label, "%s, %s", fuse ? "fused" : "unfused", rx_rt_backend_name(b->kind));
  int cases = 0;
  size_t ml = strlen(model);
  for (char *line = strtok_r(copy, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
    if (strncmp(line, model, ml) != 0 || line[ml] != '|') continue;
    cases++;
    if (!art) {
      skipped++;
      continue;
    }
    char *l = base_strdup(line);
    run_case(b->dev, art, dir, l, label);
    free(l);
  }
  free(copy);
  return cases;
}

int main(int argc, char **argv) {
  const char *dir = argc > 1 ? argv[1] : "tests";
  setvbuf(stdout, NULL, _IOLBF, 0);
  /* every backend, and the target of each device present (the table's where absent) */
  rxk_backend bs[3] = {
      {.kind = RX_RT_BACKEND_VULKAN}, {.kind = RX_RT_BACKEND_CUDA}, {.kind = RX_RT_BACKEND_METAL}};
  const char *fallback[3] = {"vulkan-lavapipe", "cuda -arch=sm_80", "metal-apple7"};
  const rx_target *tg[3];
  int present = 0;
  for (int bi = 0; bi < 3; bi++) {
    char spec[64];
    snprintf(spec, sizeof spec, "%s:0", rx_rt_backend_name(bs[bi].kind));
    rxk_rt_open(&bs[bi], spec);
    if (bs[bi].dev) {
      present++;
      tg[bi] = &bs[bi].target;
    } else {
      rx_status ts = tgt_target_parse(fallback[bi], &tg[bi]);
      RX_ASSERT(!ts);
    }
  }
  if (!present) {
    printf("e2e: no backend present\n");
    printf("e2e: 0 passed, 0 failed, 1 skipped\n");
    return 77;
  }
  char manifest_path[1024];
  snprintf(manifest_path, sizeof manifest_path, "%s/e2e/data/manifest.txt", dir);
  char *manifest;
  size_t mlen;
  rx_status s = base_read_file(manifest_path, &manifest, &mlen);
  if (s) {
    FAIL("%s", rx_status_message(s));
    rx_status_free(s);
    manifest = base_strdup("");
  }
  const char *models[] = {"mlp", "decoder", "convnet"};
  for (size_t mi = 0; mi < RX_ARRAY_LEN(models); mi++) {
    for (int fuse = 1; fuse >= 0; fuse--) {
      size_t len = 0;
      unsigned char *bytes = compile_model(dir, models[mi], fuse, tg, 3, &len);
      if (!bytes) continue;
      /* every manifest case of this model, from one artifact, on each backend */
      for (int bi = 0; bi < 3; bi++) {
        rx_rt_artifact *art = NULL;
        if (bs[bi].dev) {
          s = rx_rt_artifact_load_memory(bs[bi].dev, bytes, len, models[mi], &art);
          if (s) {
            FAIL("%s on %s: loading its artifact: %s", models[mi], rx_rt_backend_name(bs[bi].kind),
                 rx_status_message(s));
            rx_status_free(s);
            continue;
          }
        }
        if (run_model(manifest, models[mi], &bs[bi], art, dir, fuse) == 0)
          FAIL("%s: no cases in the manifest", models[mi]);
        rx_rt_artifact_release(art);
      }
      free(bytes);
    }
  }
  for (int bi = 0; bi < 3; bi++) {
    if (!bs[bi].dev) {
      printf("e2e: backend %s skipped: %s\n", rx_rt_backend_name(bs[bi].kind), bs[bi].why);
      continue;
    }
    const char *last = NULL;
    size_t nmsg = rx_rt_device_validation_messages(bs[bi].dev, &last);
    if (nmsg)
      FAIL("%zu %s validation messages; the last: %s", nmsg, rx_rt_backend_name(bs[bi].kind),
           last ? last : "");
    rx_rt_device_release(bs[bi].dev);
  }
  free(manifest);
  printf("e2e: %d passed, %d failed, %d skipped\n", passed, failed, skipped);
  return failed ? 1 : 0;
}
