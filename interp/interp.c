/* The reference interpreter of tensor programs; the semantics are in interp.h.
 *
 * A program is first compiled into a small closure form: expressions (cx) and statements (cst)
 * with every variable, let-local and buffer resolved to a slot index, every implicit conversion
 * made explicit (CVT nodes), and the parallel structure found (which loop launches blocks,
 * which loops are bound to thread axes, whether a block needs fibers at all). Running is then
 * a tree walk over that form with no lookups by name.
 *
 * Errors at run time are recorded in the running thread (thr.err, the first one wins) and
 * evaluation returns zeros from then on; statements stop at the first error. Nothing is
 * undefined behaviour on any input: index arithmetic is checked, integer arithmetic wraps in
 * uint64_t, every access is bounds-checked.
 *
 * f64 is computed in double (val.d); the other floats in float, rounded to their dtype. Unsigned
 * integers are held zero-extended in val.i, u64 as its 64 bits (a value of 2^63 or more reads as
 * a negative int64 there): + - * wrap alike, and division, modulo, comparisons, min/max and
 * conversions to float look at the dtype and treat u64 as unsigned, so u64 is exact over its
 * whole range. */
#include "interp.h"

#include "fiber.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------------------------
 * values and dtypes
 * ------------------------------------------------------------------------------------------ */
typedef union val {
  int64_t i; /* integers (normalized to their width: sign- or zero-extended; u64: its bits) and
                bool (0/1) */
  float f;   /* f32, f16, bf16 (f16/bf16 hold values exactly representable in the dtype) */
  double d;  /* f64 */
} val;

static const val ZERO = {0};

static bool isf(rx_dtype t) {
  return t == RX_DTYPE_F32 || t == RX_DTYPE_F16 || t == RX_DTYPE_BF16 || t == RX_DTYPE_F64;
}
static bool isd(rx_dtype t) { return t == RX_DTYPE_F64; }
/* Unsigned integers: the dtype table's is_signed, bool excluded. */
static bool isu(rx_dtype t) { return rx_dtype_is_int(t) && !rx_dtype_is_signed(t); }

static size_t elem_size(rx_dtype t) {
  switch (t) {
  case RX_DTYPE_F32:
  case RX_DTYPE_I32:
  case RX_DTYPE_U32:
    return 4;
  case RX_DTYPE_F16:
  case RX_DTYPE_BF16:
  case RX_DTYPE_I16:
  case RX_DTYPE_U16:
    return 2;
  case RX_DTYPE_I64:
  case RX_DTYPE_U64:
  case RX_DTYPE_F64:
    return 8;
  case RX_DTYPE_I8:
  case RX_DTYPE_U8:
  case RX_DTYPE_BOOL:
    return 1;
  default:
    return 0;
  }
}

/* Rounds a float to the precision of float dtype t. */
static inline float fround(rx_dtype t, float f) {
  if (t == RX_DTYPE_F16) return rx_f16_to_f32(rx_f32_to_f16(f));
  if (t == RX_DTYPE_BF16) return rx_bf16_to_f32(rx_f32_to_bf16(f));
  return f;
}

/* Wraps v to integer dtype t (bool: != 0). */
static inline int64_t inorm(rx_dtype t, uint64_t v) {
  switch (t) {
  case RX_DTYPE_I32:
    return (int32_t)(uint32_t)v;
  case RX_DTYPE_I16:
    return (int16_t)(uint16_t)v;
  case RX_DTYPE_I8:
    return (int8_t)(uint8_t)v;
  case RX_DTYPE_U8:
    return (int64_t)(v & 0xffu);
  case RX_DTYPE_U16:
    return (int64_t)(v & 0xffffu);
  case RX_DTYPE_U32:
    return (int64_t)(v & 0xffffffffu);
  case RX_DTYPE_BOOL:
    return v != 0;
  default:
    return (int64_t)v;
  }
}

/* Float (f32 or f64, as a double) to integer dtype t: truncation toward zero, saturating; NaN
 * gives 0. */
static int64_t f2i(rx_dtype t, double f) {
  if (t == RX_DTYPE_BOOL) return f != 0.0;
  if (isnan(f)) return 0;
  double lo, hi;
  switch (t) {
  case RX_DTYPE_I32:
    lo = INT32_MIN;
    hi = INT32_MAX;
    break;
  case RX_DTYPE_I16:
    lo = INT16_MIN;
    hi = INT16_MAX;
    break;
  case RX_DTYPE_I8:
    lo = INT8_MIN;
    hi = INT8_MAX;
    break;
  case RX_DTYPE_U8:
    lo = 0;
    hi = 255;
    break;
  case RX_DTYPE_U16:
    lo = 0;
    hi = UINT16_MAX;
    break;
  case RX_DTYPE_U32:
    lo = 0;
    hi = UINT32_MAX;
    break;
  case RX_DTYPE_U64: /* 2^64 is exact in double, UINT64_MAX is not */
    if (f <= 0) return 0;
    if (f >= 18446744073709551616.0) return (int64_t)UINT64_MAX;
    return (int64_t)(uint64_t)f;
  default: /* i64: 2^63 is exact in double, INT64_MAX is not */
    if (f >= 9223372036854775808.0) return INT64_MAX;
    if (f <= -9223372036854775808.0) return INT64_MIN;
    return (int64_t)f;
  }
  double d = f;
  if (d <= lo) return (int64_t)lo;
  if (d >= hi) return (int64_t)hi;
  return (int64_t)d;
}

/* An integer of dtype t (normalized) as a double: u64 unsigned. */
static double i2d(rx_dtype t, int64_t i) {
  return t == RX_DTYPE_U64 ? (double)(uint64_t)i : (double)i;
}
/* ... and as a float (rounded once, not through double). */
static float i2f(rx_dtype t, int64_t i) {
  return t == RX_DTYPE_U64 ? (float)(uint64_t)i : (float)i;
}

/* Conversions; f64 to f16/bf16 rounds through f32 as the printers do (twice: to f32, then). */
static val convert(rx_dtype from, rx_dtype to, val v) {
  val r;
  if (isd(to)) {
    r.d = isd(from) ? v.d : isf(from) ? (double)v.f : i2d(from, v.i);
  } else if (isf(to)) {
    r.f = fround(to, isd(from) ? (float)v.d : isf(from) ? v.f : i2f(from, v.i));
  } else if (isf(from)) {
    r.i = f2i(to, isd(from) ? v.d : (double)v.f);
  } else {
    r.i = inorm(to, (uint64_t)v.i);
  }
  return r;
}

static inline val rd(rx_dtype t, const void *data, int64_t off) {
  val r;
  const char *p = (const char *)data;
  switch (t) {
  case RX_DTYPE_F32:
    memcpy(&r.f, p + off * 4, 4);
    break;
  case RX_DTYPE_F16: {
    uint16_t h;
    memcpy(&h, p + off * 2, 2);
    r.f = rx_f16_to_f32(h);
    break;
  }
  case RX_DTYPE_BF16: {
    uint16_t h;
    memcpy(&h, p + off * 2, 2);
    r.f = rx_bf16_to_f32(h);
    break;
  }
  case RX_DTYPE_I64:
  case RX_DTYPE_U64:
    memcpy(&r.i, p + off * 8, 8);
    break;
  case RX_DTYPE_F64:
    memcpy(&r.d, p + off * 8, 8);
    break;
  case RX_DTYPE_I32: {
    int32_t x;
    memcpy(&x, p + off * 4, 4);
    r.i = x;
    break;
  }
  case RX_DTYPE_U32: {
    uint32_t x;
    memcpy(&x, p + off * 4, 4);
    r.i = x;
    break;
  }
  case RX_DTYPE_U16: {
    uint16_t x;
    memcpy(&x, p + off * 2, 2);
    r.i = x;
    break;
  }
  case RX_DTYPE_I16: {
    int16_t x;
    memcpy(&x, p + off * 2, 2);
    r.i = x;
    break;
  }
  case RX_DTYPE_I8: {
    int8_t x;
    memcpy(&x, p + off, 1);
    r.i = x;
    break;
  }
  case RX_DTYPE_U8: {
    uint8_t x;
    memcpy(&x, p + off, 1);
    r.i = x;
    break;
  }
  case RX_DTYPE_BOOL: {
    uint8_t x;
    memcpy(&x, p + off, 1);
    r.i = x != 0;
    break;
  }
  default:
    r.i = 0;
    break;
  }
  return r;
}

static inline void wr(rx_dtype t, void *data, int64_t off, val v) {
  char *p = (char *)data;
  switch (t) {
  case RX_DTYPE_F32:
    memcpy(p + off * 4, &v.f, 4);
    break;
  case RX_DTYPE_F16: {
    uint16_t h = rx_f32_to_f16(v.f);
    memcpy(p + off * 2, &h, 2);
    break;
  }
  case RX_DTYPE_BF16: {
    uint16_t h = rx_f32_to_bf16(v.f);
    memcpy(p + off * 2, &h, 2);
    break;
  }
  case RX_DTYPE_I64:
  case RX_DTYPE_U64:
    memcpy(p + off * 8, &v.i, 8);
    break;
  case RX_DTYPE_F64:
    memcpy(p + off * 8, &v.d, 8);
    break;
  case RX_DTYPE_I32: {
    int32_t x = (int32_t)v.i;
    memcpy(p + off * 4, &x, 4);
    break;
  }
  case RX_DTYPE_U32: {
    uint32_t x = (uint32_t)v.i;
    memcpy(p + off * 4, &x, 4);
    break;
  }
  case RX_DTYPE_U16: {
    uint16_t x = (uint16_t)v.i;
    memcpy(p + off * 2, &x, 2);
    break;
  }
  case RX_DTYPE_I16: {
    int16_t x = (int16_t)v.i;
    memcpy(p + off * 2, &x, 2);
    break;
  }
  case RX_DTYPE_I8: {
    int8_t x = (int8_t)v.i;
    memcpy(p + off, &x, 1);
    break;
  }
  case RX_DTYPE_U8: {
    uint8_t x = (uint8_t)v.i;
    memcpy(p + off, &x, 1);
    break;
  }
  case RX_DTYPE_BOOL: {
    uint8_t x = v.i != 0;
    memcpy(p + off, &x, 1);
    break;
  }
  default:
    break;
  }
}

/* Floor division and modulo of int64 (b != 0). INT64_MIN // -1 wraps to INT64_MIN. */
static int64_t floordiv64(int64_t a, int64_t b) {
  if (b == -1) return (int64_t)(0 - (uint64_t)a);
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) q--;
  return q;
}
static int64_t floormod64(int64_t a, int64_t b) {
  if (b == -1) return 0;
  int64_t r = a % b;
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  return r;
}

/* ------------------------------------------------------------------------------------------
 * compiled form
 * ------------------------------------------------------------------------------------------ */
typedef enum xop {
  X_CONST, /* k */
  X_SLOT,  /* slots[slot] */
  X_LOAD,  /* bufs[buf][idx...] */
  X_CVT,   /* convert a from `from` to dt */
  X_FBIN,  /* float binary: sub = rx_binop (arithmetic) */
  X_FNEG,
  X_FCMP,  /* sub = rx_binop (comparison), operands float, dt bool */
  X_FCALL, /* sub = rx_intrinsic, float */
  X_IBIN,  /* integer binary with wrap-around (dt's width) */
  X_INEG,
  X_ICMP,  /* integers or bools (normalized int64 compare) */
  X_ICALL, /* abs/min/max on integers */
  X_SBIN,  /* index arithmetic: checked i64, sub = rx_expr_kind (ADD SUB MUL FLOORDIV ...) */
  X_AND,   /* lazy */
  X_OR,    /* lazy */
  X_NOT,
  X_SELECT,   /* lazy: a ? b : c */
  X_SUBGROUP, /* sub = rx_intrinsic, operand a */
  X_CHECK,    /* check(a, b, msg): b, an error with msg where a is false (ir.h, RX_INTRIN_CHECK) */
} xop;

typedef struct cx cx;
struct cx {
  uint8_t op;
  uint8_t dt;   /* result dtype */
  uint8_t from; /* CVT: source dtype */
  uint8_t sub;  /* binop / intrinsic / expr kind */
  int slot;     /* SLOT */
  int buf;      /* LOAD */
  int nidx;
  val k; /* CONST */
  cx *a, *b, *c;
  cx **idx;          /* LOAD */
  const rx_expr *sx; /* SBIN: the symbolic subexpression (messages) */
  const char *msg;   /* CHECK: the message */
  rx_loc loc;
};

typedef enum cst_kind {
  C_SEQ,
  C_FOR,    /* serial (also unroll, vectorize, and blockIdx loops that are not innermost) */
  C_LAUNCH, /* innermost blockIdx loop: each iteration runs its body as a block of threads */
  C_TFOR,   /* threadIdx loop */
  C_REDUCE,
  C_STORE,
  C_LET,
  C_ALLOC,
  C_IF,
  C_BARRIER,
  C_MMA,    /* buf: C, buf2: A, buf3: B (ir.h, RX_STMT_MMA) */
  C_ACOPY,  /* async_copy: buf, idx: destination; value: the source load; cond */
  C_COMMIT, /* async_commit */
  C_AWAIT,  /* async_wait: count groups stay in flight */
  C_LDSM,   /* ldmatrix: buf: the fragment; value: the lane's row; count matrices (ir.h) */
  C_FRAG,   /* buf: the fragment (D of mma), buf2: A, buf3: B, buf4: C or the buffer in memory */
} cst_kind;

