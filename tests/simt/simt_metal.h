/* simt_metal.h: prelude that lets clang compile Metal Shading Language kernels as C++17 for the
 * CPU SIMT emulator (-include simt_metal.h). Address spaces are macros (`device`, `constant`,
 * `thread` vanish; `threadgroup` is rewritten by the harness, see README.md), vector types are
 * clang ext_vector_types (swizzles, splats, arithmetic), `half` is _Float16, `bfloat` a struct.
 * Builtins arrive as kernel parameters: the harness appends a launcher per kernel that passes
 * the bound buffers and the builtin values named by each parameter's attribute. */
#ifndef SIMT_METAL_H
#define SIMT_METAL_H

#include "simt_common.h"

#define SIMT_LANG_METAL    1
#define __METAL_VERSION__  300
#define __HAVE_SIMDGROUP__ 1 /* not a real Metal macro: tells shared test sources they run here */

/* ---- scalar and vector types ---- */
typedef unsigned int uint;
typedef unsigned short ushort;
typedef unsigned char uchar;
typedef _Float16 half;

namespace simt {
static inline unsigned short f2bf(float f) {
  unsigned u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return (unsigned short)(u >> 16);
}
static inline float bf2f(unsigned short b) {
  unsigned u = (unsigned)b << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
} // namespace simt
/* MSL bfloat: converts implicitly to and from float, arithmetic in float rounded per operation */
struct bfloat {
  unsigned short bits;
  bfloat() = default;
  bfloat(float f) : bits(simt::f2bf(f)) {}
  operator float() const { return simt::bf2f(bits); }
};
static_assert(sizeof(bfloat) == 2, "bfloat is 2 bytes");

#define SIMT_MVEC(T, N)                                                                            \
  typedef T N##2 __attribute__((ext_vector_type(2)));                                              \
  typedef T N##3 __attribute__((ext_vector_type(3)));                                              \
  typedef T N##4 __attribute__((ext_vector_type(4)));
SIMT_MVEC(float, float)
SIMT_MVEC(half, half)
SIMT_MVEC(int, int)
SIMT_MVEC(uint, uint)
SIMT_MVEC(short, short)
SIMT_MVEC(ushort, ushort)
SIMT_MVEC(char, char)
SIMT_MVEC(uchar, uchar)
SIMT_MVEC(bool, bool)
struct packed_float3 {
  float x, y, z;
};
struct packed_half4 {
  half x, y, z, w;
};

/* ---- address spaces and function qualifiers ---- */
#define kernel
#define device
#define thread
#define constant const
/* `threadgroup` is rewritten by the harness before compilation: to `static` where it declares a
 * variable (static storage is per threadgroup because threadgroups run one at a time), and
 * removed where it qualifies a pointer or reference. This definition covers what is left. */
#define threadgroup
#define METAL_FUNC inline

namespace metal {
/* ---- barriers ---- */
enum class mem_flags : unsigned {
  mem_none = 0,
  mem_device = 1,
  mem_threadgroup = 2,
  mem_texture = 4,
  mem_threadgroup_imageblock = 8
};
static inline mem_flags operator|(mem_flags a, mem_flags b) {
  return (mem_flags)((unsigned)a | (unsigned)b);
}
static inline void threadgroup_barrier(mem_flags, int line = __builtin_LINE()) {
  simt::rt->barrier(line);
}
static inline void simdgroup_barrier(mem_flags, int line = __builtin_LINE()) {
  unsigned char all[SIMT_WARP];
  unsigned members;
  simt::xchg<unsigned char>(0, 0, all, &members, line);
}

/* ---- math: float and half scalars, elementwise on vectors ---- */
template <class V> struct vec_info { static constexpr int n = 0; };
#define SIMT_VINFO(T, N)                                                                           \
  template <> struct vec_info<N##2> {                                                              \
    static constexpr int n = 2;                                                                    \
    using elem = T;                                                                                \
  };                                                                                               \
  template <> struct vec_info<N##3> {                                                              \
    static constexpr int n = 3;                                                                    \
    using elem = T;                                                                                \
  };                                                                                               \
  template <> struct vec_info<N##4> {                                                              \
    static constexpr int n = 4;                                                                    \
    using elem = T;                                                                                \
  };
