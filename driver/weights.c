/* driver/weights.c: the weights image of an artifact (docs/artifact.md, "Weights"): the module's
 * weight table (ir/weights.c) laid out as a safetensors file whose tensors start on
 * RXM_WEIGHTS_ALIGN-byte boundaries, and streamed from the weights' sources, converted chunk by
 * chunk, into the artifact's section `weights.safetensors` or a side file.
 *
 * Streaming keeps memory bounded whatever the model's size: the sources (an importer's mmapped
 * checkpoint) are read in place, a tensor stored in its source dtype goes to the sink without a
 * copy, and a converted one through a buffer of RX_WEIGHTS_CHUNK_ELEMS elements. */
#include "driver.h"

#include "../runtime/vm_format.h" /* RXM_WEIGHTS_ALIGN */

#include "../base/safetensors.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Elements converted at a time: 256 Ki elements, 1 MiB of f32 output at most, so a conversion
 * needs one small buffer however large the tensor (and the sink's writes stay large). */
#define RX_WEIGHTS_CHUNK_ELEMS ((size_t)1 << 18)
/* Bytes of a source stored as it is handed to the sink at a time, straight from the source:
 * 16 MiB, writes large enough for a disk's full speed, small enough that a mapped source is paged
 * in and out as it streams. */
#define RX_WEIGHTS_COPY_BYTES ((size_t)16 << 20)

static uint64_t align_up(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

static size_t dtype_bytes(rx_dtype t) { return (size_t)ir_dtype_bits(t) / 8; }

/* ---- the layout ---- */
void drv_weights_layout(const rx_module *m, rx_weights_image *out) {
  memset(out, 0, sizeof *out);
  size_t n = rx_module_weight_count(m);
  if (!n) return;
  out->count = n;
  out->offsets = base_calloc(n, sizeof *out->offsets);
  /* data offsets first (from the start of the data), then the header that names them */
  uint64_t at = 0;
  for (size_t i = 0; i < n; i++) {
    at = align_up(at, RXM_WEIGHTS_ALIGN);
    out->offsets[i] = at;
    at += ir_module_weight_at(m, i)->bytes;
  }
  rx_strbuf j = {0};
  base_strbuf_append(&j, "{\"__metadata__\":{\"format\":\"relaxc\"}");
  for (size_t i = 0; i < n; i++) {
    const rx_weight *w = ir_module_weight_at(m, i);
    base_strbuf_putc(&j, ',');
    base_strbuf_json_string(&j, w->name);
    base_strbuf_printf(&j, ":{\"dtype\":\"%s\",\"shape\":[", base_st_dtype_name(w->dtype));
    for (int d = 0; d < w->ndim; d++)
      base_strbuf_printf(&j, "%s%lld", d ? "," : "", (long long)w->shape[d]);
    base_strbuf_printf(&j, "],\"data_offsets\":[%llu,%llu]}", (unsigned long long)out->offsets[i],
                       (unsigned long long)(out->offsets[i] + w->bytes));
  }
  base_strbuf_putc(&j, '}');
  /* the JSON padded with spaces (the safetensors convention) so the data starts aligned */
  size_t head = (size_t)align_up(8 + j.len, RXM_WEIGHTS_ALIGN);
  out->head_len = head;
  out->head = base_malloc(head);
  uint64_t jn = head - 8;
  for (int b = 0; b < 8; b++) out->head[b] = (char)(jn >> (8 * b));
  memcpy(out->head + 8, j.data, j.len);
  memset(out->head + 8 + j.len, ' ', head - 8 - j.len);
  for (size_t i = 0; i < n; i++) out->offsets[i] += head;
  out->size = head + at;
  base_strbuf_free(&j);
}

void drv_weights_image_free(rx_weights_image *img) {
  free(img->head);
  free(img->offsets);
  memset(img, 0, sizeof *img);
}

/* ---- conversion ---- */
static float load_f32(const unsigned char *p) {
  float f;
  memcpy(&f, p, 4);
  return f;
}
static uint16_t load_u16(const unsigned char *p) { return (uint16_t)(p[0] | p[1] << 8); }

/* Element i of a f32/f16/bf16 source as a float (exact: f16 and bf16 widen exactly). */
static float src_float(rx_dtype t, const unsigned char *p) {
  if (t == RX_DTYPE_F32) return load_f32(p);
  if (t == RX_DTYPE_F16) return base_f16_to_f32(load_u16(p));
  return base_bf16_to_f32(load_u16(p));
}

void drv_weights_convert(rx_dtype to, void *dst, rx_dtype from, const void *src, size_t n) {
  RX_ASSERT(ir_weight_converts(from, to));
  const unsigned char *s = src;
  unsigned char *d = dst;
  size_t ss = dtype_bytes(from), ds = dtype_bytes(to);
  if (from == to) {
    memcpy(dst, src, n * ss);
    return;
  }
  for (size_t i = 0; i < n; i++) {
    float f = src_float(from, s + i * ss);
    if (to == RX_DTYPE_F32) {
      memcpy(d + i * ds, &f, 4);
    } else {
      uint16_t h = to == RX_DTYPE_F16 ? base_f32_to_f16(f) : base_f32_to_bf16(f);
      d[i * ds] = (unsigned char)h;
      d[i * ds + 1] = (unsigned char)(h >> 8);
    }
  }
}

/* ---- streaming ---- */
static const unsigned char zeros[RXM_WEIGHTS_ALIGN];

/* The image's bytes in order, with bounded memory: sources stored as they are go to the sink in
 * place, converted ones through one buffer of a bounded number of elements. */
static rx_status drv_weights_stream(const rx_module *m, const rx_weights_image *img,
                                    rx_weights_sink sink, void *ctx) {
  RX_RETURN_IF_ERROR(sink(ctx, img->head, img->head_len));
  uint64_t at = img->head_len;
  unsigned char *buf = NULL;
  rx_status s = NULL;
  for (size_t i = 0; i < img->count && !s; i++) {
    const rx_weight *w = ir_module_weight_at(m, i);
    if (img->offsets[i] > at) s = sink(ctx, zeros, (size_t)(img->offsets[i] - at));
    if (s) break;
    size_t es = dtype_bytes(w->dtype), ss = dtype_bytes(w->src_dtype);
    size_t count = es ? (size_t)(w->bytes / es) : 0;
    const unsigned char *src = w->src;
    if (w->src_dtype == w->dtype) { /* in place, no copy: the sink takes it in large pieces */
      for (uint64_t k = 0; k < w->bytes && !s; k += RX_WEIGHTS_COPY_BYTES)
        s = sink(
            ctx, src + k,
            (size_t)(w->bytes - k < RX_WEIGHTS_COPY_BYTES ? w->bytes - k : RX_WEIGHTS_COPY_BYTES));
    } else {
      if (!buf) buf = base_malloc(RX_WEIGHTS_CHUNK_ELEMS * sizeof(float));
      for (size_t k = 0; k < count && !s; k += RX_WEIGHTS_CHUNK_ELEMS) {
        size_t c = count - k < RX_WEIGHTS_CHUNK_ELEMS ? count - k : RX_WEIGHTS_CHUNK_ELEMS;
        drv_weights_convert(w->dtype, buf, w->src_dtype, src + k * ss, c);
        s = sink(ctx, buf, c * es);
      }
    }
    at = img->offsets[i] + w->bytes;
  }
  free(buf);
  return s;
}

/* ---- the sink: a file or memory, and the CRC-32 of what went in ---- */
typedef struct sink {
  FILE *f;          /* the file, or NULL: memory at p */
  const char *path; /* the file's name in messages */
  unsigned char *p;
  uint32_t crc;
} sink;

static rx_status to_sink(void *ctx, const void *data, size_t n) {
  sink *k = ctx;
  k->crc = base_crc32_update(k->crc, data, n);
  if (!k->f) {
    if (n) memcpy(k->p, data, n);
    k->p += n;
  } else if (n && fwrite(data, 1, n, k->f) != n) {
    return base_status_make(RX_ERR_IO, "writing '%s' failed: %s", k->path, strerror(errno));
  }
  return NULL;
}

uint32_t drv_weights_to_memory(const rx_module *m, const rx_weights_image *img, void *out) {
  sink k = {NULL, NULL, out, 0};
  rx_status s = drv_weights_stream(m, img, to_sink, &k);
  RX_ASSERT(!s); /* memory takes everything */
  return k.crc;
}

rx_status drv_weights_to_file(const rx_module *m, const rx_weights_image *img, FILE *f,
                              const char *path, uint32_t *out_crc) {
  sink k = {f, path, NULL, 0};
  RX_RETURN_IF_ERROR(drv_weights_stream(m, img, to_sink, &k));
  *out_crc = k.crc;
  return NULL;
}

/* ---- the side file's name, relative to the artifact's directory ---- */

/* path made absolute (against the working directory) with "." and ".." removed lexically, as a
 * list of components joined by '/', starting with '/'. */
static rx_status absolute(const char *path, char **out) {
  rx_strbuf full = {0};
  if (path[0] != '/') {
    char cwd[4096];
    if (!getcwd(cwd, sizeof cwd))
      return base_status_make(RX_ERR_IO, "cannot resolve '%s': the working directory: %s", path,
                              strerror(errno));
    base_strbuf_printf(&full, "%s/", cwd);
  }
  base_strbuf_append(&full, path);
  rx_strbuf b = {0};
  for (const char *p = full.data; *p;) {
    const char *e = strchr(p, '/');
    size_t n = e ? (size_t)(e - p) : strlen(p);
    if (n == 2 && p[0] == '.' && p[1] == '.') {
      while (b.len && b.data[b.len - 1] != '/') b.len--;
      if (b.len) b.len--; /* the slash: one component up ("/.." stays "/") */
      if (b.data) b.data[b.len] = '\0';
    } else if (n && !(n == 1 && p[0] == '.')) {
      base_strbuf_putc(&b, '/');
      base_strbuf_appendn(&b, p, n);
    }
    p += n + (e != NULL);
  }
  base_strbuf_free(&full);
  *out = b.len ? base_strbuf_take(&b) : (base_strbuf_free(&b), base_strdup("/"));
  return NULL;
}

rx_status drv_weights_ref(const char *artifact_path, const char *weights_path, char **out_ref) {
  *out_ref = NULL;
  char *a = NULL, *w = NULL;
  rx_status s = absolute(artifact_path, &a);
  if (!s) s = absolute(weights_path, &w);
  if (!s && !strcmp(a, w))
    s = base_status_make(RX_ERR_INVALID, "--weights-file '%s' is the artifact '%s' itself",
                         weights_path, artifact_path);
  if (!s) {
    /* the longest common directory prefix, then one ".." per directory of the artifact left */
    size_t common = 0;
    for (size_t i = 0; a[i] && a[i] == w[i]; i++)
      if (a[i] == '/') common = i + 1;
    if (strchr(a + common, '/')) /* the artifact's folder does not hold it */
      s = base_status_make(RX_ERR_INVALID,
                           "--weights-file '%s' is not in the folder of the artifact '%s' (or one "
                           "below it): the runtime reads a side file only from the artifact's "
                           "folder",
                           weights_path, artifact_path);
    else
      *out_ref = base_strdup(w + common);
  }
  free(a);
  free(w);
  return s;
}

/* ---- the bindings of graph parameters ---- */
bool drv_weights_check_params(const rx_module *m, rx_diag *diag) {
  bool ok = true;
  for (size_t i = 0; i < m->items.len; i++) {
    if (m->items.data[i].kind != RX_ITEM_GRAPH) continue;
    const rx_graph_fn *f = m->items.data[i].fn;
    for (int k = 0; k < f->nparams; k++) {
      const rx_var *p = f->params[k];
      const rx_weight *w = ir_module_weight(m, p->name);
      if (!w || ir_weight_fits(w, p->sinfo)) continue;
      rx_strbuf want = {0}, have = {0};
      ir_weight_sinfo_text(&want, w);
      ir_sinfo_print(&have, p->sinfo);
      base_diag_report(diag, RX_DIAG_ERROR, p->loc,
                       "function %s: parameter '%s' is %s, but the weight of that name is %s (a "
                       "parameter is bound to the weight of its name when their types agree)",
                       f->name, p->name, have.data, want.data);
      base_strbuf_free(&want);
      base_strbuf_free(&have);
      ok = false;
    }
  }
  return ok;
}
