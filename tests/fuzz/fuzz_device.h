/* tests/fuzz/fuzz_device.h: a device for the fuzz harnesses that never touches a GPU. Its
 * info.backend is Vulkan's, so artifacts load their Vulkan kernels (the
 * loader's checks of kernels.json and SPIR-V run), keeps buffers in host memory, and launches
 * nothing: a launch succeeds after the runtime core has checked its arguments. Header-only; each
 * harness includes it once. */
#ifndef RX_FUZZ_DEVICE_H
#define RX_FUZZ_DEVICE_H

#include <string.h>

#include "runtime/device.h"

typedef struct fz_buffer {
  rx_rt_buffer base;
  uint8_t *mem;
} fz_buffer;

static rx_status fz_check(void) { return NULL; }
static rx_status fz_device_init(rx_rt_device *d, int index, const rx_rt_device_options *o) {
  return NULL;
}
static void fz_device_destroy(rx_rt_device *d) {}
static rx_status fz_synchronize(rx_rt_device *d) { return NULL; }
static rx_status fz_buffer_init(rx_rt_buffer *b) {
  fz_buffer *f = (fz_buffer *)b;
  if (b->size > (64u << 20)) /* planned storages sized for large bounds: keep the fuzzer fast */
    return base_status_make(RX_ERR_OUT_OF_MEMORY, "fuzz device: %zu bytes (at most 64 MiB)",
                            b->size);
  f->mem = rt_alloc(&b->device->alloc, b->size);
  return f->mem ? NULL : rt_oom("a fuzz buffer", b->size);
}
static void fz_buffer_destroy(rx_rt_buffer *b) {
  rt_free(&b->device->alloc, ((fz_buffer *)b)->mem);
}
static rx_status fz_buffer_write(rx_rt_buffer *b, size_t off, const void *src, size_t n) {
  if (n) memcpy(((fz_buffer *)b)->mem + off, src, n);
  return NULL;
}
static rx_status fz_buffer_read(rx_rt_buffer *b, size_t off, void *dst, size_t n) {
  if (n) memcpy(dst, ((fz_buffer *)b)->mem + off, n);
  return NULL;
}
static rx_status fz_buffer_fill(rx_rt_buffer *b, size_t off, size_t n, uint8_t v) {
  if (n) memset(((fz_buffer *)b)->mem + off, v, n);
  return NULL;
}
static rx_status fz_buffer_copy(rx_rt_buffer *s, size_t so, rx_rt_buffer *d, size_t dof, size_t n) {
  if (n) memmove(((fz_buffer *)d)->mem + dof, ((fz_buffer *)s)->mem + so, n);
  return NULL;
}
static rx_status fz_kernel_create(rx_rt_device *d, rx_rt_kernel *k) { return NULL; }
static void fz_kernel_destroy(rx_rt_device *d, rx_rt_kernel *k) {}
static rx_status fz_launch(rx_rt_device *d, rx_rt_kernel *k, const rx_rt_launch_params *p) {
  return NULL;
}
static rx_status fz_timer_init(rx_rt_timer *t) { return NULL; }
static void fz_timer_destroy(rx_rt_timer *t) {}
static rx_status fz_timer_record(rx_rt_timer *t, int which) { return NULL; }
static rx_status fz_timer_elapsed(rx_rt_timer *t, double *ms) {
  *ms = 0;
  return NULL;
}

static const rt_backend fz_backend = {fz_check,
                                      NULL,
                                      sizeof(rx_rt_device),
                                      sizeof(fz_buffer),
                                      sizeof(rx_rt_timer),
                                      fz_device_init,
                                      fz_device_destroy,
                                      fz_synchronize,
                                      fz_buffer_init,
                                      fz_buffer_destroy,
                                      fz_buffer_write,
                                      fz_buffer_read,
                                      fz_buffer_fill,
                                      fz_buffer_copy,
                                      fz_kernel_create,
                                      fz_kernel_destroy,
                                      fz_launch,
                                      fz_timer_init,
                                      fz_timer_destroy,
                                      fz_timer_record,
                                      fz_timer_elapsed,
                                      NULL, /* buffer_import: imports copy */
                                      NULL /* buffer_map */};

/* A new device on the table above (release with rx_rt_device_release). */
static rx_rt_device *fz_device_new(void) {
  rx_rt_device *d = rt_alloc(&rt_default_allocator, sizeof *d);
  if (!d) return NULL;
  d->be = &fz_backend;
  d->refs = 1;
  d->alloc = rt_default_allocator;
  d->info.backend = RX_RT_BACKEND_VULKAN;
  return d;
}

/* Sets the CRC32 of every section of an artifact image whose table entry lies inside it and whose
 * bytes do, so a mutation reaches the section parsers instead of the CRC check (docs/artifact.md:
 * 16-byte header, then per section a 64-byte name, u64 offset, u64 size, u32 crc, u32 zero). */
static void fz_fix_crcs(uint8_t *d, size_t n) {
  if (n < 16) return;
  uint32_t count =
      (uint32_t)d[8] | (uint32_t)d[9] << 8 | (uint32_t)d[10] << 16 | (uint32_t)d[11] << 24;
  for (uint64_t i = 0; i < count && 16 + (i + 1) * 88 <= n; i++) {
    uint8_t *e = d + 16 + i * 88;
    uint64_t off = 0, len = 0;
    for (int b = 7; b >= 0; b--) {
      off = off << 8 | e[64 + b];
      len = len << 8 | e[72 + b];
    }
    if (off > n || len > n - off) continue;
    uint32_t c = rx_rt_crc32(0, d + off, (size_t)len);
    for (int b = 0; b < 4; b++) e[80 + b] = (uint8_t)(c >> (8 * b));
  }
}

#endif
