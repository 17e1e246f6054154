/* The GGUF reader and dequantization (frontends/gguf/gguf.c, gguf_quant.c): files written by
 * gguf-py's own writer (tests/gguf/gen_fixtures.py) read back value by value, every tensor's info
 * checked and every block type dequantized bit for bit equal to gguf-py's NumPy reference
 * (tests/gguf/ref); then the fixture truncated at every length, and images built here with one
 * thing wrong each, every one refused with a message that names the file, the place and what was
 * expected.
 *
 * usage: test_gguf TESTS_DIR */
#include "base/base.h"
#include "base/npy.h"
#include "check.h"
#include "frontends/gguf/gguf.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *dir = "tests";

/* A fixture file (heap); NULL after a failed check. */
static char *load(const char *file, size_t *len) {
  char path[4096];
  snprintf(path, sizeof path, "%s/gguf/%s", dir, file);
  char *buf = NULL;
  rx_status s = base_read_file(path, &buf, len);
  CHECK_MSG(!s, "%s", rx_status_message(s));
  rx_status_free(s);
  return buf;
}

/* ---- metadata ---- */

static const rx_gguf_value *meta(const rx_gguf_file *f, const char *key, rx_gguf_vtype t) {
  const rx_gguf_kv *kv = gguf_find(f, key);
  CHECK_MSG(kv && kv->value.type == t, "%s: type %d", key, kv ? (int)kv->value.type : -1);
  return kv && kv->value.type == t ? &kv->value : NULL;
}

/* An error containing want (and the file's name) from s; frees s. */
static void expect_error(rx_status s, const char *name, const char *want) {
  CHECK_MSG(s && strstr(rx_status_message(s), want) && strstr(rx_status_message(s), name),
            "expected an error containing '%s', got '%s'", want,
            s ? rx_status_message(s) : "success");
  rx_status_free(s);
}

static void check_scalars(const rx_gguf_file *f) {
  const rx_gguf_value *v;
  if ((v = meta(f, "test.u8", RX_GGUF_V_UINT8))) CHECK_MSG(v->v.u == 200, "u8");
  if ((v = meta(f, "test.i8", RX_GGUF_V_INT8))) CHECK_MSG(v->v.i == -100, "i8");
  if ((v = meta(f, "test.u16", RX_GGUF_V_UINT16))) CHECK_MSG(v->v.u == 60000, "u16");
  if ((v = meta(f, "test.i16", RX_GGUF_V_INT16))) CHECK_MSG(v->v.i == -30000, "i16");
  if ((v = meta(f, "test.u32", RX_GGUF_V_UINT32))) CHECK_MSG(v->v.u == 4000000000u, "u32");
  if ((v = meta(f, "test.i32", RX_GGUF_V_INT32))) CHECK_MSG(v->v.i == -2000000000, "i32");
  if ((v = meta(f, "test.f32", RX_GGUF_V_FLOAT32))) CHECK_MSG(v->v.f == (double)0.1f, "f32");
  if ((v = meta(f, "test.bool", RX_GGUF_V_BOOL))) CHECK_MSG(v->v.u == 1, "bool");
  if ((v = meta(f, "test.string", RX_GGUF_V_STRING)))
    CHECK_MSG(v->len == 13 && !strcmp(v->str, "h\xc3\xa9llo w\xc3\xb6rld"), "string '%s'", v->str);
  if ((v = meta(f, "test.empty", RX_GGUF_V_STRING)))
    CHECK_MSG(v->len == 0 && !v->str[0], "empty string");
  if ((v = meta(f, "test.u64", RX_GGUF_V_UINT64)))
    CHECK_MSG(v->v.u == 9223372036854775813ull, "u64");
  if ((v = meta(f, "test.i64", RX_GGUF_V_INT64)))
    CHECK_MSG(v->v.i == -4611686018427387907ll, "i64");
  if ((v = meta(f, "test.f64", RX_GGUF_V_FLOAT64))) CHECK_MSG(v->v.f == 1.0 / 3.0, "f64");
  if ((v = meta(f, "general.architecture", RX_GGUF_V_STRING)))
    CHECK_MSG(!strcmp(v->str, "llama"), "architecture");
}

