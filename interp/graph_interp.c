/* graph_interp: the CPU evaluator of graph functions (see graph_interp.h). */
#include "graph_interp.h"

#include "../ops/ops.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_DEPTH 64 /* nested graph calls */

typedef struct genv {
  rx_module *m;
  const rx_graph_fn *fn;
  RX_VEC(const rx_var *) vars;   /* graph variables ... */
  RX_VEC(rx_ginterp_value) vals; /* ... and their values (owned) */
  RX_VEC(const rx_expr *) syms;  /* symbolic variables ... */
  RX_VEC(int64_t) symv;          /* ... and their values */
  int depth;
  interp_graph_extern_fn hook; /* other call_externs (interp_graph_run_ext), or NULL */
  void *hook_arg;
} genv;

size_t interp_graph_elem_size(rx_dtype dt) {
  int b = ir_dtype_bits(dt);
  return b > 0 ? (size_t)b / 8 : 0;
}

int64_t interp_graph_numel(const rx_ginterp_value *v) {
  int64_t n = 1;
  for (int i = 0; i < v->ndim; i++) n *= v->shape[i];
  return n;
}

rx_ginterp_value interp_graph_tensor(rx_dtype dtype, int ndim, const int64_t *shape, void *data) {
  rx_ginterp_value v;
  memset(&v, 0, sizeof v);
  v.kind = RX_GV_TENSOR;
  v.dtype = dtype;
  v.ndim = ndim < 0 ? 0 : ndim > RX_MAX_NDIM ? RX_MAX_NDIM : ndim;
  for (int i = 0; i < v.ndim; i++) v.shape[i] = shape[i];
  v.data = data;
  return v;
}

void interp_graph_value_free(rx_ginterp_value *v) {
  if (!v) return;
  if (v->kind == RX_GV_TENSOR) free(v->data);
  if (v->kind == RX_GV_TUPLE) {
    for (int i = 0; i < v->nfields; i++) interp_graph_value_free(&v->fields[i]);
    free(v->fields);
  }
  memset(v, 0, sizeof *v);
}

/* Deep copy (tensor data copied). */
static rx_ginterp_value copy_value(const rx_ginterp_value *v) {
  rx_ginterp_value r = *v;
  if (v->kind == RX_GV_TENSOR) {
    size_t bytes = (size_t)interp_graph_numel(v) * interp_graph_elem_size(v->dtype);
    r.data = base_malloc(bytes ? bytes : 1);
    if (bytes) memcpy(r.data, v->data, bytes);
  } else if (v->kind == RX_GV_TUPLE) {
    r.fields = base_calloc((size_t)v->nfields + 1, sizeof *r.fields);
    for (int i = 0; i < v->nfields; i++) r.fields[i] = copy_value(&v->fields[i]);
  }
  return r;
}

static void value_str(rx_strbuf *b, const rx_ginterp_value *v) {
  switch (v->kind) {
  case RX_GV_NONE:
    base_strbuf_append(b, "nothing");
    break;
  case RX_GV_TENSOR:
    base_strbuf_printf(b, "%s[", ir_dtype_name(v->dtype));
    for (int i = 0; i < v->ndim; i++)
      base_strbuf_printf(b, "%s%lld", i ? ", " : "", (long long)v->shape[i]);
    base_strbuf_append(b, "]");
    break;
  case RX_GV_SHAPE:
    base_strbuf_append(b, "Shape([");
    for (int i = 0; i < v->ndim; i++)
      base_strbuf_printf(b, "%s%lld", i ? ", " : "", (long long)v->shape[i]);
    base_strbuf_append(b, "])");
    break;
  case RX_GV_PRIM:
    if (ir_dtype_is_float(v->dtype))
      base_strbuf_printf(b, "Prim(%s, %g)", ir_dtype_name(v->dtype), v->f);
    else
      base_strbuf_printf(b, "Prim(%s, %lld)", ir_dtype_name(v->dtype), (long long)v->i);
    break;
  case RX_GV_TUPLE:
    base_strbuf_append(b, "(");
    for (int i = 0; i < v->nfields; i++) {
      if (i) base_strbuf_append(b, ", ");
      value_str(b, &v->fields[i]);
    }
    base_strbuf_append(b, ")");
    break;
  }
}

