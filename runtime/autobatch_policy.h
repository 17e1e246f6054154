/* runtime/autobatch_policy.h: the batcher's choice of the next batch (runtime/autobatch_policy.c),
 * kept apart from the batcher's calls and tensors: the policies see the ready frontier as counts
 * of ready calls per registered function, and the FSM's training sees the submitted calls as a
 * dependency graph of function types. docs/autobatch.md, "Policies". */
#ifndef RX_RUNTIME_AUTOBATCH_POLICY_H
#define RX_RUNTIME_AUTOBATCH_POLICY_H

#include <stdint.h>

#include "device.h"
#include "relaxc/autobatch.h"

enum {
  RT_ABP_MAX_FNS = 6, /* functions an FSM table covers: 4^6 states */
  RT_ABP_BUCKETS = 4, /* a count of ready calls as 0, 1, 2-3, 4+ */
  RT_ABP_NONE = 0xff, /* a state the training never reached: the agenda rule decides */
};

/* The learned table: one action (a function index, or RT_ABP_NONE) per state. */
typedef struct rt_abp_fsm {
  size_t nfns;
  size_t nstates; /* RT_ABP_BUCKETS^nfns */
  uint8_t *action;
} rt_abp_fsm;

/* The submitted calls still to run as a graph: call i runs function fn[i] and waits on the calls
 * deps[dep_start[i] .. dep_start[i + 1]) (indices into the graph); max_batch[f]: function f's
 * bound. */
typedef struct rt_abp_graph {
  size_t n, nfns;
  const size_t *fn;
  const size_t *dep_start, *deps;
  const size_t *max_batch;
} rt_abp_graph;

/* The state index of the frontier's counts. */
size_t rt_abp_encode(const size_t *ready_count, size_t nfns);

/* The function whose ready calls the policy batches next, given the ready calls' counts per
 * function (one at least is not zero) and the function of the first ready call (ROUNDS).
 * Not for DEPTH (per call: runtime/autobatch.c). O(nfns). */
size_t rt_abp_choose(rx_rt_batch_policy p, const rt_abp_fsm *fsm, const size_t *ready_count,
                     size_t nfns, size_t first_fn);

/* Trains fsm by tabular Q-learning over episodes runs of g simulated (no device work). */
rx_status rt_abp_train(const rx_rt_allocator *al, const rt_abp_graph *g, size_t episodes,
                       uint64_t seed, rt_abp_fsm *fsm);

/* The number of batches policy p (ROUNDS, AGENDA, FSM) makes on g in simulation. */
size_t rt_abp_simulate(const rx_rt_allocator *al, const rt_abp_graph *g, rx_rt_batch_policy p,
                       const rt_abp_fsm *fsm);

/* Cost-aware batching (docs/autobatch.md, "Cost-aware batching"): the crossover g* of one
 * function, the least batch size whose batched call is predicted cheaper than g unbatched calls,
 * from measured times (seconds, each with a device synchronization before and after). single[]:
 * unbatched calls; bt[k]: a batched call of bg[k] calls. The first sample of each kind is a
 * warm-up (the VM's first call allocates its planned storage) and is left out; an unbatched call
 * costs s, the least of the others; a batched call of g costs a + c g, the line through the
 * other batched samples (c = 0 and a their least when their sizes are equal; c >= 0, a >= 0).
 * g* = the least g >= 2 with a + c g < g s, or SIZE_MAX when s <= c (never batch). Needs at
 * least 2 samples of each kind (else returns 0: not calibrated). Deterministic: the same
 * measurements give the same g*. */
size_t rt_abp_crossover(const double *single, size_t nsingle, const double *bt, const size_t *bg,
                        size_t nbatched);

void rt_abp_fsm_free(const rx_rt_allocator *al, rt_abp_fsm *fsm);

/* The table as bytes: "RXABFSM1", u32 nfns, per function u32 length and its name, then the
 * nstates actions (little-endian). save: *out_len is the size; buf may be NULL to ask it. */
rx_status rt_abp_save(const rt_abp_fsm *fsm, const char *const *names, void *buf, size_t cap,
                      size_t *out_len);
/* Reads bytes into fsm (on success; left as it was on error), checking the names and that every
 * action is a function with ready calls in its state. */
rx_status rt_abp_load(const rx_rt_allocator *al, const void *bytes, size_t len,
                      const char *const *names, size_t nfns, rt_abp_fsm *fsm);

/* The table's bytes checked without a batcher: bounds, magic, version, the function count, the
 * names' lengths, one action per state, every action a function with ready calls in its state.
 * where prefixes the messages ("batcher: policy_load", "t.rxm: section 'batch_policy.fsm'");
 * out (when not NULL) gets the names (pointers into bytes, not NUL-terminated) and the count of
 * states whose action was learned. rt_abp_load is this and the names' check. */
typedef struct rt_abp_table {
  size_t nfns, nstates, learned;
  const char *name[RT_ABP_MAX_FNS];
  size_t name_len[RT_ABP_MAX_FNS];
  const uint8_t *action;
} rt_abp_table;
rx_status rt_abp_parse(const void *bytes, size_t len, const char *where, rt_abp_table *out);

/* The artifact section that carries a module's table (relaxc compile --batch-policy TABLE): a
 * batcher under the FSM policy with no table of its own uses it (runtime/autobatch.c). */
#define RT_ABP_SECTION "batch_policy.fsm"

#endif