SIMT_VINFO(float, float)
SIMT_VINFO(half, half)
#define SIMT_MUN(name, f)                                                                          \
  static inline float name(float x) { return f(x); }                                               \
  static inline half name(half x) { return (half)f((float)x); }                                    \
  template <class V, int N = vec_info<V>::n, class = std::enable_if_t<(N > 0)>>                    \
  static inline V name(V v) {                                                                      \
    for (int i = 0; i < N; i++) v[i] = name(v[i]);                                                 \
    return v;                                                                                      \
  }
#define SIMT_MBIN(name, f)                                                                         \
  static inline float name(float x, float y) { return f(x, y); }                                   \
  static inline half name(half x, half y) { return (half)f((float)x, (float)y); }                  \
  template <class V, int N = vec_info<V>::n, class = std::enable_if_t<(N > 0)>>                    \
  static inline V name(V a, V b) {                                                                 \
    for (int i = 0; i < N; i++) a[i] = name(a[i], b[i]);                                           \
    return a;                                                                                      \
  }
static inline float rsqrtf_(float x) { return 1.0f / ::sqrtf(x); }
static inline float sigmoidf_(float x) { return 1.0f / (1.0f + ::expf(-x)); }
static inline float fractf_(float x) { return x - ::floorf(x); }
static inline float saturatef_(float x) { return x < 0.0f ? 0.0f : x > 1.0f ? 1.0f : x; }
SIMT_MUN(exp, ::expf)
SIMT_MUN(exp2, ::exp2f)
SIMT_MUN(exp10, ::exp10f)
SIMT_MUN(log, ::logf)
SIMT_MUN(log2, ::log2f)
SIMT_MUN(log10, ::log10f)
SIMT_MUN(sqrt, ::sqrtf)
SIMT_MUN(rsqrt, rsqrtf_)
SIMT_MUN(sin, ::sinf)
SIMT_MUN(cos, ::cosf)
SIMT_MUN(tan, ::tanf)
SIMT_MUN(tanh, ::tanhf)
SIMT_MUN(sinh, ::sinhf)
SIMT_MUN(cosh, ::coshf)
SIMT_MUN(asin, ::asinf)
SIMT_MUN(acos, ::acosf)
SIMT_MUN(atan, ::atanf)
SIMT_MUN(abs, ::fabsf)
SIMT_MUN(fabs, ::fabsf)
SIMT_MUN(floor, ::floorf)
SIMT_MUN(ceil, ::ceilf)
SIMT_MUN(round, ::roundf)
SIMT_MUN(rint, ::rintf)
SIMT_MUN(trunc, ::truncf)
SIMT_MUN(fract, fractf_)
SIMT_MUN(saturate, saturatef_)
SIMT_MBIN(pow, ::powf)
SIMT_MBIN(powr, ::powf)
SIMT_MBIN(fmax, ::fmaxf)
SIMT_MBIN(fmin, ::fminf)
SIMT_MBIN(max, ::fmaxf)
SIMT_MBIN(min, ::fminf)
SIMT_MBIN(fmod, ::fmodf)
SIMT_MBIN(atan2, ::atan2f)
SIMT_MBIN(copysign, ::copysignf)
static inline float fma(float a, float b, float c) { return ::fmaf(a, b, c); }
static inline half fma(half a, half b, half c) {
  return (half)::fmaf((float)a, (float)b, (float)c);
}
static inline float clamp(float x, float lo, float hi) { return ::fminf(::fmaxf(x, lo), hi); }
static inline half clamp(half x, half lo, half hi) {
  return (half)clamp((float)x, (float)lo, (float)hi);
}
static inline float mix(float a, float b, float t) { return a + (b - a) * t; }
static inline bool isnan(float x) { return x != x; }
static inline bool isinf(float x) { return std::isinf(x); }
static inline bool isfinite(float x) { return std::isfinite(x); }
static inline float select(float a, float b, bool c) { return c ? b : a; }
static inline half select(half a, half b, bool c) { return c ? b : a; }
#define SIMT_IMINMAX(T)                                                                            \
  static inline T max(T a, T b) { return a > b ? a : b; }                                          \
  static inline T min(T a, T b) { return a < b ? a : b; }                                          \
  static inline T clamp(T x, T lo, T hi) { return min(max(x, lo), hi); }
