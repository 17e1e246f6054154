/* test_frag: subgroup matrix fragments in tensor programs (ir/ir.h, RX_STMT_FRAG: `alloc f:
 * T[M, N] fragment a|b|acc` and `frag fill|load|mma|store`; issue 14), end to end.
 *
 * tests/frag/frag_gemm.rx holds hand-scheduled GEMMs on 8x8 fragments (f16 inputs with an f32
 * accumulator; f32 with a column-major B, a column-major store and D apart from C), on 16x16x16
 * fragments (f16; f16 with column-major A, B and store and D apart from C; bf16 with A and B
 * from shared memory and the accumulator loaded) and, beside each, the same product as serial
 * loops. At row counts m = 1, 7, 8, 33 and 100:
 *   - the interpreter runs the fragment program with subgroups of 32 and must match the serial
 *     one (tolerance of test_kernels: f32 outputs 1e-4 normalized);
 *   - the 8x8 programs' MSL (simdgroup_matrix, simdgroup_load / _multiply_accumulate / _store)
 *     runs in the SIMT emulator (tests/simt/simt_metal.h) for metal-apple7 and must match too;
 *   - the 16x16x16 programs' CUDA C (codegen/mma_cuda.h's rx_frag_* helpers) compiles with NVRTC
 *     for sm_80 and sm_90 with no spills and mma.sync in its PTX, and runs in the emulator
 *     (tests/simt/simt_cuda.h) for sm_80 and must match;
 *   - the f16 16x16x16 programs are GLSL with GL_NV_cooperative_matrix for vulkan-nvidia:
 *     compiled by shaderc, pass spirv-val (lavapipe has no cooperative matrix to run them on);
 *   - the targets without fragments of a program's shapes and dtypes refuse it with a message
 *     naming the fragment and the target (CUDA the 8x8 ones, vulkan-nvidia the bf16 one);
 *   - it prints and parses back; the verifier refuses wrong uses, shapes, dtypes and element
 *     access; the interpreter refuses a statement reached by part of a subgroup, operands that
 *     differ across the lanes, and a load past the end of its buffer;
 *   - the matmul rule's gemm_frag variant of tests/kernels/gemm_frag.rx is chosen for Metal and
 *     vulkan-nvidia, and its scheduled program matches the unscheduled one in the interpreter.
 * Exits 77 when nothing could run.
 * usage: test_frag TESTS_DIR */
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

/* The targets in `refuse` have no subgroup matrix fragments of f's shapes and dtypes: each
 * refuses f with a message naming the target. */
static void check_refused(rx_module *m, const rx_tensor_fn *f, const char *const *refuse) {
  for (int ti = 0; refuse[ti]; ti++) {
    const rx_target *t;
    rx_status ts = tgt_target_parse(refuse[ti], &t);
    RX_ASSERT(!ts);
    rx_diag diag;
    base_diag_init(&diag);
    rx_sched_result sr;
    rx_kernel_list kl = {0};
    bool ok = sched_schedule(m, f, t, &diag, &sr) && rxk_codegen(m, sr.fn, t, &diag, &kl);
    const char *text = rx_diag_text(&diag);
    CHECK_MSG(!ok && strstr(text, "has no subgroup matrix unit") && strstr(text, t->name),
              "%s [%s]: expected 'has no subgroup matrix unit', got: %s", f->name, refuse[ti],
              ok ? "(compiled)" : text);
    base_diag_free(&diag);
  }
}

/* What a kernel of each target kind must contain: the fragments' multiply as printed. */
static const char *frag_mma_text(const rx_target *t) {
  switch (t->kind) {
  case RX_TARGET_METAL:
    return "simdgroup_multiply_accumulate(";
  case RX_TARGET_VULKAN:
    return "= coopMatMulAddNV(";
  case RX_TARGET_CUDA:
    break;
  }
  return "rx_frag_mma_";
}

