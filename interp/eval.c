/* interp/eval.c: the reference interpreter's expressions and messages (interp.h, internal part).
 *
 * interp_ev walks the compiled form of an expression (cx) in one thread: loads bounds-checked
 * against the buffer's shape, index arithmetic checked for 64-bit overflow and division by zero,
 * integer arithmetic wrapping in uint64_t, floats rounded to their dtype after every operation,
 * `select`, `&&` and `||` lazy, a subgroup operation handed to the scheduler (exec.c). The
 * messages of both compile-time and run-time errors are worded here. */
#define RX_INTERP_INTERNAL
#include "interp.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------------------------
 * messages
 * ------------------------------------------------------------------------------------------ */
void interp_put_loc(rx_strbuf *sb, rx_loc loc) {
  if (loc.src) base_strbuf_printf(sb, " (at %s:%u:%u)", loc.src->name, loc.line, loc.col);
}

void interp_put_ints(rx_strbuf *sb, const int64_t *v, int n) {
  base_strbuf_putc(sb, '[');
  for (int i = 0; i < n; i++) base_strbuf_printf(sb, "%s%lld", i ? ", " : "", (long long)v[i]);
  base_strbuf_putc(sb, ']');
}

void interp_put_expr(rx_strbuf *sb, const rx_expr *e) {
  char *s = sym_expr_to_string(e);
  base_strbuf_append(sb, s);
  free(s);
}

/* " in block (bx = 1), thread (3, 0, 0)" */
static void put_where(rx_strbuf *sb, const blk *b, const thr *t) {
  if (!b || !b->info) return;
  const blkinfo *bi = b->info;
  if (bi->nbv > 0) {
    base_strbuf_append(sb, " in block (");
    for (int i = 0; i < bi->nbv; i++)
      base_strbuf_printf(sb, "%s%s = %lld", i ? ", " : "", bi->bv_names[i],
                         (long long)b->parent->slots[bi->bv_slots[i]].i);
    base_strbuf_putc(sb, ')');
  }
  if (t && b->n > 1)
    base_strbuf_printf(sb, "%s thread (%lld, %lld, %lld)", bi->nbv ? "," : " in",
                       (long long)t->tid[0], (long long)t->tid[1], (long long)t->tid[2]);
}

rx_status interp_make_err(run *rs, const blk *b, const thr *t, rx_loc loc, const char *msg) {
  rx_strbuf sb = {0};
  base_strbuf_printf(&sb, "tensor_fn `%s`: %s", rs->fname, msg);
  interp_put_loc(&sb, loc);
  put_where(&sb, b, t);
  rx_status s = base_status_make(RX_ERR_INVALID, "%s", sb.data);
  base_strbuf_free(&sb);
  return s;
}

void interp_fail(thr *t, rx_loc loc, const char *fmt, ...) {
  if (t->err) return;
  rx_strbuf sb = {0};
  va_list ap;
  va_start(ap, fmt);
  base_strbuf_vprintf(&sb, fmt, ap);
  va_end(ap);
  t->err = interp_make_err(t->rs, t->b, t, loc, sb.data);
  base_strbuf_free(&sb);
}

void interp_cfail(run *rs, rx_loc loc, const char *fmt, ...) {
  if (rs->cerr) return;
  rx_strbuf sb = {0};
  va_list ap;
  va_start(ap, fmt);
  base_strbuf_vprintf(&sb, fmt, ap);
  va_end(ap);
  rs->cerr = interp_make_err(rs, NULL, NULL, loc, sb.data);
  base_strbuf_free(&sb);
}

/* The values of the variables of e in t's frame, as " (n = 4, k = 0)". */
void interp_collect_vars(const rx_expr *e, rx_ptrvec *out) {
  if (!e) return;
  if (e->kind == RX_EXPR_VAR) {
    for (size_t i = 0; i < out->len; i++)
      if (out->data[i] == e) return;
    base_ptrvec_push(out, (void *)e);
    return;
  }
  interp_collect_vars(e->a, out);
  interp_collect_vars(e->b, out);
  interp_collect_vars(e->c, out);
}

int interp_find_key(const keyid *v, size_t n, const void *key) {
  for (size_t i = n; i-- > 0;)
    if (v[i].key == key) return v[i].id;
  return -1;
}

