/* frontends/hf/hf.h: Hugging Face checkpoints as LLM modules (docs/llm.md). A model folder holds
 * config.json, the weights as model.safetensors or as shards model-0000N-of-0000M.safetensors
 * listed by model.safetensors.index.json, and (optionally) tokenizer.json and
 * generation_config.json. Internal header of relaxc_core.
 *
 * Architectures: LlamaForCausalLM (Llama 2 and 3, rope_scaling "llama3" and "linear"),
 * MistralForCausalLM (sliding_window), Qwen2ForCausalLM (q, k, v biases, use_sliding_window with
 * max_window_layers), Qwen3ForCausalLM (q/k norms per head), Gemma2ForCausalLM and
 * Gemma3ForCausalLM ((1 + w) norms, the scaled embedding, sandwich norms, GeGLU, local and global
 * layers, soft-capping, query_pre_attn_scalar, Gemma 3's local rope base; and
 * Gemma3ForConditionalGeneration read as its text model), Phi3ForCausalLM (fused
 * qkv_proj and gate_up_proj, longrope, partial_rotary_factor), MixtralForCausalLM,
 * Qwen2MoeForCausalLM and Qwen3MoeForCausalLM (a sparse mixture of experts per layer, Qwen2-MoE's
 * shared expert, dense layers by mlp_only_layers and decoder_sparse_step): one decoder described by
 * rx_hf_config's fields, which config.c fills per architecture and per key; grouped-query
 * attention, tied embeddings, head_dim, rms_norm_eps, rope_theta; weights in f32, f16 or bf16,
 * stored and computed in the chosen dtype. */
#ifndef RX_FRONTENDS_HF_H
#define RX_FRONTENDS_HF_H

#include "../../base/quant.h"
#include "../../ir/ir.h"

/* config.json, the keys relaxc reads (defaults as transformers' configuration classes have
 * them). */
typedef enum rx_hf_arch {
  RX_HF_LLAMA,
  RX_HF_MISTRAL,
  RX_HF_QWEN2,
  RX_HF_QWEN3,
  RX_HF_GEMMA2,
  RX_HF_GEMMA3,
  RX_HF_PHI3,
  RX_HF_MIXTRAL,
  RX_HF_QWEN2_MOE,
  RX_HF_QWEN3_MOE
} rx_hf_arch;
/* How a checkpoint names a sparse layer's tensors: Mixtral's block_sparse_moe.gate and
 * block_sparse_moe.experts.E.w1 / w3 / w2 (gate, up, down), or Qwen's mlp.gate and
 * mlp.experts.E.gate_proj / up_proj / down_proj. */
typedef enum rx_hf_moe_names { RX_HF_MOE_MIXTRAL, RX_HF_MOE_QWEN } rx_hf_moe_names;
/* The MLP's activation of the gate: SwiGLU's silu, GeGLU's tanh-approximated GELU (Gemma's
 * gelu_pytorch_tanh). */
