/* runtime/llm/batch.c: continuous batching (relaxc/llm.h "continuous batching"): requests queued
 * first come first served, admitted while a sequence and their KV pages are free, the prompts of
 * those admitted in a step prefilled together (one packed rx_llm_prefill_batch, no padding), then
 * decoded together, one rx_llm_decode per step over every running sequence. Each request keeps what
 * rx_llm_generate's loop keeps (its history for the repetition penalty, its own sampler and
 * detokenizer) and ends where that loop ends.
 *
 * KV pages: a request reserves, at admission, the pages of every token it may still append
 * (min(prompt + max_tokens - 1, max_seq_len): the last token sampled is never appended). A request
 * is admitted when the cache's free pages, less what the running requests have reserved but not
 * taken yet, cover its reservation; so a decode never finds the cache full and nothing has to be
 * preempted. The price is admitting fewer requests than an optimistic policy would when most end
 * early at EOS.
 *
 * Prefix caching (prefix_cache.c): a request starts its sequence at admission from the longest
 * cached prefix of its prompt in whole pages (at most prompt - 1 tokens, so one token is always
 * prefilled for the first logits), and after each prefill the full pages of what it has prefilled
 * go into the tree. Pages only the tree holds count as free for admission and are evicted, least
 * recently used first, just before a forward needs them. A request whose prompt shares more
 * whole pages with a request still in prefill than the tree holds waits for that prefill (so n
 * identical prompts prefill once, the others start from its pages the next step).
 *
 * Chunked prefill: the prompt tokens prefilled per step are capped (prefill_chunk), oldest
 * request first; a request in prefill is not decoded, and samples its first token in the step its
 * last prompt token goes in. */
#include "relaxc/llm.h"
#include "relaxc/runtime.h"
#include "runtime/llm/grammar.h"
#include "runtime/llm/kv_cache.h"
#include "runtime/llm/prefix_cache.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct request {
  int64_t id;
  rx_llm_request_state state;
  rx_llm_generate_params p;
  int32_t *hist; /* the prompt, then the new tokens */
  size_t nhist, prompt, cap;
  rx_sampler *sampler;
  rx_detokenizer *detok;
  rx_stop_matcher *stop; /* params.stop, or NULL */
  int64_t reserve;       /* KV pages reserved from admission to the end */
  int64_t slot;          /* running: the sequence is seq_base + slot; else -1 */
  size_t done;           /* running: prompt tokens in its sequence (cached and prefilled) */
  size_t cached;         /* prompt tokens taken from the prefix cache */
  int32_t next;          /* running: the token the next decode appends */
  char *error;           /* FAILED: the message */

  rx_llm_matcher *matcher; /* structured output (p.grammar), or NULL */
} request;

struct rx_llm_batcher {
  rx_llm_model *m;
  int64_t max_batch, max_prefills, seq_base, max_seq_len;
  int32_t vocab;
  request **reqs; /* in the order submitted: the admission order */
  size_t nreqs, capreqs;
  request **slots; /* max_batch: the running request of each slot, or NULL */
  int64_t running, next_id;
  float *logits; /* max_batch rows of vocab */
  int64_t *seqs;
  int32_t *ids;
  request **rows;
  size_t *counts;  /* max_batch: the prompt lengths of a packed prefill */
  int32_t *packed; /* the prompts of a packed prefill, one after another */
  size_t cappacked;
  bool in_step;
  rx_llm_batcher_stats st;
  rx_kv_cache *kv;
  llm_prefix_cache *pc; /* NULL: prefix caching off */
  int32_t *match;       /* pages_of(max_seq_len): the pages of a prefix match */
  int64_t prefill_chunk;
};

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int64_t pages_of(int64_t tokens) { return (tokens + RX_KV_PAGE - 1) / RX_KV_PAGE; }

static rx_status oom(const char *what) {
  return base_status_make(RX_ERR_OUT_OF_MEMORY, "out of host memory: %s", what);
}

