/* tests/autobatch/lattice_ref.h: the lattice model, a lattice LSTM (Zhang & Yang 2018;
 * tests/autobatch/lattice_cell.rx, hidden 32) over random word lattices, as a call graph
 * (call_graph.h) with its reference in double written from the cells' definitions (the .rx file's
 * comment). A sentence of n characters gets, at each start b, a word of 2, 3 or 4 characters
 * (ending at e = b + len - 1 < n) with probability 1/2, 1/3 and 1/4 (seeded), at most two words
 * ending at one character (the char cell has two word slots). Calls in order: character j's
 * lattice_char_cell (reading character j - 1 and the words ending at j), then the
 * lattice_word_cell of every word starting at j (reading character j). Two cell functions whose
 * calls are ready at different times: a word may run any time between its first and its last
 * character, so batching the words of several positions together saves launches, which the
 * learned FSM policy finds and the heuristics do not (docs/autobatch.md). Every call's outputs
 * are checked (h and c of a character, cw of a word). */
#ifndef RX_LATTICE_REF_H
#define RX_LATTICE_REF_H

#include "acrobat_models.h"
#include "call_graph.h"

enum { LAT_H = 32, LAT_MAX_CHARS = 256, LAT_SLOTS = 2 };

typedef struct lat_w {
  float wx[LAT_H * 4 * LAT_H], wh[LAT_H * 4 * LAT_H], b[4 * LAT_H];
  float wlx[LAT_H * LAT_H], wlc[LAT_H * LAT_H], bl[LAT_H];
  float ww[LAT_H * 3 * LAT_H], uw[LAT_H * 3 * LAT_H], bw[3 * LAT_H];
} lat_w;

/* Character cell: h, c from x, the previous (hp, cp) and nw <= 2 words' cw. */
static inline void lattice_ref_char(const lat_w *w, const double *x, const double *hp,
                                    const double *cp, const double *const *cw, int nw, double *h,
                                    double *c) {
  double g[4 * LAT_H], xl[LAT_H], l[LAT_H];
  bm_vecmat(x, w->wx, LAT_H, 4 * LAT_H, g, false);
  bm_vecmat(hp, w->wh, LAT_H, 4 * LAT_H, g, true);
  bm_vecmat(x, w->wlx, LAT_H, LAT_H, xl, false);
  for (int j = 0; j < LAT_H; j++) {
    double i = bm_sigmoid(g[j] + w->b[j]), f = bm_sigmoid(g[LAT_H + j] + w->b[LAT_H + j]);
    double o = bm_sigmoid(g[2 * LAT_H + j] + w->b[2 * LAT_H + j]);
    double u = tanh(g[3 * LAT_H + j] + w->b[3 * LAT_H + j]);
    c[j] = f * cp[j] + i * u;
    h[j] = o; /* the output gate, until c is final */
    g[j] = i;
    g[3 * LAT_H + j] = u;
  }
  if (nw) {
    double num[LAT_H], den[LAT_H];
    for (int j = 0; j < LAT_H; j++) {
      den[j] = exp(g[j]);
      num[j] = den[j] * g[3 * LAT_H + j];
    }
    for (int k = 0; k < nw; k++) {
      bm_vecmat(cw[k], w->wlc, LAT_H, LAT_H, l, false);
      for (int j = 0; j < LAT_H; j++) {
        double e = exp(bm_sigmoid(xl[j] + l[j] + w->bl[j]));
        num[j] += e * cw[k][j];
        den[j] += e;
      }
    }
    for (int j = 0; j < LAT_H; j++) c[j] = num[j] / den[j];
  }
  for (int j = 0; j < LAT_H; j++) h[j] *= tanh(c[j]);
}

/* Word cell: cw from the word's embedding xw and its first character's (h, c). */
static inline void lattice_ref_word(const lat_w *w, const double *xw, const double *hb,
                                    const double *cb, double *cw) {
  double g[3 * LAT_H];
  bm_vecmat(xw, w->ww, LAT_H, 3 * LAT_H, g, false);
  bm_vecmat(hb, w->uw, LAT_H, 3 * LAT_H, g, true);
  for (int j = 0; j < LAT_H; j++)
    cw[j] = bm_sigmoid(g[LAT_H + j] + w->bw[LAT_H + j]) * cb[j] +
            bm_sigmoid(g[j] + w->bw[j]) * tanh(g[2 * LAT_H + j] + w->bw[2 * LAT_H + j]);
}

