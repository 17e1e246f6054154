/* runtime/llm/tokenizer.h: the tokenizer's inside, shared by its files. Internal header.
 *
 *   tokenizer.c   loading tokenizer.json into the structures below; the lookups of relaxc/llm.h
 *   tok_bpe.c     the tables (string -> id, pair -> merge) and the BPE model
 *   tok_encode.c  added tokens, normalizers, pre-tokenizers (the known regexes), encode
 *   tok_decode.c  decoders, decode, the streaming detokenizer
 *
 * Each step of a pipeline (normalizer, pre-tokenizer, decoder) is one tok_step; a Sequence in the
 * file is flattened into consecutive steps. Past the loader, the encoder and decoder assert what
 * the loader checked (ids inside the vocab, known kinds). */
#ifndef RX_LLM_TOKENIZER_H
#define RX_LLM_TOKENIZER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/base.h"
#include "relaxc/llm.h"

typedef struct tok_text {
  const char *s; /* UTF-8, owned by the tokenizer's arena */
  size_t n;
} tok_text;

/* ---- tables (tok_bpe.c) ---- */
/* string -> int32, open addressing; keys borrowed */
typedef struct tok_map {
  tok_text *keys;
  int32_t *vals;
  size_t cap, len;
} tok_map;
/* Adds key -> val unless key is there; returns the value already there, or -1 when added. */
int32_t tok_map_add(tok_map *m, tok_text key, int32_t val);
int32_t tok_map_get(const tok_map *m, const char *s, size_t n); /* -1 when absent */
void tok_map_free(tok_map *m);

/* (left id, right id) -> (rank, merged id) */
typedef struct tok_merges {
  uint64_t *keys; /* left << 32 | right; 0 marks a free slot, so keys are stored plus one */
  uint32_t *ranks;
  int32_t *ids;
  size_t cap, len;
} tok_merges;
void tok_merges_put(tok_merges *m, int32_t left, int32_t right, uint32_t rank, int32_t id);
bool tok_merges_get(const tok_merges *m, int32_t left, int32_t right, uint32_t *rank, int32_t *id);
void tok_merges_free(tok_merges *m);

/* ---- pipeline steps ----
 * X(kind, "type" in tokenizer.json); the loader's table of parsers and every switch over the
 * kinds follow this list. */
#define TOK_NORMALIZERS(X)                                                                         \
  X(NORM_PREPEND, "Prepend")                                                                       \
  X(NORM_REPLACE, "Replace")                                                                       \
  X(NORM_NFC, "NFC")
#define TOK_PRE_TOKENIZERS(X)                                                                      \
  X(PRE_BYTE_LEVEL, "ByteLevel")                                                                   \
  X(PRE_SPLIT, "Split")                                                                            \
  X(PRE_METASPACE, "Metaspace")                                                                    \
  X(PRE_DIGITS, "Digits")
#define TOK_DECODERS(X)                                                                            \
  X(DEC_BYTE_LEVEL, "ByteLevel")                                                                   \
  X(DEC_REPLACE, "Replace")                                                                        \
  X(DEC_BYTE_FALLBACK, "ByteFallback")                                                             \
  X(DEC_FUSE, "Fuse")                                                                              \
  X(DEC_STRIP, "Strip")                                                                            \
  X(DEC_METASPACE, "Metaspace")

typedef enum tok_kind {
#define TOK_KIND_ENUM_(k, name) TOK_##k,
  TOK_NORMALIZERS(TOK_KIND_ENUM_) TOK_PRE_TOKENIZERS(TOK_KIND_ENUM_) TOK_DECODERS(TOK_KIND_ENUM_)
#undef TOK_KIND_ENUM_
} tok_kind;

/* Split's delimiter behaviors, as the library names them */
#define TOK_BEHAVIORS(X)                                                                           \
  X(REMOVED, "Removed")                                                                            \
  X(ISOLATED, "Isolated")                                                                          \
  X(MERGED_WITH_PREVIOUS, "MergedWithPrevious")                                                    \
  X(MERGED_WITH_NEXT, "MergedWithNext")                                                            \
  X(CONTIGUOUS, "Contiguous")
typedef enum tok_behavior {
#define TOK_BEHAVIOR_ENUM_(b, name) TOK_##b,
  TOK_BEHAVIORS(TOK_BEHAVIOR_ENUM_)
#undef TOK_BEHAVIOR_ENUM_
} tok_behavior;

/* Metaspace's prepend_scheme */
typedef enum tok_prepend { TOK_PREPEND_ALWAYS, TOK_PREPEND_FIRST, TOK_PREPEND_NEVER } tok_prepend;

