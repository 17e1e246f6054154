/* The runtime's tokenizer and sampler (runtime/llm/, include/relaxc/llm.h).
 *
 * Tokenizer: every tokenizer.json of tests/llm/tokenizers/ (made by gen.py with Hugging Face's
 * tokenizers: one per family, and three for the options the families leave out) against every case
 * of cases.json, exactly: the ids of each text with and without the template's special tokens, the
 * decoded text with and without special tokens, the streaming detokenizer fed one id at a time (its
 * pieces complete UTF-8, joined equal to the decoded text), and the decoding of id sequences that
 * split characters, hold invalid UTF-8 or unknown ids. Then lookups, BOS / EOS (from the template,
 * the names, a config), and files the loader refuses, each with a message naming the file and the
 * place.
 *
 * GGUF tokenizers (frontends/gguf/model.c rewrites tokenizer.ggml.* as a tokenizer.json): every
 * case of tests/gguf/tokenizers/cases.json (made by gen.py there), exactly: a SentencePiece model
 * ("llama") against the sentencepiece library's ids and decoding, byte-level BPE with the
 * pre-tokenizers "llama-bpe" and "qwen2" against tokenizers' on the files they came from; then
 * the files the rewrite refuses, each naming the file and the key.
 *
 * Sampler: greedy is argmax; top-k 1 is greedy; a seed gives a fixed sequence (the same on every
 * platform: the values are written here); at temperature 1 the frequencies of many draws match
 * the softmax (chi-square below the 0.1% critical value); top-p keeps the smallest set over p;
 * the repetition penalty divides positive and multiplies negative logits, once per id.
 *
 * usage: test_tokenizer TESTS_DIR */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "check.h"
#include "frontends/gguf/gguf.h"
#include "frontends/hf/hf_int.h"
#include "relaxc/llm.h"
#include "runtime/llm/unicode.h"

/* ---- fixture helpers ---- */
/* A hex string's bytes (heap, NUL-terminated; *n set). */
static char *unhex(const char *hex, size_t *n) {
  size_t len = strlen(hex) / 2;
  char *out = malloc(len + 1);
  for (size_t i = 0; i < len; i++) {
    unsigned v;
    sscanf(hex + 2 * i, "%2x", &v);
    out[i] = (char)v;
  }
  out[len] = 0;
  *n = len;
  return out;
}

static int32_t *ids_of(const cJSON *arr, size_t *n) {
  *n = (size_t)cJSON_GetArraySize(arr);
  int32_t *ids = malloc((*n + 1) * sizeof *ids);
  const cJSON *e;
  size_t i = 0;
  cJSON_ArrayForEach(e, arr) ids[i++] = (int32_t)e->valuedouble;
  return ids;
}

static void print_ids(const char *what, const int32_t *ids, size_t n) {
  printf("  %s:", what);
  for (size_t i = 0; i < n; i++) printf(" %d", (int)ids[i]);
  printf("\n");
}

/* strict UTF-8 (Unicode Table 3-7): the runtime's own validator */
static bool valid_utf8(const char *s, size_t n) { return uc_valid_prefix(s, n) == n; }

/* Feeds ids one at a time; every piece must be complete UTF-8; returns the pieces joined. */
static char *stream(const rx_tokenizer *tok, const int32_t *ids, size_t n, int flags, bool *ok,
                    size_t *len) {
  rx_detokenizer *d = NULL;
  rx_status s = rx_detokenizer_create(tok, flags, &d);
  rx_strbuf all = {0};
  base_strbuf_appendn(&all, "", 0);
  *ok = !s;
  for (size_t i = 0; *ok && i <= n; i++) {
    const char *piece;
    size_t plen;
    s = i < n ? rx_detokenizer_push(d, ids[i], &piece, &plen)
              : rx_detokenizer_flush(d, &piece, &plen);
    *ok = !s && valid_utf8(piece, plen) && strlen(piece) <= plen;
    if (*ok) base_strbuf_appendn(&all, piece, plen);
  }
  rx_status_free(s);
  rx_detokenizer_free(d);
  *len = all.len;
  return base_strbuf_take(&all);
}

/* decode(ids, flags) == want, and the stream joined too (when stream_equal) */
static void check_decode(const rx_tokenizer *tok, const char *kind, size_t k, const int32_t *ids,
                         size_t n, int flags, const char *want_hex, bool stream_equal) {
  size_t wlen, glen, slen;
  char *want = unhex(want_hex, &wlen), *got = NULL;
  rx_status s = rx_tokenizer_decode(tok, ids, n, flags, &got, &glen);
  CHECK_MSG(!s && glen == wlen && memcmp(got, want, wlen) == 0 && got[glen] == 0,
            "%s case %zu: decode(flags %d) gives '%s' (%zu bytes), tokenizers '%s'", kind, k, flags,
            s ? rx_status_message(s) : got, glen, want);
  bool ok;
  char *joined = stream(tok, ids, n, flags, &ok, &slen);
  CHECK_MSG(ok, "%s case %zu: the stream (flags %d) gives an error or incomplete UTF-8", kind, k,
            flags);
  if (stream_equal)
    CHECK_MSG(slen == wlen && memcmp(joined, want, wlen) == 0,
              "%s case %zu: the stream (flags %d) joins to '%s', decode gives '%s'", kind, k, flags,
              joined, want);
  rx_status_free(s);
  rx_llm_free(got);
  free(joined);
  free(want);
}

