/* Error quality below the CLI: the one checked element count (base_shape_count, base_mul_count) and
 * the diagnostics' quoting of the user's text (a bounded excerpt, the caret under its character,
 * no raw bytes). The CLI-level regressions are tests/lit/compile/diag_excerpt.test and
 * tests/lit/run/vm_names.rx. */
#include "base/base.h"
#include "check.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void test_counts(void) {
  int64_t n = -1;
  const int64_t small[] = {3, 4, 5};
  CHECK_MSG(base_shape_count(3, small, 1, &n) == RX_COUNT_OK && n == 60, "3x4x5: %lld",
            (long long)n);
  CHECK_MSG(base_shape_count(3, small, 4, &n) == RX_COUNT_OK && n == 240, "bytes: %lld",
            (long long)n);
  CHECK_MSG(base_shape_count(0, NULL, 2, &n) == RX_COUNT_OK && n == 2, "0-d: %lld", (long long)n);
  /* 2^32 * 2^32 wraps to 0 in 64 bits: an overflow, never "0 elements" */
  const int64_t wrap[] = {INT64_C(1) << 32, INT64_C(1) << 32};
  n = 7;
  CHECK_MSG(base_shape_count(2, wrap, 1, &n) == RX_COUNT_OVERFLOW && n == 0, "2^64: %lld",
            (long long)n);
  /* the count fits, the bytes do not */
  const int64_t big[] = {INT64_C(1) << 31, INT64_C(1) << 31};
  CHECK_MSG(base_shape_count(2, big, 1, &n) == RX_COUNT_OK && n == INT64_C(1) << 62, "2^62");
  CHECK_MSG(base_shape_count(2, big, 2, &n) == RX_COUNT_OVERFLOW, "2^63 bytes overflow int64");
  CHECK_MSG(base_shape_count(2, big, 4, &n) == RX_COUNT_OVERFLOW, "2^64 bytes");
  /* exactly INT64_MAX is fine; one more is not */
  const int64_t max[] = {INT64_MAX};
  CHECK_MSG(base_shape_count(1, max, 1, &n) == RX_COUNT_OK && n == INT64_MAX, "INT64_MAX");
  CHECK_MSG(base_shape_count(1, max, 2, &n) == RX_COUNT_OVERFLOW, "2 * INT64_MAX");
  const int64_t huge_unit[] = {1};
  CHECK_MSG(base_shape_count(1, huge_unit, UINT64_MAX, &n) == RX_COUNT_OVERFLOW,
            "unit > INT64_MAX");
  /* a zero dimension: no elements, whatever the others */
  const int64_t zero[] = {INT64_MAX, 0, INT64_MAX};
  CHECK_MSG(base_shape_count(3, zero, 8, &n) == RX_COUNT_OK && n == 0, "a zero dim: %lld",
            (long long)n);
  const int64_t neg[] = {4, -1};
  CHECK_MSG(base_shape_count(2, neg, 1, &n) == RX_COUNT_NEGATIVE && n == 0, "negative");
  CHECK_MSG(base_mul_count(INT64_C(3037000499), INT64_C(3037000499), &n) &&
                n == INT64_C(9223372030926249001),
            "sqrt(INT64_MAX)^2");
  CHECK_MSG(!base_mul_count(INT64_C(3037000500), INT64_C(3037000500), &n) && n == 0, "just over");
  CHECK_MSG(!base_mul_count(-2, 3, &n), "negative factor");
}

/* The diagnostic of an error at byte offset `at` of text (one line). */
static char *diag_at(const char *text, size_t len, size_t at) {
  rx_source src = {"t.rx", text, len};
  rx_diag d;
  base_diag_init(&d);
  base_diag_report(&d, RX_DIAG_ERROR, (rx_loc){&src, 1, (unsigned)at + 1, at}, "bad '%s'", text);
  char *out = base_strdup(rx_diag_text(&d));
  base_diag_free(&d);
  return out;
}

/* Lines of a diagnostic: [0] the message, [1] the excerpt, [2] the caret. */
static void lines3(char *s, char **l) {
  for (int i = 0; i < 3; i++) {
    l[i] = s;
    char *nl = s ? strchr(s, '\n') : NULL;
    if (nl) *nl = '\0';
    s = nl ? nl + 1 : NULL;
  }
}