typedef struct tok_step {
  tok_kind kind;
  tok_text text;         /* Prepend: the text; Replace, Split: the string pattern; Metaspace: the
                            replacement character; Strip: the character */
  tok_text content;      /* Replace: what replaces the pattern */
  uint32_t cp;           /* Metaspace, Strip: text's one character */
  int regex;             /* Split: index into the known regexes (tok_regex_find), or -1 for text */
  tok_behavior behavior; /* Split */
  bool invert;           /* Split */
  bool prefix_space;     /* ByteLevel: add_prefix_space */
  bool use_regex;        /* ByteLevel */
  bool split;            /* Metaspace */
  bool individual;       /* Digits: individual_digits */
  tok_prepend prepend;   /* Metaspace */
  size_t start, stop;    /* Strip: at most this many characters from each end */
} tok_step;

/* The index of a regex the encoder implements whose pattern is exactly s, or -1. */
int tok_regex_find(const char *s, size_t n);

/* ---- added tokens ---- */
typedef struct tok_added {
  tok_text content; /* the token's text in the file */
  tok_text match;   /* what encode matches and decode gives: the content, or for a normalized
                       token the content after the normalizer (as the library does) */
  int32_t id;
  bool special, normalized, lstrip, rstrip, single_word;
} tok_added;

/* One piece of the post-processor's single-sequence template. */
typedef struct tok_piece {
  bool is_sequence; /* the text's own ids; otherwise ids[0..n) */
  int32_t *ids;
  size_t n;
} tok_piece;

struct rx_tokenizer {
  rx_arena arena; /* every string and array below */
  const char *name;
  /* the BPE model */
  tok_map vocab;
  tok_text *by_id; /* model id -> token, for ids below nmodel (s NULL: no token) */
  int32_t nmodel;
  tok_merges merges;
  int32_t unk; /* -1: none */
  bool fuse_unk, byte_fallback, ignore_merges;
  int32_t byte_ids[256]; /* byte fallback: the id of <0xXX>, or -1 */
  /* added tokens, in the file's order; matching uses two lists of indices (not normalized,
     normalized), each by first byte then longest first, with per-byte starts */
  tok_added *added;
  size_t nadded;
  tok_map added_by_content; /* content -> index into added */
  int32_t *added_of_id;     /* id -> index into added, or -1; vocab_size entries */
  size_t *match_order[2];
  size_t match_start[2][257];
  /* the pipeline */
  tok_step *norm, *pre, *dec;
  size_t nnorm, npre, ndec;
  bool has_decoder; /* without one, decode joins tokens with spaces */
  tok_piece *tmpl;  /* NULL: the post-processor adds nothing */
  size_t ntmpl;
  /* BOS and EOS */
  int32_t bos;
  int32_t *eos;
  size_t neos;
  int32_t vocab_size;
};

/* ---- tok_bpe.c ---- */
typedef RX_VEC(int32_t) tok_ids;
/* Appends the model's ids for one pre-tokenized piece (valid UTF-8, n > 0). */
void tok_bpe(const rx_tokenizer *t, const char *s, size_t n, tok_ids *out);

/* ---- tok_encode.c ---- */
/* Appends s with every occurrence of pattern (leftmost first, not overlapping) replaced by
 * content: the Replace normalizer and decoder. */
void tok_replace(rx_strbuf *out, const char *s, size_t n, tok_text pattern, tok_text content);
/* Appends s after the normalizer steps (the whole of s, as one piece). */
void tok_normalize(const rx_tokenizer *t, const char *s, size_t n, rx_strbuf *out);
/* Sorts the added tokens for matching (match_order, match_start); after t->added is final. */
void tok_index_added(rx_tokenizer *t);

/* ---- tok_decode.c ---- */
/* GPT-2's byte <-> character table (bytes_to_unicode), as arithmetic: printable bytes are
 * themselves, the 68 others are U+0100 onward in byte order. */
uint32_t tok_byte_to_char(uint8_t b);
int tok_char_to_byte(uint32_t cp); /* -1 when cp is no byte's character */
/* The token text decode starts from (and id_to_token gives): an added token's match text, else
 * the model's token; NULL for an id of neither. */
const tok_text *tok_text_of(const rx_tokenizer *t, int32_t id);
/* The bytes id adds to a stream past its start, as the decoder makes them but raw (byte-level and
 * byte-fallback bytes as they are, not read as UTF-8), into out (reset first; empty for a special
 * token, which decode with RX_TOKENIZER_SKIP_SPECIAL leaves out, or an unknown id): what
 * constrained decoding matches a token by (runtime/llm/grammar_mask.c). */
void tok_token_bytes(const rx_tokenizer *t, int32_t id, rx_strbuf *out);

#endif
