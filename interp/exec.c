/* interp/exec.c: the reference interpreter's statements and threads (interp.h, internal part).
 *
 * interp_exec runs the compiled form of a statement (cst) in one thread: loops, reductions,
 * stores, allocations, barriers, async copies, ldmatrix, mma and subgroup matrix fragments,
 * through the statement's executor (cst.fn: interp_exec_any's switch, or for loops, sequences,
 * stores, lets and ifs a small function chosen once by interp_exec_select).
 * interp_run_block runs a block: its threads one after the other, or, where the block has
 * barriers or subgroup operations, as fibers (fiber.h) under a deterministic round-robin
 * scheduler that reports barrier divergence instead of hanging. */
#define RX_INTERP_INTERNAL
#include "interp.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------------------------
 * statements
 * ------------------------------------------------------------------------------------------ */
static void exec_frag(thr *t, const cst *s);
static void exec_tfor(thr *t, const cst *s);
static void exec_wgmma(thr *t, const cst *s);

void interp_free_rbuf(rbuf *b) {
  if (!b) return;
  free(b->data);
  free(b);
}

/* Loop range [lo, lo + n) with lo + n - 1 representable; false after reporting. */
static bool loop_range(thr *t, const cst *s, int k, int64_t *lo, int64_t *n) {
  *lo = interp_ev(t, s->lo[k]).i;
  *n = interp_ev(t, s->ext[k]).i;
  if (t->err) return false;
  int64_t last;
  if (*n > 0 && __builtin_add_overflow(*lo, *n - 1, &last)) {
    interp_fail(t, s->loc, "loop from %lld with %lld iterations overflows 64 bits", (long long)*lo,
                (long long)*n);
    return false;
  }
  return true;
}

static void reduce_level(thr *t, const cst *s, int k) {
  if (k == s->nvars) {
    interp_exec(t, s->inner);
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
    tmp.shape[d] = interp_ev(t, s->idx[d]).i;
    if (t->err) return;
    if (tmp.shape[d] < 0) {
      interp_fail(t, s->loc, "allocation `%s`: dim %d is negative (%lld)", decl->name, d,
                  (long long)tmp.shape[d]);
      return;
    }
    if (__builtin_mul_overflow(tmp.count, tmp.shape[d], &tmp.count) ||
        tmp.count > ((int64_t)1 << 34) / (int64_t)elem_size(tmp.dt)) {
      interp_fail(t, s->loc, "allocation `%s` is too large (over 16 GiB)", decl->name);
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
      interp_put_ints(&sb, tmp.shape, tmp.ndim);
      base_strbuf_append(&sb, " here but ");
      interp_put_ints(&sb, b->shape, b->ndim);
      interp_fail(t, s->loc, "%s allocation `%s` has shape %s where the block first allocated it",
                  ir_scope_name(s->scope), decl->name, sb.data);
      base_strbuf_free(&sb);
      return;
    }
    interp_free_rbuf(b);
    *slot = b = NULL;
  }
  if (!b) {
    b = base_malloc(sizeof *b);
    *b = tmp;
    b->data = base_calloc(bytes ? bytes : 1, 1);
    *slot = b;
  } else if (s->scope == RX_SCOPE_LOCAL) {
    memset(b->data, 0, bytes);
  }
  t->bufs[s->buf] = b;
}

/* The 16 bytes from element off of b: aligned to 16 bytes and inside the last dimension. */
static bool row16(thr *t, const rbuf *b, int64_t off, rx_loc loc, const char *what) {
  int64_t n = 128 / ir_dtype_bits(b->dt), last = b->ndim ? b->shape[b->ndim - 1] : 1;
  if (off % n == 0 && off % last + n <= last) return true;
  interp_fail(t, loc,
              "%s `%s`: the 16 bytes from element %lld must be 16-byte aligned and inside the last "
              "dimension (of %lld elements)",
              what, b->decl->name, (long long)off, (long long)last);
  return false;
}

/* async_copy (ir.h): the source is read now (zeros where the condition is false); the bytes
 * land in the destination at an async_wait. */
