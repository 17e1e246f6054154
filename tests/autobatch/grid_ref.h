/* tests/autobatch/grid_ref.h: the lattice model, a 2-D grid RNN (tests/autobatch/grid_cell.rx,
 * tanh units, hidden 32) over grids of the given sizes, one call per cell, as a call graph
 * (call_graph.h), with its reference in double written from the cell's definition:
 * h(i, j) = tanh(x(i, j) Wx + h(i - 1, j) Wu + h(i, j - 1) Wl + b), zero states off the grid.
 * A grid rather than a lattice LSTM: each cell has exactly two predecessors, so one fixed-arity
 * cell and no padding of a variable number of incoming words; the dependencies are the lattice
 * case's all the same (a DAG with joins, not a chain or a tree: a cell is ready when both of its
 * predecessors are), and a batcher runs it by anti-diagonals. Every cell's h is checked. */
#ifndef RX_GRID_REF_H
#define RX_GRID_REF_H

#include "acrobat_models.h"
#include "call_graph.h"

enum { GRID_H = 32, GRID_HH = GRID_H * GRID_H };

static inline void grid_ref_cell(const float *const *w, const float *b, const double *x,
                                 const double *hu, const double *hl, double *h) {
  bm_vecmat(x, w[0], GRID_H, GRID_H, h, false);
  bm_vecmat(hu, w[1], GRID_H, GRID_H, h, true);
  bm_vecmat(hl, w[2], GRID_H, GRID_H, h, true);
  for (int j = 0; j < GRID_H; j++) h[j] = tanh(h[j] + b[j]);
}

/* Grids rows[k] x cols[k], k < n, inputs and weights from seed. */
static inline void grid_setup(bm_graph *g, const int *rows, const int *cols, int n, uint64_t seed) {
  int fn = bm_fn_add(g, "grid_cell", "grid_cell_batched", "bbbssss", 1);
  uint64_t s = seed;
  float w[3][GRID_HH], b[GRID_H], x[GRID_H], zero[GRID_H] = {0};
  for (int k = 0; k < 3; k++) ab_fill(&s, w[k], GRID_HH, 0.3f);
  ab_fill(&s, b, GRID_H, 0.2f);
  int wi[4] = {bm_input2(g, w[0], GRID_H, GRID_H), bm_input2(g, w[1], GRID_H, GRID_H),
               bm_input2(g, w[2], GRID_H, GRID_H), bm_input1(g, b, GRID_H)};
  int z = bm_input1(g, zero, GRID_H);
  const float *wp[3] = {w[0], w[1], w[2]};
  double dzero[GRID_H] = {0}, dx[GRID_H], h[GRID_H];
  for (int k = 0; k < n && !g->st; k++) {
    int *id = malloc(sizeof *id * (size_t)rows[k] * (size_t)cols[k]);
    for (int i = 0; i < rows[k] && !g->st; i++)
      for (int j = 0; j < cols[k] && !g->st; j++) {
        int up = i ? id[(i - 1) * cols[k] + j] : -1, left = j ? id[i * cols[k] + j - 1] : -1;
        ab_fill(&s, x, GRID_H, 1.0f);
        bm_to_double(x, GRID_H, dx);
        bm_arg args[7] = {bm_in(bm_input1(g, x, GRID_H)),
                          up < 0 ? bm_in(z) : bm_out(up, 0),
                          left < 0 ? bm_in(z) : bm_out(left, 0),
                          bm_in(wi[0]),
                          bm_in(wi[1]),
                          bm_in(wi[2]),
                          bm_in(wi[3])};
        int c = id[i * cols[k] + j] = bm_call_add(g, fn, args);
        if (g->st) break;
        grid_ref_cell(wp, b, dx, up < 0 ? dzero : bm_ref(g, up, 0),
                      left < 0 ? dzero : bm_ref(g, left, 0), h);
        bm_expect(g, c, 0, h, GRID_H);
      }
    free(id);
  }
}

#endif
