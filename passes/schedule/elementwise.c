/* passes/schedule/elementwise.c: the ELEMENTWISE rule (an injective nest: fused, split, bound,
 * vectorized).
 *
 *   ELEMENTWISE    the body is one nest of serial loops `for i0.., i1.. { LET... STORE... }`
 *                  whose stores index exactly a permutation of the loop variables, and whose
 *                  loads of stored buffers use the same indices as the store. Loops are
 *                  reordered to follow the store (coalesced stores), fused, split by the block
 *                  size (256 or the target's limit), bound to blockIdx.x/threadIdx.x; the tail
 *                  is guarded unless the analyzer proves the total divisible. Vectorized by
 *                  the target's vector_bytes over the widest element (16 bytes: 8 f16 or 4 f32
 *                  lanes; halved until it divides) when the innermost extent is provably
 *                  divisible and every access that uses the innermost variable has it as its
 *                  last index; the printers then load and store 16 bytes per thread
 *                  (passes/schedule.h, "VECTORIZED LOOPS"). Scalar otherwise. */
#include "rules.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------------------------
 * ELEMENTWISE
 * ------------------------------------------------------------------------------------------ */
/* The most lanes of a vectorized loop (passes/schedule.h): 16 one-byte elements fill 16 bytes. */
#define MAX_LANES 16

typedef struct ew_info {
  nest nt;
  int perm[MAXN]; /* store index k is loop var perm[k] (of the first store) */
  bool same_perm;
} ew_info;

typedef struct store_ref {
  const rx_stmt *st;
} store_ref;

static bool ew_match(const rx_tensor_fn *f, ew_info *w) {
  if (sched_seq_len(f->body) != 1) return false;
  sched_get_nest(sched_seq_at(f->body, 0), &w->nt);
  nest *nt = &w->nt;
  if (nt->n == 0) return false;
  const rx_stmt *b = nt->body;
  int nst = 0;
  w->same_perm = true;
  for (int i = 0; i < sched_seq_len(b); i++) {
    const rx_stmt *st = sched_seq_at(b, i);
    if (st->kind == RX_STMT_LET) continue;
    if (st->kind != RX_STMT_STORE || st->nidx != nt->n) return false;
    int perm[MAXN];
    bool seen[MAXN] = {0};
    for (int k = 0; k < st->nidx; k++) {
      int which = -1;
      for (int v = 0; v < nt->n; v++)
        if (sched_sym_is(st->idx[k], nt->vars[v])) which = v;
      if (which < 0 || seen[which]) return false;
      seen[which] = true;
      perm[k] = which;
    }
    if (nst == 0)
      memcpy(w->perm, perm, sizeof perm);
    else if (memcmp(w->perm, perm, sizeof(int) * (size_t)nt->n) != 0)
      w->same_perm = false;
    nst++;
  }
  if (nst == 0) return false;
  /* loads of stored buffers must read the point being written */
  for (int i = 0; i < sched_seq_len(b); i++) {
    const rx_stmt *st = sched_seq_at(b, i);
    if (st->kind != RX_STMT_STORE) continue;
    for (int j = 0; j < sched_seq_len(b); j++) {
      const rx_stmt *u = sched_seq_at(b, j);
      /* every load of st->buf anywhere in the body */
      struct chk {
        const rx_stmt *st;
      } c = {st};
      (void)c;
      if (!sched_tx_loads(u->value, st->buf)) continue;
      /* check each load of the buffer has the same indices */
      const rx_stmt *target = st;
      bool ok = true;
      /* small recursive lambda substitute */
      const rx_tx *stack[EXPR_STACK];
      int sp = 0;
      stack[sp++] = u->value;
      while (sp > 0 && ok) {
        const rx_tx *e = stack[--sp];
        if (!e) continue;
        if (e->kind == RX_TX_LOAD && e->buf == target->buf &&
            !sched_same_idx(e->idx, e->nidx, target->idx, target->nidx))
          ok = false;
        if (sp + 3 + e->nidx >= EXPR_STACK) return false;
        for (int k = 0; k < e->nidx; k++) stack[sp++] = e->idx[k];
        stack[sp++] = e->a;
        stack[sp++] = e->b;
        stack[sp++] = e->c;
      }
      if (!ok) return false;
    }
  }
  return true;
}

typedef struct vec_chk {
  const rx_expr *v;
} vec_chk;
static bool vec_load_ok(const rx_tx *e, void *ud) {
  const rx_expr *v = ((vec_chk *)ud)->v;
  for (int k = 0; k < e->nidx; k++) {
    bool last = k == e->nidx - 1;
    if (last) {
      if (sched_tx_uses(e->idx[k], v) && !sched_sym_is(e->idx[k], v)) return false;
    } else if (sched_tx_uses(e->idx[k], v)) {
      return false;
    }
  }
  return true;
}

