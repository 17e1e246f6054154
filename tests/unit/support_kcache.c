/* support_kcache.c: the kernel cache the tests' compiles share (support_kernels.h, rxk_kcache). */
#include "driver/driver.h"
#include "support_kernels.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static rx_kcache *cache;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void close_cache(void) {
  drv_kcache_close(cache);
  cache = NULL;
}

static void open_cache(void) {
  const char *dir = getenv("RX_TEST_KCACHE");
#ifdef RX_TEST_KCACHE_DIR
  if (!dir) dir = RX_TEST_KCACHE_DIR;
#endif
  if (!dir || !*dir || strcmp(dir, "0") == 0) return;
  rx_status s = drv_kcache_open(dir, RX_KCACHE_DEFAULT_LIMIT, &cache);
  if (s) {
    fprintf(stderr, "kernel cache %s not opened, compiling without it: %s\n", dir,
            rx_status_message(s));
    rx_status_free(s);
    return;
  }
  atexit(close_cache); /* before LeakSanitizer's check, which was registered first */
}

rx_kcache *rxk_kcache(void) {
  pthread_once(&once, open_cache);
  return cache;
}
