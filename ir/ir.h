/* ir: the cross-level module. Graph functions, tensor programs (loop IR) and extern
 * declarations side by side, struct info, the text parser and printer, normalization (forward
 * shape deduction) and the verifier. Internal header; the public builder API is
 * include/relaxc/compiler.h.
 *
 * Ownership: a module owns an arena and an expression context; every node, struct info,
 * string and symbolic expression of the module lives there and dies with rx_module_free.
 * Arrays inside nodes are arena arrays (pointer + count), fixed once built.
 *
 * The text format is specified in docs/text-format.md. */
#ifndef RX_IR_H
#define RX_IR_H

#include "../base/base.h"
#include "../shapes/shapes.h"

/* ------------------------------------------------------------------------------------------
 * dtypes: listed once; X(ENUM, text name, bits, is_float, is_signed)
 * ------------------------------------------------------------------------------------------ */
/* RX_DTYPES and rx_dtype are in include/relaxc/types.h (shared with the public APIs). */

const char *ir_dtype_name(rx_dtype t); /* "any" for unknown */
bool ir_dtype_parse(const char *s, size_t n, rx_dtype *out);
/* Is s[0..n) a keyword or a dtype name of the text format (not usable as a name)? */
bool ir_text_is_reserved(const char *s, size_t n);
int ir_dtype_bits(rx_dtype t);
bool ir_dtype_is_float(rx_dtype t);
bool ir_dtype_is_int(rx_dtype t); /* integer types, bool excluded */
bool ir_dtype_is_signed(rx_dtype t);

/* ------------------------------------------------------------------------------------------
 * struct info: immutable, arena-allocated
 * ------------------------------------------------------------------------------------------ */
typedef enum rx_sinfo_kind {
  RX_SINFO_OBJECT, /* anything */
  RX_SINFO_TENSOR, /* dtype (may be unknown), ndim (-1 unknown), shape (NULL: rank only) */
  RX_SINFO_SHAPE,  /* a shape value: ndim (-1 unknown), values (NULL: unknown) */
  RX_SINFO_PRIM,   /* a scalar: dtype, value (symbolic, NULL when unknown) */
  RX_SINFO_TUPLE,  /* fields */
  RX_SINFO_FUNC,   /* fields are the parameters, ret the result */
} rx_sinfo_kind;

typedef struct rx_sinfo rx_sinfo;
struct rx_sinfo {
  rx_sinfo_kind kind;
  rx_dtype dtype;        /* TENSOR, PRIM */
  int ndim;              /* TENSOR, SHAPE: -1 when unknown */
  const rx_expr **shape; /* TENSOR: dims, SHAPE: values; NULL when unknown; ndim entries */
  const rx_expr *value;  /* PRIM: known value (integers and bool only) or NULL */
  const rx_sinfo **fields;
  int nfields;         /* TUPLE, FUNC params */
  const rx_sinfo *ret; /* FUNC */
  /* TENSOR: `f16[total, 4096] ragged(indptr, b)`: the leading axis packs b rows (sequences) of
   * different lengths, row s being indices indptr[s] .. indptr[s + 1] - 1, where indptr names a
   * parameter or an earlier binding of the function of struct info i32[b + 1] (the verifier
   * checks it). An annotation about the values, not the shape: ir_sinfo_equal ignores it, and
   * shape deduction keeps it through row-wise ops (ops/normalize.c). docs/ops.md, "Ragged
   * tensors". NULL / NULL: not ragged. */
  const char *ragged_by;      /* the interned name of the offsets variable */
  const rx_expr *ragged_rows; /* b */
  /* TENSOR: `f32[n, 4096] @ m[R, S[1]]`: a distributed tensor (issue 35, in the spirit of Relax's
   * DTensor): the shape is the global one, `mesh` names a device mesh of the module
   * (rx_module.meshes) and place[k] says how mesh axis k holds it: IR_PLACE_R (replicated: every
   * device of the axis holds the whole), IR_PLACE_P (partial sums: the global value is the sum
   * over the axis, what a row-parallel matmul leaves before its allreduce) or d >= 0 (S[d]:
   * sharded along tensor dim d, device i of the axis holding block i). docs/text-format.md,
   * "Distributed tensors". NULL / 0: a plain (local) tensor. */
  const char *mesh; /* interned mesh name */
  const int *place; /* nplace entries */
  int nplace;
};

enum { IR_PLACE_R = -1, IR_PLACE_P = -2 };
/* A device mesh, `mesh m = [2, 2]` at the top of a module: ndim axes of shape[k] devices. */
#define IR_MESH_MAX_NDIM 4
typedef struct rx_mesh {
  const char *name; /* interned */
  int ndim;         /* 1..IR_MESH_MAX_NDIM */
  int64_t shape[IR_MESH_MAX_NDIM];
  rx_loc loc;
} rx_mesh;

typedef struct rx_module rx_module;

RX_API const rx_sinfo *rx_sinfo_object(rx_module *m);
/* shape may be NULL (rank only, ndim >= 0, or unknown rank with ndim == -1); copied. */
RX_API const rx_sinfo *rx_sinfo_tensor(rx_module *m, rx_dtype dtype, int ndim,
                                       const rx_expr *const *shape);
RX_API const rx_sinfo *rx_sinfo_shape(rx_module *m, int ndim, const rx_expr *const *values);
RX_API const rx_sinfo *rx_sinfo_prim(rx_module *m, rx_dtype dtype, const rx_expr *value);
RX_API const rx_sinfo *rx_sinfo_tuple(rx_module *m, const rx_sinfo *const *fields, int n);
const rx_sinfo *ir_sinfo_func(rx_module *m, const rx_sinfo *const *params, int n,
                              const rx_sinfo *ret);
/* s (a tensor of rank >= 1) annotated as ragged by the offsets variable `by` (interned) with
 * `rows` rows; a copy. */
const rx_sinfo *ir_sinfo_ragged(rx_module *m, const rx_sinfo *s, const char *by,
                                const rx_expr *rows);
/* s (a tensor) placed on mesh `mesh` (interned) by place[n] (copied); n == 0: s made local. */
const rx_sinfo *ir_sinfo_placed(rx_module *m, const rx_sinfo *s, const char *mesh, const int *place,
                                int n);
/* Structural equality (symbolic dims compared by pointer: they are canonical; placements
 * compared too). */
bool ir_sinfo_equal(const rx_sinfo *a, const rx_sinfo *b);
/* Text form as in docs/text-format.md, e.g. "f16[n, 4096]", "f32[ndim=2]", "(f32[n], i64[])". */
void ir_sinfo_print(rx_strbuf *out, const rx_sinfo *s);

/* ------------------------------------------------------------------------------------------
 * attributes of op calls
 * ------------------------------------------------------------------------------------------ */
typedef enum rx_attr_kind {
  RX_ATTR_INT,   /* i */
  RX_ATTR_FLOAT, /* f */
  RX_ATTR_BOOL,  /* i (0/1); text: true/false */
  RX_ATTR_STR,   /* s; text: "..." */
  RX_ATTR_DTYPE, /* dtype; text: f32 ... */
  RX_ATTR_INTS,  /* ints, n; text: [1, 0] */
  RX_ATTR_EXPRS, /* exprs, n: symbolic expressions; text: [n, 4] */
} rx_attr_kind;

typedef struct rx_attr {
  const char *name; /* interned */
  rx_attr_kind kind;
  rx_loc loc;
  int64_t i;
  double f;
  const char *s;
  rx_dtype dtype;
  const int64_t *ints;
  const rx_expr **exprs;
  int n; /* INTS, EXPRS */
} rx_attr;

