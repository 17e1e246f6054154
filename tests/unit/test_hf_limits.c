/* The bounds and checks of a decoder's description on both model paths (issue 29, items 1, 9
 * and 12; frontends/hf/limits.c, gguf.c, config.c, meta.c): GGUF images written here with one
 * number out of its bounds, a NaN, an infinity, a key that changes the math the builder does not
 * do, or an end-of-sequence id outside the vocabulary, each refused with a message naming the
 * file, the key and the value; a block_count of 2^32-1 refused by hf_import before anything
 * is allocated for it; config.json texts likewise (a syntax error with its line and column, a
 * number too large for a double, a partial rotary embedding); and a model folder whose
 * tokenizer.json the runtime would refuse, refused at compile time.
 *
 * usage: test_hf_limits TESTS_DIR */
#include "base/base.h"
#include "check.h"
#include "frontends/gguf/gguf.h"
#include "frontends/hf/hf_int.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* An error containing want from s (NULL want: success); frees s. */
static void expect(rx_status s, const char *want, const char *what) {
  if (!want)
    CHECK_MSG(!s, "%s: expected success, got '%s'", what, rx_status_message(s));
  else
    CHECK_MSG(s && strstr(rx_status_message(s), want),
              "%s: expected an error containing '%s', got '%s'", what, want,
              s ? rx_status_message(s) : "success");
  rx_status_free(s);
}

/* ---- a GGUF image of metadata only (no tensors) ---- */
enum { T_U32 = 4, T_F32 = 6, T_STRING = 8, T_STRINGS = 9 /* an array of the str's words */ };

typedef struct kv {
  const char *key;
  int type;
  double num;
  const char *str;
} kv;

/* The tiny model's metadata; an override with the same key replaces a value, a new key is
 * added; num NAN with type 0 removes the key. */
static const kv base_kvs[] = {
    {"general.architecture", T_STRING, 0, "llama"},
    {"llama.embedding_length", T_U32, 16, NULL},
    {"llama.feed_forward_length", T_U32, 32, NULL},
    {"llama.block_count", T_U32, 1, NULL},
    {"llama.attention.head_count", T_U32, 2, NULL},
    {"llama.attention.head_count_kv", T_U32, 1, NULL},
    {"llama.context_length", T_U32, 64, NULL},
    {"llama.vocab_size", T_U32, 32, NULL},
    {"llama.attention.layer_norm_rms_epsilon", T_F32, 1e-5, NULL},
    {"llama.rope.freq_base", T_F32, 10000, NULL},
    {"tokenizer.ggml.eos_token_id", T_U32, 2, NULL},
};

static void put(rx_strbuf *b, const void *p, size_t n) { base_strbuf_appendn(b, p, n); }
static void put_u32(rx_strbuf *b, uint32_t v) { put(b, &v, 4); }
static void put_u64(rx_strbuf *b, uint64_t v) { put(b, &v, 8); }
static void put_str(rx_strbuf *b, const char *s) {
  put_u64(b, strlen(s));
  put(b, s, strlen(s));
}

static void put_kv(rx_strbuf *b, const kv *k) {
  put_str(b, k->key);
  put_u32(b, (uint32_t)k->type);
  if (k->type == T_U32) put_u32(b, (uint32_t)k->num);
  if (k->type == T_F32) {
    float f = (float)k->num;
    put(b, &f, 4);
  }
  if (k->type == T_STRING) put_str(b, k->str);
  if (k->type == T_STRINGS) {
    char words[256];
    snprintf(words, sizeof words, "%s", k->str);
    uint64_t n = 0;
    for (const char *p = words; *p; p++) n += *p != ' ' && (p == words || p[-1] == ' ');
    put_u32(b, T_STRING);
    put_u64(b, n);
    for (char *save = NULL, *w = strtok_r(words, " ", &save); w; w = strtok_r(NULL, " ", &save))
      put_str(b, w);
  }
}

/* An f32 tensor of the image (f16 with f16 set): its dims in relaxc's order (outermost first),
 * its elements zero unless data is given. */
typedef struct tensor {
  const char *name;
  int ndim;
  int64_t dims[3];
  const float *data;
  bool f16;
} tensor;

static int64_t tensor_elems(const tensor *t) {
  int64_t e = 1;
  for (int d = 0; d < t->ndim; d++) e *= t->dims[d];
  return e;
}

static char *image_with(const kv *over, int n, const tensor *ts, int nt, size_t *len);

/* base_kvs with the n overrides, as a GGUF v3 image (heap, *len). */
static char *image(const kv *over, int n, size_t *len) { return image_with(over, n, NULL, 0, len); }

/* The same with the nt tensors. */
static char *image_with(const kv *over, int n, const tensor *ts, int nt, size_t *len) {
  const kv *all[64];
  int count = 0;
  for (size_t i = 0; i < RX_ARRAY_LEN(base_kvs); i++) {
    const kv *k = &base_kvs[i];
    for (int j = 0; j < n; j++)
      if (!strcmp(over[j].key, k->key)) k = &over[j];
    if (k->type) all[count++] = k;
  }
  for (int j = 0; j < n; j++) {
    bool in_base = false;
    for (size_t i = 0; i < RX_ARRAY_LEN(base_kvs); i++)
      in_base |= !strcmp(over[j].key, base_kvs[i].key);
    if (!in_base) all[count++] = &over[j];
  }
  rx_strbuf b = {0};
  put(&b, "GGUF", 4);
  put_u32(&b, 3);
  put_u64(&b, (uint64_t)nt);
  put_u64(&b, (uint64_t)count);
  for (int i = 0; i < count; i++) put_kv(&b, all[i]);
  uint64_t offset = 0;
  for (int i = 0; i < nt; i++) { /* name, dims innermost first (ggml's ne), F32, offset */
    put_str(&b, ts[i].name);
    put_u32(&b, (uint32_t)ts[i].ndim);
    for (int d = ts[i].ndim - 1; d >= 0; d--) put_u64(&b, (uint64_t)ts[i].dims[d]);
    put_u32(&b, ts[i].f16 ? 1 : 0);
    put_u64(&b, offset);
    offset += ((uint64_t)tensor_elems(&ts[i]) * (ts[i].f16 ? 2 : 4) + 31) / 32 * 32;
  }
  while (b.len % 32) put(&b, "", 1); /* the data section's alignment */
  for (int i = 0; i < nt; i++) {
    for (int64_t e = 0; e < tensor_elems(&ts[i]); e++) {
      float v = ts[i].data ? ts[i].data[e] : 0;
      uint16_t h = base_f32_to_f16(v);
      if (ts[i].f16)
        put(&b, &h, 2);
      else
        put(&b, &v, 4);
    }
    while (b.len % 32) put(&b, "", 1);
  }
  *len = b.len;
  return base_strbuf_take(&b);
}