void interp_put_var_values(rx_strbuf *sb, run *rs, const val *slots, const rx_expr *e) {
  rx_ptrvec vars = {0};
  interp_collect_vars(e, &vars);
  int shown = 0;
  for (size_t i = 0; i < vars.len; i++) {
    const rx_expr *v = vars.data[i];
    int s = interp_find_key(rs->slotmap.data, rs->slotmap.len, v);
    if (s < 0) continue;
    base_strbuf_printf(sb, "%s%s = %lld", shown++ ? ", " : " (", v->name, (long long)slots[s].i);
  }
  if (shown) base_strbuf_putc(sb, ')');
  base_ptrvec_free(&vars);
}

/* ------------------------------------------------------------------------------------------
 * evaluation
 * ------------------------------------------------------------------------------------------ */

static void fail_sym(thr *t, const cx *e, const char *what) {
  rx_strbuf sb = {0};
  base_strbuf_append(&sb, "`");
  interp_put_expr(&sb, e->sx);
  base_strbuf_append(&sb, "`");
  interp_put_var_values(&sb, t->rs, t->slots, e->sx);
  interp_fail(t, e->loc, "%s in index expression %s", what, sb.data);
  base_strbuf_free(&sb);
}

static void fail_oob(thr *t, rx_loc loc, const char *what, const rbuf *b, const int64_t *ix,
                     int n) {
  rx_strbuf sb = {0};
  base_strbuf_printf(&sb, "%s `%s` out of bounds: indices ", what, b->decl->name);
  interp_put_ints(&sb, ix, n);
  base_strbuf_append(&sb, " outside shape ");
  interp_put_ints(&sb, b->shape, b->ndim);
  interp_fail(t, loc, "%s", sb.data);
  base_strbuf_free(&sb);
}

/* An operand's value: constants and slots (most leaves: indices, loop variables) without the
 * call into interp_ev, which gives the same. */
static inline val ev(thr *t, const cx *e) {
  if (e->op == X_SLOT) return t->slots[e->slot];
  if (e->op == X_CONST) return e->k;
  return interp_ev(t, e);
}

/* Flat offset of idx in buffer id, or -1 after reporting an error: every index evaluated (in
 * order), then each checked against the shape while the offset accumulates. */
static inline int64_t offset_of(thr *t, int id, cx *const *idx, int n, rx_loc loc, const char *what,
                                rbuf **out_b) {
  int64_t ix[RX_MAX_NDIM];
  for (int d = 0; d < n; d++) ix[d] = ev(t, idx[d]).i;
  if (t->err) return -1;
  rbuf *b = t->bufs[id];
  if (!b) {
    interp_fail(t, loc, "%s a buffer that is not allocated here", what);
    return -1;
  }
  const int64_t *shape = b->shape;
  int64_t off = 0;
  for (int d = 0; d < n; d++) {
    if ((uint64_t)ix[d] >= (uint64_t)shape[d]) {
      fail_oob(t, loc, what, b, ix, n);
      return -1;
    }
    off = off * shape[d] + ix[d];
  }
  *out_b = b;
  return off;
}

int64_t interp_offset_of(thr *t, int id, cx *const *idx, int n, rx_loc loc, const char *what,
                         rbuf **out_b) {
  return offset_of(t, id, idx, n, loc, what, out_b);
}

/* The float math of the interpreter, once for f32 (and the 16-bit floats, rounded after) and
 * once for f64: X(ENUM, f32 expression, f64 expression) of x, y, z. Every 'f' and 'n'
 * intrinsic of ir.h is listed (test_interp runs each in f32 and f64), so that neither precision
 * falls through to a default. */
#define INTERP_MATH(X)                                                                             \
  X(EXP, expf(x), exp(x))                                                                          \
  X(EXP2, exp2f(x), exp2(x))                                                                       \
  X(LOG, logf(x), log(x))                                                                          \
  X(LOG2, log2f(x), log2(x))                                                                       \
  X(SQRT, sqrtf(x), sqrt(x))                                                                       \
  X(RSQRT, 1.0f / sqrtf(x), 1.0 / sqrt(x))                                                         \
  X(TANH, tanhf(x), tanh(x))                                                                       \
  X(ERF, erff(x), erf(x))                                                                          \
  X(SIGMOID, 1.0f / (1.0f + expf(-x)), 1.0 / (1.0 + exp(-x)))                                      \
  X(SIN, sinf(x), sin(x))                                                                          \
  X(COS, cosf(x), cos(x))                                                                          \
  X(ASIN, asinf(x), asin(x))                                                                       \
  X(ACOS, acosf(x), acos(x))                                                                       \
  X(ATAN, atanf(x), atan(x))                                                                       \
  X(FLOOR, floorf(x), floor(x))                                                                    \
  X(CEIL, ceilf(x), ceil(x))                                                                       \
  X(POW, powf(x, y), pow(x, y))                                                                    \
  X(FMA, fmaf(x, y, z), fma(x, y, z))                                                              \
  X(ABS, fabsf(x), fabs(x))                                                                        \
  X(MIN, fminf(x, y), fmin(x, y))                                                                  \
  X(MAX, fmaxf(x, y), fmax(x, y))

