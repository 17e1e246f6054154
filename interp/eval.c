/* interp/eval.c: the reference interpreter's expressions and messages (interp.h, internal part).
 *
 * interp_ev walks the compiled form of an expression (cx) in one thread: loads bounds-checked
 * against the buffer's shape, index arithmetic checked for 64-bit overflow and division by zero,
 * integer arithmetic wrapping in uint64_t, floats rounded to their dtype after every operation,
 * `select`, `&&` and `||` lazy, a subgroup operation handed to the scheduler (exec.c). The
 * messages of both compile-time and run-time errors are worded here.
 *
 * Each node is evaluated by its handler (cx.fn): interp_ev_any, one switch over every op, or,
 * for the nodes that dominate the running time of scheduled kernels, a small function chosen
 * once after compilation (interp_ev_select) that knows the node's op, dtype and operator, and
 * for index arithmetic the shape of its operands (v + w * 64 at one call). The specialized
 * handlers compute bit for bit what interp_ev_any computes and report the same errors in the
 * same order; they only skip the switches (and calls) whose outcome is known at compile time. */
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

int64_t interp_fail_oob(thr *t, const rx_loc *loc, const char *what, const rbuf *b,
                        const int64_t *ix, int n) {
  rx_strbuf sb = {0};
  base_strbuf_printf(&sb, "%s `%s` out of bounds: indices ", what, b->decl->name);
  interp_put_ints(&sb, ix, n);
  base_strbuf_append(&sb, " outside shape ");
  interp_put_ints(&sb, b->shape, b->ndim);
  interp_fail(t, *loc, "%s", sb.data);
  base_strbuf_free(&sb);
  return -1;
}

