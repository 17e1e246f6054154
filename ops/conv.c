/* ops/conv.c: conv2d as an implicit GEMM on subgroup matrix fragments (issue 14).
 *
 * Per group g of the convolution, the output is the product of two matrices that are never
 * built: rows m = (n, p, q) over the batch and the output points (M = N OH OW), columns o over
 * the group's output channels (O / groups), and k = (c, kh, kw) over the group's input channels
 * and the kernel window (K = C / groups KH KW; NHWC orders it (kh, kw, c), so that k follows the
 * channels, contiguous in x and in the HWIO weight):
 *
 *   A[m, k] = x[n, g C/groups + c, p sh - pt + kh dh, q sw - pl + kw dw]  (0 in the padding)
 *   B[k, o] = w[g O/groups + o, c, kh, kw]                                 (HWIO: w[kh, kw, c, o])
 *   y[n, g O/groups + o, p, q] = sum_k A[m, k] B[k, o]                     (NHWC: y[n, p, q, o])
 *
 * The im2col gather is done where the threads stage a slice of A in shared memory: each thread
 * splits its element's m and k into the indices above and loads x there, or writes 0 where the
 * window falls in the padding or past M or K. The kernel is the block tiling of
 * passes/schedule/gemm_frag.c written as program text: 128 threads = 2 x 2 subgroups of 32, each
 * with 2 x 2 F x F accumulators, so a block computes a BM x BN = 4F x 4F tile of one group's
 * output; per slice of CONV_BK k the threads stage the BM x BK tile of A and the BK x BN tile of
 * B (consecutive threads along the contiguous dim of x and of the weight), each subgroup loads
 * its fragments and multiplies; at the end the accumulators go through shared memory to y, rows
 * past M and columns past O / groups skipped. Blocks: x over the row tiles, y over the groups
 * times the column tiles of a group. Every size is an expression of the shapes, so symbolic N,
 * H and W are tiled at run time.
 *
 * Forms, for f16 and bf16: F = 16 (CUDA sm_80 / sm_90; vulkan-nvidia for f16) and F = 8
 * (Metal's simdgroup_matrix, f16), each under `if has_fragments(T, f32, F, F, F)`, then the
 * direct kernel (ops/legalize.c) for every other target (passes/schedule.h picks). Depthwise
 * convolutions (one input and one output channel per group) keep the direct kernel only: their
 * GEMM is 1 column wide.
 *
 * f32 convolutions (those of the ONNX models) keep the direct kernel on every target, although
 * Metal's simdgroup_matrix multiplies f32 8 x 8 fragments: a program with a fragment form is
 * opaque to operator fusion (annotate.c classifies only plain loop nests as output-fusable), so
 * the conv + bias + activation of a CNN, one kernel today on every target, would become two on
 * every target to gain matrix units on Metal alone. A fragment form for f32 is one condition
 * below (conv_start) once fuse_tensor can write an epilogue into it.
 *
 * Not yet: double-buffered staging, cp.async and ldmatrix, tiles chosen by the shapes; epilogue
 * fusion into the fragment form (a bias or an activation after an f16 conv is a kernel of its
 * own). */
#include "legalize_int.h"

#include <string.h>

/* Threads per block: 2 x 2 subgroups of 32 lanes. */
#define CONV_THREADS 128
#define CONV_LANES   32
/* Subgroups along the tile's rows and columns, fragments per subgroup along each. */
#define CONV_SG 2
#define CONV_WF 2
/* k per staged slice: a multiple of every fragment edge (8, 16); CONV_THREADS a multiple of it. */
#define CONV_BK 32

typedef struct conv {
  lz_ctx *l;
  rx_nn_win w;
  rx_nn_axes ax;
  lz_opnd *x, *wt, *y;
  rx_dtype t;
  int f;                                 /* the fragment edge F */
  int64_t bm, bn, pad;                   /* tile rows and columns, padding of a shared row */
  const rx_expr *m, *og, *cg, *kk, *ncb; /* M, O / groups, C / groups, K, column tiles */
  const rx_expr *g, *row0, *col0, *k0;   /* the block's group, first row and column, slice */
  const char *bx, *by, *tx;              /* block and thread variables */
  const char *as, *bs, *cs;              /* shared: A [BM, BK], B [BK, BN], results */
  const char *fa[CONV_WF], *fb[CONV_WF], *fc[CONV_WF * CONV_WF]; /* the fragments */
} conv;

