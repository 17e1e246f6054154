/* runtime/artifact_ranks.c: the reader of multi-rank artifacts (issue 35), one file holding the
 * artifacts of the N ranks of a tensor-parallel group (docs/artifact.md, "Multi-rank artifacts";
 * written by driver/artifact_ranks.c):
 *
 *   u32 magic 0x31525852 ("RXR1")   u32 version (1)   u32 rank count N   u32 0
 *   per rank (16 bytes): u64 offset   u64 size
 *   the ranks' artifacts (each a whole .rxm), each starting on a 64 KiB boundary
 *
 * A rank's artifact is mapped alone (its offset is a multiple of any page size up to 64 KiB), so
 * rank r's process maps only its own shards of the weights. Every field is checked against the
 * file before use: a damaged container is an error naming the file and the field. */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime/vm.h"

enum {
  RANKS_MAGIC = 0x31525852u, /* "RXR1" little-endian */
  RANKS_VERSION = 1,
  RANKS_MAX = 4096,        /* more ranks than any tensor-parallel group */
  RANKS_ALIGN = 64 * 1024, /* a rank's artifact starts on this boundary (page sizes <= 64 KiB) */
};

static uint32_t rd32(const uint8_t *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static uint64_t rd64(const uint8_t *p) { return rd32(p) | (uint64_t)rd32(p + 4) << 32; }

static rx_status read_at(int fd, const char *path, void *buf, size_t n, uint64_t off) {
  size_t got = 0;
  while (got < n) {
    ssize_t k = pread(fd, (uint8_t *)buf + got, n - got, (off_t)(off + got));
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0)
      return base_status_make(RX_ERR_INVALID,
                              "%s: truncated multi-rank artifact (%zu of %zu bytes "
                              "at offset %llu)",
                              path, got, n, (unsigned long long)off);
    got += (size_t)k;
  }
  return NULL;
}

/* Opens path; *out_ranks: 0 when it is not a multi-rank container (a plain artifact or anything
 * else, left to rx_rt_artifact_load), else N with the file's size. */
static rx_status open_ranks(const char *path, int *out_fd, int *out_ranks, uint64_t *out_size) {
  *out_fd = -1;
  *out_ranks = 0;
  int fd = open(path, O_RDONLY | O_NONBLOCK);
  if (fd < 0)
    return base_status_make(RX_ERR_NOT_FOUND, "cannot open '%s': %s", path, strerror(errno));
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    return base_status_make(RX_ERR_INVALID, "%s: is not a regular file, so not an artifact", path);
  }
  uint8_t h[16];
  *out_fd = fd;
  *out_size = (uint64_t)st.st_size;
  if (st.st_size < 16 || read_at(fd, path, h, 16, 0) != NULL || rd32(h) != RANKS_MAGIC) return NULL;
  if (rd32(h + 4) != RANKS_VERSION)
    return base_status_make(RX_ERR_UNSUPPORTED, "%s: multi-rank artifact version %u, expected %d",
                            path, rd32(h + 4), RANKS_VERSION);
  uint32_t n = rd32(h + 8);
  if (n < 1 || n > RANKS_MAX)
    return base_status_make(RX_ERR_INVALID, "%s: multi-rank artifact of %u ranks (1..%d)", path, n,
                            RANKS_MAX);
  *out_ranks = (int)n;
  return NULL;
}

rx_status rx_rt_artifact_rank_count(const char *path, int *out_ranks) {
  if (!path || !out_ranks)
    return base_status_make(RX_ERR_INVALID, "rx_rt_artifact_rank_count: NULL");
  *out_ranks = 0;
  int fd, n;
  uint64_t size;
  rx_status s = open_ranks(path, &fd, &n, &size);
  if (fd >= 0) close(fd);
  if (!s) *out_ranks = n ? n : 1;
  return s;
}

rx_status rx_rt_artifact_load_rank(rx_rt_device *d, const char *path, int rank,
                                   rx_rt_artifact **out_artifact) {
  if (!path || !out_artifact)
    return base_status_make(RX_ERR_INVALID, "rx_rt_artifact_load_rank: NULL");
  *out_artifact = NULL;
  int fd, n;
  uint64_t fsize;
  rx_status s = open_ranks(path, &fd, &n, &fsize);
  if (s || n == 0) {
    if (fd >= 0) close(fd);
    if (s) return s;
    if (rank != 0)
      return base_status_make(RX_ERR_INVALID, "%s: a plain artifact has rank 0 only, not %d", path,
                              rank);
    return rx_rt_artifact_load(d, path, out_artifact);
  }
  if (rank < 0 || rank >= n) {
    close(fd);
    return base_status_make(RX_ERR_INVALID, "%s: rank %d out of range: the artifact holds %d ranks",
                            path, rank, n);
  }
  uint8_t e[16];
  s = read_at(fd, path, e, 16, 16 + 16 * (uint64_t)rank);
  uint64_t off = s ? 0 : rd64(e), size = s ? 0 : rd64(e + 8);
  if (!s && (off % RANKS_ALIGN != 0 || off < 16 + 16 * (uint64_t)n || off > fsize ||
             size > fsize - off || size == 0 || size > SIZE_MAX))
    s = base_status_make(RX_ERR_INVALID,
                         "%s: rank %d's artifact at %llu (%llu bytes) lies outside "
                         "the file of %llu bytes or off its %d-byte boundary",
                         path, rank, (unsigned long long)off, (unsigned long long)size,
                         (unsigned long long)fsize, RANKS_ALIGN);
  void *p = MAP_FAILED;
  if (!s) {
    p = mmap(NULL, (size_t)size, PROT_READ, MAP_PRIVATE, fd, (off_t)off);
    if (p == MAP_FAILED)
      s = base_status_make(RX_ERR_IO, "cannot map rank %d of '%s': %s", rank, path,
                           strerror(errno));
  }
  close(fd);
  if (s) return s;
  char name[1024];
  snprintf(name, sizeof name, "%s (rank %d)", path, rank);
  return rt_artifact_load_owned(d, p, (size_t)size, true, name, out_artifact);
}
