/* test_ptx_mma: what NVRTC and ptxas show of the matrix-unit kernels without a GPU (issue 31,
 * "Static checks in CI for every new kernel"), for sm_80 and sm_90: the kernels of support_mma.h's
 * table (gemm_mma in its x @ W^T and x @ W forms in f16 and bf16, gemm_mma_dq for a q4 and a q8
 * scheme, gemv_mma, paged_attention's fragment form, paged_decode_attention), each compiled by
 * NVRTC as relaxc emits it. Per kernel and architecture, one check per column of CHECKS:
 *   insns      its PTX holds what its table line asks (RXM_*): mma.sync.aligned.m16n8k16,
 *              ldmatrix.sync.aligned.m8n8, cp.async.cg.shared.global, a 128-bit global load
 *              (ld.global[.nc].v4 of 32-bit words, .v2 of 64-bit ones), a 64-bit one (.v2 of
 *              32-bit words: gemm_mma_dq's packed weights);
 *   nolocal    no local memory: no ld.local / st.local in the PTX, and ptxas -v reports a 0-byte
 *              stack frame and no spill stores or loads;
 *   occupancy  ptxas's registers per thread, the kernel's threads per block and ptxas's static
 *              shared bytes let at least the blocks per SM that its schedule assumes (the table
 *              line's constant, targets/occupancy.h) run on one SM of that architecture
 *              (tgt_blocks_per_sm: 65,536 registers allocated per warp in units of 256, at most 255
 *              a thread; 164 KiB of shared memory per SM on sm_80, 228 KiB on sm_90, 1 KiB of it
 *              reserved per block; 32 blocks and 64 warps at most); and the blocks its
 *              __launch_bounds__ asks for (the schedule's `blocks=N`, 1 by default) are 1 or
 *              that assumption (gemm_mma: 2 at 128 x 128, 4 at 64 x 64; gemm_mma_dq 1 at 128 x
 * 128). Each kernel's figures are printed (registers, shared bytes, blocks per SM by registers and
 * by shared memory). A check known to fail is listed in xfails with why (the list should end
 * empty); one listed that passes fails the test as an "unexpected pass". Without NVRTC: skipped
 * (77); without ptxas the ptxas parts are reported skipped.
 *
 * Adding a kernel: one line in rxm_kernels (tests/unit/support_mma.c), with the instructions its
 * PTX must hold and its schedule's occupancy constant (targets/occupancy.h).
 *
 * usage: test_ptx_mma [TESTS_DIR] (RX_PTX_FILTER=TEXT: the lines whose name has it) */
#include "support_mma.h"
#include "targets/occupancy.h"
#include "targets/toolchain.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECKS(X)                                                                                  \
  X(INSNS, "insns")                                                                                \
  X(NOLOCAL, "nolocal")                                                                            \
  X(OCCUPANCY, "occupancy")
typedef enum check {
#define X(e, n) CK_##e,
  CHECKS(X)
#undef X
      CK_COUNT
} check;
static const char *const check_names[] = {
#define X(e, n) n,
    CHECKS(X)
#undef X
};

/* Checks known to fail: the table line's name starts with `kernel` (on both architectures). */
static const struct xfail {
  const char *kernel;
  check ck;
  const char *reason;
} xfails[] = {
    {NULL, CK_COUNT, NULL}, /* the end (the list may be empty) */
};

/* The instructions a line may ask for, as PTX text. */
static const struct {
  unsigned flag;
  const char *what, *text;
} insns[] = {
    {RXM_MMA, "mma.sync m16n8k16", "mma.sync.aligned.m16n8k16."},
    {RXM_LDMATRIX, "ldmatrix", "ldmatrix.sync.aligned.m8n8."},
    {RXM_CP_ASYNC, "cp.async", "cp.async.cg.shared.global"},
    {RXM_WGMMA, "wgmma", "wgmma.mma_async"},
};

static int passed, failed, xfailed, xpassed, skipped;

static void report(const rxm_spec *s, const char *arch, check c, bool ok, const char *detail) {
  const struct xfail *x = NULL;
  for (size_t i = 0; xfails[i].kernel && !x; i++)
    if (xfails[i].ck == c && !strncmp(s->name, xfails[i].kernel, strlen(xfails[i].kernel)))
      x = &xfails[i];
  if (ok && !x) {
    passed++;
  } else if (ok) {
    xpassed++;
    printf("unexpected pass: %s %s %s: listed as failing (%s); take it off the list\n", s->name,
           arch, check_names[c], x->reason);
  } else if (x) {
    xfailed++;
    printf("expected failure: %s %s %s: %s [%s]\n", s->name, arch, check_names[c], x->reason,
           detail);
  } else {
    failed++;
    fprintf(stderr, "FAIL: %s %s %s: %s\n", s->name, arch, check_names[c], detail);
  }
}

