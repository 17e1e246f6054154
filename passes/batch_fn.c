/* batch_fn: the batched form of a graph function (ACRoBat-style auto-batching, issue 18).
 *
 * rx_batch_function(m, "cell", shared, nshared, "cell_batched") adds to m a function that runs B
 * independent calls of `cell` at once: every tensor parameter not named in shared gets a new
 * leading symbolic dimension (the variable `batch`, or `batch_1`, ... when the function already
 * uses that name), parameters named in shared (weights) and non-tensor parameters stay as they
 * are, and each binding is rewritten over the batched values, by its op's rule (ops.def's batch
 * column, rx_batch_rule in ops/ops.h):
 *   - elementwise ops unchanged; broadcasting ops (add, where, ...) with batched operands first
 *     expanded to the result's rank + 1, so the new axis never meets another operand's dim;
 *   - matmul: a batched left operand becomes B stacks of rows against a shared weight; batch dims
 *     and 1-D operands (vectors) are aligned with expand_dims and squeezed back;
 *   - reductions, softmax, norms, cumsum, argmax, topk, concat, split, strided_slice, take,
 *     permute, expand_dims, squeeze: their axes shift by one (defaults written out);
 *   - reshape to a literal shape: the shape gets the batch dimension in front.
 * A value that depends on no batched parameter is computed once, as before. Calls of other graph
 * functions are inlined first (passes/inline.c, into a copy: fn itself is left as it is), so a
 * unit of several cells (a stacked LSTM's step, k steps of a cell: ACRoBat's grain size) is
 * batched as one function; a recursive one is an error. Anything else that
 * meets a batched value (other ops, call_tensor, call_extern, if, match_cast) is an error
 * naming the op, the binding and the function; so is a result that does not depend on a batched
 * parameter. Every batched binding's deduced struct info is checked against [batch] + the
 * original one: a rule that got a shape wrong fails here, never silently at run time.
 *
 * rx_batch_function_gather (issue 36) adds the index-array form of the same function: each
 * batched parameter x becomes pool_x: T[rows_x, ...] and idx_x: i32[batch], and the body starts
 * with x = take(pool_x, idx_x, axis=0), which fusion puts inside the kernels reading x, so the
 * runtime batcher passes scattered rows of an earlier output without copying them. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../ops/ops.h"
#include "passes.h"
#include "relaxc/compiler.h"

/* The most dims a batched value has (the runtime's limit, RX_RT_MAX_NDIM, too). */
#define RX_MAX_NDIM 16

typedef struct vmap {
  const rx_var *old;
  rx_var *new_var;
  bool batched;
} vmap;

typedef struct bctx {
  rx_module *m;
  rx_builder *b;
  const rx_graph_fn *f;
  const rx_expr *bdim; /* the new leading dimension */
  RX_VEC(vmap) vars;
  const char *where;           /* the binding being rewritten (for messages) */
  const rx_node *value;        /* its value */
  const rx_sinfo *value_sinfo; /* its struct info */
  int ntmp;                    /* values the rewrite added */
  bool gather;                 /* the index-array form: (pool_x, idx_x) for each batched x */
  RX_VEC(vmap) takes;          /* gather: old = the parameter, new_var = its pool; idx next to it */
  RX_VEC(rx_var *) idx;
} bctx;

static const vmap *lookup(const bctx *c, const rx_var *v) {
  for (size_t i = 0; i < c->vars.len; i++)
    if (c->vars.data[i].old == v) return &c->vars.data[i];
  return NULL;
}

static rx_status unsupported(const bctx *c, const char *what, const char *why) {
  return base_status_make(RX_ERR_UNSUPPORTED, "batch '%s': %s (binding '%s') cannot be batched: %s",
                          c->f->name, what, c->where ? c->where : "result", why);
}

