/* relaxc/llm.h: the runtime's LLM layer (runtime/llm/, docs/llm.md): the tokenizer of Hugging Face
 * tokenizer.json files, a streaming detokenizer and the sampler. It builds with the runtime alone
 * (Android and iOS too): no regex library, no ICU; Unicode tables are compiled in.
 *
 * Conventions (as relaxc/runtime.h): handles are opaque; functions that can fail return an
 * rx_status (NULL is success, otherwise an error whose message names the file and the place in it;
 * free it with rx_status_free); out-parameters are zeroed first and set on success only; nothing
 * here exits or aborts on bad input. Host memory comes from the C library (base/'s wrappers);
 * arrays and strings returned to the caller are freed with rx_llm_free. A tokenizer is immutable
 * after loading, so it may be shared between threads; a detokenizer or a sampler is used from one
 * thread at a time.
 *
 * Token ids are int32_t, from 0; -1 means "none". */
#ifndef RELAXC_LLM_H
#define RELAXC_LLM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "types.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct rx_tokenizer rx_tokenizer;         /* a loaded tokenizer.json (immutable) */
typedef struct rx_detokenizer rx_detokenizer;     /* ids to text, one id at a time */
typedef struct rx_sampler rx_sampler;             /* logits to a token id, seeded */
typedef struct rx_chat_template rx_chat_template; /* a parsed Jinja chat template (immutable) */
typedef struct rx_llm_grammar rx_llm_grammar;     /* a compiled JSON schema (immutable, shared) */
typedef struct rx_llm_matcher rx_llm_matcher;     /* a generation's place in a grammar */

/* Frees an array or string returned by this header (NULL is fine). */
RX_API void rx_llm_free(void *p);

/* ---- tokenizer ----
 * Supported, exactly as the `tokenizers` library (0.23) does it: model BPE (vocab, merges as
 * "a b" strings or [a, b] pairs, byte_fallback, unk_token, fuse_unk, ignore_merges);
 * added_tokens (special or not; matched before the model, leftmost then longest, honoring
 * normalized, lstrip, rstrip and single_word); normalizers Sequence, Prepend, Replace (a string
 * pattern) and NFC; pre-tokenizers Sequence, ByteLevel (add_prefix_space, use_regex), Split (a
 * string pattern, or the regex of GPT-2, Llama 3 or Qwen2 files; every behavior; invert),
 * Metaspace (prepend_scheme, split) and Digits; decoders Sequence, ByteLevel, Replace (a string
 * pattern), ByteFallback, Fuse, Strip and Metaspace; post-processors TemplateProcessing (its
 * single-sequence template), ByteLevel and Sequence. That covers the byte-level BPE of GPT-2,
 * Llama 3 and Qwen2 and the SentencePiece-style BPE with byte fallback of Llama 2 and Mistral.
 * Anything else (a Unigram or WordPiece model, another normalizer, pre-tokenizer, decoder or
 * post-processor, a regex other than those three, BPE dropout, a continuing_subword_prefix or
 * end_of_word_suffix) is an RX_ERR_UNSUPPORTED error that names it and the file. The file's
 * truncation and padding settings are ignored (the caller decides lengths).
 * Unicode: the tables of runtime/llm/unicode_tables.c (Unicode 15.1.0); characters assigned
 * later are neither letters nor numbers here. */

/* Loads a tokenizer from the text of a tokenizer.json. name is used in messages (NULL:
 * "tokenizer.json"). Malformed JSON, a file that is not valid UTF-8, and an inconsistent file
 * (a merge naming an unknown token, two tokens with one id, an added token whose id differs from
 * the vocab's or, for one outside the vocab, from the id the library gives it: the vocab's size
 * on, in the file's order; a template naming an unknown special token) are RX_ERR_INVALID errors
 * that name the place. */
RX_API rx_status rx_tokenizer_load(const char *json, size_t len, const char *name,
                                   rx_tokenizer **out_tokenizer);
/* The same from a file. */
RX_API rx_status rx_tokenizer_load_file(const char *path, rx_tokenizer **out_tokenizer);
RX_API void rx_tokenizer_free(rx_tokenizer *tok); /* NULL is fine */

/* Reads eos_token_id (a number or a list of numbers) and bos_token_id from the text of a
 * generation_config.json or config.json and makes them the tokenizer's EOS ids and BOS id (a
 * field that is absent or null leaves the tokenizer's own choice). An id outside the vocab is an
 * RX_ERR_INVALID error. Not thread-safe with other calls on tok. */
RX_API rx_status rx_tokenizer_set_config(rx_tokenizer *tok, const char *json, size_t len,
                                         const char *name);

/* Flags of encode and decode. */
enum {
  RX_TOKENIZER_ADD_SPECIAL = 1,  /* encode: add what the post-processor adds (BOS, ...) */
  RX_TOKENIZER_SKIP_SPECIAL = 2, /* decode: leave out the special added tokens */
};

/* Encodes len bytes of UTF-8 text into *out_ids (*out_count ids; free with rx_llm_free; never
 * NULL on success, even for no ids). Text that is not valid UTF-8 is an RX_ERR_INVALID error
 * naming the byte offset (the tokenizers library takes only valid strings). */
