/* frontends/gguf/gguf.h: a reader of GGUF files (llama.cpp's model format, versions 2 and 3,
 * little-endian) in memory, and the reference dequantization of the GGML block formats it holds
 * (issue 15). A file is
 *
 *   "GGUF"  u32 version  u64 tensor_count  u64 kv_count
 *   kv_count x   { string key, u32 value type, value }
 *   tensor_count x { string name, u32 n_dims, u64 ne[n_dims], u32 ggml type, u64 offset }
 *   padding to general.alignment (a u32; 32 when absent), then the data section
 *
 * with every integer little-endian, a string a u64 byte count and that many bytes (no NUL), an
 * array a u32 element type, a u64 count and the elements (arrays of arrays are refused), each
 * tensor's offset from the start of the data section. The reader checks everything against the
 * buffer before anyone reads a value: counts against the bytes left (so a huge count is an error,
 * not an allocation), every string and array inside the file, keys and tensor names free of NUL
 * bytes and not repeated, general.alignment a power of two of type u32, each tensor's dims (at most
 * RX_GGUF_MAX_DIMS, none negative, a product that fits an int64, rows a whole number of blocks),
 * its type one relaxc reads, its offset a multiple of the alignment, its bytes inside the data
 * section and shared with no other tensor. Errors name the file, the byte offset, the key or the
 * tensor, and what was expected; nothing is owned after one.
 *
 * Dimension order. GGUF (like ggml) lists a tensor's dims innermost first: ne[0] is the length
 * of a row of contiguous elements, the axis blocks run along. relaxc's order, in rx_gguf_tensor
 * and everywhere else (safetensors, NumPy, the IR), is outermost first: shape[ndim - 1] is ne[0],
 * shape[0] is ne[n_dims - 1]. A GGUF tensor of ne = {4096, 11008} is relaxc's [11008, 4096], the
 * same shape NumPy and PyTorch give that weight.
 *
 * The data is not copied: tensor bytes and numeric arrays point into the caller's buffer, which
 * must outlive the rx_gguf_file; keys, names and strings are copied (NUL-terminated) into the
 * file's arena. */
#ifndef RX_FRONTENDS_GGUF_H
#define RX_FRONTENDS_GGUF_H

#include "../../base/quant.h" /* the GGML tensor types (RX_GGUF_TYPES): block formats */

#define RX_GGUF_MAGIC "GGUF"
/* ggml's GGML_MAX_DIMS: no ggml tensor has more. */
#define RX_GGUF_MAX_DIMS 4
/* GGUF_DEFAULT_ALIGNMENT of the format's definition: the alignment without general.alignment. */
#define RX_GGUF_DEFAULT_ALIGNMENT 32

/* Metadata value types: X(NAME, number in the file, name in messages, bytes of one value; 0 for
 * strings and arrays, whose size is in the file). */
#define RX_GGUF_VTYPES(X)                                                                          \
  X(UINT8, 0, "uint8", 1)                                                                          \
  X(INT8, 1, "int8", 1)                                                                            \
  X(UINT16, 2, "uint16", 2)                                                                        \
  X(INT16, 3, "int16", 2)                                                                          \
  X(UINT32, 4, "uint32", 4)                                                                        \
  X(INT32, 5, "int32", 4)                                                                          \
  X(FLOAT32, 6, "float32", 4)                                                                      \
  X(BOOL, 7, "bool", 1)                                                                            \
  X(STRING, 8, "string", 0)                                                                        \
  X(ARRAY, 9, "array", 0)                                                                          \
  X(UINT64, 10, "uint64", 8)                                                                       \
  X(INT64, 11, "int64", 8)                                                                         \
  X(FLOAT64, 12, "float64", 8)

typedef enum rx_gguf_vtype {
#define X(N, num, name, size) RX_GGUF_V_##N = num,
  RX_GGUF_VTYPES(X)
#undef X
      RX_GGUF_V_COUNT
} rx_gguf_vtype;

/* The GGML tensor types (RX_GGUF_TYPES, rx_gguf_type) are base/quant.h's: quant_matmul reads the
 * same block formats. */

/* A metadata value. Scalars: unsigned integers in u, signed in i, float32 and float64 in f (a
 * float32 widened exactly), bool in u (0 or 1; any other byte is refused). A string: str, len
 * bytes (NUL-terminated in the arena; it may hold NUL bytes itself). An array: elem, count, and
 * either data (numeric or bool elements in the caller's buffer: count * size bytes, little-endian,
 * unaligned; read them with gguf_array_at) or strs/lens (strings, in the arena). */
typedef struct rx_gguf_value {
  rx_gguf_vtype type;
  union {
    uint64_t u;
    int64_t i;
    double f;
  } v;
  const char *str;
  uint64_t len;
  rx_gguf_vtype elem;
  uint64_t count;
  const uint8_t *data;
  const char **strs;
  const uint64_t *lens;
} rx_gguf_value;

