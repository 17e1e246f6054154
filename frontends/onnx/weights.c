/* frontends/onnx/weights.c: the data of an ONNX model's weights, in the parameter order of the
 * imported `main` (see onnx_import.h), and onnx_tensor_data (proto.h): a tensor's elements from
 * the model (raw_data or a typed field) or from an external data file.
 *
 * Byte order: ONNX stores raw and external data little-endian; the host is assumed to be too
 * (as in base/npy.c). */
#include "onnx_import.h"
#include "proto.h"

#include "../../base/npy.h"

#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

const char *onnx_type_name(int32_t onnx, char *buf, size_t size) {
  const ProtobufCEnumValue *v =
      protobuf_c_enum_descriptor_get_value(&onnx__tensor_proto__data_type__descriptor, onnx);
  if (v) return v->name;
  snprintf(buf, size, "type %d", (int)onnx);
  return buf;
}

/* ---- inline data ---- */

/* The number of values in the typed field that holds dtype dt (onnx.proto), and its name. */
static size_t typed_count(const Onnx__TensorProto *t, rx_dtype dt, const char **out_field) {
  switch (dt) {
  case RX_DTYPE_F32:
    *out_field = "float_data";
    return t->n_float_data;
  case RX_DTYPE_I64:
    *out_field = "int64_data";
    return t->n_int64_data;
  case RX_DTYPE_F64:
    *out_field = "double_data";
    return t->n_double_data;
  case RX_DTYPE_U32:
  case RX_DTYPE_U64:
    *out_field = "uint64_data";
    return t->n_uint64_data;
  default:
    *out_field = "int32_data";
    return t->n_int32_data;
  }
}

/* The elements of the typed field that holds t's type; false when that field does not hold
 * exactly count elements. out has count * es bytes. */
static bool typed_field(const Onnx__TensorProto *t, rx_dtype dt, size_t count, void *out) {
  switch (dt) {
  case RX_DTYPE_F32:
    if (t->n_float_data != count) return false;
    if (count) memcpy(out, t->float_data, count * sizeof(float));
    return true;
  case RX_DTYPE_I64:
    if (t->n_int64_data != count) return false;
    if (count) memcpy(out, t->int64_data, count * sizeof(int64_t));
    return true;
  case RX_DTYPE_F64:
    if (t->n_double_data != count) return false;
    if (count) memcpy(out, t->double_data, count * sizeof(double));
    return true;
  case RX_DTYPE_U64: /* uint64_data holds uint64 and uint32 values (onnx.proto) */
    if (t->n_uint64_data != count) return false;
    if (count) memcpy(out, t->uint64_data, count * sizeof(uint64_t));
    return true;
  case RX_DTYPE_U32:
    if (t->n_uint64_data != count) return false;
    for (size_t i = 0; i < count; i++) ((uint32_t *)out)[i] = (uint32_t)t->uint64_data[i];
    return true;
  default:
    break;
  }
  /* int32_data holds int32, and int16/int8/uint8/bool values and f16/bf16 bit patterns widened
   * to int32 (onnx.proto) */
  if (t->n_int32_data != count) return false;
  for (size_t i = 0; i < count; i++) {
    int32_t v = t->int32_data[i];
    switch (dt) {
    case RX_DTYPE_I32:
      ((int32_t *)out)[i] = v;
      break;
    case RX_DTYPE_I16:
      ((int16_t *)out)[i] = (int16_t)v;
      break;
    case RX_DTYPE_U16:
      ((uint16_t *)out)[i] = (uint16_t)v;
      break;
    case RX_DTYPE_F16:
    case RX_DTYPE_BF16:
      ((uint16_t *)out)[i] = (uint16_t)v;
      break;
    case RX_DTYPE_I8:
      ((int8_t *)out)[i] = (int8_t)v;
      break;
    case RX_DTYPE_U8:
      ((uint8_t *)out)[i] = (uint8_t)v;
      break;
    case RX_DTYPE_BOOL:
      ((uint8_t *)out)[i] = v != 0;
      break;
    default:
      return false;
    }
  }
  return true;
}