RX_API rx_status rx_tokenizer_encode(const rx_tokenizer *tok, const char *text, size_t len,
                                     int flags, int32_t **out_ids, size_t *out_count);
/* Decodes ids into NUL-terminated UTF-8 (*out_text, *out_len bytes without the NUL; free with
 * rx_llm_free). As the library does: ids outside the vocab are skipped, and bytes that do not form
 * UTF-8 become U+FFFD. */
RX_API rx_status rx_tokenizer_decode(const rx_tokenizer *tok, const int32_t *ids, size_t count,
                                     int flags, char **out_text, size_t *out_len);

/* 1 + the largest id of the vocab and the added tokens. */
RX_API int32_t rx_tokenizer_vocab_size(const rx_tokenizer *tok);
/* The id of a token's text (added tokens first, as the library does), or -1. */
RX_API int32_t rx_tokenizer_token_to_id(const rx_tokenizer *tok, const char *token, size_t len);
/* The text of id (borrowed, lives as long as tok; *out_len may be NULL), or NULL. */
RX_API const char *rx_tokenizer_id_to_token(const rx_tokenizer *tok, int32_t id, size_t *out_len);
/* Whether id is a special added token. */
RX_API bool rx_tokenizer_is_special(const rx_tokenizer *tok, int32_t id);
/* The BOS id: rx_tokenizer_set_config's bos_token_id, else the first special token the
 * post-processor's template puts before the text, else -1. */
RX_API int32_t rx_tokenizer_bos_id(const rx_tokenizer *tok);
/* The EOS ids (*out_ids borrowed; may be NULL to only count): rx_tokenizer_set_config's
 * eos_token_id, else the special tokens the template puts after the text, else the added
 * special token among </s>, <|endoftext|>, <|end_of_text|>, <|im_end|>, <|eot_id|> (the first of
 * those present). Returns how many. */
RX_API size_t rx_tokenizer_eos_ids(const rx_tokenizer *tok, const int32_t **out_ids);
RX_API bool rx_tokenizer_is_eos(const rx_tokenizer *tok, int32_t id);

/* ---- streaming detokenizer ----
 * Takes the ids of a generation one at a time and gives back the text they add, only ever
 * complete UTF-8: a character split across byte tokens (byte fallback, byte level) comes out
 * when its last byte arrives. For ids that the tokenizer's own encode could produce, the pieces
 * joined are exactly rx_tokenizer_decode of all the ids (flags included); where the ids hold
 * bytes that are not UTF-8, each invalid sequence becomes U+FFFD as soon as it is known to be
 * invalid. */
RX_API rx_status rx_detokenizer_create(const rx_tokenizer *tok, int flags,
                                       rx_detokenizer **out_detok);
/* Adds one id; *out_text (borrowed until the next call on d, NUL-terminated) holds *out_len new
 * bytes, possibly none. */
RX_API rx_status rx_detokenizer_push(rx_detokenizer *d, int32_t id, const char **out_text,
                                     size_t *out_len);
/* Ends the stream: whatever is held back comes out (an incomplete character as U+FFFD), and d
 * starts a new stream. */
RX_API rx_status rx_detokenizer_flush(rx_detokenizer *d, const char **out_text, size_t *out_len);
RX_API void rx_detokenizer_reset(rx_detokenizer *d); /* drops what is held, starts a new stream */
RX_API void rx_detokenizer_free(rx_detokenizer *d); /* NULL is fine; the tokenizer must outlive d */

/* ---- sampler ----
 * One call turns a row of logits (f32, any vocab size) into a token id. The transforms, in the
 * order of transformers' generate():
 *   1. repetition penalty (RepetitionPenaltyLogitsProcessor): each distinct id of the history
 *      has its logit l replaced by l * penalty if l < 0, else l / penalty;
 *   2. temperature: 0 is greedy (argmax of the penalized logits, the lowest id on ties; steps 3
 *      to 5 are skipped); otherwise l / temperature;
 *   3. top-k (TopKLogitsWarper): keeps the ids whose logit is at least the k-th largest (ties
 *      at the k-th are kept); 0 keeps all;
 *   4. top-p (TopPLogitsWarper): of the softmax of what is left, keeps the smallest set of the
 *      most probable ids whose probabilities sum to at least top_p (at least one id); 1 keeps all;
 *   5. sampling from the softmax of what is left, with u a uniform draw in [0, 1).
 * The draw is platform-independent: xoshiro256** (Blackman and Vigna), its state seeded with four
 * outputs of SplitMix64 from the seed; u = (next >> 11) * 2^-53; probabilities are computed in
 * double with the sampler's own exp (additions, multiplications and exact bit operations; no
 * libm approximation), and ids are walked in a fixed order (by id without top-k and top-p, else
 * most probable first, ties by id), so a seed gives the same tokens on every platform with
 * IEEE-754 arithmetic (checked on x86-64 and, under qemu, aarch64 with GCC and clang). -inf logits
 * are allowed (never drawn); NaN or +inf is an RX_ERR_INVALID error. Scratch memory grows to the
 * largest vocab seen and is reused: a call on a vocab no larger than before allocates nothing. */
