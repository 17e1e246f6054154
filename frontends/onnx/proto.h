/* frontends/onnx/proto.h: reading the decoded ONNX protobuf (frontends/onnx/proto.c; tensor data
 * and type names in weights.c), shared by the importer (import.c) and the weight reader
 * (weights.c). Internal to the ONNX frontend. */
#ifndef RX_ONNX_PROTO_H
#define RX_ONNX_PROTO_H

#include "../../base/base.h"
#include "relaxc/compiler.h"

#include RX_ONNX_PB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The identifier for an ONNX name: other characters become '_', a leading digit gets 'v'
 * (heap). */
char *onnx_ident(const char *name);

/* A node's attribute by name (NULL when absent) and its int / float value or a default. */
const Onnx__AttributeProto *onnx_attr(const Onnx__NodeProto *n, const char *name);
int64_t onnx_attr_i(const Onnx__NodeProto *n, const char *name, int64_t d);
double onnx_attr_f(const Onnx__NodeProto *n, const char *name, double d);

/* The relaxc dtype of an ONNX TensorProto.DataType; false when there is none. */
bool onnx_dtype_of(int32_t onnx, rx_dtype *out);
bool onnx_is_int_type(int32_t t); /* INT64 or INT32 */

/* The element count of a tensor (0 when a dim is not positive). */
size_t onnx_tensor_count(const Onnx__TensorProto *t);
/* The values of an INT64 or INT32 tensor of at most max elements, from the model or its
 * external data file (onnx_tensor_data, relative to base_dir); false when not readable. */
bool onnx_tensor_ints(const Onnx__TensorProto *t, const char *file, const char *name,
                      const char *base_dir, int64_t *out, size_t max, size_t *out_n);
/* Float tensor values (float_data, double_data or raw_data) into a heap array; NULL when not
 * readable that way. */
float *onnx_tensor_floats(const Onnx__TensorProto *t, size_t *out_n);
/* Is the tensor's data in an external file? */
bool onnx_is_external(const Onnx__TensorProto *t);

/* The tensor of a Constant node's `value` attribute; NULL when absent. */
const Onnx__TensorProto *onnx_const_tensor(const Onnx__NodeProto *n);

/* The longest integer tensor the importer folds into a symbolic value. Cross-file invariant:
 * SYM_MAX in import_int.h is this. */
#define ONNX_FOLD_MAX 16
/* Is this tensor a weight (a parameter of `main`) rather than a folded constant? Folded:
 * INT64/INT32 tensors of rank 0 or 1 with at most ONNX_FOLD_MAX elements (symbolic values), and
 * FLOAT/DOUBLE Constant tensors of one element (float constants). Every other tensor is a weight:
 * float initializers, larger float Constants, larger integer tensors, and the other types (f16,
 * bf16, i16, i8, u8, bool), which are never folded; an unsupported type (DOUBLE initializer,
 * string, ...) is a weight too, so it is reported as one. */
bool onnx_is_weight(const Onnx__TensorProto *t, bool from_constant);

/* The name of an ONNX TensorProto.DataType for messages ("DOUBLE"; "type N" when unknown; static
 * or in buf). */
const char *onnx_type_name(int32_t onnx, char *buf, size_t size);
/* A tensor's elements in its relaxc dtype's storage (little-endian; f16 and bf16 as their 16-bit
 * patterns; bool as bytes 0/1), into a heap array of *out_nbytes bytes: from raw_data, the typed
 * field (float_data, int32_data for int32/int16/int8/uint8/bool/f16/bf16, int64_data), or, when
 * the data is external, from the file its `location` names, relative to base_dir (NULL: the
 * current directory). Errors name `file` (the model), the tensor `name` and the data file. */
rx_status onnx_tensor_data(const Onnx__TensorProto *t, const char *file, const char *name,
                           const char *base_dir, void **out_data, size_t *out_nbytes);

/* The deepest nesting of messages (model > graph > node > attribute > graph ..., or types
 * within types) onnx_unpack accepts: protobuf-c unpacks recursively, and a deeper file would
 * overflow the stack. Real models nest a few levels per subgraph (If / Loop bodies). */
#define ONNX_MAX_NESTING 256
/* Decodes an .onnx file's bytes; an RX_ERR_INVALID error naming `name` when they are not a
 * model with a graph, or when they nest deeper than ONNX_MAX_NESTING. Free with
 * onnx__model_proto__free_unpacked. */
rx_status onnx_unpack(const void *bytes, size_t len, const char *name, Onnx__ModelProto **out);

/* Calls fn for every weight in parameter order: the weight initializers, then the weight
 * Constant tensors. */
typedef void (*onnx_weight_fn)(void *ctx, const char *name, const Onnx__TensorProto *t);
void onnx_each_weight(const Onnx__GraphProto *g, onnx_weight_fn fn, void *ctx);

#endif
