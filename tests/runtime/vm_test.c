/* tests/runtime/vm_test.c: artifacts (.rxm) and the VM that runs their host programs.
 *
 * The compiler side (host lowering, the artifact writer) is tested elsewhere; here artifacts are
 * built by hand: a tiny assembler writes host programs word by word (runtime/vm_format.h), and
 * the kernels are the hand-written GLSL of tests/runtime/kernels compiled to SPIR-V at build time
 * with their kernels.json. Runs on Vulkan (lavapipe in CI) under the validation layer; the
 * container and bytecode checks need no device and run everywhere.
 * Usage: rt_vm_test KERNEL_DIR */
#include <stdint.h>
#include <stdlib.h>

#include "../unit/check.h"
#include "relaxc/runtime.h"
#include "runtime/vm_format.h"

static const char *g_dir;

/* ---- a tiny assembler ---- */
typedef struct words {
  uint32_t *w;
  size_t n, cap;
} words;

static void put(words *c, uint32_t x) {
  if (c->n == c->cap) {
    c->cap = c->cap ? 2 * c->cap : 64;
    c->w = realloc(c->w, c->cap * sizeof *c->w);
  }
  c->w[c->n++] = x;
}

#define NONE 0xffffffffu

typedef struct prog {
  const char *strs[256];
  uint32_t nstr;
  struct {
    uint32_t name, nparams, nregs;
    words code;
    const char *regs[64]; /* register names (NULL: "", a temporary) */
  } fns[16];
  uint32_t nfns;
  uint32_t version; /* of the host program; 0: RXVM_VERSION */
} prog;

/* The id of a string (interned). */
static uint32_t S(prog *p, const char *s) {
  for (uint32_t i = 0; i < p->nstr; i++)
    if (!strcmp(p->strs[i], s)) return i;
  p->strs[p->nstr] = s;
  return p->nstr++;
}

/* Starts a function; returns its code. */
static words *fn(prog *p, const char *name, uint32_t nparams, uint32_t nregs) {
  uint32_t i = p->nfns++;
  p->fns[i].name = S(p, name);
  p->fns[i].nparams = nparams;
  p->fns[i].nregs = nregs;
  return &p->fns[i].code;
}

/* Names register r of the function being built (the binding it holds, for messages). */
static void reg_name(prog *p, uint32_t r, const char *name) { p->fns[p->nfns - 1].regs[r] = name; }

/* Instructions. */
static void i_check(prog *p, words *c, uint32_t reg, uint32_t param, const char *name,
                    const char *expected, rx_dtype dt, uint32_t ndim) {
  put(c, RXVM_OP_CHECK_TENSOR), put(c, reg), put(c, param), put(c, S(p, name));
  put(c, S(p, expected)), put(c, (uint32_t)dt), put(c, ndim);
}
static void d_bind(prog *p, words *c, const char *n) { put(c, RXVM_DIM_BIND), put(c, S(p, n)); }
static void d_expr(prog *p, words *c, const char *e) { put(c, RXVM_DIM_EXPR), put(c, S(p, e)); }
static void d_const(words *c, int64_t v) {
  put(c, RXVM_DIM_CONST), put(c, (uint32_t)(uint64_t)v), put(c, (uint32_t)((uint64_t)v >> 32));
}
static void i_assert(prog *p, words *c, const char *e, const char *msg) {
  put(c, RXVM_OP_ASSERT), put(c, S(p, e)), put(c, S(p, msg));
}
static void i_storage(prog *p, words *c, uint32_t st, const char *bytes) {
  put(c, RXVM_OP_ALLOC_STORAGE), put(c, st), put(c, S(p, bytes));
}
static void i_tensor1(prog *p, words *c, uint32_t dst, uint32_t st, const char *off, rx_dtype dt,
                      const char *dim) {
  put(c, RXVM_OP_ALLOC_TENSOR), put(c, dst), put(c, st), put(c, S(p, off)), put(c, (uint32_t)dt);
  put(c, 1), put(c, S(p, dim));
}
/* call_kernels saxpy a b c with n = expr */
static void i_saxpy(prog *p, words *c, uint32_t a, uint32_t b, uint32_t out, const char *n) {
  put(c, RXVM_OP_CALL_KERNELS), put(c, S(p, "saxpy")), put(c, 3), put(c, a), put(c, b), put(c, out);
  put(c, 1), put(c, S(p, "n")), put(c, S(p, n));
}
static void i_ret(words *c, uint32_t r) { put(c, RXVM_OP_RET), put(c, r); }

static void put_str(words *o, const char *s) {
  uint32_t len = (uint32_t)strlen(s);
  put(o, len);
  for (uint32_t i = 0; i < len; i += 4) {
    uint32_t x = 0;
    for (uint32_t k = 0; k < 4 && i + k < len; k++) x |= (uint32_t)(uint8_t)s[i + k] << (8 * k);
    put(o, x);
  }
}

/* The host.rxvm section, little-endian bytes. */
static uint8_t *host_bytes(prog *p, size_t *out_size) {
  uint32_t version = p->version ? p->version : RXVM_VERSION;
  uint32_t names[16][64] = {{0}};
  for (uint32_t i = 0; i < p->nfns && version >= 3; i++)
    for (uint32_t r = 0; r < p->fns[i].nregs && r < 64; r++)
      names[i][r] = S(p, p->fns[i].regs[r] ? p->fns[i].regs[r] : "");
  words o = {0};
  put(&o, RXVM_MAGIC), put(&o, version), put(&o, p->nstr);
  for (uint32_t i = 0; i < p->nstr; i++) put_str(&o, p->strs[i]);
  put(&o, p->nfns);
  for (uint32_t i = 0; i < p->nfns; i++) {
    put(&o, p->fns[i].name), put(&o, p->fns[i].nparams), put(&o, p->fns[i].nregs);
    put(&o, (uint32_t)p->fns[i].code.n);
    for (size_t j = 0; j < p->fns[i].code.n; j++) put(&o, p->fns[i].code.w[j]);
    for (uint32_t r = 0; r < p->fns[i].nregs && version >= 3; r++)
      put(&o, r < 64 ? names[i][r] : names[i][0]);
  }
  uint8_t *b = malloc(o.n * 4 + 1);
  for (size_t i = 0; i < o.n; i++)
    for (int k = 0; k < 4; k++) b[4 * i + k] = (uint8_t)(o.w[i] >> (8 * k));
  *out_size = o.n * 4;
  free(o.w);
  return b;
}

static void prog_free(prog *p) {
  for (uint32_t i = 0; i < p->nfns; i++) free(p->fns[i].code.w);
}

/* ---- the container ---- */
typedef struct section {
  const char *name;
  const void *data;
  size_t size;
} section;

static void le32(uint8_t *p, uint32_t x) {
  for (int k = 0; k < 4; k++) p[k] = (uint8_t)(x >> (8 * k));
}
static void le64(uint8_t *p, uint64_t x) {
  le32(p, (uint32_t)x);
  le32(p + 4, (uint32_t)(x >> 32));
}

