/* base: arena, growable arrays, string interning, statuses and diagnostics.
 * Shared by every folder, the runtime included. Internal header. */
#ifndef RX_BASE_H
#define RX_BASE_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>  /* FILE: base_read_stream_kind */
#include <string.h> /* memcpy: the inline half-float conversions */

#include "../include/relaxc/types.h" /* rx_status_code, rx_status, rx_dtype */

#define RX_PRINTF(f, a) __attribute__((format(printf, f, a)))
#define RX_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

/* An internal invariant failed: a bug in relaxc, never a user error. */
#define RX_ASSERT(c)                                                                               \
  do {                                                                                             \
    if (!(c)) base_panic(__FILE__, __LINE__, #c);                                                  \
  } while (0)
_Noreturn void base_panic(const char *file, int line, const char *what);

/* ---- heap wrappers: abort only on host allocation failure (not user input) ---- */
void *base_malloc(size_t n);
void *base_calloc(size_t n, size_t size);
void *base_realloc(void *p, size_t n);
char *base_strdup(const char *s);
char *base_strndup(const char *s, size_t n);

/* ---- arena: bump allocation, everything freed at once ---- */
typedef struct rx_arena_chunk rx_arena_chunk;
typedef struct rx_arena {
  rx_arena_chunk *head; /* newest chunk first */
  size_t used;          /* bytes used in head */
  size_t cap;           /* bytes available in head */
  size_t total;         /* bytes allocated over all chunks (statistics) */
} rx_arena;

void base_arena_init(rx_arena *a);
void base_arena_free(rx_arena *a); /* frees every chunk; the arena may be reused after */
void *base_arena_alloc(rx_arena *a, size_t n); /* zeroed, 16-byte aligned */
void *base_arena_dup(rx_arena *a, const void *p, size_t n);
char *base_arena_strdup(rx_arena *a, const char *s);
char *base_arena_strndup(rx_arena *a, const char *s, size_t n);
char *base_arena_printf(rx_arena *a, const char *fmt, ...) RX_PRINTF(2, 3);

/* ---- growable array of pointers (heap) ---- */
typedef struct rx_ptrvec {
  void **data;
  size_t len, cap;
} rx_ptrvec;
void base_ptrvec_push(rx_ptrvec *v, void *p);
void base_ptrvec_free(rx_ptrvec *v);

/* Generic typed vector: RX_VEC(int) v = {0}; RX_VEC_PUSH(&v, 3); free(v.data); */
#define RX_VEC(T)                                                                                  \
  struct {                                                                                         \
    T *data;                                                                                       \
    size_t len, cap;                                                                               \
  }
#define RX_VEC_PUSH(v, x)                                                                          \
  do {                                                                                             \
    if ((v)->len == (v)->cap) {                                                                    \
      (v)->cap = (v)->cap ? (v)->cap * 2 : 8;                                                      \
      (v)->data = base_realloc((v)->data, (v)->cap * sizeof(*(v)->data));                          \
    }                                                                                              \
    (v)->data[(v)->len++] = (x);                                                                   \
  } while (0)

/* ---- map from pointers to ints (heap, open addressing) ---- */
typedef struct rx_ptrmap {
  const void **keys;
  int *vals;
  size_t cap, len;
} rx_ptrmap;
void base_ptrmap_put(rx_ptrmap *m, const void *key, int value); /* key != NULL; replaces */
int base_ptrmap_get(const rx_ptrmap *m, const void *key);       /* -1 when absent */
void base_ptrmap_free(rx_ptrmap *m);

/* ---- growable string buffer (heap) ---- */
typedef struct rx_strbuf {
  char *data; /* always NUL-terminated once anything was appended */
  size_t len, cap;
} rx_strbuf;
void base_strbuf_append(rx_strbuf *b, const char *s);
void base_strbuf_appendn(rx_strbuf *b, const char *s, size_t n);
void base_strbuf_printf(rx_strbuf *b, const char *fmt, ...) RX_PRINTF(2, 3);
void base_strbuf_vprintf(rx_strbuf *b, const char *fmt, va_list ap);
void base_strbuf_putc(rx_strbuf *b, char c);
char *base_strbuf_take(rx_strbuf *b); /* returns the heap string (never NULL), resets b */
/* s as a JSON string literal ("null" for NULL): " and \ escaped, \n \r \t as such, other
 * control characters as \u00XX; bytes from 0x80 up copied (UTF-8 passes through). The one JSON
 * escaper of the compiler (kernels.json, manifest.json). */
void base_strbuf_json_string(rx_strbuf *b, const char *s);
void base_strbuf_free(rx_strbuf *b);

/* ---- element counts and byte sizes: the one checked product of a shape's dims ---- */
typedef enum rx_count_status {
  RX_COUNT_OK = 0,
  RX_COUNT_NEGATIVE, /* a dimension is negative */
  RX_COUNT_OVERFLOW, /* the product overflows int64 */
} rx_count_status;
/* The product of the ndim dims of shape times unit (1: the element count; a dtype's bytes: the
 * byte size) into *out (0 unless OK). Every element count or byte size of a shape computed in
 * base/, ir/, runtime/ and tools/ goes through here, so an overflow is reported as one ("element
 * count of f32[...] overflows"), never wrapped to a small or zero count. */
rx_count_status base_shape_count(int ndim, const int64_t *shape, uint64_t unit, int64_t *out);
/* The same for a count already known to be valid and one more factor (e.g. bytes of a count). */
bool base_mul_count(int64_t a, int64_t b, int64_t *out);

/* ---- half floats (base/half.c) ---- */
/* f16 and bf16 to and from f32 (round to nearest even; NaN stays NaN, overflow gives infinity,
 * subnormals are exact): the interpreter's rounding, shared by everyone who converts. */
/* Inline here (integers only, no libm, the FP environment never matters): the interpreter
 * rounds after every f16 operation, a tenth of its time when these were calls. */
static inline uint32_t base_f2u_(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}
static inline float base_u2f_(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}
static inline uint16_t base_f32_to_f16(float f) {
  uint32_t x = base_f2u_(f);
  uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
  uint32_t ax = x & 0x7fffffffu;
  if (ax >= 0x7f800000u) { /* inf, nan (kept quiet, top payload bits kept) */
    if (ax == 0x7f800000u) return (uint16_t)(sign | 0x7c00u);
    return (uint16_t)(sign | 0x7e00u | ((ax >> 13) & 0x3ffu));
  }
  int e = (int)(ax >> 23) - 127 + 15; /* f16 biased exponent */
  uint32_t m = ax & 0x7fffffu;
  if (e >= 31) return (uint16_t)(sign | 0x7c00u);
  if (e >= 1) {
    uint32_t h = ((uint32_t)e << 10) | (m >> 13);
    uint32_t rest = m & 0x1fffu;
    if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) h++; /* may carry into inf: right */
    return (uint16_t)(sign | h);
  }
  /* subnormal (or zero): units of 2^-24; value = (m | 2^23) * 2^(E - 23), E = e - 15 */
  if (ax == 0) return sign;
  int shift = 14 - e; /* 2^(E-23) / 2^-24 = 2^(E+1) = 2^(e-14) */
  if (shift > 24) return sign;
  uint32_t mm = m | 0x800000u;
  uint32_t q = mm >> shift;
  uint32_t rest = mm & ((1u << shift) - 1u), half = 1u << (shift - 1);
  if (rest > half || (rest == half && (q & 1u))) q++; /* may become the smallest normal: right */
  return (uint16_t)(sign | q);
}
static inline float base_f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  if (e == 31) return base_u2f_(sign | 0x7f800000u | (m << 13));
  if (e != 0) return base_u2f_(sign | ((e + 112u) << 23) | (m << 13));
  if (m == 0) return base_u2f_(sign);
  /* subnormal m * 2^-24: top bit p of m gives 1.f * 2^(p - 24), biased exponent p + 103 */
  uint32_t p = 31u - (uint32_t)__builtin_clz(m);
  return base_u2f_(sign | ((p + 103u) << 23) | ((m << (23u - p)) & 0x7fffffu));
}
static inline uint16_t base_f32_to_bf16(float f) {
  uint32_t x = base_f2u_(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40u); /* quiet nan */
  x += 0x7fffu + ((x >> 16) & 1u);
  return (uint16_t)(x >> 16);
}
static inline float base_bf16_to_f32(uint16_t h) { return base_u2f_((uint32_t)h << 16); }
/* Element i of a buffer of dtype t as a double (u64 and i64 rounded to the nearest double;
 * bool and u8 as their byte). */