/* The struct info s with the batch dimension in front. */
static const rx_sinfo *batched_sinfo(const bctx *c, const rx_sinfo *s) {
  if (!s || s->kind != RX_SINFO_TENSOR || s->ndim < 0) return NULL;
  if (!s->shape) return rx_sinfo_tensor(c->m, s->dtype, s->ndim + 1, NULL);
  const rx_expr *dims[RX_MAX_NDIM + 1];
  if (s->ndim + 1 > (int)RX_ARRAY_LEN(dims)) return NULL;
  dims[0] = c->bdim;
  for (int i = 0; i < s->ndim; i++) dims[i + 1] = s->shape[i];
  return rx_sinfo_tensor(c->m, s->dtype, s->ndim + 1, dims);
}

/* A node's struct info: its own, or its variable's (parsed nodes may carry none), or for the
 * value of the binding being rewritten the binding's. */
static const rx_sinfo *sinfo_of(const bctx *c, const rx_node *n) {
  if (!n) return NULL;
  if (n->sinfo) return n->sinfo;
  if (n->kind == RX_NODE_VAR && n->var) return n->var->sinfo;
  return n == c->value ? c->value_sinfo : NULL;
}

static int rank_of(const bctx *c, const rx_node *n) {
  const rx_sinfo *s = sinfo_of(c, n);
  return s && s->kind == RX_SINFO_TENSOR ? s->ndim : 0;
}

/* Emits op(args, attrs) and returns it as an argument. name NULL: a value of the rewrite's own,
 * named after the binding ("g_b1"), so that it never takes a later binding's name. */
static rx_status emit(bctx *c, const char *op, rx_node *const *args, int nargs,
                      const rx_attr *const *attrs, int nattrs, const char *name, rx_node **out) {
  rx_var *v = NULL;
  char tmp[256];
  if (!name) {
    snprintf(tmp, sizeof tmp, "%s_b%d", c->where ? c->where : "result", ++c->ntmp);
    name = tmp;
  }
  rx_status st = rx_emit_op(c->b, op, args, nargs, attrs, nattrs, name, &v);
  if (st) {
    rx_status e = base_status_make(rx_status_code_of(st), "batch '%s': binding '%s': %s",
                                   c->f->name, c->where ? c->where : "?", rx_status_message(st));
    rx_status_free(st);
    return e;
  }
  *out = rx_arg_var(c->b, v);
  return NULL;
}

/* x (batched, of original rank r) with `count` dims of size 1 inserted after the batch axis, and
 * one more at the end when last is set. */
static rx_status expand(bctx *c, rx_node *x, int r, int count, bool last, rx_node **out) {
  if (count <= 0 && !last) {
    *out = x;
    return NULL;
  }
  int64_t axes[RX_MAX_NDIM + 2];
  int n = 0;
  for (int i = 0; i < count && n < RX_MAX_NDIM; i++) axes[n++] = 1 + i;
  if (last) axes[n++] = 1 + r + count;
  const rx_attr *a = rx_attr_ints(c->m, "axes", axes, n);
  return emit(c, "expand_dims", &x, 1, &a, 1, NULL, out);
}

/* Broadcasting ops: each batched operand expanded to the result's rank + 1. */
static rx_status rule_broadcast(bctx *c, const rx_node *call, rx_node **args, const bool *bat,
                                const char *name, rx_node **out) {
  int r = rank_of(c, call);
  for (int i = 0; i < call->nargs; i++)
    if (bat[i])
      RX_RETURN_IF_ERROR(expand(c, args[i], rank_of(c, call->args[i]),
                                r - rank_of(c, call->args[i]), false, &args[i]));
  const rx_attr *attrs[8];
  int na = call->nattrs < 8 ? call->nattrs : 8;
  for (int i = 0; i < na; i++) attrs[i] = &call->attrs[i];
  return emit(c, ops_op_name(call->op), args, call->nargs, attrs, na, name, out);
}

/* matmul (NumPy rules): batched operands get the batch dims of the other in between, batched
 * vectors become matrices of one row (left) or one column (right), squeezed after. */
