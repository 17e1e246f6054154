/* Long chains of elementwise ops (issue 10, item 6): 512 ops in one dataflow block fuse into
 * bounded groups (passes/fuse_ops.c: FUSE_MAX_DEPTH, FUSE_MAX_COST), compile for Vulkan, CUDA
 * (NVRTC where present, else its sources) and Metal, and the Vulkan artifact's result matches a
 * closed form or a float64 iteration of the same chain within a relative error of 1e-4 (the
 * silu chain shrinks values toward 2^-64, so an absolute tolerance would pass anything).
 *
 *   - affine: 256 x (multiply by 1.001, add 0.5): y = a^256 x + 0.5 (a^256 - 1) / (a - 1);
 *   - silu: 64 x silu, whose program uses its argument twice (x * sigmoid(x)), so fusing the
 *     whole chain would inline 2^64 copies: the cost bound must split it (64, not 512, ops:
 *     its kernels are bigger, and shaderc and NVRTC take about 0.1 s a kernel).
 *
 * usage: test_fuse_chain TESTS_DIR */
/* test-needs: runtime */
#include "base/base.h"
#include "check.h"
#include "driver/driver.h"
#include "ir/ir.h"
#include "passes/passes.h"
#include "relaxc/runtime.h"
#include "targets/target.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { ROWS = 37, COLS = 16, NOPS = 512, NSILU = 64 };

static char *affine_text(void) {
  rx_strbuf b = {0};
  base_strbuf_append(
      &b, "graph_fn main(x: f32[n, 16]) -> f32[n, 16] where n <= 4096 {\n  dataflow {\n");
  const char *prev = "x";
  char name[32];
  for (int k = 0; k < NOPS / 2; k++) {
    base_strbuf_printf(&b, "    m%d = multiply(%s, 1.001)\n    v%d = add(m%d, 0.5)\n", k, prev, k,
                       k);
    snprintf(name, sizeof name, "v%d", k);
    prev = name;
  }
  base_strbuf_printf(&b, "  }\n  return %s\n}\n", prev);
  return base_strbuf_take(&b);
}

static char *silu_text(void) {
  rx_strbuf b = {0};
  base_strbuf_append(
      &b, "graph_fn main(x: f32[n, 16]) -> f32[n, 16] where n <= 4096 {\n  dataflow {\n");
  base_strbuf_append(&b, "    s0 = silu(x)\n");
  for (int k = 1; k < NSILU; k++) base_strbuf_printf(&b, "    s%d = silu(s%d)\n", k, k - 1);
  base_strbuf_printf(&b, "  }\n  return s%d\n}\n", NSILU - 1);
  return base_strbuf_take(&b);
}

static double affine_want(double x) {
  double a = 1.001, p = pow(a, NOPS / 2);
  return p * x + 0.5 * (p - 1) / (a - 1);
}

static double silu_want(double x) {
  for (int k = 0; k < NSILU; k++) x = x / (1 + exp(-x));
  return x;
}

/* Compiles text for the three targets; the artifact (heap) or NULL. */
static unsigned char *compile(const char *what, const char *text, int nops, size_t *len) {
  rx_module *m = rx_module_new();
  rx_diag diag;
  base_diag_init(&diag);
  rx_compile_options o = {0};
  const char *names[] = {"vulkan-lavapipe", "cuda -arch=sm_80", "metal-apple7"};
  for (size_t i = 0; i < RX_ARRAY_LEN(names); i++) {
    rx_status ts = tgt_target_parse(names[i], &o.targets[o.ntargets++]);
    RX_ASSERT(!ts);
  }
  rx_compile_result r;
  unsigned char *bytes = NULL;
  bool ok = ir_parse_module(m, what, text, strlen(text), &diag) && drv_compile(m, &o, &diag, &r);
  CHECK(ok);
  if (!ok) {
    fprintf(stderr, "%s: does not compile:\n%s", what, rx_diag_text(&diag));
  } else {
    /* split into bounded groups: more than one call, far fewer than one per op (groups equal up
     * to names are one program since deduplication: passes/dedup.c) */
    rx_strbuf dis = {0};
    pass_host_disasm(&dis, r.host.words, r.host.nwords);
    int calls = 0;
    for (const char *c = dis.data; c && (c = strstr(c, "call_kernels")); c++) calls++;
    base_strbuf_free(&dis);
    printf("%s: %d ops -> %d fused calls of %d tensor programs\n", what, nops, calls, r.nprograms);
    CHECK(calls > 1 && calls <= nops / 4);
    CHECK(r.nprograms >= 1 && r.nprograms <= calls);
    bytes = r.artifact;
    *len = r.artifact_len;
    r.artifact = NULL;
    drv_compile_result_free(&r);
  }
  base_diag_free(&diag);
  rx_module_free(m);
  return bytes;
}

