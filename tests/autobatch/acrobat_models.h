/* tests/autobatch/acrobat_models.h: the two recursive models ACRoBat evaluates, driven through the
 * runtime only (relaxc/runtime.h, relaxc/autobatch.h), shared by tests/unit/test_autobatch.c and
 * bench/autobatch_bench.c (a header of static functions: each includes it once).
 *
 *   - TreeLSTM: a forest of random binary parse trees (a seeded generator), every node one call
 *     of tree_cell (tests/autobatch/tree_cell.rx): leaves take an embedding and zero children,
 *     inner nodes zero input and their children's (h, c).
 *   - RNN: an LSTM (tests/autobatch/lstm_cell.rx) over sequences of different lengths, one call
 *     of lstm_cell per step, starting from zero state.
 *
 * Each runs two ways: through the batcher (every call submitted with its dependencies, run in
 * batches of the ready calls) and one call at a time (rx_rt_vm_call of the unbatched cell, each
 * output copied out of planned storage on the device). A double-precision host reference of both
 * cells checks the numbers. Hidden size AB_H = 64. */
#ifndef RX_ACROBAT_MODELS_H
#define RX_ACROBAT_MODELS_H

#include "relaxc/autobatch.h"
#include "relaxc/runtime.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* In the runtime library (base/base.h), not in its public headers. */
rx_status base_status_make(rx_status_code code, const char *fmt, ...);

enum {
  AB_H = 64,         /* hidden size of both cells */
  AB_TREE_GATES = 5, /* input, left forget, right forget, output, candidate */
  AB_LSTM_GATES = 4, /* input, forget, output, candidate */
  AB_MAX_NODES = 4096,
  AB_MAX_SEQS = 64,
};

/* ---- a seeded generator (64-bit LCG, the high bits) ---- */
static inline uint32_t ab_rand(uint64_t *s) {
  *s = *s * 6364136223846793005ull + 1442695040888963407ull;
  return (uint32_t)(*s >> 33);
}
static inline float ab_uniform(uint64_t *s, float lo, float hi) {
  return lo + (hi - lo) * (float)(ab_rand(s) & 0xffffff) / (float)0x1000000;
}
static inline void ab_fill(uint64_t *s, float *v, size_t n, float scale) {
  for (size_t i = 0; i < n; i++) v[i] = ab_uniform(s, -scale, scale);
}

/* ---- the forest: nodes in post-order (children before parents) ---- */
typedef struct ab_forest {
  int n;                  /* nodes */
  int left[AB_MAX_NODES]; /* child node, -1 for a leaf */
  int right[AB_MAX_NODES];
  int height[AB_MAX_NODES]; /* 0 for a leaf */
  int nroots;
  int roots[AB_MAX_SEQS];
  int max_height;
  float *x; /* per node: its embedding (leaves) or zeros, AB_H floats each */
} ab_forest;

/* A random binary tree over `leaves` leaves: a random split of the leaves at each node. */
static inline int ab_tree_build(ab_forest *f, uint64_t *s, int leaves) {
  int l = -1, r = -1, h = 0;
  if (leaves > 1) {
    int nl = 1 + (int)(ab_rand(s) % (uint32_t)(leaves - 1));
    l = ab_tree_build(f, s, nl);
    r = ab_tree_build(f, s, leaves - nl);
    if (l < 0 || r < 0) return -1;
    h = 1 + (f->height[l] > f->height[r] ? f->height[l] : f->height[r]);
  }
  if (f->n == AB_MAX_NODES) return -1;
  int id = f->n++;
  f->left[id] = l;
  f->right[id] = r;
  f->height[id] = h;
  if (h > f->max_height) f->max_height = h;
  return id;
}

/* ntrees trees of 1..max_leaves leaves each, from seed; false when over AB_MAX_NODES. */
static inline bool ab_forest_make(ab_forest *f, uint64_t seed, int ntrees, int max_leaves) {
  memset(f, 0, sizeof *f);
  uint64_t s = seed;
  for (int t = 0; t < ntrees && t < AB_MAX_SEQS; t++) {
    int root = ab_tree_build(f, &s, 1 + (int)(ab_rand(&s) % (uint32_t)max_leaves));
    if (root < 0) return false;
    f->roots[f->nroots++] = root;
  }
  f->x = calloc((size_t)f->n * AB_H, sizeof *f->x);
  for (int i = 0; i < f->n; i++)
    if (f->left[i] < 0) ab_fill(&s, f->x + (size_t)i * AB_H, AB_H, 1.0f);
  return true;
}

