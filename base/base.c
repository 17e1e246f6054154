#define _XOPEN_SOURCE 700 /* realpath (base_path_check_inside) */
#include "base.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

_Noreturn void base_panic(const char *file, int line, const char *what) {
  fprintf(stderr, "relaxc internal error: %s:%d: assertion failed: %s\n", file, line, what);
  abort();
}

static void *check_alloc(void *p) {
  if (!p) {
    fputs("relaxc: host out of memory\n", stderr);
    abort();
  }
  return p;
}

void *base_malloc(size_t n) { return check_alloc(malloc(n ? n : 1)); }
void *base_calloc(size_t n, size_t size) { return check_alloc(calloc(n ? n : 1, size ? size : 1)); }
void *base_realloc(void *p, size_t n) { return check_alloc(realloc(p, n ? n : 1)); }
char *base_strdup(const char *s) { return base_strndup(s, strlen(s)); }
char *base_strndup(const char *s, size_t n) {
  char *r = base_malloc(n + 1);
  memcpy(r, s, n);
  r[n] = 0;
  return r;
}

/* ---- arena ---- */

struct rx_arena_chunk {
  rx_arena_chunk *next;
  size_t size;
  _Alignas(16) unsigned char data[];
};

void base_arena_init(rx_arena *a) { memset(a, 0, sizeof *a); }

void base_arena_free(rx_arena *a) {
  rx_arena_chunk *c = a->head;
  while (c) {
    rx_arena_chunk *n = c->next;
    free(c);
    c = n;
  }
  memset(a, 0, sizeof *a);
}

void *base_arena_alloc(rx_arena *a, size_t n) {
  n = (n + 15) & ~(size_t)15;
  if (!a->head || a->used + n > a->cap) {
    size_t size = n > 60000 ? n : 64 * 1024 - 64;
    rx_arena_chunk *c = base_malloc(sizeof *c + size);
    c->size = size;
    /* a big allocation goes behind the head so the head's free space is kept */
    if (a->head && n > 60000) {
      c->next = a->head->next;
      a->head->next = c;
      a->total += n;
      memset(c->data, 0, n);
      return c->data;
    }
    c->next = a->head;
    a->head = c;
    a->used = 0;
    a->cap = size;
  }
  void *p = a->head->data + a->used;
  a->used += n;
  a->total += n;
  memset(p, 0, n);
  return p;
}

void *base_arena_dup(rx_arena *a, const void *p, size_t n) {
  void *r = base_arena_alloc(a, n);
  if (n) memcpy(r, p, n);
  return r;
}

char *base_arena_strndup(rx_arena *a, const char *s, size_t n) {
  char *r = base_arena_alloc(a, n + 1);
  memcpy(r, s, n);
  return r;
}
char *base_arena_strdup(rx_arena *a, const char *s) { return base_arena_strndup(a, s, strlen(s)); }

char *base_arena_printf(rx_arena *a, const char *fmt, ...) {
  va_list ap, ap2;
  va_start(ap, fmt);
  va_copy(ap2, ap);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  char *r = base_arena_alloc(a, (size_t)n + 1);
  vsnprintf(r, (size_t)n + 1, fmt, ap2);
  va_end(ap2);
  return r;
}

/* ---- vectors and string buffers ---- */

void base_ptrvec_push(rx_ptrvec *v, void *p) { RX_VEC_PUSH(v, p); }
void base_ptrvec_free(rx_ptrvec *v) {
  free(v->data);
  memset(v, 0, sizeof *v);
}

static size_t ptr_slot(const void *p, size_t cap) {
  return (size_t)(((uintptr_t)p >> 4) * 0x9e3779b97f4a7c15ull) & (cap - 1);
}

static void ptrmap_grow(rx_ptrmap *m) {
  size_t cap = m->cap ? m->cap * 2 : 64;
  rx_ptrmap n = {base_calloc(cap, sizeof(void *)), base_calloc(cap, sizeof(int)), cap, 0};
  for (size_t i = 0; i < m->cap; i++)
    if (m->keys[i]) base_ptrmap_put(&n, m->keys[i], m->vals[i]);
  free(m->keys);
  free(m->vals);
  *m = n;
}

