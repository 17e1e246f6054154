/* Code generation: scheduled tensor programs to CUDA C, GLSL 450 (+ SPIR-V) and MSL kernels,
 * with the kernel ABI of DESIGN.md and the launch description the host program needs.
 * Internal header.
 *
 * Input: a program in the scheduled shape of passes/schedule.h. Each kernel root becomes one
 * kernel; host-level IFs become the kernels' conditions. Output, per kernel: its source, the
 * order and types of its arguments, its grid as symbolic expressions, its block size, its
 * shared memory, and its condition. The host launches, in list order, every kernel whose
 * condition holds.
 *
 * Kernel ABI (recorded in the JSON description):
 *   arguments  the buffers the kernel uses, in the program's parameter order, then the
 *              symbolic values it uses (variables of the program), sorted by name.
 *   CUDA       `extern "C" __global__ void NAME(T* __restrict__ b0, ..., int n, int m)`.
 *   Vulkan     storage buffers at set 0, bindings 0..k-1; the symbolic values in a
 *              push-constant block (std430 layout) when they fit the target's push-constant
 *              bytes (at most 128), otherwise in a uniform buffer at binding k (std140).
 *   Metal      `device T* b_i [[buffer(i)]]`, then `constant rx_params& rx_p [[buffer(k)]]`.
 *   Names      every user-given name (program, buffer, symbolic value, loop and let variable)
 *              is printed as cg_ident makes it (codegen/cprinter.c): as is when it is a safe
 *              identifier in the language, else rx_u_NAME or rx_xESCAPED; kernels.json keeps the
 *              user's name beside it (kernel "source_name", argument "ident").
 *   Symbolic values are passed as 32-bit signed integers; the host checks that each fits.
 *   Index arithmetic is 32-bit where the analyzer proves every index fits in int32 under the
 *   program's facts, 64-bit otherwise. */
#ifndef RX_CODEGEN_H
#define RX_CODEGEN_H

#include "../ir/ir.h"
#include "../targets/target.h"

/* The kernel languages: one per target kind, in the same order, from the one list of backend
 * kinds (targets/target.h, RX_TARGET_KINDS: name, source file extension, entry point, where
 * scalars go). The rest of a language's facts (types, builtins, how a scalar is declared) is its
 * cg_lang table (codegen/cuda.c, glsl.c, metal.c). */
typedef enum rx_lang {
#define X(kind, name, lang, ...) RX_LANG_##lang,
  RX_TARGET_KINDS(X)
#undef X
} rx_lang;
const char *cg_lang_name(rx_lang l); /* "cuda", "glsl", "msl" */
const char *cg_lang_ext(rx_lang l);  /* the file extension of its sources: "cu", "comp", "metal" */
rx_lang cg_lang_of_target(const rx_target *t);

typedef enum rx_karg_kind {
  RX_KARG_BUFFER, /* a buffer parameter of the program */
  RX_KARG_SCALAR, /* a symbolic value (int32) */
} rx_karg_kind;

/* The name of the error buffer argument of a kernel with run-time checks (a BUFFER argument of
 * dtype i32 with param -1 and `error` set; docs/kernel-abi.md, "Run-time checks"). */
#define RX_KARG_ERROR_NAME "rx_err"

typedef struct rx_karg {
  rx_karg_kind kind;
  const char *name;   /* the user's name: the buffer's, or the symbolic variable's */
  const char *ident;  /* its identifier in the kernel source (cg_ident of name) */
  rx_dtype dtype;     /* BUFFER: element type; SCALAR: i32 */
  int param;          /* BUFFER: index into the program's parameters; -1: the error buffer */
  bool error;         /* BUFFER: the error buffer of the call (RX_KARG_ERROR_NAME) */
  bool written;       /* BUFFER: the kernel stores to it */
  const rx_expr *var; /* SCALAR: the symbolic variable */
  int binding;        /* Vulkan binding / Metal buffer index (buffers) */
  int offset;         /* SCALAR: byte offset in the push-constant block or uniform buffer */
} rx_karg;

typedef struct rx_kernel {
  const char *name;        /* entry point, unique in the module: the identifier (cg_ident) of
                              PROGRAM, PROGRAM_1, ... in the language; also the file name */
  const char *source_name; /* that name before mangling (PROGRAM, PROGRAM_1, ...) */
  rx_lang lang;
  const char *source; /* the kernel's source text */
  rx_karg *args;
  int nargs;
  const rx_expr *grid[3]; /* number of blocks per axis (symbolic; 1 where unused) */
  int block[3];           /* threads per block per axis */
  int64_t shared_bytes;   /* shared memory, all of it */
  bool shared_dynamic;    /* CUDA: shared_bytes is dynamic shared memory that the launch asks for
                             (kernels that use wgmma, codegen/cuda.c); else declared statically */
  const rx_expr *cond;    /* run only when this holds (NULL: always) */
  const char *rule;       /* schedule rule that produced it, or NULL */
  bool uses_ubo;          /* GLSL: symbolic values in a uniform buffer (too many for push) */
  int scalar_bytes;       /* bytes of the symbolic-value block */
  bool index64;           /* 64-bit index arithmetic was needed */
  int subgroup_size;      /* the subgroup size its subgroup operations assume; 0: none used */
  bool coop_matrix;       /* GLSL: cooperative matrices (GL_NV_cooperative_matrix fragments) */
  const uint32_t *spirv;  /* GLSL: compiled SPIR-V when shaderc is present, else NULL */
  size_t spirv_words;
  const char *binary;  /* file name of the binary written next to the source (kernels.json
                          "binary": NAME.spv, NAME.sm_80.cubin), or NULL: set by the writer */
  const char *ptx;     /* CUDA: file name of the PTX written, or NULL */
  const char **checks; /* the messages of its run-time checks (ir.h, RX_INTRIN_CHECK): with
                          any, the kernel takes the error buffer (an argument with `error`) */
  int nchecks;
} rx_kernel;

typedef struct rx_kernel_list {
  rx_kernel **kernels;
  int n;
} rx_kernel_list;

/* Generates the kernels of one scheduled program for target t (everything in m's arena), with
 * the schedule rule of each variant (rules[i]: the i-th distinct kernel condition in kernel
 * order; nrules == 1: every kernel), recorded in rx_kernel.rule and the kernel's header comment.
 * rules may be NULL. Sources only: no SPIR-V (the compile driver runs the toolchains on its pool
 * of threads, driver/toolchains.c). Errors (a program not in the scheduled shape, a construct the
 * language cannot express, shared memory or push constants over the target's limits) go to diag;
 * returns false then. */
bool cg_codegen_rules(rx_module *m, const rx_tensor_fn *scheduled, const rx_target *t,
                      const char *const *rules, int nrules, rx_diag *diag, rx_kernel_list *out);

/* The JSON description (docs/kernel-abi.md) of the kernels of n programs (kernel lists in the
 * same order), as `relaxc codegen` writes it to kernels.json. */
void cg_kernels_json(rx_strbuf *out, const rx_target *t, const rx_tensor_fn *const *programs,
                     const rx_kernel_list *const *kernels, int n);

#endif
