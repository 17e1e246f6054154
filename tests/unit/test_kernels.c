/* The kernel pipeline end to end, for every program of tests/kernels/ (each .rx file) and every
 * target:
 *
 *   schedule (passes/)  ->  the interpreter runs the scheduled program, which must match the
 *                           unscheduled one (the oracle) at every size;
 *   codegen (codegen/)  ->  CUDA C compiles with NVRTC for sm_80 and sm_90 and ptxas reports no
 *                           spills; GLSL compiles with shaderc and passes spirv-val;
 *                           the emitted CUDA C and MSL run in the SIMT emulator (tests/simt)
 *                           and match the oracle.
 *
 * Sizes: every symbolic variable takes 1, 7, 33, 128, 1000 and 4099 in turn (the others stay at
 * 33, a non-multiple of every tile size). A size whose reference run needs more than
 * REF_STEP_LIMIT interpreted statements, or that the program's facts exclude, is reported as
 * skipped, never as passed.
 *
 * Tolerance, as normalized error max|got - want| / max(1, max|want|): f32 outputs 1e-4 (the
 * schedules reduce in a different order than the serial oracle: tree and subgroup sums over up
 * to 4099 terms), f16/bf16 outputs 2e-2 (a few units in the last place of half precision).
 *
 * usage: test_kernels TESTS_DIR [PROGRAM_NAME_FILTER] */
#include "support_kernels.h"

#include "base/base.h"
#include "codegen/codegen.h"
#include "interp/interp.h"
#include "ir/ir.h"
#include "passes/schedule.h"
#include "simt_harness.h"
#include "targets/target.h"
#include "targets/toolchain.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define REF_STEP_LIMIT 40000000

static int passed, failed, skipped;
static const char *targets[] = {"cuda -arch=sm_80", "cuda -arch=sm_90", "vulkan-lavapipe", "vulkan",
                                "metal-apple7"};

#define FAIL(...)                                                                                  \
  do {                                                                                             \
    failed++;                                                                                      \
    fprintf(stderr, "FAIL: " __VA_ARGS__);                                                         \
    fputc('\n', stderr);                                                                           \
  } while (0)

/* ---- running the generated kernels in the SIMT emulator ---- */

static simt_options simt_opts;

