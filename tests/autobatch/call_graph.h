/* tests/autobatch/call_graph.h: a model as a graph of cell calls, run through the runtime batcher
 * (relaxc/autobatch.h) and one call at a time, and checked against its double reference; shared
 * by tests/unit/test_autobatch_models.c and bench/autobatch_bench.c (static functions: each
 * includes it once).
 *
 * A model's setup (tests/autobatch/MODEL_ref.h) puts its inputs on the device (bm_input: weights,
 * embeddings, zero states), lists its calls in an order where every call comes after the calls it
 * reads (bm_call: arguments are inputs or outputs of earlier calls), and gives the value each
 * call's outputs must have, computed in double from the model's definition (bm_expect). Then:
 *   - bm_submit submits every call to a batcher (ids 0, 1, ... in order), for bm_run_batched or a
 *     caller that picks the batcher's policy first;
 *   - bm_run_single calls the unbatched cell of each call in order (rx_rt_vm_call), each output
 *     copied out of planned storage on the device, as a program without a batcher would;
 *   - bm_compare reads both runs' outputs and measures them against each other and the reference.
 * Errors stick: the first failed step's status is kept in g->st and later steps do nothing. */
#ifndef RX_CALL_GRAPH_H
#define RX_CALL_GRAPH_H

#include "relaxc/autobatch.h"
#include "relaxc/runtime.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* In the runtime library (base/base.h), not in its public headers. */
rx_status base_status_make(rx_status_code code, const char *fmt, ...);

enum { BM_MAX_FNS = 4, BM_MAX_PARAMS = 24, BM_MAX_OUTS = 4 }; /* 4 outputs: stack_step */

/* An argument: input `idx` (call < 0) or output `idx` of call `call`. */
typedef struct bm_arg {
  int call;
  int idx;
} bm_arg;
static inline bm_arg bm_in(int idx) { return (bm_arg){-1, idx}; }
static inline bm_arg bm_out(int call, int out) { return (bm_arg){call, out}; }

typedef struct bm_fn {
  const char *name, *batched;
  bool shared[BM_MAX_PARAMS];
  int nparams, nouts;
} bm_fn;

typedef struct bm_call {
  int fn;
  int args;             /* its first argument in g->args */
  int ref[BM_MAX_OUTS]; /* offset of each output's reference in g->ref, -1 if none */
  int nref[BM_MAX_OUTS];
} bm_call;

typedef struct bm_graph {
  rx_rt_device *d;
  rx_status st; /* the first error */
  int nfns;
  bm_fn fns[BM_MAX_FNS];
  int ninputs, cap_inputs;
  rx_rt_tensor **inputs;
  int ncalls, cap_calls;
  bm_call *calls;
  int nargs, cap_args;
  bm_arg *args;
  size_t nref, cap_ref;
  double *ref;
} bm_graph;

static inline void *bm_grow(void *p, int *cap, int need, size_t elem) {
  if (need <= *cap) return p;
  int n = *cap ? *cap * 2 : 64;
  while (n < need) n *= 2;
  void *q = realloc(p, (size_t)n * elem);
  if (q) *cap = n;
  return q;
}

static inline void bm_init(bm_graph *g, rx_rt_device *d) {
  memset(g, 0, sizeof *g);
  g->d = d;
}

static inline void bm_free(bm_graph *g) {
  for (int i = 0; i < g->ninputs; i++) rx_rt_tensor_release(g->inputs[i]);
  free(g->inputs);
  free(g->calls);
  free(g->args);
  free(g->ref);
  rx_status_free(g->st);
  memset(g, 0, sizeof *g);
}

/* Registers a cell function: its name, batched form, parameter count, which parameters are shared
 * (a string of 'b' batched and 's' shared per parameter) and its number of outputs. */
