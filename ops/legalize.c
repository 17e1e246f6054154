/* Legalization: an op call -> a tensor program in the canonical loop forms of tests/kernels.
 *
 * The program is written as text in the format of docs/text-format.md and parsed into the
 * module: symbolic variables are interned by name, so the program's `n` is the graph's `n`, and
 * what is added is exactly what `relaxc print` would show. Each op has a generator below that
 * emits loops over the output (an elementwise/injective nest), rows with reduce stages and
 * `local` one-element accumulators (reductions, softmax, norms), or a multiply-accumulate reduce
 * per output point (matmul, conv2d), f16/bf16 math done in f32 and rounded once at the store.
 *
 * Names in a program (buffers, loop variables, locals) never collide with the symbolic variables
 * it uses: they are picked fresh against those. */
#include "../shapes/expr_build.h"
#include "legalize_int.h"

#include "deduce.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* This file's short names for the context and the helpers it shares with ops/attention.c
 * (legalize_int.h). */
typedef lz_ctx L;
typedef lz_opnd opnd;
#define MAXR            LZ_MAXR
#define MAXOP           LZ_MAXOP
#define fail(...)       lz_fail(__VA_ARGS__)
#define S(...)          lz_str(__VA_ARGS__)
#define line(...)       lz_line(__VA_ARGS__)
#define close_(l)       lz_close(l)
#define fresh(l, b)     lz_fresh(l, b)
#define loopvar(l, b)   lz_loopvar(l, b)
#define ex(l, e)        lz_ex(l, e)
#define flit(l, v)      lz_flit(l, v)
#define up(l, t, x)     lz_up(l, t, x)
#define down(l, t, x)   lz_down(l, t, x)
#define load(l, o, idx) lz_load(l, o, idx)
#define load_bcast(...) lz_load_bcast(__VA_ARGS__)
#define arg(l, i)       lz_arg(l, i)

void lz_fail(L *l, const char *fmt, ...) {
  if (l->failed) return;
  l->failed = true;
  va_list ap;
  va_start(ap, fmt);
  char buf[1024];
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  rx_diag_report(l->diag, RX_DIAG_ERROR, l->call->loc, "cannot legalize %s: %s",
                 l->call->op ? l->call->op->name : "call", buf);
}

static const char *sinfo_str(L *l, const rx_sinfo *s) {
  rx_strbuf b = {0};
  rx_sinfo_print(&b, s);
  char *h = rx_strbuf_take(&b);
  const char *r = rx_arena_strdup(&l->m->arena, h);
  free(h);
  return r;
}

/* ---- names ---- */

static bool reserved_word(const char *s) {
  static const char *const reserved[] = {
      "graph_fn",    "tensor_fn",   "extern_fn",  "impure",  "where",  "dataflow", "return",
      "if",          "else",        "out",        "for",     "in",     "reduce",   "init",
      "update",      "let",         "alloc",      "barrier", "global", "shared",   "local",
      "call_tensor", "call_extern", "match_cast", "prim",    "const",  "true",     "false",
      "inf",         "nan",         "select",     "any",     "bind",   "unroll",   "vectorize",
      "Shape",       "Prim",        "Object",     "Func",    "ndim"};
  for (size_t i = 0; i < RX_ARRAY_LEN(reserved); i++)
    if (strcmp(reserved[i], s) == 0) return true;
  rx_dtype dt;
  rx_intrinsic in;
  return rx_dtype_parse(s, strlen(s), &dt) || rx_intrinsic_lookup(s, strlen(s), &in);
}

static bool name_taken(L *l, const char *s) {
  if (reserved_word(s)) return true;
  for (size_t i = 0; i < l->names.len; i++)
    if (strcmp(l->names.data[i], s) == 0) return true;
  return false;
}

/* A fresh name from base (base, base_1, ...), reserved for the program. */
const char *lz_fresh(L *l, const char *base) {
  char buf[96];
  snprintf(buf, sizeof buf, "%.80s", base);
  for (int k = 1; name_taken(l, buf); k++) snprintf(buf, sizeof buf, "%.80s_%d", base, k);
  const char *r = rx_module_intern(l->m, buf, strlen(buf));
  rx_ptrvec_push(&l->names, (void *)r);
  return r;
}

static void reserve_vars(L *l, const rx_expr *e) {
  rx_ptrvec vs = {0};
  rx_expr_collect_vars(e, &vs);
  for (size_t i = 0; i < vs.len; i++) {
    const rx_expr *v = vs.data[i];
    if (!name_taken(l, v->name)) rx_ptrvec_push(&l->names, (void *)v->name);
  }
  rx_ptrvec_free(&vs);
}

static void reserve_sinfo(L *l, const rx_sinfo *s) {
  if (!s) return;
  if (s->kind == RX_SINFO_TENSOR || s->kind == RX_SINFO_SHAPE) {
    for (int i = 0; s->shape && i < s->ndim; i++) reserve_vars(l, s->shape[i]);
  } else if (s->kind == RX_SINFO_PRIM) {
    if (s->value) reserve_vars(l, s->value);
  } else if (s->kind == RX_SINFO_TUPLE) {
    for (int i = 0; i < s->nfields; i++) reserve_sinfo(l, s->fields[i]);
  }
}

/* A loop variable named from base. */
const char *lz_loopvar(L *l, const char *base) {
  const char *n = fresh(l, base);
  rx_ptrvec_push(&l->loops, (void *)rx_expr_var(l->cx, n));
  return n;
}

/* ---- text ---- */

void lz_line(L *l, const char *fmt, ...) {
  for (int i = 0; i < l->ind; i++) rx_strbuf_append(&l->body, "  ");
  va_list ap;
  va_start(ap, fmt);
  rx_strbuf_vprintf(&l->body, fmt, ap);
  va_end(ap);
  rx_strbuf_putc(&l->body, '\n');
}

void lz_close(L *l) {
  l->ind--;
  line(l, "}");
}

/* Arena printf. */
const char *lz_str(L *l, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  rx_strbuf b = {0};
  rx_strbuf_vprintf(&b, fmt, ap);
  va_end(ap);
  char *h = rx_strbuf_take(&b);
  const char *r = rx_arena_strdup(&l->m->arena, h);
  free(h);
  return r;
}

/* Text of a symbolic expression; its variables are recorded as used. */
const char *lz_ex(L *l, const rx_expr *e) {
  rx_ptrvec vs = {0};
  rx_expr_collect_vars(e, &vs);
  for (size_t i = 0; i < vs.len; i++) {
    bool have = false;
    for (size_t k = 0; k < l->used.len && !have; k++) have = l->used.data[k] == vs.data[i];
    if (!have) rx_ptrvec_push(&l->used, vs.data[i]);
  }
  rx_ptrvec_free(&vs);
  rx_strbuf b = {0};
  bool paren = e->kind != RX_EXPR_CONST && e->kind != RX_EXPR_VAR;
  if (paren) rx_strbuf_putc(&b, '(');
  rx_expr_print(&b, e);
  if (paren) rx_strbuf_putc(&b, ')');
  char *h = rx_strbuf_take(&b);
  const char *r = rx_arena_strdup(&l->m->arena, h);
  free(h);
  return r;
}

/* A float literal that the lexer reads back as a float. */
const char *lz_flit(L *l, double v) {
  if (isnan(v)) return "nan";
  if (isinf(v)) return v > 0 ? "inf" : "(-inf)";
  char buf[64];
  snprintf(buf, sizeof buf, "%.17g", v);
  if (!strpbrk(buf, ".eEn")) strcat(buf, ".0");
  return v < 0 ? S(l, "(%s)", buf) : S(l, "%s", buf);
}

/* An integer literal of value v, exact over the whole i64 range (the parser reads
 * -9223372036854775808 as INT64_MIN, a weakly typed literal like the others). */
const char *lz_ilit(L *l, int64_t v) {
  return v < 0 ? S(l, "(%lld)", (long long)v) : S(l, "%lld", (long long)v);
}

/* A literal of dtype dt with value v (an integer one: v truncated, saturated to the i64 range,
 * e.g. clip's unbounded -inf; NaN 0). */
static const char *lit(L *l, rx_dtype dt, double v) {
  if (rx_dtype_is_float(dt)) return flit(l, v);
  if (dt == RX_DTYPE_BOOL) return v != 0 ? "true" : "false";
  if (isnan(v)) return "0";
  if (v >= 9223372036854775808.0) return lz_ilit(l, INT64_MAX);
  if (v <= -9223372036854775808.0) return lz_ilit(l, INT64_MIN);
  return lz_ilit(l, (int64_t)v);
}

/* Scalar literal o as a literal of dtype dt: an integer one keeps its exact value (a double
 * holds integers only up to 2^53). */
static const char *olit(L *l, const opnd *o, rx_dtype dt) {
  if (!o->is_int || rx_dtype_is_float(dt)) return lit(l, dt, o->fval);
  if (dt == RX_DTYPE_BOOL) return o->ival != 0 ? "true" : "false";
  return lz_ilit(l, o->ival);
}

static bool is_half(rx_dtype t) { return t == RX_DTYPE_F16 || t == RX_DTYPE_BF16; }
/* The dtype float math is done in for values of dtype t. */
static rx_dtype mathdt(rx_dtype t) { return is_half(t) ? RX_DTYPE_F32 : t; }
/* text (of dtype t) converted to the math dtype. */
const char *lz_up(L *l, rx_dtype t, const char *text) {
  return is_half(t) ? S(l, "f32(%s)", text) : text;
}
/* text of the math dtype of t converted back to t. */
const char *lz_down(L *l, rx_dtype t, const char *text) {
  return is_half(t) ? S(l, "%s(%s)", rx_dtype_name(t), text) : text;
}

/* The lowest / highest value of dtype t as text (init of max / min reductions). */
static const char *lowest(L *l, rx_dtype t, bool hi) {
  if (rx_dtype_is_float(t)) return hi ? "inf" : "(-inf)";
  switch (t) {
  case RX_DTYPE_I64:
    return hi ? "9223372036854775807" : "(-9223372036854775807 - 1)";
  case RX_DTYPE_I32:
    return hi ? "2147483647" : "(-2147483648)";
  case RX_DTYPE_I16:
    return hi ? "32767" : "(-32768)";
  case RX_DTYPE_I8:
    return hi ? "127" : "(-128)";
  case RX_DTYPE_U8:
    return hi ? "255" : "0";
  case RX_DTYPE_U16:
    return hi ? "65535" : "0";
  case RX_DTYPE_U32:
    return hi ? "4294967295" : "0";
  case RX_DTYPE_U64:
    return hi ? "u64(-1)" : "0"; /* 2^64 - 1: -1 wraps */
  default:
    return hi ? "true" : "false";
  }
}

/* "a, b, c" of n names. */
static const char *join(L *l, const char *const *v, int n) {
  rx_strbuf b = {0};
  for (int i = 0; i < n; i++) {
    if (i) rx_strbuf_append(&b, ", ");
    rx_strbuf_append(&b, v[i]);
  }
  char *h = rx_strbuf_take(&b);
  const char *r = rx_arena_strdup(&l->m->arena, h);
  free(h);
  return r;
}

/* Opens nested loops `for v in 0..ext {` for each dim (a perfect nest). */
static void for_nest(L *l, const char *const *vars, const rx_expr *const *ext, int n) {
  for (int i = 0; i < n; i++) {
    line(l, "for %s in 0..%s {", vars[i], ex(l, ext[i]));
    l->ind++;
  }
}
static void close_n(L *l, int n) {
  for (int i = 0; i < n; i++) close_(l);
}

