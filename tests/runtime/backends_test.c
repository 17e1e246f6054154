/* The backends' common ground, without a kernel:
 * - the null backend (runtime/null/null.c, the skeleton a new backend copies): opened only by
 *   name, and every entry point of its table reports RX_ERR_UNSUPPORTED naming the backend and
 *   the call; the public calls through it fail the same way and leak nothing (ASan build);
 * - driver loading is thread-safe: Vulkan's and CUDA's check and enumerate called from 8 threads
 *   at once, before anything else loaded the drivers, all give the same answer (a device list
 *   on lavapipe, "not found" where a driver is absent).
 * usage: rt_backends_test */
#include <pthread.h>
#include <stdlib.h>

#include "../unit/check.h"
#include "relaxc/runtime.h"
#include "runtime/device.h"

#define NTHREADS 8

typedef struct answer {
  rx_rt_backend b;
  int code; /* rx_status_code of check (0: OK) */
  char msg[256];
  size_t ndev;
} answer;

static void *ask(void *p) {
  answer *a = p;
  rx_status s = rx_rt_backend_check(a->b);
  a->code = (int)rx_status_code_of(s);
  snprintf(a->msg, sizeof a->msg, "%s", rx_status_message(s));
  rx_status_free(s);
  rx_rt_device_info *infos = NULL;
  s = rx_rt_enumerate(a->b, &infos, &a->ndev);
  rx_status_free(s);
  rx_rt_free_device_infos(infos);
  return NULL;
}

static void concurrent_loading(rx_rt_backend b) {
  pthread_t th[NTHREADS];
  answer ans[NTHREADS];
  for (int i = 0; i < NTHREADS; i++) {
    memset(&ans[i], 0, sizeof ans[i]);
    ans[i].b = b;
    CHECK_MSG(pthread_create(&th[i], NULL, ask, &ans[i]) == 0, "pthread_create");
  }
  for (int i = 0; i < NTHREADS; i++) pthread_join(th[i], NULL);
  for (int i = 1; i < NTHREADS; i++)
    CHECK_MSG(ans[i].code == ans[0].code && !strcmp(ans[i].msg, ans[0].msg) &&
                  ans[i].ndev == ans[0].ndev,
              "%s: thread %d answered %d '%s' (%zu devices), thread 0 %d '%s' (%zu devices)",
              rx_rt_backend_name(b), i, ans[i].code, ans[i].msg, ans[i].ndev, ans[0].code,
              ans[0].msg, ans[0].ndev);
  printf("%s from %d threads: %s (%zu devices)\n", rx_rt_backend_name(b), NTHREADS,
         ans[0].code ? ans[0].msg : "loads", ans[0].ndev);
}

/* Every entry point of the null backend's table, called directly with zeroed objects. */
static void null_table(void) {
  const rt_backend *be = &rt_null_backend;
  CHECK_MSG(!strcmp(rx_rt_backend_name(RX_RT_BACKEND_NULL), "null"), "the backend's name");
  rx_rt_device d;
  rx_rt_buffer buf;
  rx_rt_timer tm;
  rx_rt_kernel k;
  rx_rt_launch_params lp;
  memset(&d, 0, sizeof d);
  memset(&buf, 0, sizeof buf);
  memset(&tm, 0, sizeof tm);
  memset(&k, 0, sizeof k);
  memset(&lp, 0, sizeof lp);
  rx_rt_device_info *infos = (rx_rt_device_info *)1;
  size_t n = 7;
  char byte = 0;
  double ms = 1;
  CHECK_ERR(be->check(), RX_ERR_UNSUPPORTED, "null: check");
  CHECK_ERR(be->enumerate(&infos, &n, NULL), RX_ERR_UNSUPPORTED, "null: enumerate");
  CHECK_MSG(infos == NULL && n == 0, "enumerate zeroes its out-parameters");
  CHECK_ERR(be->device_init(&d, 0, NULL), RX_ERR_UNSUPPORTED, "null: device_init");
  be->device_destroy(&d);
  CHECK_ERR(be->synchronize(&d), RX_ERR_UNSUPPORTED, "null: synchronize");
  CHECK_ERR(be->buffer_init(&buf), RX_ERR_UNSUPPORTED, "null: buffer_init");
  be->buffer_destroy(&buf);
  CHECK_ERR(be->buffer_write(&buf, 0, &byte, 1), RX_ERR_UNSUPPORTED, "null: buffer_write");
  CHECK_ERR(be->buffer_read(&buf, 0, &byte, 1), RX_ERR_UNSUPPORTED, "null: buffer_read");
  CHECK_ERR(be->buffer_fill(&buf, 0, 1, 0), RX_ERR_UNSUPPORTED, "null: buffer_fill");
  CHECK_ERR(be->buffer_copy(&buf, 0, &buf, 0, 1), RX_ERR_UNSUPPORTED, "null: buffer_copy");
  CHECK_ERR(be->kernel_create(&d, &k), RX_ERR_UNSUPPORTED, "null: kernel_create");
  be->kernel_destroy(&d, &k);
  CHECK_ERR(be->launch(&d, &k, &lp), RX_ERR_UNSUPPORTED, "null: launch");
  CHECK_ERR(be->timer_init(&tm), RX_ERR_UNSUPPORTED, "null: timer_init");
  be->timer_destroy(&tm);
  CHECK_ERR(be->timer_record(&tm, 0), RX_ERR_UNSUPPORTED, "null: timer_record");
  CHECK_ERR(be->timer_elapsed(&tm, &ms), RX_ERR_UNSUPPORTED, "null: timer_elapsed");
  CHECK_MSG(ms == 0, "timer_elapsed zeroes its out-parameter");
}

/* The public calls through it: by name only, never the default device. */
static void null_public(void) {
  CHECK_MSG(!strcmp(rx_rt_backend_name(RX_RT_BACKEND_NULL), "null"), "the backend's name");
  CHECK_ERR(rx_rt_backend_check(RX_RT_BACKEND_NULL), RX_ERR_UNSUPPORTED, "null backend");
  rx_rt_device_info *infos = NULL;
  size_t n = 0;
  CHECK_ERR(rx_rt_enumerate(RX_RT_BACKEND_NULL, &infos, &n), RX_ERR_UNSUPPORTED, "null: check");
  rx_rt_device *d = NULL;
  CHECK_ERR(rx_rt_device_open("null", NULL, &d), RX_ERR_UNSUPPORTED, "device 'null'");
  CHECK_MSG(d == NULL, "no device");
  rx_status s = rx_rt_device_open(NULL, NULL, &d); /* the default never picks null */
  if (!s) {
    CHECK_MSG(rx_rt_device_get_info(d)->backend != RX_RT_BACKEND_NULL, "default device is null");
    rx_rt_device_release(d);
  } else {
    CHECK_MSG(!strstr(rx_status_message(s), "null:"), "the default tried null: %s",
              rx_status_message(s));
    rx_status_free(s);
  }
}

int main(void) {
  /* first: nothing has loaded a driver yet */
  concurrent_loading(RX_RT_BACKEND_VULKAN);
  concurrent_loading(RX_RT_BACKEND_CUDA);
  null_table();
  null_public();
  return check_finish("runtime.backends");
}