static void exec_acopy(thr *t, const cst *s) {
  rbuf *d, *b;
  int64_t doff = interp_offset_of(t, s->buf, s->idx, s->nidx, &s->loc, "async_copy to", &d);
  if (doff < 0 || !row16(t, d, doff, s->loc, "async_copy to")) return;
  acopy c = {.dst = d, .off = doff, .group = t->groups};
  bool on = !s->cond || interp_ev(t, s->cond).i;
  if (t->err) return;
  if (on) {
    const cx *e = s->value;
    int64_t off = interp_offset_of(t, e->buf, e->idx, e->nidx, &e->loc, "async_copy from", &b);
    if (off < 0 || !row16(t, b, off, s->loc, "async_copy from")) return;
    memcpy(c.bytes, (const char *)b->data + off * (ir_dtype_bits(b->dt) / 8), 16);
  }
  RX_VEC_PUSH(&t->inflight, c);
}

/* The thread's copies of the groups before `group` land (async_wait). */
static void land(thr *t, int group) {
  size_t k = 0;
  for (size_t i = 0; i < t->inflight.len; i++) {
    acopy *c = &t->inflight.data[i];
    if (c->group < group)
      memcpy((char *)c->dst->data + c->off * (ir_dtype_bits(c->dst->dt) / 8), c->bytes, 16);
    else
      t->inflight.data[k++] = *c;
  }
  t->inflight.len = k;
}

/* The first element of fragment k (C, A, B of mma; ldmatrix's: 0) of `elems` elements into
 * t->moff[k]: row idx[k] of the indexed form (ir.h), else element 0; false where it does not lie
 * inside f. */
static bool frag_rows(thr *t, const cst *s, const rbuf *f, int k, int64_t elems) {
  int64_t off = k < s->nidx ? interp_ev(t, s->idx[k]).i * elems : 0;
  t->moff[k] = off;
  return off >= 0 && off + elems <= f->count;
}

/* ldmatrix (ir.h): the lane's row address, then the subgroup's rendezvous (run_ldsm). */
static void exec_ldsm(thr *t, const cst *s) {
  if (!t->fib || t->rs->sgsize != 32) {
    interp_fail(
        t, s->loc,
        "ldmatrix needs the 32 lanes of a subgroup together (this run has subgroups of %d%s)",
        t->rs->sgsize, t->fib ? "" : " and a thread alone in its block");
    return;
  }
  rbuf *f = t->bufs[s->buf];
  if (!f || ir_dtype_bits(f->dt) != 16 || !frag_rows(t, s, f, 0, 2 * s->count)) {
    interp_fail(t, s->loc, "ldmatrix x%d: a fragment of %d 16-bit elements expected", s->count,
                2 * s->count);
    return;
  }
  t->lm_buf = NULL;
  if (t->lin % 32 < 8 * s->count) { /* lanes 8j..8j+7 give the rows of matrix j */
    const cx *e = s->value;
    rbuf *b;
    int64_t off = interp_offset_of(t, e->buf, e->idx, e->nidx, &e->loc, "ldmatrix from", &b);
    if (off < 0 || !row16(t, b, off, s->loc, "ldmatrix from")) return;
    t->lm_buf = b;
    t->lm_off = off;
  }
  t->state = T_MMA;
  t->mma = s;
  interp_yield_to_scheduler(t);
}

void interp_fail_steps(thr *t, const cst *s) {
  interp_fail(t, s->loc, "step limit of %lld statements exceeded", (long long)t->rs->max_steps);
}

