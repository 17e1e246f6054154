/* frontends/hf/pp.c: how the pipeline-parallel import (issue 35, docs/distributed.md "Pipeline
 * parallelism") cuts a decoder into stages, and what it refuses. frontends/hf/llama.c emits stage
 * s's program directly: its contiguous range of layers (hf_pp_layers), the embedding on the first
 * stage, the final norm and lm_head on the last, the hidden states between stages through send
 * and recv; this file checks, before anything is read, that the model has a layer for every
 * stage. */
#include "hf_int.h"

void hf_pp_layers(int64_t layers, int stages, int stage, int64_t *l0, int64_t *l1) {
  int64_t per = layers / stages, extra = layers % stages;
  /* the first `extra` stages hold one layer more */
  *l0 = stage * per + (stage < extra ? stage : extra);
  *l1 = *l0 + per + (stage < extra ? 1 : 0);
}

rx_status hf_pp_check(const rx_hf_config *c, const rx_hf_options *o) {
  int world = o->pp_world;
  if (world < 1 || world > 4096)
    return base_status_make(RX_ERR_INVALID, "--pipeline-parallel %d: expected 1..4096", world);
  if (o->pp_rank < 0 || o->pp_rank >= world)
    return base_status_make(RX_ERR_INVALID, "--pipeline-parallel %d: stage %d is not one of 0..%d",
                            world, o->pp_rank, world - 1);
  if (o->tp_world > 1)
    return base_status_make(RX_ERR_UNSUPPORTED,
                            "--pipeline-parallel %d with --tensor-parallel %d: stages of "
                            "tensor-parallel groups (a 2-D mesh of ranks) are not built yet; "
                            "give one of the two",
                            world, o->tp_world);
  if (c->layers < world)
    return base_status_make(RX_ERR_INVALID,
                            "--pipeline-parallel %d: num_hidden_layers %lld is fewer than the "
                            "stages (each stage holds at least one whole layer)",
                            world, (long long)c->layers);
  return NULL;
}
