/* Shape manipulation: reshape, permute/transpose, expand_dims, squeeze, concat, split,
 * strided_slice, take, take_along_axis: their shape deduction, then their legalization
 * (injective loop nests over the output; indices from data checked at run time). */
#include "deduce.h"
#include "legalize_int.h"

#include "../shapes/expr_build.h"

#include <string.h>

/* Reports "OP ...: what: a vs b" for an equality that is false (provably) or unknown. */
static bool need_eq(rx_deduce_ctx *dc, const rx_expr *a, const rx_expr *b, const char *what) {
  rx_tribool eq = ops_dim_eq(dc, a, b);
  if (eq == RX_TRUE) return true;
  if (eq == RX_FALSE)
    ops_deduce_error(dc, "%s: %s and %s differ", what, ops_expr_str(dc, a), ops_expr_str(dc, b));
  else
    ops_deduce_error(dc, "%s: %s and %s could not be proven equal; use match_cast", what,
                     ops_expr_str(dc, a), ops_expr_str(dc, b));
  return false;
}

static bool has_shape(const rx_sinfo *t) { return t->ndim >= 0 && t->shape; }

/* A product split into a constant and non-constant factors (for cancelling in reshape). */
typedef struct factors {
  int64_t c;
  const rx_expr *f[64];
  int n;
} factors;

/* Adds the factors of e (a product of constants and other terms); false when it does not fit
 * or a constant would overflow. */
static bool flatten(factors *fs, const rx_expr *e) {
  if (e->kind == RX_EXPR_MUL) return flatten(fs, e->a) && flatten(fs, e->b);
  if (e->kind == RX_EXPR_CONST) {
    if (e->value == 0 || fs->c == 0) {
      fs->c = 0;
      return true;
    }
    int64_t r;
    if (__builtin_mul_overflow(fs->c, e->value, &r)) return false;
    fs->c = r;
    return true;
  }
  if (fs->n == 64) return false;
  fs->f[fs->n++] = e;
  return true;
}

/* ---- reshape ---- */

const rx_sinfo *ops_deduce_reshape(rx_deduce_ctx *dc, const rx_node *call) {
  const rx_sinfo *x = ops_tensor_arg(dc, call, 0, "x");
  if (!x) return NULL;
  const rx_sinfo *s = call->args[1]->sinfo;
  if (s->kind != RX_SINFO_SHAPE) {
    ops_deduce_error(dc, "reshape expects a shape as argument 2 (e.g. [n, 4]), got %s",
                     ops_str(dc, s));
    return NULL;
  }
  if (!s->shape) {
    if (has_shape(x)) return ops_fallback(dc, x->dtype, s->ndim, "the new shape is unknown");
    return ops_tensor(dc, x->dtype, s->ndim, NULL);
  }
  rx_expr_ctx *cx = ops_ctx(dc);
  int infer = -1;
  const rx_expr **dims = ops_dims(dc, s->ndim);
  for (int i = 0; i < s->ndim; i++) {
    dims[i] = s->shape[i];
    if (rx_expr_is_const(s->shape[i], -1)) {
      if (infer >= 0) {
        ops_deduce_error(dc, "reshape: at most one dim of the new shape may be -1, got %s",
                         ops_str(dc, s));
        return NULL;
      }
      infer = i;
    } else if (s->shape[i]->kind == RX_EXPR_CONST && s->shape[i]->value < 0) {
      ops_deduce_error(dc, "reshape: dim %d of the new shape is negative (%lld)", i,
                       (long long)s->shape[i]->value);
      return NULL;
    }
  }
  if (!has_shape(x)) {
    if (infer >= 0) return ops_tensor(dc, x->dtype, s->ndim, NULL);
    return ops_tensor(dc, x->dtype, s->ndim, dims);
  }
  const rx_expr *px = ops_prod(dc, x->shape, x->ndim);
  if (infer >= 0) {
    /* cancel the factors the two shapes share, then divide what is left */
    dims[infer] = sym_expr_const(cx, 1);
    factors fx = {1, {0}, 0}, fo = {1, {0}, 0};
    bool flat = true;
    for (int j = 0; j < x->ndim; j++) flat = flat && flatten(&fx, x->shape[j]);
    for (int i = 0; i < s->ndim; i++) flat = flat && flatten(&fo, dims[i]);
    if (flat && fo.c != 0) {
      for (int i = 0; i < fo.n; i++) {
        int j = 0;
        while (j < fx.n && fx.f[j] != fo.f[i]) j++;
        if (j == fx.n) break;
        fx.f[j] = fx.f[--fx.n];
        fo.f[i--] = fo.f[--fo.n];
      }
      if (fo.n == 0 && fx.c % fo.c == 0) {
        const rx_expr *q = sym_expr_const(cx, fx.c / fo.c);
        for (int j = 0; j < fx.n; j++) q = sym_expr_mul(cx, q, fx.f[j]);
        dims[infer] = ops_simplify(dc, q);
        return ops_tensor(dc, x->dtype, s->ndim, dims);
      }
    }
    const rx_expr *rest_x = px, *po = ops_prod(dc, dims, s->ndim);
    if (rx_expr_is_const(po, 0)) {
      ops_deduce_error(dc, "reshape cannot infer the -1 dim of %s: the other dims multiply to 0",
                       ops_str(dc, s));
      return NULL;
    }
    const rx_expr *rem = ops_simplify(dc, sym_expr_floormod(cx, rest_x, po));
    rx_tribool divides =
        rx_expr_is_const(rem, 0) ? RX_TRUE
        : rem->kind == RX_EXPR_CONST
            ? RX_FALSE
            : ops_prove(dc, sym_expr_cmp(cx, RX_EXPR_EQ, rem, sym_expr_const(cx, 0)));
    if (divides != RX_TRUE) {
      ops_deduce_error(dc,
                       "reshape cannot infer the -1 dim of %s from %s: the element count %s %s "
                       "divisible by %s",
                       ops_str(dc, s), ops_str(dc, x), ops_expr_str(dc, px),
                       divides == RX_FALSE ? "is not" : "could not be proven",
                       ops_expr_str(dc, ops_prod(dc, dims, s->ndim)));
      return NULL;
    }
    dims[infer] = ops_simplify(dc, sym_expr_floordiv(cx, rest_x, po));
    return ops_tensor(dc, x->dtype, s->ndim, dims);
  }
  const rx_expr *pn = ops_prod(dc, dims, s->ndim);
  rx_tribool eq = ops_dim_eq(dc, px, pn);
  if (eq != RX_TRUE) {
    if (eq == RX_FALSE)
      ops_deduce_error(dc, "reshape changes the element count: %s has %s elements, %s has %s",
                       ops_str(dc, x), ops_expr_str(dc, px), ops_str(dc, s), ops_expr_str(dc, pn));
    else
      ops_deduce_error(dc,
                       "reshape of %s to %s: the element counts %s and %s could not be proven "
                       "equal; use match_cast",
                       ops_str(dc, x), ops_str(dc, s), ops_expr_str(dc, px), ops_expr_str(dc, pn));
    return NULL;
  }
  return ops_tensor(dc, x->dtype, s->ndim, dims);
}

