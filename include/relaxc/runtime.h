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
  RX_RT_BACKEND_NULL,       /* "null": runs nothing, every call unsupported (runtime/null/: the
                               skeleton of a new backend); opened only by name */
  RX_RT_BACKEND_COUNT
} rx_rt_backend;

RX_API const char *rx_rt_backend_name(rx_rt_backend b); /* "vulkan", "cuda", "metal", "null" */

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
  bool fp16;           /* 16-bit float arithmetic and storage in kernels */
  bool int8;           /* 8-bit integer arithmetic and storage in kernels */
  bool timestamps;     /* rx_rt_timer_* works */
  bool unified_memory; /* buffers are host-visible (no staging copies) */
  /* rx_rt_buffer_import_host: the alignment of host memory the device uses in place (Vulkan:
   * minImportedHostPointerAlignment of VK_EXT_external_memory_host; CUDA: 256); 0: it cannot
   * (imports copy). Set by rx_rt_device_open (rx_rt_enumerate leaves it 0 on Vulkan). */
  uint64_t host_import_alignment;
} rx_rt_device_info;

/* Whether a backend can be used here: NULL, or a status saying why not (for example
 * "vulkan: libvulkan.so.1 not found: install the Vulkan loader (Debian: libvulkan1) and a
 * driver"). */
RX_API rx_status rx_rt_backend_check(rx_rt_backend b);

/* The devices of one backend. *out_infos is an array of *out_count entries, freed with
 * rx_rt_free_device_infos. A backend without driver returns its rx_rt_backend_check status. */
RX_API rx_status rx_rt_enumerate(rx_rt_backend b, rx_rt_device_info **out_infos, size_t *out_count);
RX_API void rx_rt_free_device_infos(rx_rt_device_info *infos);

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
RX_API rx_status rx_rt_device_open(const char *spec, const rx_rt_device_options *opts,
                                   rx_rt_device **out_device);
RX_API void rx_rt_device_retain(rx_rt_device *d);
RX_API void rx_rt_device_release(rx_rt_device *d); /* NULL is fine */
RX_API const rx_rt_device_info *rx_rt_device_get_info(const rx_rt_device *d);
/* Submits what is queued and waits for it. A device error (for example a lost device) is
 * returned here and by every later call. */
RX_API rx_status rx_rt_device_synchronize(rx_rt_device *d);
/* Vulkan with validation: the number of validation-layer messages (warnings and errors) seen so
 * far, and the last one in *out_last (may be NULL; valid until the next call on d). */
RX_API size_t rx_rt_device_validation_messages(const rx_rt_device *d, const char **out_last);

/* ---- buffers ---- */
RX_API rx_status rx_rt_buffer_alloc(rx_rt_device *d, size_t bytes, rx_rt_buffer **out_buffer);
RX_API void rx_rt_buffer_retain(rx_rt_buffer *b);
RX_API void rx_rt_buffer_release(rx_rt_buffer *b); /* NULL is fine; the memory is reused after the
                                               device finished what was queued before */
RX_API size_t rx_rt_buffer_size(const rx_rt_buffer *b);
RX_API rx_rt_device *rx_rt_buffer_device(const rx_rt_buffer *b);
/* Host to device and device to host, synchronous (they wait for queued work first). */
RX_API rx_status rx_rt_buffer_write(rx_rt_buffer *b, size_t offset, const void *src, size_t bytes);
RX_API rx_status rx_rt_buffer_read(rx_rt_buffer *b, size_t offset, void *dst, size_t bytes);
/* Queued: sets bytes [offset, offset + bytes) to value; copies between buffers of one device. */
RX_API rx_status rx_rt_buffer_fill(rx_rt_buffer *b, size_t offset, size_t bytes, uint8_t value);
RX_API rx_status rx_rt_buffer_copy(rx_rt_buffer *src, size_t src_offset, rx_rt_buffer *dst,
                                   size_t dst_offset, size_t bytes);

