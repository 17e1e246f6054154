/* interp: the reference interpreter of tensor programs (the loop IR of ir.h).
 *
 * The oracle for every schedule and every backend: it runs a tensor program, scheduled or not,
 * on host memory, simulating what a GPU does with it, and reports anything a GPU would leave
 * undefined as an error instead of a wrong number.
 *
 *   rx_interp_arg args[3] = {
 *       {.data = a, .ndim = 2, .shape = {n, 4}, .dtype = RX_DTYPE_F32},
 *       {.data = b, .ndim = 2, .shape = {n, 4}, .dtype = RX_DTYPE_F32},
 *       {.data = c, .ndim = 2, .shape = {n, 4}, .dtype = RX_DTYPE_F32},
 *   };
 *   rx_status s = interp_run(m, ir_module_tensor_fn(m, "add"), args, 3, NULL);
 *
 * Semantics (the contract the schedules and code generators are checked against):
 *
 * Arguments. One rx_interp_arg per parameter, in parameter order. A buffer argument gives host
 * memory in the dtype's storage (f32 as float, f16/bf16 as uint16_t bits, integers as their C
 * types, bool as uint8_t 0/1), row-major and contiguous, its extents and its dtype (which must
 * equal the parameter's). A scalar parameter (i64/i32) takes `value` (an i32 parameter must fit
 * in 32 bits). Symbolic variables are bound from the scalar parameters, then from every buffer
 * dimension that is a whole variable (the first such dimension binds it); then every dimension
 * is evaluated and must equal the argument's extent, and every `where` fact must hold. Each
 * violation is an error naming the program, the parameter, the dimension, expected and actual.
 *
 * Values. f32 is computed as C float. f16 and bf16 are computed in float and rounded to the
 * dtype (round to nearest even, subnormals, inf and nan handled) after every operation, as GPU
 * half arithmetic does. f64 is computed as C double. Integers keep their width: arithmetic
 * wraps around (computed in uint64_t, truncated), `//` and `%` are floor division and floor
 * modulo (`/` on integers truncates, as in C; on unsigned dtypes all three are C's unsigned
 * division and modulo); division or modulo by zero is an error. u8/u16/u32/u64 are unsigned in
 * comparisons, min/max and conversions, u64 over its whole range (to 2^64 - 1). Index arithmetic
 * (symbolic expressions: loop and symbolic variables) is 64-bit and reports overflow as an error.
 * `select`, `&&` and `||` evaluate lazily, as the emitted C-like code does (a guarded load in an
 * untaken branch is not executed).
 * Casts: float to integer truncates toward zero and SATURATES to the target's range, NaN gives 0
 * (the behaviour of CUDA's cvt.rzi.sat); integer to integer wraps; anything to bool is `!= 0`;
 * integer to f16/bf16 goes through f32 (exact for |x| < 2^24); f64 to f16/bf16 rounds through
 * f32 (twice, as the printers do).
 * Intrinsics: the C float functions (expf, erff, ...; f64: exp, erf, ...); sigmoid = 1/(1+exp(-x)),
 * rsqrt = 1/sqrt(x); min/max on floats are fminf/fmaxf (a NaN operand loses), abs/min/max on
 * integers are signed (unsigned for the unsigned dtypes and bool; abs of those is the value).
 *
 * Memory. Every load and store is bounds-checked against the buffer's shape; an out-of-bounds
 * access is an error naming the buffer, the indices and the shape. Allocations are zero-filled:
 * `global` and `shared` allocations exist once per block and alloc statement (allocated and
 * zeroed by the first thread that reaches the statement; later executions reuse the memory;
 * outside blockIdx loops the whole program is one block); `local` allocations are per thread and
 * zeroed every time the statement executes.
 *
 * Parallelism. Loops bound to blockIdx.* iterate over blocks in order. The body of an innermost
 * blockIdx loop (or, in a program without blockIdx loops, the whole body) is a block: its
 * threads run concurrently, each executing the whole body with its own variables. The block
 * size along threadIdx.{x,y,z} is the largest extent of the loops bound to that axis in the
 * block (at least 1; those extents may only use symbolic and blockIdx variables); a loop bound
 * to threadIdx.x does not iterate: it binds its variable to lo + the thread's x index and runs
 * its body only when that index is below its extent. Statements outside thread loops run in
 * every thread. At most opts->max_threads_per_block threads per block.
 * `barrier`: a thread waits until every thread of the block is at the same barrier statement;
 * a thread that finishes, or waits at a different barrier, while others wait is a
 * barrier-divergence error (never a hang). Subgroup reductions: lanes are consecutive linear
 * thread ids (x fastest, then y, then z) in groups of opts->subgroup_size; every lane of the
 * subgroup must reach the same subgroup operation (they wait for each other), then each gets the
 * reduction over all lanes in lane order (floats: rounded after each step). A lane that has
 * exited or waits elsewhere is an error. In a one-thread block a subgroup op returns its operand
 * and a barrier does nothing. Threads are scheduled deterministically (round robin by linear id,
 * each running until it blocks); blocks without barriers or subgroup ops run their threads one
 * after the other.
 * Reductions (`reduce`): init runs once, then update for every point of the reduction ranges in
 * row-major order.
 *
 * Threads are fibers (interp/fiber.h: mmap'd stacks with a guard page, a register-saving switch
 * on x86-64/AArch64 Linux and ucontext elsewhere, AddressSanitizer fiber annotations): one OS
 * thread, deterministic, and a suspended thread costs only its stack. The program itself also
 * runs on a fiber whose stack is sized from its nesting depth (so deep expressions cannot
 * overflow the caller's stack), with the default floating-point environment (round to nearest,
 * no flush-to-zero) whatever the caller's is. Programs nested deeper than 16384 levels are
 * rejected with RX_ERR_UNSUPPORTED. */