/* ---- permute ---- */

const rx_sinfo *ops_deduce_permute(rx_deduce_ctx *dc, const rx_node *call) {
  const rx_sinfo *x = ops_tensor_arg(dc, call, 0, "x");
  if (!x) return NULL;
  int *axes, n;
  bool present;
  if (!ops_axes_attr(dc, call, "axes", x->ndim, &axes, &n, &present)) return NULL;
  if (x->ndim < 0) return ops_tensor(dc, x->dtype, present ? n : -1, NULL);
  if (present && n != x->ndim) {
    ops_deduce_error(dc, "%s expects %d axes for %s, got %d", call->op->name, x->ndim,
                     ops_str(dc, x), n);
    return NULL;
  }
  if (!x->shape) return ops_tensor(dc, x->dtype, x->ndim, NULL);
  const rx_expr **dims = ops_dims(dc, x->ndim);
  for (int i = 0; i < x->ndim; i++) dims[i] = x->shape[present ? axes[i] : x->ndim - 1 - i];
  return ops_tensor(dc, x->dtype, x->ndim, dims);
}

/* ---- expand_dims, squeeze ---- */

const rx_sinfo *ops_deduce_expand_dims(rx_deduce_ctx *dc, const rx_node *call) {
  const rx_sinfo *x = ops_tensor_arg(dc, call, 0, "x");
  if (!x) return NULL;
  const rx_attr *a = ops_call_attr(call, "axes");
  int k = !a ? 0 : a->kind == RX_ATTR_INT ? 1 : a->n;
  if (x->ndim < 0) return ops_tensor(dc, x->dtype, -1, NULL);
  int n = x->ndim + k;
  int *axes, na;
  bool present;
  if (!ops_axes_attr(dc, call, "axes", n, &axes, &na, &present)) return NULL;
  if (!x->shape) return ops_tensor(dc, x->dtype, n, NULL);
  const rx_expr **dims = ops_dims(dc, n);
  for (int i = 0; i < na; i++) dims[axes[i]] = sym_expr_const(ops_ctx(dc), 1);
  for (int i = 0, j = 0; i < n; i++)
    if (!dims[i]) dims[i] = x->shape[j++];
  return ops_tensor(dc, x->dtype, n, dims);
}