/* ---- host memory used in place (zero-copy) ----
 * rx_rt_buffer_import_host makes a buffer of the caller's host memory [ptr, ptr + bytes). Where
 * the device can use that memory itself (Vulkan with VK_EXT_external_memory_host: lavapipe,
 * integrated and most discrete GPUs; CUDA through cuMemHostRegister, device-mapped), the buffer
 * IS that memory: kernels read and write it in place, and *out_kind is RX_RT_IMPORT_IN_PLACE. The
 * caller keeps the memory valid and does not free it until the buffer is released: the release
 * waits for the queued work that may use it, so the memory is the caller's again when
 * rx_rt_buffer_release returns (a buffer also held by a tensor or a result lives as long as they
 * do). Host writes to it between calls are seen by the next call; results written into it are seen
 * after a synchronization (reading a result, rx_rt_buffer_map, rx_rt_device_synchronize). Otherwise
 * the buffer is a new device buffer holding a copy of the bytes (a synchronous write) and *out_kind
 * says why: the device cannot import host memory, or ptr is not aligned as the device requires
 * (Vulkan: the buffer's offset alignment, 64 bytes on lavapipe, within pages of
 * rx_rt_device_info.host_import_alignment; CUDA: 256 bytes), or the size is not whole 4-byte
 * words (kernels may write whole words), or the driver refused the range (CUDA: a range
 * registered already). Later writes on either side
 * are then not seen by the other. Errors (RX_ERR_INVALID, naming the argument): ptr NULL,
 * bytes 0, a range that wraps around, a size past the device's largest buffer; a pointer the
 * driver reports as not host memory. */
typedef enum rx_rt_import {
  RX_RT_IMPORT_NONE = 0,         /* not an import: a buffer the runtime allocated */
  RX_RT_IMPORT_IN_PLACE,         /* the caller's memory itself, used in place */
  RX_RT_IMPORT_COPY_UNSUPPORTED, /* copied: the device cannot import host memory */
  RX_RT_IMPORT_COPY_UNALIGNED,   /* copied: ptr is not aligned as the device requires */
  RX_RT_IMPORT_COPY_REFUSED,     /* copied: the driver refused to import the range */
} rx_rt_import;
RX_API const char *rx_rt_import_name(rx_rt_import k); /* "in place", "copied: unaligned", ... */
RX_API rx_status rx_rt_buffer_import_host(rx_rt_device *d, void *ptr, size_t bytes,
                                          rx_rt_buffer **out_buffer, rx_rt_import *out_kind);
RX_API rx_rt_import rx_rt_buffer_import_kind(const rx_rt_buffer *b);
/* The buffer's contents as host memory, read and written in place (no copy): synchronizes
 * first, then *out_ptr points at byte 0 of the buffer (an imported buffer: the caller's ptr).
 * Valid while the buffer lives and until work queued later writes it. RX_ERR_UNSUPPORTED where
 * the buffer is not host-visible (device memory of a discrete GPU: read it with
 * rx_rt_buffer_read). */
RX_API rx_status rx_rt_buffer_map(rx_rt_buffer *b, void **out_ptr);
/* Whether an artifact keeps the buffer: a slot of its planned storage (rx_rt_vm_call: the next
 * call of a function of that artifact overwrites it) or one of its weights (which every call
 * reads). A result tensor in such a buffer is to be read or copied before the next call, and not
 * written; a result in a buffer of its own stays as it is while the caller holds it, and may be
 * mapped and viewed (and written) without a copy for as long. */
RX_API bool rx_rt_buffer_kept(const rx_rt_buffer *b);

/* ---- kernel libraries (docs/kernel-abi.md) ---- */
/* Loads DIR/kernels.json and the binaries it names (Vulkan: `binary`, SPIR-V; CUDA: `binary`, a
 * cubin, else `ptx`; Metal: `binary`, a metallib, else `source`, MSL). */
RX_API rx_status rx_rt_library_load(rx_rt_device *d, const char *dir, rx_rt_library **out_library);

/* The same from memory (for artifacts): the text of kernels.json and the files it names. */
typedef struct rx_rt_blob {
  const char *name; /* as named in kernels.json ("add.spv") */
  const void *data;
  size_t size;
} rx_rt_blob;
RX_API rx_status rx_rt_library_load_memory(rx_rt_device *d, const char *json, size_t json_len,
                                           const rx_rt_blob *blobs, size_t blob_count,
                                           rx_rt_library **out_library);
