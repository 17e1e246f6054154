/* bench/autobatch_bench.c: the ACRoBat workloads of issue 18 (tests/autobatch/acrobat_models.h)
 * batched by the runtime batcher (relaxc/autobatch.h) against one cell call at a time, on one
 * device: a TreeLSTM over --trees random parse trees of 1..--leaves leaves and an LSTM over
 * sequences of lengths --lengths (hidden 64 both). Each run starts from inputs already on the
 * device and ends synchronized with every output on the device; the time is the best of --reps
 * runs after one warm-up run, in wall-clock time and in the process's CPU time (all threads: on
 * lavapipe the device is the process's own worker threads, so CPU time is the work done, less
 * disturbed than wall time by other load on a shared machine). The batched run includes the
 * batcher's stacking and splitting copies and its bookkeeping; the one-at-a-time run copies each
 * output out of planned storage. --no-gather runs the batcher with its gather path off (operands
 * stacked by copies even where the artifact has the index-array form, relaxc compile --batch
 * FN:SHARED,gather), --no-plan with its memory planning off (rx_rt_batcher_set_planning); each
 * row's copies, copy bytes, views and gathers go to stderr.
 *
 * usage: autobatch_bench TREE.rxm LSTM.rxm [--device D] [--trees N] [--leaves L]
 *                        [--lengths 1,7,16,17,100] [--reps R] [--no-gather] [--no-plan]
 *   TREE.rxm: relaxc compile tests/autobatch/tree_cell.rx --target vulkan-lavapipe
 *             --batch tree_cell:w,ul,ur,b -o TREE.rxm (LSTM.rxm likewise with lstm_cell:wx,wh,b)
 * Built against the build's runtime library:
 *   cc -O2 -std=c11 -Iinclude -Itests/autobatch bench/autobatch_bench.c BUILD/librelaxc_runtime.a
 *      -lcjson -ldl -lpthread -lm
 * Prints a Markdown table row per workload on stdout. */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 199309L /* clock_gettime */
#endif
#include "acrobat_models.h"

#include <stdio.h>
#include <time.h>

