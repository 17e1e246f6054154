/* simt_common.h: C++ glue shared by the CUDA and Metal preludes of the SIMT emulator: the link
 * to the scheduler, lane exchanges, the launch helpers the harness appends to a kernel source.
 * Included (through simt_cuda.h / simt_metal.h) at the top of exactly one translation unit per
 * compiled kernel object. Standard headers are included here, before any keyword macro of the
 * preludes (`device`, `constant`, ...) exists. */
#ifndef SIMT_COMMON_H
#define SIMT_COMMON_H

#include <climits>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <tuple>
#include <type_traits>
#include <utility>

#include "simt_rt.h"

namespace simt {

static const simt_rt *rt; /* set by simt__init when the harness loads the object */

static inline simt_thread *cur() { return *rt->current; }

[[noreturn]] static inline void fail(int line, const char *msg) {
  rt->fail(line, msg);
  __builtin_unreachable();
}

/* One exchange among the lanes of the caller's warp; see simt_rt.h. T must fit a payload. */
template <class T>
static inline void xchg(unsigned mask, const T &v, T *out, unsigned *members, int line) {
  static_assert(sizeof(T) <= SIMT_PAYLOAD, "value too large for a warp exchange");
  unsigned char in[SIMT_PAYLOAD] = {0}, all[SIMT_WARP * SIMT_PAYLOAD];
  std::memcpy(in, &v, sizeof(T));
  rt->warp_exchange(mask, in, all, members, line);
  for (int i = 0; i < SIMT_WARP; i++) std::memcpy(&out[i], all + i * SIMT_PAYLOAD, sizeof(T));
}

/* Value of lane `src` after an exchange; reading a lane that did not take part is an error. */
template <class T>
static inline T pick(const T *all, unsigned members, int src, int line, const char *op) {
  if (src < 0 || src >= SIMT_WARP || !(members >> src & 1u)) {
    char msg[160];
    std::snprintf(
        msg, sizeof msg,
        "%s: lane %u reads lane %d, which does not take part (participating lanes 0x%08x)", op,
        cur()->lane, src, members);
    fail(line, msg);
  }
  return all[src];
}

/* ---- CUDA launches: args[i] points to the value of parameter i (cuLaunchKernel convention) ----
 */
template <class... A, std::size_t... I>
static inline void invoke_impl(void (*f)(A...), void **args, std::index_sequence<I...>) {
  f(*static_cast<std::remove_reference_t<A> *>(args[I])...);
}
template <class... A> static inline int invoke(void (*f)(A...), void **args) {
  if (!args) return (int)sizeof...(A);
  invoke_impl(f, args, std::index_sequence_for<A...>{});
  return 0;
}

/* ---- Metal launches: parameter I of kernel F is a bound buffer or a builtin ---- */
template <class F, std::size_t I> struct param;
template <class... A, std::size_t I> struct param<void (*)(A...), I> {
  using type = std::tuple_element_t<I, std::tuple<A...>>;
};
template <class F, std::size_t I> using param_t = typename param<F, I>::type;

/* A buffer binding: `device T*` / `constant T*` get the buffer's address, `constant T&` the
 * object at that address (setBuffer / setBytes). */
template <class T> static inline T bind(void *p) {
  if constexpr (std::is_pointer_v<T>)
    return static_cast<T>(p);
  else if constexpr (std::is_reference_v<T>)
    return *static_cast<std::remove_reference_t<T> *>(p);
  else
    return *static_cast<T *>(p);
}

/* A builtin value converted to the parameter's type: scalar, 2- or 3-component vector. */
template <class T> static inline T builtin(simt_dim3 v) {
  using U = std::remove_cv_t<std::remove_reference_t<T>>;
  if constexpr (std::is_arithmetic_v<U>) {
    return (U)v.x;
  } else {
    U r{};
    using E = std::remove_reference_t<decltype(r.x)>;
    r.x = (E)v.x;
    r.y = (E)v.y;
    if constexpr (sizeof(U) / sizeof(E) >= 3) r.z = (E)v.z;
    return r;
  }
}

/* The Metal builtin attributes the harness understands, by attribute name. */
enum builtin_kind {
  B_THREAD_POSITION_IN_GRID,
  B_THREADGROUP_POSITION_IN_GRID,
  B_THREAD_POSITION_IN_THREADGROUP,
  B_THREADS_PER_THREADGROUP,
  B_THREADGROUPS_PER_GRID,
  B_THREADS_PER_GRID,
  B_THREAD_INDEX_IN_THREADGROUP,
  B_THREAD_INDEX_IN_SIMDGROUP,
  B_SIMDGROUP_INDEX_IN_THREADGROUP,
  B_THREADS_PER_SIMDGROUP,
  B_SIMDGROUPS_PER_THREADGROUP,
};

static inline simt_dim3 builtin_value(builtin_kind k) {
  const simt_thread *t = cur();
  simt_dim3 r = {0, 0, 0};
  switch (k) {
  case B_THREAD_POSITION_IN_GRID:
    r.x = t->block_idx.x * t->block_dim.x + t->thread_idx.x;
    r.y = t->block_idx.y * t->block_dim.y + t->thread_idx.y;
    r.z = t->block_idx.z * t->block_dim.z + t->thread_idx.z;
    return r;
  case B_THREADGROUP_POSITION_IN_GRID:
    return t->block_idx;
  case B_THREAD_POSITION_IN_THREADGROUP:
    return t->thread_idx;
  case B_THREADS_PER_THREADGROUP:
    return t->block_dim;
  case B_THREADGROUPS_PER_GRID:
    return t->grid_dim;
  case B_THREADS_PER_GRID:
    r.x = t->grid_dim.x * t->block_dim.x;
    r.y = t->grid_dim.y * t->block_dim.y;
    r.z = t->grid_dim.z * t->block_dim.z;
    return r;
  case B_THREAD_INDEX_IN_THREADGROUP:
    r.x = t->linear;
    return r;
  case B_THREAD_INDEX_IN_SIMDGROUP:
    r.x = t->lane;
    return r;
  case B_SIMDGROUP_INDEX_IN_THREADGROUP:
    r.x = t->warp;
    return r;
  case B_THREADS_PER_SIMDGROUP:
    r.x = SIMT_WARP;
    return r;
  case B_SIMDGROUPS_PER_THREADGROUP:
    r.x = (t->block_dim.x * t->block_dim.y * t->block_dim.z + SIMT_WARP - 1) / SIMT_WARP;
    return r;
  }
  return r;
}

} // namespace simt