RX_API void rx_rt_library_retain(rx_rt_library *l);
RX_API void rx_rt_library_release(rx_rt_library *l); /* NULL is fine */

RX_API size_t rx_rt_library_kernel_count(const rx_rt_library *l);
RX_API rx_rt_kernel *rx_rt_library_kernel_at(const rx_rt_library *l, size_t i);
/* RX_ERR_NOT_FOUND naming the kernel and the library when absent. */
RX_API rx_status rx_rt_library_kernel(const rx_rt_library *l, const char *name,
                                      rx_rt_kernel **out_kernel);

RX_API const char *rx_rt_kernel_name(const rx_rt_kernel *k);
RX_API size_t rx_rt_kernel_buffer_count(const rx_rt_kernel *k);
RX_API size_t rx_rt_kernel_scalar_count(const rx_rt_kernel *k);
RX_API const char *rx_rt_kernel_scalar_name(const rx_rt_kernel *k, size_t i); /* sorted by name */
RX_API void rx_rt_kernel_block(const rx_rt_kernel *k, uint32_t out_block[3]);

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
RX_API rx_status rx_rt_kernel_launch(rx_rt_kernel *k, const rx_rt_launch_params *p);

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
RX_API rx_status rx_rt_kernel_launch_symbols(rx_rt_kernel *k, rx_rt_buffer *const *buffers,
                                             size_t buffer_count, const rx_rt_symbols *symbols,
                                             bool *out_launched);

/* The programs of a library (kernels.json "programs") and their parameters, in order. */
typedef struct rx_rt_program_param {
  const char *name;
  bool is_buffer;           /* a buffer; otherwise a scalar (symbolic value) parameter */
  bool output;              /* written by the program */
  const char *dtype;        /* "f32", "f16", ...; may be NULL for scalars */
  size_t rank;              /* buffers: number of dims */
  const char *const *shape; /* buffers: rank expressions in the text syntax of kernels.json */
} rx_rt_program_param;
RX_API size_t rx_rt_library_program_count(const rx_rt_library *l);
RX_API const char *rx_rt_library_program_name(const rx_rt_library *l,
                                              size_t i); /* NULL past the end */
/* Copies up to max parameter descriptions (borrowed strings, valid while the library lives)
 * and sets *out_count to the program's number of parameters; RX_ERR_NOT_FOUND without it. */
RX_API rx_status rx_rt_library_program_params(const rx_rt_library *l, const char *program,
                                              rx_rt_program_param *out_params, size_t max,
                                              size_t *out_count);

/* Runs one program of the library: each of its kernels, in order, whose condition holds.
 * buffers[i] is the buffer of the program's parameter i (entries of scalar parameters are
 * ignored and may be NULL); each buffer is checked to hold its parameter's shape. */
RX_API rx_status rx_rt_library_run(rx_rt_library *l, const char *program,
                                   rx_rt_buffer *const *buffers, size_t buffer_count,
                                   const rx_rt_symbols *symbols);
/* Run-time checks (docs/kernel-abi.md, "Run-time checks": an index from data out of range): the
 * first check that failed in the kernels run since the last call, as an error with its message
 * ("main: binding `y` (take): index 70000 out of range [-50257, 50257) on axis 0"), and the
 * library's error buffer cleared; NULL when none failed. Reads a few bytes from the device (a
 * synchronization) only when a kernel with checks ran. rx_rt_vm_call does this at the end of
 * each call; a caller of rx_rt_library_run calls it after its runs. */
RX_API rx_status rx_rt_library_check(rx_rt_library *l);

/* ---- ragged (packed) tensors (docs/ops.md, "Ragged tensors") ---- */
/* Checks an offsets table before it is uploaded: indptr[0..n) with n >= 1, indptr[0] = 0,
 * non-decreasing, indptr[n - 1] = total. The kernels of ragged_softmax and ragged_attention read
 * it on the device and do not check it (a bad table gives wrong rows, never a read outside
 * 0 .. total - 1: they clamp every offset into that range). RX_ERR_INVALID naming the first bad
 * entry. */
