/* targets/occupancy.h: the occupancy each matrix-unit kernel's schedule assumes, as blocks that
 * run at once on one SM of sm_80 and sm_90, in one place: the matmul schedules name these
 * constants in their comments (the attention forms of ops/attention.c are listed here), and
 * tests/unit/test_ptx_mma.c checks them against what ptxas reports (registers per thread x threads
 * per block within 65,536 registers per SM, at most 255 a thread; the static shared bytes within
 * 164 KiB per SM on sm_80 and 228 KiB on sm_90: CUDA C++ Programming Guide, "Compute Capabilities",
 * table "Technical Specifications per Compute Capability", and the guide's note that 1 KiB per
 * block is reserved by the system). A kernel that needs more registers or shared memory than these
 * allow fails that test: the schedule's tiles or the assumption must change together, here.
 *
 * Blocks a warp-count and register count allow: tgt_blocks_per_sm below, over the limits of each
 * compute capability (TGT_SM_LIMITS).
 *
 * Why each value: a block of these kernels is a handful of warps, and an SM hides the latency of
 * global loads and of mma.sync with other blocks' warps; two blocks overlap one block's
 * pipeline fill or epilogue with another's main loop. */
#ifndef RX_TARGETS_OCCUPANCY_H
#define RX_TARGETS_OCCUPANCY_H

/* passes/schedule/gemm_mma.c, 128 x 128 tiles (gemm_mma, gemm_mma_dq; 8 warps, 48 KiB of stages,
 * 64 accumulators a lane; gemm_mma_dq below): 2 blocks, 16 warps, 96 KiB of stages. The schedule
 * asks the printer for them (__launch_bounds__(256, 2): at most 128 registers a thread), which
 * ptxas meets without spills on sm_80 and sm_90 with the chunk loop kept rolled (122 to 128
 * registers; 132 to 144 with (256, 1)). Its GM_WAVE heuristic still counts a wave as one block per
 * SM (conservative). */
#define TGT_OCC_GEMM_MMA 2
/* gemm_mma_dq at 128 x 128: 1 block. Its dequantizing stage keeps a lane's packed bytes and its
 * row's scales in registers across chunks (passes/schedule/gemm_mma.c, stage_dq), 4 to 6 more
 * than gemm_mma: at __launch_bounds__(256, 2) ptxas spilled 8 bytes at 128 registers (q4f16_g32,
 * sm_80 and sm_90); with (256, 1) it takes what it needs. */
#define TGT_OCC_GEMM_MMA_DQ 1
/* the same with 64 x 64 tiles (gemm_mma_64, gemm_mma_dq_64; 4 warps, 24 KiB): 4 blocks, 16 warps
 * (__launch_bounds__(128, 4): at most 128 registers a thread) */
#define TGT_OCC_GEMM_MMA_64 4
/* gemm_mma_dq_64 on a checkpoint's int32 words (AWQ, GPTQ: stage_dq's word form): 3 blocks (at
 * most 168 registers a thread). GPTQ's stage looks up each k's group (g_idx) for its scale and
 * zero: at (128, 4) ptxas spilled 12 bytes at 128 registers (gptq, sm_80); AWQ needs about 100. */
#define TGT_OCC_GEMM_MMA_DQW_64 3
/* passes/schedule/gemv_mma.c (4 warps splitting k; a few KiB to add their partial tiles): 4 */
#define TGT_OCC_GEMV_MMA 4
/* passes/schedule/gemm_wgmma.c, 128 x 128 x 64 tiles (2 warpgroups, 96 KiB of dynamic shared
 * stages, 64 accumulators a thread): 1 block, 8 warps (a second would need 192 KiB and at most
 * 128 registers a thread) */
#define TGT_OCC_GEMM_WGMMA 1
/* ops/attention_fa2.c, paged_attention's FlashAttention-2 form on CUDA (4 warps of 16 query rows,
 * Q and O in registers, 3 stages of K/V pages; 43.5 KiB at D = 128): 2 (ptxas gives 164 to 174
 * registers at D = 128: 2 or 3 blocks) */
#define TGT_OCC_ATTN_FA2 2
/* ops/attention_fa3.c, paged_attention's wgmma form on sm_90 (2 warpgroups of 64 query rows, Q
 * and the K/V stages in dynamic shared memory: 70 KiB at D = 64, 102 KiB at D = 128; S, P and O
 * in registers): 1 (ptxas gives about 170 registers at D = 128: a second block of 256 threads
 * would need at most 128) */
#define TGT_OCC_ATTN_FA3 1
/* ops/attention.c, paged_decode_attention (one block per head and chunk of the cache): 4 */
#define TGT_OCC_DECODE_ATTN 4

/* What one SM holds, per compute capability (the guide's table, above; the register allocation
 * unit of 256 registers per warp is the CUDA Occupancy Calculator's for 8.x and 9.x). */
typedef struct tgt_sm_limits {
  int sm;              /* 80, 90 */
  int regs;            /* 32-bit registers per SM */
  int regs_per_thread; /* at most, per thread */
  int reg_unit;        /* registers are allocated per warp in units of this many */
  int shared;          /* shared memory per SM, bytes */
  int shared_reserved; /* bytes of it reserved per block by the system */
  int blocks, warps;   /* resident blocks and warps per SM at most */
} tgt_sm_limits;

static const tgt_sm_limits TGT_SM_LIMITS[] = {
    {80, 65536, 255, 256, 164 * 1024, 1024, 32, 64},
    {90, 65536, 255, 256, 228 * 1024, 1024, 32, 64},
};

/* The limits of compute capability sm (80 for sm_80 ...): the nearest listed one at or below
 * it, NULL below sm_80. */
static inline const tgt_sm_limits *tgt_sm_limits_of(int sm) {
  const tgt_sm_limits *best = 0;
  for (unsigned i = 0; i < sizeof TGT_SM_LIMITS / sizeof TGT_SM_LIMITS[0]; i++)
    if (TGT_SM_LIMITS[i].sm <= sm && (!best || TGT_SM_LIMITS[i].sm > best->sm))
      best = &TGT_SM_LIMITS[i];
  return best;
}

/* Blocks of `threads` threads using `regs` registers a thread and `shared` bytes of shared memory
 * that one SM of l runs at once (0: not even one: too many registers or too much memory). */
static inline int tgt_blocks_per_sm(const tgt_sm_limits *l, int regs, int threads, int shared) {
  int warps = (threads + 31) / 32;
  int warp_regs = (regs * 32 + l->reg_unit - 1) / l->reg_unit * l->reg_unit;
  if (regs > l->regs_per_thread || warps == 0) return 0;
  int by_regs = warp_regs ? l->regs / (warp_regs * warps) : l->blocks;
  int by_shared = l->shared / (shared + l->shared_reserved);
  int by_warps = l->warps / warps, n = l->blocks;
  if (by_regs < n) n = by_regs;
  if (by_shared < n) n = by_shared;
  if (by_warps < n) n = by_warps;
  return n;
}

#endif
