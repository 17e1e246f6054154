// Row sum: one block per row, strided loads, warp reduction with shuffles, shared memory
// between warps, barriers. Also a total over all rows with atomicAdd.
__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

extern "C" __global__ void __launch_bounds__(256) row_sum(const float* __restrict__ x,
                                                         float* __restrict__ out,
                                                         float* __restrict__ total, int n) {
  __shared__ float red[32];
  const float* row = x + (long long)blockIdx.x * n;
  float acc = 0.0f;
  for (int j = (int)threadIdx.x; j < n; j += (int)blockDim.x) acc += row[j];
  acc = warp_sum(acc);
  int lane = (int)threadIdx.x & 31, warp = (int)threadIdx.x >> 5;
  if (lane == 0) red[warp] = acc;
  __syncthreads();
  int nwarps = (int)(blockDim.x + 31) >> 5;
  if (warp == 0) {
    float v = lane < nwarps ? red[lane] : 0.0f;
    for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
    if (lane == 0) {
      out[blockIdx.x] = v;
      atomicAdd(total, v);
    }
  }
}

// Shuffle semantics: every lane gets lane 3's value, its up/down neighbours and a ballot.
extern "C" __global__ void shuffles(int* __restrict__ out) {
  int lane = (int)threadIdx.x;
  int v = lane * 10;
  out[lane * 5 + 0] = __shfl_sync(0xffffffffu, v, 3);
  out[lane * 5 + 1] = __shfl_up_sync(0xffffffffu, v, 1);
  out[lane * 5 + 2] = __shfl_down_sync(0xffffffffu, v, 2, 8);
  out[lane * 5 + 3] = (int)__ballot_sync(0xffffffffu, lane % 3 == 0);
  out[lane * 5 + 4] = (int)__reduce_add_sync(0xffffffffu, (unsigned)lane);
}
