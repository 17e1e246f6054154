/* passes/schedule/matmul_match.c: the form the matmul rule accepts (matmul.h: mm_info) and what
 * its schedules share: the output point's substitution, the epilogue, the vector width along k.
 *
 * Fusion leaves a matmul in the shape its members gave it: the matmul's own f32 accumulator
 * (`alloc acc1: f32[1] local`, its rounding `acc[0] = f16(acc1[0])`), the epilogue of the fused
 * elementwise members (bias, residual, the silu of the gate times the up projection) at the
 * output point, a prologue inlined into the operands (a cast, a norm's scale, rope), lets where
 * an inlined member had them. The matcher takes all of these as they are: PRE and POST
 * statements are replayed at each output point after the reduction, and the lets of PRE and of
 * the update are substituted into P * Q, so no fused form falls to another rule. */
#include "matmul.h"

#include <string.h>

/* The lets substituted into the product: PRE's, then the update's (each value with the earlier
 * ones already substituted). */
typedef struct letmap {
  const rx_local *l[MM_MAX_ITEMS + (1 + MM_MAX_EXTRA) * RED_MAX_LETS];
  rx_tx *v[MM_MAX_ITEMS + (1 + MM_MAX_EXTRA) * RED_MAX_LETS];
  int n;
} letmap;

static rx_tx *inline_lets(rx_module *m, const rx_tx *e, const letmap *lm) {
  if (!e) return NULL;
  if (e->kind == RX_TX_LOCAL) {
    for (int i = lm->n; i-- > 0;)
      if (lm->l[i] == e->local) return lm->v[i];
    return (rx_tx *)e;
  }
  if (e->kind == RX_TX_SYM || e->kind == RX_TX_INT || e->kind == RX_TX_FLOAT) return (rx_tx *)e;
  rx_tx *r = ir_module_alloc(m, sizeof *r);
  *r = *e;
  if (e->nidx) {
    r->idx = ir_module_alloc(m, sizeof *r->idx * (size_t)e->nidx);
    for (int i = 0; i < e->nidx; i++) r->idx[i] = inline_lets(m, e->idx[i], lm);
  }
  r->a = inline_lets(m, e->a, lm);
  r->b = inline_lets(m, e->b, lm);
  r->c = inline_lets(m, e->c, lm);
  return r;
}

static bool let_push(rx_module *m, letmap *lm, const rx_stmt *let) {
  if (lm->n == (int)RX_ARRAY_LEN(lm->l)) return false;
  lm->l[lm->n] = let->local;
  lm->v[lm->n] = inline_lets(m, let->value, lm);
  lm->n++;
  return true;
}

/* ---- loads: along k, stored buffers ---- */
typedef struct along {
  const rx_expr *k;
  bool any, ok;
} along;
static bool along_load(const rx_tx *e, void *ud) {
  along *a = ud;
  bool uses = false;
  for (int i = 0; i < e->nidx; i++) uses |= sched_tx_uses(e->idx[i], a->k);
  if (uses) {
    a->any = true;
    a->ok &= sched_tx_uses(e->idx[e->nidx - 1], a->k);
  }
  return true;
}
/* Every load of e that uses k uses it in its last index (and one does): consecutive k are
 * consecutive elements, as in the Hugging Face [out, in] layout of a weight read as W[j, k] or
 * an activation reshaped from heads, x[i, k // 32 % 4, k % 32]. */
static bool along_k(const rx_tx *e, const rx_expr *k) {
  along a = {k, false, true};
  sched_all_loads(e, along_load, &a);
  return a.any && a.ok;
}

typedef struct stored {
  const rx_buffer *b[MM_MAX_ITEMS + 1 + MM_MAX_EXTRA];
  int n;
} stored;
static bool not_stored(const rx_tx *e, void *ud) {
  const stored *st = ud;
  for (int i = 0; i < st->n; i++)
    if (e->buf == st->b[i]) return false;
  return true;
}

static bool at_point(const rx_stmt *st, const nest *nt) {
  if (st->nidx != nt->n) return false;
  for (int k = 0; k < nt->n; k++)
    if (!sched_sym_is(st->idx[k], nt->vars[k])) return false;
  return true;
}