int64_t interp_fail_unallocated(thr *t, const rx_loc *loc, const char *what) {
  interp_fail(t, *loc, "%s a buffer that is not allocated here", what);
  return -1;
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

val interp_ev_any(thr *t, const cx *e) {
  val r, x, y, z;
  switch ((xop)e->op) {
  case X_CONST:
    return e->k;
  case X_SLOT:
    return t->slots[e->slot];
  case X_LOAD: {
    rbuf *b;
    int64_t off = interp_offset_of(t, e->buf, e->idx, e->nidx, &e->loc, "load from", &b);
    if (off < 0) return ZERO;
    return rd(b->dt, b->data, off);
  }
  case X_CVT:
    return convert((rx_dtype)e->from, (rx_dtype)e->dt, interp_ev(t, e->a));
  case X_FBIN:
    x = interp_ev(t, e->a); /* operands in order: errors and subgroup steps */
    y = interp_ev(t, e->b);
    return ev_fbin(e, x, y);
  case X_FNEG:
    x = interp_ev(t, e->a);
    if (isd((rx_dtype)e->dt))
      r.d = -x.d;
    else
      r.f = -x.f;
    return r;
  case X_FCMP: /* from: the operands' dtype */
    x = interp_ev(t, e->a);
    y = interp_ev(t, e->b);
    r.i = isd((rx_dtype)e->from) ? fcmp((rx_binop)e->sub, x.d, y.d)
                                 : fcmp((rx_binop)e->sub, x.f, y.f);
    return r;
  case X_FCALL:
    x = interp_ev(t, e->a);
    y = e->b ? interp_ev(t, e->b) : ZERO;
    z = e->c ? interp_ev(t, e->c) : ZERO;
    if (isd((rx_dtype)e->dt))
      r.d = dcall((rx_intrinsic)e->sub, x.d, y.d, z.d);
    else
      r.f = fround((rx_dtype)e->dt, fcall((rx_intrinsic)e->sub, x.f, y.f, z.f));
    return r;
  case X_IBIN:
    x = interp_ev(t, e->a); /* operands in order: errors and subgroup steps */
    y = interp_ev(t, e->b);
    return ev_ibin(t, e, x, y);
  case X_INEG:
    r.i = inorm((rx_dtype)e->dt, 0 - (uint64_t)interp_ev(t, e->a).i);
    return r;
  case X_ICMP: /* from: the operands' dtype */
    x = interp_ev(t, e->a);
    y = interp_ev(t, e->b);
    r.i = icmp((rx_binop)e->sub, x.i, y.i, e->from == RX_DTYPE_U64);
    return r;
  case X_ICALL: {
    bool u64 = e->dt == RX_DTYPE_U64;
    x = interp_ev(t, e->a);
    switch ((rx_intrinsic)e->sub) {
    case RX_INTRIN_ABS: /* unsigned: itself */
      r.i = x.i < 0 && !u64 ? inorm((rx_dtype)e->dt, 0 - (uint64_t)x.i) : x.i;
      break;
    case RX_INTRIN_MIN:
      y = interp_ev(t, e->b);
      r.i = icmp(RX_BINOP_LT, x.i, y.i, u64) ? x.i : y.i;
      break;
    default:
      y = interp_ev(t, e->b);
      r.i = icmp(RX_BINOP_GT, x.i, y.i, u64) ? x.i : y.i;
      break; /* MAX */
    }
    return r;
  }
  case X_SBIN:
    x = interp_ev(t, e->a); /* operands in order: errors and subgroup steps */
    y = interp_ev(t, e->b);
    return ev_sbin(t, e, x, y);
  case X_AND:
    r.i = interp_ev(t, e->a).i != 0 && interp_ev(t, e->b).i != 0;
    return r;
  case X_OR:
    r.i = interp_ev(t, e->a).i != 0 || interp_ev(t, e->b).i != 0;
    return r;
  case X_NOT:
    r.i = interp_ev(t, e->a).i == 0;
    return r;
  case X_SELECT:
    return interp_ev(t, e->a).i ? interp_ev(t, e->b) : interp_ev(t, e->c);
  case X_CHECK: {
    bool ok = interp_ev(t, e->a).i != 0;
    x = interp_ev(t, e->b);
    if (!ok && !t->err) {
      char *m = base_check_format(e->msg, x.i);
      interp_fail(t, e->loc, "%s", m ? m : e->msg);
      free(m);
    }
    return x;
  }
  case X_SUBGROUP:
    x = interp_ev(t, e->a);
    t->sgm = e->b ? interp_ev(t, e->b).i : 0; /* shuffle_xor's lane mask */
    if (t->err || !t->fib) return x;          /* one thread: a subgroup of one lane */
    t->state = T_SUBGROUP;
    t->sg = e;
    t->sgv = x;
    interp_yield_to_scheduler(t);
    return t->sgr;
  }
  return ZERO;
}

/* ------------------------------------------------------------------------------------------
 * specialized handlers: the hot nodes of scheduled kernels (index arithmetic, f32 and f16
 * arithmetic, 1-D and 2-D loads) without interp_ev_any's switches on op, dtype and operator.
 * Each computes what interp_ev_any computes for the nodes interp_ev_select gives it: operands
 * in the same order, the same checks, the same errors.
 * ------------------------------------------------------------------------------------------ */

/* Loads of N indices (0: e->nidx) read as READ(b, off). A buffer's dtype is that of its
 * declaration, which is the load's dt (interp.c), so the dtype is known here. */
static inline val read_f32(const rbuf *b, int64_t off) {
  val r;
  memcpy(&r.f, (const char *)b->data + off * 4, 4);
  return r;
}
static inline val read_f16(const rbuf *b, int64_t off) {
  uint16_t h;
  memcpy(&h, (const char *)b->data + off * 2, 2);
  return (val){.f = base_f16_to_f32(h)};
}
static inline val read_any(const rbuf *b, int64_t off) { return rd(b->dt, b->data, off); }
#define LOAD_FN(NAME, N, READ)                                                                     \
  static val NAME(thr *t, const cx *e) {                                                           \
    rbuf *b;                                                                                       \
    int64_t off =                                                                                  \
        interp_offset_of(t, e->buf, e->idx, (N) ? (N) : e->nidx, &e->loc, "load from", &b);        \
    if (off < 0) return ZERO;                                                                      \
    return READ(b, off);                                                                           \
  }
LOAD_FN(ev_load1_f32, 1, read_f32)
LOAD_FN(ev_load2_f32, 2, read_f32)
LOAD_FN(ev_loadn_f32, 0, read_f32)
LOAD_FN(ev_load1_f16, 1, read_f16)
LOAD_FN(ev_load2_f16, 2, read_f16)
LOAD_FN(ev_loadn_f16, 0, read_f16)
LOAD_FN(ev_load1_any, 1, read_any)
LOAD_FN(ev_load2_any, 2, read_any)
#undef LOAD_FN

/* Float arithmetic x OP y of one dtype (rounded by ROUND: f32 needs none). */
#define ROUND_F32(f)  (f)
#define ROUND_F16(f)  base_f16_to_f32(base_f32_to_f16(f))
#define ROUND_BF16(f) base_bf16_to_f32(base_f32_to_bf16(f))
#define FBIN_FN(NAME, OP, ROUND)                                                                   \
  static val NAME(thr *t, const cx *e) {                                                           \
    val x = interp_ev(t, e->a); /* operands in order: errors and subgroup steps */                 \
    val y = interp_ev(t, e->b);                                                                    \
    return (val){.f = ROUND(x.f OP y.f)};                                                          \
  }
#define FBIN_FNS(SUFFIX, ROUND)                                                                    \
  FBIN_FN(ev_fadd_##SUFFIX, +, ROUND)                                                              \
  FBIN_FN(ev_fsub_##SUFFIX, -, ROUND)                                                              \
  FBIN_FN(ev_fmul_##SUFFIX, *, ROUND)                                                              \
  FBIN_FN(ev_fdiv_##SUFFIX, /, ROUND)
FBIN_FNS(f32, ROUND_F32)
FBIN_FNS(f16, ROUND_F16)
FBIN_FNS(bf16, ROUND_BF16)
#undef FBIN_FNS
#undef FBIN_FN

/* Index arithmetic: x + y, x - y, x * y checked for overflow; with a constant y (K) its value is
 * read from the node directly. */
#define SBIN_FN(NAME, BUILTIN, K)                                                                  \
  static val NAME(thr *t, const cx *e) {                                                           \
    val x = interp_ev(t, e->a), y = (K) ? e->b->k : interp_ev(t, e->b), r;                         \
    if (t->err) return ZERO;                                                                       \
    if (BUILTIN(x.i, y.i, &r.i)) {                                                                 \
      fail_sym(t, e, "64-bit overflow");                                                           \
      return ZERO;                                                                                 \
    }                                                                                              \
    return r;                                                                                      \
  }
SBIN_FN(ev_sadd, __builtin_add_overflow, 0)
SBIN_FN(ev_sadd_k, __builtin_add_overflow, 1)
SBIN_FN(ev_ssub, __builtin_sub_overflow, 0)
SBIN_FN(ev_smul, __builtin_mul_overflow, 0)
SBIN_FN(ev_smul_k, __builtin_mul_overflow, 1)
#undef SBIN_FN

/* x // k and x % k by a constant k > 0: neither division by zero nor overflow can happen. */
static val ev_sfloordiv_k(thr *t, const cx *e) {
  val x = interp_ev(t, e->a);
  if (t->err) return ZERO;
  return (val){.i = floordiv64(x.i, e->b->k.i)};
}
static val ev_sfloormod_k(thr *t, const cx *e) {
  val x = interp_ev(t, e->a);
  if (t->err) return ZERO;
  return (val){.i = floormod64(x.i, e->b->k.i)};
}

/* Fused index arithmetic: the common shapes of scheduled indices (v + w * 64, v % 8 * 16,
 * v * 4 + 3) at one call, an operand evaluated by the inline copy of its own handler: opnd_mulk
 * is ev_smul_k, opnd_divk ev_sfloordiv_k, opnd_modk ev_sfloormod_k (each returns 0 where its
 * handler returns ZERO), opnd_any any node. */
static inline int64_t opnd_any(thr *t, const cx *e) { return interp_ev(t, e).i; }
static inline int64_t opnd_mulk(thr *t, const cx *e) {
  int64_t x = interp_ev(t, e->a).i, r;
  if (t->err) return 0;
  if (__builtin_mul_overflow(x, e->b->k.i, &r)) {
    fail_sym(t, e, "64-bit overflow");
    return 0;
  }
  return r;
}
static inline int64_t opnd_divk(thr *t, const cx *e) {
  int64_t x = interp_ev(t, e->a).i;
  return t->err ? 0 : floordiv64(x, e->b->k.i);
}
static inline int64_t opnd_modk(thr *t, const cx *e) {
  int64_t x = interp_ev(t, e->a).i;
  return t->err ? 0 : floormod64(x, e->b->k.i);
}
static inline int64_t opnd_k(thr *t, const cx *e) {
  (void)t;
  return e->k.i;
}
/* x OP y with operands A and B (opnd_*), checked as ev_sadd and ev_smul check. */
#define SFUSED_FN(NAME, BUILTIN, A, B)                                                             \
  static val NAME(thr *t, const cx *e) {                                                           \
    int64_t x = A(t, e->a), y = B(t, e->b);                                                        \
    val r;                                                                                         \
    if (t->err) return ZERO;                                                                       \
    if (BUILTIN(x, y, &r.i)) {                                                                     \
      fail_sym(t, e, "64-bit overflow");                                                           \
      return ZERO;                                                                                 \
    }                                                                                              \
    return r;                                                                                      \
  }
SFUSED_FN(ev_sadd_xm, __builtin_add_overflow, opnd_any, opnd_mulk) /* v + w * 64 */
SFUSED_FN(ev_sadd_mm, __builtin_add_overflow, opnd_mulk, opnd_mulk)
SFUSED_FN(ev_sadd_mk, __builtin_add_overflow, opnd_mulk, opnd_k)
SFUSED_FN(ev_smul_dk, __builtin_mul_overflow, opnd_divk, opnd_k) /* v // 8 * 16 */
SFUSED_FN(ev_smul_mk, __builtin_mul_overflow, opnd_modk, opnd_k) /* v % 8 * 16 */
#undef SFUSED_FN

/* The other index arithmetic (min, max, division by a variable) */
static val ev_sbin_any(thr *t, const cx *e) {
  val x = interp_ev(t, e->a);
  val y = interp_ev(t, e->b);
  return ev_sbin(t, e, x, y);
}

/* Comparisons of signed integers (and bool; u64 goes to interp_ev_any). */
#define ICMP_FN(NAME, OP)                                                                          \
  static val NAME(thr *t, const cx *e) {                                                           \
    val x = interp_ev(t, e->a);                                                                    \
    val y = interp_ev(t, e->b);                                                                    \
    return (val){.i = x.i OP y.i};                                                                 \
  }
ICMP_FN(ev_ieq, ==)
ICMP_FN(ev_ine, !=)
ICMP_FN(ev_ilt, <)
ICMP_FN(ev_ile, <=)
ICMP_FN(ev_igt, >)
ICMP_FN(ev_ige, >=)
#undef ICMP_FN

/* Conversions between the 32-bit-computed floats: f16/bf16 to f32 is exact, f32 or bf16 to f16
 * (and f32 or f16 to bf16) rounds. */
static val ev_cvt_to_f32(thr *t, const cx *e) { return (val){.f = interp_ev(t, e->a).f}; }
static val ev_cvt_to_f16(thr *t, const cx *e) {
  return (val){.f = ROUND_F16(interp_ev(t, e->a).f)};
}
static val ev_cvt_to_bf16(thr *t, const cx *e) {
  return (val){.f = ROUND_BF16(interp_ev(t, e->a).f)};
}

static val ev_select(thr *t, const cx *e) {
  return interp_ev(t, e->a).i ? interp_ev(t, e->b) : interp_ev(t, e->c);
}

/* The handler of float arithmetic node e, or NULL. */
static interp_evfn pick_fbin(const cx *e) {
  static const interp_evfn by_dt[3][4] = {
      {ev_fadd_f32, ev_fsub_f32, ev_fmul_f32, ev_fdiv_f32},
      {ev_fadd_f16, ev_fsub_f16, ev_fmul_f16, ev_fdiv_f16},
      {ev_fadd_bf16, ev_fsub_bf16, ev_fmul_bf16, ev_fdiv_bf16},
  };
  int d = e->dt == RX_DTYPE_F32 ? 0 : e->dt == RX_DTYPE_F16 ? 1 : e->dt == RX_DTYPE_BF16 ? 2 : -1;
  int o = e->sub == RX_BINOP_ADD   ? 0
          : e->sub == RX_BINOP_SUB ? 1
          : e->sub == RX_BINOP_MUL ? 2
          : e->sub == RX_BINOP_DIV ? 3
                                   : -1;
  return d < 0 || o < 0 ? NULL : by_dt[d][o];
}

/* Index arithmetic node e by a constant k (> 0 where pos): x * k, x // k, x % k. */
static bool sbin_k(const cx *e, rx_expr_kind kind, bool pos) {
  return e && e->op == X_SBIN && e->sub == kind && e->b->op == X_CONST && (!pos || e->b->k.i > 0);
}

/* The handler of index arithmetic node e. */
static interp_evfn pick_sbin(const cx *e) {
  bool k = e->b && e->b->op == X_CONST, kpos = k && e->b->k.i > 0;
  bool am = sbin_k(e->a, RX_EXPR_MUL, false), bm = sbin_k(e->b, RX_EXPR_MUL, false);
  switch ((rx_expr_kind)e->sub) {
  case RX_EXPR_ADD:
    if (am) return bm ? ev_sadd_mm : k ? ev_sadd_mk : ev_sadd;
    return bm ? ev_sadd_xm : k ? ev_sadd_k : ev_sadd;
  case RX_EXPR_SUB:
    return ev_ssub;
  case RX_EXPR_MUL:
    if (k && sbin_k(e->a, RX_EXPR_FLOORDIV, true)) return ev_smul_dk;
    if (k && sbin_k(e->a, RX_EXPR_FLOORMOD, true)) return ev_smul_mk;
    return k ? ev_smul_k : ev_smul;
  case RX_EXPR_FLOORDIV:
    return kpos ? ev_sfloordiv_k : ev_sbin_any;
  case RX_EXPR_FLOORMOD:
    return kpos ? ev_sfloormod_k : ev_sbin_any;
  default:
    return ev_sbin_any;
  }
}

static interp_evfn pick_load(const cx *e) {
  switch (e->dt) {
  case RX_DTYPE_F32:
    return e->nidx == 1 ? ev_load1_f32 : e->nidx == 2 ? ev_load2_f32 : ev_loadn_f32;
  case RX_DTYPE_F16:
    return e->nidx == 1 ? ev_load1_f16 : e->nidx == 2 ? ev_load2_f16 : ev_loadn_f16;
  default:
    return e->nidx == 1 ? ev_load1_any : e->nidx == 2 ? ev_load2_any : NULL;
  }
}

static interp_evfn pick_icmp(const cx *e) {
  if (e->from == RX_DTYPE_U64) return NULL;
  switch ((rx_binop)e->sub) {
  case RX_BINOP_EQ:
    return ev_ieq;
  case RX_BINOP_NE:
    return ev_ine;
  case RX_BINOP_LT:
    return ev_ilt;
  case RX_BINOP_LE:
    return ev_ile;
  case RX_BINOP_GT:
    return ev_igt;
  default:
    return ev_ige;
  }
}

static interp_evfn pick_cvt(const cx *e) {
  bool f32ish = e->from == RX_DTYPE_F32 || e->from == RX_DTYPE_F16 || e->from == RX_DTYPE_BF16;
  if (!f32ish) return NULL;
  switch (e->dt) {
  case RX_DTYPE_F32:
    return ev_cvt_to_f32;
  case RX_DTYPE_F16:
    return ev_cvt_to_f16;
  case RX_DTYPE_BF16:
    return ev_cvt_to_bf16;
  default:
    return NULL;
  }
}

void interp_ev_select(cx *e) {
  interp_evfn f = NULL;
  switch ((xop)e->op) {
  case X_LOAD:
    f = pick_load(e);
    break;
  case X_CVT:
    f = pick_cvt(e);
    break;
  case X_FBIN:
    f = pick_fbin(e);
    break;
  case X_SBIN:
    f = pick_sbin(e);
    break;
  case X_ICMP:
    f = pick_icmp(e);
    break;
  case X_SELECT:
    f = ev_select;
    break;
  default:
    break;
  }
  e->fn = f ? f : interp_ev_any;
}