/* An attribute an op accepts; attributes may be given by name or positionally after the
 * op's arguments, in this order. */
typedef struct rx_attr_schema {
  const char *name;
  rx_attr_kind kind;
  bool required;
  const char *doc;
} rx_attr_schema;

/* ------------------------------------------------------------------------------------------
 * the op registry: what the parser, the printer and the verifier know of an operator. ir/
 * (floor 3) never calls into ops/ (floor 4): each module holds the registry as a table of
 * functions (rx_module.ops), which ops/registry.c fills from ops/ops.def and rx_module_new
 * (ops/emit.c) gives every module it makes. scripts/check-house.py link checks that no ir/
 * file uses a symbol of ops/.
 * ------------------------------------------------------------------------------------------ */
typedef struct rx_node rx_node;
/* An operator, as ir/ sees it: an opaque descriptor (struct rx_op is defined in ops/ops.h, the
 * one op table), found by name and read through the registry. */
typedef struct rx_op rx_op;
typedef struct ir_op_registry {
  /* The op named name[0..len), or NULL when there is none. */
  const rx_op *(*lookup)(const char *name, size_t len);
  const char *(*name)(const rx_op *op);
  /* Positional (non-attribute) arguments: at least min, at most max (-1: variadic). */
  int (*min_args)(const rx_op *op);
  int (*max_args)(const rx_op *op);
  /* Its attributes, in positional order: attr(op, i) for 0 <= i < nattrs(op). */
  int (*nattrs)(const rx_op *op);
  const rx_attr_schema *(*attr)(const rx_op *op, int i);
  /* The argument the op writes in place (kv_append: 0, the KV pages), or -1: such a call
   * changes a value and so is impure (never inside dataflow, never removed). */
  int (*inplace_arg)(const rx_op *op);
} ir_op_registry;

/* ------------------------------------------------------------------------------------------
 * graph functions
 * ------------------------------------------------------------------------------------------ */
typedef struct rx_graph_fn rx_graph_fn;
typedef struct rx_tensor_fn rx_tensor_fn;
typedef struct rx_extern_fn rx_extern_fn;

/* A graph variable: a parameter or the left side of a binding. */
typedef struct rx_var {
  const char *name;      /* interned; unique within its function */
  const rx_sinfo *sinfo; /* parameter: declared; binding: deduced or annotated */
  rx_loc loc;
  const char *source_name; /* a parameter's name in its source where name had to differ (an
                            * ONNX input past_key_values.0.key, name past_key_values_0_key):
                            * the name the artifact's signature gives it; NULL: name */
} rx_var;

typedef enum rx_node_kind {
  RX_NODE_VAR,         /* var */
  RX_NODE_CONST,       /* tensor constant: sinfo (static shape), data[count] as doubles */
  RX_NODE_PRIM,        /* scalar: prim_dtype; integers/bool: prim; floats: fvalue */
  RX_NODE_SHAPE,       /* shape literal [e, ...]: dims, ndims */
  RX_NODE_TUPLE,       /* (a, b, ...): args */
  RX_NODE_GET_ITEM,    /* args[0].index */
  RX_NODE_CALL,        /* op(args..., attrs...) */
  RX_NODE_CALL_TENSOR, /* call_tensor(tfn, args..., out=out_sinfo | inplace=x, dims=[extra...]) */
  RX_NODE_CALL_EXTERN, /* call_extern(ext, args..., out=out_sinfo) */
  RX_NODE_CALL_GRAPH,  /* gfn(args...): call of another graph function */
  RX_NODE_IF,          /* if cond { then } else { otherwise } */
} rx_node_kind;

typedef struct rx_seq rx_seq;

struct rx_node {
  rx_node_kind kind;
  rx_loc loc;
  const rx_sinfo *sinfo; /* deduced by normalization; NULL before */

  rx_var *var; /* VAR */

  rx_dtype prim_dtype; /* PRIM */
  const rx_expr *prim; /* PRIM (integer or bool value) */
  double fvalue;       /* PRIM (float value) */
  bool weak;           /* PRIM written as a bare literal: its dtype adapts to the other operand */

  const rx_expr **dims; /* SHAPE */
  int ndims;

  rx_node **args; /* TUPLE fields, GET_ITEM tuple (args[0]), CALL* arguments */
  int nargs;
  int index; /* GET_ITEM */

  const rx_op *op; /* CALL */
  rx_attr *attrs;
  int nattrs;

  const char *callee; /* CALL_TENSOR / CALL_EXTERN / CALL_GRAPH: name as written */
  rx_tensor_fn *tfn;  /* resolved after parsing the whole module */
  rx_extern_fn *ext;
  rx_graph_fn *gfn;
  const rx_sinfo *out; /* CALL_TENSOR / CALL_EXTERN: declared output struct info */
  /* CALL_TENSOR written `inplace=x` (or `inplace=(x, y)`): the program's outputs are the buffers
   * of these variables, written in place; the call's value is them (out is their struct info).
   * Impure: never in dataflow. With out= beside it (`inplace=x, out=T`), fresh_out is T: the
   * outputs the program adds after the targets, allocated by the call (kv_append_rope's roped
   * queries beside the pages); the call's value is then the tuple of the targets and T's fields */
  rx_node *inplace;
  const rx_sinfo *fresh_out;
  const rx_expr **extra_dims; /* CALL_TENSOR: extra symbolic arguments (dims=[...]) */
  int nextra;

  rx_node *cond; /* IF */
  rx_seq *then_seq, *else_seq;

  const double *data; /* CONST: row-major values, count = product of the shape */
  size_t count;
  /* CONST of an integer dtype or bool written with integer literals only: the same values
   * exactly (data rounds those past 2^53); NULL otherwise. Readers take them over data. */
  const int64_t *idata;
};

typedef struct rx_binding {
  rx_var *var;
  rx_node *value;
  const rx_sinfo *annot; /* `x: sinfo = ...` as written, or NULL */
  const rx_sinfo *cast;  /* match_cast target (`x = match_cast(v, sinfo)`), NULL otherwise */
  rx_loc loc;
} rx_binding;

typedef struct rx_block {
  bool dataflow; /* a `dataflow { }` block: pure, no control flow */
  rx_binding **bindings;
  int nbindings;
  rx_loc loc;
} rx_block;

struct rx_seq {
  rx_block **blocks;
  int nblocks;
  rx_node *result; /* function: the returned value; if-branch: the branch value */
};

struct rx_graph_fn {
  const char *name;
  rx_loc loc;
  rx_var **params;
  int nparams;
  const rx_sinfo *ret;   /* declared result (after `->`), or NULL; normalization fills in */
  const rx_expr **facts; /* `where` facts, canonical */
  rx_loc *fact_locs;
  int nfacts;
  rx_seq body;
  bool primitive; /* made by passes/fuse_ops.c: one fusion group, consumed by fuse_tensor (not
                     printed; a primitive function is called only from graph functions) */
};

/* ------------------------------------------------------------------------------------------
 * tensor programs (loop IR)
 * ------------------------------------------------------------------------------------------ */
typedef enum rx_scope {
  RX_SCOPE_GLOBAL, /* parameters and global allocations */
  RX_SCOPE_SHARED, /* per block / workgroup / threadgroup */
  RX_SCOPE_LOCAL,  /* per thread (registers) */
} rx_scope;

/* The use of a subgroup matrix fragment (RX_STMT_FRAG, below); RX_FRAG_NONE: a plain buffer.
 * X(ENUM, text after `fragment` in an alloc) */