static const rx_expr *V(conv *c, const char *name) { return rx_expr_var(c->l->cx, name); }
static const rx_expr *C(conv *c, int64_t v) { return rx_expr_const(c->l->cx, v); }
static const rx_expr *add(conv *c, const rx_expr *a, const rx_expr *b) {
  return rx_expr_add(c->l->cx, a, b);
}
static const rx_expr *mul(conv *c, const rx_expr *a, const rx_expr *b) {
  return rx_expr_mul(c->l->cx, a, b);
}
static const rx_expr *fdiv(conv *c, const rx_expr *a, const rx_expr *b) {
  return rx_expr_floordiv(c->l->cx, a, b);
}
static const rx_expr *fmod_(conv *c, const rx_expr *a, const rx_expr *b) {
  return rx_expr_floormod(c->l->cx, a, b);
}
static const rx_expr *lt(conv *c, const rx_expr *a, const rx_expr *b) {
  return rx_expr_cmp(c->l->cx, RX_EXPR_LT, a, b);
}
static const rx_expr *and_(conv *c, const rx_expr *a, const rx_expr *b) {
  return rx_expr_and(c->l->cx, a, b);
}
static const rx_expr *ceildiv(conv *c, const rx_expr *a, int64_t b) {
  return fdiv(c, add(c, a, C(c, b - 1)), C(c, b));
}
static const char *X(conv *c, const rx_expr *e) { return lz_ex(c->l, e); }
/* 0 <= v < n */
static const rx_expr *inside(conv *c, const rx_expr *v, const rx_expr *n) {
  return and_(c, rx_expr_cmp(c->l->cx, RX_EXPR_LE, C(c, 0), v), lt(c, v, n));
}

/* One element per thread and step of a tile `rows` x `width` (CONV_THREADS a multiple of
 * width): opens `for r in 0..rows width / CONV_THREADS {` and gives the element's row and
 * column, consecutive threads along the row. */
static void tile_elem(conv *c, int64_t rows, int64_t width, const rx_expr **row,
                      const rx_expr **col) {
  const char *r = lz_loopvar(c->l, "r");
  lz_line(c->l, "for %s in 0..%lld {", r, (long long)(rows * width / CONV_THREADS));
  c->l->ind++;
  *row = add(c, mul(c, V(c, r), C(c, CONV_THREADS / width)), fdiv(c, V(c, c->tx), C(c, width)));
  *col = fmod_(c, V(c, c->tx), C(c, width));
}

/* `if cond { dst = v } else { dst = 0 }` */
static void store_or_zero(conv *c, const rx_expr *cond, const char *dst, const char *v) {
  lz_ctx *l = c->l;
  lz_line(l, "if %s {", X(c, cond));
  lz_line(l, "  %s = %s", dst, v);
  lz_line(l, "} else {");
  lz_line(l, "  %s = %s", dst, lz_down(l, c->t, "0.0"));
  lz_line(l, "}");
}

/* The kernel window's (c, kh, kw) at k of the GEMM (NHWC: k = (kh KW + kw) C/groups + c). */
static void split_k(conv *c, const rx_expr *k, const rx_expr **ci, const rx_expr **kh,
                    const rx_expr **kw) {
  const rx_expr *khe = c->wt->shape[c->ax.wh], *kwe = c->wt->shape[c->ax.ww];
  if (c->w.nhwc) {
    *ci = fmod_(c, k, c->cg);
    *kw = fmod_(c, fdiv(c, k, c->cg), kwe);
    *kh = fdiv(c, k, mul(c, c->cg, kwe));
  } else {
    *kw = fmod_(c, k, kwe);
    *kh = fmod_(c, fdiv(c, k, kwe), khe);
    *ci = fdiv(c, k, mul(c, khe, kwe));
  }
}

