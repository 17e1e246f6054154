/* bench/llm_bench.c: times an LLM artifact through the runtime's C API (relaxc/llm.h), for
 * bench/gpu_bench.py's model part (bench/gpu_bench_model.py). One load serves every measurement
 * (a 7B artifact takes seconds to map and upload), which `relaxc generate` would repeat per prompt.
 *
 * usage: llm_bench MODEL.rxm --prompt IDS.i32 [--device D] [--decode-prompt N] [--decode-tokens T]
 *                  [--prefill N,N,...] [--reps R] [--logits OUT.f32] [--budget-s S]
 *
 *   IDS.i32          the prompt's token ids, little-endian int32, at least as many as the longest
 *                    length asked for; a prompt of n tokens is its first n ids
 *   --decode-prompt  prefill this many tokens, write the last token's logits to --logits (raw
 *                    float32, vocab values), then decode --decode-tokens tokens greedily (argmax,
 *                    lowest id on ties) one at a time, timed together (default 128 and 128)
 *   --prefill        prompt lengths whose prefill is timed on a fresh sequence, best of --reps
 *                    (default 2; a single run when the first took over 2 s)
 *   --budget-s       start no new measurement after this many seconds (default: no limit)
 *
 * Prints one JSON object per line on stdout, as each measurement ends (a caller that kills the
 * process still has the lines before):
 *   {"event": "load", "ms": ..., "device": "...", "vocab": ..., "max_seq_len": ...,
 *    "kv_bytes_per_token": ...}
 *   {"event": "decode", "prompt": N, "prefill_ms": ..., "tokens": T, "ms": ..., "ids": [...]}
 *   {"event": "replay", "steps": T, "direct": ..., "built": ..., "replayed": ..., "updated": ...}
 *     (the device's launch replay over the decode steps: flushes launched directly, built into a
 *     CUDA graph or Vulkan command buffer, replayed from one, and launches updated before a
 *     replay; "replay": "off" where the backend replays nothing, as with RX_CUDA_GRAPHS=0)
 *   {"event": "prefill", "tokens": N, "ms": [...]}
 *   {"event": "skipped", "what": "...", "why": "..."}
 * Errors go to stderr as "llm_bench: error: ..." with exit status 1 (2 for usage).
 *
 * Built by bench/gpu.sh against the build's librelaxc_runtime.a:
 *   cc -O2 -std=c11 -Iinclude -I. bench/llm_bench.c BUILD/librelaxc_runtime.a -lcjson -ldl
 * -lpthread -lm
 * The replay counters are the runtime's own (rt_replay_stats in runtime/device.h, which the
 * runtime tests read too): the public API has no call for them, and a benchmark linked against
 * the static runtime may look.
 */
#define _POSIX_C_SOURCE 200809L
#include "relaxc/llm.h"
#include "relaxc/runtime.h"
#include "runtime/device.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_LENGTHS 32

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int usage(const char *why) {
  fprintf(stderr,
          "llm_bench: %s\nusage: llm_bench MODEL.rxm --prompt IDS.i32 [--device D] "
          "[--decode-prompt N] [--decode-tokens T] [--prefill N,N,...] [--reps R] "
          "[--logits OUT.f32] [--budget-s S]\n",
          why);
  return 2;
}

static int fail(const char *what, rx_status s) {
  fprintf(stderr, "llm_bench: error: %s: %s\n", what, rx_status_message(s));
  rx_status_free(s);
  return 1;
}

/* A positive integer, or -1. */
static long parse_count(const char *v) {
  char *end = NULL;
  long n = strtol(v, &end, 10);
  return (v && *v && end && !*end && n > 0) ? n : -1;
}

/* The prompt file: *out_n int32 ids (malloc'd). */
static int read_ids(const char *path, int32_t **out, size_t *out_n) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    fprintf(stderr, "llm_bench: error: cannot open %s\n", path);
    return 1;
  }
  fseek(f, 0, SEEK_END);
  long bytes = ftell(f);
  fseek(f, 0, SEEK_SET);
  if (bytes <= 0 || bytes % 4) {
    fclose(f);
    fprintf(stderr, "llm_bench: error: %s: %ld bytes, not a non-empty array of int32\n", path,
            bytes);
    return 1;
  }
  int32_t *ids = malloc((size_t)bytes);
  size_t n = ids ? fread(ids, 4, (size_t)bytes / 4, f) : 0;
  fclose(f);
  if (!ids || n != (size_t)bytes / 4) {
    free(ids);
    fprintf(stderr, "llm_bench: error: cannot read %s\n", path);
    return 1;
  }
  *out = ids;
  *out_n = n;
  return 0;
}

