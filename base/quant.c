/* base/quant.c: the table of base/quant.h. */
#include "quant.h"

#include <string.h>

static const rx_quant_info schemes[] = {
#define X(e, name, kind, block, bytes, gguf) {name, kind, block, bytes, gguf},
    RX_QUANT_SCHEMES(X)
#undef X
};

const rx_quant_info *rx_quant_info_of(rx_quant_scheme s) {
  RX_ASSERT((unsigned)s < RX_QUANT_COUNT);
  return &schemes[s];
}

bool rx_quant_lookup(const char *name, rx_quant_scheme *out) {
  for (int i = 0; i < RX_QUANT_COUNT; i++)
    if (name && !strcmp(schemes[i].name, name)) {
      *out = (rx_quant_scheme)i;
      return true;
    }
  return false;
}

void rx_quant_names(rx_strbuf *out) {
  for (int i = 0; i < RX_QUANT_COUNT; i++)
    rx_strbuf_printf(out, "%s%s", i ? ", " : "", schemes[i].name);
}

int rx_quant_nbuffers(rx_quant_scheme s) {
  switch (rx_quant_info_of(s)->kind) {
  case RX_QUANT_INT4_ZERO:
    return 3;
  case RX_QUANT_GGUF:
    return 1;
  default:
    return 2;
  }
}
