/* frontends/gguf/gguf.c: the GGUF reader (gguf.h). A cursor walks the header, the metadata and the
 * tensor infos, checking every count against the bytes left before it allocates or reads; then the
 * alignment, the data section and each tensor's place in it are checked. Everything the reader
 * keeps lives in the file's arena, so an error frees it all at once. */
#include "gguf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The fewest bytes a metadata entry (an empty key, a type, a one-byte value) and a tensor info
 * (an empty name, n_dims 0, a type, an offset) take: a count larger than the bytes left allow
 * is refused before anything is allocated for it. */
#define MIN_KV_BYTES     (8 + 4 + 1)
#define MIN_TENSOR_BYTES (8 + 4 + 4 + 8)

static const uint8_t vsize[] = {
#define X(N, num, name, size) [num] = size,
    RX_GGUF_VTYPES(X)
#undef X
};

/* A cursor over the buffer; ctx names what is being read ("metadata 'general.name'"). */
typedef struct reader {
  const uint8_t *p;
  uint64_t len, off;
  const char *name;
  char ctx[160];
} reader;

static rx_status fail(const reader *r, uint64_t off, const char *fmt, ...) RX_PRINTF(3, 4);
static rx_status fail(const reader *r, uint64_t off, const char *fmt, ...) {
  rx_strbuf b = {0};
  base_strbuf_printf(&b, "%s: offset %llu: %s%s", r->name, (unsigned long long)off, r->ctx,
                     r->ctx[0] ? ": " : "");
  va_list ap;
  va_start(ap, fmt);
  base_strbuf_vprintf(&b, fmt, ap);
  va_end(ap);
  rx_status s = base_status_make(RX_ERR_INVALID, "%s", b.data);
  base_strbuf_free(&b);
  return s;
}

static uint64_t le(const uint8_t *p, int n) {
  uint64_t v = 0;
  for (int i = n - 1; i >= 0; i--) v = v << 8 | p[i];
  return v;
}

/* The next n bytes, or an error saying what needed them. */
static rx_status take(reader *r, uint64_t n, const char *what, const uint8_t **out) {
  if (n > r->len - r->off)
    return fail(r, r->off, "%s needs %llu bytes, the file ends %llu byte%s later (truncated?)",
                what, (unsigned long long)n, (unsigned long long)(r->len - r->off),
                r->len - r->off == 1 ? "" : "s");
  *out = r->p + r->off;
  r->off += n;
  return NULL;
}

static rx_status u32(reader *r, const char *what, uint32_t *out) {
  *out = 0;
  const uint8_t *b = NULL;
  RX_RETURN_IF_ERROR(take(r, 4, what, &b));
  *out = (uint32_t)le(b, 4);
  return NULL;
}

static rx_status u64(reader *r, const char *what, uint64_t *out) {
  *out = 0;
  const uint8_t *b = NULL;
  RX_RETURN_IF_ERROR(take(r, 8, what, &b));
  *out = le(b, 8);
  return NULL;
}

/* A string: its u64 length, then the bytes, copied NUL-terminated into the arena. A key or a
 * name (plain) may not hold a NUL byte. */
static rx_status string(reader *r, rx_arena *a, const char *what, bool plain, const char **out,
                        uint64_t *out_len) {
  uint64_t n, at = r->off;
  const uint8_t *b = NULL;
  RX_RETURN_IF_ERROR(u64(r, what, &n));
  if (n > r->len - r->off)
    return fail(r, at, "%s of %llu bytes runs past the end of the file (%llu bytes left)", what,
                (unsigned long long)n, (unsigned long long)(r->len - r->off));
  RX_RETURN_IF_ERROR(take(r, n, what, &b));
  if (plain && memchr(b, 0, n)) return fail(r, at, "%s holds a NUL byte", what);
  char *s = base_arena_alloc(a, n + 1);
  memcpy(s, b, n);
  *out = s;
  if (out_len) *out_len = n;
  return NULL;
}

