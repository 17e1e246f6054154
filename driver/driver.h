/* driver/driver.h: the compile driver (floor 8, above codegen/): the options and result of a
 * compilation, the whole pipeline from a parsed module to an artifact (driver/compile.c:
 * rx_compile, the pipeline as one list; the per-target schedule -> codegen -> toolchain loop)
 * and the artifact writer (driver/artifact.c: the .rxm container of runtime/vm_format.h).
 * The passes it runs are declared in passes/passes.h. Internal header; the public face is
 * rx_compile_module in include/relaxc/compiler.h.
 *
 *   normalize + verify, fold, cse, dce, legalize, normalize, annotate, fuse_ops, fuse_tensor,
 *   dce, normalize, plan_memory, lower_host, then per target: schedule (a copy of every tensor
 *   program; the module keeps the unscheduled originals), codegen (+ NVRTC for CUDA), and
 *   finally the artifact bytes (driver/artifact.c).
 *
 * The verifier (rx_module_verify) runs after every step that changes the module. */
#ifndef RX_DRIVER_H
#define RX_DRIVER_H

#include "../codegen/codegen.h"
#include "../ir/ir.h"
#include "../passes/passes.h"
#include "../targets/target.h"

#define RX_COMPILE_MAX_TARGETS 8

typedef struct rx_compile_options {
  const rx_target *targets[RX_COMPILE_MAX_TARGETS]; /* at most one per backend kind */
  int ntargets;
  const char *dump_after; /* NULL, a step name (rx_compile_step_names) or "all": print the
                             module (plan_memory: the plan; lower_host: the host program;
                             schedule: kernels and rules; codegen: the kernel sources;
                             artifact: the manifest) after that step */
  rx_strbuf *dump_out;    /* where dumps go; NULL: stderr */
  bool time_passes;       /* print a table of per-step milliseconds */
  rx_strbuf *time_out;    /* where the table goes; NULL: stderr */
  bool no_fuse;           /* skip fuse_ops and fuse_tensor (tests compare fused/unfused) */
  bool no_nvrtc;          /* do not run NVRTC even where present (CUDA sources only) */
} rx_compile_options;

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
  unsigned char *artifact; /* the .rxm bytes (heap) */
  size_t artifact_len;
} rx_compile_result;

/* Compiles m in place (the module ends legalized and fused, with its tensor programs
 * unscheduled) and fills *out (zeroed first). Errors go to diag; returns false then (out may
 * hold partial results: free it with rx_compile_result_free in every case). */
bool rx_compile(rx_module *m, const rx_compile_options *o, rx_diag *diag, rx_compile_result *out);
void rx_compile_result_free(rx_compile_result *r);

/* Parses "vulkan,cuda,metal" into o->targets (appended); the status names a bad or missing
 * target. */
rx_status rx_compile_options_set_targets(rx_compile_options *o, const char *list);

/* The step names --dump-after accepts, NULL-terminated (plus "all"). */
extern const char *const rx_compile_step_names[];
bool rx_compile_step_known(const char *name);

/* ---- the artifact writer (driver/artifact.c; docs/artifact.md describes the format) ---- */

/* CRC-32 of the zlib/PNG/Ethernet convention (reflected polynomial 0xEDB88320, initial value
 * and final xor 0xFFFFFFFF): rx_crc32("123456789", 9) == 0xCBF43926, what zlib's crc32() gives.
 * Implemented here (no zlib dependency). */
uint32_t rx_crc32(const void *data, size_t n);

/* Builds the bytes of the artifact of a compiled module: manifest.json, host.rxvm, then per
 * target "<backend>/kernels.json" and the kernel files it names. Same input, same bytes.
 * *out_bytes is heap memory (free()). */
void rx_artifact_build(const rx_module *m, const rx_compile_result *r, unsigned char **out_bytes,
                       size_t *out_len);

/* The manifest alone (also used by `relaxc compile` summaries and tests). */
void rx_artifact_manifest(rx_strbuf *out, const rx_module *m, const rx_compile_result *r);

/* Writes bytes to path (created or truncated); the status names the path on error. */
rx_status rx_artifact_write_file(const char *path, const unsigned char *bytes, size_t len);

#endif
