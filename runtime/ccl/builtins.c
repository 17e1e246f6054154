/* runtime/ccl/builtins.c: the collective builtins (rx_ccl_allreduce, rx_ccl_allgather,
 * rx_ccl_reduce_scatter, rx_ccl_broadcast, rx_ccl_send, rx_ccl_recv) that per-rank programs
 * reach through CALL_EXTERN (runtime/externs.c), on the communicator attached to the artifact
 * (rx_rt_artifact_set_comm). Arguments and results: docs/distributed.md.
 *
 * Each stages through host memory: the tensor is read (which waits for the kernels before it),
 * the collective runs on the host buffer, and the result is a new tensor on the device. Before
 * the data, the ranks check that they agree on the call (dtype, shape, axis, op, root) with one
 * small allreduce, so that a mismatch is an error on every rank, never a hang or a truncated
 * message. With no communicator the world has one rank: the collectives copy, send and recv are
 * errors. */
#include "runtime/ccl/ccl.h"

#include <stdlib.h>
#include <string.h>

/* ---- arguments ---- */
static rx_status want_args(const vm_extern_call *c, size_t nargs, size_t want) {
  if (nargs != want)
    return base_status_make(RX_ERR_INVALID, "%s takes %zu arguments, got %zu", c->name, want,
                            nargs);
  return NULL;
}

static rx_status arg_tensor(const vm_extern_call *c, rx_rt_value *const *args, size_t i,
                            rx_rt_tensor **out) {
  if (args[i]->kind != RX_RT_VALUE_TENSOR)
    return base_status_make(RX_ERR_INVALID, "%s: argument %zu must be a tensor, got %s", c->name,
                            i + 1, vm_kind_name(args[i]));
  *out = args[i]->tensor;
  return NULL;
}

static rx_status need_device(const vm_extern_call *c) {
  if (!c->device) return base_status_make(RX_ERR_INVALID, "%s: no device", c->name);
  return NULL;
}

/* the tensor's elements on the host (free with free) */
static rx_status read_host(rx_rt_tensor *t, void **out) {
  size_t bytes = rx_rt_tensor_bytes(t);
  void *buf = malloc(bytes ? bytes : 1);
  if (!buf) return rt_oom("a collective's host copy", bytes);
  rx_status s = bytes ? rx_rt_tensor_read(t, buf, bytes) : NULL;
  if (s) {
    free(buf);
    return base_status_annotate(s, "reading its argument");
  }
  *out = buf;
  return NULL;
}

/* *result: a new tensor of that type on the call's device, holding data */
static rx_status make_result(const vm_extern_call *c, rx_dtype dtype, int ndim,
                             const int64_t *shape, const void *data, rx_rt_value **result) {
  rx_rt_tensor *t = NULL;
  RX_RETURN_IF_ERROR(rx_rt_tensor_from_host(c->device, dtype, ndim, shape, data, &t));
  rx_status s = rx_rt_value_from_tensor(t, result);
  rx_rt_tensor_release(t);
  return s;
}

static void type_text(char *buf, size_t n, const rx_rt_tensor *t) {
  vm_format_type(buf, n, rx_rt_tensor_dtype(t), rx_rt_tensor_ndim(t), rx_rt_tensor_shape(t));
}

/* FNV-1a over the call's description: what the ranks must agree on */
static int64_t call_key(const rx_rt_tensor *t, int64_t a, int64_t b) {
  uint64_t h = 1469598103934665603ull;
  int64_t words[RX_RT_MAX_NDIM + 4];
  int nd = rx_rt_tensor_ndim(t), n = 0;
  words[n++] = rx_rt_tensor_dtype(t);
  words[n++] = nd;
  for (int i = 0; i < nd; i++) words[n++] = rx_rt_tensor_shape(t)[i];
  words[n++] = a;
  words[n++] = b;
  const uint8_t *p = (const uint8_t *)words;
  for (size_t i = 0; i < (size_t)n * sizeof words[0]; i++) h = (h ^ p[i]) * 1099511628211ull;
  return (int64_t)h;
}

/* Every rank passed the same call (a collective); else an error on each naming its tensor. */
static rx_status agree(const vm_extern_call *c, rx_rt_comm *comm, const rx_rt_tensor *t,
                       const char *what, int64_t a, int64_t b) {
  bool same = false;
  RX_RETURN_IF_ERROR(rt_ccl_same(comm, call_key(t, a, b), &same));
  if (same) return NULL;
  char ty[128];
  type_text(ty, sizeof ty, t);
  return base_status_make(RX_ERR_INVALID,
                          "the ranks disagree on the call: rank %d passes %s, %s; every rank "
                          "must pass the same dtype, shape and arguments",
                          rx_rt_comm_rank(comm), ty, what);
}

