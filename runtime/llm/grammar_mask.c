/* runtime/llm/grammar_mask.c: token masks of a grammar (relaxc/llm.h "constrained decoding"),
 * the public grammar and matcher.
 *
 * Each token's bytes (tok_token_bytes: as the decoder gives them past a stream's start, byte
 * tokens as raw bytes) are put in a trie, its nodes in preorder with each subtree's end, so the
 * mask of a state is one walk: a node's state is its parent's fed the node's byte, and a node
 * whose state is dead skips its subtree. Tokens that share a prefix share its work, and at a
 * structural place ('{' expected, a key's next byte) nearly every subtree dies at its first
 * byte. Masks are memoized by state (the state's bytes, llm_gstate_key) in a small cache per
 * grammar: inside a string without length bounds, or between values, the state repeats from
 * token to token, so most steps cost a lookup. */
#include "runtime/llm/grammar.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/llm/tokenizer.h"

enum {
  GCACHE_ENTRIES = 64, /* masks memoized per grammar (at 128k tokens, 16 KB each) */
  GKEY_MAX = sizeof(uint32_t) + G_MAX_ALTS * (sizeof(uint32_t) + G_MAX_DEPTH * sizeof(gframe))
};

/* A trie of token byte strings, its nodes in preorder. */
typedef struct gtree {
  uint32_t n;
  uint8_t *byte;
  uint16_t *depth;  /* 1 for the root's children */
  uint32_t *end;    /* one past the node's subtree */
  uint32_t *tok_at; /* n + 1: the tokens ending at node i are toks[tok_at[i] .. tok_at[i + 1]) */
  int32_t *toks;
} gtree;

typedef struct gtrie {
  /* by id: the token's bytes */
  uint32_t *off; /* vocab + 1 */
  char *bytes;
  uint32_t maxlen;
  gtree all;  /* every token with text */
  gtree rest; /* those that are not plain */
  /* plain tokens: text that can sit inside any JSON string whole (no quote, no backslash, no
     control character, complete UTF-8): inside a string, each is allowed exactly when the
     string has room for its characters, whatever the rest of the state */
  uint32_t *plain_bits;
  int32_t *plain_ids; /* by their characters, fewest first */
  uint32_t *plain_cps;
  uint32_t nplain;
} gtrie;

typedef struct gentry {
  uint64_t hash;
  uint8_t *key;
  size_t klen;
  uint32_t *bits; /* without EOS */
  uint32_t count;
} gentry;

typedef struct gcache {
  gentry e[GCACHE_ENTRIES];
  uint32_t used, next; /* entries filled; the next to replace when all are */
} gcache;

struct rx_llm_matcher {
  grammar *g;
  gstate st;
  gstate *scratch; /* trie walks: one state per depth (maxlen + 1) */
  uint32_t *bits;  /* a mask's scratch */
  uint8_t key[GKEY_MAX];
};

static size_t words_of(int32_t vocab) { return ((size_t)vocab + 31) / 32; }

/* ---- the trie ---- */
typedef struct tentry {
  const char *s;
  uint32_t n;
  int32_t id;
} tentry;

static int by_bytes(const void *pa, const void *pb) {
  const tentry *a = pa, *b = pb;
  uint32_t n = a->n < b->n ? a->n : b->n;
  int c = memcmp(a->s, b->s, n);
  if (c) return c;
  if (a->n != b->n) return a->n < b->n ? -1 : 1;
  return a->id < b->id ? -1 : a->id > b->id;
}

static void tree_free(gtree *t) {
  free(t->byte);
  free(t->depth);
  free(t->end);
  free(t->tok_at);
  free(t->toks);
}

static void trie_free(gtrie *t) {
  if (!t) return;
  free(t->off);
  free(t->bytes);
  tree_free(&t->all);
  tree_free(&t->rest);
  free(t->plain_bits);
  free(t->plain_ids);
  free(t->plain_cps);
  free(t);
}

