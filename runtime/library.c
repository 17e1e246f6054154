/* runtime/library.c: loads a kernel library: kernels.json (docs/kernel-abi.md, read with cJSON)
 * and the binaries it names, from a directory or from memory, then asks the backend to create
 * each kernel. Every error names the library, the kernel and the field. */
#include <cjson/cJSON.h>
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/device.h"

typedef struct lctx {
  rx_rt_device *d;
  const rx_rt_allocator *a;
  const char *origin;
  const char *dir; /* NULL: from blobs */
  const rx_rt_blob *blobs;
  size_t nblobs;
  rx_status err;
} lctx;

static bool bad(lctx *c, const char *kernel, const char *fmt, ...) RX_PRINTF(3, 4);
static bool bad(lctx *c, const char *kernel, const char *fmt, ...) {
  if (c->err) return false;
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (kernel)
    c->err = base_status_make(RX_ERR_INVALID, "%s/kernels.json: kernel '%s': %s", c->origin, kernel,
                              msg);
  else
    c->err = base_status_make(RX_ERR_INVALID, "%s/kernels.json: %s", c->origin, msg);
  return false;
}

static bool dup_str(lctx *c, const char *s, char **out) {
  *out = rt_strdup(c->a, s);
  if (*out) return true;
  if (!c->err) c->err = rt_oom("a kernel description string", strlen(s) + 1);
  return false;
}

/* A required string field. */
static bool get_str(lctx *c, const cJSON *o, const char *field, const char *kernel, char **out) {
  *out = NULL;
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, field);
  if (!cJSON_IsString(v)) return bad(c, kernel, "field '%s' must be a string", field);
  return dup_str(c, v->valuestring, out);
}

/* An optional string field (absent or null: NULL). */
static bool get_opt_str(lctx *c, const cJSON *o, const char *field, const char *kernel,
                        char **out) {
  *out = NULL;
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, field);
  if (!v || cJSON_IsNull(v)) return true;
  if (!cJSON_IsString(v)) return bad(c, kernel, "field '%s' must be a string or null", field);
  return dup_str(c, v->valuestring, out);
}

static bool get_int(lctx *c, const cJSON *o, const char *field, const char *kernel, int64_t lo,
                    int64_t hi, int64_t *out) {
  *out = 0;
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, field);
  if (!cJSON_IsNumber(v) || v->valuedouble != (double)(int64_t)v->valuedouble)
    return bad(c, kernel, "field '%s' must be an integer", field);
  int64_t x = (int64_t)v->valuedouble;
  if (x < lo || x > hi)
    return bad(c, kernel, "field '%s' is %lld, expected %lld..%lld", field, (long long)x,
               (long long)lo, (long long)hi);
  *out = x;
  return true;
}

static bool get_bool(lctx *c, const cJSON *o, const char *field, const char *kernel, bool *out) {
  *out = false;
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, field);
  if (!v) return true; /* optional, false */
  if (!cJSON_IsBool(v)) return bad(c, kernel, "field '%s' must be true or false", field);
  *out = cJSON_IsTrue(v);
  return true;
}

/* An expression: a string, or an integer written as a number. */
static bool get_expr(lctx *c, const cJSON *v, const char *what, const char *kernel, char **out) {
  *out = NULL;
  if (cJSON_IsString(v)) return dup_str(c, v->valuestring, out);
  if (cJSON_IsNumber(v) && v->valuedouble == (double)(int64_t)v->valuedouble) {
    char buf[32];
    snprintf(buf, sizeof buf, "%lld", (long long)v->valuedouble);
    return dup_str(c, buf, out);
  }
  return bad(c, kernel, "%s must be an expression string", what);
}

/* text compiled over names; what names the field in messages. */
static bool compile(lctx *c, const char *text, const char *what, const char *kernel,
                    rt_names *names, rt_expr **out) {
  rx_status s = rt_expr_compile(text, names, out);
  if (!s) return true;
  if (rx_status_code_of(s) == RX_ERR_OUT_OF_MEMORY && !c->err) c->err = s;
  if (c->err) {
    if (c->err != s) rx_status_free(s);
    return false;
  }
  bad(c, kernel, "%s: %s", what, rx_status_message(s));
  rx_status_free(s);
  return false;
}

/* An expression (get_expr) compiled over names. */
static bool get_compiled(lctx *c, const cJSON *v, const char *what, const char *kernel,
                         rt_names *names, rt_expr **out) {
  *out = NULL;
  char *text = NULL;
  if (!get_expr(c, v, what, kernel, &text)) return false;
  bool ok = compile(c, text, what, kernel, names, out);
  rt_free(c->a, text);
  return ok;
}

/* Reads a file named by kernels.json, from the directory or the blobs. text: NUL-terminate. */
static bool load_file(lctx *c, const char *kernel, const char *name, bool text, uint8_t **out,
                      size_t *out_size) {
  *out = NULL;
  *out_size = 0;
  if (strstr(name, "..") || name[0] == '/')
    return bad(c, kernel, "file name '%s' must be relative to the library directory", name);
  if (!c->dir) {
    for (size_t i = 0; i < c->nblobs; i++)
      if (c->blobs[i].name && !strcmp(c->blobs[i].name, name)) {
        uint8_t *p = rt_alloc(c->a, c->blobs[i].size + 1);
        if (!p) {
          c->err = rt_oom(name, c->blobs[i].size + 1);
          return false;
        }
        if (c->blobs[i].size) memcpy(p, c->blobs[i].data, c->blobs[i].size);
        *out = p;
        *out_size = c->blobs[i].size;
        return true;
      }
    if (!c->err)
      c->err = base_status_make(RX_ERR_NOT_FOUND, "%s: kernel '%s': no blob named '%s' was given",
                                c->origin, kernel, name);
    return false;
  }
  size_t plen = strlen(c->dir) + strlen(name) + 2;
  char *path = rt_alloc(c->a, plen);
  if (!path) {
    c->err = rt_oom("a path", plen);
    return false;
  }
  snprintf(path, plen, "%s/%s", c->dir, name);
  FILE *f = fopen(path, "rb");
  bool ok = false;
  if (!f) {
    c->err = base_status_make(RX_ERR_NOT_FOUND, "kernel '%s': cannot open '%s': %s", kernel, path,
                              strerror(errno));
  } else if (fseek(f, 0, SEEK_END) == 0) {
    long n = ftell(f);
    if (n >= 0 && (uint64_t)n > base_file_kind_limit(RX_FILE_KERNEL)) {
      c->err = base_status_make(RX_ERR_INVALID,
                                "kernel '%s': '%s' has %ld bytes, past the limit of %llu bytes for "
                                "%s files",
                                kernel, path, n,
                                (unsigned long long)base_file_kind_limit(RX_FILE_KERNEL),
                                base_file_kind_name(RX_FILE_KERNEL));
    } else if (n >= 0 && fseek(f, 0, SEEK_SET) == 0) {
      uint8_t *p = rt_alloc(c->a, (size_t)n + 1);
      if (!p)
        c->err = rt_oom(path, (size_t)n + 1);
      else if (fread(p, 1, (size_t)n, f) != (size_t)n) {
        rt_free(c->a, p);
        c->err = base_status_make(RX_ERR_IO, "kernel '%s': cannot read '%s'", kernel, path);
      } else {
        *out = p;
        *out_size = (size_t)n;
        ok = true;
      }
    }
  }
  if (f) fclose(f);
  if (!ok && !c->err)
    c->err = base_status_make(RX_ERR_IO, "kernel '%s': cannot read '%s'", kernel, path);
  rt_free(c->a, path);
  (void)text; /* every buffer is allocated one byte longer, zeroed: text is NUL-terminated */
  return ok;
}