/* The PTX of every kernel of CUDA p holds mma.sync.aligned.m16n8k16 (NVRTC; skipped without
 * it; rxk_prepare has checked NVRTC and ptxas's spills). */
static void check_ptx(const rxk_prepared *p) {
  for (int k = 0; p->ok && k < p->kl.n; k++) {
    const rx_kernel *kn = p->kl.kernels[k];
    char *ptx = rxk_nvrtc_ptx(p, kn, &st);
    if (ptx)
      CHECK_MSG(strstr(ptx, "mma.sync.aligned.m16n8k16.row.col.f32") != NULL,
                "%s: the PTX of %s has no mma.sync.aligned.m16n8k16", p->what, kn->name);
    free(ptx);
  }
}

/* One size of prog against ref: the interpreter, then the emulated kernels (MSL, CUDA C) of
 * each of the np targets in p. */
static void check_size(rx_module *m, const rx_tensor_fn *f, const rx_tensor_fn *fr,
                       const rxk_prepared *p, int np, const rxk_env *e, const char *at) {
  char why[512];
  rxk_buffers in, want, got;
  if (!rxk_make_buffers(f, e, &in, why, sizeof why)) {
    FAIL("%s at %s: %s", f->name, at, why);
    return;
  }
  rxk_copy_buffers(&in, &want);
  rx_status s = interp_run(m, fr, want.arg, want.n, NULL);
  if (s) {
    FAIL("%s at %s: the reference failed: %s", fr->name, at, rx_status_message(s));
  } else {
    rx_interp_opts o = {.subgroup_size = 32};
    rxk_copy_buffers(&in, &got);
    s = interp_run(m, f, got.arg, got.n, &o);
    if (s)
      FAIL("%s at %s: the interpreter failed: %s", f->name, at, rx_status_message(s));
    else if (!rxk_compare_outputs(f, &got, &want, why, sizeof why))
      FAIL("%s at %s: interpreter: %s", f->name, at, why);
    else
      st.passed++;
    rxk_free_buffers(&got);
  }
  for (int i = 0; !s && i < np; i++) {
    if (p[i].ok && p[i].emulate) {
      rxk_copy_buffers(&in, &got);
      if (!rxk_run_simt(&p[i], e, &got, why, sizeof why))
        FAIL("%s at %s: %s", p[i].what, at, why);
      else if (!rxk_compare_outputs(f, &got, &want, why, sizeof why))
        FAIL("%s at %s: emulated: %s", p[i].what, at, why);
      else
        st.passed++;
      rxk_free_buffers(&got);
    } else if (p[i].ok && (p[i].t->kind == RX_TARGET_METAL || p[i].t->sm == 80)) {
      st.skipped++; /* no clang for the emulator */
    }
  }
  rx_status_free(s);
  rxk_free_buffers(&in);
  rxk_free_buffers(&want);
}

#define MAX_ACCEPT 4

/* prog (with fragments) against ref (serial) at every size of m: compiled for every target of
 * `accept` (NULL-terminated; rxk_prepare: NVRTC with no spills, spirv-val, the emulator's
 * objects), its multiply printed, mma.sync in its PTX on CUDA; run in the interpreter and, for
 * metal-apple7 and cuda sm_80, in the emulator; refused by every target of `refuse`. */