static float fcall(rx_intrinsic f, float x, float y, float z) {
  (void)y, (void)z;
  switch (f) {
#define X(e, fx, dx)                                                                               \
  case RX_INTRIN_##e:                                                                              \
    return fx;
    INTERP_MATH(X)
#undef X
  default:
    return NAN; /* not a math intrinsic: eval never calls it so */
  }
}

/* fcall in double precision (f64). */
static double dcall(rx_intrinsic f, double x, double y, double z) {
  (void)y, (void)z;
  switch (f) {
#define X(e, fx, dx)                                                                               \
  case RX_INTRIN_##e:                                                                              \
    return dx;
    INTERP_MATH(X)
#undef X
  default:
    return NAN;
  }
}

/* Integers compare as int64, u64 as uint64 (the narrower unsigned ones are zero-extended). */
static bool icmp(rx_binop op, int64_t sx, int64_t sy, bool u64) {
  if (u64) { /* flip the sign bit: unsigned order as signed order */
    sx = (int64_t)((uint64_t)sx ^ ((uint64_t)1 << 63));
    sy = (int64_t)((uint64_t)sy ^ ((uint64_t)1 << 63));
  }
  int64_t x = sx, y = sy;
  switch (op) {
  case RX_BINOP_EQ:
    return x == y;
  case RX_BINOP_NE:
    return x != y;
  case RX_BINOP_LT:
    return x < y;
  case RX_BINOP_LE:
    return x <= y;
  case RX_BINOP_GT:
    return x > y;
  default:
    return x >= y;
  }
}
static bool fcmp(rx_binop op, double x, double y) {
  switch (op) {
  case RX_BINOP_EQ:
    return x == y;
  case RX_BINOP_NE:
    return x != y;
  case RX_BINOP_LT:
    return x < y;
  case RX_BINOP_LE:
    return x <= y;
  case RX_BINOP_GT:
    return x > y;
  default:
    return x >= y;
  }
}

/* Combines two lanes' values for a subgroup reduction. */
val interp_sg_combine(rx_intrinsic op, rx_dtype dt, val x, val y) {
  val r;
  if (isd(dt)) {
    r.d = op == RX_INTRIN_SUBGROUP_SUM   ? x.d + y.d
          : op == RX_INTRIN_SUBGROUP_MAX ? fmax(x.d, y.d)
                                         : fmin(x.d, y.d);
  } else if (isf(dt)) {
    r.f = op == RX_INTRIN_SUBGROUP_SUM   ? fround(dt, x.f + y.f)
          : op == RX_INTRIN_SUBGROUP_MAX ? fmaxf(x.f, y.f)
                                         : fminf(x.f, y.f);
  } else if (op != RX_INTRIN_SUBGROUP_SUM && dt == RX_DTYPE_U64) {
    bool gt = icmp(RX_BINOP_GT, x.i, y.i, true);
    r.i = (op == RX_INTRIN_SUBGROUP_MAX) == gt ? x.i : y.i;
  } else {
    r.i = op == RX_INTRIN_SUBGROUP_SUM   ? inorm(dt, (uint64_t)x.i + (uint64_t)y.i)
          : op == RX_INTRIN_SUBGROUP_MAX ? (x.i > y.i ? x.i : y.i)
                                         : (x.i < y.i ? x.i : y.i);
  }
  return r;
}

/* f64 arithmetic x op y. */
static inline val ev_dbin(const cx *e, val x, val y) {
  val r;
  switch ((rx_binop)e->sub) {
  case RX_BINOP_ADD:
    r.d = x.d + y.d;
    break;
  case RX_BINOP_SUB:
    r.d = x.d - y.d;
    break;
  case RX_BINOP_MUL:
    r.d = x.d * y.d;
    break;
  case RX_BINOP_DIV:
    r.d = x.d / y.d;
    break;
  case RX_BINOP_FLOORDIV:
    r.d = floor(x.d / y.d);
    break;
  default:
    r.d = x.d - y.d * floor(x.d / y.d);
    break; /* FLOORMOD */
  }
  return r;
}

