/* toolchains: from emitted source text to what a driver loads.
 *
 *   GLSL 450 compute --shaderc (in process)--> SPIR-V words --SPIRV-Tools--> validated
 *   CUDA C           --NVRTC (dlopen)--------> PTX or cubin  --ptxas -v----> resource report
 *   MSL              --xcrun metal (macOS)---> metallib
 *
 * Every entry point returns a status. A toolchain that is absent (relaxc built without shaderc
 * or SPIRV-Tools, no NVRTC or ptxas on the machine, not macOS) is an error with a message that
 * says what is missing and how to get it, never a crash; tests turn those into skips.
 * Buffers handed out are heap memory the caller frees with free().
 *
 * Internal header. */
#ifndef RX_TOOLCHAIN_H
#define RX_TOOLCHAIN_H

#include "../base/base.h"

/* ---- GLSL -> SPIR-V (shaderc) and SPIR-V checks (SPIRV-Tools) ---------------------------- */

/* Whether relaxc was built with shaderc / SPIRV-Tools (RX_HAVE_SHADERC, RX_HAVE_SPIRV_TOOLS). */
bool tgt_shaderc_available(void);
bool tgt_spirv_tools_available(void);

/* Compiles one GLSL compute shader (`#version 450`) to SPIR-V for Vulkan 1.2 / SPIR-V 1.5,
 * optimized for performance. name is used in messages ("kernel.comp:12: error: ...").
 * On error: RX_ERR_INVALID with shaderc's messages, each followed by the offending GLSL line;
 * RX_ERR_UNSUPPORTED when built without shaderc. *out_words (free()) gets *out_nwords words. */
rx_status tgt_glsl_to_spirv(const char *glsl, size_t len, const char *name, uint32_t **out_words,
                            size_t *out_nwords);

/* What the SPIR-V a kernel gets depends on, for the kernel cache's key (driver/kcache.c): the
 * library's version and the options tgt_glsl_to_spirv passes; static strings. */
const char *tgt_shaderc_id(void);
/* SPIRV-Tools' version (spvSoftwareVersionDetailsString), or "absent". */
const char *tgt_spirv_tools_id(void);

/* Validates a SPIR-V module for the Vulkan 1.2 environment (what spirv-val
 * --target-env vulkan1.2 checks). On error: RX_ERR_INVALID with the validator's message. */
rx_status tgt_spirv_validate(const uint32_t *words, size_t nwords);

/* Disassembles SPIR-V to text (no header comment, friendly names), for golden tests and
 * `relaxc codegen` dumps. *out_text is heap memory (free()). */
rx_status tgt_spirv_disassemble(const uint32_t *words, size_t nwords, char **out_text);

/* ---- CUDA C -> PTX / cubin (NVRTC) and ptxas reports ------------------------------------- */

/* Loads NVRTC on first use: $RX_NVRTC_PATH when set, else libnvrtc.so, libnvrtc.so.13,
 * libnvrtc.so.12, then $CUDA_HOME/lib64 and /usr/local/cuda/lib64. RX_ERR_NOT_FOUND lists
 * what was tried. On success *out_major, *out_minor (either may be NULL) get nvrtcVersion. */
rx_status tgt_nvrtc_load(int *out_major, int *out_minor);

/* Compiles CUDA C (kernels declared extern "C") with NVRTC: --std=c++17, -default-device,
 * the CUDA include directory when it exists (cuda_fp16.h, cuda_bf16.h). arch is "sm_80" or
 * "compute_80" style. want_cubin: a cubin for the real architecture (arch must be sm_XX);
 * otherwise PTX text (NUL-terminated; *out_len counts the bytes without the NUL).
 * *out_log (may be NULL to ignore) gets NVRTC's log, also on success (warnings); free().
 * A compile error is RX_ERR_INVALID whose message carries the log. */
rx_status tgt_nvrtc_compile(const char *src, const char *name, const char *arch, bool want_cubin,
                            char **out_bin, size_t *out_len, char **out_log);

