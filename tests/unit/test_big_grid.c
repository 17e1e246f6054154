/* Grids beyond the per-axis limit (issue 10, item 8): Vulkan guarantees 65535 work groups per
 * axis, and the elementwise rule's 1-D grid over 4096 x 32000 elements wants 128,000 groups, the
 * row reduction's over 65536 rows 65536. passes/schedule/schedule.c turns such block loops into
 * grid-stride loops (grid min(E, 65535)); this test checks that
 *   - every grid expression of every target stays within the target's max_grid_dim at the
 *     symbolic dims' bound (n = 4096 and n = 65536) and is the full count below the limit;
 *   - both rules run on Vulkan past the limit and every element is right: y = 2x + 1 (f16,
 *     exact) and the f32 sum of a row of f16 values (exact: multiples of 1/8). lavapipe binds
 *     at most 128 MiB per storage buffer (maxStorageBufferRange), so the run uses shapes that
 *     cross 65535 groups within it: 2048 x 32768 f16 (65536 groups of 1024 elements, exactly
 *     128 MiB) and 100000 rows x 512 f16 (100000 groups, 102 MB, with a partial last stride).
 *     A device with a larger range runs the shapes with the same code.
 *
 * usage: test_big_grid TESTS_DIR */
/* test-needs: runtime */
#include "base/base.h"
#include "check.h"
#include "driver/driver.h"
#include "ir/ir.h"
#include "relaxc/runtime.h"
#include "support_runtime.h"
#include "targets/target.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *ew_fmt = "graph_fn main(x: f16[n, %d]) -> f16[n, %d] where n <= %d {\n"
                            "  dataflow {\n"
                            "    y = add(multiply(x, 2.0), 1.0)\n"
                            "  }\n"
                            "  return y\n"
                            "}\n";
static const char *red_fmt = "graph_fn main(x: f16[n, %d]) -> f32[n] where n <= %d {\n"
                             "  dataflow {\n"
                             "    y = sum(cast(x, dtype=f32), axes=[1])\n"
                             "  }\n"
                             "  return y\n"
                             "}\n";

/* f16 bits of a value exactly representable as a normal f16 (or zero), and back. */
static uint16_t to_f16(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  uint16_t sign = (uint16_t)((u >> 16) & 0x8000);
  if ((u & 0x7fffffff) == 0) return sign;
  int e = (int)((u >> 23) & 0xff) - 127 + 15;
  RX_ASSERT(e > 0 && e < 31);
  return (uint16_t)(sign | (e << 10) | ((u >> 13) & 0x3ff));
}
static float from_f16(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000) << 16, e = (h >> 10) & 0x1f, m = h & 0x3ff;
  uint32_t u = e == 0 ? sign : sign | ((e - 15 + 127) << 23) | (m << 13);
  RX_ASSERT(e != 0 || m == 0);
  float f;
  memcpy(&f, &u, 4);
  return f;
}

/* Compiles text for vk (the Vulkan device's target), cuda and metal, checks every kernel's grid
 * at n = bound (within the target's limits) and at n = 1 (positive); returns the artifact (heap)
 * or NULL. */
