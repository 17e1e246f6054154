/* runtime/autobatch_policy.c: the batcher's policies over the ready frontier (autobatch_policy.h),
 * ED-Batch's learned FSM among them.
 *
 * The frontier is seen as the counts of ready calls per registered function. ROUNDS takes the
 * function of the first ready call, AGENDA (DyNet's agenda, in its "most ready nodes" form) the
 * function with the most ready calls, and FSM looks the frontier's state up in a table: each
 * count capped into 4 buckets (0, 1, 2-3, 4+), the state the number in base 4 whose digit f is
 * function f's bucket, the table one action (the function to batch) per state: O(1) per
 * decision once the counts are known. The table is learned by tabular Q-learning (ED-Batch,
 * section 3): an episode runs the submitted calls in simulation (no device work: the dependency
 * graph and each function's batch bound only), every batch costs a reward of -1, so the values
 * learned are minus the batches still to make, and the greedy action of each state reached is
 * kept. The first two episodes follow AGENDA and ROUNDS (Q-learning learns off-policy, so the
 * heuristics' runs seed the values), the rest are epsilon-greedy with epsilon falling from 1 to
 * 0.05. */
#include "autobatch_policy.h"

#include <stdlib.h>
#include <string.h>

static size_t bucket(size_t count) { return count == 0 ? 0 : count == 1 ? 1 : count < 4 ? 2 : 3; }

size_t rt_abp_encode(const size_t *ready_count, size_t nfns) {
  size_t s = 0;
  for (size_t f = nfns; f-- > 0;) s = s * RT_ABP_BUCKETS + bucket(ready_count[f]);
  return s;
}

static size_t agenda(const size_t *ready_count, size_t nfns) {
  size_t best = 0;
  for (size_t f = 1; f < nfns; f++)
    if (ready_count[f] > ready_count[best]) best = f;
  return best;
}

size_t rt_abp_choose(rx_rt_batch_policy p, const rt_abp_fsm *fsm, const size_t *ready_count,
                     size_t nfns, size_t first_fn) {
  if (p == RX_RT_BATCH_FSM && fsm && fsm->action && fsm->nfns == nfns) {
    uint8_t a = fsm->action[rt_abp_encode(ready_count, nfns)];
    if (a != RT_ABP_NONE && a < nfns && ready_count[a]) return a;
  }
  if (p == RX_RT_BATCH_AGENDA || p == RX_RT_BATCH_FSM) return agenda(ready_count, nfns);
  return first_fn;
}

size_t rt_abp_crossover(const double *single, size_t nsingle, const double *bt, const size_t *bg,
                        size_t nbatched) {
  if (nsingle < 2 || nbatched < 2) return 0;
  double s = single[1];
  for (size_t k = 2; k < nsingle; k++)
    if (single[k] < s) s = single[k];
  /* the line through the batched samples after the warm-up: the smallest and the largest size
   * (the least time of each), or a constant when every sample has one size */
  size_t lo = 1, hi = 1;
  for (size_t k = 2; k < nbatched; k++) {
    if (bg[k] < bg[lo] || (bg[k] == bg[lo] && bt[k] < bt[lo])) lo = k;
    if (bg[k] > bg[hi] || (bg[k] == bg[hi] && bt[k] < bt[hi])) hi = k;
  }
  double c = 0, a = bt[lo] < bt[hi] ? bt[lo] : bt[hi];
  if (bg[hi] > bg[lo]) {
    c = (bt[hi] - bt[lo]) / (double)(bg[hi] - bg[lo]);
    if (c < 0) c = 0;
    a = bt[lo] - c * (double)bg[lo];
    if (a < 0) a = 0;
  }
  if (!(s > c)) return SIZE_MAX;
  double x = a / (s - c); /* batch when g > x */
  if (x >= 1e9) return SIZE_MAX;
  size_t g = (size_t)x + 1;
  return g < 2 ? 2 : g;
}

void rt_abp_fsm_free(const rx_rt_allocator *al, rt_abp_fsm *fsm) {
  rt_free(al, fsm->action);
  memset(fsm, 0, sizeof *fsm);
}

/* ---- the simulation ---- */

