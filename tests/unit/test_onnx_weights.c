/* The weights of ONNX models (frontends/onnx/weights.c), from the models tests/onnx/gen_weights.py
 * writes into tests/onnx/weights/ (every value follows a formula repeated here):
 * - typed.onnx: weights of every supported dtype, inline in raw_data and in the typed fields
 *   (float_data, int32_data, int64_data), the tensors that fold into symbolic values and
 *   constants (not weights), and Constant tensors that are weights;
 * - ext.onnx: every tensor in the external file ext.data (f32, f16 and an i64 index vector of
 *   20 elements), imported (the weights are parameters of `main` in the order
 *   onnx_weights gives) and read;
 * - the errors: a DOUBLE weight, external data locations that are absolute or lead out of the
 *   model's directory, a missing data file and a truncated one.
 *
 * usage: test_onnx_weights TESTS_DIR */
#include "base/base.h"
#include "check.h"

#ifdef RX_HAVE_ONNX
#include "frontends/onnx/onnx_import.h"
#include "ir/ir.h"
#endif

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#ifdef RX_HAVE_ONNX

static char *read_model(const char *dir, const char *model, size_t *len) {
  char path[1024];
  snprintf(path, sizeof path, "%s/onnx/weights/%s", dir, model);
  char *bytes = NULL;
  rx_status s = base_read_file(path, &bytes, len);
  CHECK_MSG(!s, "%s", rx_status_message(s));
  rx_status_free(s);
  return bytes;
}

/* The weight named `name`, checked to have dtype dt and the shape; NULL when absent. */
static const rx_onnx_weight *weight(const rx_onnx_weight *w, int n, const char *name, rx_dtype dt,
                                    int ndim, const int64_t *shape) {
  for (int i = 0; i < n; i++) {
    if (strcmp(w[i].name, name) != 0) continue;
    bool same = w[i].dtype == dt && w[i].ndim == ndim;
    size_t count = 1;
    for (int d = 0; same && d < ndim; d++) {
      same = w[i].shape[d] == shape[d];
      count *= (size_t)shape[d];
    }
    CHECK_MSG(same, "weight %s: wrong dtype or shape", name);
    CHECK_MSG(w[i].count == count, "weight %s: count %zu, expected %zu", name, w[i].count, count);
    size_t es = (size_t)ir_dtype_bits(dt) / 8;
    CHECK_MSG(w[i].nbytes == count * es, "weight %s: %zu bytes, expected %zu", name, w[i].nbytes,
              count * es);
    return same && w[i].nbytes == count * es ? &w[i] : NULL;
  }
  CHECK_MSG(false, "no weight %s", name);
  return NULL;
}

static const int64_t S0[1] = {0}, S3[1] = {3}, S4[1] = {4}, S5[1] = {5}, S6[1] = {6}, S17[1] = {17},
                     S18[1] = {18}, S20[1] = {20}, S22[2] = {2, 2}, S23[2] = {2, 3},
                     S86[2] = {8, 6};

/* The weights of `model` (external data from base_dir) into *w, *n; returns the model's bytes
 * (freed after the weights), NULL when the model cannot be read. */
static char *model_weights(const char *dir, const char *model, const char *base_dir,
                           rx_onnx_weight **w, int *n) {
  size_t len;
  *w = NULL;
  *n = 0;
  char *bytes = read_model(dir, model, &len);
  if (!bytes) return NULL;
  rx_status s = onnx_weights(bytes, len, model, base_dir, w, n);
  CHECK_MSG(!s, "%s: %s", model, rx_status_message(s));
  rx_status_free(s);
  return bytes;
}