static uint8_t *container(const section *s, size_t n, uint32_t version, size_t *out_size) {
  size_t total = 16 + n * 88;
  for (size_t i = 0; i < n; i++) total += s[i].size;
  uint8_t *b = calloc(1, total + 1);
  le32(b, RXM_MAGIC), le32(b + 4, version), le32(b + 8, (uint32_t)n);
  size_t off = 16 + n * 88;
  for (size_t i = 0; i < n; i++) {
    uint8_t *e = b + 16 + i * 88;
    memcpy(e, s[i].name, strlen(s[i].name));
    le64(e + 64, off), le64(e + 72, s[i].size);
    le32(e + 80, rx_rt_crc32(0, s[i].data, s[i].size));
    if (s[i].size) memcpy(b + off, s[i].data, s[i].size);
    off += s[i].size;
  }
  *out_size = total;
  return b;
}

static char *read_file(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  *len = 0;
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *p = calloc(1, (size_t)n + 1);
  if (fread(p, 1, (size_t)n, f) != (size_t)n) n = 0;
  fclose(f);
  *len = (size_t)n;
  return p;
}

static const char *k_manifest =
    "{\"format\": \"relaxc-artifact\", \"version\": 1, \"compiler\": \"hand-written test\", "
    "\"targets\": [\"vulkan\"], \"functions\": [{\"name\": \"main\"}]}";

/* The kernels of tests/runtime/kernels: kernels.json and the SPIR-V files. */
static char *g_kjson, *g_spv[3];
static size_t g_kjson_len, g_spv_len[3];
static const char *const g_spv_names[3] = {"saxpy.spv", "saxpy_ubo.spv", "scale_add.spv"};

/* An artifact of the program with the test kernels under prefix ("vulkan", "cuda"; NULL: none). */
static uint8_t *artifact(prog *p, const char *prefix, uint32_t version, size_t *out_size) {
  size_t hsize = 0;
  uint8_t *host = host_bytes(p, &hsize);
  section s[8];
  size_t n = 0;
  s[n++] = (section){"manifest.json", k_manifest, strlen(k_manifest)};
  s[n++] = (section){"host.rxvm", host, hsize};
  char names[4][64];
  if (prefix && g_kjson) {
    snprintf(names[0], 64, "%s/kernels.json", prefix);
    s[n++] = (section){names[0], g_kjson, g_kjson_len};
    for (int i = 0; i < 3; i++) {
      snprintf(names[i + 1], 64, "%s/%s", prefix, g_spv_names[i]);
      s[n++] = (section){names[i + 1], g_spv[i], g_spv_len[i]};
    }
  }
  uint8_t *b = container(s, n, version, out_size);
  free(host);
  return b;
}

/* main(x: f32[n]) -> f32[n] where n <= 4096: y = 2 * x + x in planned storage. */
static void build_main(prog *p) {
  words *c = fn(p, "main", 1, 4);
  i_check(p, c, 0, 0, "x", "f32[n]", RX_DTYPE_F32, 1);
  d_bind(p, c, "n");
  i_assert(p, c, "n <= 4096", "n <= 4096");
  i_storage(p, c, 1, "16384");
  i_tensor1(p, c, 2, 1, "0", RX_DTYPE_F32, "n");
  i_saxpy(p, c, 0, 0, 2, "n");
  i_ret(c, 2);
}

/* pair(x: f32[n], y: f32[n]): calls main, branches on n > 5, builds tuples and shapes:
 * returns (z, (z, shape(2n, n + 1), n > 5)) with z = 6x + y (n > 5) or 2y + 3x (else). */
static void build_pair(prog *p) {
  words *c = fn(p, "pair", 2, 12);
  i_check(p, c, 0, 0, "x", "f32[n]", RX_DTYPE_F32, 1);
  d_bind(p, c, "n");
  i_check(p, c, 1, 1, "y", "f32[n]", RX_DTYPE_F32, 1);
  d_bind(p, c, "n");
  put(c, RXVM_OP_CALL_FN), put(c, 2), put(c, 0), put(c, 1), put(c, 0); /* r2 = main(r0) */
  put(c, RXVM_OP_DEFINE), put(c, S(p, "k")), put(c, S(p, "n * 2"));
  put(c, RXVM_OP_PRIM), put(c, 3), put(c, RX_DTYPE_BOOL), put(c, S(p, "n > 5"));
  put(c, RXVM_OP_JUMP_IF_NOT), put(c, 3);
  size_t patch_else = c->n;
  put(c, 0);
  i_tensor1(p, c, 4, NONE, "0", RX_DTYPE_F32, "n");
  i_saxpy(p, c, 2, 1, 4, "n");
  put(c, RXVM_OP_JUMP);
  size_t patch_end = c->n;
  put(c, 0);
  c->w[patch_else] = (uint32_t)c->n;
  i_tensor1(p, c, 4, NONE, "0", RX_DTYPE_F32, "n");
  i_saxpy(p, c, 1, 2, 4, "n");
  c->w[patch_end] = (uint32_t)c->n;
  put(c, RXVM_OP_SHAPE), put(c, 5), put(c, 2), put(c, S(p, "k")), put(c, S(p, "n + 1"));
  put(c, RXVM_OP_TUPLE), put(c, 6), put(c, 3), put(c, 4), put(c, 5), put(c, 3);
  put(c, RXVM_OP_GET_ITEM), put(c, 7), put(c, 6), put(c, 0);
  put(c, RXVM_OP_MATCH_CAST), put(c, 8), put(c, 7), put(c, S(p, "f32[k // 2]")),
      put(c, RX_DTYPE_F32);
  put(c, 1), d_expr(p, c, "k // 2");
  put(c, RXVM_OP_MOVE), put(c, 9), put(c, 8);
  put(c, RXVM_OP_FREE), put(c, 7);
  put(c, RXVM_OP_TUPLE), put(c, 10), put(c, 2), put(c, 9), put(c, 6);
  i_ret(c, 10);
}

/* More functions: matrix(a: f32[n, 4]) checks a constant dim; grow(x: f32[n]) sizes its storage
 * by n (a later, larger call grows it); ext calls an extern; axpy uses a scalar parameter and a
 * program variable given by a different expression; nothing falls off its end. */
