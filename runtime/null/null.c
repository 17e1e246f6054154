/* runtime/null/null.c: the null backend. It compiles everywhere and runs nothing: every entry
 * point of the device interface (runtime/device.h) reports RX_ERR_UNSUPPORTED, naming the
 * backend and the call. It is opened only when asked for by name (`--device null`,
 * RX_DEVICE=null), never by default.
 *
 * It is also the skeleton a new backend copies (docs/backends.md): the entry points below are
 * in the order of rt_backend, and each comment says what a real backend does there and what the
 * core (runtime/runtime.c) has already checked before calling it. */
#include "runtime/device.h"

/* Every entry point's answer. */
static rx_status unsupported(const char *call) {
  return base_status_make(RX_ERR_UNSUPPORTED,
                          "null: %s: the null backend runs nothing (a skeleton "
                          "for new backends, runtime/null/null.c)",
                          call);
}

/* Loads the driver once (dlopen through rt_dlopen_first, symbols with dlsym, under a
 * pthread_once like runtime/vulkan/vulkan.c) and says why it cannot: NULL when it can. The core
 * calls it before anything else of the backend. */
static rx_status nl_check(void) { return unsupported("check"); }

/* Fills *out_infos (allocated with a, freed by the caller with rx_rt_free_device_infos) with
 * one rx_rt_device_info per device; *out_count zero and *out_infos NULL on error. */
static rx_status nl_enumerate(rx_rt_device_info **out_infos, size_t *out_count,
                              const rx_rt_allocator *a) {
  (void)a;
  *out_infos = NULL;
  *out_count = 0;
  return unsupported("enumerate");
}

/* d is zeroed, device_size bytes, with be, refs, alloc set; fills d->info and creates the
 * context and queues of device `index`. device_destroy is called after it in every case. */
static rx_status nl_device_init(rx_rt_device *d, int index, const rx_rt_device_options *opts) {
  (void)d, (void)index, (void)opts;
  return unsupported("device_init");
}
/* Frees what device_init made (also after a failed device_init: check each handle). */
static void nl_device_destroy(rx_rt_device *d) { (void)d; }
/* Submits what is queued and waits; a device error is sticky (d->lost). */
static rx_status nl_synchronize(rx_rt_device *d) {
  (void)d;
  return unsupported("synchronize");
}

/* b is zeroed, buffer_size bytes, with device, refs and size (>= 1) set: allocates the memory. */
static rx_status nl_buffer_init(rx_rt_buffer *b) {
  (void)b;
  return unsupported("buffer_init");
}
static void nl_buffer_destroy(rx_rt_buffer *b) { (void)b; }
/* Ranges are checked by the core; writes and reads are ordered with launches on the queue. */
static rx_status nl_buffer_write(rx_rt_buffer *b, size_t offset, const void *src, size_t n) {
  (void)b, (void)offset, (void)src, (void)n;
  return unsupported("buffer_write");
}
static rx_status nl_buffer_read(rx_rt_buffer *b, size_t offset, void *dst, size_t n) {
  (void)b, (void)offset, (void)dst, (void)n;
  return unsupported("buffer_read");
}
static rx_status nl_buffer_fill(rx_rt_buffer *b, size_t offset, size_t n, uint8_t value) {
  (void)b, (void)offset, (void)n, (void)value;
  return unsupported("buffer_fill");
}
static rx_status nl_buffer_copy(rx_rt_buffer *src, size_t src_off, rx_rt_buffer *dst,
                                size_t dst_off, size_t n) {
  (void)src, (void)src_off, (void)dst, (void)dst_off, (void)n;
  return unsupported("buffer_copy");
}

/* Compiles or loads k's binary (k->binary, k->ptx or k->source, as library.c loaded them) and
 * sets k->impl; kernel_destroy frees it. */
static rx_status nl_kernel_create(rx_rt_device *d, rx_rt_kernel *k) {
  (void)d, (void)k;
  return unsupported("kernel_create");
}
static void nl_kernel_destroy(rx_rt_device *d, rx_rt_kernel *k) { (void)d, (void)k; }
/* Queues one launch: grid and block from p, buffers bound as k->buffers says, the symbolic
 * values (validated by the core) passed as k->scalar_location says. */
static rx_status nl_launch(rx_rt_device *d, rx_rt_kernel *k, const rx_rt_launch_params *p) {
  (void)d, (void)k, (void)p;
  return unsupported("launch");
}

/* GPU timestamps around queued work: record 0 (start) and 1 (stop), then the elapsed time. */
static rx_status nl_timer_init(rx_rt_timer *t) {
  (void)t;
  return unsupported("timer_init");
}
static void nl_timer_destroy(rx_rt_timer *t) { (void)t; }
static rx_status nl_timer_record(rx_rt_timer *t, int which) {
  (void)t, (void)which;
  return unsupported("timer_record");
}
static rx_status nl_timer_elapsed(rx_rt_timer *t, double *out_ms) {
  (void)t;
  *out_ms = 0;
  return unsupported("timer_elapsed");
}

const rt_backend rt_null_backend = {
    nl_check,
    nl_enumerate,
    sizeof(rx_rt_device),
    sizeof(rx_rt_buffer),
    sizeof(rx_rt_timer),
    nl_device_init,
    nl_device_destroy,
    nl_synchronize,
    nl_buffer_init,
    nl_buffer_destroy,
    nl_buffer_write,
    nl_buffer_read,
    nl_buffer_fill,
    nl_buffer_copy,
    nl_kernel_create,
    nl_kernel_destroy,
    nl_launch,
    nl_timer_init,
    nl_timer_destroy,
    nl_timer_record,
    nl_timer_elapsed,
    NULL, /* buffer_import: optional; without it rx_rt_buffer_import_host copies */
    NULL, /* buffer_map: optional; without it rx_rt_buffer_map is unsupported */
};
