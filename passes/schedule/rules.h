/* passes/schedule/rules.h: what the schedule rules share (internal to passes/schedule/): the
 * loop-nest and load queries every rule matches with, the reduction form that row reduction and
 * matmul both accept, the tuning constants, and one entry point per rule for the rule table
 * (passes/schedule/schedule.c). The contract of a scheduled program is in passes/schedule.h; the
 * primitives that build statements are in passes/schedule/prims.h. */
#ifndef RX_SCHED_RULES_H
#define RX_SCHED_RULES_H

#include "../../shapes/expr_build.h"
#include "../schedule.h"
#include "prims.h"

/* ---- tuning constants, named once with their reason ---- */
/* The deepest loop nest a rule matches (every test program and legalized op has at most 6). */
#define MAXN 8
/* Threads per block of the elementwise, fallback and GEMV kernels (clamped to the target's
 * max_threads_per_block by sched_block_threads, e.g. 128 for generic Vulkan): 8 warps of 32 on
 * CUDA and Apple GPUs, enough resident blocks per SM to hide memory latency, and a multiple of
 * every subgroup size in targets/targets.c (8 lavapipe, 16 Mali, 32 NVIDIA and Apple, 64 to 128
 * Adreno). */
#define BLOCK_THREADS 256
/* Row reduction: at most BLOCK_THREADS threads per row, at least one subgroup (and at least
 * MIN_ROW_THREADS, so the shared-memory tree stays warp-shaped) even for rows shorter than that. */
#define MIN_ROW_THREADS 32
/* GEMV: the columns a block covers at once (threads along j; consecutive threads read
 * consecutive columns of a row-major [k, j] operand, one 128-byte line per warp of f32). */
#define GEMV_COLUMNS 32
/* Matmuls over at most this many rows get the small-tile GEMM (a 16-row tile still fills a
 * block's threads along the columns; past it the large tiles reuse more of each loaded tile).
 * With a symbolic row count it is also the bound of the run-time variant n <= SMALL_ROWS. */
#define SMALL_ROWS 16
/* Row counts up to which the GEMM on matrix units takes its smaller tiles at least (gemm_mma.c,
 * gemm_mma_mid_rows: more where the larger tiles would leave a GPU's SMs idle). */
#define MID_ROWS 64
/* Bookkeeping bounds of the matchers (not tuning): the loads a row reduction redirects to a
 * local, the buffers the fallback rule tracks, the expression stack of the elementwise check. */
#define MAX_REDIRECTS 32
#define MAX_TRACKED   32
#define EXPR_STACK    256

typedef struct nest {
  const rx_expr *vars[MAXN], *lo[MAXN], *ext[MAXN];
  int n;
  const rx_stmt *body; /* innermost body */
} nest;
/* The lets of a reduction's init or update at most: a fused prologue has a few, the dequantized
 * weight of a GGUF K-quant (ops/quant.c: its scale, min and quant bits) about 20. */
#define RED_MAX_LETS 32
typedef struct red_info {
  const rx_stmt *st;
  const rx_expr *k, *klo, *kext;
  const rx_stmt *init_store, *upd_store;
  const rx_stmt *init_lets[RED_MAX_LETS], *upd_lets[RED_MAX_LETS];
  int ninit_lets, nupd_lets;
  rx_combiner comb;
  rx_tx *x;       /* the combined value */
  bool acc_first; /* acc is the first operand of the combine */
} red_info;
typedef bool (*load_pred)(const rx_tx *load, void *ud);

/* ceil(e / k), k > 0, simplified under the analyzer's facts (block counts, chunk counts). */
static inline const rx_expr *sched_ceildiv(rx_sctx *s, const rx_expr *e, int64_t k) {
  return sym_analyzer_simplify(s->an, sx_ceildiv_c(s->cx, e, k));
}

/* ---- loop-nest and load queries (common.c) ---- */
const rx_stmt *sched_unwrap(const rx_stmt *s);
int sched_seq_len(const rx_stmt *s);
const rx_stmt *sched_seq_at(const rx_stmt *s, int i);
void sched_get_nest(const rx_stmt *st, nest *out);
bool sched_sym_is(const rx_tx *e, const rx_expr *v);
bool sched_tx_uses(const rx_tx *e, const rx_expr *v);
bool sched_tx_loads(const rx_tx *e, const rx_buffer *b);
bool sched_stmt_has_bound(const rx_stmt *s);
bool sched_tx_has_subgroup(const rx_tx *e);
bool sched_idx_eq(const rx_tx *a, const rx_tx *b);
bool sched_same_idx(rx_tx *const *a, int na, rx_tx *const *b, int nb);
bool sched_all_loads(const rx_tx *e, load_pred p, void *ud);
bool sched_all_loads_stmt(const rx_stmt *s, load_pred p, void *ud);
int sched_max_load_bits(const rx_tx *e);
int sched_pow2_floor(int x);
int sched_pow2_ceil(int64_t x);
int sched_block_threads(const rx_sctx *s, int want);
rx_stmt *sched_kernel1(rx_sctx *s, const rx_expr *bx, const rx_expr *nblocks, const rx_expr *tx,
                       int threads, rx_stmt *body);
const rx_expr *sched_bound_guard(rx_sctx *s, const rx_expr *v, const rx_expr *ext);
bool sched_split_lets(const rx_stmt *b, const rx_stmt **lets, int *nlets, const rx_stmt **store);
bool sched_is_acc_load(const rx_tx *e, const rx_stmt *store);
bool sched_red_parse(const rx_stmt *st, red_info *r);

/* ---- the rules: each tries to schedule f; a rule that does not accept it returns false and
 * leaves *o alone; one that does fills o->body (NULL after an error reported to the
 * diagnostics) and the variants. ---- */
typedef struct sched_out {
  rx_module *m;
  rx_sched_result *res;
  rx_stmt *body;
  bool ok;
} sched_out;
void sched_set_variants(rx_module *m, rx_sched_result *out, const rx_sched_variant *v, int n);
bool sched_elementwise(rx_sctx *s, const rx_tensor_fn *f, sched_out *o);   /* elementwise.c */
bool sched_row_reduction(rx_sctx *s, const rx_tensor_fn *f, sched_out *o); /* row_reduction.c */
bool sched_matmul(rx_sctx *s, const rx_tensor_fn *f, sched_out *o);        /* matmul.c */
bool sched_fallback(rx_sctx *s, const rx_tensor_fn *f, sched_out *o);      /* fallback.c */

#endif