static rx_rt_comm *comm_of(const vm_extern_call *c) {
  return c->artifact ? rx_rt_artifact_comm(c->artifact) : NULL;
}

/* outer = product of dims before axis, inner = product after (elements) */
static void split_at(const rx_rt_tensor *t, int axis, size_t *outer, size_t *inner) {
  const int64_t *d = rx_rt_tensor_shape(t);
  *outer = *inner = 1;
  for (int i = 0; i < axis; i++) *outer *= (size_t)d[i];
  for (int i = axis + 1; i < rx_rt_tensor_ndim(t); i++) *inner *= (size_t)d[i];
}

/* A call's clock starts once the kernels queued before it are done: with host staging the
 * read of its tensor (or recv's upload) would wait for them there, and their time is the
 * forward's, not communication. With NCCL the collective is queued in the stream's order and
 * nothing waits: its time is the host's, queueing it. */
static void start_clock(const vm_extern_call *c, rx_rt_comm *comm, double *t0) {
  /* a device error here comes back at the read, after the ranks have agreed (as without this
   * wait), so that no rank returns while the others wait for it in the agreement */
  if (comm && c->device && !rt_nccl_on(comm, c->device))
    rx_status_free(rx_rt_device_synchronize(c->device));
  *t0 = rt_ccl_now();
}

/* the call counted on the communicator (rx_rt_comm_counter_of): kind, its tensor's bytes */
static rx_status finish(rx_rt_comm *comm, rx_ccl_kind kind, size_t bytes, double t0, rx_status s) {
  if (comm) rt_ccl_account(comm, kind, bytes, rt_ccl_now() - t0);
  return s;
}

/* ---- on the device, with NCCL (rt_nccl_on): no staging through host memory ---- */
static rx_status wrap(rx_rt_tensor *t, rx_status s, rx_rt_value **result) {
  if (!s) s = rx_rt_value_from_tensor(t, result);
  rx_rt_tensor_release(t);
  return s;
}

/* n blocks of bytes each: block (i, j) of src ([a][b] blocks) to block (j, i) of dst */
static rx_status transpose_blocks(rx_rt_buffer *src, rx_rt_buffer *dst, size_t a, size_t b,
                                  size_t bytes) {
  for (size_t i = 0; i < a && bytes; i++)
    for (size_t j = 0; j < b; j++)
      RX_RETURN_IF_ERROR(
          rx_rt_buffer_copy(src, (i * b + j) * bytes, dst, (j * a + i) * bytes, bytes));
  return NULL;
}

static rx_status dev_allreduce(const vm_extern_call *c, rx_rt_comm *comm, rx_rt_tensor *x,
                               int64_t op, rx_rt_value **result) {
  rx_dtype dt = rx_rt_tensor_dtype(x);
  rx_rt_tensor *out = NULL;
  RX_RETURN_IF_ERROR(
      rx_rt_tensor_create(c->device, dt, rx_rt_tensor_ndim(x), rx_rt_tensor_shape(x), &out));
  return wrap(out,
              rt_nccl_allreduce(comm, rx_rt_tensor_buffer(x), rx_rt_tensor_buffer(out),
                                rx_rt_tensor_bytes(x) / rx_rt_dtype_size(dt), dt, (rt_ccl_op)op),
              result);
}

/* gathered into out (outer 1) or into a buffer of [w][outer][row] transposed into out */
static rx_status dev_allgather(const vm_extern_call *c, rx_rt_comm *comm, rx_rt_tensor *x,
                               const int64_t *shape, size_t outer, rx_rt_value **result) {
  int w = rx_rt_comm_size(comm);
  size_t bytes = rx_rt_tensor_bytes(x);
  rx_rt_tensor *out = NULL;
  rx_rt_buffer *tmp = NULL;
  RX_RETURN_IF_ERROR(
      rx_rt_tensor_create(c->device, rx_rt_tensor_dtype(x), rx_rt_tensor_ndim(x), shape, &out));
  rx_status s = NULL;
  if (outer == 1)
    s = rt_nccl_allgather(comm, rx_rt_tensor_buffer(x), rx_rt_tensor_buffer(out), bytes);
  else {
    s = rx_rt_buffer_alloc(c->device, bytes * (size_t)w, &tmp);
    if (!s) s = rt_nccl_allgather(comm, rx_rt_tensor_buffer(x), tmp, bytes);
    if (!s) s = transpose_blocks(tmp, rx_rt_tensor_buffer(out), (size_t)w, outer, bytes / outer);
    rx_rt_buffer_release(tmp);
  }
  return wrap(out, s, result);
}

