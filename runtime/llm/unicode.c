/* runtime/llm/unicode.c: UTF-8, character classes and NFC over the generated tables
 * (unicode.h). */
#include "runtime/llm/unicode.h"

#include <stdlib.h>
#include <string.h>

/* The index of the last run whose start is <= cp (runs start at U+0000). */
static size_t find_run(const uint32_t *runs, size_t n, uint32_t cp) {
  size_t lo = 0, hi = n; /* runs[lo] <= cp < runs[hi] */
  while (hi - lo > 1) {
    size_t mid = lo + (hi - lo) / 2;
    if ((runs[mid] >> 8) <= cp)
      lo = mid;
    else
      hi = mid;
  }
  return lo;
}

enum uc_class uc_class_of(uint32_t cp) {
  if (cp < 128) return (enum uc_class)uc_ascii_class[cp];
  return (enum uc_class)(uc_class_runs[find_run(uc_class_runs, uc_class_nruns, cp)] & 0xFF);
}

bool uc_is_word(uint32_t cp) {
  switch (uc_class_of(cp)) {
  case UC_LETTER:
  case UC_DIGIT:
  case UC_LETTER_NUMBER:
  case UC_MARK:
  case UC_CONNECTOR:
  case UC_ALPHA_SYMBOL:
  case UC_JOINER:
    return true;
  default:
    return false;
  }
}

static int ccc_of(uint32_t cp) {
  if (cp < 0x300) return 0; /* the first non-zero class is U+0300's */
  return (int)(uc_ccc_runs[find_run(uc_ccc_runs, uc_ccc_nruns, cp)] & 0xFF);
}

/* ---- UTF-8 ---- */
uint32_t uc_next(const char *s, size_t *i) {
  const uint8_t *p = (const uint8_t *)s + *i;
  if (p[0] < 0x80) {
    *i += 1;
    return p[0];
  }
  if (p[0] < 0xE0) {
    *i += 2;
    return (uint32_t)(p[0] & 0x1F) << 6 | (p[1] & 0x3F);
  }
  if (p[0] < 0xF0) {
    *i += 3;
    return (uint32_t)(p[0] & 0x0F) << 12 | (uint32_t)(p[1] & 0x3F) << 6 | (p[2] & 0x3F);
  }
  *i += 4;
  return (uint32_t)(p[0] & 0x07) << 18 | (uint32_t)(p[1] & 0x3F) << 12 |
         (uint32_t)(p[2] & 0x3F) << 6 | (p[3] & 0x3F);
}

size_t uc_prev(const char *s, size_t i) {
  do i--;
  while (i > 0 && ((uint8_t)s[i] & 0xC0) == 0x80);
  return i;
}

size_t uc_put(uint32_t cp, char out[4]) {
  if (cp < 0x80) {
    out[0] = (char)cp;
    return 1;
  }
  if (cp < 0x800) {
    out[0] = (char)(0xC0 | cp >> 6);
    out[1] = (char)(0x80 | (cp & 0x3F));
    return 2;
  }
  if (cp < 0x10000) {
    out[0] = (char)(0xE0 | cp >> 12);
    out[1] = (char)(0x80 | (cp >> 6 & 0x3F));
    out[2] = (char)(0x80 | (cp & 0x3F));
    return 3;
  }
  out[0] = (char)(0xF0 | cp >> 18);
  out[1] = (char)(0x80 | (cp >> 12 & 0x3F));
  out[2] = (char)(0x80 | (cp >> 6 & 0x3F));
  out[3] = (char)(0x80 | (cp & 0x3F));
  return 4;
}

void uc_append(rx_strbuf *b, uint32_t cp) {
  char u[4];
  base_strbuf_appendn(b, u, uc_put(cp, u));
}