typedef struct rx_gguf_kv {
  const char *key; /* arena */
  rx_gguf_value value;
  uint64_t offset; /* of the entry in the file, for messages */
} rx_gguf_kv;

typedef struct rx_gguf_tensor {
  const char *name; /* arena */
  rx_gguf_type type;
  int ndim;                        /* 0 (a scalar) to RX_GGUF_MAX_DIMS */
  int64_t shape[RX_GGUF_MAX_DIMS]; /* relaxc's order: outermost first (see the header) */
  int64_t elems;                   /* the product of the shape */
  uint64_t offset;                 /* from the start of the data section */
  uint64_t size;                   /* bytes: elems / block elements * block bytes */
} rx_gguf_tensor;

typedef struct rx_gguf_file {
  uint32_t version; /* 2 or 3 */
  uint32_t alignment;
  rx_gguf_kv *kvs; /* in the file's order (arena) */
  size_t nkvs;
  rx_gguf_tensor *tensors; /* in the file's order (arena) */
  size_t ntensors;
  uint64_t data_offset; /* where the data section starts in the buffer */
  const uint8_t *data;  /* into the caller's buffer: tensor t is data + t->offset */
  uint64_t data_size;   /* bytes from data_offset to the end of the buffer */
  const char *name;     /* the file's name in messages (arena) */
  rx_arena arena;
} rx_gguf_file;

/* Parses a GGUF image of len bytes (kept by the caller while *out is used); name is used in
 * messages. *out is zeroed first and owns nothing on error. */
rx_status gguf_parse(const void *buf, size_t len, const char *name, rx_gguf_file *out);
void gguf_free(rx_gguf_file *f);
/* Whether buf starts with GGUF's magic (at least 4 bytes "GGUF"). */
bool gguf_is_gguf(const void *buf, size_t len);

/* ---- the tables ---- */
/* "uint8", ..., "array"; NULL for a number that is no value type. */
const char *gguf_vtype_name(uint32_t t);
/* "F32", "Q4_K", ...; NULL for a number the format's definition does not name. */
const char *gguf_type_name(uint32_t t);
/* Whether relaxc reads (and dequantizes) type t. */
bool gguf_type_supported(uint32_t t);
/* The elements and bytes of one block of a type relaxc reads (1 and 4 for F32; 256 and 144 for
 * Q4_K); 0 for the others. */
int gguf_block_elems(rx_gguf_type t);
int gguf_block_bytes(rx_gguf_type t);
/* Appends "F32, F16, Q4_0, ..., BF16": the types relaxc reads in the table's order, for
 * messages. */
void gguf_supported_list(rx_strbuf *out);

/* ---- metadata and tensors by name ---- */
/* The entry of key, or NULL. */
const rx_gguf_kv *gguf_find(const rx_gguf_file *f, const char *key);
/* The tensor named name, or NULL. */
const rx_gguf_tensor *gguf_find_tensor(const rx_gguf_file *f, const char *name);
/* The value of key as a string / a uint32 / an int32 / a float32, or an error naming the file and
 * the key: missing, of another type, or out of range. The integer getters take a value of any
 * integer type that fits ("llama.block_count" is a uint32 in llama.cpp's files, an int32 in
 * some converters'); the float getter takes float32, and float64 rounded to float32. *out is
 * zeroed (NULL) first. */
rx_status gguf_get_string(const rx_gguf_file *f, const char *key, const char **out);
rx_status gguf_get_u32(const rx_gguf_file *f, const char *key, uint32_t *out);
rx_status gguf_get_i32(const rx_gguf_file *f, const char *key, int32_t *out);
rx_status gguf_get_f32(const rx_gguf_file *f, const char *key, float *out);
/* The array of key whose elements are of type elem, or an error naming the key. */
rx_status gguf_get_array(const rx_gguf_file *f, const char *key, rx_gguf_vtype elem,
                         const rx_gguf_value **out);
/* Element i (< count) of an array as a scalar value (type elem; a string's str and len). */
rx_gguf_value gguf_array_at(const rx_gguf_value *array, uint64_t i);

/* ---- dequantization (gguf_quant.c) ---- */
/* Dequantizes n elements of type t from src (n / block elements blocks: n a whole number of
 * them, t a type relaxc reads, both of which the reader proves of every tensor) into out, exactly
 * as the format's definition computes them in f32 (ggml's dequantize_row_*: each scale product
 * rounded to f32 before it meets the quant, no fused multiply-add), so that the result equals
 * gguf-py's NumPy dequantization bit for bit. */
void gguf_dequantize(rx_gguf_type t, const void *src, int64_t n, float *out);

#endif
