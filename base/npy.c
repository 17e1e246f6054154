/* .npy reader and writer (see base/npy.h). The header is a Python dict literal such as
 *   {'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }
 * parsed here by a small scanner that accepts exactly the three keys, in any order. */
#include "npy.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static const struct {
  const char *descr;
  rx_dtype dtype;
  size_t size;
} kinds[] = {
    {"f4", RX_DTYPE_F32, 4}, {"f2", RX_DTYPE_F16, 2},  {"i8", RX_DTYPE_I64, 8},
    {"i4", RX_DTYPE_I32, 4}, {"i2", RX_DTYPE_I16, 2},  {"i1", RX_DTYPE_I8, 1},
    {"u1", RX_DTYPE_U8, 1},  {"b1", RX_DTYPE_BOOL, 1}, {"u2", RX_DTYPE_BF16, 2},
    {"f8", RX_DTYPE_F64, 8}, {"u4", RX_DTYPE_U32, 4},  {"u8", RX_DTYPE_U64, 8},
    {"u2", RX_DTYPE_U16, 2}, /* written as '<u2'; '<u2' reads as bf16 (the first entry) */
};

size_t base_npy_elem_size(rx_dtype t) {
  for (size_t i = 0; i < RX_ARRAY_LEN(kinds); i++)
    if (kinds[i].dtype == t) return kinds[i].size;
  return 0;
}

size_t base_npy_count(const rx_npy *a) {
  size_t n = 1;
  for (int i = 0; i < a->ndim; i++) n *= (size_t)a->shape[i];
  return n;
}

void base_npy_free(rx_npy *a) {
  if (!a) return;
  free(a->data);
  memset(a, 0, sizeof *a);
}

typedef struct scan {
  const char *p, *end;
} scan;

static void ws(scan *s) {
  while (s->p < s->end && (*s->p == ' ' || *s->p == '\t' || *s->p == '\n' || *s->p == '\r')) s->p++;
}
static bool eat(scan *s, char c) {
  ws(s);
  if (s->p < s->end && *s->p == c) {
    s->p++;
    return true;
  }
  return false;
}
/* A quoted string ('...' or "...") into buf. */
static bool str(scan *s, char *buf, size_t cap) {
  ws(s);
  if (s->p >= s->end || (*s->p != '\'' && *s->p != '"')) return false;
  char q = *s->p++;
  size_t n = 0;
  while (s->p < s->end && *s->p != q) {
    if (n + 1 >= cap) return false;
    buf[n++] = *s->p++;
  }
  if (s->p >= s->end) return false;
  s->p++;
  buf[n] = 0;
  return true;
}
static bool word(scan *s, const char *w) {
  ws(s);
  size_t n = strlen(w);
  if ((size_t)(s->end - s->p) >= n && memcmp(s->p, w, n) == 0) {
    s->p += n;
    return true;
  }
  return false;
}

static rx_status bad(const char *name, const char *what) {
  return base_status_make(RX_ERR_INVALID, "%s: not a supported .npy file: %s", name, what);
}

/* The header of the .npy image b[len] (len: at least the header's bytes): dtype, shape and nbytes
 * into out (no data), the data's offset into *data_off. */