static rx_status rule_matmul(bctx *c, const rx_node *call, rx_node **args, const bool *bat,
                             const char *name, rx_node **out) {
  int ra = rank_of(c, call->args[0]), rb = rank_of(c, call->args[1]);
  if (bat[0] && !bat[1] && rb == 2) /* rows against a shared matrix: [batch, ..., k] [k, n] */
    return emit(c, "matmul", args, 2, NULL, 0, name, out);
  bool vec_a = bat[0] && ra == 1, vec_b = bat[1] && rb == 1;
  int ma = vec_a ? 2 : ra, mb = vec_b ? 2 : rb; /* ranks as matrices */
  int nb = (ma >= 2 ? ma - 2 : 0) > (mb >= 2 ? mb - 2 : 0) ? ma - 2 : (mb >= 2 ? mb - 2 : 0);
  if (bat[0])
    RX_RETURN_IF_ERROR(expand(c, args[0], ra, nb - (ma - 2) + (vec_a ? 1 : 0), false, &args[0]));
  if (bat[1]) RX_RETURN_IF_ERROR(expand(c, args[1], rb, nb - (mb - 2), vec_b, &args[1]));
  rx_node *y = NULL;
  RX_RETURN_IF_ERROR(emit(c, "matmul", args, 2, NULL, 0, vec_a || vec_b ? NULL : name, &y));
  if (!vec_a && !vec_b) {
    *out = y;
    return NULL;
  }
  int64_t axes[2];
  int n = 0;
  if (vec_a) axes[n++] = (rb == 1 && !bat[1]) ? -1 : -2; /* the row axis of a */
  if (vec_b) axes[n++] = -1;                             /* the column axis of b */
  const rx_attr *a = rx_attr_ints(c->m, "axes", axes, n);
  return emit(c, "squeeze", &y, 1, &a, 1, name, out);
}

/* The rewritten attributes of an axis op over an operand of original rank r (shape: its dims,
 * or NULL). */
static rx_status shift_attrs(bctx *c, const rx_node *call, int r, const rx_expr *const *shape,
                             const rx_attr **attrs, int *out_n) {
  const char *op = ops_op_name(call->op);
  rx_batch_rule rule = call->op->batch;
  bool permute = rule == RX_BATCH_PERMUTE, all_axes = rule == RX_BATCH_AXES;
  bool dflt_axis0 = rule == RX_BATCH_AXIS0 || rule == RX_BATCH_TAKE;
  bool has_axis = false, has_axes = false;
  int n = 0;
  for (int i = 0; i < call->nattrs && n < 8; i++) {
    const rx_attr *a = &call->attrs[i];
    if (!strcmp(a->name, "axis") && a->kind == RX_ATTR_INT) {
      has_axis = true;
      attrs[n++] = rx_attr_int(c->m, "axis", a->i >= 0 ? a->i + 1 : a->i);
    } else if (!strcmp(a->name, "axes") && a->kind == RX_ATTR_INTS) {
      has_axes = true;
      int64_t v[RX_MAX_NDIM + 1];
      int k = 0;
      if (permute) v[k++] = 0;
      for (int j = 0; j < a->n && k <= RX_MAX_NDIM; j++) {
        int64_t x = a->ints[j];
        if (permute && x < 0) x += r;
        v[k++] = x >= 0 ? x + 1 : x;
      }
      attrs[n++] = rx_attr_ints(c->m, "axes", v, k);
    } else {
      attrs[n++] = a;
    }
  }
  if (!has_axis && dflt_axis0) attrs[n++] = rx_attr_int(c->m, "axis", 1);
  if (!has_axes && (all_axes || permute || rule == RX_BATCH_SQUEEZE)) {
    int64_t v[RX_MAX_NDIM + 1];
    int k = 0;
    if (permute) {
      v[k++] = 0;
      for (int j = r; j >= 1; j--) v[k++] = j;
    } else if (all_axes) {
      for (int j = 1; j <= r; j++) v[k++] = j;
    } else { /* squeeze: the dims provably 1 */
      if (!shape) return unsupported(c, op, "squeeze without axes of an operand of unknown shape");
      for (int j = 0; j < r; j++)
        if (rx_expr_is_const(shape[j], 1)) v[k++] = j + 1;
    }
    attrs[n++] = rx_attr_ints(c->m, "axes", v, k);
  }
  *out_n = n;
  return NULL;
}

