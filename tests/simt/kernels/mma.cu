// Kernels of tests/unit/test_mma_helpers.c: the matrix-unit helpers of codegen/mma_cuda.h
// (rx_mma_*, rx_ldmatrix_*, rx_cp_async_*), which the test prepends, with cuda_fp16.h and
// cuda_bf16.h, before compiling this file for the SIMT emulator and with NVRTC.
//
// The fragments that reach the mma helpers come only from ldmatrix on row-major shared tiles;
// the layout of C and D (the accumulators) is written here from the PTX ISA, independently of
// the emulator ("Matrix Fragments for mma.m16n8k16 with floating point type", accumulators):
//   row = groupID (+ 8 for c2, c3), col = 2 * threadID_in_group + (i & 1),
//   groupID = lane >> 2, threadID_in_group = lane % 4.
#define ACC_ROW(lane, i) (((lane) >> 2) + 8 * ((i) >> 1))
#define ACC_COL(lane, i) (2 * ((lane) % 4) + ((i) & 1))

// ldmatrix on its own: a 32 x 8 tile of 16-bit values; lane l gives the address of row
// perm(l) = (5 l + 3) % 32, so matrix j is made of rows perm(8j .. 8j + 7). Every variant writes
// its registers to out[(variant * 32 + lane) * 4 + j].
extern "C" __global__ void ldsm_check(const unsigned short *tile, unsigned *out) {
  __shared__ __align__(16) unsigned short s[32 * 8];
  int lane = threadIdx.x;
  rx_cp_async_16(&s[lane * 8], &tile[lane * 8]);
  rx_cp_async_commit();
  rx_cp_async_wait<0>();
  __syncthreads();
  const unsigned short *row = &s[((5 * lane + 3) % 32) * 8];
  unsigned r[4];
  rx_ldmatrix_x1(r, row);
  out[(0 * 32 + lane) * 4] = r[0];
  rx_ldmatrix_x2(r, row);
  for (int j = 0; j < 2; j++) out[(1 * 32 + lane) * 4 + j] = r[j];
  rx_ldmatrix_x4(r, row);
  for (int j = 0; j < 4; j++) out[(2 * 32 + lane) * 4 + j] = r[j];
  rx_ldmatrix_x1_trans(r, row);
  out[(3 * 32 + lane) * 4] = r[0];
  rx_ldmatrix_x2_trans(r, row);
  for (int j = 0; j < 2; j++) out[(4 * 32 + lane) * 4 + j] = r[j];
  rx_ldmatrix_x4_trans(r, row);
  for (int j = 0; j < 4; j++) out[(5 * 32 + lane) * 4 + j] = r[j];
}

// D = A B + C for one 16x8 tile, f16: A 16x16 row-major (rows >= m read as zeros: zfill),
// B 16x8 row-major (k x n), C and D 16x8 row-major f32. One warp.
extern "C" __global__ void mma_f16_tile(const __half *A, const __half *B, const float *C,
                                        float *D, int m) {
  __shared__ __align__(16) __half sA[16 * 16];
  __shared__ __align__(16) __half sB[16 * 8];
  int lane = threadIdx.x;
  int arow = lane / 2, acol = lane % 2 * 8; // 32 chunks of 16 bytes: 2 per row of A
  bool in = arow < m;
  rx_cp_async_16_zfill(&sA[arow * 16 + acol], in ? &A[arow * 16 + acol] : A, in);
  if (lane < 16) rx_cp_async_16(&sB[lane * 8], &B[lane * 8]); // one chunk per row of B
  rx_cp_async_commit();
  rx_cp_async_wait_all();
  __syncthreads();
  unsigned a[4], b[2];
  // A: matrices (rows 0-7, k 0-7), (rows 8-15, k 0-7), (rows 0-7, k 8-15), (rows 8-15, k 8-15)
  rx_ldmatrix_x4(a, &sA[(lane % 16) * 16 + (lane / 16) * 8]);
  // B: k rows 0-7 and 8-15, read column-major (lanes 16-31 give addresses that are not used)
  rx_ldmatrix_x2_trans(b, &sB[(lane % 16) * 8]);
  float c[4], d[4];
  for (int i = 0; i < 4; i++) c[i] = C[ACC_ROW(lane, i) * 8 + ACC_COL(lane, i)];
  rx_mma_16x8x16_f16f32(d, a, b, c);
  for (int i = 0; i < 4; i++) D[ACC_ROW(lane, i) * 8 + ACC_COL(lane, i)] = d[i];
}