static void run(rx_rt_device *dev, const char *what, const unsigned char *bytes, size_t len,
                double (*want)(double), double lo, double hi) {
  rx_rt_artifact *art = NULL;
  rx_rt_tensor *in = NULL;
  rx_rt_value *res = NULL;
  float *x = base_calloc(ROWS * COLS, sizeof *x), *got = base_calloc(ROWS * COLS, sizeof *got);
  for (int i = 0; i < ROWS * COLS; i++) x[i] = (float)(lo + (hi - lo) * i / (ROWS * COLS - 1));
  int64_t shape[2] = {ROWS, COLS};
  rx_status s = rx_rt_artifact_load_memory(dev, bytes, len, what, &art);
  if (!s) s = rx_rt_tensor_from_host(dev, RX_DTYPE_F32, 2, shape, x, &in);
  if (!s) s = rx_rt_vm_call(art, "main", &in, 1, &res);
  rx_rt_tensor *t = s ? NULL : rx_rt_value_tensor(res);
  if (!s && !t) s = base_status_make(RX_ERR_INTERNAL, "the result is not a tensor");
  if (!s) s = rx_rt_tensor_read(t, got, sizeof *got * ROWS * COLS);
  CHECK(!s);
  if (s) {
    fprintf(stderr, "%s: %s\n", what, rx_status_message(s));
  } else {
    double worst = 0;
    for (int i = 0; i < ROWS * COLS; i++) {
      double w = want(x[i]), e = fabs(got[i] - w) / fmax(fabs(w), 1e-30);
      if (!(e <= worst)) worst = isnan(e) ? INFINITY : e;
    }
    printf("%s on Vulkan: relative error %.3g\n", what, worst);
    CHECK(worst <= 1e-4);
  }
  rx_status_free(s);
  rx_rt_value_release(res);
  rx_rt_tensor_release(in);
  rx_rt_artifact_release(art);
  free(x);
  free(got);
}

int main(int argc, char **argv) {
  (void)argc;
  (void)argv;
  setvbuf(stdout, NULL, _IOLBF, 0);
  char *texts[2] = {affine_text(), silu_text()};
  const char *names[2] = {"affine512", "silu64"};
  double (*wants[2])(double) = {affine_want, silu_want};
  double lo[2] = {-3, 0.5}, hi[2] = {3, 4};
  unsigned char *bytes[2] = {0};
  size_t lens[2] = {0};
  int nops[2] = {NOPS, NSILU};
  for (int i = 0; i < 2; i++) bytes[i] = compile(names[i], texts[i], nops[i], &lens[i]);
  rx_rt_device *dev = NULL;
  rx_rt_device_options dopts = {.validation = 1};
  rx_status s = rx_rt_device_open("vulkan:0", &dopts, &dev);
  if (s) {
    printf("Vulkan unavailable (%s): compiled only\n", rx_status_message(s));
    rx_status_free(s);
  } else {
    for (int i = 0; i < 2; i++)
      if (bytes[i]) run(dev, names[i], bytes[i], lens[i], wants[i], lo[i], hi[i]);
    const char *last = NULL;
    size_t nmsg = rx_rt_device_validation_messages(dev, &last);
    if (nmsg) fprintf(stderr, "%zu validation messages; the last: %s\n", nmsg, last ? last : "");
    CHECK_INT_EQ(nmsg, 0);
    rx_rt_device_release(dev);
  }
  for (int i = 0; i < 2; i++) {
    free(texts[i]);
    free(bytes[i]);
  }
  return check_finish("test_fuse_chain");
}
