/* ir/weights.c: the module's weight table (ir.h, "weights") and the resources a module frees
 * with it (rx_module_on_free).
 *
 * A weight is a name, the dtype and shape it is stored with, and row-major source bytes in a
 * source dtype that the artifact writer (driver/weights.c) converts from while it streams them:
 * f32, f16 and bf16 convert among themselves, every other dtype is stored as it comes. The table
 * keeps pointers to the sources, never copies: an importer hands over mmapped checkpoints of
 * several GB and keeps them alive until the module dies (rx_module_on_free). */
#include "ir.h"

#include "../base/safetensors.h" /* base_st_dtype_name: what the image can hold */

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

static bool float_dtype(rx_dtype t) {
  return t == RX_DTYPE_F32 || t == RX_DTYPE_F16 || t == RX_DTYPE_BF16;
}

bool ir_weight_converts(rx_dtype from, rx_dtype to) {
  return from == to || (float_dtype(from) && float_dtype(to));
}

static rx_status bad(const char *name, const char *fmt, ...) RX_PRINTF(2, 3);
static rx_status bad(const char *name, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  rx_status s = base_status_vmake(RX_ERR_INVALID, fmt, ap);
  va_end(ap);
  return base_status_annotate(s, "weight '%.200s'", name);
}

static const char *dtype_text(rx_dtype t) {
  return (unsigned)t < RX_DTYPE_COUNT && t != RX_DTYPE_UNKNOWN ? ir_dtype_name(t) : "unknown";
}

/* The checks of rx_module_add_weight, before anything is recorded; the stored byte size in
 * *out_bytes. */
static rx_status check_weight(const rx_module *m, const char *name, rx_dtype dtype, int ndim,
                              const int64_t *shape, rx_dtype src_dtype, const void *src,
                              uint64_t *out_bytes) {
  if (!name || !name[0]) return base_status_make(RX_ERR_INVALID, "a weight needs a name");
  if (!strcmp(name, "__metadata__")) /* the safetensors header's own key */
    return bad(name, "the name is reserved by the safetensors format");
  if (ir_module_weight(m, name)) return bad(name, "the module has a weight of that name already");
  if ((unsigned)dtype >= RX_DTYPE_COUNT || dtype == RX_DTYPE_UNKNOWN ||
      (unsigned)src_dtype >= RX_DTYPE_COUNT || src_dtype == RX_DTYPE_UNKNOWN)
    return bad(name, "dtype %s from %s: both must be known dtypes", dtype_text(dtype),
               dtype_text(src_dtype));
  if (!base_st_dtype_name(dtype)) /* every dtype has one today; a new dtype must be given one */
    return bad(name, "dtype %s has no safetensors name to be stored with", ir_dtype_name(dtype));
  if (!ir_weight_converts(src_dtype, dtype))
    return bad(name,
               "cannot store %s from %s source bytes (f32, f16 and bf16 convert among "
               "themselves; other dtypes must match)",
               ir_dtype_name(dtype), ir_dtype_name(src_dtype));
  if (ndim < 0 || ndim > RX_WEIGHT_MAX_NDIM || (ndim && !shape))
    return bad(name, "rank %d (0 to %d, with a shape)", ndim, RX_WEIGHT_MAX_NDIM);
  int64_t bytes = 0, src_bytes = 0;
  rx_count_status c = base_shape_count(ndim, shape, (uint64_t)ir_dtype_bits(dtype) / 8, &bytes);
  if (c == RX_COUNT_OK)
    c = base_shape_count(ndim, shape, (uint64_t)ir_dtype_bits(src_dtype) / 8, &src_bytes);
  if (c == RX_COUNT_NEGATIVE) return bad(name, "a dimension of the shape is negative");
  if (c != RX_COUNT_OK) return bad(name, "the byte size of the shape overflows");
  if (src_bytes && !src) return bad(name, "no source bytes (NULL)");
  *out_bytes = (uint64_t)bytes;
  return NULL;
}

rx_status rx_module_add_weight(rx_module *m, const char *name, rx_dtype dtype, int ndim,
                               const int64_t *shape, rx_dtype src_dtype, const void *src) {
  if (!m) return base_status_make(RX_ERR_INVALID, "rx_module_add_weight: no module");
  uint64_t bytes = 0;
  RX_RETURN_IF_ERROR(check_weight(m, name, dtype, ndim, shape, src_dtype, src, &bytes));
  rx_weight w;
  memset(&w, 0, sizeof w);
  w.name = ir_module_intern(m, name, strlen(name));
  w.dtype = dtype;
  w.ndim = ndim;
  w.shape = ndim ? base_arena_dup(&m->arena, shape, (size_t)ndim * sizeof *shape) : NULL;
  w.src_dtype = src_dtype;
  w.src = src;
  w.bytes = bytes;
  base_ptrmap_put(&m->weight_index, w.name, (int)m->weights.len);
  RX_VEC_PUSH(&m->weights, w);
  return NULL;
}

size_t rx_module_weight_count(const rx_module *m) { return m ? m->weights.len : 0; }

const rx_weight *ir_module_weight_at(const rx_module *m, size_t i) {
  return i < m->weights.len ? &m->weights.data[i] : NULL;
}

const rx_weight *ir_module_weight(const rx_module *m, const char *name) {
  if (!m->weights.len) return NULL;
  /* names are interned in the module's expression context: equal names, one pointer */
  const char *key = ir_module_intern((rx_module *)m, name, strlen(name));
  int i = base_ptrmap_get(&m->weight_index, key);
  return i < 0 ? NULL : &m->weights.data[i];
}

bool ir_weight_fits(const rx_weight *w, const rx_sinfo *s) {
  if (!s || s->kind != RX_SINFO_TENSOR || s->dtype != w->dtype || s->ndim != w->ndim || !s->shape)
    return false;
  for (int d = 0; d < w->ndim; d++)
    if (!rx_expr_is_const(s->shape[d], w->shape[d])) return false;
  return true;
}

const rx_weight *ir_param_weight(const rx_module *m, const rx_var *param) {
  const rx_weight *w = ir_module_weight(m, param->name);
  return w && ir_weight_fits(w, param->sinfo) ? w : NULL;
}

void ir_weight_sinfo_text(rx_strbuf *out, const rx_weight *w) {
  base_strbuf_printf(out, "%s[", ir_dtype_name(w->dtype));
  for (int d = 0; d < w->ndim; d++)
    base_strbuf_printf(out, "%s%lld", d ? ", " : "", (long long)w->shape[d]);
  base_strbuf_putc(out, ']');
}

void rx_module_on_free(rx_module *m, void (*fn)(void *ctx), void *ctx) {
  if (!m || !fn) return;
  rx_module_cleanup c = {fn, ctx};
  RX_VEC_PUSH(&m->cleanups, c);
}

void ir_module_weights_free(rx_module *m) {
  for (size_t i = m->cleanups.len; i-- > 0;) m->cleanups.data[i].fn(m->cleanups.data[i].ctx);
  free(m->cleanups.data);
  free(m->weights.data);
  base_ptrmap_free(&m->weight_index);
  memset(&m->cleanups, 0, sizeof m->cleanups);
  memset(&m->weights, 0, sizeof m->weights);
}
