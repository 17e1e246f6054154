/* bench/autobatch_bench.c: the auto-batching workloads of issues 18 and 36 (tests/autobatch/)
 * batched by the runtime batcher (relaxc/autobatch.h) against one cell call at a time, on one
 * device. The models are a table of {name, setup, submit, check} entries (`models` below), each a
 * graph of cell calls (tests/autobatch/call_graph.h) with its double reference:
 *   tree      TreeLSTM (hidden 64) over --trees random parse trees of 1..--leaves leaves
 *   lstm      LSTM (hidden 64) over sequences of lengths --lengths (a straggler: 100 among short)
 *   mixed     the LSTM over sequences of lengths --mixed (default 16: 6, 12, ..., 100)
 *   gru       GRU (hidden 64) over sequences of lengths --lengths
 *   mvrnn     MV-RNN (n = 16) over --trees random parse trees of 1..--leaves leaves
 *   grid      2-D grid RNN (hidden 32) over grids --grids (RxC,...)
 *   nested    an RNN over words of an RNN over characters (hidden 32) over sentences of --words
 *             words of 1..8 characters
 *   encoder   --samples samples through up to --layers transformer encoder layers (8 tokens,
 *             model 32), each stopping after its own number of layers (drawn at random)
 *   tree2     TreeLSTM of a leaf cell and an inner-node cell (hidden 32) over --trees random
 *             parse trees of 1..--leaves leaves
 *   tree3     TreeLSTM of leaf, unary and binary cells (hidden 32) over --trees random
 *             constituency trees of 1..--leaves leaves with unary chains (treelstm3_ref.h)
 *   lattice   lattice LSTM (Zhang & Yang; character and word cells, hidden 32) over random
 *             lattices of sentences of --chars characters
 *   stacked   2-layer stacked LSTM (hidden 64) over --lengths, one stack_step unit a step (the
 *             two cells inlined and batched as one function: grain size, grain_ref.h)
 *   stacked1  the same model, two lstm_cell calls a step (the one-cell form)
 *   chain2    LSTM over --lengths in units of two steps (lstm_cell2; lstm_cell for an odd last)
 *   chain1    the same LSTM, lstm_cell at every step (the one-cell form)
 *             (the four run on an artifact of tests/autobatch/lstm_cell.rx and grain_cells.rx:
 *             relaxc compile --batch lstm_cell:wx,wh,b@1024 --batch lstm_cell2:wx,wh,b@1024
 *             --batch stack_step:wx1,wh1,b1,wx2,wh2,b2@1024; the one-cell forms look for the
 *             unit's artifact, so both forms run on the same one)
 * Each run starts from inputs already on the device and ends synchronized with every checked
 * output (every call's, acrobat_ref.h's TreeLSTM: every node's h) in a tensor of its own; the
 * time is the best of --reps runs after one warm-up run (the ways interleaved: each rep runs
 * every way once, in the order of the table), in wall-clock time and in the process's
 * CPU time (all threads: on lavapipe the device is the process's own worker threads, so CPU time
 * is the work done, less disturbed than wall time by other load on a shared machine). The
 * batched run includes the batcher's stacking and splitting copies and its bookkeeping; the
 * one-at-a-time run copies each output out of planned storage. A last run of each way is
 * checked against the one-at-a-time run and the reference (the row fails past 1e-5 relative to
 * max(1, |reference|)).
 *
 * Every model runs one call at a time without the batcher and through the batcher under each
 * policy (relaxc/autobatch.h: rounds, depth, agenda, fsm, one); a row per way gives the
 * launches, the batcher's device copies (with its views and gathers), the time, and the ratios
 * against one call at a time and against rounds. The FSM trains at its first run (the warm-up)
 * on that run's calls; the timed runs load its table. --min-batch N: rx_rt_batcher_set_min_batch
 * for every policy (default: 0, the batcher's measured crossover per function: cost-aware
 * batching; --min-batch 2 batches every round of two calls or more). --no-gather runs the batcher
 * with its gather path off (operands stacked by copies even where the artifact has the index-array
 * form, relaxc compile --batch FN:SHARED@N,gather), --no-plan with its memory planning off
 * (rx_rt_batcher_set_planning); the "memory" column names the two. --save-policy DIR writes each
 * model's FSM table (trained at its first FSM run, or the artifact's own) as DIR/<model>.fsm, the
 * TABLE of relaxc compile --batch-policy TABLE: an artifact compiled with it runs the FSM policy
 * without training (docs/autobatch.md, "The FSM table in the artifact").
 *
 * usage: autobatch_bench ARTIFACT.rxm... [--device D] [--models tree,lstm,...] [--trees N]
 *                        [--leaves L] [--lengths 1,7,16,17,100] [--mixed N,...] [--grids 1x1,10x10]
 *                        [--words 1,7,33] [--samples N] [--layers L] [--reps R] [--min-batch N]
 *                        [--no-gather] [--no-plan] [--chars 1,7,33,100,20,12]
 *                        [--save-policy DIR]
 *   Each model runs on the first artifact that has its cell function, e.g. every cell in one:
 *   cat tests/autobatch/{tree,lstm,gru,mvrnn,grid,nested,encoder}_cell.rx > /tmp/ab_cells.rx &&
 *   build/relaxc compile /tmp/ab_cells.rx
 *     --target vulkan-lavapipe --batch tree_cell:w,ul,ur,b@1024 --batch lstm_cell:wx,wh,b@1024
 *     --batch gru_cell:wx,wh,bx,bh@1024 --batch mvrnn_cell:w,bias,wm@1024
 *     --batch grid_cell:wx,wu,wl,b@1024 --batch char_cell:wc,uc,bc@1024
 *     --batch word_cell:we,ws,uw,bw@1024 --batch encoder_cell:wq,bq,wk,bk,wv,bv,wo,bo,g1,be1,
 *     w1,b1,w2,b2,g2,be2@1024 -o /tmp/ab_cells.rxm
 *   (each --batch with ",gather" after the bound, e.g. tree_cell:w,ul,ur,b@1024,gather, adds the
 *   index-array forms the batcher's gather path uses: --no-gather then compares the two paths)
 * Built against the build's runtime library (cmake --build build --target bench_autobatch), or:
 *   cc -O2 -std=c11 -Iinclude -Itests/autobatch bench/autobatch_bench.c BUILD/librelaxc_runtime.a
 *      -lcjson -ldl -lpthread -lm
 * Prints a Markdown table row per model on stdout. */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 199309L /* clock_gettime */
