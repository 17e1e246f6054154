/* simt_harness.c: compile, cache, load and launch CUDA C / MSL kernels on the CPU.
 * Three parts: source preparation (find kernels, rewrite what C++ cannot say, append one launcher
 * per kernel), compilation with a content-addressed cache, and the fiber scheduler. */
#define _GNU_SOURCE /* mkstemp, dladdr */
#include "simt_harness.h"

#include "interp/fiber.h"

#include <ctype.h>
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "simt_rt.h"
#include "simt_trace.h"

#ifndef SIMT_DEFAULT_DIR
#define SIMT_DEFAULT_DIR "tests/simt"
#endif

extern char **environ;

#define MAX_BLOCK_THREADS 1024u
#define FIBER_STACK       (256u * 1024u) /* bytes per GPU thread, plus one guard page below */

/* ---------------------------------------------------------------- small helpers */

typedef struct buf {
  char *data;
  size_t len, cap;
} buf;

static void buf_addn(buf *b, const char *s, size_t n) {
  if (b->len + n + 1 > b->cap) {
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + n + 1) cap *= 2;
    char *d = realloc(b->data, cap);
    if (!d) abort(); /* host out of memory: not something a test can recover from */
    b->data = d;
    b->cap = cap;
  }
  memcpy(b->data + b->len, s, n);
  b->len += n;
  b->data[b->len] = 0;
}
static void buf_add(buf *b, const char *s) { buf_addn(b, s, strlen(s)); }
__attribute__((format(printf, 2, 3))) static void buf_printf(buf *b, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  char *tmp = malloc((size_t)n + 1);
  if (!tmp) abort();
  va_start(ap, fmt);
  vsnprintf(tmp, (size_t)n + 1, fmt, ap);
  va_end(ap);
  buf_addn(b, tmp, (size_t)n);
  free(tmp);
}
static char *buf_take(buf *b) {
  if (!b->data) buf_addn(b, "", 0);
  char *s = b->data;
  memset(b, 0, sizeof *b);
  return s;
}

__attribute__((format(printf, 2, 3))) static int fail(char **out_err, const char *fmt, ...) {
  buf b = {0};
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  char *tmp = malloc((size_t)n + 1);
  if (!tmp) abort();
  va_start(ap, fmt);
  vsnprintf(tmp, (size_t)n + 1, fmt, ap);
  va_end(ap);
  buf_addn(&b, tmp, (size_t)n);
  free(tmp);
  if (out_err)
    *out_err = buf_take(&b);
  else
    free(b.data);
  return -1;
}

static char *read_file(const char *path, size_t *out_len) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  buf b = {0};
  char chunk[8192];
  size_t n;
  while ((n = fread(chunk, 1, sizeof chunk, f)) > 0) buf_addn(&b, chunk, n);
  fclose(f);
  if (out_len) *out_len = b.len;
  return buf_take(&b);
}

static int write_file(const char *path, const char *data, size_t len) {
  FILE *f = fopen(path, "wb");
  if (!f) return -1;
  size_t w = fwrite(data, 1, len, f);
  int rc = fclose(f);
  return (w == len && rc == 0) ? 0 : -1;
}

static uint64_t fnv(uint64_t h, const void *p, size_t n) {
  const unsigned char *s = p;
  for (size_t i = 0; i < n; i++) h = (h ^ s[i]) * 0x100000001b3ull;
  return h;
}

static int is_id(int c) { return isalnum(c) || c == '_'; }

/* ---------------------------------------------------------------- source preparation */

/* A copy of src with comments, string and character literals blanked (newlines kept), so the
 * scanners below see only code, at the same offsets as the original. */
static char *blank_comments(const char *src) {
  size_t n = strlen(src);
  char *s = malloc(n + 1);
  if (!s) abort();
  memcpy(s, src, n + 1);
  for (size_t i = 0; i < n;) {
    if (s[i] == '/' && s[i + 1] == '/') {
      while (i < n && s[i] != '\n') s[i++] = ' ';
    } else if (s[i] == '/' && s[i + 1] == '*') {
      s[i] = s[i + 1] = ' ';
      i += 2;
      while (i < n && !(s[i] == '*' && s[i + 1] == '/')) {
        if (s[i] != '\n') s[i] = ' ';
        i++;
      }
      if (i < n) s[i] = s[i + 1] = ' ', i += 2;
    } else if (s[i] == '"' || s[i] == '\'') {
      char q = s[i++];
      while (i < n && s[i] != q && s[i] != '\n') {
        if (s[i] == '\\' && i + 1 < n) s[i++] = ' ';
        s[i++] = ' ';
      }
      i++;
    } else {
      i++;
    }
  }
  return s;
}

/* Offset of the next whole-word occurrence of w in s at or after from, or -1. */
static long find_word(const char *s, size_t from, const char *w) {
  size_t wl = strlen(w);
  for (const char *p = strstr(s + from, w); p; p = strstr(p + 1, w)) {
    if ((p == s || !is_id((unsigned char)p[-1])) && !is_id((unsigned char)p[wl])) return p - s;
  }
  return -1;
}

static size_t skip_ws(const char *s, size_t i) {
  while (s[i] && isspace((unsigned char)s[i])) i++;
  return i;
}

/* Reads an identifier at i; returns its length (0 when none). */
static size_t ident_at(const char *s, size_t i) {
  size_t j = i;
  if (!(isalpha((unsigned char)s[j]) || s[j] == '_')) return 0;
  while (is_id((unsigned char)s[j])) j++;
  return j - i;
}

/* Offset just past the bracket matching the one at i ('(' or '['), or 0 when unbalanced. */
static size_t skip_balanced(const char *s, size_t i) {
  int depth = 0;
  for (; s[i]; i++) {
    if (s[i] == '(' || s[i] == '[')
      depth++;
    else if (s[i] == ')' || s[i] == ']') {
      if (--depth == 0) return i + 1;
    }
  }
  return 0;
}

static int line_of(const char *s, size_t off) {
  int line = 1;
  for (size_t i = 0; i < off && s[i]; i++) line += s[i] == '\n';
  return line;
}

