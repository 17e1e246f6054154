/* base/half.c: one element of a buffer of any dtype as a double (base.h). The f16 and bf16
 * conversions it uses are inline in base.h: the one rounding of the compiler (the interpreter
 * rounds after every operation with it, and the weights writer, the front ends and `relaxc run`
 * convert with it, so they all agree bit for bit). */
#include "base.h"

double base_elem_to_f64(const void *p, rx_dtype t, size_t i) {
  switch (t) {
  case RX_DTYPE_F32:
    return ((const float *)p)[i];
  case RX_DTYPE_F16:
    return base_f16_to_f32(((const uint16_t *)p)[i]);
  case RX_DTYPE_BF16:
    return base_bf16_to_f32(((const uint16_t *)p)[i]);
  case RX_DTYPE_I64:
    return (double)((const int64_t *)p)[i];
  case RX_DTYPE_I32:
    return ((const int32_t *)p)[i];
  case RX_DTYPE_I16:
    return ((const int16_t *)p)[i];
  case RX_DTYPE_I8:
    return ((const int8_t *)p)[i];
  case RX_DTYPE_F64:
    return ((const double *)p)[i];
  case RX_DTYPE_U16:
    return ((const uint16_t *)p)[i];
  case RX_DTYPE_U32:
    return ((const uint32_t *)p)[i];
  case RX_DTYPE_U64:
    return (double)((const uint64_t *)p)[i];
  default:
    return ((const uint8_t *)p)[i];
  }
}