const rx_sinfo *ops_deduce_squeeze(rx_deduce_ctx *dc, const rx_node *call) {
  const rx_sinfo *x = ops_tensor_arg(dc, call, 0, "x");
  if (!x) return NULL;
  int *axes, na;
  bool present;
  if (!ops_axes_attr(dc, call, "axes", x->ndim, &axes, &na, &present)) return NULL;
  if (x->ndim < 0) return ops_tensor(dc, x->dtype, -1, NULL);
  if (!x->shape) return ops_tensor(dc, x->dtype, present ? x->ndim - na : -1, NULL);
  const rx_expr *one = sym_expr_const(ops_ctx(dc), 1);
  bool *drop = ir_module_alloc(dc->mod, sizeof(bool) * (size_t)(x->ndim + 1));
  for (int i = 0; i < na; i++) {
    rx_tribool is1 = ops_dim_eq(dc, x->shape[axes[i]], one);
    if (is1 != RX_TRUE) {
      ops_deduce_error(dc, "squeeze cannot remove axis %d of %s: dim %s is %s", axes[i],
                       ops_str(dc, x), ops_expr_str(dc, x->shape[axes[i]]),
                       is1 == RX_FALSE ? "not 1" : "not provably 1 (use match_cast)");
      return NULL;
    }
    drop[axes[i]] = true;
  }
  if (!present) {
    for (int i = 0; i < x->ndim; i++) {
      rx_tribool is1 = ops_dim_eq(dc, x->shape[i], one);
      if (is1 == RX_UNKNOWN)
        return ops_fallback(dc, x->dtype, -1, "a dim may or may not be 1, so the rank is unknown");
      drop[i] = is1 == RX_TRUE;
    }
  }
  const rx_expr **dims = ops_dims(dc, x->ndim);
  int n = 0;
  for (int i = 0; i < x->ndim; i++)
    if (!drop[i]) dims[n++] = x->shape[i];
  return ops_tensor(dc, x->dtype, n, dims);
}

/* ---- concat, split ---- */

const rx_sinfo *ops_deduce_concat(rx_deduce_ctx *dc, const rx_node *call) {
  const rx_sinfo *t = call->args[0]->sinfo;
  if (t->kind != RX_SINFO_TUPLE || t->nfields == 0) {
    ops_deduce_error(dc,
                     "concat expects a non-empty tuple of tensors, e.g. concat((a, b), axis=0), "
                     "got %s",
                     ops_str(dc, t));
    return NULL;
  }
  rx_dtype dt = RX_DTYPE_UNKNOWN;
  int ndim = -1;
  bool shapes = true;
  for (int i = 0; i < t->nfields; i++) {
    const rx_sinfo *f = t->fields[i];
    if (f->kind != RX_SINFO_TENSOR) {
      ops_deduce_error(dc, "concat expects tensors, got %s as field %d", ops_str(dc, f), i);
      return NULL;
    }
    if (f->dtype != RX_DTYPE_UNKNOWN) {
      if (dt != RX_DTYPE_UNKNOWN && dt != f->dtype) {
        ops_deduce_error(dc, "concat expects tensors of one dtype, got %s", ops_str(dc, t));
        return NULL;
      }
      dt = f->dtype;
    }
    if (f->ndim >= 0) {
      if (ndim >= 0 && ndim != f->ndim) {
        ops_deduce_error(dc, "concat expects tensors of one rank, got %s", ops_str(dc, t));
        return NULL;
      }
      ndim = f->ndim;
    }
    shapes = shapes && has_shape(f);
  }
  if (ndim == 0) {
    ops_deduce_error(dc, "concat cannot join 0-d tensors: %s", ops_str(dc, t));
    return NULL;
  }
  if (ndim < 0) return ops_tensor(dc, dt, -1, NULL);
  int axis;
  if (!ops_norm_axis(dc, ops_int_attr(call, "axis", 0), ndim, &axis)) return NULL;
  if (!shapes) return ops_tensor(dc, dt, ndim, NULL);
  const rx_sinfo *f0 = t->fields[0];
  const rx_expr **dims = ops_dims(dc, ndim);
  memcpy(dims, f0->shape, sizeof *dims * (size_t)ndim);
  for (int i = 1; i < t->nfields; i++) {
    const rx_sinfo *f = t->fields[i];
    for (int d = 0; d < ndim; d++) {
      if (d == axis) {
        dims[d] = sym_expr_add(ops_ctx(dc), dims[d], f->shape[d]);
        continue;
      }
      const char *what = base_arena_printf(&dc->mod->arena, "concat along axis %d of %s: dim %d",
                                           axis, ops_str(dc, t), d);
      if (!need_eq(dc, f0->shape[d], f->shape[d], what)) return NULL;
    }
  }
  dims[axis] = ops_simplify(dc, dims[axis]);
  return ops_tensor(dc, dt, ndim, dims);
}