static rx_status parse_header(const unsigned char *b, size_t len, const char *name, rx_npy *out,
                              size_t *data_off) {
  memset(out, 0, sizeof *out);
  if (len < 10 || memcmp(b, "\x93NUMPY", 6) != 0) return bad(name, "missing the \\x93NUMPY magic");
  int major = b[6];
  size_t hlen, off;
  if (major == 1) {
    hlen = (size_t)b[8] | (size_t)b[9] << 8;
    off = 10;
  } else if (major == 2 || major == 3) {
    if (len < 12) return bad(name, "truncated header");
    hlen = (size_t)b[8] | (size_t)b[9] << 8 | (size_t)b[10] << 16 | (size_t)b[11] << 24;
    off = 12;
  } else {
    return base_status_make(RX_ERR_INVALID, "%s: unsupported .npy format version %d.%d", name,
                            major, b[7]);
  }
  if (hlen > len - off) return bad(name, "truncated header");
  scan s = {(const char *)b + off, (const char *)b + off + hlen};
  char descr[32] = {0};
  int fortran = -1, have_shape = 0;
  if (!eat(&s, '{')) return bad(name, "the header is not a dict");
  while (!eat(&s, '}')) {
    char key[32];
    if (!str(&s, key, sizeof key) || !eat(&s, ':')) return bad(name, "malformed header dict");
    if (!strcmp(key, "descr")) {
      if (!str(&s, descr, sizeof descr)) return bad(name, "'descr' is not a simple dtype string");
    } else if (!strcmp(key, "fortran_order")) {
      if (word(&s, "False"))
        fortran = 0;
      else if (word(&s, "True"))
        fortran = 1;
      else
        return bad(name, "'fortran_order' is not True or False");
    } else if (!strcmp(key, "shape")) {
      if (!eat(&s, '(')) return bad(name, "'shape' is not a tuple");
      have_shape = 1;
      while (!eat(&s, ')')) {
        ws(&s);
        if (out->ndim == RX_NPY_MAX_NDIM) return bad(name, "too many dimensions");
        int64_t v = 0;
        int digits = 0;
        while (s.p < s.end && *s.p >= '0' && *s.p <= '9') {
          if (v > (INT64_MAX - 9) / 10) return bad(name, "a dimension is too large");
          v = v * 10 + (*s.p++ - '0');
          digits++;
        }
        if (!digits) return bad(name, "malformed 'shape'");
        if (s.p < s.end && *s.p == 'L') s.p++; /* Python 2 longs */
        out->shape[out->ndim++] = v;
        if (!eat(&s, ',') && !(ws(&s), s.p < s.end && *s.p == ')'))
          return bad(name, "malformed 'shape'");
      }
    } else {
      return base_status_make(RX_ERR_INVALID, "%s: unexpected key '%s' in the .npy header", name,
                              key);
    }
    if (!eat(&s, ',')) {
      if (!eat(&s, '}')) return bad(name, "malformed header dict");
      break;
    }
  }
  if (!descr[0] || fortran < 0 || !have_shape)
    return bad(name, "the header lacks 'descr', 'fortran_order' or 'shape'");
  if (fortran)
    return base_status_make(RX_ERR_UNSUPPORTED,
                            "%s: Fortran-order arrays are not supported (save "
                            "with C order: np.ascontiguousarray)",
                            name);
  char order = descr[0];
  const char *code = descr + 1;
  size_t esize = 0;
  for (size_t i = 0; i < RX_ARRAY_LEN(kinds); i++) {
    if (strcmp(code, kinds[i].descr) == 0) {
      out->dtype = kinds[i].dtype;
      esize = kinds[i].size;
    }
  }
  bool little = order == '<' || order == '=' || (order == '|' && esize == 1);
  if (!esize || !little) {
    return base_status_make(RX_ERR_UNSUPPORTED,
                            "%s: unsupported .npy dtype '%s' (supported: <f4 <f2 <i8 <i4 <i2 |i1 "
                            "|u1 |b1, and <u2 as bf16 bits; little-endian only)",
                            name, descr);
  }
  size_t count = 1;
  for (int i = 0; i < out->ndim; i++) {
    if (out->shape[i] != 0 && count > SIZE_MAX / 16 / (size_t)out->shape[i])
      return bad(name, "the array is too large");
    count *= (size_t)out->shape[i];
  }
  *data_off = off + hlen;
  out->nbytes = count * esize;
  return NULL;
}

static rx_status truncated(const char *name, size_t have, size_t want) {
  return base_status_make(RX_ERR_INVALID, "%s: truncated .npy data: %zu bytes, expected %zu", name,
                          have, want);
}

rx_status base_npy_parse(const void *buf, size_t len, const char *name, rx_npy *out) {
  size_t data_off = 0;
  RX_RETURN_IF_ERROR(parse_header(buf, len, name, out, &data_off));
  if (len - data_off < out->nbytes) {
    size_t want = out->nbytes;
    base_npy_free(out);
    return truncated(name, len - data_off, want);
  }
  out->data = base_malloc(out->nbytes ? out->nbytes : 1);
  memcpy(out->data, (const unsigned char *)buf + data_off, out->nbytes);
  return NULL;
}

/* The prefix and header of f: the magic, the version, the header's length, the header. Then the
 * data, by the size the header gives: never read "until EOF", so that a stream (a FIFO,
 * /dev/zero) or a file longer than its header says costs no more than the array. */
