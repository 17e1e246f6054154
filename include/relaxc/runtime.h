/* relaxc/runtime.h: the public C API of the relaxc runtime.
 *
 * The runtime loads the kernels that `relaxc codegen` writes (a directory holding kernels.json and
 * the kernels' binaries, see docs/kernel-abi.md) and runs them on a device: Vulkan, CUDA or Metal.
 * It includes nothing of the compiler and loads every driver at run time (dlopen), so one binary
 * starts anywhere and says which backend is unavailable and why.
 *
 * Conventions (the same as relaxc/compiler.h):
 * - Every handle is opaque. Devices, buffers and libraries are reference-counted: the creator
 *   holds one reference; rx_rt_*_release drops one. A buffer or library keeps its device alive.
 *   Kernels are borrowed from their library and live as long as it does.
 * - Functions that can fail return an rx_status: NULL is success; otherwise an error whose
 *   message names what failed and what was expected. Free it with rx_status_free. Out-parameters
 *   (`out_x`) are zeroed first and set on success only. Nothing here exits or aborts on bad input,
 *   on a missing driver or on a device error.
 * - Ordering: launches, fills and device-to-device copies are queued in order on the device and
 *   may run later (Vulkan records them into one command buffer, submitted by
 *   rx_rt_device_synchronize). rx_rt_buffer_write and rx_rt_buffer_read are synchronous: they
 *   first wait for everything queued before them.
 * - Host memory: every runtime object is allocated through the rx_rt_allocator given to
 *   rx_rt_device_open (default: the C library's). Thread safety: a device and everything made
 *   from it must be used from one thread at a time. */
#ifndef RELAXC_RUNTIME_H
#define RELAXC_RUNTIME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* statuses (rx_status, rx_status_code) and dtypes: relaxc/types.h */

/* ---- opaque handles ---- */
typedef struct rx_rt_device rx_rt_device;   /* an opened device of one backend */
typedef struct rx_rt_buffer rx_rt_buffer;   /* device memory */
typedef struct rx_rt_library rx_rt_library; /* the kernels of one kernels.json, loaded */
typedef struct rx_rt_kernel rx_rt_kernel;   /* one kernel of a library (borrowed) */
typedef struct rx_rt_timer rx_rt_timer;     /* a pair of device timestamps */

typedef enum rx_rt_backend {
  RX_RT_BACKEND_VULKAN = 0, /* "vulkan": libvulkan.so.1 (Android: libvulkan.so) */
  RX_RT_BACKEND_CUDA,       /* "cuda": libcuda.so.1, the driver API */
  RX_RT_BACKEND_METAL,      /* "metal": Apple platforms only */
  RX_RT_BACKEND_COUNT
} rx_rt_backend;

const char *rx_rt_backend_name(rx_rt_backend b); /* "vulkan", "cuda", "metal" */

/* ---- host allocator: one hook for all host memory of the runtime (Lua style) ----
 * realloc(user, NULL, n) allocates, realloc(user, p, 0) frees and returns NULL, otherwise it
 * resizes. Returning NULL for n > 0 makes the runtime call fail with RX_ERR_OUT_OF_MEMORY. */
typedef struct rx_rt_allocator {
  void *(*realloc)(void *user, void *ptr, size_t size);
  void *user;
} rx_rt_allocator;

/* ---- devices ---- */
typedef struct rx_rt_device_info {
  rx_rt_backend backend;
  int index;                    /* index within the backend: the N of "vulkan:N" */
  char name[256];               /* the driver's name of the device */
  uint64_t memory_bytes;        /* device memory (Vulkan: the largest device-local heap) */
  uint32_t subgroup_size;       /* warp / subgroup / SIMD-group width */
  uint32_t shared_memory_bytes; /* per block (workgroup, threadgroup) */
  uint32_t push_constant_bytes; /* Vulkan: maxPushConstantsSize; 0 elsewhere */
  uint32_t max_threads_per_block;
  bool fp16;         /* 16-bit float arithmetic and storage in kernels */
  bool int8;         /* 8-bit integer arithmetic and storage in kernels */
  bool timestamps;   /* rx_rt_timer_* works */
  bool unified_memory; /* buffers are host-visible (no staging copies) */
} rx_rt_device_info;

