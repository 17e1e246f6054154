/* driver/kcache.c: the kernel cache (issue 16). A compiled kernel (SPIR-V words; PTX and cubin)
 * is kept in one file per key under the cache directory, named by a 64-bit hash of the key:
 *
 *   <dir>/<16 hex digits>.rxk:
 *     "RXKCACH1"      8 bytes, the magic (a new layout gets a new magic)
 *     crc             u32 LE, CRC-32 of every byte after the header
 *     nparts          u32 LE, at most RX_KCACHE_MAX_PARTS
 *     key_len         u64 LE
 *     part_len[n]     u64 LE each
 *     key bytes, then each part's bytes
 *
 * The key is the whole of what the output depends on (toolchain name, version and options, the
 * target, the kernel's source): it is stored and compared, so two keys with the same hash never
 * share an entry. A file that is short, fails its CRC or holds another key is a miss (a bad one
 * is removed); the cache never fails a compile. Writers write a private temporary file in the
 * directory and rename it over the entry, so concurrent compiles see a whole entry or none.
 * Reading an entry sets its modification time: eviction (drv_kcache_trim) removes the least
 * recently used entries first. */
#include "driver.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define MAGIC        "RXKCACH1"
#define HEADER_BYTES 16 /* magic, crc, nparts */
/* A temporary file older than this was left by a compile that died: trimming removes it. */
#define STALE_TEMP_SECONDS 3600

struct rx_kcache {
  char *dir;
  uint64_t limit; /* bytes; 0: no limit */
};

static void put_u32(unsigned char *p, uint32_t v) {
  for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
}
static void put_u64(unsigned char *p, uint64_t v) {
  for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}
static uint32_t get_u32(const unsigned char *p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; i--) v = v << 8 | p[i];
  return v;
}
static uint64_t get_u64(const unsigned char *p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--) v = v << 8 | p[i];
  return v;
}

/* mkdir -p: each missing directory of path */
static rx_status make_dirs(const char *path) {
  char *p = base_strdup(path);
  rx_status st = NULL;
  for (char *s = p + 1;; s++) {
    char c = *s;
    if (c != '/' && c != '\0') continue;
    *s = '\0';
    if (mkdir(p, 0755) != 0 && errno != EEXIST)
      st = base_status_make(RX_ERR_IO, "cannot create the kernel cache directory %s: %s", p,
                            strerror(errno));
    *s = c;
    if (st || c == '\0') break;
  }
  free(p);
  struct stat sb;
  if (!st && (stat(path, &sb) != 0 || !S_ISDIR(sb.st_mode)))
    st = base_status_make(RX_ERR_IO, "the kernel cache directory %s is not a directory", path);
  return st;
}

rx_status drv_kcache_open(const char *dir, uint64_t limit_bytes, rx_kcache **out) {
  *out = NULL;
  if (!dir || !*dir) return base_status_make(RX_ERR_INVALID, "kernel cache: empty directory name");
  RX_RETURN_IF_ERROR(make_dirs(dir));
  rx_kcache *c = base_malloc(sizeof *c);
  c->dir = base_strdup(dir);
  c->limit = limit_bytes;
  *out = c;
  return NULL;
}

void drv_kcache_close(rx_kcache *c) {
  if (!c) return;
  free(c->dir);
  free(c);
}

const char *drv_kcache_dir(const rx_kcache *c) { return c->dir; }

char *drv_kcache_default_dir(void) {
  const char *env = getenv("RELAXC_CACHE_DIR");
  if (env && *env) return base_strdup(env);
  rx_strbuf b = {0};
  const char *xdg = getenv("XDG_CACHE_HOME");
  const char *home = getenv("HOME");
  if (xdg && *xdg == '/')
    base_strbuf_printf(&b, "%s/relaxc", xdg);
  else if (home && *home)
    base_strbuf_printf(&b, "%s/.cache/relaxc", home);
  else
    return NULL;
  return base_strbuf_take(&b);
}

