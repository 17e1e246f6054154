/* The models of issue 36 for the auto-batcher (docs/autobatch.md), each a cell of
 * tests/autobatch/ given its batched form (rx_batch_function, as relaxc compile --batch), its calls
 * submitted with their dependencies through the runtime batcher (relaxc/autobatch.h) and run
 * batched and one call at a time on Vulkan (lavapipe in CI, under the validation layer); both runs
 * are compared with each other and with a C double-precision reference written from the model's
 * definition (tests/autobatch/MODEL_ref.h), every call's every output:
 *   - chain: a GRU (hidden 64) over a ragged batch of sequences of lengths 1, 7, 33, 100;
 *   - tree: an MV-RNN (n = 16: a vector and a matrix per node) over 16 random parse trees of
 *     1..30 leaves;
 *   - lattice: a 2-D grid RNN (hidden 32) over grids 1x1, 1x7, 33x3 and 10x10 (a cell waits on
 *     the cells above and left of it: the batches are anti-diagonals);
 *   - nested: an RNN over words of an RNN over each word's characters (two cell functions,
 *     hidden 32) over sentences of 1, 7 and 33 words of 1..8 characters;
 *   - early exit: 12 samples (8 tokens, model 32, 2 heads) through up to 6 transformer encoder
 *     layers, each sample stopping after its own number of layers (drawn at random);
 *   - and test_autobatch's TreeLSTM (4 trees) and LSTM (lengths 1, 7, 33) as call graphs
 *     (tests/autobatch/acrobat_ref.h), as bench/autobatch_bench.c runs them;
 *   - models of several cell functions where the order of the functions' batches matters
 *     (ED-Batch's): a TreeLSTM with a leaf cell and an inner-node cell (16 trees of 1..30
 *     leaves), a TreeLSTM over constituency trees with leaf, unary and binary cells (8 trees of
 *     1..20 leaves with unary chains: treelstm3_ref.h), and a lattice LSTM (Zhang & Yang:
 *     character cells and word cells that start and end at character positions) over random
 *     lattices of sentences of 1, 7, 33, 100, 20 and 12 characters. The learned FSM policy's
 *     launches are checked against every heuristic's on every model (no more), strictly fewer
 *     than the best heuristic's on the three-cell TreeLSTM and the lattice; on the two-cell
 *     TreeLSTM every policy attains the lower bound (height + 1: every leaf is ready at the
 *     start), which is checked instead.
 * Tolerances: batched vs one at a time 2e-6 relative to max(1, |reference|) (float32: the
 * batched kernels sum in another order; measured at most 9.8e-7; 1e-6 on the three-cell
 * TreeLSTM, measured 1.8e-7), each vs the double reference
 * 1e-5 (measured at most 1e-6). The number of batched calls is checked where the model fixes it:
 * one per depth of the call graph (the chain's longest sequence, the tallest tree, the grids'
 * anti-diagonals, the deepest sample), or one per depth of two calls or more.
 * Every model runs batched under the policies rounds, depth, agenda and fsm (relaxc/autobatch.h),
 * compiled with the batched forms' index-array forms (rx_batch_function_gather), so the batcher's
 * gather path and memory planning are on: each run's checks as above.
 *
 * usage: test_autobatch_models TESTS_DIR */
/* test-needs: runtime */
#include "../autobatch/acrobat_ref.h"
#include "../autobatch/encoder_ref.h"
#include "../autobatch/grid_ref.h"
#include "../autobatch/gru_ref.h"
#include "../autobatch/lattice_ref.h"
#include "../autobatch/mvrnn_ref.h"
#include "../autobatch/nested_ref.h"
#include "../autobatch/treelstm2_ref.h"
#include "../autobatch/treelstm3_ref.h"
#include "base/base.h"
#include "check.h"
#include "driver/driver.h"
#include "ir/ir.h"
#include "relaxc/compiler.h"
#include "support_runtime.h"

#include <stdio.h>

