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
/* Room for need elements of size bytes in the array *p of *cap (doubled, from 64, as needed; its
 * first *cap elements kept); false when out of memory (nothing changed). */
bool rt_grow(const rx_rt_allocator *a, void **p, size_t *cap, size_t need, size_t size);
char *rt_strdup(const rx_rt_allocator *a, const char *s);
rx_status rt_oom(const char *what, size_t n); /* RX_ERR_OUT_OF_MEMORY naming what */
extern const rx_rt_allocator rt_default_allocator;

/* ---- symbolic expressions compiled at load (expr.c) ----
 * Each variable name of an expression is a slot of a name table; the expressions of one kernel,
 * one program or one host program share a table, and are evaluated over a value and a "bound"
 * flag per slot. Compiling reports malformed text (with its column); evaluating reports an
 * unbound variable, division by zero and 64-bit overflow, as rx_rt_eval does, and allocates
 * nothing. */
#define RT_NO_SLOT        0xffffffffu
#define RT_EXPR_MAX_STACK 256 /* the evaluator's stack, on the C stack: 2 KiB */
typedef struct rt_names {
  const rx_rt_allocator *alloc;
  char **names;
  uint32_t count, cap;
} rt_names;
/* The slot of name[0..len), added when new; RT_NO_SLOT when out of host memory. */
uint32_t rt_names_slot(rt_names *t, const char *name, size_t len);
uint32_t rt_names_find(const rt_names *t, const char *name); /* RT_NO_SLOT when absent */
void rt_names_free(rt_names *t);
typedef struct rt_expr rt_expr;
/* Compiles text over names (its allocator is the expression's). */
rx_status rt_expr_compile(const char *text, rt_names *names, rt_expr **out);
void rt_expr_free(const rx_rt_allocator *a, rt_expr *x); /* NULL is fine */
rx_status rt_expr_eval(const rt_expr *x, const int64_t *values, const uint8_t *bound, int64_t *out);
const char *rt_expr_text(const rt_expr *x);
bool rt_expr_constant(const rt_expr *x, int64_t *out); /* a literal integer */
uint32_t rt_expr_var_count(const rt_expr *x);          /* its distinct variables, in text order */
uint32_t rt_expr_var_slot(const rt_expr *x, uint32_t i);
/* values and bound of each slot of names from symbols (by name, the first one given). */
void rt_symbols_gather(const rx_rt_symbols *symbols, const rt_names *names, int64_t *values,
                       uint8_t *bound);

/* ---- the kernel description: one entry of kernels.json's "kernels" ---- */
/* A kernel's and a program's symbolic variables are gathered into arrays on the C stack at each
 * launch: the loader refuses kernels.json with more (no generated kernel comes near). */
#define RT_MAX_KERNEL_VARS  64
#define RT_MAX_PROGRAM_VARS 256
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
  int param;   /* index into the program's params; -1: the error buffer (error) */
  int binding; /* Vulkan binding / Metal buffer index / CUDA parameter position */
  bool written;
  bool error; /* the library's error buffer of run-time checks (docs/kernel-abi.md) */
} rt_buffer_arg;

/* A run-time check of a kernel (kernels.json "checks"): the code it writes, its message. */
typedef struct rt_check {
  int32_t code;
  char *message;
} rt_check;

typedef struct rt_scalar_arg {
  char *name;
  rt_expr *value;  /* the name compiled: evaluated over the kernel's variables */
  uint32_t offset; /* byte offset in the push-constant block, uniform buffer or struct */
} rt_scalar_arg;

struct rx_rt_kernel {
  rx_rt_library *library; /* the owner */
  char *name, *program;
  rt_names vars; /* its symbolic variables: those of its condition, grid and values */
  rt_expr *cond; /* NULL: always runs */
  rt_expr *grid[3];
  uint32_t block[3];
  uint32_t shared_bytes;
  bool shared_dynamic;    /* kernels.json "shared_dynamic": the launch asks for shared_bytes of
                             dynamic shared memory (CUDA); else the kernel declares it statically */
  uint32_t subgroup_size; /* the subgroup size it must run with (kernels.json); 0: any */
  bool coop_matrix;       /* kernels.json "cooperative_matrix": needs VK_NV_cooperative_matrix */
  rt_scalar_location scalar_location;
  uint32_t scalar_bytes;
  int scalar_binding;
  size_t nbuffers, nscalars;
  rt_buffer_arg *buffers;
  rt_scalar_arg *scalars;
  size_t nchecks;
  rt_check *checks;
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
  char **shape;      /* rank expressions */
  rt_expr **shape_x; /* the same compiled over the program's variables */
  bool output;       /* written by the program ("output": true) */
} rt_param;

