/* toolchains: CUDA C to PTX / cubin with NVRTC (loaded with dlopen, so relaxc builds and runs
 * without the CUDA toolkit), `ptxas -v` resource reports, and the process and temporary-file
 * helpers the external tools (ptxas, xcrun metal) share. */
#define _GNU_SOURCE /* dladdr: which file NVRTC was loaded from (the kernel cache's key) */
#include "toolchain.h"

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

/* ==== processes and temporary files ====================================================== */

rx_status tgt_tc_run(char *const argv[], char **out_output, int *out_exit) {
  if (out_output) *out_output = NULL;
  *out_exit = -1;
  int fds[2];
  if (pipe(fds) != 0)
    return base_status_make(RX_ERR_IO, "cannot run %s: pipe: %s", argv[0], strerror(errno));
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addclose(&fa, fds[0]);
  posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
  posix_spawn_file_actions_adddup2(&fa, fds[1], 2);
  posix_spawn_file_actions_addclose(&fa, fds[1]);
  pid_t pid;
  int rc = posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  close(fds[1]);
  if (rc != 0) {
    close(fds[0]);
    return base_status_make(rc == ENOENT ? RX_ERR_NOT_FOUND : RX_ERR_IO, "cannot run %s: %s",
                            argv[0], strerror(rc));
  }
  rx_strbuf out = {0};
  char buf[4096];
  for (;;) {
    ssize_t n = read(fds[0], buf, sizeof buf);
    if (n > 0) {
      base_strbuf_appendn(&out, buf, (size_t)n);
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else {
      break;
    }
  }
  close(fds[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) {
      base_strbuf_free(&out);
      return base_status_make(RX_ERR_IO, "waiting for %s: %s", argv[0], strerror(errno));
    }
  }
  *out_exit =
      WIFEXITED(status) ? WEXITSTATUS(status) : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
  if (out_output)
    *out_output = base_strbuf_take(&out);
  else
    base_strbuf_free(&out);
  return NULL;
}

static bool executable(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 && S_ISREG(st.st_mode) && access(path, X_OK) == 0;
}

static char *join(const char *dir, size_t n, const char *name) {
  rx_strbuf b = {0};
  base_strbuf_appendn(&b, dir, n);
  if (n && dir[n - 1] != '/') base_strbuf_putc(&b, '/');
  base_strbuf_append(&b, name);
  return base_strbuf_take(&b);
}

char *tgt_tc_find_tool(const char *name, const char *env_var, const char *const dirs[]) {
  const char *env = env_var ? getenv(env_var) : NULL;
  if (env && *env && executable(env)) return base_strdup(env);
  for (size_t i = 0; dirs && dirs[i]; i++) {
    char *p = join(dirs[i], strlen(dirs[i]), name);
    if (executable(p)) return p;
    free(p);
  }
  const char *path = getenv("PATH");
  while (path && *path) {
    const char *colon = strchr(path, ':');
    size_t n = colon ? (size_t)(colon - path) : strlen(path);
    if (n) {
      char *p = join(path, n, name);
      if (executable(p)) return p;
      free(p);
    }
    path = colon ? colon + 1 : NULL;
  }
  return NULL;
}

rx_status tgt_tc_temp_dir(char **out_dir) {
  *out_dir = NULL;
  const char *tmp = getenv("TMPDIR");
  if (!tmp || !*tmp) tmp = "/tmp";
  char *templ = join(tmp, strlen(tmp), "relaxc-XXXXXX");
  if (!mkdtemp(templ)) {
    rx_status s = base_status_make(RX_ERR_IO, "cannot create a temporary directory %s: %s", templ,
                                   strerror(errno));
    free(templ);
    return s;
  }
  *out_dir = templ;
  return NULL;
}

void tgt_tc_remove_dir(const char *dir) {
  DIR *d = opendir(dir);
  if (d) {
    struct dirent *e;
    while ((e = readdir(d))) {
      if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
      char *p = join(dir, strlen(dir), e->d_name);
      unlink(p);
      free(p);
    }
    closedir(d);
  }
  rmdir(dir);
}

rx_status tgt_tc_write_file(const char *path, const void *data, size_t len) {
  FILE *f = fopen(path, "wb");
  if (!f) return base_status_make(RX_ERR_IO, "cannot write %s: %s", path, strerror(errno));
  size_t w = fwrite(data, 1, len, f);
  int closed = fclose(f);
  if (w != len || closed != 0)
    return base_status_make(RX_ERR_IO, "cannot write %s: %s", path, strerror(errno));
  return NULL;
}

/* ==== NVRTC ============================================================================== */

/* The part of nvrtc.h relaxc uses (CUDA 11 and later keep these signatures). */
typedef struct rx_nvrtc_program *nvrtc_program;
typedef int nvrtc_result; /* NVRTC_SUCCESS is 0 */

static struct {
  void *handle; /* NULL when loading failed */
  char loaded_from[512];
  char tried[1536]; /* what was tried, for the error message */
  int major, minor;
  nvrtc_result (*version)(int *, int *);
  const char *(*error_string)(nvrtc_result);
  nvrtc_result (*create)(nvrtc_program *, const char *, const char *, int, const char *const *,
                         const char *const *);
  nvrtc_result (*compile)(nvrtc_program, int, const char *const *);
  nvrtc_result (*destroy)(nvrtc_program *);
  nvrtc_result (*log_size)(nvrtc_program, size_t *);
  nvrtc_result (*log)(nvrtc_program, char *);
  nvrtc_result (*ptx_size)(nvrtc_program, size_t *);
  nvrtc_result (*ptx)(nvrtc_program, char *);
  nvrtc_result (*cubin_size)(nvrtc_program, size_t *);
  nvrtc_result (*cubin)(nvrtc_program, char *);
} nv;

static pthread_once_t nv_once = PTHREAD_ONCE_INIT;

static void note_tried(const char *what, const char *why) {
  size_t used = strlen(nv.tried);
  snprintf(nv.tried + used, sizeof nv.tried - used, "%s%s%s%s%s", used ? ", " : "", what,
           why ? " (" : "", why ? why : "", why ? ")" : "");
}

static bool try_open(const char *path) {
  void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    /* name the file only; dlerror repeats the path and is long */
    note_tried(path, NULL);
    return false;
  }
#define SYM(field, sym)                                                                            \
  do {                                                                                             \
    void *p_ = dlsym(h, sym);                                                                      \
    if (!p_) {                                                                                     \
      note_tried(path, "lacks " sym);                                                              \
      dlclose(h);                                                                                  \
      return false;                                                                                \
    }                                                                                              \
    memcpy(&nv.field, &p_, sizeof p_); /* object to function pointer, as POSIX allows */           \
  } while (0)
  SYM(version, "nvrtcVersion");
  SYM(error_string, "nvrtcGetErrorString");
  SYM(create, "nvrtcCreateProgram");
  SYM(compile, "nvrtcCompileProgram");
  SYM(destroy, "nvrtcDestroyProgram");
  SYM(log_size, "nvrtcGetProgramLogSize");
  SYM(log, "nvrtcGetProgramLog");
  SYM(ptx_size, "nvrtcGetPTXSize");
  SYM(ptx, "nvrtcGetPTX");
  SYM(cubin_size, "nvrtcGetCUBINSize");
  SYM(cubin, "nvrtcGetCUBIN");
#undef SYM
  nv.handle = h;
  snprintf(nv.loaded_from, sizeof nv.loaded_from, "%s", path);
  if (nv.version(&nv.major, &nv.minor) != 0) nv.major = nv.minor = 0;
  return true;
}