rx_status rx_llm_batcher_create(rx_llm_model *m, const rx_llm_batcher_options *o,
                                rx_llm_batcher **out_batcher) {
  if (!out_batcher || !m) return base_status_make(RX_ERR_INVALID, "rx_llm_batcher_create: NULL");
  *out_batcher = NULL;
  rx_llm_batcher_options d = {0};
  if (!o) o = &d;
  int64_t cap = rx_llm_model_max_batch(m), seqs = rx_llm_model_max_sequences(m);
  if (seqs < cap) cap = seqs;
  int64_t mb = o->max_batch > 0 && o->max_batch < cap ? o->max_batch : cap;
  if (o->max_batch < 0 || o->max_prefills < 0 || o->seq_base < 0 || o->prefill_chunk < 0 ||
      o->seq_base > INT64_MAX - 1 - mb)
    return base_status_make(RX_ERR_INVALID,
                            "rx_llm_batcher_create: max_batch %lld, max_prefills %lld, seq_base "
                            "%lld and prefill_chunk %lld must not be negative, and seq_base + "
                            "max_batch below INT64_MAX",
                            (long long)o->max_batch, (long long)o->max_prefills,
                            (long long)o->seq_base, (long long)o->prefill_chunk);
  rx_llm_batcher *b = calloc(1, sizeof *b);
  if (!b) return oom("a batcher");
  b->m = m;
  b->max_batch = mb;
  b->max_prefills = o->max_prefills;
  b->seq_base = o->seq_base;
  b->max_seq_len = rx_llm_model_max_seq_len(m);
  b->vocab = rx_llm_model_vocab_size(m);
  b->next_id = 1;
  b->slots = calloc((size_t)mb, sizeof *b->slots);
  b->logits = malloc((size_t)mb * (size_t)b->vocab * sizeof *b->logits);
  b->seqs = malloc((size_t)mb * sizeof *b->seqs);
  b->ids = malloc((size_t)mb * sizeof *b->ids);
  b->rows = malloc((size_t)mb * sizeof *b->rows);
  b->counts = malloc((size_t)mb * sizeof *b->counts);
  b->kv = llm_model_kv(m);
  b->prefill_chunk = o->prefill_chunk;
  bool pc_ok = true;
  if (o->prefix_cache) {
    b->pc = llm_prefix_new(b->kv);
    b->match = malloc((size_t)pages_of(b->max_seq_len) * sizeof *b->match);
    pc_ok = b->pc && b->match;
  }
  if (!b->slots || !b->logits || !b->seqs || !b->ids || !b->rows || !b->counts || !pc_ok) {
    rx_llm_batcher_free(b);
    return oom("a batcher's tables");
  }
  *out_batcher = b;
  return NULL;
}

static void drop_state(request *r) {
  rx_sampler_free(r->sampler);
  rx_detokenizer_free(r->detok);
  rx_stop_matcher_free(r->stop);
  rx_llm_matcher_free(r->matcher);
  r->sampler = NULL;
  r->detok = NULL;
  r->stop = NULL;
  r->matcher = NULL;
}

static void free_request(request *r) {
  if (!r) return;
  drop_state(r);
  free(r->hist);
  free(r->error);
  free(r);
}

/* Ends r in state: its sequence and pages are freed, its sampler and detokenizer dropped (what
 * the detokenizer holds goes to on_token first when r ended normally). */