/* The output point (n, p, q) of row m. */
static void split_m(conv *c, const rx_expr *m, const rx_expr **n, const rx_expr **p,
                    const rx_expr **q) {
  const rx_expr *oh = c->y->shape[c->ax.xh], *ow = c->y->shape[c->ax.xw];
  *q = fmod_(c, m, ow);
  *p = fmod_(c, fdiv(c, m, ow), oh);
  *n = fdiv(c, m, mul(c, oh, ow));
}

/* as[ii, kk] = A[row0 + ii, k0 + kk]: the im2col gather, consecutive threads along k. */
static void stage_a(conv *c) {
  const rx_expr *ii, *kk, *n, *p, *q, *ci, *kh, *kw;
  tile_elem(c, c->bm, CONV_BK, &ii, &kk);
  const rx_expr *m = add(c, c->row0, ii), *k = add(c, c->k0, kk);
  split_m(c, m, &n, &p, &q);
  split_k(c, k, &ci, &kh, &kw);
  const rx_nn_win *w = &c->w;
  const rx_expr *ih = add(c, add(c, mul(c, p, C(c, w->sh)), C(c, -w->pt)), mul(c, kh, C(c, w->dh)));
  const rx_expr *iw = add(c, add(c, mul(c, q, C(c, w->sw)), C(c, -w->pl)), mul(c, kw, C(c, w->dw)));
  const rx_expr *ok =
      and_(c, and_(c, lt(c, m, c->m), lt(c, k, c->kk)),
           and_(c, inside(c, ih, c->x->shape[c->ax.xh]), inside(c, iw, c->x->shape[c->ax.xw])));
  const char *xi[4];
  xi[0] = X(c, n);
  xi[c->ax.xc] = X(c, add(c, mul(c, c->g, c->cg), ci));
  xi[c->ax.xh] = X(c, ih);
  xi[c->ax.xw] = X(c, iw);
  store_or_zero(c, ok, lz_str(c->l, "%s[%s, %s]", c->as, X(c, ii), X(c, kk)),
                lz_load(c->l, c->x, xi));
  lz_close(c->l);
}

/* bs[kk, jj] = B[k0 + kk, col0 + jj]: consecutive threads along k for OIHW (the weight of an
 * output channel is contiguous in k), along the output channels for HWIO. */
static void stage_b(conv *c) {
  const rx_expr *kk, *jj, *ci, *kh, *kw;
  if (c->w.nhwc)
    tile_elem(c, CONV_BK, c->bn, &kk, &jj);
  else
    tile_elem(c, c->bn, CONV_BK, &jj, &kk);
  const rx_expr *k = add(c, c->k0, kk), *o = add(c, c->col0, jj);
  split_k(c, k, &ci, &kh, &kw);
  const char *wi[4];
  wi[c->ax.wo] = X(c, add(c, mul(c, c->g, c->og), o));
  wi[c->ax.wi] = X(c, ci);
  wi[c->ax.wh] = X(c, kh);
  wi[c->ax.ww] = X(c, kw);
  store_or_zero(c, and_(c, lt(c, k, c->kk), lt(c, o, c->og)),
                lz_str(c->l, "%s[%s, %s]", c->bs, X(c, kk), X(c, jj)), lz_load(c->l, c->wt, wi));
  lz_close(c->l);
}

/* The first row (which 0) or column (1) of fragment i of this thread's subgroup. */
static const rx_expr *frag_at(conv *c, int which, int i) {
  const rx_expr *sg = fdiv(c, V(c, c->tx), C(c, CONV_LANES));
  const rx_expr *at = which ? fmod_(c, sg, C(c, CONV_SG)) : fdiv(c, sg, C(c, CONV_SG));
  return add(c, mul(c, at, C(c, (int64_t)CONV_WF * c->f)), C(c, (int64_t)i * c->f));
}

