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
 * A target whose kernels are an earlier target's (CUDA sm_90's are sm_80's wherever the schedules
 * agree) is compiled and checked by its toolchain but not run again.
 *
 * Sizes: every symbolic variable takes 1, 7, 33, 128, 1000 and 4099 in turn (the others stay at
 * 33, a non-multiple of every tile size). Above 33, CUDA and Metal are checked by the emulator
 * alone (LARGE_SIZE; test_schedule runs the schedules of sm_80 and metal-apple7 in the
 * interpreter at 128, sm_80's also at 1000 and 4099). A size whose reference run needs more than
 * REF_STEP_LIMIT interpreted statements, or that the program's facts exclude, is reported as
 * skipped, never as passed.
 *
 * Tolerance, as normalized error max|got - want| / max(1, max|want|): f32 outputs 1e-4 (the
 * schedules reduce in a different order than the serial oracle: tree and subgroup sums over up
 * to 4099 terms), f16/bf16 outputs 2e-2 (a few units in the last place of half precision).
 *
 * Shards: RX_KERNEL_SHARD=i/N runs only every N-th program from the i-th (0-based, in file and
 * program order), so ctest runs the suite as N tests side by side (tests/CMakeLists.txt).
 *
 * usage: test_kernels TESTS_DIR [PROGRAM_NAME_FILTER] */
#include "support_pipeline.h"

#include "base/base.h"
#include "interp/interp.h"
#include "ir/ir.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define REF_STEP_LIMIT 40000000
/* Above this size, a target whose kernels run in the emulator (CUDA, Metal) is checked there
 * only: the interpreter's run of its scheduled program, the same schedule as the printed
 * kernels, is left out (at 128, 1000 and 4099 it was most of the suite's time; test_schedule
 * runs the sm_80 and metal-apple7 schedules of these programs in the interpreter at 128, and
 * sm_80's at 1000 and 4099, its other variables at 9). */
#define LARGE_SIZE 33

static rxk_stats st;
static const char *targets[] = {"cuda -arch=sm_80", "cuda -arch=sm_90", "vulkan-lavapipe", "vulkan",
                                "metal-apple7"};

#define FAIL(...) rxk_fail(&st, __VA_ARGS__)

/* One size on one target: the scheduled program in the interpreter (not when `large` and the
 * emulator runs the target), and the emitted kernels in the emulator, each against the
 * reference outputs. */
static void check_size(rx_module *m, const rx_tensor_fn *f, rxk_prepared *p, const rxk_env *e,
                       const rxk_buffers *inputs, const rxk_buffers *ref, const char *at,
                       bool large) {
  char why[512];
  if (!large || !p->emulate) {
    rxk_buffers sch;
    rxk_copy_buffers(inputs, &sch);
    rx_interp_opts o = {.subgroup_size = p->t->subgroup_size > 0 ? p->t->subgroup_size : 32};
    rx_status s = interp_run(m, p->sr.fn, sch.arg, sch.n, &o);
    if (s) {
      FAIL("%s at %s: the scheduled program failed in the interpreter: %s", p->what, at,
           rx_status_message(s));
      rx_status_free(s);
    } else if (!rxk_compare_outputs(f, &sch, ref, why, sizeof why)) {
      FAIL("%s at %s: scheduled vs unscheduled: %s", p->what, at, why);
    } else {
      st.passed++;
    }
    rxk_free_buffers(&sch);
  }
  if (!p->emulate) return;
  rxk_buffers emu;
  rxk_copy_buffers(inputs, &emu);
  if (!rxk_run_simt(p, e, &emu, why, sizeof why))
    FAIL("%s at %s: %s", p->what, at, why);
  else if (!rxk_compare_outputs(f, &emu, ref, why, sizeof why))
    FAIL("%s at %s: emulated %s vs interpreter: %s", p->what, at,
         p->t->kind == RX_TARGET_CUDA ? "CUDA C" : "MSL", why);
  else
    st.passed++;
  rxk_free_buffers(&emu);
}

/* p's kernels are q's (each source equal past its first line, which names the target): a target
 * whose kernels repeat an earlier target's is not run again (sm_90's CUDA C is sm_80's wherever
 * the schedules agree). Both were compiled and checked by rxk_prepare. */
static bool same_kernels(const rxk_prepared *p, const rxk_prepared *q) {
  if (!p->ok || !q->ok || p->kl.n != q->kl.n || p->t->kind != q->t->kind) return false;
  for (int k = 0; k < p->kl.n; k++) {
    const char *a = strchr(p->kl.kernels[k]->source, '\n');
    const char *b = strchr(q->kl.kernels[k]->source, '\n');
    if (!a || !b || strcmp(a, b) != 0) return false;
  }
  return true;
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void check_program(rx_module *m, const rx_tensor_fn *f) {
  double t0 = now_s();
  rxk_prepared ps[RX_ARRAY_LEN(targets)];
  bool again[RX_ARRAY_LEN(targets)] = {0};
  for (size_t ti = 0; ti < RX_ARRAY_LEN(targets); ti++) {
    const rx_target *t;
    rx_status ts = tgt_target_parse(targets[ti], &t);
    RX_ASSERT(!ts);
    rxk_prepare(m, f, t, &st, &ps[ti]);
    for (size_t tj = 0; tj < ti && !again[ti]; tj++)
      if (same_kernels(&ps[tj], &ps[ti])) {
        again[ti] = true;
        printf("  %s: the kernels of %s, not run again\n", ps[ti].what, targets[tj]);
      }
  }
  /* every size: one reference run, shared by every target */
  rxk_env base;
  rxk_program_vars(f, &base);
  rx_interp_opts ref_opts = {.max_steps = REF_STEP_LIMIT};
  for (int vi = 0; vi < base.n; vi++) {
    for (size_t si = 0; si < rxk_size_count(); si++) {
      rxk_env e = base;
      e.values[vi] = rxk_size_at(si);
      if (!rxk_fit_facts(f, e.vars, e.values, e.n, vi)) {
        st.skipped++; /* the facts exclude the size */
        continue;
      }
      char at[128], why[512];
      snprintf(at, sizeof at, "%s=%lld", e.vars[vi]->name, (long long)e.values[vi]);
      rxk_buffers inputs, ref;
      if (!rxk_make_buffers(f, &e, &inputs, why, sizeof why)) {
        FAIL("%s at %s: %s", f->name, at, why);
        continue;
      }
      rxk_copy_buffers(&inputs, &ref);
      rx_status s = interp_run(m, f, ref.arg, ref.n, &ref_opts);
      if (s) {
        const char *msg = rx_status_message(s);
        if (strstr(msg, "step limit") || strstr(msg, "fact"))
          st.skipped++; /* too large for the CPU oracle, or excluded by the facts */
        else
          FAIL("%s at %s: the reference run failed: %s", f->name, at, msg);
        rx_status_free(s);
      } else {
        for (size_t ti = 0; ti < RX_ARRAY_LEN(targets); ti++)
          if (ps[ti].ok && !again[ti])
            check_size(m, f, &ps[ti], &e, &inputs, &ref, at, e.values[vi] > LARGE_SIZE);
      }
      rxk_free_buffers(&inputs);
      rxk_free_buffers(&ref);
    }
  }
  for (size_t ti = 0; ti < RX_ARRAY_LEN(targets); ti++) rxk_release(&ps[ti]);
  printf("  %s: %.1f s\n", f->name, now_s() - t0);
}

int main(int argc, char **argv) {
  const char *dir = argc > 1 ? argv[1] : "tests";
  const char *filter = argc > 2 ? argv[2] : getenv("RX_KERNEL_FILTER");
  setvbuf(stdout, NULL, _IOLBF, 0);
  unsigned shard = 0, nshards = 1, seen = 0;
  const char *sh = getenv("RX_KERNEL_SHARD");
  if (sh && *sh && (sscanf(sh, "%u/%u", &shard, &nshards) != 2 || !nshards || shard >= nshards)) {
    fprintf(stderr, "RX_KERNEL_SHARD must be I/N with I < N, got '%s'\n", sh);
    return 2;
  }
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
        if (seen++ % nshards != shard) continue;
        check_program(m, f);
      }
      rx_module_free(m);
    }
    base_strbuf_free(&msg);
    free(files.data[i]);
  }
  base_ptrvec_free(&files);
  if (nshards > 1) printf("shard %u of %u (RX_KERNEL_SHARD=%s)\n", shard, nshards, sh);
  printf("kernels: %d passed, %d failed, %d skipped\n", st.passed, st.failed, st.skipped);
  return st.failed ? 1 : 0;
}