static inline int bm_fn_add(bm_graph *g, const char *name, const char *batched, const char *kinds,
                            int nouts) {
  if (g->st) return 0;
  int n = (int)strlen(kinds);
  if (g->nfns == BM_MAX_FNS || n > BM_MAX_PARAMS || nouts > BM_MAX_OUTS) {
    g->st = base_status_make(RX_ERR_INTERNAL, "call graph: too many functions or parameters");
    return 0;
  }
  bm_fn *f = &g->fns[g->nfns];
  f->name = name;
  f->batched = batched;
  f->nparams = n;
  f->nouts = nouts;
  for (int i = 0; i < n; i++) f->shared[i] = kinds[i] == 's';
  return g->nfns++;
}

/* A device tensor of f32 from host data; its input index. */
static inline int bm_input(bm_graph *g, const float *host, int ndim, const int64_t *shape) {
  if (g->st) return 0;
  g->inputs = bm_grow(g->inputs, &g->cap_inputs, g->ninputs + 1, sizeof *g->inputs);
  g->inputs[g->ninputs] = NULL;
  g->st = rx_rt_tensor_from_host(g->d, RX_DTYPE_F32, ndim, shape, host, &g->inputs[g->ninputs]);
  return g->st ? 0 : g->ninputs++;
}
static inline int bm_input1(bm_graph *g, const float *host, int64_t n) {
  return bm_input(g, host, 1, &n);
}
static inline int bm_input2(bm_graph *g, const float *host, int64_t r, int64_t c) {
  int64_t s[2] = {r, c};
  return bm_input(g, host, 2, s);
}

/* A call of function fn with its nparams arguments; its id. */
static inline int bm_call_add(bm_graph *g, int fn, const bm_arg *args) {
  if (g->st) return 0;
  int n = g->fns[fn].nparams;
  for (int i = 0; i < n; i++)
    if (args[i].call >= g->ncalls || (args[i].call < 0 && args[i].idx >= g->ninputs)) {
      g->st =
          base_status_make(RX_ERR_INTERNAL, "call graph: call %d reads a later value", g->ncalls);
      return 0;
    }
  g->calls = bm_grow(g->calls, &g->cap_calls, g->ncalls + 1, sizeof *g->calls);
  g->args = bm_grow(g->args, &g->cap_args, g->nargs + n, sizeof *g->args);
  bm_call *c = &g->calls[g->ncalls];
  c->fn = fn;
  c->args = g->nargs;
  for (int o = 0; o < BM_MAX_OUTS; o++) c->ref[o] = -1, c->nref[o] = 0;
  memcpy(g->args + g->nargs, args, sizeof *args * (size_t)n);
  g->nargs += n;
  return g->ncalls++;
}

/* The reference of output `out` of call `call`: n doubles (copied). */
static inline void bm_expect(bm_graph *g, int call, int out, const double *ref, int n) {
  if (g->st) return;
  if (g->nref + (size_t)n > g->cap_ref) {
    size_t cap = g->cap_ref ? g->cap_ref * 2 : 4096;
    while (cap < g->nref + (size_t)n) cap *= 2;
    g->ref = realloc(g->ref, cap * sizeof *g->ref);
    g->cap_ref = cap;
  }
  memcpy(g->ref + g->nref, ref, sizeof *ref * (size_t)n);
  g->calls[call].ref[out] = (int)g->nref;
  g->calls[call].nref[out] = n;
  g->nref += (size_t)n;
}

/* The reference of an output given by bm_expect (the model's builder reads its dependencies'). */
static inline const double *bm_ref(const bm_graph *g, int call, int out) {
  return g->calls[call].ref[out] < 0 ? NULL : g->ref + g->calls[call].ref[out];
}

/* The calls' depths (1 + the deepest call read; 1 for a call of inputs alone): *out_levels the
 * deepest, *out_wide the depths that hold at least two calls. A batcher that runs every ready
 * call of a single-function model per round runs depth k at round k: *out_levels rounds, of which
 * *out_wide batch two calls or more. */