static void load_once(void) {
  const char *env = getenv("RX_NVRTC_PATH");
  if (env && *env) {
    try_open(env); /* an explicit choice is not second-guessed */
    return;
  }
  static const char *const names[] = {"libnvrtc.so", "libnvrtc.so.13", "libnvrtc.so.12"};
  for (size_t i = 0; i < RX_ARRAY_LEN(names); i++)
    if (try_open(names[i])) return;
  const char *home = getenv("CUDA_HOME");
  if (home && *home) {
    char path[512];
    snprintf(path, sizeof path, "%s/lib64/libnvrtc.so", home);
    if (try_open(path)) return;
  }
  try_open("/usr/local/cuda/lib64/libnvrtc.so");
}

rx_status tgt_nvrtc_load(int *out_major, int *out_minor) {
  pthread_once(&nv_once, load_once);
  if (!nv.handle)
    return base_status_make(
        RX_ERR_NOT_FOUND,
        "NVRTC not found (tried %s); install the CUDA toolkit or set RX_NVRTC_PATH", nv.tried);
  if (out_major) *out_major = nv.major;
  if (out_minor) *out_minor = nv.minor;
  return NULL;
}

/* "sm_80", "sm_90a", "compute_80": the kind and the number part; false when malformed. */
static bool parse_arch(const char *arch, bool *out_real, const char **out_num) {
  const char *num;
  if (strncmp(arch, "sm_", 3) == 0) {
    *out_real = true;
    num = arch + 3;
  } else if (strncmp(arch, "compute_", 8) == 0) {
    *out_real = false;
    num = arch + 8;
  } else {
    return false;
  }
  size_t digits = strspn(num, "0123456789");
  if (digits < 2 || digits > 4) return false;
  const char *rest = num + digits;
  if (*rest && !(rest[0] >= 'a' && rest[0] <= 'z' && rest[1] == '\0')) return false;
  *out_num = num;
  return true;
}