/* A scalar of type t from its bytes (little-endian). */
static void decode(rx_gguf_vtype t, const uint8_t *b, rx_gguf_value *v) {
  memset(v, 0, sizeof *v);
  v->type = t;
  uint64_t x = le(b, vsize[t]);
  switch (t) {
  case RX_GGUF_V_INT8:
    v->v.i = (int8_t)x;
    break;
  case RX_GGUF_V_INT16:
    v->v.i = (int16_t)x;
    break;
  case RX_GGUF_V_INT32:
    v->v.i = (int32_t)x;
    break;
  case RX_GGUF_V_INT64:
    v->v.i = (int64_t)x;
    break;
  case RX_GGUF_V_FLOAT32: {
    float f;
    uint32_t w = (uint32_t)x;
    memcpy(&f, &w, 4);
    v->v.f = f;
    break;
  }
  case RX_GGUF_V_FLOAT64:
    memcpy(&v->v.f, &x, 8);
    break;
  default:
    v->v.u = x;
    break; /* the unsigned types and bool */
  }
}

/* An array's element type, count and elements; the count is checked against the bytes left. */
static rx_status array(reader *r, rx_arena *a, rx_gguf_value *v) {
  uint32_t et;
  uint64_t at = r->off, n;
  RX_RETURN_IF_ERROR(u32(r, "the array's element type", &et));
  if (et == RX_GGUF_V_ARRAY)
    return fail(r, at,
                "an array of arrays is not supported (relaxc reads arrays of scalars and "
                "strings)");
  if (et >= RX_GGUF_V_COUNT)
    return fail(r, at, "array element type %u is not a GGUF value type (0 to %d)", et,
                RX_GGUF_V_COUNT - 1);
  RX_RETURN_IF_ERROR(u64(r, "the array's count", &n));
  v->elem = (rx_gguf_vtype)et;
  v->count = n;
  uint64_t left = r->len - r->off, unit = et == RX_GGUF_V_STRING ? 8 : vsize[et];
  if (n > left / unit)
    return fail(r, at + 4, "an array of %llu %s elements cannot fit in the %llu bytes left",
                (unsigned long long)n, gguf_vtype_name(et), (unsigned long long)left);
  if (et != RX_GGUF_V_STRING) {
    RX_RETURN_IF_ERROR(take(r, n * unit, "the array", &v->data));
    for (uint64_t i = 0; et == RX_GGUF_V_BOOL && i < n; i++)
      if (v->data[i] > 1)
        return fail(r, at + 12 + i, "bool element %llu is %u, expected 0 or 1",
                    (unsigned long long)i, v->data[i]);
    return NULL;
  }
  const char **strs = base_arena_alloc(a, (n + 1) * sizeof *strs);
  uint64_t *lens = base_arena_alloc(a, (n + 1) * sizeof *lens);
  v->strs = strs;
  v->lens = lens;
  for (uint64_t i = 0; i < n; i++) {
    char what[64];
    snprintf(what, sizeof what, "string element %llu", (unsigned long long)i);
    RX_RETURN_IF_ERROR(string(r, a, what, false, &strs[i], &lens[i]));
  }
  return NULL;
}

/* A value of type t (read just before it). */
static rx_status value(reader *r, rx_arena *a, uint32_t t, uint64_t at, rx_gguf_value *v) {
  memset(v, 0, sizeof *v);
  if (t >= RX_GGUF_V_COUNT)
    return fail(r, at, "value type %u is not a GGUF value type (0 to %d)", t, RX_GGUF_V_COUNT - 1);
  v->type = (rx_gguf_vtype)t;
  if (t == RX_GGUF_V_STRING) return string(r, a, "the string", false, &v->str, &v->len);
  if (t == RX_GGUF_V_ARRAY) return array(r, a, v);
  const uint8_t *b = NULL;
  uint64_t vat = r->off;
  RX_RETURN_IF_ERROR(take(r, vsize[t], gguf_vtype_name(t), &b));
  decode((rx_gguf_vtype)t, b, v);
  if (t == RX_GGUF_V_BOOL && v->v.u > 1)
    return fail(r, vat, "a bool is %u, expected 0 or 1", (unsigned)v->v.u);
  return NULL;
}