/* Inline weights of every dtype, in parameter order; the folded tensors are not weights. */
static void test_typed(const char *dir) {
  rx_onnx_weight *w;
  int n;
  char *bytes = model_weights(dir, "typed.onnx", NULL, &w, &n);
  if (!bytes) return;
  static const char *const order[] = {
      "layer_0_w", "f32_typed", "f16_typed", "bf16_typed", "i8_typed", "u8_raw", "bool_typed",
      "i32_raw",   "i64_mat",   "i64_17",    "cf",         "ci",       "ch"};
  CHECK_MSG(n == (int)RX_ARRAY_LEN(order), "typed.onnx: %d weights, expected %d", n,
            (int)RX_ARRAY_LEN(order));
  for (int i = 0; i < n && i < (int)RX_ARRAY_LEN(order); i++)
    CHECK_MSG(!strcmp(w[i].name, order[i]), "typed.onnx: weight %d is %s, expected %s", i,
              w[i].name, order[i]);
  const rx_onnx_weight *x;
  if ((x = weight(w, n, "layer_0_w", RX_DTYPE_F32, 2, S23)))
    for (int k = 0; k < 6; k++)
      CHECK_MSG(((float *)x->data)[k] == k * 0.5f - 1, "layer_0_w[%d] = %g", k,
                ((float *)x->data)[k]);
  if ((x = weight(w, n, "f32_typed", RX_DTYPE_F32, 1, S4)))
    for (int k = 0; k < 4; k++)
      CHECK_MSG(((float *)x->data)[k] == k + 0.25f, "f32_typed[%d] = %g", k, ((float *)x->data)[k]);
  /* 1.5, -2, 0.25 as f16 and bf16 bit patterns */
  static const uint16_t f16[3] = {0x3e00, 0xc000, 0x3400}, bf16[3] = {0x3fc0, 0xc000, 0x3e80};
  if ((x = weight(w, n, "f16_typed", RX_DTYPE_F16, 1, S3)))
    CHECK_MSG(!memcmp(x->data, f16, 6), "f16_typed: wrong bits %04x", ((uint16_t *)x->data)[0]);
  if ((x = weight(w, n, "bf16_typed", RX_DTYPE_BF16, 1, S3)))
    CHECK_MSG(!memcmp(x->data, bf16, 6), "bf16_typed: wrong bits %04x", ((uint16_t *)x->data)[0]);
  if ((x = weight(w, n, "i8_typed", RX_DTYPE_I8, 1, S5)))
    for (int k = 0; k < 5; k++)
      CHECK_MSG(((int8_t *)x->data)[k] == k - 3, "i8_typed[%d] = %d", k, ((int8_t *)x->data)[k]);
  static const uint8_t u8[4] = {0, 100, 200, 255}, b[4] = {1, 0, 0, 1};
  if ((x = weight(w, n, "u8_raw", RX_DTYPE_U8, 1, S4)))
    CHECK_MSG(!memcmp(x->data, u8, 4), "u8_raw: wrong values");
  if ((x = weight(w, n, "bool_typed", RX_DTYPE_BOOL, 2, S22)))
    CHECK_MSG(!memcmp(x->data, b, 4), "bool_typed: wrong values");
  if ((x = weight(w, n, "i32_raw", RX_DTYPE_I32, 1, S18)))
    for (int k = 0; k < 18; k++)
      CHECK_MSG(((int32_t *)x->data)[k] == k - 9, "i32_raw[%d] = %d", k, ((int32_t *)x->data)[k]);
  if ((x = weight(w, n, "i64_mat", RX_DTYPE_I64, 2, S22)))
    for (int k = 0; k < 4; k++) CHECK_MSG(((int64_t *)x->data)[k] == k + 1, "i64_mat[%d] wrong", k);
  if ((x = weight(w, n, "i64_17", RX_DTYPE_I64, 1, S17)))
    for (int k = 0; k < 17; k++)
      CHECK_MSG(((int64_t *)x->data)[k] == k * 1000000007ll, "i64_17[%d] wrong", k);
  if ((x = weight(w, n, "cf", RX_DTYPE_F32, 1, S3)))
    for (int k = 0; k < 3; k++)
      CHECK_MSG(((float *)x->data)[k] == k + 0.5f, "cf[%d] = %g", k, ((float *)x->data)[k]);
  if ((x = weight(w, n, "ci", RX_DTYPE_I64, 1, S20)))
    for (int k = 0; k < 20; k++) CHECK_MSG(((int64_t *)x->data)[k] == -3 * k, "ci[%d] wrong", k);
  static const uint16_t three = 0x4200; /* 3.0 as f16 */
  if ((x = weight(w, n, "ch", RX_DTYPE_F16, 0, S0)))
    CHECK_MSG(!memcmp(x->data, &three, 2), "ch: wrong bits");
  onnx_weights_free(w, n);
  free(bytes);
}

