/* The batcher's policies (issue 36, runtime/autobatch_policy.c): rounds, depth (ACRoBat), agenda
 * (DyNet), the Q-learned FSM (ED-Batch) and one call at a time, on Vulkan (lavapipe in CI), with
 * the batcher's memory paths on (the cells' index-array forms are compiled: the gather path and
 * the memory planning, runtime/autobatch.c).
 *
 *   1. Every policy on a TreeLSTM forest (16 random trees of 1..30 leaves), an LSTM over lengths
 *      1, 7, 16, 17, 100 and an LSTM straggler (lengths 100 and 3): outputs equal to the ONE
 *      policy's (the unbatched cell one call at a time) within 1e-6, to the runs of
 *      tests/autobatch/acrobat_models.h without the batcher within 1e-6 and to the double
 *      reference within 1e-4; launches exact: ONE one per call, the others height + 1 on the
 *      forest and the longest length on the LSTMs (rounds of one call run the unbatched cell).
 *      Each policy again with the gather path and the planning off: the same outputs (1e-6) and
 *      launches, no gathers, and no fewer copy bytes; on the forest under DEPTH (the schedule
 *      the plan predicts) strictly fewer with the paths on, and gathers.
 *   2. Across functions: zero-started LSTM sequences submitted first, then a forest whose roots
 *      start more LSTM sequences of the same length. ROUNDS runs the first ready call's function,
 *      so the early sequences run before the trees and the late ones after: L + H + 1 + L
 *      launches; the best order (the trees, then every sequence together) takes H + 1 + L, which
 *      the FSM must find: fewer than ROUNDS and no more than DEPTH or AGENDA.
 *      With rx_rt_batcher_set_min_batch(5) the LSTM batches only its first step (137 launches).
 *   3. The FSM table as bytes: saved, loaded into a fresh batcher, the same launches; refused
 *      when the magic, a function name, the length or an action is wrong. In the artifact
 *      (rx_module_set_batch_policy, relaxc compile --batch-policy): the cells compiled with the
 *      trained table run under the FSM policy with no training and no load, the same launches
 *      and outputs; a batcher of no calls runs there and holds the section's bytes (without the
 *      section it must train and is refused: no calls to learn from); a batcher that registers
 *      fewer functions than the table names is refused at its run, and a table naming a
 *      function the module lacks, of another version or with a wrong function count when
 *      compiled.
 *   4. Cost-aware batching (min batch 0, the default): the crossover rule on given measurements
 *      (rt_abp_crossover: warm-up samples left out, the line through the batched samples, never
 *      batching when a batched row costs an unbatched call), and the LSTM 1, 7, 16, 17, 100 run
 *      under it: the same outputs (1e-6), every call run, between 100 and 141 launches, and the
 *      crossover reported (rx_rt_batcher_get_crossover: 0 before, the forced value when forced).
 *      The crossover is kept in the artifact: after two calibrating batchers, a new batcher
 *      reports it before its run, and its runs make exactly the launches it predicts (nothing
 *      timed again).
 *
 * usage: test_autobatch_policy TESTS_DIR */
/* test-needs: runtime */
#include "../autobatch/acrobat_models.h"
#include "base/base.h"
#include "check.h"
#include "driver/driver.h"
#include "ir/ir.h"
#include "relaxc/compiler.h"
#include "runtime/autobatch_policy.h"
#include "support_runtime.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { NPOL = 5 };
static const rx_rt_batch_policy all_policies[NPOL] = {
    RX_RT_BATCH_ONE, RX_RT_BATCH_ROUNDS, RX_RT_BATCH_DEPTH, RX_RT_BATCH_AGENDA, RX_RT_BATCH_FSM};

static bool ok_status(rx_status s, const char *what) {
  CHECK_MSG(!s, "%s: %s", what, rx_status_message(s));
  rx_status_free(s);
  return !s;
}

static char *read_model(const char *tests, const char *name) {
  char path[1024];
  snprintf(path, sizeof path, "%s/autobatch/%s", tests, name);
  size_t len = 0;
  char *text = NULL;
  rx_status st = base_read_file(path, &text, &len);
  CHECK_MSG(!st, "%s", rx_status_message(st));
  rx_status_free(st);
  return text;
}

/* Both cells, their batched forms (at most 1024 calls a batch) and the batched forms' index-array
 * forms (the batcher's gather path), compiled for Vulkan; with the FSM table table[0..table_len)
 * in the artifact when table is not NULL (rx_module_set_batch_policy). */
