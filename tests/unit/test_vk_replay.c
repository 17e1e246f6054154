/* Vulkan replay of decode steps (runtime/vulkan/vulkan.c: batches of launches recorded once
 * into a command buffer and submitted again, runtime/replay.c in exact mode; the device's cache
 * of released buffers): a decode step's batch is the previous step's (the same pipelines, grids,
 * push constants and buffers) once the step's new buffers (the token ids, the aux tensors of
 * rx_kv_extend, the logits) are the previous step's, which the cache hands out again by size;
 * the push constants and the page table's size change only when the cache length enters a new
 * bucket of 16 tokens (a new key: recorded twice, built, then replayed).
 *
 * kjv-llama (tests/llm/models, f16) compiled for Vulkan and run through runtime/llm on lavapipe,
 * under the validation layer (RX_VULKAN_VALIDATION=1 from ctest): a prompt of 10 tokens, then 40
 * greedy decode steps (the cache passes 16, 32 and 48 tokens: four page buckets), for one
 * sequence and for two at once (of different lengths), each with replay, with RX_VULKAN_REPLAY=0
 * (every batch recorded) and with RX_VULKAN_CACHE=0 (no buffer reused):
 * - the tokens are the same in the three runs;
 * - each decode step is one batch, counted as direct (recorded), built or replayed; with replay
 *   every step from the third of its page bucket on is replayed (the model's warm-up decodes
 *   have seen the first buckets: those replay from their second step), the first two of a
 *   bucket are recorded or built; without replay, and without the cache (new buffers every
 *   step), every step is recorded;
 * - the validation layer reports nothing.
 * And the cache given back when memory runs out (RX_VULKAN_HEAP_LIMIT: heaps of 64 MiB): a
 * released 12 MiB buffer stays cached, so a 56 MiB one finds no room until the cache is freed,
 * which vk_buffer_alloc does and then succeeds; past the heap, a clear out-of-memory error.
 *
 * usage: test_vk_replay TESTS_DIR */
/* test-needs: runtime */
#include "base/base.h"
#include "driver/driver.h"
#include "frontends/hf/hf.h"
#include "relaxc/llm.h"
#include "relaxc/runtime.h"
#include "runtime/device.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PROMPT 10 /* tokens of the prompt */
#define STEPS  40 /* greedy decode steps: the cache passes 16, 32 and 48 tokens */
#define PAGE   16 /* tokens per page of the KV cache (docs/llm.md) */

static int passed, failed;

#define CHECK(c, ...)                                                                              \
  do {                                                                                             \
    if (c) {                                                                                       \
      passed++;                                                                                    \
    } else {                                                                                       \
      failed++;                                                                                    \
      fprintf(stderr, "FAIL: " __VA_ARGS__);                                                       \
      fputc('\n', stderr);                                                                         \
    }                                                                                              \
  } while (0)

static bool ok_status(rx_status s, const char *what) {
  CHECK(!s, "%s: %s", what, s ? rx_status_message(s) : "");
  rx_status_free(s);
  return !s;
}

/* kjv-llama for Vulkan in f16 into path. */
static bool compile(const char *tests, const char *path) {
  char dir[1024];
  snprintf(dir, sizeof dir, "%s/llm/models/kjv-llama", tests);
  rx_module *m = rx_module_new();
  rx_hf_options ho = {.dtype = RX_DTYPE_F16, .max_batch = 4};
  rx_status s = hf_import(m, dir, &ho);
  rx_compile_options o = {0};
  const rx_target *t = NULL;
  if (!s) s = tgt_target_parse("vulkan-lavapipe", &t);
  o.targets[o.ntargets++] = t;
  rx_compile_result r;
  memset(&r, 0, sizeof r);
  rx_diag diag;
  base_diag_init(&diag);
  bool ok = ok_status(s, "import kjv-llama");
  if (ok) {
    ok = drv_compile(m, &o, &diag, &r);
    CHECK(ok, "compile kjv-llama: %s", rx_diag_text(&diag));
  }
  if (ok) ok = ok_status(drv_artifact_write_file(path, r.artifact, r.artifact_len), path);
  drv_compile_result_free(&r);
  base_diag_free(&diag);
  rx_module_free(m);
  return ok;
}

