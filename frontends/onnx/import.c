/* frontends/onnx/import.c: ONNX ModelProto -> one relaxc graph function `main` (see
 * onnx_import.h). The protobuf is decoded by the protobuf-c code generated at build time from
 * libonnx-dev's onnx.proto (frontends/onnx/onnx.cmake); the graph is built with the builder API,
 * so every binding's struct info is deduced as it is emitted and shape computations can read it.
 *
 * Every ONNX value is one of three kinds: a tensor (a graph variable), a symbolic integer value
 * (a scalar or a short vector of symbolic expressions: the results of Shape, Gather on a shape,
 * Concat of shapes, integer constants, ...), or a float scalar constant (passed to ops as a
 * weakly typed literal). Symbolic values never become runtime tensors: Reshape and Expand take
 * them as shape literals. */
#include "onnx_import.h"

#include "../../ir/ir.h"

#include "proto.h"

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
} val;

typedef struct imp {
  rx_module *m;
  rx_builder *b;
  const char *file;
  const char *base_dir; /* external data files are relative to it (NULL: the current dir) */
  int64_t opset;
  val *vals;
  int nvals, cap;
  int fresh; /* next fresh dim name d<N> */
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
  for (size_t i = 0; i < t->n_dims; i++) dims[i] = rx_sym_const(I->m, t->dims[i]);
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
    }
    si = rx_sinfo_tensor(I->m, dt, (int)tt->shape->n_dim, dims);
  }
  char *id = onnx_ident(vi->name);
  val *v = def(I, vi->name);
  v->kind = V_TENSOR;
  rx_status s = rx_builder_param(I->b, id, si, &v->var);
  free(id);
  return s;
}

/* A value as an op argument. */
static rx_status arg(imp *I, const Onnx__NodeProto *n, const char *name, rx_node **out) {
  *out = NULL;
  val *v = name ? get(I, name) : NULL;
  if (!v) return node_err(I, n, "input '%s' is not defined", name ? name : "(missing)");
  if (v->kind == V_TENSOR)
    *out = rx_arg_var(I->b, v->var);
  else if (v->kind == V_FCONST)
    *out = rx_arg_float(I->b, v->f);
  else if (v->sndim == 0)
    *out = rx_arg_prim(I->b, RX_DTYPE_I64, v->s[0]);
  else
    return node_err(I, n, "input '%s' is a shape value used as a tensor (not supported yet)", name);
  return NULL;
}

/* A builder error (s, consumed) as an error of node n; NULL stays NULL. */
static rx_status at_node(imp *I, const Onnx__NodeProto *n, rx_status s) {
  if (!s) return NULL;
  rx_status e = node_err(I, n, "%s", rx_status_message(s));
  rx_status_free(s);
  return e;
}

static rx_status emit(imp *I, const Onnx__NodeProto *n, const char *op, rx_node *const *args,
                      int nargs, const rx_attr *const *attrs, int nattrs, rx_var **out) {
  return at_node(I, n, rx_emit_op(I->b, op, args, nargs, attrs, nattrs, NULL, out));
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
  return rx_sym_var(I->m, nm);
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
    if (v->s[k]->kind != RX_EXPR_CONST) return node_err(I, n, "input %zu must be constant", i);
    out[k] = v->s[k]->value;
  }
  *count = v->slen;
  return NULL;
}

static const rx_expr *sym_binary(imp *I, const char *op, const rx_expr *a, const rx_expr *b) {
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
    for (size_t k = 0; k < c; k++) v->s[k] = rx_sym_const(I->m, vals[k]);
    return NULL;
  }
  size_t c;
  float *f = onnx_tensor_floats(t, &c);
  if (!f || c != 1) {
    free(f);
    return node_err(I, n, "unsupported constant (data type %d)", (int)t->data_type);
  }
  val *v = def(I, name);
  v->kind = V_FCONST;
  v->f = f[0];
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

/* The padding [top, left, bottom, right] of a 2-D window op from `pads` or `auto_pad`, for
 * kernel extents ext[k] = dilation * (kernel - 1) + 1 and strides st. */
