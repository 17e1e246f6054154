/* driver/toolchains.c: every kernel of every target through its toolchain, on a pool of threads
 * (issue 16). One job per kernel: Vulkan, shaderc then SPIR-V validation (each kernel is its own
 * SPIR-V module, so validation is once per module); CUDA, one NVRTC compilation for the real
 * architecture that yields both the PTX and the cubin; Metal has no toolchain off macOS (the
 * runtime compiles the MSL). Each job looks in the kernel cache first (driver/kcache.c).
 *
 * Threads share only the job array (each thread writes the jobs it took) and the counters under
 * the pool's mutex; results are heap memory until the main thread, after every thread has
 * joined, copies them into the module's arena and reports errors in kernel order. So the output
 * (and the diagnostics) are the same for any number of threads. Thread safety of the
 * toolchains: NVRTC compiles independent programs concurrently (loaded once through
 * pthread_once); tgt_glsl_to_spirv makes a shaderc compiler per call; SPIRV-Tools a context per
 * call. */
#include "driver.h"

#include "../targets/toolchain.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* The cache key's first line: a new layout of what a job stores gets a new one. */
#define KEY_FORMAT "relaxc kernel 1"
/* How often the main thread redraws the progress line while jobs run. */
#define PROGRESS_TICK_MS 100

typedef enum tool { TOOL_SHADERC, TOOL_SPIRV_VAL, TOOL_NVRTC, NTOOLS } tool;
static const char *const tool_names[NTOOLS] = {"shaderc", "spirv-val", "nvrtc"};

typedef struct job {
  rx_kernel *k;
  int target; /* index into r->targets */
  int index;  /* the kernel's index in its target's flat list */
  rx_target_kind kind;
  const char *arch;    /* CUDA: sm_XX */
  const char *tool_id; /* what the output depends on besides the source (the cache key) */
  rx_kblob out[2];     /* Vulkan: SPIR-V; CUDA: PTX, cubin (heap) */
  rx_status st;
  bool hit, put_failed;
  double wall[NTOOLS], cpu[NTOOLS]; /* ms spent in each tool */
} job;

typedef struct pool {
  job *jobs;
  int *order; /* the jobs in the order threads take them: the longest (NVRTC) first, so the
                 short ones (shaderc) fill the end and the threads finish together */
  int njobs;
  const rx_kcache *cache;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int next, done;                      /* under mu */
  int done_of[RX_COMPILE_MAX_TARGETS]; /* under mu */
  int shown; /* jobs done when the progress line was drawn (the main thread) */
  int total_of[RX_COMPILE_MAX_TARGETS]; /* set before the threads start */
} pool;