static inline void bm_levels(const bm_graph *g, int *out_levels, int *out_wide) {
  int *depth = calloc((size_t)(g->ncalls ? g->ncalls : 1), sizeof *depth), levels = 0;
  for (int i = 0; depth && i < g->ncalls; i++) {
    const bm_call *c = &g->calls[i];
    for (int k = 0; k < g->fns[c->fn].nparams; k++) {
      bm_arg v = g->args[c->args + k];
      if (v.call >= 0 && depth[v.call] > depth[i]) depth[i] = depth[v.call];
    }
    depth[i]++;
    levels = depth[i] > levels ? depth[i] : levels;
  }
  int *count = calloc((size_t)levels + 1, sizeof *count), wide = 0;
  for (int i = 0; depth && count && i < g->ncalls; i++) count[depth[i]]++;
  for (int l = 1; count && l <= levels; l++) wide += count[l] >= 2;
  free(count);
  free(depth);
  *out_levels = levels;
  *out_wide = wide;
}

/* A new batcher over artifact a with g's functions registered. */
/* The batcher's settings for bm_batcher (the test's and the bench's loops set them): its policy
 * (rx_rt_batcher_set_policy), its min batch when not 0, the gather path and the memory planning
 * off when set (rx_rt_batcher_set_gather, rx_rt_batcher_set_planning). */
static rx_rt_batch_policy bm_policy = RX_RT_BATCH_ROUNDS;
static size_t bm_min_batch;
static bool bm_no_gather, bm_no_plan;

static inline rx_status bm_batcher(const bm_graph *g, rx_rt_artifact *a, rx_rt_batcher **out) {
  rx_status st = rx_rt_batcher_create(a, out);
  if (!st) st = rx_rt_batcher_set_policy(*out, bm_policy);
  if (!st && bm_min_batch) st = rx_rt_batcher_set_min_batch(*out, bm_min_batch);
  for (int f = 0; f < g->nfns && !st; f++)
    st = rx_rt_batcher_add_function(*out, g->fns[f].name, g->fns[f].batched, g->fns[f].shared,
                                    (size_t)g->fns[f].nparams);
  if (!st) st = rx_rt_batcher_set_gather(*out, !bm_no_gather);
  if (!st) st = rx_rt_batcher_set_planning(*out, !bm_no_plan);
  return st;
}

/* Submits every call of g to b (ids 0, 1, ... in g's order). */
static inline rx_status bm_submit(const bm_graph *g, rx_rt_batcher *b) {
  for (int i = 0; i < g->ncalls; i++) {
    const bm_call *c = &g->calls[i];
    const bm_fn *f = &g->fns[c->fn];
    rx_rt_batch_arg args[BM_MAX_PARAMS];
    for (int k = 0; k < f->nparams; k++) {
      bm_arg v = g->args[c->args + k];
      args[k] = v.call < 0 ? (rx_rt_batch_arg){g->inputs[v.idx], 0, 0}
                           : (rx_rt_batch_arg){NULL, (size_t)v.call, (size_t)v.idx};
    }
    size_t id = 0;
    rx_status st = rx_rt_batcher_submit(b, f->name, args, (size_t)f->nparams, &id);
    if (!st && id != (size_t)i) st = base_status_make(RX_ERR_INTERNAL, "call ids out of order");
    if (st) return st;
  }
  return NULL;
}

/* The outputs of a run: out[call * BM_MAX_OUTS + o], retained (NULL where not kept). */
static inline rx_rt_tensor **bm_outputs_new(const bm_graph *g) {
  return calloc((size_t)(g->ncalls ? g->ncalls : 1) * BM_MAX_OUTS, sizeof(rx_rt_tensor *));
}
static inline void bm_outputs_free(const bm_graph *g, rx_rt_tensor **out) {
  for (int i = 0; out && i < g->ncalls * BM_MAX_OUTS; i++) rx_rt_tensor_release(out[i]);
  free(out);
}