static rx_status window_pads(imp *I, const Onnx__NodeProto *n, const int64_t *ext,
                             const int64_t *st, int64_t *pads) {
  if (attr_s_is(n, "auto_pad", "") || attr_s_is(n, "auto_pad", "NOTSET"))
    return ints_attr(I, n, "pads", 4, 0, pads);
  if (attr_s_is(n, "auto_pad", "VALID")) {
    memset(pads, 0, 4 * sizeof *pads);
    return NULL;
  }
  bool upper = attr_s_is(n, "auto_pad", "SAME_UPPER");
  if (!upper && !attr_s_is(n, "auto_pad", "SAME_LOWER"))
    return node_err(I, n, "unknown auto_pad value");
  for (int k = 0; k < 2; k++) {
    if (st[k] != 1)
      return node_err(I, n,
                      "auto_pad SAME with stride %lld: the padding would depend on the "
                      "input size; give explicit pads",
                      (long long)st[k]);
    int64_t total = ext[k] - 1;
    pads[k] = upper ? total / 2 : total - total / 2;
    pads[k + 2] = total - pads[k];
  }
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
  if (input(n, 1)) {
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
  a[1] = rx_arg_prim(I->b, RX_DTYPE_I64, k);
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

static rx_status do_conv(imp *I, const Onnx__NodeProto *n, const char *rop) {
  val *x = input(n, 0) ? get(I, input(n, 0)) : NULL, *w = input(n, 1) ? get(I, input(n, 1)) : NULL;
  const rx_sinfo *ws = tsinfo(w);
  if (rank_of(x) != 4)
    return node_err(I, n, "only 2-D convolution (an input of rank 4, NCHW) is supported");
  if (!ws || ws->ndim != 4 || !ws->shape || ws->shape[2]->kind != RX_EXPR_CONST ||
      ws->shape[3]->kind != RX_EXPR_CONST)
    return node_err(I, n, "the weight must be [O, C/group, KH, KW] with constant KH, KW");
  int64_t st[2], dil[2], pads[4], ext[2];
  RX_RETURN_IF_ERROR(ints_attr(I, n, "strides", 2, 1, st));
  RX_RETURN_IF_ERROR(ints_attr(I, n, "dilations", 2, 1, dil));
  for (int k = 0; k < 2; k++) ext[k] = dil[k] * (ws->shape[2 + k]->value - 1) + 1;
  RX_RETURN_IF_ERROR(window_pads(I, n, ext, st, pads));
  rx_node *a[2];
  RX_RETURN_IF_ERROR(arg(I, n, input(n, 0), &a[0]));
  RX_RETURN_IF_ERROR(arg(I, n, input(n, 1), &a[1]));
  const rx_attr *at[4] = {rx_attr_ints(I->m, "strides", st, 2),
                          rx_attr_ints(I->m, "padding", pads, 4),
                          rx_attr_ints(I->m, "dilation", dil, 2),
                          rx_attr_int(I->m, "groups", onnx_attr_i(n, "group", 1))};
  rx_var *r, *b2;
  RX_RETURN_IF_ERROR(emit(I, n, "conv2d", a, 2, at, 4, &r));
  if (input(n, 2)) { /* bias [O] as [1, O, 1, 1] */
    const rx_expr *one = rx_sym_const(I->m, 1), *dims[4] = {one, ws->shape[0], one, one};
    RX_RETURN_IF_ERROR(arg(I, n, input(n, 2), &a[0]));
    a[1] = rx_arg_shape(I->b, dims, 4);
    RX_RETURN_IF_ERROR(emit(I, n, "reshape", a, 2, NULL, 0, &b2));
    a[0] = rx_arg_var(I->b, r);
    a[1] = rx_arg_var(I->b, b2);
    RX_RETURN_IF_ERROR(emit(I, n, "add", a, 2, NULL, 0, &r));
  }
  def_tensor(I, n, r);
  return NULL;
}

static rx_status do_pool(imp *I, const Onnx__NodeProto *n, const char *rop) {
  bool mx = n->op_type[0] == 'M';
  if (rank_of(input(n, 0) ? get(I, input(n, 0)) : NULL) != 4)
    return node_err(I, n, "only 2-D pooling (an input of rank 4, NCHW) is supported");
  if (onnx_attr_i(n, "ceil_mode", 0))
    return node_err(I, n, "ceil_mode=1 is not supported (floor mode only)");
  if (onnx_attr_i(n, "storage_order", 0)) return node_err(I, n, "storage_order=1 is not supported");
  if (n->n_output > 1 && n->output[1] && n->output[1][0])
    return node_err(I, n, "the Indices output is not supported");
  const Onnx__AttributeProto *ka = onnx_attr(n, "kernel_shape");
  if (!ka || ka->n_ints != 2) return node_err(I, n, "kernel_shape of two values is required");
  int64_t kern[2] = {ka->ints[0], ka->ints[1]}, st[2], dil[2], pads[4], ext[2];
  RX_RETURN_IF_ERROR(ints_attr(I, n, "strides", 2, 1, st));
  RX_RETURN_IF_ERROR(ints_attr(I, n, "dilations", 2, 1, dil));
  for (int k = 0; k < 2; k++) ext[k] = dil[k] * (kern[k] - 1) + 1;
  RX_RETURN_IF_ERROR(window_pads(I, n, ext, st, pads));
  rx_node *a;
  RX_RETURN_IF_ERROR(arg(I, n, input(n, 0), &a));
  const rx_attr *at[5] = {
      rx_attr_ints(I->m, "kernel", kern, 2), rx_attr_ints(I->m, "strides", st, 2),
      rx_attr_ints(I->m, "padding", pads, 4), rx_attr_ints(I->m, "dilation", dil, 2),
      rx_attr_bool(I->m, "count_include_pad", onnx_attr_i(n, "count_include_pad", 0) != 0)};
  rx_var *r;
  RX_RETURN_IF_ERROR(emit(I, n, mx ? "max_pool2d" : "avg_pool2d", &a, 1, at, mx ? 4 : 5, &r));
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

/* Identity and Dropout (inference): the input under a new name */
static rx_status do_identity(imp *I, const Onnx__NodeProto *n, const char *rop) {
  val *src = input(n, 0) ? get(I, input(n, 0)) : NULL;
  if (!src) return node_err(I, n, "input is not defined");
  def_alias(I, n, src);
  return NULL;
}

/* elementwise unary ops; rop: the relaxc op */
static rx_status do_unary(imp *I, const Onnx__NodeProto *n, const char *rop) {
  rx_node *a[5] = {0};
  rx_var *r = NULL;
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
               .slen = len};
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

/* Where(cond, x, y) */
static rx_status do_where(imp *I, const Onnx__NodeProto *n, const char *rop) {
  rx_node *a[5] = {0};
  rx_var *r = NULL;
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
  if (!si || si->kind != RX_SINFO_TENSOR || !si->shape || si->ndim > SYM_MAX)
    return node_err(I, n, "the input's shape is not known (rank and dims needed)");
  int64_t start = onnx_attr_i(n, "start", 0), end = onnx_attr_i(n, "end", si->ndim);
  if (start < 0) start += si->ndim;
  if (end < 0) end += si->ndim;
  if (start < 0) start = 0;
  if (end > si->ndim) end = si->ndim;
  val out = {.name = n->output[0], .kind = V_SYM, .sndim = 1, .slen = 0};
  for (int64_t k = start; k < end; k++) out.s[out.slen++] = si->shape[k];
  *def(I, n->output[0]) = out;
  return NULL;
}

/* Size: the product of the input's dims as a symbolic 0-d value (an i64 tensor where used as
 * data) */
static rx_status do_size(imp *I, const Onnx__NodeProto *n, const char *rop) {
  const rx_sinfo *si = tsinfo(input(n, 0) ? get(I, input(n, 0)) : NULL);
  if (!si || si->kind != RX_SINFO_TENSOR || !si->shape)
    return node_err(I, n, "the input's shape is not known (rank and dims needed)");
  const rx_expr *count = rx_sym_const(I->m, 1);
  for (int k = 0; k < si->ndim; k++) count = rx_sym_mul(I->m, count, si->shape[k]);
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
  RX_RETURN_IF_ERROR(arg(I, n, input(n, 1), &a[1]));
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
    if (op[0] == 'R' && rx_expr_is_const(dims[k], 0) && !onnx_attr_i(n, "allowzero", 0)) {
      if (!si || !si->shape || k >= si->ndim)
        return node_err(I, n, "a 0 in the target shape copies an unknown input dim");
      dims[k] = si->shape[k];
    }
  }
  if (op[0] == 'R') {
    RX_RETURN_IF_ERROR(arg(I, n, input(n, 0), &a[0]));
    a[1] = rx_arg_shape(I->b, dims, shp->slen);
    RX_RETURN_IF_ERROR(emit(I, n, "reshape", a, 2, NULL, 0, &r));
  } else if (op[0] == 'E') {
    /* bidirectional broadcast: x + zeros(shape) */
    if (!si || si->kind != RX_SINFO_TENSOR) return node_err(I, n, "input must be a tensor");
    a[0] = rx_arg_shape(I->b, dims, shp->slen);
    at[0] = rx_attr_dtype(I->m, "dtype", si->dtype);
    rx_var *z;
    RX_RETURN_IF_ERROR(emit(I, n, "zeros", a, 1, at, 1, &z));
    a[0] = rx_arg_var(I->b, x->var);
    a[1] = rx_arg_var(I->b, z);
    RX_RETURN_IF_ERROR(emit(I, n, "add", a, 2, NULL, 0, &r));
  } else {
    const Onnx__AttributeProto *va = onnx_attr(n, "value");
    rx_dtype dt = RX_DTYPE_F32;
    double fill = 0;
    if (va && va->t) {
      const Onnx__TensorProto *t = va->t;
      if (!onnx_dtype_of(t->data_type, &dt)) return node_err(I, n, "unsupported value type");
      if (onnx_is_int_type(t->data_type)) {
        int64_t iv;
        size_t c;
        if (!onnx_tensor_ints(t, I->file, "value", I->base_dir, &iv, 1, &c) || c != 1)
          return node_err(I, n, "bad value");
        fill = (double)iv;
      } else {
        size_t c;
        float *f = onnx_tensor_floats(t, &c);
        if (!f || c != 1) {
          free(f);
          return node_err(I, n, "bad value");
        }
        fill = f[0];
        free(f);
      }
    }
    a[0] = rx_arg_shape(I->b, dims, shp->slen);
    a[1] = rx_arg_float(I->b, fill);
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

/* Cast: of symbolic values at import, else cast */
static rx_status do_cast(imp *I, const Onnx__NodeProto *n, const char *rop) {
  rx_node *a[5] = {0};
  const rx_attr *at[4];
  rx_var *r = NULL;
  val *x = input(n, 0) ? get(I, input(n, 0)) : NULL;
  rx_dtype dt;
  if (!x) return node_err(I, n, "input is not defined");
  if (!onnx_dtype_of((int32_t)onnx_attr_i(n, "to", 0), &dt))
    return node_err(I, n, "unsupported target type %lld", (long long)onnx_attr_i(n, "to", 0));
  if (x->kind != V_TENSOR) {
    def_alias(I, n, x);
    return NULL;
  }
  RX_RETURN_IF_ERROR(arg(I, n, input(n, 0), &a[0]));
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

/* LayerNormalization (the Y output) */
static rx_status do_layer_norm(imp *I, const Onnx__NodeProto *n, const char *rop) {
  rx_node *a[5] = {0};
  const rx_attr *at[4];
  rx_var *r = NULL;
  int rank = rank_of(input(n, 0) ? get(I, input(n, 0)) : NULL);
  if (rank < 0) return node_err(I, n, "the input's rank is not known");
  if (!input(n, 2))
    return node_err(I, n, "LayerNormalization without a bias (B) is not supported yet");
  if (n->n_output > 1 && n->output[1] && n->output[1][0])
    return node_err(I, n, "the Mean / InvStdDev outputs are not supported");
  int64_t axis = onnx_attr_i(n, "axis", -1), axes[SYM_MAX];
  if (axis < 0) axis += rank;
  int na = 0;
  for (int64_t k = axis; k < rank && na < SYM_MAX; k++) axes[na++] = k;
  for (int k = 0; k < 3; k++) RX_RETURN_IF_ERROR(arg(I, n, input(n, (size_t)k), &a[k]));
  at[0] = rx_attr_ints(I->m, "axes", axes, na);
  at[1] = rx_attr_float(I->m, "epsilon", onnx_attr_f(n, "epsilon", 1e-5));
  RX_RETURN_IF_ERROR(emit(I, n, "layer_norm", a, 3, at, 2, &r));
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
    if (step == 0) return node_err(I, n, "step 0");
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
#undef EX1
#undef EX2
#undef EX3
#undef FL

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
  if (onnx_attr_i(n, "training_mode", 0))
    return node_err(I, n, "training_mode=1 is not supported (inference only)");
  for (size_t k = 1; k < n->n_output; k++)
    if (n->output[k] && n->output[k][0])
      return node_err(I, n, "the running mean / variance outputs are not supported");
  for (int k = 0; k < 5; k++) RX_RETURN_IF_ERROR(arg(I, n, input(n, (size_t)k), &a[k]));
  at[0] = rx_attr_float(I->m, "epsilon", onnx_attr_f(n, "epsilon", 1e-5));
  RX_RETURN_IF_ERROR(emit(I, n, "batch_norm", a, 5, at, 1, &r));
  def_tensor(I, n, r);
  return NULL;
}

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
    {"Acosh", do_formula, "acosh", 9, 0, NULL},
    {"Add", do_binary, "add", 1, 0, NULL},
    {"And", do_binary, "logical_and", 1, 0, NULL},
    {"ArgMax", do_arg_extreme, "argmax", 1, 0, NULL},
    {"ArgMin", do_arg_extreme, "argmin", 1, 0, NULL},
    {"Asinh", do_formula, "asinh", 9, 0, NULL},
    {"Atanh", do_formula, "atanh", 9, 0, NULL},
    {"AveragePool", do_pool, NULL, 1, 0, "2-D, floor mode"},
    {"BatchNormalization", do_batch_norm, NULL, 1, 0, "inference"},
    {"CastLike", do_cast_like, NULL, 15, 0, NULL},
    {"Cast", do_cast, NULL, 6, 0, NULL},
    {"Celu", do_act, "celu", 12, 0, NULL},
    {"Ceil", do_unary, "ceil", 1, 0, NULL},
    {"Clip", do_clip, NULL, 1, 0, NULL},
    {"Concat", do_concat, NULL, 1, 0, NULL},
    {"Constant", do_constant, NULL, 1, 0, NULL},
    {"ConstantOfShape", do_reshape_expand, NULL, 9, 0, NULL},
    {"Conv", do_conv, NULL, 1, 0, "2-D"},
    {"Cos", do_unary, "cos", 7, 0, NULL},
    {"Cosh", do_formula, "cosh", 9, 0, NULL},
    {"CumSum", do_cumsum, NULL, 11, 0, "axis: a constant, or a run-time value (a scan per axis)"},
    {"Div", do_binary, "divide", 1, 0, NULL},
    {"Dropout", do_identity, NULL, 1, 0, "inference"},
    {"Elu", do_elu, "elu", 6, 0, NULL},
    {"Equal", do_binary, "equal", 1, 0, NULL},
    {"Erf", do_unary, "erf", 9, 0, NULL},
    {"Exp", do_unary, "exp", 1, 0, NULL},
    {"Expand", do_reshape_expand, NULL, 8, 0, NULL},
    {"Flatten", do_flatten, NULL, 1, 0, NULL},
    {"Floor", do_unary, "floor", 1, 0, NULL},
    {"Gather", do_gather, NULL, 1, 0, NULL},
    {"GatherElements", do_gather_elements, NULL, 11, 0, NULL},
    {"Gelu", do_gelu, NULL, 20, 0, NULL},
    {"Gemm", do_gemm, NULL, 1, 0, NULL},
    {"GlobalAveragePool", do_global_pool, NULL, 1, 0, NULL},
    {"GlobalMaxPool", do_global_pool, NULL, 1, 0, NULL},
    {"Greater", do_binary, "greater", 1, 0, NULL},
    {"GreaterOrEqual", do_binary, "greater_equal", 12, 0, NULL},
    {"Hardmax", do_hardmax, NULL, 1, 0, NULL},
    {"HardSigmoid", do_act, "hard_sigmoid", 6, 0, NULL},
    {"HardSwish", do_act, "hard_swish", 14, 0, NULL},
    {"Identity", do_identity, NULL, 1, 0, NULL},
    {"IsNaN", do_act, "is_nan", 9, 0, NULL},
    {"LayerNormalization", do_layer_norm, NULL, 17, 0, NULL},
    {"LeakyRelu", do_leaky_relu, NULL, 1, 0, NULL},
    {"Less", do_binary, "less", 1, 0, NULL},
    {"LessOrEqual", do_binary, "less_equal", 12, 0, NULL},
    {"Log", do_unary, "log", 1, 0, NULL},
    {"LogSoftmax", do_softmax, NULL, 1, 0, NULL},
    {"MatMul", do_matmul, NULL, 1, 0, NULL},
    {"Max", do_variadic, "maximum", 1, 0, NULL},
    {"MaxPool", do_pool, NULL, 1, 0, "2-D, floor mode"},
    {"Mean", do_variadic, "mean", 1, 0, NULL},
    {"Min", do_variadic, "minimum", 1, 0, NULL},
    {"Mish", do_act, "mish", 18, 0, NULL},
    {"Mod", do_mod, NULL, 10, 0, NULL},
    {"Mul", do_binary, "multiply", 1, 0, NULL},
    {"Neg", do_unary, "neg", 1, 0, NULL},
    {"Not", do_unary, "not", 1, 0, NULL},
    {"Or", do_binary, "logical_or", 1, 0, NULL},
    {"Pow", do_binary, "power", 1, 0, NULL},
    {"Range", do_range, NULL, 11, 0, NULL},
    {"Reciprocal", do_reciprocal, NULL, 1, 0, NULL},
    {"ReduceL1", do_reduce_by, "l1", 1, 0, NULL},
    {"ReduceL2", do_reduce_by, "l2", 1, 0, NULL},
    {"ReduceLogSum", do_reduce_by, "log_sum", 1, 0, NULL},
    {"ReduceLogSumExp", do_reduce_by, "log_sum_exp", 1, 0, NULL},
    {"ReduceMax", do_reduce, "max", 1, 0, NULL},
    {"ReduceMean", do_reduce, "mean", 1, 0, NULL},
    {"ReduceMin", do_reduce, "min", 1, 0, NULL},
    {"ReduceProd", do_reduce, "prod", 1, 0, NULL},
    {"ReduceSum", do_reduce, "sum", 1, 0, NULL},
    {"ReduceSumSquare", do_reduce_by, "sum_square", 1, 0, NULL},
    {"Relu", do_unary, "relu", 1, 0, NULL},
    {"Reshape", do_reshape, NULL, 5, 0, NULL},
    {"Selu", do_elu, "selu", 6, 0, NULL},
    {"Shape", do_shape, NULL, 1, 0, NULL},
    {"Sigmoid", do_unary, "sigmoid", 1, 0, NULL},
    {"Sign", do_formula, "sign", 9, 0, NULL},
    {"Sin", do_unary, "sin", 7, 0, NULL},
    {"Sinh", do_formula, "sinh", 9, 0, NULL},
    {"Size", do_size, NULL, 1, 0, NULL},
    {"Slice", do_slice, NULL, 1, 0, NULL},
    {"Softmax", do_softmax, NULL, 1, 0, NULL},
    {"Softplus", do_act, "softplus", 1, 0, NULL},
    {"Softsign", do_act, "softsign", 1, 0, NULL},
    {"Split", do_split, NULL, 1, 0, NULL},
    {"Sqrt", do_unary, "sqrt", 1, 0, NULL},
    {"Squeeze", do_squeeze, NULL, 1, 0, NULL},
    {"Sub", do_binary, "subtract", 1, 0, NULL},
    {"Sum", do_variadic, "add", 1, 0, NULL},
    {"Tan", do_formula, "tan", 7, 0, NULL},
    {"Tanh", do_unary, "tanh", 1, 0, NULL},
    {"ThresholdedRelu", do_act, "thresholded_relu", 10, 0, NULL},
    {"Transpose", do_transpose, NULL, 1, 0, NULL},
    {"Trilu", do_trilu, NULL, 14, 0, NULL},
    {"Unsqueeze", do_squeeze, NULL, 1, 0, NULL},
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
    val *v = get(I, g->output[i]->name);
    if (v && v->kind == V_SYM && v->sndim == 0) { /* a scalar shape value (Size): a 0-d i64 */
      rx_node *a[2] = {rx_arg_shape(I->b, NULL, 0), rx_arg_prim(I->b, RX_DTYPE_I64, v->s[0])};
      const rx_attr *at = rx_attr_dtype(I->m, "dtype", RX_DTYPE_I64);
      RX_RETURN_IF_ERROR(rx_emit_op(I->b, "full", a, 2, &at, 1, NULL, &v->var));
      v->kind = V_TENSOR;
    }
    if (!v || v->kind != V_TENSOR)
      return rx_status_make(RX_ERR_UNSUPPORTED, "%s: graph output '%s' is %s", I->file,
                            g->output[i]->name ? g->output[i]->name : "",
                            !v ? "not defined" : "a constant or shape value (not supported yet)");
    outs[i] = rx_arg_var(I->b, v->var);
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
  rx_status s = build(&I, mp);
  if (I.b) rx_builder_free(I.b);
  free(I.vals);
  onnx__model_proto__free_unpacked(mp, NULL);
  return s;
}
