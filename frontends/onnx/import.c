/* frontends/onnx/import.c: ONNX ModelProto -> one relaxc graph function `main` (see
 * onnx_import.h): the model and graph walk, the value table with its helpers, and the one table
 * of supported operators, onnx_ops[], whose handlers live one file per family of operators
 * (import_int.h lists them). The protobuf is decoded by the protobuf-c code generated at build time
 * from libonnx-dev's onnx.proto (frontends/onnx/onnx.cmake); the graph is built with the builder
 * API, so every binding's struct info is deduced as it is emitted and shape computations can read
 * it.
 *
 * Every ONNX value is one of three kinds: a tensor (a graph variable), a symbolic integer value
 * (a scalar or a short vector of symbolic expressions: the results of Shape, Size, Gather on a
 * shape, Concat of shapes, integer constants, ConstantOfShape of a short integer or bool
 * vector, and arithmetic, comparisons, Where and Cast of these, simplified under the fact that
 * every dim is a size), or a float scalar constant (passed to ops as a weakly typed literal).
 * Reshape and Expand take symbolic values as shape literals; where an operator uses one as data,
 * or it is a graph output, it becomes a tensor computed when the program runs (onnx_sym_tensor). A
 * shape that is itself computed at run time (a graph input, a Cast of a reduction) is bound to
 * fresh dims by tensor_to_shape and match_cast (onnx_runtime_sym). */
#include "import_int.h"
#include "onnx_import.h"

#include <assert.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- helpers ---- */

rx_status onnx_node_err(imp *I, const Onnx__NodeProto *n, const char *fmt, ...) {
  rx_strbuf sb = {0};
  base_strbuf_printf(&sb, "%s: node '%s' (%s, opset %lld): ", I->file, n->name ? n->name : "",
                     n->op_type ? n->op_type : "no op type", (long long)I->opset);
  va_list ap;
  va_start(ap, fmt);
  base_strbuf_vprintf(&sb, fmt, ap);
  va_end(ap);
  char *msg = base_strbuf_take(&sb);
  rx_status s = base_status_make(RX_ERR_UNSUPPORTED, "%s", msg);
  free(msg);
  return s;
}

val *onnx_get(imp *I, const char *name) {
  if (!name) return NULL; /* an absent (optional) name field of a corrupt file */
  for (int i = I->nvals - 1; i >= 0; i--)
    if (I->vals[i].name && !strcmp(I->vals[i].name, name)) return &I->vals[i];
  return NULL;
}

val *onnx_def(imp *I, const char *name) {
  if (I->nvals == I->cap) {
    I->cap = I->cap ? 2 * I->cap : 64;
    val *nv = base_calloc((size_t)I->cap, sizeof *nv);
    if (I->nvals) memcpy(nv, I->vals, sizeof *nv * (size_t)I->nvals);
    free(I->vals);
    I->vals = nv;
  }
  val *v = &I->vals[I->nvals++];
  memset(v, 0, sizeof *v);
  v->name = name;
  return v;
}

const char *onnx_input(const Onnx__NodeProto *n, size_t i) {
  return i < n->n_input && n->input[i] && n->input[i][0] ? n->input[i] : NULL;
}

/* ---- parsing ---- */

static int64_t model_opset(const Onnx__ModelProto *mp) {
  for (size_t i = 0; i < mp->n_opset_import; i++) {
    const Onnx__OperatorSetIdProto *o = mp->opset_import[i];
    if ((!o->domain || !o->domain[0] || !strcmp(o->domain, "ai.onnx")) && o->has_version)
      return o->version;
  }
  return 0;
}

static bool is_initializer(const Onnx__GraphProto *g, const char *name) {
  if (!name) return false;
  for (size_t i = 0; i < g->n_initializer; i++)
    if (g->initializer[i]->name && !strcmp(g->initializer[i]->name, name)) return true;
  return false;
}

/* ---- building ---- */

static const rx_sinfo *tensor_sinfo(imp *I, const Onnx__TensorProto *t, rx_status *s) {
  rx_dtype dt;
  if (!onnx_dtype_of(t->data_type, &dt) || t->n_dims > 8) {
    *s = base_status_make(RX_ERR_UNSUPPORTED, "%s: tensor '%s': unsupported data type %d or rank",
                          I->file, t->name ? t->name : "", (int)t->data_type);
    return NULL;
  }
  const rx_expr *dims[8];
  for (size_t i = 0; i < t->n_dims; i++) {
    if (t->dims[i] < 0) {
      *s = base_status_make(RX_ERR_INVALID, "%s: initializer '%s': dim %zu is negative (%lld)",
                            I->file, t->name ? t->name : "", i, (long long)t->dims[i]);
      return NULL;
    }
    dims[i] = rx_sym_const(I->m, t->dims[i]);
  }
  return rx_sinfo_tensor(I->m, dt, (int)t->n_dims, dims);
}

typedef struct wctx {
  imp *I;
  rx_status s;
} wctx;

static void add_weight_param(void *ctx, const char *name, const Onnx__TensorProto *t) {
  wctx *w = ctx;
  if (w->s) return;
  /* only the dims are needed here; weights.c reads the data (inline or external) */
  const rx_sinfo *si = tensor_sinfo(w->I, t, &w->s);
  if (!si) return;
  char *id = onnx_ident(name);
  val *v = onnx_def(w->I, name);
  v->kind = V_TENSOR;
  w->s = rx_builder_param(w->I->b, id, si, &v->var);
  free(id);
  size_t c;
  float *f = t->data_type == ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT && t->n_dims == 1 &&
                     t->dims[0] <= SYM_MAX
                 ? onnx_tensor_floats(t, &c)
                 : NULL;
  if (f && c <= SYM_MAX) {
    memcpy(v->fl, f, sizeof *f * c);
    v->nfl = (int)c;
  }
  free(f);
}

static rx_status add_input(imp *I, const Onnx__ValueInfoProto *vi) {
  if (!vi->name || !vi->name[0])
    return base_status_make(RX_ERR_INVALID, "%s: a graph input has no name", I->file);
  const Onnx__TypeProto *tp = vi->type;
  if (!tp || tp->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE || !tp->tensor_type)
    return base_status_make(RX_ERR_UNSUPPORTED, "%s: graph input '%s' is not a tensor", I->file,
                            vi->name);
  const Onnx__TypeProto__Tensor *tt = tp->tensor_type;
  rx_dtype dt = RX_DTYPE_UNKNOWN;
  char tname[32];
  if (!onnx_dtype_of(tt->elem_type, &dt))
    return base_status_make(RX_ERR_UNSUPPORTED,
                            "%s: graph input '%s': element type %s has no relaxc dtype (relaxc has "
                            "f32, f64, f16, bf16, i64, i32, i16, i8, u64, u32, u16, u8 and bool)",
                            I->file, vi->name, onnx_type_name(tt->elem_type, tname, sizeof tname));
  const rx_sinfo *si;
  if (!tt->shape) {
    si = rx_sinfo_tensor(I->m, dt, -1, NULL);
  } else {
    const rx_expr *dims[16];
    if (tt->shape->n_dim > 16)
      return base_status_make(RX_ERR_UNSUPPORTED, "%s: graph input '%s': rank over 16", I->file,
                              vi->name);
    for (size_t i = 0; i < tt->shape->n_dim; i++) {
      const Onnx__TensorShapeProto__Dimension *d = tt->shape->dim[i];
      if (d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE) {
        if (d->dim_value < 0)
          return base_status_make(RX_ERR_INVALID,
                                  "%s: graph input '%s': dim %zu is negative (%lld); a dim is a "
                                  "size (>= 0) or a name",
                                  I->file, vi->name, i, (long long)d->dim_value);
        dims[i] = rx_sym_const(I->m, d->dim_value);
      } else if (d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM &&
                 d->dim_param && d->dim_param[0]) {
        char *id = onnx_ident(d->dim_param);
        dims[i] = rx_sym_var(I->m, id);
        free(id);
      } else {
        char nm[32];
        snprintf(nm, sizeof nm, "d%d", I->fresh++);
        dims[i] = rx_sym_var(I->m, nm);
      }
      sym_analyzer_assume(I->an, rx_sym_le(I->m, rx_sym_const(I->m, 0), dims[i]));
    }
    si = rx_sinfo_tensor(I->m, dt, (int)tt->shape->n_dim, dims);
  }
  char *id = onnx_ident(vi->name);
  val *v = onnx_def(I, vi->name);
  v->kind = V_TENSOR;
  rx_status s = rx_builder_param(I->b, id, si, &v->var);
  if (!s && strcmp(v->var->name, vi->name)) /* the graph's own name in the signature */
    v->var->source_name = ir_module_intern(I->m, vi->name, strlen(vi->name));
  free(id);
  return s;
}

