/* tests/runtime/rt_test.h: a tiny test harness for the runtime tests. Each check counts as passed
 * or failed; a test prints `NAME: N passed, M failed, K skipped` and exits 1 on any failure, 77
 * (ctest's SKIP_RETURN_CODE) when nothing ran but skips, 0 otherwise. */
#ifndef RX_RT_TEST_H
#define RX_RT_TEST_H

#include <stdio.h>
#include <string.h>

#include "relaxc/runtime.h"

static int t_pass, t_fail, t_skip;

#define CHECK(cond, ...)                                                                           \
  do {                                                                                             \
    if (cond) {                                                                                    \
      t_pass++;                                                                                    \
    } else {                                                                                       \
      t_fail++;                                                                                    \
      fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);                              \
      fprintf(stderr, __VA_ARGS__);                                                                \
      fprintf(stderr, "\n");                                                                       \
    }                                                                                              \
  } while (0)

/* Checks that a call returned OK; prints and frees the status otherwise. */
#define CHECK_OK(call)                                                                             \
  do {                                                                                             \
    rx_status s_ = (call);                                                                         \
    CHECK(s_ == NULL, "%s", rx_status_message(s_));                                                \
    rx_status_free(s_);                                                                            \
  } while (0)

/* Checks that a call failed with code and a message containing text. */
#define CHECK_ERR(call, code, text)                                                                \
  do {                                                                                             \
    rx_status s_ = (call);                                                                         \
    CHECK(s_ != NULL && rx_status_code_of(s_) == (code) &&                                         \
              strstr(rx_status_message(s_), (text)) != NULL,                                       \
          "expected error %d containing '%s', got %d: '%s'", (int)(code), (text),                  \
          (int)rx_status_code_of(s_), rx_status_message(s_));                                      \
    if (s_) printf("  expected error: %s\n", rx_status_message(s_));                               \
    rx_status_free(s_);                                                                            \
  } while (0)

#define SKIP(...)                                                                                  \
  do {                                                                                             \
    t_skip++;                                                                                      \
    printf("SKIP: ");                                                                              \
    printf(__VA_ARGS__);                                                                           \
    printf("\n");                                                                                  \
  } while (0)

static int t_finish(const char *name) {
  printf("%s: %d passed, %d failed, %d skipped\n", name, t_pass, t_fail, t_skip);
  if (t_fail) return 1;
  if (!t_pass && t_skip) return 77;
  return 0;
}

#endif