/* Expected struct info with the bound values substituted, as text. */
static void sinfo_str(genv *e, rx_strbuf *b, const rx_sinfo *s) {
  if (!s) {
    base_strbuf_append(b, "?");
    return;
  }
  if ((s->kind == RX_SINFO_TENSOR || s->kind == RX_SINFO_SHAPE) && s->shape && s->ndim > 0) {
    const rx_expr **d = base_calloc((size_t)s->ndim, sizeof *d);
    for (int i = 0; i < s->ndim; i++) {
      const rx_expr **cv = base_calloc(e->syms.len + 1, sizeof *cv);
      for (size_t k = 0; k < e->syms.len; k++) cv[k] = sym_expr_const(e->m->ctx, e->symv.data[k]);
      d[i] = sym_expr_subst(e->m->ctx, s->shape[i], e->syms.data, cv, e->syms.len);
      free(cv);
    }
    const rx_sinfo *t = s->kind == RX_SINFO_TENSOR ? rx_sinfo_tensor(e->m, s->dtype, s->ndim, d)
                                                   : rx_sinfo_shape(e->m, s->ndim, d);
    free(d);
    ir_sinfo_print(b, t);
    return;
  }
  ir_sinfo_print(b, s);
}

static rx_status mismatch(genv *e, const char *what, const rx_sinfo *want,
                          const rx_ginterp_value *have, const char *why) {
  rx_strbuf b = {0};
  base_strbuf_printf(&b, "%s: %s: expected ", e->fn->name, what);
  sinfo_str(e, &b, want);
  base_strbuf_append(&b, ", got ");
  value_str(&b, have);
  if (why) base_strbuf_printf(&b, " (%s)", why);
  char *s = base_strbuf_take(&b);
  rx_status st = base_status_make(RX_ERR_INVALID, "%s", s);
  free(s);
  return st;
}

static bool sym_lookup(genv *e, const rx_expr *v, int64_t *out) {
  for (size_t i = 0; i < e->syms.len; i++)
    if (e->syms.data[i] == v) {
      *out = e->symv.data[i];
      return true;
    }
  return false;
}

static bool eval(genv *e, const rx_expr *x, int64_t *out) {
  rx_expr_env env = {e->syms.data, e->symv.data, e->syms.len};
  return sym_expr_eval(x, &env, out);
}

/* Binds the whole-variable dims / prim values of want from have (first binding wins). */
static void bind_whole(genv *e, const rx_sinfo *want, const rx_ginterp_value *have) {
  if (!want || !have) return;
  int64_t dummy;
  if ((want->kind == RX_SINFO_TENSOR && have->kind == RX_GV_TENSOR) ||
      (want->kind == RX_SINFO_SHAPE && have->kind == RX_GV_SHAPE)) {
    if (!want->shape || want->ndim != have->ndim) return;
    for (int i = 0; i < want->ndim; i++)
      if (want->shape[i]->kind == RX_EXPR_VAR && !sym_lookup(e, want->shape[i], &dummy)) {
        RX_VEC_PUSH(&e->syms, want->shape[i]);
        RX_VEC_PUSH(&e->symv, have->shape[i]);
      }
  } else if (want->kind == RX_SINFO_PRIM && have->kind == RX_GV_PRIM) {
    if (want->value && want->value->kind == RX_EXPR_VAR && !ir_dtype_is_float(have->dtype) &&
        !sym_lookup(e, want->value, &dummy)) {
      RX_VEC_PUSH(&e->syms, want->value);
      RX_VEC_PUSH(&e->symv, have->i);
    }
  } else if (want->kind == RX_SINFO_TUPLE && have->kind == RX_GV_TUPLE &&
             want->nfields == have->nfields) {
    for (int i = 0; i < want->nfields; i++) bind_whole(e, want->fields[i], &have->fields[i]);
  }
}

/* Checks have against want (after bind_whole). */
static rx_status check(genv *e, const char *what, const rx_sinfo *want,
                       const rx_ginterp_value *have) {
  if (!want) return NULL;
  switch (want->kind) {
  case RX_SINFO_OBJECT:
  case RX_SINFO_FUNC:
    return NULL;
  case RX_SINFO_TENSOR:
  case RX_SINFO_SHAPE: {
    bool tensor = want->kind == RX_SINFO_TENSOR;
    if (have->kind != (tensor ? RX_GV_TENSOR : RX_GV_SHAPE))
      return mismatch(e, what, want, have, tensor ? "not a tensor" : "not a shape");
    if (tensor && want->dtype != RX_DTYPE_UNKNOWN && want->dtype != have->dtype)
      return mismatch(e, what, want, have, "dtype");
    if (want->ndim >= 0 && want->ndim != have->ndim) return mismatch(e, what, want, have, "rank");
    for (int i = 0; want->shape && i < want->ndim; i++) {
      int64_t v;
      if (!tensor && have->shape[i] < 0 && want->shape[i]->kind == RX_EXPR_VAR) {
        char why[96];
        snprintf(why, sizeof why, "dim %d is %lld, but %s is a size and cannot be negative", i,
                 (long long)have->shape[i], want->shape[i]->name);
        return mismatch(e, what, want, have, why);
      }
      if (!eval(e, want->shape[i], &v)) return mismatch(e, what, want, have, "unbound dimension");
      if (v != have->shape[i]) {
        char why[64];
        snprintf(why, sizeof why, "dim %d: %lld vs %lld", i, (long long)v,
                 (long long)have->shape[i]);
        return mismatch(e, what, want, have, why);
      }
    }
    return NULL;
  }
  case RX_SINFO_PRIM: {
    if (have->kind != RX_GV_PRIM) return mismatch(e, what, want, have, "not a scalar");
    if (want->dtype != RX_DTYPE_UNKNOWN && want->dtype != have->dtype)
      return mismatch(e, what, want, have, "dtype");
    int64_t v;
    if (want->value && !ir_dtype_is_float(have->dtype)) {
      if (!eval(e, want->value, &v)) return mismatch(e, what, want, have, "unbound value");
      if (v != have->i) return mismatch(e, what, want, have, "value");
    }
    return NULL;
  }
  case RX_SINFO_TUPLE:
    if (have->kind != RX_GV_TUPLE || have->nfields != want->nfields)
      return mismatch(e, what, want, have, "not a tuple of that size");
    for (int i = 0; i < want->nfields; i++)
      RX_RETURN_IF_ERROR(check(e, what, want->fields[i], &have->fields[i]));
    return NULL;
  }
  return NULL;
}

