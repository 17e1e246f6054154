/* frontends/hf/tp.c: what the Megatron preset (issue 35, docs/distributed.md "The Megatron preset
 * for imported LLMs") can split. frontends/hf/llama.c emits rank r's local program of an imported
 * decoder directly (its heads, its columns and rows of the projections, its KV heads' cache, an
 * allreduce after o and down, the logits allgathered); this file refuses, by the config key that
 * does not divide or by the feature it does not split, a model that it cannot build that way,
 * before anything is read. */
#include "hf_int.h"

#include <stdio.h>

/* key % world != 0: an error naming the key, its value and what the preset splits by it. */
static rx_status divides(const char *key, int64_t v, int world, const char *what) {
  if (v % world == 0) return NULL;
  return base_status_make(RX_ERR_INVALID,
                          "--tensor-parallel %d: %s %lld is not divisible by %d (the Megatron "
                          "preset gives each rank %s)",
                          world, key, (long long)v, world, what);
}

static rx_status unsupported(int world, const char *what) {
  return base_status_make(RX_ERR_UNSUPPORTED,
                          "--tensor-parallel %d: the Megatron preset does not split %s yet", world,
                          what);
}

rx_status hf_tp_check(const rx_hf_config *c, const rx_hf_options *o, bool gguf, int world) {
  if (world < 1) return base_status_make(RX_ERR_INVALID, "--tensor-parallel %d: 1..4096", world);
  if (o && (o->tp_rank < 0 || o->tp_rank >= world))
    return base_status_make(RX_ERR_INVALID, "--tensor-parallel %d: rank %d is not one of 0..%d",
                            world, o->tp_rank, world - 1);
  if (gguf) return unsupported(world, "a GGUF file (its block formats)");
  if (o && o->quantize) return unsupported(world, "a model quantized at import (--quantize)");
  if (c->quantized) return unsupported(world, "a quantized checkpoint (quantization_config)");
  if (c->experts) return unsupported(world, "a mixture of experts");
  if (c->fused_qkv || c->fused_gate_up)
    return unsupported(world, "fused qkv_proj and gate_up_proj weights (Phi-3)");
  RX_RETURN_IF_ERROR(
      divides("num_attention_heads", c->heads, world, "an equal share of the query heads"));
  RX_RETURN_IF_ERROR(divides("num_key_value_heads", c->kv_heads, world,
                             "whole KV heads: its share of the KV cache"));
  RX_RETURN_IF_ERROR(divides("intermediate_size", c->intermediate, world,
                             "an equal share of the MLP's gate and up columns"));
  return divides("vocab_size", c->vocab, world, "an equal share of lm_head's rows");
}