void base_ptrmap_put(rx_ptrmap *m, const void *key, int value) {
  RX_ASSERT(key);
  if ((m->len + 1) * 2 > m->cap) ptrmap_grow(m);
  size_t i = ptr_slot(key, m->cap);
  while (m->keys[i] && m->keys[i] != key) i = (i + 1) & (m->cap - 1);
  if (!m->keys[i]) m->len++;
  m->keys[i] = key;
  m->vals[i] = value;
}

int base_ptrmap_get(const rx_ptrmap *m, const void *key) {
  if (!m->cap) return -1;
  size_t i = ptr_slot(key, m->cap);
  while (m->keys[i]) {
    if (m->keys[i] == key) return m->vals[i];
    i = (i + 1) & (m->cap - 1);
  }
  return -1;
}

void base_ptrmap_free(rx_ptrmap *m) {
  free(m->keys);
  free(m->vals);
  memset(m, 0, sizeof *m);
}

static void strbuf_reserve(rx_strbuf *b, size_t extra) {
  if (b->len + extra + 1 <= b->cap) return;
  size_t cap = b->cap ? b->cap : 64;
  while (cap < b->len + extra + 1) cap *= 2;
  b->data = base_realloc(b->data, cap);
  b->cap = cap;
}

void base_strbuf_appendn(rx_strbuf *b, const char *s, size_t n) {
  strbuf_reserve(b, n);
  memcpy(b->data + b->len, s, n);
  b->len += n;
  b->data[b->len] = 0;
}
void base_strbuf_append(rx_strbuf *b, const char *s) { base_strbuf_appendn(b, s, strlen(s)); }
void base_strbuf_putc(rx_strbuf *b, char c) { base_strbuf_appendn(b, &c, 1); }

void base_strbuf_vprintf(rx_strbuf *b, const char *fmt, va_list ap) {
  va_list ap2;
  va_copy(ap2, ap);
  int n = vsnprintf(NULL, 0, fmt, ap);
  strbuf_reserve(b, (size_t)n);
  vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap2);
  va_end(ap2);
  b->len += (size_t)n;
}
void base_strbuf_printf(rx_strbuf *b, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  base_strbuf_vprintf(b, fmt, ap);
  va_end(ap);
}
void base_strbuf_json_string(rx_strbuf *b, const char *s) {
  if (!s) {
    base_strbuf_append(b, "null");
    return;
  }
  base_strbuf_putc(b, '"');
  for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
    const char *esc = *c == '"'    ? "\\\""
                      : *c == '\\' ? "\\\\"
                      : *c == '\n' ? "\\n"
                      : *c == '\r' ? "\\r"
                      : *c == '\t' ? "\\t"
                                   : NULL;
    if (esc)
      base_strbuf_append(b, esc);
    else if (*c < 0x20)
      base_strbuf_printf(b, "\\u%04x", *c);
    else
      base_strbuf_putc(b, (char)*c);
  }
  base_strbuf_putc(b, '"');
}

char *base_strbuf_take(rx_strbuf *b) {
  char *r = b->data ? b->data : base_strdup("");
  memset(b, 0, sizeof *b);
  return r;
}
void base_strbuf_free(rx_strbuf *b) {
  free(b->data);
  memset(b, 0, sizeof *b);
}

/* ---- hashing and interning ---- */

uint64_t base_hash_bytes(const void *p, size_t n) {
  const unsigned char *s = p;
  uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a */
  for (size_t i = 0; i < n; i++) h = (h ^ s[i]) * 0x100000001b3ull;
  return h;
}

void base_strtab_init(rx_strtab *t, rx_arena *arena) {
  memset(t, 0, sizeof *t);
  t->arena = arena;
}
void base_strtab_free(rx_strtab *t) {
  free(t->slots);
  t->slots = NULL;
  t->cap = t->count = 0;
}

const char *base_strtab_intern(rx_strtab *t, const char *s, size_t n) {
  if ((t->count + 1) * 2 > t->cap) {
    size_t cap = t->cap ? t->cap * 2 : 256;
    const char **slots = base_calloc(cap, sizeof *slots);
    for (size_t i = 0; i < t->cap; i++) {
      const char *e = t->slots[i];
      if (!e) continue;
      size_t j = base_hash_bytes(e, strlen(e)) & (cap - 1);
      while (slots[j]) j = (j + 1) & (cap - 1);
      slots[j] = e;
    }
    free(t->slots);
    t->slots = slots;
    t->cap = cap;
  }
  size_t j = base_hash_bytes(s, n) & (t->cap - 1);
  while (t->slots[j]) {
    const char *e = t->slots[j];
    if (strncmp(e, s, n) == 0 && e[n] == 0) return e;
    j = (j + 1) & (t->cap - 1);
  }
  const char *r = base_arena_strndup(t->arena, s, n);
  t->slots[j] = r;
  t->count++;
  return r;
}