static unsigned char *compile_cells_with(const char *tests, const rxk_backend *vk, size_t *len,
                                         const void *table, size_t table_len) {
  char *tree = read_model(tests, "tree_cell.rx"), *lstm = read_model(tests, "lstm_cell.rx");
  unsigned char *bytes = NULL;
  rx_strbuf all = {0};
  base_strbuf_printf(&all, "%s\n%s", tree ? tree : "", lstm ? lstm : "");
  rx_module *m = rx_module_new();
  rx_diag diag;
  base_diag_init(&diag);
  bool ok = tree && lstm && ir_parse_module(m, "cells", all.data, all.len, &diag) && !diag.errors;
  CHECK_MSG(ok, "parse: %s", rx_diag_text(&diag));
  const char *tree_shared[] = {"w", "ul", "ur", "b"}, *lstm_shared[] = {"wx", "wh", "b"};
  if (ok)
    ok = ok_status(rx_batch_function(m, "tree_cell", tree_shared, 4, 1024, "tree_cell_batched"),
                   "batch tree_cell") &&
         ok_status(rx_batch_function(m, "lstm_cell", lstm_shared, 3, 1024, "lstm_cell_batched"),
                   "batch lstm_cell") &&
         ok_status(rx_batch_function_gather(m, "tree_cell", tree_shared, 4, 1024,
                                            "tree_cell_batched_gather"),
                   "gather tree_cell") &&
         ok_status(rx_batch_function_gather(m, "lstm_cell", lstm_shared, 3, 1024,
                                            "lstm_cell_batched_gather"),
                   "gather lstm_cell");
  if (ok && table)
    ok = ok_status(rx_module_set_batch_policy(m, table, table_len, "the trained table"),
                   "set_batch_policy");
  rx_compile_options o = {.ntargets = 1};
  o.targets[0] = &vk->target;
  rx_compile_result r;
  memset(&r, 0, sizeof r);
  if (ok) {
    ok = drv_compile(m, &o, &diag, &r);
    CHECK_MSG(ok, "compile: %s", rx_diag_text(&diag));
  }
  if (ok) {
    bytes = r.artifact;
    *len = r.artifact_len;
    r.artifact = NULL;
  }
  drv_compile_result_free(&r);
  base_diag_free(&diag);
  base_strbuf_free(&all);
  rx_module_free(m);
  free(tree);
  free(lstm);
  return bytes;
}

static unsigned char *compile_cells(const char *tests, const rxk_backend *vk, size_t *len) {
  return compile_cells_with(tests, vk, len, NULL, 0);
}

/* The largest |a - b| over n tensors of AB_H floats (NULLs skipped), INFINITY on NaN. */
static double diff_tensors(rx_rt_tensor **a, rx_rt_tensor **b, int n) {
  double worst = 0;
  for (int i = 0; i < n; i++) {
    if (!a[i] || !b[i]) continue;
    float x[AB_H], y[AB_H];
    if (!ok_status(rx_rt_tensor_read(a[i], x, sizeof x), "read") ||
        !ok_status(rx_rt_tensor_read(b[i], y, sizeof y), "read"))
      return INFINITY;
    for (int k = 0; k < AB_H; k++) {
      double e = fabs((double)x[k] - y[k]);
      worst = isnan(e) ? INFINITY : fmax(worst, e);
    }
  }
  return worst;
}

static double diff_ref(rx_rt_tensor **a, const double *ref, int n) {
  double worst = 0;
  for (int i = 0; i < n; i++) {
    float x[AB_H];
    if (!a[i]) continue;
    if (!ok_status(rx_rt_tensor_read(a[i], x, sizeof x), "read")) return INFINITY;
    for (int k = 0; k < AB_H; k++) {
      double e = fabs((double)x[k] - ref[(size_t)i * AB_H + k]);
      worst = isnan(e) ? INFINITY : fmax(worst, e);
    }
  }
  return worst;
}

static void release_n(rx_rt_tensor **t, int n) {
  for (int i = 0; i < n; i++) {
    rx_rt_tensor_release(t[i]);
    t[i] = NULL;
  }
}

/* The checks of one policy's run against ONE's outputs, the batcher-free run and the reference,
 * and its launches against want. */
static void check_run(const char *model, rx_rt_batch_policy p, rx_rt_tensor **got,
                      rx_rt_tensor **one, rx_rt_tensor **single, const double *ref, int n,
                      const rx_rt_batcher_stats *s, size_t want_launches) {
  double e_one = diff_tensors(got, one, n), e_single = diff_tensors(got, single, n);
  double e_ref = diff_ref(got, ref, n);
  printf("%s, %-6s: %4zu launches (%zu batched, largest %zu), %5zu copies of %8zu bytes; vs one "
         "%.3g, vs unbatched run %.3g, vs double %.3g\n",
         model, rx_rt_batch_policy_name(p), s->launches, s->batched_calls, s->max_batch, s->copies,
         s->copy_bytes, e_one, e_single, e_ref);
  CHECK_MSG(e_one <= 1e-6 && e_single <= 1e-6, "%s, %s: vs one %g, vs unbatched run %g", model,
            rx_rt_batch_policy_name(p), e_one, e_single);
  CHECK_MSG(e_ref <= 1e-4, "%s, %s: vs double %g", model, rx_rt_batch_policy_name(p), e_ref);
  CHECK_MSG(s->launches == want_launches, "%s, %s: %zu launches, expected %zu", model,
            rx_rt_batch_policy_name(p), s->launches, want_launches);
}

/* Policy p's run again with the gather path and the memory planning off (every operand stacked
 * by copies, the outputs in batch order): the same results and launches as with them (got, s),
 * and no fewer copy bytes: the plan predicts the DEPTH policy's batches, and under any other
 * policy a wrong prediction may cost copies but never results. */
static void check_copy_path(const char *model, rx_rt_batch_policy p, rx_rt_tensor **got,
                            rx_rt_tensor **copied, int n, const rx_rt_batcher_stats *s,
                            const rx_rt_batcher_stats *c) {
  double e = diff_tensors(got, copied, n);
  printf("%s, %-6s, copies only: %4zu launches, %5zu copies of %8zu bytes (with the memory paths "
         "%zu bytes, %zu views, %zu gathers); vs the memory paths %.3g\n",
         model, rx_rt_batch_policy_name(p), c->launches, c->copies, c->copy_bytes, s->copy_bytes,
         s->views, s->gathers, e);
  CHECK_MSG(e <= 1e-6, "%s, %s: the memory paths vs copies only: %g", model,
            rx_rt_batch_policy_name(p), e);
  CHECK_MSG(c->launches == s->launches && c->gathers == 0 && s->copy_bytes <= c->copy_bytes,
            "%s, %s: copies only: %zu launches, %zu gathers, %zu copy bytes; with the memory "
            "paths %zu launches, %zu copy bytes",
            model, rx_rt_batch_policy_name(p), c->launches, c->gathers, c->copy_bytes, s->launches,
            s->copy_bytes);
}

