/* base/npy.h: a small reader and writer of NumPy .npy files (format versions 1.0, 2.0 and 3.0),
 * C order only, little-endian. Dtypes: '<f4' f32, '<f2' f16, '<i8' i64, '<i4' i32, '<i2' i16,
 * '|i1' i8, '|u1' u8, '|b1' bool, '<f8' f64, '<u4' u32, '<u8' u64, and '<u2' read as bf16 bits
 * (NumPy has no bfloat16; bf16 tensors are stored as their raw 16-bit patterns); u16 is written
 * as '<u2' too and so reads back as bf16 (the same bits: a caller that expects u16 may take it).
 * Anything else (Fortran order, big-endian, other dtypes, a truncated or malformed header) is an
 * error naming the file and the problem.
 * ('=' and '|' byte orders are accepted where they mean little-endian / one byte.) */
#ifndef RX_BASE_NPY_H
#define RX_BASE_NPY_H

#include "base.h"

#define RX_NPY_MAX_NDIM 16
/* The longest header base_npy_read takes: NumPy writes a few hundred bytes, and refuses to read
 * more than 10000 by default (numpy.lib.format, max_header_size). */
#define RX_NPY_MAX_HEADER 65536

typedef struct rx_npy {
  rx_dtype dtype;
  int ndim;
  int64_t shape[RX_NPY_MAX_NDIM];
  void *data;    /* heap, row-major, in the dtype's storage (f16/bf16 as uint16_t bits) */
  size_t nbytes; /* elements * element size */
} rx_npy;

/* Element count (product of the shape; 1 for 0-d). */
size_t base_npy_count(const rx_npy *a);
/* Bytes per element of dtype t (0 for a dtype .npy files here cannot hold). */
size_t base_npy_elem_size(rx_dtype t);

/* Parses an in-memory .npy image; `name` is used in messages. On success *out owns a copy of the
 * data (free with base_npy_free). *out is zeroed first. */
rx_status base_npy_parse(const void *buf, size_t len, const char *name, rx_npy *out);
/* Reads a .npy file: the header, then the data by the size the header gives (never "until EOF":
 * a stream or a longer file costs only the array; a regular file shorter than its header says is
 * refused before the data is allocated). */
rx_status base_npy_read(const char *path, rx_npy *out);
/* Writes a version 1.0 file. */
rx_status base_npy_write(const char *path, const rx_npy *a);
void base_npy_free(rx_npy *a);

#endif
