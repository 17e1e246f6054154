// Access patterns with known coalescing (test_simt.c, t_coalescing): the traced launch must
// measure exactly these fractions of used over moved bytes.
#include <cuda_fp16.h>

// lane i reads a[i * stride]: stride 1 uses every byte of its sectors, stride 8 or more one
// 4-byte word per 32-byte sector (12.5%)
extern "C" __global__ void f32_strided(const float* __restrict__ a, float* __restrict__ b,
                                       int stride) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  b[i] = a[i * stride];
}

// 2-byte lanes through __half's operators (accesses made in helper functions count at the
// kernel's call): stride 1 is 100%, stride 2 is 50%
extern "C" __global__ void half_strided(const __half* __restrict__ a, __half* __restrict__ b,
                                        int stride) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  b[i] = a[i * stride] * __float2half(2.0f);
}

// 16-byte lanes: one request of 512 bytes per warp, 100%
extern "C" __global__ void vec16(const __half* __restrict__ a, __half* __restrict__ b) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  const uint4 w = ((const uint4*)a)[i];
  ((uint4*)b)[i] = w;
}

// every lane reads the same word: one sector serves the warp (100%)
extern "C" __global__ void broadcast(const float* __restrict__ a, float* __restrict__ b) {
  b[blockIdx.x * blockDim.x + threadIdx.x] = a[0];
}
