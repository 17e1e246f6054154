/* runtime/autobatch.c: the runtime batcher of independent calls (relaxc/autobatch.h).
 *
 * Calls wait in one array in submission order. A round scans the ready calls (every argument a
 * tensor or an output of a call already run), counts them per function, and asks the policy
 * (runtime/autobatch_policy.c: rounds, depth, agenda, the learned FSM, one) for the lead call;
 * it gathers every other ready call of the
 * same function whose shared arguments are the same values and whose batched arguments have the
 * same dtypes and shapes, and runs them as one call of the batched form: each batched argument is
 * a tensor [G, ...], an earlier batch's output taken whole when the calls are its rows in order,
 * else filled by one device copy per run of consecutive rows; each output [G, ...] is copied once
 * into a tensor of the batcher's own (the batched call's results may live in planned storage
 * that the next call overwrites), whose rows are the calls' outputs. Rounds repeat until every
 * call ran; no ready call while some wait means a cycle, which the error names. A batch of fewer
 * than min_batch calls (default 2: a batch of one) runs each call through the unbatched function
 * instead (run_single), its outputs tensors of their own. Every device copy is counted in the
 * stats (copies, copy_bytes), every call of a function in launches. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "autobatch_policy.h"
#include "device.h"
#include "relaxc/autobatch.h"

#define AB_MAX_PARAMS         64  /* parameters of a batched function */
#define AB_FIRST_RUN_EPISODES 300 /* the FSM's training at its first run, when not trained */

typedef struct ab_fn {
  char *name, *batched;
  size_t nparams;
  bool shared[AB_MAX_PARAMS];
  rx_dtype dtype[AB_MAX_PARAMS]; /* of the parameters: RX_DTYPE_UNKNOWN / -1: unchecked */
  int ndim[AB_MAX_PARAMS];
  size_t max_batch; /* the batched form's fact `batch <= N`, or SIZE_MAX */
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
  size_t min_batch; /* batches of fewer calls run them unbatched (>= 2) */
  rt_abp_fsm fsm;   /* the FSM policy's table (trained, loaded, or trained at the first run) */
  size_t *depth;    /* per call: 1 + the largest depth of its dependencies (DEPTH), 0: not known */
  size_t depth_cap;
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
  b->min_batch = 2;
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
  }
  rt_free(b->alloc, b->fns);
  rt_free(b->alloc, b->calls);
  rt_free(b->alloc, b->depth);
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
  b->nfns++;
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

static bool ready_call(const rx_rt_batcher *b, const ab_call *c) {
  ab_src s;
  for (size_t i = 0; i < c->nargs; i++)
    if (!resolve(b, &c->args[i], &s)) return false;
  return true;
}

