/* tests/unit/check.h: the one check harness of the C tests (the unit tests of tests/unit and
 * the runtime's tests in tests/runtime). Header-only, so the runtime's tests, which link the
 * runtime alone, use it too; it needs only the public relaxc/types.h.
 *
 * Each check counts as passed or failed in check_passed / check_failed (atomic: the server test
 * checks from several threads); a failure prints one line on stderr (stdout flushed first, so
 * the line lands after the test's own progress output):
 *
 *   CHECK(cond)                    FAIL file:line: cond
 *   CHECK_MSG(cond, fmt, ...)      FAIL file:line: cond: <message>
 *   CHECK_INT_EQ(a, b)             FAIL file:line: a == b: 3 != 4
 *   CHECK_STR_EQ(a, b)             FAIL file:line: a == b: "x" != "y"
 *   CHECK_OK(call)                 FAIL file:line: call: <the status's message>   (freed)
 *   CHECK_ERR(call, code, text)    an error of that code whose message holds text (freed)
 *   CHECK_SKIP(fmt, ...)           counts a skip in check_skipped and prints SKIP: <message>
 *
 * The counters are static, one set per file that includes this header: a test's own file
 * counts; its support files report through what they return (or rxk_stats, support_pipeline.h).
 *
 * A test ends with `return check_finish("name");`: it prints `name: N passed, M failed` (and
 * `, K skipped` when some were) and returns the exit code: 1 on any failure, 77 (ctest's
 * SKIP_RETURN_CODE) when nothing passed but something was skipped, 0 otherwise. A test with its
 * own summary reads the counters directly. */
#ifndef RX_TESTS_CHECK_H
#define RX_TESTS_CHECK_H

#include "relaxc/types.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static atomic_int check_passed, check_failed, check_skipped;

/* Prints one failure line: FAIL file:line: expr[: message]. Written with one fputs, so lines of
 * checks that fail on different threads do not interleave. */
__attribute__((format(printf, 4, 5), unused)) static void
check_fail_(const char *file, int line, const char *expr, const char *fmt, ...) {
  va_list ap, ap2;
  va_start(ap, fmt);
  va_copy(ap2, ap);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  size_t head = strlen(file) + strlen(expr) + 64;
  size_t size = head + (n > 0 ? (size_t)n : 0) + 4;
  char *buf = malloc(size);
  if (!buf) abort();
  int k = snprintf(buf, size, "FAIL %s:%d: %s", file, line, expr);
  if (n > 0) {
    k += snprintf(buf + k, size - (size_t)k, ": ");
    vsnprintf(buf + k, size - (size_t)k, fmt, ap2);
  }
  va_end(ap2);
  fflush(stdout);
  fputs(buf, stderr);
  fputc('\n', stderr);
  free(buf);
}

/* One check: counted, and reported when it fails. */
#define CHECK(cond) CHECK_AT_(cond, #cond, "%s", "")

/* One check with a printf message, formatted only when the check fails. */
#define CHECK_MSG(cond, ...) CHECK_AT_(cond, #cond, __VA_ARGS__)

/* Two integers equal; both values printed on failure. */
#define CHECK_INT_EQ(a, b)                                                                         \
  do {                                                                                             \
    int64_t a_ = (int64_t)(a), b_ = (int64_t)(b);                                                  \
    CHECK_AT_(a_ == b_, #a " == " #b, "%" PRId64 " != %" PRId64, a_, b_);                          \
  } while (0)

/* Two strings equal (NULL equals only NULL); both printed on failure. */
#define CHECK_STR_EQ(a, b)                                                                         \
  do {                                                                                             \
    const char *a_ = (a), *b_ = (b);                                                               \
    CHECK_AT_((a_ && b_) ? strcmp(a_, b_) == 0 : a_ == b_, #a " == " #b, "\"%s\" != \"%s\"",       \
              a_ ? a_ : "(null)", b_ ? b_ : "(null)");                                             \
  } while (0)

/* The counting and reporting behind the checks above: expr is the text printed. */
#define CHECK_AT_(cond, expr, ...)                                                                 \
  do {                                                                                             \
    if (cond) {                                                                                    \
      check_passed++;                                                                              \
    } else {                                                                                       \
      check_failed++;                                                                              \
      check_fail_(__FILE__, __LINE__, expr, __VA_ARGS__);                                          \
    }                                                                                              \
  } while (0)

/* A call that returns rx_status succeeds; on failure its message is printed. Frees it. */
#define CHECK_OK(call)                                                                             \
  do {                                                                                             \
    rx_status s_ = (call);                                                                         \
    CHECK_AT_(s_ == NULL, #call, "%s", rx_status_message(s_));                                     \
    rx_status_free(s_);                                                                            \
  } while (0)

/* A call fails with status code `code` and a message holding `text`; the message is printed
 * (as `  expected error: ...`) either way. Frees it. */
#define CHECK_ERR(call, code, text)                                                                \
  do {                                                                                             \
    rx_status s_ = (call);                                                                         \
    CHECK_AT_(s_ != NULL && rx_status_code_of(s_) == (code) &&                                     \
                  strstr(rx_status_message(s_), (text)) != NULL,                                   \
              #call, "expected error %d containing '%s', got %d: '%s'", (int)(code), (text),       \
              (int)rx_status_code_of(s_), rx_status_message(s_));                                  \
    if (s_) printf("  expected error: %s\n", rx_status_message(s_));                               \
    rx_status_free(s_);                                                                            \
  } while (0)

/* Something that could not run here (a missing driver or toolchain): a skip, never a pass. */
#define CHECK_SKIP(...)                                                                            \
  do {                                                                                             \
    check_skipped++;                                                                               \
    printf("SKIP: ");                                                                              \
    printf(__VA_ARGS__);                                                                           \
    printf("\n");                                                                                  \
  } while (0)

/* Prints the summary line and returns the test's exit code (see the top of this file). */
__attribute__((unused)) static int check_finish(const char *name) {
  int p = check_passed, f = check_failed, s = check_skipped;
  if (s)
    printf("%s: %d passed, %d failed, %d skipped\n", name, p, f, s);
  else
    printf("%s: %d passed, %d failed\n", name, p, f);
  if (f) return 1;
  if (!p && s) return 77;
  return 0;
}

#endif