/* Runs every kernel whose condition holds, in order. Returns false with a message. */
static bool run_simt(const rx_tensor_fn *f, const rx_kernel_list *kl, simt_module **mods,
                     const rxk_env *e, rxk_buffers *b, char *msg, size_t n) {
  for (int k = 0; k < kl->n; k++) {
    const rx_kernel *kn = kl->kernels[k];
    int64_t v;
    if (kn->cond) {
      if (!rxk_eval(kn->cond, e, &v))
        return snprintf(msg, n, "%s: condition not evaluable", kn->name), false;
      if (!v) continue;
    }
    unsigned grid[3];
    for (int a = 0; a < 3; a++) {
      if (!rxk_eval(kn->grid[a], e, &v) || v < 0 || v > 0x7fffffff)
        return snprintf(msg, n, "%s: grid[%d] not evaluable", kn->name, a), false;
      grid[a] = (unsigned)v;
    }
    if (grid[0] == 0 || grid[1] == 0 || grid[2] == 0) continue; /* nothing to launch */
    unsigned block[3] = {(unsigned)kn->block[0], (unsigned)kn->block[1], (unsigned)kn->block[2]};
    void *args[RXK_MAX_PARAMS + RXK_MAX_VARS + 1], *ptrs[RXK_MAX_PARAMS + RXK_MAX_VARS];
    int32_t scalars[RXK_MAX_VARS + 64];
    unsigned char params_struct[512];
    memset(params_struct, 0, sizeof params_struct);
    int nargs = 0;
    bool metal = kn->lang == RX_LANG_MSL;
    for (int a = 0; a < kn->nargs; a++) {
      const rx_karg *ka = &kn->args[a];
      if (ka->kind == RX_KARG_BUFFER) {
        ptrs[a] = b->arg[ka->param].data;
        args[nargs++] = metal ? ptrs[a] : (void *)&ptrs[a];
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
    simt_kernel *sk = simt_module_kernel(mods[k], kn->name);
    if (!sk) return snprintf(msg, n, "%s: kernel not found in its object", kn->name), false;
    char *err = NULL;
    if (simt_launch(sk, grid, block, 0, args, nargs, &err)) {
      snprintf(msg, n, "%s: launch failed: %s", kn->name, err);
      free(err);
      return false;
    }
  }
  (void)f;
  return true;
}

/* ---- one program on one target ---- */

static void check_cuda_toolchain(const rx_kernel_list *kl, const char *arch, const char *what) {
  static int nvrtc_state; /* 0 unknown, 1 present, -1 absent */
  if (nvrtc_state == 0) {
    int mj, mn;
    rx_status s = rx_nvrtc_load(&mj, &mn);
    nvrtc_state = s ? -1 : 1;
    if (s) printf("  NVRTC absent, CUDA compilation skipped: %s\n", rx_status_message(s));
    rx_status_free(s);
  }
  for (int k = 0; k < kl->n; k++) {
    const rx_kernel *kn = kl->kernels[k];
    if (nvrtc_state < 0) {
      skipped++;
      continue;
    }
    char *ptx = NULL, *log = NULL;
    size_t len = 0;
    rx_status s = rx_nvrtc_compile(kn->source, kn->name, arch, false, &ptx, &len, &log);
    if (s) {
      FAIL("%s: %s: NVRTC %s: %s\n%s\n--- source\n%s", what, kn->name, arch, rx_status_message(s),
           log ? log : "", kn->source);
      rx_status_free(s);
    } else {
      rx_ptxas_info info;
      rx_status ps = rx_ptxas_report(ptx, arch, &info);
      if (rx_status_code_of(ps) == RX_ERR_NOT_FOUND) {
        skipped++;
      } else if (ps) {
        FAIL("%s: %s: ptxas %s: %s", what, kn->name, arch, rx_status_message(ps));
      } else if (info.spill_bytes != 0) {
        FAIL("%s: %s: ptxas %s reports %d spill bytes\n%s", what, kn->name, arch, info.spill_bytes,
             info.log);
      } else {
        passed++;
      }
      if (!ps) rx_ptxas_info_free(&info);
      rx_status_free(ps);
    }
    free(ptx);
    free(log);
  }
}

static void check_spirv(const rx_kernel_list *kl, const char *what) {
  for (int k = 0; k < kl->n; k++) {
    const rx_kernel *kn = kl->kernels[k];
    if (!rx_shaderc_available() || !rx_spirv_tools_available()) {
      skipped++;
      continue;
    }
    if (!kn->spirv) {
      FAIL("%s: %s: no SPIR-V although shaderc is present", what, kn->name);
      continue;
    }
    rx_status s = rx_spirv_validate(kn->spirv, kn->spirv_words);
    if (s)
      FAIL("%s: %s: spirv-val: %s", what, kn->name, rx_status_message(s));
    else
      passed++;
    rx_status_free(s);
  }
}

/* One target's compilation of a program: its schedule, its kernels and, where emulated, their
 * SIMT objects. */
typedef struct prepared {
  const rx_target *t;
  char what[256];
  bool ok;
  rx_sched_result sr;
  rx_kernel_list kl;
  bool emulate;       /* CUDA sm_80 (sm_90 emits the same C) and MSL run in the emulator */
  simt_module **mods; /* one per kernel, when emulated */
} prepared;

static void prepare(rx_module *m, const rx_tensor_fn *f, const rx_target *t, prepared *p) {
  memset(p, 0, sizeof *p);
  p->t = t;
  snprintf(p->what, sizeof p->what, "%s [%s]", f->name, t->name);
  rx_diag diag;
  rx_diag_init(&diag);
  if (!rx_schedule(m, f, t, &diag, &p->sr)) {
    FAIL("%s: schedule failed:\n%s", p->what, rx_diag_text(&diag));
  } else if (!rx_codegen(m, p->sr.fn, t, &diag, &p->kl)) {
    FAIL("%s: codegen failed:\n%s", p->what, rx_diag_text(&diag));
  } else {
    p->ok = true;
  }
  rx_diag_free(&diag);
  if (!p->ok) return;
  printf("  %s: rule %s, %d kernel(s)\n", p->what, rx_sched_rule_name(p->sr.variants[0].rule),
         p->kl.n);

  /* toolchains */
  if (t->kind == RX_TARGET_CUDA) check_cuda_toolchain(&p->kl, t->cuda_arch, p->what);
  if (t->kind == RX_TARGET_VULKAN) check_spirv(&p->kl, p->what);

  p->emulate = (t->kind == RX_TARGET_CUDA && t->sm == 80) || t->kind == RX_TARGET_METAL;
  if (!p->emulate) return;
  p->mods = rx_calloc((size_t)p->kl.n + 1, sizeof *p->mods);
  for (int k = 0; k < p->kl.n; k++) {
    const rx_kernel *kn = p->kl.kernels[k];
    char *err = NULL, label[160];
    bool cuda = t->kind == RX_TARGET_CUDA;
    snprintf(label, sizeof label, "%s.%s", kn->name, cuda ? "cu" : "metal");
    if (simt_module_compile(&simt_opts, cuda ? SIMT_CUDA : SIMT_METAL, kn->source, label,
                            &p->mods[k], &err)) {
      if (err && strstr(err, "not found"))
        skipped++;
      else
        FAIL("%s: %s does not compile for the SIMT emulator:\n%s\n--- source\n%s", p->what,
             kn->name, err ? err : "", kn->source);
      free(err);
      p->emulate = false;
      break;
    }
  }
}

static void release(prepared *p) {
  for (int k = 0; p->mods && k < p->kl.n; k++)
    if (p->mods[k]) simt_module_free(p->mods[k]);
  free(p->mods);
}

/* One size on one target: the scheduled program in the interpreter, and the emitted kernels in
 * the emulator, each against the reference outputs. */
static void check_size(rx_module *m, const rx_tensor_fn *f, prepared *p, const rxk_env *e,
                       const rxk_buffers *inputs, const rxk_buffers *ref, const char *at) {
  char why[512];
  rxk_buffers sch;
  rxk_copy_buffers(inputs, &sch);
  rx_interp_opts o = {.subgroup_size = p->t->subgroup_size > 0 ? p->t->subgroup_size : 32};
  rx_status s = rx_interp_run(m, p->sr.fn, sch.arg, sch.n, &o);
  if (s) {
    FAIL("%s at %s: the scheduled program failed in the interpreter: %s", p->what, at,
         rx_status_message(s));
    rx_status_free(s);
  } else if (!rxk_compare_outputs(f, &sch, ref, why, sizeof why)) {
    FAIL("%s at %s: scheduled vs unscheduled: %s", p->what, at, why);
  } else {
    passed++;
  }
  rxk_free_buffers(&sch);
  if (!p->emulate) return;
  rxk_buffers emu;
  rxk_copy_buffers(inputs, &emu);
  if (!run_simt(f, &p->kl, p->mods, e, &emu, why, sizeof why))
    FAIL("%s at %s: %s", p->what, at, why);
  else if (!rxk_compare_outputs(f, &emu, ref, why, sizeof why))
    FAIL("%s at %s: emulated %s vs interpreter: %s", p->what, at,
         p->t->kind == RX_TARGET_CUDA ? "CUDA C" : "MSL", why);
  else
    passed++;
  rxk_free_buffers(&emu);
}

static void check_program(rx_module *m, const rx_tensor_fn *f) {
  prepared ps[RX_ARRAY_LEN(targets)];
  for (size_t ti = 0; ti < RX_ARRAY_LEN(targets); ti++) {
    const rx_target *t;
    rx_status ts = rx_target_parse(targets[ti], &t);
    RX_ASSERT(!ts);
    prepare(m, f, t, &ps[ti]);
  }
  /* every size: one reference run, shared by every target */
  rxk_env base;
  rxk_program_vars(f, &base);
  rx_interp_opts ref_opts = {.max_steps = REF_STEP_LIMIT};
  for (int vi = 0; vi < base.n; vi++) {
    for (size_t si = 0; si < rxk_size_count(); si++) {
      rxk_env e = base;
      e.values[vi] = rxk_size_at(si);
      char at[128], why[512];
      snprintf(at, sizeof at, "%s=%lld", e.vars[vi]->name, (long long)rxk_size_at(si));
      rxk_buffers inputs, ref;
      if (!rxk_make_buffers(f, &e, &inputs, why, sizeof why)) {
        FAIL("%s at %s: %s", f->name, at, why);
        continue;
      }
      rxk_copy_buffers(&inputs, &ref);
      rx_status s = rx_interp_run(m, f, ref.arg, ref.n, &ref_opts);
      if (s) {
        const char *msg = rx_status_message(s);
        if (strstr(msg, "step limit") || strstr(msg, "fact"))
          skipped++; /* too large for the CPU oracle, or excluded by the facts */
        else
          FAIL("%s at %s: the reference run failed: %s", f->name, at, msg);
        rx_status_free(s);
      } else {
        for (size_t ti = 0; ti < RX_ARRAY_LEN(targets); ti++)
          if (ps[ti].ok) check_size(m, f, &ps[ti], &e, &inputs, &ref, at);
      }
      rxk_free_buffers(&inputs);
      rxk_free_buffers(&ref);
    }
  }
  for (size_t ti = 0; ti < RX_ARRAY_LEN(targets); ti++) release(&ps[ti]);
}

int main(int argc, char **argv) {
  const char *dir = argc > 1 ? argv[1] : "tests";
  const char *filter = argc > 2 ? argv[2] : getenv("RX_KERNEL_FILTER");
  setvbuf(stdout, NULL, _IOLBF, 0);
  char kdir[1024];
  snprintf(kdir, sizeof kdir, "%s/kernels", dir);
  rx_ptrvec files = {0};
  rxk_list_rx_files(kdir, &files);
  if (files.len == 0) FAIL("no programs in %s", kdir);
  for (size_t i = 0; i < files.len; i++) {
    rx_strbuf msg = {0};
    rx_module *m = rxk_load_module(files.data[i], &msg);
    if (!m) {
      FAIL("%s does not check:\n%s", (char *)files.data[i], msg.data ? msg.data : "");
    } else {
      printf("%s\n", (char *)files.data[i]);
      for (size_t it = 0; it < m->items.len; it++) {
        if (m->items.data[it].kind != RX_ITEM_TENSOR) continue;
        const rx_tensor_fn *f = m->items.data[it].fn;
        if (filter && !strstr(f->name, filter)) continue;
        check_program(m, f);
      }
      rx_module_free(m);
    }
    rx_strbuf_free(&msg);
    free(files.data[i]);
  }
  rx_ptrvec_free(&files);
  printf("kernels: %d passed, %d failed, %d skipped\n", passed, failed, skipped);
  return failed ? 1 : 0;
}