/* A 128-bit global load: ld.global[.nc][.L1::...].v4 of 32-bit words or .v2 of 64-bit ones;
 * (bits 64) a 64-bit one: .v2 of 32-bit words or a 64-bit word. */
static bool has_load(const char *ptx, int bits) {
  for (const char *p = ptx; (p = strstr(p, "ld.global")) != NULL; p++) {
    size_t n = strcspn(p, " \t");
    char op[96];
    snprintf(op, sizeof op, "%.*s", (int)(n < sizeof op ? n : sizeof op - 1), p);
    static const char *const wide[] = {".v4.u32", ".v4.b32", ".v4.f32", ".v4.s32",
                                       ".v2.u64", ".v2.b64", ".v2.f64", ".v2.s64"};
    static const char *const w64[] = {".v2.u32", ".v2.b32", ".v2.f32", ".v2.s32",
                                      ".u64",    ".b64",    ".f64",    ".s64"};
    for (size_t i = 0; i < RX_ARRAY_LEN(wide); i++)
      if (strstr(op, bits == 64 ? w64[i] : wide[i])) return true;
  }
  return false;
}

/* The ptxas report of the kernel's entry (NULL when not found). */
static const rx_ptxas_func *entry_of(const rx_ptxas_info *info, const char *name) {
  for (int i = 0; i < info->nfuncs; i++)
    if (info->funcs[i].entry && !strncmp(info->funcs[i].name, name, sizeof info->funcs[i].name - 1))
      return &info->funcs[i];
  return NULL;
}

static void check_ptxas(const rxm_spec *s, const rxm_kernel *k, const rx_target *t, const char *ptx,
                        bool local_in_ptx) {
  rx_ptxas_info info;
  char detail[512];
  rx_status st = tgt_ptxas_report(ptx, t->cuda_arch, &info);
  if (st && rx_status_code_of(st) == RX_ERR_NOT_FOUND) {
    skipped += 2;
    rx_status_free(st);
    return;
  }
  if (st) {
    failed++;
    fprintf(stderr, "FAIL: %s %s: ptxas: %s\n", s->name, t->cuda_arch, rx_status_message(st));
    rx_status_free(st);
    return;
  }
  const rx_ptxas_func *f = entry_of(&info, k->kernel->name);
  if (!f) {
    failed++;
    fprintf(stderr, "FAIL: %s %s: ptxas reports no entry %s:\n%s\n", s->name, t->cuda_arch,
            k->kernel->name, info.log ? info.log : "");
    tgt_ptxas_info_free(&info);
    return;
  }
  snprintf(detail, sizeof detail,
           "%s; ptxas: %d bytes stack frame, %d bytes spill stores, %d "
           "bytes spill loads",
           local_in_ptx ? "ld.local/st.local in the PTX" : "no ld.local/st.local in the PTX",
           f->stack_bytes, f->spill_stores, f->spill_loads);
  report(s, t->cuda_arch, CK_NOLOCAL,
         !local_in_ptx && f->stack_bytes == 0 && f->spill_stores == 0 && f->spill_loads == 0,
         detail);
  const tgt_sm_limits *l = tgt_sm_limits_of(t->sm);
  RX_ASSERT(l);
  int threads = (int)(k->kernel->block[0] * k->kernel->block[1] * k->kernel->block[2]);
  /* ptxas counts static shared memory; a wgmma kernel's is dynamic (kernels.json shared_dynamic),
   * the bytes its launch asks for */
  int shared = f->shared_bytes + (k->kernel->shared_dynamic ? (int)k->kernel->shared_bytes : 0);
  int blocks = tgt_blocks_per_sm(l, f->registers, threads, shared);
  int by_regs = tgt_blocks_per_sm(l, f->registers, threads, 0);
  int by_shared = tgt_blocks_per_sm(l, 0, threads, shared);
  printf("  %-34s %s %-8s %3d registers x %4d threads, %6d shared bytes%s: %d blocks per SM "
         "(registers %d, shared memory %d), the schedule assumes %d\n",
         s->name, t->cuda_arch, k->kernel->name, f->registers, threads, shared,
         k->kernel->shared_dynamic ? " (dynamic)" : "", blocks, by_regs, by_shared,
         s->blocks_per_sm);
  /* the blocks the kernel asks ptxas for (__launch_bounds__'s second argument, from the
   * schedule's `blocks=N`): 1, or the assumption itself */
  const char *lb = strstr(k->kernel->source, "__launch_bounds__(");
  int lb_threads = 0, asked = 0;
  if (!lb || sscanf(lb, "__launch_bounds__(%d, %d)", &lb_threads, &asked) != 2) asked = -1;
  snprintf(detail, sizeof detail,
           "%d registers x %d threads and %d shared bytes let %d blocks run per SM (registers: "
           "%d, shared memory: %d); the schedule assumes %d, __launch_bounds__ asks for %d",
           f->registers, threads, shared, blocks, by_regs, by_shared, s->blocks_per_sm, asked);
  report(s, t->cuda_arch, CK_OCCUPANCY,
         blocks >= s->blocks_per_sm && (asked == 1 || asked == s->blocks_per_sm), detail);
  tgt_ptxas_info_free(&info);
}