static rx_status read_kvs(reader *r, rx_gguf_file *f) {
  for (size_t i = 0; i < f->nkvs; i++) {
    rx_gguf_kv *kv = &f->kvs[i];
    kv->offset = r->off;
    snprintf(r->ctx, sizeof r->ctx, "metadata entry %zu", i);
    RX_RETURN_IF_ERROR(string(r, &f->arena, "the key", true, &kv->key, NULL));
    snprintf(r->ctx, sizeof r->ctx, "metadata '%.120s'", kv->key);
    uint32_t t;
    uint64_t at = r->off;
    RX_RETURN_IF_ERROR(u32(r, "the value type", &t));
    RX_RETURN_IF_ERROR(value(r, &f->arena, t, at, &kv->value));
  }
  r->ctx[0] = 0;
  return NULL;
}

/* general.alignment: a uint32 power of two when present. */
static rx_status read_alignment(reader *r, rx_gguf_file *f) {
  f->alignment = RX_GGUF_DEFAULT_ALIGNMENT;
  const rx_gguf_kv *kv = gguf_find(f, "general.alignment");
  if (!kv) return NULL;
  uint64_t v = kv->value.v.u;
  if (kv->value.type != RX_GGUF_V_UINT32 || v == 0 || (v & (v - 1)))
    return fail(r, kv->offset, "general.alignment is %s %llu, expected a uint32 power of two",
                gguf_vtype_name(kv->value.type), (unsigned long long)v);
  f->alignment = (uint32_t)v;
  return NULL;
}

/* The type of a tensor, its dims in relaxc's order, its element count and bytes. */
static rx_status tensor_geometry(reader *r, uint64_t at, uint32_t type, rx_gguf_tensor *t) {
  if (!gguf_type_name(type)) return fail(r, at, "type %u is not a GGML tensor type", type);
  if (!gguf_type_supported(type)) {
    rx_strbuf list = {0};
    gguf_supported_list(&list);
    rx_status s = fail(r, at, "type %s (%u) is not supported; supported: %s", gguf_type_name(type),
                       type, list.data);
    base_strbuf_free(&list);
    return s;
  }
  t->type = (rx_gguf_type)type;
  if (base_shape_count(t->ndim, t->shape, 1, &t->elems) != RX_COUNT_OK)
    return fail(r, at, "the element count of its dims overflows an int64");
  int64_t block = gguf_block_elems(t->type), row = t->ndim ? t->shape[t->ndim - 1] : 1;
  if (row % block)
    return fail(r, at, "rows of %lld elements (ne[0]) are not a whole number of %s blocks of %lld",
                (long long)row, gguf_type_name(type), (long long)block);
  if (__builtin_mul_overflow((uint64_t)(t->elems / block), (uint64_t)gguf_block_bytes(t->type),
                             &t->size))
    return fail(r, at, "the byte size of its %lld elements overflows", (long long)t->elems);
  return NULL;
}

static rx_status read_tensor(reader *r, rx_gguf_file *f, size_t i) {
  rx_gguf_tensor *t = &f->tensors[i];
  snprintf(r->ctx, sizeof r->ctx, "tensor %zu", i);
  RX_RETURN_IF_ERROR(string(r, &f->arena, "the name", true, &t->name, NULL));
  snprintf(r->ctx, sizeof r->ctx, "tensor '%.120s'", t->name);
  uint32_t nd, type;
  uint64_t at = r->off;
  RX_RETURN_IF_ERROR(u32(r, "n_dims", &nd));
  if (nd > RX_GGUF_MAX_DIMS)
    return fail(r, at, "n_dims is %u, expected at most %d", nd, RX_GGUF_MAX_DIMS);
  t->ndim = (int)nd;
  for (uint32_t d = 0; d < nd; d++) {
    uint64_t ne;
    at = r->off;
    RX_RETURN_IF_ERROR(u64(r, "a dim", &ne));
    if (ne > INT64_MAX)
      return fail(r, at, "ne[%u] is %llu, more than an int64 holds", d, (unsigned long long)ne);
    t->shape[nd - 1 - d] = (int64_t)ne; /* GGUF lists ne[0] (innermost) first */
  }
  at = r->off;
  RX_RETURN_IF_ERROR(u32(r, "the type", &type));
  RX_RETURN_IF_ERROR(tensor_geometry(r, at, type, t));
  at = r->off;
  RX_RETURN_IF_ERROR(u64(r, "the offset", &t->offset));
  if (t->offset % f->alignment)
    return fail(r, at, "data offset %llu is not a multiple of the alignment %u",
                (unsigned long long)t->offset, f->alignment);
  return NULL;
}

