/* ops/attention_tile.c: the block skeleton of paged_attention's FlashAttention forms
 * (ops_attn_tile, attention_int.h), shared by FA2 on mma.sync (ops/attention_fa2.c) and FA3 on
 * wgmma (ops/attention_fa3.c) so the two keep only their own MMA form: the operands, a block's
 * rows (one query token and one query head each; a GQA group's heads share the block, as in
 * ops/attention.c), the token table, Q's cp.async into shared memory, the warp's key range, the
 * walk over a sequence's key tiles through the cp.async stages, the masked base-2 scores and the
 * quad's running max of the online softmax, the row sums and the store of O. Each form gives the
 * keys per tile, the rows and threads per block, Q's shared layout (qidx) and the tile's copy and
 * MMAs (callbacks). */
#include "attention_int.h"
#include "deduce.h"
#include "ops.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

/* As attention.c: the running max starts at the lowest finite f32; scores in base 2
 * (ops_attn_score). */
#define TILE_NO_SCORE (-FLT_MAX)

#define F(a, ...) lz_str((a)->l, __VA_ARGS__)

bool ops_attn_tile_args(lz_ctx *l, ops_attn_tile *a, const ops_attn_form *fm) {
  a->fm = fm;
  a->l = l;
  for (int i = 0; i < 6; i++)
    if (lz_arg(l, i)->scalar) return false;
  a->q = lz_arg(l, 0);
  a->pages = lz_arg(l, 1);
  a->pt = lz_arg(l, 2);
  a->kvlen = lz_arg(l, 3);
  a->qseq = lz_arg(l, 4);
  a->qpos = lz_arg(l, 5);
  a->y = &l->outs[0];
  rx_dtype t = a->q->dtype;
  if ((t != RX_DTYPE_F16 && t != RX_DTYPE_BF16) || a->pages->dtype != t || a->y->dtype != t)
    return false;
  const rx_expr *hd = a->q->shape[1], *dd = a->q->shape[2], *kv = a->pages->shape[2];
  if (hd->kind != RX_EXPR_CONST || dd->kind != RX_EXPR_CONST || kv->kind != RX_EXPR_CONST ||
      kv->value < 1 || hd->value % kv->value)
    return false;
  a->heads = hd->value;
  a->d = dd->value;
  a->kvh = kv->value;
  return true;
}

void ops_attn_tile_setup(ops_attn_tile *a) {
  lz_ctx *l = a->l;
  a->t = ir_dtype_name(a->q->dtype);
  a->ch = a->d / 8;
  a->group = a->heads / a->kvh;
  a->window = ops_int_attr(l->call, "window", 0);
  a->gr = a->group < a->fm->rows ? a->group : a->fm->rows;
  a->gc = (a->group + a->gr - 1) / a->gr;
  a->tq = a->fm->rows / a->gr;
  a->tile = lz_loopvar(l, "tile");
  a->kh = lz_loopvar(l, "kh");
  a->tx = lz_loopvar(l, "tx");
  const char **names[] = {&a->qs,     &a->ks,     &a->vs,     &a->tseq,   &a->tlo,
                          &a->thi,    &a->tlead,  &a->slo,    &a->shi,    &a->mr,
                          &a->lr,     &a->seq,    &a->kvl,    &a->rok[0], &a->rok[1],
                          &a->rlo[0], &a->rlo[1], &a->rhi[0], &a->rhi[1]};
  static const char *const base[] = {"qs",  "ks",  "vs",   "tseq", "tlo", "thi", "tlead",
                                     "slo", "shi", "mrow", "lrow", "seq", "kvl", "rok",
                                     "rok", "rlo", "rlo",  "rhi",  "rhi"};
  for (size_t i = 0; i < RX_ARRAY_LEN(names); i++) *names[i] = lz_fresh(l, base[i]);
}

void ops_attn_open_block(ops_attn_tile *a) {
  lz_ctx *l = a->l;
  const rx_expr *n = a->q->shape[0];
  lz_line(
      l, "for %s in 0..%s bind(blockIdx.x) {", a->tile,
      lz_ex(l, sym_expr_floordiv(l->cx, sym_expr_add(l->cx, n, sym_expr_const(l->cx, a->tq - 1)),
                                 sym_expr_const(l->cx, a->tq))));
  l->ind++;
  lz_line(l, "for %s in 0..%lld bind(blockIdx.y) {", a->kh, (long long)(a->kvh * a->gc));
  l->ind++;
  lz_line(l, "for %s in 0..%d bind(threadIdx.x) {", a->tx, a->fm->threads);
  l->ind++;
}