/* The Metal builtin attributes understood, with the enumerator of simt_common.h. */
static const struct {
  const char *attr, *kind;
} metal_builtins[] = {
    {"thread_position_in_grid", "B_THREAD_POSITION_IN_GRID"},
    {"threadgroup_position_in_grid", "B_THREADGROUP_POSITION_IN_GRID"},
    {"thread_position_in_threadgroup", "B_THREAD_POSITION_IN_THREADGROUP"},
    {"threads_per_threadgroup", "B_THREADS_PER_THREADGROUP"},
    {"threadgroups_per_grid", "B_THREADGROUPS_PER_GRID"},
    {"threads_per_grid", "B_THREADS_PER_GRID"},
    {"thread_index_in_threadgroup", "B_THREAD_INDEX_IN_THREADGROUP"},
    {"thread_index_in_simdgroup", "B_THREAD_INDEX_IN_SIMDGROUP"},
    {"simdgroup_index_in_threadgroup", "B_SIMDGROUP_INDEX_IN_THREADGROUP"},
    {"threads_per_simdgroup", "B_THREADS_PER_SIMDGROUP"},
    {"simdgroups_per_threadgroup", "B_SIMDGROUPS_PER_THREADGROUP"},
};

typedef struct kname {
  char name[128];
  int nargs; /* Metal: buffer slots, known from parsing; CUDA: asked from the object */
} kname;

typedef struct prepared {
  buf text;       /* the source to compile */
  kname *kernels; /* found kernels */
  int nkernels;
} prepared;

static int add_kernel(prepared *p, const char *name, size_t len, char **out_err) {
  if (len >= sizeof(p->kernels[0].name))
    return fail(out_err, "kernel name too long: %.*s", (int)len, name);
  for (int i = 0; i < p->nkernels; i++)
    if (strlen(p->kernels[i].name) == len && !memcmp(p->kernels[i].name, name, len))
      return 1; /* declared twice */
  kname *k = realloc(p->kernels, sizeof *k * (size_t)(p->nkernels + 1));
  if (!k) abort();
  p->kernels = k;
  memset(&k[p->nkernels], 0, sizeof *k);
  memcpy(k[p->nkernels].name, name, len);
  p->nkernels++;
  return 0;
}

/* Appended after each launcher (format arguments: the kernel's name twice): the address of the
 * kernel function, so a traced launch knows which code is the kernel's (simt_trace.h). */
#define SIMT_FN_ADDR                                                                               \
  "extern \"C\" __attribute__((visibility(\"default\"))) const void *simt__f_%s(void) {\n"         \
  "  return (const void *)&%s;\n}\n"

/* An edit of the original text: replace [at, at+len) by `with`. Edits are applied in order. */
typedef struct edit {
  size_t at, len;
  char *with;
} edit;
typedef struct edits {
  edit *e;
  int n;
} edits;
static void add_edit(edits *es, size_t at, size_t len, char *with) {
  edit *e = realloc(es->e, sizeof *e * (size_t)(es->n + 1));
  if (!e) abort();
  es->e = e;
  e[es->n++] = (edit){at, len, with};
}
static int cmp_edit(const void *a, const void *b) {
  const edit *x = a, *y = b;
  return x->at < y->at ? -1 : x->at > y->at;
}
static void apply_edits(buf *out, const char *src, edits *es) {
  if (es->n) qsort(es->e, (size_t)es->n, sizeof *es->e, cmp_edit);
  size_t pos = 0;
  for (int i = 0; i < es->n; i++) {
    buf_addn(out, src + pos, es->e[i].at - pos);
    buf_add(out, es->e[i].with);
    pos = es->e[i].at + es->e[i].len;
    free(es->e[i].with);
  }
  buf_add(out, src + pos);
  free(es->e);
  es->e = NULL;
  es->n = 0;
}

/* CUDA: `extern __shared__ [__align__(n)] T name[];` becomes a macro for the launch's dynamic
 * shared memory (every such array aliases it, as on the GPU). Lines are kept with #line. */
static int cuda_rewrite(const char *src, const char *s, edits *es, char **out_err) {
  for (long at = find_word(s, 0, "extern"); at >= 0; at = find_word(s, (size_t)at + 1, "extern")) {
    size_t i = skip_ws(s, (size_t)at + 6);
    if (ident_at(s, i) != 10 || strncmp(s + i, "__shared__", 10)) continue;
    const char *semi = strchr(s + i, ';');
    if (!semi)
      return fail(out_err, "line %d: unterminated extern __shared__ declaration",
                  line_of(s, (size_t)at));
    size_t end = (size_t)(semi - s);
    /* declaration text between __shared__ and ';', without __align__(...) */
    buf decl = {0};
    for (size_t j = i + 10; j < end;) {
      if (ident_at(s, j) == 9 && !strncmp(s + j, "__align__", 9)) {
        size_t k = skip_ws(s, j + 9);
        j = s[k] == '(' ? skip_balanced(s, k) : k;
        if (!j) return fail(out_err, "line %d: bad __align__", line_of(s, (size_t)at));
        continue;
      }
      buf_addn(&decl, s + j, 1);
      j++;
    }
    char *d = buf_take(&decl);
    char *lb = strrchr(d, '[');
    size_t nl = 0, ne = 0;
    if (lb) {
      size_t e = (size_t)(lb - d);
      while (e > 0 && isspace((unsigned char)d[e - 1])) e--;
      ne = e;
      while (e > 0 && is_id((unsigned char)d[e - 1])) e--;
      nl = ne - e;
    }
    if (!lb || nl == 0) {
      free(d);
      return fail(out_err, "line %d: expected `extern __shared__ T name[];`",
                  line_of(s, (size_t)at));
    }
    buf w = {0};
    int line = line_of(s, (size_t)at);
    buf_printf(&w, "\n#define %.*s ((%.*s *)simt::cur()->dyn_smem)\n#line %d\n", (int)nl,
               d + ne - nl, (int)(ne - nl), d, line);
    free(d);
    add_edit(es, (size_t)at, end + 1 - (size_t)at, buf_take(&w));
    (void)src;
  }
  return 0;
}

static int cuda_find_kernels(const char *s, prepared *p, char **out_err) {
  for (long at = find_word(s, 0, "__global__"); at >= 0;
       at = find_word(s, (size_t)at + 1, "__global__")) {
    /* a template kernel cannot be launched by name: skip it */
    long back = at;
    while (back > 0 && s[back - 1] != ';' && s[back - 1] != '}' && s[back - 1] != '{') back--;
    long t = find_word(s, (size_t)back, "template");
    if (t >= 0 && t < at) continue;
    size_t i = (size_t)at + 10, last = 0, last_len = 0;
    for (;;) {
      i = skip_ws(s, i);
      size_t l = ident_at(s, i);
      if (l) {
        last = i;
        last_len = l;
        i += l;
      } else if (s[i] == '(') {
        if (last_len == 17 && !strncmp(s + last, "__launch_bounds__", 17)) {
          i = skip_balanced(s, i);
          if (!i)
            return fail(out_err, "line %d: unbalanced __launch_bounds__", line_of(s, (size_t)at));
          last_len = 0;
          continue;
        }
        break;
      } else if (s[i] == '*' || s[i] == '&' || s[i] == ':' || s[i] == '<' || s[i] == '>' ||
                 s[i] == ',') {
        i++;
      } else {
        return fail(out_err, "line %d: cannot find the name of this __global__ function",
                    line_of(s, (size_t)at));
      }
    }
    if (!last_len)
      return fail(out_err, "line %d: cannot find the name of this __global__ function",
                  line_of(s, (size_t)at));
    if (add_kernel(p, s + last, last_len, out_err) < 0) return -1;
  }
  return 0;
}

