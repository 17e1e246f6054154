/* The OpenAI API's generation controls in the runtime, without a model (relaxc/llm.h): stop
 * strings (rx_stop_matcher: 1,000 random streams, each over random splits of a random text into
 * pieces and random stop sets, checked against a direct cut of the whole text: no stop string's
 * byte ever handed out, the output equal to the cut), and the sampler's presence and frequency
 * penalties, logit_bias and log-probabilities against a direct reference written from OpenAI's
 * definitions. test_serve and tests/serve/client_api.py check the same through the server. */
#include "check.h"
#include "relaxc/llm.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static uint32_t rnd(uint32_t n) { /* a test-local generator, uniform in [0, n) */
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return (uint32_t)((rng >> 11) % n);
}

/* ---- stop strings ---- */

/* The reference cut: the first end position at which a stop string ends (the longest of those
 * ending there); returns the length of the text before it, or len when none occurs. */
static size_t reference_cut(const char *t, size_t len, char stops[][24], size_t n, bool *found) {
  *found = false;
  for (size_t end = 1; end <= len; end++) {
    size_t best = 0;
    for (size_t i = 0; i < n; i++) {
      size_t l = strlen(stops[i]);
      if (l <= end && l > best && !memcmp(t + end - l, stops[i], l)) best = l;
    }
    if (best) {
      *found = true;
      return end - best;
    }
  }
  return len;
}

/* Characters of 1 to 4 bytes, so that stop strings and pieces straddle them. */
static const char *const ALPHABET[] = {
    "a", "b", " ", "\xc3\xa9", "\xe2\x82\xac", "\xf0\x9f\x98\x80"};

static void one_stream(int k) {
  char text[400], stops[RX_LLM_MAX_STOP][24];
  size_t len = 0, nchars = 1 + rnd(60);
  for (size_t i = 0; i < nchars; i++) {
    const char *c = ALPHABET[rnd(sizeof ALPHABET / sizeof *ALPHABET)];
    memcpy(text + len, c, strlen(c));
    len += strlen(c);
  }
  size_t n = 1 + rnd(RX_LLM_MAX_STOP);
  for (size_t i = 0; i < n; i++) {
    uint32_t kind = rnd(4);
    size_t l = 1 + rnd(6);
    if (kind == 0 && i > 0 && strlen(stops[i - 1]) > 1) { /* a prefix of the one before */
      l = 1 + rnd((uint32_t)strlen(stops[i - 1]) - 1);
      memcpy(stops[i], stops[i - 1], l);
    } else if (kind <= 2 && l <= len) { /* taken from the text at any byte (mid-character too) */
      memcpy(stops[i], text + rnd((uint32_t)(len - l + 1)), l);
    } else { /* likely absent */
      for (size_t j = 0; j < l; j++) stops[i][j] = "abxyz"[rnd(5)];
    }
    stops[i][l] = 0;
  }
  const char *ptrs[RX_LLM_MAX_STOP];
  for (size_t i = 0; i < n; i++) ptrs[i] = stops[i];
  bool found = false;
  size_t want = reference_cut(text, len, stops, n, &found);
  rx_stop_matcher *m = NULL;
  CHECK_OK(rx_stop_matcher_create(ptrs, n, &m));
  if (!m) return;
  char out[400];
  size_t nout = 0, at = 0;
  bool stopped = false, leaked = false;
  while (at < len) { /* pieces of 0 to 7 bytes: tokens, any split */
    size_t piece = rnd(8);
    if (piece > len - at) piece = len - at;
    const char *t;
    size_t tl;
    bool cut = rx_stop_matcher_push(m, text + at, piece, &t, &tl);
    at += piece;
    if (nout + tl > want || memcmp(text + nout, t, tl)) leaked = true;
    memcpy(out + nout, t, tl);
    nout += tl;
    stopped = stopped || cut;
    if (cut) break;
  }
  if (!stopped) {
    const char *t;
    size_t tl;
    rx_stop_matcher_flush(m, &t, &tl);
    if (nout + tl > want || memcmp(text + nout, t, tl)) leaked = true;
    memcpy(out + nout, t, tl);
    nout += tl;
  }
  CHECK_MSG(!leaked && nout == want && stopped == found && stopped == rx_stop_matcher_stopped(m),
            "stream %d: %zu bytes out, %zu wanted, stopped %d, found %d, leaked %d (text '%.*s', "
            "%zu stops, first '%s')",
            k, nout, want, stopped, found, leaked, (int)len, text, n, stops[0]);
  rx_stop_matcher_free(m);
}