typedef struct rx_sampler_params {
  float temperature;        /* >= 0; 0: greedy */
  int32_t top_k;            /* >= 0; 0: off */
  float top_p;              /* in (0, 1]; 1: off */
  float repetition_penalty; /* > 0; 1: off */
  uint64_t seed;
  /* OpenAI's penalties and logit_bias (rx_sampler_sample_ex), applied after the repetition
   * penalty and before the temperature: each id's logit l becomes
   * l - frequency_penalty * c - presence_penalty * (c > 0) + bias, c the id's count among the
   * generated tokens (the history past the prompt). */
  float presence_penalty;             /* in [-2, 2]; 0: off */
  float frequency_penalty;            /* in [-2, 2]; 0: off */
  const struct rx_logit_bias *biases; /* nbiases entries (copied by rx_sampler_create) */
  size_t nbiases;
} rx_sampler_params;

/* A logit_bias entry: bias in [-100, 100] is added to the logit of id (an id listed twice: the
 * last entry counts). */
typedef struct rx_logit_bias {
  int32_t id;
  float bias;
} rx_logit_bias;

/* The log-probabilities of a sampled token (rx_sampler_sample_ex, on_token_info): the
 * log-softmax of the logits after the repetition, presence and frequency penalties and the
 * logit_bias, before the temperature, top-k and top-p (so they do not depend on how the token
 * was drawn; greedy picks the most probable). */
#define RX_LLM_MAX_TOP_LOGPROBS 20 /* OpenAI's limit of chat's top_logprobs */
typedef struct rx_token_logprobs {
  int32_t id;    /* the sampled token */
  float logprob; /* its log-probability */
  int32_t ntop;  /* entries of top: the most probable ids, most probable first (ties by id) */
  int32_t top_ids[RX_LLM_MAX_TOP_LOGPROBS];
  float top_logprobs[RX_LLM_MAX_TOP_LOGPROBS];
} rx_token_logprobs;

/* The defaults of transformers' GenerationConfig for sampling: temperature 1, top_k 50,
 * top_p 1, repetition_penalty 1, seed 0. */
RX_API rx_sampler_params rx_sampler_default_params(void);
/* Invalid parameters (a negative temperature, top_p outside (0, 1], ...) are RX_ERR_INVALID. */
RX_API rx_status rx_sampler_create(const rx_sampler_params *params, rx_sampler **out_sampler);
/* Samples from logits[0..vocab); history (count ids, may be NULL when 0) is what the penalty
 * looks at: the prompt and the tokens generated so far. An id of the history outside
 * [0, vocab) is an RX_ERR_INVALID error. */
RX_API rx_status rx_sampler_sample(rx_sampler *s, const float *logits, int32_t vocab,
                                   const int32_t *history, size_t count, int32_t *out_id);
/* rx_sampler_sample, where the history's first prompt ids are the prompt: the presence and
 * frequency penalties count only the ids after them (rx_sampler_sample counts the whole history
 * as generated). With out_lp (may be NULL), also the token's log-probabilities and its ntop
 * (0..RX_LLM_MAX_TOP_LOGPROBS) most probable alternatives. A logit_bias id outside [0, vocab) is
 * an RX_ERR_INVALID error. */
RX_API rx_status rx_sampler_sample_ex(rx_sampler *s, const float *logits, int32_t vocab,
                                      const int32_t *history, size_t count, size_t prompt,
                                      int32_t ntop, rx_token_logprobs *out_lp, int32_t *out_id);
/* Restarts the random sequence from seed. */
RX_API void rx_sampler_reseed(rx_sampler *s, uint64_t seed);
RX_API void rx_sampler_free(rx_sampler *s); /* NULL is fine */

/* ---- models: the artifact of a Hugging Face model folder (`relaxc compile DIR`) ----
 * An artifact that holds the graph functions create_kv_cache, prefill and decode over a paged KV
 * cache, and the sections llm.json (vocabulary, special tokens, limits) and tokenizer.json
 * (docs/llm.md). A model holds the artifact on a device, its KV cache (created at load) and its
 * tokenizer when the artifact has one. Sequences are named by ids from 0 to INT64_MAX - 1
 * (INT64_MAX is the warm-up's scratch sequence): the first prefill of an id starts it;
 * rx_llm_model_reset frees its pages. One thread at a time. */
typedef struct rx_llm_model rx_llm_model;

typedef struct rx_llm_model_options {
  const char *device;    /* "vulkan:0", "cuda:0", ...; NULL: $RX_DEVICE, else the first present */
  int64_t capacity;      /* KV cache tokens over all sequences; 0: the model's max_seq_len */
  int64_t max_sequences; /* sequences the cache holds at once; 0: 1 */
  int64_t max_seq_len;   /* the longest sequence (prompt and generated tokens) at run time, at
                            most the artifact's (a model compiled with a max_position_embeddings
                            of 2^31 - 1 runs with less); 0: the artifact's */
  /* Tensor parallelism (relaxc/ccl.h, docs/distributed.md): this process's communicator, or
   * NULL for one process. With one of several ranks, rank R loads its part of the model
   * (its rank of a multi-rank artifact, relaxc compile --tensor-parallel N with N the
   * communicator's size; else MODEL.rankR.rxm beside MODEL.rxm where that file exists, else
   * MODEL.rxm whole), the
   * communicator is attached to its artifact (and NCCL enabled on a CUDA device), and every
   * rank warms up together. Rank 0 then drives: its prefills, decodes and resets are broadcast
   * to the other ranks, which run them in rx_llm_model_follow; the tokenizer, the sampler and
   * the KV cache's bookkeeping are rank 0's (the others' caches follow the same calls). */
  struct rx_rt_comm *comm;
} rx_llm_model_options;

