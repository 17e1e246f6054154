/* relaxc/compiler.h: the public C API of the relaxc compiler.
 *
 * A module holds graph functions, tensor programs and extern declarations. Build one by parsing
 * text (docs/text-format.md) or programmatically with the builders below, then check it
 * (normalize + verify) and print it.
 *
 * Conventions:
 * - Every handle is opaque. Objects made for a module (expressions, struct info, attributes,
 *   variables, nodes, functions) live in the module's arena and die with rx_module_free; only
 *   rx_module, rx_diag, builders, statuses and strings returned as `char *` are freed by you.
 * - Functions that can fail on user input return an rx_status: NULL is success; otherwise an
 *   error whose message names the place and what was expected. Free it with rx_status_free.
 *   Out-parameters (`out_x`) are set to NULL first and set on success only.
 * - Symbolic expressions are hash-consed: two equal expressions are the same pointer.
 * - The tensor-program builder records its first error and reports it from rx_tfn_finish, so
 *   expression constructors can be nested freely.
 * - Nothing here exits or aborts on bad input. */
#ifndef RELAXC_COMPILER_H
#define RELAXC_COMPILER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* RELAXC_VERSION: relaxc/types.h */

/* ---- opaque handles (the same structs as the compiler's internal headers) ---- */
typedef struct rx_module rx_module;           /* a compilation unit */
typedef struct rx_diag rx_diag;               /* collected errors and warnings, rendered as text */
typedef struct rx_expr rx_expr;               /* a symbolic integer expression */
typedef struct rx_sinfo rx_sinfo;             /* struct info: Tensor, Shape, Prim, Tuple, Object */
typedef struct rx_attr rx_attr;               /* an op attribute (name = value) */
typedef struct rx_var rx_var;                 /* a graph variable: parameter or binding */
typedef struct rx_node rx_node;               /* a graph expression (an argument of a call) */
typedef struct rx_graph_fn rx_graph_fn;       /* a graph function */
typedef struct rx_tensor_fn rx_tensor_fn;     /* a tensor program */
typedef struct rx_buffer rx_buffer;           /* a tensor program's buffer */
typedef struct rx_tx rx_tx;                   /* a tensor-program scalar expression */
typedef struct rx_builder rx_builder;         /* a graph function under construction */
typedef struct rx_tfn_builder rx_tfn_builder; /* a tensor program under construction */

/* statuses (rx_status, rx_status_code) and dtypes (rx_dtype): relaxc/types.h */

/* Frees a string returned by this API. */
RX_API void rx_free(void *p);

/* ---- diagnostics ---- */
RX_API rx_diag *rx_diag_create(void);
RX_API void rx_diag_destroy(rx_diag *d);
/* Every message so far, each "file:line:col: error: ...", the source line and a caret. */
RX_API const char *rx_diag_text(const rx_diag *d);
RX_API int rx_diag_error_count(const rx_diag *d);
RX_API int rx_diag_warning_count(const rx_diag *d);

/* ---- modules ---- */
RX_API rx_module *rx_module_new(void);
RX_API void rx_module_free(rx_module *m);
/* Parses text (named `name` in messages) and adds its definitions to m. On errors returns an
 * RX_ERR_INVALID status whose message is the rendered diagnostics. diag may be NULL; when
 * given it receives every diagnostic (warnings included). */
RX_API rx_status rx_module_parse(rx_module *m, const char *name, const char *text, size_t len,
                                 rx_diag *diag);
/* Normalizes (deduces the struct info of everything) and verifies the module; errors as for
 * rx_module_parse. Idempotent. */
RX_API rx_status rx_module_check(rx_module *m, rx_diag *diag);
/* The module in the text format (heap string, free with rx_free). */
RX_API char *rx_module_to_text(const rx_module *m);

/* ---- compiling a module into an artifact (driver/) ----
 * The whole pipeline (docs/architecture: fold, cse, dce, legalize, fuse, plan memory, lower the
 * host program, then per target schedule, codegen and the toolchain) from a parsed or built
 * module to the bytes of one .rxm artifact (docs/artifact.md) that the runtime
 * (relaxc/runtime.h) loads. Zero-initialize the request, then set its fields. */
typedef struct rx_compile_request {
  const char *targets; /* "vulkan,cuda,metal": target names (relaxc --help lists them), at most
                          one per backend */
  bool no_fuse;        /* one kernel per operator (no operator fusion) */
  bool no_nvrtc;       /* CUDA: sources only, even where NVRTC is present */
  /* Library dispatch (docs/dispatch.md): NULL or "none": every matmul is a generated kernel;
   * "cublas": matmuls of at least dispatch_min_rows rows (decided at run time where the row
   * count is symbolic) call cuBLASLt, opened at run time; needs a cuda target. */
  const char *dispatch;
  int64_t dispatch_min_rows; /* 0: the default (17: the generated GEMV and low-batch kernels
                                serve 1..16 rows) */
} rx_compile_request;