static int usage(const char *why) {
  fprintf(stderr,
          "autobatch_bench: %s\nusage: autobatch_bench TREE.rxm LSTM.rxm [--device D] [--trees N] "
          "[--leaves L] [--lengths 1,7,16,17,100] [--reps R] [--no-gather] [--no-plan]\n",
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

static void release_all(rx_rt_tensor **t, int n) {
  for (int i = 0; i < n; i++) {
    rx_rt_tensor_release(t[i]);
    t[i] = NULL;
  }
}

typedef struct workload {
  rx_rt_artifact *a;
  const ab_weights *w;
  const ab_inputs *in;
  const ab_forest *f; /* the tree workload, else q */
  const ab_seqs *q;
  rx_rt_tensor **out;
  int nout;
} workload;

/* One run, batched or not, synchronized: its wall time and the process's CPU time (all threads,
 * lavapipe's workers too) in out_ms[0] and out_ms[1]. */
static rx_status run_once(const workload *wl, bool batched, rx_rt_batcher_stats *stats,
                          double *out_ms) {
  double t0 = now_ms(CLOCK_MONOTONIC), c0 = now_ms(CLOCK_PROCESS_CPUTIME_ID);
  rx_status st;
  if (wl->f)
    st = batched ? ab_forest_batched(wl->a, wl->f, wl->w, wl->in, wl->out, stats)
                 : ab_forest_single(wl->a, wl->f, wl->w, wl->in, wl->out);
  else
    st = batched ? ab_seqs_batched(wl->a, wl->q, wl->w, wl->in, wl->out, stats)
                 : ab_seqs_single(wl->a, wl->q, wl->w, wl->in, wl->out);
  if (!st) st = rx_rt_device_synchronize(rx_rt_artifact_device(wl->a));
  out_ms[0] = now_ms(CLOCK_MONOTONIC) - t0;
  out_ms[1] = now_ms(CLOCK_PROCESS_CPUTIME_ID) - c0;
  release_all(wl->out, wl->nout);
  return st;
}

/* Best of reps runs after one warm-up, for both ways; prints the row. */
static int bench(const char *name, const workload *wl, int cells, int reps) {
  double best[2][2] = {{1e300, 1e300}, {1e300, 1e300}}; /* [way][wall, cpu] */
  rx_rt_batcher_stats stats = {0};
  for (int way = 0; way < 2; way++)
    for (int r = 0; r <= reps; r++) {
      double ms[2] = {0, 0};
      rx_status st = run_once(wl, way == 1, &stats, ms);
      if (st) return fail(name, st);
      for (int k = 0; k < 2 && r > 0; k++)
        if (ms[k] < best[way][k]) best[way][k] = ms[k];
    }
  printf("| %s | %d | %zu (largest %zu) | %.1f ms (%.0f cells/s), CPU %.1f ms | %.1f ms (%.0f "
         "cells/s), CPU %.1f ms | %.2fx (CPU %.2fx) |\n",
         name, cells, stats.batched_calls, stats.max_batch, best[0][0], cells / best[0][0] * 1e3,
         best[0][1], best[1][0], cells / best[1][0] * 1e3, best[1][1], best[0][0] / best[1][0],
         best[0][1] / best[1][1]);
  fprintf(stderr, "%s: batched%s%s: %zu copies, %zu copy bytes, %zu views, %zu gathers\n", name,
          ab_no_gather ? " --no-gather" : "", ab_no_plan ? " --no-plan" : "", stats.copies,
          stats.copy_bytes, stats.views, stats.gathers);
  return 0;
}

static int parse_lengths(const char *v, int *lens, int *n) {
  *n = 0;
  for (const char *p = v; *p && *n < AB_MAX_SEQS;) {
    char *end = NULL;
    long x = strtol(p, &end, 10);
    if (end == p || x < 0 || x > 100000) return -1;
    lens[(*n)++] = (int)x;
    p = *end == ',' ? end + 1 : end;
    if (*end && *end != ',') return -1;
  }
  return *n ? 0 : -1;
}

int main(int argc, char **argv) {
  const char *paths[2] = {NULL, NULL}, *device = "vulkan";
  int trees = 16, leaves = 30, reps = 3, lens[AB_MAX_SEQS] = {1, 7, 16, 17, 100}, nlens = 5;
  int npaths = 0;
  for (int i = 1; i < argc; i++) {
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(argv[i], "--device") && v)
      device = argv[++i];
    else if (!strcmp(argv[i], "--trees") && v)
      trees = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--leaves") && v)
      leaves = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--no-gather"))
      ab_no_gather = true;
    else if (!strcmp(argv[i], "--no-plan"))
      ab_no_plan = true;
    else if (!strcmp(argv[i], "--reps") && v)
      reps = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--lengths") && v) {
      if (parse_lengths(argv[++i], lens, &nlens)) return usage("--lengths: expected N,N,...");
    } else if (argv[i][0] != '-' && npaths < 2)
      paths[npaths++] = argv[i];
    else
      return usage(argv[i]);
  }
  if (npaths != 2) return usage("expected TREE.rxm and LSTM.rxm");
  if (trees < 1 || trees > AB_MAX_SEQS || leaves < 1 || reps < 1)
    return usage("--trees 1..64, --leaves >= 1, --reps >= 1");
  rx_rt_device *d = NULL;
  rx_rt_artifact *a[2] = {NULL, NULL};
  rx_status st = rx_rt_device_open(device, NULL, &d);
  if (st) return fail(device, st);
  for (int i = 0; i < 2 && !st; i++) st = rx_rt_artifact_load(d, paths[i], &a[i]);
  if (st) return fail("load", st);
  printf("device: %s\n\n", rx_rt_device_get_info(d)->name);
  printf("| workload | cells | batched calls | one at a time | batched | speedup |\n");
  printf("| --- | --- | --- | --- | --- | --- |\n");
  int rc = 0;
  ab_forest *f = malloc(sizeof *f);
  ab_weights w;
  ab_inputs in;
  if (!ab_forest_make(f, 18, trees, leaves)) {
    rc = usage("too many nodes: fewer --trees or --leaves");
  } else if ((st = ab_weights_make(d, 1801, 3, AB_TREE_GATES, &w)) ||
             (st = ab_inputs_forest(d, f, &in))) {
    rc = fail("tree inputs", st);
  } else {
    rx_rt_tensor **out = calloc((size_t)f->n, sizeof *out);
    workload wl = {a[0], &w, &in, f, NULL, out, f->n};
    char name[128];
    snprintf(name, sizeof name, "TreeLSTM, %d trees of 1..%d leaves (height %d)", trees, leaves,
             f->max_height);
    rc = bench(name, &wl, f->n, reps);
    free(out);
    ab_inputs_free(&in);
    ab_weights_free(&w);
  }
  free(f->x);
  free(f);
  ab_seqs q;
  ab_seqs_make(&q, 1802, lens, nlens);
  if (rc) {
  } else if ((st = ab_weights_make(d, 1803, 2, AB_LSTM_GATES, &w)) ||
             (st = ab_inputs_seqs(d, &q, &in))) {
    rc = fail("LSTM inputs", st);
  } else {
    rx_rt_tensor **out = calloc((size_t)q.n, sizeof *out);
    workload wl = {a[1], &w, &in, NULL, &q, out, q.n};
    char name[128];
    snprintf(name, sizeof name, "LSTM, %d sequences (max length %d)", q.n, q.max_len);
    rc = bench(name, &wl, q.total, reps);
    free(out);
    ab_inputs_free(&in);
    ab_weights_free(&w);
  }
  ab_seqs_free(&q);
  rx_rt_artifact_release(a[0]);
  rx_rt_artifact_release(a[1]);
  rx_rt_device_release(d);
  return rc;
}