#ifndef RX_INTERP_H
#define RX_INTERP_H

#include "../ir/ir.h"

#ifndef RX_MAX_NDIM
#define RX_MAX_NDIM 8 /* most dimensions of a buffer */
#endif

typedef struct rx_interp_arg {
  /* buffer parameters */
  void *data;                 /* host memory, row-major, in the dtype's storage; may be NULL
                                 only when the buffer has no elements */
  int64_t shape[RX_MAX_NDIM]; /* extents */
  int ndim;
  rx_dtype dtype; /* must equal the parameter's dtype */
  /* scalar parameters */
  int64_t value;
} rx_interp_arg;

typedef struct rx_interp_opts {
  int subgroup_size;         /* lanes per subgroup (32 on NVIDIA, 8 on lavapipe); 0: 32 */
  int64_t max_steps;         /* statements executed over all threads before giving up with an
                                error; 0: no limit */
  int max_threads_per_block; /* 0: 1024 */
  bool fragments;            /* `if has_fragments(...)` and `if has_async_copy()` (ir.h) take
                                their then branch: the matrix-unit or cp.async form (the
                                interpreter runs fragments of any shape and async copies);
                                false: the else branch, the portable form */
  bool mma_sync;             /* `if has_mma(...)` takes its then branch (RX_STMT_MMA's form) */
  bool wgmma;                /* `if has_wgmma(...)` takes its then branch (RX_STMT_WGMMA's form) */
} rx_interp_opts;

/* Runs tensor program f of module m on args (nargs must equal f->nparams). opts may be NULL.
 * Output buffers are written in place. On any error (see above) returns a status whose message
 * names the program, the statement's source location and the values involved; buffers may then
 * be partly written. m may be NULL (it is not modified). */
rx_status interp_run(rx_module *m, const rx_tensor_fn *f, rx_interp_arg *args, int nargs,
                     const rx_interp_opts *opts);

/* ==========================================================================================
 * Internal to interp/: the interpreter's values, its compiled form and what its three files
 * share (interp.c compiles a program and runs it, eval.c evaluates expressions and words the
 * errors, exec.c executes statements and schedules a block's threads). Each of them defines
 * RX_INTERP_INTERNAL before it includes this header; nobody else sees this part.
 *
 * f64 is computed in double (val.d); the other floats in float, rounded to their dtype. Unsigned
 * integers are held zero-extended in val.i, u64 as its 64 bits (a value of 2^63 or more reads as
 * a negative int64 there): + - * wrap alike, and division, modulo, comparisons, min/max and
 * conversions to float look at the dtype and treat u64 as unsigned, so u64 is exact over its
 * whole range.
 * ========================================================================================== */
#ifdef RX_INTERP_INTERNAL

#include "fiber.h"

#include <math.h>
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

static inline bool isf(rx_dtype t) {
  return t == RX_DTYPE_F32 || t == RX_DTYPE_F16 || t == RX_DTYPE_BF16 || t == RX_DTYPE_F64;
}
static inline bool isd(rx_dtype t) { return t == RX_DTYPE_F64; }
/* Unsigned integers: the dtype table's is_signed, bool excluded. */
static inline bool isu(rx_dtype t) { return ir_dtype_is_int(t) && !ir_dtype_is_signed(t); }

