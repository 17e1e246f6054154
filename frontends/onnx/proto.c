/* frontends/onnx/proto.c: reading the decoded ONNX protobuf (see proto.h). */
#include "proto.h"

#include "../../ir/ir.h"

#include <stdlib.h>
#include <string.h>

/* The identifier for an ONNX name: other characters become '_', a leading digit gets 'v'. */
char *onnx_ident(const char *name) {
  size_t n = strlen(name);
  char *s = base_calloc(n + 3, 1), *p = s;
  if (n == 0 || (name[0] >= '0' && name[0] <= '9')) *p++ = 'v';
  for (size_t i = 0; i < n; i++) {
    char c = name[i];
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
    *p++ = ok ? c : '_';
  }
  if (ir_text_is_reserved(s, strlen(s))) *p = '_'; /* an input named `out`, `for`, `f32`... */
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
  case ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE:
    *out = RX_DTYPE_F64;
    return true;
  case ONNX__TENSOR_PROTO__DATA_TYPE__UINT16:
    *out = RX_DTYPE_U16;
    return true;
  case ONNX__TENSOR_PROTO__DATA_TYPE__UINT32:
    *out = RX_DTYPE_U32;
    return true;
  case ONNX__TENSOR_PROTO__DATA_TYPE__UINT64:
    *out = RX_DTYPE_U64;
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

/* Float tensor values (float_data, double_data or raw_data of FLOAT or DOUBLE) into a heap
 * array of floats. */
float *onnx_tensor_floats(const Onnx__TensorProto *t, size_t *out_n) {
  size_t c = onnx_tensor_count(t);
  *out_n = c;
  if (t->data_type == ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT) {
    float *f = base_calloc(c ? c : 1, sizeof *f);
    if (t->n_float_data == c) {
      if (c) memcpy(f, t->float_data, c * sizeof *f);
      return f;
    }
    if (t->has_raw_data && t->raw_data.len == c * 4) {
      if (c) memcpy(f, t->raw_data.data, c * 4);
      return f;
    }
    free(f);
  } else if (t->data_type == ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE &&
             (t->n_double_data == c || (t->has_raw_data && t->raw_data.len == c * 8))) {
    /* rounded to f32: the importer's folded float constants are f32 */
    float *f = base_calloc(c ? c : 1, sizeof *f);
    for (size_t i = 0; i < c; i++) {
      double d = t->n_double_data == c ? t->double_data[i] : 0;
      if (t->n_double_data != c) memcpy(&d, t->raw_data.data + i * 8, 8);
      f[i] = (float)d;
    }
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

/* ---- the nesting pre-scan ----
 * protobuf-c unpacks nested messages recursively, so a file whose types (TypeProto of sequences
 * of sequences...) or subgraphs (an If's branch holding an If...) nest thousands of levels deep
 * overflows the stack. Before unpacking, the wire format is walked along the fields of the
 * messages that can recurse (without allocating, and no deeper than the limit) and such a file
 * is refused. The walk follows onnx.proto's field numbers; other fields are skipped. */
typedef enum pk {
  PK_NONE,
  PK_MODEL,
  PK_GRAPH,
  PK_NODE,
  PK_ATTR,
  PK_VALUE_INFO,
  PK_TYPE,
  PK_TYPE_ELEM,
  PK_TYPE_MAP,
  PK_FUNCTION,
  PK_TRAINING
} pk;

/* The kind of message field `field` of a `k` holds when it can lead to a recursion. */
static pk pk_child(pk k, uint64_t field) {
  switch (k) {
  case PK_MODEL: /* graph, training_info, functions */
    return field == 7 ? PK_GRAPH : field == 20 ? PK_TRAINING : field == 25 ? PK_FUNCTION : PK_NONE;
  case PK_TRAINING: /* initialization, algorithm */
    return field == 1 || field == 2 ? PK_GRAPH : PK_NONE;
  case PK_GRAPH: /* node, input, output, value_info */
    return field == 1 ? PK_NODE : field >= 11 && field <= 13 ? PK_VALUE_INFO : PK_NONE;
  case PK_FUNCTION: /* node, attribute_proto, value_info */
    return field == 7 ? PK_NODE : field == 11 ? PK_ATTR : field == 12 ? PK_VALUE_INFO : PK_NONE;
  case PK_NODE: /* attribute */
    return field == 5 ? PK_ATTR : PK_NONE;
  case PK_ATTR: /* g, graphs, tp, type_protos */
    return field == 6 || field == 11 ? PK_GRAPH : field == 14 || field == 15 ? PK_TYPE : PK_NONE;
  case PK_VALUE_INFO: /* type */
    return field == 2 ? PK_TYPE : PK_NONE;
  case PK_TYPE: /* sequence_type, optional_type; map_type */
    return field == 4 || field == 9 ? PK_TYPE_ELEM : field == 5 ? PK_TYPE_MAP : PK_NONE;
  case PK_TYPE_ELEM: /* Sequence / Optional: elem_type */
    return field == 1 ? PK_TYPE : PK_NONE;
  case PK_TYPE_MAP: /* value_type */
    return field == 2 ? PK_TYPE : PK_NONE;
  default:
    return PK_NONE;
  }
}

static bool pk_varint(const uint8_t **p, const uint8_t *end, uint64_t *out) {
  uint64_t v = 0;
  for (int shift = 0; shift < 64 && *p < end; shift += 7) {
    uint8_t b = *(*p)++;
    v |= (uint64_t)(b & 0x7f) << shift;
    if (!(b & 0x80)) {
      *out = v;
      return true;
    }
  }
  return false;
}

/* The deepest message nesting below a `k` of n bytes at p, counting it as level `depth`; stops
 * past ONNX_MAX_NESTING. A malformed message ends the walk of that message (the unpacking that
 * follows reports it). */
static int pk_depth(const uint8_t *p, size_t n, pk k, int depth) {
  if (depth > ONNX_MAX_NESTING) return depth;
  const uint8_t *end = p + n;
  int deepest = depth;
  while (p < end) {
    uint64_t key, len;
    if (!pk_varint(&p, end, &key)) break;
    unsigned wire = (unsigned)(key & 7);
    if (wire == 0) {
      if (!pk_varint(&p, end, &len)) break;
    } else if (wire == 1 || wire == 5) {
      size_t w = wire == 1 ? 8 : 4;
      if ((size_t)(end - p) < w) break;
      p += w;
    } else if (wire == 2) {
      if (!pk_varint(&p, end, &len) || len > (uint64_t)(end - p)) break;
      pk c = pk_child(k, key >> 3);
      if (c != PK_NONE) {
        int d = pk_depth(p, (size_t)len, c, depth + 1);
        if (d > deepest) deepest = d;
        if (deepest > ONNX_MAX_NESTING) return deepest;
      }
      p += len;
    } else {
      break;
    }
  }
  return deepest;
}

rx_status onnx_unpack(const void *bytes, size_t len, const char *name, Onnx__ModelProto **out) {
  *out = NULL;
  if (pk_depth(bytes, len, PK_MODEL, 1) > ONNX_MAX_NESTING)
    return base_status_make(RX_ERR_INVALID,
                            "%s: the model's types or subgraphs nest more than %d messages deep "
                            "(ONNX_MAX_NESTING); refusing to decode it",
                            name, ONNX_MAX_NESTING);
  Onnx__ModelProto *mp = onnx__model_proto__unpack(NULL, len, bytes);
  if (!mp)
    return base_status_make(RX_ERR_INVALID,
                            "%s: not a valid ONNX model (the protobuf could not be decoded: "
                            "truncated or corrupt file?)",
                            name);
  if (!mp->graph) {
    onnx__model_proto__free_unpacked(mp, NULL);
    return base_status_make(RX_ERR_INVALID, "%s: the ONNX model has no graph", name);
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
  /* then those of the subgraphs (If's branches, Loop's and Scan's bodies), depth first: the
   * subgraphs read them as outer values of `main` */
  for (size_t i = 0; i < g->n_node; i++)
    for (size_t a = 0; a < g->node[i]->n_attribute; a++) {
      const Onnx__AttributeProto *at = g->node[i]->attribute[a];
      if (at->g) onnx_each_weight(at->g, fn, ctx);
      for (size_t k = 0; k < at->n_graphs; k++) onnx_each_weight(at->graphs[k], fn, ctx);
    }
}
