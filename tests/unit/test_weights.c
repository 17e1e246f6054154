/* Weights in artifacts (docs/artifact.md "Weights", docs/llm.md "Weights"):
 * - the module's weight table (ir/weights.c): its errors and rx_module_on_free;
 * - f32 <-> f16 <-> bf16 conversion at write time: rounding to nearest even (ties both ways),
 *   subnormals (the smallest, ties to zero, rounding up into the normals), overflow to inf, inf and
 *   NaN kept, -0;
 * - the safetensors image (driver/weights.c): every tensor 64-byte aligned in the image and in the
 *   artifact file, read back by base/safetensors.c; the streamed file equal to the in-memory
 *   artifact; the side file's name relative to the artifact;
 * - parameters bound to weights: a mismatching type is a compile error; the loader's errors for a
 *   corrupt or truncated weights section, a binding to a missing or mismatching weight, a WEIGHT
 *   instruction in an old host program, a side file that is missing, truncated or corrupt, and a
 *   device out of memory while uploading;
 * - calls: the inputs alone (the weights bound), every parameter (an override), a wrong count,
 *   value arguments (rx_rt_vm_call_values), on a device without a GPU (tests/fuzz/fuzz_device.h)
 *   and, where Vulkan is present, with the numbers checked.
 *
 * usage: test_weights [TESTS_DIR]   (the directory is not used) */
/* test-needs: runtime */
#include "../fuzz/fuzz_device.h"
#include "base/safetensors.h"
#include "check.h"
#include "driver/driver.h"
#include "ir/ir.h"
#include "relaxc/compiler.h"
#include "relaxc/runtime.h"
#include "runtime/vm_format.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* s failed with a message holding want (and is freed). */
static void expect(rx_status s, const char *want, const char *what) {
  CHECK_MSG(s && strstr(rx_status_message(s), want), "%s: expected an error with '%s', got: %s",
            what, want, s ? rx_status_message(s) : "success");
  if (s) printf("  %s: %s\n", what, rx_status_message(s));
  rx_status_free(s);
}

static float u2f(uint32_t u) { /* a float from its bits */
  float f;
  memcpy(&f, &u, 4);
  return f;
}

/* ---- the table ---- */
static int freed[4], nfreed;
static void on_free(void *ctx) { freed[nfreed++] = *(int *)ctx; }

static void test_table(void) {
  rx_module *m = rx_module_new();
  float src[4] = {1, 2, 3, 4};
  int32_t isrc[4] = {1, 2, 3, 4};
  int64_t s4[1] = {4}, s0[1] = {0}, neg[2] = {2, -1}, huge[2] = {INT64_MAX / 2, 4};
  CHECK_MSG(!rx_module_add_weight(m, "w", RX_DTYPE_F16, 1, s4, RX_DTYPE_F32, src), "f32 -> f16");
  expect(rx_module_add_weight(m, "w", RX_DTYPE_F32, 1, s4, RX_DTYPE_F32, src), "already",
         "a duplicate name");
  expect(rx_module_add_weight(m, "", RX_DTYPE_F32, 1, s4, RX_DTYPE_F32, src), "needs a name",
         "no name");
  expect(rx_module_add_weight(m, "__metadata__", RX_DTYPE_F32, 1, s4, RX_DTYPE_F32, src),
         "reserved", "the safetensors metadata key");
  expect(rx_module_add_weight(m, "i", RX_DTYPE_F32, 1, s4, RX_DTYPE_I32, isrc),
         "cannot store f32 from i32", "i32 source for f32");
  expect(rx_module_add_weight(m, "j", RX_DTYPE_I64, 1, s4, RX_DTYPE_I32, isrc),
         "cannot store i64 from i32", "i32 source for i64");
  expect(rx_module_add_weight(m, "n", RX_DTYPE_F32, 2, neg, RX_DTYPE_F32, src), "negative",
         "a negative dim");
  expect(rx_module_add_weight(m, "h", RX_DTYPE_F32, 2, huge, RX_DTYPE_F32, src), "overflows",
         "an overflowing shape");
  expect(rx_module_add_weight(m, "r", RX_DTYPE_F32, 17, huge, RX_DTYPE_F32, src), "rank 17",
         "17 dims");
  expect(rx_module_add_weight(m, "z", RX_DTYPE_F32, 1, s4, RX_DTYPE_F32, NULL), "NULL",
         "no source");
  CHECK_MSG(!rx_module_add_weight(m, "empty", RX_DTYPE_F32, 1, s0, RX_DTYPE_F32, NULL),
            "an empty tensor needs no source");
  CHECK_MSG(!rx_module_add_weight(m, "i32", RX_DTYPE_I32, 1, s4, RX_DTYPE_I32, isrc), "i32 as is");
  CHECK_MSG(rx_module_weight_count(m) == 3, "3 weights, got %zu", rx_module_weight_count(m));
  const rx_weight *w = ir_module_weight(m, "w");
  CHECK_MSG(w && w->bytes == 8 && w->dtype == RX_DTYPE_F16 && w->src == src, "the f16 weight");
  static int one = 1, two = 2;
  rx_module_on_free(m, on_free, &one);
  rx_module_on_free(m, on_free, &two);
  rx_module_free(m);
  CHECK_MSG(nfreed == 2 && freed[0] == 2 && freed[1] == 1, "on_free: last added first");
}

/* ---- conversion ---- */
static uint16_t to16(rx_dtype to, rx_dtype from, uint32_t bits) {
  uint16_t out = 0;
  if (from == RX_DTYPE_F32) {
    float f = u2f(bits);
    drv_weights_convert(to, &out, from, &f, 1);
  } else {
    uint16_t h = (uint16_t)bits;
    drv_weights_convert(to, &out, from, &h, 1);
  }
  return out;
}

