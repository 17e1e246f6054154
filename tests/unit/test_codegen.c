/* Code generation (codegen/): hand-scheduled programs (elementwise with a tail guard,
 * shared-memory tree reduction, subgroup reduction, subgroup shuffle (shuffle_xor), GEMV with f16
 * inputs and f32 accumulation, tiled GEMM with shared tiles) at symbolic sizes 1, 7, 33, 128, 1000,
 * 4099:
 *   - the emitted CUDA C and MSL run in the SIMT emulator (tests/simt) and match the reference
 *     interpreter: f32 within 1e-5 relative (|got - want| <= 1e-5 * max(1, |want|): summation
 *     orders differ), f16 outputs within 1e-2 relative (same form);
 *   - the emitted GLSL compiles with shaderc and passes spirv-val (rxk_codegen);
 *   - the emitted CUDA C compiles with NVRTC for sm_80 and sm_90 and ptxas reports no spills;
 *   - a kernel with 41 symbolic values uses the uniform-buffer path on Vulkan;
 *   - limits and unsupported constructs are diagnostics, not crashes.
 * Missing toolchains (clang++-16, shaderc, NVRTC, ptxas) count as skipped, never passed.
 *
 * usage: test_codegen [TESTS_DIR]   (the programs are read from TESTS_DIR/codegen/) */
#include "check.h"
#include "codegen/codegen.h"
#include "interp/interp.h"
#include "simt_harness.h"
#include "support_pipeline.h" /* rxk_codegen */
#include "targets/toolchain.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static float frand(void) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return (float)((double)(rng >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

static const char *tests_dir = "tests";

static rx_module *load(const char *file) {
  char path[1024];
  snprintf(path, sizeof path, "%s/codegen/%s", tests_dir, file);
  char *text = NULL;
  size_t len = 0;
  rx_status st = base_read_file(path, &text, &len);
  if (st) {
    check_failed++;
    fprintf(stderr, "FAIL: %s\n", rx_status_message(st));
    rx_status_free(st);
    return NULL;
  }
  rx_module *m = rx_module_new();
  rx_diag d;
  base_diag_init(&d);
  bool ok = ir_parse_module(m, path, text, len, &d) && ops_module_normalize(m, &d) &&
            ir_module_verify(m, &d);
  if (!ok) {
    check_failed++;
    fprintf(stderr, "FAIL: %s rejected:\n%s\n", path, rx_diag_text(&d));
    rx_module_free(m);
    m = NULL;
  }
  base_diag_free(&d);
  free(text);
  return m;
}

static rx_tensor_fn *first_fn(rx_module *m) {
  for (size_t i = 0; i < m->items.len; i++)
    if (m->items.data[i].kind == RX_ITEM_TENSOR) return m->items.data[i].fn;
  return NULL;
}

static bool gen(rx_module *m, rx_tensor_fn *f, const char *target, rx_kernel_list *out) {
  const rx_target *t = NULL;
  rx_status st = tgt_target_parse(target, &t);
  if (st) {
    rx_status_free(st);
    return false;
  }
  rx_diag d;
  base_diag_init(&d);
  bool ok = rxk_codegen(m, f, t, &d, out);
  if (!ok) fprintf(stderr, "codegen %s for %s:\n%s\n", f->name, target, rx_diag_text(&d));
  base_diag_free(&d);
  return ok;
}

/* ---- one program at one size on CUDA/Metal in the emulator vs the interpreter ---- */

typedef struct var_value {
  const char *name;
  int64_t value;
} var_value;

static int64_t lookup(const var_value *vv, int nv, const char *name) {
  for (int i = 0; i < nv; i++)
    if (strcmp(vv[i].name, name) == 0) return vv[i].value;
  return -1;
}

static size_t dsize(rx_dtype t) { return t == RX_DTYPE_F16 || t == RX_DTYPE_BF16 ? 2 : 4; }
static float get(const void *p, rx_dtype t, size_t i) {
  if (t == RX_DTYPE_F16) return base_f16_to_f32(((const uint16_t *)p)[i]);
  return ((const float *)p)[i];
}