/* Runs the forest (f) or the sequences (q) under policy p with the gather path and the planning
 * off, then back on. */
static rx_status run_copies_only(rx_rt_artifact *a, const ab_forest *f, const ab_seqs *q,
                                 const ab_weights *w, const ab_inputs *in, rx_rt_tensor **out,
                                 rx_rt_batcher_stats *s, rx_rt_batch_policy p) {
  ab_no_gather = ab_no_plan = true;
  rx_status st =
      f ? ab_forest_batched_p(a, f, w, in, out, s, p) : ab_seqs_batched_p(a, q, w, in, out, s, p);
  ab_no_gather = ab_no_plan = false;
  return st;
}

static void run_forest(rx_rt_device *d, rx_rt_artifact *a) {
  ab_fsm_forget();
  ab_forest *f = malloc(sizeof *f);
  CHECK_MSG(ab_forest_make(f, 18, 16, 30), "forest over %d nodes", AB_MAX_NODES);
  ab_weights w;
  ab_inputs in;
  rx_status st = ab_weights_make(d, 1801, 3, AB_TREE_GATES, &w);
  if (!st) st = ab_inputs_forest(d, f, &in);
  rx_rt_tensor **out[NPOL], **single = calloc((size_t)f->n, sizeof *single);
  double *ref = malloc(sizeof *ref * (size_t)f->n * AB_H);
  ab_ref_forest(&w, f, ref);
  if (!st) st = ab_forest_single(a, f, &w, &in, single);
  for (int k = 0; k < NPOL; k++) {
    out[k] = calloc((size_t)f->n, sizeof *out[k]);
    rx_rt_batcher_stats s = {0};
    if (ok_status(st, "forest") &&
        ok_status(ab_forest_batched_p(a, f, &w, &in, out[k], &s, all_policies[k]), "forest run")) {
      check_run("TreeLSTM", all_policies[k], out[k], out[0], single, ref, f->n, &s,
                k == 0 ? (size_t)f->n : (size_t)f->max_height + 1);
      rx_rt_tensor **copied = calloc((size_t)f->n, sizeof *copied);
      rx_rt_batcher_stats c = {0};
      if (ok_status(run_copies_only(a, f, NULL, &w, &in, copied, &c, all_policies[k]),
                    "forest, copies only"))
        check_copy_path("TreeLSTM", all_policies[k], out[k], copied, f->n, &s, &c);
      /* the tree is where the plan gives arenas: fewer copy bytes under DEPTH, whose batches
       * it predicts */
      if (all_policies[k] == RX_RT_BATCH_DEPTH)
        CHECK_MSG(s.copy_bytes < c.copy_bytes && s.gathers > 0,
                  "TreeLSTM, depth: %zu copy bytes (%zu gathers), copies only %zu", s.copy_bytes,
                  s.gathers, c.copy_bytes);
      release_n(copied, f->n);
      free(copied);
    }
  }
  for (int k = 0; k < NPOL; k++) {
    release_n(out[k], f->n);
    free(out[k]);
  }
  release_n(single, f->n);
  free(single);
  free(ref);
  ab_inputs_free(&in);
  ab_weights_free(&w);
  free(f->x);
  free(f);
}

/* The crossover kept in the artifact: after the measured run of the LSTM q (the first batcher of
 * a to calibrate lstm_cell), a second batcher calibrates it again (the first ran on cold caches);
 * then a new batcher of a reports the second's crossover before it runs and times nothing, so its
 * decisions follow from it: step t's n_t calls (the sequences still running) make one launch when
 * n_t reaches it, else n_t (launches and batched calls exact, twice), with the outputs of rounds
 * at min batch 2 (1e-6). */
static void kept_crossover(rx_rt_artifact *a, const ab_seqs *q, const ab_weights *w,
                           const ab_inputs *in, rx_rt_tensor **want) {
  rx_rt_batcher *b = NULL;
  const bool sh[6] = {false, false, false, true, true, true};
  size_t g = 0;
  rx_rt_tensor *second[AB_MAX_SEQS] = {0};
  rx_rt_batcher_stats s2 = {0};
  bool ok = ok_status(ab_seqs_batched_p(a, q, w, in, second, &s2, RX_RT_BATCH_ROUNDS), "second");
  CHECK_MSG(!ok || diff_tensors(second, want, q->n) <= 1e-6, "the second calibrating run differs");
  release_n(second, q->n);
  if (!ok || !ok_status(rx_rt_batcher_create(a, &b), "batcher") ||
      !ok_status(rx_rt_batcher_add_function(b, "lstm_cell", "lstm_cell_batched", sh, 6), "add") ||
      !ok_status(rx_rt_batcher_get_crossover(b, "lstm_cell", &g), "crossover")) {
    rx_rt_batcher_release(b);
    return;
  }
  rx_rt_batcher_release(b);
  CHECK_MSG(g >= 2,
            "a new batcher of the artifact: crossover %zu before its run (expected the "
            "one measured by the batcher before, >= 2)",
            g);
  /* twice with the kept crossover, then once with a crossover given (set_crossover: 3) */
  for (int run = 0; run < 3 && g >= 2; run++) {
    size_t x = run < 2 ? g : 3, launches = 0, batched = 0;
    for (int t = 0; t < q->max_len; t++) {
      size_t n = 0;
      for (int k = 0; k < q->n; k++) n += q->len[k] > t;
      launches += n >= x ? 1 : n;
      batched += n >= x;
    }
    rx_rt_tensor *o[AB_MAX_SEQS] = {0};
    rx_rt_batcher_stats s = {0};
    ab_crossover = run < 2 ? 0 : x;
    if (ok_status(ab_seqs_batched_p(a, q, w, in, o, &s, RX_RT_BATCH_ROUNDS), "cached crossover")) {
      double e = diff_tensors(o, want, q->n);
      CHECK_MSG(e <= 1e-6 && s.launches == launches && s.batched_calls == batched,
                "crossover %zu (%s), run %d: %zu launches (%zu batched), expected %zu (%zu); vs "
                "rounds %g",
                x, run < 2 ? "kept" : "given", run, s.launches, s.batched_calls, launches, batched,
                e);
      printf("crossover %zu %s: %zu launches (%zu batched) without timing\n", x,
             run < 2 ? "kept in the artifact" : "given", s.launches, s.batched_calls);
    }
    ab_crossover = 0;
    release_n(o, q->n);
  }
}

