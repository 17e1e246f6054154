/* passes: graph-level and loop-level passes, one file each, one entry point each, every entry
 * point declared here (the driver, driver/compile.c, runs them as one list). Each takes
 * the module (normalized), transforms it in place, reports problems to diag and returns false
 * on an error. The module stays valid: ops_module_normalize and ir_module_verify succeed after
 * each pass. Internal header. */
#ifndef RX_PASSES_H
#define RX_PASSES_H

#include "../ir/ir.h"
#include "../targets/target.h"

/* passes/fold.c: constant folding of Prim arithmetic and shape expressions: Prim and Shape
 * values re-simplified under the function's facts, struct info of bindings re-simplified,
 * call_tensor out= and dims= simplified under the facts, Prim/Shape variables whose values are
 * known replaced by literals at their uses. */
bool pass_fold(rx_module *m, rx_diag *diag);

/* passes/cse.c: common subexpression elimination in dataflow blocks: a pure binding identical
 * to an earlier one of the same block (same kind, op/callee, attrs, arguments by variable
 * identity, out struct info, dims) is replaced by a use of the earlier variable. */
bool pass_cse(rx_module *m, rx_diag *diag);

/* passes/dce.c: dead code elimination to a fixpoint: unused pure bindings (everything but
 * call_extern of impure externs and calls of graph functions that may have such calls), then
 * tensor programs called nowhere and primitive graph functions called nowhere. */
bool pass_dce(rx_module *m, rx_diag *diag);

/* passes/dispatch.c: the Relax paper's cross-level dispatch. Each matmul op of f16, bf16 or f32
 * whose row count (the product of A's dims but the last) may reach min_rows becomes a call of
 * the library (call_extern(RX_DISPATCH_CUBLASLT_MATMUL, A, B, trans_b)), under a graph-level
 * `if min_rows <= rows` where the function's facts do not decide it, the generated matmul in the
 * else branch; B written as permute(W) of its last two axes is passed as W with trans_b = 1. Runs
 * before legalize (it sees ops). */
typedef enum rx_dispatch_library {
  RX_DISPATCH_NONE,   /* every matmul is a generated kernel */
  RX_DISPATCH_CUBLAS, /* large matmuls to cuBLASLt (CUDA; runtime/cuda/cublaslt.c) */
} rx_dispatch_library;
/* The default threshold: the generated kernels have GEMV (n = 1) and low-batch (n <= 16)
 * variants written for the memory bound; from 17 rows on the generated kernel is the tiled GEMM
 * that the library outruns (issue 14: 1-3% of the tensor throughput). */
#define RX_DISPATCH_DEFAULT_MIN_ROWS 17
typedef struct rx_dispatch_options {
  rx_dispatch_library library;
  int64_t min_rows; /* rows >= min_rows go to the library (>= 1) */
} rx_dispatch_options;
bool pass_dispatch(rx_module *m, const rx_dispatch_options *o, rx_diag *diag);

/* passes/legalize.c: every op call binding of every graph function becomes
 * call_tensor(PROG, args..., out=<the call's struct info>, dims=[<PROG's scalar parameters>])
 * of the program ops_legalize_call builds; identical calls (same op, attributes, argument struct
 * info and folded literal values) share one program. Normalizes the module first (the calls need
 * their struct info); the module stays normalizable and verifiable. Returns false after an error
 * (an op that cannot be legalized: unknown rank or shape, unknown dtype). */
bool pass_legalize(rx_module *m, rx_diag *diag);

/* passes/shard.c: the global view (distributed struct info on one-axis meshes of world devices)
 * lowered to the local program each rank runs, with allreduce / allgather inserted where
 * placements change and the result made whole (docs/distributed.md). A module without meshes is
 * left as it is. Returns false after an error (a dim not provably divisible, named). */
bool pass_shard(rx_module *m, int world, rx_diag *diag);
/* pass_shard with world the devices of the module's (first) mesh: the compile pipeline's step. */
bool pass_shard_module(rx_module *m, rx_diag *diag);
/* Rank rank's weights: every module weight bound to a parameter placed S[d] (by name, as the
 * importers bind them) replaced by its block rank of world along d (a copy the module owns).
 * Run on the global view, before pass_shard. */