static rx_status rule_axis(bctx *c, const rx_node *call, rx_node **args, const bool *bat,
                           const char *name, rx_node **out) {
  const char *op = ops_op_name(call->op);
  if (call->op->batch == RX_BATCH_TAKE && !bat[0] && bat[1] && call->nargs == 2) {
    const rx_attr *ax = ops_call_attr(call, "axis");
    if (ax && ax->i != 0) return unsupported(c, op, "batched indices are supported on axis 0 only");
    const rx_attr *attrs[8];
    for (int i = 0; i < call->nattrs && i < 8; i++) attrs[i] = &call->attrs[i];
    return emit(c, op, args, call->nargs, attrs, call->nattrs < 8 ? call->nattrs : 8, name, out);
  }
  for (int i = 1; i < call->nargs; i++)
    if (bat[i]) return unsupported(c, op, "only its first operand may be batched");
  const rx_node *x = call->args[0];
  const rx_sinfo *xs = sinfo_of(c, x);
  if (x->kind == RX_NODE_TUPLE || (xs && xs->kind == RX_SINFO_TUPLE)) /* concat */
    xs = xs && xs->nfields > 0 ? xs->fields[0] : NULL;
  if (!xs || xs->kind != RX_SINFO_TENSOR || xs->ndim < 0)
    return unsupported(c, op, "its operand's rank is unknown");
  const rx_attr *attrs[10];
  int n = 0;
  RX_RETURN_IF_ERROR(shift_attrs(c, call, xs->ndim, xs->shape, attrs, &n));
  return emit(c, op, args, call->nargs, attrs, n, name, out);
}

static rx_status rule_reshape(bctx *c, const rx_node *call, rx_node **args, const bool *bat,
                              const char *name, rx_node **out) {
  const rx_node *s = call->args[1];
  if (bat[1] || s->kind != RX_NODE_SHAPE)
    return unsupported(c, "reshape", "its target shape is not a literal");
  const rx_expr *dims[RX_MAX_NDIM + 1];
  if (s->ndims + 1 > (int)RX_ARRAY_LEN(dims)) return unsupported(c, "reshape", "too many dims");
  dims[0] = c->bdim;
  for (int i = 0; i < s->ndims; i++) dims[i + 1] = s->dims[i];
  rx_node *nargs[2] = {args[0], rx_arg_shape(c->b, dims, s->ndims + 1)};
  return emit(c, "reshape", nargs, 2, NULL, 0, name, out);
}

static rx_status batch_node(bctx *c, const rx_node *n, const char *name, rx_node **out,
                            bool *out_bat);

/* A call of an op: its arguments rewritten, then the op's rule when one of them is batched. */
static rx_status batch_call(bctx *c, const rx_node *n, const char *name, rx_node **out,
                            bool *out_bat) {
  rx_node *args[16];
  bool bat[16];
  bool any = false;
  if (n->nargs > (int)RX_ARRAY_LEN(args)) return unsupported(c, ops_op_name(n->op), "16+ args");
  for (int i = 0; i < n->nargs; i++) {
    RX_RETURN_IF_ERROR(batch_node(c, n->args[i], NULL, &args[i], &bat[i]));
    any = any || bat[i];
  }
  *out_bat = any;
  const char *op = ops_op_name(n->op);
  if (!any) {
    const rx_attr *attrs[16];
    for (int i = 0; i < n->nattrs && i < 16; i++) attrs[i] = &n->attrs[i];
    return emit(c, op, args, n->nargs, attrs, n->nattrs, name, out);
  }
  switch (n->op->batch) { /* ops.def's batch column */
  case RX_BATCH_MATMUL:
    return rule_matmul(c, n, args, bat, name, out);
  case RX_BATCH_RESHAPE:
    return rule_reshape(c, n, args, bat, name, out);
  case RX_BATCH_AXES:
  case RX_BATCH_AXIS:
  case RX_BATCH_AXIS0:
  case RX_BATCH_TAKE:
  case RX_BATCH_PERMUTE:
  case RX_BATCH_SQUEEZE:
    return rule_axis(c, n, args, bat, name, out);
  case RX_BATCH_BROADCAST:
    if (sinfo_of(c, n) && sinfo_of(c, n)->kind == RX_SINFO_TENSOR && sinfo_of(c, n)->ndim >= 0)
      return rule_broadcast(c, n, args, bat, name, out);
    break;
  case RX_BATCH_NONE:
    break;
  }
  rx_strbuf why = {0};
  base_strbuf_printf(
      &why, "op '%s' has no batching rule (an operand depends on a batched parameter)", op);
  rx_status st = unsupported(c, op, why.data);
  base_strbuf_free(&why);
  return st;
}