/* Metal: `threadgroup` declaring a variable becomes `static` (one threadgroup runs at a time);
 * `threadgroup` qualifying a pointer or reference type disappears. */
static void metal_rewrite(const char *s, edits *es) {
  for (long at = find_word(s, 0, "threadgroup"); at >= 0;
       at = find_word(s, (size_t)at + 1, "threadgroup")) {
    size_t i = (size_t)at + 11;
    int ptr = 0;
    for (; s[i] && !strchr(";=,){[", s[i]); i++)
      if (s[i] == '*' || s[i] == '&') ptr = 1;
    long b = at - 1;
    while (b >= 0 && isspace((unsigned char)s[b])) b--;
    int in_params = b >= 0 && (s[b] == '(' || s[b] == ',');
    add_edit(es, (size_t)at, 11, strdup(ptr || in_params ? "           " : "static     "));
  }
}

static int metal_find_kernels(const char *s, prepared *p, buf *launchers, char **out_err) {
  for (long at = find_word(s, 0, "kernel"); at >= 0; at = find_word(s, (size_t)at + 1, "kernel")) {
    size_t i = skip_ws(s, (size_t)at + 6);
    if (ident_at(s, i) != 4 || strncmp(s + i, "void", 4)) continue;
    i = skip_ws(s, i + 4);
    size_t nl = ident_at(s, i), name = i;
    if (!nl) continue;
    i = skip_ws(s, i + nl);
    if (s[i] != '(') continue;
    int line = line_of(s, (size_t)at);
    size_t close = skip_balanced(s, i);
    if (!close)
      return fail(out_err, "line %d: unbalanced parameter list of kernel %.*s", line, (int)nl,
                  s + name);
    int dup = add_kernel(p, s + name, nl, out_err);
    if (dup < 0) return -1;
    if (dup) continue;
    kname *k = &p->kernels[p->nkernels - 1];
    buf call = {0};
    int nparam = 0, maxbuf = -1;
    size_t j = i + 1;
    while (j < close - 1) {
      /* one parameter: up to a comma at depth 0 */
      size_t st = j;
      int depth = 0;
      for (; j < close - 1; j++) {
        if (s[j] == '(' || s[j] == '[' || s[j] == '<')
          depth++;
        else if (s[j] == ')' || s[j] == ']' || s[j] == '>')
          depth--;
        else if (s[j] == ',' && depth == 0)
          break;
      }
      size_t en = j++;
      size_t q = skip_ws(s, st);
      if (q >= en) break; /* `()` */
      if (en - q == 4 && !strncmp(s + q, "void", 4)) break;
      const char *a = strstr(s + q, "[[");
      if (!a || (size_t)(a - s) >= en) {
        free(call.data);
        return fail(out_err, "line %d: parameter %d of kernel %s has no [[...]] attribute", line,
                    nparam, k->name);
      }
      size_t ai = skip_ws(s, (size_t)(a - s) + 2), al = ident_at(s, ai);
      if (nparam) buf_add(&call, ",\n      ");
      if (al == 6 && !strncmp(s + ai, "buffer", 6)) {
        size_t pi = skip_ws(s, ai + 6);
        char *endp = NULL;
        long idx = s[pi] == '(' ? strtol(s + pi + 1, &endp, 10) : -1;
        if (idx < 0 || idx > 30 || !endp || endp[skip_ws(endp, 0)] != ')') {
          free(call.data);
          return fail(out_err,
                      "line %d: kernel %s, parameter %d: expected [[buffer(N)]] with N in 0..30",
                      line, k->name, nparam);
        }
        if (idx > maxbuf) maxbuf = (int)idx;
        buf_printf(&call, "simt::bind<simt::param_t<F, %d>>(a[%ld])", nparam, idx);
      } else {
        const char *kind = NULL;
        for (size_t b = 0; b < sizeof metal_builtins / sizeof metal_builtins[0]; b++)
          if (strlen(metal_builtins[b].attr) == al && !strncmp(metal_builtins[b].attr, s + ai, al))
            kind = metal_builtins[b].kind;
        if (!kind) {
          free(call.data);
          return fail(out_err,
                      "line %d: kernel %s, parameter %d: attribute [[%.*s]] is not emulated", line,
                      k->name, nparam, (int)al, s + ai);
        }
        buf_printf(&call, "simt::builtin<simt::param_t<F, %d>>(simt::builtin_value(simt::%s))",
                   nparam, kind);
      }
      nparam++;
    }
    k->nargs = maxbuf + 1;
    buf_printf(launchers,
               "extern \"C\" __attribute__((visibility(\"default\"))) int simt__k_%s(void **a) {\n"
               "  using F = decltype(&%s);\n  if (!a) return %d;\n  %s(%s);\n  return "
               "0;\n}\n" SIMT_FN_ADDR,
               k->name, k->name, k->nargs, k->name, call.data ? call.data : "", k->name, k->name);
    free(call.data);
  }
  return 0;
}

static int prepare(simt_lang lang, const char *src, const char *label, prepared *p,
                   char **out_err) {
  memset(p, 0, sizeof *p);
  char *s = blank_comments(src);
  edits es = {0};
  buf launchers = {0};
  int rc = 0;
  if (lang == SIMT_CUDA) {
    rc = cuda_rewrite(src, s, &es, out_err);
    if (!rc) rc = cuda_find_kernels(s, p, out_err);
    for (int i = 0; !rc && i < p->nkernels; i++)
      buf_printf(
          &launchers,
          "extern \"C\" __attribute__((visibility(\"default\"))) int simt__k_%s(void **a) {\n"
          "  return simt::invoke(%s, a);\n}\n" SIMT_FN_ADDR,
          p->kernels[i].name, p->kernels[i].name, p->kernels[i].name, p->kernels[i].name);
  } else {
    metal_rewrite(s, &es);
    rc = metal_find_kernels(s, p, &launchers, out_err);
  }
  free(s);
  if (!rc && p->nkernels == 0)
    rc = fail(out_err, "%s: no kernel found (expected %s)", label,
              lang == SIMT_CUDA ? "a non-template `__global__` function" : "`kernel void NAME(`");
  if (rc) {
    for (int i = 0; i < es.n; i++) free(es.e[i].with);
    free(es.e);
    free(launchers.data);
    free(p->kernels);
    p->kernels = NULL;
    return -1;
  }
  buf_printf(&p->text, "#line 1 \"%s\"\n", label);
  apply_edits(&p->text, src, &es);
  buf_add(&p->text, "\n#line 1 \"<simt launchers>\"\n");
  if (launchers.data) buf_add(&p->text, launchers.data);
  free(launchers.data);
  return 0;
}

