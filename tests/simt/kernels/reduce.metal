#include <metal_stdlib>
using namespace metal;

struct Params {
  int n;
};

// Row sum: one threadgroup per row, simd_sum within SIMD-groups, threadgroup memory between them.
kernel void row_sum(device const float* x [[buffer(0)]],
                    device float* out [[buffer(1)]],
                    constant Params& p [[buffer(2)]],
                    uint3 gid [[threadgroup_position_in_grid]],
                    uint3 tid [[thread_position_in_threadgroup]],
                    uint3 tpg [[threads_per_threadgroup]],
                    uint lane [[thread_index_in_simdgroup]],
                    uint sg [[simdgroup_index_in_threadgroup]]) {
  threadgroup float partial[32];
  device const float* row = x + (long)gid.x * p.n;
  float acc = 0.0f;
  for (int j = (int)tid.x; j < p.n; j += (int)tpg.x) acc += row[j];
  acc = simd_sum(acc);
  if (lane == 0) partial[sg] = acc;
  threadgroup_barrier(mem_flags::mem_threadgroup);
  uint nsg = (tpg.x + 31) / 32;
  if (sg == 0) {
    float v = lane < nsg ? partial[lane] : 0.0f;
    for (ushort o = 16; o > 0; o >>= 1) v += simd_shuffle_xor(v, o);
    if (lane == 0) out[gid.x] = v;
  }
}

// Row max with a threadgroup pointer (rewritten, not made static) and simd_max.
kernel void row_max(device const float* x [[buffer(0)]],
                    device float* out [[buffer(1)]],
                    constant Params& p [[buffer(2)]],
                    uint3 gid [[threadgroup_position_in_grid]],
                    uint3 tid [[thread_position_in_threadgroup]],
                    uint lane [[thread_index_in_simdgroup]],
                    uint sg [[simdgroup_index_in_threadgroup]],
                    uint nsg [[simdgroups_per_threadgroup]]) {
  threadgroup float red[32];
  threadgroup float* r = red;
  float m = -INFINITY;
  for (int j = (int)tid.x; j < p.n; j += (int)(nsg * 32)) m = max(m, x[(long)gid.x * p.n + j]);
  m = simd_max(m);
  if (lane == 0) r[sg] = m;
  threadgroup_barrier(mem_flags::mem_threadgroup);
  if (tid.x == 0) {
    float v = r[0];
    for (uint k = 1; k < nsg; k++) v = max(v, r[k]);
    out[gid.x] = v;
  }
}