#define BM_TOL_XY 2e-6
/* The batched runs' tolerance against one call at a time: BM_TOL_XY, or issue 36's 1e-6 where a
 * model asks for it (the three-cell TreeLSTM, added with that bound). */
static double tol_xy = BM_TOL_XY;
#define BM_TOL_REF 1e-5

/* The batching policies each model runs under (ONE, one call at a time through the batcher, is
 * the unbatched run's twin and batches nothing); the gather path and the planning on. */
enum { NPOL = 4 };
static const rx_rt_batch_policy policies[NPOL] = {RX_RT_BATCH_ROUNDS, RX_RT_BATCH_DEPTH,
                                                  RX_RT_BATCH_AGENDA, RX_RT_BATCH_FSM};

/* The cells' files and the functions batched in them, with their shared (weight) parameters. */
static const char *cell_files[] = {
    "gru_cell.rx",  "mvrnn_cell.rx", "grid_cell.rx",    "nested_cell.rx",    "encoder_cell.rx",
    "tree_cell.rx", "lstm_cell.rx",  "lattice_cell.rx", "treelstm2_cell.rx", "treelstm3_cell.rx"};
static const struct {
  const char *fn, *out, *shared[16];
  size_t n;
} batched_fns[] = {
    {"gru_cell", "gru_cell_batched", {"wx", "wh", "bx", "bh"}, 4},
    {"mvrnn_cell", "mvrnn_cell_batched", {"w", "bias", "wm"}, 3},
    {"grid_cell", "grid_cell_batched", {"wx", "wu", "wl", "b"}, 4},
    {"char_cell", "char_cell_batched", {"wc", "uc", "bc"}, 3},
    {"word_cell", "word_cell_batched", {"we", "ws", "uw", "bw"}, 4},
    {"tree_cell", "tree_cell_batched", {"w", "ul", "ur", "b"}, 4},
    {"lstm_cell", "lstm_cell_batched", {"wx", "wh", "b"}, 3},
    {"lattice_char_cell", "lattice_char_cell_batched", {"wx", "wh", "b", "wlx", "wlc", "bl"}, 6},
    {"lattice_word_cell", "lattice_word_cell_batched", {"ww", "uw", "bw"}, 3},
    {"tree_leaf_cell", "tree_leaf_cell_batched", {"w", "b"}, 2},
    {"tree_node_cell", "tree_node_cell_batched", {"ul", "ur", "b"}, 3},
    {"tree_unary_cell", "tree_unary_cell_batched", {"uu", "bu"}, 2},
    {"encoder_cell",
     "encoder_cell_batched",
     {"wq", "bq", "wk", "bk", "wv", "bv", "wo", "bo", "g1", "be1", "w1", "b1", "w2", "b2", "g2",
      "be2"},
     16},
};

static bool ok_status(rx_status s, const char *what) {
  CHECK_MSG(!s, "%s: %s", what, rx_status_message(s));
  rx_status_free(s);
  return !s;
}

/* Every cell parsed into one module and batched (bound 1024); NULL after a failed check. */
static rx_module *make_module(const char *tests) {
  char why[4096] = "";
  rx_module *m =
      rxk_parse_autobatch(tests, cell_files, RX_ARRAY_LEN(cell_files), "models", why, sizeof why);
  CHECK_MSG(m != NULL, "%s", why);
  bool ok = m != NULL;
  for (size_t i = 0; ok && i < RX_ARRAY_LEN(batched_fns); i++) {
    char what[128];
    snprintf(what, sizeof what, "batch %s", batched_fns[i].fn);
    ok = ok_status(rx_batch_function(m, batched_fns[i].fn, batched_fns[i].shared, batched_fns[i].n,
                                     1024, batched_fns[i].out),
                   what);
    /* the index-array form too: the batcher's gather path and memory planning on every model */
    char gname[96];
    snprintf(gname, sizeof gname, "%s_gather", batched_fns[i].out);
    ok = ok && ok_status(rx_batch_function_gather(m, batched_fns[i].fn, batched_fns[i].shared,
                                                  batched_fns[i].n, 1024, gname),
                         what);
  }
  if (ok) {
    char *text = rx_module_to_text(m);
    const char *want[] = {
        "graph_fn gru_cell_batched(x: f32[batch, 64], h: f32[batch, 64], wx: f32[64, 192]",
        "graph_fn mvrnn_cell_batched(a: f32[batch, 16], am: f32[batch, 16, 16]",
        ") -> (f32[batch, 16], f32[batch, 16, 16])",
        "graph_fn encoder_cell_batched(x: f32[batch, 8, 32], wq: f32[32, 32]",
        "graph_fn char_cell_batched(c: f32[batch, 32]",
        "graph_fn word_cell_batched(e: f32[batch, 32]",
    };
    for (size_t i = 0; i < RX_ARRAY_LEN(want); i++)
      CHECK_MSG(text && strstr(text, want[i]), "the module lacks '%s'", want[i]);
    rx_free(text);
  }
  if (!ok) {
    rx_module_free(m);
    return NULL;
  }
  return m;
}

