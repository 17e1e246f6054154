/* runtime/autobatch.c: the runtime batcher of independent calls (relaxc/autobatch.h).
 *
 * Calls wait in one array in submission order. A round takes the ready calls (every argument a
 * tensor or an output of a call already run: a set kept up to date as calls run, ab_ready, not a
 * scan of the pending calls), counted per function, and asks the policy
 * (runtime/autobatch_policy.c: rounds, depth, agenda, the learned FSM, one) for the lead call;
 * it gathers every other ready call of the
 * same function whose shared arguments are the same values and whose batched arguments have the
 * same dtypes and shapes, and runs them as one call of the batched form: each batched argument is
 * a tensor [G, ...], an earlier batch's output taken whole when the calls are its rows in order,
 * else filled by one device copy per run of consecutive rows; each output [G, ...] is copied once
 * into a tensor of the batcher's own (the batched call's results may live in planned storage
 * that the next call overwrites), whose rows are the calls' outputs. Rounds repeat until every
 * call ran; no ready call while some wait means a cycle, which the error names. A batch of fewer
 * than min_batch calls runs each call through the unbatched function instead (run_single); by
 * default (min_batch 0) that is a batch below the function's measured crossover (ab_cost), kept
 * in the artifact once measured so that later batchers time nothing. Every device copy is counted
 * in the stats (copies, copy_bytes: one wrapper, ab_buffer_copy), every call of a function once in
 * launches.
 *
 * Depth: at the start of each run, call_depths computes every pending call's depth once (Kahn's
 * algorithm: 0 without pending dependencies, else 1 + the largest of theirs); the DEPTH policy
 * batches the ready calls of the least depth by it, and the memory planning (plan_placement)
 * predicts the batches from it. One computation, so the policy and the plan agree.
 *
 * The gather path (issue 36; docs/autobatch.md, "Memory planning: gathers, views and copies"):
 * when the artifact has the batched form's index-array form "<batched>_gather"
 * (rx_batch_function_gather), each output of a function's batches in one run goes to that
 * function's arena, one tensor [calls, ...] (the same one copy out of the batched call's result,
 * placed at the arena's next rows), so the operands a later batch takes from earlier outputs are
 * rows of ONE tensor whatever batch made them (a tree's children of different heights, an RNN's
 * surviving sequences); such a batch calls the index-array form with the arena and an index array
 * (the take fused into the kernels) instead of copying the rows. An unbatched call (run_single)
 * whose output a later call reads puts it in the arena too, so a straggler does not force its
 * readers' batch back to copies. Operands that are caller tensors are still stacked by copies
 * (with the index array 0..g-1). The stats count copies, their bytes, views (an earlier output
 * passed as is) and gathers. The plan predicts a depth schedule; under any other policy a wrong
 * prediction costs copies, never results (every operand is resolved from where its row is). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "autobatch_policy.h"
#include "device.h"
#include "relaxc/autobatch.h"
#include "vm.h"

#define AB_MAX_PARAMS         64  /* parameters of a batched function */
#define AB_MAX_OUTS           16  /* outputs of a function that get an arena */
#define AB_FIRST_RUN_EPISODES 300 /* the FSM's training at its first run, when not trained */
#define AB_CAL_SINGLE         9   /* timed unbatched calls per function (the first: a warm-up) */
#define AB_CAL_BATCHERS       2   /* batchers of an artifact that calibrate (the first: cold) */
/* timed batched calls per function (the first: a warm-up): fewer, they cost more where batching
 * does not pay. The least of 8 and of 4 samples: with 4 and 2 (before the crossover was kept in
 * the artifact, when every batcher paid for its samples) the LSTM cell's crossover came out
 * anywhere from 4 to 8 on the loaded machine (CPU time), where its batched calls of 4 and 5 rows
 * cost about 6 unbatched ones in the runs themselves. */
#define AB_CAL_BATCHED 5
/* Batch g calls only where the measured line predicts at most this share of g unbatched calls:
 * a round batched by a crossover measured too low costs the whole misprediction, one left
 * unbatched by the margin forgoes at most the margin. */
#define AB_CAL_MARGIN 0.9

/* Cost-aware batching: this batcher's timed calls of one function (seconds, a device
 * synchronization before and after each) and its crossover: once both kinds have their samples
 * (AB_CAL_SINGLE, AB_CAL_BATCHED), that of the artifact's pool of them (keep_cost), or the
 * artifact's from the start when its calibrating batchers are done (cached_crossover); fixed for
 * the batcher's life. */
typedef struct ab_cost {
  double single[AB_CAL_SINGLE];
  double batched[AB_CAL_BATCHED];
  size_t batched_g[AB_CAL_BATCHED];
  size_t nsingle, nbatched;
  size_t crossover; /* 0: calibrating; SIZE_MAX: never batch; else batch rounds of >= it */
} ab_cost;

/* The rows of output o of every call of one function in one rx_rt_batcher_run (gather mode):
 * one tensor [rows, ...] that each batch's output is copied into at `next`, so that the
 * operands later batches take from those outputs are rows of ONE tensor whatever batch made
 * them (a tree's children of different heights, the survivors of an RNN step), passed to the
 * index-array form with an index array instead of being copied. */
typedef struct ab_arena {
  rx_rt_tensor *t; /* retained, or NULL until the function's first batch */
  size_t next;
} ab_arena;

typedef struct ab_fn {
  char *name, *batched;
  char *gather; /* "<batched>_gather" when the artifact has that form, else NULL */
  size_t index; /* of the unbatched function in the artifact */
  size_t nparams;
  bool shared[AB_MAX_PARAMS];
  rx_dtype dtype[AB_MAX_PARAMS]; /* of the parameters: RX_DTYPE_UNKNOWN / -1: unchecked */
  int ndim[AB_MAX_PARAMS];
  size_t max_batch; /* the batched form's fact `batch <= N`, or SIZE_MAX */
  size_t pending;   /* calls not run at the start of this run: the arenas' rows */
  bool use_arena;   /* this run's plan (plan_placement): the outputs go to the arenas */
  bool ordered;     /* this run's plan: each batch's outputs in consumer order (consumer_order) */
  ab_arena arena[AB_MAX_OUTS];
  ab_cost cost;
} ab_fn;

/* An output of a call that ran: row `row` of its batch's output `whole` [G, ...], a tensor of
 * the batcher's own (one copy of the batched call's result, which may live in planned storage).
 * A later batch that takes rows 0..G-1 of one whole in order takes it as is; other rows are
 * copied in runs of consecutive rows. own: the row as a tensor of its own, made when asked for
 * (rx_rt_batcher_output, or a shared argument). */
typedef struct ab_out {
  rx_rt_tensor *whole; /* retained */
  size_t row;
  rx_rt_tensor *own; /* retained, or NULL; whole itself after an unbatched call (run_single) */
} ab_out;

typedef struct ab_call {
  size_t fn;
  rx_rt_batch_arg *args; /* tensors retained */
  size_t nargs;
  ab_out *outs; /* after the run */
  size_t nouts;
  bool done;
} ab_call;

/* Where an argument's value is now: a whole tensor (a caller's) or one row of a batch's. */
typedef struct ab_src {
  rx_rt_tensor *tensor; /* the caller's tensor, or the batch's whole */
  bool is_row;          /* tensor is a batch's whole; the value is its row `row` */
  size_t row;
  rx_dtype dtype;
  int ndim;
  const int64_t *shape;
  size_t offset, bytes; /* in tensor's buffer */
} ab_src;

struct rx_rt_batcher {
  rx_rt_artifact *a;
  rx_rt_device *dev;
  const rx_rt_allocator *alloc;
  ab_fn *fns;
  size_t nfns;
  ab_call *calls;
  size_t ncalls, cap;
  rx_rt_batcher_stats stats;
  rx_rt_batch_policy policy;
  size_t min_batch; /* batches of fewer calls run them unbatched (>= 2), or 0: measured (the
                       default; each function's crossover, ab_cost) */
  rt_abp_fsm fsm;   /* the FSM policy's table (trained, loaded, or trained at the first run) */
  size_t *depth;    /* this run's depth of each call (call_depths; 0: done, SIZE_MAX: on a cycle),
                       for the DEPTH policy and the plan (ncalls entries) */
  bool no_gather;   /* rx_rt_batcher_set_gather(b, false) */
  bool no_plan;     /* rx_rt_batcher_set_planning(b, false) */
  bool cpu_clock;   /* the device runs on the host's CPU: calibrate in process CPU time */
  size_t *consumer; /* this run's plan: the first pending call reading call i's outputs, or
                       SIZE_MAX (ncalls entries) */
};

/* A device copy of n bytes, counted in the stats. */
static rx_status ab_buffer_copy(rx_rt_batcher *b, rx_rt_buffer *src, size_t src_off,
                                rx_rt_buffer *dst, size_t dst_off, size_t n) {
  b->stats.copies++;
  b->stats.copy_bytes += n;
  return rx_rt_buffer_copy(src, src_off, dst, dst_off, n);
}

static void *grow(const rx_rt_allocator *al, void *p, size_t bytes) {
  return al->realloc(al->user, p, bytes);
}

rx_status rx_rt_batcher_create(rx_rt_artifact *a, rx_rt_batcher **out_batcher) {
  if (!out_batcher) return base_status_make(RX_ERR_INVALID, "batcher: out_batcher is NULL");
  *out_batcher = NULL;
  rx_rt_device *d = a ? rx_rt_artifact_device(a) : NULL;
  if (!d)
    return base_status_make(RX_ERR_INVALID, "batcher: the artifact %s",
                            a ? "was loaded without a device" : "is NULL");
  rx_rt_batcher *b = rt_alloc(&d->alloc, sizeof *b);
  if (!b) return rt_oom("a batcher", sizeof *b);
  b->a = a;
  b->dev = d;
  b->alloc = &d->alloc;
  const rx_rt_device_info *info = rx_rt_device_get_info(d);
  b->cpu_clock = info && (strstr(info->name, "llvmpipe") || strstr(info->name, "lavapipe"));
  rx_rt_artifact_retain(a);
  *out_batcher = b;
  return NULL;
}

