#include <cuda_fp16.h>
#include <cuda_bf16.h>

// f16 in and out, f32 compute: y = gelu_tanh(x) * w
extern "C" __global__ void gelu_mul(const __half* __restrict__ x, const __half* __restrict__ w,
                                    __half* __restrict__ y, int n) {
  int i = (int)(blockIdx.x * blockDim.x + threadIdx.x);
  if (i >= n) return;
  float v = __half2float(x[i]);
  float g = 0.5f * v * (1.0f + tanhf(0.7978845608f * (v + 0.044715f * v * v * v)));
  y[i] = __float2half(g * __half2float(w[i]));
}

// native half arithmetic and functions
extern "C" __global__ void half_ops(const __half* __restrict__ x, __half* __restrict__ y, int n) {
  int i = (int)(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) y[i] = __hmax(hexp(x[i]) * x[i] + __float2half(1.0f), __hneg(x[i]));
}

// f32 -> bf16 -> f32 (round to nearest even)
extern "C" __global__ void bf16_roundtrip(const float* __restrict__ x, __nv_bfloat16* __restrict__ b,
                                          float* __restrict__ y, int n) {
  int i = (int)(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) {
    __nv_bfloat16 h = __float2bfloat16(x[i]);
    b[i] = h;
    y[i] = __bfloat162float(h);
  }
}
