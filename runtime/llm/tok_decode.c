/* runtime/llm/tok_decode.c: ids to text, as the tokenizers library's decode() does it (each id's
 * token text, special ones left out on request, through the decoder steps, joined), and the
 * streaming detokenizer on top of it.
 *
 * The stream keeps a window of ids: those of the previous step (already given out) and the new
 * ones. Each push decodes the window with and without the new ids and gives out the difference,
 * as text-generation-inference does; the window starts at a token already given out, so decoders
 * that treat the first token apart (Strip, Metaspace) treat it the same in both. Strip's count
 * from the front belongs to the stream's start, though, and can reach past the window's first
 * token (start 2 and a first token of one space): the window stays at the stream's first id until
 * the text is not empty, and a window that has left it strips nothing from its front. While the
 * text ends in a character whose bytes have not all come (byte level, byte fallback), it waits. */
#include <stdlib.h>
#include <string.h>

#include "runtime/llm/tokenizer.h"
#include "runtime/llm/unicode.h"

/* GPT-2's table: bytes '!'..'~', 0xA1..0xAC and 0xAE..0xFF are their own character; the other
 * 68 (0x00..0x20, 0x7F..0xA0, 0xAD) are U+0100 onward, in byte order. */
enum { LOW_BYTES = 0x21, MID_BYTES = 0xA1 - 0x7F, SHIFTED_BASE = 0x100 };