/* ---- SPIR-V: the structure of a module, checked before a driver (or the validation layer)
 * sees it, so a corrupted binary is an error naming the kernel and never a crash inside them ----
 * The header (magic, a version 1.0..1.6, a bound, schema 0), a size that is a whole number of
 * words, and every instruction's word count non-zero and inside the module. Where SPIRV-Tools'
 * shared library (libSPIRV-Tools-shared.so) can be opened at run time, the module is also fully
 * validated with it (spvValidateBinary); Debian ships SPIRV-Tools as static libraries only, so
 * there only the structural check runs. */
#define SPIRV_MAGIC     0x07230203u
#define SPIRV_MAX_BOUND 0x400000u /* SPIR-V's universal limit on ids (4194303) + 1 */

/* Per core opcode (0..403, SPIR-V 1.6's unified grammar, spirv.core.grammar.json): the fewest
 * words an instruction has ('0' + count: the opcode word and each required operand), and where
 * its result id is ('a': word 1; 'b': word 2, after a result type at word 1; '0': none). Opcodes
 * outside the table (extensions) are checked for a non-zero word count only. */
static const char spirv_min_words[] =
    "13232343412351343212243449234323432222331334363133434153141464334445545342221565"
    "34544155667566756654444545441444444444444445414455555555555555555555555551444444"
    "45555555465555555555555555555555115555554766441444444444111122114316579966777777"
    "7771134322431121331945566666666611779977554668866117=887722343436566756675664164"
    "54264872442334555655566556666666666666666666666111111111111111111111111111111111"
    "4555";
static const char spirv_result_at[] =
    "0b00000a000ab000000aaaaaaaaaaaaaaaaaaaa00bbbbbb0bbbbb0bb0b0bbb000bbbbbb00a000bbb"
    "bbbbb0bbbbbbbbbbbbb0bbbbbbbb0bbbbbbbbbbbbbbbb0bbbbbbbbbbbbbbbbbbbbbbbbbbb0bbbbbb"
    "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb00bbbbbbbbbbbb0bbbbbbbbb00000000000b0bbbbbbbbbbb"
    "bbb00b00a0000000000b0bbbbbbbbbbb00bbbbbb00bbbbb0000bbbbbb00bb00bbbbbbbbbbbbbb0b0"
    "bbabbbbab0000bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb000000000000000000000000000000000"
    "bbbb";
#define SPIRV_TABLE_OPS (sizeof spirv_min_words - 1)
_Static_assert(sizeof spirv_min_words == sizeof spirv_result_at, "one entry per opcode in both");

static bool spirv_structure(lctx *c, const char *kn, const char *file, const uint8_t *b,
                            size_t size) {
  if (size % 4)
    return bad(c, kn, "'%s' is not SPIR-V: %zu bytes is not a whole number of 4-byte words", file,
               size);
  size_t n = size / 4;
  if (n < 5) return bad(c, kn, "'%s' is not SPIR-V: %zu words, the header alone has 5", file, n);
  uint32_t w[5];
  memcpy(w, b, sizeof w);
  if (w[0] != SPIRV_MAGIC)
    return bad(c, kn, "'%s' is not SPIR-V: magic number 0x%08x, expected 0x%08x", file, w[0],
               SPIRV_MAGIC);
  uint32_t major = w[1] >> 16 & 0xff, minor = w[1] >> 8 & 0xff;
  if ((w[1] & 0xff0000ffu) || major != 1 || minor > 6)
    return bad(c, kn, "'%s' is not SPIR-V: version word 0x%08x, expected SPIR-V 1.0 to 1.6", file,
               w[1]);
  if (w[3] == 0 || w[3] > SPIRV_MAX_BOUND)
    return bad(c, kn, "'%s' is not SPIR-V: id bound %u, expected 1 to %u", file, w[3],
               SPIRV_MAX_BOUND);
  if (w[4] != 0) return bad(c, kn, "'%s' is not SPIR-V: schema word %u, expected 0", file, w[4]);
  for (size_t i = 5; i < n;) {
    uint32_t word;
    memcpy(&word, b + 4 * i, 4);
    uint32_t wc = word >> 16;
    if (wc == 0)
      return bad(
          c, kn,
          "'%s' is not valid SPIR-V: the instruction at word %zu (opcode %u) has word count 0",
          file, i, word & 0xffff);
    if (wc > n - i)
      return bad(c, kn,
                 "'%s' is not valid SPIR-V: the instruction at word %zu (opcode %u) has %u words, "
                 "past the end of the module (%zu words)",
                 file, i, word & 0xffff, wc, n);
    uint32_t op = word & 0xffff;
    if (op < SPIRV_TABLE_OPS) {
      uint32_t min = (uint32_t)(spirv_min_words[op] - '0');
      if (wc < min)
        return bad(
            c, kn,
            "'%s' is not valid SPIR-V: the instruction at word %zu (opcode %u) has %u words, "
            "it needs at least %u",
            file, i, op, wc, min);
      char at = spirv_result_at[op];
      for (uint32_t k = 1; at != '0' && k <= (at == 'a' ? 1u : 2u); k++) {
        uint32_t id;
        memcpy(&id, b + 4 * (i + k), 4);
        if (id == 0 || id >= w[3])
          return bad(c, kn,
                     "'%s' is not valid SPIR-V: the instruction at word %zu (opcode %u) has id %u, "
                     "outside 1..%u (the bound)",
                     file, i, op, id, w[3] - 1);
      }
    }
    i += wc;
  }
  return true;
}

