/* passes/schedule/matmul.h: what the files of the matmul rule share (internal to
 * passes/schedule/): the matched form (matmul_match.c), the epilogue and grid builders, and one
 * schedule per kernel shape, which matmul.c picks per row count and layout:
 *
 *   gemv_rows   gemv.c    a subgroup (or the block) per output column, its lanes along k with
 *                         8-lane vector loads: Q contiguous along k (x @ W^T, Hugging Face's
 *                         [out, in] weights); up to SMALL_ROWS rows of P per block, so each
 *                         weight element is read once for all of them; packed (quantized)
 *                         weight bytes staged 16 at a time (gemv_packed.c); with subgroups
 *                         narrower than 32 (lavapipe) a thread per group, any row count, in
 *                         passes of 4 rows
 *   gemv_mma    gemv_mma.c  2 to 16 rows on matrix units (mma.sync): the rows padded to 16;
 *                         with extra reductions a second B tile per column group (a second
 *                         weight) and f32 row sums per lane (a norm's sum of squares);
 *   gemm_mma    gemm_mma.c  more rows: 64 x 64 (up to gemm_mma_mid_rows) or 128 x 128 tiles
 *                         through a 3-stage cp.async pipeline in shared memory, ldmatrix,
 *                         mma.sync
 *   gemm_wgmma  gemm_wgmma.c  on sm_90 (wgmma listed) in place of gemm_mma's 128 x 128 tiles for
 *                         K-major P and Q: two warpgroups, a 3-stage cp.async pipeline, wgmma
 *                         m64n128k16 from the 128-byte swizzled stages
 *   gemm_mma_regs gemv_mma.c  the same without shared memory (gemv_mma's kernel over tiles of
 *                         32 rows x 32 columns) where the pipeline's alignment is not proven
 *   gemm_frag   gemm_frag.c more rows on subgroup matrix fragments (Metal simdgroup_matrix,
 *                         Vulkan cooperative matrices): tiles of P and Q staged in shared memory
 *   gemm_mma_dq, gemm_frag_dq  the same two with a dequantized Q (mm_q_dequant: quantized
 *                         weights): the block's threads compute Q's tiles into shared memory
 *   gemv_cols   gemv.c    threads along the columns, K split over the block's thread rows: Q
 *                         contiguous along j (x @ W, [in, out] weights); one row
 *   gemm        gemm.c    tiles of P and Q in shared memory and a micro-tile per thread */
#ifndef RX_SCHED_MATMUL_H
#define RX_SCHED_MATMUL_H

#include "rules.h"

/* The statements around the reduce in an output point's body (fusion makes at most 5: the
 * accumulators' allocs, the reduce, the rounding of the accumulator, the output store). */
#define MM_MAX_ITEMS 16

/* A matmul-shaped program: one nest `for batch..., i, j` (or `for j` alone: one row) whose body is
 *   PRE...    allocs of local buffers with constant shapes, and lets
 *   reduce k in 0..K { init { LET... acc = v0 } update { LET... acc = acc + P * Q } }
 *   POST...   lets, stores to local buffers, and the one store to the output at [batch..., i, j]
 * (no POST when acc is itself the output at [batch..., i, j]). P and Q are any expressions over
 * loads (casts, a prologue such as a norm's scale, rope) after the update's and PRE's lets are
 * substituted into them: P uses k and not j, Q uses k and not i, and neither loads a buffer that
 * the program stores. The epilogue (v0, PRE and POST) may read any buffer at any point that uses
 * the output point (bias, residual, the other operand of a gate). */
/* Further sum reductions of the output point over the same k as the main one (rms_norm_matmul:
 * an RMSNorm's sum of squares, a second projection), each with its own local accumulator: the
 * summand P * Q split as the main one's, or, when it does not use j (a row term), p the whole
 * summand and q NULL. Their k is the main reduction's (substituted by mm_match). */
#define MM_MAX_EXTRA 3
typedef struct mm_extra {
  red_info r;
  rx_tx *p, *q;
  bool p_first;
} mm_extra;