/* Float arithmetic x op y, rounded to the result's dtype. */
static inline val ev_fbin(const cx *e, val x, val y) {
  if (isd((rx_dtype)e->dt)) return ev_dbin(e, x, y);
  val r;
  switch ((rx_binop)e->sub) {
  case RX_BINOP_ADD:
    r.f = x.f + y.f;
    break;
  case RX_BINOP_SUB:
    r.f = x.f - y.f;
    break;
  case RX_BINOP_MUL:
    r.f = x.f * y.f;
    break;
  case RX_BINOP_DIV:
    r.f = x.f / y.f;
    break;
  case RX_BINOP_FLOORDIV:
    r.f = floorf(x.f / y.f);
    break;
  default:
    r.f = x.f - y.f * floorf(x.f / y.f);
    break; /* FLOORMOD */
  }
  r.f = fround((rx_dtype)e->dt, r.f);
  return r;
}

/* Integer arithmetic x op y in the result's dtype (wrapping); division by zero fails. */
static inline val ev_ibin(thr *t, const cx *e, val x, val y) {
  val r;
  uint64_t ux = (uint64_t)x.i, uy = (uint64_t)y.i, ur;
  switch ((rx_binop)e->sub) {
  case RX_BINOP_ADD:
    ur = ux + uy;
    break;
  case RX_BINOP_SUB:
    ur = ux - uy;
    break;
  case RX_BINOP_MUL:
    ur = ux * uy;
    break;
  case RX_BINOP_DIV: /* C truncating division */
  case RX_BINOP_FLOORDIV:
  case RX_BINOP_FLOORMOD:
    if (y.i == 0) {
      if (!t->err)
        interp_fail(t, e->loc, "integer %s by zero (%s%lld %s 0)",
                    e->sub == RX_BINOP_FLOORMOD ? "modulo" : "division",
                    e->dt == RX_DTYPE_U64 ? "u64 bits " : "", (long long)x.i,
                    ir_binop_name((rx_binop)e->sub));
      return ZERO;
    }
    if (isu((rx_dtype)e->dt)) /* unsigned: floor and truncation agree */
      ur = e->sub == RX_BINOP_FLOORMOD ? ux % uy : ux / uy;
    else if (e->sub == RX_BINOP_FLOORDIV)
      ur = (uint64_t)floordiv64(x.i, y.i);
    else if (e->sub == RX_BINOP_FLOORMOD)
      ur = (uint64_t)floormod64(x.i, y.i);
    else
      ur = y.i == -1 ? 0 - ux : (uint64_t)(x.i / y.i);
    break;
  default:
    ur = 0;
    break;
  }
  r.i = inorm((rx_dtype)e->dt, ur);
  return r;
}

/* Symbolic (i64) arithmetic: overflow and division by zero fail, naming the expression. */
static inline val ev_sbin(thr *t, const cx *e, val x, val y) {
  val r;
  if (t->err) return ZERO;
  bool ovf = false;
  switch ((rx_expr_kind)e->sub) {
  case RX_EXPR_ADD:
    ovf = __builtin_add_overflow(x.i, y.i, &r.i);
    break;
  case RX_EXPR_SUB:
    ovf = __builtin_sub_overflow(x.i, y.i, &r.i);
    break;
  case RX_EXPR_MUL:
    ovf = __builtin_mul_overflow(x.i, y.i, &r.i);
    break;
  case RX_EXPR_FLOORDIV:
  case RX_EXPR_FLOORMOD:
    if (y.i == 0) {
      fail_sym(t, e, e->sub == RX_EXPR_FLOORDIV ? "division by zero" : "modulo by zero");
      return ZERO;
    }
    if (x.i == INT64_MIN && y.i == -1 && e->sub == RX_EXPR_FLOORDIV)
      ovf = true;
    else
      r.i = e->sub == RX_EXPR_FLOORDIV ? floordiv64(x.i, y.i) : floormod64(x.i, y.i);
    break;
  case RX_EXPR_MIN:
    r.i = x.i < y.i ? x.i : y.i;
    break;
  default:
    r.i = x.i > y.i ? x.i : y.i;
    break; /* MAX */
  }
  if (ovf) {
    fail_sym(t, e, "64-bit overflow");
    return ZERO;
  }
  return r;
}