typedef struct blkinfo blkinfo;
typedef struct cst cst;
struct cst {
  cst_kind kind;
  int axis; /* TFOR: 0..2 */
  rx_scope scope;
  cst **body; /* SEQ */
  int n;
  int nvars; /* FOR, LAUNCH, TFOR: 1; REDUCE: nvars */
  int *slots;
  cx **lo, **ext;
  cst *inner, *init, *els;
  int buf, alloc_id; /* STORE / ALLOC */
  int buf2, buf3;    /* MMA: A, B */
  int buf4;          /* FRAG: C (mma) or the buffer in memory (load, store) */
  rx_frag_op fop;    /* FRAG */
  bool col_major;    /* FRAG load, store */
  cx **idx;          /* STORE indices, ALLOC shape */
  int nidx;
  cx *value;    /* STORE, LET, IF cond */
  cx *cond;     /* ACOPY */
  int count;    /* AWAIT, LDSM */
  bool trans;   /* LDSM */
  int slot;     /* LET */
  blkinfo *blk; /* LAUNCH */
  rx_loc loc;
  const rx_stmt *src;
};

/* A block body: the body of an innermost blockIdx loop, or the whole program. */
struct blkinfo {
  cst *body;
  int nt; /* thread loops in the body (their extents give the block size) */
  int *axes;
  cx **exts;
  bool sync; /* has barriers or subgroup operations: threads must run as fibers */
  int nbv;   /* enclosing blockIdx loops (for messages) */
  const char **bv_names;
  int *bv_slots;
};

/* A buffer at run time. */
typedef struct rbuf {
  void *data;
  rx_dtype dt;
  int ndim;
  int64_t shape[RX_MAX_NDIM];
  int64_t count;
  const rx_buffer *decl;
} rbuf;

typedef struct keyid {
  const void *key;
  int id;
} keyid;

typedef struct run run;
typedef struct blk blk;

enum { T_RUN, T_BARRIER, T_SUBGROUP, T_MMA, T_DONE };

/* An async_copy in flight (ir.h, RX_STMT_ASYNC_COPY): its 16 bytes, read when issued, land in
 * dst at the async_wait that leaves its group behind. */
typedef struct acopy {
  rbuf *dst;
  int64_t off; /* in elements of dst */
  int group;   /* the thread's commit count when issued */
  unsigned char bytes[16];
} acopy;

typedef struct thr {
  run *rs;
  blk *b;        /* the block the thread belongs to (the top level has a one-thread block) */
  val *slots;    /* variables and let-locals */
  rbuf **bufs;   /* by buffer id: parameters, allocations in scope */
  rbuf **locals; /* by alloc id: this thread's local allocations (owned) */
  int64_t tid[3];
  int lin;
  rx_status err;
  /* fiber scheduling */
  rx_fiber *fib; /* NULL: runs alone (no barrier waits) */
  int state;
  const cst *bar;         /* T_BARRIER: where */
  const cx *sg;           /* T_SUBGROUP: which operation */
  const cst *mma;         /* T_MMA: which one (C_MMA, C_LDSM or C_FRAG) */
  val sgv, sgr;           /* T_SUBGROUP: own value, result */
  RX_VEC(acopy) inflight; /* async copies not landed yet */
  int groups;             /* async_commit count */
  rbuf *lm_buf;           /* T_MMA at ldmatrix: the lane's row, or NULL (lane unused) */
  int64_t lm_off;
  int64_t moff[3];       /* T_MMA: the first element of the fragments (C, A, B; ldmatrix: [0]) */
  int64_t foff, fstride; /* C_FRAG load/store: offset of element (0, 0), stride */
  val fval;              /* C_FRAG fill: the value */
} thr;

struct blk {
  const blkinfo *info; /* NULL for the top-level pseudo block */
  thr *parent;         /* the thread that launched it (block variables live there) */
  thr *th;
  int n;
  int64_t dims[3];
  rbuf **inst; /* by alloc id: global and shared allocations of this block (owned) */
};

struct run {
  const rx_tensor_fn *f;
  const char *fname;
  rx_arena arena;        /* compiled form */
  RX_VEC(keyid) slotmap; /* rx_expr var / rx_local -> slot */
  RX_VEC(keyid) bufmap;  /* rx_buffer -> id */
  int nslots, nbufs, nallocs;
  rx_ptrvec scope;    /* compile: definitions visible here (vars, locals, buffers) */
  size_t launch_mark; /* compile: scope length where the current block was launched */
  blkinfo *cur_blk;   /* compile: the block being compiled, or NULL */
  bool axis_active[3];
  RX_VEC(int) bv_slots; /* compile: enclosing blockIdx loops */
  RX_VEC(const char *) bv_names;
  rx_status cerr; /* first compile error */
  /* run */
  int sgsize;
  bool fragments; /* rx_interp_opts.fragments */
  int max_threads;
  int64_t max_steps, steps;
  rx_fiber **fibers;
  int nfibers;
  size_t stack_size; /* of every fiber: from the program's nesting depth */
  /* compiled program (prepare) */
  cx ***dims; /* per parameter: its dims */
  cx **facts;
  cst *body;
  blkinfo *whole; /* the whole program is one block (no blockIdx loops), or NULL */
  rx_interp_arg *args;
};

/* ------------------------------------------------------------------------------------------
 * messages
 * ------------------------------------------------------------------------------------------ */
static void put_loc(rx_strbuf *sb, rx_loc loc) {
  if (loc.src) rx_strbuf_printf(sb, " (at %s:%u:%u)", loc.src->name, loc.line, loc.col);
}

static void put_ints(rx_strbuf *sb, const int64_t *v, int n) {
  rx_strbuf_putc(sb, '[');
  for (int i = 0; i < n; i++) rx_strbuf_printf(sb, "%s%lld", i ? ", " : "", (long long)v[i]);
  rx_strbuf_putc(sb, ']');
}

static void put_expr(rx_strbuf *sb, const rx_expr *e) {
  char *s = rx_expr_to_string(e);
  rx_strbuf_append(sb, s);
  free(s);
}

/* " in block (bx = 1), thread (3, 0, 0)" */
static void put_where(rx_strbuf *sb, const blk *b, const thr *t) {
  if (!b || !b->info) return;
  const blkinfo *bi = b->info;
  if (bi->nbv > 0) {
    rx_strbuf_append(sb, " in block (");
    for (int i = 0; i < bi->nbv; i++)
      rx_strbuf_printf(sb, "%s%s = %lld", i ? ", " : "", bi->bv_names[i],
                       (long long)b->parent->slots[bi->bv_slots[i]].i);
    rx_strbuf_putc(sb, ')');
  }
  if (t && b->n > 1)
    rx_strbuf_printf(sb, "%s thread (%lld, %lld, %lld)", bi->nbv ? "," : " in",
                     (long long)t->tid[0], (long long)t->tid[1], (long long)t->tid[2]);
}

static rx_status make_err(run *rs, const blk *b, const thr *t, rx_loc loc, const char *msg) {
  rx_strbuf sb = {0};
  rx_strbuf_printf(&sb, "tensor_fn `%s`: %s", rs->fname, msg);
  put_loc(&sb, loc);
  put_where(&sb, b, t);
  rx_status s = rx_status_make(RX_ERR_INVALID, "%s", sb.data);
  rx_strbuf_free(&sb);
  return s;
}

static void fail(thr *t, rx_loc loc, const char *fmt, ...) RX_PRINTF(3, 4);
static void fail(thr *t, rx_loc loc, const char *fmt, ...) {
  if (t->err) return;
  rx_strbuf sb = {0};
  va_list ap;
  va_start(ap, fmt);
  rx_strbuf_vprintf(&sb, fmt, ap);
  va_end(ap);
  t->err = make_err(t->rs, t->b, t, loc, sb.data);
  rx_strbuf_free(&sb);
}

static void cfail(run *rs, rx_loc loc, const char *fmt, ...) RX_PRINTF(3, 4);
static void cfail(run *rs, rx_loc loc, const char *fmt, ...) {
  if (rs->cerr) return;
  rx_strbuf sb = {0};
  va_list ap;
  va_start(ap, fmt);
  rx_strbuf_vprintf(&sb, fmt, ap);
  va_end(ap);
  rs->cerr = make_err(rs, NULL, NULL, loc, sb.data);
  rx_strbuf_free(&sb);
}

/* The values of the variables of e in t's frame, as " (n = 4, k = 0)". */
static void collect_vars(const rx_expr *e, rx_ptrvec *out) {
  if (!e) return;
  if (e->kind == RX_EXPR_VAR) {
    for (size_t i = 0; i < out->len; i++)
      if (out->data[i] == e) return;
    rx_ptrvec_push(out, (void *)e);
    return;
  }
  collect_vars(e->a, out);
  collect_vars(e->b, out);
  collect_vars(e->c, out);
}

static int find_key(const keyid *v, size_t n, const void *key) {
  for (size_t i = n; i-- > 0;)
    if (v[i].key == key) return v[i].id;
  return -1;
}

static void put_var_values(rx_strbuf *sb, run *rs, const val *slots, const rx_expr *e) {
  rx_ptrvec vars = {0};
  collect_vars(e, &vars);
  int shown = 0;
  for (size_t i = 0; i < vars.len; i++) {
    const rx_expr *v = vars.data[i];
    int s = find_key(rs->slotmap.data, rs->slotmap.len, v);
    if (s < 0) continue;
    rx_strbuf_printf(sb, "%s%s = %lld", shown++ ? ", " : " (", v->name, (long long)slots[s].i);
  }
  if (shown) rx_strbuf_putc(sb, ')');
  rx_ptrvec_free(&vars);
}

/* ------------------------------------------------------------------------------------------
 * evaluation
 * ------------------------------------------------------------------------------------------ */
static val ev(thr *t, const cx *e);
static void yield_to_scheduler(thr *t);

static void fail_sym(thr *t, const cx *e, const char *what) {
  rx_strbuf sb = {0};
  rx_strbuf_append(&sb, "`");
  put_expr(&sb, e->sx);
  rx_strbuf_append(&sb, "`");
  put_var_values(&sb, t->rs, t->slots, e->sx);
  fail(t, e->loc, "%s in index expression %s", what, sb.data);
  rx_strbuf_free(&sb);
}

static void fail_oob(thr *t, rx_loc loc, const char *what, const rbuf *b, const int64_t *ix,
                     int n) {
  rx_strbuf sb = {0};
  rx_strbuf_printf(&sb, "%s `%s` out of bounds: indices ", what, b->decl->name);
  put_ints(&sb, ix, n);
  rx_strbuf_append(&sb, " outside shape ");
  put_ints(&sb, b->shape, b->ndim);
  fail(t, loc, "%s", sb.data);
  rx_strbuf_free(&sb);
}

/* Flat offset of idx in buffer id, or -1 after reporting an error. */
static int64_t offset_of(thr *t, int id, cx *const *idx, int n, rx_loc loc, const char *what,
                         rbuf **out_b) {
  int64_t ix[RX_MAX_NDIM];
  for (int d = 0; d < n; d++) ix[d] = ev(t, idx[d]).i;
  if (t->err) return -1;
  rbuf *b = t->bufs[id];
  if (!b) {
    fail(t, loc, "%s a buffer that is not allocated here", what);
    return -1;
  }
  int64_t off = 0;
  for (int d = 0; d < n; d++) {
    if ((uint64_t)ix[d] >= (uint64_t)b->shape[d]) {
      fail_oob(t, loc, what, b, ix, n);
      return -1;
    }
    off = off * b->shape[d] + ix[d];
  }
  *out_b = b;
  return off;
}

static float fcall(rx_intrinsic f, float x, float y, float z) {
  switch (f) {
  case RX_INTRIN_EXP:
    return expf(x);
  case RX_INTRIN_EXP2:
    return exp2f(x);
  case RX_INTRIN_LOG:
    return logf(x);
  case RX_INTRIN_LOG2:
    return log2f(x);
  case RX_INTRIN_SQRT:
    return sqrtf(x);
  case RX_INTRIN_RSQRT:
    return 1.0f / sqrtf(x);
  case RX_INTRIN_TANH:
    return tanhf(x);
  case RX_INTRIN_ERF:
    return erff(x);
  case RX_INTRIN_SIGMOID:
    return 1.0f / (1.0f + expf(-x));
  case RX_INTRIN_SIN:
    return sinf(x);
  case RX_INTRIN_COS:
    return cosf(x);
  case RX_INTRIN_ASIN:
    return asinf(x);
  case RX_INTRIN_ACOS:
    return acosf(x);
  case RX_INTRIN_ATAN:
    return atanf(x);
  case RX_INTRIN_FLOOR:
    return floorf(x);
  case RX_INTRIN_CEIL:
    return ceilf(x);
  case RX_INTRIN_POW:
    return powf(x, y);
  case RX_INTRIN_FMA:
    return fmaf(x, y, z);
  case RX_INTRIN_ABS:
    return fabsf(x);
  case RX_INTRIN_MIN:
    return fminf(x, y);
  case RX_INTRIN_MAX:
    return fmaxf(x, y);
  default:
    return x;
  }
}