/* Compiles m in place (it ends legalized and fused) into an artifact. On success *out_bytes
 * holds the artifact (free with rx_free) and *out_len its length, the module's weights inside
 * (a side file needs rx_module_compile_to_file); on failure the status names the first problem
 * and diag (may be NULL) holds every diagnostic with its place. */
RX_API rx_status rx_module_compile(rx_module *m, const rx_compile_request *req, rx_diag *diag,
                                   unsigned char **out_bytes, size_t *out_len);
/* The same, written to path (created or truncated) with the weights streamed from their sources
 * (never held in memory whole): inside the artifact, or with weights_file in that side file,
 * which the artifact names relative to its own directory. */
RX_API rx_status rx_module_compile_to_file(rx_module *m, const rx_compile_request *req,
                                           const char *path, const char *weights_file,
                                           rx_diag *diag);
/* Writes an artifact's bytes to path (created or truncated). */
RX_API rx_status rx_artifact_save(const char *path, const unsigned char *bytes, size_t len);

/* ---- importing a model (frontends/, the importers of `relaxc compile` and `relaxc import`) ----
 * Zero-initialize the options; the fields apply to Hugging Face folders and GGUF files
 * (docs/llm.md, the command line's --dtype, --max-seq-len, --max-batch, --no-weights,
 * --quantize); another input with any of them set is an error. */
typedef struct rx_import_options {
  rx_dtype dtype;           /* f32, f16, bf16; RX_DTYPE_UNKNOWN: f16 */
  int64_t max_seq_len;      /* 0: the config's max_position_embeddings */
  int64_t max_batch;        /* 0: the default (16) */
  bool no_weights;          /* config.json alone: the weights stay parameters */
  const char *quantize;     /* "q4f16_g32", "q8f16", ...; NULL: the compute dtype */
  bool quantize_embeddings; /* with quantize: the embedding table and output layer too */
  /* > 1: a Hugging Face folder imported as rank tensor_rank's program of tensor_parallel ranks
   * by the Megatron preset (docs/distributed.md; relaxc compile --tensor-parallel N imports each
   * rank so); 0 or 1: the whole model */
  int tensor_parallel, tensor_rank;
  /* > 1: a Hugging Face folder imported as stage pipeline_rank's program of pipeline_parallel
   * pipeline stages (docs/distributed.md "Pipeline parallelism"; relaxc compile
   * --pipeline-parallel N imports each stage so); 0 or 1: the whole model */
  int pipeline_parallel, pipeline_rank;
} rx_import_options;

/* Imports the model at path into m (empty, from rx_module_new), as the command line does: a
 * Hugging Face folder (config.json, safetensors), a GGUF file, an ONNX model (its weights bound,
 * external data read relative to the file), or a .rx program. The weights are read when the
 * module is compiled (streamed by rx_module_compile_to_file). opts may be NULL. Errors name the
 * path and what was expected (a folder without config.json, a missing file, an unsupported
 * architecture or operator); diag (may be NULL) holds the diagnostics of a .rx or ONNX input. */
RX_API rx_status rx_module_import(rx_module *m, const char *path, const rx_import_options *opts,
                                  rx_diag *diag);

/* ---- weights (docs/llm.md "Weights", docs/artifact.md) ----
 * The module's weight table: tensors the artifact stores (safetensors layout) and the runtime
 * uploads once per device at load. A graph parameter with a weight's name and exactly its type
 * (dtype, rank, constant dims) is bound to it: a call passes only the other parameters. A
 * parameter with a weight's name and another type is a compile error. */
/* Adds weight `name` stored as dtype with shape[ndim] (ndim <= 16), from row-major source
 * elements src of src_dtype: f32, f16 and bf16 convert among themselves when the artifact is
 * written (round to nearest even, inf and NaN kept); other dtypes must match. src is read when
 * the artifact is written, not copied: keep it alive until rx_module_free (rx_module_on_free
 * unmaps or frees it then). Errors name the weight: a duplicate or empty name, unknown or
 * unconvertible dtypes, a negative or overflowing shape, NULL src for a non-empty tensor. */
RX_API rx_status rx_module_add_weight(rx_module *m, const char *name, rx_dtype dtype, int ndim,
                                      const int64_t *shape, rx_dtype src_dtype, const void *src);