/* ---- the sequences of the RNN ---- */
typedef struct ab_seqs {
  int n;
  int len[AB_MAX_SEQS];
  int max_len, total;
  float *x[AB_MAX_SEQS]; /* len * AB_H inputs each */
} ab_seqs;

static inline void ab_seqs_make(ab_seqs *q, uint64_t seed, const int *lens, int n) {
  memset(q, 0, sizeof *q);
  uint64_t s = seed;
  for (int i = 0; i < n && i < AB_MAX_SEQS; i++) {
    q->len[q->n] = lens[i];
    q->x[q->n] = malloc(sizeof(float) * (size_t)(lens[i] ? lens[i] : 1) * AB_H);
    ab_fill(&s, q->x[q->n], (size_t)lens[i] * AB_H, 1.0f);
    q->max_len = lens[i] > q->max_len ? lens[i] : q->max_len;
    q->total += lens[i];
    q->n++;
  }
}

static inline void ab_seqs_free(ab_seqs *q) {
  for (int i = 0; i < q->n; i++) free(q->x[i]);
}

/* ---- weights: host copies (for the reference) and device tensors (the shared parameters) ---- */
typedef struct ab_weights {
  int nmat;           /* input matrices: tree 3 (W, Ul, Ur), LSTM 2 (Wx, Wh) */
  int gates;          /* AB_TREE_GATES or AB_LSTM_GATES */
  float *mat[3];      /* [AB_H, gates * AB_H] each */
  float *bias;        /* [gates * AB_H] */
  rx_rt_tensor *t[4]; /* the matrices, then the bias */
} ab_weights;

static inline rx_status ab_weights_make(rx_rt_device *d, uint64_t seed, int nmat, int gates,
                                        ab_weights *w) {
  memset(w, 0, sizeof *w);
  uint64_t s = seed;
  w->nmat = nmat;
  w->gates = gates;
  int64_t ms[2] = {AB_H, gates * AB_H}, bs[1] = {gates * AB_H};
  rx_status st = NULL;
  for (int i = 0; i < nmat && !st; i++) {
    w->mat[i] = malloc(sizeof(float) * AB_H * (size_t)gates * AB_H);
    ab_fill(&s, w->mat[i], (size_t)AB_H * gates * AB_H, 0.2f);
    st = rx_rt_tensor_from_host(d, RX_DTYPE_F32, 2, ms, w->mat[i], &w->t[i]);
  }
  w->bias = malloc(sizeof(float) * (size_t)gates * AB_H);
  ab_fill(&s, w->bias, (size_t)gates * AB_H, 0.2f);
  if (!st) st = rx_rt_tensor_from_host(d, RX_DTYPE_F32, 1, bs, w->bias, &w->t[nmat]);
  return st;
}

static inline void ab_weights_free(ab_weights *w) {
  for (int i = 0; i < 3; i++) free(w->mat[i]);
  free(w->bias);
  for (int i = 0; i < 4; i++) rx_rt_tensor_release(w->t[i]);
}

/* ---- the reference in double: gates = sum_m in[m] mat[m] + bias ---- */
static inline double ab_sigmoid(double v) { return 1 / (1 + exp(-v)); }

static inline void ab_ref_gates(const ab_weights *w, const double *const *in, double *g) {
  int n = w->gates * AB_H;
  for (int j = 0; j < n; j++) {
    double acc = w->bias[j];
    for (int m = 0; m < w->nmat; m++)
      for (int k = 0; k < AB_H; k++) acc += in[m][k] * (double)w->mat[m][(size_t)k * n + j];
    g[j] = acc;
  }
}