static void build_more(prog *p) {
  words *c = fn(p, "matrix", 1, 2);
  i_check(p, c, 0, 0, "a", "f32[n, 4]", RX_DTYPE_F32, 2);
  d_bind(p, c, "n");
  d_const(c, 4);
  i_ret(c, 0);

  c = fn(p, "grow", 1, 3);
  reg_name(p, 0, "x"), reg_name(p, 1, "storage 0"), reg_name(p, 2, "y");
  i_check(p, c, 0, 0, "x", "f32[n]", RX_DTYPE_F32, 1);
  d_bind(p, c, "n");
  i_storage(p, c, 1, "n * 4");
  i_tensor1(p, c, 2, 1, "0", RX_DTYPE_F32, "n");
  i_saxpy(p, c, 0, 0, 2, "n");
  i_tensor1(p, c, 2, 1, "4", RX_DTYPE_F32, "n"); /* does not fit: n * 4 bytes at offset 4 */
  i_ret(c, 2);

  c = fn(p, "ext", 1, 2);
  put(c, RXVM_OP_CALL_EXTERN), put(c, S(p, "cublas_gemm")), put(c, 1), put(c, 0);
  i_ret(c, 0);

  c = fn(p, "axpy", 1, 3);
  i_check(p, c, 0, 0, "x", "f32[2 * h]", RX_DTYPE_F32, 1);
  d_expr(p, c, "2 * h"); /* h unbound: an evaluation error */
  i_ret(c, 0);

  c = fn(p, "scaled", 1, 3); /* c = -3 * x + x through the uniform-buffer kernel */
  i_check(p, c, 0, 0, "x", "f32[len]", RX_DTYPE_F32, 1);
  d_bind(p, c, "len");
  i_tensor1(p, c, 1, NONE, "0", RX_DTYPE_F32, "len");
  put(c, RXVM_OP_CALL_KERNELS), put(c, S(p, "axpy")), put(c, 4), put(c, 0), put(c, 0), put(c, NONE);
  put(c, 1), put(c, 2), put(c, S(p, "m")), put(c, S(p, "0 - 3")), put(c, S(p, "n")),
      put(c, S(p, "len"));
  i_ret(c, 1);

  c = fn(p, "cond", 1, 2); /* a condition read from the device: 1 if x[0] != 0, else 2 */
  reg_name(p, 0, "flag");
  put(c, RXVM_OP_JUMP_IF_NOT), put(c, 0), put(c, 9);
  put(c, RXVM_OP_PRIM), put(c, 1), put(c, RX_DTYPE_I64), put(c, S(p, "1"));
  i_ret(c, 1);
  put(c, RXVM_OP_PRIM), put(c, 1), put(c, RX_DTYPE_I64), put(c, S(p, "2"));
  i_ret(c, 1);

  c = fn(p, "noret", 0, 1);
  put(c, RXVM_OP_PRIM), put(c, 0), put(c, RX_DTYPE_I64), put(c, S(p, "1"));
}

static void build_all(prog *p) {
  memset(p, 0, sizeof *p);
  build_main(p);
  build_pair(p);
  build_more(p);
}

/* ---- tests that need no device ---- */
static void test_crc(void) {
  CHECK_MSG(rx_rt_crc32(0, "123456789", 9) == 0xCBF43926u, "crc32 check value: 0x%08x",
            rx_rt_crc32(0, "123456789", 9));
  CHECK_MSG(rx_rt_crc32(0, "", 0) == 0, "crc32 of nothing");
  CHECK_MSG(rx_rt_crc32(rx_rt_crc32(0, "1234", 4), "56789", 5) == 0xCBF43926u, "crc32 chained");
  CHECK_MSG(rx_rt_crc32(0, "The quick brown fox jumps over the lazy dog", 43) == 0x414FA339u,
            "crc32 of the fox");
}

static void test_container(void) {
  prog p;
  build_all(&p);
  size_t size = 0;
  uint8_t *b = artifact(&p, "vulkan", RXM_VERSION, &size);
  rx_rt_artifact *a = NULL;
  CHECK_OK(rx_rt_artifact_load_memory(NULL, b, size, "model.rxm", &a));
  if (a) {
    CHECK_MSG(rx_rt_artifact_function_count(a) == 9, "functions: %zu",
              rx_rt_artifact_function_count(a));
    CHECK_MSG(!strcmp(rx_rt_artifact_function_name(a, 0), "main"), "function 0");
    CHECK_MSG(!strcmp(rx_rt_artifact_targets(a), "vulkan"), "targets '%s'",
              rx_rt_artifact_targets(a));
    rx_rt_param_info pi;
    CHECK_MSG(rx_rt_artifact_function_param(a, 1, 1, &pi) && !strcmp(pi.name, "y") &&
                  !strcmp(pi.expected, "f32[n]") && pi.dtype == RX_DTYPE_F32 && pi.ndim == 1,
              "param info of pair.y: %s %s", pi.name, pi.expected);
    CHECK_MSG(!rx_rt_artifact_function_param(a, 0, 1, &pi), "param out of range");
    CHECK_MSG(rx_rt_artifact_function_fact_count(a, 0) == 1 &&
                  !strcmp(rx_rt_artifact_function_fact(a, 0, 0), "n <= 4096"),
              "facts of main");
    CHECK_MSG(rx_rt_artifact_function_storage_count(a, 0) == 1 &&
                  !strcmp(rx_rt_artifact_function_storage(a, 0, 0), "16384"),
              "storages of main");
    CHECK_MSG(rx_rt_artifact_section_count(a) == 6, "sections %zu",
              rx_rt_artifact_section_count(a));
    char *dis = rx_rt_artifact_disassemble(a, 1);
    CHECK_MSG(dis && strstr(dis, "call_fn r2 fn 0 (1) r0") && strstr(dis, "jump_if_not r3 @") &&
                  strstr(dis, "match_cast r8 r7 \"f32[k // 2]\" f32 [ expr \"k // 2\" ]"),
              "disassembly:\n%s", dis ? dis : "(null)");
    rx_rt_string_free(dis);
    rx_rt_tensor *none[1] = {NULL};
    rx_rt_value *r = NULL;
    CHECK_ERR(rx_rt_vm_call(a, "main", none, 1, &r), RX_ERR_INVALID, "loaded without a device");
    CHECK_ERR(rx_rt_vm_call(a, "foo", none, 1, &r), RX_ERR_NOT_FOUND,
              "no function 'foo' in model.rxm (functions: main, pair, matrix, grow, ext, axpy, "
              "scaled, cond, noret)");
  }
  rx_rt_artifact_release(a);
  a = NULL;

  /* a wrong version, a wrong magic */
  size_t vsize = 0;
  uint8_t *v7 = artifact(&p, "vulkan", 7, &vsize);
  CHECK_ERR(rx_rt_artifact_load_memory(NULL, v7, vsize, "model.rxm", &a), RX_ERR_UNSUPPORTED,
            "model.rxm: artifact version 7, this runtime reads version 1");
  v7[0] ^= 0x20;
  CHECK_ERR(rx_rt_artifact_load_memory(NULL, v7, vsize, "model.rxm", &a), RX_ERR_INVALID,
            "model.rxm: not a relaxc artifact");
  free(v7);

  /* every prefix is rejected, with a message saying it is truncated */
  int bad_prefix = 0;
  for (size_t n = 0; n < size; n++) {
    rx_status s = rx_rt_artifact_load_memory(NULL, b, n, "model.rxm", &a);
    if (!s || !strstr(rx_status_message(s), "truncated") || a) {
      if (!bad_prefix) printf("prefix %zu: %s\n", n, s ? rx_status_message(s) : "accepted");
      bad_prefix++;
    }
    rx_status_free(s);
    rx_rt_artifact_release(a);
    a = NULL;
  }
  CHECK_MSG(bad_prefix == 0, "%d of %zu prefixes were not rejected as truncated", bad_prefix, size);
  {
    /* the exact message: cut into host.rxvm (section 1) */
    const uint8_t *e = b + 16 + 88;
    uint64_t off = 0, len = 0;
    for (int k = 7; k >= 0; k--) off = off << 8 | e[64 + k], len = len << 8 | e[72 + k];
    char want[160];
    snprintf(want, sizeof want,
             "model.rxm: truncated: section 'host.rxvm' ends at byte %llu, "
             "file has %llu bytes",
             (unsigned long long)(off + len), (unsigned long long)(off + 5));
    CHECK_ERR(rx_rt_artifact_load_memory(NULL, b, (size_t)off + 5, "model.rxm", &a), RX_ERR_INVALID,
              want);
  }

  /* every byte of every section flipped: a CRC mismatch naming the section */
  size_t data_start = 16 + 6 * 88;
  int bad_flip = 0;
  for (size_t i = data_start; i < size; i++) {
    b[i] ^= 0x5a;
    rx_status s = rx_rt_artifact_load_memory(NULL, b, size, "model.rxm", &a);
    if (!s || !strstr(rx_status_message(s), "is corrupted: its CRC32 is")) {
      if (!bad_flip) printf("flip at %zu: %s\n", i, s ? rx_status_message(s) : "accepted");
      bad_flip++;
    }
    rx_status_free(s);
    rx_rt_artifact_release(a);
    a = NULL;
    b[i] ^= 0x5a;
  }
  CHECK_MSG(bad_flip == 0, "%d byte flips in the sections were not caught by the CRC", bad_flip);
  b[data_start + 3] ^= 1;
  CHECK_ERR(rx_rt_artifact_load_memory(NULL, b, size, "model.rxm", &a), RX_ERR_INVALID,
            "model.rxm: section 'manifest.json' is corrupted: its CRC32 is 0x");
  b[data_start + 3] ^= 1;
  /* a flipped byte in the header or the section table: rejected without a device too, except in
   * a kernel file's name (caught when the kernels load, see test_device_flips) */
  int table_ok = 0;
  for (size_t i = 0; i < data_start; i++) {
    b[i] ^= 0x01;
    rx_status s = rx_rt_artifact_load_memory(NULL, b, size, "model.rxm", &a);
    if (!s) table_ok++;
    rx_status_free(s);
    rx_rt_artifact_release(a);
    a = NULL;
    b[i] ^= 0x01;
  }
  printf("header/table flips accepted without a device: %d of %zu (kernel file names)\n", table_ok,
         data_start);
  CHECK_MSG(table_ok <= 4 * 64, "%d header/table flips accepted", table_ok);
  free(b);

  /* a malformed manifest, missing sections */
  size_t hsize = 0;
  uint8_t *host = host_bytes(&p, &hsize);
  section s2[2] = {{"manifest.json", "{\"functions\": [", 15}, {"host.rxvm", host, hsize}};
  b = container(s2, 2, RXM_VERSION, &size);
  CHECK_ERR(rx_rt_artifact_load_memory(NULL, b, size, "m.rxm", &a), RX_ERR_INVALID,
            "m.rxm: manifest.json:1:");
  free(b);
  b = container(s2 + 1, 1, RXM_VERSION, &size);
  CHECK_ERR(rx_rt_artifact_load_memory(NULL, b, size, "m.rxm", &a), RX_ERR_INVALID,
            "no section 'manifest.json'");
  free(b);
  section s3[3] = {{"manifest.json", "{}", 2}, {"host.rxvm", host, hsize}, {"host.rxvm", "", 0}};
  b = container(s3, 3, RXM_VERSION, &size);
  CHECK_ERR(rx_rt_artifact_load_memory(NULL, b, size, "m.rxm", &a), RX_ERR_INVALID,
            "section 'host.rxvm' appears twice");
  free(b);
  free(host);
  CHECK_ERR(rx_rt_artifact_load(NULL, "/nonexistent/model.rxm", &a), RX_ERR_NOT_FOUND,
            "cannot open '/nonexistent/model.rxm'");
  CHECK_MSG(a == NULL, "out_artifact must stay NULL on error");
  CHECK_ERR(rx_rt_artifact_load(NULL, "/", &a), RX_ERR_INVALID, "/: is a directory");
  CHECK_MSG(a == NULL, "out_artifact must stay NULL on error");
  prog_free(&p);
}