void ops_attn_alloc_table(ops_attn_tile *a) {
  const char *tb[6] = {a->tseq, a->tlo, a->thi, a->tlead, a->slo, a->shi};
  for (int i = 0; i < 6; i++) lz_line(a->l, "alloc %s: i32[%d] shared", tb[i], a->fm->rows);
}

void ops_attn_init_rows(ops_attn_tile *a) {
  for (int h = 0; h < 2; h++) {
    lz_line(a->l, "%s[%d] = %s", a->mr, h, lz_flit(a->l, TILE_NO_SCORE));
    lz_line(a->l, "%s[%d] = 0.0", a->lr, h);
  }
}

const char *ops_attn_lane_row(ops_attn_tile *a, int h) {
  return F(a, "%s // 32 * 16 + %s %% 32 // 4 + %d", a->tx, a->tx, 8 * h);
}

const char *ops_attn_row_token(ops_attn_tile *a, const char *r) {
  return F(a, "%s * %lld + (%s) // %lld", a->tile, (long long)a->tq, r, (long long)a->gr);
}

const char *ops_attn_row_head(ops_attn_tile *a, const char *r) {
  return F(a, "%s // %lld * %lld + %s %% %lld * %lld + (%s) %% %lld", a->kh, (long long)a->gc,
           (long long)a->group, a->kh, (long long)a->gc, (long long)a->gr, r, (long long)a->gr);
}

const char *ops_attn_head_valid(ops_attn_tile *a, const char *r) {
  if (a->group % a->gr == 0) return NULL;
  return F(a, "%s %% %lld * %lld + (%s) %% %lld < %lld", a->kh, (long long)a->gc, (long long)a->gr,
           r, (long long)a->gr, (long long)a->group);
}

const char *ops_attn_open_chunks(ops_attn_tile *a, int64_t chunks, bool guard, int *levels,
                                 const char **r, const char **c) {
  lz_ctx *l = a->l;
  int th = a->fm->threads;
  const char *v = lz_loopvar(l, "c"), *e = F(a, "(%s + %s * %d)", a->tx, v, th);
  lz_line(l, "for %s in 0..%lld unroll {", v, (long long)((chunks + th - 1) / th));
  l->ind++;
  *levels = 1;
  if (guard && chunks % th != 0) {
    lz_line(l, "if %s < %lld {", e, (long long)chunks);
    l->ind++;
    *levels = 2;
  }
  *r = F(a, "%s // %lld", e, (long long)a->ch);
  *c = F(a, "%s %% %lld", e, (long long)a->ch);
  return e;
}

void ops_attn_load_q(ops_attn_tile *a) {
  lz_ctx *l = a->l;
  int levels = 0;
  const char *r = NULL, *k = NULL;
  ops_attn_open_chunks(a, a->fm->rows * a->ch, true, &levels, &r, &k);
  const char *tok = ops_attn_row_token(a, r), *n = lz_ex(l, a->q->shape[0]);
  const char *ok =
      F(a, "(%s) // %lld < %lld && %s < %s", r, (long long)a->gr, (long long)a->tq, tok, n);
  const char *hv = ops_attn_head_valid(a, r);
  if (hv) ok = F(a, "%s && %s", ok, hv);
  lz_line(l, "async_copy %s[%s] = %s[min(%s, %s - 1), min(%s, %lld), (%s) * 8] if %s", a->qs,
          a->fm->qidx(a, r, k), a->q->name, tok, n, ops_attn_row_head(a, r),
          (long long)(a->heads - 1), k, ok);
  for (int i = 0; i < levels; i++) lz_close(l);
  lz_line(l, "async_commit");
  lz_line(l, "async_wait 0");
  lz_line(l, "barrier");
}

void ops_attn_tile_table(ops_attn_tile *a) {
  ops_token_table t = {a->tseq,
                       a->tlo,
                       a->thi,
                       a->tlead,
                       a->slo,
                       a->shi,
                       a->tx,
                       a->tile,
                       a->fm->rows,
                       a->tq,
                       F(a, "%lld", (long long)a->tq),
                       a->q,
                       a->qseq,
                       a->qpos,
                       a->kvlen,
                       a->window};
  ops_attn_token_table(a->l, &t);
}

