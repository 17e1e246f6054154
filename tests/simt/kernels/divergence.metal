#include <metal_stdlib>
using namespace metal;

// Wrong on purpose: threads past n return before the barrier.
kernel void early_exit(device float* x [[buffer(0)]],
                       constant uint& n [[buffer(1)]],
                       uint t [[thread_position_in_threadgroup]]) {
  threadgroup float s[256];
  if (t >= n) return;
  s[t] = x[t];
  threadgroup_barrier(mem_flags::mem_threadgroup);
  x[t] = s[n - 1 - t];
}

// Fine in Metal: lanes that returned do not take part in simd_sum.
kernel void sum_after_exit(device float* x [[buffer(0)]],
                           constant uint& n [[buffer(1)]],
                           uint t [[thread_position_in_threadgroup]]) {
  if (t >= n) return;
  x[t] = simd_sum(x[t]);
}
