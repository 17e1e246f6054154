/* The whole pipeline (driver/driver.h): text models with ops (an MLP, a decoder layer with a
 * symbolic sequence length, a conv net with a symbolic batch, a module with control flow)
 * compiled for vulkan, cuda and metal. Checks:
 *   - the artifact, read back by a small independent reader: header, section table, CRC-32 of
 *     every section, the sections the manifest and each kernels.json name;
 *   - the host program of every function decodes: known opcodes, registers, strings, function
 *     indices and dtypes in range, jumps onto instruction starts, each CALL_KERNELS naming a
 *     program of the module with its parameter count and a kernel in every kernels.json;
 *   - kernel and call counts with and without fusion (golden numbers);
 *   - the decoder layer's planned peak bytes at its upper bound s = 2048 (golden, explained);
 *   - the fused module computes what the merely legalized one computes (graph interpreter) at
 *     three values of the symbolic dimension;
 *   - the same input gives the same artifact bytes; errors are reported, not crashed on.
 *
 * usage: test_compile TESTS_DIR */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "driver/driver.h"
#include "frontends/hf/hf.h"
#include "interp/graph_interp.h"
#include "ops/legalize.h"
#include "passes/passes.h"
#include "relaxc/compiler.h" /* RELAXC_VERSION */
#include "runtime/vm_format.h"
#include "targets/toolchain.h"

static const char *tests_dir = "tests";

static char *read_test(const char *rel) {
  char path[1024];
  snprintf(path, sizeof path, "%s/%s", tests_dir, rel);
  char *text = NULL;
  size_t len = 0;
  rx_status s = base_read_file(path, &text, &len);
  CHECK_MSG(!s, "read %s: %s", path, rx_status_message(s));
  rx_status_free(s);
  return text;
}

static rx_module *parse(const char *name, const char *text, bool normalize) {
  rx_module *m = rx_module_new();
  rx_diag d;
  base_diag_init(&d);
  bool ok = ir_parse_module(m, name, text, strlen(text), &d) &&
            (!normalize || (ops_module_normalize(m, &d) && ir_module_verify(m, &d)));
  CHECK_MSG(ok, "%s rejected:\n%s", name, rx_diag_text(&d));
  base_diag_free(&d);
  if (!ok) {
    rx_module_free(m);
    return NULL;
  }
  return m;
}

static const rx_target *target(const char *name) {
  const rx_target *t = NULL;
  rx_status s = tgt_target_parse(name, &t);
  RX_ASSERT(!s);
  return t;
}

static void all_targets(rx_compile_options *o) {
  o->targets[0] = target("vulkan");
  o->targets[1] = target("cuda");
  o->targets[2] = target("metal");
  o->ntargets = 3;
}

/* ---- an independent CRC-32 (bitwise) ---- */
static uint32_t crc_bitwise(const unsigned char *p, size_t n) {
  uint32_t c = 0xFFFFFFFFu;
  for (size_t i = 0; i < n; i++) {
    c ^= p[i];
    for (int k = 0; k < 8; k++) c = (c >> 1) ^ (0xEDB88320u & (0u - (c & 1)));
  }
  return ~c;
}

/* ---- a small artifact reader ---- */
typedef struct sec {
  char name[RXM_SECTION_NAME_BYTES + 1];
  const unsigned char *data;
  size_t size;
} sec;
typedef struct art {
  sec *secs;
  int n;
} art;

