/* simt_trace.c: the coalescing and bank-conflict analysis of traced launches (simt_trace.h).
 * Accesses to global and shared memory are recorded per block with their warp, lane, site and
 * occurrence (the k-th execution of the site by that lane); at the block's end the records are
 * sorted so that each warp-wide request (space, warp, site, occurrence) is a run, and each run is
 * measured: for global memory the distinct bytes its lanes asked for and the 32-byte sectors
 * those bytes lie in; for shared memory the phases it splits into and the 4-byte words each
 * phase reads or writes in one bank (README.md, "Shared-memory bank conflicts"). */
#include "simt_trace.h"

#include "simt_rt.h"

#include <stdlib.h>
#include <string.h>

#define SECTOR       32u  /* bytes of a DRAM-to-L2 transfer unit on NVIDIA GPUs (since Maxwell) */
#define SHADOW_DEPTH 64   /* calls tracked per thread; kernels nest a handful */
#define SITE_SLOTS   1024 /* open-addressing slots of one thread's site counters (power of two) */
#define BANKS        32   /* shared-memory banks of 4 bytes (compute capability 5.x and newer) */
#define MAX_SHARED   4    /* shared ranges: the object's __shared__ section, dynamic memory */

typedef struct record {
  uintptr_t site;
  unsigned warp, occ, lane;
  int shared, range, store, matrix;
  uint64_t off; /* byte offset in the range (global), the address (shared) */
  uint64_t bytes;
} record;

typedef struct site_count {
  uintptr_t site; /* 0: empty */
  unsigned count;
} site_count;

typedef struct tthread {
  const void *shadow[SHADOW_DEPTH]; /* caller return addresses, outermost first */
  int depth;                        /* may exceed SHADOW_DEPTH (then not recorded) */
  site_count *counts;               /* SITE_SLOTS, allocated at first use */
} tthread;

struct simt_trace {
  simt_range *ranges;
  int nranges;
  simt_range shared[MAX_SHARED];
  int nshared;
  uintptr_t fn_lo, fn_hi, obj_base;
  tthread *th;
  unsigned nthreads;
  record *rec;
  size_t nrec, cap;
};

static void *xcalloc(size_t n, size_t size) {
  void *p = calloc(n ? n : 1, size);
  if (!p) abort();
  return p;
}

simt_trace *simt_trace_new(const simt_range *ranges, int nranges, unsigned nthreads,
                           uintptr_t fn_lo, uintptr_t fn_hi, uintptr_t obj_base) {
  simt_trace *t = xcalloc(1, sizeof *t);
  t->ranges = xcalloc((size_t)nranges, sizeof *t->ranges);
  if (nranges) memcpy(t->ranges, ranges, sizeof *ranges * (size_t)nranges);
  t->nranges = nranges;
  t->fn_lo = fn_lo;
  t->fn_hi = fn_hi;
  t->obj_base = obj_base;
  t->th = xcalloc(nthreads, sizeof *t->th);
  t->nthreads = nthreads;
  return t;
}

void simt_trace_free(simt_trace *t) {
  if (!t) return;
  for (unsigned i = 0; i < t->nthreads; i++) free(t->th[i].counts);
  free(t->th);
  free(t->ranges);
  free(t->rec);
  free(t);
}

void simt_trace_add_shared(simt_trace *t, const void *lo, size_t bytes) {
  if (t->nshared < MAX_SHARED && lo && bytes) t->shared[t->nshared++] = (simt_range){lo, bytes};
}

void simt_trace_block_begin(simt_trace *t) {
  for (unsigned i = 0; i < t->nthreads; i++) {
    t->th[i].depth = 0;
    if (t->th[i].counts) memset(t->th[i].counts, 0, sizeof(site_count) * SITE_SLOTS);
  }
  t->nrec = 0;
}

void simt_trace_enter(simt_trace *t, unsigned thread, const void *caller_pc) {
  tthread *h = &t->th[thread];
  if (h->depth < SHADOW_DEPTH) h->shadow[h->depth] = caller_pc;
  h->depth++;
}

void simt_trace_exit(simt_trace *t, unsigned thread) {
  tthread *h = &t->th[thread];
  if (h->depth > 0) h->depth--;
}

static int in_kernel(const simt_trace *t, const void *pc) {
  return (uintptr_t)pc >= t->fn_lo && (uintptr_t)pc < t->fn_hi;
}