/* A value as an op argument: an integer scalar shape value a weakly typed prim, a vector or
 * bool one its tensor (onnx_sym_tensor). */
rx_status onnx_arg(imp *I, const Onnx__NodeProto *n, const char *name, rx_node **out) {
  *out = NULL;
  val *v = name ? onnx_get(I, name) : NULL;
  if (!v) return onnx_node_err(I, n, "input '%s' is not defined", name ? name : "(missing)");
  if (v->kind == V_TENSOR)
    *out = rx_arg_var(I->b, v->var);
  else if (v->kind == V_FCONST)
    *out = rx_arg_float(I->b, v->f);
  else if (v->kind == V_SYM && v->sndim == 0 && v->sdt != RX_DTYPE_BOOL)
    *out = rx_arg_prim(I->b, RX_DTYPE_I64, v->s[0]);
  else if (v->kind == V_SYM) {
    rx_var *t;
    RX_RETURN_IF_ERROR(onnx_sym_tensor(I, n, v, &t));
    *out = rx_arg_var(I->b, t);
  } else
    return onnx_node_err(I, n, "input '%s' failed to import", name);
  return NULL;
}

/* A builder error (s, consumed) as an error of node n; NULL stays NULL. */
rx_status onnx_at_node(imp *I, const Onnx__NodeProto *n, rx_status s) {
  if (!s || !n) return s; /* no node: a graph output's conversion (build) */
  rx_status e = onnx_node_err(I, n, "%s", rx_status_message(s));
  rx_status_free(s);
  return e;
}

/* The name of op (ops/ops.def), as the builder takes it; op is a real op, not ONNX_NO_OP. */
const char *onnx_op_name(rx_op_id op) {
  assert((unsigned)op < RX_OP_COUNT);
  return ops_op_name(ops_op_all(NULL)[op]);
}

rx_status onnx_emit(imp *I, const Onnx__NodeProto *n, rx_op_id op, rx_node *const *args, int nargs,
                    const rx_attr *const *attrs, int nattrs, rx_var **out) {
  return onnx_at_node(I, n,
                      rx_emit_op(I->b, onnx_op_name(op), args, nargs, attrs, nattrs, NULL, out));
}

/* A symbolic value as a tensor of its dtype, computed when the program runs (a shape value an
 * operator uses as data, or a graph output): full([], s) for a scalar; for a vector, full([1],
 * s_k) per value joined by concat (fusion makes them one kernel). Cached on the value, so every
 * use shares one tensor. */
rx_status onnx_sym_tensor(imp *I, const Onnx__NodeProto *n, val *v, rx_var **out) {
  if (v->tvar) {
    *out = v->tvar;
    return NULL;
  }
  rx_dtype dt = v->sdt ? v->sdt : RX_DTYPE_I64;
  const rx_attr *at = rx_attr_dtype(I->m, "dtype", dt);
  const rx_expr *one = rx_sym_const(I->m, 1), *zero = rx_sym_const(I->m, 0);
  rx_node *parts[SYM_MAX], *a[2];
  rx_var *r = NULL;
  if (v->sndim == 0 || v->slen == 0) { /* a scalar, or an empty vector */
    a[0] = rx_arg_shape(I->b, &zero, v->sndim);
    a[1] = rx_arg_prim(I->b, RX_DTYPE_I64, v->sndim ? zero : v->s[0]);
    RX_RETURN_IF_ERROR(
        onnx_at_node(I, n, rx_emit_op(I->b, onnx_op_name(RX_OP_full), a, 2, &at, 1, NULL, &r)));
  } else {
    for (int k = 0; k < v->slen; k++) {
      a[0] = rx_arg_shape(I->b, &one, 1);
      a[1] = rx_arg_prim(I->b, RX_DTYPE_I64, v->s[k]);
      RX_RETURN_IF_ERROR(
          onnx_at_node(I, n, rx_emit_op(I->b, onnx_op_name(RX_OP_full), a, 2, &at, 1, NULL, &r)));
      parts[k] = rx_arg_var(I->b, r);
    }
    if (v->slen > 1) {
      rx_var *tup;
      RX_RETURN_IF_ERROR(onnx_at_node(I, n, rx_emit_tuple(I->b, parts, v->slen, NULL, &tup)));
      a[0] = rx_arg_var(I->b, tup);
      const rx_attr *ax = rx_attr_int(I->m, "axis", 0);
      RX_RETURN_IF_ERROR(
          onnx_at_node(I, n, rx_emit_op(I->b, onnx_op_name(RX_OP_concat), a, 1, &ax, 1, NULL, &r)));
    }
  }
  v->tvar = r;
  *out = r;
  return NULL;
}

val *onnx_def_named(imp *I, const char *name, rx_var *var) {
  val *v = onnx_def(I, name);
  v->kind = V_TENSOR;
  v->var = var;
  return v;
}

val *onnx_def_tensor(imp *I, const Onnx__NodeProto *n, rx_var *var) {
  return onnx_def_named(I, n->output[0], var);
}

/* Output 0 of n is the value src under a new name (Identity, a Cast of a constant, ...). */
void onnx_def_alias(imp *I, const Onnx__NodeProto *n, const val *src) {
  val copy = *src;
  copy.name = n->output[0];
  *onnx_def(I, n->output[0]) = copy; /* def may move the values: src is copied first */
}

const rx_sinfo *onnx_tsinfo(val *v) {
  return v && v->kind == V_TENSOR ? rx_var_sinfo(v->var) : NULL;
}

int onnx_rank_of(val *v) {
  const rx_sinfo *si = onnx_tsinfo(v);
  return si && si->kind == RX_SINFO_TENSOR ? si->ndim : -1;
}

/* match_cast(v, dtype[dims]); false on failure. */
bool onnx_match_cast_to(imp *I, rx_var *v, rx_dtype dtype, int ndim, const rx_expr *const *dims,
                        rx_var **out) {
  const rx_sinfo *t = rx_sinfo_tensor(I->m, dtype, ndim, dims);
  rx_status s = rx_emit_match_cast(I->b, rx_arg_var(I->b, v), t, NULL, out);
  if (s) rx_status_free(s);
  return !s;
}

/* The length of a runtime integer tensor usable as shape values (a scalar: 1, a 1-D tensor of
 * constant length up to SYM_MAX), -1 otherwise. */
int onnx_runtime_len(val *v) {
  const rx_sinfo *si = onnx_tsinfo(v);
  if (!si || si->kind != RX_SINFO_TENSOR || !ir_dtype_is_int(si->dtype)) return -1;
  if (si->ndim == 0) return 1;
  if (si->ndim != 1 || !si->shape || si->shape[0]->kind != RX_EXPR_CONST ||
      si->shape[0]->value > SYM_MAX)
    return -1;
  return (int)si->shape[0]->value;
}

