/* cuda_fp16.h for the SIMT emulator: __half as a struct over _Float16 with the conversions and
 * operators of NVIDIA's header (so code NVRTC rejects, like `h * 2.0f`, is rejected here too). */
#ifndef SIMT_CUDA_FP16_H
#define SIMT_CUDA_FP16_H

#include <math.h>
#include <string.h>

struct __half_raw {
  unsigned short x;
};
struct __half {
  _Float16 v;
  __half() = default;
  __half(const __half_raw &r) { memcpy(&v, &r.x, 2); }
  __half(float f) : v((_Float16)f) {}
  __half(double f) : v((_Float16)f) {}
  __half(int i) : v((_Float16)i) {}
  __half(unsigned i) : v((_Float16)i) {}
  __half(short i) : v((_Float16)i) {}
  __half(unsigned short i) : v((_Float16)i) {}
  __half(long long i) : v((_Float16)i) {}
  __half(unsigned long long i) : v((_Float16)i) {}
  operator float() const { return (float)v; }
  operator __half_raw() const {
    __half_raw r;
    memcpy(&r.x, &v, 2);
    return r;
  }
};
static_assert(sizeof(__half) == 2, "__half is 2 bytes");
struct __attribute__((aligned(4))) __half2 {
  __half x, y;
};
typedef __half half;
typedef __half2 half2;

static inline float __half2float(__half h) { return (float)h.v; }
static inline __half __float2half(float f) { return __half(f); }
static inline __half __float2half_rn(float f) { return __half(f); }
static inline __half __double2half(double f) { return __half(f); }
static inline __half __int2half_rn(int i) { return __half(i); }
static inline int __half2int_rz(__half h) { return (int)h.v; }
static inline int __half2int_rn(__half h) { return (int)nearbyintf((float)h.v); }
static inline short __half_as_short(__half h) {
  short r;
  memcpy(&r, &h, 2);
  return r;
}
static inline unsigned short __half_as_ushort(__half h) {
  unsigned short r;
  memcpy(&r, &h, 2);
  return r;
}
static inline __half __short_as_half(short s) {
  __half r;
  memcpy(&r, &s, 2);
  return r;
}
static inline __half __ushort_as_half(unsigned short s) {
  __half r;
  memcpy(&r, &s, 2);
  return r;
}
static inline __half2 __floats2half2_rn(float a, float b) { return __half2{__half(a), __half(b)}; }
static inline __half2 __float2half2_rn(float a) { return __half2{__half(a), __half(a)}; }
static inline __half2 __halves2half2(__half a, __half b) { return __half2{a, b}; }
static inline __half2 __half2half2(__half a) { return __half2{a, a}; }
static inline __half __low2half(__half2 a) { return a.x; }
static inline __half __high2half(__half2 a) { return a.y; }
static inline float __low2float(__half2 a) { return (float)a.x.v; }
static inline float __high2float(__half2 a) { return (float)a.y.v; }

/* one rounding per operation, as the hardware does */
#define SIMT_H_BIN(name, op)                                                                       \
  static inline __half name(__half a, __half b) { return __half((float)a.v op(float) b.v); }       \
  static inline __half2 name##2(__half2 a, __half2 b) {                                            \
    return __half2{name(a.x, b.x), name(a.y, b.y)};                                                \
  }
SIMT_H_BIN(__hadd, +)
SIMT_H_BIN(__hsub, -)
SIMT_H_BIN(__hmul, *)
SIMT_H_BIN(__hdiv, /)
static inline __half __hneg(__half a) { return __half(-(float)a.v); }
static inline __half __habs(__half a) { return __half(fabsf((float)a.v)); }
static inline __half __hfma(__half a, __half b, __half c) {
  return __half(fmaf((float)a.v, (float)b.v, (float)c.v));
}
static inline __half2 __hfma2(__half2 a, __half2 b, __half2 c) {
  return __half2{__hfma(a.x, b.x, c.x), __hfma(a.y, b.y, c.y)};
}
static inline __half __hmax(__half a, __half b) { return __half(fmaxf((float)a.v, (float)b.v)); }
static inline __half __hmin(__half a, __half b) { return __half(fminf((float)a.v, (float)b.v)); }
static inline bool __heq(__half a, __half b) { return a.v == b.v; }
static inline bool __hne(__half a, __half b) { return a.v != b.v; }
static inline bool __hlt(__half a, __half b) { return a.v < b.v; }
static inline bool __hle(__half a, __half b) { return a.v <= b.v; }
static inline bool __hgt(__half a, __half b) { return a.v > b.v; }
static inline bool __hge(__half a, __half b) { return a.v >= b.v; }
static inline bool __hisnan(__half a) { return a.v != a.v; }
static inline bool __hisinf(__half a) { return isinf((float)a.v); }
#define SIMT_H_UN(name, f)                                                                         \
  static inline __half name(__half a) { return __half(f((float)a.v)); }                            \
  static inline __half2 name##2(__half2 a) { return __half2{name(a.x), name(a.y)}; }
SIMT_H_UN(hexp, expf)
SIMT_H_UN(hexp2, exp2f)
SIMT_H_UN(hlog, logf)
SIMT_H_UN(hlog2, log2f)
SIMT_H_UN(hsqrt, sqrtf)
SIMT_H_UN(hrsqrt, 1.0f / sqrtf)
SIMT_H_UN(hsin, sinf)
SIMT_H_UN(hcos, cosf)
SIMT_H_UN(htanh, tanhf)
SIMT_H_UN(hfloor, floorf)
SIMT_H_UN(hceil, ceilf)
SIMT_H_UN(hrcp, 1.0f /)

static inline __half operator+(__half a, __half b) { return __hadd(a, b); }
static inline __half operator-(__half a, __half b) { return __hsub(a, b); }
static inline __half operator*(__half a, __half b) { return __hmul(a, b); }
static inline __half operator/(__half a, __half b) { return __hdiv(a, b); }
static inline __half operator-(__half a) { return __hneg(a); }
static inline __half operator+(__half a) { return a; }
static inline __half &operator+=(__half &a, __half b) { return a = __hadd(a, b); }
static inline __half &operator-=(__half &a, __half b) { return a = __hsub(a, b); }
static inline __half &operator*=(__half &a, __half b) { return a = __hmul(a, b); }
static inline __half &operator/=(__half &a, __half b) { return a = __hdiv(a, b); }
static inline bool operator==(__half a, __half b) { return a.v == b.v; }
static inline bool operator!=(__half a, __half b) { return a.v != b.v; }
static inline bool operator<(__half a, __half b) { return a.v < b.v; }
static inline bool operator<=(__half a, __half b) { return a.v <= b.v; }
static inline bool operator>(__half a, __half b) { return a.v > b.v; }
static inline bool operator>=(__half a, __half b) { return a.v >= b.v; }
static inline __half2 operator+(__half2 a, __half2 b) { return __hadd2(a, b); }
static inline __half2 operator-(__half2 a, __half2 b) { return __hsub2(a, b); }
static inline __half2 operator*(__half2 a, __half2 b) { return __hmul2(a, b); }
static inline __half2 operator/(__half2 a, __half2 b) { return __hdiv2(a, b); }

#endif
