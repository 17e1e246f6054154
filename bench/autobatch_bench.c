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
 * FN:SHARED,gather), --no-plan with its memory planning off (rx_rt_batcher_set_planning); the
 * "memory" column names the two switches and the copies column adds the views and gathers.
 *
 * Every workload runs one call at a time without the batcher and through the batcher under
 * each policy (relaxc/autobatch.h: rounds, depth, agenda, fsm, one); a row per way gives the
 * launches, the batcher's device copies, the time, and the ratios against one call at a time and
 * against rounds. The workloads are a table (models[]): the TreeLSTM, the LSTM straggler
 * (--lengths) and the LSTM over mixed lengths (--mixed, default 16 sequences of 6, 12, ..., 100).
 * --min-batch N: rx_rt_batcher_set_min_batch(N) for every policy.
 *
 * usage: autobatch_bench TREE.rxm LSTM.rxm [--device D] [--trees N] [--leaves L]
 *                        [--lengths 1,7,16,17,100] [--mixed N,N,...] [--min-batch N] [--reps R]
 *                        [--no-gather] [--no-plan]
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
          "[--leaves L] [--lengths 1,7,16,17,100] [--mixed N,N,...] [--min-batch N] [--reps R] "
          "[--no-gather] [--no-plan]\n",
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

/* A workload of the models table: its cells' artifact, its inputs, and how it runs. */
typedef struct workload {
  rx_rt_artifact *a;
  const ab_weights *w;
  const ab_inputs *in;
  const ab_forest *f; /* the tree workloads, else q */
  const ab_seqs *q;
  rx_rt_tensor **out;
  int nout;
} workload;

/* One run, through the batcher under policy p or (p < 0) one call at a time without it,
 * synchronized: its wall time and the process's CPU time (all threads, lavapipe's workers too)
 * in out_ms[0] and out_ms[1]. */
static rx_status run_once(const workload *wl, int p, rx_rt_batcher_stats *stats, double *out_ms) {
  double t0 = now_ms(CLOCK_MONOTONIC), c0 = now_ms(CLOCK_PROCESS_CPUTIME_ID);
  rx_status st;
  rx_rt_batch_policy pol = (rx_rt_batch_policy)(p < 0 ? 0 : p);
  if (wl->f)
    st = p >= 0 ? ab_forest_batched_p(wl->a, wl->f, wl->w, wl->in, wl->out, stats, pol)
                : ab_forest_single(wl->a, wl->f, wl->w, wl->in, wl->out);
  else
    st = p >= 0 ? ab_seqs_batched_p(wl->a, wl->q, wl->w, wl->in, wl->out, stats, pol)
                : ab_seqs_single(wl->a, wl->q, wl->w, wl->in, wl->out);
  if (!st) st = rx_rt_device_synchronize(rx_rt_artifact_device(wl->a));
  out_ms[0] = now_ms(CLOCK_MONOTONIC) - t0;
  out_ms[1] = now_ms(CLOCK_PROCESS_CPUTIME_ID) - c0;
  release_all(wl->out, wl->nout);
  return st;
}

enum { NWAYS = 1 + 5 }; /* one call at a time without the batcher, then the five policies */

/* Best of reps runs after one warm-up, for every way; prints a row per way. The FSM trains at
 * its first run (the warm-up) on that run's calls; the timed runs load its table (ab_run). */
