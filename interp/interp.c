/* interp/interp.c: the reference interpreter of tensor programs, its compilation and its entry
 * point interp_run; the semantics are in interp.h.
 *
 * A program is first compiled (here) into a small closure form: expressions (cx) and statements
 * (cst) with every variable, let-local and buffer resolved to a slot index, every implicit
 * conversion made explicit (CVT nodes), and the parallel structure found (which loop launches
 * blocks, which loops are bound to thread axes, whether a block needs fibers at all). Running is
 * then a tree walk over that form with no lookups by name: expressions in eval.c, statements and
 * the threads of a block in exec.c (their shared types and helpers: interp.h's internal part).
 * After compilation, link_cst gives every node its handler (cx.fn, cst.fn), specialized to it
 * where one is, so that the walk does not switch at run time on what is known now.
 *
 * Errors at run time are recorded in the running thread (thr.err, the first one wins) and
 * evaluation returns zeros from then on; statements stop at the first error. Nothing is
 * undefined behaviour on any input: index arithmetic is checked, integer arithmetic wraps in
 * uint64_t, every access is bounds-checked. */
#define RX_INTERP_INTERNAL
#include "interp.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------------------------
 * compilation
 * ------------------------------------------------------------------------------------------ */
static void *calloc_arena(run *rs, size_t n, size_t size) {
  size_t bytes = n * size;
  return base_arena_alloc(&rs->arena, bytes ? bytes : 1);
}

static int slot_of(run *rs, const void *key) {
  int s = interp_find_key(rs->slotmap.data, rs->slotmap.len, key);
  if (s >= 0) return s;
  keyid k = {key, rs->nslots++};
  RX_VEC_PUSH(&rs->slotmap, k);
  return k.id;
}