/* Loads the artifact at path (weights uploaded once), creates its KV cache and warms up (prefills
 * of 1, 16 and 17 tokens and decodes of a scratch sequence, so the drivers build their pipelines
 * at load and not at the first request). An artifact without
 * llm.json is an RX_ERR_INVALID error saying it is not an LLM; a missing driver or device, or
 * device memory, are the runtime's errors. */
RX_API rx_status rx_llm_model_load(const char *path, const rx_llm_model_options *o,
                                   rx_llm_model **out_model);
RX_API void rx_llm_model_free(rx_llm_model *m); /* NULL is fine; rank 0 ends the followers */
/* Ranks other than 0 of a model loaded with a communicator: runs what rank 0 broadcasts
 * (prefills, decodes, resets) until rank 0 frees its model, then returns. An error of one call
 * (the same as rank 0 gets) is printed on stderr with the rank, and the loop goes on; a
 * communication error ends it. */
RX_API rx_status rx_llm_model_follow(rx_llm_model *m);
/* A rank's forwards with a communicator (options.comm; every rank counts its own: rank 0's
 * calls, a follower's runs of them): how many prefill and decode forwards ran (a packed prefill
 * longer than the artifact's bound runs as several), their wall clock (the program's call and
 * the logits read back, not the broadcast of the call to the followers), and the part of that
 * spent in the collective builtins (rx_rt_comm_stats): the communication share of a step.
 * All zero without a communicator. */
typedef struct rx_llm_step_stats {
  uint64_t prefills, decodes;
  double prefill_seconds, decode_seconds;
  double prefill_comm_seconds, decode_comm_seconds;
} rx_llm_step_stats;
RX_API rx_llm_step_stats rx_llm_model_step_stats(const rx_llm_model *m);
RX_API void rx_llm_model_step_stats_reset(rx_llm_model *m);
/* The artifact's tokenizer, or NULL when the folder had no tokenizer.json (borrowed). */
RX_API const rx_tokenizer *rx_llm_model_tokenizer(const rx_llm_model *m);
/* The artifact's chat template (rx_chat_template_render), or NULL when the model had none
 * (borrowed). */
RX_API const rx_chat_template *rx_llm_model_chat_template(const rx_llm_model *m);
RX_API int32_t rx_llm_model_vocab_size(const rx_llm_model *m);
RX_API int64_t rx_llm_model_max_seq_len(const rx_llm_model *m);
RX_API int32_t rx_llm_model_bos_id(const rx_llm_model *m); /* -1: none */
/* Does id end generation (the model's eos_token_id(s), else the tokenizer's)? */
RX_API bool rx_llm_model_is_eos(const rx_llm_model *m, int32_t id);
/* The name of the device the model runs on ("llvmpipe (LLVM 15.0.6, 256 bits) (vulkan)"). */
RX_API const char *rx_llm_model_device_name(const rx_llm_model *m);
/* The device the model runs on (borrowed). */
RX_API struct rx_rt_device *rx_llm_model_device(const rx_llm_model *m);
/* Device bytes of KV cache per token (every layer, keys and values). */
RX_API int64_t rx_llm_model_kv_bytes_per_token(const rx_llm_model *m);

/* Packed (ragged) prefill: appends counts[i] tokens to sequence seqs[i] for each of b sequences,
 * the n = counts[0] + ... + counts[b - 1] ids packed one sequence after another in ids (no
 * padding), and writes the logits of each sequence's last new token, b rows of vocab floats in
 * the order of seqs, to out_logits. A sequence may be new (it starts empty) or hold tokens
 * already (a continuation, or a long prompt prefilled in chunks: its new tokens take the
 * positions after the cached ones). Limits: b at most rx_llm_model_max_batch; each sequence at
 * most the model's max_seq_len tokens in all, old and new; sequence ids >= 0 and distinct;
 * counts >= 1 summing to n. The function splits the batch by the artifact's token bound (n <=
 * max_seq_len per forward, as compiled): whole sequences per call, as many as fit, so one call
 * of several short prompts is one forward. Errors (a bound above, an id outside the vocabulary,
 * counts that do not sum to n, a full KV cache, too many sequences for the cache) name the
 * numbers, and nothing is appended then (the calls that ran are undone). */
RX_API rx_status rx_llm_prefill_batch(rx_llm_model *m, const int64_t *seqs, size_t b,
                                      const int32_t *ids, size_t n, const size_t *counts,
                                      float *out_logits);
/* rx_llm_prefill_batch of one sequence: appends count tokens to seq and writes the logits of the
 * last one (vocab floats) to out_logits. */
RX_API rx_status rx_llm_prefill(rx_llm_model *m, int64_t seq, const int32_t *ids, size_t count,
                                float *out_logits);