static void check_encode(const rx_tokenizer *tok, const char *kind, size_t k, const char *text,
                         size_t tlen, int flags, const cJSON *want_arr) {
  size_t wn, gn;
  int32_t *want = ids_of(want_arr, &wn), *got = NULL;
  rx_status s = rx_tokenizer_encode(tok, text, tlen, flags, &got, &gn);
  bool same = !s && gn == wn && memcmp(got, want, wn * sizeof *want) == 0;
  CHECK_MSG(same, "%s case %zu: encode(flags %d) of '%s' differs from tokenizers (%s)", kind, k,
            flags, text, s ? rx_status_message(s) : "ids below");
  if (!same && !s) {
    print_ids("relaxc    ", got, gn);
    print_ids("tokenizers", want, wn);
  }
  rx_status_free(s);
  rx_llm_free(got);
  free(want);
}

static void check_kind(const char *dir, const char *kind, const cJSON *spec, const cJSON *texts) {
  char path[2048];
  snprintf(path, sizeof path, "%s/%s", dir, cJSON_GetObjectItem(spec, "file")->valuestring);
  rx_tokenizer *tok = NULL;
  rx_status s = rx_tokenizer_load_file(path, &tok);
  CHECK_MSG(!s, "%s: %s", path, s ? rx_status_message(s) : "");
  rx_status_free(s);
  if (!tok) return;
  int vocab = (int)cJSON_GetObjectItem(spec, "vocab_size")->valuedouble;
  CHECK_MSG(rx_tokenizer_vocab_size(tok) == vocab, "%s: vocab size %d, tokenizers %d", kind,
            (int)rx_tokenizer_vocab_size(tok), vocab);
  const cJSON *c;
  size_t k = 0;
  cJSON_ArrayForEach(c, cJSON_GetObjectItem(spec, "encode")) {
    size_t tlen;
    char *text = unhex(cJSON_GetArrayItem(texts, (int)k)->valuestring, &tlen);
    size_t n;
    int32_t *ids = ids_of(cJSON_GetObjectItem(c, "ids"), &n);
    check_encode(tok, kind, k, text, tlen, RX_TOKENIZER_ADD_SPECIAL, cJSON_GetObjectItem(c, "ids"));
    check_encode(tok, kind, k, text, tlen, 0, cJSON_GetObjectItem(c, "plain"));
    check_decode(tok, kind, k, ids, n, 0, cJSON_GetObjectItem(c, "text")->valuestring, true);
    check_decode(tok, kind, k, ids, n, RX_TOKENIZER_SKIP_SPECIAL,
                 cJSON_GetObjectItem(c, "text_skip")->valuestring, true);
    free(ids);
    free(text);
    k++;
  }
  k = 0;
  cJSON_ArrayForEach(c, cJSON_GetObjectItem(spec, "decode")) {
    size_t n;
    int32_t *ids = ids_of(cJSON_GetObjectItem(c, "ids"), &n);
    /* arbitrary ids: the stream's pieces must be complete UTF-8; equal joined is not promised */
    check_decode(tok, kind, 1000 + k, ids, n, 0, cJSON_GetObjectItem(c, "text")->valuestring,
                 false);
    check_decode(tok, kind, 1000 + k, ids, n, RX_TOKENIZER_SKIP_SPECIAL,
                 cJSON_GetObjectItem(c, "text_skip")->valuestring, false);
    free(ids);
    k++;
  }
  rx_tokenizer_free(tok);
}

/* dir/cases.json parsed, or NULL (a failed check). */
static cJSON *read_cases(const char *dir) {
  char path[1100];
  snprintf(path, sizeof path, "%s/cases.json", dir);
  char *text = NULL;
  size_t len;
  rx_status s = base_read_file(path, &text, &len);
  CHECK_MSG(!s, "%s", s ? rx_status_message(s) : "");
  rx_status_free(s);
  cJSON *root = text ? cJSON_ParseWithLength(text, len) : NULL;
  CHECK_MSG(!text || root != NULL, "%s: malformed", path);
  free(text);
  return root;
}

static void fixtures(const char *tests_dir) {
  char dir[1024];
  snprintf(dir, sizeof dir, "%s/llm/tokenizers", tests_dir);
  cJSON *root = read_cases(dir);
  if (!root) return;
  const cJSON *kinds = cJSON_GetObjectItem(root, "kinds"), *k;
  const cJSON *texts = cJSON_GetObjectItem(root, "texts_hex");
  int n = 0;
  cJSON_ArrayForEach(k, kinds) {
    check_kind(dir, k->string, k, texts);
    n++;
  }
  CHECK_MSG(n == 9, "cases.json has %d tokenizers, expected 9", n);
  printf("fixtures: %d tokenizers x %d texts from tokenizers %s\n", n, cJSON_GetArraySize(texts),
         cJSON_GetObjectItem(root, "tokenizers_version")->valuestring);
  cJSON_Delete(root);
}

/* ---- GGUF tokenizers ---- */
/* The tokenizer.json of a GGUF file's tokenizer.ggml.*, or the rewrite's error. */
static rx_status gguf_tokenizer(const char *path, rx_strbuf *json) {
  rx_mapped_file map = {0};
  rx_gguf_file f = {0};
  rx_hf_config c;
  rx_status s = base_map_file(path, &map);
  if (!s) s = gguf_parse(map.data, map.size, path, &f);
  if (!s) s = hf_gguf_read_config(&f, &c);
  if (!s) s = hf_gguf_tokenizer_json(&f, &c, json);
  gguf_free(&f);
  base_unmap_file(&map);
  return s;
}