/* x ([outer][w][blk]) transposed into [w][outer][blk] where outer > 1, then reduce-scattered */
static rx_status dev_reduce_scatter(const vm_extern_call *c, rx_rt_comm *comm, rx_rt_tensor *x,
                                    const int64_t *shape, size_t outer, int64_t op,
                                    rx_rt_value **result) {
  int w = rx_rt_comm_size(comm);
  rx_dtype dt = rx_rt_tensor_dtype(x);
  size_t bytes = rx_rt_tensor_bytes(x), count = bytes / rx_rt_dtype_size(dt) / (size_t)w;
  rx_rt_tensor *out = NULL;
  rx_rt_buffer *src = rx_rt_tensor_buffer(x), *tmp = NULL;
  RX_RETURN_IF_ERROR(rx_rt_tensor_create(c->device, dt, rx_rt_tensor_ndim(x), shape, &out));
  rx_status s = NULL;
  if (outer > 1) {
    s = rx_rt_buffer_alloc(c->device, bytes, &tmp);
    if (!s) s = transpose_blocks(src, tmp, outer, (size_t)w, bytes / outer / (size_t)w);
    src = tmp;
  }
  if (!s) s = rt_nccl_reduce_scatter(comm, src, rx_rt_tensor_buffer(out), count, dt, (rt_ccl_op)op);
  rx_rt_buffer_release(tmp);
  return wrap(out, s, result);
}

static rx_status dev_broadcast(const vm_extern_call *c, rx_rt_comm *comm, rx_rt_tensor *x,
                               int64_t root, rx_rt_value **result) {
  rx_rt_tensor *out = NULL;
  RX_RETURN_IF_ERROR(rx_rt_tensor_create(c->device, rx_rt_tensor_dtype(x), rx_rt_tensor_ndim(x),
                                         rx_rt_tensor_shape(x), &out));
  return wrap(out,
              rt_nccl_bcast(comm, rx_rt_tensor_buffer(x), rx_rt_tensor_buffer(out),
                            rx_rt_tensor_bytes(x), (int)root),
              result);
}

/* ---- rx_ccl_allreduce(x, prim(op)) ---- */
rx_status rt_ccl_builtin_allreduce(const vm_extern_call *c, rx_rt_value *const *args, size_t nargs,
                                   rx_rt_value **result) {
  rx_rt_tensor *x = NULL;
  int64_t op = 0;
  RX_RETURN_IF_ERROR(want_args(c, nargs, 2));
  RX_RETURN_IF_ERROR(need_device(c));
  RX_RETURN_IF_ERROR(arg_tensor(c, args, 0, &x));
  RX_RETURN_IF_ERROR(vm_extern_arg_int(c, args, 1, "op (0 sum, 1 max)", 0, 1, &op));
  rx_dtype dt = rx_rt_tensor_dtype(x);
  if (!rt_ccl_reducible(dt))
    return base_status_make(RX_ERR_UNSUPPORTED, "%s: %s: expected f32, f16, bf16, f64, i32 or i64",
                            c->name, rx_rt_dtype_name(dt));
  rx_rt_comm *comm = comm_of(c);
  double t0 = 0;
  start_clock(c, comm, &t0);
  void *buf = NULL;
  rx_status s = comm ? agree(c, comm, x, op ? "op max" : "op sum", op, 0) : NULL;
  if (!s && rt_nccl_on(comm, c->device))
    return finish(comm, RX_CCL_ALLREDUCE, rx_rt_tensor_bytes(x), t0,
                  base_status_annotate(dev_allreduce(c, comm, x, op, result), "%s", c->name));
  if (!s) s = read_host(x, &buf);
  if (!s && comm)
    s = rt_ccl_allreduce(comm, buf, rx_rt_tensor_bytes(x) / rx_rt_dtype_size(dt), dt,
                         (rt_ccl_op)op);
  if (!s) s = make_result(c, dt, rx_rt_tensor_ndim(x), rx_rt_tensor_shape(x), buf, result);
  free(buf);
  return finish(comm, RX_CCL_ALLREDUCE, rx_rt_tensor_bytes(x), t0,
                s ? base_status_annotate(s, "%s", c->name) : NULL);
}

