/* simt_cuda.h: prelude that lets clang compile CUDA C kernels as C++17 for the CPU SIMT
 * emulator (-include simt_cuda.h). Provides the CUDA keywords, thread ids, barriers, warp
 * functions, atomics, vector types and device math; cuda_fp16.h / cuda_bf16.h come from
 * tests/simt/include. Blocks run one at a time, so `__shared__` variables are static storage:
 * per block, as on the GPU. See README.md for what is not emulated. */
#ifndef SIMT_CUDA_H
#define SIMT_CUDA_H

#include "simt_common.h"

#include <math.h> /* CUDA device code sees float overloads (exp(float), ...) globally */

#define SIMT_LANG_CUDA 1
#define __CUDACC_RTC__ 1 /* kernels are compiled as NVRTC would see them: no host headers */

/* ---- keywords ---- */
#define __global__
#define __device__
#define __host__
#define __noinline__    __attribute__((noinline))
#define __forceinline__ inline __attribute__((always_inline))
#define __launch_bounds__(...)
#define __restrict__ /* no noalias: other fibers write the same memory across barriers */
#define __align__(n) __attribute__((aligned(n)))
#define __shared__   static
#define __constant__ static
#define __managed__

/* ---- thread ids ---- */
struct uint3 {
  unsigned x, y, z;
};
struct dim3 {
  unsigned x, y, z;
  constexpr dim3(unsigned vx = 1, unsigned vy = 1, unsigned vz = 1) : x(vx), y(vy), z(vz) {}
};
namespace simt {
static inline uint3 u3(simt_dim3 d) { return uint3{d.x, d.y, d.z}; }
static inline dim3 d3(simt_dim3 d) { return dim3(d.x, d.y, d.z); }
} // namespace simt
#define threadIdx (simt::u3(simt::cur()->thread_idx))
#define blockIdx  (simt::u3(simt::cur()->block_idx))
#define blockDim  (simt::d3(simt::cur()->block_dim))
#define gridDim   (simt::d3(simt::cur()->grid_dim))
#define warpSize  32

/* ---- barriers and fences ---- */
#define __syncthreads() (simt::rt->barrier(__LINE__))
static inline void __threadfence() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
static inline void __threadfence_block() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
#define __trap()        (simt::fail(__LINE__, "__trap() called"))
#define __nanosleep(ns) ((void)(ns))

