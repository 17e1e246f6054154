/* runtime/llm/prefix_cache.c: the radix tree of token prefixes over shared KV pages
 * (prefix_cache.h). Each node below the root is one whole page: its RX_KV_PAGE token ids (the
 * edge label from its parent) and the page that holds their keys and values, given the tokens of
 * every node above it. Children are a list (a node rarely has more than a few). A node's page
 * holds one reference for the tree; sequences that start from it hold theirs. Since a sequence
 * that shares a node shares every node above it, a node's count is never above its parent's, so
 * the nodes held by the tree alone form whole subtrees and can all be evicted leaf first. Last use
 * is a counter, set along the whole path on every match, so a parent is never older than its
 * children and least recently used leaves go first. An insertion adds a sequence's pages only
 * below nodes that hold that sequence's own pages (where the tree has the same tokens in another
 * page, made by a request that prefilled them at the same time, it stops), which keeps the rule
 * on counts above. */
#include "runtime/llm/prefix_cache.h"

#include <stdlib.h>
#include <string.h>

typedef struct pc_node {
  int32_t tokens[RX_KV_PAGE];
  int32_t page;
  uint64_t used;                         /* the counter at its last match or insertion */
  struct pc_node *parent, *child, *next; /* next: the parent's next child */
} pc_node;

struct llm_prefix_cache {
  rx_kv_cache *kv;
  pc_node root; /* no page, no tokens */
  uint64_t clock;
  int64_t pages, evicted;
};

llm_prefix_cache *llm_prefix_new(rx_kv_cache *kv) {
  llm_prefix_cache *pc = calloc(1, sizeof *pc);
  if (pc) pc->kv = kv;
  return pc;
}

static pc_node *find_child(const pc_node *n, const int32_t *ids) {
  for (pc_node *c = n->child; c; c = c->next)
    if (!memcmp(c->tokens, ids, sizeof c->tokens)) return c;
  return NULL;
}

/* Unlinks leaf n from its parent, releases its page and frees it. */
static void drop_leaf(llm_prefix_cache *pc, pc_node *n) {
  pc_node **at = &n->parent->child;
  while (*at != n) at = &(*at)->next;
  *at = n->next;
  llm_kv_cache_page_release(pc->kv, n->page);
  pc->pages--;
  free(n);
}

static void free_below(llm_prefix_cache *pc, pc_node *n) {
  while (n->child) {
    pc_node *c = n->child;
    free_below(pc, c);
    drop_leaf(pc, c);
  }
}

void llm_prefix_free(llm_prefix_cache *pc) {
  if (!pc) return;
  free_below(pc, &pc->root);
  free(pc);
}

int64_t llm_prefix_match(llm_prefix_cache *pc, const int32_t *ids, size_t n, int32_t *out_pages,
                         int64_t max_pages, bool touch) {
  int64_t k = 0;
  uint64_t now = touch ? ++pc->clock : 0;
  pc_node *at = &pc->root;
  while (k < max_pages && (size_t)(k + 1) * RX_KV_PAGE <= n) {
    pc_node *c = find_child(at, ids + k * RX_KV_PAGE);
    if (!c) break;
    if (touch) c->used = now;
    out_pages[k++] = c->page;
    at = c;
  }
  return k;
}

void llm_prefix_insert(llm_prefix_cache *pc, const int32_t *ids, size_t n, const int32_t *pages) {
  uint64_t now = ++pc->clock;
  pc_node *at = &pc->root;
  for (size_t k = 0; (k + 1) * RX_KV_PAGE <= n; k++) {
    const int32_t *t = ids + k * RX_KV_PAGE;
    pc_node *c = find_child(at, t);
    if (!c) {
      if (!(c = calloc(1, sizeof *c))) return;
      memcpy(c->tokens, t, sizeof c->tokens);
      c->page = pages[k];
      llm_kv_cache_page_retain(pc->kv, c->page);
      c->parent = at;
      c->next = at->child;
      at->child = c;
      pc->pages++;
    } else if (c->page != pages[k]) {
      return; /* cached from another sequence's page: what follows is not below it */
    }
    c->used = now;
    at = c;
  }
}

static int64_t count_alone(const llm_prefix_cache *pc, const pc_node *n) {
  int64_t k = 0;
  for (const pc_node *c = n->child; c; c = c->next)
    k += (llm_kv_cache_page_refs(pc->kv, c->page) == 1) + count_alone(pc, c);
  return k;
}

int64_t llm_prefix_evictable(const llm_prefix_cache *pc) { return count_alone(pc, &pc->root); }

/* The least recently used leaf that only the tree holds, under n (NULL: none). */
static pc_node *oldest_leaf(const llm_prefix_cache *pc, pc_node *n, pc_node *best) {
  for (pc_node *c = n->child; c; c = c->next) {
    if (c->child)
      best = oldest_leaf(pc, c, best);
    else if (llm_kv_cache_page_refs(pc->kv, c->page) == 1 && (!best || c->used < best->used))
      best = c;
  }
  return best;
}

int64_t llm_prefix_evict(llm_prefix_cache *pc, int64_t want) {
  int64_t k = 0;
  pc_node *leaf;
  while (k < want && (leaf = oldest_leaf(pc, &pc->root, NULL))) {
    drop_leaf(pc, leaf);
    k++;
  }
  pc->evicted += k;
  return k;
}

int64_t llm_prefix_pages(const llm_prefix_cache *pc) { return pc->pages; }
int64_t llm_prefix_evicted(const llm_prefix_cache *pc) { return pc->evicted; }