void ops_attn_warp_range(ops_attn_tile *a, const char *v[2]) {
  lz_ctx *l = a->l;
  static const char *const comb[2] = {"min", "max"};
  for (int w = 0; w < 2; w++) { /* w 0: the first key (min), 1: the last (max) */
    const char *const *rv = w ? a->rhi : a->rlo, *none = w ? "(-1)" : "2147483647";
    v[w] = lz_fresh(l, w ? "whi" : "wlo");
    lz_line(l, "let %s: i32 = %s(select(%s, %s, %s), select(%s, %s, %s))", v[w], comb[w], a->rok[0],
            rv[0], none, a->rok[1], rv[1], none);
    for (int m = 4; m < 32; m *= 2) {
      const char *nv = lz_fresh(l, w ? "whi" : "wlo");
      lz_line(l, "let %s: i32 = %s(%s, shuffle_xor(%s, %d))", nv, comb[w], v[w], v[w], m);
      v[w] = nv;
    }
  }
}

/* The sequence led by token u: its index and length, its first key tile k0 and tile count nk
 * (symbolic), and the lane's two rows' membership and visible key ranges. */
static void open_sequence(ops_attn_tile *a, const char *u, const char **k0, const char **nk) {
  lz_ctx *l = a->l;
  lz_line(l, "if %s[%s] != 0 {", a->tlead, u);
  l->ind++;
  *k0 = lz_fresh(l, "k0");
  *nk = lz_fresh(l, "nk");
  lz_line(l, "let %s: i32 = %s[%s]", a->seq, a->tseq, u);
  lz_line(l, "let %s: i32 = %s[%s]", a->kvl, a->kvlen->name, a->seq);
  lz_line(l, "let sym %s = %s[%s] // %d", *k0, a->slo, u, a->fm->keys);
  lz_line(l, "let sym %s = max(0, %s[%s] // %d - %s[%s] // %d + 1)", *nk, a->shi, u, a->fm->keys,
          a->slo, u, a->fm->keys);
  for (int h = 0; h < 2; h++) {
    const char *r = ops_attn_lane_row(a, h), *tk = F(a, "(%s) // %lld", r, (long long)a->gr);
    const char *hv = ops_attn_head_valid(a, r);
    lz_line(l, "let %s: bool = %s[%s] == %s%s%s", a->rok[h], a->tseq, tk, a->seq, hv ? " && " : "",
            hv ? hv : "");
    lz_line(l, "let %s: i32 = %s[%s]", a->rlo[h], a->tlo, tk);
    lz_line(l, "let %s: i32 = %s[%s]", a->rhi[h], a->thi, tk);
  }
}

/* The key tiles of the sequence led by token u of the tile. */
static void walk_sequence(ops_attn_tile *a, const char *u) {
  lz_ctx *l = a->l;
  const char *k0 = NULL, *nk = NULL, *lo = NULL, *hi = NULL;
  open_sequence(a, u, &k0, &nk);
  a->fm->range(a, &lo, &hi);
  for (int s = 0; s < a->stages - 1; s++) {
    lz_line(l, "if %d < %s {", s, nk);
    l->ind++;
    a->fm->copy(a, F(a, "%s + %d", k0, s), F(a, "%d", s));
    lz_close(l);
    lz_line(l, "async_commit");
  }
  const char *it = lz_loopvar(l, "it");
  lz_line(l, "for %s in 0..%s {", it, nk);
  l->ind++;
  lz_line(l, "async_wait %d", a->stages - 2);
  /* FA3: the thread's landed copies (and Q's, the first time) seen by wgmma's async proxy,
   * before the barrier after which any warpgroup reads them (as gemm_wgmma's pipeline) */
  if (a->fm->fence) lz_line(l, "wgmma_fence");
  lz_line(l, "barrier");
  const char *ahead = F(a, "%s + %d", it, a->stages - 1);
  lz_line(l, "if %s < %s {", ahead, nk);
  l->ind++;
  a->fm->copy(a, F(a, "%s + %s", k0, ahead), F(a, "(%s) %% %d", ahead, a->stages));
  lz_close(l);
  lz_line(l, "async_commit");
  const char *st = F(a, "%s %% %d", it, a->stages), *kt = F(a, "%s + %s", k0, it);
  lz_line(l, "if i32((%s) * %d) <= %s && i32((%s) * %d + %d) >= %s {", kt, a->fm->keys, hi, kt,
          a->fm->keys, a->fm->keys - 1, lo);
  l->ind++;
  a->fm->scores(a, st);
  a->fm->softmax(a, kt);
  a->fm->pv(a, st);
  lz_close(l);
  lz_close(l);
  lz_line(l, "async_wait 0");
  lz_line(l, "barrier"); /* the stages (and FA3's warps' ranges) are free for the next sequence */
  lz_close(l);
}