static int32_t argmax(const float *v, int32_t n) {
  int32_t best = 0;
  for (int32_t i = 1; i < n; i++)
    if (v[i] > v[best]) best = i;
  return best;
}

/* A JSON string (the device name) with quotes and backslashes escaped. */
static void print_json_string(const char *s) {
  putchar('"');
  for (; s && *s; s++) {
    if (*s == '"' || *s == '\\') putchar('\\');
    if ((unsigned char)*s >= 0x20) putchar(*s);
  }
  putchar('"');
}

static void skipped(const char *what, const char *why) {
  printf("{\"event\": \"skipped\", \"what\": \"%s\", \"why\": \"%s\"}\n", what, why);
  fflush(stdout);
}

int main(int argc, char **argv) {
  const char *model = NULL, *prompt_path = NULL, *device = NULL, *logits_path = NULL;
  long decode_prompt = 128, decode_tokens = 128, reps = 2, nlen = 0;
  long lengths[MAX_LENGTHS];
  double budget_ms = 0;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (a[0] != '-') {
      if (model) return usage("one MODEL.rxm only");
      model = a;
      continue;
    }
    if (i + 1 >= argc) return usage("an option without its value");
    const char *v = argv[++i];
    if (!strcmp(a, "--prompt")) {
      prompt_path = v;
    } else if (!strcmp(a, "--device")) {
      device = v;
    } else if (!strcmp(a, "--logits")) {
      logits_path = v;
    } else if (!strcmp(a, "--decode-prompt")) {
      if ((decode_prompt = parse_count(v)) < 0) return usage("--decode-prompt takes a count");
    } else if (!strcmp(a, "--decode-tokens")) {
      if ((decode_tokens = parse_count(v)) < 0) return usage("--decode-tokens takes a count");
    } else if (!strcmp(a, "--reps")) {
      if ((reps = parse_count(v)) < 0) return usage("--reps takes a count");
    } else if (!strcmp(a, "--budget-s")) {
      long b = parse_count(v);
      if (b < 0) return usage("--budget-s takes a count of seconds");
      budget_ms = (double)b * 1e3;
    } else if (!strcmp(a, "--prefill")) {
      char *copy = strdup(v), *save = NULL;
      for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        if (nlen == MAX_LENGTHS || (lengths[nlen++] = parse_count(t)) < 0) {
          free(copy);
          return usage("--prefill takes up to 32 comma-separated lengths");
        }
      }
      free(copy);
    } else {
      return usage("unknown option");
    }
  }
  if (!model || !prompt_path) return usage("MODEL.rxm and --prompt are required");

  int32_t *ids = NULL;
  size_t nids = 0;
  if (read_ids(prompt_path, &ids, &nids)) return 1;
  long longest = decode_prompt;
  for (long i = 0; i < nlen; i++)
    if (lengths[i] > longest) longest = lengths[i];
  if ((size_t)longest > nids) {
    fprintf(stderr, "llm_bench: error: %s holds %zu ids, fewer than the %ld asked for\n",
            prompt_path, nids, longest);
    free(ids);
    return 1;
  }

  double t0 = now_ms();
  rx_llm_model_options mo = {.device = device};
  rx_llm_model *m = NULL;
  rx_status s = rx_llm_model_load(model, &mo, &m);
  if (s) {
    free(ids);
    return fail("load", s);
  }
  double load_ms = now_ms() - t0;
  int32_t vocab = rx_llm_model_vocab_size(m);
  printf("{\"event\": \"load\", \"ms\": %.3f, \"device\": ", load_ms);
  print_json_string(rx_llm_model_device_name(m));
  printf(", \"vocab\": %d, \"max_seq_len\": %lld, \"kv_bytes_per_token\": %lld}\n", (int)vocab,
         (long long)rx_llm_model_max_seq_len(m), (long long)rx_llm_model_kv_bytes_per_token(m));
  fflush(stdout);

  int rc = 0;
  float *logits = malloc((size_t)vocab * sizeof *logits);
  int32_t *out_ids = malloc((size_t)decode_tokens * sizeof *out_ids);
  if (!logits || !out_ids) {
    fprintf(stderr, "llm_bench: error: out of memory\n");
    rc = 1;
    goto done;
  }

  /* decode: prefill the prompt, then greedy steps, one sequence */
  rx_llm_model_reset(m, 0);
  double tp = now_ms();
  if ((s = rx_llm_prefill(m, 0, ids, (size_t)decode_prompt, logits))) {
    rc = fail("prefill for decode", s);
    goto done;
  }
  double prefill_ms = now_ms() - tp;
  if (logits_path) {
    FILE *f = fopen(logits_path, "wb");
    if (!f || fwrite(logits, sizeof *logits, (size_t)vocab, f) != (size_t)vocab) {
      fprintf(stderr, "llm_bench: error: cannot write %s\n", logits_path);
      rc = 1;
    }
    if (f) fclose(f);
    if (rc) goto done;
  }
  long steps = 0;
  const rt_replay_stats *rs = rx_llm_model_device(m)->replay;
  rt_replay_stats before = rs ? *rs : (rt_replay_stats){0};
  double td = now_ms();
  for (; steps < decode_tokens; steps++) {
    int64_t seq = 0;
    int32_t next = argmax(logits, vocab);
    out_ids[steps] = next;
    if (rx_llm_model_seq_len(m, 0) >= rx_llm_model_max_seq_len(m)) break;
    if ((s = rx_llm_decode(m, &seq, &next, 1, logits))) {
      rc = fail("decode", s);
      goto done;
    }
  }
  double decode_ms = now_ms() - td;
  printf("{\"event\": \"decode\", \"prompt\": %ld, \"prefill_ms\": %.3f, \"tokens\": %ld, "
         "\"ms\": %.3f, \"ids\": [",
         decode_prompt, prefill_ms, steps, decode_ms);
  for (long i = 0; i < steps; i++) printf("%s%d", i ? ", " : "", (int)out_ids[i]);
  printf("]}\n");
  if (rs)
    printf("{\"event\": \"replay\", \"steps\": %ld, \"direct\": %llu, \"built\": %llu, "
           "\"replayed\": %llu, \"updated\": %llu}\n",
           steps, (unsigned long long)(rs->direct - before.direct),
           (unsigned long long)(rs->built - before.built),
           (unsigned long long)(rs->replayed - before.replayed),
           (unsigned long long)(rs->updated - before.updated));
  else
    printf("{\"event\": \"replay\", \"steps\": %ld, \"replay\": \"off\"}\n", steps);
  fflush(stdout);

  /* prefill: each length on a fresh sequence */
  for (long li = 0; li < nlen; li++) {
    char what[64];
    snprintf(what, sizeof what, "prefill %ld", lengths[li]);
    if (budget_ms > 0 && now_ms() - t0 > budget_ms) {
      skipped(what, "time budget");
      continue;
    }
    double ms[16];
    int done_reps = 0;
    for (long r = 0; r < reps && done_reps < 16; r++) {
      if (done_reps && budget_ms > 0 && now_ms() - t0 > budget_ms) break;
      rx_llm_model_reset(m, 0);
      double t = now_ms();
      if ((s = rx_llm_prefill(m, 0, ids, (size_t)lengths[li], logits))) {
        rc = fail(what, s);
        goto done;
      }
      ms[done_reps++] = now_ms() - t;
      if (ms[done_reps - 1] > 2000) break;
    }
    rx_llm_model_reset(m, 0);
    printf("{\"event\": \"prefill\", \"tokens\": %ld, \"ms\": [", lengths[li]);
    for (int r = 0; r < done_reps; r++) printf("%s%.3f", r ? ", " : "", ms[r]);
    printf("]}\n");
    fflush(stdout);
  }
done:
  free(logits);
  free(out_ids);
  free(ids);
  rx_llm_model_free(m);
  return rc;
}
