/* runtime/llm/kv_cache.c: the paged KV cache (kv_cache.h). The page bookkeeping lives on the
 * host: a stack of free pages, a reference count per page, and per sequence its page list; each
 * forward's extend uploads the small aux tensors the attention kernels read (page table, lengths,
 * positions, slots). A page is free exactly when its count is zero: every sequence that lists it
 * holds one reference, and so does the prefix cache (prefix_cache.c) for the pages it keeps. */
#include "runtime/llm/kv_cache.h"

#include <assert.h>
#include <stdio.h>
#include <string.h>

typedef struct kv_seq {
  int64_t id;
  int64_t len;    /* tokens held */
  int32_t *pages; /* in order; ceil(len / RX_KV_PAGE) used */
  int64_t npages; /* used */
  int64_t cap;    /* allocated entries of pages */
} kv_seq;

struct rx_kv_cache {
  rx_rt_device *device;
  rx_rt_allocator alloc;
  int64_t layers, kv_heads, head_dim, max_seqs, max_seq_len;
  rx_dtype dtype;
  int64_t npages;      /* in each layer's tensor, the padding page 0 included */
  rx_rt_value **pages; /* per layer: a tensor value */
  int32_t *free_pages; /* a stack */
  int64_t nfree;
  int32_t *refs; /* per page: the sequences (and the prefix cache) holding it; 0: free */
  kv_seq *seqs;
  int64_t nseqs;
  llm_kv_mirror_fn mirror; /* rank 0 of several: the page operations broadcast (kv_cache.h) */
  void *mirror_ctx;
};

static void kv_destroy(void *obj) {
  rx_kv_cache *c = obj;
  if (!c) return;
  for (int64_t l = 0; c->pages && l < c->layers; l++) rx_rt_value_release(c->pages[l]);
  for (int64_t i = 0; i < c->nseqs; i++) rt_free(&c->alloc, c->seqs[i].pages);
  rt_free(&c->alloc, c->pages);
  rt_free(&c->alloc, c->free_pages);
  rt_free(&c->alloc, c->refs);
  rt_free(&c->alloc, c->seqs);
  rx_rt_device *d = c->device;
  rx_rt_allocator a = c->alloc;
  rt_free(&a, c);
  rx_rt_device_release(d);
}

const rx_rt_object_type llm_kv_cache_type = {"a KV cache", kv_destroy};

rx_kv_cache *llm_kv_cache_of(const rx_rt_value *v) {
  return v ? rx_rt_value_object(v, &llm_kv_cache_type) : NULL;
}

/* ---- arguments ---- */

static rx_status arg_cache(const vm_extern_call *c, rx_rt_value *const *args, size_t i,
                           rx_kv_cache **out) {
  *out = llm_kv_cache_of(args[i]);
  if (!*out)
    return base_status_make(RX_ERR_INVALID, "%s: argument %zu must be a KV cache, got %s", c->name,
                            i + 1, vm_kind_name(args[i]));
  return NULL;
}

static rx_status want_args(const vm_extern_call *c, size_t nargs, size_t want) {
  if (nargs != want)
    return base_status_make(RX_ERR_INVALID, "%s takes %zu arguments, got %zu", c->name, want,
                            nargs);
  return NULL;
}

/* ---- rx_kv_create ---- */
#define KV_MAX_LAYERS 1024
#define KV_MAX_HEADS  1024
#define KV_MAX_DIM    1024
#define KV_MAX_SEQS   65536

