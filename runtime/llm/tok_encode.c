/* runtime/llm/tok_encode.c: text to ids, as the tokenizers library's encode() does it:
 *
 *   1. added tokens that are not normalized are split out of the raw text (leftmost, longest);
 *   2. each other piece goes through the normalizer, then the normalized added tokens are split
 *      out of it;
 *   3. the pre-tokenizer steps split (and rewrite) the pieces left;
 *   4. the BPE model turns each piece into ids (tok_bpe.c);
 *   5. with RX_TOKENIZER_ADD_SPECIAL, the post-processor's template adds its special tokens.
 *
 * The Split regexes are the three that tokenizer.json files of GPT-2, Llama 3 and Qwen2 carry,
 * each recognized by its exact pattern and matched by hand here with Oniguruma's semantics (the
 * library's regex engine): alternatives tried in order, greedy repetition with backtracking,
 * Unicode classes from unicode.h. */
#include <stdlib.h>
#include <string.h>

#include "runtime/llm/tokenizer.h"
#include "runtime/llm/unicode.h"

/* ---- the known regexes ---- */
typedef bool (*cp_pred)(uint32_t cp);

static bool is_other(uint32_t c) { return !uc_is_space(c) && !uc_is_letter(c) && !uc_is_number(c); }
static bool is_crlf(uint32_t c) { return c == '\r' || c == '\n'; }

/* The character at s[i] (i < n), its end in *end. */
static uint32_t char_at(const char *s, size_t i, size_t *end) {
  *end = i;
  return uc_next(s, end);
}

/* The end of the run of characters that satisfy p, from i. */
static size_t run(const char *s, size_t n, size_t i, cp_pred p) {
  size_t e;
  while (i < n && p(char_at(s, i, &e))) i = e;
  return i;
}

/* 's|'t|'re|'ve|'m|'ll|'d, in that order; with fold, as (?i:...) in Oniguruma, where s also
 * matches U+017F LATIN SMALL LETTER LONG S (Unicode case folding: ſ folds to s). */
static size_t contraction(const char *s, size_t n, size_t i, bool fold) {
  static const char *const endings[] = {"s", "t", "re", "ve", "m", "ll", "d"};
  if (s[i] != '\'') return i;
  for (size_t k = 0; k < RX_ARRAY_LEN(endings); k++) {
    size_t j = i + 1;
    const char *e = endings[k];
    for (; *e; e++) {
      if (j < n && (s[j] == *e || (fold && s[j] == *e - 'a' + 'A'))) {
        j++;
      } else if (fold && *e == 's' && j + 1 < n && (uint8_t)s[j] == 0xC5 &&
                 (uint8_t)s[j + 1] == 0xBF) {
        j += 2; /* U+017F */
      } else {
        break;
      }
    }
    if (!*e) return j;
  }
  return i;
}

/* \s+(?!\S)|\s+ at i: a run of spaces, less its last one when a non-space follows (unless that
 * leaves nothing). */
static size_t spaces(const char *s, size_t n, size_t i) {
  size_t k = run(s, n, i, uc_is_space);
  if (k == i || k == n) return k;
  size_t last = uc_prev(s, k);
  return last > i ? last : k;
}

/* GPT-2 (ByteLevel's own): 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+|
 * ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+ */
static size_t match_gpt2(const char *s, size_t n, size_t i) {
  size_t j = contraction(s, n, i, false), e, e2;
  if (j > i) return j;
  uint32_t c = char_at(s, i, &e);
  size_t k = c == ' ' ? e : i; /* " ?" takes the space when what follows matches */
  if (k < n) {
    static const cp_pred classes[] = {uc_is_letter, uc_is_number, is_other};
    uint32_t d = char_at(s, k, &e2);
    for (size_t p = 0; p < RX_ARRAY_LEN(classes); p++)
      if (classes[p](d)) return run(s, n, k, classes[p]);
  }
  return spaces(s, n, i);
}

