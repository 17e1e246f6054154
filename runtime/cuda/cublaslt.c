/* runtime/cuda/cublaslt.c: the builtin rx_cublaslt_matmul (runtime/externs.c), which runs the
 * matmuls that passes/dispatch.c sends to the library (docs/dispatch.md):
 *
 *   rx_cublaslt_matmul(a: T[..., m, k], b: T[k, n] | T[..., k, n], trans_b: Prim(i64)) -> T[..., m,
 * n] (trans_b = 1: b is T[n, k] or T[..., n, k], the Hugging Face Linear layout; T: f16, bf16, f32)
 *
 * cuBLASLt is opened with dlopen at the first call (RX_CUBLASLT_LIBRARY names a file to use;
 * else libcublasLt.so.13, .12, .11), never linked. Per device, at its first call: a handle and a
 * workspace (a buffer the device owns); per shape a plan (the matmul descriptor, three layouts
 * and the algorithm of the library's heuristic), kept in a small cache. The call runs on the
 * device's stream after the launches logged before it (rt_native.queue), so it ends a replayed
 * sequence of launches and is never part of one (runtime/replay.c).
 *
 * Layouts. cuBLASLt is column-major; the tensors are row-major. A row-major [r, c] matrix is the
 * column-major [c, r] with leading dimension c, so C = A B (row-major) is computed as
 * C^T = B^T A^T (column-major): the library's first operand is b, its second a:
 *   first:  b [k, n] -> rows n, cols k, ld n, op N;  b [n, k] (trans_b) -> rows k, cols n, ld k, op
 * T second: a [m, k] -> rows k, cols m, ld k, op N result: c [m, n] -> rows n, cols m, ld n A
 * shared b (rank 2) makes all of a's rows one GEMM (m = the product of a's dims but the last); a
 * batch of b is a strided batch of the same leading dims. Accumulation and scale in f32
 * (CUBLAS_COMPUTE_32F), as the generated kernels do. */
#include "runtime/cuda/cublaslt.h"
#include "runtime/cuda/cublaslt_api.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The workspace: 32 MiB, what NVIDIA's cuBLAS documentation recommends for Hopper (4 MiB
 * elsewhere; the larger size serves every GPU). */
#define LT_WORKSPACE_BYTES (32u << 20)
/* Plans kept per device: the distinct matmul shapes of a model (7 per decoder layer, the same in
 * every layer) times the shapes of a few prefill lengths; the oldest is replaced past this. */
#define LT_PLANS 64

static struct lt_fns {
#define X(name, sym, params) lt_status(*name) params;
  LT_FNS(X)
#undef X
} lt;
static pthread_once_t lt_once = PTHREAD_ONCE_INIT;
static rx_status lt_cached; /* why the library cannot be used, or NULL */

static void lt_load(void) {
  static const char *const names[] = {"libcublasLt.so.13", "libcublasLt.so.12",
                                      "libcublasLt.so.11"};
  const char *env = getenv("RX_CUBLASLT_LIBRARY");
  const char *one[1] = {env};
  char why[512];
  void *lib = env && *env ? rt_dlopen_first(one, 1, why, sizeof why)
                          : rt_dlopen_first(names, RX_ARRAY_LEN(names), why, sizeof why);
  if (!lib) {
    lt_cached = base_status_make(
        RX_ERR_NOT_FOUND,
        "cuBLASLt (%s) cannot be opened: the artifact was compiled with --dispatch cublas; install "
        "the CUDA toolkit's libcublasLt (or set RX_CUBLASLT_LIBRARY to its file), or compile "
        "without --dispatch (dlopen: %s)",
        env && *env ? env : "libcublasLt.so.13, .so.12 or .so.11", why);
    return;
  }
#define X(name, sym, params)                                                                       \
  if (!lt_cached) {                                                                                \
    lt.name = (lt_status(*) params)(uintptr_t)dlsym(lib, sym);                                     \
    if (!lt.name)                                                                                  \
      lt_cached = base_status_make(RX_ERR_NOT_FOUND, "cuBLASLt: the library lacks %s", sym);       \
  }
  LT_FNS(X)
#undef X
}