/* ---- statuses ---- */

struct rx_status_s {
  rx_status_code code;
  char *msg;
};

static void append_printable(rx_strbuf *b, const char *s, size_t n, char bad);

/* A message that quotes the user's bytes (a name from an ONNX file, a path) keeps printable text,
 * tabs, newlines and valid UTF-8; any other byte becomes \xNN (see append_printable). */
static char *printable_message(rx_strbuf *b) {
  const char *m = b->data ? b->data : "";
  bool plain = true;
  for (const unsigned char *p = (const unsigned char *)m; *p && plain; p++)
    plain = (*p >= 0x20 && *p < 0x7f) || *p == '\n' || *p == '\t';
  if (plain) return base_strbuf_take(b);
  rx_strbuf clean = {0};
  append_printable(&clean, m, b->len, 0);
  base_strbuf_free(b);
  return base_strbuf_take(&clean);
}

rx_status base_status_vmake(rx_status_code code, const char *fmt, va_list ap) {
  RX_ASSERT(code != RX_OK);
  rx_strbuf b = {0};
  base_strbuf_vprintf(&b, fmt, ap);
  rx_status s = base_malloc(sizeof *s);
  s->code = code;
  s->msg = printable_message(&b);
  return s;
}
rx_status base_status_make(rx_status_code code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  rx_status s = base_status_vmake(code, fmt, ap);
  va_end(ap);
  return s;
}
rx_status_code rx_status_code_of(rx_status s) { return s ? s->code : RX_OK; }
const char *rx_status_message(rx_status s) { return s ? s->msg : ""; }

const char *rx_version_string(void) { return RELAXC_VERSION; }
void rx_status_free(rx_status s) {
  if (!s) return;
  free(s->msg);
  free(s);
}
rx_status base_status_annotate(rx_status s, const char *fmt, ...) {
  if (!s) return s;
  rx_strbuf b = {0};
  va_list ap;
  va_start(ap, fmt);
  base_strbuf_vprintf(&b, fmt, ap);
  va_end(ap);
  base_strbuf_printf(&b, ": %s", s->msg);
  free(s->msg);
  s->msg = printable_message(&b);
  return s;
}

/* ---- element counts ---- */

bool base_mul_count(int64_t a, int64_t b, int64_t *out) {
  *out = 0;
  if (a < 0 || b < 0 || (b && a > INT64_MAX / b)) return false;
  *out = a * b;
  return true;
}

rx_count_status base_shape_count(int ndim, const int64_t *shape, uint64_t unit, int64_t *out) {
  *out = 0;
  for (int i = 0; i < ndim; i++)
    if (shape[i] < 0) return RX_COUNT_NEGATIVE;
  if (unit > (uint64_t)INT64_MAX) return RX_COUNT_OVERFLOW;
  int64_t n = (int64_t)unit;
  for (int i = 0; i < ndim; i++) /* a zero dimension: no elements, however large the others */
    if (!shape[i]) return RX_COUNT_OK;
  for (int i = 0; i < ndim; i++)
    if (!base_mul_count(n, shape[i], &n)) return RX_COUNT_OVERFLOW;
  *out = n;
  return RX_COUNT_OK;
}

/* ---- diagnostics ---- */

void base_diag_init(rx_diag *d) { memset(d, 0, sizeof *d); }
void base_diag_free(rx_diag *d) { base_strbuf_free(&d->text); }
const char *rx_diag_text(const rx_diag *d) { return d->text.data ? d->text.data : ""; }