RX_API rx_status rx_rt_check_indptr(const int32_t *indptr, int64_t n, int64_t total);

/* ---- timing with device timestamps ---- */
/* start and stop queue a timestamp; elapsed synchronizes and returns the device time between
 * them in milliseconds. RX_ERR_UNSUPPORTED where the device has no timestamps. */
RX_API rx_status rx_rt_timer_create(rx_rt_device *d, rx_rt_timer **out_timer);
RX_API rx_status rx_rt_timer_start(rx_rt_timer *t);
RX_API rx_status rx_rt_timer_stop(rx_rt_timer *t);
RX_API rx_status rx_rt_timer_elapsed_ms(rx_rt_timer *t, double *out_ms);
RX_API void rx_rt_timer_release(rx_rt_timer *t); /* NULL is fine */

/* ---- symbolic expressions (the text syntax of kernels.json) ----
 * Evaluates text with the given values: integers, names, + - *, // and % (floor division and
 * modulo), unary -, min(a, b), max(a, b), select(c, a, b), == != < <= > >=, && || !, parentheses.
 * Errors (RX_ERR_INVALID): malformed text (with the column), an unknown name, division by zero,
 * 64-bit overflow. */
RX_API rx_status rx_rt_eval(const char *text, const rx_rt_symbols *symbols, int64_t *out_value);

/* ---- artifacts (.rxm) and calls: the VM (runtime/vm_format.h, docs/artifact.md) ----
 * An artifact holds the host program of a module's graph functions, its kernels per backend and
 * a manifest. Loading checks the magic, the version, the section table, the CRC32 of every
 * section, the manifest and every instruction of the host program, so a corrupt file is an error
 * at load and never a crash at run time. Calls execute the host program on the artifact's device.
 * Messages start with the artifact's name (the path as given). */
typedef struct rx_rt_artifact rx_rt_artifact; /* a loaded .rxm (reference-counted) */
typedef struct rx_rt_tensor rx_rt_tensor; /* device buffer + dtype + shape (reference-counted) */
typedef struct rx_rt_value rx_rt_value;   /* a result: tensor, tuple, shape or prim */

#define RX_RT_MAX_NDIM 16

/* Loads an artifact for device d: its kernels for d's backend ("<backend>/kernels.json"; absent:
 * RX_ERR_UNSUPPORTED naming the backend and the targets present). d may be NULL to inspect an
 * artifact without running it (calls then fail). The artifact keeps d alive. */
RX_API rx_status rx_rt_artifact_load(rx_rt_device *d, const char *path,
                                     rx_rt_artifact **out_artifact);
/* The same from memory (copied); name is used in messages ("model.rxm"). */
RX_API rx_status rx_rt_artifact_load_memory(rx_rt_device *d, const void *data, size_t size,
                                            const char *name, rx_rt_artifact **out_artifact);
/* A multi-rank artifact (`relaxc compile --tensor-parallel N`; docs/artifact.md, "Multi-rank
 * artifacts") holds N normal artifacts, one per rank of a tensor-parallel group: its own program,
 * its shards of the weights and its own memory plan. rank_count: N, or 1 for a plain artifact.
 * load_rank: rank's artifact (rank 0 of a plain artifact: the artifact itself), mapped, not
 * copied; an out-of-range rank or a damaged container is an error naming the file. */
RX_API rx_status rx_rt_artifact_rank_count(const char *path, int *out_ranks);
RX_API rx_status rx_rt_artifact_load_rank(rx_rt_device *d, const char *path, int rank,
                                          rx_rt_artifact **out_artifact);
RX_API void rx_rt_artifact_retain(rx_rt_artifact *a);
RX_API void rx_rt_artifact_release(rx_rt_artifact *a); /* NULL is fine */
/* The device the artifact was loaded on; NULL when loaded without one. */
RX_API rx_rt_device *rx_rt_artifact_device(const rx_rt_artifact *a);