void interp_exec_any(thr *t, const cst *s) {
  switch (s->kind) {
  case C_SEQ:
    for (int i = 0; i < s->n && !t->err; i++) interp_exec(t, s->body[i]);
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
        interp_exec(t, s->inner);
      else
        interp_run_block(t, s->blk);
    }
    t->slots[slot] = saved;
    return;
  }
  case C_TFOR:
    exec_tfor(t, s);
    return;
  case C_REDUCE:
    interp_exec(t, s->init);
    if (!t->err) reduce_level(t, s, 0);
    return;
  case C_STORE: {
    rbuf *b;
    int64_t off = interp_offset_of(t, s->buf, s->idx, s->nidx, &s->loc, "store to", &b);
    if (off < 0) return;
    val v = interp_ev(t, s->value);
    if (t->err) return;
    wr(b->dt, b->data, off, v);
    return;
  }
  case C_LET: {
    val v = interp_ev(t, s->value);
    t->slots[s->slot] = v;
    return;
  }
  case C_ALLOC:
    exec_alloc(t, s);
    return;
  case C_IF: {
    int64_t c = interp_ev(t, s->value).i;
    if (t->err) return;
    if (c)
      interp_exec(t, s->inner);
    else if (s->els)
      interp_exec(t, s->els);
    return;
  }
  case C_BARRIER:
    if (!t->fib) return; /* alone in its block */
    t->state = T_BARRIER;
    t->bar = s;
    interp_yield_to_scheduler(t);
    return;
  case C_MMA:
    if (!t->fib || t->rs->sgsize != 32) {
      interp_fail(
          t, s->loc,
          "mma m16n8k16 needs the 32 lanes of a subgroup together (this run has subgroups of "
          "%d%s)",
          t->rs->sgsize, t->fib ? "" : " and a thread alone in its block");
      return;
    }
    if (!t->bufs[s->buf] || !t->bufs[s->buf2] || !t->bufs[s->buf3] ||
        !frag_rows(t, s, t->bufs[s->buf], 0, 4) || !frag_rows(t, s, t->bufs[s->buf2], 1, 8) ||
        !frag_rows(t, s, t->bufs[s->buf3], 2, 4)) {
      interp_fail(t, s->loc, "mma m16n8k16: fragments of 4, 8 and 4 elements expected");
      return;
    }
    t->state = T_MMA;
    t->mma = s;
    interp_yield_to_scheduler(t);
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
  case C_WGMMA:
    exec_wgmma(t, s);
    return;
  }
}

/* ---- specialized executors: each does what interp_exec_any does for the statements
 * interp_exec_select gives it ---- */
static void exec_seq(thr *t, const cst *s) {
  for (int i = 0; i < s->n && !t->err; i++) interp_exec(t, s->body[i]);
}

static void exec_for(thr *t, const cst *s) {
  int64_t lo, n;
  if (!loop_range(t, s, 0, &lo, &n)) return;
  int slot = s->slots[0];
  val saved = t->slots[slot];
  const cst *inner = s->inner;
  for (int64_t i = 0; i < n && !t->err; i++) {
    t->slots[slot].i = lo + i;
    interp_exec(t, inner);
  }
  t->slots[slot] = saved;
}

/* Stores of N indices (0: s->nidx); f32 written without wr's switch. */
#define STORE_FN(NAME, N)                                                                          \
  static void NAME(thr *t, const cst *s) {                                                         \
    rbuf *b;                                                                                       \
    int64_t off =                                                                                  \
        interp_offset_of(t, s->buf, s->idx, (N) ? (N) : s->nidx, &s->loc, "store to", &b);         \
    if (off < 0) return;                                                                           \
    val v = interp_ev(t, s->value);                                                                \
    if (t->err) return;                                                                            \
    if (b->dt == RX_DTYPE_F32)                                                                     \
      memcpy((char *)b->data + off * 4, &v.f, 4);                                                  \
    else                                                                                           \
      wr(b->dt, b->data, off, v);                                                                  \
  }
STORE_FN(exec_store1, 1)
STORE_FN(exec_store2, 2)
STORE_FN(exec_storen, 0)
#undef STORE_FN

static void exec_tfor(thr *t, const cst *s) {
  int64_t lo, n;
  if (!loop_range(t, s, 0, &lo, &n)) return;
  if (n > t->b->dims[s->axis]) {
    interp_fail(t, s->loc, "%s loop extent %lld exceeds the block size %lld along that axis",
                ir_loop_kind_name((rx_loop_kind)(RX_LOOP_THREAD_X + s->axis)), (long long)n,
                (long long)t->b->dims[s->axis]);
    return;
  }
  int64_t i = t->tid[s->axis];
  if (i < n) {
    int slot = s->slots[0];
    val saved = t->slots[slot];
    t->slots[slot].i = lo + i;
    interp_exec(t, s->inner);
    t->slots[slot] = saved;
  }
}

static void exec_reduce(thr *t, const cst *s) {
  interp_exec(t, s->init);
  if (!t->err) reduce_level(t, s, 0);
}

static void exec_let(thr *t, const cst *s) { t->slots[s->slot] = interp_ev(t, s->value); }

static void exec_if(thr *t, const cst *s) {
  int64_t c = interp_ev(t, s->value).i;
  if (t->err) return;
  if (c)
    interp_exec(t, s->inner);
  else if (s->els)
    interp_exec(t, s->els);
}