static bool const_idx(const rx_stmt *st) {
  for (int k = 0; k < st->nidx; k++) {
    const rx_tx *x = st->idx[k];
    if (x->kind != RX_TX_INT && !(x->kind == RX_TX_SYM && x->sym->kind == RX_EXPR_CONST))
      return false;
  }
  return true;
}

/* The body around the reduces: PRE (local allocs with constant shapes, lets), the reduces (one,
 * or up to 1 + MM_MAX_EXTRA one after another), POST (lets, stores). Fills pre/post and reds;
 * returns the reduce count (0: not this form). */
static int split_body(const rx_stmt *b, mm_info *mi, const rx_stmt **reds) {
  int nred = 0;
  bool after = false;
  for (int i = 0; i < sched_seq_len(b); i++) {
    const rx_stmt *st = sched_seq_at(b, i);
    if (st->kind == RX_STMT_REDUCE) {
      if (after || nred == 1 + MM_MAX_EXTRA) return 0;
      reds[nred++] = st;
      continue;
    }
    if (!nred) {
      if (mi->npre == MM_MAX_ITEMS) return 0;
      if (st->kind == RX_STMT_ALLOC) {
        if (st->buf->scope != RX_SCOPE_LOCAL) return 0;
        for (int d = 0; d < st->buf->ndim; d++)
          if (st->buf->shape[d]->kind != RX_EXPR_CONST) return 0;
      } else if (st->kind != RX_STMT_LET) {
        return 0;
      }
      mi->pre[mi->npre++] = st;
    } else {
      after = true;
      if (mi->npost == MM_MAX_ITEMS || (st->kind != RX_STMT_LET && st->kind != RX_STMT_STORE))
        return 0;
      mi->post[mi->npost++] = st;
    }
  }
  return nred;
}

static bool pre_allocates(const mm_info *mi, const rx_buffer *b) {
  for (int i = 0; i < mi->npre; i++)
    if (mi->pre[i]->kind == RX_STMT_ALLOC && mi->pre[i]->buf == b) return true;
  return false;
}

/* The stores: the accumulator is the output at the point (and nothing follows the reduce), or
 * a local of PRE; then POST stores locals of PRE at constant indices and the output once, at the
 * point. Collects every stored buffer. */
static bool check_stores(const mm_info *mi, stored *st) {
  const rx_stmt *us = mi->r.upd_store;
  st->b[st->n++] = us->buf;
  if (us->buf->scope != RX_SCOPE_LOCAL) return at_point(us, &mi->nt) && mi->npost == 0;
  if (!pre_allocates(mi, us->buf) || !const_idx(us)) return false;
  for (int t = 0; t < mi->nx; t++) { /* each extra into a local of its own */
    const rx_stmt *xs = mi->x[t].r.upd_store;
    if (!pre_allocates(mi, xs->buf) || !const_idx(xs)) return false;
    for (int i = 0; i < st->n; i++)
      if (st->b[i] == xs->buf) return false;
    st->b[st->n++] = xs->buf;
  }
  int outs = 0;
  for (int i = 0; i < mi->npost; i++) {
    const rx_stmt *p = mi->post[i];
    if (p->kind != RX_STMT_STORE) continue;
    if (p->buf->scope == RX_SCOPE_LOCAL) {
      if (!pre_allocates(mi, p->buf) || !const_idx(p)) return false;
    } else {
      if (!at_point(p, &mi->nt)) return false;
      outs++;
    }
    st->b[st->n++] = p->buf;
  }
  return outs == 1;
}

/* P (uses k, not j) and Q (uses k, not i) from the product x = a * c. */
static bool split_at(const mm_info *mi, rx_tx *x, const rx_expr *k, rx_tx **p, rx_tx **q,
                     bool *p_first) {
  if (x->kind != RX_TX_BINARY || x->binop != RX_BINOP_MUL) return false;
  const rx_expr *i = mi->i, *j = mi->j;
  rx_tx *a = x->a, *c = x->b;
  bool a_p = !sched_tx_uses(a, j) && (!i || !sched_tx_uses(c, i));
  bool c_p = !sched_tx_uses(c, j) && (!i || !sched_tx_uses(a, i));
  if (!a_p && !c_p) return false;
  *p_first = a_p; /* both: neither uses i or j (every output point the same), a is P */
  *p = a_p ? a : c;
  *q = a_p ? c : a;
  return sched_tx_uses(*p, k) && sched_tx_uses(*q, k);
}
static bool split_product(mm_info *mi, rx_tx *x) {
  return split_at(mi, x, mi->r.k, &mi->p, &mi->q, &mi->p_first);
}