rx_status llm_kv_builtin_create(const vm_extern_call *c, rx_rt_value *const *args, size_t nargs,
                                rx_rt_value **result) {
  RX_RETURN_IF_ERROR(want_args(c, nargs, 7));
  if (!c->device) return base_status_make(RX_ERR_INVALID, "%s: no device", c->name);
  int64_t layers = 0, heads = 0, dim = 0, dtype = 0, capacity = 0, max_seqs = 0, max_len = 0;
  RX_RETURN_IF_ERROR(vm_extern_arg_int(c, args, 0, "layers", 1, KV_MAX_LAYERS, &layers));
  RX_RETURN_IF_ERROR(vm_extern_arg_int(c, args, 1, "kv heads", 1, KV_MAX_HEADS, &heads));
  RX_RETURN_IF_ERROR(vm_extern_arg_int(c, args, 2, "head dim", 1, KV_MAX_DIM, &dim));
  RX_RETURN_IF_ERROR(vm_extern_arg_int(c, args, 3, "dtype", 0, RX_DTYPE_COUNT - 1, &dtype));
  RX_RETURN_IF_ERROR(vm_extern_arg_int(c, args, 4, "capacity", 1, INT32_MAX / 2, &capacity));
  RX_RETURN_IF_ERROR(vm_extern_arg_int(c, args, 5, "max sequences", 1, KV_MAX_SEQS, &max_seqs));
  RX_RETURN_IF_ERROR(vm_extern_arg_int(c, args, 6, "max sequence length", 1, INT64_MAX, &max_len));
  /* No sequence holds more tokens than the cache (at most INT32_MAX / 2): a model compiled for
   * longer ones (a max_position_embeddings of 2^31 - 1) runs in the cache the caller sized
   * (--kv-capacity); the cache's pages refuse what does not fit. */
  if (max_len > INT32_MAX / 2) max_len = INT32_MAX / 2;
  if (dtype != RX_DTYPE_F32 && dtype != RX_DTYPE_F16 && dtype != RX_DTYPE_BF16)
    return base_status_make(RX_ERR_INVALID, "%s: dtype %s: expected f32, f16 or bf16", c->name,
                            rx_rt_dtype_name((rx_dtype)dtype));
  const rx_rt_allocator *a = &c->device->alloc;
  rx_kv_cache *kv = rt_alloc(a, sizeof *kv);
  if (!kv) return rt_oom("a KV cache", sizeof *kv);
  kv->device = c->device;
  rx_rt_device_retain(c->device);
  kv->alloc = *a;
  kv->layers = layers;
  kv->kv_heads = heads;
  kv->head_dim = dim;
  kv->dtype = (rx_dtype)dtype;
  kv->max_seqs = max_seqs;
  kv->max_seq_len = max_len;
  kv->npages = (capacity + RX_KV_PAGE - 1) / RX_KV_PAGE + 1;
  rx_rt_value *v = NULL;
  rx_status s = rx_rt_value_from_object(&llm_kv_cache_type, kv, &v); /* owns kv from here */
  if (s) return s;
  kv->pages = rt_alloc(a, (size_t)layers * sizeof *kv->pages);
  kv->free_pages = rt_alloc(a, (size_t)kv->npages * sizeof *kv->free_pages);
  kv->seqs = rt_alloc(a, (size_t)max_seqs * sizeof *kv->seqs);
  kv->refs = rt_alloc(a, (size_t)kv->npages * sizeof *kv->refs);
  if (!kv->pages || !kv->free_pages || !kv->seqs || !kv->refs) {
    rx_rt_value_release(v);
    return rt_oom("a KV cache's tables", (size_t)kv->npages * 4);
  }
  memset(kv->refs, 0, (size_t)kv->npages * sizeof *kv->refs);
  for (int64_t p = kv->npages - 1; p >= 1; p--) kv->free_pages[kv->nfree++] = (int32_t)p;
  int64_t shape[5] = {kv->npages, 2, heads, RX_KV_PAGE, dim};
  for (int64_t l = 0; l < layers && !s; l++) {
    rx_rt_tensor *t = NULL;
    s = rx_rt_tensor_create(c->device, kv->dtype, 5, shape, &t);
    if (!s) s = rx_rt_buffer_fill(rx_rt_tensor_buffer(t), 0, rx_rt_tensor_bytes(t), 0);
    if (!s && !(kv->pages[l] = vm_value_new(a, RX_RT_VALUE_TENSOR))) s = rt_oom("a value", 64);
    if (s) {
      rx_rt_tensor_release(t);
      s = base_status_annotate(s, "%s: layer %lld of %lld, %lld pages", c->name, (long long)l,
                               (long long)layers, (long long)kv->npages);
      break;
    }
    kv->pages[l]->tensor = t;
  }
  if (s) {
    rx_rt_value_release(v);
    return s;
  }
  *result = v;
  return NULL;
}

