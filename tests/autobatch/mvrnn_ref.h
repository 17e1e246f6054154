/* tests/autobatch/mvrnn_ref.h: the tree model with an MV-RNN cell (tests/autobatch/mvrnn_cell.rx,
 * Socher et al. 2012, n = 16) over a forest of random binary parse trees (acrobat_models.h's
 * generator), one call per inner node, as a call graph (call_graph.h), with its reference in
 * double written from the cell's definition: the parent of (a, A) and (b, B) is
 * p = tanh(W' [B a; A b] + bias) (the cell takes W = W' transposed) and P = WM [A; B]. Leaves are
 * their word's vector (uniform in [-1, 1]) and matrix (identity plus uniform noise 0.1, as the
 * paper initializes them); every inner node's p and P are checked. */
#ifndef RX_MVRNN_REF_H
#define RX_MVRNN_REF_H

#include "acrobat_models.h"
#include "call_graph.h"

enum { MV_N = 16, MV_NN = MV_N * MV_N };

/* p, P of a parent (w [2n, n], wm [n, 2n]). */
static inline void mvrnn_ref_cell(const float *w, const float *bias, const float *wm,
                                  const double *a, const double *am, const double *b,
                                  const double *bm, double *p, double *pm) {
  double cat[2 * MV_N];
  for (int i = 0; i < MV_N; i++) {
    double ba = 0, ab = 0;
    for (int k = 0; k < MV_N; k++) ba += bm[i * MV_N + k] * a[k], ab += am[i * MV_N + k] * b[k];
    cat[i] = ba;
    cat[MV_N + i] = ab;
  }
  bm_vecmat(cat, w, 2 * MV_N, MV_N, p, false);
  for (int j = 0; j < MV_N; j++) p[j] = tanh(p[j] + bias[j]);
  for (int i = 0; i < MV_N; i++)
    for (int j = 0; j < MV_N; j++) {
      double s = 0;
      for (int k = 0; k < MV_N; k++)
        s += (double)wm[i * 2 * MV_N + k] * am[k * MV_N + j] +
             (double)wm[i * 2 * MV_N + MV_N + k] * bm[k * MV_N + j];
      pm[i * MV_N + j] = s;
    }
}

/* ntrees trees of 1..max_leaves leaves from seed; false when the forest is too large. */
static inline bool mvrnn_setup(bm_graph *g, int ntrees, int max_leaves, uint64_t seed) {
  ab_forest *f = malloc(sizeof *f);
  if (!f || !ab_forest_make(f, seed, ntrees, max_leaves)) {
    free(f);
    return false;
  }
  int fn = bm_fn_add(g, "mvrnn_cell", "mvrnn_cell_batched", "bbbbsss", 2);
  uint64_t s = seed ^ 0x5eed;
  float w[2 * MV_NN], bias[MV_N], wm[2 * MV_NN], v[MV_N], m[MV_NN];
  ab_fill(&s, w, 2 * MV_NN, 0.25f);
  ab_fill(&s, bias, MV_N, 0.2f);
  ab_fill(&s, wm, 2 * MV_NN, 0.05f);
  for (int i = 0; i < MV_N; i++) wm[i * 2 * MV_N + i] += 0.5f, wm[i * 2 * MV_N + MV_N + i] += 0.5f;
  int wi[3] = {bm_input2(g, w, 2 * MV_N, MV_N), bm_input1(g, bias, MV_N),
               bm_input2(g, wm, MV_N, 2 * MV_N)};
  /* per node: its (vector, matrix) as an argument and their reference */
  bm_arg *node = calloc((size_t)f->n * 2, sizeof *node);
  double *ref = calloc((size_t)f->n * (MV_N + MV_NN), sizeof *ref);
  for (int i = 0; i < f->n && !g->st; i++) {
    double *rv = ref + (size_t)i * (MV_N + MV_NN), *rm = rv + MV_N;
    int l = f->left[i], r = f->right[i];
    if (l < 0) {
      ab_fill(&s, v, MV_N, 1.0f);
      ab_fill(&s, m, MV_NN, 0.1f);
      for (int k = 0; k < MV_N; k++) m[k * MV_N + k] += 1;
      node[2 * i] = bm_in(bm_input1(g, v, MV_N));
      node[2 * i + 1] = bm_in(bm_input2(g, m, MV_N, MV_N));
      bm_to_double(v, MV_N, rv);
      bm_to_double(m, MV_NN, rm);
      continue;
    }
    bm_arg args[7] = {node[2 * l],  node[2 * l + 1], node[2 * r], node[2 * r + 1],
                      bm_in(wi[0]), bm_in(wi[1]),    bm_in(wi[2])};
    int c = bm_call_add(g, fn, args);
    if (g->st) break;
    const double *lv = ref + (size_t)l * (MV_N + MV_NN), *rrv = ref + (size_t)r * (MV_N + MV_NN);
    mvrnn_ref_cell(w, bias, wm, lv, lv + MV_N, rrv, rrv + MV_N, rv, rm);
    bm_expect(g, c, 0, rv, MV_N);
    bm_expect(g, c, 1, rm, MV_NN);
    node[2 * i] = bm_out(c, 0);
    node[2 * i + 1] = bm_out(c, 1);
  }
  free(node);
  free(ref);
  free(f->x);
  free(f);
  return true;
}

/* The height of the tallest tree of the forest mvrnn_setup makes from the same arguments. */
static inline int mvrnn_height(int ntrees, int max_leaves, uint64_t seed) {
  ab_forest *f = malloc(sizeof *f);
  int h = f && ab_forest_make(f, seed, ntrees, max_leaves) ? f->max_height : -1;
  if (f) free(f->x);
  free(f);
  return h;
}

#endif