/* Array key of element type t holds the n integers (or, for floats, values) want. */
static void check_array(const rx_gguf_file *f, const char *key, rx_gguf_vtype t, int n,
                        const double *want) {
  const rx_gguf_value *a = NULL;
  rx_status s = gguf_get_array(f, key, t, &a);
  CHECK_MSG(!s && a && a->count == (uint64_t)n, "%s: %s", key, rx_status_message(s));
  rx_status_free(s);
  for (int i = 0; a && a->count == (uint64_t)n && i < n; i++) {
    rx_gguf_value e = gguf_array_at(a, (uint64_t)i);
    bool sgn =
        t == RX_GGUF_V_INT8 || t == RX_GGUF_V_INT16 || t == RX_GGUF_V_INT32 || t == RX_GGUF_V_INT64;
    double got = t == RX_GGUF_V_FLOAT32 || t == RX_GGUF_V_FLOAT64 ? e.v.f
                 : sgn                                            ? (double)e.v.i
                                                                  : (double)e.v.u;
    CHECK_MSG(e.type == t && got == want[i], "%s[%d] = %g, expected %g", key, i, got, want[i]);
  }
}

static void check_arrays(const rx_gguf_file *f) {
  check_array(f, "test.arr_u8", RX_GGUF_V_UINT8, 3, (double[]){0, 1, 255});
  check_array(f, "test.arr_i8", RX_GGUF_V_INT8, 3, (double[]){-128, 0, 127});
  check_array(f, "test.arr_u16", RX_GGUF_V_UINT16, 2, (double[]){65535, 7});
  check_array(f, "test.arr_i16", RX_GGUF_V_INT16, 2, (double[]){-32768, 32767});
  check_array(f, "test.arr_u32", RX_GGUF_V_UINT32, 3, (double[]){4294967295.0, 0, 1});
  check_array(f, "test.arr_i32", RX_GGUF_V_INT32, 3, (double[]){-5, 5, -2147483648.0});
  check_array(f, "test.arr_f32", RX_GGUF_V_FLOAT32, 3, (double[]){0.5, -2.25, (double)1e-3f});
  check_array(f, "test.arr_bool", RX_GGUF_V_BOOL, 3, (double[]){1, 0, 1});
  check_array(f, "test.arr_u64", RX_GGUF_V_UINT64, 1, (double[]){18446744073709551615.0});
  check_array(f, "test.arr_i64", RX_GGUF_V_INT64, 2, (double[]){-9223372036854775808.0, 42});
  check_array(f, "test.arr_f64", RX_GGUF_V_FLOAT64, 2, (double[]){2.5, -1.0 / 7});
  const rx_gguf_value *a = meta(f, "test.arr_u64", RX_GGUF_V_ARRAY);
  CHECK_MSG(a && gguf_array_at(a, 0).v.u == UINT64_MAX, "u64 array exactly");
  a = meta(f, "test.arr_str", RX_GGUF_V_ARRAY);
  const char *strs[] = {"a", "", "\xc3\xbcn\xc3\xaf", "x y"};
  CHECK_MSG(a && a->elem == RX_GGUF_V_STRING && a->count == 4, "string array");
  for (int i = 0; a && a->count == 4 && i < 4; i++) {
    rx_gguf_value e = gguf_array_at(a, (uint64_t)i);
    CHECK_MSG(e.type == RX_GGUF_V_STRING && !strcmp(e.str, strs[i]) && e.len == strlen(strs[i]),
              "arr_str[%d] = '%s'", i, e.str);
  }
  a = NULL;
  rx_status s = gguf_get_array(f, "tokenizer.ggml.tokens", RX_GGUF_V_STRING, &a);
  CHECK_MSG(!s && a && a->count == 300 && !strcmp(gguf_array_at(a, 1).str, "<s>") &&
                !strcmp(gguf_array_at(a, 299).str, "t296"),
            "tokens: %s", rx_status_message(s));
  rx_status_free(s);
}