static const rx_ginterp_value *lookup(genv *e, const rx_var *v) {
  for (size_t i = e->vars.len; i-- > 0;)
    if (e->vars.data[i] == v) return &e->vals.data[i];
  return NULL;
}

static void define(genv *e, const rx_var *v, rx_ginterp_value val) {
  RX_VEC_PUSH(&e->vars, v);
  RX_VEC_PUSH(&e->vals, val);
}

static rx_status run_fn(rx_module *m, const rx_graph_fn *f, const rx_ginterp_value *inputs, int n,
                        int depth, const genv *parent, rx_ginterp_value *out);
static rx_status eval_seq(genv *e, const rx_seq *seq, rx_ginterp_value *out);

static rx_status alloc_tensor(genv *e, const rx_sinfo *s, rx_ginterp_value *out,
                              const char *callee) {
  if (s->kind != RX_SINFO_TENSOR || !s->shape || s->ndim < 0 || s->ndim > RX_MAX_NDIM ||
      s->dtype == RX_DTYPE_UNKNOWN)
    return base_status_make(RX_ERR_UNSUPPORTED,
                            "%s: call_tensor(%s): output needs a known dtype and shape",
                            e->fn->name, callee);
  memset(out, 0, sizeof *out);
  out->kind = RX_GV_TENSOR;
  out->dtype = s->dtype;
  out->ndim = s->ndim;
  int64_t total = 1;
  for (int i = 0; i < s->ndim; i++) {
    if (!eval(e, s->shape[i], &out->shape[i]) || out->shape[i] < 0)
      return base_status_make(RX_ERR_INVALID,
                              "%s: call_tensor(%s): output dim %d cannot be evaluated", e->fn->name,
                              callee, i);
    if (out->shape[i] && total > INT64_MAX / 16 / out->shape[i])
      return base_status_make(RX_ERR_OUT_OF_MEMORY, "%s: call_tensor(%s): output too large",
                              e->fn->name, callee);
    total *= out->shape[i];
  }
  size_t bytes = (size_t)total * interp_graph_elem_size(s->dtype);
  out->data = base_calloc(bytes ? bytes : 1, 1);
  return NULL;
}

static void prim_to_tensor(const rx_ginterp_value *p, rx_ginterp_value *t, int64_t *storage) {
  memset(t, 0, sizeof *t);
  t->kind = RX_GV_TENSOR;
  t->dtype = p->dtype;
  t->ndim = 0;
  t->data = storage;
  ir_scalar_bytes(p->dtype, p->f, p->i, storage);
}