#define RX_FRAG_USES(X)                                                                            \
  X(NONE, "")                                                                                      \
  X(A, "a")     /* the left operand of frag mma: M x K */                                          \
  X(B, "b")     /* the right operand: K x N */                                                     \
  X(ACC, "acc") /* the accumulator: M x N */

typedef enum rx_frag_use {
#define X(e, n) RX_FRAG_##e,
  RX_FRAG_USES(X)
#undef X
      RX_FRAG_USE_COUNT
} rx_frag_use;
const char *ir_frag_use_name(rx_frag_use u); /* "a", "b", "acc"; "" for NONE */
const char *ir_scope_name(rx_scope s);

typedef struct rx_buffer {
  const char *name;
  rx_dtype dtype;
  int ndim;
  const rx_expr **shape; /* canonical symbolic dims */
  rx_scope scope;
  rx_frag_use frag; /* a subgroup matrix fragment (scope local, 2-D constant shape) */
  /* shared only (`alloc x: T[..] shared reuse`): x may take the storage of the shared buffers
   * allocated before it in the kernel, which are dead from its allocation on (the schedule puts
   * a barrier between their last use and its first): a permission, not a request (CUDA lays x
   * over them, codegen/lower.c; other targets and the interpreter give it storage of its own) */
  bool reuse;
  rx_loc loc;
} rx_buffer;

typedef enum rx_param_kind {
  RX_PARAM_BUFFER, /* name: dtype[dims]; `out` marks a destination */
  RX_PARAM_SCALAR, /* name: i64 / i32: an extra symbolic argument, defines the variable */
  RX_PARAM_VALUE,  /* extern_fn only: name: any graph struct info (Object, Prim(i64), Shape,
                      f16[ndim=3], a tuple): a value passed as it is (a runtime object, a host
                      scalar or shape, a tensor whose shape the callee checks) */
} rx_param_kind;

typedef struct rx_param {
  rx_param_kind kind;
  bool is_output;
  rx_buffer *buf;        /* BUFFER */
  const rx_expr *var;    /* SCALAR: the symbolic variable */
  rx_dtype dtype;        /* SCALAR */
  const char *name;      /* VALUE (interned) */
  const rx_sinfo *sinfo; /* VALUE */
  rx_loc loc;
} rx_param;
/* A parameter's name, whatever its kind. */
const char *ir_param_name(const rx_param *p);

/* Loop kinds: listed once; X(ENUM, text) */
#define RX_LOOP_KINDS(X)                                                                           \
  X(SERIAL, "serial")                                                                              \
  X(UNROLL, "unroll")                                                                              \
  X(VECTORIZE, "vectorize")                                                                        \
  X(ROLLED, "rolled") /* serial, kept a loop by the target compiler (#pragma unroll 1) */          \
  X(BLOCK_X, "blockIdx.x")                                                                         \
  X(BLOCK_Y, "blockIdx.y")                                                                         \
  X(BLOCK_Z, "blockIdx.z")                                                                         \
  X(THREAD_X, "threadIdx.x")                                                                       \
  X(THREAD_Y, "threadIdx.y")                                                                       \
  X(THREAD_Z, "threadIdx.z")

typedef enum rx_loop_kind {
#define X(e, n) RX_LOOP_##e,
  RX_LOOP_KINDS(X)
#undef X
      RX_LOOP_KIND_COUNT
} rx_loop_kind;
const char *ir_loop_kind_name(rx_loop_kind k);
static inline bool rx_loop_is_bound(rx_loop_kind k) { return k >= RX_LOOP_BLOCK_X; }

/* Math intrinsics and subgroup operations: listed once; X(ENUM, text, arity, kind)
 * kind: 'f' float math, 'n' any numeric, 's' subgroup operation: a reduction over the
 * subgroup's lanes, or shuffle_xor(x, mask), which gives lane l the x of lane l ^ mask of its
 * subgroup (mask an integer, the same on every lane, below the subgroup size; every lane of the
 * subgroup reaches it: CUDA __shfl_xor_sync, GLSL subgroupShuffleXor, MSL simd_shuffle_xor),
 * 'c' a run-time check: `check(ok, v, "message")` is v (an integer), and where ok (a bool) is
 * false the call fails with message, each "%v" in it replaced by v (base.h, base_check_format):
 * the interpreter stops with that error, a kernel writes base_check_code(message) and v to the
 * error buffer of its call (docs/kernel-abi.md, "Run-time checks") and goes on; the message is
 * rx_tx.msg. An op whose index comes from data checks it so and still clamps the index it reads
 * with (ops/manip.c, lz_gen_take). */
#define RX_INTRINSICS(X)                                                                           \
  X(EXP, "exp", 1, 'f')                                                                            \
  X(EXP2, "exp2", 1, 'f')                                                                          \
  X(LOG, "log", 1, 'f')                                                                            \
  X(LOG2, "log2", 1, 'f')                                                                          \
  X(SQRT, "sqrt", 1, 'f')                                                                          \
  X(RSQRT, "rsqrt", 1, 'f')                                                                        \
  X(TANH, "tanh", 1, 'f')                                                                          \
  X(ERF, "erf", 1, 'f')                                                                            \
  X(SIGMOID, "sigmoid", 1, 'f')                                                                    \
  X(SIN, "sin", 1, 'f')                                                                            \
  X(COS, "cos", 1, 'f')                                                                            \
  X(ASIN, "asin", 1, 'f')                                                                          \
  X(ACOS, "acos", 1, 'f')                                                                          \
  X(ATAN, "atan", 1, 'f')                                                                          \
  X(FLOOR, "floor", 1, 'f')                                                                        \
  X(CEIL, "ceil", 1, 'f')                                                                          \
  X(POW, "pow", 2, 'f')                                                                            \
  X(FMA, "fma", 3, 'f')                                                                            \
  X(ABS, "abs", 1, 'n')                                                                            \
  X(MIN, "min", 2, 'n')                                                                            \
  X(MAX, "max", 2, 'n')                                                                            \
  X(SUBGROUP_SUM, "subgroup_sum", 1, 's')                                                          \
  X(SUBGROUP_MAX, "subgroup_max", 1, 's')                                                          \
  X(SUBGROUP_MIN, "subgroup_min", 1, 's')                                                          \
  X(SHUFFLE_XOR, "shuffle_xor", 2, 's')                                                            \
  X(CHECK, "check", 2, 'c')

typedef enum rx_intrinsic {
#define X(e, n, a, k) RX_INTRIN_##e,
  RX_INTRINSICS(X)
#undef X
      RX_INTRIN_COUNT
} rx_intrinsic;
const char *ir_intrinsic_name(rx_intrinsic i);
int ir_intrinsic_arity(rx_intrinsic i);
char ir_intrinsic_kind(rx_intrinsic i);
bool ir_intrinsic_lookup(const char *s, size_t n, rx_intrinsic *out);

/* Binary operators of tensor-program expressions; X(ENUM, text, precedence class:
 * base/expr_kinds.h, shared with the symbolic expressions) */
#define RX_BINOPS(X)                                                                               \
  X(ADD, "+", RX_PREC_ADD)                                                                         \
  X(SUB, "-", RX_PREC_ADD)                                                                         \
  X(MUL, "*", RX_PREC_MUL)                                                                         \
  X(DIV, "/", RX_PREC_MUL)       /* floats only */                                                 \
  X(FLOORDIV, "//", RX_PREC_MUL) /* integers only */                                               \
  X(FLOORMOD, "%", RX_PREC_MUL)  /* integers only */                                               \
  X(EQ, "==", RX_PREC_CMP)                                                                         \
  X(NE, "!=", RX_PREC_CMP)                                                                         \
  X(LT, "<", RX_PREC_CMP)                                                                          \
  X(LE, "<=", RX_PREC_CMP)                                                                         \
  X(GT, ">", RX_PREC_CMP)                                                                          \
  X(GE, ">=", RX_PREC_CMP)                                                                         \
  X(AND, "&&", RX_PREC_AND)                                                                        \
  X(OR, "||", RX_PREC_OR)

