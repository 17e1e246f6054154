/* tests/autobatch/grain_ref.h: the grain-size models (issue 36, docs/autobatch.md "Grain size")
 * as call graphs (call_graph.h), each in two forms over the same inputs and weights, so that the
 * batcher's launches and copies of a unit of several cells can be set against the one-cell form:
 *   - a 2-layer stacked LSTM (hidden 64) over sequences: per time step either one call of the
 *     unit stack_step (tests/autobatch/grain_cells.rx: layer 1's lstm_cell, then layer 2's over
 *     its h) or two calls of lstm_cell (layer 1's weights, then layer 2's);
 *   - a grain-2 LSTM chain: per sequence, lstm_cell2 (two steps in one unit) while two or more
 *     steps remain and lstm_cell for the last odd step, or lstm_cell at every step.
 * The reference is acrobat_models.h's double LSTM cell (ab_ref_lstm_cell), applied step by step
 * and layer by layer from the models' definitions; every step's h and c (both layers') is
 * checked. */
#ifndef RX_GRAIN_REF_H
#define RX_GRAIN_REF_H

#include "acrobat_models.h"
#include "call_graph.h"

/* w's three device tensors as inputs of g (g holds a reference to each): their indices in wi. */
static inline void grain_weights(bm_graph *g, ab_weights *w, uint64_t seed, int *wi) {
  memset(w, 0, sizeof *w);
  if (!g->st) g->st = ab_weights_make(g->d, seed, 2, AB_LSTM_GATES, w);
  for (int k = 0; k < 3 && !g->st; k++) { /* the batcher wants the same tensors: g owns them */
    g->inputs = bm_grow(g->inputs, &g->cap_inputs, g->ninputs + 1, sizeof *g->inputs);
    rx_rt_tensor_retain(w->t[k]);
    wi[k] = g->ninputs;
    g->inputs[g->ninputs++] = w->t[k];
  }
}

/* The 2-layer stacked LSTM over sequences lens[0..n) (inputs from seed; layer 1's weights from
 * seed 3611, layer 2's from 3612): unit set, one stack_step call per step (outputs h1, c1, h2,
 * c2); else two lstm_cell calls per step (layer 1's, then layer 2's reading its h). */
static inline void stacked_setup(bm_graph *g, const int *lens, int n, uint64_t seed, bool unit) {
  ab_seqs q;
  ab_seqs_make(&q, seed, lens, n);
  int fn = unit ? bm_fn_add(g, "stack_step", "stack_step_batched", "bbbbbssssss", 4)
                : bm_fn_add(g, "lstm_cell", "lstm_cell_batched", "bbbsss", 2);
  ab_weights w1, w2;
  int wi1[3] = {0}, wi2[3] = {0};
  grain_weights(g, &w1, 3611, wi1);
  grain_weights(g, &w2, 3612, wi2);
  float zero[AB_H] = {0};
  int z = bm_input1(g, zero, AB_H);
  double x[AB_H], h1[AB_H], c1[AB_H], h2[AB_H], c2[AB_H];
  for (int s = 0; s < q.n && !g->st; s++) {
    int p1 = -1, p2 = -1;          /* the calls holding layer 1's and layer 2's state */
    int o1 = 0, o2 = unit ? 2 : 0; /* their outputs' first index (h; c next) */
    memset(h1, 0, sizeof h1);
    memset(c1, 0, sizeof c1);
    memset(h2, 0, sizeof h2);
    memset(c2, 0, sizeof c2);
    for (int t = 0; t < q.len[s] && !g->st; t++) {
      const float *xt = q.x[s] + (size_t)t * AB_H;
      int xi = bm_input1(g, xt, AB_H);
      bm_arg sh1 = p1 < 0 ? bm_in(z) : bm_out(p1, o1), sc1 = p1 < 0 ? bm_in(z) : bm_out(p1, o1 + 1);
      bm_arg sh2 = p2 < 0 ? bm_in(z) : bm_out(p2, o2), sc2 = p2 < 0 ? bm_in(z) : bm_out(p2, o2 + 1);
      bm_to_double(xt, AB_H, x);
      ab_ref_lstm_cell(&w1, x, h1, c1);
      ab_ref_lstm_cell(&w2, h1, h2, c2);
      if (unit) {
        bm_arg args[11] = {bm_in(xi),     sh1,           sc1,           sh2,
                           sc2,           bm_in(wi1[0]), bm_in(wi1[1]), bm_in(wi1[2]),
                           bm_in(wi2[0]), bm_in(wi2[1]), bm_in(wi2[2])};
        int id = bm_call_add(g, fn, args);
        if (g->st) break;
        bm_expect(g, id, 0, h1, AB_H);
        bm_expect(g, id, 1, c1, AB_H);
        bm_expect(g, id, 2, h2, AB_H);
        bm_expect(g, id, 3, c2, AB_H);
        p1 = p2 = id;
      } else {
        bm_arg a1[6] = {bm_in(xi), sh1, sc1, bm_in(wi1[0]), bm_in(wi1[1]), bm_in(wi1[2])};
        int l1 = bm_call_add(g, fn, a1);
        bm_arg a2[6] = {bm_out(l1, 0), sh2, sc2, bm_in(wi2[0]), bm_in(wi2[1]), bm_in(wi2[2])};
        int l2 = bm_call_add(g, fn, a2);
        if (g->st) break;
        bm_expect(g, l1, 0, h1, AB_H);
        bm_expect(g, l1, 1, c1, AB_H);
        bm_expect(g, l2, 0, h2, AB_H);
        bm_expect(g, l2, 1, c2, AB_H);
        p1 = l1;
        p2 = l2;
      }
    }
  }
  ab_weights_free(&w1);
  ab_weights_free(&w2);
  ab_seqs_free(&q);
}