const rx_sinfo *ops_deduce_split(rx_deduce_ctx *dc, const rx_node *call) {
  const rx_sinfo *x = ops_tensor_arg(dc, call, 0, "x");
  if (!x) return NULL;
  const rx_attr *sec = ops_call_attr(call, "sections"), *ind = ops_call_attr(call, "indices");
  const rx_attr *a = sec ? sec : ind;
  rx_expr_ctx *cx = ops_ctx(dc);
  if (!a || (sec && ind) || (a->kind != RX_ATTR_INT && a->kind != RX_ATTR_INTS)) {
    ops_deduce_error(dc, "split expects either sections=K (K equal parts) or indices=[i, j, ...]");
    return NULL;
  }
  bool sections = a->kind == RX_ATTR_INT;
  int nparts = sections ? (int)(a->i > 0 && a->i <= 65536 ? a->i : 0) : a->n + 1;
  if (nparts <= 0) {
    ops_deduce_error(dc, "split expects a number of sections between 1 and 65536, got %lld",
                     (long long)a->i);
    return NULL;
  }
  for (int i = 0; !sections && i < a->n; i++) {
    if (a->ints[i] < 0 || (i && a->ints[i] < a->ints[i - 1])) {
      ops_deduce_error(dc, "split expects non-negative ascending indices");
      return NULL;
    }
  }
  const rx_sinfo **fields = ir_module_alloc(dc->mod, sizeof(rx_sinfo *) * (size_t)nparts);
  int axis = 0;
  if (x->ndim >= 0 && !ops_norm_axis(dc, ops_int_attr(call, "axis", 0), x->ndim, &axis))
    return NULL;
  if (x->ndim == 0) {
    ops_deduce_error(dc, "split cannot split a 0-d tensor");
    return NULL;
  }
  if (!has_shape(x)) {
    for (int i = 0; i < nparts; i++) fields[i] = ops_tensor(dc, x->dtype, x->ndim, NULL);
    return rx_sinfo_tuple(dc->mod, fields, nparts);
  }
  const rx_expr *d = x->shape[axis];
  if (sections) {
    const rx_expr *k = sym_expr_const(cx, nparts);
    const rx_expr *rem = ops_simplify(dc, sym_expr_floormod(cx, d, k));
    rx_tribool ok = rem->kind == RX_EXPR_CONST
                        ? (rem->value == 0 ? RX_TRUE : RX_FALSE)
                        : ops_prove(dc, sym_expr_cmp(cx, RX_EXPR_EQ, rem, sym_expr_const(cx, 0)));
    if (ok == RX_FALSE) {
      ops_deduce_error(dc, "split: dim %s of %s is not divisible into %d sections",
                       ops_expr_str(dc, d), ops_str(dc, x), nparts);
      return NULL;
    }
    if (ok == RX_UNKNOWN) {
      const rx_sinfo *f = ops_fallback(dc, x->dtype, x->ndim,
                                       "the split dim is not provably divisible by the "
                                       "number of sections");
      for (int i = 0; i < nparts; i++) fields[i] = f;
      return rx_sinfo_tuple(dc->mod, fields, nparts);
    }
  }
  const rx_expr *prev = sym_expr_const(cx, 0);
  for (int i = 0; i < nparts; i++) {
    const rx_expr **dims = ops_dims(dc, x->ndim);
    memcpy(dims, x->shape, sizeof *dims * (size_t)x->ndim);
    const rx_expr *next = d;
    if (sections) {
      dims[axis] = ops_simplify(dc, sym_expr_floordiv(cx, d, sym_expr_const(cx, nparts)));
    } else {
      if (i < a->n) next = ops_simplify(dc, sym_expr_min(cx, sym_expr_const(cx, a->ints[i]), d));
      dims[axis] = ops_simplify(dc, sym_expr_sub(cx, next, prev));
    }
    fields[i] = ops_tensor(dc, x->dtype, x->ndim, dims);
    prev = next;
  }
  return rx_sinfo_tuple(dc->mod, fields, nparts);
}

/* ---- strided_slice ---- */

/* Entry i of an INTS or EXPRS attribute as an expression. */
static const rx_expr *attr_expr(rx_deduce_ctx *dc, const rx_attr *a, int i) {
  if (a->kind == RX_ATTR_EXPRS) return a->exprs[i];
  if (a->kind == RX_ATTR_INTS) return sym_expr_const(ops_ctx(dc), a->ints[i]);
  return sym_expr_const(ops_ctx(dc), a->i);
}

static int attr_len(const rx_attr *a) {
  return a->kind == RX_ATTR_INTS || a->kind == RX_ATTR_EXPRS ? a->n : 1;
}

/* An index normalized for a dim d (negative counts from the end) and clamped to [lo, hi]. */
static const rx_expr *clamp_index(rx_deduce_ctx *dc, const rx_expr *v, const rx_expr *d,
                                  const rx_expr *lo, const rx_expr *hi) {
  rx_expr_ctx *cx = ops_ctx(dc);
  const rx_expr *zero = sym_expr_const(cx, 0);
  rx_tribool neg = v->kind == RX_EXPR_CONST ? (v->value < 0 ? RX_TRUE : RX_FALSE)
                                            : ops_prove(dc, sym_expr_cmp(cx, RX_EXPR_LT, v, zero));
  const rx_expr *n = neg == RX_TRUE    ? sym_expr_add(cx, v, d)
                     : neg == RX_FALSE ? v
                                       : sym_expr_select(cx, sym_expr_cmp(cx, RX_EXPR_LT, v, zero),
                                                         sym_expr_add(cx, v, d), v);
  return ops_simplify(dc, sym_expr_min(cx, sym_expr_max(cx, n, lo), hi));
}