typedef enum rx_hf_act { RX_HF_ACT_SILU, RX_HF_ACT_GELU_TANH } rx_hf_act;
#define RX_HF_MAX_LAYERS 4096 /* HF_LIMITS' bound on num_hidden_layers */
#define RX_HF_MAX_HALF   512  /* head_dim / 2 at HF_LIMITS' bound on head_dim */
typedef struct rx_hf_config {
  rx_hf_arch arch;
  const char *arch_name; /* "LlamaForCausalLM" (static) */
  int64_t hidden, intermediate, layers, heads, kv_heads, head_dim, vocab, max_positions;
  /* partial_rotary_factor * head_dim (truncated, as transformers' int()): the leading dims of
   * each head that rotate (pairs i, i + rotary_dim / 2), the others pass through; 0: head_dim */
  int64_t rotary_dim;
  double rms_eps, rope_theta;
  bool tie_embeddings;
  bool qkv_bias;  /* Qwen2, or Llama's attention_bias */
  int64_t window; /* sliding-window attention: keys of the last `window` positions; 0: all */
  /* rope_scaling: "default" (none), "linear", "llama3", "longrope", "yarn" */
  char rope_type[16];
  double rope_factor, rope_low_freq, rope_high_freq;
  int64_t rope_original_max;
  /* rope_type "longrope" (Phi-3's su): inverse frequencies divided by short_factor while a
   * sequence holds at most rope_original_max tokens, by long_factor beyond (as transformers
   * chooses per forward: a token's keys keep the rotation they were written with), cos and sin
   * times rope_attn_factor */
  float rope_short[RX_HF_MAX_HALF], rope_long[RX_HF_MAX_HALF];
  double rope_attn_factor; /* longrope's and yarn's factor of cos and sin (0: 1) */
  /* rope_type "yarn": the interpolated (inv / factor) and the original inverse frequencies
   * blended over the rotary dims between the correction dims of beta_fast and beta_slow
   * rotations in rope_original_max positions (floored and ceiled with truncate) */
  double rope_beta_fast, rope_beta_slow;
  bool rope_truncate;
  /* ---- the decoder beyond Llama's, as a description (issue 32): zero is Llama's ---- */
  bool qk_norm;         /* RMSNorm over each head of q and k before the rotation (Qwen3, Gemma 3) */
  double norm_offset;   /* every RMSNorm scales by (norm_offset + w): Gemma's 1, else 0 */
  bool embed_scale;     /* embedding rows times sqrt(hidden_size) in the compute dtype (Gemma) */
  bool sandwich;        /* Gemma 2/3: the attention's and the MLP's outputs normed before their
                           residual adds (post_attention_layernorm, post_feedforward_layernorm);
                           the MLP's input by pre_feedforward_layernorm */
  rx_hf_act act;        /* hidden_act / hidden_activation */
  double attn_scale;    /* the scores' scale: query_pre_attn_scalar^-0.5 (Gemma); 0: head_dim's */
  double attn_softcap;  /* attn_logit_softcapping: scores tanh(s / c) * c; 0: none */
  double final_softcap; /* final_logit_softcapping: logits tanh(l / c) * c; 0: none */
  bool fused_qkv;       /* Phi-3: self_attn.qkv_proj (q, k, v rows) instead of q/k/v_proj */
  bool fused_gate_up;   /* Phi-3: mlp.gate_up_proj (gate rows, then up rows) */
  /* per-layer attention kinds: with layer_kinds, local[l] says layer l is a sliding-window layer
   * (window, and rope_local_theta when set) and the others attend to every key; without it the
   * window (if any) applies to every layer (Mistral) */
  bool layer_kinds;
  uint8_t local[RX_HF_MAX_LAYERS];
  double rope_local_theta; /* Gemma 3's rope_local_base_freq for local layers; 0: rope_theta */
  /* ---- mixture of experts (Mixtral, Qwen2-MoE, Qwen3-MoE; experts 0: none) ---- */
  int64_t experts;      /* num_local_experts / num_experts */
  int64_t top_k;        /* num_experts_per_tok: the experts each token runs */
  int64_t moe_inter;    /* an expert's intermediate size (Qwen's moe_intermediate_size; Mixtral's
                           intermediate_size) */
  int64_t shared_inter; /* Qwen2-MoE's shared expert (shared_expert_intermediate_size), scaled
                           by sigmoid(shared_expert_gate x); 0: none */
  bool norm_topk;       /* the k router probabilities renormalized to sum to 1 (Mixtral always,
                           Qwen's norm_topk_prob) */
  rx_hf_moe_names moe_names;
  uint8_t sparse[RX_HF_MAX_LAYERS]; /* layer l's MLP is the sparse block (not in mlp_only_layers,
                                       and (l + 1) % decoder_sparse_step == 0) */
  rx_dtype file_dtype;              /* torch_dtype, or RX_DTYPE_UNKNOWN */
  int64_t bos;                      /* -1: none */
  int64_t eos[8]; /* eos_token_id (an int or a list), from generation_config.json too */
  int neos;
  /* config.json's quantization_config (frontends/hf/quant_config.c): the scheme every projection
   * of the checkpoint is stored in (when quantized; else dense), and the modules left dense
   * (modules_to_not_convert, compressed-tensors' ignore): a projection whose module name
   * ("model.layers.0.mlp.gate_proj") contains one of qkeep[] (ends with it when qkeep_suffix) */
  bool quantized;
  rx_quant_scheme qscheme;
  char qmethod[24]; /* quant_method, for messages */
  int qgroup;       /* GPTQ's group_size (-1: one group per column) */
  int nqkeep;
  char qkeep[32][96];
  bool qkeep_suffix[32];
} rx_hf_config;

/* Reads DIR/config.json (and generation_config.json for the end-of-sequence ids). Errors name
 * the file and the key: an unsupported architecture (naming the supported ones), a missing key or
 * one outside the bounds shared with GGUF (frontends/hf/hf_int.h, HF_LIMITS), a number too large
 * for a double, an unsupported rope_scaling, activation, partial_rotary_factor (an odd number of
 * rotary dims) or layer type, an eos/bos id outside the vocabulary, a JSON syntax error (with its
 * line and column). */
rx_status hf_read_config(const char *dir, rx_hf_config *out);
/* The same from the text of a config.json (name: for messages); and a generation_config.json's
 * eos_token_id into c. */
rx_status hf_parse_config(const char *text, size_t len, const char *name, rx_hf_config *out);
rx_status hf_parse_generation_config(const char *text, size_t len, const char *name,
                                     rx_hf_config *c);