static bool is_nan16(rx_dtype t, uint16_t h) {
  return t == RX_DTYPE_F16 ? (h & 0x7c00) == 0x7c00 && (h & 0x3ff)
                           : (h & 0x7f80) == 0x7f80 && (h & 0x7f);
}

static void test_convert(void) {
  static const struct {
    rx_dtype to, from;
    uint32_t in;
    uint16_t want;
    const char *what;
  } cases[] = {
      {RX_DTYPE_F16, RX_DTYPE_F32, 0x3f800000, 0x3c00, "1"},
      {RX_DTYPE_F16, RX_DTYPE_F32, 0x3f801000, 0x3c00, "1 + 2^-11: a tie, to even (down)"},
      {RX_DTYPE_F16, RX_DTYPE_F32, 0x3f803000, 0x3c02, "1 + 3*2^-11: a tie, to even (up)"},
      {RX_DTYPE_F16, RX_DTYPE_F32, 0x3f801001, 0x3c01, "just above a tie: up"},
      {RX_DTYPE_F16, RX_DTYPE_F32, 0x3f800fff, 0x3c00, "just below a tie: down"},
      {RX_DTYPE_F16, RX_DTYPE_F32, 0xc0490fdb, 0xc248, "-pi"},
      {RX_DTYPE_F16, RX_DTYPE_F32, 0x477fe000, 0x7bff, "65504, the largest f16"},
      {RX_DTYPE_F16, RX_DTYPE_F32, 0x477fefff, 0x7bff, "just below 65520: 65504"},
      {RX_DTYPE_F16, RX_DTYPE_F32, 0x477ff000, 0x7c00, "65520: a tie, to even: inf"},
      {RX_DTYPE_F16, RX_DTYPE_F32, 0x47800000, 0x7c00, "65536: inf"},
      {RX_DTYPE_F16, RX_DTYPE_F32, 0x7f7fffff, 0x7c00, "the largest f32: inf"},
      {RX_DTYPE_F16, RX_DTYPE_F32, 0x33800000, 0x0001, "2^-24, the smallest subnormal"},
      {RX_DTYPE_F16, RX_DTYPE_F32, 0x33000000, 0x0000, "2^-25: a tie, to even: 0"},
      {RX_DTYPE_F16, RX_DTYPE_F32, 0x33000001, 0x0001, "just above 2^-25: the smallest"},
      {RX_DTYPE_F16, RX_DTYPE_F32, 0x33400000, 0x0001, "1.5 * 2^-25: up"},
      {RX_DTYPE_F16, RX_DTYPE_F32, 0x33c00000, 0x0002, "3 * 2^-25: a tie, to even (up)"},
      {RX_DTYPE_F16, RX_DTYPE_F32, 0x387fc000, 0x03ff, "1023 * 2^-24, the largest subnormal"},
      {RX_DTYPE_F16, RX_DTYPE_F32, 0x387fe000, 0x0400, "2^-14 - 2^-25: a tie, up to a normal"},
      {RX_DTYPE_F16, RX_DTYPE_F32, 0x38800000, 0x0400, "2^-14, the smallest normal"},
      {RX_DTYPE_F16, RX_DTYPE_F32, 0x00000001, 0x0000, "an f32 subnormal: 0"},
      {RX_DTYPE_F16, RX_DTYPE_F32, 0x80000000, 0x8000, "-0"},
      {RX_DTYPE_F16, RX_DTYPE_F32, 0x7f800000, 0x7c00, "inf"},
      {RX_DTYPE_F16, RX_DTYPE_F32, 0xff800000, 0xfc00, "-inf"},
      {RX_DTYPE_BF16, RX_DTYPE_F32, 0x3f800000, 0x3f80, "1"},
      {RX_DTYPE_BF16, RX_DTYPE_F32, 0x3f808000, 0x3f80, "a tie, to even (down)"},
      {RX_DTYPE_BF16, RX_DTYPE_F32, 0x3f818000, 0x3f82, "a tie, to even (up)"},
      {RX_DTYPE_BF16, RX_DTYPE_F32, 0x3f808001, 0x3f81, "just above a tie: up"},
      {RX_DTYPE_BF16, RX_DTYPE_F32, 0x7f7f7fff, 0x7f7f, "below the largest's tie: finite"},
      {RX_DTYPE_BF16, RX_DTYPE_F32, 0x7f7fffff, 0x7f80, "the largest f32: inf"},
      {RX_DTYPE_BF16, RX_DTYPE_F32, 0x00008000, 0x0000, "a subnormal tie, to even (down)"},
      {RX_DTYPE_BF16, RX_DTYPE_F32, 0x00018000, 0x0002, "a subnormal tie, to even (up)"},
      {RX_DTYPE_BF16, RX_DTYPE_F32, 0x00010000, 0x0001, "the smallest bf16 subnormal"},
      {RX_DTYPE_BF16, RX_DTYPE_F32, 0x80000000, 0x8000, "-0"},
      {RX_DTYPE_BF16, RX_DTYPE_F32, 0xff800000, 0xff80, "-inf"},
      {RX_DTYPE_BF16, RX_DTYPE_F16, 0x3c01, 0x3f80, "f16 1 + 2^-10: 1"},
      {RX_DTYPE_BF16, RX_DTYPE_F16, 0x3c03, 0x3f80, "f16 1 + 3*2^-10: 1"},
      {RX_DTYPE_BF16, RX_DTYPE_F16, 0x3c04, 0x3f80, "f16 1 + 2^-8: a tie, to even (down)"},
      {RX_DTYPE_BF16, RX_DTYPE_F16, 0x3c0c, 0x3f82, "f16 1 + 3*2^-8: a tie, to even (up)"},
      {RX_DTYPE_BF16, RX_DTYPE_F16, 0x0001, 0x3380, "f16 2^-24: exact"},
      {RX_DTYPE_BF16, RX_DTYPE_F16, 0x7bff, 0x4780, "f16 65504: 65536"},
      {RX_DTYPE_BF16, RX_DTYPE_F16, 0xfc00, 0xff80, "f16 -inf"},
      {RX_DTYPE_F16, RX_DTYPE_BF16, 0x3f81, 0x3c08, "bf16 1 + 2^-7: exact"},
      {RX_DTYPE_F16, RX_DTYPE_BF16, 0x477f, 0x7bf8, "bf16 65280: exact"},
      {RX_DTYPE_F16, RX_DTYPE_BF16, 0x4780, 0x7c00, "bf16 65536: inf"},
      {RX_DTYPE_F16, RX_DTYPE_BF16, 0x3380, 0x0001, "bf16 2^-24: the smallest subnormal"},
      {RX_DTYPE_F16, RX_DTYPE_BF16, 0x3300, 0x0000, "bf16 2^-25: a tie, to even: 0"},
      {RX_DTYPE_F16, RX_DTYPE_BF16, 0x3340, 0x0001, "bf16 1.5 * 2^-25: up"},
      {RX_DTYPE_F16, RX_DTYPE_BF16, 0x7f80, 0x7c00, "bf16 inf"},
  };
  for (size_t i = 0; i < RX_ARRAY_LEN(cases); i++) {
    uint16_t got = to16(cases[i].to, cases[i].from, cases[i].in);
    CHECK_MSG(got == cases[i].want, "%s -> %s of 0x%x (%s): 0x%04x, expected 0x%04x",
              ir_dtype_name(cases[i].from), ir_dtype_name(cases[i].to), cases[i].in, cases[i].what,
              got, cases[i].want);
  }
  /* NaN stays NaN (quiet or signaling, either sign), never inf */
  static const uint32_t nan32[] = {0x7fc00000, 0x7f800001, 0xffc00001, 0x7fbfffff};
  for (size_t i = 0; i < RX_ARRAY_LEN(nan32); i++) {
    CHECK_MSG(is_nan16(RX_DTYPE_F16, to16(RX_DTYPE_F16, RX_DTYPE_F32, nan32[i])),
              "f32 NaN 0x%x -> f16", nan32[i]);
    CHECK_MSG(is_nan16(RX_DTYPE_BF16, to16(RX_DTYPE_BF16, RX_DTYPE_F32, nan32[i])),
              "f32 NaN 0x%x -> bf16", nan32[i]);
  }
  CHECK_MSG(is_nan16(RX_DTYPE_BF16, to16(RX_DTYPE_BF16, RX_DTYPE_F16, 0x7c01)), "f16 NaN -> bf16");
  CHECK_MSG(is_nan16(RX_DTYPE_F16, to16(RX_DTYPE_F16, RX_DTYPE_BF16, 0xff81)), "bf16 NaN -> f16");
  /* widening is exact */
  uint16_t h[4] = {0x0001, 0x7bff, 0x7c00, 0x7e00};
  float f[4];
  drv_weights_convert(RX_DTYPE_F32, f, RX_DTYPE_F16, h, 4);
  CHECK_MSG(f[0] == ldexpf(1, -24) && f[1] == 65504.0f && isinf(f[2]) && isnan(f[3]),
            "f16 -> f32: %g %g %g %g", f[0], f[1], f[2], f[3]);
  uint16_t b[3] = {0x3f81, 0x0001, 0xff80};
  drv_weights_convert(RX_DTYPE_F32, f, RX_DTYPE_BF16, b, 3);
  CHECK_MSG(f[0] == u2f(0x3f810000) && f[1] == u2f(0x00010000) && f[2] == u2f(0xff800000),
            "bf16 -> f32: %g %g %g", f[0], f[1], f[2]);
}