/* SPIRV-Tools through dlopen: the few entry points of spirv-tools/libspirv.h used here. */
typedef struct spvt_diag {
  size_t line, column, index;
  char *error;
  bool is_text;
} spvt_diag;
static struct {
  pthread_once_t once;
  void *(*context_create)(int env);
  void (*context_destroy)(void *ctx);
  int (*validate)(const void *ctx, const uint32_t *words, size_t n, spvt_diag **diag);
  void (*diag_destroy)(spvt_diag *d);
} spvt = {PTHREAD_ONCE_INIT, NULL, NULL, NULL, NULL};

static void spvt_open(void) {
  void *h = dlopen("libSPIRV-Tools-shared.so", RTLD_NOW | RTLD_LOCAL);
  if (!h) return;
  *(void **)&spvt.context_create = dlsym(h, "spvContextCreate");
  *(void **)&spvt.context_destroy = dlsym(h, "spvContextDestroy");
  *(void **)&spvt.validate = dlsym(h, "spvValidateBinary");
  *(void **)&spvt.diag_destroy = dlsym(h, "spvDiagnosticDestroy");
  if (!spvt.context_create || !spvt.context_destroy || !spvt.validate || !spvt.diag_destroy)
    spvt.validate = NULL;
}

static bool spirv_validate(lctx *c, const char *kn, const char *file, const uint8_t *b,
                           size_t size) {
  pthread_once(&spvt.once, spvt_open);
  if (!spvt.validate) return true;
  /* spv_target_env: the Vulkan environment of the module's SPIR-V version */
  uint32_t version;
  memcpy(&version, b + 4, 4);
  uint32_t minor = version >> 8 & 0xff;
  int env = minor <= 3   ? 18 /* VULKAN_1_1 */
            : minor == 4 ? 21 /* VULKAN_1_1_SPIRV_1_4 */
            : minor == 5 ? 23 /* VULKAN_1_2 */
                         : 25 /* VULKAN_1_3 */;
  uint32_t *words = rt_alloc(c->a, size);
  if (!words) {
    if (!c->err) c->err = rt_oom("a SPIR-V module", size);
    return false;
  }
  memcpy(words, b, size);
  void *ctx = spvt.context_create(env);
  spvt_diag *diag = NULL;
  int r = ctx ? spvt.validate(ctx, words, size / 4, &diag) : 0;
  bool ok = r == 0 || bad(c, kn, "'%s' is not valid SPIR-V: SPIRV-Tools: %s (word %zu)", file,
                          diag && diag->error ? diag->error : "invalid module",
                          diag ? diag->index : (size_t)0);
  spvt.diag_destroy(diag);
  if (ctx) spvt.context_destroy(ctx);
  rt_free(c->a, words);
  return ok;
}

/* The kernel's "args": buffers (name, dtype, param, binding, written), then symbolic values
 * (name, dtype i32, offset in the scalar block). */
static bool parse_args(lctx *c, const cJSON *jk, const char *kn, rx_rt_kernel *k) {
  int64_t v;
  const cJSON *args = cJSON_GetObjectItemCaseSensitive(jk, "args");
  if (!cJSON_IsArray(args)) return bad(c, kn, "'args' must be an array");
  size_t n = (size_t)cJSON_GetArraySize(args);
  k->buffers = rt_alloc(c->a, (n + 1) * sizeof *k->buffers);
  k->scalars = rt_alloc(c->a, (n + 1) * sizeof *k->scalars);
  if (!k->buffers || !k->scalars) {
    c->err = rt_oom("kernel arguments", n * sizeof *k->buffers);
    return false;
  }
  const cJSON *ja;
  cJSON_ArrayForEach(ja, args) {
    char *kind = NULL;
    if (!cJSON_IsObject(ja)) return bad(c, kn, "every entry of 'args' must be an object");
    if (!get_str(c, ja, "kind", kn, &kind)) return false;
    bool is_buf = !strcmp(kind, "buffer"), is_scalar = !strcmp(kind, "scalar");
    rt_free(c->a, kind);
    if (is_buf) {
      if (k->nscalars) return bad(c, kn, "buffer arguments must come before symbolic values");
      rt_buffer_arg *b = &k->buffers[k->nbuffers++];
      if (!get_str(c, ja, "name", kn, &b->name) || !get_str(c, ja, "dtype", kn, &b->dtype) ||
          !get_bool(c, ja, "error", kn, &b->error) ||
          !get_int(c, ja, "param", kn, b->error ? -1 : 0, b->error ? -1 : 1 << 20, &v))
        return false;
      b->param = (int)v;
      if (b->error && strcmp(b->dtype, "i32"))
        return bad(c, kn, "the error buffer '%s' must have dtype i32", b->name);
      if (!get_int(c, ja, "binding", kn, 0, 1 << 10, &v)) return false;
      b->binding = (int)v;
      if (!get_bool(c, ja, "written", kn, &b->written)) return false;
    } else if (is_scalar) {
      rt_scalar_arg *s = &k->scalars[k->nscalars++];
      char *dtype = NULL;
      if (!get_str(c, ja, "name", kn, &s->name) || !get_str(c, ja, "dtype", kn, &dtype))
        return false;
      bool i32 = !strcmp(dtype, "i32");
      rt_free(c->a, dtype);
      if (!i32)
        return bad(c, kn, "symbolic value '%s' must have dtype i32 (the kernel ABI)", s->name);
      if (cJSON_GetObjectItemCaseSensitive(ja, "offset")) {
        if (!get_int(c, ja, "offset", kn, 0, 1 << 16, &v)) return false;
        s->offset = (uint32_t)v;
      } else {
        s->offset = (uint32_t)(4 * (k->nscalars - 1));
      }
      if (s->offset % 4)
        return bad(c, kn, "symbolic value '%s': offset must be a multiple of 4", s->name);
      if (!compile(c, s->name, "a symbolic value", kn, &k->vars, &s->value)) return false;
    } else {
      return bad(c, kn, "argument kind must be \"buffer\" or \"scalar\"");
    }
  }
  return true;
}

/* The kernel's "checks": the code and message of each run-time check, present exactly when it
 * takes the error buffer. */