static void check_getters(const rx_gguf_file *f) {
  uint32_t u = 0;
  int32_t i = 0;
  float x = 0;
  const char *str = NULL;
  const rx_gguf_value *a = NULL;
  rx_status s = gguf_get_u32(f, "test.u32", &u);
  CHECK_MSG(!s && u == 4000000000u, "get_u32");
  rx_status_free(s);
  s = gguf_get_u32(f, "test.u8", &u);
  CHECK_MSG(!s && u == 200, "get_u32 of a uint8");
  rx_status_free(s);
  s = gguf_get_i32(f, "test.i16", &i);
  CHECK_MSG(!s && i == -30000, "get_i32 of an int16");
  rx_status_free(s);
  s = gguf_get_f32(f, "test.f32", &x);
  CHECK_MSG(!s && x == 0.1f, "get_f32");
  rx_status_free(s);
  s = gguf_get_f32(f, "test.f64", &x);
  CHECK_MSG(!s && x == (float)(1.0 / 3.0), "get_f32 of a float64");
  rx_status_free(s);
  s = gguf_get_string(f, "general.architecture", &str);
  CHECK_MSG(!s && str && !strcmp(str, "llama"), "get_string");
  rx_status_free(s);
  expect_error(gguf_get_i32(f, "test.u32", &i), "all_types.gguf",
               "metadata key 'test.u32' is 4000000000, out of the range of an int32");
  expect_error(gguf_get_u32(f, "test.i8", &u), "all_types.gguf",
               "metadata key 'test.i8' is -100, out of the range of a uint32");
  expect_error(gguf_get_u32(f, "llama.block_count", &u), "all_types.gguf",
               "metadata key 'llama.block_count' is missing (expected a uint32)");
  CHECK_MSG(u == 0, "the out-parameter is zeroed on an error");
  expect_error(gguf_get_string(f, "test.u8", &str), "all_types.gguf",
               "metadata key 'test.u8' has type uint8, expected a string");
  expect_error(gguf_get_f32(f, "test.string", &x), "all_types.gguf",
               "metadata key 'test.string' has type string, expected a float32");
  expect_error(gguf_get_u32(f, "test.arr_u32", &u), "all_types.gguf",
               "metadata key 'test.arr_u32' is an array of uint32, expected a uint32");
  expect_error(gguf_get_array(f, "tokenizer.ggml.tokens", RX_GGUF_V_INT32, &a), "all_types.gguf",
               "'tokenizer.ggml.tokens' is an array of string, expected an array of int32");
}

/* ---- tensors ---- */

/* Tensor name of file stem has type t and shape, and dequantizes to ref/<stem>.<name>.npy bit for
 * bit. */
static void check_tensor(const rx_gguf_file *f, const char *stem, const char *name, rx_gguf_type t,
                         int ndim, const int64_t *shape) {
  const rx_gguf_tensor *x = gguf_find_tensor(f, name);
  CHECK_MSG(x && x->type == t && x->ndim == ndim, "%s: type %d, %d dims", name,
            x ? (int)x->type : -1, x ? x->ndim : -1);
  if (!x || x->ndim != ndim) return;
  int64_t elems = 1;
  for (int d = 0; d < ndim; d++) {
    CHECK_MSG(x->shape[d] == shape[d], "%s: dim %d is %lld", name, d, (long long)x->shape[d]);
    elems *= shape[d];
  }
  CHECK_MSG(x->elems == elems, "%s: %lld elements", name, (long long)x->elems);
  uint64_t size = (uint64_t)(elems / gguf_block_elems(t) * gguf_block_bytes(t));
  CHECK_MSG(x->size == size && x->offset % f->alignment == 0 && x->offset + x->size <= f->data_size,
            "%s: %llu bytes at %llu", name, (unsigned long long)x->size,
            (unsigned long long)x->offset);
  char path[4096];
  snprintf(path, sizeof path, "%s/gguf/ref/%s.%s.npy", dir, stem, name);
  rx_npy ref;
  rx_status s = base_npy_read(path, &ref);
  CHECK_MSG(!s && ref.dtype == RX_DTYPE_F32 && base_npy_count(&ref) == (size_t)elems &&
                ref.ndim == (ndim ? ndim : 0),
            "%s: %s", path, rx_status_message(s));
  rx_status_free(s);
  if (s || base_npy_count(&ref) != (size_t)elems) return;
  float *got = calloc((size_t)elems + 1, sizeof *got);
  gguf_dequantize(x->type, f->data + x->offset, x->elems, got);
  const uint32_t *want = ref.data;
  int64_t bad = 0, first = -1;
  for (int64_t k = 0; k < elems; k++) {
    uint32_t g;
    memcpy(&g, &got[k], 4);
    if (g != want[k] && !bad++) first = k;
  }
  CHECK_MSG(!bad,
            "%s (%s): %lld of %lld elements differ from the reference, first [%lld] = %a vs %a",
            name, gguf_type_name(t), (long long)bad, (long long)elems, (long long)first,
            first >= 0 ? got[first] : 0.0, first >= 0 ? ((const float *)ref.data)[first] : 0.0);
  free(got);
  base_npy_free(&ref);
}

