// Metal access patterns with known coalescing (test_simt.c, t_coalescing).
#include <metal_stdlib>
using namespace metal;
struct params { int stride; };

// float4 lanes: 100% when consecutive; stride 4 (64 bytes apart) uses 16 of 32 bytes per sector
kernel void f4_strided(device const float4* a [[buffer(0)]], device float4* b [[buffer(1)]],
                       constant params& p [[buffer(2)]],
                       uint3 gid [[threadgroup_position_in_grid]],
                       uint3 tid [[thread_position_in_threadgroup]]) {
  uint i = gid.x * 64 + tid.x;
  b[i] = a[i * p.stride] * 2.0f;
}