/* The LSTM chain over sequences lens[0..n) (inputs from seed, weights from seed 3613) in units
 * of `grain` steps: grain 2, lstm_cell2 (outputs h after both steps, c, h after the first) while
 * two or more steps remain, lstm_cell for a last odd step; grain 1, lstm_cell at every step. */
static inline void chain_setup(bm_graph *g, const int *lens, int n, uint64_t seed, int grain) {
  ab_seqs q;
  ab_seqs_make(&q, seed, lens, n);
  int one = bm_fn_add(g, "lstm_cell", "lstm_cell_batched", "bbbsss", 2);
  int two = grain == 2 ? bm_fn_add(g, "lstm_cell2", "lstm_cell2_batched", "bbbbsss", 3) : -1;
  ab_weights w;
  int wi[3] = {0};
  grain_weights(g, &w, 3613, wi);
  float zero[AB_H] = {0};
  int z = bm_input1(g, zero, AB_H);
  double x[AB_H], h[AB_H], c[AB_H];
  for (int s = 0; s < q.n && !g->st; s++) {
    int prev = -1;
    memset(h, 0, sizeof h);
    memset(c, 0, sizeof c);
    for (int t = 0; t < q.len[s] && !g->st;) {
      bm_arg sh = prev < 0 ? bm_in(z) : bm_out(prev, 0), sc = prev < 0 ? bm_in(z) : bm_out(prev, 1);
      const float *xt = q.x[s] + (size_t)t * AB_H;
      int id = 0;
      bm_to_double(xt, AB_H, x);
      ab_ref_lstm_cell(&w, x, h, c);
      if (two >= 0 && q.len[s] - t >= 2) {
        bm_arg args[7] = {bm_in(bm_input1(g, xt, AB_H)),
                          bm_in(bm_input1(g, xt + AB_H, AB_H)),
                          sh,
                          sc,
                          bm_in(wi[0]),
                          bm_in(wi[1]),
                          bm_in(wi[2])};
        id = bm_call_add(g, two, args);
        if (g->st) break;
        bm_expect(g, id, 2, h, AB_H); /* after step t */
        bm_to_double(xt + AB_H, AB_H, x);
        ab_ref_lstm_cell(&w, x, h, c);
        t += 2;
      } else {
        bm_arg args[6] = {
            bm_in(bm_input1(g, xt, AB_H)), sh, sc, bm_in(wi[0]), bm_in(wi[1]), bm_in(wi[2])};
        id = bm_call_add(g, one, args);
        if (g->st) break;
        t += 1;
      }
      bm_expect(g, id, 0, h, AB_H);
      bm_expect(g, id, 1, c, AB_H);
      prev = id;
    }
  }
  ab_weights_free(&w);
  ab_seqs_free(&q);
}

#endif
