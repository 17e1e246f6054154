/* frontends/hf/hf_int.h: what the files of frontends/hf/ share (internal). */
#ifndef RX_FRONTENDS_HF_INT_H
#define RX_FRONTENDS_HF_INT_H

#include "../../base/safetensors.h"
#include "../gguf/gguf.h"
#include "hf.h"
#include "relaxc/compiler.h"

/* ---- the bounds of a decoder's description (limits.c) ----
 * Every number a model file gives (config.json, GGUF metadata), listed once with its name in
 * each format and the values relaxc takes: X(field of rx_hf_config, config.json key, GGUF key
 * after "ARCH.", lowest, highest). Both readers check a file against this one table, so a file
 * cannot reach an allocation (block_count 2^32-1) or the math (a NaN epsilon) by either path. */
#define HF_LIMITS(X)                                                                               \
  X(hidden, "hidden_size", "embedding_length", 1, 1 << 20)                                         \
  X(intermediate, "intermediate_size", "feed_forward_length", 1, 1 << 22)                          \
  X(layers, "num_hidden_layers", "block_count", 1, 4096)                                           \
  X(heads, "num_attention_heads", "attention.head_count", 1, 4096)                                 \
  X(kv_heads, "num_key_value_heads", "attention.head_count_kv", 1, 4096)                           \
  X(head_dim, "head_dim", "attention.key_length", 2, 1024)                                         \
  X(vocab, "vocab_size", "vocab_size", 1, INT32_MAX)                                               \
  X(max_positions, "max_position_embeddings", "context_length", 1, INT32_MAX)                      \
  X(window, "sliding_window", "attention.sliding_window", 0, INT32_MAX)                            \
  X(rms_eps, "rms_norm_eps", "attention.layer_norm_rms_epsilon", 0, 1)                             \
  X(rope_theta, "rope_theta", "rope.freq_base", 1e-6, 1e12)
typedef enum hf_limit_id {
#define HF_LIMIT_ENUM_(f, hk, gk, lo, hi) HF_LIMIT_##f,
  HF_LIMITS(HF_LIMIT_ENUM_)
#undef HF_LIMIT_ENUM_
      HF_LIMIT_COUNT
} hf_limit_id;
/* num_experts and num_experts_per_tok at most (published models: 8 to 512 experts) */
#define HF_MAX_EXPERTS 4096
typedef struct hf_limit {
  const char *hf, *gguf; /* the key in config.json; in GGUF after "ARCH." */
  double lo, hi;         /* inclusive */
} hf_limit;
extern const hf_limit hf_limits[HF_LIMIT_COUNT];
/* c against the table and the consistency the builder relies on (kv heads divide heads, an even
 * head_dim for the rotary embedding, the special tokens inside the vocabulary). file names the
 * file; arch: NULL for config.json's key names, else the GGUF architecture ("llama.block_count").
 * An error names the file, the key, its value and what was expected. */
rx_status hf_check_config(const rx_hf_config *c, const char *file, const char *arch);

/* The text of a JSON object (config.json, generation_config.json, an index) into *out; an error
 * names name and, for a syntax error, its line and column (config.c). */
typedef struct cJSON cJSON;
rx_status hf_json_object(const char *text, size_t len, const char *name, cJSON **out);

/* ---- quantized checkpoints (quant_config.c) ----
 * config.json's quantization_config (root: the whole object) into c->qscheme and c->qkeep; a
 * method, version or option relaxc does not read is refused by name (file: for messages). */
rx_status hf_read_quant_config(const cJSON *root, const char *file, rx_hf_config *c);
/* Whether module (a projection's name without ".weight") is kept dense by the config. */
bool hf_quant_keeps_dense(const rx_hf_config *c, const char *module);

/* ---- the checkpoint (checkpoint.c) ---- */
typedef struct hf_ckpt hf_ckpt;
/* Maps and parses DIR's model.safetensors, or every shard its index names. */
rx_status hf_ckpt_open(const char *dir, hf_ckpt **out);
/* Unmaps everything (a module's rx_module_on_free callback). */
void hf_ckpt_close(void *c);
/* The tensor named name in any file, its bytes in *out_data; NULL when absent. */
const rx_st_tensor *hf_ckpt_find(const hf_ckpt *c, const char *name, const uint8_t **out_data);
/* "model-00001-of-00002.safetensors, ..." into out, for messages. */
const char *hf_ckpt_files(const hf_ckpt *c, rx_strbuf *out);

