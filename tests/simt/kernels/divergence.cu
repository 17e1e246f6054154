// Wrong on purpose: threads past n leave before a barrier the others wait at.
extern "C" __global__ void early_exit(float* __restrict__ x, int n) {
  __shared__ float s[256];
  int i = (int)threadIdx.x;
  if (i >= n) return;
  s[i] = x[i];
  __syncthreads();
  x[i] = s[n - 1 - i];
}

// Wrong on purpose: a full-mask shuffle after half the warp has left.
extern "C" __global__ void shuffle_after_exit(float* __restrict__ x) {
  int i = (int)threadIdx.x;
  if (i >= 16) return;
  x[i] = __shfl_xor_sync(0xffffffffu, x[i], 1);
}

// Wrong on purpose: reads a lane that does not exist in a 16-thread block.
extern "C" __global__ void shuffle_missing_lane(float* __restrict__ x) {
  int i = (int)threadIdx.x;
  x[i] = __shfl_xor_sync(0x0000ffffu, x[i], 16);
}
