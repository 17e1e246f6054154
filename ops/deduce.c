/* Helpers shared by the op deductions: argument views, symbolic dim comparison with the
 * analyzer, attribute access and the rank-only fallback warning. */
#include "deduce.h"

#include <stdlib.h>
#include <string.h>

const char *ops_str(rx_deduce_ctx *dc, const rx_sinfo *s) {
  rx_strbuf b = {0};
  ir_sinfo_print(&b, s);
  char *heap = base_strbuf_take(&b);
  const char *r = base_arena_strdup(&dc->mod->arena, heap);
  free(heap);
  return r;
}

const char *ops_expr_str(rx_deduce_ctx *dc, const rx_expr *e) {
  char *heap = sym_expr_to_string(e);
  const char *r = base_arena_strdup(&dc->mod->arena, heap);
  free(heap);
  return r;
}

const rx_expr **ops_dims(rx_deduce_ctx *dc, int n) {
  return ir_module_alloc(dc->mod, sizeof(const rx_expr *) * (size_t)(n > 0 ? n : 1));
}

const rx_sinfo *ops_tensor(rx_deduce_ctx *dc, rx_dtype dtype, int ndim, const rx_expr **dims) {
  static const rx_expr *const scalar[1];
  if (ndim == 0) return rx_sinfo_tensor(dc->mod, dtype, 0, scalar); /* 0-d: shape [] is known */
  return rx_sinfo_tensor(dc->mod, dtype, ndim, dims);
}

bool ops_is_weak(const rx_node *call, int i) {
  return i < call->nargs && call->args[i]->kind == RX_NODE_PRIM && call->args[i]->weak;
}

const rx_sinfo *ops_tensor_arg(rx_deduce_ctx *dc, const rx_node *call, int i, const char *what) {
  const rx_sinfo *s = call->args[i]->sinfo;
  RX_ASSERT(s);
  if (s->kind == RX_SINFO_TENSOR) return s;
  if (s->kind == RX_SINFO_PRIM) return ops_tensor(dc, s->dtype, 0, NULL);
  if (s->kind == RX_SINFO_OBJECT) return rx_sinfo_tensor(dc->mod, RX_DTYPE_UNKNOWN, -1, NULL);
  ops_deduce_error(dc, "%s expects a tensor as argument %d (%s), got %s", call->op->name, i + 1,
                   what, ops_str(dc, s));
  return NULL;
}

const rx_sinfo *ops_fallback(rx_deduce_ctx *dc, rx_dtype dtype, int ndim, const char *why) {
  const rx_sinfo *r = rx_sinfo_tensor(dc->mod, dtype, ndim, NULL);
  ops_deduce_warn(dc, "result falls back to rank-only %s (%s); use match_cast to recover the shape",
                  ops_str(dc, r), why);
  return r;
}

bool ops_need_float(rx_deduce_ctx *dc, const rx_sinfo *t, const char *what) {
  if (t->dtype == RX_DTYPE_UNKNOWN || ir_dtype_is_float(t->dtype)) return true;
  ops_deduce_error(dc, "%s expects a floating-point tensor, got %s", what, ops_str(dc, t));
  return false;
}

rx_expr_ctx *ops_ctx(rx_deduce_ctx *dc) { return dc->mod->ctx; }

const rx_expr *ops_simplify(rx_deduce_ctx *dc, const rx_expr *e) {
  return dc->an ? sym_analyzer_simplify(dc->an, e) : e;
}

rx_tribool ops_dim_eq(rx_deduce_ctx *dc, const rx_expr *a, const rx_expr *b) {
  if (a == b) return RX_TRUE;
  if (a->kind == RX_EXPR_CONST && b->kind == RX_EXPR_CONST) return RX_FALSE;
  if (!dc->an) return RX_UNKNOWN;
  const rx_expr *sa = sym_analyzer_simplify(dc->an, a), *sb = sym_analyzer_simplify(dc->an, b);
  if (sa == sb) return RX_TRUE;
  if (sa->kind == RX_EXPR_CONST && sb->kind == RX_EXPR_CONST) return RX_FALSE;
  return sym_analyzer_prove(dc->an, sym_expr_cmp(dc->mod->ctx, RX_EXPR_EQ, sa, sb));
}