/* What the artifact holds (for `relaxc inspect`); strings live as long as the artifact. */
RX_API size_t rx_rt_artifact_section_count(const rx_rt_artifact *a);
/* Section i: its name, its bytes and size. false when i is out of range. */
RX_API bool rx_rt_artifact_section(const rx_rt_artifact *a, size_t i, const char **out_name,
                                   const void **out_data, size_t *out_size);
RX_API const char *rx_rt_artifact_manifest(const rx_rt_artifact *a); /* the manifest.json text */
/* The backends compiled for, comma-separated ("cuda, vulkan"), from "<backend>/kernels.json". */
RX_API const char *rx_rt_artifact_targets(const rx_rt_artifact *a);

RX_API size_t rx_rt_artifact_function_count(const rx_rt_artifact *a);
RX_API const char *rx_rt_artifact_function_name(const rx_rt_artifact *a,
                                                size_t fn); /* NULL: out of range */
RX_API size_t rx_rt_artifact_function_param_count(const rx_rt_artifact *a, size_t fn);
/* A parameter as the host program checks it at entry (its CHECK_TENSOR); a parameter without
 * check has name "", expected "?", dtype RX_DTYPE_UNKNOWN and ndim -1. */
typedef struct rx_rt_param_info {
  const char *name;     /* "x" */
  const char *expected; /* the struct info as text: "f32[n, 4096]" */
  rx_dtype dtype;       /* RX_DTYPE_UNKNOWN: any */
  int ndim;             /* -1: any rank */
} rx_rt_param_info;
RX_API bool rx_rt_artifact_function_param(const rx_rt_artifact *a, size_t fn, size_t param,
                                          rx_rt_param_info *out_info);
/* The function's facts (its ASSERTs: "n <= 4096") and planned storages (their ALLOC_STORAGE size
 * expressions, "16384"), in program order; NULL when i is out of range. */
RX_API size_t rx_rt_artifact_function_fact_count(const rx_rt_artifact *a, size_t fn);
RX_API const char *rx_rt_artifact_function_fact(const rx_rt_artifact *a, size_t fn, size_t i);
RX_API size_t rx_rt_artifact_function_storage_count(const rx_rt_artifact *a, size_t fn);
RX_API const char *rx_rt_artifact_function_storage(const rx_rt_artifact *a, size_t fn, size_t i);
/* The kernel programs one call of function fn runs, in order: those of its call_kernels and,
 * through call_fn, of the functions it calls (each instruction once: both arms of an if, a loop's
 * body once). Writes up to max of their names (borrowed from the artifact) to out_programs
 * (NULL: none) and returns how many there are. */
RX_API size_t rx_rt_artifact_function_programs(const rx_rt_artifact *a, size_t fn,
                                               const char **out_programs, size_t max);
/* The same for the builtins (call_extern: the KV cache's, a dispatched library's) that one call
 * of function fn may reach. */
RX_API size_t rx_rt_artifact_function_externs(const rx_rt_artifact *a, size_t fn,
                                              const char **out_externs, size_t max);
/* A readable listing of function fn's host program, one instruction a line (NULL when fn is out
 * of range or out of memory); free it with rx_rt_string_free. */
RX_API char *rx_rt_artifact_disassemble(const rx_rt_artifact *a, size_t fn);
RX_API void rx_rt_string_free(char *s);

/* ---- weights (docs/artifact.md "Weights") ----
 * The tensors an artifact carries (section weights.safetensors, or the side file its manifest
 * names relative to the artifact: a missing, truncated or corrupt one is an error at load). With
 * a device each is uploaded once, at load, into a buffer of its own. A parameter bound to a
 * weight gets it when a call leaves it out (rx_rt_vm_call_values). Strings and shapes live as
 * long as the artifact. */