/* fcall in double precision (f64). */
static double dcall(rx_intrinsic f, double x, double y, double z) {
  switch (f) {
  case RX_INTRIN_EXP:
    return exp(x);
  case RX_INTRIN_EXP2:
    return exp2(x);
  case RX_INTRIN_LOG:
    return log(x);
  case RX_INTRIN_LOG2:
    return log2(x);
  case RX_INTRIN_SQRT:
    return sqrt(x);
  case RX_INTRIN_RSQRT:
    return 1.0 / sqrt(x);
  case RX_INTRIN_TANH:
    return tanh(x);
  case RX_INTRIN_ERF:
    return erf(x);
  case RX_INTRIN_SIGMOID:
    return 1.0 / (1.0 + exp(-x));
  case RX_INTRIN_SIN:
    return sin(x);
  case RX_INTRIN_COS:
    return cos(x);
  case RX_INTRIN_FLOOR:
    return floor(x);
  case RX_INTRIN_CEIL:
    return ceil(x);
  case RX_INTRIN_POW:
    return pow(x, y);
  case RX_INTRIN_FMA:
    return fma(x, y, z);
  case RX_INTRIN_ABS:
    return fabs(x);
  case RX_INTRIN_MIN:
    return fmin(x, y);
  case RX_INTRIN_MAX:
    return fmax(x, y);
  default:
    return x;
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
static val sg_combine(rx_intrinsic op, rx_dtype dt, val x, val y) {
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
        fail(t, e->loc, "integer %s by zero (%s%lld %s 0)",
             e->sub == RX_BINOP_FLOORMOD ? "modulo" : "division",
             e->dt == RX_DTYPE_U64 ? "u64 bits " : "", (long long)x.i,
             rx_binop_name((rx_binop)e->sub));
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

static val ev(thr *t, const cx *e) {
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
      char *m = rx_check_format(e->msg, x.i);
      fail(t, e->loc, "%s", m ? m : e->msg);
      free(m);
    }
    return x;
  }
  case X_SUBGROUP:
    x = ev(t, e->a);
    if (t->err || !t->fib) return x; /* one thread: a subgroup of one lane */
    t->state = T_SUBGROUP;
    t->sg = e;
    t->sgv = x;
    yield_to_scheduler(t);
    return t->sgr;
  }
  return ZERO;
}

/* ------------------------------------------------------------------------------------------
 * statements
 * ------------------------------------------------------------------------------------------ */
static void exec(thr *t, const cst *s);
static void exec_frag(thr *t, const cst *s);
static void run_block(thr *p, const blkinfo *bi);

static void free_rbuf(rbuf *b) {
  if (!b) return;
  free(b->data);
  free(b);
}

/* Loop range [lo, lo + n) with lo + n - 1 representable; false after reporting. */
static bool loop_range(thr *t, const cst *s, int k, int64_t *lo, int64_t *n) {
  *lo = ev(t, s->lo[k]).i;
  *n = ev(t, s->ext[k]).i;
  if (t->err) return false;
  int64_t last;
  if (*n > 0 && __builtin_add_overflow(*lo, *n - 1, &last)) {
    fail(t, s->loc, "loop from %lld with %lld iterations overflows 64 bits", (long long)*lo,
         (long long)*n);
    return false;
  }
  return true;
}

static void reduce_level(thr *t, const cst *s, int k) {
  if (k == s->nvars) {
    exec(t, s->inner);
    return;
  }
  int64_t lo, n;
  if (!loop_range(t, s, k, &lo, &n)) return;
  int slot = s->slots[k];
  val saved = t->slots[slot];
  for (int64_t i = 0; i < n && !t->err; i++) {
    t->slots[slot].i = lo + i;
    reduce_level(t, s, k + 1);
  }
  t->slots[slot] = saved;
}

static void exec_alloc(thr *t, const cst *s) {
  const rx_buffer *decl = t->rs->bufmap.data[s->buf].key;
  rbuf tmp = {.dt = decl->dtype, .ndim = s->nidx, .decl = decl, .count = 1};
  for (int d = 0; d < s->nidx; d++) {
    tmp.shape[d] = ev(t, s->idx[d]).i;
    if (t->err) return;
    if (tmp.shape[d] < 0) {
      fail(t, s->loc, "allocation `%s`: dim %d is negative (%lld)", decl->name, d,
           (long long)tmp.shape[d]);
      return;
    }
    if (__builtin_mul_overflow(tmp.count, tmp.shape[d], &tmp.count) ||
        tmp.count > ((int64_t)1 << 34) / (int64_t)elem_size(tmp.dt)) {
      fail(t, s->loc, "allocation `%s` is too large (over 16 GiB)", decl->name);
      return;
    }
  }
  size_t bytes = (size_t)tmp.count * elem_size(tmp.dt);
  rbuf **slot = s->scope == RX_SCOPE_LOCAL ? &t->locals[s->alloc_id] : &t->b->inst[s->alloc_id];
  rbuf *b = *slot;
  bool same = b && b->ndim == tmp.ndim && memcmp(b->shape, tmp.shape, sizeof tmp.shape) == 0;
  if (b && !same) {
    if (s->scope != RX_SCOPE_LOCAL) {
      rx_strbuf sb = {0};
      put_ints(&sb, tmp.shape, tmp.ndim);
      rx_strbuf_append(&sb, " here but ");
      put_ints(&sb, b->shape, b->ndim);
      fail(t, s->loc, "%s allocation `%s` has shape %s where the block first allocated it",
           rx_scope_name(s->scope), decl->name, sb.data);
      rx_strbuf_free(&sb);
      return;
    }
    free_rbuf(b);
    *slot = b = NULL;
  }
  if (!b) {
    b = rx_malloc(sizeof *b);
    *b = tmp;
    b->data = rx_calloc(bytes ? bytes : 1, 1);
    *slot = b;
  } else if (s->scope == RX_SCOPE_LOCAL) {
    memset(b->data, 0, bytes);
  }
  t->bufs[s->buf] = b;
}

/* The 16 bytes from element off of b: aligned to 16 bytes and inside the last dimension. */
static bool row16(thr *t, const rbuf *b, int64_t off, rx_loc loc, const char *what) {
  int64_t n = 128 / rx_dtype_bits(b->dt), last = b->ndim ? b->shape[b->ndim - 1] : 1;
  if (off % n == 0 && off % last + n <= last) return true;
  fail(t, loc,
       "%s `%s`: the 16 bytes from element %lld must be 16-byte aligned and inside the last "
       "dimension (of %lld elements)",
       what, b->decl->name, (long long)off, (long long)last);
  return false;
}

/* async_copy (ir.h): the source is read now (zeros where the condition is false); the bytes
 * land in the destination at an async_wait. */
static void exec_acopy(thr *t, const cst *s) {
  rbuf *d, *b;
  int64_t doff = offset_of(t, s->buf, s->idx, s->nidx, s->loc, "async_copy to", &d);
  if (doff < 0 || !row16(t, d, doff, s->loc, "async_copy to")) return;
  acopy c = {.dst = d, .off = doff, .group = t->groups};
  bool on = !s->cond || ev(t, s->cond).i;
  if (t->err) return;
  if (on) {
    const cx *e = s->value;
    int64_t off = offset_of(t, e->buf, e->idx, e->nidx, e->loc, "async_copy from", &b);
    if (off < 0 || !row16(t, b, off, s->loc, "async_copy from")) return;
    memcpy(c.bytes, (const char *)b->data + off * (rx_dtype_bits(b->dt) / 8), 16);
  }
  RX_VEC_PUSH(&t->inflight, c);
}

/* The thread's copies of the groups before `group` land (async_wait). */
static void land(thr *t, int group) {
  size_t k = 0;
  for (size_t i = 0; i < t->inflight.len; i++) {
    acopy *c = &t->inflight.data[i];
    if (c->group < group)
      memcpy((char *)c->dst->data + c->off * (rx_dtype_bits(c->dst->dt) / 8), c->bytes, 16);
    else
      t->inflight.data[k++] = *c;
  }
  t->inflight.len = k;
}

/* The first element of fragment k (C, A, B of mma; ldmatrix's: 0) of `elems` elements into
 * t->moff[k]: row idx[k] of the indexed form (ir.h), else element 0; false where it does not lie
 * inside f. */
static bool frag_rows(thr *t, const cst *s, const rbuf *f, int k, int64_t elems) {
  int64_t off = k < s->nidx ? ev(t, s->idx[k]).i * elems : 0;
  t->moff[k] = off;
  return off >= 0 && off + elems <= f->count;
}

/* ldmatrix (ir.h): the lane's row address, then the subgroup's rendezvous (run_ldsm). */
static void exec_ldsm(thr *t, const cst *s) {
  if (!t->fib || t->rs->sgsize != 32) {
    fail(t, s->loc,
         "ldmatrix needs the 32 lanes of a subgroup together (this run has subgroups of %d%s)",
         t->rs->sgsize, t->fib ? "" : " and a thread alone in its block");
    return;
  }
  rbuf *f = t->bufs[s->buf];
  if (!f || rx_dtype_bits(f->dt) != 16 || !frag_rows(t, s, f, 0, 2 * s->count)) {
    fail(t, s->loc, "ldmatrix x%d: a fragment of %d 16-bit elements expected", s->count,
         2 * s->count);
    return;
  }
  t->lm_buf = NULL;
  if (t->lin % 32 < 8 * s->count) { /* lanes 8j..8j+7 give the rows of matrix j */
    const cx *e = s->value;
    rbuf *b;
    int64_t off = offset_of(t, e->buf, e->idx, e->nidx, e->loc, "ldmatrix from", &b);
    if (off < 0 || !row16(t, b, off, s->loc, "ldmatrix from")) return;
    t->lm_buf = b;
    t->lm_off = off;
  }
  t->state = T_MMA;
  t->mma = s;
  yield_to_scheduler(t);
}

static void exec(thr *t, const cst *s) {
  run *rs = t->rs;
  if (rs->max_steps && ++rs->steps > rs->max_steps) {
    fail(t, s->loc, "step limit of %lld statements exceeded", (long long)rs->max_steps);
    return;
  }
  switch (s->kind) {
  case C_SEQ:
    for (int i = 0; i < s->n && !t->err; i++) exec(t, s->body[i]);
    return;
  case C_FOR:
  case C_LAUNCH: {
    int64_t lo, n;
    if (!loop_range(t, s, 0, &lo, &n)) return;
    int slot = s->slots[0];
    val saved = t->slots[slot];
    for (int64_t i = 0; i < n && !t->err; i++) {
      t->slots[slot].i = lo + i;
      if (s->kind == C_FOR)
        exec(t, s->inner);
      else
        run_block(t, s->blk);
    }
    t->slots[slot] = saved;
    return;
  }
  case C_TFOR: {
    int64_t lo, n;
    if (!loop_range(t, s, 0, &lo, &n)) return;
    if (n > t->b->dims[s->axis]) {
      fail(t, s->loc, "%s loop extent %lld exceeds the block size %lld along that axis",
           rx_loop_kind_name((rx_loop_kind)(RX_LOOP_THREAD_X + s->axis)), (long long)n,
           (long long)t->b->dims[s->axis]);
      return;
    }
    int64_t i = t->tid[s->axis];
    if (i < n) {
      int slot = s->slots[0];
      val saved = t->slots[slot];
      t->slots[slot].i = lo + i;
      exec(t, s->inner);
      t->slots[slot] = saved;
    }
    return;
  }
  case C_REDUCE:
    exec(t, s->init);
    if (!t->err) reduce_level(t, s, 0);
    return;
  case C_STORE: {
    rbuf *b;
    int64_t off = offset_of(t, s->buf, s->idx, s->nidx, s->loc, "store to", &b);
    if (off < 0) return;
    val v = ev(t, s->value);
    if (t->err) return;
    wr(b->dt, b->data, off, v);
    return;
  }
  case C_LET: {
    val v = ev(t, s->value);
    t->slots[s->slot] = v;
    return;
  }
  case C_ALLOC:
    exec_alloc(t, s);
    return;
  case C_IF: {
    int64_t c = ev(t, s->value).i;
    if (t->err) return;
    if (c)
      exec(t, s->inner);
    else if (s->els)
      exec(t, s->els);
    return;
  }
  case C_BARRIER:
    if (!t->fib) return; /* alone in its block */
    t->state = T_BARRIER;
    t->bar = s;
    yield_to_scheduler(t);
    return;
  case C_MMA:
    if (!t->fib || t->rs->sgsize != 32) {
      fail(t, s->loc,
           "mma m16n8k16 needs the 32 lanes of a subgroup together (this run has subgroups of "
           "%d%s)",
           t->rs->sgsize, t->fib ? "" : " and a thread alone in its block");
      return;
    }
    if (!t->bufs[s->buf] || !t->bufs[s->buf2] || !t->bufs[s->buf3] ||
        !frag_rows(t, s, t->bufs[s->buf], 0, 4) || !frag_rows(t, s, t->bufs[s->buf2], 1, 8) ||
        !frag_rows(t, s, t->bufs[s->buf3], 2, 4)) {
      fail(t, s->loc, "mma m16n8k16: fragments of 4, 8 and 4 elements expected");
      return;
    }
    t->state = T_MMA;
    t->mma = s;
    yield_to_scheduler(t);
    return;
  case C_ACOPY:
    exec_acopy(t, s);
    return;
  case C_COMMIT:
    t->groups++;
    return;
  case C_AWAIT:
    land(t, t->groups - s->count);
    return;
  case C_LDSM:
    exec_ldsm(t, s);
    return;
  case C_FRAG:
    exec_frag(t, s);
    return;
  }
}

