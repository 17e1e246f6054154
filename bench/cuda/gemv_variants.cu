// bench/cuda/gemv_variants.cu: hand-written GEMV variants for y[n, M] = x[n, K] @ W[M, K]^T (f16 in,
// f32 accumulation, f16 out) at the Llama-2-7B / Llama-3-8B decode shapes, n = 1..16, timed with
// CUDA events against cuBLAS-free baselines, to decide what relaxc's GEMV schedules should emit
// (bench/RESULTS.md records the figures). Each variant is checked against a float64 host
// reference (relative L2 error) on random inputs before it is timed.
//
//   simt_r{1,2,4}   one warp per R output columns, 16-byte loads along K per lane, x read from
//                   global memory (L1) inside the loop, warp-shuffle reduction: relaxc's gemv_rows
//   mma_c{1,2}      tensor cores: one warp per 8*C columns, mma.sync m16n8k16 (the batch rows
//                   padded to 16 in registers), each lane loading 16 bytes of a weight row per
//                   32-wide k chunk (k permuted consistently between the A and B fragments)
//
// build: nvcc -O3 -arch=sm_90 -o gemv_variants bench/cuda/gemv_variants.cu
// usage: gemv_variants [REPS]
#include <cuda_fp16.h>
#include <cstdio>
#include <cstdlib>
#include <cmath>
#include <vector>
#include <algorithm>

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { \
  fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, cudaGetErrorString(e_)); exit(1); } } while (0)

__device__ __forceinline__ void unpack8(uint4 v, float *f) {
  const __half2 *h = reinterpret_cast<const __half2 *>(&v);
#pragma unroll
  for (int i = 0; i < 4; i++) { float2 t = __half22float2(h[i]); f[2 * i] = t.x; f[2 * i + 1] = t.y; }
}

// R columns per warp, NB rows (compile-time bound; rows >= n skipped), block of 256 threads
template <int R, int NB, int UNROLL>
__global__ void __launch_bounds__(256) simt(const __half *__restrict__ w, const __half *__restrict__ x,
                                             __half *__restrict__ y, int n, int M, int K) {
  int warp = blockIdx.x * 8 + threadIdx.x / 32, lane = threadIdx.x % 32;
  int col0 = warp * R;
  if (col0 >= M) return;
  float acc[NB][R];
#pragma unroll
  for (int i = 0; i < NB; i++)
#pragma unroll
    for (int r = 0; r < R; r++) acc[i][r] = 0.f;
  const uint4 *w4 = reinterpret_cast<const uint4 *>(w), *x4 = reinterpret_cast<const uint4 *>(x);
  int K8 = K / 8;
#pragma unroll UNROLL
  for (int kb = lane; kb < K8; kb += 32) {
    float wf[R][8];
#pragma unroll
    for (int r = 0; r < R; r++) unpack8(w4[(size_t)(col0 + r) * K8 + kb], wf[r]);
#pragma unroll
    for (int i = 0; i < NB; i++) {
      if (i < n) {
        float xf[8];
        unpack8(x4[(size_t)i * K8 + kb], xf);
#pragma unroll
        for (int v = 0; v < 8; v++)
#pragma unroll
          for (int r = 0; r < R; r++) acc[i][r] += xf[v] * wf[r][v];
      }
    }
  }
#pragma unroll
  for (int i = 0; i < NB; i++)
#pragma unroll
    for (int r = 0; r < R; r++) {
      float s = acc[i][r];
#pragma unroll
      for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
      if (lane == 0 && i < n) y[(size_t)i * M + col0 + r] = __float2half(s);
    }
}

__device__ __forceinline__ void mma16816(float *c, const unsigned *a, const unsigned *b) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
               : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// Tensor cores: a warp computes 8*C columns for all n <= 16 rows. Lane (g = lane/4, t = lane%4)