/* hf_gguf_read_config of base_kvs with the overrides. */
static rx_status read_config(const kv *over, int n, rx_hf_config *c) {
  size_t len;
  char *img = image(over, n, &len);
  rx_gguf_file f;
  rx_status s = gguf_parse((const uint8_t *)img, len, "t.gguf", &f);
  if (!s) {
    s = hf_gguf_read_config(&f, c);
    gguf_free(&f);
  }
  free(img);
  return s;
}

#define GGUF_CASE(want, ...)                                                                       \
  do {                                                                                             \
    const kv over_[] = {__VA_ARGS__};                                                              \
    rx_hf_config c_;                                                                               \
    expect(read_config(over_, (int)RX_ARRAY_LEN(over_), &c_), want, #__VA_ARGS__);                 \
  } while (0)

static void gguf_bounds(void) {
  rx_hf_config c;
  expect(read_config(NULL, 0, &c), NULL, "the tiny model");
  CHECK_MSG(c.layers == 1 && c.head_dim == 8 && c.kv_heads == 1 && !strcmp(c.rope_type, "default"),
            "the tiny model's config");
  GGUF_CASE("t.gguf: 'llama.block_count' is 5000000: expected an integer from 1 to 4096",
            {"llama.block_count", T_U32, 5e6, NULL});
  GGUF_CASE("'llama.block_count' is 4294967295: expected an integer from 1 to 4096",
            {"llama.block_count", T_U32, 4294967295.0, NULL});
  GGUF_CASE("'llama.embedding_length' is 0: expected an integer from 1 to 1048576",
            {"llama.embedding_length", T_U32, 0, NULL});
  GGUF_CASE("'llama.feed_forward_length' is 8388608: expected an integer from 1 to 4194304",
            {"llama.feed_forward_length", T_U32, 8388608, NULL});
  GGUF_CASE("'llama.attention.head_count_kv' is 0",
            {"llama.attention.head_count_kv", T_U32, 0, NULL});
  GGUF_CASE("'llama.context_length' is 0: expected an integer from 1",
            {"llama.context_length", T_U32, 0, NULL});
  GGUF_CASE("'llama.attention.key_length' is 4096: expected an integer from 2 to 1024",
            {"llama.attention.key_length", T_U32, 4096, NULL});
  GGUF_CASE("'llama.attention.layer_norm_rms_epsilon' is NaN: expected a finite number from 0 to 1",
            {"llama.attention.layer_norm_rms_epsilon", T_F32, NAN, NULL});
  GGUF_CASE("'llama.attention.layer_norm_rms_epsilon' is -1: expected a number from 0 to 1",
            {"llama.attention.layer_norm_rms_epsilon", T_F32, -1, NULL});
  GGUF_CASE("'llama.rope.freq_base' is infinite: expected a finite number",
            {"llama.rope.freq_base", T_F32, INFINITY, NULL});
  GGUF_CASE("'llama.rope.freq_base' is NaN", {"llama.rope.freq_base", T_F32, NAN, NULL});
}

static void gguf_consistency(void) {
  GGUF_CASE("'llama.embedding_length' 16 is not a multiple of 'llama.attention.head_count' 3",
            {"llama.attention.head_count", T_U32, 3, NULL},
            {"llama.attention.head_count_kv", T_U32, 3, NULL});
  GGUF_CASE("'llama.attention.head_count' 2 is not a multiple of 'llama.attention.head_count_kv' 4",
            {"llama.attention.head_count_kv", T_U32, 4, NULL});
  GGUF_CASE("'llama.attention.key_length' 7 is odd",
            {"llama.attention.key_length", T_U32, 7, NULL});
  GGUF_CASE("tokenizer.ggml.eos_token_id (or eot_token_id) 32 is outside the vocabulary of 32 "
            "tokens",
            {"tokenizer.ggml.eos_token_id", T_U32, 32, NULL});
  GGUF_CASE("tokenizer.ggml.bos_token_id 4000000000 is outside the vocabulary of 32 tokens",
            {"tokenizer.ggml.bos_token_id", T_U32, 4e9, NULL});
}

/* The description other architectures' keys make (issue 32): Gemma 2 and 3, Qwen3, Phi-3 with
 * the tiny model's sizes under their own names (6 layers), and the windows, scales, soft-caps,
 * rotary dims and rope kinds llama.cpp's keys (or its defaults) give. */
#define ARCH_KVS(a, layers)                                                                        \
  {"general.architecture", T_STRING, 0, a}, {"llama.embedding_length", 0, NAN, NULL},              \
      {"llama.feed_forward_length", 0, NAN, NULL}, {"llama.block_count", 0, NAN, NULL},            \
      {"llama.attention.head_count", 0, NAN, NULL},                                                \
      {"llama.attention.head_count_kv", 0, NAN, NULL}, {"llama.context_length", 0, NAN, NULL},     \
      {"llama.vocab_size", 0, NAN, NULL},                                                          \
      {"llama.attention.layer_norm_rms_epsilon", 0, NAN, NULL},                                    \
      {"llama.rope.freq_base", 0, NAN, NULL}, {a ".embedding_length", T_U32, 16, NULL},            \
      {a ".feed_forward_length", T_U32, 32, NULL}, {a ".block_count", T_U32, layers, NULL},        \
      {a ".attention.head_count", T_U32, 2, NULL}, {a ".attention.head_count_kv", T_U32, 1, NULL}, \
      {a ".context_length", T_U32, 64, NULL}, {a ".vocab_size", T_U32, 32, NULL}, {                \
    a ".attention.layer_norm_rms_epsilon", T_F32, 1e-6, NULL                                       \
  }

static void gguf_windows(const kv *over, int n, const char *what, const char *local,
                         int64_t window) {
  rx_hf_config c;
  expect(read_config(over, n, &c), NULL, what);
  CHECK_MSG(c.window == window && c.layer_kinds == (local != NULL), "%s: window %lld", what,
            (long long)c.window);
  for (int l = 0; local && l < 6; l++)
    CHECK_MSG(c.local[l] == (local[l] == '1'), "%s: layer %d", what, l);
}

static void gguf_description(void) {
  const kv g3[] = {ARCH_KVS("gemma3", 6), {"gemma3.attention.sliding_window", T_U32, 4, NULL}};
  gguf_windows(g3, RX_ARRAY_LEN(g3), "gemma3: every 6th layer global", "111110", 4);
  rx_hf_config c;
  expect(read_config(g3, RX_ARRAY_LEN(g3), &c), NULL, "gemma3");
  CHECK_MSG(c.arch == RX_HF_GEMMA3 && c.qk_norm && c.sandwich && c.embed_scale &&
                c.norm_offset == 1 && c.act == RX_HF_ACT_GELU_TANH && c.rope_local_theta == 10000 &&
                c.attn_softcap == 0 && c.final_softcap == 0 &&
                fabs(c.attn_scale - 1 / sqrt(8.0)) < 1e-12,
            "gemma3's description");
  const kv g3p[] = {ARCH_KVS("gemma3", 6),
                    {"gemma3.attention.sliding_window", T_U32, 4, NULL},
                    {"gemma3.attention.sliding_window_pattern", T_U32, 3, NULL},
                    {"gemma3.rope.freq_base_swa", T_F32, 2000, NULL},
                    {"gemma3.attention.scale", T_F32, 0.25, NULL}};
  gguf_windows(g3p, RX_ARRAY_LEN(g3p), "gemma3: sliding_window_pattern 3", "110110", 4);
  expect(read_config(g3p, RX_ARRAY_LEN(g3p), &c), NULL, "gemma3 with keys");
  CHECK_MSG(c.rope_local_theta == 2000 && c.attn_scale == 0.25, "gemma3: local base %g, scale %g",
            c.rope_local_theta, c.attn_scale);
  const kv g2[] = {ARCH_KVS("gemma2", 6), {"gemma2.attention.sliding_window", T_U32, 4, NULL}};
  gguf_windows(g2, RX_ARRAY_LEN(g2), "gemma2: every other layer", "101010", 4);
  expect(read_config(g2, RX_ARRAY_LEN(g2), &c), NULL, "gemma2");
  CHECK_MSG(c.attn_softcap == 50 && c.final_softcap == 30 && !c.qk_norm && c.sandwich,
            "gemma2's soft-caps %g %g", c.attn_softcap, c.final_softcap);
  /* llama.cpp's 27B (46 layers): the scale of embedding / heads (8), not of the key length 4 */
  const kv g27[] = {ARCH_KVS("gemma2", 46), {"gemma2.attention.key_length", T_U32, 4, NULL}};
  expect(read_config(g27, RX_ARRAY_LEN(g27), &c), NULL, "gemma2 27B");
  CHECK_MSG(fabs(c.attn_scale - 1 / sqrt(8.0)) < 1e-12, "gemma2 27B: scale %g", c.attn_scale);
  const kv q3[] = {ARCH_KVS("qwen3", 6), {"qwen3.attention.sliding_window", T_U32, 8, NULL}};
  gguf_windows(q3, RX_ARRAY_LEN(q3), "qwen3: a window on every layer", "111111", 8);
  const kv q3y[] = {ARCH_KVS("qwen3", 6),
                    {"qwen3.rope.scaling.type", T_STRING, 0, "yarn"},
                    {"qwen3.rope.scaling.factor", T_F32, 4, NULL},
                    {"qwen3.rope.scaling.original_context_length", T_U32, 16, NULL}};
  expect(read_config(q3y, RX_ARRAY_LEN(q3y), &c), NULL, "qwen3 yarn");
  CHECK_MSG(c.qk_norm && !strcmp(c.rope_type, "yarn") && c.rope_factor == 4 &&
                c.rope_original_max == 16 && c.rope_beta_fast == 32 && c.rope_beta_slow == 1 &&
                fabs(c.rope_attn_factor - (0.1 * log(4.0) + 1)) < 1e-12,
            "qwen3 yarn: %s x%g from %lld, attention factor %g", c.rope_type, c.rope_factor,
            (long long)c.rope_original_max, c.rope_attn_factor);
  const kv p3[] = {ARCH_KVS("phi3", 6), {"phi3.rope.dimension_count", T_U32, 4, NULL}};
  expect(read_config(p3, RX_ARRAY_LEN(p3), &c), NULL, "phi3");
  CHECK_MSG(c.rotary_dim == 4 && c.fused_gate_up && !c.fused_qkv && !c.layer_kinds,
            "phi3: rotary dims %lld", (long long)c.rotary_dim);
  const kv p3odd[] = {ARCH_KVS("phi3", 6), {"phi3.rope.dimension_count", T_U32, 3, NULL}};
  expect(read_config(p3odd, RX_ARRAY_LEN(p3odd), &c),
         "'phi3.rope.dimension_count' is 3: expected an even number of rotary dims from 2 to the "
         "head dim 8",
         "phi3 odd rotary dims");
  const kv qcap[] = {ARCH_KVS("qwen3", 6), {"qwen3.attn_logit_softcapping", T_F32, 5, NULL}};
  expect(read_config(qcap, RX_ARRAY_LEN(qcap), &c),
         "'qwen3.attn_logit_softcapping' 5 is not supported", "qwen3 soft-cap");
  const kv qexp[] = {ARCH_KVS("qwen3", 6), {"qwen3.expert_count", T_U32, 8, NULL}};
  expect(read_config(qexp, RX_ARRAY_LEN(qexp), &c),
         "'qwen3.expert_count' 8 is not supported (mixture of experts", "qwen3 experts");
  const kv q3m[] = {ARCH_KVS("qwen3moe", 6)};
  expect(read_config(q3m, RX_ARRAY_LEN(q3m), &c), "'qwen3moe.expert_count'", "qwen3moe experts");
  const kv bad[] = {{"general.architecture", T_STRING, 0, "gptneox"}};
  expect(
      read_config(bad, 1, &c),
      "general.architecture 'gptneox' is not supported (supported: llama, qwen2, qwen3, qwen2moe, "
      "qwen3moe, gemma2, gemma3, phi3)",
      "gptneox");
}

static void gguf_unimplemented(void) {
  GGUF_CASE("'llama.rope.dimension_count' 4 is not the head dim 8",
            {"llama.rope.dimension_count", T_U32, 4, NULL});
  GGUF_CASE(NULL, {"llama.rope.dimension_count", T_U32, 8, NULL});
  /* a mixture of experts: llama (Mixtral), qwen2moe and qwen3moe read its keys (the tensors:
   * test_gguf_archs, tests/lit/run/gguf_moe.test); the others refuse them by name */
  GGUF_CASE("'llama.expert_used_count'", {"llama.expert_count", T_U32, 8, NULL});
  GGUF_CASE("'llama.expert_used_count' is 9: expected 1 to 'llama.expert_count' 8 (the experts "
            "each token runs)",
            {"llama.expert_count", T_U32, 8, NULL}, {"llama.expert_used_count", T_U32, 9, NULL});
  GGUF_CASE("'llama.expert_count' is 8 but no layer holds its router (blk.N.ffn_gate_inp.weight)",
            {"llama.expert_count", T_U32, 8, NULL}, {"llama.expert_used_count", T_U32, 2, NULL});
  GGUF_CASE("'llama.expert_gating_func' 2 is not supported (expert gating other than softmax",
            {"llama.expert_gating_func", T_U32, 2, NULL});
  GGUF_CASE(NULL, {"llama.expert_count", T_U32, 0, NULL});
  GGUF_CASE("'llama.attention.value_length' 4 differs from the key length 8",
            {"llama.attention.value_length", T_U32, 4, NULL});
  GGUF_CASE("'llama.final_logit_softcapping' 30 is not supported",
            {"llama.final_logit_softcapping", T_F32, 30, NULL});
  GGUF_CASE("'llama.rope.scaling.type' 'longrope' is not supported (supported: none, linear, "
            "yarn; longrope by the tensors rope_factors_short/long)",
            {"llama.rope.scaling.type", T_STRING, 0, "longrope"});
  GGUF_CASE("'llama.rope.scaling.factor' is 0: expected a number from 1e-06 to 1e+06 (yarn rope "
            "scaling)",
            {"llama.rope.scaling.type", T_STRING, 0, "yarn"});
  GGUF_CASE("'llama.rope.scaling.yarn_log_multiplier' 0.1 is not supported",
            {"llama.rope.scaling.type", T_STRING, 0, "yarn"},
            {"llama.rope.scaling.factor", T_F32, 4, NULL},
            {"llama.rope.scaling.yarn_log_multiplier", T_F32, 0.1, NULL});
  GGUF_CASE("'llama.rope.scaling.factor' is nan: expected a number from 1e-06 to 1e+06",
            {"llama.rope.scaling.type", T_STRING, 0, "linear"},
            {"llama.rope.scaling.factor", T_F32, NAN, NULL});
  GGUF_CASE("'llama.rope.scaling.factor' 4 with 'llama.rope.scaling.type' none is not supported",
            {"llama.rope.scaling.type", T_STRING, 0, "none"},
            {"llama.rope.scaling.factor", T_F32, 4, NULL});
  GGUF_CASE(NULL, {"llama.rope.scaling.type", T_STRING, 0, "none"},
            {"llama.rope.scaling.factor", T_F32, 1, NULL});
  /* the older key, with the type */
  const kv old_key[] = {{"llama.rope.scaling.type", T_STRING, 0, "linear"},
                        {"llama.rope.scale_linear", T_F32, 2, NULL}};
  rx_hf_config o;
  expect(read_config(old_key, 2, &o), NULL, "rope.scale_linear");
  CHECK_MSG(!strcmp(o.rope_type, "linear") && o.rope_factor == 2, "rope %s x%g", o.rope_type,
            o.rope_factor);
  /* llama.cpp takes a factor without a type as linear scaling: so does relaxc */
  const kv lin[] = {{"llama.rope.scaling.factor", T_F32, 4, NULL}};
  rx_hf_config c;
  expect(read_config(lin, 1, &c), NULL, "linear rope scaling");
  CHECK_MSG(!strcmp(c.rope_type, "linear") && c.rope_factor == 4, "rope %s x%g", c.rope_type,
            c.rope_factor);
}

/* The tokenizer's arrays against the model's vocabulary: the message says which key holds what. */
static void gguf_tokenizer(void) {
  const kv over[] = {{"tokenizer.ggml.model", T_STRING, 0, "gpt2"},
                     {"tokenizer.ggml.tokens", T_STRINGS, 0, "a b c"},
                     {"tokenizer.ggml.merges", T_STRINGS, 0, ""}};
  size_t len;
  char *img = image(over, 3, &len);
  rx_gguf_file f;
  rx_hf_config c;
  rx_status s = gguf_parse((const uint8_t *)img, len, "t.gguf", &f);
  if (!s) {
    s = hf_gguf_read_config(&f, &c);
    rx_strbuf json = {0};
    if (!s) s = hf_gguf_tokenizer_json(&f, &c, &json);
    base_strbuf_free(&json);
    gguf_free(&f);
  }
  expect(s,
         "t.gguf: tokenizer.ggml.tokens holds 3 tokens, but the model's vocabulary "
         "('llama.vocab_size', or token_embd.weight's rows) has 32: expected one token per row",
         "tokens against the vocabulary");
  free(img);
}

/* A whole tiny llama in f32 (base_kvs: hidden 16, 2 heads of 8, 1 kv head, 32 tokens, one
 * layer, tied embeddings) with rope_freqs.weight holding factors: hf_import divides each
 * inverse frequency by its factor, as llama.cpp does (it ignored them: other frequencies than
 * the model's, without a word); a factor of 0 or a tensor of the wrong size is refused. */
static void gguf_rope_freqs(const char *tmp) {
  const float good[4] = {1, 2, 4, 8}, zero[4] = {1, 0, 1, 1};
  const struct {
    const float *factors;
    int64_t n;
    const char *want;
  } cases[] = {
      {good, 4, NULL},
      {zero, 4, "tensor 'rope_freqs.weight' [1] is 0: expected a positive finite factor"},
      {good, 3, "tensor 'rope_freqs.weight' is F32 with 3 elements: expected f32 [4]"},
  };
  for (size_t k = 0; k < RX_ARRAY_LEN(cases); k++) {
    const tensor ts[] = {
        {"token_embd.weight", 2, {32, 16}, NULL, false},
        {"output_norm.weight", 1, {16}, NULL, false},
        {"blk.0.attn_norm.weight", 1, {16}, NULL, false},
        {"blk.0.attn_q.weight", 2, {16, 16}, NULL, false},
        {"blk.0.attn_k.weight", 2, {8, 16}, NULL, false},
        {"blk.0.attn_v.weight", 2, {8, 16}, NULL, false},
        {"blk.0.attn_output.weight", 2, {16, 16}, NULL, false},
        {"blk.0.ffn_norm.weight", 1, {16}, NULL, false},
        {"blk.0.ffn_gate.weight", 2, {32, 16}, NULL, false},
        {"blk.0.ffn_up.weight", 2, {32, 16}, NULL, false},
        {"blk.0.ffn_down.weight", 2, {16, 32}, NULL, false},
        {"rope_freqs.weight", 1, {cases[k].n}, cases[k].factors, false},
    };
    size_t len;
    char *img = image_with(NULL, 0, ts, (int)RX_ARRAY_LEN(ts), &len);
    char path[4096];
    snprintf(path, sizeof path, "%s/freqs.gguf", tmp);
    FILE *fp = fopen(path, "wb");
    CHECK_MSG(fp && fwrite(img, 1, len, fp) == len, "write %s", path);
    if (fp) fclose(fp);
    free(img);
    rx_module *m = rx_module_new();
    expect(hf_import(m, path, NULL), cases[k].want, "rope_freqs.weight");
    const rx_weight *w = cases[k].want ? NULL : ir_module_weight(m, "rope_inv_freq");
    CHECK_MSG(cases[k].want ||
                  (w && w->ndim == 1 && w->shape[0] == 4 && w->src_dtype == RX_DTYPE_F32),
              "rope_inv_freq");
    for (int i = 0; w && i < 4; i++) {
      float got = ((const float *)w->src)[i];
      double want = 1.0 / pow(10000.0, 2.0 * i / 8) / good[i];
      CHECK_MSG(fabs(got - want) <= 1e-6 * want, "rope_inv_freq[%d] = %g, expected %g", i, got,
                want);
    }
    rx_module_free(m);
    unlink(path);
  }
}

/* hf_import of a GGUF file with a huge block_count: refused by the bounds, before the
 * builder allocates per-layer state (it aborted with "host out of memory"). */
static void gguf_import(const char *tmp) {
  const double counts[] = {5e6, 4294967295.0};
  for (int i = 0; i < 2; i++) {
    const kv over[] = {{"llama.block_count", T_U32, counts[i], NULL}};
    size_t len;
    char *img = image(over, 1, &len);
    char path[4096];
    snprintf(path, sizeof path, "%s/blocks.gguf", tmp);
    FILE *fp = fopen(path, "wb");
    CHECK_MSG(fp && fwrite(img, 1, len, fp) == len, "write %s", path);
    if (fp) fclose(fp);
    free(img);
    rx_module *m = rx_module_new();
    expect(hf_import(m, path, NULL), "expected an integer from 1 to 4096", "import block_count");
    rx_module_free(m);
    unlink(path);
  }
}

/* ---- config.json ---- */
static const char *const good_config =
    "{%s\"architectures\": [\"LlamaForCausalLM\"], \"hidden_size\": 16, \"intermediate_size\": "
    "32,\n"
    " \"num_hidden_layers\": 1, \"num_attention_heads\": 2, \"num_key_value_heads\": 1,\n"
    " \"vocab_size\": 32, \"max_position_embeddings\": 64, \"rms_norm_eps\": 1e-5,\n"
    " \"bos_token_id\": 1, \"eos_token_id\": 2}";

/* good_config with extra ("" or "\"key\": value, ": first, so it is the key cJSON finds) */
static rx_status parse(const char *extra, rx_hf_config *c) {
  char text[2048], first[512];
  snprintf(first, sizeof first, "%s%s", extra, *extra ? ", " : "");
  snprintf(text, sizeof text, good_config, first);
  return hf_parse_config(text, strlen(text), "d/config.json", c);
}

static void hf_config(void) {
  rx_hf_config c;
  expect(parse("", &c), NULL, "the tiny config");
  const struct {
    const char *extra, *want;
  } cases[] = {
      {"\"rope_theta\": 1e999",
       "d/config.json: 'rope_theta' is not a finite number (too large for a double): expected a "
       "number from 1e-06 to 1e+12"},
      {"\"max_position_embeddings\": -1e999", "'max_position_embeddings' is not a finite number"},
      {"\"partial_rotary_factor\": 0.1",
       "partial_rotary_factor 0.1 gives 0 rotary dims of head_dim 8: expected an even number, at "
       "least 2"},
      {"\"layer_types\": [\"sliding_attention\"]",
       "layer_types[0] 'sliding_attention' is not supported (supported: full_attention)"},
      {"\"layer_types\": [\"full_attention\", \"full_attention\"]",
       "'layer_types' must be a list of num_hidden_layers (1) layer kinds"},
      {"\"hidden_act\": \"gelu\"",
       "hidden_act 'gelu' is not supported (supported: silu, gelu_pytorch_tanh)"},
      /* the description's refusals, by name (issue 32) */
      {"\"architectures\": [\"Gemma3ForCausalLM\"], \"use_bidirectional_attention\": true",
       "use_bidirectional_attention true is not supported"},
      {"\"architectures\": [\"Gemma3ForCausalLM\"], \"hidden_activation\": \"relu\"",
       "hidden_activation 'relu' is not supported (supported: silu, gelu_pytorch_tanh)"},
      {"\"architectures\": [\"Phi3ForCausalLM\"], \"rope_scaling\": {\"type\": \"longrope\", "
       "\"original_max_position_embeddings\": 32, \"short_factor\": [1], \"long_factor\": [1, 2, "
       "3, 4]}",
       "rope_scaling.short_factor must be a list of 4 numbers (one per rotary pair of the 8 rotary "
       "dims)"},
      {"\"architectures\": [\"Phi3ForCausalLM\"], \"rope_scaling\": {\"type\": \"longrope\", "
       "\"short_factor\": [1, 1, 1, 1], \"long_factor\": [1, 2, 3, 4]}",
       "'original_max_position_embeddings' is missing"},
      {"\"architectures\": [\"Qwen3ForCausalLM\"], \"rope_scaling\": {\"rope_type\": \"dynamic\", "
       "\"factor\": 2}",
       "rope_scaling type 'dynamic' is not supported (supported: default, linear, llama3, "
       "longrope, yarn)"},
      {"\"architectures\": [\"Qwen3ForCausalLM\"], \"rope_parameters\": {\"rope_type\": "
       "\"default\", \"rope_theta\": 10000, \"partial_rotary_factor\": 0.4}",
       "partial_rotary_factor 0.4 gives 51 rotary dims of head_dim 128"},
      {"\"eos_token_id\": 32",
       "eos_token_id 32 is outside the vocabulary of 32 tokens (ids 0 to 31): generation would "
       "never stop at it"},
      {"\"eos_token_id\": [2, 40]", "eos_token_id [1] 40 is outside the vocabulary of 32 tokens"},
      {"\"bos_token_id\": 99", "bos_token_id 99 is outside the vocabulary of 32 tokens"},
      {"\"hidden_size\": 15", "hidden_size 15 is not a multiple of num_attention_heads 2"},
      {"\"head_dim\": 2048", "'head_dim' is 2048: expected an integer from 2 to 1024"},
  };
  for (size_t i = 0; i < RX_ARRAY_LEN(cases); i++)
    expect(parse(cases[i].extra, &c), cases[i].want, cases[i].extra);
  /* syntax errors name the line and the column */
  const char *bad = "{\"architectures\": [\"LlamaForCausalLM\"],\n  \"hidden_size\": 16,\n  x}";
  expect(hf_parse_config(bad, strlen(bad), "d/config.json", &c),
         "d/config.json:3:4: JSON syntax error at '}'", "syntax error");
  const char *cut = "{\"architectures\": [\"LlamaForCausalLM\"],\n  \"hidden_size\": 1";
  expect(hf_parse_config(cut, strlen(cut), "d/config.json", &c), "d/config.json:2:", "cut");
  const char *trail = "{\"vocab_size\": 3}\n}";
  expect(hf_parse_config(trail, strlen(trail), "d/config.json", &c),
         "d/config.json:2:1: JSON syntax error at '}'", "trailing text");
  /* generation_config.json's eos_token_id against the config's vocabulary */
  expect(parse("", &c), NULL, "the tiny config");
  const char *gen = "{\"eos_token_id\": [2, 32]}";
  expect(hf_parse_generation_config(gen, strlen(gen), "d/generation_config.json", &c),
         "d/generation_config.json: eos_token_id [1] 32 is outside the vocabulary of 32 tokens",
         "generation config");
}

/* The description the rows and keys make (issue 32): per-layer attention kinds as each
 * architecture derives them when config.json has no layer_types (published checkpoints of
 * transformers 4), Gemma 3's local rope base in either layout, the features of each row. */
static void hf_description(void) {
  static const char *const head =
      "{\"hidden_size\": 16, \"intermediate_size\": 32, \"num_attention_heads\": 2, "
      "\"num_key_value_heads\": 1, \"head_dim\": 8, \"vocab_size\": 32, "
      "\"max_position_embeddings\": 64, \"num_hidden_layers\": 6, ";
  static const struct {
    const char *rest;
    const char *local; /* local[l] of the 6 layers, '1' a sliding layer; NULL: no layer kinds */
    int64_t window;
  } cases[] = {
      /* Qwen2: windows from max_window_layers on, with use_sliding_window; none without */
      {"\"architectures\": [\"Qwen2ForCausalLM\"], \"use_sliding_window\": true, "
       "\"sliding_window\": 8, \"max_window_layers\": 4}",
       "000011", 8},
      {"\"architectures\": [\"Qwen2ForCausalLM\"], \"use_sliding_window\": false, "
       "\"sliding_window\": 8, \"max_window_layers\": 4}",
       NULL, 0},
      /* Gemma 2: every other layer local, from layer 0; Gemma 3: all but every 6th (or the
       * sliding_window_pattern of its older configs) */
      {"\"architectures\": [\"Gemma2ForCausalLM\"], \"sliding_window\": 4}", "101010", 4},
      {"\"architectures\": [\"Gemma3ForCausalLM\"], \"sliding_window\": 4}", "111110", 4},
      {"\"architectures\": [\"Gemma3ForCausalLM\"], \"sliding_window_pattern\": 3}", "110110",
       4096},
      /* layer_types, as transformers 5 writes it, wins */
      {"\"architectures\": [\"Gemma3ForCausalLM\"], \"layer_types\": [\"full_attention\", "
       "\"sliding_attention\", \"full_attention\", \"full_attention\", \"full_attention\", "
       "\"sliding_attention\"]}",
       "010001", 4096},
      /* Mistral and Phi-3: one window on every layer */
      {"\"architectures\": [\"MistralForCausalLM\"], \"sliding_window\": 8}", NULL, 8},
      {"\"architectures\": [\"Phi3ForCausalLM\"], \"sliding_window\": 8}", NULL, 8},
      /* transformers 5's MoE rules: Qwen2-MoE the layers below max_window_layers with l + 1
       * odd, Qwen3-MoE every layer; none without use_sliding_window (Mixtral: as Mistral) */
      {"\"architectures\": [\"Qwen2MoeForCausalLM\"], \"use_sliding_window\": true, "
       "\"sliding_window\": 8, \"max_window_layers\": 5, \"num_experts\": 4, "
       "\"num_experts_per_tok\": 2, \"moe_intermediate_size\": 8, "
       "\"shared_expert_intermediate_size\": 8}",
       "101010", 8},
      {"\"architectures\": [\"Qwen3MoeForCausalLM\"], \"use_sliding_window\": true, "
       "\"sliding_window\": 8, \"num_experts\": 4, \"num_experts_per_tok\": 2, "
       "\"moe_intermediate_size\": 8}",
       "111111", 8},
      {"\"architectures\": [\"Qwen3MoeForCausalLM\"], \"sliding_window\": 8, \"num_experts\": "
       "4, \"num_experts_per_tok\": 2, \"moe_intermediate_size\": 8}",
       NULL, 0},
      {"\"architectures\": [\"MixtralForCausalLM\"], \"sliding_window\": 8}", NULL, 8},
  };
  for (size_t i = 0; i < RX_ARRAY_LEN(cases); i++) {
    char text[2048];
    snprintf(text, sizeof text, "%s%s", head, cases[i].rest);
    rx_hf_config c;
    rx_status s = hf_parse_config(text, strlen(text), "d/config.json", &c);
    expect(s, NULL, cases[i].rest);
    CHECK_MSG(c.window == cases[i].window, "%s: window %lld", cases[i].rest, (long long)c.window);
    CHECK_MSG(c.layer_kinds == (cases[i].local != NULL), "%s: layer kinds", cases[i].rest);
    for (int l = 0; cases[i].local && l < 6; l++)
      CHECK_MSG(c.local[l] == (cases[i].local[l] == '1'), "%s: layer %d", cases[i].rest, l);
  }
  /* Gemma 3's local rope base: rope_local_base_freq, or rope_parameters.sliding_attention; its
   * features; Gemma 2's soft-caps by default; Phi-3's fused projections; Qwen3's q/k norms */
  const struct {
    const char *rest;
    double local_theta, theta, attn_cap, final_cap, attn_scale;
    bool qk_norm, fused, sandwich;
  } rows[] = {
      {"\"architectures\": [\"Gemma3ForCausalLM\"], \"rope_theta\": 50000, "
       "\"rope_local_base_freq\": 2000}",
       2000, 50000, 0, 0, 1 / 16.0, true, false, true},
      {"\"architectures\": [\"Gemma3ForCausalLM\"], \"query_pre_attn_scalar\": 64, "
       "\"rope_parameters\": {\"sliding_attention\": {\"rope_type\": \"default\", "
       "\"rope_theta\": 3000}, \"full_attention\": {\"rope_type\": \"default\", "
       "\"rope_theta\": 70000}}}",
       3000, 70000, 0, 0, 1 / 8.0, true, false, true},
      {"\"architectures\": [\"Gemma2ForCausalLM\"]}", 0, 10000, 50, 30, 1 / 16.0, false, false,
       true},
      {"\"architectures\": [\"Phi3ForCausalLM\"]}", 0, 10000, 0, 0, 0, false, true, false},
      {"\"architectures\": [\"Qwen3ForCausalLM\"]}", 0, 10000, 0, 0, 0, true, false, false},
  };
  for (size_t i = 0; i < RX_ARRAY_LEN(rows); i++) {
    char text[2048];
    snprintf(text, sizeof text, "%s%s", head, rows[i].rest);
    rx_hf_config c;
    expect(hf_parse_config(text, strlen(text), "d/config.json", &c), NULL, rows[i].rest);
    CHECK_MSG(c.rope_local_theta == rows[i].local_theta && c.rope_theta == rows[i].theta &&
                  c.attn_softcap == rows[i].attn_cap && c.final_softcap == rows[i].final_cap &&
                  fabs(c.attn_scale - rows[i].attn_scale) < 1e-12 && c.qk_norm == rows[i].qk_norm &&
                  c.fused_qkv == rows[i].fused && c.fused_gate_up == rows[i].fused &&
                  c.sandwich == rows[i].sandwich,
              "%s: local theta %g, theta %g, caps %g %g, scale %g, qk_norm %d, fused %d, "
              "sandwich %d",
              rows[i].rest, c.rope_local_theta, c.rope_theta, c.attn_softcap, c.final_softcap,
              c.attn_scale, c.qk_norm, c.fused_qkv, c.sandwich);
  }
}

/* The mixture-of-experts rows: each one's keys and defaults (transformers 5's MixtralConfig,
 * Qwen2MoeConfig, Qwen3MoeConfig), which layers are sparse, and the errors that name the key. */
static void hf_moe(void) {
  static const char *const head =
      "{\"hidden_size\": 16, \"intermediate_size\": 32, \"num_attention_heads\": 2, "
      "\"num_key_value_heads\": 1, \"vocab_size\": 32, \"num_hidden_layers\": 6, ";
  static const struct {
    const char *rest;
    int64_t experts, k, inter, shared;
    bool norm, bias;
    const char *sparse; /* sparse[l] of the 6 layers */
  } rows[] = {
      /* Mixtral: 8 experts, 2 per token, renormalized, of intermediate_size; jitter accepted */
      {"\"architectures\": [\"MixtralForCausalLM\"], \"router_jitter_noise\": 0.1}", 8, 2, 32, 0,
       true, false, "111111"},
      {"\"architectures\": [\"MixtralForCausalLM\"], \"num_local_experts\": 4, "
       "\"num_experts_per_tok\": 1}",
       4, 1, 32, 0, true, false, "111111"},
      /* Qwen2-MoE: the shared expert, q/k/v biases (qkv_bias), not renormalized by default;
       * mlp_only_layers and decoder_sparse_step */
      {"\"architectures\": [\"Qwen2MoeForCausalLM\"], \"num_experts\": 6, \"num_experts_per_tok\": "
       "3, \"moe_intermediate_size\": 8, \"shared_expert_intermediate_size\": 24, "
       "\"mlp_only_layers\": [0, 4], \"decoder_sparse_step\": 1}",
       6, 3, 8, 24, false, true, "011101"},
      {"\"architectures\": [\"Qwen2MoeForCausalLM\"], \"num_experts\": 6, \"num_experts_per_tok\": "
       "3, \"moe_intermediate_size\": 8, \"shared_expert_intermediate_size\": 24, "
       "\"qkv_bias\": false, \"norm_topk_prob\": true}",
       6, 3, 8, 24, true, false, "111111"},
      /* Qwen3-MoE: num_local_experts as transformers 5 writes it, decoder_sparse_step 2 */
      {"\"architectures\": [\"Qwen3MoeForCausalLM\"], \"num_local_experts\": 8, "
       "\"num_experts_per_tok\": 2, \"moe_intermediate_size\": 4, \"decoder_sparse_step\": 2}",
       8, 2, 4, 0, false, false, "010101"},
  };
  for (size_t i = 0; i < RX_ARRAY_LEN(rows); i++) {
    char text[2048];
    snprintf(text, sizeof text, "%s%s", head, rows[i].rest);
    rx_hf_config c;
    expect(hf_parse_config(text, strlen(text), "d/config.json", &c), NULL, rows[i].rest);
    CHECK_MSG(c.experts == rows[i].experts && c.top_k == rows[i].k &&
                  c.moe_inter == rows[i].inter && c.shared_inter == rows[i].shared &&
                  c.norm_topk == rows[i].norm && c.qkv_bias == rows[i].bias,
              "%s: experts %lld, k %lld, inter %lld, shared %lld, norm %d, bias %d", rows[i].rest,
              (long long)c.experts, (long long)c.top_k, (long long)c.moe_inter,
              (long long)c.shared_inter, c.norm_topk, c.qkv_bias);
    for (int l = 0; l < 6; l++)
      CHECK_MSG(c.sparse[l] == (rows[i].sparse[l] == '1'), "%s: layer %d", rows[i].rest, l);
  }
  static const struct {
    const char *rest, *want;
  } bad[] = {
      {"\"architectures\": [\"MixtralForCausalLM\"], \"num_local_experts\": 4, "
       "\"num_experts_per_tok\": 5}",
       "num_experts_per_tok 5 exceeds the 4 experts"},
      {"\"architectures\": [\"Qwen3MoeForCausalLM\"], \"num_experts\": 4, "
       "\"num_experts_per_tok\": 2}",
       "'moe_intermediate_size' is missing"},
      {"\"architectures\": [\"Qwen2MoeForCausalLM\"], \"num_experts\": 4, \"num_experts_per_tok\": "
       "2, \"moe_intermediate_size\": 8}",
       "'shared_expert_intermediate_size' is missing"},
      {"\"architectures\": [\"Qwen3MoeForCausalLM\"], \"num_experts\": 4, \"num_experts_per_tok\": "
       "2, \"moe_intermediate_size\": 8, \"mlp_only_layers\": [6]}",
       "mlp_only_layers[0] must be a layer index from 0 to 5"},
      {"\"architectures\": [\"Qwen3MoeForCausalLM\"], \"num_experts\": 0, \"num_experts_per_tok\": "
       "2, \"moe_intermediate_size\": 8}",
       "'num_experts' is 0: expected an integer from 1 to 4096"},
      {"\"architectures\": [\"DeepseekV3ForCausalLM\"]}",
       "Qwen2MoeForCausalLM, Qwen3MoeForCausalLM)"},
  };
  for (size_t i = 0; i < RX_ARRAY_LEN(bad); i++) {
    char text[2048];
    snprintf(text, sizeof text, "%s%s", head, bad[i].rest);
    rx_hf_config c;
    expect(hf_parse_config(text, strlen(text), "d/config.json", &c), bad[i].want, bad[i].rest);
  }
}

/* ---- a model folder's tokenizer.json, checked at compile time ---- */
static void write_file(const char *dir, const char *name, const char *text) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *fp = fopen(path, "w");
  CHECK_MSG(fp && fputs(text, fp) >= 0, "write %s", path);
  if (fp) fclose(fp);
}