typedef struct mm_info {
  nest nt;                  /* batch..., [i,] j: the nest as written */
  int nb;                   /* the batch loops: the outermost nb of nt */
  const rx_expr *i, *j;     /* the row and column variables; i is NULL when there is one row */
  const rx_expr *N, *M, *K; /* rows (1 without i), columns, reduction extent */
  red_info r;               /* the reduction */
  const rx_stmt *pre[MM_MAX_ITEMS], *post[MM_MAX_ITEMS];
  int npre, npost;
  rx_tx *p, *q;   /* the operands, lets substituted */
  bool p_first;   /* P is the left operand of the product */
  bool q_along_k; /* every load of Q that uses k uses it in its last index: contiguous in k */
  bool p_along_k; /* the same for P */
  rx_dtype acc_dt;
  int nx; /* extra reductions: only gemv_rows takes them (the other schedules' fits refuse) */
  mm_extra x[MM_MAX_EXTRA];
  /* PRE's integer lets that do not use j, where the row variable is taken as a batch variable
   * (a gathered weight's row offset: moe_gemv's expert id, matmul_match.c row_as_batch): not
   * substituted into P and Q (they read the locals); the schedule emits them before its k loop
   * (mm_hoist_emit), the epilogue does not replay them. Only one-row programs have them, so only
   * gemv_rows and gemv_cols meet them. */
  const rx_stmt *hoist[MM_MAX_ITEMS];
  int nhoist;
} mm_info;

bool mm_match(rx_module *m, const rx_tensor_fn *f, mm_info *mi);

/* Whether st is one of mi's hoisted lets; mm_hoist_emit appends them at the batch point (batch:
 * the batch variables' replacements) to out. */
bool mm_hoisted(const mm_info *mi, const rx_stmt *st);
void mm_hoist_emit(rx_sctx *s, const mm_info *mi, const rx_expr *const *batch, rx_stmtvec *out);
/* rw substitutes the output point's variables (batch..., i, j) for n = nt.n variables. */
void mm_point_rewrite(rx_sctx *s, const mm_info *mi, const rx_expr *const *batch, const rx_expr *i,
                      const rx_expr *j, const rx_expr **vars, const rx_expr **repl, rx_rewrite *rw);
/* e (an operand, or a load under it) at the output point (batch..., i, j) and reduction index k. */
rx_tx *mm_operand_at(rx_sctx *s, const mm_info *mi, const rx_expr *const *batch, const rx_tx *e,
                     const rx_expr *i, const rx_expr *j, const rx_expr *k);
/* The output point's statements for the accumulated total: PRE, the init lets, acc = v0 + total,
 * POST, rewritten by rw (appended to out). mm_epilogue_n: with the extra reductions' totals too
 * (totals[0] the main one's, totals[1 + t] extra t's). */
void mm_epilogue(rx_sctx *s, const mm_info *mi, rx_rewrite *rw, rx_tx *total, rx_stmtvec *out);
void mm_epilogue_n(rx_sctx *s, const mm_info *mi, rx_rewrite *rw, rx_tx *const *totals,
                   rx_stmtvec *out);
/* The matrix units' epilogue per 8 consecutive columns a lane (issue 31): the accumulators of
 * the 4 lanes of a quad (lane / 4) for one row, src[2 n + e] = lane t's columns 8 n + 2 t + e of
 * 4 tiles of 8 columns (the mma/wgmma layout of D), transposed among the quad by two shuffle_xor
 * rounds (bits 1 and 2 of t) into ft (f32[8]): lane t ends with tile t's 8 consecutive columns,
 * ft[v] = column 8 t + v. In registers (the target's compiler keeps ft there: constant indices
 * under unrolled loops): no shared memory, no barrier. Every lane of the warp must reach it. */
void mm_quad_transpose(rx_sctx *s, const rx_expr *lane, rx_tx *const *src, rx_buffer *ft,
                       rx_stmtvec *out);
