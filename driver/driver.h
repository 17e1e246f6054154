/* driver/driver.h: the compile driver (floor 8, above codegen/): the options and result of a
 * compilation, the whole pipeline from a parsed module to an artifact (driver/compile.c:
 * drv_compile, the pipeline as one list; the per-target schedule -> codegen -> toolchain loop)
 * and the artifact writer (driver/artifact.c: the .rxm container of runtime/vm_format.h).
 * The passes it runs are declared in passes/passes.h. Internal header; the public face is
 * rx_compile_module in include/relaxc/compiler.h.
 *
 *   normalize + verify, fold, cse, dce, legalize, normalize, annotate, fuse_ops, fuse_tensor,
 *   dce, dedup, names, plan_memory, lower_host, then per target: schedule (a copy of every
 *   tensor program; the module keeps the unscheduled originals) and codegen; then the
 *   toolchains of every target on a pool of threads through the kernel cache
 *   (driver/toolchains.c, driver/kcache.c), and finally the artifact bytes (driver/artifact.c).
 *
 * The verifier (ir_module_verify) runs after every step that changes the module. */
#ifndef RX_DRIVER_H
#define RX_DRIVER_H

#include "../codegen/codegen.h"
#include "../ir/ir.h"
#include "../passes/passes.h"
#include "../targets/target.h"

#include <stdio.h>

#define RX_COMPILE_MAX_TARGETS 8

/* ---- the kernel cache (driver/kcache.c: the file layout, concurrency and eviction) ---- */
typedef struct rx_kcache rx_kcache;
#define RX_KCACHE_MAX_PARTS 4
/* The default limit of the cache's size (--cache-limit changes it): a 7B decoder's kernels for
 * three targets take about 2 MB, so this holds hundreds of models' worth. */
#define RX_KCACHE_DEFAULT_LIMIT (512ull << 20)
typedef struct rx_kblob {
  unsigned char *data;
  size_t len;
} rx_kblob;
/* Opens (creating it and its parents) the cache in dir, bounded to limit_bytes (0: unbounded).
 * Free with drv_kcache_close. Thread-safe after opening: get and put from any thread. */
rx_status drv_kcache_open(const char *dir, uint64_t limit_bytes, rx_kcache **out);
void drv_kcache_close(rx_kcache *c);
const char *drv_kcache_dir(const rx_kcache *c);
/* $RELAXC_CACHE_DIR, else $XDG_CACHE_HOME/relaxc, else $HOME/.cache/relaxc (heap; NULL with
 * none of them). */
char *drv_kcache_default_dir(void);
/* The nparts blobs stored for key into out (heap copies, each NUL-terminated past len: free());
 * false on a miss. A corrupt or foreign entry is a miss and is removed. */
bool drv_kcache_get(const rx_kcache *c, const void *key, size_t key_len, int nparts, rx_kblob *out);
/* Stores the blobs for key (temporary file + rename: atomic for concurrent readers). */
rx_status drv_kcache_put(const rx_kcache *c, const void *key, size_t key_len, int nparts,
                         const rx_kblob *parts);
/* Removes the least recently used entries until the cache fits its limit, and temporary files
 * of compiles that died; returns the bytes left. */
uint64_t drv_kcache_trim(const rx_kcache *c);

typedef struct rx_compile_options {
  const rx_target *targets[RX_COMPILE_MAX_TARGETS]; /* at most one per backend kind */
  int ntargets;
  const char *dump_after;       /* NULL, a step name (drv_compile_step_names) or "all": print the
                                   module (plan_memory: the plan; lower_host: the host program;
                                   schedule: kernels and rules; codegen: the kernel sources;
                                   artifact: the manifest) after that step */
  rx_strbuf *dump_out;          /* where dumps go; NULL: stderr */
  bool time_passes;             /* print a table of per-step milliseconds */
  rx_strbuf *time_out;          /* where the table goes; NULL: stderr */
  bool no_fuse;                 /* skip fuse_ops and fuse_tensor (tests compare fused/unfused) */
  bool no_nvrtc;                /* do not run NVRTC even where present (CUDA sources only) */
  rx_dispatch_options dispatch; /* large matmuls to a library (passes/dispatch.c); zero: none */
  /* toolchains (driver/toolchains.c): jobs, cache, progress */
  int jobs;         /* threads compiling kernels; < 1: the online CPUs. The artifact is the
                       same bytes for any count */
  rx_kcache *cache; /* compiled kernels kept and reused across compiles; NULL: none */
  bool progress;    /* one updating line on stderr when a compile takes over a second */
  /* weights (driver/weights.c): where the module's weight table goes */
  const char *weights_file;  /* a side file (drv_artifact_write writes it), named in the manifest
                                relative to artifact_path's directory; NULL: in the artifact */
  const char *artifact_path; /* where the artifact will be written (NULL: the current directory) */
  bool stream_weights;       /* r->artifact stops where the weights section's bytes start and
                                drv_artifact_write streams them from the sources, so a model of
                                several GB is never held in memory; false: r->artifact is whole */
} rx_compile_options;