/* A program with one function whose code is given: loads (no device) and expects an error. */
static void expect_bad_code(const uint32_t *code, size_t n, uint32_t nparams, uint32_t nregs,
                            const char *want) {
  prog p;
  memset(&p, 0, sizeof p);
  words *c = fn(&p, "f", nparams, nregs);
  S(&p, "s0");
  S(&p, "s1");
  for (size_t i = 0; i < n; i++) put(c, code[i]);
  size_t size = 0;
  uint8_t *b = artifact(&p, NULL, RXM_VERSION, &size);
  rx_rt_artifact *a = NULL;
  CHECK_ERR(rx_rt_artifact_load_memory(NULL, b, size, "bad.rxm", &a), RX_ERR_INVALID, want);
  CHECK_MSG(a == NULL, "out_artifact must stay NULL");
  rx_rt_artifact_release(a);
  free(b);
  prog_free(&p);
}

/* A function asserting expr: loads (no device) and expects an error; then the same text as the
 * message of the assert (a string no instruction evaluates) loads. */
static void expect_bad_expr(const char *expr, const char *want) {
  for (int as_message = 0; as_message < 2; as_message++) {
    prog p;
    memset(&p, 0, sizeof p);
    words *c = fn(&p, "f", 0, 1);
    i_assert(&p, c, as_message ? "1" : expr, as_message ? expr : "a fact");
    i_ret(c, NONE);
    size_t size = 0;
    uint8_t *b = artifact(&p, NULL, RXM_VERSION, &size);
    rx_rt_artifact *a = NULL;
    if (as_message)
      CHECK_OK(rx_rt_artifact_load_memory(NULL, b, size, "bad.rxm", &a));
    else
      CHECK_ERR(rx_rt_artifact_load_memory(NULL, b, size, "bad.rxm", &a), RX_ERR_INVALID, want);
    rx_rt_artifact_release(a);
    free(b);
    prog_free(&p);
  }
}

