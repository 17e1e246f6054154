/* targets/occupancy.h: the occupancy each matrix-unit kernel's schedule assumes, as blocks that
 * run at once on one SM of sm_80 and sm_90, in one place: the schedules name these constants in
 * their comments, and tests/unit/test_ptx_mma.c checks them against what ptxas reports (registers
 * per thread x threads per block within 65,536 registers per SM, at most 255 a thread; the static
 * shared bytes within 164 KiB per SM on sm_80 and 228 KiB on sm_90: CUDA C++ Programming Guide,
 * "Compute Capabilities", table "Technical Specifications per Compute Capability", and the guide's
 * note that 1 KiB per block is reserved by the system). A kernel that needs more registers or
 * shared memory than these allow fails that test: the schedule's tiles or the assumption must
 * change together, here.
 *
 * Why each value: a block of these kernels is a handful of warps, and an SM hides the latency of
 * global loads and of mma.sync with other blocks' warps; two blocks overlap one block's
 * pipeline fill or epilogue with another's main loop. */
#ifndef RX_TARGETS_OCCUPANCY_H
#define RX_TARGETS_OCCUPANCY_H

/* passes/schedule/gemm_mma.c, 128 x 128 tiles (8 warps, 48 KiB of stages): 2 blocks, 16 warps */
#define TGT_OCC_GEMM_MMA 2
/* the same with 64 x 64 tiles (4 warps, 24 KiB; gemm_mma_64 and gemm_mma_dq's small variant) and
 * gemm_mma_dq: 4 blocks, 16 warps */
#define TGT_OCC_GEMM_MMA_64 4
/* passes/schedule/gemv_mma.c (4 warps splitting k; a few KiB to add their partial tiles): 4 */
#define TGT_OCC_GEMV_MMA 4
/* ops/attention.c, paged_attention's fragment form (4 subgroups, Q, K/V, S and P tiles in shared
 * memory): 2 */
#define TGT_OCC_ATTN_FRAG 2
/* ops/attention.c, paged_decode_attention (one block per head and chunk of the cache): 4 */
#define TGT_OCC_DECODE_ATTN 4

#endif