/* The tree cell: h, c from x and the children's (h, c). */
static inline void ab_ref_tree_cell(const ab_weights *w, const double *x, const double *hl,
                                    const double *cl, const double *hr, const double *cr, double *h,
                                    double *c) {
  double g[AB_TREE_GATES * AB_H];
  const double *in[3] = {x, hl, hr};
  ab_ref_gates(w, in, g);
  for (int j = 0; j < AB_H; j++) {
    double i = ab_sigmoid(g[j]), fl = ab_sigmoid(g[AB_H + j]), fr = ab_sigmoid(g[2 * AB_H + j]);
    double o = ab_sigmoid(g[3 * AB_H + j]), u = tanh(g[4 * AB_H + j]);
    c[j] = i * u + fl * cl[j] + fr * cr[j];
    h[j] = o * tanh(c[j]);
  }
}

/* The LSTM cell: h, c (updated in place) from x. */
static inline void ab_ref_lstm_cell(const ab_weights *w, const double *x, double *h, double *c) {
  double g[AB_LSTM_GATES * AB_H];
  const double *in[2] = {x, h};
  ab_ref_gates(w, in, g);
  for (int j = 0; j < AB_H; j++) {
    double i = ab_sigmoid(g[j]), f = ab_sigmoid(g[AB_H + j]), o = ab_sigmoid(g[2 * AB_H + j]);
    double u = tanh(g[3 * AB_H + j]);
    c[j] = f * c[j] + i * u;
    h[j] = o * tanh(c[j]);
  }
}

/* Every node's h (n * AB_H doubles) of the forest. */
static inline void ab_ref_forest(const ab_weights *w, const ab_forest *f, double *h_out) {
  double *c = calloc((size_t)f->n * AB_H, sizeof *c), zero[AB_H] = {0}, x[AB_H];
  for (int i = 0; i < f->n; i++) {
    for (int k = 0; k < AB_H; k++) x[k] = f->x[(size_t)i * AB_H + k];
    int l = f->left[i], r = f->right[i];
    const double *hl = l < 0 ? zero : h_out + (size_t)l * AB_H;
    const double *cl = l < 0 ? zero : c + (size_t)l * AB_H;
    const double *hr = r < 0 ? zero : h_out + (size_t)r * AB_H;
    const double *cr = r < 0 ? zero : c + (size_t)r * AB_H;
    ab_ref_tree_cell(w, x, hl, cl, hr, cr, h_out + (size_t)i * AB_H, c + (size_t)i * AB_H);
  }
  free(c);
}

/* The final h of every sequence (n * AB_H doubles). */
static inline void ab_ref_seqs(const ab_weights *w, const ab_seqs *q, double *h_out) {
  for (int s = 0; s < q->n; s++) {
    double h[AB_H] = {0}, c[AB_H] = {0}, x[AB_H];
    for (int t = 0; t < q->len[s]; t++) {
      for (int k = 0; k < AB_H; k++) x[k] = q->x[s][(size_t)t * AB_H + k];
      ab_ref_lstm_cell(w, x, h, c);
    }
    memcpy(h_out + (size_t)s * AB_H, h, sizeof h);
  }
}

/* ---- device inputs: one tensor per leaf embedding / per step input, and a zero vector ---- */
typedef struct ab_inputs {
  rx_rt_tensor **x; /* per node (NULL for inner nodes) or per step of every sequence */
  size_t n;
  rx_rt_tensor *zero; /* f32[AB_H] of zeros */
} ab_inputs;

static inline void ab_inputs_free(ab_inputs *in) {
  for (size_t i = 0; i < in->n; i++) rx_rt_tensor_release(in->x[i]);
  free(in->x);
  rx_rt_tensor_release(in->zero);
  memset(in, 0, sizeof *in);
}

static inline rx_status ab_vec(rx_rt_device *d, const float *v, rx_rt_tensor **out) {
  int64_t shape[1] = {AB_H};
  return rx_rt_tensor_from_host(d, RX_DTYPE_F32, 1, shape, v, out);
}

