/* test_mma_stmt: the `mma m16n8k16 c, a, b` statement of tensor programs (ir/ir.h,
 * RX_STMT_MMA; issue 14), with `async_copy`/`async_commit`/`async_wait` (cp.async) and
 * `ldmatrix` feeding it from shared memory, end to end.
 *
 * tests/mma/mma_gemm.rx holds hand-scheduled programs that use it (a GEMM over a symbolic row
 * count in f16, a bf16 tile, a two-stage cp.async pipeline with ldmatrix in f16 for [out, in]
 * weights, one with ldmatrix .trans in bf16 for [in, out], and the pipeline again in the indexed
 * form, its fragments rows of local arrays walked by loops) and, beside each, the same
 * product as serial loops; a copy of the pipeline that reads a tile before its wait must differ
 * from the reference in the interpreter and the emulator (copies land at their wait); the
 * verifier's messages for misused async_copy and ldmatrix. At row counts
 * m = 1, 7, 16, 33 and 100 (rows past m are zero in the fragments and not stored):
 *   - the interpreter runs the mma program with subgroups of 32 and must match the serial one
 *     (tolerance of test_kernels: f32 outputs 1e-4 normalized; the mma sums in another order);
 *   - the CUDA C of the mma program (mma.sync through codegen/mma_cuda.h) runs in the SIMT
 *     emulator, whose helper follows the PTX ISA's fragment layouts, and must match too;
 *   - NVRTC compiles it for sm_80 and sm_90 with no spills, and its PTX holds
 *     mma.sync.aligned.m16n8k16 (skipped without NVRTC);
 *   - Vulkan and Metal targets refuse it with a message naming the kernel and the target;
 *   - it prints and parses back; the verifier refuses wrong fragments; the interpreter refuses it
 *     with subgroups of 8 and when only some lanes of a subgroup reach it;
 *   - the matmul rule's gemv_mma (2 to 16 rows) and gemm_mma (more) variants
 *     (passes/schedule/gemv_mma.c) of a Llama-2-7B GEMV (gemv_7b) compile for sm_80 and sm_90
 *     with mma.sync and 128-bit global loads in their PTX and no spills (ptxas, rxk_prepare);
 *     on sm_90 the large variant is gemm_wgmma (wgmma.mma_async; tests/unit/test_wgmma.c).
 * Exits 77 when nothing could run (no clang for the emulator is not a skip of the interpreter).
 * usage: test_mma_stmt TESTS_DIR */
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

/* The PTX of every kernel of p holds mma.sync.aligned.m16n8k16 (NVRTC; skipped without it). */
static void check_ptx(const rxk_prepared *p) {
  for (int k = 0; k < p->kl.n; k++) {
    const rx_kernel *kn = p->kl.kernels[k];
    char *ptx = rxk_nvrtc_ptx(p, kn, &st);
    if (ptx)
      CHECK_MSG(strstr(ptx, "mma.sync.aligned.m16n8k16.row.col.f32") != NULL,
                "%s: the PTX of %s has no mma.sync.aligned.m16n8k16", p->what, kn->name);
    free(ptx);
  }
}

/* prog (with mma) against ref (serial) at every size of m, on the interpreter and for each CUDA
 * target in the emulator; Vulkan and Metal refuse it. */