/* ---- external data ---- */

/* Does the relative path stay inside its directory (no component ".." climbs above it)? */
static bool stays_inside(const char *loc) {
  int depth = 0;
  for (const char *p = loc; *p;) {
    const char *e = strchr(p, '/');
    size_t n = e ? (size_t)(e - p) : strlen(p);
    if (n == 2 && p[0] == '.' && p[1] == '.') {
      if (--depth < 0) return false;
    } else if (n && !(n == 1 && p[0] == '.')) {
      depth++;
    }
    p += n;
    if (*p == '/') p++;
  }
  return depth > 0;
}

/* A non-negative decimal integer (ONNX writes offset and length as strings). */
static bool parse_size(const char *s, size_t *out) {
  if (!s || !*s) return false;
  size_t v = 0;
  for (; *s; s++) {
    if (*s < '0' || *s > '9' || v > (SIZE_MAX - 9) / 10) return false;
    v = v * 10 + (size_t)(*s - '0');
  }
  *out = v;
  return true;
}

/* Reads `want` bytes of t's external data into out. */
static rx_status read_external(const Onnx__TensorProto *t, const char *file, const char *name,
                               const char *base_dir, void *out, size_t want) {
  const char *loc = NULL, *off_s = NULL, *len_s = NULL;
  for (size_t i = 0; i < t->n_external_data; i++) {
    const Onnx__StringStringEntryProto *e = t->external_data[i];
    if (!e->key) continue;
    if (!strcmp(e->key, "location"))
      loc = e->value;
    else if (!strcmp(e->key, "offset"))
      off_s = e->value;
    else if (!strcmp(e->key, "length"))
      len_s = e->value;
  }
  if (!loc || !*loc)
    return base_status_make(
        RX_ERR_INVALID, "%s: tensor '%s': external data without a 'location' entry", file, name);
  if (loc[0] == '/' || !stays_inside(loc))
    return base_status_make(RX_ERR_INVALID,
                            "%s: tensor '%s': external data location '%s' %s; it must name a file "
                            "inside the model's directory",
                            file, name, loc,
                            loc[0] == '/' ? "is an absolute path"
                                          : "leads out of the model's "
                                            "directory");
  size_t offset = 0, length = 0;
  if (off_s && !parse_size(off_s, &offset))
    return base_status_make(RX_ERR_INVALID,
                            "%s: tensor '%s': external data offset '%s' is not a "
                            "non-negative integer",
                            file, name, off_s);
  if (len_s && !parse_size(len_s, &length))
    return base_status_make(RX_ERR_INVALID,
                            "%s: tensor '%s': external data length '%s' is not a "
                            "non-negative integer",
                            file, name, len_s);
  rx_strbuf path = {0};
  if (base_dir && *base_dir) base_strbuf_printf(&path, "%s/", base_dir);
  base_strbuf_printf(&path, "%s", loc);
  rx_status s = NULL;
  struct stat st;
  FILE *f = NULL;
  if (stat(path.data, &st) != 0) {
    s = base_status_make(RX_ERR_INVALID, "%s: tensor '%s': cannot read external data file '%s': %s",
                         file, name, path.data, strerror(errno));
  } else if (!S_ISREG(st.st_mode)) {
    s = base_status_make(RX_ERR_INVALID,
                         "%s: tensor '%s': external data file '%s' is not a regular file", file,
                         name, path.data);
  } else if ((s = base_path_check_inside(path.data, base_dir, true))) {
    /* a symlink inside the folder that leads out of it (docs/inputs.md, "ONNX external data") */
    rx_status r = base_status_make(rx_status_code_of(s),
                                   "%s: tensor '%s': external data file %s (it must lie inside the "
                                   "model's folder)",
                                   file, name, rx_status_message(s));
    rx_status_free(s);
    s = r;
  } else {
    size_t size = (size_t)st.st_size;
    if (!len_s) length = offset <= size ? size - offset : 0;
    if (offset > size || length > size - offset) {
      s = base_status_make(RX_ERR_INVALID,
                           "%s: tensor '%s': external data at offset %zu, length %zu is outside "
                           "'%s' (%zu bytes; truncated file?)",
                           file, name, offset, length, path.data, size);
    } else if (length != want) {
      s = base_status_make(RX_ERR_INVALID,
                           "%s: tensor '%s': external data in '%s' has %zu bytes, its type and "
                           "shape need %zu",
                           file, name, path.data, length, want);
    } else if (!(f = fopen(path.data, "rb")) || fseek(f, (long)offset, SEEK_SET) != 0 ||
               (want && fread(out, 1, want, f) != want)) {
      s = base_status_make(RX_ERR_INVALID,
                           "%s: tensor '%s': reading %zu bytes at offset %zu of '%s' failed", file,
                           name, want, offset, path.data);
    }
  }
  if (f) fclose(f);
  base_strbuf_free(&path);
  return s;
}