/* A lane at `frag OP` (ir.h, RX_STMT_FRAG): evaluates its operands, then waits for its subgroup
 * (run_frag). */
static void exec_frag(thr *t, const cst *s) {
  const char *op = rx_frag_op_name(s->fop);
  if (!t->fib) {
    fail(t, s->loc, "frag %s needs the lanes of a subgroup together (a thread alone in its block)",
         op);
    return;
  }
  int need[3] = {s->buf, s->fop == RX_FRAG_OP_MMA ? s->buf2 : s->buf,
                 s->fop == RX_FRAG_OP_MMA ? s->buf3 : s->buf};
  for (int i = 0; i < 3; i++)
    if (!t->bufs[need[i]]) {
      fail(t, s->loc, "frag %s of a fragment that is not allocated here", op);
      return;
    }
  t->foff = t->fstride = 0;
  t->fval.i = 0; /* compared across lanes whole (run_frag) */
  if (s->fop == RX_FRAG_OP_FILL) {
    val v = ev(t, s->value);
    if (rx_dtype_is_int(t->bufs[s->buf]->dt))
      t->fval.i = v.i;
    else
      t->fval.f = v.f; /* the high bits stay 0 */
  }
  if (s->fop == RX_FRAG_OP_LOAD || s->fop == RX_FRAG_OP_STORE) {
    rbuf *b;
    t->foff = offset_of(t, s->buf4, s->idx, s->nidx, s->loc,
                        s->fop == RX_FRAG_OP_LOAD ? "frag load from" : "frag store to", &b);
    t->fstride = ev(t, s->value).i;
  }
  if (t->err) return;
  t->state = T_MMA;
  t->mma = s;
  yield_to_scheduler(t);
}

/* The mma of the 32 lanes th[0..31] of a subgroup (ir.h, RX_STMT_MMA): gathers A, B and C from
 * their fragments, computes C += A B (products and sums in double, rounded to f32 once) and
 * scatters C back. */
static void run_mma(thr *th, const cst *s) {
  double A[16][16], B[16][8], C[16][8];
  for (int l = 0; l < 32; l++) {
    const rbuf *a = th[l].bufs[s->buf2], *b = th[l].bufs[s->buf3], *c = th[l].bufs[s->buf];
    const int64_t *o = th[l].moff;
    int g = l / 4, q = l % 4;
    for (int i = 0; i < 8; i++)
      A[g + 8 * (i / 2 % 2)][2 * q + i % 2 + 8 * (i / 4)] = rd(a->dt, a->data, o[1] + i).f;
    for (int i = 0; i < 4; i++) {
      B[2 * q + i % 2 + 8 * (i / 2)][g] = rd(b->dt, b->data, o[2] + i).f;
      C[g + 8 * (i / 2)][2 * q + i % 2] = rd(c->dt, c->data, o[0] + i).f;
    }
  }
  for (int r = 0; r < 16; r++)
    for (int n = 0; n < 8; n++) {
      double acc = C[r][n];
      for (int k = 0; k < 16; k++) acc += A[r][k] * B[k][n];
      C[r][n] = acc;
    }
  for (int l = 0; l < 32; l++) {
    const rbuf *c = th[l].bufs[s->buf];
    int g = l / 4, q = l % 4;
    for (int i = 0; i < 4; i++)
      wr(c->dt, c->data, th[l].moff[0] + i, (val){.f = (float)C[g + 8 * (i / 2)][2 * q + i % 2]});
  }
}

/* The ldmatrix of the 32 lanes th[0..31] (ir.h, RX_STMT_LDMATRIX): lanes 8j..8j+7 gave the rows
 * of matrix j; lane l receives row l / 4 (trans: column), elements 2 (l % 4) and 2 (l % 4) + 1. */
static void run_ldsm(thr *th, const cst *s) {
  uint16_t m[4][8][8];
  for (int j = 0; j < s->count; j++)
    for (int r = 0; r < 8; r++) {
      const thr *a = &th[8 * j + r];
      memcpy(m[j][r], (const char *)a->lm_buf->data + a->lm_off * 2, 16);
    }
  for (int l = 0; l < 32; l++) {
    rbuf *f = th[l].bufs[s->buf];
    int g = l / 4, q = l % 4;
    for (int j = 0; j < s->count; j++)
      for (int h = 0; h < 2; h++) {
        uint16_t v = s->trans ? m[j][2 * q + h][g] : m[j][g][2 * q + h];
        memcpy((char *)f->data + (th[l].moff[0] + 2 * j + h) * 2, &v, 2);
      }
  }
}

/* The flat offsets in memory of the elements of a fragment (rows x cols, row-major) that is
 * loaded or stored at off with stride s (col_major: columns contiguous); checked against the
 * buffer; returns false after writing the first element out of bounds into msg. */
static bool frag_offsets(const cst *s, const rbuf *mem, int64_t off, int64_t stride, int64_t rows,
                         int64_t cols, int64_t *out, rx_strbuf *msg) {
  for (int64_t r = 0; r < rows; r++)
    for (int64_t c = 0; c < cols; c++) {
      int64_t o = off + (s->col_major ? c * stride + r : r * stride + c);
      if (o < 0 || o >= mem->count) {
        rx_strbuf_printf(msg,
                         "frag %s: element (%lld, %lld) of the fragment is element %lld of `%s`, "
                         "which has %lld (offset %lld, stride %lld%s)",
                         rx_frag_op_name(s->fop), (long long)r, (long long)c, (long long)o,
                         mem->decl->name, (long long)mem->count, (long long)off, (long long)stride,
                         s->col_major ? ", col_major" : "");
        return false;
      }
      out[r * cols + c] = o;
    }
  return true;
}

/* D = A B + C over the fragments of lane th[0] (ir.h, RX_STMT_FRAG) into res (M x N): for floats
 * d = c + a[r][0] b[0][q] + ... in k order, each product and each addition rounded to f32 (the
 * products of 16-bit inputs are exact), then to D's dtype: a chain of mma over ascending k sums
 * exactly as a serial loop does (the hardware's order is unspecified); integers exactly. */
static void frag_mma(const thr *th, const cst *s, val *res) {
  const rbuf *a = th->bufs[s->buf2], *b = th->bufs[s->buf3], *c = th->bufs[s->buf4];
  int64_t m = c->shape[0], n = c->shape[1], k = a->shape[1];
  bool ints = rx_dtype_is_int(c->dt), aints = rx_dtype_is_int(a->dt);
  for (int64_t r = 0; r < m; r++)
    for (int64_t q = 0; q < n; q++) {
      val cv = rd(c->dt, c->data, r * n + q);
      int64_t iacc = ints ? cv.i : 0;
      float facc = ints ? 0.0f : cv.f;
      for (int64_t x = 0; x < k; x++) {
        val av = rd(a->dt, a->data, r * k + x), bv = rd(b->dt, b->data, x * n + q);
        if (aints)
          iacc += av.i * bv.i;
        else /* ISO C11 (CMake: no extensions): no contraction into an fma */
          facc = facc + av.f * bv.f;
      }
      res[r * n + q] = ints ? (val){.i = iacc} : (val){.f = facc};
    }
}

/* `frag OP` of the lanes th[0..n) of a whole subgroup (ir.h, RX_STMT_FRAG): the operands must be
 * the same in every lane; each lane keeps a whole copy of the fragment, so every copy gets the
 * result. Returns an error message (heap) or NULL. */
static char *run_frag(thr *th, int n, int sgsize, const cst *s) {
  rx_strbuf msg = {0};
  const char *op = rx_frag_op_name(s->fop);
  if (n != sgsize) {
    rx_strbuf_printf(&msg, "frag %s needs whole subgroups of %d lanes; the block's last has %d", op,
                     sgsize, n);
    return msg.data;
  }
  for (int l = 1; l < n; l++)
    if (th[l].foff != th[0].foff || th[l].fstride != th[0].fstride ||
        th[l].fval.i != th[0].fval.i) {
      rx_strbuf_printf(&msg,
                       "frag %s: the operands differ across the subgroup (lane %d: offset %lld, "
                       "stride %lld; lane 0: offset %lld, stride %lld); they must be uniform",
                       op, l, (long long)th[l].foff, (long long)th[l].fstride,
                       (long long)th[0].foff, (long long)th[0].fstride);
      return msg.data;
    }
  const rbuf *f = th[0].bufs[s->buf];
  int64_t cnt = f->shape[0] * f->shape[1];
  val *res = rx_calloc((size_t)cnt, sizeof *res);
  int64_t *offs = rx_calloc((size_t)cnt, sizeof *offs);
  rbuf *mem = s->fop == RX_FRAG_OP_LOAD || s->fop == RX_FRAG_OP_STORE ? th[0].bufs[s->buf4] : NULL;
  bool ok =
      !mem || frag_offsets(s, mem, th[0].foff, th[0].fstride, f->shape[0], f->shape[1], offs, &msg);
  for (int64_t e = 0; ok && e < cnt; e++) {
    if (s->fop == RX_FRAG_OP_FILL) res[e] = th[0].fval;
    if (s->fop == RX_FRAG_OP_LOAD) res[e] = rd(mem->dt, mem->data, offs[e]);
    if (s->fop == RX_FRAG_OP_STORE) wr(mem->dt, mem->data, offs[e], rd(f->dt, f->data, e));
  }
  if (ok && s->fop == RX_FRAG_OP_MMA) frag_mma(&th[0], s, res);
  for (int l = 0; ok && s->fop != RX_FRAG_OP_STORE && l < n; l++)
    for (int64_t e = 0; e < cnt; e++) wr(f->dt, th[l].bufs[s->buf]->data, e, res[e]);
  free(res);
  free(offs);
  return ok ? NULL : msg.data;
}

/* ------------------------------------------------------------------------------------------
 * blocks and the fiber scheduler
 * ------------------------------------------------------------------------------------------ */
static void yield_to_scheduler(thr *t) { rx_fiber_yield(t->fib); }

static void thread_main(void *arg) {
  thr *t = arg;
  exec(t, t->b->info->body);
  t->state = T_DONE;
}

static void put_thread_state(rx_strbuf *sb, const thr *t) {
  switch (t->state) {
  case T_DONE:
    rx_strbuf_append(sb, "has finished");
    break;
  case T_BARRIER:
    rx_strbuf_append(sb, "waits at the barrier");
    put_loc(sb, t->bar->loc);
    break;
  case T_SUBGROUP:
    rx_strbuf_printf(sb, "waits at %s", rx_intrinsic_name((rx_intrinsic)t->sg->sub));
    put_loc(sb, t->sg->loc);
    break;
  case T_MMA:
    rx_strbuf_append(sb, t->mma->kind == C_FRAG ? "waits at frag " : "waits at mma");
    if (t->mma->kind == C_FRAG) rx_strbuf_append(sb, rx_frag_op_name(t->mma->fop));
    put_loc(sb, t->mma->loc);
    break;
  default:
    rx_strbuf_append(sb, "is running");
    break;
  }
}

static rx_status divergence(run *rs, blk *b, const char *what, const thr *x, const thr *y) {
  rx_strbuf sb = {0};
  rx_strbuf_printf(&sb, "%s divergence: thread (%lld, %lld, %lld) ", what, (long long)x->tid[0],
                   (long long)x->tid[1], (long long)x->tid[2]);
  put_thread_state(&sb, x);
  rx_strbuf_printf(&sb, " but thread (%lld, %lld, %lld) ", (long long)y->tid[0],
                   (long long)y->tid[1], (long long)y->tid[2]);
  put_thread_state(&sb, y);
  rx_loc none = {0};
  rx_status s = make_err(rs, b, NULL, none, sb.data);
  rx_strbuf_free(&sb);
  return s;
}