static void check_pair(rx_module *m, const char *prog, const char *ref) {
  const rx_tensor_fn *f = rxk_find_fn(m, prog), *fr = rxk_find_fn(m, ref);
  if (!f || !fr) {
    FAIL("%s or %s is missing from tests/mma/mma_gemm.rx", prog, ref);
    return;
  }
  static const char *const cuda[] = {"cuda -arch=sm_80", "cuda -arch=sm_90"};
  rxk_prepared ps[2];
  for (int ti = 0; ti < 2; ti++) {
    const rx_target *t;
    rx_status ts = tgt_target_parse(cuda[ti], &t);
    RX_ASSERT(!ts);
    rxk_prepare(m, f, t, &st, &ps[ti]);
    if (ps[ti].ok) check_ptx(&ps[ti]);
  }
  static const char *const others[] = {"vulkan", "vulkan-lavapipe", "metal-apple7"};
  for (size_t ti = 0; ti < RX_ARRAY_LEN(others); ti++) {
    const rx_target *t;
    rx_status ts = tgt_target_parse(others[ti], &t);
    RX_ASSERT(!ts);
    rx_diag diag;
    base_diag_init(&diag);
    rx_sched_result sr;
    rx_kernel_list kl = {0};
    bool ok = sched_schedule(m, f, t, &diag, &sr) && rxk_codegen(m, sr.fn, t, &diag, &kl);
    const char *text = rx_diag_text(&diag);
    CHECK_MSG(!ok && strstr(text, "uses mma m16n8k16") && strstr(text, "has no such matrix unit"),
              "%s [%s]: expected 'uses mma m16n8k16 ... has no such matrix unit', got: %s", prog,
              others[ti], ok ? "(compiled)" : text);
    base_diag_free(&diag);
  }
  rxk_env base;
  rxk_program_vars(f, &base);
  static const int64_t sizes[] = {1, 7, 16, 33, 100};
  int nsizes = base.n ? (int)RX_ARRAY_LEN(sizes) : 1;
  for (int si = 0; si < nsizes; si++) {
    rxk_env e = base;
    for (int v = 0; v < e.n; v++) e.values[v] = sizes[si];
    char at[64], why[512];
    snprintf(at, sizeof at, "%s=%lld", e.n ? e.vars[0]->name : "-", (long long)sizes[si]);
    rxk_buffers in, want, got;
    if (!rxk_make_buffers(f, &e, &in, why, sizeof why)) {
      FAIL("%s at %s: %s", prog, at, why);
      continue;
    }
    rxk_copy_buffers(&in, &want);
    rx_status s = interp_run(m, fr, want.arg, want.n, NULL);
    if (s) {
      FAIL("%s at %s: the reference failed: %s", ref, at, rx_status_message(s));
      rx_status_free(s);
    } else {
      rx_interp_opts o = {.subgroup_size = 32};
      rxk_copy_buffers(&in, &got);
      s = interp_run(m, f, got.arg, got.n, &o);
      if (s)
        FAIL("%s at %s: the interpreter failed: %s", prog, at, rx_status_message(s));
      else if (!rxk_compare_outputs(f, &got, &want, why, sizeof why))
        FAIL("%s at %s: interpreter: %s", prog, at, why);
      else
        st.passed++;
      rx_status_free(s);
      rxk_free_buffers(&got);
      /* with subgroups of 8 the statement has no meaning: refused, never run on a part */
      o.subgroup_size = 8;
      rxk_copy_buffers(&in, &got);
      s = interp_run(m, f, got.arg, got.n, &o);
      CHECK_MSG(s && strstr(rx_status_message(s), "needs the 32 lanes of a subgroup"),
                "%s at %s with subgroups of 8: expected a refusal, got %s", prog, at,
                s ? rx_status_message(s) : "success");
      rx_status_free(s);
      rxk_free_buffers(&got);
      for (int ti = 0; ti < 2; ti++) {
        if (!ps[ti].ok || !ps[ti].emulate) continue;
        rxk_copy_buffers(&in, &got);
        if (!rxk_run_simt(&ps[ti], &e, &got, why, sizeof why))
          FAIL("%s at %s: %s", ps[ti].what, at, why);
        else if (!rxk_compare_outputs(f, &got, &want, why, sizeof why))
          FAIL("%s at %s: emulated CUDA C: %s", ps[ti].what, at, why);
        else
          st.passed++;
        rxk_free_buffers(&got);
      }
    }
    rxk_free_buffers(&in);
    rxk_free_buffers(&want);
  }
  for (int ti = 0; ti < 2; ti++) rxk_release(&ps[ti]); /* sm_90's C is sm_80's: emulated once */
}

/* prog reads a cp.async tile before its wait: both the interpreter and the emulated CUDA C must
 * give other numbers than ref (copies land at their wait, not when issued). */