static void drop_outs(rx_rt_batcher *b, ab_call *c) {
  for (size_t k = 0; k < c->nouts; k++) {
    rx_rt_tensor_release(c->outs[k].whole);
    rx_rt_tensor_release(c->outs[k].own);
  }
  rt_free(b->alloc, c->outs);
  c->outs = NULL;
  c->nouts = 0;
  c->done = false;
}

void rx_rt_batcher_release(rx_rt_batcher *b) {
  if (!b) return;
  for (size_t i = 0; i < b->ncalls; i++) {
    ab_call *c = &b->calls[i];
    for (size_t k = 0; k < c->nargs; k++) rx_rt_tensor_release(c->args[k].tensor);
    drop_outs(b, c);
    rt_free(b->alloc, c->args);
  }
  for (size_t i = 0; i < b->nfns; i++) {
    rt_free(b->alloc, b->fns[i].name);
    rt_free(b->alloc, b->fns[i].batched);
    rt_free(b->alloc, b->fns[i].gather);
    for (size_t o = 0; o < AB_MAX_OUTS; o++) rx_rt_tensor_release(b->fns[i].arena[o].t);
  }
  rt_free(b->alloc, b->fns);
  rt_free(b->alloc, b->calls);
  rt_free(b->alloc, b->depth);
  rt_free(b->alloc, b->consumer);
  rt_abp_fsm_free(b->alloc, &b->fsm);
  rx_rt_artifact *a = b->a;
  rt_free(b->alloc, b);
  rx_rt_artifact_release(a);
}

/* The index of function name in the artifact, or -1. */
static long art_fn(const rx_rt_artifact *a, const char *name) {
  for (size_t i = 0; i < rx_rt_artifact_function_count(a); i++)
    if (!strcmp(rx_rt_artifact_function_name(a, i), name)) return (long)i;
  return -1;
}

/* The N of batched function bf's fact `D <= N`, where D is the leading dim of its first batched
 * parameter ("f32[batch, 64]": batch), or SIZE_MAX without such a fact. */
static size_t fact_max_batch(const rx_rt_artifact *a, size_t bf, const ab_fn *e) {
  char dim[64] = "";
  for (size_t i = 0; i < e->nparams && !dim[0]; i++) {
    rx_rt_param_info info;
    if (e->shared[i] || !rx_rt_artifact_function_param(a, bf, i, &info)) continue;
    const char *open = strchr(info.expected, '[');
    size_t n = open ? strcspn(open + 1, ",]") : 0;
    if (n && n < sizeof dim) memcpy(dim, open + 1, n), dim[n] = '\0';
  }
  for (size_t i = 0; dim[0] && i < rx_rt_artifact_function_fact_count(a, bf); i++) {
    const char *f = rx_rt_artifact_function_fact(a, bf, i);
    size_t n = strlen(dim);
    char *end = NULL;
    if (strncmp(f, dim, n) != 0 || strncmp(f + n, " <= ", 4) != 0) continue;
    long long v = strtoll(f + n + 4, &end, 10);
    if (end != f + n + 4 && !*end && v >= 1) return (size_t)v;
  }
  return SIZE_MAX;
}

rx_status rx_rt_batcher_add_function(rx_rt_batcher *b, const char *fn, const char *batched_fn,
                                     const bool *shared, size_t nparams) {
  if (!b || !fn || !batched_fn || (nparams && !shared))
    return base_status_make(RX_ERR_INVALID, "batcher: add_function: missing argument");
  long f = art_fn(b->a, fn), bf = art_fn(b->a, batched_fn);
  if (f < 0 || bf < 0)
    return base_status_make(RX_ERR_NOT_FOUND, "batcher: no function '%s' in the artifact",
                            f < 0 ? fn : batched_fn);
  size_t np = rx_rt_artifact_function_param_count(b->a, (size_t)f);
  if (np != nparams || rx_rt_artifact_function_param_count(b->a, (size_t)bf) != np ||
      np > AB_MAX_PARAMS)
    return base_status_make(
        RX_ERR_INVALID,
        "batcher: '%s' takes %zu parameters and '%s' %zu; %zu shared flags given "
        "(at most %d)",
        fn, np, batched_fn, rx_rt_artifact_function_param_count(b->a, (size_t)bf), nparams,
        AB_MAX_PARAMS);
  for (size_t i = 0; i < b->nfns; i++)
    if (!strcmp(b->fns[i].name, fn))
      return base_status_make(RX_ERR_INVALID, "batcher: '%s' is registered already", fn);
  ab_fn *fns = grow(b->alloc, b->fns, sizeof *fns * (b->nfns + 1));
  if (!fns) return rt_oom("a batcher function", sizeof *fns);
  b->fns = fns;
  ab_fn *e = &fns[b->nfns];
  memset(e, 0, sizeof *e);
  e->name = rt_strdup(b->alloc, fn);
  e->batched = rt_strdup(b->alloc, batched_fn);
  if (!e->name || !e->batched) {
    rt_free(b->alloc, e->name);
    rt_free(b->alloc, e->batched);
    return rt_oom("a function name", strlen(fn));
  }
  e->index = (size_t)f;
  e->nparams = np;
  for (size_t i = 0; i < np; i++) {
    rx_rt_param_info info;
    e->shared[i] = shared[i];
    e->dtype[i] = RX_DTYPE_UNKNOWN;
    e->ndim[i] = -1;
    if (rx_rt_artifact_function_param(b->a, (size_t)f, i, &info)) {
      e->dtype[i] = info.dtype;
      e->ndim[i] = info.ndim;
    }
  }
  e->max_batch = fact_max_batch(b->a, (size_t)bf, e);
  /* the index-array form: a pool and an index array in the place of each batched parameter */
  size_t nb = 0;
  for (size_t i = 0; i < np; i++) nb += !e->shared[i];
  size_t glen = strlen(batched_fn) + sizeof "_gather";
  char *gname = rt_alloc(b->alloc, glen);
  if (!gname) {
    rt_free(b->alloc, e->name);
    rt_free(b->alloc, e->batched);
    return rt_oom("a function name", glen);
  }
  snprintf(gname, glen, "%s_gather", batched_fn);
  long gf = art_fn(b->a, gname);
  if (gf >= 0 && rx_rt_artifact_function_param_count(b->a, (size_t)gf) == np + nb)
    e->gather = gname;
  else
    rt_free(b->alloc, gname);
  b->nfns++;
  return NULL;
}

rx_status rx_rt_batcher_set_planning(rx_rt_batcher *b, bool on) {
  if (!b) return base_status_make(RX_ERR_INVALID, "batcher: set_planning: the batcher is NULL");
  b->no_plan = !on;
  return NULL;
}

rx_status rx_rt_batcher_set_gather(rx_rt_batcher *b, bool on) {
  if (!b) return base_status_make(RX_ERR_INVALID, "batcher: set_gather: the batcher is NULL");
  b->no_gather = !on;
  return NULL;
}

/* Whether a value of dtype and ndim fits parameter i of fn (the shape is the VM's to check). */
static rx_status check_arg(const ab_fn *fn, size_t i, rx_dtype dtype, int ndim, size_t call) {
  if ((fn->dtype[i] == RX_DTYPE_UNKNOWN || dtype == fn->dtype[i]) &&
      (fn->ndim[i] < 0 || ndim == fn->ndim[i]))
    return NULL;
  return base_status_make(
      RX_ERR_INVALID,
      "batcher: call %zu of '%s': argument %zu is %s of rank %d, expected %s of "
      "rank %d",
      call, fn->name, i, rx_rt_dtype_name(dtype), ndim, rx_rt_dtype_name(fn->dtype[i]),
      fn->ndim[i]);
}

rx_status rx_rt_batcher_submit(rx_rt_batcher *b, const char *fn, const rx_rt_batch_arg *args,
                               size_t n, size_t *out_call) {
  if (out_call) *out_call = 0;
  if (!b || !fn || (n && !args))
    return base_status_make(RX_ERR_INVALID, "batcher: submit: missing argument");
  size_t f = 0;
  while (f < b->nfns && strcmp(b->fns[f].name, fn) != 0) f++;
  if (f == b->nfns)
    return base_status_make(
        RX_ERR_NOT_FOUND,
        "batcher: submit: no function '%s' registered (rx_rt_batcher_add_function)", fn);
  if (n != b->fns[f].nparams)
    return base_status_make(RX_ERR_INVALID, "batcher: submit: '%s' takes %zu arguments, got %zu",
                            fn, b->fns[f].nparams, n);
  for (size_t i = 0; i < n; i++)
    if (args[i].tensor)
      RX_RETURN_IF_ERROR(check_arg(&b->fns[f], i, rx_rt_tensor_dtype(args[i].tensor),
                                   rx_rt_tensor_ndim(args[i].tensor), b->ncalls));
  if (b->ncalls == b->cap) {
    size_t cap = b->cap ? 2 * b->cap : 64;
    ab_call *calls = grow(b->alloc, b->calls, sizeof *calls * cap);
    if (!calls) return rt_oom("the batcher's calls", sizeof *calls * cap);
    b->calls = calls;
    b->cap = cap;
  }
  ab_call *c = &b->calls[b->ncalls];
  memset(c, 0, sizeof *c);
  c->fn = f;
  c->args = rt_alloc(b->alloc, sizeof *c->args * (n ? n : 1));
  if (!c->args) return rt_oom("a call's arguments", sizeof *c->args * n);
  memcpy(c->args, args, sizeof *args * n);
  c->nargs = n;
  for (size_t i = 0; i < n; i++)
    if (args[i].tensor) rx_rt_tensor_retain(args[i].tensor);
  if (out_call) *out_call = b->ncalls;
  b->ncalls++;
  return NULL;
}