/* e with the variable `from` replaced by `to` (an extra reduction's k by the main one's). */
static rx_tx *subst_var(rx_module *m, const rx_tx *e, const rx_expr *from, const rx_expr *to) {
  if (!e) return NULL;
  if (e->kind == RX_TX_SYM) {
    if (!sym_expr_uses_var(e->sym, from)) return (rx_tx *)e;
    rx_tx *r = ir_module_alloc(m, sizeof *r);
    *r = *e;
    r->sym = sym_expr_subst(m->ctx, e->sym, &from, &to, 1);
    return r;
  }
  if (e->kind == RX_TX_LOCAL || e->kind == RX_TX_INT || e->kind == RX_TX_FLOAT) return (rx_tx *)e;
  rx_tx *r = ir_module_alloc(m, sizeof *r);
  *r = *e;
  if (e->nidx) {
    r->idx = ir_module_alloc(m, sizeof *r->idx * (size_t)e->nidx);
    for (int i = 0; i < e->nidx; i++) r->idx[i] = subst_var(m, e->idx[i], from, to);
  }
  r->a = subst_var(m, e->a, from, to);
  r->b = subst_var(m, e->b, from, to);
  r->c = subst_var(m, e->c, from, to);
  return r;
}

/* The reductions reds[0..n) (parsed into rs, summands with the lets substituted in xs): the
 * first one of P * Q form is the main one (mi->r, p, q), the others extras; all sums over the
 * same extent from 0. */
static bool pick_main(rx_module *m, mm_info *mi, red_info *rs, rx_tx **xs, int n) {
  int main = -1;
  for (int t = 0; t < n && main < 0; t++) {
    mi->r = rs[t];
    if (sched_tx_uses(xs[t], mi->j) && split_product(mi, xs[t])) main = t;
  }
  if (main < 0) return false;
  mi->r = rs[main];
  for (int t = 0; t < n; t++) {
    if (t == main) continue;
    if (rs[t].kext != mi->r.kext) return false;
    mm_extra *x = &mi->x[mi->nx++];
    x->r = rs[t];
    rx_tx *v = subst_var(m, xs[t], rs[t].k, mi->r.k);
    if (!sched_tx_uses(v, mi->j)) {
      x->p = v; /* a row term */
      x->p_first = true;
      if (!sched_tx_uses(v, mi->r.k)) return false;
    } else if (!split_at(mi, v, mi->r.k, &x->p, &x->q, &x->p_first) || !along_k(x->q, mi->r.k)) {
      return false;
    }
  }
  return true;
}

/* Whether e uses v only in the indices of loads that sit in another load's index (depth: the
 * loads whose indices enclose e): an indirect row offset such as moe_gemv's expert id,
 * w[experts[i // k, i % k], j, k] (ops/moe.c), and not a direct use such as x[i, k]. */
static bool uses_only_indirect(const rx_tx *e, const rx_expr *v, int depth) {
  if (!e) return true;
  if (e->kind == RX_TX_SYM) return depth >= 2 || !sym_expr_uses_var(e->sym, v);
  if (e->kind == RX_TX_LOCAL || e->kind == RX_TX_INT || e->kind == RX_TX_FLOAT) return true;
  int d = e->kind == RX_TX_LOAD ? depth + 1 : depth;
  for (int i = 0; i < e->nidx; i++)
    if (!uses_only_indirect(e->idx[i], v, d)) return false;
  return uses_only_indirect(e->a, v, depth) && uses_only_indirect(e->b, v, depth) &&
         uses_only_indirect(e->c, v, depth);
}

/* The product's row variable i as a batch variable (one row per batch point: N = 1) when the
 * weight operand uses it only as an indirect row offset (a gathered expert's rows: moe_gemv).
 * The integer lets of PRE that do not use j (the row offset, e.g. the checked expert id) are
 * then hoisted (mm_info.hoist): the schedule emits them once before its k loop and the operands
 * read their locals, so the weight's loads index by a value fixed over k (vector loads along k,
 * codegen/cprinter.c's vec_index). */