/* The length of the character starting at s[0] (n bytes available) if it is valid UTF-8 (Unicode
 * Table 3-7, well-formed byte sequences); otherwise 0, with *bad the length of its maximal
 * subpart (the bytes that form a valid prefix, at least 1) and *truncated whether the input ended
 * inside a valid prefix. */
static size_t char_len(const uint8_t *s, size_t n, size_t *bad, bool *truncated) {
  *truncated = false;
  *bad = 1;
  uint8_t c = s[0];
  if (c < 0x80) return 1;
  size_t need;
  uint8_t lo = 0x80, hi = 0xBF; /* the range of the second byte */
  if (c >= 0xC2 && c <= 0xDF)
    need = 2;
  else if (c >= 0xE0 && c <= 0xEF) {
    need = 3;
    if (c == 0xE0) lo = 0xA0; /* no overlong forms */
    if (c == 0xED) hi = 0x9F; /* no surrogates */
  } else if (c >= 0xF0 && c <= 0xF4) {
    need = 4;
    if (c == 0xF0) lo = 0x90;
    if (c == 0xF4) hi = 0x8F; /* nothing above U+10FFFF */
  } else
    return 0;
  for (size_t k = 1; k < need; k++) {
    if (k >= n) {
      *truncated = true;
      *bad = k;
      return 0;
    }
    uint8_t min = k == 1 ? lo : 0x80, max = k == 1 ? hi : 0xBF;
    if (s[k] < min || s[k] > max) {
      *bad = k;
      return 0;
    }
  }
  return need;
}

size_t uc_valid_prefix(const char *s, size_t n) {
  const uint8_t *p = (const uint8_t *)s;
  size_t i = 0, bad;
  bool truncated;
  while (i < n) {
    if (p[i] < 0x80) {
      i++;
      continue;
    }
    size_t len = char_len(p + i, n - i, &bad, &truncated);
    if (!len) return i;
    i += len;
  }
  return n;
}

bool uc_is_truncated(const char *s, size_t n) {
  size_t bad;
  bool truncated;
  return n && !char_len((const uint8_t *)s, n, &bad, &truncated) && truncated;
}

bool uc_append_lossy(rx_strbuf *b, const char *s, size_t n) {
  const uint8_t *p = (const uint8_t *)s;
  size_t i = 0, start = 0, bad;
  bool truncated = false;
  while (i < n) {
    size_t len = p[i] < 0x80 ? 1 : char_len(p + i, n - i, &bad, &truncated);
    if (len) {
      i += len;
      continue;
    }
    base_strbuf_appendn(b, s + start, i - start);
    uc_append(b, UC_REPLACEMENT);
    i += bad;
    start = i;
  }
  if (n > start) base_strbuf_appendn(b, s + start, n - start);
  return truncated;
}

/* ---- NFC (UAX #15) ---- */
/* Hangul syllables, composed and decomposed by arithmetic (The Unicode Standard, 3.12) */
enum {
  HANGUL_S = 0xAC00,
  HANGUL_L = 0x1100,
  HANGUL_V = 0x1161,
  HANGUL_T = 0x11A7,
  HANGUL_LCOUNT = 19,
  HANGUL_VCOUNT = 21,
  HANGUL_TCOUNT = 28,
  HANGUL_NCOUNT = HANGUL_VCOUNT * HANGUL_TCOUNT,
  HANGUL_SCOUNT = HANGUL_LCOUNT * HANGUL_NCOUNT,
};
/* Canonical decompositions nest at most this deep (Unicode 15.1: 4, e.g. U+1FD7). */
#define DECOMP_DEPTH 8

typedef RX_VEC(uint32_t) cp_vec;

static const uint32_t *find_decomp(uint32_t cp) {
  size_t lo = 0, hi = uc_ndecomp;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (uc_decomp[mid][0] == cp) return uc_decomp[mid];
    if (uc_decomp[mid][0] < cp)
      lo = mid + 1;
    else
      hi = mid;
  }
  return NULL;
}

