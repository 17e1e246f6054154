/* ir/consts.c: the bytes of a tensor constant (RX_NODE_CONST) in its dtype's storage, the one
 * conversion of constants: the graph interpreter evaluates a constant with it
 * (interp/graph_interp.c) and the host program stores it as a weight (passes/lower_host.c), so
 * both give the same bits (ir.h, "constants"). */
#include "ir.h"

#include <string.h>

void ir_scalar_bytes(rx_dtype dt, double f, int64_t i, void *storage) {
  memset(storage, 0, 8);
  switch (dt) {
  case RX_DTYPE_F32: {
    float x = (float)f;
    memcpy(storage, &x, 4);
    break;
  }
  case RX_DTYPE_F16: {
    uint16_t h = base_f32_to_f16((float)f);
    memcpy(storage, &h, 2);
    break;
  }
  case RX_DTYPE_BF16: {
    uint16_t h = base_f32_to_bf16((float)f);
    memcpy(storage, &h, 2);
    break;
  }
  case RX_DTYPE_F64:
    memcpy(storage, &f, 8);
    break;
  case RX_DTYPE_I64:
  case RX_DTYPE_U64:
    memcpy(storage, &i, 8);
    break;
  case RX_DTYPE_I32:
  case RX_DTYPE_U32: {
    uint32_t x = (uint32_t)i;
    memcpy(storage, &x, 4);
    break;
  }
  case RX_DTYPE_I16:
  case RX_DTYPE_U16: {
    uint16_t x = (uint16_t)i;
    memcpy(storage, &x, 2);
    break;
  }
  default: {
    uint8_t x = (uint8_t)i;
    memcpy(storage, &x, 1);
    break;
  }
  }
}

void ir_const_bytes(const rx_node *n, void *out, size_t count) {
  rx_dtype dt = n->sinfo->dtype;
  int bits = ir_dtype_bits(dt);
  size_t es = bits > 0 ? (size_t)bits / 8 : 0;
  int64_t scratch[1];
  for (size_t i = 0; i < count && i < n->count; i++) {
    int64_t v = 0;
    if (n->idata) /* exact integers */
      v = n->idata[i];
    else if (!ir_dtype_is_float(dt)) /* a float's value may not fit */
      v = dt == RX_DTYPE_U64 && n->data[i] >= 9223372036854775808.0 ? (int64_t)(uint64_t)n->data[i]
                                                                    : (int64_t)n->data[i];
    ir_scalar_bytes(dt, n->data[i], v, scratch);
    memcpy((char *)out + i * es, scratch, es);
  }
}