/* ---- warp functions (lockstep exchange among the lanes named by the mask) ---- */
namespace simt {
template <class T> static inline T shfl(unsigned mask, T v, int src, int line, const char *op) {
  T all[SIMT_WARP];
  unsigned members;
  xchg(mask ? mask : 1u, v, all, &members, line); /* mask 0 names no lane: caught as an error */
  return pick(all, members, src, line, op);
}
static inline unsigned lane() { return cur()->lane; }
static inline int seg_base(int width) { return (int)lane() & ~(width - 1); }
static inline void check_width(int width, int line) {
  if (width <= 0 || width > 32 || (width & (width - 1)))
    fail(line, "shuffle width must be a power of two in 1..32");
}
} // namespace simt
#define SIMT_LINE __builtin_LINE()
template <class T>
static inline T __shfl_sync(unsigned mask, T v, int src, int width = warpSize,
                            int line = SIMT_LINE) {
  simt::check_width(width, line);
  return simt::shfl(mask, v, simt::seg_base(width) + (src & (width - 1)), line, "__shfl_sync");
}
template <class T>
static inline T __shfl_xor_sync(unsigned mask, T v, int lane_mask, int width = warpSize,
                                int line = SIMT_LINE) {
  simt::check_width(width, line);
  int l = (int)simt::lane(), src = l ^ lane_mask;
  if (src >= simt::seg_base(width) + width) src = l; /* later segments are not visible */
  return simt::shfl(mask, v, src, line, "__shfl_xor_sync");
}
template <class T>
static inline T __shfl_down_sync(unsigned mask, T v, unsigned delta, int width = warpSize,
                                 int line = SIMT_LINE) {
  simt::check_width(width, line);
  int l = (int)simt::lane(), src = l + (int)delta;
  if ((l & (width - 1)) + (int)delta >= width) src = l;
  return simt::shfl(mask, v, src, line, "__shfl_down_sync");
}
template <class T>
static inline T __shfl_up_sync(unsigned mask, T v, unsigned delta, int width = warpSize,
                               int line = SIMT_LINE) {
  simt::check_width(width, line);
  int l = (int)simt::lane(), src = l - (int)delta;
  if ((l & (width - 1)) - (int)delta < 0) src = l;
  return simt::shfl(mask, v, src, line, "__shfl_up_sync");
}
static inline unsigned __ballot_sync(unsigned mask, int pred, int line = SIMT_LINE) {
  int all[SIMT_WARP];
  unsigned members, r = 0;
  simt::xchg(mask ? mask : 1u, pred ? 1 : 0, all, &members, line);
  for (int i = 0; i < SIMT_WARP; i++)
    if ((members >> i & 1u) && all[i]) r |= 1u << i;
  return r;
}
static inline int __all_sync(unsigned mask, int pred, int line = SIMT_LINE) {
  int all[SIMT_WARP];
  unsigned members;
  simt::xchg(mask ? mask : 1u, pred ? 1 : 0, all, &members, line);
  for (int i = 0; i < SIMT_WARP; i++)
    if ((members >> i & 1u) && !all[i]) return 0;
  return 1;
}
static inline int __any_sync(unsigned mask, int pred, int line = SIMT_LINE) {
  return __ballot_sync(mask, pred, line) != 0;
}
static inline void __syncwarp(unsigned mask = 0xffffffffu, int line = SIMT_LINE) {
  (void)__ballot_sync(mask, 0, line);
}
/* Lanes progress independently between warp functions here, so "active" means: not exited. */
static inline unsigned __activemask() {
  unsigned n = simt::cur()->warp_lanes;
  return n >= 32 ? 0xffffffffu : (1u << n) - 1u;
}
#define SIMT_REDUCE(name, T, init, op)                                                             \
  static inline T name(unsigned mask, T v, int line = SIMT_LINE) {                                 \
    T all[SIMT_WARP], r = init;                                                                    \
    unsigned members;                                                                              \
    simt::xchg(mask ? mask : 1u, v, all, &members, line);                                          \
    for (int i = 0; i < SIMT_WARP; i++)                                                            \
      if (members >> i & 1u) r = op;                                                               \
    return r;                                                                                      \
  }
SIMT_REDUCE(__reduce_add_sync, unsigned, 0u, r + all[i])
SIMT_REDUCE(__reduce_add_sync, int, 0, (int)((unsigned)r + (unsigned)all[i]))
SIMT_REDUCE(__reduce_min_sync, unsigned, UINT_MAX, (all[i] < r ? all[i] : r))
SIMT_REDUCE(__reduce_min_sync, int, INT_MAX, (all[i] < r ? all[i] : r))
SIMT_REDUCE(__reduce_max_sync, unsigned, 0u, (all[i] > r ? all[i] : r))
SIMT_REDUCE(__reduce_max_sync, int, INT_MIN, (all[i] > r ? all[i] : r))
SIMT_REDUCE(__reduce_and_sync, unsigned, ~0u, r &all[i])
SIMT_REDUCE(__reduce_or_sync, unsigned, 0u, r | all[i])
SIMT_REDUCE(__reduce_xor_sync, unsigned, 0u, r ^ all[i])

/* ---- atomics: fibers of one OS thread switch only at barriers and warp functions, so a plain
 * read-modify-write is atomic ---- */
#define SIMT_ATOMIC(name, T, expr)                                                                 \
  static inline T name(T *p, T v) {                                                                \
    T old = *p;                                                                                    \
    *p = (expr);                                                                                   \
    return old;                                                                                    \
  }