/* ---- the image ---- */

/* Every tensor of the image starts RXM_WEIGHTS_ALIGN-aligned at base (its offset in the file),
 * and reads back with base/safetensors.c. */
static void check_image(const uint8_t *img, size_t size, size_t base, const char *what,
                        rx_st_file *out) {
  rx_status s = base_st_parse(img, size, what, out);
  CHECK_MSG(!s, "%s: %s", what, rx_status_message(s));
  rx_status_free(s);
  if (s) return;
  CHECK_MSG((out->data - img) % RXM_WEIGHTS_ALIGN == 0, "%s: the data starts at %td", what,
            out->data - img);
  for (size_t i = 0; i < out->ntensors; i++)
    CHECK_MSG((base + (size_t)(out->data - img) + out->tensors[i].offset) % RXM_WEIGHTS_ALIGN == 0,
              "%s: tensor '%s' at %llu of the data", what, out->tensors[i].name,
              (unsigned long long)out->tensors[i].offset);
}

static void test_image(void) {
  rx_module *m = rx_module_new();
  float src[5] = {1.0f, u2f(0x3f801000), u2f(0x3f803000), 65520.0f, u2f(0x33000001)};
  uint8_t bytes[3] = {1, 2, 3};
  int64_t s5[1] = {5}, s3[1] = {3}, s0[1] = {0};
  RX_ASSERT(!rx_module_add_weight(m, "a.f16", RX_DTYPE_F16, 1, s5, RX_DTYPE_F32, src));
  RX_ASSERT(!rx_module_add_weight(m, "b/u8", RX_DTYPE_U8, 1, s3, RX_DTYPE_U8, bytes));
  RX_ASSERT(!rx_module_add_weight(m, "c \"q\"", RX_DTYPE_BF16, 1, s5, RX_DTYPE_F32, src));
  RX_ASSERT(!rx_module_add_weight(m, "empty", RX_DTYPE_F32, 1, s0, RX_DTYPE_F32, NULL));
  rx_weights_image img;
  drv_weights_layout(m, &img);
  uint8_t *buf = malloc(img.size);
  uint32_t crc = drv_weights_to_memory(m, &img, buf);
  CHECK_MSG(crc == drv_crc32(buf, img.size), "the streamed CRC is the image's");
  rx_st_file st;
  check_image(buf, img.size, 0, "image", &st);
  const rx_st_tensor *t = base_st_find(&st, "a.f16");
  static const uint16_t want16[5] = {0x3c00, 0x3c00, 0x3c02, 0x7c00, 0x0001};
  static const uint16_t wantb[5] = {0x3f80, 0x3f80, 0x3f80, 0x4780, 0x3300};
  CHECK_MSG(t && t->dtype == RX_DTYPE_F16 && !memcmp(st.data + t->offset, want16, 10),
            "a.f16: converted with rounding to nearest even");
  t = base_st_find(&st, "c \"q\"");
  CHECK_MSG(t && t->dtype == RX_DTYPE_BF16 && !memcmp(st.data + t->offset, wantb, 10),
            "c: bf16, its name escaped in the header");
  t = base_st_find(&st, "b/u8");
  CHECK_MSG(t && t->size == 3 && !memcmp(st.data + t->offset, bytes, 3), "b/u8: as is");
  t = base_st_find(&st, "empty");
  CHECK_MSG(t && t->size == 0, "an empty tensor");
  CHECK_MSG(st.ntensors == 4 && base_st_meta(&st, "format") &&
                !strcmp(base_st_meta(&st, "format"), "relaxc"),
            "4 tensors and the format");
  base_st_free(&st);
  free(buf);
  drv_weights_image_free(&img);
  rx_module_free(m);
}