/* Llama 3 (digits 3) and Qwen2 (digits 1):
 * (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,digits}| ?[^\s\p{L}\p{N}]+[\r\n]*|
 * \s*[\r\n]+|\s+(?!\S)|\s+ */
static size_t match_llama(const char *s, size_t n, size_t i, int digits) {
  size_t j = contraction(s, n, i, true), e, e2;
  if (j > i) return j;
  uint32_t c = char_at(s, i, &e);
  if (!is_crlf(c) && !uc_is_letter(c) && !uc_is_number(c) && e < n &&
      uc_is_letter(char_at(s, e, &e2)))
    return run(s, n, e, uc_is_letter);
  if (uc_is_letter(c)) return run(s, n, i, uc_is_letter);
  if (uc_is_number(c)) {
    size_t k = i;
    for (int d = 0; d < digits && k < n && uc_is_number(char_at(s, k, &e2)); d++) k = e2;
    return k;
  }
  size_t k = c == ' ' ? e : i;
  if (k < n && is_other(char_at(s, k, &e2))) return run(s, n, run(s, n, k, is_other), is_crlf);
  /* \s*[\r\n]+: the spaces up to and including the last CR or LF among them */
  size_t end = run(s, n, i, uc_is_space), last_crlf = i;
  for (size_t p = i; p < end;)
    if (is_crlf(uc_next(s, &p))) last_crlf = p;
  if (last_crlf > i) return last_crlf;
  return spaces(s, n, i);
}

static size_t match_llama3(const char *s, size_t n, size_t i) { return match_llama(s, n, i, 3); }
static size_t match_qwen2(const char *s, size_t n, size_t i) { return match_llama(s, n, i, 1); }

/* The match at i (its end, > i), or i when there is none. */
typedef size_t (*regex_fn)(const char *s, size_t n, size_t i);

/* The patterns as tokenizer.json carries them (after JSON unescaping). */
static const struct {
  const char *pattern;
  regex_fn match;
} REGEXES[] = {
    {"'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+",
     match_gpt2},
    {"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+"
     "[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
     match_llama3},
    {"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+"
     "[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
     match_qwen2},
};
enum { REGEX_GPT2 = 0 }; /* ByteLevel's use_regex */

int tok_regex_find(const char *s, size_t n) {
  for (size_t i = 0; i < RX_ARRAY_LEN(REGEXES); i++)
    if (strlen(REGEXES[i].pattern) == n && memcmp(REGEXES[i].pattern, s, n) == 0) return (int)i;
  return -1;
}

/* ---- spans and split behaviors (the library's NormalizedString::split) ---- */
typedef struct span {
  size_t start, end;
  bool match;
} span;
typedef RX_VEC(span) span_vec;

static void push_span(span_vec *v, size_t start, size_t end, bool match) {
  span sp = {start, end, match};
  RX_VEC_PUSH(v, sp);
}

/* Matches of a regex, covering s: the gaps as non-matches. */
static void regex_spans(const char *s, size_t n, regex_fn match, span_vec *out) {
  size_t prev = 0;
  for (size_t i = 0; i < n;) {
    size_t e = match(s, n, i);
    if (e == i) {
      uc_next(s, &i);
      continue;
    }
    if (prev < i) push_span(out, prev, i, false);
    push_span(out, i, e, true);
    prev = i = e;
  }
  if (prev < n) push_span(out, prev, n, false);
}

/* Non-overlapping occurrences of a string, leftmost first, covering s. */
static void text_spans(const char *s, size_t n, tok_text pat, span_vec *out) {
  size_t prev = 0;
  for (size_t i = 0; pat.n && i + pat.n <= n;) {
    if (memcmp(s + i, pat.s, pat.n) != 0) {
      i++;
      continue;
    }
    if (prev < i) push_span(out, prev, i, false);
    push_span(out, i, i + pat.n, true);
    prev = i += pat.n;
  }
  if (prev < n) push_span(out, prev, n, false);
}

