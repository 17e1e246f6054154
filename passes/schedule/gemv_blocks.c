/* passes/schedule/gemv_blocks.c: GGUF block rows staged in shared memory for gemv_rows (gemv.c).
 *
 * A GGUF block weight (ops/quant.c, gguf_element) reaches the matmul rule as Q over byte loads
 * w[row..., f(k)] whose index walks whole blocks: f(k + B) = f(k) + BB (B weights in BB bytes:
 * Q4_0's 32 in 18, Q4_K's 256 in 144) and 0 <= f(t B + v) - t BB < BB. A block's quants do not
 * start on a 16-byte boundary (its scales come first), so gemv_packed.c's 16-byte staging does
 * not apply, and read as they are each lane asks for its block's scale bytes for every weight
 * and its quant bytes one at a time, 18 bytes apart across the warp (test_moe_bytes measured
 * 19.8x the bytes for Q4_0, 40x for Q4_K). Here each k step's bytes of a group's rows are read
 * once: the group's lanes copy the contiguous bytes of its steps (and, folded, of its slots'
 * consecutive rows) into shared memory, consecutive lanes on consecutive units of up to 16 bytes
 * (the largest power of two dividing the row length and the staged span: 16-byte loads for
 * Q4_0 and Q4_K rows), between block barriers; the lanes then dequantize from shared memory
 * with the same expressions, rebased. */
#include "matmul.h"

typedef struct bfinder {
  rx_sctx *s;
  const mm_info *mi;
  mm_blocks *bk;
  const mm_packed *pk;
  bool bad, unpacked; /* unpacked: a load along k that pk does not stage */
} bfinder;

/* The last index of load l as a symbolic expression, or NULL. */
static const rx_expr *blast(const rx_tx *l) {
  if (l->nidx == 0) return NULL;
  const rx_tx *x = l->idx[l->nidx - 1];
  return x->kind == RX_TX_SYM ? x->sym : NULL;
}

/* Whether f walks blocks of B weights in BB bytes (*bb set): f(k + B) - f(k) = BB at every k
 * = t B + v, and 0 <= f(t B + v) - t BB < BB. */
static bool walks_blocks(rx_sctx *s, const rx_expr *f, const rx_expr *k, int B, int64_t *bb) {
  rx_expr_ctx *cx = s->cx;
  const rx_expr *t = sched_fresh_var(s, "t"), *v = sched_fresh_var(s, "v");
  size_t mk = sym_analyzer_mark(s->an);
  sym_analyzer_bind_range(s->an, t, sx_const(cx, 0), sx_const(cx, INT32_MAX));
  sym_analyzer_bind_range(s->an, v, sx_const(cx, 0), sx_const(cx, B));
  const rx_expr *at0 = sym_expr_add(cx, sym_expr_mul(cx, t, sx_const(cx, B)), v);
  const rx_expr *at1 = sym_expr_add(cx, at0, sx_const(cx, B));
  const rx_expr *f0 = sym_expr_subst(cx, f, &k, &at0, 1), *f1 = sym_expr_subst(cx, f, &k, &at1, 1);
  const rx_expr *d = sym_analyzer_simplify(s->an, sym_expr_sub(cx, f1, f0));
  bool ok = d->kind == RX_EXPR_CONST && d->value > 0;
  if (ok) {
    const rx_expr *o = sym_expr_sub(cx, f0, sym_expr_mul(cx, t, d));
    ok = sym_analyzer_prove(s->an, sym_expr_cmp(cx, RX_EXPR_GE, o, sx_const(cx, 0))) == RX_TRUE &&
         sym_analyzer_prove(s->an, sym_expr_cmp(cx, RX_EXPR_LT, o, d)) == RX_TRUE;
    *bb = d->value;
  }
  sym_analyzer_reset(s->an, mk);
  return ok;
}

/* Whether loads a and b read the same row (all indices but the last equal). */
static bool same_row(const rx_tx *a, const rx_tx *b) {
  if (a->buf != b->buf || a->nidx != b->nidx) return false;
  for (int i = 0; i + 1 < a->nidx; i++)
    if (!mm_same_tx(a->idx[i], b->idx[i])) return false;
  return true;
}