static void test_refs(void) {
  static const char *const cases[][3] = {
      {"out/model.rxm", "out/model.weights", "model.weights"},
      {"/a/b/c/model.rxm", "/a/b/c/x/y.st", "x/y.st"},
      {"/a/b/model.rxm", "/a/b/./c/../d.st", "d.st"},
      {"model.rxm", "sub/dir/w.st", "sub/dir/w.st"},
  };
  for (size_t i = 0; i < RX_ARRAY_LEN(cases); i++) {
    char *ref = NULL;
    rx_status s = drv_weights_ref(cases[i][0], cases[i][1], &ref);
    CHECK_MSG(!s && ref && !strcmp(ref, cases[i][2]), "%s next to %s: '%s', expected '%s'",
              cases[i][1], cases[i][0], ref ? ref : rx_status_message(s), cases[i][2]);
    rx_status_free(s);
    free(ref);
  }
  char *ref = NULL;
  expect(drv_weights_ref("a/m.rxm", "a/../a/m.rxm", &ref), "is the artifact",
         "the artifact itself");
  /* outside the artifact's folder: the runtime would refuse the manifest's '../' name */
  expect(drv_weights_ref("out/model.rxm", "w/model.weights", &ref), "not in the folder",
         "a side file in another folder");
  expect(drv_weights_ref("/a/b/c/model.rxm", "/a/x.st", &ref), "not in the folder",
         "a side file above the artifact");
  CHECK_MSG(!ref, "no name on error");
}

/* ---- artifacts ---- */

/* y = (x + wa) * c, with c a constant; wb bound but unused. */
static const char *const program = "graph_fn main(x: f32[n, 4], wa: f32[4], wb: f16[3])\n"
                                   "    -> f32[n, 4] where n <= 64 {\n"
                                   "  dataflow {\n"
                                   "    c = const(f32[4], [1, 2, 3, 4])\n"
                                   "    y = add(x, wa)\n"
                                   "    z = multiply(y, c)\n"
                                   "  }\n"
                                   "  return z\n"
                                   "}\n";
static const float wa_src[4] = {10, 20, 30, 40}, wb_src[3] = {1, 2, 3};

static rx_module *module(const char *text) {
  rx_module *m = rx_module_new();
  int64_t s4[1] = {4}, s3[1] = {3};
  rx_status s = rx_module_parse(m, "weights.rx", text, strlen(text), NULL);
  if (!s) s = rx_module_add_weight(m, "wa", RX_DTYPE_F32, 1, s4, RX_DTYPE_F32, wa_src);
  if (!s) s = rx_module_add_weight(m, "wb", RX_DTYPE_F16, 1, s3, RX_DTYPE_F32, wb_src);
  CHECK_MSG(!s, "module: %s", rx_status_message(s));
  rx_status_free(s);
  return m;
}

static unsigned char *compile(const char *text, size_t *len) {
  rx_module *m = module(text);
  unsigned char *bytes = NULL;
  rx_compile_request req = {.targets = "vulkan-lavapipe"};
  rx_status s = rx_module_compile(m, &req, NULL, &bytes, len);
  CHECK_MSG(!s, "compile: %s", rx_status_message(s));
  rx_status_free(s);
  rx_module_free(m);
  return bytes;
}