#define SIMT_ATOMICS(T)                                                                            \
  SIMT_ATOMIC(atomicAdd, T, old + v)                                                               \
  SIMT_ATOMIC(atomicSub, T, old - v)                                                               \
  SIMT_ATOMIC(atomicExch, T, v)                                                                    \
  SIMT_ATOMIC(atomicMax, T, (v > old ? v : old))                                                   \
  SIMT_ATOMIC(atomicMin, T, (v < old ? v : old))
SIMT_ATOMICS(unsigned)
SIMT_ATOMICS(unsigned long long)
SIMT_ATOMIC(atomicAdd, int, (int)((unsigned)old + (unsigned)v))
SIMT_ATOMIC(atomicSub, int, (int)((unsigned)old - (unsigned)v))
SIMT_ATOMIC(atomicExch, int, v)
SIMT_ATOMIC(atomicMax, int, (v > old ? v : old))
SIMT_ATOMIC(atomicMin, int, (v < old ? v : old))
SIMT_ATOMIC(atomicAdd, float, old + v)
SIMT_ATOMIC(atomicExch, float, v)
SIMT_ATOMIC(atomicAdd, double, old + v)
SIMT_ATOMIC(atomicAnd, unsigned, old &v)
SIMT_ATOMIC(atomicOr, unsigned, old | v)
SIMT_ATOMIC(atomicXor, unsigned, old ^ v)
template <class T> static inline T atomicCAS(T *p, T cmp, T v) {
  T old = *p;
  if (old == cmp) *p = v;
  return old;
}

/* ---- vector types: structs with .x .y .z .w and CUDA's alignment ---- */
#define SIMT_VEC24(T, N)                                                                           \
  struct __attribute__((aligned(sizeof(T) * 2))) N##2 {                                            \
    T x, y;                                                                                        \
  };                                                                                               \
  struct __attribute__((aligned(sizeof(T) * 4 > 16 ? 16 : sizeof(T) * 4))) N##4 {                  \
    T x, y, z, w;                                                                                  \
  };                                                                                               \
  static inline N##2 make_##N##2(T x, T y) { return N##2 {x, y}; }                                 \
  static inline N##4 make_##N##4(T x, T y, T z, T w) { return N##4 {x, y, z, w}; }
#define SIMT_VEC(T, N)                                                                             \
  SIMT_VEC24(T, N)                                                                                 \
  struct N##3 {                                                                                    \
    T x, y, z;                                                                                     \
  };                                                                                               \
  static inline N##3 make_##N##3(T x, T y, T z) { return N##3 {x, y, z}; }
SIMT_VEC(float, float)
SIMT_VEC(double, double)
SIMT_VEC(int, int)
SIMT_VEC24(unsigned, uint) /* uint3 is defined above, with threadIdx */
SIMT_VEC(signed char, char)
SIMT_VEC(unsigned char, uchar)
SIMT_VEC(short, short)
SIMT_VEC(unsigned short, ushort)
SIMT_VEC(long long, longlong)
SIMT_VEC(unsigned long long, ulonglong)
static inline uint3 make_uint3(unsigned x, unsigned y, unsigned z) { return uint3{x, y, z}; }

