/* driver/artifact.c: the .rxm container (runtime/vm_format.h, docs/artifact.md): header,
 * section table, per-section CRC-32, sections aligned to 16 bytes. */
#include "driver.h"

#include "../runtime/vm_format.h"
#include "relaxc/compiler.h" /* RELAXC_VERSION */

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- CRC-32 (base/crc32.c) ---- */
uint32_t drv_crc32(const void *data, size_t n) { return base_crc32_update(0, data, n); }

/* ---- JSON helpers ---- */
static void jstr(rx_strbuf *o, const char *s) { base_strbuf_json_string(o, s); }
static void jsinfo(rx_strbuf *o, const rx_sinfo *s) {
  if (!s) {
    base_strbuf_append(o, "null");
    return;
  }
  rx_strbuf b = {0};
  ir_sinfo_print(&b, s);
  jstr(o, b.data ? b.data : "");
  base_strbuf_free(&b);
}
static void jexpr(rx_strbuf *o, const rx_expr *e) {
  rx_strbuf b = {0};
  sym_expr_print(&b, e);
  jstr(o, b.data ? b.data : "");
  base_strbuf_free(&b);
}

/* "weights": where the image lives, its tensors and their bytes. */
static void manifest_weights(rx_strbuf *o, const rx_module *m, const rx_compile_result *r) {
  uint64_t bytes = 0;
  for (size_t i = 0; i < r->weights.count; i++) bytes += ir_module_weight_at(m, i)->bytes;
  base_strbuf_printf(o, ",\n  \"weights\": {\"tensors\": %zu, \"bytes\": %llu, ", r->weights.count,
                     (unsigned long long)bytes);
  if (!r->weights_ref) {
    base_strbuf_append(o, "\"section\": \"" RXM_WEIGHTS_SECTION "\", \"file\": null}");
    return;
  }
  base_strbuf_append(o, "\"section\": null, \"file\": ");
  jstr(o, r->weights_ref);
  base_strbuf_printf(o, ", \"file_bytes\": %llu, \"crc32\": %lu}",
                     (unsigned long long)r->weights.size, (unsigned long)r->weights_crc);
}

void drv_artifact_manifest(rx_strbuf *o, const rx_module *m, const rx_compile_result *r) {
  base_strbuf_append(o,
                     "{\n  \"format\": \"relaxc-artifact\",\n  \"version\": 1,\n  \"compiler\": ");
  jstr(o, "relaxc " RELAXC_VERSION);
  base_strbuf_append(o, ",\n  \"functions\": [");
  int64_t peak = 0;
  for (int i = 0; i < r->plan.nfns; i++) {
    const rx_fn_plan *fp = &r->plan.fns[i];
    const rx_graph_fn *f = fp->fn;
    if (fp->peak_bytes > peak) peak = fp->peak_bytes;
    base_strbuf_printf(o, "%s\n    {\"name\": ", i ? "," : "");
    jstr(o, f->name);
    base_strbuf_printf(o, ", \"index\": %d,\n     \"params\": [", i);
    for (int k = 0; k < f->nparams; k++) {
      base_strbuf_append(o, k ? ", {\"name\": " : "{\"name\": ");
      jstr(o, f->params[k]->name);
      base_strbuf_append(o, ", \"sinfo\": ");
      jsinfo(o, f->params[k]->sinfo);
      const rx_weight *w = ir_param_weight(m, f->params[k]);
      if (w) {
        base_strbuf_append(o, ", \"weight\": ");
        jstr(o, w->name);
      }
      base_strbuf_putc(o, '}');
    }
    base_strbuf_append(o, "],\n     \"result\": ");
    jsinfo(o, f->ret ? f->ret : (f->body.result ? f->body.result->sinfo : NULL));
    base_strbuf_append(o, ", \"facts\": [");
    for (int k = 0; k < f->nfacts; k++) {
      if (k) base_strbuf_append(o, ", ");
      jexpr(o, f->facts[k]);
    }
    base_strbuf_printf(o, "],\n     \"memory\": {\"planned_bytes\": %lld, \"storages\": [",
                       (long long)fp->peak_bytes);
    for (int s = 0; s < fp->nstorages; s++)
      base_strbuf_printf(o, "%s%lld", s ? ", " : "", (long long)fp->storage_bytes[s]);
    base_strbuf_printf(o, "], \"planned_bytes_without_reuse\": %lld, \"dynamic_allocations\": %d}}",
                       (long long)fp->unplanned_bytes, fp->ndynamic);
  }
  base_strbuf_printf(o, "\n  ],\n  \"planned_bytes\": %lld,\n  \"programs\": %d,\n  \"targets\": [",
                     (long long)peak, r->nprograms);
  for (int i = 0; i < r->ntargets; i++) {
    const rx_target_output *to = &r->targets[i];
    const char *kind = tgt_target_kind_name(to->target->kind);
    base_strbuf_printf(o, "%s\n    {\"backend\": ", i ? "," : "");
    jstr(o, kind);
    base_strbuf_append(o, ", \"target\": ");
    jstr(o, to->target->name);
    base_strbuf_printf(
        o,
        ", \"kernels\": %d, \"kernels_json\": \"%s/kernels.json\", \"binaries\": %s, "
        "\"note\": ",
        to->nkernels, kind, to->binaries ? "true" : "false");
    jstr(o, to->note);
    base_strbuf_putc(o, '}');
  }
  base_strbuf_append(o, "\n  ]");
  if (r->weights.count) manifest_weights(o, m, r);
  base_strbuf_append(o, "\n}\n");
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
  char *t = base_strbuf_take(b);
  add(v, name, t, len, t);
}