/* Evaluates an expression over the variable values. */
static int64_t eval(rx_module *m, const rx_expr *e, const var_value *vv, int nv) {
  const rx_expr *vars[16];
  int64_t vals[16];
  for (int i = 0; i < nv; i++) {
    vars[i] = sym_expr_var(m->ctx, vv[i].name);
    vals[i] = vv[i].value;
  }
  rx_expr_env env = {vars, vals, (size_t)nv};
  int64_t r = -1;
  sym_expr_eval(e, &env, &r);
  return r;
}

static void run_case(rx_module *m, rx_tensor_fn *f, const var_value *vv, int nv, double tol,
                     const rx_kernel_list *kl_cuda, const rx_kernel_list *kl_msl,
                     bool *have_clang) {
  int np = f->nparams;
  rx_interp_arg *ref = calloc((size_t)np, sizeof *ref);
  void **host = calloc((size_t)np, sizeof(void *));
  size_t *bytes = calloc((size_t)np, sizeof(size_t));
  for (int i = 0; i < np; i++) {
    rx_param *p = f->params[i];
    if (p->kind == RX_PARAM_SCALAR) {
      ref[i].value = lookup(vv, nv, p->var->name);
      continue;
    }
    rx_buffer *b = p->buf;
    size_t n = 1;
    ref[i].ndim = b->ndim;
    ref[i].dtype = b->dtype;
    for (int d = 0; d < b->ndim; d++) {
      ref[i].shape[d] = eval(m, b->shape[d], vv, nv);
      n *= (size_t)ref[i].shape[d];
    }
    bytes[i] = n * dsize(b->dtype);
    host[i] = calloc(n ? n : 1, dsize(b->dtype));
    ref[i].data = calloc(n ? n : 1, dsize(b->dtype));
    if (!p->is_output)
      for (size_t j = 0; j < n; j++) {
        float x = frand();
        if (b->dtype == RX_DTYPE_F16)
          ((uint16_t *)host[i])[j] = base_f32_to_f16(x);
        else
          ((float *)host[i])[j] = x;
      }
    memcpy(ref[i].data, host[i], bytes[i]);
  }
  rx_interp_opts opts = {.subgroup_size = 32};
  rx_status st = interp_run(m, f, ref, np, &opts);
  char what[128];
  snprintf(what, sizeof what, "%s at %s=%lld", f->name, vv[0].name, (long long)vv[0].value);
  CHECK_MSG(!st, "%s: interpreter: %s", what, rx_status_message(st));
  rx_status_free(st);

  for (int lang = 0; lang < 2 && *have_clang; lang++) {
    const rx_kernel_list *kl = lang == 0 ? kl_cuda : kl_msl;
    if (!kl) continue;
    void **dev = calloc((size_t)np, sizeof(void *));
    for (int i = 0; i < np; i++)
      if (f->params[i]->kind == RX_PARAM_BUFFER) {
        dev[i] = malloc(bytes[i] ? bytes[i] : 1);
        memcpy(dev[i], host[i], bytes[i]);
      }
    bool ok = true;
    for (int q = 0; q < kl->n && ok; q++) {
      rx_kernel *k = kl->kernels[q];
      simt_module *sm = NULL;
      char *err = NULL;
      char label[128];
      snprintf(label, sizeof label, "%s.%s", k->name, lang == 0 ? "cu" : "metal");
      if (simt_module_compile(NULL, lang == 0 ? SIMT_CUDA : SIMT_METAL, k->source, label, &sm,
                              &err)) {
        if (err && strstr(err, "clang") && strstr(err, "not found")) {
          *have_clang = false;
          check_skipped++;
        } else {
          CHECK_MSG(0, "%s: %s does not compile in the emulator:\n%s\n%s", what, label,
                    err ? err : "", k->source);
        }
        free(err);
        ok = false;
        break;
      }
      simt_kernel *sk = simt_module_kernel(sm, k->name);
      unsigned grid[3], block[3];
      bool empty = false;
      for (int a = 0; a < 3; a++) {
        int64_t g = eval(m, k->grid[a], vv, nv);
        grid[a] = (unsigned)g;
        block[a] = (unsigned)k->block[a];
        empty |= g <= 0;
      }
      void *args[64];
      void *ptrs[64];
      int ints[64];
      int nbuf = 0, nint = 0;
      for (int a = 0; a < k->nargs; a++) {
        rx_karg *g = &k->args[a];
        if (g->kind == RX_KARG_BUFFER) {
          ptrs[a] = dev[g->param];
          args[a] = lang == 0 ? (void *)&ptrs[a] : ptrs[a];
          nbuf++;
        } else {
          ints[nint] = (int)lookup(vv, nv, g->name);
          if (lang == 0) args[a] = &ints[nint];
          nint++;
        }
      }
      int nargs = lang == 0 ? k->nargs : nbuf + (nint ? 1 : 0);
      if (lang == 1 && nint) args[nbuf] = ints;
      if (!empty && simt_launch(sk, grid, block, 0, args, nargs, &err)) {
        CHECK_MSG(0, "%s: launch of %s failed: %s", what, label, err ? err : "");
        free(err);
        ok = false;
      }
      simt_module_free(sm);
    }
    if (ok) {
      double worst = 0;
      size_t bad = (size_t)-1;
      for (int i = 0; i < np; i++) {
        if (f->params[i]->kind != RX_PARAM_BUFFER || !f->params[i]->is_output) continue;
        rx_dtype t = f->params[i]->buf->dtype;
        size_t n = bytes[i] / dsize(t);
        for (size_t j = 0; j < n; j++) {
          double want = get(ref[i].data, t, j), got = get(dev[i], t, j);
          double err = fabs(got - want) / fmax(1.0, fabs(want));
          if (!(err <= worst)) {
            worst = err;
            bad = j;
          }
        }
      }
      CHECK_MSG(worst <= tol, "%s: %s differs from the interpreter: error %g at %zu", what,
                lang == 0 ? "CUDA" : "MSL", worst, bad);
    }
    for (int i = 0; i < np; i++) free(dev[i]);
    free(dev);
  }
  for (int i = 0; i < np; i++) {
    free(host[i]);
    free(ref[i].data);
  }
  free(ref);
  free(host);
  free(bytes);
}

