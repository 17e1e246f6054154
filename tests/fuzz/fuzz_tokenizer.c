/* tests/fuzz/fuzz_tokenizer.c: libFuzzer harness of the runtime's tokenizer (runtime/llm/).
 *
 * An input that starts with '{' is a tokenizer.json: loaded (and read as a config.json too);
 * when it loads, a fixed text is encoded, decoded and streamed through it. Any other input is a
 * text (its first TEXT_MAX bytes) to encode with each tokenizer of tests/llm/tokenizers (loaded
 * once; the folder is compiled in as RX_FUZZ_TOKENIZERS, or given by the environment variable of
 * that name).
 *
 * What the tokenizer promises and the harness checks: ids inside the vocab; decoded text that is
 * valid UTF-8; a stream whose pieces are valid UTF-8 and, for ids that encode produced, join to
 * exactly the decoded text. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "relaxc/llm.h"
#include "runtime/llm/unicode.h"

/* strict UTF-8 (Unicode Table 3-7): the runtime's own validator */
static bool valid_utf8(const char *s, size_t n) { return uc_valid_prefix(s, n) == n; }

/* Encodes text, then checks decode and the stream against each other (flags of decode). */
static void round_trip(const rx_tokenizer *tok, const char *text, size_t len, int enc_flags,
                       int dec_flags) {
  int32_t *ids = NULL;
  size_t n = 0;
  rx_status s = rx_tokenizer_encode(tok, text, len, enc_flags, &ids, &n);
  if (s) {
    rx_status_free(s);
    return;
  }
  int32_t vocab = rx_tokenizer_vocab_size(tok);
  for (size_t i = 0; i < n; i++)
    if (ids[i] < 0 || ids[i] >= vocab) abort();
  char *out = NULL;
  size_t olen = 0;
  if ((s = rx_tokenizer_decode(tok, ids, n, dec_flags, &out, &olen)) != NULL) abort();
  if (!valid_utf8(out, olen) || out[olen] != 0) abort();
  rx_detokenizer *d = NULL;
  if ((s = rx_detokenizer_create(tok, dec_flags, &d)) != NULL) abort();
  size_t joined = 0;
  for (size_t i = 0; i <= n; i++) {
    const char *piece;
    size_t plen;
    s = i < n ? rx_detokenizer_push(d, ids[i], &piece, &plen)
              : rx_detokenizer_flush(d, &piece, &plen);
    if (s || !valid_utf8(piece, plen)) abort();
    if (joined + plen > olen || memcmp(out + joined, piece, plen) != 0) abort();
    joined += plen;
  }
  if (joined != olen) abort();
  rx_detokenizer_free(d);
  rx_llm_free(out);
  rx_llm_free(ids);
}

/* Texts are cut to this many bytes: each goes through nine tokenizers, encoded, decoded and
 * streamed twice, and a 13 KB text (the size of the JSON seeds) took seconds under the
 * sanitizers; long texts are no different from short ones to the code. */
#define TEXT_MAX 1024

static const char *const KINDS[] = {
    "gpt2",           "llama3",     "qwen2",     "llama2",
    "mistral",        "spm_digits", "split_mix", "byte_level_prefix",
    "metaspace_never"};
#define NKINDS (sizeof KINDS / sizeof KINDS[0])
static rx_tokenizer *fixtures[NKINDS];

static void load_fixtures(void) {
  static int done;
  if (done) return;
  done = 1;
  const char *dir = getenv("RX_FUZZ_TOKENIZERS");
#ifdef RX_FUZZ_TOKENIZERS
  if (!dir) dir = RX_FUZZ_TOKENIZERS;
#endif
  for (size_t i = 0; dir && i < NKINDS; i++) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s.tokenizer.json", dir, KINDS[i]);
    rx_status s = rx_tokenizer_load_file(path, &fixtures[i]);
    if (s) {
      fprintf(stderr, "fuzz_tokenizer: %s\n", rx_status_message(s));
      abort();
    }
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *bytes = malloc(size ? size : 1);
  if (!bytes) return 0;
  if (size) memcpy(bytes, data, size);
  if (size && bytes[0] == '{') {
    rx_tokenizer *tok = NULL;
    rx_status s = rx_tokenizer_load(bytes, size, "fuzz/tokenizer.json", &tok);
    if (!s) {
      static const char text[] = "Hello <s> w\xc3\xb6rld  12345\n\n\xe4\xbd\xa0\xe5\xa5\xbd "
                                 "\xf0\x9f\x98\x80 e\xcc\x81 don't";
      round_trip(tok, text, sizeof text - 1, RX_TOKENIZER_ADD_SPECIAL, 0);
      round_trip(tok, text, sizeof text - 1, 0, RX_TOKENIZER_SKIP_SPECIAL);
      rx_status_free(rx_tokenizer_set_config(tok, bytes, size, "fuzz/config.json"));
      const int32_t *eos;
      size_t neos = rx_tokenizer_eos_ids(tok, &eos);
      for (size_t i = 0; i < neos; i++)
        if (eos[i] < 0 || eos[i] >= rx_tokenizer_vocab_size(tok)) abort();
    }
    rx_status_free(s);
    rx_tokenizer_free(tok);
  } else {
    load_fixtures();
    if (size > TEXT_MAX) size = TEXT_MAX;
    for (size_t i = 0; i < NKINDS; i++) {
      if (!fixtures[i]) continue;
      round_trip(fixtures[i], bytes, size, RX_TOKENIZER_ADD_SPECIAL, 0);
      round_trip(fixtures[i], bytes, size, 0, RX_TOKENIZER_SKIP_SPECIAL);
    }
  }
  free(bytes);
  return 0;
}