typedef enum rx_binop {
#define X(e, n, p) RX_BINOP_##e,
  RX_BINOPS(X)
#undef X
      RX_BINOP_COUNT
} rx_binop;
const char *ir_binop_name(rx_binop op);
int ir_binop_precedence(rx_binop op);

typedef struct rx_local {
  const char *name;
  rx_dtype dtype;
  rx_loc loc;
  /* `let sym n = VALUE` (a symbolic let): the symbolic variable named n that the statement
   * defines, NULL for a plain let. VALUE is an integer expression that may load from buffers
   * (an offsets table: `indptr[i + 1] - indptr[i]`); n, an i64, may then appear in loop ranges
   * and index arithmetic like a loop variable, visible to the following statements of its SEQ.
   * References to n are RX_TX_SYM nodes over this variable, never RX_TX_LOCAL. A loop range
   * written with a load (`for j in 0..indptr[i + 1] - indptr[i]`) is parsed as symbolic lets
   * before the loop (ir/parser.c). */
  const rx_expr *sym;
} rx_local;

typedef enum rx_tx_kind {
  RX_TX_INT,      /* ival, dtype (a literal; `weak` when written bare) */
  RX_TX_FLOAT,    /* fval, dtype */
  RX_TX_SYM,      /* sym: integer expression over symbolic and loop variables, dtype i64 */
  RX_TX_LOCAL,    /* local (let-bound) */
  RX_TX_LOAD,     /* buf[idx...] */
  RX_TX_BINARY,   /* binop(a, b) */
  RX_TX_NEG,      /* -a */
  RX_TX_NOT,      /* !a */
  RX_TX_SELECT,   /* select(a, b, c) */
  RX_TX_CAST,     /* dtype(a) */
  RX_TX_CALL,     /* intrinsic(args) */
  RX_TX_HAS_FRAG, /* a test of the target's units: has_fragments(AB, ACC, M, N, K),
                     has_mma(AB, ACC, M, N, K) or has_async_copy() (rx_target_test, below) */
} rx_tx_kind;

/* The tests of a target's units that RX_TX_HAS_FRAG makes (below); X(ENUM, name as written) */
#define RX_TARGET_TESTS(X)                                                                         \
  X(FRAGMENTS, "has_fragments")   /* subgroup matrix fragments (RX_STMT_FRAG) of that shape */     \
  X(MMA, "has_mma")               /* mma.sync of that shape (RX_STMT_MMA, RX_STMT_LDMATRIX) */     \
  X(ASYNC_COPY, "has_async_copy") /* async_copy / commit / wait (cp.async) */                      \
  X(WGMMA, "has_wgmma")           /* wgmma m64nNk16 of that N (RX_STMT_WGMMA*) */

typedef enum rx_target_test {
#define X(e, n) RX_TEST_##e,
  RX_TARGET_TESTS(X)
#undef X
      RX_TEST_COUNT
} rx_target_test;
const char *ir_target_test_name(rx_target_test t);

/* A tensor-program expression. Integer subtrees made only of literals, symbolic/loop variables
 * and + - * // % min max (and comparisons/logic of those) are kept as one RX_TX_SYM node
 * holding a canonical rx_expr, so the analyzer sees index arithmetic directly; the
 * constructors in this header do that folding. */
typedef struct rx_tx rx_tx;
struct rx_tx {
  rx_tx_kind kind;
  rx_dtype dtype; /* result type */
  rx_loc loc;
  bool weak; /* INT/FLOAT literal written bare: adapts to the other operand's type */
  int64_t ival;
  double fval;
  const rx_expr *sym;
  rx_local *local;
  rx_buffer *buf;
  rx_tx **idx; /* LOAD indices */
  int nidx;
  rx_binop binop;
  rx_intrinsic intrin;
  rx_tx *a, *b, *c; /* operands (CALL: up to 3 arguments in a, b, c) */
  const char *msg;  /* CALL of RX_INTRIN_CHECK: the message (interned) */
  /* HAS_FRAG: fragments A (M x K) and B (K x N) of dtype frag_ab, accumulator (M x N) frag_acc */
  rx_dtype frag_ab, frag_acc;
  int frag_m, frag_n, frag_k;
  rx_target_test test; /* HAS_FRAG: which test (has_async_copy: the frag_ fields unused) */
};

/* RX_TX_HAS_FRAG, `has_fragments(f16, f32, 16, 16, 16)`: true on a target whose subgroup matrix
 * fragments (RX_STMT_FRAG) include A M x K and B K x N of the first dtype with an M x N
 * accumulator of the second (target.h, tgt_target_has_frag), false elsewhere. It is allowed only
 * as the whole condition of an `if`, so a program can hold a matrix-unit form beside a portable
 * one: scheduling keeps the branch that the target takes (passes/schedule.h), the interpreter the
 * one that rx_interp_opts.fragments names (the portable one by default). A target-independent
 * program, e.g. an op's legalization (ops/attention.c), thus carries both and each target
 * compiles one.
 *
 * `has_mma(f16, f32, 16, 8, 16)` (RX_TEST_MMA) is its counterpart for RX_STMT_MMA and
 * RX_STMT_LDMATRIX, whose register layouts are explicit: true on a target whose `.mma` table has
 * mma.sync of that shape and dtypes (CUDA sm_80 and sm_90: tgt_target_has_mma_sync); the
 * interpreter takes its then branch where rx_interp_opts.mma_sync says so. `has_async_copy()`
 * (RX_TEST_ASYNC_COPY) is true on a target that runs RX_STMT_ASYNC_COPY / COMMIT / WAIT (CUDA
 * sm_80 and newer, cp.async: tgt_target_has_async_copy); the interpreter, which runs async
 * copies, takes it with rx_interp_opts.fragments. All are decided the same way by scheduling, and
 * a program may nest them: `if has_mma(...) { A } else { if has_fragments(...) { B } else { C } }`.
 * `has_wgmma(f16, f32, 64, 64, 16)` (RX_TEST_WGMMA) is true on a target whose `.mma` table has
 * wgmma.mma_async m64nNk16 of those dtypes with that N (CUDA sm_90: tgt_target_has_wgmma); the
 * interpreter takes its then branch where rx_interp_opts.wgmma says so.
 */

typedef enum rx_stmt_kind {
  RX_STMT_SEQ,     /* body[n] */
  RX_STMT_FOR,     /* for var in lo..lo+extent kind { body } */
  RX_STMT_REDUCE,  /* reduce vars in ranges { init { init } update { body } } */
  RX_STMT_STORE,   /* buf[idx...] = value */
  RX_STMT_LET,     /* let local = value; visible to the following statements of its SEQ */
  RX_STMT_ALLOC,   /* alloc buf (scope); visible to the following statements of its SEQ */
  RX_STMT_IF,      /* if cond { then } else { otherwise } (otherwise may be NULL) */
  RX_STMT_BARRIER, /* all threads of the block reach this point; shared memory is visible */
  /* the kinds from here on synchronize or use matrix units (sched_stmt_has_bound relies on it) */
  RX_STMT_MMA,          /* mma m16n8k16 c, a, b: a subgroup's matrix multiply-accumulate (below) */
  RX_STMT_ASYNC_COPY,   /* async_copy dst[i...] = src[j...] [if cond]: 16 bytes in flight (below) */
  RX_STMT_ASYNC_COMMIT, /* async_commit: the thread's copies since the last one form a group */
  RX_STMT_ASYNC_WAIT,   /* async_wait N: all but the thread's N newest groups have landed */
  RX_STMT_LDMATRIX,     /* ldmatrix xN [trans] frag = buf[i...]: a subgroup's fragment load */
  RX_STMT_FRAG,         /* frag fill/load/mma/store: a subgroup's opaque matrix fragments */
  RX_STMT_WGMMA,        /* wgmma m64nNk16 acc, a[i...], b[j...]: a warpgroup's MMA (below) */
  RX_STMT_WGMMA_FENCE,  /* wgmma_fence: operands written before it are seen by the wgmma after */
  RX_STMT_WGMMA_COMMIT, /* wgmma_commit: the warpgroup's wgmma since the last one form a group */
  RX_STMT_WGMMA_WAIT,   /* wgmma_wait N: all but the N newest wgmma groups have completed */
} rx_stmt_kind;