static rx_status call_tensor(genv *e, const rx_node *n, rx_ginterp_value *out) {
  const rx_tensor_fn *t = n->tfn;
  const char *callee = n->callee ? n->callee : "?";
  if (!t)
    return base_status_make(RX_ERR_NOT_FOUND, "%s: no tensor_fn named '%s'", e->fn->name, callee);
  const rx_sinfo *const *outs = &n->out;
  int nouts = 1;
  if (!n->out)
    return base_status_make(RX_ERR_INVALID, "%s: call_tensor(%s) without out=", e->fn->name,
                            callee);
  if (n->out->kind == RX_SINFO_TUPLE) {
    outs = n->out->fields;
    nouts = n->out->nfields;
  }
  rx_ginterp_value *ov = base_calloc((size_t)nouts + 1, sizeof *ov);
  rx_interp_arg *args = base_calloc((size_t)t->nparams + 1, sizeof *args);
  int64_t(*scal)[1] = base_calloc((size_t)n->nargs + 1, sizeof *scal);
  rx_status st = NULL;
  int ntargets = ir_inplace_targets(n); /* the first outputs; the rest allocated (fresh_out) */
  for (int i = 0; i < nouts && !st; i++) {
    if (i >= ntargets) {
      st = alloc_tensor(e, outs[i], &ov[i], callee);
      continue;
    }
    /* in place: the output is the target's own storage (a shallow alias, copied out below) */
    const rx_node *tn = n->inplace->kind == RX_NODE_TUPLE ? n->inplace->args[i] : n->inplace;
    const rx_ginterp_value *tv = tn->kind == RX_NODE_VAR ? lookup(e, tn->var) : NULL;
    if (!tv || tv->kind != RX_GV_TENSOR)
      st =
          base_status_make(RX_ERR_INVALID, "%s: call_tensor(%s): inplace target %d is not a tensor",
                           e->fn->name, callee, i);
    else
      ov[i] = *tv;
  }
  int ai = 0, oi = 0, si = 0;
  for (int i = 0; i < t->nparams && !st; i++) {
    rx_param *p = t->params[i];
    rx_interp_arg *a = &args[i];
    if (p->kind == RX_PARAM_SCALAR) {
      if (si >= n->nextra || !eval(e, n->extra_dims[si], &a->value))
        st = base_status_make(RX_ERR_INVALID,
                              "%s: call_tensor(%s): scalar argument %d cannot be evaluated",
                              e->fn->name, callee, si + 1);
      si++;
      continue;
    }
    const rx_ginterp_value *v;
    rx_ginterp_value tmp;
    if (p->is_output) {
      if (oi >= nouts) {
        st = base_status_make(RX_ERR_INVALID, "%s: call_tensor(%s): too few outputs", e->fn->name,
                              callee);
        break;
      }
      v = &ov[oi++];
    } else {
      if (ai >= n->nargs) {
        st = base_status_make(RX_ERR_INVALID, "%s: call_tensor(%s): too few arguments", e->fn->name,
                              callee);
        break;
      }
      const rx_node *arg = n->args[ai];
      v = arg->kind == RX_NODE_VAR ? lookup(e, arg->var) : NULL;
      if (v && v->kind == RX_GV_PRIM) {
        prim_to_tensor(v, &tmp, scal[ai]);
        v = &tmp;
      }
      ai++;
      if (!v || v->kind != RX_GV_TENSOR) {
        st = base_status_make(RX_ERR_INVALID, "%s: call_tensor(%s): argument %d is not a tensor",
                              e->fn->name, callee, ai);
        break;
      }
    }
    a->data = v->data;
    a->ndim = v->ndim;
    a->dtype = v->dtype;
    for (int k = 0; k < v->ndim; k++) a->shape[k] = v->shape[k];
  }
  if (!st) st = interp_run(e->m, t, args, t->nparams, NULL);
  free(args);
  free(scal);
  if (st) {
    for (int i = ntargets; i < nouts; i++) interp_graph_value_free(&ov[i]);
    free(ov);
    return base_status_annotate(st, "%s: call_tensor(%s)", e->fn->name, callee);
  }
  for (int i = 0; i < ntargets; i++) ov[i] = copy_value(&ov[i]);
  if (n->out->kind == RX_SINFO_TUPLE) {
    memset(out, 0, sizeof *out);
    out->kind = RX_GV_TUPLE;
    out->fields = ov;
    out->nfields = nouts;
  } else {
    *out = ov[0];
    free(ov);
  }
  return NULL;
}

static rx_status const_value(genv *e, const rx_node *n, rx_ginterp_value *out) {
  const rx_sinfo *s = n->sinfo;
  if (!s || s->kind != RX_SINFO_TENSOR)
    return base_status_make(RX_ERR_INVALID, "%s: constant without a tensor type", e->fn->name);
  RX_RETURN_IF_ERROR(alloc_tensor(e, s, out, "const"));
  ir_const_bytes(n, out->data, (size_t)interp_graph_numel(out));
  return NULL;
}

static rx_status eval_node(genv *e, const rx_node *n, rx_ginterp_value *out);

/* "reshape(x, t)": the op and its variable arguments, for messages. */
static char *call_text(genv *e, const rx_node *n) {
  rx_strbuf b = {0};
  base_strbuf_printf(&b, "%s(", n->op->name);
  for (int i = 0; i < n->nargs; i++)
    base_strbuf_printf(&b, "%s%s", i ? ", " : "",
                       n->args[i]->kind == RX_NODE_VAR ? n->args[i]->var->name : "...");
  base_strbuf_append(&b, ")");
  char *s = base_arena_strdup(&e->m->arena, b.data);
  base_strbuf_free(&b);
  return s;
}