typedef struct sim {
  const rt_abp_graph *g;
  size_t *pending;            /* per call: dependencies not run */
  size_t *user_start, *users; /* the calls that wait on each call */
  bool *done;
  size_t count[RT_ABP_MAX_FNS + 1]; /* ready calls per function (nfns <= RT_ABP_MAX_FNS) */
  size_t left, first;               /* calls not run; calls before first are done */
} sim;

static void sim_free(const rx_rt_allocator *al, sim *s) {
  rt_free(al, s->pending);
  rt_free(al, s->user_start);
  rt_free(al, s->users);
  rt_free(al, s->done);
}

static bool sim_make(const rx_rt_allocator *al, const rt_abp_graph *g, sim *s) {
  memset(s, 0, sizeof *s);
  s->g = g;
  size_t nd = g->dep_start[g->n];
  s->pending = rt_alloc(al, sizeof *s->pending * (g->n + 1));
  s->user_start = rt_alloc(al, sizeof *s->user_start * (g->n + 2));
  s->users = rt_alloc(al, sizeof *s->users * (nd + 1));
  s->done = rt_alloc(al, sizeof *s->done * (g->n + 1));
  if (!s->pending || !s->user_start || !s->users || !s->done) return false;
  for (size_t k = 0; k < nd; k++) s->user_start[g->deps[k] + 2]++;
  for (size_t i = 0; i < g->n; i++) s->user_start[i + 2] += s->user_start[i + 1];
  for (size_t i = 0; i < g->n; i++)
    for (size_t k = g->dep_start[i]; k < g->dep_start[i + 1]; k++)
      s->users[s->user_start[g->deps[k] + 1]++] = i;
  return true;
}

static void sim_reset(sim *s) {
  const rt_abp_graph *g = s->g;
  memset(s->count, 0, sizeof s->count);
  for (size_t i = 0; i < g->n; i++) {
    s->done[i] = false;
    s->pending[i] = g->dep_start[i + 1] - g->dep_start[i];
    if (!s->pending[i]) s->count[g->fn[i]]++;
  }
  s->left = g->n;
  s->first = 0;
}

/* The function of the first ready call. */
static size_t sim_first_fn(sim *s) {
  while (s->done[s->first]) s->first++;
  for (size_t i = s->first; i < s->g->n; i++)
    if (!s->done[i] && !s->pending[i]) return s->g->fn[i];
  return 0;
}

/* Runs one batch of function f's ready calls (the first max_batch in submission order). */
static void sim_step(sim *s, size_t f) {
  const rt_abp_graph *g = s->g;
  size_t take = s->count[f] < g->max_batch[f] ? s->count[f] : g->max_batch[f];
  for (size_t i = s->first; i < g->n && take; i++) {
    if (s->done[i] || s->pending[i] || g->fn[i] != f) continue;
    s->done[i] = true; /* its users are released after the batch: they are not in it */
    take--;
    s->count[f]--;
    s->left--;
    s->pending[i] = SIZE_MAX; /* marks "in this batch" */
  }
  for (size_t i = s->first; i < g->n; i++) {
    if (s->pending[i] != SIZE_MAX) continue;
    s->pending[i] = 0;
    for (size_t k = s->user_start[i]; k < s->user_start[i + 1]; k++)
      if (--s->pending[s->users[k]] == 0) s->count[g->fn[s->users[k]]]++;
  }
}

/* The batches policy p makes on s's graph; visited (when not NULL) marks the states met. */
static size_t sim_run(sim *s, rx_rt_batch_policy p, const rt_abp_fsm *fsm, bool *visited) {
  size_t batches = 0, nfns = s->g->nfns;
  sim_reset(s);
  while (s->left) {
    if (visited) visited[rt_abp_encode(s->count, nfns)] = true;
    size_t f = rt_abp_choose(p, fsm, s->count, nfns, sim_first_fn(s));
    if (!s->count[f]) break; /* a cycle */
    sim_step(s, f);
    batches++;
  }
  return batches;
}

size_t rt_abp_simulate(const rx_rt_allocator *al, const rt_abp_graph *g, rx_rt_batch_policy p,
                       const rt_abp_fsm *fsm) {
  sim s = {0}; /* freed whole even when sim_make is not called (too many functions) */
  size_t batches = 0;
  if (g->nfns <= RT_ABP_MAX_FNS && sim_make(al, g, &s)) batches = sim_run(&s, p, fsm, NULL);
  sim_free(al, &s);
  return batches;
}