/* A model of weights in an external file: imported and read. */
/* f64 and the unsigned dtypes from their typed fields: double_data, int32_data (u16) and
 * uint64_data (u32 and u64), values at the ends of each range; and f64 from raw_data */
static void test_typed_wide(const char *dir) {
  rx_onnx_weight *w;
  int n;
  char *bytes = model_weights(dir, "double.onnx", NULL, &w, &n);
  static const int64_t S2w[1] = {2};
  const rx_onnx_weight *x;
  if (bytes && (x = weight(w, n, "d", RX_DTYPE_F64, 1, S2w)))
    CHECK_MSG(((const double *)x->data)[0] == 1.0 && ((const double *)x->data)[1] == 2.0,
              "double.onnx: d is not [1.0, 2.0]");
  onnx_weights_free(w, n);
  free(bytes);
  bytes = model_weights(dir, "typed_wide.onnx", NULL, &w, &n);
  if (!bytes) return;
  static const double d[3] = {0.1, -2.5, 1e300};
  static const uint16_t u16[3] = {0, 40000, 65535};
  static const uint32_t u32[2] = {4000000000u, 7};
  static const uint64_t u64[2] = {UINT64_MAX, (uint64_t)1 << 63};
  if ((x = weight(w, n, "d_typed", RX_DTYPE_F64, 1, S3)))
    CHECK_MSG(!memcmp(x->data, d, sizeof d), "d_typed: wrong values");
  if ((x = weight(w, n, "u16_typed", RX_DTYPE_U16, 1, S3)))
    CHECK_MSG(!memcmp(x->data, u16, sizeof u16), "u16_typed: wrong values");
  if ((x = weight(w, n, "u32_typed", RX_DTYPE_U32, 1, S2w)))
    CHECK_MSG(!memcmp(x->data, u32, sizeof u32), "u32_typed: wrong values");
  if ((x = weight(w, n, "u64_typed", RX_DTYPE_U64, 1, S2w)))
    CHECK_MSG(!memcmp(x->data, u64, sizeof u64), "u64_typed: wrong values");
  onnx_weights_free(w, n);
  free(bytes);
}

static void test_external(const char *dir) {
  size_t len;
  char *bytes = read_model(dir, "ext.onnx", &len);
  if (!bytes) return;
  rx_module *m = rx_module_new();
  rx_status s = onnx_import(m, bytes, len, "ext.onnx", NULL, NULL);
  CHECK_MSG(!s, "ext.onnx: import: %s", rx_status_message(s));
  rx_status_free(s);
  if (!s) {
    char *text = rx_module_to_text(m);
    const char *sig = "main(x: f32[batch, 8], W: f32[8, 6], H: f16[6], idx: i64[20])";
    CHECK_MSG(strstr(text, sig) != NULL, "ext.onnx: the imported main is not %s:\n%s", sig, text);
    rx_free(text);
  }
  rx_module_free(m);

  char base[1024];
  snprintf(base, sizeof base, "%s/onnx/weights", dir);
  rx_onnx_weight *w = NULL;
  int n = 0;
  s = onnx_weights(bytes, len, "ext.onnx", base, &w, &n);
  CHECK_MSG(!s, "ext.onnx: weights: %s", rx_status_message(s));
  rx_status_free(s);
  CHECK_MSG(n == 3, "ext.onnx: %d weights, expected 3", n);
  const rx_onnx_weight *x;
  if ((x = weight(w, n, "W", RX_DTYPE_F32, 2, S86)))
    for (int k = 0; k < 48; k++)
      CHECK_MSG(((float *)x->data)[k] == ((k % 11) - 5) * 0.25f, "W[%d] = %g", k,
                ((float *)x->data)[k]);
  static const uint16_t h[6] = {0xbc00, 0xb800, 0x0000, 0x3800, 0x3c00, 0x3e00}; /* j/2 - 1 */
  if ((x = weight(w, n, "H", RX_DTYPE_F16, 1, S6)))
    CHECK_MSG(!memcmp(x->data, h, sizeof h), "H: wrong bits");
  if ((x = weight(w, n, "idx", RX_DTYPE_I64, 1, S20)))
    for (int k = 0; k < 20; k++)
      CHECK_MSG(((int64_t *)x->data)[k] == (k * 7) % 6, "idx[%d] = %lld", k,
                (long long)((int64_t *)x->data)[k]);
  onnx_weights_free(w, n);
  free(bytes);
}