/* ---- sequences ---- */
static kv_seq *find_seq(const rx_kv_cache *c, int64_t id) {
  for (int64_t i = 0; i < c->nseqs; i++)
    if (c->seqs[i].id == id) return &c->seqs[i];
  return NULL;
}

int64_t llm_kv_cache_length(const rx_kv_cache *c, int64_t id) {
  const kv_seq *q = find_seq(c, id);
  return q ? q->len : 0;
}

/* Drops one reference to page p; the last one frees it. */
static void page_drop(rx_kv_cache *c, int32_t p) {
  assert(p >= 1 && p < c->npages && c->refs[p] > 0);
  if (--c->refs[p] == 0) c->free_pages[c->nfree++] = p;
}

/* Takes a free page (the caller checked that one is free). */
static int32_t page_take(rx_kv_cache *c) {
  int32_t p = c->free_pages[--c->nfree];
  c->refs[p] = 1;
  return p;
}

void llm_kv_cache_remove(rx_kv_cache *c, int64_t id) {
  kv_seq *q = find_seq(c, id);
  if (!q) return;
  for (int64_t i = 0; i < q->npages; i++) page_drop(c, q->pages[i]);
  rt_free(&c->alloc, q->pages);
  *q = c->seqs[--c->nseqs];
}

void llm_kv_cache_truncate(rx_kv_cache *c, int64_t id, int64_t len) {
  kv_seq *q = find_seq(c, id);
  if (!q || len >= q->len) return;
  if (len <= 0) {
    llm_kv_cache_remove(c, id);
    return;
  }
  int64_t keep = (len + RX_KV_PAGE - 1) / RX_KV_PAGE;
  while (q->npages > keep) page_drop(c, q->pages[--q->npages]);
  q->len = len;
}

/* ---- shared pages ---- */
rx_status llm_kv_cache_fork(rx_kv_cache *c, int64_t id, const int32_t *pages, int64_t npages) {
  if (id < 0 || find_seq(c, id) || npages < 0 || npages * RX_KV_PAGE > c->max_seq_len)
    return base_status_make(RX_ERR_INVALID,
                            "rx_kv_fork: sequence %lld (held already, or a negative id) or %lld "
                            "shared pages (more than a sequence's %lld tokens)",
                            (long long)id, (long long)npages, (long long)c->max_seq_len);
  if (c->nseqs >= c->max_seqs)
    return base_status_make(
        RX_ERR_INVALID,
        "rx_kv_fork: sequence %lld does not fit: the cache holds %lld of at most "
        "%lld sequences",
        (long long)id, (long long)c->nseqs, (long long)c->max_seqs);
  for (int64_t i = 0; i < npages; i++)
    if (pages[i] < 1 || pages[i] >= c->npages || c->refs[pages[i]] < 1)
      return base_status_make(
          RX_ERR_INVALID, "rx_kv_fork: shared page %lld (at %lld) is not a page in use (1..%lld)",
          (long long)pages[i], (long long)i, (long long)c->npages - 1);
  int64_t cap = npages < 8 ? 8 : npages * 2;
  int32_t *np = rt_alloc(&c->alloc, (size_t)cap * sizeof *np);
  if (!np) return rt_oom("a page list", (size_t)cap * 4);
  for (int64_t i = 0; i < npages; i++) {
    np[i] = pages[i];
    c->refs[pages[i]]++;
  }
  c->seqs[c->nseqs++] =
      (kv_seq){.id = id, .len = npages * RX_KV_PAGE, .pages = np, .npages = npages, .cap = cap};
  if (c->mirror) c->mirror(c->mirror_ctx, LLM_KV_OP_FORK, id, pages, npages);
  return NULL;
}

int64_t llm_kv_cache_seq_pages(const rx_kv_cache *c, int64_t id, const int32_t **out_pages) {
  const kv_seq *q = find_seq(c, id);
  *out_pages = q ? q->pages : NULL;
  return q ? q->npages : 0;
}

void llm_kv_cache_page_retain(rx_kv_cache *c, int32_t page) {
  assert(page >= 1 && page < c->npages && c->refs[page] > 0);
  c->refs[page]++;
  if (c->mirror) c->mirror(c->mirror_ctx, LLM_KV_OP_RETAIN, page, NULL, 0);
}

