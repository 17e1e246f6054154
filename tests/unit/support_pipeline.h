/* The per-target pipeline of one tensor program, shared by the tests that check kernels
 * (test_kernels, test_attention): schedule, codegen, the toolchains' checks (CUDA C through
 * NVRTC with no spills in ptxas's report, SPIR-V through spirv-val) and the emitted CUDA C and
 * MSL compiled for the SIMT emulator (tests/simt), then run there on host buffers. */
#ifndef RX_SUPPORT_PIPELINE_H
#define RX_SUPPORT_PIPELINE_H

#include "codegen/codegen.h"
#include "passes/schedule.h"
#include "simt_harness.h"
#include "support_kernels.h"
#include "targets/target.h"

/* What a test counted: checks passed, failed (each printed to stderr with "FAIL: ") and skipped
 * (a toolchain or a backend absent: never counted as passed). */
typedef struct rxk_stats {
  int passed, failed, skipped;
} rxk_stats;

void rxk_fail(rxk_stats *st, const char *fmt, ...) RX_PRINTF(2, 3);

/* cg_codegen_rules without rules, and for Vulkan targets each kernel compiled to SPIR-V and
 * validated when shaderc and SPIRV-Tools are present (rx_kernel.spirv), on this thread: what the
 * compile driver's toolchain step does (driver/toolchains.c), for tests that take one program
 * through codegen alone. Errors go to diag; returns false then. */
bool rxk_codegen(rx_module *m, const rx_tensor_fn *scheduled, const rx_target *t, rx_diag *diag,
                 rx_kernel_list *out);

/* One target's compilation of a program: its schedule, its kernels and, where emulated, their
 * SIMT objects. */
typedef struct rxk_prepared {
  const rx_target *t;
  char what[256]; /* "PROGRAM [TARGET]" for messages */
  bool ok;
  rx_sched_result sr;
  rx_kernel_list kl;
  bool emulate;       /* CUDA sm_80 (sm_90 emits the same C) and MSL run in the emulator */
  simt_module **mods; /* one per kernel, when emulated */
} rxk_prepared;

/* Schedules and generates f for t and checks the target's toolchain on its kernels (NVRTC for
 * t's architecture with no spills; spirv-val), counting each check in st; compiles the SIMT
 * objects of CUDA sm_80 and MSL. p->ok is false (and a failure counted) when schedule or
 * codegen fail. */
void rxk_prepare(rx_module *m, const rx_tensor_fn *f, const rx_target *t, rxk_stats *st,
                 rxk_prepared *p);
void rxk_release(rxk_prepared *p);

/* Does f hold a matrix-unit form (`if has_fragments(...)` at the top of its body, ir.h)? */
bool rxk_has_frag_form(const rx_tensor_fn *f);
/* Does f hold a cp.async form (`if has_async_copy()` at the top of its body, ir.h)? */
bool rxk_has_async_form(const rx_tensor_fn *f);
/* Does a kernel of p copy through cp.async (the CUDA helper rx_cp_async_16)? */
bool rxk_uses_async(const rxk_prepared *p);
/* Does p's kernel source call t's matrix units (CUDA's rx_frag_mma_ helpers, Metal's
 * simdgroup_multiply_accumulate, GLSL's coopMatMulAddNV)? */
bool rxk_uses_frags(const rxk_prepared *p);

/* Launches kernel kn (in its SIMT object mod) on b at the symbolic values e. With acc: a traced
 * launch (simt_launch_traced: the coalescing report of b's buffers added to acc) of at most
 * max_blocks blocks (0: all). Returns false with a message. */
bool rxk_simt_launch(const rx_kernel *kn, simt_module *mod, const rxk_env *e, rxk_buffers *b,
                     simt_coalescing *acc, unsigned max_blocks, char *msg, size_t n);
/* The same, the coalescing report counting only the accesses to buffer parameter `only` (its
 * index in b; -1: every buffer), e.g. the bytes a kernel reads of one weight. */
bool rxk_simt_launch_only(const rx_kernel *kn, simt_module *mod, const rxk_env *e, rxk_buffers *b,
                          simt_coalescing *acc, unsigned max_blocks, int only, char *msg, size_t n);
/* Runs every kernel of p whose condition holds, in order, in the SIMT emulator on b (symbolic
 * values from e). Returns false with a message: a launch that failed, or a run-time check that
 * failed (its message: "main: binding `y` (take): index 12 out of range [-10, 10) on axis 0"). */
bool rxk_run_simt(const rxk_prepared *p, const rxk_env *e, rxk_buffers *b, char *msg, size_t n);

/* The PTX of p's kernel kn (NVRTC for p's CUDA arch; free it), or NULL: NVRTC absent (counted
 * as skipped in st) or the compile failed (counted as failed, with NVRTC's log). */
char *rxk_nvrtc_ptx(const rxk_prepared *p, const rx_kernel *kn, rxk_stats *st);

#endif