static rx_status batch_node(bctx *c, const rx_node *n, const char *name, rx_node **out,
                            bool *out_bat) {
  *out_bat = false;
  switch (n->kind) {
  case RX_NODE_VAR: {
    const vmap *v = lookup(c, n->var);
    RX_ASSERT(v);
    *out = rx_arg_var(c->b, v->new_var);
    *out_bat = v->batched;
    return NULL;
  }
  case RX_NODE_CONST:
  case RX_NODE_PRIM:
  case RX_NODE_SHAPE:
    *out = (rx_node *)n; /* immutable; shared with the original function */
    return NULL;
  case RX_NODE_TUPLE: {
    rx_node *t = ir_node_new(c->m, RX_NODE_TUPLE, n->loc);
    t->args = ir_module_alloc(c->m, sizeof *t->args * (size_t)(n->nargs ? n->nargs : 1));
    t->nargs = n->nargs;
    const rx_sinfo *fields[64];
    if (n->nargs > (int)RX_ARRAY_LEN(fields)) return unsupported(c, "tuple", "64+ fields");
    int nb = 0;
    for (int i = 0; i < n->nargs; i++) {
      bool b = false;
      RX_RETURN_IF_ERROR(batch_node(c, n->args[i], NULL, &t->args[i], &b));
      fields[i] = t->args[i]->sinfo;
      nb += b;
    }
    if (nb && nb != n->nargs)
      return unsupported(c, "tuple", "it mixes batched values and values shared by the batch");
    t->sinfo = rx_sinfo_tuple(c->m, fields, n->nargs);
    *out_bat = nb > 0;
    if (!name) {
      *out = t;
      return NULL;
    }
    rx_var *v = NULL;
    RX_RETURN_IF_ERROR(rx_emit_tuple(c->b, t->args, t->nargs, name, &v));
    *out = rx_arg_var(c->b, v);
    return NULL;
  }
  case RX_NODE_GET_ITEM: {
    rx_node *t = NULL;
    RX_RETURN_IF_ERROR(batch_node(c, n->args[0], NULL, &t, out_bat));
    rx_var *v = NULL;
    char tmp[256];
    if (!name) snprintf(tmp, sizeof tmp, "%s_b%d", c->where ? c->where : "result", ++c->ntmp);
    RX_RETURN_IF_ERROR(rx_emit_get_item(c->b, t, n->index, name ? name : tmp, &v));
    *out = rx_arg_var(c->b, v);
    return NULL;
  }
  case RX_NODE_CALL:
    return batch_call(c, n, name, out, out_bat);
  case RX_NODE_CALL_TENSOR:
    return unsupported(c, "call_tensor", "only high-level ops are batched (batch before legalize)");
  case RX_NODE_CALL_EXTERN:
    return unsupported(c, "call_extern", "an external function has no batched form");
  case RX_NODE_CALL_GRAPH:
    return unsupported(c, "a call of a graph function", "a primitive function's call");
  case RX_NODE_IF:
    return unsupported(c, "if", "control flow is batched by the runtime batcher, not here");
  }
  return unsupported(c, "an expression", "unknown kind");
}