/* ---- the weights image (driver/weights.c; docs/artifact.md "Weights") ----
 * The module's weight table as a safetensors image: the 8-byte header size and the JSON header
 * (padded with spaces), then each weight in table order at an RXM_WEIGHTS_ALIGN-aligned offset
 * (zero padding between). */
typedef struct rx_weights_image {
  char *head;        /* head_len bytes: the size word and the padded JSON (heap) */
  size_t head_len;   /* a multiple of RXM_WEIGHTS_ALIGN */
  uint64_t *offsets; /* per weight: its first byte, from the start of the image (heap) */
  size_t count;      /* weights; 0: the module has none (no section, no file) */
  uint64_t size;     /* bytes of the image */
} rx_weights_image;
void drv_weights_layout(const rx_module *m, rx_weights_image *out);
void drv_weights_image_free(rx_weights_image *img);
/* Where streamed bytes go; an error stops the stream. */
typedef rx_status (*rx_weights_sink)(void *ctx, const void *data, size_t n);
/* n elements of from (f32, f16, bf16 among themselves, rounding to nearest even, inf and NaN
 * kept; or from == to) into dst as to. */
void drv_weights_convert(rx_dtype to, void *dst, rx_dtype from, const void *src, size_t n);
/* The image into out (img->size bytes); returns its CRC-32. */
uint32_t drv_weights_to_memory(const rx_module *m, const rx_weights_image *img, void *out);
/* The image appended to f (named path in messages), its CRC-32 in *out_crc. */
rx_status drv_weights_to_file(const rx_module *m, const rx_weights_image *img, FILE *f,
                              const char *path, uint32_t *out_crc);
/* weights_path relative to the directory of artifact_path (both made absolute, "." and ".."
 * removed): what the manifest records and the runtime opens. Heap string. A weights_path outside
 * the artifact's folder (or one below it) is an error: the runtime refuses a manifest that names
 * its side file by an absolute or '../' path (docs/artifact.md, "The side file"). */
rx_status drv_weights_ref(const char *artifact_path, const char *weights_path, char **out_ref);
/* Reports every graph parameter named like a weight whose struct info is not exactly the
 * weight's (a parameter is bound to a weight only when both agree); false on any. */
bool drv_weights_check_params(const rx_module *m, rx_diag *diag);

/* ---- per-target output ---- */
typedef struct rx_target_output {
  const rx_target *target;
  const rx_tensor_fn **programs; /* scheduled copies, in module order */
  rx_kernel_list **kernels;      /* per program */
  int nprograms;
  int nkernels;     /* over all programs */
  rx_kernel **flat; /* every kernel, program order */
  const char **ptx; /* CUDA, per flat kernel: PTX text or NULL (arena) */
  size_t *ptx_len;
  const char **cubin; /* CUDA, per flat kernel: cubin bytes or NULL (arena) */
  size_t *cubin_len;
  bool binaries;    /* SPIR-V (vulkan) / PTX and cubin (cuda) present for every kernel */
  const char *note; /* why binaries are absent, or NULL */
} rx_target_output;

typedef struct rx_compile_result {
  rx_mem_plan plan;
  rx_host_program host;
  rx_target_output targets[RX_COMPILE_MAX_TARGETS];
  int ntargets;
  int nfunctions;          /* graph functions in the host program */
  int nprograms;           /* tensor programs in the module at the end */
  unsigned char *artifact; /* the .rxm bytes (heap); with o->stream_weights only its head */
  size_t artifact_len;
  size_t artifact_size;     /* the whole artifact's bytes (more than artifact_len when streamed) */
  rx_weights_image weights; /* the weights image's layout (count 0: no weights) */
  char *weights_ref;        /* the side file as the manifest names it (heap), or NULL: inside */
  uint32_t weights_crc;     /* CRC-32 of the image once it was written */
  size_t weights_at;        /* inside: the weights section's offset in the artifact, and */
  size_t weights_crc_at;    /* where its CRC-32 goes in the section table */
} rx_compile_result;