static void finish(rx_llm_batcher *b, request *r, rx_llm_request_state state) {
  bool normal = state != RX_LLM_REQUEST_CANCELLED && state != RX_LLM_REQUEST_FAILED;
  if (normal && r->detok && r->p.on_token) {
    const char *text = NULL;
    size_t len = 0;
    rx_status s = rx_detokenizer_flush(r->detok, &text, &len);
    if (!s && r->stop) { /* the held text, less what a stop string cuts */
      bool cut = rx_stop_matcher_push(r->stop, text, len, &text, &len);
      if (cut && state != RX_LLM_REQUEST_EOS) state = RX_LLM_REQUEST_STOP_STRING;
      if (len) r->p.on_token(r->p.user, -1, text, len);
      rx_stop_matcher_flush(r->stop, &text, &len);
    }
    if (!s && len) r->p.on_token(r->p.user, -1, text, len);
    rx_status_free(s);
  }
  if (r->slot >= 0) {
    rx_llm_model_reset(b->m, b->seq_base + r->slot);
    b->slots[r->slot] = NULL;
    b->running--;
    r->slot = -1;
  }
  r->state = state;
  r->next = -1;
  drop_state(r);
}

/* Ends r with the error s (taken). */
static void fail(rx_llm_batcher *b, request *r, rx_status s) {
  const char *msg = s ? rx_status_message(s) : "out of host memory";
  size_t n = strlen(msg);
  free(r->error);
  r->error = malloc(n + 1);
  if (r->error) memcpy(r->error, msg, n + 1);
  rx_status_free(s);
  finish(b, r, RX_LLM_REQUEST_FAILED);
}

void rx_llm_batcher_free(rx_llm_batcher *b) {
  if (!b) return;
  for (size_t i = 0; i < b->nreqs; i++) {
    if (b->reqs[i]->slot >= 0) rx_llm_model_reset(b->m, b->seq_base + b->reqs[i]->slot);
    free_request(b->reqs[i]);
  }
  llm_prefix_free(b->pc); /* after the sequences: what they shared is the tree's alone now */
  free(b->match);
  free(b->reqs);
  free(b->slots);
  free(b->logits);
  free(b->seqs);
  free(b->ids);
  free(b->rows);
  free(b->counts);
  free(b->packed);
  free(b);
}

static rx_status check_request(const rx_llm_batcher *b, const int32_t *prompt, size_t count,
                               const rx_llm_generate_params *p, int64_t *out_reserve) {
  if (!prompt || !count || !p || p->max_tokens < 1)
    return base_status_make(RX_ERR_INVALID,
                            "rx_llm_batcher_submit: NULL, no prompt or max_tokens < 1");
  if ((int64_t)count > b->max_seq_len)
    return base_status_make(RX_ERR_INVALID,
                            "rx_llm_batcher_submit: a prompt of %zu tokens, more than the model's "
                            "maximum of %lld",
                            count, (long long)b->max_seq_len);
  for (size_t i = 0; i < count; i++)
    if (prompt[i] < 0 || prompt[i] >= b->vocab)
      return base_status_make(RX_ERR_INVALID,
                              "rx_llm_batcher_submit: token id %d at %zu is outside the vocabulary "
                              "(0..%d)",
                              (int)prompt[i], i, (int)b->vocab - 1);
  int64_t most =
      (int64_t)count + (p->max_tokens - 1 < b->max_seq_len ? p->max_tokens - 1 : b->max_seq_len);
  if (most > b->max_seq_len) most = b->max_seq_len;
  int64_t cap = rx_llm_model_kv_capacity(b->m);
  if (most > cap)
    return base_status_make(RX_ERR_INVALID,
                            "rx_llm_batcher_submit: the request may hold %lld tokens (a prompt of "
                            "%zu, max_tokens %lld, the model's max_seq_len %lld), more than the KV "
                            "cache's capacity of %lld tokens: it could never be admitted (lower "
                            "max_tokens or load the model with a larger capacity)",
                            (long long)most, count, (long long)p->max_tokens,
                            (long long)b->max_seq_len, (long long)cap);
  *out_reserve = pages_of(most);
  return NULL;
}