static void all_types(void) {
  size_t len = 0;
  char *buf = load("all_types.gguf", &len);
  if (!buf) return;
  rx_gguf_file f;
  rx_status s = gguf_parse(buf, len, "all_types.gguf", &f);
  CHECK_MSG(!s, "%s", rx_status_message(s));
  rx_status_free(s);
  if (s) return;
  CHECK_MSG(f.version == 3 && f.alignment == 32 && f.nkvs == 27 && f.ntensors == 11,
            "version %u, alignment %u, %zu keys, %zu tensors", f.version, f.alignment, f.nkvs,
            f.ntensors);
  CHECK_MSG(f.data_offset % 32 == 0 && f.data == (const uint8_t *)buf + f.data_offset &&
                f.data_offset + f.data_size == len,
            "data section at %llu", (unsigned long long)f.data_offset);
  check_scalars(&f);
  check_arrays(&f);
  check_getters(&f);
  const char *order[] = {"f32",  "f16",  "bf16", "f32_4d", "q8_0", "q4_0",
                         "q4_1", "q5_0", "q4_k", "q5_k",   "q6_k"};
  for (size_t i = 0; i < f.ntensors && i < RX_ARRAY_LEN(order); i++)
    CHECK_MSG(!strcmp(f.tensors[i].name, order[i]), "tensor %zu is '%s'", i, f.tensors[i].name);
  check_tensor(&f, "all_types", "f32", RX_GGUF_TYPE_F32, 2, (int64_t[]){3, 5});
  check_tensor(&f, "all_types", "f16", RX_GGUF_TYPE_F16, 1, (int64_t[]){7});
  check_tensor(&f, "all_types", "bf16", RX_GGUF_TYPE_BF16, 3, (int64_t[]){2, 3, 5});
  check_tensor(&f, "all_types", "f32_4d", RX_GGUF_TYPE_F32, 4, (int64_t[]){2, 1, 3, 2});
  check_tensor(&f, "all_types", "q8_0", RX_GGUF_TYPE_Q8_0, 2, (int64_t[]){1, 64});
  check_tensor(&f, "all_types", "q4_0", RX_GGUF_TYPE_Q4_0, 2, (int64_t[]){3, 32});
  check_tensor(&f, "all_types", "q4_1", RX_GGUF_TYPE_Q4_1, 2, (int64_t[]){5, 64});
  check_tensor(&f, "all_types", "q5_0", RX_GGUF_TYPE_Q5_0, 2, (int64_t[]){3, 96});
  check_tensor(&f, "all_types", "q4_k", RX_GGUF_TYPE_Q4_K, 2, (int64_t[]){3, 256});
  check_tensor(&f, "all_types", "q5_k", RX_GGUF_TYPE_Q5_K, 2, (int64_t[]){1, 512});
  check_tensor(&f, "all_types", "q6_k", RX_GGUF_TYPE_Q6_K, 2, (int64_t[]){3, 256});
  CHECK_MSG(!gguf_find_tensor(&f, "nope") && !gguf_find(&f, "nope"), "find of a missing name");
  uint64_t end = 0; /* where the last tensor's bytes end: any shorter file is refused */
  for (size_t i = 0; i < f.ntensors; i++)
    if (f.tensors[i].offset + f.tensors[i].size > end)
      end = f.tensors[i].offset + f.tensors[i].size;
  end += f.data_offset;
  gguf_free(&f);

  /* truncated at every length: refused, naming the file, up to the end of the last tensor */
  int refused = 0, accepted = 0;
  for (size_t n = 0; n < len; n++) {
    s = gguf_parse(buf, n, "cut.gguf", &f);
    bool ok = n < end ? s && strstr(rx_status_message(s), "cut.gguf: ") : !s;
    CHECK_MSG(ok, "truncated to %zu of %zu bytes: %s", n, len,
              s ? rx_status_message(s) : "accepted");
    if (s)
      refused++;
    else
      accepted++;
    CHECK_MSG(!s || (f.ntensors == 0 && f.nkvs == 0 && !f.tensors), "nothing owned after an error");
    rx_status_free(s);
    gguf_free(&f);
  }
  CHECK_MSG(refused == (int)end && accepted == (int)(len - end), "%d lengths refused, %d accepted",
            refused, accepted);
  /* the boundaries of the header, each with its message */
  const struct {
    size_t n;
    const char *want;
  } cuts[] = {
      {0, "offset 0: the file does not start with the magic \"GGUF\": not a GGUF file"},
      {3, "not a GGUF file"},
      {4, "offset 4: the version needs 4 bytes, the file ends 0 bytes later (truncated?)"},
      {8, "offset 8: the tensor count needs 8 bytes"},
      {16, "offset 16: the metadata count needs 8 bytes"},
      {24, "offset 16: 27 metadata entries cannot fit in the 0 bytes left"},
      {400, "tensor infos cannot fit"},
  };
  for (size_t i = 0; i < RX_ARRAY_LEN(cuts); i++) {
    s = gguf_parse(buf, cuts[i].n, "cut.gguf", &f);
    expect_error(s, "cut.gguf", cuts[i].want);
  }
  s = gguf_parse(buf, (size_t)end - 1, "cut.gguf", &f);
  expect_error(s, "cut.gguf", "tensor 'q6_k': its 630 bytes at offset");
  free(buf);
}