/* One slice of CONV_BK k: stage A and B, then every subgroup's fragment steps. */
static void slice(conv *c) {
  lz_ctx *l = c->l;
  stage_a(c);
  stage_b(c);
  lz_line(l, "barrier");
  for (int ks = 0; ks < CONV_BK / c->f; ks++) {
    for (int i = 0; i < CONV_WF; i++)
      lz_line(l, "frag load %s, %s[%s, %d], %lld", c->fa[i], c->as, X(c, frag_at(c, 0, i)),
              ks * c->f, (long long)(CONV_BK + c->pad));
    for (int j = 0; j < CONV_WF; j++)
      lz_line(l, "frag load %s, %s[%d, %s], %lld", c->fb[j], c->bs, ks * c->f,
              X(c, frag_at(c, 1, j)), (long long)(c->bn + c->pad));
    for (int q = 0; q < CONV_WF * CONV_WF; q++)
      lz_line(l, "frag mma %s, %s, %s, %s", c->fc[q], c->fa[q / CONV_WF], c->fb[q % CONV_WF],
              c->fc[q]);
  }
  lz_line(l, "barrier"); /* the tiles are overwritten by the next slice */
}

/* The accumulators through cs to y: consecutive threads along the contiguous dim of y (the
 * output points for NCHW, the channels for NHWC). */
static void finish(conv *c) {
  lz_ctx *l = c->l;
  for (int q = 0; q < CONV_WF * CONV_WF; q++)
    lz_line(l, "frag store %s, %s[%s, %s], %lld", c->fc[q], c->cs, X(c, frag_at(c, 0, q / CONV_WF)),
            X(c, frag_at(c, 1, q % CONV_WF)), (long long)c->bn);
  lz_line(l, "barrier");
  const rx_expr *ii, *jj, *n, *p, *q;
  if (c->w.nhwc)
    tile_elem(c, c->bm, c->bn, &ii, &jj);
  else
    tile_elem(c, c->bn, c->bm, &jj, &ii);
  const rx_expr *m = add(c, c->row0, ii), *o = add(c, c->col0, jj);
  split_m(c, m, &n, &p, &q);
  const char *yi[4];
  yi[0] = X(c, n);
  yi[c->ax.xc] = X(c, add(c, mul(c, c->g, c->og), o));
  yi[c->ax.xh] = X(c, p);
  yi[c->ax.xw] = X(c, q);
  lz_line(l, "if %s {", X(c, and_(c, lt(c, m, c->m), lt(c, o, c->og))));
  lz_line(l, "  %s = %s", lz_load(l, c->y, yi),
          lz_down(l, c->t, lz_str(l, "%s[%s, %s]", c->cs, X(c, ii), X(c, jj))));
  lz_line(l, "}");
  lz_close(l);
}

/* The block and thread loops, shared tiles and fragments (accumulators at zero). */
static void open_kernel(conv *c) {
  lz_ctx *l = c->l;
  const rx_expr *nby = mul(c, c->ncb, C(c, c->w.groups));
  lz_line(l, "for %s in 0..%s bind(blockIdx.x) {", c->bx, X(c, ceildiv(c, c->m, c->bm)));
  l->ind++;
  lz_line(l, "for %s in 0..%s bind(blockIdx.y) {", c->by, X(c, nby));
  l->ind++;
  lz_line(l, "for %s in 0..%d bind(threadIdx.x) {", c->tx, CONV_THREADS);
  l->ind++;
  const char *t = rx_dtype_name(c->t);
  long long f = c->f;
  lz_line(l, "alloc %s: %s[%lld, %lld] shared", c->as, t, (long long)c->bm,
          (long long)(CONV_BK + c->pad));
  lz_line(l, "alloc %s: %s[%d, %lld] shared", c->bs, t, CONV_BK, (long long)(c->bn + c->pad));
  lz_line(l, "alloc %s: f32[%lld, %lld] shared", c->cs, (long long)c->bm, (long long)c->bn);
  for (int i = 0; i < CONV_WF; i++)
    lz_line(l, "alloc %s: %s[%lld, %lld] fragment a", c->fa[i], t, f, f);
  for (int i = 0; i < CONV_WF; i++)
    lz_line(l, "alloc %s: %s[%lld, %lld] fragment b", c->fb[i], t, f, f);
  for (int q = 0; q < CONV_WF * CONV_WF; q++) {
    lz_line(l, "alloc %s: f32[%lld, %lld] fragment acc", c->fc[q], f, f);
    lz_line(l, "frag fill %s, 0.0", c->fc[q]);
  }
}

