/* Legalization: an op call -> a tensor program in the canonical loop forms of tests/kernels.
 *
 * The program is written as text in the format of docs/text-format.md and parsed into the
 * module: symbolic variables are interned by name, so the program's `n` is the graph's `n`, and
 * what is added is exactly what `relaxc print` would show. Each op has a generator, in its family
 * file beside its deduction (ops/elementwise.c, linalg.c, manip.c, reduce.c, create.c, nn.c,
 * attention.c, ...; named in ops.def's legalization column), that emits loops over the output
 * (an elementwise/injective nest), rows with reduce stages and `local` one-element accumulators
 * (reductions, softmax, norms), or a multiply-accumulate reduce per output point (matmul,
 * conv2d), f16/bf16 math done in f32 and rounded once at the store. This file holds the driver
 * (ops_legalize_call: the operands collected, the generator run, the signature added, the text
 * parsed) and the writer the generators share (legalize_int.h: names, text, literals, operands,
 * loop nests).
 *
 * Names in a program (buffers, loop variables, locals) never collide with the symbolic variables
 * it uses: they are picked fresh against those. */
#include "legalize_int.h"

#include "../shapes/expr_build.h"
#include "deduce.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* This file's short names for the context and the writer's helpers (legalize_int.h). */
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
#define load(l, o, idx) lz_load(l, o, idx)

void lz_fail(L *l, const char *fmt, ...) {
  if (l->failed) return;
  l->failed = true;
  va_list ap;
  va_start(ap, fmt);
  char buf[1024];
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  base_diag_report(l->diag, RX_DIAG_ERROR, l->call->loc, "cannot legalize %s: %s",
                   l->call->op ? l->call->op->name : "call", buf);
}

static const char *sinfo_str(L *l, const rx_sinfo *s) {
  rx_strbuf b = {0};
  ir_sinfo_print(&b, s);
  char *h = base_strbuf_take(&b);
  const char *r = base_arena_strdup(&l->m->arena, h);
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
  return ir_dtype_parse(s, strlen(s), &dt) || ir_intrinsic_lookup(s, strlen(s), &in);
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
  const char *r = ir_module_intern(l->m, buf, strlen(buf));
  base_ptrvec_push(&l->names, (void *)r);
  return r;
}

static void reserve_vars(L *l, const rx_expr *e) {
  rx_ptrvec vs = {0};
  sym_expr_collect_vars(e, &vs);
  for (size_t i = 0; i < vs.len; i++) {
    const rx_expr *v = vs.data[i];
    if (!name_taken(l, v->name)) base_ptrvec_push(&l->names, (void *)v->name);
  }
  base_ptrvec_free(&vs);
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
  base_ptrvec_push(&l->loops, (void *)sym_expr_var(l->cx, n));
  return n;
}

const rx_expr *lz_open_thread_items(L *l, const char *tx, const char *c, int64_t threads,
                                    const rx_expr *count) {
  rx_expr_ctx *cx = l->cx;
  const rx_expr *steps = sym_expr_floordiv(
      cx, sym_expr_add(cx, count, sym_expr_const(cx, threads - 1)), sym_expr_const(cx, threads));
  lz_line(l, "for %s in 0..%s {", c, lz_ex(l, steps));
  l->ind++;
  const rx_expr *e = sym_expr_add(
      cx, sym_expr_var(cx, tx), sym_expr_mul(cx, sym_expr_var(cx, c), sym_expr_const(cx, threads)));
  lz_line(l, "if %s {", lz_ex(l, sym_expr_cmp(cx, RX_EXPR_LT, e, count)));
  l->ind++;
  return e;
}

/* ---- text ---- */

void lz_line(L *l, const char *fmt, ...) {
  for (int i = 0; i < l->ind; i++) base_strbuf_append(&l->body, "  ");
  va_list ap;
  va_start(ap, fmt);
  base_strbuf_vprintf(&l->body, fmt, ap);
  va_end(ap);
  base_strbuf_putc(&l->body, '\n');
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
  base_strbuf_vprintf(&b, fmt, ap);
  va_end(ap);
  char *h = base_strbuf_take(&b);
  const char *r = base_arena_strdup(&l->m->arena, h);
  free(h);
  return r;
}

