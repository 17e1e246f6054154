/* codegen internals: the lowered kernel (lower.c), the C-like printer base (cprinter.c) and the
 * per-language tables and hooks (cuda.c, glsl.c, metal.c). Private to codegen/.
 *
 * Flow, per scheduled program (codegen.c):
 *   cg_lower      split host and device: one cg_kernel per kernel root, with its condition,
 *                 grid, block, the buffers and symbolic values it uses (the ABI), its shared
 *                 memory and its index width (32-bit when the analyzer proves it enough);
 *   cg_print      the kernel's source in one language: the base walks the statements and
 *                 expressions; the language's cg_lang table names types, builtins and
 *                 intrinsics, and its hooks write what differs in shape (preamble, signature,
 *                 subgroup reductions). */
#ifndef RX_CG_INT_H
#define RX_CG_INT_H

#include "codegen.h"

/* ---- lowering ---------------------------------------------------------------------------- */

typedef struct cg_shared {
  rx_buffer *buf;
  const char *name; /* printed name, unique in the kernel */
  int64_t elems;
  int64_t offset; /* in the dynamic shared memory (uses_wgmma) or the pool (shared_pool) */
} cg_shared;

typedef struct cg_kernel {
  rx_module *m;
  const rx_tensor_fn *fn;
  const rx_target *t;
  rx_kernel *k;           /* the public description being filled */
  rx_stmt *body;          /* the statements run by every thread of a block */
  const rx_expr *bvar[3]; /* blockIdx.{x,y,z} loop variables (NULL: axis unused) */
  const rx_expr *blo[3];
  cg_shared *shared; /* shared allocations, hoisted to kernel scope */
  int nshared;
  int nthreads;   /* block[0] * block[1] * block[2] */
  int min_blocks; /* blocks per SM the schedule assumes (the threadIdx.x loop's count; 0: none) */
  bool uses_subgroup;
  bool uses_mma;               /* RX_STMT_MMA: subgroups of 32 and mma.sync m16n8k16 */
  bool mma_ab[RX_DTYPE_COUNT]; /* the dtypes of its fragments of A and B */
  bool uses_async;             /* async_copy, async_commit/wait, ldmatrix (CUDA sm_80+) */
  bool uses_frag;              /* RX_STMT_FRAG: subgroup matrix fragments (checked by lower.c) */
  bool uses_wgmma; /* RX_STMT_WGMMA*: warpgroups; shared buffers in dynamic shared memory, each
                     at a 1024-byte boundary (lower.c), up to the opt-in limit */
  bool wgmma_ab[RX_DTYPE_COUNT]; /* the dtypes of its wgmma operands */
  bool shared_pool; /* CUDA, static shared memory with a buffer marked reuse (ir.h): the buffers
                       in one array at the offsets of lower.c */
  rx_loc loc;       /* of the kernel root */
} cg_kernel;

/* Splits the scheduled program f into kernels (filled into cg_kernel array *out, count *n).
 * Reports errors to diag and returns false when f is not in the scheduled shape or breaks a
 * limit of t. */
bool cg_lower(rx_module *m, const rx_tensor_fn *f, const rx_target *t, rx_diag *diag,
              cg_kernel **out, int *n);

/* The analyzer with the facts every kernel of f may use: the program's facts, buffer dims
 * non-negative, every symbolic value an int32 (the ABI passes them so; the host checks). */
rx_analyzer *cg_analyzer(rx_module *m, const rx_tensor_fn *f);
/* Linear row-major offset of buf[idx] as a symbolic expression, or NULL when an index is not
 * symbolic. Simplified with an. */
const rx_expr *cg_flat_index(rx_module *m, rx_analyzer *an, const rx_buffer *buf, rx_tx **idx,
                             int n);
/* Binds the range of a loop variable (FOR) in an. */
void cg_bind_loop(rx_analyzer *an, const rx_stmt *s);
/* Index of the parameter that owns buf, or -1 (an allocation). */
int cg_param_of(const rx_tensor_fn *f, const rx_buffer *b);

/* ---- printing ---------------------------------------------------------------------------- */

typedef struct cg_printer cg_printer;

/* The operands of a fragment's ALLOC or frag statement as printed (cprinter.c, pfrag) */
typedef struct cg_frag_ops {
  const char *frag;      /* the fragment (D of mma) */
  const char *a, *b, *c; /* mma */
  const char *mem;       /* load, store: the array in memory (a kernel argument or shared array) */
  const char *off;       /* load, store: the flat index of element (0, 0) in mem */
  const char *stride;    /* load, store: the stride, in the index type */
  const char *value;     /* fill: the value, in the fragment's dtype */
  const char *type;      /* the fragment's element type in the language */
  int rows, cols;        /* the fragment's shape */
} cg_frag_ops;