/* The operations on subgroup matrix fragments; X(ENUM, text after `frag`) */
#define RX_FRAG_OPS(X)                                                                             \
  X(FILL, "fill")   /* frag fill f, VALUE: every element of f is VALUE */                          \
  X(LOAD, "load")   /* frag load f, buf[i...], STRIDE [, col_major] */                             \
  X(MMA, "mma")     /* frag mma d, a, b, c: D = A B + C */                                         \
  X(STORE, "store") /* frag store f, buf[i...], STRIDE [, col_major] */

typedef enum rx_frag_op {
#define X(e, n) RX_FRAG_OP_##e,
  RX_FRAG_OPS(X)
#undef X
      RX_FRAG_OP_COUNT
} rx_frag_op;
const char *ir_frag_op_name(rx_frag_op op);

/* RX_STMT_FRAG: the portable counterpart of RX_STMT_MMA. A fragment is a buffer allocated
 * `alloc f: T[M, N] fragment USE` (USE a, b or acc): one M x N matrix per subgroup whose
 * distribution over the lanes is unspecified, as Metal's simdgroup_matrix (Metal Shading Language
 * Specification, "SIMD-group Matrix Functions") and Vulkan's cooperative matrices
 * (GL_NV_cooperative_matrix / SPV_NV_cooperative_matrix) leave it. Its elements are never read
 * or written one by one, only by these statements, which every lane of the subgroup reaches
 * together with the same operands:
 *   fill:  buf: f; value: the element (converted to f's dtype)
 *   load:  buf: f; mem[idx...]: the address of element (0, 0); value: the stride (elements
 *          between rows, or columns when col_major); element (r, c) is at flat offset
 *          off + r * stride + c, or off + c * stride + r with col_major (mem row-major)
 *   store: the same, from f into mem
 *   mma:   buf: d; mma_a, mma_b, mma_c: D (M x N) = A (M x K) B (K x N) + C (M x N); d and c
 *          are accumulators of one dtype, a and b of one dtype (d may be c)
 * A target's `.mma` table (targets/target.h) gives the shapes and dtypes it runs; lowering
 * checks them (codegen/lower.c). */
/* RX_STMT_MMA: `mma m16n8k16 c, a, b`: the 32 lanes of a subgroup together compute
 * C += A B with A 16x16 and B 16x8 (f16 or bf16, both the same) and C 16x8 (f32), each lane
 * holding its fragment in local buffers: a [8] (A), b [4] (B), c [4] (C, read and written), in
 * the layouts of the PTX ISA's "Matrix Fragments for mma.m16n8k16" (lane l, g = l / 4,
 * t = l % 4): a[i] = A[g + 8 * (i / 2 % 2)][2t + i % 2 + 8 * (i / 4)],
 * b[i] = B[2t + i % 2 + 8 * (i / 2)][g], c[i] = C[g + 8 * (i / 2)][2t + i % 2]. Every lane of
 * the subgroup must reach it (subgroups of 32: the kernel is scheduled for them). Printed for CUDA
 * as mma.sync through codegen/mma_cuda.h; other targets report it. Indexed form
 * `mma m16n8k16 c[i], a[j], b[k]` (nidx 3; idx: the rows i, j, k, uniform over the subgroup):
 * c, a and b are local buffers [R, 4], [R, 8], [R, 4] holding R fragments each, and the
 * statement uses row i of c, j of a, k of b, so that a loop (unrolled by the target's compiler)
 * walks the fragments of a warp's tile instead of one statement per pair.
 *
 * RX_STMT_ASYNC_COPY: `async_copy dst[i...] = src[j...]` copies the 16 bytes of src from index
 * j... on (along its last dimension) to dst from i... on; with `if cond`, where cond is false
 * the 16 bytes of dst become zeros and src is not read. dst is a shared buffer, src a parameter
 * (global memory), of one dtype; both addresses are multiples of 16 bytes. The copy is in flight
 * until an `async_wait` of the same thread leaves its group behind: until then dst holds its old
 * contents (the interpreter writes it at that wait), and other threads see it only after a
 * barrier that follows the wait. Printed for CUDA as cp.async (codegen/mma_cuda.h).
 * Fields: buf, idx (destination), value (the source, a load), cond.
 *
 * RX_STMT_ASYNC_COMMIT / RX_STMT_ASYNC_WAIT: cp.async.commit_group and cp.async.wait_group N
 * (N in count): copies since the last commit form one group; a wait returns when at most the
 * N newest groups of the thread are still in flight.
 *
 * RX_STMT_LDMATRIX: `ldmatrix xN frag = buf[i...]` (N = 1, 2, 4 in count; `trans` sets trans):
 * the 32 lanes of a subgroup together load N 8x8 matrices of 16-bit elements from a shared
 * buffer. Lanes 8j .. 8j + 7 give, by their own index i..., the addresses of rows 0..7 of
 * matrix j (8 contiguous elements, 16-byte aligned); lane l receives into its local fragment
 * frag (2N elements) matrix j's row l / 4, columns 2 (l % 4) and 2 (l % 4) + 1, at frag[2j]
 * and frag[2j + 1]; with trans, the matrix is read transposed (rows 2 (l % 4), 2 (l % 4) + 1 of
 * column l / 4). The PTX ISA's ldmatrix, "Warp-level matrix load instruction"; CUDA only.
 * Indexed form `ldmatrix xN frag[i] = ...` (nidx 1, idx[0] = i): frag is a local [R, 2N] and
 * the statement loads its row i.
 * Fields: buf (frag), value (the lane's address, a load of a shared buffer), count, trans,
 * idx/nidx (the indexed form's row).
 *
 * RX_STMT_WGMMA: `wgmma m64nNk16 acc, a[i...], b[j...]` (N in count: 8..256, a multiple of 8):
 * the 128 threads of a warpgroup (threads 128 w .. 128 w + 127 of the block, which must have a
 * multiple of 128) together compute D += A B^T with A 64 x 16 and B N x 16 (f16 or bf16, both the
 * same) read from shared memory, D 64 x N in f32, each thread holding N / 2 elements of D in its
 * local buffer acc (f32, N / 2 elements, read and written). The PTX ISA's wgmma.mma_async
 * ("Asynchronous Warpgroup Level Matrix Multiply-Accumulate Instructions"), both operands by
 * matrix descriptor, K-major (imm-trans 0), scale-d 1.
 * The operands' layout is the 128-byte swizzle of the PTX ISA ("Shared Memory Matrix Layout",
 * swizzle mode 1): a and b are shared buffers of one 16-bit dtype whose last dimension is 64 (a
 * row: 128 bytes), seen as rows of 64 elements by their flat offset; the address a[i...] has flat
 * offset 64 R + c with R a multiple of 8 and c a multiple of 16 (the k step in the row). Element
 * (m, k) of A is the element of flat row R + m at column sw(R + m, c + k), where
 * sw(r, c) = ((c / 8) xor (r % 8)) * 8 + c % 8: chunk q (16 bytes) of row r sits at chunk
 * q xor (r % 8), so a stage of 8 rows is one 1024-byte swizzle atom (the CUDA printer aligns such
 * buffers to 1024 bytes). B's element (n, k) likewise from b[j...] (B stored n-major, k along
 * the row: x @ W^T with W [out, in]).
 * Two variants (issue 31, ops/attention_fa3.c):
 *  - `wgmma m64nNk16 trans acc, a, b`: B MN-major (the PTX ISA's imm-trans-b 1): b's rows run
 *    along k and its 64 columns along N (N at most 64): B's element (n, k) is the element of flat
 *    row R + k at column sw(R + k, n), b[j...] at flat offset 64 R (R a multiple of 8, column 0).
 *    So V stored [keys, d] in the swizzle is B of P V with k the key.
 *  - A from registers (the PTX ISA's wgmma with A in registers): a[i...] a load of a local
 *    buffer of the 16-bit dtype whose last dimension is 8, at a flat offset multiple of 8: the
 *    thread's 8 elements of A, per warp in mma.m16n8k16's A layout (RX_STMT_MMA): thread l,
 *    w = l / 32, g = l % 32 / 4, t = l % 4 holds a[j] = A[16 w + g + 8 (j / 2 % 2)][2 t + j % 2
 *    + 8 (j / 4)]. So an m64nNk16's accumulator is such fragments: acc[8 s + j] (converted) is
 *    a[j] of the k16 step s along its N (P of attention as A of P V).
 * Accumulator layout (the PTX ISA's "Register Fragments and Shared Memory Matrix Layouts",
 * wgmma .m64nNk16 D for .f32): thread l of the warpgroup, w = l / 32, g = l % 32 / 4, t = l % 4:
 * acc[i] = D[16 w + g + 8 (i / 2 % 2)][8 (i / 4) + 2 t + i % 2], i in 0 .. N / 2 - 1 (each warp
 * holds 16 rows, in mma.m16n8's C layout repeated along N).
 * It is asynchronous: acc must not be read or written by other statements, nor the shared
 * operands overwritten, between it and the wgmma_wait that retires its group; a wgmma_fence must
 * come between the last other write of acc or of the operands (shared stores, landed
 * async_copy) and the first wgmma that reads them. The interpreter computes it at once; the SIMT
 * emulator at the wait, as the hardware may. Every thread of the warpgroup reaches it with the
 * same addresses. Printed for CUDA sm_90 through codegen/mma_cuda.h; other targets refuse it.
 * Fields: buf (acc), value (A's address, a load of a shared or local buffer), wg_b (B's), count
 * (N), trans (B MN-major).
 *
 * RX_STMT_WGMMA_FENCE / RX_STMT_WGMMA_COMMIT / RX_STMT_WGMMA_WAIT: `wgmma_fence`,
 * `wgmma_commit`, `wgmma_wait N [, acc]` (N in count, acc in buf): wgmma.fence (with
 * fence.proxy.async for the operands written by the generic proxy), wgmma.commit_group and
 * wgmma.wait_group N; the wait's acc names the accumulator that later statements read, so that
 * the CUDA printer keeps those reads after the wait. */

