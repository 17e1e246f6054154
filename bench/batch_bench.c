/* bench/batch_bench.c: batched inference through relaxc/llm.h on one model load.
 *
 * Prefill of mixed prompt lengths (--lengths, default 1,7,16,17,100,33,64,5): the same prompts
 * (1) packed into one rx_llm_prefill_batch (ragged: n = the sum of the lengths, no padding),
 * (2) padded to the longest, i.e. every prompt as long as the longest (the tokens a padded
 * implementation computes; run as a packed prefill of those equal lengths, split by the
 * artifact's bound on n like any packed prefill), (3) one rx_llm_prefill per prompt. Each timed
 * --repeat times on fresh sequences, the best kept (wall clock, logits read back); tokens/s
 * counts the prompts' own tokens, so the three rows compare the time to the same result.
 *
 * Decode throughput of the continuous-batching scheduler (runtime/llm/batch.c) at several batch
 * sizes: for each b, b requests of a --prompt-token prompt each (different ids per request),
 * greedy, --tokens new tokens each, all submitted at once to one batcher of max_batch b and run
 * to the end; the best of --repeat runs. Throughput is the tokens the decode calls appended
 * (over all sequences) per second of decode time (wall clock, each call synchronized), so
 * prefill time is left out; the mean batch is lower than b when requests end early at EOS.
 *
 * With --split, the decode of each b also directly through rx_llm_decode, --tokens steps of b
 * sequences (after a packed prefill of --prompt tokens each), as one call per step against
 * calls of at most 16 sequences per step (what rx_llm_decode did while the host program took
 * the sequence ids as a shape value of at most 16 dims), the best of --repeat each.
 *
 * usage: batch_bench MODEL.rxm [--device D] [--batches 1,4,16,64] [--prompt N] [--tokens T]
 *                              [--lengths 1,7,16,17,100,33,64,5] [--repeat 3] [--no-prefill]
 *                              [--no-decode] [--split] [--forms packed,padded,single]
 *   MODEL.rxm must be compiled with --max-batch at least the largest b, e.g.
 *   relaxc compile tests/llm/models/kjv-llama --target vulkan-lavapipe --max-batch 64 -o M.rxm
 *
 * Prints a Markdown table row per b on stdout. Built against the build's runtime library:
 *   cc -O2 -std=c11 -Iinclude bench/batch_bench.c BUILD/librelaxc_runtime.a -lcjson -ldl
 *      -lpthread -lm */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include "relaxc/llm.h"
#include "relaxc/runtime.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_B 16 /* batch sizes (and prompt lengths) asked for */