static int by_offset(const void *a, const void *b) {
  const rx_gguf_tensor *x = *(rx_gguf_tensor *const *)a, *y = *(rx_gguf_tensor *const *)b;
  return x->offset < y->offset   ? -1
         : x->offset > y->offset ? 1
                                 : (x->size > y->size) - (x->size < y->size);
}

static int by_name(const void *a, const void *b) {
  return strcmp(**(const char *const *const *)a, **(const char *const *const *)b);
}

/* Each tensor inside the data section, no two sharing a byte, no name (and no key) twice. */
static rx_status check_layout(reader *r, rx_gguf_file *f) {
  r->ctx[0] = 0;
  for (size_t i = 0; i < f->ntensors; i++) {
    const rx_gguf_tensor *t = &f->tensors[i];
    if (t->offset > f->data_size || t->size > f->data_size - t->offset)
      return fail(r, f->data_offset,
                  "tensor '%s': its %llu bytes at offset %llu of the data section end past the "
                  "section's %llu bytes (a truncated file?)",
                  t->name, (unsigned long long)t->size, (unsigned long long)t->offset,
                  (unsigned long long)f->data_size);
  }
  size_t n = f->ntensors > f->nkvs ? f->ntensors : f->nkvs;
  const void **v = base_arena_alloc(&f->arena, (n + 1) * sizeof *v);
  for (size_t i = 0; i < f->ntensors; i++) v[i] = &f->tensors[i];
  qsort(v, f->ntensors, sizeof *v, by_offset);
  for (size_t i = 1; i < f->ntensors; i++) {
    const rx_gguf_tensor *a = v[i - 1], *b = v[i];
    if (b->offset < a->offset + a->size)
      return fail(r, f->data_offset, "tensors '%s' and '%s' overlap in the data section", a->name,
                  b->name);
  }
  qsort(v, f->ntensors, sizeof *v, by_name); /* name is each struct's first field */
  for (size_t i = 1; i < f->ntensors; i++)
    if (!by_name(&v[i - 1], &v[i]))
      return fail(r, f->data_offset, "tensor '%s' appears twice",
                  ((const rx_gguf_tensor *)v[i])->name);
  for (size_t i = 0; i < f->nkvs; i++) v[i] = &f->kvs[i];
  qsort(v, f->nkvs, sizeof *v, by_name);
  for (size_t i = 1; i < f->nkvs; i++)
    if (!by_name(&v[i - 1], &v[i]))
      return fail(r, ((const rx_gguf_kv *)v[i])->offset, "metadata key '%s' appears twice",
                  ((const rx_gguf_kv *)v[i])->key);
  return NULL;
}

/* Magic, version and the two counts, each count checked against the bytes left. */
static rx_status read_header(reader *r, rx_gguf_file *f, uint64_t *ntensors, uint64_t *nkvs) {
  if (r->len < 4 || memcmp(r->p, RX_GGUF_MAGIC, 4))
    return fail(r, 0, "the file does not start with the magic \"GGUF\": not a GGUF file");
  r->off = 4;
  RX_RETURN_IF_ERROR(u32(r, "the version", &f->version));
  if (f->version && !(f->version & 0xffff))
    return fail(r, 4, "version 0x%08x: a big-endian GGUF file (relaxc reads little-endian ones)",
                f->version);
  if (f->version != 2 && f->version != 3)
    return fail(r, 4, "GGUF version %u is not supported (relaxc reads versions 2 and 3)",
                f->version);
  RX_RETURN_IF_ERROR(u64(r, "the tensor count", ntensors));
  RX_RETURN_IF_ERROR(u64(r, "the metadata count", nkvs));
  uint64_t left = r->len - r->off;
  if (*nkvs > left / MIN_KV_BYTES)
    return fail(r, 16, "%llu metadata entries cannot fit in the %llu bytes left",
                (unsigned long long)*nkvs, (unsigned long long)left);
  if (*ntensors > (left - *nkvs * MIN_KV_BYTES) / MIN_TENSOR_BYTES)
    return fail(r, 8, "%llu tensor infos cannot fit in the %llu bytes left after the metadata",
                (unsigned long long)*ntensors, (unsigned long long)(left - *nkvs * MIN_KV_BYTES));
  return NULL;
}