/* ---- NVRTC + ptxas, shaderc + spirv-val ---- */

static void check_nvrtc(const rx_kernel_list *kl, const char *what) {
  static int have = -1;
  if (have < 0) {
    rx_status st = tgt_nvrtc_load(NULL, NULL);
    have = st == NULL;
    if (st) fprintf(stderr, "note: NVRTC checks skipped: %s\n", rx_status_message(st));
    rx_status_free(st);
  }
  if (!have) {
    check_skipped++;
    return;
  }
  static const char *archs[] = {"sm_80", "sm_90"};
  for (int q = 0; q < kl->n; q++)
    for (int a = 0; a < 2; a++) {
      char *ptx = NULL, *log = NULL;
      size_t len = 0;
      char compute[16];
      snprintf(compute, sizeof compute, "compute_%s", archs[a] + 3);
      rx_status st =
          tgt_nvrtc_compile(kl->kernels[q]->source, "k.cu", compute, false, &ptx, &len, &log);
      CHECK_MSG(!st, "%s: NVRTC %s: %s\n%s", what, archs[a], rx_status_message(st),
                kl->kernels[q]->source);
      rx_status_free(st);
      if (ptx) {
        rx_ptxas_info info = {0};
        st = tgt_ptxas_report(ptx, archs[a], &info);
        if (st && rx_status_code_of(st) == RX_ERR_NOT_FOUND) {
          check_skipped++;
        } else {
          CHECK_MSG(!st, "%s: ptxas %s: %s", what, archs[a], rx_status_message(st));
          if (!st)
            CHECK_MSG(info.spill_bytes == 0, "%s: %d spill bytes on %s", what, info.spill_bytes,
                      archs[a]);
          tgt_ptxas_info_free(&info);
        }
        rx_status_free(st);
      }
      free(ptx);
      free(log);
    }
}

static void check_glsl(rx_module *m, rx_tensor_fn *f, const char *what) {
  if (!tgt_shaderc_available()) {
    check_skipped++;
    return;
  }
  rx_kernel_list kl = {0};
  bool ok = gen(m, f, "vulkan-lavapipe", &kl);
  CHECK_MSG(ok, "%s: GLSL generation/compilation failed", what);
  for (int q = 0; ok && q < kl.n; q++)
    CHECK_MSG(kl.kernels[q]->spirv && kl.kernels[q]->spirv_words > 5, "%s: no SPIR-V", what);
}

/* ---- the programs ---- */

typedef struct prog_case {
  const char *file;
  const char *sizevar; /* the symbolic dimension swept over the sizes */
  var_value fixed[4];  /* the other variables */
  int nfixed;
  double tol;
} prog_case;