static void test_bad_code(void) {
  /* strings: 0 "f", 1 "s0", 2 "s1" */
  const uint32_t op99[] = {99, 0};
  expect_bad_code(op99, 2, 0, 1, "bad.rxm: host.rxvm: function 'f': word 0 (?): unknown opcode 99");
  const uint32_t reg[] = {RXVM_OP_MOVE, 0, 5, RXVM_OP_RET, 0};
  expect_bad_code(reg, 5, 0, 2,
                  "word 0 (move): register 5 is out of range (the function has 2 "
                  "registers)");
  const uint32_t jump_out[] = {RXVM_OP_JUMP, 100, RXVM_OP_RET, NONE};
  expect_bad_code(jump_out, 4, 0, 1,
                  "word 0 (jump): jump target 100 is not the start of an "
                  "instruction");
  const uint32_t jump_mid[] = {RXVM_OP_PRIM, 0, RX_DTYPE_BOOL, 1, RXVM_OP_JUMP_IF_NOT, 0, 2,
                               RXVM_OP_RET,  0};
  expect_bad_code(jump_mid, 9, 0, 1, "word 4 (jump_if_not): jump target 2 is not the start");
  const uint32_t str[] = {RXVM_OP_ASSERT, 1, 77, RXVM_OP_RET, NONE};
  expect_bad_code(str, 5, 0, 1,
                  "word 0 (assert): string 77 is out of range (the program has 4 "
                  "strings)");
  const uint32_t past[] = {RXVM_OP_RET, NONE, RXVM_OP_TUPLE, 0, 3, 0};
  expect_bad_code(past, 6, 0, 1, "word 2 (tuple): a count of 3 does not fit in the code");
  const uint32_t past2[] = {RXVM_OP_RET, NONE, RXVM_OP_DEFINE, 1};
  expect_bad_code(past2, 4, 0, 1, "word 2 (define): its operands run past the end of the code");
  const uint32_t dtype[] = {RXVM_OP_PRIM, 0, 42, 1, RXVM_OP_RET, 0};
  expect_bad_code(dtype, 6, 0, 1, "word 0 (prim): dtype 42 is not a known dtype");
  const uint32_t dim[] = {RXVM_OP_CHECK_TENSOR, 0, 0, 1, 2, RX_DTYPE_F32, 1, 9, 1, RXVM_OP_RET, 0};
  expect_bad_code(dim, 11, 1, 1, "word 0 (check_tensor): dimension 0 has the unknown kind 9");
  const uint32_t param[] = {RXVM_OP_CHECK_TENSOR, 0, 3, 1, 2, RX_DTYPE_F32, NONE, RXVM_OP_RET, 0};
  expect_bad_code(param, 9, 1, 1, "word 0 (check_tensor): parameter 3 is out of range");
  const uint32_t rank[] = {RXVM_OP_SHAPE, 0, 17, RXVM_OP_RET, 0};
  expect_bad_code(rank, 5, 0, 1, "word 0 (shape): rank 17 exceeds 16");
  const uint32_t callfn[] = {RXVM_OP_CALL_FN, 0, 0, 0, RXVM_OP_RET, 0};
  expect_bad_code(callfn, 6, 1, 1, "word 0 (call_fn): calls 'f' with 0 arguments, it takes 1");
  const uint32_t callfn2[] = {RXVM_OP_CALL_FN, 0, 4, 0, RXVM_OP_RET, 0};
  expect_bad_code(callfn2, 6, 0, 1, "word 0 (call_fn): function 4 is out of range");
  const uint32_t tail[] = {RXVM_OP_TAIL_CALL_FN, 0, 2, 0, 0, RXVM_OP_RET, 0};
  expect_bad_code(tail, 7, 1, 1, "word 0 (tail_call_fn): calls 'f' with 2 arguments, it takes 1");
  const uint32_t tail2[] = {RXVM_OP_TAIL_CALL_FN, 3, 0, RXVM_OP_RET, 0};
  expect_bad_code(tail2, 5, 0, 1, "word 0 (tail_call_fn): function 3 is out of range");
  const uint32_t none_dst[] = {RXVM_OP_MOVE, NONE, 0, RXVM_OP_RET, 0};
  expect_bad_code(none_dst, 5, 0, 1, "word 0 (move): register -1 is out of range");

  /* expressions are compiled at load: malformed text is an error naming the word, with the
   * compiler's column; the same text is fine where no instruction evaluates it */
  expect_bad_expr("n +", "bad.rxm: host.rxvm: function 'f': word 0 (assert): in expression 'n +': "
                         "column 4: unexpected end of expression");
  expect_bad_expr("n / 2", "word 0 (assert): in expression 'n / 2': column 3: '/' is not integer "
                           "division: use //");
  expect_bad_expr("1 < n < 3", "comparisons do not chain");
  char deep[512] = "";
  for (int i = 0; i < 100; i++) strcat(deep, "(");
  strcat(deep, "n");
  for (int i = 0; i < 100; i++) strcat(deep, ")");
  expect_bad_expr(deep, "nested more than 60 levels deep");

  /* the program's header */
  prog p;
  memset(&p, 0, sizeof p);
  words *c = fn(&p, "f", 3, 2);
  i_ret(c, 0);
  size_t size = 0;
  uint8_t *b = artifact(&p, NULL, RXM_VERSION, &size);
  rx_rt_artifact *a = NULL;
  CHECK_ERR(rx_rt_artifact_load_memory(NULL, b, size, "bad.rxm", &a), RX_ERR_INVALID,
            "function 'f': 3 parameters but only 2 registers");
  free(b);
  prog_free(&p);
  memset(&p, 0, sizeof p);
  fn(&p, "f", 0, 1), fn(&p, "f", 0, 1);
  i_ret(&p.fns[0].code, NONE), i_ret(&p.fns[1].code, NONE);
  b = artifact(&p, NULL, RXM_VERSION, &size);
  CHECK_ERR(rx_rt_artifact_load_memory(NULL, b, size, "bad.rxm", &a), RX_ERR_INVALID,
            "function 'f' is defined twice");
  free(b);
  prog_free(&p);
  /* a host program of a wrong version, and one cut short (CRC recomputed) */
  memset(&p, 0, sizeof p);
  i_ret(fn(&p, "f", 0, 1), NONE);
  size_t hsize = 0;
  uint8_t *host = host_bytes(&p, &hsize);
  host[4] = 9;
  section s[2] = {{"manifest.json", "{}", 2}, {"host.rxvm", host, hsize}};
  b = container(s, 2, RXM_VERSION, &size);
  CHECK_ERR(rx_rt_artifact_load_memory(NULL, b, size, "bad.rxm", &a), RX_ERR_UNSUPPORTED,
            "bad.rxm: host program version 9, this runtime reads versions 1 to 5");
  free(b);
  host[4] = RXVM_VERSION;
  for (size_t cut = 0; cut < hsize; cut++) {
    s[1].size = cut;
    b = container(s, 2, RXM_VERSION, &size);
    rx_status st = rx_rt_artifact_load_memory(NULL, b, size, "bad.rxm", &a);
    CHECK_MSG(st != NULL && rx_status_code_of(st) == RX_ERR_INVALID &&
                  strstr(rx_status_message(st), "bad.rxm: host.rxvm: "),
              "host.rxvm cut at %zu bytes: %s", cut, st ? rx_status_message(st) : "accepted");
    rx_status_free(st);
    rx_rt_artifact_release(a);
    a = NULL;
    free(b);
  }
  free(host);
  prog_free(&p);
}

/* ---- tests on a device ---- */
static rx_rt_device *open_dev(void) {
  rx_rt_device_options o = {NULL, 1, false};
  rx_rt_device *d = NULL;
  CHECK_OK(rx_rt_device_open("vulkan:0", &o, &d));
  return d;
}

static rx_rt_tensor *vec(rx_rt_device *d, int64_t n, float base) {
  float *x = malloc((size_t)(n ? n : 1) * 4);
  for (int64_t i = 0; i < n; i++) x[i] = base + (float)(i % 97) * 0.25f;
  rx_rt_tensor *t = NULL;
  CHECK_OK(rx_rt_tensor_from_host(d, RX_DTYPE_F32, 1, &n, x, &t));
  free(x);
  return t;
}

static float *read_back(rx_rt_tensor *t) {
  size_t n = rx_rt_tensor_bytes(t);
  float *x = malloc(n ? n : 4);
  CHECK_OK(rx_rt_tensor_read(t, x, n));
  return x;
}

