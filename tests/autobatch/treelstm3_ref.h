/* tests/autobatch/treelstm3_ref.h: a TreeLSTM over constituency parse trees with three cell
 * functions, leaf, unary and binary (tests/autobatch/treelstm2_cell.rx's leaf and node cells and
 * treelstm3_cell.rx's unary cell, hidden 32), as a call graph (call_graph.h) with its reference
 * in double from the cells' definitions; every node's h and c are checked.
 *
 * The trees: a random binary tree over 1..max_leaves leaves (a random split at each node, as
 * acrobat_models.h's ab_tree_build), and above every node a chain of unary nodes, as
 * constituency trees have (a part-of-speech tag over each word, S -> VP, NP -> NN): above a leaf
 * one with probability T3_P_LEAF %, above an inner node one with T3_P_INNER %, each further one
 * with half the previous probability, at most T3_MAX_CHAIN. Unlike the two-cell TreeLSTM, the
 * order of the functions' batches matters here: at one depth a unary and a binary node need two
 * batches, and a unary node off the longest chain can wait for the unary nodes of a later depth,
 * so the heuristics make more batches than the longest chain (docs/autobatch.md, "Policies"). */
#ifndef RX_TREELSTM3_REF_H
#define RX_TREELSTM3_REF_H

#include "treelstm2_ref.h"

enum { T3_P_LEAF = 70, T3_P_INNER = 30, T3_MAX_CHAIN = 2, T3_MAX_NODES = 4096 };

typedef struct t3_tree {
  bm_graph *g;
  int fl, fu, fn; /* the three functions */
  int wi[7];      /* the weights' inputs: w, bl, ul, ur, b, uu, bu */
  const t2_w *w;
  const float *uu, *bu;
  uint64_t s;
  int n, height; /* calls made; the longest chain of calls */
  int depth[T3_MAX_NODES];
} t3_tree;

static inline void t3_ref_unary(const float *uu, const float *bu, const double *hc,
                                const double *cc, double *h, double *c) {
  double g[4 * T2_H];
  bm_vecmat(hc, uu, T2_H, 4 * T2_H, g, false);
  for (int j = 0; j < T2_H; j++) {
    double v[4];
    for (int k = 0; k < 4; k++) v[k] = g[k * T2_H + j] + bu[k * T2_H + j];
    c[j] = bm_sigmoid(v[0]) * tanh(v[3]) + bm_sigmoid(v[1]) * cc[j];
    h[j] = bm_sigmoid(v[2]) * tanh(c[j]);
  }
}

/* Records call id's reference outputs and depth (1 + its children's largest); -1 on an error. */
static inline int t3_done(t3_tree *t, int id, const double *h, const double *c, int depth) {
  if (t->g->st) return -1;
  bm_expect(t->g, id, 0, h, T2_H);
  bm_expect(t->g, id, 1, c, T2_H);
  t->depth[id] = depth;
  if (depth > t->height) t->height = depth;
  t->n++;
  return id;
}

/* The unary chain above node id (p: the first link's probability in %); the chain's top. */
static inline int t3_chain(t3_tree *t, int id, int p) {
  double h[T2_H], c[T2_H];
  for (int k = 0; id >= 0 && k < T3_MAX_CHAIN && (int)(ab_rand(&t->s) % 100) < p; k++, p /= 2) {
    if (t->n == T3_MAX_NODES) return -1;
    bm_arg args[4] = {bm_out(id, 0), bm_out(id, 1), bm_in(t->wi[5]), bm_in(t->wi[6])};
    int u = bm_call_add(t->g, t->fu, args);
    if (t->g->st) return -1;
    t3_ref_unary(t->uu, t->bu, bm_ref(t->g, id, 0), bm_ref(t->g, id, 1), h, c);
    id = t3_done(t, u, h, c, t->depth[id] + 1);
  }
  return id;
}