uint32_t tok_byte_to_char(uint8_t b) {
  if ((b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE) return b;
  if (b < LOW_BYTES) return SHIFTED_BASE + b;
  if (b <= 0xA0) return SHIFTED_BASE + LOW_BYTES + (b - 0x7Fu);
  return SHIFTED_BASE + LOW_BYTES + MID_BYTES; /* 0xAD */
}

int tok_char_to_byte(uint32_t cp) {
  if (cp < SHIFTED_BASE) return tok_byte_to_char((uint8_t)cp) == cp ? (int)cp : -1;
  uint32_t k = cp - SHIFTED_BASE;
  if (k < LOW_BYTES) return (int)k;
  if (k < LOW_BYTES + MID_BYTES) return (int)(0x7F + k - LOW_BYTES);
  return k == LOW_BYTES + MID_BYTES ? 0xAD : -1;
}

const tok_text *tok_text_of(const rx_tokenizer *t, int32_t id) {
  if (id < 0 || id >= t->vocab_size) return NULL;
  if (t->added_of_id[id] >= 0) return &t->added[t->added_of_id[id]].match;
  return id < t->nmodel && t->by_id[id].s ? &t->by_id[id] : NULL;
}

/* The library skips a token whose text is a special token's content. */
static bool special_text(const rx_tokenizer *t, const tok_text *x) {
  int32_t k = tok_map_get(&t->added_by_content, x->s, x->n);
  return k >= 0 && t->added[k].special;
}

/* ---- token lists between decoder steps ---- */
typedef struct tspan {
  size_t off, n;
} tspan;
typedef struct tlist {
  rx_strbuf buf;
  RX_VEC(tspan) toks;
} tlist;
typedef struct scratch {
  tlist l[2];
  rx_strbuf bytes;
} scratch;

static void tl_clear(tlist *l) {
  l->buf.len = 0;
  l->toks.len = 0;
}

static void tl_push(tlist *l, const char *s, size_t n) {
  tspan sp = {l->buf.len, n};
  base_strbuf_appendn(&l->buf, n ? s : "", n);
  RX_VEC_PUSH(&l->toks, sp);
}

/* Appends to the last token. */
static void tl_extend(tlist *l, const char *s, size_t n) {
  if (!n) return;
  base_strbuf_appendn(&l->buf, s, n);
  l->toks.data[l->toks.len - 1].n += n;
}

static void scratch_free(scratch *sc) {
  for (int i = 0; i < 2; i++) {
    base_strbuf_free(&sc->l[i].buf);
    free(sc->l[i].toks.data);
  }
  base_strbuf_free(&sc->bytes);
}

#define TOK(l, i) ((l)->buf.data + (l)->toks.data[i].off)

/* ByteLevel: each token's characters back to bytes (a token with a character outside the table
 * stays as it is), all joined and read as UTF-8 with U+FFFD for invalid bytes. */
static bool dec_byte_level(const tlist *in, tlist *out, rx_strbuf *bytes) {
  bytes->len = 0;
  for (size_t i = 0; i < in->toks.len; i++) {
    const char *s = TOK(in, i);
    size_t n = in->toks.data[i].n, mark = bytes->len;
    for (size_t k = 0; k < n;) {
      int b = tok_char_to_byte(uc_next(s, &k));
      if (b < 0) {
        bytes->len = mark;
        base_strbuf_appendn(bytes, s, n);
        break;
      }
      char c = (char)b;
      base_strbuf_appendn(bytes, &c, 1);
    }
  }
  tl_push(out, "", 0);
  size_t before = out->buf.len;
  bool truncated = uc_append_lossy(&out->buf, bytes->data ? bytes->data : "", bytes->len);
  out->toks.data[0].n = out->buf.len - before;
  return truncated;
}

/* <0xXX> as the library reads it: six bytes, "<0x", two characters that u8::from_str_radix
 * accepts in base 16 (two hex digits, or '+' and one), ">". Returns the byte or -1. */
static int byte_token(const char *s, size_t n) {
  if (n != 6 || memcmp(s, "<0x", 3) != 0 || s[5] != '>') return -1;
  int v = 0;
  for (int i = s[3] == '+' ? 4 : 3; i < 5; i++) {
    char c = s[i];
    int d = c >= '0' && c <= '9'   ? c - '0'
            : c >= 'a' && c <= 'f' ? c - 'a' + 10
            : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                   : -1;
    if (d < 0) return -1;
    v = v * 16 + d;
  }
  return v;
}

/* ByteFallback: runs of byte tokens become their UTF-8 text, or one U+FFFD per byte when the run
 * is not UTF-8. Returns whether the last run, at the end, is UTF-8 cut short. */
static bool flush_run(tlist *out, rx_strbuf *run, bool at_end) {
  if (!run->len) return false;
  bool truncated = false;
  size_t valid = uc_valid_prefix(run->data, run->len);
  if (valid == run->len) {
    tl_push(out, run->data, run->len);
  } else {
    truncated = at_end && uc_is_truncated(run->data + valid, run->len - valid);
    char u[4];
    size_t un = uc_put(UC_REPLACEMENT, u);
    for (size_t k = 0; k < run->len; k++) tl_push(out, u, un);
  }
  run->len = 0;
  return truncated;
}

static bool dec_byte_fallback(const tlist *in, tlist *out, rx_strbuf *run) {
  run->len = 0;
  for (size_t i = 0; i < in->toks.len; i++) {
    int b = byte_token(TOK(in, i), in->toks.data[i].n);
    if (b >= 0) {
      char c = (char)b;
      base_strbuf_appendn(run, &c, 1);
      continue;
    }
    flush_run(out, run, false);
    tl_push(out, TOK(in, i), in->toks.data[i].n);
  }
  return flush_run(out, run, true);
}

static void dec_replace(const tok_step *st, const tlist *in, tlist *out) {
  for (size_t i = 0; i < in->toks.len; i++) {
    tl_push(out, "", 0);
    size_t before = out->buf.len;
    tok_replace(&out->buf, TOK(in, i), in->toks.data[i].n, st->text, st->content);
    out->toks.data[out->toks.len - 1].n = out->buf.len - before;
  }
}

static bool char_is(const char *s, size_t i, uint32_t cp, size_t *end) {
  *end = i;
  return uc_next(s, end) == cp;
}

/* Strip: up to start characters equal to cp from the front, up to stop from the back; with
 * past_start (a stream's window that no longer begins at the stream's first id), none from the
 * front of the first token. */
static void dec_strip(const tok_step *st, const tlist *in, tlist *out, bool past_start) {
  for (size_t i = 0; i < in->toks.len; i++) {
    const char *s = TOK(in, i);
    size_t n = in->toks.data[i].n, from = 0, to = n, e;
    size_t start = i == 0 && past_start ? 0 : st->start;
    for (size_t k = 0; k < start && from < n && char_is(s, from, st->cp, &e); k++) from = e;
    for (size_t k = 0; k < st->stop && to > from; k++) {
      size_t p = uc_prev(s, to);
      if (!char_is(s, p, st->cp, &e)) break;
      to = p;
    }
    tl_push(out, s + from, to - from);
  }
}

/* Metaspace: the replacement character becomes a space, except in the first token (unless the
 * prepend scheme is "never"), where it is dropped, every one of them, as the library does. */
static void dec_metaspace(const tok_step *st, const tlist *in, tlist *out) {
  for (size_t i = 0; i < in->toks.len; i++) {
    const char *s = TOK(in, i);
    size_t n = in->toks.data[i].n, e;
    bool drop = i == 0 && st->prepend != TOK_PREPEND_NEVER;
    tl_push(out, "", 0);
    for (size_t k = 0; k < n; k = e) {
      if (!char_is(s, k, st->cp, &e))
        tl_extend(out, s + k, e - k);
      else if (!drop)
        tl_extend(out, " ", 1);
    }
  }
}

/* Joins the tokens of in, with sep between them, as one token of out. */
static void join(const tlist *in, tlist *out, const char *sep) {
  tl_push(out, "", 0);
  for (size_t i = 0; i < in->toks.len; i++) {
    if (i) tl_extend(out, sep, strlen(sep));
    tl_extend(out, TOK(in, i), in->toks.data[i].n);
  }
}

/* One decoder step; returns whether the text now ends in a character cut short. */
static bool dec_step(const tok_step *st, const tlist *in, tlist *out, rx_strbuf *bytes,
                     bool past_start) {
  switch (st->kind) {
  case TOK_DEC_BYTE_LEVEL:
    return dec_byte_level(in, out, bytes);
  case TOK_DEC_BYTE_FALLBACK:
    return dec_byte_fallback(in, out, bytes);
  case TOK_DEC_REPLACE:
    dec_replace(st, in, out);
    return false;
  case TOK_DEC_FUSE:
    join(in, out, "");
    return false;
  case TOK_DEC_STRIP:
    dec_strip(st, in, out, past_start);
    return false;
  case TOK_DEC_METASPACE:
    dec_metaspace(st, in, out);
    return false;
  default:
    RX_ASSERT(!"not a decoder");
    return false;
  }
}

/* decode_ids' flag beside the public ones: ids that do not begin the text (dec_strip) */
enum { DEC_PAST_START = 1 << 16 };

/* Appends the decoding of ids to out; returns whether it ends in a character cut short (whose
 * U+FFFD more ids could turn into the character). */
static bool decode_ids(const rx_tokenizer *t, const int32_t *ids, size_t n, int flags, scratch *sc,
                       rx_strbuf *out) {
  tlist *in = &sc->l[0], *next = &sc->l[1];
  tl_clear(in);
  for (size_t i = 0; i < n; i++) {
    const tok_text *x = tok_text_of(t, ids[i]);
    if (!x || ((flags & RX_TOKENIZER_SKIP_SPECIAL) && special_text(t, x))) continue;
    tl_push(in, x->s, x->n);
  }
  bool truncated = false;
  if (!t->has_decoder) {
    tl_clear(next);
    join(in, next, " ");
    in = next;
  }
  for (size_t k = 0; t->has_decoder && k < t->ndec; k++) {
    tl_clear(next);
    bool cut = dec_step(&t->dec[k], in, next, &sc->bytes, flags & DEC_PAST_START);
    truncated = cut || (truncated && t->dec[k].kind != TOK_DEC_BYTE_LEVEL &&
                        t->dec[k].kind != TOK_DEC_BYTE_FALLBACK);
    tlist *tmp = in;
    in = next;
    next = tmp;
  }
  for (size_t i = 0; i < in->toks.len; i++)
    if (in->toks.data[i].n) base_strbuf_appendn(out, TOK(in, i), in->toks.data[i].n);
  if (!out->data) base_strbuf_appendn(out, "", 0);
  return truncated;
}

rx_status rx_tokenizer_decode(const rx_tokenizer *tok, const int32_t *ids, size_t count, int flags,
                              char **out_text, size_t *out_len) {
  if (out_text) *out_text = NULL;
  if (out_len) *out_len = 0;
  if (!tok || !out_text || !out_len || (!ids && count))
    return base_status_make(RX_ERR_INVALID, "rx_tokenizer_decode: NULL argument");
  scratch sc = {0};
  rx_strbuf out = {0};
  decode_ids(tok, ids, count, flags, &sc, &out);
  scratch_free(&sc);
  *out_len = out.len;
  *out_text = base_strbuf_take(&out);
  return NULL;
}

/* ---- the streaming detokenizer ---- */
struct rx_detokenizer {
  const rx_tokenizer *t;
  int flags;
  tok_ids window;  /* the ids of the previous step, then those not given out yet */
  size_t read;     /* window[0..read): the previous step's */
  bool past_start; /* the window no longer begins at the stream's first id */
  scratch sc;
  rx_strbuf prev, cur, out;
};

rx_status rx_detokenizer_create(const rx_tokenizer *tok, int flags, rx_detokenizer **out_detok) {
  if (out_detok) *out_detok = NULL;
  if (!tok || !out_detok)
    return base_status_make(RX_ERR_INVALID, "rx_detokenizer_create: NULL argument");
  rx_detokenizer *d = base_calloc(1, sizeof *d);
  d->t = tok;
  d->flags = flags;
  base_strbuf_appendn(&d->out, "", 0);
  *out_detok = d;
  return NULL;
}

/* Gives out the new text of the window (all of it when flushing) and moves the window on. */
static void step(rx_detokenizer *d, bool flush) {
  int flags = d->flags | (d->past_start ? DEC_PAST_START : 0);
  d->cur.len = 0;
  bool cut = decode_ids(d->t, d->window.data, d->window.len, flags, &d->sc, &d->cur);
  if (cut && !flush) return;
  d->prev.len = 0;
  decode_ids(d->t, d->window.data, d->read, flags, &d->sc, &d->prev);
  /* the new text is what follows the old; should an invalid byte sequence have changed the old
     text, what follows the longest common prefix (at a character boundary) */
  size_t common = 0;
  while (common < d->prev.len && common < d->cur.len && d->prev.data[common] == d->cur.data[common])
    common++;
  while (common > 0 && common < d->cur.len && ((uint8_t)d->cur.data[common] & 0xC0) == 0x80)
    common--;
  base_strbuf_appendn(&d->out, d->cur.data + common, d->cur.len - common);
  if (!d->past_start && d->cur.len == 0) { /* nothing yet: the stream's start is still to come */
    d->read = d->window.len;
    return;
  }
  d->past_start = true;
  memmove(d->window.data, d->window.data + d->read, (d->window.len - d->read) * sizeof(int32_t));
  d->window.len -= d->read;
  d->read = d->window.len;
}

/* The common start of push and flush: outputs zeroed, arguments checked, the last output
 * dropped. */
static rx_status begin(rx_detokenizer *d, const char **out_text, size_t *out_len, const char *fn) {
  if (out_text) *out_text = NULL;
  if (out_len) *out_len = 0;
  if (!d || !out_text || !out_len) return base_status_make(RX_ERR_INVALID, "%s: NULL argument", fn);
  d->out.len = 0;
  d->out.data[0] = 0;
  return NULL;
}

rx_status rx_detokenizer_push(rx_detokenizer *d, int32_t id, const char **out_text,
                              size_t *out_len) {
  RX_RETURN_IF_ERROR(begin(d, out_text, out_len, "rx_detokenizer_push"));
  const tok_text *x = tok_text_of(d->t, id);
  /* what decode leaves out never enters the window */
  if (x && !((d->flags & RX_TOKENIZER_SKIP_SPECIAL) && special_text(d->t, x))) {
    RX_VEC_PUSH(&d->window, id);
    step(d, false);
  }
  *out_text = d->out.data;
  *out_len = d->out.len;
  return NULL;
}

rx_status rx_detokenizer_flush(rx_detokenizer *d, const char **out_text, size_t *out_len) {
  RX_RETURN_IF_ERROR(begin(d, out_text, out_len, "rx_detokenizer_flush"));
  if (d->read < d->window.len) step(d, true);
  rx_detokenizer_reset(d);
  *out_text = d->out.data;
  *out_len = d->out.len;
  return NULL;
}

void rx_detokenizer_reset(rx_detokenizer *d) {
  if (!d) return;
  d->window.len = 0;
  d->read = 0;
  d->past_start = false;
}

void rx_detokenizer_free(rx_detokenizer *d) {
  if (!d) return;
  free(d->window.data);
  scratch_free(&d->sc);
  base_strbuf_free(&d->prev);
  base_strbuf_free(&d->cur);
  base_strbuf_free(&d->out);
  free(d);
}

/* ---- a token's own bytes (constrained decoding, runtime/llm/grammar_mask.c) ---- */
void tok_token_bytes(const rx_tokenizer *t, int32_t id, rx_strbuf *out) {
  out->len = 0;
  base_strbuf_appendn(out, "", 0);
  const tok_text *x = tok_text_of(t, id);
  if (!x || special_text(t, x)) return;
  if (!t->has_decoder) { /* decode joins tokens with a space */
    base_strbuf_appendn(out, " ", 1);
    base_strbuf_appendn(out, x->s, x->n);
    return;
  }
  rx_strbuf cur = {0}, next = {0};
  base_strbuf_appendn(&cur, x->s, x->n);
  for (size_t k = 0; k < t->ndec; k++) {
    const tok_step *st = &t->dec[k];
    next.len = 0;
    base_strbuf_appendn(&next, "", 0);
    const char *s = cur.data;
    size_t n = cur.len, e;
    switch (st->kind) {
    case TOK_DEC_BYTE_LEVEL: { /* characters to their bytes; a token with another stays */
      for (size_t i = 0; i < n;) {
        int b = tok_char_to_byte(uc_next(s, &i));
        if (b < 0) {
          next.len = 0;
          base_strbuf_appendn(&next, s, n);
          break;
        }
        char c = (char)b;
        base_strbuf_appendn(&next, &c, 1);
      }
      break;
    }
    case TOK_DEC_BYTE_FALLBACK: {
      int b = byte_token(s, n);
      char c = (char)b;
      if (b >= 0)
        base_strbuf_appendn(&next, &c, 1);
      else
        base_strbuf_appendn(&next, s, n);
      break;
    }
    case TOK_DEC_REPLACE:
      tok_replace(&next, s, n, st->text, st->content);
      break;
    case TOK_DEC_FUSE:
      base_strbuf_appendn(&next, s, n);
      break;
    case TOK_DEC_STRIP: { /* a token past the stream's start: from the back only */
      size_t to = n;
      for (size_t i = 0; i < st->stop && to > 0; i++) {
        size_t p = uc_prev(s, to);
        if (!char_is(s, p, st->cp, &e)) break;
        to = p;
      }
      base_strbuf_appendn(&next, s, to);
      break;
    }
    case TOK_DEC_METASPACE: /* past the start: the replacement character is a space */
      for (size_t i = 0; i < n; i = e) {
        if (!char_is(s, i, st->cp, &e))
          base_strbuf_appendn(&next, s + i, e - i);
        else
          base_strbuf_appendn(&next, " ", 1);
      }
      break;
    default:
      RX_ASSERT(!"not a decoder");
    }
    rx_strbuf tmp = cur;
    cur = next;
    next = tmp;
  }
  base_strbuf_appendn(out, cur.data, cur.len);
  base_strbuf_free(&cur);
  base_strbuf_free(&next);
}