static void check_gguf(const char *dir, const char *file, const cJSON *spec, const cJSON *texts) {
  char path[2048];
  snprintf(path, sizeof path, "%s/%s", dir, file);
  rx_strbuf json = {0};
  rx_tokenizer *tok = NULL;
  rx_status s = gguf_tokenizer(path, &json);
  if (!s) s = rx_tokenizer_load(json.data, json.len, file, &tok);
  CHECK_MSG(!s, "%s: %s", path, s ? rx_status_message(s) : "");
  rx_status_free(s);
  base_strbuf_free(&json);
  if (!tok) return;
  const cJSON *c;
  int n = 0;
  cJSON_ArrayForEach(c, cJSON_GetObjectItem(spec, "cases")) {
    size_t k = (size_t)cJSON_GetObjectItem(c, "text")->valuedouble, tlen, nplain;
    char *text = unhex(cJSON_GetArrayItem(texts, (int)k)->valuestring, &tlen);
    int32_t *plain = ids_of(cJSON_GetObjectItem(c, "plain"), &nplain);
    check_encode(tok, file, k, text, tlen, RX_TOKENIZER_ADD_SPECIAL, cJSON_GetObjectItem(c, "ids"));
    check_encode(tok, file, k, text, tlen, 0, cJSON_GetObjectItem(c, "plain"));
    check_decode(tok, file, k, plain, nplain, 0, cJSON_GetObjectItem(c, "text_hex")->valuestring,
                 true);
    free(plain);
    free(text);
    n++;
  }
  CHECK_MSG(n >= 80, "%s: %d cases, expected at least 80", file, n);
  printf("gguf: %s, %d texts against %s\n", file, n,
         cJSON_GetObjectItem(spec, "reference")->valuestring);
  rx_tokenizer_free(tok);
}

/* A file the rewrite refuses, with a message holding want. */
static void gguf_refused(const char *dir, const char *file, const char *want) {
  char path[2048];
  snprintf(path, sizeof path, "%s/%s", dir, file);
  rx_strbuf json = {0};
  rx_status s = gguf_tokenizer(path, &json);
  CHECK_MSG(s && strstr(rx_status_message(s), file) && strstr(rx_status_message(s), want),
            "%s: '%s', expected an error holding '%s'", file, s ? rx_status_message(s) : "no error",
            want);
  rx_status_free(s);
  base_strbuf_free(&json);
}

static void gguf_fixtures(const char *tests_dir) {
  char dir[1024];
  snprintf(dir, sizeof dir, "%s/gguf/tokenizers", tests_dir);
  cJSON *root = read_cases(dir);
  if (!root) return;
  const cJSON *files = cJSON_GetObjectItem(root, "files"), *f;
  int n = 0;
  cJSON_ArrayForEach(f, files) {
    check_gguf(dir, f->string, f, cJSON_GetObjectItem(root, "texts_hex"));
    n++;
  }
  CHECK_MSG(n == 4, "%s/cases.json has %d files, expected 4", dir, n);
  cJSON_Delete(root);
  gguf_refused(dir, "bad-pre.gguf",
               "tokenizer.ggml.pre 'falcon' is not supported (supported: default, gpt-2, llama3");
  gguf_refused(dir, "bad-scores.gguf", "tokenizer.ggml.scores");
  gguf_refused(dir, "bad-dup.gguf",
               "tokenizer.ggml.tokens[4] and [5] are both 'ab': expected distinct tokens");
  gguf_refused(dir, "bad-type.gguf",
               "tokenizer.ggml.token_type[2] is 7: expected 1 (normal) to 6 (byte)");
  gguf_refused(dir, "bad-model.gguf", "tokenizer.ggml.model 'bert' is not supported");
}

/* Strip after Fuse strips the front of the whole text: with start 2 or 3 the characters it takes
 * can come from more than the stream's first token (found by fuzz_tokenizer). The llama2 fixture
 * with its Strip's counts changed; the texts are those the tokenizers library decodes (ids: 335
 * "▁", 277 "a", 278 "b"). */
