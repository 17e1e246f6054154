/* runtime/runtime.c: the core of the runtime: backend selection, reference counts, argument
 * checks, symbolic values, and the calls into the device interface (runtime/device.h). */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/device.h"

/* ---- host memory ---- */
static void *default_realloc(void *user, void *ptr, size_t size) {
  (void)user;
  if (size == 0) {
    free(ptr);
    return NULL;
  }
  return realloc(ptr, size);
}
const rx_rt_allocator rt_default_allocator = {default_realloc, NULL};

void *rt_alloc(const rx_rt_allocator *a, size_t n) {
  void *p = a->realloc(a->user, NULL, n ? n : 1);
  if (p) memset(p, 0, n ? n : 1);
  return p;
}
void rt_free(const rx_rt_allocator *a, void *p) {
  if (p) a->realloc(a->user, p, 0);
}
bool rt_grow(const rx_rt_allocator *a, void **p, size_t *cap, size_t need, size_t size) {
  if (need <= *cap) return true;
  size_t n = *cap ? 2 * *cap : 64;
  while (n < need) n *= 2;
  void *q = rt_alloc(a, n * size);
  if (!q) return false;
  if (*cap) memcpy(q, *p, *cap * size);
  rt_free(a, *p);
  *p = q;
  *cap = n;
  return true;
}
char *rt_strdup(const rx_rt_allocator *a, const char *s) {
  size_t n = strlen(s) + 1;
  char *p = rt_alloc(a, n);
  if (p) memcpy(p, s, n);
  return p;
}
rx_status rt_oom(const char *what, size_t n) {
  return base_status_make(RX_ERR_OUT_OF_MEMORY, "out of host memory allocating %zu bytes for %s", n,
                          what);
}

void *rt_dlopen_first(const char *const *names, size_t n, char *why, size_t why_size) {
  why[0] = '\0';
  for (size_t i = 0; i < n; i++) {
    void *h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    if (h) return h;
    const char *e = dlerror(); /* valid until the next dl call: copied */
    if (!why[0]) snprintf(why, why_size, "%s", e ? e : "?");
  }
  return NULL;
}

/* ---- backends ---- */
/* The backends, listed once: X(ENUM, name, device interface or NULL where it is not built here).
 * The names are rx_rt_backend_name's and the device specs' ("cuda:1"); metal/metal.c is linked
 * in on Apple platforms only (runtime/device.h). A runtime built for apps with one backend
 * (RX_BACKENDS in runtime/runtime.cmake, docs/install.md) defines RX_RT_NO_VULKAN, RX_RT_NO_CUDA
 * or RX_RT_NO_METAL for those left out. */
#if defined(__APPLE__) && !defined(RX_RT_NO_METAL)
#define RT_METAL_BACKEND (&rt_metal_backend)
#else
#define RT_METAL_BACKEND NULL
#endif
#ifndef RX_RT_NO_VULKAN
#define RT_VULKAN_BACKEND (&rt_vulkan_backend)
#else
#define RT_VULKAN_BACKEND NULL
#endif
#ifndef RX_RT_NO_CUDA
#define RT_CUDA_BACKEND (&rt_cuda_backend)
#else
#define RT_CUDA_BACKEND NULL
#endif
#define RT_BACKENDS(X)                                                                             \
  X(VULKAN, "vulkan", RT_VULKAN_BACKEND)                                                           \
  X(CUDA, "cuda", RT_CUDA_BACKEND)                                                                 \
  X(METAL, "metal", RT_METAL_BACKEND)                                                              \
  X(NULL, "null", &rt_null_backend)

static const struct {
  const char *name;
  const rt_backend *be;
} backends[] = {
#define X(e, name, be) [RX_RT_BACKEND_##e] = {name, be},
    RT_BACKENDS(X)
#undef X
};

/* one entry per rx_rt_backend: a backend left out of RT_BACKENDS does not compile */
#define X(e, name, be) +1
_Static_assert(0 RT_BACKENDS(X) == RX_RT_BACKEND_COUNT, "RT_BACKENDS lists every rx_rt_backend");
#undef X

static const rt_backend *backend_of(rx_rt_backend b) {
  return (unsigned)b < RX_RT_BACKEND_COUNT ? backends[b].be : NULL;
}

