/* Struct info: construction, equality, printing. */
#include "ir.h"

#include <string.h>

static rx_sinfo *sinfo_new(rx_module *m, rx_sinfo_kind kind) {
  rx_sinfo *s = ir_module_alloc(m, sizeof *s);
  s->kind = kind;
  return s;
}

const rx_sinfo *rx_sinfo_object(rx_module *m) { return sinfo_new(m, RX_SINFO_OBJECT); }

static const rx_expr **dup_dims(rx_module *m, int ndim, const rx_expr *const *dims) {
  if (!dims || ndim < 0) return NULL;
  return base_arena_dup(&m->arena, dims, sizeof *dims * (size_t)ndim);
}

const rx_sinfo *rx_sinfo_tensor(rx_module *m, rx_dtype dtype, int ndim,
                                const rx_expr *const *shape) {
  rx_sinfo *s = sinfo_new(m, RX_SINFO_TENSOR);
  s->dtype = dtype;
  s->ndim = ndim < 0 ? -1 : ndim;
  s->shape = dup_dims(m, ndim, shape);
  return s;
}

const rx_sinfo *ir_sinfo_ragged(rx_module *m, const rx_sinfo *s, const char *by,
                                const rx_expr *rows) {
  rx_sinfo *r = sinfo_new(m, RX_SINFO_TENSOR);
  *r = *s;
  r->ragged_by = by;
  r->ragged_rows = rows;
  return r;
}

const rx_sinfo *ir_sinfo_placed(rx_module *m, const rx_sinfo *s, const char *mesh, const int *place,
                                int n) {
  rx_sinfo *r = sinfo_new(m, RX_SINFO_TENSOR);
  *r = *s;
  r->mesh = n ? mesh : NULL;
  r->place = n ? base_arena_dup(&m->arena, place, sizeof *place * (size_t)n) : NULL;
  r->nplace = n;
  return r;
}

const rx_sinfo *rx_sinfo_shape(rx_module *m, int ndim, const rx_expr *const *values) {
  rx_sinfo *s = sinfo_new(m, RX_SINFO_SHAPE);
  s->ndim = ndim < 0 ? -1 : ndim;
  s->shape = dup_dims(m, ndim, values);
  return s;
}

const rx_sinfo *rx_sinfo_prim(rx_module *m, rx_dtype dtype, const rx_expr *value) {
  rx_sinfo *s = sinfo_new(m, RX_SINFO_PRIM);
  s->dtype = dtype;
  s->value = value;
  return s;
}

const rx_sinfo *rx_sinfo_tuple(rx_module *m, const rx_sinfo *const *fields, int n) {
  rx_sinfo *s = sinfo_new(m, RX_SINFO_TUPLE);
  s->fields = base_arena_dup(&m->arena, fields, sizeof *fields * (size_t)n);
  s->nfields = n;
  return s;
}

const rx_sinfo *ir_sinfo_func(rx_module *m, const rx_sinfo *const *params, int n,
                              const rx_sinfo *ret) {
  rx_sinfo *s = sinfo_new(m, RX_SINFO_FUNC);
  s->fields = base_arena_dup(&m->arena, params, sizeof *params * (size_t)n);
  s->nfields = n;
  s->ret = ret;
  return s;
}

bool ir_sinfo_equal(const rx_sinfo *a, const rx_sinfo *b) {
  if (a == b) return true;
  if (!a || !b || a->kind != b->kind) return false;
  switch (a->kind) {
  case RX_SINFO_OBJECT:
    return true;
  case RX_SINFO_PRIM:
    return a->dtype == b->dtype && a->value == b->value;
  case RX_SINFO_TENSOR:
    if (a->dtype != b->dtype || a->mesh != b->mesh || a->nplace != b->nplace) return false;
    for (int i = 0; i < a->nplace; i++)
      if (a->place[i] != b->place[i]) return false;
    /* fallthrough */
  case RX_SINFO_SHAPE:
    if (a->ndim != b->ndim || !a->shape != !b->shape) return false;
    for (int i = 0; a->shape && i < a->ndim; i++)
      if (a->shape[i] != b->shape[i]) return false;
    return true;
  case RX_SINFO_FUNC:
    if (!ir_sinfo_equal(a->ret, b->ret)) return false;
    /* fallthrough */
  case RX_SINFO_TUPLE:
    if (a->nfields != b->nfields) return false;
    for (int i = 0; i < a->nfields; i++)
      if (!ir_sinfo_equal(a->fields[i], b->fields[i])) return false;
    return true;
  }
  return false;
}

static void print_dims(rx_strbuf *out, int ndim, const rx_expr *const *dims) {
  for (int i = 0; i < ndim; i++) {
    if (i) base_strbuf_append(out, ", ");
    sym_expr_print(out, dims[i]);
  }
}

void ir_sinfo_print(rx_strbuf *out, const rx_sinfo *s) {
  if (!s) {
    base_strbuf_append(out, "Object");
    return;
  }
  switch (s->kind) {
  case RX_SINFO_OBJECT:
    base_strbuf_append(out, "Object");
    return;
  case RX_SINFO_TENSOR:
    base_strbuf_printf(out, "%s[", ir_dtype_name(s->dtype));
    if (s->ndim < 0)
      base_strbuf_append(out, "...");
    else if (!s->shape)
      base_strbuf_printf(out, "ndim=%d", s->ndim);
    else
      print_dims(out, s->ndim, s->shape);
    base_strbuf_putc(out, ']');
    if (s->ragged_by) {
      base_strbuf_printf(out, " ragged(%s, ", s->ragged_by);
      sym_expr_print(out, s->ragged_rows);
      base_strbuf_putc(out, ')');
    }
    if (s->mesh) {
      base_strbuf_printf(out, " @ %s[", s->mesh);
      for (int i = 0; i < s->nplace; i++) {
        if (i) base_strbuf_append(out, ", ");
        if (s->place[i] == IR_PLACE_R)
          base_strbuf_putc(out, 'R');
        else if (s->place[i] == IR_PLACE_P)
          base_strbuf_putc(out, 'P');
        else
          base_strbuf_printf(out, "S[%d]", s->place[i]);
      }
      base_strbuf_putc(out, ']');
    }
    return;
  case RX_SINFO_SHAPE:
    if (s->shape) {
      base_strbuf_append(out, "Shape([");
      print_dims(out, s->ndim, s->shape);
      base_strbuf_append(out, "])");
    } else if (s->ndim >= 0) {
      base_strbuf_printf(out, "Shape(ndim=%d)", s->ndim);
    } else {
      base_strbuf_append(out, "Shape");
    }
    return;
  case RX_SINFO_PRIM:
    base_strbuf_printf(out, "Prim(%s", ir_dtype_name(s->dtype));
    if (s->value) {
      base_strbuf_append(out, ", ");
      sym_expr_print(out, s->value);
    }
    base_strbuf_putc(out, ')');
    return;
  case RX_SINFO_TUPLE:
    base_strbuf_putc(out, '(');
    for (int i = 0; i < s->nfields; i++) {
      if (i) base_strbuf_append(out, ", ");
      ir_sinfo_print(out, s->fields[i]);
    }
    if (s->nfields == 1) base_strbuf_putc(out, ',');
    base_strbuf_putc(out, ')');
    return;
  case RX_SINFO_FUNC:
    base_strbuf_append(out, "Func(");
    for (int i = 0; i < s->nfields; i++) {
      if (i) base_strbuf_append(out, ", ");
      ir_sinfo_print(out, s->fields[i]);
    }
    base_strbuf_append(out, ") -> ");
    ir_sinfo_print(out, s->ret);
    return;
  }
}