/* ---- per device: handle, workspace, plans ---- */
typedef struct lt_key {
  int type, trans;
  int64_t m, n, k, batch; /* batch > 1: a strided batch of b */
} lt_key;
typedef struct lt_plan {
  lt_key key;
  lt_desc desc;
  lt_layout la, lb, lc; /* the library's first operand (b), second (a), result */
  lt_algo algo;
} lt_plan;
typedef struct lt_state {
  lt_handle h;
  rx_rt_buffer *workspace;
  uint64_t workspace_address;
  size_t nplans, next; /* next: the plan replaced when the cache is full */
  lt_plan plans[LT_PLANS];
} lt_state;

static void plan_free(lt_plan *p) {
  if (p->la) lt.layout_destroy(p->la);
  if (p->lb) lt.layout_destroy(p->lb);
  if (p->lc) lt.layout_destroy(p->lc);
  if (p->desc) lt.desc_destroy(p->desc);
  memset(p, 0, sizeof *p);
}

static void state_free(rx_rt_device *d) {
  lt_state *s = d->library;
  void *stream = NULL;
  rx_status_free(d->native->queue(d, &stream)); /* the device's context current */
  for (size_t i = 0; i < s->nplans; i++) plan_free(&s->plans[i]);
  if (s->h) lt.destroy(s->h);
  rt_device_buffer_free(s->workspace);
  rt_free(&d->alloc, s);
  d->library = NULL;
  d->library_free = NULL;
}

static rx_status lt_fail(const vm_extern_call *c, lt_status st, const char *what) {
  return base_status_make(RX_ERR_UNSUPPORTED, "%s: %s failed (cuBLAS status %d)", c->name, what,
                          st);
}

static rx_status device_state(const vm_extern_call *c, lt_state **out) {
  rx_rt_device *d = c->device;
  if (d->library) {
    RX_ASSERT(d->library_free == state_free);
    *out = d->library;
    return NULL;
  }
  lt_state *s = rt_alloc(&d->alloc, sizeof *s);
  if (!s) return rt_oom("cuBLASLt's state", sizeof *s);
  d->library = s;
  d->library_free = state_free;
  lt_status st = lt.create(&s->h);
  rx_status e = st == LT_STATUS_SUCCESS ? NULL : lt_fail(c, st, "cublasLtCreate");
  if (st != LT_STATUS_SUCCESS) s->h = NULL;
  if (!e) e = rt_device_buffer(d, LT_WORKSPACE_BYTES, &s->workspace);
  if (e) {
    state_free(d); /* the next call tries again */
    return e;
  }
  s->workspace_address = d->native->address(s->workspace);
  *out = s;
  return NULL;
}

/* The descriptor, layouts and algorithm of key (made and kept at its first use). */
static rx_status make_plan(const vm_extern_call *c, lt_state *s, const lt_key *k, lt_plan *p) {
  p->key = *k;
  int32_t opa = k->trans ? LT_OP_T : LT_OP_N, opb = LT_OP_N;
  lt_status st = lt.desc_create(&p->desc, LT_COMPUTE_32F, LT_R_32F);
  if (st == LT_STATUS_SUCCESS) st = lt.desc_set(p->desc, LT_DESC_TRANSA, &opa, sizeof opa);
  if (st == LT_STATUS_SUCCESS) st = lt.desc_set(p->desc, LT_DESC_TRANSB, &opb, sizeof opb);
  if (st != LT_STATUS_SUCCESS) return lt_fail(c, st, "the matmul descriptor");
  uint64_t rows[3] = {(uint64_t)(k->trans ? k->k : k->n), (uint64_t)k->k, (uint64_t)k->n};
  uint64_t cols[3] = {(uint64_t)(k->trans ? k->n : k->k), (uint64_t)k->m, (uint64_t)k->m};
  int64_t strides[3] = {k->k * k->n, k->m * k->k, k->m * k->n};
  lt_layout *ls[3] = {&p->la, &p->lb, &p->lc};
  for (int i = 0; i < 3 && st == LT_STATUS_SUCCESS; i++) {
    st = lt.layout_create(ls[i], k->type, rows[i], cols[i], (int64_t)rows[i]);
    int32_t batch = (int32_t)k->batch;
    if (st == LT_STATUS_SUCCESS && k->batch > 1)
      st = lt.layout_set(*ls[i], LT_LAYOUT_BATCH_COUNT, &batch, sizeof batch);
    if (st == LT_STATUS_SUCCESS && k->batch > 1)
      st = lt.layout_set(*ls[i], LT_LAYOUT_STRIDED_BATCH_OFFSET, &strides[i], sizeof strides[i]);
  }
  if (st != LT_STATUS_SUCCESS) return lt_fail(c, st, "a matrix layout");
  lt_pref pref = NULL;
  uint64_t ws = LT_WORKSPACE_BYTES;
  st = lt.pref_create(&pref);
  if (st == LT_STATUS_SUCCESS) st = lt.pref_set(pref, LT_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws);
  lt_heuristic h;
  memset(&h, 0, sizeof h);
  int found = 0;
  if (st == LT_STATUS_SUCCESS)
    st = lt.heuristic(s->h, p->desc, p->la, p->lb, p->lc, p->lc, pref, 1, &h, &found);
  if (pref) lt.pref_destroy(pref);
  if (st != LT_STATUS_SUCCESS) return lt_fail(c, st, "cublasLtMatmulAlgoGetHeuristic");
  if (found < 1)
    return base_status_make(
        RX_ERR_UNSUPPORTED,
        "%s: cuBLASLt has no algorithm for [%lld, %lld] x [%lld, %lld]%s (batch "
        "%lld)",
        c->name, (long long)k->m, (long long)k->k, (long long)k->k, (long long)k->n,
        k->trans ? " (b transposed)" : "", (long long)k->batch);
  p->algo = h.algo;
  return NULL;
}