/* One NVRTC compilation for a real architecture (sm_XX) that yields both the PTX (text,
 * NUL-terminated, *out_ptx_len without the NUL; the same PTX a compute_XX compilation gives)
 * and the cubin: what the artifact keeps of a CUDA kernel, in one toolchain call. Free both.
 * Programs are independent: callable from several threads at once. */
rx_status tgt_nvrtc_compile_both(const char *src, const char *name, const char *sm_arch,
                                 char **out_ptx, size_t *out_ptx_len, char **out_cubin,
                                 size_t *out_cubin_len, char **out_log);

/* What a compilation for arch depends on, for the kernel cache's key: NVRTC's version and path
 * and every option tgt_nvrtc_compile passes (include directory too). Heap string. */
char *tgt_nvrtc_id(const char *arch);

/* Resource usage of one kernel, from `ptxas -v`. */
typedef struct rx_ptxas_func {
  char name[128];   /* entry (or device function) name, truncated */
  bool entry;       /* a kernel entry (else a non-inlined device function) */
  int registers;    /* registers per thread */
  int shared_bytes; /* static shared memory */
  int stack_bytes;  /* stack frame */
  int spill_stores; /* spill store bytes */
  int spill_loads;  /* spill load bytes */
} rx_ptxas_func;

/* The report over the whole PTX module. */
typedef struct rx_ptxas_info {
  rx_ptxas_func *funcs; /* one per function in the report, in order (free with the info) */
  int nfuncs;
  int max_registers; /* over every function */
  int spill_bytes;   /* spill stores + loads, summed over every function */
  char *log;         /* ptxas's whole output */
} rx_ptxas_info;

/* Runs `ptxas -v -arch=ARCH` on ptx ($RX_PTXAS_PATH, else $CUDA_HOME/bin, /usr/local/cuda/bin,
 * then PATH) and parses its report. RX_ERR_NOT_FOUND without ptxas; RX_ERR_INVALID with the
 * log when ptxas rejects the PTX. Release with tgt_ptxas_info_free. */
rx_status tgt_ptxas_report(const char *ptx, const char *arch, rx_ptxas_info *out);
void tgt_ptxas_info_free(rx_ptxas_info *info);

/* Parses the text of a `ptxas -v` report (exposed for tests). */
rx_status tgt_ptxas_parse(const char *log, rx_ptxas_info *out);

/* ---- MSL -> metallib (xcrun metal, macOS only) ------------------------------------------- */

/* Compiles MSL with `xcrun -sdk macosx metal -std=metal3.1` and links a metallib with
 * `xcrun -sdk macosx metallib`. Elsewhere RX_ERR_UNSUPPORTED ("xcrun metal is only available
 * on macOS"). *out_log (may be NULL) gets the compiler's output. */
rx_status tgt_metal_compile(const char *msl, const char *name, char **out_lib, size_t *out_len,
                            char **out_log);

/* ---- internal helpers shared by the toolchain files (nvrtc.c) ---------------------------- */

/* Runs argv[0] (a path, or a name looked up in PATH) with its arguments and waits; stdout and
 * stderr together go to *out_output (heap, may be NULL to discard). *out_exit gets the exit
 * status (or 128 + signal). Errors only when the program cannot be started. */
rx_status tgt_tc_run(char *const argv[], char **out_output, int *out_exit);

/* Finds a tool: $env_var when set and executable, then each of dirs (NULL-terminated) joined
 * with name, then PATH. Returns a heap path, or NULL. */
char *tgt_tc_find_tool(const char *name, const char *env_var, const char *const dirs[]);

/* Creates a new private temporary directory ("$TMPDIR/relaxc-XXXXXX"); *out_dir is heap
 * memory. tgt_tc_remove_dir deletes it with the files in it (not recursive). */
rx_status tgt_tc_temp_dir(char **out_dir);
void tgt_tc_remove_dir(const char *dir);

/* Writes len bytes to path (created or truncated). */
rx_status tgt_tc_write_file(const char *path, const void *data, size_t len);

#endif
