/* driver/artifact.c: the .rxm container (runtime/vm_format.h, docs/artifact.md): header,
 * section table, per-section CRC-32, sections aligned to 16 bytes. */
#include "driver.h"

#include "../runtime/vm_format.h"
#include "relaxc/compiler.h" /* RELAXC_VERSION */

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- CRC-32 (zlib polynomial, reflected, table-driven) ---- */
uint32_t rx_crc32(const void *data, size_t n) {
  static uint32_t table[256];
  static bool ready;
  if (!ready) { /* idempotent: a race writes the same values */
    for (uint32_t i = 0; i < 256; i++) {
      uint32_t c = i;
      for (int k = 0; k < 8; k++) c = c & 1 ? 0xEDB88320u ^ (c >> 1) : c >> 1;
      table[i] = c;
    }
    ready = true;
  }
  const unsigned char *p = data;
  uint32_t c = 0xFFFFFFFFu;
  for (size_t i = 0; i < n; i++) c = table[(c ^ p[i]) & 0xff] ^ (c >> 8);
  return c ^ 0xFFFFFFFFu;
}

/* ---- JSON helpers ---- */
static void jstr(rx_strbuf *o, const char *s) { rx_strbuf_json_string(o, s); }
static void jsinfo(rx_strbuf *o, const rx_sinfo *s) {
  if (!s) {
    rx_strbuf_append(o, "null");
    return;
  }
  rx_strbuf b = {0};
  rx_sinfo_print(&b, s);
  jstr(o, b.data ? b.data : "");
  rx_strbuf_free(&b);
}
static void jexpr(rx_strbuf *o, const rx_expr *e) {
  rx_strbuf b = {0};
  rx_expr_print(&b, e);
  jstr(o, b.data ? b.data : "");
  rx_strbuf_free(&b);
}

void rx_artifact_manifest(rx_strbuf *o, const rx_module *m, const rx_compile_result *r) {
  (void)m;
  rx_strbuf_append(o, "{\n  \"format\": \"relaxc-artifact\",\n  \"version\": 1,\n  \"compiler\": ");
  jstr(o, "relaxc " RELAXC_VERSION);
  rx_strbuf_append(o, ",\n  \"functions\": [");
  int64_t peak = 0;
  for (int i = 0; i < r->plan.nfns; i++) {
    const rx_fn_plan *fp = &r->plan.fns[i];
    const rx_graph_fn *f = fp->fn;
    if (fp->peak_bytes > peak) peak = fp->peak_bytes;
    rx_strbuf_printf(o, "%s\n    {\"name\": ", i ? "," : "");
    jstr(o, f->name);
    rx_strbuf_printf(o, ", \"index\": %d,\n     \"params\": [", i);
    for (int k = 0; k < f->nparams; k++) {
      rx_strbuf_append(o, k ? ", {\"name\": " : "{\"name\": ");
      jstr(o, f->params[k]->name);
      rx_strbuf_append(o, ", \"sinfo\": ");
      jsinfo(o, f->params[k]->sinfo);
      rx_strbuf_putc(o, '}');
    }
    rx_strbuf_append(o, "],\n     \"result\": ");
    jsinfo(o, f->ret ? f->ret : (f->body.result ? f->body.result->sinfo : NULL));
    rx_strbuf_append(o, ", \"facts\": [");
    for (int k = 0; k < f->nfacts; k++) {
      if (k) rx_strbuf_append(o, ", ");
      jexpr(o, f->facts[k]);
    }
    rx_strbuf_printf(o, "],\n     \"memory\": {\"planned_bytes\": %lld, \"storages\": [",
                     (long long)fp->peak_bytes);
    for (int s = 0; s < fp->nstorages; s++)
      rx_strbuf_printf(o, "%s%lld", s ? ", " : "", (long long)fp->storage_bytes[s]);
    rx_strbuf_printf(o, "], \"planned_bytes_without_reuse\": %lld, \"dynamic_allocations\": %d}}",
                     (long long)fp->unplanned_bytes, fp->ndynamic);
  }
  rx_strbuf_printf(o, "\n  ],\n  \"planned_bytes\": %lld,\n  \"programs\": %d,\n  \"targets\": [",
                   (long long)peak, r->nprograms);
  for (int i = 0; i < r->ntargets; i++) {
    const rx_target_output *to = &r->targets[i];
    const char *kind = rx_target_kind_name(to->target->kind);
    rx_strbuf_printf(o, "%s\n    {\"backend\": ", i ? "," : "");
    jstr(o, kind);
    rx_strbuf_append(o, ", \"target\": ");
    jstr(o, to->target->name);
    rx_strbuf_printf(o,
                     ", \"kernels\": %d, \"kernels_json\": \"%s/kernels.json\", \"binaries\": %s, "
                     "\"note\": ",
                     to->nkernels, kind, to->binaries ? "true" : "false");
    jstr(o, to->note);
    rx_strbuf_putc(o, '}');
  }
  rx_strbuf_append(o, "\n  ]\n}\n");
}

/* ---- the container ---- */
typedef struct section {
  char name[RXM_SECTION_NAME_BYTES];
  const void *data;
  size_t size;
  void *owned; /* freed after writing */
} section;

typedef RX_VEC(section) secvec;