static rx_status plan_of(const vm_extern_call *c, lt_state *s, const lt_key *k, lt_plan **out) {
  for (size_t i = 0; i < s->nplans; i++)
    if (!memcmp(&s->plans[i].key, k, sizeof *k)) {
      *out = &s->plans[i];
      return NULL;
    }
  lt_plan *p = s->nplans < LT_PLANS ? &s->plans[s->nplans++] : &s->plans[s->next++ % LT_PLANS];
  plan_free(p);
  rx_status e = make_plan(c, s, k, p);
  if (e) {
    plan_free(p); /* a zeroed key never matches a real one (m, n, k >= 1) */
    return e;
  }
  *out = p;
  return NULL;
}

/* ---- the builtin ---- */
static int lt_type(rx_dtype t) {
  return t == RX_DTYPE_F16 ? LT_R_16F : t == RX_DTYPE_BF16 ? LT_R_16BF : LT_R_32F;
}

/* The key of a @ b from the operands' shapes, and the result's shape; an error names what does
 * not fit. */
static rx_status shapes(const vm_extern_call *c, const rx_rt_tensor *a, const rx_rt_tensor *b,
                        bool trans, lt_key *k, int64_t *out_shape) {
  char ta[96], tb[96];
  vm_format_type(ta, sizeof ta, a->dtype, a->ndim, a->shape);
  vm_format_type(tb, sizeof tb, b->dtype, b->ndim, b->shape);
  int r = a->ndim;
  bool dt = a->dtype == b->dtype &&
            (a->dtype == RX_DTYPE_F16 || a->dtype == RX_DTYPE_BF16 || a->dtype == RX_DTYPE_F32);
  bool ranks = r >= 2 && (b->ndim == 2 || b->ndim == r);
  for (int d = 0; ranks && b->ndim == r && d < r - 2; d++) ranks = a->shape[d] == b->shape[d];
  int64_t bk = ranks ? b->shape[b->ndim - (trans ? 1 : 2)] : -1;
  if (!dt || !ranks || bk != a->shape[r - 1])
    return base_status_make(RX_ERR_INVALID,
                            "%s: %s @ %s%s: expected f16, bf16 or f32 operands of one dtype, a of "
                            "rank >= 2, b of rank 2 or of a's leading dims, and a's last dim equal "
                            "to b's %s",
                            c->name, ta, tb, trans ? "^T" : "", trans ? "last" : "next to last");
  memset(k, 0, sizeof *k);
  k->type = lt_type(a->dtype);
  k->trans = trans;
  k->k = a->shape[r - 1];
  k->n = b->shape[b->ndim - (trans ? 2 : 1)];
  k->m = a->shape[r - 2];
  k->batch = 1;
  for (int d = 0; d < r - 2; d++) {
    if (b->ndim == 2)
      k->m *= a->shape[d]; /* one b for all: every row in one GEMM */
    else
      k->batch *= a->shape[d];
  }
  for (int d = 0; d < r; d++) out_shape[d] = a->shape[d];
  out_shape[r - 1] = k->n;
  if (k->m > INT32_MAX || k->n > INT32_MAX || k->k > INT32_MAX || k->batch > INT32_MAX)
    return base_status_make(RX_ERR_UNSUPPORTED, "%s: %s @ %s: a dimension over 2^31 - 1", c->name,
                            ta, tb);
  return NULL;
}