rx_status base_diag_status(rx_status_code code, const char *text, size_t n, const char *fallback) {
  while (n && text[n - 1] == '\n') n--;
  if (!n) return base_status_make(code, "%s", fallback);
  rx_strbuf b = {0};
  for (size_t i = 0; i < n;) {
    size_t len = 0;
    while (i + len < n && text[i + len] != '\n') len++;
    const char *line = text + i, *lvl = NULL; /* "error: " at the start or after "FILE:L:C: " */
    if (len >= 7 && !memcmp(line, "error: ", 7)) lvl = line;
    for (size_t k = 0; !lvl && k + 9 <= len; k++)
      if (!memcmp(line + k, ": error: ", 9)) lvl = line + k + 2;
    if (lvl) {
      base_strbuf_appendn(&b, line, (size_t)(lvl - line));
      base_strbuf_appendn(&b, lvl + 7, len - (size_t)(lvl + 7 - line));
    } else {
      base_strbuf_appendn(&b, line, len);
    }
    i += len;
    if (i < n) base_strbuf_putc(&b, text[i++]);
  }
  rx_status s = base_status_make(code, "%s", b.data);
  base_strbuf_free(&b);
  return s;
}

/* Diagnostics quote the user's text: at most DIAG_EXCERPT_COLS columns of a source line around
 * the caret (a minified or generated file has lines of megabytes), and a message of at most
 * DIAG_MESSAGE_BYTES bytes (it may quote a name of any length). Text is shown as it is where it
 * is printable ASCII, a tab or valid UTF-8; any other byte as \xNN in a message and as '?' in a
 * source excerpt (one column, so the caret stays under its character). */
#define DIAG_EXCERPT_COLS  120
#define DIAG_MESSAGE_BYTES 1024

/* The length of the valid UTF-8 sequence of 2 to 4 bytes at s (at most n bytes), or 0. */
static size_t utf8_len(const unsigned char *s, size_t n) {
  size_t len = s[0] >= 0xf0 && s[0] <= 0xf4 ? 4 : s[0] >= 0xe0 ? 3 : s[0] >= 0xc2 ? 2 : 0;
  if (s[0] >= 0xf5 || !len || len > n) return 0;
  if (s[0] == 0xc2 && s[1] < 0xa0) return 0; /* C1 control characters, U+0080..U+009F */
  for (size_t i = 1; i < len; i++)
    if ((s[i] & 0xc0) != 0x80) return 0;
  if (len == 3 && ((s[0] == 0xe0 && s[1] < 0xa0) || (s[0] == 0xed && s[1] >= 0xa0))) return 0;
  if (len == 4 && ((s[0] == 0xf0 && s[1] < 0x90) || (s[0] == 0xf4 && s[1] >= 0x90))) return 0;
  return len;
}

/* The length of the character at s: 1 for a byte that is not part of valid UTF-8. */
static size_t char_len(const unsigned char *s, size_t n) {
  size_t len = s[0] >= 0x80 ? utf8_len(s, n) : 1;
  return len ? len : 1;
}

/* Appends s[0..n) with unprintable bytes replaced: by "\xNN" (bad != 0: by bad). */
static void append_printable(rx_strbuf *b, const char *s, size_t n, char bad) {
  const unsigned char *u = (const unsigned char *)s;
  for (size_t i = 0; i < n;) {
    size_t len = u[i] >= 0x80 ? utf8_len(u + i, n - i) : 0;
    if (len) {
      base_strbuf_appendn(b, s + i, len);
      i += len;
      continue;
    }
    if ((u[i] >= 0x20 && u[i] < 0x7f) || u[i] == '\t' || (u[i] == '\n' && !bad))
      base_strbuf_putc(b, s[i]);
    else if (bad)
      base_strbuf_putc(b, bad);
    else
      base_strbuf_printf(b, "\\x%02x", u[i]);
    i++;
  }
}

/* The source line of loc, at most DIAG_EXCERPT_COLS characters around the column with "..."
 * where it is cut, and a caret under the column. */
