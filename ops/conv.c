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
 * direct kernel (ops/nn.c, lz_conv2d_direct) for every other target (passes/schedule.h picks).
 * Depthwise convolutions (one input and one output channel per group) keep the direct kernel only:
 * their GEMM is 1 column wide.
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
#include "../shapes/expr_build.h"
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

/* 0 <= v < n */
static const rx_expr *inside(conv *c, const rx_expr *v, const rx_expr *n) {
  return sx_and(c->l->cx, sym_expr_cmp(c->l->cx, RX_EXPR_LE, sx_const(c->l->cx, 0), v),
                sx_lt(c->l->cx, v, n));
}

/* One element per thread and step of a tile `rows` x `width` (CONV_THREADS a multiple of
 * width): opens `for r in 0..rows width / CONV_THREADS {` and gives the element's row and
 * column, consecutive threads along the row. */
static void tile_elem(conv *c, int64_t rows, int64_t width, const rx_expr **row,
                      const rx_expr **col) {
  const char *r = lz_loopvar(c->l, "r");
  lz_line(c->l, "for %s in 0..%lld {", r, (long long)(rows * width / CONV_THREADS));
  c->l->ind++;
  *row = sx_add(c->l->cx,
                sx_mul(c->l->cx, sx_var(c->l->cx, r), sx_const(c->l->cx, CONV_THREADS / width)),
                sx_div(c->l->cx, sx_var(c->l->cx, c->tx), sx_const(c->l->cx, width)));
  *col = sx_mod(c->l->cx, sx_var(c->l->cx, c->tx), sx_const(c->l->cx, width));
}

/* `if cond { dst = v } else { dst = 0 }` */
static void store_or_zero(conv *c, const rx_expr *cond, const char *dst, const char *v) {
  lz_ctx *l = c->l;
  lz_line(l, "if %s {", lz_ex(c->l, cond));
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
    *ci = sx_mod(c->l->cx, k, c->cg);
    *kw = sx_mod(c->l->cx, sx_div(c->l->cx, k, c->cg), kwe);
    *kh = sx_div(c->l->cx, k, sx_mul(c->l->cx, c->cg, kwe));
  } else {
    *kw = sx_mod(c->l->cx, k, kwe);
    *kh = sx_mod(c->l->cx, sx_div(c->l->cx, k, kwe), khe);
    *ci = sx_div(c->l->cx, k, sx_mul(c->l->cx, khe, kwe));
  }
}

/* The output point (n, p, q) of row m. */
static void split_m(conv *c, const rx_expr *m, const rx_expr **n, const rx_expr **p,
                    const rx_expr **q) {
  const rx_expr *oh = c->y->shape[c->ax.xh], *ow = c->y->shape[c->ax.xw];
  *q = sx_mod(c->l->cx, m, ow);
  *p = sx_mod(c->l->cx, sx_div(c->l->cx, m, ow), oh);
  *n = sx_div(c->l->cx, m, sx_mul(c->l->cx, oh, ow));
}