#endif
#include "acrobat_ref.h"
#include "encoder_ref.h"
#include "grain_ref.h"
#include "grid_ref.h"
#include "gru_ref.h"
#include "lattice_ref.h"
#include "mvrnn_ref.h"
#include "nested_ref.h"
#include "treelstm2_ref.h"
#include "treelstm3_ref.h"

#include <stdio.h>
#include <time.h>

#define BENCH_TOL 1e-5

enum { BENCH_MAX_LIST = 64 };

/* The sizes of every model, from the command line. */
typedef struct bench_opts {
  int trees, leaves, samples, layers, reps;
  int lens[BENCH_MAX_LIST], nlens;
  int mixed[BENCH_MAX_LIST], nmixed;
  int words[BENCH_MAX_LIST], nwords;
  int chars[BENCH_MAX_LIST], nchars;
  int rows[BENCH_MAX_LIST], cols[BENCH_MAX_LIST], ngrids;
} bench_opts;

/* A model of the table: setup builds its call graph on g (inputs on g->d) and writes the row's
 * name into title, false when the sizes are out of range; submit puts its calls into a batcher
 * (a per-policy loop sets the batcher's policy before); check measures two runs' outputs against
 * each other and the reference. */
typedef struct bench_model {
  const char *name; /* --models key */
  const char *fn;   /* a cell function the artifact must have */
  bool (*setup)(bm_graph *g, const bench_opts *o, char *title, size_t ntitle);
  rx_status (*submit)(const bm_graph *g, rx_rt_batcher *b);
  rx_status (*check)(const bm_graph *g, rx_rt_tensor **x, rx_rt_tensor **y, double *out_xy,
                     double *out_ref, size_t *out_n);
} bench_model;