typedef struct rx_rt_weight_info {
  const char *name;
  rx_dtype dtype;
  int ndim;
  const int64_t *shape;
  size_t bytes;
  rx_rt_tensor *tensor; /* on the artifact's device (borrowed); NULL when loaded without one */
} rx_rt_weight_info;
RX_API size_t rx_rt_artifact_weight_count(const rx_rt_artifact *a);
RX_API bool rx_rt_artifact_weight(const rx_rt_artifact *a, size_t i, rx_rt_weight_info *out_info);
/* The side file the weights were mapped from (the path as opened), or NULL: in the artifact. */
RX_API const char *rx_rt_artifact_weights_file(const rx_rt_artifact *a);
/* Whether parameter param of function fn is bound to a weight, and which (*out_weight, an index
 * for rx_rt_artifact_weight; out_weight may be NULL). */
RX_API bool rx_rt_artifact_param_weight(const rx_rt_artifact *a, size_t fn, size_t param,
                                        size_t *out_weight);

/* CRC-32 as in zlib (polynomial 0xEDB88320): crc = rx_rt_crc32(0, data, n), chainable. */
RX_API uint32_t rx_rt_crc32(uint32_t crc, const void *data, size_t n);

/* ---- tensors ---- */
RX_API size_t rx_rt_dtype_size(rx_dtype t);      /* bytes per element; 0 for RX_DTYPE_UNKNOWN */
RX_API const char *rx_rt_dtype_name(rx_dtype t); /* "f32"; "any" for RX_DTYPE_UNKNOWN */
/* A tensor over a new device buffer (contents undefined). ndim 0..RX_RT_MAX_NDIM, dims >= 0. */
RX_API rx_status rx_rt_tensor_create(rx_rt_device *d, rx_dtype dtype, int ndim,
                                     const int64_t *shape, rx_rt_tensor **out_tensor);
/* The same, filled from host memory holding the elements row-major (f16/bf16 as their bits). */
RX_API rx_status rx_rt_tensor_from_host(rx_rt_device *d, rx_dtype dtype, int ndim,
                                        const int64_t *shape, const void *data,
                                        rx_rt_tensor **out_tensor);
/* The same over the caller's memory, used in place where the device allows
 * (rx_rt_buffer_import_host: its rules for the memory's lifetime, and *out_kind, may be NULL). */
RX_API rx_status rx_rt_tensor_import_host(rx_rt_device *d, rx_dtype dtype, int ndim,
                                          const int64_t *shape, void *data,
                                          rx_rt_tensor **out_tensor, rx_rt_import *out_kind);
/* A tensor over an existing buffer (retained), from its byte 0; the buffer must be large enough. */
RX_API rx_status rx_rt_tensor_wrap(rx_rt_buffer *b, rx_dtype dtype, int ndim, const int64_t *shape,
                                   rx_rt_tensor **out_tensor);
RX_API void rx_rt_tensor_retain(rx_rt_tensor *t);
RX_API void rx_rt_tensor_release(rx_rt_tensor *t); /* NULL is fine */
RX_API rx_dtype rx_rt_tensor_dtype(const rx_rt_tensor *t);
RX_API int rx_rt_tensor_ndim(const rx_rt_tensor *t);
RX_API const int64_t *rx_rt_tensor_shape(const rx_rt_tensor *t);
RX_API size_t rx_rt_tensor_bytes(const rx_rt_tensor *t);         /* elements * element size */
RX_API rx_rt_buffer *rx_rt_tensor_buffer(const rx_rt_tensor *t); /* borrowed */
/* Device to host, synchronous: dst must hold rx_rt_tensor_bytes(t) bytes (bytes must equal it). */
RX_API rx_status rx_rt_tensor_read(rx_rt_tensor *t, void *dst, size_t bytes);

/* ---- values (results of calls) ---- */
typedef enum rx_rt_value_kind {
  RX_RT_VALUE_TENSOR = 0,
  RX_RT_VALUE_TUPLE,
  RX_RT_VALUE_SHAPE,
  RX_RT_VALUE_PRIM,
  RX_RT_VALUE_STORAGE, /* a planned storage (internal to the host program) */
  RX_RT_VALUE_OBJECT,  /* a runtime object (a KV cache: relaxc/llm.h), made by a builtin */
} rx_rt_value_kind;
RX_API rx_rt_value_kind rx_rt_value_kind_of(const rx_rt_value *v);
RX_API rx_rt_tensor *rx_rt_value_tensor(const rx_rt_value *v); /* borrowed; NULL if not a tensor */
RX_API size_t rx_rt_value_tuple_size(const rx_rt_value *v);    /* 0 if not a tuple */
RX_API rx_rt_value *rx_rt_value_tuple_item(const rx_rt_value *v,
                                           size_t i); /* borrowed; NULL: none */
