/* tests/runtime/cuda_graph_test.c: the CUDA backend's launches replayed as CUDA graphs
 * (runtime/cuda/cuda.c, runtime/replay.c in update mode), driven through the runtime's device
 * interface on a fake driver (tests/runtime/fake_cuda.c, built as libcuda.so.1 in a directory of
 * its own). The fake runs no kernel: it traces every launch (direct or a node of a launched
 * graph: function, grid, block, shared bytes, parameter values), copy, fill, read, write and
 * event, and the test checks that the trace is exactly what it asked for, in order, with graphs
 * and with RX_CUDA_GRAPHS=0. No GPU and no real driver: it runs on every machine.
 *
 * argv[1]: the fake's path. It is opened first, so that the runtime's dlopen("libcuda.so.1")
 * finds it already loaded (LD_LIBRARY_PATH, set by ctest, points at it as well). argv[2]
 * "--old-driver": the fake was built without the graph entry points (a driver older than CUDA
 * 12.0), and every launch must be issued directly. */
#include <dlfcn.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>

#include "../unit/check.h"
#include "relaxc/runtime.h"
#include "runtime/device.h"

static bool driver_graphs = true; /* the driver has the graph entry points */

/* ---- the fake's test-only functions ---- */
static struct {
  void (*kernel)(const char *name, int nptrs, int nints);
  long (*last_alloc)(void);
  size_t (*trace_count)(void);
  const char *(*trace_line)(size_t i);
  void (*trace_clear)(void);
  void (*fail)(const char *entry, int skip, int count);
  long (*count)(const char *what);
  void (*reset)(void);
  void (*set_memory_limit)(size_t limit);
} fake;

static bool load_fake(const char *path) {
  void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    fprintf(stderr, "FAIL: cannot open the fake driver %s: %s\n", path, dlerror());
    return false;
  }
#define SYM(field, name)                                                                           \
  fake.field = (__typeof__(fake.field))(uintptr_t)dlsym(h, name);                                  \
  if (!fake.field) {                                                                               \
    fprintf(stderr, "FAIL: %s has no %s: not the fake driver\n", path, name);                      \
    return false;                                                                                  \
  }
  SYM(kernel, "fake_cuda_kernel")
  SYM(last_alloc, "fake_cuda_last_alloc")
  SYM(trace_count, "fake_cuda_trace_count")
  SYM(trace_line, "fake_cuda_trace_line")
  SYM(trace_clear, "fake_cuda_trace_clear")
  SYM(fail, "fake_cuda_fail")
  SYM(count, "fake_cuda_count")
  SYM(reset, "fake_cuda_reset")
  SYM(set_memory_limit, "fake_cuda_set_memory_limit")
#undef SYM
  return true;
}

/* ---- the kernels: one table for kernels.json and the fake's declarations ---- */
typedef struct kdesc {
  const char *name;
  int nbuffers, nscalars;
  uint32_t block[3];
  uint32_t shared;
  bool dynamic; /* kernels.json "shared_dynamic": the launch asks for it (else static: none) */
} kdesc;
enum { NORM, MATMUL, ATTN, LOGITS, NKERNELS };
static const kdesc kernels[NKERNELS] = {
    [NORM] = {"norm", 2, 1, {64, 1, 1}, 0, false},
    [MATMUL] = {"matmul", 3, 2, {128, 1, 1}, 96 * 1024, true}, /* as gemm_wgmma */
    [ATTN] = {"attn", 3, 2, {32, 4, 1}, 49152, false},         /* static, as gemm_mma */
    [LOGITS] = {"logits", 2, 1, {256, 1, 1}, 0, false},
};

static void declare_kernels(void) {
  for (int i = 0; i < NKERNELS; i++)
    fake.kernel(kernels[i].name, kernels[i].nbuffers, kernels[i].nscalars);
}

/* kernels.json for the table: any bytes make a module on the fake */
static char *kernels_json(void) {
  size_t cap = 8192, len = 0;
  char *j = malloc(cap);
  if (!j) abort();
#define PUT(...) len += (size_t)snprintf(j + len, cap - len, __VA_ARGS__)
  PUT("{\"format\": \"relaxc-kernels\", \"version\": 1, \"target\": \"cuda-sm_80\", \"lang\": "
      "\"cuda\", \"kernels\": [");
  for (int i = 0; i < NKERNELS; i++) {
    const kdesc *k = &kernels[i];
    PUT("%s{\"name\": \"%s\", \"program\": \"step\", \"binary\": \"fake.cubin\", \"condition\": "
        "null, \"grid\": [\"1\", \"1\", \"1\"], \"block\": [%u, %u, %u], \"shared_bytes\": %u, %s"
        "\"scalars\": {\"location\": \"parameters\", \"bytes\": %d, \"binding\": -1}, \"args\": [",
        i ? ", " : "", k->name, k->block[0], k->block[1], k->block[2], k->shared,
        k->dynamic ? "\"shared_dynamic\": true, " : "", 4 * k->nscalars);
    for (int b = 0; b < k->nbuffers; b++)
      PUT("%s{\"kind\": \"buffer\", \"name\": \"b%d\", \"dtype\": \"f32\", \"param\": %d, "
          "\"binding\": %d}",
          b ? ", " : "", b, b, b);
    for (int s = 0; s < k->nscalars; s++)
      PUT(", {\"kind\": \"scalar\", \"name\": \"s%d\", \"dtype\": \"i32\"}", s);
    PUT("]}");
  }
  PUT("]}");
#undef PUT
  if (len >= cap) abort();
  return j;
}