static bool parse_checks(lctx *c, const cJSON *jk, const char *kn, rx_rt_kernel *k) {
  int64_t v;
  bool errbuf = false;
  for (size_t i = 0; i < k->nbuffers; i++) errbuf |= k->buffers[i].error;
  const cJSON *cs = cJSON_GetObjectItemCaseSensitive(jk, "checks");
  if (!cs || cJSON_IsNull(cs))
    return !errbuf || bad(c, kn, "a kernel with an error buffer lists its 'checks'");
  if (!cJSON_IsArray(cs)) return bad(c, kn, "'checks' must be an array");
  if (!errbuf) return bad(c, kn, "'checks' without an error buffer argument");
  size_t n = (size_t)cJSON_GetArraySize(cs);
  if (!(k->checks = rt_alloc(c->a, (n + 1) * sizeof *k->checks))) {
    c->err = rt_oom("kernel checks", n * sizeof *k->checks);
    return false;
  }
  const cJSON *jc;
  cJSON_ArrayForEach(jc, cs) {
    if (!cJSON_IsObject(jc)) return bad(c, kn, "every entry of 'checks' must be an object");
    rt_check *ch = &k->checks[k->nchecks++];
    if (!get_int(c, jc, "code", kn, 1, INT32_MAX, &v)) return false;
    ch->code = (int32_t)v;
    if (!get_str(c, jc, "message", kn, &ch->message)) return false;
  }
  return true;
}

/* The kernel's "scalars": where its symbolic values are passed (location, bytes, binding). */
static bool parse_scalars(lctx *c, const cJSON *jk, const char *kn, rx_rt_kernel *k) {
  int64_t v;
  const cJSON *sc = cJSON_GetObjectItemCaseSensitive(jk, "scalars");
  k->scalar_binding = -1;
  if (sc && !cJSON_IsNull(sc)) {
    char *loc = NULL;
    if (!cJSON_IsObject(sc)) return bad(c, kn, "'scalars' must be an object");
    if (!get_str(c, sc, "location", kn, &loc)) return false;
    static const struct {
      const char *name;
      rt_scalar_location loc;
    } locs[] = {{"push_constant", RT_SCALARS_PUSH_CONSTANT},
                {"uniform_buffer", RT_SCALARS_UNIFORM_BUFFER},
                {"parameters", RT_SCALARS_PARAMETERS},
                {"buffer", RT_SCALARS_BUFFER}};
    for (size_t i = 0; i < RX_ARRAY_LEN(locs); i++)
      if (!strcmp(loc, locs[i].name)) k->scalar_location = locs[i].loc;
    bool known = k->scalar_location != RT_SCALARS_NONE;
    if (!known)
      bad(c, kn,
          "scalars.location '%s' is not push_constant, uniform_buffer, "
          "parameters or buffer",
          loc);
    rt_free(c->a, loc);
    if (!known) return false;
    if (!get_int(c, sc, "bytes", kn, 0, 1 << 16, &v)) return false;
    k->scalar_bytes = (uint32_t)v;
    if (cJSON_GetObjectItemCaseSensitive(sc, "binding")) {
      if (!get_int(c, sc, "binding", kn, -1, 1 << 10, &v)) return false;
      k->scalar_binding = (int)v;
    }
  } else if (k->nscalars) {
    return bad(c, kn, "the kernel takes symbolic values but has no 'scalars' description");
  }
  return true;
}

/* The binaries the device's backend uses: SPIR-V (checked), cubin or PTX, metallib or MSL.
 * *binary is the "binary" entry (kept by the caller as the kernel's binary name). */
static bool load_binaries(lctx *c, const cJSON *jk, const char *kn, rx_rt_kernel *k,
                          char **binary) {
  char *ptx = NULL, *source = NULL;
  bool ok = get_opt_str(c, jk, "binary", kn, binary) && get_opt_str(c, jk, "ptx", kn, &ptx) &&
            get_opt_str(c, jk, "source", kn, &source);
  rx_rt_backend be = c->d->info.backend;
  if (ok && be == RX_RT_BACKEND_VULKAN) {
    if (!*binary)
      ok = bad(c, kn, "no 'binary' (SPIR-V): was glslang/shaderc absent when relaxc codegen ran?");
    else
      ok = load_file(c, kn, *binary, false, &k->binary, &k->binary_size) &&
           spirv_structure(c, kn, *binary, k->binary, k->binary_size) &&
           spirv_validate(c, kn, *binary, k->binary, k->binary_size);
  } else if (ok && be == RX_RT_BACKEND_CUDA) {
    if (!*binary && !ptx) ok = bad(c, kn, "neither 'binary' (cubin) nor 'ptx' is given");
    if (ok && *binary) ok = load_file(c, kn, *binary, false, &k->binary, &k->binary_size);
    if (ok && ptx) ok = load_file(c, kn, ptx, true, &k->ptx, &k->ptx_size);
  } else if (ok && be == RX_RT_BACKEND_METAL) {
    if (*binary)
      ok = load_file(c, kn, *binary, false, &k->binary, &k->binary_size);
    else if (source)
      ok = load_file(c, kn, source, true, &k->source, &k->source_size);
    else
      ok = bad(c, kn, "neither 'binary' (metallib) nor 'source' (MSL) is given");
  }
  rt_free(c->a, ptx);
  rt_free(c->a, source);
  return ok;
}