/* `reduce r0 in 0..e0, r1 in 0..e1 {` */
static void reduce_open(L *l, const char *const *vars, const rx_expr *const *ext, int n) {
  rx_strbuf b = {0};
  for (int i = 0; i < n; i++)
    rx_strbuf_printf(&b, "%s%s in 0..%s", i ? ", " : "", vars[i], ex(l, ext[i]));
  char *h = rx_strbuf_take(&b);
  line(l, "reduce %s {", h);
  free(h);
  l->ind++;
}

/* Loop variables for an n-dim nest: i0, i1, ... */
static void nest_vars(L *l, const char *base, int n, const char **out) {
  for (int i = 0; i < n; i++) out[i] = loopvar(l, S(l, "%s%d", base, i));
}

/* Load of operand o at index texts idx (o->ndim of them). */
const char *lz_load(L *l, const opnd *o, const char *const *idx) {
  if (o->scalar) return o->text;
  return S(l, "%s[%s]", o->name, join(l, idx, o->ndim));
}

/* Load of operand o broadcast to an output nest with vars ov and dims od (rank r): o's dims
 * align from the right; an operand dim that is the output dim takes the loop variable, a dim 1
 * takes 0, anything else (provably 1 only under facts) the variable modulo the dim. */
const char *lz_load_bcast(L *l, const opnd *o, const char *const *ov, const rx_expr *const *od,
                          int r) {
  if (o->scalar) return o->text;
  const char *idx[MAXR];
  for (int k = 0; k < o->ndim; k++) {
    int j = r - o->ndim + k;
    const rx_expr *d = o->shape[k];
    if (rx_expr_is_const(d, 1) && !rx_expr_is_const(od[j], 1))
      idx[k] = "0";
    else if (d == od[j])
      idx[k] = ov[j];
    else
      idx[k] = ex(l, rx_expr_floormod(l->cx, sx_var(l->cx, ov[j]), d));
  }
  return load(l, o, idx);
}

/* ---- operands ---- */

/* Adds a buffer operand for node n of tensor struct info s. */
static int add_buf(L *l, rx_node *n, const rx_sinfo *s, const char *base) {
  if (l->nops == MAXOP) {
    fail(l, "too many operands");
    return -1;
  }
  if (s->kind != RX_SINFO_TENSOR || s->ndim < 0 || !s->shape) {
    fail(l, "argument %s has struct info %s; legalization needs a known shape (use match_cast)",
         base, sinfo_str(l, s));
    return -1;
  }
  if (s->dtype == RX_DTYPE_UNKNOWN) {
    fail(l, "argument %s has an unknown dtype (%s); use match_cast", base, sinfo_str(l, s));
    return -1;
  }
  if (s->ndim > MAXR) {
    fail(l, "argument %s has rank %d; at most %d is supported", base, s->ndim, MAXR);
    return -1;
  }
  opnd *o = &l->ops[l->nops];
  memset(o, 0, sizeof *o);
  o->dtype = s->dtype;
  o->ndim = s->ndim;
  o->shape = s->shape;
  o->node = n;
  o->name = base; /* made fresh later, once every symbolic name is reserved */
  return l->nops++;
}

static const char *const *arg_names(const rx_op *op) {
  static const char *const one[LZ_ARG_NAMES] = {"x", "b", "c", "d", "e", "f", "g", "h"};
  static const char *const two[LZ_ARG_NAMES] = {"a", "b", "c", "d", "e", "f", "g", "h"};
  static const char *const wh[] = {"cond", "a", "b"};
  static const char *const ln[] = {"x", "gamma", "beta"};
  static const char *const rms[] = {"x", "w"};
  static const char *const take[] = {"x", "indices"};
  static const char *const rope[] = {"x", "cs", "sn"};
  static const char *const att[] = {"q", "k", "v", "mask"};
  static const char *const kva[] = {"pages", "k", "v", "slot"};
  static const char *const paged[] = {"q", "pages", "page_table", "kv_len", "q_seq", "q_pos"};
  static const char *const merge[] = {"o", "lse"};
  static const char *const bn[] = {"x", "gamma", "beta", "mean", "var"};
  static const char *const full[] = {"shape", "value"};
  switch (op->id) {
  case RX_OP_where:
    return wh;
  case RX_OP_layer_norm:
    return ln;
  case RX_OP_rms_norm:
  case RX_OP_conv2d:
    return rms;
  case RX_OP_take:
  case RX_OP_take_along_axis:
    return take;
  case RX_OP_rope:
    return rope;
  case RX_OP_attention:
    return att;
  case RX_OP_kv_append:
    return kva;
  case RX_OP_paged_attention:
  case RX_OP_paged_decode_attention:
    return paged;
  case RX_OP_attention_merge:
    return merge;
  case RX_OP_batch_norm:
    return bn;
  case RX_OP_full:
    return full;
  case RX_OP_reshape:
    return one;
  default:
    return op->max_args == 2 && op->min_args == 2 ? two : one;
  }
}

/* Builds the operand list from the call's arguments (see rx_legalize_args). When m_nodes is
 * set, GET_ITEM nodes for fields of tuple-typed variables are built. */
static void collect(L *l) {
  const rx_node *call = l->call;
  const char *const *names = arg_names(call->op);
  for (int i = 0; i < call->nargs && i < LZ_MAXARGS; i++) {
    rx_node *a = call->args[i];
    const rx_sinfo *s = a->sinfo;
    const char *base = i < LZ_ARG_NAMES ? names[i] : "x";
    l->argop[i] = -1;
    l->argn[i] = 0;
    if (!s) {
      fail(l, "argument %d has no struct info (normalize the module first)", i + 1);
      return;
    }
    if (s->kind == RX_SINFO_SHAPE) continue;
    if (s->kind == RX_SINFO_TUPLE) {
      l->argop[i] = l->nops;
      for (int f = 0; f < s->nfields; f++) {
        rx_node *fn;
        if (a->kind == RX_NODE_TUPLE) {
          fn = a->args[f];
        } else {
          fn = rx_node_new(l->m, RX_NODE_GET_ITEM, a->loc);
          fn->args = rx_module_alloc(l->m, sizeof(rx_node *));
          fn->args[0] = a;
          fn->nargs = 1;
          fn->index = f;
        }
        if (add_buf(l, fn, s->fields[f], f < 26 ? S(l, "%c", 'a' + f) : S(l, "t%d", f)) < 0) return;
        l->argn[i]++;
      }
      continue;
    }
    if (s->kind == RX_SINFO_PRIM) {
      if (l->nops == MAXOP) {
        fail(l, "too many operands");
        return;
      }
      opnd *o = &l->ops[l->nops];
      memset(o, 0, sizeof *o);
      o->dtype = s->dtype;
      o->node = a;
      l->argop[i] = l->nops;
      l->argn[i] = 1;
      if (a->kind == RX_NODE_PRIM && rx_dtype_is_float(a->prim_dtype)) {
        o->scalar = o->literal = true;
        o->fval = a->fvalue;
      } else if (s->value && s->value->kind == RX_EXPR_CONST) {
        o->scalar = o->literal = o->is_int = true;
        o->ival = s->value->value;
        o->fval = (double)o->ival;
      } else if (s->value) {
        o->scalar = true;
        o->text = ex(l, s->value); /* i64 integer expression: converted where used */
      } else {                     /* a scalar of unknown value: a 0-d input buffer */
        static const rx_expr *const none[1];
        o->ndim = 0;
        o->shape = none;
        o->name = base;
        l->nops++;
        if (s->dtype == RX_DTYPE_UNKNOWN)
          fail(l, "argument %d is a scalar of unknown dtype", i + 1);
        continue;
      }
      o->ndim = 0;
      l->nops++;
      continue;
    }
    l->argop[i] = l->nops;
    l->argn[i] = 1;
    if (add_buf(l, a, s, base) < 0) return;
  }
}

/* Scalar operand o as text of dtype dt. */
static const char *scalar_as(L *l, const opnd *o, rx_dtype dt) {
  if (o->literal) return olit(l, o, dt);
  if (dt == RX_DTYPE_I64) return o->text;
  return S(l, "%s(%s)", rx_dtype_name(dt), o->text);
}

/* Makes the scalar operands' text of dtype dt (the op's compute dtype). */
static void scalars_to(L *l, rx_dtype dt) {
  for (int i = 0; i < l->nops; i++)
    if (l->ops[i].scalar) l->ops[i].text = scalar_as(l, &l->ops[i], dt);
}

opnd *lz_arg(L *l, int i) {
  RX_ASSERT(i < l->call->nargs && l->argop[i] >= 0);
  return &l->ops[l->argop[i]];
}

/* Adds an output buffer of tensor struct info s. */
static opnd *add_out(L *l, const rx_sinfo *s, const char *base) {
  if (s->kind != RX_SINFO_TENSOR || s->ndim < 0 || !s->shape || s->dtype == RX_DTYPE_UNKNOWN) {
    fail(l, "its result %s has no known shape and dtype (use match_cast on the inputs)",
         sinfo_str(l, s));
    return NULL;
  }
  if (s->ndim > MAXR || l->nouts == 64) {
    fail(l, "its result %s has too many dims or fields", sinfo_str(l, s));
    return NULL;
  }
  opnd *o = &l->outs[l->nouts++];
  memset(o, 0, sizeof *o);
  o->dtype = s->dtype;
  o->ndim = s->ndim;
  o->shape = s->shape;
  o->name = base;
  return o;
}

/* ------------------------------------------------------------------------------------------
 * generators
 * ------------------------------------------------------------------------------------------ */

static int axis_attr(L *l, const char *name, int64_t dflt, int ndim) {
  int64_t a = rx_ops_int_attr(l->call, name, dflt);
  if (a < -ndim || a >= ndim) {
    fail(l, "%s %lld is out of range for rank %d", name, (long long)a, ndim);
    return 0;
  }
  return (int)(a < 0 ? a + ndim : a);
}

/* Axes attribute normalized; none -> all (dflt_all) or the last axis. */
static int axes_attr(L *l, const char *name, int ndim, bool dflt_all, int *out) {
  const rx_attr *a = rx_call_attr(l->call, name);
  int n = 0;
  if (!a) {
    if (dflt_all) {
      for (int i = 0; i < ndim; i++) out[n++] = i;
    } else if (ndim > 0) {
      out[n++] = ndim - 1;
    }
    return n;
  }
  int cnt = a->kind == RX_ATTR_INT ? 1 : a->n;
  for (int i = 0; i < cnt && i < MAXR; i++) {
    int64_t v = a->kind == RX_ATTR_INT ? a->i
                : a->kind == RX_ATTR_INTS
                    ? a->ints[i]
                    : (a->exprs[i]->kind == RX_EXPR_CONST ? a->exprs[i]->value : 0);
    if (v < -ndim || v >= ndim) {
      fail(l, "axis %lld is out of range for rank %d", (long long)v, ndim);
      return 0;
    }
    out[n++] = (int)(v < 0 ? v + ndim : v);
  }
  return n;
}

/* ---- elementwise unary ---- */

/* One output element's value from the loaded input xv (of dtype xt; the output's is yt). */
typedef const char *(*unary_value)(L *l, const char *xv, rx_dtype xt, rx_dtype yt);