/* The epilogue at output row `row`, columns cb + v (v in 0..8, cb a multiple of 8) from ft[v]:
 * a vectorized loop (its loads, bias and residual, and the output's stores 16 bytes a lane for
 * f16, where the target's printer proves them aligned: M a multiple of 8, known or assumed by an
 * enclosing test), guarded by row < N and cb < M. */
rx_stmt *mm_epilogue_row8(rx_sctx *s, const mm_info *mi, const rx_expr *const *batch,
                          const rx_expr *row, const rx_expr *cb, rx_buffer *ft);
/* The same with the extra reductions' totals too: fts[0] the main one's, fts[1 + t] extra t's
 * (n = 1 + mi->nx; mm_epilogue_n). */
rx_stmt *mm_epilogue_row8_n(rx_sctx *s, const mm_info *mi, const rx_expr *const *batch,
                            const rx_expr *row, const rx_expr *cb, rx_buffer *const *fts, int n);
/* A fragment GEMM's epilogue (gemm_mma, gemm_wgmma): vec(k, .) (per 8 columns a lane,
 * mm_epilogue_row8) where M is known to be a multiple of 8, frag(k, .) (at the accumulators'
 * points) where it is known not to be or when only_frag, else vec under a run-time test of M % 8
 * with frag in its else branch. k is the kernel's own state, handed back to both. */
typedef void (*mm_epilogue_form)(void *k, rx_stmtvec *body);
void mm_epilogue_by_m(rx_sctx *s, const rx_expr *M, bool only_frag, mm_epilogue_form vec,
                      mm_epilogue_form frag, void *k, rx_stmtvec *body);
/* The staged epilogue of the fragment GEMMs (issue 31, coalesced stores): where a warp's 32
 * columns (mm_quad_transpose's 64-byte runs of f16) would straddle sectors (M not a multiple of
 * 32: mm_staged_pays), the block's accumulators go through shared memory, `rows` tile rows at a
 * time, into cs (f32 [rows, bn + MM_STAGED_PAD], `reuse`: over the pipeline's stages, free after
 * its last step; ir.h), between barriers; then each lane takes 8 consecutive columns of a row
 * (bn / 8 lanes a row: a warp covers whole rows of the tile, 256 contiguous bytes of f16 at
 * bn = 128) and runs mm_epilogue_row8 on them (the fused operands read with the same walk, 16
 * bytes a lane). write(ctx, cs, pass, out) stores the accumulators of tile rows pass * rows ..
 * + rows at cs[row - pass * rows, mm_staged_col(8-column group, t) + e] (mm_staged_pair). M a
 * multiple of 8 (known or assumed), as mm_epilogue_row8 needs. */
#define MM_STAGED_PAD 8 /* floats after each staged row: a stride of 8 banks modulo 32 */
typedef struct mm_staged {
  int bm, bn, threads, rows; /* the block's tile and threads; tile rows staged at once */
  const rx_expr *tx, *row0, *col0;
  const rx_expr *const *brepl;
  void *ctx;
  void (*write)(void *ctx, rx_buffer *cs, int pass, rx_stmtvec *out);
  /* M not a multiple of 8: the rows go out an element a lane, a warp's 32 lanes on 32
   * consecutive columns of a row, the epilogue at each point; else 8 columns a lane as above */
  bool elems;
} mm_staged;
bool mm_staged_pays(rx_sctx *s, const mm_info *mi);
void mm_epilogue_staged(rx_sctx *s, const mm_info *mi, const mm_staged *st, rx_stmtvec *body);
/* The place in a staged row of column 8 cg + 2 t (the pair 2 t, 2 t + 1 of 8-column group cg). */
const rx_expr *mm_staged_col(rx_sctx *s, const rx_expr *cg, const rx_expr *t);
/* cs[row, mm_staged_col(cg, t) + e] = acc[ai..., last + e] for e in 0..2 (one 8-byte store). */
rx_stmt *mm_staged_pair(rx_sctx *s, rx_buffer *cs, const rx_expr *row, const rx_expr *cg,
                        const rx_expr *t, rx_buffer *acc, const rx_expr *const *ai, int nai);