static unsigned char *compile(rx_module *m, const rxk_backend *vk, size_t *len) {
  char why[1024];
  unsigned char *bytes = rxk_compile_artifact(m, &vk->target, len, why, sizeof why);
  CHECK_MSG(bytes != NULL, "compile: %s", why);
  return bytes;
}

/* Runs g batched and one call at a time, compares both with each other and the reference, and
 * checks the number of calls and, for a single-function model (by_depth), of batched calls: one
 * per depth of the call graph (bm_levels), where want_levels > 0 that many. launches[p] (when
 * not NULL): policy p's launches. */
static void run_model_l(const char *name, bm_graph *g, rx_rt_artifact *a, bool by_depth,
                        int want_levels, size_t *launches) {
  if (!ok_status(g->st, name)) return;
  rx_rt_tensor **xs = bm_outputs_new(g);
  rx_status st = bm_run_single(g, a, xs);
  int levels = 0, wide = 0;
  bm_levels(g, &levels, &wide);
  CHECK_MSG(want_levels <= 0 || levels == want_levels, "%s: %d depths, expected %d", name, levels,
            want_levels);
  for (int p = 0; p < NPOL && ok_status(st, name); p++) {
    rx_rt_tensor **xb = bm_outputs_new(g);
    rx_rt_batcher_stats stats = {0};
    bm_policy = policies[p];
    st = bm_run_batched(g, a, xb, &stats);
    if (launches) launches[p] = st ? 0 : stats.launches;
    bm_policy = RX_RT_BATCH_ROUNDS;
    double e_xy = 0, e_bref = 0, e_sref = 0, e_yx = 0;
    size_t n = 0;
    if (!st) st = bm_compare(g, xb, xs, &e_xy, &e_bref, &n);
    if (!st) st = bm_compare(g, xs, xb, &e_yx, &e_sref, &n);
    const char *pol = rx_rt_batch_policy_name(policies[p]);
    if (ok_status(st, name)) {
      printf("%s, %s: %d calls in %zu launches (%zu batched, largest %zu), %zu copies, %zu views, "
             "%zu gathers, %zu values: batched vs one at a time %.3g, vs double %.3g (one at a "
             "time vs double %.3g)\n",
             name, pol, g->ncalls, stats.launches, stats.batched_calls, stats.max_batch,
             stats.copies, stats.views, stats.gathers, n, e_xy, e_bref, e_sref);
      CHECK_MSG(e_xy <= tol_xy, "%s, %s: batched vs one at a time: %g", name, pol, e_xy);
      CHECK_MSG(e_bref <= BM_TOL_REF && e_sref <= BM_TOL_REF, "%s, %s: vs double: %g, %g", name,
                pol, e_bref, e_sref);
      CHECK_MSG(stats.calls == (size_t)g->ncalls, "%s, %s: %zu calls run of %d", name, pol,
                stats.calls, g->ncalls);
      /* one function: every policy batches every ready call, one batched call per depth (or per
       * depth of two calls or more: a round of one call runs the unbatched function) */
      CHECK_MSG(!by_depth || stats.batched_calls == (size_t)levels ||
                    stats.batched_calls == (size_t)wide,
                "%s, %s: %zu batched calls for %d depths (%d of two calls or more)", name, pol,
                stats.batched_calls, levels, wide);
      CHECK_MSG(stats.batched_calls < (size_t)g->ncalls, "%s, %s: nothing batched", name, pol);
    }
    bm_outputs_free(g, xb);
  }
  bm_outputs_free(g, xs);
}