const char *rx_rt_backend_name(rx_rt_backend b) {
  return (unsigned)b < RX_RT_BACKEND_COUNT ? backends[b].name : "unknown";
}

rx_status rx_rt_backend_check(rx_rt_backend b) {
  const rt_backend *be = backend_of(b);
  if (!be) {
#ifndef __APPLE__
    if (b == RX_RT_BACKEND_METAL)
      return base_status_make(RX_ERR_UNSUPPORTED, "metal: the Metal backend exists on Apple "
                                                  "platforms only");
#endif
    if ((unsigned)b < RX_RT_BACKEND_COUNT)
      return base_status_make(RX_ERR_UNSUPPORTED,
                              "%s: this relaxc runtime was built without the %s backend "
                              "(RX_BACKENDS, docs/install.md)",
                              backends[b].name, backends[b].name);
    return base_status_make(RX_ERR_INVALID, "unknown backend %d", (int)b);
  }
  return be->check();
}

rx_status rx_rt_enumerate(rx_rt_backend b, rx_rt_device_info **out_infos, size_t *out_count) {
  if (out_infos) *out_infos = NULL;
  if (out_count) *out_count = 0;
  if (!out_infos || !out_count) return base_status_make(RX_ERR_INVALID, "rx_rt_enumerate: NULL");
  RX_RETURN_IF_ERROR(rx_rt_backend_check(b));
  return backend_of(b)->enumerate(out_infos, out_count, &rt_default_allocator);
}

void rx_rt_free_device_infos(rx_rt_device_info *infos) { rt_free(&rt_default_allocator, infos); }

/* ---- devices ---- */
static rx_status parse_spec(const char *spec, rx_rt_backend *out_b, int *out_index) {
  *out_b = RX_RT_BACKEND_VULKAN;
  *out_index = 0;
  const char *colon = strchr(spec, ':');
  size_t n = colon ? (size_t)(colon - spec) : strlen(spec);
  int found = -1;
  for (int b = 0; b < RX_RT_BACKEND_COUNT; b++)
    if (strlen(rx_rt_backend_name((rx_rt_backend)b)) == n &&
        !strncmp(spec, rx_rt_backend_name((rx_rt_backend)b), n))
      found = b;
  if (found < 0)
    return base_status_make(RX_ERR_INVALID,
                            "device '%s': expected vulkan[:N], cuda[:N] or "
                            "metal[:N]",
                            spec);
  if (colon) {
    char *end = NULL;
    long idx = strtol(colon + 1, &end, 10);
    bool digits = colon[1] != 0; /* whole: " 1", "+1" and "1.0" are no index */
    for (const char *q = colon + 1; *q; q++) digits = digits && *q >= '0' && *q <= '9';
    if (!digits || *end || idx < 0 || idx > 1024)
      return base_status_make(RX_ERR_INVALID,
                              "device '%s': the index after ':' must be a "
                              "non-negative integer",
                              spec);
    *out_index = (int)idx;
  }
  *out_b = (rx_rt_backend)found;
  return NULL;
}

static rx_status open_on(rx_rt_backend b, int index, const rx_rt_device_options *opts,
                         rx_rt_device **out_device) {
  RX_RETURN_IF_ERROR(rx_rt_backend_check(b));
  const rt_backend *be = backend_of(b);
  const rx_rt_allocator *a = opts && opts->allocator ? opts->allocator : &rt_default_allocator;
  rx_rt_device *d = rt_alloc(a, be->device_size);
  if (!d) return rt_oom("a device", be->device_size);
  d->be = be;
  d->refs = 1;
  d->alloc = *a;
  d->info.backend = b;
  d->info.index = index;
  rx_rt_device_options o = {a, -1, false};
  if (opts) o = *opts;
  o.allocator = &d->alloc;
  if (o.validation < 0) {
    const char *v = getenv("RX_VULKAN_VALIDATION");
    o.validation = v && *v && strcmp(v, "0") != 0;
  }
  const char *st = getenv("RX_VULKAN_STAGING");
  if (st && *st && strcmp(st, "0") != 0) o.force_staging = true;
  rx_status s = be->device_init(d, index, &o);
  if (s) {
    be->device_destroy(d);
    rt_free(a, d);
    return s;
  }
  *out_device = d;
  return NULL;
}