static inline size_t elem_size(rx_dtype t) {
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
  if (t == RX_DTYPE_F16) return base_f16_to_f32(base_f32_to_f16(f));
  if (t == RX_DTYPE_BF16) return base_bf16_to_f32(base_f32_to_bf16(f));
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
static inline int64_t f2i(rx_dtype t, double f) {
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
static inline double i2d(rx_dtype t, int64_t i) {
  return t == RX_DTYPE_U64 ? (double)(uint64_t)i : (double)i;
}
/* ... and as a float (rounded once, not through double). */
static inline float i2f(rx_dtype t, int64_t i) {
  return t == RX_DTYPE_U64 ? (float)(uint64_t)i : (float)i;
}

/* Conversions; f64 to f16/bf16 rounds through f32 as the printers do (twice: to f32, then). */
static inline val convert(rx_dtype from, rx_dtype to, val v) {
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
    r.f = base_f16_to_f32(h);
    break;
  }
  case RX_DTYPE_BF16: {
    uint16_t h;
    memcpy(&h, p + off * 2, 2);
    r.f = base_bf16_to_f32(h);
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
    uint16_t h = base_f32_to_f16(v.f);
    memcpy(p + off * 2, &h, 2);
    break;
  }
  case RX_DTYPE_BF16: {
    uint16_t h = base_f32_to_bf16(v.f);
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
static inline int64_t floordiv64(int64_t a, int64_t b) {
  if (b == -1) return (int64_t)(0 - (uint64_t)a);
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) q--;
  return q;
}
static inline int64_t floormod64(int64_t a, int64_t b) {
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
typedef struct thr thr;
/* The evaluator of one node, chosen once per node after compilation (interp_ev_select, eval.c):
 * a handler specialized to the node's op, dtype and operator (f32 addition, a 2-D f32 load, index
 * addition of a constant) where one exists, else interp_ev_any, the generic switch. Every handler
 * computes exactly what interp_ev_any computes for that node. */
typedef val (*interp_evfn)(thr *t, const cx *e);
struct cx {
  interp_evfn fn; /* interp_ev_any until interp_ev_select picks a specialized one */
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
  C_WGMMA,  /* wgmma: buf: the accumulator; value, cond: the loads of A and B; count: N */
} cst_kind;

typedef struct blkinfo blkinfo;
typedef struct cst cst;
/* The executor of one statement, chosen once per statement after compilation
 * (interp_exec_select, exec.c), as interp_evfn is for expressions: a small function per kind (a
 * serial loop, a 2-D store), or interp_exec_any, the generic switch. */
typedef void (*interp_execfn)(thr *t, const cst *s);
struct cst {
  interp_execfn fn; /* interp_exec_any until interp_exec_select picks a specialized one */
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

struct thr {
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
  const cst *mma;         /* T_MMA: which one (C_MMA, C_LDSM, C_FRAG or C_WGMMA) */
  val sgv, sgr;           /* T_SUBGROUP: own value, result */
  int64_t sgm;            /* T_SUBGROUP at shuffle_xor: the lane mask */
  RX_VEC(acopy) inflight; /* async copies not landed yet */
  int groups;             /* async_commit count */
  rbuf *lm_buf;           /* T_MMA at ldmatrix: the lane's row, or NULL (lane unused) */
  int64_t lm_off;
  int64_t moff[3];       /* T_MMA: the first element of the fragments (C, A, B; ldmatrix: [0]) */
  int64_t foff, fstride; /* C_FRAG load/store: offset of element (0, 0), stride */
  val fval;              /* C_FRAG fill: the value */
};

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
  bool mma_sync;  /* rx_interp_opts.mma_sync */
  bool wgmma;     /* rx_interp_opts.wgmma */
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
 * shared by the files of interp/
 * ------------------------------------------------------------------------------------------ */
/* messages (eval.c) */
void interp_put_loc(rx_strbuf *sb, rx_loc loc);               /* " (at FILE:LINE:COL)" */
void interp_put_ints(rx_strbuf *sb, const int64_t *v, int n); /* "[1, 2, 3]" */
void interp_put_expr(rx_strbuf *sb, const rx_expr *e);        /* the expression's text */
/* The status of an error of program rs at loc: "tensor_fn `f`: MSG (at ...) in block (...),
 * thread (...)" (b and t may be NULL). */
rx_status interp_make_err(run *rs, const blk *b, const thr *t, rx_loc loc, const char *msg);
/* Records an error in thread t (the first one wins) / in the compilation of rs. */
void interp_fail(thr *t, rx_loc loc, const char *fmt, ...) RX_PRINTF(3, 4);
void interp_cfail(run *rs, rx_loc loc, const char *fmt, ...) RX_PRINTF(3, 4);
/* The variables of e, each once, appended to out. */
void interp_collect_vars(const rx_expr *e, rx_ptrvec *out);
/* The id of key in v[0..n) (the last one), or -1. */
int interp_find_key(const keyid *v, size_t n, const void *key);
/* The values of the variables of e in slots, as " (n = 4, k = 0)". */
void interp_put_var_values(rx_strbuf *sb, run *rs, const val *slots, const rx_expr *e);

/* evaluation (eval.c) */
/* Combines two lanes' values for a subgroup reduction. */
val interp_sg_combine(rx_intrinsic op, rx_dtype dt, val x, val y);
/* The generic evaluator of any node (one switch over xop); an error is recorded in t->err. */
val interp_ev_any(thr *t, const cx *e);
/* Sets e->fn to the handler specialized to e (its children already compiled). */
void interp_ev_select(cx *e);
/* Error paths of interp_offset_of, out of line: they record the error and return -1. */
int64_t interp_fail_unallocated(thr *t, const rx_loc *loc, const char *what);
int64_t interp_fail_oob(thr *t, const rx_loc *loc, const char *what, const rbuf *b,
                        const int64_t *ix, int n);

/* The value of e in thread t; an error is recorded in t->err. Constants and slots (most leaves:
 * indices, loop variables) are read here without a call; the rest goes to the node's handler. */
static inline val interp_ev(thr *t, const cx *e) {
  if (e->op == X_SLOT) return t->slots[e->slot];
  if (e->op == X_CONST) return e->k;
  return e->fn(t, e);
}

/* Flat offset of idx in buffer id, or -1 after reporting an error: every index evaluated (in
 * order), then each checked against the shape while the offset accumulates. Inline, so that a
 * caller with a constant n gets its own copy: 1 and 2 (most loads and stores) written out. */
static inline int64_t interp_offset_of(thr *t, int id, cx *const *idx, int n, const rx_loc *loc,
                                       const char *what, rbuf **out_b) {
  int64_t ix[RX_MAX_NDIM];
  *out_b = NULL;
  if (n == 1) {
    ix[0] = interp_ev(t, idx[0]).i;
  } else if (n == 2) {
    ix[0] = interp_ev(t, idx[0]).i;
    ix[1] = interp_ev(t, idx[1]).i;
  } else {
    for (int d = 0; d < n; d++) ix[d] = interp_ev(t, idx[d]).i;
  }
  if (t->err) return -1;
  rbuf *b = t->bufs[id];
  if (!b) return interp_fail_unallocated(t, loc, what);
  const int64_t *shape = b->shape;
  int64_t off;
  if (n == 1 || n == 2) {
    if ((uint64_t)ix[0] >= (uint64_t)shape[0] || (n == 2 && (uint64_t)ix[1] >= (uint64_t)shape[1]))
      return interp_fail_oob(t, loc, what, b, ix, n);
    off = n == 1 ? ix[0] : ix[0] * shape[1] + ix[1];
  } else {
    off = 0;
    for (int d = 0; d < n; d++) {
      if ((uint64_t)ix[d] >= (uint64_t)shape[d]) return interp_fail_oob(t, loc, what, b, ix, n);
      off = off * shape[d] + ix[d];
    }
  }
  *out_b = b;
  return off;
}

/* statements and blocks (exec.c) */
void interp_free_rbuf(rbuf *b);
/* The generic executor of any statement (one switch over cst_kind), without the step count. */
void interp_exec_any(thr *t, const cst *s);
/* Sets s->fn to the executor specialized to s. */
void interp_exec_select(cst *s);
/* Records the error of a run over its step limit (rx_interp_opts.max_steps). */
void interp_fail_steps(thr *t, const cst *s);
/* Executes s in thread t; an error is recorded in t->err. Every statement counts one step. */
static inline void interp_exec(thr *t, const cst *s) {
  run *rs = t->rs;
  if (rs->max_steps && ++rs->steps > rs->max_steps) {
    interp_fail_steps(t, s);
    return;
  }
  s->fn(t, s);
}
/* A thread that waits (barrier, subgroup operation, matrix operation) hands over to the
 * scheduler. */
void interp_yield_to_scheduler(thr *t);
/* Runs the block bi launched by thread p: its threads, as fibers where it synchronizes. */
void interp_run_block(thr *p, const blkinfo *bi);

#endif /* RX_INTERP_INTERNAL */

#endif