/* v[0..n) as "1, 7, 100 x16" (a run of equal values as the value and its count). */
static void list_text(const int *v, int n, char *out, size_t size) {
  size_t k = 0;
  out[0] = 0;
  for (int i = 0, run = 1; i < n && k + 24 < size; i += run) {
    for (run = 1; i + run < n && v[i + run] == v[i];) run++;
    k += (size_t)snprintf(out + k, size - k, run > 1 ? "%s%d x%d" : "%s%d", i ? ", " : "", v[i],
                          run);
    if (i + run < n && k + 24 >= size) snprintf(out + k, size - k, ", ...");
  }
}

static bool setup_tree(bm_graph *g, const bench_opts *o, char *title, size_t n) {
  int height = 0;
  if (!treelstm_setup(g, o->trees, o->leaves, 18, &height)) return false;
  snprintf(title, n, "TreeLSTM, %d trees of 1..%d leaves (height %d)", o->trees, o->leaves, height);
  return true;
}

static bool setup_lstm(bm_graph *g, const bench_opts *o, char *title, size_t n) {
  char lens[128];
  list_text(o->lens, o->nlens, lens, sizeof lens);
  lstm_setup(g, o->lens, o->nlens, 1802);
  snprintf(title, n, "LSTM, lengths %s", lens);
  return true;
}

static bool setup_mixed(bm_graph *g, const bench_opts *o, char *title, size_t n) {
  char lens[128];
  list_text(o->mixed, o->nmixed, lens, sizeof lens);
  lstm_setup(g, o->mixed, o->nmixed, 1802);
  snprintf(title, n, "LSTM, mixed lengths %s", lens);
  return true;
}

static bool setup_gru(bm_graph *g, const bench_opts *o, char *title, size_t n) {
  char lens[128];
  list_text(o->lens, o->nlens, lens, sizeof lens);
  gru_setup(g, o->lens, o->nlens, 3601);
  snprintf(title, n, "GRU, lengths %s", lens);
  return true;
}

static bool setup_mvrnn(bm_graph *g, const bench_opts *o, char *title, size_t n) {
  if (!mvrnn_setup(g, o->trees, o->leaves, 3602)) return false;
  snprintf(title, n, "MV-RNN, %d trees of 1..%d leaves (height %d)", o->trees, o->leaves,
           mvrnn_height(o->trees, o->leaves, 3602));
  return true;
}

static bool setup_grid(bm_graph *g, const bench_opts *o, char *title, size_t n) {
  grid_setup(g, o->rows, o->cols, o->ngrids, 3603);
  size_t k = (size_t)snprintf(title, n, "grid RNN, grids");
  for (int i = 0; i < o->ngrids && k + 24 < n; i++)
    k += (size_t)snprintf(title + k, n - k, "%s %dx%d", i ? "," : "", o->rows[i], o->cols[i]);
  return true;
}

static bool setup_nested(bm_graph *g, const bench_opts *o, char *title, size_t n) {
  char words[128];
  list_text(o->words, o->nwords, words, sizeof words);
  nested_setup(g, o->words, o->nwords, 8, 3604);
  snprintf(title, n, "nested RNN, sentences of %s words", words);
  return true;
}

static bool setup_encoder(bm_graph *g, const bench_opts *o, char *title, size_t n) {
  int depth = 0;
  encoder_setup(g, o->samples, o->layers, 3605, &depth);
  snprintf(title, n, "early-exit encoder, %d samples, 1..%d layers (deepest %d)", o->samples,
           o->layers, depth);
  return true;
}

static bool setup_tree2(bm_graph *g, const bench_opts *o, char *title, size_t n) {
  int height = 0;
  if (!treelstm2_setup(g, o->trees, o->leaves, 3606, &height)) return false;
  snprintf(title, n, "TreeLSTM, leaf and node cells, %d trees of 1..%d leaves (height %d)",
           o->trees, o->leaves, height);
  return true;
}

