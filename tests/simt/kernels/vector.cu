// Vectorized copy with float4 loads and stores, scalar tail.
extern "C" __global__ void copy4(const float* __restrict__ a, float* __restrict__ b, int n) {
  int i = (int)(blockIdx.x * blockDim.x + threadIdx.x);
  if (4 * i + 3 < n) {
    float4 v = *(const float4*)&a[4 * i];
    v.x *= 2.0f; v.y *= 2.0f; v.z *= 2.0f; v.w *= 2.0f;
    *(float4*)&b[4 * i] = v;
  } else {
    for (int j = 4 * i; j < n; j++) b[j] = a[j] * 2.0f;
  }
}

// Dynamic shared memory: reverse each block's chunk.
extern __shared__ __align__(16) float chunk[];
extern "C" __global__ void reverse_block(const float* __restrict__ a, float* __restrict__ b) {
  unsigned t = threadIdx.x, base = blockIdx.x * blockDim.x;
  chunk[t] = a[base + t];
  __syncthreads();
  b[base + t] = chunk[blockDim.x - 1 - t];
}