typedef struct rt_program {
  char *name;
  size_t nparams, nkernels;
  rt_param *params;
  rx_rt_kernel **kernels;  /* borrowed from the library's kernels */
  rt_names vars;           /* its symbolic variables: of its parameters' shapes and kernels */
  uint32_t **kernel_slots; /* per kernel: the program's slot of each of the kernel's variables */
} rt_program;

struct rx_rt_library {
  int refs;
  rx_rt_device *device;
  char *origin; /* the directory, or "<memory>" (for messages) */
  char *target, *lang;
  size_t nkernels, nprograms;
  rx_rt_kernel *kernels;
  rt_program *programs;
  /* run-time checks: the error buffer its kernels with checks write (RX_CHECK_WORDS i32,
   * allocated and zeroed at the first launch of one), and whether one ran since the last
   * rx_rt_library_check */
  rx_rt_buffer *err;
  bool err_pending;
};

/* ---- replaying launches (replay.c) ----
 * A backend queues its launches in a log and flushes them at its synchronization points. At a
 * flush, rt_replay_find looks the sequence up among those seen before: DIRECT (new, or built
 * unsuccessfully: launch or record each as usual), BUILD (seen for the second time: the backend
 * builds its replayable form, sets entry->impl, replays it), HIT (built: the backend replays
 * entry->impl, in update mode after giving new parameters to each launch rt_replay_changed names).
 * rt_replay_done ends every flush (ok false: the backend could not build or replay, and launched
 * the log directly). Keys and words are described in replay.c; a launch's words are compared in
 * full, so a changed value is never replayed stale. */
/* Sequences remembered per device: the batches of a decode step and of a prefill forward (Vulkan
 * flushes at each read of a result, CUDA at each read, write, fill or copy: a few batches per
 * step) for each of the prefill's 3 shape buckets (the matmul variants n = 1, n <= 16, n > 16),
 * with room to spare. */
#define RT_REPLAY_ENTRIES 64
typedef struct rt_replay_launch {
  rx_rt_kernel *k;
  uint32_t grid[3];
  uint32_t off, n; /* its words in the log's words */
} rt_replay_launch;
typedef struct rt_replay_log {
  rt_replay_launch *launches;
  size_t n, cap;
  uint64_t *words; /* the launches' parameters: buffer identities, symbolic values */
  size_t nwords, capwords;
} rt_replay_log;
typedef struct rt_replay_entry {
  uint64_t hash, used; /* of the key; the cache's clock at the last use */
  uint32_t seen;       /* 0: a free entry */
  bool failed;         /* the backend could not build it: launched directly */
  rt_replay_log log;   /* the launches as last run through it */
  void *impl;          /* the backend's replayable form, NULL until built */
} rt_replay_entry;
typedef enum rt_replay_action { RT_REPLAY_DIRECT, RT_REPLAY_BUILD, RT_REPLAY_HIT } rt_replay_action;
typedef struct rt_replay_stats {
  uint64_t direct, built, replayed; /* flushes of each kind */
  uint64_t updated;                 /* launches given new parameters before a replay (CUDA) */
} rt_replay_stats;
typedef struct rt_replay {
  const rx_rt_allocator *alloc;
  bool exact; /* grids and words are part of the key (a Vulkan command buffer cannot be patched) */
  void (*destroy)(void *ctx, void *impl); /* frees an evicted entry's impl */
  void *ctx;
  rt_replay_log log; /* the launches since the last flush */
  rt_replay_entry entries[RT_REPLAY_ENTRIES];
  uint64_t clock;
  rt_replay_stats stats;
} rt_replay;
rx_status rt_replay_add(rt_replay *r, rx_rt_kernel *k, const uint32_t grid[3],
                        const uint64_t *words, uint32_t n);
rt_replay_action rt_replay_find(rt_replay *r, rt_replay_entry **out_entry);
/* Update mode: launch i of the log differs (grid or words) from the entry's. */
bool rt_replay_changed(const rt_replay *r, const rt_replay_entry *e, size_t i);
void rt_replay_done(rt_replay *r, rt_replay_entry *e, bool ok); /* e: find's, or NULL; clears */
void rt_replay_clear(rt_replay *r); /* forgets every sequence (a kernel or the device goes) */
void rt_replay_free(rt_replay *r);

