/* runtime/llm/sampler.c: logits to a token id (relaxc/llm.h states the transforms and their
 * order). Reproducible across platforms: the random numbers are xoshiro256** seeded by SplitMix64
 * (https://prng.di.unimi.it/, public domain reference code, rewritten here), the probabilities are
 * computed in double with exp_neg below (only additions, multiplications, conversions and bit
 * patterns, all exact or correctly rounded under IEEE 754), floating-point contraction is off (so
 * no compiler fuses a multiply-add on one target and not another; GCC in ISO C mode does not
 * contract), and every order of ids is a total order. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "relaxc/llm.h"

#ifdef __clang__
#pragma STDC FP_CONTRACT OFF
#endif

/* Binary orders of magnitude of a weight in (0, 1]: 2^0 down to 2^-1074, the least double. */
#define MASS_BUCKETS 1076

struct rx_sampler {
  rx_sampler_params p;
  uint64_t state[4];         /* xoshiro256** */
  double *val;               /* per id: the logit after penalty and temperature */
  double *w;                 /* per candidate id: its weight, e^(val - the largest val) */
  int32_t *cand;             /* the candidate ids */
  int32_t *heap;             /* top-k: the k best ids so far, worst on top */
  int32_t *count;            /* per id: its count among the generated ids (0 between calls) */
  size_t cap;                /* entries of the five arrays */
  rx_logit_bias *biases;     /* the params' logit_bias, owned */
  double mass[MASS_BUCKETS]; /* top-p: the weight of the candidates in each order of magnitude */
};