static inline rx_status ab_inputs_forest(rx_rt_device *d, const ab_forest *f, ab_inputs *in) {
  memset(in, 0, sizeof *in);
  float zero[AB_H] = {0};
  in->x = calloc((size_t)f->n, sizeof *in->x);
  in->n = (size_t)f->n;
  rx_status st = ab_vec(d, zero, &in->zero);
  for (int i = 0; i < f->n && !st; i++)
    if (f->left[i] < 0) st = ab_vec(d, f->x + (size_t)i * AB_H, &in->x[i]);
  return st;
}

static inline rx_status ab_inputs_seqs(rx_rt_device *d, const ab_seqs *q, ab_inputs *in) {
  memset(in, 0, sizeof *in);
  float zero[AB_H] = {0};
  in->x = calloc((size_t)(q->total ? q->total : 1), sizeof *in->x);
  in->n = (size_t)q->total;
  rx_status st = ab_vec(d, zero, &in->zero);
  size_t k = 0;
  for (int s = 0; s < q->n; s++)
    for (int t = 0; t < q->len[s] && !st; t++)
      st = ab_vec(d, q->x[s] + (size_t)t * AB_H, &in->x[k++]);
  return st;
}

/* ---- runs: each fills out[i] with a tensor (retained) per node or per sequence (its h) ---- */

/* A tensor of its own holding t's contents (queued device copy). */
static inline rx_status ab_copy(rx_rt_device *d, rx_rt_tensor *t, rx_rt_tensor **out) {
  rx_status st = rx_rt_tensor_create(d, rx_rt_tensor_dtype(t), rx_rt_tensor_ndim(t),
                                     rx_rt_tensor_shape(t), out);
  return st ? st
            : rx_rt_buffer_copy(rx_rt_tensor_buffer(t), 0, rx_rt_tensor_buffer(*out), 0,
                                rx_rt_tensor_bytes(t));
}

/* Set to run the batchers below with the gather path off (rx_rt_batcher_set_gather: operands
 * stacked by copies, as without an index-array form in the artifact) or the memory planning off
 * (rx_rt_batcher_set_planning: outputs in batch order, a tensor each); both: the batcher as it
 * was before issue 36. */
static bool ab_no_gather, ab_no_plan;

/* The FSM policy's table kept across runs: the first run under RX_RT_BATCH_FSM trains it (on its
 * own calls) and saves it here, later runs of the same model load it (ED-Batch trains once per
 * model); ab_fsm_forget() before another model. */
static unsigned char ab_fsm_bytes[8192];
/* rx_rt_batcher_set_min_batch of the batched runs, when not 0 (the bench's --min-batch). */
static size_t ab_min_batch;
static size_t ab_crossover; /* rx_rt_batcher_set_crossover of lstm_cell when not 0 */
static size_t ab_fsm_len;
static inline void ab_fsm_forget(void) { ab_fsm_len = 0; }

/* rx_rt_batcher_run; under the FSM policy with its table loaded from (or saved into)
 * ab_fsm_bytes. */
static inline rx_status ab_run(rx_rt_batcher *b, rx_rt_batch_policy p) {
  if (p != RX_RT_BATCH_FSM) return rx_rt_batcher_run(b);
  rx_status st = ab_fsm_len ? rx_rt_batcher_policy_load(b, ab_fsm_bytes, ab_fsm_len) : NULL;
  bool save = !ab_fsm_len;
  if (!st) st = rx_rt_batcher_run(b);
  if (!st && save)
    st = rx_rt_batcher_policy_save(b, ab_fsm_bytes, sizeof ab_fsm_bytes, &ab_fsm_len);
  return st;
}

/* The forest through the batcher (fn "tree_cell", batched "tree_cell_batched") under policy p.
 * out[node]: h. */