SIMT_IMINMAX(int)
SIMT_IMINMAX(uint)
SIMT_IMINMAX(short)
SIMT_IMINMAX(ushort)
SIMT_IMINMAX(long)
SIMT_IMINMAX(unsigned long)
static inline int abs(int x) { return x < 0 ? -x : x; }
template <class V, int N = vec_info<V>::n, class = std::enable_if_t<(N > 0)>>
static inline typename vec_info<V>::elem dot(V a, V b) {
  typename vec_info<V>::elem r = 0;
  for (int i = 0; i < N; i++) r += a[i] * b[i];
  return r;
}
/* MSL has no erf: calling it must fail to compile, as with xcrun metal. C's ::erf(double) is
 * visible here, so a deleted better match is declared instead. */
template <class T> T erf(T) = delete;  /* MSL has no erf */
template <class T> T erff(T) = delete; /* MSL has no erff */
static inline float divide(float a, float b) { return a / b; }
namespace fast {
using metal::cos;
using metal::divide;
using metal::exp;
using metal::exp2;
using metal::log;
using metal::log2;
using metal::max;
using metal::min;
using metal::pow;
using metal::powr;
using metal::rsqrt;
using metal::sin;
using metal::sqrt;
using metal::tanh;
} // namespace fast
namespace precise = fast;

/* ---- SIMD-group functions: every lane of the simdgroup that has not exited takes part ---- */
template <class T> static inline T simd_reduce_(T v, int op, int line) {
  T all[SIMT_WARP];
  unsigned members;
  simt::xchg<T>(0, v, all, &members, line);
  bool first = true;
  T r = v;
  for (int i = 0; i < SIMT_WARP; i++) {
    if (!(members >> i & 1u)) continue;
    if (first)
      r = all[i], first = false;
    else if (op == 0)
      r = r + all[i];
    else if (op == 1)
      r = all[i] > r ? all[i] : r;
    else if (op == 2)
      r = all[i] < r ? all[i] : r;
    else if (op == 3)
      r = r * all[i];
  }
  return r;
}
template <class T> static inline T simd_sum(T v, int line = __builtin_LINE()) {
  return simd_reduce_(v, 0, line);
}
template <class T> static inline T simd_max(T v, int line = __builtin_LINE()) {
  return simd_reduce_(v, 1, line);
}
template <class T> static inline T simd_min(T v, int line = __builtin_LINE()) {
  return simd_reduce_(v, 2, line);
}
template <class T> static inline T simd_product(T v, int line = __builtin_LINE()) {
  return simd_reduce_(v, 3, line);
}
template <class T> static inline T simd_shuffle_(T v, int src, int line, const char *op) {
  T all[SIMT_WARP];
  unsigned members;
  simt::xchg<T>(0, v, all, &members, line);
  return simt::pick(all, members, src, line, op);
}
static inline int simd_lane_() { return (int)simt::cur()->lane; }
template <class T> static inline T simd_shuffle(T v, ushort lane, int line = __builtin_LINE()) {
  return simd_shuffle_(v, lane, line, "simd_shuffle");
}
template <class T> static inline T simd_broadcast(T v, ushort lane, int line = __builtin_LINE()) {
  return simd_shuffle_(v, lane, line, "simd_broadcast");
}
template <class T> static inline T simd_broadcast_first(T v, int line = __builtin_LINE()) {
  T all[SIMT_WARP];
  unsigned members;
  simt::xchg<T>(0, v, all, &members, line);
  return all[__builtin_ctz(members)];
}
template <class T> static inline T simd_shuffle_xor(T v, ushort mask, int line = __builtin_LINE()) {
  return simd_shuffle_(v, (simd_lane_() ^ mask) & 31, line, "simd_shuffle_xor");
}
template <class T>
static inline T simd_shuffle_down(T v, ushort delta, int line = __builtin_LINE()) {
  int src = simd_lane_() + delta; /* past the last lane: the lane's own value */
  return simd_shuffle_(v, src < SIMT_WARP ? src : simd_lane_(), line, "simd_shuffle_down");
}
template <class T> static inline T simd_shuffle_up(T v, ushort delta, int line = __builtin_LINE()) {
  int src = simd_lane_() - delta;
  return simd_shuffle_(v, src >= 0 ? src : simd_lane_(), line, "simd_shuffle_up");
}
template <class T> static inline T simd_prefix_exclusive_sum(T v, int line = __builtin_LINE()) {
  T all[SIMT_WARP];
  unsigned members;
  simt::xchg<T>(0, v, all, &members, line);
  T r = 0;
  for (int i = 0; i < simd_lane_(); i++)
    if (members >> i & 1u) r = r + all[i];
  return r;
}
template <class T> static inline T simd_prefix_inclusive_sum(T v, int line = __builtin_LINE()) {
  return simd_prefix_exclusive_sum(v, line) + v;
}
static inline bool simd_all(bool p, int line = __builtin_LINE()) {
  bool all[SIMT_WARP];
  unsigned members;
  simt::xchg<bool>(0, p, all, &members, line);
  for (int i = 0; i < SIMT_WARP; i++)
    if ((members >> i & 1u) && !all[i]) return false;
  return true;
}
static inline bool simd_any(bool p, int line = __builtin_LINE()) {
  bool all[SIMT_WARP];
  unsigned members;
  simt::xchg<bool>(0, p, all, &members, line);
  for (int i = 0; i < SIMT_WARP; i++)
    if ((members >> i & 1u) && all[i]) return true;
  return false;
}
static inline bool simd_is_first(int line = __builtin_LINE()) {
  bool all[SIMT_WARP];
  unsigned members;
  simt::xchg<bool>(0, true, all, &members, line);
  return simd_lane_() == __builtin_ctz(members);
}