static void test_program(const prog_case *pc, bool *have_clang) {
  rx_module *m = load(pc->file);
  if (!m) return;
  rx_tensor_fn *f = first_fn(m);
  rx_kernel_list cu = {0}, ms = {0};
  bool okc = gen(m, f, "cuda", &cu), okm = gen(m, f, "metal", &ms);
  CHECK_MSG(okc && okm, "%s: codegen failed", pc->file);
  if (!okc || !okm) {
    rx_module_free(m);
    return;
  }
  check_nvrtc(&cu, pc->file);
  check_glsl(m, f, pc->file);
  static const int64_t sizes[] = {1, 7, 33, 128, 1000, 4099};
  for (size_t s = 0; s < RX_ARRAY_LEN(sizes); s++) {
    var_value vv[5];
    vv[0].name = pc->sizevar;
    vv[0].value = sizes[s];
    for (int i = 0; i < pc->nfixed; i++) vv[1 + i] = pc->fixed[i];
    run_case(m, f, vv, 1 + pc->nfixed, pc->tol, &cu, &ms, have_clang);
    if (!*have_clang) check_skipped++;
  }
  rx_module_free(m);
}

/* More symbolic values than 128 bytes of push constants: the uniform-buffer path. */
static void test_uniform_buffer(void) {
  rx_strbuf t = {0};
  base_strbuf_append(&t, "tensor_fn many(a: f32[n], out c: f32[n]");
  for (int i = 0; i < 40; i++) base_strbuf_printf(&t, ", s%d: i64", i);
  base_strbuf_append(&t, ") where n <= 65536 {\n  for bx in 0..(n + 63) // 64 bind(blockIdx.x) {\n"
                         "    for tx in 0..64 bind(threadIdx.x) {\n      if bx * 64 + tx < n {\n"
                         "        c[bx * 64 + tx] = a[bx * 64 + tx] + f32(0");
  for (int i = 0; i < 40; i++) base_strbuf_printf(&t, " + s%d", i);
  base_strbuf_append(&t, ")\n      }\n    }\n  }\n}\n");
  rx_module *m = rx_module_new();
  rx_diag d;
  base_diag_init(&d);
  bool ok = ir_parse_module(m, "<many>", t.data, t.len, &d) && ops_module_normalize(m, &d) &&
            ir_module_verify(m, &d);
  CHECK_MSG(ok, "many: rejected: %s", rx_diag_text(&d));
  if (ok) {
    rx_kernel_list kl = {0};
    ok = gen(m, first_fn(m), "vulkan-lavapipe", &kl);
    CHECK_MSG(ok && kl.n == 1, "many: codegen failed");
    if (ok) {
      rx_kernel *k = kl.kernels[0];
      CHECK_MSG(k->uses_ubo && k->scalar_bytes == 176, "many: uses_ubo %d, %d bytes", k->uses_ubo,
                k->scalar_bytes);
      CHECK_MSG(strstr(k->source, "uniform rx_ubo { ivec4 v[11]; }") != NULL,
                "many: no uniform block");
      if (tgt_shaderc_available())
        CHECK_MSG(k->spirv != NULL, "many: not compiled");
      else
        check_skipped++;
      rx_strbuf js = {0};
      const rx_tensor_fn *progs[1] = {first_fn(m)};
      const rx_kernel_list *lists[1] = {&kl};
      cg_kernels_json(&js, k->lang == RX_LANG_GLSL ? tgt_target_find("vulkan-lavapipe") : NULL,
                      progs, lists, 1);
      CHECK_MSG(strstr(js.data, "\"location\": \"uniform_buffer\", \"bytes\": 176, \"binding\": 2"),
                "many: kernels.json:\n%s", js.data);
      base_strbuf_free(&js);
      /* CUDA takes them as parameters */
      rx_kernel_list kc = {0};
      CHECK_MSG(gen(m, first_fn(m), "cuda", &kc) && kc.kernels[0]->nargs == 43, "many: CUDA args");
    }
  }
  base_diag_free(&d);
  rx_module_free(m);
  base_strbuf_free(&t);
}

