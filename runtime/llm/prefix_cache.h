/* runtime/llm/prefix_cache.h: the prefix cache of the continuous batcher (batch.c), internal to
 * the runtime: a radix tree of token prefixes whose nodes own whole KV pages (RX_KV_PAGE tokens
 * each, with their ids), so a prompt that begins like one seen before starts from those pages
 * (shared, reference-counted: kv_cache.h "shared pages") and prefills only the rest. Pages the
 * tree alone holds are evicted by least recent use when the cache needs pages. docs/llm.md
 * "Prefix caching". */
#ifndef RX_RUNTIME_LLM_PREFIX_CACHE_H
#define RX_RUNTIME_LLM_PREFIX_CACHE_H

#include "relaxc/llm.h"
#include "runtime/llm/kv_cache.h"

typedef struct llm_prefix_cache llm_prefix_cache;

/* The KV cache of a model (model.c; borrowed). */
rx_kv_cache *llm_model_kv(rx_llm_model *m);

/* An empty tree over kv's pages; NULL when host memory runs out. */
llm_prefix_cache *llm_prefix_new(rx_kv_cache *kv);
/* Releases every page the tree holds, then frees it (NULL is fine). */
void llm_prefix_free(llm_prefix_cache *pc);
/* The longest cached prefix of ids[0..n) in whole pages (at most max_pages): writes its pages to
 * out_pages and returns how many. touch: mark them used now (least recent use). */
int64_t llm_prefix_match(llm_prefix_cache *pc, const int32_t *ids, size_t n, int32_t *out_pages,
                         int64_t max_pages, bool touch);
/* Adds the full pages of ids[0..n) (pages[i] holds ids[16 i .. 16 i + 16), a sequence's pages)
 * to the tree: the pages of the nodes it lacks get one reference more (the tree's). Where the tree
 * holds the same tokens in another page, or host memory runs out, it stops there (the cache is
 * best effort). */
void llm_prefix_insert(llm_prefix_cache *pc, const int32_t *ids, size_t n, const int32_t *pages);
/* Pages only the tree holds (reference count 1): what eviction can free. */
int64_t llm_prefix_evictable(const llm_prefix_cache *pc);
/* Evicts up to want of those pages, least recently used leaves first; returns how many. */
int64_t llm_prefix_evict(llm_prefix_cache *pc, int64_t want);
/* Pages the tree holds now, and those evicted since it was made. */
int64_t llm_prefix_pages(const llm_prefix_cache *pc);
int64_t llm_prefix_evicted(const llm_prefix_cache *pc);

#endif