static bool printable(const char *s) {
  for (const unsigned char *p = (const unsigned char *)s; *p; p++)
    if (!(*p >= 0x20 && *p < 0x7f) && *p != '\n' && *p != '\t') return false;
  return true;
}

static void test_excerpts(void) {
  /* a 100,000-character line: the excerpt is at most ~130 columns, the caret under the '@' */
  size_t n = 100000;
  char *text = malloc(n + 1);
  for (size_t at = 0; at < n; at += 33331) {
    memset(text, 'x', n);
    for (size_t i = 0; i < n; i += 7) text[i] = (char)('a' + i % 26);
    text[n] = '\0';
    text[at] = '@';
    char *out = diag_at(text, n, at), *l[3];
    CHECK_MSG(strlen(out) < 1400, "at %zu: a diagnostic of %zu bytes", at, strlen(out));
    lines3(out, l);
    CHECK_MSG(l[2] && strlen(l[1]) <= 132, "at %zu: an excerpt of %zu columns", at, strlen(l[1]));
    const char *caret = l[2] ? strchr(l[2], '^') : NULL;
    CHECK_MSG(caret && (size_t)(caret - l[2]) < strlen(l[1]) && l[1][caret - l[2]] == '@',
              "at %zu: the caret is not under the '@':\n%s\n%s", at, l[1], l[2] ? l[2] : "");
    CHECK_MSG(strstr(l[0], "...") != NULL, "at %zu: the message is not cut: %.80s", at, l[0]);
    CHECK_MSG((at < 60) == (strncmp(l[1], "  ...", 5) != 0), "at %zu: a '...' before: %.20s", at,
              l[1]);
    free(out);
  }
  free(text);
  /* raw bytes: '?' in the excerpt (one column each), \xNN in the message; UTF-8 stays */
  const char bin[] = "a\x01\xff\x7f\xc3\xa9\xe2\x82\xac b @";
  char *out = diag_at(bin, sizeof bin - 1, sizeof bin - 2), *l[3];
  lines3(out, l);
  CHECK_MSG(!strcmp(l[0], "t.rx:1:13: error: bad 'a\\x01\\xff\\x7f\xc3\xa9\xe2\x82\xac b @'"),
            "message: %s", l[0]);
  CHECK_MSG(l[1] && !strcmp(l[1], "  a???\xc3\xa9\xe2\x82\xac b @"), "excerpt: %s", l[1]);
  CHECK_MSG(l[2] && !strcmp(l[2], "           ^"), "caret: '%s'", l[2]);
  free(out);
  /* every byte value: the output has no control characters and no invalid UTF-8 */
  char all[257];
  for (int i = 0; i < 256; i++) all[i] = (char)(i == 10 || i == 13 ? ' ' : i ? i : 1);
  all[256] = '\0';
  out = diag_at(all, 256, 200);
  char ascii[4096];
  size_t k = 0;
  for (const unsigned char *p = (const unsigned char *)out; *p && k < sizeof ascii - 1; p++)
    if (*p < 0x80) ascii[k++] = (char)*p;
  ascii[k] = '\0';
  CHECK_MSG(printable(ascii), "a control byte in the diagnostic of every byte value");
  free(out);
}

/* A status message keeps text, newlines, tabs and valid UTF-8; other bytes become \xNN. */
static void test_status_bytes(void) {
  rx_status s = base_status_make(RX_ERR_INVALID, "op '%s'\n\tnext", "\x1b[31m\xff\xc3\xa9\x7f");
  CHECK_MSG(!strcmp(rx_status_message(s), "op '\\x1b[31m\\xff\xc3\xa9\\x7f'\n\tnext"), "status: %s",
            rx_status_message(s));
  s = base_status_annotate(s, "in '%s'", "\x01");
  CHECK_MSG(!strcmp(rx_status_message(s), "in '\\x01': op '\\x1b[31m\\xff\xc3\xa9\\x7f'\n\tnext"),
            "annotated: %s", rx_status_message(s));
  rx_status_free(s);
}

int main(void) {
  test_status_bytes();
  test_counts();
  test_excerpts();
  return check_finish("test_errors");
}
