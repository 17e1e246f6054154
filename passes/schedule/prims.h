/* Schedule primitives on tensor programs (private to passes/schedule/).
 *
 * The primitives build NEW statement trees in the module's arena; the original program is never
 * modified. A schedule state (rx_sctx) carries the module, the target, an analyzer loaded with
 * the program's facts (and `v >= 0` for every symbolic variable), the set of names already used
 * in the program (so fresh loop variables, locals and buffers never clash) and a location for
 * the built nodes.
 *
 * Primitives:
 *   rewrite      deep copy of a statement or expression with loop variables substituted by
 *                symbolic expressions and loads optionally redirected (the base of reorder,
 *                split, fuse, bind, inline and cache: each is a substitution of loop variables)
 *   split        extent -> (outer extent = ceil(extent / factor), guard `outer*f + inner <
 *                extent` or NULL when the analyzer proves the split exact)
 *   fuse         variables v_0..v_k with extents e_0..e_k -> one variable f and the expressions
 *                v_i = (f // prod(e_{i+1..k})) % e_i
 *   xreduce      cross-thread reduction of a per-thread value over a block: subgroup reduction
 *                + a shared array across subgroups, or a shared-memory tree with barriers when
 *                the target has no fixed subgroup size; every thread gets the total.
 * Loop building (for_, bind) and cache allocation (alloc) are small constructors below. */
#ifndef RX_SCHED_PRIMS_H
#define RX_SCHED_PRIMS_H

#include "../../ir/ir.h"
#include "../../targets/target.h"

#define RX_MAX_IDX 8 /* most indices of an access the rules build */

typedef struct rx_sctx {
  rx_module *m;
  rx_expr_ctx *cx;
  const rx_target *t;
  rx_analyzer *an;
  rx_diag *diag;
  const rx_tensor_fn *f;
  rx_ptrvec names; /* interned names in use */
  rx_loc loc;
} rx_sctx;

void sched_sctx_init(rx_sctx *s, rx_module *m, const rx_tensor_fn *f, const rx_target *t,
                     rx_diag *diag);
void sched_sctx_free(rx_sctx *s);

/* A name not used in the program nor handed out before: base, base_1, base_2... */
const rx_expr *sched_fresh_var(rx_sctx *s, const char *base);

/* ---- rewriting ---- */
typedef struct rx_rewrite rx_rewrite;
/* Called on every LOAD after its indices were rewritten; returns the replacement (or the load). */
typedef rx_tx *(*rx_load_hook)(rx_rewrite *rw, rx_tx *load);
struct rx_rewrite {
  rx_sctx *s;
  const rx_expr **vars, **repl; /* simultaneous substitution of variables */
  int n;
  rx_load_hook hook; /* may be NULL */
  void *ud;
};
rx_tx *sched_rewrite_tx(rx_rewrite *rw, const rx_tx *e);
rx_stmt *sched_rewrite_stmt(rx_rewrite *rw, const rx_stmt *st);
/* One-variable substitution shortcut. */
rx_stmt *sched_subst1(rx_sctx *s, const rx_stmt *st, const rx_expr *var, const rx_expr *by);
rx_tx *sched_subst1_tx(rx_sctx *s, const rx_tx *e, const rx_expr *var, const rx_expr *by);

/* ---- constructors ---- */
typedef RX_VEC(rx_stmt *) rx_stmtvec;
rx_stmt *sched_seq(rx_sctx *s, rx_stmtvec *v); /* takes the statements; frees v's array */
rx_stmt *sched_seq1(rx_sctx *s, rx_stmt *a);
rx_stmt *sched_for(rx_sctx *s, const rx_expr *var, const rx_expr *extent, rx_loop_kind k,
                   rx_stmt *body);
rx_stmt *sched_let(rx_sctx *s, rx_local *l, rx_tx *v);
rx_local *sched_local(rx_sctx *s, const char *base, rx_dtype t);
rx_stmt *sched_if(rx_sctx *s, rx_tx *cond, rx_stmt *then, rx_stmt *otherwise);
rx_stmt *sched_barrier(rx_sctx *s);
/* A new buffer with a constant shape, and its alloc statement in *out_alloc. */
rx_buffer *sched_alloc(rx_sctx *s, const char *base, rx_dtype t, rx_scope scope,
                       const int64_t *shape, int ndim, rx_stmt **out_alloc);
rx_tx *sched_sym(rx_sctx *s, const rx_expr *e);  /* an integer (index) expression */
rx_tx *sched_cond(rx_sctx *s, const rx_expr *e); /* a condition (bool) */
rx_tx *sched_load(rx_sctx *s, rx_buffer *b, const rx_expr *const *idx, int n);
rx_stmt *sched_store_e(rx_sctx *s, rx_buffer *b, const rx_expr *const *idx, int n, rx_tx *v);
/* A statement wrapped in `if cond` unless cond is NULL or provably true. */
rx_stmt *sched_guard(rx_sctx *s, const rx_expr *cond, rx_stmt *body);

/* ---- primitives ---- */
/* Splits extent by a constant factor: *out_outer = ceil(extent / factor); returns the guard
 * condition `outer * factor + inner < extent` (outer/inner given as expressions), or NULL when
 * the analyzer proves it for every point (extent divisible by factor, or bounds). */
const rx_expr *sched_split(rx_sctx *s, const rx_expr *extent, int64_t factor, const rx_expr *outer,
                           const rx_expr *inner, const rx_expr **out_outer_extent);
/* Fuses n variables (outermost first) with the given extents into fused: fills repl[i] and
 * returns the fused extent (the product). */
const rx_expr *sched_fuse(rx_sctx *s, const rx_expr *const *extents, int n, const rx_expr *fused,
                          const rx_expr **repl);

typedef enum rx_combiner { RX_COMB_SUM, RX_COMB_MAX, RX_COMB_MIN } rx_combiner;
rx_tx *sched_combine(rx_sctx *s, rx_combiner c, rx_tx *a, rx_tx *b);
/* The identity of c in dtype t; false when there is none we can write (integer max/min). */
bool sched_identity(rx_sctx *s, rx_combiner c, rx_dtype t, rx_tx **out);
/* Whether xreduce uses subgroup operations for a block of `threads` threads on s->t. */
bool sched_use_subgroups(const rx_sctx *s, int threads);
/* Cross-thread reduction of val over the `threads` threads of the block (thread index tx, all
 * threads reach this code): appends the statements to out and returns an expression (a local)
 * holding the total in every thread. */
rx_tx *sched_xreduce(rx_sctx *s, rx_stmtvec *out, rx_tx *val, rx_combiner c, rx_dtype t,
                     int threads, const rx_expr *tx);

/* Whether e proves true under the analyzer's facts (with ranges of the enclosing loops that
 * the caller bound). */
bool sched_proves(rx_sctx *s, const rx_expr *cond);

#endif
