/* simt_cuda.h: prelude that lets clang compile CUDA C kernels as C++17 for the CPU SIMT
 * emulator (-include simt_cuda.h). Provides the CUDA keywords, thread ids, barriers, warp
 * functions, atomics, vector types, device math and the matrix-unit helpers of codegen/mma_cuda.h
 * (rx_mma_*, rx_ldmatrix_*, rx_cp_async_*, rx_lane_id); cuda_fp16.h / cuda_bf16.h come from
 * tests/simt/include.
 * Blocks run one at a time, so `__shared__` variables are static storage: per block, as on the GPU.
 * See README.md for what is not emulated. */
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
#define __shared__   static SIMT_SHARED_ATTR
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

/* ---- matrix units: the helpers of codegen/mma_cuda.h (mma.sync, ldmatrix, cp.async), with the
 * signatures of their NVRTC definitions (plus the caller's line, for messages), computed from the
 * fragment layouts of the PTX ISA (docs.nvidia.com/cuda/parallel-thread-execution, "Warp-level
 * Matrix Fragments for mma" and "Warp-level matrix load instruction: ldmatrix"; the formulas are
 * quoted below, g = lane >> 2 "groupID", t = lane % 4 "threadID_in_group"). mma and ldmatrix are
 * .sync.aligned: every lane of a full warp calls the same helper at the same line, else the
 * launch fails. Element i of a fragment is in register i / (elements per register), the
 * lower-numbered element in the lower bits ("Elements (low to high)"). ---- */
