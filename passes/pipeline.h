/* passes/pipeline.h: the whole compilation pipeline (passes/pipeline.c), from a parsed module to
 * an artifact (.rxm, runtime/vm_format.h), and the two passes it owns besides the graph passes
 * of passes.h: memory planning (passes/plan_memory.c) and lowering to the host program
 * (passes/lower_host.c). Internal header.
 *
 *   normalize + verify, fold, cse, dce, legalize, normalize, annotate, fuse_ops, fuse_tensor,
 *   dce, normalize, plan_memory, lower_host, then per target: schedule (a copy of every tensor
 *   program; the module keeps the unscheduled originals), codegen (+ NVRTC for CUDA), and
 *   finally the artifact bytes (codegen/artifact.h).
 *
 * The verifier (rx_module_verify) runs after every step that changes the module. */
#ifndef RX_PIPELINE_H
#define RX_PIPELINE_H

#include "../codegen/codegen.h"
#include "../ir/ir.h"
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

/* ---- memory planning (passes/plan_memory.c) ----
 * Every call_tensor output of a function's top-level bindings is an allocation. Its size in
 * bytes is a symbolic expression; its constant upper bound comes from the function's facts
 * (rx_analyzer_bounds, with every shape variable >= 0). Bounded allocations that are neither
 * returned (directly or through aliases: tuples, moves, match_cast, graph calls) share planned
 * storages: in definition order, each takes the best-fitting storage whose previous tenant died
 * before the definition (the smallest one at least as large, else the largest free one, which
 * grows), else a new storage. A storage is sized once, at the largest bound of its tenants.
 * Everything else (unbounded, returned, or inside an `if` branch) is a dynamic allocation. */
typedef struct rx_mem_alloc {
  const rx_var *var;    /* the binding (call_tensor) that defines it */
  int field;            /* -1: the whole output; else the field of a tuple output */
  const rx_expr *bytes; /* size in bytes, symbolic */
  int64_t bound;        /* constant upper bound of bytes; -1 when unbounded */
  int storage;          /* index into the function's storages; -1: dynamic allocation */
  bool escapes;         /* reaches the function's result */
  int def, last;        /* live range, in top-level binding positions (inclusive) */
} rx_mem_alloc;

typedef struct rx_fn_plan {
  const rx_graph_fn *fn;
  rx_mem_alloc *allocs; /* in definition order */
  int nallocs;
  int64_t *storage_bytes; /* the size of each planned storage */
  int nstorages;
  int64_t peak_bytes;      /* sum of the storage sizes: the planned memory of one call */
  int64_t unplanned_bytes; /* what the planned tensors would take without reuse */
  int ndynamic;            /* allocations left dynamic */
} rx_fn_plan;

typedef struct rx_mem_plan {
  rx_fn_plan *fns; /* one per non-primitive graph function, in module order */
  int nfns;
} rx_mem_plan;

/* Plans every graph function of m (normalized); the plan lives in m's arena. Never fails on a
 * valid module (allocations it cannot bound stay dynamic). */
bool rx_plan_memory(rx_module *m, rx_mem_plan *out, rx_diag *diag);
/* The plan as text (for --dump-after=plan_memory). */
void rx_mem_plan_print(rx_strbuf *out, const rx_mem_plan *p);
const rx_fn_plan *rx_mem_plan_fn(const rx_mem_plan *p, const rx_graph_fn *f);

/* ---- the host program (passes/lower_host.c) ----
 * The section host.rxvm of runtime/vm_format.h: every non-primitive graph function of the
 * module, in module order (CALL_FN's function index). Parameters arrive in registers
 * 0..nparams-1. */
typedef struct rx_host_program {
  uint32_t *words; /* heap; the whole section */
  size_t nwords;
} rx_host_program;

/* Lowers every graph function of m (normalized, legalized: no op calls left) with plan.
 * Reports what the format cannot express (tensor constants, float scalars) and returns false. */
bool rx_lower_host(rx_module *m, const rx_mem_plan *plan, rx_diag *diag, rx_host_program *out);
void rx_host_program_free(rx_host_program *h);
/* Disassembles a host.rxvm section; returns false (after printing what it could) when the
 * words are malformed. */
bool rx_host_disasm(rx_strbuf *out, const uint32_t *words, size_t nwords);

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

/* The step names --dump-after accepts, NULL-terminated (plus "all"). */
extern const char *const rx_compile_step_names[];
bool rx_compile_step_known(const char *name);

#endif