/* Sentences of lens[k] <= LAT_MAX_CHARS characters, k < n, from seed; *out_words: the words. */
static inline void lattice_setup(bm_graph *g, const int *lens, int n, uint64_t seed,
                                 int *out_words) {
  int fc = bm_fn_add(g, "lattice_char_cell", "lattice_char_cell_batched", "bbbbbbbssssss", 2);
  int fw = bm_fn_add(g, "lattice_word_cell", "lattice_word_cell_batched", "bbbsss", 1);
  uint64_t s = seed;
  lat_w *w = malloc(sizeof *w);
  *out_words = 0;
  if (!w) {
    g->st = base_status_make(RX_ERR_INTERNAL, "out of memory");
    return;
  }
  ab_fill(&s, w->wx, sizeof w->wx / sizeof *w->wx, 0.3f);
  ab_fill(&s, w->wh, sizeof w->wh / sizeof *w->wh, 0.3f);
  ab_fill(&s, w->b, sizeof w->b / sizeof *w->b, 0.2f);
  ab_fill(&s, w->wlx, sizeof w->wlx / sizeof *w->wlx, 0.3f);
  ab_fill(&s, w->wlc, sizeof w->wlc / sizeof *w->wlc, 0.3f);
  ab_fill(&s, w->bl, sizeof w->bl / sizeof *w->bl, 0.2f);
  ab_fill(&s, w->ww, sizeof w->ww / sizeof *w->ww, 0.3f);
  ab_fill(&s, w->uw, sizeof w->uw / sizeof *w->uw, 0.3f);
  ab_fill(&s, w->bw, sizeof w->bw / sizeof *w->bw, 0.2f);
  int wi[9] = {bm_input2(g, w->wx, LAT_H, 4 * LAT_H), bm_input2(g, w->wh, LAT_H, 4 * LAT_H),
               bm_input1(g, w->b, 4 * LAT_H),         bm_input2(g, w->wlx, LAT_H, LAT_H),
               bm_input2(g, w->wlc, LAT_H, LAT_H),    bm_input1(g, w->bl, LAT_H),
               bm_input2(g, w->ww, LAT_H, 3 * LAT_H), bm_input2(g, w->uw, LAT_H, 3 * LAT_H),
               bm_input1(g, w->bw, 3 * LAT_H)};
  float zero[LAT_H] = {0}, one[LAT_H], x[LAT_H];
  for (int j = 0; j < LAT_H; j++) one[j] = 1;
  int z = bm_input1(g, zero, LAT_H), on = bm_input1(g, one, LAT_H);
  double dzero[LAT_H] = {0}, dx[LAT_H], h[LAT_H], c[LAT_H];
  static int ends[LAT_MAX_CHARS][LAT_SLOTS], nend[LAT_MAX_CHARS], starts[LAT_MAX_CHARS][3],
      nstart[LAT_MAX_CHARS], chr[LAT_MAX_CHARS];
  for (int q = 0; q < n && !g->st; q++) {
    int len = lens[q] < LAT_MAX_CHARS ? lens[q] : LAT_MAX_CHARS;
    memset(nend, 0, sizeof nend);
    memset(nstart, 0, sizeof nstart);
    for (int b = 0; b < len; b++) /* the lattice: words of 2..4 characters from b */
      for (int wl = 2; wl <= 4; wl++) {
        int e = b + wl - 1;
        if (e < len && ab_rand(&s) % (uint32_t)wl == 0 && nend[e] < LAT_SLOTS)
          starts[b][nstart[b]++] = e, ends[e][nend[e]++] = -1 - b; /* call id filled below */
      }
    for (int j = 0; j < len && !g->st; j++) {
      ab_fill(&s, x, LAT_H, 1.0f);
      bm_to_double(x, LAT_H, dx);
      int p = j ? chr[j - 1] : -1;
      bm_arg args[13] = {
          bm_in(bm_input1(g, x, LAT_H)),   p < 0 ? bm_in(z) : bm_out(p, 0),
          p < 0 ? bm_in(z) : bm_out(p, 1), nend[j] > 0 ? bm_out(ends[j][0], 0) : bm_in(z),
          bm_in(nend[j] > 0 ? on : z),     nend[j] > 1 ? bm_out(ends[j][1], 0) : bm_in(z),
          bm_in(nend[j] > 1 ? on : z)};
      for (int k = 0; k < 6; k++) args[7 + k] = bm_in(wi[k]);
      int id = chr[j] = bm_call_add(g, fc, args);
      if (g->st) break;
      const double *cw[LAT_SLOTS] = {NULL, NULL};
      for (int k = 0; k < nend[j]; k++) cw[k] = bm_ref(g, ends[j][k], 0);
      lattice_ref_char(w, dx, p < 0 ? dzero : bm_ref(g, p, 0), p < 0 ? dzero : bm_ref(g, p, 1), cw,
                       nend[j], h, c);
      bm_expect(g, id, 0, h, LAT_H);
      bm_expect(g, id, 1, c, LAT_H);
      for (int k = 0; k < nstart[j] && !g->st; k++) { /* the words starting at j */
        ab_fill(&s, x, LAT_H, 1.0f);
        bm_to_double(x, LAT_H, dx);
        bm_arg wargs[6] = {bm_in(bm_input1(g, x, LAT_H)),
                           bm_out(id, 0),
                           bm_out(id, 1),
                           bm_in(wi[6]),
                           bm_in(wi[7]),
                           bm_in(wi[8])};
        int wid = bm_call_add(g, fw, wargs);
        if (g->st) break;
        int e = starts[j][k];
        for (int m = 0; m < nend[e]; m++)
          if (ends[e][m] == -1 - j) ends[e][m] = wid;
        lattice_ref_word(w, dx, bm_ref(g, id, 0), bm_ref(g, id, 1), h);
        bm_expect(g, wid, 0, h, LAT_H);
        ++*out_words;
      }
    }
  }
  free(w);
}

#endif