namespace simt {
/* Which helper a lane executes, checked equal across the warp (names: mma_op_name). */
enum mma_op {
  MMA_F16 = 1,
  MMA_BF16,
  MMA_S8,
  LDSM_X1,
  LDSM_X2,
  LDSM_X4,
  LDSM_X1_T,
  LDSM_X2_T,
  LDSM_X4_T,
  WGMMA_F16,
  WGMMA_BF16
};
static const char *const mma_op_name[] = {
    "?",
    "rx_mma_16x8x16_f16f32 (mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32)",
    "rx_mma_16x8x16_bf16f32 (mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32)",
    "rx_mma_16x8x32_s8s32 (mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32)",
    "rx_ldmatrix_x1 (ldmatrix.sync.aligned.m8n8.x1.shared.b16)",
    "rx_ldmatrix_x2 (ldmatrix.sync.aligned.m8n8.x2.shared.b16)",
    "rx_ldmatrix_x4 (ldmatrix.sync.aligned.m8n8.x4.shared.b16)",
    "rx_ldmatrix_x1_trans (ldmatrix.sync.aligned.m8n8.x1.trans.shared.b16)",
    "rx_ldmatrix_x2_trans (ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16)",
    "rx_ldmatrix_x4_trans (ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16)",
    "rx_wgmma_m64nNk16_f16f32 (wgmma.mma_async.sync.aligned.m64nNk16.f32.f16.f16)",
    "rx_wgmma_m64nNk16_bf16f32 (wgmma.mma_async.sync.aligned.m64nNk16.f32.bf16.bf16)",
};
static inline const char *op_name(int op) {
  return op >= MMA_F16 && op <= WGMMA_BF16 ? mma_op_name[op] : "another warp function";
}
struct mma_words { /* one lane's contribution to the first exchange: B registers and the op */
  unsigned w[2];
  int op;
};
struct mma_row { /* 16 bytes: one row of an 8x8 matrix of 16-bit elements, or 4 registers */
  unsigned w[4];
};

/* The first exchange of a warp-wide matrix instruction: all 32 lanes of the warp, each at the same
 * helper (mask 0xffffffff: a lane that has exited is reported by the scheduler). */
static inline void mma_sync(int op, const mma_words &mine, mma_words *all, int line) {
  const simt_thread *t = cur();
  char msg[400];
  if (t->warp_lanes != SIMT_WARP) {
    std::snprintf(msg, sizeof msg,
                  "%s needs all 32 lanes of a warp (.sync.aligned); warp %u has %u (the block "
                  "size is not a multiple of 32)",
                  mma_op_name[op], t->warp, t->warp_lanes);
    fail(line, msg);
  }
  unsigned members;
  xchg(0xffffffffu, mine, all, &members, line);
  for (int i = 0; i < SIMT_WARP; i++) {
    if (all[i].op != op) {
      std::snprintf(msg, sizeof msg,
                    "lane %u executes %s while lane %d executes %s (.aligned: every lane of the "
                    "warp must execute the same instruction)",
                    t->lane, mma_op_name[op], i, op_name(all[i].op));
      fail(line, msg);
    }
  }
}
static inline unsigned short half_of(unsigned reg, int i) {
  return (unsigned short)(reg >> 16 * i);
}
static inline float f16_value(unsigned short h) {
  _Float16 f;
  std::memcpy(&f, &h, 2);
  return (float)f;
}
static inline float bf16_value(unsigned short h) {
  unsigned u = (unsigned)h << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

/* m16n8k16 .f16/.bf16 ("Matrix Fragments for mma.m16n8k16 with floating point type"):
 *   A a0..a7: row = g for 0 <= i < 2 || 4 <= i < 6, else g + 8;
 *             col = 2t + (i & 1) for i < 4, 2t + (i & 1) + 8 for i >= 4
 *   B b0..b3: row = 2t + (i & 1) for i < 2, 2t + (i & 1) + 8 for i >= 2; col = g
 *   C/D c0..c3: row = g for i < 2, g + 8 for i >= 2; col = 2t + (i & 1)
 * Each product of two f16 (22 significant bits) or bf16 (16) is exact in f32; d[i] is
 * c[i] + A[row][0] B[0][col] + ... + A[row][15] B[15][col] summed in that order (k ascending),
 * each addition rounded to nearest even in f32. The hardware's order and internal precision are
 * not specified (compare with a tolerance); products below f32's normal range (bf16 only) round. */
static inline void mma_16816(int op, float d[4], const unsigned a[4], const unsigned b[2],
                             const float c[4], int line) {
  mma_words mine = {{b[0], b[1]}, op}, bw[SIMT_WARP];
  mma_row ar = {{a[0], a[1], a[2], a[3]}}, aw[SIMT_WARP];
  mma_sync(op, mine, bw, line);
  unsigned members;
  xchg(0xffffffffu, ar, aw, &members, line);
  float (*value)(unsigned short) = op == MMA_F16 ? f16_value : bf16_value;
  float A[16][16], B[16][8];
  int g = (int)cur()->lane >> 2, t = (int)cur()->lane % 4;
  /* only what this lane's outputs read: rows g and g + 8 of A (lanes 4g..4g+3 hold them) and
   * columns 2t, 2t + 1 of B (lanes 8t..8t+7) */
  for (int lane = 4 * g; lane < 4 * g + 4; lane++) {
    int tl = lane % 4;
    for (int i = 0; i < 8; i++) {
      int row = (i < 2 || (4 <= i && i < 6)) ? g : g + 8;
      int col = 2 * tl + (i & 1) + (i >= 4 ? 8 : 0);
      A[row][col] = value(half_of(aw[lane].w[i / 2], i % 2));
    }
  }
  for (int lane = 8 * t; lane < 8 * t + 8; lane++) {
    int gl = lane >> 2, tl = lane % 4;
    for (int i = 0; i < 4; i++) {
      int row = 2 * tl + (i & 1) + (i >= 2 ? 8 : 0);
      B[row][gl] = value(half_of(bw[lane].w[i / 2], i % 2));
    }
  }
  float out[4];
  for (int i = 0; i < 4; i++) {
    int row = i < 2 ? g : g + 8, col = 2 * t + (i & 1);
    float acc = c[i];
    for (int k = 0; k < 16; k++) {
      float p = A[row][k] * B[k][col]; /* exact */
      acc = acc + p;
    }
    out[i] = acc;
  }
  for (int i = 0; i < 4; i++) d[i] = out[i]; /* d may be c */
}

/* m16n8k32 .s8 ("Matrix Fragments for mma.m16n8k32"):
 *   A a0..a15: row = g for 0 <= i < 4 || 8 <= i < 12, else g + 8;
 *              col = 4t + (i & 3) for i < 8, 4t + (i & 3) + 16 for i >= 8
 *   B b0..b7:  row = 4t + (i & 3) for i < 4, 4t + (i & 3) + 16 for i >= 4; col = g
 *   C/D c0..c3: as for m16n8k16. Exact in 32-bit integers, wrapping (no .satfinite). */
static inline void mma_16832_s8(int d[4], const unsigned a[4], const unsigned b[2], const int c[4],
                                int line) {
  mma_words mine = {{b[0], b[1]}, MMA_S8}, bw[SIMT_WARP];
  mma_row ar = {{a[0], a[1], a[2], a[3]}}, aw[SIMT_WARP];
  mma_sync(MMA_S8, mine, bw, line);
  unsigned members;
  xchg(0xffffffffu, ar, aw, &members, line);
  int A[16][32], B[32][8];
  for (int lane = 0; lane < SIMT_WARP; lane++) {
    int g = lane >> 2, t = lane % 4;
    for (int i = 0; i < 16; i++) {
      int row = (i < 4 || (8 <= i && i < 12)) ? g : g + 8;
      int col = 4 * t + (i & 3) + (i >= 8 ? 16 : 0);
      A[row][col] = (signed char)(aw[lane].w[i / 4] >> 8 * (i % 4));
    }
    for (int i = 0; i < 8; i++) {
      int row = 4 * t + (i & 3) + (i >= 4 ? 16 : 0);
      B[row][g] = (signed char)(bw[lane].w[i / 4] >> 8 * (i % 4));
    }
  }
  int g = (int)cur()->lane >> 2, t = (int)cur()->lane % 4;
  int out[4];
  for (int i = 0; i < 4; i++) {
    int row = i < 2 ? g : g + 8, col = 2 * t + (i & 1);
    unsigned acc = (unsigned)c[i];
    for (int k = 0; k < 32; k++) acc += (unsigned)(A[row][k] * B[k][col]);
    out[i] = (int)acc;
  }
  for (int i = 0; i < 4; i++) d[i] = out[i];
}

/* 16 bytes copied without tracing (the matrix-unit helpers trace their accesses themselves) */
__attribute__((no_sanitize("thread"))) static inline void copy16(void *d, const void *s) {
  std::memcpy(d, s, 16);
}

/* ldmatrix .m8n8 .b16 ("Warp-level matrix load instruction: ldmatrix"): addresses addr0..addr7
 * (lanes 0-7) are the rows of the first matrix, addr8..addr15 (lanes 8-15) of the second, and so
 * on (x1: lanes 0-7 give addresses, x2: 0-15, x4: all); each row is 16 bytes, 16-byte aligned.
 * "A group of four threads loads an entire row": register j of a lane holds matrix j's row
 * lane / 4, columns 2t and 2t + 1 (figure "ldmatrix fragment layout for one 8x8 Matrix with
 * 16-bit elements"); .trans ("the matrix is loaded in column-major format"): rows 2t and 2t + 1
 * of column lane / 4. Each lane reads its row between two exchanges, so every row is read after
 * every lane has arrived and before any lane goes on, as the one warp-wide instruction does. */
static inline void ldmatrix(int op, int num, bool trans, unsigned *r, const void *p, int line) {
  mma_words mine = {{0, 0}, op}, sync[SIMT_WARP];
  mma_sync(op, mine, sync, line);
  unsigned lane = cur()->lane, members;
  mma_row row = {{0, 0, 0, 0}}, rows[SIMT_WARP];
  if ((int)lane < 8 * num) {
    if ((std::uintptr_t)p % 16) {
      char msg[200];
      std::snprintf(msg, sizeof msg,
                    "%s: lane %u gives row address %p, which is not 16-byte aligned",
                    mma_op_name[op], lane, p);
      fail(line, msg);
    }
    trace(__builtin_return_address(0), p, 16, SIMT_ACCESS_MATRIX); /* the row read, tagged */
    copy16(&row, p);
  }
  xchg(0xffffffffu, row, rows, &members, line);
  int t = (int)lane % 4;
  for (int j = 0; j < num; j++) {
    const mma_row *m = &rows[8 * j];
    unsigned short lo, hi;
    if (!trans) {
      lo = half_of(m[lane / 4].w[t], 0);
      hi = half_of(m[lane / 4].w[t], 1);
    } else {
      int col = (int)lane / 4;
      lo = half_of(m[2 * t].w[col / 2], col % 2);
      hi = half_of(m[2 * t + 1].w[col / 2], col % 2);
    }
    r[j] = (unsigned)lo | (unsigned)hi << 16;
  }
}

/* cp.async moves 16 bytes; like every PTX memory access it needs addresses aligned to its size. */
static inline void cp_async_check(const char *op, const void *smem, const void *gmem, bool read,
                                  int line) {
  if ((std::uintptr_t)smem % 16 || (read && (std::uintptr_t)gmem % 16)) {
    char msg[200];
    std::snprintf(msg, sizeof msg, "%s: shared %p and global %p must both be 16-byte aligned", op,
                  smem, gmem);
    fail(line, msg);
  }
}
} // namespace simt

static inline void rx_mma_16x8x16_f16f32(float d[4], const unsigned a[4], const unsigned b[2],
                                         const float c[4], int line = SIMT_LINE) {
  simt::mma_16816(simt::MMA_F16, d, a, b, c, line);
}
static inline void rx_mma_16x8x16_bf16f32(float d[4], const unsigned a[4], const unsigned b[2],
                                          const float c[4], int line = SIMT_LINE) {
  simt::mma_16816(simt::MMA_BF16, d, a, b, c, line);
}
static inline void rx_mma_16x8x32_s8s32(int d[4], const unsigned a[4], const unsigned b[2],
                                        const int c[4], int line = SIMT_LINE) {
  simt::mma_16832_s8(d, a, b, c, line);
}
/* %laneid, for the fragment helpers of RX_CUDA_FRAG_PRELUDE (which are not redefined here) */
static inline unsigned rx_lane_id() { return simt::lane(); }
#define SIMT_LDSM(name, op, num, trans)                                                            \
  static inline void name(unsigned r[num], const void *p, int line = SIMT_LINE) {                  \
    simt::ldmatrix(simt::op, num, trans, r, p, line);                                              \
  }
SIMT_LDSM(rx_ldmatrix_x1, LDSM_X1, 1, false)
SIMT_LDSM(rx_ldmatrix_x2, LDSM_X2, 2, false)
SIMT_LDSM(rx_ldmatrix_x4, LDSM_X4, 4, false)
SIMT_LDSM(rx_ldmatrix_x1_trans, LDSM_X1_T, 1, true)
SIMT_LDSM(rx_ldmatrix_x2_trans, LDSM_X2_T, 2, true)
SIMT_LDSM(rx_ldmatrix_x4_trans, LDSM_X4_T, 4, true)
/* cp.async: the 16 bytes are read when the copy is issued and land in shared memory at the
 * rx_cp_async_wait that leaves the copy's group behind (PTX ISA, "cp.async.wait_group"), so a
 * kernel that reads a tile before its wait (or another thread's tile before the barrier after
 * it) reads the old contents and fails its comparison. Per thread of the block being run
 * (blocks run one at a time): the copies in flight and the commit count. */
namespace simt {
struct async_copy {
  void *dst;
  int group;
  unsigned char bytes[16];
};
struct async_state {
  simt_dim3 block; /* the block this state belongs to (reset when another block runs) */
  bool used;
  int groups, n;
  async_copy inflight[64];
};
static async_state async_threads[1024];
static inline async_state &async_of() {
  simt_thread *t = cur();
  async_state &a = async_threads[t->linear % 1024];
  if (!a.used || a.block.x != t->block_idx.x || a.block.y != t->block_idx.y ||
      a.block.z != t->block_idx.z) {
    a = async_state{};
    a.block = t->block_idx;
    a.used = true;
  }
  return a;
}
/* The 16 bytes land in shared memory later, but the bank conflicts of their writes belong to
 * the cp.async: traced here, at the issue (the site of the kernel's rx_cp_async_16), and not at
 * the landing (async_land is not instrumented). */
static inline void async_issue(void *smem, const void *gmem, bool read, int line) {
  trace(__builtin_return_address(0), smem, 16, SIMT_ACCESS_STORE | SIMT_ACCESS_MATRIX);
  async_state &a = async_of();
  if (a.n == 64) fail(line, "more than 64 cp.async copies in flight in one thread");
  async_copy &c = a.inflight[a.n++];
  c.dst = smem;
  c.group = a.groups;
  if (read)
    std::memcpy(c.bytes, gmem, 16);
  else
    std::memset(c.bytes, 0, 16);
}
/* the copies of groups < before land */
__attribute__((no_sanitize("thread"))) static inline void async_land(int before) {
  async_state &a = async_of();
  int k = 0;
  for (int i = 0; i < a.n; i++) {
    if (a.inflight[i].group < before)
      std::memcpy(a.inflight[i].dst, a.inflight[i].bytes, 16);
    else
      a.inflight[k++] = a.inflight[i];
  }
  a.n = k;
}
} // namespace simt
static inline void rx_cp_async_16(void *smem, const void *gmem, int line = SIMT_LINE) {
  simt::cp_async_check("rx_cp_async_16", smem, gmem, true, line);
  simt::async_issue(smem, gmem, true, line);
}
static inline void rx_cp_async_16_zfill(void *smem, const void *gmem, bool pred,
                                        int line = SIMT_LINE) {
  simt::cp_async_check("rx_cp_async_16_zfill", smem, gmem, pred, line);
  simt::async_issue(smem, gmem, pred, line);
}
static inline void rx_cp_async_commit() { simt::async_of().groups++; }
template <int N> static inline void rx_cp_async_wait() {
  static_assert(N >= 0, "cp.async.wait_group takes a non-negative immediate");
  simt::async_land(simt::async_of().groups - N);
}
static inline void rx_cp_async_wait_all() { simt::async_land(INT_MAX); }

/* wgmma (codegen/mma_cuda.h's rx_wgmma_*; PTX ISA "Asynchronous Warpgroup Level Matrix
 * Multiply-Accumulate Instructions"), written from the ISA's text, not from relaxc's IR:
 *   - the descriptor ("Matrix Descriptor Format"): start address (addr & 0x3FFFF) >> 4 in bits
 *     0-13, leading byte offset >> 4 in 16-29, stride byte offset >> 4 in 32-45, base offset in
 *     49-51, swizzle mode in 62-63 (1: 128 bytes). The emulator's shared window is the 256 KiB
 *     region holding the operand (host addresses keep their low 18 bits, as shared ones do);
 *   - the K-major 128-byte swizzled layout ("Shared Memory Matrix Layout"): element (r, k) of an
 *     operand (r its row in M or N, k in 0..15) is at start + (r / 8) * SBO + (r % 8) * 128 +
 *     2 k, then the swizzle xors address bits 4-6 with bits 7-9 (the pattern repeats every 1024
 *     bytes, so with base offset 0 the atom must start at a 1024-byte boundary: checked);
 *   - MN-major B (imm-trans-b 1, the helpers _tb): element (n, k) at start + (k / 8) * SBO +
 *     (k % 8) * 128 + 2 n for n < 64 ("Stride Dimension Byte Offset", MN-major swizzled: from the
 *     first 8 columns, k, to the next 8; one 128-byte row spans N, at most 64 here, so the leading
 *     byte offset, from one 64-wide block of N to the next, is unused), then the same swizzle;
 *   - A in registers (the helpers _ra: wgmma's form with A a vector of four .f16x2 / .bf16x2
 *     registers, "Register Fragments", matrix A of .m64nNk16): thread l, w, g, t as below, holds
 *     a0..a7 = A[16 w + g + 8 (j / 2 % 2)][2 t + j % 2 + 8 (j / 4)] (register j / 2, half j % 2),
 *     the lanes' registers exchanged within the warp at issue (read then, as the hardware may;
 *     PTX forbids changing them before the wait);
 *   - D of .m64nNk16 .f32 ("Register Fragments"): thread l of the warpgroup (l = linear % 128),
 *     w = l / 32, g = l % 32 / 4, t = l % 4: d[i] = D[16 w + g + 8 (i / 2 % 2)][8 (i / 4) + 2 t
 *     + i % 2];
 *   - asynchrony ("wgmma.commit_group", "wgmma.wait_group"): a wgmma is computed when a
 *     rx_wgmma_wait leaves its group behind, reading shared memory then, so a kernel that reads
 *     its accumulators before the wait, or overwrites an operand before it, fails its
 *     comparison; a wgmma without a rx_wgmma_fence since the thread's last wait (or start) fails.
 * Products of two f16 or bf16 are exact in f32; sums k ascending, rounded to f32 each. */
namespace simt {
struct wgmma_op {
  float *d;
  const unsigned char *a, *b; /* the decoded start addresses (a: NULL with A in registers) */
  int n, op, group, line;
  bool trans;               /* B MN-major */
  unsigned short ar[2][16]; /* A in registers: the thread's rows g and g + 8 */
};
struct wgmma_state {
  simt_dim3 block;
  bool used, fenced;
  int groups, pending;
  wgmma_op ops[32];
};
static wgmma_state wgmma_threads[1024];
static inline wgmma_state &wgmma_of() {
  simt_thread *t = cur();
  wgmma_state &w = wgmma_threads[t->linear % 1024];
  if (!w.used || w.block.x != t->block_idx.x || w.block.y != t->block_idx.y ||
      w.block.z != t->block_idx.z) {
    w = wgmma_state{};
    w.block = t->block_idx;
    w.used = true;
  }
  return w;
}
static inline unsigned long long wgmma_encode(const void *p) {
  unsigned long long addr = (std::uintptr_t)p & 0x3FFFFu;
  return (addr >> 4) | 1ull << 16 | (1024ull >> 4) << 32 | 1ull << 62;
}
/* The start address that descriptor desc names in the shared window of p. */
static inline const unsigned char *wgmma_decode(unsigned long long desc, const void *p, int *sbo,
                                                int *mode, int *base) {
  std::uintptr_t window = (std::uintptr_t)p & ~(std::uintptr_t)0x3FFFF;
  *sbo = (int)((desc >> 32) & 0x3FFF) << 4;
  *base = (int)((desc >> 49) & 7);
  *mode = (int)(desc >> 62);
  return (const unsigned char *)(window | (std::uintptr_t)((desc & 0x3FFF) << 4));
}
static inline float wgmma_half(int op, std::uintptr_t addr) {
  addr ^= ((addr >> 7) & 7) << 4;
  unsigned short h;
  std::memcpy(&h, (const void *)addr, 2);
  return op == WGMMA_F16 ? f16_value(h) : bf16_value(h);
}
static inline float wgmma_elem(int op, const unsigned char *start, int sbo, int r, int k) {
  return wgmma_half(op,
                    (std::uintptr_t)start + (std::uintptr_t)(r / 8) * sbo + (r % 8) * 128 + 2 * k);
}
static inline float wgmma_elem_mn(int op, const unsigned char *start, int sbo, int n, int k) {
  return wgmma_half(op,
                    (std::uintptr_t)start + (std::uintptr_t)(k / 8) * sbo + (k % 8) * 128 + 2 * n);
}
static inline void wgmma_run(const wgmma_op &o) {
  int l = (int)(cur()->linear % 128), w = l / 32, g = l % 32 / 4, t = l % 4;
  for (int i = 0; i < o.n / 2; i++) {
    int row = 16 * w + g + 8 * (i / 2 % 2), col = 8 * (i / 4) + 2 * t + i % 2;
    float acc = o.d[i];
    for (int k = 0; k < 16; k++) {
      float a = o.a ? wgmma_elem(o.op, o.a, 1024, row, k)
                    : (o.op == WGMMA_F16 ? f16_value(o.ar[i / 2 % 2][k])
                                         : bf16_value(o.ar[i / 2 % 2][k]));
      float b =
          o.trans ? wgmma_elem_mn(o.op, o.b, 1024, col, k) : wgmma_elem(o.op, o.b, 1024, col, k);
      acc = acc + a * b;
    }
    o.d[i] = acc;
  }
}
static inline void wgmma_issue(int op, int n, float *d, const void *a, const void *b, bool regs,
                               bool trans, int line) {
  char msg[300];
  simt_thread *t = cur();
  if (t->block_dim.x * t->block_dim.y * t->block_dim.z % 128) {
    std::snprintf(msg, sizeof msg, "%s needs warpgroups of 128 threads; the block has %u",
                  mma_op_name[op], t->block_dim.x * t->block_dim.y * t->block_dim.z);
    fail(line, msg);
  }
  if (trans && n > 64) fail(line, "wgmma with B MN-major: N above 64 is not emulated");
  mma_words mine = {{0, 0}, op}, sync[SIMT_WARP];
  mma_sync(op, mine, sync, line); /* .sync.aligned: the whole warp at the same wgmma */
  std::uintptr_t pa = regs ? 0 : (std::uintptr_t)a, pb = (std::uintptr_t)b;
  mma_row ab = {{(unsigned)pa, (unsigned)(pa >> 32), (unsigned)pb, (unsigned)(pb >> 32)}},
          all[SIMT_WARP];
  unsigned members;
  xchg(0xffffffffu, ab, all, &members, line);
  for (int i = 0; i < SIMT_WARP; i++)
    if (std::memcmp(&all[i], &ab, sizeof ab)) {
      std::snprintf(msg, sizeof msg, "%s: lane %u and lane %d give different operands",
                    mma_op_name[op], t->lane, i);
      fail(line, msg);
    }
  wgmma_op o = {};
  if (regs) { /* the warp's A: lane l's four registers, rows g and g + 8 of its warp's 16 */
    mma_row mine_a, rows[SIMT_WARP];
    std::memcpy(&mine_a, a, 16);
    xchg(0xffffffffu, mine_a, rows, &members, line);
    int g = (int)t->lane / 4;
    for (int q = 0; q < 4; q++) /* the lanes of the quad hold columns 2 q, 2 q + 1 (+ 8) */
      for (int j = 0; j < 8; j++) {
        unsigned word = rows[4 * g + q].w[j / 2];
        unsigned short h = (unsigned short)(j % 2 ? word >> 16 : word & 0xffff);
        o.ar[j / 2 % 2][2 * q + j % 2 + 8 * (j / 4)] = h;
      }
  }
  wgmma_state &s = wgmma_of();
  if (!s.fenced) {
    std::snprintf(msg, sizeof msg, "%s without a wgmma.fence (rx_wgmma_fence) since the last wait",
                  mma_op_name[op]);
    fail(line, msg);
  }
  if (s.pending == 32) fail(line, "more than 32 wgmma in flight in one thread");
  const void *ptrs[2] = {a, b};
  const unsigned char *start[2] = {NULL, NULL};
  for (int j = regs ? 1 : 0; j < 2; j++) {
    int sbo, mode, base;
    start[j] = wgmma_decode(wgmma_encode(ptrs[j]), ptrs[j], &sbo, &mode, &base);
    if (mode != 1 || base != 0 || sbo != 1024 || ((std::uintptr_t)start[j] >> 7) % 8) {
      std::snprintf(msg, sizeof msg,
                    "%s: operand %c at %p: the 128-byte swizzle with base offset 0 needs its "
                    "8-row atom at a 1024-byte boundary (start address bits 7-9 zero)",
                    mma_op_name[op], j ? 'B' : 'A', ptrs[j]);
      fail(line, msg);
    }
  }
  o.d = d;
  o.a = start[0];
  o.b = start[1];
  o.n = n;
  o.op = op;
  o.group = s.groups;
  o.line = line;
  o.trans = trans;
  s.ops[s.pending++] = o;
}
static inline void wgmma_retire(int before) { /* the wgmma of groups < before complete */
  wgmma_state &s = wgmma_of();
  int k = 0;
  for (int i = 0; i < s.pending; i++) {
    if (s.ops[i].group < before)
      wgmma_run(s.ops[i]);
    else
      s.ops[k++] = s.ops[i];
  }
  s.pending = k;
  s.fenced = false;
}
} // namespace simt
static inline void rx_wgmma_fence() { simt::wgmma_of().fenced = true; }
static inline void rx_wgmma_commit() { simt::wgmma_of().groups++; }
template <int N> static inline void rx_wgmma_wait() {
  static_assert(N >= 0 && N <= 7, "wgmma.wait_group takes an immediate in 0..7");
  simt::wgmma_retire(simt::wgmma_of().groups - N);
}
static inline void rx_wgmma_hold(float &) {}
static inline unsigned long long rx_wgmma_desc(const void *p) { return simt::wgmma_encode(p); }
#define SIMT_WGMMA_ONE(n, ty, op, suffix, regs, trans)                                             \
  static inline void rx_wgmma_m64n##n##k16_##ty##f32##suffix(                                      \
      float *d, const void *a, const void *b, int line = SIMT_LINE) {                              \
    simt::wgmma_issue(simt::op, n, d, a, b, regs, trans, line);                                    \
  }