/* onnx_weights of `model` with base_dir fails with a message holding every one of `want`. */
static void expect_error(const char *dir, const char *model, const char *base_dir,
                         rx_status_code code, const char *const *want, int nwant) {
  size_t len;
  char *bytes = read_model(dir, model, &len);
  if (!bytes) return;
  rx_onnx_weight *w = NULL;
  int n = 0;
  rx_status s = onnx_weights(bytes, len, model, base_dir, &w, &n);
  CHECK_MSG(s != NULL && w == NULL && n == 0, "%s: read without an error", model);
  if (s) {
    CHECK_MSG(rx_status_code_of(s) == code, "%s: status code %d, expected %d", model,
              (int)rx_status_code_of(s), (int)code);
    for (int i = 0; i < nwant; i++)
      CHECK_MSG(strstr(rx_status_message(s), want[i]) != NULL, "%s: message without '%s': %s",
                model, want[i], rx_status_message(s));
    printf("  %s: %s\n", model, rx_status_message(s));
  }
  rx_status_free(s);
  onnx_weights_free(w, n);
  free(bytes);
}

static bool write_bytes(const char *path, const void *data, size_t n) {
  FILE *f = fopen(path, "wb");
  if (!f) return false;
  bool ok = fwrite(data, 1, n, f) == n;
  return fclose(f) == 0 && ok;
}

static void test_errors(const char *dir) {
  char base[1024];
  snprintf(base, sizeof base, "%s/onnx/weights", dir);
  const char *cpx[] = {"complex.onnx", "tensor 'c'", "COMPLEX64"};
  expect_error(dir, "complex.onnx", base, RX_ERR_UNSUPPORTED, cpx, 3);
  /* '../weights/ext.data' names an existing file, but through the parent directory */
  const char *esc[] = {"escape.onnx", "tensor 'W'", "'../weights/ext.data'",
                       "leads out of the model's directory"};
  expect_error(dir, "escape.onnx", base, RX_ERR_INVALID, esc, 4);
  const char *abs[] = {"abs.onnx", "tensor 'W'", "'/dev/null'", "absolute"};
  expect_error(dir, "abs.onnx", base, RX_ERR_INVALID, abs, 4);

  /* a missing and a truncated data file, in a fresh directory */
  char tmp[] = "/tmp/rx_onnx_weightsXXXXXX";
  CHECK_MSG(mkdtemp(tmp) != NULL, "mkdtemp failed");
  char data[1100];
  snprintf(data, sizeof data, "%s/ext.data", tmp);
  const char *missing[] = {"ext.onnx", "tensor 'W'", data, "cannot read"};
  expect_error(dir, "ext.onnx", tmp, RX_ERR_INVALID, missing, 4);
  char full[1100], *bytes = NULL;
  size_t len = 0;
  snprintf(full, sizeof full, "%s/ext.data", base);
  rx_status s = base_read_file(full, &bytes, &len);
  CHECK_MSG(!s && len == 364, "%s: %s (%zu bytes, expected 364)", full, rx_status_message(s), len);
  rx_status_free(s);
  if (bytes && len == 364) {
    /* W [0, 192) and H [192, 204) are whole, idx [204, 364) is cut */
    CHECK_MSG(write_bytes(data, bytes, 300), "writing %s failed", data);
    const char *cut[] = {"ext.onnx", "tensor 'idx'", data, "offset 204, length 160", "300 bytes"};
    expect_error(dir, "ext.onnx", tmp, RX_ERR_INVALID, cut, 5);
  }
  free(bytes);
  unlink(data);
  rmdir(tmp);
}