static void check_line(const rxm_spec *s, const rx_target *t) {
  char why[2048];
  rxm_kernel k;
  if (!rxm_build(s, t, &k, why, sizeof why)) {
    failed++;
    fprintf(stderr, "FAIL: %s\n", why);
    return;
  }
  char *ptx = NULL, *log = NULL;
  size_t len = 0;
  rx_status st =
      tgt_nvrtc_compile(k.kernel->source, k.kernel->name, t->cuda_arch, false, &ptx, &len, &log);
  if (st) {
    failed++;
    fprintf(stderr, "FAIL: %s %s: NVRTC: %s\n%s\n", s->name, t->cuda_arch, rx_status_message(st),
            log ? log : "");
  } else {
    rx_strbuf missing = {0};
    for (size_t i = 0; i < RX_ARRAY_LEN(insns); i++)
      if ((s->flags & insns[i].flag) && !strstr(ptx, insns[i].text))
        base_strbuf_printf(&missing, "%s%s", missing.data ? ", " : "", insns[i].what);
    if ((s->flags & RXM_V128) && !has_load(ptx, 128))
      base_strbuf_printf(&missing, "%s%s", missing.data ? ", " : "", "128-bit global load");
    if ((s->flags & RXM_V64) && !has_load(ptx, 64))
      base_strbuf_printf(&missing, "%s%s", missing.data ? ", " : "", "64-bit global load");
    snprintf(why, sizeof why, "the PTX of %s lacks %s", k.kernel->name,
             missing.data ? missing.data : "nothing");
    report(s, t->cuda_arch, CK_INSNS, !missing.data, why);
    base_strbuf_free(&missing);
    check_ptxas(s, &k, t, ptx, strstr(ptx, "ld.local") || strstr(ptx, "st.local"));
  }
  rx_status_free(st);
  free(ptx);
  free(log);
  rxm_free(&k);
}

int main(void) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  rx_status s = tgt_nvrtc_load(NULL, NULL);
  if (s) {
    printf("SKIP: NVRTC is not present: %s\n", rx_status_message(s));
    rx_status_free(s);
    return 77;
  }
  const char *filter = getenv("RX_PTX_FILTER");
  static const char *const archs[] = {"cuda -arch=sm_80", "cuda -arch=sm_90"};
  for (size_t a = 0; a < RX_ARRAY_LEN(archs); a++) {
    const rx_target *t;
    rx_status ts = tgt_target_parse(archs[a], &t);
    RX_ASSERT(!ts);
    for (int i = 0; i < rxm_nkernels; i++)
      if ((!filter || strstr(rxm_kernels[i].name, filter)) &&
          (t->sm >= 90 || !(rxm_kernels[i].flags & RXM_SM90)) &&
          (t->sm < 90 || !(rxm_kernels[i].flags & RXM_SM80)))
        check_line(&rxm_kernels[i], t);
  }
  printf("ptx mma checks: %d passed, %d failed, %d expected failures, %d unexpected passes, %d "
         "skipped\n",
         passed, failed, xfailed, xpassed, skipped);
  return failed || xpassed ? 1 : 0; /* a passing entry of xfails must leave the list */
}
