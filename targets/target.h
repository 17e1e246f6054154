/* targets: what the compiler may assume about a GPU, as data.
 *
 * A target description is one entry of a const table (targets.c): the limits a schedule must
 * respect (threads per block, shared memory, push-constant bytes, storage buffer bindings),
 * the subgroup (warp, SIMD group) size it may rely on, and the arithmetic and matrix features
 * it may use. Each entry cites the public document its values come from. Schedules read tile
 * sizes from here; printers and toolchains read the language versions.
 *
 * Internal header. The entries live for the whole process (static storage); never free them. */
#ifndef RX_TARGET_H
#define RX_TARGET_H

#include "../base/base.h"

/* The backend kinds, listed once; the target kinds (rx_target_kind), the kernel languages (rx_lang,
 * codegen/codegen.h), the kind names and the per-language facts of kernels.json derive from it:
 *   CUDA    NVIDIA GPUs: CUDA C compiled by NVRTC to PTX / cubin
 *   VULKAN  any Vulkan 1.2 device: GLSL 450 compute compiled to SPIR-V
 *   METAL   Apple GPUs: Metal Shading Language compiled by xcrun metal
 * X(KIND, name, LANG, lang, ext, entry, scalars, scalars_bound, spill, bin, asm), per kind:
 *   KIND, name     RX_TARGET_KIND; its name: the first word of its targets ("cuda -arch=sm_80"),
 *                  the artifact's section folder ("cuda/kernels.json"), tgt_target_kind_name
 *   LANG, lang     its kernel language RX_LANG_LANG and that language's name (kernels.json "lang")
 *   ext            the file extension of a kernel's source (kernels.json "source": NAME.ext)
 *   entry          the entry point's name in the source, NULL: the kernel's own name (GLSL's
 *                  compute shaders all enter at main)
 *   scalars        where the symbolic values go (kernels.json "scalars.location",
 *                  docs/kernel-abi.md): CUDA kernel parameters, Vulkan push constants, Metal one
 *                  constant struct in a buffer; scalars_bound: that location takes a binding (the
 *                  index after the buffers)
 *   spill          where they go when they pass the push-constant bytes (always a binding after
 *                  the buffers); NULL: none, more is an error (codegen/lower.c)
 *   bin, asm       the file extensions of a kernel's binary (kernels.json "binary") and of the
 *                  assembly kept beside it for the driver's JIT (kernels.json "ptx"); NULL: none
 *                  written by the compiler (Metal's sources are compiled by the runtime). The
 *                  file names: tgt_target_binary_name, tgt_target_asm_name */
#define RX_TARGET_KINDS(X)                                                                         \
  X(CUDA, "cuda", CUDA, "cuda", "cu", NULL, "parameters", false, NULL, "cubin", "ptx")             \
  X(VULKAN, "vulkan", GLSL, "glsl", "comp", "main", "push_constant", false, "uniform_buffer",      \
    "spv", NULL)                                                                                   \
  X(METAL, "metal", MSL, "msl", "metal", NULL, "buffer", true, NULL, NULL, NULL)

typedef enum rx_target_kind {
#define X(kind, ...) RX_TARGET_##kind,
  RX_TARGET_KINDS(X)
#undef X
} rx_target_kind;

/* A language or API version, major.minor ("1.2", "3.1"). 0.0 where it does not apply. */
typedef struct rx_version {
  int major, minor;
} rx_version;

/* Matrix units: how a target multiplies small matrices (issue 14; DESIGN.md, "Matrix units").
 * One shape is an instruction (or a language's matrix type) computing C[m, n] += A[m, k] B[k, n]
 * cooperatively over `threads` threads, each holding a fragment of A, B and C. */
typedef enum rx_mma_api {
  RX_MMA_SYNC,      /* PTX mma.sync.aligned: one warp (sm_80+) */
  RX_MMA_WGMMA,     /* PTX wgmma.mma_async: one warpgroup of 4 warps (sm_90a) */
  RX_MMA_COOP,      /* Vulkan VK_KHR_cooperative_matrix: one subgroup, shapes from the device */
  RX_MMA_SIMDGROUP, /* Metal simdgroup_matrix: one SIMD group */
  RX_MMA_SYNC_FRAG, /* CUDA subgroup fragments (ir.h RX_STMT_FRAG) 16x16x16, each product two
                       mma.sync m16n8k16 (codegen/mma_cuda.h, rx_frag_*): one warp */
} rx_mma_api;