static char *entry_path(const rx_kcache *c, const void *key, size_t key_len) {
  rx_strbuf b = {0};
  base_strbuf_printf(&b, "%s/%016llx.rxk", c->dir,
                     (unsigned long long)base_hash_bytes(key, key_len));
  return base_strbuf_take(&b);
}

/* The parts of a whole entry for key, pointing into data; false when data is not one. */
static bool parse_entry(const unsigned char *data, size_t size, const void *key, size_t key_len,
                        int nparts, rx_kblob *out) {
  if (size < HEADER_BYTES + 8 || memcmp(data, MAGIC, 8) != 0) return false;
  if ((int)get_u32(data + 12) != nparts) return false;
  size_t head = HEADER_BYTES + 8 + 8 * (size_t)nparts;
  if (size < head) return false;
  if (get_u32(data + 8) != base_crc32_update(0, data + HEADER_BYTES, size - HEADER_BYTES))
    return false;
  uint64_t at = head, klen = get_u64(data + HEADER_BYTES);
  if (klen != key_len || klen > size - at || memcmp(data + at, key, key_len) != 0) return false;
  at += klen;
  for (int i = 0; i < nparts; i++) {
    uint64_t n = get_u64(data + HEADER_BYTES + 8 + 8 * (size_t)i);
    if (n > size - at) return false;
    out[i].data = (unsigned char *)data + at;
    out[i].len = (size_t)n;
    at += n;
  }
  return at == size;
}

bool drv_kcache_get(const rx_kcache *c, const void *key, size_t key_len, int nparts,
                    rx_kblob *out) {
  memset(out, 0, sizeof *out * (size_t)nparts);
  if (nparts < 1 || nparts > RX_KCACHE_MAX_PARTS) return false;
  char *path = entry_path(c, key, key_len);
  char *data = NULL;
  size_t size = 0;
  rx_status st = base_read_file_kind(path, RX_FILE_KERNEL, &data, &size);
  bool hit = false;
  if (st) {
    rx_status_free(st);
  } else {
    rx_kblob parts[RX_KCACHE_MAX_PARTS];
    hit = parse_entry((const unsigned char *)data, size, key, key_len, nparts, parts);
    if (hit) {
      for (int i = 0; i < nparts; i++) {
        out[i].len = parts[i].len;
        out[i].data = base_malloc(parts[i].len + 1);
        memcpy(out[i].data, parts[i].data, parts[i].len);
        out[i].data[parts[i].len] = 0; /* PTX text is read as a string */
      }
      utimensat(AT_FDCWD, path, NULL, 0); /* recently used: evicted last */
    } else {
      unlink(path); /* corrupt, truncated or another key's: the new entry replaces it */
    }
  }
  free(data);
  free(path);
  return hit;
}

