/* test_wgmma: GEMM on sm_90's warpgroup MMA (ir/ir.h RX_STMT_WGMMA, passes/schedule/gemm_wgmma.c;
 * issue 31), end to end, on the programs of tests/mma/wgmma_gemm.rx (f16 and bf16; N = 200 and
 * 128 columns, K = 192 and 256; with and without an epilogue: bias, residual, an f32 output).
 *   - the matmul rule picks gemm_wgmma for its large variant on cuda sm_90 (gemm_mma on sm_80);
 *   - the gemm_wgmma kernel alone (the last variant of the scheduled program) runs in the
 *     interpreter (wgmma computed at once from ir.h's definition) and in the SIMT emulator (its
 *     CUDA C, codegen/mma_cuda.h's helpers emulated from the PTX ISA's descriptor, swizzle and
 *     fragment text: tests/simt/simt_cuda.h) at n = 1, 7, 33, 100 and 1000, each against the
 *     serial program in the interpreter (the oracle; tolerances of support_kernels.h: f32 1e-4,
 *     f16/bf16 2e-2 normalized);
 *   - the whole scheduled program of the first (every variant, chosen by n) in the emulator at the
 *     same sizes;
 *   - with its wgmma_wait removed from the CUDA C, the emulated kernel differs from the oracle
 *     (a wgmma completes at its wait), and the one with its fence removed is refused;
 *   - NVRTC compiles it for sm_90 as sm_90a (targets/nvrtc.c), its PTX holds wgmma.mma_async,
 *     fence.proxy.async, wgmma.wait_group and cp.async, and no local memory; ptxas for sm_90a
 *     reports no spills (its registers and shared bytes printed); skipped without NVRTC/ptxas;
 *   - codegen for sm_80, Vulkan and Metal refuses the wgmma program, naming wgmma;
 *   - the scheduled program prints and parses back.
 * Exits 77 when nothing could run.
 * usage: test_wgmma TESTS_DIR */
#include "check.h"
#include "support_pipeline.h"

#include "base/base.h"
#include "interp/interp.h"
#include "ir/ir.h"
#include "targets/toolchain.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static rxk_stats st;

#define FAIL(...) rxk_fail(&st, __VA_ARGS__)

static const int64_t SIZES[] = {1, 7, 33, 100, 1000};
/* RX_KERNEL_SIZES set (CI's sanitized pass, whose kernels run with ASan): n stops at 100, still
 * two row tiles with a partial one; n = 1000 runs in the plain pass */
static int64_t size_cap = INT64_MAX;

/* The statement that the `if` chain of a scheduled program takes last (its `otherwise` variant):
 * the gemm_wgmma kernel. */
static rx_stmt *last_variant(rx_stmt *s) {
  while (s) {
    if (s->kind == RX_STMT_SEQ && s->n == 1)
      s = s->body[0];
    else if (s->kind == RX_STMT_IF && s->otherwise)
      s = s->otherwise;
    else
      return s;
  }
  return NULL;
}

/* A copy of the scheduled program f whose body is its last variant alone. */
static rx_tensor_fn *variant_fn(rx_module *m, const rx_tensor_fn *f) {
  rx_tensor_fn *g = base_arena_alloc(&m->arena, sizeof *g);
  *g = *f;
  rx_stmt *seq = ir_stmt_new(m, RX_STMT_SEQ, f->loc);
  seq->body = base_arena_alloc(&m->arena, sizeof *seq->body);
  seq->body[0] = last_variant(f->body);
  seq->n = 1;
  g->body = seq;
  return g;
}

/* The index of p's gemm_wgmma variant (its kernel: p->kl.kernels[v]), or -1. */
static int wgmma_variant(const rxk_prepared *p) {
  for (int v = 0; p->ok && v < p->sr.nvariants && v < p->kl.n; v++)
    if (p->sr.variants[v].name && !strcmp(p->sr.variants[v].name, "gemm_wgmma")) return v;
  return -1;
}