/* Where argument a's value is now; false when its call has not run. */
static bool resolve(const rx_rt_batcher *b, const rx_rt_batch_arg *a, ab_src *out) {
  memset(out, 0, sizeof *out);
  if (a->tensor) {
    out->tensor = a->tensor;
    out->ndim = rx_rt_tensor_ndim(a->tensor);
    out->shape = rx_rt_tensor_shape(a->tensor);
    out->bytes = rx_rt_tensor_bytes(a->tensor);
  } else {
    const ab_call *d = &b->calls[a->call];
    if (!d->done || a->output >= d->nouts) return false;
    const ab_out *o = &d->outs[a->output];
    if (o->own == o->whole) { /* an unbatched call's output (run_single): a tensor of its own */
      out->tensor = o->whole;
      out->ndim = rx_rt_tensor_ndim(o->whole);
      out->shape = rx_rt_tensor_shape(o->whole);
      out->bytes = rx_rt_tensor_bytes(o->whole);
      out->dtype = rx_rt_tensor_dtype(out->tensor);
      return true;
    }
    out->tensor = o->whole;
    out->is_row = true;
    out->row = o->row;
    out->ndim = rx_rt_tensor_ndim(o->whole) - 1;
    out->shape = rx_rt_tensor_shape(o->whole) + 1;
    out->bytes = rx_rt_tensor_bytes(o->whole) / (size_t)rx_rt_tensor_shape(o->whole)[0];
    out->offset = o->row * out->bytes;
  }
  out->dtype = rx_rt_tensor_dtype(out->tensor);
  return true;
}

/* Whether ready call c can join the batch led by call lead. */
static bool joins(const rx_rt_batcher *b, const ab_call *lead, const ab_call *c) {
  if (c->fn != lead->fn || c->done) return false;
  const ab_fn *f = &b->fns[c->fn];
  for (size_t i = 0; i < c->nargs; i++) {
    ab_src x, y;
    resolve(b, &lead->args[i], &x);
    resolve(b, &c->args[i], &y);
    if (f->shared[i] ? x.tensor != y.tensor || x.row != y.row
                     : x.dtype != y.dtype || x.ndim != y.ndim ||
                           memcmp(x.shape, y.shape, sizeof(int64_t) * (size_t)x.ndim) != 0)
      return false;
  }
  return true;
}

/* Row `row` of the whole [G, ...] as a tensor of its own (one device copy; counted in the stats
 * when made for a call's argument, not when the caller asks for an output). */
static rx_status row_tensor(rx_rt_batcher *b, rx_rt_tensor *whole, size_t row, bool counted,
                            rx_rt_tensor **out) {
  RX_RETURN_IF_ERROR(rx_rt_tensor_create(b->dev, rx_rt_tensor_dtype(whole),
                                         rx_rt_tensor_ndim(whole) - 1,
                                         rx_rt_tensor_shape(whole) + 1, out));
  size_t n = rx_rt_tensor_bytes(*out);
  rx_rt_buffer *src = rx_rt_tensor_buffer(whole), *dst = rx_rt_tensor_buffer(*out);
  rx_status st = !n        ? NULL
                 : counted ? ab_buffer_copy(b, src, row * n, dst, 0, n)
                           : rx_rt_buffer_copy(src, row * n, dst, 0, n);
  if (st) {
    rx_rt_tensor_release(*out);
    *out = NULL;
  }
  return st;
}

/* A shared argument as a tensor: the caller's, or the output's own (made once). */
static rx_status shared_tensor(rx_rt_batcher *b, const rx_rt_batch_arg *a, rx_rt_tensor **out) {
  if (a->tensor) {
    *out = a->tensor;
    return NULL;
  }
  ab_out *o = &b->calls[a->call].outs[a->output];
  if (!o->own) RX_RETURN_IF_ERROR(row_tensor(b, o->whole, o->row, true, &o->own));
  *out = o->own;
  return NULL;
}

/* The tensor whose rows argument i of every call of the batch is (a batch's whole or an
 * arena), or NULL; *in_order: its rows 0..g-1 in order (a view: prefix_view). */
static rx_rt_tensor *one_source(const rx_rt_batcher *b, const size_t *batch, size_t g, size_t i,
                                bool *in_order) {
  ab_src s;
  resolve(b, &b->calls[batch[0]].args[i], &s);
  rx_rt_tensor *t = s.is_row ? s.tensor : NULL;
  *in_order = t != NULL;
  for (size_t k = 0; k < g && t; k++) {
    resolve(b, &b->calls[batch[k]].args[i], &s);
    if (!s.is_row || s.tensor != t) return NULL;
    *in_order = *in_order && s.row == k;
  }
  return t;
}

/* The first g rows of t [G >= g, ...] as a tensor (*out retained): t itself, or a tensor over
 * t's buffer (from its byte 0: no copy). */
static rx_status prefix_view(rx_rt_tensor *t, size_t g, rx_rt_tensor **out) {
  if (rx_rt_tensor_shape(t)[0] == (int64_t)g) {
    rx_rt_tensor_retain(t);
    *out = t;
    return NULL;
  }
  int64_t shape[RX_RT_MAX_NDIM];
  memcpy(shape, rx_rt_tensor_shape(t), sizeof(int64_t) * (size_t)rx_rt_tensor_ndim(t));
  shape[0] = (int64_t)g;
  return rx_rt_tensor_wrap(rx_rt_tensor_buffer(t), rx_rt_tensor_dtype(t), rx_rt_tensor_ndim(t),
                           shape, out);
}

/* Argument i of the batch's calls as one tensor [g, ...] (*out retained): a view of one earlier
 * output when the calls take its rows 0..g-1 in order, else a new tensor filled by one device
 * copy per run of consecutive source bytes. */
static rx_status stack(rx_rt_batcher *b, const size_t *batch, size_t g, size_t i,
                       rx_rt_tensor **out) {
  ab_src first, s;
  resolve(b, &b->calls[batch[0]].args[i], &first);
  if (first.ndim + 1 > RX_RT_MAX_NDIM)
    return base_status_make(RX_ERR_UNSUPPORTED, "batcher: argument %zu has %d dims", i, first.ndim);
  bool in_order = false;
  if (one_source(b, batch, g, i, &in_order) && in_order) {
    b->stats.views++;
    return prefix_view(first.tensor, g, out);
  }
  int64_t shape[RX_RT_MAX_NDIM];
  shape[0] = (int64_t)g;
  memcpy(shape + 1, first.shape, sizeof(int64_t) * (size_t)first.ndim);
  RX_RETURN_IF_ERROR(rx_rt_tensor_create(b->dev, first.dtype, first.ndim + 1, shape, out));
  size_t row = first.bytes;
  rx_rt_buffer *dst = rx_rt_tensor_buffer(*out);
  rx_status st = NULL;
  for (size_t k = 0, n = 1; k < g && row && !st; k += n) {
    ab_src s0;
    resolve(b, &b->calls[batch[k]].args[i], &s0);
    /* rows [k, k + n): the same source repeated (a zero state), or consecutive source rows */
    bool same = true;
    for (n = 1; k + n < g; n++) {
      resolve(b, &b->calls[batch[k + n]].args[i], &s);
      bool next_same = s.tensor == s0.tensor && s.offset == s0.offset;
      bool next_seq = s.tensor == s0.tensor && s.offset == s0.offset + n * row;
      if (n == 1) same = next_same;
      if (same ? !next_same : !next_seq) break;
    }
    st = ab_buffer_copy(b, rx_rt_tensor_buffer(s0.tensor), s0.offset, dst, k * row,
                        same ? row : n * row);
    /* a repeated row: doubled in place, log2(n) copies (each command sees the previous one's
     * writes: relaxc/runtime.h, "Ordering") */
    for (size_t done = 1; same && done < n && !st; done *= 2) {
      size_t m = done < n - done ? done : n - done;
      st = ab_buffer_copy(b, dst, k * row, dst, (k + done) * row, m * row);
    }
  }
  if (st) {
    rx_rt_tensor_release(*out);
    *out = NULL;
  }
  return st;
}

/* A whole of the batcher's own with y's rows in the order perm (row j = y's row perm[j]; perm NULL:
 * in order, and g 1 for y as a whole): one copy per run of consecutive rows. */
static rx_status place_whole(rx_rt_batcher *b, rx_rt_tensor *y, const size_t *perm, size_t g,
                             rx_rt_tensor **out) {
  RX_RETURN_IF_ERROR(rx_rt_tensor_create(b->dev, rx_rt_tensor_dtype(y), rx_rt_tensor_ndim(y),
                                         rx_rt_tensor_shape(y), out));
  size_t row = rx_rt_tensor_bytes(y) / g, n = 1;
  rx_status st = NULL;
  for (size_t j = 0; j < g && row && !st; j += n) {
    size_t from = perm ? perm[j] : j;
    for (n = 1; j + n < g && (perm ? perm[j + n] : j + n) == from + n;) n++;
    st = ab_buffer_copy(b, rx_rt_tensor_buffer(y), from * row, rx_rt_tensor_buffer(*out), j * row,
                        n * row);
  }
  if (st) {
    rx_rt_tensor_release(*out);
    *out = NULL;
  }
  return st;
}

/* Function f's arena for output o when this run's plan gives f arenas and it has g free rows of
 * dtype and row shape shape[0..nd) (made at f's first output), else NULL. */