/* Whether a backend can be used here: NULL, or a status saying why not (for example
 * "vulkan: libvulkan.so.1 not found: install the Vulkan loader (Debian: libvulkan1) and a
 * driver"). */
rx_status rx_rt_backend_check(rx_rt_backend b);

/* The devices of one backend. *out_infos is an array of *out_count entries, freed with
 * rx_rt_free_device_infos. A backend without driver returns its rx_rt_backend_check status. */
rx_status rx_rt_enumerate(rx_rt_backend b, rx_rt_device_info **out_infos, size_t *out_count);
void rx_rt_free_device_infos(rx_rt_device_info *infos);

typedef struct rx_rt_device_options {
  const rx_rt_allocator *allocator; /* NULL: malloc/realloc/free */
  /* Vulkan: enable VK_LAYER_KHRONOS_validation and count its messages (see
   * rx_rt_device_validation_messages). -1: from the environment (RX_VULKAN_VALIDATION=1), 0: off,
   * 1: on (opening fails when the layer is not installed). */
  int validation;
  /* Vulkan: keep buffers out of host-visible memory and copy through staging buffers, as on a
   * discrete GPU without resizable BAR (also RX_VULKAN_STAGING=1). For testing. */
  bool force_staging;
} rx_rt_device_options;

/* Opens a device. spec is "BACKEND:INDEX" ("vulkan:0", "cuda:1", "metal:0"), or "BACKEND"
 * (index 0); NULL or "" uses the environment variable RX_DEVICE, and without it the first
 * device of the first available backend (CUDA, then Metal, then Vulkan). opts may be NULL. */
rx_status rx_rt_device_open(const char *spec, const rx_rt_device_options *opts,
                            rx_rt_device **out_device);
void rx_rt_device_retain(rx_rt_device *d);
void rx_rt_device_release(rx_rt_device *d); /* NULL is fine */
const rx_rt_device_info *rx_rt_device_get_info(const rx_rt_device *d);
/* Submits what is queued and waits for it. A device error (for example a lost device) is
 * returned here and by every later call. */
rx_status rx_rt_device_synchronize(rx_rt_device *d);
/* Vulkan with validation: the number of validation-layer messages (warnings and errors) seen so
 * far, and the last one in *out_last (may be NULL; valid until the next call on d). */
size_t rx_rt_device_validation_messages(const rx_rt_device *d, const char **out_last);

/* ---- buffers ---- */
rx_status rx_rt_buffer_alloc(rx_rt_device *d, size_t bytes, rx_rt_buffer **out_buffer);
void rx_rt_buffer_retain(rx_rt_buffer *b);
void rx_rt_buffer_release(rx_rt_buffer *b); /* NULL is fine; the memory is reused after the
                                               device finished what was queued before */
size_t rx_rt_buffer_size(const rx_rt_buffer *b);
rx_rt_device *rx_rt_buffer_device(const rx_rt_buffer *b);
/* Host to device and device to host, synchronous (they wait for queued work first). */
rx_status rx_rt_buffer_write(rx_rt_buffer *b, size_t offset, const void *src, size_t bytes);
rx_status rx_rt_buffer_read(rx_rt_buffer *b, size_t offset, void *dst, size_t bytes);
/* Queued: sets bytes [offset, offset + bytes) to value; copies between buffers of one device. */
rx_status rx_rt_buffer_fill(rx_rt_buffer *b, size_t offset, size_t bytes, uint8_t value);
rx_status rx_rt_buffer_copy(rx_rt_buffer *src, size_t src_offset, rx_rt_buffer *dst,
                            size_t dst_offset, size_t bytes);

/* ---- kernel libraries (docs/kernel-abi.md) ---- */
/* Loads DIR/kernels.json and the binaries it names (Vulkan: `binary`, SPIR-V; CUDA: `binary`, a
 * cubin, else `ptx`; Metal: `binary`, a metallib, else `source`, MSL). */
rx_status rx_rt_library_load(rx_rt_device *d, const char *dir, rx_rt_library **out_library);