static bool parse_kernel(lctx *c, const cJSON *jk, rx_rt_kernel *k) {
  if (!cJSON_IsObject(jk)) return bad(c, NULL, "every entry of 'kernels' must be an object");
  if (!get_str(c, jk, "name", NULL, &k->name)) return false;
  const char *kn = k->name;
  k->vars.alloc = c->a;
  if (!get_str(c, jk, "program", kn, &k->program)) return false;
  const cJSON *cond = cJSON_GetObjectItemCaseSensitive(jk, "condition");
  if (cond && !cJSON_IsNull(cond) && !cJSON_IsString(cond))
    return bad(c, kn, "field 'condition' must be a string or null");
  if (cJSON_IsString(cond) && !get_compiled(c, cond, "condition", kn, &k->vars, &k->cond))
    return false;
  const cJSON *grid = cJSON_GetObjectItemCaseSensitive(jk, "grid");
  const cJSON *block = cJSON_GetObjectItemCaseSensitive(jk, "block");
  if (!cJSON_IsArray(grid) || cJSON_GetArraySize(grid) != 3)
    return bad(c, kn, "'grid' must be an array of 3 expressions");
  if (!cJSON_IsArray(block) || cJSON_GetArraySize(block) != 3)
    return bad(c, kn, "'block' must be an array of 3 integers");
  for (int i = 0; i < 3; i++) {
    if (!get_compiled(c, cJSON_GetArrayItem(grid, i), "each 'grid' entry", kn, &k->vars,
                      &k->grid[i]))
      return false;
    const cJSON *b = cJSON_GetArrayItem(block, i);
    if (!cJSON_IsNumber(b) || b->valuedouble < 1 || b->valuedouble > 65535 ||
        b->valuedouble != (double)(int)b->valuedouble)
      return bad(c, kn, "'block' entries must be integers in 1..65535");
    k->block[i] = (uint32_t)b->valuedouble;
  }
  int64_t v;
  if (cJSON_GetObjectItemCaseSensitive(jk, "shared_bytes")) {
    if (!get_int(c, jk, "shared_bytes", kn, 0, INT32_MAX, &v)) return false;
    k->shared_bytes = (uint32_t)v;
  }
  if (cJSON_GetObjectItemCaseSensitive(jk, "subgroup_size")) {
    if (!get_int(c, jk, "subgroup_size", kn, 1, 1024, &v)) return false;
    if (v & (v - 1))
      return bad(c, kn, "field 'subgroup_size' is %lld, not a power of two", (long long)v);
    k->subgroup_size = (uint32_t)v;
  }
  if (!get_bool(c, jk, "cooperative_matrix", kn, &k->coop_matrix)) return false;
  if (!get_bool(c, jk, "shared_dynamic", kn, &k->shared_dynamic)) return false;

  if (!parse_args(c, jk, kn, k)) return false;
  for (size_t i = 0; i < k->nbuffers; i++)
    for (size_t j = 0; j < i; j++)
      if (k->buffers[i].binding == k->buffers[j].binding)
        return bad(c, kn, "buffers '%s' and '%s' share binding %d", k->buffers[j].name,
                   k->buffers[i].name, k->buffers[i].binding);

  if (!parse_checks(c, jk, kn, k)) return false;
  if (!parse_scalars(c, jk, kn, k)) return false;
  for (size_t i = 0; i < k->nscalars; i++)
    if (k->scalar_location != RT_SCALARS_PARAMETERS && k->scalars[i].offset + 4 > k->scalar_bytes)
      return bad(c, kn, "symbolic value '%s' at offset %u does not fit in scalars.bytes = %u",
                 k->scalars[i].name, k->scalars[i].offset, k->scalar_bytes);
  if (k->scalar_location == RT_SCALARS_UNIFORM_BUFFER || k->scalar_location == RT_SCALARS_BUFFER) {
    if (k->scalar_binding < 0)
      return bad(c, kn, "scalars.binding must be given for location uniform_buffer or buffer");
    for (size_t i = 0; i < k->nbuffers; i++)
      if (k->buffers[i].binding == k->scalar_binding)
        return bad(c, kn, "the symbolic values share binding %d with buffer '%s'",
                   k->scalar_binding, k->buffers[i].name);
  }

  if (k->vars.count > RT_MAX_KERNEL_VARS)
    return bad(c, kn, "%u symbolic variables, at most %d", k->vars.count, RT_MAX_KERNEL_VARS);
  char *binary = NULL;
  bool ok = load_binaries(c, jk, kn, k, &binary);
  k->binary_name = binary;
  return ok;
}

static bool parse_program(lctx *c, const cJSON *jp, rt_program *p, rx_rt_library *l) {
  if (!cJSON_IsObject(jp)) return bad(c, NULL, "every entry of 'programs' must be an object");
  if (!get_str(c, jp, "name", NULL, &p->name)) return false;
  const cJSON *params = cJSON_GetObjectItemCaseSensitive(jp, "params");
  const cJSON *kernels = cJSON_GetObjectItemCaseSensitive(jp, "kernels");
  if (!cJSON_IsArray(params) || !cJSON_IsArray(kernels))
    return bad(c, NULL, "program '%s': 'params' and 'kernels' must be arrays", p->name);
  size_t np = (size_t)cJSON_GetArraySize(params), nk = (size_t)cJSON_GetArraySize(kernels);
  p->vars.alloc = c->a;
  p->params = rt_alloc(c->a, (np + 1) * sizeof *p->params);
  p->kernels = rt_alloc(c->a, (nk + 1) * sizeof *p->kernels);
  p->kernel_slots = rt_alloc(c->a, (nk + 1) * sizeof *p->kernel_slots);
  if (!p->params || !p->kernels || !p->kernel_slots) {
    c->err = rt_oom("a program", np * sizeof *p->params);
    return false;
  }
  const cJSON *jq;
  cJSON_ArrayForEach(jq, params) {
    rt_param *q = &p->params[p->nparams++];
    char *kind = NULL;
    if (!cJSON_IsObject(jq)) return bad(c, NULL, "program '%s': params must be objects", p->name);
    if (!get_str(c, jq, "name", NULL, &q->name) || !get_str(c, jq, "kind", NULL, &kind))
      return false;
    q->is_buffer = !strcmp(kind, "buffer");
    rt_free(c->a, kind);
    if (!get_opt_str(c, jq, "dtype", NULL, &q->dtype)) return false;
    const cJSON *jout = cJSON_GetObjectItemCaseSensitive(jq, "output");
    q->output = cJSON_IsTrue(jout);
    const cJSON *shape = cJSON_GetObjectItemCaseSensitive(jq, "shape");
    if (q->is_buffer && cJSON_IsArray(shape)) {
      size_t rank = (size_t)cJSON_GetArraySize(shape);
      q->shape = rt_alloc(c->a, (rank + 1) * sizeof *q->shape);
      q->shape_x = rt_alloc(c->a, (rank + 1) * sizeof *q->shape_x);
      if (!q->shape || !q->shape_x) { /* rank stays 0: the destructor walks rank entries */
        c->err = rt_oom("a shape", (rank + 1) * sizeof *q->shape);
        return false;
      }
      q->rank = rank;
      for (size_t i = 0; i < q->rank; i++) {
        const cJSON *d = cJSON_GetArrayItem(shape, (int)i);
        if (!get_expr(c, d, "shape entries", NULL, &q->shape[i]) ||
            !get_compiled(c, d, "shape entries", NULL, &p->vars, &q->shape_x[i]))
          return false;
      }
    }
  }
  const cJSON *jn;
  cJSON_ArrayForEach(jn, kernels) {
    if (!cJSON_IsString(jn))
      return bad(c, NULL, "program '%s': 'kernels' must list kernel names", p->name);
    rx_rt_kernel *found = NULL;
    for (size_t i = 0; i < l->nkernels; i++)
      if (!strcmp(l->kernels[i].name, jn->valuestring)) found = &l->kernels[i];
    if (!found)
      return bad(c, NULL, "program '%s' lists kernel '%s', which 'kernels' does not describe",
                 p->name, jn->valuestring);
    for (size_t i = 0; i < found->nbuffers; i++)
      if (!found->buffers[i].error && (size_t)found->buffers[i].param >= np)
        return bad(c, found->name, "buffer '%s' refers to param %d, but program '%s' has %zu",
                   found->buffers[i].name, found->buffers[i].param, p->name, np);
    /* the kernel's variables among the program's */
    uint32_t *slots = rt_alloc(c->a, (found->vars.count + 1) * sizeof *slots);
    if (!slots) {
      c->err = rt_oom("a program's variables", found->vars.count * sizeof *slots);
      return false;
    }
    p->kernel_slots[p->nkernels] = slots;
    p->kernels[p->nkernels++] = found;
    for (uint32_t i = 0; i < found->vars.count; i++) {
      const char *v = found->vars.names[i];
      if ((slots[i] = rt_names_slot(&p->vars, v, strlen(v))) == RT_NO_SLOT) {
        c->err = rt_oom("a program's variables", strlen(v));
        return false;
      }
    }
  }
  if (p->vars.count > RT_MAX_PROGRAM_VARS)
    return bad(c, NULL, "program '%s': %u symbolic variables, at most %d", p->name, p->vars.count,
               RT_MAX_PROGRAM_VARS);
  return true;
}

