/* tests/fuzz/fuzz_artifact_ranks.c: libFuzzer harness of the multi-rank artifact reader
 * (runtime/artifact_ranks.c; docs/artifact.md, "Multi-rank artifacts"). The reader maps a rank
 * from a file, so each input is written to a temporary file first; then the rank count is read
 * and every rank (at most 8, and one past the end) is loaded for inspection and released. The
 * seed (tests/fuzz/corpus/artifact_ranks) is tests/lit/Inputs/dist/tp_mlp.rx compiled with
 * --tensor-parallel 2 --target vulkan. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "relaxc/runtime.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char path[] = "/tmp/fuzz_ranks_XXXXXX";
  int fd = mkstemp(path);
  if (fd < 0) return 0;
  size_t done = 0;
  while (done < size) {
    ssize_t k = write(fd, data + done, size - done);
    if (k <= 0) break;
    done += (size_t)k;
  }
  close(fd);
  int n = 0;
  rx_status s = rx_rt_artifact_rank_count(path, &n);
  for (int r = 0; !s && r <= n && r < 8; r++) {
    rx_rt_artifact *a = NULL;
    rx_status ls = rx_rt_artifact_load_rank(NULL, path, r, &a);
    if (!ls) (void)rx_rt_artifact_function_count(a);
    rx_rt_artifact_release(a);
    rx_status_free(ls);
  }
  rx_status_free(s);
  unlink(path);
  return 0;
}