static char *program_log(nvrtc_program prog) {
  size_t n = 0;
  if (nv.log_size(prog, &n) != 0 || n == 0) return base_strdup("");
  char *log = base_malloc(n + 1);
  if (nv.log(prog, log) != 0) log[0] = '\0';
  log[n] = '\0';
  /* trim trailing newlines */
  size_t len = strlen(log);
  while (len && (log[len - 1] == '\n' || log[len - 1] == '\r')) log[--len] = '\0';
  return log;
}

/* The CUDA include directory (cuda_fp16.h, cuda_bf16.h) when it exists; heap or NULL. */
static char *cuda_include_dir(void) {
  const char *home = getenv("CUDA_HOME");
  const char *cands[] = {home && *home ? home : NULL, "/usr/local/cuda"};
  for (size_t i = 0; i < RX_ARRAY_LEN(cands); i++) {
    if (!cands[i]) continue;
    char *inc = join(cands[i], strlen(cands[i]), "include");
    char *probe = join(inc, strlen(inc), "cuda_fp16.h");
    bool ok = access(probe, R_OK) == 0;
    free(probe);
    if (ok) return inc;
    free(inc);
  }
  return NULL;
}

/* The options of every compilation for arch_opt ("--gpu-architecture=sm_90"); *out_inc (heap,
 * may be NULL) holds the include option's storage. Returns the count. */
static int nvrtc_options(const char *arch_opt, const char *opts[4], char **out_inc) {
  int nopts = 0;
  opts[nopts++] = arch_opt;
  opts[nopts++] = "-default-device";
  opts[nopts++] = "--std=c++17";
  *out_inc = NULL;
  char *inc = cuda_include_dir();
  if (inc) {
    *out_inc = base_malloc(strlen(inc) + 3);
    snprintf(*out_inc, strlen(inc) + 3, "-I%s", inc);
    opts[nopts++] = *out_inc;
    free(inc);
  }
  return nopts;
}

char *tgt_nvrtc_id(const char *arch) {
  rx_strbuf b = {0};
  int major = 0, minor = 0;
  rx_status st = tgt_nvrtc_load(&major, &minor);
  rx_status_free(st);
  char arch_opt[64];
  snprintf(arch_opt, sizeof arch_opt, "--gpu-architecture=%s", arch);
  const char *opts[4];
  char *inc = NULL;
  int n = nvrtc_options(arch_opt, opts, &inc);
  base_strbuf_printf(&b, "nvrtc %d.%d (%s", major, minor, st ? "absent" : nv.loaded_from);
  /* the file behind the loaded library, its size and time: a patch release (13.0.88 to
   * 13.0.89) has the same major.minor but another file */
  Dl_info info;
  char *real = NULL;
  struct stat sb;
  void *sym;
  memcpy(&sym, &nv.compile, sizeof sym);
  if (!st && dladdr(sym, &info) && info.dli_fname && (real = realpath(info.dli_fname, NULL)) &&
      stat(real, &sb) == 0)
    base_strbuf_printf(&b, ", %s, %lld bytes, modified %lld", real, (long long)sb.st_size,
                       (long long)sb.st_mtime);
  free(real);
  base_strbuf_putc(&b, ')');
  for (int i = 0; i < n; i++) base_strbuf_printf(&b, " %s", opts[i]);
  free(inc);
  return base_strbuf_take(&b);
}