/* Runs the threads of b as fibers until all finish; returns the first error. */
static rx_status schedule(run *rs, blk *b) {
  if (rs->nfibers < b->n) {
    rs->fibers = rx_realloc(rs->fibers, sizeof *rs->fibers * (size_t)b->n);
    for (; rs->nfibers < b->n; rs->nfibers++) {
      rs->fibers[rs->nfibers] = rx_fiber_new(rs->stack_size);
      if (!rs->fibers[rs->nfibers])
        return rx_status_make(RX_ERR_OUT_OF_MEMORY,
                              "tensor_fn `%s`: cannot map a stack for thread %d of the block",
                              rs->fname, rs->nfibers);
    }
  }
  for (int i = 0; i < b->n; i++) {
    thr *t = &b->th[i];
    t->fib = rs->fibers[i];
    t->state = T_RUN;
    rx_fiber_start(t->fib, thread_main, t);
  }
  int sg = rs->sgsize;
  for (;;) {
    for (int i = 0; i < b->n; i++) {
      thr *t = &b->th[i];
      if (t->state != T_RUN) continue;
      rx_fiber_resume(t->fib);
      if (t->err) {
        rx_status s = t->err;
        t->err = NULL;
        return s;
      }
    }
    /* nobody can run: release subgroups whose lanes all wait at one subgroup operation */
    bool released = false, all_done = true;
    for (int g = 0; g * sg < b->n; g++) {
      int lo = g * sg, hi = lo + sg < b->n ? lo + sg : b->n;
      const thr *w = NULL;
      for (int i = lo; i < hi && !w; i++)
        if (b->th[i].state == T_SUBGROUP || b->th[i].state == T_MMA) w = &b->th[i];
      if (!w) continue;
      for (int i = lo; i < hi; i++) {
        const thr *u = &b->th[i];
        if (u->state != w->state || (w->state == T_SUBGROUP ? u->sg != w->sg : u->mma != w->mma))
          return divergence(rs, b, "subgroup", w, u);
      }
      if (w->state == T_MMA && w->mma->kind == C_FRAG) {
        char *msg = run_frag(&b->th[lo], hi - lo, sg, w->mma);
        if (msg) {
          rx_status st = make_err(rs, b, NULL, w->mma->loc, msg);
          free(msg);
          return st;
        }
        for (int i = lo; i < hi; i++) b->th[i].state = T_RUN;
        released = true;
        continue;
      }
      if (w->state == T_MMA) {
        if (hi - lo != 32) {
          rx_loc none = {0};
          return make_err(rs, b, NULL, none,
                          "mma and ldmatrix need 32 lanes; the block's last subgroup has fewer");
        }
        if (w->mma->kind == C_LDSM)
          run_ldsm(&b->th[lo], w->mma);
        else
          run_mma(&b->th[lo], w->mma);
        for (int i = lo; i < hi; i++) b->th[i].state = T_RUN;
        released = true;
        continue;
      }
      const cx *op = w->sg;
      val acc = b->th[lo].sgv;
      for (int i = lo + 1; i < hi; i++)
        acc = sg_combine((rx_intrinsic)op->sub, (rx_dtype)op->dt, acc, b->th[i].sgv);
      for (int i = lo; i < hi; i++) {
        b->th[i].sgr = acc;
        b->th[i].state = T_RUN;
      }
      released = true;
    }
    if (released) continue;
    /* then barriers: every thread at the same one */
    const thr *w = NULL;
    for (int i = 0; i < b->n; i++) {
      if (b->th[i].state != T_DONE) all_done = false;
      if (b->th[i].state == T_BARRIER && !w) w = &b->th[i];
    }
    if (all_done) return NULL;
    RX_ASSERT(w);
    for (int i = 0; i < b->n; i++) {
      const thr *u = &b->th[i];
      if (u->state != T_BARRIER || u->bar != w->bar) return divergence(rs, b, "barrier", w, u);
    }
    for (int i = 0; i < b->n; i++) b->th[i].state = T_RUN;
  }
}

static void free_block(blk *b, int nallocs) {
  for (int i = 0; i < b->n; i++) {
    for (int a = 0; a < nallocs; a++) free_rbuf(b->th[i].locals[a]);
    free(b->th[i].inflight.data); /* copies never waited for: nobody reads them */
  }
  for (int a = 0; a < nallocs; a++) free_rbuf(b->inst[a]);
  if (b->n > 0) {
    free(b->th[0].slots);
    free(b->th[0].bufs);
    free(b->th[0].locals);
  }
  free(b->th);
  free(b->inst);
}

static void run_block(thr *p, const blkinfo *bi) {
  run *rs = p->rs;
  blk b = {.info = bi, .parent = p, .dims = {1, 1, 1}};
  for (int j = 0; j < bi->nt; j++) {
    int64_t e = ev(p, bi->exts[j]).i;
    if (p->err) return;
    if (e > b.dims[bi->axes[j]]) b.dims[bi->axes[j]] = e;
  }
  int64_t total = 1;
  for (int k = 0; k < 3; k++) {
    if (b.dims[k] > rs->max_threads || (total *= b.dims[k]) > rs->max_threads) {
      fail(p, bi->body->loc,
           "block of %lld x %lld x %lld threads exceeds the limit of %d threads per block",
           (long long)b.dims[0], (long long)b.dims[1], (long long)b.dims[2], rs->max_threads);
      return;
    }
  }
  b.n = (int)total;
  b.th = rx_calloc((size_t)b.n, sizeof *b.th);
  b.inst = rx_calloc((size_t)rs->nallocs + 1, sizeof *b.inst);
  val *slots = rx_malloc(sizeof *slots * (size_t)b.n * ((size_t)rs->nslots + 1));
  rbuf **bufs = rx_malloc(sizeof *bufs * (size_t)b.n * ((size_t)rs->nbufs + 1));
  rbuf **locals = rx_calloc((size_t)b.n * ((size_t)rs->nallocs + 1), sizeof *locals);
  for (int i = 0; i < b.n; i++) {
    thr *t = &b.th[i];
    t->rs = rs;
    t->b = &b;
    t->slots = slots + (size_t)i * ((size_t)rs->nslots + 1);
    t->bufs = bufs + (size_t)i * ((size_t)rs->nbufs + 1);
    t->locals = locals + (size_t)i * ((size_t)rs->nallocs + 1);
    memcpy(t->slots, p->slots, sizeof *slots * (size_t)rs->nslots);
    memcpy(t->bufs, p->bufs, sizeof *bufs * (size_t)rs->nbufs);
    t->lin = i;
    t->tid[0] = i % b.dims[0];
    t->tid[1] = i / b.dims[0] % b.dims[1];
    t->tid[2] = i / (b.dims[0] * b.dims[1]);
  }
  if (!bi->sync || b.n == 1) {
    for (int i = 0; i < b.n && !p->err; i++) {
      exec(&b.th[i], bi->body);
      p->err = b.th[i].err;
    }
  } else {
    p->err = schedule(rs, &b);
  }
  free_block(&b, rs->nallocs);
}

/* ------------------------------------------------------------------------------------------
 * compilation
 * ------------------------------------------------------------------------------------------ */
static void *calloc_arena(run *rs, size_t n, size_t size) {
  size_t bytes = n * size;
  return rx_arena_alloc(&rs->arena, bytes ? bytes : 1);
}

static int slot_of(run *rs, const void *key) {
  int s = find_key(rs->slotmap.data, rs->slotmap.len, key);
  if (s >= 0) return s;
  keyid k = {key, rs->nslots++};
  RX_VEC_PUSH(&rs->slotmap, k);
  return k.id;
}

static int buf_of(run *rs, const rx_buffer *b) {
  int s = find_key(rs->bufmap.data, rs->bufmap.len, b);
  if (s >= 0) return s;
  keyid k = {b, rs->nbufs++};
  RX_VEC_PUSH(&rs->bufmap, k);
  return k.id;
}

static long scope_index(run *rs, const void *key) {
  for (size_t i = rs->scope.len; i-- > 0;)
    if (rs->scope.data[i] == key) return (long)i;
  return -1;
}

static cx *cx_new(run *rs, xop op, rx_dtype dt, rx_loc loc) {
  cx *e = calloc_arena(rs, 1, sizeof *e);
  e->op = (uint8_t)op;
  e->dt = (uint8_t)dt;
  e->loc = loc;
  return e;
}

static cx *coerce(run *rs, cx *x, rx_dtype to) {
  if (!x || x->dt == to) return x;
  if (x->op == X_CONST) {
    cx *c = cx_new(rs, X_CONST, to, x->loc);
    c->k = convert((rx_dtype)x->dt, to, x->k);
    return c;
  }
  cx *c = cx_new(rs, X_CVT, to, x->loc);
  c->from = x->dt;
  c->a = x;
  return c;
}

static bool known_dtype(rx_dtype t) { return t > RX_DTYPE_UNKNOWN && t < RX_DTYPE_COUNT; }

static cx *compile_sym(run *rs, const rx_expr *x, rx_loc loc) {
  if (rs->cerr) return NULL;
  cx *e;
  switch (x->kind) {
  case RX_EXPR_CONST:
    e = cx_new(rs, X_CONST, RX_DTYPE_I64, loc);
    e->k.i = x->value;
    return e;
  case RX_EXPR_VAR:
    if (scope_index(rs, x) < 0) {
      cfail(rs, loc, "variable `%s` is not defined here (no parameter, loop or scalar defines it)",
            x->name);
      return NULL;
    }
    e = cx_new(rs, X_SLOT, RX_DTYPE_I64, loc);
    e->slot = slot_of(rs, x);
    return e;
  case RX_EXPR_ADD:
  case RX_EXPR_SUB:
  case RX_EXPR_MUL:
  case RX_EXPR_FLOORDIV:
  case RX_EXPR_FLOORMOD:
  case RX_EXPR_MIN:
  case RX_EXPR_MAX:
    e = cx_new(rs, X_SBIN, RX_DTYPE_I64, loc);
    e->sub = (uint8_t)x->kind;
    e->sx = x;
    break;
  case RX_EXPR_EQ:
  case RX_EXPR_NE:
  case RX_EXPR_LT:
  case RX_EXPR_LE:
  case RX_EXPR_GT:
  case RX_EXPR_GE: {
    static const rx_binop map[] = {RX_BINOP_EQ, RX_BINOP_NE, RX_BINOP_LT,
                                   RX_BINOP_LE, RX_BINOP_GT, RX_BINOP_GE};
    e = cx_new(rs, X_ICMP, RX_DTYPE_BOOL, loc);
    e->sub = (uint8_t)map[x->kind - RX_EXPR_EQ];
    break;
  }
  case RX_EXPR_AND:
    e = cx_new(rs, X_AND, RX_DTYPE_BOOL, loc);
    break;
  case RX_EXPR_OR:
    e = cx_new(rs, X_OR, RX_DTYPE_BOOL, loc);
    break;
  case RX_EXPR_NOT:
    e = cx_new(rs, X_NOT, RX_DTYPE_BOOL, loc);
    break;
  case RX_EXPR_SELECT:
    e = cx_new(rs, X_SELECT, RX_DTYPE_I64, loc);
    break;
  default:
    cfail(rs, loc, "unknown symbolic expression kind %d", (int)x->kind);
    return NULL;
  }
  if (x->a) e->a = compile_sym(rs, x->a, loc);
  if (x->b) e->b = compile_sym(rs, x->b, loc);
  if (x->c) e->c = compile_sym(rs, x->c, loc);
  return rs->cerr ? NULL : e;
}

/* The dtype both operands of a binary operator are converted to. */
static rx_dtype operand_dtype(const rx_tx *a, const rx_tx *b) {
  if (a->weak && !b->weak) return b->dtype;
  if (b->weak && !a->weak) return a->dtype;
  if (isf(a->dtype) != isf(b->dtype)) return isf(a->dtype) ? a->dtype : b->dtype;
  if (rx_dtype_bits(b->dtype) > rx_dtype_bits(a->dtype)) return b->dtype;
  return a->dtype;
}

static bool tx_has_subgroup(const rx_tx *e);

/* A float literal. A weak one stays f64 (its user converts it to the operand dtype: an f64
 * operand gets every digit). */
static cx *compile_float(run *rs, const rx_tx *e) {
  val v = {.d = e->fval};
  rx_dtype dt = e->weak ? RX_DTYPE_F64 : e->dtype;
  cx *r = cx_new(rs, X_CONST, dt, e->loc);
  r->k = convert(RX_DTYPE_F64, dt, v);
  return r;
}