static void strip_stream(const char *tests_dir) {
  static const int32_t seqs[][6] = {
      {335, 335, 277, 335, 335, 278}, {335, 277, -1},      {335, 335, 335, 335, 278, -1},
      {277, 335, 335, 278, -1},       {335, 335, 335, -1}, {335, 335, 277, 335, -1}};
  static const struct {
    int start, stop;
    const char *want[6];
  } cases[] = {
      {1, 0, {" a  b", "a", "   b", "a  b", "  ", " a "}},
      {2, 0, {"a  b", "a", "  b", "a  b", " ", "a "}},
      {3, 0, {"a  b", "a", " b", "a  b", "", "a "}},
      {2, 1, {"a  b", "a", "  b", "a  b", "", "a"}},
      {1, 1, {" a  b", "a", "   b", "a  b", " ", " a"}},
  };
  char path[1024], *text = NULL;
  size_t len;
  snprintf(path, sizeof path, "%s/llm/tokenizers/llama2.tokenizer.json", tests_dir);
  rx_status s = base_read_file(path, &text, &len);
  CHECK_MSG(!s, "%s: %s", path, s ? rx_status_message(s) : "");
  rx_status_free(s);
  static const char strip[] = "{\"type\":\"Strip\",\"content\":\" \",\"start\":1,\"stop\":0}";
  char *at = text ? strstr(text, strip) : NULL;
  CHECK_MSG(at, "%s: no Strip decoder", path);
  for (size_t c = 0; at && c < sizeof cases / sizeof cases[0]; c++) {
    at[sizeof strip - 12] = (char)('0' + cases[c].start); /* the digits of start and stop */
    at[sizeof strip - 3] = (char)('0' + cases[c].stop);
    rx_tokenizer *tok = NULL;
    s = rx_tokenizer_load(text, len, path, &tok);
    CHECK_MSG(!s, "strip %d/%d: %s", cases[c].start, cases[c].stop, s ? rx_status_message(s) : "");
    rx_status_free(s);
    for (size_t k = 0; tok && k < sizeof seqs / sizeof seqs[0]; k++) {
      size_t n = 0, hexn = 0;
      while (n < 6 && seqs[k][n] >= 0) n++;
      char hex[64];
      for (const char *w = cases[c].want[k]; *w; w++)
        hexn += (size_t)snprintf(hex + hexn, 3, "%02x", (unsigned char)*w);
      hex[hexn] = 0;
      char kind[64];
      snprintf(kind, sizeof kind, "llama2 with Strip start %d stop %d", cases[c].start,
               cases[c].stop);
      check_decode(tok, kind, k, seqs[k], n, 0, hex, true);
    }
    rx_tokenizer_free(tok);
  }
  free(text);
}

/* ---- lookups, BOS and EOS ---- */
static rx_tokenizer *load_kind(const char *tests_dir, const char *kind) {
  char path[1024];
  snprintf(path, sizeof path, "%s/llm/tokenizers/%s.tokenizer.json", tests_dir, kind);
  rx_tokenizer *tok = NULL;
  rx_status s = rx_tokenizer_load_file(path, &tok);
  CHECK_MSG(!s, "%s: %s", path, s ? rx_status_message(s) : "");
  rx_status_free(s);
  return tok;
}

static int32_t id_of(const rx_tokenizer *tok, const char *token) {
  return rx_tokenizer_token_to_id(tok, token, strlen(token));
}

static void check_eos(const rx_tokenizer *tok, const char *kind, const char *const *want,
                      size_t nwant) {
  const int32_t *ids;
  size_t n = rx_tokenizer_eos_ids(tok, &ids);
  bool same = n == nwant;
  for (size_t i = 0; same && i < n; i++) same = ids[i] == id_of(tok, want[i]);
  CHECK_MSG(same, "%s: %zu EOS ids (first %d), expected %zu (%s)", kind, n, n ? (int)ids[0] : -1,
            nwant, nwant ? want[0] : "none");
  for (size_t i = 0; i < nwant; i++)
    CHECK_MSG(rx_tokenizer_is_eos(tok, id_of(tok, want[i])), "%s: %s is EOS", kind, want[i]);
}

static void lookups(const char *tests_dir) {
  static const struct {
    const char *kind, *bos, *eos[2];
    size_t neos;
  } expect[] = {
      {"gpt2", NULL, {"<|endoftext|>"}, 1},
      {"llama3", "<|begin_of_text|>", {"<|end_of_text|>"}, 1},
      {"qwen2", NULL, {"<|endoftext|>"}, 1},
      {"llama2", "<s>", {"</s>"}, 1},
      {"mistral", "<s>", {"</s>"}, 1},
      {"spm_digits", "<s>", {"</s>"}, 1},
      {"byte_level_prefix", NULL, {"<|endoftext|>"}, 1},
      {"split_mix", "<|begin_of_text|>", {"<|end_of_text|>"}, 1},
      {"metaspace_never", NULL, {"</s>"}, 1},
  };
  for (size_t i = 0; i < RX_ARRAY_LEN(expect); i++) {
    rx_tokenizer *tok = load_kind(tests_dir, expect[i].kind);
    if (!tok) continue;
    int32_t bos = rx_tokenizer_bos_id(tok);
    CHECK_MSG(bos == (expect[i].bos ? id_of(tok, expect[i].bos) : -1) &&
                  (!expect[i].bos || bos >= 0),
              "%s: BOS %d", expect[i].kind, (int)bos);
    check_eos(tok, expect[i].kind, expect[i].eos, expect[i].neos);
    /* every id's text maps back to it, unless an added token shadows a model token */
    int32_t v = rx_tokenizer_vocab_size(tok), mismatches = 0;
    for (int32_t id = 0; id < v; id++) {
      size_t n;
      const char *t = rx_tokenizer_id_to_token(tok, id, &n);
      if (!t || rx_tokenizer_token_to_id(tok, t, n) != id) mismatches++;
    }
    CHECK_MSG(mismatches <= 1, "%s: %d ids whose text maps elsewhere", expect[i].kind,
              (int)mismatches);
    CHECK_MSG(!rx_tokenizer_id_to_token(tok, -1, NULL) && !rx_tokenizer_id_to_token(tok, v, NULL),
              "%s: ids outside the vocab have no text", expect[i].kind);
    CHECK_MSG(id_of(tok, "no such token \xe2\x80\xa6") == -1, "%s: unknown token", expect[i].kind);
    rx_tokenizer_free(tok);
  }
  rx_tokenizer *tok = load_kind(tests_dir, "llama2");
  if (tok) {
    size_t n;
    const char *t = rx_tokenizer_id_to_token(tok, id_of(tok, "God said"), &n);
    /* a normalized added token reads as its normalized form, as in the library */
    CHECK_MSG(t && strcmp(t, "\xe2\x96\x81God\xe2\x96\x81said") == 0,
              "llama2: 'God said' reads '%s'", t ? t : "(none)");
    CHECK_MSG(id_of(tok, "<0x0A>") == 3 + 0x0A, "llama2: <0x0A> is id %d",
              (int)id_of(tok, "<0x0A>"));
    CHECK_MSG(rx_tokenizer_is_special(tok, 1) &&
                  !rx_tokenizer_is_special(tok, id_of(tok, "God said")),
              "llama2: <s> is special, 'God said' is not");
    rx_tokenizer_free(tok);
  }
}