static rx_status arena_rows(rx_rt_batcher *b, ab_fn *f, size_t o, rx_dtype dtype, int nd,
                            const int64_t *shape, size_t g, ab_arena **out) {
  *out = NULL;
  ab_arena *a = f->use_arena && o < AB_MAX_OUTS ? &f->arena[o] : NULL;
  if (nd + 1 > RX_RT_MAX_NDIM) return NULL;
  if (a && !a->t && f->pending >= g) {
    int64_t as[RX_RT_MAX_NDIM];
    memcpy(as + 1, shape, sizeof(int64_t) * (size_t)nd);
    as[0] = (int64_t)f->pending;
    RX_RETURN_IF_ERROR(rx_rt_tensor_create(b->dev, dtype, nd + 1, as, &a->t));
    a->next = 0;
  }
  if (a && a->t && rx_rt_tensor_dtype(a->t) == dtype && rx_rt_tensor_ndim(a->t) == nd + 1 &&
      !memcmp(rx_rt_tensor_shape(a->t) + 1, shape, sizeof(int64_t) * (size_t)nd) &&
      a->next + g <= (size_t)rx_rt_tensor_shape(a->t)[0])
    *out = a;
  return NULL;
}

/* Where output o ([g, ...], y) of a batch of function f goes: into f's arena for o at its next
 * free rows (arena_rows), else a whole of its own with the rows in the order perm (consumer
 * order); *out retained; *out_row0 the arena row of the batch's first call (*out_perm false), or
 * the rows are placed by perm (true). One copy of each row either way. */
static rx_status place_output(rx_rt_batcher *b, ab_fn *f, size_t o, rx_rt_tensor *y,
                              const size_t *perm, size_t g, rx_rt_tensor **out, size_t *out_row0,
                              bool *out_perm) {
  *out_row0 = 0;
  *out_perm = false;
  ab_arena *a = NULL;
  RX_RETURN_IF_ERROR(arena_rows(b, f, o, rx_rt_tensor_dtype(y), rx_rt_tensor_ndim(y) - 1,
                                rx_rt_tensor_shape(y) + 1, g, &a));
  if (!a) {
    *out_perm = true;
    return place_whole(b, y, perm, g, out);
  }
  size_t n = rx_rt_tensor_bytes(y), row = n / g;
  if (n)
    RX_RETURN_IF_ERROR(
        ab_buffer_copy(b, rx_rt_tensor_buffer(y), 0, rx_rt_tensor_buffer(a->t), a->next * row, n));
  rx_rt_tensor_retain(a->t);
  *out = a->t;
  *out_row0 = a->next;
  a->next += g;
  return NULL;
}

/* qsort of (first consumer, position) pairs */
static int by_consumer(const void *x, const void *y) {
  const size_t *a = x, *c = y;
  return a[0] != c[0] ? (a[0] < c[0] ? -1 : 1) : (a[1] > c[1]) - (a[1] < c[1]);
}

/* The batch's rows in consumer order (memory planning: docs/autobatch.md): perm[j] is the
 * position in the batch of the call whose outputs go to row j: calls read by later calls first,
 * in the order of their first readers (the order their batch lists them), then the rest; so the
 * next batch that reads them finds its operands as the rows 0..g'-1 of one tensor, a view. */
static rx_status consumer_order(rx_rt_batcher *b, const size_t *batch, size_t g, size_t *perm) {
  size_t *pairs = rt_alloc(b->alloc, sizeof *pairs * 2 * g);
  if (!pairs) return rt_oom("a batch's order", sizeof *pairs * 2 * g);
  bool ordered = b->fns[b->calls[batch[0]].fn].ordered;
  for (size_t k = 0; k < g; k++) {
    pairs[2 * k] = b->consumer && ordered ? b->consumer[batch[k]] : SIZE_MAX;
    pairs[2 * k + 1] = k;
  }
  qsort(pairs, g, sizeof *pairs * 2, by_consumer);
  for (size_t j = 0; j < g; j++) perm[j] = pairs[2 * j + 1];
  rt_free(b->alloc, pairs);
  return NULL;
}

/* The batched call's result (a tensor or a tuple of tensors [g, ...]): each copied once, into its
 * function's arena or a whole of the batcher's own in consumer order (place_output), whose rows
 * become the calls' outputs. */
static rx_status split(rx_rt_batcher *b, const size_t *batch, size_t g, rx_rt_value *res) {
  bool tuple = rx_rt_value_kind_of(res) == RX_RT_VALUE_TUPLE;
  size_t nouts = tuple ? rx_rt_value_tuple_size(res) : 1;
  ab_fn *f = &b->fns[b->calls[batch[0]].fn];
  const char *name = f->batched;
  for (size_t k = 0; k < g; k++) {
    ab_call *c = &b->calls[batch[k]];
    c->outs = rt_alloc(b->alloc, sizeof *c->outs * (nouts ? nouts : 1));
    if (!c->outs) return rt_oom("a call's outputs", sizeof *c->outs * nouts);
    c->done = true; /* undone by drop_outs when this fails */
  }
  size_t *perm = rt_alloc(b->alloc, sizeof *perm * g);
  if (!perm) return rt_oom("a batch's order", sizeof *perm * g);
  rx_status st = consumer_order(b, batch, g, perm);
  for (size_t o = 0; o < nouts && !st; o++) {
    const rx_rt_value *v = tuple ? rx_rt_value_tuple_item(res, o) : res;
    rx_rt_tensor *y = v ? rx_rt_value_tensor(v) : NULL, *w = NULL;
    if (!y) {
      st = base_status_make(RX_ERR_UNSUPPORTED,
                            "batcher: '%s': output %zu is not a tensor (only tensors and tuples "
                            "of tensors are split)",
                            name, o);
      break;
    }
    if (rx_rt_tensor_ndim(y) < 1 || rx_rt_tensor_shape(y)[0] != (int64_t)g) {
      st = base_status_make(RX_ERR_INVALID, "batcher: '%s': output %zu has no leading dim of %zu",
                            name, o, g);
      break;
    }
    size_t row0 = 0;
    bool permuted = false;
    if ((st = place_output(b, f, o, y, perm, g, &w, &row0, &permuted))) break;
    for (size_t j = 0; j < g; j++) {
      size_t k = permuted ? perm[j] : j, row = permuted ? j : row0 + j;
      ab_call *c = &b->calls[batch[k]];
      rx_rt_tensor_retain(w);
      c->outs[o] = (ab_out){w, row, NULL};
      c->nouts = o + 1;
    }
    rx_rt_tensor_release(w);
  }
  rt_free(b->alloc, perm);
  return st;
}

/* An index array i32[g]: the rows argument i of the batch's calls take in pool (one_source),
 * or 0..g-1 (stacked). Written from the host: waits for the work queued so far. */
static rx_status index_array(rx_rt_batcher *b, const size_t *batch, size_t g, size_t i,
                             bool stacked, rx_rt_tensor **out) {
  *out = NULL;
  int32_t *rows = rt_alloc(b->alloc, sizeof *rows * g);
  if (!rows) return rt_oom("an index array", sizeof *rows * g);
  for (size_t k = 0; k < g; k++) {
    ab_src s;
    resolve(b, &b->calls[batch[k]].args[i], &s);
    rows[k] = (int32_t)(stacked ? k : s.is_row ? s.row : 0);
  }
  int64_t n = (int64_t)g;
  rx_status st = rx_rt_tensor_create(b->dev, RX_DTYPE_I32, 1, &n, out);
  if (!st) st = rx_rt_buffer_write(rx_rt_tensor_buffer(*out), 0, rows, sizeof *rows * g);
  if (st && *out) {
    rx_rt_tensor_release(*out);
    *out = NULL;
  }
  rt_free(b->alloc, rows);
  return st;
}

/* The caller's tensor that argument i of every call of the batch is (a zero state), or NULL. */
static rx_rt_tensor *one_caller_tensor(const rx_rt_batcher *b, const size_t *batch, size_t g,
                                       size_t i) {
  rx_rt_tensor *t = b->calls[batch[0]].args[i].tensor;
  for (size_t k = 1; k < g && t; k++)
    if (b->calls[batch[k]].args[i].tensor != t) return NULL;
  return t && rx_rt_tensor_ndim(t) < RX_RT_MAX_NDIM ? t : NULL;
}

/* Whether the batch goes to the index-array form: it exists, gathers are on, and a batched
 * argument is rows of one earlier output that are not that output as is, or one caller's tensor
 * for every call (a gather, no copy). */
static bool use_gather(const rx_rt_batcher *b, const ab_fn *f, const size_t *batch, size_t g) {
  if (b->no_gather || !f->gather) return false;
  for (size_t i = 0; i < f->nparams; i++) {
    bool in_order = false;
    if (f->shared[i]) continue;
    if (one_source(b, batch, g, i, &in_order) ? !in_order
                                              : g > 1 && one_caller_tensor(b, batch, g, i))
      return true;
  }
  return false;
}

/* The caller's tensor t [...] as a pool of one row [1, ...] (*out retained; no copy). */
static rx_status one_row_pool(rx_rt_tensor *t, rx_rt_tensor **out) {
  int64_t shape[RX_RT_MAX_NDIM];
  shape[0] = 1;
  memcpy(shape + 1, rx_rt_tensor_shape(t), sizeof(int64_t) * (size_t)rx_rt_tensor_ndim(t));
  return rx_rt_tensor_wrap(rx_rt_tensor_buffer(t), rx_rt_tensor_dtype(t), rx_rt_tensor_ndim(t) + 1,
                           shape, out);
}

/* The batched call's arguments in[0..*out_n) (owned[k]: in[k] is the batcher's to release):
 * batched_fn's, each batched argument stacked (stack); or, gather, the index-array form's, each
 * batched argument as a pool and an index array: rows of one earlier output as that output and
 * their rows (no copy), others stacked and 0..g-1. */