static bool find_row(const rx_tx *l, void *ud) {
  bfinder *fd = ud;
  const rx_expr *k = fd->mi->r.k, *f = blast(l);
  if (l->buf->scope != RX_SCOPE_GLOBAL) return true;
  bool uses = false;
  for (int i = 0; i + 1 < l->nidx; i++) uses |= sched_tx_uses(l->idx[i], k);
  if (!f || !sym_expr_uses_var(f, k)) {
    if (uses) fd->bad = true;
    return true;
  }
  if (uses || ir_dtype_bits(l->buf->dtype) != 8 || !ir_dtype_is_int(l->buf->dtype)) {
    fd->bad = true; /* a load along k that is no block byte: the form is not all blocks */
    return true;
  }
  bool packed = false;
  for (int i = 0; i < fd->pk->n; i++) packed |= mm_same_tx(fd->pk->load[i], l);
  fd->unpacked |= !packed;
  mm_blocks *bk = fd->bk;
  if (!bk->B) { /* the smallest GGUF block size the first row's index walks */
    static const int sizes[] = {32, 256};
    for (size_t i = 0; i < RX_ARRAY_LEN(sizes) && !bk->B; i++) {
      int64_t bb;
      if (walks_blocks(fd->s, f, k, sizes[i], &bb)) {
        bk->B = sizes[i];
        bk->BB = bb;
      }
    }
    if (!bk->B) {
      fd->bad = true;
      return true;
    }
  } else {
    int64_t bb;
    if (!walks_blocks(fd->s, f, k, bk->B, &bb) || bb != bk->BB) {
      fd->bad = true;
      return true;
    }
  }
  for (int i = 0; i < bk->n; i++)
    if (same_row(bk->load[i], l)) return true;
  if (bk->n == MM_MAX_BLOCK_ROWS) {
    fd->bad = true;
    return true;
  }
  bk->load[bk->n++] = l;
  return true;
}

bool mm_blocks_find(rx_sctx *s, const mm_info *mi, const mm_packed *pk, mm_blocks *out) {
  *out = (mm_blocks){0};
  bfinder fd = {s, mi, out, pk, false, false};
  sched_all_loads(mi->q, find_row, &fd);
  for (int t = 0; t < mi->nx; t++)
    if (mi->x[t].q) sched_all_loads(mi->x[t].q, find_row, &fd);
  int64_t d = sym_analyzer_divisor(s->an, mi->K);
  if (fd.bad || !fd.unpacked || out->n == 0 || d == 0 || d % out->B != 0) {
    *out = (mm_blocks){0};
    return false;
  }
  out->V = out->B < MM_BLOCK_LANES ? out->B : MM_BLOCK_LANES;
  return true;
}

/* The bytes of a row: K / B blocks. */
static const rx_expr *row_bytes(rx_sctx *s, const mm_info *mi, const mm_blocks *bk) {
  return sym_analyzer_simplify(
      s->an, sx_mul_c(s->cx, sym_expr_floordiv(s->cx, mi->K, sx_const(s->cx, bk->B)), bk->BB));
}

int mm_blocks_unit(rx_sctx *s, const mm_info *mi, const mm_blocks *bk, int64_t span) {
  int64_t d = sym_analyzer_divisor(s->an, row_bytes(s, mi, bk));
  int u = MM_PACKED_BYTES;
  while (u > 1 && ((d != 0 && d % u != 0) || span % u != 0)) u /= 2;
  return u;
}

/* Row i's load at column j with its last index replaced by byte `at`. */
static rx_tx *row_load(rx_sctx *s, const mm_info *mi, const mm_blocks_stage *st, int i,
                       const rx_expr *j, const rx_expr *at) {
  const rx_tx *l = mm_operand_at(s, mi, st->batch, st->bk->load[i], sx_const(s->cx, 0), j, st->k0);
  rx_tx **idx = ir_module_alloc(s->m, sizeof *idx * (size_t)l->nidx);
  for (int q = 0; q + 1 < l->nidx; q++) idx[q] = l->idx[q];
  rx_tx *x = ir_tx_sym(s->m, sym_analyzer_simplify(s->an, at), s->loc);
  x->dtype = l->idx[l->nidx - 1]->dtype;
  idx[l->nidx - 1] = x;
  return ir_tx_load(s->m, l->buf, idx, l->nidx, s->loc);
}

/* The first byte of the staged span in a row: block k0 / B. */
static const rx_expr *span_lo(rx_sctx *s, const mm_blocks_stage *st) {
  return sx_mul_c(s->cx, sym_expr_floordiv(s->cx, st->k0, sx_const(s->cx, st->bk->B)), st->bk->BB);
}