/* Checks a rewritten binding's struct info against the original's with the batch dim in front. */
static rx_status check_shape(bctx *c, const rx_sinfo *orig, const rx_node *got, bool bat) {
  if (!bat || !orig || orig->kind != RX_SINFO_TENSOR || orig->ndim < 0 || !orig->shape) return NULL;
  const rx_sinfo *want = batched_sinfo(c, orig);
  if (want && got->sinfo && ir_sinfo_equal(want, got->sinfo)) return NULL;
  char *w = rx_sinfo_to_string(want), *g = rx_sinfo_to_string(got->sinfo);
  rx_status st = base_status_make(RX_ERR_INTERNAL,
                                  "batch '%s': binding '%s': the batched value is %s, expected %s",
                                  c->f->name, c->where ? c->where : "?", g ? g : "?", w ? w : "?");
  rx_free(w);
  rx_free(g);
  return st;
}

/* The gather form's first bindings: x = take(pool_x, idx_x, axis=0) for each batched parameter
 * x, the value the rest of the body reads as x (fusion then puts the take inside the kernels
 * that read x: no copy before the batched call). */
static rx_status emit_takes(bctx *c) {
  for (size_t i = 0; i < c->takes.len; i++) {
    rx_node *args[2] = {rx_arg_var(c->b, c->takes.data[i].new_var),
                        rx_arg_var(c->b, c->idx.data[i])};
    const rx_attr *ax = rx_attr_int(c->m, "axis", 0);
    rx_node *x = NULL;
    c->where = c->takes.data[i].old->name;
    RX_RETURN_IF_ERROR(emit(c, "take", args, 2, &ax, 1, c->takes.data[i].old->name, &x));
    for (size_t k = 0; k < c->vars.len; k++)
      if (c->vars.data[k].old == c->takes.data[i].old) c->vars.data[k].new_var = x->var;
  }
  c->takes.len = 0;
  return NULL;
}

static rx_status batch_body(bctx *c, rx_node **out_result) {
  const rx_seq *s = &c->f->body;
  for (int bi = 0; bi < s->nblocks; bi++) {
    const rx_block *blk = s->blocks[bi];
    if (blk->dataflow) RX_RETURN_IF_ERROR(rx_builder_begin_dataflow(c->b));
    RX_RETURN_IF_ERROR(emit_takes(c));
    for (int i = 0; i < blk->nbindings; i++) {
      const rx_binding *bd = blk->bindings[i];
      c->where = bd->var->name;
      c->value = bd->value;
      c->value_sinfo = bd->var->sinfo;
      rx_node *v = NULL;
      bool bat = false;
      if (bd->cast) {
        RX_RETURN_IF_ERROR(batch_node(c, bd->value, NULL, &v, &bat));
        if (bat) return unsupported(c, "match_cast", "its value depends on a batched parameter");
        rx_var *nv = NULL;
        RX_RETURN_IF_ERROR(rx_emit_match_cast(c->b, v, bd->cast, bd->var->name, &nv));
        v = rx_arg_var(c->b, nv);
      } else {
        RX_RETURN_IF_ERROR(batch_node(c, bd->value, bd->var->name, &v, &bat));
      }
      RX_RETURN_IF_ERROR(check_shape(c, bd->var->sinfo, v, bat));
      RX_ASSERT(v->kind == RX_NODE_VAR);
      vmap e = {bd->var, v->var, bat};
      RX_VEC_PUSH(&c->vars, e);
    }
    if (blk->dataflow) RX_RETURN_IF_ERROR(rx_builder_end_dataflow(c->b));
  }
  RX_RETURN_IF_ERROR(emit_takes(c)); /* a body without blocks */
  c->where = NULL;
  bool bat = false;
  RX_RETURN_IF_ERROR(batch_node(c, s->result, NULL, out_result, &bat));
  if (!bat)
    return base_status_make(RX_ERR_UNSUPPORTED,
                            "batch '%s': the result depends on no batched parameter: nothing to "
                            "batch (every parameter is shared?)",
                            c->f->name);
  return NULL;
}

/* A name base, base_1, ... that none of f's shapes (and with params, none of its parameters)
 * uses. */