/* PTX and ptxas figures of the gemm_wgmma kernel. */
static void check_ptx(const rxk_prepared *p, const rx_kernel *kn) {
  char *ptx = rxk_nvrtc_ptx(p, kn, &st);
  if (ptx) {
    static const char *const need[] = {".target sm_90a",
                                       "wgmma.mma_async.sync.aligned.m64n128k16",
                                       "wgmma.fence.sync.aligned",
                                       "fence.proxy.async",
                                       "wgmma.commit_group",
                                       "wgmma.wait_group.sync.aligned 0",
                                       "cp.async.cg.shared.global",
                                       "cp.async.wait_group 1"};
    for (size_t i = 0; i < RX_ARRAY_LEN(need); i++)
      CHECK_MSG(strstr(ptx, need[i]) != NULL, "%s: the PTX of %s has no %s", p->what, kn->name,
                need[i]);
    CHECK_MSG(!strstr(ptx, ".local"), "%s: local memory in the PTX of %s", p->what, kn->name);
    rx_ptxas_info info;
    rx_status ps = tgt_ptxas_report(ptx, p->t->cuda_arch, &info);
    if (ps && rx_status_code_of(ps) == RX_ERR_NOT_FOUND) {
      st.skipped++;
    } else if (ps) {
      FAIL("%s: ptxas: %s", p->what, rx_status_message(ps));
    } else {
      CHECK_MSG(info.spill_bytes == 0, "%s: %s spills %d bytes", p->what, kn->name,
                info.spill_bytes);
      printf("  %s: %s for sm_90a: %d registers, %lld bytes of shared memory (dynamic), %d spill "
             "bytes\n",
             p->what, kn->name, info.max_registers, (long long)kn->shared_bytes, info.spill_bytes);
    }
    rx_status_free(ps);
    tgt_ptxas_info_free(&info);
  }
  free(ptx);
}

/* The emulated kernel kn, compiled from src (its source, or a broken copy), at every size:
 * matches the oracle (want_ok), or differs from it / is refused (!want_ok) at n = 100. */
static void emulate_kernel(const rxk_prepared *p, const rx_kernel *kn, const char *src,
                           const rx_tensor_fn *f, rx_module *m, bool want_ok, const char *what) {
  simt_module *mod = NULL;
  char *err = NULL;
  if (simt_module_compile(NULL, SIMT_CUDA, src, "wgmma.cu", &mod, &err)) {
    if (err && strstr(err, "not found"))
      st.skipped++;
    else
      FAIL("%s (%s): does not compile for the emulator: %s", p->what, what, err ? err : "");
    free(err);
    return;
  }
  rx_kernel k2 = *kn;
  k2.source = src;
  rxk_env base;
  rxk_program_vars(f, &base);
  for (size_t si = 0; si < RX_ARRAY_LEN(SIZES); si++) {
    if (SIZES[si] > size_cap) continue;
    if (!want_ok && SIZES[si] != 100) continue;
    rxk_env e = base;
    for (int v = 0; v < e.n; v++) e.values[v] = SIZES[si];
    char why[512];
    rxk_buffers in, want, got;
    if (!rxk_make_buffers(f, &e, &in, why, sizeof why)) {
      FAIL("%s: %s", p->what, why);
      continue;
    }
    rxk_copy_buffers(&in, &want);
    rx_status s = interp_run(m, f, want.arg, want.n, NULL);
    CHECK_MSG(!s, "%s: the oracle failed: %s", p->what, s ? rx_status_message(s) : "");
    rx_status_free(s);
    rxk_copy_buffers(&in, &got);
    bool ran = rxk_simt_launch(&k2, mod, &e, &got, NULL, 0, why, sizeof why);
    if (want_ok) {
      if (!ran)
        FAIL("%s (%s) at n=%lld: %s", p->what, what, (long long)SIZES[si], why);
      else if (!rxk_compare_outputs(f, &got, &want, why, sizeof why))
        FAIL("%s (%s) at n=%lld: %s", p->what, what, (long long)SIZES[si], why);
      else
        st.passed++;
    } else {
      CHECK_MSG(!ran || !rxk_compare_outputs(f, &got, &want, why, sizeof why),
                "%s (%s): the broken kernel should fail or differ from the oracle", p->what, what);
      if (!ran) printf("  %s (%s) refused: %.200s\n", p->what, what, why);
    }
    rxk_free_buffers(&got);
    rxk_free_buffers(&in);
    rxk_free_buffers(&want);
  }
  simt_module_free(mod);
}

/* src with the first occurrence of `cut` (and only it) removed, or NULL (heap). */
static char *without(const char *src, const char *cut) {
  const char *at = strstr(src, cut);
  if (!at) return NULL;
  size_t n = strlen(src), c = strlen(cut);
  char *out = malloc(n - c + 1);
  memcpy(out, src, (size_t)(at - src));
  memcpy(out + (at - src), at + c, n - (size_t)(at - src) - c + 1);
  return out;
}

