/* The safetensors reader (base/safetensors.c): a file written by Hugging Face's own writer
 * (tests/fixtures/safetensors/make_fixtures.py) read back value by value, a bf16 header written
 * here, and malformed files, each refused with a message that names the file, the tensor and the
 * problem.
 *
 * usage: test_safetensors TESTS_DIR */
#include "base/base.h"
#include "base/safetensors.h"
#include "check.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A safetensors image from a header text and n bytes of data (heap; *len set). */
static uint8_t *image(const char *header, size_t ndata, size_t *len) {
  size_t h = strlen(header);
  *len = 8 + h + ndata;
  uint8_t *b = calloc(*len, 1);
  for (int i = 0; i < 8; i++) b[i] = (uint8_t)((uint64_t)h >> (8 * i));
  memcpy(b + 8, header, h);
  for (size_t i = 0; i < ndata; i++) b[8 + h + i] = (uint8_t)i;
  return b;
}

/* Parses header + ndata bytes and expects an error containing want. */
static void refused(const char *header, size_t ndata, const char *want) {
  size_t len;
  uint8_t *b = image(header, ndata, &len);
  rx_st_file f;
  rx_status s = base_st_parse(b, len, "bad.safetensors", &f);
  CHECK_MSG(s && strstr(rx_status_message(s), want) &&
                strstr(rx_status_message(s), "bad.safetensors"),
            "header %s: expected an error containing '%s', got '%s'", header, want,
            s ? rx_status_message(s) : "success");
  CHECK_MSG(f.ntensors == 0 && !f.tensors && !f.meta, "nothing owned after an error");
  rx_status_free(s);
  free(b);
}

static float f16_to_f32(uint16_t h) {
  int e = (h >> 10) & 31, m = h & 1023;
  float v =
      e ? (1.0f + (float)m / 1024.0f) * (float)(1 << e) / 32768.0f : (float)m / 1024.0f / 16384.0f;
  return h & 0x8000 ? -v : v;
}

static void peer(const char *dir) {
  char path[4096];
  snprintf(path, sizeof path, "%s/fixtures/safetensors/peer.safetensors", dir);
  size_t len = 0;
  char *buf = NULL;
  rx_status s = base_read_file(path, &buf, &len);
  CHECK_MSG(!s, "%s", rx_status_message(s));
  rx_status_free(s);
  if (!buf) return;
  rx_st_file f;
  s = base_st_parse(buf, len, path, &f);
  CHECK_MSG(!s, "%s", rx_status_message(s));
  rx_status_free(s);
  CHECK_MSG(f.ntensors == 10, "10 tensors, got %zu", f.ntensors);
  CHECK_MSG(base_st_meta(&f, "format") && !strcmp(base_st_meta(&f, "format"), "np") &&
                base_st_meta(&f, "made_by") && !base_st_meta(&f, "nope"),
            "metadata");
  const rx_st_tensor *t = base_st_find(&f, "f32");
  CHECK_MSG(t && t->dtype == RX_DTYPE_F32 && t->ndim == 2 && t->shape[0] == 2 && t->shape[1] == 3,
            "f32's dtype and shape");
  for (int i = 0; t && i < 6; i++) {
    float v;
    memcpy(&v, f.data + t->offset + 4 * i, 4);
    CHECK_MSG(v == (float)i * 0.5f - 1, "f32[%d] = %g", i, v);
  }
  t = base_st_find(&f, "f16");
  for (int i = 0; t && i < 5; i++) {
    uint16_t h;
    memcpy(&h, f.data + t->offset + 2 * i, 2);
    CHECK_MSG(f16_to_f32(h) == (float)i / 4, "f16[%d] = %g", i, f16_to_f32(h));
  }
  t = base_st_find(&f, "i64");
  for (int i = 0; t && t->dtype == RX_DTYPE_I64 && i < 4; i++) {
    int64_t v;
    memcpy(&v, f.data + t->offset + 8 * i, 8);
    CHECK_MSG(v == (int64_t)i * 1000000000000 - 7, "i64[%d] = %lld", i, (long long)v);
  }
  t = base_st_find(&f, "i8");
  for (int i = 0; t && t->dtype == RX_DTYPE_I8 && i < 6; i++)
    CHECK_MSG((int8_t)f.data[t->offset + i] == i - 3, "i8[%d]", i);
  t = base_st_find(&f, "u8");
  CHECK_MSG(t && t->ndim == 3 && t->shape[2] == 7 && f.data[t->offset + 6] == 6 * 37, "u8");
  t = base_st_find(&f, "bool");
  CHECK_MSG(t && t->dtype == RX_DTYPE_BOOL && f.data[t->offset] == 1 && f.data[t->offset + 1] == 0,
            "bool");
  t = base_st_find(&f, "empty");
  CHECK_MSG(t && t->size == 0 && t->shape[0] == 0 && t->shape[1] == 4, "an empty tensor");
  t = base_st_find(&f, "scalar");
  float sc = 0;
  if (t) memcpy(&sc, f.data + t->offset, 4);
  CHECK_MSG(t && t->ndim == 0 && t->size == 4 && sc == 3.25f, "a scalar");
  CHECK_MSG(base_st_find(&f, "i16") && base_st_find(&f, "i32") && !base_st_find(&f, "f64"), "find");
  base_st_free(&f);
  free(buf);
}

