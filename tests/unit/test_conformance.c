/* The cross-backend conformance suite.
 *
 * Cases: every tensor program of tests/kernels/ (each schedule rule: elementwise, row
 * reduction, GEMV, GEMM in f32 and f16, transpose, fused reduction + elementwise, fallback) x
 * every symbolic variable at 1, 7, 33, 128, 1000 and 4099 (the others at 33) x the program's
 * dtypes, with the tolerances of support_kernels.h. Each case is compiled by relaxc (schedule +
 * codegen) for each backend that is present, run through the runtime (runtime/), and compared
 * with the reference interpreter on the unscheduled program.
 *
 * Backends: Vulkan (lavapipe in CI, under the Khronos validation layer: any validation message
 * fails the suite), CUDA (where libcuda and a GPU are present), Metal (on Apple platforms).
 * A backend that is absent counts its cases as skipped, with the reason; a skip is never a pass.
 *
 * usage: test_conformance TESTS_DIR [--bench N] [--filter NAME] [--device SPEC]
 *   --bench N   benchmark mode: also run each case N times and print the device time per run */
/* test-needs: runtime */
#include "support_runtime.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define REF_STEP_LIMIT 40000000

typedef struct backend_stats {
  int passed, failed, skipped;
} backend_stats;

static backend_stats stats[3];
static int bench_runs;

#define FAIL(be, ...)                                                                              \
  do {                                                                                             \
    stats[be].failed++;                                                                            \
    fprintf(stderr, "FAIL [%s]: ", rx_rt_backend_name(be));                                        \
    fprintf(stderr, __VA_ARGS__);                                                                  \
    fputc('\n', stderr);                                                                           \
  } while (0)

/* Runs one case on one backend: upload, run, read back, compare with the reference. */
static void run_case(rxk_backend *b, rx_rt_library *lib, const rx_tensor_fn *f, const rxk_env *e,
                     const rxk_buffers *inputs, const rxk_buffers *ref, const char *what) {
  rxk_buffers got;
  rxk_copy_buffers(inputs, &got);
  double ms = 0;
  rx_status s = rxk_rt_run(b, lib, f, e, &got, bench_runs, &ms);
  char why[512];
  if (s) {
    FAIL(b->kind, "%s: %s", what, rx_status_message(s));
  } else if (!rxk_compare_outputs(f, &got, ref, why, sizeof why)) {
    FAIL(b->kind, "%s: %s", what, why);
  } else {
    stats[b->kind].passed++;
    if (bench_runs > 0) printf("  bench %s: %.4f ms per run\n", what, ms);
  }
  rx_status_free(s);
  rxk_free_buffers(&got);
}

static void check_program(rx_module *m, const rx_tensor_fn *f, rxk_backend *bs, int nb) {
  /* one library per present backend */
  rx_rt_library *libs[3] = {0};
  for (int bi = 0; bi < nb; bi++) {
    rxk_backend *b = &bs[bi];
    if (!b->dev) continue;
    rx_strbuf msg = {0};
    if (!rxk_rt_load(m, f, b, &libs[bi], &msg))
      FAIL(b->kind, "%s: compiling for %s: %s", f->name, b->target.name, msg.data ? msg.data : "");
    base_strbuf_free(&msg);
  }
  rxk_env base;
  rxk_program_vars(f, &base);
  rx_interp_opts ref_opts = {.max_steps = REF_STEP_LIMIT};
  for (int vi = 0; vi < base.n; vi++) {
    for (size_t si = 0; si < rxk_size_count(); si++) {
      rxk_env e = base;
      e.values[vi] = rxk_size_at(si);
      if (!rxk_fit_facts(f, e.vars, e.values, e.n, vi)) { /* the facts exclude the size */
        for (int bi = 0; bi < nb; bi++) stats[bs[bi].kind].skipped++;
        continue;
      }
      char what[256], why[512];
      snprintf(what, sizeof what, "%s at %s=%lld", f->name, e.vars[vi]->name,
               (long long)e.values[vi]);
      rxk_buffers inputs, ref;
      if (!rxk_make_buffers(f, &e, &inputs, why, sizeof why)) {
        for (int bi = 0; bi < nb; bi++) FAIL(bs[bi].kind, "%s: %s", what, why);
        continue;
      }
      rxk_copy_buffers(&inputs, &ref);
      rx_status s = interp_run(m, f, ref.arg, ref.n, &ref_opts);
      bool too_big = s && strstr(rx_status_message(s), "step limit");
      for (int bi = 0; bi < nb; bi++) {
        rxk_backend *b = &bs[bi];
        if (!b->dev || too_big) {
          stats[b->kind].skipped++;
        } else if (s) {
          FAIL(b->kind, "%s: the reference run failed: %s", what, rx_status_message(s));
        } else if (libs[bi]) {
          run_case(b, libs[bi], f, &e, &inputs, &ref, what);
        } else {
          stats[b->kind].failed++; /* compile failure, reported above */
        }
      }
      rx_status_free(s);
      rxk_free_buffers(&inputs);
      rxk_free_buffers(&ref);
    }
  }
  for (int bi = 0; bi < nb; bi++) rx_rt_library_release(libs[bi]);
}