/* The variant alone in the interpreter at every size against the serial program. */
static void interp_variant(rx_module *m, const rx_tensor_fn *f, const rx_tensor_fn *g,
                           const char *what) {
  rxk_env base;
  rxk_program_vars(f, &base);
  for (size_t si = 0; si < RX_ARRAY_LEN(SIZES); si++) {
    if (SIZES[si] > size_cap) continue;
    rxk_env e = base;
    for (int v = 0; v < e.n; v++) e.values[v] = SIZES[si];
    char why[512];
    rxk_buffers in, want, got;
    if (!rxk_make_buffers(f, &e, &in, why, sizeof why)) {
      FAIL("%s: %s", what, why);
      continue;
    }
    rxk_copy_buffers(&in, &want);
    rxk_copy_buffers(&in, &got);
    rx_status s = interp_run(m, f, want.arg, want.n, NULL);
    rx_interp_opts o = {.subgroup_size = 32};
    rx_status s2 = s ? NULL : interp_run(m, g, got.arg, got.n, &o);
    if (s || s2)
      FAIL("%s at n=%lld: %s", what, (long long)SIZES[si], rx_status_message(s ? s : s2));
    else if (!rxk_compare_outputs(f, &got, &want, why, sizeof why))
      FAIL("%s at n=%lld: interpreter: %s", what, (long long)SIZES[si], why);
    else
      st.passed++;
    rx_status_free(s);
    rx_status_free(s2);
    rxk_free_buffers(&got);
    rxk_free_buffers(&in);
    rxk_free_buffers(&want);
  }
}

/* Every size through the whole scheduled program (its variants chosen by n) in the emulator. */
static void emulate_program(rx_module *m, const rx_tensor_fn *f, const rxk_prepared *p) {
  if (!p->emulate) {
    st.skipped++;
    return;
  }
  rxk_env base;
  rxk_program_vars(f, &base);
  for (size_t si = 0; si < RX_ARRAY_LEN(SIZES); si++) {
    if (SIZES[si] > size_cap) continue;
    rxk_env e = base;
    for (int v = 0; v < e.n; v++) e.values[v] = SIZES[si];
    char why[512];
    rxk_buffers in, want, got;
    if (!rxk_make_buffers(f, &e, &in, why, sizeof why)) continue;
    rxk_copy_buffers(&in, &want);
    rxk_copy_buffers(&in, &got);
    rx_status s = interp_run(m, f, want.arg, want.n, NULL);
    if (s)
      FAIL("%s: the oracle failed: %s", p->what, rx_status_message(s));
    else if (!rxk_run_simt(p, &e, &got, why, sizeof why))
      FAIL("%s at n=%lld: %s", p->what, (long long)SIZES[si], why);
    else if (!rxk_compare_outputs(f, &got, &want, why, sizeof why))
      FAIL("%s at n=%lld: emulated program: %s", p->what, (long long)SIZES[si], why);
    else
      st.passed++;
    rx_status_free(s);
    rxk_free_buffers(&got);
    rxk_free_buffers(&in);
    rxk_free_buffers(&want);
  }
}

/* The wgmma program g (one variant) refused by codegen for the other targets, naming wgmma. */
static void check_refused(rx_module *m, const rx_tensor_fn *g, const char *name) {
  /* targets that take 256 threads per block (vulkan's 128 would be named first) */
  static const char *const others[] = {"cuda -arch=sm_80", "vulkan-nvidia", "metal-apple7"};
  for (size_t ti = 0; ti < RX_ARRAY_LEN(others); ti++) {
    const rx_target *t;
    rx_status ts = tgt_target_parse(others[ti], &t);
    RX_ASSERT(!ts);
    rx_diag diag;
    base_diag_init(&diag);
    rx_kernel_list kl = {0};
    bool ok = rxk_codegen(m, g, t, &diag, &kl);
    const char *text = rx_diag_text(&diag);
    CHECK_MSG(!ok && strstr(text, "uses wgmma"), "%s [%s]: expected 'uses wgmma', got: %s", name,
              others[ti], ok ? "(compiled)" : text);
    base_diag_free(&diag);
  }
}

