/* tests/autobatch/encoder_ref.h: the early-exit model, a stack of post-norm transformer encoder
 * layers (tests/autobatch/encoder_cell.rx: 8 tokens, model 32, 2 heads, feed-forward 64; each
 * layer its own weights) where each sample stops after its own number of layers, as a call graph
 * (call_graph.h): sample s makes depth[s] calls, layer l's with layer l's weights. The exit is a
 * fixed per-sample depth drawn at random (1..layers, seeded) rather than a decision on the host
 * from each layer's output (a norm threshold): the calls and their dependencies are then known
 * before the run, so the whole program is submitted at once, and a threshold decision would
 * differ between runs whose float32 results differ in the last bits. The reference in double from
 * the layer's definition (Vaswani et al. 2017): per head softmax(q k^T / sqrt(16)) v, the heads
 * concatenated, y = LN(x + a Wo + bo), out = LN(y + relu(y W1 + b1) W2 + b2), LN with epsilon
 * 1e-5 over the 32 features. Every layer's output of every sample is checked. */
#ifndef RX_ENCODER_REF_H
#define RX_ENCODER_REF_H

#include "acrobat_models.h"
#include "call_graph.h"

enum { ENC_T = 8, ENC_D = 32, ENC_HEADS = 2, ENC_DK = 16, ENC_F = 64, ENC_X = ENC_T * ENC_D };
enum { ENC_NW = 16 }; /* weights per layer: wq bq wk bk wv bv wo bo g1 be1 w1 b1 w2 b2 g2 be2 */

static const int enc_rows[ENC_NW] = {ENC_D, 0, ENC_D, 0, ENC_D, 0, ENC_D, 0,
                                     0,     0, ENC_D, 0, ENC_F, 0, 0,     0};
static const int enc_cols[ENC_NW] = {ENC_D, ENC_D, ENC_D, ENC_D, ENC_D, ENC_D, ENC_D, ENC_D,
                                     ENC_D, ENC_D, ENC_F, ENC_F, ENC_D, ENC_D, ENC_D, ENC_D};

static inline void enc_ref_ln(double *x, const float *g, const float *b) {
  double mean = 0, var = 0;
  for (int j = 0; j < ENC_D; j++) mean += x[j];
  mean /= ENC_D;
  for (int j = 0; j < ENC_D; j++) var += (x[j] - mean) * (x[j] - mean);
  var /= ENC_D;
  for (int j = 0; j < ENC_D; j++) x[j] = (x[j] - mean) / sqrt(var + 1e-5) * g[j] + b[j];
}

/* One layer: out [T, D] from x [T, D] with the layer's weights w[ENC_NW]. */
static inline void enc_ref_layer(const float *const *w, const double *x, double *out) {
  double q[ENC_X], k[ENC_X], v[ENC_X], a[ENC_X], y[ENC_X], hid[ENC_F];
  for (int t = 0; t < ENC_T; t++) {
    bm_vecmat(x + t * ENC_D, w[0], ENC_D, ENC_D, q + t * ENC_D, false);
    bm_vecmat(x + t * ENC_D, w[2], ENC_D, ENC_D, k + t * ENC_D, false);
    bm_vecmat(x + t * ENC_D, w[4], ENC_D, ENC_D, v + t * ENC_D, false);
    for (int j = 0; j < ENC_D; j++)
      q[t * ENC_D + j] += w[1][j], k[t * ENC_D + j] += w[3][j], v[t * ENC_D + j] += w[5][j];
  }
  for (int h = 0; h < ENC_HEADS; h++)
    for (int t = 0; t < ENC_T; t++) {
      double sc[ENC_T], mx = -INFINITY, sum = 0;
      for (int u = 0; u < ENC_T; u++) {
        double d = 0;
        for (int j = 0; j < ENC_DK; j++)
          d += q[t * ENC_D + h * ENC_DK + j] * k[u * ENC_D + h * ENC_DK + j];
        sc[u] = d / sqrt((double)ENC_DK);
        mx = fmax(mx, sc[u]);
      }
      for (int u = 0; u < ENC_T; u++) sum += sc[u] = exp(sc[u] - mx);
      for (int j = 0; j < ENC_DK; j++) {
        double s = 0;
        for (int u = 0; u < ENC_T; u++) s += sc[u] / sum * v[u * ENC_D + h * ENC_DK + j];
        a[t * ENC_D + h * ENC_DK + j] = s;
      }
    }
  for (int t = 0; t < ENC_T; t++) {
    double *yt = y + t * ENC_D, *ot = out + t * ENC_D;
    bm_vecmat(a + t * ENC_D, w[6], ENC_D, ENC_D, yt, false);
    for (int j = 0; j < ENC_D; j++) yt[j] += w[7][j] + x[t * ENC_D + j];
    enc_ref_ln(yt, w[8], w[9]);
    bm_vecmat(yt, w[10], ENC_D, ENC_F, hid, false);
    for (int j = 0; j < ENC_F; j++) hid[j] = fmax(0, hid[j] + w[11][j]);
    bm_vecmat(hid, w[12], ENC_F, ENC_D, ot, false);
    for (int j = 0; j < ENC_D; j++) ot[j] += w[13][j] + yt[j];
    enc_ref_ln(ot, w[14], w[15]);
  }
}