/* After b ran: the outputs that have a reference into out (retained). */
static inline rx_status bm_collect(const bm_graph *g, rx_rt_batcher *b, rx_rt_tensor **out) {
  rx_status st = NULL;
  for (int i = 0; i < g->ncalls && !st; i++)
    for (int o = 0; o < g->fns[g->calls[i].fn].nouts && !st; o++) {
      if (g->calls[i].ref[o] < 0) continue;
      st = rx_rt_batcher_output(b, (size_t)i, (size_t)o, &out[i * BM_MAX_OUTS + o]);
      if (!st) rx_rt_tensor_retain(out[i * BM_MAX_OUTS + o]);
    }
  return st;
}

/* Every call through a batcher of bm_policy (bm_batcher); out as bm_outputs_new (may be NULL). */
static inline rx_status bm_run_batched(const bm_graph *g, rx_rt_artifact *a, rx_rt_tensor **out,
                                       rx_rt_batcher_stats *stats) {
  rx_rt_batcher *b = NULL;
  rx_status st = bm_batcher(g, a, &b);
  if (!st) st = bm_submit(g, b);
  if (!st) st = rx_rt_batcher_run(b);
  if (!st && out) st = bm_collect(g, b, out);
  if (stats) rx_rt_batcher_get_stats(b, stats);
  rx_rt_batcher_release(b);
  return st;
}

/* A tensor of its own holding t's contents (queued device copy). */
static inline rx_status bm_copy(rx_rt_device *d, rx_rt_tensor *t, rx_rt_tensor **out) {
  rx_status st = rx_rt_tensor_create(d, rx_rt_tensor_dtype(t), rx_rt_tensor_ndim(t),
                                     rx_rt_tensor_shape(t), out);
  return st ? st
            : rx_rt_buffer_copy(rx_rt_tensor_buffer(t), 0, rx_rt_tensor_buffer(*out), 0,
                                rx_rt_tensor_bytes(t));
}

/* Every call one at a time in g's order (rx_rt_vm_call of the unbatched cell), each output
 * copied to a tensor of its own (kept to the end of the run); out as bm_outputs_new (may be
 * NULL) receives the outputs that have a reference; *out_copies and *out_bytes (where not NULL)
 * the device copies it made and their bytes. */
static inline rx_status bm_run_single_counted(const bm_graph *g, rx_rt_artifact *a,
                                              rx_rt_tensor **out, size_t *out_copies,
                                              size_t *out_bytes) {
  size_t copies = 0, bytes = 0;
  rx_rt_tensor **all = bm_outputs_new(g);
  rx_status st = all ? NULL : base_status_make(RX_ERR_INTERNAL, "out of memory");
  for (int i = 0; i < g->ncalls && !st; i++) {
    const bm_call *c = &g->calls[i];
    const bm_fn *f = &g->fns[c->fn];
    rx_rt_tensor *args[BM_MAX_PARAMS];
    for (int k = 0; k < f->nparams; k++) {
      bm_arg v = g->args[c->args + k];
      args[k] = v.call < 0 ? g->inputs[v.idx] : all[v.call * BM_MAX_OUTS + v.idx];
    }
    rx_rt_value *res = NULL;
    st = rx_rt_vm_call(a, f->name, args, (size_t)f->nparams, &res);
    bool tuple = !st && rx_rt_value_kind_of(res) == RX_RT_VALUE_TUPLE;
    if (!st && (tuple ? (int)rx_rt_value_tuple_size(res) : 1) != f->nouts)
      st = base_status_make(RX_ERR_INTERNAL, "%s: expected %d outputs", f->name, f->nouts);
    for (int o = 0; o < f->nouts && !st; o++) {
      const rx_rt_value *v = tuple ? rx_rt_value_tuple_item(res, (size_t)o) : res;
      st = bm_copy(g->d, rx_rt_value_tensor(v), &all[i * BM_MAX_OUTS + o]);
      copies++;
      bytes += st ? 0 : rx_rt_tensor_bytes(all[i * BM_MAX_OUTS + o]);
    }
    rx_rt_value_release(res);
  }
  for (int i = 0; all && out && i < g->ncalls; i++)
    for (int o = 0; o < BM_MAX_OUTS; o++)
      if (g->calls[i].ref[o] >= 0 && all[i * BM_MAX_OUTS + o]) {
        out[i * BM_MAX_OUTS + o] = all[i * BM_MAX_OUTS + o];
        all[i * BM_MAX_OUTS + o] = NULL;
      }
  bm_outputs_free(g, all);
  if (out_copies) *out_copies = copies;
  if (out_bytes) *out_bytes = bytes;
  return st;
}