void interp_exec_select(cst *s) {
  switch (s->kind) {
  case C_SEQ:
    s->fn = exec_seq;
    return;
  case C_FOR:
    s->fn = exec_for;
    return;
  case C_STORE:
    s->fn = s->nidx == 1 ? exec_store1 : s->nidx == 2 ? exec_store2 : exec_storen;
    return;
  case C_TFOR:
    s->fn = exec_tfor;
    return;
  case C_REDUCE:
    s->fn = exec_reduce;
    return;
  case C_LET:
    s->fn = exec_let;
    return;
  case C_IF:
    s->fn = exec_if;
    return;
  default:
    s->fn = interp_exec_any;
    return;
  }
}

/* Operand `what` of a wgmma (ir.h, RX_STMT_WGMMA): the flat offset of its address (row r0 * 64
 * + column c0, checked: r0 % 8 == 0, c0 % 16 == 0 (MN-major B: c0 == 0), its rows rows within the
 * buffer), or -1. */
static int64_t wgmma_operand(thr *t, const cst *s, const cx *ld, int rows, bool mn,
                             const char *what, rbuf **out) {
  int64_t off = interp_offset_of(t, ld->buf, ld->idx, ld->nidx, &s->loc, "wgmma read of", out);
  if (off < 0) return -1;
  if (off % 64 % (mn ? 64 : 16) || off / 64 % 8 ||
      off / 64 * 64 + (int64_t)rows * 64 > (*out)->count) {
    interp_fail(t, s->loc,
                "wgmma: %s's address is row %lld, column %lld of its rows of 64; rows must start "
                "at a multiple of 8 and columns at %s, with %d rows in the buffer",
                what, (long long)(off / 64), (long long)(off % 64),
                mn ? "0 (B MN-major)" : "a multiple of 16", rows);
    return -1;
  }
  return off;
}

/* Element (r, k) of a wgmma operand at flat offset o of its swizzled rows of 64 (ir.h): r its row
 * in M or N, k in 0..15; MN-major (B with trans): row k, column r. */
static double wgmma_elem(const rbuf *b, int64_t o, bool mn, int64_t r, int64_t k) {
  int64_t row = o / 64 + (mn ? k : r), col = o % 64 + (mn ? r : k);
  return rd(b->dt, b->data, row * 64 + ((col / 8) ^ (row % 8)) * 8 + col % 8).f;
}

/* wgmma m64nNk16 (ir.h, RX_STMT_WGMMA) with A in shared memory for one thread of its warpgroup,
 * at once: its N / 2 accumulator elements, each a sum over the 16 k of A's and B's swizzled rows
 * (products and sums in double, rounded to f32 once). With A in registers, the thread's A and B
 * offsets, then the warp's rendezvous (run_wgmma_regs: a warp's rows of D need only its own
 * fragments of A). */
static void exec_wgmma(thr *t, const cst *s) {
  int n = s->count;
  if (t->b->n % 128) {
    interp_fail(t, s->loc, "wgmma needs warpgroups of 128 threads; the block has %d", t->b->n);
    return;
  }
  rbuf *a, *b, *acc = t->bufs[s->buf];
  bool regs = s->src->value->buf->scope == RX_SCOPE_LOCAL;
  int64_t ao = -1;
  if (regs) {
    ao = interp_offset_of(t, s->value->buf, s->value->idx, s->value->nidx, &s->loc, "wgmma read of",
                          &a);
    if (ao >= 0 && ao % 8) {
      interp_fail(t, s->loc, "wgmma: A in registers at element %lld, not a multiple of 8",
                  (long long)ao);
      return;
    }
  } else {
    ao = wgmma_operand(t, s, s->value, 64, false, "A", &a);
  }
  int64_t bo = ao < 0 ? -1 : wgmma_operand(t, s, s->cond, s->trans ? 16 : n, s->trans, "B", &b);
  if (bo < 0) return;
  if (!acc || acc->count < n / 2) {
    interp_fail(t, s->loc, "wgmma m64n%dk16: an accumulator of %d elements expected", n, n / 2);
    return;
  }
  if (regs) {
    if (!t->fib || t->rs->sgsize != 32) {
      interp_fail(t, s->loc,
                  "wgmma with A in registers needs the 32 lanes of a subgroup together (this run "
                  "has subgroups of %d)",
                  t->rs->sgsize);
      return;
    }
    t->moff[1] = ao;
    t->moff[2] = bo;
    t->lm_buf = b;
    t->state = T_MMA;
    t->mma = s;
    interp_yield_to_scheduler(t);
    return;
  }
  int l = t->lin % 128, w = l / 32, g = l % 32 / 4, q = l % 4;
  for (int i = 0; i < n / 2; i++) {
    int64_t m = 16 * w + g + 8 * (i / 2 % 2), col = 8 * (i / 4) + 2 * q + i % 2;
    double sum = rd(acc->dt, acc->data, i).f;
    for (int k = 0; k < 16; k++)
      sum += wgmma_elem(a, ao, false, m, k) * wgmma_elem(b, bo, s->trans, col, k);
    wr(acc->dt, acc->data, i, (val){.f = (float)sum});
  }
}