static rx_status assemble(rx_rt_batcher *b, const ab_fn *f, const size_t *batch, size_t g,
                          bool gather, rx_rt_tensor **in, bool *owned, size_t *out_n) {
  size_t n = 0;
  for (size_t i = 0; i < f->nparams; i++) {
    for (size_t k = 0; k < g; k++) {
      ab_src s;
      resolve(b, &b->calls[batch[k]].args[i], &s);
      RX_RETURN_IF_ERROR(check_arg(f, i, s.dtype, s.ndim, batch[k]));
    }
    if (f->shared[i]) {
      RX_RETURN_IF_ERROR(shared_tensor(b, &b->calls[batch[0]].args[i], &in[n++]));
      continue;
    }
    bool in_order = false;
    rx_rt_tensor *pool = gather ? one_source(b, batch, g, i, &in_order) : NULL;
    rx_rt_tensor *caller = gather && !pool ? one_caller_tensor(b, batch, g, i) : NULL;
    if (caller) { /* one row, gathered g times */
      RX_RETURN_IF_ERROR(one_row_pool(caller, &in[n]));
      owned[n++] = true;
      b->stats.gathers++;
      pool = caller;
    } else if (pool) {
      in[n++] = pool;
      if (in_order)
        b->stats.views++;
      else
        b->stats.gathers++;
    } else {
      RX_RETURN_IF_ERROR(stack(b, batch, g, i, &in[n]));
      owned[n++] = true;
    }
    if (gather) {
      RX_RETURN_IF_ERROR(index_array(b, batch, g, i, !pool, &in[n]));
      owned[n++] = true;
    }
  }
  *out_n = n;
  return NULL;
}

/* Runs the batch of calls batch[0..g) as one call of their batched form (or its index-array
 * form: use_gather). */
static rx_status run_batch(rx_rt_batcher *b, const size_t *batch, size_t g) {
  const ab_fn *f = &b->fns[b->calls[batch[0]].fn];
  rx_rt_tensor *in[2 * AB_MAX_PARAMS] = {0};
  bool owned[2 * AB_MAX_PARAMS] = {0};
  bool gather = use_gather(b, f, batch, g);
  size_t n = 0;
  rx_status st = assemble(b, f, batch, g, gather, in, owned, &n);
  rx_rt_value *res = NULL;
  if (!st) st = rx_rt_vm_call(b->a, gather ? f->gather : f->batched, in, n, &res);
  if (!st) st = split(b, batch, g, res);
  if (st) /* a batch that failed half-way: its outputs dropped, the calls stay pending */
    for (size_t k = 0; k < g; k++) drop_outs(b, &b->calls[batch[k]]);
  rx_rt_value_release(res);
  for (size_t i = 0; i < 2 * AB_MAX_PARAMS; i++)
    if (owned[i]) rx_rt_tensor_release(in[i]);
  if (!st) {
    b->stats.calls += g;
    b->stats.batched_calls++;
    b->stats.launches++;
    if (g > b->stats.max_batch) b->stats.max_batch = g;
  }
  return st;
}

/* Output y of unbatched call i of function f as the call's output o: in f's arena at its next
 * row when this run's plan gives f arenas and a later call reads call i (so that a gathered batch
 * takes it as a row of the arena like its other operands, not forcing copies), else a tensor of
 * the batcher's own that is both the output's whole and its own (resolve() then sees a plain
 * tensor, and an unbatched reader takes it as is). One copy either way. */
static rx_status single_output(rx_rt_batcher *b, size_t i, ab_fn *f, size_t o, rx_rt_tensor *y,
                               ab_out *out) {
  ab_arena *a = NULL;
  if (b->consumer && b->consumer[i] != SIZE_MAX)
    RX_RETURN_IF_ERROR(arena_rows(b, f, o, rx_rt_tensor_dtype(y), rx_rt_tensor_ndim(y),
                                  rx_rt_tensor_shape(y), 1, &a));
  if (!a) {
    rx_rt_tensor *w = NULL;
    RX_RETURN_IF_ERROR(place_whole(b, y, NULL, 1, &w));
    rx_rt_tensor_retain(w);
    *out = (ab_out){w, 0, w};
    return NULL;
  }
  size_t n = rx_rt_tensor_bytes(y);
  if (n)
    RX_RETURN_IF_ERROR(
        ab_buffer_copy(b, rx_rt_tensor_buffer(y), 0, rx_rt_tensor_buffer(a->t), a->next * n, n));
  rx_rt_tensor_retain(a->t);
  *out = (ab_out){a->t, a->next++, NULL};
  return NULL;
}

/* Runs call i alone through its unbatched function (a round of one ready call, or the ONE
 * policy): no stacking, and an argument that is an earlier unbatched call's output is passed as
 * is. Each output is copied once out of the VM's planned storage (single_output). */
static rx_status run_single(rx_rt_batcher *b, size_t i) {
  ab_call *c = &b->calls[i];
  ab_fn *f = &b->fns[c->fn];
  rx_rt_tensor *in[AB_MAX_PARAMS] = {0};
  rx_status st = NULL;
  for (size_t k = 0; k < f->nparams && !st; k++) {
    ab_src s;
    resolve(b, &c->args[k], &s);
    st = check_arg(f, k, s.dtype, s.ndim, i);
    if (!st) st = shared_tensor(b, &c->args[k], &in[k]); /* the value as a tensor of its own */
  }
  rx_rt_value *res = NULL;
  if (!st) st = rx_rt_vm_call(b->a, f->name, in, f->nparams, &res);
  bool tuple = !st && rx_rt_value_kind_of(res) == RX_RT_VALUE_TUPLE;
  size_t nouts = st ? 0 : tuple ? rx_rt_value_tuple_size(res) : 1;
  if (!st) {
    c->outs = rt_alloc(b->alloc, sizeof *c->outs * (nouts ? nouts : 1));
    if (!c->outs) st = rt_oom("a call's outputs", sizeof *c->outs * nouts);
    c->done = !st; /* undone by drop_outs when this fails */
  }
  for (size_t o = 0; o < nouts && !st; o++) {
    const rx_rt_value *v = tuple ? rx_rt_value_tuple_item(res, o) : res;
    rx_rt_tensor *y = v ? rx_rt_value_tensor(v) : NULL;
    if (!y)
      st = base_status_make(RX_ERR_UNSUPPORTED, "batcher: '%s': output %zu is not a tensor",
                            f->name, o);
    if (!st) st = single_output(b, i, f, o, y, &c->outs[o]);
    if (!st) c->nouts = o + 1;
  }
  if (st) drop_outs(b, c);
  rx_rt_value_release(res);
  if (!st) {
    b->stats.calls++;
    b->stats.launches++;
    if (!b->stats.max_batch) b->stats.max_batch = 1;
  }
  return st;
}

/* Every argument of call i names a call that exists and, once run, an output it has. */
static rx_status check_call_refs(const rx_rt_batcher *b, size_t i) {
  const ab_call *c = &b->calls[i];
  for (size_t k = 0; k < c->nargs; k++) {
    const rx_rt_batch_arg *a = &c->args[k];
    if (a->tensor) continue;
    if (a->call >= b->ncalls)
      return base_status_make(RX_ERR_INVALID,
                              "batcher: call %zu of '%s': argument %zu is the output of call %zu, "
                              "which was never submitted (%zu calls)",
                              i, b->fns[c->fn].name, k, a->call, b->ncalls);
    const ab_call *d = &b->calls[a->call];
    if (d->done && a->output >= d->nouts)
      return base_status_make(RX_ERR_INVALID,
                              "batcher: call %zu of '%s': argument %zu is output %zu of call %zu, "
                              "which has %zu outputs",
                              i, b->fns[c->fn].name, k, a->output, a->call, d->nouts);
  }
  return NULL;
}

/* This run's ready set, kept up to date as calls run instead of found by a scan of every pending
 * call per round (a scan made a run of n calls in n rounds cost O(n^2) argument look-ups: the ONE
 * policy and the straggler's rounds of one call). waits[i]: the arguments of pending call i whose
 * producer has not run; the consumers of call p are next[start[p]..start[p + 1]) (one entry per
 * argument); list[0..n): the ready calls in submission order, count[f] of them of function f. */
typedef struct ab_ready {
  size_t *waits, *start, *next;
  size_t *list, n, *tmp, *fresh;
  size_t *count;
  size_t pending; /* calls not run yet */
} ab_ready;

static void ready_free(const rx_rt_batcher *b, ab_ready *r) {
  rt_free(b->alloc, r->waits);
  rt_free(b->alloc, r->next);
  rt_free(b->alloc, r->count);
  memset(r, 0, sizeof *r);
}

/* The dependency edges of the pending calls and the calls ready at the start of the run. */
static rx_status ready_init(const rx_rt_batcher *b, ab_ready *r) {
  size_t n = b->ncalls, ne = 0;
  memset(r, 0, sizeof *r);
  r->waits = rt_alloc(b->alloc, sizeof *r->waits * (5 * n + 1));
  r->count = rt_alloc(b->alloc, sizeof *r->count * (b->nfns + 1));
  if (!r->waits || !r->count) return rt_oom("the ready calls", sizeof(size_t) * 5 * n);
  r->start = r->waits + n, r->list = r->start + n + 1, r->tmp = r->list + n;
  r->fresh = r->tmp + n;
  for (size_t i = 0; i < n; i++)
    for (size_t k = 0; k < b->calls[i].nargs && !b->calls[i].done; k++) {
      const rx_rt_batch_arg *a = &b->calls[i].args[k];
      if (a->tensor || b->calls[a->call].done) continue; /* a->call < n: check_call_refs */
      r->start[a->call + 1]++;
      r->waits[i]++;
      ne++;
    }
  for (size_t i = 0; i < n; i++) r->start[i + 1] += r->start[i];
  r->next = rt_alloc(b->alloc, sizeof *r->next * (ne + 1));
  if (!r->next) return rt_oom("the ready calls", sizeof *r->next * ne);
  size_t *fill = r->tmp; /* free until the first round */
  memcpy(fill, r->start, sizeof *fill * n);
  for (size_t i = 0; i < n; i++) {
    for (size_t k = 0; k < b->calls[i].nargs && !b->calls[i].done; k++) {
      const rx_rt_batch_arg *a = &b->calls[i].args[k];
      if (!a->tensor && !b->calls[a->call].done) r->next[fill[a->call]++] = i;
    }
    if (b->calls[i].done) continue;
    r->pending++;
    if (!r->waits[i]) {
      r->list[r->n++] = i;
      r->count[b->calls[i].fn]++;
    }
  }
  return NULL;
}

