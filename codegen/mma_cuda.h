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
 * Subgroup matrix fragments (ir/ir.h RX_STMT_FRAG; targets.c's `sync-frag` shapes: 16x16x16,
 * f16 or bf16 A and B, f32 accumulator), RX_CUDA_FRAG_PRELUDE, each fragment a struct that one
 * ALLOC declares, a 16x16 matrix spread over the 32 lanes of a warp in mma.m16n8k16's layouts:
 *   rx_frag_a16   A (m x k): the A fragment, 8 elements in 4 registers
 *   rx_frag_b16   B (k x n): two B fragments (columns 0-7, then 8-15), 4 registers
 *   rx_frag_acc   C (m x n): two C fragments (columns 0-7, then 8-15), 8 floats
 *   rx_frag_fill(f, v), rx_frag_load(f, p, stride, col_major), rx_frag_store(f, p, stride,
 *       col_major): every lane reads or writes its own elements one by one (element (r, c) at
 *       p[r * stride + c], or p[c * stride + r] column-major), so any stride and alignment do
 *   rx_frag_mma_f16(d, a, b, c), rx_frag_mma_bf16: two rx_mma_16x8x16_*f32 (d may be c)
 *   rx_lane_id()                %laneid (the emulator: the fiber's lane)
 * In that prelude only rx_lane_id is behind `#ifndef SIMT_LANG_CUDA` (simt_cuda.h defines its
 * own): the fragment helpers are written once, in terms of rx_lane_id and rx_mma_16x8x16_*, and
 * the emulator runs them as NVRTC compiles them.
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

/* Warpgroup MMA (ir/ir.h RX_STMT_WGMMA; sm_90a), RX_CUDA_WGMMA_PRELUDE and, per shape and dtype
 * a kernel uses, a helper that codegen/cuda.c writes (cuda_wgmma_helper):
 *   rx_wgmma_m64nNk16_f16f32(float d[N / 2], const void *a, const void *b), _bf16f32
 *       wgmma.mma_async.sync.aligned.m64nNk16.f32.f16.f16 (.bf16.bf16): D += A B^T with A
 *       64 x 16 at a, B N x 16 at b, both K-major in shared memory in the 128-byte swizzle
 *       (ir.h), scale-d 1 (accumulate), imm-scale-a/b 1, imm-trans-a/b 0 (K-major)
 *   rx_wgmma_desc(const void *smem)  the matrix descriptor of an operand at smem
 *   rx_wgmma_fence()     fence.proxy.async.shared::cta, then wgmma.fence.sync.aligned
 *   rx_wgmma_commit()    wgmma.commit_group.sync.aligned
 *   rx_wgmma_wait<N>()   wgmma.wait_group.sync.aligned N
 *   rx_wgmma_hold(float &x)  an empty asm that reads and writes x: after the wait, the compiler
 *       may not move a use of the accumulator above it (the asm of the mma wrote it already)
 * From the PTX ISA (docs.nvidia.com/cuda/parallel-thread-execution, "Asynchronous Warpgroup
 * Level Matrix Multiply-Accumulate Instructions", 9.7.15 in ISA 8.x):
 *   "Matrix Descriptor Format": a 64-bit value; bits 0-13: the start address, (addr & 0x3FFFF)
 *     >> 4; bits 16-29: the leading dimension byte offset >> 4; bits 32-45: the stride dimension
 *     byte offset >> 4; bits 49-51: the base offset (0: the operand's swizzle atoms start at
 *     1024-byte boundaries); bits 62-63: the swizzle mode (0 none, 1 128-byte, 2 64-byte, 3
 *     32-byte).
 *   "Shared Memory Matrix Layout": K-major with the 128-byte swizzle, an operand is made of 8-row
 *     groups of rows of 128 bytes (64 16-bit elements along K), one group a 1024-byte atom; the
 *     stride dimension byte offset is the distance between two groups (1024 here: the rows are
 *     dense), the leading dimension offset is unused (set to 1); the start address of the k-th
 *     16-element step of a row is the row's address plus 32 k bytes. The swizzle permutes the
 *     16-byte chunks of each row: address bits 4-6 xor'ed with bits 7-9, so chunk q of row r of
 *     an atom sits at chunk q xor (r % 8).
 *   "Register Fragments": D of .m64nNk16 .f32 (ir.h has it): thread l of the warpgroup,
 *     w = l / 32, g = l % 32 / 4, t = l % 4: d[i] = D[16 w + g + 8 (i / 2 % 2)][8 (i / 4) + 2 t +
 *     i % 2].
 *   wgmma.fence before the first wgmma and after other accesses of its registers;
 *   fence.proxy.async ("Memory Consistency Model", async proxy) so that the shared stores of the
 *     generic proxy (st.shared, cp.async) are seen by wgmma's reads, which use the async proxy.
 * tests/simt/simt_cuda.h emulates these helpers from the same text: it decodes the descriptor. */
static const char RX_CUDA_WGMMA_PRELUDE[] =
    "/* relaxc warpgroup matrix-unit helpers (codegen/mma_cuda.h): wgmma of sm_90a */\n"
    "#ifndef SIMT_LANG_CUDA\n"
    "static __device__ __forceinline__ unsigned long long rx_wgmma_desc(const void *p) {\n"
    "  unsigned s = (unsigned)__cvta_generic_to_shared(p);\n"
    "  return (unsigned long long)((s & 0x3FFFFu) >> 4) /* start address */\n"
    "         | 1ull << 16                               /* leading byte offset: unused */\n"
    "         | (unsigned long long)(1024 >> 4) << 32    /* stride byte offset: 8 rows */\n"
    "         | 1ull << 62;                              /* swizzle mode 1: 128 bytes */\n"
    "}\n"
    "static __device__ __forceinline__ void rx_wgmma_fence() {\n"
    "  asm volatile(\"fence.proxy.async.shared::cta;\\n\\twgmma.fence.sync.aligned;\" : : : "
    "\"memory\");\n"
    "}\n"
    "static __device__ __forceinline__ void rx_wgmma_commit() {\n"
    "  asm volatile(\"wgmma.commit_group.sync.aligned;\" : : : \"memory\");\n"
    "}\n"
    "template <int N> static __device__ __forceinline__ void rx_wgmma_wait() {\n"
    "  asm volatile(\"wgmma.wait_group.sync.aligned %0;\" : : \"n\"(N) : \"memory\");\n"
    "}\n"
    "static __device__ __forceinline__ void rx_wgmma_hold(float &x) {\n"
    "  asm volatile(\"\" : \"+f\"(x) : : \"memory\");\n"
    "}\n"
    "#endif\n";

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

/* Prepended once to a kernel that uses subgroup matrix fragments (ir/ir.h, RX_STMT_FRAG), after
 * RX_CUDA_MMA_PRELUDE, whose mma helpers it calls. Outside the SIMT_LANG_CUDA guard but for
 * rx_lane_id, which the emulator defines too: the emulator runs these helpers as written, on its
 * own mma.sync. */
static const char RX_CUDA_FRAG_PRELUDE[] =
    "/* relaxc subgroup matrix fragments (codegen/mma_cuda.h): 16x16x16 on mma.sync */\n"
    "#ifndef SIMT_LANG_CUDA\n"
    "static __device__ __forceinline__ unsigned rx_lane_id() {\n"
    "  unsigned l;\n"
    "  asm(\"mov.u32 %0, %%laneid;\" : \"=r\"(l));\n"
    "  return l;\n"
    "}\n"
    "#endif\n"
    "struct rx_frag_a16 { /* A (m x k), f16 or bf16: mma.m16n8k16's A fragment */\n"
    "  unsigned r[4];\n"
    "};\n"
    "struct rx_frag_b16 { /* B (k x n), f16 or bf16: r[0..1] columns 0-7, r[2..3] 8-15 */\n"
    "  unsigned r[4];\n"
    "};\n"
    "struct rx_frag_acc { /* C (m x n), f32: x[0..3] columns 0-7, x[4..7] 8-15 */\n"
    "  float x[8];\n"
    "};\n"
    "/* The offset of element i (0..7) of lane l's part of a 16x16 fragment in memory of\n"
    " * stride s: B's layout when b, else A's (the accumulator's too); element (r, c) at\n"
    " * r * s + c, or c * s + r column-major (cm). */\n"
    "template <class S>\n"
    "static __device__ __forceinline__ S rx_frag_off(bool b, int l, int i, S s, bool cm) {\n"
    "  int g = l >> 2, t = l & 3;\n"
    "  int r = b ? 2 * t + (i & 1) + 8 * ((i >> 1) & 1) : g + 8 * ((i >> 1) & 1);\n"
    "  int c = b ? g + 8 * (i >> 2) : 2 * t + (i & 1) + 8 * (i >> 2);\n"
    "  return cm ? (S)c * s + r : (S)r * s + c;\n"
    "}\n"
    "/* frag load / store f, p[0], s [, col_major]; 16-bit elements as their bits, two to a\n"
    " * register, the lower-numbered in the low half */\n"
    "template <class T, class S>\n"
    "static __device__ __forceinline__ void rx_frag_ld16(bool b, unsigned f[4], const T *p,\n"
    "                                                    S s, bool cm) {\n"
    "  int l = (int)rx_lane_id();\n"
    "#pragma unroll\n"
    "  for (int i = 0; i < 8; i++) {\n"
    "    unsigned h = *(const unsigned short *)&p[rx_frag_off(b, l, i, s, cm)];\n"
    "    f[i / 2] = i % 2 ? f[i / 2] | (h << 16) : h;\n"
    "  }\n"
    "}\n"
    "template <class T, class S>\n"
    "static __device__ __forceinline__ void rx_frag_st16(bool b, const unsigned f[4], T *p,\n"
    "                                                    S s, bool cm) {\n"
    "  int l = (int)rx_lane_id();\n"
    "#pragma unroll\n"
    "  for (int i = 0; i < 8; i++)\n"
    "    *(unsigned short *)&p[rx_frag_off(b, l, i, s, cm)] =\n"
    "        (f[i / 2] >> 16 * (i % 2)) & 0xffff;\n"
    "}\n"
    "template <class T, class S>\n"
    "static __device__ __forceinline__ void rx_frag_load(rx_frag_a16 &f, const T *p, S s,\n"
    "                                                    bool cm) {\n"
    "  rx_frag_ld16(false, f.r, p, s, cm);\n"
    "}\n"
    "template <class T, class S>\n"
    "static __device__ __forceinline__ void rx_frag_load(rx_frag_b16 &f, const T *p, S s,\n"
    "                                                    bool cm) {\n"
    "  rx_frag_ld16(true, f.r, p, s, cm);\n"
    "}\n"
    "template <class S>\n"
    "static __device__ __forceinline__ void rx_frag_load(rx_frag_acc &f, const float *p, S s,\n"
    "                                                    bool cm) {\n"
    "  int l = (int)rx_lane_id();\n"
    "#pragma unroll\n"
    "  for (int i = 0; i < 8; i++) f.x[i] = p[rx_frag_off(false, l, i, s, cm)];\n"
    "}\n"
    "template <class T, class S>\n"
    "static __device__ __forceinline__ void rx_frag_store(const rx_frag_a16 &f, T *p, S s,\n"
    "                                                     bool cm) {\n"
    "  rx_frag_st16(false, f.r, p, s, cm);\n"
    "}\n"
    "template <class T, class S>\n"
    "static __device__ __forceinline__ void rx_frag_store(const rx_frag_b16 &f, T *p, S s,\n"
    "                                                     bool cm) {\n"
    "  rx_frag_st16(true, f.r, p, s, cm);\n"
    "}\n"
    "template <class S>\n"
    "static __device__ __forceinline__ void rx_frag_store(const rx_frag_acc &f, float *p, S s,\n"
    "                                                     bool cm) {\n"
    "  int l = (int)rx_lane_id();\n"
    "#pragma unroll\n"
    "  for (int i = 0; i < 8; i++) p[rx_frag_off(false, l, i, s, cm)] = f.x[i];\n"
    "}\n"
    "/* frag fill f, v */\n"
    "template <class T>\n"
    "static __device__ __forceinline__ void rx_frag_fill16(unsigned f[4], T v) {\n"
    "  unsigned h = *(const unsigned short *)&v;\n"
    "#pragma unroll\n"
    "  for (int j = 0; j < 4; j++) f[j] = h | (h << 16);\n"
    "}\n"
    "template <class T>\n"
    "static __device__ __forceinline__ void rx_frag_fill(rx_frag_a16 &f, T v) {\n"
    "  rx_frag_fill16(f.r, v);\n"
    "}\n"
    "template <class T>\n"
    "static __device__ __forceinline__ void rx_frag_fill(rx_frag_b16 &f, T v) {\n"
    "  rx_frag_fill16(f.r, v);\n"
    "}\n"
    "static __device__ __forceinline__ void rx_frag_fill(rx_frag_acc &f, float v) {\n"
    "#pragma unroll\n"
    "  for (int i = 0; i < 8; i++) f.x[i] = v;\n"
    "}\n"
    "/* frag mma d, a, b, c: D = A B + C, two m16n8k16 (columns 0-7, 8-15); d may be c */\n"
    "static __device__ __forceinline__ void rx_frag_mma_f16(rx_frag_acc &d,\n"
    "                                                       const rx_frag_a16 &a,\n"
    "                                                       const rx_frag_b16 &b,\n"
    "                                                       const rx_frag_acc &c) {\n"
    "  rx_mma_16x8x16_f16f32(d.x, a.r, b.r, c.x);\n"
    "  rx_mma_16x8x16_f16f32(d.x + 4, a.r, b.r + 2, c.x + 4);\n"
    "}\n"
    "static __device__ __forceinline__ void rx_frag_mma_bf16(rx_frag_acc &d,\n"
    "                                                        const rx_frag_a16 &a,\n"
    "                                                        const rx_frag_b16 &b,\n"
    "                                                        const rx_frag_acc &c) {\n"
    "  rx_mma_16x8x16_bf16f32(d.x, a.r, b.r, c.x);\n"
    "  rx_mma_16x8x16_bf16f32(d.x + 4, a.r, b.r + 2, c.x + 4);\n"
    "}\n";

#endif
