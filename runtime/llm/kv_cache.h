/* runtime/llm/kv_cache.h: the paged KV cache (docs/llm.md "The paged KV cache"), internal to the
 * runtime: the object, its builtins (reached by the host program's CALL_EXTERN through
 * runtime/externs.c) and what the generation loop asks of it. The public face is relaxc/llm.h.
 *
 * Pages hold RX_KV_PAGE tokens. Per layer the cache owns one device tensor
 *   pages: T[npages, 2, kv_heads, RX_KV_PAGE, head_dim]     ([0] keys, [1] values)
 * and per sequence the list of its pages in order, so a sequence grows by taking any free page
 * (no copy) and all sequences share the pool. Page 0 of every layer is never handed out: the
 * page table pads with it, so a kernel that reads a padded entry reads zeros, never another
 * sequence's keys. */
#ifndef RX_RUNTIME_LLM_KV_CACHE_H
#define RX_RUNTIME_LLM_KV_CACHE_H

#include "runtime/vm.h"

#define RX_KV_PAGE 16 /* tokens per page: MLC's and vLLM's default; the kernels' key tile */

typedef struct rx_kv_cache rx_kv_cache;

/* The object type of a cache held in a value (rx_rt_value_object). */
extern const rx_rt_object_type llm_kv_cache_type;

/* ---- builtins (vm_extern_fn) ---- */
/* rx_kv_create(layers, kv_heads, head_dim, dtype, capacity, max_seqs, max_seq_len: Prim(i64))
 *   -> Object: a cache of ceil(capacity / RX_KV_PAGE) pages (plus the padding page) on the
 *   artifact's device, zero-filled; dtype is an rx_dtype code (f32, f16 or bf16). */
rx_status llm_kv_builtin_create(const vm_extern_call *c, rx_rt_value *const *args, size_t nargs,
                                rx_rt_value **result);
/* rx_kv_extend(cache: Object, rows: Object or Shape([b]), count: Prim(i64)) -> (page_table
 *   i32[b, mp], kv_len i32[b], q_seq i32[n], q_pos i32[n], slot i32[n], last i32[b]): reserves
 *   the new tokens of b sequences (an unknown id starts an empty sequence) and returns the
 *   forward's aux tensors (docs/llm.md), the n new tokens packed sequence after sequence. rows is
 *   a KV batch (llm_kv_batch_set: the ids and each one's new tokens, which must sum to count = n;
 *   no limit on b but the cache's max_sequences) or a shape value of ids (count new tokens each,
 *   n = b * count; at most RX_RT_MAX_NDIM ids). Nothing changes when it fails. */
rx_status llm_kv_builtin_extend(const vm_extern_call *c, rx_rt_value *const *args, size_t nargs,
                                rx_rt_value **result);
/* rx_kv_pages(cache: Object, layer: Prim(i64)) -> T[npages, 2, kv_heads, 16, head_dim]: the
 *   layer's pages (the cache's tensor itself). */
rx_status llm_kv_builtin_pages(const vm_extern_call *c, rx_rt_value *const *args, size_t nargs,
                               rx_rt_value **result);

/* ---- batches: the sequences of one forward ----
 * A host-side object (a value of kind RX_RT_VALUE_OBJECT) that the runtime fills before each call
 * of prefill or decode and passes as their `batch` argument, which hands it to rx_kv_extend: the
 * sequence ids in the order their new tokens are packed in input_ids, and each one's count. */
typedef struct rx_kv_batch rx_kv_batch;
extern const rx_rt_object_type llm_kv_batch_type;
/* An empty batch, held by a new value. */
rx_status llm_kv_batch_new(rx_rt_value **out);
/* Sets v's batch to b sequences ids[i] of counts[i] new tokens (counts NULL: 1 each). */
rx_status llm_kv_batch_set(rx_rt_value *v, const int64_t *ids, const int64_t *counts, size_t b);