static void run_lstm(rx_rt_device *d, rx_rt_artifact *a, const char *model, const int *lens,
                     int nlens) {
  ab_fsm_forget();
  ab_seqs q;
  ab_seqs_make(&q, 1802, lens, nlens);
  ab_weights w;
  ab_inputs in;
  rx_status st = ab_weights_make(d, 1803, 2, AB_LSTM_GATES, &w);
  if (!st) st = ab_inputs_seqs(d, &q, &in);
  rx_rt_tensor *out[NPOL][AB_MAX_SEQS] = {{0}}, *single[AB_MAX_SEQS] = {0};
  double ref[AB_MAX_SEQS * AB_H];
  ab_ref_seqs(&w, &q, ref);
  if (!st) st = ab_seqs_single(a, &q, &w, &in, single);
  for (int k = 0; k < NPOL; k++) {
    rx_rt_batcher_stats s = {0};
    if (ok_status(st, model) &&
        ok_status(ab_seqs_batched_p(a, &q, &w, &in, out[k], &s, all_policies[k]), model)) {
      check_run(model, all_policies[k], out[k], out[0], single, ref, q.n, &s,
                k == 0 ? (size_t)q.total : (size_t)q.max_len);
      rx_rt_tensor *copied[AB_MAX_SEQS] = {0};
      rx_rt_batcher_stats c = {0};
      if (ok_status(run_copies_only(a, NULL, &q, &w, &in, copied, &c, all_policies[k]),
                    "LSTM, copies only"))
        check_copy_path(model, all_policies[k], out[k], copied, q.n, &s, &c);
      release_n(copied, q.n);
    }
  }
  if (nlens == 5 && !check_failed) { /* min_batch 5: only the first step (5 sequences) batches */
    rx_rt_batcher_stats s = {0};
    rx_rt_tensor *mb[AB_MAX_SEQS] = {0};
    ab_min_batch = 5;
    if (ok_status(ab_seqs_batched_p(a, &q, &w, &in, mb, &s, RX_RT_BATCH_ROUNDS), model))
      check_run("LSTM 1,7,16,17,100, min batch 5", RX_RT_BATCH_ROUNDS, mb, out[0], single, ref, q.n,
                &s, (size_t)q.total - 4);
    CHECK_MSG(s.batched_calls == 1, "%zu batched calls", s.batched_calls);
    ab_min_batch = 0; /* cost-aware: which rounds batch depends on the measured times */
    rx_rt_tensor *ms[AB_MAX_SEQS] = {0};
    if (ok_status(ab_seqs_batched_p(a, &q, &w, &in, ms, &s, RX_RT_BATCH_ROUNDS), model)) {
      double e = diff_tensors(ms, out[0], q.n);
      printf("LSTM 1,7,16,17,100, measured: %zu launches (%zu batched, largest %zu), vs rounds "
             "%.3g\n",
             s.launches, s.batched_calls, s.max_batch, e);
      CHECK_MSG(e <= 1e-6 && s.calls == (size_t)q.total && s.launches >= 100 &&
                    s.launches <= (size_t)q.total,
                "measured: vs rounds %g, %zu calls in %zu launches", e, s.calls, s.launches);
      kept_crossover(a, &q, &w, &in, out[0]);
    }
    release_n(ms, q.n);
    ab_min_batch = 2;
    release_n(mb, q.n);
  }
  for (int k = 0; k < NPOL; k++) release_n(out[k], q.n);
  release_n(single, q.n);
  ab_inputs_free(&in);
  ab_weights_free(&w);
  ab_seqs_free(&q);
}

/* ---- across functions: LSTM sequences, a forest, and sequences started by its roots ---- */

enum { MIX_ZERO = 3, MIX_TREES = 4, MIX_LEN = 6 };

typedef struct mixed {
  ab_forest *f;
  ab_seqs q; /* MIX_ZERO zero-started sequences, then one per tree, MIX_LEN steps each */
  ab_weights wt, wl;
  ab_inputs tin, lin;
  double ref[(MIX_ZERO + MIX_TREES) * AB_H]; /* every sequence's last h */
} mixed;

/* The forest's h and c in double (as ab_ref_forest, keeping c). */
static void ref_forest_hc(const ab_weights *w, const ab_forest *f, double *h, double *c) {
  double zero[AB_H] = {0}, x[AB_H];
  for (int i = 0; i < f->n; i++) {
    for (int k = 0; k < AB_H; k++) x[k] = f->x[(size_t)i * AB_H + k];
    int l = f->left[i], r = f->right[i];
    ab_ref_tree_cell(w, x, l < 0 ? zero : h + (size_t)l * AB_H, l < 0 ? zero : c + (size_t)l * AB_H,
                     r < 0 ? zero : h + (size_t)r * AB_H, r < 0 ? zero : c + (size_t)r * AB_H,
                     h + (size_t)i * AB_H, c + (size_t)i * AB_H);
  }
}