static bool row_as_batch(rx_module *m, mm_info *mi, const rx_tx *x, const letmap *lm) {
  if (!mi->i || x->kind != RX_TX_BINARY || x->binop != RX_BINOP_MUL) return false;
  const rx_tx *q = sched_tx_uses(x->a, mi->j) ? x->a : x->b;
  if (!sched_tx_uses(q, mi->i) || !uses_only_indirect(q, mi->i, 0)) return false;
  mi->nb = mi->nt.n - 1;
  mi->i = NULL;
  mi->N = sym_expr_const(m->ctx, 1);
  for (int i = 0; i < lm->n; i++) {
    const rx_local *l = lm->l[i];
    if (ir_dtype_is_int(l->dtype) && !sched_tx_uses(lm->v[i], mi->j))
      for (int p = 0; p < mi->npre; p++)
        if (mi->pre[p]->kind == RX_STMT_LET && mi->pre[p]->local == l)
          mi->hoist[mi->nhoist++] = mi->pre[p];
  }
  return true;
}

bool mm_hoisted(const mm_info *mi, const rx_stmt *st) {
  for (int q = 0; q < mi->nhoist; q++)
    if (mi->hoist[q] == st) return true;
  return false;
}

void mm_hoist_emit(rx_sctx *s, const mm_info *mi, const rx_expr *const *batch, rx_stmtvec *out) {
  if (!mi->nhoist) return;
  const rx_expr *vars[MAXN + 1], *repl[MAXN + 1], *z = sx_const(s->cx, 0);
  rx_rewrite rw;
  mm_point_rewrite(s, mi, batch, z, z, vars, repl, &rw);
  for (int q = 0; q < mi->nhoist; q++) RX_VEC_PUSH(out, sched_rewrite_stmt(&rw, mi->hoist[q]));
}

/* The summands of reductions rs[0..n) with the lets of PRE (but the hoisted ones) and of their
 * updates substituted (xs); false when there are too many lets. */
static bool summands(rx_module *m, const mm_info *mi, const red_info *rs, int n, letmap *lm,
                     rx_tx **xs) {
  lm->n = 0;
  for (int i = 0; i < mi->npre; i++) {
    const rx_stmt *p = mi->pre[i];
    if (p->kind == RX_STMT_LET && !mm_hoisted(mi, p) && !let_push(m, lm, p)) return false;
  }
  for (int t = 0; t < n; t++) {
    letmap own = *lm;
    for (int i = 0; i < rs[t].nupd_lets; i++)
      if (!let_push(m, &own, rs[t].upd_lets[i])) return false;
    xs[t] = inline_lets(m, rs[t].x, &own);
  }
  return true;
}