/* ---------------------------------------------------------------- compilation and cache */

struct simt_kernel {
  char name[128];
  int (*launcher)(void **);
  int nargs;
  uintptr_t fn_lo, fn_hi; /* the kernel function's code */
  simt_module *module;
};

struct simt_module {
  void *dl;
  simt_kernel *kernels;
  int nkernels;
  char *log;
  char *path;                  /* the object file */
  uintptr_t base;              /* its load address */
  int traced;                  /* compiled with SIMT_TRACE */
  void *shared_lo, *shared_hi; /* its __shared__ variables (simt_common.h), for traced launches */
};

static const char *opt_or_env(const char *v, const char *env, const char *dflt) {
  if (v) return v;
  const char *e = getenv(env);
  return e && *e ? e : dflt;
}

static char *default_cache_dir(void) {
  buf b = {0};
  const char *tmp = getenv("TMPDIR");
  buf_printf(&b, "%s/relaxc-simt-%u", tmp && *tmp ? tmp : "/tmp", (unsigned)getuid());
  return buf_take(&b);
}

/* Runs argv with stdout and stderr into log_path; returns the exit status or -1 when it could
 * not be started. */
static int run_logged(char *const argv[], const char *log_path) {
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, log_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  pid_t pid;
  int rc = posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) return -1;
  int st;
  while (waitpid(pid, &st, 0) < 0)
    if (errno != EINTR) return -1;
  if (WIFEXITED(st)) return WEXITSTATUS(st) == 127 ? -1 : WEXITSTATUS(st);
  return 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
}

static const char *const prelude_files[] = {
    "simt_rt.h",           "simt_common.h",       "simt_cuda.h",          "simt_metal.h",
    "include/cuda_fp16.h", "include/cuda_bf16.h", "include/metal_stdlib", "include/cuda_runtime.h",
    "include/cuda.h",
};

static int load_module(const char *so, prepared *p, int traced, simt_module **out, char **out_err);

/* Flags for the CPU this runs on, part of the cache key. -mf16c: the kernels' _Float16 (CUDA's
 * __half, Metal's half) converts with vcvtph2ps / vcvtps2ph instead of libgcc's __extendhfsf2 /
 * __truncsfhf2 calls, a tenth of test_wgmma's time at -O0. Both are exact (round to nearest
 * even, subnormals kept: the MXCSR is left at its default), so results do not change. */
static const char *cpu_flags_here(void) {
#if defined(__x86_64__) || defined(__i386__)
  /* CPUID leaf 1, ECX bit 29 (clang 16's __builtin_cpu_supports does not know "f16c") */
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (__get_cpuid(1, &a, &b, &c, &d) && (c >> 29 & 1u)) return "-mf16c";
#endif
  return "";
}

/* Access tracing (simt_options.trace): clang's ThreadSanitizer instrumentation, whose callbacks
 * simt_common.h defines under SIMT_TRACE. */
#define SIMT_TRACE_FLAGS "-fsanitize=thread -DSIMT_TRACE"