static int buf_of(run *rs, const rx_buffer *b) {
  int s = interp_find_key(rs->bufmap.data, rs->bufmap.len, b);
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
  e->fn = interp_ev_any; /* until link_cx specializes it */
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
      interp_cfail(rs, loc,
                   "variable `%s` is not defined here (no parameter, loop or scalar defines it)",
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
    interp_cfail(rs, loc, "unknown symbolic expression kind %d", (int)x->kind);
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
  if (ir_dtype_bits(b->dtype) > ir_dtype_bits(a->dtype)) return b->dtype;
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

/* The dtype argument i of intrinsic f is computed in, for a call of dtype dt: dt, but
 * shuffle_xor's lane mask (argument 1) is an integer. */
static rx_dtype arg_dtype(rx_intrinsic f, int i, rx_dtype dt) {
  return f == RX_INTRIN_SHUFFLE_XOR && i == 1 ? RX_DTYPE_I64 : dt;
}

static cx *compile_tx(run *rs, const rx_tx *e) {
  if (rs->cerr) return NULL;
  if (!e) {
    interp_cfail(rs, (rx_loc){0}, "missing expression");
    return NULL;
  }
  rx_dtype dt = e->dtype;
  if (!known_dtype(dt)) {
    interp_cfail(rs, e->loc, "expression of unknown dtype");
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
      interp_cfail(rs, e->loc, "local `%s` is not defined here", e->local->name);
      return NULL;
    }
    r = cx_new(rs, X_SLOT, e->local->dtype, e->loc);
    r->slot = slot_of(rs, e->local);
    return coerce(rs, r, dt);
  case RX_TX_LOAD: {
    if (scope_index(rs, e->buf) < 0) {
      interp_cfail(rs, e->loc, "buffer `%s` is not a parameter or an allocation visible here",
                   e->buf->name);
      return NULL;
    }
    if (e->nidx != e->buf->ndim || e->nidx > RX_MAX_NDIM) {
      interp_cfail(rs, e->loc, "load from `%s` with %d indices, but it has %d dimensions",
                   e->buf->name, e->nidx, e->buf->ndim);
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
    int arity = ir_intrinsic_arity(f);
    const rx_tx *args[3] = {e->a, e->b, e->c};
    for (int i = 0; i < arity; i++)
      if (!args[i]) {
        interp_cfail(rs, e->loc, "%s expects %d arguments", ir_intrinsic_name(f), arity);
        return NULL;
      }
    char kind = ir_intrinsic_kind(f);
    if (kind == 'c') {
      r = cx_new(rs, X_CHECK, dt, e->loc);
      r->a = coerce(rs, compile_tx(rs, e->a), RX_DTYPE_BOOL);
      r->b = coerce(rs, compile_tx(rs, e->b), dt);
      r->msg = e->msg ? e->msg : "check failed (value %v)";
      return rs->cerr ? NULL : r;
    }
    if (kind == 's') {
      if (tx_has_subgroup(e->a) || tx_has_subgroup(e->b)) {
        interp_cfail(rs, e->loc, "nested subgroup operations are not supported");
        return NULL;
      }
      if (!rs->cur_blk) {
        interp_cfail(rs, e->loc, "%s outside a block (the innermost blockIdx loop's body)",
                     ir_intrinsic_name(f));
        return NULL;
      }
      r = cx_new(rs, X_SUBGROUP, dt, e->loc);
    } else if (isf(dt)) {
      r = cx_new(rs, X_FCALL, dt, e->loc);
    } else if (kind == 'n') {
      r = cx_new(rs, X_ICALL, dt, e->loc);
    } else {
      interp_cfail(rs, e->loc, "%s of %s: a float intrinsic needs a float operand",
                   ir_intrinsic_name(f), ir_dtype_name(dt));
      return NULL;
    }
    r->sub = (uint8_t)f;
    if (arity > 0) r->a = coerce(rs, compile_tx(rs, e->a), dt);
    if (arity > 1) r->b = coerce(rs, compile_tx(rs, e->b), arg_dtype(f, 1, dt));
    if (arity > 2) r->c = coerce(rs, compile_tx(rs, e->c), dt);
    return rs->cerr ? NULL : r;
  }
  case RX_TX_HAS_FRAG:
    interp_cfail(rs, e->loc, "%s outside an 'if' condition", ir_target_test_name(e->test));
    return NULL;
  }
  interp_cfail(rs, e->loc, "malformed expression (kind %d)", (int)e->kind);
  return NULL;
}

/* ---- structure scans ---- */
static bool tx_has_subgroup(const rx_tx *e) {
  if (!e) return false;
  if (e->kind == RX_TX_CALL && (unsigned)e->intrin < RX_INTRIN_COUNT &&
      ir_intrinsic_kind(e->intrin) == 's')
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
  case RX_STMT_WGMMA:
    return HAS_SYNC;
  case RX_STMT_WGMMA_FENCE:
  case RX_STMT_WGMMA_COMMIT:
  case RX_STMT_WGMMA_WAIT:
    return 0;
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
  c->fn = interp_exec_any; /* until link_cst specializes it */
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
    interp_cfail(rs, s->loc, "malformed loop");
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
  interp_collect_vars(s->extent[0], &vars);
  for (size_t i = 0; i < vars.len; i++) {
    const rx_expr *v = vars.data[i];
    long at = scope_index(rs, v);
    if (at >= (long)rs->launch_mark) {
      interp_cfail(
          rs, s->loc,
          "the extent of a %s loop uses `%s`, which is not known when the block is launched "
          "(only symbolic and blockIdx variables are)",
          ir_loop_kind_name(s->loop_kind), v->name);
      break;
    }
  }
  base_ptrvec_free(&vars);
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
    interp_cfail(rs, s->loc, "malformed loop (%d variables)", s->nvars);
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
      interp_cfail(rs, s->loc,
                   "a %s loop inside a block body (inside another blockIdx loop's "
                   "threads or in a program whose threads start outside blockIdx loops)",
                   ir_loop_kind_name(lk));
      return NULL;
    }
    base_ptrvec_push(&rs->scope, (void *)s->vars[0]);
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
      interp_cfail(rs, s->loc, "%s loop outside the blockIdx loops", ir_loop_kind_name(lk));
      return NULL;
    }
    if (rs->axis_active[axis]) {
      interp_cfail(rs, s->loc, "%s loop nested inside another %s loop", ir_loop_kind_name(lk),
                   ir_loop_kind_name(lk));
      return NULL;
    }
    c->kind = C_TFOR;
    c->axis = axis;
    add_thread_loop(rs, axis, s, c->ext[0]);
    base_ptrvec_push(&rs->scope, (void *)s->vars[0]);
    rs->axis_active[axis] = true;
    c->inner = compile_scoped(rs, s->inner);
    rs->axis_active[axis] = false;
  } else {
    base_ptrvec_push(&rs->scope, (void *)s->vars[0]);
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
    interp_cfail(rs, s->loc,
                 "store to `%s`, which is not a parameter or an allocation visible here",
                 b ? b->name : "?");
    return NULL;
  }
  if (s->nidx != b->ndim || s->nidx > RX_MAX_NDIM) {
    interp_cfail(rs, s->loc, "store to `%s` with %d indices, but it has %d dimensions", b->name,
                 s->nidx, b->ndim);
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
    interp_cfail(rs, s->loc, "ldmatrix outside a block (the innermost blockIdx loop's body)");
    return NULL;
  }
  if (!s->buf || scope_index(rs, s->buf) < 0 || !s->value || s->value->kind != RX_TX_LOAD ||
      (!copy && s->count != 1 && s->count != 2 && s->count != 4)) {
    interp_cfail(rs, s->loc, "malformed %s", what);
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
  if (!rs->cerr && (!c->value || c->value->op != X_LOAD))
    interp_cfail(rs, s->loc, "malformed %s", what);
  return rs->cerr ? NULL : c;
}