static bool setup_tree3(bm_graph *g, const bench_opts *o, char *title, size_t n) {
  int height = 0;
  if (!treelstm3_setup(g, o->trees, o->leaves, 3610, &height)) return false;
  snprintf(title, n,
           "TreeLSTM, leaf, unary and binary cells, %d trees of 1..%d leaves (longest chain %d)",
           o->trees, o->leaves, height);
  return true;
}

static bool setup_lattice(bm_graph *g, const bench_opts *o, char *title, size_t n) {
  char lens[128];
  int words = 0;
  list_text(o->chars, o->nchars, lens, sizeof lens);
  lattice_setup(g, o->chars, o->nchars, 3607, &words);
  snprintf(title, n, "lattice LSTM, sentences of %s characters (%d words)", lens, words);
  return true;
}

/* Grain size (grain_ref.h): the stacked LSTM and the LSTM chain, each in its unit form and its
 * one-cell form over --lengths. */
static bool setup_grain(bm_graph *g, const bench_opts *o, char *title, size_t n, int form) {
  static const char *const names[] = {"stacked LSTM, stack_step units",
                                      "stacked LSTM, two lstm_cell calls a step",
                                      "LSTM chain, lstm_cell2 units", "LSTM chain, lstm_cell"};
  char lens[128];
  list_text(o->lens, o->nlens, lens, sizeof lens);
  if (form < 2)
    stacked_setup(g, o->lens, o->nlens, 3610, form == 0);
  else
    chain_setup(g, o->lens, o->nlens, 3620, form == 2 ? 2 : 1);
  snprintf(title, n, "%s, lengths %s", names[form], lens);
  return true;
}
static bool setup_stacked(bm_graph *g, const bench_opts *o, char *title, size_t n) {
  return setup_grain(g, o, title, n, 0);
}
static bool setup_stacked1(bm_graph *g, const bench_opts *o, char *title, size_t n) {
  return setup_grain(g, o, title, n, 1);
}
static bool setup_chain2(bm_graph *g, const bench_opts *o, char *title, size_t n) {
  return setup_grain(g, o, title, n, 2);
}
static bool setup_chain1(bm_graph *g, const bench_opts *o, char *title, size_t n) {
  return setup_grain(g, o, title, n, 3);
}

static const bench_model models[] = {
    {"tree", "tree_cell", setup_tree, bm_submit, bm_compare},
    {"lstm", "lstm_cell", setup_lstm, bm_submit, bm_compare},
    {"mixed", "lstm_cell", setup_mixed, bm_submit, bm_compare},
    {"gru", "gru_cell", setup_gru, bm_submit, bm_compare},
    {"mvrnn", "mvrnn_cell", setup_mvrnn, bm_submit, bm_compare},
    {"grid", "grid_cell", setup_grid, bm_submit, bm_compare},
    {"nested", "char_cell", setup_nested, bm_submit, bm_compare},
    {"encoder", "encoder_cell", setup_encoder, bm_submit, bm_compare},
    {"tree2", "tree_leaf_cell", setup_tree2, bm_submit, bm_compare},
    {"tree3", "tree_unary_cell", setup_tree3, bm_submit, bm_compare},
    {"lattice", "lattice_char_cell", setup_lattice, bm_submit, bm_compare},
    {"stacked", "stack_step", setup_stacked, bm_submit, bm_compare},
    {"stacked1", "stack_step", setup_stacked1, bm_submit, bm_compare},
    {"chain2", "lstm_cell2", setup_chain2, bm_submit, bm_compare},
    {"chain1", "lstm_cell2", setup_chain1, bm_submit, bm_compare},
};

static int usage(const char *why) {
  fprintf(
      stderr,
      "autobatch_bench: %s\nusage: autobatch_bench ARTIFACT.rxm... [--device D] [--models "
      "tree,lstm,mixed,gru,mvrnn,grid,nested,encoder,tree2,tree3,lattice,stacked,stacked1,chain2,"
      "chain1] [--trees N] [--leaves L] [--lengths 1,7,16,17,100] [--mixed N,...] "
      "[--grids 1x1,10x10] [--words 1,7,33] [--samples N] [--layers L] [--reps R] "
      "[--min-batch N] [--no-gather] [--no-plan] [--chars N,...] [--save-policy DIR]\n",
      why);
  return 2;
}