// The same with bf16, B given transposed (Bt: 8x16, n x k, row-major) and read row-major.
extern "C" __global__ void mma_bf16_tile(const __nv_bfloat16 *A, const __nv_bfloat16 *Bt,
                                         const float *C, float *D) {
  __shared__ __align__(16) __nv_bfloat16 sA[16 * 16];
  __shared__ __align__(16) __nv_bfloat16 sBt[8 * 16];
  int lane = threadIdx.x;
  rx_cp_async_16(&sA[lane * 8], &A[lane * 8]);
  if (lane < 16) rx_cp_async_16(&sBt[lane * 8], &Bt[lane * 8]);
  rx_cp_async_commit();
  rx_cp_async_wait<0>();
  __syncthreads();
  unsigned a[4], b[2];
  rx_ldmatrix_x4(a, &sA[(lane % 16) * 16 + (lane / 16) * 8]);
  // B: matrices (n 0-7, k 0-7) and (n 0-7, k 8-15) of Bt
  rx_ldmatrix_x2(b, &sBt[(lane % 8) * 16 + (lane / 8 % 2) * 8]);
  float c[4], d[4];
  for (int i = 0; i < 4; i++) c[i] = C[ACC_ROW(lane, i) * 8 + ACC_COL(lane, i)];
  rx_mma_16x8x16_bf16f32(d, a, b, c);
  for (int i = 0; i < 4; i++) D[ACC_ROW(lane, i) * 8 + ACC_COL(lane, i)] = d[i];
}

// m16n8k32 s8: A 16x32 row-major, Bt 8x32 (n x k) row-major, C and D 16x8 int32. ldmatrix moves
// 16-bit elements, so a row of 8 of them is 16 s8 values.
extern "C" __global__ void mma_s8_tile(const signed char *A, const signed char *Bt, const int *C,
                                       int *D) {
  __shared__ __align__(16) signed char sA[16 * 32];
  __shared__ __align__(16) signed char sBt[8 * 32];
  int lane = threadIdx.x;
  rx_cp_async_16(&sA[lane * 16], &A[lane * 16]);
  if (lane < 16) rx_cp_async_16(&sBt[lane * 16], &Bt[lane * 16]);
  rx_cp_async_commit();
  rx_cp_async_wait<0>();
  __syncthreads();
  unsigned a[4], b[2];
  rx_ldmatrix_x4(a, &sA[(lane % 16) * 32 + (lane / 16) * 16]);
  rx_ldmatrix_x2(b, &sBt[(lane % 8) * 32 + (lane / 8 % 2) * 16]);
  int c[4], d[4];
  for (int i = 0; i < 4; i++) c[i] = C[ACC_ROW(lane, i) * 8 + ACC_COL(lane, i)];
  rx_mma_16x8x32_s8s32(d, a, b, c);
  for (int i = 0; i < 4; i++) D[ACC_ROW(lane, i) * 8 + ACC_COL(lane, i)] = d[i];
}

// A small f16 GEMM, D = A B + C (A M x K, B K x N row-major, C and D M x N f32): a block of
// 4 warps computes 64 x 32 of D, each warp 16 rows x 4 n-tiles of 8; K goes in stages of 32 held
// in a double buffer filled by cp.async one stage ahead. M % 64 == N % 32 == K % 32 == 0.
#define GM_BM      64
#define GM_BN      32
#define GM_BK      32
#define GM_THREADS 128

static __device__ __forceinline__ void gemm_stage(__half *sa, __half *sb, const __half *A,
                                                  const __half *B, int m0, int n0, int k0,
                                                  int N, int K, int tid) {
  for (int c = tid; c < GM_BM * GM_BK / 8; c += GM_THREADS) { // 4 chunks of 8 per row of A
    int row = c / (GM_BK / 8), col = c % (GM_BK / 8) * 8;
    rx_cp_async_16(&sa[row * GM_BK + col], &A[(m0 + row) * K + k0 + col]);
  }
  int row = tid / (GM_BN / 8), col = tid % (GM_BN / 8) * 8; // 32 rows x 4 chunks of B
  rx_cp_async_16(&sb[row * GM_BN + col], &B[(k0 + row) * N + n0 + col]);
}