#define SIMT_WGMMA_DT(n, ty, op)                                                                   \
  SIMT_WGMMA_ONE(n, ty, op, , false, false)                                                        \
  SIMT_WGMMA_ONE(n, ty, op, _tb, false, true)                                                      \
  SIMT_WGMMA_ONE(n, ty, op, _ra, true, false)                                                      \
  SIMT_WGMMA_ONE(n, ty, op, _ra_tb, true, true)
#define SIMT_WGMMA(n)                                                                              \
  SIMT_WGMMA_DT(n, f16, WGMMA_F16)                                                                 \
  SIMT_WGMMA_DT(n, bf16, WGMMA_BF16)
/* every N of m64nNk16: 8..256 in steps of 8 */
SIMT_WGMMA(8)
SIMT_WGMMA(16)
SIMT_WGMMA(24)
SIMT_WGMMA(32)
SIMT_WGMMA(40)
SIMT_WGMMA(48)
SIMT_WGMMA(56)
SIMT_WGMMA(64)
SIMT_WGMMA(72)
SIMT_WGMMA(80)
SIMT_WGMMA(88)
SIMT_WGMMA(96)
SIMT_WGMMA(104)
SIMT_WGMMA(112)
SIMT_WGMMA(120)
SIMT_WGMMA(128)
SIMT_WGMMA(136)
SIMT_WGMMA(144)
SIMT_WGMMA(152)
SIMT_WGMMA(160)
SIMT_WGMMA(168)
SIMT_WGMMA(176)
SIMT_WGMMA(184)
SIMT_WGMMA(192)
SIMT_WGMMA(200)
SIMT_WGMMA(208)
SIMT_WGMMA(216)
SIMT_WGMMA(224)
SIMT_WGMMA(232)
SIMT_WGMMA(240)
SIMT_WGMMA(248)
SIMT_WGMMA(256)

/* printf works: kernels run on the host */

#endif