/* ---- the device interface ---- */
/* A backend's table carries no name nor kind of its own: RT_BACKENDS (runtime.c) pairs each
 * rx_rt_backend with its name and table, and a device's backend is d->info.backend
 * (rx_rt_backend_name gives "vulkan", "cuda", ...). */
typedef struct rt_backend {
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
  /* Optional (NULL: the core copies, rx_rt_buffer_import_host). b as for buffer_init, b->size
   * the caller's bytes (checked: ptr not NULL, the range does not wrap): makes b use the host
   * memory at ptr in place and sets *kind to RX_RT_IMPORT_IN_PLACE; or leaves b as it was, sets
   * *kind to why not (a copy follows through buffer_init and buffer_write) and returns NULL; or
   * fails. buffer_destroy of an imported buffer waits for the queued work that may use it. */
  rx_status (*buffer_import)(rx_rt_buffer *b, void *ptr, rx_rt_import *kind);
  /* Optional (NULL: unsupported): synchronizes and gives the host address of byte 0 of b, or
   * RX_ERR_UNSUPPORTED where b is not host-visible. */
  rx_status (*buffer_map)(rx_rt_buffer *b, void **out_ptr);
} rt_backend;

/* The backends' tables. metal/metal.c is linked in on Apple platforms only (runtime.c refers to
 * rt_metal_backend there); elsewhere it is compiled, not linked, against tests/runtime/objc_stub.
 */
extern const rt_backend rt_vulkan_backend;
extern const rt_backend rt_cuda_backend;
extern const rt_backend rt_metal_backend;
extern const rt_backend rt_null_backend; /* runtime/null/null.c: every call unsupported */

/* Native handles for a library that runs on the device's own queue (runtime/cuda/cublaslt.c),
 * set by a backend that has such libraries (CUDA) at device_init; NULL elsewhere. */
typedef struct rt_native {
  /* Issues what the backend holds back (logged launches, which the library's work must follow),
   * makes the device's context current and gives its queue (CUDA: the CUstream). A library's
   * work is thus never part of a replayed sequence: it ends one. */
  rx_status (*queue)(rx_rt_device *d, void **out_queue);
  uint64_t (*address)(rx_rt_buffer *b); /* the buffer's device address (CUDA: CUdeviceptr) */
} rt_native;

struct rx_rt_device {
  const rt_backend *be;
  const rt_native *native; /* NULL: no library calls on this backend */
  /* a library's state on this device (cuBLASLt's handle, workspace, plans), made at its first
   * call and freed by library_free when the device goes, before the backend's device_destroy */
  void *library;
  void (*library_free)(rx_rt_device *d);
  int refs;
  rx_rt_allocator alloc;
  rx_rt_device_info info;
  rx_status lost; /* sticky device error (e.g. device lost), returned by every later call */
  const rt_replay_stats *replay; /* the backend's launch replay, or NULL (tests read it) */
  size_t validation_count;
  char validation_last[1024];
};

struct rx_rt_buffer {
  rx_rt_device *device;
  int refs;
  size_t size;
  rx_rt_import import; /* rx_rt_buffer_import_host's outcome; RX_RT_IMPORT_NONE otherwise */
  bool kept; /* an artifact's: a slot of a planned storage (overwritten by calls), a weight */
};

struct rx_rt_timer {
  rx_rt_device *device;
  bool started, stopped;
};

/* A buffer the device itself owns (a library's workspace): it holds no reference to the device
 * (which frees it, in library_free), and is freed with rt_device_buffer_free. */
rx_status rt_device_buffer(rx_rt_device *d, size_t bytes, rx_rt_buffer **out);
void rt_device_buffer_free(rx_rt_buffer *b);

/* A copy of a sticky device error (for returning to the caller while keeping the original). */
rx_status rt_device_error(rx_rt_device *d);

/* Kernel library (library.c). */
rx_status rt_library_parse(rx_rt_device *d, const char *origin, const char *json, size_t len,
                           const char *dir, const rx_rt_blob *blobs, size_t nblobs,
                           rx_rt_library **out_library);
void rt_library_destroy(rx_rt_library *l);
/* The program of that name, or NULL. */
rt_program *rt_library_program(const rx_rt_library *l, const char *name);
/* Runs program p (rx_rt_library_run) with the values of its variables: values[slot] and
 * bound[slot] over p->vars. */
rx_status rt_program_run(rt_program *p, rx_rt_buffer *const *buffers, size_t buffer_count,
                         const int64_t *values, const uint8_t *bound);

/* dlopen: the first of names that loads, or NULL with the first dlerror() copied into why. */
void *rt_dlopen_first(const char *const *names, size_t n, char *why, size_t why_size);

#endif