void rt_library_destroy(rx_rt_library *l) {
  if (!l) return;
  const rx_rt_allocator *a = &l->device->alloc;
  for (size_t i = 0; i < l->nkernels; i++) {
    rx_rt_kernel *k = &l->kernels[i];
    if (k->impl) l->device->be->kernel_destroy(l->device, k);
    rt_free(a, k->name);
    rt_free(a, k->program);
    rt_expr_free(a, k->cond);
    for (int j = 0; j < 3; j++) rt_expr_free(a, k->grid[j]);
    for (size_t j = 0; j < k->nbuffers; j++) {
      rt_free(a, k->buffers[j].name);
      rt_free(a, k->buffers[j].dtype);
    }
    for (size_t j = 0; j < k->nscalars; j++) {
      rt_free(a, k->scalars[j].name);
      rt_expr_free(a, k->scalars[j].value);
    }
    for (size_t j = 0; j < k->nchecks; j++) rt_free(a, k->checks[j].message);
    rt_free(a, k->checks);
    rt_names_free(&k->vars);
    rt_free(a, k->buffers);
    rt_free(a, k->scalars);
    rt_free(a, k->binary);
    rt_free(a, k->binary_name);
    rt_free(a, k->ptx);
    rt_free(a, k->source);
  }
  for (size_t i = 0; i < l->nprograms; i++) {
    rt_program *p = &l->programs[i];
    for (size_t j = 0; j < p->nparams; j++) {
      rt_free(a, p->params[j].name);
      rt_free(a, p->params[j].dtype);
      for (size_t r = 0; r < p->params[j].rank; r++) {
        rt_free(a, p->params[j].shape[r]);
        rt_expr_free(a, p->params[j].shape_x[r]);
      }
      rt_free(a, p->params[j].shape);
      rt_free(a, p->params[j].shape_x);
    }
    for (size_t j = 0; j < p->nkernels; j++) rt_free(a, p->kernel_slots[j]);
    rt_free(a, p->kernel_slots);
    rt_names_free(&p->vars);
    rt_free(a, p->params);
    rt_free(a, p->kernels);
    rt_free(a, p->name);
  }
  rx_rt_buffer_release(l->err);
  rt_free(a, l->kernels);
  rt_free(a, l->programs);
  rt_free(a, l->origin);
  rt_free(a, l->target);
  rt_free(a, l->lang);
  rx_rt_device *d = l->device;
  rt_free(a, l);
  rx_rt_device_release(d);
}

rx_status rt_library_parse(rx_rt_device *d, const char *origin, const char *json, size_t len,
                           const char *dir, const rx_rt_blob *blobs, size_t nblobs,
                           rx_rt_library **out_library) {
  *out_library = NULL;
  lctx c = {d, &d->alloc, origin, dir, blobs, nblobs, NULL};
  const char *end = NULL;
  cJSON *root = cJSON_ParseWithLengthOpts(json, len, &end, false);
  if (!root) {
    size_t off = end && end >= json ? (size_t)(end - json) : 0;
    size_t line = 1, col = 1;
    for (size_t i = 0; i < off && i < len; i++) {
      if (json[i] == '\n')
        line++, col = 1;
      else
        col++;
    }
    return base_status_make(RX_ERR_INVALID, "%s/kernels.json:%zu:%zu: malformed JSON", origin, line,
                            col);
  }
  rx_rt_library *l = rt_alloc(c.a, sizeof *l);
  if (!l) {
    cJSON_Delete(root);
    return rt_oom("a library", sizeof *l);
  }
  l->refs = 1;
  l->device = d;
  rx_rt_device_retain(d);
  if (!dup_str(&c, origin, &l->origin)) goto done;
  const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(root, "format");
  if (!cJSON_IsObject(root) || !cJSON_IsString(fmt) || strcmp(fmt->valuestring, "relaxc-kernels")) {
    bad(&c, NULL, "not a kernel description: expected \"format\": \"relaxc-kernels\"");
    goto done;
  }
  int64_t version;
  if (!get_int(&c, root, "version", NULL, 0, INT32_MAX, &version)) goto done;
  if (version != 1) {
    c.err = base_status_make(RX_ERR_UNSUPPORTED,
                             "%s/kernels.json: version %lld, this runtime reads "
                             "version 1",
                             origin, (long long)version);
    goto done;
  }
  if (!get_str(&c, root, "target", NULL, &l->target) ||
      !get_opt_str(&c, root, "lang", NULL, &l->lang))
    goto done;
  const char *bn = rx_rt_backend_name(d->info.backend);
  if (strncmp(l->target, bn, strlen(bn)) != 0) {
    c.err = base_status_make(RX_ERR_INVALID,
                             "%s/kernels.json: kernels for target '%s' cannot run "
                             "on a %s device (%s)",
                             origin, l->target, bn, d->info.name);
    goto done;
  }
  const cJSON *kernels = cJSON_GetObjectItemCaseSensitive(root, "kernels");
  const cJSON *programs = cJSON_GetObjectItemCaseSensitive(root, "programs");
  if (!cJSON_IsArray(kernels)) {
    bad(&c, NULL, "'kernels' must be an array");
    goto done;
  }
  if (programs && !cJSON_IsArray(programs)) {
    bad(&c, NULL, "'programs' must be an array");
    goto done;
  }
  size_t nk = (size_t)cJSON_GetArraySize(kernels), np = (size_t)cJSON_GetArraySize(programs);
  l->kernels = rt_alloc(c.a, (nk + 1) * sizeof *l->kernels);
  l->programs = rt_alloc(c.a, (np + 1) * sizeof *l->programs);
  if (!l->kernels || !l->programs) {
    c.err = rt_oom("kernel descriptions", nk * sizeof *l->kernels);
    goto done;
  }
  const cJSON *jk;
  cJSON_ArrayForEach(jk, kernels) {
    rx_rt_kernel *k = &l->kernels[l->nkernels++];
    k->library = l;
    if (!parse_kernel(&c, jk, k)) goto done;
    for (size_t i = 0; i + 1 < l->nkernels; i++)
      if (!strcmp(l->kernels[i].name, k->name)) {
        bad(&c, k->name, "described twice");
        goto done;
      }
  }
  const cJSON *jp;
  if (programs) cJSON_ArrayForEach(jp, programs) {
      if (!parse_program(&c, jp, &l->programs[l->nprograms++], l)) goto done;
    }
  for (size_t i = 0; i < l->nkernels && !c.err; i++) {
    rx_rt_kernel *k = &l->kernels[i];
    rx_status s = d->be->kernel_create(d, k);
    if (s) c.err = base_status_annotate(s, "%s: kernel '%s'", origin, k->name);
  }
done:
  cJSON_Delete(root);
  if (c.err) {
    rt_library_destroy(l);
    return c.err;
  }
  *out_library = l;
  return NULL;
}