static rx_status axis_arg(const vm_extern_call *c, rx_rt_value *const *args, size_t i,
                          const rx_rt_tensor *x, int64_t *axis) {
  int nd = rx_rt_tensor_ndim(x);
  if (nd == 0)
    return base_status_make(RX_ERR_INVALID, "%s: a scalar tensor has no axis to split", c->name);
  return vm_extern_arg_int(c, args, i, "axis", 0, nd - 1, axis);
}

/* ---- rx_ccl_allgather(x, prim(axis)) ---- */
rx_status rt_ccl_builtin_allgather(const vm_extern_call *c, rx_rt_value *const *args, size_t nargs,
                                   rx_rt_value **result) {
  rx_rt_tensor *x = NULL;
  int64_t axis = 0;
  RX_RETURN_IF_ERROR(want_args(c, nargs, 2));
  RX_RETURN_IF_ERROR(need_device(c));
  RX_RETURN_IF_ERROR(arg_tensor(c, args, 0, &x));
  RX_RETURN_IF_ERROR(axis_arg(c, args, 1, x, &axis));
  rx_rt_comm *comm = comm_of(c);
  int w = comm ? rx_rt_comm_size(comm) : 1;
  double t0 = 0;
  start_clock(c, comm, &t0);
  size_t bytes = rx_rt_tensor_bytes(x), outer = 1, inner = 1;
  split_at(x, (int)axis, &outer, &inner);
  void *buf = NULL;
  uint8_t *all = NULL, *out = NULL;
  rx_status s = comm ? agree(c, comm, x, "the same axis", axis, 0) : NULL;
  if (!s && rt_nccl_on(comm, c->device)) {
    int64_t shape[RX_RT_MAX_NDIM];
    memcpy(shape, rx_rt_tensor_shape(x), sizeof shape[0] * (size_t)rx_rt_tensor_ndim(x));
    shape[axis] *= w;
    s = dev_allgather(c, comm, x, shape, outer, result);
    return finish(comm, RX_CCL_ALLGATHER, bytes, t0, base_status_annotate(s, "%s", c->name));
  }
  if (!s) s = read_host(x, &buf);
  if (!s && !(all = malloc(bytes * (size_t)w + 1)))
    s = rt_oom("allgather's blocks", bytes * (size_t)w);
  if (!s && !(out = malloc(bytes * (size_t)w + 1)))
    s = rt_oom("allgather's result", bytes * (size_t)w);
  if (!s) s = comm ? rt_ccl_allgather(comm, buf, all, bytes) : NULL;
  if (!s && !comm) memcpy(all, buf, bytes);
  if (!s) {
    /* all holds [w][outer][d*inner]; the result is [outer][w][d*inner] */
    size_t row = bytes / (outer ? outer : 1);
    for (size_t o = 0; o < outer && row; o++)
      for (int r = 0; r < w; r++)
        memcpy(out + (o * (size_t)w + (size_t)r) * row, all + (size_t)r * bytes + o * row, row);
    int64_t shape[RX_RT_MAX_NDIM];
    memcpy(shape, rx_rt_tensor_shape(x), sizeof shape[0] * (size_t)rx_rt_tensor_ndim(x));
    shape[axis] *= w;
    s = make_result(c, rx_rt_tensor_dtype(x), rx_rt_tensor_ndim(x), shape, out, result);
  }
  (void)inner;
  free(buf);
  free(all);
  free(out);
  return finish(comm, RX_CCL_ALLGATHER, bytes, t0,
                s ? base_status_annotate(s, "%s", c->name) : NULL);
}