static void check_unwaited(rx_module *m, const char *prog, const char *ref) {
  const rx_tensor_fn *f = rxk_find_fn(m, prog), *fr = rxk_find_fn(m, ref);
  if (!f || !fr) {
    FAIL("%s or %s is missing from tests/mma/mma_gemm.rx", prog, ref);
    return;
  }
  const rx_target *t;
  rx_status ts = tgt_target_parse("cuda -arch=sm_80", &t);
  RX_ASSERT(!ts);
  rxk_prepared p;
  rxk_prepare(m, f, t, &st, &p);
  rxk_env e;
  rxk_program_vars(f, &e);
  for (int v = 0; v < e.n; v++) e.values[v] = 33;
  char why[512];
  rxk_buffers in, want, got;
  if (!rxk_make_buffers(f, &e, &in, why, sizeof why)) {
    FAIL("%s: %s", prog, why);
    rxk_release(&p);
    return;
  }
  rxk_copy_buffers(&in, &want);
  rx_status s = interp_run(m, fr, want.arg, want.n, NULL);
  CHECK_MSG(!s, "%s: %s", ref, s ? rx_status_message(s) : "");
  rx_status_free(s);
  rx_interp_opts o = {.subgroup_size = 32};
  rxk_copy_buffers(&in, &got);
  s = interp_run(m, f, got.arg, got.n, &o);
  CHECK_MSG(!s && !rxk_compare_outputs(f, &got, &want, why, sizeof why),
            "%s: the interpreter should read the tile before it lands and differ from %s (%s)",
            prog, ref, s ? rx_status_message(s) : "it matched");
  rx_status_free(s);
  rxk_free_buffers(&got);
  if (p.ok && p.emulate) {
    rxk_copy_buffers(&in, &got);
    bool ran = rxk_run_simt(&p, &e, &got, why, sizeof why);
    CHECK_MSG(ran && !rxk_compare_outputs(f, &got, &want, why, sizeof why),
              "%s: the emulated CUDA C should differ from %s (%s)", prog, ref,
              ran ? "it matched" : why);
    rxk_free_buffers(&got);
  }
  rxk_free_buffers(&in);
  rxk_free_buffers(&want);
  rxk_release(&p);
}

/* The statement's checks: the verifier's, the printer's round trip, and a subgroup whose lanes
 * do not all reach it. */