static void v2_align64(void) {
  size_t len = 0;
  char *buf = load("v2_align64.gguf", &len);
  if (!buf) return;
  rx_gguf_file f;
  rx_status s = gguf_parse(buf, len, "v2_align64.gguf", &f);
  CHECK_MSG(!s && f.version == 2 && f.alignment == 64 && f.ntensors == 2 && f.data_offset % 64 == 0,
            "v2: %s", rx_status_message(s));
  rx_status_free(s);
  if (s) return;
  check_tensor(&f, "v2_align64", "f32", RX_GGUF_TYPE_F32, 2, (int64_t[]){1, 3});
  check_tensor(&f, "v2_align64", "q8_0", RX_GGUF_TYPE_Q8_0, 2, (int64_t[]){2, 32});
  CHECK_MSG(f.tensors[1].offset == 64, "q8_0 at 64 (after 12 bytes padded to 64)");
  gguf_free(&f);
  free(buf);
  buf = load("unsupported.gguf", &len);
  if (!buf) return;
  s = gguf_parse(buf, len, "unsupported.gguf", &f);
  expect_error(s, "unsupported.gguf",
               "tensor 'q3_k': type Q3_K (11) is not supported; supported: F32, F16, Q4_0, Q4_1, "
               "Q5_0, Q8_0, Q4_K, Q5_K, Q6_K, BF16");
  free(buf);
}

/* ---- images built here, each with one thing wrong ---- */

typedef struct img {
  uint8_t b[1024];
  size_t n;
} img;

static void put(img *m, uint64_t v, int bytes) {
  for (int i = 0; i < bytes && m->n < sizeof m->b; i++) m->b[m->n++] = (uint8_t)(v >> (8 * i));
}
static void put_str(img *m, const char *s) {
  put(m, strlen(s), 8);
  for (; *s && m->n < sizeof m->b; s++) m->b[m->n++] = (uint8_t)*s;
}
static void header(img *m, uint32_t version, uint64_t ntensors, uint64_t nkvs) {
  m->n = 0;
  put(m, 0x46554747, 4); /* "GGUF" */
  put(m, version, 4);
  put(m, ntensors, 8);
  put(m, nkvs, 8);
}
/* A tensor info: name, dims in GGUF's order (ne[0] first), type, offset. */
static void tinfo(img *m, const char *name, int nd, const uint64_t *ne, uint32_t type,
                  uint64_t off) {
  put_str(m, name);
  put(m, (uint64_t)nd, 4);
  for (int i = 0; i < nd; i++) put(m, ne[i], 8);
  put(m, type, 4);
  put(m, off, 8);
}
/* Padding to 32, then n bytes of data. */
static void data(img *m, size_t n) {
  while (m->n % 32) put(m, 0, 1);
  for (size_t i = 0; i < n; i++) put(m, i, 1);
}

static void refused(const img *m, const char *want) {
  rx_gguf_file f;
  rx_status s = gguf_parse(m->b, m->n, "bad.gguf", &f);
  expect_error(s, "bad.gguf", want);
  CHECK_MSG(f.ntensors == 0 && f.nkvs == 0 && !f.kvs && !f.tensors, "nothing owned after an error");
}