const rx_sinfo *ops_deduce_strided_slice(rx_deduce_ctx *dc, const rx_node *call) {
  const rx_sinfo *x = ops_tensor_arg(dc, call, 0, "x");
  if (!x) return NULL;
  const rx_attr *begin = ops_call_attr(call, "begin"), *end = ops_call_attr(call, "end");
  const rx_attr *strides = ops_call_attr(call, "strides");
  int *axes, na;
  bool present;
  if (!ops_axes_attr(dc, call, "axes", x->ndim, &axes, &na, &present)) return NULL;
  if (!present || !begin || !end || attr_len(begin) != na || attr_len(end) != na ||
      (strides && attr_len(strides) != na)) {
    ops_deduce_error(dc, "strided_slice expects axes=[...], begin=[...], end=[...] and optional "
                         "strides=[...] of one length");
    return NULL;
  }
  rx_expr_ctx *cx = ops_ctx(dc);
  for (int i = 0; strides && i < na; i++) {
    const rx_expr *s = attr_expr(dc, strides, i);
    if (s->kind != RX_EXPR_CONST || s->value == 0 || s->value == INT64_MIN) {
      ops_deduce_error(dc, "strided_slice expects nonzero constant strides, got %s",
                       ops_expr_str(dc, s));
      return NULL;
    }
  }
  if (!has_shape(x)) return ops_tensor(dc, x->dtype, x->ndim, NULL);
  const rx_expr **dims = ops_dims(dc, x->ndim);
  memcpy(dims, x->shape, sizeof *dims * (size_t)x->ndim);
  for (int i = 0; i < na; i++) {
    const rx_expr *d = x->shape[axes[i]];
    int64_t s = strides ? attr_expr(dc, strides, i)->value : 1;
    const rx_expr *b, *e, *len;
    const rx_expr *zero = sym_expr_const(cx, 0);
    if (s > 0) {
      b = clamp_index(dc, attr_expr(dc, begin, i), d, zero, d);
      e = clamp_index(dc, attr_expr(dc, end, i), d, zero, d);
      len =
          sym_expr_floordiv(cx, sym_expr_add(cx, sym_expr_sub(cx, e, b), sym_expr_const(cx, s - 1)),
                            sym_expr_const(cx, s));
    } else {
      const rx_expr *m1 = sym_expr_const(cx, -1), *dm1 = sym_expr_sub(cx, d, sym_expr_const(cx, 1));
      b = clamp_index(dc, attr_expr(dc, begin, i), d, m1, dm1);
      e = clamp_index(dc, attr_expr(dc, end, i), d, m1, dm1);
      len = sym_expr_floordiv(cx,
                              sym_expr_add(cx, sym_expr_sub(cx, b, e), sym_expr_const(cx, -s - 1)),
                              sym_expr_const(cx, -s));
    }
    dims[axes[i]] = ops_simplify(dc, sym_expr_max(cx, ops_simplify(dc, len), zero));
  }
  return ops_tensor(dc, x->dtype, x->ndim, dims);
}

/* ---- take ---- */

const rx_sinfo *ops_deduce_take(rx_deduce_ctx *dc, const rx_node *call) {
  const rx_sinfo *x = ops_tensor_arg(dc, call, 0, "x");
  const rx_sinfo *idx = x ? ops_tensor_arg(dc, call, 1, "indices") : NULL;
  if (!idx) return NULL;
  if (idx->dtype != RX_DTYPE_UNKNOWN && !ir_dtype_is_int(idx->dtype)) {
    ops_deduce_error(dc, "take expects integer indices, got %s", ops_str(dc, idx));
    return NULL;
  }
  if (x->ndim == 0) {
    ops_deduce_error(dc, "take expects a tensor of rank >= 1, got %s", ops_str(dc, x));
    return NULL;
  }
  if (x->ndim < 0 || idx->ndim < 0) return ops_tensor(dc, x->dtype, -1, NULL);
  int axis;
  if (!ops_norm_axis(dc, ops_int_attr(call, "axis", 0), x->ndim, &axis)) return NULL;
  int n = x->ndim - 1 + idx->ndim;
  if (!x->shape || !idx->shape) return ops_tensor(dc, x->dtype, n, NULL);
  const rx_expr **dims = ops_dims(dc, n);
  int k = 0;
  for (int i = 0; i < axis; i++) dims[k++] = x->shape[i];
  for (int i = 0; i < idx->ndim; i++) dims[k++] = idx->shape[i];
  for (int i = axis + 1; i < x->ndim; i++) dims[k++] = x->shape[i];
  return ops_tensor(dc, x->dtype, n, dims);
}

/* take_along_axis: indices (integer) of x's rank; the result has the indices' shape and x's
 * dtype. Along the other axes the indices' dims may not exceed x's (an error where provably
 * larger). */
const rx_sinfo *ops_deduce_take_along_axis(rx_deduce_ctx *dc, const rx_node *call) {
  const rx_sinfo *x = ops_tensor_arg(dc, call, 0, "x");
  const rx_sinfo *idx = x ? ops_tensor_arg(dc, call, 1, "indices") : NULL;
  if (!idx) return NULL;
  if (idx->dtype != RX_DTYPE_UNKNOWN && !ir_dtype_is_int(idx->dtype)) {
    ops_deduce_error(dc, "take_along_axis expects integer indices, got %s", ops_str(dc, idx));
    return NULL;
  }
  if (x->ndim == 0) {
    ops_deduce_error(dc, "take_along_axis expects a tensor of rank >= 1, got %s", ops_str(dc, x));
    return NULL;
  }
  if (x->ndim < 0 || idx->ndim < 0) return ops_tensor(dc, x->dtype, -1, NULL);
  if (x->ndim != idx->ndim) {
    ops_deduce_error(dc, "take_along_axis expects indices of the rank of x (%s), got %s",
                     ops_str(dc, x), ops_str(dc, idx));
    return NULL;
  }
  int axis;
  if (!ops_norm_axis(dc, ops_int_attr(call, "axis", 0), x->ndim, &axis)) return NULL;
  for (int i = 0; x->shape && idx->shape && i < x->ndim; i++) {
    if (i == axis) continue;
    const rx_expr *gt = sym_expr_cmp(ops_ctx(dc), RX_EXPR_LT, x->shape[i], idx->shape[i]);
    if (ops_prove(dc, gt) == RX_TRUE) {
      ops_deduce_error(dc, "take_along_axis: indices %s exceed x %s in dim %d", ops_str(dc, idx),
                       ops_str(dc, x), i);
      return NULL;
    }
  }
  return ops_tensor(dc, x->dtype, idx->ndim, idx->shape);
}