/* Appends one token to each of count sequences (ids[i] to seqs[i]; count at most
 * rx_llm_model_max_batch; each sequence prefilled before, distinct), in one forward call, and
 * writes their logits, count rows of vocab floats, to out_logits. */
RX_API rx_status rx_llm_decode(rx_llm_model *m, const int64_t *seqs, const int32_t *ids,
                               size_t count, float *out_logits);
/* Tokens held for seq (0 for an unknown one). */
RX_API int64_t rx_llm_model_seq_len(const rx_llm_model *m, int64_t seq);
/* Forgets seq and frees its pages (nothing for an unknown one). */
RX_API void rx_llm_model_reset(rx_llm_model *m, int64_t seq);

/* The most sequences one rx_llm_decode or rx_llm_prefill_batch takes (the artifact's
 * --max-batch). */
RX_API int64_t rx_llm_model_max_batch(const rx_llm_model *m);
/* The most sequences the KV cache holds at once (options.max_sequences), and how many it holds. */
RX_API int64_t rx_llm_model_max_sequences(const rx_llm_model *m);
RX_API int64_t rx_llm_model_sequences(const rx_llm_model *m);
/* KV cache tokens over all sequences (whole pages of 16 tokens), and those free now. */
RX_API int64_t rx_llm_model_kv_capacity(const rx_llm_model *m);
RX_API int64_t rx_llm_model_kv_free_tokens(const rx_llm_model *m);

/* ---- generation: prefill, then decode a token at a time, sampling each ---- */
typedef struct rx_llm_generate_params {
  rx_sampler_params sampling;
  int64_t max_tokens; /* stop after this many new tokens (> 0) */
  /* called with each new token, and with the text that completes (whole UTF-8 characters; may
   * be empty); return false to stop. NULL: not called */
  bool (*on_token)(void *user, int32_t id, const char *text, size_t len);
  void *user;
  /* Stop strings (copied at the call or submit): generation ends where the generated text
   * first holds one of them (the occurrence that ends first; of those, the longest), matched on
   * the detokenized text across token boundaries. The text on_token gets is held back while it
   * could still be the start of a stop string, so no part of one is ever handed out; the text
   * ends before the stop string (rx_stop_matcher). Up to RX_LLM_MAX_STOP non-empty strings. */
  const char *const *stop;
  size_t nstop;
  /* called with each new token's log-probabilities (rx_token_logprobs, top_logprobs
   * alternatives: 0..RX_LLM_MAX_TOP_LOGPROBS) before its on_token; the same user. NULL: not
   * called, and none are computed */
  void (*on_token_info)(void *user, const rx_token_logprobs *lp);
  int32_t top_logprobs;
  /* structured output: each token sampled from those the grammar allows (rx_llm_grammar_compile),
   * EOS only once the text is a whole value; NULL: none. The generation (or the batcher's
   * request) keeps a reference of its own. */
  rx_llm_grammar *grammar;
} rx_llm_generate_params;

#define RX_LLM_MAX_STOP 4 /* OpenAI's limit of stop strings */

typedef struct rx_llm_generate_stats {
  size_t prompt_tokens, new_tokens;
  double prefill_ms, decode_ms; /* wall clock, synchronized */
  bool stopped_by_eos;
  bool stopped_by_string; /* a stop string ended generation */
} rx_llm_generate_stats;

/* Generates from prompt (count ids) on sequence seq (reset first), stopping at an
 * end-of-sequence token, after max_tokens, at the model's max_seq_len, at a stop string
 * (stats.stopped_by_string), or when on_token says so (with p->grammar also where the value is
 * whole and only EOS may follow: stopped_by_eos).
 * The new ids go to out_ids (up to max_tokens; may be NULL). */
RX_API rx_status rx_llm_generate(rx_llm_model *m, int64_t seq, const int32_t *prompt, size_t count,
                                 const rx_llm_generate_params *p, int32_t *out_ids,
                                 rx_llm_generate_stats *out_stats);