int simt_module_compile(const simt_options *opts, simt_lang lang, const char *source,
                        const char *label, simt_module **out_module, char **out_err) {
  *out_module = NULL;
  if (out_err) *out_err = NULL;
  if (!source) return fail(out_err, "no source given");
  if (!label) label = lang == SIMT_CUDA ? "kernel.cu" : "kernel.metal";
  simt_options none = {0};
  if (!opts) opts = &none;
  const char *dir = opt_or_env(opts->simt_dir, "SIMT_DIR", SIMT_DEFAULT_DIR);
  const char *clang = opt_or_env(opts->clang, "SIMT_CLANG", "clang++-16");
  const char *cflags = opt_or_env(opts->cflags, "SIMT_CFLAGS", "");
  const char *trace_env = getenv("SIMT_TRACE");
  int trace = opts->trace || (trace_env && !strcmp(trace_env, "1"));
  if (trace && strstr(cflags, "-fsanitize"))
    return fail(out_err,
                "access tracing cannot be combined with the sanitizer flags \"%s\" (a traced "
                "object answers ThreadSanitizer's callbacks itself)",
                cflags);
  const char *trace_flags = trace ? SIMT_TRACE_FLAGS : "";
  const char *cpu_flags = cpu_flags_here();
  char *cache = opts->cache_dir ? strdup(opts->cache_dir)
                : getenv("SIMT_CACHE_DIR") && *getenv("SIMT_CACHE_DIR")
                    ? strdup(getenv("SIMT_CACHE_DIR"))
                    : default_cache_dir();

  prepared p;
  if (prepare(lang, source, label, &p, out_err) < 0) {
    free(cache);
    return -1;
  }

  /* the cache key: everything that goes into the object */
  uint64_t h = 0xcbf29ce484222325ull;
  int version = SIMT_RT_VERSION;
  h = fnv(h, &version, sizeof version);
  h = fnv(h, &lang, sizeof lang);
  h = fnv(h, p.text.data, p.text.len + 1);
  h = fnv(h, clang, strlen(clang) + 1);
  h = fnv(h, cflags, strlen(cflags) + 1);
  h = fnv(h, trace_flags, strlen(trace_flags) + 1);
  h = fnv(h, cpu_flags, strlen(cpu_flags) + 1);
  for (size_t i = 0; i < sizeof prelude_files / sizeof prelude_files[0]; i++) {
    buf path = {0};
    buf_printf(&path, "%s/%s", dir, prelude_files[i]);
    size_t n = 0;
    char *text = read_file(path.data, &n);
    if (!text) {
      int r =
          fail(out_err, "cannot read the SIMT prelude %s (set SIMT_DIR to the tests/simt folder)",
               path.data);
      free(path.data);
      free(p.text.data);
      free(p.kernels);
      free(cache);
      return r;
    }
    h = fnv(h, text, n);
    free(text);
    free(path.data);
  }

  int rc = 0;
  buf so = {0}, src_path = {0}, tmp_so = {0}, log_path = {0};
  mkdir(cache, 0755); /* may exist */
  buf_printf(&so, "%s/%016llx.so", cache, (unsigned long long)h);
  struct stat st;
  char *log = NULL;
  if (stat(so.data, &st) != 0) {
    /* compile into a private name, then rename: concurrent tests never see half an object */
    buf_printf(&src_path, "%s/%016llx.%s", cache, (unsigned long long)h,
               lang == SIMT_CUDA ? "cu.cpp" : "metal.cpp");
    buf_printf(&tmp_so, "%s/%016llx.%ld.tmp.so", cache, (unsigned long long)h, (long)getpid());
    buf_printf(&log_path, "%s/%016llx.%ld.log", cache, (unsigned long long)h, (long)getpid());
    if (write_file(src_path.data, p.text.data, p.text.len) < 0) {
      rc =
          fail(out_err, "cannot write %s: %s (set SIMT_CACHE_DIR)", src_path.data, strerror(errno));
      goto done;
    }
    buf inc = {0}, prel = {0}, incdir = {0};
    buf_printf(&inc, "-I%s", dir);
    buf_printf(&incdir, "-I%s/include", dir);
    buf_printf(&prel, "%s/%s", dir, lang == SIMT_CUDA ? "simt_cuda.h" : "simt_metal.h");
    /* -O0: the kernel text executes as written. An optimizer sees fibers as one thread: it may
     * drop or move a store to a static (shared) array across an opaque barrier call. */
    const char *argv_fixed[] = {
        clang,    "-x",        "c++",      "-std=c++17",      "-O0",
        "-g",     "-fPIC",     "-shared",  "-fno-exceptions", "-Wno-unknown-attributes",
        inc.data, incdir.data, "-include", prel.data};
    char *flags = malloc(strlen(cpu_flags) + strlen(cflags) + strlen(trace_flags) + 3);
    if (!flags) abort();
    sprintf(flags, "%s %s %s", cpu_flags, cflags, trace_flags);
    char *argv[64];
    int argc = 0;
    for (size_t i = 0; i < sizeof argv_fixed / sizeof argv_fixed[0]; i++)
      argv[argc++] = (char *)argv_fixed[i];
    for (char *tok = strtok(flags, " \t"); tok && argc < 58; tok = strtok(NULL, " \t"))
      argv[argc++] = tok;
    argv[argc++] = src_path.data;
    argv[argc++] = "-o";
    argv[argc++] = tmp_so.data;
    argv[argc] = NULL;
    int status = run_logged(argv, log_path.data);
    free(flags);
    free(inc.data);
    free(incdir.data);
    free(prel.data);
    log = read_file(log_path.data, NULL);
    unlink(log_path.data);
    if (status < 0) {
      rc = fail(out_err,
                "cannot run %s: install clang 16 or newer (Debian: apt-get install clang-16) or "
                "set SIMT_CLANG",
                clang);
      goto done;
    }
    if (status != 0) {
      rc = fail(out_err, "%s failed on %s (exit %d; the compiled text is %s):\n%s", clang, label,
                status, src_path.data, log ? log : "");
      unlink(tmp_so.data);
      goto done;
    }
    unlink(src_path.data); /* diagnostics and debug info name `label` through #line */
    if (rename(tmp_so.data, so.data) != 0) {
      rc = fail(out_err, "cannot rename %s to %s: %s", tmp_so.data, so.data, strerror(errno));
      unlink(tmp_so.data);
      goto done;
    }
  }
  rc = load_module(so.data, &p, trace, out_module, out_err);
  if (!rc) {
    (*out_module)->log = log ? log : strdup("");
    log = NULL;
  }
done:
  free(log);
  free(so.data);
  free(src_path.data);
  free(tmp_so.data);
  free(log_path.data);
  free(p.text.data);
  free(p.kernels);
  free(cache);
  return rc;
}

int simt_module_compile_file(const simt_options *opts, simt_lang lang, const char *path,
                             simt_module **out_module, char **out_err) {
  *out_module = NULL;
  if (out_err) *out_err = NULL;
  char *src = read_file(path, NULL);
  if (!src) return fail(out_err, "cannot read %s: %s", path, strerror(errno));
  int rc = simt_module_compile(opts, lang, src, path, out_module, out_err);
  free(src);
  return rc;
}

static simt_thread *current_thread; /* the fiber running now (read by kernels through simt_rt) */
static void rt_barrier(int line);
static void rt_warp_exchange(unsigned mask, const void *in, void *out, unsigned *out_members,
                             int line);
static void rt_fail(int line, const char *msg);
static void rt_trace_access(const void *pc, const void *addr, unsigned long bytes, int store);
static void rt_trace_enter(const void *caller_pc);
static void rt_trace_exit(void);
static const simt_rt the_rt = {SIMT_RT_VERSION, &current_thread, rt_barrier,     rt_warp_exchange,
                               rt_fail,         rt_trace_access, rt_trace_enter, rt_trace_exit};

/* The code range of kernel k (its launcher's twin simt__f_NAME gives the function's address, the
 * dynamic symbol table its size); empty when unknown (accesses are then attributed to the code
 * that made them). */
static void kernel_range(void *dl, simt_kernel *k) {
  char sym[160];
  snprintf(sym, sizeof sym, "simt__f_%s", k->name);
  const void *(*addr)(void) = (const void *(*)(void))dlsym(dl, sym);
  if (!addr) return;
  const void *fn = addr();
  Dl_info info;
  const ElfW(Sym) *es = NULL;
  k->fn_lo = k->fn_hi = (uintptr_t)fn;
  if (dladdr1(fn, &info, (void **)&es, RTLD_DL_SYMENT) && es && info.dli_saddr == fn)
    k->fn_hi = k->fn_lo + es->st_size;
}