/* Host-level op calls (ops_op_is_host_call), as the VM runs them: tensor_to_shape reads a 1-D
 * (or 0-d) i64/i32 tensor as a shape value; reshape to or from an unknown shape takes the dims
 * of a shape value (one -1 inferred) and checks the element count. */
static rx_status host_op(genv *e, const rx_node *n, rx_ginterp_value *out) {
  rx_ginterp_value x, s;
  memset(&s, 0, sizeof s);
  RX_RETURN_IF_ERROR(eval_node(e, n->args[0], &x));
  rx_status st = NULL;
  const char *what = call_text(e, n);
  rx_strbuf got = {0};
  value_str(&got, &x);
  if (n->op->id == RX_OP_tensor_to_shape) {
    if (x.kind != RX_GV_TENSOR || (x.dtype != RX_DTYPE_I64 && x.dtype != RX_DTYPE_I32) ||
        x.ndim > 1 || (x.ndim == 1 && x.shape[0] > RX_MAX_NDIM)) {
      st = base_status_make(RX_ERR_INVALID,
                            "%s: %s: expected a 1-D i64 or i32 tensor of at most %d values (or a "
                            "0-d one), got %s",
                            e->fn->name, what, RX_MAX_NDIM, got.data);
    } else {
      out->kind = RX_GV_SHAPE;
      out->ndim = x.ndim ? (int)x.shape[0] : 1;
      for (int i = 0; i < out->ndim; i++)
        out->shape[i] =
            x.dtype == RX_DTYPE_I64 ? ((const int64_t *)x.data)[i] : ((const int32_t *)x.data)[i];
    }
  } else { /* reshape */
    st = eval_node(e, n->args[1], &s);
    rx_strbuf sh = {0};
    if (!st) value_str(&sh, &s);
    if (!st && (x.kind != RX_GV_TENSOR || s.kind != RX_GV_SHAPE)) {
      st = base_status_make(RX_ERR_INVALID, "%s: %s: expected a tensor and a shape, got %s and %s",
                            e->fn->name, what, got.data, sh.data);
    } else if (!st) {
      int64_t have = interp_graph_numel(&x), want = 1;
      int infer = -1;
      for (int i = 0; i < s.ndim && !st; i++) {
        if (s.shape[i] == -1 && infer < 0)
          infer = i;
        else if (s.shape[i] < 0)
          st = base_status_make(RX_ERR_INVALID,
                                "%s: %s: the new shape %s has the negative dim %lld (only one -1 "
                                "is allowed, inferred)",
                                e->fn->name, what, sh.data, (long long)s.shape[i]);
        else if (__builtin_mul_overflow(want, s.shape[i], &want))
          st = base_status_make(RX_ERR_INVALID, "%s: %s: the new shape %s has too many elements",
                                e->fn->name, what, sh.data);
      }
      if (!st && infer >= 0) {
        if (want && have % want == 0) {
          s.shape[infer] = have / want;
          want = have;
        } else {
          st = base_status_make(RX_ERR_INVALID,
                                "%s: %s: cannot reshape %s (%lld elements) to %s: the -1 dim "
                                "cannot be inferred",
                                e->fn->name, what, got.data, (long long)have, sh.data);
        }
      }
      if (!st && want != have)
        st = base_status_make(RX_ERR_INVALID,
                              "%s: %s: cannot reshape %s (%lld elements) to %s (%lld elements): "
                              "the element counts differ",
                              e->fn->name, what, got.data, (long long)have, sh.data,
                              (long long)want);
      if (!st) {
        *out = x; /* takes the data */
        memset(&x, 0, sizeof x);
        out->ndim = s.ndim;
        for (int i = 0; i < s.ndim; i++) out->shape[i] = s.shape[i];
      }
    }
    base_strbuf_free(&sh);
  }
  base_strbuf_free(&got);
  interp_graph_value_free(&x);
  interp_graph_value_free(&s);
  return st;
}

static float load_f(const rx_ginterp_value *v, int64_t i) {
  if (v->dtype == RX_DTYPE_F16) return base_f16_to_f32(((const uint16_t *)v->data)[i]);
  if (v->dtype == RX_DTYPE_BF16) return base_bf16_to_f32(((const uint16_t *)v->data)[i]);
  return ((const float *)v->data)[i];
}

static void store_f(rx_ginterp_value *v, int64_t i, float x) {
  if (v->dtype == RX_DTYPE_F16)
    ((uint16_t *)v->data)[i] = base_f32_to_f16(x);
  else if (v->dtype == RX_DTYPE_BF16)
    ((uint16_t *)v->data)[i] = base_f32_to_bf16(x);
  else
    ((float *)v->data)[i] = x;
}