static uint32_t rd32(const unsigned char *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static uint64_t rd64(const unsigned char *p) { return rd32(p) | (uint64_t)rd32(p + 4) << 32; }

/* Returns NULL on success, else why the bytes are not a valid artifact. */
static const char *read_artifact(const unsigned char *b, size_t len, art *out) {
  memset(out, 0, sizeof *out);
  if (len < 16) return "shorter than the header";
  if (rd32(b) != RXM_MAGIC) return "bad magic";
  if (rd32(b + 4) != RXM_VERSION) return "unknown version";
  uint32_t n = rd32(b + 8);
  if (rd32(b + 12) != 0) return "reserved header word not zero";
  size_t entry = RXM_SECTION_NAME_BYTES + 24;
  if (n > (len - 16) / entry) return "section table outside the file";
  size_t table_end = 16 + n * entry;
  out->secs = calloc(n + 1, sizeof *out->secs);
  for (uint32_t i = 0; i < n; i++) {
    const unsigned char *e = b + 16 + i * entry;
    sec *s = &out->secs[i];
    if (memchr(e, 0, RXM_SECTION_NAME_BYTES) == NULL) return "section name not NUL-terminated";
    memcpy(s->name, e, RXM_SECTION_NAME_BYTES);
    uint64_t off = rd64(e + RXM_SECTION_NAME_BYTES), size = rd64(e + RXM_SECTION_NAME_BYTES + 8);
    if (off < table_end || off > len || size > len - off) return "section outside the file";
    if (rd32(e + RXM_SECTION_NAME_BYTES + 20) != 0) return "reserved section word not zero";
    if (crc_bitwise(b + off, size) != rd32(e + RXM_SECTION_NAME_BYTES + 16)) return "CRC mismatch";
    for (uint32_t j = 0; j < i; j++) {
      if (!strcmp(out->secs[j].name, s->name)) return "duplicate section name";
      const unsigned char *o = out->secs[j].data;
      if (size && out->secs[j].size && b + off < o + out->secs[j].size && o < b + off + size)
        return "overlapping sections";
    }
    s->data = b + off;
    s->size = size;
    out->n = (int)i + 1;
  }
  return NULL;
}
static const sec *find_sec(const art *a, const char *name) {
  for (int i = 0; i < a->n; i++)
    if (!strcmp(a->secs[i].name, name)) return &a->secs[i];
  return NULL;
}
static char *sec_text(const sec *s) {
  char *t = malloc(s->size + 1);
  memcpy(t, s->data, s->size);
  t[s->size] = 0;
  return t;
}

/* Every "key": "VALUE" of a JSON text names a section "<prefix>/VALUE". Returns how many. */
static int check_named_files(const art *a, const char *json, const char *key, const char *prefix) {
  char pat[64];
  snprintf(pat, sizeof pat, "\"%s\": \"", key);
  int count = 0;
  for (const char *p = strstr(json, pat); p; p = strstr(p + 1, pat)) {
    const char *v = p + strlen(pat), *e = strchr(v, '"');
    if (!e) break;
    char name[256];
    snprintf(name, sizeof name, "%s/%.*s", prefix, (int)(e - v), v);
    CHECK_MSG(find_sec(a, name) != NULL, "kernels.json names %s, which is not a section", name);
    count++;
  }
  return count;
}

/* ---- the host program walker (independent of passes/lower_host.c's disassembler) ---- */
typedef struct hp {
  const unsigned char *b;
  size_t nwords, pos;
  uint32_t nstrs;
  char **strs;
  uint32_t nfns;
  bool ok;
  char why[256];
} hp;

static uint32_t hw(hp *h) {
  if (h->pos >= h->nwords) {
    if (h->ok) snprintf(h->why, sizeof h->why, "read past the end at word %zu", h->pos);
    h->ok = false;
    return 0;
  }
  return rd32(h->b + 4 * h->pos++);
}
static void bad(hp *h, const char *what, uint32_t v, size_t at) {
  if (h->ok) snprintf(h->why, sizeof h->why, "%s (%u) at word %zu", what, v, at);
  h->ok = false;
}

typedef struct walk_stats {
  int ops[RXVM_OP_COUNT];
  int planned_tensors; /* ALLOC_TENSOR with a storage */
} walk_stats;

/* Checks one function's code; the code is words [start, start + len). */
static void walk_fn(hp *h, const rx_module *m, const art *a, int ntargets, const char *const *kjson,
                    uint32_t nregs, size_t len, walk_stats *st) {
  size_t start = h->pos, end = start + len;
  size_t saved = h->nwords;
  h->nwords = end;
  bool *is_start = calloc(len + 1, 1);
  RX_VEC(size_t) jumps = {0};
#define REG(x)                                                                                     \
  do {                                                                                             \
    uint32_t r_ = (x);                                                                             \
    if (r_ != 0xffffffffu && r_ >= nregs) bad(h, "register out of range", r_, h->pos - 1);         \
  } while (0)
#define STR(x)                                                                                     \
  do {                                                                                             \
    uint32_t s_ = (x);                                                                             \
    if (s_ >= h->nstrs) bad(h, "string id out of range", s_, h->pos - 1);                          \
  } while (0)
#define DTYPE(x)                                                                                   \
  do {                                                                                             \
    uint32_t d_ = (x);                                                                             \
    if (d_ >= RX_DTYPE_COUNT) bad(h, "bad dtype", d_, h->pos - 1);                                 \
  } while (0)
  while (h->ok && h->pos < end) {
    is_start[h->pos - start] = true;
    size_t at = h->pos;
    uint32_t op = hw(h);
    if (op >= RXVM_OP_COUNT) {
      bad(h, "unknown opcode", op, at);
      break;
    }
    st->ops[op]++;
    switch ((rxvm_op)op) {
    case RXVM_OP_CHECK_TENSOR:
    case RXVM_OP_MATCH_CAST: {
      REG(hw(h));
      if (op == RXVM_OP_CHECK_TENSOR) {
        uint32_t param = hw(h);
        (void)param;
        STR(hw(h));
      } else {
        REG(hw(h));
      }
      STR(hw(h));
      DTYPE(hw(h));
      uint32_t nd = hw(h);
      if (nd == 0xffffffffu) break;
      if (nd > 8) bad(h, "bad ndim", nd, h->pos - 1);
      for (uint32_t d = 0; h->ok && d < nd; d++) {
        uint32_t kind = hw(h);
        if (kind == RXVM_DIM_CONST) {
          hw(h);
          hw(h);
        } else if (kind == RXVM_DIM_BIND || kind == RXVM_DIM_EXPR) {
          STR(hw(h));
        } else {
          bad(h, "bad dimension kind", kind, h->pos - 1);
        }
      }
      break;
    }
    case RXVM_OP_ASSERT:
    case RXVM_OP_DEFINE:
      STR(hw(h));
      STR(hw(h));
      break;
    case RXVM_OP_ALLOC_STORAGE:
      REG(hw(h));
      STR(hw(h));
      break;
    case RXVM_OP_ALLOC_TENSOR: {
      REG(hw(h));
      uint32_t s = hw(h);
      REG(s);
      if (s != 0xffffffffu) st->planned_tensors++;
      STR(hw(h));
      DTYPE(hw(h));
      uint32_t nd = hw(h);
      if (nd > 8) bad(h, "bad ndim", nd, h->pos - 1);
      for (uint32_t d = 0; h->ok && d < nd; d++) STR(hw(h));
      break;
    }
    case RXVM_OP_CALL_KERNELS: {
      uint32_t name = hw(h);
      STR(name);
      uint32_t nargs = hw(h);
      if (!h->ok) break;
      const rx_tensor_fn *p = ir_module_tensor_fn((rx_module *)m, h->strs[name]);
      if (!p) {
        bad(h, "CALL_KERNELS of an unknown program", name, at);
        break;
      }
      if ((int)nargs != p->nparams) bad(h, "CALL_KERNELS argument count", nargs, at);
      for (uint32_t i = 0; h->ok && i < nargs; i++) {
        uint32_t r = hw(h);
        REG(r);
        bool scalar = p->params[i]->kind == RX_PARAM_SCALAR;
        if (scalar != (r == 0xffffffffu)) bad(h, "scalar parameter register", r, h->pos - 1);
      }
      uint32_t ns = hw(h);
      if (ns > 64) bad(h, "too many symbols", ns, h->pos - 1);
      for (uint32_t i = 0; h->ok && i < ns; i++) {
        STR(hw(h));
        STR(hw(h));
      }
      /* a kernel of this program in every target's kernels.json */
      char pat[300];
      snprintf(pat, sizeof pat, "\"program\": \"%s\"", h->strs[name]);
      for (int t = 0; h->ok && t < ntargets; t++)
        if (!strstr(kjson[t], pat)) bad(h, "no kernel for the program", name, at);
      break;
    }
    case RXVM_OP_CALL_EXTERN: {
      STR(hw(h));
      uint32_t n = hw(h);
      if (n > 64) bad(h, "bad count", n, h->pos - 1);
      for (uint32_t i = 0; h->ok && i < n; i++) REG(hw(h));
      break;
    }
    case RXVM_OP_CALL_FN:
    case RXVM_OP_TAIL_CALL_FN: {
      if (op == RXVM_OP_CALL_FN) REG(hw(h));
      uint32_t f = hw(h);
      if (f >= h->nfns) bad(h, "function index out of range", f, h->pos - 1);
      uint32_t n = hw(h);
      if (n > 64) bad(h, "bad count", n, h->pos - 1);
      for (uint32_t i = 0; h->ok && i < n; i++) REG(hw(h));
      break;
    }
    case RXVM_OP_PRIM:
      REG(hw(h));
      DTYPE(hw(h));
      STR(hw(h));
      break;
    case RXVM_OP_SHAPE: {
      REG(hw(h));
      uint32_t n = hw(h);
      if (n > 8) bad(h, "bad ndim", n, h->pos - 1);
      for (uint32_t i = 0; h->ok && i < n; i++) STR(hw(h));
      break;
    }
    case RXVM_OP_TUPLE: {
      REG(hw(h));
      uint32_t n = hw(h);
      if (n > 64) bad(h, "bad count", n, h->pos - 1);
      for (uint32_t i = 0; h->ok && i < n; i++) REG(hw(h));
      break;
    }
    case RXVM_OP_GET_ITEM:
      REG(hw(h));
      REG(hw(h));
      hw(h);
      break;
    case RXVM_OP_MOVE:
      REG(hw(h));
      REG(hw(h));
      break;
    case RXVM_OP_WEIGHT:
      REG(hw(h));
      STR(hw(h));
      break;
    case RXVM_OP_JUMP:
      RX_VEC_PUSH(&jumps, (size_t)hw(h));
      break;
    case RXVM_OP_JUMP_IF_NOT:
      REG(hw(h));
      RX_VEC_PUSH(&jumps, (size_t)hw(h));
      break;
    case RXVM_OP_FREE:
    case RXVM_OP_RET:
      REG(hw(h));
      break;
    case RXVM_OP_TENSOR_TO_SHAPE:
    case RXVM_OP_RESHAPE:
      REG(hw(h));
      REG(hw(h));
      if (op == RXVM_OP_RESHAPE) REG(hw(h));
      STR(hw(h));
      break;
    case RXVM_OP_COUNT:
      break;
    }
  }
  for (size_t i = 0; h->ok && i < jumps.len; i++)
    if (jumps.data[i] >= len || !is_start[jumps.data[i]])
      bad(h, "jump target not an instruction start", (uint32_t)jumps.data[i], start);
  free(jumps.data);
  free(is_start);
  (void)a;
  h->nwords = saved;
  h->pos = end;
#undef REG
#undef STR
#undef DTYPE
}

/* Walks the whole host.rxvm section. */
static void check_host(const char *what, const sec *s, const rx_module *m, const art *a,
                       int ntargets, const char *const *kjson, int want_fns, walk_stats *st) {
  memset(st, 0, sizeof *st);
  hp h = {.b = s->data, .nwords = s->size / 4, .ok = true};
  CHECK_MSG(s->size % 4 == 0, "%s: host.rxvm is not whole words", what);
  CHECK_MSG(hw(&h) == RXVM_MAGIC && hw(&h) == RXVM_VERSION, "%s: host.rxvm magic/version", what);
  h.nstrs = hw(&h);
  if (h.nstrs > h.nwords) h.ok = false;
  h.strs = calloc((size_t)(h.ok ? h.nstrs : 0) + 1, sizeof(char *));
  for (uint32_t i = 0; h.ok && i < h.nstrs; i++) {
    uint32_t n = hw(&h);
    if ((n + 3) / 4 > h.nwords - h.pos) {
      bad(&h, "string past the end", n, h.pos);
      break;
    }
    h.strs[i] = calloc(n + 1, 1);
    memcpy(h.strs[i], h.b + 4 * h.pos, n);
    CHECK_MSG(strlen(h.strs[i]) == n, "%s: string %u holds a NUL", what, i);
    h.pos += (n + 3) / 4;
  }
  h.nfns = hw(&h);
  CHECK_MSG((int)h.nfns == want_fns, "%s: %u functions in host.rxvm, %d expected", what, h.nfns,
            want_fns);
  for (uint32_t f = 0; h.ok && f < h.nfns; f++) {
    uint32_t name = hw(&h), np = hw(&h), nregs = hw(&h), len = hw(&h);
    if (!h.ok) break;
    if (name >= h.nstrs) bad(&h, "function name", name, h.pos);
    if (np > nregs) bad(&h, "more parameters than registers", np, h.pos);
    if (len > h.nwords - h.pos) bad(&h, "code past the end", len, h.pos);
    if (!h.ok) break;
    const rx_graph_fn *g = ir_module_graph_fn((rx_module *)m, h.strs[name]);
    CHECK_MSG(g && (int)np == g->nparams, "%s: function %s: %u parameters", what, h.strs[name], np);
    walk_fn(&h, m, a, ntargets, kjson, nregs, len, st);
    /* version 3: the register names; the parameters' registers carry the parameters' names */
    for (uint32_t r = 0; h.ok && r < nregs; r++) {
      uint32_t id = hw(&h);
      if (h.ok && id >= h.nstrs) bad(&h, "register name", id, h.pos);
      if (h.ok && g && r < np)
        CHECK_MSG(!strcmp(h.strs[id], g->params[r]->name),
                  "%s: function %s: register %u is named '%s'", what, h.strs[name], r, h.strs[id]);
    }
  }
  CHECK_MSG(h.ok, "%s: host program malformed: %s", what, h.why);
  CHECK_MSG(!h.ok || h.pos == h.nwords, "%s: %zu trailing words in host.rxvm", what,
            h.nwords - h.pos);
  for (uint32_t i = 0; i < h.nstrs && h.strs; i++) free(h.strs[i]);
  free(h.strs);
}

/* ---- compile and check one model ---- */
static int count_seq(const rx_seq *s, rx_node_kind kind) {
  int c = 0;
  for (int b = 0; b < s->nblocks; b++)
    for (int i = 0; i < s->blocks[b]->nbindings; i++) {
      const rx_node *n = s->blocks[b]->bindings[i]->value;
      if (n->kind == kind) c++;
      if (n->kind == RX_NODE_IF) c += count_seq(n->then_seq, kind) + count_seq(n->else_seq, kind);
    }
  return c;
}

typedef struct model {
  const char *file;
  const char *fn;
  const char *sym; /* NULL: no graph-interpreter comparison */
  int64_t values[3];
  int nfns;
  /* golden: call_tensor bindings of fn and kernels per target, fused and unfused */
  int calls_fused, kernels_fused, calls_unfused, kernels_unfused;
  int64_t peak; /* planned peak bytes of fn; -1: not checked */
  int storages; /* planned storages of fn */
} model;

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static float frand(void) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return (float)((double)(rng >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

/* main of a (merely legalized) and b (compiled) on the same random inputs with sym = v. */
static void compare_runs(rx_module *a, rx_module *b, const model *md, int64_t v) {
  rx_graph_fn *ga = ir_module_graph_fn(a, md->fn), *gb = ir_module_graph_fn(b, md->fn);
  if (!ga || !gb) {
    CHECK_MSG(0, "%s: no function %s", md->file, md->fn);
    return;
  }
  const rx_expr *sv = sym_expr_var(a->ctx, md->sym);
  rx_expr_env env = {&sv, &v, 1};
  rx_ginterp_value *in = base_calloc((size_t)ga->nparams + 1, sizeof *in);
  for (int i = 0; i < ga->nparams; i++) {
    const rx_sinfo *s = ga->params[i]->sinfo;
    int64_t shp[RX_MAX_NDIM];
    int64_t numel = 1;
    for (int d = 0; d < s->ndim; d++) {
      bool ok = sym_expr_eval(s->shape[d], &env, &shp[d]);
      CHECK_MSG(ok, "%s: cannot evaluate a parameter shape", md->file);
      numel *= shp[d];
    }
    float *data = malloc(sizeof *data * (size_t)(numel ? numel : 1));
    for (int64_t k = 0; k < numel; k++) data[k] = frand();
    in[i] = interp_graph_tensor(RX_DTYPE_F32, s->ndim, shp, data);
  }
  rx_ginterp_value ra, rb;
  rx_status sa = interp_graph_run(a, ga, in, ga->nparams, &ra);
  rx_status sb = interp_graph_run(b, gb, in, gb->nparams, &rb);
  CHECK_MSG(!sa, "%s (%s = %lld): legalized run: %s", md->file, md->sym, (long long)v,
            rx_status_message(sa));
  CHECK_MSG(!sb, "%s (%s = %lld): compiled run: %s", md->file, md->sym, (long long)v,
            rx_status_message(sb));
  if (!sa && !sb) {
    bool same = ra.kind == RX_GV_TENSOR && rb.kind == RX_GV_TENSOR && ra.ndim == rb.ndim &&
                ra.dtype == RX_DTYPE_F32 && rb.dtype == RX_DTYPE_F32;
    for (int d = 0; same && d < ra.ndim; d++) same = ra.shape[d] == rb.shape[d];
    CHECK_MSG(same, "%s (%s = %lld): results differ in kind or shape", md->file, md->sym,
              (long long)v);
    if (same) {
      double w = 0, scale = 0;
      int64_t n = interp_graph_numel(&ra);
      for (int64_t i = 0; i < n; i++) {
        double x = ((float *)ra.data)[i], y = ((float *)rb.data)[i];
        w = isnan(x) || isnan(y) ? INFINITY : fmax(w, fabs(x - y));
        scale = fmax(scale, fabs(x));
      }
      CHECK_MSG(n > 0 && w <= 1e-5 * fmax(scale, 1e-30),
                "%s (%s = %lld): max difference %g (scale %g)", md->file, md->sym, (long long)v, w,
                scale);
    }
  }
  rx_status_free(sa);
  rx_status_free(sb);
  interp_graph_value_free(&ra);
  interp_graph_value_free(&rb);
  for (int i = 0; i < ga->nparams; i++) free(in[i].data);
  free(in);
}

static int total_kernels(const rx_compile_result *r, int t) { return r->targets[t].nkernels; }

static void check_artifact(const model *md, rx_module *m, const rx_compile_result *r) {
  art a;
  const char *why = read_artifact(r->artifact, r->artifact_len, &a);
  CHECK_MSG(!why, "%s: artifact rejected by the reader: %s", md->file, why);
  if (why) {
    free(a.secs);
    return;
  }
  const sec *man = find_sec(&a, "manifest.json"), *host = find_sec(&a, "host.rxvm");
  CHECK_MSG(man && host, "%s: manifest.json or host.rxvm missing", md->file);
  const char *kjson[RX_COMPILE_MAX_TARGETS] = {0};
  char *ktext[RX_COMPILE_MAX_TARGETS] = {0};
  for (int t = 0; t < r->ntargets; t++) {
    const char *kind = tgt_target_kind_name(r->targets[t].target->kind);
    char name[80];
    snprintf(name, sizeof name, "%s/kernels.json", kind);
    const sec *k = find_sec(&a, name);
    CHECK_MSG(k != NULL, "%s: %s missing", md->file, name);
    ktext[t] = k ? sec_text(k) : calloc(1, 1);
    kjson[t] = ktext[t];
    int nsrc = check_named_files(&a, kjson[t], "source", kind);
    CHECK_MSG(nsrc == r->targets[t].nkernels, "%s: %s names %d sources for %d kernels", md->file,
              name, nsrc, r->targets[t].nkernels);
    int nbin = check_named_files(&a, kjson[t], "binary", kind);
    int nptx = check_named_files(&a, kjson[t], "ptx", kind);
    if (r->targets[t].target->kind == RX_TARGET_VULKAN && tgt_shaderc_available())
      CHECK_MSG(nbin == nsrc, "%s: %d SPIR-V binaries for %d kernels", md->file, nbin, nsrc);
    if (r->targets[t].target->kind == RX_TARGET_CUDA)
      CHECK_MSG(r->targets[t].binaries ? nbin == nsrc && nptx == nsrc : nbin == 0 && nptx == 0,
                "%s: cuda: %d cubins, %d PTX for %d kernels (binaries: %d)", md->file, nbin, nptx,
                nsrc, r->targets[t].binaries);
    if (r->targets[t].target->kind == RX_TARGET_METAL)
      CHECK_MSG(nbin == 0, "%s: metal binaries", md->file);
  }
  if (man) {
    char *mt = sec_text(man);
    char fn[128];
    snprintf(fn, sizeof fn, "\"name\": \"%s\"", md->fn);
    CHECK_MSG(strstr(mt, "\"format\": \"relaxc-artifact\"") && strstr(mt, fn) &&
                  strstr(mt, "\"compiler\": \"relaxc " RELAXC_VERSION "\""),
              "%s: manifest lacks the format, the function or the compiler version", md->file);
    for (int t = 0; t < r->ntargets; t++) {
      char k[64];
      snprintf(k, sizeof k, "\"backend\": \"%s\"",
               tgt_target_kind_name(r->targets[t].target->kind));
      CHECK_MSG(strstr(mt, k) != NULL, "%s: manifest lacks %s", md->file, k);
    }
    free(mt);
  }
  if (host) {
    walk_stats st;
    check_host(md->file, host, m, &a, r->ntargets, kjson, md->nfns, &st);
    const rx_fn_plan *fp = NULL;
    for (int i = 0; i < r->plan.nfns; i++)
      if (!strcmp(r->plan.fns[i].fn->name, md->fn)) fp = &r->plan.fns[i];
    int nst = 0, nplanned = 0;
    for (int i = 0; i < r->plan.nfns; i++) {
      nst += r->plan.fns[i].nstorages;
      for (int k = 0; k < r->plan.fns[i].nallocs; k++)
        nplanned += r->plan.fns[i].allocs[k].storage >= 0;
    }
    CHECK_MSG(st.ops[RXVM_OP_ALLOC_STORAGE] == nst, "%s: %d ALLOC_STORAGE, %d storages planned",
              md->file, st.ops[RXVM_OP_ALLOC_STORAGE], nst);
    CHECK_MSG(st.planned_tensors == nplanned, "%s: %d tensors in storages, %d planned", md->file,
              st.planned_tensors, nplanned);
    CHECK_MSG(st.ops[RXVM_OP_RET] >= md->nfns, "%s: RET missing", md->file);
    CHECK_MSG(fp && st.ops[RXVM_OP_CHECK_TENSOR] >= fp->fn->nparams - 1, "%s: parameter checks",
              md->file);
    CHECK_MSG(fp && st.ops[RXVM_OP_ASSERT] >= fp->fn->nfacts, "%s: fact assertions", md->file);
  }
  /* the reader refuses a flipped byte in any section and a truncated file */
  if (a.n > 1) {
    unsigned char *copy = malloc(r->artifact_len);
    memcpy(copy, r->artifact, r->artifact_len);
    size_t off = (size_t)(a.secs[1].data - r->artifact);
    copy[off + a.secs[1].size / 2] ^= 0x40;
    art b;
    const char *w2 = read_artifact(copy, r->artifact_len, &b);
    CHECK_MSG(w2 && !strcmp(w2, "CRC mismatch"), "%s: a flipped byte is not detected", md->file);
    free(b.secs);
    size_t data_end = 0; /* the end of the last section's bytes (padding follows) */
    for (int i = 0; i < a.n; i++) {
      size_t e = (size_t)(a.secs[i].data - r->artifact) + a.secs[i].size;
      data_end = e > data_end ? e : data_end;
    }
    w2 = read_artifact(r->artifact, data_end - 1, &b);
    CHECK_MSG(w2 != NULL, "%s: a truncated artifact is accepted", md->file);
    free(b.secs);
    free(copy);
  }
  for (int t = 0; t < r->ntargets; t++) free(ktext[t]);
  free(a.secs);
}

static bool compile(rx_module *m, rx_compile_options *o, rx_compile_result *r, const char *what) {
  rx_diag d;
  base_diag_init(&d);
  bool ok = drv_compile(m, o, &d, r);
  CHECK_MSG(ok, "%s: compile failed:\n%s", what, rx_diag_text(&d));
  base_diag_free(&d);
  return ok;
}

static void test_model(const model *md) {
  char *text = read_test(md->file);
  if (!text) return;
  /* fused, for all three targets (no NVRTC: it is tested once, below) */
  rx_module *m = parse(md->file, text, false);
  rx_compile_options o;
  memset(&o, 0, sizeof o);
  all_targets(&o);
  o.no_nvrtc = true;
  rx_compile_result r;
  if (m && compile(m, &o, &r, md->file)) {
    rx_graph_fn *g = ir_module_graph_fn(m, md->fn);
    int calls = g ? count_seq(&g->body, RX_NODE_CALL_TENSOR) : -1;
    CHECK_MSG(calls == md->calls_fused, "%s: %d call_tensor after fusion, %d expected", md->file,
              calls, md->calls_fused);
    for (int t = 0; t < r.ntargets; t++)
      CHECK_MSG(total_kernels(&r, t) == md->kernels_fused,
                "%s: %s: %d kernels after fusion, %d expected", md->file, r.targets[t].target->name,
                total_kernels(&r, t), md->kernels_fused);
    CHECK_MSG(r.nfunctions == md->nfns, "%s: %d functions", md->file, r.nfunctions);
    const rx_fn_plan *fp = NULL;
    for (int i = 0; i < r.plan.nfns; i++)
      if (r.plan.fns[i].fn == g) fp = &r.plan.fns[i];
    CHECK_MSG(fp != NULL, "%s: no memory plan for %s", md->file, md->fn);
    if (fp && md->peak >= 0) {
      CHECK_MSG(fp->peak_bytes == md->peak, "%s: planned peak %lld bytes, %lld expected", md->file,
                (long long)fp->peak_bytes, (long long)md->peak);
      CHECK_MSG(fp->nstorages == md->storages, "%s: %d storages, %d expected", md->file,
                fp->nstorages, md->storages);
      CHECK_MSG(fp->peak_bytes <= fp->unplanned_bytes, "%s: reuse made memory grow", md->file);
    }
    check_artifact(md, m, &r);

    /* the fused module computes what the merely legalized one computes */
    rx_module *ref = parse(md->file, text, true);
    rx_diag d;
    base_diag_init(&d);
    bool lok = ref && pass_legalize(ref, &d) && ops_module_normalize(ref, &d);
    CHECK_MSG(lok, "%s: legalize failed:\n%s", md->file, rx_diag_text(&d));
    base_diag_free(&d);
    for (int k = 0; lok && md->sym && k < 3; k++) compare_runs(ref, m, md, md->values[k]);
    rx_module_free(ref);

    /* deterministic: the same input gives the same bytes */
    rx_module *m2 = parse(md->file, text, false);
    rx_compile_result r2;
    if (m2 && compile(m2, &o, &r2, md->file)) {
      CHECK_MSG(r2.artifact_len == r.artifact_len &&
                    !memcmp(r2.artifact, r.artifact, r.artifact_len),
                "%s: two compilations give different artifacts", md->file);
    }
    drv_compile_result_free(&r2);
    rx_module_free(m2);
  }
  drv_compile_result_free(&r);
  rx_module_free(m);

  /* unfused (metal only: the kernel counts are the same on every target) */
  m = parse(md->file, text, false);
  memset(&o, 0, sizeof o);
  o.targets[0] = target("metal");
  o.ntargets = 1;
  o.no_fuse = true;
  if (m && compile(m, &o, &r, md->file)) {
    rx_graph_fn *g = ir_module_graph_fn(m, md->fn);
    int calls = g ? count_seq(&g->body, RX_NODE_CALL_TENSOR) : -1;
    CHECK_MSG(calls == md->calls_unfused, "%s: %d call_tensor without fusion, %d expected",
              md->file, calls, md->calls_unfused);
    CHECK_MSG(total_kernels(&r, 0) == md->kernels_unfused,
              "%s: %d kernels without fusion, %d expected", md->file, total_kernels(&r, 0),
              md->kernels_unfused);
  }
  drv_compile_result_free(&r);
  rx_module_free(m);
  free(text);
}

/* NVRTC, where present: PTX and cubin sections for every CUDA kernel; absent: sources only and
 * the manifest says so. */
static void test_nvrtc(void) {
  char *text = read_test("lit/compile/Inputs/mlp.rx");
  if (!text) return;
  rx_module *m = parse("mlp.rx", text, false);
  rx_compile_options o;
  memset(&o, 0, sizeof o);
  o.targets[0] = target("cuda");
  o.ntargets = 1;
  rx_compile_result r;
  rx_status st = tgt_nvrtc_load(NULL, NULL);
  bool have = st == NULL;
  rx_status_free(st);
  if (m && compile(m, &o, &r, "mlp.rx (nvrtc)")) {
    CHECK_MSG(r.targets[0].binaries == have, "NVRTC %s but binaries %d",
              have ? "present" : "absent", r.targets[0].binaries);
    CHECK_MSG(have == (r.targets[0].note == NULL), "the CUDA note: %s",
              r.targets[0].note ? r.targets[0].note : "(none)");
    model md = {"lit/compile/Inputs/mlp.rx", "mlp", "n", {1, 2, 3}, 1, 2, 6, 5, 9, -1, 0};
    check_artifact(&md, m, &r);
    rx_strbuf b = {0};
    drv_artifact_manifest(&b, m, &r);
    CHECK_MSG(strstr(b.data, have ? "\"binaries\": true" : "\"binaries\": false") != NULL,
              "manifest binaries flag");
    base_strbuf_free(&b);
    printf("test_compile: NVRTC %s\n",
           have ? "present: PTX and cubin checked" : "absent: sources only checked");
  }
  drv_compile_result_free(&r);
  rx_module_free(m);
  free(text);
}

/* Errors are reported with the place and the expectation. */
static void test_errors(void) {
  struct {
    const char *text;
    const char *dump;
    int ntargets; /* 0: none; 2: two vulkan targets */
    const char *want;
  } cases[] = {
      {"graph_fn f(x: f32[n]) { return x }", "nonsense", 1, "unknown step 'nonsense'"},
      {"graph_fn f(x: f32[n]) { return x }", NULL, 0, "between 1 and"},
      {"graph_fn f(x: f32[n]) { return x }", NULL, 2, "one target per backend"},
      {"graph_fn f(x: f32[n]) {\n  y = add(x, z)\n  return y\n}", NULL, 1, "z"},
      /* tensor constants are weights now: tests/unit/test_weights.c */
  };
  for (size_t i = 0; i < RX_ARRAY_LEN(cases); i++) {
    rx_module *m = rx_module_new();
    rx_diag d;
    base_diag_init(&d);
    bool parsed = ir_parse_module(m, "err.rx", cases[i].text, strlen(cases[i].text), &d);
    rx_compile_options o;
    memset(&o, 0, sizeof o);
    o.dump_after = cases[i].dump;
    rx_strbuf sink = {0};
    o.dump_out = &sink;
    o.ntargets = cases[i].ntargets == 2 ? 2 : cases[i].ntargets;
    o.targets[0] = target("vulkan");
    o.targets[1] = target("vulkan-lavapipe");
    rx_compile_result r;
    bool ok = parsed && drv_compile(m, &o, &d, &r);
    if (parsed) drv_compile_result_free(&r);
    CHECK_MSG(!ok && d.errors > 0 && strstr(rx_diag_text(&d), cases[i].want),
              "error case %zu: ok=%d, diagnostics:\n%s", i, ok, rx_diag_text(&d));
    base_strbuf_free(&sink);
    base_diag_free(&d);
    rx_module_free(m);
  }
}

/* Memory planning on its own: a value returned is never planned; reuse needs a dead tenant. */
static void test_plan_rules(void) {
  const char *text = "graph_fn f(x: f32[n, 8]) -> (f32[n, 8], f32[n, 8]) where n <= 100 {\n"
                     "  dataflow {\n"
                     "    a = exp(x)\n"
                     "    b = exp(a)\n"
                     "    c = exp(b)\n"
                     "    d = exp(c)\n"
                     "    r = (b, d)\n"
                     "  }\n"
                     "  return r\n"
                     "}\n";
  rx_module *m = parse("plan.rx", text, false);
  rx_compile_options o;
  memset(&o, 0, sizeof o);
  o.targets[0] = target("metal");
  o.ntargets = 1;
  o.no_fuse = true;
  rx_compile_result r;
  if (m && compile(m, &o, &r, "plan.rx")) {
    const rx_fn_plan *fp = &r.plan.fns[0];
    /* positions: a 0, b 1, c 2, d 3, r 4. a lives 0..1 (read by b); c is defined at 2, after a
     * died, so it takes a's storage: one storage of 100 * 8 * 4 = 3200 bytes. b and d reach the
     * result through the tuple r: dynamic allocations, never reused. */
    CHECK_MSG(fp->nallocs == 4 && fp->nstorages == 1 && fp->peak_bytes == 3200 && fp->ndynamic == 2,
              "plan: %d allocs, %d storages, %lld bytes, %d dynamic", fp->nallocs, fp->nstorages,
              (long long)fp->peak_bytes, fp->ndynamic);
    for (int i = 0; i < fp->nallocs; i++) {
      const char *nm = fp->allocs[i].var->name;
      bool ret = !strcmp(nm, "b") || !strcmp(nm, "d");
      CHECK_MSG(ret == (fp->allocs[i].storage < 0), "plan: %s storage %d", nm,
                fp->allocs[i].storage);
    }
  }
  drv_compile_result_free(&r);
  rx_module_free(m);
}

/* The plan of a Llama-2-7B-shaped decoder (config.json alone: hidden 4096, MLP 11008, 32 heads,
 * vocabulary 32000, f16; 2 layers, sequences up to 4096, decode batches up to 16) must not
 * regress.
 * prefill (n <= 4096): 327155712 bytes in 6 storages (1 + 64 + 1 + 64 + 96 + 86 MiB), and only
 * the returned logits dynamic. Since the q/k/v projections are one GEMM (issue 31: one launch), its
 * output qkv ([n, 12288] f16: 96 MiB) is one tensor, live until kv_append_rope has read q, k and
 * v (the rotated q, [n, 32, 128], its second output, as the rope kernel's output was before):
 * its storage is the largest; the MLP's up and act ([n,
 * 11008] f16: 86 MiB) and the f32 residual stream ([n, 4096]: 64 MiB) take the others, the rope
 * tables 1 MiB each. (With q, k and v apart, 7 storages of 86 + 86 + 64 + 32 + 32 + 1 + 1 MiB
 * were the least and 316669952 bytes the plan: 10 MiB less, for 2 more launches a layer.)
 * decode (b <= 16): 1015808 bytes in 5 storages since the norms are folded into the projections
 * after them (rms_norm_matmul): the norms' outputs and the up projection's are gone, and the
 * logits' f32 cast is the folded lm_head's epilogue, so logits_t ([16, 32000] f16, the largest
 * before) is no tensor (1236992 in 6 before; 1908736 in 7 before rms_norm wrote f16 and the
 * residual add became the projections' epilogue), plus 2
 * storages sized at run time for the partial results of the split decode
 * attention (b * ((mp + 15) // 16) * 16384 and * 128 bytes: the cache length mp has no bound),
 * shared by every layer; only the returned logits are allocated per call (before: 2 dynamic
 * allocations per layer and step). */
static void test_plan_7b(void) {
  static const char config[] =
      "{\"architectures\": [\"LlamaForCausalLM\"], \"hidden_size\": 4096, \"intermediate_size\": "
      "11008, \"num_hidden_layers\": 2, \"num_attention_heads\": 32, \"num_key_value_heads\": 32, "
      "\"vocab_size\": 32000, \"max_position_embeddings\": 4096, \"rms_norm_eps\": 1e-5, "
      "\"hidden_act\": \"silu\", \"torch_dtype\": \"float16\"}";
  char dir[] = "/tmp/rx_plan_7b_XXXXXX", path[64];
  if (!mkdtemp(dir)) {
    CHECK_MSG(false, "mkdtemp");
    return;
  }
  snprintf(path, sizeof path, "%s/config.json", dir);
  FILE *f = fopen(path, "w");
  bool written = f && fputs(config, f) >= 0;
  if (f && fclose(f) != 0) written = false;
  CHECK_MSG(written, "cannot write %s", path);
  rx_module *m = rx_module_new();
  rx_hf_options ho = {.dtype = RX_DTYPE_F16, .no_weights = true};
  rx_status s = written ? hf_import(m, dir, &ho) : NULL;
  CHECK_MSG(s == NULL, "7B-shaped import: %s", rx_status_message(s));
  rx_compile_options o;
  memset(&o, 0, sizeof o);
  o.targets[0] = target("cuda");
  o.ntargets = 1;
  o.no_nvrtc = true;
  rx_compile_result r;
  memset(&r, 0, sizeof r);
  if (written && !s && compile(m, &o, &r, "7B-shaped decoder")) {
    static const struct {
      const char *fn;
      int64_t peak;
      int storages, runtime_sized;
    } want[] = {{"prefill", 327155712, 6, 0}, {"decode", 1015808, 7, 2}};
    for (size_t i = 0; i < RX_ARRAY_LEN(want); i++) {
      const rx_fn_plan *fp = NULL;
      for (int k = 0; k < r.plan.nfns; k++)
        if (!strcmp(r.plan.fns[k].fn->name, want[i].fn)) fp = &r.plan.fns[k];
      CHECK_MSG(fp != NULL, "no plan for %s", want[i].fn);
      if (!fp) continue;
      int runtime_sized = 0;
      for (int k = 0; k < fp->nstorages; k++) runtime_sized += fp->storage_bytes[k] < 0;
      printf("7B-shaped %s: %lld bytes planned in %d storages (%d sized at run time), %d dynamic "
             "allocations\n",
             want[i].fn, (long long)fp->peak_bytes, fp->nstorages, runtime_sized, fp->ndynamic);
      CHECK_MSG(fp->peak_bytes <= want[i].peak, "%s: planned %lld bytes, at most %lld expected",
                want[i].fn, (long long)fp->peak_bytes, (long long)want[i].peak);
      CHECK_MSG(fp->nstorages <= want[i].storages && runtime_sized <= want[i].runtime_sized,
                "%s: %d storages (%d sized at run time), at most %d (%d) expected", want[i].fn,
                fp->nstorages, runtime_sized, want[i].storages, want[i].runtime_sized);
      CHECK_MSG(fp->ndynamic == 1, "%s: %d dynamic allocations, only the returned logits expected",
                want[i].fn, fp->ndynamic);
    }
  }
  rx_status_free(s);
  drv_compile_result_free(&r);
  rx_module_free(m);
  remove(path);
  remove(dir);
}

int main(int argc, char **argv) {
  if (argc > 1) tests_dir = argv[1];
  CHECK_MSG(drv_crc32("123456789", 9) == 0xCBF43926u, "crc32 check value");
  CHECK_MSG(drv_crc32("", 0) == 0, "crc32 of nothing");
  CHECK_MSG(crc_bitwise((const unsigned char *)"123456789", 9) == 0xCBF43926u, "bitwise crc32");
  /* The decoder layer at s = 2048 (its `where s <= 2048`): 4 planned storages, 138412032 bytes.
   * Top-level positions: h = rms_norm 0, q/k/v projections 1..3, scores 4, p = softmax 5, ...
   * At position 3, h and the three projections ([s, 256] f32 = 1024 * s bytes = 2 MiB at the
   * bound) are live together: 4 storages of 2 MiB. scores ([4, s, s] f32 = 16 * s * s bytes =
   * 64 MiB) takes h's storage (dead after 3), which grows to 64 MiB; p (same size) takes q's
   * (dead after 4), which grows too; the later [s, 256] and [s, 688] tensors (2752 * s = 5.4 MiB)
   * fit into those. 2 * 67108864 + 2 * 2097152 = 138412032, without reuse 160169984. It is the
   * least storage-granular reuse allows: 4 tensors live at position 3, and scores, p and v (2 MiB)
   * at position 5. The returned y is a dynamic allocation. */
  static const model models[] = {
      {"lit/compile/Inputs/mlp.rx", "mlp", "n", {1, 5, 33}, 1, 2, 6, 5, 9, 8388608, 1},
      {"../examples/decoder.rx", "decoder_layer", "s", {1, 5, 17}, 1, 12, 23, 26, 27, 138412032, 4},
      {"lit/compile/Inputs/convnet.rx", "convnet", "b", {1, 2, 3}, 1, 5, 7, 10, 12, 655360, 2},
      {"lit/compile/Inputs/control.rx", "main", NULL, {0, 0, 0}, 2, 4, 5, 4, 5, -1, 0},
  };
  for (size_t i = 0; i < RX_ARRAY_LEN(models); i++) test_model(&models[i]);
  test_nvrtc();
  test_errors();
  test_plan_rules();
  test_plan_7b();
  return check_finish("test_compile");
}