static bool write_all(int fd, const void *p, size_t n) {
  const unsigned char *s = p;
  while (n) {
    ssize_t w = write(fd, s, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    s += w;
    n -= (size_t)w;
  }
  return true;
}

rx_status drv_kcache_put(const rx_kcache *c, const void *key, size_t key_len, int nparts,
                         const rx_kblob *parts) {
  if (nparts < 1 || nparts > RX_KCACHE_MAX_PARTS)
    return base_status_make(RX_ERR_INVALID, "kernel cache: %d parts (1 to %d)", nparts,
                            RX_KCACHE_MAX_PARTS);
  size_t head = HEADER_BYTES + 8 + 8 * (size_t)nparts;
  unsigned char h[HEADER_BYTES + 8 + 8 * RX_KCACHE_MAX_PARTS];
  memcpy(h, MAGIC, 8);
  put_u32(h + 12, (uint32_t)nparts);
  put_u64(h + HEADER_BYTES, key_len);
  for (int i = 0; i < nparts; i++) put_u64(h + HEADER_BYTES + 8 + 8 * (size_t)i, parts[i].len);
  uint32_t crc = base_crc32_update(0, h + HEADER_BYTES, head - HEADER_BYTES);
  crc = base_crc32_update(crc, key, key_len);
  for (int i = 0; i < nparts; i++) crc = base_crc32_update(crc, parts[i].data, parts[i].len);
  put_u32(h + 8, crc);
  rx_strbuf tmp = {0};
  base_strbuf_printf(&tmp, "%s/.tmp-XXXXXX", c->dir);
  int fd = mkstemp(tmp.data);
  if (fd < 0) {
    rx_status st = base_status_make(RX_ERR_IO, "kernel cache: cannot create %s: %s", tmp.data,
                                    strerror(errno));
    base_strbuf_free(&tmp);
    return st;
  }
  bool ok = write_all(fd, h, head) && write_all(fd, key, key_len);
  for (int i = 0; ok && i < nparts; i++) ok = write_all(fd, parts[i].data, parts[i].len);
  int err = errno;
  ok = close(fd) == 0 && ok;
  char *path = entry_path(c, key, key_len);
  if (ok && rename(tmp.data, path) != 0) {
    ok = false;
    err = errno;
  }
  rx_status st = NULL;
  if (!ok) {
    unlink(tmp.data);
    st = base_status_make(RX_ERR_IO, "kernel cache: cannot write %s: %s", path, strerror(err));
  }
  free(path);
  base_strbuf_free(&tmp);
  return st;
}

typedef struct entry {
  char *path;
  off_t size;
  struct timespec mtime;
} entry;

static int older_first(const void *a, const void *b) {
  const entry *x = a, *y = b;
  if (x->mtime.tv_sec != y->mtime.tv_sec) return x->mtime.tv_sec < y->mtime.tv_sec ? -1 : 1;
  if (x->mtime.tv_nsec != y->mtime.tv_nsec) return x->mtime.tv_nsec < y->mtime.tv_nsec ? -1 : 1;
  return strcmp(x->path, y->path);
}

static bool has_suffix(const char *s, const char *suffix) {
  size_t n = strlen(s), m = strlen(suffix);
  return n >= m && !strcmp(s + n - m, suffix);
}

uint64_t drv_kcache_trim(const rx_kcache *c) {
  DIR *d = opendir(c->dir);
  if (!d) return 0;
  entry *es = NULL;
  size_t n = 0, cap = 0;
  uint64_t total = 0;
  time_t now = time(NULL);
  struct dirent *e;
  while ((e = readdir(d))) {
    bool temp = !strncmp(e->d_name, ".tmp-", 5);
    if (!temp && !has_suffix(e->d_name, ".rxk")) continue;
    rx_strbuf p = {0};
    base_strbuf_printf(&p, "%s/%s", c->dir, e->d_name);
    struct stat sb;
    if (stat(p.data, &sb) != 0 || !S_ISREG(sb.st_mode)) {
      base_strbuf_free(&p);
      continue;
    }
    if (temp) { /* another compile's file being written, or a dead one's */
      if (now - sb.st_mtime > STALE_TEMP_SECONDS) unlink(p.data);
      base_strbuf_free(&p);
      continue;
    }
    if (n == cap) es = base_realloc(es, sizeof *es * (cap = cap ? 2 * cap : 64));
    es[n++] = (entry){base_strbuf_take(&p), sb.st_size, sb.st_mtim};
    total += (uint64_t)sb.st_size;
  }
  closedir(d);
  if (c->limit && total > c->limit) {
    qsort(es, n, sizeof *es, older_first);
    for (size_t i = 0; i < n && total > c->limit; i++)
      if (unlink(es[i].path) == 0 || errno == ENOENT) total -= (uint64_t)es[i].size;
  }
  for (size_t i = 0; i < n; i++) free(es[i].path);
  free(es);
  return total;
}