/* Section name of artifact a: its offset and size in *off, *size; false when absent. */
static bool section(const unsigned char *a, size_t len, const char *name, size_t *off,
                    size_t *size) {
  uint32_t n = (uint32_t)a[8] | (uint32_t)a[9] << 8;
  for (uint32_t i = 0; i < n && 16 + (i + 1) * 88 <= len; i++) {
    const unsigned char *e = a + 16 + i * 88;
    if (strncmp((const char *)e, name, 64)) continue;
    uint64_t o = 0, z = 0;
    for (int b = 7; b >= 0; b--) o = o << 8 | e[64 + b], z = z << 8 | e[72 + b];
    *off = (size_t)o;
    *size = (size_t)z;
    return true;
  }
  return false;
}

/* A copy of the artifact with the first `from` in section `name` replaced by `to` (same length),
 * its CRCs fixed; loaded without a device, the error must hold want. */
static void corrupt(const unsigned char *art, size_t len, const char *name, const char *from,
                    const char *to, const char *want) {
  unsigned char *c = malloc(len);
  memcpy(c, art, len);
  size_t off = 0, size = 0, n = strlen(from);
  RX_ASSERT(strlen(to) == n && section(c, len, name, &off, &size));
  unsigned char *p = NULL;
  for (size_t i = off; !p && i + n <= off + size; i++)
    if (!memcmp(c + i, from, n)) p = c + i;
  CHECK_MSG(p != NULL, "'%s' not found in %s", from, name);
  if (p) {
    memcpy(p, to, n);
    fz_fix_crcs(c, len);
    rx_rt_artifact *a = NULL;
    char what[200];
    snprintf(what, sizeof what, "%s: '%s' -> '%s'", name, from, to);
    expect(rx_rt_artifact_load_memory(NULL, c, len, "w.rxm", &a), want, what);
    rx_rt_artifact_release(a);
  }
  free(c);
}

static void test_artifact(void) {
  size_t len = 0;
  unsigned char *art = compile(program, &len);
  if (!art) return;
  size_t off = 0, size = 0;
  CHECK_MSG(section(art, len, RXM_WEIGHTS_SECTION, &off, &size), "a weights section");
  CHECK_MSG(off % RXM_WEIGHTS_ALIGN == 0 && off + size <= len, "the section at %zu", off);
  rx_st_file st;
  check_image(art + off, size, off, "the section", &st);
  CHECK_MSG(st.ntensors == 3 && base_st_find(&st, "main.c") && base_st_find(&st, "wb"),
            "wa, wb and the constant main.c");
  base_st_free(&st);

  rx_rt_artifact *a = NULL;
  rx_status s = rx_rt_artifact_load_memory(NULL, art, len, "w.rxm", &a);
  CHECK_MSG(!s, "load: %s", rx_status_message(s));
  rx_status_free(s);
  if (a) {
    size_t wi = 9;
    rx_rt_weight_info info;
    CHECK_MSG(rx_rt_artifact_weight_count(a) == 3, "3 weights");
    CHECK_MSG(!rx_rt_artifact_param_weight(a, 0, 0, &wi), "x is an input");
    CHECK_MSG(rx_rt_artifact_param_weight(a, 0, 2, &wi) && rx_rt_artifact_weight(a, wi, &info) &&
                  !strcmp(info.name, "wb") && info.dtype == RX_DTYPE_F16 && info.bytes == 6 &&
                  !info.tensor,
              "wb bound, no tensor without a device");
    CHECK_MSG(!rx_rt_artifact_weights_file(a), "in the artifact");
    rx_rt_artifact_release(a);
  }
  /* the loader's errors, each naming the artifact and the place */
  corrupt(art, len, RXM_WEIGHTS_SECTION, "{\"__metadata__\"", "[\"__metadata__\"",
          "w.rxm: weights.safetensors: the header does not start with '{'");
  corrupt(art, len, RXM_WEIGHTS_SECTION, "\"data_offsets\":[0,16]", "\"data_offsets\":[0,17]",
          "holds 16 bytes, data_offsets say 17");
  corrupt(art, len, RXM_WEIGHTS_SECTION, "\"shape\":[3]", "\"shape\":[9]", "tensor 'wb'");
  corrupt(art, len, RXM_WEIGHTS_SECTION, "\"dtype\":\"F16\"", "\"dtype\":\"C64\"",
          "dtype C64 is not supported");
  corrupt(art, len, "manifest.json", "\"weight\": \"wa\"", "\"weight\": \"wz\"",
          "main: parameter 1 is bound to weight 'wz', which the artifact does not hold");
  corrupt(art, len, "manifest.json", "\"weight\": \"wa\"", "\"weight\": \"wb\"",
          "main: parameter 'wa' (f32[4]) is bound to weight 'wb', which is f16[3]");
  corrupt(art, len, "manifest.json", "\"tensors\": 3", "\"tensors\": 4",
          "its manifest lists 4 weights, weights.safetensors holds 3");
  corrupt(art, len, "host.rxvm", "main.c", "main.d",
          "reads weight 'main.d', which the artifact does not hold");
  /* the header's size word: past the end of the section */
  unsigned char *c = malloc(len);
  memcpy(c, art, len);
  c[off + 7] = 0x7f;
  fz_fix_crcs(c, len);
  rx_rt_artifact *b = NULL;
  expect(rx_rt_artifact_load_memory(NULL, c, len, "w.rxm", &b), "does not fit", "a header size");
  /* a host program of version 3 has no WEIGHT */
  size_t hoff = 0, hsize = 0;
  memcpy(c, art, len);
  RX_ASSERT(section(c, len, "host.rxvm", &hoff, &hsize));
  c[hoff + 4] = 3;
  fz_fix_crcs(c, len);
  expect(rx_rt_artifact_load_memory(NULL, c, len, "w.rxm", &b), "needs host program version 4",
         "WEIGHT in version 3");
  /* truncated: the file ends inside the weights section */
  expect(rx_rt_artifact_load_memory(NULL, art, off + size / 2, "w.rxm", &b), "truncated",
         "a truncated artifact");
  free(c);
  free(art);
}

