/* test-needs: runtime */
/* test_artifact_ranks: the multi-rank artifact container (issue 35; docs/artifact.md,
 * "Multi-rank artifacts") written by drv_artifact_ranks_write and read by
 * rx_rt_artifact_rank_count / rx_rt_artifact_load_rank: each rank's bytes come back at a 64 KiB
 * boundary exactly as written (read through the header like the loader does), a plain file is
 * one rank, and a rank out of range, a truncated container, a bad version and a rank's part that
 * is no artifact are refused naming the file. (tests/lit/dist/compile_ranks.test loads the ranks
 * of a real compile.) */
#include "base/base.h"
#include "check.h"
#include "driver/driver.h"
#include "relaxc/runtime.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void write_bytes(const char *path, const void *data, size_t n) {
  FILE *f = fopen(path, "wb");
  CHECK(f && fwrite(data, 1, n, f) == n);
  if (f) fclose(f);
}

static unsigned char *read_all(const char *path, size_t *n) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  *n = (size_t)ftell(f);
  fseek(f, 0, SEEK_SET);
  unsigned char *d = malloc(*n + 1);
  if (fread(d, 1, *n, f) != *n) *n = 0;
  fclose(f);
  return d;
}

static uint64_t rd64(const unsigned char *p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--) v = v << 8 | p[i];
  return v;
}

int main(void) {
  char dir[] = "/tmp/rx_ranks_XXXXXX";
  if (!mkdtemp(dir)) return 1;
  char parts[3][256], out[256], bad[256];
  const char *pp[3];
  size_t sizes[3] = {5, 70000, 1};
  for (int r = 0; r < 3; r++) {
    snprintf(parts[r], sizeof parts[r], "%s/part%d", dir, r);
    unsigned char *d = malloc(sizes[r]);
    for (size_t i = 0; i < sizes[r]; i++) d[i] = (unsigned char)(r * 31 + i * 7);
    write_bytes(parts[r], d, sizes[r]);
    free(d);
    pp[r] = parts[r];
  }
  snprintf(out, sizeof out, "%s/m.rxm", dir);
  CHECK_OK(drv_artifact_ranks_write(out, pp, 3));
  int n = 0;
  CHECK_OK(rx_rt_artifact_rank_count(out, &n));
  CHECK_INT_EQ(n, 3);
  size_t len = 0;
  unsigned char *all = read_all(out, &len);
  CHECK(all && len > 16 + 48);
  for (int r = 0; all && r < 3; r++) {
    uint64_t off = rd64(all + 16 + 16 * r), size = rd64(all + 24 + 16 * r);
    CHECK_MSG(off % 65536 == 0 && size == sizes[r] && off + size <= len, "rank %d at %llu", r,
              (unsigned long long)off);
    size_t plen = 0;
    unsigned char *p = read_all(parts[r], &plen);
    CHECK_MSG(p && off + size <= len && !memcmp(all + off, p, plen), "rank %d's bytes differ", r);
    free(p);
  }
  /* a part that is no artifact: the artifact loader's error, naming the file and the rank */
  rx_rt_artifact *a = NULL;
  CHECK_ERR(rx_rt_artifact_load_rank(NULL, out, 1, &a), RX_ERR_INVALID, "m.rxm (rank 1)");
  CHECK_ERR(rx_rt_artifact_load_rank(NULL, out, 3, &a), RX_ERR_INVALID,
            "rank 3 out of range: the artifact holds 3 ranks");
  CHECK_ERR(rx_rt_artifact_load_rank(NULL, out, -1, &a), RX_ERR_INVALID, "out of range");
  /* the plain artifact loader says what the container is */
  CHECK_ERR(rx_rt_artifact_load(NULL, out, &a), RX_ERR_INVALID, "a multi-rank artifact (3 ranks");
  /* a plain file: one rank; rank 1 of it does not exist */
  CHECK_OK(rx_rt_artifact_rank_count(parts[1], &n));
  CHECK_INT_EQ(n, 1);
  CHECK_ERR(rx_rt_artifact_load_rank(NULL, parts[1], 1, &a), RX_ERR_INVALID, "rank 0 only");
  /* truncated: rank 1's part runs past the end */
  snprintf(bad, sizeof bad, "%s/cut.rxm", dir);
  if (all) write_bytes(bad, all, (size_t)rd64(all + 32) + 100);
  CHECK_ERR(rx_rt_artifact_load_rank(NULL, bad, 1, &a), RX_ERR_INVALID, "lies outside the file");
  /* a header cut inside the rank table */
  if (all) write_bytes(bad, all, 40);
  CHECK_ERR(rx_rt_artifact_load_rank(NULL, bad, 2, &a), RX_ERR_INVALID, "truncated");
  /* another version */
  if (all) {
    all[4] = 9;
    write_bytes(bad, all, len);
  }
  CHECK_ERR(rx_rt_artifact_rank_count(bad, &n), RX_ERR_UNSUPPORTED, "version 9");
  CHECK(a == NULL);
  free(all);
  for (int r = 0; r < 3; r++) remove(parts[r]);
  remove(out);
  remove(bad);
  remove(dir);
  return check_finish("test_artifact_ranks");
}