/* The wgmma with A in registers of the 32 lanes th[0..31] of a warp (exec_wgmma): gathers the
 * warp's 16 rows of A from the lanes' fragments (the layout of mma.m16n8k16's A, ir.h), then
 * each lane's N / 2 elements of D += A B^T (products and sums in double, rounded once). */
static void run_wgmma_regs(thr *th, const cst *s) {
  double A[16][16];
  for (int l = 0; l < 32; l++) {
    const rbuf *a = th[l].bufs[s->value->buf];
    int g = l / 4, q = l % 4;
    for (int j = 0; j < 8; j++)
      A[g + 8 * (j / 2 % 2)][2 * q + j % 2 + 8 * (j / 4)] = rd(a->dt, a->data, th[l].moff[1] + j).f;
  }
  for (int l = 0; l < 32; l++) {
    const rbuf *acc = th[l].bufs[s->buf], *b = th[l].lm_buf;
    int g = l / 4, q = l % 4;
    for (int i = 0; i < s->count / 2; i++) {
      int r = g + 8 * (i / 2 % 2), col = 8 * (i / 4) + 2 * q + i % 2;
      double sum = rd(acc->dt, acc->data, i).f;
      for (int k = 0; k < 16; k++) sum += A[r][k] * wgmma_elem(b, th[l].moff[2], s->trans, col, k);
      wr(acc->dt, acc->data, i, (val){.f = (float)sum});
    }
  }
}

/* A lane at `frag OP` (ir.h, RX_STMT_FRAG): evaluates its operands, then waits for its subgroup
 * (run_frag). */