/* One output of a compiled program (cubin: binary; PTX: text, NUL-terminated, its length
 * without the NUL). */
static rx_status program_output(nvrtc_program prog, const char *name, bool cubin, char **out_bin,
                                size_t *out_len) {
  size_t n = 0;
  nvrtc_result r = cubin ? nv.cubin_size(prog, &n) : nv.ptx_size(prog, &n);
  if (r != 0 || n == 0)
    return base_status_make(RX_ERR_INTERNAL, "%s: nvrtcGet%sSize: %s", name,
                            cubin ? "CUBIN" : "PTX", r ? nv.error_string(r) : "empty output");
  char *bin = base_malloc(n + 1);
  r = cubin ? nv.cubin(prog, bin) : nv.ptx(prog, bin);
  if (r != 0) {
    free(bin);
    return base_status_make(RX_ERR_INTERNAL, "%s: nvrtcGet%s: %s", name, cubin ? "CUBIN" : "PTX",
                            nv.error_string(r));
  }
  bin[n] = '\0';
  *out_bin = bin;
  /* PTX size counts its NUL; a cubin is binary */
  *out_len = cubin ? n : strlen(bin);
  return NULL;
}

/* One NVRTC program for arch ("sm" or "compute" kind, number num): PTX into out_ptx and (a real
 * architecture) the cubin into out_cubin, where those are not NULL. NVRTC programs are
 * independent: this runs on any thread. */
static rx_status compile_program(const char *src, const char *name, bool real, const char *num,
                                 char **out_ptx, size_t *out_ptx_len, char **out_cubin,
                                 size_t *out_cubin_len, char **out_log) {
  /* wgmma.mma_async exists only in the arch-specific target sm_90a (PTX ISA, "Asynchronous
   * Warpgroup Level Matrix Multiply-Accumulate Instructions": "requires sm_90a"): a kernel that
   * uses it (codegen/mma_cuda.h's wgmma helpers) is compiled for 90a where 90 was asked. Its
   * cubin runs on sm_90 devices only, which the target names. */
  if (strcmp(num, "90") == 0 && strstr(src, "wgmma.mma_async")) num = "90a";
  char arch_opt[64];
  snprintf(arch_opt, sizeof arch_opt, "--gpu-architecture=%s_%s", real ? "sm" : "compute", num);
  const char *opts[4];
  char *inc_opt = NULL;
  int nopts = nvrtc_options(arch_opt, opts, &inc_opt);
  nvrtc_program prog = NULL;
  rx_status st = NULL;
  nvrtc_result r = nv.create(&prog, src, name, 0, NULL, NULL);
  if (r != 0) {
    st = base_status_make(RX_ERR_INTERNAL, "%s: nvrtcCreateProgram: %s", name, nv.error_string(r));
    goto done;
  }
  r = nv.compile(prog, nopts, opts);
  char *log = program_log(prog);
  if (r != 0)
    st = base_status_make(RX_ERR_INVALID, "NVRTC could not compile %s for %s_%s: %s\n%s%s", name,
                          real ? "sm" : "compute", num, nv.error_string(r), log,
                          inc_opt ? ""
                                  : "\n(no CUDA include directory with cuda_fp16.h was found: set "
                                    "CUDA_HOME to the toolkit)");
  if (out_log)
    *out_log = log;
  else
    free(log);
  if (!st && out_ptx) st = program_output(prog, name, false, out_ptx, out_ptx_len);
  if (!st && out_cubin) st = program_output(prog, name, true, out_cubin, out_cubin_len);
done:
  if (prog) nv.destroy(&prog);
  free(inc_opt);
  return st;
}