/* ---- atomics (plain read-modify-write: fibers switch only at barriers and SIMD functions) ---- */
enum memory_order { memory_order_relaxed };
template <class T> struct simt_atomic_ { T v; };
typedef simt_atomic_<int> atomic_int;
typedef simt_atomic_<uint> atomic_uint;
typedef simt_atomic_<float> atomic_float;
template <class T>
static inline T atomic_fetch_add_explicit(simt_atomic_<T> *a, T v, memory_order) {
  T o = a->v;
  a->v = o + v;
  return o;
}
template <class T>
static inline T atomic_fetch_max_explicit(simt_atomic_<T> *a, T v, memory_order) {
  T o = a->v;
  a->v = v > o ? v : o;
  return o;
}
template <class T>
static inline T atomic_fetch_min_explicit(simt_atomic_<T> *a, T v, memory_order) {
  T o = a->v;
  a->v = v < o ? v : o;
  return o;
}
template <class T> static inline T atomic_load_explicit(simt_atomic_<T> *a, memory_order) {
  return a->v;
}
template <class T> static inline void atomic_store_explicit(simt_atomic_<T> *a, T v, memory_order) {
  a->v = v;
}
} // namespace metal

/* as_type<T>(x): bit cast */
template <class T, class U> static inline T as_type(U u) {
  static_assert(sizeof(T) == sizeof(U), "as_type between types of different sizes");
  T t;
  std::memcpy(&t, &u, sizeof(T));
  return t;
}

/* ---- SIMD-group matrices (Metal Shading Language Specification 3.1, 6.7 "SIMD-group Matrix
 * Functions"). The spec leaves the distribution of a simdgroup_matrix over the lanes opaque, so
 * here every lane holds the whole matrix (rows x columns, row-major); each function is a
 * SIMD-group collective: all 32 lanes arrive at it together (one warp exchange, checked: every
 * lane present, the same source line, the same address and stride), then lane 0 does the whole
 * operation: the matrix lives in lane 0's copy (the other lanes' copies are never read, since
 * only these collectives touch a matrix; doing the work once, not 32 times, made the emulated
 * fragment attention of ops/attention.c affordable in CI). Loads and stores go through plain
 * pointers (ASan checks them in sanitized builds). multiply_accumulate: d = c + a[r][0] b[0][c] +
 * ... in k order, in float (the hardware's order and rounding are not specified; tests compare with
 * a tolerance). ---- */