void llm_kv_cache_page_release(rx_kv_cache *c, int32_t page) {
  page_drop(c, page);
  if (c->mirror) c->mirror(c->mirror_ctx, LLM_KV_OP_RELEASE, page, NULL, 0);
}

void llm_kv_cache_set_mirror(rx_kv_cache *c, llm_kv_mirror_fn fn, void *ctx) {
  c->mirror = fn;
  c->mirror_ctx = ctx;
}

static uint64_t fnv(uint64_t h, const void *p, size_t n) {
  const unsigned char *b = p;
  for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ull;
  return h;
}

uint64_t llm_kv_cache_digest(const rx_kv_cache *c) {
  uint64_t h = fnv(14695981039346656037ull, c->refs, (size_t)c->npages * sizeof *c->refs);
  h = fnv(h, &c->nfree, sizeof c->nfree);
  h = fnv(h, c->free_pages, (size_t)c->nfree * sizeof *c->free_pages);
  for (int64_t i = 0; i < c->nseqs; i++) { /* in the cache's order, which the same calls make */
    const kv_seq *q = &c->seqs[i];
    h = fnv(h, &q->id, sizeof q->id);
    h = fnv(h, &q->len, sizeof q->len);
    h = fnv(h, q->pages, (size_t)q->npages * sizeof *q->pages);
  }
  return h;
}

int32_t llm_kv_cache_page_refs(const rx_kv_cache *c, int32_t page) {
  return page >= 1 && page < c->npages ? c->refs[page] : 0;
}

int64_t llm_kv_cache_refs_held(const rx_kv_cache *c) {
  int64_t n = 0;
  for (int64_t p = 1; p < c->npages; p++) n += c->refs[p];
  return n;
}

int64_t llm_kv_cache_capacity(const rx_kv_cache *c) { return (c->npages - 1) * RX_KV_PAGE; }
int64_t llm_kv_cache_free_tokens(const rx_kv_cache *c) { return c->nfree * RX_KV_PAGE; }
int64_t llm_kv_cache_max_seq_len(const rx_kv_cache *c) { return c->max_seq_len; }
int64_t llm_kv_cache_sequences(const rx_kv_cache *c) { return c->nseqs; }
int64_t llm_kv_cache_max_sequences(const rx_kv_cache *c) { return c->max_seqs; }
int64_t llm_kv_cache_bytes_per_token(const rx_kv_cache *c) {
  return c->layers * 2 * c->kv_heads * c->head_dim * (int64_t)rx_rt_dtype_size(c->dtype);
}

/* ---- batches ---- */
struct rx_kv_batch {
  int64_t *ids, *counts; /* b each */
  int64_t b, cap;
};

static void batch_destroy(void *obj) {
  rx_kv_batch *t = obj;
  if (!t) return;
  rt_free(&rt_default_allocator, t->ids);
  rt_free(&rt_default_allocator, t->counts);
  rt_free(&rt_default_allocator, t);
}

const rx_rt_object_type llm_kv_batch_type = {"a KV batch", batch_destroy};

rx_status llm_kv_batch_new(rx_rt_value **out) {
  *out = NULL;
  rx_kv_batch *t = rt_alloc(&rt_default_allocator, sizeof *t);
  if (!t) return rt_oom("a KV batch", sizeof *t);
  return rx_rt_value_from_object(&llm_kv_batch_type, t, out); /* destroys t when it fails */
}