// loads 16 bytes of weight row col0+8c+g at k = kb + 8t..8t+7 and of x rows g and g+8 at the same
// k: for the two mma steps s of the 32-wide chunk, b0/a0/a1 take the halves 4s+0..1 and b1/a2/a3
// the halves 4s+2..3 (a consistent permutation of k within the chunk).
template <int C, int SPLIT>
__global__ void __launch_bounds__(128) mma_gemv(const __half *__restrict__ w, const __half *__restrict__ x,
                                                 __half *__restrict__ y, int n, int M, int K) {
  int warp = blockIdx.x * 4 + threadIdx.x / 32, lane = threadIdx.x % 32;
  int g = lane / 4, t = lane % 4;
  int colw = warp / SPLIT, part = warp % SPLIT;
  int col0 = colw * 8 * C;
  if (col0 >= M) return;
  float acc[C][4];
#pragma unroll
  for (int c = 0; c < C; c++) acc[c][0] = acc[c][1] = acc[c][2] = acc[c][3] = 0.f;
  const uint4 *w4 = reinterpret_cast<const uint4 *>(w), *x4 = reinterpret_cast<const uint4 *>(x);
  int K8 = K / 8, chunks = K / 32, per = chunks / SPLIT;
  bool r0 = g < n, r1 = g + 8 < n;
  uint4 zero = make_uint4(0, 0, 0, 0);
#pragma unroll 4
  for (int ch = part * per; ch < (part + 1) * per; ch++) {
    int kb = ch * 4 + t;
    uint4 xa = r0 ? x4[(size_t)g * K8 + kb] : zero;
    uint4 xb = r1 ? x4[(size_t)(g + 8) * K8 + kb] : zero;
    uint4 wb[C];
#pragma unroll
    for (int c = 0; c < C; c++) wb[c] = w4[(size_t)(col0 + 8 * c + g) * K8 + kb];
#pragma unroll
    for (int s = 0; s < 2; s++) {
      unsigned a[4], b[2];
      a[0] = s ? xa.z : xa.x; a[2] = s ? xa.w : xa.y;
      a[1] = s ? xb.z : xb.x; a[3] = s ? xb.w : xb.y;
#pragma unroll
      for (int c = 0; c < C; c++) {
        b[0] = s ? wb[c].z : wb[c].x; b[1] = s ? wb[c].w : wb[c].y;
        mma16816(acc[c], a, b);
      }
    }
  }
  // c0,c1: row g, cols 2t, 2t+1; c2,c3: row g+8
  if (SPLIT > 1) {
    __shared__ float red[4][C][32][4];
    int wi = threadIdx.x / 32;
#pragma unroll
    for (int c = 0; c < C; c++)
#pragma unroll
      for (int q = 0; q < 4; q++) red[wi][c][lane][q] = acc[c][q];
    __syncthreads();
    if (part != 0) return;
#pragma unroll
    for (int c = 0; c < C; c++)
#pragma unroll
      for (int q = 0; q < 4; q++)
        for (int p = 1; p < SPLIT; p++) acc[c][q] += red[wi + p][c][lane][q];
  }
#pragma unroll
  for (int c = 0; c < C; c++) {
    int col = col0 + 8 * c + 2 * t;
    if (r0) *reinterpret_cast<__half2 *>(&y[(size_t)g * M + col]) = __floats2half2_rn(acc[c][0], acc[c][1]);
    if (r1) *reinterpret_cast<__half2 *>(&y[(size_t)(g + 8) * M + col]) = __floats2half2_rn(acc[c][2], acc[c][3]);
  }
}

struct Shape { int M, K; };