/* The tile rows one pass stages: the most that fit in `bytes` (the stages' storage), a multiple
 * of band (the rows of one warp's fragments), at most bm. */
int mm_staged_rows(int bm, int bn, int band, int64_t bytes);
/* The f16/bf16 load under P or Q (an optional cast to the accumulator's dtype around it), or
 * NULL when the operand is anything else. */
const rx_tx *mm_plain_load(const rx_tx *e);
/* Q computed rather than loaded (a quantized weight dequantized, ops/quant.c): a float
 * expression that is no plain f16/bf16 load, over loads of at most 16 bits of which one at least
 * is an integer (the packed weight), contiguous along k (x @ W^T, W as [out, in] blocks), beside
 * a plain f16/bf16 P. The matrix-unit GEMMs (gemm_mma, gemm_frag) then have the block's threads
 * compute Q's tiles into shared memory, rounded to P's dtype (as llama.cpp's dequantize-then-GEMM
 * does); an f32 weight is not rounded so and keeps the SIMT gemm. Also the checkpoints' int32
 * words (mm_q_words). */
bool mm_q_dequant(const mm_info *mi);
/* Q dequantized from int32 words that pack k or the outputs, not bytes along k (AWQ's qweight
 * [in, out / 8] in its field order, GPTQ's [in / 8, out], their packed zeros, GPTQ's g_idx;
 * ops/quant.c): Q is not contiguous along k, so the dequantizing stages lay their lanes along the
 * columns (j), where the words are contiguous (gemm_mma.c's stage_dq, gemm_frag_dq's Q tile). */
bool mm_q_words(const mm_info *mi);
/* Structural equality of two operand expressions (an extra projection's P and the main one's). */
bool mm_same_tx(const rx_tx *a, const rx_tx *b); /* gemv_mma.c */
/* The widest vector (lanes, a power of two up to max_lanes) for loads of the operands along k:
 * target's vector_bytes over the widest loaded dtype, halved until it divides K. */
int mm_vector_lanes(rx_sctx *s, const mm_info *mi, int max_lanes);

/* Loads of packed weight bytes in Q (gemv_packed.c): each moves one byte every per_byte
 * consecutive k; gemv_rows stages them 16 bytes (one 128-bit load) per step of `lanes` k. */
#define MM_MAX_PACKED   4
#define MM_PACKED_BYTES 16 /* bytes staged per packed load and step: one 128-bit load */
typedef struct mm_packed {
  int n;
  const rx_tx *load[MM_MAX_PACKED]; /* the loads as they are in Q */
  int per_byte[MM_MAX_PACKED];      /* k per byte: 1 (int8) or 2 (int4); the same for all */
  int lanes;                        /* k per step: 16 bytes of each load */
} mm_packed;
/* Finds Q's packed loads (false: none, or a form gemv_rows cannot stage: K not a multiple of the
 * step, loads of different packings). */
bool mm_packed_find(rx_sctx *s, const mm_info *mi, mm_packed *out);
/* At column j and step start kb (a multiple of pk->lanes): the copies of `bytes` bytes of each
 * packed load (MM_PACKED_BYTES for gemv_rows; a power of two below it for gemm_mma's
 * dequantizing stage, which reads 8 (int8) or 4 to 8 (int4) bytes a lane) into bufs[i] (local
 * u8/i8) as vectorized loops, returned; out_qs[i] is weight operand qs[i] (the main Q and the
 * extras' Qs, whose packed loads mm_packed_find lists too) at k = kb + lane reading them from
 * bufs[i][lane // per_byte]: one staging of every packed load for all of them. */
rx_stmt *mm_packed_stage(rx_sctx *s, const mm_info *mi, const mm_packed *pk, rx_buffer *const *bufs,
                         int bytes, const rx_expr *const *batch, const rx_expr *j,
                         const rx_expr *kb, const rx_expr *lane, int n, const rx_tx *const *qs,
                         rx_tx **out_qs);

/* GGUF block rows in Q (gemv_blocks.c): byte loads w[row..., f(k)] walking blocks of B weights
 * in BB bytes; gemv_rows copies each k step's bytes of a group's rows into shared memory (whole
 * units of up to 16 bytes, consecutive lanes on consecutive units) and dequantizes from there. */