rx_status llm_kv_batch_set(rx_rt_value *v, const int64_t *ids, const int64_t *counts, size_t b) {
  rx_kv_batch *t = rx_rt_value_object(v, &llm_kv_batch_type);
  if (!t) return base_status_make(RX_ERR_INVALID, "rx_kv_batch_set: not a KV batch");
  if ((int64_t)b > t->cap) {
    int64_t cap = (int64_t)b < 16 ? 16 : (int64_t)b;
    int64_t *ni = rt_alloc(&rt_default_allocator, (size_t)cap * sizeof *ni);
    int64_t *nc = rt_alloc(&rt_default_allocator, (size_t)cap * sizeof *nc);
    if (!ni || !nc) {
      rt_free(&rt_default_allocator, ni);
      rt_free(&rt_default_allocator, nc);
      return rt_oom("a KV batch", (size_t)cap * 16);
    }
    rt_free(&rt_default_allocator, t->ids);
    rt_free(&rt_default_allocator, t->counts);
    t->ids = ni;
    t->counts = nc;
    t->cap = cap;
  }
  for (size_t i = 0; i < b; i++) {
    t->ids[i] = ids[i];
    t->counts[i] = counts ? counts[i] : 1;
  }
  t->b = (int64_t)b;
  return NULL;
}

/* ---- rx_kv_extend ---- */
typedef struct extend_plan {
  int64_t b, n, mp;      /* sequences, new tokens in all, most pages of one sequence */
  const int64_t *ids;    /* per batch row: the sequence id */
  const int64_t *counts; /* per batch row: its new tokens (packed in row order) */
  kv_seq **seq;          /* per batch row: the sequence (NULL: a new one) */
  int64_t *need;         /* per batch row: pages to take */
} extend_plan;

/* Checks the request against the cache, without changing it. */
static rx_status plan_extend(const vm_extern_call *c, rx_kv_cache *kv, extend_plan *p) {
  int64_t total_need = 0, fresh = 0;
  const int64_t *ids = p->ids;
  for (int64_t i = 0; i < p->b; i++) {
    for (int64_t j = 0; j < i; j++)
      if (ids[j] == ids[i])
        return base_status_make(RX_ERR_INVALID, "%s: sequence %lld appears twice in one forward",
                                c->name, (long long)ids[i]);
    kv_seq *q = find_seq(kv, ids[i]);
    int64_t len = q ? q->len : 0, have = q ? q->npages : 0, count = p->counts[i];
    fresh += !q;
    if (count > kv->max_seq_len - len)
      return base_status_make(RX_ERR_INVALID,
                              "%s: sequence %lld would hold %lld tokens (%lld + %lld new), more "
                              "than the maximum of %lld",
                              c->name, (long long)ids[i], (long long)(len + count), (long long)len,
                              (long long)count, (long long)kv->max_seq_len);
    int64_t pages = (len + count + RX_KV_PAGE - 1) / RX_KV_PAGE;
    p->seq[i] = q;
    p->need[i] = pages - have;
    total_need += pages - have;
    if (pages > p->mp) p->mp = pages;
  }
  if (kv->nseqs + fresh > kv->max_seqs)
    return base_status_make(RX_ERR_INVALID,
                            "%s: %lld new sequences do not fit: the cache holds %lld of at most "
                            "%lld",
                            c->name, (long long)fresh, (long long)kv->nseqs,
                            (long long)kv->max_seqs);
  if (total_need > kv->nfree)
    return base_status_make(RX_ERR_OUT_OF_MEMORY,
                            "%s: the KV cache is full: %lld new tokens in %lld sequence%s need "
                            "%lld more pages of %d tokens, %lld of %lld are free (capacity %lld "
                            "tokens); remove finished sequences or create a larger cache",
                            c->name, (long long)p->n, (long long)p->b, p->b == 1 ? "" : "s",
                            (long long)total_need, RX_KV_PAGE, (long long)kv->nfree,
                            (long long)(kv->npages - 1), (long long)llm_kv_cache_capacity(kv));
  if (p->mp < 1) p->mp = 1;
  return NULL;
}

/* Takes the planned pages (cannot fail but for host memory, checked first). */
static rx_status apply_extend(rx_kv_cache *kv, extend_plan *p) {
  for (int64_t i = 0; i < p->b; i++) { /* host memory first, so nothing changes on failure */
    kv_seq *q = p->seq[i];
    int64_t want = (q ? q->npages : 0) + p->need[i];
    if (q && want <= q->cap) continue;
    int64_t cap = want < 8 ? 8 : want * 2;
    int32_t *np = rt_alloc(&kv->alloc, (size_t)cap * sizeof *np);
    if (!np) return rt_oom("a page list", (size_t)cap * 4);
    if (q) {
      memcpy(np, q->pages, (size_t)q->npages * sizeof *np);
      rt_free(&kv->alloc, q->pages);
      q->pages = np;
      q->cap = cap;
    } else {
      q = &kv->seqs[kv->nseqs++];
      *q = (kv_seq){.id = p->ids[i], .pages = np, .cap = cap};
      p->seq[i] = q;
    }
  }
  for (int64_t i = 0; i < p->b; i++) {
    kv_seq *q = p->seq[i];
    for (int64_t k = 0; k < p->need[i]; k++) q->pages[q->npages++] = page_take(kv);
  }
  return NULL;
}