static int load_module(const char *so, prepared *p, int traced, simt_module **out, char **out_err) {
  void *dl = dlopen(so, RTLD_NOW | RTLD_LOCAL);
  if (!dl) return fail(out_err, "cannot load %s: %s", so, dlerror());
  int (*init)(const simt_rt *) = (int (*)(const simt_rt *))dlsym(dl, "simt__init");
  if (!init || init(&the_rt) != 0) {
    dlclose(dl);
    return fail(out_err, "%s: not a SIMT kernel object of this version (delete the cache folder)",
                so);
  }
  simt_module *m = calloc(1, sizeof *m);
  if (!m) abort();
  m->dl = dl;
  m->traced = traced;
  m->path = strdup(so);
  Dl_info info;
  if (dladdr((void *)init, &info)) m->base = (uintptr_t)info.dli_fbase;
  void (*shared)(void **, void **) = (void (*)(void **, void **))dlsym(dl, "simt__shared_range");
  if (shared) shared(&m->shared_lo, &m->shared_hi);
  m->kernels = calloc((size_t)p->nkernels, sizeof *m->kernels);
  if (!m->kernels) abort();
  for (int i = 0; i < p->nkernels; i++) {
    char sym[160];
    snprintf(sym, sizeof sym, "simt__k_%s", p->kernels[i].name);
    simt_kernel *k = &m->kernels[m->nkernels];
    k->launcher = (int (*)(void **))dlsym(dl, sym);
    if (!k->launcher) {
      simt_module_free(m);
      return fail(out_err, "%s: launcher %s missing", so, sym);
    }
    snprintf(k->name, sizeof k->name, "%s", p->kernels[i].name);
    k->nargs = k->launcher(NULL);
    k->module = m;
    kernel_range(dl, k);
    m->nkernels++;
  }
  *out = m;
  return 0;
}

void simt_module_free(simt_module *m) {
  if (!m) return;
  if (m->dl) dlclose(m->dl);
  free(m->kernels);
  free(m->log);
  free(m->path);
  free(m);
}

const char *simt_module_log(const simt_module *m) { return m && m->log ? m->log : ""; }

simt_kernel *simt_module_kernel(simt_module *m, const char *name) {
  for (int i = 0; m && name && i < m->nkernels; i++)
    if (!strcmp(m->kernels[i].name, name)) return &m->kernels[i];
  return NULL;
}

int simt_kernel_nargs(const simt_kernel *k) { return k ? k->nargs : -1; }

/* ---------------------------------------------------------------- the fiber scheduler */

enum fiber_state {
  F_RUNNABLE,
  F_BARRIER, /* waits at a block barrier */
  F_WARP,    /* waits in a warp exchange */
  F_DONE,    /* returned from the kernel */
};

/* Each GPU thread is a fiber of interp/fiber.h (the interpreter's): a switch is a few
 * instructions on x86-64 and AArch64 Linux (ucontext elsewhere), announced to ASan. */
typedef struct fiber {
  rx_fiber *fb;
  simt_thread t;
  enum fiber_state state;
  int line;      /* source line of the barrier or warp function it waits in */
  unsigned mask; /* warp exchange: the mask it passed (0: every lane not exited) */
  unsigned char in[SIMT_PAYLOAD];
  unsigned char *out;
  unsigned *out_members;
} fiber;

static struct sched {
  fiber *f;
  unsigned n;
  fiber *running;
  int (*launcher)(void **);
  void **args;
  int failed; /* an error was reported; no fiber runs again */
  buf err;
  const char *kname;
  simt_trace *trace; /* a traced launch's analysis, or NULL */
} S;

__attribute__((format(printf, 1, 2))) static void sched_error(const char *fmt, ...) {
  if (S.failed) return;
  S.failed = 1;
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  char *tmp = malloc((size_t)n + 1);
  if (!tmp) abort();
  va_start(ap, fmt);
  vsnprintf(tmp, (size_t)n + 1, fmt, ap);
  va_end(ap);
  buf_printf(&S.err, "kernel %s, block (%u,%u,%u): %s", S.kname, S.f[0].t.block_idx.x,
             S.f[0].t.block_idx.y, S.f[0].t.block_idx.z, tmp);
  free(tmp);
}

/* fiber -> scheduler; returns when the scheduler resumes this fiber. */
static void yield_to_main(void) { interp_fiber_yield(S.running->fb); }

/* A fiber's function: the kernel, for the thread the fiber is. */
static void fiber_main(void *arg) {
  (void)arg;
  S.launcher(S.args);
  S.running->state = F_DONE;
}

/* scheduler -> fiber f, until it waits, finishes or fails. */
static void run_fiber(fiber *f) {
  S.running = f;
  current_thread = &f->t;
  interp_fiber_resume(f->fb);
  S.running = NULL;
  current_thread = NULL;
}

static const char *state_name(const fiber *f) {
  switch (f->state) {
  case F_RUNNABLE:
    return "runs";
  case F_BARRIER:
    return "waits at a barrier";
  case F_WARP:
    return "waits in a warp/SIMD-group function";
  case F_DONE:
    return "has exited";
  }
  return "?";
}

/* Completes the warp exchange(s) of warp w whose participants have all arrived; reports misuse.
 * Called at every lane's arrival: a group (mask and line) found waiting is not checked again for
 * its other lanes, which would find the same (the checks made O(lanes^2) work per arrival, a
 * fifth of the emulated kernels' time). */
static void try_warp(unsigned w) {
  unsigned first = w * SIMT_WARP, end = first + SIMT_WARP < S.n ? first + SIMT_WARP : S.n;
  unsigned lanes = end - first, nwaiting = 0;
  struct {
    unsigned mask;
    int line;
  } waiting[SIMT_WARP];
  for (unsigned i = first; i < end && !S.failed; i++) {
    fiber *f = &S.f[i];
    if (f->state != F_WARP) continue;
    unsigned seen = 0;
    while (seen < nwaiting && (waiting[seen].mask != f->mask || waiting[seen].line != f->line))
      seen++;
    if (seen < nwaiting) continue;
    unsigned members = f->mask;
    if (members == 0) {
      for (unsigned l = 0; l < lanes; l++)
        if (S.f[first + l].state != F_DONE) members |= 1u << l;
    } else if (lanes < 32 && (members >> lanes) != 0) {
      sched_error(
          "line %d: warp mask 0x%08x names lane %u, which does not exist (warp %u has %u lanes)",
          f->line, f->mask, lanes + (unsigned)__builtin_ctz(members >> lanes), w, lanes);
      return;
    }
    int ready = 1;
    for (unsigned l = 0; l < lanes && ready; l++) {
      if (!(members >> l & 1u)) continue;
      fiber *g = &S.f[first + l];
      if (g->state == F_DONE) {
        sched_error(
            "line %d: thread %u (lane %u) waits for lane %u named in mask 0x%08x, which has exited",
            f->line, f->t.linear, f->t.lane, l, f->mask);
        return;
      }
      if (g->state != F_WARP) {
        ready = 0;
        break;
      }
      if (g->mask != f->mask || g->line != f->line) {
        sched_error("divergent warp functions: lane %u waits at line %d (mask 0x%08x), lane %u at "
                    "line %d (mask "
                    "0x%08x); the emulator runs only converged warp functions",
                    f->t.lane, f->line, f->mask, l, g->line, g->mask);
        return;
      }
    }
    if (!ready) {
      waiting[nwaiting].mask = f->mask;
      waiting[nwaiting++].line = f->line;
      continue;
    }
    if (!(members >> f->t.lane & 1u)) {
      sched_error("line %d: lane %u calls a warp function with mask 0x%08x, which does not name it",
                  f->line, f->t.lane, f->mask);
      return;
    }
    unsigned char all[SIMT_WARP * SIMT_PAYLOAD];
    memset(all, 0, sizeof all);
    for (unsigned l = 0; l < lanes; l++)
      if (members >> l & 1u) memcpy(all + l * SIMT_PAYLOAD, S.f[first + l].in, SIMT_PAYLOAD);
    for (unsigned l = 0; l < lanes; l++) {
      if (!(members >> l & 1u)) continue;
      fiber *g = &S.f[first + l];
      memcpy(g->out, all, sizeof all);
      *g->out_members = members;
      g->state = F_RUNNABLE;
    }
  }
}