/* A kernel scheduled for a subgroup size loads where the warp has that size (the fake's 32)
 * and is refused, with both sizes named, where it does not. */
static void test_subgroup_size(rx_rt_device *d) {
  static const char image[] = "any image";
  rx_rt_blob blob = {"fake.cubin", image, sizeof image};
  for (int size = 32; size <= 64; size *= 2) {
    char json[512];
    snprintf(
        json, sizeof json,
        "{\"format\": \"relaxc-kernels\", \"version\": 1, \"target\": \"cuda-sm_80\", "
        "\"lang\": \"cuda\", \"kernels\": [{\"name\": \"norm\", \"program\": \"p\", "
        "\"binary\": \"fake.cubin\", \"grid\": [\"1\", \"1\", \"1\"], \"block\": [64, "
        "1, 1], \"subgroup_size\": %d, \"scalars\": {\"location\": \"parameters\", \"bytes\": 0}, "
        "\"args\": []}]}",
        size);
    rx_rt_library *l = NULL;
    rx_status s = rx_rt_library_load_memory(d, json, strlen(json), &blob, 1, &l);
    if (size == 32)
      CHECK_MSG(!s, "warps of 32: %s", s ? rx_status_message(s) : "");
    else
      CHECK_MSG(s && rx_status_code_of(s) == RX_ERR_UNSUPPORTED &&
                    strstr(rx_status_message(s), "warps of 64 threads") &&
                    strstr(rx_status_message(s), "have 32"),
                "warps of 64 refused: %s", s ? rx_status_message(s) : "loaded");
    rx_status_free(s);
    rx_rt_library_release(l);
  }
}

typedef struct lib {
  rx_rt_library *l;
  rx_rt_kernel *k[NKERNELS];
} lib;

static lib load(rx_rt_device *d) {
  lib L = {0};
  char *json = kernels_json();
  static const char image[] = "not a cubin: the fake driver takes any image";
  rx_rt_blob blob = {"fake.cubin", image, sizeof image};
  CHECK_OK(rx_rt_library_load_memory(d, json, strlen(json), &blob, 1, &L.l));
  free(json);
  for (int i = 0; L.l && i < NKERNELS; i++)
    CHECK_OK(rx_rt_library_kernel(L.l, kernels[i].name, &L.k[i]));
  return L;
}

/* ---- what the trace should be ---- */
static struct {
  char **lines;
  size_t n, cap;
} want;