static cx *compile_tx(run *rs, const rx_tx *e) {
  if (rs->cerr) return NULL;
  if (!e) {
    cfail(rs, (rx_loc){0}, "missing expression");
    return NULL;
  }
  rx_dtype dt = e->dtype;
  if (!known_dtype(dt)) {
    cfail(rs, e->loc, "expression of unknown dtype");
    return NULL;
  }
  cx *r;
  switch (e->kind) {
  case RX_TX_INT: {
    val v = {.i = e->ival};
    r = cx_new(rs, X_CONST, dt, e->loc);
    r->k = convert(RX_DTYPE_I64, dt, v);
    return r;
  }
  case RX_TX_FLOAT:
    return compile_float(rs, e);
  case RX_TX_SYM:
    r = compile_sym(rs, e->sym, e->loc);
    if (r) r->dt = (uint8_t)(dt == RX_DTYPE_BOOL ? RX_DTYPE_BOOL : RX_DTYPE_I64);
    return coerce(rs, r, dt);
  case RX_TX_LOCAL:
    if (scope_index(rs, e->local) < 0) {
      cfail(rs, e->loc, "local `%s` is not defined here", e->local->name);
      return NULL;
    }
    r = cx_new(rs, X_SLOT, e->local->dtype, e->loc);
    r->slot = slot_of(rs, e->local);
    return coerce(rs, r, dt);
  case RX_TX_LOAD: {
    if (scope_index(rs, e->buf) < 0) {
      cfail(rs, e->loc, "buffer `%s` is not a parameter or an allocation visible here",
            e->buf->name);
      return NULL;
    }
    if (e->nidx != e->buf->ndim || e->nidx > RX_MAX_NDIM) {
      cfail(rs, e->loc, "load from `%s` with %d indices, but it has %d dimensions", e->buf->name,
            e->nidx, e->buf->ndim);
      return NULL;
    }
    r = cx_new(rs, X_LOAD, e->buf->dtype, e->loc);
    r->buf = buf_of(rs, e->buf);
    r->nidx = e->nidx;
    r->idx = calloc_arena(rs, (size_t)e->nidx, sizeof *r->idx);
    for (int i = 0; i < e->nidx; i++)
      r->idx[i] = coerce(rs, compile_tx(rs, e->idx[i]), RX_DTYPE_I64);
    return rs->cerr ? NULL : coerce(rs, r, dt);
  }
  case RX_TX_BINARY: {
    if (!e->a || !e->b) break;
    rx_binop op = e->binop;
    cx *a = compile_tx(rs, e->a), *b = compile_tx(rs, e->b);
    if (rs->cerr) return NULL;
    if (op == RX_BINOP_AND || op == RX_BINOP_OR) {
      r = cx_new(rs, op == RX_BINOP_AND ? X_AND : X_OR, RX_DTYPE_BOOL, e->loc);
      r->a = coerce(rs, a, RX_DTYPE_BOOL);
      r->b = coerce(rs, b, RX_DTYPE_BOOL);
      return coerce(rs, r, dt);
    }
    if (op >= RX_BINOP_EQ && op <= RX_BINOP_GE) {
      rx_dtype ot = operand_dtype(e->a, e->b);
      r = cx_new(rs, isf(ot) ? X_FCMP : X_ICMP, RX_DTYPE_BOOL, e->loc);
      r->sub = (uint8_t)op;
      r->from = (uint8_t)ot;
      r->a = coerce(rs, a, ot);
      r->b = coerce(rs, b, ot);
      return coerce(rs, r, dt);
    }
    rx_dtype ot = dt == RX_DTYPE_BOOL ? operand_dtype(e->a, e->b) : dt;
    r = cx_new(rs, isf(ot) ? X_FBIN : X_IBIN, ot, e->loc);
    r->sub = (uint8_t)op;
    r->a = coerce(rs, a, ot);
    r->b = coerce(rs, b, ot);
    return coerce(rs, r, dt);
  }
  case RX_TX_NEG:
    if (!e->a) break;
    r = cx_new(rs, isf(dt) ? X_FNEG : X_INEG, dt, e->loc);
    r->a = coerce(rs, compile_tx(rs, e->a), dt);
    return rs->cerr ? NULL : r;
  case RX_TX_NOT:
    if (!e->a) break;
    r = cx_new(rs, X_NOT, RX_DTYPE_BOOL, e->loc);
    r->a = coerce(rs, compile_tx(rs, e->a), RX_DTYPE_BOOL);
    return rs->cerr ? NULL : coerce(rs, r, dt);
  case RX_TX_SELECT:
    if (!e->a || !e->b || !e->c) break;
    r = cx_new(rs, X_SELECT, dt, e->loc);
    r->a = coerce(rs, compile_tx(rs, e->a), RX_DTYPE_BOOL);
    r->b = coerce(rs, compile_tx(rs, e->b), dt);
    r->c = coerce(rs, compile_tx(rs, e->c), dt);
    return rs->cerr ? NULL : r;
  case RX_TX_CAST:
    if (!e->a) break;
    return coerce(rs, compile_tx(rs, e->a), dt);
  case RX_TX_CALL: {
    rx_intrinsic f = e->intrin;
    if ((unsigned)f >= RX_INTRIN_COUNT) break;
    int arity = rx_intrinsic_arity(f);
    const rx_tx *args[3] = {e->a, e->b, e->c};
    for (int i = 0; i < arity; i++)
      if (!args[i]) {
        cfail(rs, e->loc, "%s expects %d arguments", rx_intrinsic_name(f), arity);
        return NULL;
      }
    char kind = rx_intrinsic_kind(f);
    if (kind == 'c') {
      r = cx_new(rs, X_CHECK, dt, e->loc);
      r->a = coerce(rs, compile_tx(rs, e->a), RX_DTYPE_BOOL);
      r->b = coerce(rs, compile_tx(rs, e->b), dt);
      r->msg = e->msg ? e->msg : "check failed (value %v)";
      return rs->cerr ? NULL : r;
    }
    if (kind == 's') {
      if (tx_has_subgroup(e->a)) {
        cfail(rs, e->loc, "nested subgroup operations are not supported");
        return NULL;
      }
      if (!rs->cur_blk) {
        cfail(rs, e->loc, "%s outside a block (the innermost blockIdx loop's body)",
              rx_intrinsic_name(f));
        return NULL;
      }
      r = cx_new(rs, X_SUBGROUP, dt, e->loc);
    } else if (isf(dt)) {
      r = cx_new(rs, X_FCALL, dt, e->loc);
    } else if (kind == 'n') {
      r = cx_new(rs, X_ICALL, dt, e->loc);
    } else {
      cfail(rs, e->loc, "%s of %s: a float intrinsic needs a float operand", rx_intrinsic_name(f),
            rx_dtype_name(dt));
      return NULL;
    }
    r->sub = (uint8_t)f;
    if (arity > 0) r->a = coerce(rs, compile_tx(rs, e->a), dt);
    if (arity > 1) r->b = coerce(rs, compile_tx(rs, e->b), dt);
    if (arity > 2) r->c = coerce(rs, compile_tx(rs, e->c), dt);
    return rs->cerr ? NULL : r;
  }
  case RX_TX_HAS_FRAG:
    cfail(rs, e->loc, "has_fragments(...) outside the condition of an 'if'");
    return NULL;
  }
  cfail(rs, e->loc, "malformed expression (kind %d)", (int)e->kind);
  return NULL;
}

/* ---- structure scans ---- */
static bool tx_has_subgroup(const rx_tx *e) {
  if (!e) return false;
  if (e->kind == RX_TX_CALL && (unsigned)e->intrin < RX_INTRIN_COUNT &&
      rx_intrinsic_kind(e->intrin) == 's')
    return true;
  if (e->kind == RX_TX_LOAD)
    for (int i = 0; i < e->nidx; i++)
      if (tx_has_subgroup(e->idx[i])) return true;
  return tx_has_subgroup(e->a) || tx_has_subgroup(e->b) || tx_has_subgroup(e->c);
}

enum { HAS_BLOCK = 1, HAS_THREAD = 2, HAS_SYNC = 4 };

static int scan(const rx_stmt *s) {
  if (!s) return 0;
  int r = 0;
  switch (s->kind) {
  case RX_STMT_SEQ:
    for (int i = 0; i < s->n; i++) r |= scan(s->body[i]);
    return r;
  case RX_STMT_FOR:
    if (s->loop_kind >= RX_LOOP_BLOCK_X && s->loop_kind <= RX_LOOP_BLOCK_Z) r |= HAS_BLOCK;
    if (s->loop_kind >= RX_LOOP_THREAD_X && s->loop_kind <= RX_LOOP_THREAD_Z) r |= HAS_THREAD;
    return r | scan(s->inner);
  case RX_STMT_REDUCE:
    return scan(s->init) | scan(s->inner);
  case RX_STMT_IF:
    return (tx_has_subgroup(s->value) ? HAS_SYNC : 0) | scan(s->inner) | scan(s->otherwise);
  case RX_STMT_BARRIER:
  case RX_STMT_MMA:
  case RX_STMT_LDMATRIX:
  case RX_STMT_FRAG:
    return HAS_SYNC;
  case RX_STMT_STORE:
    for (int i = 0; i < s->nidx; i++)
      if (tx_has_subgroup(s->idx[i])) r |= HAS_SYNC;
    return r | (tx_has_subgroup(s->value) ? HAS_SYNC : 0);
  case RX_STMT_LET:
    return tx_has_subgroup(s->value) ? HAS_SYNC : 0;
  default:
    return 0;
  }
}

static cst *cst_new(run *rs, cst_kind k, const rx_stmt *src) {
  cst *c = calloc_arena(rs, 1, sizeof *c);
  c->kind = k;
  c->src = src;
  c->loc = src->loc;
  return c;
}

static cst *compile_stmt(run *rs, const rx_stmt *s);

/* Compiles a nested statement: what it defines is not visible after it. */
static cst *compile_scoped(run *rs, const rx_stmt *s) {
  size_t mark = rs->scope.len;
  cst *c = compile_stmt(rs, s);
  rs->scope.len = mark;
  return c;
}

static blkinfo *new_blk(run *rs, int flags) {
  blkinfo *bi = calloc_arena(rs, 1, sizeof *bi);
  bi->sync = (flags & HAS_SYNC) != 0;
  bi->nbv = (int)rs->bv_slots.len;
  bi->bv_slots = calloc_arena(rs, rs->bv_slots.len, sizeof(int));
  bi->bv_names = calloc_arena(rs, rs->bv_slots.len, sizeof(const char *));
  for (size_t i = 0; i < rs->bv_slots.len; i++) {
    bi->bv_slots[i] = rs->bv_slots.data[i];
    bi->bv_names[i] = rs->bv_names.data[i];
  }
  return bi;
}

/* Compiles body as the body of a block (launched at the current scope). */
static cst *compile_block_body(run *rs, blkinfo *bi, const rx_stmt *body) {
  blkinfo *saved = rs->cur_blk;
  size_t saved_mark = rs->launch_mark;
  rs->cur_blk = bi;
  rs->launch_mark = rs->scope.len;
  bi->body = compile_scoped(rs, body);
  rs->cur_blk = saved;
  rs->launch_mark = saved_mark;
  return bi->body;
}

static bool compile_range(run *rs, cst *c, int k, const rx_stmt *s) {
  if (!s->vars || !s->lo || !s->extent || !s->vars[k] || !s->lo[k] || !s->extent[k] ||
      s->vars[k]->kind != RX_EXPR_VAR) {
    cfail(rs, s->loc, "malformed loop");
    return false;
  }
  c->lo[k] = compile_sym(rs, s->lo[k], s->loc);
  c->ext[k] = compile_sym(rs, s->extent[k], s->loc);
  c->slots[k] = slot_of(rs, s->vars[k]);
  return !rs->cerr;
}

static void add_thread_loop(run *rs, int axis, const rx_stmt *s, cx *ext) {
  blkinfo *bi = rs->cur_blk;
  /* the extent gives the block size: it may use only what is known at launch */
  rx_ptrvec vars = {0};
  collect_vars(s->extent[0], &vars);
  for (size_t i = 0; i < vars.len; i++) {
    const rx_expr *v = vars.data[i];
    long at = scope_index(rs, v);
    if (at >= (long)rs->launch_mark) {
      cfail(rs, s->loc,
            "the extent of a %s loop uses `%s`, which is not known when the block is launched "
            "(only symbolic and blockIdx variables are)",
            rx_loop_kind_name(s->loop_kind), v->name);
      break;
    }
  }
  rx_ptrvec_free(&vars);
  int *axes = calloc_arena(rs, (size_t)bi->nt + 1, sizeof *axes);
  cx **exts = calloc_arena(rs, (size_t)bi->nt + 1, sizeof *exts);
  if (bi->nt) {
    memcpy(axes, bi->axes, sizeof *axes * (size_t)bi->nt);
    memcpy(exts, bi->exts, sizeof *exts * (size_t)bi->nt);
  }
  axes[bi->nt] = axis;
  exts[bi->nt] = ext;
  bi->axes = axes;
  bi->exts = exts;
  bi->nt++;
}

/* A loop: a blockIdx loop (the outermost one of a block body becomes a launch), a threadIdx
 * loop (inside a block body, one per axis), or a serial loop. */
static cst *compile_for(run *rs, const rx_stmt *s) {
  cst *c;
  rx_loop_kind lk = s->loop_kind;
  bool is_block = lk >= RX_LOOP_BLOCK_X && lk <= RX_LOOP_BLOCK_Z;
  bool is_thread = lk >= RX_LOOP_THREAD_X && lk <= RX_LOOP_THREAD_Z;
  if (s->nvars != 1) {
    cfail(rs, s->loc, "malformed loop (%d variables)", s->nvars);
    return NULL;
  }
  c = cst_new(rs, C_FOR, s);
  c->nvars = 1;
  c->slots = calloc_arena(rs, 1, sizeof *c->slots);
  c->lo = calloc_arena(rs, 1, sizeof *c->lo);
  c->ext = calloc_arena(rs, 1, sizeof *c->ext);
  if (!compile_range(rs, c, 0, s)) return NULL;
  size_t mark = rs->scope.len;
  if (is_block) {
    if (rs->cur_blk) {
      cfail(rs, s->loc,
            "a %s loop inside a block body (inside another blockIdx loop's "
            "threads or in a program whose threads start outside blockIdx loops)",
            rx_loop_kind_name(lk));
      return NULL;
    }
    rx_ptrvec_push(&rs->scope, (void *)s->vars[0]);
    RX_VEC_PUSH(&rs->bv_slots, c->slots[0]);
    RX_VEC_PUSH(&rs->bv_names, s->vars[0]->name);
    int inner = scan(s->inner);
    if (!(inner & HAS_BLOCK)) {
      c->kind = C_LAUNCH;
      c->blk = new_blk(rs, inner);
      c->inner = compile_block_body(rs, c->blk, s->inner);
    } else {
      c->inner = compile_scoped(rs, s->inner);
    }
    rs->bv_slots.len--;
    rs->bv_names.len--;
  } else if (is_thread) {
    int axis = (int)(lk - RX_LOOP_THREAD_X);
    if (!rs->cur_blk) {
      cfail(rs, s->loc, "%s loop outside the blockIdx loops", rx_loop_kind_name(lk));
      return NULL;
    }
    if (rs->axis_active[axis]) {
      cfail(rs, s->loc, "%s loop nested inside another %s loop", rx_loop_kind_name(lk),
            rx_loop_kind_name(lk));
      return NULL;
    }
    c->kind = C_TFOR;
    c->axis = axis;
    add_thread_loop(rs, axis, s, c->ext[0]);
    rx_ptrvec_push(&rs->scope, (void *)s->vars[0]);
    rs->axis_active[axis] = true;
    c->inner = compile_scoped(rs, s->inner);
    rs->axis_active[axis] = false;
  } else {
    rx_ptrvec_push(&rs->scope, (void *)s->vars[0]);
    c->inner = compile_scoped(rs, s->inner);
  }
  rs->scope.len = mark;
  return rs->cerr ? NULL : c;
}