static void config(const char *tests_dir) {
  rx_tokenizer *tok = load_kind(tests_dir, "llama3");
  if (!tok) return;
  int32_t eot = id_of(tok, "<|eot_id|>"), end = id_of(tok, "<|end_of_text|>");
  char json[256];
  snprintf(json, sizeof json, "{\"bos_token_id\": 3, \"eos_token_id\": [%d, %d]}", (int)end,
           (int)eot);
  rx_status s = rx_tokenizer_set_config(tok, json, strlen(json), "generation_config.json");
  const int32_t *ids;
  size_t n = rx_tokenizer_eos_ids(tok, &ids);
  CHECK_MSG(!s && rx_tokenizer_bos_id(tok) == 3 && n == 2 && ids[0] == end && ids[1] == eot &&
                rx_tokenizer_is_eos(tok, eot),
            "config's eos_token_id list and bos_token_id: %s", s ? rx_status_message(s) : "");
  rx_status_free(s);
  snprintf(json, sizeof json, "{\"eos_token_id\": %d, \"bos_token_id\": null}", (int)eot);
  s = rx_tokenizer_set_config(tok, json, strlen(json), "config.json");
  n = rx_tokenizer_eos_ids(tok, &ids);
  CHECK_MSG(!s && n == 1 && ids[0] == eot && rx_tokenizer_bos_id(tok) == 3,
            "a single eos_token_id");
  rx_status_free(s);
  static const char *const bad[][2] = {
      {"{\"eos_token_id\": 999999}", "eos_token_id"},
      {"{\"eos_token_id\": [1, -2]}", "eos_token_id[1]"},
      {"{\"bos_token_id\": \"x\"}", "bos_token_id"},
      {"[1]", "not a JSON object"},
      {"{\"eos_token_id\": ", "config.json:1:"},
  };
  for (size_t i = 0; i < RX_ARRAY_LEN(bad); i++) {
    s = rx_tokenizer_set_config(tok, bad[i][0], strlen(bad[i][0]), "config.json");
    CHECK_MSG(s && rx_status_code_of(s) == RX_ERR_INVALID &&
                  strstr(rx_status_message(s), bad[i][1]) &&
                  strstr(rx_status_message(s), "config.json"),
              "config %s: expected an error naming '%s', got '%s'", bad[i][0], bad[i][1],
              s ? rx_status_message(s) : "success");
    rx_status_free(s);
  }
  rx_tokenizer_free(tok);
}

/* ---- files and texts the tokenizer refuses ---- */
#define MINI_VOCAB "\"vocab\": {\"a\": 0, \"b\": 1, \"ab\": 2}"
#define MINI(merges, rest)                                                                         \
  "{\"model\": {\"type\": \"BPE\", " MINI_VOCAB ", \"merges\": " merges "}" rest "}"

static void refused(const char *json, rx_status_code code, const char *want) {
  rx_tokenizer *tok = (rx_tokenizer *)1;
  rx_status s = rx_tokenizer_load(json, strlen(json), "bad.json", &tok);
  CHECK_MSG(s && rx_status_code_of(s) == code && strstr(rx_status_message(s), want) &&
                strstr(rx_status_message(s), "bad.json") && tok == NULL,
            "%s: expected error %d containing '%s', got '%s'", json, (int)code, want,
            s ? rx_status_message(s) : "success");
  rx_status_free(s);
}