static void hf_tokenizer(const char *tmp) {
  char dir[2048], cfg[2048];
  snprintf(dir, sizeof dir, "%s/hf_model", tmp);
  mkdir(dir, 0755);
  snprintf(cfg, sizeof cfg, good_config, "");
  write_file(dir, "config.json", cfg);
  const char *tok_fmt =
      "{\"version\": \"1.0\", \"added_tokens\": [], \"normalizer\": null, "
      "\"pre_tokenizer\": null, \"post_processor\": null, \"decoder\": null, "
      "\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": 1, \"ab\": %d}, "
      "\"merges\": [\"a %s\"]}}";
  const struct {
    int ab_id;
    const char *right, *want;
  } cases[] = {
      {2, "b", NULL},
      {2, "c", "tokenizer.json"}, /* a merge naming an unknown token */
      {40, "b", "the tokenizer has ids up to 40, past the model's vocabulary of 32 tokens"},
  };
  rx_hf_options o = {.no_weights = true};
  for (size_t i = 0; i < RX_ARRAY_LEN(cases); i++) {
    char tok[1024];
    snprintf(tok, sizeof tok, tok_fmt, cases[i].ab_id, cases[i].right);
    write_file(dir, "tokenizer.json", tok);
    rx_module *m = rx_module_new();
    expect(hf_import(m, dir, &o), cases[i].want, tok);
    rx_module_free(m);
  }
  char path[4096];
  snprintf(path, sizeof path, "%s/tokenizer.json", dir);
  unlink(path);
  snprintf(path, sizeof path, "%s/config.json", dir);
  unlink(path);
  rmdir(dir);
}