double base_elem_to_f64(const void *data, rx_dtype t, size_t i);

/* ---- hashing ---- */
uint64_t base_hash_bytes(const void *p, size_t n);
/* CRC-32 of zlib and PNG (reflected polynomial 0xEDB88320, initial value and final xor
 * 0xFFFFFFFF; "123456789" gives 0xCBF43926), chained: crc = base_crc32_update(0, a, n), then
 * base_crc32_update(crc, b, m). base/crc32.c: the artifact writer's and the loader's one CRC. */
uint32_t base_crc32_update(uint32_t crc, const void *data, size_t n);
/* Run-time checks of values from data (an index loaded from a tensor; ir.h, RX_INTRIN_CHECK):
 * a kernel whose check fails writes the check's code, never 0, and the value's low and high
 * 32-bit words to the error buffer of its call (docs/kernel-abi.md, "Run-time checks"); the
 * code is this CRC of the check's message, so a kernel's source and the message table the
 * runtime builds from kernels.json agree without a numbering. */
int32_t base_check_code(const char *message);
/* The message of a failed check: message with each "%v" replaced by value ("%%" by "%"), heap
 * (caller frees; NULL when out of memory). */
char *base_check_format(const char *message, int64_t value);
/* Words of the error buffer: [0] the code (0: no error), [1] [2] the value's low and high words. */
#define RX_CHECK_WORDS 4
static inline uint64_t rx_hash_mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  return h * 0xbf58476d1ce4e5b9ull;
}

