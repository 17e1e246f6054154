/* tests/runtime/replay_test.c: the launch replay cache (runtime/replay.c) that the CUDA backend
 * (graphs whose kernel nodes get new parameters) and the Vulkan backend (recorded command buffers
 * reused for identical batches) build on, driven by a mock backend: what is launched directly,
 * built, replayed, which launches are updated before a replay, and that a changed value is never
 * replayed stale. No device: this is the part of CUDA graph replay that runs without a GPU. */
#include <stdint.h>
#include <stdlib.h>

#include "../unit/check.h"
#include "relaxc/runtime.h"
#include "runtime/device.h"

static rx_rt_kernel kernels[4]; /* only their addresses matter: a launch's kernel identity */

/* The mock backend's replayable forms: counted, so that a leak or a double free shows. */
static int live_impls, destroyed;
static void destroy_impl(void *ctx, void *impl) {
  (void)ctx;
  free(impl);
  live_impls--;
  destroyed++;
}

/* A launch of kernel k with grid (g, 1, 1) and words (buffer, value). */
static void add(rt_replay *r, int k, uint32_t g, uint64_t buffer, uint64_t value) {
  uint32_t grid[3] = {g, 1, 1};
  uint64_t words[2] = {buffer, value};
  CHECK_OK(rt_replay_add(r, &kernels[k], grid, words, 2));
}

/* Flushes the log as a backend does; returns the action and sets *changed to a bit per launch
 * given new parameters (HIT in update mode). */
static rt_replay_action flush(rt_replay *r, unsigned *changed) {
  rt_replay_entry *e = NULL;
  rt_replay_action a = rt_replay_find(r, &e);
  *changed = 0;
  CHECK_MSG((a == RT_REPLAY_DIRECT) == (e == NULL), "an entry exactly when building or replaying");
  if (a == RT_REPLAY_BUILD) {
    CHECK_MSG(e && !e->impl, "BUILD: an entry without a replayable form");
    if (e) e->impl = malloc(1), live_impls++;
  }
  if (a == RT_REPLAY_HIT && !r->exact)
    for (size_t i = 0; i < r->log.n; i++)
      if (rt_replay_changed(r, e, i)) *changed |= 1u << i;
  rt_replay_done(r, e, true);
  CHECK_MSG(r->log.n == 0 && r->log.nwords == 0, "the log is empty after a flush");
  return a;
}

/* The decode step of a two-layer model, roughly: norm, matmul over the weight, attention over
 * the cache of length m (its grid grows with m), per layer. */
static void step(rt_replay *r, uint64_t m, uint64_t attn_buffer) {
  for (int layer = 0; layer < 2; layer++) {
    add(r, 0, 1, 100 + (uint64_t)layer, 16);
    add(r, 1, 64, 200 + (uint64_t)layer, 16);
    add(r, 2, (uint32_t)(m + 255) / 256, attn_buffer, m);
  }
}

static void test_update_mode(void) {
  rt_replay r = {.alloc = &rt_default_allocator, .exact = false, .destroy = destroy_impl};
  unsigned changed = 0;
  step(&r, 10, 7);
  CHECK_MSG(flush(&r, &changed) == RT_REPLAY_DIRECT, "first seen: launched directly");
  step(&r, 11, 7);
  CHECK_MSG(flush(&r, &changed) == RT_REPLAY_BUILD, "second seen: built");
  step(&r, 11, 7);
  CHECK_MSG(flush(&r, &changed) == RT_REPLAY_HIT && changed == 0, "the same: replayed as built");
  step(&r, 12, 7);
  CHECK_MSG(flush(&r, &changed) == RT_REPLAY_HIT && changed == (1u << 2 | 1u << 5),
            "m changed: the two attention launches are updated, nothing else (changed 0x%x)",
            changed);
  step(&r, 12, 7);
  CHECK_MSG(flush(&r, &changed) == RT_REPLAY_HIT && changed == 0,
            "the entry keeps what was last replayed (changed 0x%x)", changed);
  step(&r, 300, 7); /* the grid of attention grows */
  CHECK_MSG(flush(&r, &changed) == RT_REPLAY_HIT && changed == (1u << 2 | 1u << 5),
            "a grid change updates those launches (changed 0x%x)", changed);
  step(&r, 300, 8); /* a buffer moved (a new allocation) */
  CHECK_MSG(flush(&r, &changed) == RT_REPLAY_HIT && changed == (1u << 2 | 1u << 5),
            "a new buffer updates the launches that bind it (changed 0x%x)", changed);
  /* another sequence (a shape bucket whose kernels differ) is its own entry */
  add(&r, 0, 1, 100, 16), add(&r, 3, 4, 300, 16);
  CHECK_MSG(flush(&r, &changed) == RT_REPLAY_DIRECT, "a new sequence: direct");
  add(&r, 0, 1, 100, 16), add(&r, 3, 4, 300, 16);
  CHECK_MSG(flush(&r, &changed) == RT_REPLAY_BUILD, "a new sequence, again: built");
  step(&r, 300, 8);
  CHECK_MSG(flush(&r, &changed) == RT_REPLAY_HIT && changed == 0, "the first one still replays");
  /* the same words under another kernel, or one launch fewer, are other sequences */
  add(&r, 1, 1, 100, 16), add(&r, 3, 4, 300, 16);
  CHECK_MSG(flush(&r, &changed) == RT_REPLAY_DIRECT, "another kernel: another sequence");
  add(&r, 0, 1, 100, 16);
  CHECK_MSG(flush(&r, &changed) == RT_REPLAY_DIRECT, "a prefix: another sequence");
  CHECK_MSG(r.stats.built == 2 && r.stats.replayed == 6 && r.stats.direct == 4,
            "stats: %llu built, %llu replayed, %llu direct", (unsigned long long)r.stats.built,
            (unsigned long long)r.stats.replayed, (unsigned long long)r.stats.direct);
  /* a backend that cannot build (a driver error) launches the sequence directly from then on */
  add(&r, 2, 1, 1, 1);
  CHECK_MSG(flush(&r, &changed) == RT_REPLAY_DIRECT, "new");
  add(&r, 2, 1, 1, 1);
  rt_replay_entry *e = NULL;
  CHECK_MSG(rt_replay_find(&r, &e) == RT_REPLAY_BUILD && e, "built");
  rt_replay_done(&r, e, false);
  for (int i = 0; i < 3; i++) {
    add(&r, 2, 1, 1, 1);
    CHECK_MSG(flush(&r, &changed) == RT_REPLAY_DIRECT, "after a failed build: direct");
  }
  rt_replay_free(&r);
  CHECK_MSG(live_impls == 0, "%d replayable forms leaked", live_impls);
}

