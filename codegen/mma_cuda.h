/* mma_cuda.h: the CUDA matrix-unit helpers (DESIGN.md "Matrix units"), as the C text the CUDA
 * printer prepends to a kernel that uses tensor cores. Private to codegen/ (and the tests).
 *
 * Each helper is one PTX instruction in a `static __device__ __forceinline__` function, so the
 * schedules and the printer name operations, never PTX. The text is guarded by
 * `#ifndef SIMT_LANG_CUDA`: the SIMT emulator's prelude (tests/simt/simt_cuda.h) defines that
 * macro and its own definitions of the same helpers, with the same signatures, that compute what
 * the instructions compute from the fragment layouts below, so CI runs tensor-core kernels on the
 * CPU. The two definitions must change together (tests/unit/test_mma_helpers.c checks both).
 *
 * Requires sm_80 or newer (cp.async and the m16n8k16 / m16n8k32 shapes; ldmatrix is sm_75).
 *
 * Helpers (all lanes of a warp must call the warp-wide ones together, with the same arguments
 * where the PTX ISA says so; registers hold packed 16-bit or 8-bit elements, low bits first):
 *   rx_mma_16x8x16_f16f32(float d[4], const unsigned a[4], const unsigned b[2], const float c[4])
 *       mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32: D = A B + C, A 16x16, B 16x8
 *   rx_mma_16x8x16_bf16f32(...)                 the same with .bf16 inputs
 *   rx_mma_16x8x32_s8s32(int d[4], const unsigned a[4], const unsigned b[2], const int c[4])
 *       mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32: A 16x32, B 32x8 (int32 wraps; no
 *       .satfinite)
 *   rx_ldmatrix_x1/_x2/_x4(unsigned r[N], const void *smem_row_ptr)
 *   rx_ldmatrix_x1_trans/_x2_trans/_x4_trans(...)
 *       ldmatrix.sync.aligned.m8n8.xN{.trans}.shared.b16: N 8x8 matrices of 16-bit elements
 *   rx_cp_async_16(void *smem, const void *gmem)         cp.async.cg.shared.global, 16 bytes
 *   rx_cp_async_16_zfill(void *smem, const void *gmem, bool pred)
 *       the same with src-size 0 when !pred: the 16 bytes are zeros and gmem is not read
 *   rx_cp_async_commit()        cp.async.commit_group
 *   rx_cp_async_wait<N>()       cp.async.wait_group N (N an immediate: at most N groups pending)
 *   rx_cp_async_wait_all()      cp.async.wait_all
 *
 * Fragment layouts, from the PTX ISA (docs.nvidia.com/cuda/parallel-thread-execution, sections
 * "Matrix Fragments for mma.m..." and ldmatrix's, 9.7.14.5.x or 9.7.15.5.x by version). With
 * lane = %laneid, g = lane >> 2 ("groupID"), t = lane % 4 ("threadID_in_group"); element i of
 * a fragment sits in register i / (elements per register), the lower-numbered element in the
 * lower bits ("Elements (low to high)"):
 *   "Matrix Fragments for mma.m16n8k16 with floating point type", .f16/.bf16:
 *     A a0..a7 (4 regs): row = g for i in {0,1,4,5}, else g + 8;
 *                        col = 2t + (i & 1) + (i >= 4 ? 8 : 0)
 *     B b0..b3 (2 regs): row = 2t + (i & 1) + (i >= 2 ? 8 : 0); col = g
 *     C/D c0..c3 (.f32): row = g for i < 2, else g + 8; col = 2t + (i & 1)
 *   "Matrix Fragments for mma.m16n8k32", .s8:
 *     A a0..a15 (4 regs): row = g for i in 0..3 or 8..11, else g + 8;
 *                         col = 4t + (i & 3) + (i >= 8 ? 16 : 0)
 *     B b0..b7 (2 regs):  row = 4t + (i & 3) + (i >= 4 ? 16 : 0); col = g
 *     C/D c0..c3 (.s32):  as for m16n8k16
 *   "Warp-level matrix load instruction: ldmatrix", .m8n8 .b16: lanes 8j..8j+7 give the
 *     addresses of rows 0..7 of matrix j (x1: lanes 0-7, x2: 0-15, x4: all; each row 16 bytes,
 *     16-byte aligned); register j of a lane holds matrix j's row lane/4, columns 2t and 2t+1
 *     (figure "ldmatrix fragment layout for one 8x8 Matrix with 16-bit elements"); .trans loads
 *     the matrix column-major: rows 2t and 2t+1 of column lane/4.
 * Hence, for f16/bf16: ldmatrix_x4 with lane l at row l % 16, column 8 * (l / 16) of a row-major
 * 16x16 A tile gives the A fragment; ldmatrix_x2_trans with lane l at row l % 16 of a row-major
 * 16x8 (k x n) B tile, or ldmatrix_x2 with lane l at row l % 8, column 8 * (l / 8 % 2) of the
 * 8x16 (n x k) transposed tile, gives the B fragment. For .s8 (8-bit elements ride in pairs as
 * 16-bit ones): the same addresses in bytes, 16 * instead of 8 * (a 16x32 A tile; B only from
 * its 8x32 n x k tile: .trans swaps 16-bit elements, not bytes). tests/simt/kernels/mma.cu does
 * all three. */