static void exec_frag(thr *t, const cst *s) {
  const char *op = ir_frag_op_name(s->fop);
  if (!t->fib) {
    interp_fail(t, s->loc,
                "frag %s needs the lanes of a subgroup together (a thread alone in its block)", op);
    return;
  }
  int need[3] = {s->buf, s->fop == RX_FRAG_OP_MMA ? s->buf2 : s->buf,
                 s->fop == RX_FRAG_OP_MMA ? s->buf3 : s->buf};
  for (int i = 0; i < 3; i++)
    if (!t->bufs[need[i]]) {
      interp_fail(t, s->loc, "frag %s of a fragment that is not allocated here", op);
      return;
    }
  t->foff = t->fstride = 0;
  t->fval.i = 0; /* compared across lanes whole (run_frag) */
  if (s->fop == RX_FRAG_OP_FILL) {
    val v = interp_ev(t, s->value);
    if (ir_dtype_is_int(t->bufs[s->buf]->dt))
      t->fval.i = v.i;
    else
      t->fval.f = v.f; /* the high bits stay 0 */
  }
  if (s->fop == RX_FRAG_OP_LOAD || s->fop == RX_FRAG_OP_STORE) {
    rbuf *b;
    t->foff = interp_offset_of(t, s->buf4, s->idx, s->nidx, &s->loc,
                               s->fop == RX_FRAG_OP_LOAD ? "frag load from" : "frag store to", &b);
    t->fstride = interp_ev(t, s->value).i;
  }
  if (t->err) return;
  t->state = T_MMA;
  t->mma = s;
  interp_yield_to_scheduler(t);
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
        base_strbuf_printf(msg,
                           "frag %s: element (%lld, %lld) of the fragment is element %lld of `%s`, "
                           "which has %lld (offset %lld, stride %lld%s)",
                           ir_frag_op_name(s->fop), (long long)r, (long long)c, (long long)o,
                           mem->decl->name, (long long)mem->count, (long long)off,
                           (long long)stride, s->col_major ? ", col_major" : "");
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
  bool ints = ir_dtype_is_int(c->dt), aints = ir_dtype_is_int(a->dt);
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
  const char *op = ir_frag_op_name(s->fop);
  if (n != sgsize) {
    base_strbuf_printf(&msg, "frag %s needs whole subgroups of %d lanes; the block's last has %d",
                       op, sgsize, n);
    return msg.data;
  }
  for (int l = 1; l < n; l++)
    if (th[l].foff != th[0].foff || th[l].fstride != th[0].fstride ||
        th[l].fval.i != th[0].fval.i) {
      base_strbuf_printf(&msg,
                         "frag %s: the operands differ across the subgroup (lane %d: offset %lld, "
                         "stride %lld; lane 0: offset %lld, stride %lld); they must be uniform",
                         op, l, (long long)th[l].foff, (long long)th[l].fstride,
                         (long long)th[0].foff, (long long)th[0].fstride);
      return msg.data;
    }
  const rbuf *f = th[0].bufs[s->buf];
  int64_t cnt = f->shape[0] * f->shape[1];
  val *res = base_calloc((size_t)cnt, sizeof *res);
  int64_t *offs = base_calloc((size_t)cnt, sizeof *offs);
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
void interp_yield_to_scheduler(thr *t) { interp_fiber_yield(t->fib); }

static void thread_main(void *arg) {
  thr *t = arg;
  interp_exec(t, t->b->info->body);
  t->state = T_DONE;
}

static void put_thread_state(rx_strbuf *sb, const thr *t) {
  switch (t->state) {
  case T_DONE:
    base_strbuf_append(sb, "has finished");
    break;
  case T_BARRIER:
    base_strbuf_append(sb, "waits at the barrier");
    interp_put_loc(sb, t->bar->loc);
    break;
  case T_SUBGROUP:
    base_strbuf_printf(sb, "waits at %s", ir_intrinsic_name((rx_intrinsic)t->sg->sub));
    interp_put_loc(sb, t->sg->loc);
    break;
  case T_MMA:
    base_strbuf_append(sb, t->mma->kind == C_FRAG ? "waits at frag " : "waits at mma");
    if (t->mma->kind == C_FRAG) base_strbuf_append(sb, ir_frag_op_name(t->mma->fop));
    interp_put_loc(sb, t->mma->loc);
    break;
  default:
    base_strbuf_append(sb, "is running");
    break;
  }
}

static rx_status divergence(run *rs, blk *b, const char *what, const thr *x, const thr *y) {
  rx_strbuf sb = {0};
  base_strbuf_printf(&sb, "%s divergence: thread (%lld, %lld, %lld) ", what, (long long)x->tid[0],
                     (long long)x->tid[1], (long long)x->tid[2]);
  put_thread_state(&sb, x);
  base_strbuf_printf(&sb, " but thread (%lld, %lld, %lld) ", (long long)y->tid[0],
                     (long long)y->tid[1], (long long)y->tid[2]);
  put_thread_state(&sb, y);
  rx_loc none = {0};
  rx_status s = interp_make_err(rs, b, NULL, none, sb.data);
  base_strbuf_free(&sb);
  return s;
}

/* Runs the threads of b as fibers until all finish; returns the first error. */
static rx_status schedule(run *rs, blk *b) {
  if (rs->nfibers < b->n) {
    rs->fibers = base_realloc(rs->fibers, sizeof *rs->fibers * (size_t)b->n);
    for (; rs->nfibers < b->n; rs->nfibers++) {
      rs->fibers[rs->nfibers] = interp_fiber_new(rs->stack_size);
      if (!rs->fibers[rs->nfibers])
        return base_status_make(RX_ERR_OUT_OF_MEMORY,
                                "tensor_fn `%s`: cannot map a stack for thread %d of the block",
                                rs->fname, rs->nfibers);
    }
  }
  for (int i = 0; i < b->n; i++) {
    thr *t = &b->th[i];
    t->fib = rs->fibers[i];
    t->state = T_RUN;
    interp_fiber_start(t->fib, thread_main, t);
  }
  int sg = rs->sgsize;
  for (;;) {
    for (int i = 0; i < b->n; i++) {
      thr *t = &b->th[i];
      if (t->state != T_RUN) continue;
      interp_fiber_resume(t->fib);
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
          rx_status st = interp_make_err(rs, b, NULL, w->mma->loc, msg);
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
          return interp_make_err(
              rs, b, NULL, none,
              "mma and ldmatrix need 32 lanes; the block's last subgroup has fewer");
        }
        if (w->mma->kind == C_LDSM)
          run_ldsm(&b->th[lo], w->mma);
        else if (w->mma->kind == C_WGMMA)
          run_wgmma_regs(&b->th[lo], w->mma);
        else
          run_mma(&b->th[lo], w->mma);
        for (int i = lo; i < hi; i++) b->th[i].state = T_RUN;
        released = true;
        continue;
      }
      const cx *op = w->sg;
      if (op->sub == RX_INTRIN_SHUFFLE_XOR) { /* lane l gets the value of lane l ^ mask */
        for (int i = lo; i < hi; i++) {
          int64_t src = lo + ((i - lo) ^ b->th[i].sgm);
          if (b->th[i].sgm < 0 || b->th[i].sgm >= sg || src >= hi) {
            char msg[160];
            snprintf(msg, sizeof msg,
                     "shuffle_xor: lane %d's mask %lld reaches no lane of its subgroup of %d",
                     i - lo, (long long)b->th[i].sgm, hi - lo);
            return interp_make_err(rs, b, &b->th[i], op->loc, msg);
          }
        }
        for (int i = lo; i < hi; i++) b->th[i].sgr = b->th[lo + ((i - lo) ^ b->th[i].sgm)].sgv;
        for (int i = lo; i < hi; i++) b->th[i].state = T_RUN;
        released = true;
        continue;
      }
      val acc = b->th[lo].sgv;
      for (int i = lo + 1; i < hi; i++)
        acc = interp_sg_combine((rx_intrinsic)op->sub, (rx_dtype)op->dt, acc, b->th[i].sgv);
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
    for (int a = 0; a < nallocs; a++) interp_free_rbuf(b->th[i].locals[a]);
    free(b->th[i].inflight.data); /* copies never waited for: nobody reads them */
  }
  for (int a = 0; a < nallocs; a++) interp_free_rbuf(b->inst[a]);
  if (b->n > 0) {
    free(b->th[0].slots);
    free(b->th[0].bufs);
    free(b->th[0].locals);
  }
  free(b->th);
  free(b->inst);
}

