/* tests/ccl/tp_llm_test.c: a tensor-parallel LLM (the Megatron preset, `relaxc compile HF_DIR
 * --tensor-parallel N`) under mpirun against the same model compiled whole, on lavapipe:
 *
 *   mpirun -n N tp_llm_test SHARDED.rxm WHOLE.rxm [--quick]
 *
 * (--quick: 2 decode steps instead of 5 and a greedy generation of 6 tokens instead of 12, for
 * the models quantized at import, whose kernels run slower on lavapipe.)
 *
 * SHARDED may as well be N pipeline stages (`relaxc compile HF_DIR --pipeline-parallel N`): the
 * stages' layers run one after another with the same kernels (measured: the logits equal the
 * whole model's bit for bit; the same 1e-5 tolerance holds them).
 *
 * Every rank loads its part of SHARDED with the MPI communicator; ranks 1.. follow rank 0
 * (rx_llm_model_follow). Rank 0 also loads WHOLE in one process (no communicator) and runs the
 * same calls on both: a packed prefill of three sequences of 1, 7 and 33 tokens, a chunked
 * continuation of one of them, decode steps of all three (each fed its greedy token), and a
 * greedy generation. The logits must agree within 1e-5 relative L2 per row (the ranks' partial
 * sums add in another order than one GEMM's), the greedy tokens exactly. Both models are f32
 * (the preset's allreduce adds the residual stream's f32 partial sums). */
#include "relaxc/ccl.h"
#include "relaxc/llm.h"

#include "check.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { V_MAX = 1 << 16, B = 3 };

static double max_rel = 0; /* the largest relative L2 error of a logits row seen */
static int decode_steps = 5, greedy_tokens = 12; /* --quick: 2 and 6 */

/* rows of vocab logits of the sharded model (a) against the whole one's (b): relative L2 per row,
 * and the same argmax (greedy token) per row. */
static void compare(const char *what, const float *a, const float *b, size_t rows, int32_t vocab) {
  for (size_t r = 0; r < rows; r++) {
    double num = 0, den = 0;
    int32_t ia = 0, ib = 0;
    for (int32_t v = 0; v < vocab; v++) {
      double d = (double)a[r * vocab + v] - b[r * vocab + v];
      num += d * d;
      den += (double)b[r * vocab + v] * b[r * vocab + v];
      if (a[r * vocab + v] > a[r * vocab + ia]) ia = v;
      if (b[r * vocab + v] > b[r * vocab + ib]) ib = v;
    }
    double rel = sqrt(num / (den > 0 ? den : 1));
    if (rel > max_rel) max_rel = rel;
    CHECK_MSG(rel <= 1e-5, "%s, row %zu: relative L2 %.3g > 1e-5", what, r, rel);
    CHECK_MSG(ia == ib, "%s, row %zu: greedy token %d, unsharded %d", what, r, ia, ib);
  }
}

static int32_t argmax(const float *x, int32_t n) {
  int32_t k = 0;
  for (int32_t i = 1; i < n; i++)
    if (x[i] > x[k]) k = i;
  return k;
}