static rx_stmt *ew_schedule(rx_sctx *s, ew_info *w) {
  nest *nt = &w->nt;
  int n = nt->n;
  const rx_expr *ov[MAXN], *olo[MAXN], *oe[MAXN];
  for (int k = 0; k < n; k++) {
    int v = w->same_perm ? w->perm[k] : k; /* reorder: loops follow the store's index order */
    ov[k] = nt->vars[v];
    olo[k] = nt->lo[v];
    oe[k] = nt->ext[v];
  }
  const rx_stmt *body = nt->body;
  /* vector width */
  int V = 1;
  {
    int bits = 0;
    bool ok = true;
    vec_chk vc = {ov[n - 1]};
    for (int i = 0; i < sched_seq_len(body); i++) {
      const rx_stmt *st = sched_seq_at(body, i);
      int b = sched_max_load_bits(st->value);
      if (st->kind == RX_STMT_STORE) {
        if (ir_dtype_bits(st->buf->dtype) > b) b = ir_dtype_bits(st->buf->dtype);
        if (!sched_sym_is(st->idx[st->nidx - 1], ov[n - 1])) ok = false;
      }
      if (b > bits) bits = b;
      if (!sched_all_loads(st->value, vec_load_ok, &vc)) ok = false;
    }
    if (ok && bits > 0) {
      /* lanes of the widest element in one vector access: 16 bytes are 8 f16 or 4 f32 lanes
       * (passes/schedule.h, "VECTORIZED LOOPS"); narrower elements are then moved 8 bytes or
       * fewer at a time */
      V = s->t->vector_bytes * 8 / bits;
      if (V > MAX_LANES) V = MAX_LANES;
      if (V < 1) V = 1;
      while (V > 1) {
        int64_t d = sym_analyzer_divisor(s->an, oe[n - 1]);
        if (d != 0 && d % V == 0) break;
        V /= 2;
      }
    }
  }
  int B = sched_block_threads(s, BLOCK_THREADS);
  const rx_expr *bx = sched_fresh_var(s, "bx"), *tx = sched_fresh_var(s, "tx");
  const rx_expr *lane = V > 1 ? sched_fresh_var(s, "vec") : NULL;
  const rx_expr *ext2[MAXN];
  for (int k = 0; k < n; k++) ext2[k] = oe[k];
  if (V > 1)
    ext2[n - 1] =
        sym_analyzer_simplify(s->an, sym_expr_floordiv(s->cx, oe[n - 1], sx_const(s->cx, V)));
  const rx_expr *g = sx_add(s->cx, sx_mul_c(s->cx, bx, B), tx);
  const rx_expr *repl[MAXN];
  const rx_expr *total = sched_fuse(s, ext2, n, g, repl);
  total = sym_analyzer_simplify(s->an, total);
  const rx_expr *nblocks;
  const rx_expr *guard = sched_split(s, total, B, bx, tx, &nblocks);
  size_t mk = sym_analyzer_mark(s->an);
  sym_analyzer_bind_range(s->an, bx, sx_const(s->cx, 0), nblocks);
  sym_analyzer_bind_range(s->an, tx, sx_const(s->cx, 0), sx_const(s->cx, B));
  if (guard) sym_analyzer_assume(s->an, guard);
  for (int k = 0; k < n; k++) {
    if (V > 1 && k == n - 1) repl[k] = sx_add(s->cx, sx_mul_c(s->cx, repl[k], V), lane);
    repl[k] = sym_analyzer_simplify(s->an, sx_add(s->cx, olo[k], repl[k]));
  }
  sym_analyzer_reset(s->an, mk);
  rx_rewrite rw = {.s = s, .vars = ov, .repl = repl, .n = n};
  rx_stmt *inner = sched_rewrite_stmt(&rw, body);
  if (V > 1) inner = sched_for(s, lane, sx_const(s->cx, V), RX_LOOP_VECTORIZE, inner);
  inner = sched_guard(s, guard, inner);
  return sched_kernel1(s, bx, nblocks, tx, B, inner);
}

bool sched_elementwise(rx_sctx *s, const rx_tensor_fn *f, sched_out *o) {
  ew_info ew;
  if (!ew_match(f, &ew)) return false;
  o->body = ew_schedule(s, &ew);
  rx_sched_variant v = {NULL, RX_SCHED_ELEMENTWISE, NULL};
  sched_set_variants(o->m, o->res, &v, 1);
  return true;
}