/* ---- rx_ccl_reduce_scatter(x, prim(axis), prim(op)) ---- */
rx_status rt_ccl_builtin_reduce_scatter(const vm_extern_call *c, rx_rt_value *const *args,
                                        size_t nargs, rx_rt_value **result) {
  rx_rt_tensor *x = NULL;
  int64_t axis = 0, op = 0;
  RX_RETURN_IF_ERROR(want_args(c, nargs, 3));
  RX_RETURN_IF_ERROR(need_device(c));
  RX_RETURN_IF_ERROR(arg_tensor(c, args, 0, &x));
  RX_RETURN_IF_ERROR(axis_arg(c, args, 1, x, &axis));
  RX_RETURN_IF_ERROR(vm_extern_arg_int(c, args, 2, "op (0 sum, 1 max)", 0, 1, &op));
  rx_dtype dt = rx_rt_tensor_dtype(x);
  if (!rt_ccl_reducible(dt))
    return base_status_make(RX_ERR_UNSUPPORTED, "%s: %s: expected f32, f16, bf16, f64, i32 or i64",
                            c->name, rx_rt_dtype_name(dt));
  rx_rt_comm *comm = comm_of(c);
  int w = comm ? rx_rt_comm_size(comm) : 1;
  int64_t dim = rx_rt_tensor_shape(x)[axis];
  if (dim % w) {
    char ty[128];
    type_text(ty, sizeof ty, x);
    return base_status_make(RX_ERR_INVALID,
                            "%s: %s: dim %lld (%lld) is not divisible by the world size %d",
                            c->name, ty, (long long)axis, (long long)dim, w);
  }
  double t0 = 0;
  start_clock(c, comm, &t0);
  size_t bytes = rx_rt_tensor_bytes(x), outer = 1, inner = 1, es = rx_rt_dtype_size(dt);
  split_at(x, (int)axis, &outer, &inner);
  size_t blk = (size_t)(dim / w) * inner * es; /* bytes of one rank's block in one outer row */
  void *buf = NULL;
  uint8_t *packed = NULL, *out = NULL;
  rx_status s = comm ? agree(c, comm, x, op ? "op max" : "op sum", axis, op) : NULL;
  if (!s && rt_nccl_on(comm, c->device)) {
    int64_t shape[RX_RT_MAX_NDIM];
    memcpy(shape, rx_rt_tensor_shape(x), sizeof shape[0] * (size_t)rx_rt_tensor_ndim(x));
    shape[axis] /= w;
    s = dev_reduce_scatter(c, comm, x, shape, outer, op, result);
    return finish(comm, RX_CCL_REDUCE_SCATTER, bytes, t0, base_status_annotate(s, "%s", c->name));
  }
  if (!s) s = read_host(x, &buf);
  if (!s && !(packed = malloc(bytes + 1))) s = rt_oom("reduce_scatter's blocks", bytes);
  if (!s && !(out = malloc(bytes / (size_t)w + 1))) s = rt_oom("reduce_scatter's result", bytes);
  if (!s) {
    /* x is [outer][w][blk]; MPI wants [w][outer][blk] (rank r's block contiguous) */
    for (int r = 0; r < w; r++)
      for (size_t o = 0; o < outer && blk; o++)
        memcpy(packed + ((size_t)r * outer + o) * blk,
               (uint8_t *)buf + (o * (size_t)w + (size_t)r) * blk, blk);
    size_t count = outer * blk / es;
    if (comm)
      s = rt_ccl_reduce_scatter(comm, packed, out, count, dt, (rt_ccl_op)op);
    else
      memcpy(out, packed, count * es);
  }
  if (!s) {
    int64_t shape[RX_RT_MAX_NDIM];
    memcpy(shape, rx_rt_tensor_shape(x), sizeof shape[0] * (size_t)rx_rt_tensor_ndim(x));
    shape[axis] /= w;
    s = make_result(c, dt, rx_rt_tensor_ndim(x), shape, out, result);
  }
  free(buf);
  free(packed);
  free(out);
  return finish(comm, RX_CCL_REDUCE_SCATTER, bytes, t0,
                s ? base_status_annotate(s, "%s", c->name) : NULL);
}