/* Fresh symbolic variables d<N> for dims the importer cannot name. */
const rx_expr *onnx_fresh_dim(imp *I) {
  char nm[32];
  snprintf(nm, sizeof nm, "d%d", I->fresh++);
  const rx_expr *d = rx_sym_var(I->m, nm);
  sym_analyzer_assume(I->an, rx_sym_le(I->m, rx_sym_const(I->m, 0), d)); /* the VM checks it */
  return d;
}

/* A shape value computed by a tensor at run time (data-dependent, as Reshape(x, Cast(ReduceMax
 * (...)))): its values become fresh variables, bound when the program runs by
 * tensor_to_shape and a match_cast to Shape([d0, d1, ...]); the VM checks each is a size
 * (>= 0). Cached on the value, so every use shares the variables. */
rx_status onnx_runtime_sym(imp *I, const Onnx__NodeProto *n, val *v) {
  if (v->rt) return NULL;
  int len = onnx_runtime_len(v);
  if (len < 0)
    return onnx_node_err(I, n,
                         "a shape computed at run time must be an integer scalar or a 1-D "
                         "integer tensor of constant length at most %d",
                         SYM_MAX);
  rx_node *a = rx_arg_var(I->b, v->var);
  rx_var *t, *u;
  RX_RETURN_IF_ERROR(onnx_emit(I, n, RX_OP_tensor_to_shape, &a, 1, NULL, 0, &t));
  const rx_expr *dims[SYM_MAX];
  for (int k = 0; k < len; k++) dims[k] = onnx_fresh_dim(I);
  RX_RETURN_IF_ERROR(onnx_at_node(
      I, n,
      rx_emit_match_cast(I->b, rx_arg_var(I->b, t), rx_sinfo_shape(I->m, len, dims), NULL, &u)));
  v->rt = true;
  v->sndim = onnx_rank_of(v);
  v->slen = len;
  for (int k = 0; k < len; k++) v->s[k] = dims[k];
  return NULL;
}

/* A symbolic int value of input i (required). */
rx_status onnx_sym_input(imp *I, const Onnx__NodeProto *n, size_t i, val **out) {
  const char *nm = onnx_input(n, i);
  val *v = nm ? onnx_get(I, nm) : NULL;
  if (v && v->kind == V_TENSOR && onnx_runtime_len(v) >= 0) {
    RX_RETURN_IF_ERROR(onnx_runtime_sym(I, n, v));
    *out = v;
    return NULL;
  }
  if (!v || v->kind != V_SYM)
    return onnx_node_err(I, n, "input %zu ('%s') must be a constant or a shape computation", i,
                         nm ? nm : "");
  *out = v;
  return NULL;
}

/* Integer list from input i (opset >= 13 style) or attribute name; *n = -1 when absent. */
rx_status onnx_int_list(imp *I, const Onnx__NodeProto *n, size_t i, const char *name, int64_t *out,
                        int *count) {
  *count = -1;
  const Onnx__AttributeProto *a = onnx_attr(n, name);
  if (a && a->n_ints <= SYM_MAX) {
    for (size_t k = 0; k < a->n_ints; k++) out[k] = a->ints[k];
    *count = (int)a->n_ints;
    return NULL;
  }
  if (!onnx_input(n, i)) return NULL;
  val *v;
  RX_RETURN_IF_ERROR(onnx_sym_input(I, n, i, &v));
  for (int k = 0; k < v->slen; k++) {
    if (v->s[k]->kind != RX_EXPR_CONST)
      return onnx_node_err(
          I, n,
          "input %zu ('%s', the attribute '%s' of older opsets) must be a constant: "
          "relaxc reads it at compile time",
          i, onnx_input(n, i), name);
    out[k] = v->s[k]->value;
  }
  *count = v->slen;
  return NULL;
}

/* Is op one whose result is a bool (a comparison or logic op)? */
bool onnx_sym_is_logic(const char *op) {
  return !strcmp(op, "Equal") || !strcmp(op, "Less") || !strcmp(op, "LessOrEqual") ||
         !strcmp(op, "Greater") || !strcmp(op, "GreaterOrEqual") || !strcmp(op, "And") ||
         !strcmp(op, "Or") || !strcmp(op, "Xor");
}

/* op of two symbolic values, simplified under the importer's facts (dims are sizes, so
 * Equal(dim, -1) is false); NULL for an op that has no symbolic form. */
const rx_expr *onnx_sym_binary(imp *I, const char *op, const rx_expr *a, const rx_expr *b) {
  rx_expr_ctx *c = I->m->ctx;
  const rx_expr *e = NULL;
  if (!strcmp(op, "Equal")) e = sym_expr_cmp(c, RX_EXPR_EQ, a, b);
  if (!strcmp(op, "Less")) e = sym_expr_cmp(c, RX_EXPR_LT, a, b);
  if (!strcmp(op, "LessOrEqual")) e = sym_expr_cmp(c, RX_EXPR_LE, a, b);
  if (!strcmp(op, "Greater")) e = sym_expr_cmp(c, RX_EXPR_LT, b, a);
  if (!strcmp(op, "GreaterOrEqual")) e = sym_expr_cmp(c, RX_EXPR_LE, b, a);
  if (!strcmp(op, "And")) e = sym_expr_and(c, a, b);
  if (!strcmp(op, "Or")) e = sym_expr_or(c, a, b);
  if (!strcmp(op, "Xor")) e = sym_expr_cmp(c, RX_EXPR_NE, a, b);
  if (e) return sym_analyzer_simplify(I->an, e);
  if (!strcmp(op, "Add")) return rx_sym_add(I->m, a, b);
  if (!strcmp(op, "Sub")) return rx_sym_sub(I->m, a, b);
  if (!strcmp(op, "Mul")) return rx_sym_mul(I->m, a, b);
  if (!strcmp(op, "Div")) return rx_sym_floordiv(I->m, a, b);
  if (!strcmp(op, "Max")) return rx_sym_max(I->m, a, b);
  if (!strcmp(op, "Min")) return rx_sym_min(I->m, a, b);
  return NULL;
}

double onnx_fconst_binary(const char *op, double a, double b) {
  if (!strcmp(op, "Add")) return a + b;
  if (!strcmp(op, "Sub")) return a - b;
  if (!strcmp(op, "Mul")) return a * b;
  if (!strcmp(op, "Div")) return a / b;
  return pow(a, b);
}

/* A constant value from a Constant node or an integer initializer. */
rx_status onnx_def_constant(imp *I, const Onnx__NodeProto *n, const char *name,
                            const Onnx__TensorProto *t) {
  if (onnx_is_int_type(t->data_type)) {
    int64_t vals[SYM_MAX];
    size_t c;
    bool ok = t->n_dims <= 1 && onnx_tensor_ints(t, I->file, name, I->base_dir, vals, SYM_MAX, &c);
    if (!ok)
      return n ? onnx_node_err(I, n, "integer constant over %d elements or unreadable", SYM_MAX)
               : base_status_make(RX_ERR_UNSUPPORTED,
                                  "%s: integer initializer '%s' over %d elements or unreadable",
                                  I->file, name, SYM_MAX);
    val *v = onnx_def(I, name);
    v->kind = V_SYM;
    v->sndim = (int)t->n_dims;
    v->slen = (int)c;
    onnx_dtype_of(t->data_type, &v->sdt);
    for (size_t k = 0; k < c; k++) v->s[k] = rx_sym_const(I->m, vals[k]);
    return NULL;
  }
  size_t c;
  float *f = onnx_tensor_floats(t, &c);
  if (f && c == 0 && t->n_dims == 1) { /* empty (opset 11 Resize's absent roi and scales) */
    free(f);
    val *v = onnx_def(I, name);
    v->kind = V_SYM;
    v->sndim = 1;
    return NULL;
  }
  if (!f || c != 1) {
    free(f);
    return onnx_node_err(I, n, "unsupported constant (data type %d)", (int)t->data_type);
  }
  val *v = onnx_def(I, name);
  v->kind = V_FCONST;
  v->f = f[0];
  v->sndim = (int)t->n_dims;                                        /* every dim 1 */
  if (!onnx_dtype_of(t->data_type, &v->sdt)) v->sdt = RX_DTYPE_F32; /* DOUBLE: as f32 */
  free(f);
  return NULL;
}