rx_status rx_llm_batcher_submit(rx_llm_batcher *b, const int32_t *prompt, size_t count,
                                const rx_llm_generate_params *p, int64_t *out_id) {
  if (out_id) *out_id = 0;
  if (!b || !out_id) return base_status_make(RX_ERR_INVALID, "rx_llm_batcher_submit: NULL");
  if (b->in_step)
    return base_status_make(RX_ERR_INVALID, "rx_llm_batcher_submit: called from a callback");
  int64_t reserve = 0;
  RX_RETURN_IF_ERROR(check_request(b, prompt, count, p, &reserve));
  if (b->nreqs == b->capreqs) {
    size_t nc = b->capreqs ? b->capreqs * 2 : 16;
    request **nr = realloc(b->reqs, nc * sizeof *nr);
    if (!nr) return oom("the request list");
    b->reqs = nr;
    b->capreqs = nc;
  }
  request *r = calloc(1, sizeof *r);
  if (!r) return oom("a request");
  r->p = *p;
  r->slot = -1;
  r->next = -1;
  r->reserve = reserve;
  r->cap = count + (p->max_tokens < 64 ? (size_t)p->max_tokens : 64);
  r->hist = malloc(r->cap * sizeof *r->hist);
  rx_status s = r->hist ? NULL : oom("a prompt");
  if (!s) s = rx_sampler_create(&p->sampling, &r->sampler);
  const rx_tokenizer *tok = rx_llm_model_tokenizer(b->m);
  if (!s && tok) s = rx_detokenizer_create(tok, RX_TOKENIZER_SKIP_SPECIAL, &r->detok);
  if (!s && p->nstop) s = rx_stop_matcher_create(p->stop, p->nstop, &r->stop);
  if (!s && (p->top_logprobs < 0 || p->top_logprobs > RX_LLM_MAX_TOP_LOGPROBS))
    s = base_status_make(RX_ERR_INVALID, "rx_llm_batcher_submit: top_logprobs %d is not in [0, %d]",
                         (int)p->top_logprobs, RX_LLM_MAX_TOP_LOGPROBS);
  if (!s && p->grammar) s = rx_llm_matcher_create(p->grammar, &r->matcher);
  if (s) {
    free_request(r);
    return s;
  }
  memcpy(r->hist, prompt, count * sizeof *prompt);
  r->nhist = r->prompt = count;
  r->id = b->next_id++;
  b->reqs[b->nreqs++] = r;
  *out_id = r->id;
  return NULL;
}

static bool push_hist(request *r, int32_t id) {
  if (r->nhist == r->cap) {
    size_t nc = r->cap * 2;
    int32_t *nh = realloc(r->hist, nc * sizeof *nh);
    if (!nh) return false;
    r->hist = nh;
    r->cap = nc;
  }
  r->hist[r->nhist++] = id;
  return true;
}

/* Samples r's next token from its logits row and ends r where rx_llm_generate's loop stops. */
static void take_token(rx_llm_batcher *b, request *r, float *logits) {
  int32_t id = -1;
  /* structured output: the grammar's mask first (-inf stays -inf through the penalties and the
   * bias, so the logprobs are those of the constrained distribution) */
  bool whole = false; /* the value is whole and only EOS may follow */
  rx_status s = r->matcher ? llm_grammar_mask_row(r->matcher, b->m, logits, b->vocab, &whole) : 0;
  if (!s && whole) {
    finish(b, r, RX_LLM_REQUEST_EOS);
    return;
  }
  rx_token_logprobs lp;
  if (!s)
    s = rx_sampler_sample_ex(r->sampler, logits, b->vocab, r->hist, r->nhist, r->prompt,
                             r->p.top_logprobs, r->p.on_token_info ? &lp : NULL, &id);
  if (!s && r->matcher) s = llm_grammar_accept_id(r->matcher, b->m, id);
  if (!s && !push_hist(r, id)) s = oom("a request's tokens");
  if (s) {
    fail(b, r, s);
    return;
  }
  b->st.new_tokens++;
  bool eos = rx_llm_model_is_eos(b->m, id);
  const char *text = NULL;
  size_t len = 0;
  if (!eos && r->detok && (s = rx_detokenizer_push(r->detok, id, &text, &len))) {
    fail(b, r, s);
    return;
  }
  bool cut = !eos && r->stop && rx_stop_matcher_push(r->stop, text ? text : "", len, &text, &len);
  if (r->p.on_token_info) r->p.on_token_info(r->p.user, &lp);
  bool more = !r->p.on_token || r->p.on_token(r->p.user, id, text ? text : "", len);
  int64_t made = (int64_t)(r->nhist - r->prompt);
  if (eos)
    finish(b, r, RX_LLM_REQUEST_EOS);
  else if (cut)
    finish(b, r, RX_LLM_REQUEST_STOP_STRING);
  else if (!more)
    finish(b, r, RX_LLM_REQUEST_STOPPED);
  else if (made >= r->p.max_tokens)
    finish(b, r, RX_LLM_REQUEST_LENGTH);
  else if (rx_llm_model_seq_len(b->m, b->seq_base + r->slot) >= b->max_seq_len)
    finish(b, r, RX_LLM_REQUEST_MAX_SEQ);
  else
    r->next = id;
}