/* Rank 0: the same calls on the sharded model s and the whole one w. */
static void drive(rx_llm_model *s, rx_llm_model *w) {
  int32_t vocab = rx_llm_model_vocab_size(w);
  CHECK_INT_EQ(rx_llm_model_vocab_size(s), vocab);
  if (vocab <= 0 || vocab > V_MAX) return;
  float *ls = calloc((size_t)(B * vocab), sizeof *ls),
        *lw = calloc((size_t)(B * vocab), sizeof *lw);
  /* a packed prefill of 1, 7 and 33 tokens */
  const int64_t seqs[B] = {0, 1, 2};
  const size_t counts[B] = {1, 7, 33};
  int32_t ids[41];
  for (int i = 0; i < 41; i++) ids[i] = (int32_t)((i * 37 + 11) % vocab);
  CHECK_OK(rx_llm_prefill_batch(s, seqs, B, ids, 41, counts, ls));
  CHECK_OK(rx_llm_prefill_batch(w, seqs, B, ids, 41, counts, lw));
  compare("packed prefill (1, 7, 33 tokens)", ls, lw, B, vocab);
  /* a continuation: 7 more tokens of sequence 1 (positions 7..13) */
  CHECK_OK(rx_llm_prefill(s, 1, ids + 20, 7, ls));
  CHECK_OK(rx_llm_prefill(w, 1, ids + 20, 7, lw));
  compare("continued prefill (7 tokens after 7)", ls, lw, 1, vocab);
  int32_t next[B] = {argmax(lw, vocab), argmax(lw, vocab), argmax(lw, vocab)};
  for (int step = 0; step < decode_steps; step++) {
    CHECK_OK(rx_llm_decode(s, seqs, next, B, ls));
    CHECK_OK(rx_llm_decode(w, seqs, next, B, lw));
    char what[64];
    snprintf(what, sizeof what, "decode step %d of 3 sequences", step);
    compare(what, ls, lw, B, vocab);
    for (int r = 0; r < B; r++) next[r] = argmax(lw + (size_t)r * vocab, vocab);
  }
  for (int r = 0; r < B; r++) {
    rx_llm_model_reset(s, seqs[r]);
    rx_llm_model_reset(w, seqs[r]);
  }
  /* greedy generation: the same tokens */
  rx_llm_generate_params p = {.sampling = rx_sampler_default_params(), .max_tokens = greedy_tokens};
  p.sampling.temperature = 0;
  int32_t prompt[4] = {1, 5, 9, 3}, out_s[12] = {0}, out_w[12] = {0};
  rx_llm_generate_stats st_s = {0}, st_w = {0};
  CHECK_OK(rx_llm_generate(s, 7, prompt, 4, &p, out_s, &st_s));
  CHECK_OK(rx_llm_generate(w, 7, prompt, 4, &p, out_w, &st_w));
  CHECK_INT_EQ(st_s.new_tokens, st_w.new_tokens);
  for (size_t i = 0; i < st_w.new_tokens && i < 12; i++)
    CHECK_MSG(out_s[i] == out_w[i], "greedy token %zu: %d, unsharded %d", i, out_s[i], out_w[i]);
  printf("greedy tokens:");
  for (size_t i = 0; i < st_s.new_tokens && i < 12; i++) printf("%s%d", i ? "," : " ", out_s[i]);
  printf("\nlargest relative L2 of a logits row: %.3g\n", max_rel);
  free(ls);
  free(lw);
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  bool quick = argc == 4 && !strcmp(argv[3], "--quick");
  if (argc != 3 && !quick) {
    fprintf(stderr, "usage: mpirun -n N tp_llm_test SHARDED.rxm WHOLE.rxm [--quick]\n");
    return 2;
  }
  if (quick) decode_steps = 2, greedy_tokens = 6;
  rx_rt_comm *comm = NULL;
  rx_status st = rx_rt_comm_create_mpi(&comm);
  if (st) {
    printf("SKIP: %s\n", rx_status_message(st));
    rx_status_free(st);
    return 77;
  }
  int rank = rx_rt_comm_rank(comm);
  rx_llm_model_options o = {.capacity = 512, .max_sequences = 8, .comm = comm};
  rx_llm_model *s = NULL, *w = NULL;
  CHECK_OK(rx_llm_model_load(argv[1], &o, &s));
  if (s && rank != 0) {
    CHECK_OK(rx_llm_model_follow(s));
  } else if (s) {
    rx_llm_model_options ow = o;
    ow.comm = NULL;
    CHECK_OK(rx_llm_model_load(argv[2], &ow, &w));
    if (w) drive(s, w);
  }
  rx_llm_model_free(w);
  rx_llm_model_free(s); /* rank 0's ends the followers */
  int64_t failed = check_failed;
  st = rx_rt_comm_max_host(comm, &failed);
  if (st) {
    fprintf(stderr, "rank %d: %s\n", rank, rx_status_message(st));
    rx_status_free(st);
    failed = 1;
  }
  if (rank == 0)
    printf("tp_llm_test: %d ranks: rank 0 %d passed, %s\n", rx_rt_comm_size(comm),
           (int)check_passed, failed ? "failures (above)" : "no rank failed");
  rx_rt_comm_release(comm);
  return failed ? 1 : 0;
}