static void built(void) {
  img m;
  rx_gguf_file f;
  /* a valid one: alignment 16, a Q4_0 [2, 32] at 16 after an F32 [3] (12 bytes, padded) */
  header(&m, 3, 2, 1);
  put_str(&m, "general.alignment");
  put(&m, RX_GGUF_V_UINT32, 4);
  put(&m, 16, 4);
  tinfo(&m, "a", 1, (uint64_t[]){3}, RX_GGUF_TYPE_F32, 0);
  tinfo(&m, "b", 2, (uint64_t[]){32, 2}, RX_GGUF_TYPE_Q4_0, 16);
  while (m.n % 16) put(&m, 0, 1);
  size_t start = m.n;
  for (int i = 0; i < 16 + 36; i++) put(&m, 0, 1);
  rx_status s = gguf_parse(m.b, m.n, "ok.gguf", &f);
  CHECK_MSG(!s && f.alignment == 16 && f.data_offset == start && f.tensors[1].size == 36 &&
                f.tensors[1].shape[0] == 2 && f.tensors[1].shape[1] == 32,
            "alignment 16: %s", rx_status_message(s));
  rx_status_free(s);
  gguf_free(&f);
  /* no tensors, no metadata: valid, no data section */
  header(&m, 3, 0, 0);
  s = gguf_parse(m.b, m.n, "empty.gguf", &f);
  CHECK_MSG(!s && f.ntensors == 0 && f.data_size == 0, "empty: %s", rx_status_message(s));
  rx_status_free(s);
  gguf_free(&f);

  header(&m, 3, 0, 0);
  m.b[3] = 'G';
  refused(&m, "offset 0: the file does not start with the magic \"GGUF\": not a GGUF file");
  header(&m, 1, 0, 0);
  refused(&m, "offset 4: GGUF version 1 is not supported (relaxc reads versions 2 and 3)");
  header(&m, 4, 0, 0);
  refused(&m, "GGUF version 4 is not supported");
  header(&m, 0x03000000, 0, 0);
  refused(&m, "version 0x03000000: a big-endian GGUF file");
  header(&m, 3, 0, UINT64_MAX);
  refused(&m, "offset 16: 18446744073709551615 metadata entries cannot fit in the 0 bytes left");
  header(&m, 3, (uint64_t)1 << 62, 0);
  data(&m, 64);
  refused(&m, "offset 8: 4611686018427387904 tensor infos cannot fit");

  /* metadata */
  header(&m, 3, 0, 1);
  put(&m, UINT64_MAX, 8);
  put(&m, 0, 8);
  refused(&m, "offset 24: metadata entry 0: the key of 18446744073709551615 bytes runs past the "
              "end of the file (8 bytes left)");
  header(&m, 3, 0, 1);
  put_str(&m, "k");
  put(&m, RX_GGUF_V_STRING, 4);
  put(&m, 1000, 8);
  put(&m, 0, 8);
  refused(&m, "offset 37: metadata 'k': the string of 1000 bytes runs past the end");
  header(&m, 3, 0, 1);
  put_str(&m, "k");
  put(&m, 13, 4);
  put(&m, 0, 8);
  refused(&m, "offset 33: metadata 'k': value type 13 is not a GGUF value type (0 to 12)");
  header(&m, 3, 0, 1);
  put_str(&m, "k");
  put(&m, RX_GGUF_V_ARRAY, 4);
  put(&m, RX_GGUF_V_ARRAY, 4);
  put(&m, 1, 8);
  put(&m, RX_GGUF_V_UINT8, 4);
  put(&m, 1, 8);
  put(&m, 7, 1);
  refused(&m, "metadata 'k': an array of arrays is not supported");
  header(&m, 3, 0, 1);
  put_str(&m, "k");
  put(&m, RX_GGUF_V_ARRAY, 4);
  put(&m, RX_GGUF_V_UINT32, 4);
  put(&m, (uint64_t)1 << 61, 8);
  put(&m, 0, 8);
  refused(&m, "metadata 'k': an array of 2305843009213693952 uint32 elements cannot fit in the 8 "
              "bytes left");
  header(&m, 3, 0, 1);
  put_str(&m, "k");
  put(&m, RX_GGUF_V_ARRAY, 4);
  put(&m, RX_GGUF_V_STRING, 4);
  put(&m, 2, 8);
  put_str(&m, "ok");
  put(&m, 50, 8);
  refused(&m, "metadata 'k': string element 1 of 50 bytes runs past the end");
  header(&m, 3, 0, 1);
  put_str(&m, "k");
  put(&m, RX_GGUF_V_BOOL, 4);
  put(&m, 2, 1);
  refused(&m, "metadata 'k': a bool is 2, expected 0 or 1");
  header(&m, 3, 0, 1);
  put(&m, 3, 8);
  put(&m, 0x610061, 3); /* "a\0a" */
  put(&m, RX_GGUF_V_UINT8, 4);
  put(&m, 0, 1);
  refused(&m, "offset 24: metadata entry 0: the key holds a NUL byte");
  header(&m, 3, 0, 2);
  for (int i = 0; i < 2; i++) {
    put_str(&m, "dup");
    put(&m, RX_GGUF_V_UINT8, 4);
    put(&m, 0, 1);
  }
  refused(&m, "offset 40: metadata key 'dup' appears twice");
  header(&m, 3, 0, 1);
  put_str(&m, "general.alignment");
  put(&m, RX_GGUF_V_UINT32, 4);
  put(&m, 48, 4);
  refused(&m, "offset 24: general.alignment is uint32 48, expected a uint32 power of two");
  header(&m, 3, 0, 1);
  put_str(&m, "general.alignment");
  put(&m, RX_GGUF_V_UINT64, 4);
  put(&m, 64, 8);
  refused(&m, "general.alignment is uint64 64, expected a uint32 power of two");

  /* tensor infos */
  header(&m, 3, 1, 0);
  tinfo(&m, "t", 5, (uint64_t[]){1, 1, 1, 1, 1}, RX_GGUF_TYPE_F32, 0);
  data(&m, 4);
  refused(&m, "offset 33: tensor 't': n_dims is 5, expected at most 4");
  header(&m, 3, 1, 0);
  tinfo(&m, "t", 2, (uint64_t[]){1, (uint64_t)1 << 63}, RX_GGUF_TYPE_F32, 0);
  data(&m, 4);
  refused(&m, "offset 45: tensor 't': ne[1] is 9223372036854775808, more than an int64 holds");
  header(&m, 3, 1, 0);
  tinfo(&m, "t", 2, (uint64_t[]){(uint64_t)1 << 40, (uint64_t)1 << 40}, RX_GGUF_TYPE_F32, 0);
  data(&m, 4);
  refused(&m, "tensor 't': the element count of its dims overflows an int64");
  /* found by fuzz_gguf: 2^62 + 1 f32 elements are 2^64 + 4 bytes, which wrapped to 4 */
  header(&m, 3, 1, 0);
  tinfo(&m, "t", 1, (uint64_t[]){((uint64_t)1 << 62) + 1}, RX_GGUF_TYPE_F32, 0);
  data(&m, 4);
  refused(&m, "offset 45: tensor 't': the byte size of its 4611686018427387905 elements overflows");
  header(&m, 3, 1, 0);
  tinfo(&m, "t", 1, (uint64_t[]){4}, 99, 0);
  data(&m, 16);
  refused(&m, "offset 45: tensor 't': type 99 is not a GGML tensor type");
  header(&m, 3, 1, 0);
  tinfo(&m, "t", 1, (uint64_t[]){4}, 4, 0); /* Q4_2: removed from ggml */
  data(&m, 16);
  refused(&m, "tensor 't': type 4 is not a GGML tensor type");
  header(&m, 3, 1, 0);
  tinfo(&m, "t", 1, (uint64_t[]){256}, RX_GGUF_TYPE_IQ2_XXS, 0);
  data(&m, 66);
  refused(&m, "tensor 't': type IQ2_XXS (16) is not supported; supported: F32");
  header(&m, 3, 1, 0);
  tinfo(&m, "t", 2, (uint64_t[]){33, 2}, RX_GGUF_TYPE_Q4_0, 0);
  data(&m, 64);
  refused(&m,
          "tensor 't': rows of 33 elements (ne[0]) are not a whole number of Q4_0 blocks of 32");
  header(&m, 3, 1, 0);
  tinfo(&m, "t", 1, (uint64_t[]){128}, RX_GGUF_TYPE_Q6_K, 0);
  data(&m, 256);
  refused(&m, "rows of 128 elements (ne[0]) are not a whole number of Q6_K blocks of 256");
  header(&m, 3, 1, 0);
  tinfo(&m, "t", 1, (uint64_t[]){1}, RX_GGUF_TYPE_F32, 4);
  data(&m, 64);
  refused(&m, "tensor 't': data offset 4 is not a multiple of the alignment 32");
  header(&m, 3, 1, 0);
  tinfo(&m, "t", 1, (uint64_t[]){16}, RX_GGUF_TYPE_F32, 32);
  data(&m, 64);
  refused(&m, "tensor 't': its 64 bytes at offset 32 of the data section end past the section's "
              "64 bytes (a truncated file?)");
  header(&m, 3, 1, 0);
  tinfo(&m, "t", 1, (uint64_t[]){1}, RX_GGUF_TYPE_F32, (uint64_t)-32);
  data(&m, 64);
  refused(&m, "tensor 't': its 4 bytes at offset 18446744073709551584");
  header(&m, 3, 2, 0);
  tinfo(&m, "a", 1, (uint64_t[]){16}, RX_GGUF_TYPE_F32, 0);
  tinfo(&m, "b", 1, (uint64_t[]){8}, RX_GGUF_TYPE_F32, 32);
  data(&m, 96);
  refused(&m, "tensors 'a' and 'b' overlap in the data section");
  header(&m, 3, 2, 0);
  tinfo(&m, "a", 1, (uint64_t[]){8}, RX_GGUF_TYPE_F32, 0);
  tinfo(&m, "a", 1, (uint64_t[]){8}, RX_GGUF_TYPE_F32, 32);
  data(&m, 64);
  refused(&m, "tensor 'a' appears twice");
  header(&m, 3, 1, 0);
  put(&m, 1000, 8);
  data(&m, 32);
  refused(&m, "offset 24: tensor 0: the name of 1000 bytes runs past the end of the file");

  s = gguf_parse(NULL, 0, NULL, &f);
  expect_error(s, "<gguf>", "not a GGUF file");
  CHECK_MSG(gguf_is_gguf("GGUF\3", 5) && !gguf_is_gguf("GGU", 3) && !gguf_is_gguf(NULL, 9),
            "is_gguf");
}