/* Evicts cached pages until need pages are free (the reservations guarantee enough can be). */
static void make_room(rx_llm_batcher *b, int64_t need) {
  int64_t free_pages = rx_llm_model_kv_free_tokens(b->m) / RX_KV_PAGE;
  if (b->pc && free_pages < need) llm_prefix_evict(b->pc, need - free_pages);
}

/* Whether r may start now from the m cached pages b->match: a slot, a cache sequence and the
 * rest of its KV pages free (the prefix cache's pages that no request holds count as free, but
 * not those r itself would take from it). */
static bool fits(const rx_llm_batcher *b, const request *r, int64_t m) {
  if (b->running >= b->max_batch ||
      rx_llm_model_sequences(b->m) >= rx_llm_model_max_sequences(b->m))
    return false;
  int64_t owed = 0; /* pages the running requests reserved and have not taken yet */
  for (int64_t i = 0; i < b->max_batch; i++)
    if (b->slots[i])
      owed += b->slots[i]->reserve - pages_of(rx_llm_model_seq_len(b->m, b->seq_base + i));
  int64_t avail = rx_llm_model_kv_free_tokens(b->m) / RX_KV_PAGE - owed;
  if (b->pc) {
    avail += llm_prefix_evictable(b->pc);
    for (int64_t k = 0; k < m; k++) avail -= llm_kv_cache_page_refs(b->kv, b->match[k]) == 1;
  }
  return avail >= r->reserve - m;
}

/* Whether a request still in prefill shares more whole pages of r's prompt than the m cached:
 * then r waits for them rather than prefill them again. */
static bool waits_for_prefill(const rx_llm_batcher *b, const request *r, int64_t m) {
  size_t most = (r->prompt - 1) / RX_KV_PAGE; /* the pages r could take from the cache */
  for (int64_t i = 0; i < b->max_batch && (size_t)m < most; i++) {
    const request *q = b->slots[i];
    if (!q || q->done >= q->prompt) continue;
    size_t c = 0;
    while (
        c < most && (c + 1) * RX_KV_PAGE <= q->prompt &&
        !memcmp(r->hist + c * RX_KV_PAGE, q->hist + c * RX_KV_PAGE, RX_KV_PAGE * sizeof *r->hist))
      c++;
    if (c > (size_t)m) return true;
  }
  return false;
}

/* Gives r a free slot and its sequence, from the m cached pages b->match (its prefill comes
 * after, with the others in prefill). */
static void start(rx_llm_batcher *b, request *r, int64_t m) {
  int64_t slot = 0;
  while (b->slots[slot]) slot++;
  b->slots[slot] = r;
  b->running++;
  r->slot = slot;
  r->state = RX_LLM_REQUEST_RUNNING;
  int64_t seq = b->seq_base + slot;
  rx_llm_model_reset(b->m, seq); /* a sequence left by someone else would be extended */
  if (m) llm_prefix_match(b->pc, r->hist, (size_t)m * RX_KV_PAGE, b->match, m, true);
  rx_status s = llm_kv_cache_fork(b->kv, seq, b->match, m);
  if (s) {
    fail(b, r, base_status_annotate(s, "request %lld: admission", (long long)r->id));
    return;
  }
  r->done = r->cached = (size_t)m * RX_KV_PAGE;
  b->st.cached_tokens += (int64_t)r->cached;
  b->st.prefill_rows++;
}