static void errors(void) {
  /* the smallest file works: no pre-tokenizer, no decoder (tokens joined with spaces) */
  const char *mini = MINI("[\"a b\"]", "");
  rx_tokenizer *tok = NULL;
  rx_status s = rx_tokenizer_load(mini, strlen(mini), "mini.json", &tok);
  int32_t *ids = NULL;
  size_t n = 0;
  char *text = NULL;
  size_t tlen = 0;
  if (!s) s = rx_tokenizer_encode(tok, "abab", 4, RX_TOKENIZER_ADD_SPECIAL, &ids, &n);
  if (!s) s = rx_tokenizer_decode(tok, ids, n, 0, &text, &tlen);
  CHECK_MSG(!s && n == 2 && ids[0] == 2 && ids[1] == 2 && text && strcmp(text, "ab ab") == 0,
            "mini: %s", s ? rx_status_message(s) : "wrong ids or text");
  rx_status_free(s);
  rx_llm_free(ids);
  rx_llm_free(text);
  /* invalid UTF-8 to encode: an error naming the byte */
  s = rx_tokenizer_encode(tok, "ab\xc3(", 4, 0, &ids, &n);
  CHECK_MSG(s && rx_status_code_of(s) == RX_ERR_INVALID && strstr(rx_status_message(s), "byte 2") &&
                ids == NULL && n == 0,
            "invalid UTF-8: %s", s ? rx_status_message(s) : "accepted");
  rx_status_free(s);
  s = rx_tokenizer_encode(tok, "", 0, RX_TOKENIZER_ADD_SPECIAL, &ids, &n);
  CHECK_MSG(!s && ids && n == 0, "the empty text gives no ids");
  rx_status_free(s);
  rx_llm_free(ids);
  rx_tokenizer_free(tok);

  refused("{\"model\": ", RX_ERR_INVALID, "bad.json:1:");
  refused("{\"model\":\n {\"type\": \"BPE\",\n \"vocab\": {]}}", RX_ERR_INVALID, "bad.json:3:");
  refused("{\"model\": {\"type\": \"Unigram\", \"vocab\": []}}", RX_ERR_UNSUPPORTED, "Unigram");
  refused("{\"model\": {\"type\": \"WordPiece\", \"vocab\": {}}}", RX_ERR_UNSUPPORTED, "WordPiece");
  refused("{}", RX_ERR_INVALID, "model");
  refused("\"\xff\"", RX_ERR_INVALID, "UTF-8 at byte 1");
  refused(MINI("[\"a c\"]", ""), RX_ERR_INVALID, "model.merges[0]: 'c' is not in the vocab");
  refused(MINI("[[\"a\", \"b\"], [\"b\", \"a\"]]", ""), RX_ERR_INVALID,
          "model.merges[1]: 'ba', the merge of 'b' and 'a', is not in the vocab");
  refused(MINI("[\"a b\", [\"a\", \"b\"]]", ""), RX_ERR_INVALID, "model.merges[1]");
  refused(MINI("[\"a b c\"]", ""), RX_ERR_INVALID, "two tokens separated by one space");
  refused("{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": 0}, \"merges\": []}}",
          RX_ERR_INVALID, "both have id 0");
  refused("{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": -1}, \"merges\": []}}",
          RX_ERR_INVALID, "model.vocab['a']");
  refused("{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 1e9}, \"merges\": []}}",
          RX_ERR_INVALID, "model.vocab['a']");
  refused(MINI("[]", ", \"normalizer\": {\"type\": \"Lowercase\"}"), RX_ERR_UNSUPPORTED,
          "normalizer: the normalizer 'Lowercase' is not supported");
  refused(MINI("[]", ", \"pre_tokenizer\": {\"type\": \"Sequence\", \"pretokenizers\": "
                     "[{\"type\": \"Whitespace\"}]}"),
          RX_ERR_UNSUPPORTED, "pre_tokenizer.pretokenizers[0]: the pre-tokenizer 'Whitespace'");
  refused(MINI("[]", ", \"pre_tokenizer\": {\"type\": \"Split\", \"pattern\": {\"Regex\": "
                     "\"\\\\w+\"}, \"behavior\": \"Isolated\", \"invert\": false}"),
          RX_ERR_UNSUPPORTED, "the regex '\\w+'");
  refused(MINI("[]", ", \"decoder\": {\"type\": \"WordPiece\"}"), RX_ERR_UNSUPPORTED, "WordPiece");
  refused(MINI("[]", ", \"post_processor\": {\"type\": \"RobertaProcessing\"}"), RX_ERR_UNSUPPORTED,
          "RobertaProcessing");
  refused(MINI("[]", ", \"post_processor\": {\"type\": \"TemplateProcessing\", \"single\": "
                     "[{\"SpecialToken\": {\"id\": \"<s>\", \"type_id\": 0}}], "
                     "\"special_tokens\": {}}"),
          RX_ERR_INVALID, "'<s>' is not in special_tokens");
  refused(MINI("[]", ", \"added_tokens\": [{\"id\": 1, \"content\": \"a\", \"special\": true}]"),
          RX_ERR_INVALID, "added_tokens[0]: 'a' has id 1 here but 0 in the model's vocab");
  refused(MINI("[]", ", \"added_tokens\": [{\"id\": 3, \"content\": \"x\"}, {\"id\": 3, "
                     "\"content\": \"y\"}]"),
          RX_ERR_INVALID, "added_tokens[1]: 'y' has id 3, but the tokenizers library numbers it 4");
  refused("{\"model\": {\"type\": \"BPE\", \"dropout\": 0.1, " MINI_VOCAB ", \"merges\": []}}",
          RX_ERR_UNSUPPORTED, "dropout");
  refused("{\"model\": {\"type\": \"BPE\", \"unk_token\": \"<unk>\", " MINI_VOCAB
          ", \"merges\": []}}",
          RX_ERR_INVALID, "model.unk_token: '<unk>' is not in the vocab");
}

/* ---- sampler ---- */
static uint64_t lcg = 12345;
static float rnd(void) { /* a test-local generator, uniform in [-4, 4) */
  lcg = lcg * 6364136223846793005ull + 1442695040888963407ull;
  return (float)((lcg >> 40) & 0xFFFFFF) / (float)(1 << 24) * 8.0f - 4.0f;
}