/* ---- the dequantizers on blocks written by hand (the definition, not the reference) ---- */

static void by_hand(void) {
  float y[256];
  /* Q8_0: d = 0.5 (f16 0x3800), q = -3 and 4 */
  uint8_t q8[34] = {0x00, 0x38, 0xfd, 4};
  gguf_dequantize(RX_GGUF_TYPE_Q8_0, q8, 32, y);
  CHECK_MSG(y[0] == -1.5f && y[1] == 2.0f && y[2] == 0.0f, "Q8_0 %g %g", y[0], y[1]);
  /* Q4_0: d = 2 (0x4000); qs[0] = 0x9f: element 0 is 15 - 8 = 7, element 16 is 9 - 8 = 1 */
  uint8_t q4[18] = {0x00, 0x40, 0x9f};
  gguf_dequantize(RX_GGUF_TYPE_Q4_0, q4, 32, y);
  CHECK_MSG(y[0] == 14 && y[16] == 2 && y[1] == -16, "Q4_0 %g %g %g", y[0], y[16], y[1]);
  /* Q5_0: d = 1; bit 16 of qh lifts element 16 by 16 */
  uint8_t q5[22] = {0x00, 0x3c, 0, 0, 1, 0, 0x21};
  gguf_dequantize(RX_GGUF_TYPE_Q5_0, q5, 32, y);
  CHECK_MSG(y[0] == 1 - 16 && y[16] == 2 + 16 - 16 && y[1] == -16, "Q5_0 %g %g", y[0], y[16]);
  /* F16 subnormal 1 = 2^-24, BF16 1.0 */
  uint8_t h[2] = {1, 0}, bf[2] = {0x80, 0x3f};
  gguf_dequantize(RX_GGUF_TYPE_F16, h, 1, y);
  CHECK_MSG(y[0] == ldexpf(1, -24), "f16 subnormal %a", y[0]);
  gguf_dequantize(RX_GGUF_TYPE_BF16, bf, 1, y);
  CHECK_MSG(y[0] == 1.0f, "bf16 %g", y[0]);
}

int main(int argc, char **argv) {
  if (argc > 1) dir = argv[1];
  all_types();
  v2_align64();
  built();
  by_hand();
  return check_finish("test_gguf");
}
