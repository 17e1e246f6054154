/* frontends/onnx/onnx_import.h: the ONNX importer (frontends/onnx/import.c and the files of
 * its operator families, import_int.h), built when RX_HAVE_ONNX is defined
 * (frontends/onnx/onnx.cmake). Internal header of relaxc_core.
 *
 * An ONNX ModelProto becomes one graph function `main` in the module:
 * - parameters: the graph inputs (that are not initializers) in order, then the weights: the
 *   weight initializers, then the weight Constant tensors, in that order (onnx_weights gives
 *   their data in the same order; onnx_add_weights puts them in the module's weight table,
 *   which binds these parameters, so a compiled artifact holds them). Small integer
 *   initializers and constants (INT64/INT32, rank 0 or 1, at most 16 elements) and one-element
 *   float Constants are folded into symbolic values and constants; every other tensor is a
 *   weight (see onnx_is_weight in proto.h).
 * - an input dim with dim_param becomes the symbolic variable of that name (made an identifier);
 *   an unnamed dynamic dim gets a fresh name d0, d1, ...
 * - shape computations (Shape, Gather, Concat, Unsqueeze, Squeeze, Cast, integer arithmetic,
 *   Range and ConstantOfShape of constants) are evaluated symbolically into shape literals.
 * An unsupported operator is one RX_ERR_UNSUPPORTED error listing every unsupported node with
 * its op type and the opset; a malformed file is an RX_ERR_INVALID error. */
#ifndef RX_ONNX_IMPORT_H
#define RX_ONNX_IMPORT_H

#include "../../base/base.h"
#include "relaxc/compiler.h"

#include <stddef.h>
#include <stdint.h>

/* Imports the model (bytes of an .onnx file, named `name` in messages) into m as `main`. The
 * function is added unnormalized-safe: every binding is deduced by the builder. External data
 * files (small shape constants stored there) are read relative to base_dir (NULL: the current
 * directory). diag may be NULL. */
rx_status onnx_import(rx_module *m, const void *bytes, size_t len, const char *name,
                      const char *base_dir, rx_diag *diag);

/* The supported operators as Markdown table rows "| Op | first opset+ | note |", one per line,
 * from the importer's one table (README.md holds the same rows: `relaxc import --list-ops`). */
void onnx_supported_ops(rx_strbuf *out);

/* One weight: a parameter of `main` after the graph inputs. */
typedef struct rx_onnx_weight {
  char *name;     /* the parameter's name in the imported function (heap) */
  rx_dtype dtype; /* f32, f16, bf16, i64, i32, i16, i8, u8 or bool */
  int ndim;
  int64_t shape[8];
  void *data;    /* row-major, count elements in the dtype's storage: little-endian, f16 and
                    bf16 as their 16-bit patterns, bool as bytes 0/1 (heap) */
  size_t count;  /* elements */
  size_t nbytes; /* bytes of data: count * the dtype's size */
} rx_onnx_weight;

/* The weights of the model, in parameter order (heap array; free with onnx_weights_free).
 * Their data is read from the model (raw_data or the typed fields) or, for tensors stored
 * externally (data_location EXTERNAL), from the file their `location` entry names, relative to
 * base_dir, the model's directory (NULL: the current directory); `offset` and `length` entries
 * are honored. A location that is absolute or leads out of base_dir with "..", a missing file,
 * a range outside the file or a length that does not match the tensor's type and shape is an
 * RX_ERR_INVALID error naming the tensor and the file; a data type relaxc has no dtype for
 * (DOUBLE, STRING, ...) is RX_ERR_UNSUPPORTED. */
rx_status onnx_weights(const void *bytes, size_t len, const char *name, const char *base_dir,
                       rx_onnx_weight **out_weights, int *out_n);
void onnx_weights_free(rx_onnx_weight *w, int n);

/* One tensor from a serialized TensorProto (the .pb files of the ONNX test data: input_0.pb),
 * read as a weight is (its name that of the proto, or "tensor"); errors name `name` (the file).
 * An external-data tensor is refused. Free out->name and out->data. */
rx_status onnx_tensor_file(const void *bytes, size_t len, const char *name, rx_onnx_weight *out);

/* The weights of the model (onnx_weights) added to m's weight table under their parameters'
 * names, so that `main` imported by onnx_import binds them (an artifact then holds them and a
 * call passes the graph inputs alone). m owns their data from here (rx_module_on_free). */
rx_status onnx_add_weights(rx_module *m, const void *bytes, size_t len, const char *name,
                           const char *base_dir);

#endif