static rx_status mixed_make(rx_rt_device *d, mixed *m) {
  memset(m, 0, sizeof *m);
  m->f = malloc(sizeof *m->f);
  if (!m->f || !ab_forest_make(m->f, 41, MIX_TREES, 12))
    return base_status_make(RX_ERR_INTERNAL, "the mixed model's forest");
  int lens[MIX_ZERO + MIX_TREES];
  for (int i = 0; i < MIX_ZERO + MIX_TREES; i++) lens[i] = MIX_LEN;
  ab_seqs_make(&m->q, 43, lens, MIX_ZERO + MIX_TREES);
  rx_status st = ab_weights_make(d, 1801, 3, AB_TREE_GATES, &m->wt);
  if (!st) st = ab_weights_make(d, 1803, 2, AB_LSTM_GATES, &m->wl);
  if (!st) st = ab_inputs_forest(d, m->f, &m->tin);
  if (!st) st = ab_inputs_seqs(d, &m->q, &m->lin);
  double *h = calloc((size_t)m->f->n * AB_H, sizeof *h), *c = calloc((size_t)m->f->n * AB_H, 8);
  ref_forest_hc(&m->wt, m->f, h, c);
  for (int s = 0; s < m->q.n; s++) {
    double hs[AB_H] = {0}, cs[AB_H] = {0}, x[AB_H];
    if (s >= MIX_ZERO) {
      int root = m->f->roots[s - MIX_ZERO];
      memcpy(hs, h + (size_t)root * AB_H, sizeof hs);
      memcpy(cs, c + (size_t)root * AB_H, sizeof cs);
    }
    for (int t = 0; t < MIX_LEN; t++) {
      for (int k = 0; k < AB_H; k++) x[k] = m->q.x[s][(size_t)t * AB_H + k];
      ab_ref_lstm_cell(&m->wl, x, hs, cs);
    }
    memcpy(m->ref + (size_t)s * AB_H, hs, sizeof hs);
  }
  free(h);
  free(c);
  return st;
}

static void mixed_free(mixed *m) {
  ab_inputs_free(&m->tin);
  ab_inputs_free(&m->lin);
  ab_weights_free(&m->wt);
  ab_weights_free(&m->wl);
  ab_seqs_free(&m->q);
  if (m->f) free(m->f->x);
  free(m->f);
}

/* Submits the zero-started sequences, the forest, then the root-started sequences. */
static rx_status mixed_submit(rx_rt_batcher *b, const mixed *m, size_t *last) {
  const bool tshared[9] = {false, false, false, false, false, true, true, true, true};
  const bool lshared[6] = {false, false, false, true, true, true};
  rx_status st = rx_rt_batcher_add_function(b, "lstm_cell", "lstm_cell_batched", lshared, 6);
  if (!st) st = rx_rt_batcher_add_function(b, "tree_cell", "tree_cell_batched", tshared, 9);
  size_t base = 0, first_tree = MIX_ZERO * MIX_LEN;
  for (int s = 0; s < m->q.n && !st; s++) {
    if (s == MIX_ZERO) /* the forest, its node i call first_tree + i */
      for (int i = 0; i < m->f->n && !st; i++) {
        rx_rt_batch_arg args[9] = {{0}};
        int l = m->f->left[i], r = m->f->right[i];
        args[0].tensor = l < 0 ? m->tin.x[i] : m->tin.zero;
        for (int k = 0; k < 4; k++) {
          int ch = k < 2 ? l : r;
          if (ch < 0)
            args[1 + k].tensor = m->tin.zero;
          else
            args[1 + k] = (rx_rt_batch_arg){NULL, first_tree + (size_t)ch, (size_t)(k % 2)};
        }
        for (int k = 0; k < 4; k++) args[5 + k].tensor = m->wt.t[k];
        st = rx_rt_batcher_submit(b, "tree_cell", args, 9, NULL);
      }
    for (int t = 0; t < MIX_LEN && !st; t++) {
      rx_rt_batch_arg args[6] = {{m->lin.x[base + (size_t)t], 0, 0}};
      for (int o = 0; o < 2; o++) {
        if (t > 0)
          args[1 + o] = (rx_rt_batch_arg){NULL, last[s], (size_t)o};
        else if (s < MIX_ZERO)
          args[1 + o].tensor = m->lin.zero;
        else
          args[1 + o] =
              (rx_rt_batch_arg){NULL, first_tree + (size_t)m->f->roots[s - MIX_ZERO], (size_t)o};
      }
      for (int k = 0; k < 3; k++) args[3 + k].tensor = m->wl.t[k];
      st = rx_rt_batcher_submit(b, "lstm_cell", args, 6, &last[s]);
    }
    base += MIX_LEN;
  }
  return st;
}

/* One run under policy p; the FSM table loaded from load (when not NULL) or trained (episodes
 * > 0), and saved into save (when not NULL). out[s]: every sequence's last h. */