static unsigned char *compile(const char *what, const char *text, int64_t bound,
                              const rx_target *vk, size_t *len) {
  rx_module *m = rx_module_new();
  rx_diag diag;
  base_diag_init(&diag);
  rx_compile_options o = {.no_nvrtc = true};
  const char *names[] = {NULL, "cuda -arch=sm_80", "metal-apple7"};
  const rx_target *tg[3] = {vk};
  for (size_t i = 0; i < RX_ARRAY_LEN(names); i++) {
    if (names[i]) {
      rx_status ts = tgt_target_parse(names[i], &tg[i]);
      RX_ASSERT(!ts);
    }
    o.targets[o.ntargets++] = tg[i];
  }
  rx_compile_result r;
  unsigned char *bytes = NULL;
  bool ok = ir_parse_module(m, what, text, strlen(text), &diag) && drv_compile(m, &o, &diag, &r);
  CHECK(ok);
  if (!ok) {
    fprintf(stderr, "%s: does not compile:\n%s", what, rx_diag_text(&diag));
    base_diag_free(&diag);
    rx_module_free(m);
    return NULL;
  }
  bytes = r.artifact;
  *len = r.artifact_len;
  r.artifact = NULL;
  drv_compile_result_free(&r);
  base_diag_free(&diag);
  rx_module_free(m);
  /* the grids, as the runtime evaluates them from each target's kernels.json */
  rx_rt_artifact *art = NULL;
  const char *tnames[] = {"vulkan", "cuda", "metal"};
  rx_status s = rx_rt_artifact_load_memory(NULL, bytes, *len, what, &art);
  for (int i = 0; i < 3 && !s; i++) {
    const void *json = NULL;
    size_t jlen = 0;
    char sec[64];
    snprintf(sec, sizeof sec, "%s/kernels.json", tnames[i]);
    const char *sname = NULL;
    for (size_t k = 0; rx_rt_artifact_section(art, k, &sname, &json, &jlen); k++)
      if (!strcmp(sname, sec)) break;
    if (!sname || strcmp(sname, sec) != 0) {
      s = base_status_make(RX_ERR_NOT_FOUND, "no section %s", sec);
      break;
    }
    /* every "grid": [a, b, c] of the json */
    char *text_json = base_calloc(jlen + 1, 1);
    memcpy(text_json, json, jlen);
    int grids = 0;
    for (char *g = strstr(text_json, "\"grid\": ["); g; g = strstr(g + 1, "\"grid\": [")) {
      char *p = g + 9;
      for (int ax = 0; ax < 3; ax++) {
        char *q = strchr(p, '"'), *q2 = q ? strchr(q + 1, '"') : NULL;
        RX_ASSERT(q && q2);
        *q2 = 0;
        const char *vn[1] = {"n"};
        int64_t vals[2] = {bound, 1};
        for (int at = 0; at < 2; at++) {
          rx_rt_symbols sy = {.names = vn, .values = &vals[at], .count = 1};
          int64_t v = -1;
          rx_status es = rx_rt_eval(q + 1, &sy, &v);
          CHECK(!es);
          if (es) fprintf(stderr, "%s: %s\n", q + 1, rx_status_message(es));
          rx_status_free(es);
          CHECK(v >= 1 && v <= tg[i]->max_grid_dim[ax]);
          if (at == 0)
            printf("%s %s: grid[%d] = %s = %lld at n = %lld (limit %d)\n", what, tnames[i], ax,
                   q + 1, (long long)v, (long long)bound, tg[i]->max_grid_dim[ax]);
        }
        p = q2 + 1;
      }
      grids++;
    }
    CHECK(grids > 0);
    free(text_json);
  }
  CHECK(!s);
  if (s) fprintf(stderr, "%s: %s\n", what, rx_status_message(s));
  rx_status_free(s);
  rx_rt_artifact_release(art);
  return bytes;
}

/* Calls main on x (f16 [rows, cols]) and reads the result into out (out_bytes). */
static bool run(rx_rt_device *dev, const char *what, const unsigned char *bytes, size_t len,
                const uint16_t *x, int64_t rows, int64_t cols, void *out, size_t out_bytes) {
  rx_rt_artifact *art = NULL;
  rx_rt_tensor *in = NULL;
  rx_rt_value *res = NULL;
  int64_t shape[2] = {rows, cols};
  rx_status s = rx_rt_artifact_load_memory(dev, bytes, len, what, &art);
  if (!s) s = rx_rt_tensor_from_host(dev, RX_DTYPE_F16, 2, shape, x, &in);
  if (!s) s = rx_rt_vm_call(art, "main", &in, 1, &res);
  rx_rt_tensor *t = s ? NULL : rx_rt_value_tensor(res);
  if (!s && !t) s = base_status_make(RX_ERR_INTERNAL, "the result is not a tensor");
  if (!s) s = rx_rt_tensor_read(t, out, out_bytes);
  CHECK(!s);
  if (s) fprintf(stderr, "%s on Vulkan: %s\n", what, rx_status_message(s));
  bool ok = !s;
  rx_status_free(s);
  rx_rt_value_release(res);
  rx_rt_tensor_release(in);
  rx_rt_artifact_release(art);
  return ok;
}

enum { EW_ROWS = 2048, EW_COLS = 32768, RED_ROWS = 100000, RED_COLS = 512 };

static float ew_x(int64_t i, int64_t j) { return (float)((i * 7 + j) % 64) * 0.25f - 8.0f; }
static float red_x(int64_t i, int64_t j) { return (float)((i + 3 * j) % 16) * 0.125f; }