static void add(secvec *v, const char *name, const void *data, size_t size, void *owned) {
  section s;
  memset(&s, 0, sizeof s);
  RX_ASSERT(strlen(name) < RXM_SECTION_NAME_BYTES);
  memcpy(s.name, name, strlen(name));
  s.data = data;
  s.size = size;
  s.owned = owned;
  RX_VEC_PUSH(v, s);
}

static void add_text(secvec *v, const char *name, rx_strbuf *b) {
  size_t len = b->len;
  char *t = rx_strbuf_take(b);
  add(v, name, t, len, t);
}

static void put32(unsigned char *p, uint32_t x) {
  for (int i = 0; i < 4; i++) p[i] = (unsigned char)(x >> (8 * i));
}
static void put64(unsigned char *p, uint64_t x) {
  for (int i = 0; i < 8; i++) p[i] = (unsigned char)(x >> (8 * i));
}

static size_t align16(size_t x) { return (x + 15) & ~(size_t)15; }

void rx_artifact_build(const rx_module *m, const rx_compile_result *r, unsigned char **out_bytes,
                       size_t *out_len) {
  secvec secs = {0};
  rx_strbuf b = {0};
  rx_artifact_manifest(&b, m, r);
  add_text(&secs, "manifest.json", &b);
  unsigned char *host = rx_malloc(r->host.nwords * 4 + 1);
  for (size_t i = 0; i < r->host.nwords; i++) put32(host + 4 * i, r->host.words[i]);
  add(&secs, "host.rxvm", host, r->host.nwords * 4, host);
  for (int t = 0; t < r->ntargets; t++) {
    const rx_target_output *to = &r->targets[t];
    const char *kind = rx_target_kind_name(to->target->kind);
    char name[RXM_SECTION_NAME_BYTES + 300];
    rx_kernels_json(&b, to->target, to->programs, (const rx_kernel_list *const *)to->kernels,
                    to->nprograms);
    snprintf(name, sizeof name, "%s/kernels.json", kind);
    add_text(&secs, name, &b);
    for (int i = 0; i < to->nkernels; i++) {
      const rx_kernel *k = to->flat[i];
      /* file names fit the section table (checked by the pipeline) */
      snprintf(name, sizeof name, "%s/%s.%s", kind, k->name, rx_lang_ext(k->lang));
      add(&secs, name, k->source, strlen(k->source), NULL);
      if (k->spirv && k->binary) {
        snprintf(name, sizeof name, "%s/%s", kind, k->binary);
        unsigned char *sp = rx_malloc(k->spirv_words * 4 + 1);
        for (size_t j = 0; j < k->spirv_words; j++) put32(sp + 4 * j, k->spirv[j]);
        add(&secs, name, sp, k->spirv_words * 4, sp);
      }
      if (to->cubin && to->cubin[i] && k->binary) {
        snprintf(name, sizeof name, "%s/%s", kind, k->binary);
        add(&secs, name, to->cubin[i], to->cubin_len[i], NULL);
      }
      if (to->ptx && to->ptx[i] && k->ptx) {
        snprintf(name, sizeof name, "%s/%s", kind, k->ptx);
        add(&secs, name, to->ptx[i], to->ptx_len[i], NULL);
      }
    }
  }
  size_t table = 16 + secs.len * (RXM_SECTION_NAME_BYTES + 24);
  size_t total = align16(table);
  for (size_t i = 0; i < secs.len; i++) total = align16(total + secs.data[i].size);
  unsigned char *o = rx_calloc(total ? total : 1, 1);
  put32(o, RXM_MAGIC);
  put32(o + 4, RXM_VERSION);
  put32(o + 8, (uint32_t)secs.len);
  put32(o + 12, 0);
  size_t off = align16(table);
  for (size_t i = 0; i < secs.len; i++) {
    unsigned char *e = o + 16 + i * (RXM_SECTION_NAME_BYTES + 24);
    memcpy(e, secs.data[i].name, RXM_SECTION_NAME_BYTES);
    put64(e + RXM_SECTION_NAME_BYTES, off);
    put64(e + RXM_SECTION_NAME_BYTES + 8, secs.data[i].size);
    put32(e + RXM_SECTION_NAME_BYTES + 16, rx_crc32(secs.data[i].data, secs.data[i].size));
    put32(e + RXM_SECTION_NAME_BYTES + 20, 0);
    if (secs.data[i].size) memcpy(o + off, secs.data[i].data, secs.data[i].size);
    off = align16(off + secs.data[i].size);
    free(secs.data[i].owned);
  }
  RX_ASSERT(off == total);
  free(secs.data);
  rx_strbuf_free(&b);
  *out_bytes = o;
  *out_len = total;
}

rx_status rx_artifact_write_file(const char *path, const unsigned char *bytes, size_t len) {
  FILE *f = fopen(path, "wb");
  if (!f) return rx_status_make(RX_ERR_IO, "cannot write '%s': %s", path, strerror(errno));
  bool ok = fwrite(bytes, 1, len, f) == len;
  ok = (fclose(f) == 0) && ok;
  if (!ok) return rx_status_make(RX_ERR_IO, "writing '%s' failed: %s", path, strerror(errno));
  return NULL;
}
