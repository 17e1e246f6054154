/* base/safetensors.h: a reader of the safetensors format (Hugging Face checkpoints, and the
 * layout relaxc's weights take, docs/DESIGN "Weights"). A file is an 8-byte little-endian header
 * size N, N bytes of JSON, then the data:
 *
 *   {"__metadata__": {"format": "pt"}, "NAME": {"dtype": "F16", "shape": [4096, 11008],
 *    "data_offsets": [BEGIN, END]}, ...}
 *
 * with BEGIN and END byte offsets from the start of the data. The reader checks everything
 * against the buffer before anyone reads a tensor: the header size (at most
 * RX_ST_MAX_HEADER_BYTES, within the buffer), the JSON (an object; every entry an object with
 * exactly a known dtype, a shape of non-negative integers of at most RX_ST_MAX_NDIM dims, and
 * two offsets), each tensor's byte size against its shape and dtype, offsets inside the data, no
 * two tensors overlapping, no name twice. Gaps between tensors are accepted (Hugging Face's
 * writer leaves none; an aligned layout pads between tensors). Dtypes: F32, F16, BF16, I64,
 * I32, I16, I8, U8, BOOL, and F8_E4M3 (FP8 checkpoints' weights: U8 bytes with f8_e4m3 set);
 * any other (F64, U16, U32, U64, F8_E5M2) is an error naming the tensor and the dtype. Errors name
 * the file (`name`) and the tensor. */
#ifndef RX_BASE_SAFETENSORS_H
#define RX_BASE_SAFETENSORS_H

#include "base.h"

#define RX_ST_MAX_NDIM 16
/* The safetensors library's own limit on the JSON header. */
#define RX_ST_MAX_HEADER_BYTES 100000000u

typedef struct rx_st_tensor {
  char *name; /* heap */
  rx_dtype dtype;
  int ndim;
  int64_t shape[RX_ST_MAX_NDIM];
  uint64_t offset; /* from the start of the data */
  uint64_t size;   /* bytes: elements * element size */
  bool f8_e4m3;    /* the U8 bytes are float8 e4m3fn (safetensors' F8_E4M3) */
} rx_st_tensor;

typedef struct rx_st_file {
  rx_st_tensor *tensors; /* heap, in the header's order */
  size_t ntensors;
  const uint8_t *data; /* into the caller's buffer (not copied): tensor i is data + offset */
  uint64_t data_size;
  char **meta; /* "__metadata__" as key, value, key, value, ... (heap); nmeta pairs */
  size_t nmeta;
} rx_st_file;

/* Parses a safetensors image of len bytes (kept by the caller while *out is used); name is used
 * in messages. *out is zeroed first and owns nothing on error. */
rx_status base_st_parse(const void *buf, size_t len, const char *name, rx_st_file *out);
/* The safetensors name of a dtype ("F32", "BF16", ...), or NULL for one the format as relaxc
 * reads it has no name for. The one table of names, shared with the reader. */
const char *base_st_dtype_name(rx_dtype t);
/* The tensor named name, or NULL. */
const rx_st_tensor *base_st_find(const rx_st_file *f, const char *name);
/* The value of metadata key, or NULL. */
const char *base_st_meta(const rx_st_file *f, const char *key);
void base_st_free(rx_st_file *f);

#endif