static void ew_case(rx_rt_device *dev, const unsigned char *bytes, size_t len) {
  const int64_t rows = EW_ROWS, cols = EW_COLS, count = rows * cols;
  uint16_t *x = malloc(sizeof *x * (size_t)count), *y = malloc(sizeof *y * (size_t)count);
  RX_ASSERT(x && y);
  for (int64_t i = 0; i < rows; i++)
    for (int64_t j = 0; j < cols; j++) x[i * cols + j] = to_f16(ew_x(i, j));
  if (run(dev, "elementwise 2048 x 32768", bytes, len, x, rows, cols, y,
          sizeof *y * (size_t)count)) {
    int64_t bad = 0;
    for (int64_t i = 0; i < rows; i++)
      for (int64_t j = 0; j < cols; j++)
        if (from_f16(y[i * cols + j]) != 2 * ew_x(i, j) + 1 && bad++ < 5)
          fprintf(stderr, "y[%lld, %lld] = %g, want %g\n", (long long)i, (long long)j,
                  from_f16(y[i * cols + j]), 2 * ew_x(i, j) + 1);
    printf("elementwise 2048 x 32768 on Vulkan: %lld wrong elements\n", (long long)bad);
    CHECK_INT_EQ(bad, 0);
  }
  free(x);
  free(y);
}

static void red_case(rx_rt_device *dev, const unsigned char *bytes, size_t len) {
  const int64_t rows = RED_ROWS, cols = RED_COLS, count = rows * cols;
  uint16_t *x = malloc(sizeof *x * (size_t)count);
  float *y = calloc((size_t)rows, sizeof *y);
  RX_ASSERT(x && y);
  for (int64_t i = 0; i < rows; i++)
    for (int64_t j = 0; j < cols; j++) x[i * cols + j] = to_f16(red_x(i, j));
  if (run(dev, "row sum 100000 x 512", bytes, len, x, rows, cols, y, sizeof *y * (size_t)rows)) {
    int64_t bad = 0;
    for (int64_t i = 0; i < rows; i++) {
      double want = 0;
      for (int64_t j = 0; j < cols; j++) want += red_x(i, j);
      if (y[i] != want && bad++ < 5)
        fprintf(stderr, "y[%lld] = %g, want %g\n", (long long)i, y[i], want);
    }
    printf("row sum 100000 x 512 on Vulkan: %lld wrong rows\n", (long long)bad);
    CHECK_INT_EQ(bad, 0);
  }
  free(x);
  free(y);
}

int main(int argc, char **argv) {
  (void)argc;
  (void)argv;
  setvbuf(stdout, NULL, _IOLBF, 0);
  /* the Vulkan device first: the artifacts are compiled for the target that describes it
   * (lavapipe's where there is none, for the grid checks) */
  rx_rt_device *dev = NULL;
  rx_rt_device_options dopts = {.validation = 1};
  rx_status s = rx_rt_device_open("vulkan:0", &dopts, &dev);
  rx_target vk;
  if (dev) {
    rxk_rt_target(dev, &vk);
  } else {
    const rx_target *t;
    rx_status ts = tgt_target_parse("vulkan-lavapipe", &t);
    RX_ASSERT(!ts);
    vk = *t;
  }
  char text[512];
  size_t len = 0, ew_len = 0, red_len = 0;
  /* the shapes: grids only */
  snprintf(text, sizeof text, ew_fmt, 32000, 32000, 4096);
  free(compile("elementwise 4096 x 32000", text, 4096, &vk, &len));
  snprintf(text, sizeof text, red_fmt, 4096, 65536);
  free(compile("row sum 65536 x 4096", text, 65536, &vk, &len));
  /* the shapes run on lavapipe */
  snprintf(text, sizeof text, ew_fmt, EW_COLS, EW_COLS, EW_ROWS);
  unsigned char *ew = compile("elementwise 2048 x 32768", text, EW_ROWS, &vk, &ew_len);
  snprintf(text, sizeof text, red_fmt, RED_COLS, RED_ROWS);
  unsigned char *red = compile("row sum 100000 x 512", text, RED_ROWS, &vk, &red_len);
  if (s) {
    printf("Vulkan unavailable (%s): grids checked, nothing run\n", rx_status_message(s));
    rx_status_free(s);
  } else {
    if (ew) ew_case(dev, ew, ew_len);
    if (red) red_case(dev, red, red_len);
    const char *last = NULL;
    size_t nmsg = rx_rt_device_validation_messages(dev, &last);
    if (nmsg) fprintf(stderr, "%zu validation messages; the last: %s\n", nmsg, last ? last : "");
    CHECK_INT_EQ(nmsg, 0);
    rx_rt_device_release(dev);
  }
  free(ew);
  free(red);
  return check_finish("test_big_grid");
}