static int fail(const char *what, rx_status s) {
  fprintf(stderr, "autobatch_bench: error: %s: %s\n", what, rx_status_message(s));
  rx_status_free(s);
  return 1;
}

static double now_ms(clockid_t clock) {
  struct timespec t;
  clock_gettime(clock, &t);
  return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

/* The FSM policy's table kept across the runs of one model: the first run under
 * RX_RT_BATCH_FSM trains it (on its own calls) and saves it here, the later runs load it
 * (ED-Batch trains once per model). */
static unsigned char fsm_bytes[8192];
static size_t fsm_len;
static const char *save_dir; /* --save-policy DIR: each model's table as DIR/<model>.fsm */

/* The model's table (fsm_bytes) as save_dir/<name>.fsm, for relaxc compile --batch-policy;
 * false after saying why not. */
static bool save_policy(const char *name) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s.fsm", save_dir, name);
  FILE *f = fopen(path, "wb");
  bool ok = f && fwrite(fsm_bytes, 1, fsm_len, f) == fsm_len;
  ok = f && fclose(f) == 0 && ok;
  if (!ok) {
    fprintf(stderr, "autobatch_bench: --save-policy: cannot write '%s'\n", path);
    return false;
  }
  fprintf(stderr, "autobatch_bench: %s: the FSM table (%zu bytes) -> %s\n", name, fsm_len, path);
  return true;
}

/* One run of g on a, batched under policy p (through m's submit) or (p < 0) one call at a time,
 * its checked outputs into out (as bm_outputs_new), synchronized; its wall and CPU times in
 * out_ms[0..1]. */
static rx_status run_once(const bench_model *m, const bm_graph *g, rx_rt_artifact *a, int p,
                          rx_rt_tensor **out, rx_rt_batcher_stats *stats, double *out_ms) {
  double t0 = now_ms(CLOCK_MONOTONIC), c0 = now_ms(CLOCK_PROCESS_CPUTIME_ID);
  rx_status st = NULL;
  if (p >= 0) {
    rx_rt_batcher *b = NULL;
    bool fsm = p == RX_RT_BATCH_FSM, save = fsm && !fsm_len;
    bm_policy = (rx_rt_batch_policy)p;
    st = bm_batcher(g, a, &b);
    bm_policy = RX_RT_BATCH_ROUNDS;
    if (!st) st = m->submit(g, b);
    if (!st && fsm && fsm_len) st = rx_rt_batcher_policy_load(b, fsm_bytes, fsm_len);
    if (!st) st = rx_rt_batcher_run(b);
    if (!st && save) st = rx_rt_batcher_policy_save(b, fsm_bytes, sizeof fsm_bytes, &fsm_len);
    if (!st) st = bm_collect(g, b, out);
    if (stats) rx_rt_batcher_get_stats(b, stats);
    rx_rt_batcher_release(b);
  } else {
    st = bm_run_single(g, a, out);
  }
  if (!st) st = rx_rt_device_synchronize(rx_rt_artifact_device(a));
  out_ms[0] = now_ms(CLOCK_MONOTONIC) - t0;
  out_ms[1] = now_ms(CLOCK_PROCESS_CPUTIME_ID) - c0;
  return st;
}

enum { NWAYS = 1 + 5 }; /* one call at a time without the batcher, then the five policies */