int main(int argc, char **argv) {
  const char *dir = "tests", *filter = NULL, *device = NULL;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--bench") && i + 1 < argc)
      bench_runs = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--filter") && i + 1 < argc)
      filter = argv[++i];
    else if (!strcmp(argv[i], "--device") && i + 1 < argc)
      device = argv[++i];
    else
      dir = argv[i];
  }
  rxk_backend bs[3] = {
      {.kind = RX_RT_BACKEND_VULKAN}, {.kind = RX_RT_BACKEND_CUDA}, {.kind = RX_RT_BACKEND_METAL}};
  for (int bi = 0; bi < 3; bi++) {
    const char *spec = rx_rt_backend_name(bs[bi].kind);
    char buf[64];
    snprintf(buf, sizeof buf, "%s:0", spec);
    if (device && strncmp(device, spec, strlen(spec)) != 0) {
      snprintf(bs[bi].why, sizeof bs[bi].why, "not selected by --device %s", device);
      printf("backend %s: skipped: %s\n", spec, bs[bi].why);
      continue;
    }
    rxk_rt_open(&bs[bi], device ? device : buf);
  }

  char kdir[1024];
  snprintf(kdir, sizeof kdir, "%s/kernels", dir);
  rx_ptrvec files = {0};
  rxk_list_rx_files(kdir, &files);
  if (files.len == 0) FAIL(RX_RT_BACKEND_VULKAN, "no programs in %s", kdir);
  for (size_t i = 0; i < files.len; i++) {
    rx_strbuf msg = {0};
    rx_module *m = rxk_load_module(files.data[i], &msg);
    if (!m) {
      FAIL(RX_RT_BACKEND_VULKAN, "%s does not check:\n%s", (char *)files.data[i],
           msg.data ? msg.data : "");
    } else {
      for (size_t it = 0; it < m->items.len; it++) {
        if (m->items.data[it].kind != RX_ITEM_TENSOR) continue;
        const rx_tensor_fn *f = m->items.data[it].fn;
        if (filter && !strstr(f->name, filter)) continue;
        check_program(m, f, bs, 3);
      }
      rx_module_free(m);
    }
    base_strbuf_free(&msg);
    free(files.data[i]);
  }
  base_ptrvec_free(&files);

  int passed = 0, failed = 0, skipped = 0;
  for (int bi = 0; bi < 3; bi++) {
    rxk_backend *b = &bs[bi];
    if (b->dev) {
      const char *last = NULL;
      size_t nmsg = rx_rt_device_validation_messages(b->dev, &last);
      if (nmsg) FAIL(b->kind, "%zu validation messages; the last: %s", nmsg, last ? last : "");
      rx_rt_device_release(b->dev);
    }
    backend_stats *st = &stats[b->kind];
    if (b->dev || !b->why[0])
      printf("%s: %d passed, %d failed, %d skipped\n", rx_rt_backend_name(b->kind), st->passed,
             st->failed, st->skipped);
    else
      printf("%s: %d passed, %d failed, %d skipped (%s)\n", rx_rt_backend_name(b->kind), st->passed,
             st->failed, st->skipped, b->why);
    passed += st->passed, failed += st->failed, skipped += st->skipped;
  }
  printf("conformance: %d passed, %d failed, %d skipped\n", passed, failed, skipped);
  return failed ? 1 : 0;
}