static const char *formula_of(const L *l);
static const char *v_math(L *l, const char *xv, rx_dtype xt, rx_dtype yt);
static const char *v_gelu(L *l, const char *xv, rx_dtype xt, rx_dtype yt);

/* The loop nest of a unary op: y[i...] = value(x[i...]). */
static void unary(L *l, unary_value value) {
  opnd *x = arg(l, 0), *y = &l->outs[0];
  scalars_to(l, x->dtype == RX_DTYPE_UNKNOWN ? y->dtype : x->dtype);
  const char *iv[MAXR + 1];
  const rx_expr *ie[MAXR + 1];
  int n = y->ndim;
  nest_vars(l, "i", n, iv);
  for (int d = 0; d < n; d++) ie[d] = y->shape[d];
  if (n == 0) { /* a 0-d y: a loop of one, so that value's lets have a kernel */
    iv[n] = loopvar(l, "u");
    ie[n++] = sx_const(l->cx, 1);
  }
  for_nest(l, iv, ie, n);
  const char *v = value(l, load(l, x, iv), x->dtype, y->dtype);
  line(l, "%s = %s", load(l, y, iv), v);
  close_n(l, n);
}

/* ops.def's formula over the loaded value (neg, abs, not) */
static const char *v_formula(L *l, const char *xv, rx_dtype xt, rx_dtype yt) {
  return S(l, formula_of(l), xv);
}
/* ops.def's formula over the value in f32 (exp, log, ..., silu), rounded back to the dtype */
static const char *v_math(L *l, const char *xv, rx_dtype xt, rx_dtype yt) {
  line(l, "let t: %s = %s", rx_dtype_name(mathdt(xt)), up(l, xt, xv));
  return down(l, xt, S(l, formula_of(l), "t"));
}
static const char *v_cast(L *l, const char *xv, rx_dtype xt, rx_dtype yt) {
  return xt == yt ? xv : S(l, "%s(%s)", rx_dtype_name(yt), xv);
}
static const char *v_relu(L *l, const char *xv, rx_dtype xt, rx_dtype yt) {
  return S(l, "max(%s, %s)", xv, lit(l, xt, 0));
}
/* Integral bound v (or +-inf) of a clip of integer dtype t as a literal of t: past t's range,
 * t's lowest / highest value (a bound of i32 x of inf is 2147483647, not a literal that i32
 * cannot hold). */
static const char *int_bound(L *l, rx_dtype t, double v) {
  bool uns = t == RX_DTYPE_U8 || t == RX_DTYPE_U16 || t == RX_DTYPE_U32 || t == RX_DTYPE_U64;
  int bits = t == RX_DTYPE_BOOL ? 1 : rx_dtype_bits(t);
  double lo = uns || bits == 1 ? 0 : -ldexp(1, bits - 1), hi = ldexp(1, uns ? bits : bits - 1);
  if (bits == 1) hi = 2;
  if (isnan(v) || v <= lo) return lowest(l, t, false);
  if (v >= hi - (bits == 64 ? 0 : 1)) return lowest(l, t, true);
  if (v >= 9223372036854775808.0) /* u64 from 2^63 on: through a wrap */
    return S(l, "u64(%s)", lz_ilit(l, (int64_t)(uint64_t)v));
  return lit(l, t, v);
}

/* min(max(x, lo), hi); on integers the bounds rounded inwards and held to the dtype's range */
static const char *v_clip(L *l, const char *xv, rx_dtype xt, rx_dtype yt) {
  const rx_attr *lo = rx_call_attr(l->call, "min"), *hi = rx_call_attr(l->call, "max");
  double a = lo ? lo->f : -INFINITY, b = hi ? hi->f : INFINITY;
  if (!rx_dtype_is_float(xt))
    return S(l, "min(max(%s, %s), %s)", xv, int_bound(l, xt, ceil(a)), int_bound(l, xt, floor(b)));
  return S(l, "min(max(%s, %s), %s)", xv, lit(l, xt, a), lit(l, xt, b));
}
/* the erf form, or the tanh approximation (approximate="tanh") */
static const char *v_gelu(L *l, const char *xv, rx_dtype xt, rx_dtype yt) {
  line(l, "let t: %s = %s", rx_dtype_name(mathdt(xt)), up(l, xt, xv));
  const rx_attr *ap = rx_call_attr(l->call, "approximate");
  if (ap && ap->s && !strcmp(ap->s, "tanh"))
    return down(l, xt, "0.5 * t * (1.0 + tanh(0.7978845608028654 * (t + 0.044715 * t * t * t)))");
  return down(l, xt, "0.5 * t * (1.0 + erf(t * 0.70710678118654757))");
}

/* check_nonzero: the value, checked (ir.h, RX_INTRIN_CHECK): a 0 fails with the message */
static const char *v_nonzero(L *l, const char *xv, rx_dtype xt, rx_dtype yt) {
  (void)yt;
  const rx_attr *a = rx_call_attr(l->call, "message");
  if (!rx_dtype_is_int(xt) || !a || a->kind != RX_ATTR_STR) {
    fail(l, "check_nonzero expects an integer tensor and a message");
    return "0";
  }
  rx_strbuf msg = {0}, lit = {0};
  if (l->site) l->site_used = true;
  rx_strbuf_printf(&msg, "%s: %s", l->site ? l->site : "check_nonzero", a->s);
  rx_strbuf_json_string(&lit, msg.data);
  const char *v = fresh(l, "v"),
             *r = S(l, "%s(check(%s != 0, i64(%s), %s))", rx_dtype_name(xt), v, v, lit.data);
  line(l, "let %s: %s = %s", v, rx_dtype_name(xt), xv);
  rx_strbuf_free(&msg);
  rx_strbuf_free(&lit);
  return r;
}

static void gen_unary(L *l) { unary(l, v_formula); }
static void gen_check_nonzero(L *l) { unary(l, v_nonzero); }
static void gen_unary_math(L *l) { unary(l, v_math); }
static void gen_cast(L *l) { unary(l, v_cast); }
static void gen_relu(L *l) { unary(l, v_relu); }
static void gen_clip(L *l) { unary(l, v_clip); }
static void gen_gelu(L *l) { unary(l, v_gelu); }

/* ---- elementwise binary and where (broadcast) ---- */

/* a ^ b of floats (math dtype t) as C's pow defines it where the languages' pow does not (GLSL
 * and Metal leave a negative a or a 0 with b <= 0 undefined): a negative a to an integer b
 * takes the sign of that power (odd b: negative), to any other b is NaN, and a ^ 0 is 1. */
static const char *float_power(L *l, const char *av, const char *bv, rx_dtype t) {
  const char *a = fresh(l, "pa"), *b = fresh(l, "pb"), *m = fresh(l, "pm");
  const char *tn = rx_dtype_name(t), *zero = lit(l, t, 0);
  line(l, "let %s: %s = %s", a, tn, av);
  line(l, "let %s: %s = %s", b, tn, bv);
  line(l, "let %s: %s = pow(abs(%s), %s)", m, tn, a, b);
  return S(l,
           "select(%s == %s, %s, select(%s < %s, select(floor(%s) == %s, select(floor(%s * %s) * "
           "%s == %s, %s, -%s), nan), %s))",
           b, zero, lit(l, t, 1), a, zero, b, b, b, lit(l, t, 0.5), lit(l, t, 2), b, m, m, m);
}

/* a ^ b of integers (dtype t) as the text of the value, exactly (wrapping as the dtype's
 * products do), by repeated squaring over the bits of b; a negative b counts as 0 (a ^ b is 1). */
static const char *int_power(L *l, const char *av, const char *bv, rx_dtype t) {
  const char *tn = rx_dtype_name(t), *p = fresh(l, "p"), *k = loopvar(l, "k");
  line(l, "alloc %s: %s[3] local", p, tn); /* the result, the base squared k times, b >> k */
  line(l, "%s[0] = %s", p, lit(l, t, 1));
  line(l, "%s[1] = %s", p, av);
  line(l, "%s[2] = max(%s, %s)", p, bv, lit(l, t, 0));
  line(l, "for %s in 0..%d {", k, rx_dtype_bits(t));
  l->ind++;
  line(l, "if %s[2] %% 2 == 1 {", p);
  line(l, "  %s[0] = %s[0] * %s[1]", p, p, p);
  line(l, "}");
  line(l, "if %s[2] > 1 {", p);
  line(l, "  %s[1] = %s[1] * %s[1]", p, p, p);
  line(l, "}");
  line(l, "%s[2] = %s[2] // 2", p, p);
  close_(l);
  return S(l, "%s[0]", p);
}

/* power of operands a, b of dtype t: one element per point of the output (a loop of one for a
 * 0-d output, so that the lets and locals have a kernel) */
static void gen_power(L *l, opnd *a, opnd *b, rx_dtype t) {
  opnd *y = &l->outs[0];
  const char *iv[MAXR + 1];
  const rx_expr *ie[MAXR + 1];
  int n = y->ndim;
  nest_vars(l, "i", n, iv);
  for (int d = 0; d < n; d++) ie[d] = y->shape[d];
  if (n == 0) {
    iv[n] = loopvar(l, "u");
    ie[n++] = sx_const(l->cx, 1);
  }
  for_nest(l, iv, ie, n);
  const char *av = load_bcast(l, a, iv, y->shape, y->ndim);
  const char *bv = load_bcast(l, b, iv, y->shape, y->ndim);
  const char *v = rx_dtype_is_float(t)
                      ? down(l, t, float_power(l, up(l, t, av), up(l, t, bv), mathdt(t)))
                      : int_power(l, av, bv, t);
  line(l, "%s = %s", load(l, y, iv), v);
  close_n(l, n);
}

static void gen_binary(L *l) {
  rx_op_id op = l->call->op->id;
  const char *f = formula_of(l);
  opnd *y = &l->outs[0];
  bool is_where = op == RX_OP_where;
  opnd *a = arg(l, is_where ? 1 : 0), *b = arg(l, is_where ? 2 : 1);
  rx_dtype ct = !a->scalar ? a->dtype : !b->scalar ? b->dtype : is_where ? y->dtype : a->dtype;
  if (ct == RX_DTYPE_UNKNOWN) ct = y->dtype;
  if (is_where) {
    opnd *c = arg(l, 0);
    if (c->scalar) c->text = scalar_as(l, c, RX_DTYPE_BOOL);
    if (a->scalar) a->text = scalar_as(l, a, ct);
    if (b->scalar) b->text = scalar_as(l, b, ct);
  } else {
    scalars_to(l, ct);
  }
  if (op == RX_OP_power || op == RX_OP_pow) {
    gen_power(l, a, b, ct);
    return;
  }
  bool fl = rx_dtype_is_float(ct);
  const char *iv[MAXR];
  nest_vars(l, "i", y->ndim, iv);
  for_nest(l, iv, y->shape, y->ndim);
  const char *av = load_bcast(l, a, iv, y->shape, y->ndim);
  const char *bv = load_bcast(l, b, iv, y->shape, y->ndim);
  const char *v;
  if (is_where) {
    v = S(l, "select(%s, %s, %s)", load_bcast(l, arg(l, 0), iv, y->shape, y->ndim), av, bv);
  } else if (f) { /* ops.def's formula; max and min take the typed operand first */
    bool swap = a->scalar && (op == RX_OP_maximum || op == RX_OP_minimum);
    v = swap ? S(l, f, bv, av) : S(l, f, av, bv);
  } else { /* divide */
    v = S(l, fl ? "%s / %s" : "%s // %s", av, bv);
  }
  line(l, "%s = %s", load(l, y, iv), v);
  close_n(l, y->ndim);
}