/* Each character that satisfies p (or, p NULL, equals eq) is a match of its own. */
static void char_spans(const char *s, size_t n, cp_pred p, uint32_t eq, span_vec *out) {
  size_t prev = 0;
  for (size_t i = 0; i < n;) {
    size_t start = i;
    uint32_t c = uc_next(s, &i);
    if (p ? !p(c) : c != eq) continue;
    if (prev < start) push_span(out, prev, start, false);
    push_span(out, start, i, true);
    prev = i;
  }
  if (prev < n) push_span(out, prev, n, false);
}

/* Rewrites spans into the pieces a behavior keeps (match: false = kept). */
static void apply_behavior(span_vec *v, tok_behavior b) {
  size_t out = 0;
  bool prev_match = false;
  if (b == TOK_MERGED_WITH_NEXT) /* the library folds from the end */
    for (size_t i = 0; i < v->len / 2; i++) {
      span tmp = v->data[i];
      v->data[i] = v->data[v->len - 1 - i];
      v->data[v->len - 1 - i] = tmp;
    }
  for (size_t i = 0; i < v->len; i++) {
    span sp = v->data[i];
    bool join =
        out > 0 &&
        ((b == TOK_CONTIGUOUS && sp.match == prev_match) ||
         ((b == TOK_MERGED_WITH_PREVIOUS || b == TOK_MERGED_WITH_NEXT) && sp.match && !prev_match));
    prev_match = sp.match;
    if (join && b == TOK_MERGED_WITH_NEXT)
      v->data[out - 1].start = sp.start;
    else if (join)
      v->data[out - 1].end = sp.end;
    else
      v->data[out++] = (span){sp.start, sp.end, b == TOK_REMOVED && sp.match};
  }
  v->len = out;
  if (b == TOK_MERGED_WITH_NEXT)
    for (size_t i = 0; i < out / 2; i++) {
      span tmp = v->data[i];
      v->data[i] = v->data[out - 1 - i];
      v->data[out - 1 - i] = tmp;
    }
}

/* ---- pieces between pre-tokenizer steps ---- */
typedef struct piece {
  size_t off, n;
  bool at_start; /* starts at offset 0 of the original text (Metaspace's "first") */
} piece;
typedef RX_VEC(piece) piece_vec;
typedef struct stage {
  rx_strbuf text;
  piece_vec pieces;
} stage;

static void stage_clear(stage *st) {
  st->text.len = 0;
  st->pieces.len = 0;
}

static void stage_free(stage *st) {
  base_strbuf_free(&st->text);
  free(st->pieces.data);
}

/* Adds a piece (empty ones are dropped, as the library drops empty splits). */
static void emit(stage *out, const char *s, size_t n, bool at_start) {
  if (!n) return;
  piece p = {out->text.len, n, at_start};
  base_strbuf_appendn(&out->text, s, n);
  RX_VEC_PUSH(&out->pieces, p);
}

static void emit_spans(stage *out, const char *s, span_vec *spans, tok_behavior b, bool invert,
                       bool at_start) {
  if (invert)
    for (size_t i = 0; i < spans->len; i++) spans->data[i].match = !spans->data[i].match;
  apply_behavior(spans, b);
  for (size_t i = 0; i < spans->len; i++)
    if (!spans->data[i].match)
      emit(out, s + spans->data[i].start, spans->data[i].end - spans->data[i].start,
           at_start && spans->data[i].start == 0);
  spans->len = 0;
}

static void byte_level_map(stage *out, const char *s, size_t n) {
  size_t off = out->text.len;
  for (size_t i = 0; i < n; i++) uc_append(&out->text, tok_byte_to_char((uint8_t)s[i]));
  piece p = {off, out->text.len - off, false};
  if (p.n) RX_VEC_PUSH(&out->pieces, p);
}

static bool starts_with(const char *s, size_t n, tok_text pre) {
  return n >= pre.n && memcmp(s, pre.s, pre.n) == 0;
}