/* Prints way's row of model title (best[way]: wall and CPU ms; stats; the check's errors). */
static void print_row(const char *title, const bm_graph *g, int way, double best[][2],
                      const rx_rt_batcher_stats *s, double e_xy, double e_ref) {
  char launches[64] = "", copies[96] = "";
  const char *memory = bm_no_gather ? (bm_no_plan ? "copies" : "copies, plan")
                                    : (bm_no_plan ? "gather" : "gather, plan");
  if (way) {
    snprintf(launches, sizeof launches, "%zu (%zu batched, largest %zu)", s->launches,
             s->batched_calls, s->max_batch);
    snprintf(copies, sizeof copies, "%zu (%zu KiB), %zu views, %zu gathers", s->copies,
             s->copy_bytes >> 10, s->views, s->gathers);
  } else {
    snprintf(launches, sizeof launches, "%d", g->ncalls);
  }
  printf("| %s | %d | %s | %s | %s | %s | %.1f ms, CPU %.1f ms | %.2fx (CPU %.2fx) | %.2fx (CPU "
         "%.2fx) | %.2g, %.2g |\n",
         title, g->ncalls,
         way ? rx_rt_batch_policy_name((rx_rt_batch_policy)(way - 1)) : "one at a time, no batcher",
         way ? memory : "", launches, copies, best[way][0], best[way][1], best[0][0] / best[way][0],
         best[0][1] / best[way][1], best[1][0] / best[way][0], best[1][1] / best[way][1], e_xy,
         e_ref);
}

/* The crossover of each of g's functions that the artifact keeps (measured by the first batcher
 * that calibrated it: cost-aware batching), on stderr: the table on stdout stays a table. */
static void print_crossovers(const bench_model *m, const bm_graph *g, rx_rt_artifact *a) {
  rx_rt_batcher *b = NULL;
  rx_status st = bm_batcher(g, a, &b);
  fprintf(stderr, "autobatch_bench: %s: crossover", m->name);
  for (int f = 0; f < g->nfns && !st; f++) {
    size_t x = 0;
    st = rx_rt_batcher_get_crossover(b, g->fns[f].name, &x);
    if (x == SIZE_MAX)
      fprintf(stderr, " %s never", g->fns[f].name);
    else
      fprintf(stderr, " %s %zu", g->fns[f].name, x);
  }
  fprintf(stderr, "%s\n", st ? " (error)" : "");
  rx_status_free(st);
  rx_rt_batcher_release(b);
}

/* Best of reps runs after one warm-up, for every way, then each way's last run checked against
 * the one-at-a-time run and the reference; prints a row per way. */
static int bench(const bench_model *m, const bm_graph *g, rx_rt_artifact *a, const char *title,
                 int reps) {
  double best[NWAYS][2]; /* [way][wall, cpu] */
  rx_rt_batcher_stats stats[NWAYS];
  memset(stats, 0, sizeof stats);
  rx_rt_tensor **out[NWAYS];
  rx_status st = NULL;
  fsm_len = 0; /* the FSM trains on this model */
  for (int way = 0; way < NWAYS; way++) {
    out[way] = bm_outputs_new(g);
    best[way][0] = best[way][1] = 1e300;
  }
  /* the ways interleaved (each rep runs every way once), so that a change of the machine's load
   * during the bench falls on every way alike rather than on the ways timed then */
  for (int r = 0; r <= reps + 1 && !st; r++) /* warm-up, reps, the checked run */
    for (int way = 0; way < NWAYS && !st; way++) {
      double ms[2] = {0, 0};
      bm_outputs_free(g, out[way]);
      out[way] = bm_outputs_new(g);
      st = run_once(m, g, a, way - 1, out[way], &stats[way], ms);
      for (int k = 0; k < 2 && r > 0 && r <= reps; k++)
        if (ms[k] < best[way][k]) best[way][k] = ms[k];
    }
  int rc = !st && save_dir && fsm_len && !save_policy(m->name);
  print_crossovers(m, g, a);
  for (int way = 0; way < NWAYS && !st; way++) {
    double e_xy = 0, e_bref = 0, e_sref = 0, e_yx = 0;
    size_t n = 0;
    st = m->check(g, out[way], out[0], &e_xy, &e_bref, &n);
    if (!st) st = m->check(g, out[0], out[way], &e_yx, &e_sref, &n);
    if (st) break;
    print_row(title, g, way, best, &stats[way], e_xy, fmax(e_bref, e_sref));
    if (e_xy > BENCH_TOL || e_bref > BENCH_TOL || e_sref > BENCH_TOL) {
      fprintf(stderr,
              "autobatch_bench: %s, way %d: the runs differ (%g) or miss the reference "
              "(%g, %g)\n",
              m->name, way, e_xy, e_bref, e_sref);
      rc = 1;
    }
  }
  fflush(stdout);
  for (int way = 0; way < NWAYS; way++) bm_outputs_free(g, out[way]);
  return st ? fail(m->name, st) : rc;
}