/* The site of an access: its own pc when the kernel made it, else the innermost call from the
 * kernel that led to it. */
static uintptr_t site_of(const simt_trace *t, const tthread *h, const void *pc) {
  if (in_kernel(t, pc)) return (uintptr_t)pc;
  int d = h->depth < SHADOW_DEPTH ? h->depth : SHADOW_DEPTH;
  for (int i = d - 1; i >= 0; i--)
    if (in_kernel(t, h->shadow[i])) return (uintptr_t)h->shadow[i];
  return (uintptr_t)pc;
}

/* The occurrence number of this execution of site by the thread (0 for the first). */
static unsigned occurrence(tthread *h, uintptr_t site) {
  if (!h->counts) h->counts = xcalloc(SITE_SLOTS, sizeof *h->counts);
  size_t i = (size_t)(site * 0x9e3779b97f4a7c15ull >> 32) & (SITE_SLOTS - 1);
  for (size_t n = 0; n < SITE_SLOTS; n++, i = (i + 1) & (SITE_SLOTS - 1)) {
    site_count *c = &h->counts[i];
    if (c->site == site) return c->count++;
    if (!c->site) {
      c->site = site;
      c->count = 1;
      return 0;
    }
  }
  return 0; /* more sites than slots: every further one shares occurrence 0 (never in practice) */
}

void simt_trace_access(simt_trace *t, unsigned thread, unsigned warp, const void *pc,
                       const void *addr, unsigned long bytes, int store) {
  uintptr_t a = (uintptr_t)addr;
  int r = -1, shared = 0;
  for (int i = 0; i < t->nranges && r < 0; i++) {
    uintptr_t b = (uintptr_t)t->ranges[i].base;
    if (a >= b && a < b + t->ranges[i].bytes) r = i;
  }
  for (int i = 0; i < t->nshared && r < 0; i++) {
    uintptr_t b = (uintptr_t)t->shared[i].base;
    if (a >= b && a < b + t->shared[i].bytes) r = i, shared = 1;
  }
  if (r < 0 || bytes == 0) return;
  tthread *h = &t->th[thread];
  uintptr_t site = site_of(t, h, pc);
  if (t->nrec == t->cap) {
    t->cap = t->cap ? 2 * t->cap : 4096;
    t->rec = realloc(t->rec, sizeof *t->rec * t->cap);
    if (!t->rec) abort();
  }
  uint64_t off = shared ? a : a - (uintptr_t)t->ranges[r].base;
  record *n = &t->rec[t->nrec++];
  *n = (record){.site = site, .warp = warp, .occ = occurrence(h, site), .lane = thread % 32};
  n->shared = shared, n->range = r, n->store = store & SIMT_ACCESS_STORE;
  n->matrix = shared && (store & SIMT_ACCESS_MATRIX);
  n->off = off, n->bytes = bytes;
}

static int cmp_record(const void *pa, const void *pb) {
  const record *a = pa, *b = pb;
#define CMP(f)                                                                                     \
  if (a->f != b->f) return a->f < b->f ? -1 : 1
  CMP(shared);
  CMP(matrix);
  CMP(store);
  CMP(site);
  CMP(warp);
  CMP(occ);
  CMP(range);
  CMP(off);
#undef CMP
  return 0;
}

static simt_site_stats *site_stats(simt_coalescing *acc, size_t site, int store, int shared,
                                   int matrix) {
  for (int i = 0; i < acc->nsites; i++)
    if (acc->sites[i].site == site && acc->sites[i].store == store &&
        acc->sites[i].shared == shared && acc->sites[i].matrix == matrix)
      return &acc->sites[i];
  simt_site_stats *n = realloc(acc->sites, sizeof *n * (size_t)(acc->nsites + 1));
  if (!n) abort();
  acc->sites = n;
  memset(&n[acc->nsites], 0, sizeof *n);
  n[acc->nsites].site = site;
  n[acc->nsites].store = store;
  n[acc->nsites].shared = shared;
  n[acc->nsites].matrix = matrix;
  return &n[acc->nsites++];
}

/* One request: n records of one (store, site, warp, occurrence), sorted by range and offset. Its
 * used bytes are those the lanes asked for, at most the bytes its sectors move: lanes that read
 * the same word (a broadcast) are served by one sector, as NVIDIA's global load efficiency
 * counts them (requested over transferred bytes). */