/* Text of a symbolic expression; its variables are recorded as used. */
const char *lz_ex(L *l, const rx_expr *e) {
  rx_ptrvec vs = {0};
  sym_expr_collect_vars(e, &vs);
  for (size_t i = 0; i < vs.len; i++) {
    bool have = false;
    for (size_t k = 0; k < l->used.len && !have; k++) have = l->used.data[k] == vs.data[i];
    if (!have) base_ptrvec_push(&l->used, vs.data[i]);
  }
  base_ptrvec_free(&vs);
  rx_strbuf b = {0};
  bool paren = e->kind != RX_EXPR_CONST && e->kind != RX_EXPR_VAR;
  if (paren) base_strbuf_putc(&b, '(');
  sym_expr_print(&b, e);
  if (paren) base_strbuf_putc(&b, ')');
  char *h = base_strbuf_take(&b);
  const char *r = base_arena_strdup(&l->m->arena, h);
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
const char *lz_lit(L *l, rx_dtype dt, double v) {
  if (ir_dtype_is_float(dt)) return flit(l, v);
  if (dt == RX_DTYPE_BOOL) return v != 0 ? "true" : "false";
  if (isnan(v)) return "0";
  if (v >= 9223372036854775808.0) return lz_ilit(l, INT64_MAX);
  if (v <= -9223372036854775808.0) return lz_ilit(l, INT64_MIN);
  return lz_ilit(l, (int64_t)v);
}

/* Scalar literal o as a literal of dtype dt: an integer one keeps its exact value (a double
 * holds integers only up to 2^53). */
const char *lz_olit(L *l, const opnd *o, rx_dtype dt) {
  if (!o->is_int || ir_dtype_is_float(dt)) return lz_lit(l, dt, o->fval);
  if (dt == RX_DTYPE_BOOL) return o->ival != 0 ? "true" : "false";
  return lz_ilit(l, o->ival);
}

bool lz_is_half(rx_dtype t) { return t == RX_DTYPE_F16 || t == RX_DTYPE_BF16; }
/* The dtype float math is done in for values of dtype t. */
rx_dtype lz_mathdt(rx_dtype t) { return lz_is_half(t) ? RX_DTYPE_F32 : t; }
/* text (of dtype t) converted to the math dtype. */
const char *lz_up(L *l, rx_dtype t, const char *text) {
  return lz_is_half(t) ? S(l, "f32(%s)", text) : text;
}
/* text of the math dtype of t converted back to t. */
const char *lz_down(L *l, rx_dtype t, const char *text) {
  return lz_is_half(t) ? S(l, "%s(%s)", ir_dtype_name(t), text) : text;
}

/* The lowest / highest value of dtype t as text (init of max / min reductions). */
const char *lz_lowest(L *l, rx_dtype t, bool hi) {
  if (ir_dtype_is_float(t)) return hi ? "inf" : "(-inf)";
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
    if (i) base_strbuf_append(&b, ", ");
    base_strbuf_append(&b, v[i]);
  }
  char *h = base_strbuf_take(&b);
  const char *r = base_arena_strdup(&l->m->arena, h);
  free(h);
  return r;
}

/* Opens nested loops `for v in 0..ext {` for each dim (a perfect nest). */
void lz_for_nest(L *l, const char *const *vars, const rx_expr *const *ext, int n) {
  for (int i = 0; i < n; i++) {
    line(l, "for %s in 0..%s {", vars[i], ex(l, ext[i]));
    l->ind++;
  }
}
void lz_close_n(L *l, int n) {
  for (int i = 0; i < n; i++) close_(l);
}

/* `reduce r0 in 0..e0, r1 in 0..e1 {` */
void lz_reduce_open(L *l, const char *const *vars, const rx_expr *const *ext, int n) {
  rx_strbuf b = {0};
  for (int i = 0; i < n; i++)
    base_strbuf_printf(&b, "%s%s in 0..%s", i ? ", " : "", vars[i], ex(l, ext[i]));
  char *h = base_strbuf_take(&b);
  line(l, "reduce %s {", h);
  free(h);
  l->ind++;
}