rx_tribool ops_prove(rx_deduce_ctx *dc, const rx_expr *cond) {
  if (cond->kind == RX_EXPR_CONST) return cond->value ? RX_TRUE : RX_FALSE;
  return dc->an ? sym_analyzer_prove(dc->an, cond) : RX_UNKNOWN;
}

const rx_expr *ops_prod(rx_deduce_ctx *dc, const rx_expr *const *dims, int n) {
  const rx_expr *p = sym_expr_const(dc->mod->ctx, 1);
  for (int i = 0; i < n; i++) p = sym_expr_mul(dc->mod->ctx, p, dims[i]);
  return ops_simplify(dc, p);
}

int64_t ops_int_attr(const rx_node *call, const char *name, int64_t dflt) {
  const rx_attr *a = ops_call_attr(call, name);
  if (!a) return dflt;
  if (a->kind == RX_ATTR_INT || a->kind == RX_ATTR_BOOL) return a->i;
  if (a->kind == RX_ATTR_INTS && a->n == 1) return a->ints[0];
  if (a->kind == RX_ATTR_EXPRS && a->n == 1 && a->exprs[0]->kind == RX_EXPR_CONST)
    return a->exprs[0]->value;
  return dflt;
}

bool ops_norm_axis(rx_deduce_ctx *dc, int64_t axis, int ndim, int *out) {
  if (axis < -(int64_t)ndim || axis >= ndim) {
    ops_deduce_error(dc, "axis %lld is out of range for rank %d (expected %d <= axis < %d)",
                     (long long)axis, ndim, -ndim, ndim);
    return false;
  }
  *out = (int)(axis < 0 ? axis + ndim : axis);
  return true;
}

bool ops_axes_attr(rx_deduce_ctx *dc, const rx_node *call, const char *name, int ndim,
                   int **out_axes, int *out_n, bool *present) {
  const rx_attr *a = ops_call_attr(call, name);
  *out_axes = NULL;
  *out_n = 0;
  *present = a != NULL;
  if (!a) return true;
  int n = a->kind == RX_ATTR_INT ? 1 : a->n;
  if (a->kind != RX_ATTR_INT && a->kind != RX_ATTR_INTS && a->kind != RX_ATTR_EXPRS) {
    ops_deduce_error(dc, "%s expects %s to be a list of integers", call->op->name, name);
    return false;
  }
  int *axes = ir_module_alloc(dc->mod, sizeof(int) * (size_t)(n > 0 ? n : 1));
  for (int i = 0; i < n; i++) {
    int64_t v;
    if (a->kind == RX_ATTR_INT) {
      v = a->i;
    } else if (a->kind == RX_ATTR_INTS) {
      v = a->ints[i];
    } else if (a->exprs[i]->kind == RX_EXPR_CONST) {
      v = a->exprs[i]->value;
    } else {
      ops_deduce_error(dc, "%s expects constant integers in %s, got %s", call->op->name, name,
                       ops_expr_str(dc, a->exprs[i]));
      return false;
    }
    if (ndim < 0) {
      axes[i] = (int)(v < 0 ? -1 : v); /* unknown rank: normalized later or not at all */
      if (v < INT32_MIN || v > INT32_MAX) axes[i] = -1;
      continue;
    }
    if (!ops_norm_axis(dc, v, ndim, &axes[i])) return false;
    for (int j = 0; j < i; j++) {
      if (axes[j] == axes[i]) {
        ops_deduce_error(dc, "%s: axis %lld appears twice in %s", call->op->name, (long long)v,
                         name);
        return false;
      }
    }
  }
  *out_axes = axes;
  *out_n = n;
  return true;
}