/* Whether call c can join the batch led by call lead. */
static bool joins(const rx_rt_batcher *b, const ab_call *lead, const ab_call *c) {
  if (c->fn != lead->fn || c->done || !ready_call(b, c)) return false;
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

/* Row `row` of the whole [G, ...] as a tensor of its own (one device copy). */
static rx_status row_tensor(rx_rt_batcher *b, rx_rt_tensor *whole, size_t row, rx_rt_tensor **out) {
  RX_RETURN_IF_ERROR(rx_rt_tensor_create(b->dev, rx_rt_tensor_dtype(whole),
                                         rx_rt_tensor_ndim(whole) - 1,
                                         rx_rt_tensor_shape(whole) + 1, out));
  size_t n = rx_rt_tensor_bytes(*out);
  rx_status st =
      n ? ab_buffer_copy(b, rx_rt_tensor_buffer(whole), row * n, rx_rt_tensor_buffer(*out), 0, n)
        : NULL;
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
  if (!o->own) RX_RETURN_IF_ERROR(row_tensor(b, o->whole, o->row, &o->own));
  *out = o->own;
  return NULL;
}

/* Argument i of the batch's calls as one tensor [g, ...] (*out retained): the whole of one
 * earlier batch when the calls take its rows 0..g-1 in order, else a new tensor filled by one
 * device copy per run of consecutive source bytes. */
static rx_status stack(rx_rt_batcher *b, const size_t *batch, size_t g, size_t i,
                       rx_rt_tensor **out) {
  ab_src first, s;
  resolve(b, &b->calls[batch[0]].args[i], &first);
  if (first.ndim + 1 > RX_RT_MAX_NDIM)
    return base_status_make(RX_ERR_UNSUPPORTED, "batcher: argument %zu has %d dims", i, first.ndim);
  bool whole = first.is_row && rx_rt_tensor_shape(first.tensor)[0] == (int64_t)g;
  for (size_t k = 0; k < g && whole; k++) {
    resolve(b, &b->calls[batch[k]].args[i], &s);
    whole = s.is_row && s.tensor == first.tensor && s.row == k;
  }
  if (whole) {
    rx_rt_tensor_retain(first.tensor);
    *out = first.tensor;
    return NULL;
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

/* A tensor of the batcher's own with y's contents. */
static rx_status ab_copy_whole(rx_rt_batcher *b, rx_rt_tensor *y, rx_rt_tensor **out) {
  RX_RETURN_IF_ERROR(rx_rt_tensor_create(b->dev, rx_rt_tensor_dtype(y), rx_rt_tensor_ndim(y),
                                         rx_rt_tensor_shape(y), out));
  size_t n = rx_rt_tensor_bytes(y);
  rx_status st =
      n ? ab_buffer_copy(b, rx_rt_tensor_buffer(y), 0, rx_rt_tensor_buffer(*out), 0, n) : NULL;
  if (st) {
    rx_rt_tensor_release(*out);
    *out = NULL;
  }
  return st;
}

/* The batched call's result (a tensor or a tuple of tensors [g, ...]): each copied once into a
 * whole of the batcher's own, whose rows become the calls' outputs. */
static rx_status split(rx_rt_batcher *b, const size_t *batch, size_t g, rx_rt_value *res) {
  bool tuple = rx_rt_value_kind_of(res) == RX_RT_VALUE_TUPLE;
  size_t nouts = tuple ? rx_rt_value_tuple_size(res) : 1;
  const char *name = b->fns[b->calls[batch[0]].fn].batched;
  for (size_t k = 0; k < g; k++) {
    ab_call *c = &b->calls[batch[k]];
    c->outs = rt_alloc(b->alloc, sizeof *c->outs * (nouts ? nouts : 1));
    if (!c->outs) return rt_oom("a call's outputs", sizeof *c->outs * nouts);
    c->done = true; /* undone by drop_outs when this fails */
  }
  for (size_t o = 0; o < nouts; o++) {
    const rx_rt_value *v = tuple ? rx_rt_value_tuple_item(res, o) : res;
    rx_rt_tensor *y = v ? rx_rt_value_tensor(v) : NULL, *w = NULL;
    if (!y)
      return base_status_make(
          RX_ERR_UNSUPPORTED,
          "batcher: '%s': output %zu is not a tensor (only tensors and tuples of "
          "tensors are split)",
          name, o);
    if (rx_rt_tensor_ndim(y) < 1 || rx_rt_tensor_shape(y)[0] != (int64_t)g)
      return base_status_make(RX_ERR_INVALID, "batcher: '%s': output %zu has no leading dim of %zu",
                              name, o, g);
    RX_RETURN_IF_ERROR(ab_copy_whole(b, y, &w));
    for (size_t k = 0; k < g; k++) {
      ab_call *c = &b->calls[batch[k]];
      rx_rt_tensor_retain(w);
      c->outs[o] = (ab_out){w, k, NULL};
      c->nouts = o + 1;
    }
    rx_rt_tensor_release(w);
  }
  return NULL;
}

/* Runs the batch of calls batch[0..g) as one call of their batched form. */
static rx_status run_batch(rx_rt_batcher *b, const size_t *batch, size_t g) {
  const ab_fn *f = &b->fns[b->calls[batch[0]].fn];
  rx_rt_tensor *in[AB_MAX_PARAMS] = {0};
  bool owned[AB_MAX_PARAMS] = {0};
  rx_status st = NULL;
  for (size_t i = 0; i < f->nparams && !st; i++) {
    for (size_t k = 0; k < g && !st; k++) {
      ab_src s;
      resolve(b, &b->calls[batch[k]].args[i], &s);
      st = check_arg(f, i, s.dtype, s.ndim, batch[k]);
    }
    if (st) break;
    if (f->shared[i]) {
      st = shared_tensor(b, &b->calls[batch[0]].args[i], &in[i]);
    } else {
      st = stack(b, batch, g, i, &in[i]);
      owned[i] = !st;
    }
  }
  rx_rt_value *res = NULL;
  if (!st) st = rx_rt_vm_call(b->a, f->batched, in, f->nparams, &res);
  if (!st) st = split(b, batch, g, res);
  if (st) /* a batch that failed half-way: its outputs dropped, the calls stay pending */
    for (size_t k = 0; k < g; k++) drop_outs(b, &b->calls[batch[k]]);
  rx_rt_value_release(res);
  for (size_t i = 0; i < f->nparams; i++)
    if (owned[i]) rx_rt_tensor_release(in[i]);
  if (!st) {
    b->stats.calls += g;
    b->stats.batched_calls++;
    b->stats.launches++;
    if (g > b->stats.max_batch) b->stats.max_batch = g;
  }
  return st;
}

/* Runs call i alone through its unbatched function (a round of one ready call, or the ONE
 * policy): no stacking, and an argument that is an earlier unbatched call's output is passed as
 * is. Each output is copied once out of the VM's planned storage into a tensor of the batcher's
 * own, which is both the output's whole and its own (resolve() then sees a plain tensor). */
static rx_status run_single(rx_rt_batcher *b, size_t i) {
  ab_call *c = &b->calls[i];
  const ab_fn *f = &b->fns[c->fn];
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
    rx_rt_tensor *y = v ? rx_rt_value_tensor(v) : NULL, *w = NULL;
    if (!y)
      st = base_status_make(RX_ERR_UNSUPPORTED, "batcher: '%s': output %zu is not a tensor",
                            f->name, o);
    if (!st) st = ab_copy_whole(b, y, &w);
    if (!st) {
      rx_rt_tensor_retain(w);
      c->outs[o] = (ab_out){w, 0, w};
      c->nouts = o + 1;
    }
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

/* Every argument names a call that exists and, once run, an output it has. */
static rx_status check_refs(const rx_rt_batcher *b) {
  for (size_t i = 0; i < b->ncalls; i++) {
    const ab_call *c = &b->calls[i];
    for (size_t k = 0; k < c->nargs; k++) {
      const rx_rt_batch_arg *a = &c->args[k];
      if (a->tensor) continue;
      if (a->call >= b->ncalls)
        return base_status_make(
            RX_ERR_INVALID,
            "batcher: call %zu of '%s': argument %zu is the output of call %zu, "
            "which was never submitted (%zu calls)",
            i, b->fns[c->fn].name, k, a->call, b->ncalls);
      const ab_call *d = &b->calls[a->call];
      if (d->done && a->output >= d->nouts)
        return base_status_make(
            RX_ERR_INVALID,
            "batcher: call %zu of '%s': argument %zu is output %zu of call %zu, "
            "which has %zu outputs",
            i, b->fns[c->fn].name, k, a->output, a->call, d->nouts);
    }
  }
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

/* Depth (DEPTH): 1 + the largest depth of the call's dependencies, known once they ran. */
static size_t call_depth(rx_rt_batcher *b, size_t i) {
  if (!b->depth[i]) {
    size_t d = 0;
    const ab_call *c = &b->calls[i];
    for (size_t k = 0; k < c->nargs; k++)
      if (!c->args[k].tensor && b->depth[c->args[k].call] > d) d = b->depth[c->args[k].call];
    b->depth[i] = d + 1;
  }
  return b->depth[i];
}

/* The round's lead: the call whose function (and, under DEPTH, whose depth) the batch takes,
 * chosen by the policy among the ready calls ready[0..nready) (submission order) whose counts per
 * function are count[]. */
static size_t pick_lead(rx_rt_batcher *b, const size_t *ready, size_t nready, const size_t *count) {
  if (b->policy == RX_RT_BATCH_ONE || b->policy == RX_RT_BATCH_ROUNDS) return ready[0];
  if (b->policy == RX_RT_BATCH_DEPTH) {
    size_t lead = ready[0];
    for (size_t k = 1; k < nready; k++)
      if (call_depth(b, ready[k]) < call_depth(b, lead)) lead = ready[k];
    return lead;
  }
  size_t f = rt_abp_choose(b->policy, &b->fsm, count, b->nfns, b->calls[ready[0]].fn);
  for (size_t k = 0; k < nready; k++)
    if (b->calls[ready[k]].fn == f) return ready[k];
  return ready[0];
}

/* One round: the ready calls, the policy's lead, the calls that join it; run batched, or
 * unbatched when alone (the straggler case: no stacking, no symbolic-batch kernels). */
static rx_status run_round(rx_rt_batcher *b, size_t first, size_t *ready, size_t *batch,
                           size_t *count) {
  size_t nready = 0;
  memset(count, 0, sizeof *count * b->nfns);
  for (size_t i = first; i < b->ncalls; i++)
    if (!b->calls[i].done && ready_call(b, &b->calls[i])) {
      ready[nready++] = i;
      count[b->calls[i].fn]++;
      call_depth(b, i);
    }
  if (!nready) return cycle(b);
  size_t lead = pick_lead(b, ready, nready, count), g = 0;
  size_t max = b->policy == RX_RT_BATCH_ONE ? 1 : b->fns[b->calls[lead].fn].max_batch;
  for (size_t k = 0; k < nready && g < max; k++) {
    size_t i = ready[k];
    if (i == lead || (i > lead && joins(b, &b->calls[lead], &b->calls[i]) &&
                      (b->policy != RX_RT_BATCH_DEPTH || b->depth[i] == b->depth[lead])))
      batch[g++] = i;
  }
  if (g >= b->min_batch) return run_batch(b, batch, g);
  rx_status st = NULL;
  for (size_t k = 0; k < g && !st; k++) st = run_single(b, batch[k]);
  return st;
}

rx_status rx_rt_batcher_run(rx_rt_batcher *b) {
  if (!b) return base_status_make(RX_ERR_INVALID, "batcher: run: the batcher is NULL");
  rx_status st = NULL;
  if (b->policy == RX_RT_BATCH_FSM && !b->fsm.action) /* the first run trains the table */
    RX_RETURN_IF_ERROR(rx_rt_batcher_train(b, AB_FIRST_RUN_EPISODES, 1));
  size_t n = b->ncalls ? b->ncalls : 1, nf = b->nfns ? b->nfns : 1;
  size_t *batch = rt_alloc(b->alloc, sizeof *batch * n),
         *ready = rt_alloc(b->alloc, sizeof *ready * n);
  size_t *count = rt_alloc(b->alloc, sizeof *count * nf);
  size_t cap = b->depth_cap;
  if (batch && ready && count && rt_grow(b->alloc, (void **)&b->depth, &cap, n, sizeof *b->depth)) {
    memset(b->depth + b->depth_cap, 0, sizeof *b->depth * (cap - b->depth_cap));
    b->depth_cap = cap;
  } else {
    st = rt_oom("a batch", sizeof *batch * n);
  }
  size_t first = 0; /* calls before it are done */
  while (!st) {
    while (first < b->ncalls && b->calls[first].done) first++;
    if (first == b->ncalls) break;
    if ((st = check_refs(b))) break; /* output indices: checked once their producer ran */
    st = run_round(b, first, ready, batch, count);
  }
  rt_free(b->alloc, batch);
  rt_free(b->alloc, ready);
  rt_free(b->alloc, count);
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
  if (n < 2)
    return base_status_make(RX_ERR_INVALID,
                            "batcher: set_min_batch: %zu; expected 2 or more (a batch of one call "
                            "always runs unbatched)",
                            n);
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
  if (!o->own) RX_RETURN_IF_ERROR(row_tensor(b, o->whole, o->row, &o->own));
  *out_tensor = o->own;
  return NULL;
}

void rx_rt_batcher_get_stats(const rx_rt_batcher *b, rx_rt_batcher_stats *out_stats) {
  if (!out_stats) return;
  memset(out_stats, 0, sizeof *out_stats);
  if (b) *out_stats = b->stats;
}