static void quote_line(rx_strbuf *out, const rx_source *src, size_t offset) {
  const char *text = src->text;
  const unsigned char *u = (const unsigned char *)text;
  size_t start = offset, end = offset;
  while (start > 0 && text[start - 1] != '\n') start--;
  while (end < src->len && text[end] != '\n' && text[end] != '\r') end++;
  /* the window [lo, hi): up to half the columns before the caret, the rest after */
  size_t lo = start, cols = 0;
  for (size_t i = start; i < offset; i += char_len(u + i, offset - i)) cols++;
  if (cols > DIAG_EXCERPT_COLS / 2) { /* skip all but the last COLS/2 characters before it */
    size_t skip = cols - DIAG_EXCERPT_COLS / 2;
    while (skip--) lo += char_len(u + lo, offset - lo);
  }
  size_t hi = lo;
  for (size_t n = 0; hi < end && n < DIAG_EXCERPT_COLS; n++) hi += char_len(u + hi, end - hi);
  if (hi < offset) hi = offset; /* the caret's character is always shown */
  base_strbuf_append(out, "  ");
  if (lo > start) base_strbuf_append(out, "...");
  append_printable(out, text + lo, hi - lo, '?');
  if (hi < end) base_strbuf_append(out, "...");
  base_strbuf_append(out, "\n  ");
  if (lo > start) base_strbuf_append(out, "   ");
  for (size_t i = lo; i < offset; i += char_len(u + i, offset - i))
    base_strbuf_putc(out, text[i] == '\t' ? '\t' : ' ');
  base_strbuf_append(out, "^\n");
}

void base_diag_vreport(rx_diag *d, rx_diag_level lvl, rx_loc loc, const char *fmt, va_list ap) {
  int max = d->max_errors ? d->max_errors : 50;
  if (lvl == RX_DIAG_ERROR) {
    d->errors++;
    if (d->errors > max) return;
  } else if (lvl == RX_DIAG_WARNING) {
    d->warnings++;
  }
  static const char *names[] = {"error", "warning", "note"};
  if (loc.src) {
    base_strbuf_printf(&d->text, "%s:%u:%u: %s: ", loc.src->name, loc.line, loc.col, names[lvl]);
  } else {
    base_strbuf_printf(&d->text, "%s: ", names[lvl]);
  }
  rx_strbuf msg = {0};
  base_strbuf_vprintf(&msg, fmt, ap);
  size_t n = msg.len;
  if (n > DIAG_MESSAGE_BYTES) { /* cut at a character boundary */
    n = DIAG_MESSAGE_BYTES;
    while (n > 0 && ((unsigned char)msg.data[n] & 0xc0) == 0x80) n--;
  }
  append_printable(&d->text, msg.data ? msg.data : "", n, 0);
  if (n < msg.len) base_strbuf_append(&d->text, "...");
  base_strbuf_free(&msg);
  base_strbuf_putc(&d->text, '\n');
  if (!loc.src || loc.offset > loc.src->len) return;
  quote_line(&d->text, loc.src, loc.offset);
}

void base_diag_report(rx_diag *d, rx_diag_level lvl, rx_loc loc, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  base_diag_vreport(d, lvl, loc, fmt, ap);
  va_end(ap);
}

/* ---- files read whole (base.h, RX_FILE_KINDS) ---- */
static const struct {
  const char *name;
  uint64_t limit;
} file_kinds[] = {
#define RX_FILE_KIND_ROW(k, name, limit) {name, limit},
    RX_FILE_KINDS(RX_FILE_KIND_ROW)
#undef RX_FILE_KIND_ROW
};

const char *base_file_kind_name(rx_file_kind k) {
  assert((unsigned)k < RX_FILE_KIND_COUNT);
  return file_kinds[k].name;
}

uint64_t base_file_kind_limit(rx_file_kind k) {
  assert((unsigned)k < RX_FILE_KIND_COUNT);
  return file_kinds[k].limit;
}

/* RX_FILE_MODEL once its first bytes are known: ONNX for a name ending in ".onnx" or a binary
 * first byte (tools/commands.h, cli_is_onnx: the same rule), else text IR. */
static rx_file_kind model_kind(const char *name, const char *data, size_t len) {
  size_t n = strlen(name);
  if (n > 5 && !strcmp(name + n - 5, ".onnx")) return RX_FILE_ONNX;
  unsigned char c = len ? (unsigned char)data[0] : ' ';
  bool binary = c < 0x20 && c != '\t' && c != '\n' && c != '\r' && c != '\f' && c != '\v';
  return binary ? RX_FILE_ONNX : RX_FILE_TEXT_IR;
}

static rx_status over_limit(const char *name, rx_file_kind kind, uint64_t size) {
  uint64_t limit = file_kinds[kind].limit;
  if (size) /* a regular file: its size is known before it is read */
    return base_status_make(
        RX_ERR_INVALID, "%s: %llu bytes, past the limit of %llu bytes for %s files: not read", name,
        (unsigned long long)size, (unsigned long long)limit, file_kinds[kind].name);
  return base_status_make(RX_ERR_INVALID,
                          "%s: more than %llu bytes, the limit for %s files (a stream, a pipe or a "
                          "device is read up to the limit of its kind, then refused)",
                          name, (unsigned long long)limit, file_kinds[kind].name);
}

