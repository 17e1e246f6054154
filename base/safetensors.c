/* base/safetensors.c: the safetensors reader (safetensors.h). The JSON header is parsed with
 * cJSON; everything it says is checked against the buffer before it is believed. */
#include "safetensors.h"

#include "npy.h" /* base_npy_elem_size */

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

/* safetensors' dtype names that relaxc reads, and its dtypes. F8_E4M3 (float8 e4m3fn, what FP8
 * checkpoints store) has no dtype of relaxc's: its bytes are U8 with rx_st_tensor.f8_e4m3 set,
 * and only a reader that knows the format (quant_matmul's fp8 schemes) takes them. Listed after
 * U8, so that base_st_dtype_name(U8) stays "U8". */
static const struct {
  const char *name;
  rx_dtype dtype;
} dtypes[] = {{"F32", RX_DTYPE_F32}, {"F16", RX_DTYPE_F16},   {"BF16", RX_DTYPE_BF16},
              {"I64", RX_DTYPE_I64}, {"I32", RX_DTYPE_I32},   {"I16", RX_DTYPE_I16},
              {"I8", RX_DTYPE_I8},   {"U8", RX_DTYPE_U8},     {"BOOL", RX_DTYPE_BOOL},
              {"F64", RX_DTYPE_F64}, {"U16", RX_DTYPE_U16},   {"U32", RX_DTYPE_U32},
              {"U64", RX_DTYPE_U64}, {"F8_E4M3", RX_DTYPE_U8}};

/* Integers in the header are JSON numbers (doubles in cJSON): exact up to 2^53. */
#define MAX_EXACT 9007199254740992.0

static bool as_u64(const cJSON *j, uint64_t *out) {
  if (!cJSON_IsNumber(j)) return false;
  double v = j->valuedouble;
  if (!(v >= 0 && v <= MAX_EXACT) || v != (double)(uint64_t)v) return false;
  *out = (uint64_t)v;
  return true;
}

static rx_status bad(const char *name, const char *tensor, const char *what) {
  if (tensor) return base_status_make(RX_ERR_INVALID, "%s: tensor '%s': %s", name, tensor, what);
  return base_status_make(RX_ERR_INVALID, "%s: %s", name, what);
}

static rx_status read_meta(const cJSON *m, const char *name, rx_st_file *f) {
  if (!cJSON_IsObject(m)) return bad(name, NULL, "__metadata__ must be an object of strings");
  size_t n = (size_t)cJSON_GetArraySize(m);
  f->meta = base_calloc(2 * n + 1, sizeof *f->meta);
  const cJSON *e;
  cJSON_ArrayForEach(e, m) {
    if (!cJSON_IsString(e) || !e->string)
      return bad(name, NULL, "__metadata__ must be an object of strings");
    f->meta[2 * f->nmeta] = base_strdup(e->string);
    f->meta[2 * f->nmeta + 1] = base_strdup(e->valuestring);
    f->nmeta++;
  }
  return NULL;
}

/* One tensor entry of the header: dtype, shape, offsets, checked against the data size. */
static rx_status read_tensor(const cJSON *e, const char *name, uint64_t data_size,
                             rx_st_tensor *t) {
  const char *tn = e->string;
  if (!cJSON_IsObject(e) || cJSON_GetArraySize(e) != 3)
    return bad(name, tn, "expected an object of exactly dtype, shape and data_offsets");
  const cJSON *dt = cJSON_GetObjectItemCaseSensitive(e, "dtype");
  const cJSON *sh = cJSON_GetObjectItemCaseSensitive(e, "shape");
  const cJSON *off = cJSON_GetObjectItemCaseSensitive(e, "data_offsets");
  if (!cJSON_IsString(dt) || !cJSON_IsArray(sh) || !cJSON_IsArray(off))
    return bad(name, tn, "expected an object of exactly dtype, shape and data_offsets");
  size_t k = 0;
  while (k < RX_ARRAY_LEN(dtypes) && strcmp(dtypes[k].name, dt->valuestring)) k++;
  if (k == RX_ARRAY_LEN(dtypes))
    return base_status_make(RX_ERR_UNSUPPORTED,
                            "%s: tensor '%s': dtype %.32s is not supported (relaxc reads F32, F16, "
                            "BF16, I64, I32, I16, I8, U8, BOOL, F8_E4M3)",
                            name, tn, dt->valuestring);
  t->dtype = dtypes[k].dtype;
  t->f8_e4m3 = !strcmp(dtypes[k].name, "F8_E4M3");
  int nd = cJSON_GetArraySize(sh);
  if (nd > RX_ST_MAX_NDIM) return bad(name, tn, "more than 16 dims");
  uint64_t elems = 1, dim, begin, end;
  const cJSON *d;
  cJSON_ArrayForEach(d, sh) {
    if (!as_u64(d, &dim) || dim > INT64_MAX)
      return bad(name, tn, "a dim of the shape is not a non-negative integer");
    if (__builtin_mul_overflow(elems, dim, &elems)) return bad(name, tn, "the shape overflows");
    t->shape[t->ndim++] = (int64_t)dim;
  }
  if (cJSON_GetArraySize(off) != 2 || !as_u64(cJSON_GetArrayItem(off, 0), &begin) ||
      !as_u64(cJSON_GetArrayItem(off, 1), &end) || begin > end)
    return bad(name, tn, "data_offsets must be [begin, end] with 0 <= begin <= end");
  if (end > data_size)
    return base_status_make(RX_ERR_INVALID,
                            "%s: tensor '%s': data_offsets end at %llu, past the %llu bytes of "
                            "data (a truncated file?)",
                            name, tn, (unsigned long long)end, (unsigned long long)data_size);
  uint64_t bytes;
  if (__builtin_mul_overflow(elems, (uint64_t)base_npy_elem_size(t->dtype), &bytes) ||
      bytes != end - begin)
    return base_status_make(RX_ERR_INVALID,
                            "%s: tensor '%s': %s%s holds %llu bytes, data_offsets say %llu", name,
                            tn, dt->valuestring, nd ? " of that shape" : " scalar",
                            (unsigned long long)bytes, (unsigned long long)(end - begin));
  t->offset = begin;
  t->size = end - begin;
  t->name = base_strdup(tn);
  return NULL;
}