static void measure(const simt_trace *t, const record *r, size_t n, simt_coalescing *acc) {
  uint64_t used = 0, sectors = 0, next_sector = 0; /* sectors below next_sector are counted */
  for (size_t i = 0; i < n; i++) {
    if (i == 0 || r[i].range != r[i - 1].range) next_sector = 0;
    uint64_t lo = r[i].off, hi = r[i].off + r[i].bytes;
    uint64_t s0 = lo / SECTOR, s1 = (hi - 1) / SECTOR + 1; /* the sectors [s0, s1) */
    used += r[i].bytes;
    if (s1 > next_sector) sectors += s1 - (s0 > next_sector ? s0 : next_sector), next_sector = s1;
  }
  if (used > sectors * SECTOR) used = sectors * SECTOR;
  simt_access_stats *tot = r[0].store ? &acc->stores : &acc->loads;
  simt_access_stats *site =
      &site_stats(acc, (size_t)(r[0].site - t->obj_base), r[0].store, 0, 0)->s;
  tot->requests++, site->requests++;
  tot->used += used, site->used += used;
  tot->moved += sectors * SECTOR, site->moved += sectors * SECTOR;
}

/* The degree of one phase: the records whose lanes are in [lo, hi). Each record's 4-byte words
 * are counted once per bank (the same word twice is one word: a broadcast, or one write). */
static unsigned phase_degree(const record *r, size_t n, unsigned lo, unsigned hi, int *any) {
  uint64_t words[BANKS * 8]; /* 32 lanes of at most 16 bytes: 128 words; longer copies cut */
  size_t nw = 0;
  for (size_t i = 0; i < n; i++) {
    if (r[i].lane < lo || r[i].lane >= hi) continue;
    for (uint64_t w = r[i].off / 4; w <= (r[i].off + r[i].bytes - 1) / 4; w++) {
      size_t k = 0;
      while (k < nw && words[k] != w) k++;
      if (k == nw && nw < sizeof words / sizeof words[0]) words[nw++] = w;
    }
  }
  unsigned per_bank[BANKS] = {0}, degree = 0;
  for (size_t k = 0; k < nw; k++)
    if (++per_bank[words[k] % BANKS] > degree) degree = per_bank[words[k] % BANKS];
  *any = nw > 0;
  return degree;
}

/* One shared-memory request: n records of one (store, site, warp, occurrence). Accesses of 4
 * bytes or less are served in one phase of 32 lanes, 8-byte ones in two of 16 lanes, 16-byte ones
 * in four of 8 lanes (an ldmatrix's 8x8 matrix is one: its 8 row addresses of 16 bytes). */
static void measure_banks(const simt_trace *t, const record *r, size_t n, simt_coalescing *acc) {
  uint64_t size = 0;
  for (size_t i = 0; i < n; i++)
    if (r[i].bytes > size) size = r[i].bytes;
  unsigned lanes = size <= 4 ? 32 : size <= 8 ? 16 : 8; /* lanes per phase */
  simt_bank_stats *tot = r[0].store ? &acc->shared_stores : &acc->shared_loads;
  simt_bank_stats *site =
      &site_stats(acc, (size_t)(r[0].site - t->obj_base), r[0].store, 1, r[0].matrix)->b;
  tot->requests++, site->requests++;
  for (unsigned lo = 0; lo < 32; lo += lanes) {
    int any;
    unsigned d = phase_degree(r, n, lo, lo + lanes, &any);
    if (!any) continue;
    tot->phases++, site->phases++;
    tot->conflicts += d - 1, site->conflicts += d - 1;
    if (d > tot->max_degree) tot->max_degree = d;
    if (d > site->max_degree) site->max_degree = d;
  }
}

static int same_request(const record *a, const record *b) {
  return a->shared == b->shared && a->matrix == b->matrix && a->store == b->store &&
         a->site == b->site && a->warp == b->warp && a->occ == b->occ;
}

void simt_trace_block_end(simt_trace *t, simt_coalescing *acc) {
  qsort(t->rec, t->nrec, sizeof *t->rec, cmp_record);
  for (size_t i = 0; i < t->nrec;) {
    size_t j = i + 1;
    while (j < t->nrec && same_request(&t->rec[i], &t->rec[j])) j++;
    (t->rec[i].shared ? measure_banks : measure)(t, &t->rec[i], j - i, acc);
    i = j;
  }
  t->nrec = 0;
}