rx_status rx_rt_device_open(const char *spec, const rx_rt_device_options *opts,
                            rx_rt_device **out_device) {
  if (!out_device) return base_status_make(RX_ERR_INVALID, "rx_rt_device_open: NULL out_device");
  *out_device = NULL;
  if (!spec || !*spec) spec = getenv("RX_DEVICE");
  if (spec && *spec) {
    rx_rt_backend b;
    int index;
    RX_RETURN_IF_ERROR(parse_spec(spec, &b, &index));
    return base_status_annotate(open_on(b, index, opts, out_device), "device '%s'", spec);
  }
  /* default: the first device of the first backend that has one */
  static const rx_rt_backend order[] = {RX_RT_BACKEND_CUDA, RX_RT_BACKEND_METAL,
                                        RX_RT_BACKEND_VULKAN};
  rx_strbuf why = {0};
  for (size_t i = 0; i < RX_ARRAY_LEN(order); i++) {
    rx_status s = open_on(order[i], 0, opts, out_device);
    if (!s) {
      base_strbuf_free(&why);
      return NULL;
    }
    base_strbuf_printf(&why, "%s%s", why.len ? "; " : "", rx_status_message(s));
    rx_status_free(s);
  }
  rx_status s = base_status_make(RX_ERR_NOT_FOUND, "no device found: %s", why.data);
  base_strbuf_free(&why);
  return s;
}

void rx_rt_device_retain(rx_rt_device *d) {
  if (d) d->refs++;
}

void rx_rt_device_release(rx_rt_device *d) {
  if (!d || --d->refs > 0) return;
  rx_rt_allocator a = d->alloc;
  if (d->library_free) d->library_free(d);
  d->be->device_destroy(d);
  rx_status_free(d->lost);
  rt_free(&a, d);
}

const rx_rt_device_info *rx_rt_device_get_info(const rx_rt_device *d) { return &d->info; }

rx_status rt_device_error(rx_rt_device *d) {
  return base_status_make(rx_status_code_of(d->lost), "%s", rx_status_message(d->lost));
}

#define CHECK_LOST(d)                                                                              \
  do {                                                                                             \
    if ((d)->lost) return rt_device_error(d);                                                      \
  } while (0)

rx_status rx_rt_device_synchronize(rx_rt_device *d) {
  CHECK_LOST(d);
  return d->be->synchronize(d);
}

size_t rx_rt_device_validation_messages(const rx_rt_device *d, const char **out_last) {
  if (out_last) *out_last = d->validation_count ? d->validation_last : "";
  return d->validation_count;
}

/* ---- buffers ---- */
rx_status rx_rt_buffer_alloc(rx_rt_device *d, size_t bytes, rx_rt_buffer **out_buffer) {
  if (!out_buffer || !d) return base_status_make(RX_ERR_INVALID, "rx_rt_buffer_alloc: NULL");
  *out_buffer = NULL;
  CHECK_LOST(d);
  if (bytes == 0) return base_status_make(RX_ERR_INVALID, "cannot allocate a buffer of 0 bytes");
  rx_rt_buffer *b = rt_alloc(&d->alloc, d->be->buffer_size);
  if (!b) return rt_oom("a buffer handle", d->be->buffer_size);
  b->device = d;
  b->refs = 1;
  b->size = bytes;
  rx_status s = d->be->buffer_init(b);
  if (s) {
    rt_free(&d->alloc, b);
    return s;
  }
  rx_rt_device_retain(d);
  *out_buffer = b;
  return NULL;
}

rx_status rt_device_buffer(rx_rt_device *d, size_t bytes, rx_rt_buffer **out) {
  RX_RETURN_IF_ERROR(rx_rt_buffer_alloc(d, bytes, out));
  d->refs--; /* the device owns the buffer, not the other way around */
  return NULL;
}

void rt_device_buffer_free(rx_rt_buffer *b) {
  if (!b) return;
  rx_rt_device *d = b->device;
  d->be->buffer_destroy(b);
  rt_free(&d->alloc, b);
}

void rx_rt_buffer_retain(rx_rt_buffer *b) {
  if (b) b->refs++;
}

