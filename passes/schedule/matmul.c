/* passes/schedule/matmul.c: the matmul rule (GEMV and GEMM in the rule table) and its run-time
 * variants on the row count.
 *
 *   GEMV / GEMM    a matmul-shaped program (matmul.h: `for batch..., i, j` around one sum
 *                  reduction of P * Q over k, with the PRE and POST statements fusion leaves
 *                  around it: accumulators, lets, the epilogue at the output point). The kernel
 *                  per row count n (the extent of i; 1 without i):
 *                    n == 1        gemv: gemv_rows when Q is contiguous along k (x @ W^T), else
 *                                  gemv_cols;
 *                    n <= 16       gemv_mma on matrix units (mma.sync) when P and Q are f16/bf16
 *                                  loads contiguous along k and K a multiple of 32; else
 *                                  gemv_rows over all n rows when Q is contiguous along k and the
 *                                  target has subgroup arithmetic (each weight read once), else
 *                                  the small-tile gemm; on targets with subgroups narrower than
 *                                  32 (lavapipe) gemv_rows with a thread per column pair takes
 *                                  every row count from 2 to 64 (the variant's bound, or the
 *                                  facts on n: a decode batch; gemv.c: passes of 4 rows), where
 *                                  Q is contiguous along k;
 *                    n <= mid      gemm_mma_64 where gemm_mma applies (its 64 x 64 tiles, up
 *                                  to gemm_mma_mid_rows: 64 or more, by the column count);
 *                    otherwise     gemm_wgmma on sm_90 where it applies (gemm_wgmma.c: P and
 *                                  Q K-major, K a multiple of 64; 128 x 128 tiles); else
 *                                  gemm_mma on matrix units under gemv_mma's conditions with
 *                                  operand runs 16-byte aligned (a cp.async pipeline through
 *                                  shared memory, ldmatrix, mma.sync); else gemm_mma_regs under
 *                                  gemv_mma's conditions; else gemm_frag on subgroup matrix
 *                                  fragments where the target lists them for P's and Q's dtype
 *                                  into f32 (Metal simdgroup_matrix, vulkan-nvidia's cooperative
 *                                  matrices; not CUDA's sync-frag fragments); else gemm.
 *                                  A quantized weight (mm_q_dequant: Q dequantized from packed
 *                                  bytes beside a plain f16/bf16 P) takes the same two matrix-
 *                                  unit GEMMs as gemm_mma_dq(_64) and gemm_frag_dq, which compute
 *                                  Q's tiles into shared memory; below 17 rows gemv_batch
 *                                  (gemv_mma wants plain loads), and not gemm_mma_regs.
 *                  Extra reductions (matmul.h, mm_extra: rms_norm_matmul's sum of squares
 *                  and second weight) take gemv_mma for 2 to 16 rows where it applies (P an f16
 *                  value such as the norm weight's product, Q plain loads), else gemv_rows, for
 *                  any row count (in passes of rows past 16), never the GEMMs; where the facts
 *                  bound n to 16 (a decode step) there is no variant past it.
 *                  A constant n gets its kernel; a symbolic one the variants `n == 1`,
 *                  `n <= 16`, `n <= mid` (where gemm_mma applies), otherwise, chosen at run
 *                  time. The rule is GEMV for one row and GEMM for more (gemv_batch is the
 *                  variant's name). */
#include "matmul.h"

/* The schedule for a row count known to be 1 (one), at most SMALL_ROWS or MID_ROWS (rows: the
 * bound, or the constant count), or larger (0); the variant's rule and name go to *v. */