static void fresh_name(const rx_graph_fn *f, const char *base, bool params, char *name,
                       size_t cap) {
  rx_ptrvec vars = {0};
  for (int i = 0; i < f->nparams; i++) {
    const rx_sinfo *s = f->params[i]->sinfo;
    if (s && s->kind == RX_SINFO_TENSOR && s->shape)
      for (int d = 0; d < s->ndim; d++) sym_expr_collect_vars(s->shape[d], &vars);
  }
  snprintf(name, cap, "%s", base);
  for (int k = 1;; k++) {
    bool taken = false;
    for (size_t i = 0; i < vars.len; i++)
      taken = taken || !strcmp(((const rx_expr *)vars.data[i])->name, name);
    for (int i = 0; params && i < f->nparams; i++)
      taken = taken || !strcmp(f->params[i]->name, name);
    if (!taken) break;
    snprintf(name, cap, "%s_%d", base, k);
  }
  base_ptrvec_free(&vars);
}

/* A name for the batch dimension that none of f's shapes uses. */
static const rx_expr *batch_dim(rx_module *m, const rx_graph_fn *f) {
  char name[32];
  fresh_name(f, "batch", false, name, sizeof name);
  return rx_sym_var(m, name);
}

/* The gather form's parameters for batched parameter p: pool_p: T[rows_p, ...] (any number of
 * rows, 1 <= rows_p) and idx_p: i32[batch]; the take that reads them comes first in the body. */
static rx_status add_gather_params(bctx *c, const rx_var *p) {
  char pool[256], idx[256], rows[256], base[240];
  snprintf(base, sizeof base, "pool_%s", p->name);
  fresh_name(c->f, base, true, pool, sizeof pool);
  snprintf(base, sizeof base, "idx_%s", p->name);
  fresh_name(c->f, base, true, idx, sizeof idx);
  snprintf(base, sizeof base, "rows_%s", p->name);
  fresh_name(c->f, base, false, rows, sizeof rows);
  const rx_sinfo *s = p->sinfo;
  const rx_expr *dims[RX_MAX_NDIM + 1];
  if (s->ndim + 1 > (int)RX_ARRAY_LEN(dims) || !s->shape)
    return base_status_make(RX_ERR_UNSUPPORTED,
                            "batch '%s': parameter '%s' needs a known shape for the gather form",
                            c->f->name, p->name);
  const rx_expr *r = rx_sym_var(c->m, rows);
  dims[0] = r;
  for (int i = 0; i < s->ndim; i++) dims[i + 1] = s->shape[i];
  vmap e = {p, NULL, true};
  rx_var *iv = NULL;
  RX_RETURN_IF_ERROR(
      rx_builder_param(c->b, pool, rx_sinfo_tensor(c->m, s->dtype, s->ndim + 1, dims), &e.new_var));
  RX_RETURN_IF_ERROR(
      rx_builder_param(c->b, idx, rx_sinfo_tensor(c->m, RX_DTYPE_I32, 1, &c->bdim), &iv));
  RX_RETURN_IF_ERROR(rx_builder_fact(c->b, rx_sym_le(c->m, rx_sym_const(c->m, 1), r)));
  RX_VEC_PUSH(&c->takes, e);
  RX_VEC_PUSH(&c->idx, iv);
  e.new_var = NULL; /* set by emit_takes */
  RX_VEC_PUSH(&c->vars, e);
  return NULL;
}