/* r's sequence took count more prompt tokens (logits: the last one's): the full pages go into
 * the prefix cache, and r samples its first token when its whole prompt is in. */
static void prefilled(rx_llm_batcher *b, request *r, size_t count, float *logits) {
  r->done += count;
  b->st.prompt_tokens += (int64_t)count;
  if (b->pc) {
    const int32_t *pages = NULL;
    llm_kv_cache_seq_pages(b->kv, b->seq_base + r->slot, &pages);
    llm_prefix_insert(b->pc, r->hist, r->done, pages);
  }
  if (r->done == r->prompt) take_token(b, r, logits);
}

/* Prefills the k rows rows[0..k) alone, each (after a packed prefill of them failed: so that
 * only the requests at fault fail; the failed call appended nothing). */
static void prefill_each(rx_llm_batcher *b, int64_t k) {
  for (int64_t i = 0; i < k; i++) {
    request *r = b->rows[i];
    size_t count = b->counts[i];
    double t0 = now_ms();
    rx_status s = rx_llm_prefill(b->m, b->seq_base + r->slot, r->hist + r->done, count, b->logits);
    b->st.prefill_ms += now_ms() - t0;
    b->st.prefills++;
    if (s)
      fail(b, r, base_status_annotate(s, "request %lld: prefill", (long long)r->id));
    else
      prefilled(b, r, count, b->logits);
  }
}

/* The rows of this step's prefill: the running requests whose prompt is not all in, oldest
 * first, with at most prefill_chunk tokens in all (when chunked); their counts go to b->counts.
 * Returns how many, and the tokens and fresh pages they need. */
static int64_t plan_prefill(rx_llm_batcher *b, size_t *out_n, int64_t *out_pages) {
  size_t budget = b->prefill_chunk > 0 ? (size_t)b->prefill_chunk : SIZE_MAX;
  int64_t k = 0, pages = 0;
  size_t n = 0;
  for (size_t i = 0; i < b->nreqs && budget; i++) {
    request *r = b->reqs[i];
    if (r->state != RX_LLM_REQUEST_RUNNING || r->done >= r->prompt) continue;
    size_t count = r->prompt - r->done < budget ? r->prompt - r->done : budget;
    budget -= count;
    b->rows[k] = r;
    b->seqs[k] = b->seq_base + r->slot;
    b->counts[k++] = count;
    n += count;
    pages += pages_of((int64_t)(r->done + count)) - pages_of((int64_t)r->done);
  }
  *out_n = n;
  *out_pages = pages;
  return k;
}

/* One packed prefill of this step's rows (rx_llm_prefill_batch splits it by the artifact's token
 * bound), then the first token of each whose prompt is all in; returns the rows. */
static int64_t prefill_running(rx_llm_batcher *b) {
  size_t n = 0;
  int64_t pages = 0, k = plan_prefill(b, &n, &pages);
  if (!k) return 0;
  make_room(b, pages);
  if (n > b->cappacked) {
    int32_t *np = realloc(b->packed, n * sizeof *np);
    if (!np) { /* no room to pack them: one at a time */
      prefill_each(b, k);
      return k;
    }
    b->packed = np;
    b->cappacked = n;
  }
  size_t at = 0;
  for (int64_t i = 0; i < k; i++) {
    memcpy(b->packed + at, b->rows[i]->hist + b->rows[i]->done, b->counts[i] * sizeof *b->packed);
    at += b->counts[i];
  }
  double t0 = now_ms();
  rx_status s = rx_llm_prefill_batch(b->m, b->seqs, (size_t)k, b->packed, n, b->counts, b->logits);
  b->st.prefill_ms += now_ms() - t0;
  b->st.prefills++;
  if (s && k > 1) {
    rx_status_free(s);
    prefill_each(b, k);
  } else if (s) {
    fail(b, b->rows[0],
         base_status_annotate(s, "request %lld: prefill", (long long)b->rows[0]->id));
  } else {
    for (int64_t i = 0; i < k; i++)
      prefilled(b, b->rows[i], b->counts[i], b->logits + (size_t)i * (size_t)b->vocab);
  }
  return k;
}