typedef unsigned long ulong;
/* matrix_origin: a struct here (clang's ext_vector_type has no ulong2(x, y) constructor) */
struct ulong2 {
  ulong x, y;
  ulong2(ulong a = 0) : x(a), y(a) {}
  ulong2(ulong a, ulong b) : x(a), y(b) {}
};
template <class T, int Cols, int Rows> struct simdgroup_matrix { T e[Rows][Cols]; };
typedef simdgroup_matrix<half, 8, 8> simdgroup_half8x8;
typedef simdgroup_matrix<float, 8, 8> simdgroup_float8x8;
typedef simdgroup_matrix<bfloat, 8, 8> simdgroup_bfloat8x8;

namespace simt {
struct sgm_arrival {
  const void *p;
  unsigned long stride;
};
/* The collective rendezvous of a SIMD-group matrix function (see above). */
static inline void sgm_sync(const char *op, const void *p, unsigned long stride, int line) {
  sgm_arrival me = {p, stride}, all[SIMT_WARP];
  unsigned members;
  xchg<sgm_arrival>(0, me, all, &members, line);
  char msg[200];
  if (members != 0xffffffffu) {
    std::snprintf(msg, sizeof msg,
                  "%s: a SIMD-group matrix function needs all 32 lanes of the SIMD group "
                  "(lanes taking part 0x%08x)",
                  op, members);
    fail(line, msg);
  }
  for (int i = 0; i < SIMT_WARP; i++)
    if (all[i].p != p || all[i].stride != stride) {
      std::snprintf(msg, sizeof msg,
                    "%s: lanes pass different operands (lane %d: %p, stride %lu; lane %u: %p, "
                    "stride %lu)",
                    op, i, all[i].p, all[i].stride, cur()->lane, p, stride);
      fail(line, msg);
    }
}
} // namespace simt

template <class T, int C, int R>
static inline simdgroup_matrix<T, C, R> make_filled_simdgroup_matrix(T v) {
  simdgroup_matrix<T, C, R> m;
  for (int r = 0; r < R; r++)
    for (int c = 0; c < C; c++) m.e[r][c] = v;
  return m;
}
/* element (r, c) at src[(origin.y + r) * elements_per_row + origin.x + c]; transposed: the
 * matrix's columns are the source's rows */
template <class T, int C, int R>
static inline void simdgroup_load(simdgroup_matrix<T, C, R> &d, const T *src,
                                  ulong elements_per_row = C, ulong2 origin = ulong2(0),
                                  bool transpose = false, int line = __builtin_LINE()) {
  simt::sgm_sync("simdgroup_load", src, elements_per_row, line);
  if (simt::cur()->lane != 0) return;
  for (int r = 0; r < R; r++)
    for (int c = 0; c < C; c++) {
      ulong row = transpose ? c : r, col = transpose ? r : c;
      d.e[r][c] = src[(origin.y + row) * elements_per_row + origin.x + col];
    }
}
template <class T, int C, int R>
static inline void simdgroup_store(const simdgroup_matrix<T, C, R> &a, T *dst,
                                   ulong elements_per_row = C, ulong2 origin = ulong2(0),
                                   bool transpose = false, int line = __builtin_LINE()) {
  simt::sgm_sync("simdgroup_store", dst, elements_per_row, line);
  if (simt::cur()->lane != 0) return;
  for (int r = 0; r < R; r++)
    for (int c = 0; c < C; c++) {
      ulong row = transpose ? c : r, col = transpose ? r : c;
      dst[(origin.y + row) * elements_per_row + origin.x + col] = a.e[r][c];
    }
}
template <class TD, class TA, class TB, class TC, int K, int M, int N>
static inline void
simdgroup_multiply_accumulate(simdgroup_matrix<TD, N, M> &d, const simdgroup_matrix<TA, K, M> &a,
                              const simdgroup_matrix<TB, N, K> &b,
                              const simdgroup_matrix<TC, N, M> &c, int line = __builtin_LINE()) {
  simt::sgm_sync("simdgroup_multiply_accumulate", nullptr, 0, line);
  if (simt::cur()->lane != 0) return;
  simdgroup_matrix<TD, N, M> r;
  for (int i = 0; i < M; i++)
    for (int j = 0; j < N; j++) {
      float acc = (float)c.e[i][j];
      for (int k = 0; k < K; k++) acc += (float)a.e[i][k] * (float)b.e[k][j];
      r.e[i][j] = (TD)acc;
    }
  d = r;
}

#endif
