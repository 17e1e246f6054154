/* relaxc/autobatch.h: the runtime batcher of independent calls (ACRoBat-style auto-batching,
 * runtime/autobatch.c, docs/autobatch.md).
 *
 * A program with dynamic control flow (a TreeLSTM over parse trees, an RNN over sequences of
 * different lengths) makes many small calls of one cell function. The caller submits them all,
 * each with its arguments: tensors, or outputs of other submitted calls (its dependencies). The
 * batcher then repeatedly takes every ready call of one function (all of its dependencies done;
 * which function first is the policy's choice: rx_rt_batcher_set_policy)
 * whose shared arguments are the same tensors and whose batched arguments have the same shapes,
 * stacks their batched arguments along a new leading axis, makes ONE call of the function's
 * batched form (rx_batch_function, relaxc compile --batch FN:SHARED) and gives each call its row
 * of the outputs. A tree runs depth by depth, an RNN step by step over the sequences still
 * running. Stacking is a device copy unless the batch's arguments are rows 0..G-1 of one earlier
 * output (a view: the memory planning places outputs in their readers' order), or rows of one
 * earlier output or one caller's tensor for every call, passed to the function's index-array
 * form (rx_batch_function_gather) with an index array (a gather: docs/autobatch.md).
 *
 * Conventions as in relaxc/runtime.h: statuses name what failed; out-parameters are zeroed first;
 * host memory comes from the artifact device's allocator; one thread at a time. */
#ifndef RELAXC_AUTOBATCH_H
#define RELAXC_AUTOBATCH_H

#include "runtime.h"

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct rx_rt_batcher rx_rt_batcher;

/* An argument of a submitted call: tensor (not NULL), or else output `output` of the call whose
 * id is `call` (it may be submitted later, before rx_rt_batcher_run). */
typedef struct rx_rt_batch_arg {
  rx_rt_tensor *tensor;
  size_t call;
  size_t output;
} rx_rt_batch_arg;

/* A batcher over the functions of artifact a (which must have a device); retains a. */
RX_API rx_status rx_rt_batcher_create(rx_rt_artifact *a, rx_rt_batcher **out_batcher);
RX_API void rx_rt_batcher_release(rx_rt_batcher *b); /* NULL is fine; releases every result too */

/* Registers function fn of the artifact with its batched form batched_fn (the same parameters,
 * those not shared with a leading batch dimension); shared[i] tells whether parameter i is
 * shared (passed as is; every call of one batch must pass the same tensor). nparams must be
 * fn's parameter count. A batch holds at most N calls when batched_fn has the fact
 * `batch <= N` (relaxc compile --batch FN:SHARED@N); more ready calls wait for the next round. */
RX_API rx_status rx_rt_batcher_add_function(rx_rt_batcher *b, const char *fn,
                                            const char *batched_fn, const bool *shared,
                                            size_t nparams);

/* Submits a call of fn (registered) with n arguments; *out_call is its id (0, 1, ... in order).
 * A tensor argument is retained; its dtype and rank are checked against fn's parameter. */
RX_API rx_status rx_rt_batcher_submit(rx_rt_batcher *b, const char *fn, const rx_rt_batch_arg *args,
                                      size_t n, size_t *out_call);

/* Runs every submitted call not run yet, in batches. Errors: an argument naming a call that does
 * not exist or an output it does not have, calls that wait on each other (a cycle), an output
 * of the wrong dtype or rank for the parameter it feeds, and whatever the batched call reports
 * (a shape mismatch names the batched function, the parameter and both shapes). After an error
 * the calls not run stay pending. */
RX_API rx_status rx_rt_batcher_run(rx_rt_batcher *b);

/* How rx_rt_batcher_run picks the next batch among the ready calls (docs/autobatch.md,
 * "Policies"). */
typedef enum rx_rt_batch_policy {
  RX_RT_BATCH_ROUNDS = 0, /* the first ready call's function, every ready call that joins it */
  RX_RT_BATCH_DEPTH,      /* ACRoBat: the ready calls of the least depth (1 + max over deps) */
  RX_RT_BATCH_AGENDA,     /* DyNet: the function with the most ready calls */
  RX_RT_BATCH_FSM,        /* ED-Batch: a learned table from the ready frontier's encoding to the
                             function to batch next */
  RX_RT_BATCH_ONE,        /* one call at a time, the unbatched function: the baseline */
} rx_rt_batch_policy;
RX_API rx_status rx_rt_batcher_set_policy(rx_rt_batcher *b, rx_rt_batch_policy p);
/* "rounds", "depth", "agenda", "fsm", "one"; NULL for a value out of range. */
RX_API const char *rx_rt_batch_policy_name(rx_rt_batch_policy p);