/* as[ii, kk] = A[row0 + ii, k0 + kk]: the im2col gather, consecutive threads along k. */
static void stage_a(conv *c) {
  const rx_expr *ii, *kk, *n, *p, *q, *ci, *kh, *kw;
  tile_elem(c, c->bm, CONV_BK, &ii, &kk);
  const rx_expr *m = sx_add(c->l->cx, c->row0, ii), *k = sx_add(c->l->cx, c->k0, kk);
  split_m(c, m, &n, &p, &q);
  split_k(c, k, &ci, &kh, &kw);
  const rx_nn_win *w = &c->w;
  const rx_expr *ih = sx_add(
      c->l->cx,
      sx_add(c->l->cx, sx_mul(c->l->cx, p, sx_const(c->l->cx, w->sh)), sx_const(c->l->cx, -w->pt)),
      sx_mul(c->l->cx, kh, sx_const(c->l->cx, w->dh)));
  const rx_expr *iw = sx_add(
      c->l->cx,
      sx_add(c->l->cx, sx_mul(c->l->cx, q, sx_const(c->l->cx, w->sw)), sx_const(c->l->cx, -w->pl)),
      sx_mul(c->l->cx, kw, sx_const(c->l->cx, w->dw)));
  const rx_expr *ok = sx_and(
      c->l->cx, sx_and(c->l->cx, sx_lt(c->l->cx, m, c->m), sx_lt(c->l->cx, k, c->kk)),
      sx_and(c->l->cx, inside(c, ih, c->x->shape[c->ax.xh]), inside(c, iw, c->x->shape[c->ax.xw])));
  const char *xi[4];
  xi[0] = lz_ex(c->l, n);
  xi[c->ax.xc] = lz_ex(c->l, sx_add(c->l->cx, sx_mul(c->l->cx, c->g, c->cg), ci));
  xi[c->ax.xh] = lz_ex(c->l, ih);
  xi[c->ax.xw] = lz_ex(c->l, iw);
  store_or_zero(c, ok, lz_str(c->l, "%s[%s, %s]", c->as, lz_ex(c->l, ii), lz_ex(c->l, kk)),
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
  const rx_expr *k = sx_add(c->l->cx, c->k0, kk), *o = sx_add(c->l->cx, c->col0, jj);
  split_k(c, k, &ci, &kh, &kw);
  const char *wi[4];
  wi[c->ax.wo] = lz_ex(c->l, sx_add(c->l->cx, sx_mul(c->l->cx, c->g, c->og), o));
  wi[c->ax.wi] = lz_ex(c->l, ci);
  wi[c->ax.wh] = lz_ex(c->l, kh);
  wi[c->ax.ww] = lz_ex(c->l, kw);
  store_or_zero(c, sx_and(c->l->cx, sx_lt(c->l->cx, k, c->kk), sx_lt(c->l->cx, o, c->og)),
                lz_str(c->l, "%s[%s, %s]", c->bs, lz_ex(c->l, kk), lz_ex(c->l, jj)),
                lz_load(c->l, c->wt, wi));
  lz_close(c->l);
}

/* The first row (which 0) or column (1) of fragment i of this thread's subgroup. */
static const rx_expr *frag_at(conv *c, int which, int i) {
  const rx_expr *sg = sx_div(c->l->cx, sx_var(c->l->cx, c->tx), sx_const(c->l->cx, CONV_LANES));
  const rx_expr *at = which ? sx_mod(c->l->cx, sg, sx_const(c->l->cx, CONV_SG))
                            : sx_div(c->l->cx, sg, sx_const(c->l->cx, CONV_SG));
  return sx_add(c->l->cx, sx_mul(c->l->cx, at, sx_const(c->l->cx, (int64_t)CONV_WF * c->f)),
                sx_const(c->l->cx, (int64_t)i * c->f));
}

/* One slice of CONV_BK k: stage A and B, then every subgroup's fragment steps. */
static void slice(conv *c) {
  lz_ctx *l = c->l;
  stage_a(c);
  stage_b(c);
  lz_line(l, "barrier");
  for (int ks = 0; ks < CONV_BK / c->f; ks++) {
    for (int i = 0; i < CONV_WF; i++)
      lz_line(l, "frag load %s, %s[%s, %d], %lld", c->fa[i], c->as, lz_ex(c->l, frag_at(c, 0, i)),
              ks * c->f, (long long)(CONV_BK + c->pad));
    for (int j = 0; j < CONV_WF; j++)
      lz_line(l, "frag load %s, %s[%d, %s], %lld", c->fb[j], c->bs, ks * c->f,
              lz_ex(c->l, frag_at(c, 1, j)), (long long)(c->bn + c->pad));
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
    lz_line(l, "frag store %s, %s[%s, %s], %lld", c->fc[q], c->cs,
            lz_ex(c->l, frag_at(c, 0, q / CONV_WF)), lz_ex(c->l, frag_at(c, 1, q % CONV_WF)),
            (long long)c->bn);
  lz_line(l, "barrier");
  const rx_expr *ii, *jj, *n, *p, *q;
  if (c->w.nhwc)
    tile_elem(c, c->bm, c->bn, &ii, &jj);
  else
    tile_elem(c, c->bn, c->bm, &jj, &ii);
  const rx_expr *m = sx_add(c->l->cx, c->row0, ii), *o = sx_add(c->l->cx, c->col0, jj);
  split_m(c, m, &n, &p, &q);
  const char *yi[4];
  yi[0] = lz_ex(c->l, n);
  yi[c->ax.xc] = lz_ex(c->l, sx_add(c->l->cx, sx_mul(c->l->cx, c->g, c->og), o));
  yi[c->ax.xh] = lz_ex(c->l, p);
  yi[c->ax.xw] = lz_ex(c->l, q);
  lz_line(l, "if %s {",
          lz_ex(c->l, sx_and(c->l->cx, sx_lt(c->l->cx, m, c->m), sx_lt(c->l->cx, o, c->og))));
  lz_line(l, "  %s = %s", lz_load(l, c->y, yi),
          lz_down(l, c->t, lz_str(l, "%s[%s, %s]", c->cs, lz_ex(c->l, ii), lz_ex(c->l, jj))));
  lz_line(l, "}");
  lz_close(l);
}

/* The block and thread loops, shared tiles and fragments (accumulators at zero). */
static void open_kernel(conv *c) {
  lz_ctx *l = c->l;
  const rx_expr *nby = sx_mul(c->l->cx, c->ncb, sx_const(c->l->cx, c->w.groups));
  lz_line(l, "for %s in 0..%s bind(blockIdx.x) {", c->bx,
          lz_ex(c->l, sx_ceildiv_c(c->l->cx, c->m, c->bm)));
  l->ind++;
  lz_line(l, "for %s in 0..%s bind(blockIdx.y) {", c->by, lz_ex(c->l, nby));
  l->ind++;
  lz_line(l, "for %s in 0..%d bind(threadIdx.x) {", c->tx, CONV_THREADS);
  l->ind++;
  const char *t = ir_dtype_name(c->t);
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
  c->ax = ops_nn_conv_axes(w->nhwc);
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
  c->pad = 16 / (ir_dtype_bits(c->t) / 8); /* 16-byte row starts, rows in different banks */
  c->cg = cg;
  c->og = sx_div(c->l->cx, o, sx_const(c->l->cx, w->groups));
  c->m = sx_mul(c->l->cx, sx_mul(c->l->cx, c->y->shape[0], c->y->shape[c->ax.xh]),
                c->y->shape[c->ax.xw]);
  c->kk = sx_mul(c->l->cx, sx_mul(c->l->cx, cg, c->wt->shape[c->ax.wh]), c->wt->shape[c->ax.ww]);
  c->ncb = sx_ceildiv_c(c->l->cx, c->og, c->bn);
  c->bx = lz_loopvar(l, "bx");
  c->by = lz_loopvar(l, "by");
  c->tx = lz_loopvar(l, "tx");
  c->as = lz_fresh(l, "as");
  c->bs = lz_fresh(l, "bs");
  c->cs = lz_fresh(l, "cs");
  for (int i = 0; i < CONV_WF; i++) c->fa[i] = lz_fresh(l, "fa");
  for (int i = 0; i < CONV_WF; i++) c->fb[i] = lz_fresh(l, "fb");
  for (int q = 0; q < CONV_WF * CONV_WF; q++) c->fc[q] = lz_fresh(l, "fc");
  c->g = sx_div(c->l->cx, sx_var(c->l->cx, c->by), c->ncb);
  c->row0 = sx_mul(c->l->cx, sx_var(c->l->cx, c->bx), sx_const(c->l->cx, c->bm));
  c->col0 = sx_mul(c->l->cx, sx_mod(c->l->cx, sx_var(c->l->cx, c->by), c->ncb),
                   sx_const(c->l->cx, c->bn));
  return true;
}

/* The fragment form for fragments of edge f, its `if has_fragments` left open (false, with
 * nothing written, where it does not apply). */
static bool conv_frag(lz_ctx *l, const rx_nn_win *w, int f) {
  conv c;
  if (!conv_start(&c, l, w, f)) return false;
  lz_line(l, "if has_fragments(%s, f32, %d, %d, %d) {", ir_dtype_name(c.t), f, f, f);
  l->ind++;
  open_kernel(&c);
  const char *kt = lz_loopvar(l, "kt");
  c.k0 = sx_mul(c.l->cx, sx_var(c.l->cx, kt), sx_const(c.l->cx, CONV_BK));
  lz_line(l, "for %s in 0..%s {", kt, lz_ex(c.l, sx_ceildiv_c(c.l->cx, c.kk, CONV_BK)));
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