/* nsamples samples through `layers` layers, sample s stopping after depth[s] (drawn in
 * 1..layers); *out_max_depth: the deepest. */
static inline void encoder_setup(bm_graph *g, int nsamples, int layers, uint64_t seed,
                                 int *out_max_depth) {
  int fn = bm_fn_add(g, "encoder_cell", "encoder_cell_batched",
                     "bsssssssssssssss"
                     "s",
                     1);
  uint64_t s = seed;
  float *w = malloc(sizeof(float) * (size_t)layers * ENC_NW * ENC_D * ENC_F);
  const float **wl = malloc(sizeof *wl * (size_t)layers * ENC_NW);
  int *wi = malloc(sizeof *wi * (size_t)layers * ENC_NW);
  float *p = w;
  for (int l = 0; l < layers; l++)
    for (int k = 0; k < ENC_NW; k++) {
      int n = (enc_rows[k] ? enc_rows[k] : 1) * enc_cols[k];
      bool gain = k == 8 || k == 14;
      ab_fill(&s, p, (size_t)n, enc_rows[k] ? 1.0f / sqrtf((float)enc_rows[k]) : 0.2f);
      for (int j = 0; gain && j < n; j++) p[j] += 1;
      wi[l * ENC_NW + k] =
          enc_rows[k] ? bm_input2(g, p, enc_rows[k], enc_cols[k]) : bm_input1(g, p, enc_cols[k]);
      wl[l * ENC_NW + k] = p;
      p += n;
    }
  float x[ENC_X];
  double dx[ENC_X], y[ENC_X];
  *out_max_depth = 0;
  for (int smp = 0; smp < nsamples && !g->st; smp++) {
    int depth = 1 + (int)(ab_rand(&s) % (uint32_t)layers), prev = -1;
    *out_max_depth = depth > *out_max_depth ? depth : *out_max_depth;
    ab_fill(&s, x, ENC_X, 1.0f);
    bm_to_double(x, ENC_X, dx);
    bm_arg first = bm_in(bm_input2(g, x, ENC_T, ENC_D));
    for (int l = 0; l < depth && !g->st; l++) {
      bm_arg args[1 + ENC_NW];
      args[0] = prev < 0 ? first : bm_out(prev, 0);
      for (int k = 0; k < ENC_NW; k++) args[1 + k] = bm_in(wi[l * ENC_NW + k]);
      int c = bm_call_add(g, fn, args);
      if (g->st) break;
      enc_ref_layer(wl + l * ENC_NW, prev < 0 ? dx : bm_ref(g, prev, 0), y);
      bm_expect(g, c, 0, y, ENC_X);
      prev = c;
    }
  }
  free(wi);
  free(wl);
  free(w);
}

#endif