/* ---- tensor_to_shape (host-level: the VM reads the tensor back and makes a shape value) ---- */

const rx_sinfo *ops_deduce_tensor_to_shape(rx_deduce_ctx *dc, const rx_node *call) {
  const rx_sinfo *x = call->args[0]->sinfo;
  if (x->kind != RX_SINFO_TENSOR) {
    ops_deduce_error(dc,
                     "tensor_to_shape expects an integer tensor (i64 or i32) as argument 1, "
                     "got %s",
                     ops_str(dc, x));
    return NULL;
  }
  if (x->dtype != RX_DTYPE_I64 && x->dtype != RX_DTYPE_I32) {
    ops_deduce_error(dc, "tensor_to_shape expects an i64 or i32 tensor, got %s", ops_str(dc, x));
    return NULL;
  }
  if (x->ndim == 0) return rx_sinfo_shape(dc->mod, 1, NULL);
  if (x->ndim != 1) {
    ops_deduce_error(dc, "tensor_to_shape expects a 1-D tensor (or a 0-d one), got %s%s",
                     ops_str(dc, x), x->ndim < 0 ? " of unknown rank" : "");
    return NULL;
  }
  if (!x->shape || x->shape[0]->kind != RX_EXPR_CONST) {
    ops_deduce_error(dc,
                     "tensor_to_shape needs a 1-D tensor whose length is a known constant (the "
                     "rank of the shape), got %s; use match_cast to give it a constant length",
                     ops_str(dc, x));
    return NULL;
  }
  return rx_sinfo_shape(dc->mod, (int)x->shape[0]->value, NULL);
}

/* ------------------------------------------------------------------------------------------
 * legalization: the generators named in ops.def (the writer they use: ops/legalize.c)
 * ------------------------------------------------------------------------------------------ */

/* ---- shape manipulation ---- */

/* Row-major flat index of vars over dims. */
static const rx_expr *flat_index(lz_ctx *l, const char *const *vars, const rx_expr *const *dims,
                                 int n) {
  const rx_expr *f = sx_const(l->cx, 0);
  for (int i = 0; i < n; i++)
    f = sym_expr_add(l->cx, sym_expr_mul(l->cx, f, dims[i]), sx_var(l->cx, vars[i]));
  return f;
}

/* Indices into dims (rank n) of flat index f: (f // stride_k) % dim_k (no % for the first). */
static void unflatten(lz_ctx *l, const rx_expr *f, const rx_expr *const *dims, int n,
                      const char **out) {
  for (int k = 0; k < n; k++) {
    const rx_expr *stride = sx_const(l->cx, 1);
    for (int j = k + 1; j < n; j++) stride = sym_expr_mul(l->cx, stride, dims[j]);
    const rx_expr *e = sym_expr_floordiv(l->cx, f, stride);
    if (k > 0) e = sym_expr_floormod(l->cx, e, dims[k]);
    out[k] = lz_ex(l, e);
  }
}

/* y = x viewed with another shape: flat-index copy. */
static void gen_reshape_like(lz_ctx *l, lz_opnd *x, lz_opnd *y) {
  const char *iv[LZ_MAXR], *xi[LZ_MAXR];
  lz_nest_vars(l, "i", y->ndim, iv);
  lz_for_nest(l, iv, y->shape, y->ndim);
  unflatten(l, flat_index(l, iv, y->shape, y->ndim), x->shape, x->ndim, xi);
  lz_line(l, "%s = %s", lz_load(l, y, iv), lz_load(l, x, xi));
  lz_close_n(l, y->ndim);
}

/* expand_dims / squeeze: the out dims that are not inserted (or the x dims not removed) map
 * one to one; removed dims are indexed by 0. */