/* The GEMM's sizes and the names of the program; false where the form does not apply (not
 * f16 or bf16, a depthwise convolution). */
static bool conv_start(conv *c, lz_ctx *l, const rx_nn_win *w, int f) {
  memset(c, 0, sizeof *c);
  c->l = l;
  c->w = *w;
  c->ax = rx_nn_conv_axes(w->nhwc);
  c->x = lz_arg(l, 0);
  c->wt = lz_arg(l, 1);
  c->y = &l->outs[0];
  c->t = c->x->dtype;
  c->f = f;
  bool half = c->t == RX_DTYPE_F16 || c->t == RX_DTYPE_BF16;
  if (c->x->scalar || c->wt->scalar || !half) return false;
  const rx_expr *cg = c->wt->shape[c->ax.wi], *o = c->wt->shape[c->ax.wo];
  if (rx_expr_is_const(cg, 1) && w->groups > 1 && o->kind == RX_EXPR_CONST && o->value == w->groups)
    return false; /* depthwise */
  c->bm = (int64_t)CONV_SG * CONV_WF * f;
  c->bn = c->bm;
  c->pad = 16 / (rx_dtype_bits(c->t) / 8); /* 16-byte row starts, rows in different banks */
  c->cg = cg;
  c->og = fdiv(c, o, C(c, w->groups));
  c->m = mul(c, mul(c, c->y->shape[0], c->y->shape[c->ax.xh]), c->y->shape[c->ax.xw]);
  c->kk = mul(c, mul(c, cg, c->wt->shape[c->ax.wh]), c->wt->shape[c->ax.ww]);
  c->ncb = ceildiv(c, c->og, c->bn);
  c->bx = lz_loopvar(l, "bx");
  c->by = lz_loopvar(l, "by");
  c->tx = lz_loopvar(l, "tx");
  c->as = lz_fresh(l, "as");
  c->bs = lz_fresh(l, "bs");
  c->cs = lz_fresh(l, "cs");
  for (int i = 0; i < CONV_WF; i++) c->fa[i] = lz_fresh(l, "fa");
  for (int i = 0; i < CONV_WF; i++) c->fb[i] = lz_fresh(l, "fb");
  for (int q = 0; q < CONV_WF * CONV_WF; q++) c->fc[q] = lz_fresh(l, "fc");
  c->g = fdiv(c, V(c, c->by), c->ncb);
  c->row0 = mul(c, V(c, c->bx), C(c, c->bm));
  c->col0 = mul(c, fmod_(c, V(c, c->by), c->ncb), C(c, c->bn));
  return true;
}

/* The fragment form for fragments of edge f, its `if has_fragments` left open (false, with
 * nothing written, where it does not apply). */
static bool conv_frag(lz_ctx *l, const rx_nn_win *w, int f) {
  conv c;
  if (!conv_start(&c, l, w, f)) return false;
  lz_line(l, "if has_fragments(%s, f32, %d, %d, %d) {", rx_dtype_name(c.t), f, f, f);
  l->ind++;
  open_kernel(&c);
  const char *kt = lz_loopvar(l, "kt");
  c.k0 = mul(&c, V(&c, kt), C(&c, CONV_BK));
  lz_line(l, "for %s in 0..%s {", kt, X(&c, ceildiv(&c, c.kk, CONV_BK)));
  l->ind++;
  slice(&c);
  lz_close(l);
  finish(&c);
  for (int i = 0; i < 3; i++) lz_close(l);
  return true;
}

void lz_gen_conv2d(lz_ctx *l) {
  rx_nn_win w;
  if (!lz_window(l, false, &w)) return;
  /* if has_fragments(T, f32, 16, 16, 16) { ... } else { if has_fragments(T, f32, 8, 8, 8) {
   * ... } else { direct } } */
  int open = 0;
  static const int edges[] = {16, 8};
  for (size_t i = 0; i < RX_ARRAY_LEN(edges); i++)
    if (conv_frag(l, &w, edges[i])) {
      l->ind--;
      lz_line(l, "} else {");
      l->ind++;
      open++;
    }
  lz_conv2d_direct(l, &w);
  for (int i = 0; i < open; i++) lz_close(l);
}
