#include "support_pipeline.h"

#include "targets/toolchain.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void rxk_fail(rxk_stats *st, const char *fmt, ...) {
  st->failed++;
  va_list ap;
  va_start(ap, fmt);
  fputs("FAIL: ", stderr);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
}

/* ---- codegen with SPIR-V, as the tests take it ---- */

/* Compiles one GLSL kernel to SPIR-V and validates it, where the toolchain is present. */
static bool compile_spirv(rx_module *m, rx_kernel *k, rx_diag *diag, rx_loc loc) {
  if (!tgt_shaderc_available()) return true;
  uint32_t *words = NULL;
  size_t n = 0;
  char label[256];
  snprintf(label, sizeof label, "%s.comp", k->name);
  rx_status st = tgt_glsl_to_spirv(k->source, strlen(k->source), label, &words, &n);
  if (!st && tgt_spirv_tools_available()) st = tgt_spirv_validate(words, n);
  if (st) {
    base_diag_report(diag, RX_DIAG_ERROR, loc, "kernel '%s': the emitted GLSL does not compile: %s",
                     k->name, rx_status_message(st));
    rx_status_free(st);
    free(words);
    return false;
  }
  k->spirv = base_arena_dup(&m->arena, words, n * sizeof(uint32_t));
  k->spirv_words = n;
  free(words);
  return true;
}

bool rxk_codegen(rx_module *m, const rx_tensor_fn *scheduled, const rx_target *t, rx_diag *diag,
                 rx_kernel_list *out) {
  if (!cg_codegen_rules(m, scheduled, t, NULL, 0, diag, out)) return false;
  bool ok = true;
  if (t->kind == RX_TARGET_VULKAN)
    for (int i = 0; i < out->n && ok; i++)
      ok = compile_spirv(m, out->kernels[i], diag, (rx_loc){0});
  return ok;
}

/* ---- running the generated kernels in the SIMT emulator ---- */

static simt_options simt_opts;

/* The error buffer of run-time checks (docs/kernel-abi.md) that emulated kernels write:
 * cleared by rxk_run_simt before a run and read after it. */
static int32_t simt_err[RX_CHECK_WORDS];

bool rxk_simt_launch(const rx_kernel *kn, simt_module *mod, const rxk_env *e, rxk_buffers *b,
                     simt_coalescing *acc, unsigned max_blocks, char *msg, size_t n) {
  return rxk_simt_launch_only(kn, mod, e, b, acc, max_blocks, -1, msg, n);
}

bool rxk_simt_launch_only(const rx_kernel *kn, simt_module *mod, const rxk_env *e, rxk_buffers *b,
                          simt_coalescing *acc, unsigned max_blocks, int only, char *msg,
                          size_t n) {
  int64_t v;
  unsigned grid[3];
  for (int a = 0; a < 3; a++) {
    if (!rxk_eval(kn->grid[a], e, &v) || v < 0 || v > 0x7fffffff)
      return snprintf(msg, n, "%s: grid[%d] not evaluable", kn->name, a), false;
    grid[a] = (unsigned)v;
  }
  if (grid[0] == 0 || grid[1] == 0 || grid[2] == 0) return true; /* nothing to launch */
  unsigned block[3] = {(unsigned)kn->block[0], (unsigned)kn->block[1], (unsigned)kn->block[2]};
  void *args[RXK_MAX_PARAMS + RXK_MAX_VARS + 1], *ptrs[RXK_MAX_PARAMS + RXK_MAX_VARS];
  int32_t scalars[RXK_MAX_VARS + 64];
  unsigned char params_struct[512];
  memset(params_struct, 0, sizeof params_struct);
  simt_range ranges[RXK_MAX_PARAMS];
  int nargs = 0, nranges = 0;
  bool metal = kn->lang == RX_LANG_MSL;
  for (int a = 0; a < kn->nargs; a++) {
    const rx_karg *ka = &kn->args[a];
    if (ka->kind == RX_KARG_BUFFER && ka->error) {
      ptrs[a] = simt_err;
      args[nargs++] = metal ? ptrs[a] : (void *)&ptrs[a];
    } else if (ka->kind == RX_KARG_BUFFER) {
      ptrs[a] = b->arg[ka->param].data;
      args[nargs++] = metal ? ptrs[a] : (void *)&ptrs[a];
      if (only < 0 || ka->param == only)
        ranges[nranges++] = (simt_range){ptrs[a], b->bytes[ka->param]};
    } else {
      if (!rxk_eval(ka->var, e, &v) || v < INT32_MIN || v > INT32_MAX)
        return snprintf(msg, n, "%s: scalar %s not evaluable", kn->name, ka->name), false;
      scalars[a] = (int32_t)v;
      if (metal) {
        RX_ASSERT(ka->offset >= 0 && (size_t)ka->offset + 4 <= sizeof params_struct);
        memcpy(params_struct + ka->offset, &scalars[a], 4);
      } else {
        args[nargs++] = &scalars[a];
      }
    }
  }
  if (metal && kn->scalar_bytes > 0) args[nargs++] = params_struct;
  simt_kernel *sk = simt_module_kernel(mod, kn->name);
  if (!sk) return snprintf(msg, n, "%s: kernel not found in its object", kn->name), false;
  char *err = NULL;
  /* as runtime/cuda/cuda.c launches: the kernel's shared bytes as dynamic shared memory (used by
   * the kernels that declare it: wgmma's, codegen/cuda.c) */
  size_t dyn = metal ? 0 : (size_t)kn->shared_bytes;
  if (acc ? simt_launch_traced(sk, grid, block, dyn, args, nargs, ranges, nranges, max_blocks, acc,
                               &err)
          : simt_launch(sk, grid, block, dyn, args, nargs, &err)) {
    snprintf(msg, n, "%s: launch failed: %s", kn->name, err);
    free(err);
    return false;
  }
  return true;
}