/* `frag OP` (ir.h, RX_STMT_FRAG); the verifier checked the operands' uses, shapes and dtypes */
static cst *compile_frag(run *rs, const rx_stmt *s) {
  if (!rs->cur_blk) {
    interp_cfail(rs, s->loc, "frag %s outside a block (the innermost blockIdx loop's body)",
                 ir_frag_op_name(s->frag_op));
    return NULL;
  }
  bool mma = s->frag_op == RX_FRAG_OP_MMA, mem = !mma && s->frag_op != RX_FRAG_OP_FILL;
  if (!s->buf || !s->buf->frag || (mma && (!s->mma_a || !s->mma_b || !s->mma_c)) ||
      (mem && (!s->mem || s->nidx != s->mem->ndim || s->nidx > RX_MAX_NDIM)) ||
      (!mma && !s->value)) {
    interp_cfail(rs, s->loc, "malformed frag %s", ir_frag_op_name(s->frag_op));
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
    interp_cfail(rs, (rx_loc){0}, "missing statement");
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
      interp_cfail(rs, s->loc, "malformed reduce");
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
      base_ptrvec_push(&rs->scope, (void *)s->vars[k]);
    }
    c->inner = compile_scoped(rs, s->inner);
    rs->scope.len = mark;
    return rs->cerr ? NULL : c;
  }
  case RX_STMT_STORE:
    return compile_store(rs, s);
  case RX_STMT_LET:
    if (!s->local || !known_dtype(s->local->dtype)) {
      interp_cfail(rs, s->loc, "malformed let");
      return NULL;
    }
    c = cst_new(rs, C_LET, s);
    c->value = coerce(rs, compile_tx(rs, s->value), s->local->dtype);
    /* a symbolic let defines its variable, read by compile_sym like a loop variable's */
    c->slot = slot_of(rs, s->local->sym ? (const void *)s->local->sym : s->local);
    base_ptrvec_push(&rs->scope, s->local->sym ? (void *)s->local->sym : s->local);
    return rs->cerr ? NULL : c;
  case RX_STMT_ALLOC: {
    rx_buffer *b = s->buf;
    if (!b || !known_dtype(b->dtype) || b->ndim < 0 || b->ndim > RX_MAX_NDIM) {
      interp_cfail(rs, s->loc, "malformed allocation");
      return NULL;
    }
    c = cst_new(rs, C_ALLOC, s);
    c->scope = b->scope;
    c->buf = buf_of(rs, b);
    c->alloc_id = rs->nallocs++;
    c->nidx = b->ndim;
    c->idx = calloc_arena(rs, (size_t)b->ndim, sizeof *c->idx);
    for (int i = 0; i < b->ndim; i++) c->idx[i] = compile_sym(rs, b->shape[i], s->loc);
    base_ptrvec_push(&rs->scope, b);
    return rs->cerr ? NULL : c;
  }
  case RX_STMT_IF:
    if (s->value && s->value->kind == RX_TX_HAS_FRAG) { /* decided once: ir.h */
      rx_target_test tt = s->value->test;
      bool then = tt == RX_TEST_MMA     ? rs->mma_sync
                  : tt == RX_TEST_WGMMA ? rs->wgmma
                                        : rs->fragments;
      rx_stmt *taken = then ? s->inner : s->otherwise;
      return taken ? compile_scoped(rs, taken) : cst_new(rs, C_SEQ, s);
    }
    c = cst_new(rs, C_IF, s);
    c->value = coerce(rs, compile_tx(rs, s->value), RX_DTYPE_BOOL);
    c->inner = compile_scoped(rs, s->inner);
    if (s->otherwise) c->els = compile_scoped(rs, s->otherwise);
    return rs->cerr ? NULL : c;
  case RX_STMT_BARRIER:
    if (!rs->cur_blk) {
      interp_cfail(rs, s->loc, "barrier outside a block (the innermost blockIdx loop's body)");
      return NULL;
    }
    return cst_new(rs, C_BARRIER, s);
  case RX_STMT_MMA:
    if (!rs->cur_blk) {
      interp_cfail(rs, s->loc, "mma outside a block (the innermost blockIdx loop's body)");
      return NULL;
    }
    if (!s->buf || !s->mma_a || !s->mma_b) {
      interp_cfail(rs, s->loc, "malformed mma");
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
  case RX_STMT_WGMMA:
    if (!rs->cur_blk) {
      interp_cfail(rs, s->loc, "wgmma outside a block (the innermost blockIdx loop's body)");
      return NULL;
    }
    if (!s->buf || !s->value || s->value->kind != RX_TX_LOAD || !s->wg_b ||
        s->wg_b->kind != RX_TX_LOAD) {
      interp_cfail(rs, s->loc, "malformed wgmma");
      return NULL;
    }
    c = cst_new(rs, C_WGMMA, s);
    c->buf = buf_of(rs, s->buf);
    c->value = compile_tx(rs, s->value);
    c->cond = compile_tx(rs, s->wg_b);
    c->count = s->count;
    c->trans = s->trans;
    return rs->cerr ? NULL : c;
  case RX_STMT_WGMMA_FENCE: /* computed at once (ir.h): nothing to order */
  case RX_STMT_WGMMA_COMMIT:
  case RX_STMT_WGMMA_WAIT:
    return cst_new(rs, C_SEQ, s);
  }
  interp_cfail(rs, s->loc, "malformed statement (kind %d)", (int)s->kind);
  return NULL;
}