/* ---- for the generation loop and the public API ---- */
/* The cache held by v, or NULL. */
rx_kv_cache *llm_kv_cache_of(const rx_rt_value *v);
/* Tokens held for sequence id (0 when unknown). */
int64_t llm_kv_cache_length(const rx_kv_cache *c, int64_t id);
/* Frees the pages of sequence id and forgets it (nothing when unknown). */
void llm_kv_cache_remove(rx_kv_cache *c, int64_t id);
/* Shortens sequence id to len tokens, freeing the pages past them (len <= 0 forgets it; nothing
 * when it holds no more than len): undoes an extend whose forward is abandoned. */
void llm_kv_cache_truncate(rx_kv_cache *c, int64_t id, int64_t len);
/* Capacity in tokens, tokens free, and the longest sequence allowed. */
int64_t llm_kv_cache_capacity(const rx_kv_cache *c);
int64_t llm_kv_cache_free_tokens(const rx_kv_cache *c);
int64_t llm_kv_cache_max_seq_len(const rx_kv_cache *c);
/* Sequences held now, and the most the cache holds at once. */
int64_t llm_kv_cache_sequences(const rx_kv_cache *c);
int64_t llm_kv_cache_max_sequences(const rx_kv_cache *c);
/* Device bytes the cache holds per token (all layers, keys and values). */
int64_t llm_kv_cache_bytes_per_token(const rx_kv_cache *c);

/* ---- shared pages (prefix caching, runtime/llm/prefix_cache.c) ----
 * Every page has a reference count: each sequence listing it holds one, and so may other owners
 * (the prefix cache); the last release frees it. Sharing is copy-on-write by construction: only
 * whole pages are shared, and a sequence appends after its last token, so a forked sequence
 * writes into fresh pages and never into a shared one (a partly filled page is never shared: the
 * prefix is cut to whole pages). */
/* Starts sequence id (not held, id >= 0) holding the npages full pages given (each in use, now
 * one reference more), so its length is npages * RX_KV_PAGE; npages 0 starts it empty. Errors:
 * the id held already, no room for another sequence, a page not in use. */
rx_status llm_kv_cache_fork(rx_kv_cache *c, int64_t id, const int32_t *pages, int64_t npages);
/* Sequence id's pages in order (*out_pages borrowed until the cache next changes), and how many
 * (0 when unknown). */
int64_t llm_kv_cache_seq_pages(const rx_kv_cache *c, int64_t id, const int32_t **out_pages);
/* One reference more / less to a page in use (the last release frees it). */
void llm_kv_cache_page_retain(rx_kv_cache *c, int32_t page);
void llm_kv_cache_page_release(rx_kv_cache *c, int32_t page);
/* A page's count (0: free). */
int32_t llm_kv_cache_page_refs(const rx_kv_cache *c, int32_t page);
/* The sum of all pages' counts (0 exactly when every page is free). */
int64_t llm_kv_cache_refs_held(const rx_kv_cache *c);

/* ---- tensor parallelism: followers' caches in step with rank 0's (runtime/llm/model.c) ----
 * The page operations that happen outside the model's calls (the prefix cache's sharing: fork,
 * retain, release) are reported to the mirror, which rank 0 sets to broadcast them; every other
 * change comes from a prefill, decode or reset, which the followers run too. A fork is reported
 * once it is known to succeed. */
typedef enum { LLM_KV_OP_FORK, LLM_KV_OP_RETAIN, LLM_KV_OP_RELEASE } llm_kv_op;
typedef void (*llm_kv_mirror_fn)(void *ctx, llm_kv_op op, int64_t arg, const int32_t *pages,
                                 int64_t npages);
void llm_kv_cache_set_mirror(rx_kv_cache *c, llm_kv_mirror_fn fn, void *ctx);
/* A digest of the bookkeeping (every page's count, the free stack, each sequence's length and
 * pages): equal on two ranks exactly when their next extend takes the same pages (up to
 * collisions of a 64-bit FNV-1a). */
uint64_t llm_kv_cache_digest(const rx_kv_cache *c);

#endif