#ifndef RX_MMA_CUDA_H
#define RX_MMA_CUDA_H

/* Prepended once to a kernel's source, after its #includes. */
static const char RX_CUDA_MMA_PRELUDE[] =
    "/* relaxc matrix-unit helpers (codegen/mma_cuda.h): tensor cores of sm_80 and newer */\n"
    "#ifndef SIMT_LANG_CUDA\n"
    "static __device__ __forceinline__ void\n"
    "rx_mma_16x8x16_f16f32(float d[4], const unsigned a[4], const unsigned b[2],\n"
    "                      const float c[4]) {\n"
    "  asm volatile(\"mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 \"\n"
    "               \"{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%10, %11, %12, %13};\"\n"
    "               : \"=f\"(d[0]), \"=f\"(d[1]), \"=f\"(d[2]), \"=f\"(d[3])\n"
    "               : \"r\"(a[0]), \"r\"(a[1]), \"r\"(a[2]), \"r\"(a[3]),\n"
    "                 \"r\"(b[0]), \"r\"(b[1]),\n"
    "                 \"f\"(c[0]), \"f\"(c[1]), \"f\"(c[2]), \"f\"(c[3]));\n"
    "}\n"
    "static __device__ __forceinline__ void\n"
    "rx_mma_16x8x16_bf16f32(float d[4], const unsigned a[4], const unsigned b[2],\n"
    "                       const float c[4]) {\n"
    "  asm volatile(\"mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 \"\n"
    "               \"{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%10, %11, %12, %13};\"\n"
    "               : \"=f\"(d[0]), \"=f\"(d[1]), \"=f\"(d[2]), \"=f\"(d[3])\n"
    "               : \"r\"(a[0]), \"r\"(a[1]), \"r\"(a[2]), \"r\"(a[3]),\n"
    "                 \"r\"(b[0]), \"r\"(b[1]),\n"
    "                 \"f\"(c[0]), \"f\"(c[1]), \"f\"(c[2]), \"f\"(c[3]));\n"
    "}\n"
    "static __device__ __forceinline__ void\n"
    "rx_mma_16x8x32_s8s32(int d[4], const unsigned a[4], const unsigned b[2], const int c[4]) {\n"
    "  asm volatile(\"mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 \"\n"
    "               \"{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%10, %11, %12, %13};\"\n"
    "               : \"=r\"(d[0]), \"=r\"(d[1]), \"=r\"(d[2]), \"=r\"(d[3])\n"
    "               : \"r\"(a[0]), \"r\"(a[1]), \"r\"(a[2]), \"r\"(a[3]),\n"
    "                 \"r\"(b[0]), \"r\"(b[1]),\n"
    "                 \"r\"(c[0]), \"r\"(c[1]), \"r\"(c[2]), \"r\"(c[3]));\n"
    "}\n"
    "/* ldmatrix reads shared memory unseen by the compiler: stores stay before it */\n"
    "static __device__ __forceinline__ void rx_ldmatrix_x1(unsigned r[1], const void *p) {\n"
    "  unsigned s = (unsigned)__cvta_generic_to_shared(p);\n"
    "  asm volatile(\"ldmatrix.sync.aligned.m8n8.x1.shared.b16 {%0}, [%1];\"\n"
    "               : \"=r\"(r[0]) : \"r\"(s) : \"memory\");\n"
    "}\n"
    "static __device__ __forceinline__ void rx_ldmatrix_x2(unsigned r[2], const void *p) {\n"
    "  unsigned s = (unsigned)__cvta_generic_to_shared(p);\n"
    "  asm volatile(\"ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];\"\n"
    "               : \"=r\"(r[0]), \"=r\"(r[1]) : \"r\"(s) : \"memory\");\n"
    "}\n"
    "static __device__ __forceinline__ void rx_ldmatrix_x4(unsigned r[4], const void *p) {\n"
    "  unsigned s = (unsigned)__cvta_generic_to_shared(p);\n"
    "  asm volatile(\"ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\"\n"
    "               : \"=r\"(r[0]), \"=r\"(r[1]), \"=r\"(r[2]), \"=r\"(r[3])\n"
    "               : \"r\"(s) : \"memory\");\n"
    "}\n"
    "static __device__ __forceinline__ void rx_ldmatrix_x1_trans(unsigned r[1], const void *p) {\n"
    "  unsigned s = (unsigned)__cvta_generic_to_shared(p);\n"
    "  asm volatile(\"ldmatrix.sync.aligned.m8n8.x1.trans.shared.b16 {%0}, [%1];\"\n"
    "               : \"=r\"(r[0]) : \"r\"(s) : \"memory\");\n"
    "}\n"
    "static __device__ __forceinline__ void rx_ldmatrix_x2_trans(unsigned r[2], const void *p) {\n"
    "  unsigned s = (unsigned)__cvta_generic_to_shared(p);\n"
    "  asm volatile(\"ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];\"\n"
    "               : \"=r\"(r[0]), \"=r\"(r[1]) : \"r\"(s) : \"memory\");\n"
    "}\n"
    "static __device__ __forceinline__ void rx_ldmatrix_x4_trans(unsigned r[4], const void *p) {\n"
    "  unsigned s = (unsigned)__cvta_generic_to_shared(p);\n"
    "  asm volatile(\"ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\"\n"
    "               : \"=r\"(r[0]), \"=r\"(r[1]), \"=r\"(r[2]), \"=r\"(r[3])\n"
    "               : \"r\"(s) : \"memory\");\n"
    "}\n"
    "/* cp.async writes shared memory unseen by the compiler until the wait */\n"
    "static __device__ __forceinline__ void rx_cp_async_16(void *smem, const void *gmem) {\n"
    "  unsigned s = (unsigned)__cvta_generic_to_shared(smem);\n"
    "  asm volatile(\"cp.async.cg.shared.global [%0], [%1], 16;\"\n"
    "               : : \"r\"(s), \"l\"(gmem) : \"memory\");\n"
    "}\n"
    "static __device__ __forceinline__ void rx_cp_async_16_zfill(void *smem, const void *gmem,\n"
    "                                                            bool pred) {\n"
    "  unsigned s = (unsigned)__cvta_generic_to_shared(smem);\n"
    "  int n = pred ? 16 : 0; /* src-size: the bytes read; the rest of the 16 are zeros */\n"
    "  asm volatile(\"cp.async.cg.shared.global [%0], [%1], 16, %2;\"\n"
    "               : : \"r\"(s), \"l\"(gmem), \"r\"(n) : \"memory\");\n"
    "}\n"
    "static __device__ __forceinline__ void rx_cp_async_commit() {\n"
    "  asm volatile(\"cp.async.commit_group;\" : : : \"memory\");\n"
    "}\n"
    "template <int N> static __device__ __forceinline__ void rx_cp_async_wait() {\n"
    "  asm volatile(\"cp.async.wait_group %0;\" : : \"n\"(N) : \"memory\");\n"
    "}\n"
    "static __device__ __forceinline__ void rx_cp_async_wait_all() {\n"
    "  asm volatile(\"cp.async.wait_all;\" : : : \"memory\");\n"
    "}\n"
    "#endif\n";

#endif
