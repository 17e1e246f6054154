/* Grain size (issue 36, docs/autobatch.md "Grain size"): a unit of several cells batched as one
 * function. The units of tests/autobatch/grain_cells.rx call lstm_cell (lstm_cell.rx); their
 * batched forms come from rx_batch_function, which inlines the calls first (passes/inline.c), so
 * each is one function of ops (checked: no call of lstm_cell is left in it). Two models
 * (tests/autobatch/grain_ref.h), each run in its unit form and its one-cell form over the same
 * inputs, on Vulkan (lavapipe in CI, under the validation layer):
 *   - a 2-layer stacked LSTM (hidden 64): stack_step per time step, against two lstm_cell calls
 *     (layer 1's weights, then layer 2's) per step;
 *   - a grain-2 LSTM chain: lstm_cell2 (two steps) while two or more steps remain and lstm_cell
 *     for a last odd one, against lstm_cell at every step;
 * over sequences of lengths 1, 7, 16, 17, 100 (33 in place of 100 where RX_KERNEL_SIZES is set, as
 * the sanitizer pass of CI sets it) and 2, 1, 3. Every form runs batched under the
 * policies rounds, depth, agenda and fsm (min batch 2: the launches are counted) and one call at a
 * time; every call's outputs (each step's h and c, both layers') batched vs one at a time within
 * 1e-6 of max(1, |reference|), both vs the C double reference within 1e-5. Launches: the stacked
 * unit form makes one per depth of its call graph (the longest sequence's steps), and every unit
 * form fewer than its one-cell form under every policy (about half); the launches and copy bytes of
 * both are printed (docs/autobatch.md's table).
 *
 * usage: test_autobatch_grain TESTS_DIR */
/* test-needs: runtime */
#include "../autobatch/grain_ref.h"
#include "base/base.h"
#include "check.h"
#include "driver/driver.h"
#include "ir/ir.h"
#include "relaxc/compiler.h"
#include "support_runtime.h"

#include <stdio.h>

#define GR_TOL_XY  1e-6
#define GR_TOL_REF 1e-5

enum { NPOL = 4 };
static const rx_rt_batch_policy policies[NPOL] = {RX_RT_BATCH_ROUNDS, RX_RT_BATCH_DEPTH,
                                                  RX_RT_BATCH_AGENDA, RX_RT_BATCH_FSM};

static bool ok_status(rx_status s, const char *what) {
  CHECK_MSG(!s, "%s: %s", what, rx_status_message(s));
  rx_status_free(s);
  return !s;
}

/* The text of graph function name in text (up to the next function), or NULL. */
static char *fn_text(const char *text, const char *name) {
  char head[128];
  snprintf(head, sizeof head, "graph_fn %s(", name);
  const char *p = text ? strstr(text, head) : NULL;
  if (!p) return NULL;
  const char *e = strstr(p + 1, "\ngraph_fn ");
  size_t n = e ? (size_t)(e - p) : strlen(p);
  char *s = malloc(n + 1);
  memcpy(s, p, n);
  s[n] = '\0';
  return s;
}

/* lstm_cell.rx and grain_cells.rx in one module, the cell and both units batched (bound 1024). */
static rx_module *make_module(const char *tests) {
  const char *const files[] = {"lstm_cell.rx", "grain_cells.rx"};
  char why[4096] = "";
  rx_module *m = rxk_parse_autobatch(tests, files, RX_ARRAY_LEN(files), "grain", why, sizeof why);
  CHECK_MSG(m != NULL, "%s", why);
  bool ok = m != NULL;
  static const struct {
    const char *fn, *out, *shared[6];
    size_t n;
  } fns[] = {
      {"lstm_cell", "lstm_cell_batched", {"wx", "wh", "b"}, 3},
      {"stack_step", "stack_step_batched", {"wx1", "wh1", "b1", "wx2", "wh2", "b2"}, 6},
      {"lstm_cell2", "lstm_cell2_batched", {"wx", "wh", "b"}, 3},
  };
  for (size_t i = 0; ok && i < RX_ARRAY_LEN(fns); i++)
    ok = ok_status(rx_batch_function(m, fns[i].fn, fns[i].shared, fns[i].n, 1024, fns[i].out),
                   fns[i].fn);
  char *text = ok ? rx_module_to_text(m) : NULL;
  const char *units[][2] = {
      {"stack_step_batched", "graph_fn stack_step_batched(x: f32[batch, 64], h1: f32[batch, 64]"},
      {"lstm_cell2_batched", "graph_fn lstm_cell2_batched(x0: f32[batch, 64], x1: f32[batch, 64]"},
  };
  for (size_t i = 0; ok && i < RX_ARRAY_LEN(units); i++) {
    char *f = fn_text(text, units[i][0]);
    CHECK_MSG(f && strstr(f, units[i][1]), "the module lacks '%s'", units[i][1]);
    /* one body of ops: the cells inlined, two of them (two splits of the gates) */
    CHECK_MSG(f && !strstr(f, "lstm_cell("), "%s still calls lstm_cell", units[i][0]);
    const char *sp = f ? strstr(f, "= split(") : NULL;
    CHECK_MSG(sp && strstr(sp + 1, "= split("), "%s: expected two cells' splits", units[i][0]);
    free(f);
  }
  /* the units themselves keep their calls (batch_fn inlines into a copy) */
  char *unit = fn_text(text, "stack_step");
  CHECK_MSG(!ok || (unit && strstr(unit, "lstm_cell(")), "stack_step lost its calls");
  free(unit);
  rx_free(text);
  if (!ok) {
    rx_module_free(m);
    return NULL;
  }
  return m;
}