static rx_status mixed_run(rx_rt_artifact *a, const mixed *m, rx_rt_batch_policy p,
                           const void *load, size_t load_len, size_t episodes, unsigned char *save,
                           size_t *save_len, rx_rt_tensor **out, rx_rt_batcher_stats *s) {
  rx_rt_batcher *b = NULL;
  size_t last[MIX_ZERO + MIX_TREES];
  rx_status st = rx_rt_batcher_create(a, &b);
  if (!st) st = rx_rt_batcher_set_policy(b, p);
  if (!st) st = rx_rt_batcher_set_min_batch(b, 2); /* launches compared: no timing */
  if (!st) st = mixed_submit(b, m, last);
  if (!st && load) st = rx_rt_batcher_policy_load(b, load, load_len);
  if (!st && episodes) st = rx_rt_batcher_train(b, episodes, 7);
  if (!st) st = rx_rt_batcher_run(b);
  if (!st && save) st = rx_rt_batcher_policy_save(b, save, 1 << 16, save_len);
  for (int i = 0; i < m->q.n && !st; i++) {
    st = rx_rt_batcher_output(b, last[i], 0, &out[i]);
    if (!st) rx_rt_tensor_retain(out[i]);
  }
  rx_rt_batcher_get_stats(b, s);
  rx_rt_batcher_release(b);
  return st;
}

static void want_error(rx_status st, const char *what, const char *want) {
  CHECK_MSG(st, "%s: no error", what);
  if (!st) return;
  CHECK_MSG(strstr(rx_status_message(st), want), "%s: '%s' lacks '%s'", what, rx_status_message(st),
            want);
  printf("%s: refused as expected: %s\n", what, rx_status_message(st));
  rx_status_free(st);
}

/* The saved table's errors: each a corrupted copy loaded into a fresh batcher. */
static void load_errors(rx_rt_artifact *a, const mixed *m, const unsigned char *bytes, size_t len) {
  unsigned char *bad = malloc(len + 1);
  for (int kase = 0; kase < 5; kase++) {
    rx_rt_batcher *b = NULL;
    size_t last[MIX_ZERO + MIX_TREES], n = len;
    memcpy(bad, bytes, len);
    if (!ok_status(rx_rt_batcher_create(a, &b), "batcher") ||
        !ok_status(mixed_submit(b, m, last), "submit")) {
      rx_rt_batcher_release(b);
      break;
    }
    const char *want = NULL;
    switch (kase) {
    case 0:
      bad[0] = 'Z', want = "not an FSM table";
      break;
    case 1:
      bad[16] = 'X', want = "function 0 is 'Xstm_cell' in the table, 'lstm_cell' in the batcher";
      break;
    case 2:
      n = len - 1, want = "bytes of actions, expected 16";
      break;
    case 3: /* state 0 (nothing ready): no action can be right */
      bad[len - 16] = 1, want = "state 0's action 1 names a function with no ready call";
      break;
    case 4:
      n = 12, want = "the table covers 7 functions (1 to 6)";
      memcpy(bad + 8, "\x07\0\0\0", 4);
      break;
    }
    want_error(rx_rt_batcher_policy_load(b, bad, n), "policy_load", want);
    rx_rt_batcher_release(b);
  }
  free(bad);
}

/* A batcher of a's with both functions registered, under the FSM policy, no call submitted, run;
 * nfns 1: lstm_cell only. Its table saved into table (1 << 16 bytes), *table_len its length. */
static rx_status empty_run(rx_rt_artifact *a, int nfns, unsigned char *table, size_t *table_len) {
  const bool ls[6] = {false, false, false, true, true, true};
  const bool ts[9] = {false, false, false, false, false, true, true, true, true};
  rx_rt_batcher *b = NULL;
  rx_status st = rx_rt_batcher_create(a, &b);
  if (!st) st = rx_rt_batcher_add_function(b, "lstm_cell", "lstm_cell_batched", ls, 6);
  if (!st && nfns > 1) st = rx_rt_batcher_add_function(b, "tree_cell", "tree_cell_batched", ts, 9);
  if (!st) st = rx_rt_batcher_set_policy(b, RX_RT_BATCH_FSM);
  if (!st) st = rx_rt_batcher_run(b);
  if (!st) st = rx_rt_batcher_policy_save(b, table, 1 << 16, table_len);
  rx_rt_batcher_release(b);
  return st;
}

/* The table in the artifact (relaxc compile --batch-policy): the trained table (bytes, from the
 * run with outputs trained_out and `trained` launches) compiled into the cells' artifact; a
 * batcher under the FSM policy, neither trained nor given a table, runs the mixed model with the
 * same launches and outputs, exactly. It did not train: a batcher with no calls submitted runs
 * (training needs calls: without the section, on a, the same run is refused) and its table is
 * the section's bytes. A batcher that registers fewer functions than the table names is refused
 * at its run; a table naming a function the module lacks, of another version or with a wrong
 * function count is refused when compiled. */