int main(int argc, char **argv) {
  int reps = argc > 1 ? atoi(argv[1]) : 50;
  Shape shapes[] = {{4096, 4096}, {11008, 4096}, {4096, 11008}, {14336, 4096}, {32000, 4096}};
  int ns[] = {1, 2, 4, 8, 16};
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  printf("device %s, %d SMs, L2 %d MB\n", prop.name, prop.multiProcessorCount, prop.l2CacheSize >> 20);
  const int NCOPY = 4;  // weight copies rotated so that 32 MB shapes are not timed out of L2
  printf("| M x K | n | variant | us | GB/s | rel err |\n| --- | --- | --- | --- | --- | --- |\n");
  for (Shape sh : shapes) {
    size_t wn = (size_t)sh.M * sh.K;
    std::vector<__half> hw(wn), hx(16 * (size_t)sh.K);
    std::vector<float> fw(wn), fx(hx.size());
    srand(sh.M + sh.K);
    for (size_t i = 0; i < wn; i++) { hw[i] = __float2half((rand() / (float)RAND_MAX - 0.5f) * 0.1f); fw[i] = __half2float(hw[i]); }
    for (size_t i = 0; i < hx.size(); i++) { hx[i] = __float2half(rand() / (float)RAND_MAX - 0.5f); fx[i] = __half2float(hx[i]); }
    __half *dw[NCOPY], *dx, *dy;
    for (int c = 0; c < NCOPY; c++) { CK(cudaMalloc(&dw[c], wn * 2)); CK(cudaMemcpy(dw[c], hw.data(), wn * 2, cudaMemcpyHostToDevice)); }
    CK(cudaMalloc(&dx, hx.size() * 2)); CK(cudaMalloc(&dy, 16 * (size_t)sh.M * 2));
    CK(cudaMemcpy(dx, hx.data(), hx.size() * 2, cudaMemcpyHostToDevice));
    std::vector<double> ref(16 * (size_t)sh.M);
    for (int i = 0; i < 16; i++)
      for (int j = 0; j < sh.M; j++) {
        double s = 0;
        for (int k = 0; k < sh.K; k++) s += (double)fx[(size_t)i * sh.K + k] * fw[(size_t)j * sh.K + k];
        ref[(size_t)i * sh.M + j] = s;
      }
    for (int n : ns) {
      struct V { const char *name; int ok; };
      for (int vi = 0; vi < 9; vi++) {
        auto launch = [&](const __half *w) {
          int M = sh.M, K = sh.K;
          switch (vi) {
          case 0: if (n == 1) simt<1, 1, 4><<<(M + 7) / 8, 256>>>(w, dx, dy, n, M, K); else simt<1, 16, 4><<<(M + 7) / 8, 256>>>(w, dx, dy, n, M, K); break;
          case 1: simt<2, 16, 4><<<(M / 2 + 7) / 8, 256>>>(w, dx, dy, n, M, K); break;
          case 2: simt<4, 16, 2><<<(M / 4 + 7) / 8, 256>>>(w, dx, dy, n, M, K); break;
          case 3: simt<1, 1, 16><<<(M + 7) / 8, 256>>>(w, dx, dy, n, M, K); break;
          case 4: mma_gemv<1, 1><<<(M / 8 + 3) / 4, 128>>>(w, dx, dy, n, M, K); break;
          case 5: mma_gemv<2, 1><<<(M / 16 + 3) / 4, 128>>>(w, dx, dy, n, M, K); break;
          case 6: mma_gemv<4, 1><<<(M / 32 + 3) / 4, 128>>>(w, dx, dy, n, M, K); break;
          case 7: mma_gemv<1, 2><<<(M / 8 * 2 + 3) / 4, 128>>>(w, dx, dy, n, M, K); break;
          case 8: mma_gemv<2, 4><<<(M / 16 * 4 + 3) / 4, 128>>>(w, dx, dy, n, M, K); break;
          }
        };
        const char *names[] = {"simt_r1", "simt_r2", "simt_r4", "simt_r1_unroll16", "mma_c1", "mma_c2", "mma_c4", "mma_c1_split2", "mma_c2_split4"};
        if (vi == 3 && n != 1) continue;
        CK(cudaMemset(dy, 0xff, 16 * (size_t)sh.M * 2));  // poison (NaN)
        launch(dw[0]);
        CK(cudaGetLastError());
        CK(cudaDeviceSynchronize());
        std::vector<__half> hy((size_t)n * sh.M);
        CK(cudaMemcpy(hy.data(), dy, hy.size() * 2, cudaMemcpyDeviceToHost));
        double num = 0, den = 0;
        for (size_t i = 0; i < hy.size(); i++) { double d = __half2float(hy[i]) - ref[i]; num += d * d; den += ref[i] * ref[i]; }
        double rel = std::sqrt(num / den);
        cudaEvent_t e0, e1;
        CK(cudaEventCreate(&e0)); CK(cudaEventCreate(&e1));
        for (int r = 0; r < 5; r++) launch(dw[r % NCOPY]);
        std::vector<float> times;
        for (int trial = 0; trial < 5; trial++) {
          CK(cudaEventRecord(e0));
          for (int r = 0; r < reps; r++) launch(dw[r % NCOPY]);
          CK(cudaEventRecord(e1));
          CK(cudaEventSynchronize(e1));
          float ms; CK(cudaEventElapsedTime(&ms, e0, e1));
          times.push_back(ms * 1000 / reps);
        }
        std::sort(times.begin(), times.end());
        double us = times[2];
        double bytes = 2.0 * (wn + (double)n * sh.K + (double)n * sh.M);
        printf("| %d x %d | %d | %s | %.1f | %.0f | %s%.1e |\n", sh.M, sh.K, n, names[vi], us, bytes / us / 1e3,
               (rel < 1e-2 && rel == rel) ? "" : "BAD ", rel);
        CK(cudaEventDestroy(e0)); CK(cudaEventDestroy(e1));
      }
    }
    for (int c = 0; c < NCOPY; c++) CK(cudaFree(dw[c]));
    CK(cudaFree(dx)); CK(cudaFree(dy));
  }
  return 0;
}
