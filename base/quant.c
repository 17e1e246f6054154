/* base/quant.c: the table of base/quant.h. */
#include "quant.h"

#include <string.h>

static const rx_quant_info schemes[] = {
#define X(e, name, kind, block, bytes, gguf) {name, kind, block, bytes, gguf},
    RX_QUANT_SCHEMES(X)
#undef X
};

const rx_quant_info *base_quant_info_of(rx_quant_scheme s) {
  RX_ASSERT((unsigned)s < RX_QUANT_COUNT);
  return &schemes[s];
}

bool base_quant_lookup(const char *name, rx_quant_scheme *out) {
  for (int i = 0; i < RX_QUANT_COUNT; i++)
    if (name && !strcmp(schemes[i].name, name)) {
      *out = (rx_quant_scheme)i;
      return true;
    }
  return false;
}

void base_quant_names(rx_strbuf *out) {
  for (int i = 0; i < RX_QUANT_COUNT; i++)
    base_strbuf_printf(out, "%s%s", i ? ", " : "", schemes[i].name);
}

int base_quant_nbuffers(rx_quant_scheme s) {
  switch (base_quant_info_of(s)->kind) {
  case RX_QUANT_INT4_ZERO:
    return 3;
  case RX_QUANT_GGUF:
    return 1;
  case RX_QUANT_AWQ:
    return 3;
  case RX_QUANT_GPTQ:
  case RX_QUANT_GPTQ_V2:
    return 4;
  default:
    return 2;
  }
}

bool base_quant_is_own(rx_quant_scheme s) {
  rx_quant_kind k = base_quant_info_of(s)->kind;
  return k == RX_QUANT_INT4 || k == RX_QUANT_INT4_ZERO || k == RX_QUANT_INT8;
}