static void artifact_tables(const char *tests, const rxk_backend *vk, rx_rt_artifact *a,
                            const mixed *m, const unsigned char *bytes, size_t len,
                            rx_rt_tensor **trained_out, size_t trained) {
  int n = m->q.n;
  rx_rt_tensor *out[MIX_ZERO + MIX_TREES] = {0};
  rx_rt_batcher_stats s = {0};
  unsigned char *none = malloc(1 << 16);
  size_t alen = 0, tlen = 0;
  unsigned char *art = compile_cells_with(tests, vk, &alen, bytes, len);
  rx_rt_artifact *at = NULL;
  if (art &&
      ok_status(rx_rt_artifact_load_memory(vk->dev, art, alen, "cells_fsm.rxm", &at), "load") &&
      ok_status(mixed_run(at, m, RX_RT_BATCH_FSM, NULL, 0, 0, NULL, NULL, out, &s),
                "the artifact's table's run")) {
    double e = diff_tensors(out, trained_out, n);
    printf("the trained table in the artifact: %zu launches (trained: %zu), outputs differ by "
           "%g\n",
           s.launches, trained, e);
    CHECK_MSG(s.launches == trained && e == 0,
              "the artifact's table: %zu launches (trained %zu), outputs differ by %g", s.launches,
              trained, e);
    if (ok_status(empty_run(at, 2, none, &tlen), "a run of no calls on the artifact's table"))
      CHECK_MSG(tlen == len && !memcmp(none, bytes, len), "the table taken: %zu bytes of %zu", tlen,
                len);
    want_error(empty_run(a, 2, none, &tlen), "run of no calls, no table",
               "train: no pending calls to learn from");
    want_error(empty_run(at, 1, none, &tlen), "run",
               "the FSM table of the artifact's section 'batch_policy.fsm' (relaxc compile "
               "--batch-policy): batcher: policy_load: the table covers 2 functions, the batcher "
               "has 1 registered");
  }
  release_n(out, n);
  rx_rt_artifact_release(at);
  free(art);
  memcpy(none, bytes, len);
  /* refused at compile time: a function the module does not have */
  rx_module *mod = rx_module_new();
  rx_diag diag;
  base_diag_init(&diag);
  const char *one = "graph_fn lstm_cell(x: f32[4]) -> f32[4] {\n  return x\n}\n";
  CHECK_MSG(ir_parse_module(mod, "one", one, strlen(one), &diag), "parse: %s", rx_diag_text(&diag));
  want_error(rx_module_set_batch_policy(mod, bytes, len, "t.fsm"), "set_batch_policy",
             "t.fsm: the FSM table's function 1, 'tree_cell', is not a graph function of the "
             "module");
  none[9] = 'Z'; /* the function count's second byte: 2 + 256 * 'Z' functions */
  want_error(rx_module_set_batch_policy(mod, none, len, "t.fsm"), "set_batch_policy",
             "t.fsm: the table covers");
  memcpy(none, bytes, len);
  none[7] = '2';
  want_error(rx_module_set_batch_policy(mod, none, len, "t.fsm"), "set_batch_policy",
             "an FSM table of version '2'");
  base_diag_free(&diag);
  rx_module_free(mod);
  free(none);
}

static void run_mixed(const char *tests, const rxk_backend *vk, rx_rt_artifact *a) {
  rx_rt_device *d = vk->dev;
  mixed m;
  rx_status st = mixed_make(d, &m);
  int n = m.q.n, h1 = m.f->max_height + 1;
  rx_rt_tensor *out[NPOL][MIX_ZERO + MIX_TREES] = {{0}}, *again[MIX_ZERO + MIX_TREES] = {0};
  rx_rt_batcher_stats s[NPOL] = {{0}}, s2 = {0};
  unsigned char *bytes = malloc(1 << 16);
  size_t len = 0;
  const size_t want[NPOL] = {(size_t)(m.q.total + m.f->n), (size_t)(2 * MIX_LEN + h1), 0, 0,
                             (size_t)(h1 + MIX_LEN)}; /* depth, agenda: no more than rounds */
  for (int k = 0; k < NPOL && ok_status(st, "mixed model"); k++) {
    st = mixed_run(a, &m, all_policies[k], NULL, 0, 0, k == NPOL - 1 ? bytes : NULL, &len, out[k],
                   &s[k]);
    if (!ok_status(st, "mixed run")) break;
    double e_one = diff_tensors(out[k], out[0], n), e_ref = diff_ref(out[k], m.ref, n);
    printf("mixed (%d LSTMs from zero, %d trees of height <= %d whose roots start %d more, %d "
           "steps each), %-6s: %3zu launches (%zu batched), %4zu copies of %7zu bytes; vs one "
           "%.3g, vs double %.3g\n",
           MIX_ZERO, MIX_TREES, h1 - 1, MIX_TREES, MIX_LEN,
           rx_rt_batch_policy_name(all_policies[k]), s[k].launches, s[k].batched_calls, s[k].copies,
           s[k].copy_bytes, e_one, e_ref);
    CHECK_MSG(e_one <= 1e-6 && e_ref <= 1e-4, "mixed, %s: vs one %g, vs double %g",
              rx_rt_batch_policy_name(all_policies[k]), e_one, e_ref);
    CHECK_MSG(!want[k] || s[k].launches == want[k], "mixed, %s: %zu launches, expected %zu",
              rx_rt_batch_policy_name(all_policies[k]), s[k].launches, want[k]);
  }
  if (!check_failed) {
    CHECK_MSG(s[4].launches < s[1].launches && s[4].launches <= s[2].launches &&
                  s[4].launches <= s[3].launches,
              "the FSM's %zu launches: rounds %zu, depth %zu, agenda %zu", s[4].launches,
              s[1].launches, s[2].launches, s[3].launches);
    /* the saved table, loaded into a fresh batcher: the same batches without training */
    st = mixed_run(a, &m, RX_RT_BATCH_FSM, bytes, len, 0, NULL, NULL, again, &s2);
    if (ok_status(st, "the loaded table's run"))
      CHECK_MSG(s2.launches == s[4].launches && diff_tensors(again, out[4], n) == 0,
                "loaded: %zu launches, trained %zu", s2.launches, s[4].launches);
    printf("the FSM table: %zu bytes, loaded back: %zu launches\n", len, s2.launches);
    load_errors(a, &m, bytes, len);
    artifact_tables(tests, vk, a, &m, bytes, len, out[4], s[4].launches);
  }
  for (int k = 0; k < NPOL; k++) release_n(out[k], n);
  release_n(again, n);
  free(bytes);
  mixed_free(&m);
}

