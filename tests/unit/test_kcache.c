/* The kernel cache (driver/kcache.c): entries read back as written; a corrupt, truncated or
 * foreign entry is a miss and is removed; eviction removes the least recently used entries
 * beyond the limit, and stale temporary files; threads writing and reading the same keys see a
 * whole entry or none; drv_compile with a cache gives the same artifact cold and warm. Every
 * cache lives in a temporary directory (never the user's).
 *
 * usage: test_kcache [TESTS_DIR]   (the directory is not used) */
#include "check.h"
#include "driver/driver.h"
#include "targets/target.h"

#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* the .rxk files of dir: how many, and the path of the first (heap, or NULL) */
static int entries(const char *dir, char **out_first) {
  DIR *d = opendir(dir);
  int n = 0;
  if (out_first) *out_first = NULL;
  struct dirent *e;
  while (d && (e = readdir(d))) {
    size_t len = strlen(e->d_name);
    if (len < 4 || strcmp(e->d_name + len - 4, ".rxk")) continue;
    if (out_first && !*out_first) {
      rx_strbuf b = {0};
      base_strbuf_printf(&b, "%s/%s", dir, e->d_name);
      *out_first = base_strbuf_take(&b);
    }
    n++;
  }
  if (d) closedir(d);
  return n;
}

static void remove_tree(const char *dir) {
  DIR *d = opendir(dir);
  struct dirent *e;
  while (d && (e = readdir(d))) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
    rx_strbuf b = {0};
    base_strbuf_printf(&b, "%s/%s", dir, e->d_name);
    unlink(b.data);
    base_strbuf_free(&b);
  }
  if (d) closedir(d);
  rmdir(dir);
}

/* where the cache keeps key (driver/kcache.c: the key's base_hash_bytes in hex) */
static char *entry_path(const char *dir, const char *key) {
  rx_strbuf b = {0};
  base_strbuf_printf(&b, "%s/%016llx.rxk", dir,
                     (unsigned long long)base_hash_bytes(key, strlen(key)));
  return base_strbuf_take(&b);
}

static bool get_eq(rx_kcache *c, const char *key, const char *a, const char *b) {
  rx_kblob out[2];
  if (!drv_kcache_get(c, key, strlen(key), 2, out)) return false;
  bool eq = out[0].len == strlen(a) && !memcmp(out[0].data, a, out[0].len) &&
            out[1].len == strlen(b) && !memcmp(out[1].data, b, out[1].len);
  free(out[0].data);
  free(out[1].data);
  return eq;
}

static void put(rx_kcache *c, const char *key, const char *a, const char *b) {
  rx_kblob parts[2] = {{(unsigned char *)a, strlen(a)}, {(unsigned char *)b, strlen(b)}};
  rx_status st = drv_kcache_put(c, key, strlen(key), 2, parts);
  CHECK_MSG(!st, "put %s: %s", key, st ? rx_status_message(st) : "");
  rx_status_free(st);
}

/* Overwrites the byte at offset (negative: from the end) or truncates to size (keep >= 0). */
static void damage(const char *path, long offset, long keep) {
  int fd = open(path, O_RDWR);
  if (fd < 0) return;
  if (keep >= 0) {
    CHECK_MSG(ftruncate(fd, keep) == 0, "truncate");
  } else {
    off_t end = lseek(fd, 0, SEEK_END);
    unsigned char x;
    off_t at = offset < 0 ? end + offset : offset;
    CHECK_MSG(pread(fd, &x, 1, at) == 1, "read");
    x ^= 0x5a;
    CHECK_MSG(pwrite(fd, &x, 1, at) == 1, "write");
  }
  close(fd);
}