static void check_pair(rx_module *m, const char *prog, const char *ref, const char *const *accept,
                       const char *const *refuse) {
  const rx_tensor_fn *f = rxk_find_fn(m, prog), *fr = rxk_find_fn(m, ref);
  if (!f || !fr) {
    FAIL("%s or %s is missing from tests/frag/frag_gemm.rx", prog, ref);
    return;
  }
  rxk_prepared p[MAX_ACCEPT];
  int np = 0;
  for (; accept[np]; np++) {
    RX_ASSERT(np < MAX_ACCEPT);
    const rx_target *t;
    rx_status ts = tgt_target_parse(accept[np], &t);
    RX_ASSERT(!ts);
    rxk_prepare(m, f, t, &st, &p[np]);
    const char *want = frag_mma_text(t);
    for (int k = 0; p[np].ok && k < p[np].kl.n; k++)
      CHECK_MSG(strstr(p[np].kl.kernels[k]->source, want) != NULL, "%s: the kernel has no %s",
                p[np].what, want);
    if (t->kind == RX_TARGET_CUDA) check_ptx(&p[np]);
  }
  check_refused(m, f, refuse);
  rxk_env base;
  rxk_program_vars(f, &base);
  static const int64_t sizes[] = {1, 7, 8, 33, 100};
  for (size_t si = 0; si < RX_ARRAY_LEN(sizes); si++) {
    rxk_env e = base;
    for (int v = 0; v < e.n; v++) e.values[v] = sizes[si];
    char at[64];
    snprintf(at, sizeof at, "m=%lld", (long long)sizes[si]);
    check_size(m, f, fr, p, np, &e, at);
  }
  for (int i = 0; i < np; i++) rxk_release(&p[i]);
}

/* The matmul rule's gemm_frag variant (passes/schedule/gemm_frag.c) for target (the kernels of
 * tests/kernels/gemm_frag.rx): it is chosen for more than 16 rows, and the scheduled program run
 * in the interpreter with subgroups of 32 matches the unscheduled one at n = 17, 64, 100 (for
 * metal-apple7 test_kernels also runs its MSL in the emulator at every size). */
static void check_gemm_frag(rx_module *m, const char *prog, const char *target) {
  const rx_tensor_fn *f = rxk_find_fn(m, prog);
  const rx_target *t;
  rx_status ts = tgt_target_parse(target, &t);
  RX_ASSERT(!ts && f);
  rxk_prepared p;
  rxk_prepare(m, f, t, &st, &p); /* shaderc and spirv-val for Vulkan, counted there */
  bool chosen = false;
  for (int v = 0; p.ok && v < p.sr.nvariants; v++)
    chosen |= p.sr.variants[v].name && !strcmp(p.sr.variants[v].name, "gemm_frag");
  CHECK_MSG(chosen, "%s: no gemm_frag variant", p.what);
  static const int64_t sizes[] = {17, 64, 100};
  rxk_env base;
  rxk_program_vars(f, &base);
  for (size_t si = 0; p.ok && si < RX_ARRAY_LEN(sizes); si++) {
    rxk_env e = base;
    for (int v = 0; v < e.n; v++) e.values[v] = sizes[si];
    char why[512];
    rxk_buffers in, want, got;
    if (!rxk_make_buffers(f, &e, &in, why, sizeof why)) {
      FAIL("%s at n=%lld: %s", p.what, (long long)sizes[si], why);
      continue;
    }
    rxk_copy_buffers(&in, &want);
    rxk_copy_buffers(&in, &got);
    rx_interp_opts o = {.subgroup_size = 32};
    rx_status s = interp_run(m, f, want.arg, want.n, NULL);
    if (!s) s = interp_run(m, p.sr.fn, got.arg, got.n, &o);
    if (s)
      FAIL("%s at n=%lld: %s", p.what, (long long)sizes[si], rx_status_message(s));
    else if (!rxk_compare_outputs(f, &got, &want, why, sizeof why))
      FAIL("%s at n=%lld: scheduled vs unscheduled: %s", p.what, (long long)sizes[si], why);
    else
      st.passed++;
    rx_status_free(s);
    rxk_free_buffers(&in);
    rxk_free_buffers(&want);
    rxk_free_buffers(&got);
  }
  rxk_release(&p);
}