static int usage(const char *why) {
  fprintf(stderr,
          "batch_bench: %s\nusage: batch_bench MODEL.rxm [--device D] [--batches 1,4,16,64] "
          "[--prompt N] [--tokens T] [--lengths 1,7,16,17,100,33,64,5] [--repeat 3] "
          "[--no-prefill] [--no-decode] [--split] [--forms packed,padded,single]\n",
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

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* "1,7,16": up to MAX_B positive counts into out; how many, or -1. */
static long parse_list(const char *v, long *out) {
  long n = 0;
  char buf[256];
  snprintf(buf, sizeof buf, "%s", v);
  for (char *t = strtok(buf, ","); t; t = strtok(NULL, ",")) {
    if (n == MAX_B || (out[n++] = parse_count(t)) < 0) return -1;
  }
  return n ? n : -1;
}

/* The prompts of lengths len[0..nb), each as long as pad when pad > 0, through one packed
 * prefill (pack) or one prefill each, on fresh sequences 1000 + k; *ms: wall clock. */
static rx_status prefill_once(rx_llm_model *m, const long *len, long nb, long pad, bool pack,
                              double *ms) {
  int32_t vocab = rx_llm_model_vocab_size(m);
  size_t n = 0, counts[MAX_B];
  int64_t seqs[MAX_B];
  for (long k = 0; k < nb; k++) {
    counts[k] = (size_t)(pad > 0 ? pad : len[k]);
    seqs[k] = 1000 + k;
    n += counts[k];
  }
  int32_t *ids = malloc(n * sizeof *ids);
  float *logits = malloc((size_t)nb * (size_t)vocab * sizeof *logits);
  if (!ids || !logits) {
    free(ids);
    free(logits);
    *ms = -1; /* out of host memory */
    return NULL;
  }
  rx_status s = NULL;
  for (size_t i = 0; i < n; i++) ids[i] = (int32_t)(2 + (i * 37) % (size_t)(vocab - 2));
  double t0 = now_ms();
  if (!s && pack) s = rx_llm_prefill_batch(m, seqs, (size_t)nb, ids, n, counts, logits);
  for (long k = 0, at = 0; !s && !pack && k < nb; at += (long)counts[k++])
    s = rx_llm_prefill(m, seqs[k], ids + at, counts[k], logits + k * vocab);
  *ms = now_ms() - t0;
  for (long k = 0; k < nb; k++) rx_llm_model_reset(m, seqs[k]);
  free(ids);
  free(logits);
  return s;
}

/* The prefill forms named in forms (NULL: all three), the best of repeat runs each; prints the
 * rows. */
static int run_prefill(rx_llm_model *m, const long *len, long nb, long repeat, const char *forms) {
  long longest = 0, useful = 0;
  for (long k = 0; k < nb; k++) {
    useful += len[k];
    if (len[k] > longest) longest = len[k];
  }
  int64_t bound = rx_llm_model_max_seq_len(m);
  struct {
    const char *form;
    long pad;
    bool pack;
    long calls, computed;
  } rows[3] = {{"packed (ragged), one rx_llm_prefill_batch", 0, true, 1, useful},
               {"padded to the longest", longest, true, 0, longest * nb},
               {"one rx_llm_prefill per prompt", 0, false, nb, useful}};
  long fit = longest > 0 ? bound / longest : 1; /* padded prompts per forward */
  rows[1].calls = fit > 0 ? (nb + fit - 1) / fit : nb;
  printf("| form | forward calls | tokens computed | best ms of %ld | prompt tokens/s |\n"
         "|---|---|---|---|---|\n",
         repeat);
  static const char *const names[3] = {"packed", "padded", "single"};
  for (int r = 0; r < 3; r++) {
    if (forms && !strstr(forms, names[r])) continue;
    double best = -1;
    for (long i = 0; i < repeat; i++) {
      double ms = 0;
      rx_status s = prefill_once(m, len, nb, rows[r].pad, rows[r].pack, &ms);
      if (s) return fail(rows[r].form, s);
      if (ms < 0) {
        fprintf(stderr, "batch_bench: error: out of host memory\n");
        return 1;
      }
      if (best < 0 || ms < best) best = ms;
    }
    printf("| %s | %ld | %ld | %.1f | %.0f |\n", rows[r].form, rows[r].calls, rows[r].computed,
           best, 1e3 * (double)useful / best);
    fflush(stdout);
  }
  return 0;
}

/* steps decode steps of b sequences (after a packed prefill of prompt tokens each) in calls of
 * at most chunk sequences; *ms: the decode's wall clock. */
static rx_status decode_once(rx_llm_model *m, long b, long prompt, long steps, long chunk,
                             double *ms) {
  int32_t vocab = rx_llm_model_vocab_size(m);
  size_t n = (size_t)(b * prompt), *counts = malloc((size_t)b * sizeof *counts);
  int64_t *seqs = malloc((size_t)b * sizeof *seqs);
  int32_t *ids = malloc(n * sizeof *ids);
  float *logits = malloc((size_t)b * (size_t)vocab * sizeof *logits);
  rx_status s = NULL;
  *ms = -1;
  if (counts && seqs && ids && logits) {
    for (long k = 0; k < b; k++) {
      counts[k] = (size_t)prompt;
      seqs[k] = 2000 + k;
    }
    for (size_t i = 0; i < n; i++) ids[i] = (int32_t)(2 + (i * 37) % (size_t)(vocab - 2));
    s = rx_llm_prefill_batch(m, seqs, (size_t)b, ids, n, counts, logits);
    double t0 = now_ms();
    for (long t = 0; t < steps && !s; t++)
      for (long at = 0; at < b && !s; at += chunk) {
        long c = b - at < chunk ? b - at : chunk;
        s = rx_llm_decode(m, seqs + at, ids + at, (size_t)c, logits + at * vocab);
      }
    *ms = now_ms() - t0;
    for (long k = 0; k < b; k++) rx_llm_model_reset(m, seqs[k]);
  }
  free(counts);
  free(seqs);
  free(ids);
  free(logits);
  return s;
}

/* The decode of b sequences in one call per step and in calls of at most 16; prints the row. */
static int run_split(rx_llm_model *m, long b, long prompt, long steps, long repeat) {
  double best[2] = {-1, -1};
  for (long i = 0; i < repeat; i++)
    for (int k = 0; k < 2; k++) {
      double ms = 0;
      rx_status s = decode_once(m, b, prompt, steps, k ? 16 : b, &ms);
      if (s) return fail("decode", s);
      if (ms < 0) {
        fprintf(stderr, "batch_bench: error: out of host memory\n");
        return 1;
      }
      if (best[k] < 0 || ms < best[k]) best[k] = ms;
    }
  printf("| %ld | %.2f | %.0f | %ld | %.2f | %.0f |\n", b, best[0] / (double)steps,
         1e3 * (double)(b * steps) / best[0], (b + 15) / 16, best[1] / (double)steps,
         1e3 * (double)(b * steps) / best[1]);
  fflush(stdout);
  return 0;
}

/* b requests through one batcher; its stats in *out. */
static int run_batch(rx_llm_model *m, long b, long prompt, long tokens, rx_llm_batcher_stats *out) {
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
  *out = st;
  return 0;
}

/* run_batch repeat times; prints the row of the run with the best throughput. */
static int run_decode(rx_llm_model *m, long b, long prompt, long tokens, long repeat) {
  rx_llm_batcher_stats best = {0};
  double best_tps = -1;
  for (long i = 0; i < repeat; i++) {
    rx_llm_batcher_stats st;
    int rc = run_batch(m, b, prompt, tokens, &st);
    if (rc) return rc;
    double tps = st.decode_ms > 0 ? 1e3 * (double)st.decode_rows / st.decode_ms : 0;
    if (tps > best_tps) {
      best_tps = tps;
      best = st;
    }
  }
  double mean = best.decodes ? (double)best.decode_rows / (double)best.decodes : 0;
  printf("| %ld | %lld | %.2f | %lld | %.1f | %.2f | %.0f |\n", b, (long long)best.decodes, mean,
         (long long)best.decode_rows, best.decode_ms,
         best.decodes ? best.decode_ms / best.decodes : 0, best_tps);
  fflush(stdout);
  return 0;
}

int main(int argc, char **argv) {
  const char *model = NULL, *device = NULL;
  long prompt = 16, tokens = 64, batches[MAX_B] = {1, 4, 16, 64}, nb = 4, repeat = 3;
  long lengths[MAX_B] = {1, 7, 16, 17, 100, 33, 64, 5}, nl = 8;
  bool prefill = true, decode = true, split = false;
  const char *forms = NULL;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (a[0] != '-') {
      if (model) return usage("one MODEL.rxm only");
      model = a;
      continue;
    }
    if (!strcmp(a, "--no-prefill") || !strcmp(a, "--no-decode")) {
      *(a[5] == 'p' ? &prefill : &decode) = false;
      continue;
    }
    if (!strcmp(a, "--split")) {
      split = true;
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
    } else if (!strcmp(a, "--forms")) {
      forms = v;
    } else if (!strcmp(a, "--repeat")) {
      if ((repeat = parse_count(v)) < 0) return usage("--repeat: a positive count");
    } else if (!strcmp(a, "--batches")) {
      if ((nb = parse_list(v, batches)) < 0) return usage("--batches: up to 16 positive counts");
    } else if (!strcmp(a, "--lengths")) {
      if ((nl = parse_list(v, lengths)) < 0) return usage("--lengths: up to 16 positive counts");
    } else {
      return usage("unknown option");
    }
  }
  if (!model) return usage("no MODEL.rxm");
  long most = 0, longest = 0;
  for (long k = 0; k < nb; k++)
    if (batches[k] > most) most = batches[k];
  for (long k = 0; k < nl; k++)
    if (lengths[k] > longest) longest = lengths[k];
  long cap = most * (prompt + tokens + 16), pcap = nl * (longest + 16);
  rx_llm_model_options mo = {.device = device,
                             .capacity = cap > pcap ? cap : pcap,
                             .max_sequences = most > nl ? most : nl};
  rx_llm_model *m = NULL;
  rx_status s = rx_llm_model_load(model, &mo, &m);
  if (s) return fail(model, s);
  printf("device: %s; the best of %ld runs of each row\n\n", rx_llm_model_device_name(m), repeat);
  int rc = 0;
  if (prefill) {
    printf("prefill of %ld prompts of lengths", nl);
    for (long k = 0; k < nl; k++) printf("%s%ld", k ? ", " : " ", lengths[k]);
    printf(" (the artifact takes at most %lld tokens per forward)\n\n",
           (long long)rx_llm_model_max_seq_len(m));
    rc = run_prefill(m, lengths, nl, repeat, forms);
    printf("\n");
  }
  if (decode && !rc) {
    printf("decode: prompt %ld tokens, %ld new tokens per request, greedy\n\n", prompt, tokens);
    printf("| b | decode calls | mean batch | tokens decoded | decode ms | ms per call | tokens/s "
           "|\n|---|---|---|---|---|---|---|\n");
  }
  for (long k = 0; decode && k < nb && !rc; k++)
    rc = run_decode(m, batches[k], prompt, tokens, repeat);
  if (split && !rc) {
    printf("\ndecode through rx_llm_decode: %ld steps after a prompt of %ld tokens\n\n"
           "| b | one call: ms per step | tokens/s | calls of 16 per step | ms per step | "
           "tokens/s |\n|---|---|---|---|---|---|\n",
           tokens, prompt);
  }
  for (long k = 0; split && k < nb && !rc; k++)
    rc = run_split(m, batches[k], prompt, tokens, repeat);
  rx_llm_model_free(m);
  return rc;
}