/* ---- continuous batching: many generations sharing one model (runtime/llm/batch.c) ----
 * A batcher runs requests (a prompt and rx_llm_generate_params) on one model, each on its own
 * sequence of the shared paged KV cache. rx_llm_batcher_step is one scheduling step:
 *   1. admission, first come first served: the oldest waiting request starts when a sequence is
 *      free (fewer running than max_batch, the model's --max-batch and the cache's
 *      max_sequences allow) and the KV cache can hold everything it may still need: its pages
 *      for min(prompt + max_tokens - 1, max_seq_len) tokens are counted as reserved from
 *      admission to its end, so a running request never finds the cache full; a request that
 *      does not fit yet waits (later ones wait behind it, so none starves);
 *   2. the prompts of the requests admitted (up to max_prefills per step) prefilled together in
 *      one packed rx_llm_prefill_batch (no padding; split by the artifact's token bound), then
 *      the first token of each is sampled; with prefix_cache, a request starts from the cached
 *      whole pages of its prompt's longest cached prefix and prefills only the rest; with
 *      prefill_chunk, at most that many prompt tokens go in per step (a request samples its
 *      first token in the step its prompt is all in);
 *   3. one rx_llm_decode over every running request (sequences of different lengths), and a
 *      token sampled for each.
 * A request ends as rx_llm_generate's loop does: at an end-of-sequence token, after max_tokens,
 * at the model's max_seq_len, or when on_token returns false; its sequence and pages are freed
 * at once. Each request has its own sampler (seeded from its params) and detokenizer, so its
 * tokens are those rx_llm_generate gives for the same prompt and params (up to the rounding of
 * a decode over b rows, which may differ from one over 1 row in the last bit). Requests join
 * (submit) and leave (cancel, release) between steps; callbacks must not call the batcher.
 * Errors of one request (a failed prefill, NaN logits) end that request with the message (a
 * packed prefill that fails is retried one request at a time, so only the requests at fault
 * fail); a failed decode ends the requests in it. Not thread-safe: one thread drives a batcher, and
 * nothing else uses the model's sequences seq_base .. seq_base + max_batch - 1 meanwhile.
 *
 * With a grammar (rx_llm_generate_params.grammar), a request also ends where its value is whole
 * and only EOS may follow (state EOS, no token appended); requests with different grammars, or
 * none, share steps: each masks its own row of logits. */
typedef struct rx_llm_batcher rx_llm_batcher;

typedef struct rx_llm_batcher_options {
  int64_t max_batch;    /* most requests running at once; 0: the model's max_batch, capped by
                           the cache's max_sequences */
  int64_t max_prefills; /* requests admitted (and prefilled together) per step; 0: as many as
                           fit */
  int64_t seq_base;     /* the model sequence ids used: seq_base + slot (default 0) */
  /* prefix caching (docs/llm.md "Prefix caching"): the full KV pages of prompts are kept in a
   * radix tree of token prefixes after their prefill; a request whose prompt begins with cached
   * pages starts from them (shared, never written) and prefills only the rest; pages no request
   * holds are evicted by least recent use when the cache needs pages (admission counts them as
   * free). false: off, every prompt prefilled whole */
  bool prefix_cache;
  /* chunked prefill: at most this many prompt tokens prefilled per step (over all requests in
   * prefill, oldest first), beside the decode of the running ones, so a long prompt does not
   * stall other streams; a request samples its first token when its whole prompt is in. 0: off,
   * each admitted prompt prefilled whole in its first step */
  int64_t prefill_chunk;
} rx_llm_batcher_options;

typedef enum rx_llm_request_state {
  RX_LLM_REQUEST_WAITING = 0, /* submitted, not admitted yet */
  RX_LLM_REQUEST_RUNNING,
  RX_LLM_REQUEST_EOS,         /* ended at an end-of-sequence token (the last id), or where its
                                 grammar's value was whole with only EOS to follow */
  RX_LLM_REQUEST_LENGTH,      /* ended after max_tokens */
  RX_LLM_REQUEST_MAX_SEQ,     /* ended at the model's max_seq_len */
  RX_LLM_REQUEST_STOPPED,     /* on_token returned false */
  RX_LLM_REQUEST_CANCELLED,   /* rx_llm_batcher_cancel */
  RX_LLM_REQUEST_FAILED,      /* error holds the message */
  RX_LLM_REQUEST_STOP_STRING, /* ended at a stop string (params.stop) */
} rx_llm_request_state;

typedef struct rx_llm_request_info {
  rx_llm_request_state state;
  const int32_t *ids; /* the new tokens so far (borrowed until the next call on the batcher) */
  size_t count;
  size_t prompt_tokens;
  const char *error;    /* FAILED: the message (borrowed likewise); else NULL */
  size_t cached_tokens; /* prompt tokens taken from the prefix cache (not prefilled) */
} rx_llm_request_info;

typedef struct rx_llm_batcher_stats {
  int64_t steps;         /* rx_llm_batcher_step calls that did work */
  int64_t prefills;      /* rx_llm_prefill_batch calls: one per step that admits requests (more
                            when a packed prefill failed and its requests ran alone) */
  int64_t prefill_rows;  /* requests prefilled (prefill_rows / prefills: the mean packed batch) */
  int64_t prompt_tokens; /* tokens prefilled */
  int64_t decodes;       /* rx_llm_decode calls */
  int64_t decode_rows;   /* sequences over all decode calls (decode_rows / decodes: the mean
                            batch) */
  int64_t max_rows;      /* the largest decode */
  int64_t new_tokens;    /* tokens sampled over all requests */
  int64_t waiting, running, finished; /* requests now (finished: not yet released) */
  double prefill_ms, decode_ms;       /* wall clock in prefill and in decode (synchronized) */
  int64_t cached_tokens; /* prompt tokens taken from the prefix cache, over all requests */
  int64_t pages_cached;  /* KV pages the prefix cache holds now */
  int64_t pages_evicted; /* KV pages evicted from the prefix cache */
} rx_llm_batcher_stats;

/* o may be NULL (defaults). max_batch is capped by the model's max_batch and the cache's
 * max_sequences. The model must outlive the batcher. */
RX_API rx_status rx_llm_batcher_create(rx_llm_model *m, const rx_llm_batcher_options *o,
                                       rx_llm_batcher **out_batcher);