/* One pre-tokenizer step on one piece. */
static void pre_step(const tok_step *st, const char *s, size_t n, bool at_start, stage *out,
                     span_vec *spans, rx_strbuf *tmp) {
  tmp->len = 0;
  switch (st->kind) {
  case TOK_PRE_BYTE_LEVEL: {
    if (st->prefix_space && (n == 0 || s[0] != ' ')) base_strbuf_appendn(tmp, " ", 1);
    if (n) base_strbuf_appendn(tmp, s, n);
    if (!tmp->len) return;
    if (st->use_regex)
      regex_spans(tmp->data, tmp->len, REGEXES[REGEX_GPT2].match, spans);
    else
      push_span(spans, 0, tmp->len, true);
    for (size_t i = 0; i < spans->len; i++)
      byte_level_map(out, tmp->data + spans->data[i].start,
                     spans->data[i].end - spans->data[i].start);
    spans->len = 0;
    return;
  }
  case TOK_PRE_SPLIT:
    if (st->regex >= 0)
      regex_spans(s, n, REGEXES[st->regex].match, spans);
    else
      text_spans(s, n, st->text, spans);
    emit_spans(out, s, spans, st->behavior, st->invert, at_start);
    return;
  case TOK_PRE_METASPACE: {
    bool prepend =
        st->prepend == TOK_PREPEND_ALWAYS || (st->prepend == TOK_PREPEND_FIRST && at_start);
    /* spaces become the replacement; the prefix is added unless the text starts with it */
    for (size_t i = 0; i < n; i++) {
      if (s[i] == ' ')
        base_strbuf_appendn(tmp, st->text.s, st->text.n);
      else
        base_strbuf_appendn(tmp, s + i, 1);
    }
    if (prepend && !starts_with(tmp->data ? tmp->data : "", tmp->len, st->text)) {
      base_strbuf_appendn(tmp, st->text.s, st->text.n);
      memmove(tmp->data + st->text.n, tmp->data, tmp->len - st->text.n);
      memcpy(tmp->data, st->text.s, st->text.n);
    }
    if (!tmp->len) return;
    if (!st->split) {
      emit(out, tmp->data, tmp->len, at_start);
      return;
    }
    char_spans(tmp->data, tmp->len, NULL, st->cp, spans);
    emit_spans(out, tmp->data, spans, TOK_MERGED_WITH_NEXT, false, at_start);
    return;
  }
  case TOK_PRE_DIGITS:
    char_spans(s, n, uc_is_number, 0, spans);
    emit_spans(out, s, spans, st->individual ? TOK_ISOLATED : TOK_CONTIGUOUS, false, at_start);
    return;
  default:
    RX_ASSERT(!"not a pre-tokenizer");
  }
}

/* ---- normalizers ---- */
void tok_replace(rx_strbuf *out, const char *s, size_t n, tok_text pattern, tok_text content) {
  size_t prev = 0;
  for (size_t i = 0; pattern.n && i + pattern.n <= n;) {
    if (memcmp(s + i, pattern.s, pattern.n) != 0) {
      i++;
      continue;
    }
    base_strbuf_appendn(out, s + prev, i - prev);
    base_strbuf_appendn(out, content.s, content.n);
    prev = i += pattern.n;
  }
  base_strbuf_appendn(out, n ? s + prev : "", n - prev);
}

static void norm_step(const tok_step *st, const rx_strbuf *in, rx_strbuf *out) {
  const char *s = in->data ? in->data : "";
  size_t n = in->len;
  out->len = 0;
  switch (st->kind) {
  case TOK_NORM_PREPEND:
    if (n) base_strbuf_appendn(out, st->text.s, st->text.n);
    break;
  case TOK_NORM_REPLACE:
    tok_replace(out, s, n, st->text, st->content);
    return;
  case TOK_NORM_NFC:
    uc_append_nfc(out, s, n);
    return;
  default:
    RX_ASSERT(!"not a normalizer");
  }
  base_strbuf_appendn(out, s, n);
}