static void test_calls(rx_rt_device *d) {
  prog p;
  build_all(&p);
  size_t size = 0;
  uint8_t *b = artifact(&p, "vulkan", RXM_VERSION, &size);
  rx_rt_artifact *a = NULL;
  CHECK_OK(rx_rt_artifact_load_memory(d, b, size, "model.rxm", &a));
  free(b);
  prog_free(&p);
  if (!a) return;
  static const int64_t ns[] = {1, 7, 33, 1000, 4096};
  for (size_t t = 0; t < sizeof ns / sizeof ns[0]; t++) {
    int64_t n = ns[t];
    rx_rt_tensor *x = vec(d, n, -3), *y = vec(d, n, 10);
    rx_rt_value *r = NULL;
    CHECK_OK(rx_rt_vm_call(a, "main", &x, 1, &r));
    float *hx = read_back(x), *hy = read_back(y);
    if (r) {
      rx_rt_tensor *z = rx_rt_value_tensor(r);
      CHECK_MSG(z && rx_rt_tensor_ndim(z) == 1 && rx_rt_tensor_shape(z)[0] == n &&
                    rx_rt_tensor_dtype(z) == RX_DTYPE_F32,
                "main n=%lld: result shape", (long long)n);
      if (z) {
        float *hz = read_back(z);
        int bad = 0;
        for (int64_t i = 0; i < n; i++) bad += hz[i] != 3 * hx[i];
        CHECK_MSG(bad == 0, "main n=%lld: %d wrong", (long long)n, bad);
        free(hz);
      }
    }
    rx_rt_value_release(r);
    r = NULL;

    /* pair: call_fn, branches, tuples, shapes, match_cast */
    rx_rt_tensor *xy[2] = {x, y};
    CHECK_OK(rx_rt_vm_call(a, "pair", xy, 2, &r));
    if (r) {
      CHECK_MSG(rx_rt_value_kind_of(r) == RX_RT_VALUE_TUPLE && rx_rt_value_tuple_size(r) == 2,
                "pair returns a pair");
      rx_rt_value *z = rx_rt_value_tuple_item(r, 0), *inner = rx_rt_value_tuple_item(r, 1);
      CHECK_MSG(z && inner && rx_rt_value_tuple_size(inner) == 3 &&
                    rx_rt_value_tuple_item(inner, 0) == z,
                "pair: the inner tuple holds z");
      if (z && inner && rx_rt_value_tensor(z)) {
        float *hz = read_back(rx_rt_value_tensor(z));
        int bad = 0;
        for (int64_t i = 0; i < n; i++) {
          float want = n > 5 ? 6 * hx[i] + hy[i] : 2 * hy[i] + 3 * hx[i];
          bad += hz[i] != want;
        }
        CHECK_MSG(bad == 0, "pair n=%lld: %d wrong", (long long)n, bad);
        free(hz);
        const int64_t *dims = NULL;
        rx_rt_value *shp = rx_rt_value_tuple_item(inner, 1);
        CHECK_MSG(shp && rx_rt_value_shape(shp, &dims) == 2 && dims[0] == 2 * n && dims[1] == n + 1,
                  "pair: shape value");
        rx_dtype dt = RX_DTYPE_UNKNOWN;
        rx_rt_value *c = rx_rt_value_tuple_item(inner, 2);
        CHECK_MSG(c && rx_rt_value_prim(c, &dt) == (n > 5) && dt == RX_DTYPE_BOOL, "pair: prim");
      }
    }
    rx_rt_value_release(r);
    r = NULL;

    /* scaled: a scalar parameter, program variables from other names */
    CHECK_OK(rx_rt_vm_call(a, "scaled", &x, 1, &r));
    if (r && rx_rt_value_tensor(r)) {
      float *hz = read_back(rx_rt_value_tensor(r));
      int bad = 0;
      for (int64_t i = 0; i < n; i++) bad += hz[i] != -3 * hx[i] + hx[i];
      CHECK_MSG(bad == 0, "scaled n=%lld: %d wrong", (long long)n, bad);
      free(hz);
    }
    rx_rt_value_release(r);
    free(hx), free(hy);
    rx_rt_tensor_release(x);
    rx_rt_tensor_release(y);
  }

  /* errors */
  rx_rt_value *r = NULL;
  rx_rt_tensor *x = vec(d, 4099, 0);
  CHECK_ERR(rx_rt_vm_call(a, "main", &x, 1, &r), RX_ERR_INVALID,
            "main: violated fact 'n <= 4096' with n = 4099");
  rx_rt_tensor_release(x);
  int64_t sh[2] = {3, 4095};
  CHECK_OK(rx_rt_tensor_create(d, RX_DTYPE_F32, 2, sh, &x));
  CHECK_ERR(rx_rt_vm_call(a, "matrix", &x, 1, &r), RX_ERR_INVALID,
            "matrix: parameter 'a': expected f32[n, 4], got f32[3, 4095] (dimension 1 is 4095, "
            "expected 4)");
  CHECK_ERR(rx_rt_vm_call(a, "main", &x, 1, &r), RX_ERR_INVALID,
            "main: parameter 'x': expected f32[n], got f32[3, 4095] (rank 2, expected 1)");
  rx_rt_tensor_release(x);
  int64_t n7 = 7;
  CHECK_OK(rx_rt_tensor_create(d, RX_DTYPE_I32, 1, &n7, &x));
  CHECK_ERR(rx_rt_vm_call(a, "main", &x, 1, &r), RX_ERR_INVALID,
            "main: parameter 'x': expected f32[n], got i32[7] (dtype i32, expected f32)");
  rx_rt_tensor *pair_args[2] = {vec(d, 7, 0), vec(d, 8, 0)};
  CHECK_ERR(rx_rt_vm_call(a, "pair", pair_args, 2, &r), RX_ERR_INVALID,
            "pair: parameter 'y': expected f32[n], got f32[8] (dimension 0 is 8, but n = 7)");
  CHECK_ERR(rx_rt_vm_call(a, "main", pair_args, 2, &r), RX_ERR_INVALID,
            "main takes 1 argument (x: f32[n]), got 2");
  CHECK_ERR(rx_rt_vm_call(a, "pair", pair_args, 1, &r), RX_ERR_INVALID,
            "pair takes 2 arguments (x: f32[n], y: f32[n]), got 1");
  CHECK_ERR(rx_rt_vm_call(a, "foo", pair_args, 1, &r), RX_ERR_NOT_FOUND,
            "no function 'foo' in model.rxm (functions: main, pair,");
  CHECK_ERR(rx_rt_vm_call(a, "ext", pair_args, 1, &r), RX_ERR_UNSUPPORTED,
            "ext: extern 'cublas_gemm' is not available in this runtime");
  CHECK_ERR(rx_rt_vm_call(a, "axpy", pair_args, 1, &r), RX_ERR_NOT_FOUND,
            "axpy: parameter 'x': in expression '2 * h': column 5: no value given for the "
            "symbolic variable 'h'");
  CHECK_ERR(rx_rt_vm_call(a, "noret", NULL, 0, &r), RX_ERR_INVALID,
            "noret: reached the end of its code without ret");
  /* grow: its storage is sized by the first call (n = 7: 28 bytes); the tensor at offset 4 does
   * not fit; a larger call grows the storage (its size is an expression: sized at run time), and
   * the tensor at offset 4 still does not fit */
  CHECK_ERR(rx_rt_vm_call(a, "grow", pair_args, 1, &r), RX_ERR_INVALID,
            "grow: alloc_tensor for 'y': 28 bytes at offset 4 do not fit in the planned storage "
            "'storage 0' (28 bytes)");
  CHECK_ERR(rx_rt_vm_call(a, "grow", pair_args + 1, 1, &r), RX_ERR_INVALID,
            "grow: alloc_tensor for 'y': 32 bytes at offset 4 do not fit in the planned storage "
            "'storage 0' (32 bytes)");
  CHECK_MSG(r == NULL, "out_result must stay NULL on error");
  rx_rt_tensor_release(x);
  rx_rt_tensor_release(pair_args[0]);
  rx_rt_tensor_release(pair_args[1]);

  /* jump_if_not on a one-element tensor read from the device; a float one is refused */
  for (int32_t v = 0; v < 2; v++) {
    int64_t one = 1;
    int32_t val = v * 5;
    rx_rt_tensor *t = NULL;
    CHECK_OK(rx_rt_tensor_from_host(d, RX_DTYPE_I32, 1, &one, &val, &t));
    r = NULL;
    CHECK_OK(rx_rt_vm_call(a, "cond", &t, 1, &r));
    CHECK_MSG(r && rx_rt_value_prim(r, NULL) == (v ? 1 : 2), "cond(%d)", val);
    rx_rt_value_release(r);
    rx_rt_tensor_release(t);
  }
  r = NULL;
  rx_rt_tensor *f1 = vec(d, 1, 0);
  CHECK_ERR(
      rx_rt_vm_call(a, "cond", &f1, 1, &r), RX_ERR_INVALID,
      "cond: word 0 (jump_if_not): the condition 'flag' is a tensor f32[1], expected one bool or "
      "integer element");
  rx_rt_tensor_release(f1);

  /* the planned storage is reused across calls: two calls, the same buffer */
  rx_rt_tensor *x1 = vec(d, 5, 1), *x2 = vec(d, 9, 2);
  rx_rt_value *r1 = NULL, *r2 = NULL;
  CHECK_OK(rx_rt_vm_call(a, "main", &x1, 1, &r1));
  CHECK_OK(rx_rt_vm_call(a, "main", &x2, 1, &r2));
  if (r1 && r2)
    CHECK_MSG(rx_rt_tensor_buffer(rx_rt_value_tensor(r1)) ==
                  rx_rt_tensor_buffer(rx_rt_value_tensor(r2)),
              "main's planned storage was not reused across calls");
  /* rx_rt_buffer_kept says so (a caller copies such a result before the next call), and
   * says no for a buffer of the caller's */
  if (r1) CHECK(rx_rt_buffer_kept(rx_rt_tensor_buffer(rx_rt_value_tensor(r1))));
  CHECK(!rx_rt_buffer_kept(rx_rt_tensor_buffer(x1)));
  rx_rt_value_release(r1);
  rx_rt_value_release(r2);
  double ms = -1;
  CHECK_OK(rx_rt_vm_bench(a, "main", &x2, 1, 1, 3, &ms));
  CHECK_MSG(ms > 0, "bench: %g ms per call", ms);
  rx_rt_tensor_release(x1);
  rx_rt_tensor_release(x2);
  /* tensor helpers */
  int64_t bad_shape = -1;
  CHECK_ERR(rx_rt_tensor_create(d, RX_DTYPE_F32, 1, &bad_shape, &x), RX_ERR_INVALID,
            "negative dimension");
  CHECK_ERR(rx_rt_tensor_create(d, RX_DTYPE_UNKNOWN, 0, NULL, &x), RX_ERR_INVALID, "dtype");
  /* counts that overflow are overflows (2^64 elements wrap to 0), never "0 elements" */
  const int64_t wrap[] = {INT64_C(1) << 32, INT64_C(1) << 32};
  CHECK_ERR(rx_rt_tensor_create(d, RX_DTYPE_F32, 2, wrap, &x), RX_ERR_INVALID,
            "tensor: the element count of f32[4294967296, 4294967296] overflows");
  const int64_t bytes_wrap[] = {INT64_C(1) << 31, INT64_C(1) << 31};
  CHECK_ERR(rx_rt_tensor_create(d, RX_DTYPE_F32, 2, bytes_wrap, &x), RX_ERR_INVALID,
            "tensor: the byte size of f32[2147483648, 2147483648] overflows");
  /* larger than the device: a clear out-of-memory error */
  const int64_t huge[] = {INT64_C(1) << 40};
  CHECK_ERR(rx_rt_tensor_create(d, RX_DTYPE_F32, 1, huge, &x), RX_ERR_OUT_OF_MEMORY,
            "out of device memory");
  rx_rt_artifact_release(a);
}

