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
#include "support_kernels.h"

#include "codegen/codegen.h"
#include "passes/schedule.h"
#include "relaxc/runtime.h"
#include "targets/target.h"
#include "targets/toolchain.h"

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

/* A backend as the suite uses it: its device, and the target relaxc compiles for it. */
typedef struct backend {
  rx_rt_backend kind;
  rx_rt_device *dev; /* NULL: absent */
  char why[512];     /* why absent */
  rx_target target;  /* the description of the device, from the target table and the device */
} backend;

/* The target for an opened device: the table's entry, with the subgroup size the device
 * actually reports (lavapipe's depends on the host's vector width). */
static void pick_target(backend *b) {
  const rx_rt_device_info *info = rx_rt_device_get_info(b->dev);
  const char *name = b->kind == RX_RT_BACKEND_CUDA    ? "cuda -arch=sm_80"
                     : b->kind == RX_RT_BACKEND_METAL ? "metal-apple7"
                     : strstr(info->name, "llvmpipe") ? "vulkan-lavapipe"
                                                      : "vulkan";
  const rx_target *t;
  rx_status s = rx_target_parse(name, &t);
  RX_ASSERT(!s);
  b->target = *t;
  if (b->kind == RX_RT_BACKEND_VULKAN && t->subgroup_size > 0 && info->subgroup_size > 0 &&
      (int)info->subgroup_size != t->subgroup_size) {
    b->target.subgroup_size = b->target.min_subgroup_size = b->target.max_subgroup_size =
        (int)info->subgroup_size;
  }
  printf("backend %s: %s, target %s (subgroup %d)\n", rx_rt_backend_name(b->kind), info->name,
         b->target.name, b->target.subgroup_size);
}

static void open_backend(backend *b, const char *spec) {
  rx_status s = rx_rt_backend_check(b->kind);
  if (!s) {
    rx_rt_device_options o = {.validation = b->kind == RX_RT_BACKEND_VULKAN ? 1 : -1};
    s = rx_rt_device_open(spec, &o, &b->dev);
  }
  if (s) {
    snprintf(b->why, sizeof b->why, "%s", rx_status_message(s));
    printf("backend %s: skipped: %s\n", rx_rt_backend_name(b->kind), b->why);
    rx_status_free(s);
    b->dev = NULL;
    return;
  }
  pick_target(b);
}

/* The kernel library of one program for one backend: kernels.json and binaries in memory. */
typedef struct library {
  rx_strbuf json;
  rx_rt_blob blobs[32];
  char *owned[32];
  size_t nblobs;
} library;

static void library_free(library *l) {
  rx_strbuf_free(&l->json);
  for (size_t i = 0; i < l->nblobs; i++) free(l->owned[i]);
  memset(l, 0, sizeof *l);
}

/* Compiles f for b into l; false with a message. */
static bool build_library(rx_module *m, const rx_tensor_fn *f, backend *b, library *l,
                          rx_strbuf *msg) {
  rx_diag diag;
  rx_diag_init(&diag);
  rx_sched_result sr;
  rx_kernel_list kl = {0};
  bool ok =
      rx_schedule(m, f, &b->target, &diag, &sr) && rx_codegen(m, sr.fn, &b->target, &diag, &kl);
  if (!ok) rx_strbuf_append(msg, rx_diag_text(&diag));
  rx_diag_free(&diag);
  for (int k = 0; ok && k < kl.n; k++) {
    rx_kernel *kn = kl.kernels[k];
    RX_ASSERT(l->nblobs < RX_ARRAY_LEN(l->blobs));
    char name[256];
    if (b->kind == RX_RT_BACKEND_VULKAN) {
      if (!kn->spirv) {
        rx_strbuf_printf(msg, "%s: no SPIR-V (shaderc absent?)", kn->name);
        return false;
      }
      snprintf(name, sizeof name, "%s.spv", kn->name);
      kn->binary = rx_arena_strdup(&m->arena, name);
      l->blobs[l->nblobs++] = (rx_rt_blob){kn->binary, kn->spirv, kn->spirv_words * 4};
    } else if (b->kind == RX_RT_BACKEND_CUDA) {
      char *ptx = NULL, *log = NULL;
      size_t len = 0;
      rx_status s =
          rx_nvrtc_compile(kn->source, kn->name, b->target.cuda_arch, false, &ptx, &len, &log);
      if (s) {
        rx_strbuf_printf(msg, "%s: NVRTC: %s\n%s", kn->name, rx_status_message(s), log ? log : "");
        rx_status_free(s);
        free(log);
        return false;
      }
      free(log);
      snprintf(name, sizeof name, "%s.ptx", kn->name);
      kn->ptx = rx_arena_strdup(&m->arena, name);
      l->owned[l->nblobs] = ptx;
      l->blobs[l->nblobs++] = (rx_rt_blob){kn->ptx, ptx, len};
    } else {
      snprintf(name, sizeof name, "%s.metal", kn->name);
      l->blobs[l->nblobs++] =
          (rx_rt_blob){rx_arena_strdup(&m->arena, name), kn->source, strlen(kn->source)};
    }
  }
  if (ok) {
    const rx_kernel_list *lists[1] = {&kl};
    const rx_tensor_fn *progs[1] = {sr.fn};
    rx_kernels_json(&l->json, &b->target, progs, lists, 1);
  }
  return ok;
}