__attribute__((format(printf, 1, 2))) static void expect(const char *fmt, ...) {
  char line[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  if (want.n == want.cap) {
    want.cap = want.cap ? 2 * want.cap : 256;
    want.lines = realloc(want.lines, want.cap * sizeof *want.lines);
    if (!want.lines) abort();
  }
  want.lines[want.n] = malloc(strlen(line) + 1);
  if (!want.lines[want.n]) abort();
  strcpy(want.lines[want.n++], line);
}

static void want_clear(void) {
  for (size_t i = 0; i < want.n; i++) free(want.lines[i]);
  want.n = 0;
}

/* Of every line traced (the runs with graphs on and off are compared by it). */
static uint64_t digest = 0xcbf29ce484222325ull;

/* The fake's trace equals the lines expected; both are emptied. */
static void check_trace(const char *what) {
  size_t n = fake.trace_count(), i = 0;
  for (size_t j = 0; j < n; j++)
    for (const char *c = fake.trace_line(j); *c; c++)
      digest = (digest ^ (uint8_t)*c) * 0x100000001b3ull;
  while (i < n && i < want.n && !strcmp(fake.trace_line(i), want.lines[i])) i++;
  CHECK_MSG(i == n && n == want.n,
            "%s: %zu lines traced, %zu expected; the first difference, line %zu:\n"
            "  traced:   %s\n  expected: %s",
            what, n, want.n, i, i < n ? fake.trace_line(i) : "(none)",
            i < want.n ? want.lines[i] : "(none)");
  fake.trace_clear();
  want_clear();
}

/* ---- buffers and launches, each with the line it should trace ---- */
typedef struct tbuf {
  rx_rt_buffer *b;
  long id; /* the fake's allocation: "#id" in the trace */
} tbuf;

static tbuf buffer(rx_rt_device *d, size_t n) {
  tbuf t = {NULL, 0};
  CHECK_OK(rx_rt_buffer_alloc(d, n, &t.b));
  t.id = fake.last_alloc();
  return t;
}

static void release(tbuf *t) {
  rx_rt_buffer_release(t->b);
  t->b = NULL;
}

static void launch(const lib *L, int which, uint32_t gx, uint32_t gy, const tbuf *const *bufs,
                   const int32_t *vals) {
  const kdesc *kd = &kernels[which];
  rx_rt_buffer *b[8];
  char args[256] = "";
  size_t len = 0;
  for (int i = 0; i < kd->nbuffers; i++) {
    b[i] = bufs[i]->b;
    len += (size_t)snprintf(args + len, sizeof args - len, "%s#%ld", i ? "," : "", bufs[i]->id);
  }
  for (int i = 0; i < kd->nscalars; i++)
    len += (size_t)snprintf(args + len, sizeof args - len, ",%d", vals[i]);
  rx_rt_launch_params p = {{gx, gy, 1}, {kd->block[0], kd->block[1], kd->block[2]},
                           b,           (size_t)kd->nbuffers,
                           vals,        (size_t)kd->nscalars};
  CHECK_OK(rx_rt_kernel_launch(L->k[which], &p));
  expect("launch %s grid=%u,%u,1 block=%u,%u,%u shared=%u args=%s", kd->name, gx, gy, kd->block[0],
         kd->block[1], kd->block[2], kd->dynamic ? kd->shared : 0, args);
}

static void sync_device(rx_rt_device *d) { CHECK_OK(rx_rt_device_synchronize(d)); }

/* ---- the stats ---- */
typedef struct counts {
  rt_replay_stats st;
  long graph_launches, node_updates, instantiations;
} counts;

static counts now(rx_rt_device *d) {
  counts c = {{0, 0, 0, 0},
              fake.count("graph_launches"),
              fake.count("node_updates"),
              fake.count("instantiations")};
  if (d->replay) c.st = *d->replay;
  return c;
}

/* What happened since c: flushes of each kind, launches updated, graphs launched. */
#define DELTA(c, d, field)      ((long)(now(d).st.field - (c).st.field))
#define FAKE_DELTA(c, d, field) (now(d).field - (c).field)

/* The tests of the trace name each buffer by its own allocation, so they run with the memory
 * cache off (RX_CUDA_CACHE=0); test_memory_cache runs with it on. */
static rx_rt_device *open_device(bool graphs) {
  if (graphs)
    unsetenv("RX_CUDA_GRAPHS");
  else
    setenv("RX_CUDA_GRAPHS", "0", 1);
  rx_rt_device *d = NULL;
  CHECK_OK(rx_rt_device_open("cuda:0", NULL, &d));
  unsetenv("RX_CUDA_GRAPHS");
  if (!d) return NULL;
  CHECK_MSG(!strncmp(rx_rt_device_get_info(d)->name, "fake CUDA", 9), "the device is the fake: %s",
            rx_rt_device_get_info(d)->name);
  CHECK_MSG((d->replay != NULL) == (graphs && driver_graphs),
            "replay stats exactly with graphs on");
  return d;
}

/* A two-launch sequence (matmul over a, w into q; attn over q), flushed by a synchronize. */
typedef struct seq {
  tbuf *a, *w, *q, *kc, *o;
  int32_t n, m;
  uint32_t attn_grid;
} seq;

static void run_seq(rx_rt_device *d, const lib *L, const seq *s) {
  const tbuf *mm[] = {s->a, s->w, s->q}, *at[] = {s->q, s->kc, s->o};
  launch(L, MATMUL, 4, 1, mm, (int32_t[]){s->n, 64});
  launch(L, ATTN, s->attn_grid, 2, at, (int32_t[]){s->m, 2});
  sync_device(d);
}

/* Exactly the launches that change are updated: by grid, by symbolic value, by buffer. */
static void test_updates(rx_rt_device *d, const lib *L) {
  tbuf a = buffer(d, 256), w = buffer(d, 256), q = buffer(d, 256), kc = buffer(d, 256),
       o = buffer(d, 256), a2 = buffer(d, 256);
  seq s = {&a, &w, &q, &kc, &o, 64, 10, 1};
  counts c = now(d);
  run_seq(d, L, &s);
  CHECK_MSG(DELTA(c, d, direct) == 1 && DELTA(c, d, built) == 0, "first seen: launched directly");
  CHECK_MSG(FAKE_DELTA(c, d, graph_launches) == 0, "first seen: no graph");
  check_trace("first seen");
  c = now(d);
  run_seq(d, L, &s);
  CHECK_MSG(DELTA(c, d, built) == 1 && FAKE_DELTA(c, d, instantiations) == 1 &&
                FAKE_DELTA(c, d, graph_launches) == 1,
            "second seen: a graph built and launched");
  check_trace("built");
  static const struct {
    const char *what;
    int change; /* 0 nothing, 1 attn's grid, 2 matmul's n, 3 the buffer both use */
    long updated;
  } steps[] = {{"the same", 0, 0}, {"a grid", 1, 1},   {"a symbolic value", 2, 1},
               {"a buffer", 3, 2}, {"the same", 0, 0}, {"all at once", 4, 2}};
  for (size_t i = 0; i < RX_ARRAY_LEN(steps); i++) {
    if (steps[i].change == 1 || steps[i].change == 4) s.attn_grid++;
    if (steps[i].change == 2 || steps[i].change == 4) s.n++;
    if (steps[i].change == 3) s.q = s.q == &q ? &a2 : &q;
    c = now(d);
    run_seq(d, L, &s);
    CHECK_MSG(DELTA(c, d, replayed) == 1 && FAKE_DELTA(c, d, graph_launches) == 1 &&
                  DELTA(c, d, direct) == 0,
              "%s: replayed", steps[i].what);
    CHECK_MSG(DELTA(c, d, updated) == steps[i].updated &&
                  FAKE_DELTA(c, d, node_updates) == steps[i].updated,
              "%s: %ld launches updated, the fake saw %ld, %ld expected", steps[i].what,
              DELTA(c, d, updated), FAKE_DELTA(c, d, node_updates), steps[i].updated);
    check_trace(steps[i].what);
  }
  /* copies and fills are done for real, in order with the launches */
  const uint8_t pattern[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  uint8_t got[8] = {0};
  CHECK_OK(rx_rt_buffer_write(a.b, 0, pattern, 8));
  expect("write #%ld 8", a.id);
  run_seq(d, L, &s);
  CHECK_OK(rx_rt_buffer_fill(a.b, 2, 3, 0xee));
  expect("fill #%ld+2 3 238", a.id);
  CHECK_OK(rx_rt_buffer_copy(a.b, 0, o.b, 8, 8));
  expect("copy #%ld #%ld+8 8", a.id, o.id);
  CHECK_OK(rx_rt_buffer_read(o.b, 8, got, 8));
  expect("read #%ld+8 8", o.id);
  CHECK_MSG(!memcmp(got, (uint8_t[]){1, 2, 0xee, 0xee, 0xee, 6, 7, 8}, 8),
            "write, fill, copy, read");
  check_trace("copies and fills");
  tbuf *all[] = {&a, &w, &q, &kc, &o, &a2};
  for (size_t i = 0; i < RX_ARRAY_LEN(all); i++) release(all[i]);
}

/* The decode step of a two-layer model over a growing cache of length m. Segment A (up to the
 * copy into the cache): norm, matmul, attn; segment B (up to the read of the logits): norm,
 * matmul, attn, logits, split in two by a fill every fourth step. */
typedef struct model {
  tbuf x, h, w[2], q, kc[2], o, lg, h2;
} model;

static void decode_step(rx_rt_device *d, const lib *L, model *M, int s, bool graphs) {
  int32_t m = 10 + s, tok = s;
  uint32_t ag = (uint32_t)(m + 31) / 32;
  CHECK_OK(rx_rt_buffer_write(M->x.b, 0, &tok, 4));
  expect("write #%ld 4", M->x.id);
  size_t traced = fake.trace_count();
  launch(L, NORM, 1, 1, (const tbuf *[]){&M->x, &M->h}, (int32_t[]){64});
  launch(L, MATMUL, 4, 1, (const tbuf *[]){&M->h, &M->w[0], &M->q}, (int32_t[]){64, 64});
  launch(L, ATTN, ag, 2, (const tbuf *[]){&M->q, &M->kc[0], &M->o}, (int32_t[]){m, 2});
  CHECK_MSG(graphs ? fake.trace_count() == traced : fake.trace_count() == traced + 3,
            "step %d: launches %s", s, graphs ? "wait in the log" : "are issued at once");
  CHECK_OK(rx_rt_buffer_copy(M->q.b, 0, M->kc[0].b, (size_t)(m % 64) * 4, 4));
  if (m % 64)
    expect("copy #%ld #%ld+%d 4", M->q.id, M->kc[0].id, (m % 64) * 4);
  else
    expect("copy #%ld #%ld 4", M->q.id, M->kc[0].id);
  launch(L, NORM, 1, 1, (const tbuf *[]){&M->o, &M->h}, (int32_t[]){64});
  launch(L, MATMUL, 4, 1, (const tbuf *[]){&M->h, &M->w[1], &M->q}, (int32_t[]){64, 64});
  if (s % 4 == 3) {
    CHECK_OK(rx_rt_buffer_fill(M->o.b, 0, 16, 0));
    expect("fill #%ld 16 0", M->o.id);
  }
  launch(L, ATTN, ag, 2, (const tbuf *[]){&M->q, &M->kc[1], &M->o}, (int32_t[]){m, 2});
  launch(L, LOGITS, 4, 1, (const tbuf *[]){&M->o, &M->lg}, (int32_t[]){100});
  uint8_t logits[16];
  CHECK_OK(rx_rt_buffer_read(M->lg.b, 0, logits, 16));
  expect("read #%ld 16", M->lg.id);
}

static void decode(rx_rt_device *d, const lib *L, bool graphs) {
  model M;
  M.x = buffer(d, 256), M.h = buffer(d, 256), M.w[0] = buffer(d, 256), M.w[1] = buffer(d, 256);
  M.q = buffer(d, 256), M.kc[0] = buffer(d, 256), M.kc[1] = buffer(d, 256);
  M.o = buffer(d, 256), M.lg = buffer(d, 256), M.h2 = buffer(d, 256);
  rx_rt_timer *t = NULL;
  CHECK_OK(rx_rt_timer_create(d, &t));
  for (int s = 0; s < 48; s++) {
    if (s == 17) { /* the hidden state moves to another buffer (a new allocation) */
      tbuf old = M.h;
      M.h = M.h2;
      M.h2 = old;
    }
    if (s == 30) {
      CHECK_OK(rx_rt_timer_start(t));
      expect("event");
    }
    counts c = now(d);
    decode_step(d, L, &M, s, graphs);
    if (s == 31) {
      CHECK_OK(rx_rt_timer_stop(t));
      expect("event");
    }
    char what[64];
    snprintf(what, sizeof what, "decode step %d (graphs %s)", s, graphs ? "on" : "off");
    check_trace(what);
    if (!graphs) {
      CHECK_MSG(FAKE_DELTA(c, d, graph_launches) == 0 && FAKE_DELTA(c, d, instantiations) == 0,
                "%s: no graph", what);
      continue;
    }
    if (s % 4 == 3) continue; /* segments of their own: only the trace is checked */
    long direct = s == 0 ? 2 : 0, built = s == 1 ? 2 : 0, replayed = s >= 2 ? 2 : 0;
    long updated = s < 2 ? 0 : s == 17 ? 6 : 2; /* attn's m, and at 17 the launches of h */
    CHECK_MSG(DELTA(c, d, direct) == direct && DELTA(c, d, built) == built &&
                  DELTA(c, d, replayed) == replayed && DELTA(c, d, updated) == updated &&
                  FAKE_DELTA(c, d, graph_launches) == built + replayed,
              "%s: direct %ld built %ld replayed %ld updated %ld graph launches %ld", what,
              DELTA(c, d, direct), DELTA(c, d, built), DELTA(c, d, replayed), DELTA(c, d, updated),
              FAKE_DELTA(c, d, graph_launches));
  }
  double ms = 0;
  CHECK_OK(rx_rt_timer_elapsed_ms(t, &ms));
  rx_rt_timer_release(t);
  tbuf *all[] = {&M.x, &M.h, &M.w[0], &M.w[1], &M.q, &M.kc[0], &M.kc[1], &M.o, &M.lg, &M.h2};
  for (size_t i = 0; i < RX_ARRAY_LEN(all); i++) release(all[i]);
  check_trace("buffers released");
}

/* A sequence of the given kernels, each over the first buffers of pool and symbolic values v,
 * v + 1, ...; flushed by a synchronize. */
static void run_kernels(rx_rt_device *d, const lib *L, const int *ks, int nk, tbuf *pool,
                        int32_t v) {
  const tbuf *bufs[] = {&pool[0], &pool[1], &pool[2]};
  for (int i = 0; i < nk; i++)
    launch(L, ks[i], 1 + (uint32_t)i, 1, bufs, (int32_t[]){v + i, v + i + 1});
  sync_device(d);
}

/* A graph the driver will not build, update or launch: the launches go directly, correct, and
 * nothing made for it is left. */
static void test_failures(rx_rt_device *d, const lib *L) {
  tbuf pool[3] = {buffer(d, 64), buffer(d, 64), buffer(d, 64)};
  static const struct {
    const char *entry, *what;
    int run, skip; /* the failure injected before run `run` (2: the build, 3: a replay) */
    int ks[3], nk;
  } cases[] = {
      {"cuGraphInstantiateWithFlags", "instantiating fails", 2, 0, {NORM, LOGITS}, 2},
      {"cuGraphAddKernelNode_v2", "adding the second node fails", 2, 1, {LOGITS, NORM, NORM}, 3},
      {"cuGraphCreate", "creating the graph fails", 2, 0, {LOGITS, LOGITS}, 2},
      {"cuGraphExecKernelNodeSetParams_v2", "updating fails", 3, 0, {MATMUL, MATMUL}, 2},
      {"cuGraphLaunch", "launching the graph fails", 3, 0, {MATMUL, NORM}, 2},
  };
  for (size_t i = 0; i < RX_ARRAY_LEN(cases); i++) {
    counts c = now(d);
    long graphs = fake.count("graphs"), execs = fake.count("execs");
    for (int run = 1; run <= 5; run++) {
      if (run == cases[i].run) fake.fail(cases[i].entry, cases[i].skip, 1);
      run_kernels(d, L, cases[i].ks, cases[i].nk, pool, 100 * run);
      check_trace(cases[i].what);
      fake.fail(cases[i].entry, 0, 0);
    }
    /* sequences of their own (no other test runs them): seen at run 1, built at run 2, and
     * where the failure comes at run 3, that run counts as replayed (rt_replay_find's answer)
     * and the graph launched once; once failed, launched directly */
    long built_ok = cases[i].run == 2 ? 0 : 1;
    CHECK_MSG(DELTA(c, d, built) == 1 && DELTA(c, d, replayed) == built_ok &&
                  DELTA(c, d, direct) == 4 - built_ok &&
                  FAKE_DELTA(c, d, graph_launches) == built_ok,
              "%s: built %ld, replayed %ld, direct %ld, graphs launched %ld", cases[i].what,
              DELTA(c, d, built), DELTA(c, d, replayed), DELTA(c, d, direct),
              FAKE_DELTA(c, d, graph_launches));
    CHECK_MSG(fake.count("graphs") == graphs && fake.count("execs") == execs,
              "%s: nothing of the graph is left (%ld graphs, %ld instantiations, were %ld, %ld)",
              cases[i].what, fake.count("graphs"), fake.count("execs"), graphs, execs);
  }
  /* a launch that fails is reported by the call that flushes it; the rest of the log is dropped
   */
  static const int ks[] = {ATTN, NORM, LOGITS};
  fake.fail("cuLaunchKernel", 0, 1);
  run_kernels(d, L, ks, 0, pool, 0); /* nothing logged: nothing to fail */
  const tbuf *bufs[] = {&pool[0], &pool[1], &pool[2]};
  for (int i = 0; i < 3; i++) launch(L, ks[i], 1, 1, bufs, (int32_t[]){i, i});
  CHECK_ERR(rx_rt_device_synchronize(d), RX_ERR_DEVICE, "cuLaunchKernel");
  want_clear();
  check_trace("a failed launch");
  run_kernels(d, L, ks, 3, pool, 7);
  check_trace("after a failed launch");
  for (int i = 0; i < 3; i++) release(&pool[i]);
}

/* Every call that uses the stream or its order issues the launches logged before it (reads,
 * copies and fills: the decode steps). */
static void test_flush_points(rx_rt_device *d, const lib *L) {
  tbuf a = buffer(d, 64), b = buffer(d, 64), gone = buffer(d, 64);
  rx_rt_timer *t = NULL;
  CHECK_OK(rx_rt_timer_create(d, &t));
  if (!t) return;
  launch(L, NORM, 1, 1, (const tbuf *[]){&a, &b}, (int32_t[]){1});
  CHECK_OK(rx_rt_timer_start(t));
  expect("event");
  launch(L, LOGITS, 2, 1, (const tbuf *[]){&b, &a}, (int32_t[]){2});
  CHECK_OK(rx_rt_timer_stop(t));
  expect("event");
  double ms = 0;
  CHECK_OK(rx_rt_timer_elapsed_ms(t, &ms));
  rx_rt_timer_release(t);
  check_trace("a timer's events");
  int32_t v = 7;
  launch(L, NORM, 3, 1, (const tbuf *[]){&a, &b}, (int32_t[]){3});
  CHECK_OK(rx_rt_buffer_write(a.b, 0, &v, 4));
  expect("write #%ld 4", a.id);
  check_trace("a write");
  launch(L, NORM, 4, 1, (const tbuf *[]){&gone, &b}, (int32_t[]){4});
  release(&gone); /* the launch that uses it is issued before it is freed */
  check_trace("a buffer released after a launch that uses it");
  release(&a), release(&b);
}

/* A long sequence is issued when the log holds 4096 launches; repeated, it is replayed too. */
static void test_long_log(rx_rt_device *d, const lib *L) {
  tbuf pool[2] = {buffer(d, 64), buffer(d, 64)};
  const tbuf *bufs[] = {&pool[0], &pool[1]};
  for (int rep = 0; rep < 3; rep++) {
    counts c = now(d);
    for (int i = 0; i < 5000; i++) {
      launch(L, NORM, 1, 1, bufs, (int32_t[]){i + (rep == 2)});
      if (i == 4094) CHECK_MSG(fake.trace_count() == 0, "4095 launches wait in the log");
      if (i == 4095) CHECK_MSG(fake.trace_count() == 4096, "4096 launches are issued");
    }
    sync_device(d);
    check_trace("a long sequence");
    long graphs = rep == 0 ? 0 : 2, updated = rep == 2 ? 5000 : 0;
    CHECK_MSG(FAKE_DELTA(c, d, graph_launches) == graphs && DELTA(c, d, updated) == updated,
              "a long sequence, %d: %ld graphs launched, %ld launches updated", rep,
              FAKE_DELTA(c, d, graph_launches), DELTA(c, d, updated));
  }
  for (int i = 0; i < 2; i++) release(&pool[i]);
}

/* Destroying a kernel forgets every graph (they hold its CUfunction, and a kernel loaded later
 * may have its address); the kernels loaded again start afresh. */
static void test_kernel_destroy(rx_rt_device *d, lib *L) {
  CHECK_MSG(fake.count("execs") > 0 && fake.count("graphs") > 0, "graphs were built");
  tbuf pool[3] = {buffer(d, 64), buffer(d, 64), buffer(d, 64)};
  launch(L, NORM, 1, 1, (const tbuf *[]){&pool[0], &pool[1]}, (int32_t[]){5});
  rx_rt_library_release(L->l); /* the launch logged is issued first */
  check_trace("kernels destroyed after a launch");
  CHECK_MSG(fake.count("execs") == 0 && fake.count("graphs") == 0 && fake.count("modules") == 0,
            "the kernels destroyed: %ld graphs, %ld instantiations, %ld modules left",
            fake.count("graphs"), fake.count("execs"), fake.count("modules"));
  *L = load(d);
  static const int ks[] = {NORM, MATMUL, ATTN, LOGITS};
  for (int run = 0; L->l && run < 3; run++) {
    counts c = now(d);
    run_kernels(d, L, ks, 4, pool, run);
    check_trace("kernels loaded again");
    CHECK_MSG(DELTA(c, d, direct) == (run == 0) && DELTA(c, d, built) == (run == 1) &&
                  DELTA(c, d, replayed) == (run == 2),
              "kernels loaded again, run %d: nothing remembered of the old ones", run);
  }
  for (int i = 0; i < 3; i++) release(&pool[i]);
}

/* Everything the runtime made on the fake is gone, and nothing was misused. */
static void check_fake_clean(const char *what) {
  static const char *const objects[] = {"allocs",  "graphs", "execs",    "modules",
                                        "streams", "events", "contexts", "misuse"};
  for (size_t i = 0; i < RX_ARRAY_LEN(objects); i++)
    CHECK_MSG(fake.count(objects[i]) == 0, "%s: %ld %s left", what, fake.count(objects[i]),
              objects[i]);
}

/* The memory cache (runtime/cuda/cuda.c, "memory"): a released block is reused by the next
 * buffer of its size class, without the driver and without issuing the logged launches; blocks of
 * other classes are not; an allocation that runs out of memory gives the cache back and is tried
 * once more; out of memory with nothing cached is reported; the device frees the cache. */
static void test_memory_cache(void) {
  setenv("RX_CUDA_CACHE", "1", 1);
  declare_kernels();
  rx_rt_device *d = open_device(true);
  setenv("RX_CUDA_CACHE", "0", 1);
  if (!d) return;
  lib L = load(d);
  tbuf a = buffer(d, 100), b = buffer(d, 64), c = buffer(d, 64);
  CHECK_MSG(fake.count("allocs") == 3, "three buffers, three allocations: %ld",
            fake.count("allocs"));
  release(&a);
  tbuf a2 = buffer(d, 200); /* the class of 256 bytes: a's block */
  CHECK_MSG(fake.count("allocs") == 3, "a released block is reused: %ld allocations",
            fake.count("allocs"));
  if (L.l) {
    launch(&L, NORM, 1, 1, (const tbuf *[]){&b, &c}, (int32_t[]){1}); /* expects its line */
    release(&c); /* kept in the cache: nothing is issued or waited for */
    if (driver_graphs)
      CHECK_MSG(fake.trace_count() == 0,
                "a buffer released into the cache issues no logged launch");
    CHECK_OK(rx_rt_device_synchronize(d));
    check_trace("the launch issued at the synchronize");
  } else {
    release(&c);
  }
  tbuf big = buffer(d, ((size_t)1 << 20) + 1); /* a class of 2 MiB */
  release(&big);
  tbuf big2 = buffer(d, (size_t)3 << 20); /* 4 MiB: a block of its own */
  CHECK_MSG(fake.count("allocs") == 5, "2 MiB and 4 MiB blocks are distinct: %ld allocations",
            fake.count("allocs"));
  release(&big2);
  /* out of memory: the limit leaves no room beside what is live, cached blocks included */
  fake.set_memory_limit((size_t)fake.count("bytes"));
  tbuf big3 = buffer(d, (size_t)5 << 20); /* 6 MiB: fits once the 2 + 4 MiB cached are freed */
  CHECK_MSG(big3.b != NULL,
            "an allocation that ran out of memory succeeds after the cache is freed");
  CHECK_MSG(fake.count("allocs") == 3, "the cache went back to the driver: %ld allocations",
            fake.count("allocs"));
  rx_rt_buffer *none = NULL;
  CHECK_ERR(rx_rt_buffer_alloc(d, (size_t)64 << 20, &none), RX_ERR_OUT_OF_MEMORY,
            "out of device memory");
  CHECK_MSG(none == NULL, "no buffer on failure");
  fake.set_memory_limit(0);
  release(&big3), release(&a2), release(&b);
  rx_rt_library_release(L.l);
  rx_rt_device_release(d);
  check_fake_clean("memory cache");
  fake.reset();
}

/* Host memory import on CUDA (rx_rt_buffer_import_host): a 256-byte-aligned range is registered
 * (cuMemHostRegister, device-mapped) and used in place: its device address is the fake's host
 * address, fills and copies queued on the stream land in the caller's memory, the map is the
 * caller's pointer, the release unregisters after the queued work; an unaligned pointer, a size
 * of part words, a range registered twice and a driver that refuses are copies, reported. */
static void test_host_import(void) {
  declare_kernels();
  rx_rt_device *d = open_device(true);
  if (!d) return;
  CHECK_MSG(rx_rt_device_get_info(d)->host_import_alignment == 256, "alignment %llu",
            (unsigned long long)rx_rt_device_get_info(d)->host_import_alignment);
  uint8_t *mem = aligned_alloc(256, 4096);
  memset(mem, 0, 4096);
  rx_rt_buffer *b = NULL, *src = NULL, *b2 = NULL, *c = NULL;
  rx_rt_import k = RX_RT_IMPORT_NONE;
  CHECK_OK(rx_rt_buffer_import_host(d, mem, 1024, &b, &k));
  CHECK_MSG(k == RX_RT_IMPORT_IN_PLACE, "imported: %s", rx_rt_import_name(k));
  CHECK_MSG(fake.count("allocs") == 1, "one registered range: %ld", fake.count("allocs"));
  CHECK_OK(rx_rt_buffer_alloc(d, 256, &src));
  if (b && src && k == RX_RT_IMPORT_IN_PLACE) {
    CHECK_OK(rx_rt_buffer_fill(src, 0, 256, 0x3f));
    CHECK_OK(rx_rt_buffer_copy(src, 0, b, 512, 256));
    CHECK_OK(rx_rt_buffer_fill(b, 0, 100, 0x40));
    void *p = NULL;
    CHECK_OK(rx_rt_buffer_map(b, &p));
    CHECK_MSG(p == mem, "the map is the caller's memory");
    CHECK_MSG(mem[0] == 0x40 && mem[99] == 0x40 && mem[100] == 0 && mem[512] == 0x3f &&
                  mem[767] == 0x3f && mem[768] == 0,
              "device writes in place");
    uint8_t back[16];
    CHECK_OK(rx_rt_buffer_read(b, 512, back, 16));
    CHECK(back[0] == 0x3f && back[15] == 0x3f);
    /* the same range again: registered once, so a copy */
    CHECK_OK(rx_rt_buffer_import_host(d, mem, 1024, &b2, &k));
    CHECK_MSG(k == RX_RT_IMPORT_COPY_REFUSED, "a range registered twice: %s", rx_rt_import_name(k));
    CHECK_ERR(rx_rt_buffer_map(b2, &p), RX_ERR_UNSUPPORTED, "device memory");
  }
  /* unaligned pointer, part words: copies; the driver refusing: a copy */
  CHECK_OK(rx_rt_buffer_import_host(d, mem + 2048 + 16, 64, &c, &k));
  CHECK_MSG(k == RX_RT_IMPORT_COPY_UNALIGNED, "16 bytes past 256: %s", rx_rt_import_name(k));
  rx_rt_buffer_release(c);
  CHECK_OK(rx_rt_buffer_import_host(d, mem + 2048, 63, &c, &k));
  CHECK_MSG(k == RX_RT_IMPORT_COPY_UNALIGNED, "63 bytes: %s", rx_rt_import_name(k));
  rx_rt_buffer_release(c);
  fake.fail("cuMemHostRegister_v2", 0, 1);
  CHECK_OK(rx_rt_buffer_import_host(d, mem + 2048, 64, &c, &k));
  CHECK_MSG(k == RX_RT_IMPORT_COPY_REFUSED, "refused: %s", rx_rt_import_name(k));
  rx_rt_buffer_release(c);
  long live = fake.count("allocs");
  rx_rt_buffer_release(b);
  CHECK_MSG(fake.count("allocs") == live - 1, "the release unregistered the range");
  rx_rt_buffer_release(b2);
  rx_rt_buffer_release(src);
  rx_rt_device_release(d);
  free(mem);
  fake.trace_clear();
  check_fake_clean("host import");
  fake.reset();
}

int main(int argc, char **argv) {
  if (!load_fake(argc > 1 ? argv[1] : "libcuda.so.1")) return 1;
  setenv("RX_CUDA_CACHE", "0", 1); /* see open_device */
  driver_graphs = !(argc > 2 && !strcmp(argv[2], "--old-driver"));
  uint64_t digests[2] = {0, 0};
  for (int asked = 1; asked >= 0; asked--) {
    bool graphs = asked && driver_graphs;
    declare_kernels();
    rx_rt_device *d = open_device(asked);
    if (!d) break;
    lib L = load(d);
    if (L.l) {
      digest = 0xcbf29ce484222325ull;
      decode(d, &L, graphs);
      digests[asked] = digest;
    }
    if (L.l && graphs) {
      const rt_replay_stats *st = d->replay;
      CHECK_MSG(st->built >= 1 && st->replayed > 0 && st->updated > 0,
                "decode: built %llu, replayed %llu, updated %llu", (unsigned long long)st->built,
                (unsigned long long)st->replayed, (unsigned long long)st->updated);
      test_updates(d, &L);
      test_flush_points(d, &L);
      test_failures(d, &L);
      test_long_log(d, &L);
      test_kernel_destroy(d, &L);
      test_subgroup_size(d);
    } else if (L.l) { /* a launch's error comes at once */
      tbuf pool[3] = {buffer(d, 64), buffer(d, 64), buffer(d, 64)};
      fake.fail("cuLaunchKernel", 0, 1);
      CHECK_ERR(rx_rt_kernel_launch(L.k[NORM],
                                    &(rx_rt_launch_params){{1, 1, 1},
                                                           {64, 1, 1},
                                                           (rx_rt_buffer *[]){pool[0].b, pool[1].b},
                                                           2,
                                                           (int32_t[]){1},
                                                           1}),
                RX_ERR_DEVICE, "cuLaunchKernel");
      for (int i = 0; i < 3; i++) release(&pool[i]);
      check_trace("graphs off: a failed launch");
    }
    rx_rt_library_release(L.l);
    rx_rt_device_release(d);
    check_fake_clean(asked ? "graphs on" : "graphs off");
    fake.reset();
  }
  CHECK_MSG(digests[0] == digests[1], "the decode steps traced the same with graphs on and off");
  test_memory_cache();
  test_host_import();
  want_clear();
  free(want.lines);
  return check_finish("runtime.cuda_graph");
}