/* The failed run-time check of kl's kernels that simt_err holds, as a message; false: none. */
static bool simt_check(const rx_kernel_list *kl, char *msg, size_t n) {
  if (!simt_err[0]) return false;
  int64_t v = (int64_t)(((uint64_t)(uint32_t)simt_err[2] << 32) | (uint32_t)simt_err[1]);
  for (int k = 0; k < kl->n; k++)
    for (int c = 0; c < kl->kernels[k]->nchecks; c++)
      if (base_check_code(kl->kernels[k]->checks[c]) == simt_err[0]) {
        char *m = base_check_format(kl->kernels[k]->checks[c], v);
        snprintf(msg, n, "%s", m ? m : "?");
        free(m);
        return true;
      }
  snprintf(msg, n, "a run-time check failed with code %d, which no kernel lists", simt_err[0]);
  return true;
}

bool rxk_run_simt(const rxk_prepared *p, const rxk_env *e, rxk_buffers *b, char *msg, size_t n) {
  const rx_kernel_list *kl = &p->kl;
  memset(simt_err, 0, sizeof simt_err);
  for (int k = 0; k < kl->n; k++) {
    const rx_kernel *kn = kl->kernels[k];
    int64_t v;
    if (kn->cond) {
      if (!rxk_eval(kn->cond, e, &v))
        return snprintf(msg, n, "%s: condition not evaluable", kn->name), false;
      if (!v) continue;
    }
    if (!rxk_simt_launch(kn, p->mods[k], e, b, NULL, 0, msg, n)) return false;
  }
  return !simt_check(kl, msg, n);
}

/* ---- one program on one target ---- */

static void check_cuda_toolchain(const rx_kernel_list *kl, const char *arch, const char *what,
                                 rxk_stats *st) {
  static int nvrtc_state; /* 0 unknown, 1 present, -1 absent */
  if (nvrtc_state == 0) {
    int mj, mn;
    rx_status s = tgt_nvrtc_load(&mj, &mn);
    nvrtc_state = s ? -1 : 1;
    if (s) printf("  NVRTC absent, CUDA compilation skipped: %s\n", rx_status_message(s));
    rx_status_free(s);
  }
  for (int k = 0; k < kl->n; k++) {
    const rx_kernel *kn = kl->kernels[k];
    if (nvrtc_state < 0) {
      st->skipped++;
      continue;
    }
    char *ptx = NULL, *log = NULL;
    size_t len = 0;
    rx_status s = tgt_nvrtc_compile(kn->source, kn->name, arch, false, &ptx, &len, &log);
    if (s) {
      rxk_fail(st, "%s: %s: NVRTC %s: %s\n%s\n--- source\n%s", what, kn->name, arch,
               rx_status_message(s), log ? log : "", kn->source);
      rx_status_free(s);
    } else {
      rx_ptxas_info info;
      rx_status ps = tgt_ptxas_report(ptx, arch, &info);
      if (rx_status_code_of(ps) == RX_ERR_NOT_FOUND) {
        st->skipped++;
      } else if (ps) {
        rxk_fail(st, "%s: %s: ptxas %s: %s", what, kn->name, arch, rx_status_message(ps));
      } else if (info.spill_bytes != 0) {
        rxk_fail(st, "%s: %s: ptxas %s reports %d spill bytes\n%s", what, kn->name, arch,
                 info.spill_bytes, info.log);
      } else {
        st->passed++;
      }
      if (!ps) tgt_ptxas_info_free(&info);
      rx_status_free(ps);
    }
    free(ptx);
    free(log);
  }
}

static void check_spirv(const rx_kernel_list *kl, const char *what, rxk_stats *st) {
  for (int k = 0; k < kl->n; k++) {
    const rx_kernel *kn = kl->kernels[k];
    if (!tgt_shaderc_available() || !tgt_spirv_tools_available()) {
      st->skipped++;
      continue;
    }
    if (!kn->spirv) {
      rxk_fail(st, "%s: %s: no SPIR-V although shaderc is present", what, kn->name);
      continue;
    }
    rx_status s = tgt_spirv_validate(kn->spirv, kn->spirv_words);
    if (s)
      rxk_fail(st, "%s: %s: spirv-val: %s", what, kn->name, rx_status_message(s));
    else
      st->passed++;
    rx_status_free(s);
  }
}

