#ifdef RX_SUPPORT_RUNTIME /* only the tests that link the runtime (tests/CMakeLists.txt) */
#include "support_runtime.h"
#include "support_pipeline.h" /* rxk_codegen */

#include "codegen/codegen.h"
#include "driver/driver.h"
#include "frontends/hf/hf.h"
#include "ir/ir.h"
#include "passes/schedule.h"
#include "targets/toolchain.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void rxk_rt_target(const rx_rt_device *dev, rx_target *out) {
  const rx_rt_device_info *info = rx_rt_device_get_info(dev);
  const char *name = info->backend == RX_RT_BACKEND_CUDA    ? "cuda -arch=sm_80"
                     : info->backend == RX_RT_BACKEND_METAL ? "metal-apple7"
                     : strstr(info->name, "llvmpipe")       ? "vulkan-lavapipe"
                                                            : "vulkan";
  const rx_target *t;
  rx_status s = tgt_target_parse(name, &t);
  RX_ASSERT(!s);
  *out = *t;
  if (info->backend == RX_RT_BACKEND_VULKAN && t->subgroup_size > 0 && info->subgroup_size > 0 &&
      (int)info->subgroup_size != t->subgroup_size) {
    out->subgroup_size = out->min_subgroup_size = out->max_subgroup_size = (int)info->subgroup_size;
  }
}

static void pick_target(rxk_backend *b) {
  rxk_rt_target(b->dev, &b->target);
  printf("backend %s: %s, target %s (subgroup %d)\n", rx_rt_backend_name(b->kind),
         rx_rt_device_get_info(b->dev)->name, b->target.name, b->target.subgroup_size);
}

