/* runtime/llm/tok_bpe.c: the tokenizer's tables and its BPE model, merge for merge as the
 * tokenizers library's models/bpe (word.rs: merge_all): a piece starts as one symbol per character
 * (or per byte token when the character is not in the vocab and byte_fallback is on, or <unk>),
 * then the pair of lowest merge rank, leftmost on ties, is merged until no pair has a merge. */
#include <stdlib.h>
#include <string.h>

#include "runtime/llm/tokenizer.h"
#include "runtime/llm/unicode.h"

/* ---- string -> id ---- */
static void map_grow(tok_map *m) {
  size_t cap = m->cap ? m->cap * 2 : 64;
  tok_text *keys = base_calloc(cap, sizeof *keys);
  int32_t *vals = base_calloc(cap, sizeof *vals);
  for (size_t i = 0; i < m->cap; i++) {
    if (!m->keys[i].s) continue;
    size_t h = (size_t)base_hash_bytes(m->keys[i].s, m->keys[i].n) & (cap - 1);
    while (keys[h].s) h = (h + 1) & (cap - 1);
    keys[h] = m->keys[i];
    vals[h] = m->vals[i];
  }
  free(m->keys);
  free(m->vals);
  m->keys = keys;
  m->vals = vals;
  m->cap = cap;
}

static size_t map_slot(const tok_map *m, const char *s, size_t n) {
  size_t h = (size_t)base_hash_bytes(s, n) & (m->cap - 1);
  while (m->keys[h].s && (m->keys[h].n != n || memcmp(m->keys[h].s, s, n) != 0))
    h = (h + 1) & (m->cap - 1);
  return h;
}

int32_t tok_map_add(tok_map *m, tok_text key, int32_t val) {
  RX_ASSERT(key.s);
  if (2 * (m->len + 1) > m->cap) map_grow(m); /* load at most 1/2 */
  size_t h = map_slot(m, key.s, key.n);
  if (m->keys[h].s) return m->vals[h];
  m->keys[h] = key;
  m->vals[h] = val;
  m->len++;
  return -1;
}

int32_t tok_map_get(const tok_map *m, const char *s, size_t n) {
  if (!m->cap) return -1;
  size_t h = map_slot(m, s, n);
  return m->keys[h].s ? m->vals[h] : -1;
}

void tok_map_free(tok_map *m) {
  free(m->keys);
  free(m->vals);
  memset(m, 0, sizeof *m);
}

/* ---- (left, right) -> merge ---- */
static uint64_t pair_key(int32_t left, int32_t right) {
  return ((uint64_t)(uint32_t)left << 32 | (uint32_t)right) + 1; /* + 1: never 0 (free) */
}

static size_t merges_slot(const tok_merges *m, uint64_t key) {
  size_t h = (size_t)rx_hash_mix(0, key) & (m->cap - 1);
  while (m->keys[h] && m->keys[h] != key) h = (h + 1) & (m->cap - 1);
  return h;
}

static void merges_grow(tok_merges *m) {
  tok_merges g = {base_calloc(m->cap ? m->cap * 2 : 64, sizeof(uint64_t)), NULL, NULL,
                  m->cap ? m->cap * 2 : 64, m->len};
  g.ranks = base_calloc(g.cap, sizeof *g.ranks);
  g.ids = base_calloc(g.cap, sizeof *g.ids);
  for (size_t i = 0; i < m->cap; i++) {
    if (!m->keys[i]) continue;
    size_t h = merges_slot(&g, m->keys[i]);
    g.keys[h] = m->keys[i];
    g.ranks[h] = m->ranks[i];
    g.ids[h] = m->ids[i];
  }
  tok_merges_free(m);
  *m = g;
}

void tok_merges_put(tok_merges *m, int32_t left, int32_t right, uint32_t rank, int32_t id) {
  if (2 * (m->len + 1) > m->cap) merges_grow(m);
  uint64_t key = pair_key(left, right);
  size_t h = merges_slot(m, key);
  if (!m->keys[h]) m->len++;
  m->keys[h] = key; /* a pair listed twice keeps its last rank, as the library's map does */
  m->ranks[h] = rank;
  m->ids[h] = id;
}

bool tok_merges_get(const tok_merges *m, int32_t left, int32_t right, uint32_t *rank, int32_t *id) {
  if (!m->cap) return false;
  size_t h = merges_slot(m, pair_key(left, right));
  if (!m->keys[h]) return false;
  *rank = m->ranks[h];
  *id = m->ids[h];
  return true;
}

void tok_merges_free(tok_merges *m) {
  free(m->keys);
  free(m->ranks);
  free(m->ids);
  memset(m, 0, sizeof *m);
}

/* ---- a word's symbols and the merge queue ---- */
typedef struct sym {
  int32_t id;
  long prev, next; /* neighbours alive, -1 at the ends */
  size_t len;      /* bytes covered; 0 once merged into its left neighbour */
} sym;
typedef RX_VEC(sym) sym_vec;

