/* passes/schedule/gemv_packed.c: wide loads of packed weights for gemv_rows (gemv.c).
 *
 * A quantized weight (ops/quant.c) reaches the matmul rule as Q, an expression over loads of
 * bytes: relaxc's int4 reads byte k // 2 of its row (two weights a byte), int8 byte k. Read as
 * they are, each lane of a gemv step would load its byte on its own. Here such a load, one whose
 * index moves by one byte every E consecutive k (E = 1 or 2) from a step start that is a multiple
 * of the step, is staged instead: at each step of V = 16 E weights a lane first copies the
 * step's 16 bytes into registers with one vectorized loop (`pk[u] = w[j, base + u]`: a 128-bit
 * load, ld.global.nc.v4.u32 on NVIDIA), then computes its V weights from pk[v // E] (the nibbles,
 * the scale, the zero point) in registers. The GGUF block formats have no such load (a block's
 * quants sit after its f16 scale, at a byte offset that is no multiple of 16), or only some
 * (Q6_K's low quants): gemv_rows stages their rows through shared memory instead
 * (gemv_blocks.c). */
#include "matmul.h"

typedef struct finder {
  rx_sctx *s;
  const mm_info *mi;
  mm_packed *pk;
  bool bad;
} finder;

/* The index of load l along k as a symbolic expression, or NULL when it is not one. */
static const rx_expr *last_index(const rx_tx *l) {
  if (l->nidx == 0) return NULL; /* a 0-d buffer (a scalar index fused in, as take's) */
  const rx_tx *x = l->idx[l->nidx - 1];
  return x->kind == RX_TX_SYM ? x->sym : NULL;
}

/* E when load l's index moves by v // E from k = V t to k = V t + v (0 <= v < V), else 0. */
static int per_byte(rx_sctx *s, const rx_expr *f, const rx_expr *k, int V) {
  const rx_expr *t = sched_fresh_var(s, "t"), *v = sched_fresh_var(s, "v");
  size_t mk = sym_analyzer_mark(s->an);
  sym_analyzer_bind_range(s->an, t, sx_const(s->cx, 0), sx_const(s->cx, INT32_MAX));
  sym_analyzer_bind_range(s->an, v, sx_const(s->cx, 0), sx_const(s->cx, V));
  const rx_expr *at = sym_expr_add(s->cx, sym_expr_mul(s->cx, t, sx_const(s->cx, V)), v);
  const rx_expr *f0 = sym_expr_subst(
      s->cx, f, &k, (const rx_expr *const[]){sym_expr_mul(s->cx, t, sx_const(s->cx, V))}, 1);
  const rx_expr *f1 = sym_expr_subst(s->cx, f, &k, &at, 1);
  const rx_expr *d = sym_analyzer_simplify(s->an, sym_expr_sub(s->cx, f1, f0));
  int e = 0;
  for (int c = 1; c <= 2 && !e; c++)
    if (d == sym_analyzer_simplify(s->an, sym_expr_floordiv(s->cx, v, sx_const(s->cx, c)))) e = c;
  sym_analyzer_reset(s->an, mk);
  return e;
}

static bool find_load(const rx_tx *l, void *ud) {
  finder *fd = ud;
  const rx_expr *k = fd->mi->r.k;
  const rx_expr *f = last_index(l);
  bool uses = false;
  for (int i = 0; i + 1 < l->nidx; i++) uses |= sched_tx_uses(l->idx[i], k);
  if (uses || !f || !sym_expr_uses_var(f, k) || ir_dtype_bits(l->buf->dtype) != 8 ||
      !ir_dtype_is_int(l->buf->dtype))
    return true;
  int e = per_byte(fd->s, f, k, 4 * MM_PACKED_BYTES);
  if (!e) return true;
  mm_packed *pk = fd->pk;
  for (int i = 0; i < pk->n; i++) /* the same (two rows of one buffer are two: a gated pair) */
    if (mm_same_tx(pk->load[i], l)) return true;
  if (pk->n == MM_MAX_PACKED || (pk->n && pk->per_byte[0] != e)) {
    fd->bad = true;
    return true;
  }
  pk->load[pk->n] = l;
  pk->per_byte[pk->n++] = e;
  return true;
}