extern "C" __global__ void __launch_bounds__(GM_THREADS)
    gemm_f16(const __half *A, const __half *B, const float *C, float *D, int M, int N, int K) {
  __shared__ __align__(16) __half sA[2][GM_BM * GM_BK];
  __shared__ __align__(16) __half sB[2][GM_BK * GM_BN];
  int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  int m0 = blockIdx.y * GM_BM, n0 = blockIdx.x * GM_BN, wm = m0 + warp * 16;
  (void)M;
  float acc[4][4]; // [n-tile][c_i]
  for (int j = 0; j < 4; j++)
    for (int i = 0; i < 4; i++)
      acc[j][i] = C[(wm + ACC_ROW(lane, i)) * N + n0 + 8 * j + ACC_COL(lane, i)];
  int stages = K / GM_BK;
  gemm_stage(sA[0], sB[0], A, B, m0, n0, 0, N, K, tid);
  rx_cp_async_commit();
  for (int s = 0; s < stages; s++) {
    if (s + 1 < stages)
      gemm_stage(sA[(s + 1) % 2], sB[(s + 1) % 2], A, B, m0, n0, (s + 1) * GM_BK, N, K, tid);
    rx_cp_async_commit(); // possibly empty: the wait below always leaves one group in flight
    rx_cp_async_wait<1>(); // stage s has landed
    __syncthreads();
    const __half *sa = sA[s % 2], *sb = sB[s % 2];
    for (int kk = 0; kk < GM_BK; kk += 16) {
      unsigned a[4];
      rx_ldmatrix_x4(a, &sa[(warp * 16 + lane % 16) * GM_BK + kk + (lane / 16) * 8]);
      for (int j = 0; j < 4; j += 2) {
        // B for n-tiles j and j + 1: (k 0-7, n-tile j), (k 8-15, j), (k 0-7, j+1), (k 8-15, j+1)
        unsigned b[4];
        rx_ldmatrix_x4_trans(b, &sb[(kk + lane % 16) * GM_BN + 8 * j + (lane / 16) * 8]);
        rx_mma_16x8x16_f16f32(acc[j], a, b, acc[j]);
        rx_mma_16x8x16_f16f32(acc[j + 1], a, b + 2, acc[j + 1]);
      }
    }
    __syncthreads(); // before the next stage overwrites this buffer
  }
  for (int j = 0; j < 4; j++)
    for (int i = 0; i < 4; i++)
      D[(wm + ACC_ROW(lane, i)) * N + n0 + 8 * j + ACC_COL(lane, i)] = acc[j][i];
}

// The fragment helpers (RX_CUDA_FRAG_PRELUDE), which the emulator runs as written on its own
// mma.sync: the lane id of every thread of a block of two warps; D = A B + C on 16x16x16 f16
// fragments with A row-major, B column-major (Bt, n x k), C loaded into the accumulator and D
// stored column-major (Dt, n x m); bf16 with B row-major, the accumulator filled with c and D
// stored row-major. Strides of 16; test_mma_helpers checks D against the product.
extern "C" __global__ void frag_lanes(unsigned *out) { out[threadIdx.x] = rx_lane_id(); }
extern "C" __global__ void frag_f16_tile(const __half *A, const __half *Bt, const float *C,
                                         float *Dt) {
  rx_frag_a16 a;
  rx_frag_b16 b;
  rx_frag_acc d;
  rx_frag_load(a, A, 16, false);
  rx_frag_load(b, Bt, 16, true);
  rx_frag_load(d, C, 16, false);
  rx_frag_mma_f16(d, a, b, d);
  rx_frag_store(d, Dt, 16, true);
}
extern "C" __global__ void frag_bf16_tile(const __nv_bfloat16 *A, const __nv_bfloat16 *B, float c,
                                          float *D) {
  rx_frag_a16 a;
  rx_frag_b16 b;
  rx_frag_acc acc, d;
  rx_frag_load(a, A, 16, false);
  rx_frag_load(b, B, 16, false);
  rx_frag_fill(acc, c);
  rx_frag_mma_bf16(d, a, b, acc);
  rx_frag_store(d, D, 16, false);
}

// Misuse the emulator must report, as the GPU leaves it undefined: an mma in a block of 16
// threads (a partial warp), an ldmatrix row address that is not 16-byte aligned, an mma after
// some lanes of the warp have exited, and two helpers called by the lanes of one warp on one line.
extern "C" __global__ void bad_partial_warp(float *D) {
  unsigned a[4] = {0, 0, 0, 0}, b[2] = {0, 0};
  float c[4] = {0, 0, 0, 0}, d[4];
  rx_mma_16x8x16_f16f32(d, a, b, c);
  D[threadIdx.x] = d[0];
}
extern "C" __global__ void bad_ldsm_align(unsigned *out) {
  __shared__ __align__(16) unsigned short s[33 * 8];
  for (int i = threadIdx.x; i < 33 * 8; i += 32) s[i] = (unsigned short)i;
  __syncthreads();
  unsigned r[4];
  rx_ldmatrix_x4(r, &s[threadIdx.x * 8 + (threadIdx.x == 5)]); // lane 5: 2 bytes off
  out[threadIdx.x] = r[0];
}
extern "C" __global__ void bad_exited_lanes(float *D) {
  if (threadIdx.x >= 8) return;
  unsigned a[4] = {0, 0, 0, 0}, b[2] = {0, 0};
  float c[4] = {0, 0, 0, 0}, d[4];
  rx_mma_16x8x16_f16f32(d, a, b, c);
  D[threadIdx.x] = d[0];
}
extern "C" __global__ void bad_mixed_ops(float *D) {
  unsigned a[4] = {0, 0, 0, 0}, b[2] = {0, 0};
  float c[4] = {0, 0, 0, 0}, d[4];
  if (threadIdx.x < 16) rx_mma_16x8x16_f16f32(d, a, b, c); else rx_mma_16x8x16_bf16f32(d, a, b, c);
  D[threadIdx.x] = d[0];
}