typedef struct rx_mma_shape {
  rx_mma_api api;
  int m, n, k;
  int n_step;        /* 0: n exactly; else any multiple of n_step up to n (wgmma's N) */
  rx_dtype ab;       /* the dtype of A and B */
  rx_dtype acc;      /* the dtype of C (the accumulator) */
  int threads;       /* threads that hold one set of fragments together */
  const char *instr; /* the instruction or type, as the printers will write it */
} rx_mma_shape;

typedef struct rx_target {
  /* identity */
  const char *name; /* canonical name, as parsed back: "cuda -arch=sm_80", "vulkan-mali" */
  rx_target_kind kind;
  const char *device; /* the devices it describes, in words */
  const char *source; /* the public document(s) the values come from */

  /* thread hierarchy */
  int max_threads_per_block; /* threads (invocations) in one block / workgroup / threadgroup */
  int max_block_dim[3];      /* per-axis block size limit (x, y, z) */
  int max_grid_dim[3];       /* per-axis number of blocks (x, y, z) */

  /* subgroups (CUDA warps, Vulkan subgroups, Metal SIMD groups) */
  int subgroup_size;     /* the size kernels are scheduled for; 0: unknown, do not rely on it */
  int min_subgroup_size; /* range the hardware may use (equal to subgroup_size when fixed) */
  int max_subgroup_size;
  bool subgroup_arithmetic; /* subgroup reductions and shuffles (shfl, subgroupAdd, simd_sum) */
  bool subgroup_ext_types;  /* ... of f16, i8, i16 and i64 too (Vulkan's optional
                               shaderSubgroupExtendedTypes; always on CUDA and Metal) */

  /* memory */
  int shared_bytes;        /* shared (workgroup, threadgroup) memory per block without opt-in */
  int shared_bytes_optin;  /* per block with opt-in (CUDA); equal to shared_bytes elsewhere */
  int regs_per_thread;     /* register limit per thread; 0: not exposed by the API */
  int regs_per_block;      /* register file per block; 0: not exposed by the API */
  int push_constant_bytes; /* bytes of by-value kernel arguments: Vulkan push constants, CUDA
                              kernel parameters, Metal setBytes */
  int max_storage_buffers; /* buffers one kernel may bind; 0: no limit below the argument space */
  int vector_bytes;        /* widest per-thread global load or store the schedule should emit */
  int64_t device_memory;   /* bytes of memory of the largest device it describes (the datasheet's
                              figure; RX_TARGET_DEFAULT_MEMORY where no public spec gives one):
                              the compiler warns of a plan larger than this (driver/compile.c) */

  /* arithmetic features */
  bool fp16;               /* 16-bit float arithmetic (not only storage) */
  bool bf16;               /* bfloat16 arithmetic or at least conversion in the language */
  bool int8;               /* 8-bit integer arithmetic */
  bool storage16;          /* 16-bit types in storage buffers (Vulkan 16-bit storage) */
  bool matrix_units;       /* tensor cores (mma), cooperative matrix, simdgroup_matrix */
  const rx_mma_shape *mma; /* the matrix-unit shapes known when compiling, best first */
  int nmma;
  bool mma_query; /* more shapes may be found at run time (Vulkan cooperative matrix) */

  /* language and toolchain versions */
  const char *cuda_arch; /* "sm_80", "sm_90"; NULL for other kinds */
  int sm;                /* 80, 90; 0 for other kinds */
  rx_version vulkan;     /* Vulkan API version the SPIR-V is built for */
  rx_version spirv;      /* SPIR-V version */
  rx_version msl;        /* Metal Shading Language version */
} rx_target;

/* The device memory assumed where a target describes devices of no one published size (any
 * Vulkan 1.2 device, a CPU driver): 16 GiB, the most the phones and laptops they stand for ship
 * with. A documented default, used only to warn of a memory plan no such device holds. */