/* ---- access tracing (-DSIMT_TRACE with -fsanitize=thread): the callbacks of clang's
 * ThreadSanitizer instrumentation, answered here instead of by TSan's runtime (which is not
 * linked: the object is a shared library). Each forwards to the scheduler (simt_rt.h); the
 * callbacks themselves are not instrumented. Memory intrinsics (struct copies) come as
 * __tsan_memcpy & co. and must do the copy. ---- */
#ifdef SIMT_TRACE
#define SIMT_TSAN_CB extern "C" __attribute__((disable_sanitizer_instrumentation, used))
#define SIMT_PC      __builtin_return_address(0)
namespace simt {
__attribute__((disable_sanitizer_instrumentation)) static inline void
trace(const void *pc, const void *a, unsigned long n, int st) {
  if (rt) rt->trace_access(pc, a, n, st);
}
} // namespace simt
SIMT_TSAN_CB void __tsan_init(void) {}
SIMT_TSAN_CB void __tsan_func_entry(void *caller_pc) {
  if (simt::rt) simt::rt->trace_enter(caller_pc);
}
SIMT_TSAN_CB void __tsan_func_exit(void) {
  if (simt::rt) simt::rt->trace_exit();
}
SIMT_TSAN_CB void __tsan_ignore_thread_begin(void) {}
SIMT_TSAN_CB void __tsan_ignore_thread_end(void) {}
#define SIMT_TSAN_RW(n)                                                                            \
  SIMT_TSAN_CB void __tsan_read##n(void *a) { simt::trace(SIMT_PC, a, n, 0); }                     \
  SIMT_TSAN_CB void __tsan_write##n(void *a) { simt::trace(SIMT_PC, a, n, 1); }                    \
  SIMT_TSAN_CB void __tsan_unaligned_read##n(void *a) { simt::trace(SIMT_PC, a, n, 0); }           \
  SIMT_TSAN_CB void __tsan_unaligned_write##n(void *a) { simt::trace(SIMT_PC, a, n, 1); }          \
  SIMT_TSAN_CB void __tsan_volatile_read##n(void *a) { simt::trace(SIMT_PC, a, n, 0); }            \
  SIMT_TSAN_CB void __tsan_volatile_write##n(void *a) { simt::trace(SIMT_PC, a, n, 1); }