/* A tree over `leaves` leaves (children before parents: call ids in post-order); its root. */
static inline int t3_build(t3_tree *t, const float *words, int leaves) {
  double x[T2_H], h[T2_H], c[T2_H];
  if (t->n + T3_MAX_CHAIN + 1 > T3_MAX_NODES) return -1;
  if (leaves == 1) { /* a word: its embedding is call n's row of words */
    const float *e = words + (size_t)t->n * T2_H;
    for (int j = 0; j < T2_H; j++) x[j] = e[j];
    bm_arg args[3] = {bm_in(bm_input1(t->g, e, T2_H)), bm_in(t->wi[0]), bm_in(t->wi[1])};
    int id = bm_call_add(t->g, t->fl, args);
    if (t->g->st) return -1;
    t2_ref_leaf(t->w, x, h, c);
    return t3_chain(t, t3_done(t, id, h, c, 1), T3_P_LEAF);
  }
  int nl = 1 + (int)(ab_rand(&t->s) % (uint32_t)(leaves - 1));
  int l = t3_build(t, words, nl), r = l < 0 ? -1 : t3_build(t, words, leaves - nl);
  if (r < 0) return -1;
  bm_arg args[7] = {bm_out(l, 0),    bm_out(l, 1),    bm_out(r, 0),   bm_out(r, 1),
                    bm_in(t->wi[2]), bm_in(t->wi[3]), bm_in(t->wi[4])};
  int id = bm_call_add(t->g, t->fn, args);
  if (t->g->st) return -1;
  t2_ref_node(t->w, bm_ref(t->g, l, 0), bm_ref(t->g, l, 1), bm_ref(t->g, r, 0), bm_ref(t->g, r, 1),
              h, c);
  int d = 1 + (t->depth[l] > t->depth[r] ? t->depth[l] : t->depth[r]);
  return t3_chain(t, t3_done(t, id, h, c, d), T3_P_INNER);
}

/* ntrees trees of 1..max_leaves leaves from seed; *out_height: the longest chain of calls (a
 * lower bound on the launches of any policy). False when the forest is too large. */
static inline bool treelstm3_setup(bm_graph *g, int ntrees, int max_leaves, uint64_t seed,
                                   int *out_height) {
  float *words = malloc(sizeof *words * T3_MAX_NODES * T2_H); /* a word embedding per call id */
  t2_w *w = malloc(sizeof *w);
  t3_tree *t = malloc(sizeof *t);
  float *uu = malloc(sizeof *uu * T2_H * 4 * T2_H), *bu = malloc(sizeof *bu * 4 * T2_H);
  bool ok = words && w && t && uu && bu;
  if (ok) {
    memset(t, 0, sizeof *t);
    t->g = g;
    t->w = w;
    t->uu = uu;
    t->bu = bu;
    t->s = seed; /* the trees' shapes; the weights and words from seed + 1 */
    t->fl = bm_fn_add(g, "tree_leaf_cell", "tree_leaf_cell_batched", "bss", 2);
    t->fu = bm_fn_add(g, "tree_unary_cell", "tree_unary_cell_batched", "bbss", 2);
    t->fn = bm_fn_add(g, "tree_node_cell", "tree_node_cell_batched", "bbbbsss", 2);
    uint64_t s = seed + 1;
    ab_fill(&s, w->w, sizeof w->w / sizeof *w->w, 0.3f);
    ab_fill(&s, w->bl, sizeof w->bl / sizeof *w->bl, 0.2f);
    ab_fill(&s, w->ul, sizeof w->ul / sizeof *w->ul, 0.3f);
    ab_fill(&s, w->ur, sizeof w->ur / sizeof *w->ur, 0.3f);
    ab_fill(&s, w->b, sizeof w->b / sizeof *w->b, 0.2f);
    ab_fill(&s, uu, (size_t)T2_H * 4 * T2_H, 0.3f);
    ab_fill(&s, bu, (size_t)4 * T2_H, 0.2f);
    ab_fill(&s, words, (size_t)T3_MAX_NODES * T2_H, 1.0f);
    int wi[7] = {bm_input2(g, w->w, T2_H, 3 * T2_H),  bm_input1(g, w->bl, 3 * T2_H),
                 bm_input2(g, w->ul, T2_H, 5 * T2_H), bm_input2(g, w->ur, T2_H, 5 * T2_H),
                 bm_input1(g, w->b, 5 * T2_H),        bm_input2(g, uu, T2_H, 4 * T2_H),
                 bm_input1(g, bu, 4 * T2_H)};
    memcpy(t->wi, wi, sizeof wi);
    for (int k = 0; k < ntrees && ok && !g->st; k++)
      ok = t3_build(t, words, 1 + (int)(ab_rand(&t->s) % (uint32_t)max_leaves)) >= 0 || g->st;
    *out_height = t->height;
  }
  free(words);
  free(w);
  free(t);
  free(uu);
  free(bu);
  return ok;
}

#endif