/* Calls fn(ctx) when m is freed, after everything that reads the weights (last added, first). */
RX_API void rx_module_on_free(rx_module *m, void (*fn)(void *ctx), void *ctx);
RX_API size_t rx_module_weight_count(const rx_module *m);

/* ---- symbolic expressions (canonical; integers, booleans are 0/1) ---- */
RX_API const rx_expr *rx_sym_var(rx_module *m, const char *name); /* same name, same variable */
RX_API const rx_expr *rx_sym_const(rx_module *m, int64_t v);
RX_API const rx_expr *rx_sym_add(rx_module *m, const rx_expr *a, const rx_expr *b);
RX_API const rx_expr *rx_sym_sub(rx_module *m, const rx_expr *a, const rx_expr *b);
RX_API const rx_expr *rx_sym_mul(rx_module *m, const rx_expr *a, const rx_expr *b);
RX_API const rx_expr *rx_sym_floordiv(rx_module *m, const rx_expr *a, const rx_expr *b);
RX_API const rx_expr *rx_sym_floormod(rx_module *m, const rx_expr *a, const rx_expr *b);
RX_API const rx_expr *rx_sym_min(rx_module *m, const rx_expr *a, const rx_expr *b);
RX_API const rx_expr *rx_sym_max(rx_module *m, const rx_expr *a, const rx_expr *b);
RX_API const rx_expr *rx_sym_eq(rx_module *m, const rx_expr *a, const rx_expr *b);
RX_API const rx_expr *rx_sym_lt(rx_module *m, const rx_expr *a, const rx_expr *b);
RX_API const rx_expr *rx_sym_le(rx_module *m, const rx_expr *a, const rx_expr *b);
RX_API const rx_expr *rx_sym_and(rx_module *m, const rx_expr *a, const rx_expr *b);
RX_API char *rx_sym_to_string(const rx_expr *e); /* free with rx_free */

/* ---- struct info ---- */
RX_API const rx_sinfo *rx_sinfo_object(rx_module *m);
/* shape: ndim dims, or NULL for rank only (ndim >= 0) or unknown rank (ndim == -1). */
RX_API const rx_sinfo *rx_sinfo_tensor(rx_module *m, rx_dtype dtype, int ndim,
                                       const rx_expr *const *shape);
RX_API const rx_sinfo *rx_sinfo_shape(rx_module *m, int ndim, const rx_expr *const *values);
RX_API const rx_sinfo *rx_sinfo_prim(rx_module *m, rx_dtype dtype, const rx_expr *value);
RX_API const rx_sinfo *rx_sinfo_tuple(rx_module *m, const rx_sinfo *const *fields, int n);
RX_API char *rx_sinfo_to_string(const rx_sinfo *s); /* "f16[n, 4096]"; free with rx_free */

/* ---- op attributes (by name, as in docs/ops.md) ---- */
RX_API const rx_attr *rx_attr_int(rx_module *m, const char *name, int64_t v);
RX_API const rx_attr *rx_attr_float(rx_module *m, const char *name, double v);
RX_API const rx_attr *rx_attr_bool(rx_module *m, const char *name, bool v);
RX_API const rx_attr *rx_attr_str(rx_module *m, const char *name, const char *v);
RX_API const rx_attr *rx_attr_dtype(rx_module *m, const char *name, rx_dtype v);
RX_API const rx_attr *rx_attr_ints(rx_module *m, const char *name, const int64_t *v, int n);
RX_API const rx_attr *rx_attr_exprs(rx_module *m, const char *name, const rx_expr *const *v, int n);

/* ---- graph functions ----
 * rx_builder_new starts a function; add parameters and facts, then emit bindings, grouped in
 * dataflow blocks between rx_builder_begin_dataflow and rx_builder_end_dataflow (elsewhere
 * in plain blocks), and end with rx_builder_finish. Each rx_emit_* creates one binding whose
 * struct info is deduced at once (ops use their deduction and the function's facts); a
 * deduction error is returned as a status naming the op and the offending struct info.
 * `name` is the binding's name; NULL picks one from the op or callee, made unique. */
RX_API rx_builder *rx_builder_new(rx_module *m, const char *fn_name);
RX_API void rx_builder_free(rx_builder *b); /* abandons an unfinished function */
RX_API rx_status rx_builder_param(rx_builder *b, const char *name, const rx_sinfo *sinfo,
                                  rx_var **out_var);
RX_API rx_status rx_builder_fact(rx_builder *b, const rx_expr *fact);    /* `where` */
RX_API void rx_builder_set_result(rx_builder *b, const rx_sinfo *sinfo); /* `-> SINFO` (optional) */
RX_API rx_status rx_builder_begin_dataflow(rx_builder *b);
RX_API rx_status rx_builder_end_dataflow(rx_builder *b);