void tok_normalize(const rx_tokenizer *t, const char *s, size_t n, rx_strbuf *out) {
  rx_strbuf a = {0}, b = {0};
  base_strbuf_appendn(&a, n ? s : "", n);
  for (size_t i = 0; i < t->nnorm; i++) {
    norm_step(&t->norm[i], &a, &b);
    rx_strbuf tmp = a;
    a = b;
    b = tmp;
  }
  base_strbuf_appendn(out, a.data, a.len);
  base_strbuf_free(&a);
  base_strbuf_free(&b);
}

/* ---- added tokens ---- */
typedef struct match_key {
  uint8_t first;
  size_t n, index;
} match_key;

static int by_first_byte_longest(const void *pa, const void *pb) {
  const match_key *a = pa, *b = pb;
  if (a->first != b->first) return a->first < b->first ? -1 : 1;
  if (a->n != b->n) return a->n > b->n ? -1 : 1;
  return a->index < b->index ? -1 : 1; /* the file's order */
}

void tok_index_added(rx_tokenizer *t) {
  match_key *keys = base_calloc(t->nadded + 1, sizeof *keys);
  for (int w = 0; w < 2; w++) {
    size_t n = 0;
    for (size_t i = 0; i < t->nadded; i++) {
      const tok_added *a = &t->added[i];
      if (a->normalized == (w == 1) && a->match.n)
        keys[n++] = (match_key){(uint8_t)a->match.s[0], a->match.n, i};
    }
    qsort(keys, n, sizeof *keys, by_first_byte_longest);
    size_t *order = base_arena_alloc(&t->arena, (n + 1) * sizeof *order);
    for (size_t k = 0; k < n; k++) order[k] = keys[k].index;
    for (size_t b = 0, k = 0; b <= 256; b++) {
      while (k < n && keys[k].first < b) k++;
      t->match_start[w][b] = k;
    }
    t->match_order[w] = order;
  }
  free(keys);
}

/* A segment of a text: an added token (id >= 0) or text to process further (id -1). */
typedef struct seg {
  size_t start, end;
  int32_t id;
} seg;
typedef RX_VEC(seg) seg_vec;

static void push_seg(seg_vec *v, size_t start, size_t end, int32_t id) {
  seg sg = {start, end, id};
  RX_VEC_PUSH(v, sg);
}

/* The longest added token of list w that starts at s[i], or NULL. */
static const tok_added *added_at(const rx_tokenizer *t, int w, const char *s, size_t n, size_t i) {
  uint8_t b = (uint8_t)s[i];
  for (size_t k = t->match_start[w][b]; k < t->match_start[w][b + 1]; k++) {
    const tok_added *a = &t->added[t->match_order[w][k]];
    if (a->match.n <= n - i && memcmp(s + i, a->match.s, a->match.n) == 0) return a;
  }
  return NULL;
}

/* The library's AddedVocabulary::find_matches: leftmost-longest matches, each checked for
 * single_word and widened by lstrip / rstrip over White_Space. */
static void find_added(const rx_tokenizer *t, int w, const char *s, size_t n, seg_vec *out) {
  size_t done = 0; /* the end of the last token taken */
  for (size_t i = 0; t->match_start[w][256] && i < n;) {
    const tok_added *a = added_at(t, w, s, n, i);
    if (!a) {
      i++;
      continue;
    }
    size_t start = i, stop = i + a->match.n, e;
    i = stop;
    if (a->single_word) {
      bool word_before = start > 0 && uc_is_word(char_at(s, uc_prev(s, start), &e));
      bool word_after = stop < n && uc_is_word(char_at(s, stop, &e));
      if (word_before || word_after) continue;
    }
    if (a->lstrip) {
      size_t k = start;
      while (k > 0 && uc_is_space(char_at(s, uc_prev(s, k), &e))) k = uc_prev(s, k);
      start = k > done ? k : done;
    }
    if (a->rstrip) stop = run(s, n, stop, uc_is_space);
    if (done < start) push_seg(out, done, start, -1);
    push_seg(out, start, stop, a->id);
    done = stop;
  }
  if (done < n) push_seg(out, done, n, -1);
}