double drv_compile_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static double cpu_ms(clockid_t clock) {
  struct timespec ts;
  clock_gettime(clock, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

void drv_progress_line(const rx_compile_options *o, double start_ms, const char *fmt, ...) {
  if (!o->progress) return;
  if (!fmt) {
    fputs("\r\033[K", stderr);
    fflush(stderr);
    return;
  }
  if (drv_compile_now_ms() - start_ms < 1000) return;
  va_list ap;
  va_start(ap, fmt);
  fputs("\r\033[Krelaxc: ", stderr);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fflush(stderr);
}

/* The key: its format, the target kind, the toolchain and its options, the source. */
static void job_key(const job *j, rx_strbuf *b) {
  base_strbuf_printf(b, "%s\n%s\n%s\n", KEY_FORMAT, tgt_target_kind_name(j->kind), j->tool_id);
  base_strbuf_append(b, j->k->source);
}

static void timed_end(job *j, tool t, double w0, double c0) {
  j->wall[t] += drv_compile_now_ms() - w0;
  j->cpu[t] += cpu_ms(CLOCK_THREAD_CPUTIME_ID) - c0;
}

static void compile_vulkan(job *j) {
  char label[300];
  snprintf(label, sizeof label, "%s.comp", j->k->name);
  uint32_t *words = NULL;
  size_t n = 0;
  double w0 = drv_compile_now_ms(), c0 = cpu_ms(CLOCK_THREAD_CPUTIME_ID);
  j->st = tgt_glsl_to_spirv(j->k->source, strlen(j->k->source), label, &words, &n);
  timed_end(j, TOOL_SHADERC, w0, c0);
  if (!j->st && tgt_spirv_tools_available()) {
    w0 = drv_compile_now_ms(), c0 = cpu_ms(CLOCK_THREAD_CPUTIME_ID);
    j->st = tgt_spirv_validate(words, n);
    timed_end(j, TOOL_SPIRV_VAL, w0, c0);
  }
  if (j->st) {
    free(words);
    return;
  }
  j->out[0] = (rx_kblob){(unsigned char *)words, n * sizeof *words};
}

static void compile_cuda(job *j) {
  char label[300];
  snprintf(label, sizeof label, "%s.cu", j->k->name);
  char *ptx = NULL, *cubin = NULL;
  size_t ptx_len = 0, cubin_len = 0;
  double w0 = drv_compile_now_ms(), c0 = cpu_ms(CLOCK_THREAD_CPUTIME_ID);
  j->st = tgt_nvrtc_compile_both(j->k->source, label, j->arch, &ptx, &ptx_len, &cubin, &cubin_len,
                                 NULL);
  timed_end(j, TOOL_NVRTC, w0, c0);
  if (j->st) return;
  j->out[0] = (rx_kblob){(unsigned char *)ptx, ptx_len};
  j->out[1] = (rx_kblob){(unsigned char *)cubin, cubin_len};
}

static int job_parts(const job *j) { return j->kind == RX_TARGET_CUDA ? 2 : 1; }

static void run_job(const pool *p, job *j) {
  rx_strbuf key = {0};
  if (p->cache) {
    job_key(j, &key);
    j->hit = drv_kcache_get(p->cache, key.data, key.len, job_parts(j), j->out);
  }
  if (!j->hit) {
    if (j->kind == RX_TARGET_VULKAN)
      compile_vulkan(j);
    else
      compile_cuda(j);
    if (!j->st && p->cache) {
      rx_status st = drv_kcache_put(p->cache, key.data, key.len, job_parts(j), j->out);
      j->put_failed = st != NULL;
      rx_status_free(st);
    }
  }
  base_strbuf_free(&key);
}

static void *worker(void *arg) {
  pool *p = arg;
  for (;;) {
    pthread_mutex_lock(&p->mu);
    int i = p->next < p->njobs ? p->order[p->next++] : -1;
    pthread_mutex_unlock(&p->mu);
    if (i < 0) return NULL;
    run_job(p, &p->jobs[i]);
    pthread_mutex_lock(&p->mu);
    p->done++;
    p->done_of[p->jobs[i].target]++;
    pthread_cond_signal(&p->cv);
    pthread_mutex_unlock(&p->mu);
  }
}

/* "vulkan 120/355, cuda 80/355" under the pool's lock */
static void progress(const rx_compile_options *o, const rx_compile_result *r, pool *p,
                     double start_ms) {
  char line[256];
  size_t at = 0;
  for (int t = 0; t < r->ntargets; t++) {
    if (!p->total_of[t]) continue;
    at += (size_t)snprintf(line + at, sizeof line - at, "%s%s %d/%d", at ? ", " : "",
                           tgt_target_kind_name(r->targets[t].target->kind), p->done_of[t],
                           p->total_of[t]);
    if (at >= sizeof line) break;
  }
  drv_progress_line(o, start_ms, "toolchains: %s kernels", line);
  if (drv_compile_now_ms() - start_ms >= 1000) p->shown = p->done;
}

static int online_cpus(void) {
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n < 1 ? 1 : n > 256 ? 256 : (int)n;
}

/* Runs every job on min(jobs, njobs) threads; the calling thread draws the progress line. */
static void run_pool(const rx_compile_options *o, const rx_compile_result *r, pool *p,
                     double start_ms) {
  int n = o->jobs > 0 ? o->jobs : online_cpus();
  if (n > p->njobs) n = p->njobs;
  pthread_t *threads = base_malloc(sizeof *threads * (size_t)(n + 1));
  int started = 0;
  for (int i = 0; i < n; i++)
    if (pthread_create(&threads[started], NULL, worker, p) == 0) started++;
  if (!started) worker(p); /* no thread could start: the jobs run here */
  pthread_mutex_lock(&p->mu);
  while (p->done < p->njobs) {
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_nsec += PROGRESS_TICK_MS * 1000000L;
    if (until.tv_nsec >= 1000000000L) {
      until.tv_sec++;
      until.tv_nsec -= 1000000000L;
    }
    pthread_cond_timedwait(&p->cv, &p->mu, &until);
    if (p->done != p->shown) progress(o, r, p, start_ms);
  }
  pthread_mutex_unlock(&p->mu);
  for (int i = 0; i < started; i++) pthread_join(threads[i], NULL);
  free(threads);
}

/* What a target's kernels go through here, or a note on why they do not: sets to->note,
 * to->binaries, the CUDA arrays, *out_tool_id (heap, or NULL: no jobs for this target). */
static void target_setup(rx_module *m, const rx_compile_options *o, rx_target_output *to,
                         char **out_tool_id) {
  const rx_target *t = to->target;
  *out_tool_id = NULL;
  if (t->kind == RX_TARGET_VULKAN) {
    if (!tgt_shaderc_available() || !to->nkernels) {
      to->binaries = tgt_shaderc_available();
      if (!to->binaries)
        to->note = "relaxc was built without shaderc: GLSL sources only, no SPIR-V";
      return;
    }
    rx_strbuf b = {0};
    base_strbuf_printf(&b, "%s; validated by %s", tgt_shaderc_id(), tgt_spirv_tools_id());
    *out_tool_id = base_strbuf_take(&b);
    return;
  }
  if (t->kind == RX_TARGET_METAL) {
    to->note = "MSL sources only (the runtime compiles them; xcrun metal is macOS only)";
    return;
  }
  size_t n = (size_t)(to->nkernels + 1);
  to->ptx = ir_module_alloc(m, sizeof *to->ptx * n);
  to->ptx_len = ir_module_alloc(m, sizeof *to->ptx_len * n);
  to->cubin = ir_module_alloc(m, sizeof *to->cubin * n);
  to->cubin_len = ir_module_alloc(m, sizeof *to->cubin_len * n);
  if (o->no_nvrtc) {
    to->note = "NVRTC not run (--no-nvrtc): CUDA C sources only, no PTX or cubin";
    return;
  }
  rx_status st = tgt_nvrtc_load(NULL, NULL);
  if (st) {
    to->note =
        base_arena_printf(&m->arena, "NVRTC not found: CUDA C sources only, no PTX or cubin (%s)",
                          rx_status_message(st));
    rx_status_free(st);
    return;
  }
  *out_tool_id = tgt_nvrtc_id(t->cuda_arch);
}

/* A finished job's output into the module (arena) and the target's arrays, or its error. */
static bool place(rx_module *m, rx_target_output *to, job *j, rx_diag *diag) {
  rx_kernel *k = j->k;
  if (j->st) {
    if (j->kind == RX_TARGET_VULKAN)
      base_diag_report(diag, RX_DIAG_ERROR, (rx_loc){0},
                       "kernel '%s': the emitted GLSL does not compile: %s", k->name,
                       rx_status_message(j->st));
    else
      base_diag_report(diag, RX_DIAG_ERROR, (rx_loc){0}, "NVRTC: kernel '%s': %s", k->name,
                       rx_status_message(j->st));
    return false;
  }
  if (j->kind == RX_TARGET_VULKAN) {
    k->spirv = base_arena_dup(&m->arena, j->out[0].data, j->out[0].len);
    k->spirv_words = j->out[0].len / sizeof(uint32_t);
    k->binary = tgt_target_binary_name(&m->arena, to->target, k->name);
    return true;
  }
  to->ptx[j->index] = base_arena_dup(&m->arena, j->out[0].data, j->out[0].len + 1); /* + NUL */
  to->ptx_len[j->index] = j->out[0].len;
  k->ptx = tgt_target_asm_name(&m->arena, to->target, k->name);
  to->cubin[j->index] = base_arena_dup(&m->arena, j->out[1].data, j->out[1].len);
  to->cubin_len[j->index] = j->out[1].len;
  k->binary = tgt_target_binary_name(&m->arena, to->target, k->name);
  return true;
}

/* The rows of --time-passes for the toolchains: per tool and target the time its jobs spent in
 * it (wall summed over the threads, and CPU), then the whole step and the cache. */
static void time_rows(const rx_compile_options *o, const rx_compile_result *r, const pool *p,
                      rx_strbuf *times, double wall, double cpu) {
  int threads = o->jobs > 0 ? o->jobs : online_cpus();
  base_strbuf_printf(times, "  %-22s %10s %10s   (-j %d; tool rows: summed over the jobs)\n",
                     "toolchains", "wall ms", "cpu ms", threads);
  for (int t = 0; t < r->ntargets; t++) {
    const char *kind = tgt_target_kind_name(r->targets[t].target->kind);
    if (r->targets[t].target->kind == RX_TARGET_METAL) {
      base_strbuf_printf(times, "    %-20s %10s %10s   (xcrun metal: macOS only, not run)\n",
                         "metal[metal]", "-", "-");
      continue;
    }
    for (int tl = 0; tl < NTOOLS; tl++) {
      double w = 0, c = 0;
      int ran = 0;
      for (int i = 0; i < p->njobs; i++)
        if (p->jobs[i].target == t && (p->jobs[i].wall[tl] > 0 || p->jobs[i].cpu[tl] > 0)) {
          w += p->jobs[i].wall[tl];
          c += p->jobs[i].cpu[tl];
          ran++;
        }
      if (!ran) continue;
      char label[64];
      snprintf(label, sizeof label, "%s[%s]", tool_names[tl], kind);
      base_strbuf_printf(times, "    %-20s %10.3f %10.3f   (%d kernel%s)\n", label, w, c, ran,
                         ran == 1 ? "" : "s");
    }
  }
  int hits = 0;
  for (int i = 0; i < p->njobs; i++) hits += p->jobs[i].hit;
  base_strbuf_printf(
      times, "    %-20s %10.3f %10.3f   (%d kernel%s: %d from the cache, %d compiled)\n", "elapsed",
      wall, cpu, p->njobs, p->njobs == 1 ? "" : "s", hits, p->njobs - hits);
  if (o->cache) base_strbuf_printf(times, "    (kernel cache: %s)\n", drv_kcache_dir(o->cache));
}

bool drv_compile_toolchains(rx_module *m, const rx_compile_options *o, rx_compile_result *r,
                            rx_diag *diag, rx_strbuf *times, double start_ms) {
  double w0 = drv_compile_now_ms(), c0 = cpu_ms(CLOCK_PROCESS_CPUTIME_ID);
  pool p = {.cache = o->cache, .shown = -1}; /* -1: the first line is drawn once due */
  char *ids[RX_COMPILE_MAX_TARGETS] = {0};
  int total = 0;
  for (int t = 0; t < r->ntargets; t++) {
    target_setup(m, o, &r->targets[t], &ids[t]);
    if (ids[t]) total += r->targets[t].nkernels;
  }
  p.jobs = calloc((size_t)total + 1, sizeof *p.jobs);
  for (int t = 0; t < r->ntargets; t++) {
    rx_target_output *to = &r->targets[t];
    for (int i = 0; ids[t] && i < to->nkernels; i++)
      p.jobs[p.njobs++] = (job){.k = to->flat[i],
                                .target = t,
                                .index = i,
                                .kind = to->target->kind,
                                .arch = to->target->cuda_arch,
                                .tool_id = ids[t]};
    p.total_of[t] = ids[t] ? to->nkernels : 0;
  }
  p.order = base_malloc(sizeof *p.order * ((size_t)p.njobs + 1));
  int no = 0;
  for (int pass = 0; pass < 2; pass++)
    for (int i = 0; i < p.njobs; i++)
      if ((p.jobs[i].kind == RX_TARGET_CUDA) == (pass == 0)) p.order[no++] = i;
  pthread_mutex_init(&p.mu, NULL);
  pthread_cond_init(&p.cv, NULL);
  if (p.njobs) run_pool(o, r, &p, start_ms);
  pthread_cond_destroy(&p.cv);
  pthread_mutex_destroy(&p.mu);
  bool ok = true, put_failed = false, wrote = false;
  for (int i = 0; i < p.njobs; i++) {
    job *j = &p.jobs[i];
    ok = place(m, &r->targets[j->target], j, diag) && ok;
    put_failed |= j->put_failed;
    wrote |= !j->hit && !j->st;
  }
  for (int t = 0; t < r->ntargets; t++)
    if (ids[t]) r->targets[t].binaries = ok;
  if (put_failed)
    base_diag_report(diag, RX_DIAG_WARNING, (rx_loc){0},
                     "the kernel cache in %s could not store every kernel (compiled anyway)",
                     drv_kcache_dir(o->cache));
  if (o->cache && wrote) drv_kcache_trim(o->cache); /* a warm compile adds nothing: no scan */
  if (times)
    time_rows(o, r, &p, times, drv_compile_now_ms() - w0, cpu_ms(CLOCK_PROCESS_CPUTIME_ID) - c0);
  for (int i = 0; i < p.njobs; i++) {
    rx_status_free(p.jobs[i].st);
    free(p.jobs[i].out[0].data);
    free(p.jobs[i].out[1].data);
  }
  free(p.jobs);
  free(p.order);
  for (int t = 0; t < r->ntargets; t++) free(ids[t]);
  return ok;
}