rx_stmt *mm_blocks_copy(rx_sctx *s, const mm_info *mi, const mm_blocks_stage *st) {
  rx_expr_ctx *cx = s->cx;
  const mm_blocks *bk = st->bk;
  int64_t all = (int64_t)st->F * st->span, units = all / st->unit;
  int64_t iters = (units + st->G - 1) / st->G;
  const rx_expr *lo = span_lo(s, st), *len = row_bytes(s, mi, bk);
  rx_stmtvec out = {0};
  for (int i = 0; i < bk->n; i++) {
    const rx_expr *it = sched_fresh_var(s, "cu"), *e = sched_fresh_var(s, "e");
    size_t mk = sym_analyzer_mark(s->an);
    sym_analyzer_bind_range(s->an, it, sx_const(cx, 0), sx_const(cx, iters));
    sym_analyzer_bind_range(s->an, e, sx_const(cx, 0), sx_const(cx, st->unit));
    const rx_expr *w = sx_add(cx, sx_mul_c(cx, it, st->G), st->lane);
    const rx_expr *at =
        sx_mul_c(cx, w, st->unit); /* the unit's first byte in the group's F spans */
    const rx_expr *slot = sym_expr_floordiv(cx, at, sx_const(cx, st->span));
    const rx_expr *off = sym_expr_floormod(cx, at, sx_const(cx, st->span));
    const rx_expr *j = sx_add(cx, st->col0, slot);
    const rx_expr *src = sx_add(cx, sx_add(cx, lo, off), e);
    const rx_expr *dst =
        sx_add(cx, sx_add(cx, st->base, sx_const(cx, (int64_t)i * all)), sx_add(cx, at, e));
    rx_stmt *cp = sched_store_e(s, st->sh, &dst, 1, row_load(s, mi, st, i, j, src));
    const rx_expr *g = sched_bound_guard(s, j, mi->M);
    /* the unit inside the row: K need not be a multiple of the span */
    g = sx_and_opt(
        cx, g,
        sym_expr_cmp(cx, RX_EXPR_LE, sx_add(cx, sx_add(cx, lo, off), sx_const(cx, st->unit)), len));
    if (iters * st->G > units) g = sx_and_opt(cx, g, sched_bound_guard(s, w, sx_const(cx, units)));
    rx_stmt *body = st->unit > 1 ? sched_for(s, e, sx_const(cx, st->unit), RX_LOOP_VECTORIZE, cp)
                                 : sched_subst1(s, cp, e, sx_const(cx, 0));
    body = sched_guard(s, g, body);
    sym_analyzer_reset(s->an, mk);
    RX_VEC_PUSH(&out, sched_for(s, it, sx_const(cx, iters), RX_LOOP_UNROLL, body));
  }
  return sched_seq(s, &out);
}

typedef struct bswap {
  rx_sctx *s;
  const mm_info *mi;
  const mm_blocks_stage *st;
  const rx_tx *want[MM_MAX_BLOCK_ROWS]; /* each row at the lane's column */
  const rx_expr *slot;
} bswap;

static rx_tx *swap_row(rx_rewrite *rw, rx_tx *l) {
  const bswap *sw = rw->ud;
  rx_sctx *s = sw->s;
  const rx_expr *f = blast(l);
  if (!f || l->buf->scope != RX_SCOPE_GLOBAL) return l;
  for (int i = 0; i < sw->st->bk->n; i++) {
    if (!same_row(l, sw->want[i])) continue;
    int64_t all = (int64_t)sw->st->F * sw->st->span;
    const rx_expr *at = sx_add(s->cx,
                               sx_add(s->cx, sw->st->base,
                                      sx_add(s->cx, sx_const(s->cx, (int64_t)i * all),
                                             sx_mul_c(s->cx, sw->slot, sw->st->span))),
                               sym_expr_sub(s->cx, f, span_lo(s, sw->st)));
    at = sym_analyzer_simplify(s->an, at);
    return sched_load(s, sw->st->sh, &at, 1);
  }
  return l;
}

rx_tx *mm_blocks_rewrite(rx_sctx *s, const mm_info *mi, const mm_blocks_stage *st, const rx_expr *j,
                         const rx_expr *slot, const rx_expr *k, const rx_tx *q) {
  bswap sw = {.s = s, .mi = mi, .st = st, .slot = slot};
  for (int i = 0; i < st->bk->n; i++)
    sw.want[i] = mm_operand_at(s, mi, st->batch, st->bk->load[i], sx_const(s->cx, 0), j, k);
  rx_rewrite rw = {.s = s, .n = 0, .hook = swap_row, .ud = &sw};
  return sched_rewrite_tx(&rw, q);
}