/* What a language changes; the base does the rest. */
typedef struct cg_lang {
  rx_lang lang;
  const char *types[RX_DTYPE_COUNT];   /* compute types (also shared/local arrays) */
  const char *storage[RX_DTYPE_COUNT]; /* global buffer element types (NULL: same) */
  const char *idx32, *idx64;           /* index types */
  const char *i64_suffix;              /* suffix of 64-bit integer literals */
  const char *u64_suffix;              /* ... of unsigned 64-bit ones (u32's is "u" in all) */
  const char *f32_suffix;              /* "f" or "" */
  const char *f64_suffix;              /* "" or "lf" (GLSL: a bare literal is a float) */
  bool c_casts;                        /* (T)(x) rather than T(x) */
  /* an i32 value becomes an i64 through the helper rx_i64 (the 64-bit integer packed from the
   * value and its sign word), not a conversion: lavapipe (Mesa 22-24) compares a converted
   * int64_t(x) with a constant wrongly (int64_t(x) <= 2l is false for every x; ONNX's
   * test_tril_one_row_neg) */
  bool i64_by_halves;
  const char *let_prefix;    /* "const " or "" */
  const char *thread_idx[3]; /* expressions of the thread index per axis (unsigned) */
  const char *block_idx[3];
  const char *barrier;   /* statement text */
  const char *unroll;    /* line before an unrolled loop, or NULL */
  const char *rolled;    /* line before a loop kept rolled (RX_LOOP_ROLLED), or NULL */
  const char *fn_prefix; /* prefix of helper function definitions */
  /* run-time checks (ir.h, RX_INTRIN_CHECK) print as rx_check(ok, v, code[, error buffer]):
   * the error buffer's parameter type in that helper ("int*"), or NULL where the helper reaches
   * the buffer as a global (GLSL) */
  const char *check_buf;
  /* f32 math per intrinsic (NULL: handled by the base: sigmoid, erf where missing, asin through
   * the two-argument atan where the language's asin is too coarse) */
  const char *math[RX_INTRIN_COUNT];
  /* f64 math per intrinsic (NULL: computed in f32 and widened; sigmoid uses math_f64[EXP]) */
  const char *math_f64[RX_INTRIN_COUNT];
  const char *int_abs, *i64_abs; /* integer abs */
  const char *int_min, *int_max; /* integer min/max */
  bool has_erf;                  /* math[ERF] exists */
  /* f16/bf16: to and from float ("%s" formats); arith_via_f32: + - * / and comparisons are
   * done in float and rounded (no operators on the type) */
  const char *to_f32[RX_DTYPE_COUNT];
  const char *from_f32[RX_DTYPE_COUNT];
  bool arith_via_f32[RX_DTYPE_COUNT];
  /* how a non-finite float literal is written ("%s" gets the 32-bit pattern, e.g. 0x7f800000) */
  const char *f32_bits;
  /* with 64-bit indices: how an array subscript is converted ("%s"), NULL: as is (GLSL only
   * indexes with 32-bit integers: uint(...), so at most 2^32 elements per buffer there) */
  const char *subscript64;
  /* vector access (cprinter.c, "vectorized loops"): raw 32-bit words move between memory and
   * registers, 1, 2 or 4 at a time (the word types per count: index 0, 1, 2 for 1, 2, 4 words);
   * an element of 32 bits or less converts from a word holding its bits in the low bits
   * (from_bits, "%s" the word) and to such a word, zero-extended (to_bits). A dtype without
   * both is never vectorized. */
  const char *vec_words[3];
  const char *from_bits[RX_DTYPE_COUNT];
  const char *to_bits[RX_DTYPE_COUNT];
  /* names a user identifier must not take (NULL-terminated): the language's keywords and
   * reserved words, and the library names a kernel sees (types, builtins, math functions);
   * and reserved prefixes ("gl_"). cg_ident mangles such names (cprinter.c). */
  const char *const *reserved;
  const char *const
      *reserved_shared; /* a list shared by several languages (cg_cxx_reserved), or NULL */
  const char *const *reserved_prefixes;

  /* hooks */
  /* everything before the body: header comment written by the base, then preamble, helper
   * functions (p->helpers), shared declarations (GLSL at file scope), the signature, and the
   * prologue (scalar values, block variables) */
  void (*open_kernel)(cg_printer *p, rx_strbuf *o);
  /* a shared-memory declaration at kernel scope (CUDA, MSL); GLSL declares them in open */
  void (*shared_decl)(cg_printer *p, rx_strbuf *o, const cg_shared *s);
  /* the matrix-unit statements (ir.h: RX_STMT_MMA, ASYNC_COPY, ASYNC_COMMIT, ASYNC_WAIT,
   * LDMATRIX); NULL: the language has none */
  void (*mma)(cg_printer *p, rx_strbuf *o, const rx_stmt *s);
  /* subgroup matrix fragments (ir.h, RX_STMT_FRAG): s is a fragment's ALLOC (its declaration)
   * or a frag statement, with its operands printed by the base; NULL: the language has none */
  void (*frag)(cg_printer *p, rx_strbuf *o, const rx_stmt *s, const cg_frag_ops *ops);
  /* the subgroup operation op of x (printed operand) of dtype t into the expression text: a
   * reduction, or shuffle_xor with its lane mask (printed, an integer; NULL for a reduction) */
  void (*subgroup)(cg_printer *p, rx_strbuf *o, rx_intrinsic op, rx_dtype t, const char *x,
                   const char *mask);
  /* a symbolic value as used in index arithmetic */
  void (*scalar_ref)(cg_printer *p, rx_strbuf *o, const char *name);
  /* the vector of `words` 32-bit words (1, 2 or 4) at vector index `index` (printed, in the
   * index type) of kernel buffer argument a, as an lvalue when store, else an rvalue */
  void (*vector_ref)(cg_printer *p, rx_strbuf *o, const rx_karg *a, int words, const char *index,
                     bool store);
  /* the same for shared buffer b (its array starts at a 16-byte boundary); NULL where a shared
   * array cannot be read as words (GLSL): its accesses stay scalar */
  void (*shared_vector_ref)(cg_printer *p, rx_strbuf *o, const rx_buffer *b, int words,
                            const char *index, bool store);
} cg_lang;