SIMT_TSAN_RW(1)
SIMT_TSAN_RW(2)
SIMT_TSAN_RW(4)
SIMT_TSAN_RW(8)
SIMT_TSAN_RW(16)
SIMT_TSAN_CB void __tsan_read_range(void *a, unsigned long n) { simt::trace(SIMT_PC, a, n, 0); }
SIMT_TSAN_CB void __tsan_write_range(void *a, unsigned long n) { simt::trace(SIMT_PC, a, n, 1); }
SIMT_TSAN_CB void *__tsan_memcpy(void *d, const void *s, unsigned long n) {
  simt::trace(SIMT_PC, s, n, 0);
  simt::trace(SIMT_PC, d, n, 1);
  return std::memcpy(d, s, n);
}
SIMT_TSAN_CB void *__tsan_memmove(void *d, const void *s, unsigned long n) {
  simt::trace(SIMT_PC, s, n, 0);
  simt::trace(SIMT_PC, d, n, 1);
  return std::memmove(d, s, n);
}
SIMT_TSAN_CB void *__tsan_memset(void *d, int c, unsigned long n) {
  simt::trace(SIMT_PC, d, n, 1);
  return std::memset(d, c, n);
}
SIMT_TSAN_CB void __tsan_vptr_update(void **, void *) {}
SIMT_TSAN_CB void __tsan_vptr_read(void **) {}
SIMT_TSAN_CB void __tsan_atomic_thread_fence(int) { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
SIMT_TSAN_CB void __tsan_atomic_signal_fence(int) {}
#else
namespace simt {
static inline void trace(const void *, const void *, unsigned long, int) {}
} // namespace simt
#endif

/* Shared memory: in a traced object the preludes put every `__shared__` (CUDA) variable in the
 * section SIMT_SHARED_SECTION, whose bounds the linker gives as __start_/__stop_ symbols (null
 * when the object has no shared variable), so that a traced launch tells shared memory from the
 * other static storage and counts its bank conflicts (simt_trace.c). Only there: ASan leaves the
 * globals of such a section without redzones, and the sanitized objects (never traced) keep them
 * on shared arrays. */
#define SIMT_SHARED_SECTION "simt_shared"
#ifdef SIMT_TRACE
#define SIMT_SHARED_ATTR __attribute__((section(SIMT_SHARED_SECTION)))
#else
#define SIMT_SHARED_ATTR
#endif
extern "C" char __start_simt_shared[] __attribute__((weak, visibility("hidden")));
extern "C" char __stop_simt_shared[] __attribute__((weak, visibility("hidden")));
extern "C" __attribute__((visibility("default"))) void simt__shared_range(void **lo, void **hi) {
  *lo = __start_simt_shared;
  *hi = __stop_simt_shared;
}

extern "C" __attribute__((visibility("default"))) int simt__init(const simt_rt *rt) {
  if (!rt || rt->version != SIMT_RT_VERSION) return -1;
  simt::rt = rt;
  return 0;
}

#endif