static int by_index(const void *x, const void *y) {
  size_t a = *(const size_t *)x, c = *(const size_t *)y;
  return (a > c) - (a < c);
}

/* After a round ran batch[0..g): they leave the ready set, and the calls whose last pending
 * argument they produced join it (merged in submission order); each consumer's output indices are
 * checked now that its producer has its outputs. */
static rx_status ready_update(const rx_rt_batcher *b, ab_ready *r, const size_t *batch, size_t g) {
  size_t nf = 0;
  for (size_t k = 0; k < g; k++) {
    size_t p = batch[k];
    r->count[b->calls[p].fn]--;
    r->pending--;
    for (size_t e = r->start[p]; e < r->start[p + 1]; e++) {
      size_t u = r->next[e];
      RX_RETURN_IF_ERROR(check_call_refs(b, u));
      if (--r->waits[u] == 0) r->fresh[nf++] = u;
    }
  }
  qsort(r->fresh, nf, sizeof *r->fresh, by_index);
  size_t m = 0, j = 0;
  for (size_t k = 0; k < r->n || j < nf;) {
    if (k < r->n && b->calls[r->list[k]].done) {
      k++;
    } else if (j < nf && (k == r->n || r->fresh[j] < r->list[k])) {
      r->count[b->calls[r->fresh[j]].fn]++;
      r->tmp[m++] = r->fresh[j++];
    } else {
      r->tmp[m++] = r->list[k++];
    }
  }
  size_t *t = r->list;
  r->list = r->tmp, r->tmp = t, r->n = m;
  return NULL;
}

/* The call that pending call i waits on first. */
static size_t waits_on(const rx_rt_batcher *b, size_t i) {
  const ab_call *c = &b->calls[i];
  ab_src s;
  for (size_t k = 0; k < c->nargs; k++)
    if (!resolve(b, &c->args[k], &s)) return c->args[k].call;
  RX_ASSERT(!"a pending call that waits on nothing");
  return i;
}

/* No call is ready while some wait: they wait on each other. Follows the first pending call's
 * dependencies until one repeats and names the calls of that cycle. */
static rx_status cycle(const rx_rt_batcher *b) {
  size_t i = 0;
  while (b->calls[i].done) i++;
  for (size_t steps = 0; steps < b->ncalls; steps++) i = waits_on(b, i); /* now on the cycle */
  rx_strbuf path = {0};
  size_t j = i;
  do {
    base_strbuf_printf(&path, "%zu ('%s') -> ", j, b->fns[b->calls[j].fn].name);
    j = waits_on(b, j);
  } while (j != i);
  rx_status st = base_status_make(
      RX_ERR_INVALID, "batcher: a cycle: calls wait on each other's outputs: %s%zu", path.data, i);
  base_strbuf_free(&path);
  return st;
}

/* The depth of each pending call (ACRoBat's schedule: 0 without pending dependencies, else 1 +
 * the largest of theirs; SIZE_MAX on a cycle), in depth[0..ncalls), by Kahn's algorithm.
 * Computed once per run for both the DEPTH policy (pick_lead, run_round) and the plan
 * (plan_placement), so the two agree on the schedule; a call whose dependencies ran in an
 * earlier run is ready, depth 0. */
static rx_status call_depths(const rx_rt_batcher *b, size_t *depth) {
  size_t n = b->ncalls, ne = 0;
  size_t *start = rt_alloc(b->alloc, sizeof *start * (n + 1) * 2);
  if (!start) return rt_oom("the batch plan", sizeof *start * (n + 1) * 2);
  size_t *waits = start + n + 1; /* pending dependencies not placed yet */
  memset(start, 0, sizeof *start * (n + 1) * 2);
  for (size_t i = 0; i < n; i++) {
    depth[i] = b->calls[i].done ? 0 : SIZE_MAX;
    for (size_t k = 0; k < b->calls[i].nargs && !b->calls[i].done; k++) {
      const rx_rt_batch_arg *a = &b->calls[i].args[k];
      if (a->tensor || a->call >= n || b->calls[a->call].done) continue;
      start[a->call + 1]++;
      waits[i]++;
      ne++;
    }
  }
  for (size_t i = 0; i < n; i++) start[i + 1] += start[i];
  size_t *next = rt_alloc(b->alloc, sizeof *next * (ne + 2 * n + 1));
  if (!next) {
    rt_free(b->alloc, start);
    return rt_oom("the batch plan", sizeof *next * (ne + 2 * n + 1));
  }
  size_t *fill = next + ne, *queue = fill + n, qn = 0; /* next: consumers by producer */
  memcpy(fill, start, sizeof *fill * n);
  for (size_t i = 0; i < n; i++)
    for (size_t k = 0; k < b->calls[i].nargs && !b->calls[i].done; k++) {
      const rx_rt_batch_arg *a = &b->calls[i].args[k];
      if (!a->tensor && a->call < n && !b->calls[a->call].done) next[fill[a->call]++] = i;
    }
  for (size_t i = 0; i < n; i++)
    if (!b->calls[i].done && !waits[i]) depth[i] = 0, queue[qn++] = i;
  for (size_t q = 0; q < qn; q++) {
    size_t p = queue[q];
    for (size_t e = start[p]; e < start[p + 1]; e++) {
      size_t c = next[e];
      if (depth[c] == SIZE_MAX || depth[c] < depth[p] + 1) depth[c] = depth[p] + 1;
      if (--waits[c] == 0) queue[qn++] = c;
    }
  }
  for (size_t i = 0; i < n; i++) /* calls on or behind a cycle: no depth */
    if (waits[i]) depth[i] = SIZE_MAX;
  rt_free(b->alloc, next);
  rt_free(b->alloc, start);
  return NULL;
}

/* Batching-aware placement of this run's outputs (docs/autobatch.md, "Gathers and copies").
 * Under a depth schedule (the calls of one function and depth batch together) a batch's argument
 * i comes from ONE earlier batch when the producers of argument i of the calls of each depth have
 * one depth (an RNN step reads the previous step): their outputs stay in a tensor per batch, whose
 * rows the consumers take as is (a view) or, when some calls dropped out, by an index array (a
 * gather). Where the producers' depths differ (a tree level reads children of every height), the
 * producers' outputs go to their function's arena instead, one tensor for the run, so that the
 * batch still gathers from one tensor. A wrong prediction (another policy, a bound on the batch)
 * costs copies, never results. */
static rx_status plan_placement(rx_rt_batcher *b) {
  size_t *cons = grow(b->alloc, b->consumer, sizeof *cons * (b->ncalls ? b->ncalls : 1));
  if (!cons) return rt_oom("the batch plan", sizeof *cons * b->ncalls);
  b->consumer = cons;
  for (size_t i = 0; i < b->ncalls; i++) cons[i] = SIZE_MAX;
  for (size_t u = 0; u < b->ncalls; u++) /* in index order: the first consumer */
    for (size_t k = 0; k < b->calls[u].nargs && !b->calls[u].done; k++) {
      const rx_rt_batch_arg *a = &b->calls[u].args[k];
      if (!b->fns[b->calls[u].fn].shared[k] && !a->tensor && a->call < b->ncalls &&
          cons[a->call] == SIZE_MAX)
        cons[a->call] = u;
    }
  for (size_t f = 0; f < b->nfns; f++) b->fns[f].use_arena = b->fns[f].ordered = false;
  /* under ONE nothing batches: no batch to plan for (a single call's output in an arena would
   * cost its unbatched readers a copy of the row) */
  if (b->no_plan || !b->ncalls || b->policy == RX_RT_BATCH_ONE) return NULL;
  for (size_t f = 0; f < b->nfns; f++) b->fns[f].ordered = true; /* until producers mix depths */
  size_t n = b->ncalls, *depth = b->depth;                       /* this run's (call_depths) */
  size_t *seen = rt_alloc(b->alloc, sizeof *seen * n * 2);
  if (!seen) return rt_oom("the batch plan", sizeof *seen * n * 2);
  size_t *seen_fn = seen + n; /* by consumer depth: a producer's depth, fn */
  for (size_t f = 0; f < b->nfns; f++)
    for (size_t i = 0; i < b->fns[f].nparams; i++) {
      if (b->fns[f].shared[i]) continue;
      for (size_t k = 0; k < n; k++) seen[k] = SIZE_MAX;
      for (size_t u = 0; u < n; u++) {
        const ab_call *c = &b->calls[u];
        const rx_rt_batch_arg *a = &c->args[i];
        if (c->done || c->fn != f || depth[u] >= n || a->tensor || a->call >= n ||
            b->calls[a->call].done || depth[a->call] >= n)
          continue;
        size_t pf = b->calls[a->call].fn;
        if (seen[depth[u]] == SIZE_MAX) {
          seen[depth[u]] = depth[a->call];
          seen_fn[depth[u]] = pf;
        } else if (seen[depth[u]] != depth[a->call] || seen_fn[depth[u]] != pf) {
          b->fns[pf].ordered = b->fns[seen_fn[depth[u]]].ordered = false;
        }
      }
    }
  for (size_t f = 0; f < b->nfns; f++)
    b->fns[f].use_arena = !b->fns[f].ordered && b->fns[f].gather && !b->no_gather;
  rt_free(b->alloc, seen);
  return NULL;
}

/* The round's lead: the call whose function (and, under DEPTH, whose depth: this run's
 * call_depths, b->depth) the batch takes, chosen by the policy among the ready calls
 * ready[0..nready) (submission order) whose counts per function are count[]. */