/* The nodes of the sorted entries e[0..ne), in preorder. */
static void trie_nodes(gtree *t, const tentry *e, size_t ne, size_t total, uint32_t maxlen) {
  t->byte = base_malloc(total + 1);
  t->depth = base_malloc((total + 1) * sizeof *t->depth);
  t->end = base_malloc((total + 1) * sizeof *t->end);
  uint32_t *node_of = base_malloc((ne + 1) * sizeof *node_of);
  uint32_t *path = base_malloc(((size_t)maxlen + 1) * sizeof *path);
  uint32_t plen = 0;
  for (size_t i = 0; i < ne; i++) {
    uint32_t l = 0; /* the common prefix with the previous entry */
    if (i)
      while (l < e[i].n && l < e[i - 1].n && e[i].s[l] == e[i - 1].s[l]) l++;
    while (plen > l) t->end[path[--plen]] = t->n;
    for (uint32_t k = plen; k < e[i].n; k++) {
      t->byte[t->n] = (uint8_t)e[i].s[k];
      t->depth[t->n] = (uint16_t)(k + 1);
      path[plen++] = t->n++;
    }
    node_of[i] = path[e[i].n - 1];
  }
  while (plen) t->end[path[--plen]] = t->n;
  t->tok_at = base_calloc((size_t)t->n + 1, sizeof *t->tok_at);
  t->toks = base_malloc((ne + 1) * sizeof *t->toks);
  for (size_t i = 0; i < ne; i++) {
    t->tok_at[node_of[i] + 1]++;
    t->toks[i] = e[i].id; /* node_of is non-decreasing: preorder is the sorted order */
  }
  for (uint32_t i = 0; i < t->n; i++) t->tok_at[i + 1] += t->tok_at[i];
  free(node_of);
  free(path);
}

/* The characters of n bytes of s when they are plain (see gtrie), else -1. */
static int64_t plain_chars(const char *s, uint32_t n) {
  int64_t cps = 0;
  for (uint32_t i = 0; i < n; cps++) {
    uint8_t c = (uint8_t)s[i++];
    if (c < 0x20 || c == '"' || c == '\\') return -1;
    if (c < 0x80) continue;
    int more = c >= 0xC2 && c <= 0xDF   ? 1
               : c >= 0xE0 && c <= 0xEF ? 2
               : c >= 0xF0 && c <= 0xF4 ? 3
                                        : -1;
    if (more < 0) return -1;
    uint8_t lo = c == 0xE0 ? 0xA0 : c == 0xF0 ? 0x90 : 0x80;
    uint8_t hi = c == 0xED ? 0x9F : c == 0xF4 ? 0x8F : 0xBF;
    for (int k = 0; k < more; k++, lo = 0x80, hi = 0xBF) {
      if (i >= n || (uint8_t)s[i] < lo || (uint8_t)s[i] > hi) return -1;
      i++;
    }
  }
  return cps;
}

static int by_chars(const void *pa, const void *pb) {
  const uint64_t a = *(const uint64_t *)pa, b = *(const uint64_t *)pb;
  return a < b ? -1 : a > b;
}

/* The plain tokens (gtrie) of e[0..ne) into t; the others stay in e (their count returned). */
static size_t split_plain(gtrie *t, tentry *e, size_t ne, int32_t vocab) {
  t->plain_bits = base_calloc(((size_t)vocab + 31) / 32, sizeof *t->plain_bits);
  uint64_t *keyed = base_malloc((ne + 1) * sizeof *keyed); /* characters << 32 | id */
  size_t rest = 0;
  for (size_t i = 0; i < ne; i++) {
    int64_t cps = plain_chars(e[i].s, e[i].n);
    if (cps < 0) {
      e[rest++] = e[i];
      continue;
    }
    keyed[t->nplain++] = (uint64_t)cps << 32 | (uint32_t)e[i].id;
    t->plain_bits[e[i].id / 32] |= 1u << (e[i].id % 32);
  }
  qsort(keyed, t->nplain, sizeof *keyed, by_chars);
  t->plain_ids = base_malloc(((size_t)t->nplain + 1) * sizeof *t->plain_ids);
  t->plain_cps = base_malloc(((size_t)t->nplain + 1) * sizeof *t->plain_cps);
  for (uint32_t i = 0; i < t->nplain; i++) {
    t->plain_ids[i] = (int32_t)(keyed[i] & 0xFFFFFFFFu);
    t->plain_cps[i] = (uint32_t)(keyed[i] >> 32);
  }
  free(keyed);
  return rest;
}