/* ---- rx_ccl_broadcast(x, prim(root)) ---- */
rx_status rt_ccl_builtin_broadcast(const vm_extern_call *c, rx_rt_value *const *args, size_t nargs,
                                   rx_rt_value **result) {
  rx_rt_tensor *x = NULL;
  int64_t root = 0;
  RX_RETURN_IF_ERROR(want_args(c, nargs, 2));
  RX_RETURN_IF_ERROR(need_device(c));
  RX_RETURN_IF_ERROR(arg_tensor(c, args, 0, &x));
  rx_rt_comm *comm = comm_of(c);
  int w = comm ? rx_rt_comm_size(comm) : 1;
  RX_RETURN_IF_ERROR(vm_extern_arg_int(c, args, 1, "root", 0, w - 1, &root));
  double t0 = 0;
  start_clock(c, comm, &t0);
  void *buf = NULL;
  rx_status s = comm ? agree(c, comm, x, "the same root", root, 0) : NULL;
  if (!s && rt_nccl_on(comm, c->device))
    return finish(comm, RX_CCL_BROADCAST, rx_rt_tensor_bytes(x), t0,
                  base_status_annotate(dev_broadcast(c, comm, x, root, result), "%s", c->name));
  if (!s) s = read_host(x, &buf);
  if (!s && comm) s = rt_ccl_bcast(comm, buf, rx_rt_tensor_bytes(x), (int)root);
  if (!s)
    s = make_result(c, rx_rt_tensor_dtype(x), rx_rt_tensor_ndim(x), rx_rt_tensor_shape(x), buf,
                    result);
  free(buf);
  return finish(comm, RX_CCL_BROADCAST, rx_rt_tensor_bytes(x), t0,
                s ? base_status_annotate(s, "%s", c->name) : NULL);
}

/* send and recv need a communicator and a peer other than this rank */
static rx_status peer_arg(const vm_extern_call *c, rx_rt_value *const *args, size_t i,
                          rx_rt_comm **out_comm, int64_t *peer) {
  rx_rt_comm *comm = comm_of(c);
  if (!comm)
    return base_status_make(RX_ERR_INVALID,
                            "%s: the artifact has no communicator (a world of one rank has no "
                            "peer): rx_rt_artifact_set_comm",
                            c->name);
  RX_RETURN_IF_ERROR(vm_extern_arg_int(c, args, i, "peer", 0, rx_rt_comm_size(comm) - 1, peer));
  if (*peer == rx_rt_comm_rank(comm))
    return base_status_make(RX_ERR_INVALID, "%s: peer %lld is this rank", c->name,
                            (long long)*peer);
  *out_comm = comm;
  return NULL;
}

/* A message: dtype, ndim, the dims (int64 each), then the elements. */
#define MSG_HEADER(ndim) ((size_t)(2 + (ndim)) * sizeof(int64_t))

/* ---- rx_ccl_send(x, prim(peer)) ---- */
rx_status rt_ccl_builtin_send(const vm_extern_call *c, rx_rt_value *const *args, size_t nargs,
                              rx_rt_value **result) {
  rx_rt_tensor *x = NULL;
  rx_rt_comm *comm = NULL;
  int64_t peer = 0;
  RX_RETURN_IF_ERROR(want_args(c, nargs, 2));
  RX_RETURN_IF_ERROR(arg_tensor(c, args, 0, &x));
  RX_RETURN_IF_ERROR(peer_arg(c, args, 1, &comm, &peer));
  double t0 = 0;
  start_clock(c, comm, &t0);
  int nd = rx_rt_tensor_ndim(x);
  size_t bytes = rx_rt_tensor_bytes(x), hdr = MSG_HEADER(nd);
  uint8_t *msg = malloc(hdr + bytes);
  if (!msg) return rt_oom("a message", hdr + bytes);
  int64_t *h = (int64_t *)msg;
  h[0] = rx_rt_tensor_dtype(x);
  h[1] = nd;
  memcpy(h + 2, rx_rt_tensor_shape(x), sizeof(int64_t) * (size_t)nd);
  /* with NCCL the header goes over MPI and the elements over NCCL, device to device */
  bool dev = rt_nccl_on(comm, c->device);
  rx_status s = bytes && !dev ? rx_rt_tensor_read(x, msg + hdr, bytes) : NULL;
  if (!s) s = rt_ccl_send(comm, msg, hdr + (dev ? 0 : bytes), (int)peer);
  if (!s && dev) s = rt_nccl_send(comm, rx_rt_tensor_buffer(x), bytes, (int)peer);
  free(msg);
  if (!s) {
    rx_rt_value_retain(args[0]);
    *result = args[0];
  }
  return finish(comm, RX_CCL_SEND, bytes, t0,
                s ? base_status_annotate(s, "%s to rank %lld", c->name, (long long)peer) : NULL);
}

/* The message msg (got bytes) from peer checked against the type expected, and the elements:
 * from the message, or with NCCL received on the device after it (drained into a scratch
 * buffer when the types differ, so that the sender's NCCL send completes). */