static void stop_strings(void) {
  for (int k = 0; k < 1000; k++) one_stream(k);
  /* fixed cases: the first to end wins, the longest of those ending together */
  const char *two[] = {"abcd", "bc"}, *nest[] = {"c", "bc"};
  rx_stop_matcher *m = NULL;
  const char *t;
  size_t tl;
  CHECK_OK(rx_stop_matcher_create(two, 2, &m));
  CHECK(rx_stop_matcher_push(m, "xabcd", 5, &t, &tl) && tl == 2 && !memcmp(t, "xa", 2));
  rx_stop_matcher_free(m);
  CHECK_OK(rx_stop_matcher_create(nest, 2, &m));
  CHECK(!rx_stop_matcher_push(m, "xb", 2, &t, &tl) && tl == 1 && !memcmp(t, "x", 1));
  CHECK(rx_stop_matcher_push(m, "c", 1, &t, &tl) && tl == 0);
  rx_stop_matcher_free(m);
  /* refusals */
  const char *five[] = {"a", "b", "c", "d", "e"}, *empty[] = {"a", ""};
  CHECK_ERR(rx_stop_matcher_create(five, 5, &m), RX_ERR_INVALID, "more than the 4 allowed");
  CHECK_ERR(rx_stop_matcher_create(empty, 2, &m), RX_ERR_INVALID, "string 1 is empty");
}

/* ---- the sampler: penalties, logit_bias, logprobs ---- */

enum { V = 37, PROMPT = 9, GEN = 23 };

/* OpenAI's definition, directly: l - f * count - p * (count > 0) + bias, counts over the
 * generated ids only. */
static void reference_logits(const float *logits, const int32_t *hist, float pres, float freq,
                             const rx_logit_bias *b, size_t nb, double *out) {
  int count[V] = {0};
  for (int i = PROMPT; i < PROMPT + GEN; i++) count[hist[i]]++;
  for (int i = 0; i < V; i++) out[i] = logits[i] - freq * count[i] - pres * (count[i] > 0);
  for (int i = 0; i < V; i++) {
    int last = -1; /* the last bias entry of id i counts */
    for (size_t j = 0; j < nb; j++)
      if (b[j].id == i) last = (int)j;
    if (last >= 0) out[i] += b[last].bias;
  }
}