static int32_t argmax(const float *x, int32_t n) {
  int32_t best = 0;
  for (int32_t i = 1; i < n; i++)
    if (x[i] > x[best]) best = i;
  return best;
}

/* What a run did: its tokens (per sequence), and per decode step the replay's counters. */
typedef struct run {
  int32_t tokens[2][STEPS];
  char kind[STEPS]; /* 'd' direct, 'b' built, 'r' replayed, '?' none or several */
  size_t messages;
} run;

/* Prefill of the prompt into nseq sequences, then STEPS greedy decode steps of all of them at
 * once; false when the model does not load or a call fails (reported). */
static bool decode(const char *path, int nseq, run *out) {
  memset(out, 0, sizeof *out);
  rx_llm_model *m = NULL;
  rx_llm_model_options mo = {.device = "vulkan:0", .max_sequences = 2};
  if (!ok_status(rx_llm_model_load(path, &mo, &m), "load")) return false;
  rx_rt_device *d = rx_llm_model_device(m);
  int32_t vocab = rx_llm_model_vocab_size(m);
  float *logits = base_calloc((size_t)vocab * 2, sizeof *logits);
  static const int32_t prompt[PROMPT] = {1, 400, 12, 260, 631, 13, 269, 260, 77, 5};
  int64_t seqs[2] = {0, 1};
  int32_t next[2];
  bool ok = true;
  for (int s = 0; s < nseq && ok; s++) {
    /* the second sequence one token shorter: other lengths in one decode call */
    ok = ok_status(rx_llm_prefill(m, seqs[s], prompt, PROMPT - (size_t)s, logits), "prefill");
    next[s] = argmax(logits, vocab);
  }
  for (int i = 0; i < STEPS && ok; i++) {
    rt_replay_stats before = *d->replay;
    ok = ok_status(rx_llm_decode(m, seqs, next, (size_t)nseq, logits), "decode");
    const rt_replay_stats *now = d->replay;
    uint64_t dd = now->direct - before.direct, db = now->built - before.built,
             dr = now->replayed - before.replayed;
    out->kind[i] = dd + db + dr != 1 ? '?' : dd ? 'd' : db ? 'b' : 'r';
    for (int s = 0; s < nseq; s++) {
      out->tokens[s][i] = next[s];
      next[s] = argmax(logits + (size_t)s * (size_t)vocab, vocab);
    }
  }
  const char *last = NULL;
  out->messages = rx_rt_device_validation_messages(d, &last);
  if (out->messages) fprintf(stderr, "validation: %s\n", last ? last : "?");
  free(logits);
  rx_llm_model_free(m);
  return ok;
}

static void test_decode(const char *path, int nseq) {
  static const char *const names[3] = {"replay", "RX_VULKAN_REPLAY=0", "RX_VULKAN_CACHE=0"};
  static const char *const vars[3] = {NULL, "RX_VULKAN_REPLAY", "RX_VULKAN_CACHE"};
  run r[3];
  for (int v = 0; v < 3; v++) {
    if (vars[v]) setenv(vars[v], "0", 1);
    bool ok = decode(path, nseq, &r[v]);
    if (vars[v]) unsetenv(vars[v]);
    if (!ok) return;
    printf("%d sequence%s, %-18s: %.*s (d recorded, b built, r replayed)\n", nseq,
           nseq > 1 ? "s" : "", names[v], STEPS, r[v].kind);
    CHECK(!memcmp(r[0].tokens, r[v].tokens, sizeof r[v].tokens),
          "%d sequences: the tokens with %s differ from those with replay", nseq, names[v]);
  }
  int replayed = 0;
  for (int i = 0; i < STEPS; i++) {
    /* the cache length of the longest sequence before step i: its bucket of pages */
    int bucket = (PROMPT + i) / PAGE, first = i == 0 || (PROMPT + i - 1) / PAGE != bucket;
    int second = !first && (i == 1 || (PROMPT + i - 2) / PAGE != bucket);
    char k = r[0].kind[i];
    CHECK(first    ? k == 'd' || k == 'b'
          : second ? k == 'b' || k == 'r'
                   : k == 'r',
          "%d sequences: step %d (the %s of its page bucket) was %c", nseq, i,
          first    ? "first"
          : second ? "second"
                   : "third or later",
          k);
    CHECK(r[1].kind[i] == 'd' && r[2].kind[i] == 'd',
          "%d sequences: step %d was not recorded without replay (%c) or without the cache (%c)",
          nseq, i, r[1].kind[i], r[2].kind[i]);
    replayed += k == 'r';
  }
  printf("%d sequence%s: %d of %d steps replayed\n", nseq, nseq > 1 ? "s" : "", replayed, STEPS);
  const char *v = getenv("RX_VULKAN_VALIDATION");
  if (v && !strcmp(v, "1"))
    CHECK(!r[0].messages && !r[1].messages && !r[2].messages,
          "%d sequences: %zu, %zu, %zu validation messages", nseq, r[0].messages, r[1].messages,
          r[2].messages);
  else
    printf("RX_VULKAN_VALIDATION is not 1: the validation layer is not checked\n");
}