/* ---- helpers of the handlers ---- */

/* Two tensor operands of a broadcasting op whose dims are not provably compatible (say seq and
 * min(seq, 64), from slicing a table to the sequence length): a valid model has them equal at
 * run time, so the operand with the compound dim is match_cast to the other's dim, which the VM
 * checks when it runs (as Relax does to recover a shape). False when there is nothing to cast. */
bool onnx_cast_to_common(imp *I, val *x, val *y, rx_node **ax, rx_node **ay) {
  const rx_sinfo *sx = onnx_tsinfo(x), *sy = onnx_tsinfo(y);
  if (!sx || !sy || sx->kind != RX_SINFO_TENSOR || sy->kind != RX_SINFO_TENSOR || !sx->shape ||
      !sy->shape || sx->ndim > SYM_MAX || sy->ndim > SYM_MAX)
    return false;
  const rx_expr *dx[SYM_MAX], *dy[SYM_MAX];
  memcpy(dx, sx->shape, sizeof *dx * (size_t)sx->ndim);
  memcpy(dy, sy->shape, sizeof *dy * (size_t)sy->ndim);
  bool cx = false, cy = false;
  for (int k = 1; k <= sx->ndim && k <= sy->ndim; k++) {
    const rx_expr **a = &dx[sx->ndim - k], **b = &dy[sy->ndim - k];
    if (*a == *b || rx_expr_is_const(*a, 1) || rx_expr_is_const(*b, 1)) continue;
    if ((*b)->kind == RX_EXPR_VAR || ((*b)->kind == RX_EXPR_CONST && (*a)->kind != RX_EXPR_VAR)) {
      *a = *b;
      cx = true;
    } else {
      *b = *a;
      cy = true;
    }
  }
  rx_var *v;
  if (cx && !onnx_match_cast_to(I, x->var, sx->dtype, sx->ndim, dx, &v)) return false;
  if (cx) *ax = rx_arg_var(I->b, v);
  if (cy && !onnx_match_cast_to(I, y->var, sy->dtype, sy->ndim, dy, &v)) return false;
  if (cy) *ay = rx_arg_var(I->b, v);
  return cx || cy;
}

/* A list of symbolic values from the integer-list attribute `name` or else input i (opset >= 10
 * style); *count = -1 when neither is given. */
rx_status onnx_sym_list(imp *I, const Onnx__NodeProto *n, size_t i, const char *name,
                        const rx_expr **out, int *count) {
  *count = -1;
  const Onnx__AttributeProto *a = onnx_attr(n, name);
  if (a && a->n_ints) {
    if (a->n_ints > SYM_MAX) return onnx_node_err(I, n, "attribute '%s' too long", name);
    for (size_t k = 0; k < a->n_ints; k++) out[k] = rx_sym_const(I->m, a->ints[k]);
    *count = (int)a->n_ints;
    return NULL;
  }
  if (!onnx_input(n, i)) return NULL;
  val *v;
  RX_RETURN_IF_ERROR(onnx_sym_input(I, n, i, &v));
  for (int k = 0; k < v->slen; k++) out[k] = v->s[k];
  *count = v->slen;
  return NULL;
}

/* Is string attribute `name` equal to `want` ("" when absent)? */
bool onnx_attr_s_is(const Onnx__NodeProto *n, const char *name, const char *want) {
  const Onnx__AttributeProto *a = onnx_attr(n, name);
  size_t wl = strlen(want);
  if (!a || !a->has_s) return wl == 0;
  return a->s.len == wl && !memcmp(a->s.data, want, wl);
}

/* Constant ints of attribute `name` (exactly `want` of them) or the default value for each. */
rx_status onnx_ints_attr(imp *I, const Onnx__NodeProto *n, const char *name, int want, int64_t dflt,
                         int64_t *out) {
  const Onnx__AttributeProto *a = onnx_attr(n, name);
  if (!a || !a->n_ints) {
    for (int k = 0; k < want; k++) out[k] = dflt;
    return NULL;
  }
  if ((int)a->n_ints != want)
    return onnx_node_err(I, n, "attribute '%s' has %zu values, expected %d", name, a->n_ints, want);
  for (int k = 0; k < want; k++) out[k] = a->ints[k];
  return NULL;
}

/* ---- op(args) as a new binding (EX1 to EX3 and EXA in import_int.h) ---- */

/* op(args) as a new binding, returned as an argument for the next op (*last: its variable). */
rx_status onnx_ex(imp *I, const Onnx__NodeProto *n, rx_op_id op, int nargs, rx_node *a0,
                  rx_node *a1, rx_node *a2, rx_node **out, rx_var **last) {
  rx_node *a[3] = {a0, a1, a2};
  rx_var *v = NULL;
  RX_RETURN_IF_ERROR(onnx_emit(I, n, op, a, nargs, NULL, 0, &v));
  *out = rx_arg_var(I->b, v);
  if (last) *last = v;
  return NULL;
}

/* op(args) with attributes as a new binding, returned as an argument (*last: its variable). */
rx_status onnx_exa(imp *I, const Onnx__NodeProto *n, rx_op_id op, rx_node *const *a, int na,
                   const rx_attr *const *at, int nat, rx_node **out, rx_var **last) {
  rx_var *v = NULL;
  RX_RETURN_IF_ERROR(onnx_emit(I, n, op, a, na, at, nat, &v));
  *out = rx_arg_var(I->b, v);
  if (last) *last = v;
  return NULL;
}

/* Output `name` of the current function as a tensor variable (a shape value: its tensor, a
 * float constant: a tensor of ones' shape). */
rx_status onnx_out_tensor(imp *I, const Onnx__NodeProto *n, const char *name, rx_var **out) {
  *out = NULL;
  val *v = onnx_get(I, name);
  rx_var *t = v && v->kind == V_TENSOR ? v->var : NULL;
  if (v && v->kind == V_SYM) { /* a shape value: its i64 (or int, bool) tensor */
    RX_RETURN_IF_ERROR(onnx_sym_tensor(I, n, v, &t));
  } else if (v && v->kind == V_FCONST) { /* a float constant: a tensor of ones' shape */
    const rx_expr *one = rx_sym_const(I->m, 1), *dims[SYM_MAX];
    for (int k = 0; k < v->sndim && k < SYM_MAX; k++) dims[k] = one;
    rx_node *a[2] = {rx_arg_shape(I->b, dims, v->sndim < SYM_MAX ? v->sndim : SYM_MAX),
                     rx_arg_float(I->b, v->f)};
    const rx_attr *at = rx_attr_dtype(I->m, "dtype", v->sdt ? v->sdt : RX_DTYPE_F32);
    RX_RETURN_IF_ERROR(
        onnx_at_node(I, n, rx_emit_op(I->b, onnx_op_name(RX_OP_full), a, 2, &at, 1, NULL, &t)));
  }
  if (!t)
    return base_status_make(RX_ERR_UNSUPPORTED, "%s: graph output '%s' is not defined", I->file,
                            name ? name : "");
  *out = t;
  return NULL;
}