/* Runs one case on one backend: upload, run, read back, compare with the reference. */
static void run_case(backend *b, rx_rt_library *lib, const rx_tensor_fn *f, const rxk_env *e,
                     const rxk_buffers *inputs, const rxk_buffers *ref, const char *what) {
  rxk_buffers got;
  rxk_copy_buffers(inputs, &got);
  rx_rt_buffer *bufs[RXK_MAX_PARAMS] = {0};
  const char *names[RXK_MAX_VARS];
  for (int i = 0; i < e->n; i++) names[i] = e->vars[i]->name;
  rx_rt_symbols syms = {.names = names, .values = e->values, .count = (size_t)e->n};
  rx_status s = NULL;
  for (int i = 0; !s && i < got.n; i++) {
    if (f->params[i]->kind != RX_PARAM_BUFFER) continue;
    size_t bytes = got.bytes[i] ? got.bytes[i] : 4;
    s = rx_rt_buffer_alloc(b->dev, bytes, &bufs[i]);
    if (!s && got.bytes[i]) s = rx_rt_buffer_write(bufs[i], 0, got.arg[i].data, got.bytes[i]);
  }
  if (!s) s = rx_rt_library_run(lib, f->name, bufs, (size_t)got.n, &syms);
  if (!s) s = rx_rt_device_synchronize(b->dev);
  for (int i = 0; !s && i < got.n; i++)
    if (f->params[i]->kind == RX_PARAM_BUFFER && f->params[i]->is_output && got.bytes[i])
      s = rx_rt_buffer_read(bufs[i], 0, got.arg[i].data, got.bytes[i]);
  char why[512];
  if (s) {
    FAIL(b->kind, "%s: %s", what, rx_status_message(s));
  } else if (!rxk_compare_outputs(f, &got, ref, why, sizeof why)) {
    FAIL(b->kind, "%s: %s", what, why);
  } else {
    stats[b->kind].passed++;
    if (bench_runs > 0) {
      rx_rt_timer *timer = NULL;
      double ms = 0;
      s = rx_rt_timer_create(b->dev, &timer);
      if (!s) s = rx_rt_timer_start(timer);
      for (int r = 0; !s && r < bench_runs; r++)
        s = rx_rt_library_run(lib, f->name, bufs, (size_t)got.n, &syms);
      if (!s) s = rx_rt_timer_stop(timer);
      if (!s) s = rx_rt_timer_elapsed_ms(timer, &ms);
      if (s)
        printf("  bench %s: %s\n", what, rx_status_message(s));
      else
        printf("  bench %s: %.4f ms per run\n", what, ms / bench_runs);
      rx_rt_timer_release(timer);
    }
  }
  rx_status_free(s);
  for (int i = 0; i < got.n; i++) rx_rt_buffer_release(bufs[i]);
  rxk_free_buffers(&got);
}

static void check_program(rx_module *m, const rx_tensor_fn *f, backend *bs, int nb) {
  /* one library per present backend */
  rx_rt_library *libs[3] = {0};
  for (int bi = 0; bi < nb; bi++) {
    backend *b = &bs[bi];
    if (!b->dev) continue;
    library l = {0};
    rx_strbuf msg = {0};
    if (!build_library(m, f, b, &l, &msg)) {
      FAIL(b->kind, "%s: compiling for %s: %s", f->name, b->target.name, msg.data ? msg.data : "");
    } else {
      rx_status s =
          rx_rt_library_load_memory(b->dev, l.json.data, l.json.len, l.blobs, l.nblobs, &libs[bi]);
      if (s) FAIL(b->kind, "%s: loading its kernels: %s", f->name, rx_status_message(s));
      rx_status_free(s);
    }
    rx_strbuf_free(&msg);
    library_free(&l);
  }
  rxk_env base;
  rxk_program_vars(f, &base);
  rx_interp_opts ref_opts = {.max_steps = REF_STEP_LIMIT};
  for (int vi = 0; vi < base.n; vi++) {
    for (size_t si = 0; si < rxk_size_count(); si++) {
      rxk_env e = base;
      e.values[vi] = rxk_size_at(si);
      char what[256], why[512];
      snprintf(what, sizeof what, "%s at %s=%lld", f->name, e.vars[vi]->name,
               (long long)rxk_size_at(si));
      rxk_buffers inputs, ref;
      if (!rxk_make_buffers(f, &e, &inputs, why, sizeof why)) {
        for (int bi = 0; bi < nb; bi++) FAIL(bs[bi].kind, "%s: %s", what, why);
        continue;
      }
      rxk_copy_buffers(&inputs, &ref);
      rx_status s = rx_interp_run(m, f, ref.arg, ref.n, &ref_opts);
      bool too_big = s && strstr(rx_status_message(s), "step limit");
      for (int bi = 0; bi < nb; bi++) {
        backend *b = &bs[bi];
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
  backend bs[3] = {
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
    open_backend(&bs[bi], device ? device : buf);
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
    rx_strbuf_free(&msg);
    free(files.data[i]);
  }
  rx_ptrvec_free(&files);

  int passed = 0, failed = 0, skipped = 0;
  for (int bi = 0; bi < 3; bi++) {
    backend *b = &bs[bi];
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
