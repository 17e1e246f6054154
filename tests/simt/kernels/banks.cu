// Shared-memory access patterns with known bank conflicts (test_simt.c, t_banks): a traced launch
// of one warp must count exactly these phases, conflicts and degrees (README.md, "Shared-memory
// bank conflicts"). Each kernel has one shared store site and one shared load site.

// lane i stores and loads the 4-byte word s[i * stride]: one phase; stride 1 and 33 touch 32
// banks (degree 1), stride 2 two words a bank (degree 2), stride 32 one bank (degree 32)
extern "C" __global__ void word_stride(float *out, int stride) {
  __shared__ float s[32 * 33];
  int i = threadIdx.x;
  s[i * stride] = (float)i;
  __syncthreads();
  out[i] = s[i * stride];
}

// 2-byte lanes: lane i stores h[i] (two lanes a word, 16 words: degree 1) and every lane loads
// h[i % 2], the two halves of one word (a broadcast: degree 1)
extern "C" __global__ void same_word(float *out, int unused) {
  __shared__ unsigned short h[64];
  int i = threadIdx.x;
  h[i] = (unsigned short)(i + unused);
  __syncthreads();
  out[i] = (float)h[i % 2];
}

// 8-byte lanes: lane i stores and loads s2[i * stride], two phases of 16 lanes; stride 1: 128
// bytes a phase (degree 1), stride 2: 16 lanes 16 bytes apart (degree 2 in each phase)
extern "C" __global__ void pair_stride(float *out, int stride) {
  __shared__ float2 s2[32 * 2];
  int i = threadIdx.x;
  s2[i * stride] = make_float2((float)i, 1.0f);
  __syncthreads();
  float2 v = s2[i * stride];
  out[i] = v.x + v.y;
}

// 16-byte lanes: an 8 x 128-byte tile; lane l copies (cp.async) 16 bytes into row l % 8, chunk
// l / 8, and gives that row address to ldmatrix x4 (matrix j = lanes 8j..8j+7, one phase each).
// Plain (swizzle 0): the 8 rows of a phase sit in the same 4 banks, degree 8 in each of the 4
// phases; swizzled (chunk c of row r at c ^ r): 8 different 16-byte bank groups, degree 1.
extern "C" __global__ void rows16(const unsigned short *g, float *out, int swizzle) {
  __shared__ __align__(16) unsigned short t[8 * 64];
  int l = threadIdx.x, r = l % 8, c = l / 8;
  unsigned short *row = &t[r * 64 + 8 * (swizzle ? c ^ r : c)];
  rx_cp_async_16(row, &g[8 * l]);
  rx_cp_async_commit();
  rx_cp_async_wait_all();
  __syncthreads();
  unsigned v[4];
  rx_ldmatrix_x4(v, row);
  out[l] = (float)(v[0] + v[1] + v[2] + v[3]);
}