static void check_errors(rx_module *m) {
  rx_strbuf printed = {0}, again = {0};
  ir_module_print(&printed, m);
  CHECK_MSG(strstr(printed.data, "mma m16n8k16 fc, fa, fb") != NULL,
            "the printer writes the statement");
  CHECK_MSG(strstr(printed.data, "mma m16n8k16 fc[j], fa[ks], fb[j]") != NULL &&
                strstr(printed.data, "ldmatrix x4 fa[ks] = sa[0, ") != NULL,
            "the printer writes the indexed form");
  rx_module *m2 = NULL;
  char *msg = rxk_verify_text("mma.rx", printed.data, &m2);
  CHECK_MSG(!msg, "the printed module parses back: %s", msg ? msg : "");
  if (m2) {
    ir_module_print(&again, m2);
    CHECK_MSG(!strcmp(printed.data, again.data), "printing the parsed print gives the same text");
    rx_module_free(m2);
  }
  free(msg);
  base_strbuf_free(&printed);
  base_strbuf_free(&again);
  static const struct {
    const char *decls, *stmt, *want;
  } bad[] = {
      {"alloc fa: f16[4] local", "mma m16n8k16 fc, fa, fb", "must be a local allocation of 8"},
      {"alloc fa: f32[8] local", "mma m16n8k16 fc, fa, fb", "multiplies f16 or bf16"},
      {"alloc fa: f16[8] shared", "mma m16n8k16 fc, fa, fb", "must be a local allocation"},
      {"alloc fa: f16[8] local", "mma m16n8k16 fc, fa, nope", "undefined buffer 'nope'"},
      {"alloc fa: f16[8] local", "mma m16n8k16 fb, fa, fb", "accumulates in f32"},
      {"alloc fa: f16[2, 8] local", "mma m16n8k16 fc[0], fa[1], fb[0]",
       "'fb' must be a local allocation [R, 4]"},
      {"alloc fa: f16[2, 8] local", "mma m16n8k16 fc, fa, fb",
       "'fa' must be a local allocation of 8"},
  };
  for (size_t i = 0; i < RX_ARRAY_LEN(bad); i++) {
    char text[1024];
    snprintf(text, sizeof text,
             "tensor_fn t(out y: f32[4]) {\n  for b in 0..1 bind(blockIdx.x) {\n"
             "    for l in 0..32 bind(threadIdx.x) {\n      %s\n"
             "      alloc fb: f16[4] local\n      alloc fc: f32[4] local\n      %s\n"
             "    }\n  }\n}\n",
             bad[i].decls, bad[i].stmt);
    msg = rxk_verify_text("mma.rx", text, NULL);
    CHECK_MSG(msg && strstr(msg, bad[i].want), "bad mma %zu: expected '%s', got: %s", i,
              bad[i].want, msg ? msg : "(accepted)");
    free(msg);
  }
  static const struct {
    const char *stmt, *want;
  } bad_async[] = {
      {"async_copy fa[0] = x[0, 0]", "writes shared memory"},
      {"async_copy sa[0, 0] = sb[0, 0]", "is not a buffer parameter"},
      {"async_copy sf[0, 0] = x[0, 0]", "of one dtype"},
      {"async_copy sa[0, 0] = x[0, 0] if 1", "condition must be bool"},
      {"ldmatrix x4 fb = sa[l % 16, 0]", "local allocation of 8 elements"},
      {"ldmatrix x2 fb = x[l % 16, 0]", "reads shared memory"},
      {"ldmatrix x2 fc = sf[l % 16, 0]", "16-bit elements"},
      {"ldmatrix x3 fa = sa[0, 0]", "x1, x2 or x4"},
      {"async_wait n", "a statement"},
  };
  for (size_t i = 0; i < RX_ARRAY_LEN(bad_async); i++) {
    char text[1024];
    snprintf(text, sizeof text,
             "tensor_fn t(x: f16[16, 32], xf: f32[16, 32], out y: f32[4]) {\n"
             "  for b in 0..1 bind(blockIdx.x) {\n    for l in 0..32 bind(threadIdx.x) {\n"
             "      alloc sa: f16[16, 32] shared\n      alloc sb: f16[16, 32] shared\n"
             "      alloc sf: f32[16, 32] shared\n      alloc fa: f16[8] local\n"
             "      alloc fb: f16[4] local\n      alloc fc: f32[4] local\n      %s\n"
             "    }\n  }\n}\n",
             bad_async[i].stmt);
    msg = rxk_verify_text("mma.rx", text, NULL);
    CHECK_MSG(msg && strstr(msg, bad_async[i].want),
              "bad async/ldmatrix %zu: expected '%s', got: %s", i, bad_async[i].want,
              msg ? msg : "(accepted)");
    free(msg);
  }
  /* half of the subgroup reaches it: the interpreter reports the divergence */
  const char *div = "tensor_fn t(out y: f32[32]) {\n  for b in 0..1 bind(blockIdx.x) {\n"
                    "    for l in 0..32 bind(threadIdx.x) {\n"
                    "      alloc fa: f16[8] local\n      alloc fb: f16[4] local\n"
                    "      alloc fc: f32[4] local\n"
                    "      if l < 16 { mma m16n8k16 fc, fa, fb }\n      y[l] = fc[0]\n"
                    "    }\n  }\n}\n";
  rx_module *md = NULL;
  msg = rxk_verify_text("mma.rx", div, &md);
  CHECK_MSG(!msg, "the divergent program verifies: %s", msg ? msg : "");
  free(msg);
  if (md) {
    float y[32];
    rx_interp_arg arg = {.data = y, .shape = {32}, .ndim = 1, .dtype = RX_DTYPE_F32};
    rx_interp_opts o = {.subgroup_size = 32};
    rx_status s = interp_run(md, rxk_find_fn(md, "t"), &arg, 1, &o);
    CHECK_MSG(s && strstr(rx_status_message(s), "subgroup divergence"),
              "mma reached by half a subgroup: expected a divergence, got %s",
              s ? rx_status_message(s) : "success");
    rx_status_free(s);
    rx_module_free(md);
  }
}

/* gemv_7b's n <= 16 variant is gemv_mma (mma.sync, 16-byte loads) and its n > 16 variant
 * gemm_mma (mma.sync, cp.async with its wait, ldmatrix) in their PTX (no spills: rxk_prepare). */