/* ---- the supported operators, listed once ----
 * {ONNX op type, handler, the relaxc op it maps to (an id of ops/ops.def, so a misspelt op does
 * not compile; ONNX_NO_OP where the handler composes several), the form (which variant a handler
 * of several op types computes: a value of ONNX_FORMS in import_int.h, so a misspelt form does
 * not compile either; ONNX_FORM_NONE where the handler computes one), first opset, last opset
 * (0: still current), note for the README} (struct onnx_op in import_int.h). The opset range is
 * where the handler's reading of the op is right: the first opset of the form it implements (e.g.
 * LayerNormalization and Gelu entered the default domain at opsets 17 and 20, Reshape takes its
 * shape as an input from 5, Cast's `to` is a dtype number from 6); where a later opset moved
 * attributes to inputs (Squeeze, Unsqueeze and Split at 13, the Reduce ops at 13 and 18, Slice at
 * 10, Clip at 11) the handler reads both forms. A node outside its op's range, or of an op not
 * listed, is reported with every other such node before any is imported. README.md's list is
 * `relaxc import
 * --list-ops`, checked by tests/lit/onnx/supported_ops.test. */
// clang-format off
static const onnx_op onnx_ops[] = {
    {"Abs", onnx_do_unary, RX_OP_abs, ONNX_FORM_NONE, 1, 0, NULL},
    {"Acos", onnx_do_unary, RX_OP_acos, ONNX_FORM_NONE, 7, 0, NULL},
    {"Acosh", onnx_do_formula, ONNX_NO_OP, ONNX_FORM_acosh, 9, 0, NULL},
    {"Add", onnx_do_binary, RX_OP_add, ONNX_FORM_NONE, 1, 0, NULL},
    {"And", onnx_do_binary, RX_OP_logical_and, ONNX_FORM_NONE, 1, 0, NULL},
    {"ArgMax", onnx_do_arg_extreme, RX_OP_argmax, ONNX_FORM_NONE, 1, 0, NULL},
    {"ArgMin", onnx_do_arg_extreme, RX_OP_argmin, ONNX_FORM_NONE, 1, 0, NULL},
    {"Asin", onnx_do_unary, RX_OP_asin, ONNX_FORM_NONE, 7, 0, NULL},
    {"Asinh", onnx_do_formula, ONNX_NO_OP, ONNX_FORM_asinh, 9, 0, NULL},
    {"Atan", onnx_do_unary, RX_OP_atan, ONNX_FORM_NONE, 7, 0, NULL},
    {"Atanh", onnx_do_formula, ONNX_NO_OP, ONNX_FORM_atanh, 9, 0, NULL},
    {"AveragePool", onnx_do_pool, ONNX_NO_OP, ONNX_FORM_NONE, 1, 0, "1-D, 2-D and 3-D; ceil_mode and SAME with a stride: constant spatial dims"},
    {"BatchNormalization", onnx_do_batch_norm, ONNX_NO_OP, ONNX_FORM_NONE, 1, 0, "inference; training_mode=1 with the running mean and variance"},
    {"BitShift", onnx_do_bitshift, ONNX_NO_OP, ONNX_FORM_NONE, 11, 0, "unsigned integers"},
    {"BlackmanWindow", onnx_do_window, ONNX_NO_OP, ONNX_FORM_blackman, 17, 0, NULL},
    {"CastLike", onnx_do_cast_like, ONNX_NO_OP, ONNX_FORM_NONE, 15, 0, NULL},
    {"Cast", onnx_do_cast, ONNX_NO_OP, ONNX_FORM_NONE, 6, 0, NULL},
    {"Celu", onnx_do_act, ONNX_NO_OP, ONNX_FORM_celu, 12, 0, NULL},
    {"Ceil", onnx_do_unary, RX_OP_ceil, ONNX_FORM_NONE, 1, 0, NULL},
    {"Clip", onnx_do_clip, ONNX_NO_OP, ONNX_FORM_NONE, 1, 0, NULL},
    {"Compress", onnx_do_compress, ONNX_NO_OP, ONNX_FORM_NONE, 11, 0, "the count bound at run time"},
    {"Concat", onnx_do_concat, ONNX_NO_OP, ONNX_FORM_NONE, 1, 0, NULL},
    {"Constant", onnx_do_constant, ONNX_NO_OP, ONNX_FORM_NONE, 1, 0, NULL},
    {"ConstantOfShape", onnx_do_reshape_expand, ONNX_NO_OP, ONNX_FORM_NONE, 9, 0, NULL},
    {"Conv", onnx_do_conv, ONNX_NO_OP, ONNX_FORM_NONE, 1, 0, "1-D, 2-D and 3-D; SAME with a stride: constant spatial dims"},
    {"ConvInteger", onnx_do_integer_op, ONNX_NO_OP, ONNX_FORM_conv, 10, 0, "as Conv; i32 accumulation"},
    {"ConvTranspose", onnx_do_conv_transpose, ONNX_NO_OP, ONNX_FORM_NONE, 1, 0, "1-D, 2-D and 3-D; output_shape and SAME: constant spatial dims"},
    {"Cos", onnx_do_unary, RX_OP_cos, ONNX_FORM_NONE, 7, 0, NULL},
    {"Cosh", onnx_do_formula, ONNX_NO_OP, ONNX_FORM_cosh, 9, 0, NULL},
    {"CumSum", onnx_do_cumsum, ONNX_NO_OP, ONNX_FORM_NONE, 11, 0, "axis: a constant, or a run-time value (a scan per axis)"},
    {"DepthToSpace", onnx_do_depth_space, ONNX_NO_OP, ONNX_FORM_depth_to_space, 1, 0, "DCR and CRD"},
    {"DequantizeLinear", onnx_do_dequantize, ONNX_NO_OP, ONNX_FORM_NONE, 10, 0, "per tensor and per axis; no block_size"},
    {"Det", onnx_do_det, ONNX_NO_OP, ONNX_FORM_NONE, 11, 0, "matrices of a constant size up to 16"},
    {"DFT", onnx_do_dft, ONNX_NO_OP, ONNX_FORM_NONE, 17, 0, "direct O(N) per output; dft_length a constant or bound at run time; no inverse with onesided"},
    {"Div", onnx_do_binary, RX_OP_divide, ONNX_FORM_NONE, 1, 0, NULL},
    {"Dropout", onnx_do_dropout, ONNX_NO_OP, ONNX_FORM_NONE, 1, 0, "inference; the mask all true"},
    {"DynamicQuantizeLinear", onnx_do_dynamic_quantize, ONNX_NO_OP, ONNX_FORM_NONE, 11, 0, NULL},
    {"Einsum", onnx_do_einsum, ONNX_NO_OP, ONNX_FORM_NONE, 12, 0, "1 to 3 operands"},
    {"Elu", onnx_do_elu, ONNX_NO_OP, ONNX_FORM_elu, 6, 0, NULL},
    {"Equal", onnx_do_binary, RX_OP_equal, ONNX_FORM_NONE, 1, 0, NULL},
    {"Erf", onnx_do_unary, RX_OP_erf, ONNX_FORM_NONE, 9, 0, NULL},
    {"Exp", onnx_do_unary, RX_OP_exp, ONNX_FORM_NONE, 1, 0, NULL},
    {"Expand", onnx_do_reshape_expand, ONNX_NO_OP, ONNX_FORM_NONE, 8, 0, NULL},
    {"EyeLike", onnx_do_eye_like, ONNX_NO_OP, ONNX_FORM_NONE, 9, 0, NULL},
    {"Flatten", onnx_do_flatten, ONNX_NO_OP, ONNX_FORM_NONE, 1, 0, NULL},
    {"Floor", onnx_do_unary, RX_OP_floor, ONNX_FORM_NONE, 1, 0, NULL},
    {"Gather", onnx_do_gather, ONNX_NO_OP, ONNX_FORM_NONE, 1, 0, NULL},
    {"GatherElements", onnx_do_gather_elements, ONNX_NO_OP, ONNX_FORM_NONE, 11, 0, NULL},
    {"GatherND", onnx_do_gather_nd, ONNX_NO_OP, ONNX_FORM_NONE, 12, 0, NULL},
    {"Gelu", onnx_do_gelu, ONNX_NO_OP, ONNX_FORM_NONE, 20, 0, NULL},
    {"Gemm", onnx_do_gemm, ONNX_NO_OP, ONNX_FORM_NONE, 1, 0, NULL},
    {"GlobalAveragePool", onnx_do_global_pool, ONNX_NO_OP, ONNX_FORM_NONE, 1, 0, NULL},
    {"GlobalMaxPool", onnx_do_global_pool, ONNX_NO_OP, ONNX_FORM_NONE, 1, 0, NULL},
    {"Greater", onnx_do_binary, RX_OP_greater, ONNX_FORM_NONE, 1, 0, NULL},
    {"GreaterOrEqual", onnx_do_binary, RX_OP_greater_equal, ONNX_FORM_NONE, 12, 0, NULL},
    {"GridSample", onnx_do_grid_sample, ONNX_NO_OP, ONNX_FORM_NONE, 16, 0, "4-D: nearest, bilinear, bicubic; zeros, border, reflection"},
    {"GRU", onnx_do_rnn, ONNX_NO_OP, ONNX_FORM_NONE, 7, 0, "activations: the defaults"},
    {"HammingWindow", onnx_do_window, ONNX_NO_OP, ONNX_FORM_hamming, 17, 0, NULL},
    {"HannWindow", onnx_do_window, ONNX_NO_OP, ONNX_FORM_hann, 17, 0, NULL},
    {"Hardmax", onnx_do_hardmax, ONNX_NO_OP, ONNX_FORM_NONE, 1, 0, NULL},
    {"HardSigmoid", onnx_do_act, ONNX_NO_OP, ONNX_FORM_hard_sigmoid, 6, 0, NULL},
    {"HardSwish", onnx_do_act, ONNX_NO_OP, ONNX_FORM_hard_swish, 14, 0, NULL},
    {"Identity", onnx_do_identity, ONNX_NO_OP, ONNX_FORM_NONE, 1, 0, NULL},
    {"If", onnx_do_if, ONNX_NO_OP, ONNX_FORM_NONE, 1, 0, "tensor outputs; branches of different shapes: dims bound at run time"},
    {"InstanceNormalization", onnx_do_instance_norm, ONNX_NO_OP, ONNX_FORM_instance_norm, 6, 0, NULL},
    {"IsInf", onnx_do_select_act, ONNX_NO_OP, ONNX_FORM_is_inf, 10, 0, NULL},
    {"IsNaN", onnx_do_act, ONNX_NO_OP, ONNX_FORM_is_nan, 9, 0, NULL},
    {"LayerNormalization", onnx_do_layer_norm, ONNX_NO_OP, ONNX_FORM_NONE, 17, 0, NULL},
    {"LeakyRelu", onnx_do_leaky_relu, ONNX_NO_OP, ONNX_FORM_NONE, 1, 0, NULL},
    {"Less", onnx_do_binary, RX_OP_less, ONNX_FORM_NONE, 1, 0, NULL},
    {"LessOrEqual", onnx_do_binary, RX_OP_less_equal, ONNX_FORM_NONE, 12, 0, NULL},
    {"Log", onnx_do_unary, RX_OP_log, ONNX_FORM_NONE, 1, 0, NULL},
    {"LogSoftmax", onnx_do_softmax, ONNX_NO_OP, ONNX_FORM_NONE, 1, 0, NULL},
    {"Loop", onnx_do_loop, ONNX_NO_OP, ONNX_FORM_NONE, 1, 0, "tensor values; any trip count (a tail-recursive graph function)"},
    {"LpPool", onnx_do_pool, ONNX_NO_OP, ONNX_FORM_NONE, 2, 0, "1-D, 2-D and 3-D, as AveragePool"},
    {"LRN", onnx_do_lrn, ONNX_NO_OP, ONNX_FORM_NONE, 1, 0, NULL},
    {"LSTM", onnx_do_rnn, ONNX_NO_OP, ONNX_FORM_NONE, 7, 0, "activations: the defaults; no input_forget"},
    {"MatMul", onnx_do_matmul, ONNX_NO_OP, ONNX_FORM_NONE, 1, 0, NULL},
    {"MatMulInteger", onnx_do_integer_op, ONNX_NO_OP, ONNX_FORM_matmul, 10, 0, "i32 accumulation"},
    {"Max", onnx_do_variadic, RX_OP_maximum, ONNX_FORM_NONE, 1, 0, NULL},
    {"MaxPool", onnx_do_pool, ONNX_NO_OP, ONNX_FORM_NONE, 1, 0, "1-D, 2-D and 3-D; ceil_mode and SAME with a stride: constant spatial dims; Indices: 2-D"},
    {"MaxUnpool", onnx_do_max_unpool, ONNX_NO_OP, ONNX_FORM_NONE, 9, 0, NULL},
    {"Mean", onnx_do_variadic, RX_OP_mean, ONNX_FORM_NONE, 1, 0, NULL},
    {"MeanVarianceNormalization", onnx_do_instance_norm, ONNX_NO_OP, ONNX_FORM_mvn, 9, 0, NULL},
    {"MelWeightMatrix", onnx_do_mel_weight_matrix, ONNX_NO_OP, ONNX_FORM_NONE, 17, 0, "f32 math"},
    {"Min", onnx_do_variadic, RX_OP_minimum, ONNX_FORM_NONE, 1, 0, NULL},
    {"Mish", onnx_do_act, ONNX_NO_OP, ONNX_FORM_mish, 18, 0, NULL},
    {"Mod", onnx_do_mod, ONNX_NO_OP, ONNX_FORM_NONE, 10, 0, NULL},
    {"Mul", onnx_do_binary, RX_OP_multiply, ONNX_FORM_NONE, 1, 0, NULL},
    {"Neg", onnx_do_unary, RX_OP_neg, ONNX_FORM_NONE, 1, 0, NULL},
    {"NegativeLogLikelihoodLoss", onnx_do_nll_loss, ONNX_NO_OP, ONNX_FORM_nll, 12, 0, NULL},
    {"NonMaxSuppression", onnx_do_nms, RX_OP_non_max_suppression, ONNX_FORM_NONE, 10, 0, "one serial thread; the selected count bound at run time"},
    {"NonZero", onnx_do_nonzero, ONNX_NO_OP, ONNX_FORM_NONE, 9, 0, "the count bound at run time"},
    {"Not", onnx_do_unary, RX_OP_not_, ONNX_FORM_NONE, 1, 0, NULL},
    {"OneHot", onnx_do_one_hot, ONNX_NO_OP, ONNX_FORM_NONE, 9, 0, NULL},
    {"Or", onnx_do_binary, RX_OP_logical_or, ONNX_FORM_NONE, 1, 0, NULL},
    {"Pad", onnx_do_pad, ONNX_NO_OP, ONNX_FORM_NONE, 2, 0, "constant, edge, reflect, wrap"},
    {"Pow", onnx_do_pow, RX_OP_power, ONNX_FORM_NONE, 1, 0, "mixed dtypes; integer powers exact"},
    {"PRelu", onnx_do_prelu, ONNX_NO_OP, ONNX_FORM_NONE, 7, 0, NULL},
    {"QLinearConv", onnx_do_integer_op, ONNX_NO_OP, ONNX_FORM_qconv, 10, 0, "as Conv; i32 accumulation"},
    {"QLinearMatMul", onnx_do_integer_op, ONNX_NO_OP, ONNX_FORM_qmatmul, 10, 0, "i32 accumulation"},
    {"QuantizeLinear", onnx_do_quantize, ONNX_NO_OP, ONNX_FORM_NONE, 10, 0, "per tensor and per axis, to u8, i8, u16, i16; no block_size"},
    {"Range", onnx_do_range_any, ONNX_NO_OP, ONNX_FORM_NONE, 11, 0, NULL},
    {"Reciprocal", onnx_do_reciprocal, ONNX_NO_OP, ONNX_FORM_NONE, 1, 0, NULL},
    {"ReduceL1", onnx_do_reduce_by, ONNX_NO_OP, ONNX_FORM_l1, 1, 0, NULL},
    {"ReduceL2", onnx_do_reduce_by, ONNX_NO_OP, ONNX_FORM_l2, 1, 0, NULL},
    {"ReduceLogSum", onnx_do_reduce_by, ONNX_NO_OP, ONNX_FORM_log_sum, 1, 0, NULL},
    {"ReduceLogSumExp", onnx_do_reduce_by, ONNX_NO_OP, ONNX_FORM_log_sum_exp, 1, 0, NULL},
    {"ReduceMax", onnx_do_reduce_any, RX_OP_max, ONNX_FORM_NONE, 1, 0, NULL},
    {"ReduceMean", onnx_do_reduce_any, RX_OP_mean, ONNX_FORM_NONE, 1, 0, NULL},
    {"ReduceMin", onnx_do_reduce_any, RX_OP_min, ONNX_FORM_NONE, 1, 0, NULL},
    {"ReduceProd", onnx_do_reduce_any, RX_OP_prod, ONNX_FORM_NONE, 1, 0, NULL},
    {"ReduceSum", onnx_do_reduce_any, RX_OP_sum, ONNX_FORM_NONE, 1, 0, NULL},
    {"ReduceSumSquare", onnx_do_reduce_by, ONNX_NO_OP, ONNX_FORM_sum_square, 1, 0, NULL},
    {"Relu", onnx_do_unary, RX_OP_relu, ONNX_FORM_NONE, 1, 0, NULL},
    {"Reshape", onnx_do_reshape, ONNX_NO_OP, ONNX_FORM_NONE, 5, 0, NULL},
    {"Resize", onnx_do_resize, ONNX_NO_OP, ONNX_FORM_NONE, 11, 0, "nearest, linear, cubic; scales and sizes constant or at run time; no antialias, axes or keep_aspect_ratio_policy"},
    {"ReverseSequence", onnx_do_reverse_sequence, ONNX_NO_OP, ONNX_FORM_NONE, 10, 0, NULL},
    {"RNN", onnx_do_rnn, ONNX_NO_OP, ONNX_FORM_NONE, 7, 0, "activations: the defaults"},
    {"RoiAlign", onnx_do_roi_align, RX_OP_roi_align, ONNX_FORM_NONE, 10, 0, NULL},
    {"Round", onnx_do_select_act, ONNX_NO_OP, ONNX_FORM_round, 11, 0, NULL},
    {"Scan", onnx_do_scan, ONNX_NO_OP, ONNX_FORM_NONE, 8, 0, "axis 0; opset 8: a batch of one, no sequence_lens; any length"},
    {"Scatter", onnx_do_scatter, ONNX_NO_OP, ONNX_FORM_NONE, 9, 10, "deprecated alias of ScatterElements"},
    {"ScatterElements", onnx_do_scatter, ONNX_NO_OP, ONNX_FORM_NONE, 11, 0, "reduction none, add, mul, min, max; duplicates in order"},
    {"ScatterND", onnx_do_scatter_nd, ONNX_NO_OP, ONNX_FORM_NONE, 11, 0, "reduction none, add, mul, min, max; the last dim of indices a constant"},
    {"Selu", onnx_do_elu, ONNX_NO_OP, ONNX_FORM_selu, 6, 0, NULL},
    {"Shape", onnx_do_shape, ONNX_NO_OP, ONNX_FORM_NONE, 1, 0, NULL},
    {"Shrink", onnx_do_select_act, ONNX_NO_OP, ONNX_FORM_shrink, 9, 0, NULL},
    {"Sigmoid", onnx_do_unary, RX_OP_sigmoid, ONNX_FORM_NONE, 1, 0, NULL},
    {"Sign", onnx_do_formula, ONNX_NO_OP, ONNX_FORM_sign, 9, 0, NULL},
    {"Sin", onnx_do_unary, RX_OP_sin, ONNX_FORM_NONE, 7, 0, NULL},
    {"Sinh", onnx_do_formula, ONNX_NO_OP, ONNX_FORM_sinh, 9, 0, NULL},
    {"Size", onnx_do_size, ONNX_NO_OP, ONNX_FORM_NONE, 1, 0, NULL},
    {"Slice", onnx_do_slice_any, ONNX_NO_OP, ONNX_FORM_NONE, 1, 0, NULL},
    {"Softmax", onnx_do_softmax, ONNX_NO_OP, ONNX_FORM_NONE, 1, 0, NULL},
    {"SoftmaxCrossEntropyLoss", onnx_do_nll_loss, ONNX_NO_OP, ONNX_FORM_sce, 12, 0, NULL},
    {"Softplus", onnx_do_act, ONNX_NO_OP, ONNX_FORM_softplus, 1, 0, NULL},
    {"Softsign", onnx_do_act, ONNX_NO_OP, ONNX_FORM_softsign, 1, 0, NULL},
    {"SpaceToDepth", onnx_do_depth_space, ONNX_NO_OP, ONNX_FORM_space_to_depth, 1, 0, NULL},
    {"Split", onnx_do_split, ONNX_NO_OP, ONNX_FORM_NONE, 1, 0, NULL},
    {"Sqrt", onnx_do_unary, RX_OP_sqrt, ONNX_FORM_NONE, 1, 0, NULL},
    {"Squeeze", onnx_do_squeeze_any, ONNX_NO_OP, ONNX_FORM_NONE, 1, 0, NULL},
    {"STFT", onnx_do_stft, ONNX_NO_OP, ONNX_FORM_NONE, 17, 0, "frame_step and frame_length constants or bound at run time"},
    {"Sub", onnx_do_binary, RX_OP_subtract, ONNX_FORM_NONE, 1, 0, NULL},
    {"Sum", onnx_do_variadic, RX_OP_add, ONNX_FORM_NONE, 1, 0, NULL},
    {"Tan", onnx_do_formula, ONNX_NO_OP, ONNX_FORM_tan, 7, 0, NULL},
    {"Tanh", onnx_do_unary, RX_OP_tanh, ONNX_FORM_NONE, 1, 0, NULL},
    {"TfIdfVectorizer", onnx_do_tfidf, RX_OP_tfidf, ONNX_FORM_NONE, 9, 0, "integer pools (no strings)"},
    {"ThresholdedRelu", onnx_do_act, ONNX_NO_OP, ONNX_FORM_thresholded_relu, 10, 0, NULL},
    {"Tile", onnx_do_tile, ONNX_NO_OP, ONNX_FORM_NONE, 6, 0, NULL},
    {"TopK", onnx_do_topk, RX_OP_topk, ONNX_FORM_NONE, 1, 0, "sorted; K a constant or bound at run time"},
    {"Transpose", onnx_do_transpose, ONNX_NO_OP, ONNX_FORM_NONE, 1, 0, NULL},
    {"Trilu", onnx_do_trilu, ONNX_NO_OP, ONNX_FORM_NONE, 14, 0, NULL},
    {"Unique", onnx_do_unique, ONNX_NO_OP, ONNX_FORM_NONE, 11, 0, "the count bound at run time; O(n^2) in the number of elements or slices"},
    {"Unsqueeze", onnx_do_squeeze_any, ONNX_NO_OP, ONNX_FORM_NONE, 1, 0, NULL},
    {"Upsample", onnx_do_resize, ONNX_NO_OP, ONNX_FORM_NONE, 9, 9, "nearest, linear"},
    {"Where", onnx_do_where, ONNX_NO_OP, ONNX_FORM_NONE, 9, 0, NULL},
    {"Xor", onnx_do_binary, RX_OP_not_equal, ONNX_FORM_NONE, 7, 0, "bool"},
};