static int bench(const char *name, const workload *wl, int cells, int reps) {
  double best[NWAYS][2];
  rx_rt_batcher_stats stats[NWAYS];
  memset(stats, 0, sizeof stats);
  for (int way = 0; way < NWAYS; way++) {
    best[way][0] = best[way][1] = 1e300;
    for (int r = 0; r <= reps; r++) {
      double ms[2] = {0, 0};
      rx_status st = run_once(wl, way - 1, &stats[way], ms);
      if (st) return fail(name, st);
      for (int k = 0; k < 2 && r > 0; k++)
        if (ms[k] < best[way][k]) best[way][k] = ms[k];
    }
  }
  const char *memory = ab_no_gather ? (ab_no_plan ? "copies" : "copies, plan")
                                    : (ab_no_plan ? "gather" : "gather, plan");
  for (int way = 0; way < NWAYS; way++) {
    const char *pol = way ? rx_rt_batch_policy_name((rx_rt_batch_policy)(way - 1)) : "none";
    char launches[64] = "", copies[64] = "";
    if (way) {
      snprintf(launches, sizeof launches, "%zu (%zu batched, largest %zu)", stats[way].launches,
               stats[way].batched_calls, stats[way].max_batch);
      snprintf(copies, sizeof copies, "%zu (%zu KiB), %zu views, %zu gathers", stats[way].copies,
               stats[way].copy_bytes >> 10, stats[way].views, stats[way].gathers);
    } else {
      snprintf(launches, sizeof launches, "%d", cells);
      snprintf(copies, sizeof copies, "%d (%d KiB)", 2 * cells, 2 * cells * AB_H * 4 >> 10);
    }
    printf("| %s | %d | %s | %s | %s | %s | %.1f ms, CPU %.1f ms | %.2fx (CPU %.2fx) | %.2fx (CPU "
           "%.2fx) |\n",
           name, cells, way ? pol : "one at a time, no batcher", way ? memory : "", launches,
           copies, best[way][0], best[way][1], best[0][0] / best[way][0], best[0][1] / best[way][1],
           best[1][0] / best[way][0], best[1][1] / best[way][1]);
  }
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

/* ---- the models table: each a name, its setup (inputs on the device, the workload), its runs
 * (run_once above: the batcher under each policy, and one call at a time) and its teardown ---- */

typedef struct model_ctx {
  int trees, leaves, lens[AB_MAX_SEQS], nlens;
  ab_forest *f;
  ab_seqs q;
  ab_weights w;
  ab_inputs in;
  char name[160];
  int cells;
} model_ctx;

static rx_status tree_setup(rx_rt_device *d, model_ctx *m) {
  m->f = malloc(sizeof *m->f);
  if (!m->f || !ab_forest_make(m->f, 18, m->trees, m->leaves))
    return base_status_make(RX_ERR_INVALID, "too many nodes: fewer --trees or --leaves");
  int leaves = 0;
  for (int i = 0; i < m->f->n; i++) leaves += m->f->left[i] < 0;
  snprintf(m->name, sizeof m->name, "TreeLSTM, %d trees (height %d, %d leaves)", m->trees,
           m->f->max_height, leaves);
  m->cells = m->f->n;
  rx_status st = ab_weights_make(d, 1801, 3, AB_TREE_GATES, &m->w);
  return st ? st : ab_inputs_forest(d, m->f, &m->in);
}

static rx_status lstm_setup(rx_rt_device *d, model_ctx *m) {
  ab_seqs_make(&m->q, 1802, m->lens, m->nlens);
  int n = snprintf(m->name, sizeof m->name, "LSTM, lengths ");
  for (int i = 0; i < m->nlens && n < (int)sizeof m->name - 16; i++)
    n += snprintf(m->name + n, sizeof m->name - (size_t)n, "%s%d", i ? "," : "", m->lens[i]);
  m->cells = m->q.total;
  rx_status st = ab_weights_make(d, 1803, 2, AB_LSTM_GATES, &m->w);
  return st ? st : ab_inputs_seqs(d, &m->q, &m->in);
}

static void model_free(model_ctx *m) {
  ab_inputs_free(&m->in);
  ab_weights_free(&m->w);
  ab_seqs_free(&m->q);
  if (m->f) free(m->f->x);
  free(m->f);
}

typedef struct model {
  const char *what;
  int artifact; /* 0: TREE.rxm, 1: LSTM.rxm */
  rx_status (*setup)(rx_rt_device *d, model_ctx *m);
  int lengths; /* LSTM: 0 the --lengths (the straggler), 1 the --mixed lengths */
} model;

static const model models[] = {
    {"tree", 0, tree_setup, 0},
    {"LSTM straggler", 1, lstm_setup, 0},
    {"LSTM mixed lengths", 1, lstm_setup, 1},
};

int main(int argc, char **argv) {
  const char *paths[2] = {NULL, NULL}, *device = "vulkan";
  int trees = 16, leaves = 30, reps = 3, lens[AB_MAX_SEQS] = {1, 7, 16, 17, 100}, nlens = 5;
  int mixed[AB_MAX_SEQS], nmixed = 16, npaths = 0;
  for (int i = 0; i < nmixed; i++) mixed[i] = 100 * (i + 1) / nmixed; /* 6, 12, ..., 100 */
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
    else if (!strcmp(argv[i], "--min-batch") && v)
      ab_min_batch = (size_t)atoi(argv[++i]);
    else if (!strcmp(argv[i], "--lengths") && v) {
      if (parse_lengths(argv[++i], lens, &nlens)) return usage("--lengths: expected N,N,...");
    } else if (!strcmp(argv[i], "--mixed") && v) {
      if (parse_lengths(argv[++i], mixed, &nmixed)) return usage("--mixed: expected N,N,...");
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
  printf("| workload | cells | policy | memory | launches | copies | time | vs one at a time | vs "
         "rounds |\n");
  printf("| --- | --- | --- | --- | --- | --- | --- | --- | --- |\n");
  int rc = 0;
  for (size_t k = 0; k < sizeof models / sizeof *models && !rc; k++) {
    model_ctx m;
    memset(&m, 0, sizeof m);
    m.trees = trees, m.leaves = leaves;
    m.nlens = models[k].lengths ? nmixed : nlens;
    memcpy(m.lens, models[k].lengths ? mixed : lens, sizeof(int) * (size_t)m.nlens);
    ab_fsm_forget(); /* the FSM learns each model's table at its first run */
    st = models[k].setup(d, &m);
    if (st) {
      rc = fail(models[k].what, st);
    } else {
      int nout = m.f ? m.f->n : m.q.n;
      rx_rt_tensor **out = calloc((size_t)nout, sizeof *out);
      workload wl = {a[models[k].artifact], &m.w, &m.in, m.f, m.f ? NULL : &m.q, out, nout};
      rc = bench(m.name, &wl, m.cells, reps);
      free(out);
    }
    model_free(&m);
  }
  rx_rt_artifact_release(a[0]);
  rx_rt_artifact_release(a[1]);
  rx_rt_device_release(d);
  return rc;
}
