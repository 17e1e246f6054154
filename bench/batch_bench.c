/* bench/batch_bench.c: decode throughput of the continuous-batching scheduler (relaxc/llm.h
 * "continuous batching", runtime/llm/batch.c) at several batch sizes: for each b, b requests of a
 * --prompt-token prompt each (different ids per request), greedy, --tokens new tokens each, all
 * submitted at once to one batcher of max_batch b and run to the end. Throughput is the tokens
 * the decode calls appended (over all sequences) per second of decode time (wall clock, each
 * call synchronized), so prefill time is left out; the mean batch is lower than b when requests
 * end early at EOS. One load serves every b (the model's KV cache holds the largest b).
 *
 * usage: batch_bench MODEL.rxm [--device D] [--batches 1,4,16,64] [--prompt N] [--tokens T]
 *   MODEL.rxm must be compiled with --max-batch at least the largest b, e.g.
 *   relaxc compile tests/llm/models/kjv-llama --target vulkan-lavapipe --max-batch 64 -o M.rxm
 *
 * Prints a Markdown table row per b on stdout. Built against the build's runtime library:
 *   cc -O2 -std=c11 -Iinclude bench/batch_bench.c BUILD/librelaxc_runtime.a -lcjson -ldl
 *      -lpthread -lm */
#include "relaxc/llm.h"
#include "relaxc/runtime.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_B 16 /* batch sizes asked for */

static int usage(const char *why) {
  fprintf(stderr,
          "batch_bench: %s\nusage: batch_bench MODEL.rxm [--device D] [--batches 1,4,16,64] "
          "[--prompt N] [--tokens T]\n",
          why);
  return 2;
}

static int fail(const char *what, rx_status s) {
  fprintf(stderr, "batch_bench: error: %s: %s\n", what, rx_status_message(s));
  rx_status_free(s);
  return 1;
}

static long parse_count(const char *v) {
  char *end = NULL;
  long n = strtol(v, &end, 10);
  return (*v && end && !*end && n > 0) ? n : -1;
}

/* b requests through one batcher; prints the row. */
static int run_batch(rx_llm_model *m, long b, long prompt, long tokens) {
  rx_llm_batcher *bt = NULL;
  rx_llm_batcher_options o = {.max_batch = b};
  rx_status s = rx_llm_batcher_create(m, &o, &bt);
  if (s) return fail("create", s);
  int32_t *ids = malloc((size_t)prompt * sizeof *ids);
  int32_t vocab = rx_llm_model_vocab_size(m);
  rx_llm_generate_params p = {.max_tokens = tokens};
  p.sampling = rx_sampler_default_params();
  p.sampling.temperature = 0;
  for (long r = 0; r < b && !s && ids; r++) {
    for (long i = 0; i < prompt; i++) ids[i] = (int32_t)(2 + (r * 131 + i * 37) % (vocab - 2));
    int64_t id;
    s = rx_llm_batcher_submit(bt, ids, (size_t)prompt, &p, &id);
  }
  free(ids);
  if (!s) s = rx_llm_batcher_run(bt);
  long nfailed = 0;
  for (int64_t id = 1; id <= b && !s; id++) {
    rx_llm_request_info info;
    if (!rx_llm_batcher_poll(bt, id, &info) && info.error && !nfailed++)
      fprintf(stderr, "batch_bench: b = %ld: request %lld failed: %s\n", b, (long long)id,
              info.error);
  }
  rx_llm_batcher_stats st = rx_llm_batcher_get_stats(bt);
  rx_llm_batcher_free(bt);
  if (s) return fail("run", s);
  if (nfailed) {
    fprintf(stderr, "batch_bench: b = %ld: %ld requests failed\n", b, nfailed);
    return 1;
  }
  double mean = st.decodes ? (double)st.decode_rows / (double)st.decodes : 0;
  printf("| %ld | %lld | %.2f | %lld | %.1f | %.2f | %.0f |\n", b, (long long)st.decodes, mean,
         (long long)st.decode_rows, st.decode_ms, st.decodes ? st.decode_ms / st.decodes : 0,
         st.decode_ms > 0 ? 1e3 * (double)st.decode_rows / st.decode_ms : 0);
  fflush(stdout);
  return 0;
}

int main(int argc, char **argv) {
  const char *model = NULL, *device = NULL;
  long prompt = 16, tokens = 64, batches[MAX_B] = {1, 4, 16, 64}, nb = 4;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (a[0] != '-') {
      if (model) return usage("one MODEL.rxm only");
      model = a;
      continue;
    }
    if (i + 1 >= argc) return usage("an option without its value");
    const char *v = argv[++i];
    if (!strcmp(a, "--device")) {
      device = v;
    } else if (!strcmp(a, "--prompt")) {
      if ((prompt = parse_count(v)) < 0) return usage("--prompt: a positive count");
    } else if (!strcmp(a, "--tokens")) {
      if ((tokens = parse_count(v)) < 0) return usage("--tokens: a positive count");
    } else if (!strcmp(a, "--batches")) {
      nb = 0;
      char buf[256];
      snprintf(buf, sizeof buf, "%s", v);
      for (char *t = strtok(buf, ","); t; t = strtok(NULL, ",")) {
        if (nb == MAX_B || (batches[nb++] = parse_count(t)) < 0)
          return usage("--batches: up to 16 positive counts");
      }
    } else {
      return usage("unknown option");
    }
  }
  if (!model) return usage("no MODEL.rxm");
  long most = 0;
  for (long k = 0; k < nb; k++)
    if (batches[k] > most) most = batches[k];
  rx_llm_model_options mo = {
      .device = device, .capacity = most * (prompt + tokens + 16), .max_sequences = most};
  rx_llm_model *m = NULL;
  rx_status s = rx_llm_model_load(model, &mo, &m);
  if (s) return fail(model, s);
  printf("device: %s; prompt %ld tokens, %ld new tokens per request, greedy\n\n",
         rx_llm_model_device_name(m), prompt, tokens);
  printf("| b | decode calls | mean batch | tokens decoded | decode ms | ms per call | tokens/s "
         "|\n|---|---|---|---|---|---|---|\n");
  int rc = 0;
  for (long k = 0; k < nb && !rc; k++) rc = run_batch(m, batches[k], prompt, tokens);
  rx_llm_model_free(m);
  return rc;
}