/* Frees the batcher: requests still running are cancelled (their sequences freed). */
RX_API void rx_llm_batcher_free(rx_llm_batcher *b); /* NULL is fine */
/* Queues a request (the prompt is copied; p's callback and user are kept). An invalid request
 * (no prompt, max_tokens < 1, an id outside the vocabulary, invalid sampling params, a prompt
 * longer than max_seq_len, or one whose KV pages could never fit in the cache) is an
 * RX_ERR_INVALID error naming the numbers, and nothing is queued. *out_id: the request's id
 * (from 1). */
RX_API rx_status rx_llm_batcher_submit(rx_llm_batcher *b, const int32_t *prompt, size_t count,
                                       const rx_llm_generate_params *p, int64_t *out_id);
/* One step (above). *out_active (may be NULL): requests waiting or running after it. Errors:
 * only a NULL batcher or a call from a callback; requests' own errors are on the requests. */
RX_API rx_status rx_llm_batcher_step(rx_llm_batcher *b, size_t *out_active);
/* Steps until no request waits or runs. */
RX_API rx_status rx_llm_batcher_run(rx_llm_batcher *b);
/* Ends a waiting or running request (CANCELLED; its sequence and pages freed now); nothing for
 * one that has ended. An unknown id is an RX_ERR_INVALID error. */
RX_API rx_status rx_llm_batcher_cancel(rx_llm_batcher *b, int64_t id);
/* A request's state and tokens. An unknown (or released) id is an RX_ERR_INVALID error. */
RX_API rx_status rx_llm_batcher_poll(const rx_llm_batcher *b, int64_t id,
                                     rx_llm_request_info *out_info);
/* Forgets a request (cancelling it first if it has not ended); its id becomes unknown. */
RX_API rx_status rx_llm_batcher_release(rx_llm_batcher *b, int64_t id);
RX_API rx_llm_batcher_stats rx_llm_batcher_get_stats(const rx_llm_batcher *b);

/* ---- prefix cache ---- */
/* Evicts every page of the prefix cache that no request holds; returns how many (0 without a
 * prefix cache). Not from a callback. */
RX_API int64_t rx_llm_batcher_clear_cache(rx_llm_batcher *b);
/* ---- stop strings: text held back while it may start one ----
 * rx_llm_generate and the batcher use one per request; an app with its own loop may too. Text
 * goes in a piece at a time (any split, whole UTF-8 characters or not) and comes out as the
 * generated text cut before the first stop string: the occurrence that ends first, of those the
 * longest (so the cut does not depend on how the text was split). What comes out never holds a
 * byte of a stop string: a tail that could still begin one is held until it cannot (or until
 * rx_stop_matcher_flush). */
typedef struct rx_stop_matcher rx_stop_matcher;
/* Copies the n strings (each non-empty, n <= RX_LLM_MAX_STOP; else RX_ERR_INVALID). */
RX_API rx_status rx_stop_matcher_create(const char *const *stop, size_t n,
                                        rx_stop_matcher **out_matcher);
/* Adds len bytes; *out_text (borrowed until the next call on m) holds the *out_len bytes that
 * are now sure to be output. Returns whether a stop string was found (the output then ends, and
 * later pushes give nothing). */
RX_API bool rx_stop_matcher_push(rx_stop_matcher *m, const char *text, size_t len,
                                 const char **out_text, size_t *out_len);
/* The end of the text: what is held comes out (none after a stop string). */
RX_API void rx_stop_matcher_flush(rx_stop_matcher *m, const char **out_text, size_t *out_len);
RX_API bool rx_stop_matcher_stopped(const rx_stop_matcher *m);
RX_API void rx_stop_matcher_free(rx_stop_matcher *m); /* NULL is fine */

/* ---- chat templates ----
 * A model's Jinja chat template (tokenizer_config.json's chat_template, or GGUF's
 * tokenizer.chat_template), rendered as transformers' apply_chat_template does: jinja2 with
 * trim_blocks and lstrip_blocks, its tojson (ensure_ascii off), raise_exception and strftime_now.
 * The subset (docs/llm.md): statements if/elif/else, for (loop.*, `if` filters, else, tuple
 * unpacking, break/continue), set (namespace attributes and blocks too), macro, raw,
 * generation; Python's expressions, slices, string and dict methods; jinja2's common filters and
 * tests. A template is immutable after parsing (renders may run on several threads). */
/* Parses a template (len bytes of text); name prefixes error messages ("chat_template"), and
 * bos_token / eos_token (NULL: "") are the variables every render gets unless its context sets
 * them. A syntax error is an RX_ERR_INVALID error naming the line and column and what was
 * expected. */
RX_API rx_status rx_chat_template_parse(const char *text, size_t len, const char *name,
                                        const char *bos_token, const char *eos_token,
                                        rx_chat_template **out);
RX_API void rx_chat_template_free(rx_chat_template *t); /* NULL is fine */
/* The bos_token given at parse ("" when none; borrowed). */
RX_API const char *rx_chat_template_bos(const rx_chat_template *t);
/* Renders t with the variables of context_json (a JSON object of len bytes: messages,
 * add_generation_prompt, tools, ...); now: strftime_now's time in seconds since 1970, taken as
 * UTC (0: the clock, local time). *out_text (freed with rx_llm_free) and *out_len are the text.
 * Errors (RX_ERR_INVALID): raise_exception's message, an attribute of an undefined value, a type
 * error, the limits on steps, depth, memory and output; each names the line and column. */