bool pass_shard_weights(rx_module *m, int world, int rank, rx_diag *diag);
/* passes/legalize_dist.c: a collective op call (allreduce ... recv) as the call_extern of its
 * rx_ccl_* builtin (declared in m on first use; docs/distributed.md); NULL for other calls. */
rx_node *pass_collective_extern(rx_module *m, const rx_node *call, rx_diag *diag);

/* passes/annotate.c: the fusion pattern of every tensor program from its loop body
 * (rx_tensor_fn.pattern). */
bool pass_annotate(rx_module *m, rx_diag *diag);

/* passes/fuse_ops.c: groups call_tensor bindings of dataflow blocks by pattern and outlines each
 * group of two or more into a primitive graph function (rx_graph_fn.primitive) called in its
 * place. Runs pass_annotate first. */
bool pass_fuse_ops(rx_module *m, rx_diag *diag);

/* passes/fuse_tensor.c: each call of a primitive graph function becomes one call_tensor of one
 * tensor program built from the group's programs; the primitive functions are removed. */
bool pass_fuse_tensor(rx_module *m, rx_diag *diag);

/* passes/dedup.c: tensor programs equal up to the names of their parameters, buffers, locals,
 * loop and symbolic variables (renamed consistently) become one: the first of each class in
 * module order is kept, every call_tensor of the others calls it, and the others leave the
 * module. Found by a hash of a canonical form (names as first-occurrence indices) and confirmed
 * by comparing the whole forms. Runs after every pass that makes programs, before scheduling.
 * A module without graph functions is left as it is (its programs are its entry points). */
bool pass_dedup(rx_module *m, rx_diag *diag);

/* passes/short_names.c: program names become kernel entry points and artifact section names
 * ("<backend>/<kernel>.<ext>", at most 63 bytes). A program whose name is long (fusion
 * concatenates the names of its parts) or clashes with another program's specialized kernels
 * (kernel P_1 of program P against a program named P_1) gets a short unique name, and the calls
 * follow it. */
bool pass_short_names(rx_module *m, rx_diag *diag);

/* passes/inline.c: every call of a (non-primitive) graph function in a graph function's body
 * replaced by the callee's bindings, renamed CALL_NAME after the call's binding, transitively;
 * the callee's symbolic variables bound to the call's (a callee variable the call does not bind,
 * or that its match_cast defines, is an error), its facts not copied. A recursive function is an
 * error naming the cycle. Not a step of drv_compile (`relaxc opt --passes inline`); batch_fn
 * inlines the function it batches through pass_inline_copy. */
bool pass_inline(rx_module *m, rx_diag *diag);
/* f with its calls inlined as pass_inline does, as a function value outside the module (same
 * name, parameters and facts, a new body; f's own bindings and variables shared with it, not
 * normalized: the inlined values carry the callee's struct info with the call's symbols).
 * *out_calls (when given): the calls inlined (0: the copy is f's body as it was). */
rx_status pass_inline_copy(rx_module *m, const rx_graph_fn *f, rx_graph_fn **out, int *out_calls);

/* passes/batch_fn.c: the batched form of a graph function (auto-batching, docs/autobatch.md). Not
 * a step of the pipeline: the caller asks for it before drv_compile, so its entry point is the
 * public rx_batch_function (relaxc/compiler.h; relaxc compile --batch). */

/* passes/schedule/schedule.c: schedules every tensor program of m for target t in place (each
 * item's rx_tensor_fn* is replaced by the scheduled one; passes/schedule.h has the rules, the
 * contract of a scheduled program and sched_schedule for one program). */
bool sched_schedule_module(rx_module *m, const rx_target *t, rx_diag *diag);

