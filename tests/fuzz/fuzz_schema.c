/* tests/fuzz/fuzz_schema.c: libFuzzer harness of structured output's schema compiler and
 * automaton (runtime/llm/grammar*.c, rx_llm_grammar_* and rx_llm_matcher_* of relaxc/llm.h).
 *
 * An input is a JSON schema's text, compiled against the tiny test model's tokenizer
 * (tests/llm/models/kjv-llama). A refusal must be an RX_ERR_INVALID or RX_ERR_UNSUPPORTED error
 * whose message starts "json schema:" and no grammar. An accepted schema's matcher is walked for
 * up to 64 tokens, each one chosen among those its mask allows (the k-th allowed, k from the
 * step): every chosen token must be accepted, the mask's count must equal its bits, and EOS be
 * allowed exactly when the matcher accepts. The same input is also fed byte by byte to
 * json_object's matcher: bytes it accepts to the end as a whole value must parse as a JSON
 * object (cJSON). */
#include <cjson/cJSON.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "relaxc/llm.h"

#ifndef RX_FUZZ_SCHEMA_TOKENIZER
#define RX_FUZZ_SCHEMA_TOKENIZER "tests/llm/models/kjv-llama/tokenizer.json"
#endif

static rx_tokenizer *tok;
static rx_llm_grammar *any_object;

static void setup(void) {
  if (tok) return;
  rx_status s = rx_tokenizer_load_file(RX_FUZZ_SCHEMA_TOKENIZER, &tok);
  if (s || rx_llm_grammar_compile(tok, NULL, 0, &any_object)) abort();
}

static void walk(rx_llm_grammar *g) {
  int32_t vocab = rx_tokenizer_vocab_size(tok);
  uint32_t *bits = calloc(((size_t)vocab + 31) / 32, sizeof *bits);
  rx_llm_matcher *m = NULL;
  if (!bits || rx_llm_matcher_create(g, &m)) abort();
  for (int step = 0; step < 64; step++) {
    size_t count = 0, pop = 0;
    if (rx_llm_matcher_fill_mask(m, bits, vocab, &count)) abort();
    for (size_t w = 0; w < ((size_t)vocab + 31) / 32; w++)
      pop += (size_t)__builtin_popcount(bits[w]);
    if (pop != count) abort();
    const int32_t *eos = NULL;
    size_t neos = rx_tokenizer_eos_ids(tok, &eos);
    for (size_t i = 0; i < neos; i++)
      if ((bits[eos[i] / 32] >> (eos[i] % 32) & 1) != rx_llm_matcher_is_accepting(m)) abort();
    if (!count) break;
    size_t k = ((size_t)step * 7919u) % count;
    int32_t id = -1;
    for (int32_t t = 0; t < vocab && id < 0; t++)
      if (bits[t / 32] >> (t % 32) & 1 && k-- == 0) id = t;
    if (rx_tokenizer_is_eos(tok, id)) break;
    rx_status s = rx_llm_matcher_accept_token(m, id);
    if (s) abort();
  }
  rx_llm_matcher_free(m);
  free(bits);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size > 16 * 1024) return 0; /* a request body's schema is small */
  setup();
  rx_llm_grammar *g = NULL;
  rx_status s = rx_llm_grammar_compile(tok, (const char *)data, size, &g);
  if (s) {
    rx_status_code c = rx_status_code_of(s);
    const char *msg = rx_status_message(s);
    if (g || (c != RX_ERR_INVALID && c != RX_ERR_UNSUPPORTED) || strncmp(msg, "json schema:", 12))
      abort();
    rx_status_free(s);
  } else {
    walk(g);
    rx_llm_grammar_free(g);
  }
  rx_llm_matcher *m = NULL;
  if (rx_llm_matcher_create(any_object, &m)) abort();
  size_t i = 0;
  while (i < size && rx_llm_matcher_accept_bytes(m, (const char *)data + i, 1)) i++;
  if (i == size && rx_llm_matcher_is_accepting(m)) {
    cJSON *v = cJSON_ParseWithLength((const char *)data, size);
    if (!cJSON_IsObject(v)) abort();
    cJSON_Delete(v);
  }
  rx_llm_matcher_free(m);
  return 0;
}