static void put32(unsigned char *p, uint32_t x) {
  for (int i = 0; i < 4; i++) p[i] = (unsigned char)(x >> (8 * i));
}
static void put64(unsigned char *p, uint64_t x) {
  for (int i = 0; i < 8; i++) p[i] = (unsigned char)(x >> (8 * i));
}

static size_t align16(size_t x) { return (x + 15) & ~(size_t)15; }

#define ENTRY_BYTES (RXM_SECTION_NAME_BYTES + 24) /* name, u64 offset, u64 size, u32 crc, u32 0 */

/* The manifest, the host program, then per target its kernels.json and kernel files. */
static void small_sections(const rx_module *m, const rx_compile_result *r, secvec *secs) {
  rx_strbuf b = {0};
  drv_artifact_manifest(&b, m, r);
  add_text(secs, "manifest.json", &b);
  unsigned char *host = base_malloc(r->host.nwords * 4 + 1);
  for (size_t i = 0; i < r->host.nwords; i++) put32(host + 4 * i, r->host.words[i]);
  add(secs, "host.rxvm", host, r->host.nwords * 4, host);
  for (size_t i = 0; i < ir_module_section_count(m); i++) { /* llm.json, tokenizer.json, ... */
    const rx_section *sc = ir_module_section_at(m, i);
    add(secs, sc->name, sc->data, sc->size, NULL);
  }
  for (int t = 0; t < r->ntargets; t++) {
    const rx_target_output *to = &r->targets[t];
    const char *kind = tgt_target_kind_name(to->target->kind);
    char name[RXM_SECTION_NAME_BYTES + 300];
    cg_kernels_json(&b, to->target, to->programs, (const rx_kernel_list *const *)to->kernels,
                    to->nprograms);
    snprintf(name, sizeof name, "%s/kernels.json", kind);
    add_text(secs, name, &b);
    for (int i = 0; i < to->nkernels; i++) {
      const rx_kernel *k = to->flat[i];
      /* file names fit the section table (checked by the pipeline) */
      snprintf(name, sizeof name, "%s/%s.%s", kind, k->name, cg_lang_ext(k->lang));
      add(secs, name, k->source, strlen(k->source), NULL);
      if (k->spirv && k->binary) {
        snprintf(name, sizeof name, "%s/%s", kind, k->binary);
        unsigned char *sp = base_malloc(k->spirv_words * 4 + 1);
        for (size_t j = 0; j < k->spirv_words; j++) put32(sp + 4 * j, k->spirv[j]);
        add(secs, name, sp, k->spirv_words * 4, sp);
      }
      if (to->cubin && to->cubin[i] && k->binary) {
        snprintf(name, sizeof name, "%s/%s", kind, k->binary);
        add(secs, name, to->cubin[i], to->cubin_len[i], NULL);
      }
      if (to->ptx && to->ptx[i] && k->ptx) {
        snprintf(name, sizeof name, "%s/%s", kind, k->ptx);
        add(secs, name, to->ptx[i], to->ptx_len[i], NULL);
      }
    }
  }
  base_strbuf_free(&b);
}