/* ---- programs and their parameters ---- */

size_t rx_rt_library_program_count(const rx_rt_library *l) { return l ? l->nprograms : 0; }

const char *rx_rt_library_program_name(const rx_rt_library *l, size_t i) {
  return l && i < l->nprograms ? l->programs[i].name : NULL;
}

rx_status rx_rt_library_program_params(const rx_rt_library *l, const char *program,
                                       rx_rt_program_param *out_params, size_t max,
                                       size_t *out_count) {
  *out_count = 0;
  for (size_t p = 0; l && p < l->nprograms; p++) {
    const rt_program *pr = &l->programs[p];
    if (strcmp(pr->name, program) != 0) continue;
    for (size_t i = 0; i < pr->nparams && i < max; i++) {
      const rt_param *q = &pr->params[i];
      out_params[i] = (rx_rt_program_param){.name = q->name,
                                            .is_buffer = q->is_buffer,
                                            .output = q->output,
                                            .dtype = q->dtype,
                                            .rank = q->rank,
                                            .shape = (const char *const *)q->shape};
    }
    *out_count = pr->nparams;
    return NULL;
  }
  return base_status_make(RX_ERR_NOT_FOUND, "%s: no program '%s'", l ? l->origin : "(null)",
                          program);
}

/* ---- running kernels and programs over symbolic values (compiled at load) ---- */
rt_program *rt_library_program(const rx_rt_library *l, const char *name) {
  for (size_t i = 0; i < l->nprograms; i++)
    if (!strcmp(l->programs[i].name, name)) return &l->programs[i];
  return NULL;
}

static rx_status kernel_eval(const rx_rt_kernel *k, const char *what, const rt_expr *x,
                             const int64_t *values, const uint8_t *bound, int64_t *out) {
  return base_status_annotate(rt_expr_eval(x, values, bound, out), "kernel '%s': %s", k->name,
                              what);
}

/* Launches k with the values of its variables (over k->vars); *out_launched is false when its
 * condition does not hold. */
static rx_status launch_values(rx_rt_kernel *k, rx_rt_buffer *const *buffers, size_t buffer_count,
                               const int64_t *values, const uint8_t *bound, bool *out_launched) {
  *out_launched = false;
  if (k->cond) {
    int64_t c = 0;
    RX_RETURN_IF_ERROR(kernel_eval(k, "condition", k->cond, values, bound, &c));
    if (!c) return NULL;
  }
  rx_rt_launch_params p = {
      {0, 0, 0}, {k->block[0], k->block[1], k->block[2]}, buffers, buffer_count, NULL, k->nscalars};
  for (int i = 0; i < 3; i++) {
    int64_t g = 0;
    RX_RETURN_IF_ERROR(kernel_eval(k, "grid", k->grid[i], values, bound, &g));
    if (g < 0 || g > INT32_MAX)
      return base_status_make(RX_ERR_INVALID,
                              "kernel '%s': grid[%d] = %s = %lld is outside "
                              "0..2147483647",
                              k->name, i, rt_expr_text(k->grid[i]), (long long)g);
    p.grid[i] = (uint32_t)g;
  }
  int32_t vals[64];
  if (k->nscalars > RX_ARRAY_LEN(vals))
    return base_status_make(RX_ERR_UNSUPPORTED, "kernel '%s': more than 64 symbolic values",
                            k->name);
  for (size_t i = 0; i < k->nscalars; i++) {
    int64_t v = 0;
    RX_RETURN_IF_ERROR(kernel_eval(k, "symbolic value", k->scalars[i].value, values, bound, &v));
    if (v < INT32_MIN || v > INT32_MAX)
      return base_status_make(RX_ERR_INVALID,
                              "kernel '%s': symbolic value %s = %lld does not fit "
                              "in int32 (the kernel ABI)",
                              k->name, k->scalars[i].name, (long long)v);
    vals[i] = (int32_t)v;
  }
  p.scalars = vals;
  RX_RETURN_IF_ERROR(rx_rt_kernel_launch(k, &p));
  *out_launched = true;
  return NULL;
}

rx_status rx_rt_kernel_launch_symbols(rx_rt_kernel *k, rx_rt_buffer *const *buffers,
                                      size_t buffer_count, const rx_rt_symbols *symbols,
                                      bool *out_launched) {
  bool launched = false;
  int64_t values[RT_MAX_KERNEL_VARS];
  uint8_t bound[RT_MAX_KERNEL_VARS];
  rt_symbols_gather(symbols, &k->vars, values, bound);
  rx_status s = launch_values(k, buffers, buffer_count, values, bound, &launched);
  if (out_launched) *out_launched = launched;
  return s;
}