static void test_exact_mode(void) {
  rt_replay r = {.alloc = &rt_default_allocator, .exact = true, .destroy = destroy_impl};
  unsigned changed = 0;
  for (int i = 0; i < 3; i++) {
    step(&r, 10, 7);
    rt_replay_action a = flush(&r, &changed);
    CHECK_MSG(a == (i == 0   ? RT_REPLAY_DIRECT
                    : i == 1 ? RT_REPLAY_BUILD
                             : RT_REPLAY_HIT),
              "identical batch %d: action %d", i, (int)a);
  }
  /* any other value is another batch: never the recorded one with stale values */
  step(&r, 11, 7);
  CHECK_MSG(flush(&r, &changed) == RT_REPLAY_DIRECT, "a changed value: not replayed");
  step(&r, 10, 9);
  CHECK_MSG(flush(&r, &changed) == RT_REPLAY_DIRECT, "a changed buffer: not replayed");
  step(&r, 11, 7);
  CHECK_MSG(flush(&r, &changed) == RT_REPLAY_BUILD, "the changed batch seen twice: built");
  step(&r, 10, 7);
  CHECK_MSG(flush(&r, &changed) == RT_REPLAY_HIT, "the first batch still replays");
  /* eviction: the least recently used go, their forms freed; the cache stays bounded */
  destroyed = 0;
  for (uint64_t b = 0; b < 2 * RT_REPLAY_ENTRIES; b++)
    for (int twice = 0; twice < 2; twice++) {
      step(&r, 10, 1000 + b);
      flush(&r, &changed);
    }
  CHECK_MSG(live_impls <= RT_REPLAY_ENTRIES, "%d forms alive, at most %d", live_impls,
            RT_REPLAY_ENTRIES);
  CHECK_MSG(destroyed >= RT_REPLAY_ENTRIES + 2, "%d evicted", destroyed);
  step(&r, 10, 7);
  CHECK_MSG(flush(&r, &changed) == RT_REPLAY_DIRECT, "the oldest batch was evicted");
  step(&r, 10, 1000 + 2 * RT_REPLAY_ENTRIES - 1);
  CHECK_MSG(flush(&r, &changed) == RT_REPLAY_HIT, "the newest batch is kept");
  rt_replay_clear(&r);
  CHECK_MSG(live_impls == 0, "clear frees every form (%d left)", live_impls);
  step(&r, 10, 7);
  CHECK_MSG(flush(&r, &changed) == RT_REPLAY_DIRECT, "nothing is remembered after clear");
  rt_replay_free(&r);
}

/* Host memory running out while remembering is not an error: the sequence is launched directly. */
typedef struct failing {
  long count, fail_at;
} failing;
static void *failing_realloc(void *user, void *ptr, size_t size) {
  failing *f = user;
  if (size && f->count++ == f->fail_at) return NULL;
  if (!size) {
    free(ptr);
    return NULL;
  }
  return realloc(ptr, size);
}

static void test_oom(void) {
  for (long k = 0; k < 64; k++) {
    failing f = {0, k};
    rx_rt_allocator al = {failing_realloc, &f};
    rt_replay r = {.alloc = &al, .exact = false, .destroy = destroy_impl};
    unsigned changed = 0;
    for (int i = 0; i < 4; i++) {
      uint32_t grid[3] = {1, 1, 1};
      uint64_t w[2] = {1, 2};
      rx_status s = rt_replay_add(&r, &kernels[0], grid, w, 2);
      if (s) { /* the backend reports it; the log stays consistent */
        CHECK_MSG(rx_status_code_of(s) == RX_ERR_OUT_OF_MEMORY, "%s", rx_status_message(s));
        rx_status_free(s);
      }
      flush(&r, &changed);
    }
    rt_replay_free(&r);
  }
  CHECK_MSG(live_impls == 0, "%d forms leaked under failing allocations", live_impls);
}

int main(void) {
  test_update_mode();
  test_exact_mode();
  test_oom();
  return check_finish("runtime.replay");
}