/* The search's simulated runs: 4 per training episode, at most this. */
#define ABP_SEARCH_SIMS 4000

/* The table improved by a local search after the Q-learning: the frontier's state is the
 * bucketed counts only, not a Markov state of the run, so the greedy table of the learned values
 * need not be the best table; each pass tries, for every state the current table's simulated run
 * meets, every other action (each function with ready calls there, or RT_ABP_NONE: the agenda
 * rule) and keeps a change that makes fewer batches in simulation. It starts from the better of
 * the learned table and the all-agenda table (all RT_ABP_NONE), so the result never makes more
 * batches in simulation than either. At most `budget` simulated runs (deterministic). */
static void improve(sim *s, rt_abp_fsm *fsm, bool *visited, size_t budget) {
  size_t nfns = s->g->nfns, sims = 0;
  size_t best = sim_run(s, RX_RT_BATCH_FSM, fsm, NULL);
  size_t agenda_only = sim_run(s, RX_RT_BATCH_AGENDA, NULL, NULL);
  if (agenda_only < best) {
    memset(fsm->action, RT_ABP_NONE, fsm->nstates);
    best = agenda_only;
  }
  for (int pass = 0; pass < 8 && sims < budget; pass++) {
    bool better = false;
    memset(visited, 0, fsm->nstates);
    sim_run(s, RX_RT_BATCH_FSM, fsm, visited);
    for (size_t st = 0; st < fsm->nstates && sims < budget; st++) {
      if (!visited[st]) continue;
      for (size_t a = 0; a <= nfns && sims < budget; a++) {
        uint8_t act = a == nfns ? RT_ABP_NONE : (uint8_t)a, old = fsm->action[st];
        size_t digits = st; /* function f's bucket is digit f of the state in base 4 */
        for (size_t f = 0; f < a && a < nfns; f++) digits /= RT_ABP_BUCKETS;
        if (act == old || (a < nfns && digits % RT_ABP_BUCKETS == 0)) continue; /* none ready */
        fsm->action[st] = act;
        size_t v = sim_run(s, RX_RT_BATCH_FSM, fsm, NULL);
        sims++;
        if (v < best) {
          best = v;
          better = true;
        } else {
          fsm->action[st] = old;
        }
      }
    }
    if (!better) break;
  }
}

/* ---- Q-learning ---- */

static uint32_t lcg(uint64_t *s) {
  *s = *s * 6364136223846793005ull + 1442695040888963407ull;
  return (uint32_t)(*s >> 33);
}

/* The valid action of state counts with the largest value; ties go to the agenda's choice. */
static size_t greedy(const float *q, const size_t *count, size_t nfns, float *out_value) {
  size_t best = agenda(count, nfns);
  for (size_t f = 0; f < nfns; f++)
    if (count[f] && q[f] > q[best]) best = f;
  if (out_value) *out_value = q[best];
  return best;
}

static size_t explore(uint64_t *rng, const size_t *count, size_t nfns) {
  size_t valid = 0;
  for (size_t f = 0; f < nfns; f++) valid += count[f] > 0;
  size_t pick = lcg(rng) % valid;
  for (size_t f = 0; f < nfns; f++)
    if (count[f] && pick-- == 0) return f;
  return 0;
}