/* ---- string interning: equal strings get the same pointer (lives in the arena) ---- */
typedef struct rx_strtab {
  rx_arena *arena;
  const char **slots;
  size_t cap, count;
} rx_strtab;
void base_strtab_init(rx_strtab *t, rx_arena *arena);
void base_strtab_free(rx_strtab *t); /* frees the table, not the strings (arena-owned) */
const char *base_strtab_intern(rx_strtab *t, const char *s, size_t n);

/* ---- statuses: NULL is OK, anything else is an error with a message ---- */

rx_status base_status_make(rx_status_code code, const char *fmt, ...) RX_PRINTF(2, 3);
rx_status base_status_vmake(rx_status_code code, const char *fmt, va_list ap);
/* Prefix the message of s with "prefix: " (returns s, or NULL when s is OK). */
rx_status base_status_annotate(rx_status s, const char *fmt, ...) RX_PRINTF(2, 3);

#define RX_RETURN_IF_ERROR(expr)                                                                   \
  do {                                                                                             \
    rx_status rx_s_ = (expr);                                                                      \
    if (rx_s_) return rx_s_;                                                                       \
  } while (0)

/* ---- sources and locations ---- */
typedef struct rx_source {
  const char *name; /* file name as given by the user */
  const char *text; /* whole text, NUL-terminated */
  size_t len;
} rx_source;

typedef struct rx_loc {
  const rx_source *src; /* NULL: no location (built programmatically) */
  uint32_t line, col;   /* 1-based */
  uint32_t offset;      /* byte offset into src->text */
} rx_loc;

/* Diagnostics collect errors and warnings, each rendered as
 *   file:line:col: error: message
 *     source line
 *         ^
 * Nothing is printed until the caller asks (rx_diag_print). */
typedef enum rx_diag_level { RX_DIAG_ERROR, RX_DIAG_WARNING, RX_DIAG_NOTE } rx_diag_level;

typedef struct rx_diag {
  rx_strbuf text; /* rendered messages, in order */
  int errors, warnings;
  int max_errors; /* stop recording after this many errors (0: 50) */
} rx_diag;

void base_diag_init(rx_diag *d);
void base_diag_free(rx_diag *d);
void base_diag_report(rx_diag *d, rx_diag_level lvl, rx_loc loc, const char *fmt, ...)
    RX_PRINTF(4, 5);