/* Admits waiting requests in order while the oldest fits (each from its cached prefix); returns
 * how many. */
static int64_t admit_waiting(rx_llm_batcher *b) {
  int64_t n = 0, most = pages_of(b->max_seq_len);
  for (size_t i = 0; i < b->nreqs; i++) {
    request *r = b->reqs[i];
    if (r->state != RX_LLM_REQUEST_WAITING) continue;
    if (b->max_prefills && n >= b->max_prefills) break;
    int64_t m = 0;
    if (b->pc) {
      m = llm_prefix_match(b->pc, r->hist, r->prompt - 1, b->match, most, false);
      if (waits_for_prefill(b, r, m)) break;
    }
    if (!fits(b, r, m)) break;
    start(b, r, m);
    n++;
  }
  return n;
}

/* One rx_llm_decode over every running request; returns the rows. */
static int64_t decode_running(rx_llm_batcher *b) {
  int64_t n = 0;
  for (int64_t i = 0; i < b->max_batch; i++)
    if (b->slots[i] && b->slots[i]->next >= 0) {
      b->rows[n] = b->slots[i];
      b->seqs[n] = b->seq_base + i;
      b->ids[n++] = b->slots[i]->next;
    }
  if (!n) return 0;
  int64_t pages = 0; /* sequences that start a page */
  for (int64_t k = 0; k < n; k++) pages += rx_llm_model_seq_len(b->m, b->seqs[k]) % RX_KV_PAGE == 0;
  make_room(b, pages);
  double t0 = now_ms();
  rx_status s = rx_llm_decode(b->m, b->seqs, b->ids, (size_t)n, b->logits);
  b->st.decode_ms += now_ms() - t0;
  b->st.decodes++;
  b->st.decode_rows += n;
  if (n > b->st.max_rows) b->st.max_rows = n;
  for (int64_t k = 0; k < n; k++) {
    if (s) {
      rx_status e =
          base_status_make(rx_status_code_of(s), "request %lld: a decode of %lld sequences: %s",
                           (long long)b->rows[k]->id, (long long)n, rx_status_message(s));
      fail(b, b->rows[k], e);
    } else {
      take_token(b, b->rows[k], b->logits + (size_t)k * (size_t)b->vocab);
    }
  }
  rx_status_free(s);
  return n;
}

static size_t active(const rx_llm_batcher *b) {
  size_t n = 0;
  for (size_t i = 0; i < b->nreqs; i++) n += b->reqs[i]->state <= RX_LLM_REQUEST_RUNNING;
  return n;
}

rx_status rx_llm_batcher_step(rx_llm_batcher *b, size_t *out_active) {
  if (out_active) *out_active = 0;
  if (!b) return base_status_make(RX_ERR_INVALID, "rx_llm_batcher_step: NULL");
  if (b->in_step)
    return base_status_make(RX_ERR_INVALID, "rx_llm_batcher_step: called from a callback");
  b->in_step = true;
  int64_t work = admit_waiting(b);
  work += prefill_running(b);
  work += decode_running(b);
  b->in_step = false;
  if (work) b->st.steps++;
  if (out_active) *out_active = active(b);
  return NULL;
}