bool mm_match(rx_module *m, const rx_tensor_fn *f, mm_info *mi) {
  memset(mi, 0, sizeof *mi);
  if (sched_seq_len(f->body) != 1) return false;
  nest *nt = &mi->nt;
  sched_get_nest(sched_seq_at(f->body, 0), nt);
  if (nt->n < 1) return false;
  for (int k = 0; k < nt->n; k++)
    if (!rx_expr_is_const(nt->lo[k], 0)) return false;
  const rx_stmt *reds[1 + MM_MAX_EXTRA];
  red_info rs[1 + MM_MAX_EXTRA];
  int nred = split_body(nt->body, mi, reds);
  if (!nred) return false;
  for (int t = 0; t < nred; t++)
    if (!sched_red_parse(reds[t], &rs[t]) || rs[t].comb != RX_COMB_SUM ||
        !rx_expr_is_const(rs[t].klo, 0))
      return false;
  mi->nb = nt->n >= 2 ? nt->n - 2 : 0;
  mi->i = nt->n >= 2 ? nt->vars[nt->n - 2] : NULL;
  mi->j = nt->vars[nt->n - 1];
  mi->N = mi->i ? nt->ext[nt->n - 2] : sym_expr_const(m->ctx, 1);
  mi->M = nt->ext[nt->n - 1];
  letmap lm;
  rx_tx *xs[1 + MM_MAX_EXTRA];
  if (!summands(m, mi, rs, nred, &lm, xs)) return false;
  bool ok = nred == 1 ? (mi->r = rs[0], split_product(mi, xs[0])) : pick_main(m, mi, rs, xs, nred);
  if (!ok) { /* a gathered weight's rows (moe_gemv): each row its own batch point */
    mi->nx = 0;
    if (!row_as_batch(m, mi, xs[0], &lm) || !summands(m, mi, rs, nred, &lm, xs)) return false;
    ok = nred == 1 ? (mi->r = rs[0], split_product(mi, xs[0])) : pick_main(m, mi, rs, xs, nred);
    if (!ok) return false;
  }
  stored st = {.n = 0};
  if (!check_stores(mi, &st)) return false;
  mi->K = mi->r.kext;
  mi->acc_dt = mi->r.upd_store->buf->dtype;
  for (int t = 0; t < mi->nx; t++)
    if (mi->x[t].r.upd_store->buf->dtype != mi->acc_dt) return false;
  for (int i = 0; i < mi->npre; i++) {
    const rx_stmt *p = mi->pre[i];
    if (p->kind == RX_STMT_LET && !sched_all_loads(p->value, not_stored, &st)) return false;
  }
  if (!sched_all_loads(mi->p, not_stored, &st) || !sched_all_loads(mi->q, not_stored, &st))
    return false;
  for (int t = 0; t < mi->nx; t++)
    if (!sched_all_loads(mi->x[t].p, not_stored, &st) ||
        (mi->x[t].q && !sched_all_loads(mi->x[t].q, not_stored, &st)))
      return false;
  mi->q_along_k = along_k(mi->q, mi->r.k);
  mi->p_along_k = along_k(mi->p, mi->r.k);
  return mi->nx == 0 || mi->q_along_k; /* the extras: gemv_rows alone, which wants Q along k */
}

void mm_point_rewrite(rx_sctx *s, const mm_info *mi, const rx_expr *const *batch, const rx_expr *i,
                      const rx_expr *j, const rx_expr **vars, const rx_expr **repl,
                      rx_rewrite *rw) {
  int n = mi->nt.n;
  for (int q = 0; q < n; q++) vars[q] = mi->nt.vars[q];
  for (int q = 0; q < mi->nb; q++) repl[q] = batch[q];
  if (mi->i) repl[n - 2] = i;
  repl[n - 1] = j;
  *rw = (rx_rewrite){.s = s, .vars = vars, .repl = repl, .n = n};
}

rx_tx *mm_operand_at(rx_sctx *s, const mm_info *mi, const rx_expr *const *batch, const rx_tx *e,
                     const rx_expr *i, const rx_expr *j, const rx_expr *k) {
  const rx_expr *vars[MAXN + 1], *repl[MAXN + 1];
  rx_rewrite rw;
  mm_point_rewrite(s, mi, batch, i, j, vars, repl, &rw);
  vars[rw.n] = mi->r.k;
  repl[rw.n] = k;
  rw.n++;
  return sched_rewrite_tx(&rw, e);
}

/* acc = v0 + total for reduction r (the init store rewritten by rw). */
static rx_stmt *finish_red(rx_sctx *s, const mm_info *mi, const red_info *r, rx_rewrite *rw,
                           rx_tx *total) {
  rx_tx *v0 = sched_rewrite_tx(rw, r->init_store->value);
  rx_tx *fin = total;
  bool zero =
      (v0->kind == RX_TX_FLOAT && v0->fval == 0.0) || (v0->kind == RX_TX_INT && v0->ival == 0);
  if (!zero) {
    if (v0->dtype != mi->acc_dt || v0->weak) v0 = ir_tx_cast(s->m, mi->acc_dt, v0, s->loc);
    fin = r->acc_first ? ir_tx_binary(s->m, RX_BINOP_ADD, v0, total, s->loc)
                       : ir_tx_binary(s->m, RX_BINOP_ADD, total, v0, s->loc);
  }
  rx_stmt *st = sched_rewrite_stmt(rw, r->init_store);
  st->value = fin;
  return st;
}