/* What the compiler builds for it. */
typedef struct rx_hf_options {
  rx_dtype dtype;           /* weights and compute: f32, f16, bf16; RX_DTYPE_UNKNOWN: f16 */
  int64_t max_seq_len;      /* the longest sequence (prompt and generated tokens); 0: the config's
                               max_position_embeddings */
  int64_t max_batch;        /* the most sequences one decode step takes; 0: RX_HF_DEFAULT_BATCH */
  bool no_weights;          /* config.json alone: the checkpoint is not read and the weights stay
                               parameters, passed at run time (shape studies, compile benchmarks) */
  const char *quantize;     /* a scheme of relaxc's own (base/quant.h: "q4f16_g32", "q8f16", ...)
                               for every layer's projections, quantized at import (round to
                               nearest); NULL: the compute dtype */
  bool quantize_embeddings; /* with quantize: the embedding table (read through quant_take) and
                               the output layer in the same scheme; false: the compute dtype */
  /* Tensor parallelism, the Megatron preset (issue 35, docs/distributed.md): with tp_world > 1
   * the import is rank tp_rank's local program of tp_world ranks: its q and KV heads, its
   * columns of gate and up, its rows of o and down (each followed by an allreduce), its rows of
   * lm_head (the logits allgathered), its KV heads' cache, and its slices of those weights.
   * 0 or 1: the whole model. hf_tp_check names what does not divide. */
  int tp_world, tp_rank;
  /* Pipeline parallelism (issue 35, docs/distributed.md "Pipeline parallelism"): with pp_world
   * > 1 the import is stage pp_rank's program of pp_world stages: a contiguous range of layers
   * (hf_pp_layers), the embedding on stage 0, the final norm and lm_head on the last, the hidden
   * states received from the stage before and sent to the next, the logits sent to stage 0; its
   * layers' weights and KV cache only. 0 or 1: the whole model. hf_pp_check names what does not
   * split. */
  int pp_world, pp_rank;
} rx_hf_options;
#define RX_HF_DEFAULT_BATCH 16 /* decode's bound on b: the memory plan sizes storages for it */
/* Decode attention splits each sequence's cache into chunks of this many tokens, one block of
 * work each (FlashDecoding): 256 keys give a block enough work to hide its launch while a cache
 * of 4096 tokens still makes 16 chunks per head. */
#define RX_HF_DECODE_CHUNK 256

/* Is path a folder with a config.json? */
bool hf_is_model_dir(const char *path);
/* For a folder without config.json given as a model: an error that says so and what a model
 * folder holds; NULL for anything else (a model folder, a file, a missing path). */
rx_status hf_check_not_bare_dir(const char *path);
/* Is path a file that starts with GGUF's magic? hf_import takes one too (frontends/gguf/model.c,
 * docs/gguf.md): architectures llama (Mixtral as llama with experts), qwen2, qwen3, qwen2moe,
 * qwen3moe, gemma2, gemma3 and phi3, the hyperparameters from their metadata keys,
 * llama.cpp's tensor names, each quantized projection kept in its block format (quant_matmul with
 * the GGUF scheme), the tokenizer from tokenizer.ggml.*. */
bool gguf_hf_is_gguf(const char *path);

/* Imports the model in folder dir into m: the graph functions create_kv_cache, prefill and
 * decode (docs/llm.md), the extern declarations of the KV cache's builtins, every weight
 * (mapped from the checkpoint, converted to the compute dtype when the artifact is written),
 * and the sections an artifact carries for generation (llm.json, tokenizer.json). A missing or
 * mis-shaped tensor names the tensor, the file and the expected and actual shapes. */
rx_status hf_import(rx_module *m, const char *dir, const rx_hf_options *o);

/* Whether config c (read from dir) can be split over `world` ranks by the Megatron preset: heads,
 * KV heads, the intermediate size and the vocabulary each divisible by world, a dense
 * unquantized decoder with separate q/k/v and gate/up projections, a Hugging Face folder (not
 * GGUF), no --quantize. An error names the config key, its value and world (frontends/hf/tp.c). */
rx_status hf_tp_check(const rx_hf_config *c, const rx_hf_options *o, bool gguf, int world);

/* Whether config c can be cut into o->pp_world pipeline stages: at least one layer per stage,
 * o->pp_rank one of the stages, no --tensor-parallel beside it. An error names the flag, the
 * config key and what was expected (frontends/hf/pp.c). */
rx_status hf_pp_check(const rx_hf_config *c, const rx_hf_options *o);
/* Stage `stage` of `stages` holds layers [*l0, *l1) of `layers`: contiguous, balanced (the
 * counts differ by one at most, the larger ones first). */
void hf_pp_layers(int64_t layers, int stages, int stage, int64_t *l0, int64_t *l1);

/* Quantizes W [rows, in] (f32, row-major) into relaxc's own scheme sc (round to nearest,
 * frontends/hf/quantize.c) as base/quant.h lays it out: out_w (rows * in / 2 bytes for int4,
 * rows * in int8 for q8f16*), out_s (rows * in / G f16 bits), out_z (rows * in / G zero points;
 * the asymmetric schemes only, NULL otherwise). An error names the scheme and the shape: a GGUF
 * format, or in not a positive multiple of the group. */
rx_status hf_quantize(rx_quant_scheme sc, const float *w, int64_t rows, int64_t in, uint8_t *out_w,
                      uint16_t *out_s, uint8_t *out_z);

#endif