/* RX_STMT_FOR bound to threadIdx.x: `count` is the blocks per SM its schedule assumes (0: none),
 * printed `bind(threadIdx.x, blocks=N)`; CUDA prints it as __launch_bounds__(threads, N). */
typedef struct rx_stmt rx_stmt;
struct rx_stmt {
  rx_stmt_kind kind;
  rx_loc loc;
  rx_stmt **body; /* SEQ */
  int n;
  /* FOR: one variable; REDUCE: nvars variables */
  const rx_expr **vars; /* loop variables (RX_EXPR_VAR) */
  const rx_expr **lo;
  const rx_expr **extent;
  int nvars;
  rx_loop_kind loop_kind; /* FOR */
  rx_stmt *inner;         /* FOR body, REDUCE update, IF then */
  rx_stmt *init;          /* REDUCE init */
  rx_stmt *otherwise;     /* IF else (or NULL) */
  rx_buffer *buf;         /* STORE target, ALLOC buffer */
  rx_tx **idx;            /* STORE indices; MMA, LDMATRIX: the fragments' rows (indexed form) */
  int nidx;
  rx_tx *value;             /* STORE value, LET value, IF cond */
  rx_local *local;          /* LET */
  rx_tx *cond;              /* ASYNC_COPY: copy where it holds, zeros elsewhere (NULL: always) */
  int count;                /* ASYNC_WAIT: groups left in flight; LDMATRIX: matrices (1, 2, 4) */
  bool trans;               /* LDMATRIX: transposed; WGMMA: B MN-major */
  rx_buffer *mma_a, *mma_b; /* MMA, FRAG mma: the fragments of A and B (buf: C, D) */
  /* FRAG */
  rx_frag_op frag_op;
  rx_buffer *mma_c; /* mma: the addend C */
  rx_buffer *mem;   /* load, store: the buffer in memory (its indices: idx) */
  bool col_major;   /* load, store: the fragment's columns are contiguous in mem */
  rx_tx *wg_b;      /* WGMMA: B's address (a load of a shared buffer); A's is value */
};

/* Fusion pattern of a tensor program (passes/annotate.c computes it from the loop body) or of an
 * op (ops.def), listed once from most to least fusable; X(ENUM, name). */
#define RX_PATTERNS(X)                                                                             \
  X(UNKNOWN, "unknown")         /* not annotated yet */                                            \
  X(ELEMWISE, "elementwise")    /* one perfect nest, stores and loads at the loop point */         \
  X(BROADCAST, "broadcast")     /* stores at the point, loads at projections of it */              \
  X(INJECTIVE, "injective")     /* stores at (a permutation of) the point, loads anywhere */       \
  X(REDUCTION, "reduction")     /* reductions over some axes (row sums, staged rows) */            \
  X(OUT_FUSABLE, "out_fusable") /* matmul-like: a multiply-accumulate reduction per point */       \
  X(OPAQUE, "opaque")           /* anything else */

typedef enum rx_pattern {
#define X(e, n) RX_PATTERN_##e,
  RX_PATTERNS(X)
#undef X
      RX_PATTERN_COUNT
} rx_pattern;
const char *ir_pattern_name(rx_pattern p); /* "elementwise", ...; "?" out of range */

struct rx_tensor_fn {
  const char *name;
  rx_loc loc;
  rx_param **params; /* inputs, then outputs (`out`), scalar params anywhere */
  int nparams;
  const rx_expr **facts;
  rx_loc *fact_locs;
  int nfacts;
  rx_stmt *body;       /* a SEQ */
  rx_pattern pattern;  /* passes/annotate.c; RX_PATTERN_UNKNOWN before */
  bool bounds_checked; /* ir_tensor_fn_check_bounds found nothing (ir_module_verify runs it once
                          per program: passes that rewrite a program make a new one or keep what
                          the check saw in bounds) */
};

/* A declaration of an external library function or runtime builtin. Destination-passing like a
 * tensor program (its `out` parameters are allocated by the caller), or, with `-> SINFO`
 * (`ret`), returning its result: the callee makes it (a runtime object, a view of its own
 * buffers, tensors whose shapes only it knows; match_cast then gives them shapes). A returning
 * extern has no `out` parameters. */