/* ------------------------------------------------------------------------------------------
 * entry point
 * ------------------------------------------------------------------------------------------ */
static void run_free(run *rs) {
  for (int i = 0; i < rs->nfibers; i++) interp_fiber_free(rs->fibers[i]);
  free(rs->fibers);
  free(rs->slotmap.data);
  free(rs->bufmap.data);
  free(rs->bv_slots.data);
  free(rs->bv_names.data);
  base_ptrvec_free(&rs->scope);
  base_arena_free(&rs->arena);
}

/* Nesting depth of the compiled program: statements and expressions (fiber stack size). Also
 * links it: every expression node gets its specialized handler (interp_ev_select), once its
 * operands are final. */
static int link_cx(cx *e) {
  if (!e) return 0;
  int d = 0;
  cx *kids[3] = {e->a, e->b, e->c};
  for (int i = 0; i < 3; i++) {
    int k = link_cx(kids[i]);
    if (k > d) d = k;
  }
  if (e->op == X_LOAD)
    for (int i = 0; i < e->nidx; i++) {
      int k = link_cx(e->idx[i]);
      if (k > d) d = k;
    }
  interp_ev_select(e);
  return d + 1;
}

static int link_cst(cst *s) {
  if (!s) return 0;
  int d = 0;
#define DEPTH_MAX(x)                                                                               \
  do {                                                                                             \
    int k_ = (x);                                                                                  \
    if (k_ > d) d = k_;                                                                            \
  } while (0)
  for (int i = 0; i < s->n; i++) DEPTH_MAX(link_cst(s->body[i]));
  for (int i = 0; i < s->nvars; i++) {
    DEPTH_MAX(link_cx(s->lo[i]));
    DEPTH_MAX(link_cx(s->ext[i]));
  }
  DEPTH_MAX(link_cst(s->inner));
  DEPTH_MAX(link_cst(s->init));
  DEPTH_MAX(link_cst(s->els));
  for (int i = 0; i < s->nidx; i++) DEPTH_MAX(link_cx(s->idx[i]));
  DEPTH_MAX(link_cx(s->value));
  DEPTH_MAX(link_cx(s->cond));
  if (s->blk) {
    for (int i = 0; i < s->blk->nt; i++) DEPTH_MAX(link_cx(s->blk->exts[i]));
    DEPTH_MAX(link_cst(s->blk->body));
  }
#undef DEPTH_MAX
  interp_exec_select(s);
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
    return base_status_make(RX_ERR_INVALID, "tensor_fn `%s`: %d arguments given, %d parameters",
                            rs->fname, nargs, f->nparams);
  /* parameters: buffers and the variables they define */
  for (int i = 0; i < f->nparams; i++) {
    const rx_param *p = f->params[i];
    if (p->kind == RX_PARAM_SCALAR) {
      if (!p->var || p->var->kind != RX_EXPR_VAR)
        return base_status_make(RX_ERR_INVALID, "tensor_fn `%s`: malformed scalar parameter %d",
                                rs->fname, i);
      slot_of(rs, p->var);
      base_ptrvec_push(&rs->scope, (void *)p->var);
      continue;
    }
    const rx_buffer *b = p->buf;
    if (!b || b->ndim < 0 || b->ndim > RX_MAX_NDIM || !known_dtype(b->dtype))
      return base_status_make(RX_ERR_INVALID, "tensor_fn `%s`: malformed buffer parameter %d",
                              rs->fname, i);
    buf_of(rs, b);
    base_ptrvec_push(&rs->scope, (void *)b);
    for (int d = 0; d < b->ndim; d++) {
      const rx_expr *x = b->shape[d];
      if (x->kind == RX_EXPR_VAR && scope_index(rs, x) < 0) {
        slot_of(rs, x);
        base_ptrvec_push(&rs->scope, (void *)x);
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
  int depth = link_cst(rs->body);
  for (int i = 0; i < f->nfacts; i++) {
    int k = link_cx(facts[i]);
    if (k > depth) depth = k;
  }
  for (int i = 0; i < f->nparams; i++)
    if (f->params[i]->kind == RX_PARAM_BUFFER)
      for (int d = 0; d < f->params[i]->buf->ndim; d++) link_cx(dims[i][d]);
  if (depth > MAX_DEPTH)
    return base_status_make(RX_ERR_UNSUPPORTED,
                            "tensor_fn `%s`: nesting depth %d is more than the interpreter "
                            "supports (%d)",
                            rs->fname, depth, MAX_DEPTH);
  rs->stack_size = STACK_BASE + (size_t)depth * STACK_PER_LEVEL;
  return NULL;
}

/* Binds parameters, checks arguments and facts, runs (on a fiber: see interp_run). */
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
      st = base_status_make(RX_ERR_INVALID,
                            "tensor_fn `%s`: scalar parameter `%s` is %lld, but symbolic values "
                            "are sizes (>= 0)",
                            rs->fname, name, (long long)v);
      return st;
    }
    if (p->dtype == RX_DTYPE_I32 && v > INT32_MAX) {
      st = base_status_make(RX_ERR_INVALID,
                            "tensor_fn `%s`: scalar parameter `%s`: %lld does not fit in i32",
                            rs->fname, name, (long long)v);
      return st;
    }
    int s = slot_of(rs, p->var);
    if (bound[s] && top->slots[s].i != v) {
      st = base_status_make(RX_ERR_INVALID,
                            "tensor_fn `%s`: scalar parameter `%s` is given %lld and %lld",
                            rs->fname, name, (long long)top->slots[s].i, (long long)v);
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
  top.slots = base_calloc((size_t)rs->nslots + 1, sizeof *top.slots);
  top.bufs = base_calloc((size_t)rs->nbufs + 1, sizeof *top.bufs);
  top.locals = base_calloc((size_t)rs->nallocs + 1, sizeof *top.locals);
  topb.inst = base_calloc((size_t)rs->nallocs + 1, sizeof *topb.inst);
  rbuf *params = base_calloc((size_t)f->nparams + 1, sizeof *params);
  bool *bound = base_calloc((size_t)rs->nslots + 1, sizeof *bound);
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
      st = base_status_make(RX_ERR_INVALID,
                            "tensor_fn `%s`: argument %d (`%s`) must be a %s buffer with %d dims, "
                            "got %s with %d dims",
                            rs->fname, i, b->name, ir_dtype_name(b->dtype), b->ndim,
                            ir_dtype_name(a->dtype), a->ndim);
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
        st = base_status_make(RX_ERR_INVALID,
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
      st = base_status_make(RX_ERR_INVALID, "tensor_fn `%s`: argument `%s` has no data", rs->fname,
                            b->name);
      goto done;
    }
    top.bufs[buf_of(rs, b)] = r;
  }
  for (int i = 0; i < f->nparams; i++) {
    const rx_param *p = f->params[i];
    if (p->kind != RX_PARAM_BUFFER) continue;
    for (int d = 0; d < p->buf->ndim; d++) {
      int64_t want = interp_ev(&top, dims[i][d]).i;
      if (top.err) {
        st = top.err;
        top.err = NULL;
        goto done;
      }
      if (want != args[i].shape[d]) {
        const rx_expr *x = p->buf->shape[d];
        base_strbuf_append(&sb, "`");
        interp_put_expr(&sb, x);
        base_strbuf_printf(&sb, "` = %lld", (long long)want);
        if (x->kind != RX_EXPR_VAR && x->kind != RX_EXPR_CONST)
          interp_put_var_values(&sb, rs, top.slots, x);
        st = base_status_make(RX_ERR_INVALID,
                              "tensor_fn `%s`: argument `%s` dim %d: expected %s, got %lld",
                              rs->fname, p->buf->name, d, sb.data, (long long)args[i].shape[d]);
        goto done;
      }
    }
  }
  for (int i = 0; i < f->nfacts; i++) {
    int64_t ok = interp_ev(&top, facts[i]).i;
    if (top.err) {
      st = top.err;
      top.err = NULL;
      goto done;
    }
    if (!ok) {
      base_strbuf_append(&sb, "`");
      interp_put_expr(&sb, f->facts[i]);
      base_strbuf_append(&sb, "` does not hold");
      interp_put_var_values(&sb, rs, top.slots, f->facts[i]);
      if (f->fact_locs) interp_put_loc(&sb, f->fact_locs[i]);
      st = base_status_make(RX_ERR_INVALID, "tensor_fn `%s`: where fact %s", rs->fname, sb.data);
      goto done;
    }
  }

  if (rs->whole)
    interp_run_block(&top, rs->whole);
  else
    interp_exec(&top, rs->body);
  st = top.err;

done:
  base_strbuf_free(&sb);
  for (int a = 0; a < rs->nallocs; a++) {
    interp_free_rbuf(top.locals[a]);
    interp_free_rbuf(topb.inst[a]);
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

rx_status interp_run(rx_module *m, const rx_tensor_fn *f, rx_interp_arg *args, int nargs,
                     const rx_interp_opts *opts) {
  (void)m;
  if (!f) return base_status_make(RX_ERR_INVALID, "interp: no tensor program given");
  if (nargs > 0 && !args)
    return base_status_make(RX_ERR_INVALID, "tensor_fn `%s`: arguments missing", f->name);
  rx_interp_opts o = opts ? *opts : (rx_interp_opts){0};
  if (o.subgroup_size < 0 || o.max_threads_per_block < 0 || o.max_steps < 0)
    return base_status_make(RX_ERR_INVALID, "tensor_fn `%s`: negative interpreter option", f->name);
  run rs = {.f = f, .fname = f->name ? f->name : "?"};
  base_arena_init(&rs.arena);
  rs.sgsize = o.subgroup_size ? o.subgroup_size : 32;
  rs.max_threads = o.max_threads_per_block ? o.max_threads_per_block : 1024;
  rs.max_steps = o.max_steps;
  rs.fragments = o.fragments;
  rs.mma_sync = o.mma_sync;
  rs.wgmma = o.wgmma;
  rs.args = args;
  rx_status st = f->body ? prepare(&rs, nargs)
                         : base_status_make(RX_ERR_INVALID, "tensor_fn `%s` has no body", rs.fname);
  if (!st) {
    /* the program runs on a fiber too, whose stack fits its nesting depth, whatever the
     * caller's stack is */
    rx_fiber *main = interp_fiber_new(rs.stack_size);
    if (!main) {
      st = base_status_make(RX_ERR_OUT_OF_MEMORY, "tensor_fn `%s`: cannot map a stack of %zu bytes",
                            rs.fname, rs.stack_size);
    } else {
      top_job job = {.rs = &rs};
      interp_fiber_start(main, top_main, &job);
      interp_fiber_resume(main);
      RX_ASSERT(interp_fiber_done(main));
      interp_fiber_free(main);
      st = job.st;
    }
  }
  run_free(&rs);
  return st;
}