// clang-format on

const char *onnx_form_name(onnx_form f) {
  static const char *const names[] = {[ONNX_FORM_NONE] = "none",
#define X(f) [ONNX_FORM_##f] = #f,
                                      ONNX_FORMS(X)
#undef X
  };
  assert(f >= 0 && f < ONNX_FORM_COUNT);
  return names[f];
}

/* The table's entry for op, or NULL. */
const onnx_op *onnx_find_op(const char *op) {
  for (size_t i = 0; op && i < RX_ARRAY_LEN(onnx_ops); i++)
    if (!strcmp(op, onnx_ops[i].type)) return &onnx_ops[i];
  return NULL;
}

static bool in_range(const onnx_op *o, int64_t opset) {
  return opset >= o->first && (!o->last || opset <= o->last);
}

void onnx_supported_ops(rx_strbuf *out) {
  for (size_t i = 0; i < RX_ARRAY_LEN(onnx_ops); i++) {
    const onnx_op *o = &onnx_ops[i];
    base_strbuf_printf(out, "| %s | %d%s", o->type, o->first, o->last ? "" : "+");
    if (o->last) base_strbuf_printf(out, " to %d", o->last);
    base_strbuf_printf(out, " |%s%s |\n", o->note ? " " : "", o->note ? o->note : "");
  }
}