void interp_run_block(thr *p, const blkinfo *bi) {
  run *rs = p->rs;
  blk b = {.info = bi, .parent = p, .dims = {1, 1, 1}};
  for (int j = 0; j < bi->nt; j++) {
    int64_t e = interp_ev(p, bi->exts[j]).i;
    if (p->err) return;
    if (e > b.dims[bi->axes[j]]) b.dims[bi->axes[j]] = e;
  }
  int64_t total = 1;
  for (int k = 0; k < 3; k++) {
    if (b.dims[k] > rs->max_threads || (total *= b.dims[k]) > rs->max_threads) {
      interp_fail(p, bi->body->loc,
                  "block of %lld x %lld x %lld threads exceeds the limit of %d threads per block",
                  (long long)b.dims[0], (long long)b.dims[1], (long long)b.dims[2],
                  rs->max_threads);
      return;
    }
  }
  b.n = (int)total;
  b.th = base_calloc((size_t)b.n, sizeof *b.th);
  b.inst = base_calloc((size_t)rs->nallocs + 1, sizeof *b.inst);
  val *slots = base_malloc(sizeof *slots * (size_t)b.n * ((size_t)rs->nslots + 1));
  rbuf **bufs = base_malloc(sizeof *bufs * (size_t)b.n * ((size_t)rs->nbufs + 1));
  rbuf **locals = base_calloc((size_t)b.n * ((size_t)rs->nallocs + 1), sizeof *locals);
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
      interp_exec(&b.th[i], bi->body);
      p->err = b.th[i].err;
    }
  } else {
    p->err = schedule(rs, &b);
  }
  free_block(&b, rs->nallocs);
}