static int by_offset(const void *a, const void *b) {
  const rx_st_tensor *x = *(rx_st_tensor *const *)a, *y = *(rx_st_tensor *const *)b;
  return x->offset < y->offset   ? -1
         : x->offset > y->offset ? 1
                                 : (x->size > y->size) - (x->size < y->size);
}

/* No two tensors share a byte, and no name comes twice. */
static rx_status check_layout(const rx_st_file *f, const char *name) {
  rx_st_tensor **v = base_calloc(f->ntensors + 1, sizeof *v);
  for (size_t i = 0; i < f->ntensors; i++) v[i] = &f->tensors[i];
  qsort(v, f->ntensors, sizeof *v, by_offset);
  rx_status s = NULL;
  for (size_t i = 1; i < f->ntensors && !s; i++)
    if (v[i]->offset < v[i - 1]->offset + v[i - 1]->size)
      s = base_status_make(RX_ERR_INVALID, "%s: tensors '%s' and '%s' overlap in the data", name,
                           v[i - 1]->name, v[i]->name);
  free(v);
  for (size_t i = 0; i < f->ntensors && !s; i++)
    for (size_t j = 0; j < i && !s; j++)
      if (!strcmp(f->tensors[i].name, f->tensors[j].name))
        s = bad(name, f->tensors[i].name, "the name appears twice in the header");
  return s;
}

static rx_status parse_header(const cJSON *h, const char *name, rx_st_file *f) {
  if (!cJSON_IsObject(h)) return bad(name, NULL, "the header is not a JSON object");
  size_t n = (size_t)cJSON_GetArraySize(h);
  f->tensors = base_calloc(n + 1, sizeof *f->tensors);
  const cJSON *e;
  cJSON_ArrayForEach(e, h) {
    if (!e->string) return bad(name, NULL, "the header is not a JSON object");
    if (!strcmp(e->string, "__metadata__")) {
      if (f->meta) return bad(name, NULL, "__metadata__ appears twice");
      RX_RETURN_IF_ERROR(read_meta(e, name, f));
      continue;
    }
    RX_RETURN_IF_ERROR(read_tensor(e, name, f->data_size, &f->tensors[f->ntensors]));
    f->ntensors++;
  }
  return check_layout(f, name);
}

rx_status base_st_parse(const void *buf, size_t len, const char *name, rx_st_file *out) {
  memset(out, 0, sizeof *out);
  if (!name) name = "<safetensors>";
  const uint8_t *p = buf;
  if (!p || len < 8) return bad(name, NULL, "shorter than the 8-byte header size: not safetensors");
  uint64_t n = 0;
  for (int i = 7; i >= 0; i--) n = n << 8 | p[i];
  if (n > RX_ST_MAX_HEADER_BYTES || n > len - 8)
    return base_status_make(RX_ERR_INVALID,
                            "%s: a header of %llu bytes does not fit in the %zu bytes of the file "
                            "(at most %u): not safetensors, or truncated",
                            name, (unsigned long long)n, len, RX_ST_MAX_HEADER_BYTES);
  if (n < 2 || p[8] != '{')
    return bad(name, NULL, "the header does not start with '{': not safetensors");
  cJSON *h = cJSON_ParseWithLength((const char *)p + 8, (size_t)n);
  if (!h) return bad(name, NULL, "the header is not valid JSON");
  out->data = p + 8 + n;
  out->data_size = len - 8 - n;
  rx_status s = parse_header(h, name, out);
  cJSON_Delete(h);
  if (s) base_st_free(out);
  return s;
}

const char *base_st_dtype_name(rx_dtype t) {
  for (size_t k = 0; k < RX_ARRAY_LEN(dtypes); k++)
    if (dtypes[k].dtype == t) return dtypes[k].name;
  return NULL;
}

const rx_st_tensor *base_st_find(const rx_st_file *f, const char *name) {
  for (size_t i = 0; i < f->ntensors; i++)
    if (!strcmp(f->tensors[i].name, name)) return &f->tensors[i];
  return NULL;
}

const char *base_st_meta(const rx_st_file *f, const char *key) {
  for (size_t i = 0; i < f->nmeta; i++)
    if (!strcmp(f->meta[2 * i], key)) return f->meta[2 * i + 1];
  return NULL;
}

void base_st_free(rx_st_file *f) {
  for (size_t i = 0; i < f->ntensors; i++) free(f->tensors[i].name);
  free(f->tensors);
  for (size_t i = 0; i < 2 * f->nmeta; i++) free(f->meta[i]);
  free(f->meta);
  memset(f, 0, sizeof *f);
}
