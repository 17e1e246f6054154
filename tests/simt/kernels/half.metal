#include <metal_stdlib>
using namespace metal;

struct Params {
  int n;
};

// half in and out, float compute; bfloat store
kernel void silu(device const half* x [[buffer(0)]],
                 device half* y [[buffer(1)]],
                 device bfloat* yb [[buffer(2)]],
                 constant Params& p [[buffer(3)]],
                 uint3 gid [[threadgroup_position_in_grid]],
                 uint3 tid [[thread_position_in_threadgroup]]) {
  int i = (int)(gid.x * 128 + tid.x);
  if (i >= p.n) return;
  float v = float(x[i]);
  float r = v / (1.0f + fast::exp(-v));
  y[i] = half(r);
  yb[i] = bfloat(r);
}