static void test_roundtrip_and_corruption(const char *dir) {
  rx_kcache *c = NULL;
  rx_status st = drv_kcache_open(dir, 0, &c);
  CHECK_MSG(!st && c, "open %s", dir);
  if (!c) return;
  CHECK_MSG(!get_eq(c, "k1", "a", "b"), "a miss in an empty cache");
  put(c, "k1", "ptx text", "cubin\x01\x02");
  CHECK_MSG(get_eq(c, "k1", "ptx text", "cubin\x01\x02"), "read back");
  put(c, "k1", "", "only the second part"); /* replaced, an empty part kept */
  CHECK_MSG(get_eq(c, "k1", "", "only the second part"), "replaced");
  CHECK_MSG(!get_eq(c, "k2", "", "only the second part"), "another key misses");
  char *path = NULL;
  CHECK_MSG(entries(dir, &path) == 1, "one entry");
  long offsets[] = {3, 9, 20, -1, -5};
  for (size_t i = 0; path && i < RX_ARRAY_LEN(offsets); i++) {
    put(c, "k1", "ptx text", "cubin");
    damage(path, offsets[i], -1);
    CHECK_MSG(!get_eq(c, "k1", "ptx text", "cubin"), "a byte changed at %ld: a miss", offsets[i]);
    CHECK_MSG(access(path, F_OK) != 0, "the corrupt entry (byte %ld) is removed", offsets[i]);
  }
  long keeps[] = {0, 7, 30};
  for (size_t i = 0; path && i < RX_ARRAY_LEN(keeps); i++) {
    put(c, "k1", "ptx text", "cubin");
    damage(path, 0, keeps[i]);
    CHECK_MSG(!get_eq(c, "k1", "ptx text", "cubin"), "truncated to %ld: a miss", keeps[i]);
  }
  /* an entry whose file holds another key (what a hash collision would look like) */
  put(c, "k3", "x", "y");
  char *p3 = entry_path(dir, "k3"), *p1 = entry_path(dir, "k1");
  CHECK_MSG(rename(p3, p1) == 0, "rename %s", p3);
  CHECK_MSG(!get_eq(c, "k1", "x", "y"), "another key's entry is not taken");
  CHECK_MSG(access(p1, F_OK) != 0, "and is removed");
  free(p1);
  free(p3);
  free(path);
  drv_kcache_close(c);
}

static void test_eviction(const char *dir) {
  rx_kcache *c = NULL;
  rx_status st = drv_kcache_open(dir, 0, &c);
  CHECK_MSG(!st, "open");
  if (!c) return;
  char key[32], big[1000];
  memset(big, 'z', sizeof big - 1);
  big[sizeof big - 1] = 0;
  for (int i = 0; i < 4; i++) {
    snprintf(key, sizeof key, "evict%d", i);
    put(c, key, big, "");
  }
  /* used in key order: evict0 the least recently */
  for (int i = 0; i < 4; i++) {
    snprintf(key, sizeof key, "evict%d", i);
    rx_kblob out[2];
    if (drv_kcache_get(c, key, strlen(key), 2, out)) {
      free(out[0].data);
      free(out[1].data);
    }
    nanosleep(&(struct timespec){.tv_nsec = 20000000}, NULL); /* distinct times, in use order */
  }
  /* a stale temporary file of a compile that died */
  rx_strbuf tmp = {0};
  base_strbuf_printf(&tmp, "%s/.tmp-dead01", dir);
  FILE *f = fopen(tmp.data, "wb");
  if (f) fclose(f);
  struct timespec old[2] = {{.tv_sec = 1000}, {.tv_sec = 1000}};
  utimensat(AT_FDCWD, tmp.data, old, 0);
  drv_kcache_close(c);
  st = drv_kcache_open(dir, 2500, &c); /* room for two entries of about 1 KB */
  CHECK_MSG(!st, "reopen");
  if (!c) return;
  uint64_t left = drv_kcache_trim(c);
  CHECK_MSG(left <= 2500, "trimmed to %llu bytes", (unsigned long long)left);
  CHECK_MSG(entries(dir, NULL) == 2, "two entries left, got %d", entries(dir, NULL));
  CHECK_MSG(!get_eq(c, "evict0", big, "") && !get_eq(c, "evict1", big, ""), "the oldest evicted");
  CHECK_MSG(get_eq(c, "evict2", big, "") && get_eq(c, "evict3", big, ""), "the newest kept");
  CHECK_MSG(access(tmp.data, F_OK) != 0, "a stale temporary file is removed");
  base_strbuf_free(&tmp);
  drv_kcache_close(c);
}

typedef struct racer {
  rx_kcache *c;
  int id, bad;
} racer;

/* Every thread writes and reads the same keys: a read is a miss or the whole value. */
static void *race(void *arg) {
  racer *r = arg;
  char key[16], val[64];
  for (int round = 0; round < 200; round++) {
    int k = (round + r->id) % 5;
    snprintf(key, sizeof key, "race%d", k);
    snprintf(val, sizeof val, "value of key %d, the same for every writer", k);
    rx_kblob parts[2] = {{(unsigned char *)val, strlen(val)}, {(unsigned char *)key, strlen(key)}};
    rx_status st = drv_kcache_put(r->c, key, strlen(key), 2, parts);
    rx_status_free(st);
    rx_kblob out[2];
    if (drv_kcache_get(r->c, key, strlen(key), 2, out)) {
      r->bad += out[0].len != strlen(val) || memcmp(out[0].data, val, out[0].len);
      free(out[0].data);
      free(out[1].data);
    }
  }
  return NULL;
}