/* ext.onnx with its ext.data reached through symlinks (frontends/onnx/weights.c,
 * base_path_check_inside; docs/inputs.md, "ONNX external data"): one that leads out of the model's
 * folder is refused naming where it leads; the layout of a Hugging Face cache
 * (snapshots/REV/ext.data ->
 * ../../blobs/HASH) is read; a link out of the snapshot to anywhere but its repository's blobs/,
 * or the same layout in a folder not named models--*, is refused. */
static void test_symlinks(const char *dir) {
  char real[1100], tmp[] = "/tmp/rx_onnx_linksXXXXXX", p[1200], q[1200];
  char cwd[512] = ""; /* the links' targets: absolute */
  if (dir[0] != '/') CHECK_MSG(getcwd(cwd, sizeof cwd - 1) != NULL, "getcwd failed");
  snprintf(real, sizeof real, "%s%s%s/onnx/weights/ext.data", cwd, cwd[0] ? "/" : "", dir);
  CHECK_MSG(mkdtemp(tmp) != NULL, "mkdtemp failed");
  char *bytes = NULL;
  size_t len = 0;
  rx_status s = base_read_file(real, &bytes, &len);
  CHECK_MSG(!s, "%s: %s", real, rx_status_message(s));
  rx_status_free(s);
  if (!bytes) return;
  /* tmp/model/ext.data -> the tests' ext.data, outside tmp/model */
  snprintf(p, sizeof p, "%s/model", tmp);
  CHECK_MSG(mkdir(p, 0777) == 0, "mkdir %s", p);
  snprintf(q, sizeof q, "%s/model/ext.data", tmp);
  CHECK_MSG(symlink(real, q) == 0, "symlink %s", q);
  const char *out[] = {"ext.onnx", "tensor 'W'", "resolves to", "outside the folder",
                       "it must lie inside the model's folder"};
  expect_error(dir, "ext.onnx", p, RX_ERR_INVALID, out, 5);
  unlink(q);
  rmdir(p);
  /* a Hugging Face cache: models--org--name/{blobs/HASH, snapshots/REV/ext.data -> blob} */
  const char *mk[] = {"models--org--name",
                      "models--org--name/blobs",
                      "models--org--name/snapshots",
                      "models--org--name/snapshots/abc",
                      "other",
                      "other/blobs",
                      "other/snapshots",
                      "other/snapshots/abc"};
  for (size_t i = 0; i < sizeof mk / sizeof *mk; i++) {
    snprintf(p, sizeof p, "%s/%s", tmp, mk[i]);
    CHECK_MSG(mkdir(p, 0777) == 0, "mkdir %s", p);
  }
  const char *roots[] = {"models--org--name", "other"};
  for (int r = 0; r < 2; r++) {
    snprintf(p, sizeof p, "%s/%s/blobs/0123abcd", tmp, roots[r]);
    CHECK_MSG(write_bytes(p, bytes, len), "writing %s failed", p);
    snprintf(q, sizeof q, "%s/%s/snapshots/abc/ext.data", tmp, roots[r]);
    CHECK_MSG(symlink("../../blobs/0123abcd", q) == 0, "symlink %s", q);
  }
  snprintf(p, sizeof p, "%s/models--org--name/snapshots/abc", tmp);
  rx_onnx_weight *w = NULL;
  int n = 0;
  size_t mlen;
  char *model = read_model(dir, "ext.onnx", &mlen);
  s = model ? onnx_weights(model, mlen, "ext.onnx", p, &w, &n) : NULL;
  CHECK_MSG(!s && n == 3, "a Hugging Face cache's snapshot: %s", rx_status_message(s));
  rx_status_free(s);
  onnx_weights_free(w, n);
  free(model);
  snprintf(p, sizeof p, "%s/other/snapshots/abc", tmp);
  const char *other[] = {"ext.onnx", "tensor 'W'", "blobs/0123abcd", "outside the folder"};
  expect_error(dir, "ext.onnx", p, RX_ERR_INVALID, other, 4);
  /* a link from the cache's snapshot to a file outside the repository */
  snprintf(q, sizeof q, "%s/models--org--name/snapshots/abc/ext.data", tmp);
  unlink(q);
  CHECK_MSG(symlink(real, q) == 0, "symlink %s", q);
  snprintf(p, sizeof p, "%s/models--org--name/snapshots/abc", tmp);
  const char *esc[] = {"ext.onnx", "tensor 'W'", "outside the folder", "Hugging Face cache's"};
  expect_error(dir, "ext.onnx", p, RX_ERR_INVALID, esc, 4);
  for (int r = 0; r < 2; r++) {
    snprintf(p, sizeof p, "%s/%s/blobs/0123abcd", tmp, roots[r]);
    unlink(p);
    snprintf(p, sizeof p, "%s/%s/snapshots/abc/ext.data", tmp, roots[r]);
    unlink(p);
  }
  for (size_t i = sizeof mk / sizeof *mk; i-- > 0;) {
    snprintf(p, sizeof p, "%s/%s", tmp, mk[i]);
    rmdir(p);
  }
  rmdir(tmp);
  free(bytes);
}