RX_API rx_status rx_chat_template_render(const rx_chat_template *t, const char *context_json,
                                         size_t len, int64_t now, char **out_text, size_t *out_len);

/* The prompt of a chat (relaxc serve's chat endpoint, relaxc generate --chat): messages_json (len
 * bytes), a JSON array of messages ({"role": a string, "content": a string, a list of
 * {"type": "text", "text": ...} parts, or null; other fields such as tool_calls passed through),
 * rendered by t with add_generation_prompt true (unless extra_json sets it) and the variables of
 * extra_json (a JSON object of extra_len bytes, or NULL: tools, enable_thinking, ...). Without a
 * template (t NULL), the fallback format of docs/llm.md: a "ROLE: CONTENT\n" line per message
 * (text parts joined), then "assistant:". A template's text is tokenized without adding special
 * tokens (it carries them, as transformers' apply_chat_template tokenizes); the fallback's with
 * them. Bad messages and render errors are RX_ERR_INVALID errors that say what was expected. */
RX_API rx_status rx_chat_prompt(const rx_chat_template *t, const char *messages_json, size_t len,
                                const char *extra_json, size_t extra_len, char **out_text,
                                size_t *out_len);

/* ---- constrained decoding: structured output (runtime/llm/grammar*.c, docs/llm.md) ----
 * A JSON schema compiled against a tokenizer into a grammar: a byte-level pushdown automaton
 * whose state decides which tokens may come next (a token is allowed when all of its bytes, as
 * the tokenizer's decoder gives them past a stream's start, can follow). A matcher is one
 * generation's state. The text allowed is compact JSON: at most one space before the value and
 * after each ':' and ','; object properties in the schema's order (optional ones may be left
 * out, no others: additionalProperties false is implied); numbers with bounded digits. What a
 * schema may use is listed in docs/llm.md; any other keyword is an RX_ERR_UNSUPPORTED error
 * naming it. Masks are memoized per automaton state in the grammar (a small cache shared by its
 * matchers, under a lock), so a grammar may serve matchers on several threads; a matcher is used
 * from one thread at a time. */

/* Compiles schema (len bytes of JSON; NULL: json_object, any JSON object) for tok's vocabulary.
 * A malformed or inconsistent schema is an RX_ERR_INVALID error naming the place ("at
 * schema.properties.age: ..."); an unsupported keyword an RX_ERR_UNSUPPORTED one. The grammar
 * does not keep tok, but tok's EOS ids are borrowed: tok must outlive it. */
RX_API rx_status rx_llm_grammar_compile(const rx_tokenizer *tok, const char *schema, size_t len,
                                        rx_llm_grammar **out_grammar);
/* Another reference to g (returned); rx_llm_grammar_free drops one (NULL is fine). */
RX_API rx_llm_grammar *rx_llm_grammar_retain(rx_llm_grammar *g);
RX_API void rx_llm_grammar_free(rx_llm_grammar *g);

/* A matcher at the start of g (it holds a reference to g). */
RX_API rx_status rx_llm_matcher_create(rx_llm_grammar *g, rx_llm_matcher **out_matcher);
/* A copy of m's state (n completions from one prompt). */
RX_API rx_status rx_llm_matcher_clone(const rx_llm_matcher *m, rx_llm_matcher **out_matcher);
RX_API void rx_llm_matcher_free(rx_llm_matcher *m);  /* NULL is fine */
RX_API void rx_llm_matcher_reset(rx_llm_matcher *m); /* back to the start */
/* The tokens allowed next, as a bitset of (vocab + 31) / 32 words (bit id % 32 of word id / 32);
 * the tokenizer's EOS ids are allowed exactly when the text so far is a whole value. Ids from
 * the tokenizer's vocabulary size up to vocab are never allowed. *out_count (may be NULL): how
 * many bits are set. */
RX_API rx_status rx_llm_matcher_fill_mask(rx_llm_matcher *m, uint32_t *bits, int32_t vocab,
                                          size_t *out_count);
/* Advances m by token id; a token the mask does not allow is an RX_ERR_INVALID error (m
 * unchanged). An EOS id (allowed when the value is whole) leaves m as it is. */
RX_API rx_status rx_llm_matcher_accept_token(rx_llm_matcher *m, int32_t id);
/* Advances m by n bytes of text; false (m unchanged) when they cannot follow. */
RX_API bool rx_llm_matcher_accept_bytes(rx_llm_matcher *m, const char *bytes, size_t n);
/* Whether the text so far is a whole value. */
RX_API bool rx_llm_matcher_is_accepting(const rx_llm_matcher *m);
/* The bytes token id adds to a generation past its start (what the mask matches; borrowed from
 * g, *out_len bytes; "" for a special or unknown id). */
RX_API const char *rx_llm_grammar_token_bytes(const rx_llm_grammar *g, int32_t id, size_t *out_len);

#ifdef __cplusplus
}
#endif
#endif