static rx_status run(const vm_extern_call *c, const rx_rt_tensor *a, const rx_rt_tensor *b,
                     const lt_key *k, rx_rt_tensor *out) {
  rx_rt_device *d = c->device;
  if (!k->m || !k->n || !k->batch) return NULL; /* nothing to compute */
  if (!k->k)                                    /* a sum of nothing */
    return rx_rt_buffer_fill(out->buffer, 0, rx_rt_buffer_size(out->buffer), 0);
  void *stream = NULL;
  RX_RETURN_IF_ERROR(d->native->queue(d, &stream));
  lt_state *s = NULL;
  RX_RETURN_IF_ERROR(device_state(c, &s));
  lt_plan *p = NULL;
  RX_RETURN_IF_ERROR(plan_of(c, s, k, &p));
  float alpha = 1.0f, beta = 0.0f;
  uintptr_t pa = (uintptr_t)d->native->address(a->buffer);
  uintptr_t pb = (uintptr_t)d->native->address(b->buffer);
  uintptr_t pc = (uintptr_t)d->native->address(out->buffer);
  lt_status st = lt.matmul(s->h, p->desc, &alpha, (const void *)pb, p->la, (const void *)pa, p->lb,
                           &beta, (const void *)pc, p->lc, (void *)pc, p->lc, &p->algo,
                           (void *)(uintptr_t)s->workspace_address, LT_WORKSPACE_BYTES, stream);
  if (st != LT_STATUS_SUCCESS) return lt_fail(c, st, "cublasLtMatmul");
  return NULL;
}

rx_status rt_cublaslt_builtin_matmul(const vm_extern_call *c, rx_rt_value *const *args,
                                     size_t nargs, rx_rt_value **result) {
  if (nargs != 3)
    return base_status_make(RX_ERR_INVALID, "%s takes 3 arguments, got %zu", c->name, nargs);
  if (!c->device || !c->device->native)
    return base_status_make(
        RX_ERR_UNSUPPORTED,
        "%s: cuBLASLt runs on CUDA devices only, and this call runs %s: the "
        "artifact was compiled with --dispatch cublas; run it on a CUDA device "
        "or compile without --dispatch",
        c->name, c->device ? rx_rt_backend_name(c->device->info.backend) : "without a device");
  pthread_once(&lt_once, lt_load);
  if (lt_cached)
    return base_status_make(rx_status_code_of(lt_cached), "%s: %s", c->name,
                            rx_status_message(lt_cached));
  if (args[0]->kind != RX_RT_VALUE_TENSOR || args[1]->kind != RX_RT_VALUE_TENSOR ||
      args[2]->kind != RX_RT_VALUE_PRIM || (args[2]->prim != 0 && args[2]->prim != 1))
    return base_status_make(RX_ERR_INVALID, "%s: expected two tensors and trans_b 0 or 1", c->name);
  const rx_rt_tensor *a = args[0]->tensor, *b = args[1]->tensor;
  if (a->buffer->device != c->device || b->buffer->device != c->device)
    return base_status_make(RX_ERR_INVALID, "%s: the operands are not on the call's device",
                            c->name);
  lt_key k;
  int64_t shape[RX_RT_MAX_NDIM];
  RX_RETURN_IF_ERROR(shapes(c, a, b, args[2]->prim == 1, &k, shape));
  rx_rt_tensor *out = NULL;
  RX_RETURN_IF_ERROR(rx_rt_tensor_create(c->device, a->dtype, a->ndim, shape, &out));
  rx_status e = run(c, a, b, &k, out);
  if (!e) e = rx_rt_value_from_tensor(out, result);
  rx_rt_tensor_release(out);
  return e;
}