void ops_attn_walk(ops_attn_tile *a) {
  lz_ctx *l = a->l;
  const char *u = lz_loopvar(l, "u");
  lz_line(l, "for %s in 0..%lld {", u, (long long)a->tq);
  l->ind++;
  walk_sequence(a, u);
  lz_close(l);
}

const char *ops_attn_masked_score(ops_attn_tile *a, const char *kt, int h, int k, const char *acc,
                                  const char **vis) {
  lz_ctx *l = a->l;
  int n = k / 2, e = k % 2;
  const char *pos =
      F(a, "i32((%s) * %d + %d + %s %% 4 * 2 + %d)", kt, a->fm->keys, 8 * n, a->tx, e);
  *vis = F(a, "%s && %s >= %s && %s <= %s", a->rok[h], pos, a->rlo[h], pos, a->rhi[h]);
  const char *x = lz_fresh(l, "x");
  lz_line(l, "let %s: f32 = select(%s, %s, %s)", x, *vis,
          ops_attn_score(l, 1.0 / sqrt((double)a->d), acc), lz_flit(l, TILE_NO_SCORE));
  return x;
}

const char *ops_attn_quad_max(ops_attn_tile *a, int h, const char *mx, const char **mn) {
  lz_ctx *l = a->l;
  const char *m1 = lz_fresh(l, "mq"), *m2 = lz_fresh(l, "mq");
  *mn = lz_fresh(l, "mn");
  const char *al = lz_fresh(l, "al");
  lz_line(l, "let %s: f32 = max(%s, shuffle_xor(%s, 1))", m1, mx, mx);
  lz_line(l, "let %s: f32 = max(%s, shuffle_xor(%s, 2))", m2, m1, m1);
  lz_line(l, "let %s: f32 = max(%s[%d], %s)", *mn, a->mr, h, m2);
  lz_line(l, "let %s: f32 = exp2(%s[%d] - %s)", al, a->mr, h, *mn);
  return al;
}

void ops_attn_row_sums(ops_attn_tile *a, const char *lt[2]) {
  lz_ctx *l = a->l;
  for (int h = 0; h < 2; h++) {
    const char *l1 = lz_fresh(l, "lq");
    lt[h] = lz_fresh(l, "lt");
    lz_line(l, "let %s: f32 = %s[%d] + shuffle_xor(%s[%d], 1)", l1, a->lr, h, a->lr, h);
    lz_line(l, "let %s: f32 = %s + shuffle_xor(%s, 2)", lt[h], l1, l1);
  }
}

void ops_attn_store_rows(ops_attn_tile *a) {
  lz_ctx *l = a->l;
  lz_line(l, "barrier");
  int levels = 0;
  int64_t chunks = a->fm->rows * a->ch;
  const char *r = NULL, *k = NULL;
  const char *e = ops_attn_open_chunks(a, chunks, false, &levels, &r, &k);
  const char *ok = F(a, "%s[(%s) // %lld] >= 0", a->tseq, r, (long long)a->gr);
  if (chunks % a->fm->threads) ok = F(a, "%s < %lld && %s", e, (long long)chunks, ok);
  const char *hv = ops_attn_head_valid(a, r);
  if (hv) ok = F(a, "%s && %s", ok, hv);
  lz_line(l, "if %s {", ok);
  const char *v = lz_loopvar(l, "v");
  lz_line(l, "  for %s in 0..8 vectorize {", v);
  lz_line(l, "    %s[%s, %s, (%s) * 8 + %s] = %s[%s + %s]", a->y->name, ops_attn_row_token(a, r),
          ops_attn_row_head(a, r), k, v, a->qs, a->fm->qidx(a, r, k), v);
  lz_line(l, "  }");
  lz_line(l, "}");
  lz_close(l);
}