/* ---- encode ---- */
typedef struct encoder {
  const rx_tokenizer *t;
  stage st[2];
  span_vec spans;
  rx_strbuf tmp;
  tok_ids *ids;
} encoder;

/* Pre-tokenizes one normalized piece and runs the model on what comes out. */
static void pre_and_model(encoder *en, const char *s, size_t n, bool at_start) {
  const rx_tokenizer *t = en->t;
  stage *in = &en->st[0], *out = &en->st[1];
  stage_clear(in);
  emit(in, s, n, at_start);
  for (size_t k = 0; k < t->npre; k++) {
    stage_clear(out);
    for (size_t i = 0; i < in->pieces.len; i++) {
      piece p = in->pieces.data[i];
      pre_step(&t->pre[k], in->text.data + p.off, p.n, p.at_start, out, &en->spans, &en->tmp);
    }
    stage *tmp = in;
    in = out;
    out = tmp;
  }
  for (size_t i = 0; i < in->pieces.len; i++)
    tok_bpe(t, in->text.data + in->pieces.data[i].off, in->pieces.data[i].n, en->ids);
}

static void encode_text(encoder *en, const char *text, size_t len) {
  const rx_tokenizer *t = en->t;
  seg_vec raw = {0}, norm = {0};
  rx_strbuf ns = {0};
  find_added(t, 0, text, len, &raw);
  for (size_t i = 0; i < raw.len; i++) {
    seg r = raw.data[i];
    if (r.id >= 0) {
      RX_VEC_PUSH(en->ids, r.id);
      continue;
    }
    ns.len = 0;
    tok_normalize(t, text + r.start, r.end - r.start, &ns);
    norm.len = 0;
    find_added(t, 1, ns.data, ns.len, &norm);
    for (size_t k = 0; k < norm.len; k++) {
      seg g = norm.data[k];
      if (g.id >= 0)
        RX_VEC_PUSH(en->ids, g.id);
      else
        pre_and_model(en, ns.data + g.start, g.end - g.start, r.start == 0 && g.start == 0);
    }
  }
  free(raw.data);
  free(norm.data);
  base_strbuf_free(&ns);
}

rx_status rx_tokenizer_encode(const rx_tokenizer *tok, const char *text, size_t len, int flags,
                              int32_t **out_ids, size_t *out_count) {
  if (out_ids) *out_ids = NULL;
  if (out_count) *out_count = 0;
  if (!tok || !out_ids || !out_count || (!text && len))
    return base_status_make(RX_ERR_INVALID, "rx_tokenizer_encode: NULL argument");
  size_t valid = uc_valid_prefix(text, len);
  if (valid < len)
    return base_status_make(RX_ERR_INVALID,
                            "%s: encode: the text is not valid UTF-8 at byte %zu (0x%02X)",
                            tok->name, valid, (unsigned)(uint8_t)text[valid]);
  tok_ids ids = {0};
  encoder en = {.t = tok, .ids = &ids};
  bool add = (flags & RX_TOKENIZER_ADD_SPECIAL) && tok->tmpl;
  for (size_t i = 0; i < (add ? tok->ntmpl : 1); i++) {
    if (add && !tok->tmpl[i].is_sequence) {
      for (size_t k = 0; k < tok->tmpl[i].n; k++) RX_VEC_PUSH(&ids, tok->tmpl[i].ids[k]);
      continue;
    }
    if (len) encode_text(&en, text, len);
  }
  stage_free(&en.st[0]);
  stage_free(&en.st[1]);
  free(en.spans.data);
  base_strbuf_free(&en.tmp);
  *out_count = ids.len;
  *out_ids = ids.data ? ids.data : base_calloc(1, sizeof(int32_t));
  return NULL;
}