typedef struct merge {
  uint32_t rank;
  size_t pos; /* the left symbol */
  int32_t id;
} merge;
typedef RX_VEC(merge) merge_heap;

static bool before(merge a, merge b) { /* the queue pops the lowest rank, then leftmost */
  return a.rank != b.rank ? a.rank < b.rank : a.pos < b.pos;
}

static void heap_push(merge_heap *h, merge m) {
  RX_VEC_PUSH(h, m);
  for (size_t i = h->len - 1; i > 0;) {
    size_t up = (i - 1) / 2;
    if (!before(h->data[i], h->data[up])) break;
    merge tmp = h->data[i];
    h->data[i] = h->data[up];
    h->data[up] = tmp;
    i = up;
  }
}

static merge heap_pop(merge_heap *h) {
  merge top = h->data[0];
  h->data[0] = h->data[--h->len];
  for (size_t i = 0;;) {
    size_t l = 2 * i + 1, r = l + 1, best = i;
    if (l < h->len && before(h->data[l], h->data[best])) best = l;
    if (r < h->len && before(h->data[r], h->data[best])) best = r;
    if (best == i) break;
    merge tmp = h->data[i];
    h->data[i] = h->data[best];
    h->data[best] = tmp;
    i = best;
  }
  return top;
}

static void add_sym(sym_vec *w, int32_t id, size_t len) {
  long at = (long)w->len;
  sym s = {id, at - 1, -1, len};
  if (at > 0) w->data[at - 1].next = at;
  RX_VEC_PUSH(w, s);
}

/* The word's initial symbols (merge_word): a character in the vocab is its own symbol; one that
 * is not becomes its byte tokens (byte_fallback, when all exist), else <unk> (fused with a
 * neighbouring <unk> when fuse_unk), else nothing. As in the library, an <unk> waiting to be
 * added is not flushed before byte tokens. */
static void initial_symbols(const rx_tokenizer *t, const char *s, size_t n, sym_vec *w) {
  long unk_len = -1; /* bytes of the <unk> waiting to be added; -1: none */
  for (size_t i = 0; i < n;) {
    size_t start = i;
    uint32_t cp = uc_next(s, &i);
    (void)cp;
    size_t len = i - start;
    int32_t id = tok_map_get(&t->vocab, s + start, len);
    if (id >= 0) {
      if (unk_len >= 0) add_sym(w, t->unk, (size_t)unk_len);
      unk_len = -1;
      add_sym(w, id, len);
      continue;
    }
    if (t->byte_fallback) {
      bool all = true;
      for (size_t k = start; k < i; k++) all = all && t->byte_ids[(uint8_t)s[k]] >= 0;
      if (all) {
        for (size_t k = start; k < i; k++) add_sym(w, t->byte_ids[(uint8_t)s[k]], 1);
        continue;
      }
    }
    if (t->unk < 0) continue;
    if (unk_len >= 0 && t->fuse_unk) {
      unk_len += (long)len;
      continue;
    }
    if (unk_len >= 0) add_sym(w, t->unk, (size_t)unk_len);
    unk_len = (long)len;
  }
  if (unk_len >= 0) add_sym(w, t->unk, (size_t)unk_len);
}

static void queue_pair(const rx_tokenizer *t, const sym_vec *w, merge_heap *q, size_t left) {
  const sym *a = &w->data[left];
  if (a->next < 0) return;
  merge m = {0, left, 0};
  if (tok_merges_get(&t->merges, a->id, w->data[a->next].id, &m.rank, &m.id)) heap_push(q, m);
}

/* merge_all of the library's word.rs, with the same stale-entry test */
static void merge_all(const rx_tokenizer *t, sym_vec *w) {
  merge_heap q = {0};
  for (size_t i = 0; i + 1 < w->len; i++) queue_pair(t, w, &q, i);
  while (q.len) {
    merge top = heap_pop(&q);
    sym *a = &w->data[top.pos];
    if (a->len == 0 || a->next < 0) continue;
    sym right = w->data[a->next];
    uint32_t rank;
    int32_t id;
    if (!tok_merges_get(&t->merges, a->id, right.id, &rank, &id) || id != top.id) continue;
    w->data[a->next].len = 0;
    a->id = top.id;
    a->len += right.len;
    a->next = right.next;
    if (right.next >= 0) w->data[right.next].prev = (long)top.pos;
    if (a->prev >= 0) queue_pair(t, w, &q, (size_t)a->prev);
    queue_pair(t, w, &q, top.pos);
  }
  free(q.data);
}

void tok_bpe(const rx_tokenizer *t, const char *s, size_t n, tok_ids *out) {
  if (t->ignore_merges) { /* a whole piece in the vocab is one token */
    int32_t id = tok_map_get(&t->vocab, s, n);
    if (id >= 0) {
      RX_VEC_PUSH(out, id);
      return;
    }
  }
  sym_vec w = {0};
  initial_symbols(t, s, n, &w);
  merge_all(t, &w);
  for (long i = w.len ? 0 : -1; i >= 0; i = w.data[i].next) RX_VEC_PUSH(out, w.data[i].id);
  free(w.data);
}