static void decompose(cp_vec *out, uint32_t cp, int depth) {
  if (cp >= HANGUL_S && cp < HANGUL_S + HANGUL_SCOUNT) {
    uint32_t s = cp - HANGUL_S;
    RX_VEC_PUSH(out, HANGUL_L + s / HANGUL_NCOUNT);
    RX_VEC_PUSH(out, HANGUL_V + s % HANGUL_NCOUNT / HANGUL_TCOUNT);
    if (s % HANGUL_TCOUNT) RX_VEC_PUSH(out, HANGUL_T + s % HANGUL_TCOUNT);
    return;
  }
  const uint32_t *d = cp >= 0xC0 && depth < DECOMP_DEPTH ? find_decomp(cp) : NULL;
  if (!d) {
    RX_VEC_PUSH(out, cp);
    return;
  }
  decompose(out, d[1], depth + 1);
  if (d[2]) decompose(out, d[2], depth + 1);
}

/* The primary composite of a and b, or 0. */
static uint32_t compose(uint32_t a, uint32_t b) {
  if (a >= HANGUL_L && a < HANGUL_L + HANGUL_LCOUNT && b >= HANGUL_V &&
      b < HANGUL_V + HANGUL_VCOUNT)
    return HANGUL_S + ((a - HANGUL_L) * HANGUL_VCOUNT + (b - HANGUL_V)) * HANGUL_TCOUNT;
  if (a >= HANGUL_S && a < HANGUL_S + HANGUL_SCOUNT && (a - HANGUL_S) % HANGUL_TCOUNT == 0 &&
      b > HANGUL_T && b < HANGUL_T + HANGUL_TCOUNT)
    return a + (b - HANGUL_T);
  size_t lo = 0, hi = uc_ncomp;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    const uint32_t *c = uc_comp[mid];
    if (c[0] == a && c[1] == b) return c[2];
    if (c[0] < a || (c[0] == a && c[1] < b))
      lo = mid + 1;
    else
      hi = mid;
  }
  return 0;
}

/* Canonical ordering: each run of non-starters sorted by class, stably (insertion sort). */
static void reorder(cp_vec *v) {
  for (size_t i = 1; i < v->len; i++) {
    uint32_t c = v->data[i];
    int cc = ccc_of(c);
    if (cc == 0) continue;
    size_t j = i;
    while (j > 0 && ccc_of(v->data[j - 1]) > cc) {
      v->data[j] = v->data[j - 1];
      j--;
    }
    v->data[j] = c;
  }
}

/* Canonical composition: each character joins the last starter unless blocked (a character
 * between them of class 0 or of a class not below its own). */
static void recompose(cp_vec *v) {
  size_t out = 0;
  long starter = -1; /* index in the output of the last starter */
  int last_cc = -1;  /* class of the last character after the starter; -1: none yet */
  for (size_t i = 0; i < v->len; i++) {
    uint32_t c = v->data[i];
    int cc = ccc_of(c);
    if (starter >= 0 && (last_cc == -1 || last_cc < cc)) {
      uint32_t composite = compose(v->data[starter], c);
      if (composite) {
        v->data[starter] = composite;
        continue;
      }
    }
    if (cc == 0) {
      starter = (long)out;
      last_cc = -1;
    } else {
      last_cc = cc;
    }
    v->data[out++] = c;
  }
  v->len = out;
}

void uc_append_nfc(rx_strbuf *b, const char *s, size_t n) {
  size_t i = 0;
  while (i < n && (uint8_t)s[i] < 0x80) i++;
  if (i == n) { /* ASCII alone is NFC */
    if (n) base_strbuf_appendn(b, s, n);
    return;
  }
  cp_vec v = {0};
  for (i = 0; i < n;) decompose(&v, uc_next(s, &i), 0);
  reorder(&v);
  recompose(&v);
  for (size_t k = 0; k < v.len; k++) uc_append(b, v.data[k]);
  free(v.data);
}