#define RX_TARGET_DEFAULT_MEMORY ((int64_t)16 << 30)

/* Parses a target string: "cuda", "cuda -arch=sm_90", "vulkan", "vulkan-lavapipe",
 * "vulkan-adreno", "vulkan-mali", "metal", "metal-apple7". Surrounding and repeated spaces are
 * ignored. "cuda" alone is sm_80, "metal" alone is metal-apple7. On error (unknown name, unknown
 * option, unknown CUDA architecture) returns RX_ERR_INVALID with a message that lists what is
 * known; *out_target is NULL then. */
rx_status tgt_target_parse(const char *text, const rx_target **out_target);

/* Whether a subgroup reduction or shuffle of dtype dt may be emitted for t: subgroup arithmetic,
 * and for types other than f32, f64, i32 and u32 the extended types. */
bool tgt_target_subgroup_dtype(const rx_target *t, rx_dtype dt);

/* Every described target, in table order; *out_count gets the number. */
const rx_target *tgt_target_list(size_t *out_count);

/* Looks up a target by its canonical name; NULL when there is none. */
const rx_target *tgt_target_find(const char *name);

/* The first (best) matrix-unit shape of t for inputs `ab` accumulating in `acc`, of the api
 * given, or of any api when api < 0; NULL when t has none known when compiling (for Vulkan with
 * mma_query set, the device may still report one at run time). */
const rx_mma_shape *tgt_target_mma(const rx_target *t, rx_dtype ab, rx_dtype acc, int api);

/* Does t run subgroup matrix fragments (ir.h RX_STMT_FRAG) of A m x k and B k x n in dtype `ab`
 * with an m x n accumulator in `acc`? (The test of `has_fragments(...)`; mma.sync and wgmma
 * shapes, whose register layouts are explicit, are not fragments.) */
bool tgt_target_has_frag(const rx_target *t, rx_dtype ab, rx_dtype acc, int m, int n, int k);

/* Does t run async_copy, async_commit and async_wait (ir.h; PTX cp.async: CUDA sm_80 and newer,
 * the targets that list mma.sync m16n8k16)? (The test of `has_async_copy()`.) */
bool tgt_target_has_async_copy(const rx_target *t);

/* Does t run mma.sync of A m x k and B k x n in `ab` into `acc` (ir.h RX_STMT_MMA, the test of
 * `has_mma(...)`)? */
bool tgt_target_has_mma_sync(const rx_target *t, rx_dtype ab, rx_dtype acc, int m, int n, int k);

/* Does t run wgmma.mma_async m64nNk16 of `ab` into `acc` (ir.h RX_STMT_WGMMA, the test of
 * `has_wgmma(...)`: m 64, k 16, n a multiple of the shape's n_step up to its N)? */
bool tgt_target_has_wgmma(const rx_target *t, rx_dtype ab, rx_dtype acc, int m, int n, int k);

/* "cuda", "vulkan", "metal". */
const char *tgt_target_kind_name(rx_target_kind kind);

/* The entry point's name in a kernel source of kind (RX_TARGET_KINDS' entry): "main" for
 * Vulkan's GLSL; NULL where it is the kernel's own name. */
const char *tgt_target_kind_entry(rx_target_kind kind);

/* The file names of kernel `kernel`'s outputs for t, allocated in a (relaxc codegen -o DIR, the
 * artifact's sections, kernels.json "binary" and "ptx"): its binary, NAME.bin or, where the target
 * names an architecture, NAME.ARCH.bin (NAME.spv, NAME.sm_80.cubin); its assembly, NAME.asm
 * (NAME.ptx). NULL where t's kind writes none (RX_TARGET_KINDS' bin and asm). */
char *tgt_target_binary_name(rx_arena *a, const rx_target *t, const char *kernel);
char *tgt_target_asm_name(rx_arena *a, const rx_target *t, const char *kernel);

/* Appends a human-readable description of t (one "field: value" per line) to out: for
 * `relaxc targets` and for error messages. */
void tgt_target_describe(rx_strbuf *out, const rx_target *t);

#endif