/* onnx_tensor_file: a TensorProto as the ONNX test data stores it (input_0.pb), written here
 * byte by byte: dims 3 (field 1), data_type FLOAT (2), name "x" (8), raw_data 12 bytes (9). */
static void test_tensor_file(void) {
  const float want[3] = {1.5f, -2, 0.25f};
  uint8_t pb[64] = {0x08, 3, 0x10, 1, 0x42, 1, 'x', 0x4a, 12};
  memcpy(pb + 9, want, sizeof want);
  size_t len = 9 + sizeof want;
  rx_onnx_weight t;
  rx_status s = onnx_tensor_file(pb, len, "t.pb", &t);
  CHECK_MSG(!s, "t.pb: %s", rx_status_message(s));
  if (!s) {
    CHECK_MSG(t.dtype == RX_DTYPE_F32 && t.ndim == 1 && t.shape[0] == 3 && t.count == 3 &&
                  !strcmp(t.name, "x") && !memcmp(t.data, want, sizeof want),
              "t.pb: wrong tensor");
    free(t.name);
    free(t.data);
  }
  rx_status_free(s);
  /* cut inside raw_data: not a TensorProto */
  s = onnx_tensor_file(pb, len - 1, "cut.pb", &t);
  CHECK_MSG(s && strstr(rx_status_message(s), "cut.pb: not an ONNX TensorProto"), "cut: %s",
            rx_status_message(s));
  rx_status_free(s);
  /* INT64 with 12 bytes for 3 elements */
  pb[3] = 7;
  s = onnx_tensor_file(pb, len, "i64.pb", &t);
  CHECK_MSG(s && strstr(rx_status_message(s), "i64.pb"), "i64: %s", rx_status_message(s));
  rx_status_free(s);
  /* data_location EXTERNAL (field 14) */
  pb[3] = 1;
  pb[len] = 0x70;
  pb[len + 1] = 1;
  s = onnx_tensor_file(pb, len + 2, "ext.pb", &t);
  CHECK_MSG(s && strstr(rx_status_message(s), "ext.pb: the tensor's data is in an external file"),
            "external: %s", rx_status_message(s));
  rx_status_free(s);
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: test_onnx_weights TESTS_DIR\n");
    return 2;
  }
  test_typed(argv[1]);
  test_typed_wide(argv[1]);
  test_external(argv[1]);
  test_errors(argv[1]);
  test_symlinks(argv[1]);
  test_tensor_file();
  return check_finish("test_onnx_weights");
}

#else

int main(void) {
  puts("test_onnx_weights: ONNX support not built, skipped");
  return 77;
}

#endif