static void rt_barrier(int line) {
  fiber *f = S.running;
  f->state = F_BARRIER;
  f->line = line;
  yield_to_main();
}

static void rt_warp_exchange(unsigned mask, const void *in, void *out, unsigned *out_members,
                             int line) {
  fiber *f = S.running;
  f->state = F_WARP;
  f->line = line;
  f->mask = mask;
  memcpy(f->in, in, SIMT_PAYLOAD);
  f->out = out;
  f->out_members = out_members;
  try_warp(f->t.warp);
  yield_to_main();
}

static void rt_fail(int line, const char *msg) {
  fiber *f = S.running;
  sched_error("line %d: thread (%u,%u,%u): %s", line, f->t.thread_idx.x, f->t.thread_idx.y,
              f->t.thread_idx.z, msg);
  for (;;) yield_to_main(); /* never resumed */
}

/* Runs one block to completion; returns 0, or -1 with S.err set. */
static int run_block(void) {
  for (;;) {
    int progressed = 0;
    for (unsigned i = 0; i < S.n && !S.failed; i++) {
      fiber *f = &S.f[i];
      if (f->state != F_RUNNABLE) continue;
      run_fiber(f);
      progressed = 1;
      if (f->state == F_DONE && !S.failed)
        try_warp(f->t.warp); /* a Metal SIMD function may wait for no one else */
    }
    if (S.failed) return -1;
    if (progressed) continue;
    unsigned done = 0, bar = 0;
    fiber *fb = NULL, *fd = NULL, *fw = NULL;
    for (unsigned i = 0; i < S.n; i++) {
      fiber *f = &S.f[i];
      if (f->state == F_DONE)
        done++, fd = fd ? fd : f;
      else if (f->state == F_BARRIER)
        bar++, fb = fb ? fb : f;
      else if (f->state == F_WARP)
        fw = fw ? fw : f;
    }
    if (done == S.n) return 0;
    if (!fw && bar + done == S.n) {
      if (done) {
        sched_error("barrier divergence: %u thread(s) wait at the barrier at line %d while %u "
                    "thread(s) have exited "
                    "(e.g. thread %u); a GPU may hang or misbehave here",
                    bar, fb->line, done, fd->t.linear);
        return -1;
      }
      for (unsigned i = 0; i < S.n; i++) {
        if (S.f[i].line != fb->line) {
          sched_error(
              "threads wait at different barriers: thread %u at line %d, thread %u at line %d",
              fb->t.linear, fb->line, S.f[i].t.linear, S.f[i].line);
          return -1;
        }
      }
      for (unsigned i = 0; i < S.n; i++) S.f[i].state = F_RUNNABLE;
      continue;
    }
    /* nothing can run: a deadlock the GPU would hang on */
    fiber *other = NULL;
    for (unsigned i = 0; i < S.n && !other; i++)
      if (S.f[i].state != F_WARP && S.f[i].state != F_DONE &&
          S.f[i].t.warp == (fw ? fw->t.warp : 0))
        other = &S.f[i];
    if (!other) other = fb ? fb : fd;
    sched_error("deadlock: thread %u (warp %u, lane %u) waits in a warp/SIMD-group function at "
                "line %d, while thread "
                "%u (lane %u) %s%s",
                fw->t.linear, fw->t.warp, fw->t.lane, fw->line, other ? other->t.linear : 0,
                other ? other->t.lane : 0, other ? state_name(other) : "?",
                other && other->state == F_BARRIER ? " (barrier divergence)" : "");
    return -1;
  }
}

/* The threads of block (bx, by, bz) at their start. */
static void init_block(const unsigned grid[3], const unsigned block[3], unsigned bx, unsigned by,
                       unsigned bz, void *smem) {
  unsigned warps = (S.n + SIMT_WARP - 1) / SIMT_WARP;
  for (unsigned i = 0; i < S.n; i++) {
    fiber *f = &S.f[i];
    simt_thread *t = &f->t;
    t->thread_idx = (simt_dim3){i % block[0], i / block[0] % block[1], i / (block[0] * block[1])};
    t->block_idx = (simt_dim3){bx, by, bz};
    t->block_dim = (simt_dim3){block[0], block[1], block[2]};
    t->grid_dim = (simt_dim3){grid[0], grid[1], grid[2]};
    t->linear = i;
    t->lane = i % SIMT_WARP;
    t->warp = i / SIMT_WARP;
    t->warp_lanes = t->warp + 1 < warps ? SIMT_WARP : S.n - t->warp * SIMT_WARP;
    t->dyn_smem = smem;
    f->state = F_RUNNABLE;
    f->line = 0;
    interp_fiber_start(f->fb, fiber_main, NULL);
  }
}

/* What a traced launch adds to a launch (simt_launch_traced). */
typedef struct launch_trace {
  const simt_range *ranges;
  int nranges;
  unsigned max_blocks;
  simt_coalescing *acc;
} launch_trace;

static void rt_trace_access(const void *pc, const void *addr, unsigned long bytes, int store) {
  if (S.trace && S.running)
    simt_trace_access(S.trace, (unsigned)(S.running - S.f), S.running->t.warp, pc, addr, bytes,
                      store);
}
static void rt_trace_enter(const void *caller_pc) {
  if (S.trace && S.running) simt_trace_enter(S.trace, (unsigned)(S.running - S.f), caller_pc);
}
static void rt_trace_exit(void) {
  if (S.trace && S.running) simt_trace_exit(S.trace, (unsigned)(S.running - S.f));
}