/* The crossover from given measurements (seconds; the first of each kind a warm-up). */
static void crossover_rule(void) {
  const double warm = 100.0;
  struct {
    double single[3], bt[3];
    size_t bg[3], ns, nb, want;
  } cases[] = {
      /* s = 1, batched 5.5 at g = 4 (one size: constant): batch from 6 */
      {{warm, 1.0, 1.2}, {warm, 6.0, 5.5}, {9, 4, 4}, 3, 3, 6},
      /* s = 1, batched 3 at 2 and 7 at 10: a = 2, c = 0.5, batch when 0.5 g > 2: from 5 */
      {{warm, 1.0, 1.0}, {warm, 3.0, 7.0}, {9, 2, 10}, 3, 3, 5},
      /* a batched row costs more than an unbatched call: never */
      {{warm, 0.5, 0.5}, {warm, 2.0, 4.0}, {9, 2, 4}, 3, 3, SIZE_MAX},
      /* a cheap batched call: from 2 (a batch of one is never batched) */
      {{warm, 1.0, 1.0}, {warm, 0.1, 0.1}, {9, 3, 3}, 3, 3, 2},
      /* only the warm-up of one kind: not calibrated */
      {{warm, 1.0, 1.0}, {warm, 0, 0}, {9, 0, 0}, 3, 1, 0},
  };
  for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
    size_t g =
        rt_abp_crossover(cases[k].single, cases[k].ns, cases[k].bt, cases[k].bg, cases[k].nb);
    CHECK_MSG(g == cases[k].want, "crossover case %zu: %zu, expected %zu", k, g, cases[k].want);
  }
  printf("crossover rule: %zu cases\n", sizeof cases / sizeof *cases);
}

static void api_checks(rx_rt_artifact *a) {
  const char *names[NPOL] = {"rounds", "depth", "agenda", "fsm", "one"};
  for (int p = 0; p < NPOL; p++)
    CHECK_MSG(!strcmp(rx_rt_batch_policy_name((rx_rt_batch_policy)p), names[p]), "policy %d", p);
  CHECK_MSG(!rx_rt_batch_policy_name((rx_rt_batch_policy)NPOL), "a name past the last policy");
  rx_rt_batcher *b = NULL;
  if (!ok_status(rx_rt_batcher_create(a, &b), "batcher")) return;
  want_error(rx_rt_batcher_set_policy(b, (rx_rt_batch_policy)9), "set_policy", "no policy 9");
  want_error(rx_rt_batcher_set_min_batch(b, 1), "set_min_batch", "or 2 or more");
  size_t len = 1;
  want_error(rx_rt_batcher_policy_save(b, NULL, 0, &len), "policy_save", "no FSM table");
  CHECK_MSG(len == 0, "len %zu", len);
  want_error(rx_rt_batcher_train(b, 10, 1), "train", "the FSM policy covers 1 to 6 functions");
  const bool sh[6] = {false, false, false, true, true, true};
  size_t g = 1;
  want_error(rx_rt_batcher_get_crossover(b, "lstm_cell", &g), "get_crossover", "no function");
  CHECK_MSG(g == 0, "crossover of an unknown function %zu", g);
  if (ok_status(rx_rt_batcher_add_function(b, "lstm_cell", "lstm_cell_batched", sh, 6), "add") &&
      ok_status(rx_rt_batcher_get_crossover(b, "lstm_cell", &g), "crossover")) {
    CHECK_MSG(g == 0, "crossover before any run %zu (expected 0: calibrating)", g);
    want_error(rx_rt_batcher_set_crossover(b, "lstm_cell", 1), "set_crossover", "2 or more");
    want_error(rx_rt_batcher_set_crossover(b, "gru_cell", 4), "set_crossover", "no function");
    ok_status(rx_rt_batcher_set_crossover(b, "lstm_cell", 7), "set_crossover 7");
    ok_status(rx_rt_batcher_get_crossover(b, "lstm_cell", &g), "crossover");
    CHECK_MSG(g == 7, "given crossover %zu (expected 7)", g);
    ok_status(rx_rt_batcher_set_min_batch(b, 3), "min batch 3");
    ok_status(rx_rt_batcher_get_crossover(b, "lstm_cell", &g), "crossover");
    CHECK_MSG(g == 3, "forced crossover %zu", g);
  }
  rx_rt_batcher_release(b);
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  const char *tests = argc > 1 ? argv[1] : "tests";
  rxk_backend vk = {.kind = RX_RT_BACKEND_VULKAN};
  rxk_rt_open(&vk, "vulkan:0");
  if (!vk.dev) {
    printf("SKIP: the batcher's policies need a Vulkan device (%s)\n", vk.why);
    return 77;
  }
  size_t len = 0;
  ab_min_batch = 2; /* the launches are compared: every round of two calls or more batched */
  crossover_rule();
  unsigned char *bytes = compile_cells(tests, &vk, &len);
  rx_rt_artifact *a = NULL;
  if (bytes && ok_status(rx_rt_artifact_load_memory(vk.dev, bytes, len, "cells.rxm", &a), "load")) {
    api_checks(a);
    run_forest(vk.dev, a);
    const int mixed_lens[] = {1, 7, 16, 17, 100}, straggler[] = {100, 3};
    run_lstm(vk.dev, a, "LSTM 1,7,16,17,100", mixed_lens, 5);
    run_lstm(vk.dev, a, "LSTM straggler 100,3", straggler, 2);
    run_mixed(tests, &vk, a);
  }
  rx_rt_artifact_release(a);
  free(bytes);
  char msg[1024];
  CHECK_MSG(rxk_rt_close(&vk, msg, sizeof msg), "%s", msg);
  return check_finish("test_autobatch_policy");
}
