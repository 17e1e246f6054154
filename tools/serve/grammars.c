/* tools/serve/grammars.c: relaxc serve's cache of compiled grammars (grammars.h): a few entries,
 * found by the schema's text, the least recently used replaced. Compiling runs outside the lock
 * (a 128k vocabulary takes a few hundred ms), so two requests with one new schema may both
 * compile it; the second keeps its own copy for itself and the cache keeps the first. */
#include "tools/serve/grammars.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"

typedef struct entry {
  char *key; /* the schema's text; NULL: json_object */
  size_t len;
  rx_llm_grammar *g; /* NULL: a free entry */
  uint64_t used;     /* when it was last used (a counter) */
} entry;

struct serve_grammars {
  const rx_tokenizer *tok;
  pthread_mutex_t lock;
  entry *e;
  size_t cap;
  uint64_t clock;
};

serve_grammars *serve_grammars_new(const rx_tokenizer *tok, size_t cap) {
  serve_grammars *c = calloc(1, sizeof *c);
  if (!c) return NULL;
  c->e = calloc(cap ? cap : 1, sizeof *c->e);
  if (!c->e) {
    free(c);
    return NULL;
  }
  c->tok = tok;
  c->cap = cap ? cap : 1;
  pthread_mutex_init(&c->lock, NULL);
  return c;
}

void serve_grammars_free(serve_grammars *c) {
  if (!c) return;
  for (size_t i = 0; i < c->cap; i++) {
    rx_llm_grammar_free(c->e[i].g);
    free(c->e[i].key);
  }
  pthread_mutex_destroy(&c->lock);
  free(c->e);
  free(c);
}

static entry *lookup(serve_grammars *c, const char *schema, size_t len) {
  for (size_t i = 0; i < c->cap; i++) {
    entry *e = &c->e[i];
    if (e->g && (schema ? e->key && e->len == len && !memcmp(e->key, schema, len) : !e->key))
      return e;
  }
  return NULL;
}

rx_status serve_grammars_get(serve_grammars *c, const char *schema, size_t len,
                             rx_llm_grammar **out) {
  *out = NULL;
  pthread_mutex_lock(&c->lock);
  entry *e = lookup(c, schema, len);
  if (e) {
    e->used = ++c->clock;
    *out = rx_llm_grammar_retain(e->g);
  }
  pthread_mutex_unlock(&c->lock);
  if (*out) return NULL;
  rx_llm_grammar *g = NULL;
  RX_RETURN_IF_ERROR(rx_llm_grammar_compile(c->tok, schema, len, &g));
  char *key = schema ? malloc(len + 1) : NULL;
  if (key) {
    memcpy(key, schema, len);
    key[len] = 0;
  }
  pthread_mutex_lock(&c->lock);
  if (!lookup(c, schema, len) && (key || !schema)) {
    entry *victim = &c->e[0];
    for (size_t i = 0; i < c->cap; i++)
      if (!c->e[i].g || c->e[i].used < victim->used) victim = &c->e[i];
    rx_llm_grammar_free(victim->g);
    free(victim->key);
    *victim = (entry){key, len, rx_llm_grammar_retain(g), ++c->clock};
    key = NULL;
  }
  pthread_mutex_unlock(&c->lock);
  free(key);
  *out = g;
  return NULL;
}