void drv_artifact_build(const rx_module *m, rx_compile_result *r, bool with_weights) {
  secvec secs = {0};
  small_sections(m, r, &secs);
  bool inside = r->weights.count && !r->weights_ref; /* the last section: weights.safetensors */
  size_t nsec = secs.len + inside, table = 16 + nsec * ENTRY_BYTES, end = align16(table);
  for (size_t i = 0; i < secs.len; i++) end = align16(end + secs.data[i].size);
  /* the weights section starts RXM_WEIGHTS_ALIGN-aligned, so its tensors are aligned in the file */
  size_t woff =
      inside ? (end + RXM_WEIGHTS_ALIGN - 1) / RXM_WEIGHTS_ALIGN * RXM_WEIGHTS_ALIGN : end;
  size_t total = inside ? align16(woff + (size_t)r->weights.size) : end;
  size_t len = inside && !with_weights ? woff : total;
  unsigned char *o = base_calloc(len ? len : 1, 1);
  put32(o, RXM_MAGIC);
  put32(o + 4, RXM_VERSION);
  put32(o + 8, (uint32_t)nsec);
  put32(o + 12, 0);
  size_t off = align16(table);
  for (size_t i = 0; i < secs.len; i++) {
    unsigned char *e = o + 16 + i * ENTRY_BYTES;
    memcpy(e, secs.data[i].name, RXM_SECTION_NAME_BYTES);
    put64(e + RXM_SECTION_NAME_BYTES, off);
    put64(e + RXM_SECTION_NAME_BYTES + 8, secs.data[i].size);
    put32(e + RXM_SECTION_NAME_BYTES + 16, drv_crc32(secs.data[i].data, secs.data[i].size));
    if (secs.data[i].size) memcpy(o + off, secs.data[i].data, secs.data[i].size);
    off = align16(off + secs.data[i].size);
    free(secs.data[i].owned);
  }
  RX_ASSERT(off == end);
  if (inside) { /* its CRC is known once the image is streamed: patched there */
    unsigned char *e = o + 16 + secs.len * ENTRY_BYTES;
    memcpy(e, RXM_WEIGHTS_SECTION, sizeof RXM_WEIGHTS_SECTION);
    put64(e + RXM_SECTION_NAME_BYTES, woff);
    put64(e + RXM_SECTION_NAME_BYTES + 8, r->weights.size);
    r->weights_crc_at = 16 + secs.len * ENTRY_BYTES + RXM_SECTION_NAME_BYTES + 16;
    r->weights_at = woff;
    if (with_weights) {
      r->weights_crc = drv_weights_to_memory(m, &r->weights, o + woff);
      put32(o + r->weights_crc_at, r->weights_crc);
    }
  }
  free(secs.data);
  free(r->artifact);
  r->artifact = o;
  r->artifact_len = len;
  r->artifact_size = total;
}

/* The artifact with its weights section streamed from the module (r->artifact is its head). */
static rx_status write_streamed(const char *path, const rx_module *m, rx_compile_result *r) {
  FILE *f = fopen(path, "wb");
  if (!f) return base_status_make(RX_ERR_IO, "cannot write '%s': %s", path, strerror(errno));
  rx_status s = NULL;
  uint32_t crc = 0;
  static const unsigned char pad[16];
  size_t tail = r->artifact_size - r->weights_at - (size_t)r->weights.size;
  unsigned char word[4];
  put32(word, 0);
  if (fwrite(r->artifact, 1, r->artifact_len, f) != r->artifact_len)
    s = base_status_make(RX_ERR_IO, "writing '%s' failed: %s", path, strerror(errno));
  if (!s) s = drv_weights_to_file(m, &r->weights, f, path, &crc);
  if (!s) {
    put32(word, crc);
    if ((tail && fwrite(pad, 1, tail, f) != tail) || fseek(f, (long)r->weights_crc_at, SEEK_SET) ||
        fwrite(word, 1, 4, f) != 4)
      s = base_status_make(RX_ERR_IO,
                           "writing '%s' failed: %s (the artifact is written with its weights and "
                           "then its section table is completed: it must be a regular file)",
                           path, strerror(errno));
  }
  if (fclose(f) != 0 && !s)
    s = base_status_make(RX_ERR_IO, "writing '%s' failed: %s", path, strerror(errno));
  if (!s) {
    r->weights_crc = crc;
    put32(r->artifact + r->weights_crc_at, crc);
  }
  return s;
}

rx_status drv_artifact_write(const char *path, const char *weights_path, const rx_module *m,
                             rx_compile_result *r) {
  if (r->weights_ref) { /* the side file first: the manifest records its CRC */
    RX_ASSERT(weights_path);
    FILE *f = fopen(weights_path, "wb");
    if (!f)
      return base_status_make(RX_ERR_IO, "cannot write '%s': %s", weights_path, strerror(errno));
    uint32_t crc = 0;
    rx_status s = drv_weights_to_file(m, &r->weights, f, weights_path, &crc);
    if (fclose(f) != 0 && !s)
      s = base_status_make(RX_ERR_IO, "writing '%s' failed: %s", weights_path, strerror(errno));
    if (s) return s;
    r->weights_crc = crc;
    drv_artifact_build(m, r, false);
  }
  if (r->artifact_len < r->artifact_size) return write_streamed(path, m, r);
  return drv_artifact_write_file(path, r->artifact, r->artifact_len);
}

rx_status drv_artifact_write_file(const char *path, const unsigned char *bytes, size_t len) {
  FILE *f = fopen(path, "wb");
  if (!f) return base_status_make(RX_ERR_IO, "cannot write '%s': %s", path, strerror(errno));
  bool ok = fwrite(bytes, 1, len, f) == len;
  ok = (fclose(f) == 0) && ok;
  if (!ok) return base_status_make(RX_ERR_IO, "writing '%s' failed: %s", path, strerror(errno));
  return NULL;
}