void rxk_prepare(rx_module *m, const rx_tensor_fn *f, const rx_target *t, rxk_stats *st,
                 rxk_prepared *p) {
  memset(p, 0, sizeof *p);
  p->t = t;
  snprintf(p->what, sizeof p->what, "%s [%s]", f->name, t->name);
  rx_diag diag;
  base_diag_init(&diag);
  if (!sched_schedule(m, f, t, &diag, &p->sr)) {
    rxk_fail(st, "%s: schedule failed:\n%s", p->what, rx_diag_text(&diag));
  } else if (!rxk_codegen(m, p->sr.fn, t, &diag, &p->kl)) {
    rxk_fail(st, "%s: codegen failed:\n%s", p->what, rx_diag_text(&diag));
  } else {
    p->ok = true;
  }
  base_diag_free(&diag);
  if (!p->ok) return;
  printf("  %s: rule %s, %d kernel(s)\n", p->what, sched_rule_name(p->sr.variants[0].rule),
         p->kl.n);

  /* toolchains */
  if (t->kind == RX_TARGET_CUDA) check_cuda_toolchain(&p->kl, t->cuda_arch, p->what, st);
  if (t->kind == RX_TARGET_VULKAN) check_spirv(&p->kl, p->what, st);

  /* sm_90 emits sm_80's C but for wgmma (sm_90 only): emulated where a kernel uses it */
  bool wgmma = false;
  for (int k = 0; k < p->kl.n; k++) wgmma |= strstr(p->kl.kernels[k]->source, "rx_wgmma_") != NULL;
  p->emulate = (t->kind == RX_TARGET_CUDA && (t->sm == 80 || (t->sm == 90 && wgmma))) ||
               t->kind == RX_TARGET_METAL;
  if (!p->emulate) return;
  p->mods = base_calloc((size_t)p->kl.n + 1, sizeof *p->mods);
  for (int k = 0; k < p->kl.n; k++) {
    const rx_kernel *kn = p->kl.kernels[k];
    char *err = NULL, label[160];
    bool cuda = t->kind == RX_TARGET_CUDA;
    snprintf(label, sizeof label, "%s.%s", kn->name, cuda ? "cu" : "metal");
    if (simt_module_compile(&simt_opts, cuda ? SIMT_CUDA : SIMT_METAL, kn->source, label,
                            &p->mods[k], &err)) {
      if (err && strstr(err, "not found"))
        st->skipped++;
      else
        rxk_fail(st, "%s: %s does not compile for the SIMT emulator:\n%s\n--- source\n%s", p->what,
                 kn->name, err ? err : "", kn->source);
      free(err);
      p->emulate = false;
      break;
    }
  }
}

void rxk_release(rxk_prepared *p) {
  for (int k = 0; p->mods && k < p->kl.n; k++)
    if (p->mods[k]) simt_module_free(p->mods[k]);
  free(p->mods);
}

/* Is there an `if has_fragments(...)` or `if has_mma(...)` (async false) or `if has_async_copy()`
 * (true) at the top of f's body? */
static bool has_form(const rx_tensor_fn *f, bool async) {
  const rx_stmt *b = f->body;
  for (int i = 0; b && b->kind == RX_STMT_SEQ && i < b->n; i++)
    if (b->body[i]->kind == RX_STMT_IF && b->body[i]->value &&
        b->body[i]->value->kind == RX_TX_HAS_FRAG &&
        (b->body[i]->value->test == RX_TEST_ASYNC_COPY) == async)
      return true;
  return false;
}

bool rxk_has_frag_form(const rx_tensor_fn *f) { return has_form(f, false); }

bool rxk_has_async_form(const rx_tensor_fn *f) { return has_form(f, true); }

bool rxk_uses_async(const rxk_prepared *p) {
  for (int k = 0; k < p->kl.n; k++)
    if (strstr(p->kl.kernels[k]->source, "rx_cp_async_16")) return true;
  return false;
}

bool rxk_uses_frags(const rxk_prepared *p) {
  const char *mark = p->t->kind == RX_TARGET_CUDA    ? "rx_frag_mma_"
                     : p->t->kind == RX_TARGET_METAL ? "simdgroup_multiply_accumulate"
                                                     : "coopMatMulAddNV";
  for (int k = 0; k < p->kl.n; k++)
    if (strstr(p->kl.kernels[k]->source, mark)) return true;
  return false;
}

char *rxk_nvrtc_ptx(const rxk_prepared *p, const rx_kernel *kn, rxk_stats *st) {
  char *ptx = NULL, *log = NULL;
  size_t len = 0;
  rx_status s = tgt_nvrtc_compile(kn->source, kn->name, p->t->cuda_arch, false, &ptx, &len, &log);
  if (s && rx_status_code_of(s) == RX_ERR_NOT_FOUND)
    st->skipped++;
  else if (s)
    rxk_fail(st, "%s: NVRTC: %s\n%s", p->what, rx_status_message(s), log ? log : "");
  if (s) {
    free(ptx);
    ptx = NULL;
  }
  rx_status_free(s);
  free(log);
  return ptx;
}