static inline rx_status ab_forest_batched_p(rx_rt_artifact *a, const ab_forest *f,
                                            const ab_weights *w, const ab_inputs *in,
                                            rx_rt_tensor **out, rx_rt_batcher_stats *stats,
                                            rx_rt_batch_policy p) {
  rx_rt_batcher *b = NULL;
  const bool shared[9] = {false, false, false, false, false, true, true, true, true};
  rx_status st = rx_rt_batcher_create(a, &b);
  if (!st) st = rx_rt_batcher_set_policy(b, p);
  if (!st && ab_min_batch) st = rx_rt_batcher_set_min_batch(b, ab_min_batch);
  if (!st) st = rx_rt_batcher_add_function(b, "tree_cell", "tree_cell_batched", shared, 9);
  if (!st) st = rx_rt_batcher_set_gather(b, !ab_no_gather);
  if (!st) st = rx_rt_batcher_set_planning(b, !ab_no_plan);
  for (int i = 0; i < f->n && !st; i++) {
    rx_rt_batch_arg args[9] = {{0}};
    int l = f->left[i], r = f->right[i];
    args[0].tensor = l < 0 ? in->x[i] : in->zero;
    for (int k = 0; k < 2; k++) { /* (hl, cl), (hr, cr) */
      int ch = k ? r : l;
      for (int o = 0; o < 2; o++) {
        rx_rt_batch_arg *g = &args[1 + 2 * k + o];
        if (ch < 0)
          g->tensor = in->zero;
        else
          g->call = (size_t)ch, g->output = (size_t)o;
      }
    }
    for (int k = 0; k < 4; k++) args[5 + k].tensor = w->t[k];
    size_t id = 0;
    st = rx_rt_batcher_submit(b, "tree_cell", args, 9, &id);
    if (!st && id != (size_t)i) st = base_status_make(RX_ERR_INTERNAL, "call ids out of order");
  }
  if (!st) st = ab_run(b, p);
  for (int i = 0; i < f->n && !st; i++) {
    st = rx_rt_batcher_output(b, (size_t)i, 0, &out[i]);
    if (!st) rx_rt_tensor_retain(out[i]);
  }
  if (stats) rx_rt_batcher_get_stats(b, stats);
  rx_rt_batcher_release(b);
  return st;
}

static inline rx_status ab_forest_batched(rx_rt_artifact *a, const ab_forest *f,
                                          const ab_weights *w, const ab_inputs *in,
                                          rx_rt_tensor **out, rx_rt_batcher_stats *stats) {
  return ab_forest_batched_p(a, f, w, in, out, stats, RX_RT_BATCH_ROUNDS);
}

/* The forest one node at a time (rx_rt_vm_call of tree_cell), outputs copied on the device.
 * out[node]: h; the c's are released before returning. */
static inline rx_status ab_forest_single(rx_rt_artifact *a, const ab_forest *f, const ab_weights *w,
                                         const ab_inputs *in, rx_rt_tensor **out) {
  rx_rt_device *d = rx_rt_artifact_device(a);
  rx_rt_tensor **c = calloc((size_t)f->n, sizeof *c);
  rx_status st = NULL;
  for (int i = 0; i < f->n && !st; i++) {
    int l = f->left[i], r = f->right[i];
    rx_rt_tensor *args[9] = {l < 0 ? in->x[i] : in->zero,
                             l < 0 ? in->zero : out[l],
                             l < 0 ? in->zero : c[l],
                             r < 0 ? in->zero : out[r],
                             r < 0 ? in->zero : c[r],
                             w->t[0],
                             w->t[1],
                             w->t[2],
                             w->t[3]};
    rx_rt_value *res = NULL;
    st = rx_rt_vm_call(a, "tree_cell", args, 9, &res);
    if (!st && rx_rt_value_tuple_size(res) != 2)
      st = base_status_make(RX_ERR_INTERNAL, "tree_cell did not return (h, c)");
    if (!st) st = ab_copy(d, rx_rt_value_tensor(rx_rt_value_tuple_item(res, 0)), &out[i]);
    if (!st) st = ab_copy(d, rx_rt_value_tensor(rx_rt_value_tuple_item(res, 1)), &c[i]);
    rx_rt_value_release(res);
  }
  for (int i = 0; i < f->n; i++) rx_rt_tensor_release(c[i]);
  free(c);
  return st;
}

/* The sequences through the batcher (fn "lstm_cell") under policy p. out[seq]: the last h (NULL
 * for length 0). */