static gtrie *trie_build(const rx_tokenizer *tok, int32_t vocab) {
  gtrie *t = base_calloc(1, sizeof *t);
  rx_strbuf all = {0}, one = {0};
  t->off = base_malloc(((size_t)vocab + 1) * sizeof *t->off);
  for (int32_t id = 0; id < vocab; id++) {
    t->off[id] = (uint32_t)all.len;
    tok_token_bytes(tok, id, &one);
    base_strbuf_appendn(&all, one.data, one.len);
  }
  t->off[vocab] = (uint32_t)all.len;
  base_strbuf_appendn(&all, "", 0);
  t->bytes = base_strbuf_take(&all);
  base_strbuf_free(&one);
  tentry *e = base_malloc(((size_t)vocab + 1) * sizeof *e);
  size_t ne = 0, total = 0;
  for (int32_t id = 0; id < vocab; id++) {
    uint32_t n = t->off[id + 1] - t->off[id];
    if (!n) continue; /* special tokens: never text */
    e[ne++] = (tentry){t->bytes + t->off[id], n, id};
    total += n;
    if (n > t->maxlen) t->maxlen = n;
  }
  qsort(e, ne, sizeof *e, by_bytes);
  trie_nodes(&t->all, e, ne, total, t->maxlen);
  size_t nrest = split_plain(t, e, ne, vocab); /* keeps the order */
  trie_nodes(&t->rest, e, nrest, total, t->maxlen);
  free(e);
  return t;
}

/* Adds the tokens of tree t that can follow state st to bits; returns how many. */
static uint32_t walk(const grammar *g, const gtree *t, const gstate *st, gstate *scratch,
                     uint32_t *bits) {
  scratch[0] = *st;
  uint32_t count = 0;
  for (uint32_t i = 0; i < t->n;) {
    uint32_t d = t->depth[i];
    llm_gstate_feed(g, &scratch[d - 1], t->byte[i], &scratch[d]);
    if (!scratch[d].n) {
      i = t->end[i];
      continue;
    }
    for (uint32_t k = t->tok_at[i]; k < t->tok_at[i + 1]; k++) {
      int32_t id = t->toks[k];
      bits[id / 32] |= 1u << (id % 32);
      count++;
    }
    i++;
  }
  return count;
}

/* The mask of state st (without EOS) into bits; returns how many tokens. Inside a string (every
 * stack's top a string's body), the plain tokens that fit the room left come from their list and
 * only the others are walked. */
static uint32_t state_walk(const grammar *g, const gstate *st, gstate *scratch, uint32_t *bits) {
  const gtrie *t = g->trie;
  size_t words = words_of(g->vocab);
  int64_t room = -1;
  if (!llm_gstate_string_room(g, st, &room)) {
    memset(bits, 0, words * sizeof *bits);
    return walk(g, &t->all, st, scratch, bits);
  }
  uint32_t count = 0;
  if (room == INT64_MAX) {
    memcpy(bits, t->plain_bits, words * sizeof *bits);
    count = t->nplain;
  } else {
    memset(bits, 0, words * sizeof *bits);
    for (; count < t->nplain && t->plain_cps[count] <= room; count++)
      bits[t->plain_ids[count] / 32] |= 1u << (t->plain_ids[count] % 32);
  }
  return count + walk(g, &t->rest, st, scratch, bits);
}

/* ---- the cache ---- */
/* The mask of m's state (without EOS) into m->bits, from the cache or a walk. */
static uint32_t state_mask(rx_llm_matcher *m) {
  grammar *g = m->g;
  size_t klen = llm_gstate_key(&m->st, m->key, sizeof m->key);
  uint64_t h = base_hash_bytes(m->key, klen);
  size_t words = words_of(g->vocab);
  pthread_mutex_lock(&g->lock);
  gcache *c = g->cache;
  for (uint32_t i = 0; i < c->used; i++) {
    gentry *e = &c->e[i];
    if (e->hash == h && e->klen == klen && !memcmp(e->key, m->key, klen)) {
      memcpy(m->bits, e->bits, words * sizeof *m->bits);
      uint32_t n = e->count;
      pthread_mutex_unlock(&g->lock);
      return n;
    }
  }
  pthread_mutex_unlock(&g->lock);
  uint32_t n = state_walk(g, &m->st, m->scratch, m->bits);
  pthread_mutex_lock(&g->lock);
  gentry *e = c->used < GCACHE_ENTRIES ? &c->e[c->used++] : &c->e[c->next++ % GCACHE_ENTRIES];
  free(e->key);
  if (!e->bits) e->bits = base_malloc(words * sizeof *e->bits);
  e->key = base_malloc(klen);
  memcpy(e->key, m->key, klen);
  e->klen = klen;
  e->hash = h;
  e->count = n;
  memcpy(e->bits, m->bits, words * sizeof *e->bits);
  pthread_mutex_unlock(&g->lock);
  return n;
}