/* The same from memory (for artifacts): the text of kernels.json and the files it names. */
typedef struct rx_rt_blob {
  const char *name; /* as named in kernels.json ("add.spv") */
  const void *data;
  size_t size;
} rx_rt_blob;
rx_status rx_rt_library_load_memory(rx_rt_device *d, const char *json, size_t json_len,
                                    const rx_rt_blob *blobs, size_t blob_count,
                                    rx_rt_library **out_library);
void rx_rt_library_retain(rx_rt_library *l);
void rx_rt_library_release(rx_rt_library *l); /* NULL is fine */

size_t rx_rt_library_kernel_count(const rx_rt_library *l);
rx_rt_kernel *rx_rt_library_kernel_at(const rx_rt_library *l, size_t i);
/* RX_ERR_NOT_FOUND naming the kernel and the library when absent. */
rx_status rx_rt_library_kernel(const rx_rt_library *l, const char *name, rx_rt_kernel **out_kernel);

const char *rx_rt_kernel_name(const rx_rt_kernel *k);
size_t rx_rt_kernel_buffer_count(const rx_rt_kernel *k);
size_t rx_rt_kernel_scalar_count(const rx_rt_kernel *k);
const char *rx_rt_kernel_scalar_name(const rx_rt_kernel *k, size_t i); /* sorted by name */
void rx_rt_kernel_block(const rx_rt_kernel *k, uint32_t out_block[3]);

/* ---- launches ---- */
/* The low-level launch: the buffers in the kernel's order, then its symbolic values (int32, in
 * the kernel's order). grid is in blocks; block must be the kernel's (Vulkan and Metal bake it
 * into the kernel). Queued. */
typedef struct rx_rt_launch_params {
  uint32_t grid[3];
  uint32_t block[3];
  rx_rt_buffer *const *buffers;
  size_t buffer_count;
  const int32_t *scalars;
  size_t scalar_count;
} rx_rt_launch_params;
rx_status rx_rt_kernel_launch(rx_rt_kernel *k, const rx_rt_launch_params *p);

/* Symbolic values by name, as 64-bit integers. */
typedef struct rx_rt_symbols {
  const char *const *names;
  const int64_t *values;
  size_t count;
} rx_rt_symbols;

/* The convenience launch: evaluates the kernel's condition (a false condition launches nothing
 * and sets *out_launched to false; out_launched may be NULL) and grid from kernels.json with the
 * given symbolic values, checks that every value the kernel takes and every grid size fits in
 * int32, and launches with the kernel's block. */
rx_status rx_rt_kernel_launch_symbols(rx_rt_kernel *k, rx_rt_buffer *const *buffers,
                                      size_t buffer_count, const rx_rt_symbols *symbols,
                                      bool *out_launched);

/* Runs one program of the library: each of its kernels, in order, whose condition holds.
 * buffers[i] is the buffer of the program's parameter i (entries of scalar parameters are
 * ignored and may be NULL); each buffer is checked to hold its parameter's shape. */
rx_status rx_rt_library_run(rx_rt_library *l, const char *program, rx_rt_buffer *const *buffers,
                            size_t buffer_count, const rx_rt_symbols *symbols);

/* ---- timing with device timestamps ---- */
/* start and stop queue a timestamp; elapsed synchronizes and returns the device time between
 * them in milliseconds. RX_ERR_UNSUPPORTED where the device has no timestamps. */
rx_status rx_rt_timer_create(rx_rt_device *d, rx_rt_timer **out_timer);
rx_status rx_rt_timer_start(rx_rt_timer *t);
rx_status rx_rt_timer_stop(rx_rt_timer *t);
rx_status rx_rt_timer_elapsed_ms(rx_rt_timer *t, double *out_ms);
void rx_rt_timer_release(rx_rt_timer *t); /* NULL is fine */

/* ---- symbolic expressions (the text syntax of kernels.json) ----
 * Evaluates text with the given values: integers, names, + - *, // and % (floor division and
 * modulo), unary -, min(a, b), max(a, b), select(c, a, b), == != < <= > >=, && || !, parentheses.
 * Errors (RX_ERR_INVALID): malformed text (with the column), an unknown name, division by zero,
 * 64-bit overflow. */
rx_status rx_rt_eval(const char *text, const rx_rt_symbols *symbols, int64_t *out_value);

#ifdef __cplusplus
}
#endif
#endif