static rx_status add_params(bctx *c, const char *const *shared, size_t nshared) {
  for (size_t k = 0; k < nshared; k++) {
    bool found = false;
    for (int i = 0; i < c->f->nparams; i++)
      found = found || !strcmp(c->f->params[i]->name, shared[k]);
    if (!found)
      return base_status_make(RX_ERR_INVALID, "batch '%s': no parameter '%s' to share", c->f->name,
                              shared[k]);
  }
  for (int i = 0; i < c->f->nparams; i++) {
    const rx_var *p = c->f->params[i];
    bool share = p->sinfo->kind != RX_SINFO_TENSOR;
    for (size_t k = 0; k < nshared; k++) share = share || !strcmp(p->name, shared[k]);
    if (!share && c->gather) {
      RX_RETURN_IF_ERROR(add_gather_params(c, p));
      continue;
    }
    const rx_sinfo *s = share ? p->sinfo : batched_sinfo(c, p->sinfo);
    if (!s)
      return base_status_make(RX_ERR_UNSUPPORTED,
                              "batch '%s': parameter '%s' has an unknown rank: cannot batch it",
                              c->f->name, p->name);
    vmap e = {p, NULL, !share};
    RX_RETURN_IF_ERROR(rx_builder_param(c->b, p->name, s, &e.new_var));
    RX_VEC_PUSH(&c->vars, e);
  }
  for (int i = 0; i < c->f->nfacts; i++) RX_RETURN_IF_ERROR(rx_builder_fact(c->b, c->f->facts[i]));
  return NULL;
}

static rx_status batch_function(rx_module *m, const char *fn, const char *const *shared,
                                size_t nshared, int64_t max_batch, const char *out_name,
                                bool gather) {
  if (!m || !fn || !out_name || (nshared && !shared))
    return base_status_make(RX_ERR_INVALID, "batch: missing module, function or name");
  RX_RETURN_IF_ERROR(rx_module_check(m, NULL)); /* one op a binding, struct info deduced */
  const rx_graph_fn *f = ir_module_graph_fn(m, fn);
  if (!f) return base_status_make(RX_ERR_NOT_FOUND, "batch: no graph function '%s'", fn);
  /* a unit of several cells (grain size): its calls inlined first, in a copy (fn stays as it is) */
  rx_graph_fn *inlined = NULL;
  int ncalls = 0;
  rx_status ist = pass_inline_copy(m, f, &inlined, &ncalls);
  if (ist) {
    rx_status e =
        base_status_make(rx_status_code_of(ist), "batch '%s': %s", fn, rx_status_message(ist));
    rx_status_free(ist);
    return e;
  }
  if (ncalls) f = inlined;
  if (ir_module_graph_fn(m, out_name))
    return base_status_make(RX_ERR_INVALID, "batch '%s': the module has a function '%s' already",
                            fn, out_name);
  bctx c = {.m = m, .f = f, .bdim = batch_dim(m, f), .gather = gather};
  c.b = rx_builder_new(m, out_name);
  rx_node *result = NULL;
  rx_status st = add_params(&c, shared, nshared);
  if (!st) st = rx_builder_fact(c.b, rx_sym_le(m, rx_sym_const(m, 1), c.bdim));
  if (!st && max_batch > 0)
    st = rx_builder_fact(c.b, rx_sym_le(m, c.bdim, rx_sym_const(m, max_batch)));
  if (!st) st = batch_body(&c, &result);
  if (!st) { /* the declared result, batched (the builder's own is the body's deduced one) */
    const rx_sinfo *ret = f->ret, *fields[64];
    if (ret && ret->kind == RX_SINFO_TUPLE && ret->nfields <= (int)RX_ARRAY_LEN(fields)) {
      bool all = true;
      for (int i = 0; i < ret->nfields; i++)
        all = all && (fields[i] = batched_sinfo(&c, ret->fields[i]));
      if (all) rx_builder_set_result(c.b, rx_sinfo_tuple(m, fields, ret->nfields));
    } else if (batched_sinfo(&c, ret)) {
      rx_builder_set_result(c.b, batched_sinfo(&c, ret));
    }
  }
  free(c.vars.data);
  free(c.takes.data);
  free(c.idx.data);
  if (st) {
    rx_builder_free(c.b);
    return st;
  }
  return rx_builder_finish(c.b, result, NULL);
}

rx_status rx_batch_function(rx_module *m, const char *fn, const char *const *shared, size_t nshared,
                            int64_t max_batch, const char *out_name) {
  return batch_function(m, fn, shared, nshared, max_batch, out_name, false);
}

rx_status rx_batch_function_gather(rx_module *m, const char *fn, const char *const *shared,
                                   size_t nshared, int64_t max_batch, const char *out_name) {
  return batch_function(m, fn, shared, nshared, max_batch, out_name, true);
}