static rx_status parse(reader *r, rx_gguf_file *f) {
  uint64_t nt = 0, nkv = 0;
  RX_RETURN_IF_ERROR(read_header(r, f, &nt, &nkv));
  f->nkvs = (size_t)nkv;
  f->ntensors = (size_t)nt;
  f->kvs = base_arena_alloc(&f->arena, (f->nkvs + 1) * sizeof *f->kvs);
  f->tensors = base_arena_alloc(&f->arena, (f->ntensors + 1) * sizeof *f->tensors);
  RX_RETURN_IF_ERROR(read_kvs(r, f));
  RX_RETURN_IF_ERROR(read_alignment(r, f));
  for (size_t i = 0; i < f->ntensors; i++) RX_RETURN_IF_ERROR(read_tensor(r, f, i));
  /* the data section starts at the next multiple of the alignment; a file of no tensor data
   * may end before it */
  uint64_t start = (r->off + f->alignment - 1) / f->alignment * f->alignment;
  f->data_offset = start < r->len ? start : r->len;
  f->data = r->p + f->data_offset;
  f->data_size = r->len - f->data_offset;
  return check_layout(r, f);
}

rx_status gguf_parse(const void *buf, size_t len, const char *name, rx_gguf_file *out) {
  memset(out, 0, sizeof *out);
  base_arena_init(&out->arena);
  if (!name) name = "<gguf>";
  out->name = base_arena_strdup(&out->arena, name);
  reader r = {.p = buf, .len = buf ? len : 0, .name = out->name};
  rx_status s = parse(&r, out);
  if (s) gguf_free(out);
  return s;
}

void gguf_free(rx_gguf_file *f) {
  base_arena_free(&f->arena);
  memset(f, 0, sizeof *f);
}

bool gguf_is_gguf(const void *buf, size_t len) {
  return buf && len >= 4 && !memcmp(buf, RX_GGUF_MAGIC, 4);
}

/* ---- lookups ---- */

const rx_gguf_kv *gguf_find(const rx_gguf_file *f, const char *key) {
  for (size_t i = 0; i < f->nkvs; i++)
    if (!strcmp(f->kvs[i].key, key)) return &f->kvs[i];
  return NULL;
}

const rx_gguf_tensor *gguf_find_tensor(const rx_gguf_file *f, const char *name) {
  for (size_t i = 0; i < f->ntensors; i++)
    if (!strcmp(f->tensors[i].name, name)) return &f->tensors[i];
  return NULL;
}

/* The value of key, or an error saying it is missing (want: what the caller expected). */
static rx_status lookup(const rx_gguf_file *f, const char *key, const char *want,
                        const rx_gguf_value **out) {
  const rx_gguf_kv *kv = gguf_find(f, key);
  if (!kv)
    return base_status_make(RX_ERR_INVALID, "%s: metadata key '%s' is missing (expected %s)",
                            f->name, key, want);
  *out = &kv->value;
  return NULL;
}

static rx_status wrong(const rx_gguf_file *f, const char *key, const rx_gguf_value *v,
                       const char *want) {
  if (v->type == RX_GGUF_V_ARRAY)
    return base_status_make(RX_ERR_INVALID, "%s: metadata key '%s' is an array of %s, expected %s",
                            f->name, key, gguf_vtype_name(v->elem), want);
  return base_status_make(RX_ERR_INVALID, "%s: metadata key '%s' has type %s, expected %s", f->name,
                          key, gguf_vtype_name(v->type), want);
}