/* ---- memory planning (passes/plan_memory.c) ----
 * Every call_tensor output of a function's top-level bindings is an allocation. Its size in
 * bytes is a symbolic expression; its constant upper bound comes from the function's facts
 * (sym_analyzer_bounds, with every shape variable >= 0). Bounded allocations that are neither
 * returned (directly or through aliases: tuples, moves, match_cast, graph calls) share planned
 * storages: in definition order, each takes the best-fitting storage whose previous tenant died
 * before the definition (the smallest one at least as large, else the largest free one, which
 * grows), else a new storage. A storage is sized once, at the largest bound of its tenants.
 * Allocations without a bound that are not returned get storages sized at run time (their size
 * expression, evaluated where the first tenant is defined; the runtime grows such a storage when
 * a later call needs more), shared by tenants of the same size expression whose lifetimes do not
 * overlap. Everything else (returned, or inside an `if` branch) is a dynamic allocation.
 * A symbolic allocation whose bound passes RX_PLAN_MAX_STATIC_BYTES is sized at run time too: a
 * plan at a bound no device holds (n <= 10^8, a max_position_embeddings of 2^31 - 1) then takes
 * the memory of the sizes each call has, and the compiler warns (driver/compile.c) of a function
 * whose storages at the bounds (storage_upper, upper_bytes) pass a target's device memory. */
#define RX_PLAN_MAX_STATIC_BYTES                                                                   \
  ((int64_t)1 << 30) /* 1 GiB: more than a phone GPU can give one                                  \
                        buffer; the 7B decoder's storages at 4096                                  \
                        tokens are 316 MB in all */
typedef struct rx_mem_alloc {
  const rx_var *var;    /* the binding (call_tensor) that defines it */
  int field;            /* -1: the whole output; else the field of a tuple output */
  const rx_expr *bytes; /* size in bytes, symbolic */
  int64_t bound;        /* constant upper bound of bytes; -1 when unbounded or sized at run time */
  int64_t upper;        /* the upper bound of bytes by the facts; -1 when unbounded */
  int storage;          /* index into the function's storages; -1: dynamic allocation */
  bool escapes;         /* reaches the function's result */
  int def, last;        /* live range, in top-level binding positions (inclusive) */
} rx_mem_alloc;

typedef struct rx_fn_plan {
  const rx_graph_fn *fn;
  rx_mem_alloc *allocs; /* in definition order */
  int nallocs;
  int64_t *storage_bytes;        /* the size of each planned storage; -1: sized at run time */
  const rx_expr **storage_exprs; /* per storage: the size expression of one sized at run time */
  int64_t *storage_upper;        /* per storage: its bytes at the facts' upper bounds; -1: none */
  int nstorages;
  int64_t upper_bytes; /* sum of the bounded storage_upper (saturated at INT64_MAX): a call at the
                          bounds */
  int64_t peak_bytes;  /* sum of the constant storage sizes: the planned memory of one call */
  int64_t unplanned_bytes; /* what the planned tensors would take without reuse */
  int ndynamic;            /* allocations left dynamic */
} rx_fn_plan;

typedef struct rx_mem_plan {
  rx_fn_plan *fns; /* one per non-primitive graph function, in module order */
  int nfns;
} rx_mem_plan;

/* Plans every graph function of m (normalized); the plan lives in m's arena. Never fails on a
 * valid module (allocations it cannot bound stay dynamic). */
bool pass_plan_memory(rx_module *m, rx_mem_plan *out, rx_diag *diag);
/* The plan as text (for --dump-after=plan_memory). */
void pass_mem_plan_print(rx_strbuf *out, const rx_mem_plan *p);
const rx_fn_plan *pass_mem_plan_fn(const rx_mem_plan *p, const rx_graph_fn *f);

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
bool pass_lower_host(rx_module *m, const rx_mem_plan *plan, rx_diag *diag, rx_host_program *out);
void pass_host_program_free(rx_host_program *h);
/* Disassembles a host.rxvm section; returns false (after printing what it could) when the
 * words are malformed. */
bool pass_host_disasm(rx_strbuf *out, const uint32_t *words, size_t nwords);

#endif