/* Messages name the binding a register holds (version 3), "a temporary" for an unnamed one, and
 * number registers for a version 2 program (still read); a name out of the string table is a
 * load error. */
static void test_reg_names(rx_rt_device *d) {
  static const struct {
    uint32_t version;
    const char *name, *want;
  } cases[] = {
      {RXVM_VERSION, "logits",
       "cond: word 0 (jump_if_not): the condition 'logits' is a tensor f32[1]"},
      {RXVM_VERSION, NULL, "cond: word 0 (jump_if_not): the condition a temporary is a tensor"},
      {2, "logits", "cond: word 0 (jump_if_not): the condition r0 is a tensor f32[1]"},
  };
  rx_rt_tensor *f1 = vec(d, 1, 0);
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    prog p;
    memset(&p, 0, sizeof p);
    p.version = cases[i].version;
    words *c = fn(&p, "cond", 1, 2);
    reg_name(&p, 0, cases[i].name);
    put(c, RXVM_OP_JUMP_IF_NOT), put(c, 0), put(c, 3);
    i_ret(c, 0);
    size_t size = 0;
    uint8_t *b = artifact(&p, "vulkan", RXM_VERSION, &size);
    rx_rt_artifact *a = NULL;
    CHECK_OK(rx_rt_artifact_load_memory(d, b, size, "names.rxm", &a));
    rx_rt_value *r = NULL;
    if (a) CHECK_ERR(rx_rt_vm_call(a, "cond", &f1, 1, &r), RX_ERR_INVALID, cases[i].want);
    rx_rt_artifact_release(a);
    free(b);
    prog_free(&p);
  }
  /* a kernel call that fails names the bindings passed */
  {
    prog p;
    memset(&p, 0, sizeof p);
    words *c = fn(&p, "overrun", 1, 2);
    reg_name(&p, 0, "x1"), reg_name(&p, 1, "logits");
    i_check(&p, c, 0, 0, "x1", "f32[n]", RX_DTYPE_F32, 1);
    d_bind(&p, c, "n");
    i_tensor1(&p, c, 1, NONE, "0", RX_DTYPE_F32, "n");
    i_saxpy(&p, c, 0, 0, 1, "n * 2"); /* the program's n is twice the buffers' */
    i_ret(c, 1);
    size_t size = 0;
    uint8_t *b = artifact(&p, "vulkan", RXM_VERSION, &size);
    rx_rt_artifact *a = NULL;
    CHECK_OK(rx_rt_artifact_load_memory(d, b, size, "names.rxm", &a));
    rx_rt_value *r = NULL;
    if (a)
      CHECK_ERR(rx_rt_vm_call(a, "overrun", &f1, 1, &r), RX_ERR_INVALID,
                "overrun: call_kernels 'saxpy' on 'x1', 'x1', 'logits': program 'saxpy'");
    rx_rt_artifact_release(a);
    free(b);
    prog_free(&p);
  }
  rx_rt_tensor_release(f1);
  /* a register name that is not a string of the program */
  prog p;
  memset(&p, 0, sizeof p);
  i_ret(fn(&p, "f", 0, 1), NONE);
  size_t hsize = 0, size = 0;
  uint8_t *host = host_bytes(&p, &hsize);
  CHECK_MSG(hsize >= 4, "host size");
  host[hsize - 4] = 200; /* the last word: the name of register 0 */
  section s[2] = {{"manifest.json", "{}", 2}, {"host.rxvm", host, hsize}};
  uint8_t *b = container(s, 2, RXM_VERSION, &size);
  rx_rt_artifact *a = NULL;
  CHECK_ERR(rx_rt_artifact_load_memory(NULL, b, size, "bad.rxm", &a), RX_ERR_INVALID,
            "function 'f': the name of register 0 is string 200, out of range (2 strings)");
  free(b);
  free(host);
  prog_free(&p);
}

