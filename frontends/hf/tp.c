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

/* --quantize: a row-parallel projection (o_proj, down_proj) is cut along its input, so each rank's
 * columns must be whole groups of the scheme for its groups to be the whole model's (the column-
 * parallel ones are cut by rows, whose groups stay whole). A projection whose input is no whole
 * number of groups stays dense in the whole model too (frontends/hf/llama.c's quantize_entry)
 * and is no concern. An unknown scheme is left to the importer's own error. */
static rx_status quantized(const rx_hf_config *c, const rx_hf_options *o, int world) {
  rx_quant_scheme sc;
  if (!base_quant_lookup(o->quantize, &sc)) return NULL;
  int64_t G = base_quant_info_of(sc)->block;
  const struct {
    const char *name, *key;
    int64_t in;
  } rowp[] = {{"o_proj", "num_attention_heads * head_dim", c->heads * c->head_dim},
              {"down_proj", "intermediate_size", c->intermediate}};
  for (size_t i = 0; i < RX_ARRAY_LEN(rowp); i++) {
    int64_t in = rowp[i].in;
    if (in % G == 0 && (in / world) % G != 0)
      return base_status_make(RX_ERR_UNSUPPORTED,
                              "--tensor-parallel %d: --quantize %s: %s's input (%s = %lld) splits "
                              "into %lld columns per rank, not a whole number of %lld-weight "
                              "groups (each rank's columns must start and end at a group: a "
                              "scheme of smaller groups, or fewer ranks)",
                              world, o->quantize, rowp[i].name, rowp[i].key, (long long)in,
                              (long long)(in / world), (long long)G);
  }
  return NULL;
}

rx_status hf_tp_check(const rx_hf_config *c, const rx_hf_options *o, bool gguf, int world) {
  if (world < 1) return base_status_make(RX_ERR_INVALID, "--tensor-parallel %d: 1..4096", world);
  if (o && (o->tp_rank < 0 || o->tp_rank >= world))
    return base_status_make(RX_ERR_INVALID, "--tensor-parallel %d: rank %d is not one of 0..%d",
                            world, o->tp_rank, world - 1);
  if (gguf) return unsupported(world, "a GGUF file (its block formats)");
  if (o && o->quantize) RX_RETURN_IF_ERROR(quantized(c, o, world));
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
