/* runtime/device.h: the runtime's internal header. The device interface (one table of function
 * pointers per backend), the parsed kernel description, host-memory helpers.
 *
 * A backend (vulkan/vulkan.c, cuda/cuda.c, metal/metal.c) fills an rt_backend table. The core
 * (runtime.c) owns the public objects (reference counts, argument checks, symbolic values) and
 * calls the table; a backend sees only validated arguments. Backend objects embed the core
 * struct as their first member, so the core allocates them with the size the table asks for. */
#ifndef RX_RUNTIME_DEVICE_H
#define RX_RUNTIME_DEVICE_H

#include "base/base.h"
#include "relaxc/runtime.h"

/* ---- host memory through the device's allocator ---- */
void *rt_alloc(const rx_rt_allocator *a, size_t n); /* zeroed; NULL when out of memory */
void rt_free(const rx_rt_allocator *a, void *p);
char *rt_strdup(const rx_rt_allocator *a, const char *s);
rx_status rt_oom(const char *what, size_t n); /* RX_ERR_OUT_OF_MEMORY naming what */
extern const rx_rt_allocator rt_default_allocator;

/* ---- the kernel description: one entry of kernels.json's "kernels" ---- */
typedef enum rt_scalar_location {
  RT_SCALARS_NONE = 0,       /* the kernel takes no symbolic values */
  RT_SCALARS_PUSH_CONSTANT,  /* Vulkan */
  RT_SCALARS_UNIFORM_BUFFER, /* Vulkan, std140, at binding `scalar_binding` */
  RT_SCALARS_PARAMETERS,     /* CUDA */
  RT_SCALARS_BUFFER,         /* Metal, at [[buffer(scalar_binding)]] */
} rt_scalar_location;

typedef struct rt_buffer_arg {
  char *name;
  char *dtype;
  int param;   /* index into the program's params */
  int binding; /* Vulkan binding / Metal buffer index / CUDA parameter position */
  bool written;
} rt_buffer_arg;

typedef struct rt_scalar_arg {
  char *name;
  uint32_t offset; /* byte offset in the push-constant block, uniform buffer or struct */
} rt_scalar_arg;

struct rx_rt_kernel {
  rx_rt_library *library; /* the owner */
  char *name, *program;
  char *condition; /* NULL: always runs */
  char *grid[3];
  uint32_t block[3];
  uint32_t shared_bytes;
  rt_scalar_location scalar_location;
  uint32_t scalar_bytes;
  int scalar_binding;
  size_t nbuffers, nscalars;
  rt_buffer_arg *buffers;
  rt_scalar_arg *scalars;
  /* The binaries as loaded (owned); the backend uses what it needs in kernel_create. */
  uint8_t *binary;
  size_t binary_size;
  char *binary_name;
  uint8_t *ptx; /* CUDA: NUL-terminated PTX, or NULL */
  size_t ptx_size;
  uint8_t *source; /* Metal: NUL-terminated MSL, or NULL */
  size_t source_size;
  void *impl; /* the backend's compiled kernel */
};

typedef struct rt_param {
  char *name;
  bool is_buffer;
  char *dtype;
  size_t rank;
  char **shape; /* rank expressions */
  bool output;  /* written by the program ("output": true) */
} rt_param;

typedef struct rt_program {
  char *name;
  size_t nparams, nkernels;
  rt_param *params;
  rx_rt_kernel **kernels; /* borrowed from the library's kernels */
} rt_program;

struct rx_rt_library {
  int refs;
  rx_rt_device *device;
  char *origin; /* the directory, or "<memory>" (for messages) */
  char *target, *lang;
  size_t nkernels, nprograms;
  rx_rt_kernel *kernels;
  rt_program *programs;
};

/* ---- the device interface ---- */
typedef struct rt_backend {
  rx_rt_backend kind;
  const char *name;
  /* NULL when the driver loads and initializes, else why not. Cached by the backend. */
  rx_status (*check)(void);
  rx_status (*enumerate)(rx_rt_device_info **out_infos, size_t *out_count,
                         const rx_rt_allocator *a);
  size_t device_size, buffer_size, timer_size; /* sizes of the backend's structs */
  rx_status (*device_init)(rx_rt_device *d, int index, const rx_rt_device_options *opts);
  void (*device_destroy)(rx_rt_device *d); /* after device_init succeeded or failed */
  rx_status (*synchronize)(rx_rt_device *d);
  rx_status (*buffer_init)(rx_rt_buffer *b);
  void (*buffer_destroy)(rx_rt_buffer *b);
  rx_status (*buffer_write)(rx_rt_buffer *b, size_t offset, const void *src, size_t n);
  rx_status (*buffer_read)(rx_rt_buffer *b, size_t offset, void *dst, size_t n);
  rx_status (*buffer_fill)(rx_rt_buffer *b, size_t offset, size_t n, uint8_t value);
  rx_status (*buffer_copy)(rx_rt_buffer *src, size_t src_off, rx_rt_buffer *dst, size_t dst_off,
                           size_t n);
  rx_status (*kernel_create)(rx_rt_device *d, rx_rt_kernel *k); /* sets k->impl */
  void (*kernel_destroy)(rx_rt_device *d, rx_rt_kernel *k);
  /* scalars: the kernel's symbolic values, validated */
  rx_status (*launch)(rx_rt_device *d, rx_rt_kernel *k, const rx_rt_launch_params *p);
  rx_status (*timer_init)(rx_rt_timer *t);
  void (*timer_destroy)(rx_rt_timer *t);
  rx_status (*timer_record)(rx_rt_timer *t, int which); /* 0: start, 1: stop */
  rx_status (*timer_elapsed)(rx_rt_timer *t, double *out_ms);
} rt_backend;

/* The backends' tables. metal/metal.c is linked in on Apple platforms only (runtime.c refers to
 * rt_metal_backend there); elsewhere it is compiled, not linked, against tests/runtime/objc_stub.
 */
extern const rt_backend rt_vulkan_backend;
extern const rt_backend rt_cuda_backend;
extern const rt_backend rt_metal_backend;
extern const rt_backend rt_null_backend; /* runtime/null/null.c: every call unsupported */

struct rx_rt_device {
  const rt_backend *be;
  int refs;
  rx_rt_allocator alloc;
  rx_rt_device_info info;
  rx_status lost; /* sticky device error (e.g. device lost), returned by every later call */
  size_t validation_count;
  char validation_last[1024];
};

struct rx_rt_buffer {
  rx_rt_device *device;
  int refs;
  size_t size;
};

struct rx_rt_timer {
  rx_rt_device *device;
  bool started, stopped;
};

/* A copy of a sticky device error (for returning to the caller while keeping the original). */
rx_status rt_device_error(rx_rt_device *d);

/* Kernel library (library.c). */
rx_status rt_library_parse(rx_rt_device *d, const char *origin, const char *json, size_t len,
                           const char *dir, const rx_rt_blob *blobs, size_t nblobs,
                           rx_rt_library **out_library);
void rt_library_destroy(rx_rt_library *l);

/* dlopen: the first of names that loads, or NULL with the first dlerror() copied into why. */
void *rt_dlopen_first(const char *const *names, size_t n, char *why, size_t why_size);

#endif