void rxk_rt_open(rxk_backend *b, const char *spec) {
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

rxk_backend *rxk_rt_first_present(rxk_backend *bs, int n) {
  for (int i = 0; i < n; i++) {
    char spec[64];
    snprintf(spec, sizeof spec, "%s:0", rx_rt_backend_name(bs[i].kind));
    rxk_rt_open(&bs[i], spec);
    bool open = bs[i].dev != NULL;
    rx_rt_device_release(bs[i].dev);
    bs[i].dev = NULL;
    if (open) return &bs[i];
  }
  return NULL;
}

bool rxk_rt_close(rxk_backend *b, char *msg, size_t n) {
  if (!b->dev) return true;
  const char *last = NULL;
  size_t nmsg = rx_rt_device_validation_messages(b->dev, &last);
  if (nmsg) snprintf(msg, n, "%zu validation messages; the last: %s", nmsg, last ? last : "");
  rx_rt_device_release(b->dev);
  b->dev = NULL;
  return nmsg == 0;
}

/* The kernel library of one program for one backend: kernels.json and binaries in memory. */
typedef struct library {
  rx_strbuf json;
  rx_rt_blob blobs[32];
  char *owned[32];
  size_t nblobs;
} library;

static void library_free(library *l) {
  base_strbuf_free(&l->json);
  for (size_t i = 0; i < l->nblobs; i++) free(l->owned[i]);
  memset(l, 0, sizeof *l);
}

/* Compiles f for b into l; false with a message. */
static bool build_library(rx_module *m, const rx_tensor_fn *f, rxk_backend *b, library *l,
                          rx_strbuf *msg) {
  rx_diag diag;
  base_diag_init(&diag);
  rx_sched_result sr;
  rx_kernel_list kl = {0};
  bool ok =
      sched_schedule(m, f, &b->target, &diag, &sr) && rxk_codegen(m, sr.fn, &b->target, &diag, &kl);
  if (!ok) base_strbuf_append(msg, rx_diag_text(&diag));
  base_diag_free(&diag);
  for (int k = 0; ok && k < kl.n; k++) {
    rx_kernel *kn = kl.kernels[k];
    RX_ASSERT(l->nblobs < RX_ARRAY_LEN(l->blobs));
    char name[256];
    if (b->kind == RX_RT_BACKEND_VULKAN) {
      if (!kn->spirv) {
        base_strbuf_printf(msg, "%s: no SPIR-V (shaderc absent?)", kn->name);
        return false;
      }
      snprintf(name, sizeof name, "%s.spv", kn->name);
      kn->binary = base_arena_strdup(&m->arena, name);
      l->blobs[l->nblobs++] = (rx_rt_blob){kn->binary, kn->spirv, kn->spirv_words * 4};
    } else if (b->kind == RX_RT_BACKEND_CUDA) {
      char *ptx = NULL, *log = NULL;
      size_t len = 0;
      rx_status s =
          tgt_nvrtc_compile(kn->source, kn->name, b->target.cuda_arch, false, &ptx, &len, &log);
      if (s) {
        base_strbuf_printf(msg, "%s: NVRTC: %s\n%s", kn->name, rx_status_message(s),
                           log ? log : "");
        rx_status_free(s);
        free(log);
        return false;
      }
      free(log);
      snprintf(name, sizeof name, "%s.ptx", kn->name);
      kn->ptx = base_arena_strdup(&m->arena, name);
      l->owned[l->nblobs] = ptx;
      l->blobs[l->nblobs++] = (rx_rt_blob){kn->ptx, ptx, len};
    } else {
      snprintf(name, sizeof name, "%s.metal", kn->name);
      l->blobs[l->nblobs++] =
          (rx_rt_blob){base_arena_strdup(&m->arena, name), kn->source, strlen(kn->source)};
    }
  }
  if (ok) {
    const rx_kernel_list *lists[1] = {&kl};
    const rx_tensor_fn *progs[1] = {sr.fn};
    cg_kernels_json(&l->json, &b->target, progs, lists, 1);
  }
  return ok;
}

bool rxk_rt_load(rx_module *m, const rx_tensor_fn *f, rxk_backend *b, rx_rt_library **out,
                 rx_strbuf *msg) {
  *out = NULL;
  library l = {0};
  bool ok = build_library(m, f, b, &l, msg);
  if (ok) {
    rx_status s =
        rx_rt_library_load_memory(b->dev, l.json.data, l.json.len, l.blobs, l.nblobs, out);
    if (s) base_strbuf_printf(msg, "loading its kernels: %s", rx_status_message(s));
    ok = !s;
    rx_status_free(s);
  }
  library_free(&l);
  return ok;
}

rx_status rxk_rt_run(rxk_backend *b, rx_rt_library *lib, const rx_tensor_fn *f, const rxk_env *e,
                     rxk_buffers *io, int bench_runs, double *out_ms) {
  rx_rt_buffer *bufs[RXK_MAX_PARAMS] = {0};
  const char *names[RXK_MAX_VARS];
  for (int i = 0; i < e->n; i++) names[i] = e->vars[i]->name;
  rx_rt_symbols syms = {.names = names, .values = e->values, .count = (size_t)e->n};
  rx_status s = NULL;
  for (int i = 0; !s && i < io->n; i++) {
    if (f->params[i]->kind != RX_PARAM_BUFFER) continue;
    size_t bytes = io->bytes[i] ? io->bytes[i] : 4;
    s = rx_rt_buffer_alloc(b->dev, bytes, &bufs[i]);
    if (!s && io->bytes[i]) s = rx_rt_buffer_write(bufs[i], 0, io->arg[i].data, io->bytes[i]);
  }
  if (!s) s = rx_rt_library_run(lib, f->name, bufs, (size_t)io->n, &syms);
  if (!s) s = rx_rt_device_synchronize(b->dev);
  if (!s) s = rx_rt_library_check(lib); /* run-time checks (an index out of range) */
  for (int i = 0; !s && i < io->n; i++)
    if (f->params[i]->kind == RX_PARAM_BUFFER && f->params[i]->is_output && io->bytes[i])
      s = rx_rt_buffer_read(bufs[i], 0, io->arg[i].data, io->bytes[i]);
  if (!s && bench_runs > 0) {
    rx_rt_timer *timer = NULL;
    double ms = 0;
    s = rx_rt_timer_create(b->dev, &timer);
    if (!s) s = rx_rt_timer_start(timer);
    for (int r = 0; !s && r < bench_runs; r++)
      s = rx_rt_library_run(lib, f->name, bufs, (size_t)io->n, &syms);
    if (!s) s = rx_rt_timer_stop(timer);
    if (!s) s = rx_rt_timer_elapsed_ms(timer, &ms);
    if (!s) *out_ms = ms / bench_runs;
    rx_rt_timer_release(timer);
  }
  for (int i = 0; i < io->n; i++) rx_rt_buffer_release(bufs[i]);
  return s;
}
unsigned char *rxk_compile_artifact(rx_module *m, const rx_target *target, size_t *len, char *why,
                                    size_t n) {
  rx_compile_options o = {.ntargets = 1};
  o.cache = rxk_kcache(); /* support_kcache.c */
  o.targets[0] = target;
  rx_compile_result r;
  memset(&r, 0, sizeof r);
  rx_diag diag;
  base_diag_init(&diag);
  bool ok = drv_compile(m, &o, &diag, &r);
  if (!ok) snprintf(why, n, "%s", rx_diag_text(&diag));
  unsigned char *bytes = ok ? r.artifact : NULL;
  *len = ok ? r.artifact_len : 0;
  if (ok) r.artifact = NULL;
  drv_compile_result_free(&r);
  base_diag_free(&diag);
  return bytes;
}

bool rxk_compile_llm(const char *tests, const char *name, int64_t max_batch,
                     const rx_target *target, const char *path, char *why, size_t n) {
  char dir[1024];
  snprintf(dir, sizeof dir, "%s/llm/models/%s", tests, name);
  rx_module *m = rx_module_new();
  rx_hf_options ho = {.dtype = RX_DTYPE_F32, .max_batch = max_batch};
  rx_compile_options o = {.ntargets = 1};
  o.cache = rxk_kcache(); /* support_kcache.c */
  o.targets[0] = target;
  rx_compile_result r;
  memset(&r, 0, sizeof r);
  rx_diag diag;
  base_diag_init(&diag);
  rx_status st = hf_import(m, dir, &ho);
  bool ok = !st;
  if (st) snprintf(why, n, "import %s: %s", name, rx_status_message(st));
  rx_status_free(st);
  if (ok && !(ok = drv_compile(m, &o, &diag, &r)))
    snprintf(why, n, "compile %s: %s", name, rx_diag_text(&diag));
  if (ok && (st = drv_artifact_write_file(path, r.artifact, r.artifact_len))) {
    snprintf(why, n, "%s: %s", path, rx_status_message(st));
    rx_status_free(st);
    ok = false;
  }
  drv_compile_result_free(&r);
  base_diag_free(&diag);
  rx_module_free(m);
  return ok;
}

double rxk_rel_l2(const float *got, const float *want, size_t n) {
  double num = 0, den = 0;
  for (size_t i = 0; i < n; i++) {
    double d = (double)got[i] - want[i];
    num += d * d;
    den += (double)want[i] * want[i];
  }
  return sqrt(num / (den > 0 ? den : 1));
}

rx_module *rxk_parse_autobatch(const char *tests, const char *const *files, size_t n,
                               const char *name, char *why, size_t wn) {
  rx_strbuf all = {0};
  rx_status st = NULL;
  for (size_t i = 0; !st && i < n; i++) {
    char path[1024], *text = NULL;
    size_t len = 0;
    snprintf(path, sizeof path, "%s/autobatch/%s", tests, files[i]);
    if ((st = base_read_file(path, &text, &len)))
      snprintf(why, wn, "%s: %s", path, rx_status_message(st));
    else
      base_strbuf_printf(&all, "%s\n", text);
    free(text);
  }
  rx_module *m = NULL;
  if (!st) {
    m = rx_module_new();
    rx_diag diag;
    base_diag_init(&diag);
    if (!ir_parse_module(m, name, all.data, all.len, &diag) || diag.errors) {
      snprintf(why, wn, "parse: %s", rx_diag_text(&diag));
      rx_module_free(m);
      m = NULL;
    }
    base_diag_free(&diag);
  }
  rx_status_free(st);
  base_strbuf_free(&all);
  return m;
}

#endif