/* out = a @ b (b transposed when trans_b), a: [..., m, k], b: [k, n] / [n, k] (every row of a's
 * leading dims) or [..., k, n] / [..., n, k] (a batch of the same leading dims), f32
 * accumulation: what the library computes (RX_DISPATCH_CUBLASLT_MATMUL). */
static rx_status matmul_values(const rx_ginterp_value *a, const rx_ginterp_value *b, bool trans,
                               rx_ginterp_value *out) {
  int r = a->ndim;
  if (r < 2 || (b->ndim != 2 && b->ndim != r) || a->dtype != b->dtype ||
      (a->dtype != RX_DTYPE_F16 && a->dtype != RX_DTYPE_BF16 && a->dtype != RX_DTYPE_F32))
    return base_status_make(RX_ERR_INVALID, "expected f16, bf16 or f32 tensors of ranks >= 2");
  int64_t m = a->shape[r - 2], k = a->shape[r - 1], batch = 1;
  for (int d = 0; d < r - 2; d++) batch *= a->shape[d];
  int64_t bk = b->shape[b->ndim - (trans ? 1 : 2)], n = b->shape[b->ndim - (trans ? 2 : 1)];
  bool shared = b->ndim == 2; /* one B for every batch */
  for (int d = 0; d < r - 2 && !shared; d++)
    if (b->shape[d] != a->shape[d]) bk = -1;
  if (bk != k) return base_status_make(RX_ERR_INVALID, "the operands' shapes do not agree");
  *out = *a;
  out->shape[r - 1] = n;
  out->data = base_calloc((size_t)(batch * m * n) + 1, interp_graph_elem_size(a->dtype));
  for (int64_t q = 0; q < batch; q++)
    for (int64_t i = 0; i < m; i++)
      for (int64_t j = 0; j < n; j++) {
        float acc = 0;
        int64_t b0 = shared ? 0 : q * k * n;
        for (int64_t t = 0; t < k; t++)
          acc += load_f(a, (q * m + i) * k + t) * load_f(b, b0 + (trans ? j * k + t : t * n + j));
        store_f(out, (q * m + i) * n + j, acc);
      }
  return NULL;
}

/* call_extern(RX_DISPATCH_CUBLASLT_MATMUL, a, b, trans_b): the library's matmul, on the host. */
static rx_status extern_matmul(genv *e, const rx_node *n, rx_ginterp_value *out) {
  if (n->nargs != 3)
    return base_status_make(RX_ERR_INVALID, "%s: %s takes 3 arguments, got %d", e->fn->name,
                            n->callee, n->nargs);
  rx_ginterp_value v[3];
  memset(v, 0, sizeof v);
  rx_status st = NULL;
  for (int i = 0; i < 3 && !st; i++) st = eval_node(e, n->args[i], &v[i]);
  if (!st && (v[0].kind != RX_GV_TENSOR || v[1].kind != RX_GV_TENSOR || v[2].kind != RX_GV_PRIM))
    st = base_status_make(RX_ERR_INVALID, "expected two tensors and a Prim(i64)");
  if (!st) st = matmul_values(&v[0], &v[1], v[2].i != 0, out);
  for (int i = 0; i < 3; i++) interp_graph_value_free(&v[i]);
  return st ? base_status_annotate(st, "%s: %s", e->fn->name, n->callee) : NULL;
}

/* Any other call_extern: the caller's hook (interp_graph_run_ext), on the evaluated arguments. */
static rx_status extern_hook(genv *e, const rx_node *n, rx_ginterp_value *out) {
  rx_ginterp_value *v = base_calloc((size_t)n->nargs + 1, sizeof *v);
  rx_status st = NULL;
  for (int i = 0; i < n->nargs && !st; i++) st = eval_node(e, n->args[i], &v[i]);
  if (!st) st = e->hook(e->hook_arg, n->callee, v, n->nargs, out);
  for (int i = 0; i < n->nargs; i++) interp_graph_value_free(&v[i]);
  free(v);
  return st ? base_status_annotate(st, "%s: call_extern(%s)", e->fn->name, n->callee) : NULL;
}

