/* tests/autobatch/acrobat_ref.h: the two models of acrobat_models.h (a TreeLSTM over a forest of
 * random binary parse trees, an LSTM over sequences) as call graphs (call_graph.h), with their
 * references from acrobat_models.h's double cells, so bench/autobatch_bench.c runs them in the
 * same table as the models of issue 36. Every node's h (TreeLSTM) and every step's h (LSTM) is
 * checked. */
#ifndef RX_ACROBAT_REF_H
#define RX_ACROBAT_REF_H

#include "acrobat_models.h"
#include "call_graph.h"

/* ntrees trees of 1..max_leaves leaves from seed (weights from seed 1801, as test_autobatch);
 * *out_height: the tallest tree's height. False when the forest is too large. */
static inline bool treelstm_setup(bm_graph *g, int ntrees, int max_leaves, uint64_t seed,
                                  int *out_height) {
  ab_forest *f = malloc(sizeof *f);
  if (!f || !ab_forest_make(f, seed, ntrees, max_leaves)) {
    free(f);
    return false;
  }
  *out_height = f->max_height;
  int fn = bm_fn_add(g, "tree_cell", "tree_cell_batched", "bbbbbssss", 2);
  ab_weights w;
  memset(&w, 0, sizeof w);
  if (!g->st) g->st = ab_weights_make(g->d, 1801, 3, AB_TREE_GATES, &w);
  int wi[4] = {0}, z = 0;
  float zero[AB_H] = {0};
  for (int k = 0; k < 4 && !g->st; k++) { /* the batcher wants the same tensors: g owns them */
    g->inputs = bm_grow(g->inputs, &g->cap_inputs, g->ninputs + 1, sizeof *g->inputs);
    rx_rt_tensor_retain(w.t[k]);
    wi[k] = g->ninputs;
    g->inputs[g->ninputs++] = w.t[k];
  }
  z = bm_input1(g, zero, AB_H);
  double *c = calloc((size_t)f->n * AB_H, sizeof *c), dzero[AB_H] = {0}, x[AB_H], h[AB_H];
  for (int i = 0; i < f->n && !g->st; i++) {
    int l = f->left[i], r = f->right[i];
    bm_arg args[9] = {l < 0 ? bm_in(bm_input1(g, f->x + (size_t)i * AB_H, AB_H)) : bm_in(z),
                      l < 0 ? bm_in(z) : bm_out(l, 0),
                      l < 0 ? bm_in(z) : bm_out(l, 1),
                      r < 0 ? bm_in(z) : bm_out(r, 0),
                      r < 0 ? bm_in(z) : bm_out(r, 1),
                      bm_in(wi[0]),
                      bm_in(wi[1]),
                      bm_in(wi[2]),
                      bm_in(wi[3])};
    int id = bm_call_add(g, fn, args); /* node i is call i: nodes are in post-order */
    if (g->st) break;
    bm_to_double(f->x + (size_t)i * AB_H, AB_H, x);
    ab_ref_tree_cell(&w, x, l < 0 ? dzero : bm_ref(g, l, 0), l < 0 ? dzero : c + (size_t)l * AB_H,
                     r < 0 ? dzero : bm_ref(g, r, 0), r < 0 ? dzero : c + (size_t)r * AB_H, h,
                     c + (size_t)i * AB_H);
    bm_expect(g, id, 0, h, AB_H);
  }
  free(c);
  ab_weights_free(&w);
  free(f->x);
  free(f);
  return true;
}

/* The sequences lens[0..n) from seed (weights from seed 1803, as test_autobatch). */
static inline void lstm_setup(bm_graph *g, const int *lens, int n, uint64_t seed) {
  ab_seqs q;
  ab_seqs_make(&q, seed, lens, n);
  int fn = bm_fn_add(g, "lstm_cell", "lstm_cell_batched", "bbbsss", 2);
  ab_weights w;
  memset(&w, 0, sizeof w);
  if (!g->st) g->st = ab_weights_make(g->d, 1803, 2, AB_LSTM_GATES, &w);
  int wi[3] = {0};
  for (int k = 0; k < 3 && !g->st; k++) {
    g->inputs = bm_grow(g->inputs, &g->cap_inputs, g->ninputs + 1, sizeof *g->inputs);
    rx_rt_tensor_retain(w.t[k]);
    wi[k] = g->ninputs;
    g->inputs[g->ninputs++] = w.t[k];
  }
  float zero[AB_H] = {0};
  int z = bm_input1(g, zero, AB_H);
  double x[AB_H], h[AB_H], c[AB_H];
  for (int s = 0; s < q.n && !g->st; s++) {
    int prev = -1;
    memset(h, 0, sizeof h);
    memset(c, 0, sizeof c);
    for (int t = 0; t < q.len[s] && !g->st; t++) {
      const float *xt = q.x[s] + (size_t)t * AB_H;
      bm_arg args[6] = {bm_in(bm_input1(g, xt, AB_H)),
                        prev < 0 ? bm_in(z) : bm_out(prev, 0),
                        prev < 0 ? bm_in(z) : bm_out(prev, 1),
                        bm_in(wi[0]),
                        bm_in(wi[1]),
                        bm_in(wi[2])};
      int id = bm_call_add(g, fn, args);
      if (g->st) break;
      bm_to_double(xt, AB_H, x);
      ab_ref_lstm_cell(&w, x, h, c); /* h, c updated in place */
      bm_expect(g, id, 0, h, AB_H);
      prev = id;
    }
  }
  ab_weights_free(&w);
  ab_seqs_free(&q);
}

#endif