/* A store to a parameter or a visible allocation, with one index per dimension. */
static cst *compile_store(run *rs, const rx_stmt *s) {
  cst *c;
  rx_buffer *b = s->buf;
  if (!b || scope_index(rs, b) < 0) {
    cfail(rs, s->loc, "store to `%s`, which is not a parameter or an allocation visible here",
          b ? b->name : "?");
    return NULL;
  }
  if (s->nidx != b->ndim || s->nidx > RX_MAX_NDIM) {
    cfail(rs, s->loc, "store to `%s` with %d indices, but it has %d dimensions", b->name, s->nidx,
          b->ndim);
    return NULL;
  }
  c = cst_new(rs, C_STORE, s);
  c->buf = buf_of(rs, b);
  c->nidx = s->nidx;
  c->idx = calloc_arena(rs, (size_t)s->nidx, sizeof *c->idx);
  for (int i = 0; i < s->nidx; i++) c->idx[i] = coerce(rs, compile_tx(rs, s->idx[i]), RX_DTYPE_I64);
  c->value = coerce(rs, compile_tx(rs, s->value), b->dtype);
  return rs->cerr ? NULL : c;
}

/* The fragments' rows of mma or ldmatrix in the indexed form (ir.h) into c->idx. */
static void compile_frag_rows(run *rs, cst *c, const rx_stmt *s) {
  c->nidx = s->nidx;
  c->idx = calloc_arena(rs, (size_t)s->nidx + 1, sizeof *c->idx);
  for (int i = 0; i < s->nidx; i++) c->idx[i] = coerce(rs, compile_tx(rs, s->idx[i]), RX_DTYPE_I64);
}

/* async_copy (a store whose value is the source load) and ldmatrix (ir.h). */
static cst *compile_matrix_load(run *rs, const rx_stmt *s) {
  bool copy = s->kind == RX_STMT_ASYNC_COPY;
  const char *what = copy ? "async_copy" : "ldmatrix";
  if (!copy && !rs->cur_blk) {
    cfail(rs, s->loc, "ldmatrix outside a block (the innermost blockIdx loop's body)");
    return NULL;
  }
  if (!s->buf || scope_index(rs, s->buf) < 0 || !s->value || s->value->kind != RX_TX_LOAD ||
      (!copy && s->count != 1 && s->count != 2 && s->count != 4)) {
    cfail(rs, s->loc, "malformed %s", what);
    return NULL;
  }
  cst *c;
  if (copy) {
    if (!(c = compile_store(rs, s))) return NULL;
    c->kind = C_ACOPY;
    if (s->cond) c->cond = coerce(rs, compile_tx(rs, s->cond), RX_DTYPE_BOOL);
  } else {
    c = cst_new(rs, C_LDSM, s);
    c->buf = buf_of(rs, s->buf);
    compile_frag_rows(rs, c, s);
    c->value = compile_tx(rs, s->value);
    c->count = s->count;
    c->trans = s->trans;
  }
  if (!rs->cerr && (!c->value || c->value->op != X_LOAD)) cfail(rs, s->loc, "malformed %s", what);
  return rs->cerr ? NULL : c;
}

/* `frag OP` (ir.h, RX_STMT_FRAG); the verifier checked the operands' uses, shapes and dtypes */
static cst *compile_frag(run *rs, const rx_stmt *s) {
  if (!rs->cur_blk) {
    cfail(rs, s->loc, "frag %s outside a block (the innermost blockIdx loop's body)",
          rx_frag_op_name(s->frag_op));
    return NULL;
  }
  bool mma = s->frag_op == RX_FRAG_OP_MMA, mem = !mma && s->frag_op != RX_FRAG_OP_FILL;
  if (!s->buf || !s->buf->frag || (mma && (!s->mma_a || !s->mma_b || !s->mma_c)) ||
      (mem && (!s->mem || s->nidx != s->mem->ndim || s->nidx > RX_MAX_NDIM)) ||
      (!mma && !s->value)) {
    cfail(rs, s->loc, "malformed frag %s", rx_frag_op_name(s->frag_op));
    return NULL;
  }
  cst *c = cst_new(rs, C_FRAG, s);
  c->fop = s->frag_op;
  c->buf = buf_of(rs, s->buf);
  c->col_major = s->col_major;
  if (mma) {
    c->buf2 = buf_of(rs, s->mma_a);
    c->buf3 = buf_of(rs, s->mma_b);
    c->buf4 = buf_of(rs, s->mma_c);
  } else if (mem) {
    c->buf4 = buf_of(rs, s->mem);
    c->nidx = s->nidx;
    c->idx = calloc_arena(rs, (size_t)s->nidx, sizeof *c->idx);
    for (int i = 0; i < s->nidx; i++)
      c->idx[i] = coerce(rs, compile_tx(rs, s->idx[i]), RX_DTYPE_I64);
    c->value = coerce(rs, compile_tx(rs, s->value), RX_DTYPE_I64);
  } else {
    c->value = coerce(rs, compile_tx(rs, s->value), s->buf->dtype);
  }
  return rs->cerr ? NULL : c;
}

static cst *compile_stmt(run *rs, const rx_stmt *s) {
  if (rs->cerr) return NULL;
  if (!s) {
    cfail(rs, (rx_loc){0}, "missing statement");
    return NULL;
  }
  cst *c;
  switch (s->kind) {
  case RX_STMT_SEQ: {
    c = cst_new(rs, C_SEQ, s);
    c->n = s->n;
    c->body = calloc_arena(rs, (size_t)s->n, sizeof *c->body);
    size_t mark = rs->scope.len;
    for (int i = 0; i < s->n && !rs->cerr; i++) c->body[i] = compile_stmt(rs, s->body[i]);
    rs->scope.len = mark;
    return c;
  }
  case RX_STMT_FOR:
    return compile_for(rs, s);
  case RX_STMT_REDUCE: {
    if (s->nvars < 0) {
      cfail(rs, s->loc, "malformed reduce");
      return NULL;
    }
    c = cst_new(rs, C_REDUCE, s);
    c->nvars = s->nvars;
    c->slots = calloc_arena(rs, (size_t)s->nvars, sizeof *c->slots);
    c->lo = calloc_arena(rs, (size_t)s->nvars, sizeof *c->lo);
    c->ext = calloc_arena(rs, (size_t)s->nvars, sizeof *c->ext);
    c->init = compile_scoped(rs, s->init);
    size_t mark = rs->scope.len;
    for (int k = 0; k < s->nvars && !rs->cerr; k++) {
      if (!compile_range(rs, c, k, s)) break;
      rx_ptrvec_push(&rs->scope, (void *)s->vars[k]);
    }
    c->inner = compile_scoped(rs, s->inner);
    rs->scope.len = mark;
    return rs->cerr ? NULL : c;
  }
  case RX_STMT_STORE:
    return compile_store(rs, s);
  case RX_STMT_LET:
    if (!s->local || !known_dtype(s->local->dtype)) {
      cfail(rs, s->loc, "malformed let");
      return NULL;
    }
    c = cst_new(rs, C_LET, s);
    c->value = coerce(rs, compile_tx(rs, s->value), s->local->dtype);
    /* a symbolic let defines its variable, read by compile_sym like a loop variable's */
    c->slot = slot_of(rs, s->local->sym ? (const void *)s->local->sym : s->local);
    rx_ptrvec_push(&rs->scope, s->local->sym ? (void *)s->local->sym : s->local);
    return rs->cerr ? NULL : c;
  case RX_STMT_ALLOC: {
    rx_buffer *b = s->buf;
    if (!b || !known_dtype(b->dtype) || b->ndim < 0 || b->ndim > RX_MAX_NDIM) {
      cfail(rs, s->loc, "malformed allocation");
      return NULL;
    }
    c = cst_new(rs, C_ALLOC, s);
    c->scope = b->scope;
    c->buf = buf_of(rs, b);
    c->alloc_id = rs->nallocs++;
    c->nidx = b->ndim;
    c->idx = calloc_arena(rs, (size_t)b->ndim, sizeof *c->idx);
    for (int i = 0; i < b->ndim; i++) c->idx[i] = compile_sym(rs, b->shape[i], s->loc);
    rx_ptrvec_push(&rs->scope, b);
    return rs->cerr ? NULL : c;
  }
  case RX_STMT_IF:
    if (s->value && s->value->kind == RX_TX_HAS_FRAG) { /* decided once: ir.h */
      rx_stmt *taken = rs->fragments ? s->inner : s->otherwise;
      return taken ? compile_scoped(rs, taken) : cst_new(rs, C_SEQ, s);
    }
    c = cst_new(rs, C_IF, s);
    c->value = coerce(rs, compile_tx(rs, s->value), RX_DTYPE_BOOL);
    c->inner = compile_scoped(rs, s->inner);
    if (s->otherwise) c->els = compile_scoped(rs, s->otherwise);
    return rs->cerr ? NULL : c;
  case RX_STMT_BARRIER:
    if (!rs->cur_blk) {
      cfail(rs, s->loc, "barrier outside a block (the innermost blockIdx loop's body)");
      return NULL;
    }
    return cst_new(rs, C_BARRIER, s);
  case RX_STMT_MMA:
    if (!rs->cur_blk) {
      cfail(rs, s->loc, "mma outside a block (the innermost blockIdx loop's body)");
      return NULL;
    }
    if (!s->buf || !s->mma_a || !s->mma_b) {
      cfail(rs, s->loc, "malformed mma");
      return NULL;
    }
    c = cst_new(rs, C_MMA, s);
    c->buf = buf_of(rs, s->buf);
    c->buf2 = buf_of(rs, s->mma_a);
    c->buf3 = buf_of(rs, s->mma_b);
    compile_frag_rows(rs, c, s);
    return rs->cerr ? NULL : c;
  case RX_STMT_ASYNC_COPY:
  case RX_STMT_LDMATRIX:
    return compile_matrix_load(rs, s);
  case RX_STMT_ASYNC_COMMIT:
    return cst_new(rs, C_COMMIT, s);
  case RX_STMT_ASYNC_WAIT:
    c = cst_new(rs, C_AWAIT, s);
    c->count = s->count;
    return c;
  case RX_STMT_FRAG:
    return compile_frag(rs, s);
  }
  cfail(rs, s->loc, "malformed statement (kind %d)", (int)s->kind);
  return NULL;
}

/* ------------------------------------------------------------------------------------------
 * entry point
 * ------------------------------------------------------------------------------------------ */
static void run_free(run *rs) {
  for (int i = 0; i < rs->nfibers; i++) rx_fiber_free(rs->fibers[i]);
  free(rs->fibers);
  free(rs->slotmap.data);
  free(rs->bufmap.data);
  free(rs->bv_slots.data);
  free(rs->bv_names.data);
  rx_ptrvec_free(&rs->scope);
  rx_arena_free(&rs->arena);
}

/* Nesting depth of the compiled program: statements and expressions (fiber stack size). */
static int cx_depth(const cx *e) {
  if (!e) return 0;
  int d = 0;
  const cx *kids[3] = {e->a, e->b, e->c};
  for (int i = 0; i < 3; i++) {
    int k = cx_depth(kids[i]);
    if (k > d) d = k;
  }
  if (e->op == X_LOAD)
    for (int i = 0; i < e->nidx; i++) {
      int k = cx_depth(e->idx[i]);
      if (k > d) d = k;
    }
  return d + 1;
}