static void check_mma_variants(rx_module *m) {
  const rx_tensor_fn *f = rxk_find_fn(m, "gemv_7b");
  if (!f) {
    FAIL("gemv_7b is missing from tests/mma/mma_gemm.rx");
    return;
  }
  static const char *const cuda[] = {"cuda -arch=sm_80", "cuda -arch=sm_90"};
  static const char *const names80[] = {"gemv_mma", "gemm_mma_64", "gemm_mma"};
  /* sm_90: the 128 x 128 tiles on wgmma (gemm_wgmma.c, tests/unit/test_wgmma.c) */
  static const char *const names90[] = {"gemv_mma", "gemm_mma_64", "gemm_wgmma"};
  for (int ti = 0; ti < 2; ti++) {
    const char *const *names = ti ? names90 : names80;
    int nnames = 3;
    const rx_target *t;
    rx_status ts = tgt_target_parse(cuda[ti], &t);
    RX_ASSERT(!ts);
    rxk_prepared p;
    rxk_prepare(m, f, t, &st, &p); /* NVRTC with no spills, counted there */
    for (int ni = 0; ni < nnames; ni++) {
      const rx_kernel *kn = NULL;
      for (int v = 0; p.ok && v < p.sr.nvariants; v++)
        if (p.sr.variants[v].name && !strcmp(p.sr.variants[v].name, names[ni]) && v < p.kl.n)
          kn = p.kl.kernels[v];
      CHECK_MSG(kn != NULL, "%s: no %s variant", p.what, names[ni]);
      if (!kn) continue;
      char *ptx = NULL, *log = NULL;
      size_t len = 0;
      rx_status s = tgt_nvrtc_compile(kn->source, kn->name, t->cuda_arch, false, &ptx, &len, &log);
      if (s && rx_status_code_of(s) == RX_ERR_NOT_FOUND) {
        st.skipped++;
      } else if (s) {
        FAIL("%s: NVRTC: %s", p.what, rx_status_message(s));
      } else {
        bool wg = !strcmp(names[ni], "gemm_wgmma");
        CHECK_MSG(strstr(ptx, wg ? "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16"
                                 : "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32") != NULL,
                  "%s: %s's PTX has no %s", p.what, names[ni], wg ? "wgmma" : "mma.sync");
        if (ni == 0)
          CHECK_MSG(strstr(ptx, "ld.global.nc.v4.u32") || strstr(ptx, "ld.global.nc.v4.b32") ||
                        strstr(ptx, "ld.global.v4.u32"),
                    "%s: %s's PTX has no 128-bit global load", p.what, names[ni]);
        else /* the pipeline: cp.async into shared memory, ldmatrix out of it */
          CHECK_MSG(strstr(ptx, "cp.async.cg.shared.global") &&
                        strstr(ptx, "cp.async.wait_group 1") &&
                        (wg || strstr(ptx, "ldmatrix.sync.aligned.m8n8.x4.shared.b16")),
                    "%s: %s's PTX lacks cp.async, its wait or ldmatrix", p.what, names[ni]);
      }
      rx_status_free(s);
      free(ptx);
      free(log);
    }
    rxk_release(&p);
  }
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  rx_module *m = rxk_load_test_module(argc > 1 ? argv[1] : "tests", "mma/mma_gemm.rx");
  if (!m) return 1;
  check_pair(m, "mma_gemm", "mma_gemm_ref");
  check_pair(m, "mma_tile_bf16", "mma_tile_bf16_ref");
  check_pair(m, "ldsm_gemm", "ldsm_gemm_ref");
  check_pair(m, "ldsm_gemm_kn", "ldsm_gemm_kn_ref");
  check_pair(m, "ldsm_gemm_rows", "ldsm_gemm_ref");
  check_unwaited(m, "ldsm_gemm_unwaited", "ldsm_gemm_ref");
  check_errors(m);
  check_mma_variants(m);
  rx_module_free(m);
  /* the pipeline's counts (rxk_stats: support_pipeline.h) with this file's checks */
  check_passed += st.passed;
  check_failed += st.failed;
  check_skipped += st.skipped;
  return check_finish("mma statement");
}