/* The FSM's launches (policies[NPOL - 1]) against the heuristics': no more than any; strictly
 * fewer than the best when `beat`. The best heuristic's count in *out_best. */
static void check_fsm(const char *name, const size_t *launches, bool beat, size_t *out_best) {
  size_t fsm = launches[NPOL - 1], best = SIZE_MAX;
  for (int p = 0; p < NPOL - 1; p++) {
    CHECK_MSG(fsm <= launches[p], "%s: the FSM's %zu launches > %s's %zu", name, fsm,
              rx_rt_batch_policy_name(policies[p]), launches[p]);
    best = launches[p] < best ? launches[p] : best;
  }
  CHECK_MSG(!beat || fsm < best, "%s: the FSM's %zu launches, the best heuristic's %zu", name, fsm,
            best);
  printf("%s: launches rounds %zu, depth %zu, agenda %zu, fsm %zu\n", name, launches[0],
         launches[1], launches[2], fsm);
  *out_best = best;
}

/* run_model_l, and the FSM's launches no more than any heuristic's. */
static void run_model(const char *name, bm_graph *g, rx_rt_artifact *a, bool by_depth,
                      int want_levels) {
  size_t launches[NPOL] = {0}, best = 0;
  run_model_l(name, g, a, by_depth, want_levels, launches);
  if (!check_failed) check_fsm(name, launches, false, &best);
}

/* The models of several functions, of ED-Batch's kind: a TreeLSTM of a leaf and an inner-node
 * cell, one of leaf, unary and binary cells, and a lattice LSTM of character and word cells. */
static void two_cell_models(rx_rt_device *d, rx_rt_artifact *a) {
  bm_graph g;
  size_t launches[NPOL] = {0}, best = 0;
  int height = 0, words = 0, levels = 0, wide = 0;
  bm_init(&g, d);
  bool made = treelstm2_setup(&g, 16, 30, 3606, &height);
  CHECK_MSG(made, "forest too large");
  run_model_l("tree (TreeLSTM, leaf and node cells, 16 trees)", &g, a, false, height + 1, launches);
  check_fsm("two-cell TreeLSTM", launches, false, &best);
  /* the lower bound: the longest chain of calls; every policy attains it */
  bm_levels(&g, &levels, &wide);
  for (int p = 0; p < NPOL; p++)
    CHECK_MSG(launches[p] == (size_t)levels, "two-cell TreeLSTM, %s: %zu launches, bound %d",
              rx_rt_batch_policy_name(policies[p]), launches[p], levels);
  bm_free(&g);

  /* three cells, leaf, unary and binary: the order of the batches matters (treelstm3_ref.h) */
  bm_init(&g, d);
  made = treelstm3_setup(&g, 8, 20, 3610, &height);
  CHECK_MSG(made, "forest too large");
  tol_xy = 1e-6;
  run_model_l("tree (TreeLSTM, leaf, unary and binary cells, 8 trees)", &g, a, false, height,
              launches);
  tol_xy = BM_TOL_XY;
  check_fsm("three-cell TreeLSTM", launches, true, &best);
  printf("three-cell TreeLSTM: %d calls, the longest chain of calls %d (a lower bound)\n", g.ncalls,
         height);
  bm_free(&g);

  bm_init(&g, d);
  const int lens[] = {1, 7, 33, 100, 20, 12};
  lattice_setup(&g, lens, 6, 3607, &words);
  CHECK_MSG(words >= 40, "a lattice of %d words tests little", words);
  printf("lattice: %d characters, %d words\n", g.ncalls - words, words);
  run_model_l("lattice (lattice LSTM, 1, 7, 33, 100, 20, 12 characters)", &g, a, false, 0,
              launches);
  check_fsm("lattice LSTM", launches, true, &best);
  bm_levels(&g, &levels, &wide);
  printf("lattice LSTM: the longest chain of calls %d (a lower bound)\n", levels);
  bm_free(&g);
}