/* Arguments: a variable, a shape literal, scalar literals (weakly typed, as bare text
 * literals) and symbolic scalars. */
RX_API rx_node *rx_arg_var(rx_builder *b, rx_var *v);
RX_API rx_node *rx_arg_shape(rx_builder *b, const rx_expr *const *dims, int n);
RX_API rx_node *rx_arg_int(rx_builder *b, int64_t v);
RX_API rx_node *rx_arg_float(rx_builder *b, double v);
RX_API rx_node *rx_arg_prim(rx_builder *b, rx_dtype dtype, const rx_expr *value);

RX_API rx_status rx_emit_op(rx_builder *b, const char *op, rx_node *const *args, int nargs,
                            const rx_attr *const *attrs, int nattrs, const char *name,
                            rx_var **out_var);
/* call_tensor(prog, args..., out=out, dims=[dims...]); prog must already be in the module. */
RX_API rx_status rx_emit_call_tensor(rx_builder *b, const char *prog, rx_node *const *args,
                                     int nargs, const rx_sinfo *out, const rx_expr *const *dims,
                                     int ndims, const char *name, rx_var **out_var);
/* call_tensor(prog, args..., inplace=target, dims=[...]): prog's outputs are the buffers of
 * target (a variable, or a tuple of variables for several outputs), written in place; the
 * binding's value is target. Not inside a dataflow block. */
RX_API rx_status rx_emit_call_tensor_inplace(rx_builder *b, const char *prog, rx_node *const *args,
                                             int nargs, rx_node *target, const rx_expr *const *dims,
                                             int ndims, const char *name, rx_var **out_var);
/* call_extern(ext, args..., out=out). A returning extern (declared `-> SINFO`) makes its result;
 * out may then be NULL (its declared result) or more precise. */
RX_API rx_status rx_emit_call_extern(rx_builder *b, const char *ext, rx_node *const *args,
                                     int nargs, const rx_sinfo *out, const char *name,
                                     rx_var **out_var);
/* fn(args...): a call of graph function fn of the module. out: the call's result (the callee's
 * result with its symbols replaced by the caller's values); NULL: the callee's declared result.
 * Normalization checks the arguments against the callee's parameters. */
RX_API rx_status rx_emit_call_graph(rx_builder *b, const char *fn, rx_node *const *args, int nargs,
                                    const rx_sinfo *out, const char *name, rx_var **out_var);
RX_API rx_status rx_emit_match_cast(rx_builder *b, rx_node *value, const rx_sinfo *target,
                                    const char *name, rx_var **out_var);
RX_API rx_status rx_emit_tuple(rx_builder *b, rx_node *const *fields, int n, const char *name,
                               rx_var **out_var);
RX_API rx_status rx_emit_get_item(rx_builder *b, rx_node *tuple, int index, const char *name,
                                  rx_var **out_var);
/* Ends the function with its result and adds it to the module. Frees b in every case. */
RX_API rx_status rx_builder_finish(rx_builder *b, rx_node *result, rx_graph_fn **out_fn);

RX_API const char *rx_var_name(const rx_var *v);
RX_API const rx_sinfo *rx_var_sinfo(const rx_var *v);

/* ---- auto-batching (passes/batch_fn.c, docs/autobatch.md) ----
 * Adds graph function out_name: fn over a batch of independent calls. Every tensor parameter not
 * named in shared[0..nshared) gets a new leading symbolic dimension `batch` (shared ones, e.g.
 * weights, and non-tensor parameters stay as they are), and the body is rewritten op by op
 * (axes shifted, matmuls over rows, broadcasts aligned). max_batch > 0 adds the fact
 * `batch <= max_batch` (storage planned at that bound, 32-bit indices in kernels); 0: none. Calls
 * of other graph functions in fn are inlined first (into a copy; fn keeps its calls), so a unit
 * of several cells batches as one function; recursion is an error naming the cycle. An op
 * that cannot be batched is an error naming the op, the binding and fn; m then has no out_name.
 * Run it before drv_compile. */
RX_API rx_status rx_batch_function(rx_module *m, const char *fn, const char *const *shared,
                                   size_t nshared, int64_t max_batch, const char *out_name);
/* The same in the index-array (fused gather) form: each batched parameter x: T[...] becomes
 * pool_x: T[rows_x, ...] and idx_x: i32[batch] (next to each other, in x's place), and the body
 * starts with x = take(pool_x, idx_x, axis=0), which fusion puts inside the kernels reading x.
 * The runtime batcher (relaxc/autobatch.h) uses out_name "<batched>_gather" to pass scattered
 * rows of an earlier output as that output and an index array instead of copying them. */