static void gen_unit_dims(lz_ctx *l, bool expand) {
  lz_opnd *x = lz_arg(l, 0), *y = &l->outs[0];
  bool unit[LZ_MAXR] = {false}; /* expand: inserted out dims; squeeze: removed x dims */
  int big = expand ? y->ndim : x->ndim, small = expand ? x->ndim : y->ndim;
  const rx_attr *a = ops_call_attr(l->call, "axes");
  int axes[LZ_MAXR], na = 0;
  if (a) {
    na = lz_axes_attr(l, "axes", big, false, axes);
  } else if (!expand) {
    for (int i = 0; i < x->ndim; i++)
      if (rx_expr_is_const(x->shape[i], 1)) axes[na++] = i;
  }
  for (int i = 0; i < na; i++) unit[axes[i]] = true;
  if (l->failed) return;
  if (big - na != small) { /* dims provably 1 only under the function's facts */
    gen_reshape_like(l, x, y);
    return;
  }
  const char *iv[LZ_MAXR], *xi[LZ_MAXR];
  lz_nest_vars(l, "i", y->ndim, iv);
  lz_for_nest(l, iv, y->shape, y->ndim);
  for (int i = 0, j = 0; i < big; i++) {
    if (expand) {
      if (!unit[i]) xi[j++] = iv[i];
    } else {
      xi[i] = unit[i] ? "0" : iv[j++];
    }
  }
  lz_line(l, "%s = %s", lz_load(l, y, iv), lz_load(l, x, xi));
  lz_close_n(l, y->ndim);
}

void lz_gen_permute(lz_ctx *l) {
  lz_opnd *x = lz_arg(l, 0), *y = &l->outs[0];
  int axes[LZ_MAXR], na = 0;
  const rx_attr *a = ops_call_attr(l->call, "axes");
  if (a) {
    na = lz_axes_attr(l, "axes", x->ndim, false, axes);
  } else {
    for (int i = 0; i < x->ndim; i++) axes[na++] = x->ndim - 1 - i;
  }
  if (l->failed || na != x->ndim) {
    lz_fail(l, "permute expects %d axes", x->ndim);
    return;
  }
  /* iterate over x (reads in order, like tests/kernels/transpose.rx), store permuted */
  const char *iv[LZ_MAXR], *yi[LZ_MAXR];
  lz_nest_vars(l, "i", x->ndim, iv);
  for (int p = 0; p < na; p++) yi[p] = iv[axes[p]];
  lz_for_nest(l, iv, x->shape, x->ndim);
  lz_line(l, "%s = %s", lz_load(l, y, yi), lz_load(l, x, iv));
  lz_close_n(l, x->ndim);
}

void lz_gen_concat(lz_ctx *l) {
  lz_opnd *y = &l->outs[0];
  int first = l->argop[0], n = l->argn[0];
  if (first < 0 || n < 1) {
    lz_fail(l, "concat expects a tuple of tensors");
    return;
  }
  int axis = lz_axis_attr(l, "axis", 0, y->ndim);
  const char *iv[LZ_MAXR];
  lz_nest_vars(l, "i", y->ndim, iv);
  lz_for_nest(l, iv, y->shape, y->ndim);
  /* select(i < off1, a[.., i, ..], select(i < off2, b[.., i - off1, ..], c[.., i - off2, ..])) */
  const rx_expr *off = sx_const(l->cx, 0);
  const char *parts[64];
  const char *conds[64];
  for (int f = 0; f < n && f < 64; f++) {
    lz_opnd *o = &l->ops[first + f];
    const char *xi[LZ_MAXR];
    for (int d = 0; d < y->ndim; d++) xi[d] = iv[d];
    xi[axis] = lz_ex(l, sym_expr_sub(l->cx, sx_var(l->cx, iv[axis]), off));
    parts[f] = lz_load(l, o, xi);
    off = sym_expr_add(l->cx, off, o->shape[axis]);
    conds[f] = lz_ex(l, sym_expr_cmp(l->cx, RX_EXPR_LT, sx_var(l->cx, iv[axis]), off));
  }
  const char *v = parts[n - 1];
  for (int f = n - 2; f >= 0; f--) v = lz_str(l, "select(%s, %s, %s)", conds[f], parts[f], v);
  lz_line(l, "%s = %s", lz_load(l, y, iv), v);
  lz_close_n(l, y->ndim);
}

void lz_gen_split(lz_ctx *l) {
  lz_opnd *x = lz_arg(l, 0);
  int axis = lz_axis_attr(l, "axis", 0, x->ndim);
  const rx_expr *off = sx_const(l->cx, 0);
  for (int o = 0; o < l->nouts && !l->failed; o++) {
    lz_opnd *y = &l->outs[o];
    const char *iv[LZ_MAXR], *xi[LZ_MAXR];
    lz_nest_vars(l, "i", y->ndim, iv);
    lz_for_nest(l, iv, y->shape, y->ndim);
    for (int d = 0; d < y->ndim; d++) xi[d] = iv[d];
    xi[axis] = lz_ex(l, sym_expr_add(l->cx, sx_var(l->cx, iv[axis]), off));
    lz_line(l, "%s = %s", lz_load(l, y, iv), lz_load(l, x, xi));
    lz_close_n(l, y->ndim);
    off = sym_expr_add(l->cx, off, y->shape[axis]);
  }
}

static const rx_expr *gen_attr_expr(lz_ctx *l, const rx_attr *a, int i) {
  if (a->kind == RX_ATTR_EXPRS) return a->exprs[i];
  if (a->kind == RX_ATTR_INTS) return sx_const(l->cx, a->ints[i]);
  return sx_const(l->cx, a->i);
}