static void models(rx_rt_device *d, rx_rt_artifact *a) {
  bm_graph g;
  const int lens[] = {1, 7, 33, 100};
  bm_init(&g, d);
  gru_setup(&g, lens, 4, 3601);
  run_model("chain (GRU, lengths 1, 7, 33, 100)", &g, a, true, 100);
  bm_free(&g);

  bm_init(&g, d);
  bool made = mvrnn_setup(&g, 16, 30, 3602);
  CHECK_MSG(made, "forest too large");
  int height = mvrnn_height(16, 30, 3602);
  CHECK_MSG(height >= 5, "a forest this shallow (%d) tests little", height);
  run_model("tree (MV-RNN, 16 trees of 1..30 leaves)", &g, a, true, height);
  bm_free(&g);

  bm_init(&g, d);
  const int rows[] = {1, 1, 33, 10}, cols[] = {1, 7, 3, 10};
  grid_setup(&g, rows, cols, 4, 3603);
  run_model("lattice (grid RNN, 1x1, 1x7, 33x3, 10x10)", &g, a, true, 35);
  bm_free(&g);

  bm_init(&g, d);
  const int words[] = {1, 7, 33};
  nested_setup(&g, words, 3, 8, 3604);
  run_model("nested (word RNN of char RNNs, 1, 7, 33 words)", &g, a, false, 0);
  bm_free(&g);

  bm_init(&g, d);
  int depth = 0;
  encoder_setup(&g, 12, 6, 3605, &depth);
  CHECK_MSG(depth == 6, "the deepest sample stops at %d of 6 layers", depth);
  run_model("early exit (encoder, 12 samples, 1..6 layers)", &g, a, true, depth);
  bm_free(&g);

  /* test_autobatch's two models as call graphs (acrobat_ref.h, for the bench's table) */
  bm_init(&g, d);
  made = treelstm_setup(&g, 4, 30, 18, &height);
  CHECK_MSG(made, "forest too large");
  run_model("tree (TreeLSTM, 4 trees of 1..30 leaves)", &g, a, true, height + 1);
  bm_free(&g);

  bm_init(&g, d);
  const int lstm_lens[] = {1, 7, 33};
  lstm_setup(&g, lstm_lens, 3, 1802);
  run_model("chain (LSTM, lengths 1, 7, 33)", &g, a, true, 33);
  bm_free(&g);
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  const char *tests = argc > 1 ? argv[1] : "tests";
  rx_module *m = make_module(tests);
  bm_min_batch = 2; /* the launches are counted: every round of two calls or more batched */
  rxk_backend vk = {.kind = RX_RT_BACKEND_VULKAN};
  rxk_rt_open(&vk, "vulkan:0");
  if (!vk.dev) {
    printf("Vulkan unavailable (%s): the cells' batched forms only\n", vk.why);
  } else if (m) {
    size_t len = 0;
    unsigned char *bytes = compile(m, &vk, &len);
    rx_rt_artifact *a = NULL;
    if (bytes &&
        ok_status(rx_rt_artifact_load_memory(vk.dev, bytes, len, "models.rxm", &a), "load")) {
      models(vk.dev, a);
      two_cell_models(vk.dev, a);
    }
    rx_rt_artifact_release(a);
    free(bytes);
  }
  bool ran = vk.dev != NULL;
  char msg[1024];
  CHECK_MSG(rxk_rt_close(&vk, msg, sizeof msg), "%s", msg);
  rx_module_free(m);
  if (!check_failed && !ran) {
    printf("SKIP: the batched runs need a Vulkan device (the cells' batched forms passed)\n");
    return 77;
  }
  return check_finish("test_autobatch_models");
}