/* ---- device math (the float functions are C's; these are CUDA's additions) ---- */
static inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
static inline double rsqrt(double x) { return 1.0 / sqrt(x); }
/* glibc declares __expf etc. itself, so CUDA's fast intrinsics are macros for simt_ functions */
static inline float simt_expf(float x) { return expf(x); }
static inline float simt_exp10f(float x) { return powf(10.0f, x); }
static inline float simt_logf(float x) { return logf(x); }
static inline float simt_log2f(float x) { return log2f(x); }
static inline float simt_log10f(float x) { return log10f(x); }
static inline float simt_sinf(float x) { return sinf(x); }
static inline float simt_cosf(float x) { return cosf(x); }
static inline float simt_tanf(float x) { return tanf(x); }
static inline float simt_powf(float x, float y) { return powf(x, y); }
#define __expf   simt_expf
#define __exp10f simt_exp10f
#define __logf   simt_logf
#define __log2f  simt_log2f
#define __log10f simt_log10f
#define __sinf   simt_sinf
#define __cosf   simt_cosf
#define __tanf   simt_tanf
#define __powf   simt_powf
static inline float __fdividef(float x, float y) { return x / y; }
static inline float __frcp_rn(float x) { return 1.0f / x; }
static inline float __fsqrt_rn(float x) { return sqrtf(x); }
static inline float __frsqrt_rn(float x) { return 1.0f / sqrtf(x); }
static inline float __fadd_rn(float x, float y) { return x + y; }
static inline float __fsub_rn(float x, float y) { return x - y; }
static inline float __fmul_rn(float x, float y) { return x * y; }
static inline float __fdiv_rn(float x, float y) { return x / y; }
static inline float __fmaf_rn(float x, float y, float z) { return fmaf(x, y, z); }
static inline float __saturatef(float x) { return x < 0.0f ? 0.0f : x > 1.0f ? 1.0f : x; }
static inline int __float_as_int(float x) {
  int r;
  std::memcpy(&r, &x, 4);
  return r;
}
static inline unsigned __float_as_uint(float x) {
  unsigned r;
  std::memcpy(&r, &x, 4);
  return r;
}
static inline float __int_as_float(int x) {
  float r;
  std::memcpy(&r, &x, 4);
  return r;
}
static inline float __uint_as_float(unsigned x) {
  float r;
  std::memcpy(&r, &x, 4);
  return r;
}
static inline long long __double_as_longlong(double x) {
  long long r;
  std::memcpy(&r, &x, 8);
  return r;
}
static inline double __longlong_as_double(long long x) {
  double r;
  std::memcpy(&r, &x, 8);
  return r;
}
static inline int __float2int_rn(float x) { return (int)nearbyintf(x); }
static inline int __float2int_rz(float x) { return (int)x; }
static inline int __float2int_rd(float x) { return (int)floorf(x); }
static inline int __float2int_ru(float x) { return (int)ceilf(x); }
static inline float __int2float_rn(int x) { return (float)x; }
static inline unsigned __umulhi(unsigned a, unsigned b) {
  return (unsigned)(((unsigned long long)a * b) >> 32);
}
static inline int __mulhi(int a, int b) { return (int)(((long long)a * b) >> 32); }
static inline unsigned long long __umul64hi(unsigned long long a, unsigned long long b) {
  return (unsigned long long)(((unsigned __int128)a * b) >> 64);
}
static inline long long __mul64hi(long long a, long long b) {
  return (long long)(((__int128)a * b) >> 64);
}
static inline int __popc(unsigned x) { return __builtin_popcount(x); }
static inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
static inline int __clz(int x) { return x ? __builtin_clz((unsigned)x) : 32; }
static inline int __clzll(long long x) { return x ? __builtin_clzll((unsigned long long)x) : 64; }
static inline int __ffs(int x) { return __builtin_ffs(x); }
static inline int __ffsll(long long x) { return __builtin_ffsll(x); }
static inline unsigned __brev(unsigned x) {
  unsigned r = 0;
  for (int i = 0; i < 32; i++) r |= ((x >> i) & 1u) << (31 - i);
  return r;
}
template <class T> static inline T __ldg(const T *p) { return *p; }
template <class T> static inline T __ldcs(const T *p) { return *p; }
template <class T> static inline void __stcs(T *p, T v) { *p = v; }

/* min/max are overloaded functions in CUDA device code */
#define SIMT_MINMAX(T)                                                                             \
  static inline T min(T a, T b) { return a < b ? a : b; }                                          \
  static inline T max(T a, T b) { return a > b ? a : b; }
SIMT_MINMAX(int)
SIMT_MINMAX(unsigned)
SIMT_MINMAX(long long)
SIMT_MINMAX(unsigned long long)
SIMT_MINMAX(long)
SIMT_MINMAX(unsigned long)
static inline float min(float a, float b) { return fminf(a, b); }
static inline float max(float a, float b) { return fmaxf(a, b); }
static inline double min(double a, double b) { return fmin(a, b); }
static inline double max(double a, double b) { return fmax(a, b); }

/* printf works: kernels run on the host */

#endif