void mm_epilogue_n(rx_sctx *s, const mm_info *mi, rx_rewrite *rw, rx_tx *const *totals,
                   rx_stmtvec *out) {
  for (int q = 0; q < mi->npre; q++)
    if (!mm_hoisted(mi, mi->pre[q])) RX_VEC_PUSH(out, sched_rewrite_stmt(rw, mi->pre[q]));
  for (int q = 0; q < mi->r.ninit_lets; q++)
    RX_VEC_PUSH(out, sched_rewrite_stmt(rw, mi->r.init_lets[q]));
  for (int t = 0; t < mi->nx; t++)
    for (int q = 0; q < mi->x[t].r.ninit_lets; q++)
      RX_VEC_PUSH(out, sched_rewrite_stmt(rw, mi->x[t].r.init_lets[q]));
  RX_VEC_PUSH(out, finish_red(s, mi, &mi->r, rw, totals[0]));
  for (int t = 0; t < mi->nx; t++)
    RX_VEC_PUSH(out, finish_red(s, mi, &mi->x[t].r, rw, totals[1 + t]));
  for (int q = 0; q < mi->npost; q++) RX_VEC_PUSH(out, sched_rewrite_stmt(rw, mi->post[q]));
}

void mm_epilogue(rx_sctx *s, const mm_info *mi, rx_rewrite *rw, rx_tx *total, rx_stmtvec *out) {
  RX_ASSERT(mi->nx == 0);
  mm_epilogue_n(s, mi, rw, &total, out);
}

int mm_vector_lanes(rx_sctx *s, const mm_info *mi, int max_lanes) {
  int bp = sched_max_load_bits(mi->p), bq = sched_max_load_bits(mi->q);
  int bits = bp > bq ? bp : bq;
  if (mi->nx) /* the weights' loads set the width (an f32 row of P is read from L1 beside them) */
    bits = bq;
  for (int t = 0; t < mi->nx; t++) {
    int b = mi->x[t].q ? sched_max_load_bits(mi->x[t].q) : 0;
    if (b > bits) bits = b;
  }
  if (bits <= 0) return 1;
  int v = s->t->vector_bytes * 8 / bits;
  if (v > max_lanes) v = max_lanes;
  if (v < 1) v = 1;
  int64_t d = sym_analyzer_divisor(s->an, mi->K);
  while (v > 1 && d != 0 && d % v != 0) v /= 2;
  return sched_pow2_floor(v);
}

const rx_tx *mm_plain_load(const rx_tx *e) {
  if (e->kind == RX_TX_CAST) e = e->a;
  if (e->kind != RX_TX_LOAD || (e->dtype != RX_DTYPE_F16 && e->dtype != RX_DTYPE_BF16)) return NULL;
  return e;
}

/* What Q's loads are (narrow_load): an integer one seen; an i32 one seen. */
typedef struct q_loads {
  bool packed, words;
} q_loads;

/* A load of Q's: of at most 16 bits (packed bytes, f16 scales), an integer one counted; an f32
 * one, which mm_q_dequant takes beside packed integers only (FP8's f32 scales, issue 32: the
 * element is rounded to f16 in the stage, as every dequantized element is; a plain f32 weight
 * stays out: its values would be rounded to f16); or an i32 one (AWQ's and GPTQ's words, their
 * packed zeros, GPTQ's g_idx), which mm_q_dequant takes where Q is not along k (mm_q_words). */
static bool narrow_load(const rx_tx *e, void *ud) {
  q_loads *ql = ud;
  if (ir_dtype_is_int(e->dtype)) ql->packed = true;
  if (e->dtype == RX_DTYPE_I32) ql->words = true;
  return ir_dtype_bits(e->dtype) <= 16 || e->dtype == RX_DTYPE_F32 || e->dtype == RX_DTYPE_I32;
}

static bool q_dequant_loads(const mm_info *mi, q_loads *ql) {
  *ql = (q_loads){false, false};
  return mm_plain_load(mi->p) && !mm_plain_load(mi->q) && ir_dtype_is_float(mi->q->dtype) &&
         sched_all_loads(mi->q, narrow_load, ql) && ql->packed;
}

bool mm_q_dequant(const mm_info *mi) {
  q_loads ql;
  return q_dequant_loads(mi, &ql) && (mi->q_along_k ? !ql.words : ql.words);
}

bool mm_q_words(const mm_info *mi) {
  q_loads ql;
  return !mi->q_along_k && q_dequant_loads(mi, &ql) && ql.words;
}
