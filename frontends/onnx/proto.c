/* frontends/onnx/proto.c: reading the decoded ONNX protobuf (see proto.h). */
#include "proto.h"

#include "../../ir/ir.h"

#include <stdlib.h>
#include <string.h>

/* The identifier for an ONNX name: other characters become '_', a leading digit gets 'v'. */
char *onnx_ident(const char *name) {
  size_t n = strlen(name);
  char *s = rx_calloc(n + 3, 1), *p = s;
  if (n == 0 || (name[0] >= '0' && name[0] <= '9')) *p++ = 'v';
  for (size_t i = 0; i < n; i++) {
    char c = name[i];
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
    *p++ = ok ? c : '_';
  }
  if (rx_text_is_reserved(s, strlen(s))) *p = '_'; /* an input named `out`, `for`, `f32`... */
  return s;
}

const Onnx__AttributeProto *onnx_attr(const Onnx__NodeProto *n, const char *name) {
  for (size_t i = 0; i < n->n_attribute; i++)
    if (n->attribute[i]->name && !strcmp(n->attribute[i]->name, name)) return n->attribute[i];
  return NULL;
}
int64_t onnx_attr_i(const Onnx__NodeProto *n, const char *name, int64_t d) {
  const Onnx__AttributeProto *a = onnx_attr(n, name);
  return a && a->has_i ? a->i : d;
}
double onnx_attr_f(const Onnx__NodeProto *n, const char *name, double d) {
  const Onnx__AttributeProto *a = onnx_attr(n, name);
  return a && a->has_f ? a->f : d;
}

bool onnx_dtype_of(int32_t onnx, rx_dtype *out) {
  switch (onnx) {
  case ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT:
    *out = RX_DTYPE_F32;
    return true;
  case ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT16:
    *out = RX_DTYPE_F16;
    return true;
  case ONNX__TENSOR_PROTO__DATA_TYPE__BFLOAT16:
    *out = RX_DTYPE_BF16;
    return true;
  case ONNX__TENSOR_PROTO__DATA_TYPE__INT64:
    *out = RX_DTYPE_I64;
    return true;
  case ONNX__TENSOR_PROTO__DATA_TYPE__INT32:
    *out = RX_DTYPE_I32;
    return true;
  case ONNX__TENSOR_PROTO__DATA_TYPE__INT16:
    *out = RX_DTYPE_I16;
    return true;
  case ONNX__TENSOR_PROTO__DATA_TYPE__INT8:
    *out = RX_DTYPE_I8;
    return true;
  case ONNX__TENSOR_PROTO__DATA_TYPE__UINT8:
    *out = RX_DTYPE_U8;
    return true;
  case ONNX__TENSOR_PROTO__DATA_TYPE__BOOL:
    *out = RX_DTYPE_BOOL;
    return true;
  default:
    return false;
  }
}

bool onnx_is_int_type(int32_t t) {
  return t == ONNX__TENSOR_PROTO__DATA_TYPE__INT64 || t == ONNX__TENSOR_PROTO__DATA_TYPE__INT32;
}

size_t onnx_tensor_count(const Onnx__TensorProto *t) {
  size_t c = 1;
  for (size_t i = 0; i < t->n_dims; i++) c *= t->dims[i] > 0 ? (size_t)t->dims[i] : 0;
  return c;
}

bool onnx_tensor_ints(const Onnx__TensorProto *t, const char *file, const char *name,
                      const char *base_dir, int64_t *out, size_t max, size_t *out_n) {
  size_t c = onnx_tensor_count(t);
  if (!onnx_is_int_type(t->data_type) || c > max) return false;
  void *d;
  size_t nb;
  rx_status s = onnx_tensor_data(t, file, name, base_dir, &d, &nb);
  if (s) {
    rx_status_free(s);
    return false;
  }
  bool i64 = t->data_type == ONNX__TENSOR_PROTO__DATA_TYPE__INT64;
  for (size_t i = 0; i < c; i++) out[i] = i64 ? ((const int64_t *)d)[i] : ((const int32_t *)d)[i];
  free(d);
  *out_n = c;
  return true;
}

/* Float tensor values (float_data, double_data or raw_data) into a heap array. */
float *onnx_tensor_floats(const Onnx__TensorProto *t, size_t *out_n) {
  size_t c = onnx_tensor_count(t);
  *out_n = c;
  if (t->data_type == ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT) {
    float *f = rx_calloc(c ? c : 1, sizeof *f);
    if (t->n_float_data == c) {
      if (c) memcpy(f, t->float_data, c * sizeof *f);
      return f;
    }
    if (t->has_raw_data && t->raw_data.len == c * 4) {
      if (c) memcpy(f, t->raw_data.data, c * 4);
      return f;
    }
    free(f);
  } else if (t->data_type == ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE && t->n_double_data == c) {
    float *f = rx_calloc(c ? c : 1, sizeof *f);
    for (size_t i = 0; i < c; i++) f[i] = (float)t->double_data[i];
    return f;
  }
  return NULL;
}

bool onnx_is_external(const Onnx__TensorProto *t) {
  return t->has_data_location && t->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
}

/* The tensor of a Constant node's value (value, value_float, value_int, value_ints attributes
 * are handled by the caller); NULL when absent. */
const Onnx__TensorProto *onnx_const_tensor(const Onnx__NodeProto *n) {
  const Onnx__AttributeProto *a = onnx_attr(n, "value");
  return a ? a->t : NULL;
}

/* Is this tensor a weight (a parameter) rather than a folded constant? */
bool onnx_is_weight(const Onnx__TensorProto *t, bool from_constant) {
  if (onnx_is_int_type(t->data_type)) return t->n_dims > 1 || onnx_tensor_count(t) > ONNX_FOLD_MAX;
  bool fl = t->data_type == ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT ||
            t->data_type == ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE;
  return !from_constant || !fl || onnx_tensor_count(t) > 1;
}

rx_status onnx_unpack(const void *bytes, size_t len, const char *name, Onnx__ModelProto **out) {
  *out = NULL;
  Onnx__ModelProto *mp = onnx__model_proto__unpack(NULL, len, bytes);
  if (!mp)
    return rx_status_make(RX_ERR_INVALID,
                          "%s: not a valid ONNX model (the protobuf could not be decoded: "
                          "truncated or corrupt file?)",
                          name);
  if (!mp->graph) {
    onnx__model_proto__free_unpacked(mp, NULL);
    return rx_status_make(RX_ERR_INVALID, "%s: the ONNX model has no graph", name);
  }
  *out = mp;
  return NULL;
}

void onnx_each_weight(const Onnx__GraphProto *g, onnx_weight_fn fn, void *ctx) {
  for (size_t i = 0; i < g->n_initializer; i++)
    if (g->initializer[i]->name && onnx_is_weight(g->initializer[i], false))
      fn(ctx, g->initializer[i]->name, g->initializer[i]);
  for (size_t i = 0; i < g->n_node; i++) {
    const Onnx__NodeProto *n = g->node[i];
    const Onnx__TensorProto *t;
    if (n->op_type && !strcmp(n->op_type, "Constant") && n->n_output == 1 &&
        (t = onnx_const_tensor(n)) && onnx_is_weight(t, true))
      fn(ctx, n->output[0], t);
  }
}