void base_diag_vreport(rx_diag *d, rx_diag_level lvl, rx_loc loc, const char *fmt, va_list ap);
RX_API const char *rx_diag_text(const rx_diag *d); /* "" when empty */
/* The first n bytes of rendered diagnostics (rx_diag_text) as the message of a status of code:
 * without the levels "error: " ("x.rx:3:7: error: m" -> "x.rx:3:7: m"), which whoever prints the
 * status adds once ("relaxc: error: "); trailing newlines dropped; fallback when empty. */
rx_status base_diag_status(rx_status_code code, const char *text, size_t n, const char *fallback);

/* Files read whole into memory, by kind: each kind's limit with its reason. A regular file larger
 * than its kind's limit is refused before a byte is read; a stream (standard input, a FIFO,
 * /dev/zero) is read up to the limit and refused past it. The message names the file, the kind and
 * the limit. Tensors are never read this way: .npy files are sized from their headers
 * (base/npy.c), safetensors and GGUF files and artifacts are mapped (base_map_file), ONNX external
 * data is read at the offset and length its tensor names. */
#define RX_FILE_KINDS(X)                                                                           \
  /* .rx text holds no weights: a 100k-binding module prints to about 10 MB */                     \
  X(RX_FILE_TEXT_IR, "text IR", 64ull << 20)                                                       \
  /* config.json, generation_config.json, model.safetensors.index.json, kernels.json, manifests:   \
   * under 1 MB; tokenizer.json: the largest in use (262k-token vocabularies) about 35 MB */       \
  X(RX_FILE_JSON, "JSON", 128ull << 20)                                                            \
  /* protobuf refuses a message of 2 GB or more (INT_MAX bytes); larger ONNX models keep their     \
   * tensors in external data files */                                                             \
  X(RX_FILE_ONNX, "ONNX protobuf", 2147483647ull)                                                  \
  /* text IR or an ONNX protobuf, told apart by the first byte (a binary byte: ONNX): the limit of \
   * the kind it turns out to be */                                                                \
  X(RX_FILE_MODEL, "model", 2147483647ull)                                                         \
  /* a compiled kernel (SPIR-V, PTX, a metallib) or a kernel cache entry: a few MB */              \
  X(RX_FILE_KERNEL, "kernel binary", 256ull << 20)

typedef enum rx_file_kind {
#define RX_FILE_KIND_ENUM(k, name, limit) k,
  RX_FILE_KINDS(RX_FILE_KIND_ENUM)
#undef RX_FILE_KIND_ENUM
      RX_FILE_KIND_COUNT
} rx_file_kind;
const char *base_file_kind_name(rx_file_kind k); /* "text IR" */
uint64_t base_file_kind_limit(rx_file_kind k);   /* bytes */

/* Reads a whole file of the given kind (NUL-terminated, heap); on error returns a status naming
 * the path: missing, a directory, past the kind's limit, a read error. */
rx_status base_read_file_kind(const char *path, rx_file_kind kind, char **out_text,
                              size_t *out_len);
/* The same from an open stream f (standard input), named name in messages. */
rx_status base_read_stream_kind(FILE *f, const char *name, rx_file_kind kind, char **out_text,
                                size_t *out_len);
/* base_read_file_kind of a JSON file: the common case of the importers. */
rx_status base_read_file(const char *path, char **out_text, size_t *out_len);
/* Does file, its symlinks resolved (realpath), lie inside the folder dir, resolved likewise? NULL
 * when it does; else a status naming file, where it resolves to and the folder (RX_ERR_INVALID),
 * or why it cannot be resolved (RX_ERR_NOT_FOUND). With hf_cache, a folder inside a snapshot of a
 * Hugging Face cache (.../models--ORG--NAME/snapshots/REV[/...]) also holds the files of that
 * repository's blobs/ folder, where the cache's snapshot files link to (docs/inputs.md, "ONNX
 * external data"). */
rx_status base_path_check_inside(const char *file, const char *dir, bool hf_cache);
/* A file mapped read-only (mmap): checkpoints and artifacts of gigabytes are read in place. An
 * empty file maps to data NULL, size 0. Errors name the path (missing, a directory, mmap). */
typedef struct rx_mapped_file {
  const uint8_t *data;
  size_t size;
} rx_mapped_file;
rx_status base_map_file(const char *path, rx_mapped_file *out);
void base_unmap_file(rx_mapped_file *f); /* a zeroed or unmapped one is fine */

#endif