typedef struct cg_vec_loop cg_vec_loop; /* cprinter.c */

struct cg_printer {
  const cg_lang *L;
  cg_kernel *ck;
  rx_module *m;
  rx_diag *diag;
  rx_analyzer *an;
  bool failed;
  int indent;
  rx_strbuf helpers;         /* helper functions, emitted before the kernel */
  const char *idx;           /* index type name */
  bool need[16];             /* helper functions and extensions already emitted/needed */
  bool uses[RX_DTYPE_COUNT]; /* dtypes appearing in the kernel */
  cg_vec_loop *vloop; /* the vectorized loop being printed and its vector accesses, or NULL */
  const cg_vec_loop *vopaque; /* the same while its vector loads and stores print, or NULL */
  int nlane_arrays;           /* lane arrays named so far in the kernel: rx_v0, rx_v1, ... */
  unsigned char *views;       /* per kernel argument: bit w set when a view of 2^w words is used */
};

enum { /* cg_printer.need */
       CG_NEED_ERF,
       CG_NEED_ASIN,
       CG_NEED_I64_HALVES,
       CG_NEED_FLOORDIV_IDX,
       CG_NEED_FLOORDIV_I32,
       CG_NEED_FLOORDIV_I64,
       CG_NEED_SG_SUM,
       CG_NEED_SG_MAX,
       CG_NEED_SG_MIN,
       CG_NEED_SUBGROUP,
       CG_NEED_SHUFFLE, /* GLSL: subgroupShuffleXor (GL_KHR_shader_subgroup_shuffle) */
       CG_NEED_UNROLL,  /* an unrolled loop was printed (GLSL: GL_EXT_control_flow_attributes) */
       CG_NEED_COOPMAT, /* GLSL: fragments as cooperative matrices (GL_NV_cooperative_matrix) */
       CG_NEED_CHECK,   /* the helper rx_check of run-time checks */
};

extern const cg_lang cg_cuda, cg_glsl, cg_metal;
/* The table of each RX_LANG_x: cg_lang_of's table derives from RX_TARGET_KINDS through these, so
 * a language without a table does not compile. */
#define CG_LANG_CUDA cg_cuda
#define CG_LANG_GLSL cg_glsl
#define CG_LANG_MSL  cg_metal

/* Prints kernel ck in language L into ck->k->source. Returns false after reporting to diag. */
bool cg_print(const cg_lang *L, cg_kernel *ck, rx_diag *diag);

/* The language table of l. */
const cg_lang *cg_lang_of(rx_lang l);

/* The identifier for a user-given name in L (one-to-one, deterministic, never a reserved word
 * of L nor a name the printers generate; docs/kernel-abi.md "Names"); allocated in a when it
 * differs from name. */
const char *cg_ident(const cg_lang *L, rx_arena *a, const char *name);
/* name is one of L's reserved words or starts with one of its reserved prefixes. */
bool cg_is_reserved(const cg_lang *L, const char *name);
/* The C++ keywords (C++20, ISO C++ [lex.key]) with the alternative tokens ([lex.digraph]) and the
 * C library names a kernel sees: reserved in every C++-based language (CUDA C++, MSL). */
extern const char *const cg_cxx_reserved[];

/* helpers for hooks */
const char *cg_name(cg_printer *p, const char *name); /* cg_ident in p's language */
void cg_indent(cg_printer *p, rx_strbuf *o);
void cg_error(cg_printer *p, rx_loc loc, const char *fmt, ...) RX_PRINTF(3, 4);
/* The element b[idx...] as the language writes it (an lvalue: `name[flat]`). */
void cg_access(cg_printer *p, rx_strbuf *o, rx_buffer *b, rx_tx **idx, int n);
/* e printed as a value of dtype want. */
void cg_value(cg_printer *p, rx_strbuf *o, const rx_tx *e, rx_dtype want);
/* The comment at the top of every kernel (prefix: "//"). */
void cg_header_comment(cg_printer *p, rx_strbuf *o);

#endif