/* f (named name) read up to its kind's limit; size: a regular file's size (0: unknown, or a
 * stream, or a file such as those of /proc that says 0 and has text). */
static rx_status read_limited(FILE *f, const char *name, rx_file_kind kind, uint64_t size,
                              char **out_text, size_t *out_len) {
  char *buf = NULL;
  size_t len = 0, cap = 0;
  rx_status s = NULL;
  for (bool first = true;; first = false) {
    if (cap - len < 65536) {
      uint64_t want = cap ? (uint64_t)cap * 2 : 65536 + 1;
      uint64_t most = file_kinds[kind].limit + 65536 + 1; /* a chunk past the limit shows it */
      if (want > most) want = most;
      char *p = want <= SIZE_MAX ? realloc(buf, (size_t)want) : NULL;
      if (!p) {
        s = base_status_make(RX_ERR_OUT_OF_MEMORY,
                             "%s: out of host memory after %zu bytes read (the limit for %s files "
                             "is %llu bytes)",
                             name, len, file_kinds[kind].name,
                             (unsigned long long)file_kinds[kind].limit);
        break;
      }
      buf = p;
      cap = (size_t)want;
    }
    size_t n = fread(buf + len, 1, cap - len - 1 < 65536 ? cap - len - 1 : 65536, f);
    len += n;
    if (first && kind == RX_FILE_MODEL) kind = model_kind(name, buf, len);
    if (first && size > file_kinds[kind].limit) {
      s = over_limit(name, kind, size);
      break;
    }
    if (first && kind == RX_FILE_ONNX && len && buf[0] == 0) { /* /dev/zero: refused at once */
      s = base_status_make(RX_ERR_INVALID,
                           "%s: not an ONNX protobuf: its first byte is 0 (a protobuf field has a "
                           "number of at least 1)",
                           name);
      break;
    }
    if (len > file_kinds[kind].limit) {
      s = over_limit(name, kind, 0);
      break;
    }
    if (n == 0) {
      if (ferror(f)) s = base_status_make(RX_ERR_IO, "cannot read '%s': %s", name, strerror(errno));
      break;
    }
  }
  if (s) {
    free(buf);
    return s;
  }
  buf[len] = 0; /* cap > len: one byte is always kept */
  *out_text = buf;
  if (out_len) *out_len = len;
  return NULL;
}

rx_status base_read_stream_kind(FILE *f, const char *name, rx_file_kind kind, char **out_text,
                                size_t *out_len) {
  *out_text = NULL;
  if (out_len) *out_len = 0;
  return read_limited(f, name, kind, 0, out_text, out_len);
}

rx_status base_read_file_kind(const char *path, rx_file_kind kind, char **out_text,
                              size_t *out_len) {
  *out_text = NULL;
  if (out_len) *out_len = 0;
  FILE *f = fopen(path, "rb");
  if (!f) return base_status_make(RX_ERR_NOT_FOUND, "cannot open '%s': %s", path, strerror(errno));
  struct stat st; /* a directory opens, then fails to read: say what it is */
  uint64_t size = 0;
  if (fstat(fileno(f), &st) == 0) {
    if (S_ISDIR(st.st_mode)) {
      fclose(f);
      return base_status_make(RX_ERR_INVALID, "%s: is a directory", path);
    }
    if (S_ISREG(st.st_mode) && st.st_size > 0) size = (uint64_t)st.st_size;
  }
  rx_status s = read_limited(f, path, kind, size, out_text, out_len);
  fclose(f);
  return s;
}

rx_status base_read_file(const char *path, char **out_text, size_t *out_len) {
  return base_read_file_kind(path, RX_FILE_JSON, out_text, out_len);
}

/* ---- paths ---- */
/* Is p inside (or equal to) the folder root? Both real paths. */
static bool path_under(const char *p, const char *root) {
  size_t n = strlen(root);
  if (n == 1 && root[0] == '/') return true;
  return !strncmp(p, root, n) && (p[n] == '/' || p[n] == 0);
}