/* Compiles m in place (the module ends legalized and fused, with its tensor programs
 * unscheduled) and fills *out (zeroed first). Errors go to diag; returns false then (out may
 * hold partial results: free it with drv_compile_result_free in every case). */
bool drv_compile(rx_module *m, const rx_compile_options *o, rx_diag *diag, rx_compile_result *out);
void drv_compile_result_free(rx_compile_result *r);

/* Parses "vulkan,cuda,metal" into o->targets (appended); the status names a bad or missing
 * target. */
rx_status drv_compile_options_set_targets(rx_compile_options *o, const char *list);
/* Sets o->dispatch from a library name (NULL, "none" or "cublas") and a row threshold (0: the
 * default, RX_DISPATCH_DEFAULT_MIN_ROWS); the status names a bad name or threshold. */
rx_status drv_compile_options_set_dispatch(rx_compile_options *o, const char *library,
                                           int64_t min_rows);

/* The toolchain step (driver/toolchains.c): every kernel of every target through its toolchain
 * (shaderc and SPIR-V validation; NVRTC for PTX and cubin in one call), o->jobs at a time, the
 * cache first; results placed in kernel order. Under --time-passes rows per toolchain go to
 * times (NULL: none); start_ms is when the compile began (the progress line waits a second). Errors
 * (per kernel, in kernel order) go to diag. */
bool drv_compile_toolchains(rx_module *m, const rx_compile_options *o, rx_compile_result *r,
                            rx_diag *diag, rx_strbuf *times, double start_ms);

/* One line on stderr that rewrites itself (a terminal): drv_progress_line formats it, and a
 * NULL fmt clears it. Shown only once a compile has run for a second (since start_ms). */
void drv_progress_line(const rx_compile_options *o, double start_ms, const char *fmt, ...)
    RX_PRINTF(3, 4);
double drv_compile_now_ms(void);

/* The step names --dump-after accepts, NULL-terminated (plus "all"). */
extern const char *const drv_compile_step_names[];
bool drv_compile_step_known(const char *name);

/* The graph passes among those steps (verify ... names: each a function of the module alone),
 * NULL-terminated, in pipeline order. drv_pass_run runs the one named on m as drv_compile runs it
 * (o: its options, e.g. o->dispatch for dispatch), then normalizes and verifies the module as
 * drv_compile does between steps; false with the errors in diag (a module that does not verify
 * after the pass is reported as an internal error). What a pass needs first (legalize before
 * fuse_tensor) is the caller's business. `relaxc opt --passes` runs them. */
extern const char *const drv_pass_names[];
bool drv_pass_known(const char *name);
bool drv_pass_run(rx_module *m, const char *name, const rx_compile_options *o, rx_diag *diag);

/* ---- the artifact writer (driver/artifact.c; docs/artifact.md describes the format) ---- */

/* CRC-32 of the zlib/PNG/Ethernet convention (reflected polynomial 0xEDB88320, initial value
 * and final xor 0xFFFFFFFF): drv_crc32("123456789", 9) == 0xCBF43926, what zlib's crc32() gives.
 * base_crc32_update (base/base.h) chains it; no zlib dependency. */
uint32_t drv_crc32(const void *data, size_t n);

/* Builds the bytes of the artifact of a compiled module into r->artifact (replacing it):
 * manifest.json, host.rxvm, then per target "<backend>/kernels.json" and the kernel files it
 * names, then (r->weights, no r->weights_ref) the section weights.safetensors: streamed into
 * memory with with_weights, else left for drv_artifact_write (r->artifact then ends where the
 * section starts). Same input, same bytes. */
void drv_artifact_build(const rx_module *m, rx_compile_result *r, bool with_weights);
/* Writes the artifact to path: first its side file to weights_path (r->weights_ref), then the
 * artifact with its weights section streamed from the module when r->artifact stops before it.
 * Statuses name the file. */
rx_status drv_artifact_write(const char *path, const char *weights_path, const rx_module *m,
                             rx_compile_result *r);

/* driver/artifact_ranks.c: the multi-rank artifact at outpath from the n per-rank artifacts in
 * the files parts[0..n) (docs/artifact.md, "Multi-rank artifacts"). */
rx_status drv_artifact_ranks_write(const char *outpath, const char *const *parts, int n);

/* The manifest alone (also used by `relaxc compile` summaries and tests). */
void drv_artifact_manifest(rx_strbuf *out, const rx_module *m, const rx_compile_result *r);

/* Writes bytes to path (created or truncated); the status names the path on error. */
rx_status drv_artifact_write_file(const char *path, const unsigned char *bytes, size_t len);

#endif