/* ---- a projection stored quantized (ckpt_quant.c) ---- */
/* One buffer of quant_matmul's (w, s, z, g): the checkpoint tensor's name, the weight's dtype and
 * shape, and once read its bytes and their dtype in the file. */
typedef struct hf_qbuf {
  char name[160];
  rx_dtype dtype;
  int ndim;
  int64_t shape[2];
  const void *data;
  rx_dtype src;
} hf_qbuf;
typedef struct hf_qbufs {
  int n;
  hf_qbuf b[4];
} hf_qbufs;
/* The buffers of module (a projection's name: "model.layers.0.mlp.up_proj") of W [out, in] in c's
 * scheme, with their names and shapes as the tools write them. */
void hf_ckpt_quant_layout(const rx_hf_config *c, const char *module, int64_t out, int64_t in,
                          hf_qbufs *qb);
/* The same, found in the checkpoint and checked (each tensor present, of the dtype and shape the
 * format has, g_idx inside the groups, FP8 weights F8_E4M3): an error names the tensor and what
 * was expected. */
rx_status hf_ckpt_quant_read(const hf_ckpt *ck, const rx_hf_config *c, const char *module,
                             int64_t out, int64_t in, hf_qbufs *qb);

/* ---- a GGUF file (frontends/gguf/model.c) ---- */
typedef struct hf_gguf hf_gguf;
/* Maps and parses the file at path and reads its hyperparameters into *c. Errors name the file
 * and the key: an unsupported architecture (naming the supported ones), a missing key. */
rx_status hf_gguf_open(const char *path, rx_hf_config *c, hf_gguf **out);
void hf_gguf_close(void *g);
const rx_gguf_file *hf_gguf_file(const hf_gguf *g);
/* The hyperparameters of a parsed file into *c (hf_gguf_open's step, for the fuzz harness). */
rx_status hf_gguf_read_config(const rx_gguf_file *f, rx_hf_config *c);
/* Layer l's experts (frontends/gguf/experts.c) as moe_matmul's one stacked weight: gated, the
 * file's ffn_gate_exps and ffn_up_exps [E, F, K] interleaved per expert into [E, 2F, K] (each
 * expert's gate rows, then its up rows: stack_experts' layout); else ffn_down_exps [E, K, F].
 * Rows of row_bytes each: src f32, f16 or bf16 elements, or (src u8, qi its scheme) whole blocks
 * of a GGUF block format. owned: data when allocated (the caller frees it), else NULL (mapped).
 * An error names the tensor: missing, of another shape, or of a format without a scheme. */
typedef struct hf_gguf_experts {
  const uint8_t *data;
  void *owned;
  rx_dtype src;
  const rx_quant_info *qi;
  size_t row_bytes;
} hf_gguf_experts;
rx_status hf_gguf_experts_read(const rx_gguf_file *f, const rx_hf_config *c, int64_t l, bool gated,
                               hf_gguf_experts *out);
/* The tokenizer of tokenizer.ggml.* as a tokenizer.json runtime/llm reads, appended to out; an
 * unsupported tokenizer model or pre-tokenizer names itself. */
rx_status hf_gguf_tokenizer_json(const rx_gguf_file *f, const rx_hf_config *c, rx_strbuf *out);

/* ---- the artifact's sections for generation (meta.c) ---- */
/* llm.json (the model's functions, vocabulary, special tokens, limits, KV cache geometry and
 * formats, a JSON list of the weights' formats or NULL, a mixture of experts' numbers as a JSON
 * object or NULL: llama.c's moe_numbers) and a tokenizer.json: tok_json (len tok_len) when not
 * NULL, else the folder dir's when there is one. */
rx_status hf_add_sections(rx_module *m, const char *dir, const rx_hf_config *c, rx_dtype t,
                          int64_t max_len, int64_t max_batch, const char *formats, const char *moe,
                          const char *tok_json, size_t tok_len);
/* chat_template.json, when the model has a chat template: from the GGUF file f's
 * tokenizer.chat_template (with the texts of its BOS and EOS tokens), else from the folder dir's
 * chat_template.jinja, chat_template.json or tokenizer_config.json (its chat_template, bos_token
 * and eos_token). The template is parsed now: a syntax error names the file, line and column. */
rx_status hf_add_chat_template(rx_module *m, const char *dir, const rx_gguf_file *f);

#endif