/* yv = the sum over the reduce variables kv (extents ke) of av * bv; f16 and bf16 results
 * accumulate in an f32 local (av and bv already f32 then), rounded once at the end. */
static void sum_of_products(L *l, const char *yv, rx_dtype t, const char *const *kv,
                            const rx_expr *const *ke, int nk, const char *av, const char *bv) {
  if (is_half(t)) {
    const char *acc = fresh(l, "acc");
    line(l, "alloc %s: f32[1] local", acc);
    reduce_open(l, kv, ke, nk);
    line(l, "init { %s[0] = 0.0 }", acc);
    line(l, "update { %s[0] = %s[0] + %s * %s }", acc, acc, av, bv);
    close_(l);
    line(l, "%s = %s(%s[0])", yv, rx_dtype_name(t), acc);
  } else {
    reduce_open(l, kv, ke, nk);
    line(l, "init { %s = %s }", yv, lit(l, t, 0));
    line(l, "update { %s = %s + %s * %s }", yv, yv, av, bv);
    close_(l);
  }
}

/* ---- matmul ---- */

static void gen_matmul(L *l) {
  opnd *a = arg(l, 0), *b = arg(l, 1), *y = &l->outs[0];
  if (a->scalar || b->scalar || a->ndim < 1 || b->ndim < 1) {
    fail(l, "matmul expects tensor operands of rank >= 1");
    return;
  }
  int ra = a->ndim >= 2 ? a->ndim - 2 : 0, rb = b->ndim >= 2 ? b->ndim - 2 : 0;
  int batch = y->ndim - (a->ndim >= 2) - (b->ndim >= 2);
  const char *iv[MAXR];
  nest_vars(l, "i", y->ndim, iv);
  const char *r = loopvar(l, "r");
  const rx_expr *k = a->shape[a->ndim - 1];
  const char *ai[MAXR], *bi[MAXR];
  for (int d = 0; d < ra; d++) {
    int j = batch - ra + d;
    ai[d] = rx_expr_is_const(a->shape[d], 1) && !rx_expr_is_const(y->shape[j], 1) ? "0"
            : a->shape[d] == y->shape[j]
                ? iv[j]
                : ex(l, rx_expr_floormod(l->cx, sx_var(l->cx, iv[j]), a->shape[d]));
  }
  for (int d = 0; d < rb; d++) {
    int j = batch - rb + d;
    bi[d] = rx_expr_is_const(b->shape[d], 1) && !rx_expr_is_const(y->shape[j], 1) ? "0"
            : b->shape[d] == y->shape[j]
                ? iv[j]
                : ex(l, rx_expr_floormod(l->cx, sx_var(l->cx, iv[j]), b->shape[d]));
  }
  int pos = batch;
  if (a->ndim >= 2) ai[ra] = iv[pos++];
  ai[a->ndim - 1] = r;
  if (b->ndim >= 2) {
    bi[rb] = r;
    bi[rb + 1] = iv[pos++];
  } else {
    bi[0] = r;
  }
  for_nest(l, iv, y->shape, y->ndim);
  const char *av = load(l, a, ai), *bv = load(l, b, bi), *yv = load(l, y, iv);
  const char *kv[1] = {r};
  const rx_expr *ke[1] = {k};
  rx_dtype t = y->dtype;
  if (is_half(t))
    sum_of_products(l, yv, t, kv, ke, 1, S(l, "f32(%s)", av), S(l, "f32(%s)", bv));
  else
    sum_of_products(l, yv, t, kv, ke, 1, av, bv);
  close_n(l, y->ndim);
}

/* ---- shape manipulation ---- */

/* Row-major flat index of vars over dims. */
static const rx_expr *flat_index(L *l, const char *const *vars, const rx_expr *const *dims, int n) {
  const rx_expr *f = sx_const(l->cx, 0);
  for (int i = 0; i < n; i++)
    f = rx_expr_add(l->cx, rx_expr_mul(l->cx, f, dims[i]), sx_var(l->cx, vars[i]));
  return f;
}

/* Indices into dims (rank n) of flat index f: (f // stride_k) % dim_k (no % for the first). */
static void unflatten(L *l, const rx_expr *f, const rx_expr *const *dims, int n, const char **out) {
  for (int k = 0; k < n; k++) {
    const rx_expr *stride = sx_const(l->cx, 1);
    for (int j = k + 1; j < n; j++) stride = rx_expr_mul(l->cx, stride, dims[j]);
    const rx_expr *e = rx_expr_floordiv(l->cx, f, stride);
    if (k > 0) e = rx_expr_floormod(l->cx, e, dims[k]);
    out[k] = ex(l, e);
  }
}

/* y = x viewed with another shape: flat-index copy. */
static void gen_reshape_like(L *l, opnd *x, opnd *y) {
  const char *iv[MAXR], *xi[MAXR];
  nest_vars(l, "i", y->ndim, iv);
  for_nest(l, iv, y->shape, y->ndim);
  unflatten(l, flat_index(l, iv, y->shape, y->ndim), x->shape, x->ndim, xi);
  line(l, "%s = %s", load(l, y, iv), load(l, x, xi));
  close_n(l, y->ndim);
}

/* expand_dims / squeeze: the out dims that are not inserted (or the x dims not removed) map
 * one to one; removed dims are indexed by 0. */