/* A parameter named like a weight but of another type is a compile error. */
static void test_mismatch(void) {
  rx_module *m = module("graph_fn main(x: f32[4], wa: f32[5]) -> f32[4] {\n"
                        "  return x\n"
                        "}\n");
  unsigned char *bytes = NULL;
  size_t len = 0;
  rx_compile_request req = {.targets = "vulkan-lavapipe"};
  expect(rx_module_compile(m, &req, NULL, &bytes, &len),
         "parameter 'wa' is f32[5], but the weight of that name is f32[4]", "a mismatching type");
  free(bytes);
  rx_module_free(m);
}

static bool read_all(const char *path, unsigned char **out, size_t *len) {
  char *p = NULL;
  rx_status s = base_read_file(path, &p, len);
  rx_status_free(s);
  *out = (unsigned char *)p;
  return !s;
}

static bool write_all(const char *path, const void *data, size_t n) {
  FILE *f = fopen(path, "wb");
  bool ok = f && fwrite(data, 1, n, f) == n;
  if (f && fclose(f)) ok = false;
  return ok;
}

/* rx_module_compile_to_file: the weights streamed into the artifact (the same bytes as in
 * memory) or into a side file (the same image as the section), and the side file's errors. */
static void test_files(void) {
  char dir[] = "/tmp/rx_weightsXXXXXX", art[200], side[200], inside[200];
  if (!mkdtemp(dir)) {
    CHECK_MSG(false, "mkdtemp");
    return;
  }
  snprintf(art, sizeof art, "%s/m.rxm", dir);
  snprintf(side, sizeof side, "%s/m.weights", dir);
  snprintf(inside, sizeof inside, "%s/inside.rxm", dir);
  size_t mlen = 0;
  unsigned char *mem = compile(program, &mlen);
  rx_compile_request req = {.targets = "vulkan-lavapipe"};
  rx_module *m = module(program);
  rx_status s = rx_module_compile_to_file(m, &req, inside, NULL, NULL);
  CHECK_MSG(!s, "compile_to_file: %s", rx_status_message(s));
  rx_status_free(s);
  rx_module_free(m);
  unsigned char *file = NULL, *w = NULL;
  size_t flen = 0, wlen = 0, off = 0, size = 0;
  CHECK_MSG(read_all(inside, &file, &flen) && mem && flen == mlen && !memcmp(file, mem, mlen),
            "the streamed artifact equals the one built in memory");
  free(file);
  m = module(program);
  s = rx_module_compile_to_file(m, &req, art, side, NULL);
  CHECK_MSG(!s, "compile_to_file with a side file: %s", rx_status_message(s));
  rx_status_free(s);
  rx_module_free(m);
  CHECK_MSG(read_all(side, &w, &wlen) && mem &&
                section(mem, mlen, RXM_WEIGHTS_SECTION, &off, &size) && size == wlen &&
                !memcmp(mem + off, w, wlen),
            "the side file is the section's image");
  rx_rt_artifact *a = NULL;
  s = rx_rt_artifact_load(NULL, art, &a);
  CHECK_MSG(!s && a && rx_rt_artifact_weights_file(a) &&
                !strcmp(rx_rt_artifact_weights_file(a), side) &&
                rx_rt_artifact_weight_count(a) == 3,
            "loaded with its side file: %s", s ? rx_status_message(s) : "");
  rx_status_free(s);
  rx_rt_artifact_release(a);
  a = NULL;
  /* the manifest naming its side file by an absolute or a '../' path (same lengths as
   * "m.weights"), and the side file a symlink that leads out of the artifact's folder */
  if (read_all(art, &file, &flen)) {
    corrupt(file, flen, "manifest.json", "\"m.weights\"", "\"/dev/zero\"",
            "names the file '/dev/zero', an absolute path");
    corrupt(file, flen, "manifest.json", "\"m.weights\"", "\"../weight\"",
            "names the file '../weight', a path out of the artifact's folder");
    corrupt(file, flen, "manifest.json", "\"m.weights\"", "\"a/../../w\"",
            "names the file 'a/../../w', a path out of the artifact's folder");
    free(file);
  }
  char out_dir[] = "/tmp/rx_weights_outXXXXXX", out[200];
  if (w && mkdtemp(out_dir)) {
    snprintf(out, sizeof out, "%s/m.weights", out_dir);
    CHECK_MSG(write_all(out, w, wlen) && unlink(side) == 0 && symlink(out, side) == 0, "symlink");
    expect(rx_rt_artifact_load(NULL, art, &a), "outside the folder", "a side file linked outside");
    CHECK_MSG(unlink(side) == 0 && write_all(side, w, wlen), "the side file back");
    unlink(out);
    rmdir(out_dir);
  }
  if (w && wlen > 100) {
    w[wlen - 1] ^= 1;
    CHECK_MSG(write_all(side, w, wlen), "write");
    expect(rx_rt_artifact_load(NULL, art, &a), "is corrupted: its CRC32", "a corrupt side file");
    CHECK_MSG(write_all(side, w, wlen - 9), "write");
    expect(rx_rt_artifact_load(NULL, art, &a), "the artifact expects", "a truncated side file");
    unlink(side);
    s = rx_rt_artifact_load(NULL, art, &a);
    CHECK_MSG(s && rx_status_code_of(s) == RX_ERR_NOT_FOUND, "a missing side file: not found");
    expect(s, "m.weights': No such file", "a missing side file");
  }
  free(w);
  free(mem);
  unlink(art);
  unlink(inside);
  rmdir(dir);
}