static rx_sampler *sampler(float temperature, int32_t top_k, float top_p, float penalty,
                           uint64_t seed) {
  rx_sampler_params p = {.temperature = temperature,
                         .top_k = top_k,
                         .top_p = top_p,
                         .repetition_penalty = penalty,
                         .seed = seed};
  rx_sampler *s = NULL;
  rx_status st = rx_sampler_create(&p, &s);
  CHECK_MSG(!st, "sampler: %s", st ? rx_status_message(st) : "");
  rx_status_free(st);
  return s;
}

static int32_t sample(rx_sampler *s, const float *logits, int32_t v, const int32_t *hist,
                      size_t nhist) {
  int32_t id = -1;
  rx_status st = rx_sampler_sample(s, logits, v, hist, nhist, &id);
  CHECK_MSG(!st, "sample: %s", st ? rx_status_message(st) : "");
  rx_status_free(st);
  return id;
}

static void greedy_and_top1(void) {
  enum { V = 1000, ROWS = 20 };
  static float logits[V];
  rx_sampler *g = sampler(0, 0, 1, 1, 1), *k1 = sampler(1, 1, 1, 1, 1);
  for (int r = 0; r < ROWS; r++) {
    int32_t best = 0;
    for (int i = 0; i < V; i++) {
      logits[i] = rnd();
      if (logits[i] > logits[best]) best = i;
    }
    CHECK_MSG(sample(g, logits, V, NULL, 0) == best, "row %d: greedy is argmax %d", r, (int)best);
    CHECK_MSG(sample(k1, logits, V, NULL, 0) == best, "row %d: top-k 1 is argmax %d", r, (int)best);
  }
  float ties[4] = {1, 3, 3, 2};
  CHECK_MSG(sample(g, ties, 4, NULL, 0) == 1, "greedy takes the lowest id of a tie");
  rx_sampler_free(g);
  rx_sampler_free(k1);
}

/* A seed gives one sequence, on every platform: these values are the sampler's own (xoshiro256**,
 * exp_neg, fixed orders), written down once; any change to them is a change of the contract. */
static void seeded(void) {
  static const float logits[8] = {1.0f, 0.5f, -0.25f, 2.0f, 0.0f, 1.5f, -1.0f, 0.75f};
  static const int32_t expected[2][16] = {
      {0, 3, 5, 7, 7, 5, 5, 5, 5, 3, 5, 3, 5, 3, 5, 5},
      {3, 3, 5, 7, 7, 0, 5, 0, 0, 5, 5, 3, 0, 3, 5, 0},
  };
  for (int cfg = 0; cfg < 2; cfg++) {
    rx_sampler *s = cfg == 0 ? sampler(1.0f, 0, 1, 1, 42) : sampler(0.8f, 5, 0.9f, 1, 42);
    int32_t got[16];
    for (int i = 0; i < 16; i++) got[i] = sample(s, logits, 8, NULL, 0);
    CHECK_MSG(memcmp(got, expected[cfg], sizeof got) == 0,
              "seed 42, config %d: got %d %d %d %d %d %d %d %d %d %d %d %d %d %d %d %d", cfg,
              got[0], got[1], got[2], got[3], got[4], got[5], got[6], got[7], got[8], got[9],
              got[10], got[11], got[12], got[13], got[14], got[15]);
    rx_sampler_reseed(s, 42);
    CHECK_MSG(sample(s, logits, 8, NULL, 0) == got[0], "reseeding restarts the sequence");
    rx_sampler_free(s);
  }
}

/* Frequencies of n draws against probabilities p: chi-square with v - 1 degrees of freedom. */
static double chi_square(rx_sampler *s, const float *logits, int v, const double *p, int n) {
  long counts[16] = {0};
  for (int i = 0; i < n; i++) counts[sample(s, logits, v, NULL, 0)]++;
  double chi = 0;
  for (int i = 0; i < v; i++) {
    double e = p[i] * n;
    if (e > 0)
      chi += (counts[i] - e) * (counts[i] - e) / e;
    else if (counts[i])
      chi = INFINITY; /* drawn though excluded */
  }
  return chi;
}

static void distributions(void) {
  enum { V = 8, N = 200000 };
  /* the 0.1% critical value of chi-square with 7 degrees of freedom */
  const double critical = 24.322;
  static const float logits[V] = {1.0f, 0.5f, -0.25f, 2.0f, 0.0f, 1.5f, -1.0f, 0.75f};
  double p[V], sum = 0;
  for (int i = 0; i < V; i++) sum += p[i] = exp(logits[i]);
  for (int i = 0; i < V; i++) p[i] /= sum;
  rx_sampler *s = sampler(1, 0, 1, 1, 7);
  double chi = chi_square(s, logits, V, p, N);
  CHECK_MSG(chi < critical, "temperature 1: chi-square %.2f over %d draws (critical %.2f)", chi, N,
            critical);
  rx_sampler_free(s);
  /* temperature 0.5 with top-k 3: the softmax of 2x the best three (ids 3, 5, 0) */
  double q[V] = {0};
  sum = exp(2.0) + exp(3.0) + exp(4.0);
  q[0] = exp(2.0) / sum, q[5] = exp(3.0) / sum, q[3] = exp(4.0) / sum;
  s = sampler(0.5f, 3, 1, 1, 8);
  chi = chi_square(s, logits, V, q, N);
  CHECK_MSG(chi < critical, "temperature 0.5, top-k 3: chi-square %.2f", chi);
  rx_sampler_free(s);
}