void rx_rt_buffer_release(rx_rt_buffer *b) {
  if (!b || --b->refs > 0) return;
  rx_rt_device *d = b->device;
  d->be->buffer_destroy(b);
  rt_free(&d->alloc, b);
  rx_rt_device_release(d);
}

size_t rx_rt_buffer_size(const rx_rt_buffer *b) { return b->size; }
rx_rt_device *rx_rt_buffer_device(const rx_rt_buffer *b) { return b->device; }

static rx_status check_range(const rx_rt_buffer *b, size_t offset, size_t n, const char *what) {
  if (offset > b->size || n > b->size - offset)
    return base_status_make(RX_ERR_INVALID,
                            "%s: bytes [%zu, %zu + %zu) are outside the buffer of "
                            "%zu bytes",
                            what, offset, offset, n, b->size);
  return NULL;
}

rx_status rx_rt_buffer_write(rx_rt_buffer *b, size_t offset, const void *src, size_t bytes) {
  RX_RETURN_IF_ERROR(check_range(b, offset, bytes, "buffer write"));
  CHECK_LOST(b->device);
  if (!bytes) return NULL;
  return b->device->be->buffer_write(b, offset, src, bytes);
}

rx_status rx_rt_buffer_read(rx_rt_buffer *b, size_t offset, void *dst, size_t bytes) {
  RX_RETURN_IF_ERROR(check_range(b, offset, bytes, "buffer read"));
  CHECK_LOST(b->device);
  if (!bytes) return NULL;
  return b->device->be->buffer_read(b, offset, dst, bytes);
}

rx_status rx_rt_buffer_fill(rx_rt_buffer *b, size_t offset, size_t bytes, uint8_t value) {
  RX_RETURN_IF_ERROR(check_range(b, offset, bytes, "buffer fill"));
  CHECK_LOST(b->device);
  if (!bytes) return NULL;
  return b->device->be->buffer_fill(b, offset, bytes, value);
}

rx_status rx_rt_buffer_copy(rx_rt_buffer *src, size_t src_offset, rx_rt_buffer *dst,
                            size_t dst_offset, size_t bytes) {
  if (src->device != dst->device)
    return base_status_make(RX_ERR_INVALID, "buffer copy: the buffers are on different devices");
  RX_RETURN_IF_ERROR(check_range(src, src_offset, bytes, "buffer copy (source)"));
  RX_RETURN_IF_ERROR(check_range(dst, dst_offset, bytes, "buffer copy (destination)"));
  if (src == dst && src_offset < dst_offset + bytes && dst_offset < src_offset + bytes)
    return base_status_make(RX_ERR_INVALID, "buffer copy: source and destination overlap");
  CHECK_LOST(src->device);
  if (!bytes) return NULL;
  return src->device->be->buffer_copy(src, src_offset, dst, dst_offset, bytes);
}

/* ---- host memory used in place ---- */
const char *rx_rt_import_name(rx_rt_import k) {
  switch (k) {
  case RX_RT_IMPORT_NONE:
    return "not imported";
  case RX_RT_IMPORT_IN_PLACE:
    return "in place";
  case RX_RT_IMPORT_COPY_UNSUPPORTED:
    return "copied: the device cannot import host memory";
  case RX_RT_IMPORT_COPY_UNALIGNED:
    return "copied: not aligned as the device requires";
  case RX_RT_IMPORT_COPY_REFUSED:
    return "copied: the driver refused the range";
  }
  return "?";
}