rx_status onnx_tensor_data(const Onnx__TensorProto *t, const char *file, const char *name,
                           const char *base_dir, void **out_data, size_t *out_nbytes) {
  *out_data = NULL;
  *out_nbytes = 0;
  rx_dtype dt;
  char tb[32];
  if (!onnx_dtype_of(t->data_type, &dt))
    return base_status_make(RX_ERR_UNSUPPORTED,
                            "%s: tensor '%s': data type %s is not supported (supported: FLOAT, "
                            "FLOAT16, BFLOAT16, INT64, INT32, INT16, INT8, UINT8, BOOL)",
                            file, name, onnx_type_name(t->data_type, tb, sizeof tb));
  if (t->segment)
    return base_status_make(RX_ERR_UNSUPPORTED,
                            "%s: tensor '%s': segmented tensors are not "
                            "supported",
                            file, name);
  size_t es = base_npy_elem_size(dt), count = 1;
  for (size_t i = 0; i < t->n_dims; i++) {
    if (t->dims[i] < 0)
      return base_status_make(RX_ERR_INVALID, "%s: tensor '%s': negative dim %lld", file, name,
                              (long long)t->dims[i]);
    size_t d = (size_t)t->dims[i];
    if (d && count > SIZE_MAX / es / d)
      return base_status_make(RX_ERR_INVALID, "%s: tensor '%s': too many elements", file, name);
    count *= d;
  }
  size_t nbytes = count * es;
  /* the allocation is made only once a source of exactly nbytes is known */
  void *data = NULL;
  rx_status s = NULL;
  if (onnx_is_external(t)) {
    data = base_calloc(nbytes ? nbytes : 1, 1);
    s = read_external(t, file, name, base_dir, data, nbytes);
  } else if (t->has_raw_data) {
    if (t->raw_data.len != nbytes) {
      s = base_status_make(RX_ERR_INVALID,
                           "%s: tensor '%s': raw_data has %zu bytes, its type and shape need %zu",
                           file, name, t->raw_data.len, nbytes);
    } else {
      data = base_calloc(nbytes ? nbytes : 1, 1);
      if (nbytes) memcpy(data, t->raw_data.data, nbytes);
      if (dt == RX_DTYPE_BOOL)
        for (size_t i = 0; i < count; i++) ((uint8_t *)data)[i] = ((uint8_t *)data)[i] != 0;
    }
  } else {
    const char *field;
    size_t have = typed_count(t, dt, &field);
    if (have != count) {
      s = base_status_make(RX_ERR_INVALID,
                           "%s: tensor '%s': holds %zu values, its shape needs %zu (a %s tensor's "
                           "values go in raw_data or %s)",
                           file, name, have, count, onnx_type_name(t->data_type, tb, sizeof tb),
                           field);
    } else {
      data = base_calloc(nbytes ? nbytes : 1, 1);
      bool ok = typed_field(t, dt, count, data);
      assert(ok); /* the count was checked above */
      (void)ok;
    }
  }
  if (s) {
    free(data);
    return s;
  }
  *out_data = data;
  *out_nbytes = nbytes;
  return NULL;
}

/* ---- the weights of a model ---- */

typedef struct wlist {
  rx_onnx_weight *w;
  int n;
  const char *file, *base_dir;
  rx_status s;
} wlist;