/* ---- the public grammar ---- */
rx_status rx_llm_grammar_compile(const rx_tokenizer *tok, const char *schema, size_t len,
                                 rx_llm_grammar **out_grammar) {
  if (out_grammar) *out_grammar = NULL;
  if (!tok || !out_grammar || (!schema && len))
    return base_status_make(RX_ERR_INVALID, "rx_llm_grammar_compile: NULL argument");
  grammar *g = base_calloc(1, sizeof *g);
  base_arena_init(&g->arena);
  g->refs = 1;
  rx_status s = llm_grammar_build(g, schema, len);
  if (s) {
    base_arena_free(&g->arena);
    free(g);
    return s;
  }
  g->vocab = rx_tokenizer_vocab_size(tok);
  g->neos = rx_tokenizer_eos_ids(tok, &g->eos);
  g->trie = trie_build(tok, g->vocab);
  g->cache = base_calloc(1, sizeof *g->cache);
  pthread_mutex_init(&g->lock, NULL);
  *out_grammar = g;
  return NULL;
}

rx_llm_grammar *rx_llm_grammar_retain(rx_llm_grammar *g) {
  if (g) __atomic_add_fetch(&g->refs, 1, __ATOMIC_ACQ_REL);
  return g;
}

void rx_llm_grammar_free(rx_llm_grammar *g) {
  if (!g || __atomic_sub_fetch(&g->refs, 1, __ATOMIC_ACQ_REL) > 0) return;
  for (uint32_t i = 0; i < g->cache->used; i++) {
    free(g->cache->e[i].key);
    free(g->cache->e[i].bits);
  }
  free(g->cache);
  trie_free(g->trie);
  pthread_mutex_destroy(&g->lock);
  base_arena_free(&g->arena);
  free(g);
}

const char *rx_llm_grammar_token_bytes(const rx_llm_grammar *g, int32_t id, size_t *out_len) {
  if (out_len) *out_len = 0;
  if (!g || id < 0 || id >= g->vocab) return "";
  if (out_len) *out_len = g->trie->off[id + 1] - g->trie->off[id];
  return g->trie->bytes + g->trie->off[id];
}

/* ---- matchers ---- */
rx_status rx_llm_matcher_create(rx_llm_grammar *g, rx_llm_matcher **out_matcher) {
  if (out_matcher) *out_matcher = NULL;
  if (!g || !out_matcher)
    return base_status_make(RX_ERR_INVALID, "rx_llm_matcher_create: NULL argument");
  rx_llm_matcher *m = base_calloc(1, sizeof *m);
  m->g = rx_llm_grammar_retain(g);
  m->scratch = base_malloc(((size_t)g->trie->maxlen + 1) * sizeof *m->scratch);
  m->bits = base_malloc(words_of(g->vocab) * sizeof *m->bits);
  llm_gstate_init(g, &m->st);
  *out_matcher = m;
  return NULL;
}

rx_status rx_llm_matcher_clone(const rx_llm_matcher *m, rx_llm_matcher **out_matcher) {
  if (out_matcher) *out_matcher = NULL;
  if (!m) return base_status_make(RX_ERR_INVALID, "rx_llm_matcher_clone: NULL argument");
  RX_RETURN_IF_ERROR(rx_llm_matcher_create(m->g, out_matcher));
  (*out_matcher)->st = m->st;
  return NULL;
}

void rx_llm_matcher_free(rx_llm_matcher *m) {
  if (!m) return;
  rx_llm_grammar_free(m->g);
  free(m->scratch);
  free(m->bits);
  free(m);
}

void rx_llm_matcher_reset(rx_llm_matcher *m) {
  if (m) llm_gstate_init(m->g, &m->st);
}