typedef struct form_stats {
  size_t launches[NPOL], copy_bytes[NPOL], depths;
} form_stats;

/* g one call at a time and batched under every policy: the comparisons, the calls, and for the
 * unit form (units) one launch per depth. */
static void run_form(const char *name, bm_graph *g, rx_rt_artifact *a, bool units, form_stats *fs) {
  memset(fs, 0, sizeof *fs);
  if (!ok_status(g->st, name)) return;
  rx_rt_tensor **xs = bm_outputs_new(g);
  rx_status st = bm_run_single(g, a, xs);
  int levels = 0, wide = 0;
  bm_levels(g, &levels, &wide);
  fs->depths = (size_t)levels;
  for (int p = 0; p < NPOL && ok_status(st, name); p++) {
    rx_rt_tensor **xb = bm_outputs_new(g);
    rx_rt_batcher_stats stats = {0};
    bm_policy = policies[p];
    st = bm_run_batched(g, a, xb, &stats);
    bm_policy = RX_RT_BATCH_ROUNDS;
    double e_xy = 0, e_bref = 0, e_sref = 0, e_yx = 0;
    size_t n = 0;
    if (!st) st = bm_compare(g, xb, xs, &e_xy, &e_bref, &n);
    if (!st) st = bm_compare(g, xs, xb, &e_yx, &e_sref, &n);
    const char *pol = rx_rt_batch_policy_name(policies[p]);
    if (ok_status(st, name)) {
      fs->launches[p] = stats.launches;
      fs->copy_bytes[p] = stats.copy_bytes;
      printf("%s, %s: %d calls in %zu launches (%zu batched, largest %zu), %zu copies of %zu "
             "bytes, %zu views, %zu values: batched vs one at a time %.3g, vs double %.3g (one at "
             "a time vs double %.3g)\n",
             name, pol, g->ncalls, stats.launches, stats.batched_calls, stats.max_batch,
             stats.copies, stats.copy_bytes, stats.views, n, e_xy, e_bref, e_sref);
      CHECK_MSG(e_xy <= GR_TOL_XY, "%s, %s: batched vs one at a time: %g", name, pol, e_xy);
      CHECK_MSG(e_bref <= GR_TOL_REF && e_sref <= GR_TOL_REF, "%s, %s: vs double: %g, %g", name,
                pol, e_bref, e_sref);
      CHECK_MSG(stats.calls == (size_t)g->ncalls, "%s, %s: %zu calls run of %d", name, pol,
                stats.calls, g->ncalls);
      CHECK_MSG(!units || stats.launches == (size_t)levels, "%s, %s: %zu launches for %d depths",
                name, pol, stats.launches, levels);
    }
    bm_outputs_free(g, xb);
  }
  bm_outputs_free(g, xs);
}

/* Both forms of one model: the unit form's launches fewer than the one-cell form's under every
 * policy, by at least the factor `gain` (the launches a unit saves: 2 for two cells a unit). */
static void compare_forms(const char *model, const form_stats *unit, const form_stats *cells,
                          double gain) {
  for (int p = 0; p < NPOL && !check_failed; p++) {
    const char *pol = rx_rt_batch_policy_name(policies[p]);
    printf("%s, %s: launches %zu (units) vs %zu (one cell), copy bytes %zu vs %zu\n", model, pol,
           unit->launches[p], cells->launches[p], unit->copy_bytes[p], cells->copy_bytes[p]);
    CHECK_MSG((double)unit->launches[p] * gain <= (double)cells->launches[p] + 2,
              "%s, %s: %zu launches in units, %zu one cell at a time (expected about 1/%g)", model,
              pol, unit->launches[p], cells->launches[p], gain);
  }
}