static rx_status receive(const vm_extern_call *c, rx_rt_comm *comm, int peer, rx_dtype dtype,
                         int nd, const int64_t *shape, const void *msg, size_t got,
                         rx_rt_value **result) {
  bool dev = rt_nccl_on(comm, c->device);
  char want[128], have[128] = "a malformed message";
  vm_format_type(want, sizeof want, dtype, nd, shape);
  const int64_t *h = msg;
  size_t bytes = rx_rt_dtype_size(dtype), sent = 0;
  for (int i = 0; i < nd; i++) bytes *= (size_t)shape[i];
  bool valid = got >= MSG_HEADER(0) && h[1] >= 0 && h[1] <= RX_RT_MAX_NDIM &&
               got >= MSG_HEADER(h[1]) && h[0] > 0 && h[0] < RX_DTYPE_COUNT;
  if (valid) {
    vm_format_type(have, sizeof have, (rx_dtype)h[0], (int)h[1], h + 2);
    sent = rx_rt_dtype_size((rx_dtype)h[0]);
    for (int i = 0; i < h[1]; i++) sent *= (size_t)h[2 + i];
  }
  bool ok = valid && h[0] == dtype && h[1] == nd &&
            !memcmp(h + 2, shape, sizeof(int64_t) * (size_t)nd) &&
            got == MSG_HEADER(nd) + (dev ? 0 : bytes);
  rx_status s = NULL;
  if (ok && dev) {
    rx_rt_tensor *out = NULL;
    RX_RETURN_IF_ERROR(rx_rt_tensor_create(c->device, dtype, nd, shape, &out));
    return wrap(out, rt_nccl_recv(comm, rx_rt_tensor_buffer(out), bytes, peer), result);
  }
  if (ok) return make_result(c, dtype, nd, shape, (const uint8_t *)msg + MSG_HEADER(nd), result);
  if (valid && dev && got == MSG_HEADER(h[1])) {
    rx_rt_buffer *scratch = NULL;
    s = rx_rt_buffer_alloc(c->device, sent ? sent : 1, &scratch);
    if (!s) s = rt_nccl_recv(comm, scratch, sent, peer);
    rx_rt_buffer_release(scratch);
    rx_status_free(s);
  }
  return base_status_make(RX_ERR_INVALID, "expected %s from rank %d, received %s", want, peer,
                          have);
}

/* ---- rx_ccl_recv(prim(peer), prim(dtype), prim(d0), ...) ---- */
rx_status rt_ccl_builtin_recv(const vm_extern_call *c, rx_rt_value *const *args, size_t nargs,
                              rx_rt_value **result) {
  rx_rt_comm *comm = NULL;
  int64_t peer = 0, dtype = 0, shape[RX_RT_MAX_NDIM];
  if (nargs < 2 || nargs > 2 + RX_RT_MAX_NDIM)
    return base_status_make(RX_ERR_INVALID,
                            "%s takes a peer, a dtype and 0..%d dims, got %zu arguments", c->name,
                            RX_RT_MAX_NDIM, nargs);
  RX_RETURN_IF_ERROR(need_device(c));
  RX_RETURN_IF_ERROR(peer_arg(c, args, 0, &comm, &peer));
  RX_RETURN_IF_ERROR(vm_extern_arg_int(c, args, 1, "dtype", 1, RX_DTYPE_COUNT - 1, &dtype));
  int nd = (int)(nargs - 2);
  for (int i = 0; i < nd; i++)
    RX_RETURN_IF_ERROR(vm_extern_arg_int(c, args, 2 + (size_t)i, "dim", 0, INT64_MAX, &shape[i]));
  double t0 = 0;
  start_clock(c, comm, &t0);
  void *msg = NULL;
  size_t got = 0;
  rx_status s = rt_ccl_recv(comm, (int)peer, &msg, &got);
  if (!s) s = receive(c, comm, (int)peer, (rx_dtype)dtype, nd, shape, msg, got, result);
  free(msg);
  return finish(comm, RX_CCL_RECV, s ? 0 : rx_rt_tensor_bytes(rx_rt_value_tensor(*result)), t0,
                s ? base_status_annotate(s, "%s from rank %lld", c->name, (long long)peer) : NULL);
}

/* ---- the artifact's communicator ---- */
void rx_rt_artifact_set_comm(rx_rt_artifact *a, rx_rt_comm *c) {
  if (c) rx_rt_comm_retain(c);
  rx_rt_comm_release(a->comm);
  a->comm = c;
}
rx_rt_comm *rx_rt_artifact_comm(const rx_rt_artifact *a) { return a->comm; }