/* The runtime builtin that large matmuls are dispatched to (passes/dispatch.c;
 * runtime/cuda/cublaslt.c runs it, interp/graph_interp.c computes it on the host):
 * (a: T[..., m, k], b: T[k, n] | T[n, k] (trans_b) | T[..., k, n] | T[..., n, k], trans_b:
 * Prim(i64)) -> T[..., m, n], the matmul of a and b (b transposed when trans_b is 1). */
#define RX_DISPATCH_CUBLASLT_MATMUL "rx_cublaslt_matmul"

struct rx_extern_fn {
  const char *name;
  rx_loc loc;
  rx_param **params;
  int nparams;
  const rx_sinfo *ret; /* `-> SINFO`: returns its result; NULL: destination-passing */
  bool impure;         /* `impure extern_fn`: has side effects, not allowed in dataflow blocks */
};

/* ------------------------------------------------------------------------------------------
 * the module
 * ------------------------------------------------------------------------------------------ */
typedef enum rx_item_kind { RX_ITEM_GRAPH, RX_ITEM_TENSOR, RX_ITEM_EXTERN } rx_item_kind;
typedef struct rx_item {
  rx_item_kind kind;
  void *fn; /* rx_graph_fn*, rx_tensor_fn*, rx_extern_fn* */
} rx_item;

/* A weight (ir/weights.c): a tensor the artifact stores (section weights.safetensors, or a side
 * file) and the runtime uploads once per device. A graph parameter of the same name whose struct
 * info is exactly the weight's dtype and constant shape is bound to it (ir_param_weight). */
/* The ranks safetensors files hold as relaxc reads them (RX_ST_MAX_NDIM), the runtime's too. */
#define RX_WEIGHT_MAX_NDIM 16
typedef struct rx_weight {
  const char *name;     /* interned */
  rx_dtype dtype;       /* as stored */
  int ndim;             /* 0..RX_WEIGHT_MAX_NDIM */
  const int64_t *shape; /* ndim dims (arena) */
  rx_dtype src_dtype;   /* dtype of src: dtype, or f32/f16/bf16 when dtype is one of them */
  const void *src;      /* row-major source elements; not owned (rx_module_on_free) */
  uint64_t bytes;       /* stored bytes: elements * dtype size */
} rx_weight;
typedef struct rx_module_cleanup {
  void (*fn)(void *ctx);
  void *ctx;
} rx_module_cleanup;

/* A named blob the artifact carries as a section of its own, for the runtime: what `relaxc
 * generate` needs of an LLM (llm.json, tokenizer.json). The bytes are the module's (arena). */
typedef struct rx_section {
  const char *name; /* the artifact section's name (at most 63 bytes, printable, no '/') */
  const uint8_t *data;
  size_t size;
} rx_section;
/* Adds (or replaces) section name with a copy of data; an invalid name is an error naming it. */
rx_status ir_module_add_section(rx_module *m, const char *name, const void *data, size_t size);
size_t ir_module_section_count(const rx_module *m);
const rx_section *ir_module_section_at(const rx_module *m, size_t i); /* NULL past the end */

struct rx_module {
  rx_arena arena;
  rx_expr_ctx *ctx;
  RX_VEC(rx_item) items;              /* top-level definitions in source order */
  RX_VEC(rx_source *) sources;        /* owned copies of parsed texts (arena) */
  RX_VEC(rx_weight) weights;          /* the weight table, in order of addition (ir/weights.c) */
  rx_ptrmap weight_index;             /* interned name -> index in weights */
  RX_VEC(rx_module_cleanup) cleanups; /* rx_module_on_free, run last first by rx_module_free */
  RX_VEC(rx_section) sections;        /* blobs the artifact carries (ir/sections.c) */
  RX_VEC(rx_mesh) meshes;             /* device meshes, `mesh m = [4]` (printed first) */
  /* A cache of ir_module_graph_fn & co. (ir/module.c, find_item), so that n lookups take O(n),
   * not O(n * items): per item kind, interned name -> index into items, for items[0..indexed).
   * Appending items needs nothing; a pass that renames, removes or reorders items calls
   * ir_module_items_changed (a shrunk list or a changed last indexed item is caught anyway). */
  rx_ptrmap item_index[3];
  size_t item_indexed;
  const void *item_last; /* items[item_indexed - 1].fn when indexed */
  /* The ops its text and its calls may name (see ir_op_registry above); NULL: a module made by
   * ir_module_new without one, whose parser reports any op call as an error. */
  const ir_op_registry *ops;
};

/* A module whose op calls are looked up in ops (NULL: none may be named). ir/ makes no module
 * itself: the public rx_module_new (ops/emit.c, on the ops floor) makes every module, with the
 * op library's registry. */
rx_module *ir_module_new(const ir_op_registry *ops);
/* = ir_module_new(the registry of ops/ops.def); defined in ops/emit.c, declared here as in
 * relaxc/compiler.h for the users of the module (ir/ itself never calls it). */
RX_API rx_module *rx_module_new(void);
RX_API void rx_module_free(rx_module *m);
const char *ir_module_intern(rx_module *m, const char *s, size_t n);
void *ir_module_alloc(rx_module *m, size_t n); /* zeroed arena memory */
rx_graph_fn *ir_module_graph_fn(rx_module *m, const char *name);
rx_tensor_fn *ir_module_tensor_fn(rx_module *m, const char *name);
rx_extern_fn *ir_module_extern_fn(rx_module *m, const char *name);
/* The mesh named name (interned), or NULL. */
const rx_mesh *ir_module_mesh(const rx_module *m, const char *name);
/* Drops the lookup cache of the functions above: after renaming, removing or reordering items. */
void ir_module_items_changed(rx_module *m);

/* ---- weights (ir/weights.c; the public face in relaxc/compiler.h) ---- */
/* Adds a weight stored as dtype with the given shape, from row-major source elements of
 * src_dtype (f32, f16 and bf16 convert among themselves when the artifact is written, rounding
 * to nearest even; other dtypes must match). src is not copied: it must live until the module is
 * freed. Errors (a status naming the weight): no name, a name taken or reserved, an unknown or
 * unconvertible dtype, a rank over RX_WEIGHT_MAX_NDIM, a negative or overflowing shape, NULL
 * src for a non-empty tensor. */
RX_API rx_status rx_module_add_weight(rx_module *m, const char *name, rx_dtype dtype, int ndim,
                                      const int64_t *shape, rx_dtype src_dtype, const void *src);
/* Calls fn(ctx) when m is freed (after the last use of the weights' sources), last added first. */
RX_API void rx_module_on_free(rx_module *m, void (*fn)(void *ctx), void *ctx);
RX_API size_t rx_module_weight_count(const rx_module *m);
const rx_weight *ir_module_weight_at(const rx_module *m, size_t i);      /* NULL past the end */
const rx_weight *ir_module_weight(const rx_module *m, const char *name); /* NULL: none */
bool ir_weight_converts(rx_dtype from, rx_dtype to); /* may a source of `from` be stored as `to` */
/* Does struct info s describe w exactly (a tensor of its dtype, rank and constant dims)? */
bool ir_weight_fits(const rx_weight *w, const rx_sinfo *s);
/* The weight a graph parameter is bound to (same name, ir_weight_fits), or NULL. */
const rx_weight *ir_param_weight(const rx_module *m, const rx_var *param);
void ir_weight_sinfo_text(rx_strbuf *out, const rx_weight *w); /* "f16[4096, 11008]" */
/* Runs the rx_module_on_free callbacks and frees the table (rx_module_free calls it). */
void ir_module_weights_free(rx_module *m);