static size_t pick_lead(rx_rt_batcher *b, const size_t *ready, size_t nready, const size_t *count) {
  if (b->policy == RX_RT_BATCH_ONE || b->policy == RX_RT_BATCH_ROUNDS) return ready[0];
  if (b->policy == RX_RT_BATCH_DEPTH) {
    size_t lead = ready[0];
    for (size_t k = 1; k < nready; k++)
      if (b->depth[ready[k]] < b->depth[lead]) lead = ready[k];
    return lead;
  }
  size_t f = rt_abp_choose(b->policy, &b->fsm, count, b->nfns, b->calls[ready[0]].fn);
  for (size_t k = 0; k < nready; k++)
    if (b->calls[ready[k]].fn == f) return ready[k];
  return ready[0];
}

/* The calibration's clock: the process's CPU time on a device that runs on the host's CPU
 * (Mesa's llvmpipe, "lavapipe": its work is this process's threads, and CPU time is that work,
 * little disturbed by other load on the machine), else wall-clock time (a GPU's work is not this
 * process's CPU time; a synchronization before and after bounds it). */
static double ab_now(const rx_rt_batcher *b) {
  struct timespec ts;
  clock_gettime(b->cpu_clock ? CLOCK_PROCESS_CPUTIME_ID : CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* A function's measurements kept in the artifact (vm_fn.batch_cost, per path: the batched form,
 * or the index-array form when gathers are on and the artifact has it): the samples of the first
 * AB_CAL_BATCHERS batchers of the artifact that calibrated it, pooled (each one's warm-ups left
 * out; index 0 of each kind a placeholder for rt_abp_crossover's warm-up), and the crossover of
 * the pool. Every later batcher takes that crossover and times nothing (the calibration's
 * synchronizations and batched samples are paid per artifact, not per batcher). Not the first
 * batcher's alone: it runs cold (its batched calls are the first of their sizes: the device's
 * buffer cache has no buffers of those sizes yet), and on lavapipe its crossover came out "never"
 * for the nested RNN's cells and the encoder, where the second batcher's (2 and 3; 2) batch for a
 * 1.1x to 1.9x gain; the pool takes the least time of each kind over both, so the warm samples. */
typedef struct ab_kept {
  size_t crossover;
  unsigned calibrations;
  size_t nsingle, nbatched;
  double single[1 + AB_CAL_BATCHERS * (AB_CAL_SINGLE - 1)];
  double batched[1 + AB_CAL_BATCHERS * (AB_CAL_BATCHED - 1)];
  size_t batched_g[1 + AB_CAL_BATCHERS * (AB_CAL_BATCHED - 1)];
} ab_kept;

static ab_kept **kept_slot(const rx_rt_batcher *b, const ab_fn *f) {
  return (ab_kept **)&b->a->fns[f->index].batch_cost[!b->no_gather && f->gather];
}

/* f's crossover from the artifact once its calibrating batchers are done, else 0. */
static size_t cached_crossover(const rx_rt_batcher *b, const ab_fn *f) {
  const ab_kept *k = *kept_slot(b, f);
  return k && k->calibrations >= AB_CAL_BATCHERS ? k->crossover : 0;
}

/* f calibrated in this batcher: its samples join the artifact's pool (while the pool has fewer
 * than AB_CAL_BATCHERS calibrations), and f's crossover is the pool's, with the margin. */
static rx_status keep_cost(rx_rt_batcher *b, ab_fn *f) {
  ab_kept **slot = kept_slot(b, f);
  if (!*slot) {
    *slot = rt_alloc(&b->a->alloc, sizeof **slot);
    if (!*slot) return rt_oom("a function's measured costs", sizeof **slot);
    (*slot)->nsingle = (*slot)->nbatched = 1;
  }
  ab_kept *k = *slot;
  const ab_cost *c = &f->cost;
  if (k->calibrations < AB_CAL_BATCHERS) {
    for (size_t i = 1; i < c->nsingle; i++) k->single[k->nsingle++] = c->single[i];
    for (size_t i = 1; i < c->nbatched; i++) {
      k->batched_g[k->nbatched] = c->batched_g[i];
      k->batched[k->nbatched++] = c->batched[i];
    }
    k->calibrations++;
    double s[sizeof k->single / sizeof *k->single];
    for (size_t i = 0; i < k->nsingle; i++) s[i] = AB_CAL_MARGIN * k->single[i];
    k->crossover = rt_abp_crossover(s, k->nsingle, k->batched, k->batched_g, k->nbatched);
  }
  f->cost.crossover = k->crossover;
  return NULL;
}

/* Runs batch[0..g) batched (g >= 2) or call batch[0] alone (g == 1), timed: a device
 * synchronization before and after, so the time is the device work's and the copies', and added
 * to f's samples (calibration only). */
static rx_status run_timed(rx_rt_batcher *b, ab_fn *f, const size_t *batch, size_t g) {
  RX_RETURN_IF_ERROR(rx_rt_device_synchronize(b->dev));
  double t0 = ab_now(b);
  RX_RETURN_IF_ERROR(g >= 2 ? run_batch(b, batch, g) : run_single(b, batch[0]));
  RX_RETURN_IF_ERROR(rx_rt_device_synchronize(b->dev));
  double t = ab_now(b) - t0;
  ab_cost *c = &f->cost;
  if (g >= 2 && c->nbatched < AB_CAL_BATCHED) {
    c->batched_g[c->nbatched] = g;
    c->batched[c->nbatched++] = t;
  } else if (g == 1 && c->nsingle < AB_CAL_SINGLE)
    c->single[c->nsingle++] = t;
  if (c->nsingle == AB_CAL_SINGLE && c->nbatched == AB_CAL_BATCHED && !c->crossover)
    return keep_cost(b, f);
  return NULL;
}

/* A round of g >= 1 calls under the measured rule (min batch 0): batched when g reaches f's
 * crossover, else one call at a time. While f calibrates, the round's first calls run alone and
 * timed until f has its unbatched samples, and the rest (two or more) batched and timed until it
 * has its batched ones; a last call alone runs alone. */
static rx_status run_measured(rx_rt_batcher *b, const size_t *batch, size_t g) {
  ab_fn *f = &b->fns[b->calls[batch[0]].fn];
  ab_cost *c = &f->cost;
  rx_status st = NULL;
  if (c->crossover) {
    if (g >= c->crossover) return run_batch(b, batch, g);
    for (size_t k = 0; k < g && !st; k++) st = run_single(b, batch[k]);
    return st;
  }
  size_t k = 0;
  for (; k < g && !st && (c->nsingle < AB_CAL_SINGLE || g - k == 1) && !c->crossover; k++)
    st = c->nsingle < AB_CAL_SINGLE ? run_timed(b, f, &batch[k], 1) : run_single(b, batch[k]);
  if (st || k == g) return st;
  if (c->crossover) return run_measured(b, batch + k, g - k); /* calibrated by this round */
  return c->nbatched < AB_CAL_BATCHED ? run_timed(b, f, batch + k, g - k)
                                      : run_batch(b, batch + k, g - k);
}

/* One round: the policy's lead among the ready calls, the calls that join it (batch[0..*out_g));
 * run batched, or unbatched when alone (the straggler case: no stacking, no symbolic-batch
 * kernels) or, under the measured rule (run_measured), when fewer than the function's crossover. */
static rx_status run_round(rx_rt_batcher *b, const ab_ready *r, size_t *batch, size_t *out_g) {
  *out_g = 0;
  if (!r->n) return cycle(b);
  size_t lead = pick_lead(b, r->list, r->n, r->count), g = 0;
  size_t max = b->policy == RX_RT_BATCH_ONE ? 1 : b->fns[b->calls[lead].fn].max_batch;
  for (size_t k = 0; k < r->n && g < max; k++) {
    size_t i = r->list[k];
    if (i == lead || (i > lead && joins(b, &b->calls[lead], &b->calls[i]) &&
                      (b->policy != RX_RT_BATCH_DEPTH || b->depth[i] == b->depth[lead])))
      batch[g++] = i;
  }
  *out_g = g;
  if (!b->min_batch && b->policy != RX_RT_BATCH_ONE) return run_measured(b, batch, g);
  if (g >= 2 && g >= b->min_batch) return run_batch(b, batch, g);
  rx_status st = NULL;
  for (size_t k = 0; k < g && !st; k++) st = run_single(b, batch[k]);
  return st;
}

/* The FSM table of a batcher that has none: the one the artifact carries (section
 * RT_ABP_SECTION, relaxc compile --batch-policy), which must cover the functions registered, in
 * their order; else one trained on the calls submitted. */
static rx_status first_table(rx_rt_batcher *b) {
  const char *name = NULL;
  const void *data = NULL;
  size_t size = 0;
  for (size_t i = 0; rx_rt_artifact_section(b->a, i, &name, &data, &size); i++) {
    if (strcmp(name, RT_ABP_SECTION) != 0) continue;
    rx_status st = rx_rt_batcher_policy_load(b, data, size);
    if (st)
      st = base_status_annotate(st,
                                "the FSM table of the artifact's section '%s' (relaxc compile "
                                "--batch-policy)",
                                RT_ABP_SECTION);
    return st;
  }
  return rx_rt_batcher_train(b, AB_FIRST_RUN_EPISODES, 1);
}

rx_status rx_rt_batcher_run(rx_rt_batcher *b) {
  if (!b) return base_status_make(RX_ERR_INVALID, "batcher: run: the batcher is NULL");
  rx_status st = NULL;
  if (b->policy == RX_RT_BATCH_FSM && !b->fsm.action) /* the artifact's table, or the first run */
    RX_RETURN_IF_ERROR(first_table(b));               /* trains one */
  size_t n = b->ncalls ? b->ncalls : 1;
  size_t *batch = rt_alloc(b->alloc, sizeof *batch * n);
  size_t *depth = grow(b->alloc, b->depth, sizeof *depth * n);
  if (depth) b->depth = depth;
  if (!batch || !depth) st = rt_oom("a batch", sizeof *batch * n);
  for (size_t f = 0; f < b->nfns; f++) { /* this run's arenas (earlier outputs keep theirs) */
    b->fns[f].pending = 0;
    for (size_t o = 0; o < AB_MAX_OUTS; o++) {
      rx_rt_tensor_release(b->fns[f].arena[o].t);
      b->fns[f].arena[o] = (ab_arena){NULL, 0};
    }
    if (!b->fns[f].cost.crossover) b->fns[f].cost.crossover = cached_crossover(b, &b->fns[f]);
  }
  for (size_t i = 0; i < b->ncalls; i++)
    if (!b->calls[i].done) b->fns[b->calls[i].fn].pending++;
  for (size_t i = 0; i < b->ncalls && !st; i++) st = check_call_refs(b, i);
  if (!st) st = call_depths(b, b->depth); /* for the DEPTH policy and the plan */
  if (!st) st = plan_placement(b);
  ab_ready r = {0};
  if (!st) st = ready_init(b, &r);
  while (!st && r.pending) {
    size_t g = 0;
    st = run_round(b, &r, batch, &g);
    if (!st) st = ready_update(b, &r, batch, g);
  }
  ready_free(b, &r);
  rt_free(b->alloc, batch);
  return st;
}

/* The pending calls as the policy's graph (the calls already run left out). */
static rx_status make_graph(rx_rt_batcher *b, rt_abp_graph *g, size_t **bufs) {
  size_t n = 0, nd = 0;
  for (size_t i = 0; i < b->ncalls; i++) {
    if (b->calls[i].done) continue;
    n++;
    for (size_t k = 0; k < b->calls[i].nargs; k++) nd += !b->calls[i].args[k].tensor;
  }
  size_t *index = rt_alloc(b->alloc, sizeof(size_t) * (b->ncalls + 1));
  size_t *fn = rt_alloc(b->alloc, sizeof(size_t) * (n + 1));
  size_t *start = rt_alloc(b->alloc, sizeof(size_t) * (n + 1));
  size_t *deps = rt_alloc(b->alloc, sizeof(size_t) * (nd + 1));
  size_t *max = rt_alloc(b->alloc, sizeof(size_t) * (b->nfns + 1));
  bufs[0] = index, bufs[1] = fn, bufs[2] = start, bufs[3] = deps, bufs[4] = max;
  if (!index || !fn || !start || !deps || !max) return rt_oom("the calls' graph", nd);
  for (size_t i = 0, j = 0; i < b->ncalls; i++) index[i] = b->calls[i].done ? SIZE_MAX : j++;
  size_t j = 0, d = 0;
  for (size_t i = 0; i < b->ncalls; i++) {
    const ab_call *c = &b->calls[i];
    if (c->done) continue;
    fn[j] = c->fn;
    start[j++] = d;
    for (size_t k = 0; k < c->nargs; k++) {
      const rx_rt_batch_arg *a = &c->args[k];
      if (a->tensor) continue;
      if (a->call >= b->ncalls)
        return base_status_make(RX_ERR_INVALID,
                                "batcher: call %zu of '%s': argument %zu is the output of call "
                                "%zu, which was never submitted (%zu calls)",
                                i, b->fns[c->fn].name, k, a->call, b->ncalls);
      if (index[a->call] != SIZE_MAX) deps[d++] = index[a->call];
    }
  }
  start[n] = d;
  for (size_t f = 0; f < b->nfns; f++) max[f] = b->fns[f].max_batch;
  *g = (rt_abp_graph){n, b->nfns, fn, start, deps, max};
  return NULL;
}

rx_status rx_rt_batcher_train(rx_rt_batcher *b, size_t episodes, uint64_t seed) {
  if (!b) return base_status_make(RX_ERR_INVALID, "batcher: train: the batcher is NULL");
  if (b->nfns == 0 || b->nfns > RT_ABP_MAX_FNS)
    return base_status_make(RX_ERR_UNSUPPORTED,
                            "batcher: train: the FSM policy covers 1 to %d functions, not %zu",
                            RT_ABP_MAX_FNS, b->nfns);
  rt_abp_graph g;
  size_t *bufs[5] = {0};
  rx_status st = make_graph(b, &g, bufs);
  if (!st && !g.n)
    st = base_status_make(RX_ERR_INVALID, "batcher: train: no pending calls to learn from");
  if (!st) st = rt_abp_train(b->alloc, &g, episodes, seed, &b->fsm);
  for (int i = 0; i < 5; i++) rt_free(b->alloc, bufs[i]);
  return st;
}

rx_status rx_rt_batcher_policy_save(const rx_rt_batcher *b, void *buf, size_t cap,
                                    size_t *out_len) {
  if (!out_len) return base_status_make(RX_ERR_INVALID, "batcher: policy_save: out_len is NULL");
  *out_len = 0;
  if (!b) return base_status_make(RX_ERR_INVALID, "batcher: policy_save: the batcher is NULL");
  const char *names[RT_ABP_MAX_FNS];
  for (size_t f = 0; f < b->fsm.nfns && f < RT_ABP_MAX_FNS; f++) names[f] = b->fns[f].name;
  return rt_abp_save(&b->fsm, names, buf, cap, out_len);
}

rx_status rx_rt_batcher_policy_load(rx_rt_batcher *b, const void *bytes, size_t len) {
  if (!b) return base_status_make(RX_ERR_INVALID, "batcher: policy_load: the batcher is NULL");
  if (b->nfns > RT_ABP_MAX_FNS)
    return base_status_make(RX_ERR_UNSUPPORTED,
                            "batcher: policy_load: the FSM policy covers at most %d functions, "
                            "%zu registered",
                            RT_ABP_MAX_FNS, b->nfns);
  const char *names[RT_ABP_MAX_FNS];
  for (size_t f = 0; f < b->nfns; f++) names[f] = b->fns[f].name;
  return rt_abp_load(b->alloc, bytes, len, names, b->nfns, &b->fsm);
}

static const char *const policy_names[] = {"rounds", "depth", "agenda", "fsm", "one"};

const char *rx_rt_batch_policy_name(rx_rt_batch_policy p) {
  return (unsigned)p < sizeof policy_names / sizeof *policy_names ? policy_names[p] : NULL;
}

rx_status rx_rt_batcher_set_policy(rx_rt_batcher *b, rx_rt_batch_policy p) {
  if (!b) return base_status_make(RX_ERR_INVALID, "batcher: set_policy: the batcher is NULL");
  if (!rx_rt_batch_policy_name(p))
    return base_status_make(RX_ERR_INVALID, "batcher: set_policy: no policy %d (0..%d)", (int)p,
                            (int)RX_RT_BATCH_ONE);
  b->policy = p;
  return NULL;
}

rx_status rx_rt_batcher_set_min_batch(rx_rt_batcher *b, size_t n) {
  if (!b) return base_status_make(RX_ERR_INVALID, "batcher: set_min_batch: the batcher is NULL");
  if (n == 1)
    return base_status_make(RX_ERR_INVALID,
                            "batcher: set_min_batch: 1; expected 0 (measured) or 2 or more (a "
                            "batch of one call always runs unbatched)");
  b->min_batch = n;
  return NULL;
}

rx_status rx_rt_batcher_output(rx_rt_batcher *b, size_t call, size_t output,
                               rx_rt_tensor **out_tensor) {
  if (!out_tensor) return base_status_make(RX_ERR_INVALID, "batcher: out_tensor is NULL");
  *out_tensor = NULL;
  if (!b || call >= b->ncalls)
    return base_status_make(RX_ERR_INVALID, "batcher: no call %zu (%zu submitted)", call,
                            b ? b->ncalls : 0);
  ab_call *c = &b->calls[call];
  if (!c->done) return base_status_make(RX_ERR_INVALID, "batcher: call %zu has not run", call);
  if (output >= c->nouts)
    return base_status_make(RX_ERR_INVALID, "batcher: call %zu has %zu outputs, not %zu", call,
                            c->nouts, output + 1);
  ab_out *o = &c->outs[output];
  if (!o->own) RX_RETURN_IF_ERROR(row_tensor(b, o->whole, o->row, false, &o->own));
  *out_tensor = o->own;
  return NULL;
}

rx_status rx_rt_batcher_get_crossover(const rx_rt_batcher *b, const char *fn, size_t *out_g) {
  if (!out_g) return base_status_make(RX_ERR_INVALID, "batcher: get_crossover: out_g is NULL");
  *out_g = 0;
  if (!b || !fn) return base_status_make(RX_ERR_INVALID, "batcher: get_crossover: NULL argument");
  for (size_t f = 0; f < b->nfns; f++)
    if (!strcmp(b->fns[f].name, fn)) {
      *out_g = b->min_batch               ? b->min_batch
               : b->fns[f].cost.crossover ? b->fns[f].cost.crossover
                                          : cached_crossover(b, &b->fns[f]);
      return NULL;
    }
  return base_status_make(RX_ERR_NOT_FOUND, "batcher: get_crossover: no function '%s' registered",
                          fn);
}

rx_status rx_rt_batcher_set_crossover(rx_rt_batcher *b, const char *fn, size_t g) {
  if (!b || !fn) return base_status_make(RX_ERR_INVALID, "batcher: set_crossover: NULL argument");
  if (g < 2)
    return base_status_make(RX_ERR_INVALID,
                            "batcher: set_crossover: '%s': %zu; expected 2 or more (SIZE_MAX: "
                            "never batch)",
                            fn, g);
  for (size_t f = 0; f < b->nfns; f++)
    if (!strcmp(b->fns[f].name, fn)) {
      b->fns[f].cost.crossover = g;
      return NULL;
    }
  return base_status_make(RX_ERR_NOT_FOUND, "batcher: set_crossover: no function '%s' registered",
                          fn);
}

void rx_rt_batcher_get_stats(const rx_rt_batcher *b, rx_rt_batcher_stats *out_stats) {
  if (!out_stats) return;
  memset(out_stats, 0, sizeof *out_stats);
  if (b) *out_stats = b->stats;
}
