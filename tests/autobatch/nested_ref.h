/* tests/autobatch/nested_ref.h: the nested model, an RNN of RNNs (tests/autobatch/nested_cell.rx,
 * hidden 32 both) over sentences of the given numbers of words, each word of 1..max_chars
 * characters (seeded), as a call graph (call_graph.h): per word, one char_cell call per character
 * from a zero state, then one word_cell call from the word's embedding, its last character state
 * and the previous word's state. Its reference in double from the cells' definitions:
 * s' = tanh(c Wc + s Uc + bc), h' = tanh(e We + s Ws + h Uw + bw). Every call's output is
 * checked. Two cell functions: a batcher that runs one function per round alternates them. */
#ifndef RX_NESTED_REF_H
#define RX_NESTED_REF_H

#include "acrobat_models.h"
#include "call_graph.h"

enum { NEST_H = 32, NEST_HH = NEST_H * NEST_H };

/* y = tanh(sum_k in[k] w[k] + b) over nin inputs of NEST_H. */
static inline void nested_ref_cell(const float *const *w, const float *b, const double *const *in,
                                   int nin, double *y) {
  for (int k = 0; k < nin; k++) bm_vecmat(in[k], w[k], NEST_H, NEST_H, y, k > 0);
  for (int j = 0; j < NEST_H; j++) y[j] = tanh(y[j] + b[j]);
}

/* Sentences of words[k] words, k < n. */
static inline void nested_setup(bm_graph *g, const int *words, int n, int max_chars,
                                uint64_t seed) {
  int fc = bm_fn_add(g, "char_cell", "char_cell_batched", "bbsss", 1);
  int fw = bm_fn_add(g, "word_cell", "word_cell_batched", "bbbssss", 1);
  uint64_t s = seed;
  float w[5][NEST_HH], bc[NEST_H], bw[NEST_H], x[NEST_H], zero[NEST_H] = {0};
  for (int k = 0; k < 5; k++) ab_fill(&s, w[k], NEST_HH, 0.3f);
  ab_fill(&s, bc, NEST_H, 0.2f);
  ab_fill(&s, bw, NEST_H, 0.2f);
  int wi[5], bci, bwi, z;
  for (int k = 0; k < 5; k++) wi[k] = bm_input2(g, w[k], NEST_H, NEST_H);
  bci = bm_input1(g, bc, NEST_H);
  bwi = bm_input1(g, bw, NEST_H);
  z = bm_input1(g, zero, NEST_H);
  const float *wc[2] = {w[0], w[1]}, *ww[3] = {w[2], w[3], w[4]};
  double dzero[NEST_H] = {0}, dx[NEST_H], y[NEST_H];
  for (int q = 0; q < n && !g->st; q++) {
    int prev = -1;
    for (int t = 0; t < words[q] && !g->st; t++) {
      int nchars = 1 + (int)(ab_rand(&s) % (uint32_t)max_chars), last = -1;
      for (int c = 0; c < nchars && !g->st; c++) {
        ab_fill(&s, x, NEST_H, 1.0f);
        bm_to_double(x, NEST_H, dx);
        bm_arg args[5] = {bm_in(bm_input1(g, x, NEST_H)), last < 0 ? bm_in(z) : bm_out(last, 0),
                          bm_in(wi[0]), bm_in(wi[1]), bm_in(bci)};
        int id = bm_call_add(g, fc, args);
        if (g->st) break;
        const double *in[2] = {dx, last < 0 ? dzero : bm_ref(g, last, 0)};
        nested_ref_cell(wc, bc, in, 2, y);
        bm_expect(g, id, 0, y, NEST_H);
        last = id;
      }
      ab_fill(&s, x, NEST_H, 1.0f);
      bm_to_double(x, NEST_H, dx);
      bm_arg args[7] = {bm_in(bm_input1(g, x, NEST_H)),
                        bm_out(last, 0),
                        prev < 0 ? bm_in(z) : bm_out(prev, 0),
                        bm_in(wi[2]),
                        bm_in(wi[3]),
                        bm_in(wi[4]),
                        bm_in(bwi)};
      int id = bm_call_add(g, fw, args);
      if (g->st) break;
      const double *in[3] = {dx, bm_ref(g, last, 0), prev < 0 ? dzero : bm_ref(g, prev, 0)};
      nested_ref_cell(ww, bw, in, 3, y);
      bm_expect(g, id, 0, y, NEST_H);
      prev = id;
    }
  }
}

#endif
