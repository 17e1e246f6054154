/* runtime/llm/stop.c: stop strings (relaxc/llm.h "stop strings"): the generated text cut before
 * the first stop string, with the tail that could still begin one held back, so that a streamed
 * answer never shows part of a stop string. rx_llm_generate (model.c) and the batcher (batch.c)
 * run one per request between the detokenizer and on_token.
 *
 * Why the output never holds a stop string's byte: a byte at position i is handed out only once
 * the text from i on is no prefix of any stop string; were a stop string to start at i, the text
 * from i on would be a prefix of it at every push until the match completes. And the cut does not
 * depend on the split: each push looks for matches ending at each new position, in order, so the
 * first match found is the one that ends first in the whole text (the longest among those that
 * end there). */
#include "base/base.h"
#include "relaxc/llm.h"

#include <stdlib.h>
#include <string.h>

struct rx_stop_matcher {
  char *stop[RX_LLM_MAX_STOP];
  size_t len[RX_LLM_MAX_STOP];
  size_t n;
  char *held; /* text pushed and not handed out yet */
  size_t nheld, cap;
  char *out; /* what the last call hands out */
  size_t cap_out;
  bool stopped;
};

rx_status rx_stop_matcher_create(const char *const *stop, size_t n, rx_stop_matcher **out_matcher) {
  if (!out_matcher) return base_status_make(RX_ERR_INVALID, "rx_stop_matcher_create: NULL");
  *out_matcher = NULL;
  if (n > RX_LLM_MAX_STOP)
    return base_status_make(RX_ERR_INVALID, "stop: %zu stop strings, more than the %d allowed", n,
                            RX_LLM_MAX_STOP);
  if (n && !stop) return base_status_make(RX_ERR_INVALID, "stop: NULL strings");
  for (size_t i = 0; i < n; i++)
    if (!stop[i] || !stop[i][0])
      return base_status_make(RX_ERR_INVALID, "stop: string %zu is empty", i);
  rx_stop_matcher *m = base_calloc(1, sizeof *m);
  for (size_t i = 0; i < n; i++) {
    m->stop[i] = base_strdup(stop[i]);
    m->len[i] = strlen(stop[i]);
  }
  m->n = n;
  *out_matcher = m;
  return NULL;
}

void rx_stop_matcher_free(rx_stop_matcher *m) {
  if (!m) return;
  for (size_t i = 0; i < m->n; i++) free(m->stop[i]);
  free(m->held);
  free(m->out);
  free(m);
}

bool rx_stop_matcher_stopped(const rx_stop_matcher *m) { return m && m->stopped; }

/* Whether the held text's tail from `at` is a prefix of some stop string. */
static bool may_start(const rx_stop_matcher *m, size_t at) {
  size_t tail = m->nheld - at;
  for (size_t i = 0; i < m->n; i++)
    if (tail < m->len[i] && !memcmp(m->held + at, m->stop[i], tail)) return true;
  return false;
}

/* Hands out the held text's first n bytes (into m->out) and keeps the rest. */
static void hand_out(rx_stop_matcher *m, size_t n, const char **out_text, size_t *out_len) {
  if (n + 1 > m->cap_out) {
    m->cap_out = (n + 1) * 2;
    m->out = base_realloc(m->out, m->cap_out);
  }
  memcpy(m->out, m->held, n);
  m->out[n] = 0;
  memmove(m->held, m->held + n, m->nheld - n);
  m->nheld -= n;
  *out_text = m->out;
  *out_len = n;
}

bool rx_stop_matcher_push(rx_stop_matcher *m, const char *text, size_t len, const char **out_text,
                          size_t *out_len) {
  *out_text = "";
  *out_len = 0;
  if (m->stopped) return true;
  size_t old = m->nheld;
  if (m->nheld + len + 1 > m->cap) {
    m->cap = (m->nheld + len + 1) * 2;
    m->held = base_realloc(m->held, m->cap);
  }
  memcpy(m->held + m->nheld, text, len);
  m->nheld += len;
  /* a match ending at each new position, in order: the first found ends first */
  for (size_t end = old + 1; end <= m->nheld; end++) {
    size_t best = 0;
    for (size_t i = 0; i < m->n; i++)
      if (m->len[i] <= end && m->len[i] > best &&
          !memcmp(m->held + end - m->len[i], m->stop[i], m->len[i]))
        best = m->len[i];
    if (best) {
      m->stopped = true;
      hand_out(m, end - best, out_text, out_len);
      m->nheld = 0;
      return true;
    }
  }
  size_t at = 0; /* the first position whose tail may still begin a stop string */
  while (at < m->nheld && !may_start(m, at)) at++;
  hand_out(m, at, out_text, out_len);
  return false;
}

void rx_stop_matcher_flush(rx_stop_matcher *m, const char **out_text, size_t *out_len) {
  *out_text = "";
  *out_len = 0;
  if (m->stopped) return;
  hand_out(m, m->nheld, out_text, out_len);
}