rx_status rx_llm_batcher_run(rx_llm_batcher *b) {
  size_t n = 1;
  while (n) {
    int64_t before = b ? b->st.steps : 0;
    RX_RETURN_IF_ERROR(rx_llm_batcher_step(b, &n));
    if (n && b->st.steps == before) /* nothing runs and the oldest waiting one cannot start */
      return base_status_make(RX_ERR_OUT_OF_MEMORY,
                              "rx_llm_batcher_run: %zu requests wait, and the oldest cannot start: "
                              "the KV cache has %lld tokens free and %lld of %lld sequences are "
                              "held by others",
                              n, (long long)rx_llm_model_kv_free_tokens(b->m),
                              (long long)rx_llm_model_sequences(b->m),
                              (long long)rx_llm_model_max_sequences(b->m));
  }
  return NULL;
}

static request *find(const rx_llm_batcher *b, int64_t id, size_t *at) {
  for (size_t i = 0; b && i < b->nreqs; i++)
    if (b->reqs[i]->id == id) {
      if (at) *at = i;
      return b->reqs[i];
    }
  return NULL;
}

static rx_status unknown(const char *fn, int64_t id) {
  return base_status_make(RX_ERR_INVALID, "%s: no request %lld", fn, (long long)id);
}

rx_status rx_llm_batcher_cancel(rx_llm_batcher *b, int64_t id) {
  if (b && b->in_step)
    return base_status_make(RX_ERR_INVALID, "rx_llm_batcher_cancel: called from a callback");
  request *r = find(b, id, NULL);
  if (!r) return unknown("rx_llm_batcher_cancel", id);
  if (r->state <= RX_LLM_REQUEST_RUNNING) finish(b, r, RX_LLM_REQUEST_CANCELLED);
  return NULL;
}

rx_status rx_llm_batcher_poll(const rx_llm_batcher *b, int64_t id, rx_llm_request_info *out_info) {
  if (!out_info) return base_status_make(RX_ERR_INVALID, "rx_llm_batcher_poll: NULL");
  memset(out_info, 0, sizeof *out_info);
  const request *r = find(b, id, NULL);
  if (!r) return unknown("rx_llm_batcher_poll", id);
  out_info->state = r->state;
  out_info->ids = r->hist + r->prompt;
  out_info->count = r->nhist - r->prompt;
  out_info->prompt_tokens = r->prompt;
  out_info->cached_tokens = r->cached;
  out_info->error =
      r->state == RX_LLM_REQUEST_FAILED ? (r->error ? r->error : "out of memory") : NULL;
  return NULL;
}

rx_status rx_llm_batcher_release(rx_llm_batcher *b, int64_t id) {
  if (b && b->in_step)
    return base_status_make(RX_ERR_INVALID, "rx_llm_batcher_release: called from a callback");
  size_t at = 0;
  request *r = find(b, id, &at);
  if (!r) return unknown("rx_llm_batcher_release", id);
  if (r->state <= RX_LLM_REQUEST_RUNNING) finish(b, r, RX_LLM_REQUEST_CANCELLED);
  free_request(r);
  memmove(b->reqs + at, b->reqs + at + 1, (b->nreqs - at - 1) * sizeof *b->reqs);
  b->nreqs--;
  return NULL;
}

rx_llm_batcher_stats rx_llm_batcher_get_stats(const rx_llm_batcher *b) {
  rx_llm_batcher_stats st = {0};
  if (!b) return st;
  st = b->st;
  for (size_t i = 0; i < b->nreqs; i++) {
    rx_llm_request_state s = b->reqs[i]->state;
    if (s == RX_LLM_REQUEST_WAITING)
      st.waiting++;
    else if (s == RX_LLM_REQUEST_RUNNING)
      st.running++;
    else
      st.finished++;
  }
  if (b->pc) {
    st.pages_cached = llm_prefix_pages(b->pc);
    st.pages_evicted = llm_prefix_evicted(b->pc);
  }
  return st;
}

int64_t rx_llm_batcher_clear_cache(rx_llm_batcher *b) {
  if (!b || !b->pc || b->in_step) return 0;
  return llm_prefix_evict(b->pc, INT64_MAX);
}