/* begin normalized against d (negative from the end) and clamped to [lo, hi] (as deduction). */
static const rx_expr *gen_clamp_index(lz_ctx *l, const rx_expr *v, const rx_expr *d,
                                      const rx_expr *lo, const rx_expr *hi) {
  rx_expr_ctx *cx = l->cx;
  const rx_expr *n = v->kind == RX_EXPR_CONST
                         ? (v->value < 0 ? sym_expr_add(cx, v, d) : v)
                         : sym_expr_select(cx, sym_expr_cmp(cx, RX_EXPR_LT, v, sx_const(l->cx, 0)),
                                           sym_expr_add(cx, v, d), v);
  return sym_expr_min(cx, sym_expr_max(cx, n, lo), hi);
}

void lz_gen_strided_slice(lz_ctx *l) {
  lz_opnd *x = lz_arg(l, 0), *y = &l->outs[0];
  const rx_attr *begin = ops_call_attr(l->call, "begin"),
                *strides = ops_call_attr(l->call, "strides");
  int axes[LZ_MAXR];
  int na = lz_axes_attr(l, "axes", x->ndim, false, axes);
  if (l->failed || !begin) return;
  const char *iv[LZ_MAXR], *xi[LZ_MAXR];
  lz_nest_vars(l, "i", y->ndim, iv);
  for (int d = 0; d < x->ndim; d++) xi[d] = iv[d];
  for (int i = 0; i < na; i++) {
    const rx_expr *d = x->shape[axes[i]];
    int64_t s = strides ? gen_attr_expr(l, strides, i)->value : 1;
    const rx_expr *b =
        s > 0 ? gen_clamp_index(l, gen_attr_expr(l, begin, i), d, sx_const(l->cx, 0), d)
              : gen_clamp_index(l, gen_attr_expr(l, begin, i), d, sx_const(l->cx, -1),
                                sym_expr_sub(l->cx, d, sx_const(l->cx, 1)));
    xi[axes[i]] =
        lz_ex(l, sym_expr_add(l->cx, b,
                              sym_expr_mul(l->cx, sx_var(l->cx, iv[axes[i]]), sx_const(l->cx, s))));
  }
  lz_for_nest(l, iv, y->shape, y->ndim);
  lz_line(l, "%s = %s", lz_load(l, y, iv), lz_load(l, x, xi));
  lz_close_n(l, y->ndim);
}

void lz_gen_take(lz_ctx *l) {
  lz_opnd *x = lz_arg(l, 0), *ind = lz_arg(l, 1), *y = &l->outs[0];
  if (ind->scalar) {
    lz_fail(l, "take expects a tensor of indices");
    return;
  }
  int axis = lz_axis_attr(l, "axis", 0, x->ndim);
  const char *iv[LZ_MAXR], *xi[LZ_MAXR], *ii[LZ_MAXR];
  lz_nest_vars(l, "i", y->ndim, iv);
  lz_for_nest(l, iv, y->shape, y->ndim);
  for (int d = 0; d < ind->ndim; d++) ii[d] = iv[axis + d];
  const char *t = lz_fresh(l, "t");
  const char *iv64 =
      ind->dtype == RX_DTYPE_I64 ? lz_load(l, ind, ii) : lz_str(l, "i64(%s)", lz_load(l, ind, ii));
  lz_line(l, "let %s: i64 = %s", t, iv64);
  for (int d = 0; d < axis; d++) xi[d] = iv[d];
  xi[axis] = lz_data_index(l, t, x->shape[axis], axis);
  for (int d = axis + 1; d < x->ndim; d++) xi[d] = iv[d - 1 + ind->ndim];
  lz_line(l, "%s = %s", lz_load(l, y, iv), lz_load(l, x, xi));
  lz_close_n(l, y->ndim);
}

/* take_along_axis: per element of the indices, x at that index along axis (negative counts
 * from the end) and at the element's own position along the other axes. */
void lz_gen_take_along_axis(lz_ctx *l) {
  lz_opnd *x = lz_arg(l, 0), *ind = lz_arg(l, 1), *y = &l->outs[0];
  if (ind->scalar || x->scalar) {
    lz_fail(l, "take_along_axis expects tensors");
    return;
  }
  int axis = lz_axis_attr(l, "axis", 0, x->ndim);
  const char *iv[LZ_MAXR], *xi[LZ_MAXR];
  lz_nest_vars(l, "i", y->ndim, iv);
  lz_for_nest(l, iv, y->shape, y->ndim);
  const char *t = lz_fresh(l, "t");
  const char *iv64 =
      ind->dtype == RX_DTYPE_I64 ? lz_load(l, ind, iv) : lz_str(l, "i64(%s)", lz_load(l, ind, iv));
  lz_line(l, "let %s: i64 = %s", t, iv64);
  for (int d = 0; d < x->ndim; d++) xi[d] = iv[d];
  xi[axis] = lz_data_index(l, t, x->shape[axis], axis);
  lz_line(l, "%s = %s", lz_load(l, y, iv), lz_load(l, x, xi));
  lz_close_n(l, y->ndim);
}

void lz_gen_expand(lz_ctx *l) { gen_unit_dims(l, true); }

void lz_gen_squeeze(lz_ctx *l) { gen_unit_dims(l, false); }

void lz_gen_reshape(lz_ctx *l) { gen_reshape_like(l, lz_arg(l, 0), &l->outs[0]); }