/* N,N,... (or RxC,... with cols) into v; -1 on a bad list. */
static int parse_list(const char *text, int *v, int *cols, int *n) {
  *n = 0;
  for (const char *p = text; *p && *n < BENCH_MAX_LIST;) {
    char *end = NULL;
    long x = strtol(p, &end, 10);
    if (end == p || x < 0 || x > 100000) return -1;
    v[*n] = (int)x;
    if (cols) {
      if (*end != 'x' || !x) return -1;
      p = end + 1;
      x = strtol(p, &end, 10);
      if (end == p || x < 1 || x > 100000 || (long)v[*n] * x > 100000) return -1;
      cols[*n] = (int)x;
    }
    (*n)++;
    if (*end && *end != ',') return -1;
    p = *end == ',' ? end + 1 : end;
  }
  return *n ? 0 : -1;
}

/* selected[k]: whether models[k].name is in the comma-separated list; -1 on an unknown name. */
static int select_models(const char *list, bool *selected) {
  size_t nm = sizeof models / sizeof models[0];
  for (size_t k = 0; k < nm; k++) selected[k] = false;
  for (const char *p = list; *p;) {
    size_t len = strcspn(p, ","), k = 0;
    while (k < nm && !(strlen(models[k].name) == len && !strncmp(models[k].name, p, len))) k++;
    if (k == nm) return -1;
    selected[k] = true;
    p += len + (p[len] == ',');
  }
  return 0;
}

/* Parses argv into o, the artifacts' paths and the selected models; nonzero on bad usage. */
static int parse_args(int argc, char **argv, bench_opts *o, const char **paths, int *npaths,
                      const char **device, bool *selected) {
  *o = (bench_opts){.trees = 16, .leaves = 30, .samples = 12, .layers = 6, .reps = 3};
  const int lens[] = {1, 7, 16, 17, 100}, words[] = {1, 7, 33}, chars[] = {1, 7, 33, 100, 20, 12};
  const int rows[] = {1, 1, 33, 10}, cols[] = {1, 7, 3, 10};
  o->nlens = 5, o->nwords = 3, o->ngrids = 4, o->nmixed = 16;
  for (int i = 0; i < o->nmixed; i++) o->mixed[i] = 100 * (i + 1) / o->nmixed; /* 6, ..., 100 */
  memcpy(o->lens, lens, sizeof lens);
  memcpy(o->words, words, sizeof words);
  memcpy(o->chars, chars, sizeof chars);
  o->nchars = 6;
  memcpy(o->rows, rows, sizeof rows);
  memcpy(o->cols, cols, sizeof cols);
  size_t nm = sizeof models / sizeof models[0];
  for (size_t k = 0; k < nm; k++) selected[k] = true;
  *npaths = 0;
  for (int i = 1; i < argc; i++) {
    const char *v = i + 1 < argc ? argv[i + 1] : NULL, *arg = argv[i];
    int *num = !strcmp(arg, "--trees")     ? &o->trees
               : !strcmp(arg, "--leaves")  ? &o->leaves
               : !strcmp(arg, "--samples") ? &o->samples
               : !strcmp(arg, "--layers")  ? &o->layers
               : !strcmp(arg, "--reps")    ? &o->reps
                                           : NULL;
    if (num && v) {
      *num = atoi(argv[++i]);
    } else if (!strcmp(arg, "--device") && v) {
      *device = argv[++i];
    } else if (!strcmp(arg, "--lengths") && v) {
      if (parse_list(argv[++i], o->lens, NULL, &o->nlens)) return usage("--lengths: N,N,...");
    } else if (!strcmp(arg, "--mixed") && v) {
      if (parse_list(argv[++i], o->mixed, NULL, &o->nmixed)) return usage("--mixed: N,N,...");
    } else if (!strcmp(arg, "--words") && v) {
      if (parse_list(argv[++i], o->words, NULL, &o->nwords)) return usage("--words: N,N,...");
    } else if (!strcmp(arg, "--chars") && v) {
      if (parse_list(argv[++i], o->chars, NULL, &o->nchars)) return usage("--chars: N,N,...");
      for (int k = 0; k < o->nchars; k++)
        if (o->chars[k] < 1 || o->chars[k] > LAT_MAX_CHARS) return usage("--chars: 1..256 each");
    } else if (!strcmp(arg, "--grids") && v) {
      if (parse_list(argv[++i], o->rows, o->cols, &o->ngrids)) return usage("--grids: RxC,...");
    } else if (!strcmp(arg, "--min-batch") && v) {
      long mb = strtol(argv[++i], NULL, 10);
      if (mb < 0 || mb == 1) return usage("--min-batch: 0 (measured) or 2 or more");
      bm_min_batch = (size_t)mb;
    } else if (!strcmp(arg, "--save-policy") && v) {
      save_dir = argv[++i];
    } else if (!strcmp(arg, "--no-gather")) {
      bm_no_gather = true;
    } else if (!strcmp(arg, "--no-plan")) {
      bm_no_plan = true;
    } else if (!strcmp(arg, "--models") && v) {
      if (select_models(argv[++i], selected)) return usage("--models: names of the table");
    } else if (arg[0] != '-' && *npaths < 8) {
      paths[(*npaths)++] = arg;
    } else {
      return usage(arg);
    }
  }
  if (!*npaths) return usage("expected an artifact");
  if (o->trees < 1 || o->trees > AB_MAX_SEQS || o->leaves < 1 || o->reps < 1 || o->samples < 1 ||
      o->samples > 4096 || o->layers < 1 || o->layers > 64)
    return usage("--trees 1..64, --leaves >= 1, --samples 1..4096, --layers 1..64, --reps >= 1");
  return 0;
}