val interp_ev(thr *t, const cx *e) {
  val r, x, y, z;
  switch ((xop)e->op) {
  case X_CONST:
    return e->k;
  case X_SLOT:
    return t->slots[e->slot];
  case X_LOAD: {
    rbuf *b;
    int64_t off = offset_of(t, e->buf, e->idx, e->nidx, e->loc, "load from", &b);
    if (off < 0) return ZERO;
    return rd(b->dt, b->data, off);
  }
  case X_CVT:
    return convert((rx_dtype)e->from, (rx_dtype)e->dt, ev(t, e->a));
  case X_FBIN:
    x = ev(t, e->a); /* operands in order: errors and subgroup steps */
    y = ev(t, e->b);
    return ev_fbin(e, x, y);
  case X_FNEG:
    x = ev(t, e->a);
    if (isd((rx_dtype)e->dt))
      r.d = -x.d;
    else
      r.f = -x.f;
    return r;
  case X_FCMP: /* from: the operands' dtype */
    x = ev(t, e->a);
    y = ev(t, e->b);
    r.i = isd((rx_dtype)e->from) ? fcmp((rx_binop)e->sub, x.d, y.d)
                                 : fcmp((rx_binop)e->sub, x.f, y.f);
    return r;
  case X_FCALL:
    x = ev(t, e->a);
    y = e->b ? ev(t, e->b) : ZERO;
    z = e->c ? ev(t, e->c) : ZERO;
    if (isd((rx_dtype)e->dt))
      r.d = dcall((rx_intrinsic)e->sub, x.d, y.d, z.d);
    else
      r.f = fround((rx_dtype)e->dt, fcall((rx_intrinsic)e->sub, x.f, y.f, z.f));
    return r;
  case X_IBIN:
    x = ev(t, e->a); /* operands in order: errors and subgroup steps */
    y = ev(t, e->b);
    return ev_ibin(t, e, x, y);
  case X_INEG:
    r.i = inorm((rx_dtype)e->dt, 0 - (uint64_t)ev(t, e->a).i);
    return r;
  case X_ICMP: /* from: the operands' dtype */
    x = ev(t, e->a);
    y = ev(t, e->b);
    r.i = icmp((rx_binop)e->sub, x.i, y.i, e->from == RX_DTYPE_U64);
    return r;
  case X_ICALL: {
    bool u64 = e->dt == RX_DTYPE_U64;
    x = ev(t, e->a);
    switch ((rx_intrinsic)e->sub) {
    case RX_INTRIN_ABS: /* unsigned: itself */
      r.i = x.i < 0 && !u64 ? inorm((rx_dtype)e->dt, 0 - (uint64_t)x.i) : x.i;
      break;
    case RX_INTRIN_MIN:
      y = ev(t, e->b);
      r.i = icmp(RX_BINOP_LT, x.i, y.i, u64) ? x.i : y.i;
      break;
    default:
      y = ev(t, e->b);
      r.i = icmp(RX_BINOP_GT, x.i, y.i, u64) ? x.i : y.i;
      break; /* MAX */
    }
    return r;
  }
  case X_SBIN:
    x = ev(t, e->a); /* operands in order: errors and subgroup steps */
    y = ev(t, e->b);
    return ev_sbin(t, e, x, y);
  case X_AND:
    r.i = ev(t, e->a).i != 0 && ev(t, e->b).i != 0;
    return r;
  case X_OR:
    r.i = ev(t, e->a).i != 0 || ev(t, e->b).i != 0;
    return r;
  case X_NOT:
    r.i = ev(t, e->a).i == 0;
    return r;
  case X_SELECT:
    return ev(t, e->a).i ? ev(t, e->b) : ev(t, e->c);
  case X_CHECK: {
    bool ok = ev(t, e->a).i != 0;
    x = ev(t, e->b);
    if (!ok && !t->err) {
      char *m = base_check_format(e->msg, x.i);
      interp_fail(t, e->loc, "%s", m ? m : e->msg);
      free(m);
    }
    return x;
  }
  case X_SUBGROUP:
    x = ev(t, e->a);
    t->sgm = e->b ? ev(t, e->b).i : 0; /* shuffle_xor's lane mask */
    if (t->err || !t->fib) return x;   /* one thread: a subgroup of one lane */
    t->state = T_SUBGROUP;
    t->sg = e;
    t->sgv = x;
    interp_yield_to_scheduler(t);
    return t->sgr;
  }
  return ZERO;
}