/* Errors are diagnostics: shared memory over the limit, a subgroup reduction of bf16 on Vulkan
 * (GLSL computes bf16 in f32 but has no bf16 subgroup operations), of i64 where the target has
 * no extended subgroup types (Adreno's drivers, MSL), non-constant blocks. */
static void test_errors(void) {
  static const struct {
    const char *text, *target, *expect;
  } cases[] = {
      {"tensor_fn big(out c: f32[n]) {\n  for b in 0..n bind(blockIdx.x) {\n"
       "    alloc s: f32[20000] shared\n    for t in 0..64 bind(threadIdx.x) { s[t] = 1.0 }\n"
       "    barrier\n    for t in 0..1 bind(threadIdx.x) { c[b] = s[0] }\n  }\n}\n",
       "vulkan-lavapipe", "shared memory"},
      {"tensor_fn bf(a: bf16[n], out c: bf16[n]) {\n  for b in 0..n bind(blockIdx.x) {\n"
       "    for t in 0..32 bind(threadIdx.x) { c[b] = subgroup_sum(a[b]) }\n  }\n}\n",
       "vulkan-lavapipe", "bf16"},
      {"tensor_fn wide(a: i64[n], out c: i64[n]) {\n  for b in 0..n bind(blockIdx.x) {\n"
       "    for t in 0..64 bind(threadIdx.x) { c[b] = subgroup_sum(a[b]) }\n  }\n}\n",
       "vulkan-adreno", "subgroup operation on i64"},
      {"tensor_fn wide(a: i64[n], out c: i64[n]) {\n  for b in 0..n bind(blockIdx.x) {\n"
       "    for t in 0..32 bind(threadIdx.x) { c[b] = subgroup_sum(a[b]) }\n  }\n}\n",
       "metal", "64-bit simd_sum"},
      {"tensor_fn odd(a: f32[n], out c: f32[n]) {\n  for b in 0..n bind(blockIdx.x) {\n"
       "    for t in 0..48 bind(threadIdx.x) { c[b] = subgroup_sum(a[b]) }\n  }\n}\n",
       "cuda", "multiple of 32"},
      {"tensor_fn huge(out c: f32[n]) {\n  for b in 0..n bind(blockIdx.x) {\n"
       "    for t in 0..2048 bind(threadIdx.x) { c[b] = 1.0 }\n  }\n}\n",
       "metal", "exceeds"},
  };
  for (size_t i = 0; i < RX_ARRAY_LEN(cases); i++) {
    rx_module *m = rx_module_new();
    rx_diag d;
    base_diag_init(&d);
    bool ok = ir_parse_module(m, "<err>", cases[i].text, strlen(cases[i].text), &d) &&
              ops_module_normalize(m, &d) && ir_module_verify(m, &d);
    CHECK_MSG(ok, "error case %zu rejected early: %s", i, rx_diag_text(&d));
    if (ok) {
      const rx_target *t = NULL;
      rx_status_free(tgt_target_parse(cases[i].target, &t));
      rx_kernel_list kl = {0};
      bool g = rxk_codegen(m, first_fn(m), t, &d, &kl);
      CHECK_MSG(!g && strstr(rx_diag_text(&d), cases[i].expect),
                "error case %zu: expected an error with '%s', got %s:\n%s", i, cases[i].expect,
                g ? "success" : "failure", rx_diag_text(&d));
    }
    base_diag_free(&d);
    rx_module_free(m);
  }
}

int main(int argc, char **argv) {
  if (argc > 1) tests_dir = argv[1];
  bool have_clang = true;
  static const prog_case cases[] = {
      {"elementwise.rx", "n", {{0}}, 0, 1e-5},
      {"rowsum_tree.rx", "m", {{"n", 3}}, 1, 1e-5},
      {"rowsum_sg.rx", "m", {{"n", 3}, {"sg", 32}}, 2, 1e-5},
      {"gemv_f16.rx", "m", {{"k", 37}}, 1, 1e-2},
      {"gemm_tiled.rx", "n", {{"m", 19}, {"k", 23}}, 2, 1e-5},
      {"transpose.rx", "n", {{"m", 35}}, 1, 0},
      {"shuffle_xor.rx", "n", {{0}}, 0, 0},
  };
  for (size_t i = 0; i < RX_ARRAY_LEN(cases); i++) test_program(&cases[i], &have_clang);
  test_uniform_buffer();
  test_errors();
  return check_finish("codegen");
}