/* Whether a batch the policy chose runs batched or as its calls one at a time through the
 * unbatched function (a batch of one call always runs unbatched). n = 0, the default: measured
 * per function (cost-aware batching, docs/autobatch.md): in the first two batchers of an
 * artifact, the first rounds of each function time unbatched and batched calls on the device (a
 * synchronization around each; 9 and 5, the first of each a warm-up), which give the crossover
 * g*, the least batch size whose batched call is predicted to cost at most 0.9 of g* unbatched
 * calls; batches of fewer calls run unbatched. The artifact keeps g* (from both batchers' samples),
 * and later batchers of it take it and time nothing. Which rounds run batched depends on the
 * measured times (the launch count may differ between runs of the program).
 * n >= 2 forces: a batch of fewer than n calls runs unbatched, nothing is timed (n = 2: every
 * batch of two or more runs batched, deterministic launch counts). n = 1 is an error. */
RX_API rx_status rx_rt_batcher_set_min_batch(rx_rt_batcher *b, size_t n);
/* The crossover of registered function fn: the forced min batch when set, else the measured g*
 * (this batcher's, or the one the artifact keeps; 0 while fn calibrates, SIZE_MAX when batching
 * never pays). */
RX_API rx_status rx_rt_batcher_get_crossover(const rx_rt_batcher *b, const char *fn, size_t *out_g);
/* Gives registered function fn's crossover to this batcher instead of measuring it: g >= 2, or
 * SIZE_MAX (never batch), e.g. a value rx_rt_batcher_get_crossover reported in an earlier process
 * that the caller kept; fn is then timed in no round (with min batch 0). g < 2 is an error. */
RX_API rx_status rx_rt_batcher_set_crossover(rx_rt_batcher *b, const char *fn, size_t g);
/* The FSM policy's table: learned by tabular Q-learning from `episodes` simulated runs of the
 * calls submitted and not run yet (their dependencies and functions only: no device work;
 * reward -1 per batch), seeded; a run under RX_RT_BATCH_FSM without a table takes the one the
 * artifact carries (relaxc compile --batch-policy TABLE, rx_module_set_batch_policy: an error
 * when the batcher's functions are not the table's, in its order), else trains one first
 * (300 episodes, seed 1). At most 6 registered functions. save writes the table as bytes into
 * buf (cap bytes; buf NULL asks the size) and *out_len their count; load reads them back into a
 * batcher whose functions were registered under the same names in the same order, checking
 * every entry. The bytes are the caller's to keep: a side file, or TABLE of relaxc compile
 * --batch-policy, which puts them in the artifact. */
RX_API rx_status rx_rt_batcher_train(rx_rt_batcher *b, size_t episodes, uint64_t seed);
RX_API rx_status rx_rt_batcher_policy_save(const rx_rt_batcher *b, void *buf, size_t cap,
                                           size_t *out_len);
RX_API rx_status rx_rt_batcher_policy_load(rx_rt_batcher *b, const void *bytes, size_t len);

/* Output `output` of call `call` once run: a tensor of its own (made at the first request, by
 * a device copy of its row of the batch's output); borrowed: valid until the batcher is
 * released; retain it to keep it longer. */
RX_API rx_status rx_rt_batcher_output(rx_rt_batcher *b, size_t call, size_t output,
                                      rx_rt_tensor **out_tensor);

typedef struct rx_rt_batcher_stats {
  size_t calls;         /* calls run */
  size_t batched_calls; /* calls of batched forms made for them */
  size_t max_batch;     /* the largest batch */
  size_t launches;      /* calls of functions made by the batcher (batched or not): the metric
                           ED-Batch minimizes */
  size_t copies;        /* device copies the batcher made to stack operands / split outputs (not
                           rx_rt_batcher_output's, made on the caller's request) */
  size_t copy_bytes;    /* their bytes */
  size_t views;         /* operands passed as a view of an earlier output instead of a copy */
  size_t gathers;       /* operands passed as an index array into a fused-gather form */
} rx_rt_batcher_stats;
/* Whether the batcher may pass scattered rows of earlier outputs to the index-array form of a
 * function (rx_batch_function_gather, relaxc compile --batch FN:SHARED@N,gather: the artifact's
 * "<batched_fn>_gather") instead of copying them (default: on, where the artifact has the form).
 * Off: every batch uses batched_fn and its operands are copied as before. */
RX_API rx_status rx_rt_batcher_set_gather(rx_rt_batcher *b, bool on);

/* Whether the batcher plans where outputs go from the depth schedule of the calls submitted
 * (default: on): a function whose batches read their operands from one earlier batch (a chain)
 * gets each batch's outputs in the order of their readers, so the next batch takes its operands
 * as a view (no copy); a function whose batches read outputs of batches of several depths (a
 * tree) gets an arena per output, one tensor for the run, so that the next batch gathers its
 * operands from one tensor (with the gather form). Off: outputs in batch order, a tensor each. */
RX_API rx_status rx_rt_batcher_set_planning(rx_rt_batcher *b, bool on);

RX_API void rx_rt_batcher_get_stats(const rx_rt_batcher *b, rx_rt_batcher_stats *out_stats);

#ifdef __cplusplus
}
#endif
#endif
