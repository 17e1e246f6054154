/* tests/autobatch/treelstm2_ref.h: a TreeLSTM with two cell functions, a leaf cell and an
 * inner-node cell (tests/autobatch/treelstm2_cell.rx, hidden 32), over a forest of random binary
 * trees (acrobat_models.h's ab_forest_make: nodes in post-order), as a call graph (call_graph.h)
 * with its reference in double from the cells' definitions. Every node's h and c are checked.
 * Every leaf is ready at the start and an inner node of height k needs a node of height k - 1,
 * so height + 1 launches are a lower bound that every policy which runs all ready calls of the
 * leaf function first attains (docs/autobatch.md, "Policies": the FSM cannot beat them here). */
#ifndef RX_TREELSTM2_REF_H
#define RX_TREELSTM2_REF_H

#include "acrobat_models.h"
#include "call_graph.h"

enum { T2_H = 32 };

typedef struct t2_w {
  float w[T2_H * 3 * T2_H], bl[3 * T2_H];
  float ul[T2_H * 5 * T2_H], ur[T2_H * 5 * T2_H], b[5 * T2_H];
} t2_w;

static inline void t2_ref_leaf(const t2_w *w, const double *x, double *h, double *c) {
  double g[3 * T2_H];
  bm_vecmat(x, w->w, T2_H, 3 * T2_H, g, false);
  for (int j = 0; j < T2_H; j++) {
    c[j] = bm_sigmoid(g[j] + w->bl[j]) * tanh(g[2 * T2_H + j] + w->bl[2 * T2_H + j]);
    h[j] = bm_sigmoid(g[T2_H + j] + w->bl[T2_H + j]) * tanh(c[j]);
  }
}

static inline void t2_ref_node(const t2_w *w, const double *hl, const double *cl, const double *hr,
                               const double *cr, double *h, double *c) {
  double g[5 * T2_H];
  bm_vecmat(hl, w->ul, T2_H, 5 * T2_H, g, false);
  bm_vecmat(hr, w->ur, T2_H, 5 * T2_H, g, true);
  for (int j = 0; j < T2_H; j++) {
    double v[5];
    for (int k = 0; k < 5; k++) v[k] = g[k * T2_H + j] + w->b[k * T2_H + j];
    c[j] = bm_sigmoid(v[0]) * tanh(v[4]) + bm_sigmoid(v[1]) * cl[j] + bm_sigmoid(v[2]) * cr[j];
    h[j] = bm_sigmoid(v[3]) * tanh(c[j]);
  }
}

/* ntrees trees of 1..max_leaves leaves from seed; *out_height: the tallest tree's height. False
 * when the forest is too large. */
static inline bool treelstm2_setup(bm_graph *g, int ntrees, int max_leaves, uint64_t seed,
                                   int *out_height) {
  ab_forest *f = malloc(sizeof *f);
  t2_w *w = malloc(sizeof *w);
  if (!f || !w || !ab_forest_make(f, seed, ntrees, max_leaves)) {
    free(f);
    free(w);
    return false;
  }
  *out_height = f->max_height;
  int fl = bm_fn_add(g, "tree_leaf_cell", "tree_leaf_cell_batched", "bss", 2);
  int fn = bm_fn_add(g, "tree_node_cell", "tree_node_cell_batched", "bbbbsss", 2);
  uint64_t s = seed + 1;
  ab_fill(&s, w->w, sizeof w->w / sizeof *w->w, 0.3f);
  ab_fill(&s, w->bl, sizeof w->bl / sizeof *w->bl, 0.2f);
  ab_fill(&s, w->ul, sizeof w->ul / sizeof *w->ul, 0.3f);
  ab_fill(&s, w->ur, sizeof w->ur / sizeof *w->ur, 0.3f);
  ab_fill(&s, w->b, sizeof w->b / sizeof *w->b, 0.2f);
  int wi[5] = {bm_input2(g, w->w, T2_H, 3 * T2_H), bm_input1(g, w->bl, 3 * T2_H),
               bm_input2(g, w->ul, T2_H, 5 * T2_H), bm_input2(g, w->ur, T2_H, 5 * T2_H),
               bm_input1(g, w->b, 5 * T2_H)};
  double x[T2_H], h[T2_H], c[T2_H];
  for (int i = 0; i < f->n && !g->st; i++) {
    int l = f->left[i], r = f->right[i], id = 0;
    if (l < 0) { /* a leaf: its embedding is the first T2_H floats of the forest's */
      bm_arg args[3] = {bm_in(bm_input1(g, f->x + (size_t)i * AB_H, T2_H)), bm_in(wi[0]),
                        bm_in(wi[1])};
      id = bm_call_add(g, fl, args);
      if (g->st) break;
      bm_to_double(f->x + (size_t)i * AB_H, T2_H, x);
      t2_ref_leaf(w, x, h, c);
    } else {
      bm_arg args[7] = {bm_out(l, 0), bm_out(l, 1), bm_out(r, 0), bm_out(r, 1),
                        bm_in(wi[2]), bm_in(wi[3]), bm_in(wi[4])};
      id = bm_call_add(g, fn, args); /* node i is call i: nodes are in post-order */
      if (g->st) break;
      t2_ref_node(w, bm_ref(g, l, 0), bm_ref(g, l, 1), bm_ref(g, r, 0), bm_ref(g, r, 1), h, c);
    }
    bm_expect(g, id, 0, h, T2_H);
    bm_expect(g, id, 1, c, T2_H);
  }
  free(f->x);
  free(f);
  free(w);
  return true;
}

#endif
