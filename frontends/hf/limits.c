/* frontends/hf/limits.c: the one table of bounds on a decoder's description (hf_int.h,
 * HF_LIMITS), and the checks both model formats share. The bounds: a hidden size up to 2^20
 * and an MLP up to 2^22 columns (the largest published models have 16384 and 53248), 4096
 * layers and heads, a head dim up to 1024 (the kernels' tiles and the KV cache's pages are
 * planned for it), token ids that fit an i32; epsilon and rope base as transformers accepts
 * them, finite. */
#include "hf_int.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

const hf_limit hf_limits[HF_LIMIT_COUNT] = {
#define HF_LIMIT_ROW_(f, hk, gk, lo, hi) [HF_LIMIT_##f] = {hk, gk, lo, hi},
    HF_LIMITS(HF_LIMIT_ROW_)
#undef HF_LIMIT_ROW_
};

/* the key of limit i as the file names it */
static const char *key_name(char *buf, size_t n, hf_limit_id i, const char *arch) {
  if (!arch) return hf_limits[i].hf;
  snprintf(buf, n, "%s.%s", arch, hf_limits[i].gguf);
  return buf;
}

static double value_of(const rx_hf_config *c, hf_limit_id i) {
  switch (i) {
#define HF_LIMIT_CASE_(f, hk, gk, lo, hi)                                                          \
  case HF_LIMIT_##f:                                                                               \
    return (double)c->f;
    HF_LIMITS(HF_LIMIT_CASE_)
#undef HF_LIMIT_CASE_
  case HF_LIMIT_COUNT:
    break;
  }
  RX_ASSERT(!"a limit of the table");
  return 0;
}

/* The integer fields are those whose bounds are whole and past 1 or 0 at both ends; the two
 * floats (epsilon, rope base) print as numbers. */
static bool is_int(hf_limit_id i) { return i != HF_LIMIT_rms_eps && i != HF_LIMIT_rope_theta; }

static rx_status check_bounds(const rx_hf_config *c, const char *file, const char *arch) {
  char key[128];
  for (int i = 0; i < HF_LIMIT_COUNT; i++) {
    double v = value_of(c, (hf_limit_id)i), lo = hf_limits[i].lo, hi = hf_limits[i].hi;
    if (v >= lo && v <= hi) continue;
    const char *k = key_name(key, sizeof key, (hf_limit_id)i, arch);
    if (is_int((hf_limit_id)i))
      return base_status_make(RX_ERR_INVALID,
                              "%s: '%s' is %.0f: expected an integer from %.0f to %.0f", file, k, v,
                              lo, hi);
    if (!isfinite(v))
      return base_status_make(RX_ERR_INVALID,
                              "%s: '%s' is %s: expected a finite number from %g to %g", file, k,
                              isnan(v) ? "NaN"
                              : v > 0  ? "infinite"
                                       : "-infinite",
                              lo, hi);
    return base_status_make(RX_ERR_INVALID, "%s: '%s' is %g: expected a number from %g to %g", file,
                            k, v, lo, hi);
  }
  return NULL;
}

static rx_status check_ids(const rx_hf_config *c, const char *file, const char *arch) {
  const char *bos = arch ? "tokenizer.ggml.bos_token_id" : "bos_token_id";
  const char *eos = arch ? "tokenizer.ggml.eos_token_id (or eot_token_id)" : "eos_token_id";
  if (c->bos >= c->vocab)
    return base_status_make(
        RX_ERR_INVALID, "%s: %s %lld is outside the vocabulary of %lld tokens (ids 0 to %lld)",
        file, bos, (long long)c->bos, (long long)c->vocab, (long long)c->vocab - 1);
  for (int i = 0; i < c->neos; i++)
    if (c->eos[i] < 0 || c->eos[i] >= c->vocab)
      return base_status_make(RX_ERR_INVALID,
                              "%s: %s %lld is outside the vocabulary of %lld tokens (ids 0 to "
                              "%lld): generation would never stop at it",
                              file, eos, (long long)c->eos[i], (long long)c->vocab,
                              (long long)c->vocab - 1);
  return NULL;
}

rx_status hf_check_config(const rx_hf_config *c, const char *file, const char *arch) {
  RX_RETURN_IF_ERROR(check_bounds(c, file, arch));
  char h[128], kv[128], d[128];
  key_name(h, sizeof h, HF_LIMIT_heads, arch);
  key_name(kv, sizeof kv, HF_LIMIT_kv_heads, arch);
  key_name(d, sizeof d, HF_LIMIT_head_dim, arch);
  if (c->heads % c->kv_heads)
    return base_status_make(RX_ERR_INVALID,
                            "%s: '%s' %lld is not a multiple of '%s' %lld (grouped-query attention "
                            "shares each kv head among the same number of heads)",
                            file, h, (long long)c->heads, kv, (long long)c->kv_heads);
  if (c->head_dim % 2)
    return base_status_make(
        RX_ERR_INVALID, "%s: '%s' %lld is odd: the rotary embedding rotates pairs of dimensions",
        file, d, (long long)c->head_dim);
  if (strcmp(c->rope_type, "default") && strcmp(c->rope_type, "longrope") &&
      strcmp(c->rope_type, "yarn") && !(c->rope_factor > 0 && isfinite(c->rope_factor)))
    return base_status_make(RX_ERR_INVALID,
                            "%s: rope scaling '%s' with factor %g: expected a positive "
                            "finite factor",
                            file, c->rope_type, c->rope_factor);
  return check_ids(c, file, arch);
}