/* ---- node constructors (arena; sinfo left NULL for normalization) ---- */
rx_node *ir_node_var(rx_module *m, rx_var *v, rx_loc loc);
rx_node *ir_node_int(rx_module *m, rx_dtype dtype, const rx_expr *value, rx_loc loc);
rx_node *ir_node_float(rx_module *m, rx_dtype dtype, double v, rx_loc loc);
rx_node *ir_node_new(rx_module *m, rx_node_kind kind, rx_loc loc); /* fill the fields yourself */
rx_var *ir_var_new(rx_module *m, const char *name, const rx_sinfo *sinfo, rx_loc loc);

/* ---- constants (ir/consts.c) ---- */
/* The first count elements of tensor constant n (RX_NODE_CONST) in its dtype's storage, as the
 * graph interpreter evaluates it (floats rounded through f32, integers truncated to their width),
 * into out (count * element size bytes; elements past the constant's values are left alone). The
 * one conversion of constants: the host program's weights (passes/lower_host.c) use it too. */
void ir_const_bytes(const rx_node *n, void *out, size_t count);
/* One scalar of dtype dt (a float's value f, an integer's or bool's i) in its storage, written
 * into the 8 bytes of storage (zeroed first). */
void ir_scalar_bytes(rx_dtype dt, double f, int64_t i, void *storage);

/* Every graph variable a node reads (nested if branches included), appended to out in
 * evaluation order, with repeats. */
typedef RX_VEC(const rx_var *) rx_varvec;
void ir_node_uses(const rx_node *n, rx_varvec *out);
/* The number of buffers a call_tensor written `inplace=` writes in place (its first outputs). */
int ir_inplace_targets(const rx_node *n);

/* ---- the graph builder (the public rx_builder of relaxc/compiler.h, ir/builder.c): the steps
 * rx_emit_op (ops/emit.c, on the ops floor: it deduces with the op library) shares with the
 * other emitters ---- */
typedef struct rx_builder rx_builder;
rx_module *ir_builder_module(const rx_builder *b);
rx_analyzer *ir_builder_analyzer(const rx_builder *b); /* the facts of the function so far */
/* Arguments must be present, carry struct info, and use only this function's variables;
 * messages start "in 'FN': WHAT: ". */
rx_status ir_builder_check_args(rx_builder *b, const char *what, rx_node *const *args, int n);
/* name (checked: given, not a keyword, not taken), or a fresh name from hint when name is NULL,
 * interned into *out. */
rx_status ir_builder_pick_name(rx_builder *b, const char *name, const char *hint, const char **out);
/* A node of kind with a copy of args in the arena. */
rx_node *ir_builder_call_node(rx_builder *b, rx_node_kind kind, rx_node *const *args, int nargs);
/* Appends `name = value` (name from ir_builder_pick_name) with struct info sinfo to the open
 * block; cast: a match_cast's target, or NULL. */
rx_var *ir_builder_bind(rx_builder *b, const char *name, rx_node *value, const rx_sinfo *sinfo,
                        const rx_sinfo *cast);
/* The end of a public entry point that reported to a local rx_diag: copies its text and counts
 * into user (when given) and frees it; NULL when ok and no error was reported, else an
 * RX_ERR_INVALID status carrying the rendered diagnostics. */
rx_status ir_diag_status(rx_diag *local, rx_diag *user, bool ok);

/* ---- tensor-program expression constructors: type-check loosely, fold integer subtrees into
 * RX_TX_SYM. They never fail; the verifier reports type errors. ---- */
rx_tx *ir_tx_int(rx_module *m, int64_t v, rx_dtype dtype, bool weak, rx_loc loc);
rx_tx *ir_tx_float(rx_module *m, double v, rx_dtype dtype, bool weak, rx_loc loc);
rx_tx *ir_tx_sym(rx_module *m, const rx_expr *e, rx_loc loc);
rx_tx *ir_tx_local(rx_module *m, rx_local *l, rx_loc loc);
rx_tx *ir_tx_load(rx_module *m, rx_buffer *b, rx_tx **idx, int n, rx_loc loc);
rx_tx *ir_tx_binary(rx_module *m, rx_binop op, rx_tx *a, rx_tx *b, rx_loc loc);
rx_tx *ir_tx_neg(rx_module *m, rx_tx *a, rx_loc loc);
rx_tx *ir_tx_not(rx_module *m, rx_tx *a, rx_loc loc);
rx_tx *ir_tx_select(rx_module *m, rx_tx *c, rx_tx *a, rx_tx *b, rx_loc loc);
rx_tx *ir_tx_cast(rx_module *m, rx_dtype to, rx_tx *a, rx_loc loc);
rx_tx *ir_tx_call(rx_module *m, rx_intrinsic f, rx_tx **args, int n, rx_loc loc);
/* RX_TX_HAS_FRAG of test (ab ... kk unused by RX_TEST_ASYNC_COPY) */
rx_tx *ir_tx_has_frag(rx_module *m, rx_target_test test, rx_dtype ab, rx_dtype acc, int mm, int nn,
                      int kk, rx_loc loc);
rx_stmt *ir_stmt_new(rx_module *m, rx_stmt_kind kind, rx_loc loc);

/* s without the SEQs of one statement around it. */
const rx_stmt *ir_stmt_unwrap(const rx_stmt *s);
/* Peels a perfect nest of serial loops from s (SEQs of one statement unwrapped between them):
 * at most max FOR statements, outermost first, into loops; *out_inner is the innermost loop's
 * body as written (s unwrapped when there is no loop). Returns the number of loops. The one
 * nest peeler of the loop-level passes (annotate, the schedule rules). */
int ir_stmt_peel_serial(const rx_stmt *s, int max, const rx_stmt **loops,
                        const rx_stmt **out_inner);

/* ------------------------------------------------------------------------------------------
 * text format, normalization, verification
 * ------------------------------------------------------------------------------------------ */
/* Parses text (named `name` in diagnostics) into m, adding its definitions. Syntax errors and
 * unresolved names are reported to diag; returns false when any error was reported. Does not
 * deduce struct info: call ops_module_normalize afterwards. */
bool ir_parse_module(rx_module *m, const char *name, const char *text, size_t len, rx_diag *diag);

/* Forward shape deduction over every graph function (struct info of every node, binding and
 * function result), checks of annotations, call_tensor/call_extern arguments against the callee
 * parameters, and match_cast. Reports errors (and fallback warnings) to diag; returns false
 * on any error. Implemented in ops/normalize.c with the op deductions; declared here so every
 * user of the module reaches it (ir/ itself never calls it: it is on the floor above). */
bool ops_module_normalize(rx_module *m, rx_diag *diag);

/* Structural checks (ir/verify.c): names defined before use, symbolic variables defined by a
 * parameter (or match_cast / loop / scalar param) before use, dataflow blocks pure, struct info
 * consistent, tensor-program types and buffer ranks. Returns false on any error. */
bool ir_module_verify(rx_module *m, rx_diag *diag);
/* Accesses of fn provably outside their buffer for every value of the loop ranges and facts
 * (ir/bounds.c; ir_module_verify runs it once on each tensor program that verifies, see
 * rx_tensor_fn.bounds_checked): reported to diag as errors; returns how many. */
int ir_tensor_fn_check_bounds(rx_module *m, const rx_tensor_fn *fn, rx_diag *diag);

/* The whole module as text (ir/printer.c); parses back to the same module. */
void ir_module_print(rx_strbuf *out, const rx_module *m);
void ir_tx_print(rx_strbuf *out, const rx_tx *e);

#endif