static size_t dtype_bytes(const char *dtype) {
  static const struct {
    const char *name;
    size_t bytes;
  } t[] = {{"f32", 4}, {"f16", 2}, {"bf16", 2}, {"i64", 8}, {"i32", 4},
           {"i16", 2}, {"i8", 1},  {"u8", 1},   {"bool", 1}};
  for (size_t i = 0; dtype && i < RX_ARRAY_LEN(t); i++)
    if (!strcmp(dtype, t[i].name)) return t[i].bytes;
  return 0;
}

/* Each buffer parameter's buffer holds its shape at these values. */
static rx_status check_params(const rt_program *p, rx_rt_buffer *const *buffers,
                              const int64_t *values, const uint8_t *bound) {
  for (size_t i = 0; i < p->nparams; i++) {
    const rt_param *q = &p->params[i];
    if (!q->is_buffer) continue;
    if (!buffers[i])
      return base_status_make(RX_ERR_INVALID, "program '%s': parameter '%s' is NULL", p->name,
                              q->name);
    size_t esz = dtype_bytes(q->dtype);
    if (!esz || !q->shape) continue;
    int64_t elems = 1;
    for (size_t r = 0; r < q->rank; r++) {
      int64_t dim = 0;
      RX_RETURN_IF_ERROR(base_status_annotate(rt_expr_eval(q->shape_x[r], values, bound, &dim),
                                              "program '%s': shape of '%s'", p->name, q->name));
      if (dim < 0)
        return base_status_make(RX_ERR_INVALID,
                                "program '%s': parameter '%s' has a dimension "
                                "%s = %lld",
                                p->name, q->name, q->shape[r], (long long)dim);
      if (!base_mul_count(elems, dim, &elems))
        return base_status_make(RX_ERR_INVALID,
                                "program '%s': the element count of parameter '%s' "
                                "overflows (dimension %s = %lld)",
                                p->name, q->name, q->shape[r], (long long)dim);
    }
    if ((uint64_t)elems > buffers[i]->size / esz)
      return base_status_make(RX_ERR_INVALID,
                              "program '%s': parameter '%s' needs %lld elements of "
                              "%s, the buffer holds %zu bytes",
                              p->name, q->name, (long long)elems, q->dtype, buffers[i]->size);
  }
  return NULL;
}

/* The library's error buffer (device.h, rx_rt_library.err), allocated and zeroed when first
 * needed. */
static rx_status error_buffer(rx_rt_library *l, rx_rt_buffer **out) {
  if (!l->err) {
    rx_rt_buffer *b = NULL;
    RX_RETURN_IF_ERROR(rx_rt_buffer_alloc(l->device, RX_CHECK_WORDS * 4, &b));
    rx_status s = rx_rt_buffer_fill(b, 0, RX_CHECK_WORDS * 4, 0);
    if (s) {
      rx_rt_buffer_release(b);
      return s;
    }
    l->err = b;
  }
  *out = l->err;
  return NULL;
}

rx_status rx_rt_library_check(rx_rt_library *l) {
  if (!l || !l->err_pending || !l->err) return NULL;
  l->err_pending = false;
  int32_t w[RX_CHECK_WORDS] = {0};
  RX_RETURN_IF_ERROR(rx_rt_buffer_read(l->err, 0, w, sizeof w));
  if (!w[0]) return NULL;
  RX_RETURN_IF_ERROR(rx_rt_buffer_fill(l->err, 0, sizeof w, 0));
  int64_t value = (int64_t)(((uint64_t)(uint32_t)w[2] << 32) | (uint32_t)w[1]);
  for (size_t i = 0; i < l->nkernels; i++)
    for (size_t j = 0; j < l->kernels[i].nchecks; j++)
      if (l->kernels[i].checks[j].code == w[0]) {
        char *m = base_check_format(l->kernels[i].checks[j].message, value);
        rx_status s =
            base_status_make(RX_ERR_INVALID, "%s", m ? m : l->kernels[i].checks[j].message);
        free(m);
        return s;
      }
  return base_status_make(RX_ERR_INVALID,
                          "%s: a run-time check failed with code %d (value %lld), which no kernel "
                          "of the library lists",
                          l->origin, (int)w[0], (long long)value);
}

rx_status rt_program_run(rt_program *p, rx_rt_buffer *const *buffers, size_t buffer_count,
                         const int64_t *values, const uint8_t *bound) {
  if (buffer_count != p->nparams)
    return base_status_make(RX_ERR_INVALID, "program '%s' takes %zu parameters, got %zu", p->name,
                            p->nparams, buffer_count);
  RX_RETURN_IF_ERROR(check_params(p, buffers, values, bound));
  for (size_t j = 0; j < p->nkernels; j++) {
    rx_rt_kernel *k = p->kernels[j];
    rx_rt_buffer *kb[64];
    int64_t kv[RT_MAX_KERNEL_VARS];
    uint8_t kbound[RT_MAX_KERNEL_VARS];
    if (k->nbuffers > RX_ARRAY_LEN(kb))
      return base_status_make(RX_ERR_UNSUPPORTED, "kernel '%s': more than 64 buffers", k->name);
    for (size_t i = 0; i < k->nbuffers; i++) {
      if (k->buffers[i].error) {
        RX_RETURN_IF_ERROR(error_buffer(k->library, &kb[i]));
        k->library->err_pending = true;
      } else {
        kb[i] = buffers[k->buffers[i].param];
      }
    }
    for (uint32_t i = 0; i < k->vars.count; i++) {
      kv[i] = values[p->kernel_slots[j][i]];
      kbound[i] = bound[p->kernel_slots[j][i]];
    }
    bool launched = false;
    RX_RETURN_IF_ERROR(launch_values(k, kb, k->nbuffers, kv, kbound, &launched));
  }
  return NULL;
}

rx_status rx_rt_library_run(rx_rt_library *l, const char *program, rx_rt_buffer *const *buffers,
                            size_t buffer_count, const rx_rt_symbols *symbols) {
  rt_program *p = rt_library_program(l, program);
  if (!p)
    return base_status_make(RX_ERR_NOT_FOUND, "%s: no program named '%s'", l->origin, program);
  int64_t values[RT_MAX_PROGRAM_VARS];
  uint8_t bound[RT_MAX_PROGRAM_VARS];
  rt_symbols_gather(symbols, &p->vars, values, bound);
  return rt_program_run(p, buffers, buffer_count, values, bound);
}