/* ---- random numbers ---- */
static uint64_t splitmix64(uint64_t *x) {
  uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static uint64_t next_u64(uint64_t s[4]) {
  uint64_t result = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
  s[2] ^= s[0];
  s[3] ^= s[1];
  s[1] ^= s[2];
  s[0] ^= s[3];
  s[2] ^= t;
  s[3] = rotl(s[3], 45);
  return result;
}

/* Uniform in [0, 1): the top 53 bits over 2^53. */
static double next_unit(uint64_t s[4]) {
  return (double)(next_u64(s) >> 11) * (1.0 / 9007199254740992.0);
}

void rx_sampler_reseed(rx_sampler *s, uint64_t seed) {
  if (!s) return;
  for (int i = 0; i < 4; i++) s->state[i] = splitmix64(&seed);
}

/* ---- e^x for x <= 0, the same bits everywhere ----
 * x = k ln2 + r with |r| <= ln2 / 2 (ln2 split in two so that k * LN2_HI is exact for the k that
 * occur, Cody and Waite), e^r by its Taylor series to r^13 / 13! (relative error
 * below 2^-53 on that interval), then scaled by 2^k. Constants are hexadecimal, so every compiler
 * reads the same bits; no libm call, so the loop over ids can be vectorized. */
#define LN2_HI        0x1.62e42fee00000p-1  /* the high 32 bits of ln 2 (fdlibm's ln2HI) */
#define LN2_LO        0x1.a39ef35793c76p-33 /* ln 2 - LN2_HI (fdlibm's ln2LO) */
#define INV_LN2       0x1.71547652b82fep+0
#define EXP_UNDERFLOW (-745.2) /* below this, e^x rounds to 0 in double */

/* 1 / n!, n = 0..13, rounded to double */
static const double INV_FACTORIAL[] = {
    0x1.0000000000000p+0,  0x1.0000000000000p+0,  0x1.0000000000000p-1,  0x1.5555555555555p-3,
    0x1.5555555555555p-5,  0x1.1111111111111p-7,  0x1.6c16c16c16c17p-10, 0x1.a01a01a01a01ap-13,
    0x1.a01a01a01a01ap-16, 0x1.71de3a556c734p-19, 0x1.27e4fb7789f5cp-22, 0x1.ae64567f544e4p-26,
    0x1.1eed8eff8d898p-29, 0x1.6124613a86d09p-33,
};

/* 2^k for a normal exponent (-1022 <= k <= 1023), from its bits. */
static double pow2(int k) {
  uint64_t bits = (uint64_t)(k + 1023) << 52;
  double d;
  memcpy(&d, &bits, sizeof d);
  return d;
}

static double exp_neg(double x) {
  if (!(x > EXP_UNDERFLOW)) return 0.0;                 /* -inf too */
  double t = x * INV_LN2 + 0.5, k = (double)(int64_t)t; /* floor(t): t is in [-1076, 0.5] */
  if (k > t) k -= 1;
  double r = (x - k * LN2_HI) - k * LN2_LO;
  /* Estrin's scheme: short chains of dependent operations, so that the processor overlaps the
     exponentials of neighbouring ids (Horner's 13 dependent steps made this the sampler's cost) */
  const double *c = INV_FACTORIAL;
  double r2 = r * r, r4 = r2 * r2, r8 = r4 * r4;
  double p = ((c[0] + c[1] * r) + r2 * (c[2] + c[3] * r)) +
             r4 * ((c[4] + c[5] * r) + r2 * (c[6] + c[7] * r)) +
             r8 * (((c[8] + c[9] * r) + r2 * (c[10] + c[11] * r)) + r4 * (c[12] + c[13] * r));
  int e = (int)k; /* p * 2^e: exact while normal; below, one rounding into the subnormals */
  return e >= -1022 ? p * pow2(e) : p * pow2(e + 64) * 0x1p-64;
}

/* ---- parameters ---- */
rx_sampler_params rx_sampler_default_params(void) {
  rx_sampler_params p = {1.0f, 50, 1.0f, 1.0f, 0, 0, 0, NULL, 0};
  return p;
}

static rx_status check_params(const rx_sampler_params *p) {
  if (!(p->temperature >= 0) || isinf(p->temperature))
    return base_status_make(RX_ERR_INVALID, "sampler: temperature %g is not a finite number >= 0",
                            (double)p->temperature);
  if (p->top_k < 0)
    return base_status_make(RX_ERR_INVALID, "sampler: top_k %d is negative", (int)p->top_k);
  if (!(p->top_p > 0 && p->top_p <= 1))
    return base_status_make(RX_ERR_INVALID, "sampler: top_p %g is not in (0, 1]", (double)p->top_p);
  if (!(p->repetition_penalty > 0) || isinf(p->repetition_penalty))
    return base_status_make(RX_ERR_INVALID,
                            "sampler: repetition_penalty %g is not a finite number > 0",
                            (double)p->repetition_penalty);
  if (!(p->presence_penalty >= -2 && p->presence_penalty <= 2) ||
      !(p->frequency_penalty >= -2 && p->frequency_penalty <= 2))
    return base_status_make(RX_ERR_INVALID,
                            "sampler: presence_penalty %g and frequency_penalty %g must be in "
                            "[-2, 2]",
                            (double)p->presence_penalty, (double)p->frequency_penalty);
  if (p->nbiases && !p->biases) return base_status_make(RX_ERR_INVALID, "sampler: NULL biases");
  for (size_t i = 0; i < p->nbiases; i++)
    if (p->biases[i].id < 0 || !(p->biases[i].bias >= -100 && p->biases[i].bias <= 100))
      return base_status_make(RX_ERR_INVALID,
                              "sampler: logit_bias %zu: id %d must be >= 0 and bias %g in "
                              "[-100, 100]",
                              i, (int)p->biases[i].id, (double)p->biases[i].bias);
  return NULL;
}

rx_status rx_sampler_create(const rx_sampler_params *params, rx_sampler **out_sampler) {
  if (out_sampler) *out_sampler = NULL;
  if (!params || !out_sampler)
    return base_status_make(RX_ERR_INVALID, "rx_sampler_create: NULL argument");
  RX_RETURN_IF_ERROR(check_params(params));
  rx_sampler *s = base_calloc(1, sizeof *s);
  s->p = *params;
  if (params->nbiases) {
    s->biases = base_malloc(params->nbiases * sizeof *s->biases);
    memcpy(s->biases, params->biases, params->nbiases * sizeof *s->biases);
  }
  s->p.biases = s->biases;
  rx_sampler_reseed(s, params->seed);
  *out_sampler = s;
  return NULL;
}

void rx_sampler_free(rx_sampler *s) {
  if (!s) return;
  free(s->val);
  free(s->w);
  free(s->cand);
  free(s->heap);
  free(s->count);
  free(s->biases);
  free(s);
}

/* ---- orders of ids ---- */
/* Whether id a ranks before id b: the larger value, then the smaller id. */
static bool better(const double *val, int32_t a, int32_t b) {
  return val[a] != val[b] ? val[a] > val[b] : a < b;
}

/* Sinks ids[i] in a heap of n ids whose top is the one that ranks first by `first`. */
static void sift(const double *val, int32_t *ids, size_t n, size_t i, bool worst_on_top) {
  for (;;) {
    size_t l = 2 * i + 1, r = l + 1, top = i;
    if (l < n && better(val, ids[l], ids[top]) != worst_on_top) top = l;
    if (r < n && better(val, ids[r], ids[top]) != worst_on_top) top = r;
    if (top == i) return;
    int32_t tmp = ids[i];
    ids[i] = ids[top];
    ids[top] = tmp;
    i = top;
  }
}

/* Sorts ids best first (heapsort: a total order, so the same result everywhere). */
static void sort_best_first(const double *val, int32_t *ids, size_t n) {
  for (size_t i = n / 2; i-- > 0;) sift(val, ids, n, i, true);
  for (size_t end = n; end-- > 1;) {
    int32_t tmp = ids[0];
    ids[0] = ids[end];
    ids[end] = tmp;
    sift(val, ids, end, 0, true);
  }
}

/* The value of the k-th best id (k < n ids with a finite value). */
static double kth_value(rx_sampler *s, int32_t vocab, size_t k) {
  size_t n = 0;
  for (int32_t i = 0; i < vocab; i++) {
    if (n < k) {
      s->heap[n++] = i;
      if (n == k)
        for (size_t j = k / 2; j-- > 0;) sift(s->val, s->heap, k, j, true);
    } else if (better(s->val, i, s->heap[0])) {
      s->heap[0] = i;
      sift(s->val, s->heap, k, 0, true);
    }
  }
  return s->val[s->heap[0]];
}

/* ---- sampling ---- */
/* OpenAI's presence and frequency penalties over the generated ids history[prompt..count) (ids
 * checked by the caller), then the logit_bias. */
static rx_status penalize(rx_sampler *s, int32_t vocab, const int32_t *history, size_t count,
                          size_t prompt) {
  double fp = s->p.frequency_penalty, pp = s->p.presence_penalty;
  if ((fp != 0 || pp != 0) && prompt < count) {
    for (size_t i = prompt; i < count; i++) s->count[history[i]]++;
    for (size_t i = prompt; i < count; i++) {
      int32_t id = history[i], c = s->count[id];
      if (!c) continue; /* done at its first occurrence */
      s->val[id] -= fp * c + pp;
      s->count[id] = 0;
    }
  }
  for (size_t i = 0; i < s->p.nbiases; i++)
    if (s->p.biases[i].id >= vocab)
      return base_status_make(RX_ERR_INVALID,
                              "sampler: logit_bias names token %d, outside the vocabulary of %d",
                              (int)s->p.biases[i].id, (int)vocab);
  for (size_t i = s->p.nbiases; i-- > 0;) { /* the last entry of an id counts */
    int32_t id = s->p.biases[i].id;
    if (!s->count[id]) s->val[id] += s->p.biases[i].bias;
    s->count[id] = 1;
  }
  for (size_t i = 0; i < s->p.nbiases; i++) s->count[s->p.biases[i].id] = 0;
  return NULL;
}

static rx_status prepare(rx_sampler *s, const float *logits, int32_t vocab, const int32_t *history,
                         size_t count, size_t prompt) {
  if ((size_t)vocab > s->cap) {
    free(s->val);
    free(s->w);
    free(s->cand);
    free(s->heap);
    free(s->count);
    s->cap = (size_t)vocab;
    s->val = base_malloc(s->cap * sizeof *s->val);
    s->w = base_malloc(s->cap * sizeof *s->w);
    s->cand = base_malloc(s->cap * sizeof *s->cand);
    s->heap = base_malloc(s->cap * sizeof *s->heap);
    s->count = base_calloc(s->cap, sizeof *s->count);
  }
  for (int32_t i = 0; i < vocab; i++) {
    if (isnan(logits[i]) || (isinf(logits[i]) && logits[i] > 0))
      return base_status_make(RX_ERR_INVALID, "sampler: logit %d is %g", (int)i, (double)logits[i]);
    s->val[i] = logits[i];
  }
  double penalty = s->p.repetition_penalty;
  for (size_t i = 0; i < count; i++) {
    int32_t id = history[i];
    if (id < 0 || id >= vocab)
      return base_status_make(RX_ERR_INVALID, "sampler: history[%zu] = %d is not an id below %d", i,
                              (int)id, (int)vocab);
    double l = logits[id]; /* from the logit itself: a repeated id is penalized once */
    if (penalty != 1) s->val[id] = l < 0 ? l * penalty : l / penalty;
  }
  return penalize(s, vocab, history, count, prompt < count ? prompt : count);
}

/* Picks from the candidates (weights s->w, total mass) with one uniform draw. */
static int32_t draw(rx_sampler *s, size_t n, double total) {
  double target = next_unit(s->state) * total, acc = 0;
  for (size_t i = 0; i < n; i++) {
    acc += s->w[s->cand[i]];
    if (acc > target) return s->cand[i];
  }
  return s->cand[n - 1]; /* rounding left target at the very top */
}

/* Top-p: the smallest head of the candidates, best first, whose weight reaches top_p of the
 * total; the head becomes the candidates and its weight the total. Only the ids that can be in
 * the head are sorted: those of weight at least 2^-(b+1), where the candidates of weight at
 * least 2^-b already reach top_p (one order of magnitude more against rounding). They are an
 * upper set of the order, so the head is the one a sort of all would give. */
static size_t nucleus(rx_sampler *s, size_t n, double *total) {
  memset(s->mass, 0, sizeof s->mass);
  for (size_t i = 0; i < n; i++) {
    double w = s->w[s->cand[i]];
    int e;
    if (w > 0) s->mass[1 - (frexp(w, &e), e)] += w; /* w in [2^(e-1), 2^e), e <= 1 */
  }
  double want = s->p.top_p * *total, cum = 0, acc = 0;
  size_t b = 0, m = 0, keep = 0;
  while (b + 1 < MASS_BUCKETS && cum < want) cum += s->mass[b++];
  double floor_w = ldexp(1.0, -(int)(b + 1));
  for (size_t i = 0; i < n; i++)
    if (s->w[s->cand[i]] > 0 && s->w[s->cand[i]] >= floor_w) s->cand[m++] = s->cand[i];
  sort_best_first(s->val, s->cand, m);
  while (keep < m && (keep == 0 || acc < want)) acc += s->w[s->cand[keep++]];
  *total = acc;
  return keep;
}

/* The log-softmax of s->val (after the penalties and biases) for the chosen id and the ntop most
 * probable ids (best first, ties by id). */
static double logprobs(rx_sampler *s, int32_t vocab, int32_t id, int32_t ntop,
                       rx_token_logprobs *lp) {
  double max = -INFINITY, sum = 0;
  for (int32_t i = 0; i < vocab; i++)
    if (s->val[i] > max) max = s->val[i];
  for (int32_t i = 0; i < vocab; i++) sum += exp(s->val[i] - max);
  double lse = max + log(sum);
  memset(lp, 0, sizeof *lp);
  lp->id = id;
  lp->logprob = id >= 0 ? (float)(s->val[id] - lse) : 0;
  if (ntop > vocab) ntop = vocab;
  int32_t n = 0; /* insertion into the list kept best first */
  for (int32_t i = 0; i < vocab && ntop > 0; i++) {
    if (n == ntop && !better(s->val, i, lp->top_ids[n - 1])) continue;
    int32_t at = n < ntop ? n++ : n - 1;
    while (at > 0 && better(s->val, i, lp->top_ids[at - 1])) {
      lp->top_ids[at] = lp->top_ids[at - 1];
      at--;
    }
    lp->top_ids[at] = i;
  }
  lp->ntop = n;
  for (int32_t k = 0; k < n; k++) lp->top_logprobs[k] = (float)(s->val[lp->top_ids[k]] - lse);
  return lse;
}

rx_status rx_sampler_sample(rx_sampler *s, const float *logits, int32_t vocab,
                            const int32_t *history, size_t count, int32_t *out_id) {
  return rx_sampler_sample_ex(s, logits, vocab, history, count, 0, 0, NULL, out_id);
}

rx_status rx_sampler_sample_ex(rx_sampler *s, const float *logits, int32_t vocab,
                               const int32_t *history, size_t count, size_t prompt, int32_t ntop,
                               rx_token_logprobs *out_lp, int32_t *out_id) {
  if (out_id) *out_id = -1;
  if (!s || !logits || vocab <= 0 || (!history && count) || !out_id || ntop < 0 ||
      ntop > RX_LLM_MAX_TOP_LOGPROBS)
    return base_status_make(RX_ERR_INVALID,
                            "rx_sampler_sample: NULL argument, vocab <= 0 or ntop outside [0, %d]",
                            RX_LLM_MAX_TOP_LOGPROBS);
  RX_RETURN_IF_ERROR(prepare(s, logits, vocab, history, count, prompt));
  int32_t best = 0;
  for (int32_t i = 1; i < vocab; i++)
    if (s->val[i] > s->val[best]) best = i;
  if (isinf(s->val[best])) return base_status_make(RX_ERR_INVALID, "sampler: every logit is -inf");
  if (s->p.temperature == 0) { /* greedy */
    *out_id = best;
    if (out_lp) logprobs(s, vocab, best, ntop, out_lp);
    return NULL;
  }
  double lse = out_lp ? logprobs(s, vocab, -1, ntop, out_lp) : 0; /* before the temperature */
  double t = s->p.temperature, max = s->val[best] / t, threshold = -INFINITY;
  for (int32_t i = 0; i < vocab; i++) s->val[i] /= t;
  if (s->p.top_k > 0 && s->p.top_k < vocab) threshold = kth_value(s, vocab, (size_t)s->p.top_k);
  size_t n = 0;
  for (int32_t i = 0; i < vocab; i++)
    if (s->val[i] >= threshold && !isinf(s->val[i])) s->cand[n++] = i;
  double total = 0;
  for (size_t i = 0; i < n; i++) total += s->w[s->cand[i]] = exp_neg(s->val[s->cand[i]] - max);
  if (s->p.top_p < 1)
    n = nucleus(s, n, &total);
  else if (threshold > -INFINITY)
    sort_best_first(s->val, s->cand, n);
  *out_id = draw(s, n, total);
  if (out_lp) { /* the chosen id's, from its value before the temperature */
    out_lp->id = *out_id;
    out_lp->logprob = (float)(s->val[*out_id] * t - lse);
  }
  return NULL;
}