/* An allocator whose allocation number `fail_at` (counting from 0) fails. */
typedef struct failing {
  long count, fail_at;
} failing;
static void *failing_realloc(void *user, void *ptr, size_t size) {
  failing *f = user;
  if (size == 0) {
    free(ptr);
    return NULL;
  }
  if (f->count++ == f->fail_at) return NULL;
  return realloc(ptr, size);
}

/* Every host allocation of opening a device, loading an artifact and calling it fails in turn:
 * each failure is an out-of-host-memory status naming what was allocated (or the call succeeds
 * when the failing allocation was not needed), never a crash or a leak (the ASan build runs it). */
static void test_host_oom(void) {
  prog p;
  build_all(&p);
  size_t size = 0;
  uint8_t *b = artifact(&p, "vulkan", RXM_VERSION, &size);
  prog_free(&p);
  long k = 0;
  for (; k < 100000; k++) {
    failing f = {0, k};
    rx_rt_allocator al = {failing_realloc, &f};
    rx_rt_device_options o = {&al, 0, false};
    rx_rt_device *d = NULL;
    rx_rt_artifact *a = NULL;
    rx_rt_tensor *x = NULL;
    rx_rt_value *r = NULL;
    int64_t n = 33;
    float host[33] = {0};
    rx_status s = rx_rt_device_open("vulkan:0", &o, &d);
    if (!s) s = rx_rt_artifact_load_memory(d, b, size, "model.rxm", &a);
    if (!s) s = rx_rt_tensor_from_host(d, RX_DTYPE_F32, 1, &n, host, &x);
    if (!s) s = rx_rt_vm_call(a, "main", &x, 1, &r);
    bool done = f.count <= k; /* allocation k was never asked for: every path ran */
    if (s) {
      CHECK_MSG(rx_status_code_of(s) == RX_ERR_OUT_OF_MEMORY ||
                    strstr(rx_status_message(s), "out of host memory") ||
                    strstr(rx_status_message(s), "memory"),
                "allocation %ld failed: %s", k, rx_status_message(s));
      CHECK_MSG(!done, "allocation %ld was not made, yet: %s", k, rx_status_message(s));
      rx_status_free(s);
    }
    rx_rt_value_release(r);
    rx_rt_tensor_release(x);
    rx_rt_artifact_release(a);
    rx_rt_device_release(d);
    if (done) break;
  }
  CHECK_MSG(k > 10 && k < 100000, "%ld allocations", k);
  free(b);
}

static void test_device_loading(rx_rt_device *d) {
  prog p;
  build_all(&p);
  size_t size = 0;
  rx_rt_artifact *a = NULL;
  /* kernels for another backend only */
  uint8_t *b = artifact(&p, "cuda", RXM_VERSION, &size);
  CHECK_ERR(rx_rt_artifact_load_memory(d, b, size, "model.rxm", &a), RX_ERR_UNSUPPORTED,
            "model.rxm: no kernels for vulkan in this artifact (it has kernels for: cuda)");
  free(b);
  b = artifact(&p, NULL, RXM_VERSION, &size);
  CHECK_ERR(rx_rt_artifact_load_memory(d, b, size, "model.rxm", &a), RX_ERR_UNSUPPORTED,
            "(it has kernels for: no target)");
  free(b);
  /* a file on disk */
  b = artifact(&p, "vulkan", RXM_VERSION, &size);
  char path[] = "/tmp/rt_vm_test_XXXXXX";
  int fd = mkstemp(path);
  FILE *f = fd >= 0 ? fdopen(fd, "wb") : NULL;
  CHECK_MSG(f != NULL, "cannot create a temporary file");
  if (f) {
    fwrite(b, 1, size, f);
    fclose(f);
    CHECK_OK(rx_rt_artifact_load(d, path, &a));
    CHECK_MSG(a && rx_rt_artifact_device(a) == d, "artifact device");
    rx_rt_artifact_release(a);
    a = NULL;
    remove(path);
  }
  /* every single flipped byte of the file is rejected when loading for a device */
  int accepted = 0;
  for (size_t i = 0; i < size; i++) {
    b[i] ^= 0x01;
    rx_status s = rx_rt_artifact_load_memory(d, b, size, "model.rxm", &a);
    if (!s) {
      if (!accepted) printf("flip at byte %zu accepted\n", i);
      accepted++;
    }
    rx_status_free(s);
    rx_rt_artifact_release(a);
    a = NULL;
    b[i] ^= 0x01;
  }
  CHECK_MSG(accepted == 0, "%d of %zu single-byte flips were accepted", accepted, size);
  free(b);
  prog_free(&p);
}

int main(int argc, char **argv) {
  g_dir = argc > 1 ? argv[1] : "rt_kernels";
  char path[1024];
  snprintf(path, sizeof path, "%s/kernels.json", g_dir);
  g_kjson = read_file(path, &g_kjson_len);
  for (int i = 0; i < 3; i++) {
    snprintf(path, sizeof path, "%s/%s", g_dir, g_spv_names[i]);
    g_spv[i] = read_file(path, &g_spv_len[i]);
  }
  test_crc();
  if (!g_kjson || !g_spv[0] || !g_spv[1] || !g_spv[2]) {
    CHECK_SKIP(
        "no kernels in %s (glslangValidator, Debian glslang-tools, was absent at build time): "
        "the artifact tests run without kernels only",
        g_dir);
  } else {
    test_container();
  }
  test_bad_code();
  rx_status s = rx_rt_backend_check(RX_RT_BACKEND_VULKAN);
  if (s) {
    CHECK_SKIP("%s", rx_status_message(s));
    rx_status_free(s);
  } else if (g_kjson && g_spv[0]) {
    rx_rt_device *d = open_dev();
    if (d) {
      test_calls(d);
      test_reg_names(d);
      test_host_oom();
      test_device_loading(d);
      CHECK_OK(rx_rt_device_synchronize(d));
      const char *last = NULL;
      size_t n = rx_rt_device_validation_messages(d, &last);
      CHECK_MSG(n == 0, "%zu validation messages, the last: %s", n, last);
    }
    rx_rt_device_release(d);
  }
  free(g_kjson);
  for (int i = 0; i < 3; i++) free(g_spv[i]);
  return check_finish("runtime.vm");
}