rx_status rt_abp_train(const rx_rt_allocator *al, const rt_abp_graph *g, size_t episodes,
                       uint64_t seed, rt_abp_fsm *fsm) {
  if (g->nfns == 0 || g->nfns > RT_ABP_MAX_FNS)
    return base_status_make(RX_ERR_UNSUPPORTED,
                            "batcher: train: the FSM policy covers 1 to %d functions, not %zu",
                            RT_ABP_MAX_FNS, g->nfns);
  size_t nstates = 1;
  for (size_t f = 0; f < g->nfns; f++) nstates *= RT_ABP_BUCKETS;
  float *q = rt_alloc(al, sizeof *q * nstates * g->nfns);
  bool *seen = rt_alloc(al, sizeof *seen * nstates);
  uint8_t *action = rt_alloc(al, nstates);
  sim s;
  bool made = sim_make(al, g, &s);
  if (!q || !seen || !action || !made) {
    rt_free(al, q);
    rt_free(al, seen);
    rt_free(al, action);
    sim_free(al, &s);
    return rt_oom("the FSM's Q table", sizeof *q * nstates * g->nfns);
  }
  uint64_t rng = seed ? seed : 1;
  const float alpha = 0.5f;
  for (size_t ep = 0; ep < episodes + 2; ep++) {
    sim_reset(&s);
    double eps = ep < 2 ? 0 : 1.0 - (double)(ep - 2) / (0.7 * (double)(episodes ? episodes : 1));
    if (eps < 0.05) eps = 0.05;
    size_t steps = 0;
    while (s.left && steps++ <= g->n) {
      size_t st = rt_abp_encode(s.count, g->nfns), f;
      float *qs = q + st * g->nfns;
      if (ep == 0)
        f = agenda(s.count, g->nfns);
      else if (ep == 1)
        f = sim_first_fn(&s);
      else if ((double)(lcg(&rng) & 0xffffff) / 0x1000000 < eps)
        f = explore(&rng, s.count, g->nfns);
      else
        f = greedy(qs, s.count, g->nfns, NULL);
      if (!s.count[f]) break; /* a cycle: no ready call */
      seen[st] = true;
      sim_step(&s, f);
      float next = 0;
      if (s.left) greedy(q + rt_abp_encode(s.count, g->nfns) * g->nfns, s.count, g->nfns, &next);
      bool stuck = s.left && !rt_abp_encode(s.count, g->nfns);
      qs[f] += alpha * (-1.0f + (stuck ? 0 : next) - qs[f]);
    }
  }
  size_t count[RT_ABP_MAX_FNS];
  for (size_t st = 0; st < nstates; st++) {
    action[st] = RT_ABP_NONE;
    if (!seen[st]) continue;
    for (size_t f = 0, v = st; f < g->nfns; f++, v /= RT_ABP_BUCKETS)
      count[f] = v % RT_ABP_BUCKETS; /* the bucket: 0 exactly when no ready call */
    action[st] = (uint8_t)greedy(q + st * g->nfns, count, g->nfns, NULL);
  }
  rt_free(al, q);
  rt_abp_fsm_free(al, fsm);
  fsm->nfns = g->nfns;
  fsm->nstates = nstates;
  fsm->action = action;
  size_t budget = episodes < ABP_SEARCH_SIMS / 4 ? 4 * episodes : ABP_SEARCH_SIMS;
  improve(&s, fsm, seen, budget); /* seen: scratch from here */
  rt_free(al, seen);
  sim_free(al, &s);
  return NULL;
}

/* ---- the table as bytes ---- */

static const char fsm_magic[8] = {'R', 'X', 'A', 'B', 'F', 'S', 'M', '1'};

static void put_u32(unsigned char *p, size_t v) {
  for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
}