rx_status tgt_nvrtc_compile(const char *src, const char *name, const char *arch, bool want_cubin,
                            char **out_bin, size_t *out_len, char **out_log) {
  *out_bin = NULL;
  *out_len = 0;
  if (out_log) *out_log = NULL;
  if (!name) name = "kernel.cu";
  bool real;
  const char *num;
  if (!arch || !parse_arch(arch, &real, &num))
    return base_status_make(
        RX_ERR_INVALID,
        "%s: bad CUDA architecture '%s'; expected sm_XX or compute_XX (sm_80, sm_90)", name,
        arch ? arch : "(null)");
  if (want_cubin && !real)
    return base_status_make(
        RX_ERR_INVALID, "%s: a cubin needs a real architecture (sm_%s), not '%s'", name, num, arch);
  RX_RETURN_IF_ERROR(tgt_nvrtc_load(NULL, NULL));
  /* a cubin for sm_XX; PTX is produced for the virtual architecture compute_XX */
  return compile_program(src, name, want_cubin, num, want_cubin ? NULL : out_bin,
                         want_cubin ? NULL : out_len, want_cubin ? out_bin : NULL,
                         want_cubin ? out_len : NULL, out_log);
}

rx_status tgt_nvrtc_compile_both(const char *src, const char *name, const char *sm_arch,
                                 char **out_ptx, size_t *out_ptx_len, char **out_cubin,
                                 size_t *out_cubin_len, char **out_log) {
  *out_ptx = *out_cubin = NULL;
  *out_ptx_len = *out_cubin_len = 0;
  if (out_log) *out_log = NULL;
  if (!name) name = "kernel.cu";
  bool real;
  const char *num;
  if (!sm_arch || !parse_arch(sm_arch, &real, &num) || !real)
    return base_status_make(RX_ERR_INVALID,
                            "%s: bad CUDA architecture '%s'; expected sm_XX (sm_80)", name,
                            sm_arch ? sm_arch : "(null)");
  RX_RETURN_IF_ERROR(tgt_nvrtc_load(NULL, NULL));
  rx_status st = compile_program(src, name, true, num, out_ptx, out_ptx_len, out_cubin,
                                 out_cubin_len, out_log);
  if (st) {
    free(*out_ptx);
    *out_ptx = NULL;
    *out_ptx_len = 0;
  }
  return st;
}

/* ==== ptxas -v ============================================================================ */

void tgt_ptxas_info_free(rx_ptxas_info *info) {
  free(info->funcs);
  free(info->log);
  memset(info, 0, sizeof *info);
}

static rx_ptxas_func *add_func(rx_ptxas_info *info, const char *name, size_t n, bool entry) {
  info->funcs = base_realloc(info->funcs, (size_t)(info->nfuncs + 1) * sizeof *info->funcs);
  rx_ptxas_func *f = &info->funcs[info->nfuncs++];
  memset(f, 0, sizeof *f);
  if (n >= sizeof f->name) n = sizeof f->name - 1;
  memcpy(f->name, name, n);
  f->entry = entry;
  return f;
}

static rx_ptxas_func *find_func(rx_ptxas_info *info, const char *name, size_t n) {
  for (int i = info->nfuncs - 1; i >= 0; i--)
    if (strlen(info->funcs[i].name) == n && memcmp(info->funcs[i].name, name, n) == 0)
      return &info->funcs[i];
  return NULL;
}

/* The integer right before `what` in line ("... 1024 bytes smem"); -1 when absent. */
static long number_before(const char *line, const char *end, const char *what) {
  size_t wn = strlen(what);
  for (const char *p = line; p + wn <= end; p++) {
    if (memcmp(p, what, wn) != 0) continue;
    const char *q = p;
    while (q > line && q[-1] == ' ') q--;
    const char *digits_end = q;
    while (q > line && q[-1] >= '0' && q[-1] <= '9') q--;
    if (q == digits_end) return -1;
    return strtol(q, NULL, 10);
  }
  return -1;
}

static bool line_has(const char *line, const char *end, const char *what, const char **out_at) {
  size_t wn = strlen(what);
  for (const char *p = line; p + wn <= end; p++)
    if (memcmp(p, what, wn) == 0) {
      if (out_at) *out_at = p + wn;
      return true;
    }
  return false;
}

static int nonneg(long v) { return v < 0 ? 0 : (int)v; }