rx_status gguf_get_string(const rx_gguf_file *f, const char *key, const char **out) {
  *out = NULL;
  const rx_gguf_value *v = NULL;
  RX_RETURN_IF_ERROR(lookup(f, key, "a string", &v));
  if (v->type != RX_GGUF_V_STRING) return wrong(f, key, v, "a string");
  *out = v->str;
  return NULL;
}

/* An integer of any integer type in [lo, hi]. */
static rx_status get_int(const rx_gguf_file *f, const char *key, int64_t lo, int64_t hi,
                         const char *want, int64_t *out) {
  const rx_gguf_value *v = NULL;
  RX_RETURN_IF_ERROR(lookup(f, key, want, &v));
  bool is_signed = v->type == RX_GGUF_V_INT8 || v->type == RX_GGUF_V_INT16 ||
                   v->type == RX_GGUF_V_INT32 || v->type == RX_GGUF_V_INT64;
  bool is_unsigned = v->type == RX_GGUF_V_UINT8 || v->type == RX_GGUF_V_UINT16 ||
                     v->type == RX_GGUF_V_UINT32 || v->type == RX_GGUF_V_UINT64;
  if (!is_signed && !is_unsigned) return wrong(f, key, v, want);
  bool fits = is_signed ? v->v.i >= lo && v->v.i <= hi : v->v.u <= (uint64_t)hi;
  if (!fits) {
    if (is_signed)
      return base_status_make(RX_ERR_INVALID,
                              "%s: metadata key '%s' is %lld, out of the range of %s", f->name, key,
                              (long long)v->v.i, want);
    return base_status_make(RX_ERR_INVALID, "%s: metadata key '%s' is %llu, out of the range of %s",
                            f->name, key, (unsigned long long)v->v.u, want);
  }
  *out = is_signed ? v->v.i : (int64_t)v->v.u;
  return NULL;
}

rx_status gguf_get_u32(const rx_gguf_file *f, const char *key, uint32_t *out) {
  *out = 0;
  int64_t v = 0;
  RX_RETURN_IF_ERROR(get_int(f, key, 0, UINT32_MAX, "a uint32", &v));
  *out = (uint32_t)v;
  return NULL;
}

rx_status gguf_get_i32(const rx_gguf_file *f, const char *key, int32_t *out) {
  *out = 0;
  int64_t v = 0;
  RX_RETURN_IF_ERROR(get_int(f, key, INT32_MIN, INT32_MAX, "an int32", &v));
  *out = (int32_t)v;
  return NULL;
}

rx_status gguf_get_f32(const rx_gguf_file *f, const char *key, float *out) {
  *out = 0;
  const rx_gguf_value *v = NULL;
  RX_RETURN_IF_ERROR(lookup(f, key, "a float32", &v));
  if (v->type != RX_GGUF_V_FLOAT32 && v->type != RX_GGUF_V_FLOAT64)
    return wrong(f, key, v, "a float32");
  *out = (float)v->v.f;
  return NULL;
}

rx_status gguf_get_array(const rx_gguf_file *f, const char *key, rx_gguf_vtype elem,
                         const rx_gguf_value **out) {
  *out = NULL;
  char want[48];
  snprintf(want, sizeof want, "an array of %s", gguf_vtype_name(elem));
  const rx_gguf_value *v = NULL;
  RX_RETURN_IF_ERROR(lookup(f, key, want, &v));
  if (v->type != RX_GGUF_V_ARRAY || v->elem != elem) return wrong(f, key, v, want);
  *out = v;
  return NULL;
}

rx_gguf_value gguf_array_at(const rx_gguf_value *a, uint64_t i) {
  RX_ASSERT(a->type == RX_GGUF_V_ARRAY && i < a->count);
  rx_gguf_value v = {.type = a->elem};
  if (a->elem == RX_GGUF_V_STRING) {
    v.str = a->strs[i];
    v.len = a->lens[i];
  } else {
    decode(a->elem, a->data + i * vsize[a->elem], &v);
  }
  return v;
}