rx_status rx_rt_buffer_import_host(rx_rt_device *d, void *ptr, size_t bytes,
                                   rx_rt_buffer **out_buffer, rx_rt_import *out_kind) {
  if (out_buffer) *out_buffer = NULL;
  if (out_kind) *out_kind = RX_RT_IMPORT_NONE;
  if (!d || !out_buffer)
    return base_status_make(RX_ERR_INVALID, "rx_rt_buffer_import_host: NULL %s",
                            d ? "out_buffer" : "device");
  if (!ptr) return base_status_make(RX_ERR_INVALID, "rx_rt_buffer_import_host: ptr is NULL");
  if (bytes == 0)
    return base_status_make(RX_ERR_INVALID, "rx_rt_buffer_import_host: bytes is 0 (a buffer "
                                            "holds at least one byte)");
  if ((uintptr_t)ptr > UINTPTR_MAX - bytes)
    return base_status_make(RX_ERR_INVALID,
                            "rx_rt_buffer_import_host: ptr %p + bytes %zu wraps around the "
                            "address space",
                            ptr, bytes);
  CHECK_LOST(d);
  rx_rt_buffer *b = rt_alloc(&d->alloc, d->be->buffer_size);
  if (!b) return rt_oom("a buffer handle", d->be->buffer_size);
  b->device = d;
  b->refs = 1;
  b->size = bytes;
  rx_rt_import kind = RX_RT_IMPORT_COPY_UNSUPPORTED;
  rx_status s = d->be->buffer_import ? d->be->buffer_import(b, ptr, &kind) : NULL;
  if (!s && kind != RX_RT_IMPORT_IN_PLACE) { /* the copy */
    s = d->be->buffer_init(b);
    if (!s) {
      s = d->be->buffer_write(b, 0, ptr, bytes);
      if (s) d->be->buffer_destroy(b);
    }
  }
  if (s) {
    rt_free(&d->alloc, b);
    return base_status_annotate(s, "importing %zu bytes of host memory at %p", bytes, ptr);
  }
  b->import = kind;
  rx_rt_device_retain(d);
  *out_buffer = b;
  if (out_kind) *out_kind = kind;
  return NULL;
}

rx_rt_import rx_rt_buffer_import_kind(const rx_rt_buffer *b) {
  return b ? b->import : RX_RT_IMPORT_NONE;
}

rx_status rx_rt_buffer_map(rx_rt_buffer *b, void **out_ptr) {
  if (out_ptr) *out_ptr = NULL;
  if (!b || !out_ptr) return base_status_make(RX_ERR_INVALID, "rx_rt_buffer_map: NULL");
  CHECK_LOST(b->device);
  if (!b->device->be->buffer_map)
    return base_status_make(RX_ERR_UNSUPPORTED, "%s: buffers cannot be mapped on this backend",
                            rx_rt_backend_name(b->device->info.backend));
  return b->device->be->buffer_map(b, out_ptr);
}

bool rx_rt_buffer_kept(const rx_rt_buffer *b) { return b && b->kept; }

/* ---- libraries ---- */
rx_status rx_rt_library_load(rx_rt_device *d, const char *dir, rx_rt_library **out_library) {
  if (!out_library || !d || !dir)
    return base_status_make(RX_ERR_INVALID, "rx_rt_library_load: NULL");
  *out_library = NULL;
  CHECK_LOST(d);
  size_t plen = strlen(dir) + sizeof "/kernels.json";
  char *path = rt_alloc(&d->alloc, plen);
  if (!path) return rt_oom("a path", plen);
  snprintf(path, plen, "%s/kernels.json", dir);
  FILE *f = fopen(path, "rb");
  rx_status s = NULL;
  char *text = NULL;
  size_t n = 0;
  if (!f) {
    s = base_status_make(RX_ERR_NOT_FOUND,
                         "cannot open '%s': is '%s' a directory written by "
                         "relaxc codegen?",
                         path, dir);
  } else {
    long len = -1;
    if (fseek(f, 0, SEEK_END) == 0) len = ftell(f);
    if (len < 0 || fseek(f, 0, SEEK_SET) != 0) {
      s = base_status_make(RX_ERR_IO, "cannot read '%s'", path);
    } else if ((uint64_t)len > base_file_kind_limit(RX_FILE_JSON)) {
      s = base_status_make(RX_ERR_INVALID,
                           "%s: %ld bytes, past the limit of %llu bytes for %s files", path, len,
                           (unsigned long long)base_file_kind_limit(RX_FILE_JSON),
                           base_file_kind_name(RX_FILE_JSON));
    } else if (!(text = rt_alloc(&d->alloc, (size_t)len + 1))) {
      s = rt_oom(path, (size_t)len + 1);
    } else if (fread(text, 1, (size_t)len, f) != (size_t)len) {
      s = base_status_make(RX_ERR_IO, "cannot read '%s'", path);
    }
    n = len > 0 ? (size_t)len : 0;
    fclose(f);
  }
  rt_free(&d->alloc, path);
  if (!s) s = rt_library_parse(d, dir, text, n, dir, NULL, 0, out_library);
  rt_free(&d->alloc, text);
  return s;
}