RX_API int rx_rt_value_shape(const rx_rt_value *v,
                             const int64_t **out_dims); /* ndim; -1: not a shape */
RX_API int64_t rx_rt_value_prim(const rx_rt_value *v, rx_dtype *out_dtype); /* 0 if not a prim */
RX_API void rx_rt_value_retain(rx_rt_value *v);
RX_API void rx_rt_value_release(rx_rt_value *v); /* NULL is fine */

/* ---- objects: values of a runtime type that the host program passes around (graph struct info
 * `Object`) and the builtins reached through call_extern make and use ---- */
typedef struct rx_rt_object_type {
  const char *name;              /* "kv_cache": named in messages */
  void (*destroy)(void *object); /* runs when the last value holding the object is released */
} rx_rt_object_type;
/* A value holding object, which it owns from now on (destroy runs at the last release, or at
 * once when this fails). */
RX_API rx_status rx_rt_value_from_object(const rx_rt_object_type *type, void *object,
                                         rx_rt_value **out_value);
/* v's object when v holds one of that type, else NULL (borrowed). */
RX_API void *rx_rt_value_object(const rx_rt_value *v, const rx_rt_object_type *type);

/* ---- values as arguments (rx_rt_vm_call_values) ---- */
/* A value holding t (a new reference). */
RX_API rx_status rx_rt_value_from_tensor(rx_rt_tensor *t, rx_rt_value **out_value);
/* A scalar (graph struct info Prim(dtype)): integers and bool as their value. */
RX_API rx_status rx_rt_value_from_prim(rx_dtype dtype, int64_t v, rx_rt_value **out_value);
/* A shape value (Shape([...])) of ndim dims (0..RX_RT_MAX_NDIM), copied. */
RX_API rx_status rx_rt_value_from_shape(const int64_t *dims, int ndim, rx_rt_value **out_value);

/* ---- calls ----
 * Runs graph function fn of the artifact with the given tensors as its parameters (in order;
 * the parameters bound to weights may be left out: rx_rt_vm_call_values).
 * Errors name the function: a missing function ("no function 'foo' in model.rxm (functions:
 * main)"), a wrong argument count, a parameter whose dtype, rank or shape differs from its
 * struct info ("main: parameter 'x': expected f32[n, 4096], got f32[3, 4095]"), a violated fact
 * with the values of its variables, an unavailable extern, a device error. Kernels are queued;
 * reading a result synchronizes. Planned storages are allocated at the first call and kept by the
 * artifact: a result that lives in planned storage is overwritten by the next call (copy or read
 * it first). */
RX_API rx_status rx_rt_vm_call(rx_rt_artifact *a, const char *fn, rx_rt_tensor *const *inputs,
                               size_t n, rx_rt_value **out_result);
/* The same with values as arguments (tensors, prims, shapes, objects, tuples; not storages).
 * Weights: a call that passes every parameter but those bound to weights, in order, gets the
 * weights for them; a call that passes every parameter overrides them. rx_rt_vm_call and
 * rx_rt_vm_bench follow the same rule. */
RX_API rx_status rx_rt_vm_call_values(rx_rt_artifact *a, const char *fn, rx_rt_value *const *args,
                                      size_t n, rx_rt_value **out_result);
/* Calls fn `warmup` times, then `iters` times, and returns the mean wall-clock time per call in
 * milliseconds, synchronized (iters >= 1). */
RX_API rx_status rx_rt_vm_bench(rx_rt_artifact *a, const char *fn, rx_rt_tensor *const *inputs,
                                size_t n, int warmup, int iters, double *out_ms_per_call);

#ifdef __cplusplus
}
#endif
#endif