#define MM_MAX_BLOCK_ROWS 4
#define MM_BLOCK_LANES    32 /* k a lane a step: a Q4_0 block, a Q4_K sub-block */
typedef struct mm_blocks {
  int n;
  const rx_tx *load[MM_MAX_BLOCK_ROWS]; /* one load of each distinct row, as in Q */
  int B, V;                             /* weights a block; k a lane a step (min(B, 32)) */
  int64_t BB;                           /* bytes a block */
} mm_blocks;
/* Finds Q's block rows (false: none, a load along k that is no block byte, K not a multiple of
 * B, or every load along k one of pk's, which gemv_packed.c stages whole: relaxc's own schemes,
 * FP8). Q6_K's low quants are such a load, its high bits and scales not: staged here. */
bool mm_blocks_find(rx_sctx *s, const mm_info *mi, const mm_packed *pk, mm_blocks *out);
/* A group's staging: in shared sh (u8) from base, row i's F spans of `span` bytes (one a slot,
 * slot f's column col0 + f) at base + (i F + f) span, each from byte k0 / B * BB of its row (k0
 * a multiple of B, the group's first k of the staged steps); G lanes copy them `unit` bytes at a
 * time. */
typedef struct mm_blocks_stage {
  const mm_blocks *bk;
  rx_buffer *sh;
  const rx_expr *const *batch;
  const rx_expr *base, *col0, *lane, *k0;
  int G, F, unit;
  int64_t span;
} mm_blocks_stage;
/* The largest unit (a power of two up to 16) dividing the row's bytes and span. */
int mm_blocks_unit(rx_sctx *s, const mm_info *mi, const mm_blocks *bk, int64_t span);
/* The copy of the group's spans (a barrier must follow before the reads). */
rx_stmt *mm_blocks_copy(rx_sctx *s, const mm_info *mi, const mm_blocks_stage *st);
/* q (a weight operand at column j, k in the staged steps) reading its rows from sh (slot: the
 * lane's slot). */
rx_tx *mm_blocks_rewrite(rx_sctx *s, const mm_info *mi, const mm_blocks_stage *st, const rx_expr *j,
                         const rx_expr *slot, const rx_expr *k, const rx_tx *q);

/* The staged rows of a form with extra reductions (the folded norm; gemv_rows and gemv_mma): the
 * value sp (P, or the f16/bf16 value under P's cast: T(x * nw)) of NB rows from row0 for a slice
 * of KC k, in shared xs [NB, >= KC] (row ii at ii); the row terms' sums in rt [nx * NB] (extra t's
 * row ii at t * NB + ii). */
typedef struct mm_stage {
  rx_buffer *xs, *rt;
  const rx_tx *sp;
  const rx_expr *const *brepl; /* the batch loop variables as functions of the batch block */
  const rx_expr *tx, *row0, *col0;
  int T, VS, NB; /* the block's threads, lanes a thread writes (a vectorized loop), rows */
  int64_t KC;
} mm_stage;
/* The staging of slice k0 .. k0 + KC (gemv.c): thread tx writes VS lanes at (sv T + tx) VS of
 * each row (consecutive threads, consecutive vectors: coalesced loads, no bank conflicts) and
 * adds its row terms' summands to rt. Rows past N and k past K are left unwritten: the steps that
 * would read them are guarded alike. */
rx_stmt *mm_stage_slice(rx_sctx *s, const mm_info *mi, const mm_stage *st, const rx_expr *k0);

/* The schedules: each returns a kernel root (block loops, thread loop, body). */
rx_stmt *gemv_rows_schedule(rx_sctx *s, const mm_info *mi, int rows); /* gemv.c */
bool gemv_rows_fits(const rx_sctx *s, const mm_info *mi, int rows);   /* gemv.c */
rx_stmt *gemv_cols_schedule(rx_sctx *s, const mm_info *mi);           /* gemv.c */
rx_stmt *gemv_mma_schedule(rx_sctx *s, const mm_info *mi);            /* gemv_mma.c */
bool gemv_mma_fits(const rx_sctx *s, const mm_info *mi);              /* gemv_mma.c */
/* P and Q plain f16/bf16 loads of one dtype, K a positive multiple of 32, a target with mma.sync
 * m16n8k16 into f32: what every kernel on mma.sync needs (each adds how it reads P and Q).
 * mm_mma_target: all of it but the operands, for operands of dtype ab. */
