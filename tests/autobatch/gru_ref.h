/* tests/autobatch/gru_ref.h: the chain model with a GRU cell (tests/autobatch/gru_cell.rx, hidden
 * 64) over sequences of the given lengths, one call per step from a zero state, as a call graph
 * (call_graph.h), with its reference in double written from the cell's definition (Cho et al.
 * 2014, PyTorch's form): r = sigmoid(x Wxr + bxr + h Whr + bhr), z likewise,
 * n = tanh(x Wxn + bxn + r (h Whn + bhn)), h' = (1 - z) n + z h. Every step's h is checked. */
#ifndef RX_GRU_REF_H
#define RX_GRU_REF_H

#include "acrobat_models.h"
#include "call_graph.h"

enum { GRU_H = 64, GRU_G = 3 * GRU_H };

static inline void gru_ref_cell(const float *wx, const float *wh, const float *bx, const float *bh,
                                const double *x, const double *h, double *out) {
  double gx[GRU_G], gh[GRU_G];
  bm_vecmat(x, wx, GRU_H, GRU_G, gx, false);
  bm_vecmat(h, wh, GRU_H, GRU_G, gh, false);
  for (int j = 0; j < GRU_G; j++) gx[j] += bx[j], gh[j] += bh[j];
  for (int j = 0; j < GRU_H; j++) {
    double r = bm_sigmoid(gx[j] + gh[j]), z = bm_sigmoid(gx[GRU_H + j] + gh[GRU_H + j]);
    double n = tanh(gx[2 * GRU_H + j] + r * gh[2 * GRU_H + j]);
    out[j] = (1 - z) * n + z * h[j];
  }
}

/* The sequences lens[0..n) (each step a call of gru_cell), inputs and weights from seed. */
static inline void gru_setup(bm_graph *g, const int *lens, int n, uint64_t seed) {
  int fn = bm_fn_add(g, "gru_cell", "gru_cell_batched", "bbssss", 1);
  uint64_t s = seed;
  float *wx = malloc(sizeof(float) * GRU_H * GRU_G), *wh = malloc(sizeof(float) * GRU_H * GRU_G);
  float bx[GRU_G], bh[GRU_G], zero[GRU_H] = {0}, x[GRU_H];
  ab_fill(&s, wx, (size_t)GRU_H * GRU_G, 0.2f);
  ab_fill(&s, wh, (size_t)GRU_H * GRU_G, 0.2f);
  ab_fill(&s, bx, GRU_G, 0.2f);
  ab_fill(&s, bh, GRU_G, 0.2f);
  int w[4] = {bm_input2(g, wx, GRU_H, GRU_G), bm_input2(g, wh, GRU_H, GRU_G),
              bm_input1(g, bx, GRU_G), bm_input1(g, bh, GRU_G)};
  int z = bm_input1(g, zero, GRU_H);
  double dzero[GRU_H] = {0}, dx[GRU_H], h[GRU_H];
  for (int q = 0; q < n && !g->st; q++) {
    int prev = -1;
    for (int t = 0; t < lens[q] && !g->st; t++) {
      ab_fill(&s, x, GRU_H, 1.0f);
      bm_to_double(x, GRU_H, dx);
      bm_arg args[6] = {bm_in(bm_input1(g, x, GRU_H)),
                        prev < 0 ? bm_in(z) : bm_out(prev, 0),
                        bm_in(w[0]),
                        bm_in(w[1]),
                        bm_in(w[2]),
                        bm_in(w[3])};
      int c = bm_call_add(g, fn, args);
      if (g->st) break;
      gru_ref_cell(wx, wh, bx, bh, dx, prev < 0 ? dzero : bm_ref(g, prev, 0), h);
      bm_expect(g, c, 0, h, GRU_H);
      prev = c;
    }
  }
  free(wx);
  free(wh);
}

#endif