/* The blobs/ folder of the Hugging Face cache repository whose snapshot holds the real folder dir
 * (".../models--ORG--NAME/snapshots/REV[/SUB]" -> ".../models--ORG--NAME/blobs"), or NULL. */
static char *hf_blobs_of(const char *dir) {
  for (const char *p = strstr(dir, "/snapshots/"); p; p = strstr(p + 1, "/snapshots/")) {
    const char *repo = p;
    while (repo > dir && repo[-1] != '/') repo--;
    if (strncmp(repo, "models--", 8) || p[11] == 0 || p[11] == '/') continue;
    rx_strbuf b = {0};
    base_strbuf_printf(&b, "%.*s/blobs", (int)(p - dir), dir);
    return base_strbuf_take(&b);
  }
  return NULL;
}

rx_status base_path_check_inside(const char *file, const char *dir, bool hf_cache) {
  char *rfile = realpath(file, NULL);
  if (!rfile)
    return base_status_make(RX_ERR_NOT_FOUND, "cannot resolve '%s': %s", file, strerror(errno));
  char *rdir = realpath(dir && *dir ? dir : ".", NULL);
  if (!rdir) {
    int err = errno;
    free(rfile);
    return base_status_make(RX_ERR_NOT_FOUND, "cannot resolve the folder '%s': %s", dir,
                            strerror(err));
  }
  bool ok = path_under(rfile, rdir);
  char *blobs = !ok && hf_cache ? hf_blobs_of(rdir) : NULL;
  if (blobs) ok = path_under(rfile, blobs) && strcmp(rfile, blobs);
  rx_status s = NULL;
  if (!ok)
    s = base_status_make(RX_ERR_INVALID, "'%s' resolves to '%s', outside the folder '%s'%s%s%s",
                         file, rfile, rdir, blobs ? " and its Hugging Face cache's '" : "",
                         blobs ? blobs : "", blobs ? "'" : "");
  free(blobs);
  free(rfile);
  free(rdir);
  return s;
}

/* ---- mapped files ---- */
rx_status base_map_file(const char *path, rx_mapped_file *out) {
  memset(out, 0, sizeof *out);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return base_status_make(RX_ERR_NOT_FOUND, "cannot open '%s': %s", path, strerror(errno));
  struct stat st;
  if (fstat(fd, &st) != 0 || S_ISDIR(st.st_mode) || !S_ISREG(st.st_mode)) {
    bool dir = S_ISDIR(st.st_mode);
    close(fd);
    return base_status_make(RX_ERR_INVALID, "%s: %s", path,
                            dir ? "is a directory" : "is not a regular file");
  }
  if (st.st_size == 0) { /* mmap refuses empty files: an empty mapping */
    close(fd);
    return NULL;
  }
  if ((uint64_t)st.st_size > SIZE_MAX) {
    close(fd);
    return base_status_make(RX_ERR_OUT_OF_MEMORY, "%s: %lld bytes do not fit the address space",
                            path, (long long)st.st_size);
  }
  void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
  int err = errno;
  close(fd); /* the mapping stays */
  if (p == MAP_FAILED)
    return base_status_make(RX_ERR_IO, "cannot map '%s' (%lld bytes): %s", path,
                            (long long)st.st_size, strerror(err));
  out->data = p;
  out->size = (size_t)st.st_size;
  return NULL;
}

void base_unmap_file(rx_mapped_file *f) {
  if (f->data) munmap((void *)f->data, f->size);
  f->data = NULL;
  f->size = 0;
}

/* ---- run-time checks (base.h, base_check_code) ---- */

int32_t base_check_code(const char *message) {
  uint32_t c = base_crc32_update(0, message, strlen(message)) & 0x7fffffffu;
  return (int32_t)(c ? c : 1);
}

char *base_check_format(const char *message, int64_t value) {
  size_t n = strlen(message);
  char *out = malloc(n + 24 * 4 + 1), *o = out;
  if (!out) return NULL;
  int nv = 0;
  for (const char *s = message; *s; s++) {
    if (s[0] == '%' && s[1] == 'v' && nv < 4) {
      o += sprintf(o, "%lld", (long long)value);
      s++;
      nv++;
    } else if (s[0] == '%' && s[1] == '%') {
      *o++ = '%';
      s++;
    } else {
      *o++ = *s;
    }
  }
  *o = 0;
  return out;
}