/* Evaluates an (atomic or whole-binding) expression into *out (owned). */
static rx_status eval_node(genv *e, const rx_node *n, rx_ginterp_value *out) {
  memset(out, 0, sizeof *out);
  switch (n->kind) {
  case RX_NODE_VAR: {
    const rx_ginterp_value *v = lookup(e, n->var);
    if (!v)
      return base_status_make(RX_ERR_INVALID, "%s: '%s' has no value", e->fn->name, n->var->name);
    *out = copy_value(v);
    return NULL;
  }
  case RX_NODE_CONST:
    return const_value(e, n, out);
  case RX_NODE_PRIM:
    out->kind = RX_GV_PRIM;
    out->dtype = n->prim_dtype;
    if (ir_dtype_is_float(n->prim_dtype)) {
      out->f = n->fvalue;
    } else if (n->prim && !eval(e, n->prim, &out->i)) {
      return base_status_make(RX_ERR_INVALID, "%s: a scalar value cannot be evaluated",
                              e->fn->name);
    }
    return NULL;
  case RX_NODE_SHAPE:
    if (n->ndims > RX_MAX_NDIM)
      return base_status_make(RX_ERR_UNSUPPORTED, "%s: shape of rank %d", e->fn->name, n->ndims);
    out->kind = RX_GV_SHAPE;
    out->ndim = n->ndims;
    for (int i = 0; i < n->ndims; i++)
      if (!eval(e, n->dims[i], &out->shape[i]))
        return base_status_make(RX_ERR_INVALID, "%s: shape dim %d cannot be evaluated", e->fn->name,
                                i);
    return NULL;
  case RX_NODE_TUPLE:
    out->kind = RX_GV_TUPLE;
    out->nfields = n->nargs;
    out->fields = base_calloc((size_t)n->nargs + 1, sizeof *out->fields);
    for (int i = 0; i < n->nargs; i++) {
      rx_status st = eval_node(e, n->args[i], &out->fields[i]);
      if (st) {
        interp_graph_value_free(out);
        return st;
      }
    }
    return NULL;
  case RX_NODE_GET_ITEM: {
    const rx_ginterp_value *t = n->args[0]->kind == RX_NODE_VAR ? lookup(e, n->args[0]->var) : NULL;
    rx_ginterp_value tmp;
    if (!t) {
      RX_RETURN_IF_ERROR(eval_node(e, n->args[0], &tmp));
      if (tmp.kind != RX_GV_TUPLE || n->index < 0 || n->index >= tmp.nfields) {
        interp_graph_value_free(&tmp);
        return base_status_make(RX_ERR_INVALID, "%s: .%d of a non-tuple", e->fn->name, n->index);
      }
      *out = copy_value(&tmp.fields[n->index]);
      interp_graph_value_free(&tmp);
      return NULL;
    }
    if (t->kind != RX_GV_TUPLE || n->index < 0 || n->index >= t->nfields)
      return base_status_make(RX_ERR_INVALID, "%s: .%d of a non-tuple", e->fn->name, n->index);
    *out = copy_value(&t->fields[n->index]);
    return NULL;
  }
  case RX_NODE_CALL:
    if (ops_op_is_host_call(n)) return host_op(e, n, out);
    return base_status_make(RX_ERR_UNSUPPORTED, "%s: op %s must be legalized first", e->fn->name,
                            n->op ? n->op->name : "?");
  case RX_NODE_CALL_EXTERN:
    if (n->callee && !strcmp(n->callee, RX_DISPATCH_CUBLASLT_MATMUL))
      return extern_matmul(e, n, out);
    if (e->hook) return extern_hook(e, n, out);
    return base_status_make(RX_ERR_UNSUPPORTED,
                            "%s: call_extern(%s) is not supported by the graph interpreter",
                            e->fn->name, n->callee ? n->callee : "?");
  case RX_NODE_CALL_TENSOR:
    return call_tensor(e, n, out);
  case RX_NODE_CALL_GRAPH: {
    if (!n->gfn)
      return base_status_make(RX_ERR_NOT_FOUND, "%s: no graph_fn '%s'", e->fn->name,
                              n->callee ? n->callee : "?");
    if (e->depth >= MAX_DEPTH)
      return base_status_make(RX_ERR_UNSUPPORTED, "%s: graph calls nested deeper than %d",
                              e->fn->name, MAX_DEPTH);
    rx_ginterp_value *args = base_calloc((size_t)n->nargs + 1, sizeof *args);
    rx_status st = NULL;
    for (int i = 0; i < n->nargs && !st; i++) st = eval_node(e, n->args[i], &args[i]);
    if (!st) st = run_fn(e->m, n->gfn, args, n->nargs, e->depth + 1, e, out);
    for (int i = 0; i < n->nargs; i++) interp_graph_value_free(&args[i]);
    free(args);
    return st;
  }
  case RX_NODE_IF: {
    rx_ginterp_value c;
    RX_RETURN_IF_ERROR(eval_node(e, n->cond, &c));
    bool taken;
    if (c.kind == RX_GV_PRIM && !ir_dtype_is_float(c.dtype))
      taken = c.i != 0;
    else if (c.kind == RX_GV_TENSOR && c.ndim == 0 && c.dtype == RX_DTYPE_BOOL)
      taken = *(uint8_t *)c.data != 0;
    else {
      interp_graph_value_free(&c);
      return base_status_make(RX_ERR_INVALID, "%s: if condition is not a Prim(bool) or bool[]",
                              e->fn->name);
    }
    interp_graph_value_free(&c);
    const rx_seq *s = taken ? n->then_seq : n->else_seq;
    if (!s) return base_status_make(RX_ERR_INVALID, "%s: if without a branch", e->fn->name);
    size_t nv = e->vars.len;
    rx_status st = eval_seq(e, s, out);
    while (e->vars.len > nv) interp_graph_value_free(&e->vals.data[--e->vars.len]);
    e->vals.len = e->vars.len;
    return st;
  }
  }
  return base_status_make(RX_ERR_INTERNAL, "%s: unknown node", e->fn->name);
}

