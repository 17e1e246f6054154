/* tests/fuzz/fuzz_hf_config.c: libFuzzer harness of the Hugging Face config.json reader
 * (frontends/hf/config.c): a config's text, and the same text as a generation_config.json. An
 * accepted config satisfies the bounds and checks it shares with GGUF (frontends/hf/limits.c),
 * its description's fields what the builder relies on, and its end-of-sequence ids, from either
 * file, lie inside the vocabulary. The corpus holds a config of each architecture, and the
 * quantization_configs of AWQ, GPTQ and compressed-tensors' FP8 (quant_*.json). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "frontends/hf/hf_int.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *text = malloc(size ? size : 1);
  if (!text) return 0;
  if (size) memcpy(text, data, size);
  rx_hf_config c;
  rx_status s = hf_parse_config(text, size, "fuzz/config.json", &c);
  if (!s) {
    /* what the reader promises of an accepted config */
    if (c.hidden < 1 || c.heads < 1 || c.kv_heads < 1 || c.heads % c.kv_heads || c.head_dim < 2 ||
        c.head_dim % 2 || c.layers < 1 || c.vocab < 1 || c.neos > 8)
      abort();
    /* the description (issue 32): an even rotary part of each head, per-layer kinds as flags,
     * caps and scales that are numbers the kernels take, longrope's factors positive */
    if (c.rotary_dim < 2 || c.rotary_dim > c.head_dim || c.rotary_dim % 2 || c.window < 0 ||
        c.attn_softcap < 0 || c.final_softcap < 0 || c.attn_scale < 0 || c.rope_local_theta < 0)
      abort();
    /* a quantization_config (issue 32): a scheme of a checkpoint's own format, a bounded list */
    if (c.quantized && ((unsigned)c.qscheme >= RX_QUANT_COUNT || base_quant_is_own(c.qscheme) ||
                        c.nqkeep < 0 || c.nqkeep > 32))
      abort();
    for (int64_t l = 0; c.layer_kinds && l < c.layers; l++)
      if (c.local[l] > 1) abort();
    for (int64_t i = 0; !strcmp(c.rope_type, "longrope") && i < c.rotary_dim / 2; i++)
      if (!(c.rope_short[i] > 0) || !(c.rope_long[i] > 0)) abort();
    /* within the bounds shared with GGUF (HF_LIMITS), consistent, the tokens in the vocab */
    rx_status again = hf_check_config(&c, "fuzz/config.json", NULL);
    if (again) abort();
    rx_status g = hf_parse_generation_config(text, size, "fuzz/generation_config.json", &c);
    if (c.neos > 8) abort();
    for (int i = 0; !g && i < c.neos; i++)
      if (c.eos[i] < 0 || c.eos[i] >= c.vocab) abort();
    rx_status_free(g);
  }
  rx_status_free(s);
  free(text);
  return 0;
}