static uint32_t get_u32(const unsigned char *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

rx_status rt_abp_save(const rt_abp_fsm *fsm, const char *const *names, void *buf, size_t cap,
                      size_t *out_len) {
  *out_len = 0;
  if (!fsm->action)
    return base_status_make(RX_ERR_INVALID, "batcher: policy_save: no FSM table (train first)");
  size_t len = sizeof fsm_magic + 4 + fsm->nstates;
  for (size_t f = 0; f < fsm->nfns; f++) len += 4 + strlen(names[f]);
  *out_len = len;
  if (!buf) return NULL;
  if (cap < len)
    return base_status_make(RX_ERR_INVALID, "batcher: policy_save: %zu bytes needed, %zu given",
                            len, cap);
  unsigned char *p = buf;
  memcpy(p, fsm_magic, sizeof fsm_magic);
  p += sizeof fsm_magic;
  put_u32(p, fsm->nfns);
  p += 4;
  for (size_t f = 0; f < fsm->nfns; f++) {
    size_t n = strlen(names[f]);
    put_u32(p, n);
    memcpy(p + 4, names[f], n);
    p += 4 + n;
  }
  memcpy(p, fsm->action, fsm->nstates);
  return NULL;
}

/* The magic without its last byte, the version ('1'): a table of another version is named so. */
#define FSM_MAGIC_STEM 7

rx_status rt_abp_parse(const void *bytes, size_t len, const char *where, rt_abp_table *out) {
  rt_abp_table t;
  memset(&t, 0, sizeof t);
  if (!bytes) len = 0;
  const unsigned char *p = bytes, *end = bytes ? p + len : p; /* no arithmetic on NULL */
  if (!bytes || len < sizeof fsm_magic + 4 || memcmp(p, fsm_magic, FSM_MAGIC_STEM) != 0)
    return base_status_make(RX_ERR_INVALID,
                            "%s: not an FSM table (expected the magic 'RXABFSM1' and a function "
                            "count, %zu bytes given)",
                            where, len);
  unsigned char ver = p[FSM_MAGIC_STEM];
  if (ver != (unsigned char)fsm_magic[FSM_MAGIC_STEM])
    return base_status_make(RX_ERR_UNSUPPORTED,
                            "%s: an FSM table of version '%c' (byte 0x%02x); this runtime reads "
                            "version '1'",
                            where, ver > ' ' && ver < 127 ? ver : '?', ver);
  p += sizeof fsm_magic;
  size_t n = get_u32(p);
  p += 4;
  if (n == 0 || n > RT_ABP_MAX_FNS)
    return base_status_make(RX_ERR_INVALID, "%s: the table covers %zu functions (1 to %d)", where,
                            n, RT_ABP_MAX_FNS);
  for (size_t f = 0; f < n; f++) {
    size_t k = (size_t)(end - p) >= 4 ? get_u32(p) : SIZE_MAX;
    if (k == SIZE_MAX || (size_t)(end - p) - 4 < k || k == 0)
      return base_status_make(RX_ERR_INVALID, "%s: function %zu's name %s (at byte %zu of %zu)",
                              where, f, k == 0 ? "is empty" : "runs past the end",
                              (size_t)(p - (const unsigned char *)bytes), len);
    t.name[f] = (const char *)p + 4;
    t.name_len[f] = k;
    p += 4 + k;
  }
  size_t nstates = 1;
  for (size_t f = 0; f < n; f++) nstates *= RT_ABP_BUCKETS;
  if ((size_t)(end - p) != nstates)
    return base_status_make(RX_ERR_INVALID,
                            "%s: %zu bytes of actions, expected %zu (one per state of %zu "
                            "functions)",
                            where, (size_t)(end - p), nstates, n);
  for (size_t st = 0; st < nstates; st++) {
    size_t a = p[st], v = st;
    for (size_t f = 0; f < a && a < n; f++) v /= RT_ABP_BUCKETS;
    if (a != RT_ABP_NONE && (a >= n || v % RT_ABP_BUCKETS == 0))
      return base_status_make(RX_ERR_INVALID,
                              "%s: state %zu's action %zu names a function with no ready call "
                              "in that state",
                              where, st, a);
    t.learned += a != RT_ABP_NONE;
  }
  t.nfns = n;
  t.nstates = nstates;
  t.action = p;
  if (out) *out = t;
  return NULL;
}

rx_status rt_abp_load(const rx_rt_allocator *al, const void *bytes, size_t len,
                      const char *const *names, size_t nfns, rt_abp_fsm *fsm) {
  rt_abp_table t;
  RX_RETURN_IF_ERROR(rt_abp_parse(bytes, len, "batcher: policy_load", &t));
  if (t.nfns != nfns)
    return base_status_make(RX_ERR_INVALID,
                            "batcher: policy_load: the table covers %zu functions, the batcher has "
                            "%zu registered",
                            t.nfns, nfns);
  for (size_t f = 0; f < t.nfns; f++) {
    size_t k = t.name_len[f];
    if (k != strlen(names[f]) || memcmp(t.name[f], names[f], k) != 0)
      return base_status_make(RX_ERR_INVALID,
                              "batcher: policy_load: function %zu is '%.*s' in the table, '%s' in "
                              "the batcher (register them in the same order)",
                              f, (int)(k > 64 ? 64 : k), t.name[f], names[f]);
  }
  uint8_t *action = rt_alloc(al, t.nstates);
  if (!action) return rt_oom("an FSM table", t.nstates);
  memcpy(action, t.action, t.nstates);
  rt_abp_fsm_free(al, fsm);
  fsm->nfns = t.nfns;
  fsm->nstates = t.nstates;
  fsm->action = action;
  return NULL;
}
