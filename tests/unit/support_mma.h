/* The matrix-unit kernels of the static checks (issue 31, "Static checks in CI for every new
 * kernel"): one line each in rxm_kernels (support_mma.c), shared by the two tests that check them
 * without a GPU:
 *   test_kernel_checks  runs each in the SIMT emulator (tests/simt), traced, at ragged sizes:
 *                       shared-memory bank conflicts and coalescing of global loads;
 *   test_ptx_mma        compiles each with NVRTC for sm_80 and sm_90: the instructions its PTX
 *                       must hold, no local memory, ptxas's registers and shared bytes against
 *                       the occupancy its schedule assumes.
 * A kernel is a tensor program (`prog`) or a graph `main` of one op call, legalized, scheduled
 * for CUDA and generated; the line names the schedule variant whose kernel is checked, so a
 * program with several variants (the matmul rule's gemv_mma, gemm_mma_64, gemm_mma) gives one
 * line per variant.
 *
 * Adding a kernel (one line in rxm_kernels): its name; the text; the variant's name (as
 * rx_sched_variant.name, NULL when the program has one kernel); the sizes the emulator runs it at,
 * ragged (no multiple of a tile), each of which must select that variant (checked); the
 * instructions its PTX must hold (RXM_*); the blocks per SM its schedule assumes, a constant of
 * targets/occupancy.h that the schedule names (never a number written in the table); for the
 * paged-cache ops, RXM_PAGED so that the cache tables get valid values; for a kernel of sm_90
 * only, RXM_SM90 (RXM_SM80 for one that sm_90 replaces), and RXM_NO_EMU where the emulator
 * cannot run it. Then run both tests;
 * a check that cannot pass yet goes to the test's xfails with its reason. */
#ifndef RX_SUPPORT_MMA_H
#define RX_SUPPORT_MMA_H

#include "codegen/codegen.h"
#include "passes/schedule.h"
#include "support_kernels.h"
#include "targets/target.h"

/* What a kernel's PTX must hold (test_ptx_mma) */
#define RXM_MMA      1u  /* mma.sync.aligned.m16n8k16 */
#define RXM_LDMATRIX 2u  /* ldmatrix.sync.aligned.m8n8 */
#define RXM_CP_ASYNC 4u  /* cp.async.cg.shared.global */
#define RXM_V128     8u  /* a 128-bit global load (ld.global[.nc].v4 of 32-bit words, ...) */
#define RXM_WGMMA    16u /* wgmma.mma_async (sm_90) */
/* How the tests treat it */
#define RXM_PAGED  32u  /* a paged-cache op: kv_len, page_table, q_seq, q_pos get valid values */
#define RXM_SM90   64u  /* for sm_90 only (wgmma, TMA): test_ptx_mma checks sm_90 alone */
#define RXM_NO_EMU 128u /* the emulator cannot run it (TMA): test_kernel_checks skips it */
#define RXM_SM80   256u /* for sm_80 only: sm_90 runs another variant (gemm_wgmma) at its sizes */
/* a 64-bit global load (ld.global[.nc].v2 of 32-bit words, ...): gemm_mma_dq's packed weights,
 * 8 bytes a lane so that 4 lanes read a row's 32 */
#define RXM_V64 512u

typedef struct rxm_spec {
  const char *name; /* "gemm_mma f16 x @ W^T" */
  const char *text; /* a tensor_fn `prog`, or a graph_fn `main` whose first binding is legalized */
  const char *variant; /* the schedule variant whose kernel is checked; NULL: the first kernel */
  const char *sizes;   /* the emulator's runs, ';'-separated, each "var=value,var=value" */
  unsigned flags;      /* RXM_* */
  int blocks_per_sm;   /* the occupancy the schedule assumes (its constant) */
} rxm_spec;

extern const rxm_spec rxm_kernels[];
extern const int rxm_nkernels;

/* One spec compiled for a CUDA target. */
typedef struct rxm_kernel {
  const rxm_spec *spec;
  rx_module *m;
  const rx_tensor_fn *f; /* the program, unscheduled (its parameters are the kernel's buffers) */
  rx_sched_result sr;
  rx_kernel_list kl;
  const rx_kernel *kernel; /* the variant's kernel */
  int variant;             /* its index in sr.variants (0 when unspecialized) */
} rxm_kernel;

/* Parses, legalizes, schedules and generates spec for target; false with the reason in why
 * (out is then freed). Release with rxm_free. */
bool rxm_build(const rxm_spec *spec, const rx_target *t, rxm_kernel *out, char *why, size_t n);
void rxm_free(rxm_kernel *k);

/* Run `run` (0-based) of k's sizes: the program's symbolic values (others at 1), false when there
 * is no such run. Checks that the values select k's variant (false with why otherwise). */
bool rxm_env(const rxm_kernel *k, int run, rxk_env *out, char *why, size_t n);
/* Valid cache tables for the paged ops (RXM_PAGED): every sequence holds 16 mp - 5 tokens in
 * pages s mp .. s mp + mp - 1, new tokens at the end (q_seq, q_pos); other buffers as made. */
void rxm_fill_tables(const rxm_kernel *k, const rxk_env *e, rxk_buffers *b);

#endif