static int cst_depth(const cst *s) {
  if (!s) return 0;
  int d = 0;
#define DEPTH_MAX(x)                                                                               \
  do {                                                                                             \
    int k_ = (x);                                                                                  \
    if (k_ > d) d = k_;                                                                            \
  } while (0)
  for (int i = 0; i < s->n; i++) DEPTH_MAX(cst_depth(s->body[i]));
  for (int i = 0; i < s->nvars; i++) {
    DEPTH_MAX(cx_depth(s->lo[i]));
    DEPTH_MAX(cx_depth(s->ext[i]));
  }
  DEPTH_MAX(cst_depth(s->inner));
  DEPTH_MAX(cst_depth(s->init));
  DEPTH_MAX(cst_depth(s->els));
  for (int i = 0; i < s->nidx; i++) DEPTH_MAX(cx_depth(s->idx[i]));
  DEPTH_MAX(cx_depth(s->value));
  DEPTH_MAX(cx_depth(s->cond));
  if (s->blk) {
    for (int i = 0; i < s->blk->nt; i++) DEPTH_MAX(cx_depth(s->blk->exts[i]));
    DEPTH_MAX(cst_depth(s->blk->body));
  }
#undef DEPTH_MAX
  return d + 1 + s->nvars; /* a reduction recurses once per variable */
}

enum {
  STACK_BASE = 128 * 1024, /* fiber stack: this much, plus per level of nesting: */
  STACK_PER_LEVEL = 1024,  /* generous for sanitizer builds (2 frames per level) */
  MAX_DEPTH = 16384,       /* deeper programs are rejected */
};

/* Compiles the program: parameters, dims, facts, body. */
static rx_status prepare(run *rs, int nargs) {
  const rx_tensor_fn *f = rs->f;
  if (nargs != f->nparams)
    return rx_status_make(RX_ERR_INVALID, "tensor_fn `%s`: %d arguments given, %d parameters",
                          rs->fname, nargs, f->nparams);
  /* parameters: buffers and the variables they define */
  for (int i = 0; i < f->nparams; i++) {
    const rx_param *p = f->params[i];
    if (p->kind == RX_PARAM_SCALAR) {
      if (!p->var || p->var->kind != RX_EXPR_VAR)
        return rx_status_make(RX_ERR_INVALID, "tensor_fn `%s`: malformed scalar parameter %d",
                              rs->fname, i);
      slot_of(rs, p->var);
      rx_ptrvec_push(&rs->scope, (void *)p->var);
      continue;
    }
    const rx_buffer *b = p->buf;
    if (!b || b->ndim < 0 || b->ndim > RX_MAX_NDIM || !known_dtype(b->dtype))
      return rx_status_make(RX_ERR_INVALID, "tensor_fn `%s`: malformed buffer parameter %d",
                            rs->fname, i);
    buf_of(rs, b);
    rx_ptrvec_push(&rs->scope, (void *)b);
    for (int d = 0; d < b->ndim; d++) {
      const rx_expr *x = b->shape[d];
      if (x->kind == RX_EXPR_VAR && scope_index(rs, x) < 0) {
        slot_of(rs, x);
        rx_ptrvec_push(&rs->scope, (void *)x);
      }
    }
  }
  /* compile dims, facts, body */
  cx ***dims = rs->dims = calloc_arena(rs, (size_t)f->nparams, sizeof *dims);
  for (int i = 0; i < f->nparams && !rs->cerr; i++) {
    const rx_param *p = f->params[i];
    if (p->kind != RX_PARAM_BUFFER) continue;
    dims[i] = calloc_arena(rs, (size_t)p->buf->ndim, sizeof **dims);
    for (int d = 0; d < p->buf->ndim; d++) dims[i][d] = compile_sym(rs, p->buf->shape[d], p->loc);
  }
  cx **facts = rs->facts = calloc_arena(rs, (size_t)f->nfacts, sizeof *facts);
  for (int i = 0; i < f->nfacts && !rs->cerr; i++)
    facts[i] = compile_sym(rs, f->facts[i], f->fact_locs ? f->fact_locs[i] : f->loc);
  if (rs->cerr) return rs->cerr;
  int flags = scan(f->body);
  if (!(flags & HAS_BLOCK)) { /* the whole program is one block */
    rs->whole = new_blk(rs, flags);
    rs->body = compile_block_body(rs, rs->whole, f->body);
  } else {
    rs->body = compile_stmt(rs, f->body);
  }
  if (rs->cerr) return rs->cerr;
  int depth = cst_depth(rs->body);
  for (int i = 0; i < f->nfacts; i++)
    if (cx_depth(facts[i]) > depth) depth = cx_depth(facts[i]);
  if (depth > MAX_DEPTH)
    return rx_status_make(RX_ERR_UNSUPPORTED,
                          "tensor_fn `%s`: nesting depth %d is more than the interpreter "
                          "supports (%d)",
                          rs->fname, depth, MAX_DEPTH);
  rs->stack_size = STACK_BASE + (size_t)depth * STACK_PER_LEVEL;
  return NULL;
}

/* Binds parameters, checks arguments and facts, runs (on a fiber: see rx_interp_run). */
/* Binds the scalar parameters' variables (sizes: >= 0, an i32 fits) in top's slots. */
static rx_status bind_scalars(run *rs, thr *top, bool *bound) {
  const rx_tensor_fn *f = rs->f;
  rx_interp_arg *args = rs->args;
  rx_status st = NULL;
  for (int i = 0; i < f->nparams; i++) {
    const rx_param *p = f->params[i];
    if (p->kind != RX_PARAM_SCALAR) continue;
    int64_t v = args[i].value;
    const char *name = p->var->name;
    if (v < 0) {
      st = rx_status_make(RX_ERR_INVALID,
                          "tensor_fn `%s`: scalar parameter `%s` is %lld, but symbolic values "
                          "are sizes (>= 0)",
                          rs->fname, name, (long long)v);
      return st;
    }
    if (p->dtype == RX_DTYPE_I32 && v > INT32_MAX) {
      st = rx_status_make(RX_ERR_INVALID,
                          "tensor_fn `%s`: scalar parameter `%s`: %lld does not fit in i32",
                          rs->fname, name, (long long)v);
      return st;
    }
    int s = slot_of(rs, p->var);
    if (bound[s] && top->slots[s].i != v) {
      st = rx_status_make(RX_ERR_INVALID,
                          "tensor_fn `%s`: scalar parameter `%s` is given %lld and %lld", rs->fname,
                          name, (long long)top->slots[s].i, (long long)v);
      return st;
    }
    top->slots[s].i = v;
    bound[s] = true;
  }
  return st;
}

static rx_status execute(run *rs) {
  const rx_tensor_fn *f = rs->f;
  rx_interp_arg *args = rs->args;
  cx ***dims = rs->dims;
  cx **facts = rs->facts;

  /* the top-level thread */
  thr top = {.rs = rs};
  blk topb = {.n = 1, .th = &top, .dims = {1, 1, 1}};
  top.b = &topb;
  top.slots = rx_calloc((size_t)rs->nslots + 1, sizeof *top.slots);
  top.bufs = rx_calloc((size_t)rs->nbufs + 1, sizeof *top.bufs);
  top.locals = rx_calloc((size_t)rs->nallocs + 1, sizeof *top.locals);
  topb.inst = rx_calloc((size_t)rs->nallocs + 1, sizeof *topb.inst);
  rbuf *params = rx_calloc((size_t)f->nparams + 1, sizeof *params);
  bool *bound = rx_calloc((size_t)rs->nslots + 1, sizeof *bound);
  rx_status st = NULL;
  rx_strbuf sb = {0};

  /* scalars first, then whole-variable dims, then every dim is checked */
  if ((st = bind_scalars(rs, &top, bound))) goto done;
  for (int i = 0; i < f->nparams; i++) {
    const rx_param *p = f->params[i];
    if (p->kind != RX_PARAM_BUFFER) continue;
    const rx_buffer *b = p->buf;
    const rx_interp_arg *a = &args[i];
    if (a->dtype != b->dtype || a->ndim != b->ndim) {
      st = rx_status_make(RX_ERR_INVALID,
                          "tensor_fn `%s`: argument %d (`%s`) must be a %s buffer with %d dims, "
                          "got %s with %d dims",
                          rs->fname, i, b->name, rx_dtype_name(b->dtype), b->ndim,
                          rx_dtype_name(a->dtype), a->ndim);
      goto done;
    }
    rbuf *r = &params[i];
    r->data = a->data;
    r->dt = b->dtype;
    r->ndim = b->ndim;
    r->decl = b;
    r->count = 1;
    for (int d = 0; d < b->ndim; d++) {
      r->shape[d] = a->shape[d];
      if (a->shape[d] < 0 || __builtin_mul_overflow(r->count, a->shape[d], &r->count)) {
        st = rx_status_make(RX_ERR_INVALID,
                            "tensor_fn `%s`: argument `%s`: bad extent %lld in dim %d", rs->fname,
                            b->name, (long long)a->shape[d], d);
        goto done;
      }
      const rx_expr *x = b->shape[d];
      if (x->kind == RX_EXPR_VAR) {
        int s = slot_of(rs, x);
        if (!bound[s]) {
          top.slots[s].i = a->shape[d];
          bound[s] = true;
        }
      }
    }
    if (r->count > 0 && !a->data) {
      st = rx_status_make(RX_ERR_INVALID, "tensor_fn `%s`: argument `%s` has no data", rs->fname,
                          b->name);
      goto done;
    }
    top.bufs[buf_of(rs, b)] = r;
  }
  for (int i = 0; i < f->nparams; i++) {
    const rx_param *p = f->params[i];
    if (p->kind != RX_PARAM_BUFFER) continue;
    for (int d = 0; d < p->buf->ndim; d++) {
      int64_t want = ev(&top, dims[i][d]).i;
      if (top.err) {
        st = top.err;
        top.err = NULL;
        goto done;
      }
      if (want != args[i].shape[d]) {
        const rx_expr *x = p->buf->shape[d];
        rx_strbuf_append(&sb, "`");
        put_expr(&sb, x);
        rx_strbuf_printf(&sb, "` = %lld", (long long)want);
        if (x->kind != RX_EXPR_VAR && x->kind != RX_EXPR_CONST)
          put_var_values(&sb, rs, top.slots, x);
        st = rx_status_make(RX_ERR_INVALID,
                            "tensor_fn `%s`: argument `%s` dim %d: expected %s, got %lld",
                            rs->fname, p->buf->name, d, sb.data, (long long)args[i].shape[d]);
        goto done;
      }
    }
  }
  for (int i = 0; i < f->nfacts; i++) {
    int64_t ok = ev(&top, facts[i]).i;
    if (top.err) {
      st = top.err;
      top.err = NULL;
      goto done;
    }
    if (!ok) {
      rx_strbuf_append(&sb, "`");
      put_expr(&sb, f->facts[i]);
      rx_strbuf_append(&sb, "` does not hold");
      put_var_values(&sb, rs, top.slots, f->facts[i]);
      if (f->fact_locs) put_loc(&sb, f->fact_locs[i]);
      st = rx_status_make(RX_ERR_INVALID, "tensor_fn `%s`: where fact %s", rs->fname, sb.data);
      goto done;
    }
  }

  if (rs->whole)
    run_block(&top, rs->whole);
  else
    exec(&top, rs->body);
  st = top.err;

done:
  rx_strbuf_free(&sb);
  for (int a = 0; a < rs->nallocs; a++) {
    free_rbuf(top.locals[a]);
    free_rbuf(topb.inst[a]);
  }
  free(top.locals);
  free(top.inflight.data);
  free(topb.inst);
  free(top.slots);
  free(top.bufs);
  free(params);
  free(bound);
  return st;
}

typedef struct top_job {
  run *rs;
  rx_status st;
} top_job;

static void top_main(void *arg) {
  top_job *j = arg;
  j->st = execute(j->rs);
}

rx_status rx_interp_run(rx_module *m, const rx_tensor_fn *f, rx_interp_arg *args, int nargs,
                        const rx_interp_opts *opts) {
  (void)m;
  if (!f) return rx_status_make(RX_ERR_INVALID, "interp: no tensor program given");
  if (nargs > 0 && !args)
    return rx_status_make(RX_ERR_INVALID, "tensor_fn `%s`: arguments missing", f->name);
  rx_interp_opts o = opts ? *opts : (rx_interp_opts){0};
  if (o.subgroup_size < 0 || o.max_threads_per_block < 0 || o.max_steps < 0)
    return rx_status_make(RX_ERR_INVALID, "tensor_fn `%s`: negative interpreter option", f->name);
  run rs = {.f = f, .fname = f->name ? f->name : "?"};
  rx_arena_init(&rs.arena);
  rs.sgsize = o.subgroup_size ? o.subgroup_size : 32;
  rs.max_threads = o.max_threads_per_block ? o.max_threads_per_block : 1024;
  rs.max_steps = o.max_steps;
  rs.fragments = o.fragments;
  rs.args = args;
  rx_status st = f->body ? prepare(&rs, nargs)
                         : rx_status_make(RX_ERR_INVALID, "tensor_fn `%s` has no body", rs.fname);
  if (!st) {
    /* the program runs on a fiber too, whose stack fits its nesting depth, whatever the
     * caller's stack is */
    rx_fiber *main = rx_fiber_new(rs.stack_size);
    if (!main) {
      st = rx_status_make(RX_ERR_OUT_OF_MEMORY, "tensor_fn `%s`: cannot map a stack of %zu bytes",
                          rs.fname, rs.stack_size);
    } else {
      top_job job = {.rs = &rs};
      rx_fiber_start(main, top_main, &job);
      rx_fiber_resume(main);
      RX_ASSERT(rx_fiber_done(main));
      rx_fiber_free(main);
      st = job.st;
    }
  }
  run_free(&rs);
  return st;
}