/* full: also the whole program, the broken kernels, the refusals and the round trip. */
static void check_program(rx_module *m, const char *name, bool broken_checks) {
  const rx_tensor_fn *f = rxk_find_fn(m, name);
  if (!f) {
    FAIL("%s is missing from tests/mma/wgmma_gemm.rx", name);
    return;
  }
  const rx_target *t80, *t90;
  RX_ASSERT(!tgt_target_parse("cuda -arch=sm_80", &t80));
  RX_ASSERT(!tgt_target_parse("cuda -arch=sm_90", &t90));
  rx_diag diag;
  base_diag_init(&diag);
  rx_sched_result s80;
  if (sched_schedule(m, f, t80, &diag, &s80)) {
    bool mma = false, wg = false;
    for (int v = 0; v < s80.nvariants; v++) {
      const char *vn = s80.variants[v].name ? s80.variants[v].name : "";
      mma |= !strcmp(vn, "gemm_mma");
      wg |= !strcmp(vn, "gemm_wgmma");
    }
    CHECK_MSG(mma && !wg, "%s [sm_80]: expected gemm_mma and no gemm_wgmma", name);
  } else {
    FAIL("%s [sm_80]: %s", name, rx_diag_text(&diag));
  }
  base_diag_free(&diag);
  rxk_prepared p;
  /* NVRTC and ptxas on every variant (no spills: gemm_mma and gemm_mma_64 at K = 192 and with
   * wg_f16_bias_res's residual epilogue spilled while their chunk loop was unrolled whole, and
   * are checked here since it is kept rolled); gemm_wgmma's own checks are check_ptx's below */
  rxk_stats others = {0};
  rxk_prepare(m, f, t90, &others, &p);
  CHECK_MSG(others.failed == 0, "%s: %d failure(s) in the other variants' toolchain checks (above)",
            p.what, others.failed);
  int v = wgmma_variant(&p);
  CHECK_MSG(v >= 0, "%s: no gemm_wgmma variant on sm_90", p.what);
  if (v >= 0) {
    const rx_kernel *kn = p.kl.kernels[v];
    rx_tensor_fn *g = variant_fn(m, p.sr.fn);
    char what[300];
    snprintf(what, sizeof what, "%s gemm_wgmma", p.what);
    interp_variant(m, f, g, what);
    check_ptx(&p, kn);
    emulate_kernel(&p, kn, kn->source, f, m, true, "gemm_wgmma");
    if (broken_checks) {
      emulate_program(m, f, &p);
      check_refused(m, g, name);
      char *nowait = without(kn->source, "rx_wgmma_wait<0>();");
      char *nofence = without(kn->source, "rx_wgmma_fence();");
      CHECK_MSG(nowait && nofence, "%s: no wait or fence in the kernel", p.what);
      if (nowait) emulate_kernel(&p, kn, nowait, f, m, false, "no wgmma_wait");
      if (nofence) emulate_kernel(&p, kn, nofence, f, m, false, "no wgmma_fence");
      free(nowait);
      free(nofence);
      /* the module with the scheduled program in f's place prints and parses back */
      rx_strbuf text = {0};
      for (size_t i = 0; i < m->items.len; i++)
        if (m->items.data[i].kind == RX_ITEM_TENSOR && m->items.data[i].fn == f) {
          m->items.data[i].fn = p.sr.fn;
          ir_module_print(&text, m);
          m->items.data[i].fn = (rx_tensor_fn *)f;
        }
      char *diags = rxk_verify_text("wgmma.rx", text.data ? text.data : "", NULL);
      CHECK_MSG(text.data && strstr(text.data, "wgmma m64n128k16") &&
                    strstr(text.data, "wgmma_wait 0, ") && !diags,
                "%s: the printed schedule does not parse back: %s", p.what, diags ? diags : "");
      free(diags);
      base_strbuf_free(&text);
    }
  }
  rxk_release(&p);
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (getenv("RX_KERNEL_SIZES") && *getenv("RX_KERNEL_SIZES")) {
    size_cap = 100;
    printf("n capped at 100 (RX_KERNEL_SIZES)\n");
  }
  rx_module *m = rxk_load_test_module(argc > 1 ? argv[1] : "tests", "mma/wgmma_gemm.rx");
  if (!m) return 1;
  check_program(m, "wg_f16", true);
  check_program(m, "wg_bf16", false);
  check_program(m, "wg_f16_bias_res", false);
  check_program(m, "wg_bf16_bias_f32", false);
  rx_module_free(m);
  check_passed += st.passed;
  check_failed += st.failed;
  check_skipped += st.skipped;
  return check_finish("wgmma");
}