/* The printer's round trip of the whole file. */
static void check_round_trip(rx_module *m) {
  rx_strbuf printed = {0}, again = {0};
  ir_module_print(&printed, m);
  static const char *const want[] = {"alloc fa: f16[8, 8] fragment a",
                                     "fragment acc",
                                     "frag fill fc, 0.0",
                                     "frag load fa, xs[0, kb * 8], 48",
                                     "frag mma fd, fa, fb, fc",
                                     "frag store fc, ts[0, 0], 8, col_major"};
  for (size_t i = 0; i < RX_ARRAY_LEN(want); i++)
    CHECK_MSG(strstr(printed.data, want[i]) != NULL, "the printer writes '%s'", want[i]);
  rx_module *m2 = NULL;
  char *msg = rxk_verify_text("frag.rx", printed.data, &m2);
  CHECK_MSG(!msg, "the printed module parses back: %s", msg ? msg : "");
  if (m2) {
    ir_module_print(&again, m2);
    CHECK_MSG(!strcmp(printed.data, again.data), "printing the parsed print gives the same text");
    rx_module_free(m2);
  }
  free(msg);
  base_strbuf_free(&printed);
  base_strbuf_free(&again);
}

/* The verifier's and the parser's messages for wrong fragments. */
static void check_verifier(void) {
  static const struct {
    const char *decl, *stmt, *want;
  } bad[] = {
      {"alloc fx: f16[8, 8] local", "frag mma fc, fx, fb, fc", "must be a fragment of use a"},
      {"alloc fx: f16[8, 8] fragment b", "frag mma fc, fx, fb, fc", "is a fragment of use b"},
      {"alloc fx: f16[8, 4] fragment a", "frag mma fc, fx, fb, fc", "shapes do not agree"},
      {"alloc fx: f32[8, 8] fragment a", "frag mma fc, fx, fb, fc", "A and B must share a dtype"},
      {"alloc fx: f16[8, 8] fragment a", "frag load fx, y[0], 8", "(no conversion on the way)"},
      {"alloc fx: f16[8, 8] fragment a", "frag load fx, h[0], 8.0", "stride of frag load must be"},
      {"alloc fx: f16[8, 8] fragment a", "frag store fx, h[0], 8", "input buffer 'h'"},
      {"alloc fx: f16[8, 8] fragment a", "y[0] = f32(fx[0, 0])", "'fx' is a fragment"},
      {"alloc fx: f16[8] fragment a", "frag fill fx, 0.0", "two constant positive dimensions"},
      {"alloc fx: f16[8, 8] fragment q", "frag fill fx, 0.0", "a, b or acc"},
      {"alloc fx: f16[8, 8] fragment a", "frag copy fx, 0.0", "fill, load, mma or store"},
      {"alloc fx: f16[8, 8] local", "frag load fx, h[0], 8", "'fx' is not a fragment"},
  };
  for (size_t i = 0; i < RX_ARRAY_LEN(bad); i++) {
    char text[1024];
    snprintf(text, sizeof text,
             "tensor_fn t(h: f16[64], out y: f32[64]) {\n  for g in 0..1 bind(blockIdx.x) {\n"
             "    for l in 0..32 bind(threadIdx.x) {\n      alloc fb: f16[8, 8] fragment b\n"
             "      alloc fc: f32[8, 8] fragment acc\n      %s\n      %s\n    }\n  }\n}\n",
             bad[i].decl, bad[i].stmt);
    char *msg = rxk_verify_text("frag.rx", text, NULL);
    CHECK_MSG(msg && strstr(msg, bad[i].want), "bad frag %zu: expected '%s', got: %s", i,
              bad[i].want, msg ? msg : "(accepted)");
    free(msg);
  }
}

/* body runs in one block of 32 threads over h: f16[64] and y: f32[64]; the interpreter must
 * refuse it with a message holding want. */