bool rx_llm_matcher_is_accepting(const rx_llm_matcher *m) {
  return m && llm_gstate_accepting(m->g, &m->st);
}

bool rx_llm_matcher_accept_bytes(rx_llm_matcher *m, const char *bytes, size_t n) {
  if (!m || (!bytes && n)) return false;
  gstate *a = &m->scratch[0], *b = &m->scratch[m->g->trie->maxlen ? 1 : 0];
  gstate tmp;
  if (a == b) b = &tmp; /* a vocabulary without text: one scratch state */
  *a = m->st;
  for (size_t i = 0; i < n; i++) {
    llm_gstate_feed(m->g, a, (uint8_t)bytes[i], b);
    if (!b->n) return false;
    gstate *x = a;
    a = b;
    b = x;
  }
  m->st = *a;
  return true;
}

static bool is_eos(const grammar *g, int32_t id) {
  for (size_t i = 0; i < g->neos; i++)
    if (g->eos[i] == id) return true;
  return false;
}

rx_status rx_llm_matcher_fill_mask(rx_llm_matcher *m, uint32_t *bits, int32_t vocab,
                                   size_t *out_count) {
  if (out_count) *out_count = 0;
  if (!m || !bits || vocab < 0)
    return base_status_make(RX_ERR_INVALID, "rx_llm_matcher_fill_mask: NULL argument");
  size_t count = state_mask(m);
  size_t words = words_of(vocab), have = words_of(m->g->vocab);
  memset(bits, 0, words * sizeof *bits);
  memcpy(bits, m->bits, (words < have ? words : have) * sizeof *bits);
  if (vocab < m->g->vocab) { /* a smaller row: the ids past it are not there */
    count = 0;
    if (vocab % 32) bits[words - 1] &= (1u << (vocab % 32)) - 1;
    for (size_t w = 0; w < words; w++) count += (size_t)__builtin_popcount(bits[w]);
  }
  if (llm_gstate_accepting(m->g, &m->st))
    for (size_t i = 0; i < m->g->neos; i++)
      if (m->g->eos[i] < vocab && !(bits[m->g->eos[i] / 32] >> (m->g->eos[i] % 32) & 1)) {
        bits[m->g->eos[i] / 32] |= 1u << (m->g->eos[i] % 32);
        count++;
      }
  if (out_count) *out_count = count;
  return NULL;
}

rx_status rx_llm_matcher_accept_token(rx_llm_matcher *m, int32_t id) {
  if (!m) return base_status_make(RX_ERR_INVALID, "rx_llm_matcher_accept_token: NULL argument");
  if (is_eos(m->g, id) && llm_gstate_accepting(m->g, &m->st)) return NULL;
  size_t n = 0;
  const char *b = rx_llm_grammar_token_bytes(m->g, id, &n);
  if (!n || !rx_llm_matcher_accept_bytes(m, b, n))
    return base_status_make(RX_ERR_INVALID,
                            "structured output: token %d cannot follow the text so far", (int)id);
  return NULL;
}

/* ---- the generation loops' side (batch.c, model.c) ---- */
rx_status llm_grammar_mask_row(rx_llm_matcher *mt, const rx_llm_model *m, float *logits,
                               int32_t vocab, bool *out_end) {
  *out_end = false;
  uint32_t count = state_mask(mt);
  bool whole = llm_gstate_accepting(mt->g, &mt->st);
  int32_t have = mt->g->vocab;
  for (int32_t id = 0; id < vocab; id++) {
    bool ok = id < have && (mt->bits[id / 32] >> (id % 32) & 1);
    if (!ok && !(whole && rx_llm_model_is_eos(m, id))) logits[id] = -INFINITY;
  }
  if (!count && !whole)
    return base_status_make(RX_ERR_INVALID,
                            "structured output: no token of the vocabulary can continue the JSON "
                            "(the schema nests deeper than %d, or needs text the tokenizer cannot "
                            "spell)",
                            G_MAX_DEPTH - 2);
  *out_end = whole && !count;
  return NULL;
}

rx_status llm_grammar_accept_id(rx_llm_matcher *mt, const rx_llm_model *m, int32_t id) {
  if (rx_llm_model_is_eos(m, id)) return NULL;
  return rx_llm_matcher_accept_token(mt, id);
}