int main(int argc, char **argv) {
  peer(argc > 1 ? argv[1] : "tests");

  /* bf16, gaps between tensors (an aligned layout), trailing spaces in the header */
  size_t len;
  uint8_t *b = image("{\"w\":{\"dtype\":\"BF16\",\"shape\":[2,2],\"data_offsets\":[64,72]},"
                     "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}   ",
                     72, &len);
  rx_st_file f;
  rx_status s = base_st_parse(b, len, "aligned.safetensors", &f);
  CHECK_MSG(!s && f.ntensors == 2 && base_st_find(&f, "w")->dtype == RX_DTYPE_BF16 &&
                base_st_find(&f, "w")->offset == 64 && f.data_size == 72,
            "bf16 with a gap: %s", rx_status_message(s));
  rx_status_free(s);
  base_st_free(&f);
  free(b);

  /* FP8 checkpoints (issue 32): F8_E4M3 bytes as U8 flagged f8_e4m3, I32 words, and U8 unflagged;
   * F8_E5M2 is not read */
  b = image("{\"w\":{\"dtype\":\"F8_E4M3\",\"shape\":[2,4],\"data_offsets\":[0,8]},"
            "\"q\":{\"dtype\":\"I32\",\"shape\":[2],\"data_offsets\":[8,16]},"
            "\"u\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[16,17]}}",
            17, &len);
  s = base_st_parse(b, len, "fp8.safetensors", &f);
  CHECK_MSG(!s && f.ntensors == 3 && base_st_find(&f, "w")->dtype == RX_DTYPE_U8 &&
                base_st_find(&f, "w")->f8_e4m3 && base_st_find(&f, "w")->size == 8 &&
                base_st_find(&f, "q")->dtype == RX_DTYPE_I32 && !base_st_find(&f, "q")->f8_e4m3 &&
                !base_st_find(&f, "u")->f8_e4m3 && !strcmp(base_st_dtype_name(RX_DTYPE_U8), "U8"),
            "F8_E4M3 and I32: %s", rx_status_message(s));
  rx_status_free(s);
  base_st_free(&f);
  free(b);
  refused("{\"a\":{\"dtype\":\"F8_E5M2\",\"shape\":[1],\"data_offsets\":[0,1]}}", 1,
          "tensor 'a': dtype F8_E5M2 is not supported");

  /* malformed: each refused, naming the problem */
  b = image("{}", 0, &len); /* no tensors at all is a valid file */
  s = base_st_parse(b, len, "empty.safetensors", &f);
  CHECK_MSG(!s && f.ntensors == 0 && f.data_size == 0, "{}: %s", rx_status_message(s));
  rx_status_free(s);
  base_st_free(&f);
  free(b);
  refused("{\"a\": 1}", 0, "tensor 'a': expected an object of exactly");
  refused("{\"a\": 1", 0, "not valid JSON");
  refused("xx", 0, "does not start with '{'");
  refused("{\"a\":{\"dtype\":\"C64\",\"shape\":[1],\"data_offsets\":[0,8]}}", 8,
          "tensor 'a': dtype C64 is not supported");
  refused("{\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}", 8,
          "tensor 'a': F32 of that shape holds 12 bytes, data_offsets say 8");
  refused("{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]}}", 8,
          "past the 8 bytes of data");
  refused("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,0]}}", 8,
          "0 <= begin <= end");
  refused("{\"a\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,0]}}", 8,
          "not a non-negative integer");
  refused("{\"a\":{\"dtype\":\"F32\",\"shape\":[2.5],\"data_offsets\":[0,0]}}", 8,
          "not a non-negative integer");
  refused("{\"a\":{\"dtype\":\"U8\",\"shape\":[4294967296,4294967296,4294967296],"
          "\"data_offsets\":[0,0]}}",
          8, "the shape overflows");
  refused("{\"a\":{\"dtype\":\"F32\",\"shape\":[2]}}", 8, "exactly dtype, shape and data_offsets");
  refused("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8],\"x\":1}}", 8,
          "exactly dtype, shape and data_offsets");
  refused("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
          "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
          8, "tensors 'a' and 'b' overlap");
  refused("{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]},"
          "\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[1,2]}}",
          8, "tensor 'a': the name appears twice");
  refused("{\"__metadata__\":{\"k\":1}}", 0, "__metadata__ must be an object of strings");
  /* sizes: shorter than 8 bytes; a header size past the end */
  uint8_t tiny[4] = {1, 0, 0, 0};
  s = base_st_parse(tiny, sizeof tiny, "tiny.safetensors", &f);
  CHECK_MSG(s && strstr(rx_status_message(s), "tiny.safetensors: shorter than"), "%s",
            rx_status_message(s));
  rx_status_free(s);
  uint8_t huge[16] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f, '{', '}'};
  s = base_st_parse(huge, sizeof huge, "huge.safetensors", &f);
  CHECK_MSG(s && strstr(rx_status_message(s), "does not fit"), "%s", rx_status_message(s));
  rx_status_free(s);

  return check_finish("test_safetensors");
}