#define KV_AUX 6 /* page_table, kv_len, q_seq, q_pos, slot, last */

/* The aux tensors (docs/llm.md) for rows after their lengths grew by their counts, as a tuple
 * value. */
static rx_status aux_tuple(const vm_extern_call *c, rx_kv_cache *kv, const extend_plan *p,
                           rx_rt_value **out) {
  int64_t b = p->b, n = p->n, mp = p->mp;
  size_t words = (size_t)(b * mp + 2 * b + 3 * n);
  int32_t *host = rt_alloc(&kv->alloc, words * sizeof *host);
  if (!host) return rt_oom("KV aux tables", words * 4);
  int32_t *table = host, *kv_len = table + b * mp, *q_seq = kv_len + b, *q_pos = q_seq + n,
          *slot = q_pos + n, *last = slot + n;
  int64_t r = 0; /* the packed row of the next new token */
  for (int64_t i = 0; i < b; i++) {
    const kv_seq *q = p->seq[i];
    for (int64_t k = 0; k < mp; k++) table[i * mp + k] = k < q->npages ? q->pages[k] : 0;
    kv_len[i] = (int32_t)q->len;
    for (int64_t t = 0; t < p->counts[i]; t++, r++) {
      int64_t pos = q->len - p->counts[i] + t;
      q_seq[r] = (int32_t)i;
      q_pos[r] = (int32_t)pos;
      slot[r] = q->pages[pos / RX_KV_PAGE] * RX_KV_PAGE + (int32_t)(pos % RX_KV_PAGE);
    }
    last[i] = (int32_t)(r - 1);
  }
  const int32_t *data[KV_AUX] = {table, kv_len, q_seq, q_pos, slot, last};
  int64_t shapes[KV_AUX][2] = {{b, mp}, {b, 0}, {n, 0}, {n, 0}, {n, 0}, {b, 0}};
  rx_rt_value *tuple = vm_value_new(&kv->alloc, RX_RT_VALUE_TUPLE);
  rx_status s = tuple ? NULL : rt_oom("a value", 64);
  if (!s && !(tuple->items = rt_alloc(&kv->alloc, KV_AUX * sizeof *tuple->items)))
    s = rt_oom("a tuple", KV_AUX * 8);
  for (int i = 0; i < KV_AUX && !s; i++) {
    rx_rt_tensor *t = NULL;
    s = rx_rt_tensor_from_host(c->device, RX_DTYPE_I32, i ? 1 : 2, shapes[i], data[i], &t);
    if (!s && !(tuple->items[i] = vm_value_new(&kv->alloc, RX_RT_VALUE_TENSOR))) {
      rx_rt_tensor_release(t);
      s = rt_oom("a value", 64);
    }
    if (!s) {
      tuple->items[i]->tensor = t;
      tuple->count = (size_t)i + 1;
    }
  }
  rt_free(&kv->alloc, host);
  if (s) {
    rx_rt_value_release(tuple);
    return s;
  }
  *out = tuple;
  return NULL;
}

/* The rows of a forward from argument 2: a batch (its ids and counts, which must sum to count),
 * or a shape of ids (count new tokens each: p->counts left NULL for the caller to fill). */