static void gen_unit_dims(L *l, bool expand) {
  opnd *x = arg(l, 0), *y = &l->outs[0];
  bool unit[MAXR] = {false}; /* expand: inserted out dims; squeeze: removed x dims */
  int big = expand ? y->ndim : x->ndim, small = expand ? x->ndim : y->ndim;
  const rx_attr *a = rx_call_attr(l->call, "axes");
  int axes[MAXR], na = 0;
  if (a) {
    na = axes_attr(l, "axes", big, false, axes);
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
  const char *iv[MAXR], *xi[MAXR];
  nest_vars(l, "i", y->ndim, iv);
  for_nest(l, iv, y->shape, y->ndim);
  for (int i = 0, j = 0; i < big; i++) {
    if (expand) {
      if (!unit[i]) xi[j++] = iv[i];
    } else {
      xi[i] = unit[i] ? "0" : iv[j++];
    }
  }
  line(l, "%s = %s", load(l, y, iv), load(l, x, xi));
  close_n(l, y->ndim);
}

static void gen_permute(L *l) {
  opnd *x = arg(l, 0), *y = &l->outs[0];
  int axes[MAXR], na = 0;
  const rx_attr *a = rx_call_attr(l->call, "axes");
  if (a) {
    na = axes_attr(l, "axes", x->ndim, false, axes);
  } else {
    for (int i = 0; i < x->ndim; i++) axes[na++] = x->ndim - 1 - i;
  }
  if (l->failed || na != x->ndim) {
    fail(l, "permute expects %d axes", x->ndim);
    return;
  }
  /* iterate over x (reads in order, like tests/kernels/transpose.rx), store permuted */
  const char *iv[MAXR], *yi[MAXR];
  nest_vars(l, "i", x->ndim, iv);
  for (int p = 0; p < na; p++) yi[p] = iv[axes[p]];
  for_nest(l, iv, x->shape, x->ndim);
  line(l, "%s = %s", load(l, y, yi), load(l, x, iv));
  close_n(l, x->ndim);
}

static void gen_concat(L *l) {
  opnd *y = &l->outs[0];
  int first = l->argop[0], n = l->argn[0];
  if (first < 0 || n < 1) {
    fail(l, "concat expects a tuple of tensors");
    return;
  }
  int axis = axis_attr(l, "axis", 0, y->ndim);
  const char *iv[MAXR];
  nest_vars(l, "i", y->ndim, iv);
  for_nest(l, iv, y->shape, y->ndim);
  /* select(i < off1, a[.., i, ..], select(i < off2, b[.., i - off1, ..], c[.., i - off2, ..])) */
  const rx_expr *off = sx_const(l->cx, 0);
  const char *parts[64];
  const char *conds[64];
  for (int f = 0; f < n && f < 64; f++) {
    opnd *o = &l->ops[first + f];
    const char *xi[MAXR];
    for (int d = 0; d < y->ndim; d++) xi[d] = iv[d];
    xi[axis] = ex(l, rx_expr_sub(l->cx, sx_var(l->cx, iv[axis]), off));
    parts[f] = load(l, o, xi);
    off = rx_expr_add(l->cx, off, o->shape[axis]);
    conds[f] = ex(l, rx_expr_cmp(l->cx, RX_EXPR_LT, sx_var(l->cx, iv[axis]), off));
  }
  const char *v = parts[n - 1];
  for (int f = n - 2; f >= 0; f--) v = S(l, "select(%s, %s, %s)", conds[f], parts[f], v);
  line(l, "%s = %s", load(l, y, iv), v);
  close_n(l, y->ndim);
}

static void gen_split(L *l) {
  opnd *x = arg(l, 0);
  int axis = axis_attr(l, "axis", 0, x->ndim);
  const rx_expr *off = sx_const(l->cx, 0);
  for (int o = 0; o < l->nouts && !l->failed; o++) {
    opnd *y = &l->outs[o];
    const char *iv[MAXR], *xi[MAXR];
    nest_vars(l, "i", y->ndim, iv);
    for_nest(l, iv, y->shape, y->ndim);
    for (int d = 0; d < y->ndim; d++) xi[d] = iv[d];
    xi[axis] = ex(l, rx_expr_add(l->cx, sx_var(l->cx, iv[axis]), off));
    line(l, "%s = %s", load(l, y, iv), load(l, x, xi));
    close_n(l, y->ndim);
    off = rx_expr_add(l->cx, off, y->shape[axis]);
  }
}

static const rx_expr *attr_expr(L *l, const rx_attr *a, int i) {
  if (a->kind == RX_ATTR_EXPRS) return a->exprs[i];
  if (a->kind == RX_ATTR_INTS) return sx_const(l->cx, a->ints[i]);
  return sx_const(l->cx, a->i);
}

/* begin normalized against d (negative from the end) and clamped to [lo, hi] (as deduction). */
static const rx_expr *clamp_index(L *l, const rx_expr *v, const rx_expr *d, const rx_expr *lo,
                                  const rx_expr *hi) {
  rx_expr_ctx *cx = l->cx;
  const rx_expr *n = v->kind == RX_EXPR_CONST
                         ? (v->value < 0 ? rx_expr_add(cx, v, d) : v)
                         : rx_expr_select(cx, rx_expr_cmp(cx, RX_EXPR_LT, v, sx_const(l->cx, 0)),
                                          rx_expr_add(cx, v, d), v);
  return rx_expr_min(cx, rx_expr_max(cx, n, lo), hi);
}

static void gen_strided_slice(L *l) {
  opnd *x = arg(l, 0), *y = &l->outs[0];
  const rx_attr *begin = rx_call_attr(l->call, "begin"),
                *strides = rx_call_attr(l->call, "strides");
  int axes[MAXR];
  int na = axes_attr(l, "axes", x->ndim, false, axes);
  if (l->failed || !begin) return;
  const char *iv[MAXR], *xi[MAXR];
  nest_vars(l, "i", y->ndim, iv);
  for (int d = 0; d < x->ndim; d++) xi[d] = iv[d];
  for (int i = 0; i < na; i++) {
    const rx_expr *d = x->shape[axes[i]];
    int64_t s = strides ? attr_expr(l, strides, i)->value : 1;
    const rx_expr *b = s > 0 ? clamp_index(l, attr_expr(l, begin, i), d, sx_const(l->cx, 0), d)
                             : clamp_index(l, attr_expr(l, begin, i), d, sx_const(l->cx, -1),
                                           rx_expr_sub(l->cx, d, sx_const(l->cx, 1)));
    xi[axes[i]] =
        ex(l, rx_expr_add(l->cx, b,
                          rx_expr_mul(l->cx, sx_var(l->cx, iv[axes[i]]), sx_const(l->cx, s))));
  }
  for_nest(l, iv, y->shape, y->ndim);
  line(l, "%s = %s", load(l, y, iv), load(l, x, xi));
  close_n(l, y->ndim);
}

const char *lz_data_index(L *l, const char *t, const rx_expr *d, int axis) {
  const char *dt = ex(l, d), *k = fresh(l, "k"), *w = fresh(l, "w");
  rx_strbuf msg = {0}, lit = {0};
  if (l->site) l->site_used = true;
  rx_strbuf_printf(&msg, "%s: index %%v out of range [-%s, %s) on axis %d",
                   l->site ? l->site : l->call->op->name, dt, dt, axis);
  rx_strbuf_json_string(&lit, msg.data);
  line(l, "let %s: i64 = check(%s >= -%s && %s < %s, %s, %s)", k, t, dt, t, dt, t, lit.data);
  /* d - 1 as one literal where d is one (a bare `2 - 1` folds to a 0 / 1 the parser types bool) */
  const char *last = ex(l, rx_expr_sub(l->cx, d, sx_const(l->cx, 1)));
  line(l, "let %s: i64 = max(min(select(%s < 0, %s + %s, %s), %s), 0)", w, k, k, dt, k, last);
  rx_strbuf_free(&msg);
  rx_strbuf_free(&lit);
  return w;
}

static void gen_take(L *l) {
  opnd *x = arg(l, 0), *ind = arg(l, 1), *y = &l->outs[0];
  if (ind->scalar) {
    fail(l, "take expects a tensor of indices");
    return;
  }
  int axis = axis_attr(l, "axis", 0, x->ndim);
  const char *iv[MAXR], *xi[MAXR], *ii[MAXR];
  nest_vars(l, "i", y->ndim, iv);
  for_nest(l, iv, y->shape, y->ndim);
  for (int d = 0; d < ind->ndim; d++) ii[d] = iv[axis + d];
  const char *t = fresh(l, "t");
  const char *iv64 =
      ind->dtype == RX_DTYPE_I64 ? load(l, ind, ii) : S(l, "i64(%s)", load(l, ind, ii));
  line(l, "let %s: i64 = %s", t, iv64);
  for (int d = 0; d < axis; d++) xi[d] = iv[d];
  xi[axis] = lz_data_index(l, t, x->shape[axis], axis);
  for (int d = axis + 1; d < x->ndim; d++) xi[d] = iv[d - 1 + ind->ndim];
  line(l, "%s = %s", load(l, y, iv), load(l, x, xi));
  close_n(l, y->ndim);
}

/* take_along_axis: per element of the indices, x at that index along axis (negative counts
 * from the end) and at the element's own position along the other axes. */
static void gen_take_along_axis(L *l) {
  opnd *x = arg(l, 0), *ind = arg(l, 1), *y = &l->outs[0];
  if (ind->scalar || x->scalar) {
    fail(l, "take_along_axis expects tensors");
    return;
  }
  int axis = axis_attr(l, "axis", 0, x->ndim);
  const char *iv[MAXR], *xi[MAXR];
  nest_vars(l, "i", y->ndim, iv);
  for_nest(l, iv, y->shape, y->ndim);
  const char *t = fresh(l, "t");
  const char *iv64 =
      ind->dtype == RX_DTYPE_I64 ? load(l, ind, iv) : S(l, "i64(%s)", load(l, ind, iv));
  line(l, "let %s: i64 = %s", t, iv64);
  for (int d = 0; d < x->ndim; d++) xi[d] = iv[d];
  xi[axis] = lz_data_index(l, t, x->shape[axis], axis);
  line(l, "%s = %s", load(l, y, iv), load(l, x, xi));
  close_n(l, y->ndim);
}

/* ---- reductions ---- */

static void gen_reduce(L *l) {
  rx_op_id op = l->call->op->id;
  const char *name = l->call->op->name;
  opnd *x = arg(l, 0), *y = &l->outs[0];
  if (x->scalar) {
    fail(l, "%s of a scalar", name);
    return;
  }
  int axes[MAXR];
  int na = axes_attr(l, "axes", x->ndim, true, axes);
  bool keep = rx_ops_int_attr(l->call, "keepdims", 0) != 0;
  bool red[MAXR] = {false};
  for (int i = 0; i < na; i++) red[axes[i]] = true;
  const char *iv[MAXR], *rv[MAXR], *xi[MAXR], *yi[MAXR];
  const rx_expr *ie[MAXR], *re[MAXR];
  int ni = 0, nr = 0, ny = 0;
  const rx_expr *count = sx_const(l->cx, 1);
  for (int d = 0; d < x->ndim; d++) {
    if (red[d]) {
      rv[nr] = loopvar(l, S(l, "r%d", nr));
      re[nr] = x->shape[d];
      xi[d] = rv[nr++];
      count = rx_expr_mul(l->cx, count, x->shape[d]);
      if (keep) yi[ny++] = "0";
    } else {
      iv[ni] = loopvar(l, S(l, "i%d", ni));
      ie[ni] = x->shape[d];
      xi[d] = iv[ni++];
      yi[ny++] = iv[ni - 1];
    }
  }
  rx_dtype t = x->dtype;
  bool sum = op == RX_OP_sum || op == RX_OP_mean, prod = op == RX_OP_prod;
  rx_dtype at = (sum || prod) ? mathdt(t) : t;
  for_nest(l, iv, ie, ni);
  const char *acc = fresh(l, sum ? "s" : prod ? "p" : "m");
  line(l, "alloc %s: %s[1] local", acc, rx_dtype_name(at));
  reduce_open(l, rv, re, nr);
  const char *xv = load(l, x, xi);
  if (at != t) xv = S(l, "%s(%s)", rx_dtype_name(at), xv);
  if (sum || prod) {
    line(l, "init { %s[0] = %s }", acc, lit(l, at, prod ? 1 : 0));
    line(l, "update { %s[0] = %s[0] %s %s }", acc, acc, prod ? "*" : "+", xv);
  } else {
    bool mx = op == RX_OP_max;
    line(l, "init { %s[0] = %s }", acc, lowest(l, t, !mx));
    line(l, "update { %s[0] = %s(%s[0], %s) }", acc, mx ? "max" : "min", acc, xv);
  }
  close_(l);
  const char *v = S(l, "%s[0]", acc);
  if (op == RX_OP_mean) {
    if (!rx_dtype_is_float(t)) {
      fail(l, "mean of an integer tensor (cast to a float dtype first)");
      return;
    }
    v = S(l, "%s / %s(%s)", v, rx_dtype_name(at), ex(l, count));
  }
  if (at != t) v = S(l, "%s(%s)", rx_dtype_name(t), v);
  line(l, "%s = %s", load(l, y, yi), v);
  close_n(l, ni);
}

/* argmax / argmin along one axis: per output point a reduce that keeps the extreme m and its
 * index k, taking element r when it is strictly beyond m (first of ties), or beyond or equal
 * with select_last_index (last of ties); a NaN is taken before any number and then kept (the
 * first NaN; the last with select_last_index), as NumPy's argmax. f16/bf16 compare in f32. The
 * update is no combiner of the row_reduction rule, so the fallback runs each row serially in one
 * thread. */
static void gen_argmax(L *l) {
  bool amax = l->call->op->id == RX_OP_argmax;
  bool last = rx_ops_int_attr(l->call, "select_last_index", 0) != 0;
  bool keep = rx_ops_int_attr(l->call, "keepdims", 0) != 0;
  opnd *x = arg(l, 0), *y = &l->outs[0];
  if (x->scalar || x->ndim == 0) {
    fail(l, "%s of a 0-d tensor", l->call->op->name);
    return;
  }
  int axis = axis_attr(l, "axis", -1, x->ndim);
  const char *iv[MAXR], *xi[MAXR], *yi[MAXR];
  const rx_expr *ie[MAXR];
  int ni = 0, ny = 0;
  for (int d = 0; d < x->ndim; d++) {
    if (d == axis) {
      if (keep) yi[ny++] = "0";
      continue;
    }
    iv[ni] = loopvar(l, S(l, "i%d", ni));
    ie[ni] = x->shape[d];
    xi[d] = yi[ny++] = iv[ni++];
  }
  const char *r = loopvar(l, "r");
  xi[axis] = r;
  rx_dtype t = x->dtype, mt = mathdt(t);
  for_nest(l, iv, ie, ni);
  const char *m = fresh(l, "m"), *k = fresh(l, "k"), *v = fresh(l, "v"), *tk = fresh(l, "take");
  line(l, "alloc %s: %s[1] local", m, rx_dtype_name(mt));
  line(l, "alloc %s: i64[1] local", k);
  reduce_open(l, &r, &x->shape[axis], 1);
  line(l, "init { %s[0] = %s; %s[0] = 0 }", m, lowest(l, mt, !amax), k);
  line(l, "update {");
  l->ind++;
  line(l, "let %s: %s = %s", v, rx_dtype_name(mt), up(l, t, load(l, x, xi)));
  const char *cmp = amax ? (last ? ">=" : ">") : (last ? "<=" : "<");
  const char *nan = !rx_dtype_is_float(t) ? ""
                    : last                ? S(l, " || %s != %s", v, v)
                                          : S(l, " || (%s != %s && %s[0] == %s[0])", v, v, m, m);
  line(l, "let %s: bool = %s %s %s[0]%s", tk, v, cmp, m, nan);
  line(l, "%s[0] = select(%s, i64(%s), %s[0])", k, tk, r, k);
  line(l, "%s[0] = select(%s, %s, %s[0])", m, tk, v, m);
  close_(l);
  close_(l);
  line(l, "%s = %s[0]", load(l, y, yi), k);
  close_n(l, ni);
}

/* Loop variables i0, i1, ... over the dims of x other than axis: the loops in iv and ie (their
 * count returned), xi[d] the variable of dim d (xi[axis] is the caller's). */
static int other_dims(L *l, const opnd *x, int axis, const char **iv, const rx_expr **ie,
                      const char **xi) {
  int ni = 0;
  for (int d = 0; d < x->ndim; d++) {
    if (d == axis) continue;
    iv[ni] = loopvar(l, S(l, "i%d", ni));
    ie[ni] = x->shape[d];
    xi[d] = iv[ni++];
  }
  return ni;
}

/* cumsum along one axis: per point of the other dims a serial loop over the axis (from its end
 * with reverse) that adds each element to a local running sum (f32 for f16/bf16) and stores the
 * sum after the add, or before it when exclusive. A scan: the fallback binds the other dims to
 * threads and each thread runs its line serially (correct; no parallel scan yet): a 1-D x is one
 * thread. */
static void gen_cumsum(L *l) {
  bool excl = rx_ops_int_attr(l->call, "exclusive", 0) != 0;
  bool rev = rx_ops_int_attr(l->call, "reverse", 0) != 0;
  opnd *x = arg(l, 0), *y = &l->outs[0];
  if (x->scalar || x->ndim == 0) {
    fail(l, "cumsum of a 0-d tensor");
    return;
  }
  int axis = axis_attr(l, "axis", -1, x->ndim);
  const char *iv[MAXR], *xi[MAXR];
  const rx_expr *ie[MAXR];
  int ni = other_dims(l, x, axis, iv, ie, xi);
  const char *r = loopvar(l, "r");
  const rx_expr *len = x->shape[axis];
  xi[axis] =
      rev ? ex(l, rx_expr_sub(l->cx, rx_expr_sub(l->cx, len, sx_const(l->cx, 1)), sx_var(l->cx, r)))
          : r;
  rx_dtype t = x->dtype, at = mathdt(t);
  if (ni == 0) { /* a 1-D x: one line, in a loop of one so that the local has a kernel */
    iv[ni] = loopvar(l, "u");
    ie[ni++] = sx_const(l->cx, 1);
  }
  for_nest(l, iv, ie, ni);
  const char *s = fresh(l, "s");
  line(l, "alloc %s: %s[1] local", s, rx_dtype_name(at));
  line(l, "%s[0] = %s", s, lit(l, at, 0));
  line(l, "for %s in 0..%s {", r, ex(l, len));
  l->ind++;
  const char *xv = load(l, x, xi), *yv = load(l, y, xi);
  if (at != t) xv = S(l, "%s(%s)", rx_dtype_name(at), xv);
  const char *sv = at != t ? S(l, "%s(%s[0])", rx_dtype_name(t), s) : S(l, "%s[0]", s);
  if (excl) line(l, "%s = %s", yv, sv);
  line(l, "%s[0] = %s[0] + %s", s, s, xv);
  if (!excl) line(l, "%s = %s", yv, sv);
  close_(l);
  close_n(l, ni);
}

/* topk along one axis: per point of the other dims (a loop of one for a 1-D x), K serial passes
 * over the axis; pass s takes the best element among those ordered after the one pass s - 1
 * took (largest: a smaller value, or an equal one at a higher index), keeping the first index
 * of ties, so the result is sorted and ties come by the lower index as ONNX says. O(K n) per
 * line, one thread per line on the fallback rule (correct; no parallel selection yet). f16/bf16
 * compare in f32; NaNs are not ordered. */
static void gen_topk(L *l) {
  bool big = rx_ops_int_attr(l->call, "largest", 1) != 0;
  opnd *x = arg(l, 0), *yv = &l->outs[0], *yi = &l->outs[1];
  if (x->scalar || x->ndim == 0 || l->nouts != 2) {
    fail(l, "topk expects a tensor of rank >= 1 and gives two results");
    return;
  }
  int axis = axis_attr(l, "axis", -1, x->ndim);
  const char *iv[MAXR], *xi[MAXR], *oi[MAXR];
  const rx_expr *ie[MAXR];
  int ni = other_dims(l, x, axis, iv, ie, xi);
  const char *s = loopvar(l, "s"), *r = loopvar(l, "r");
  memcpy(oi, xi, sizeof oi);
  xi[axis] = r;
  oi[axis] = s;
  rx_dtype t = x->dtype, mt = mathdt(t);
  const char *mn = rx_dtype_name(mt);
  if (ni == 0) { /* a 1-D x: one line, in a loop of one so that the locals have a kernel */
    iv[ni] = loopvar(l, "u");
    ie[ni++] = sx_const(l->cx, 1);
  }
  for_nest(l, iv, ie, ni);
  const char *pv = fresh(l, "pv"), *pi = fresh(l, "pi"), *m = fresh(l, "m"), *k = fresh(l, "k");
  const char *v = fresh(l, "v"), *tk = fresh(l, "take");
  /* k from data (bound at run time) may exceed the axis: checked as ONNX Runtime does; the
   * indices stored go through the check (with k <= d it is their value) */
  const char *kc = NULL;
  const rx_expr *K = yv->shape[axis], *D = x->shape[axis];
  const rx_expr *slack = rx_expr_sub(l->cx, D, K); /* d - k: a constant >= 0 needs no check */
  if (slack->kind != RX_EXPR_CONST || slack->value < 0) {
    rx_strbuf msg = {0}, lit = {0};
    if (l->site) l->site_used = true;
    rx_strbuf_printf(&msg,
                     "%s: k argument [%%v] should not be greater than specified axis dim value "
                     "[%s] (axis %d)",
                     l->site ? l->site : "topk", ex(l, D), axis);
    rx_strbuf_json_string(&lit, msg.data);
    kc = lit.data ? S(l, "%s", lit.data) : NULL;
    rx_strbuf_free(&msg);
    rx_strbuf_free(&lit);
  }
  line(l, "alloc %s: %s[1] local", pv, mn);
  line(l, "alloc %s: i64[1] local", pi);
  line(l, "alloc %s: %s[1] local", m, mn);
  line(l, "alloc %s: i64[1] local", k);
  line(l, "%s[0] = %s", pv, lowest(l, mt, big));
  line(l, "%s[0] = (-1)", pi);
  line(l, "for %s in 0..%s {", s, ex(l, yv->shape[axis]));
  l->ind++;
  line(l, "%s[0] = %s", m, lowest(l, mt, !big));
  line(l, "%s[0] = (-1)", k);
  line(l, "for %s in 0..%s {", r, ex(l, x->shape[axis]));
  l->ind++;
  line(l, "let %s: %s = %s", v, mn, up(l, t, load(l, x, xi)));
  const char *lt = big ? "<" : ">", *gt = big ? ">" : "<";
  line(l,
       "let %s: bool = (%s == 0 || %s %s %s[0] || (%s == %s[0] && i64(%s) > %s[0])) && (%s[0] < 0 "
       "|| %s %s %s[0])",
       tk, s, v, lt, pv, v, pv, r, pi, k, v, gt, m);
  line(l, "%s[0] = select(%s, i64(%s), %s[0])", k, tk, r, k);
  line(l, "%s[0] = select(%s, %s, %s[0])", m, tk, v, m);
  close_(l);
  line(l, "%s = %s", load(l, yv, oi), down(l, t, S(l, "%s[0]", m)));
  if (kc)
    line(l, "%s = select(check(%s <= %s, %s, %s) > 0, %s[0], %s[0])", load(l, yi, oi), ex(l, K),
         ex(l, D), ex(l, K), kc, k, k);
  else
    line(l, "%s = %s[0]", load(l, yi, oi), k);
  line(l, "%s[0] = %s[0]", pv, m);
  line(l, "%s[0] = %s[0]", pi, k);
  close_(l);
  close_n(l, ni);
}

/* log2(e): softmax's exponentials are exp2((x - max) * log2(e)), a subtract, a multiply and the
 * hardware's exp2 per element (CUDA's accurate expf is several instructions more). Not
 * x * log2(e) - max * log2(e): with x and max both about -FLT_MAX (a row masked with
 * finfo.min, as Hugging Face's attention masks are) the products overflow to -inf and their
 * difference is NaN; onnxruntime gives the row's uniform distribution there. */
#define LZ_LOG2E 1.4426950408889634

/* softmax / log_softmax along one axis: loops over the other dims, then the row max, the sum of
 * exponentials (the row_reduction rule runs the two as one online sweep, passes/schedule) and
 * the normalization, a multiply by the sum's reciprocal (log_softmax: x - (max + log sum)). */
static void gen_softmax(L *l) {
  bool logsm = l->call->op->id == RX_OP_log_softmax;
  opnd *x = arg(l, 0), *y = &l->outs[0];
  if (x->scalar || x->ndim == 0) {
    fail(l, "%s of a 0-d tensor", l->call->op->name);
    return;
  }
  int axis = axis_attr(l, "axis", -1, x->ndim);
  const char *iv[MAXR], *xi[MAXR];
  const rx_expr *ie[MAXR];
  int ni = 0;
  const char *j = NULL;
  for (int d = 0; d < x->ndim; d++) {
    if (d == axis) continue;
    iv[ni] = loopvar(l, S(l, "i%d", ni));
    ie[ni] = x->shape[d];
    xi[d] = iv[ni++];
  }
  j = loopvar(l, "j");
  xi[axis] = j;
  rx_dtype t = x->dtype;
  for_nest(l, iv, ie, ni);
  const char *mx = fresh(l, "mx"), *s = fresh(l, "s"), *k = flit(l, LZ_LOG2E);
  const char *xv = up(l, t, load(l, x, xi));
  const char *jv[1] = {j};
  const rx_expr *je[1] = {x->shape[axis]};
  const char *e = S(l, "exp2((%s - %s[0]) * %s)", xv, mx, k);
  line(l, "alloc %s: f32[1] local", mx);
  reduce_open(l, jv, je, 1);
  line(l, "init { %s[0] = (-inf) }", mx);
  line(l, "update { %s[0] = max(%s[0], %s) }", mx, mx, xv);
  close_(l);
  line(l, "alloc %s: f32[1] local", s);
  reduce_open(l, jv, je, 1);
  line(l, "init { %s[0] = 0.0 }", s);
  line(l, "update { %s[0] = %s[0] + %s }", s, s, e);
  close_(l);
  const char *f = fresh(l, logsm ? "lse" : "inv");
  if (logsm)
    line(l, "let %s: f32 = %s[0] + log(%s[0])", f, mx, s);
  else
    line(l, "let %s: f32 = 1.0 / %s[0]", f, s);
  for_nest(l, jv, je, 1);
  const char *v = logsm ? S(l, "%s - %s", xv, f) : S(l, "%s * %s", e, f);
  line(l, "%s = %s", load(l, y, xi), down(l, t, v));
  close_(l);
  close_n(l, ni);
}

/* layer_norm (nparams 2) / rms_norm (nparams 1) over axes: rows like tests/kernels. */
static void gen_norm(L *l, bool layer) {
  opnd *x = arg(l, 0), *y = &l->outs[0];
  opnd *g = arg(l, 1), *b = layer ? arg(l, 2) : NULL;
  if (x->scalar || g->scalar || (b && b->scalar)) {
    fail(l, "%s expects tensor operands", l->call->op->name);
    return;
  }
  int axes[MAXR];
  int na = axes_attr(l, "axes", x->ndim, false, axes);
  double eps = 1e-5;
  const rx_attr *ea = rx_call_attr(l->call, "epsilon");
  if (ea) eps = ea->f;
  bool red[MAXR] = {false};
  for (int i = 0; i < na; i++) red[axes[i]] = true;
  const char *iv[MAXR], *rv[MAXR], *xi[MAXR], *gi[MAXR];
  const rx_expr *ie[MAXR], *re[MAXR];
  int ni = 0, nr = 0;
  const rx_expr *count = sx_const(l->cx, 1);
  for (int d = 0; d < x->ndim; d++) {
    if (red[d]) {
      rv[nr] = loopvar(l, S(l, "j%d", nr));
      re[nr] = x->shape[d];
      xi[d] = rv[nr++];
      count = rx_expr_mul(l->cx, count, x->shape[d]);
    } else {
      iv[ni] = loopvar(l, S(l, "i%d", ni));
      ie[ni] = x->shape[d];
      xi[d] = iv[ni++];
    }
  }
  for (int i = 0; i < na; i++) gi[i] = xi[axes[i]];
  rx_dtype t = x->dtype;
  const char *xv = up(l, t, load(l, x, xi)), *cnt = S(l, "f32(%s)", ex(l, count));
  for_nest(l, iv, ie, ni);
  const char *r = fresh(l, "r");
  if (layer) {
    const char *s = fresh(l, "s"), *mean = fresh(l, "mean"), *var = fresh(l, "v");
    line(l, "alloc %s: f32[1] local", s);
    reduce_open(l, rv, re, nr);
    line(l, "init { %s[0] = 0.0 }", s);
    line(l, "update { %s[0] = %s[0] + %s }", s, s, xv);
    close_(l);
    line(l, "let %s: f32 = %s[0] / %s", mean, s, cnt);
    line(l, "alloc %s: f32[1] local", var);
    reduce_open(l, rv, re, nr);
    line(l, "init { %s[0] = 0.0 }", var);
    line(l, "update { %s[0] = %s[0] + (%s - %s) * (%s - %s) }", var, var, xv, mean, xv, mean);
    close_(l);
    line(l, "let %s: f32 = rsqrt(%s[0] / %s + %s)", r, var, cnt, flit(l, eps));
    for_nest(l, rv, re, nr);
    line(l, "%s = %s", load(l, y, xi),
         down(l, t,
              S(l, "(%s - %s) * %s * %s + %s", xv, mean, r, up(l, t, load(l, g, gi)),
                up(l, t, load(l, b, gi)))));
    close_n(l, nr);
  } else {
    const char *ss = fresh(l, "ss");
    line(l, "alloc %s: f32[1] local", ss);
    reduce_open(l, rv, re, nr);
    line(l, "init { %s[0] = 0.0 }", ss);
    line(l, "update { %s[0] = %s[0] + %s * %s }", ss, ss, xv, xv);
    close_(l);
    line(l, "let %s: f32 = rsqrt(%s[0] / %s + %s)", r, ss, cnt, flit(l, eps));
    for_nest(l, rv, re, nr);
    line(l, "%s = %s", load(l, y, xi),
         down(l, t, S(l, "%s * %s * %s", xv, r, up(l, t, load(l, g, gi)))));
    close_n(l, nr);
  }
  close_n(l, ni);
}

/* ---- creation ---- */

static void gen_full(L *l) {
  rx_op_id op = l->call->op->id;
  opnd *y = &l->outs[0];
  const char *v;
  if (op == RX_OP_zeros) {
    v = lit(l, y->dtype, 0);
  } else if (op == RX_OP_ones) {
    v = lit(l, y->dtype, 1);
  } else {
    opnd *f = arg(l, 1);
    if (f->scalar) {
      v = scalar_as(l, f, y->dtype);
    } else {
      v = load(l, f, NULL);
      if (f->dtype != y->dtype) v = S(l, "%s(%s)", rx_dtype_name(y->dtype), v);
    }
  }
  const char *iv[MAXR];
  nest_vars(l, "i", y->ndim, iv);
  for_nest(l, iv, y->shape, y->ndim);
  line(l, "%s = %s", load(l, y, iv), v);
  close_n(l, y->ndim);
}

static void gen_arange(L *l) {
  opnd *y = &l->outs[0];
  const rx_node *call = l->call;
  const char *val[3] = {"0", NULL, "1"};
  int first = call->nargs == 1 ? 1 : 0;
  bool fl = rx_dtype_is_float(y->dtype);
  for (int i = 0; i < call->nargs; i++) {
    opnd *o = arg(l, i);
    if (!o->scalar) {
      fail(l, "arange expects scalar bounds of known value");
      return;
    }
    val[first + i] = o->literal ? (fl ? flit(l, o->fval) : olit(l, o, RX_DTYPE_I64)) : o->text;
    if (o->literal && !fl && o->fval != floor(o->fval)) {
      fail(l, "arange with float bounds into an integer dtype");
      return;
    }
  }
  const char *iv[1];
  nest_vars(l, "i", 1, iv);
  for_nest(l, iv, y->shape, 1);
  const char *e = S(l, "%s + %s * %s", val[0], iv[0], val[2]);
  if (fl) {
    /* float: start + i * step in f32 (integer-valued symbolic bounds are cast) */
    const char *s0 =
        strchr(val[0], '.') || strstr(val[0], "inf") ? val[0] : S(l, "f32(%s)", val[0]);
    const char *s2 =
        strchr(val[2], '.') || strstr(val[2], "inf") ? val[2] : S(l, "f32(%s)", val[2]);
    e = down(l, y->dtype, S(l, "%s + f32(%s) * %s", s0, iv[0], s2));
  } else if (y->dtype != RX_DTYPE_I64) {
    e = S(l, "%s(%s)", rx_dtype_name(y->dtype), e);
  }
  line(l, "%s = %s", load(l, y, iv), e);
  close_(l);
}

/* ---- neural-network ops ---- */

static void gen_rope(L *l) {
  opnd *x = arg(l, 0), *c = arg(l, 1), *s = arg(l, 2), *y = &l->outs[0];
  if (x->scalar || c->scalar || s->scalar) {
    fail(l, "rope expects tensor operands");
    return;
  }
  int r = y->ndim;
  if (r < 1) {
    fail(l, "rope expects operands of rank 1 or more");
    return;
  }
  const char *iv[MAXR] = {NULL}, *xa[MAXR], *xb[MAXR];
  nest_vars(l, "i", r, iv);
  const rx_expr *d = x->shape[r - 1];
  const rx_expr *half = rx_expr_floordiv(l->cx, d, sx_const(l->cx, 2));
  const char *js = iv[r - 1];
  for (int k = 0; k < r; k++) xa[k] = xb[k] = iv[k];
  xa[r - 1] = ex(l, rx_expr_add(l->cx, sx_var(l->cx, js), half));
  xb[r - 1] = ex(l, rx_expr_sub(l->cx, sx_var(l->cx, js), half));
  const char *ci[2] = {iv[r - 3], js};
  rx_dtype t = x->dtype;
  for_nest(l, iv, y->shape, r);
  line(l, "let rot: f32 = select(%s < %s, -%s, %s)", js, ex(l, half), up(l, t, load(l, x, xa)),
       up(l, t, load(l, x, xb)));
  line(l, "%s = %s", load(l, y, iv),
       down(l, t,
            S(l, "%s * %s + rot * %s", up(l, t, load(l, x, iv)), up(l, t, load(l, c, ci)),
              up(l, t, load(l, s, ci)))));
  close_n(l, r);
}

/* Window index: out * stride - pad + kernel_index * dilation. */
static const rx_expr *win_index(L *l, const char *o, int64_t stride, int64_t pad, const char *k,
                                int64_t dil) {
  return rx_expr_add(l->cx,
                     rx_expr_sub(l->cx,
                                 rx_expr_mul(l->cx, sx_var(l->cx, o), sx_const(l->cx, stride)),
                                 sx_const(l->cx, pad)),
                     rx_expr_mul(l->cx, sx_var(l->cx, k), sx_const(l->cx, dil)));
}

bool lz_window(L *l, bool pool, rx_nn_win *w) {
  rx_deduce_ctx dc = {l->m, NULL, l->diag, l->call->loc};
  if (!rx_nn_window(&dc, l->call, pool, w)) {
    l->failed = true;
    return false;
  }
  return true;
}

/* The direct convolution: a multiply-accumulate reduce over (c, kh, kw) per output point, the
 * portable form of conv2d (ops/conv.c). */
void lz_conv2d_direct(L *l, const rx_nn_win *win) {
  opnd *x = arg(l, 0), *w = arg(l, 1), *y = &l->outs[0];
  rx_nn_axes ax = rx_nn_conv_axes(win->nhwc);
  const char *n = loopvar(l, "n"), *o = loopvar(l, "o"), *p = loopvar(l, "p"),
             *qv = loopvar(l, "q");
  const char *c = loopvar(l, "c"), *kh = loopvar(l, "kh"), *kw = loopvar(l, "kw");
  const rx_expr *ih = win_index(l, p, win->sh, win->pt, kh, win->dh);
  const rx_expr *iw = win_index(l, qv, win->sw, win->pl, kw, win->dw);
  rx_expr_ctx *cx = l->cx;
  const rx_expr *inb =
      rx_expr_and(cx,
                  rx_expr_and(cx, rx_expr_cmp(cx, RX_EXPR_LE, sx_const(l->cx, 0), ih),
                              rx_expr_cmp(cx, RX_EXPR_LT, ih, x->shape[ax.xh])),
                  rx_expr_and(cx, rx_expr_cmp(cx, RX_EXPR_LE, sx_const(l->cx, 0), iw),
                              rx_expr_cmp(cx, RX_EXPR_LT, iw, x->shape[ax.xw])));
  const rx_expr *ch = sx_var(l->cx, c);
  if (win->groups > 1) {
    const rx_expr *og = rx_expr_floordiv(cx, w->shape[ax.wo], sx_const(l->cx, win->groups));
    ch = rx_expr_add(
        cx, rx_expr_mul(cx, rx_expr_floordiv(cx, sx_var(l->cx, o), og), w->shape[ax.wi]), ch);
  }
  const char *xi[4], *wi[4], *ov[4];
  xi[0] = ov[0] = n;
  xi[ax.xc] = ex(l, ch);
  xi[ax.xh] = ex(l, ih);
  xi[ax.xw] = ex(l, iw);
  ov[ax.xc] = o;
  ov[ax.xh] = p;
  ov[ax.xw] = qv;
  wi[ax.wo] = o;
  wi[ax.wi] = c;
  wi[ax.wh] = kh;
  wi[ax.ww] = kw;
  const char *rv[3] = {c, kh, kw};
  const rx_expr *re[3] = {w->shape[ax.wi], w->shape[ax.wh], w->shape[ax.ww]};
  rx_dtype t = x->dtype;
  rx_dtype at = is_half(t) ? RX_DTYPE_F32 : t;
  const char *xv = S(l, "select(%s, %s, %s)", ex(l, inb), up(l, t, load(l, x, xi)), lit(l, at, 0));
  const char *wv = up(l, t, load(l, w, wi));
  for_nest(l, ov, y->shape, 4);
  const char *yv = load(l, y, ov);
  sum_of_products(l, yv, t, rv, re, 3, xv, wv);
  close_n(l, 4);
}

static void gen_pool(L *l) {
  bool avg = l->call->op->id == RX_OP_avg_pool2d;
  opnd *x = arg(l, 0), *y = &l->outs[0];
  rx_nn_win win;
  if (!lz_window(l, true, &win)) return;
  const char *n = loopvar(l, "n"), *c = loopvar(l, "c"), *p = loopvar(l, "p"),
             *qv = loopvar(l, "q");
  const char *kh = loopvar(l, "kh"), *kw = loopvar(l, "kw");
  const rx_expr *ih = win_index(l, p, win.sh, win.pt, kh, win.dh);
  const rx_expr *iw = win_index(l, qv, win.sw, win.pl, kw, win.dw);
  rx_expr_ctx *cx = l->cx;
  const rx_expr *inb =
      rx_expr_and(cx,
                  rx_expr_and(cx, rx_expr_cmp(cx, RX_EXPR_LE, sx_const(l->cx, 0), ih),
                              rx_expr_cmp(cx, RX_EXPR_LT, ih, x->shape[2])),
                  rx_expr_and(cx, rx_expr_cmp(cx, RX_EXPR_LE, sx_const(l->cx, 0), iw),
                              rx_expr_cmp(cx, RX_EXPR_LT, iw, x->shape[3])));
  const char *xi[4] = {n, c, ex(l, ih), ex(l, iw)};
  const char *ov[4] = {n, c, p, qv};
  const char *rv[2] = {kh, kw};
  const rx_expr *re[2] = {sx_const(l->cx, win.kh), sx_const(l->cx, win.kw)};
  rx_dtype t = x->dtype;
  const char *cond = ex(l, inb);
  for_nest(l, ov, y->shape, 4);
  const char *yv = load(l, y, ov);
  const char *acc = fresh(l, "acc");
  if (avg) {
    line(l, "alloc %s: f32[1] local", acc);
    const char *cnt = win.include_pad ? NULL : fresh(l, "cnt");
    if (cnt) line(l, "alloc %s: f32[1] local", cnt);
    reduce_open(l, rv, re, 2);
    if (cnt)
      line(l, "init { %s[0] = 0.0; %s[0] = 0.0 }", acc, cnt);
    else
      line(l, "init { %s[0] = 0.0 }", acc);
    line(l, "update {");
    l->ind++;
    line(l, "%s[0] = %s[0] + select(%s, %s, 0.0)", acc, acc, cond, up(l, t, load(l, x, xi)));
    if (cnt) line(l, "%s[0] = %s[0] + select(%s, 1.0, 0.0)", cnt, cnt, cond);
    close_(l);
    close_(l);
    const char *den = cnt ? S(l, "%s[0]", cnt) : flit(l, (double)(win.kh * win.kw));
    line(l, "%s = %s", yv, down(l, t, S(l, "%s[0] / %s", acc, den)));
  } else {
    line(l, "alloc %s: %s[1] local", acc, rx_dtype_name(t));
    reduce_open(l, rv, re, 2);
    line(l, "init { %s[0] = %s }", acc, lowest(l, t, false));
    line(l, "update { %s[0] = max(%s[0], select(%s, %s, %s)) }", acc, acc, cond, load(l, x, xi),
         lowest(l, t, false));
    close_(l);
    line(l, "%s = %s[0]", yv, acc);
  }
  close_n(l, 4);
}

static void gen_batch_norm(L *l) {
  opnd *x = arg(l, 0), *y = &l->outs[0];
  for (int i = 1; i < 5; i++)
    if (arg(l, i)->scalar) {
      fail(l, "batch_norm expects tensor parameters");
      return;
    }
  int axis = axis_attr(l, "axis", 1, x->ndim);
  const rx_attr *ea = rx_call_attr(l->call, "epsilon");
  double eps = ea ? ea->f : 1e-5;
  const char *iv[MAXR] = {NULL}; /* set by nest_vars (gcc -O3 cannot see it: maybe-uninitialized) */
  nest_vars(l, "i", y->ndim, iv);
  const char *ci[1] = {iv[axis]};
  rx_dtype t = x->dtype;
  for_nest(l, iv, y->shape, y->ndim);
  line(l, "%s = %s", load(l, y, iv),
       down(l, t,
            S(l, "(%s - %s) * rsqrt(%s + %s) * %s + %s", up(l, t, load(l, x, iv)),
              up(l, t, load(l, arg(l, 3), ci)), up(l, t, load(l, arg(l, 4), ci)), flit(l, eps),
              up(l, t, load(l, arg(l, 1), ci)), up(l, t, load(l, arg(l, 2), ci)))));
  close_n(l, y->ndim);
}

/* ------------------------------------------------------------------------------------------
 * entry points
 * ------------------------------------------------------------------------------------------ */

typedef void (*gen_fn)(L *l);

static void gen_expand(L *l) { gen_unit_dims(l, true); }
static void gen_squeeze(L *l) { gen_unit_dims(l, false); }
static void gen_reshape(L *l) { gen_reshape_like(l, arg(l, 0), &l->outs[0]); }
static void gen_layer_norm(L *l) { gen_norm(l, true); }
static void gen_rms_norm(L *l) { gen_norm(l, false); }

/* An op that legalization leaves to the host program (rx_op_is_host_call). */
#define NOT_LEGALIZED NULL

/* ops.def's legalization and formula columns, by op id. */
static const struct {
  gen_fn gen;
  const char *formula;
} legal[RX_OP_COUNT] = {
#define OP(id, name, min_args, max_args, attrs, deduce, pattern, legalize, formula, batch, doc)    \
  [RX_OP_##id] = {legalize, formula},
#include "ops.def"
#undef OP
};

static const char *formula_of(const L *l) { return legal[l->call->op->id].formula; }

bool rx_legalize_has_generator(const rx_op *op) { return legal[op->id].gen != NULL; }

static bool item_named(rx_module *m, const char *s) {
  return rx_module_tensor_fn(m, s) || rx_module_graph_fn(m, s) || rx_module_extern_fn(m, s);
}

static void l_free(L *l) {
  rx_strbuf_free(&l->body);
  rx_ptrvec_free(&l->names);
  rx_ptrvec_free(&l->used);
  rx_ptrvec_free(&l->loops);
}

static bool l_start(L *l, rx_module *m, const rx_node *call, rx_diag *diag) {
  memset(l, 0, sizeof *l);
  l->m = m;
  l->cx = m->ctx;
  l->call = call;
  l->diag = diag;
  RX_ASSERT(call->kind == RX_NODE_CALL);
  if (!call->op) {
    fail(l, "unknown op");
    return false;
  }
  if (call->nargs > LZ_MAXARGS) {
    fail(l, "too many arguments");
    return false;
  }
  for (int i = 0; i < call->nargs; i++) reserve_sinfo(l, call->args[i]->sinfo);
  reserve_sinfo(l, call->sinfo);
  for (int i = 0; i < call->nattrs; i++)
    if (call->attrs[i].kind == RX_ATTR_EXPRS)
      for (int k = 0; k < call->attrs[i].n; k++) reserve_vars(l, call->attrs[i].exprs[k]);
  collect(l);
  int ip = rx_legalize_inplace_arg(call->op);
  if (ip >= 0 && ip < call->nargs && l->argop[ip] >= 0) l->ops[l->argop[ip]].inplace = true;
  return !l->failed;
}

int rx_legalize_args(rx_module *m, const rx_node *call, rx_node **out, int max) {
  rx_diag quiet;
  rx_diag_init(&quiet);
  L l;
  int n = 0;
  if (l_start(&l, m, call, &quiet)) {
    for (int i = 0; i < l.nops; i++)
      if (!l.ops[i].scalar && !l.ops[i].inplace && n < max) out[n++] = l.ops[i].node;
  }
  l_free(&l);
  rx_diag_free(&quiet);
  return n;
}

rx_tensor_fn *rx_legalize_call(rx_module *m, const rx_node *call, const char *name, rx_diag *diag) {
  return rx_legalize_call_at(m, call, name, NULL, diag, NULL);
}

rx_tensor_fn *rx_legalize_call_at(rx_module *m, const rx_node *call, const char *name,
                                  const char *site, rx_diag *diag, bool *out_site_used) {
  L l;
  rx_tensor_fn *result = NULL;
  if (out_site_used) *out_site_used = false;
  bool started = l_start(&l, m, call, diag);
  l.site = site;
  if (!started) goto done;
  const rx_op *op = call->op;
  gen_fn gen = legal[op->id].gen;
  if (!gen) {
    fail(&l, "no legalization for this op");
    goto done;
  }
  if (!call->sinfo) {
    fail(&l, "the call has no struct info (normalize the module first)");
    goto done;
  }
  for (int i = 0; i < l.nops; i++) {
    if (!l.ops[i].scalar && l.ops[i].dtype == RX_DTYPE_UNKNOWN) {
      fail(&l, "an argument has an unknown dtype; use match_cast");
      goto done;
    }
  }
  /* outputs: an argument written in place is the output, named as that argument */
  int ip = rx_legalize_inplace_arg(op);
  if (ip >= 0) {
    if (!add_out(&l, call->sinfo, l.ops[l.argop[ip]].name)) goto done;
  } else if (call->sinfo->kind == RX_SINFO_TUPLE) {
    for (int f = 0; f < call->sinfo->nfields; f++)
      if (!add_out(&l, call->sinfo->fields[f], S(&l, "y%d", f))) goto done;
  } else if (!add_out(&l, call->sinfo, "y")) {
    goto done;
  }
  /* fresh buffer names, once every symbolic name is reserved */
  for (int i = 0; i < l.nops; i++)
    if (!l.ops[i].scalar && !l.ops[i].inplace) l.ops[i].name = fresh(&l, l.ops[i].name);
  for (int i = 0; i < l.nouts; i++) l.outs[i].name = fresh(&l, l.outs[i].name);
  l.ind = 1;
  gen(&l);
  if (l.failed) goto done;

  /* signature: inputs, outputs, then scalars for used variables no buffer defines */
  rx_strbuf sig = {0};
  rx_ptrvec defined = {0};
  const char *fname = name && *name ? name : op->name;
  char buf[160];
  snprintf(buf, sizeof buf, "%.100s", fname);
  for (int k = 1; item_named(m, buf) || reserved_word(buf); k++)
    snprintf(buf, sizeof buf, "%.100s_%d", fname, k);
  rx_strbuf_printf(&sig, "tensor_fn %s(", buf);
  int np = 0;
  for (int pass = 0; pass < 2; pass++) {
    int cnt = pass ? l.nouts : l.nops;
    for (int i = 0; i < cnt; i++) {
      opnd *o = pass ? &l.outs[i] : &l.ops[i];
      if (o->scalar || o->inplace) continue;
      const rx_expr *const *sh = o->shape;
      rx_strbuf_printf(&sig, "%s%s%s: %s[", np++ ? ", " : "", pass ? "out " : "", o->name,
                       rx_dtype_name(o->dtype));
      for (int d = 0; d < o->ndim; d++) {
        const char *t = ex(&l, sh[d]);
        rx_strbuf_printf(&sig, "%s%s", d ? ", " : "", t);
        if (sh[d]->kind == RX_EXPR_VAR) rx_ptrvec_push(&defined, (void *)sh[d]);
      }
      rx_strbuf_append(&sig, "]");
    }
  }
  for (size_t i = 0; i < l.used.len; i++) {
    const rx_expr *v = l.used.data[i];
    bool skip = false;
    for (size_t k = 0; k < defined.len && !skip; k++) skip = defined.data[k] == v;
    for (size_t k = 0; k < l.loops.len && !skip; k++) skip = l.loops.data[k] == v;
    if (!skip) rx_strbuf_printf(&sig, "%s%s: i64", np++ ? ", " : "", v->name);
  }
  rx_strbuf_append(&sig, ") {\n");
  rx_strbuf_append(&sig, l.body.data ? l.body.data : "");
  rx_strbuf_append(&sig, "}\n");
  rx_ptrvec_free(&defined);
  char *text = rx_strbuf_take(&sig);
  rx_diag pd;
  rx_diag_init(&pd);
  size_t before = m->items.len;
  char srcname[160];
  snprintf(srcname, sizeof srcname, "<legalized %.100s>", op->name);
  bool ok = rx_parse_module(m, srcname, text, strlen(text), &pd);
  if (!ok || m->items.len != before + 1) {
    /* a bug in a generator: the text it wrote does not parse */
    fprintf(stderr, "relaxc: internal error: legalized %s does not parse:\n%s\n%s\n", op->name,
            rx_diag_text(&pd), text);
    RX_ASSERT(!"legalization produced unparsable text");
  }
  result = m->items.data[before].fn;
  rx_diag_free(&pd);
  free(text);
done:
  if (out_site_used) *out_site_used = result && l.site_used;
  l_free(&l);
  return result;
}
