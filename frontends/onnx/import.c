/* frontends/onnx/import.c: ONNX ModelProto -> one relaxc graph function `main` (see
 * onnx_import.h). The protobuf is decoded by the protobuf-c code generated at build time from
 * libonnx-dev's onnx.proto (frontends/onnx/onnx.cmake); the graph is built with the builder API,
 * so every binding's struct info is deduced as it is emitted and shape computations can read it.
 *
 * Every ONNX value is one of three kinds: a tensor (a graph variable), a symbolic integer value
 * (a scalar or a short vector of symbolic expressions: the results of Shape, Size, Gather on a
 * shape, Concat of shapes, integer constants, ConstantOfShape of a short integer or bool
 * vector, and arithmetic, comparisons, Where and Cast of these, simplified under the fact that
 * every dim is a size), or a float scalar constant (passed to ops as a weakly typed literal).
 * Reshape and Expand take symbolic values as shape literals; where an operator uses one as data,
 * or it is a graph output, it becomes a tensor computed when the program runs (sym_tensor). A
 * shape that is itself computed at run time (a graph input, a Cast of a reduction) is bound to
 * fresh dims by tensor_to_shape and match_cast (runtime_sym). */
#include "onnx_import.h"

#include "../../ir/ir.h"

#include "import_rnn.h"
#include "proto.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* longest symbolic integer vector (a shape of rank up to 16): the integer tensors of at most
 * this many elements are folded, not weights (proto.h) */
#define SYM_MAX ONNX_FOLD_MAX

/* V_FAILED: an output of a node that could not be imported (its users are skipped) */
typedef enum vkind { V_TENSOR, V_SYM, V_FCONST, V_FAILED } vkind;

typedef struct val {
  const char *name; /* the ONNX value name (owned by the unpacked model) */
  vkind kind;
  rx_var *var;               /* V_TENSOR */
  bool rt;                   /* V_TENSOR: s holds its values, bound at run time (runtime_sym) */
  int sndim;                 /* V_SYM (and rt): 0 scalar, 1 vector */
  int slen;                  /* V_SYM (and rt): number of values (1 for a scalar) */
  const rx_expr *s[SYM_MAX]; /* V_SYM (and rt) */
  double f;                  /* V_FCONST */
  rx_dtype sdt;              /* V_SYM, V_FCONST: the dtype as a tensor (0: i64 / f32) */
  rx_var *tvar;              /* V_SYM: its tensor once an op used it as data (sym_tensor) */
  int nfl;                   /* V_TENSOR: a 1-D f32 weight of at most SYM_MAX elements, read at */
  float fl[SYM_MAX];         /* import (nfl of them; 0: not read): Resize's constant scales */
} val;

typedef struct imp {
  rx_module *m;
  rx_builder *b;
  const char *file;
  const char *base_dir; /* external data files are relative to it (NULL: the current dir) */
  int64_t opset;
  val *vals;
  int nvals, cap;
  int fresh;       /* next fresh dim name d<N> */
  int ncf;         /* next number of a control-flow driver (cf_name): a nested one is named
                      while its outer one's functions are not in the module yet */
  rx_analyzer *an; /* facts: every dim variable is a size (>= 0); simplifies shape values */
} imp;

/* ---- helpers ---- */

static rx_status node_err(imp *I, const Onnx__NodeProto *n, const char *fmt, ...) RX_PRINTF(3, 4);
static rx_status node_err(imp *I, const Onnx__NodeProto *n, const char *fmt, ...) {
  rx_strbuf sb = {0};
  rx_strbuf_printf(&sb, "%s: node '%s' (%s, opset %lld): ", I->file, n->name ? n->name : "",
                   n->op_type ? n->op_type : "no op type", (long long)I->opset);
  va_list ap;
  va_start(ap, fmt);
  rx_strbuf_vprintf(&sb, fmt, ap);
  va_end(ap);
  char *msg = rx_strbuf_take(&sb);
  rx_status s = rx_status_make(RX_ERR_UNSUPPORTED, "%s", msg);
  free(msg);
  return s;
}

static val *get(imp *I, const char *name) {
  if (!name) return NULL; /* an absent (optional) name field of a corrupt file */
  for (int i = I->nvals - 1; i >= 0; i--)
    if (I->vals[i].name && !strcmp(I->vals[i].name, name)) return &I->vals[i];
  return NULL;
}

static val *def(imp *I, const char *name) {
  if (I->nvals == I->cap) {
    I->cap = I->cap ? 2 * I->cap : 64;
    val *nv = rx_calloc((size_t)I->cap, sizeof *nv);
    if (I->nvals) memcpy(nv, I->vals, sizeof *nv * (size_t)I->nvals);
    free(I->vals);
    I->vals = nv;
  }
  val *v = &I->vals[I->nvals++];
  memset(v, 0, sizeof *v);
  v->name = name;
  return v;
}

static const char *input(const Onnx__NodeProto *n, size_t i) {
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
    *s = rx_status_make(RX_ERR_UNSUPPORTED, "%s: tensor '%s': unsupported data type %d or rank",
                        I->file, t->name ? t->name : "", (int)t->data_type);
    return NULL;
  }
  const rx_expr *dims[8];
  for (size_t i = 0; i < t->n_dims; i++) {
    if (t->dims[i] < 0) {
      *s = rx_status_make(RX_ERR_INVALID, "%s: initializer '%s': dim %zu is negative (%lld)",
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
  val *v = def(w->I, name);
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
    return rx_status_make(RX_ERR_INVALID, "%s: a graph input has no name", I->file);
  const Onnx__TypeProto *tp = vi->type;
  if (!tp || tp->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE || !tp->tensor_type)
    return rx_status_make(RX_ERR_UNSUPPORTED, "%s: graph input '%s' is not a tensor", I->file,
                          vi->name);
  const Onnx__TypeProto__Tensor *tt = tp->tensor_type;
  rx_dtype dt = RX_DTYPE_UNKNOWN;
  char tname[32];
  if (!onnx_dtype_of(tt->elem_type, &dt))
    return rx_status_make(RX_ERR_UNSUPPORTED,
                          "%s: graph input '%s': element type %s has no relaxc dtype (relaxc has "
                          "f32, f64, f16, bf16, i64, i32, i16, i8, u64, u32, u16, u8 and bool)",
                          I->file, vi->name, onnx_type_name(tt->elem_type, tname, sizeof tname));
  const rx_sinfo *si;
  if (!tt->shape) {
    si = rx_sinfo_tensor(I->m, dt, -1, NULL);
  } else {
    const rx_expr *dims[16];
    if (tt->shape->n_dim > 16)
      return rx_status_make(RX_ERR_UNSUPPORTED, "%s: graph input '%s': rank over 16", I->file,
                            vi->name);
    for (size_t i = 0; i < tt->shape->n_dim; i++) {
      const Onnx__TensorShapeProto__Dimension *d = tt->shape->dim[i];
      if (d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE) {
        if (d->dim_value < 0)
          return rx_status_make(RX_ERR_INVALID,
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
      rx_analyzer_assume(I->an, rx_sym_le(I->m, rx_sym_const(I->m, 0), dims[i]));
    }
    si = rx_sinfo_tensor(I->m, dt, (int)tt->shape->n_dim, dims);
  }
  char *id = onnx_ident(vi->name);
  val *v = def(I, vi->name);
  v->kind = V_TENSOR;
  rx_status s = rx_builder_param(I->b, id, si, &v->var);
  if (!s && strcmp(v->var->name, vi->name)) /* the graph's own name in the signature */
    v->var->source_name = rx_module_intern(I->m, vi->name, strlen(vi->name));
  free(id);
  return s;
}

static rx_status sym_tensor(imp *I, const Onnx__NodeProto *n, val *v, rx_var **out);
static rx_status do_node(imp *I, const Onnx__NodeProto *n);

/* A value as an op argument: an integer scalar shape value a weakly typed prim, a vector or
 * bool one its tensor (sym_tensor). */
static rx_status arg(imp *I, const Onnx__NodeProto *n, const char *name, rx_node **out) {
  *out = NULL;
  val *v = name ? get(I, name) : NULL;
  if (!v) return node_err(I, n, "input '%s' is not defined", name ? name : "(missing)");
  if (v->kind == V_TENSOR)
    *out = rx_arg_var(I->b, v->var);
  else if (v->kind == V_FCONST)
    *out = rx_arg_float(I->b, v->f);
  else if (v->kind == V_SYM && v->sndim == 0 && v->sdt != RX_DTYPE_BOOL)
    *out = rx_arg_prim(I->b, RX_DTYPE_I64, v->s[0]);
  else if (v->kind == V_SYM) {
    rx_var *t;
    RX_RETURN_IF_ERROR(sym_tensor(I, n, v, &t));
    *out = rx_arg_var(I->b, t);
  } else
    return node_err(I, n, "input '%s' failed to import", name);
  return NULL;
}

/* A builder error (s, consumed) as an error of node n; NULL stays NULL. */
static rx_status at_node(imp *I, const Onnx__NodeProto *n, rx_status s) {
  if (!s || !n) return s; /* no node: a graph output's conversion (build) */
  rx_status e = node_err(I, n, "%s", rx_status_message(s));
  rx_status_free(s);
  return e;
}

static rx_status emit(imp *I, const Onnx__NodeProto *n, const char *op, rx_node *const *args,
                      int nargs, const rx_attr *const *attrs, int nattrs, rx_var **out) {
  return at_node(I, n, rx_emit_op(I->b, op, args, nargs, attrs, nattrs, NULL, out));
}

/* A symbolic value as a tensor of its dtype, computed when the program runs (a shape value an
 * operator uses as data, or a graph output): full([], s) for a scalar; for a vector, full([1],
 * s_k) per value joined by concat (fusion makes them one kernel). Cached on the value, so every
 * use shares one tensor. */
static rx_status sym_tensor(imp *I, const Onnx__NodeProto *n, val *v, rx_var **out) {
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
    RX_RETURN_IF_ERROR(at_node(I, n, rx_emit_op(I->b, "full", a, 2, &at, 1, NULL, &r)));
  } else {
    for (int k = 0; k < v->slen; k++) {
      a[0] = rx_arg_shape(I->b, &one, 1);
      a[1] = rx_arg_prim(I->b, RX_DTYPE_I64, v->s[k]);
      RX_RETURN_IF_ERROR(at_node(I, n, rx_emit_op(I->b, "full", a, 2, &at, 1, NULL, &r)));
      parts[k] = rx_arg_var(I->b, r);
    }
    if (v->slen > 1) {
      rx_var *tup;
      RX_RETURN_IF_ERROR(at_node(I, n, rx_emit_tuple(I->b, parts, v->slen, NULL, &tup)));
      a[0] = rx_arg_var(I->b, tup);
      const rx_attr *ax = rx_attr_int(I->m, "axis", 0);
      RX_RETURN_IF_ERROR(at_node(I, n, rx_emit_op(I->b, "concat", a, 1, &ax, 1, NULL, &r)));
    }
  }
  v->tvar = r;
  *out = r;
  return NULL;
}

static val *def_named(imp *I, const char *name, rx_var *var) {
  val *v = def(I, name);
  v->kind = V_TENSOR;
  v->var = var;
  return v;
}

static val *def_tensor(imp *I, const Onnx__NodeProto *n, rx_var *var) {
  return def_named(I, n->output[0], var);
}

/* Output 0 of n is the value src under a new name (Identity, a Cast of a constant, ...). */
static void def_alias(imp *I, const Onnx__NodeProto *n, const val *src) {
  val copy = *src;
  copy.name = n->output[0];
  *def(I, n->output[0]) = copy; /* def may move the values: src is copied first */
}

static const rx_sinfo *tsinfo(val *v) {
  return v && v->kind == V_TENSOR ? rx_var_sinfo(v->var) : NULL;
}

static int rank_of(val *v) {
  const rx_sinfo *si = tsinfo(v);
  return si && si->kind == RX_SINFO_TENSOR ? si->ndim : -1;
}

/* match_cast(v, dtype[dims]); false on failure. */
static bool match_cast_to(imp *I, rx_var *v, rx_dtype dtype, int ndim, const rx_expr *const *dims,
                          rx_var **out) {
  const rx_sinfo *t = rx_sinfo_tensor(I->m, dtype, ndim, dims);
  rx_status s = rx_emit_match_cast(I->b, rx_arg_var(I->b, v), t, NULL, out);
  if (s) rx_status_free(s);
  return !s;
}

/* The length of a runtime integer tensor usable as shape values (a scalar: 1, a 1-D tensor of
 * constant length up to SYM_MAX), -1 otherwise. */
static int runtime_len(val *v) {
  const rx_sinfo *si = tsinfo(v);
  if (!si || si->kind != RX_SINFO_TENSOR || !rx_dtype_is_int(si->dtype)) return -1;
  if (si->ndim == 0) return 1;
  if (si->ndim != 1 || !si->shape || si->shape[0]->kind != RX_EXPR_CONST ||
      si->shape[0]->value > SYM_MAX)
    return -1;
  return (int)si->shape[0]->value;
}

/* Fresh symbolic variables d<N> for dims the importer cannot name. */
static const rx_expr *fresh_dim(imp *I) {
  char nm[32];
  snprintf(nm, sizeof nm, "d%d", I->fresh++);
  const rx_expr *d = rx_sym_var(I->m, nm);
  rx_analyzer_assume(I->an, rx_sym_le(I->m, rx_sym_const(I->m, 0), d)); /* the VM checks it */
  return d;
}

/* A shape value computed by a tensor at run time (data-dependent, as Reshape(x, Cast(ReduceMax
 * (...)))): its values become fresh variables, bound when the program runs by
 * tensor_to_shape and a match_cast to Shape([d0, d1, ...]); the VM checks each is a size
 * (>= 0). Cached on the value, so every use shares the variables. */
static rx_status runtime_sym(imp *I, const Onnx__NodeProto *n, val *v) {
  if (v->rt) return NULL;
  int len = runtime_len(v);
  if (len < 0)
    return node_err(I, n,
                    "a shape computed at run time must be an integer scalar or a 1-D "
                    "integer tensor of constant length at most %d",
                    SYM_MAX);
  rx_node *a = rx_arg_var(I->b, v->var);
  rx_var *t, *u;
  RX_RETURN_IF_ERROR(emit(I, n, "tensor_to_shape", &a, 1, NULL, 0, &t));
  const rx_expr *dims[SYM_MAX];
  for (int k = 0; k < len; k++) dims[k] = fresh_dim(I);
  RX_RETURN_IF_ERROR(at_node(
      I, n,
      rx_emit_match_cast(I->b, rx_arg_var(I->b, t), rx_sinfo_shape(I->m, len, dims), NULL, &u)));
  v->rt = true;
  v->sndim = rank_of(v);
  v->slen = len;
  for (int k = 0; k < len; k++) v->s[k] = dims[k];
  return NULL;
}

/* A symbolic int value of input i (required). */
static rx_status sym_input(imp *I, const Onnx__NodeProto *n, size_t i, val **out) {
  const char *nm = input(n, i);
  val *v = nm ? get(I, nm) : NULL;
  if (v && v->kind == V_TENSOR && runtime_len(v) >= 0) {
    RX_RETURN_IF_ERROR(runtime_sym(I, n, v));
    *out = v;
    return NULL;
  }
  if (!v || v->kind != V_SYM)
    return node_err(I, n, "input %zu ('%s') must be a constant or a shape computation", i,
                    nm ? nm : "");
  *out = v;
  return NULL;
}

/* Integer list from input i (opset >= 13 style) or attribute name; *n = -1 when absent. */
static rx_status int_list(imp *I, const Onnx__NodeProto *n, size_t i, const char *name,
                          int64_t *out, int *count) {
  *count = -1;
  const Onnx__AttributeProto *a = onnx_attr(n, name);
  if (a && a->n_ints <= SYM_MAX) {
    for (size_t k = 0; k < a->n_ints; k++) out[k] = a->ints[k];
    *count = (int)a->n_ints;
    return NULL;
  }
  if (!input(n, i)) return NULL;
  val *v;
  RX_RETURN_IF_ERROR(sym_input(I, n, i, &v));
  for (int k = 0; k < v->slen; k++) {
    if (v->s[k]->kind != RX_EXPR_CONST)
      return node_err(I, n,
                      "input %zu ('%s', the attribute '%s' of older opsets) must be a constant: "
                      "relaxc reads it at compile time",
                      i, input(n, i), name);
    out[k] = v->s[k]->value;
  }
  *count = v->slen;
  return NULL;
}

/* Is op one whose result is a bool (a comparison or logic op)? */
static bool sym_is_logic(const char *op) {
  return !strcmp(op, "Equal") || !strcmp(op, "Less") || !strcmp(op, "LessOrEqual") ||
         !strcmp(op, "Greater") || !strcmp(op, "GreaterOrEqual") || !strcmp(op, "And") ||
         !strcmp(op, "Or") || !strcmp(op, "Xor");
}

/* op of two symbolic values, simplified under the importer's facts (dims are sizes, so
 * Equal(dim, -1) is false); NULL for an op that has no symbolic form. */
static const rx_expr *sym_binary(imp *I, const char *op, const rx_expr *a, const rx_expr *b) {
  rx_expr_ctx *c = I->m->ctx;
  const rx_expr *e = NULL;
  if (!strcmp(op, "Equal")) e = rx_expr_cmp(c, RX_EXPR_EQ, a, b);
  if (!strcmp(op, "Less")) e = rx_expr_cmp(c, RX_EXPR_LT, a, b);
  if (!strcmp(op, "LessOrEqual")) e = rx_expr_cmp(c, RX_EXPR_LE, a, b);
  if (!strcmp(op, "Greater")) e = rx_expr_cmp(c, RX_EXPR_LT, b, a);
  if (!strcmp(op, "GreaterOrEqual")) e = rx_expr_cmp(c, RX_EXPR_LE, b, a);
  if (!strcmp(op, "And")) e = rx_expr_and(c, a, b);
  if (!strcmp(op, "Or")) e = rx_expr_or(c, a, b);
  if (!strcmp(op, "Xor")) e = rx_expr_cmp(c, RX_EXPR_NE, a, b);
  if (e) return rx_analyzer_simplify(I->an, e);
  if (!strcmp(op, "Add")) return rx_sym_add(I->m, a, b);
  if (!strcmp(op, "Sub")) return rx_sym_sub(I->m, a, b);
  if (!strcmp(op, "Mul")) return rx_sym_mul(I->m, a, b);
  if (!strcmp(op, "Div")) return rx_sym_floordiv(I->m, a, b);
  if (!strcmp(op, "Max")) return rx_sym_max(I->m, a, b);
  if (!strcmp(op, "Min")) return rx_sym_min(I->m, a, b);
  return NULL;
}

static double fconst_binary(const char *op, double a, double b) {
  if (!strcmp(op, "Add")) return a + b;
  if (!strcmp(op, "Sub")) return a - b;
  if (!strcmp(op, "Mul")) return a * b;
  if (!strcmp(op, "Div")) return a / b;
  return pow(a, b);
}

/* A constant value from a Constant node or an integer initializer. */
static rx_status def_constant(imp *I, const Onnx__NodeProto *n, const char *name,
                              const Onnx__TensorProto *t) {
  if (onnx_is_int_type(t->data_type)) {
    int64_t vals[SYM_MAX];
    size_t c;
    bool ok = t->n_dims <= 1 && onnx_tensor_ints(t, I->file, name, I->base_dir, vals, SYM_MAX, &c);
    if (!ok)
      return n ? node_err(I, n, "integer constant over %d elements or unreadable", SYM_MAX)
               : rx_status_make(RX_ERR_UNSUPPORTED,
                                "%s: integer initializer '%s' over %d elements or unreadable",
                                I->file, name, SYM_MAX);
    val *v = def(I, name);
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
    val *v = def(I, name);
    v->kind = V_SYM;
    v->sndim = 1;
    return NULL;
  }
  if (!f || c != 1) {
    free(f);
    return node_err(I, n, "unsupported constant (data type %d)", (int)t->data_type);
  }
  val *v = def(I, name);
  v->kind = V_FCONST;
  v->f = f[0];
  v->sndim = (int)t->n_dims;                                        /* every dim 1 */
  if (!onnx_dtype_of(t->data_type, &v->sdt)) v->sdt = RX_DTYPE_F32; /* DOUBLE: as f32 */
  free(f);
  return NULL;
}

/* ---- operators with more to translate ---- */

/* Two tensor operands of a broadcasting op whose dims are not provably compatible (say seq and
 * min(seq, 64), from slicing a table to the sequence length): a valid model has them equal at
 * run time, so the operand with the compound dim is match_cast to the other's dim, which the VM
 * checks when it runs (as Relax does to recover a shape). False when there is nothing to cast. */
static bool cast_to_common(imp *I, val *x, val *y, rx_node **ax, rx_node **ay) {
  const rx_sinfo *sx = tsinfo(x), *sy = tsinfo(y);
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
  if (cx && !match_cast_to(I, x->var, sx->dtype, sx->ndim, dx, &v)) return false;
  if (cx) *ax = rx_arg_var(I->b, v);
  if (cy && !match_cast_to(I, y->var, sy->dtype, sy->ndim, dy, &v)) return false;
  if (cy) *ay = rx_arg_var(I->b, v);
  return cx || cy;
}

/* A list of symbolic values from the integer-list attribute `name` or else input i (opset >= 10
 * style); *count = -1 when neither is given. */
static rx_status sym_list(imp *I, const Onnx__NodeProto *n, size_t i, const char *name,
                          const rx_expr **out, int *count) {
  *count = -1;
  const Onnx__AttributeProto *a = onnx_attr(n, name);
  if (a && a->n_ints) {
    if (a->n_ints > SYM_MAX) return node_err(I, n, "attribute '%s' too long", name);
    for (size_t k = 0; k < a->n_ints; k++) out[k] = rx_sym_const(I->m, a->ints[k]);
    *count = (int)a->n_ints;
    return NULL;
  }
  if (!input(n, i)) return NULL;
  val *v;
  RX_RETURN_IF_ERROR(sym_input(I, n, i, &v));
  for (int k = 0; k < v->slen; k++) out[k] = v->s[k];
  *count = v->slen;
  return NULL;
}

/* Is string attribute `name` equal to `want` ("" when absent)? */
static bool attr_s_is(const Onnx__NodeProto *n, const char *name, const char *want) {
  const Onnx__AttributeProto *a = onnx_attr(n, name);
  size_t wl = strlen(want);
  if (!a || !a->has_s) return wl == 0;
  return a->s.len == wl && !memcmp(a->s.data, want, wl);
}

/* Constant ints of attribute `name` (exactly `want` of them) or the default value for each. */
static rx_status ints_attr(imp *I, const Onnx__NodeProto *n, const char *name, int want,
                           int64_t dflt, int64_t *out) {
  const Onnx__AttributeProto *a = onnx_attr(n, name);
  if (!a || !a->n_ints) {
    for (int k = 0; k < want; k++) out[k] = dflt;
    return NULL;
  }
  if ((int)a->n_ints != want)
    return node_err(I, n, "attribute '%s' has %zu values, expected %d", name, a->n_ints, want);
  for (int k = 0; k < want; k++) out[k] = a->ints[k];
  return NULL;
}

static rx_status do_clip(imp *I, const Onnx__NodeProto *n, const char *rop) {
  rx_node *x, *a[2];
  rx_var *r;
  RX_RETURN_IF_ERROR(arg(I, n, input(n, 0), &x));
  rx_node *lo = NULL, *hi = NULL;
  bool lo_c = true, hi_c = true;
  double lo_f = 0, hi_f = 0;
  if (I->opset < 11) {
    const Onnx__AttributeProto *m;
    if ((m = onnx_attr(n, "min")) && m->has_f) lo = rx_arg_float(I->b, lo_f = m->f);
    if ((m = onnx_attr(n, "max")) && m->has_f) hi = rx_arg_float(I->b, hi_f = m->f);
  } else {
    for (int k = 1; k <= 2; k++) {
      if (!input(n, (size_t)k)) continue;
      val *v = get(I, input(n, (size_t)k));
      rx_node **dst = k == 1 ? &lo : &hi;
      RX_RETURN_IF_ERROR(arg(I, n, input(n, (size_t)k), dst));
      if (v->kind == V_FCONST)
        *(k == 1 ? &lo_f : &hi_f) = v->f;
      else
        *(k == 1 ? &lo_c : &hi_c) = false;
    }
  }
  if (lo && hi && lo_c && hi_c) {
    const rx_attr *at[2] = {rx_attr_float(I->m, "min", lo_f), rx_attr_float(I->m, "max", hi_f)};
    RX_RETURN_IF_ERROR(emit(I, n, "clip", &x, 1, at, 2, &r));
    def_tensor(I, n, r);
    return NULL;
  }
  rx_node *cur = x;
  r = NULL;
  if (lo) {
    a[0] = cur;
    a[1] = lo;
    RX_RETURN_IF_ERROR(emit(I, n, "maximum", a, 2, NULL, 0, &r));
    cur = rx_arg_var(I->b, r);
  }
  if (hi) {
    a[0] = cur;
    a[1] = hi;
    RX_RETURN_IF_ERROR(emit(I, n, "minimum", a, 2, NULL, 0, &r));
  }
  if (!r) { /* no bounds: the identity */
    def_alias(I, n, get(I, input(n, 0)));
    return NULL;
  }
  def_tensor(I, n, r);
  return NULL;
}

/* Trilu: where(keep, x, 0) with keep[i, j] = j - i >= k (upper) or j - i <= k (lower) over the
 * last two dims, built from two aranges. */
static rx_status do_trilu(imp *I, const Onnx__NodeProto *n, const char *rop) {
  val *x = input(n, 0) ? get(I, input(n, 0)) : NULL;
  const rx_sinfo *si = tsinfo(x);
  if (!si || si->kind != RX_SINFO_TENSOR || !si->shape || si->ndim < 2)
    return node_err(I, n, "expects an input of known shape and rank >= 2");
  const rx_expr *k = rx_sym_const(I->m, 0);
  rx_node *kt = NULL; /* k computed at run time: a tensor (it may be negative, not a size) */
  val *kin = input(n, 1) ? get(I, input(n, 1)) : NULL;
  if (kin && kin->kind == V_TENSOR) {
    if (runtime_len(kin) != 1) return node_err(I, n, "k must be one integer");
    kt = rx_arg_var(I->b, kin->var);
  } else if (input(n, 1)) {
    val *kv;
    RX_RETURN_IF_ERROR(sym_input(I, n, 1, &kv));
    if (kv->slen != 1) return node_err(I, n, "k must be a scalar");
    k = kv->s[0];
  }
  const rx_expr *rows_n = si->shape[si->ndim - 2], *cols_n = si->shape[si->ndim - 1];
  rx_node *a[3];
  rx_var *rows, *rows2, *cols, *diff, *keep, *r;
  a[0] = rx_arg_prim(I->b, RX_DTYPE_I64, rx_sym_const(I->m, 0));
  a[1] = rx_arg_prim(I->b, RX_DTYPE_I64, rows_n);
  RX_RETURN_IF_ERROR(emit(I, n, "arange", a, 2, NULL, 0, &rows));
  int64_t ax1 = 1;
  const rx_attr *at = rx_attr_ints(I->m, "axes", &ax1, 1);
  a[0] = rx_arg_var(I->b, rows);
  RX_RETURN_IF_ERROR(emit(I, n, "expand_dims", a, 1, &at, 1, &rows2));
  a[0] = rx_arg_prim(I->b, RX_DTYPE_I64, rx_sym_const(I->m, 0));
  a[1] = rx_arg_prim(I->b, RX_DTYPE_I64, cols_n);
  RX_RETURN_IF_ERROR(emit(I, n, "arange", a, 2, NULL, 0, &cols));
  a[0] = rx_arg_var(I->b, cols);
  a[1] = rx_arg_var(I->b, rows2);
  RX_RETURN_IF_ERROR(emit(I, n, "subtract", a, 2, NULL, 0, &diff));
  a[0] = rx_arg_var(I->b, diff);
  a[1] = kt ? kt : rx_arg_prim(I->b, RX_DTYPE_I64, k);
  RX_RETURN_IF_ERROR(emit(I, n, onnx_attr_i(n, "upper", 1) ? "greater_equal" : "less_equal", a, 2,
                          NULL, 0, &keep));
  a[0] = rx_arg_var(I->b, keep);
  a[1] = rx_arg_var(I->b, x->var);
  a[2] = rx_arg_float(I->b, 0.0);
  RX_RETURN_IF_ERROR(emit(I, n, "where", a, 3, NULL, 0, &r));
  def_tensor(I, n, r);
  return NULL;
}

/* A slice bound for a dim d: constants beyond the int32 range (ONNX's "to the end" markers,
 * INT64_MAX / INT64_MIN) become d and -d - 1, which clamp the same way. */
static const rx_expr *slice_bound(imp *I, const rx_expr *v, const rx_expr *d) {
  if (v->kind != RX_EXPR_CONST || !d) return v;
  if (v->value > INT32_MAX) return d;
  if (v->value < INT32_MIN) return rx_sym_sub(I->m, rx_sym_const(I->m, -1), d);
  return v;
}

/* Split sizes must add up to the axis extent (ONNX; onnxruntime refuses others): constant ones
 * against a constant extent at import, naming the sizes and the extent; otherwise x (argument
 * *xa) is match_cast to the extent their sum, which the VM checks when it runs (sizes from data:
 * their values are bound by then, each checked to be a size). */
static rx_status split_sizes(imp *I, const Onnx__NodeProto *n, val *x, int axis,
                             const rx_expr *const *sizes, int ns, rx_node **xa) {
  const rx_sinfo *si = tsinfo(x);
  const rx_expr *sum = rx_sym_const(I->m, 0), *ext = si->shape[axis];
  rx_strbuf sb = {0};
  for (int k = 0; k < ns; k++) {
    sum = rx_sym_add(I->m, sum, sizes[k]);
    if (k) rx_strbuf_printf(&sb, ", ");
    rx_expr_print(&sb, sizes[k]);
  }
  sum = rx_analyzer_simplify(I->an, sum);
  char *list = rx_strbuf_take(&sb);
  rx_status s = NULL;
  for (int k = 0; k < ns && !s; k++)
    if (sizes[k]->kind == RX_EXPR_CONST && sizes[k]->value < 0)
      s = node_err(I, n, "split size %d is negative (sizes [%s])", k, list ? list : "");
  if (!s && sum->kind == RX_EXPR_CONST && ext->kind == RX_EXPR_CONST && sum->value != ext->value)
    s = node_err(I, n,
                 "the split sizes [%s] add up to %lld, but axis %d of the input has extent "
                 "%lld",
                 list ? list : "", (long long)sum->value, axis, (long long)ext->value);
  free(list);
  RX_RETURN_IF_ERROR(s);
  if (sum == ext || si->ndim > SYM_MAX) return NULL;
  const rx_expr *dims[SYM_MAX];
  memcpy(dims, si->shape, sizeof *dims * (size_t)si->ndim);
  dims[axis] = sum;
  rx_var *c;
  if (!match_cast_to(I, x->var, si->dtype, si->ndim, dims, &c))
    return node_err(I, n, "match_cast of the input to the split sizes' sum failed");
  *xa = rx_arg_var(I->b, c);
  return NULL;
}

static rx_status do_split(imp *I, const Onnx__NodeProto *n, const char *rop) {
  val *x = input(n, 0) ? get(I, input(n, 0)) : NULL;
  const rx_sinfo *si = tsinfo(x);
  if (!si || si->kind != RX_SINFO_TENSOR || !si->shape)
    return node_err(I, n, "the input's shape is not known (rank and dims needed)");
  int64_t axis = onnx_attr_i(n, "axis", 0);
  if (axis < 0) axis += si->ndim;
  if (axis < 0 || axis >= si->ndim) return node_err(I, n, "axis out of range");
  int nout = (int)n->n_output;
  if (nout > SYM_MAX) return node_err(I, n, "over %d outputs", SYM_MAX);
  const rx_expr *sizes[SYM_MAX];
  int ns;
  RX_RETURN_IF_ERROR(sym_list(I, n, 1, "split", sizes, &ns));
  if (ns >= 0 && ns != nout) return node_err(I, n, "%d split sizes for %d outputs", ns, nout);
  rx_node *xa = rx_arg_var(I->b, x->var);
  if (ns >= 0) RX_RETURN_IF_ERROR(split_sizes(I, n, x, (int)axis, sizes, ns, &xa));
  rx_var *tup = NULL;
  bool all_const = ns >= 0;
  for (int k = 0; k < ns; k++) all_const = all_const && sizes[k]->kind == RX_EXPR_CONST;
  const rx_attr *at[2];
  at[0] = rx_attr_int(I->m, "axis", axis);
  if (ns < 0) {
    at[1] = rx_attr_int(I->m, "sections", nout);
    RX_RETURN_IF_ERROR(emit(I, n, "split", &xa, 1, at, 2, &tup));
  } else if (all_const) {
    int64_t idx[SYM_MAX], acc = 0;
    for (int k = 0; k + 1 < ns; k++) idx[k] = acc += sizes[k]->value;
    at[1] = rx_attr_ints(I->m, "indices", idx, ns - 1);
    RX_RETURN_IF_ERROR(emit(I, n, "split", &xa, 1, at, 2, &tup));
  }
  const rx_expr *begin = rx_sym_const(I->m, 0);
  for (int k = 0; k < nout; k++) {
    rx_var *r;
    if (tup) {
      RX_RETURN_IF_ERROR(at_node(I, n, rx_emit_get_item(I->b, rx_arg_var(I->b, tup), k, NULL, &r)));
    } else { /* symbolic sizes: one strided_slice per output */
      const rx_expr *end = rx_sym_add(I->m, begin, sizes[k]);
      const rx_attr *sa[3] = {rx_attr_ints(I->m, "axes", &axis, 1),
                              rx_attr_exprs(I->m, "begin", &begin, 1),
                              rx_attr_exprs(I->m, "end", &end, 1)};
      RX_RETURN_IF_ERROR(emit(I, n, "strided_slice", &xa, 1, sa, 3, &r));
      begin = end;
    }
    if (n->output[k] && n->output[k][0]) def_named(I, n->output[k], r);
  }
  return NULL;
}

static rx_status do_slice(imp *I, const Onnx__NodeProto *n, const char *rop) {
  val *x = input(n, 0) ? get(I, input(n, 0)) : NULL;
  if (!x) return node_err(I, n, "input is not defined");
  const rx_expr *st[SYM_MAX], *en[SYM_MAX], *ax[SYM_MAX], *sp[SYM_MAX];
  int nst, nen, nax, nsp;
  RX_RETURN_IF_ERROR(sym_list(I, n, 1, "starts", st, &nst));
  RX_RETURN_IF_ERROR(sym_list(I, n, 2, "ends", en, &nen));
  RX_RETURN_IF_ERROR(sym_list(I, n, 3, "axes", ax, &nax));
  RX_RETURN_IF_ERROR(sym_list(I, n, 4, "steps", sp, &nsp));
  if (nst < 0 || nen != nst || (nax >= 0 && nax != nst) || (nsp >= 0 && nsp != nst))
    return node_err(I, n, "starts, ends, axes and steps must be given with one length");
  int64_t axes[SYM_MAX], steps[SYM_MAX];
  int rank = x->kind == V_SYM ? 1 : rank_of(x);
  if (rank < 0) return node_err(I, n, "the input's rank is not known");
  for (int k = 0; k < nst; k++) {
    if (nax >= 0 && ax[k]->kind != RX_EXPR_CONST) return node_err(I, n, "axes must be constant");
    if (nsp >= 0 && (sp[k]->kind != RX_EXPR_CONST || sp[k]->value == 0))
      return node_err(I, n, "steps must be nonzero constants");
    axes[k] = nax >= 0 ? ax[k]->value : k;
    if (axes[k] < 0) axes[k] += rank;
    if (axes[k] < 0 || axes[k] >= rank) return node_err(I, n, "axis out of range");
    steps[k] = nsp >= 0 ? sp[k]->value : 1;
  }
  if (x->kind == V_SYM) { /* slicing a shape value: Python slice semantics on constants */
    if (x->sndim != 1 || nst != 1) return node_err(I, n, "slicing a scalar shape value");
    if (st[0]->kind != RX_EXPR_CONST || en[0]->kind != RX_EXPR_CONST)
      return node_err(I, n, "slicing a shape value needs constant starts and ends");
    int64_t len = x->slen, s = steps[0], b = st[0]->value, e = en[0]->value;
    if (b < 0) b += len;
    if (e < 0) e += len;
    int64_t lo = s > 0 ? 0 : -1, hi = s > 0 ? len : len - 1;
    b = b < lo ? lo : b > hi ? hi : b;
    e = e < lo ? lo : e > hi ? hi : e;
    val out = {.name = n->output[0], .kind = V_SYM, .sndim = 1, .slen = 0};
    for (int64_t i = b; s > 0 ? i < e : i > e; i += s) out.s[out.slen++] = x->s[i];
    *def(I, n->output[0]) = out;
    return NULL;
  }
  const rx_sinfo *si = tsinfo(x);
  for (int k = 0; k < nst; k++) {
    const rx_expr *d = si && si->shape ? si->shape[axes[k]] : NULL;
    st[k] = slice_bound(I, st[k], d);
    en[k] = slice_bound(I, en[k], d);
  }
  rx_node *xa = rx_arg_var(I->b, x->var);
  const rx_attr *at[4] = {
      rx_attr_ints(I->m, "axes", axes, nst), rx_attr_exprs(I->m, "begin", st, nst),
      rx_attr_exprs(I->m, "end", en, nst), rx_attr_ints(I->m, "strides", steps, nst)};
  rx_var *r;
  RX_RETURN_IF_ERROR(emit(I, n, "strided_slice", &xa, 1, at, 4, &r));
  def_tensor(I, n, r);
  return NULL;
}

/* Constant: a weight, a folded constant, or a symbolic value (value_int, value_ints, value_float)
 */
static rx_status do_constant(imp *I, const Onnx__NodeProto *n, const char *rop) {
  const Onnx__TensorProto *t = onnx_const_tensor(n);
  if (t) {
    if (onnx_is_weight(t, true)) return NULL; /* a parameter already */
    return def_constant(I, n, n->output[0], t);
  }
  const Onnx__AttributeProto *x;
  val *v = def(I, n->output[0]);
  if ((x = onnx_attr(n, "value_float"))) {
    v->kind = V_FCONST;
    v->f = x->f;
  } else if ((x = onnx_attr(n, "value_int"))) {
    v->kind = V_SYM;
    v->slen = 1;
    v->s[0] = rx_sym_const(I->m, x->i);
  } else if ((x = onnx_attr(n, "value_ints")) && x->n_ints <= SYM_MAX) {
    v->kind = V_SYM;
    v->sndim = 1;
    v->slen = (int)x->n_ints;
    for (size_t k = 0; k < x->n_ints; k++) v->s[k] = rx_sym_const(I->m, x->ints[k]);
  } else {
    I->nvals--;
    return node_err(I, n, "unsupported Constant attribute");
  }
  return NULL;
}

/* Identity: the input under a new name */
static rx_status do_identity(imp *I, const Onnx__NodeProto *n, const char *rop) {
  val *src = input(n, 0) ? get(I, input(n, 0)) : NULL;
  if (!src) return node_err(I, n, "input is not defined");
  def_alias(I, n, src);
  return NULL;
}

/* elementwise unary ops; rop: the relaxc op. Neg, Abs and Not of a shape value stay symbolic. */
static rx_status do_unary(imp *I, const Onnx__NodeProto *n, const char *rop) {
  rx_node *a[5] = {0};
  rx_var *r = NULL;
  val *x = input(n, 0) ? get(I, input(n, 0)) : NULL;
  bool neg = !strcmp(rop, "neg"), abs_ = !strcmp(rop, "abs"), not_ = !strcmp(rop, "not");
  if (x && x->kind == V_SYM && (neg || abs_ || not_)) {
    val out = *x;
    out.name = n->output[0];
    out.tvar = NULL;
    rx_expr_ctx *c = I->m->ctx;
    for (int k = 0; k < x->slen; k++) {
      const rx_expr *e = x->s[k], *m = rx_sym_sub(I->m, rx_sym_const(I->m, 0), e);
      if (abs_) m = rx_expr_select(c, rx_sym_lt(I->m, e, rx_sym_const(I->m, 0)), m, e);
      if (not_) m = rx_sym_eq(I->m, e, rx_sym_const(I->m, 0));
      out.s[k] = rx_analyzer_simplify(I->an, m);
    }
    *def(I, n->output[0]) = out;
    return NULL;
  }
  RX_RETURN_IF_ERROR(arg(I, n, input(n, 0), &a[0]));
  RX_RETURN_IF_ERROR(emit(I, n, rop, a, 1, NULL, 0, &r));
  def_tensor(I, n, r);
  return NULL;
}

/* Reciprocal: 1 / x */
static rx_status do_reciprocal(imp *I, const Onnx__NodeProto *n, const char *rop) {
  rx_node *a[5] = {0};
  rx_var *r = NULL;
  a[0] = rx_arg_float(I->b, 1.0);
  RX_RETURN_IF_ERROR(arg(I, n, input(n, 0), &a[1]));
  RX_RETURN_IF_ERROR(emit(I, n, "divide", a, 2, NULL, 0, &r));
  def_tensor(I, n, r);
  return NULL;
}

/* elementwise binary ops with broadcasting (rop: the relaxc op); shape values and float constants
 * are computed at import */
static rx_status do_binary(imp *I, const Onnx__NodeProto *n, const char *rop) {
  const char *op = n->op_type;
  rx_node *a[5] = {0};
  rx_var *r = NULL;
  val *x = input(n, 0) ? get(I, input(n, 0)) : NULL, *y = input(n, 1) ? get(I, input(n, 1)) : NULL;
  if (!x || !y) return node_err(I, n, "an input is not defined");
  if (x->kind == V_SYM && y->kind == V_SYM && sym_binary(I, op, x->s[0], y->s[0])) {
    /* shape arithmetic, with broadcasting of one-element values */
    int len = x->slen > y->slen ? x->slen : y->slen;
    if ((x->slen != len && x->slen != 1) || (y->slen != len && y->slen != 1))
      return node_err(I, n, "shape values of lengths %d and %d do not broadcast", x->slen, y->slen);
    val out = {.name = n->output[0],
               .kind = V_SYM,
               .sndim = x->sndim > y->sndim ? x->sndim : y->sndim,
               .slen = len,
               .sdt = sym_is_logic(op) ? RX_DTYPE_BOOL : x->sdt};
    for (int k = 0; k < len; k++)
      out.s[k] = sym_binary(I, op, x->s[x->slen == 1 ? 0 : k], y->s[y->slen == 1 ? 0 : k]);
    *def(I, n->output[0]) = out;
    return NULL;
  }
  if (x->kind == V_FCONST && y->kind == V_FCONST &&
      (!strcmp(op, "Add") || !strcmp(op, "Sub") || !strcmp(op, "Mul") || !strcmp(op, "Div") ||
       !strcmp(op, "Pow"))) {
    val *v = def(I, n->output[0]);
    v->kind = V_FCONST;
    v->f = fconst_binary(op, x->f, y->f);
    return NULL;
  }
  RX_RETURN_IF_ERROR(arg(I, n, input(n, 0), &a[0]));
  RX_RETURN_IF_ERROR(arg(I, n, input(n, 1), &a[1]));
  rx_status es = rx_emit_op(I->b, rop, a, 2, NULL, 0, NULL, &r);
  if (es && cast_to_common(I, x, y, &a[0], &a[1])) {
    rx_status again = rx_emit_op(I->b, rop, a, 2, NULL, 0, NULL, &r);
    if (!again) {
      rx_status_free(es);
      es = NULL;
    } else {
      rx_status_free(again);
    }
  }
  RX_RETURN_IF_ERROR(at_node(I, n, es));
  def_tensor(I, n, r);
  return NULL;
}

/* Where(cond, x, y); of three shape values, a symbolic select per value (with broadcasting of
 * one-value operands), as PyTorch's Expand(x, Where(Equal(shape, -1), ones, shape)) */
static rx_status do_where(imp *I, const Onnx__NodeProto *n, const char *rop) {
  rx_node *a[5] = {0};
  rx_var *r = NULL;
  val *v[3];
  bool all_sym = true;
  for (int k = 0; k < 3; k++) {
    v[k] = input(n, (size_t)k) ? get(I, input(n, (size_t)k)) : NULL;
    all_sym = all_sym && v[k] && v[k]->kind == V_SYM;
  }
  if (all_sym) {
    val out = {.name = n->output[0], .kind = V_SYM, .sdt = v[1]->sdt};
    for (int k = 0; k < 3; k++) {
      if (v[k]->slen > out.slen) out.slen = v[k]->slen;
      if (v[k]->sndim > out.sndim) out.sndim = v[k]->sndim;
    }
    for (int k = 0; k < 3; k++)
      if (v[k]->slen != 1 && v[k]->slen != out.slen)
        return node_err(I, n, "shape values of lengths %d and %d do not broadcast", out.slen,
                        v[k]->slen);
    for (int j = 0; j < out.slen; j++) {
      const rx_expr *e[3];
      for (int k = 0; k < 3; k++) e[k] = v[k]->s[v[k]->slen == 1 ? 0 : j];
      out.s[j] = rx_analyzer_simplify(I->an, rx_expr_select(I->m->ctx, e[0], e[1], e[2]));
    }
    *def(I, n->output[0]) = out;
    return NULL;
  }
  for (int k = 0; k < 3; k++) RX_RETURN_IF_ERROR(arg(I, n, input(n, (size_t)k), &a[k]));
  RX_RETURN_IF_ERROR(emit(I, n, "where", a, 3, NULL, 0, &r));
  def_tensor(I, n, r);
  return NULL;
}

/* MatMul: NumPy matmul */
static rx_status do_matmul(imp *I, const Onnx__NodeProto *n, const char *rop) {
  rx_node *a[5] = {0};
  rx_var *r = NULL;
  RX_RETURN_IF_ERROR(arg(I, n, input(n, 0), &a[0]));
  RX_RETURN_IF_ERROR(arg(I, n, input(n, 1), &a[1]));
  RX_RETURN_IF_ERROR(emit(I, n, "matmul", a, 2, NULL, 0, &r));
  def_tensor(I, n, r);
  return NULL;
}

/* Gemm: alpha * A' B' + beta * C */
static rx_status do_gemm(imp *I, const Onnx__NodeProto *n, const char *rop) {
  rx_node *a[5] = {0};
  rx_var *r = NULL;
  rx_node *A, *B;
  RX_RETURN_IF_ERROR(arg(I, n, input(n, 0), &A));
  RX_RETURN_IF_ERROR(arg(I, n, input(n, 1), &B));
  if (onnx_attr_i(n, "transA", 0)) {
    RX_RETURN_IF_ERROR(emit(I, n, "permute", &A, 1, NULL, 0, &r));
    A = rx_arg_var(I->b, r);
  }
  if (onnx_attr_i(n, "transB", 0)) {
    RX_RETURN_IF_ERROR(emit(I, n, "permute", &B, 1, NULL, 0, &r));
    B = rx_arg_var(I->b, r);
  }
  a[0] = A;
  a[1] = B;
  RX_RETURN_IF_ERROR(emit(I, n, "matmul", a, 2, NULL, 0, &r));
  double alpha = onnx_attr_f(n, "alpha", 1.0), beta = onnx_attr_f(n, "beta", 1.0);
  if (alpha != 1.0) {
    a[0] = rx_arg_var(I->b, r);
    a[1] = rx_arg_float(I->b, alpha);
    RX_RETURN_IF_ERROR(emit(I, n, "multiply", a, 2, NULL, 0, &r));
  }
  if (input(n, 2) && beta != 0.0) {
    rx_node *C;
    RX_RETURN_IF_ERROR(arg(I, n, input(n, 2), &C));
    if (beta != 1.0) {
      rx_var *c;
      a[0] = C;
      a[1] = rx_arg_float(I->b, beta);
      RX_RETURN_IF_ERROR(emit(I, n, "multiply", a, 2, NULL, 0, &c));
      C = rx_arg_var(I->b, c);
    }
    a[0] = rx_arg_var(I->b, r);
    a[1] = C;
    RX_RETURN_IF_ERROR(emit(I, n, "add", a, 2, NULL, 0, &r));
  }
  def_tensor(I, n, r);
  return NULL;
}

/* Softmax and LogSoftmax along an axis */
static rx_status do_softmax(imp *I, const Onnx__NodeProto *n, const char *rop) {
  const char *op = n->op_type;
  rx_node *a[5] = {0};
  const rx_attr *at[4];
  rx_var *r = NULL;
  int64_t axis = onnx_attr_i(n, "axis", I->opset >= 13 ? -1 : 1);
  int rank = rank_of(input(n, 0) ? get(I, input(n, 0)) : NULL);
  if (I->opset < 13 && rank >= 0 && axis != -1 && axis != rank - 1)
    return node_err(I, n, "opset < 13 Softmax over axis %lld (flattening) is not supported",
                    (long long)axis);
  RX_RETURN_IF_ERROR(arg(I, n, input(n, 0), &a[0]));
  at[0] = rx_attr_int(I->m, "axis", axis);
  RX_RETURN_IF_ERROR(emit(I, n, op[0] == 'S' ? "softmax" : "log_softmax", a, 1, at, 1, &r));
  def_tensor(I, n, r);
  return NULL;
}

/* Gelu (opset 20): approximate "none" or "tanh" */
static rx_status do_gelu(imp *I, const Onnx__NodeProto *n, const char *rop) {
  rx_node *a[5] = {0};
  const rx_attr *at[4];
  rx_var *r = NULL;
  RX_RETURN_IF_ERROR(arg(I, n, input(n, 0), &a[0]));
  const Onnx__AttributeProto *ap = onnx_attr(n, "approximate");
  bool tanh_ = ap && ap->has_s && ap->s.len == 4 && !memcmp(ap->s.data, "tanh", 4);
  at[0] = rx_attr_str(I->m, "approximate", tanh_ ? "tanh" : "none");
  RX_RETURN_IF_ERROR(emit(I, n, "gelu", a, 1, at, 1, &r));
  def_tensor(I, n, r);
  return NULL;
}

/* Shape: the input's dims as a symbolic value (start and end attributes) */
static rx_status do_shape(imp *I, const Onnx__NodeProto *n, const char *rop) {
  val *x = input(n, 0) ? get(I, input(n, 0)) : NULL;
  const rx_sinfo *si = tsinfo(x);
  const rx_expr *len = NULL; /* of a shape value: its length */
  if (x && (x->kind == V_SYM || x->kind == V_FCONST))
    len = rx_sym_const(I->m, x->kind == V_SYM ? x->slen : 1);
  else if (!si || si->kind != RX_SINFO_TENSOR || !si->shape || si->ndim > SYM_MAX)
    return node_err(I, n, "the input's shape is not known (rank and dims needed)");
  int ndim = len ? x->sndim : si->ndim;
  int64_t start = onnx_attr_i(n, "start", 0), end = onnx_attr_i(n, "end", ndim);
  if (start < 0) start += ndim;
  if (end < 0) end += ndim;
  if (start < 0) start = 0;
  if (end > ndim) end = ndim;
  val out = {.name = n->output[0], .kind = V_SYM, .sndim = 1, .slen = 0};
  for (int64_t k = start; k < end; k++) out.s[out.slen++] = len ? len : si->shape[k];
  *def(I, n->output[0]) = out;
  return NULL;
}

/* Size: the product of the input's dims as a symbolic 0-d value (an i64 tensor where used as
 * data) */
static rx_status do_size(imp *I, const Onnx__NodeProto *n, const char *rop) {
  val *x = input(n, 0) ? get(I, input(n, 0)) : NULL;
  const rx_sinfo *si = tsinfo(x);
  const rx_expr *count = rx_sym_const(I->m, 1);
  if (x && x->kind == V_SYM) /* of a shape value: its length */
    count = rx_sym_const(I->m, x->slen);
  else if (!x || x->kind != V_FCONST) {
    if (!si || si->kind != RX_SINFO_TENSOR || !si->shape)
      return node_err(I, n, "the input's shape is not known (rank and dims needed)");
    for (int k = 0; k < si->ndim; k++) count = rx_sym_mul(I->m, count, si->shape[k]);
  }
  val out = {.name = n->output[0], .kind = V_SYM, .sndim = 0, .slen = 1};
  out.s[0] = count;
  *def(I, n->output[0]) = out;
  return NULL;
}

/* Gather: of a symbolic value at import, else take */
static rx_status do_gather(imp *I, const Onnx__NodeProto *n, const char *rop) {
  rx_node *a[5] = {0};
  const rx_attr *at[4];
  rx_var *r = NULL;
  val *x = input(n, 0) ? get(I, input(n, 0)) : NULL,
      *idx = input(n, 1) ? get(I, input(n, 1)) : NULL;
  if (!x || !idx) return node_err(I, n, "an input is not defined");
  int64_t axis = onnx_attr_i(n, "axis", 0);
  if (x->kind == V_SYM && idx->kind == V_SYM) {
    if (x->sndim != 1 || axis != 0) return node_err(I, n, "gather from a scalar shape value");
    val out = {.name = n->output[0], .kind = V_SYM, .sndim = idx->sndim, .slen = idx->slen};
    for (int k = 0; k < idx->slen; k++) {
      if (idx->s[k]->kind != RX_EXPR_CONST)
        return node_err(I, n, "gather from a shape value at a non-constant index");
      int64_t i = idx->s[k]->value;
      if (i < 0) i += x->slen;
      if (i < 0 || i >= x->slen)
        return node_err(I, n, "index %lld out of range for a shape of length %d",
                        (long long)idx->s[k]->value, x->slen);
      out.s[k] = x->s[i];
    }
    *def(I, n->output[0]) = out;
    return NULL;
  }
  RX_RETURN_IF_ERROR(arg(I, n, input(n, 0), &a[0]));
  const rx_sinfo *si = tsinfo(x);
  if (idx->kind == V_SYM) { /* constant indices: their tensor, negative ones from the end */
    val iv = *idx;
    iv.tvar = NULL;
    int64_t ax = si && axis < 0 ? axis + si->ndim : axis;
    const rx_expr *dim = si && si->shape && ax >= 0 && ax < si->ndim ? si->shape[ax] : NULL;
    for (int k = 0; k < iv.slen && dim && dim->kind == RX_EXPR_CONST; k++)
      if (iv.s[k]->kind == RX_EXPR_CONST &&
          (iv.s[k]->value < -dim->value || iv.s[k]->value >= dim->value))
        return node_err(I, n, "index %lld out of range [-%lld, %lld) on axis %lld",
                        (long long)iv.s[k]->value, (long long)dim->value, (long long)dim->value,
                        (long long)ax);
    for (int k = 0; k < iv.slen; k++)
      if (iv.s[k]->kind == RX_EXPR_CONST && iv.s[k]->value < 0 && si && si->shape && ax >= 0 &&
          ax < si->ndim)
        iv.s[k] = rx_sym_add(I->m, iv.s[k], si->shape[ax]);
    rx_var *t;
    RX_RETURN_IF_ERROR(sym_tensor(I, n, &iv, &t));
    a[1] = rx_arg_var(I->b, t);
  } else {
    RX_RETURN_IF_ERROR(arg(I, n, input(n, 1), &a[1]));
  }
  at[0] = rx_attr_int(I->m, "axis", axis);
  RX_RETURN_IF_ERROR(emit(I, n, "take", a, 2, at, 1, &r));
  def_tensor(I, n, r);
  return NULL;
}

/* Unsqueeze and Squeeze (axes as attribute or input) */
static rx_status do_squeeze(imp *I, const Onnx__NodeProto *n, const char *rop) {
  const char *op = n->op_type;
  rx_node *a[5] = {0};
  const rx_attr *at[4];
  rx_var *r = NULL;
  bool unsq = op[0] == 'U';
  int64_t axes[SYM_MAX];
  int na;
  RX_RETURN_IF_ERROR(int_list(I, n, 1, "axes", axes, &na));
  val *x = input(n, 0) ? get(I, input(n, 0)) : NULL;
  if (!x) return node_err(I, n, "input is not defined");
  if (x->kind == V_SYM) {
    val out = *x;
    out.name = n->output[0];
    if (unsq && x->sndim == 0 && na == 1 && (axes[0] == 0 || axes[0] == -1))
      out.sndim = 1;
    else if (!unsq && x->sndim == 1 && x->slen == 1 && (na <= 0 || axes[0] == 0 || axes[0] == -1))
      out.sndim = 0;
    else
      return node_err(I, n, "unsupported on a shape value of rank %d", x->sndim);
    *def(I, n->output[0]) = out;
    return NULL;
  }
  RX_RETURN_IF_ERROR(arg(I, n, input(n, 0), &a[0]));
  int rank = rank_of(x);
  if (unsq) {
    if (na < 0) return node_err(I, n, "axes are required");
    for (int k = 0; k < na; k++)
      if (axes[k] < 0 && rank >= 0) axes[k] += rank + na;
    at[0] = rx_attr_ints(I->m, "axes", axes, na);
    RX_RETURN_IF_ERROR(emit(I, n, "expand_dims", a, 1, at, 1, &r));
  } else {
    if (na > 0) at[0] = rx_attr_ints(I->m, "axes", axes, na);
    RX_RETURN_IF_ERROR(emit(I, n, "squeeze", a, 1, at, na > 0 ? 1 : 0, &r));
  }
  def_tensor(I, n, r);
  return NULL;
}

/* Concat: of symbolic values at import, else concat */
/* Concat's operand k (k > 0) whose dims off the axis the analyzer cannot show equal to operand
 * 0's (a UNet's skip [b, c, h, w] and its upsampled input [b, c, 2 * ((h + 1) / 2) - (h % 2),
 * w]): a valid model has them equal at run time, so the operand is match_cast to operand 0's
 * dims there, which the VM checks when it runs. Provably different dims are left to concat's
 * own error. */
static rx_status concat_cast(imp *I, const Onnx__NodeProto *n, size_t k, rx_node **field) {
  val *v0 = get(I, input(n, 0)), *v = get(I, input(n, k));
  const rx_sinfo *s0 = tsinfo(v0), *sk = tsinfo(v);
  if (!s0 || !sk || s0->kind != RX_SINFO_TENSOR || sk->kind != RX_SINFO_TENSOR || !s0->shape ||
      !sk->shape || s0->ndim != sk->ndim || sk->ndim > SYM_MAX)
    return NULL;
  int64_t axis = onnx_attr_i(n, "axis", 0);
  if (axis < 0) axis += sk->ndim;
  const rx_expr *dims[SYM_MAX];
  bool cast = false;
  for (int d = 0; d < sk->ndim; d++) {
    dims[d] = sk->shape[d];
    if (d == axis || s0->shape[d] == dims[d]) continue;
    const rx_expr *eq = rx_expr_cmp(I->m->ctx, RX_EXPR_EQ, s0->shape[d], dims[d]);
    rx_tribool t = rx_analyzer_prove(I->an, eq);
    if (t == RX_UNKNOWN) {
      dims[d] = s0->shape[d];
      cast = true;
    }
  }
  rx_var *c;
  if (!cast) return NULL;
  if (!match_cast_to(I, v->var, sk->dtype, sk->ndim, dims, &c))
    return node_err(I, n, "match_cast of input %zu ('%s') to the dims of input 0 failed", k,
                    input(n, k));
  *field = rx_arg_var(I->b, c);
  return NULL;
}

static rx_status do_concat(imp *I, const Onnx__NodeProto *n, const char *rop) {
  rx_node *a[5] = {0};
  const rx_attr *at[4];
  rx_var *r = NULL;
  bool all_sym = n->n_input > 0;
  for (size_t k = 0; k < n->n_input; k++) {
    val *v = input(n, k) ? get(I, input(n, k)) : NULL;
    if (!v) return node_err(I, n, "input %zu is not defined", k);
    if (v->kind != V_SYM) all_sym = false;
  }
  if (all_sym) {
    val out = {.name = n->output[0], .kind = V_SYM, .sndim = 1};
    for (size_t k = 0; k < n->n_input; k++) {
      val *v = get(I, input(n, k));
      if (out.slen + v->slen > SYM_MAX) return node_err(I, n, "shape value too long");
      for (int j = 0; j < v->slen; j++) out.s[out.slen++] = v->s[j];
    }
    *def(I, n->output[0]) = out;
    return NULL;
  }
  rx_node **fields = rx_calloc(n->n_input, sizeof *fields);
  rx_status s = NULL;
  for (size_t k = 0; k < n->n_input && !s; k++) s = arg(I, n, input(n, k), &fields[k]);
  for (size_t k = 1; k < n->n_input && !s; k++) s = concat_cast(I, n, k, &fields[k]);
  rx_var *tup = NULL;
  if (!s) s = rx_emit_tuple(I->b, fields, (int)n->n_input, NULL, &tup);
  free(fields);
  RX_RETURN_IF_ERROR(s);
  a[0] = rx_arg_var(I->b, tup);
  at[0] = rx_attr_int(I->m, "axis", onnx_attr_i(n, "axis", 0));
  RX_RETURN_IF_ERROR(emit(I, n, "concat", a, 1, at, 1, &r));
  def_tensor(I, n, r);
  return NULL;
}

/* The one value of tensor t (ConstantOfShape's value) of dtype dt: a float's in *f, an
 * integer's or bool's exactly in *i (a double holds integers only up to 2^53; torchvision's
 * INT64_MAX is 2^63 - 1) and as a double in *f. */
static rx_status one_value(imp *I, const Onnx__NodeProto *n, const Onnx__TensorProto *t,
                           rx_dtype dt, double *f, int64_t *i) {
  if (rx_dtype_is_float(dt)) {
    size_t c;
    float *v = onnx_tensor_floats(t, &c);
    bool ok = v && c == 1;
    if (ok) *f = v[0];
    free(v);
    return ok ? NULL : node_err(I, n, "the value must be one float element");
  }
  void *d = NULL;
  size_t nb = 0;
  RX_RETURN_IF_ERROR(at_node(I, n, onnx_tensor_data(t, I->file, "value", I->base_dir, &d, &nb)));
  bool ok = nb == (size_t)(rx_dtype_bits(dt) + 7) / 8;
  if (ok && (dt == RX_DTYPE_I64 || dt == RX_DTYPE_U64)) memcpy(i, d, sizeof *i);
  if (ok && dt == RX_DTYPE_U32) *i = *(const uint32_t *)d;
  if (ok && dt == RX_DTYPE_U16) *i = *(const uint16_t *)d;
  if (ok && dt == RX_DTYPE_I32) *i = *(const int32_t *)d;
  if (ok && dt == RX_DTYPE_I16) *i = *(const int16_t *)d;
  if (ok && dt == RX_DTYPE_I8) *i = *(const int8_t *)d;
  if (ok && (dt == RX_DTYPE_U8 || dt == RX_DTYPE_BOOL)) *i = *(const uint8_t *)d;
  *f = (double)*i;
  free(d);
  return ok ? NULL : node_err(I, n, "the value must be one element");
}

/* Reshape of x (argument xa, struct info si) to dims with a -1 whose divisibility the analyzer
 * cannot show (x: f32[n] to [-1, 2]): the shape as a run-time value, the VM's reshape infers the
 * -1 and checks the element count, then a match_cast to dims with the -1 as x's element count
 * over the product of the others (checked by the VM too). False when there is no such -1, or
 * the count is provably not divisible (the reshape's own error stands). */
static bool reshape_checked(imp *I, const Onnx__NodeProto *n, rx_node *xa, const rx_sinfo *si,
                            const rx_expr **dims, int nd, rx_var **out) {
  int infer = -1;
  const rx_expr *po = rx_sym_const(I->m, 1);
  for (int k = 0; k < nd; k++) {
    if (rx_expr_is_const(dims[k], -1))
      infer = k;
    else if (dims[k]->kind == RX_EXPR_CONST && dims[k]->value < 0)
      return false;
    else
      po = rx_sym_mul(I->m, po, dims[k]);
  }
  if (infer < 0 || !si || si->kind != RX_SINFO_TENSOR || !si->shape || rx_expr_is_const(po, 0))
    return false;
  const rx_expr *px = rx_sym_const(I->m, 1);
  for (int k = 0; k < si->ndim; k++) px = rx_sym_mul(I->m, px, si->shape[k]);
  const rx_expr *rem = rx_analyzer_simplify(I->an, rx_expr_floormod(I->m->ctx, px, po));
  if (rem->kind == RX_EXPR_CONST) return false; /* provably (not) divisible: not this case */
  val sv = {.kind = V_SYM, .sndim = 1, .slen = nd};
  memcpy(sv.s, dims, sizeof *dims * (size_t)nd);
  rx_var *t, *st, *rr;
  rx_node *a[2];
  rx_status e = sym_tensor(I, n, &sv, &t);
  a[0] = e ? NULL : rx_arg_var(I->b, t);
  if (!e) e = rx_emit_op(I->b, "tensor_to_shape", a, 1, NULL, 0, NULL, &st);
  a[0] = xa;
  a[1] = e ? NULL : rx_arg_var(I->b, st);
  if (!e) e = rx_emit_op(I->b, "reshape", a, 2, NULL, 0, NULL, &rr);
  if (e) {
    rx_status_free(e);
    return false;
  }
  const rx_expr *want[SYM_MAX];
  memcpy(want, dims, sizeof *dims * (size_t)nd);
  want[infer] = rx_analyzer_simplify(I->an, rx_sym_floordiv(I->m, px, po));
  return match_cast_to(I, rr, si->dtype, nd, want, out);
}

/* Expand of x to the shape dims[0..nd): bidirectional broadcast, x + zeros(the result's shape)
 * (x || false for bool). Each result dim from x's dim a and the shape's b (aligned at the right):
 * a where b is 1, b where a is 1, else a constant a (a valid model has b equal to it or 1: a shape
 * from run time need not be known), else b. A dim of x that the analyzer cannot show equal to
 * the result's (BERT's token types [1, min(seq, 512)] to [batch, seq]) is match_cast to it,
 * which the VM checks when it runs. */
static rx_status expand_to(imp *I, const Onnx__NodeProto *n, val *x, const rx_expr **dims, int nd,
                           rx_var **out) {
  rx_node *a[2];
  const rx_attr *at;
  rx_var *xv = x->kind == V_TENSOR ? x->var : NULL;
  if (x->kind == V_SYM) /* a shape value (a small integer ConstantOfShape): as a tensor */
    RX_RETURN_IF_ERROR(sym_tensor(I, n, x, &xv));
  if (x->kind == V_FCONST) { /* a float constant: full([1, ...], f) */
    const rx_expr *ones[SYM_MAX];
    for (int k = 0; k < x->sndim && k < SYM_MAX; k++) ones[k] = rx_sym_const(I->m, 1);
    a[0] = rx_arg_shape(I->b, ones, x->sndim < SYM_MAX ? x->sndim : SYM_MAX);
    a[1] = rx_arg_float(I->b, x->f);
    at = rx_attr_dtype(I->m, "dtype", x->sdt ? x->sdt : RX_DTYPE_F32);
    RX_RETURN_IF_ERROR(emit(I, n, "full", a, 2, &at, 1, &xv));
  }
  const rx_sinfo *si = xv ? rx_var_sinfo(xv) : NULL;
  if (!si || si->kind != RX_SINFO_TENSOR)
    return node_err(I, n, "input 0 ('%s') must be a tensor", input(n, 0));
  const rx_expr *res[SYM_MAX], *xd[SYM_MAX];
  int rn = si->shape && si->ndim > nd ? si->ndim : nd;
  memcpy(res, dims, sizeof *dims * (size_t)nd);
  if (si->shape && rn <= SYM_MAX) {
    const rx_expr *one = rx_sym_const(I->m, 1);
    bool cast = false;
    for (int k = 0; k < rn; k++) {
      int ka = k - (rn - si->ndim), kb = k - (rn - nd);
      const rx_expr *da = ka >= 0 ? si->shape[ka] : one, *db = kb >= 0 ? dims[kb] : one;
      bool a_fixed = da->kind == RX_EXPR_CONST && da->value != 1;
      res[k] = rx_expr_is_const(db, 1) || da == db || a_fixed ? da : db;
      if (ka < 0) continue;
      xd[ka] = da;
      if (da != res[k] && da->kind != RX_EXPR_CONST &&
          rx_analyzer_prove(I->an, rx_expr_cmp(I->m->ctx, RX_EXPR_EQ, da, res[k])) != RX_TRUE) {
        xd[ka] = res[k];
        cast = true;
      }
    }
    if (cast && !match_cast_to(I, xv, si->dtype, si->ndim, xd, &xv))
      return node_err(I, n, "match_cast of input 0 to the expanded dims failed");
  }
  a[0] = rx_arg_shape(I->b, res, rn);
  at = rx_attr_dtype(I->m, "dtype", si->dtype);
  rx_var *z;
  RX_RETURN_IF_ERROR(emit(I, n, "zeros", a, 1, &at, 1, &z));
  a[0] = rx_arg_var(I->b, xv);
  a[1] = rx_arg_var(I->b, z);
  return emit(I, n, si->dtype == RX_DTYPE_BOOL ? "logical_or" : "add", a, 2, NULL, 0, out);
}

/* Reshape, Expand and ConstantOfShape to a shape computed from symbolic values or at run time */
static rx_status do_reshape_expand(imp *I, const Onnx__NodeProto *n, const char *rop) {
  const char *op = n->op_type;
  rx_node *a[5] = {0};
  const rx_attr *at[4];
  rx_var *r = NULL;
  val *shp;
  bool cos_ = op[0] == 'C';
  RX_RETURN_IF_ERROR(sym_input(I, n, cos_ ? 0 : 1, &shp));
  const rx_expr *dims[SYM_MAX];
  val *x = cos_ ? NULL : get(I, input(n, 0));
  if (!cos_ && !x) return node_err(I, n, "input is not defined");
  const rx_sinfo *si = tsinfo(x);
  for (int k = 0; k < shp->slen; k++) {
    dims[k] = shp->s[k];
    if (op[0] != 'R' && dims[k]->kind == RX_EXPR_CONST && dims[k]->value < 0)
      return node_err(I, n, "dim %d of the shape is negative (%lld); each must be a size (>= 0)", k,
                      (long long)dims[k]->value);
    if (op[0] == 'R' && rx_expr_is_const(dims[k], 0) && !onnx_attr_i(n, "allowzero", 0)) {
      if (!si || !si->shape || k >= si->ndim)
        return node_err(I, n, "a 0 in the target shape copies an unknown input dim");
      dims[k] = si->shape[k];
    }
  }
  if (op[0] == 'R') {
    RX_RETURN_IF_ERROR(arg(I, n, input(n, 0), &a[0]));
    a[1] = rx_arg_shape(I->b, dims, shp->slen);
    rx_status e = rx_emit_op(I->b, "reshape", a, 2, NULL, 0, NULL, &r);
    if (e && reshape_checked(I, n, a[0], si, dims, shp->slen, &r)) {
      rx_status_free(e); /* the -1's divisibility is checked when the program runs */
      e = NULL;
    }
    RX_RETURN_IF_ERROR(at_node(I, n, e));
  } else if (op[0] == 'E') {
    RX_RETURN_IF_ERROR(expand_to(I, n, x, dims, shp->slen, &r));
  } else {
    const Onnx__AttributeProto *va = onnx_attr(n, "value");
    rx_dtype dt = RX_DTYPE_F32;
    double fill = 0;
    int64_t ifill = 0;
    if (va && va->t) {
      const Onnx__TensorProto *t = va->t;
      if (!onnx_dtype_of(t->data_type, &dt)) return node_err(I, n, "unsupported value type");
      RX_RETURN_IF_ERROR(one_value(I, n, t, dt, &fill, &ifill));
    }
    /* a short integer or bool vector stays a shape value (the Expand shapes of PyTorch) */
    int64_t count = 1;
    for (int k = 0; k < shp->slen; k++)
      count = dims[k]->kind == RX_EXPR_CONST && count <= SYM_MAX ? count * dims[k]->value : -1;
    if (!rx_dtype_is_float(dt) && shp->slen <= 1 && count >= 0 && count <= SYM_MAX) {
      val out = {.name = n->output[0], .kind = V_SYM, .sndim = shp->slen, .sdt = dt};
      out.slen = (int)count;
      for (int k = 0; k < out.slen; k++) out.s[k] = rx_sym_const(I->m, ifill);
      *def(I, n->output[0]) = out;
      return NULL;
    }
    a[0] = rx_arg_shape(I->b, dims, shp->slen);
    a[1] = rx_dtype_is_float(dt) ? rx_arg_float(I->b, fill) : rx_arg_int(I->b, ifill);
    at[0] = rx_attr_dtype(I->m, "dtype", dt);
    RX_RETURN_IF_ERROR(emit(I, n, "full", a, 2, at, 1, &r));
  }
  def_tensor(I, n, r);
  return NULL;
}

/* Transpose: permute */
/* Reshape; with a target shape known at import, a reshape to it */
static rx_status do_reshape(imp *I, const Onnx__NodeProto *n, const char *rop) {
  rx_node *a[5] = {0};
  rx_var *r = NULL;
  val *xv = input(n, 0) ? get(I, input(n, 0)) : NULL,
      *tv = input(n, 1) ? get(I, input(n, 1)) : NULL;
  if (xv && tv && xv->kind == V_SYM && tv->kind == V_SYM && tv->slen <= 1) {
    /* a shape value to a vector ([-1], [0] or [its length]) or to a scalar ([], one value):
     * the same values */
    int64_t want = tv->slen ? (tv->s[0]->kind == RX_EXPR_CONST ? tv->s[0]->value : -2) : 1;
    if (want == -1 || want == xv->slen || (want == 0 && !onnx_attr_i(n, "allowzero", 0))) {
      val out = *xv;
      out.name = n->output[0];
      out.sndim = tv->slen;
      out.tvar = NULL;
      *def(I, n->output[0]) = out;
      return NULL;
    }
  }
  if (input(n, 1) && get(I, input(n, 1)) && get(I, input(n, 1))->kind == V_TENSOR) {
    /* a target shape computed at run time: reshape to the Shape value (rank-only; the VM checks
     * the element count, and infers a -1), then match_cast to fresh dims */
    val *x = input(n, 0) ? get(I, input(n, 0)) : NULL, *sv = get(I, input(n, 1));
    int len = runtime_len(sv);
    const rx_sinfo *si = tsinfo(x);
    if (!si || len < 0 || rank_of(sv) != 1)
      return node_err(I, n,
                      "a target shape computed at run time must be a 1-D integer tensor "
                      "of constant length at most %d",
                      SYM_MAX);
    rx_var *t, *rr;
    a[0] = rx_arg_var(I->b, sv->var);
    if (!onnx_attr_i(n, "allowzero", 0) && si->shape) {
      /* a 0 copies x's dim at its index: where(shape == 0, x's dims (0 past x's rank), shape);
       * the VM's reshape infers a -1 after that */
      val xs = {.kind = V_SYM, .sndim = 1, .slen = len};
      for (int k = 0; k < len; k++) xs.s[k] = rx_sym_const(I->m, 0);
      for (int k = 0; k < len && k < si->ndim; k++) xs.s[k] = si->shape[k];
      rx_var *xt, *z;
      RX_RETURN_IF_ERROR(sym_tensor(I, n, &xs, &xt));
      a[1] = rx_arg_int(I->b, 0);
      RX_RETURN_IF_ERROR(emit(I, n, "equal", a, 2, NULL, 0, &z));
      rx_node *w[3] = {rx_arg_var(I->b, z), rx_arg_var(I->b, xt), a[0]};
      RX_RETURN_IF_ERROR(emit(I, n, "where", w, 3, NULL, 0, &z));
      a[0] = rx_arg_var(I->b, z);
    }
    RX_RETURN_IF_ERROR(emit(I, n, "tensor_to_shape", a, 1, NULL, 0, &t));
    a[0] = rx_arg_var(I->b, x->var);
    a[1] = rx_arg_var(I->b, t);
    RX_RETURN_IF_ERROR(emit(I, n, "reshape", a, 2, NULL, 0, &rr));
    const rx_expr *dims[SYM_MAX];
    for (int k = 0; k < len; k++) dims[k] = sv->rt ? sv->s[k] : fresh_dim(I);
    if (!match_cast_to(I, rr, si->dtype, len, dims, &r))
      return node_err(I, n, "match_cast of the reshaped value failed");
    def_tensor(I, n, r);
    return NULL;
  }
  return do_reshape_expand(I, n, rop);
}

static rx_status do_transpose(imp *I, const Onnx__NodeProto *n, const char *rop) {
  rx_node *a[5] = {0};
  const rx_attr *at[4];
  rx_var *r = NULL;
  RX_RETURN_IF_ERROR(arg(I, n, input(n, 0), &a[0]));
  const Onnx__AttributeProto *p = onnx_attr(n, "perm");
  int na = 0;
  if (p && p->n_ints) {
    at[0] = rx_attr_ints(I->m, "axes", p->ints, (int)p->n_ints);
    na = 1;
  }
  RX_RETURN_IF_ERROR(emit(I, n, "permute", a, 1, at, na, &r));
  def_tensor(I, n, r);
  return NULL;
}

/* Cast: of symbolic values and float constants at import (a shape value cast to a float type,
 * unless one constant, becomes its tensor and a cast), else cast */
static rx_status do_cast(imp *I, const Onnx__NodeProto *n, const char *rop) {
  rx_node *a[5] = {0};
  const rx_attr *at[4];
  rx_var *r = NULL;
  val *x = input(n, 0) ? get(I, input(n, 0)) : NULL;
  rx_dtype dt;
  if (!x) return node_err(I, n, "input is not defined");
  if (!onnx_dtype_of((int32_t)onnx_attr_i(n, "to", 0), &dt))
    return node_err(I, n, "unsupported target type %lld", (long long)onnx_attr_i(n, "to", 0));
  bool fl = rx_dtype_is_float(dt);
  if (x->kind == V_FCONST || (x->kind == V_SYM && !fl) ||
      (x->kind == V_SYM && x->slen == 1 && x->s[0]->kind == RX_EXPR_CONST)) {
    val out = *x;
    out.name = n->output[0];
    out.sdt = dt;
    out.tvar = NULL;
    if (x->kind == V_SYM && fl) { /* one integer constant as a float */
      out.kind = V_FCONST;
      out.f = (double)x->s[0]->value;
    } else if (x->kind == V_FCONST && !fl) { /* a float constant as an integer (truncated) */
      out.kind = V_SYM;
      out.slen = 1;
      out.s[0] = rx_sym_const(I->m, dt == RX_DTYPE_BOOL ? x->f != 0 : (int64_t)x->f);
    } else if (dt == RX_DTYPE_BOOL) {
      for (int k = 0; k < out.slen; k++)
        out.s[k] = rx_analyzer_simplify(
            I->an, rx_expr_cmp(I->m->ctx, RX_EXPR_NE, x->s[k], rx_sym_const(I->m, 0)));
    }
    *def(I, n->output[0]) = out;
    return NULL;
  }
  if (x->kind == V_SYM) {
    RX_RETURN_IF_ERROR(sym_tensor(I, n, x, &r));
    a[0] = rx_arg_var(I->b, r);
  } else {
    RX_RETURN_IF_ERROR(arg(I, n, input(n, 0), &a[0]));
  }
  at[0] = rx_attr_dtype(I->m, "dtype", dt);
  RX_RETURN_IF_ERROR(emit(I, n, "cast", a, 1, at, 1, &r));
  def_tensor(I, n, r);
  return NULL;
}

/* ReduceMean, ReduceSum, ReduceMax, ReduceMin (axes as attribute or input); rop: the relaxc
 * reduction */
static rx_status do_reduce(imp *I, const Onnx__NodeProto *n, const char *rop) {
  rx_node *a[5] = {0};
  const rx_attr *at[4];
  rx_var *r = NULL;
  int64_t axes[SYM_MAX];
  int na;
  RX_RETURN_IF_ERROR(int_list(I, n, 1, "axes", axes, &na));
  RX_RETURN_IF_ERROR(arg(I, n, input(n, 0), &a[0]));
  int nat = 0;
  if (na > 0)
    at[nat++] = rx_attr_ints(I->m, "axes", axes, na);
  else if (na == 0 && onnx_attr_i(n, "noop_with_empty_axes", 0)) {
    def_alias(I, n, get(I, input(n, 0)));
    return NULL;
  }
  at[nat++] = rx_attr_bool(I->m, "keepdims", onnx_attr_i(n, "keepdims", 1) != 0);
  RX_RETURN_IF_ERROR(emit(I, n, rop, a, 1, at, nat, &r));
  def_tensor(I, n, r);
  return NULL;
}

/* ArgMax / ArgMin: axis (default 0), keepdims (default 1), select_last_index (opset 12) */
static rx_status do_arg_extreme(imp *I, const Onnx__NodeProto *n, const char *rop) {
  rx_node *a[5] = {0};
  const rx_attr *at[4];
  rx_var *r = NULL;
  RX_RETURN_IF_ERROR(arg(I, n, input(n, 0), &a[0]));
  at[0] = rx_attr_int(I->m, "axis", onnx_attr_i(n, "axis", 0));
  at[1] = rx_attr_bool(I->m, "keepdims", onnx_attr_i(n, "keepdims", 1) != 0);
  at[2] = rx_attr_bool(I->m, "select_last_index", onnx_attr_i(n, "select_last_index", 0) != 0);
  RX_RETURN_IF_ERROR(emit(I, n, rop, a, 1, at, 3, &r));
  def_tensor(I, n, r);
  return NULL;
}

/* CumSum: the axis input a constant gives one cumsum; a run-time axis (a graph input) gives the
 * scan along every axis, chosen by where(axis == k || axis == k - rank) (an axis out of range
 * is not detected at run time: it gives the last axis's scan). */
static rx_status do_cumsum(imp *I, const Onnx__NodeProto *n, const char *rop) {
  rx_node *a[5] = {0};
  const rx_attr *at[4];
  rx_var *r = NULL;
  int rank = rank_of(input(n, 0) ? get(I, input(n, 0)) : NULL);
  val *av = input(n, 1) ? get(I, input(n, 1)) : NULL;
  if (!av) return node_err(I, n, "the axis input is missing");
  RX_RETURN_IF_ERROR(arg(I, n, input(n, 0), &a[0]));
  at[1] = rx_attr_bool(I->m, "exclusive", onnx_attr_i(n, "exclusive", 0) != 0);
  at[2] = rx_attr_bool(I->m, "reverse", onnx_attr_i(n, "reverse", 0) != 0);
  if (av->kind == V_SYM && av->slen == 1 && av->s[0]->kind == RX_EXPR_CONST) {
    at[0] = rx_attr_int(I->m, "axis", av->s[0]->value);
    RX_RETURN_IF_ERROR(emit(I, n, "cumsum", a, 1, at, 3, &r));
    def_tensor(I, n, r);
    return NULL;
  }
  if (rank < 1) return node_err(I, n, "a run-time axis needs the input's rank (got none)");
  rx_node *ax;
  RX_RETURN_IF_ERROR(arg(I, n, input(n, 1), &ax));
  for (int k = rank - 1; k >= 0; k--) {
    rx_var *c, *e0, *e1, *cond;
    at[0] = rx_attr_int(I->m, "axis", k);
    RX_RETURN_IF_ERROR(emit(I, n, "cumsum", a, 1, at, 3, &c));
    if (!r) {
      r = c;
      continue;
    }
    rx_node *b[3] = {ax, rx_arg_int(I->b, k)};
    RX_RETURN_IF_ERROR(emit(I, n, "equal", b, 2, NULL, 0, &e0));
    b[1] = rx_arg_int(I->b, k - rank);
    RX_RETURN_IF_ERROR(emit(I, n, "equal", b, 2, NULL, 0, &e1));
    b[0] = rx_arg_var(I->b, e0);
    b[1] = rx_arg_var(I->b, e1);
    RX_RETURN_IF_ERROR(emit(I, n, "logical_or", b, 2, NULL, 0, &cond));
    b[0] = rx_arg_var(I->b, cond);
    b[1] = rx_arg_var(I->b, c);
    b[2] = rx_arg_var(I->b, r);
    RX_RETURN_IF_ERROR(emit(I, n, "where", b, 3, NULL, 0, &r));
  }
  def_tensor(I, n, r);
  return NULL;
}

/* Hardmax: 1 where the index along axis is argmax's (the first of ties), else 0:
 * equal(arange(d) with a unit dim per axis after it, argmax(x, keepdims)) cast to x's dtype.
 * Opsets before 13 coerce the input to 2-D at axis (default 1); only the last-axis form is
 * taken. */
static rx_status do_hardmax(imp *I, const Onnx__NodeProto *n, const char *rop) {
  const rx_sinfo *si = tsinfo(input(n, 0) ? get(I, input(n, 0)) : NULL);
  if (!si || si->kind != RX_SINFO_TENSOR || !si->shape || si->ndim < 1)
    return node_err(I, n, "expects an input of known shape and rank >= 1");
  int rank = si->ndim;
  int64_t axis = onnx_attr_i(n, "axis", I->opset >= 13 ? -1 : 1);
  if (axis < -rank || axis >= rank)
    return node_err(I, n, "axis %lld is out of range for rank %d", (long long)axis, rank);
  if (axis < 0) axis += rank;
  if (I->opset < 13 && axis != rank - 1)
    return node_err(I, n, "opset < 13 Hardmax over axis %lld (flattening) is not supported",
                    (long long)axis);
  rx_node *a[3];
  const rx_attr *at[2];
  rx_var *idx, *io, *eq, *r;
  RX_RETURN_IF_ERROR(arg(I, n, input(n, 0), &a[0]));
  at[0] = rx_attr_int(I->m, "axis", axis);
  at[1] = rx_attr_bool(I->m, "keepdims", true);
  RX_RETURN_IF_ERROR(emit(I, n, "argmax", a, 1, at, 2, &idx));
  a[0] = rx_arg_prim(I->b, RX_DTYPE_I64, rx_sym_const(I->m, 0));
  a[1] = rx_arg_prim(I->b, RX_DTYPE_I64, si->shape[axis]);
  at[0] = rx_attr_dtype(I->m, "dtype", RX_DTYPE_I64);
  RX_RETURN_IF_ERROR(emit(I, n, "arange", a, 2, at, 1, &io));
  if (axis < rank - 1) {
    int64_t axes[SYM_MAX];
    int na = 0;
    for (int64_t k = 1; k < rank - axis && na < SYM_MAX; k++) axes[na++] = k;
    at[0] = rx_attr_ints(I->m, "axes", axes, na);
    a[0] = rx_arg_var(I->b, io);
    RX_RETURN_IF_ERROR(emit(I, n, "expand_dims", a, 1, at, 1, &io));
  }
  a[0] = rx_arg_var(I->b, io);
  a[1] = rx_arg_var(I->b, idx);
  RX_RETURN_IF_ERROR(emit(I, n, "equal", a, 2, NULL, 0, &eq));
  a[0] = rx_arg_var(I->b, eq);
  at[0] = rx_attr_dtype(I->m, "dtype", si->dtype);
  RX_RETURN_IF_ERROR(emit(I, n, "cast", a, 1, at, 1, &r));
  def_tensor(I, n, r);
  return NULL;
}

/* GatherElements: take_along_axis (axis default 0) */
static rx_status do_gather_elements(imp *I, const Onnx__NodeProto *n, const char *rop) {
  rx_node *a[2];
  rx_var *r = NULL;
  RX_RETURN_IF_ERROR(arg(I, n, input(n, 0), &a[0]));
  RX_RETURN_IF_ERROR(arg(I, n, input(n, 1), &a[1]));
  const rx_attr *at = rx_attr_int(I->m, "axis", onnx_attr_i(n, "axis", 0));
  RX_RETURN_IF_ERROR(emit(I, n, "take_along_axis", a, 2, &at, 1, &r));
  def_tensor(I, n, r);
  return NULL;
}

/* Range: of symbolic values at import, else arange */
static rx_status do_range(imp *I, const Onnx__NodeProto *n, const char *rop) {
  rx_node *a[5] = {0};
  rx_var *r = NULL;
  val *v[3];
  bool all_const = true;
  for (int k = 0; k < 3; k++) {
    RX_RETURN_IF_ERROR(sym_input(I, n, (size_t)k, &v[k]));
    if (v[k]->s[0]->kind != RX_EXPR_CONST) all_const = false;
  }
  if (all_const) {
    int64_t st = v[0]->s[0]->value, en = v[1]->s[0]->value, step = v[2]->s[0]->value;
    if (step == 0) /* ONNX Runtime's words */
      return node_err(I, n, "delta in Range operator can not be zero!");
    val out = {.name = n->output[0], .kind = V_SYM, .sndim = 1};
    for (int64_t i = st; step > 0 ? i < en : i > en; i += step) {
      if (out.slen == SYM_MAX) goto tensor_range;
      out.s[out.slen++] = rx_sym_const(I->m, i);
    }
    *def(I, n->output[0]) = out;
    return NULL;
  }
tensor_range:
  for (int k = 0; k < 3; k++) a[k] = rx_arg_prim(I->b, RX_DTYPE_I64, v[k]->s[0]);
  RX_RETURN_IF_ERROR(emit(I, n, "arange", a, 3, NULL, 0, &r));
  def_tensor(I, n, r);
  return NULL;
}

/* LeakyRelu: where(x >= 0, x, alpha * x) */
/* ---- activations and reductions composed of relaxc's ops ---- */

/* op(args) as a new binding, returned as an argument for the next op (*last: its variable). */
static rx_status ex(imp *I, const Onnx__NodeProto *n, const char *op, int nargs, rx_node *a0,
                    rx_node *a1, rx_node *a2, rx_node **out, rx_var **last) {
  rx_node *a[3] = {a0, a1, a2};
  rx_var *v = NULL;
  RX_RETURN_IF_ERROR(emit(I, n, op, a, nargs, NULL, 0, &v));
  *out = rx_arg_var(I->b, v);
  if (last) *last = v;
  return NULL;
}
#define EX1(op, x, out)       RX_RETURN_IF_ERROR(ex(I, n, op, 1, x, NULL, NULL, &(out), &r))
#define EX2(op, x, y, out)    RX_RETURN_IF_ERROR(ex(I, n, op, 2, x, y, NULL, &(out), &r))
#define EX3(op, x, y, z, out) RX_RETURN_IF_ERROR(ex(I, n, op, 3, x, y, z, &(out), &r))
#define FL(v)                 rx_arg_float(I->b, (v))

/* Dropout: the input under a new name, and the mask output all true. Training mode (input 2)
 * with a ratio over 0 drops at random, which relaxc does not do: refused at import when both
 * are constants, else checked when the program runs (a match_cast of training_mode && ratio >
 * 0 to 0 fails, naming dropout_training_mode_unsupported). */
static rx_status do_dropout(imp *I, const Onnx__NodeProto *n, const char *rop) {
  val *x = input(n, 0) ? get(I, input(n, 0)) : NULL;
  if (!x) return node_err(I, n, "input is not defined");
  val *ratio = input(n, 1) ? get(I, input(n, 1)) : NULL,
      *tm = input(n, 2) ? get(I, input(n, 2)) : NULL;
  bool zero_ratio = ratio && ratio->kind == V_FCONST && ratio->f == 0;
  if (I->opset < 12 && onnx_attr_i(n, "is_test", 1) == 0 && onnx_attr_f(n, "ratio", 0.5) != 0)
    return node_err(I, n, "is_test=0 (training: random dropout) is not supported");
  if (tm && !zero_ratio) {
    bool const_true = tm->kind == V_SYM && tm->slen == 1 && !rx_expr_is_const(tm->s[0], 0);
    if (tm->kind == V_SYM && !const_true) tm = NULL; /* constant false: inference */
    if (const_true && (!ratio || ratio->kind == V_FCONST))
      return node_err(I, n, "training_mode with ratio over 0 drops at random: not supported");
  }
  if (tm && !zero_ratio) { /* at run time: fail unless !(training_mode && ratio > 0) */
    rx_node *a[2], *t;
    rx_var *r = NULL, *sh, *chk;
    RX_RETURN_IF_ERROR(arg(I, n, input(n, 2), &t));
    if (ratio && ratio->kind != V_FCONST) {
      RX_RETURN_IF_ERROR(arg(I, n, input(n, 1), &a[0]));
      EX2("greater", a[0], FL(0.0), a[1]);
      EX2("logical_and", t, a[1], t);
    }
    const rx_attr *at = rx_attr_dtype(I->m, "dtype", RX_DTYPE_I64);
    RX_RETURN_IF_ERROR(emit(I, n, "cast", &t, 1, &at, 1, &r));
    a[0] = rx_arg_var(I->b, r);
    RX_RETURN_IF_ERROR(at_node(I, n,
                               rx_emit_op(I->b, "tensor_to_shape", a, 1, NULL, 0,
                                          "dropout_training_mode_unsupported", &sh)));
    const rx_expr *zero = rx_sym_const(I->m, 0);
    RX_RETURN_IF_ERROR(at_node(I, n,
                               rx_emit_match_cast(I->b, rx_arg_var(I->b, sh),
                                                  rx_sinfo_shape(I->m, 1, &zero), NULL, &chk)));
  }
  if (n->n_output > 1 && n->output[1] && n->output[1][0]) { /* the mask: all true */
    const rx_sinfo *si = tsinfo(x);
    if (!si || si->kind != RX_SINFO_TENSOR || !si->shape)
      return node_err(I, n, "the mask output needs the input's shape");
    rx_node *a[2] = {rx_arg_shape(I->b, si->shape, si->ndim), rx_arg_int(I->b, 1)};
    const rx_attr *at = rx_attr_dtype(I->m, "dtype", RX_DTYPE_BOOL);
    rx_var *mask;
    RX_RETURN_IF_ERROR(emit(I, n, "full", a, 2, &at, 1, &mask));
    def_named(I, n->output[1], mask);
  }
  def_alias(I, n, x);
  return NULL;
}

/* LayerNormalization: Y by layer_norm; the Mean and InvStdDev outputs, where used, as
 * mean(x) and rsqrt(mean((x - mean)^2) + epsilon) over the normalized axes (kept as 1s), in
 * f32 (stash_type 1) */
static rx_status do_layer_norm(imp *I, const Onnx__NodeProto *n, const char *rop) {
  const rx_sinfo *si = tsinfo(input(n, 0) ? get(I, input(n, 0)) : NULL);
  int rank = si && si->kind == RX_SINFO_TENSOR ? si->ndim : -1;
  if (rank < 0) return node_err(I, n, "the input's rank is not known");
  if (!input(n, 2))
    return node_err(I, n, "LayerNormalization without a bias (B) is not supported yet");
  rx_node *a[5] = {0};
  const rx_attr *at[4];
  rx_var *r = NULL;
  int64_t axis = onnx_attr_i(n, "axis", -1), axes[SYM_MAX];
  if (axis < 0) axis += rank;
  if (axis < 0 || axis >= rank) return node_err(I, n, "axis out of range for rank %d", rank);
  double eps = onnx_attr_f(n, "epsilon", 1e-5);
  int na = 0;
  for (int64_t k = axis; k < rank && na < SYM_MAX; k++) axes[na++] = k;
  for (int k = 0; k < 3; k++) RX_RETURN_IF_ERROR(arg(I, n, input(n, (size_t)k), &a[k]));
  at[0] = rx_attr_ints(I->m, "axes", axes, na);
  at[1] = rx_attr_float(I->m, "epsilon", eps);
  RX_RETURN_IF_ERROR(emit(I, n, "layer_norm", a, 3, at, 2, &r));
  def_tensor(I, n, r);
  bool mean_out = n->n_output > 1 && n->output[1] && n->output[1][0];
  bool inv_out = n->n_output > 2 && n->output[2] && n->output[2][0];
  if (!mean_out && !inv_out) return NULL;
  rx_node *x = a[0], *mean, *t;
  if (onnx_attr_i(n, "stash_type", 1) != 1)
    return node_err(I, n, "stash_type other than 1 (f32) is not supported");
  if (si->dtype != RX_DTYPE_F32) {
    at[2] = rx_attr_dtype(I->m, "dtype", RX_DTYPE_F32);
    RX_RETURN_IF_ERROR(emit(I, n, "cast", &x, 1, &at[2], 1, &r));
    x = rx_arg_var(I->b, r);
  }
  at[1] = rx_attr_bool(I->m, "keepdims", true);
  RX_RETURN_IF_ERROR(emit(I, n, "mean", &x, 1, at, 2, &r));
  mean = rx_arg_var(I->b, r);
  if (mean_out) def_named(I, n->output[1], r);
  if (!inv_out) return NULL;
  EX2("subtract", x, mean, t);
  EX2("multiply", t, t, t);
  RX_RETURN_IF_ERROR(emit(I, n, "mean", &t, 1, at, 2, &r));
  t = rx_arg_var(I->b, r);
  EX2("add", t, FL(eps), t);
  EX1("rsqrt", t, t);
  def_named(I, n->output[2], r);
  return NULL;
}

/* alpha (exp(x) - 1) for x <= 0, x above (Elu; Selu scales it by gamma) */
static rx_status do_elu(imp *I, const Onnx__NodeProto *n, const char *rop) {
  bool selu = !strcmp(rop, "selu");
  double alpha = onnx_attr_f(n, "alpha", selu ? 1.67326319217681884765625 : 1.0);
  rx_node *x, *t, *pos;
  rx_var *r = NULL;
  RX_RETURN_IF_ERROR(arg(I, n, input(n, 0), &x));
  EX1("exp", x, t);
  EX2("subtract", t, FL(1.0), t);
  EX2("multiply", t, FL(alpha), t);
  EX2("greater", x, FL(0.0), pos);
  EX3("where", pos, x, t, t);
  if (selu) EX2("multiply", t, FL(onnx_attr_f(n, "gamma", 1.05070102214813232421875)), t);
  def_tensor(I, n, r);
  return NULL;
}

/* The element-wise functions of one input that ONNX defines by formula: rop names which. */
static rx_status do_act(imp *I, const Onnx__NodeProto *n, const char *rop) {
  rx_node *x, *t, *u;
  rx_var *r = NULL;
  RX_RETURN_IF_ERROR(arg(I, n, input(n, 0), &x));
  if (!strcmp(rop, "celu")) { /* max(0, x) + min(0, alpha (exp(x / alpha) - 1)) */
    double alpha = onnx_attr_f(n, "alpha", 1.0);
    EX2("divide", x, FL(alpha), t);
    EX1("exp", t, t);
    EX2("subtract", t, FL(1.0), t);
    EX2("multiply", t, FL(alpha), t);
    EX2("minimum", t, FL(0.0), t);
    EX2("maximum", x, FL(0.0), u);
    EX2("add", u, t, t);
  } else if (!strcmp(rop, "hard_sigmoid") || !strcmp(rop, "hard_swish")) {
    bool swish = !strcmp(rop, "hard_swish"); /* x hard_sigmoid(x) with alpha 1/6, beta 0.5 */
    EX2("multiply", x, FL(swish ? 1.0 / 6 : onnx_attr_f(n, "alpha", 0.2)), t);
    EX2("add", t, FL(swish ? 0.5 : onnx_attr_f(n, "beta", 0.5)), t);
    EX2("minimum", t, FL(1.0), t);
    EX2("maximum", t, FL(0.0), t);
    if (swish) EX2("multiply", x, t, t);
  } else if (!strcmp(rop, "softplus")) { /* log(exp(x) + 1) */
    EX1("exp", x, t);
    EX2("add", t, FL(1.0), t);
    EX1("log", t, t);
  } else if (!strcmp(rop, "softsign")) { /* x / (1 + |x|) */
    EX1("abs", x, t);
    EX2("add", t, FL(1.0), t);
    EX2("divide", x, t, t);
  } else if (!strcmp(rop, "thresholded_relu")) { /* x where x > alpha, else 0 */
    EX2("greater", x, FL(onnx_attr_f(n, "alpha", 1.0)), u);
    EX2("multiply", x, FL(0.0), t);
    EX3("where", u, x, t, t);
  } else if (!strcmp(rop, "mish")) { /* x tanh(log(exp(x) + 1)) */
    EX1("exp", x, t);
    EX2("add", t, FL(1.0), t);
    EX1("log", t, t);
    EX1("tanh", t, t);
    EX2("multiply", x, t, t);
  } else if (!strcmp(rop, "is_nan")) { /* NaN is the one value not equal to itself */
    EX2("not_equal", x, x, t);
  } else {
    return node_err(I, n, "internal: no activation '%s'", rop);
  }
  def_tensor(I, n, r);
  return NULL;
}

/* Tan, Sinh, Cosh, Asinh, Acosh, Atanh and Sign by their formulas over relaxc's ops (float
 * math: Sinh and Cosh overflow where exp(|x|) does; Asinh uses its odd symmetry so that large
 * negative x keeps its digits). Sign: x * 0 plus or minus 1 by the sign of x, so that NaN stays
 * NaN and integers stay integers. */
static rx_status do_formula(imp *I, const Onnx__NodeProto *n, const char *rop) {
  rx_node *x, *t, *u, *z;
  rx_var *r = NULL;
  RX_RETURN_IF_ERROR(arg(I, n, input(n, 0), &x));
  if (!strcmp(rop, "sign")) {
    const rx_sinfo *si = tsinfo(get(I, input(n, 0)));
    bool fl = !si || rx_dtype_is_float(si->dtype);
    rx_node *zero = fl ? FL(0.0) : rx_arg_int(I->b, 0), *one = fl ? FL(1.0) : rx_arg_int(I->b, 1);
    EX2("multiply", x, zero, z);
    EX2("add", z, one, t);
    EX2("subtract", z, one, u);
    rx_node *lt, *gt;
    EX2("less", x, zero, lt);
    EX2("greater", x, zero, gt);
    EX3("where", lt, u, z, u);
    EX3("where", gt, t, u, t);
  } else if (!strcmp(rop, "tan")) { /* sin(x) / cos(x) */
    EX1("sin", x, t);
    EX1("cos", x, u);
    EX2("divide", t, u, t);
  } else if (!strcmp(rop, "sinh") || !strcmp(rop, "cosh")) { /* (e^x -+ e^-x) / 2 */
    EX1("exp", x, t);
    EX1("neg", x, u);
    EX1("exp", u, u);
    EX2(rop[0] == 's' && rop[1] == 'i' ? "subtract" : "add", t, u, t);
    EX2("multiply", t, FL(0.5), t);
  } else if (!strcmp(rop, "asinh")) { /* sign(x) log(|x| + sqrt(x^2 + 1)) */
    EX1("abs", x, u);
    EX2("multiply", x, x, t);
    EX2("add", t, FL(1.0), t);
    EX1("sqrt", t, t);
    EX2("add", u, t, t);
    EX1("log", t, t);
    EX2("less", x, FL(0.0), u);
    EX1("neg", t, z);
    EX3("where", u, z, t, t);
  } else if (!strcmp(rop, "acosh")) { /* log(x + sqrt(x^2 - 1)) */
    EX2("multiply", x, x, t);
    EX2("subtract", t, FL(1.0), t);
    EX1("sqrt", t, t);
    EX2("add", x, t, t);
    EX1("log", t, t);
  } else if (!strcmp(rop, "atanh")) { /* log((1 + x) / (1 - x)) / 2 */
    EX2("add", x, FL(1.0), t);
    EX2("subtract", FL(1.0), x, u);
    EX2("divide", t, u, t);
    EX1("log", t, t);
    EX2("multiply", t, FL(0.5), t);
  } else {
    return node_err(I, n, "internal: no formula '%s'", rop);
  }
  def_tensor(I, n, r);
  return NULL;
}

/* Mod. fmod=0 (integers only, as ONNX says): a - (a // b) b with relaxc's flooring integer
 * divide, so the result has the sign of the divisor. fmod=1: the sign of the dividend, as C's
 * fmod and %: floats a - trunc(a / b) b (trunc: ceil below 0, floor above); integers the floored
 * remainder minus b where it is not 0 and its sign differs from a's. */
static rx_status do_mod(imp *I, const Onnx__NodeProto *n, const char *rop) {
  rx_node *a, *b, *t, *q, *c, *u;
  rx_var *r = NULL;
  RX_RETURN_IF_ERROR(arg(I, n, input(n, 0), &a));
  RX_RETURN_IF_ERROR(arg(I, n, input(n, 1), &b));
  const rx_sinfo *si = tsinfo(get(I, input(n, 0)));
  bool fl = si && rx_dtype_is_float(si->dtype), fm = onnx_attr_i(n, "fmod", 0) != 0;
  if (fl && !fm)
    return node_err(I, n, "fmod=0 on floating-point inputs (ONNX requires fmod=1 for them)");
  EX2("divide", a, b, q);
  if (fl) {
    EX1("floor", q, t);
    EX1("ceil", q, c);
    EX2("less", q, FL(0.0), u);
    EX3("where", u, c, t, q);
  }
  EX2("multiply", q, b, t);
  EX2("subtract", a, t, t);
  if (!fl && fm) {
    rx_node *zero = rx_arg_int(I->b, 0);
    EX2("less", t, zero, u);
    EX2("less", a, zero, c);
    EX2("not_equal", u, c, u);
    EX2("not_equal", t, zero, c);
    EX2("logical_and", u, c, u);
    EX2("subtract", t, b, c);
    EX3("where", u, c, t, t);
  }
  def_tensor(I, n, r);
  return NULL;
}

/* Sum, Mean, Max and Min of one or more inputs (broadcast): a chain of rop. */
static rx_status do_variadic(imp *I, const Onnx__NodeProto *n, const char *rop) {
  rx_node *acc = NULL, *x;
  rx_var *r = NULL;
  size_t count = 0;
  if (n->n_input == 2 && strcmp(rop, "mean") && strcmp(rop, "add"))
    return do_binary(I, n, rop); /* Max, Min of two: shape values too */
  for (size_t i = 0; i < n->n_input; i++) {
    if (!input(n, i)) continue;
    if (count++ == 0) {
      val *v = get(I, input(n, i));
      if (v && n->n_input == 1) { /* one input: that value */
        def_alias(I, n, v);
        return NULL;
      }
      RX_RETURN_IF_ERROR(arg(I, n, input(n, i), &acc));
      continue;
    }
    RX_RETURN_IF_ERROR(arg(I, n, input(n, i), &x));
    EX2(!strcmp(rop, "mean") ? "add" : rop, acc, x, acc);
  }
  if (count == 0) return node_err(I, n, "needs at least one input");
  if (!strcmp(rop, "mean")) EX2("divide", acc, FL((double)count), acc);
  def_tensor(I, n, r);
  return NULL;
}

/* ReduceL1, ReduceL2, ReduceSumSquare, ReduceLogSum, ReduceLogSumExp: an element-wise step, the
 * sum (do_reduce's axes and keepdims), and a step after. */
static rx_status do_reduce_by(imp *I, const Onnx__NodeProto *n, const char *rop) {
  rx_node *x, *t;
  rx_var *r = NULL;
  RX_RETURN_IF_ERROR(arg(I, n, input(n, 0), &x));
  if (!strcmp(rop, "l1"))
    EX1("abs", x, t);
  else if (!strcmp(rop, "l2") || !strcmp(rop, "sum_square"))
    EX2("multiply", x, x, t);
  else if (!strcmp(rop, "log_sum_exp"))
    EX1("exp", x, t);
  else
    t = x;
  int64_t axes[SYM_MAX];
  int na;
  RX_RETURN_IF_ERROR(int_list(I, n, 1, "axes", axes, &na));
  const rx_attr *at[2];
  int nat = 0;
  if (na > 0)
    at[nat++] = rx_attr_ints(I->m, "axes", axes, na);
  else if (na == 0 && onnx_attr_i(n, "noop_with_empty_axes", 0)) /* no reduction */
    return node_err(I, n, "noop_with_empty_axes with no axes is not supported");
  at[nat++] = rx_attr_bool(I->m, "keepdims", onnx_attr_i(n, "keepdims", 1) != 0);
  RX_RETURN_IF_ERROR(emit(I, n, "sum", &t, 1, at, nat, &r));
  t = rx_arg_var(I->b, r);
  if (!strcmp(rop, "l2")) EX1("sqrt", t, t);
  if (!strcmp(rop, "log_sum") || !strcmp(rop, "log_sum_exp")) EX1("log", t, t);
  def_tensor(I, n, r);
  return NULL;
}

/* CastLike: Cast to the dtype of input 1. */
static rx_status do_cast_like(imp *I, const Onnx__NodeProto *n, const char *rop) {
  (void)rop;
  const rx_sinfo *like = tsinfo(input(n, 1) ? get(I, input(n, 1)) : NULL);
  rx_node *x;
  rx_var *r = NULL;
  if (!like) return node_err(I, n, "input 1 (the dtype to cast to) is not a tensor");
  RX_RETURN_IF_ERROR(arg(I, n, input(n, 0), &x));
  const rx_attr *at[1] = {rx_attr_dtype(I->m, "dtype", like->dtype)};
  RX_RETURN_IF_ERROR(emit(I, n, "cast", &x, 1, at, 1, &r));
  def_tensor(I, n, r);
  return NULL;
}
/* ---- losses, channel rearrangements and normalizations composed of relaxc's ops ---- */

/* op(args) with attributes as a new binding, returned as an argument (*last: its variable). */
static rx_status exa(imp *I, const Onnx__NodeProto *n, const char *op, rx_node *const *a, int na,
                     const rx_attr *const *at, int nat, rx_node **out, rx_var **last) {
  rx_var *v = NULL;
  RX_RETURN_IF_ERROR(emit(I, n, op, a, na, at, nat, &v));
  *out = rx_arg_var(I->b, v);
  if (last) *last = v;
  return NULL;
}
#define EXA(op, x, at, nat, out) RX_RETURN_IF_ERROR(exa(I, n, op, &(x), 1, at, nat, &(out), &r))

/* reshape(x, dims) */
static rx_status reshape_to(imp *I, const Onnx__NodeProto *n, rx_node *x,
                            const rx_expr *const *dims, int k, rx_node **out, rx_var **last) {
  rx_node *a[2] = {x, rx_arg_shape(I->b, dims, k)};
  return exa(I, n, "reshape", a, 2, NULL, 0, out, last);
}

/* The shape of tensor input i: rank and dims known, rank within [lo, hi]. */
static rx_status known_shape(imp *I, const Onnx__NodeProto *n, size_t i, int lo, int hi,
                             const rx_sinfo **out) {
  const rx_sinfo *si = tsinfo(input(n, i) ? get(I, input(n, i)) : NULL);
  *out = si;
  if (!si || si->kind != RX_SINFO_TENSOR || !si->shape || si->ndim < lo || si->ndim > hi)
    return node_err(I, n, "input %zu must be a tensor of known shape and rank %d to %d", i, lo, hi);
  return NULL;
}

/* NegativeLogLikelihoodLoss of log-probabilities x [N, C, d1, ...] (input 0 of NLL, the
 * log_softmax of SoftmaxCrossEntropyLoss) and targets [N, d1, ...] (input 1): the loss
 * -x[n, t, d...] w[t] with the optional class weights w (input 2), 0 where t is ignore_index
 * (read at class 0 there, so an ignore_index outside [0, C) is never loaded); reduction "none",
 * "sum" or "mean" (the sum over the sum of the weights of the targets counted). */
static rx_status nll_of(imp *I, const Onnx__NodeProto *n, rx_node *x, rx_dtype dt, rx_var **out) {
  bool none = attr_s_is(n, "reduction", "none"), sum = attr_s_is(n, "reduction", "sum");
  if (!none && !sum && !attr_s_is(n, "reduction", "mean") && !attr_s_is(n, "reduction", ""))
    return node_err(I, n, "reduction must be \"none\", \"sum\" or \"mean\"");
  const Onnx__AttributeProto *ii = onnx_attr(n, "ignore_index");
  rx_node *t, *valid = NULL, *g, *w = NULL, *loss;
  rx_var *r = NULL;
  RX_RETURN_IF_ERROR(arg(I, n, input(n, 1), &t));
  if (ii && ii->has_i) {
    EX2("not_equal", t, rx_arg_int(I->b, ii->i), valid);
    EX3("where", valid, t, rx_arg_int(I->b, 0), t);
  }
  int64_t ax1 = 1;
  const rx_attr *at[2] = {rx_attr_ints(I->m, "axes", &ax1, 1), NULL};
  EXA("expand_dims", t, at, 1, g);
  rx_node *a[2] = {x, g};
  at[0] = rx_attr_int(I->m, "axis", 1);
  RX_RETURN_IF_ERROR(exa(I, n, "take_along_axis", a, 2, at, 1, &g, &r));
  at[0] = rx_attr_ints(I->m, "axes", &ax1, 1);
  EXA("squeeze", g, at, 1, g);
  EX1("neg", g, loss);
  if (input(n, 2)) {
    RX_RETURN_IF_ERROR(arg(I, n, input(n, 2), &a[0]));
    a[1] = t;
    at[0] = rx_attr_int(I->m, "axis", 0);
    RX_RETURN_IF_ERROR(exa(I, n, "take", a, 2, at, 1, &w, &r));
  }
  if (valid) {
    at[0] = rx_attr_dtype(I->m, "dtype", dt);
    EXA("cast", valid, at, 1, valid);
    if (w)
      EX2("multiply", w, valid, w);
    else
      w = valid;
  }
  if (w) EX2("multiply", loss, w, loss);
  if (!none) {
    at[0] = rx_attr_bool(I->m, "keepdims", false);
    EXA(sum || w ? "sum" : "mean", loss, at, 1, loss);
    if (!sum && w) {
      EXA("sum", w, at, 1, w);
      EX2("divide", loss, w, loss);
    }
  }
  *out = r;
  return NULL;
}

/* NegativeLogLikelihoodLoss (nll_of) and SoftmaxCrossEntropyLoss: nll_of the log_softmax of
 * the scores over the classes (axis 1), which is the optional second output log_prob. */
static rx_status do_nll_loss(imp *I, const Onnx__NodeProto *n, const char *rop) {
  const rx_sinfo *xs;
  RX_RETURN_IF_ERROR(known_shape(I, n, 0, 2, SYM_MAX, &xs));
  rx_node *x;
  rx_var *r = NULL, *lp = NULL;
  RX_RETURN_IF_ERROR(arg(I, n, input(n, 0), &x));
  if (!strcmp(rop, "sce")) {
    const rx_attr *at = rx_attr_int(I->m, "axis", 1);
    EXA("log_softmax", x, &at, 1, x);
    lp = r;
  }
  RX_RETURN_IF_ERROR(nll_of(I, n, x, xs->dtype, &r));
  def_tensor(I, n, r);
  if (n->n_output > 1 && n->output[1] && n->output[1][0]) {
    if (!lp) return node_err(I, n, "has one output");
    def_named(I, n->output[1], lp);
  }
  return NULL;
}

/* DepthToSpace (mode DCR or CRD) and SpaceToDepth of x [N, C, H, W] with blocksize b: a
 * reshape to rank 6, a permute and a reshape back. */
static rx_status do_depth_space(imp *I, const Onnx__NodeProto *n, const char *rop) {
  const rx_sinfo *xs;
  RX_RETURN_IF_ERROR(known_shape(I, n, 0, 4, 4, &xs));
  int64_t bs = onnx_attr_i(n, "blocksize", 0);
  if (bs < 1 || bs > (1 << 16)) return node_err(I, n, "blocksize must be a positive integer");
  bool to_space = !strcmp(rop, "depth_to_space"), crd = attr_s_is(n, "mode", "CRD");
  if (!crd && !attr_s_is(n, "mode", "DCR") && !attr_s_is(n, "mode", ""))
    return node_err(I, n, "mode must be \"DCR\" or \"CRD\"");
  rx_module *m = I->m;
  const rx_expr *const *d = xs->shape, *b = rx_sym_const(m, bs), *bb = rx_sym_const(m, bs * bs);
  const rx_expr *mid[6], *fin[4];
  int64_t perm[6];
  if (to_space) {
    const rx_expr *c = rx_sym_floordiv(m, d[1], bb);
    const rx_expr *dcr[6] = {d[0], b, b, c, d[2], d[3]}, *cr[6] = {d[0], c, b, b, d[2], d[3]};
    static const int64_t p_dcr[6] = {0, 3, 4, 1, 5, 2}, p_crd[6] = {0, 1, 4, 2, 5, 3};
    memcpy(mid, crd ? cr : dcr, sizeof mid);
    memcpy(perm, crd ? p_crd : p_dcr, sizeof perm);
    const rx_expr *f[4] = {d[0], c, rx_sym_mul(m, d[2], b), rx_sym_mul(m, d[3], b)};
    memcpy(fin, f, sizeof fin);
  } else {
    const rx_expr *h = rx_sym_floordiv(m, d[2], b), *w = rx_sym_floordiv(m, d[3], b);
    const rx_expr *s[6] = {d[0], d[1], h, b, w, b};
    static const int64_t p[6] = {0, 3, 5, 1, 2, 4};
    memcpy(mid, s, sizeof mid);
    memcpy(perm, p, sizeof perm);
    const rx_expr *f[4] = {d[0], rx_sym_mul(m, d[1], bb), h, w};
    memcpy(fin, f, sizeof fin);
  }
  rx_node *x;
  rx_var *r = NULL;
  RX_RETURN_IF_ERROR(arg(I, n, input(n, 0), &x));
  RX_RETURN_IF_ERROR(reshape_to(I, n, x, mid, 6, &x, &r));
  const rx_attr *at = rx_attr_ints(m, "axes", perm, 6);
  EXA("permute", x, &at, 1, x);
  RX_RETURN_IF_ERROR(reshape_to(I, n, x, fin, 4, &x, &r));
  def_tensor(I, n, r);
  return NULL;
}

/* (x - mean) / sqrt(var + eps) over axes, mean and variance kept as dims of 1 (*out, its
 * variable *last). */
static rx_status standardize(imp *I, const Onnx__NodeProto *n, rx_node *x, const int64_t *axes,
                             int na, double eps, rx_node **out, rx_var **last) {
  rx_node *mu, *d, *v;
  rx_var *r = NULL;
  const rx_attr *at[2] = {rx_attr_ints(I->m, "axes", axes, na),
                          rx_attr_bool(I->m, "keepdims", true)};
  EXA("mean", x, at, 2, mu);
  EX2("subtract", x, mu, d);
  EX2("multiply", d, d, v);
  EXA("mean", v, at, 2, v);
  EX2("add", v, FL(eps), v);
  EX1("rsqrt", v, v);
  EX2("multiply", d, v, *out);
  *last = r;
  return NULL;
}

/* InstanceNormalization: standardize over the spatial axes, then scale and bias [C] per
 * channel; MeanVarianceNormalization: standardize over axes (default [0, 2, 3]); its ONNX
 * function body adds 1e-9 to the standard deviation, here 1e-18 is added to the variance (the
 * same guard against 0; the results differ far below the float tolerance). */
static rx_status do_instance_norm(imp *I, const Onnx__NodeProto *n, const char *rop) {
  const rx_sinfo *xs;
  RX_RETURN_IF_ERROR(known_shape(I, n, 0, 3, SYM_MAX, &xs));
  bool mvn = !strcmp(rop, "mvn");
  int64_t axes[SYM_MAX];
  int na = 0;
  if (mvn) {
    static const int64_t dflt[3] = {0, 2, 3};
    const Onnx__AttributeProto *a = onnx_attr(n, "axes");
    if (a && a->n_ints > SYM_MAX) return node_err(I, n, "attribute 'axes' too long");
    na = a && a->n_ints ? (int)a->n_ints : 3;
    for (int k = 0; k < na; k++) axes[k] = a && a->n_ints ? a->ints[k] : dflt[k];
  } else {
    for (int k = 2; k < xs->ndim; k++) axes[na++] = k;
  }
  rx_node *x, *y, *p;
  rx_var *r = NULL;
  RX_RETURN_IF_ERROR(arg(I, n, input(n, 0), &x));
  RX_RETURN_IF_ERROR(
      standardize(I, n, x, axes, na, mvn ? 1e-18 : onnx_attr_f(n, "epsilon", 1e-5), &y, &r));
  if (!mvn) { /* scale and bias [C] as [C, 1, ...] */
    const rx_expr *dims[SYM_MAX];
    dims[0] = xs->shape[1];
    for (int k = 1; k < xs->ndim - 1; k++) dims[k] = rx_sym_const(I->m, 1);
    for (size_t i = 1; i <= 2; i++) {
      RX_RETURN_IF_ERROR(arg(I, n, input(n, i), &p));
      RX_RETURN_IF_ERROR(reshape_to(I, n, p, dims, xs->ndim - 1, &p, &r));
      EX2(i == 1 ? "multiply" : "add", y, p, y);
    }
  }
  def_tensor(I, n, r);
  return NULL;
}

/* LRN: x / (bias + alpha / size * s)^beta with s the sum of squares over the size channels
 * around each (floor((size - 1) / 2) before, the rest after): an avg_pool2d counting its
 * padding (a mean over size, alpha / size * s = alpha * mean) of x^2 as [N, 1, C, rest]. */
static rx_status do_lrn(imp *I, const Onnx__NodeProto *n, const char *rop) {
  (void)rop;
  const rx_sinfo *xs;
  RX_RETURN_IF_ERROR(known_shape(I, n, 0, 3, SYM_MAX, &xs));
  int64_t size = onnx_attr_i(n, "size", 0);
  if (size < 1 || size > (1 << 16)) return node_err(I, n, "size must be a positive integer");
  int64_t lo = (size - 1) / 2, hi = size - 1 - lo;
  const rx_expr *one = rx_sym_const(I->m, 1), *rest = one;
  for (int k = 2; k < xs->ndim; k++) rest = rx_sym_mul(I->m, rest, xs->shape[k]);
  const rx_expr *dims[4] = {xs->shape[0], one, xs->shape[1], rest};
  rx_node *x, *s;
  rx_var *r = NULL;
  RX_RETURN_IF_ERROR(arg(I, n, input(n, 0), &x));
  EX2("multiply", x, x, s);
  RX_RETURN_IF_ERROR(reshape_to(I, n, s, dims, 4, &s, &r));
  int64_t kern[2] = {size, 1}, st[2] = {1, 1}, pads[4] = {lo, 0, hi, 0};
  const rx_attr *at[4] = {
      rx_attr_ints(I->m, "kernel", kern, 2), rx_attr_ints(I->m, "strides", st, 2),
      rx_attr_ints(I->m, "padding", pads, 4), rx_attr_bool(I->m, "count_include_pad", true)};
  EXA("avg_pool2d", s, at, 4, s);
  RX_RETURN_IF_ERROR(reshape_to(I, n, s, xs->shape, xs->ndim, &s, &r));
  EX2("multiply", s, FL(onnx_attr_f(n, "alpha", 1e-4)), s);
  EX2("add", s, FL(onnx_attr_f(n, "bias", 1.0)), s);
  EX2("power", s, FL(onnx_attr_f(n, "beta", 0.75)), s);
  EX2("divide", x, s, s);
  def_tensor(I, n, r);
  return NULL;
}

/* PRelu: where(x < 0, slope x, x), slope broadcast to x */
static rx_status do_prelu(imp *I, const Onnx__NodeProto *n, const char *rop) {
  (void)rop;
  rx_node *x, *slope, *neg, *t;
  rx_var *r = NULL;
  RX_RETURN_IF_ERROR(arg(I, n, input(n, 0), &x));
  RX_RETURN_IF_ERROR(arg(I, n, input(n, 1), &slope));
  EX2("less", x, FL(0.0), neg);
  EX2("multiply", x, slope, t);
  EX3("where", neg, t, x, t);
  def_tensor(I, n, r);
  return NULL;
}

/* The padding [begin..., end...] of an ONNX window op over k spatial dims (in: the input's
 * spatial dims) from `pads` or `auto_pad`, for kernel extents ext[i] = dilation * (kernel - 1)
 * + 1 and strides st. SAME pads to ceil(in / stride) outputs: with a stride above 1 that needs
 * the input size, so a constant one. */
static rx_status window_pads(imp *I, const Onnx__NodeProto *n, int k, const rx_expr *const *in,
                             const int64_t *ext, const int64_t *st, int64_t *pads) {
  if (attr_s_is(n, "auto_pad", "") || attr_s_is(n, "auto_pad", "NOTSET"))
    return ints_attr(I, n, "pads", 2 * k, 0, pads);
  if (attr_s_is(n, "auto_pad", "VALID")) {
    memset(pads, 0, 2 * (size_t)k * sizeof *pads);
    return NULL;
  }
  bool upper = attr_s_is(n, "auto_pad", "SAME_UPPER");
  if (!upper && !attr_s_is(n, "auto_pad", "SAME_LOWER"))
    return node_err(I, n, "auto_pad must be NOTSET, VALID, SAME_UPPER or SAME_LOWER");
  for (int i = 0; i < k; i++) {
    int64_t total = ext[i] - 1;
    if (st[i] != 1) {
      if (in[i]->kind != RX_EXPR_CONST)
        return node_err(I, n,
                        "auto_pad SAME with stride %lld: the padding would depend on the "
                        "input size; give explicit pads or a constant spatial size",
                        (long long)st[i]);
      int64_t d = in[i]->value, out = (d + st[i] - 1) / st[i];
      total = (out - 1) * st[i] + ext[i] - d;
      if (total < 0) total = 0;
    }
    pads[i] = upper ? total / 2 : total - total / 2;
    pads[i + k] = total - pads[i];
  }
  return NULL;
}

/* ceil_mode=1 of a pooling op: the end padding of each spatial dim grows so that floor mode
 * gives the ceil mode's outputs (a last window starting in the end padding is dropped, as ONNX
 * says); needs constant spatial dims. *grew: some padding grew. */
static rx_status ceil_pads(imp *I, const Onnx__NodeProto *n, int k, const rx_expr *const *in,
                           const int64_t *ext, const int64_t *st, int64_t *pads, bool *grew) {
  *grew = false;
  for (int i = 0; i < k; i++) {
    if (in[i]->kind != RX_EXPR_CONST)
      return node_err(I, n,
                      "ceil_mode=1 needs constant spatial dims (floor mode has no such need)");
    int64_t span = in[i]->value + pads[i] + pads[i + k] - ext[i];
    if (span < 0) continue; /* the window does not fit: deduction reports it */
    int64_t out = (span + st[i] - 1) / st[i] + 1;
    if ((out - 1) * st[i] >= in[i]->value + pads[i]) out--;
    int64_t extra = (out - 1) * st[i] - span;
    if (extra > 0) {
      pads[i + k] += extra;
      *grew = true;
    }
  }
  return NULL;
}

/* The attributes of a window op over k = 1, 2 or 3 spatial dims, read once for Conv and the
 * pools: kernel (from kernel_shape, or the weight's dims), strides, dilations and pads. */
typedef struct win {
  int k;                /* spatial dims */
  const rx_expr *in[3]; /* the input's spatial dims */
  int64_t kern[3], st[3], dil[3], ext[3];
  int64_t pads[6]; /* [begin..., end...] */
} win;

static rx_status read_win(imp *I, const Onnx__NodeProto *n, const rx_sinfo *xs, const int64_t *kern,
                          win *w) {
  w->k = xs->ndim - 2;
  for (int i = 0; i < w->k; i++) {
    w->in[i] = xs->shape[2 + i];
    w->kern[i] = kern[i];
  }
  RX_RETURN_IF_ERROR(ints_attr(I, n, "strides", w->k, 1, w->st));
  RX_RETURN_IF_ERROR(ints_attr(I, n, "dilations", w->k, 1, w->dil));
  for (int i = 0; i < w->k; i++) {
    if (w->st[i] < 1 || w->dil[i] < 1 || w->kern[i] < 1)
      return node_err(I, n, "kernel, strides and dilations must be positive");
    w->ext[i] = w->dil[i] * (w->kern[i] - 1) + 1;
  }
  return window_pads(I, n, w->k, w->in, w->ext, w->st, w->pads);
}

/* The 2-D attributes of spatial dims i and j of w (i < 0: a dim of size 1 before j). */
static void win2(const win *w, int i, int j, int64_t *kern, int64_t *st, int64_t *dil,
                 int64_t *pads) {
  kern[0] = i < 0 ? 1 : w->kern[i];
  st[0] = i < 0 ? 1 : w->st[i];
  dil[0] = i < 0 ? 1 : w->dil[i];
  pads[0] = i < 0 ? 0 : w->pads[i];
  pads[2] = i < 0 ? 0 : w->pads[i + w->k];
  kern[1] = w->kern[j];
  st[1] = w->st[j];
  dil[1] = w->dil[j];
  pads[1] = w->pads[j];
  pads[3] = w->pads[j + w->k];
}

/* x (its variable xv) with lo zeros before and hi after along axis (zeros, then a concat). */
static rx_status pad_zeros(imp *I, const Onnx__NodeProto *n, rx_node *x, rx_var *xv, int axis,
                           int64_t lo, int64_t hi, rx_node **out, rx_var **last) {
  const rx_sinfo *xs = rx_var_sinfo(xv);
  rx_node *f[3], *t;
  rx_var *r = xv, *tup;
  int nf = 0;
  for (int side = 0; side < 2; side++) {
    int64_t cnt = side ? hi : lo;
    if (side) f[nf++] = x;
    if (!cnt) continue;
    const rx_expr *zd[SYM_MAX];
    memcpy(zd, xs->shape, sizeof *zd * (size_t)xs->ndim);
    zd[axis] = rx_sym_const(I->m, cnt);
    rx_node *shape = rx_arg_shape(I->b, zd, xs->ndim);
    const rx_attr *at = rx_attr_dtype(I->m, "dtype", xs->dtype);
    EXA("zeros", shape, &at, 1, f[nf]);
    nf++;
  }
  *out = x;
  *last = xv;
  if (nf == 1) return NULL;
  RX_RETURN_IF_ERROR(at_node(I, n, rx_emit_tuple(I->b, f, nf, NULL, &tup)));
  t = rx_arg_var(I->b, tup);
  const rx_attr *at = rx_attr_int(I->m, "axis", axis);
  EXA("concat", t, &at, 1, *out);
  *last = r;
  return NULL;
}

/* A 3-D convolution (x [N, C, D, H, W], its variable xv; the weight w [O, C/g, KD, KH, KW] of
 * shape ws) as KD 2-D ones: for each depth tap kd, the depth slices kd dil_d, kd dil_d + s_d,
 * ... of the input (its depth padding added as zeros first) as a batch [N OD, C, H, W],
 * convolved with the weight's slice kd over (H, W); the sum over kd as [N, O, OD, OH, OW]. */
static rx_status conv3(imp *I, const Onnx__NodeProto *n, rx_node *x, rx_var *xv, rx_node *w,
                       const rx_sinfo *ws, const win *wn, int64_t groups, rx_node **out,
                       rx_var **last) {
  rx_var *r = NULL;
  RX_RETURN_IF_ERROR(pad_zeros(I, n, x, xv, 2, wn->pads[0], wn->pads[3], &x, &xv));
  const rx_sinfo *xs = rx_var_sinfo(xv);
  int64_t sd = wn->st[0], dd = wn->dil[0], k2[2], st[2], dil[2], pads[4], ax2 = 2;
  int64_t perm[5] = {0, 2, 1, 3, 4};
  win2(wn, 1, 2, k2, st, dil, pads);
  const rx_expr *od = rx_sym_add(
      I->m,
      rx_sym_floordiv(I->m, rx_sym_sub(I->m, xs->shape[2], rx_sym_const(I->m, wn->ext[0])),
                      rx_sym_const(I->m, sd)),
      rx_sym_const(I->m, 1));
  const rx_expr *span = rx_sym_add(
      I->m, rx_sym_mul(I->m, rx_sym_sub(I->m, od, rx_sym_const(I->m, 1)), rx_sym_const(I->m, sd)),
      rx_sym_const(I->m, 1));
  rx_node *acc = NULL;
  for (int64_t kd = 0; kd < wn->kern[0]; kd++) {
    rx_node *xk, *wk;
    const rx_expr *b = rx_sym_const(I->m, kd * dd), *e = rx_sym_add(I->m, b, span);
    const rx_attr *at[4] = {rx_attr_ints(I->m, "axes", &ax2, 1),
                            rx_attr_exprs(I->m, "begin", &b, 1), rx_attr_exprs(I->m, "end", &e, 1),
                            rx_attr_ints(I->m, "strides", &sd, 1)};
    EXA("strided_slice", x, at, 4, xk);
    /* every tap's slice has od depths; deduction may give each tap's its own form */
    const rx_expr *sd5[5] = {xs->shape[0], xs->shape[1], od, xs->shape[3], xs->shape[4]};
    if (!match_cast_to(I, r, xs->dtype, 5, sd5, &r))
      return node_err(I, n, "internal: the depth slices of a 3-D convolution");
    xk = rx_arg_var(I->b, r);
    at[0] = rx_attr_ints(I->m, "axes", perm, 5);
    EXA("permute", xk, at, 1, xk);
    const rx_sinfo *ps = rx_var_sinfo(r);
    const rx_expr *bd[4] = {rx_sym_mul(I->m, ps->shape[0], ps->shape[1]), ps->shape[2],
                            ps->shape[3], ps->shape[4]};
    RX_RETURN_IF_ERROR(reshape_to(I, n, xk, bd, 4, &xk, &r));
    const rx_expr *wb = rx_sym_const(I->m, kd), *we = rx_sym_const(I->m, kd + 1);
    at[0] = rx_attr_ints(I->m, "axes", &ax2, 1);
    at[1] = rx_attr_exprs(I->m, "begin", &wb, 1);
    at[2] = rx_attr_exprs(I->m, "end", &we, 1);
    EXA("strided_slice", w, at, 3, wk);
    const rx_expr *wd[4] = {ws->shape[0], ws->shape[1], ws->shape[3], ws->shape[4]};
    RX_RETURN_IF_ERROR(reshape_to(I, n, wk, wd, 4, &wk, &r));
    at[0] = rx_attr_ints(I->m, "strides", st, 2);
    at[1] = rx_attr_ints(I->m, "padding", pads, 4);
    at[2] = rx_attr_ints(I->m, "dilation", dil, 2);
    at[3] = rx_attr_int(I->m, "groups", groups);
    rx_node *a[2] = {xk, wk};
    RX_RETURN_IF_ERROR(exa(I, n, "conv2d", a, 2, at, 4, &xk, &r));
    if (acc)
      EX2("add", acc, xk, acc);
    else
      acc = xk;
  }
  const rx_sinfo *ys = rx_var_sinfo(r), *ps = rx_var_sinfo(xv);
  const rx_expr *yd[5] = {ps->shape[0], od, ys->shape[1], ys->shape[2], ys->shape[3]};
  RX_RETURN_IF_ERROR(reshape_to(I, n, acc, yd, 5, &acc, &r));
  const rx_attr *at = rx_attr_ints(I->m, "axes", perm, 5);
  EXA("permute", acc, &at, 1, *out);
  *last = r;
  return NULL;
}

/* Conv's input channels (*xv, struct info *xs) against the weight's C/group times group: a
 * symbolic count the analyzer cannot show equal (a UNet's concat of a skip and an upsampled
 * map padded by amounts from run time, [b, 4 + 8 + d1 + d5, h, w] for 12) is match_cast to it,
 * which the VM checks when it runs. */
static rx_status conv_channels(imp *I, const Onnx__NodeProto *n, rx_var **xv, const rx_sinfo **xs,
                               const rx_sinfo *ws, int64_t g) {
  const rx_expr *c = (*xs)->shape[1];
  if (c->kind == RX_EXPR_CONST || ws->shape[1]->kind != RX_EXPR_CONST || g < 1 ||
      (*xs)->ndim > SYM_MAX)
    return NULL;
  const rx_expr *want = rx_sym_const(I->m, ws->shape[1]->value * g);
  if (rx_analyzer_prove(I->an, rx_expr_cmp(I->m->ctx, RX_EXPR_EQ, c, want)) != RX_UNKNOWN)
    return NULL; /* equal, or provably not (conv2d's own error) */
  const rx_expr *dims[SYM_MAX];
  memcpy(dims, (*xs)->shape, sizeof *dims * (size_t)(*xs)->ndim);
  dims[1] = want;
  if (!match_cast_to(I, *xv, (*xs)->dtype, (*xs)->ndim, dims, xv))
    return node_err(I, n, "match_cast of the input to %lld channels failed",
                    (long long)want->value);
  *xs = rx_var_sinfo(*xv);
  return NULL;
}

static rx_status do_conv(imp *I, const Onnx__NodeProto *n, const char *rop) {
  const rx_sinfo *xs, *ws;
  RX_RETURN_IF_ERROR(known_shape(I, n, 0, 3, 5, &xs));
  RX_RETURN_IF_ERROR(known_shape(I, n, 1, xs->ndim, xs->ndim, &ws));
  int64_t kern[3];
  for (int i = 2; i < ws->ndim; i++) {
    if (ws->shape[i]->kind != RX_EXPR_CONST)
      return node_err(I, n, "the weight must be [O, C/group, k...] with constant kernel dims");
    kern[i - 2] = ws->shape[i]->value;
  }
  win w;
  RX_RETURN_IF_ERROR(read_win(I, n, xs, kern, &w));
  int64_t k2[2], st[2], dil[2], pads[4], g = onnx_attr_i(n, "group", 1);
  win2(&w, w.k == 1 ? -1 : w.k - 2, w.k - 1, k2, st, dil, pads);
  rx_node *a[2];
  rx_var *r = NULL, *b2;
  rx_var *xv = get(I, input(n, 0))->var;
  RX_RETURN_IF_ERROR(conv_channels(I, n, &xv, &xs, ws, g));
  a[0] = rx_arg_var(I->b, xv);
  RX_RETURN_IF_ERROR(arg(I, n, input(n, 1), &a[1]));
  const rx_expr *one = rx_sym_const(I->m, 1);
  if (w.k == 3) RX_RETURN_IF_ERROR(conv3(I, n, a[0], xv, a[1], ws, &w, g, &a[0], &r));
  if (w.k == 1) { /* [N, C, L] as [N, C, 1, L], the weight [O, C/g, K] as [O, C/g, 1, K] */
    const rx_expr *xd[4] = {xs->shape[0], xs->shape[1], one, xs->shape[2]},
                  *wd[4] = {ws->shape[0], ws->shape[1], one, ws->shape[2]};
    RX_RETURN_IF_ERROR(reshape_to(I, n, a[0], xd, 4, &a[0], &r));
    RX_RETURN_IF_ERROR(reshape_to(I, n, a[1], wd, 4, &a[1], &r));
  }
  const rx_attr *at[4] = {rx_attr_ints(I->m, "strides", st, 2),
                          rx_attr_ints(I->m, "padding", pads, 4),
                          rx_attr_ints(I->m, "dilation", dil, 2), rx_attr_int(I->m, "groups", g)};
  if (w.k < 3) RX_RETURN_IF_ERROR(emit(I, n, "conv2d", a, 2, at, 4, &r));
  if (w.k == 1) {
    const rx_sinfo *ys = rx_var_sinfo(r);
    const rx_expr *yd[3] = {ys->shape[0], ys->shape[1], ys->shape[3]};
    RX_RETURN_IF_ERROR(reshape_to(I, n, rx_arg_var(I->b, r), yd, 3, &a[0], &r));
  }
  if (input(n, 2)) { /* bias [O] as [1, O, 1...] */
    const rx_expr *dims[5] = {one, ws->shape[0], one, one, one};
    RX_RETURN_IF_ERROR(arg(I, n, input(n, 2), &a[0]));
    a[1] = rx_arg_shape(I->b, dims, xs->ndim);
    RX_RETURN_IF_ERROR(emit(I, n, "reshape", a, 2, NULL, 0, &b2));
    a[0] = rx_arg_var(I->b, r);
    a[1] = rx_arg_var(I->b, b2);
    RX_RETURN_IF_ERROR(emit(I, n, "add", a, 2, NULL, 0, &r));
  }
  def_tensor(I, n, r);
  return NULL;
}

/* max_pool2d or avg_pool2d of x with the 2-D attributes of spatial dims i, j of w. */
static rx_status pool2(imp *I, const Onnx__NodeProto *n, const char *op, rx_node *x, const win *w,
                       int i, int j, bool cip, rx_node **out, rx_var **last) {
  int64_t kern[2], st[2], dil[2], pads[4];
  win2(w, i, j, kern, st, dil, pads);
  const rx_attr *at[5] = {
      rx_attr_ints(I->m, "kernel", kern, 2), rx_attr_ints(I->m, "strides", st, 2),
      rx_attr_ints(I->m, "padding", pads, 4), rx_attr_ints(I->m, "dilation", dil, 2),
      rx_attr_bool(I->m, "count_include_pad", cip)};
  return exa(I, n, op, &x, 1, at, op[0] == 'm' ? 4 : 5, out, last);
}

/* MaxPool's Indices output (2-D): max_pool2d_index over the node's window */
static rx_status pool_indices(imp *I, const Onnx__NodeProto *n, const win *w) {
  int64_t kern[2], st[2], dil[2], pads[4];
  win2(w, 0, 1, kern, st, dil, pads);
  const rx_attr *at[5] = {
      rx_attr_ints(I->m, "kernel", kern, 2), rx_attr_ints(I->m, "strides", st, 2),
      rx_attr_ints(I->m, "padding", pads, 4), rx_attr_ints(I->m, "dilation", dil, 2),
      rx_attr_int(I->m, "storage_order", onnx_attr_i(n, "storage_order", 0))};
  rx_node *x;
  rx_var *r = NULL;
  RX_RETURN_IF_ERROR(arg(I, n, input(n, 0), &x));
  RX_RETURN_IF_ERROR(exa(I, n, "max_pool2d_index", &x, 1, at, 5, &x, &r));
  def_named(I, n->output[1], r);
  return NULL;
}

/* MaxPool, AveragePool and LpPool over 1, 2 or 3 spatial dims: 1-D as 2-D over [N, C, 1, L];
 * 3-D as a 2-D pool over (H, W) of [N, C D, H, W], then one over (D, 1) of [N, C, D, OH OW]
 * (both max and the mean, over the window or over its in-bounds part, split that way). LpPool:
 * (the mean of |x|^p counting the padding, times the window's size)^(1 / p). ceil_mode:
 * ceil_pads. */
static rx_status do_pool(imp *I, const Onnx__NodeProto *n, const char *rop) {
  bool lp = n->op_type[0] == 'L';
  const char *op = n->op_type[0] == 'M' ? "max_pool2d" : "avg_pool2d";
  const rx_sinfo *xs;
  RX_RETURN_IF_ERROR(known_shape(I, n, 0, 3, 5, &xs));
  bool want_idx = n->n_output > 1 && n->output[1] && n->output[1][0];
  if (want_idx && (op[0] != 'm' || xs->ndim != 4))
    return node_err(I, n, "the Indices output is supported for 2-D MaxPool only");
  const Onnx__AttributeProto *ka = onnx_attr(n, "kernel_shape");
  if (!ka || (int)ka->n_ints != xs->ndim - 2)
    return node_err(I, n, "kernel_shape of %d values is required", xs->ndim - 2);
  win w;
  RX_RETURN_IF_ERROR(read_win(I, n, xs, ka->ints, &w));
  bool cip = lp || onnx_attr_i(n, "count_include_pad", 0) != 0, grew = false;
  if (onnx_attr_i(n, "ceil_mode", 0))
    RX_RETURN_IF_ERROR(ceil_pads(I, n, w.k, w.in, w.ext, w.st, w.pads, &grew));
  if (grew && cip && !lp && op[0] == 'a') /* (LpPool's sum is the same with more zeros) */
    return node_err(I, n,
                    "ceil_mode=1 with count_include_pad=1 where the last window passes the "
                    "padding is not supported");
  rx_node *x;
  rx_var *r = NULL;
  RX_RETURN_IF_ERROR(arg(I, n, input(n, 0), &x));
  double p = (double)onnx_attr_i(n, "p", 2), size = 1;
  if (lp) {
    if (p < 1) return node_err(I, n, "p must be at least 1");
    for (int i = 0; i < w.k; i++) size *= (double)w.kern[i];
    EX1("abs", x, x);
    if (p != 1) EX2("power", x, FL(p), x);
  }
  const rx_expr *one = rx_sym_const(I->m, 1), *d[5];
  const rx_sinfo *ys;
  if (w.k == 1) {
    const rx_expr *xd[4] = {xs->shape[0], xs->shape[1], one, xs->shape[2]};
    RX_RETURN_IF_ERROR(reshape_to(I, n, x, xd, 4, &x, &r));
    RX_RETURN_IF_ERROR(pool2(I, n, op, x, &w, -1, 0, cip, &x, &r));
    ys = rx_var_sinfo(r);
    const rx_expr *yd[3] = {ys->shape[0], ys->shape[1], ys->shape[3]};
    RX_RETURN_IF_ERROR(reshape_to(I, n, x, yd, 3, &x, &r));
  } else if (w.k == 2) {
    RX_RETURN_IF_ERROR(pool2(I, n, op, x, &w, 0, 1, cip, &x, &r));
  } else {
    const rx_expr *xd[4] = {xs->shape[0], rx_sym_mul(I->m, xs->shape[1], xs->shape[2]),
                            xs->shape[3], xs->shape[4]};
    RX_RETURN_IF_ERROR(reshape_to(I, n, x, xd, 4, &x, &r));
    RX_RETURN_IF_ERROR(pool2(I, n, op, x, &w, 1, 2, cip, &x, &r));
    ys = rx_var_sinfo(r);
    d[3] = ys->shape[2];
    d[4] = ys->shape[3];
    const rx_expr *yd[4] = {xs->shape[0], xs->shape[1], xs->shape[2], rx_sym_mul(I->m, d[3], d[4])};
    RX_RETURN_IF_ERROR(reshape_to(I, n, x, yd, 4, &x, &r));
    win wd = w; /* (D, 1): the dim of size 1 has kernel 1, stride 1, no padding */
    wd.k = 2;
    wd.kern[1] = wd.st[1] = wd.dil[1] = 1;
    wd.pads[0] = w.pads[0];
    wd.pads[2] = w.pads[3];
    wd.pads[1] = wd.pads[3] = 0;
    RX_RETURN_IF_ERROR(pool2(I, n, op, x, &wd, 0, 1, cip, &x, &r));
    ys = rx_var_sinfo(r);
    const rx_expr *od[5] = {xs->shape[0], xs->shape[1], ys->shape[2], d[3], d[4]};
    RX_RETURN_IF_ERROR(reshape_to(I, n, x, od, 5, &x, &r));
  }
  if (lp) {
    EX2("multiply", x, FL(size), x);
    if (p != 1) EX2("power", x, FL(1.0 / p), x);
  }
  def_tensor(I, n, r);
  return want_idx ? pool_indices(I, n, &w) : NULL;
}
/* x with stride - 1 zeros after each element along axis (a reshape of the concat of x and
 * zeros along a new axis after it). */
static rx_status zero_insert(imp *I, const Onnx__NodeProto *n, rx_node *x, int axis, int64_t s,
                             rx_node **out, rx_var **last) {
  const rx_sinfo *xs = rx_var_sinfo(*last);
  rx_dtype dt = xs->dtype;
  int rank = xs->ndim;
  const rx_expr *zd[SYM_MAX], *od[SYM_MAX];
  for (int i = 0; i < rank; i++) od[i] = zd[i < axis + 1 ? i : i + 1] = xs->shape[i];
  zd[axis + 1] = rx_sym_const(I->m, s - 1);
  od[axis] = rx_sym_mul(I->m, xs->shape[axis], rx_sym_const(I->m, s));
  int64_t ax = axis + 1;
  rx_var *r = NULL;
  rx_node *f[2], *t;
  const rx_attr *at = rx_attr_ints(I->m, "axes", &ax, 1);
  EXA("expand_dims", x, &at, 1, f[0]);
  rx_node *shape = rx_arg_shape(I->b, zd, rank + 1);
  at = rx_attr_dtype(I->m, "dtype", dt);
  EXA("zeros", shape, &at, 1, f[1]);
  rx_var *tup;
  RX_RETURN_IF_ERROR(at_node(I, n, rx_emit_tuple(I->b, f, 2, NULL, &tup)));
  t = rx_arg_var(I->b, tup);
  at = rx_attr_int(I->m, "axis", ax);
  EXA("concat", t, &at, 1, t);
  RX_RETURN_IF_ERROR(reshape_to(I, n, t, od, rank, out, last));
  return NULL;
}

/* ConvTranspose (1-D, 2-D and 3-D) as the convolution whose gradient it is: the input with
 * stride - 1 zeros between its elements, padded by dilation (kernel - 1) - pad at the begin
 * and that plus output_padding at the end (a negative padding crops), convolved at stride 1
 * with the weight [C, O / group, k...] as [O, C / group, k...] (in and out channels swapped
 * within each group) with its kernel flipped (1-D as 2-D, 3-D by conv3). output_shape and
 * auto_pad SAME set the pads from the constant input size, as ONNX says (the odd one at the
 * begin unless SAME_UPPER). */
static rx_status do_conv_transpose(imp *I, const Onnx__NodeProto *n, const char *rop) {
  (void)rop;
  const rx_sinfo *xs, *ws;
  RX_RETURN_IF_ERROR(known_shape(I, n, 0, 3, 5, &xs));
  RX_RETURN_IF_ERROR(known_shape(I, n, 1, xs->ndim, xs->ndim, &ws));
  int k = xs->ndim - 2, K = k == 1 ? 2 : k; /* K: the dims of the convolution made */
  int64_t g = onnx_attr_i(n, "group", 1), kern[3], st[3], dil[3], opad[3], pads[6], ext[3];
  for (int i = 0; i < k; i++) {
    if (ws->shape[2 + i]->kind != RX_EXPR_CONST)
      return node_err(I, n, "the weight must be [C, O/group, k...] with constant kernel dims");
    kern[i] = ws->shape[2 + i]->value;
  }
  if (g < 1 || ws->shape[0]->kind != RX_EXPR_CONST || ws->shape[0]->value % g)
    return node_err(I, n, "group must be positive and divide the weight's constant dim 0");
  RX_RETURN_IF_ERROR(ints_attr(I, n, "strides", k, 1, st));
  RX_RETURN_IF_ERROR(ints_attr(I, n, "dilations", k, 1, dil));
  RX_RETURN_IF_ERROR(ints_attr(I, n, "output_padding", k, 0, opad));
  for (int i = 0; i < k; i++) {
    if (st[i] < 1 || dil[i] < 1 || opad[i] < 0 || st[i] > (1 << 16))
      return node_err(I, n, "strides and dilations must be positive, output_padding not negative");
    ext[i] = dil[i] * (kern[i] - 1) + 1;
  }
  const Onnx__AttributeProto *os = onnx_attr(n, "output_shape");
  bool same = attr_s_is(n, "auto_pad", "SAME_UPPER") || attr_s_is(n, "auto_pad", "SAME_LOWER");
  if ((os && os->n_ints) || same) {
    if (os && os->n_ints && (int)os->n_ints != k)
      return node_err(I, n, "output_shape must have %d values (the spatial dims)", k);
    for (int i = 0; i < k; i++) {
      const rx_expr *in = xs->shape[2 + i];
      if (in->kind != RX_EXPR_CONST)
        return node_err(I, n, "output_shape and auto_pad SAME need constant spatial dims");
      int64_t want = os && os->n_ints ? os->ints[i] : in->value * st[i];
      /* a negative total (output_shape beyond the natural size) pads the output's end, as
       * ONNX's reference halves it rounding down */
      int64_t total = st[i] * (in->value - 1) + opad[i] + ext[i] - want;
      int64_t half = total >= 0 ? total / 2 : -((1 - total) / 2);
      bool upper = attr_s_is(n, "auto_pad", "SAME_UPPER");
      pads[i] = upper ? half : total - half;
      pads[i + k] = total - pads[i];
    }
  } else if (attr_s_is(n, "auto_pad", "VALID")) {
    memset(pads, 0, sizeof pads);
  } else {
    RX_RETURN_IF_ERROR(ints_attr(I, n, "pads", 2 * k, 0, pads));
  }
  rx_node *x, *w;
  rx_var *r = NULL, *xv = get(I, input(n, 0))->var;
  RX_RETURN_IF_ERROR(arg(I, n, input(n, 0), &x));
  RX_RETURN_IF_ERROR(arg(I, n, input(n, 1), &w));
  const rx_expr *one = rx_sym_const(I->m, 1), *d[6];
  if (k == 1) { /* as 2-D over [N, C, 1, L] */
    const rx_expr *xd[4] = {xs->shape[0], xs->shape[1], one, xs->shape[2]},
                  *wd[4] = {ws->shape[0], ws->shape[1], one, ws->shape[2]};
    RX_RETURN_IF_ERROR(reshape_to(I, n, x, xd, 4, &x, &xv));
    RX_RETURN_IF_ERROR(reshape_to(I, n, w, wd, 4, &w, &r));
    kern[1] = kern[0], st[1] = st[0], dil[1] = dil[0], opad[1] = opad[0], ext[1] = ext[0];
    pads[3] = pads[1], pads[1] = pads[0];
    kern[0] = st[0] = dil[0] = ext[0] = 1, opad[0] = pads[0] = pads[2] = 0;
  }
  /* the weight: [g, C/g, O/g, k...] -> [g, O/g, C/g, k...] -> [O, C/g, k...], flipped */
  int64_t cg = ws->shape[0]->value / g, perm[6] = {0, 2, 1, 3, 4, 5};
  d[0] = rx_sym_const(I->m, g), d[1] = rx_sym_const(I->m, cg), d[2] = ws->shape[1];
  for (int i = 0; i < K; i++) d[3 + i] = rx_sym_const(I->m, kern[i]);
  RX_RETURN_IF_ERROR(reshape_to(I, n, w, d, K + 3, &w, &r));
  const rx_attr *at[4] = {rx_attr_ints(I->m, "axes", perm, K + 3)};
  EXA("permute", w, at, 1, w);
  d[1] = rx_sym_mul(I->m, d[0], ws->shape[1]), d[2] = rx_sym_const(I->m, cg);
  RX_RETURN_IF_ERROR(reshape_to(I, n, w, d + 1, K + 2, &w, &r));
  rx_var *wv = r;
  for (int i = 0; i < K; i++) {
    if (kern[i] == 1) continue;
    rx_node *a[3] = {rx_arg_prim(I->b, RX_DTYPE_I64, rx_sym_const(I->m, kern[i] - 1)),
                     rx_arg_prim(I->b, RX_DTYPE_I64, rx_sym_const(I->m, -1)),
                     rx_arg_prim(I->b, RX_DTYPE_I64, rx_sym_const(I->m, -1))},
            *rev;
    at[0] = rx_attr_dtype(I->m, "dtype", RX_DTYPE_I64);
    RX_RETURN_IF_ERROR(exa(I, n, "arange", a, 3, at, 1, &rev, &r));
    a[0] = w;
    a[1] = rev;
    at[0] = rx_attr_int(I->m, "axis", 2 + i);
    RX_RETURN_IF_ERROR(exa(I, n, "take", a, 2, at, 1, &w, &wv));
  }
  /* the input, zeros inserted; the padding of each side, its negative part cropped */
  int64_t cp[6], crop[6], axes[3] = {2, 3, 4};
  for (int i = 0; i < K; i++) {
    if (st[i] > 1) RX_RETURN_IF_ERROR(zero_insert(I, n, x, 2 + i, st[i], &x, &xv));
    cp[i] = ext[i] - 1 - pads[i];
    cp[i + K] = ext[i] - 1 - pads[i + K] + opad[i] - (st[i] - 1);
  }
  bool cropping = false;
  for (int i = 0; i < 2 * K; i++) {
    crop[i] = cp[i] < 0 ? -cp[i] : 0;
    if (cp[i] < 0) cp[i] = 0, cropping = true;
  }
  if (cropping) {
    const rx_sinfo *cs = rx_var_sinfo(xv);
    const rx_expr *b[3], *e[3];
    for (int i = 0; i < K; i++) {
      b[i] = rx_sym_const(I->m, crop[i]);
      e[i] = rx_sym_sub(I->m, cs->shape[2 + i], rx_sym_const(I->m, crop[i + K]));
    }
    at[0] = rx_attr_ints(I->m, "axes", axes, K);
    at[1] = rx_attr_exprs(I->m, "begin", b, K);
    at[2] = rx_attr_exprs(I->m, "end", e, K);
    EXA("strided_slice", x, at, 3, x);
    xv = r;
  }
  if (K == 3) { /* stride 1, the dilations, the padding cp */
    win cw = {.k = 3};
    for (int i = 0; i < 3; i++) {
      cw.kern[i] = kern[i], cw.st[i] = 1, cw.dil[i] = dil[i], cw.ext[i] = ext[i];
      cw.pads[i] = cp[i], cw.pads[i + 3] = cp[i + 3];
    }
    RX_RETURN_IF_ERROR(conv3(I, n, x, xv, w, rx_var_sinfo(wv), &cw, g, &x, &r));
  } else {
    int64_t one2[2] = {1, 1};
    at[0] = rx_attr_ints(I->m, "strides", one2, 2);
    at[1] = rx_attr_ints(I->m, "padding", cp, 4);
    at[2] = rx_attr_ints(I->m, "dilation", dil, 2);
    at[3] = rx_attr_int(I->m, "groups", g);
    RX_RETURN_IF_ERROR(exa(I, n, "conv2d", (rx_node *[]){x, w}, 2, at, 4, &x, &r));
  }
  const rx_sinfo *ys = rx_var_sinfo(r);
  if (k == 1) {
    d[0] = ys->shape[0], d[1] = ys->shape[1], d[2] = ys->shape[3];
    RX_RETURN_IF_ERROR(reshape_to(I, n, x, d, 3, &x, &r));
  }
  if (input(n, 2)) { /* bias [O] as [1, O, 1...] */
    rx_node *bias;
    const rx_expr *bd[5] = {one, ys->shape[1], one, one, one};
    RX_RETURN_IF_ERROR(arg(I, n, input(n, 2), &bias));
    RX_RETURN_IF_ERROR(reshape_to(I, n, bias, bd, k + 2, &bias, &r));
    EX2("add", x, bias, x);
  }
  def_tensor(I, n, r);
  return NULL;
}
/* ---- Resize and Upsample: per resized axis, the source coordinate of each output index (a
 * tensor computed from arange), then a gather of the neighbours (take) weighted by mode ---- */

typedef enum { RS_NEAREST, RS_LINEAR, RS_CUBIC } rs_mode;
typedef enum { RS_HALF_PIXEL, RS_PYTORCH, RS_ALIGN, RS_ASYM, RS_TF_NN, RS_TF_CROP } rs_coord;
typedef enum { RS_PREFER_FLOOR, RS_PREFER_CEIL, RS_FLOOR, RS_CEIL } rs_round;

typedef struct rs_params {
  rs_mode mode;
  rs_coord coord;
  rs_round round;
  double a;      /* cubic_coeff_a */
  bool exclude;  /* exclude_outside */
  double extrap; /* extrapolation_value (tf_crop_and_resize) */
  int rank;
  rx_node *scales;     /* f32 [rank] at run time, or NULL (sizes or fscale given) */
  const float *fscale; /* constant scales [rank] (a weight read at import), or NULL */
  rx_node *roi;        /* f32 [2 rank] (tf_crop_and_resize), or NULL */
} rs_params;

/* The index of string attribute `name` in names (nnames of them; absent: dflt), -1 if other. */
static int attr_choice(const Onnx__NodeProto *n, const char *name, const char *const *names,
                       int nnames, int dflt) {
  if (attr_s_is(n, name, "")) return dflt;
  for (int i = 0; i < nnames; i++)
    if (attr_s_is(n, name, names[i])) return i;
  return -1;
}

static rx_status rs_read(imp *I, const Onnx__NodeProto *n, rs_params *p) {
  static const char *const modes[] = {"nearest", "linear", "cubic"},
                           *coords[] = {"half_pixel", "pytorch_half_pixel",   "align_corners",
                                        "asymmetric", "tf_half_pixel_for_nn", "tf_crop_and_resize"},
                           *rounds[] = {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"};
  bool up = !strcmp(n->op_type, "Upsample"); /* Upsample: asymmetric, floor */
  int m = attr_choice(n, "mode", modes, up ? 2 : 3, RS_NEAREST);
  int c = up ? RS_ASYM : attr_choice(n, "coordinate_transformation_mode", coords, 6, RS_HALF_PIXEL);
  int r = up ? RS_FLOOR : attr_choice(n, "nearest_mode", rounds, 4, RS_PREFER_FLOOR);
  if (m < 0) return node_err(I, n, "mode must be nearest, linear%s", up ? "" : " or cubic");
  if (c < 0)
    return node_err(I, n,
                    "coordinate_transformation_mode must be half_pixel, pytorch_half_pixel, "
                    "align_corners, asymmetric, tf_half_pixel_for_nn or tf_crop_and_resize");
  if (r < 0)
    return node_err(I, n,
                    "nearest_mode must be round_prefer_floor, round_prefer_ceil, "
                    "floor or ceil");
  if (onnx_attr_i(n, "antialias", 0)) return node_err(I, n, "antialias=1 is not supported");
  if (onnx_attr(n, "axes")) return node_err(I, n, "the axes attribute is not supported");
  if (!attr_s_is(n, "keep_aspect_ratio_policy", "") &&
      !attr_s_is(n, "keep_aspect_ratio_policy", "stretch"))
    return node_err(I, n, "keep_aspect_ratio_policy other than stretch is not supported");
  p->mode = (rs_mode)m;
  p->coord = (rs_coord)c;
  p->round = (rs_round)r;
  p->a = onnx_attr_f(n, "cubic_coeff_a", -0.75);
  p->exclude = onnx_attr_i(n, "exclude_outside", 0) != 0;
  p->extrap = onnx_attr_f(n, "extrapolation_value", 0.0);
  return NULL;
}

/* A tensor [1] holding the symbolic value e (dtype f32 or i64): arange(e, e + 1). */
static rx_status value_tensor(imp *I, const Onnx__NodeProto *n, const rx_expr *e, rx_dtype dt,
                              rx_node **out) {
  rx_node *a[2] = {rx_arg_prim(I->b, RX_DTYPE_I64, e),
                   rx_arg_prim(I->b, RX_DTYPE_I64, rx_sym_add(I->m, e, rx_sym_const(I->m, 1)))};
  const rx_attr *at = rx_attr_dtype(I->m, "dtype", dt);
  return exa(I, n, "arange", a, 2, &at, 1, out, NULL);
}

/* Element k of a 1-D tensor as a tensor [1]. */
static rx_status elem_of(imp *I, const Onnx__NodeProto *n, rx_node *t, int k, rx_node **out) {
  int64_t ax = 0;
  const rx_expr *b = rx_sym_const(I->m, k), *e = rx_sym_const(I->m, k + 1);
  const rx_attr *at[3] = {rx_attr_ints(I->m, "axes", &ax, 1), rx_attr_exprs(I->m, "begin", &b, 1),
                          rx_attr_exprs(I->m, "end", &e, 1)};
  return exa(I, n, "strided_slice", &t, 1, at, 3, out, NULL);
}

/* The source coordinate (f32 [out]) of each output index along axis k, as ONNX's
 * coordinate_transformation_mode says. */
static rx_status rs_coord_of(imp *I, const Onnx__NodeProto *n, const rs_params *p, int k,
                             const rx_expr *in, const rx_expr *out, rx_node **x) {
  rx_node *i, *inf, *outf, *sc, *t = NULL, *u, *big = NULL;
  rx_var *r = NULL;
  rx_node *a[2] = {rx_arg_prim(I->b, RX_DTYPE_I64, rx_sym_const(I->m, 0)),
                   rx_arg_prim(I->b, RX_DTYPE_I64, out)};
  const rx_attr *at = rx_attr_dtype(I->m, "dtype", RX_DTYPE_F32);
  RX_RETURN_IF_ERROR(exa(I, n, "arange", a, 2, &at, 1, &i, &r));
  RX_RETURN_IF_ERROR(value_tensor(I, n, in, RX_DTYPE_F32, &inf));
  if (p->fscale) { /* the resized length is in * scale, not floored (ONNX's reference) */
    sc = FL(p->fscale[k]);
    EX2("multiply", inf, sc, outf);
  } else if (p->scales) {
    RX_RETURN_IF_ERROR(elem_of(I, n, p->scales, k, &sc));
    EX2("multiply", inf, sc, outf);
  } else {
    RX_RETURN_IF_ERROR(value_tensor(I, n, out, RX_DTYPE_F32, &outf));
    EX2("divide", outf, inf, sc);
  }
  if (p->coord == RS_PYTORCH || p->coord == RS_ALIGN || p->coord == RS_TF_CROP)
    EX2("greater", outf, FL(1.0), big); /* these divide by out - 1, or need out > 1 */
  switch (p->coord) {
  case RS_HALF_PIXEL:
  case RS_PYTORCH:
  case RS_TF_NN:
    EX2("add", i, FL(0.5), t);
    EX2("divide", t, sc, t);
    if (p->coord != RS_TF_NN) EX2("subtract", t, FL(0.5), t);
    if (p->coord == RS_PYTORCH) EX3("where", big, t, FL(0.0), t);
    break;
  case RS_ALIGN: /* i (in - 1) / (out - 1) */
    EX2("subtract", inf, FL(1.0), t);
    EX2("subtract", outf, FL(1.0), u);
    EX2("divide", t, u, t);
    EX2("multiply", i, t, t);
    EX3("where", big, t, FL(0.0), t);
    break;
  case RS_ASYM:
    EX2("divide", i, sc, t);
    break;
  case RS_TF_CROP: { /* start (in - 1) + i (end - start) (in - 1) / (out - 1) */
    rx_node *s, *e, *in1, *mid;
    RX_RETURN_IF_ERROR(elem_of(I, n, p->roi, k, &s));
    RX_RETURN_IF_ERROR(elem_of(I, n, p->roi, p->rank + k, &e));
    EX2("subtract", inf, FL(1.0), in1);
    EX2("add", s, e, mid);
    EX2("multiply", mid, FL(0.5), mid);
    EX2("multiply", mid, in1, mid);
    EX2("subtract", e, s, t);
    EX2("multiply", t, in1, t);
    EX2("subtract", outf, FL(1.0), u);
    EX2("divide", t, u, t);
    EX2("multiply", i, t, t);
    EX2("multiply", s, in1, u);
    EX2("add", t, u, t);
    EX3("where", big, t, mid, t);
    break;
  }
  }
  *x = t;
  return NULL;
}

/* y + take(x, clamp(idx, 0, in - 1), axis k) w (w reshaped to broadcast along k; y NULL: none
 * yet; w NULL: weight 1); *last: the variable of the new y. */
static rx_status rs_tap(imp *I, const Onnx__NodeProto *n, const rs_params *p, rx_node *x, int k,
                        const rx_expr *in, const rx_expr *out, rx_node *idx, rx_node *w,
                        rx_node **y, rx_var **last) {
  rx_node *hi, *g;
  rx_var *r = NULL;
  RX_RETURN_IF_ERROR(value_tensor(I, n, in, RX_DTYPE_F32, &hi));
  EX2("subtract", hi, FL(1.0), hi);
  EX2("maximum", idx, FL(0.0), idx);
  EX2("minimum", idx, hi, idx);
  const rx_attr *at = rx_attr_dtype(I->m, "dtype", RX_DTYPE_I64);
  EXA("cast", idx, &at, 1, idx);
  rx_node *a[2] = {x, idx};
  at = rx_attr_int(I->m, "axis", k);
  RX_RETURN_IF_ERROR(exa(I, n, "take", a, 2, &at, 1, &g, &r));
  if (w) {
    const rx_expr *d[SYM_MAX];
    d[0] = out;
    for (int j = k + 1; j < p->rank; j++) d[j - k] = rx_sym_const(I->m, 1);
    RX_RETURN_IF_ERROR(reshape_to(I, n, w, d, p->rank - k, &w, &r));
    EX2("multiply", g, w, g);
  }
  if (*y) EX2("add", *y, g, g);
  *y = g;
  *last = r;
  return NULL;
}

/* The cubic convolution weight of a tap at distance s (Keys, coefficient a):
 * (a + 2) s^3 - (a + 3) s^2 + 1 within 1, a s^3 - 5 a s^2 + 8 a s - 4 a from 1 to 2. */
static rx_status cubic_w(imp *I, const Onnx__NodeProto *n, double a, rx_node *s, bool outer,
                         rx_node **out) {
  rx_node *t;
  rx_var *r = NULL;
  EX2("multiply", s, FL(outer ? a : a + 2), t);
  EX2("subtract", t, FL(outer ? 5 * a : a + 3), t);
  EX2("multiply", t, s, t);
  if (outer) {
    EX2("add", t, FL(8 * a), t);
    EX2("multiply", t, s, t);
    EX2("subtract", t, FL(4 * a), *out);
  } else {
    EX2("multiply", t, s, t);
    EX2("add", t, FL(1.0), *out);
  }
  return NULL;
}

/* x resized along axis k from in to out (*y, its variable *last). */
static rx_status rs_axis(imp *I, const Onnx__NodeProto *n, const rs_params *p, rx_node *x, int k,
                         const rx_expr *in, const rx_expr *out, rx_node **y, rx_var **last) {
  rx_node *c, *f, *t, *idx;
  rx_var *r = NULL;
  *y = NULL;
  RX_RETURN_IF_ERROR(rs_coord_of(I, n, p, k, in, out, &c));
  if (p->mode == RS_NEAREST) {
    if (p->round == RS_PREFER_FLOOR) { /* ceil(c - 0.5): halves go down */
      EX2("subtract", c, FL(0.5), idx);
      EX1("ceil", idx, idx);
    } else if (p->round == RS_PREFER_CEIL) {
      EX2("add", c, FL(0.5), idx);
      EX1("floor", idx, idx);
    } else {
      EX1(p->round == RS_FLOOR ? "floor" : "ceil", c, idx);
    }
    RX_RETURN_IF_ERROR(rs_tap(I, n, p, x, k, in, out, idx, NULL, y, last));
  } else {
    EX1("floor", c, f);
    EX2("subtract", c, f, t); /* the fraction */
    int lo = p->mode == RS_LINEAR ? 0 : -1, hi = p->mode == RS_LINEAR ? 1 : 2;
    rx_node *w[4], *sum = NULL, *hif;
    RX_RETURN_IF_ERROR(value_tensor(I, n, in, RX_DTYPE_F32, &hif));
    EX2("subtract", hif, FL(1.0), hif);
    for (int j = lo; j <= hi; j++) {
      rx_node *s, **wj = &w[j - lo];
      if (p->mode == RS_LINEAR) { /* 1 - t, t */
        if (j == 0)
          EX2("subtract", FL(1.0), t, *wj);
        else
          *wj = t;
        continue;
      }
      if (j <= 0)
        EX2("add", t, FL((double)-j), s);
      else
        EX2("subtract", FL((double)j), t, s);
      RX_RETURN_IF_ERROR(cubic_w(I, n, p->a, s, j == -1 || j == 2, wj));
      if (p->exclude) { /* taps outside the input weigh 0, the rest renormalized */
        rx_node *at_j, *ok, *ok2;
        EX2("add", f, FL((double)j), at_j);
        EX2("greater_equal", at_j, FL(0.0), ok);
        EX2("less_equal", at_j, hif, ok2);
        EX2("logical_and", ok, ok2, ok);
        EX3("where", ok, *wj, FL(0.0), *wj);
        if (sum)
          EX2("add", sum, *wj, sum);
        else
          sum = *wj;
      }
    }
    for (int j = lo; j <= hi; j++) {
      rx_node *wj = w[j - lo];
      if (sum) EX2("divide", wj, sum, wj);
      if (j)
        EX2("add", f, FL((double)j), idx);
      else
        idx = f;
      RX_RETURN_IF_ERROR(rs_tap(I, n, p, x, k, in, out, idx, wj, y, last));
    }
  }
  if (p->coord == RS_TF_CROP) { /* extrapolation_value outside the input */
    rx_node *hif, *bad, *bad2;
    RX_RETURN_IF_ERROR(value_tensor(I, n, in, RX_DTYPE_F32, &hif));
    EX2("subtract", hif, FL(1.0), hif);
    EX2("less", c, FL(0.0), bad);
    EX2("greater", c, hif, bad2);
    EX2("logical_or", bad, bad2, bad);
    const rx_expr *d[SYM_MAX];
    d[0] = out;
    for (int j = k + 1; j < p->rank; j++) d[j - k] = rx_sym_const(I->m, 1);
    RX_RETURN_IF_ERROR(reshape_to(I, n, bad, d, p->rank - k, &bad, &r));
    EX3("where", bad, FL(p->extrap), *y, *y);
    *last = r;
  }
  return NULL;
}

/* floor(d s) as a symbolic expression where it is one (d constant, or s a fraction p / q with
 * q <= 64 to within the float's precision: (d p) // q, or (d p - 1) // q where the float is just
 * below p / q, as floor(d s) is then for any d below about 1 / (q |s - p / q|)); NULL otherwise. */
static const rx_expr *scaled_dim(imp *I, const rx_expr *d, float s) {
  if (!(s > 0) || s > 1e6) return NULL;
  if (d->kind == RX_EXPR_CONST) return rx_sym_const(I->m, (int64_t)floor((double)d->value * s));
  for (int64_t q = 1; q <= 64; q++) {
    double pq = (double)s * (double)q, p = nearbyint(pq);
    if (p < 1 || fabs(pq - p) > 1e-6 * pq) continue;
    const rx_expr *dp = rx_sym_mul(I->m, d, rx_sym_const(I->m, (int64_t)p));
    if (pq < p) dp = rx_sym_sub(I->m, dp, rx_sym_const(I->m, 1));
    return rx_sym_floordiv(I->m, dp, rx_sym_const(I->m, q));
  }
  return NULL;
}

/* The output dims floor(in * scale) of run-time scales (p->scales), computed at run time and
 * bound then. */
static rx_status rs_runtime_dims(imp *I, const Onnx__NodeProto *n, const rs_params *p,
                                 const rx_sinfo *xs, const rx_expr **out) {
  rx_node *parts[SYM_MAX], *t;
  rx_var *r = NULL, *tup;
  for (int k = 0; k < xs->ndim; k++)
    RX_RETURN_IF_ERROR(value_tensor(I, n, xs->shape[k], RX_DTYPE_F32, &parts[k]));
  RX_RETURN_IF_ERROR(at_node(I, n, rx_emit_tuple(I->b, parts, xs->ndim, NULL, &tup)));
  t = rx_arg_var(I->b, tup);
  const rx_attr *at = rx_attr_int(I->m, "axis", 0);
  EXA("concat", t, &at, 1, t);
  EX2("multiply", t, p->scales, t);
  EX1("floor", t, t);
  at = rx_attr_dtype(I->m, "dtype", RX_DTYPE_I64);
  EXA("cast", t, &at, 1, t);
  val dims = {.kind = V_TENSOR, .var = r};
  RX_RETURN_IF_ERROR(runtime_sym(I, n, &dims));
  memcpy(out, dims.s, sizeof *out * (size_t)xs->ndim);
  return NULL;
}

/* Is input i absent: not given, or an empty constant or tensor (opset 11's empty roi and
 * scales)? */
static bool absent_input(imp *I, const Onnx__NodeProto *n, size_t i) {
  val *v = input(n, i) ? get(I, input(n, i)) : NULL;
  if (!v) return true;
  if (v->kind == V_SYM) return v->slen == 0;
  const rx_sinfo *si = tsinfo(v);
  return si && si->ndim == 1 && si->shape && rx_expr_is_const(si->shape[0], 0);
}

/* Resize (opset 11+: X, roi, scales, sizes) and Upsample (opset 9: X, scales): the output
 * dims are sizes (constants or values bound at run time), floor(in * scale) of constant scales
 * (an initializer or Constant: symbolic dims, scaled_dim), or else computed at run time from the
 * scales tensor (and bound then); each axis whose size may change is resized in turn (the modes
 * are separable, as ONNX defines them). */
static rx_status do_resize(imp *I, const Onnx__NodeProto *n, const char *rop) {
  (void)rop;
  const rx_sinfo *xs;
  RX_RETURN_IF_ERROR(known_shape(I, n, 0, 1, SYM_MAX, &xs));
  rs_params p = {.rank = xs->ndim};
  RX_RETURN_IF_ERROR(rs_read(I, n, &p));
  bool up = !strcmp(n->op_type, "Upsample");
  size_t si = up ? 1 : 2;
  const rx_expr *out[SYM_MAX];
  if (!up && !absent_input(I, n, 3)) {
    val *v;
    RX_RETURN_IF_ERROR(sym_input(I, n, 3, &v));
    if (v->slen != xs->ndim) return node_err(I, n, "sizes must have %d values", xs->ndim);
    memcpy(out, v->s, sizeof *out * (size_t)xs->ndim);
  } else if (!absent_input(I, n, si)) {
    if (p.coord == RS_TF_CROP)
      return node_err(I, n, "tf_crop_and_resize with scales (not sizes) is not supported");
    val *sv = get(I, input(n, si));
    const rx_sinfo *ss = tsinfo(sv);
    if (!ss || ss->ndim != 1 || !ss->shape || !rx_expr_is_const(ss->shape[0], xs->ndim) ||
        ss->dtype != RX_DTYPE_F32)
      return node_err(I, n, "scales must be a f32 tensor of %d values", xs->ndim);
    if (sv->nfl == xs->ndim) { /* constant scales: symbolic output dims where they fold */
      p.fscale = sv->fl;
      for (int k = 0; k < xs->ndim && p.fscale; k++)
        if (!(out[k] = scaled_dim(I, xs->shape[k], sv->fl[k]))) p.fscale = NULL;
    }
    if (!p.fscale) {
      RX_RETURN_IF_ERROR(arg(I, n, input(n, si), &p.scales));
      RX_RETURN_IF_ERROR(rs_runtime_dims(I, n, &p, xs, out));
    }
  } else {
    return node_err(I, n, "needs scales or sizes");
  }
  if (p.coord == RS_TF_CROP) {
    if (absent_input(I, n, 1)) return node_err(I, n, "tf_crop_and_resize needs roi");
    RX_RETURN_IF_ERROR(arg(I, n, input(n, 1), &p.roi));
  }
  rx_node *x;
  RX_RETURN_IF_ERROR(arg(I, n, input(n, 0), &x));
  rx_var *r = NULL;
  for (int k = 0; k < xs->ndim; k++) {
    bool same = p.fscale ? p.fscale[k] == 1.0f : !p.scales && out[k] == xs->shape[k];
    if (same && p.coord != RS_TF_CROP && p.coord != RS_TF_NN)
      continue; /* scale 1, and a coordinate map that is then the identity */
    RX_RETURN_IF_ERROR(rs_axis(I, n, &p, x, k, xs->shape[k], out[k], &x, &r));
  }
  if (r)
    def_tensor(I, n, r);
  else /* nothing resized */
    def_alias(I, n, get(I, input(n, 0)));
  return NULL;
}
#undef EXA

/* ---- indexing ops composed of arange, take and where (issue 17) ---- */

#define I64(e) rx_arg_prim(I->b, RX_DTYPE_I64, (e))

/* arange(lo, hi) as i64, a 1-D tensor of length hi - lo */
static rx_status iota(imp *I, const Onnx__NodeProto *n, const rx_expr *lo, const rx_expr *hi,
                      rx_node **out) {
  rx_node *a[2] = {I64(lo), I64(hi)};
  const rx_attr *at = rx_attr_dtype(I->m, "dtype", RX_DTYPE_I64);
  rx_var *r;
  RX_RETURN_IF_ERROR(emit(I, n, "arange", a, 2, &at, 1, &r));
  *out = rx_arg_var(I->b, r);
  return NULL;
}

/* x with `count` unit dims appended (a 1-D index along axis a of a rank-(a + 1 + count) result,
 * shaped to broadcast against it); x itself when count is 0 */
static rx_status trailing_units(imp *I, const Onnx__NodeProto *n, rx_node *x, int count,
                                rx_node **out) {
  *out = x;
  if (count <= 0) return NULL;
  int64_t axes[SYM_MAX];
  for (int k = 0; k < count && k < SYM_MAX; k++) axes[k] = k + 1;
  const rx_attr *at = rx_attr_ints(I->m, "axes", axes, count < SYM_MAX ? count : SYM_MAX);
  rx_var *r;
  RX_RETURN_IF_ERROR(emit(I, n, "expand_dims", &x, 1, &at, 1, &r));
  *out = rx_arg_var(I->b, r);
  return NULL;
}

/* a mod m of an i64 tensor a and a positive m, floored: a - (a // m) m (relaxc's integer divide
 * floors), so the result is in [0, m) */
static rx_status imod(imp *I, const Onnx__NodeProto *n, rx_node *a, const rx_expr *m,
                      rx_node **out) {
  rx_var *r;
  rx_node *q;
  EX2("divide", a, I64(m), q);
  EX2("multiply", q, I64(m), q);
  EX2("subtract", a, q, *out);
  return NULL;
}

/* cols - rows of an [nr, nc] grid of i64 (the diagonal offset j - i of each element; Trilu and
 * EyeLike compare it with k) */
static rx_status diag_offset(imp *I, const Onnx__NodeProto *n, const rx_expr *nr, const rx_expr *nc,
                             rx_node **out) {
  rx_var *r;
  rx_node *rows, *cols;
  const rx_expr *zero = rx_sym_const(I->m, 0);
  RX_RETURN_IF_ERROR(iota(I, n, zero, nr, &rows));
  RX_RETURN_IF_ERROR(trailing_units(I, n, rows, 1, &rows));
  RX_RETURN_IF_ERROR(iota(I, n, zero, nc, &cols));
  EX2("subtract", cols, rows, *out);
  return NULL;
}

/* x taken along axis at the i64 indices idx (*r: its variable) */
static rx_status take_at(imp *I, const Onnx__NodeProto *n, rx_node *x, rx_node *idx, int64_t axis,
                         rx_node **out, rx_var **r) {
  rx_node *a[2] = {x, idx};
  const rx_attr *at = rx_attr_int(I->m, "axis", axis);
  RX_RETURN_IF_ERROR(emit(I, n, "take", a, 2, &at, 1, r));
  *out = rx_arg_var(I->b, *r);
  return NULL;
}

/* The input's tensor struct info with known shape, or NULL. */
static const rx_sinfo *shaped(imp *I, const Onnx__NodeProto *n, size_t i) {
  const rx_sinfo *si = tsinfo(input(n, i) ? get(I, input(n, i)) : NULL);
  return si && si->kind == RX_SINFO_TENSOR && si->shape && si->ndim <= SYM_MAX ? si : NULL;
}

/* x (shape si) at the grid of the per-axis i64 index vectors idx[k] (NULL: arange of the dim):
 * one take from x flattened, at sum_k idx[k] * stride_k with each idx[k] shaped to broadcast
 * along its axis (one gather, so that fusion inlines the index arithmetic; a chain of takes
 * along each axis would load an intermediate at a data-dependent index, which it cannot). */
static rx_status gather_grid(imp *I, const Onnx__NodeProto *n, const rx_sinfo *si, rx_node *x,
                             rx_node **idx, rx_var **out) {
  int rank = si->ndim;
  rx_var *r = NULL;
  rx_node *flat = NULL, *t;
  const rx_expr *stride = rx_sym_const(I->m, 1);
  for (int k = rank - 1; k >= 0; k--) {
    t = idx[k];
    if (!t) RX_RETURN_IF_ERROR(iota(I, n, rx_sym_const(I->m, 0), si->shape[k], &t));
    if (!rx_expr_is_const(stride, 1)) EX2("multiply", t, I64(stride), t);
    RX_RETURN_IF_ERROR(trailing_units(I, n, t, rank - 1 - k, &t));
    if (flat) EX2("add", t, flat, t);
    flat = t;
    stride = rx_sym_mul(I->m, stride, si->shape[k]);
  }
  rx_node *a[2] = {x, rx_arg_shape(I->b, &stride, 1)};
  RX_RETURN_IF_ERROR(emit(I, n, "reshape", a, 2, NULL, 0, &r));
  return take_at(I, n, rx_arg_var(I->b, r), flat, 0, &t, out);
}

/* Pad (pads and value attributes before opset 11; then inputs, and axes from 18): along each
 * padded axis of length d with pads b (before) and e (after), the index o = arange(-b, d + e)
 * mapped into [0, d): clamped (edge; constant too, whose positions outside [0, d) a mask then
 * sets to the value), folded back at the ends (reflect, period 2 (d - 1)) or wrapped (wrap);
 * x gathered at the grid of those indices. Constant pads may be negative (they crop); pads
 * computed at run time are bound as sizes, so the VM rejects a negative one. */
static rx_status do_pad(imp *I, const Onnx__NodeProto *n, const char *rop) {
  (void)rop;
  const rx_sinfo *si = shaped(I, n, 0);
  if (!si || si->ndim < 1)
    return node_err(I, n, "the input's shape is not known (rank and dims needed)");
  int rank = si->ndim;
  const rx_expr *pads[SYM_MAX];
  int np, na = -1;
  int64_t axes[SYM_MAX];
  RX_RETURN_IF_ERROR(sym_list(I, n, 1, "pads", pads, &np));
  if (input(n, 3)) RX_RETURN_IF_ERROR(int_list(I, n, 3, "axes", axes, &na));
  if (na < 0)
    for (na = 0; na < rank; na++) axes[na] = na;
  if (np != 2 * na)
    return node_err(I, n, "expects %d pads (a begin and an end per axis), got %d", 2 * na, np);
  int mode = attr_s_is(n, "mode", "") || attr_s_is(n, "mode", "constant") ? 'c'
             : attr_s_is(n, "mode", "edge")                               ? 'e'
             : attr_s_is(n, "mode", "reflect")                            ? 'r'
             : attr_s_is(n, "mode", "wrap")                               ? 'w'
                                                                          : 0;
  if (!mode) return node_err(I, n, "mode must be constant, edge, reflect or wrap");
  rx_var *r = NULL;
  rx_node *idx[SYM_MAX] = {0}, *mask = NULL;
  bool any = false;
  const rx_expr *zero = rx_sym_const(I->m, 0), *one = rx_sym_const(I->m, 1);
  for (int k = 0; k < na; k++) {
    int64_t ax = axes[k] < 0 ? axes[k] + rank : axes[k];
    if (ax < 0 || ax >= rank) return node_err(I, n, "axis %lld out of range", (long long)axes[k]);
    const rx_expr *b = pads[k], *e = pads[k + na], *d = si->shape[ax];
    if (rx_expr_is_const(b, 0) && rx_expr_is_const(e, 0)) continue;
    any = true;
    rx_node *o, *t, *u;
    RX_RETURN_IF_ERROR(iota(I, n, rx_sym_sub(I->m, zero, b), rx_sym_add(I->m, d, e), &o));
    if (mode == 'c' || mode == 'e') { /* clamp to [0, d - 1] */
      EX2("maximum", o, I64(zero), idx[ax]);
      EX2("minimum", idx[ax], I64(rx_sym_sub(I->m, d, one)), idx[ax]);
    } else if (mode == 'w') {
      RX_RETURN_IF_ERROR(imod(I, n, o, d, &idx[ax]));
    } else { /* reflect: t = o mod 2 (d - 1), then t or 2 (d - 1) - t */
      const rx_expr *per =
          rx_sym_max(I->m, rx_sym_mul(I->m, rx_sym_const(I->m, 2), rx_sym_sub(I->m, d, one)), one);
      RX_RETURN_IF_ERROR(imod(I, n, o, per, &t));
      EX2("subtract", I64(per), t, u);
      EX2("less", t, I64(d), idx[ax]);
      EX3("where", idx[ax], t, u, idx[ax]);
    }
    if (mode == 'c') { /* inside: 0 <= o < d, shaped to broadcast along ax */
      EX2("greater_equal", o, I64(zero), t);
      EX2("less", o, I64(d), u);
      EX2("logical_and", t, u, t);
      RX_RETURN_IF_ERROR(trailing_units(I, n, t, rank - 1 - (int)ax, &t));
      if (mask) EX2("logical_and", mask, t, t);
      mask = t;
    }
  }
  if (!any) { /* nothing padded */
    def_alias(I, n, get(I, input(n, 0)));
    return NULL;
  }
  rx_node *cur;
  RX_RETURN_IF_ERROR(gather_grid(I, n, si, rx_arg_var(I->b, get(I, input(n, 0))->var), idx, &r));
  cur = rx_arg_var(I->b, r);
  if (mask) {
    rx_node *value = FL(I->opset < 11 ? onnx_attr_f(n, "value", 0.0) : 0.0);
    if (I->opset >= 11 && input(n, 2)) RX_RETURN_IF_ERROR(arg(I, n, input(n, 2), &value));
    EX3("where", mask, cur, value, cur);
  }
  def_tensor(I, n, r);
  return NULL;
}

/* Tile: along each axis of length d repeated r times, the index arange(0, d r) mod d; x
 * gathered at the grid of those indices */
static rx_status do_tile(imp *I, const Onnx__NodeProto *n, const char *rop) {
  (void)rop;
  const rx_sinfo *si = shaped(I, n, 0);
  if (!si) return node_err(I, n, "the input's shape is not known (rank and dims needed)");
  const rx_expr *reps[SYM_MAX];
  int nr;
  RX_RETURN_IF_ERROR(sym_list(I, n, 1, "repeats", reps, &nr));
  if (nr != si->ndim)
    return node_err(I, n, "expects %d repeats (one per axis), got %d", si->ndim, nr);
  rx_var *r = NULL;
  rx_node *idx[SYM_MAX] = {0};
  bool any = false;
  for (int ax = 0; ax < si->ndim; ax++) {
    if (rx_expr_is_const(reps[ax], 1)) continue;
    rx_node *o;
    const rx_expr *d = si->shape[ax];
    RX_RETURN_IF_ERROR(iota(I, n, rx_sym_const(I->m, 0), rx_sym_mul(I->m, d, reps[ax]), &o));
    RX_RETURN_IF_ERROR(imod(I, n, o, d, &idx[ax]));
    any = true;
  }
  if (!any) {
    def_alias(I, n, get(I, input(n, 0)));
    return NULL;
  }
  RX_RETURN_IF_ERROR(gather_grid(I, n, si, rx_arg_var(I->b, get(I, input(n, 0))->var), idx, &r));
  def_tensor(I, n, r);
  return NULL;
}

/* A scalar integer (a symbolic value) of input i: a constant, a shape value, or a tensor bound
 * at run time (a float tensor is cast to i64 first, as OneHot's depth may be). */
static rx_status scalar_input(imp *I, const Onnx__NodeProto *n, size_t i, const rx_expr **out) {
  val *v = input(n, i) ? get(I, input(n, i)) : NULL;
  const rx_sinfo *si = tsinfo(v);
  if (v && v->kind == V_FCONST) {
    *out = rx_sym_const(I->m, (int64_t)v->f);
    return NULL;
  }
  if (si && si->kind == RX_SINFO_TENSOR && rx_dtype_is_float(si->dtype)) {
    rx_node *a = rx_arg_var(I->b, v->var);
    const rx_attr *at = rx_attr_dtype(I->m, "dtype", RX_DTYPE_I64);
    val tmp = {.name = NULL, .kind = V_TENSOR};
    RX_RETURN_IF_ERROR(emit(I, n, "cast", &a, 1, &at, 1, &tmp.var));
    RX_RETURN_IF_ERROR(runtime_sym(I, n, &tmp));
    *out = tmp.s[0];
    return tmp.slen == 1 ? NULL : node_err(I, n, "input %zu must be a scalar", i);
  }
  RX_RETURN_IF_ERROR(sym_input(I, n, i, &v));
  if (v->slen != 1) return node_err(I, n, "input %zu must be a scalar", i);
  *out = v->s[0];
  return NULL;
}

/* TopK: topk(x, k=[K]), K from input 1 (opset 10; a constant or a value bound at run time) or
 * the k attribute; the values and the i64 indices. sorted=0 gets them sorted too (ONNX allows
 * any order then). */
static rx_status do_topk(imp *I, const Onnx__NodeProto *n, const char *rop) {
  const rx_expr *k;
  if (I->opset < 10) {
    const Onnx__AttributeProto *ka = onnx_attr(n, "k");
    if (!ka || !ka->has_i) return node_err(I, n, "the k attribute is required");
    k = rx_sym_const(I->m, ka->i);
  } else {
    RX_RETURN_IF_ERROR(scalar_input(I, n, 1, &k));
  }
  rx_node *x;
  RX_RETURN_IF_ERROR(arg(I, n, input(n, 0), &x));
  const rx_attr *at[3] = {rx_attr_exprs(I->m, "k", &k, 1),
                          rx_attr_int(I->m, "axis", onnx_attr_i(n, "axis", -1)),
                          rx_attr_bool(I->m, "largest", onnx_attr_i(n, "largest", 1) != 0)};
  rx_var *tup, *r;
  RX_RETURN_IF_ERROR(emit(I, n, rop, &x, 1, at, 3, &tup));
  for (int j = 0; j < 2 && j < (int)n->n_output; j++) {
    if (!n->output[j] || !n->output[j][0]) continue;
    RX_RETURN_IF_ERROR(at_node(I, n, rx_emit_get_item(I->b, rx_arg_var(I->b, tup), j, NULL, &r)));
    def_named(I, n->output[j], r);
  }
  return NULL;
}

/* OneHot(indices, depth, values [off, on]): equal(indices with a unit dim at axis (negative
 * ones counted from depth), arange(depth) along axis) as 0 / 1 indices into values */
static rx_status do_one_hot(imp *I, const Onnx__NodeProto *n, const char *rop) {
  (void)rop;
  const rx_sinfo *si = shaped(I, n, 0);
  if (!si) return node_err(I, n, "the indices' shape is not known (rank and dims needed)");
  const rx_expr *depth;
  RX_RETURN_IF_ERROR(scalar_input(I, n, 1, &depth));
  int rank = si->ndim;
  int64_t axis = onnx_attr_i(n, "axis", -1);
  if (axis < -rank - 1 || axis > rank)
    return node_err(I, n, "axis %lld out of range for indices of rank %d", (long long)axis, rank);
  if (axis < 0) axis += rank + 1;
  rx_var *r = NULL;
  rx_node *idx, *vals, *t, *ar;
  RX_RETURN_IF_ERROR(arg(I, n, input(n, 0), &idx));
  RX_RETURN_IF_ERROR(arg(I, n, input(n, 2), &vals));
  const rx_attr *at = rx_attr_dtype(I->m, "dtype", RX_DTYPE_I64);
  if (si->dtype != RX_DTYPE_I64) {
    RX_RETURN_IF_ERROR(emit(I, n, "cast", &idx, 1, &at, 1, &r));
    idx = rx_arg_var(I->b, r);
  }
  EX2("less", idx, I64(rx_sym_const(I->m, 0)), t);
  EX2("add", idx, I64(depth), ar);
  EX3("where", t, ar, idx, idx);
  const rx_attr *ea = rx_attr_ints(I->m, "axes", &axis, 1);
  RX_RETURN_IF_ERROR(emit(I, n, "expand_dims", &idx, 1, &ea, 1, &r));
  idx = rx_arg_var(I->b, r);
  RX_RETURN_IF_ERROR(iota(I, n, rx_sym_const(I->m, 0), depth, &ar));
  RX_RETURN_IF_ERROR(trailing_units(I, n, ar, rank - (int)axis, &ar));
  EX2("equal", idx, ar, t);
  RX_RETURN_IF_ERROR(emit(I, n, "cast", &t, 1, &at, 1, &r));
  RX_RETURN_IF_ERROR(take_at(I, n, vals, rx_arg_var(I->b, r), 0, &t, &r));
  def_tensor(I, n, r);
  return NULL;
}

/* EyeLike: ones where j - i == k over the 2-D input's shape, in dtype (default the input's) */
static rx_status do_eye_like(imp *I, const Onnx__NodeProto *n, const char *rop) {
  (void)rop;
  const rx_sinfo *si = shaped(I, n, 0);
  if (!si || si->ndim != 2) return node_err(I, n, "expects a 2-D input of known shape");
  rx_dtype dt = si->dtype;
  if (onnx_attr(n, "dtype") && !onnx_dtype_of((int32_t)onnx_attr_i(n, "dtype", 0), &dt))
    return node_err(I, n, "unsupported dtype %lld", (long long)onnx_attr_i(n, "dtype", 0));
  rx_var *r = NULL;
  rx_node *t;
  RX_RETURN_IF_ERROR(diag_offset(I, n, si->shape[0], si->shape[1], &t));
  EX2("equal", t, I64(rx_sym_const(I->m, onnx_attr_i(n, "k", 0))), t);
  const rx_attr *at = rx_attr_dtype(I->m, "dtype", dt);
  RX_RETURN_IF_ERROR(emit(I, n, "cast", &t, 1, &at, 1, &r));
  def_tensor(I, n, r);
  return NULL;
}

/* The flat index of each index vector (the last axis of indices, m values for data's dims
 * from b on): the sum of each index (negative counted from its dim) times its stride in those
 * dims, squeezed to indices' other dims; *stride the product of the m dims. */
static rx_status nd_flat_index(imp *I, const Onnx__NodeProto *n, const rx_sinfo *ds,
                               const rx_sinfo *is, int64_t b, int64_t m, rx_node **out,
                               const rx_expr **stride) {
  rx_var *r = NULL;
  rx_node *idx, *lin = NULL, *t, *u;
  RX_RETURN_IF_ERROR(arg(I, n, input(n, 1), &idx));
  int64_t last = is->ndim - 1;
  *stride = rx_sym_const(I->m, 1);
  for (int64_t k = m - 1; k >= 0; k--) { /* idx[..., k] * stride, summed */
    const rx_expr *d = ds->shape[b + k], *bk = rx_sym_const(I->m, k),
                  *ek = rx_sym_const(I->m, k + 1);
    const rx_attr *sa[3] = {rx_attr_ints(I->m, "axes", &last, 1),
                            rx_attr_exprs(I->m, "begin", &bk, 1),
                            rx_attr_exprs(I->m, "end", &ek, 1)};
    RX_RETURN_IF_ERROR(emit(I, n, "strided_slice", &idx, 1, sa, 3, &r));
    t = rx_arg_var(I->b, r);
    const rx_attr *ca = rx_attr_dtype(I->m, "dtype", RX_DTYPE_I64);
    if (is->dtype != RX_DTYPE_I64) {
      RX_RETURN_IF_ERROR(emit(I, n, "cast", &t, 1, &ca, 1, &r));
      t = rx_arg_var(I->b, r);
    }
    EX2("less", t, I64(rx_sym_const(I->m, 0)), u);
    rx_node *w;
    EX2("add", t, I64(d), w);
    EX3("where", u, w, t, t);
    EX2("multiply", t, I64(*stride), t);
    if (lin) EX2("add", lin, t, t);
    lin = t;
    *stride = rx_sym_mul(I->m, *stride, d);
  }
  const rx_attr *sq = rx_attr_ints(I->m, "axes", &last, 1);
  RX_RETURN_IF_ERROR(emit(I, n, "squeeze", &lin, 1, &sq, 1, &r));
  *out = rx_arg_var(I->b, r);
  return NULL;
}

/* GatherND(data, indices [..., m], batch_dims b): data flattened to [B P, rest...] (B the batch
 * dims' product, P that of the m indexed dims), taken at the flat index: the batch position
 * times P plus the sum over the last axis of indices of each index (negative counted from its
 * dim) times its stride. */
static rx_status do_gather_nd(imp *I, const Onnx__NodeProto *n, const char *rop) {
  (void)rop;
  const rx_sinfo *ds = shaped(I, n, 0), *is = shaped(I, n, 1);
  if (!ds || !is || is->ndim < 1)
    return node_err(I, n, "the shapes of data and indices are not known (rank and dims needed)");
  int64_t b = onnx_attr_i(n, "batch_dims", 0);
  const rx_expr *mlast = is->shape[is->ndim - 1];
  if (mlast->kind != RX_EXPR_CONST)
    return node_err(I, n, "the last dim of indices must be a constant");
  int64_t m = mlast->value;
  if (m < 1 || b < 0 || b >= is->ndim || b + m > ds->ndim)
    return node_err(I, n,
                    "batch_dims %lld and an index of %lld values do not fit data of rank "
                    "%d and indices of rank %d",
                    (long long)b, (long long)m, ds->ndim, is->ndim);
  rx_var *r = NULL;
  rx_node *lin, *t;
  const rx_expr *stride, *batch = rx_sym_const(I->m, 1);
  RX_RETURN_IF_ERROR(nd_flat_index(I, n, ds, is, b, m, &lin, &stride));
  for (int64_t k = 0; k < b; k++) batch = rx_sym_mul(I->m, batch, ds->shape[k]);
  if (b > 0) { /* + the flat batch position times P, arange(B) shaped to the batch dims */
    const rx_expr *bd[SYM_MAX];
    int nb = 0;
    for (int64_t k = 0; k < is->ndim - 1; k++)
      bd[nb++] = k < b ? is->shape[k] : rx_sym_const(I->m, 1);
    RX_RETURN_IF_ERROR(iota(I, n, rx_sym_const(I->m, 0), batch, &t));
    rx_node *a[2] = {t, rx_arg_shape(I->b, bd, nb)};
    RX_RETURN_IF_ERROR(emit(I, n, "reshape", a, 2, NULL, 0, &r));
    t = rx_arg_var(I->b, r);
    EX2("multiply", t, I64(stride), t);
    EX2("add", lin, t, lin);
  }
  const rx_expr *fd[SYM_MAX];
  int nf = 0;
  fd[nf++] = rx_sym_mul(I->m, batch, stride);
  for (int64_t k = b + m; k < ds->ndim; k++) fd[nf++] = ds->shape[k];
  rx_node *a[2];
  RX_RETURN_IF_ERROR(arg(I, n, input(n, 0), &a[0]));
  a[1] = rx_arg_shape(I->b, fd, nf);
  RX_RETURN_IF_ERROR(emit(I, n, "reshape", a, 2, NULL, 0, &r));
  RX_RETURN_IF_ERROR(take_at(I, n, rx_arg_var(I->b, r), lin, 0, &t, &r));
  def_tensor(I, n, r);
  return NULL;
}

/* ---- scatter and its users, einsum, ReverseSequence (ops/scatter.c) ---- */

static const char *const scatter_reds[] = {"none", "add", "mul", "min", "max"};

/* scatter_elements(x, idx, upd) along axis, combined by the node's reduction attribute */
static rx_status scatter_to(imp *I, const Onnx__NodeProto *n, rx_node *x, rx_node *idx,
                            rx_node *upd, int64_t axis, rx_node **out, rx_var **r) {
  int red = attr_choice(n, "reduction", scatter_reds, (int)RX_ARRAY_LEN(scatter_reds), 0);
  if (red < 0) return node_err(I, n, "reduction must be none, add, mul, min or max");
  rx_node *a[3] = {x, idx, upd};
  const rx_attr *at[2] = {rx_attr_int(I->m, "axis", axis),
                          rx_attr_str(I->m, "reduction", scatter_reds[red])};
  return exa(I, n, "scatter_elements", a, 3, at, 2, out, r);
}

/* ScatterElements and its deprecated alias Scatter: scatter_elements */
static rx_status do_scatter(imp *I, const Onnx__NodeProto *n, const char *rop) {
  (void)rop;
  rx_node *a[3], *t;
  rx_var *r = NULL;
  for (int k = 0; k < 3; k++) RX_RETURN_IF_ERROR(arg(I, n, input(n, (size_t)k), &a[k]));
  RX_RETURN_IF_ERROR(scatter_to(I, n, a[0], a[1], a[2], onnx_attr_i(n, "axis", 0), &t, &r));
  def_tensor(I, n, r);
  return NULL;
}

/* zeros of dims in dtype dt */
static rx_status zeros_of(imp *I, const Onnx__NodeProto *n, const rx_expr *const *dims, int k,
                          rx_dtype dt, rx_node **out) {
  rx_node *sh = rx_arg_shape(I->b, dims, k);
  const rx_attr *at = rx_attr_dtype(I->m, "dtype", dt);
  return exa(I, n, "zeros", &sh, 1, &at, 1, out, NULL);
}

/* ScatterND(data, indices [..., m], updates): data flattened to [P, rest...] (P the product of
 * its first m dims), the updates to [N, rest...] and each index vector's flat index (as
 * GatherND's) broadcast over rest; scatter_elements along axis 0, reshaped back. */
static rx_status do_scatter_nd(imp *I, const Onnx__NodeProto *n, const char *rop) {
  (void)rop;
  const rx_sinfo *ds = shaped(I, n, 0), *is = shaped(I, n, 1), *us = shaped(I, n, 2);
  if (!ds || !is || !us || is->ndim < 1)
    return node_err(I, n, "the shapes of data, indices and updates are not known");
  const rx_expr *mlast = is->shape[is->ndim - 1];
  if (mlast->kind != RX_EXPR_CONST)
    return node_err(I, n, "the last dim of indices must be a constant");
  int64_t m = mlast->value;
  if (m < 1 || m > ds->ndim || us->ndim != is->ndim - 1 + ds->ndim - (int)m)
    return node_err(
        I, n,
        "indices of rank %d with %lld values and updates of rank %d do not fit data of rank %d",
        is->ndim, (long long)m, us->ndim, ds->ndim);
  rx_var *r = NULL;
  rx_node *lin, *x, *u, *z;
  const rx_expr *stride, *nf = rx_sym_const(I->m, 1), *fd[SYM_MAX], *ud[SYM_MAX], *ld[SYM_MAX];
  RX_RETURN_IF_ERROR(nd_flat_index(I, n, ds, is, 0, m, &lin, &stride));
  for (int k = 0; k < is->ndim - 1; k++) nf = rx_sym_mul(I->m, nf, is->shape[k]);
  int nr = ds->ndim - (int)m;
  fd[0] = stride;
  ud[0] = ld[0] = nf;
  for (int k = 0; k < nr; k++) {
    fd[k + 1] = ud[k + 1] = ds->shape[m + k];
    ld[k + 1] = rx_sym_const(I->m, 1);
  }
  RX_RETURN_IF_ERROR(arg(I, n, input(n, 0), &x));
  RX_RETURN_IF_ERROR(reshape_to(I, n, x, fd, nr + 1, &x, NULL));
  RX_RETURN_IF_ERROR(arg(I, n, input(n, 2), &u));
  RX_RETURN_IF_ERROR(reshape_to(I, n, u, ud, nr + 1, &u, NULL));
  RX_RETURN_IF_ERROR(reshape_to(I, n, lin, ld, nr + 1, &lin, NULL));
  if (nr > 0) {
    RX_RETURN_IF_ERROR(zeros_of(I, n, ud, nr + 1, RX_DTYPE_I64, &z));
    EX2("add", lin, z, lin);
  }
  RX_RETURN_IF_ERROR(scatter_to(I, n, x, lin, u, 0, &x, &r));
  RX_RETURN_IF_ERROR(reshape_to(I, n, x, ds->shape, ds->ndim, &x, &r));
  def_tensor(I, n, r);
  return NULL;
}

/* Flat indices over dims `from` re-encoded as flat indices over dims `to` (same rank): each
 * coordinate taken off by floor division, from the last dim. */
static rx_status relinearize(imp *I, const Onnx__NodeProto *n, rx_node *idx,
                             const rx_expr *const *from, const rx_expr *const *to, int rank,
                             rx_node **out) {
  rx_var *r = NULL;
  rx_node *rem = idx, *acc = NULL, *q, *c;
  const rx_expr *stride = rx_sym_const(I->m, 1);
  for (int k = rank - 1; k >= 0; k--) {
    EX2("divide", rem, I64(from[k]), q);
    EX2("multiply", q, I64(from[k]), c);
    EX2("subtract", rem, c, c);
    EX2("multiply", c, I64(stride), c);
    if (acc) EX2("add", acc, c, c);
    acc = c;
    rem = q;
    stride = rx_sym_mul(I->m, stride, to[k]);
  }
  *out = acc;
  return NULL;
}

/* MaxUnpool(X, I[, output_shape]): X's values written at I's flat indices into zeros of the
 * output shape. I counts in the default shape ((in - 1) stride - pads + kernel per spatial dim);
 * a given output_shape pads that at the end of each dim, so I is re-encoded for it. */
static rx_status do_max_unpool(imp *I, const Onnx__NodeProto *n, const char *rop) {
  (void)rop;
  const rx_sinfo *xs;
  RX_RETURN_IF_ERROR(known_shape(I, n, 0, 3, SYM_MAX, &xs));
  int sp = xs->ndim - 2;
  int64_t kern[SYM_MAX], st[SYM_MAX], pads[2 * SYM_MAX];
  RX_RETURN_IF_ERROR(ints_attr(I, n, "kernel_shape", sp, 1, kern));
  RX_RETURN_IF_ERROR(ints_attr(I, n, "strides", sp, 1, st));
  RX_RETURN_IF_ERROR(ints_attr(I, n, "pads", 2 * sp, 0, pads));
  const rx_expr *od[SYM_MAX], *dd[SYM_MAX], *total = rx_sym_const(I->m, 1), *in_total = total;
  dd[0] = od[0] = xs->shape[0];
  dd[1] = od[1] = xs->shape[1];
  for (int k = 0; k < sp; k++) {
    const rx_expr *d = rx_sym_add(I->m, xs->shape[k + 2], rx_sym_const(I->m, -1));
    d = rx_sym_mul(I->m, d, rx_sym_const(I->m, st[k]));
    dd[k + 2] = od[k + 2] =
        rx_sym_add(I->m, d, rx_sym_const(I->m, kern[k] - pads[k] - pads[k + sp]));
  }
  if (input(n, 2)) {
    val *v;
    RX_RETURN_IF_ERROR(sym_input(I, n, 2, &v));
    if (v->slen != xs->ndim) return node_err(I, n, "output_shape must have %d values", xs->ndim);
    for (int k = 0; k < xs->ndim; k++) od[k] = v->s[k];
  }
  for (int k = 0; k < xs->ndim; k++) {
    total = rx_sym_mul(I->m, total, od[k]);
    in_total = rx_sym_mul(I->m, in_total, xs->shape[k]);
  }
  rx_var *r = NULL;
  rx_node *x, *idx, *z;
  RX_RETURN_IF_ERROR(arg(I, n, input(n, 0), &x));
  RX_RETURN_IF_ERROR(arg(I, n, input(n, 1), &idx));
  RX_RETURN_IF_ERROR(reshape_to(I, n, x, &in_total, 1, &x, NULL));
  RX_RETURN_IF_ERROR(reshape_to(I, n, idx, &in_total, 1, &idx, NULL));
  if (input(n, 2)) RX_RETURN_IF_ERROR(relinearize(I, n, idx, dd, od, xs->ndim, &idx));
  RX_RETURN_IF_ERROR(zeros_of(I, n, &total, 1, xs->dtype, &z));
  RX_RETURN_IF_ERROR(scatter_to(I, n, z, idx, x, 0, &z, &r));
  RX_RETURN_IF_ERROR(reshape_to(I, n, z, od, xs->ndim, &z, &r));
  def_tensor(I, n, r);
  return NULL;
}

/* ReverseSequence(x, sequence_lens [B]): take_along_axis over the time axis at t' = len - 1 - t
 * for t < len of the batch, t elsewhere */
static rx_status do_reverse_sequence(imp *I, const Onnx__NodeProto *n, const char *rop) {
  (void)rop;
  const rx_sinfo *xs;
  RX_RETURN_IF_ERROR(known_shape(I, n, 0, 2, SYM_MAX, &xs));
  int64_t ta = onnx_attr_i(n, "time_axis", 0), ba = onnx_attr_i(n, "batch_axis", 1);
  if (ta < 0 || ta > 1 || ba < 0 || ba > 1 || ta == ba)
    return node_err(I, n, "time_axis and batch_axis must be 0 and 1 or 1 and 0");
  const rx_expr *td[SYM_MAX], *bd[SYM_MAX];
  for (int k = 0; k < xs->ndim; k++) {
    td[k] = k == ta ? xs->shape[k] : rx_sym_const(I->m, 1);
    bd[k] = k == ba ? xs->shape[k] : rx_sym_const(I->m, 1);
  }
  rx_var *r = NULL;
  rx_node *t, *len, *lt, *rv, *z;
  RX_RETURN_IF_ERROR(iota(I, n, rx_sym_const(I->m, 0), xs->shape[ta], &t));
  RX_RETURN_IF_ERROR(reshape_to(I, n, t, td, xs->ndim, &t, NULL));
  RX_RETURN_IF_ERROR(arg(I, n, input(n, 1), &len));
  const rx_attr *ca = rx_attr_dtype(I->m, "dtype", RX_DTYPE_I64);
  RX_RETURN_IF_ERROR(exa(I, n, "cast", &len, 1, &ca, 1, &len, NULL));
  RX_RETURN_IF_ERROR(reshape_to(I, n, len, bd, xs->ndim, &len, NULL));
  EX2("less", t, len, lt);
  EX2("subtract", len, I64(rx_sym_const(I->m, 1)), rv);
  EX2("subtract", rv, t, rv);
  EX3("where", lt, rv, t, t);
  RX_RETURN_IF_ERROR(zeros_of(I, n, xs->shape, xs->ndim, RX_DTYPE_I64, &z));
  EX2("add", t, z, t);
  rx_node *a[2];
  RX_RETURN_IF_ERROR(arg(I, n, input(n, 0), &a[0]));
  a[1] = t;
  const rx_attr *at = rx_attr_int(I->m, "axis", ta);
  RX_RETURN_IF_ERROR(exa(I, n, "take_along_axis", a, 2, &at, 1, &t, &r));
  def_tensor(I, n, r);
  return NULL;
}

/* Einsum: the equation made explicit for relaxc's einsum: spaces dropped, each "..." replaced
 * by unused letters (the last ones of the longest ellipsis, aligned right as broadcasting
 * does), an implicit output spelled out (the ellipsis, then the letters used once, sorted). */
static rx_status einsum_equation(imp *I, const Onnx__NodeProto *n, char *out, size_t cap) {
  const Onnx__AttributeProto *a = onnx_attr(n, "equation");
  if (!a || !a->has_s || a->s.len == 0 || a->s.len >= 256)
    return node_err(I, n, "the equation attribute is required");
  char eq[256];
  size_t k = 0;
  for (size_t i = 0; i < a->s.len; i++)
    if (a->s.data[i] != ' ') eq[k++] = (char)a->s.data[i];
  eq[k] = 0;
  int count[128] = {0}, ell = 0, nop = 0, dots = 0;
  char *arrow = strstr(eq, "->");
  size_t lhs = arrow ? (size_t)(arrow - eq) : strlen(eq);
  for (size_t i = 0, term = 0; i <= lhs; i++) { /* letters and each operand's ellipsis rank */
    if (i == lhs || eq[i] == ',') {
      const rx_sinfo *si = tsinfo(input(n, (size_t)nop) ? get(I, input(n, (size_t)nop)) : NULL);
      if (!si || si->ndim < 0) return node_err(I, n, "operand %d's rank is not known", nop);
      if (dots) ell = si->ndim - (int)term > ell ? si->ndim - (int)term : ell;
      nop++, term = 0, dots = 0;
    } else if (eq[i] == '.') {
      dots = 1;
    } else if ((unsigned char)eq[i] < 128) {
      count[(unsigned char)eq[i]]++, term++;
    }
  }
  char el[SYM_MAX + 1] = {0};
  for (int c = 'A', j = 0; j < ell && c <= 'z'; c++)
    if (isalpha(c) && !count[c] && !strchr(eq, c)) el[j++] = (char)c;
  if ((int)strlen(el) < ell || ell > SYM_MAX)
    return node_err(I, n, "the ellipsis covers too many dims");
  rx_strbuf sb = {0};
  nop = 0;
  for (size_t i = 0, term = 0; i < lhs; i++) {
    if (eq[i] == ',') nop++, term = 0;
    if (eq[i] == '.' && eq[i + 1] == '.' && eq[i + 2] == '.') {
      const rx_sinfo *si = tsinfo(get(I, input(n, (size_t)nop)));
      int have = 0;
      for (size_t j = i + 3; j < lhs && eq[j] != ','; j++) have++;
      int e = si->ndim - (int)term - have;
      rx_strbuf_append(&sb, el + ell - (e > 0 ? e : 0));
      i += 2;
      continue;
    }
    term++;
    rx_strbuf_putc(&sb, eq[i]);
  }
  rx_strbuf_append(&sb, "->");
  if (arrow) {
    for (const char *p = arrow + 2; *p; p++)
      if (*p == '.' && p[1] == '.' && p[2] == '.')
        rx_strbuf_append(&sb, el), p += 2;
      else
        rx_strbuf_putc(&sb, *p);
  } else {
    rx_strbuf_append(&sb, el);
    for (int c = 'A'; c <= 'z'; c++)
      if (isalpha(c) && count[c] == 1) rx_strbuf_putc(&sb, (char)c);
  }
  snprintf(out, cap, "%s", sb.data);
  bool fit = sb.len < cap;
  rx_strbuf_free(&sb);
  return fit ? NULL : node_err(I, n, "the equation is too long");
}

static rx_status do_einsum(imp *I, const Onnx__NodeProto *n, const char *rop) {
  (void)rop;
  if (n->n_input < 1 || n->n_input > 3)
    return node_err(I, n, "1 to 3 operands are supported, got %zu", n->n_input);
  char eq[320];
  RX_RETURN_IF_ERROR(einsum_equation(I, n, eq, sizeof eq));
  rx_node *a[3];
  for (size_t k = 0; k < n->n_input; k++) RX_RETURN_IF_ERROR(arg(I, n, input(n, k), &a[k]));
  const rx_attr *at = rx_attr_str(I->m, "equation", eq);
  rx_var *r = NULL;
  RX_RETURN_IF_ERROR(emit(I, n, "einsum", a, (int)n->n_input, &at, 1, &r));
  def_tensor(I, n, r);
  return NULL;
}

/* BatchNormalization with training_mode=1: Y normalized by the batch's own mean and (biased)
 * variance over every axis but 1, and the running mean and variance outputs, each input_mean /
 * input_var * momentum + the batch's * (1 - momentum) (the ONNX reference) */
static rx_status batch_norm_training(imp *I, const Onnx__NodeProto *n) {
  const rx_sinfo *xs;
  RX_RETURN_IF_ERROR(known_shape(I, n, 0, 2, SYM_MAX, &xs));
  int64_t axes[SYM_MAX];
  int na = 0;
  for (int k = 0; k < xs->ndim; k++)
    if (k != 1) axes[na++] = k;
  double mom = onnx_attr_f(n, "momentum", 0.9);
  rx_node *a[5] = {0}, *mu, *d, *var, *t;
  rx_var *r = NULL;
  for (int k = 0; k < 5; k++) RX_RETURN_IF_ERROR(arg(I, n, input(n, (size_t)k), &a[k]));
  const rx_attr *at[2] = {rx_attr_ints(I->m, "axes", axes, na),
                          rx_attr_bool(I->m, "keepdims", true)};
  RX_RETURN_IF_ERROR(exa(I, n, "mean", &a[0], 1, at, 2, &mu, NULL));
  EX2("subtract", a[0], mu, d);
  EX2("multiply", d, d, d);
  RX_RETURN_IF_ERROR(exa(I, n, "mean", &d, 1, at, 1, &var, NULL));
  RX_RETURN_IF_ERROR(exa(I, n, "mean", &a[0], 1, at, 1, &mu, NULL));
  rx_node *y[5] = {a[0], a[1], a[2], mu, var};
  const rx_attr *ea = rx_attr_float(I->m, "epsilon", onnx_attr_f(n, "epsilon", 1e-5));
  RX_RETURN_IF_ERROR(emit(I, n, "batch_norm", y, 5, &ea, 1, &r));
  def_tensor(I, n, r);
  for (int k = 1; k < 3 && k < (int)n->n_output; k++) {
    if (!n->output[k] || !n->output[k][0]) continue;
    EX2("multiply", a[2 + k], FL(mom), t);
    EX2("multiply", k == 1 ? mu : var, FL(1 - mom), d);
    EX2("add", t, d, t);
    def_named(I, n->output[k], r);
  }
  return NULL;
}

/* GridSample (4-D): grid_sample; opset 20's "linear" and "cubic" are 16's "bilinear" and
 * "bicubic" */
static rx_status do_grid_sample(imp *I, const Onnx__NodeProto *n, const char *rop) {
  (void)rop;
  static const char *const modes[] = {"bilinear", "nearest", "bicubic", "linear", "cubic"};
  static const char *const pads[] = {"zeros", "border", "reflection"};
  static const int canon[] = {0, 1, 2, 0, 2};
  int mode = attr_choice(n, "mode", modes, 5, 0), pad = attr_choice(n, "padding_mode", pads, 3, 0);
  if (mode < 0 || pad < 0)
    return node_err(
        I, n,
        "mode must be bilinear, nearest or bicubic and padding_mode zeros, border or reflection");
  const rx_sinfo *xs;
  RX_RETURN_IF_ERROR(known_shape(I, n, 0, 4, 4, &xs));
  rx_node *a[2];
  for (int k = 0; k < 2; k++) RX_RETURN_IF_ERROR(arg(I, n, input(n, (size_t)k), &a[k]));
  const rx_attr *at[3] = {
      rx_attr_str(I->m, "mode", modes[canon[mode]]), rx_attr_str(I->m, "padding_mode", pads[pad]),
      rx_attr_bool(I->m, "align_corners", onnx_attr_i(n, "align_corners", 0) != 0)};
  rx_var *r = NULL;
  RX_RETURN_IF_ERROR(emit(I, n, "grid_sample", a, 2, at, 3, &r));
  def_tensor(I, n, r);
  return NULL;
}

/* Det: det (a constant matrix size of at most 16) */
static rx_status do_det(imp *I, const Onnx__NodeProto *n, const char *rop) {
  (void)rop;
  rx_node *x;
  rx_var *r = NULL;
  RX_RETURN_IF_ERROR(arg(I, n, input(n, 0), &x));
  RX_RETURN_IF_ERROR(emit(I, n, "det", &x, 1, NULL, 0, &r));
  def_tensor(I, n, r);
  return NULL;
}

/* IsInf (|x| beyond the largest finite f32, or x beyond it on the detected side), Round (half
 * to even: floor(x), plus 1 where the fraction is over a half, or a half and floor(x) odd) and
 * Shrink (x + bias below -lambd, x - bias above lambd, else 0): comparisons and where. */
static rx_status do_select_act(imp *I, const Onnx__NodeProto *n, const char *rop) {
  const rx_sinfo *si = tsinfo(input(n, 0) ? get(I, input(n, 0)) : NULL);
  if (!si) return node_err(I, n, "the input is not a tensor");
  rx_node *x = rx_arg_var(I->b, get(I, input(n, 0))->var), *t, *u, *z;
  rx_var *r = NULL;
  if (!strcmp(rop, "is_inf")) {
    rx_dtype dt = si->dtype; /* the largest finite value of dt */
    double big = dt == RX_DTYPE_F16    ? 65504.0
                 : dt == RX_DTYPE_BF16 ? 3.3895313892515355e38
                                       : 3.4028234663852886e38;
    bool pos = onnx_attr_i(n, "detect_positive", 1) != 0,
         neg = onnx_attr_i(n, "detect_negative", 1) != 0;
    if (pos && neg) {
      EX1("abs", x, t);
      EX2("greater", t, FL(big), t);
    } else if (pos) {
      EX2("greater", x, FL(big), t);
    } else if (neg) {
      EX2("less", x, FL(-big), t);
    } else { /* neither: false everywhere */
      EX2("not_equal", x, x, t);
      EX2("equal", x, x, u);
      EX2("logical_and", t, u, t);
    }
  } else if (!strcmp(rop, "round")) {
    EX1("floor", x, z);
    EX2("subtract", x, z, t); /* the fraction */
    EX2("multiply", z, FL(0.5), u);
    EX1("floor", u, u);
    EX2("multiply", u, FL(2.0), u);
    EX2("not_equal", u, z, u); /* floor(x) odd */
    rx_node *half;
    EX2("equal", t, FL(0.5), half);
    EX2("logical_and", half, u, u);
    EX2("greater", t, FL(0.5), t);
    EX2("logical_or", t, u, u);
    EX2("add", z, FL(1.0), t);
    EX3("where", u, t, z, t);
  } else if (!strcmp(rop, "shrink")) {
    double lambd = onnx_attr_f(n, "lambd", 0.5), bias = onnx_attr_f(n, "bias", 0.0);
    EX2("multiply", x, FL(0.0), z);
    EX2("subtract", x, FL(bias), t);
    EX2("greater", x, FL(lambd), u);
    EX3("where", u, t, z, z);
    EX2("add", x, FL(bias), t);
    EX2("less", x, FL(-lambd), u);
    EX3("where", u, t, z, t);
  } else {
    return node_err(I, n, "internal: no activation '%s'", rop);
  }
  def_tensor(I, n, r);
  return NULL;
}

static rx_status do_leaky_relu(imp *I, const Onnx__NodeProto *n, const char *rop) {
  rx_node *a[5] = {0};
  rx_var *r = NULL;
  /* where(x >= 0, x, alpha * x) */
  rx_var *ge, *ax;
  RX_RETURN_IF_ERROR(arg(I, n, input(n, 0), &a[0]));
  a[1] = rx_arg_float(I->b, 0.0);
  RX_RETURN_IF_ERROR(emit(I, n, "greater_equal", a, 2, NULL, 0, &ge));
  a[1] = rx_arg_float(I->b, onnx_attr_f(n, "alpha", 0.01));
  RX_RETURN_IF_ERROR(emit(I, n, "multiply", a, 2, NULL, 0, &ax));
  rx_node *w[3] = {rx_arg_var(I->b, ge), a[0], rx_arg_var(I->b, ax)};
  RX_RETURN_IF_ERROR(emit(I, n, "where", w, 3, NULL, 0, &r));
  def_tensor(I, n, r);
  return NULL;
}

/* Flatten: reshape to 2-D at axis */
static rx_status do_flatten(imp *I, const Onnx__NodeProto *n, const char *rop) {
  rx_node *a[5] = {0};
  rx_var *r = NULL;
  val *x = input(n, 0) ? get(I, input(n, 0)) : NULL;
  const rx_sinfo *si = tsinfo(x);
  if (!si || si->kind != RX_SINFO_TENSOR || !si->shape)
    return node_err(I, n, "the input's shape is not known (rank and dims needed)");
  int64_t axis = onnx_attr_i(n, "axis", 1);
  if (axis < 0) axis += si->ndim;
  if (axis < 0 || axis > si->ndim)
    return node_err(I, n, "axis %lld out of range for rank %d",
                    (long long)onnx_attr_i(n, "axis", 1), si->ndim);
  const rx_expr *dims[2] = {rx_sym_const(I->m, 1), rx_sym_const(I->m, 1)};
  for (int k = 0; k < si->ndim; k++)
    dims[k >= axis] = rx_sym_mul(I->m, dims[k >= axis], si->shape[k]);
  a[0] = rx_arg_var(I->b, x->var);
  a[1] = rx_arg_shape(I->b, dims, 2);
  RX_RETURN_IF_ERROR(emit(I, n, "reshape", a, 2, NULL, 0, &r));
  def_tensor(I, n, r);
  return NULL;
}

/* GlobalAveragePool and GlobalMaxPool: a mean or max over H and W */
static rx_status do_global_pool(imp *I, const Onnx__NodeProto *n, const char *rop) {
  const char *op = n->op_type;
  rx_node *a[5] = {0};
  const rx_attr *at[4];
  rx_var *r = NULL;
  int rank = rank_of(input(n, 0) ? get(I, input(n, 0)) : NULL);
  if (rank < 3) return node_err(I, n, "expects an input of known rank >= 3");
  int64_t axes[SYM_MAX];
  int na = 0;
  for (int k = 2; k < rank && na < SYM_MAX; k++) axes[na++] = k;
  RX_RETURN_IF_ERROR(arg(I, n, input(n, 0), &a[0]));
  at[0] = rx_attr_ints(I->m, "axes", axes, na);
  at[1] = rx_attr_bool(I->m, "keepdims", true);
  RX_RETURN_IF_ERROR(emit(I, n, op[6] == 'A' ? "mean" : "max", a, 1, at, 2, &r));
  def_tensor(I, n, r);
  return NULL;
}

/* BatchNormalization (inference: the Y output) */
static rx_status do_batch_norm(imp *I, const Onnx__NodeProto *n, const char *rop) {
  rx_node *a[5] = {0};
  const rx_attr *at[4];
  rx_var *r = NULL;
  if (onnx_attr_i(n, "training_mode", 0)) return batch_norm_training(I, n);
  for (size_t k = 1; k < n->n_output; k++)
    if (n->output[k] && n->output[k][0])
      return node_err(I, n, "the running mean / variance outputs are not supported");
  for (int k = 0; k < 5; k++) RX_RETURN_IF_ERROR(arg(I, n, input(n, (size_t)k), &a[k]));
  at[0] = rx_attr_float(I->m, "epsilon", onnx_attr_f(n, "epsilon", 1e-5));
  RX_RETURN_IF_ERROR(emit(I, n, "batch_norm", a, 5, at, 1, &r));
  def_tensor(I, n, r);
  return NULL;
}

/* ---- detection and text features (ops/signal.c) ---- */

/* NonMaxSuppression(boxes, scores, [max_output_boxes_per_class, iou_threshold,
 * score_threshold]): non_max_suppression gives every possible row and the count kept (absent
 * inputs: max 0, iou 0, no score threshold); the count, read back by tensor_to_shape, is a fresh
 * dim k and the result the first k rows. */
/* NonMaxSuppression's max_output_boxes_per_class past this is "no limit" (more boxes than a
 * tensor of i32-indexed rows holds) */
#define NMS_MAX_OUT INT32_MAX

static rx_status do_nms(imp *I, const Onnx__NodeProto *n, const char *rop) {
  rx_node *a[5];
  int na = 4;
  for (int k = 0; k < 5; k++) {
    val *mo = k == 2 && input(n, 2) ? get(I, input(n, 2)) : NULL;
    if (mo && mo->kind == V_SYM && mo->slen == 1 && mo->s[0]->kind == RX_EXPR_CONST &&
        mo->s[0]->value > NMS_MAX_OUT) {
      /* torchvision exports max_output_boxes_per_class = INT64_MAX ("no limit"): a class keeps
       * at most its N boxes, so any bound past N is the same, and the op counts rows in i32 */
      a[2] = rx_arg_int(I->b, NMS_MAX_OUT);
    } else if (input(n, (size_t)k)) {
      RX_RETURN_IF_ERROR(arg(I, n, input(n, (size_t)k), &a[k]));
      if (k == 4) na = 5;
    } else if (k < 2) {
      return node_err(I, n, "input %d (%s) is required", k, k ? "scores" : "boxes");
    } else if (k < 4) {
      a[k] = k == 2 ? rx_arg_int(I->b, 0) : rx_arg_float(I->b, 0.0);
    }
  }
  const rx_attr *at = rx_attr_int(I->m, "center_point_box", onnx_attr_i(n, "center_point_box", 0));
  rx_var *tup, *sel;
  val cnt = {.name = NULL, .kind = V_TENSOR};
  RX_RETURN_IF_ERROR(emit(I, n, rop, a, na, &at, 1, &tup));
  RX_RETURN_IF_ERROR(at_node(I, n, rx_emit_get_item(I->b, rx_arg_var(I->b, tup), 0, NULL, &sel)));
  RX_RETURN_IF_ERROR(
      at_node(I, n, rx_emit_get_item(I->b, rx_arg_var(I->b, tup), 1, NULL, &cnt.var)));
  RX_RETURN_IF_ERROR(runtime_sym(I, n, &cnt));
  int64_t axis = 0;
  const rx_expr *zero = rx_sym_const(I->m, 0);
  const rx_attr *sa[3] = {rx_attr_ints(I->m, "axes", &axis, 1),
                          rx_attr_exprs(I->m, "begin", &zero, 1),
                          rx_attr_exprs(I->m, "end", &cnt.s[0], 1)};
  rx_node *x = rx_arg_var(I->b, sel);
  rx_var *r;
  RX_RETURN_IF_ERROR(emit(I, n, "strided_slice", &x, 1, sa, 3, &r));
  def_tensor(I, n, r);
  return NULL;
}

/* dft(x, axis, inverse, onesided, length=[L]) of x's value (a tensor node), defining y. */
static rx_status emit_dft(imp *I, const Onnx__NodeProto *n, rx_node *x, int64_t axis, bool inv,
                          bool onesided, const rx_expr *len, rx_var **out) {
  if (inv && onesided)
    return node_err(I, n, "inverse with onesided (a real inverse transform) is not supported");
  const rx_attr *at[4] = {rx_attr_int(I->m, "axis", axis), rx_attr_bool(I->m, "inverse", inv),
                          rx_attr_bool(I->m, "onesided", onesided),
                          len ? rx_attr_exprs(I->m, "length", &len, 1) : NULL};
  return emit(I, n, "dft", &x, 1, at, len ? 4 : 3, out);
}

/* DFT(x, [dft_length], [axis]): the axis an attribute (default 1) before opset 20, an input
 * (default -2) from it; dft_length a constant or bound at run time. */
static rx_status do_dft(imp *I, const Onnx__NodeProto *n, const char *rop) {
  (void)rop;
  rx_node *x;
  RX_RETURN_IF_ERROR(arg(I, n, input(n, 0), &x));
  const rx_expr *len = NULL, *ax = NULL;
  if (input(n, 1)) RX_RETURN_IF_ERROR(scalar_input(I, n, 1, &len));
  int64_t axis = onnx_attr_i(n, "axis", 1);
  if (I->opset >= 20) {
    axis = -2;
    if (input(n, 2)) {
      RX_RETURN_IF_ERROR(scalar_input(I, n, 2, &ax));
      if (ax->kind != RX_EXPR_CONST) return node_err(I, n, "input 2 (axis) must be a constant");
      axis = ax->value;
    }
  }
  rx_var *r;
  RX_RETURN_IF_ERROR(emit_dft(I, n, x, axis, onnx_attr_i(n, "inverse", 0) != 0,
                              onnx_attr_i(n, "onesided", 0) != 0, len, &r));
  def_tensor(I, n, r);
  return NULL;
}

/* STFT(signal [B, T, c], frame_step, [window [W]], [frame_length]): the frames signal[:, f step
 * + w] (f < (T - W) // step + 1) gathered by one take, times the window, and a dft of length W
 * along the frame axis: [B, F, K, 2]. */
static rx_status do_stft(imp *I, const Onnx__NodeProto *n, const char *rop) {
  (void)rop;
  const rx_sinfo *si = shaped(I, n, 0), *wi = input(n, 2) ? shaped(I, n, 2) : NULL;
  if (!si || si->ndim != 3) return node_err(I, n, "expects a signal [B, T, 1 or 2] of known shape");
  if (input(n, 2) && (!wi || wi->ndim != 1))
    return node_err(I, n, "the window must be 1-D of known length");
  const rx_expr *step, *W = wi ? wi->shape[0] : NULL;
  RX_RETURN_IF_ERROR(scalar_input(I, n, 1, &step));
  if (!W && input(n, 3)) RX_RETURN_IF_ERROR(scalar_input(I, n, 3, &W));
  if (!W) return node_err(I, n, "needs a window or a frame_length");
  if ((step->kind == RX_EXPR_CONST && step->value < 1) ||
      (W->kind == RX_EXPR_CONST && W->value < 1))
    return node_err(I, n, "frame_step and the frame length must be positive");
  const rx_expr *F = rx_sym_add(
      I->m, rx_sym_floordiv(I->m, rx_sym_sub(I->m, si->shape[1], W), step), rx_sym_const(I->m, 1));
  rx_node *fi, *wv, *x, *a[2];
  rx_var *r;
  RX_RETURN_IF_ERROR(iota(I, n, rx_sym_const(I->m, 0), F, &fi));
  a[0] = fi;
  a[1] = rx_arg_prim(I->b, RX_DTYPE_I64, step);
  RX_RETURN_IF_ERROR(emit(I, n, "multiply", a, 2, NULL, 0, &r));
  RX_RETURN_IF_ERROR(trailing_units(I, n, rx_arg_var(I->b, r), 1, &fi));
  RX_RETURN_IF_ERROR(iota(I, n, rx_sym_const(I->m, 0), W, &wv));
  a[0] = fi;
  a[1] = wv;
  RX_RETURN_IF_ERROR(emit(I, n, "add", a, 2, NULL, 0, &r));
  RX_RETURN_IF_ERROR(arg(I, n, input(n, 0), &x));
  RX_RETURN_IF_ERROR(take_at(I, n, x, rx_arg_var(I->b, r), 1, &x, &r));
  if (wi) {
    RX_RETURN_IF_ERROR(arg(I, n, input(n, 2), &a[1]));
    RX_RETURN_IF_ERROR(trailing_units(I, n, a[1], 1, &a[1]));
    a[0] = x;
    RX_RETURN_IF_ERROR(emit(I, n, "multiply", a, 2, NULL, 0, &r));
    x = rx_arg_var(I->b, r);
  }
  RX_RETURN_IF_ERROR(emit_dft(I, n, x, 2, false, onnx_attr_i(n, "onesided", 1) != 0, W, &r));
  def_tensor(I, n, r);
  return NULL;
}

/* A string attribute's value in buf (at most size - 1 bytes; dflt when absent); false when it
 * does not fit. */
static bool str_attr(const Onnx__NodeProto *n, const char *name, const char *dflt, char *buf,
                     size_t size) {
  const Onnx__AttributeProto *a = onnx_attr(n, name);
  if (!a || !a->has_s) {
    snprintf(buf, size, "%s", dflt);
    return true;
  }
  if (a->s.len >= size) return false;
  memcpy(buf, a->s.data, a->s.len);
  buf[a->s.len] = 0;
  return true;
}

/* RoiAlign(X, rois, batch_indices): roi_align; coordinate_transformation_mode (opset 16, default
 * half_pixel; before it the regions are not shifted, output_half_pixel). */
static rx_status do_roi_align(imp *I, const Onnx__NodeProto *n, const char *rop) {
  char mode[8], ctm[24];
  if (!str_attr(n, "mode", "avg", mode, sizeof mode) ||
      (strcmp(mode, "avg") && strcmp(mode, "max")))
    return node_err(I, n, "mode must be avg or max");
  if (!str_attr(n, "coordinate_transformation_mode",
                I->opset >= 16 ? "half_pixel" : "output_half_pixel", ctm, sizeof ctm) ||
      (strcmp(ctm, "half_pixel") && strcmp(ctm, "output_half_pixel")))
    return node_err(I, n, "coordinate_transformation_mode must be half_pixel or output_half_pixel");
  rx_node *a[3];
  for (int k = 0; k < 3; k++) RX_RETURN_IF_ERROR(arg(I, n, input(n, (size_t)k), &a[k]));
  const rx_attr *at[6] = {
      rx_attr_int(I->m, "output_height", onnx_attr_i(n, "output_height", 1)),
      rx_attr_int(I->m, "output_width", onnx_attr_i(n, "output_width", 1)),
      rx_attr_int(I->m, "sampling_ratio", onnx_attr_i(n, "sampling_ratio", 0)),
      rx_attr_float(I->m, "spatial_scale", onnx_attr_f(n, "spatial_scale", 1.0)),
      rx_attr_str(I->m, "mode", mode),
      rx_attr_bool(I->m, "half_pixel", !strcmp(ctm, "half_pixel"))};
  rx_var *r;
  RX_RETURN_IF_ERROR(emit(I, n, rop, a, 3, at, 6, &r));
  def_tensor(I, n, r);
  return NULL;
}

/* op(a, b) (b NULL: op(a)) as a new node. */
static rx_status op2(imp *I, const Onnx__NodeProto *n, const char *op, rx_node *a, rx_node *b,
                     rx_node **out) {
  rx_node *args[2] = {a, b};
  rx_var *r;
  RX_RETURN_IF_ERROR(emit(I, n, op, args, b ? 2 : 1, NULL, 0, &r));
  *out = rx_arg_var(I->b, r);
  return NULL;
}

/* Input i (or node x when given) cast to f32; a 0-d input as [1] (the programs of 0-d
 * elementwise ops have no loop to place in a kernel). */
static rx_status as_f32(imp *I, const Onnx__NodeProto *n, size_t i, rx_node *x, rx_node **out) {
  rx_var *r;
  if (!x) {
    RX_RETURN_IF_ERROR(arg(I, n, input(n, i), &x));
    if (x->sinfo && (x->sinfo->kind == RX_SINFO_PRIM ||
                     (x->sinfo->kind == RX_SINFO_TENSOR && x->sinfo->ndim == 0))) {
      int64_t ax = 0;
      const rx_attr *ea = rx_attr_ints(I->m, "axes", &ax, 1);
      RX_RETURN_IF_ERROR(emit(I, n, "expand_dims", &x, 1, &ea, 1, &r));
      x = rx_arg_var(I->b, r);
    }
  }
  const rx_attr *at = rx_attr_dtype(I->m, "dtype", RX_DTYPE_F32);
  RX_RETURN_IF_ERROR(emit(I, n, "cast", &x, 1, &at, 1, &r));
  *out = rx_arg_var(I->b, r);
  return NULL;
}

/* The mel-scale edges of MelWeightMatrix as spectrogram bins: floor((dft_length + 1) *
 * 700 (10^((t step + low) / 2595) - 1) / sample_rate) at t = bins + off (f32 [M]). */
static rx_status mel_edges(imp *I, const Onnx__NodeProto *n, rx_node *bins, double off,
                           rx_node *step, rx_node *low, rx_node *len1, rx_node *rate,
                           rx_node **out) {
  const double ln10 = 2.302585092994046;
  rx_node *t;
  RX_RETURN_IF_ERROR(op2(I, n, "add", bins, rx_arg_float(I->b, off), &t));
  RX_RETURN_IF_ERROR(op2(I, n, "multiply", t, step, &t));
  RX_RETURN_IF_ERROR(op2(I, n, "add", t, low, &t));
  RX_RETURN_IF_ERROR(op2(I, n, "multiply", t, rx_arg_float(I->b, ln10 / 2595.0), &t));
  RX_RETURN_IF_ERROR(op2(I, n, "exp", t, NULL, &t));
  RX_RETURN_IF_ERROR(op2(I, n, "subtract", t, rx_arg_float(I->b, 1.0), &t));
  RX_RETURN_IF_ERROR(op2(I, n, "multiply", t, rx_arg_float(I->b, 700.0), &t));
  RX_RETURN_IF_ERROR(op2(I, n, "multiply", t, len1, &t));
  RX_RETURN_IF_ERROR(op2(I, n, "divide", t, rate, &t));
  return op2(I, n, "floor", t, NULL, out);
}

/* MelWeightMatrix(num_mel_bins M, dft_length L, sample_rate, lower_edge_hertz,
 * upper_edge_hertz) as ONNX's reference: [L / 2 + 1, M] (M and L constants or bound at run
 * time), column i rising from its lower edge to 1 at its center and falling to its upper edge
 * (f32 math; output_datatype casts the result). */
static rx_status do_mel_weight_matrix(imp *I, const Onnx__NodeProto *n, const char *rop) {
  (void)rop;
  const rx_expr *M, *L;
  RX_RETURN_IF_ERROR(scalar_input(I, n, 0, &M));
  RX_RETURN_IF_ERROR(scalar_input(I, n, 1, &L));
  rx_dtype odt = RX_DTYPE_F32;
  if (onnx_attr(n, "output_datatype") &&
      !onnx_dtype_of((int32_t)onnx_attr_i(n, "output_datatype", 1), &odt))
    return node_err(I, n, "unsupported output_datatype");
  const double ln10 = 2.302585092994046;
  rx_node *mf, *len1, *rate, *edge[2], *bins, *j, *e[3], *t, *u, *w;
  RX_RETURN_IF_ERROR(as_f32(I, n, 0, NULL, &mf));
  RX_RETURN_IF_ERROR(as_f32(I, n, 1, NULL, &len1));
  RX_RETURN_IF_ERROR(op2(I, n, "add", len1, rx_arg_float(I->b, 1.0), &len1));
  RX_RETURN_IF_ERROR(as_f32(I, n, 2, NULL, &rate));
  for (int k = 0; k < 2; k++) { /* 2595 log10(1 + hz / 700) */
    RX_RETURN_IF_ERROR(as_f32(I, n, (size_t)(3 + k), NULL, &t));
    RX_RETURN_IF_ERROR(op2(I, n, "divide", t, rx_arg_float(I->b, 700.0), &t));
    RX_RETURN_IF_ERROR(op2(I, n, "add", t, rx_arg_float(I->b, 1.0), &t));
    RX_RETURN_IF_ERROR(op2(I, n, "log", t, NULL, &t));
    RX_RETURN_IF_ERROR(op2(I, n, "multiply", t, rx_arg_float(I->b, 2595.0 / ln10), &edge[k]));
  }
  RX_RETURN_IF_ERROR(op2(I, n, "subtract", edge[1], edge[0], &t));
  RX_RETURN_IF_ERROR(op2(I, n, "add", mf, rx_arg_float(I->b, 2.0), &u));
  RX_RETURN_IF_ERROR(op2(I, n, "divide", t, u, &t)); /* the step: over M + 2 points */
  rx_var *r;
  RX_RETURN_IF_ERROR(iota(I, n, rx_sym_const(I->m, 0), M, &bins));
  RX_RETURN_IF_ERROR(as_f32(I, n, 0, bins, &bins));
  for (int k = 0; k < 3; k++)
    RX_RETURN_IF_ERROR(mel_edges(I, n, bins, k, t, edge[0], len1, rate, &e[k]));
  const rx_expr *S =
      rx_sym_add(I->m, rx_sym_floordiv(I->m, L, rx_sym_const(I->m, 2)), rx_sym_const(I->m, 1));
  RX_RETURN_IF_ERROR(iota(I, n, rx_sym_const(I->m, 0), S, &j));
  RX_RETURN_IF_ERROR(as_f32(I, n, 0, j, &j));
  RX_RETURN_IF_ERROR(trailing_units(I, n, j, 1, &j));
  /* rising: (j - lo) / (c - lo) on [lo, c], or 1 at c where lo == c */
  rx_node *lc, *a, *b, *in;
  RX_RETURN_IF_ERROR(op2(I, n, "subtract", e[1], e[0], &lc));
  RX_RETURN_IF_ERROR(op2(I, n, "subtract", j, e[0], &a));
  RX_RETURN_IF_ERROR(op2(I, n, "divide", a, lc, &a));
  RX_RETURN_IF_ERROR(op2(I, n, "greater_equal", j, e[0], &in));
  RX_RETURN_IF_ERROR(op2(I, n, "less_equal", j, e[1], &b));
  RX_RETURN_IF_ERROR(op2(I, n, "logical_and", in, b, &in));
  rx_node *args[3] = {in, a, rx_arg_float(I->b, 0.0)};
  RX_RETURN_IF_ERROR(emit(I, n, "where", args, 3, NULL, 0, &r));
  w = rx_arg_var(I->b, r);
  RX_RETURN_IF_ERROR(op2(I, n, "equal", j, e[1], &b));
  RX_RETURN_IF_ERROR(as_f32(I, n, 0, b, &b));
  RX_RETURN_IF_ERROR(op2(I, n, "equal", lc, rx_arg_float(I->b, 0.0), &in));
  args[0] = in, args[1] = b, args[2] = w;
  RX_RETURN_IF_ERROR(emit(I, n, "where", args, 3, NULL, 0, &r));
  w = rx_arg_var(I->b, r);
  /* falling: (hi - j) / (hi - c) on [c, hi) */
  rx_node *ch;
  RX_RETURN_IF_ERROR(op2(I, n, "subtract", e[2], e[1], &ch));
  RX_RETURN_IF_ERROR(op2(I, n, "subtract", e[2], j, &a));
  RX_RETURN_IF_ERROR(op2(I, n, "divide", a, ch, &a));
  RX_RETURN_IF_ERROR(op2(I, n, "greater_equal", j, e[1], &in));
  RX_RETURN_IF_ERROR(op2(I, n, "less", j, e[2], &b));
  RX_RETURN_IF_ERROR(op2(I, n, "logical_and", in, b, &in));
  args[0] = in, args[1] = a, args[2] = w;
  RX_RETURN_IF_ERROR(emit(I, n, "where", args, 3, NULL, 0, &r));
  w = rx_arg_var(I->b, r);
  if (odt != RX_DTYPE_F32) {
    const rx_attr *at = rx_attr_dtype(I->m, "dtype", odt);
    RX_RETURN_IF_ERROR(emit(I, n, "cast", &w, 1, &at, 1, &r));
  }
  def_tensor(I, n, r);
  return NULL;
}

/* The f32 vector of v[0..count) as a tensor: full([1], v_k) per value joined by concat. */
static rx_status float_vector(imp *I, const Onnx__NodeProto *n, const float *v, int count,
                              rx_node **out) {
  const rx_expr *one = rx_sym_const(I->m, 1);
  const rx_attr *dt = rx_attr_dtype(I->m, "dtype", RX_DTYPE_F32);
  rx_node **parts = rx_calloc((size_t)count, sizeof *parts);
  rx_status s = NULL;
  rx_var *r = NULL;
  for (int k = 0; k < count && !s; k++) {
    rx_node *a[2] = {rx_arg_shape(I->b, &one, 1), rx_arg_float(I->b, v[k])};
    s = emit(I, n, "full", a, 2, &dt, 1, &r);
    if (!s) parts[k] = rx_arg_var(I->b, r);
  }
  if (!s && count > 1) {
    rx_var *tup;
    s = at_node(I, n, rx_emit_tuple(I->b, parts, count, NULL, &tup));
    rx_node *a = s ? NULL : rx_arg_var(I->b, tup);
    const rx_attr *ax = rx_attr_int(I->m, "axis", 0);
    if (!s) s = emit(I, n, "concat", &a, 1, &ax, 1, &r);
  }
  free(parts);
  if (!s) *out = rx_arg_var(I->b, r);
  return s;
}

/* TfIdfVectorizer over integer n-grams: tfidf gives the counts (TF); IDF is weights (or 1)
 * where a count is positive, TFIDF the counts times the weights. */
static rx_status do_tfidf(imp *I, const Onnx__NodeProto *n, const char *rop) {
  const Onnx__AttributeProto *pool = onnx_attr(n, "pool_int64s"),
                             *counts = onnx_attr(n, "ngram_counts"),
                             *idx = onnx_attr(n, "ngram_indexes"), *mode = onnx_attr(n, "mode"),
                             *w = onnx_attr(n, "weights");
  if (!pool || !pool->n_ints)
    return node_err(I, n,
                    "needs pool_int64s (string pools are not supported: relaxc has no "
                    "string tensors)");
  if (!counts || !idx || !mode || !mode->has_s)
    return node_err(I, n, "needs the ngram_counts, ngram_indexes and mode attributes");
  char md[8] = {0};
  if (mode->s.len >= sizeof md) return node_err(I, n, "unknown mode");
  memcpy(md, mode->s.data, mode->s.len);
  if (strcmp(md, "TF") && strcmp(md, "IDF") && strcmp(md, "TFIDF"))
    return node_err(I, n, "unknown mode '%s' (TF, IDF or TFIDF)", md);
  if (pool->n_ints > INT32_MAX || counts->n_ints > INT32_MAX || idx->n_ints > INT32_MAX)
    return node_err(I, n, "the pool is too large");
  rx_node *x;
  RX_RETURN_IF_ERROR(arg(I, n, input(n, 0), &x));
  const rx_attr *at[6] = {rx_attr_ints(I->m, "pool", pool->ints, (int)pool->n_ints),
                          rx_attr_ints(I->m, "counts", counts->ints, (int)counts->n_ints),
                          rx_attr_ints(I->m, "indexes", idx->ints, (int)idx->n_ints),
                          rx_attr_int(I->m, "min_gram", onnx_attr_i(n, "min_gram_length", 1)),
                          rx_attr_int(I->m, "max_gram", onnx_attr_i(n, "max_gram_length", 1)),
                          rx_attr_int(I->m, "max_skip", onnx_attr_i(n, "max_skip_count", 0))};
  rx_var *r;
  RX_RETURN_IF_ERROR(emit(I, n, rop, &x, 1, at, 6, &r));
  bool weighted = w && w->n_floats > 0;
  if (!strcmp(md, "TF") || (!strcmp(md, "TFIDF") && !weighted)) {
    def_tensor(I, n, r);
    return NULL;
  }
  const rx_sinfo *si = rx_var_sinfo(r);
  if (weighted && (si->ndim < 1 || !si->shape || si->shape[si->ndim - 1]->kind != RX_EXPR_CONST ||
                   si->shape[si->ndim - 1]->value != (int64_t)w->n_floats))
    return node_err(I, n, "weights must have one value per output index");
  rx_node *a[3] = {rx_arg_var(I->b, r), rx_arg_float(I->b, 0.0), NULL}, *wv = NULL;
  if (weighted) RX_RETURN_IF_ERROR(float_vector(I, n, w->floats, (int)w->n_floats, &wv));
  if (!strcmp(md, "TFIDF")) {
    a[1] = wv;
    RX_RETURN_IF_ERROR(emit(I, n, "multiply", a, 2, NULL, 0, &r));
  } else {
    rx_var *pos;
    RX_RETURN_IF_ERROR(emit(I, n, "greater", a, 2, NULL, 0, &pos));
    a[0] = rx_arg_var(I->b, pos);
    const rx_attr *ca = rx_attr_dtype(I->m, "dtype", RX_DTYPE_F32);
    if (weighted) {
      a[1] = wv;
      a[2] = rx_arg_float(I->b, 0.0);
      RX_RETURN_IF_ERROR(emit(I, n, "where", a, 3, NULL, 0, &r));
    } else {
      RX_RETURN_IF_ERROR(emit(I, n, "cast", a, 1, &ca, 1, &r));
    }
  }
  def_tensor(I, n, r);
  return NULL;
}

/* ---- operator inputs given at run time: axes, starts, ends, steps, Range's bounds ----
 * ONNX passes these as tensors. A constant or a shape value takes the compile-time paths above
 * (no run-time cost); a tensor computed when the program runs (a graph input) gets the result's
 * dims computed by small i64 kernels over the input's dims, bound to fresh dims by
 * tensor_to_shape and a match_cast (runtime_sym), and the data moved by a reshape (a view) or
 * one gather at run-time indices (gather_grid). Axes are normalized (a negative one counts from
 * the end) but an axis out of range or repeated is not detected at run time: it selects no
 * axis, and the VM's checks of the element count and the bound dims report what follows. */

/* EX1..EX3, FL and I64: the macros of the sections above, still defined here */

/* Is input i a tensor computed when the program runs? */
static bool rt_tensor_input(imp *I, const Onnx__NodeProto *n, size_t i) {
  val *v = input(n, i) ? get(I, input(n, i)) : NULL;
  return v && v->kind == V_TENSOR;
}

/* The number of values of integer input i (a scalar: 1), -1 when absent or not known. */
static int rt_len(imp *I, const Onnx__NodeProto *n, size_t i) {
  val *v = input(n, i) ? get(I, input(n, i)) : NULL;
  if (v && v->kind == V_SYM) return v->slen;
  return v ? runtime_len(v) : -1;
}

/* cast(x, dt) */
static rx_status rt_cast(imp *I, const Onnx__NodeProto *n, rx_node *x, rx_dtype dt, rx_node **out) {
  const rx_attr *at = rx_attr_dtype(I->m, "dtype", dt);
  return exa(I, n, "cast", &x, 1, &at, 1, out, NULL);
}

/* op(x, axes=[axis], keepdims) */
static rx_status rt_reduce(imp *I, const Onnx__NodeProto *n, const char *op, rx_node *x,
                           int64_t axis, bool keepdims, rx_node **out) {
  const rx_attr *at[2] = {rx_attr_ints(I->m, "axes", &axis, 1),
                          rx_attr_bool(I->m, "keepdims", keepdims)};
  return exa(I, n, op, &x, 1, at, 2, out, NULL);
}

/* The sum of x (bool or integer) along axis as i64: counts of true elements, indices. */
static rx_status rt_count(imp *I, const Onnx__NodeProto *n, rx_node *x, int64_t axis, bool keepdims,
                          rx_node **out) {
  RX_RETURN_IF_ERROR(rt_cast(I, n, x, RX_DTYPE_I64, &x));
  return rt_reduce(I, n, "sum", x, axis, keepdims, out);
}

/* Integer input i (a scalar or 1-D; a graph input or a shape value) as an i64 tensor. */
static rx_status rt_i64(imp *I, const Onnx__NodeProto *n, size_t i, rx_node **out) {
  val *v = input(n, i) ? get(I, input(n, i)) : NULL;
  rx_var *t = NULL;
  if (v && v->kind == V_SYM)
    RX_RETURN_IF_ERROR(sym_tensor(I, n, v, &t));
  else if (v && v->kind == V_TENSOR)
    t = v->var;
  const rx_sinfo *si = t ? rx_var_sinfo(t) : NULL;
  if (!si || si->kind != RX_SINFO_TENSOR || !rx_dtype_is_int(si->dtype) || si->ndim > 1 ||
      si->ndim < 0)
    return node_err(I, n, "input %zu must be an integer scalar or 1-D tensor", i);
  *out = rx_arg_var(I->b, t);
  return si->dtype == RX_DTYPE_I64 ? NULL : rt_cast(I, n, *out, RX_DTYPE_I64, out);
}

/* Axes ax (i64) normalized for a rank: where(ax < 0, ax + rank, ax). */
static rx_status rt_norm_axes(imp *I, const Onnx__NodeProto *n, rx_node *ax, int rank,
                              rx_node **out) {
  rx_var *r;
  rx_node *neg, *up;
  EX2("less", ax, rx_arg_int(I->b, 0), neg);
  EX2("add", ax, rx_arg_int(I->b, rank), up);
  EX3("where", neg, up, ax, *out);
  return NULL;
}

/* The bool [rank, k] matrix of (p == ax[j]) for each position p < rank and axis ax[j]. */
static rx_status rt_axis_matrix(imp *I, const Onnx__NodeProto *n, rx_node *ax, int rank,
                                rx_node **out) {
  rx_var *r;
  rx_node *p;
  RX_RETURN_IF_ERROR(iota(I, n, rx_sym_const(I->m, 0), rx_sym_const(I->m, rank), &p));
  RX_RETURN_IF_ERROR(trailing_units(I, n, p, 1, &p));
  EX2("equal", p, ax, *out);
  return NULL;
}

/* The sum along axis 1 of where(m, v, 0) (v NULL: 1), i64 [rank]: how many of the axes are p,
 * or the value given for axis p. A where, not a product: a multiply and a sum of i64 would be
 * scheduled as a GEMV with subgroup operations on i64, which Vulkan devices may lack
 * (shaderSubgroupExtendedTypes). */
static rx_status rt_axis_sum(imp *I, const Onnx__NodeProto *n, rx_node *m, rx_node *v,
                             rx_node **out) {
  rx_var *r;
  rx_node *t;
  if (!v) return rt_count(I, n, m, 1, false, out);
  EX3("where", m, v, rx_arg_int(I->b, 0), t);
  return rt_reduce(I, n, "sum", t, 1, false, out);
}

/* The dims of a tensor of known shape as an i64 tensor [rank]. */
static rx_status rt_dims_tensor(imp *I, const Onnx__NodeProto *n, const rx_sinfo *si,
                                rx_node **out) {
  val xs = {.kind = V_SYM, .sndim = 1, .slen = si->ndim};
  for (int k = 0; k < si->ndim; k++) xs.s[k] = si->shape[k];
  rx_var *t;
  RX_RETURN_IF_ERROR(sym_tensor(I, n, &xs, &t));
  *out = rx_arg_var(I->b, t);
  return NULL;
}

/* The dims dims [rank] (i64) without those where drop [rank] (i64) is not 0, as an i64 tensor
 * [kept]: kept position q takes the dim whose exclusive count of kept dims before it is q. */
static rx_status rt_kept_dims(imp *I, const Onnx__NodeProto *n, rx_node *dims, rx_node *drop,
                              int kept, rx_node **out) {
  rx_var *r;
  rx_node *keep, *pos, *q, *sel;
  EX2("equal", drop, rx_arg_int(I->b, 0), keep);
  RX_RETURN_IF_ERROR(rt_cast(I, n, keep, RX_DTYPE_I64, &pos));
  const rx_attr *at[2] = {rx_attr_int(I->m, "axis", 0), rx_attr_bool(I->m, "exclusive", true)};
  RX_RETURN_IF_ERROR(exa(I, n, "cumsum", &pos, 1, at, 2, &pos, NULL));
  RX_RETURN_IF_ERROR(iota(I, n, rx_sym_const(I->m, 0), rx_sym_const(I->m, kept), &q));
  RX_RETURN_IF_ERROR(trailing_units(I, n, q, 1, &q));
  EX2("equal", pos, q, sel);
  EX2("logical_and", sel, keep, sel);
  EX3("where", sel, dims, rx_arg_int(I->b, 0), sel);
  return rt_reduce(I, n, "sum", sel, 1, false, out);
}

/* The i64 tensor shp ([len], or a scalar) computed at run time as fresh dims (runtime_sym). */
static rx_status rt_bind(imp *I, const Onnx__NodeProto *n, rx_node *shp, const rx_expr **dims) {
  val tmp = {.kind = V_TENSOR, .var = shp->var};
  RX_RETURN_IF_ERROR(runtime_sym(I, n, &tmp));
  for (int k = 0; k < tmp.slen; k++) dims[k] = tmp.s[k];
  return NULL;
}

/* x reshaped (a view) to the shape held by the i64 tensor shp [len] computed at run time; the
 * result's dims are fresh, bound when the program runs (as Reshape by a run-time shape). */
static rx_status rt_reshape(imp *I, const Onnx__NodeProto *n, rx_var *x, rx_node *shp, int len,
                            rx_var **out) {
  rx_var *t, *rr;
  RX_RETURN_IF_ERROR(emit(I, n, "tensor_to_shape", &shp, 1, NULL, 0, &t));
  rx_node *a[2] = {rx_arg_var(I->b, x), rx_arg_var(I->b, t)};
  RX_RETURN_IF_ERROR(emit(I, n, "reshape", a, 2, NULL, 0, &rr));
  const rx_expr *dims[SYM_MAX];
  for (int k = 0; k < len; k++) dims[k] = fresh_dim(I);
  if (!match_cast_to(I, rr, rx_var_sinfo(x)->dtype, len, dims, out))
    return node_err(I, n, "match_cast of the reshaped value failed");
  return NULL;
}

/* The input's shape for the run-time paths: a tensor of known rank and dims. */
static rx_status rt_input_shape(imp *I, const Onnx__NodeProto *n, const char *what,
                                const rx_sinfo **out) {
  val *x = input(n, 0) ? get(I, input(n, 0)) : NULL;
  *out = x && x->kind == V_TENSOR ? shaped(I, n, 0) : NULL;
  if (!*out)
    return node_err(I, n, "%s computed at run time need input 0 to be a tensor of known rank",
                    what);
  return NULL;
}

/* Unsqueeze's result dims [rank] for the normalized axes ax of a rank-r input with dims xs:
 * 1 at an axis, else the input's dim at p - (the number of axes before p). */
static rx_status rt_unsqueeze_dims(imp *I, const Onnx__NodeProto *n, rx_node *ax, rx_node *xs,
                                   int r, int rank, rx_node **out) {
  rx_var *rv;
  rx_node *cnt, *p, *pc, *before;
  RX_RETURN_IF_ERROR(rt_axis_matrix(I, n, ax, rank, &cnt));
  RX_RETURN_IF_ERROR(rt_axis_sum(I, n, cnt, NULL, &cnt));
  RX_RETURN_IF_ERROR(iota(I, n, rx_sym_const(I->m, 0), rx_sym_const(I->m, rank), &p));
  RX_RETURN_IF_ERROR(trailing_units(I, n, p, 1, &pc));
  RX_RETURN_IF_ERROR(ex(I, n, "less", 2, ax, pc, NULL, &before, &rv));
  RX_RETURN_IF_ERROR(rt_count(I, n, before, 1, false, &before));
  RX_RETURN_IF_ERROR(ex(I, n, "subtract", 2, p, before, NULL, &p, &rv));
  RX_RETURN_IF_ERROR(ex(I, n, "maximum", 2, p, rx_arg_int(I->b, 0), NULL, &p, &rv));
  RX_RETURN_IF_ERROR(ex(I, n, "minimum", 2, p, rx_arg_int(I->b, r - 1), NULL, &p, &rv));
  RX_RETURN_IF_ERROR(take_at(I, n, xs, p, 0, &p, &rv));
  RX_RETURN_IF_ERROR(ex(I, n, "greater", 2, cnt, rx_arg_int(I->b, 0), NULL, &cnt, &rv));
  return ex(I, n, "where", 3, cnt, rx_arg_int(I->b, 1), p, out, &rv);
}

/* Squeeze and Unsqueeze; axes computed at run time (input 1 a graph input) give the result's
 * dims as a run-time shape and x reshaped to it. */
static rx_status do_squeeze_any(imp *I, const Onnx__NodeProto *n, const char *rop) {
  if (onnx_attr(n, "axes") || !rt_tensor_input(I, n, 1)) return do_squeeze(I, n, rop);
  const rx_sinfo *si;
  RX_RETURN_IF_ERROR(rt_input_shape(I, n, "axes", &si));
  bool unsq = n->op_type[0] == 'U';
  int k = rt_len(I, n, 1), r = si->ndim, rank = unsq ? r + k : r - k;
  if (k < 0)
    return node_err(I, n, "input 1 (axes) must be a 1-D integer tensor of constant length");
  if (rank < 0 || rank > SYM_MAX)
    return node_err(I, n, "%d axes for an input of rank %d: a result of rank %d", k, r, rank);
  rx_var *x = get(I, input(n, 0))->var, *out;
  const rx_expr *ones[SYM_MAX];
  for (int i = 0; i < rank; i++) ones[i] = rx_sym_const(I->m, 1);
  if ((unsq && r == 0) || (!unsq && rank == 0)) { /* every dim is 1 */
    rx_node *t;
    RX_RETURN_IF_ERROR(reshape_to(I, n, rx_arg_var(I->b, x), ones, rank, &t, &out));
    def_tensor(I, n, out);
    return NULL;
  }
  rx_node *ax, *xs, *shp;
  RX_RETURN_IF_ERROR(rt_i64(I, n, 1, &ax));
  RX_RETURN_IF_ERROR(rt_norm_axes(I, n, ax, unsq ? rank : r, &ax));
  RX_RETURN_IF_ERROR(rt_dims_tensor(I, n, si, &xs));
  if (unsq) {
    RX_RETURN_IF_ERROR(rt_unsqueeze_dims(I, n, ax, xs, r, rank, &shp));
  } else {
    rx_node *drop;
    RX_RETURN_IF_ERROR(rt_axis_matrix(I, n, ax, r, &drop));
    RX_RETURN_IF_ERROR(rt_axis_sum(I, n, drop, NULL, &drop));
    RX_RETURN_IF_ERROR(rt_kept_dims(I, n, xs, drop, rank, &shp));
  }
  RX_RETURN_IF_ERROR(rt_reshape(I, n, x, shp, rank, &out));
  def_tensor(I, n, out);
  return NULL;
}

/* ReduceMax, ReduceMean, ReduceMin, ReduceProd, ReduceSum with axes computed at run time: for
 * each axis d, where(d is an axis, the reduction along d kept as 1 (broadcast back), the value
 * so far); then the first element along each reduced axis, gathered at arange of the result's
 * run-time dims (1 at an axis), and without keepdims reshaped to the dims kept. */
static rx_status do_reduce_any(imp *I, const Onnx__NodeProto *n, const char *rop) {
  if (onnx_attr(n, "axes") || !rt_tensor_input(I, n, 1) || rt_len(I, n, 1) == 0)
    return do_reduce(I, n, rop); /* constant axes, or none (all, or noop_with_empty_axes) */
  const rx_sinfo *si;
  RX_RETURN_IF_ERROR(rt_input_shape(I, n, "axes", &si));
  int k = rt_len(I, n, 1), r = si->ndim, rank = r - k;
  if (k < 0)
    return node_err(I, n, "input 1 (axes) must be a 1-D integer tensor of constant length");
  if (rank < 0) return node_err(I, n, "%d axes for an input of rank %d", k, r);
  bool keep = onnx_attr_i(n, "keepdims", 1) != 0;
  rx_var *r_, *out;
  rx_node *ax, *cnt, *mask, *y = rx_arg_var(I->b, get(I, input(n, 0))->var), *md, *s, *xs, *shp;
  RX_RETURN_IF_ERROR(rt_i64(I, n, 1, &ax));
  RX_RETURN_IF_ERROR(rt_norm_axes(I, n, ax, r, &ax));
  RX_RETURN_IF_ERROR(rt_axis_matrix(I, n, ax, r, &cnt));
  RX_RETURN_IF_ERROR(rt_axis_sum(I, n, cnt, NULL, &cnt));
  RX_RETURN_IF_ERROR(ex(I, n, "greater", 2, cnt, rx_arg_int(I->b, 0), NULL, &mask, &r_));
  for (int d = 0; d < r; d++) {
    RX_RETURN_IF_ERROR(elem_of(I, n, mask, d, &md));
    RX_RETURN_IF_ERROR(rt_reduce(I, n, rop, y, d, true, &s));
    RX_RETURN_IF_ERROR(ex(I, n, "where", 3, md, s, y, &y, &r_));
  }
  RX_RETURN_IF_ERROR(rt_dims_tensor(I, n, si, &xs));
  RX_RETURN_IF_ERROR(ex(I, n, "where", 3, mask, rx_arg_int(I->b, 1), xs, &shp, &r_));
  const rx_expr *dims[SYM_MAX];
  rx_node *idx[SYM_MAX];
  RX_RETURN_IF_ERROR(rt_bind(I, n, shp, dims));
  for (int d = 0; d < r; d++)
    RX_RETURN_IF_ERROR(iota(I, n, rx_sym_const(I->m, 0), dims[d], &idx[d]));
  RX_RETURN_IF_ERROR(gather_grid(I, n, si, y, idx, &out));
  if (!keep) {
    RX_RETURN_IF_ERROR(rt_kept_dims(I, n, shp, cnt, rank, &shp));
    RX_RETURN_IF_ERROR(rt_reshape(I, n, out, shp, rank, &out));
  }
  def_tensor(I, n, out);
  return NULL;
}

/* Slice's per-axis start, end and step ([rank] i64 each) of the starts, ends, normalized axes
 * and steps (absent: 1) given at run time: the sum over the matrix of (p == axes[j]) picks each
 * axis's values; an axis not sliced keeps 0, its dim and 1. */
static rx_status rt_slice_params(imp *I, const Onnx__NodeProto *n, rx_node *ax, rx_node *xs, int r,
                                 rx_node **st, rx_node **en, rx_node **sp) {
  rx_var *rv;
  rx_node *m, *has, *v[3];
  RX_RETURN_IF_ERROR(rt_axis_matrix(I, n, ax, r, &m));
  RX_RETURN_IF_ERROR(rt_axis_sum(I, n, m, NULL, &has));
  RX_RETURN_IF_ERROR(ex(I, n, "greater", 2, has, rx_arg_int(I->b, 0), NULL, &has, &rv));
  for (int k = 0; k < 3; k++) {
    size_t i = k == 2 ? 4 : (size_t)k + 1;
    if (!input(n, i)) { /* steps absent: 1 (the where below keeps 1 at every axis) */
      RX_RETURN_IF_ERROR(ex(I, n, "where", 3, has, rx_arg_int(I->b, 1), xs, &v[k], &rv));
      continue;
    }
    RX_RETURN_IF_ERROR(rt_i64(I, n, i, &v[k]));
    RX_RETURN_IF_ERROR(rt_axis_sum(I, n, m, v[k], &v[k]));
  }
  RX_RETURN_IF_ERROR(ex(I, n, "where", 3, has, v[0], rx_arg_int(I->b, 0), st, &rv));
  RX_RETURN_IF_ERROR(ex(I, n, "where", 3, has, v[1], xs, en, &rv));
  return ex(I, n, "where", 3, has, v[2], rx_arg_int(I->b, 1), sp, &rv);
}

/* A start or end index v clamped as ONNX's Slice does: v + dim when negative, then into [0, dim]
 * for a positive step, [lo, dim - 1] for a negative one (lo: 0 for a start, -1 for an end). */
static rx_status rt_clamp_index(imp *I, const Onnx__NodeProto *n, rx_node *v, rx_node *xs,
                                rx_node *pos, int lo, rx_node **out) {
  rx_var *r;
  rx_node *neg, *up, *hi, *low;
  EX2("less", v, rx_arg_int(I->b, 0), neg);
  EX2("add", v, xs, up);
  EX3("where", neg, up, v, v);
  EX2("subtract", xs, rx_arg_int(I->b, 1), hi);
  EX3("where", pos, xs, hi, hi);
  EX3("where", pos, rx_arg_int(I->b, 0), rx_arg_int(I->b, lo), low);
  EX2("maximum", v, low, v);
  EX2("minimum", v, hi, *out);
  return NULL;
}

/* Slice with axes or steps computed at run time (a graph input): every axis of x gets its start,
 * step and length at run time (an axis not sliced: 0, 1 and its dim); the lengths are bound to
 * fresh dims and x gathered at start + step * arange(length) along each axis. A step of 0 (an
 * error in ONNX) is taken as 1. Constant axes and steps keep strided_slice (do_slice). */
static rx_status do_slice_any(imp *I, const Onnx__NodeProto *n, const char *rop) {
  val *x = input(n, 0) ? get(I, input(n, 0)) : NULL;
  if (!x || x->kind != V_TENSOR || n->n_input < 4 ||
      !(rt_tensor_input(I, n, 3) || rt_tensor_input(I, n, 4)))
    return do_slice(I, n, rop);
  const rx_sinfo *si;
  RX_RETURN_IF_ERROR(rt_input_shape(I, n, "axes or steps", &si));
  int k = rt_len(I, n, 1), r = si->ndim;
  for (size_t i = 2; i < 5; i++)
    if (input(n, i) && rt_len(I, n, i) != k)
      return node_err(I, n, "starts, ends, axes and steps must be given with one length");
  if (k < 0 || r == 0)
    return node_err(I, n, "starts must be a 1-D integer tensor of constant length");
  rx_var *rv, *out;
  rx_node *ax, *xs, *st, *en, *sp, *pos, *len, *a;
  if (input(n, 3)) {
    RX_RETURN_IF_ERROR(rt_i64(I, n, 3, &ax));
  } else {
    RX_RETURN_IF_ERROR(iota(I, n, rx_sym_const(I->m, 0), rx_sym_const(I->m, k), &ax));
  }
  RX_RETURN_IF_ERROR(rt_norm_axes(I, n, ax, r, &ax));
  RX_RETURN_IF_ERROR(rt_dims_tensor(I, n, si, &xs));
  RX_RETURN_IF_ERROR(rt_slice_params(I, n, ax, xs, r, &st, &en, &sp));
  RX_RETURN_IF_ERROR(ex(I, n, "greater_equal", 2, sp, rx_arg_int(I->b, 0), NULL, &pos, &rv));
  RX_RETURN_IF_ERROR(rt_clamp_index(I, n, st, xs, pos, 0, &st));
  RX_RETURN_IF_ERROR(rt_clamp_index(I, n, en, xs, pos, -1, &en));
  /* length: max(0, ceil(|end - start| / |step|)) in the step's direction */
  RX_RETURN_IF_ERROR(ex(I, n, "abs", 1, sp, NULL, NULL, &a, &rv));
  RX_RETURN_IF_ERROR(ex(I, n, "maximum", 2, a, rx_arg_int(I->b, 1), NULL, &a, &rv));
  rx_node *back;
  RX_RETURN_IF_ERROR(ex(I, n, "neg", 1, a, NULL, NULL, &back, &rv));
  RX_RETURN_IF_ERROR(ex(I, n, "where", 3, pos, a, back, &sp, &rv));
  RX_RETURN_IF_ERROR(ex(I, n, "subtract", 2, en, st, NULL, &len, &rv));
  /* the distance in the step's direction, (end - start) * step / |step| (exact) */
  RX_RETURN_IF_ERROR(ex(I, n, "multiply", 2, len, sp, NULL, &len, &rv));
  RX_RETURN_IF_ERROR(ex(I, n, "divide", 2, len, a, NULL, &len, &rv));
  RX_RETURN_IF_ERROR(ex(I, n, "add", 2, len, a, NULL, &len, &rv));
  RX_RETURN_IF_ERROR(ex(I, n, "subtract", 2, len, rx_arg_int(I->b, 1), NULL, &len, &rv));
  RX_RETURN_IF_ERROR(ex(I, n, "divide", 2, len, a, NULL, &len, &rv));
  RX_RETURN_IF_ERROR(ex(I, n, "maximum", 2, len, rx_arg_int(I->b, 0), NULL, &len, &rv));
  const rx_expr *dims[SYM_MAX];
  rx_node *idx[SYM_MAX], *s, *p;
  RX_RETURN_IF_ERROR(rt_bind(I, n, len, dims));
  for (int d = 0; d < r; d++) {
    RX_RETURN_IF_ERROR(iota(I, n, rx_sym_const(I->m, 0), dims[d], &idx[d]));
    RX_RETURN_IF_ERROR(elem_of(I, n, sp, d, &p));
    RX_RETURN_IF_ERROR(elem_of(I, n, st, d, &s));
    RX_RETURN_IF_ERROR(ex(I, n, "multiply", 2, idx[d], p, NULL, &idx[d], &rv));
    RX_RETURN_IF_ERROR(ex(I, n, "add", 2, idx[d], s, NULL, &idx[d], &rv));
  }
  RX_RETURN_IF_ERROR(gather_grid(I, n, si, rx_arg_var(I->b, x->var), idx, &out));
  def_tensor(I, n, out);
  return NULL;
}

/* Range's scalar input i (a graph input, a float constant, a shape value) as a tensor [1] of
 * dtype dt ([1], not a scalar: the scheduler places no 0-d unary math op in a kernel). */
static rx_status rt_scalar(imp *I, const Onnx__NodeProto *n, size_t i, rx_dtype dt, rx_node **out) {
  val *v = input(n, i) ? get(I, input(n, i)) : NULL;
  rx_var *t = NULL;
  const rx_expr *one = rx_sym_const(I->m, 1);
  if (v && v->kind == V_FCONST) {
    rx_node *a[2] = {rx_arg_shape(I->b, &one, 1), rx_arg_float(I->b, v->f)};
    const rx_attr *at = rx_attr_dtype(I->m, "dtype", dt);
    return exa(I, n, "full", a, 2, &at, 1, out, NULL);
  }
  if (v && v->kind == V_SYM && v->sndim == 0)
    RX_RETURN_IF_ERROR(sym_tensor(I, n, v, &t));
  else if (v && v->kind == V_TENSOR)
    t = v->var;
  const rx_sinfo *si = t ? rx_var_sinfo(t) : NULL;
  if (!si || si->kind != RX_SINFO_TENSOR || si->ndim != 0)
    return node_err(I, n, "input %zu must be a scalar", i);
  RX_RETURN_IF_ERROR(reshape_to(I, n, rx_arg_var(I->b, t), &one, 1, out, NULL));
  return si->dtype == dt ? NULL : rt_cast(I, n, *out, dt, out);
}

/* Range whose bounds are computed at run time where the compile-time form cannot take them (a
 * float input, or a step that is a graph input): the length max(0, ceil((limit - start) /
 * delta)) computed by a kernel and bound to a fresh dim n, then start + delta * arange(n) in
 * the inputs' dtype. An integer delta of 0 (an error in ONNX) fails the call (check_nonzero). */
static rx_status do_range_any(imp *I, const Onnx__NodeProto *n, const char *rop) {
  bool rt = false;
  rx_dtype dt = RX_DTYPE_UNKNOWN;
  for (size_t k = 0; k < 3; k++) {
    val *v = input(n, k) ? get(I, input(n, k)) : NULL;
    const rx_sinfo *si = tsinfo(v);
    if (si && si->kind == RX_SINFO_TENSOR && dt == RX_DTYPE_UNKNOWN) dt = si->dtype;
    if ((v && v->kind == V_FCONST) || (si && (rx_dtype_is_float(si->dtype) || k == 2))) rt = true;
  }
  if (!rt) return do_range(I, n, rop);
  if (dt == RX_DTYPE_UNKNOWN) dt = RX_DTYPE_F32; /* float constants and shape values */
  rx_var *r;
  rx_node *s, *l, *d, *len, *y;
  RX_RETURN_IF_ERROR(rt_scalar(I, n, 0, dt, &s));
  RX_RETURN_IF_ERROR(rt_scalar(I, n, 1, dt, &l));
  RX_RETURN_IF_ERROR(rt_scalar(I, n, 2, dt, &d));
  if (rx_dtype_is_float(dt)) {
    EX2("subtract", l, s, len);
    EX2("divide", len, d, len);
    EX1("ceil", len, len);
    RX_RETURN_IF_ERROR(rt_cast(I, n, len, RX_DTYPE_I64, &len));
  } else { /* ceil(a / b) = -floor(-a / b), relaxc's integer divide floors */
    rx_node *z, *dd, *s64;
    RX_RETURN_IF_ERROR(rt_cast(I, n, s, RX_DTYPE_I64, &s64));
    RX_RETURN_IF_ERROR(rt_cast(I, n, l, RX_DTYPE_I64, &l));
    RX_RETURN_IF_ERROR(rt_cast(I, n, d, RX_DTYPE_I64, &dd));
    { /* a delta of 0 fails the call, as ONNX Runtime refuses it */
      char msg[300];
      snprintf(msg, sizeof msg, "node '%.200s' (Range): delta in Range operator can not be zero!",
               n->name && n->name[0] ? n->name : n->output[0]);
      const rx_attr *ma = rx_attr_str(I->m, "message", msg);
      RX_RETURN_IF_ERROR(exa(I, n, "check_nonzero", &dd, 1, &ma, 1, &dd, NULL));
    }
    EX2("equal", dd, rx_arg_int(I->b, 0), z);
    EX3("where", z, rx_arg_int(I->b, 1), dd, dd);
    EX2("subtract", s64, l, len);
    EX2("divide", len, dd, len);
    EX1("neg", len, len);
    EX3("where", z, rx_arg_int(I->b, 0), len, len);
  }
  EX2("maximum", len, rx_arg_int(I->b, 0), len);
  const rx_expr *e;
  RX_RETURN_IF_ERROR(rt_bind(I, n, len, &e));
  rx_node *a[2] = {I64(rx_sym_const(I->m, 0)), I64(e)};
  const rx_attr *at = rx_attr_dtype(I->m, "dtype", dt);
  RX_RETURN_IF_ERROR(exa(I, n, "arange", a, 2, &at, 1, &y, NULL));
  EX2("multiply", y, d, y);
  EX2("add", y, s, y);
  def_tensor(I, n, r);
  return NULL;
}

/* HannWindow, HammingWindow, BlackmanWindow (rop: "hann", "hamming", "blackman"): a0 - a1
 * cos(2 pi i / N') + a2 cos(4 pi i / N') for i < size, N' = size (periodic, the default) or size
 * - 1; size a constant, a shape value or bound at run time; in output_datatype (default f32). */
static rx_status do_window(imp *I, const Onnx__NodeProto *n, const char *rop) {
  double a0 = 0.5, a1 = 0.5, a2 = 0;
  if (!strcmp(rop, "hamming")) a0 = 25.0 / 46, a1 = 21.0 / 46;
  if (!strcmp(rop, "blackman")) a0 = 0.42, a2 = 0.08;
  rx_dtype dt;
  if (!onnx_dtype_of((int32_t)onnx_attr_i(n, "output_datatype", 1), &dt) ||
      !(rx_dtype_is_float(dt) || rx_dtype_is_int(dt)))
    return node_err(I, n, "output_datatype %lld is not a numeric dtype of relaxc",
                    (long long)onnx_attr_i(n, "output_datatype", 1));
  const rx_expr *size, *den;
  RX_RETURN_IF_ERROR(scalar_input(I, n, 0, &size));
  den = onnx_attr_i(n, "periodic", 1) ? size : rx_sym_sub(I->m, size, rx_sym_const(I->m, 1));
  rx_var *r;
  rx_node *i, *dn, *ang, *y, *c;
  rx_node *a[2] = {I64(rx_sym_const(I->m, 0)), I64(size)};
  const rx_attr *at = rx_attr_dtype(I->m, "dtype", RX_DTYPE_F32);
  RX_RETURN_IF_ERROR(exa(I, n, "arange", a, 2, &at, 1, &i, NULL));
  RX_RETURN_IF_ERROR(value_tensor(I, n, den, RX_DTYPE_F32, &dn));
  EX2("multiply", i, FL(2 * 3.14159265358979323846), ang);
  EX2("divide", ang, dn, ang);
  EX1("cos", ang, c);
  EX2("multiply", c, FL(-a1), y);
  EX2("add", y, FL(a0), y);
  if (a2 != 0) {
    EX2("multiply", ang, FL(2), c);
    EX1("cos", c, c);
    EX2("multiply", c, FL(a2), c);
    EX2("add", y, c, y);
  }
  if (dt != RX_DTYPE_F32) RX_RETURN_IF_ERROR(rt_cast(I, n, y, dt, &y));
  def_tensor(I, n, y->var);
  return NULL;
}

/* The positions of the true elements of the bool vector m [len], in order, as an i64 tensor
 * [count] with the count bound to a fresh dim at run time (*count): position j is the number
 * of elements whose inclusive running count of trues is at most j (a [count, len] reduction:
 * O(count len) work, in parallel). */
static rx_status rt_true_positions(imp *I, const Onnx__NodeProto *n, rx_node *m,
                                   const rx_expr **count, rx_node **out) {
  rx_var *r;
  rx_node *c, *total, *j;
  RX_RETURN_IF_ERROR(rt_cast(I, n, m, RX_DTYPE_I64, &c));
  RX_RETURN_IF_ERROR(rt_count(I, n, m, 0, true, &total));
  RX_RETURN_IF_ERROR(rt_bind(I, n, total, count));
  const rx_attr *at = rx_attr_int(I->m, "axis", 0);
  RX_RETURN_IF_ERROR(exa(I, n, "cumsum", &c, 1, &at, 1, &c, NULL));
  RX_RETURN_IF_ERROR(iota(I, n, rx_sym_const(I->m, 0), *count, &j));
  RX_RETURN_IF_ERROR(trailing_units(I, n, j, 1, &j));
  EX2("less_equal", c, j, c);
  return rt_count(I, n, c, 1, false, out);
}

/* Input 0 of NonZero, Compress and Unique (a tensor of known rank, at least 1) and their axis
 * attribute normalized (*axis: -1 when absent). */
static rx_status data_input(imp *I, const Onnx__NodeProto *n, const rx_sinfo **si, int64_t *axis) {
  *si = shaped(I, n, 0);
  *axis = -1;
  if (!*si || (*si)->ndim == 0 || get(I, input(n, 0))->kind != V_TENSOR)
    return node_err(I, n, "input 0 must be a tensor of known rank of at least 1");
  if (!onnx_attr(n, "axis")) return NULL;
  int64_t a = onnx_attr_i(n, "axis", 0);
  *axis = a < 0 ? a + (*si)->ndim : a;
  if (*axis < 0 || *axis >= (*si)->ndim)
    return node_err(I, n, "axis %lld out of range for rank %d", (long long)a, (*si)->ndim);
  return NULL;
}

/* x (shape si) flattened to 1-D (*count: its element count). */
static rx_status flatten_all(imp *I, const Onnx__NodeProto *n, const rx_sinfo *si, rx_node *x,
                             const rx_expr **count, rx_node **out) {
  *count = rx_sym_const(I->m, 1);
  for (int d = 0; d < si->ndim; d++) *count = rx_sym_mul(I->m, *count, si->shape[d]);
  return reshape_to(I, n, x, count, 1, out, NULL);
}

/* NonZero: the indices [rank, count] of the nonzero elements in row-major order; the positions
 * in x flattened (rt_true_positions), each split into its coordinates. */
static rx_status do_nonzero(imp *I, const Onnx__NodeProto *n, const char *rop) {
  (void)rop;
  const rx_sinfo *si;
  int64_t axis;
  RX_RETURN_IF_ERROR(data_input(I, n, &si, &axis));
  rx_var *r;
  rx_node *x, *pos, *rows[SYM_MAX], *c;
  const rx_expr *total, *count;
  RX_RETURN_IF_ERROR(flatten_all(I, n, si, rx_arg_var(I->b, get(I, input(n, 0))->var), &total, &x));
  if (si->dtype != RX_DTYPE_BOOL) RX_RETURN_IF_ERROR(rt_cast(I, n, x, RX_DTYPE_BOOL, &x));
  RX_RETURN_IF_ERROR(rt_true_positions(I, n, x, &count, &pos));
  const rx_expr *stride = rx_sym_const(I->m, 1);
  for (int d = si->ndim - 1; d >= 0; d--) {
    c = pos;
    if (!rx_expr_is_const(stride, 1)) EX2("divide", c, I64(stride), c);
    if (d > 0) RX_RETURN_IF_ERROR(imod(I, n, c, si->shape[d], &c));
    int64_t zero = 0;
    const rx_attr *at = rx_attr_ints(I->m, "axes", &zero, 1);
    RX_RETURN_IF_ERROR(exa(I, n, "expand_dims", &c, 1, &at, 1, &rows[d], NULL));
    stride = rx_sym_mul(I->m, stride, si->shape[d]);
  }
  rx_var *tup, *out;
  RX_RETURN_IF_ERROR(at_node(I, n, rx_emit_tuple(I->b, rows, si->ndim, NULL, &tup)));
  rx_node *a = rx_arg_var(I->b, tup);
  const rx_attr *ax = rx_attr_int(I->m, "axis", 0);
  RX_RETURN_IF_ERROR(emit(I, n, "concat", &a, 1, &ax, 1, &out));
  def_tensor(I, n, out);
  return NULL;
}

/* Compress: x (flattened when axis is absent) at the positions along axis where the 1-D
 * condition is true (rt_true_positions; a condition shorter than the axis selects among the
 * first elements). */
static rx_status do_compress(imp *I, const Onnx__NodeProto *n, const char *rop) {
  (void)rop;
  const rx_sinfo *si, *cs = shaped(I, n, 1);
  int64_t axis;
  RX_RETURN_IF_ERROR(data_input(I, n, &si, &axis));
  if (!cs || cs->ndim != 1 || get(I, input(n, 1))->kind != V_TENSOR)
    return node_err(I, n, "input 1 (condition) must be a 1-D tensor");
  rx_var *r;
  rx_node *x = rx_arg_var(I->b, get(I, input(n, 0))->var), *m, *pos;
  const rx_expr *total;
  if (axis < 0) RX_RETURN_IF_ERROR(flatten_all(I, n, si, x, &total, &x));
  m = rx_arg_var(I->b, get(I, input(n, 1))->var);
  if (cs->dtype != RX_DTYPE_BOOL) RX_RETURN_IF_ERROR(rt_cast(I, n, m, RX_DTYPE_BOOL, &m));
  const rx_expr *count;
  RX_RETURN_IF_ERROR(rt_true_positions(I, n, m, &count, &pos));
  RX_RETURN_IF_ERROR(take_at(I, n, x, pos, axis < 0 ? 0 : axis, &x, &r));
  def_tensor(I, n, r);
  return NULL;
}

/* Unique's input as rows [count, len]: x flattened to [N, 1] without an axis, else x's axis
 * moved first and the other dims flattened (*cnt: the row count N). */
static rx_status unique_rows(imp *I, const Onnx__NodeProto *n, const rx_sinfo *si, int64_t axis,
                             rx_node **out, const rx_expr **cnt) {
  rx_node *x = rx_arg_var(I->b, get(I, input(n, 0))->var);
  const rx_expr *total = rx_sym_const(I->m, 1), *dims[2];
  for (int d = 0; d < si->ndim; d++)
    if (d != axis) total = rx_sym_mul(I->m, total, si->shape[d]);
  dims[0] = axis < 0 ? total : si->shape[axis];
  dims[1] = axis < 0 ? rx_sym_const(I->m, 1) : total;
  if (axis > 0) {
    int64_t perm[SYM_MAX];
    perm[0] = axis;
    for (int d = 0, k = 1; d < si->ndim; d++)
      if (d != axis) perm[k++] = d;
    const rx_attr *at = rx_attr_ints(I->m, "axes", perm, si->ndim);
    RX_RETURN_IF_ERROR(exa(I, n, "permute", &x, 1, &at, 1, &x, NULL));
  }
  *cnt = dims[0];
  return reshape_to(I, n, x, dims, 2, out, NULL);
}

/* The i64 sort key [N] of Unique's rows (xi [N, 1, len], xj [1, N, len], ne: their not_equal
 * as i64), counted among the first occurrences (first [N]): with sorted, how many first rows
 * are lexicographically less (a row j is less than row i where, at the first element they
 * differ, j's is less); else how many first rows come before. */
static rx_status unique_key(imp *I, const Onnx__NodeProto *n, bool sorted, rx_node *xi, rx_node *xj,
                            rx_node *ne, rx_node *first, rx_node **out) {
  rx_var *r;
  rx_node *c, *lt;
  if (!sorted) {
    RX_RETURN_IF_ERROR(rt_cast(I, n, first, RX_DTYPE_I64, &c));
    const rx_attr *at[2] = {rx_attr_int(I->m, "axis", 0), rx_attr_bool(I->m, "exclusive", true)};
    return exa(I, n, "cumsum", &c, 1, at, 2, out, NULL);
  }
  const rx_attr *at[2] = {rx_attr_int(I->m, "axis", 2), rx_attr_bool(I->m, "exclusive", true)};
  RX_RETURN_IF_ERROR(exa(I, n, "cumsum", &ne, 1, at, 2, &c, NULL));
  EX2("equal", c, rx_arg_int(I->b, 0), c);
  EX2("less", xj, xi, lt);
  EX2("logical_and", lt, c, lt);
  RX_RETURN_IF_ERROR(rt_count(I, n, lt, 2, false, &lt));
  EX2("greater", lt, rx_arg_int(I->b, 0), lt);
  EX2("logical_and", lt, first, lt);
  return rt_count(I, n, lt, 1, false, out);
}

/* Unique (axis absent: of x flattened; sorted default 1): rows i and j compared elementwise in
 * an [N, N, len] grid; rep[i], the first row equal to row i (argmax of the equal row), makes
 * the first occurrences (rep[i] == i) and the counts; the U first rows (bound at run time)
 * go to output slot key[i] (unique_key), gathered as a [U, N] reduction. O(N^2 len) work: a
 * fallback for the small tensors Unique is used on. */
static rx_status do_unique(imp *I, const Onnx__NodeProto *n, const char *rop) {
  (void)rop;
  const rx_sinfo *si;
  int64_t axis;
  RX_RETURN_IF_ERROR(data_input(I, n, &si, &axis));
  rx_var *r;
  rx_node *x, *xi, *xj, *ne, *eq, *rep, *cnt, *ii, *first, *key, *tot, *sl, *order, *o[4];
  const rx_expr *N, *U, *zero = rx_sym_const(I->m, 0);
  RX_RETURN_IF_ERROR(unique_rows(I, n, si, axis, &x, &N));
  int64_t ax1 = 1, ax0 = 0;
  const rx_attr *a1 = rx_attr_ints(I->m, "axes", &ax1, 1),
                *a0 = rx_attr_ints(I->m, "axes", &ax0, 1);
  RX_RETURN_IF_ERROR(exa(I, n, "expand_dims", &x, 1, &a1, 1, &xi, NULL));
  RX_RETURN_IF_ERROR(exa(I, n, "expand_dims", &x, 1, &a0, 1, &xj, NULL));
  EX2("not_equal", xi, xj, ne);
  RX_RETURN_IF_ERROR(rt_cast(I, n, ne, RX_DTYPE_I64, &ne));
  RX_RETURN_IF_ERROR(rt_count(I, n, ne, 2, false, &eq));
  EX2("equal", eq, rx_arg_int(I->b, 0), eq);
  RX_RETURN_IF_ERROR(rt_cast(I, n, eq, RX_DTYPE_I64, &eq));
  const rx_attr *am[2] = {rx_attr_int(I->m, "axis", 1), rx_attr_bool(I->m, "keepdims", false)};
  RX_RETURN_IF_ERROR(exa(I, n, "argmax", &eq, 1, am, 2, &rep, NULL));
  RX_RETURN_IF_ERROR(rt_count(I, n, eq, 1, false, &cnt));
  RX_RETURN_IF_ERROR(iota(I, n, zero, N, &ii));
  EX2("equal", rep, ii, first);
  RX_RETURN_IF_ERROR(unique_key(I, n, onnx_attr_i(n, "sorted", 1) != 0, xi, xj, ne, first, &key));
  RX_RETURN_IF_ERROR(rt_count(I, n, first, 0, true, &tot));
  RX_RETURN_IF_ERROR(rt_bind(I, n, tot, &U));
  RX_RETURN_IF_ERROR(iota(I, n, zero, U, &sl));
  RX_RETURN_IF_ERROR(trailing_units(I, n, sl, 1, &sl));
  EX2("equal", key, sl, sl);
  EX2("logical_and", sl, first, sl);
  EX3("where", sl, ii, rx_arg_int(I->b, 0), order);
  RX_RETURN_IF_ERROR(rt_count(I, n, order, 1, false, &order));
  if (axis >= 0) {
    RX_RETURN_IF_ERROR(
        take_at(I, n, rx_arg_var(I->b, get(I, input(n, 0))->var), order, axis, &o[0], &r));
  } else {
    RX_RETURN_IF_ERROR(reshape_to(I, n, x, &N, 1, &x, NULL));
    RX_RETURN_IF_ERROR(take_at(I, n, x, order, 0, &o[0], &r));
  }
  o[1] = order;
  RX_RETURN_IF_ERROR(take_at(I, n, key, rep, 0, &o[2], &r));
  RX_RETURN_IF_ERROR(take_at(I, n, cnt, order, 0, &o[3], &r));
  for (size_t k = 0; k < 4 && k < n->n_output; k++)
    if (n->output[k] && n->output[k][0]) def_named(I, n->output[k], o[k]->var);
  return NULL;
}

#undef I64
#undef EX1
#undef EX2
#undef EX3
#undef FL
#include "import_quant.h"

/* ---- the supported operators, listed once ----
 * {ONNX op type, handler, the relaxc op it maps to (the handler's rop), first opset, last opset
 * (0: still current), note for the README}. The opset range is where the handler's reading of
 * the op is right: the first opset of the form it implements (e.g. LayerNormalization and Gelu
 * entered the default domain at opsets 17 and 20, Reshape takes its shape as an input from 5,
 * Cast's `to` is a dtype number from 6); where a later opset moved attributes to inputs (Squeeze,
 * Unsqueeze and Split at 13, the Reduce ops at 13 and 18, Slice at 10, Clip at 11) the handler
 * reads both forms. A node outside its op's range, or of an op not listed, is reported with
 * every other such node before any is imported. README.md's list is `relaxc import
 * --list-ops`, checked by tests/lit/onnx/supported_ops.test. */
/* ---- control flow: If, Loop, Scan ----
 * A subgraph becomes a graph function of its own (its body: the subgraph's inputs, then the
 * outer tensors it reads, as parameters; the tuple of its outputs as result). A small driver
 * function, written as text and parsed into the module, holds the graph-level `if` and, for
 * Loop and Scan, the recursion: under `if k < trip count` it calls the body for step k and then
 * itself for k + 1 as its last act, so the trip count stays symbolic (a loop is a recursive
 * graph function, as in Relax) and the recursion is a tail call: the host program's
 * TAIL_CALL_FN runs the next step in the place of this one, so a loop of any length runs in
 * constant frames and each step's values are released before the next. Scan outputs are
 * accumulators passed along: a [steps, dims..] tensor per output whose row k step k writes in
 * place (one small tensor program for all of them, `<driver>w`; Scan's inputs are read likewise
 * by `<driver>r`), so building them is linear in the steps: Scan's allocated at its length,
 * Loop's (whose length the condition may cut) grown by doubling from min(M, 16) rows and cut to
 * the steps run at the end. A driver writes in place, so it is called between dataflow blocks.
 * `main` calls the driver once. */

#define CF_MAXCAP 32 /* outer values one subgraph may read */
#define CF_MAXIO  16 /* inputs and outputs of one control-flow node */

/* Output `name` of the current function as a tensor variable (a shape value: its tensor, a
 * float constant: a tensor of ones' shape). */
static rx_status out_tensor(imp *I, const Onnx__NodeProto *n, const char *name, rx_var **out) {
  *out = NULL;
  val *v = get(I, name);
  rx_var *t = v && v->kind == V_TENSOR ? v->var : NULL;
  if (v && v->kind == V_SYM) { /* a shape value: its i64 (or int, bool) tensor */
    RX_RETURN_IF_ERROR(sym_tensor(I, n, v, &t));
  } else if (v && v->kind == V_FCONST) { /* a float constant: a tensor of ones' shape */
    const rx_expr *one = rx_sym_const(I->m, 1), *dims[SYM_MAX];
    for (int k = 0; k < v->sndim && k < SYM_MAX; k++) dims[k] = one;
    rx_node *a[2] = {rx_arg_shape(I->b, dims, v->sndim < SYM_MAX ? v->sndim : SYM_MAX),
                     rx_arg_float(I->b, v->f)};
    const rx_attr *at = rx_attr_dtype(I->m, "dtype", v->sdt ? v->sdt : RX_DTYPE_F32);
    RX_RETURN_IF_ERROR(at_node(I, n, rx_emit_op(I->b, "full", a, 2, &at, 1, NULL, &t)));
  }
  if (!t)
    return rx_status_make(RX_ERR_UNSUPPORTED, "%s: graph output '%s' is not defined", I->file,
                          name ? name : "");
  *out = t;
  return NULL;
}

static bool name_in(const char *const *names, int n, const char *s) {
  for (int i = 0; i < n; i++)
    if (!strcmp(names[i], s)) return true;
  return false;
}

/* Adds the names that g's nodes (and their subgraphs) read but g does not define; -1 when
 * there are more than max. */
static int captures(const Onnx__GraphProto *g, const char **out, int nout, int max) {
  const char *def_[512];
  int nd = 0;
  /* the weights of a subgraph are parameters of main (onnx_each_weight): read from outside */
  for (size_t i = 0; i < g->n_input && nd < 512; i++) def_[nd++] = g->input[i]->name;
  for (size_t i = 0; i < g->n_initializer && nd < 512; i++)
    if (!onnx_is_weight(g->initializer[i], false)) def_[nd++] = g->initializer[i]->name;
  for (size_t i = 0; i < g->n_node; i++) {
    const Onnx__NodeProto *nn = g->node[i];
    const Onnx__TensorProto *t;
    if (nn->op_type && !strcmp(nn->op_type, "Constant") && (t = onnx_const_tensor(nn)) &&
        onnx_is_weight(t, true))
      continue;
    for (size_t k = 0; k < nn->n_output && nd < 512; k++)
      if (nn->output[k]) def_[nd++] = nn->output[k];
  }
  if (nd >= 512) return -1;
  for (size_t i = 0; i < g->n_node; i++) {
    const Onnx__NodeProto *nn = g->node[i];
    const char *used[CF_MAXCAP];
    int nu = 0;
    for (size_t k = 0; k < nn->n_input && nu >= 0; k++)
      if (input(nn, k) && nu < CF_MAXCAP) used[nu++] = input(nn, k);
    for (size_t a = 0; a < nn->n_attribute && nu >= 0; a++)
      if (nn->attribute[a]->g) nu = captures(nn->attribute[a]->g, used, nu, CF_MAXCAP);
    if (nu < 0) return -1;
    for (int k = 0; k < nu; k++) {
      if (name_in(def_, nd, used[k]) || name_in(out, nout, used[k])) continue;
      if (nout == max) return -1;
      out[nout++] = used[k];
    }
  }
  for (size_t i = 0; i < g->n_output; i++)
    if (!name_in(def_, nd, g->output[i]->name) && !name_in(out, nout, g->output[i]->name)) {
      if (nout == max) return -1;
      out[nout++] = g->output[i]->name;
    }
  return nout;
}

/* A subgraph's body function: see import_body. */
typedef struct body {
  const char *fname;
  const rx_sinfo *const *in; /* the sinfo of each of g's inputs */
  const rx_expr *iter;       /* Loop: input 0 is the iteration number, Shape([iter]) */
  int ncaps;                 /* the captured outer tensors, passed after the inputs */
  rx_var *capv[CF_MAXCAP];   /* their variables in the calling function */
  const rx_sinfo *ret;       /* the result: the tuple of g's outputs */
  rx_var *tup;               /* body_fill: the tuple's variable in the body */
} body;

static rx_status body_nodes(imp *I, const Onnx__NodeProto *n, const Onnx__GraphProto *g, body *bd,
                            const char *const *caps, int nc, rx_var *const *outer,
                            rx_ptrvec *pvars);

/* The variables in the dims of si (a tensor or shape, or a tuple of them), added to vars. */
static void sinfo_vars(const rx_sinfo *si, rx_ptrvec *vars) {
  if (si->kind == RX_SINFO_TUPLE)
    for (int i = 0; i < si->nfields; i++) sinfo_vars(si->fields[i], vars);
  if ((si->kind == RX_SINFO_TENSOR || si->kind == RX_SINFO_SHAPE) && si->shape)
    for (int d = 0; d < si->ndim; d++) rx_expr_collect_vars(si->shape[d], vars);
}

/* The body function's result ret with each field whose dims use a variable that no parameter
 * (params: their variables) defines, one bound inside the body (an If branch's
 * NonMaxSuppression count), as its rank only: the caller cannot name it. */
static const rx_sinfo *result_defined(imp *I, const rx_sinfo *ret, rx_ptrvec *params) {
  const rx_sinfo *f[CF_MAXIO];
  bool changed = false;
  for (int i = 0; i < ret->nfields && i < CF_MAXIO; i++) {
    rx_ptrvec used = {0};
    f[i] = ret->fields[i];
    sinfo_vars(f[i], &used);
    bool known = true;
    for (size_t k = 0; k < used.len && known; k++) {
      known = false;
      for (size_t j = 0; j < params->len && !known; j++) known = params->data[j] == used.data[k];
    }
    rx_ptrvec_free(&used);
    if (!known && f[i]->kind == RX_SINFO_TENSOR) {
      f[i] = rx_sinfo_tensor(I->m, f[i]->dtype, f[i]->ndim, NULL);
      changed = true;
    }
  }
  return changed ? rx_sinfo_tuple(I->m, f, ret->nfields) : ret;
}

static rx_status body_fill(imp *I, const Onnx__NodeProto *n, const Onnx__GraphProto *g, body *bd,
                           const char *const *caps, int nc, rx_var *const *outer) {
  rx_ptrvec pvars = {0};
  rx_status st = body_nodes(I, n, g, bd, caps, nc, outer, &pvars);
  if (!st) {
    bd->ret = result_defined(I, bd->ret, &pvars);
    rx_builder_set_result(I->b, bd->ret);
    rx_builder *b = I->b;
    I->b = NULL;
    st = at_node(I, n, rx_builder_finish(b, rx_arg_var(b, bd->tup), NULL));
  }
  rx_ptrvec_free(&pvars);
  return st;
}

/* body_fill's parameters (their dims' variables added to pvars) and nodes, to the tuple of
 * outputs bd->tup (struct info bd->ret) */
static rx_status body_nodes(imp *I, const Onnx__NodeProto *n, const Onnx__GraphProto *g, body *bd,
                            const char *const *caps, int nc, rx_var *const *outer,
                            rx_ptrvec *pvars) {
  for (size_t i = 0; i < g->n_input; i++) {
    const char *nm = g->input[i]->name;
    char *id = onnx_ident(nm);
    const rx_sinfo *si = bd->iter && i == 0 ? rx_sinfo_shape(I->m, 1, &bd->iter) : bd->in[i];
    rx_var *pv;
    rx_status s = rx_builder_param(I->b, id, si, &pv);
    free(id);
    RX_RETURN_IF_ERROR(at_node(I, n, s));
    sinfo_vars(si, pvars);
    if (bd->iter && i == 0) {
      val *v = def(I, nm);
      v->kind = V_SYM;
      v->slen = 1;
      v->s[0] = bd->iter;
    } else {
      def_named(I, nm, pv);
    }
  }
  for (int k = 0; k < nc; k++) {
    if (outer[k]) {
      rx_var *pv;
      char nm[32];
      snprintf(nm, sizeof nm, "outer%d", k);
      RX_RETURN_IF_ERROR(at_node(I, n, rx_builder_param(I->b, nm, rx_var_sinfo(outer[k]), &pv)));
      sinfo_vars(rx_var_sinfo(pv), pvars);
      def_named(I, caps[k], pv);
      bd->capv[bd->ncaps++] = outer[k];
    }
  }
  for (size_t i = 0; i < g->n_initializer; i++) /* weights: captured parameters */
    if (!onnx_is_weight(g->initializer[i], false))
      RX_RETURN_IF_ERROR(def_constant(I, n, g->initializer[i]->name, g->initializer[i]));
  RX_RETURN_IF_ERROR(rx_builder_begin_dataflow(I->b));
  for (size_t i = 0; i < g->n_node; i++) RX_RETURN_IF_ERROR(do_node(I, g->node[i]));
  if (g->n_output == 0 || g->n_output > CF_MAXIO)
    return node_err(I, n, "a subgraph needs 1 to %d outputs", CF_MAXIO);
  rx_node *outs[CF_MAXIO];
  for (size_t i = 0; i < g->n_output; i++) {
    rx_var *t;
    RX_RETURN_IF_ERROR(out_tensor(I, n, g->output[i]->name, &t));
    outs[i] = rx_arg_var(I->b, t);
  }
  rx_var *tup;
  RX_RETURN_IF_ERROR(at_node(I, n, rx_emit_tuple(I->b, outs, (int)g->n_output, NULL, &tup)));
  RX_RETURN_IF_ERROR(rx_builder_end_dataflow(I->b));
  bd->ret = rx_var_sinfo(tup);
  bd->tup = tup;
  return NULL;
}

/* Imports subgraph g as graph function bd->fname in a scope of its own: the values it defines
 * are forgotten after; the outer tensors it reads become parameters (bd->capv). */
static rx_status import_body(imp *I, const Onnx__NodeProto *n, const Onnx__GraphProto *g,
                             body *bd) {
  const char *caps[CF_MAXCAP];
  int nc = captures(g, caps, 0, CF_MAXCAP);
  if (nc < 0) return node_err(I, n, "a subgraph reads over %d outer values", CF_MAXCAP);
  rx_var *outer[CF_MAXCAP];
  for (int k = 0; k < nc; k++) {
    val *v = get(I, caps[k]);
    if (!v || v->kind == V_FAILED)
      return node_err(I, n, "the subgraph reads '%s', which is not defined", caps[k]);
    outer[k] = v->kind == V_TENSOR ? v->var : NULL;
  }
  int mark = I->nvals;
  for (int k = 0; k < nc; k++) /* shape values and constants are seen as they are */
    if (!outer[k]) {
      val copy = *get(I, caps[k]);
      copy.tvar = NULL; /* its tensor belongs to the outer function */
      *def(I, caps[k]) = copy;
    }
  rx_builder *ob = I->b;
  I->b = rx_builder_new(I->m, bd->fname);
  bd->ncaps = 0;
  rx_status s = body_fill(I, n, g, bd, caps, nc, outer);
  if (I->b) rx_builder_free(I->b);
  I->b = ob;
  I->nvals = mark;
  return s;
}

/* A free function name: prefix and a number not given before in this import (I->ncf) nor used;
 * suffixes b, e and t are free too. */
static void cf_name(imp *I, const char *prefix, char *out, size_t size) {
  for (int k = I->ncf++;; k = I->ncf++) {
    char t[64], e[64], b2[64];
    snprintf(out, size, "%s%d", prefix, k);
    snprintf(t, sizeof t, "%sb", out);
    snprintf(e, sizeof e, "%se", out);
    snprintf(b2, sizeof b2, "%st", out);
    if (!rx_module_graph_fn(I->m, out) && !rx_module_graph_fn(I->m, t) &&
        !rx_module_graph_fn(I->m, e) && !rx_module_graph_fn(I->m, b2))
      return;
  }
}

static void put_sinfo(rx_strbuf *sb, const rx_sinfo *si) {
  char *s = rx_sinfo_to_string(si);
  rx_strbuf_printf(sb, "%s", s);
  rx_free(s);
}

static void put_expr(rx_strbuf *sb, const rx_expr *e) {
  char *s = rx_sym_to_string(e);
  rx_strbuf_printf(sb, "%s", s);
  rx_free(s);
}

/* the driver's parameters for the outer tensors a body reads: ", PFX0: SINFO, ..." */
static void put_caps(rx_strbuf *sb, const char *pfx, const body *bd) {
  for (int k = 0; k < bd->ncaps; k++) {
    rx_strbuf_printf(sb, ", %s%d: ", pfx, k);
    put_sinfo(sb, rx_var_sinfo(bd->capv[k]));
  }
}

/* the dims of si from dim `from` on, comma-separated (each after ", " when lead) */
static void put_dims(rx_strbuf *sb, const rx_sinfo *si, int from, bool lead) {
  for (int d = from; d < si->ndim; d++) {
    if (lead || d > from) rx_strbuf_printf(sb, ", ");
    put_expr(sb, si->shape[d]);
  }
}

static bool known_tensor(const rx_sinfo *si) {
  return si && si->kind == RX_SINFO_TENSOR && si->shape && si->ndim >= 0;
}

/* Parses the driver's text; a failure is a bug of this file, reported at the node. */
static rx_status parse_driver(imp *I, const Onnx__NodeProto *n, rx_strbuf *sb) {
  char *text = rx_strbuf_take(sb);
  rx_status s = rx_module_parse(I->m, "<onnx control flow>", text, strlen(text), NULL);
  free(text);
  return at_node(I, n, s);
}

/* The driver's condition prelude: its tensor parameter c (of struct info si) as the symbol sym (0
 * or 1), read back from the device. */
static void put_cond(rx_strbuf *sb, const char *c, const rx_sinfo *si, const char *sym) {
  bool scalar = si->ndim == 0; /* read as it is; else made [1] first (a copy: a launch) */
  rx_strbuf_printf(sb, "  cb = cast(%s, dtype=i64)\n%s  cs = tensor_to_shape(%s)\n", c,
                   scalar ? "" : "  cr = reshape(cb, [1])\n", scalar ? "cb" : "cr");
  rx_strbuf_printf(sb, "  cm = match_cast(cs, Shape([%s]))\n", sym);
}

/* Calls driver fname from main with args; defines n's outputs from the tuple result (those of
 * rank-only struct info matched to fresh dims). inplace: the driver writes in place. */
static rx_status call_driver(imp *I, const Onnx__NodeProto *n, const char *fname,
                             rx_node *const *args, int nargs, const rx_sinfo *ret, bool inplace) {
  rx_var *tup;
  /* a driver whose scan outputs are written in place is impure to the verifier (the buffers are
   * its own): called between dataflow blocks */
  if (inplace) RX_RETURN_IF_ERROR(at_node(I, n, rx_builder_end_dataflow(I->b)));
  RX_RETURN_IF_ERROR(at_node(I, n, rx_emit_call_graph(I->b, fname, args, nargs, ret, NULL, &tup)));
  if (inplace) RX_RETURN_IF_ERROR(at_node(I, n, rx_builder_begin_dataflow(I->b)));
  for (size_t i = 0; i < n->n_output && (int)i < ret->nfields; i++) {
    if (!n->output[i] || !n->output[i][0]) continue;
    rx_var *v;
    RX_RETURN_IF_ERROR(
        at_node(I, n, rx_emit_get_item(I->b, rx_arg_var(I->b, tup), (int)i, NULL, &v)));
    const rx_sinfo *si = ret->fields[i];
    if (si->kind == RX_SINFO_TENSOR && !si->shape && si->ndim >= 0) {
      const rx_expr *dims[SYM_MAX];
      if (si->ndim > SYM_MAX) return node_err(I, n, "output %zu: rank over %d", i, SYM_MAX);
      for (int d = 0; d < si->ndim; d++) dims[d] = fresh_dim(I);
      if (!match_cast_to(I, v, si->dtype, si->ndim, dims, &v))
        return node_err(I, n, "output %zu: cannot bind its shape", i);
    }
    def_named(I, n->output[i], v);
  }
  return NULL;
}

static const Onnx__GraphProto *graph_attr(const Onnx__NodeProto *n, const char *name) {
  const Onnx__AttributeProto *a = onnx_attr(n, name);
  return a ? a->g : NULL;
}

/* the struct info of both branches' output: the same, or a tensor of the same dtype and rank
 * with its dims bound when the program runs; NULL when they differ more */
static const rx_sinfo *join_branches(imp *I, const rx_sinfo *a, const rx_sinfo *b) {
  char *sa = rx_sinfo_to_string(a), *sb = rx_sinfo_to_string(b);
  bool same = !strcmp(sa, sb);
  rx_free(sa);
  rx_free(sb);
  if (same) return a;
  if (a->kind == RX_SINFO_TENSOR && b->kind == RX_SINFO_TENSOR && a->dtype == b->dtype &&
      a->ndim == b->ndim && a->ndim >= 0)
    return rx_sinfo_tensor(I->m, a->dtype, a->ndim, NULL);
  return NULL;
}

static void put_call(rx_strbuf *sb, const char *fn, const char *first, const char *pfx, int n) {
  rx_strbuf_printf(sb, "%s(%s", fn, first);
  for (int k = 0; k < n; k++) rx_strbuf_printf(sb, "%s%s%d", k || first[0] ? ", " : "", pfx, k);
  rx_strbuf_printf(sb, ")");
}

/* If of a condition known at import (a shape check of an export): the branch taken, its nodes
 * in the current function, its outputs the node's */
static rx_status inline_branch(imp *I, const Onnx__NodeProto *n, const Onnx__GraphProto *g) {
  for (size_t i = 0; i < g->n_initializer; i++)
    if (!onnx_is_weight(g->initializer[i], false))
      RX_RETURN_IF_ERROR(def_constant(I, n, g->initializer[i]->name, g->initializer[i]));
  for (size_t i = 0; i < g->n_node; i++) RX_RETURN_IF_ERROR(do_node(I, g->node[i]));
  for (size_t i = 0; i < n->n_output; i++) {
    val *v = get(I, g->output[i]->name);
    if (!v) return node_err(I, n, "branch output '%s' is not defined", g->output[i]->name);
    if (!n->output[i] || !n->output[i][0]) continue;
    val copy = *v;
    copy.name = n->output[i];
    *def(I, n->output[i]) = copy;
  }
  return NULL;
}

/* If: the branches as functions, the driver `if` on the condition tensor */
static rx_status do_if(imp *I, const Onnx__NodeProto *n, const char *rop) {
  (void)rop;
  const Onnx__GraphProto *gt = graph_attr(n, "then_branch"), *ge = graph_attr(n, "else_branch");
  if (!gt || !ge) return node_err(I, n, "attributes then_branch and else_branch are required");
  if (gt->n_input || ge->n_input) return node_err(I, n, "a branch with inputs");
  if (gt->n_output != ge->n_output || gt->n_output != n->n_output || !n->n_output ||
      n->n_output > CF_MAXIO)
    return node_err(I, n, "the branches must give the node's 1 to %d outputs", CF_MAXIO);
  val *cv = input(n, 0) ? get(I, input(n, 0)) : NULL;
  if (cv && cv->kind == V_SYM && cv->slen == 1 && cv->s[0]->kind == RX_EXPR_CONST)
    return inline_branch(I, n, cv->s[0]->value ? gt : ge);
  rx_node *c;
  RX_RETURN_IF_ERROR(arg(I, n, input(n, 0), &c));
  if (c->sinfo->kind != RX_SINFO_TENSOR || c->sinfo->dtype != RX_DTYPE_BOOL)
    return node_err(I, n, "input 0 (cond) must be a bool tensor");
  char F[48], tn[64], en[64];
  cf_name(I, "onnxif", F, sizeof F);
  snprintf(tn, sizeof tn, "%st", F);
  snprintf(en, sizeof en, "%se", F);
  body bt = {.fname = tn}, be = {.fname = en};
  RX_RETURN_IF_ERROR(import_body(I, n, gt, &bt));
  RX_RETURN_IF_ERROR(import_body(I, n, ge, &be));
  const rx_sinfo *f[CF_MAXIO];
  for (size_t i = 0; i < n->n_output; i++) {
    f[i] = join_branches(I, bt.ret->fields[i], be.ret->fields[i]);
    if (!f[i])
      return node_err(I, n, "output %zu: the branches give values of different types or ranks", i);
  }
  const rx_sinfo *ret = rx_sinfo_tuple(I->m, f, (int)n->n_output);
  rx_strbuf sb = {0};
  rx_strbuf_printf(&sb, "graph_fn %s(c: ", F);
  put_sinfo(&sb, c->sinfo);
  put_caps(&sb, "t", &bt);
  put_caps(&sb, "e", &be);
  rx_strbuf_printf(&sb, ") -> ");
  put_sinfo(&sb, ret);
  rx_strbuf_printf(&sb, " {\n");
  char sym[64];
  snprintf(sym, sizeof sym, "%s_c", F);
  put_cond(&sb, "c", c->sinfo, sym);
  rx_strbuf_printf(&sb, "  r = if prim(bool, %s != 0) {\n    o = ", sym);
  put_call(&sb, tn, "", "t", bt.ncaps);
  rx_strbuf_printf(&sb, "\n    o\n  } else {\n    o2 = ");
  put_call(&sb, en, "", "e", be.ncaps);
  rx_strbuf_printf(&sb, "\n    o2\n  }\n  return r\n}\n");
  RX_RETURN_IF_ERROR(parse_driver(I, n, &sb));
  rx_node *a[1 + 2 * CF_MAXCAP];
  int na = 0;
  a[na++] = c;
  for (int k = 0; k < bt.ncaps; k++) a[na++] = rx_arg_var(I->b, bt.capv[k]);
  for (int k = 0; k < be.ncaps; k++) a[na++] = rx_arg_var(I->b, be.capv[k]);
  return call_driver(I, n, F, a, na, ret, false);
}

/* the driver's tuple of states st0.. (n of them) then the scan values sc0.. (k) */
static void put_tuple(rx_strbuf *sb, const char *st, int n, const char *sc, int k) {
  rx_strbuf_printf(sb, "(");
  for (int i = 0; i < n; i++) rx_strbuf_printf(sb, "%s%s%d", i ? ", " : "", st, i);
  for (int j = 0; j < k; j++) rx_strbuf_printf(sb, "%s%s%d", n + j ? ", " : "", sc, j);
  rx_strbuf_printf(sb, "%s)", n + k == 1 ? "," : "");
}

/* the carried values of the next step (the body's outputs first.. of struct info si), checked
 * to keep the struct info of the first step's (the VM checks the dims) */
static void put_carried(rx_strbuf *sb, const rx_sinfo *const *si, int n, int first) {
  for (int i = 0; i < n; i++) {
    rx_strbuf_printf(sb, "    n%d = match_cast(o.%d, ", i, first + i);
    put_sinfo(sb, si[i]);
    rx_strbuf_printf(sb, ")\n");
  }
}

/* "NAME_d<j>_<q>": dim q of tensor j of a row copy */
static void put_rdim(rx_strbuf *sb, const char *name, int j, int q) {
  rx_strbuf_printf(sb, "%s_d%d_%d", name, j, q);
}

/* The elements of tensor j of a row copy: "(NAME_d<j>_<from> * ..)", "1" when none */
static void put_relems(rx_strbuf *sb, const char *name, int j, int ndim, int from) {
  if (from >= ndim) rx_strbuf_printf(sb, "1");
  for (int q = from; q < ndim; q++) {
    rx_strbuf_printf(sb, "%s", q > from ? " * " : "(");
    put_rdim(sb, name, j, q);
  }
  if (from < ndim) rx_strbuf_printf(sb, ")");
}

/* "[row<j>, i0, ..]" (with_row) or "[i0, ..]" where i<q> is dim q's part of the flat element
 * number e */
static void put_rindex(rx_strbuf *sb, const char *name, int j, int ndim, bool with_row) {
  rx_strbuf_printf(sb, "[");
  if (with_row) rx_strbuf_printf(sb, "row%d", j);
  for (int q = 0; q < ndim; q++) {
    rx_strbuf_printf(sb, "%se // ", with_row || q ? ", " : "");
    put_relems(sb, name, j, ndim, q + 1);
    if (q) {
      rx_strbuf_printf(sb, " %% ");
      put_rdim(sb, name, j, q);
    }
  }
  rx_strbuf_printf(sb, "]");
}

/* The tensor program NAME that writes each step value v<j> (of si[j]'s dtype and rank) as row
 * row<j> of its accumulator y<j>, in place (write), or reads row row<j> of each scan input x<j>
 * into v<j> (!write): one launch a step for all of them, a thread per element. */
static void put_row_copy(rx_strbuf *sb, const char *name, bool write, const rx_sinfo *const *si,
                         int n) {
  rx_strbuf_printf(sb, "tensor_fn %s(", name);
  for (int pass = 0; pass < 2; pass++) /* the inputs, then the outputs */
    for (int j = 0; j < n; j++) {
      bool rows = (pass == 0) != write; /* the accumulator or scan input */
      rx_strbuf_printf(sb, "%s%s%s%d: %s[", pass || j ? ", " : "", pass ? "out " : "",
                       rows ? (write ? "y" : "x") : "v", j, rx_dtype_name(si[j]->dtype));
      if (rows) rx_strbuf_printf(sb, "%s_t%d%s", name, j, si[j]->ndim ? ", " : "");
      for (int q = 0; q < si[j]->ndim; q++) {
        if (q) rx_strbuf_printf(sb, ", ");
        put_rdim(sb, name, j, q);
      }
      rx_strbuf_printf(sb, "]");
    }
  for (int j = 0; j < n; j++) rx_strbuf_printf(sb, ", row%d: i64", j);
  rx_strbuf_printf(sb, ") {\n  for e in 0..");
  for (int j = 0; j < n - 1; j++) rx_strbuf_printf(sb, "max(");
  for (int j = 0; j < n; j++) {
    put_relems(sb, name, j, si[j]->ndim, 0);
    if (j) rx_strbuf_printf(sb, ")");
    if (j < n - 1) rx_strbuf_printf(sb, ", ");
  }
  rx_strbuf_printf(sb, " {\n");
  for (int j = 0; j < n; j++) {
    rx_strbuf_printf(sb, "    if e < ");
    put_relems(sb, name, j, si[j]->ndim, 0);
    rx_strbuf_printf(sb, " {\n      %s%d", write ? "y" : "v", j);
    put_rindex(sb, name, j, si[j]->ndim, write);
    rx_strbuf_printf(sb, " = %s%d", write ? "v" : "x", j);
    put_rindex(sb, name, j, si[j]->ndim, !write);
    rx_strbuf_printf(sb, "\n    }\n");
  }
  rx_strbuf_printf(sb, "  }\n}\n");
}

/* ", dims=[row0, ..])\n": the rows of step k, T - 1 - k where dir[j] (reversed) */
static void put_rows(rx_strbuf *sb, const rx_expr *T, const char *k, const int64_t *dir, int n) {
  rx_strbuf_printf(sb, ", dims=[");
  for (int j = 0; j < n; j++) {
    if (j) rx_strbuf_printf(sb, ", ");
    if (dir && dir[j]) {
      put_expr(sb, T);
      rx_strbuf_printf(sb, " - 1 - ");
    }
    rx_strbuf_printf(sb, "%s", k);
  }
  rx_strbuf_printf(sb, "])\n");
}

/* The write of step values v0.. into accumulators ACC0.. (n of them) in place by F's writer
 * <F>w, defining w0..; its dims=[..] follow (put_rows). */
static void put_write(rx_strbuf *sb, const char *F, const char *acc, int n, const char *ind) {
  rx_strbuf_printf(sb, "%s%s = call_tensor(%sw", ind, n == 1 ? "w0" : "wr", F);
  for (int j = 0; j < n; j++) rx_strbuf_printf(sb, ", v%d", j);
  rx_strbuf_printf(sb, ", inplace=%s", n == 1 ? "" : "(");
  for (int j = 0; j < n; j++) rx_strbuf_printf(sb, "%s%s%d", j ? ", " : "", acc, j);
  rx_strbuf_printf(sb, "%s", n == 1 ? "" : ")");
}

/* After put_write and its rows: w0.. from the tuple of several. */
static void put_write_items(rx_strbuf *sb, int n, const char *ind) {
  for (int j = 0; n > 1 && j < n; j++) rx_strbuf_printf(sb, "%sw%d = wr.%d\n", ind, j, j);
}

/* an int list attribute of n entries (default 0 each); false when present with another count */
static bool dir_list(const Onnx__NodeProto *n, const char *name, int cnt, int64_t *out) {
  const Onnx__AttributeProto *a = onnx_attr(n, name);
  for (int i = 0; i < cnt; i++) out[i] = a && (size_t)i < a->n_ints ? a->ints[i] : 0;
  return !a || a->n_ints == (size_t)cnt;
}

/* tensor a without (drop) or with (!drop) a leading dim of 1: Scan-8's batch of one */
static rx_status batch_one(imp *I, const Onnx__NodeProto *n, rx_node **a, bool drop) {
  const rx_sinfo *si = (*a)->sinfo;
  if (!known_tensor(si) || si->ndim > SYM_MAX - 1 ||
      (drop && (si->ndim < 1 || !rx_expr_is_const(si->shape[0], 1))))
    return node_err(I, n, "opset 8 Scan: only a batch of one is supported");
  const rx_expr *dims[SYM_MAX];
  int k = 0;
  if (!drop) dims[k++] = rx_sym_const(I->m, 1);
  for (int d = drop ? 1 : 0; d < si->ndim; d++) dims[k++] = si->shape[d];
  rx_var *r;
  return reshape_to(I, n, *a, dims, k, a, &r);
}

/* Scan: states and scan inputs along axis 0, forward or reversed, over their symbolic length */
static rx_status do_scan(imp *I, const Onnx__NodeProto *n, const char *rop) {
  (void)rop;
  const Onnx__GraphProto *g = graph_attr(n, "body");
  bool v8 = I->opset < 9;
  int first = v8 ? 1 : 0, M = (int)onnx_attr_i(n, "num_scan_inputs", 0);
  int nin = (int)n->n_input - first, N = nin - M, K = (int)n->n_output - N;
  if (!g || M < 1 || N < 0 || K < 0 || nin > CF_MAXIO || (int)g->n_input != nin ||
      (int)g->n_output != N + K)
    return node_err(I, n, "body, num_scan_inputs and the inputs and outputs do not agree");
  if (v8 && input(n, 0)) return node_err(I, n, "input 0 (sequence_lens) is not supported");
  int64_t idir[CF_MAXIO], odir[CF_MAXIO], ax[CF_MAXIO];
  if (!dir_list(n, v8 ? "directions" : "scan_input_directions", M, idir) ||
      !dir_list(n, "scan_output_directions", K, odir))
    return node_err(I, n, "a directions attribute of the wrong length");
  if (!dir_list(n, "scan_input_axes", M, ax)) return node_err(I, n, "bad scan_input_axes");
  for (int j = 0; j < M; j++)
    if (ax[j]) return node_err(I, n, "attribute scan_input_axes: only axis 0 is supported");
  if (!dir_list(n, "scan_output_axes", K, ax)) return node_err(I, n, "bad scan_output_axes");
  for (int j = 0; j < K; j++)
    if (ax[j]) return node_err(I, n, "attribute scan_output_axes: only axis 0 is supported");
  rx_node *a[1 + CF_MAXIO + CF_MAXCAP];
  const rx_sinfo *in[CF_MAXIO];
  a[0] = NULL; /* the driver's arguments: a[1..] */
  for (int i = 0; i < nin; i++) {
    RX_RETURN_IF_ERROR(arg(I, n, input(n, (size_t)(first + i)), &a[1 + i]));
    if (v8) RX_RETURN_IF_ERROR(batch_one(I, n, &a[1 + i], true));
    const rx_sinfo *si = a[1 + i]->sinfo;
    if (!known_tensor(si) || (i >= N && si->ndim < 1))
      return node_err(I, n, "input %d must be a tensor of known shape", first + i);
    in[i] = i < N ? si : rx_sinfo_tensor(I->m, si->dtype, si->ndim - 1, si->shape + 1);
  }
  const rx_expr *T = a[1 + N]->sinfo->shape[0];
  char F[48], bn[64], ks[64];
  cf_name(I, "onnxscan", F, sizeof F);
  snprintf(bn, sizeof bn, "%sb", F);
  snprintf(ks, sizeof ks, "%s_k", F);
  body bd = {.fname = bn, .in = in};
  RX_RETURN_IF_ERROR(import_body(I, n, g, &bd));
  const rx_sinfo *f[CF_MAXIO];
  for (int i = 0; i < N; i++) f[i] = in[i];
  for (int j = 0; j < K; j++) {
    const rx_sinfo *so = bd.ret->fields[N + j];
    if (!known_tensor(so) || so->ndim > SYM_MAX - 1)
      return node_err(I, n, "scan output %d: its shape must be known", j);
    const rx_expr *dims[SYM_MAX];
    dims[0] = T;
    for (int d = 0; d < so->ndim; d++) dims[1 + d] = so->shape[d];
    f[N + j] = rx_sinfo_tensor(I->m, so->dtype, so->ndim + 1, dims);
  }
  const rx_sinfo *ret = rx_sinfo_tuple(I->m, f, N + K);
  rx_strbuf sb = {0};
  char st[64], rw[80];
  snprintf(st, sizeof st, "%st", F);
  snprintf(rw, sizeof rw, "%sr", F);
  put_row_copy(&sb, rw, false, in + N, M);
  snprintf(rw, sizeof rw, "%sw", F);
  if (K) put_row_copy(&sb, rw, true, bd.ret->fields + N, K);
  /* the entry: the scan outputs' accumulators, then the steps from 0 */
  rx_strbuf_printf(&sb, "graph_fn %s(", F);
  for (int i = 0; i < nin; i++) {
    rx_strbuf_printf(&sb, "%s%s%d: ", i ? ", " : "", i < N ? "s" : "x", i < N ? i : i - N);
    put_sinfo(&sb, a[1 + i]->sinfo);
  }
  put_caps(&sb, "c", &bd);
  rx_strbuf_printf(&sb, ") -> ");
  put_sinfo(&sb, ret);
  rx_strbuf_printf(&sb, " {\n");
  for (int j = 0; j < K; j++) {
    rx_strbuf_printf(&sb, "  y%d = zeros([", j);
    put_dims(&sb, f[N + j], 0, false);
    rx_strbuf_printf(&sb, "], dtype=%s)\n", rx_dtype_name(f[N + j]->dtype));
  }
  rx_strbuf_printf(&sb, "  o = %s([0]", st);
  for (int i = 0; i < nin; i++)
    rx_strbuf_printf(&sb, ", %s%d", i < N ? "s" : "x", i < N ? i : i - N);
  for (int j = 0; j < K; j++) rx_strbuf_printf(&sb, ", y%d", j);
  for (int k = 0; k < bd.ncaps; k++) rx_strbuf_printf(&sb, ", c%d", k);
  rx_strbuf_printf(&sb, ")\n  return o\n}\n");
  /* the step k: its rows of the scan inputs (row T - 1 - k reversed), the body, its scan values
   * written likewise, then the steps after it: a tail call */
  rx_strbuf_printf(&sb, "graph_fn %s(i: Shape([%s])", st, ks);
  for (int i = 0; i < nin; i++) {
    rx_strbuf_printf(&sb, ", %s%d: ", i < N ? "s" : "x", i < N ? i : i - N);
    put_sinfo(&sb, a[1 + i]->sinfo);
  }
  for (int j = 0; j < K; j++) {
    rx_strbuf_printf(&sb, ", y%d: ", j);
    put_sinfo(&sb, f[N + j]);
  }
  put_caps(&sb, "c", &bd);
  rx_strbuf_printf(&sb, ") -> ");
  put_sinfo(&sb, ret);
  rx_strbuf_printf(&sb, " {\n  r = if prim(bool, %s < ", ks);
  put_expr(&sb, T);
  rx_strbuf_printf(&sb, ") {\n");
  rx_strbuf_printf(&sb, "    %s = call_tensor(%sr", M == 1 ? "e0" : "rd", F);
  for (int j = 0; j < M; j++) rx_strbuf_printf(&sb, ", x%d", j);
  rx_strbuf_printf(&sb, ", out=");
  put_sinfo(&sb, M == 1 ? in[N] : rx_sinfo_tuple(I->m, in + N, M));
  put_rows(&sb, T, ks, idir, M);
  for (int j = 0; M > 1 && j < M; j++) rx_strbuf_printf(&sb, "    e%d = rd.%d\n", j, j);
  rx_strbuf_printf(&sb, "    o = %s(", bn);
  for (int i = 0; i < nin; i++)
    rx_strbuf_printf(&sb, "%s%s%d", i ? ", " : "", i < N ? "s" : "e", i < N ? i : i - N);
  for (int k = 0; k < bd.ncaps; k++) rx_strbuf_printf(&sb, "%sc%d", nin + k ? ", " : "", k);
  rx_strbuf_printf(&sb, ")\n");
  put_carried(&sb, in, N, 0);
  for (int j = 0; j < K; j++) rx_strbuf_printf(&sb, "    v%d = o.%d\n", j, N + j);
  if (K) {
    put_write(&sb, F, "y", K, "    ");
    put_rows(&sb, T, ks, odir, K);
    put_write_items(&sb, K, "    ");
  }
  rx_strbuf_printf(&sb, "    rest = %s([%s + 1]", st, ks);
  for (int i = 0; i < N; i++) rx_strbuf_printf(&sb, ", n%d", i);
  for (int j = 0; j < M; j++) rx_strbuf_printf(&sb, ", x%d", j);
  for (int j = 0; j < K; j++) rx_strbuf_printf(&sb, ", w%d", j);
  for (int k = 0; k < bd.ncaps; k++) rx_strbuf_printf(&sb, ", c%d", k);
  rx_strbuf_printf(&sb, ")\n    rest\n  } else {\n    res2 = ");
  put_tuple(&sb, "s", N, "y", K);
  rx_strbuf_printf(&sb, "\n    res2\n  }\n  return r\n}\n");
  RX_RETURN_IF_ERROR(parse_driver(I, n, &sb));
  int na = 1 + nin;
  for (int k = 0; k < bd.ncaps; k++) a[na++] = rx_arg_var(I->b, bd.capv[k]);
  RX_RETURN_IF_ERROR(call_driver(I, n, F, a + 1, na - 1, ret, true));
  for (size_t i = 0; v8 && i < n->n_output; i++) { /* the batch of one back in front */
    if (!n->output[i] || !n->output[i][0]) continue;
    rx_node *o = rx_arg_var(I->b, get(I, n->output[i])->var);
    RX_RETURN_IF_ERROR(batch_one(I, n, &o, false));
    def_named(I, n->output[i], o->var);
  }
  return NULL;
}

/* the trip count when Loop has none (the condition ends it): large, and k + 1 stays in range */
#define LOOP_UNBOUNDED ((int64_t)1 << 62)
/* the rows a Loop's scan output accumulator starts with (fewer when M is smaller); doubled when
 * full, so the copies stay linear in the steps */
#define LOOP_FIRST_ROWS 16

/* What Loop's driver text is made of (do_loop). */
typedef struct loop_txt {
  const char *F, *bn, *ks, *cs, *ms; /* the driver, the body, the symbols k, cond and M */
  char st[64];                       /* the step function */
  int N, K;                          /* carried values, scan outputs */
  bool always;                       /* the condition is true at every step: never read back */
  const rx_sinfo *const *in;         /* the body's inputs: iteration number, cond, carried */
  const body *bd;
  const rx_sinfo *ret;          /* the driver's: carried values, then the scan outputs */
  const rx_sinfo *s0[CF_MAXIO]; /* a step's value of each scan output at step 0 */
  const rx_sinfo *sk[CF_MAXIO]; /* and at step k */
} loop_txt;

/* ", c: COND, s0: .., y0: DT[cap, elems].., c0: .." of the entry (!step: no accumulators) and
 * the step, then the result */
static void put_loop_params(rx_strbuf *sb, const loop_txt *L, bool step) {
  put_sinfo(sb, L->in[1]);
  for (int i = 0; i < L->N; i++) {
    rx_strbuf_printf(sb, ", s%d: ", i);
    put_sinfo(sb, L->in[2 + i]);
  }
  for (int j = 0; step && j < L->K; j++) {
    rx_strbuf_printf(sb, ", y%d: %s[%s_cap", j, rx_dtype_name(L->sk[j]->dtype), L->F);
    put_dims(sb, L->sk[j], 0, true);
    rx_strbuf_printf(sb, "]");
  }
  put_caps(sb, "c", L->bd);
  rx_strbuf_printf(sb, ") -> ");
  put_sinfo(sb, L->ret);
  rx_strbuf_printf(sb, " {\n");
}

/* the step's arguments after its step number: ", m, COND, CARRIED.., ACC.., c0.." */
static void put_step_args(rx_strbuf *sb, const loop_txt *L, const char *cond, const char *carried,
                          const char *acc) {
  rx_strbuf_printf(sb, ", m, %s", cond);
  for (int i = 0; i < L->N; i++) rx_strbuf_printf(sb, ", %s%d", carried, i);
  for (int j = 0; j < L->K; j++) rx_strbuf_printf(sb, ", %s%d", acc, j);
  for (int k = 0; k < L->bd->ncaps; k++) rx_strbuf_printf(sb, ", c%d", k);
  rx_strbuf_printf(sb, ")\n");
}

/* The entry: the first step when 0 < M and cond, with accumulators of min(M, 16) rows; else
 * the carried values as given and empty scan outputs. */
static void put_loop_entry(rx_strbuf *sb, const loop_txt *L) {
  rx_strbuf_printf(sb, "graph_fn %s(m: Shape([%s]), c: ", L->F, L->ms);
  put_loop_params(sb, L, false);
  if (!L->always) put_cond(sb, "c", L->in[1], L->cs);
  rx_strbuf_printf(sb, "  r = if prim(bool, 0 < %s%s%s) {\n", L->ms, L->always ? "" : " && ",
                   L->always ? "" : L->cs);
  if (L->K) /* bound on the host: M may be past what a kernel's int32 takes */
    rx_strbuf_printf(sb, "    yr = [min(%s, %d)]\n    yc = match_cast(yr, Shape([%s_f]))\n", L->ms,
                     LOOP_FIRST_ROWS, L->F);
  for (int j = 0; j < L->K; j++) {
    rx_strbuf_printf(sb, "    y%d = zeros([%s_f", j, L->F);
    put_dims(sb, L->s0[j], 0, true);
    rx_strbuf_printf(sb, "], dtype=%s)\n", rx_dtype_name(L->s0[j]->dtype));
  }
  rx_strbuf_printf(sb, "    o = %s([0]", L->st);
  put_step_args(sb, L, "c", "s", "y");
  rx_strbuf_printf(sb, "    o\n  } else {\n");
  for (int j = 0; j < L->K; j++) { /* no step: empty (dims of the iteration number 0) */
    rx_strbuf_printf(sb, "    z%d = zeros([0", j);
    put_dims(sb, L->s0[j], 0, true);
    rx_strbuf_printf(sb, "], dtype=%s)\n", rx_dtype_name(L->s0[j]->dtype));
  }
  rx_strbuf_printf(sb, "    res2 = ");
  put_tuple(sb, "s", L->N, "z", L->K);
  rx_strbuf_printf(sb, "\n    res2\n  }\n  return r\n}\n");
}

/* The step k: the body; its scan values written at row k of the accumulators (doubled first
 * when full); then, while k + 1 < M and the body's condition, the next step as a tail call,
 * else the carried values and the accumulators' first k + 1 rows in the scan outputs' shapes. */
static void put_loop_step(rx_strbuf *sb, const loop_txt *L) {
  const char *F = L->F, *ks = L->ks;
  rx_strbuf_printf(sb, "graph_fn %s(i: Shape([%s]), m: Shape([%s]), c: ", L->st, ks, L->ms);
  put_loop_params(sb, L, true);
  rx_strbuf_printf(sb, "  o = %s(i, c", L->bn);
  for (int i = 0; i < L->N; i++) rx_strbuf_printf(sb, ", s%d", i);
  for (int k = 0; k < L->bd->ncaps; k++) rx_strbuf_printf(sb, ", c%d", k);
  rx_strbuf_printf(sb, ")\n  nc = match_cast(o.0, ");
  put_sinfo(sb, L->in[1]);
  rx_strbuf_printf(sb, ")\n");
  put_carried(sb, L->in + 2, L->N, 1);
  for (int j = 0; j < L->K; j++) {
    const rx_sinfo *sk = L->sk[j];
    const char *dt = rx_dtype_name(sk->dtype);
    rx_strbuf_printf(sb, "  v%d = match_cast(o.%d, ", j, 1 + L->N + j);
    put_sinfo(sb, sk);
    rx_strbuf_printf(sb, ")\n  g%d = if prim(bool, %s < %s_cap) {\n    y%d\n  } else {\n", j, ks, F,
                     j);
    rx_strbuf_printf(sb, "    z%d = zeros([%s_cap", j, F);
    put_dims(sb, sk, 0, true);
    rx_strbuf_printf(sb, "], dtype=%s)\n    q%d = concat((y%d, z%d), axis=0)\n    q%d\n  }\n", dt,
                     j, j, j, j);
    rx_strbuf_printf(sb, "  h%d = match_cast(g%d, %s[%s_g", j, j, dt, F);
    put_dims(sb, sk, 0, true);
    rx_strbuf_printf(sb, "])\n");
  }
  if (L->K) {
    put_write(sb, F, "h", L->K, "  ");
    put_rows(sb, NULL, ks, NULL, L->K);
    put_write_items(sb, L->K, "  ");
  }
  if (!L->always) put_cond(sb, "nc", L->in[1], L->cs);
  rx_strbuf_printf(sb, "  r = if prim(bool, %s + 1 < %s%s%s) {\n", ks, L->ms,
                   L->always ? "" : " && ", L->always ? "" : L->cs);
  rx_strbuf_printf(sb, "    rest = %s([%s + 1]", L->st, ks);
  put_step_args(sb, L, "nc", "n", "w");
  rx_strbuf_printf(sb, "    rest\n  } else {\n");
  for (int j = 0; j < L->K; j++) {
    rx_strbuf_printf(sb,
                     "    t%d = strided_slice(w%d, axes=[0], begin=[0], end=[%s + 1])\n"
                     "    u%d = match_cast(t%d, %s[%s + 1",
                     j, j, ks, j, j, rx_dtype_name(L->sk[j]->dtype), ks);
    put_dims(sb, L->sk[j], 0, true);
    rx_strbuf_printf(sb, "])\n");
  }
  rx_strbuf_printf(sb, "    res2 = ");
  put_tuple(sb, "n", L->N, "u", L->K);
  rx_strbuf_printf(sb, "\n    res2\n  }\n  return r\n}\n");
}

/* Is Loop n's condition true at every step: no input or a constant true, and the body gives
 * its condition input back (as exporters write a loop of M steps)? Then the steps do not read it
 * back from the device. */
static bool always_true(imp *I, const Onnx__NodeProto *n, const Onnx__GraphProto *g) {
  val *cv = input(n, 1) ? get(I, input(n, 1)) : NULL;
  if (input(n, 1) && !(cv && cv->kind == V_SYM && cv->slen == 1 &&
                       cv->s[0]->kind == RX_EXPR_CONST && cv->s[0]->value))
    return false;
  const char *cin = g->input[1]->name, *cout = g->output[0]->name;
  if (!strcmp(cin, cout)) return true;
  for (size_t i = 0; i < g->n_node; i++) {
    const Onnx__NodeProto *nn = g->node[i];
    if (nn->n_output && nn->output[0] && !strcmp(nn->output[0], cout))
      return nn->op_type && !strcmp(nn->op_type, "Identity") && input(nn, 0) &&
             !strcmp(input(nn, 0), cin);
  }
  return false;
}

/* Loop: the body while k < M and cond, its carried values threaded through the recursion; scan
 * outputs of a length known when the program runs (bound to fresh dims after the call) */
static rx_status do_loop(imp *I, const Onnx__NodeProto *n, const char *rop) {
  (void)rop;
  const Onnx__GraphProto *g = graph_attr(n, "body");
  int N = (int)n->n_input - 2, K = g ? (int)g->n_output - 1 - N : -1;
  if (!g || N < 0 || K < 0 || N > CF_MAXIO || (int)g->n_input != N + 2 || (int)n->n_output != N + K)
    return node_err(I, n, "the body and the inputs and outputs do not agree");
  rx_node *a[3 + CF_MAXIO + CF_MAXCAP];
  const rx_sinfo *in[2 + CF_MAXIO];
  const rx_expr *zero = rx_sym_const(I->m, 0), *M = rx_sym_const(I->m, LOOP_UNBOUNDED);
  if (input(n, 0)) {
    val *mv;
    RX_RETURN_IF_ERROR(sym_input(I, n, 0, &mv));
    if (mv->slen != 1) return node_err(I, n, "input 0 (M) must be one integer");
    M = mv->s[0];
  }
  a[0] = rx_arg_shape(I->b, &zero, 1);
  a[1] = rx_arg_shape(I->b, &M, 1);
  if (input(n, 1)) {
    RX_RETURN_IF_ERROR(arg(I, n, input(n, 1), &a[2]));
  } else { /* no condition: true */
    rx_node *fa[2] = {rx_arg_shape(I->b, NULL, 0),
                      rx_arg_prim(I->b, RX_DTYPE_BOOL, rx_sym_const(I->m, 1))};
    const rx_attr *at = rx_attr_dtype(I->m, "dtype", RX_DTYPE_BOOL);
    rx_var *t;
    RX_RETURN_IF_ERROR(emit(I, n, "full", fa, 2, &at, 1, &t));
    a[2] = rx_arg_var(I->b, t);
  }
  if (a[2]->sinfo->kind != RX_SINFO_TENSOR || a[2]->sinfo->dtype != RX_DTYPE_BOOL)
    return node_err(I, n, "input 1 (cond) must be a bool tensor");
  in[0] = NULL;
  in[1] = a[2]->sinfo;
  for (int i = 0; i < N; i++) {
    RX_RETURN_IF_ERROR(arg(I, n, input(n, (size_t)(2 + i)), &a[3 + i]));
    if (!known_tensor(a[3 + i]->sinfo))
      return node_err(I, n, "input %d must be a tensor of known shape", 2 + i);
    in[2 + i] = a[3 + i]->sinfo;
  }
  char F[48], bn[64], ks[64], cs[64], ms[64], is[80];
  cf_name(I, "onnxloop", F, sizeof F);
  snprintf(bn, sizeof bn, "%sb", F);
  snprintf(ks, sizeof ks, "%s_k", F);
  snprintf(cs, sizeof cs, "%s_c", F);
  snprintf(ms, sizeof ms, "%s_m", F);
  snprintf(is, sizeof is, "%s_i", bn);
  body bd = {.fname = bn, .in = in, .iter = rx_sym_var(I->m, is)};
  RX_RETURN_IF_ERROR(import_body(I, n, g, &bd));
  const rx_sinfo *f[CF_MAXIO];
  for (int i = 0; i < N; i++) f[i] = in[2 + i];
  for (int j = 0; j < K; j++) {
    const rx_sinfo *so = bd.ret->fields[1 + N + j];
    if (!known_tensor(so)) return node_err(I, n, "scan output %d: its shape must be known", j);
    f[N + j] = rx_sinfo_tensor(I->m, so->dtype, so->ndim + 1, NULL);
  }
  loop_txt L = {.F = F,
                .bn = bn,
                .ks = ks,
                .cs = cs,
                .ms = ms,
                .N = N,
                .K = K,
                .in = in,
                .bd = &bd,
                .ret = rx_sinfo_tuple(I->m, f, N + K),
                .always = always_true(I, n, g)};
  snprintf(L.st, sizeof L.st, "%st", F);
  rx_strbuf sb = {0};
  for (int j = 0; j < K; j++) {
    const rx_sinfo *so = bd.ret->fields[1 + N + j];
    const rx_expr *d0[SYM_MAX], *dk[SYM_MAX];
    if (so->ndim > SYM_MAX - 1)
      return node_err(I, n, "scan output %d: rank over %d", j, SYM_MAX - 1);
    for (int d = 0; d < so->ndim; d++) { /* a dim of the iteration number: step 0's, checked */
      char an[96];
      snprintf(an, sizeof an, "%s_a%d_%d", F, j, d);
      d0[d] = rx_expr_subst(I->m->ctx, so->shape[d], &bd.iter, &zero, 1);
      dk[d] = rx_expr_uses_var(so->shape[d], bd.iter) ? rx_sym_var(I->m, an) : so->shape[d];
    }
    L.s0[j] = rx_sinfo_tensor(I->m, so->dtype, so->ndim, d0);
    L.sk[j] = rx_sinfo_tensor(I->m, so->dtype, so->ndim, dk);
  }
  char wn[80];
  snprintf(wn, sizeof wn, "%sw", F);
  if (K) put_row_copy(&sb, wn, true, bd.ret->fields + 1 + N, K);
  put_loop_entry(&sb, &L);
  put_loop_step(&sb, &L);
  RX_RETURN_IF_ERROR(parse_driver(I, n, &sb));
  a[0] = a[1]; /* the entry takes no step number */
  a[1] = a[2];
  for (int i = 0; i < N; i++) a[2 + i] = a[3 + i];
  int na = 2 + N;
  for (int k = 0; k < bd.ncaps; k++) a[na++] = rx_arg_var(I->b, bd.capv[k]);
  return call_driver(I, n, F, a, na, L.ret, true);
}

/* RNN, GRU, LSTM: import_rnn.c, given the inputs as arguments */
static rx_status do_rnn(imp *I, const Onnx__NodeProto *n, const char *rop) {
  (void)rop;
  onnx_rnn_in in = {0};
  rx_node **slot[8] = {&in.x, &in.w, &in.r, &in.b, &in.seq, &in.h0, &in.c0, &in.p};
  for (size_t i = 0; i < 8; i++)
    if (input(n, i)) RX_RETURN_IF_ERROR(arg(I, n, input(n, i), slot[i]));
  if (!in.x || !in.w || !in.r) return node_err(I, n, "inputs X, W and R are required");
  in.xs = in.x->sinfo; /* a shape value made a tensor too */
  in.ws = in.w->sinfo;
  in.rs = in.r->sinfo;
  in.seqs = in.seq ? in.seq->sinfo : NULL;
  rx_var *out[3];
  RX_RETURN_IF_ERROR(at_node(I, n, onnx_rnn_import(I->m, I->b, n, &in, out)));
  for (size_t i = 0; i < n->n_output && i < 3; i++)
    if (n->output[i] && n->output[i][0]) {
      if (!out[i]) return node_err(I, n, "output %zu is not defined for %s", i, n->op_type);
      def_named(I, n->output[i], out[i]);
    }
  return NULL;
}

typedef rx_status (*onnx_handler)(imp *I, const Onnx__NodeProto *n, const char *rop);
typedef struct onnx_op {
  const char *type;
  onnx_handler handler;
  const char *rop;
  int first, last;
  const char *note;
} onnx_op;

// clang-format off
static const onnx_op onnx_ops[] = {
    {"Abs", do_unary, "abs", 1, 0, NULL},
    {"Acos", do_unary, "acos", 7, 0, NULL},
    {"Acosh", do_formula, "acosh", 9, 0, NULL},
    {"Add", do_binary, "add", 1, 0, NULL},
    {"And", do_binary, "logical_and", 1, 0, NULL},
    {"ArgMax", do_arg_extreme, "argmax", 1, 0, NULL},
    {"ArgMin", do_arg_extreme, "argmin", 1, 0, NULL},
    {"Asin", do_unary, "asin", 7, 0, NULL},
    {"Asinh", do_formula, "asinh", 9, 0, NULL},
    {"Atan", do_unary, "atan", 7, 0, NULL},
    {"Atanh", do_formula, "atanh", 9, 0, NULL},
    {"AveragePool", do_pool, NULL, 1, 0, "1-D, 2-D and 3-D; ceil_mode and SAME with a stride: constant spatial dims"},
    {"BatchNormalization", do_batch_norm, NULL, 1, 0, "inference; training_mode=1 with the running mean and variance"},
    {"BitShift", do_bitshift, NULL, 11, 0, "unsigned integers"},
    {"BlackmanWindow", do_window, "blackman", 17, 0, NULL},
    {"CastLike", do_cast_like, NULL, 15, 0, NULL},
    {"Cast", do_cast, NULL, 6, 0, NULL},
    {"Celu", do_act, "celu", 12, 0, NULL},
    {"Ceil", do_unary, "ceil", 1, 0, NULL},
    {"Clip", do_clip, NULL, 1, 0, NULL},
    {"Compress", do_compress, NULL, 11, 0, "the count bound at run time"},
    {"Concat", do_concat, NULL, 1, 0, NULL},
    {"Constant", do_constant, NULL, 1, 0, NULL},
    {"ConstantOfShape", do_reshape_expand, NULL, 9, 0, NULL},
    {"Conv", do_conv, NULL, 1, 0, "1-D, 2-D and 3-D; SAME with a stride: constant spatial dims"},
    {"ConvInteger", do_integer_op, "conv", 10, 0, "as Conv; i32 accumulation"},
    {"ConvTranspose", do_conv_transpose, NULL, 1, 0, "1-D, 2-D and 3-D; output_shape and SAME: constant spatial dims"},
    {"Cos", do_unary, "cos", 7, 0, NULL},
    {"Cosh", do_formula, "cosh", 9, 0, NULL},
    {"CumSum", do_cumsum, NULL, 11, 0, "axis: a constant, or a run-time value (a scan per axis)"},
    {"DepthToSpace", do_depth_space, "depth_to_space", 1, 0, "DCR and CRD"},
    {"DequantizeLinear", do_dequantize, NULL, 10, 0, "per tensor and per axis; no block_size"},
    {"Det", do_det, NULL, 11, 0, "matrices of a constant size up to 16"},
    {"DFT", do_dft, NULL, 17, 0, "direct O(N) per output; dft_length a constant or bound at run time; no inverse with onesided"},
    {"Div", do_binary, "divide", 1, 0, NULL},
    {"Dropout", do_dropout, NULL, 1, 0, "inference; the mask all true"},
    {"DynamicQuantizeLinear", do_dynamic_quantize, NULL, 11, 0, NULL},
    {"Einsum", do_einsum, NULL, 12, 0, "1 to 3 operands"},
    {"Elu", do_elu, "elu", 6, 0, NULL},
    {"Equal", do_binary, "equal", 1, 0, NULL},
    {"Erf", do_unary, "erf", 9, 0, NULL},
    {"Exp", do_unary, "exp", 1, 0, NULL},
    {"Expand", do_reshape_expand, NULL, 8, 0, NULL},
    {"EyeLike", do_eye_like, NULL, 9, 0, NULL},
    {"Flatten", do_flatten, NULL, 1, 0, NULL},
    {"Floor", do_unary, "floor", 1, 0, NULL},
    {"Gather", do_gather, NULL, 1, 0, NULL},
    {"GatherElements", do_gather_elements, NULL, 11, 0, NULL},
    {"GatherND", do_gather_nd, NULL, 12, 0, NULL},
    {"Gelu", do_gelu, NULL, 20, 0, NULL},
    {"Gemm", do_gemm, NULL, 1, 0, NULL},
    {"GlobalAveragePool", do_global_pool, NULL, 1, 0, NULL},
    {"GlobalMaxPool", do_global_pool, NULL, 1, 0, NULL},
    {"Greater", do_binary, "greater", 1, 0, NULL},
    {"GreaterOrEqual", do_binary, "greater_equal", 12, 0, NULL},
    {"GridSample", do_grid_sample, NULL, 16, 0, "4-D: nearest, bilinear, bicubic; zeros, border, reflection"},
    {"GRU", do_rnn, NULL, 7, 0, "activations: the defaults"},
    {"HammingWindow", do_window, "hamming", 17, 0, NULL},
    {"HannWindow", do_window, "hann", 17, 0, NULL},
    {"Hardmax", do_hardmax, NULL, 1, 0, NULL},
    {"HardSigmoid", do_act, "hard_sigmoid", 6, 0, NULL},
    {"HardSwish", do_act, "hard_swish", 14, 0, NULL},
    {"Identity", do_identity, NULL, 1, 0, NULL},
    {"If", do_if, NULL, 1, 0, "tensor outputs; branches of different shapes: dims bound at run time"},
    {"InstanceNormalization", do_instance_norm, "instance_norm", 6, 0, NULL},
    {"IsInf", do_select_act, "is_inf", 10, 0, NULL},
    {"IsNaN", do_act, "is_nan", 9, 0, NULL},
    {"LayerNormalization", do_layer_norm, NULL, 17, 0, NULL},
    {"LeakyRelu", do_leaky_relu, NULL, 1, 0, NULL},
    {"Less", do_binary, "less", 1, 0, NULL},
    {"LessOrEqual", do_binary, "less_equal", 12, 0, NULL},
    {"Log", do_unary, "log", 1, 0, NULL},
    {"LogSoftmax", do_softmax, NULL, 1, 0, NULL},
    {"Loop", do_loop, NULL, 1, 0, "tensor values; any trip count (a tail-recursive graph function)"},
    {"LpPool", do_pool, NULL, 2, 0, "1-D, 2-D and 3-D, as AveragePool"},
    {"LRN", do_lrn, NULL, 1, 0, NULL},
    {"LSTM", do_rnn, NULL, 7, 0, "activations: the defaults; no input_forget"},
    {"MatMul", do_matmul, NULL, 1, 0, NULL},
    {"MatMulInteger", do_integer_op, "matmul", 10, 0, "i32 accumulation"},
    {"Max", do_variadic, "maximum", 1, 0, NULL},
    {"MaxPool", do_pool, NULL, 1, 0, "1-D, 2-D and 3-D; ceil_mode and SAME with a stride: constant spatial dims; Indices: 2-D"},
    {"MaxUnpool", do_max_unpool, NULL, 9, 0, NULL},
    {"Mean", do_variadic, "mean", 1, 0, NULL},
    {"MeanVarianceNormalization", do_instance_norm, "mvn", 9, 0, NULL},
    {"MelWeightMatrix", do_mel_weight_matrix, NULL, 17, 0, "f32 math"},
    {"Min", do_variadic, "minimum", 1, 0, NULL},
    {"Mish", do_act, "mish", 18, 0, NULL},
    {"Mod", do_mod, NULL, 10, 0, NULL},
    {"Mul", do_binary, "multiply", 1, 0, NULL},
    {"Neg", do_unary, "neg", 1, 0, NULL},
    {"NegativeLogLikelihoodLoss", do_nll_loss, "nll", 12, 0, NULL},
    {"NonMaxSuppression", do_nms, "non_max_suppression", 10, 0, "one serial thread; the selected count bound at run time"},
    {"NonZero", do_nonzero, NULL, 9, 0, "the count bound at run time"},
    {"Not", do_unary, "not", 1, 0, NULL},
    {"OneHot", do_one_hot, NULL, 9, 0, NULL},
    {"Or", do_binary, "logical_or", 1, 0, NULL},
    {"Pad", do_pad, NULL, 2, 0, "constant, edge, reflect, wrap"},
    {"Pow", do_pow, "power", 1, 0, "mixed dtypes; integer powers exact"},
    {"PRelu", do_prelu, NULL, 7, 0, NULL},
    {"QLinearConv", do_integer_op, "qconv", 10, 0, "as Conv; i32 accumulation"},
    {"QLinearMatMul", do_integer_op, "qmatmul", 10, 0, "i32 accumulation"},
    {"QuantizeLinear", do_quantize, NULL, 10, 0, "per tensor and per axis, to u8, i8, u16, i16; no block_size"},
    {"Range", do_range_any, NULL, 11, 0, NULL},
    {"Reciprocal", do_reciprocal, NULL, 1, 0, NULL},
    {"ReduceL1", do_reduce_by, "l1", 1, 0, NULL},
    {"ReduceL2", do_reduce_by, "l2", 1, 0, NULL},
    {"ReduceLogSum", do_reduce_by, "log_sum", 1, 0, NULL},
    {"ReduceLogSumExp", do_reduce_by, "log_sum_exp", 1, 0, NULL},
    {"ReduceMax", do_reduce_any, "max", 1, 0, NULL},
    {"ReduceMean", do_reduce_any, "mean", 1, 0, NULL},
    {"ReduceMin", do_reduce_any, "min", 1, 0, NULL},
    {"ReduceProd", do_reduce_any, "prod", 1, 0, NULL},
    {"ReduceSum", do_reduce_any, "sum", 1, 0, NULL},
    {"ReduceSumSquare", do_reduce_by, "sum_square", 1, 0, NULL},
    {"Relu", do_unary, "relu", 1, 0, NULL},
    {"Reshape", do_reshape, NULL, 5, 0, NULL},
    {"Resize", do_resize, NULL, 11, 0, "nearest, linear, cubic; scales and sizes constant or at run time; no antialias, axes or keep_aspect_ratio_policy"},
    {"ReverseSequence", do_reverse_sequence, NULL, 10, 0, NULL},
    {"RNN", do_rnn, NULL, 7, 0, "activations: the defaults"},
    {"RoiAlign", do_roi_align, "roi_align", 10, 0, NULL},
    {"Round", do_select_act, "round", 11, 0, NULL},
    {"Scan", do_scan, NULL, 8, 0, "axis 0; opset 8: a batch of one, no sequence_lens; any length"},
    {"Scatter", do_scatter, NULL, 9, 10, "deprecated alias of ScatterElements"},
    {"ScatterElements", do_scatter, NULL, 11, 0, "reduction none, add, mul, min, max; duplicates in order"},
    {"ScatterND", do_scatter_nd, NULL, 11, 0, "reduction none, add, mul, min, max; the last dim of indices a constant"},
    {"Selu", do_elu, "selu", 6, 0, NULL},
    {"Shape", do_shape, NULL, 1, 0, NULL},
    {"Shrink", do_select_act, "shrink", 9, 0, NULL},
    {"Sigmoid", do_unary, "sigmoid", 1, 0, NULL},
    {"Sign", do_formula, "sign", 9, 0, NULL},
    {"Sin", do_unary, "sin", 7, 0, NULL},
    {"Sinh", do_formula, "sinh", 9, 0, NULL},
    {"Size", do_size, NULL, 1, 0, NULL},
    {"Slice", do_slice_any, NULL, 1, 0, NULL},
    {"Softmax", do_softmax, NULL, 1, 0, NULL},
    {"SoftmaxCrossEntropyLoss", do_nll_loss, "sce", 12, 0, NULL},
    {"Softplus", do_act, "softplus", 1, 0, NULL},
    {"Softsign", do_act, "softsign", 1, 0, NULL},
    {"SpaceToDepth", do_depth_space, "space_to_depth", 1, 0, NULL},
    {"Split", do_split, NULL, 1, 0, NULL},
    {"Sqrt", do_unary, "sqrt", 1, 0, NULL},
    {"Squeeze", do_squeeze_any, NULL, 1, 0, NULL},
    {"STFT", do_stft, NULL, 17, 0, "frame_step and frame_length constants or bound at run time"},
    {"Sub", do_binary, "subtract", 1, 0, NULL},
    {"Sum", do_variadic, "add", 1, 0, NULL},
    {"Tan", do_formula, "tan", 7, 0, NULL},
    {"Tanh", do_unary, "tanh", 1, 0, NULL},
    {"TfIdfVectorizer", do_tfidf, "tfidf", 9, 0, "integer pools (no strings)"},
    {"ThresholdedRelu", do_act, "thresholded_relu", 10, 0, NULL},
    {"Tile", do_tile, NULL, 6, 0, NULL},
    {"TopK", do_topk, "topk", 1, 0, "sorted; K a constant or bound at run time"},
    {"Transpose", do_transpose, NULL, 1, 0, NULL},
    {"Trilu", do_trilu, NULL, 14, 0, NULL},
    {"Unique", do_unique, NULL, 11, 0, "the count bound at run time; O(n^2) in the number of elements or slices"},
    {"Unsqueeze", do_squeeze_any, NULL, 1, 0, NULL},
    {"Upsample", do_resize, NULL, 9, 9, "nearest, linear"},
    {"Where", do_where, NULL, 9, 0, NULL},
    {"Xor", do_binary, "not_equal", 7, 0, "bool"},
};
// clang-format on

/* The table's entry for op, or NULL. */
static const onnx_op *find_op(const char *op) {
  for (size_t i = 0; op && i < RX_ARRAY_LEN(onnx_ops); i++)
    if (!strcmp(op, onnx_ops[i].type)) return &onnx_ops[i];
  return NULL;
}

static bool in_range(const onnx_op *o, int64_t opset) {
  return opset >= o->first && (!o->last || opset <= o->last);
}

void rx_onnx_supported_ops(rx_strbuf *out) {
  for (size_t i = 0; i < RX_ARRAY_LEN(onnx_ops); i++) {
    const onnx_op *o = &onnx_ops[i];
    rx_strbuf_printf(out, "| %s | %d%s", o->type, o->first, o->last ? "" : "+");
    if (o->last) rx_strbuf_printf(out, " to %d", o->last);
    rx_strbuf_printf(out, " |%s%s |\n", o->note ? " " : "", o->note ? o->note : "");
  }
}

static rx_status do_node(imp *I, const Onnx__NodeProto *n) {
  if (n->n_output < 1) return node_err(I, n, "node has no outputs");
  if (!n->op_type || !n->op_type[0]) return node_err(I, n, "node has no op_type");
  const onnx_op *o = find_op(n->op_type);
  if (!o) return node_err(I, n, "not supported");
  return o->handler(I, n, o->rop);
}

static rx_status build(imp *I, const Onnx__ModelProto *mp) {
  const Onnx__GraphProto *g = mp->graph;
  /* every unsupported node, all in one message */
  rx_strbuf un = {0};
  int nun = 0;
  for (size_t i = 0; i < g->n_node; i++) {
    const Onnx__NodeProto *n = g->node[i];
    bool foreign = n->domain && n->domain[0] && strcmp(n->domain, "ai.onnx");
    const onnx_op *o = foreign ? NULL : find_op(n->op_type);
    if (!o || !in_range(o, I->opset)) {
      rx_strbuf_printf(&un, "\n  node %zu '%s': %s%s%s (opset %lld", i, n->name ? n->name : "",
                       foreign ? n->domain : "", foreign ? "." : "", n->op_type ? n->op_type : "?",
                       (long long)I->opset);
      if (o && o->last)
        rx_strbuf_printf(&un, "; relaxc reads %s at opsets %d to %d", o->type, o->first, o->last);
      else if (o)
        rx_strbuf_printf(&un, "; relaxc reads %s from opset %d", o->type, o->first);
      rx_strbuf_putc(&un, ')');
      nun++;
    }
  }
  if (nun) {
    char *list = rx_strbuf_take(&un);
    rx_status s = rx_status_make(RX_ERR_UNSUPPORTED,
                                 "%s: %d unsupported ONNX node%s (the supported operators are "
                                 "listed in README.md, 'Importing a PyTorch model (ONNX)'):%s",
                                 I->file, nun, nun == 1 ? "" : "s", list);
    free(list);
    return s;
  }
  rx_strbuf_free(&un);

  for (size_t i = 0; i < g->n_input; i++)
    if (!is_initializer(g, g->input[i]->name)) RX_RETURN_IF_ERROR(add_input(I, g->input[i]));
  wctx w = {I, NULL};
  onnx_each_weight(g, add_weight_param, &w);
  RX_RETURN_IF_ERROR(w.s);
  for (size_t i = 0; i < g->n_initializer; i++)
    if (!onnx_is_weight(g->initializer[i], false))
      RX_RETURN_IF_ERROR(def_constant(I, NULL, g->initializer[i]->name, g->initializer[i]));

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
      val *v = input(n, k) ? get(I, input(n, k)) : NULL;
      skip = v && v->kind == V_FAILED;
    }
    rx_status s = skip ? NULL : do_node(I, n);
    if (s && rx_status_code_of(s) != RX_ERR_UNSUPPORTED) {
      rx_strbuf_free(&errs);
      rx_status_free(first);
      return s;
    }
    if (s) {
      const char *msg = rx_status_message(s);
      size_t fl = strlen(I->file);
      bool prefixed = !strncmp(msg, I->file, fl) && !strncmp(msg + fl, ": ", 2);
      rx_strbuf_printf(&errs, "\n  %s", prefixed ? msg + fl + 2 : msg);
      nerr++;
      if (first)
        rx_status_free(s);
      else
        first = s;
    }
    if (s || skip)
      for (size_t k = 0; k < n->n_output; k++)
        if (n->output[k] && n->output[k][0]) def(I, n->output[k])->kind = V_FAILED;
  }
  if (nerr > 1) {
    char *list = rx_strbuf_take(&errs);
    rx_status_free(first);
    first = rx_status_make(RX_ERR_UNSUPPORTED, "%s: %d nodes cannot be imported:%s", I->file, nerr,
                           list);
    free(list);
  }
  rx_strbuf_free(&errs); /* emptied by the take above when there were several */
  if (nerr) return first;

  if (g->n_output == 0)
    return rx_status_make(RX_ERR_INVALID, "%s: the graph has no outputs", I->file);
  rx_node *outs[16];
  if (g->n_output > 16) return rx_status_make(RX_ERR_UNSUPPORTED, "%s: over 16 outputs", I->file);
  for (size_t i = 0; i < g->n_output; i++) {
    rx_var *t;
    RX_RETURN_IF_ERROR(out_tensor(I, NULL, g->output[i]->name, &t));
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

rx_status rx_onnx_import(rx_module *m, const void *bytes, size_t len, const char *name,
                         const char *base_dir, rx_diag *diag) {
  (void)diag;
  if (!name) name = "<onnx>";
  Onnx__ModelProto *mp;
  RX_RETURN_IF_ERROR(onnx_unpack(bytes, len, name, &mp));
  imp I = {.m = m, .file = name, .base_dir = base_dir, .opset = model_opset(mp)};
  I.b = rx_builder_new(m, "main");
  I.an = rx_analyzer_new(m->ctx);
  rx_status s = build(&I, mp);
  if (I.b) rx_builder_free(I.b);
  rx_analyzer_free(I.an);
  free(I.vals);
  onnx__model_proto__free_unpacked(mp, NULL);
  return s;
}
