/* runtime/artifact.c: loads an artifact (.rxm, runtime/vm_format.h): the header and section table
 * with their bounds, the CRC32 of every section, the manifest (JSON, read with cJSON), the kernels
 * of the device's backend (through the kernel-library loader, from memory), and the host program,
 * every instruction of which is validated here so that the VM (vm.c) never meets a malformed one.
 * Also the inspection accessors of the public API. Every error starts with the artifact's name. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "relaxc/ccl.h"
#include "runtime/autobatch_policy.h"
#include "runtime/vm.h"

#define HEADER_BYTES 16u
#define ENTRY_BYTES                                                                                \
  (RXM_SECTION_NAME_BYTES + 24u) /* name, u64 offset, u64 size, u32 crc, u32 0                     \
                                  */
#define MAX_SECTIONS 65536u

/* ---- CRC-32 (base/crc32.c: zlib's) ---- */
uint32_t rx_rt_crc32(uint32_t crc, const void *data, size_t n) {
  return base_crc32_update(crc, data, n);
}

static uint32_t rd32(const uint8_t *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static uint64_t rd64(const uint8_t *p) { return (uint64_t)rd32(p) | (uint64_t)rd32(p + 4) << 32; }

/* ---- destruction ---- */
static void artifact_destroy(rx_rt_artifact *a) {
  const rx_rt_allocator *al = &a->alloc;
  vm_profile_report(a);
  rx_rt_comm_release(a->comm);
  vm_storages_free(a);
  vm_prepare_free(a);
  vm_weights_free(a);
  rx_rt_library_release(a->library);
  for (size_t i = 0; i < a->nfns; i++) {
    rt_free(al, a->fns[i].param_check);
    for (uint32_t p = 0; a->fns[i].param_name && p < a->fns[i].nparams; p++) {
      rt_free(al, a->fns[i].param_name[p]);
      rt_free(al, a->fns[i].param_sinfo[p]);
    }
    rt_free(al, a->fns[i].param_name);
    rt_free(al, a->fns[i].param_sinfo);
    rt_free(al, a->fns[i].facts);
    rt_free(al, a->fns[i].storages);
    rt_free(al, a->fns[i].batch_cost[0]);
    rt_free(al, a->fns[i].batch_cost[1]);
  }
  rt_free(al, a->fns);
  for (size_t i = 0; i < a->nstrings; i++) rt_free(al, a->strings[i]);
  rt_free(al, a->strings);
  rt_free(al, a->words);
  rt_free(al, a->storages);
  rt_free(al, a->sections);
  rt_free(al, a->manifest);
  rt_free(al, a->targets);
  if (a->mapped)
    vm_unmap(a->data, a->size);
  else
    rt_free(al, a->data);
  rt_free(al, a->name);
  rx_rt_device *d = a->device;
  rt_free(al, a);
  rx_rt_device_release(d);
}

void rx_rt_artifact_retain(rx_rt_artifact *a) {
  if (a) a->refs++;
}
void rx_rt_artifact_release(rx_rt_artifact *a) {
  if (a && --a->refs == 0) artifact_destroy(a);
}
rx_rt_device *rx_rt_artifact_device(const rx_rt_artifact *a) { return a->device; }

/* ---- the container ---- */
static const vm_section *find_section(const rx_rt_artifact *a, const char *name) {
  for (size_t i = 0; i < a->nsections; i++)
    if (!strcmp(a->sections[i].name, name)) return &a->sections[i];
  return NULL;
}

static rx_status parse_container(rx_rt_artifact *a) {
  const uint8_t *d = a->data;
  size_t size = a->size;
  const char *nm = a->name;
  if (size >= 12 && rd32(d) == 0x31525852u) /* "RXR1": runtime/artifact_ranks.c */
    return base_status_make(RX_ERR_INVALID,
                            "%s: a multi-rank artifact (%u ranks, relaxc compile "
                            "--tensor-parallel): load one rank with rx_rt_artifact_load_rank, or "
                            "run it under mpirun",
                            nm, rd32(d + 8));
  if (size >= 4 && rd32(d) != RXM_MAGIC)
    return base_status_make(RX_ERR_INVALID,
                            "%s: not a relaxc artifact (the file starts with "
                            "0x%08x, an artifact with 'RXM1')",
                            nm, rd32(d));
  if (size < HEADER_BYTES)
    return base_status_make(RX_ERR_INVALID,
                            "%s: truncated: the header needs %u bytes, file has %zu "
                            "bytes",
                            nm, HEADER_BYTES, size);
  uint32_t version = rd32(d + 4), count = rd32(d + 8);
  if (version != RXM_VERSION)
    return base_status_make(RX_ERR_UNSUPPORTED,
                            "%s: artifact version %u, this runtime reads "
                            "version %u",
                            nm, version, RXM_VERSION);
  if (rd32(d + 12) != 0)
    return base_status_make(RX_ERR_INVALID,
                            "%s: corrupted header: the reserved word is 0x%08x, "
                            "expected 0",
                            nm, rd32(d + 12));
  if (count > MAX_SECTIONS)
    return base_status_make(RX_ERR_INVALID, "%s: corrupted header: %u sections (at most %u)", nm,
                            count, MAX_SECTIONS);
  uint64_t table_end = HEADER_BYTES + (uint64_t)count * ENTRY_BYTES;
  if (table_end > size)
    return base_status_make(RX_ERR_INVALID,
                            "%s: truncated: the table of %u sections ends at byte "
                            "%llu, file has %zu bytes",
                            nm, count, (unsigned long long)table_end, size);
  a->sections = rt_alloc(&a->alloc, (count + 1) * sizeof *a->sections);
  if (!a->sections) return rt_oom("the section table", count * sizeof *a->sections);
  uint32_t *crcs = rt_alloc(&a->alloc, (count + 1) * sizeof *crcs);
  if (!crcs) return rt_oom("the section table", count * sizeof *crcs);
  rx_status s = NULL;
  for (uint32_t i = 0; i < count && !s; i++) {
    const uint8_t *e = d + HEADER_BYTES + (size_t)i * ENTRY_BYTES;
    vm_section *sec = &a->sections[i];
    size_t len = 0;
    while (len < RXM_SECTION_NAME_BYTES && e[len]) len++;
    bool padded = len < RXM_SECTION_NAME_BYTES;
    for (size_t j = len; j < RXM_SECTION_NAME_BYTES; j++) padded = padded && e[j] == 0;
    memcpy(sec->name, e, len);
    sec->name[len] = '\0';
    for (size_t j = 0; j < len && padded; j++) padded = e[j] >= 0x20 && e[j] < 0x7f;
    uint64_t off = rd64(e + RXM_SECTION_NAME_BYTES), n = rd64(e + RXM_SECTION_NAME_BYTES + 8);
    crcs[i] = rd32(e + RXM_SECTION_NAME_BYTES + 16);
    if (!len || !padded) {
      s = base_status_make(RX_ERR_INVALID,
                           "%s: corrupted section table: entry %u has no valid "
                           "name (printable, NUL-padded to %d bytes)",
                           nm, i, RXM_SECTION_NAME_BYTES);
    } else if (rd32(e + RXM_SECTION_NAME_BYTES + 20) != 0) {
      s = base_status_make(RX_ERR_INVALID,
                           "%s: corrupted section table: section '%s' has a nonzero "
                           "reserved word",
                           nm, sec->name);
    } else if (off < table_end) {
      s = base_status_make(RX_ERR_INVALID,
                           "%s: corrupted section table: section '%s' starts at "
                           "byte %llu, inside the header and section table (%llu bytes)",
                           nm, sec->name, (unsigned long long)off, (unsigned long long)table_end);
    } else if (off > size || n > size - off) {
      unsigned long long end = off + n < off ? ~0ull : (unsigned long long)(off + n);
      s = base_status_make(RX_ERR_INVALID,
                           "%s: truncated: section '%s' ends at byte %llu, file has "
                           "%zu bytes",
                           nm, sec->name, end, size);
    } else {
      sec->data = d + off;
      sec->size = (size_t)n;
      for (uint32_t j = 0; j < i && !s; j++)
        if (!strcmp(a->sections[j].name, sec->name))
          s = base_status_make(RX_ERR_INVALID,
                               "%s: corrupted section table: section '%s' appears "
                               "twice",
                               nm, sec->name);
    }
    a->nsections = i + 1;
  }
  /* bounds first (a truncated file says so), then the contents */
  for (uint32_t i = 0; i < count && !s; i++) {
    uint32_t got = rx_rt_crc32(0, a->sections[i].data, a->sections[i].size);
    if (got != crcs[i])
      s = base_status_make(RX_ERR_INVALID,
                           "%s: section '%s' is corrupted: its CRC32 is 0x%08x, the "
                           "section table records 0x%08x",
                           nm, a->sections[i].name, got, crcs[i]);
  }
  rt_free(&a->alloc, crcs);
  return s;
}

/* ---- the manifest and the targets ---- */
static rx_status parse_manifest(rx_rt_artifact *a) {
  const vm_section *m = find_section(a, "manifest.json");
  if (!m) return base_status_make(RX_ERR_INVALID, "%s: no section 'manifest.json'", a->name);
  a->manifest = rt_alloc(&a->alloc, m->size + 1);
  if (!a->manifest) return rt_oom("the manifest", m->size + 1);
  if (m->size) memcpy(a->manifest, m->data, m->size);
  const char *end = NULL;
  cJSON *root = cJSON_ParseWithLengthOpts(a->manifest, m->size, &end, false);
  if (!root || !cJSON_IsObject(root)) {
    size_t off = end && end >= a->manifest ? (size_t)(end - a->manifest) : 0, line = 1, col = 1;
    for (size_t i = 0; root == NULL && i < off && i < m->size; i++) {
      if (a->manifest[i] == '\n')
        line++, col = 1;
      else
        col++;
    }
    cJSON_Delete(root);
    if (!root)
      return base_status_make(RX_ERR_INVALID, "%s: manifest.json:%zu:%zu: malformed JSON", a->name,
                              line, col);
    return base_status_make(RX_ERR_INVALID, "%s: manifest.json is not a JSON object", a->name);
  }
  cJSON_Delete(root);
  /* the targets: every "<backend>/kernels.json" */
  rx_strbuf t = {0};
  for (size_t i = 0; i < a->nsections; i++) {
    const char *n = a->sections[i].name, *slash = strchr(n, '/');
    if (slash && !strcmp(slash + 1, "kernels.json"))
      base_strbuf_printf(&t, "%s%.*s", t.len ? ", " : "", (int)(slash - n), n);
  }
  a->targets = rt_strdup(&a->alloc, t.data ? t.data : "");
  base_strbuf_free(&t);
  return a->targets ? NULL : rt_oom("the target list", 64);
}

static rx_status load_kernels(rx_rt_artifact *a) {
  rx_rt_device *d = a->device;
  const char *be = rx_rt_backend_name(d->info.backend);
  char key[RXM_SECTION_NAME_BYTES + 32];
  snprintf(key, sizeof key, "%s/kernels.json", be);
  const vm_section *k = find_section(a, key);
  if (!k)
    return base_status_make(RX_ERR_UNSUPPORTED,
                            "%s: no kernels for %s in this artifact (it has "
                            "kernels for: %s); compile it with --target %s",
                            a->name, be, a->targets[0] ? a->targets : "no target", be);
  size_t plen = strlen(be) + 1, nb = 0;
  rx_rt_blob *blobs = rt_alloc(&a->alloc, (a->nsections + 1) * sizeof *blobs);
  if (!blobs) return rt_oom("kernel blobs", a->nsections * sizeof *blobs);
  for (size_t i = 0; i < a->nsections; i++) {
    const vm_section *s = &a->sections[i];
    if (s != k && !strncmp(s->name, be, plen - 1) && s->name[plen - 1] == '/')
      blobs[nb++] = (rx_rt_blob){s->name + plen, s->data, s->size};
  }
  char origin[512];
  snprintf(origin, sizeof origin, "%s: %s", a->name, be);
  rx_status s =
      rt_library_parse(d, origin, (const char *)k->data, k->size, NULL, blobs, nb, &a->library);
  rt_free(&a->alloc, blobs);
  if (!s) vm_profile_init(a);
  return s;
}

/* ---- the host program ---- */
typedef struct hp {
  rx_rt_artifact *a;
  const uint32_t *w;
  size_t n, pos; /* words, cursor */
} hp;

static rx_status hp_bad(const rx_rt_artifact *a, const char *fmt, ...) RX_PRINTF(2, 3);
static rx_status hp_bad(const rx_rt_artifact *a, const char *fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return base_status_make(RX_ERR_INVALID, "%s: host.rxvm: %s", a->name, msg);
}

static bool hp_word(hp *h, uint32_t *out) {
  if (h->pos >= h->n) return false;
  *out = h->w[h->pos++];
  return true;
}

/* Validation of one function's code. */
typedef struct vc {
  rx_rt_artifact *a;
  vm_fn *f;
  uint32_t start;        /* the instruction being checked */
  uint32_t p;            /* the cursor */
  const uint8_t *starts; /* NULL in the first walk; then 1 at every instruction start */
  rx_status err;
} vc;

static bool vbad(vc *c, const char *fmt, ...) RX_PRINTF(2, 3);
static bool vbad(vc *c, const char *fmt, ...) {
  if (c->err) return false;
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  uint32_t op = c->f->code[c->start];
  c->err = base_status_make(RX_ERR_INVALID, "%s: host.rxvm: function '%s': word %u (%s): %s",
                            c->a->name, c->f->name, c->start, vm_op_name(op), msg);
  return false;
}

static bool vreg(vc *c, uint32_t r, bool none_ok) {
  if (r == VM_NONE && none_ok) return true;
  if (r >= c->f->nregs)
    return vbad(c, "register %d is out of range (the function has %u registers)", (int)r,
                c->f->nregs);
  return true;
}
static bool vstr(vc *c, uint32_t s) {
  if (s >= c->a->nstrings)
    return vbad(c, "string %u is out of range (the program has %zu strings)", s, c->a->nstrings);
  return true;
}
static bool vdtype(vc *c, uint32_t t, bool any_ok) {
  if (t >= RX_DTYPE_COUNT || (t == RX_DTYPE_UNKNOWN && !any_ok))
    return vbad(c, "dtype %u is not a known dtype", t);
  return true;
}

/* What one operand's words mean, checked against the function and the program (rxvm_walk has
 * checked that they lie inside the code), and what the loader records on the first walk. */
static bool check_operand(void *ctx, rxvm_operand k, uint32_t at, uint32_t n) {
  vc *c = ctx;
  rx_rt_artifact *a = c->a;
  vm_fn *f = c->f;
  const uint32_t *w = f->code + at;
  uint32_t op = f->code[c->start];
  switch (k) {
  case RXVM_OPND_REG:
  case RXVM_OPND_REG_OPT:
    return vreg(c, w[0], k == RXVM_OPND_REG_OPT);
  case RXVM_OPND_PARAM:
    if (w[0] >= f->nparams)
      return vbad(c, "parameter %u is out of range (the function has %u)", w[0], f->nparams);
    if (!c->starts && f->param_check[w[0]] == VM_NONE) f->param_check[w[0]] = c->start;
    return true;
  case RXVM_OPND_EXPR:
  case RXVM_OPND_VAR:
  case RXVM_OPND_STR:
    if (!vstr(c, w[0])) return false;
    if (!c->starts && op == RXVM_OP_ASSERT && at == c->start + 1)
      f->facts[f->nfacts++] = a->strings[w[0]];
    if (!c->starts && op == RXVM_OP_ALLOC_STORAGE) {
      f->storages[f->nstorages++] = a->strings[w[0]];
      vm_storage *s = &a->storages[a->nstorages++];
      s->fn = (uint32_t)(f - a->fns);
      s->pc = c->start;
      s->bytes = -1;
    }
    return true;
  case RXVM_OPND_DTYPE:
  case RXVM_OPND_DTYPE_KNOWN:
    return vdtype(c, w[0], k == RXVM_OPND_DTYPE);
  case RXVM_OPND_DIMS:
    for (uint32_t i = 0, p = 1; n != VM_NONE && i < n; i++, p += w[p] == RXVM_DIM_CONST ? 3 : 2)
      if (w[p] != RXVM_DIM_CONST && !vstr(c, w[p + 1])) return false;
    return true;
  case RXVM_OPND_EXPRS:
    for (uint32_t i = 0; i < n; i++)
      if (!vstr(c, w[1 + i])) return false;
    return true;
  case RXVM_OPND_REGS:
  case RXVM_OPND_REGS_OPT:
    if (op == RXVM_OP_CALL_FN ||
        op == RXVM_OP_TAIL_CALL_FN) { /* its function: the operand before */
      const vm_fn *callee = &a->fns[w[-1]];
      if (n != callee->nparams)
        return vbad(c, "calls '%s' with %u arguments, it takes %u", callee->name, n,
                    callee->nparams);
    }
    for (uint32_t i = 0; i < n; i++)
      if (!vreg(c, w[1 + i], k == RXVM_OPND_REGS_OPT)) return false;
    return true;
  case RXVM_OPND_PAIRS:
    for (uint32_t i = 0; i < 2 * n; i++)
      if (!vstr(c, w[1 + i])) return false;
    return true;
  case RXVM_OPND_FN:
    if (w[0] >= a->nfns)
      return vbad(c, "function %u is out of range (the program has %zu)", w[0], a->nfns);
    return true;
  case RXVM_OPND_TARGET:
    if (w[0] >= f->len || (c->starts && !c->starts[w[0]]))
      return vbad(c, "jump target %u is not the start of an instruction", w[0]);
    return true;
  case RXVM_OPND_INDEX:
  case RXVM_OPND_COUNT:
    return true;
  }
  return true;
}

/* WEIGHT dst name (its operands checked): a version 4 program, a weight the artifact holds. */
static bool check_weight(vc *c) {
  if (c->a->vm_version < 4)
    return vbad(c, "opcode %s needs host program version 4", vm_op_name(RXVM_OP_WEIGHT));
  const char *name = c->a->strings[c->f->code[c->start + 2]];
  if (!vm_weight_find(c->a, name, NULL))
    return vbad(c, "reads weight '%.200s', which the artifact does not hold", name);
  return true;
}

/* Checks the instruction at c->p and moves past it. */
static bool check_instr(vc *c) {
  c->start = c->p;
  uint32_t op = c->f->code[c->p];
  if ((op == RXVM_OP_TENSOR_TO_SHAPE || op == RXVM_OP_RESHAPE) && c->a->vm_version < 2)
    return vbad(c, "opcode %s needs host program version 2", vm_op_name(op));
  if (op == RXVM_OP_TAIL_CALL_FN && c->a->vm_version < 5)
    return vbad(c, "opcode %s needs host program version 5", vm_op_name(op));
  char err[160];
  uint32_t next = rxvm_walk(c->f->code, c->f->len, c->p, check_operand, c, err, sizeof err);
  if (!next) return c->err ? false : vbad(c, "%s", err);
  if (op == RXVM_OP_WEIGHT && !check_weight(c)) return false;
  c->p = next;
  return true;
}

static rx_status check_function(rx_rt_artifact *a, vm_fn *f) {
  const rx_rt_allocator *al = &a->alloc;
  f->param_check = rt_alloc(al, (f->nparams + 1) * sizeof *f->param_check);
  f->facts = rt_alloc(al, (f->len + 1) * sizeof *f->facts);
  f->storages = rt_alloc(al, (f->len + 1) * sizeof *f->storages);
  uint8_t *starts = rt_alloc(al, f->len + 1);
  if (!f->param_check || !f->facts || !f->storages || !starts) {
    rt_free(al, starts);
    return rt_oom("a function of the host program", f->len);
  }
  for (uint32_t i = 0; i < f->nparams; i++) f->param_check[i] = VM_NONE;
  vc c = {a, f, 0, 0, NULL, NULL};
  /* first walk: operands, and where instructions start; second: the jump targets */
  while (c.p < f->len && !c.err) {
    starts[c.p] = 1;
    check_instr(&c);
  }
  c.p = 0;
  c.starts = starts;
  while (c.p < f->len && !c.err) check_instr(&c);
  rt_free(al, starts);
  return c.err;
}

static rx_status parse_host(rx_rt_artifact *a) {
  const vm_section *s = find_section(a, "host.rxvm");
  if (!s) return base_status_make(RX_ERR_INVALID, "%s: no section 'host.rxvm'", a->name);
  if (s->size % 4) return hp_bad(a, "%zu bytes, not a whole number of 32-bit words", s->size);
  a->nwords = s->size / 4;
  a->words = rt_alloc(&a->alloc, (a->nwords + 1) * sizeof *a->words);
  if (!a->words) return rt_oom("the host program", s->size);
  for (size_t i = 0; i < a->nwords; i++) a->words[i] = rd32(s->data + 4 * i);
  hp h = {a, a->words, a->nwords, 0};
  uint32_t magic = 0, version = 0, count = 0;
  if (!hp_word(&h, &magic) || magic != RXVM_MAGIC)
    return hp_bad(a, "not a host program (magic 0x%08x, expected 0x%08x 'RXVM')", magic,
                  RXVM_MAGIC);
  if (!hp_word(&h, &version)) return hp_bad(a, "truncated: no version");
  if (version < RXVM_VERSION_MIN || version > RXVM_VERSION)
    return base_status_make(RX_ERR_UNSUPPORTED,
                            "%s: host program version %u, this runtime reads "
                            "versions %u to %u",
                            a->name, version, RXVM_VERSION_MIN, RXVM_VERSION);
  a->vm_version = version;
  if (!hp_word(&h, &count)) return hp_bad(a, "truncated: no string count");
  if (count > h.n - h.pos) return hp_bad(a, "%u strings do not fit in %zu words", count, h.n);
  a->strings = rt_alloc(&a->alloc, ((size_t)count + 1) * sizeof *a->strings);
  if (!a->strings) return rt_oom("the strings of the host program", count);
  for (uint32_t i = 0; i < count; i++) {
    uint32_t len = 0;
    if (!hp_word(&h, &len)) return hp_bad(a, "truncated in string %u", i);
    size_t words = ((size_t)len + 3) / 4;
    if (words > h.n - h.pos)
      return hp_bad(a, "string %u of %u bytes runs past the end of the section", i, len);
    char *str = rt_alloc(&a->alloc, (size_t)len + 1);
    if (!str) return rt_oom("a string of the host program", (size_t)len + 1);
    a->strings[a->nstrings++] = str;
    memcpy(str, s->data + 4 * h.pos, len);
    if (memchr(str, 0, len)) return hp_bad(a, "string %u contains a NUL byte", i);
    h.pos += words;
  }
  if (!hp_word(&h, &count)) return hp_bad(a, "truncated: no function count");
  if (count > (h.n - h.pos) / 4)
    return hp_bad(a, "%u functions do not fit in %zu words", count, h.n);
  a->fns = rt_alloc(&a->alloc, ((size_t)count + 1) * sizeof *a->fns);
  if (!a->fns) return rt_oom("the functions of the host program", count);
  size_t total_code = 0;
  for (uint32_t i = 0; i < count; i++) {
    uint32_t name, np, nr, len;
    if (!hp_word(&h, &name) || !hp_word(&h, &np) || !hp_word(&h, &nr) || !hp_word(&h, &len))
      return hp_bad(a, "truncated in the header of function %u", i);
    if (name >= a->nstrings)
      return hp_bad(a, "function %u: name string %u is out of range (%zu strings)", i, name,
                    a->nstrings);
    vm_fn *f = &a->fns[a->nfns++];
    f->name = a->strings[name];
    if (np > nr)
      return hp_bad(a, "function '%s': %u parameters but only %u registers", f->name, np, nr);
    if (nr > (1u << 20))
      return hp_bad(a, "function '%s': %u registers (at most %u)", f->name, nr, 1u << 20);
    if (len > h.n - h.pos)
      return hp_bad(a, "function '%s': %u words of code run past the end of the section", f->name,
                    len);
    for (uint32_t j = 0; j < i; j++)
      if (!strcmp(a->fns[j].name, f->name))
        return hp_bad(a, "function '%s' is defined twice", f->name);
    f->nparams = np;
    f->nregs = nr;
    f->len = len;
    f->code = h.w + h.pos;
    h.pos += len;
    total_code += len;
    if (version >= 3) { /* the register names */
      if (nr > h.n - h.pos)
        return hp_bad(a,
                      "function '%s': the names of its %u registers run past the end of the "
                      "section",
                      f->name, nr);
      f->reg_names = h.w + h.pos;
      for (uint32_t r = 0; r < nr; r++)
        if (f->reg_names[r] >= a->nstrings)
          return hp_bad(a,
                        "function '%s': the name of register %u is string %u, out of range "
                        "(%zu strings)",
                        f->name, r, f->reg_names[r], a->nstrings);
      h.pos += nr;
    }
  }
  if (h.pos != h.n) return hp_bad(a, "%zu words after the last function", h.n - h.pos);
  a->storages = rt_alloc(&a->alloc, (total_code + 1) * sizeof *a->storages);
  if (!a->storages) return rt_oom("the planned storages", total_code);
  for (size_t i = 0; i < a->nfns; i++) RX_RETURN_IF_ERROR(check_function(a, &a->fns[i]));
  return NULL;
}

/* ---- loading ---- */
/* Each function's parameters as the manifest names and describes them ("params": [{"name",
 * "sinfo"}], in order): kept for the parameters the host program does not check as tensors. A
 * manifest without them leaves NULL ("" and "?" then). */
static rx_status parse_param_sigs(rx_rt_artifact *a) {
  cJSON *root = cJSON_Parse(a->manifest);
  const cJSON *fns = cJSON_GetObjectItemCaseSensitive(root, "functions");
  rx_status s = NULL;
  for (size_t i = 0; i < a->nfns && !s; i++) {
    vm_fn *f = &a->fns[i];
    const cJSON *mf = NULL, *it = NULL;
    cJSON_ArrayForEach(it, fns) {
      const cJSON *n = cJSON_GetObjectItemCaseSensitive(it, "name");
      if (!mf && cJSON_IsString(n) && !strcmp(n->valuestring, f->name)) mf = it;
    }
    const cJSON *params = cJSON_GetObjectItemCaseSensitive(mf, "params");
    if (!cJSON_IsArray(params)) continue;
    f->param_name = rt_alloc(&a->alloc, (f->nparams + 1) * sizeof *f->param_name);
    f->param_sinfo = rt_alloc(&a->alloc, (f->nparams + 1) * sizeof *f->param_sinfo);
    if (!f->param_name || !f->param_sinfo) {
      s = rt_oom("parameter names", f->nparams * sizeof(char *));
      break;
    }
    for (uint32_t p = 0; p < f->nparams && !s; p++) {
      const cJSON *mp = cJSON_GetArrayItem(params, (int)p);
      const cJSON *n = cJSON_GetObjectItemCaseSensitive(mp, "name"),
                  *si = cJSON_GetObjectItemCaseSensitive(mp, "sinfo");
      if (cJSON_IsString(n) && !(f->param_name[p] = rt_strdup(&a->alloc, n->valuestring)))
        s = rt_oom("a parameter name", strlen(n->valuestring));
      if (cJSON_IsString(si) && !(f->param_sinfo[p] = rt_strdup(&a->alloc, si->valuestring)))
        s = rt_oom("a parameter's struct info", strlen(si->valuestring));
    }
  }
  cJSON_Delete(root);
  return s;
}

/* The batching policy's FSM table (section RT_ABP_SECTION, relaxc compile --batch-policy), when
 * present: checked as the batcher will read it, and every function it names a function of the
 * host program, so that a table of another module is refused at load, by name. */
static rx_status check_batch_policy(const rx_rt_artifact *a) {
  const vm_section *s = find_section(a, RT_ABP_SECTION);
  if (!s) return NULL;
  char where[RXM_SECTION_NAME_BYTES + 320];
  snprintf(where, sizeof where, "%.256s: section '%s'", a->name, RT_ABP_SECTION);
  rt_abp_table t;
  RX_RETURN_IF_ERROR(rt_abp_parse(s->data, s->size, where, &t));
  for (size_t f = 0; f < t.nfns; f++) {
    bool found = false;
    for (size_t i = 0; i < a->nfns && !found; i++)
      found = strlen(a->fns[i].name) == t.name_len[f] &&
              !memcmp(a->fns[i].name, t.name[f], t.name_len[f]);
    if (!found)
      return base_status_make(RX_ERR_INVALID,
                              "%s: the FSM table's function %zu, '%.*s', is not a function of the "
                              "artifact",
                              where, f, (int)(t.name_len[f] > 64 ? 64 : t.name_len[f]), t.name[f]);
  }
  return NULL;
}

/* The artifact over data[size]: owned by the artifact from here (a mapping when mapped, else
 * memory of the allocator), released with it on any error. */
static rx_status load(rx_rt_device *d, uint8_t *data, size_t size, bool mapped, const char *name,
                      rx_rt_artifact **out_artifact) {
  const rx_rt_allocator *al = d ? &d->alloc : &rt_default_allocator;
  rx_rt_artifact *a = rt_alloc(al, sizeof *a);
  if (!a) {
    mapped ? vm_unmap(data, size) : rt_free(al, data);
    return rt_oom("an artifact", sizeof *a);
  }
  a->refs = 1;
  a->alloc = *al;
  a->device = d;
  if (d) rx_rt_device_retain(d);
  a->data = data;
  a->size = size;
  a->mapped = mapped;
  a->name = rt_strdup(al, name && *name ? name : "<memory>");
  rx_status s = a->name ? NULL : rt_oom("an artifact", size);
  if (!s) s = parse_container(a);
  if (!s) s = parse_manifest(a);
  if (!s) s = vm_weights_parse(a);
  if (!s) s = parse_host(a);
  if (!s) s = parse_param_sigs(a);
  if (!s) s = check_batch_policy(a);
  if (!s) s = vm_weights_bind(a);
  if (!s && d) s = load_kernels(a);
  if (!s) s = vm_prepare(a);
  if (!s && d) s = vm_weights_upload(a);
  if (s) {
    artifact_destroy(a);
    return s;
  }
  *out_artifact = a;
  return NULL;
}

rx_status rx_rt_artifact_load_memory(rx_rt_device *d, const void *data, size_t size,
                                     const char *name, rx_rt_artifact **out_artifact) {
  if (!out_artifact) return base_status_make(RX_ERR_INVALID, "rx_rt_artifact_load_memory: NULL");
  *out_artifact = NULL;
  if (!data && size) return base_status_make(RX_ERR_INVALID, "rx_rt_artifact_load_memory: NULL");
  if (d && d->lost) return rt_device_error(d);
  const rx_rt_allocator *al = d ? &d->alloc : &rt_default_allocator;
  uint8_t *copy = rt_alloc(al, size + 1);
  if (!copy) return rt_oom("an artifact", size);
  if (size) memcpy(copy, data, size);
  return load(d, copy, size, false, name, out_artifact);
}

rx_status rt_artifact_load_owned(rx_rt_device *d, uint8_t *data, size_t size, bool mapped,
                                 const char *name, rx_rt_artifact **out_artifact) {
  return load(d, data, size, mapped, name, out_artifact);
}

rx_status rx_rt_artifact_load(rx_rt_device *d, const char *path, rx_rt_artifact **out_artifact) {
  if (!out_artifact || !path) return base_status_make(RX_ERR_INVALID, "rx_rt_artifact_load: NULL");
  *out_artifact = NULL;
  if (d && d->lost) return rt_device_error(d);
  uint8_t *map = NULL;
  size_t size = 0;
  /* mapped, not copied: its weights may be GBs */
  RX_RETURN_IF_ERROR(vm_map_file(path, "an artifact", &map, &size));
  return load(d, map, size, map != NULL, path, out_artifact);
}

/* ---- inspection ---- */
size_t rx_rt_artifact_section_count(const rx_rt_artifact *a) { return a->nsections; }
bool rx_rt_artifact_section(const rx_rt_artifact *a, size_t i, const char **out_name,
                            const void **out_data, size_t *out_size) {
  if (out_name) *out_name = NULL;
  if (out_data) *out_data = NULL;
  if (out_size) *out_size = 0;
  if (i >= a->nsections) return false;
  if (out_name) *out_name = a->sections[i].name;
  if (out_data) *out_data = a->sections[i].data;
  if (out_size) *out_size = a->sections[i].size;
  return true;
}
const char *rx_rt_artifact_manifest(const rx_rt_artifact *a) { return a->manifest; }
const char *rx_rt_artifact_targets(const rx_rt_artifact *a) { return a->targets; }
size_t rx_rt_artifact_function_count(const rx_rt_artifact *a) { return a->nfns; }
const char *rx_rt_artifact_function_name(const rx_rt_artifact *a, size_t fn) {
  return fn < a->nfns ? a->fns[fn].name : NULL;
}
size_t rx_rt_artifact_function_param_count(const rx_rt_artifact *a, size_t fn) {
  return fn < a->nfns ? a->fns[fn].nparams : 0;
}
bool rx_rt_artifact_function_param(const rx_rt_artifact *a, size_t fn, size_t param,
                                   rx_rt_param_info *out_info) {
  *out_info = (rx_rt_param_info){"", "?", RX_DTYPE_UNKNOWN, -1};
  if (fn >= a->nfns || param >= a->fns[fn].nparams) return false;
  uint32_t pc = a->fns[fn].param_check[param];
  if (pc == VM_NONE) { /* a Prim, a Shape, an Object: as the manifest describes it */
    const vm_fn *f = &a->fns[fn];
    if (f->param_name && f->param_name[param]) out_info->name = f->param_name[param];
    if (f->param_sinfo && f->param_sinfo[param]) out_info->expected = f->param_sinfo[param];
    return true;
  }
  /* check_tensor reg param name expected dtype ndim ... */
  const uint32_t *w = a->fns[fn].code + pc;
  out_info->name = a->strings[w[3]];
  out_info->expected = a->strings[w[4]];
  out_info->dtype = (rx_dtype)w[5];
  out_info->ndim = w[6] == VM_NONE ? -1 : (int)w[6];
  return true;
}
size_t rx_rt_artifact_function_fact_count(const rx_rt_artifact *a, size_t fn) {
  return fn < a->nfns ? a->fns[fn].nfacts : 0;
}
const char *rx_rt_artifact_function_fact(const rx_rt_artifact *a, size_t fn, size_t i) {
  return fn < a->nfns && i < a->fns[fn].nfacts ? a->fns[fn].facts[i] : NULL;
}
size_t rx_rt_artifact_function_storage_count(const rx_rt_artifact *a, size_t fn) {
  return fn < a->nfns ? a->fns[fn].nstorages : 0;
}
const char *rx_rt_artifact_function_storage(const rx_rt_artifact *a, size_t fn, size_t i) {
  return fn < a->nfns && i < a->fns[fn].nstorages ? a->fns[fn].storages[i] : NULL;
}
void rx_rt_string_free(char *s) { rt_free(&rt_default_allocator, s); }

/* ---- disassembly (rxvm_disasm_fn, runtime/vm_walk.c: the same text as the compiler's dump) ----
 */
const char *vm_op_name(uint32_t op) { return rxvm_op_name(op); }

char *rx_rt_artifact_disassemble(const rx_rt_artifact *a, size_t fn) {
  if (fn >= a->nfns) return NULL;
  const vm_fn *f = &a->fns[fn];
  rx_strbuf b = {0};
  rxvm_disasm_fn(&b, f->name, f->nparams, f->code, f->len, f->reg_names, f->nregs,
                 (const char *const *)a->strings, (uint32_t)a->nstrings);
  char *text = base_strbuf_take(&b);
  char *out = rt_strdup(&rt_default_allocator, text);
  free(text);
  return out;
}