static int check_launch(const simt_kernel *k, const unsigned grid[3], const unsigned block[3],
                        void **args, int nargs, char **out_err) {
  if (!k) return fail(out_err, "no kernel given");
  if (S.f) return fail(out_err, "simt_launch is not reentrant (called from inside a launch?)");
  if (nargs != k->nargs)
    return fail(out_err, "kernel %s takes %d argument(s), %d given", k->name, k->nargs, nargs);
  for (int i = 0; i < nargs; i++)
    if (!args || !args[i]) return fail(out_err, "kernel %s: argument %d is NULL", k->name, i);
  for (int d = 0; d < 3; d++)
    if (grid[d] == 0 || block[d] == 0)
      return fail(out_err, "kernel %s: grid (%u,%u,%u) and block (%u,%u,%u) must be positive",
                  k->name, grid[0], grid[1], grid[2], block[0], block[1], block[2]);
  unsigned long long threads = (unsigned long long)block[0] * block[1] * block[2];
  if (threads > MAX_BLOCK_THREADS)
    return fail(out_err, "kernel %s: %llu threads per block, more than the %u a GPU allows",
                k->name, threads, MAX_BLOCK_THREADS);
  if (grid[1] > 65535 || grid[2] > 65535)
    return fail(out_err, "kernel %s: grid y and z are at most 65535, (%u,%u,%u) given", k->name,
                grid[0], grid[1], grid[2]);
  return 0;
}

static int launch(simt_kernel *k, const unsigned grid[3], const unsigned block[3],
                  size_t dyn_smem_bytes, void **args, int nargs, const launch_trace *tr,
                  char **out_err) {
  if (out_err) *out_err = NULL;
  if (check_launch(k, grid, block, args, nargs, out_err)) return -1;
  memset(&S, 0, sizeof S);
  S.n = block[0] * block[1] * block[2];
  S.launcher = k->launcher;
  S.args = args;
  S.kname = k->name;
  S.f = calloc(S.n, sizeof *S.f);
  /* 1024-byte aligned, as `extern __shared__ __align__(1024)` asks (wgmma's swizzle atoms) */
  void *smem = dyn_smem_bytes ? aligned_alloc(1024, (dyn_smem_bytes + 1023) & ~(size_t)1023) : NULL;
  if (!S.f || (dyn_smem_bytes && !smem)) abort();
  if (tr) {
    S.trace = simt_trace_new(tr->ranges, tr->nranges, S.n, k->fn_lo, k->fn_hi, k->module->base);
    const simt_module *m = k->module;
    if (m->shared_lo && m->shared_hi > m->shared_lo)
      simt_trace_add_shared(S.trace, m->shared_lo,
                            (size_t)((char *)m->shared_hi - (char *)m->shared_lo));
    simt_trace_add_shared(S.trace, smem, dyn_smem_bytes);
  }
  int rc = 0;
  for (unsigned i = 0; i < S.n; i++) {
    S.f[i].fb = interp_fiber_new(FIBER_STACK); /* with a guard page: overflow faults */
    if (!S.f[i].fb) {
      rc = fail(out_err, "kernel %s: cannot map fiber stacks: %s", k->name, strerror(errno));
      goto out;
    }
  }
  /* every block in order, or (a traced launch with max_blocks) an evenly spaced sample */
  unsigned long long total = (unsigned long long)grid[0] * grid[1] * grid[2], runs = total;
  if (tr && tr->max_blocks && tr->max_blocks < total) runs = tr->max_blocks;
  for (unsigned long long r = 0; r < runs && !rc; r++) {
    unsigned long long b = runs == total ? r : r * total / runs;
    init_block(grid, block, (unsigned)(b % grid[0]), (unsigned)(b / grid[0] % grid[1]),
               (unsigned)(b / grid[0] / grid[1]), smem);
    if (S.trace) simt_trace_block_begin(S.trace);
    if (run_block() < 0)
      rc = -1;
    else if (S.trace)
      simt_trace_block_end(S.trace, tr->acc);
  }
  if (rc && S.failed && out_err) *out_err = buf_take(&S.err);
out:
  for (unsigned i = 0; i < S.n; i++)
    if (S.f[i].fb) interp_fiber_free(S.f[i].fb);
  simt_trace_free(S.trace);
  free(S.f);
  free(S.err.data);
  free(smem);
  memset(&S, 0, sizeof S);
  return rc;
}

int simt_launch(simt_kernel *k, const unsigned grid[3], const unsigned block[3],
                size_t dyn_smem_bytes, void **args, int nargs, char **out_err) {
  return launch(k, grid, block, dyn_smem_bytes, args, nargs, NULL, out_err);
}

/* ---------------------------------------------------------------- the coalescing report */

int simt_module_traced(const simt_module *m) { return m && m->traced; }

int simt_launch_traced(simt_kernel *k, const unsigned grid[3], const unsigned block[3],
                       size_t dyn_smem_bytes, void **args, int nargs, const simt_range *global,
                       int nglobal, unsigned max_blocks, simt_coalescing *acc, char **out_err) {
  if (out_err) *out_err = NULL;
  if (!k || !acc || nglobal < 0 || (nglobal && !global))
    return fail(out_err, "simt_launch_traced: no kernel, report or ranges given");
  if (!k->module->traced)
    return fail(out_err, "kernel %s was compiled without tracing (simt_options.trace)", k->name);
  launch_trace tr = {global, nglobal, max_blocks, acc};
  return launch(k, grid, block, dyn_smem_bytes, args, nargs, &tr, out_err);
}

void simt_coalescing_free(simt_coalescing *c) {
  if (!c) return;
  free(c->sites);
  memset(c, 0, sizeof *c);
}

int simt_site_where(const simt_kernel *k, size_t site, char *out, size_t n) {
  if (!k || !out || n == 0 || !k->module->path || site == 0) return -1;
  out[0] = 0;
  char addr[32];
  snprintf(addr, sizeof addr, "0x%zx", site - 1); /* site: a return address, after the call */
  char *argv[] = {"addr2line", "-e", k->module->path, addr, NULL};
  int fds[2];
  if (pipe(fds) != 0) return -1;
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
  posix_spawn_file_actions_addclose(&fa, fds[0]);
  pid_t pid;
  int rc = posix_spawnp(&pid, "addr2line", &fa, NULL, argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  close(fds[1]);
  size_t len = 0;
  ssize_t got;
  while (rc == 0 && len + 1 < n && (got = read(fds[0], out + len, n - 1 - len)) > 0)
    len += (size_t)got;
  close(fds[0]);
  out[len] = 0;
  int status = 0;
  if (rc == 0) waitpid(pid, &status, 0);
  char *nl = strchr(out, '\n');
  if (nl) *nl = 0;
  if (rc != 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0 || !out[0] || out[0] == '?')
    return -1;
  return 0;
}