static void top_p(void) {
  /* probabilities 0.5, 0.3, 0.15, 0.05: top-p keeps the smallest head reaching p */
  const float logits[4] = {logf(0.5f), logf(0.3f), logf(0.15f), logf(0.05f)};
  static const struct {
    float p;
    int keep;
  } cases[] = {{0.4f, 1}, {0.5f, 1}, {0.7f, 2}, {0.85f, 3}, {0.97f, 4}, {1.0f, 4}};
  for (size_t c = 0; c < RX_ARRAY_LEN(cases); c++) {
    rx_sampler *s = sampler(1, 0, cases[c].p, 1, 3);
    double w[4] = {0.5, 0.3, 0.15, 0.05}, sum = 0;
    for (int i = 0; i < 4; i++) sum += i < cases[c].keep ? w[i] : (w[i] = 0);
    for (int i = 0; i < 4; i++) w[i] /= sum;
    double chi = chi_square(s, logits, 4, w, 50000);
    /* 0.1% critical values for 0 to 3 degrees of freedom (one id: no draw may differ) */
    static const double critical[4] = {0, 10.828, 13.816, 16.266};
    CHECK_MSG(chi <= critical[cases[c].keep - 1], "top_p %.2f: keeps %d ids, chi-square %.2f",
              (double)cases[c].p, cases[c].keep, chi);
    rx_sampler_free(s);
  }
}

static void penalty(void) {
  rx_sampler *s = sampler(0, 0, 1, 2.0f, 0);
  const float logits[4] = {2.0f, -1.0f, 1.5f, 0.5f};
  const int32_t hist[3] = {0, 1, 0};
  /* 2 / 2 = 1 and -1 * 2 = -2: id 2 (1.5) is now the best */
  CHECK_MSG(sample(s, logits, 4, hist, 3) == 2, "penalty 2 moves the argmax to id 2");
  CHECK_MSG(sample(s, logits, 4, NULL, 0) == 0, "no history, no penalty");
  rx_sampler_free(s);
  /* once per id: 2 / 1.2 = 1.67 > 1.5 keeps id 0 (twice would be 1.39) */
  s = sampler(0, 0, 1, 1.2f, 0);
  const float two[2] = {2.0f, 1.5f};
  const int32_t again[3] = {0, 0, 0};
  CHECK_MSG(sample(s, two, 2, again, 3) == 0, "a repeated id is penalized once");
  /* a negative logit gets more negative: -0.5 * 3 = -1.5 < -1 */
  rx_sampler_free(s);
  s = sampler(0, 0, 1, 3.0f, 0);
  const float neg[2] = {-0.5f, -1.0f};
  const int32_t first[1] = {0};
  CHECK_MSG(sample(s, neg, 2, first, 1) == 1, "a negative logit is multiplied by the penalty");
  rx_sampler_free(s);
}

static void sampler_errors(void) {
  static const rx_sampler_params bad[] = {
      {.temperature = -1, .top_p = 1, .repetition_penalty = 1},
      {.temperature = 1, .top_k = -1, .top_p = 1, .repetition_penalty = 1},
      {.temperature = 1, .top_p = 0, .repetition_penalty = 1},
      {.temperature = 1, .top_p = 1.5f, .repetition_penalty = 1},
      {.temperature = 1, .top_p = 1, .repetition_penalty = 0}};
  for (size_t i = 0; i < RX_ARRAY_LEN(bad); i++) {
    rx_sampler *s = (rx_sampler *)1;
    rx_status st = rx_sampler_create(&bad[i], &s);
    CHECK_MSG(st && rx_status_code_of(st) == RX_ERR_INVALID && s == NULL, "bad params %zu accepted",
              i);
    rx_status_free(st);
  }
  rx_sampler *s = sampler(1, 0, 1, 1.5f, 0);
  float nan_row[3] = {0, NAN, 1}, inf_row[2] = {0, INFINITY}, none[2] = {-INFINITY, -INFINITY};
  const int32_t out_of_range[1] = {5};
  int32_t id = 7;
  rx_status st = rx_sampler_sample(s, nan_row, 3, NULL, 0, &id);
  CHECK_MSG(st && strstr(rx_status_message(st), "logit 1") && id == -1, "NaN logit");
  rx_status_free(st);
  st = rx_sampler_sample(s, inf_row, 2, NULL, 0, &id);
  CHECK_MSG(st && strstr(rx_status_message(st), "logit 1"), "+inf logit");
  rx_status_free(st);
  st = rx_sampler_sample(s, none, 2, NULL, 0, &id);
  CHECK_MSG(st && strstr(rx_status_message(st), "-inf"), "every logit -inf");
  rx_status_free(st);
  st = rx_sampler_sample(s, inf_row, 1, out_of_range, 1, &id);
  CHECK_MSG(st && strstr(rx_status_message(st), "history[0]"), "history outside the vocab");
  rx_status_free(st);
  float masked[3] = {-INFINITY, 0, -INFINITY};
  for (int i = 0; i < 20; i++) CHECK_MSG(sample(s, masked, 3, NULL, 0) == 1, "-inf is never drawn");
  rx_sampler_free(s);
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: test_tokenizer TESTS_DIR\n");
    return 2;
  }
  fixtures(argv[1]);
  gguf_fixtures(argv[1]);
  strip_stream(argv[1]);
  lookups(argv[1]);
  config(argv[1]);
  errors();
  greedy_and_top1();
  seeded();
  distributions();
  top_p();
  penalty();
  sampler_errors();
  return check_finish("test_tokenizer");
}