/* A sparse layer's stacked experts (frontends/gguf/experts.c): 2 experts of intermediate 32 over
 * hidden 16, gate rows numbered 1.., up rows -1.. (whole numbers: exact in f16); gate and up
 * interleaved per expert (each expert's 32 gate rows, then its 32 up rows) when both are f32 (the
 * file's rows copied) and when up is f16 (both dequantized to f32); down as the file holds it. */
static void gguf_experts(void) {
  enum { NE = 2, F = 32, H = 16, N = NE * F * H };
  static float gate[N], up[N], down[N];
  for (int i = 0; i < N; i++) gate[i] = (float)(i + 1), up[i] = -(float)(i + 1), down[i] = 0.5f;
  const kv over[] = {{"llama.expert_count", T_U32, NE, NULL},
                     {"llama.expert_used_count", T_U32, 1, NULL}};
  for (int f16 = 0; f16 < 2; f16++) {
    const tensor ts[] = {{"blk.0.ffn_gate_inp.weight", 2, {NE, H}, NULL, false},
                         {"blk.0.ffn_gate_exps.weight", 3, {NE, F, H}, gate, false},
                         {"blk.0.ffn_up_exps.weight", 3, {NE, F, H}, up, f16},
                         {"blk.0.ffn_down_exps.weight", 3, {NE, H, F}, down, false}};
    size_t len;
    char *img = image_with(over, 2, ts, 4, &len);
    rx_gguf_file f;
    rx_hf_config c;
    hf_gguf_experts x = {0}, d = {0};
    rx_status s = gguf_parse((const uint8_t *)img, len, "t.gguf", &f);
    if (!s) s = hf_gguf_read_config(&f, &c);
    if (!s) s = hf_gguf_experts_read(&f, &c, 0, true, &x);
    if (!s) s = hf_gguf_experts_read(&f, &c, 0, false, &d);
    expect(s, NULL, f16 ? "experts: gate f32, up f16" : "experts: f32");
    if (x.data) {
      bool ok = x.src == RX_DTYPE_F32 && !x.qi && x.row_bytes == H * 4 && x.owned && c.sparse[0] &&
                c.experts == NE && c.top_k == 1 && c.moe_inter == F && c.norm_topk;
      for (int e = 0; e < NE && ok; e++)
        for (int r = 0; r < 2 * F && ok; r++)
          for (int k = 0; k < H && ok; k++) {
            float got;
            memcpy(&got, x.data + (((size_t)e * 2 * F + (size_t)r) * H + (size_t)k) * 4, 4);
            int i = (e * F + r % F) * H + k; /* the file's element */
            ok = got == (r < F ? gate[i] : up[i]);
          }
      ok = ok && d.data && !d.owned && d.src == RX_DTYPE_F32 && d.row_bytes == F * 4;
      CHECK_MSG(ok, f16 ? "experts interleaved (gate f32, up f16)" : "experts interleaved (f32)");
      gguf_free(&f);
    }
    free(x.owned);
    free(img);
  }
}

int main(int argc, char **argv) {
  (void)argc;
  (void)argv;
  setvbuf(stdout, NULL, _IONBF, 0); /* every line out before an abort */
  char tmp[] = "/tmp/test_hf_limits.XXXXXX";
  if (!mkdtemp(tmp)) {
    printf("FAIL: mkdtemp\n");
    return 1;
  }
  gguf_bounds();
  gguf_consistency();
  gguf_unimplemented();
  gguf_description();
  gguf_tokenizer();
  gguf_import(tmp);
  gguf_rope_freqs(tmp);
  gguf_experts();
  hf_config();
  hf_description();
  hf_moe();
  hf_tokenizer(tmp);
  rmdir(tmp);
  return check_finish("test_hf_limits");
}
