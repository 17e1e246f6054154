/* base/half.c: f16 and bf16 to and from f32, and one element of a buffer of any dtype as a
 * double (base.h). The one rounding of the compiler: the interpreter rounds after every
 * operation with it, and the weights writer, the front ends and `relaxc run` convert with it,
 * so they all agree bit for bit. */
#include "base.h"

#include <math.h>
#include <string.h>

static uint32_t f2u(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}
static float u2f(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}

uint16_t base_f32_to_f16(float f) {
  uint32_t x = f2u(f);
  uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
  uint32_t ax = x & 0x7fffffffu;
  if (ax >= 0x7f800000u) { /* inf, nan (kept quiet, top payload bits kept) */
    if (ax == 0x7f800000u) return (uint16_t)(sign | 0x7c00u);
    return (uint16_t)(sign | 0x7e00u | ((ax >> 13) & 0x3ffu));
  }
  int e = (int)(ax >> 23) - 127 + 15; /* f16 biased exponent */
  uint32_t m = ax & 0x7fffffu;
  if (e >= 31) return (uint16_t)(sign | 0x7c00u);
  if (e >= 1) {
    uint32_t h = ((uint32_t)e << 10) | (m >> 13);
    uint32_t rest = m & 0x1fffu;
    if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) h++; /* may carry into inf: right */
    return (uint16_t)(sign | h);
  }
  /* subnormal (or zero): units of 2^-24; value = (m | 2^23) * 2^(E - 23), E = e - 15 */
  if (ax == 0) return sign;
  int shift = 14 - e; /* 2^(E-23) / 2^-24 = 2^(E+1) = 2^(e-14) */
  if (shift > 24) return sign;
  uint32_t mm = m | 0x800000u;
  uint32_t q = mm >> shift;
  uint32_t rest = mm & ((1u << shift) - 1u), half = 1u << (shift - 1);
  if (rest > half || (rest == half && (q & 1u))) q++; /* may become the smallest normal: right */
  return (uint16_t)(sign | q);
}

float base_f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  if (e == 0) {
    float v = ldexpf((float)m, -24);
    return sign ? -v : v;
  }
  if (e == 31) return u2f(sign | 0x7f800000u | (m << 13));
  return u2f(sign | ((e + 112u) << 23) | (m << 13));
}

uint16_t base_f32_to_bf16(float f) {
  uint32_t x = f2u(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40u); /* quiet nan */
  x += 0x7fffu + ((x >> 16) & 1u);
  return (uint16_t)(x >> 16);
}

float base_bf16_to_f32(uint16_t h) { return u2f((uint32_t)h << 16); }

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