/* ---- calls ---- */

/* A host allocator that refuses more than 1 MiB at once: a device "out of memory" for big weights
 * (the fuzz device keeps its buffers in host memory). */
static void *small_realloc(void *user, void *p, size_t n) {
  (void)user;
  if (!n) {
    free(p);
    return NULL;
  }
  return n > (1u << 20) ? NULL : realloc(p, n);
}

static void test_upload_oom(void) {
  size_t count = 1u << 19; /* 2 MiB of f32 */
  float *big = calloc(count, sizeof *big);
  rx_module *m = rx_module_new();
  const char *text = "graph_fn main(x: f32[4], big: f32[524288]) -> f32[4] {\n"
                     "  dataflow {\n    y = add(x, x)\n  }\n  return y\n}\n";
  int64_t shape[1] = {(int64_t)count};
  rx_status s = rx_module_parse(m, "big.rx", text, strlen(text), NULL);
  if (!s) s = rx_module_add_weight(m, "big", RX_DTYPE_F32, 1, shape, RX_DTYPE_F32, big);
  unsigned char *bytes = NULL;
  size_t len = 0;
  rx_compile_request req = {.targets = "vulkan-lavapipe"};
  if (!s) s = rx_module_compile(m, &req, NULL, &bytes, &len);
  CHECK_MSG(!s, "big: %s", rx_status_message(s));
  rx_status_free(s);
  rx_rt_device *d = fz_device_new();
  char path[] = "/tmp/rx_weights_bigXXXXXX";
  int fd = mkstemp(path);
  if (fd >= 0) close(fd);
  if (d && bytes && fd >= 0 && write_all(path, bytes, len)) {
    /* loaded from the file, which is mapped: the weight's buffer is the only large allocation */
    static const rx_rt_allocator small = {small_realloc, NULL};
    d->alloc = small;
    rx_rt_artifact *a = NULL;
    s = rx_rt_artifact_load(d, path, &a);
    CHECK_MSG(s && rx_status_code_of(s) == RX_ERR_OUT_OF_MEMORY, "out of memory");
    expect(s, "uploading weight 'big' (f32[524288], 2097152 bytes)", "an upload");
    rx_rt_artifact_release(a);
  }
  if (fd >= 0) unlink(path);
  rx_rt_device_release(d);
  free(bytes);
  rx_module_free(m);
  free(big);
}

/* A call with the wrong count of arguments to a function of many parameters (an LLM's has
 * hundreds, nearly all weights): the message lists the first 8 inputs with their types, Prims and
 * Shapes by their names and struct info (before: every name, "?" for those), then how many
 * more, and stays short (it was 23 KB for 296 parameters). */
static void test_count_message(void) {
  rx_strbuf text = {0};
  base_strbuf_append(&text, "graph_fn many(k: Prim(i64), s: Shape([a, b])");
  for (int i = 0; i < 300; i++) base_strbuf_printf(&text, ", p%d: f32[%d]", i, i % 7 + 1);
  base_strbuf_append(&text, ") -> f32[1] {\n  return p0\n}\n");
  size_t len = 0;
  rx_module *m = rx_module_new();
  rx_status s = rx_module_parse(m, "many.rx", text.data, text.len, NULL);
  unsigned char *bytes = NULL;
  rx_compile_request req = {.targets = "vulkan-lavapipe"};
  if (!s) s = rx_module_compile(m, &req, NULL, &bytes, &len);
  CHECK_MSG(!s, "many: %s", rx_status_message(s));
  rx_status_free(s);
  rx_module_free(m);
  base_strbuf_free(&text);
  rx_rt_device *d = fz_device_new();
  rx_rt_artifact *a = NULL;
  s = bytes && d ? rx_rt_artifact_load_memory(d, bytes, len, "many.rxm", &a) : NULL;
  CHECK_MSG(!s, "many: load: %s", rx_status_message(s));
  rx_status_free(s);
  if (a) {
    rx_rt_param_info pi;
    CHECK_MSG(rx_rt_artifact_function_param(a, 0, 0, &pi) && !strcmp(pi.name, "k") &&
                  !strcmp(pi.expected, "Prim(i64)"),
              "a Prim parameter: '%s' (%s)", pi.name, pi.expected);
    CHECK_MSG(rx_rt_artifact_function_param(a, 0, 1, &pi) && !strcmp(pi.name, "s") &&
                  !strcmp(pi.expected, "Shape([a, b])"),
              "a Shape parameter: '%s' (%s)", pi.name, pi.expected);
    rx_rt_value *r = NULL;
    s = rx_rt_vm_call_values(a, "many", NULL, 0, &r);
    const char *want = "many takes 302 arguments (k: Prim(i64), s: Shape([a, b]), p0: f32[1], "
                       "p1: f32[2], p2: f32[3], p3: f32[4], p4: f32[5], p5: f32[6], and 294 more), "
                       "got 0";
    CHECK_MSG(s && !strcmp(rx_status_message(s), want), "many: %s",
              s ? rx_status_message(s) : "ok");
    rx_status_free(s);
    rx_rt_value_release(r);
  }
  rx_rt_artifact_release(a);
  rx_rt_device_release(d);
  free(bytes);
}

