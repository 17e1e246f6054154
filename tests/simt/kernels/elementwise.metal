#include <metal_stdlib>
using namespace metal;

// The parameter convention of relaxc's MSL printer: buffers, one constant struct of symbolic
// values, then builtins.
struct Params {
  int n;
  float s;
};

kernel void scale_add(device const float* a [[buffer(0)]],
                      device const float* b [[buffer(1)]],
                      device float* c [[buffer(2)]],
                      constant Params& p [[buffer(3)]],
                      uint3 gid [[threadgroup_position_in_grid]],
                      uint3 tid [[thread_position_in_threadgroup]],
                      uint3 tpg [[threads_per_threadgroup]]) {
  int i = (int)(gid.x * tpg.x + tid.x);
  if (i < p.n) {
    c[i] = fma(a[i], p.s, exp(b[i]));
  }
}

// builtins in another order, scalar forms, a vector load
kernel void copy4(uint i [[thread_position_in_grid]],
                  device const float4* a [[buffer(0)]],
                  constant uint& n4 [[buffer(2)]],
                  device float4* b [[buffer(1)]]) {
  if (i < n4) b[i] = a[i] * 2.0f + float4{0.0f, 1.0f, 2.0f, 3.0f};
}