bool mm_mma_operands(const rx_sctx *s, const mm_info *mi);                   /* gemv_mma.c */
bool mm_mma_target(const rx_sctx *s, const mm_info *mi, rx_dtype ab);        /* gemv_mma.c */
rx_stmt *gemm_mma_regs_schedule(rx_sctx *s, const mm_info *mi);              /* gemv_mma.c */
rx_stmt *gemm_mma_schedule(rx_sctx *s, const mm_info *mi, bool small_tiles); /* gemm_mma.c */
/* The row count up to which gemm_mma takes its 64 x 64 tiles (at least MID_ROWS). */
int gemm_mma_mid_rows(const mm_info *mi);          /* gemm_mma.c */
bool gemm_mma_fits(rx_sctx *s, const mm_info *mi); /* gemm_mma.c */
/* The load ld reads runs of 8 elements starting at multiples of 16 bytes along v over 0..ext. */
bool mm_runs_aligned(rx_sctx *s, const rx_tx *ld, const rx_expr *v, const rx_expr *ext);

/* Helpers of the matrix-unit GEMM kernels (gemm_mma.c, gemm_wgmma.c). */
/* A statement of kind k with its count (async_commit / async_wait N, ldmatrix xN, wgmma ...). */
rx_stmt *mm_stmt_count(rx_sctx *s, rx_stmt_kind k, int count);
/* A fresh variable over 0..n, bound in the analyzer (the caller resets it). */
const rx_expr *mm_bound_var(rx_sctx *s, const char *name, int n);
/* The cp.async pipeline over nk chunks of K through `stages` shared stages: chunks 0 ..
 * stages - 2 issued ahead; at chunk kt, wait for it (async_wait stages - 2), `fence` (a statement
 * kind, or RX_STMT_SEQ for none: wgmma's proxy fence), a barrier (its stage is visible, and
 * chunk kt - 1's stage free for everyone), issue chunk kt + stages - 1 where it exists, commit
 * (one group per step keeps the count uniform), compute on chunk kt's stage; then wait for
 * nothing left in flight. issue(ctx, chunk, stage, out) writes both operands' copies of a chunk
 * into a stage, compute(ctx, stage, out) the matrix work on it. */
typedef struct mm_pipeline {
  int stages;
  rx_stmt_kind fence;
  void *ctx;
  void (*issue)(void *ctx, const rx_expr *chunk, const rx_expr *stage, rx_stmtvec *out);
  void (*compute)(void *ctx, const rx_expr *stage, rx_stmtvec *out);
  /* the loop over chunks kept rolled (RX_LOOP_ROLLED): at a small constant K the target's
   * compiler would unroll it whole, each copy's addresses and fragments live at once (gemm_mma
   * at K = 192: 255 registers and 168 bytes of spills on sm_80, 142 registers rolled) */
  bool rolled;
} mm_pipeline;
void mm_pipeline_emit(rx_sctx *s, int64_t nk, const mm_pipeline *p, rx_stmtvec *body);
rx_stmt *gemm_wgmma_schedule(rx_sctx *s, const mm_info *mi);       /* gemm_wgmma.c */
bool gemm_wgmma_fits(rx_sctx *s, const mm_info *mi);               /* gemm_wgmma.c */
rx_stmt *gemm_schedule(rx_sctx *s, const mm_info *mi, bool small); /* gemm.c */
rx_stmt *gemm_frag_schedule(rx_sctx *s, const mm_info *mi);        /* gemm_frag.c */
bool gemm_frag_fits(const rx_sctx *s, const mm_info *mi);          /* gemm_frag.c */

#endif