rx_status rx_rt_library_load_memory(rx_rt_device *d, const char *json, size_t json_len,
                                    const rx_rt_blob *blobs, size_t blob_count,
                                    rx_rt_library **out_library) {
  if (!out_library || !d || !json)
    return base_status_make(RX_ERR_INVALID, "rx_rt_library_load_memory: NULL");
  *out_library = NULL;
  CHECK_LOST(d);
  return rt_library_parse(d, "<memory>", json, json_len, NULL, blobs, blob_count, out_library);
}

void rx_rt_library_retain(rx_rt_library *l) {
  if (l) l->refs++;
}
void rx_rt_library_release(rx_rt_library *l) {
  if (l && --l->refs == 0) rt_library_destroy(l);
}

size_t rx_rt_library_kernel_count(const rx_rt_library *l) { return l->nkernels; }
rx_rt_kernel *rx_rt_library_kernel_at(const rx_rt_library *l, size_t i) {
  return i < l->nkernels ? &l->kernels[i] : NULL;
}

rx_status rx_rt_library_kernel(const rx_rt_library *l, const char *name,
                               rx_rt_kernel **out_kernel) {
  *out_kernel = NULL;
  for (size_t i = 0; i < l->nkernels; i++)
    if (!strcmp(l->kernels[i].name, name)) {
      *out_kernel = &l->kernels[i];
      return NULL;
    }
  rx_strbuf names = {0};
  for (size_t i = 0; i < l->nkernels && i < 16; i++)
    base_strbuf_printf(&names, "%s%s", i ? ", " : "", l->kernels[i].name);
  rx_status s = base_status_make(RX_ERR_NOT_FOUND, "%s: no kernel named '%s' (it has: %s)",
                                 l->origin, name, names.data ? names.data : "none");
  base_strbuf_free(&names);
  return s;
}

const char *rx_rt_kernel_name(const rx_rt_kernel *k) { return k->name; }
size_t rx_rt_kernel_buffer_count(const rx_rt_kernel *k) { return k->nbuffers; }
size_t rx_rt_kernel_scalar_count(const rx_rt_kernel *k) { return k->nscalars; }
const char *rx_rt_kernel_scalar_name(const rx_rt_kernel *k, size_t i) {
  return i < k->nscalars ? k->scalars[i].name : NULL;
}
void rx_rt_kernel_block(const rx_rt_kernel *k, uint32_t out_block[3]) {
  memcpy(out_block, k->block, sizeof k->block);
}

/* ---- launches ---- */
rx_status rx_rt_kernel_launch(rx_rt_kernel *k, const rx_rt_launch_params *p) {
  rx_rt_device *d = k->library->device;
  CHECK_LOST(d);
  if (p->buffer_count != k->nbuffers || p->scalar_count != k->nscalars) {
    rx_strbuf sig = {0};
    for (size_t i = 0; i < k->nbuffers; i++)
      base_strbuf_printf(&sig, "%s%s", i ? ", " : "", k->buffers[i].name);
    for (size_t i = 0; i < k->nscalars; i++)
      base_strbuf_printf(&sig, "%s%s", sig.len ? ", " : "", k->scalars[i].name);
    rx_status s = base_status_make(RX_ERR_INVALID,
                                   "kernel '%s' takes %zu buffers and %zu symbolic "
                                   "values (%s), got %zu buffers and %zu values",
                                   k->name, k->nbuffers, k->nscalars, sig.data ? sig.data : "",
                                   p->buffer_count, p->scalar_count);
    base_strbuf_free(&sig);
    return s;
  }
  for (size_t i = 0; i < k->nbuffers; i++) {
    if (!p->buffers[i])
      return base_status_make(RX_ERR_INVALID, "kernel '%s': buffer '%s' is NULL", k->name,
                              k->buffers[i].name);
    if (p->buffers[i]->device != d)
      return base_status_make(RX_ERR_INVALID, "kernel '%s': buffer '%s' is on another device",
                              k->name, k->buffers[i].name);
  }
  if (memcmp(p->block, k->block, sizeof k->block) != 0)
    return base_status_make(RX_ERR_INVALID,
                            "kernel '%s': block (%u, %u, %u) differs from the "
                            "kernel's (%u, %u, %u)",
                            k->name, p->block[0], p->block[1], p->block[2], k->block[0],
                            k->block[1], k->block[2]);
  uint64_t threads = (uint64_t)k->block[0] * k->block[1] * k->block[2];
  if (d->info.max_threads_per_block && threads > d->info.max_threads_per_block)
    return base_status_make(RX_ERR_UNSUPPORTED,
                            "kernel '%s': %llu threads per block, the device "
                            "allows %u",
                            k->name, (unsigned long long)threads, d->info.max_threads_per_block);
  if (k->shared_bytes > d->info.shared_memory_bytes && d->info.shared_memory_bytes)
    return base_status_make(RX_ERR_UNSUPPORTED,
                            "kernel '%s': %u bytes of shared memory, the device "
                            "has %u",
                            k->name, k->shared_bytes, d->info.shared_memory_bytes);
  if (!p->grid[0] || !p->grid[1] || !p->grid[2]) return NULL; /* nothing to run */
  return d->be->launch(d, k, p);
}