static rx_stmt *pick(rx_sctx *s, const mm_info *mi, int rows, rx_sched_variant *v) {
  if (mi->nx && rows > 1 && rows <= SMALL_ROWS && gemv_mma_fits(s, mi)) {
    *v = (rx_sched_variant){v->cond, RX_SCHED_GEMM, "gemv_mma"};
    return gemv_mma_schedule(s, mi);
  }
  if (mi->nx) { /* extra reductions (rms_norm_matmul): gemv_rows takes the others */
    *v = (rx_sched_variant){v->cond, rows == 1 ? RX_SCHED_GEMV : RX_SCHED_GEMM,
                            rows == 1 ? "gemv" : "gemv_batch"};
    return gemv_rows_schedule(s, mi, rows);
  }
  if (rows == 1) {
    *v = (rx_sched_variant){v->cond, RX_SCHED_GEMV, "gemv"};
    return mi->q_along_k ? gemv_rows_schedule(s, mi, 1) : gemv_cols_schedule(s, mi);
  }
  if (rows > 1 && rows <= SMALL_ROWS && gemv_mma_fits(s, mi)) {
    *v = (rx_sched_variant){v->cond, RX_SCHED_GEMM, "gemv_mma"};
    return gemv_mma_schedule(s, mi);
  }
  if (mi->q_along_k && gemv_rows_fits(s, mi, rows)) {
    *v = (rx_sched_variant){v->cond, RX_SCHED_GEMM, "gemv_batch"}; /* GEMV: one row */
    return gemv_rows_schedule(s, mi, rows);
  }
  bool small = rows > 0 && rows <= SMALL_ROWS;
  bool dq = mm_q_dequant(mi);
  bool mid = rows > 0 && rows <= gemm_mma_mid_rows(mi); /* gemm_mma_64's rows: more blocks */
  if (!small && !mid && gemm_wgmma_fits(s, mi)) {
    *v = (rx_sched_variant){v->cond, RX_SCHED_GEMM, "gemm_wgmma"};
    return gemm_wgmma_schedule(s, mi);
  }
  if (!small && gemm_mma_fits(s, mi)) {
    bool tiles64 = rows > 0 && rows <= gemm_mma_mid_rows(mi);
    const char *name =
        dq ? (tiles64 ? "gemm_mma_dq_64" : "gemm_mma_dq") : (tiles64 ? "gemm_mma_64" : "gemm_mma");
    *v = (rx_sched_variant){v->cond, RX_SCHED_GEMM, name};
    return gemm_mma_schedule(s, mi, tiles64);
  }
  if (!small && gemv_mma_fits(s, mi)) {
    *v = (rx_sched_variant){v->cond, RX_SCHED_GEMM, "gemm_mma_regs"};
    return gemm_mma_regs_schedule(s, mi);
  }
  if (!small && gemm_frag_fits(s, mi)) {
    *v = (rx_sched_variant){v->cond, RX_SCHED_GEMM, dq ? "gemm_frag_dq" : "gemm_frag"};
    return gemm_frag_schedule(s, mi);
  }
  *v = (rx_sched_variant){v->cond, RX_SCHED_GEMM, small ? "gemm_small" : "gemm"};
  return gemm_schedule(s, mi, small);
}

bool sched_matmul(rx_sctx *s, const rx_tensor_fn *f, sched_out *o) {
  mm_info mi;
  if (!mm_match(o->m, f, &mi)) return false;
  const rx_expr *rows = mi.N;
  if (rows->kind == RX_EXPR_CONST) {
    rx_sched_variant v = {NULL, RX_SCHED_GEMM, NULL};
    int mid = !mi.nx && gemm_mma_fits(s, &mi) ? gemm_mma_mid_rows(&mi) : MID_ROWS;
    o->body = pick(s, &mi, rows->value > mid ? 0 : (int)rows->value, &v);
    v.name = NULL;
    sched_set_variants(o->m, o->res, &v, 1);
    return true;
  }
  /* n == 1, n <= SMALL_ROWS, [n <= gemm_mma_mid_rows where gemm_mma applies: its smaller
   * tiles], else */
  bool mid = !mi.nx && gemm_mma_fits(s, &mi);
  int mid_rows = mid ? gemm_mma_mid_rows(&mi) : MID_ROWS;
  rx_sched_variant v[4] = {
      {sym_expr_cmp(s->cx, RX_EXPR_EQ, rows, sx_const(s->cx, 1)), RX_SCHED_GEMV, NULL},
      {sym_expr_cmp(s->cx, RX_EXPR_LE, rows, sx_const(s->cx, SMALL_ROWS)), RX_SCHED_GEMM, NULL},
      {sym_expr_cmp(s->cx, RX_EXPR_LE, rows, sx_const(s->cx, mid_rows)), RX_SCHED_GEMM, NULL},
      {NULL, RX_SCHED_GEMM, NULL}};
  const int bound[4] = {1, SMALL_ROWS, mid_rows, 0};
  int nv = mid ? 4 : 3;
  if (!mid) v[2] = v[3];
  int last = 0;                              /* the last variant's row bound: none */
  if (mi.nx && sched_proves(s, v[1].cond)) { /* a decode step's bound: no kernel past it */
    nv = 2;
    v[1].cond = NULL;
    last = SMALL_ROWS;
  }
  rx_stmt *k[4];
  size_t mk = sym_analyzer_mark(s->an);
  for (int i = 0; i < nv; i++) {
    if (v[i].cond) sym_analyzer_assume(s->an, v[i].cond);
    k[i] = pick(s, &mi, i == nv - 1 ? last : bound[i], &v[i]);
    sym_analyzer_reset(s->an, mk);
  }
  rx_stmt *body = k[nv - 1];
  for (int i = nv - 2; i >= 0; i--) body = sched_if(s, sched_cond(s, v[i].cond), k[i], body);
  o->body = body;
  sched_set_variants(o->m, o->res, v, nv);
  return true;
}
