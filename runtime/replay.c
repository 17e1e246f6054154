/* runtime/replay.c: the launches a backend has queued since it last flushed them (a log), and a
 * small cache of earlier sequences of launches with what the backend made of each (a CUDA graph,
 * a recorded Vulkan command buffer), so that an identical sequence is replayed rather than
 * launched or recorded again (runtime/device.h, "replaying launches").
 *
 * A launch is its kernel, its grid and its parameter words (buffer identities and symbolic
 * values, as the backend chooses). A sequence's key is its kernels, their grids and parameter
 * counts; in exact mode (Vulkan: a command buffer cannot be patched) the grids and parameter
 * words are part of the key too. In update mode (CUDA: a graph's kernel nodes can be given new
 * parameters) a sequence with the same kernels matches, and rt_replay_changed says which
 * launches the backend must update before it replays: every word is compared, so a changed value
 * can never be replayed stale. A sequence is built into a replayable form the second time it is
 * seen (one-off sequences are launched directly), and the cache keeps the RT_REPLAY_ENTRIES most
 * recently used sequences. */
#include <string.h>

#include "runtime/device.h"

/* ---- logs ---- */
static bool log_append(const rx_rt_allocator *a, rt_replay_log *l, rx_rt_kernel *k,
                       const uint32_t grid[3], const uint64_t *words, uint32_t n) {
  if (!rt_grow(a, (void **)&l->launches, &l->cap, l->n + 1, sizeof *l->launches) ||
      !rt_grow(a, (void **)&l->words, &l->capwords, l->nwords + n, sizeof *l->words))
    return false;
  l->launches[l->n++] = (rt_replay_launch){k, {grid[0], grid[1], grid[2]}, (uint32_t)l->nwords, n};
  if (n) memcpy(l->words + l->nwords, words, n * sizeof *words);
  l->nwords += n;
  return true;
}

static void log_free(const rx_rt_allocator *a, rt_replay_log *l) {
  rt_free(a, l->launches);
  rt_free(a, l->words);
  memset(l, 0, sizeof *l);
}

rx_status rt_replay_add(rt_replay *r, rx_rt_kernel *k, const uint32_t grid[3],
                        const uint64_t *words, uint32_t n) {
  if (log_append(r->alloc, &r->log, k, grid, words, n)) return NULL;
  return rt_oom("the launch log", (r->log.n + 1) * sizeof *r->log.launches + n * 8);
}

/* ---- keys ---- */
static uint64_t mix(uint64_t h, uint64_t x) { return (h ^ x) * 0x100000001b3ull; /* FNV-1a */ }

static uint64_t key_hash(const rt_replay *r, const rt_replay_log *l) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < l->n; i++) {
    const rt_replay_launch *x = &l->launches[i];
    h = mix(mix(h, (uint64_t)(uintptr_t)x->k), x->n);
    if (!r->exact) continue;
    for (int d = 0; d < 3; d++) h = mix(h, x->grid[d]);
    for (uint32_t j = 0; j < x->n; j++) h = mix(h, l->words[x->off + j]);
  }
  return mix(h, l->n);
}

static bool same_params(const rt_replay_log *a, size_t i, const rt_replay_log *b, size_t j) {
  const rt_replay_launch *x = &a->launches[i], *y = &b->launches[j];
  return !memcmp(x->grid, y->grid, sizeof x->grid) && x->n == y->n &&
         !memcmp(a->words + x->off, b->words + y->off, x->n * sizeof *a->words);
}

static bool same_key(const rt_replay *r, const rt_replay_log *a, const rt_replay_log *b) {
  if (a->n != b->n) return false;
  for (size_t i = 0; i < a->n; i++)
    if (a->launches[i].k != b->launches[i].k || a->launches[i].n != b->launches[i].n ||
        (r->exact && !same_params(a, i, b, i)))
      return false;
  return true;
}

/* ---- the cache ---- */
static void entry_drop(rt_replay *r, rt_replay_entry *e) {
  if (e->impl && r->destroy) r->destroy(r->ctx, e->impl);
  log_free(r->alloc, &e->log);
  memset(e, 0, sizeof *e);
}

/* Copies the log into e (its launches as last run through it). */
static bool entry_set(rt_replay *r, rt_replay_entry *e) {
  rt_replay_log *l = &e->log;
  l->n = l->nwords = 0;
  if (!rt_grow(r->alloc, (void **)&l->launches, &l->cap, r->log.n, sizeof *l->launches) ||
      !rt_grow(r->alloc, (void **)&l->words, &l->capwords, r->log.nwords, sizeof *l->words))
    return false;
  if (r->log.n) memcpy(l->launches, r->log.launches, r->log.n * sizeof *l->launches);
  if (r->log.nwords) memcpy(l->words, r->log.words, r->log.nwords * sizeof *l->words);
  l->n = r->log.n;
  l->nwords = r->log.nwords;
  return true;
}

rt_replay_action rt_replay_find(rt_replay *r, rt_replay_entry **out) {
  *out = NULL;
  if (!r->log.n) return RT_REPLAY_DIRECT;
  uint64_t h = key_hash(r, &r->log);
  r->clock++;
  rt_replay_entry *e = NULL, *lru = &r->entries[0];
  for (size_t i = 0; i < RT_REPLAY_ENTRIES && !e; i++) {
    rt_replay_entry *x = &r->entries[i];
    if (x->seen && x->hash == h && same_key(r, &x->log, &r->log)) e = x;
    if (!x->seen || (lru->seen && x->used < lru->used)) lru = x;
  }
  if (!e) { /* first seen: remembered, launched directly */
    entry_drop(r, lru);
    lru->hash = h;
    lru->seen = 1;
    lru->used = r->clock;
    if (!entry_set(r, lru)) entry_drop(r, lru); /* out of host memory: not remembered */
    r->stats.direct++;
    return RT_REPLAY_DIRECT;
  }
  e->used = r->clock;
  *out = e;
  if (e->impl) {
    r->stats.replayed++;
    return RT_REPLAY_HIT;
  }
  if (e->failed || e->seen++ < 1) {
    r->stats.direct++;
    *out = NULL;
    return RT_REPLAY_DIRECT;
  }
  r->stats.built++;
  return RT_REPLAY_BUILD;
}

bool rt_replay_changed(const rt_replay *r, const rt_replay_entry *e, size_t i) {
  return !same_params(&e->log, i, &r->log, i);
}

void rt_replay_done(rt_replay *r, rt_replay_entry *e, bool ok) {
  if (e && !ok) { /* the backend could not build or replay it: launched directly from now on */
    if (e->impl && r->destroy) r->destroy(r->ctx, e->impl);
    e->impl = NULL;
    e->failed = true;
  } else if (e && !entry_set(r, e)) { /* out of host memory: forgotten */
    entry_drop(r, e);
  }
  r->log.n = r->log.nwords = 0;
}

void rt_replay_clear(rt_replay *r) {
  for (size_t i = 0; i < RT_REPLAY_ENTRIES; i++) entry_drop(r, &r->entries[i]);
}

void rt_replay_free(rt_replay *r) {
  rt_replay_clear(r);
  log_free(r->alloc, &r->log);
}