static inline rx_status ab_seqs_batched_p(rx_rt_artifact *a, const ab_seqs *q, const ab_weights *w,
                                          const ab_inputs *in, rx_rt_tensor **out,
                                          rx_rt_batcher_stats *stats, rx_rt_batch_policy p) {
  rx_rt_batcher *b = NULL;
  const bool shared[6] = {false, false, false, true, true, true};
  rx_status st = rx_rt_batcher_create(a, &b);
  if (!st) st = rx_rt_batcher_set_policy(b, p);
  if (!st && ab_min_batch) st = rx_rt_batcher_set_min_batch(b, ab_min_batch);
  if (!st) st = rx_rt_batcher_add_function(b, "lstm_cell", "lstm_cell_batched", shared, 6);
  if (!st && ab_crossover) st = rx_rt_batcher_set_crossover(b, "lstm_cell", ab_crossover);
  if (!st) st = rx_rt_batcher_set_gather(b, !ab_no_gather);
  if (!st) st = rx_rt_batcher_set_planning(b, !ab_no_plan);
  size_t last[AB_MAX_SEQS], k = 0;
  for (int s = 0; s < q->n && !st; s++)
    for (int t = 0; t < q->len[s] && !st; t++) {
      rx_rt_batch_arg args[6] = {{0}};
      args[0].tensor = in->x[k++];
      for (int o = 0; o < 2; o++) {
        if (t == 0)
          args[1 + o].tensor = in->zero;
        else
          args[1 + o].call = last[s], args[1 + o].output = (size_t)o;
      }
      for (int m = 0; m < 3; m++) args[3 + m].tensor = w->t[m];
      st = rx_rt_batcher_submit(b, "lstm_cell", args, 6, &last[s]);
    }
  if (!st) st = ab_run(b, p);
  for (int s = 0; s < q->n && !st; s++) {
    out[s] = NULL;
    if (!q->len[s]) continue;
    st = rx_rt_batcher_output(b, last[s], 0, &out[s]);
    if (!st) rx_rt_tensor_retain(out[s]);
  }
  if (stats) rx_rt_batcher_get_stats(b, stats);
  rx_rt_batcher_release(b);
  return st;
}

static inline rx_status ab_seqs_batched(rx_rt_artifact *a, const ab_seqs *q, const ab_weights *w,
                                        const ab_inputs *in, rx_rt_tensor **out,
                                        rx_rt_batcher_stats *stats) {
  return ab_seqs_batched_p(a, q, w, in, out, stats, RX_RT_BATCH_ROUNDS);
}

/* The sequences one step at a time, each sequence to its end before the next. */
static inline rx_status ab_seqs_single(rx_rt_artifact *a, const ab_seqs *q, const ab_weights *w,
                                       const ab_inputs *in, rx_rt_tensor **out) {
  rx_rt_device *d = rx_rt_artifact_device(a);
  rx_status st = NULL;
  size_t k = 0;
  for (int s = 0; s < q->n && !st; s++) {
    rx_rt_tensor *h = in->zero, *c = in->zero;
    rx_rt_tensor_retain(h);
    rx_rt_tensor_retain(c);
    for (int t = 0; t < q->len[s] && !st; t++) {
      rx_rt_tensor *args[6] = {in->x[k++], h, c, w->t[0], w->t[1], w->t[2]};
      rx_rt_value *res = NULL;
      rx_rt_tensor *h2 = NULL, *c2 = NULL;
      st = rx_rt_vm_call(a, "lstm_cell", args, 6, &res);
      if (!st && rx_rt_value_tuple_size(res) != 2)
        st = base_status_make(RX_ERR_INTERNAL, "lstm_cell did not return (h, c)");
      if (!st) st = ab_copy(d, rx_rt_value_tensor(rx_rt_value_tuple_item(res, 0)), &h2);
      if (!st) st = ab_copy(d, rx_rt_value_tensor(rx_rt_value_tuple_item(res, 1)), &c2);
      rx_rt_value_release(res);
      rx_rt_tensor_release(h);
      rx_rt_tensor_release(c);
      h = h2;
      c = c2;
    }
    out[s] = q->len[s] ? h : NULL;
    if (!q->len[s]) rx_rt_tensor_release(h);
    rx_rt_tensor_release(c);
  }
  return st;
}

#endif
