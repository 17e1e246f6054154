/* cuda_bf16.h for the SIMT emulator: __nv_bfloat16 as a struct over its 16 bits, converted from
 * float with round-to-nearest-even (NaN kept quiet), arithmetic in float rounded once per op. */
#ifndef SIMT_CUDA_BF16_H
#define SIMT_CUDA_BF16_H

#include <math.h>
#include <string.h>

#include "cuda_fp16.h"

namespace simt {
static inline unsigned short f2bf(float f) {
  unsigned u;
  memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((u >> 16) | 0x40u); /* quiet NaN */
  u += 0x7fffu + ((u >> 16) & 1u);
  return (unsigned short)(u >> 16);
}
static inline float bf2f(unsigned short b) {
  unsigned u = (unsigned)b << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}
} // namespace simt

struct __nv_bfloat16_raw {
  unsigned short x;
};
struct __nv_bfloat16 {
  unsigned short __x;
  __nv_bfloat16() = default;
  __nv_bfloat16(const __nv_bfloat16_raw &r) : __x(r.x) {}
  __nv_bfloat16(float f) : __x(simt::f2bf(f)) {}
  __nv_bfloat16(double f) : __x(simt::f2bf((float)f)) {}
  __nv_bfloat16(int i) : __x(simt::f2bf((float)i)) {}
  __nv_bfloat16(unsigned i) : __x(simt::f2bf((float)i)) {}
  __nv_bfloat16(long long i) : __x(simt::f2bf((float)i)) {}
  operator float() const { return simt::bf2f(__x); }
  operator __nv_bfloat16_raw() const { return __nv_bfloat16_raw{__x}; }
};
static_assert(sizeof(__nv_bfloat16) == 2, "__nv_bfloat16 is 2 bytes");
struct __attribute__((aligned(4))) __nv_bfloat162 {
  __nv_bfloat16 x, y;
};
typedef __nv_bfloat16 nv_bfloat16;
typedef __nv_bfloat162 nv_bfloat162;

static inline float __bfloat162float(__nv_bfloat16 b) { return simt::bf2f(b.__x); }
static inline __nv_bfloat16 __float2bfloat16(float f) { return __nv_bfloat16(f); }
static inline __nv_bfloat16 __float2bfloat16_rn(float f) { return __nv_bfloat16(f); }
static inline __nv_bfloat16 __double2bfloat16(double f) { return __nv_bfloat16((float)f); }
static inline __nv_bfloat162 __floats2bfloat162_rn(float a, float b) {
  return __nv_bfloat162{__nv_bfloat16(a), __nv_bfloat16(b)};
}
static inline __nv_bfloat16 __ushort_as_bfloat16(unsigned short s) { return __nv_bfloat16_raw{s}; }
static inline unsigned short __bfloat16_as_ushort(__nv_bfloat16 b) { return b.__x; }
static inline __half __bfloat162half(__nv_bfloat16 b) { return __half(simt::bf2f(b.__x)); }

#define SIMT_B_BIN(name, op)                                                                       \
  static inline __nv_bfloat16 name(__nv_bfloat16 a, __nv_bfloat16 b) {                             \
    return __nv_bfloat16(simt::bf2f(a.__x) op simt::bf2f(b.__x));                                  \
  }
SIMT_B_BIN(__hadd, +)
SIMT_B_BIN(__hsub, -)
SIMT_B_BIN(__hmul, *)
SIMT_B_BIN(__hdiv, /)
static inline __nv_bfloat16 __hneg(__nv_bfloat16 a) {
  return __nv_bfloat16_raw{(unsigned short)(a.__x ^ 0x8000u)};
}
static inline __nv_bfloat16 __hfma(__nv_bfloat16 a, __nv_bfloat16 b, __nv_bfloat16 c) {
  return __nv_bfloat16(fmaf((float)a, (float)b, (float)c));
}
static inline __nv_bfloat16 __hmax(__nv_bfloat16 a, __nv_bfloat16 b) {
  return __nv_bfloat16(fmaxf((float)a, (float)b));
}
static inline __nv_bfloat16 __hmin(__nv_bfloat16 a, __nv_bfloat16 b) {
  return __nv_bfloat16(fminf((float)a, (float)b));
}
#define SIMT_B_UN(name, f)                                                                         \
  static inline __nv_bfloat16 name(__nv_bfloat16 a) { return __nv_bfloat16(f((float)a)); }
SIMT_B_UN(hexp, expf)
SIMT_B_UN(hexp2, exp2f)
SIMT_B_UN(hlog, logf)
SIMT_B_UN(hsqrt, sqrtf)
SIMT_B_UN(hrsqrt, 1.0f / sqrtf)
SIMT_B_UN(htanh, tanhf)
SIMT_B_UN(hrcp, 1.0f /)

static inline __nv_bfloat16 operator+(__nv_bfloat16 a, __nv_bfloat16 b) { return __hadd(a, b); }
static inline __nv_bfloat16 operator-(__nv_bfloat16 a, __nv_bfloat16 b) { return __hsub(a, b); }
static inline __nv_bfloat16 operator*(__nv_bfloat16 a, __nv_bfloat16 b) { return __hmul(a, b); }
static inline __nv_bfloat16 operator/(__nv_bfloat16 a, __nv_bfloat16 b) { return __hdiv(a, b); }
static inline __nv_bfloat16 operator-(__nv_bfloat16 a) { return __hneg(a); }
static inline __nv_bfloat16 &operator+=(__nv_bfloat16 &a, __nv_bfloat16 b) {
  return a = __hadd(a, b);
}
static inline __nv_bfloat16 &operator*=(__nv_bfloat16 &a, __nv_bfloat16 b) {
  return a = __hmul(a, b);
}
static inline bool operator==(__nv_bfloat16 a, __nv_bfloat16 b) { return (float)a == (float)b; }
static inline bool operator!=(__nv_bfloat16 a, __nv_bfloat16 b) { return (float)a != (float)b; }
static inline bool operator<(__nv_bfloat16 a, __nv_bfloat16 b) { return (float)a < (float)b; }
static inline bool operator>(__nv_bfloat16 a, __nv_bfloat16 b) { return (float)a > (float)b; }
static inline bool operator<=(__nv_bfloat16 a, __nv_bfloat16 b) { return (float)a <= (float)b; }
static inline bool operator>=(__nv_bfloat16 a, __nv_bfloat16 b) { return (float)a >= (float)b; }

#endif