static rx_status extend_rows(const vm_extern_call *c, const rx_kv_cache *kv,
                             rx_rt_value *const *args, int64_t count, extend_plan *p) {
  const rx_kv_batch *t = rx_rt_value_object(args[1], &llm_kv_batch_type);
  if (t) {
    p->b = t->b;
    p->ids = t->ids;
    p->counts = t->counts;
    int64_t sum = 0;
    for (int64_t i = 0; i < t->b; i++) {
      if (t->ids[i] < 0 || t->counts[i] < 1)
        return base_status_make(RX_ERR_INVALID,
                                "%s: row %lld of the batch: sequence %lld with %lld new tokens "
                                "(ids are >= 0, counts >= 1)",
                                c->name, (long long)i, (long long)t->ids[i],
                                (long long)t->counts[i]);
      sum += t->counts[i];
    }
    if (sum != count)
      return base_status_make(RX_ERR_INVALID,
                              "%s: the batch's %lld sequences have %lld new tokens in all, the "
                              "forward has %lld",
                              c->name, (long long)t->b, (long long)sum, (long long)count);
  } else if (args[1]->kind == RX_RT_VALUE_SHAPE) {
    p->b = rx_rt_value_shape(args[1], &p->ids);
  } else {
    return base_status_make(RX_ERR_INVALID,
                            "%s: argument 2 must be a KV batch or a shape of sequence ids, got %s",
                            c->name, vm_kind_name(args[1]));
  }
  if (p->b < 1 || p->b > kv->max_seqs)
    return base_status_make(RX_ERR_INVALID, "%s: %lld sequences in one forward, expected 1 to %lld",
                            c->name, (long long)p->b, (long long)kv->max_seqs);
  return NULL;
}

rx_status llm_kv_builtin_extend(const vm_extern_call *c, rx_rt_value *const *args, size_t nargs,
                                rx_rt_value **result) {
  RX_RETURN_IF_ERROR(want_args(c, nargs, 3));
  rx_kv_cache *kv;
  RX_RETURN_IF_ERROR(arg_cache(c, args, 0, &kv));
  int64_t count = 0;
  RX_RETURN_IF_ERROR(vm_extern_arg_int(c, args, 2, "the new tokens", 1, INT32_MAX, &count));
  extend_plan p = {0};
  RX_RETURN_IF_ERROR(extend_rows(c, kv, args, count, &p));
  size_t b = (size_t)p.b;
  int64_t *each = NULL; /* a shape of ids: count tokens each */
  if (!p.counts) {
    if (count > INT32_MAX / p.b)
      return base_status_make(RX_ERR_INVALID, "%s: %lld sequences of %lld new tokens are too many",
                              c->name, (long long)p.b, (long long)count);
    each = rt_alloc(&kv->alloc, b * sizeof *each);
    if (!each) return rt_oom("a KV plan", b * 8);
    for (size_t i = 0; i < b; i++) each[i] = count;
    p.counts = each;
  }
  p.n = p.counts == each ? p.b * count : count;
  p.seq = rt_alloc(&kv->alloc, b * sizeof *p.seq);
  p.need = rt_alloc(&kv->alloc, b * sizeof *p.need);
  rx_status s = p.seq && p.need ? NULL : rt_oom("a KV plan", b * 16);
  if (!s) s = plan_extend(c, kv, &p);
  if (!s) s = apply_extend(kv, &p);
  if (!s) {
    for (size_t i = 0; i < b; i++) p.seq[i]->len += p.counts[i];
    s = aux_tuple(c, kv, &p, result);
    if (s) /* give the tokens back: the forward did not happen */
      for (size_t i = 0; i < b; i++) p.seq[i]->len -= p.counts[i];
  }
  rt_free(&kv->alloc, p.seq);
  rt_free(&kv->alloc, p.need);
  rt_free(&kv->alloc, each);
  return s;
}

/* ---- rx_kv_pages ---- */
rx_status llm_kv_builtin_pages(const vm_extern_call *c, rx_rt_value *const *args, size_t nargs,
                               rx_rt_value **result) {
  RX_RETURN_IF_ERROR(want_args(c, nargs, 2));
  rx_kv_cache *kv;
  RX_RETURN_IF_ERROR(arg_cache(c, args, 0, &kv));
  int64_t layer = 0;
  RX_RETURN_IF_ERROR(vm_extern_arg_int(c, args, 1, "layer", 0, kv->layers - 1, &layer));
  rx_rt_value_retain(kv->pages[layer]);
  *result = kv->pages[layer];
  return NULL;
}