static void check_interp_error(const char *body, const char *want) {
  char text[1024];
  snprintf(text, sizeof text,
           "tensor_fn t(h: f16[64], out y: f16[64]) {\n  for g in 0..1 bind(blockIdx.x) {\n"
           "    for l in 0..32 bind(threadIdx.x) {\n      alloc fa: f16[8, 8] fragment a\n"
           "      %s\n    }\n  }\n}\n",
           body);
  rx_module *md = NULL;
  char *msg = rxk_verify_text("frag.rx", text, &md);
  CHECK_MSG(!msg, "the program verifies: %s\n%s", msg ? msg : "", text);
  free(msg);
  if (!md) return;
  uint16_t h[64] = {0}, y[64];
  rx_interp_arg args[2] = {{.data = h, .shape = {64}, .ndim = 1, .dtype = RX_DTYPE_F16},
                           {.data = y, .shape = {64}, .ndim = 1, .dtype = RX_DTYPE_F16}};
  rx_interp_opts o = {.subgroup_size = 32};
  rx_status s = interp_run(md, rxk_find_fn(md, "t"), args, 2, &o);
  CHECK_MSG(s && strstr(rx_status_message(s), want), "expected an error with '%s', got %s", want,
            s ? rx_status_message(s) : "success");
  rx_status_free(s);
  rx_module_free(md);
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  const char *dir = argc > 1 ? argv[1] : "tests";
  rx_module *m = rxk_load_test_module(dir, "frag/frag_gemm.rx");
  if (!m) return 1;
  /* 8x8: Metal only; 16x16x16 f16: vulkan-nvidia and CUDA; bf16: CUDA only */
  static const char *const metal[] = {"metal-apple7", NULL};
  static const char *const f16_16[] = {"vulkan-nvidia", "cuda -arch=sm_80", "cuda -arch=sm_90",
                                       NULL};
  static const char *const bf16_16[] = {"cuda -arch=sm_80", "cuda -arch=sm_90", NULL};
  static const char *const not8[] = {"cuda -arch=sm_80", "cuda -arch=sm_90", "vulkan",
                                     "vulkan-lavapipe",  "vulkan-nvidia",    NULL};
  static const char *const not16[] = {"vulkan", "vulkan-lavapipe", "metal-apple7", NULL};
  static const char *const not16bf[] = {"vulkan", "vulkan-lavapipe", "metal-apple7",
                                        "vulkan-nvidia", NULL};
  check_pair(m, "frag_gemm", "frag_gemm_ref", metal, not8);
  check_pair(m, "frag_gemm_nt", "frag_gemm_nt_ref", metal, not8);
  check_pair(m, "frag_gemm16", "frag_gemm16_ref", f16_16, not16);
  check_pair(m, "frag_gemm16_nt", "frag_gemm16_nt_ref", f16_16, not16);
  check_pair(m, "frag_gemm16_bf16", "frag_gemm16_bf16_ref", bf16_16, not16bf);
  check_round_trip(m);
  check_verifier();
  check_interp_error("if l < 16 { frag fill fa, 1.0 }", "subgroup divergence");
  check_interp_error("frag load fa, h[l % 2], 8", "the operands differ across the subgroup");
  check_interp_error("frag load fa, h[8], 8", "is element 64 of `h`, which has 64");
  check_interp_error("frag store fa, y[0], 8, col_major\n      frag load fa, h[0], 9",
                     "element (7, 1) of the fragment");
  rx_module_free(m);
  m = rxk_load_test_module(dir, "kernels/gemm_frag.rx");
  if (!m) return 1;
  static const char *const progs[] = {"frag_proj", "frag_xw", "frag_batched"};
  for (size_t i = 0; i < RX_ARRAY_LEN(progs); i++) {
    check_gemm_frag(m, progs[i], "metal-apple7");
    if (i < 2) check_gemm_frag(m, progs[i], "vulkan-nvidia"); /* f16 only there */
  }
  rx_module_free(m);
  /* the pipeline's counts (rxk_stats: support_pipeline.h) with this file's checks */
  check_passed += st.passed;
  check_failed += st.failed;
  check_skipped += st.skipped;
  return check_finish("fragments");
}