static void penalties_and_logprobs(void) {
  for (int k = 0; k < 200; k++) {
    float logits[V], adjusted[V];
    int32_t hist[PROMPT + GEN];
    for (int i = 0; i < V; i++) logits[i] = (float)((int)rnd(33) - 16) * 0.25f; /* exact sums */
    for (int i = 0; i < PROMPT + GEN; i++) hist[i] = (int32_t)rnd(V / 3);       /* repeats */
    rx_logit_bias b[4];
    size_t nb = rnd(5);
    for (size_t j = 0; j < nb; j++)
      b[j] = (rx_logit_bias){(int32_t)rnd(V), (float)((int)rnd(9) - 4)};
    float pres = (float)((int)rnd(9) - 4) * 0.5f, freq = (float)((int)rnd(9) - 4) * 0.5f;
    double ref[V];
    reference_logits(logits, hist, pres, freq, b, nb, ref);
    for (int i = 0; i < V; i++) adjusted[i] = (float)ref[i];
    double max = -INFINITY, sum = 0;
    int32_t best = 0;
    for (int i = 0; i < V; i++) {
      if (ref[i] > max) max = ref[i];
      if (ref[i] > ref[best]) best = i;
    }
    for (int i = 0; i < V; i++) sum += exp(ref[i] - max);
    double lse = max + log(sum);
    float temp = k % 2 ? 0 : 0.7f;
    rx_sampler_params p = {.temperature = temp,
                           .top_k = 0,
                           .top_p = 1,
                           .repetition_penalty = 1,
                           .seed = (uint64_t)k,
                           .presence_penalty = pres,
                           .frequency_penalty = freq,
                           .biases = b,
                           .nbiases = nb};
    rx_sampler_params plain = p;
    plain.presence_penalty = plain.frequency_penalty = 0;
    plain.nbiases = 0;
    rx_sampler *s = NULL, *r = NULL;
    CHECK_OK(rx_sampler_create(&p, &s));
    CHECK_OK(rx_sampler_create(&plain, &r));
    if (!s || !r) return;
    rx_token_logprobs lp;
    int32_t id = -1, rid = -2;
    int32_t ntop = k % 4 == 2 ? 0 : (int32_t)rnd(RX_LLM_MAX_TOP_LOGPROBS + 1); /* 0 too */
    CHECK_OK(rx_sampler_sample_ex(s, logits, V, hist, PROMPT + GEN, PROMPT, ntop, &lp, &id));
    /* the same draw as a plain sampler on the reference's logits */
    CHECK_OK(rx_sampler_sample_ex(r, adjusted, V, hist, PROMPT + GEN, PROMPT, 0, NULL, &rid));
    CHECK_MSG(id == rid, "case %d: %d, the reference draws %d", k, (int)id, (int)rid);
    if (temp == 0) CHECK_MSG(id == best, "case %d: greedy %d, argmax %d", k, (int)id, (int)best);
    CHECK_MSG(lp.id == id && fabs(lp.logprob - (ref[id] - lse)) < 1e-5,
              "case %d: logprob %g of %d, reference %g", k, (double)lp.logprob, (int)lp.id,
              ref[id] - lse);
    CHECK_MSG(lp.ntop == (ntop < V ? ntop : V), "case %d: %d top", k, (int)lp.ntop);
    bool sorted = true;
    for (int32_t t = 0; t < lp.ntop; t++) {
      int32_t tid = lp.top_ids[t];
      int rank = 0; /* ids ranking before tid in the reference: by value, then by id */
      for (int i = 0; i < V; i++) rank += ref[i] > ref[tid] || (ref[i] == ref[tid] && i < tid);
      sorted = sorted && rank == t && fabs(lp.top_logprobs[t] - (ref[tid] - lse)) < 1e-5;
    }
    CHECK_MSG(sorted, "case %d: the top list is not the reference's order or values", k);
    rx_sampler_free(s);
    rx_sampler_free(r);
  }
}

static void refusals(void) {
  float logits[4] = {0, 1, 2, 3};
  rx_logit_bias far = {4, 1}, big = {0, 101};
  rx_sampler_params p = {.temperature = 0, .top_p = 1, .repetition_penalty = 1};
  rx_sampler *s = NULL;
  int32_t id;
  p.biases = &far;
  p.nbiases = 1;
  CHECK_OK(rx_sampler_create(&p, &s));
  CHECK_ERR(rx_sampler_sample_ex(s, logits, 4, NULL, 0, 0, 0, NULL, &id), RX_ERR_INVALID,
            "outside the vocabulary of 4");
  rx_sampler_free(s);
  p.biases = &big;
  CHECK_ERR(rx_sampler_create(&p, &s), RX_ERR_INVALID, "in [-100, 100]");
  p.nbiases = 0;
  p.presence_penalty = 2.5f;
  CHECK_ERR(rx_sampler_create(&p, &s), RX_ERR_INVALID, "must be in [-2, 2]");
  /* -100 bans a token and +100 forces one, as OpenAI describes */
  rx_logit_bias ban[2] = {{3, -100}, {0, 100}};
  p.presence_penalty = 0;
  p.biases = ban;
  p.nbiases = 2;
  CHECK_OK(rx_sampler_create(&p, &s));
  CHECK_OK(rx_sampler_sample_ex(s, logits, 4, NULL, 0, 0, 0, NULL, &id));
  CHECK_INT_EQ(id, 0);
  rx_sampler_free(s);
}

int main(void) {
  stop_strings();
  penalties_and_logprobs();
  refusals();
  return check_finish("test_llm_api");
}