/* The buffer cache under a 64 MiB heap: a new buffer that finds the heap full of cached buffers
 * gets its memory once the cache is given back; one larger than the heap is an out-of-memory
 * error naming the sizes, and the device still works after it. */
static void test_heap_full(void) {
  setenv("RX_VULKAN_HEAP_LIMIT", "67108864", 1);
  rx_rt_device *d = NULL;
  bool opened = ok_status(rx_rt_device_open("vulkan:0", NULL, &d), "open with a 64 MiB heap");
  unsetenv("RX_VULKAN_HEAP_LIMIT");
  if (!opened) return;
  const size_t mib = (size_t)1 << 20;
  rx_rt_buffer *a = NULL, *b = NULL, *c = NULL, *e = NULL;
  if (ok_status(rx_rt_buffer_alloc(d, 12 * mib, &a), "a 12 MiB buffer")) {
    ok_status(rx_rt_buffer_fill(a, 0, 12 * mib, 7), "fill it");
    rx_rt_buffer_release(a); /* into the cache (a quarter of the heap: 16 MiB) */
  }
  /* 56 MiB: the heap holds 12 MiB of cache, 52 MiB free */
  if (ok_status(rx_rt_buffer_alloc(d, 56 * mib, &b), "56 MiB with the heap's cache given back")) {
    uint8_t x = 1, y = 0;
    ok_status(rx_rt_buffer_write(b, 56 * mib - 1, &x, 1), "write its last byte");
    ok_status(rx_rt_buffer_read(b, 56 * mib - 1, &y, 1), "read it back");
    CHECK(y == 1, "the 56 MiB buffer's last byte: %d", y);
    rx_rt_buffer_release(b);
  }
  rx_status s = rx_rt_buffer_alloc(d, 100 * mib, &c);
  CHECK(s && rx_status_code_of(s) == RX_ERR_OUT_OF_MEMORY &&
            strstr(rx_status_message(s), "out of device memory") &&
            strstr(rx_status_message(s), "104857600"),
        "100 MiB on a 64 MiB heap: an out-of-memory error naming the sizes (%s)",
        s ? rx_status_message(s) : "allocated");
  rx_status_free(s);
  rx_rt_buffer_release(c);
  if (ok_status(rx_rt_buffer_alloc(d, 8 * mib, &e), "8 MiB after the error")) {
    ok_status(rx_rt_buffer_fill(e, 0, 8 * mib, 1), "fill it");
    ok_status(rx_rt_device_synchronize(d), "synchronize");
    rx_rt_buffer_release(e);
  }
  rx_rt_device_release(d);
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  const char *tests = argc > 1 ? argv[1] : "tests";
  rx_status s = rx_rt_backend_check(RX_RT_BACKEND_VULKAN);
  if (s) {
    printf("skipped: %s\n", rx_status_message(s));
    rx_status_free(s);
    return 77;
  }
  char path[] = "/tmp/rx_vk_replay_XXXXXX";
  int fd = mkstemp(path);
  if (fd < 0) {
    fprintf(stderr, "FAIL: mkstemp\n");
    return 1;
  }
  close(fd);
  test_heap_full();
  if (compile(tests, path)) {
    test_decode(path, 1);
    test_decode(path, 2);
  }
  unlink(path);
  printf("vk_replay: %d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