/* The calls' argument rules on device d; with check, the numbers too. */
static void test_calls_on(rx_rt_device *d, bool check) {
  size_t len = 0;
  unsigned char *bytes = compile(program, &len);
  rx_rt_artifact *a = NULL;
  rx_status s = bytes ? rx_rt_artifact_load_memory(d, bytes, len, "w.rxm", &a) : NULL;
  CHECK_MSG(!s && a, "load on %s: %s", rx_rt_device_get_info(d)->name, rx_status_message(s));
  rx_status_free(s);
  free(bytes);
  if (!a) return;
  /* the artifact keeps its weights' buffers (rx_rt_buffer_kept: a caller copies a result there) */
  for (size_t i = 0; i < rx_rt_artifact_weight_count(a); i++) {
    rx_rt_weight_info wi;
    CHECK(rx_rt_artifact_weight(a, i, &wi) && wi.tensor &&
          rx_rt_buffer_kept(rx_rt_tensor_buffer(wi.tensor)));
  }
  float x[8] = {1, 2, 3, 4, -1, -2, -3, -4}, y[8], zero[4] = {0};
  int64_t xs[2] = {2, 4}, s4[1] = {4}, s3[1] = {3};
  uint16_t h3[3] = {0};
  rx_rt_tensor *tx = NULL, *tz = NULL, *th = NULL;
  RX_ASSERT(!rx_rt_tensor_from_host(d, RX_DTYPE_F32, 2, xs, x, &tx));
  RX_ASSERT(!rx_rt_tensor_from_host(d, RX_DTYPE_F32, 1, s4, zero, &tz));
  RX_ASSERT(!rx_rt_tensor_from_host(d, RX_DTYPE_F16, 1, s3, h3, &th));
  rx_rt_value *r = NULL, *vx = NULL;
  /* the inputs alone: the weights are bound */
  s = rx_rt_vm_call(a, "main", &tx, 1, &r);
  CHECK_MSG(!s, "main(x): %s", rx_status_message(s));
  if (!s && check) {
    s = rx_rt_tensor_read(rx_rt_value_tensor(r), y, sizeof y);
    for (int i = 0; i < 8 && !s; i++)
      CHECK_MSG(y[i] == (x[i] + wa_src[i % 4]) * (float)(i % 4 + 1), "main(x)[%d] = %g", i, y[i]);
  }
  rx_status_free(s);
  rx_rt_value_release(r);
  r = NULL;
  /* every parameter: wa overridden by zeros */
  rx_rt_tensor *all[3] = {tx, tz, th};
  s = rx_rt_vm_call(a, "main", all, 3, &r);
  CHECK_MSG(!s, "main(x, wa, wb): %s", rx_status_message(s));
  if (!s && check) {
    s = rx_rt_tensor_read(rx_rt_value_tensor(r), y, sizeof y);
    for (int i = 0; i < 8 && !s; i++)
      CHECK_MSG(y[i] == x[i] * (float)(i % 4 + 1), "main(x, 0, wb)[%d] = %g", i, y[i]);
  }
  rx_status_free(s);
  rx_rt_value_release(r);
  r = NULL;
  expect(rx_rt_vm_call(a, "main", all, 2, &r),
         "main takes 1 argument (x: f32[n, 4]) and gets its 2 weights from the artifact, or all "
         "3 to override them, got 2",
         "two arguments");
  /* values */
  RX_ASSERT(!rx_rt_value_from_tensor(tx, &vx));
  s = rx_rt_vm_call_values(a, "main", &vx, 1, &r);
  CHECK_MSG(!s && r && rx_rt_value_kind_of(r) == RX_RT_VALUE_TENSOR, "call_values(x): %s",
            rx_status_message(s));
  rx_status_free(s);
  rx_rt_value_release(r);
  r = NULL;
  rx_rt_value *p = NULL, *sh = NULL;
  int64_t dims[2] = {2, 4};
  const int64_t *got = NULL;
  rx_dtype dt = RX_DTYPE_UNKNOWN;
  CHECK_MSG(!rx_rt_value_from_prim(RX_DTYPE_I64, 5, &p) && rx_rt_value_prim(p, &dt) == 5 &&
                dt == RX_DTYPE_I64,
            "a prim value");
  CHECK_MSG(!rx_rt_value_from_shape(dims, 2, &sh) && rx_rt_value_shape(sh, &got) == 2 &&
                got[1] == 4,
            "a shape value");
  expect(rx_rt_value_from_shape(dims, 17, &r), "17 dims", "a shape of 17 dims");
  expect(rx_rt_vm_call_values(a, "main", &p, 1, &r),
         "parameter 'x': expected f32[n, 4], got a prim", "a prim for a tensor");
  rx_rt_value *none = NULL;
  expect(rx_rt_vm_call_values(a, "main", &none, 1, &r), "parameter 0 'x': NULL", "NULL");
  rx_rt_value_release(p);
  rx_rt_value_release(sh);
  rx_rt_value_release(vx);
  rx_rt_tensor_release(tx);
  rx_rt_tensor_release(tz);
  rx_rt_tensor_release(th);
  rx_rt_artifact_release(a);
}

static void test_calls(void) {
  rx_rt_device *d = fz_device_new();
  if (d) test_calls_on(d, false);
  rx_rt_device_release(d);
  d = NULL;
  rx_rt_device_options o = {NULL, -1, false};
  rx_status s = rx_rt_device_open("vulkan", &o, &d);
  if (s) {
    printf("skipped: the calls on Vulkan (%s)\n", rx_status_message(s));
    rx_status_free(s);
    return;
  }
  test_calls_on(d, true);
  const char *last = NULL;
  CHECK_MSG(rx_rt_device_validation_messages(d, &last) == 0, "validation: %s", last);
  rx_rt_device_release(d);
}

int main(void) {
  test_table();
  test_convert();
  test_image();
  test_refs();
  test_artifact();
  test_mismatch();
  test_files();
  test_upload_oom();
  test_calls();
  test_count_message();
  return check_finish("test_weights");
}