static rx_status eval_seq(genv *e, const rx_seq *seq, rx_ginterp_value *out) {
  for (int bi = 0; bi < seq->nblocks; bi++) {
    const rx_block *blk = seq->blocks[bi];
    for (int i = 0; i < blk->nbindings; i++) {
      const rx_binding *b = blk->bindings[i];
      rx_ginterp_value v;
      RX_RETURN_IF_ERROR(eval_node(e, b->value, &v));
      if (b->cast) {
        bind_whole(e, b->cast, &v);
        char *what = base_arena_printf(&e->m->arena, "match_cast of '%s'", b->var->name);
        rx_status st = check(e, what, b->cast, &v);
        if (st) {
          interp_graph_value_free(&v);
          return st;
        }
      }
      define(e, b->var, v);
    }
  }
  if (!seq->result) return base_status_make(RX_ERR_INVALID, "%s: no result", e->fn->name);
  return eval_node(e, seq->result, out);
}

static rx_status run_fn(rx_module *m, const rx_graph_fn *f, const rx_ginterp_value *inputs, int n,
                        int depth, const genv *parent, rx_ginterp_value *out) {
  memset(out, 0, sizeof *out);
  if (!f) return base_status_make(RX_ERR_NOT_FOUND, "no graph function to run");
  if (n != f->nparams)
    return base_status_make(RX_ERR_INVALID, "%s expects %d argument%s, got %d", f->name, f->nparams,
                            f->nparams == 1 ? "" : "s", n);
  genv e = {0};
  e.m = m;
  e.fn = f;
  e.depth = depth;
  e.hook = parent ? parent->hook : NULL;
  e.hook_arg = parent ? parent->hook_arg : NULL;
  rx_status st = NULL;
  for (int i = 0; i < n; i++) bind_whole(&e, f->params[i]->sinfo, &inputs[i]);
  for (int i = 0; i < n && !st; i++) {
    char *what = base_arena_printf(&m->arena, "parameter '%s'", f->params[i]->name);
    st = check(&e, what, f->params[i]->sinfo, &inputs[i]);
  }
  for (int i = 0; i < f->nfacts && !st; i++) {
    int64_t v;
    if (!eval(&e, f->facts[i], &v) || !v) {
      char *fs = sym_expr_to_string(f->facts[i]);
      rx_strbuf b = {0};
      for (size_t k = 0; k < e.syms.len; k++)
        base_strbuf_printf(&b, "%s%s = %lld", k ? ", " : "", e.syms.data[k]->name,
                           (long long)e.symv.data[k]);
      char *bs = base_strbuf_take(&b);
      st = base_status_make(RX_ERR_INVALID, "%s: fact %s does not hold (%s)", f->name, fs, bs);
      free(fs);
      free(bs);
    }
  }
  for (int i = 0; i < n && !st; i++) {
    rx_ginterp_value v = inputs[i];
    /* borrowed: never freed (see below) */
    define(&e, f->params[i], v);
  }
  if (!st) st = eval_seq(&e, &f->body, out);
  /* the first nparams values are borrowed inputs */
  for (size_t i = 0; i < e.vals.len; i++)
    if (i >= (size_t)n || st) {
      if (i >= (size_t)n) interp_graph_value_free(&e.vals.data[i]);
    }
  free(e.vars.data);
  free(e.vals.data);
  free(e.syms.data);
  free(e.symv.data);
  if (st) interp_graph_value_free(out);
  return st;
}

rx_status interp_graph_run(rx_module *m, const rx_graph_fn *f, const rx_ginterp_value *inputs,
                           int n, rx_ginterp_value *out_result) {
  return run_fn(m, f, inputs, n, 0, NULL, out_result);
}

rx_status interp_graph_run_ext(rx_module *m, const rx_graph_fn *f, const rx_ginterp_value *inputs,
                               int n, interp_graph_extern_fn hook, void *hook_arg,
                               rx_ginterp_value *out_result) {
  genv top = {.hook = hook, .hook_arg = hook_arg};
  return run_fn(m, f, inputs, n, 0, &top, out_result);
}