static void collect_weight(void *ctx, const char *name, const Onnx__TensorProto *t) {
  wlist *l = ctx;
  if (l->s) return;
  rx_dtype dt;
  if (t->n_dims > 8) {
    l->s = base_status_make(RX_ERR_UNSUPPORTED, "%s: weight '%s': rank %zu (at most 8)", l->file,
                            name, t->n_dims);
    return;
  }
  void *data;
  size_t nbytes;
  if ((l->s = onnx_tensor_data(t, l->file, name, l->base_dir, &data, &nbytes))) return;
  bool known = onnx_dtype_of(t->data_type, &dt);
  assert(known); /* onnx_tensor_data accepts supported types only */
  (void)known;
  rx_onnx_weight *w = &l->w[l->n++];
  w->name = onnx_ident(name);
  w->dtype = dt;
  w->ndim = (int)t->n_dims;
  for (size_t i = 0; i < t->n_dims; i++) w->shape[i] = t->dims[i];
  w->data = data;
  w->nbytes = nbytes;
  w->count = nbytes / base_npy_elem_size(dt);
}

static void count_weight(void *ctx, const char *name, const Onnx__TensorProto *t) {
  (void)name;
  (void)t;
  ++*(size_t *)ctx;
}

rx_status onnx_weights(const void *bytes, size_t len, const char *name, const char *base_dir,
                       rx_onnx_weight **out_weights, int *out_n) {
  *out_weights = NULL;
  *out_n = 0;
  if (!name) name = "<onnx>";
  Onnx__ModelProto *mp;
  RX_RETURN_IF_ERROR(onnx_unpack(bytes, len, name, &mp));
  const Onnx__GraphProto *g = mp->graph;
  size_t count = 0;
  onnx_each_weight(g, count_weight, &count);
  wlist l = {
      .w = base_calloc(count + 1, sizeof(rx_onnx_weight)), .file = name, .base_dir = base_dir};
  onnx_each_weight(g, collect_weight, &l);
  onnx__model_proto__free_unpacked(mp, NULL);
  if (l.s) {
    onnx_weights_free(l.w, l.n);
    return l.s;
  }
  *out_weights = l.w;
  *out_n = l.n;
  return NULL;
}

rx_status onnx_tensor_file(const void *bytes, size_t len, const char *name, rx_onnx_weight *out) {
  memset(out, 0, sizeof *out);
  if (!name) name = "<tensor>";
  Onnx__TensorProto *t = onnx__tensor_proto__unpack(NULL, len, bytes);
  if (!t) return base_status_make(RX_ERR_INVALID, "%s: not an ONNX TensorProto", name);
  wlist l = {.w = out, .file = name};
  if (onnx_is_external(t))
    l.s =
        base_status_make(RX_ERR_UNSUPPORTED, "%s: the tensor's data is in an external file", name);
  else
    collect_weight(&l, t->name && *t->name ? t->name : "tensor", t);
  onnx__tensor_proto__free_unpacked(t, NULL);
  return l.s;
}

void onnx_weights_free(rx_onnx_weight *w, int n) {
  for (int i = 0; i < n; i++) {
    free(w[i].name);
    free(w[i].data);
  }
  free(w);
}

typedef struct owned_weights {
  rx_onnx_weight *w;
  int n;
} owned_weights;

static void free_weights(void *ctx) {
  owned_weights *o = ctx;
  onnx_weights_free(o->w, o->n);
  free(o);
}

rx_status onnx_add_weights(rx_module *m, const void *bytes, size_t len, const char *name,
                           const char *base_dir) {
  owned_weights *o = base_calloc(1, sizeof *o);
  rx_status s = onnx_weights(bytes, len, name, base_dir, &o->w, &o->n);
  rx_module_on_free(m, free_weights, o); /* the module keeps the data its weights point into */
  for (int i = 0; i < o->n && !s; i++) {
    const rx_onnx_weight *w = &o->w[i];
    s = rx_module_add_weight(m, w->name, w->dtype, w->ndim, w->shape, w->dtype, w->data);
  }
  return s;
}