static void models(rx_rt_device *d, rx_rt_artifact *a) {
  static struct {
    const char *label;
    int lens[8], n;
  } sets[] = {{"1, 7, 16, 17, 100", {1, 7, 16, 17, 100}, 5}, {"2, 1, 3", {2, 1, 3}, 3}};
  if (getenv("RX_KERNEL_SIZES") && *getenv("RX_KERNEL_SIZES")) {
    /* the sanitizer pass of CI: the long sequence capped at 33 steps (the test stays short) */
    sets[0].label = "1, 7, 16, 17, 33";
    sets[0].lens[4] = 33;
    printf("RX_KERNEL_SIZES set: lengths 1, 7, 16, 17, 33\n");
  }
  for (size_t i = 0; i < RX_ARRAY_LEN(sets) && !check_failed; i++) {
    char name[256], model[96];
    form_stats fu, fc;
    bm_graph g;
    snprintf(model, sizeof model, "stacked LSTM, lengths %s", sets[i].label);
    bm_init(&g, d);
    stacked_setup(&g, sets[i].lens, sets[i].n, 3610 + i, true);
    snprintf(name, sizeof name, "%s, stack_step", model);
    run_form(name, &g, a, true, &fu);
    int maxlen = 0;
    for (int k = 0; k < sets[i].n; k++)
      maxlen = sets[i].lens[k] > maxlen ? sets[i].lens[k] : maxlen;
    CHECK_MSG(fu.depths == (size_t)maxlen, "%s: %zu depths, expected %d", name, fu.depths, maxlen);
    bm_free(&g);
    bm_init(&g, d);
    stacked_setup(&g, sets[i].lens, sets[i].n, 3610 + i, false);
    snprintf(name, sizeof name, "%s, two lstm_cell calls a step", model);
    run_form(name, &g, a, false, &fc);
    bm_free(&g);
    compare_forms(model, &fu, &fc, 2);

    snprintf(model, sizeof model, "LSTM chain, lengths %s", sets[i].label);
    bm_init(&g, d);
    chain_setup(&g, sets[i].lens, sets[i].n, 3620 + i, 2);
    snprintf(name, sizeof name, "%s, lstm_cell2 units", model);
    run_form(name, &g, a, false, &fu); /* two functions: a depth may hold a round of each */
    CHECK_MSG(fu.depths == (size_t)(maxlen + 1) / 2, "%s: %zu depths, expected %d", name, fu.depths,
              (maxlen + 1) / 2);
    bm_free(&g);
    bm_init(&g, d);
    chain_setup(&g, sets[i].lens, sets[i].n, 3620 + i, 1);
    snprintf(name, sizeof name, "%s, lstm_cell", model);
    run_form(name, &g, a, true, &fc);
    bm_free(&g);
    /* a unit of two steps: about half the launches (the odd steps' rounds of lstm_cell add a
     * few) */
    compare_forms(model, &fu, &fc, 1.5);
  }
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  const char *tests = argc > 1 ? argv[1] : "tests";
  rx_module *m = make_module(tests);
  bm_min_batch = 2; /* the launches are counted: every round of two calls or more batched */
  rxk_backend vk = {.kind = RX_RT_BACKEND_VULKAN};
  rxk_rt_open(&vk, "vulkan:0");
  if (!vk.dev) {
    printf("Vulkan unavailable (%s): the units' batched forms only\n", vk.why);
  } else if (m) {
    size_t len = 0;
    char why[1024];
    unsigned char *bytes = rxk_compile_artifact(m, &vk.target, &len, why, sizeof why);
    CHECK_MSG(bytes != NULL, "compile: %s", why);
    rx_rt_artifact *a = NULL;
    if (bytes && ok_status(rx_rt_artifact_load_memory(vk.dev, bytes, len, "grain.rxm", &a), "load"))
      models(vk.dev, a);
    rx_rt_artifact_release(a);
    free(bytes);
  }
  bool ran = vk.dev != NULL;
  char msg[1024];
  CHECK_MSG(rxk_rt_close(&vk, msg, sizeof msg), "%s", msg);
  rx_module_free(m);
  if (!check_failed && !ran) {
    printf("SKIP: the batched runs need a Vulkan device (the units' batched forms passed)\n");
    return 77;
  }
  return check_finish("test_autobatch_grain");
}