static rx_status read_npy(FILE *f, const char *path, uint64_t file_size, bool regular,
                          rx_npy *out) {
  unsigned char pre[12];
  size_t n = fread(pre, 1, 10, f);
  if (n == 10 && pre[6] >= 2) n += fread(pre + 10, 1, 2, f);
  size_t off = n == 12 ? 12 : 10, hlen = 0;
  if (n >= 10 && !memcmp(pre, "\x93NUMPY", 6) && pre[6] >= 1 && pre[6] <= 3) {
    hlen = pre[6] == 1 ? ((size_t)pre[8] | (size_t)pre[9] << 8)
                       : ((size_t)pre[8] | (size_t)pre[9] << 8 | (size_t)pre[10] << 16 |
                          (size_t)pre[11] << 24);
    if (n < off) hlen = 0; /* a version 2 prefix cut short: parse_header says so */
  }
  if (hlen > RX_NPY_MAX_HEADER)
    return base_status_make(RX_ERR_INVALID,
                            "%s: the .npy header says it is %zu bytes long, more than the limit of "
                            "%d bytes (NumPy writes a few hundred)",
                            path, hlen, RX_NPY_MAX_HEADER);
  unsigned char *head = base_malloc(off + hlen);
  memcpy(head, pre, n);
  size_t got = n + (hlen && n == off ? fread(head + off, 1, hlen, f) : 0);
  size_t data_off = 0;
  rx_status st = parse_header(head, got, path, out, &data_off);
  free(head);
  if (st) return st;
  if (regular &&
      (file_size < data_off || file_size - data_off < out->nbytes)) /* before a byte is allocated */
    return truncated(path, file_size < data_off ? 0 : (size_t)(file_size - data_off), out->nbytes);
  out->data = malloc(out->nbytes ? out->nbytes : 1);
  if (!out->data)
    return base_status_make(RX_ERR_OUT_OF_MEMORY,
                            "%s: out of host memory for the %zu bytes of data its .npy header "
                            "gives",
                            path, out->nbytes);
  size_t have = out->nbytes ? fread(out->data, 1, out->nbytes, f) : 0;
  if (have < out->nbytes) {
    size_t want = out->nbytes;
    base_npy_free(out);
    return truncated(path, have, want);
  }
  return NULL;
}

rx_status base_npy_read(const char *path, rx_npy *out) {
  memset(out, 0, sizeof *out);
  FILE *f = fopen(path, "rb");
  if (!f) return base_status_make(RX_ERR_NOT_FOUND, "cannot open '%s': %s", path, strerror(errno));
  struct stat st;
  bool regular = false;
  uint64_t size = 0;
  if (fstat(fileno(f), &st) == 0) {
    if (S_ISDIR(st.st_mode)) {
      fclose(f);
      return base_status_make(RX_ERR_INVALID, "%s: is a directory", path);
    }
    regular = S_ISREG(st.st_mode);
    size = regular ? (uint64_t)st.st_size : 0;
  }
  rx_status s = read_npy(f, path, size, regular, out);
  fclose(f);
  return s;
}

rx_status base_npy_write(const char *path, const rx_npy *a) {
  const char *code = NULL;
  for (size_t i = 0; i < RX_ARRAY_LEN(kinds); i++)
    if (kinds[i].dtype == a->dtype) code = kinds[i].descr;
  if (!code)
    return base_status_make(RX_ERR_UNSUPPORTED, "%s: cannot write dtype %d as .npy", path,
                            (int)a->dtype);
  if (a->ndim < 0 || a->ndim > RX_NPY_MAX_NDIM)
    return base_status_make(RX_ERR_INVALID, "%s: bad rank %d", path, a->ndim);
  char hdr[1024];
  int n = snprintf(hdr, sizeof hdr, "{'descr': '%c%s', 'fortran_order': False, 'shape': (",
                   base_npy_elem_size(a->dtype) == 1 ? '|' : '<', code);
  for (int i = 0; i < a->ndim; i++)
    n += snprintf(hdr + n, sizeof hdr - (size_t)n, "%lld%s", (long long)a->shape[i],
                  a->ndim == 1      ? ","
                  : i + 1 < a->ndim ? ", "
                                    : "");
  n += snprintf(hdr + n, sizeof hdr - (size_t)n, "), }");
  /* pad with spaces so that the data starts at a multiple of 64, header ends with '\n' */
  size_t total = 10 + (size_t)n + 1;
  size_t pad = (64 - total % 64) % 64;
  size_t hlen = (size_t)n + pad + 1;
  FILE *f = fopen(path, "wb");
  if (!f)
    return base_status_make(RX_ERR_IO, "cannot open '%s' for writing: %s", path, strerror(errno));
  unsigned char pre[10] = {0x93,
                           'N',
                           'U',
                           'M',
                           'P',
                           'Y',
                           1,
                           0,
                           (unsigned char)(hlen & 0xff),
                           (unsigned char)(hlen >> 8)};
  bool ok = fwrite(pre, 1, 10, f) == 10 && fwrite(hdr, 1, (size_t)n, f) == (size_t)n;
  for (size_t i = 0; ok && i < pad; i++) ok = fputc(' ', f) != EOF;
  ok = ok && fputc('\n', f) != EOF;
  size_t nb = base_npy_count(a) * base_npy_elem_size(a->dtype);
  ok = ok && (nb == 0 || fwrite(a->data, 1, nb, f) == nb);
  ok = (fclose(f) == 0) && ok;
  if (!ok) return base_status_make(RX_ERR_IO, "cannot write '%s'", path);
  return NULL;
}