RX_API rx_status rx_batch_function_gather(rx_module *m, const char *fn, const char *const *shared,
                                          size_t nshared, int64_t max_batch, const char *out_name);
/* The batcher's learned FSM table (the bytes of rx_rt_batcher_policy_save, relaxc/autobatch.h)
 * carried in m's artifact (section "batch_policy.fsm"; relaxc compile --batch-policy TABLE): a
 * batcher of that artifact under the FSM policy uses it without a training run. The bytes are
 * checked as the runtime reads them (magic, version, sizes, every action) and every function the
 * table names must be a graph function of m; where names the source in messages (a file name). */
RX_API rx_status rx_module_set_batch_policy(rx_module *m, const void *bytes, size_t len,
                                            const char *where);

/* ---- tensor programs ----
 * Parameters first (inputs, then `out` buffers, scalars anywhere), then statements. Loops and
 * ifs open a scope closed by rx_tfn_end; statements go into the innermost open scope.
 * Errors (unknown operator, intrinsic or loop kind, unbalanced scopes) are recorded and
 * returned by rx_tfn_finish; type errors are the verifier's (rx_module_check). */
RX_API rx_tfn_builder *rx_tfn_builder_new(rx_module *m, const char *name);
RX_API void rx_tfn_builder_free(rx_tfn_builder *tb); /* abandons an unfinished program */
RX_API rx_buffer *rx_tfn_buffer(rx_tfn_builder *tb, const char *name, rx_dtype dtype, int ndim,
                                const rx_expr *const *shape, bool is_output);
RX_API const rx_expr *rx_tfn_scalar(rx_tfn_builder *tb, const char *name, rx_dtype dtype);
RX_API void rx_tfn_fact(rx_tfn_builder *tb, const rx_expr *fact);
/* for var in lo..lo+extent KIND { ... }: kind "serial" (or NULL), "unroll", "vectorize",
 * "blockIdx.x", ..., "threadIdx.z". Returns the loop variable. */
RX_API const rx_expr *rx_tfn_for(rx_tfn_builder *tb, const char *var, const rx_expr *lo,
                                 const rx_expr *extent, const char *kind);
RX_API void rx_tfn_if(rx_tfn_builder *tb, rx_tx *cond);
RX_API void rx_tfn_else(rx_tfn_builder *tb);
RX_API void rx_tfn_end(rx_tfn_builder *tb);
RX_API void rx_tfn_store(rx_tfn_builder *tb, rx_buffer *buf, rx_tx *const *idx, int n,
                         rx_tx *value);
/* scope: "global", "shared" or "local" */
RX_API rx_buffer *rx_tfn_alloc(rx_tfn_builder *tb, const char *name, rx_dtype dtype, int ndim,
                               const rx_expr *const *shape, const char *scope);
/* let name: dtype = value; returns a reference to the local. */
RX_API rx_tx *rx_tfn_let(rx_tfn_builder *tb, const char *name, rx_dtype dtype, rx_tx *value);
RX_API void rx_tfn_barrier(rx_tfn_builder *tb);
/* expressions */
RX_API rx_tx *rx_tfn_sym(rx_tfn_builder *tb, const rx_expr *e); /* loop/symbolic index arithmetic */
RX_API rx_tx *rx_tfn_int(rx_tfn_builder *tb, int64_t v);        /* bare (weak) integer literal */
RX_API rx_tx *rx_tfn_float(rx_tfn_builder *tb, double v);       /* bare (weak) float literal */
RX_API rx_tx *rx_tfn_load(rx_tfn_builder *tb, rx_buffer *buf, rx_tx *const *idx, int n);
/* op: + - * / // % == != < <= > >= && || */
RX_API rx_tx *rx_tfn_binary(rx_tfn_builder *tb, const char *op, rx_tx *a, rx_tx *b);
RX_API rx_tx *rx_tfn_select(rx_tfn_builder *tb, rx_tx *cond, rx_tx *a, rx_tx *b);
RX_API rx_tx *rx_tfn_cast(rx_tfn_builder *tb, rx_dtype to, rx_tx *a);
/* intrinsic by name: exp, sigmoid, fma, subgroup_sum, ... */
RX_API rx_tx *rx_tfn_call(rx_tfn_builder *tb, const char *intrinsic, rx_tx *const *args, int n);
/* Ends the program and adds it to the module. Frees tb in every case. */
RX_API rx_status rx_tfn_finish(rx_tfn_builder *tb, rx_tensor_fn **out_fn);

#ifdef __cplusplus
}
#endif

#endif