/* ---- timers ---- */
rx_status rx_rt_timer_create(rx_rt_device *d, rx_rt_timer **out_timer) {
  *out_timer = NULL;
  CHECK_LOST(d);
  if (!d->info.timestamps)
    return base_status_make(RX_ERR_UNSUPPORTED, "%s: the device has no timestamps", d->info.name);
  rx_rt_timer *t = rt_alloc(&d->alloc, d->be->timer_size);
  if (!t) return rt_oom("a timer", d->be->timer_size);
  t->device = d;
  rx_status s = d->be->timer_init(t);
  if (s) {
    rt_free(&d->alloc, t);
    return s;
  }
  rx_rt_device_retain(d);
  *out_timer = t;
  return NULL;
}

rx_status rx_rt_timer_start(rx_rt_timer *t) {
  CHECK_LOST(t->device);
  RX_RETURN_IF_ERROR(t->device->be->timer_record(t, 0));
  t->started = true;
  t->stopped = false;
  return NULL;
}

rx_status rx_rt_timer_stop(rx_rt_timer *t) {
  CHECK_LOST(t->device);
  if (!t->started) return base_status_make(RX_ERR_INVALID, "timer stopped before it was started");
  RX_RETURN_IF_ERROR(t->device->be->timer_record(t, 1));
  t->stopped = true;
  return NULL;
}

rx_status rx_rt_timer_elapsed_ms(rx_rt_timer *t, double *out_ms) {
  *out_ms = 0;
  CHECK_LOST(t->device);
  if (!t->stopped) return base_status_make(RX_ERR_INVALID, "timer read before it was stopped");
  return t->device->be->timer_elapsed(t, out_ms);
}

void rx_rt_timer_release(rx_rt_timer *t) {
  if (!t) return;
  rx_rt_device *d = t->device;
  d->be->timer_destroy(t);
  rt_free(&d->alloc, t);
  rx_rt_device_release(d);
}

rx_status rx_rt_check_indptr(const int32_t *indptr, int64_t n, int64_t total) {
  if (n < 1 || !indptr)
    return base_status_make(RX_ERR_INVALID,
                            "indptr: an offsets table has at least one entry (b + 1)");
  if (indptr[0] != 0)
    return base_status_make(RX_ERR_INVALID, "indptr[0] = %d; the first offset must be 0",
                            (int)indptr[0]);
  for (int64_t i = 1; i < n; i++)
    if (indptr[i] < indptr[i - 1])
      return base_status_make(RX_ERR_INVALID,
                              "indptr[%lld] = %d is below indptr[%lld] = %d; offsets must be "
                              "non-decreasing",
                              (long long)i, (int)indptr[i], (long long)(i - 1), (int)indptr[i - 1]);
  if (indptr[n - 1] != total)
    return base_status_make(RX_ERR_INVALID,
                            "indptr[%lld] = %d, the last offset, is not total = %lld (the packed "
                            "rows)",
                            (long long)(n - 1), (int)indptr[n - 1], (long long)total);
  return NULL;
}