rx_status tgt_ptxas_parse(const char *log, rx_ptxas_info *out) {
  memset(out, 0, sizeof *out);
  out->log = base_strdup(log);
  rx_ptxas_func *current =
      NULL;                    /* the entry being compiled: "Used N registers" lines apply to it */
  rx_ptxas_func *props = NULL; /* the function whose properties line comes next */
  const char *p = log;
  while (*p) {
    const char *end = strchr(p, '\n');
    if (!end) end = p + strlen(p);
    const char *at;
    if (line_has(p, end, "Compiling entry function '", &at)) {
      const char *q = memchr(at, '\'', (size_t)(end - at));
      if (q) current = add_func(out, at, (size_t)(q - at), true);
    } else if (line_has(p, end, "Function properties for ", &at)) {
      size_t n = (size_t)(end - at);
      while (n && (at[n - 1] == ' ' || at[n - 1] == '\r')) n--;
      props = find_func(out, at, n);
      if (!props) props = add_func(out, at, n, false);
    } else if (line_has(p, end, "bytes stack frame", NULL) && props) {
      props->stack_bytes = nonneg(number_before(p, end, "bytes stack frame"));
      props->spill_stores = nonneg(number_before(p, end, "bytes spill stores"));
      props->spill_loads = nonneg(number_before(p, end, "bytes spill loads"));
      props = NULL;
    } else if (line_has(p, end, "Used ", &at) && line_has(p, end, "registers", NULL)) {
      rx_ptxas_func *f = current;
      if (!f) f = add_func(out, "?", 1, true);
      f->registers = nonneg(number_before(p, end, "registers"));
      f->shared_bytes = nonneg(number_before(p, end, "bytes smem"));
    }
    p = *end ? end + 1 : end;
  }
  for (int i = 0; i < out->nfuncs; i++) {
    rx_ptxas_func *f = &out->funcs[i];
    if (f->registers > out->max_registers) out->max_registers = f->registers;
    out->spill_bytes += f->spill_stores + f->spill_loads;
  }
  if (out->nfuncs == 0) {
    rx_status s = base_status_make(RX_ERR_INVALID, "no function in the ptxas report:\n%s", log);
    tgt_ptxas_info_free(out);
    return s;
  }
  return NULL;
}

rx_status tgt_ptxas_report(const char *ptx, const char *arch, rx_ptxas_info *out) {
  memset(out, 0, sizeof *out);
  bool real;
  const char *num;
  if (!arch || !parse_arch(arch, &real, &num) || !real)
    return base_status_make(RX_ERR_INVALID,
                            "ptxas: bad architecture '%s'; expected sm_XX (sm_80, sm_90)",
                            arch ? arch : "(null)");
  const char *home = getenv("CUDA_HOME");
  char *home_bin = home && *home ? join(home, strlen(home), "bin") : NULL;
  const char *dirs[] = {home_bin ? home_bin : "/usr/local/cuda/bin", "/usr/local/cuda/bin", NULL};
  char *tool = tgt_tc_find_tool("ptxas", "RX_PTXAS_PATH", dirs);
  free(home_bin);
  if (!tool)
    return base_status_make(
        RX_ERR_NOT_FOUND,
        "ptxas not found (tried $RX_PTXAS_PATH, $CUDA_HOME/bin, /usr/local/cuda/bin "
        "and PATH); install the CUDA toolkit or set RX_PTXAS_PATH");
  char *dir = NULL;
  rx_status st = tgt_tc_temp_dir(&dir);
  if (st) {
    free(tool);
    return st;
  }
  char *in = join(dir, strlen(dir), "kernel.ptx");
  char *outp = join(dir, strlen(dir), "kernel.cubin");
  char arch_opt[64];
  /* PTX that compile_program made for sm_90a (wgmma) is assembled for it where sm_90 was asked */
  bool arch_a = strcmp(num, "90") == 0 && strstr(ptx, ".target sm_90a");
  snprintf(arch_opt, sizeof arch_opt, "-arch=%s%s", arch, arch_a ? "a" : "");
  char *output = NULL;
  int code = 0;
  st = tgt_tc_write_file(in, ptx, strlen(ptx));
  if (!st) {
    char *argv[] = {tool, "-v", arch_opt, "-o", outp, in, NULL};
    st = tgt_tc_run(argv, &output, &code);
  }
  if (!st && code != 0)
    st = base_status_make(RX_ERR_INVALID, "ptxas %s failed (exit %d):\n%s", arch_opt, code, output);
  if (!st) st = tgt_ptxas_parse(output, out);
  free(output);
  tgt_tc_remove_dir(dir);
  free(in);
  free(outp);
  free(dir);
  free(tool);
  return st;
}