static void test_threads(const char *dir) {
  rx_kcache *c = NULL;
  rx_status st = drv_kcache_open(dir, 0, &c);
  CHECK_MSG(!st, "open");
  if (!c) return;
  racer rs[4];
  pthread_t th[4];
  for (int i = 0; i < 4; i++) {
    rs[i] = (racer){c, i, 0};
    pthread_create(&th[i], NULL, race, &rs[i]);
  }
  for (int i = 0; i < 4; i++) {
    pthread_join(th[i], NULL);
    CHECK_MSG(rs[i].bad == 0, "thread %d read %d torn or wrong values", i, rs[i].bad);
  }
  CHECK_MSG(entries(dir, NULL) == 5, "five entries");
  drv_kcache_close(c);
}

static const char *const module_text =
    "graph_fn main(x: f32[n, 64], y: f32[n, 64]) -> f32[n, 64] {\n"
    "  dataflow {\n"
    "    a = add(x, y)\n"
    "    b = softmax(a, axis=-1)\n"
    "    c = multiply(b, x)\n"
    "  }\n"
    "  return c\n"
    "}\n";

/* drv_compile for vulkan and cuda at jobs, through cache c (NULL: none): the artifact (heap). */
static unsigned char *compile(rx_kcache *c, int jobs, size_t *out_len) {
  rx_module *m = rx_module_new();
  rx_diag diag;
  base_diag_init(&diag);
  rx_compile_options o = {.jobs = jobs, .cache = c};
  rx_status st = drv_compile_options_set_targets(&o, "vulkan,cuda,metal");
  rx_status_free(st);
  rx_compile_result r;
  bool ok = ir_parse_module(m, "t.rx", module_text, strlen(module_text), &diag) &&
            drv_compile(m, &o, &diag, &r);
  CHECK_MSG(ok, "compile: %s", rx_diag_text(&diag));
  unsigned char *bytes = NULL;
  *out_len = 0;
  if (ok) {
    bytes = base_malloc(r.artifact_len);
    memcpy(bytes, r.artifact, r.artifact_len);
    *out_len = r.artifact_len;
  }
  drv_compile_result_free(&r);
  base_diag_free(&diag);
  rx_module_free(m);
  return bytes;
}

static void test_compile(const char *dir) {
  rx_kcache *c = NULL;
  rx_status st = drv_kcache_open(dir, 0, &c);
  CHECK_MSG(!st, "open");
  if (!c) return;
  size_t n0, n1, n2, n3;
  unsigned char *plain = compile(NULL, 1, &n0);
  unsigned char *cold = compile(c, 2, &n1);
  int stored = entries(dir, NULL);
  unsigned char *warm = compile(c, 3, &n2);
  char *first = NULL;
  entries(dir, &first);
  if (first) damage(first, -3, -1); /* one corrupt entry: recompiled, same bytes */
  free(first);
  unsigned char *mended = compile(c, 2, &n3);
  CHECK_MSG(plain && n0 == n1 && !memcmp(plain, cold, n0),
            "cold cache, -j 2: the same bytes as -j 1");
  CHECK_MSG(plain && n0 == n2 && !memcmp(plain, warm, n0), "warm cache, -j 3: the same bytes");
  CHECK_MSG(plain && n0 == n3 && !memcmp(plain, mended, n0), "a corrupt entry: the same bytes");
  CHECK_MSG(entries(dir, NULL) == stored, "the corrupt entry written again (%d entries, %d before)",
            entries(dir, NULL), stored);
  printf("compile: %d cache entries (vulkan kernels; cuda ones too where NVRTC is present)\n",
         stored);
  free(plain);
  free(cold);
  free(warm);
  free(mended);
  drv_kcache_close(c);
}

int main(void) {
  char root[] = "/tmp/relaxc-kcache-XXXXXX";
  if (!mkdtemp(root)) {
    printf("FAIL: mkdtemp\n");
    return 1;
  }
  const char *names[] = {"basic", "evict", "threads", "compile"};
  void (*tests[])(const char *) = {test_roundtrip_and_corruption, test_eviction, test_threads,
                                   test_compile};
  for (int i = 0; i < 4; i++) {
    rx_strbuf d = {0};
    base_strbuf_printf(&d, "%s/%s/nested", root, names[i]); /* created with its parents */
    tests[i](d.data);
    remove_tree(d.data);
    base_strbuf_free(&d);
    base_strbuf_printf(&d, "%s/%s", root, names[i]);
    rmdir(d.data);
    base_strbuf_free(&d);
  }
  rmdir(root);
  return check_finish("test_kcache");
}