/* Loop variables for an n-dim nest: i0, i1, ... */
void lz_nest_vars(L *l, const char *base, int n, const char **out) {
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
      idx[k] = ex(l, sym_expr_floormod(l->cx, sx_var(l->cx, ov[j]), d));
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
  static const char *const kva[] = {"pages", "k", "v", "slot", "cs", "sn", "q"};
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
  case RX_OP_kv_append_rope:
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

/* Builds the operand list from the call's arguments (see ops_legalize_args). When m_nodes is
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
          fn = ir_node_new(l->m, RX_NODE_GET_ITEM, a->loc);
          fn->args = ir_module_alloc(l->m, sizeof(rx_node *));
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
      if (a->kind == RX_NODE_PRIM && ir_dtype_is_float(a->prim_dtype)) {
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
const char *lz_scalar_as(L *l, const opnd *o, rx_dtype dt) {
  if (o->literal) return lz_olit(l, o, dt);
  if (dt == RX_DTYPE_I64) return o->text;
  return S(l, "%s(%s)", ir_dtype_name(dt), o->text);
}

/* Makes the scalar operands' text of dtype dt (the op's compute dtype). */
void lz_scalars_to(L *l, rx_dtype dt) {
  for (int i = 0; i < l->nops; i++)
    if (l->ops[i].scalar) l->ops[i].text = lz_scalar_as(l, &l->ops[i], dt);
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
 * what the generators share beyond the text: attributes, sums of products, indices from data
 * ------------------------------------------------------------------------------------------ */

/* Axis attribute normalized against ndim (negative counts from the end). */
int lz_axis_attr(L *l, const char *name, int64_t dflt, int ndim) {
  int64_t a = ops_int_attr(l->call, name, dflt);
  if (a < -ndim || a >= ndim) {
    fail(l, "%s %lld is out of range for rank %d", name, (long long)a, ndim);
    return 0;
  }
  return (int)(a < 0 ? a + ndim : a);
}

/* Axes attribute normalized; none -> all (dflt_all) or the last axis. */
int lz_axes_attr(L *l, const char *name, int ndim, bool dflt_all, int *out) {
  const rx_attr *a = ops_call_attr(l->call, name);
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

/* yv = the sum over the reduce variables kv (extents ke) of av * bv; f16 and bf16 results
 * accumulate in an f32 local (av and bv already f32 then), rounded once at the end. */
void lz_sum_of_products(L *l, const char *yv, rx_dtype t, const char *const *kv,
                        const rx_expr *const *ke, int nk, const char *av, const char *bv) {
  if (lz_is_half(t)) {
    const char *acc = fresh(l, "acc");
    line(l, "alloc %s: f32[1] local", acc);
    lz_reduce_open(l, kv, ke, nk);
    line(l, "init { %s[0] = 0.0 }", acc);
    line(l, "update { %s[0] = %s[0] + %s * %s }", acc, acc, av, bv);
    close_(l);
    line(l, "%s = %s(%s[0])", yv, ir_dtype_name(t), acc);
  } else {
    lz_reduce_open(l, kv, ke, nk);
    line(l, "init { %s = %s }", yv, lz_lit(l, t, 0));
    line(l, "update { %s = %s + %s * %s }", yv, yv, av, bv);
    close_(l);
  }
}

const char *lz_data_index(L *l, const char *t, const rx_expr *d, int axis) {
  const char *dt = ex(l, d), *k = fresh(l, "k"), *w = fresh(l, "w");
  rx_strbuf msg = {0}, lit = {0};
  if (l->site) l->site_used = true;
  base_strbuf_printf(&msg, "%s: index %%v out of range [-%s, %s) on axis %d",
                     l->site ? l->site : l->call->op->name, dt, dt, axis);
  base_strbuf_json_string(&lit, msg.data);
  line(l, "let %s: i64 = check(%s >= -%s && %s < %s, %s, %s)", k, t, dt, t, dt, t, lit.data);
  /* d - 1 as one literal where d is one (a bare `2 - 1` folds to a 0 / 1 the parser types bool) */
  const char *last = ex(l, sym_expr_sub(l->cx, d, sx_const(l->cx, 1)));
  line(l, "let %s: i64 = max(min(select(%s < 0, %s + %s, %s), %s), 0)", w, k, k, dt, k, last);
  base_strbuf_free(&msg);
  base_strbuf_free(&lit);
  return w;
}

/* ------------------------------------------------------------------------------------------
 * entry points
 * ------------------------------------------------------------------------------------------ */

typedef void (*gen_fn)(L *l);

/* An op that legalization leaves to the host program (ops_op_is_host_call). */
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

const char *lz_formula(const L *l) { return legal[l->call->op->id].formula; }

bool ops_legalize_has_generator(const rx_op *op) { return legal[op->id].gen != NULL; }

static bool item_named(rx_module *m, const char *s) {
  return ir_module_tensor_fn(m, s) || ir_module_graph_fn(m, s) || ir_module_extern_fn(m, s);
}

static void l_free(L *l) {
  base_strbuf_free(&l->body);
  base_ptrvec_free(&l->names);
  base_ptrvec_free(&l->used);
  base_ptrvec_free(&l->loops);
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
  int ip = ops_legalize_inplace_arg(call->op);
  if (ip >= 0 && ip < call->nargs && l->argop[ip] >= 0) l->ops[l->argop[ip]].inplace = true;
  return !l->failed;
}

int ops_legalize_args(rx_module *m, const rx_node *call, rx_node **out, int max) {
  rx_diag quiet;
  base_diag_init(&quiet);
  L l;
  int n = 0;
  if (l_start(&l, m, call, &quiet)) {
    for (int i = 0; i < l.nops; i++)
      if (!l.ops[i].scalar && !l.ops[i].inplace && n < max) out[n++] = l.ops[i].node;
  }
  l_free(&l);
  base_diag_free(&quiet);
  return n;
}

rx_tensor_fn *ops_legalize_call(rx_module *m, const rx_node *call, const char *name,
                                rx_diag *diag) {
  return ops_legalize_call_at(m, call, name, NULL, diag, NULL);
}

rx_tensor_fn *ops_legalize_call_at(rx_module *m, const rx_node *call, const char *name,
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
  int ip = ops_legalize_inplace_arg(op);
  bool tuple = call->sinfo->kind == RX_SINFO_TUPLE;
  if (ip >= 0) { /* then, for a tuple, the outputs it allocates (kv_append_rope's roped q) */
    if (!add_out(&l, tuple ? call->sinfo->fields[0] : call->sinfo, l.ops[l.argop[ip]].name))
      goto done;
    for (int f = 1; tuple && f < call->sinfo->nfields; f++)
      if (!add_out(&l, call->sinfo->fields[f], S(&l, "y%d", f))) goto done;
  } else if (tuple) {
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
  base_strbuf_printf(&sig, "tensor_fn %s(", buf);
  int np = 0;
  for (int pass = 0; pass < 2; pass++) {
    int cnt = pass ? l.nouts : l.nops;
    for (int i = 0; i < cnt; i++) {
      opnd *o = pass ? &l.outs[i] : &l.ops[i];
      if (o->scalar || o->inplace) continue;
      const rx_expr *const *sh = o->shape;
      base_strbuf_printf(&sig, "%s%s%s: %s[", np++ ? ", " : "", pass ? "out " : "", o->name,
                         ir_dtype_name(o->dtype));
      for (int d = 0; d < o->ndim; d++) {
        const char *t = ex(&l, sh[d]);
        base_strbuf_printf(&sig, "%s%s", d ? ", " : "", t);
        if (sh[d]->kind == RX_EXPR_VAR) base_ptrvec_push(&defined, (void *)sh[d]);
      }
      base_strbuf_append(&sig, "]");
    }
  }
  for (size_t i = 0; i < l.used.len; i++) {
    const rx_expr *v = l.used.data[i];
    bool skip = false;
    for (size_t k = 0; k < defined.len && !skip; k++) skip = defined.data[k] == v;
    for (size_t k = 0; k < l.loops.len && !skip; k++) skip = l.loops.data[k] == v;
    if (!skip) base_strbuf_printf(&sig, "%s%s: i64", np++ ? ", " : "", v->name);
  }
  base_strbuf_append(&sig, ") {\n");
  base_strbuf_append(&sig, l.body.data ? l.body.data : "");
  base_strbuf_append(&sig, "}\n");
  base_ptrvec_free(&defined);
  char *text = base_strbuf_take(&sig);
  rx_diag pd;
  base_diag_init(&pd);
  size_t before = m->items.len;
  char srcname[160];
  snprintf(srcname, sizeof srcname, "<legalized %.100s>", op->name);
  bool ok = ir_parse_module(m, srcname, text, strlen(text), &pd);
  if (!ok || m->items.len != before + 1) {
    /* a bug in a generator: the text it wrote does not parse */
    fprintf(stderr, "relaxc: internal error: legalized %s does not parse:\n%s\n%s\n", op->name,
            rx_diag_text(&pd), text);
    RX_ASSERT(!"legalization produced unparsable text");
  }
  result = m->items.data[before].fn;
  base_diag_free(&pd);
  free(text);
done:
  if (out_site_used) *out_site_used = result && l.site_used;
  l_free(&l);
  return result;
}