bool mm_packed_find(rx_sctx *s, const mm_info *mi, mm_packed *out) {
  *out = (mm_packed){0};
  finder fd = {s, mi, out, false};
  sched_all_loads(mi->q, find_load, &fd);
  for (int t = 0; t < mi->nx; t++)
    if (mi->x[t].q) sched_all_loads(mi->x[t].q, find_load, &fd);
  if (fd.bad || out->n == 0) {
    out->n = 0;
    return false;
  }
  out->lanes = MM_PACKED_BYTES * out->per_byte[0];
  int64_t d = sym_analyzer_divisor(s->an, mi->K);
  for (int i = 0; i < out->n; i++) /* the step of the real lane count keeps the form */
    if (d == 0 || d % out->lanes != 0 ||
        per_byte(s, last_index(out->load[i]), mi->r.k, out->lanes) != out->per_byte[i]) {
      out->n = 0;
      return false;
    }
  return true;
}

/* ---- staging ---- */
typedef struct swap {
  const mm_packed *pk;
  rx_buffer *const *bufs;
  const rx_tx *const *want; /* each packed load at the lane */
  const rx_expr *lane;
} swap;

/* Whether loads a and b read the same element (their symbolic indices equal once simplified). */
static bool same_element(rx_sctx *s, const rx_tx *a, const rx_tx *b) {
  if (a->buf != b->buf || a->nidx != b->nidx) return false;
  for (int i = 0; i < a->nidx; i++) {
    const rx_tx *x = a->idx[i], *y = b->idx[i];
    if (x->kind == RX_TX_SYM && y->kind == RX_TX_SYM) {
      if (sym_analyzer_simplify(s->an, x->sym) != sym_analyzer_simplify(s->an, y->sym))
        return false;
    } else if (!mm_same_tx(x, y)) {
      return false;
    }
  }
  return true;
}

static rx_tx *swap_load(rx_rewrite *rw, rx_tx *l) {
  const swap *sw = rw->ud;
  if (!last_index(l)) return l;
  for (int i = 0; i < sw->pk->n; i++)
    if (same_element(rw->s, l, sw->want[i])) {
      const rx_expr *u =
          sym_expr_floordiv(rw->s->cx, sw->lane, sx_const(rw->s->cx, sw->pk->per_byte[i]));
      return sched_load(rw->s, sw->bufs[i], &u, 1);
    }
  return l;
}

rx_stmt *mm_packed_stage(rx_sctx *s, const mm_info *mi, const mm_packed *pk, rx_buffer *const *bufs,
                         int bytes, const rx_expr *const *batch, const rx_expr *j,
                         const rx_expr *kb, const rx_expr *lane, int n, const rx_tx *const *qs,
                         rx_tx **out_qs) {
  rx_stmtvec st = {0};
  const rx_tx *want[MM_MAX_PACKED];
  const rx_expr *z = sx_const(s->cx, 0), *kv = sx_add(s->cx, kb, lane);
  for (int i = 0; i < pk->n; i++) {
    const rx_expr *u = sched_fresh_var(s, "u");
    const rx_expr *ku = sx_add(s->cx, kb, sym_expr_mul(s->cx, u, sx_const(s->cx, pk->per_byte[i])));
    rx_tx *ld = mm_operand_at(s, mi, batch, pk->load[i], z, j, ku);
    rx_stmt *cp = sched_store_e(s, bufs[i], &u, 1, ld);
    RX_VEC_PUSH(&st, sched_for(s, u, sx_const(s->cx, bytes), RX_LOOP_VECTORIZE, cp));
    want[i] = mm_operand_at(s, mi, batch, pk->load[i], z, j, kv);
  }
  swap sw = {pk, bufs, want, lane};
  rx_rewrite rw = {.s = s, .n = 0, .hook = swap_load, .ud = &sw};
  for (int q = 0; q < n; q++)
    out_qs[q] = sched_rewrite_tx(&rw, mm_operand_at(s, mi, batch, qs[q], z, j, kv));
  return sched_seq(s, &st);
}