/* The first of the artifacts with function fn, or NULL. */
static rx_rt_artifact *find_artifact(rx_rt_artifact **a, int n, const char *fn) {
  for (int i = 0; i < n; i++)
    for (size_t f = 0; f < rx_rt_artifact_function_count(a[i]); f++)
      if (!strcmp(rx_rt_artifact_function_name(a[i], f), fn)) return a[i];
  return NULL;
}

int main(int argc, char **argv) {
  const char *paths[8] = {NULL}, *device = "vulkan";
  bench_opts o;
  bool selected[sizeof models / sizeof models[0]];
  int npaths = 0;
  int rc = parse_args(argc, argv, &o, paths, &npaths, &device, selected);
  if (rc) return rc;
  rx_rt_device *d = NULL;
  rx_rt_artifact *a[8] = {NULL};
  rx_status st = rx_rt_device_open(device, NULL, &d);
  if (st) return fail(device, st);
  for (int i = 0; i < npaths && !st; i++) st = rx_rt_artifact_load(d, paths[i], &a[i]);
  if (st) rc = fail("load", st);
  if (!rc) {
    printf("device: %s\n\n", rx_rt_device_get_info(d)->name);
    printf("| model | cells | policy | memory | launches | copies | time | vs one at a time | vs "
           "rounds | max difference (vs one at a time, vs double) |\n");
    printf("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n");
  }
  for (size_t k = 0; !rc && k < sizeof models / sizeof models[0]; k++) {
    const bench_model *m = &models[k];
    rx_rt_artifact *art = selected[k] ? find_artifact(a, npaths, m->fn) : NULL;
    if (selected[k] && !art)
      fprintf(stderr, "autobatch_bench: %s: no artifact has '%s': skipped\n", m->name, m->fn);
    if (!art) continue;
    bm_graph g;
    bm_init(&g, d);
    char title[256];
    if (!m->setup(&g, &o, title, sizeof title)) {
      rc = usage("too many nodes: fewer --trees or --leaves");
    } else if (g.st) {
      rc = fail(m->name, g.st);
      g.st = NULL;
    } else {
      rc = bench(m, &g, art, title, o.reps);
    }
    bm_free(&g);
  }
  for (int i = 0; i < npaths; i++) rx_rt_artifact_release(a[i]);
  rx_rt_device_release(d);
  return rc;
}