/* bm_run_single_counted without the counts. */
static inline rx_status bm_run_single(const bm_graph *g, rx_rt_artifact *a, rx_rt_tensor **out) {
  return bm_run_single_counted(g, a, out, NULL, NULL);
}

/* The differences of two runs' outputs (x, y as bm_outputs_new) over every output with a
 * reference: the largest |x - y| / max(1, |ref|) in *out_xy and |x - ref| / max(1, |ref|) in
 * *out_xref (NaN counts as infinite); *out_n: the values compared. */
static inline rx_status bm_compare(const bm_graph *g, rx_rt_tensor **x, rx_rt_tensor **y,
                                   double *out_xy, double *out_xref, size_t *out_n) {
  *out_xy = *out_xref = 0;
  *out_n = 0;
  float *fx = NULL, *fy = NULL;
  int cap = 0;
  rx_status st = NULL;
  for (int i = 0; i < g->ncalls && !st; i++)
    for (int o = 0; o < BM_MAX_OUTS && !st; o++) {
      int n = g->calls[i].nref[o];
      if (g->calls[i].ref[o] < 0) continue;
      rx_rt_tensor *tx = x[i * BM_MAX_OUTS + o], *ty = y[i * BM_MAX_OUTS + o];
      if (!tx || !ty || rx_rt_tensor_bytes(tx) != sizeof(float) * (size_t)n ||
          rx_rt_tensor_bytes(ty) != sizeof(float) * (size_t)n) {
        st = base_status_make(RX_ERR_INTERNAL, "call %d output %d: missing or of the wrong size", i,
                              o);
        break;
      }
      if (n > cap) {
        cap = n;
        fx = realloc(fx, sizeof *fx * (size_t)n);
        fy = realloc(fy, sizeof *fy * (size_t)n);
      }
      st = rx_rt_tensor_read(tx, fx, sizeof *fx * (size_t)n);
      if (!st) st = rx_rt_tensor_read(ty, fy, sizeof *fy * (size_t)n);
      const double *ref = g->ref + g->calls[i].ref[o];
      for (int k = 0; k < n && !st; k++) {
        double s = fmax(1, fabs(ref[k]));
        double e1 = fabs((double)fx[k] - fy[k]) / s, e2 = fabs((double)fx[k] - ref[k]) / s;
        *out_xy = isnan(e1) ? INFINITY : fmax(*out_xy, e1);
        *out_xref = isnan(e2) ? INFINITY : fmax(*out_xref, e2);
      }
      *out_n += (size_t)n;
    }
  free(fx);
  free(fy);
  return st;
}

/* ---- the reference's pieces, in double ---- */
static inline double bm_sigmoid(double v) { return 1 / (1 + exp(-v)); }

/* y[j] (+)= sum_k x[k] w[k * n + j] for j < n, k < m: x [m] times w [m, n] (floats). */
static inline void bm_vecmat(const double *x, const float *w, int m, int n, double *y, bool acc) {
  for (int j = 0; j < n; j++) {
    double s = acc ? y[j] : 0;
    for (int k = 0; k < m; k++) s += x[k] * (double)w[(size_t)k * n + j];
    y[j] = s;
  }
}

static inline void bm_to_double(const float *x, int n, double *y) {
  for (int i = 0; i < n; i++) y[i] = x[i];
}

#endif