rx_status onnx_do_node(imp *I, const Onnx__NodeProto *n) {
  if (n->n_output < 1) return onnx_node_err(I, n, "node has no outputs");
  if (!n->op_type || !n->op_type[0]) return onnx_node_err(I, n, "node has no op_type");
  const onnx_op *o = onnx_find_op(n->op_type);
  if (!o) return onnx_node_err(I, n, "not supported");
  return o->handler(I, n, o);
}

static rx_status build(imp *I, const Onnx__ModelProto *mp) {
  const Onnx__GraphProto *g = mp->graph;
  /* every unsupported node, all in one message */
  rx_strbuf un = {0};
  int nun = 0;
  for (size_t i = 0; i < g->n_node; i++) {
    const Onnx__NodeProto *n = g->node[i];
    bool foreign = n->domain && n->domain[0] && strcmp(n->domain, "ai.onnx");
    const onnx_op *o = foreign ? NULL : onnx_find_op(n->op_type);
    if (!o || !in_range(o, I->opset)) {
      base_strbuf_printf(&un, "\n  node %zu '%s': %s%s%s (opset %lld", i, n->name ? n->name : "",
                         foreign ? n->domain : "", foreign ? "." : "",
                         n->op_type ? n->op_type : "?", (long long)I->opset);
      if (o && o->last)
        base_strbuf_printf(&un, "; relaxc reads %s at opsets %d to %d", o->type, o->first, o->last);
      else if (o)
        base_strbuf_printf(&un, "; relaxc reads %s from opset %d", o->type, o->first);
      base_strbuf_putc(&un, ')');
      nun++;
    }
  }
  if (nun) {
    char *list = base_strbuf_take(&un);
    rx_status s = base_status_make(RX_ERR_UNSUPPORTED,
                                   "%s: %d unsupported ONNX node%s (the supported operators are "
                                   "listed in README.md, 'Importing a PyTorch model (ONNX)'):%s",
                                   I->file, nun, nun == 1 ? "" : "s", list);
    free(list);
    return s;
  }
  base_strbuf_free(&un);

  for (size_t i = 0; i < g->n_input; i++)
    if (!is_initializer(g, g->input[i]->name)) RX_RETURN_IF_ERROR(add_input(I, g->input[i]));
  wctx w = {I, NULL};
  onnx_each_weight(g, add_weight_param, &w);
  RX_RETURN_IF_ERROR(w.s);
  for (size_t i = 0; i < g->n_initializer; i++)
    if (!onnx_is_weight(g->initializer[i], false))
      RX_RETURN_IF_ERROR(onnx_def_constant(I, NULL, g->initializer[i]->name, g->initializer[i]));

  RX_RETURN_IF_ERROR(rx_builder_begin_dataflow(I->b));
  /* every node that cannot be imported, in one message; the nodes that use its outputs are
   * skipped rather than reported again */
  rx_strbuf errs = {0};
  int nerr = 0;
  rx_status first = NULL;
  for (size_t i = 0; i < g->n_node; i++) {
    const Onnx__NodeProto *n = g->node[i];
    bool skip = false;
    for (size_t k = 0; k < n->n_input && !skip; k++) {
      val *v = onnx_input(n, k) ? onnx_get(I, onnx_input(n, k)) : NULL;
      skip = v && v->kind == V_FAILED;
    }
    rx_status s = skip ? NULL : onnx_do_node(I, n);
    if (s && rx_status_code_of(s) != RX_ERR_UNSUPPORTED) {
      base_strbuf_free(&errs);
      rx_status_free(first);
      return s;
    }
    if (s) {
      const char *msg = rx_status_message(s);
      size_t fl = strlen(I->file);
      bool prefixed = !strncmp(msg, I->file, fl) && !strncmp(msg + fl, ": ", 2);
      base_strbuf_printf(&errs, "\n  %s", prefixed ? msg + fl + 2 : msg);
      nerr++;
      if (first)
        rx_status_free(s);
      else
        first = s;
    }
    if (s || skip)
      for (size_t k = 0; k < n->n_output; k++)
        if (n->output[k] && n->output[k][0]) onnx_def(I, n->output[k])->kind = V_FAILED;
  }
  if (nerr > 1) {
    char *list = base_strbuf_take(&errs);
    rx_status_free(first);
    first = base_status_make(RX_ERR_UNSUPPORTED, "%s: %d nodes cannot be imported:%s", I->file,
                             nerr, list);
    free(list);
  }
  base_strbuf_free(&errs); /* emptied by the take above when there were several */
  if (nerr) return first;

  if (g->n_output == 0)
    return base_status_make(RX_ERR_INVALID, "%s: the graph has no outputs", I->file);
  rx_node *outs[16];
  if (g->n_output > 16) return base_status_make(RX_ERR_UNSUPPORTED, "%s: over 16 outputs", I->file);
  for (size_t i = 0; i < g->n_output; i++) {
    rx_var *t;
    RX_RETURN_IF_ERROR(onnx_out_tensor(I, NULL, g->output[i]->name, &t));
    outs[i] = rx_arg_var(I->b, t);
  }
  rx_node *result = outs[0];
  if (g->n_output > 1) {
    rx_var *t;
    RX_RETURN_IF_ERROR(rx_emit_tuple(I->b, outs, (int)g->n_output, NULL, &t));
    result = rx_arg_var(I->b, t);
  }
  RX_RETURN_IF_ERROR(rx_builder_end_dataflow(I->b));
  rx_builder *b = I->b;
  I->b = NULL;
  return rx_builder_finish(b, result, NULL);
}

rx_status onnx_import(rx_module *m, const void *bytes, size_t len, const char *name,
                      const char *base_dir, rx_diag *diag) {
  (void)diag;
  if (!name) name = "<onnx>";
  Onnx__ModelProto *mp;
  RX_RETURN_IF_ERROR(onnx_unpack(bytes, len, name, &mp));
  imp I = {.m = m, .file = name, .base_dir = base_dir, .opset = model_opset(mp)};
  I.b = rx_builder_new(m, "main");
  I.an = sym_analyzer_new(m->ctx);
  rx_status s = build(&I, mp);
  if (I.b) rx_builder_free(I.b);
  sym_analyzer_free(I.an);
  free(I.vals);
  onnx__model_proto__free_unpacked(mp, NULL);
  return s;
}
