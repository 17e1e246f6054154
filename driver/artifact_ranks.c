/* driver/artifact_ranks.c: the writer of multi-rank artifacts (issue 35): the N per-rank
 * artifacts that `relaxc compile --tensor-parallel N` compiled (each a whole .rxm: its program,
 * its shards of the weights, its memory plan) put into one file, each on a 64 KiB boundary so
 * that a rank's process maps its own part alone. The layout is docs/artifact.md's "Multi-rank
 * artifacts"; runtime/artifact_ranks.c reads it. The parts are streamed, never held whole. */
#include "driver.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

enum { RANKS_ALIGN = 64 * 1024, RANKS_VERSION = 1 };
#define RANKS_MAGIC 0x31525852u /* "RXR1" */

static void put32(uint8_t *p, uint64_t v) {
  for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}

static bool zeros(FILE *f, uint64_t n) {
  static const uint8_t z[4096];
  while (n) {
    size_t k = n < sizeof z ? (size_t)n : sizeof z;
    if (fwrite(z, 1, k, f) != k) return false;
    n -= k;
  }
  return true;
}

rx_status drv_artifact_ranks_write(const char *outpath, const char *const *parts, int n) {
  uint64_t *off = calloc((size_t)n + 1, sizeof *off), *size = calloc((size_t)n + 1, sizeof *size);
  rx_status s = NULL;
  uint64_t at = 16 + 16 * (uint64_t)n;
  for (int r = 0; r < n && !s; r++) {
    struct stat st;
    if (stat(parts[r], &st) != 0) {
      s = base_status_make(RX_ERR_IO, "cannot read rank %d's artifact '%s': %s", r, parts[r],
                           strerror(errno));
      break;
    }
    at = (at + RANKS_ALIGN - 1) / RANKS_ALIGN * RANKS_ALIGN;
    off[r] = at;
    size[r] = (uint64_t)st.st_size;
    at += size[r];
  }
  FILE *f = s ? NULL : fopen(outpath, "wb");
  if (!s && !f) s = base_status_make(RX_ERR_IO, "cannot write '%s': %s", outpath, strerror(errno));
  uint8_t h[16];
  put32(h, RANKS_MAGIC);
  put32(h + 4, RANKS_VERSION);
  put32(h + 8, (uint64_t)n);
  put32(h + 12, 0);
  bool ok = f && fwrite(h, 1, 16, f) == 16;
  for (int r = 0; ok && r < n; r++) {
    put32(h, off[r]);
    put32(h + 4, off[r] >> 32);
    put32(h + 8, size[r]);
    put32(h + 12, size[r] >> 32);
    ok = fwrite(h, 1, 16, f) == 16;
  }
  uint64_t pos = 16 + 16 * (uint64_t)n;
  char *buf = malloc(1 << 20);
  for (int r = 0; ok && r < n; r++) {
    ok = zeros(f, off[r] - pos);
    FILE *in = ok ? fopen(parts[r], "rb") : NULL;
    uint64_t left = size[r];
    while (in && ok && left) {
      size_t k = fread(buf, 1, left < (1 << 20) ? (size_t)left : (size_t)(1 << 20), in);
      ok = k > 0 && fwrite(buf, 1, k, f) == k;
      left -= k;
    }
    if (!in) ok = false;
    if (in) fclose(in);
    pos = off[r] + size[r];
  }
  free(buf);
  if (f && fclose(f) != 0) ok = false;
  if (!s && !ok) s = base_status_make(RX_ERR_IO, "cannot write '%s': %s", outpath, strerror(errno));
  free(off);
  free(size);
  return s;
}
