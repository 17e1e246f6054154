/* bench/decode_host.c: the host time of an LLM decode step (issue 13, "cheap launches").
 *
 *   bench_decode_host MODEL.rxm [STEPS]
 *
 * Loads the model (its warm-up included), prefills 8 tokens on sequence 0, then times STEPS
 * (default 64) calls of rx_llm_decode of one token each, greedy. For each step it takes the wall
 * time and the time spent inside the runtime's calls that wait for the device (buffer reads and
 * writes, which submit the recorded work and wait for it, and synchronize): linked with
 * -Wl,--wrap for each (CMakeLists.txt, bench_decode_host), so the calls the runtime makes inside
 * are timed too. Host time = wall - device waits: the VM, expressions, launches and command
 * recording. (The thread's CPU time would not do: lavapipe runs shader work on the calling thread
 * too.) Prints the median and the mean of each. A benchmark, never a test. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "relaxc/llm.h"
#include "relaxc/runtime.h"

static double ms_of(clockid_t c) {
  struct timespec ts;
  clock_gettime(c, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

/* the wrapped calls: time spent waiting for the device */
static double g_wait_ms;
rx_status __real_rx_rt_buffer_read(rx_rt_buffer *b, size_t offset, void *dst, size_t bytes);
rx_status __real_rx_rt_buffer_write(rx_rt_buffer *b, size_t offset, const void *src, size_t bytes);
rx_status __real_rx_rt_device_synchronize(rx_rt_device *d);
rx_status __wrap_rx_rt_buffer_read(rx_rt_buffer *b, size_t offset, void *dst, size_t bytes);
rx_status __wrap_rx_rt_buffer_write(rx_rt_buffer *b, size_t offset, const void *src, size_t bytes);
rx_status __wrap_rx_rt_device_synchronize(rx_rt_device *d);
rx_status __wrap_rx_rt_buffer_read(rx_rt_buffer *b, size_t offset, void *dst, size_t bytes) {
  double t0 = ms_of(CLOCK_MONOTONIC);
  rx_status s = __real_rx_rt_buffer_read(b, offset, dst, bytes);
  g_wait_ms += ms_of(CLOCK_MONOTONIC) - t0;
  return s;
}
rx_status __wrap_rx_rt_buffer_write(rx_rt_buffer *b, size_t offset, const void *src, size_t bytes) {
  double t0 = ms_of(CLOCK_MONOTONIC);
  rx_status s = __real_rx_rt_buffer_write(b, offset, src, bytes);
  g_wait_ms += ms_of(CLOCK_MONOTONIC) - t0;
  return s;
}
rx_status __wrap_rx_rt_device_synchronize(rx_rt_device *d) {
  double t0 = ms_of(CLOCK_MONOTONIC);
  rx_status s = __real_rx_rt_device_synchronize(d);
  g_wait_ms += ms_of(CLOCK_MONOTONIC) - t0;
  return s;
}

static int by_value(const void *x, const void *y) {
  double a = *(const double *)x, b = *(const double *)y;
  return a < b ? -1 : a > b;
}

static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, by_value);
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static double mean(const double *v, int n) {
  double s = 0;
  for (int i = 0; i < n; i++) s += v[i];
  return s / n;
}

static int fail(rx_status s) {
  fprintf(stderr, "decode_host: %s\n", rx_status_message(s));
  rx_status_free(s);
  return 1;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: decode_host MODEL.rxm [STEPS]\n");
    return 2;
  }
  int steps = argc > 2 ? atoi(argv[2]) : 64;
  if (steps < 1 || steps > 100000) steps = 64;
  rx_llm_model *m = NULL;
  rx_status s = rx_llm_model_load(argv[1], NULL, &m);
  if (s) return fail(s);
  int32_t vocab = rx_llm_model_vocab_size(m);
  float *logits = malloc((size_t)vocab * sizeof *logits);
  double *wall = malloc((size_t)steps * sizeof *wall), *host = malloc((size_t)steps * sizeof *host);
  int32_t prompt[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  for (int i = 0; i < 8; i++) prompt[i] %= vocab;
  int64_t seq = 0;
  s = rx_llm_prefill(m, seq, prompt, 8, logits);
  for (int i = 0; i < steps && !s; i++) {
    int32_t next = 0;
    for (int32_t t = 1; t < vocab; t++)
      if (logits[t] > logits[next]) next = t;
    double w0 = ms_of(CLOCK_MONOTONIC);
    g_wait_ms = 0;
    s = rx_llm_decode(m, &seq, &next, 1, logits);
    wall[i] = ms_of(CLOCK_MONOTONIC) - w0;
    host[i] = wall[i] - g_wait_ms;
  }
  if (!s)
    printf("%s on %s: %d decode steps: wall %.3f ms median (%.3f mean), host %.3f ms median "
           "(%.3f mean)\n",
           argv[1], rx_llm_model_device_name(m), steps, median(wall, steps), mean(wall, steps),
           median(host, steps), mean(host, steps));
  free(logits);
  free(wall);
  free(host);
  rx_llm_model_free(m);
  return s ? fail(s) : 0;
}
