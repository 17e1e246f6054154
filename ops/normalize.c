/* Normalization: A-normal form and forward shape deduction over every graph function.
 *
 * For each graph function, in dependency order (a callee without a declared result is
 * normalized before its caller): an analyzer gets `v >= 0` for every symbolic variable of the
 * parameters and the function's facts; then the body is walked in order. Nested calls move to
 * their own bindings (named after the op, unique in the function), every node gets its struct
 * info (ops by their deduce function, call_tensor/call_extern/graph calls by unifying the
 * callee's parameters with the arguments), match_cast and annotations are checked, and the
 * function result is deduced or checked against the declared one.
 *
 * A node whose deduction failed gets the `poison` struct info (an Object): uses of it deduce
 * poison silently, so one mistake gives one error, and the walk goes on to find others. */
#include "ops.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------------------------
 * a set of pointers (interned names, symbolic variables)
 * ------------------------------------------------------------------------------------------ */
typedef struct pset {
  const void **slots;
  size_t cap, count;
} pset;

static size_t pslot(const pset *s, const void *p) {
  size_t i = (size_t)(rx_hash_mix(0, (uint64_t)(uintptr_t)p) & (s->cap - 1));
  while (s->slots[i] && s->slots[i] != p) i = (i + 1) & (s->cap - 1);
  return i;
}
static bool pset_has(const pset *s, const void *p) { return s->cap && s->slots[pslot(s, p)] == p; }
static void pset_add(pset *s, const void *p) {
  if (2 * (s->count + 1) > s->cap) {
    pset old = *s;
    s->cap = s->cap ? s->cap * 2 : 64;
    s->slots = base_calloc(s->cap, sizeof *s->slots);
    s->count = 0;
    for (size_t i = 0; i < old.cap; i++)
      if (old.slots[i]) pset_add(s, old.slots[i]);
    free(old.slots);
  }
  size_t i = pslot(s, p);
  if (!s->slots[i]) {
    s->slots[i] = p;
    s->count++;
  }
}

/* ------------------------------------------------------------------------------------------
 * state
 * ------------------------------------------------------------------------------------------ */
typedef struct nmod {
  rx_module *m;
  rx_diag *diag;
  rx_graph_fn **fns; /* graph functions in source order */
  int *state;        /* per function: 0 not started, 1 in progress, 2 done */
  int nfns;
  const rx_sinfo *poison;
  bool ok;
} nmod;

typedef RX_VEC(rx_binding *) bvec;

typedef struct norm {
  nmod *nm;
  rx_module *m;
  rx_graph_fn *fn;
  rx_analyzer *an;
  pset names;            /* every name used in the function (parameters, bindings) */
  rx_ptrmap next_suffix; /* interned base -> the first k that fresh_name has not tried */
  bvec *out;             /* the bindings of the block being rebuilt */
  bool out_dataflow;
} norm;

/* A substitution of symbolic variables (callee -> caller). */
typedef struct subst {
  RX_VEC(const rx_expr *) vars;
  RX_VEC(const rx_expr *) repl;
} subst;

static void normalize_fn(nmod *nm, int idx);

static void err(norm *st, rx_loc loc, const char *fmt, ...) RX_PRINTF(3, 4);
static void err(norm *st, rx_loc loc, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  base_diag_vreport(st->nm->diag, RX_DIAG_ERROR, loc, fmt, ap);
  va_end(ap);
  st->nm->ok = false;
}

static const char *sstr(norm *st, const rx_sinfo *s) {
  rx_strbuf b = {0};
  ir_sinfo_print(&b, s);
  char *heap = base_strbuf_take(&b);
  const char *r = base_arena_strdup(&st->m->arena, heap);
  free(heap);
  return r;
}

static const char *estr(norm *st, const rx_expr *e) {
  char *heap = sym_expr_to_string(e);
  const char *r = base_arena_strdup(&st->m->arena, heap);
  free(heap);
  return r;
}

/* ------------------------------------------------------------------------------------------
 * symbolic helpers
 * ------------------------------------------------------------------------------------------ */
static rx_tribool dim_eq(norm *st, const rx_expr *a, const rx_expr *b) {
  if (a == b) return RX_TRUE;
  const rx_expr *sa = sym_analyzer_simplify(st->an, a), *sb = sym_analyzer_simplify(st->an, b);
  if (sa == sb) return RX_TRUE;
  if (sa->kind == RX_EXPR_CONST && sb->kind == RX_EXPR_CONST) return RX_FALSE;
  return sym_analyzer_prove(st->an, sym_expr_cmp(st->m->ctx, RX_EXPR_EQ, sa, sb));
}

static rx_tribool tri_and(rx_tribool a, rx_tribool b) {
  if (a == RX_FALSE || b == RX_FALSE) return RX_FALSE;
  if (a == RX_UNKNOWN || b == RX_UNKNOWN) return RX_UNKNOWN;
  return RX_TRUE;
}

/* v >= 0 for every variable of e (every symbolic variable is a size). */
static void assume_sizes_expr(norm *st, const rx_expr *e) {
  rx_ptrvec vars = {0};
  sym_expr_collect_vars(e, &vars);
  for (size_t i = 0; i < vars.len; i++)
    sym_analyzer_assume(
        st->an, sym_expr_cmp(st->m->ctx, RX_EXPR_LE, sym_expr_const(st->m->ctx, 0), vars.data[i]));
  base_ptrvec_free(&vars);
}

static void assume_sizes(norm *st, const rx_sinfo *s) {
  if (!s) return;
  if ((s->kind == RX_SINFO_TENSOR || s->kind == RX_SINFO_SHAPE) && s->shape)
    for (int i = 0; i < s->ndim; i++) assume_sizes_expr(st, s->shape[i]);
  if (s->kind == RX_SINFO_PRIM && s->value) assume_sizes_expr(st, s->value);
  if (s->kind == RX_SINFO_TUPLE)
    for (int i = 0; i < s->nfields; i++) assume_sizes(st, s->fields[i]);
}

static const rx_expr *sub_lookup(const subst *s, const rx_expr *v) {
  for (size_t i = 0; i < s->vars.len; i++)
    if (s->vars.data[i] == v) return s->repl.data[i];
  return NULL;
}
static void sub_bind(subst *s, const rx_expr *v, const rx_expr *e) {
  if (sub_lookup(s, v)) return;
  RX_VEC_PUSH(&s->vars, v);
  RX_VEC_PUSH(&s->repl, e);
}
static const rx_expr *sub_apply(norm *st, const subst *s, const rx_expr *e) {
  if (!s->vars.len) return e;
  return sym_expr_subst(st->m->ctx, e, s->vars.data, s->repl.data, s->vars.len);
}
static void sub_free(subst *s) {
  free(s->vars.data);
  free(s->repl.data);
}

static const rx_sinfo *sinfo_subst(norm *st, const subst *s, const rx_sinfo *si) {
  if (!si || !s->vars.len) return si;
  switch (si->kind) {
  case RX_SINFO_OBJECT:
    return si;
  case RX_SINFO_TENSOR:
  case RX_SINFO_SHAPE: {
    if (!si->shape) return si;
    const rx_expr **d = ir_module_alloc(st->m, sizeof *d * (size_t)(si->ndim + 1));
    for (int i = 0; i < si->ndim; i++) d[i] = sub_apply(st, s, si->shape[i]);
    return si->kind == RX_SINFO_TENSOR ? rx_sinfo_tensor(st->m, si->dtype, si->ndim, d)
                                       : rx_sinfo_shape(st->m, si->ndim, d);
  }
  case RX_SINFO_PRIM:
    return si->value ? rx_sinfo_prim(st->m, si->dtype, sub_apply(st, s, si->value)) : si;
  case RX_SINFO_TUPLE:
  case RX_SINFO_FUNC: {
    const rx_sinfo **f = ir_module_alloc(st->m, sizeof *f * (size_t)(si->nfields + 1));
    for (int i = 0; i < si->nfields; i++) f[i] = sinfo_subst(st, s, si->fields[i]);
    return si->kind == RX_SINFO_TUPLE
               ? rx_sinfo_tuple(st->m, f, si->nfields)
               : ir_sinfo_func(st->m, f, si->nfields, sinfo_subst(st, s, si->ret));
  }
  }
  return si;
}

/* Binds the callee variables that appear as whole dims (or Prim values) of want to the
 * corresponding parts of have. */
static void unify_bind(subst *s, const rx_sinfo *want, const rx_sinfo *have) {
  if (!want || !have) return;
  if ((want->kind == RX_SINFO_TENSOR || want->kind == RX_SINFO_SHAPE) && have->kind == want->kind &&
      want->shape && have->shape && want->ndim == have->ndim) {
    for (int i = 0; i < want->ndim; i++)
      if (want->shape[i]->kind == RX_EXPR_VAR) sub_bind(s, want->shape[i], have->shape[i]);
  } else if (want->kind == RX_SINFO_PRIM && have->kind == RX_SINFO_PRIM && want->value &&
             have->value && want->value->kind == RX_EXPR_VAR) {
    sub_bind(s, want->value, have->value);
  } else if (want->kind == RX_SINFO_TUPLE && have->kind == RX_SINFO_TUPLE &&
             want->nfields == have->nfields) {
    for (int i = 0; i < want->nfields; i++) unify_bind(s, want->fields[i], have->fields[i]);
  }
}

/* Is `have` provably within `want` (want may be coarser)? TRUE, FALSE (provably not) or
 * UNKNOWN. */
static rx_tribool compat(norm *st, const rx_sinfo *have, const rx_sinfo *want) {
  if (!want || want->kind == RX_SINFO_OBJECT || have == want) return RX_TRUE;
  if (!have || have->kind == RX_SINFO_OBJECT) return RX_UNKNOWN;
  if (have->kind != want->kind) return RX_FALSE;
  switch (want->kind) {
  case RX_SINFO_OBJECT:
    return RX_TRUE;
  case RX_SINFO_TENSOR:
  case RX_SINFO_SHAPE: {
    rx_tribool r = RX_TRUE;
    if (want->kind == RX_SINFO_TENSOR && want->dtype != RX_DTYPE_UNKNOWN) {
      if (have->dtype == RX_DTYPE_UNKNOWN)
        r = RX_UNKNOWN;
      else if (have->dtype != want->dtype)
        return RX_FALSE;
    }
    if (want->ndim < 0) return r;
    if (have->ndim < 0) return RX_UNKNOWN;
    if (have->ndim != want->ndim) return RX_FALSE;
    if (!want->shape) return r;
    if (!have->shape) return RX_UNKNOWN;
    for (int i = 0; i < want->ndim; i++) r = tri_and(r, dim_eq(st, have->shape[i], want->shape[i]));
    return r;
  }
  case RX_SINFO_PRIM: {
    if (want->dtype != RX_DTYPE_UNKNOWN && have->dtype != want->dtype)
      return have->dtype == RX_DTYPE_UNKNOWN ? RX_UNKNOWN : RX_FALSE;
    if (!want->value) return RX_TRUE;
    if (!have->value) return RX_UNKNOWN;
    return dim_eq(st, have->value, want->value);
  }
  case RX_SINFO_TUPLE: {
    if (have->nfields != want->nfields) return RX_FALSE;
    rx_tribool r = RX_TRUE;
    for (int i = 0; i < want->nfields; i++)
      r = tri_and(r, compat(st, have->fields[i], want->fields[i]));
    return r;
  }
  case RX_SINFO_FUNC:
    return ir_sinfo_equal(have, want) ? RX_TRUE : RX_UNKNOWN;
  }
  return RX_UNKNOWN;
}

/* The least struct info covering both (for the two branches of an `if`). */
static const rx_sinfo *join(norm *st, const rx_sinfo *a, const rx_sinfo *b) {
  if (a == st->nm->poison || b == st->nm->poison) return st->nm->poison;
  if (ir_sinfo_equal(a, b)) return a;
  if (a->kind != b->kind) return rx_sinfo_object(st->m);
  switch (a->kind) {
  case RX_SINFO_TENSOR:
  case RX_SINFO_SHAPE: {
    rx_dtype dt = a->dtype == b->dtype ? a->dtype : RX_DTYPE_UNKNOWN;
    int nd = a->ndim == b->ndim ? a->ndim : -1;
    const rx_expr *const *shape = NULL;
    if (nd >= 0 && a->shape && b->shape) {
      bool same = true;
      for (int i = 0; i < nd; i++) same = same && dim_eq(st, a->shape[i], b->shape[i]) == RX_TRUE;
      if (same) shape = a->shape;
    }
    return a->kind == RX_SINFO_TENSOR ? rx_sinfo_tensor(st->m, dt, nd, shape)
                                      : rx_sinfo_shape(st->m, nd, shape);
  }
  case RX_SINFO_PRIM:
    if (a->dtype != b->dtype) return rx_sinfo_object(st->m);
    return rx_sinfo_prim(
        st->m, a->dtype,
        a->value && b->value && dim_eq(st, a->value, b->value) == RX_TRUE ? a->value : NULL);
  case RX_SINFO_TUPLE: {
    if (a->nfields != b->nfields) return rx_sinfo_object(st->m);
    const rx_sinfo **f = ir_module_alloc(st->m, sizeof *f * (size_t)(a->nfields + 1));
    for (int i = 0; i < a->nfields; i++) f[i] = join(st, a->fields[i], b->fields[i]);
    return rx_sinfo_tuple(st->m, f, a->nfields);
  }
  default:
    return rx_sinfo_object(st->m);
  }
}

/* ------------------------------------------------------------------------------------------
 * names
 * ------------------------------------------------------------------------------------------ */
static void collect_names_seq(norm *st, const rx_seq *seq);

static void collect_names_node(norm *st, const rx_node *n) {
  if (!n) return;
  if (n->kind == RX_NODE_IF) {
    collect_names_seq(st, n->then_seq);
    collect_names_seq(st, n->else_seq);
  }
}

static void collect_names_seq(norm *st, const rx_seq *seq) {
  if (!seq) return;
  for (int b = 0; b < seq->nblocks; b++) {
    rx_block *blk = seq->blocks[b];
    for (int i = 0; i < blk->nbindings; i++) {
      pset_add(&st->names, blk->bindings[i]->var->name);
      collect_names_node(st, blk->bindings[i]->value);
    }
  }
}

/* Words that cannot name a variable in the text format. */
static bool reserved(const char *s) {
  static const char *const words[] = {
      "graph_fn",    "tensor_fn",   "extern_fn",  "impure",  "where",  "dataflow", "return",
      "if",          "else",        "out",        "for",     "in",     "reduce",   "init",
      "update",      "let",         "alloc",      "barrier", "global", "shared",   "local",
      "call_tensor", "call_extern", "match_cast", "prim",    "const",  "true",     "false",
      "any",         "inf",         "nan",        "Shape",   "Prim",   "Object",   "Func",
      "min",         "max",         "select"};
  for (size_t i = 0; i < RX_ARRAY_LEN(words); i++)
    if (strcmp(words[i], s) == 0) return true;
  rx_dtype dt;
  return ir_dtype_parse(s, strlen(s), &dt);
}

static bool name_taken(norm *st, const char *name) {
  return pset_has(&st->names, name) || reserved(name) || ir_module_graph_fn(st->m, name) ||
         ir_module_tensor_fn(st->m, name) || ir_module_extern_fn(st->m, name);
}

/* A fresh name based on base: base, base_1, base_2, ... (never a user name or keyword). */
/* Names are only ever added to st->names, so a suffix found taken stays taken: each base
 * resumes at the suffix where its last search ended (linear in the names made, not quadratic). */
static const char *fresh_name(norm *st, const char *base) {
  const char *ibase = ir_module_intern(st->m, base, strlen(base));
  const char *name = ibase;
  int k = base_ptrmap_get(&st->next_suffix, ibase);
  if (k < 1) k = 1;
  if (k > 1 || name_taken(st, name)) {
    for (;; k++) {
      char *s = base_arena_printf(&st->m->arena, "%s_%d", base, k);
      name = ir_module_intern(st->m, s, strlen(s));
      if (!name_taken(st, name)) break;
    }
    base_ptrmap_put(&st->next_suffix, ibase, k + 1);
  }
  pset_add(&st->names, name);
  return name;
}

/* ------------------------------------------------------------------------------------------
 * deduction
 * ------------------------------------------------------------------------------------------ */
static const rx_sinfo *value(norm *st, rx_node *n);
static void walk_seq(norm *st, rx_seq *seq);

static bool is_atom(const rx_node *n) {
  switch (n->kind) {
  case RX_NODE_VAR:
  case RX_NODE_PRIM:
  case RX_NODE_SHAPE:
  case RX_NODE_CONST:
    return true;
  case RX_NODE_TUPLE:
    for (int i = 0; i < n->nargs; i++)
      if (!is_atom(n->args[i])) return false;
    return true;
  default:
    return false;
  }
}

static const char *lift_base(const rx_node *n) {
  switch (n->kind) {
  case RX_NODE_CALL:
    return n->op ? n->op->name : "call";
  case RX_NODE_CALL_TENSOR:
  case RX_NODE_CALL_EXTERN:
  case RX_NODE_CALL_GRAPH:
    return n->callee ? n->callee : "call";
  case RX_NODE_GET_ITEM:
    return n->args[0]->kind == RX_NODE_VAR ? n->args[0]->var->name : "item";
  default:
    return "value";
  }
}

/* Makes n an atom: atoms (and tuples of atoms) are deduced in place; anything else gets its
 * own binding, appended to the block being rebuilt, and is replaced by its variable. */
static rx_node *atomize(norm *st, rx_node *n) {
  if (n->kind == RX_NODE_TUPLE || is_atom(n)) {
    value(st, n);
    return n;
  }
  const rx_sinfo *s = value(st, n);
  char base[64];
  const char *lb = lift_base(n);
  if (n->kind == RX_NODE_GET_ITEM)
    snprintf(base, sizeof base, "%.40s_%d", lb, n->index);
  else
    snprintf(base, sizeof base, "%.60s", lb);
  rx_var *v = ir_var_new(st->m, fresh_name(st, base), s, n->loc);
  rx_binding *b = ir_module_alloc(st->m, sizeof *b);
  b->var = v;
  b->value = n;
  b->loc = n->loc;
  RX_VEC_PUSH(st->out, b);
  rx_node *ref = ir_node_var(st->m, v, n->loc);
  ref->sinfo = s;
  return ref;
}

static bool any_poison(norm *st, const rx_node *n) {
  for (int i = 0; i < n->nargs; i++)
    if (n->args[i]->sinfo == st->nm->poison) return true;
  return false;
}

/* Is op row-wise over the leading axis: each row of its result from the same row of its first
 * operands (docs/ops.md, "Ragged tensors")? Then a ragged leading axis stays ragged. */
static bool row_wise(const rx_op *op) {
  switch (op->id) {
  case RX_OP_rms_norm:
  case RX_OP_layer_norm:
  case RX_OP_matmul:
  case RX_OP_quant_matmul:
  case RX_OP_rms_norm_matmul:
  case RX_OP_ragged_softmax:
  case RX_OP_ragged_attention:
    return true;
  default:
    return op->pattern == RX_PATTERN_ELEMWISE || op->pattern == RX_PATTERN_BROADCAST;
  }
}

/* The deduced r of call n with the ragged annotation (ir.h, rx_sinfo.ragged_by) it keeps: that
 * of an operand whose leading dim is r's, through a row-wise op; for the ragged ops, their
 * offsets operand when it is a variable (i32[nb]: nb - 1 rows). */
static const rx_sinfo *keep_ragged(norm *st, const rx_node *n, const rx_sinfo *r) {
  if (r->kind != RX_SINFO_TENSOR || !r->shape || r->ndim < 1 || r->ragged_by || !row_wise(n->op))
    return r;
  bool ragged_op = n->op->id == RX_OP_ragged_softmax || n->op->id == RX_OP_ragged_attention;
  const rx_node *ip = ragged_op ? n->args[n->nargs - 1] : NULL;
  /* a ragged op's operand ragged by other offsets than the op's own */
  for (int i = 0; ip && ip->kind == RX_NODE_VAR && i < n->nargs - 1; i++) {
    const rx_sinfo *a = n->args[i]->sinfo;
    if (a && a->kind == RX_SINFO_TENSOR && a->ragged_by && a->ragged_by != ip->var->name) {
      err(st, n->loc, "%s: argument %d is ragged by '%s', but the offsets given are '%s'",
          n->op->name, i, a->ragged_by, ip->var->name);
      st->nm->ok = false;
      return st->nm->poison;
    }
  }
  for (int i = 0; i < n->nargs; i++) {
    const rx_sinfo *a = n->args[i]->sinfo;
    if (a && a->kind == RX_SINFO_TENSOR && a->ragged_by && a->shape && a->ndim >= 1 &&
        a->shape[0] == r->shape[0])
      return ir_sinfo_ragged(st->m, r, a->ragged_by, a->ragged_rows);
  }
  if (!ip || ip->kind != RX_NODE_VAR || !ip->sinfo || !ip->sinfo->shape || ip->sinfo->ndim != 1)
    return r;
  const rx_expr *rows =
      sym_expr_sub(st->m->ctx, ip->sinfo->shape[0], sym_expr_const(st->m->ctx, 1));
  return ir_sinfo_ragged(st->m, r, ip->var->name, rows);
}

/* ---- op calls ---- */

static const rx_sinfo *call_op(norm *st, rx_node *n) {
  const rx_op *op = n->op;
  if (!op) {
    err(st, n->loc, "unknown op '%s'", n->callee ? n->callee : "?");
    return st->nm->poison;
  }
  if (n->nargs < op->min_args || (op->max_args >= 0 && n->nargs > op->max_args)) {
    if (op->min_args == op->max_args)
      err(st, n->loc, "%s expects %d argument%s, got %d", op->name, op->min_args,
          op->min_args == 1 ? "" : "s", n->nargs);
    else
      err(st, n->loc, "%s expects %d to %d arguments, got %d", op->name, op->min_args, op->max_args,
          n->nargs);
    return st->nm->poison;
  }
  bool bad = false;
  for (int i = 0; i < op->nattrs; i++) {
    if (op->attrs[i].required && !ops_call_attr(n, op->attrs[i].name)) {
      err(st, n->loc, "%s requires the attribute %s (%s)", op->name, op->attrs[i].name,
          op->attrs[i].doc);
      bad = true;
    }
  }
  for (int i = 0; i < n->nattrs; i++) {
    bool known = false;
    for (int j = 0; j < op->nattrs; j++)
      known = known || strcmp(op->attrs[j].name, n->attrs[i].name) == 0;
    if (!known) {
      err(st, n->attrs[i].loc.src ? n->attrs[i].loc : n->loc, "%s has no attribute %s", op->name,
          n->attrs[i].name);
      bad = true;
    }
  }
  if (bad || any_poison(st, n)) return st->nm->poison;
  rx_deduce_ctx dc = {st->m, st->an, st->nm->diag, n->loc};
  int before = st->nm->diag->errors;
  const rx_sinfo *r = op->deduce(&dc, n);
  if (!r) {
    if (st->nm->diag->errors == before) err(st, n->loc, "%s: shape deduction failed", op->name);
    st->nm->ok = false;
    return st->nm->poison;
  }
  r = ops_dist_place(&dc, n, r);
  if (!r) {
    st->nm->ok = false;
    return st->nm->poison;
  }
  return keep_ragged(st, n, r);
}

/* ---- destination-passing calls (call_tensor, call_extern) ---- */

static const rx_sinfo *buf_sinfo(norm *st, const rx_buffer *b) {
  return rx_sinfo_tensor(st->m, b->dtype, b->ndim, b->shape);
}

/* A Prim argument passed to a 0-d buffer. */
static const rx_sinfo *scalar_tensor(norm *st, rx_dtype dt) {
  static const rx_expr *const none[1];
  return rx_sinfo_tensor(st->m, dt, 0, none);
}

/* Checks have (an argument or a declared output) against a buffer parameter after
 * substitution. what: "argument 2" / "output 1". */
static void check_buf(norm *st, rx_node *n, const char *callee, const char *what,
                      const rx_sinfo *have, const rx_buffer *b, const subst *s) {
  const rx_sinfo *want = buf_sinfo(st, b);
  if (have->kind != RX_SINFO_TENSOR) {
    err(st, n->loc, "%s: %s must be a tensor (parameter %s: %s), got %s", callee, what, b->name,
        sstr(st, want), sstr(st, have));
    return;
  }
  if (have->dtype != RX_DTYPE_UNKNOWN && have->dtype != b->dtype) {
    err(st, n->loc, "%s: %s is %s but parameter %s expects %s (dtype %s vs %s)", callee, what,
        sstr(st, have), b->name, sstr(st, want), ir_dtype_name(have->dtype),
        ir_dtype_name(b->dtype));
    return;
  }
  if (have->ndim >= 0 && have->ndim != b->ndim) {
    err(st, n->loc, "%s: %s is %s but parameter %s expects %s (rank %d vs %d)", callee, what,
        sstr(st, have), b->name, sstr(st, want), have->ndim, b->ndim);
    return;
  }
  if (have->ndim < 0 || !have->shape) {
    err(st, n->loc, "%s: %s is %s but parameter %s needs a known shape %s; use match_cast", callee,
        what, sstr(st, have), b->name, sstr(st, want));
    return;
  }
  for (int i = 0; i < b->ndim; i++) {
    const rx_expr *w = sym_analyzer_simplify(st->an, sub_apply(st, s, b->shape[i]));
    rx_tribool eq = dim_eq(st, have->shape[i], w);
    if (eq == RX_TRUE) continue;
    if (eq == RX_FALSE)
      err(st, n->loc, "%s: %s is %s but parameter %s expects %s (dim %d: %s vs %s)", callee, what,
          sstr(st, have), b->name, sstr(st, sinfo_subst(st, s, want)), i, estr(st, have->shape[i]),
          estr(st, w));
    else
      err(st, n->loc,
          "%s: cannot prove that %s (%s) matches parameter %s: %s (dim %d: %s vs %s); use "
          "match_cast",
          callee, what, sstr(st, have), b->name, sstr(st, sinfo_subst(st, s, want)), i,
          estr(st, have->shape[i]), estr(st, w));
    return;
  }
}

/* Checks an argument against a VALUE parameter of an extern: the same kind of value (any value
 * for Object), and the dtype and rank the parameter states. */
static void check_value(norm *st, rx_node *n, const char *callee, int ai, const rx_param *p) {
  const rx_sinfo *have = n->args[ai]->sinfo, *want = p->sinfo;
  if (want->kind == RX_SINFO_OBJECT) return;
  bool ok = have->kind == want->kind || have->kind == RX_SINFO_OBJECT;
  if (ok && have->kind == want->kind) {
    if (want->kind == RX_SINFO_PRIM || want->kind == RX_SINFO_TENSOR)
      ok = want->dtype == RX_DTYPE_UNKNOWN || have->dtype == want->dtype;
    if (ok && (want->kind == RX_SINFO_TENSOR || want->kind == RX_SINFO_SHAPE))
      ok = want->ndim < 0 || have->ndim < 0 || have->ndim == want->ndim;
    if (ok && want->kind == RX_SINFO_TUPLE) ok = have->nfields == want->nfields;
  }
  if (!ok)
    err(st, n->loc, "%s: argument %d is %s but parameter %s expects %s", callee, ai + 1,
        sstr(st, have), p->name, sstr(st, want));
}

/* A call of an extern that returns its result (`-> SINFO`): its arguments checked against its
 * parameters; its value has the call's out= (the declared result unless the call says more). */
static const rx_sinfo *returning_call(norm *st, rx_node *n, const char *callee,
                                      rx_param *const *params, int np) {
  subst s = {0};
  int ai = 0;
  for (int i = 0; i < np; i++) {
    const rx_param *p = params[i];
    if (p->kind == RX_PARAM_SCALAR) continue;
    if (p->kind == RX_PARAM_VALUE) {
      check_value(st, n, callee, ai++, p);
      continue;
    }
    const rx_sinfo *have = n->args[ai]->sinfo;
    if (have->kind == RX_SINFO_PRIM) have = scalar_tensor(st, have->dtype);
    unify_bind(&s, buf_sinfo(st, p->buf), have);
    check_buf(st, n, callee, base_arena_printf(&st->m->arena, "argument %d", ai + 1), have, p->buf,
              &s);
    ai++;
  }
  sub_free(&s);
  return n->out;
}

static const rx_sinfo *call_dps(norm *st, rx_node *n) {
  bool tensor = n->kind == RX_NODE_CALL_TENSOR;
  rx_param **params = tensor ? (n->tfn ? n->tfn->params : NULL) : (n->ext ? n->ext->params : NULL);
  int np = tensor ? (n->tfn ? n->tfn->nparams : 0) : (n->ext ? n->ext->nparams : 0);
  const char *kw = tensor ? "call_tensor" : "call_extern";
  const char *callee = base_arena_printf(&st->m->arena, "%s(%s)", kw, n->callee ? n->callee : "?");
  if (tensor ? !n->tfn : !n->ext) {
    err(st, n->loc, "%s: no %s named '%s'", kw, tensor ? "tensor_fn" : "extern_fn",
        n->callee ? n->callee : "?");
    return st->nm->poison;
  }
  if (n->inplace) {
    const rx_sinfo *t = n->inplace->sinfo;
    if (!t || t == st->nm->poison) return st->nm->poison;
    n->out = t;         /* the call's value is the variables written in place */
    if (n->fresh_out) { /* then the outputs it allocates: one tuple of both (ir.h) */
      int k = ir_inplace_targets(n),
          nf = n->fresh_out->kind == RX_SINFO_TUPLE ? n->fresh_out->nfields : 1;
      if (k > 1 && (t->kind != RX_SINFO_TUPLE || t->nfields != k)) return st->nm->poison;
      const rx_sinfo **f = ir_module_alloc(st->m, sizeof *f * (size_t)(k + nf));
      for (int i = 0; i < k; i++) f[i] = k > 1 ? t->fields[i] : t;
      for (int i = 0; i < nf; i++)
        f[k + i] = n->fresh_out->kind == RX_SINFO_TUPLE ? n->fresh_out->fields[i] : n->fresh_out;
      n->out = rx_sinfo_tuple(st->m, f, k + nf);
    }
  }
  if (!n->out) {
    err(st, n->loc, "%s needs out=<struct info of the result>", callee);
    return st->nm->poison;
  }
  int nin = 0, nout = 0, nscal = 0;
  for (int i = 0; i < np; i++) {
    if (params[i]->kind == RX_PARAM_VALUE)
      nin++;
    else if (params[i]->kind == RX_PARAM_SCALAR)
      nscal++;
    else if (params[i]->is_output)
      nout++;
    else
      nin++;
  }
  if (n->nargs != nin) {
    err(st, n->loc, "%s expects %d tensor argument%s (the inputs of %s), got %d", callee, nin,
        nin == 1 ? "" : "s", n->callee, n->nargs);
    return n->out;
  }
  /* call_extern has no dims=[...] in the text: its scalar parameters stay unbound then */
  if (n->nextra != nscal && (tensor || n->nextra)) {
    err(st, n->loc, "%s expects dims=[...] with %d value%s (the scalar parameters of %s), got %d",
        callee, nscal, nscal == 1 ? "" : "s", n->callee, n->nextra);
    return n->out;
  }
  if (any_poison(st, n)) return n->out;
  if (!tensor && n->ext->ret) return returning_call(st, n, callee, params, np);
  const rx_sinfo *const *outs = &n->out;
  int nouts = 1;
  if (n->out->kind == RX_SINFO_TUPLE) {
    outs = n->out->fields;
    nouts = n->out->nfields;
  }
  if (nouts != nout && n->fresh_out) { /* inplace= and out= (ir.h) */
    err(st, n->loc, "%s: inplace= (%d target%s) and out=%s give %d outputs but %s has %d", callee,
        ir_inplace_targets(n), ir_inplace_targets(n) == 1 ? "" : "s", sstr(st, n->fresh_out), nouts,
        n->callee, nout);
    return n->out;
  }
  if (nouts != nout) {
    err(st, n->loc, "%s: out=%s gives %d output%s but %s has %d", callee, sstr(st, n->out), nouts,
        nouts == 1 ? "" : "s", n->callee, nout);
    return n->out;
  }
  /* bind: scalars from dims=[...], then whole dims of the inputs, then of the outputs */
  subst s = {0};
  int k = 0;
  for (int i = 0; i < np && n->nextra; i++)
    if (params[i]->kind == RX_PARAM_SCALAR) sub_bind(&s, params[i]->var, n->extra_dims[k++]);
  for (int pass = 0; pass < 2; pass++) {
    int ai = 0, oi = 0;
    for (int i = 0; i < np; i++) {
      rx_param *p = params[i];
      if (p->kind == RX_PARAM_VALUE && pass == 0) ai++;
      if (p->kind != RX_PARAM_BUFFER || p->is_output != (pass == 1)) continue;
      const rx_sinfo *have = pass == 0 ? n->args[ai++]->sinfo : outs[oi++];
      if (have->kind == RX_SINFO_PRIM) have = scalar_tensor(st, have->dtype);
      unify_bind(&s, buf_sinfo(st, p->buf), have);
    }
  }
  int ai = 0, oi = 0;
  for (int i = 0; i < np; i++) {
    rx_param *p = params[i];
    if (p->kind == RX_PARAM_VALUE) check_value(st, n, callee, ai++, p);
    if (p->kind != RX_PARAM_BUFFER) continue;
    const char *what;
    const rx_sinfo *have;
    if (!p->is_output) {
      what = base_arena_printf(&st->m->arena, "argument %d", ai + 1);
      have = n->args[ai++]->sinfo;
      if (have->kind == RX_SINFO_PRIM) have = scalar_tensor(st, have->dtype);
    } else {
      what = base_arena_printf(&st->m->arena, "out=%s", sstr(st, outs[oi]));
      have = outs[oi++];
    }
    check_buf(st, n, callee, what, have, p->buf, &s);
  }
  sub_free(&s);
  return n->out;
}

/* ---- graph calls ---- */

static const rx_sinfo *call_graph(norm *st, rx_node *n) {
  rx_graph_fn *g = n->gfn;
  if (!g) {
    err(st, n->loc, "no graph_fn named '%s'", n->callee ? n->callee : "?");
    return st->nm->poison;
  }
  if (!g->ret) {
    for (int i = 0; i < st->nm->nfns; i++) {
      if (st->nm->fns[i] != g) continue;
      if (st->nm->state[i] == 1) {
        err(st, n->loc, "recursive call of %s: declare its result (-> SINFO)", g->name);
        return st->nm->poison;
      }
      normalize_fn(st->nm, i);
    }
  }
  if (n->nargs != g->nparams) {
    err(st, n->loc, "%s expects %d argument%s, got %d", g->name, g->nparams,
        g->nparams == 1 ? "" : "s", n->nargs);
    return st->nm->poison;
  }
  if (any_poison(st, n)) return st->nm->poison;
  subst s = {0};
  for (int i = 0; i < n->nargs; i++) unify_bind(&s, g->params[i]->sinfo, n->args[i]->sinfo);
  bool ok = true;
  for (int i = 0; i < n->nargs; i++) {
    const rx_sinfo *want = sinfo_subst(st, &s, g->params[i]->sinfo), *have = n->args[i]->sinfo;
    rx_tribool c = compat(st, have, want);
    if (c == RX_TRUE) continue;
    ok = false;
    if (c == RX_FALSE)
      err(st, n->args[i]->loc.src ? n->args[i]->loc : n->loc,
          "%s: argument %d is %s but parameter %s expects %s", g->name, i + 1, sstr(st, have),
          g->params[i]->name, sstr(st, want));
    else
      err(st, n->args[i]->loc.src ? n->args[i]->loc : n->loc,
          "%s: cannot prove that argument %d (%s) matches parameter %s: %s; use match_cast",
          g->name, i + 1, sstr(st, have), g->params[i]->name, sstr(st, want));
  }
  const rx_sinfo *r = g->ret ? sinfo_subst(st, &s, g->ret) : st->nm->poison;
  sub_free(&s);
  return ok ? r : st->nm->poison;
}

/* ---- if ---- */

static const rx_sinfo *branch(norm *st, rx_seq *seq, const rx_expr *assume) {
  size_t mark = sym_analyzer_mark(st->an);
  if (assume) sym_analyzer_assume(st->an, assume);
  walk_seq(st, seq);
  sym_analyzer_reset(st->an, mark);
  return seq->result && seq->result->sinfo ? seq->result->sinfo : st->nm->poison;
}

static const rx_sinfo *if_node(norm *st, rx_node *n) {
  n->cond = atomize(st, n->cond);
  const rx_sinfo *c = n->cond->sinfo;
  const rx_expr *cv = NULL;
  if (c != st->nm->poison) {
    bool okc =
        (c->kind == RX_SINFO_PRIM && (c->dtype == RX_DTYPE_BOOL || c->dtype == RX_DTYPE_UNKNOWN)) ||
        (c->kind == RX_SINFO_TENSOR &&
         (c->dtype == RX_DTYPE_BOOL || c->dtype == RX_DTYPE_UNKNOWN) &&
         (c->ndim == 0 || c->ndim < 0)) ||
        c->kind == RX_SINFO_OBJECT;
    if (!okc)
      err(st, n->cond->loc, "if expects a Prim(bool) or bool[] condition, got %s", sstr(st, c));
    if (c->kind == RX_SINFO_PRIM && c->value && sym_expr_is_bool(c->value)) cv = c->value;
  }
  if (!n->then_seq || !n->else_seq) {
    err(st, n->loc, "if needs both branches");
    return st->nm->poison;
  }
  const rx_sinfo *a = branch(st, n->then_seq, cv);
  const rx_sinfo *b = branch(st, n->else_seq, cv ? sym_expr_not(st->m->ctx, cv) : NULL);
  return join(st, a, b);
}

/* Deduces the struct info of n (normalizing its operands first) and stores it in n->sinfo. */
static const rx_sinfo *value(norm *st, rx_node *n) {
  const rx_sinfo *s = st->nm->poison;
  switch (n->kind) {
  case RX_NODE_VAR:
    if (n->var->sinfo) {
      s = n->var->sinfo;
    } else {
      err(st, n->loc, "'%s' is used before it is defined", n->var->name);
    }
    break;
  case RX_NODE_PRIM:
    s = rx_sinfo_prim(st->m, n->prim_dtype, n->prim);
    break;
  case RX_NODE_SHAPE:
    s = rx_sinfo_shape(st->m, n->ndims, n->dims);
    break;
  case RX_NODE_CONST:
    s = n->sinfo ? n->sinfo : rx_sinfo_object(st->m);
    break;
  case RX_NODE_TUPLE: {
    const rx_sinfo **f = ir_module_alloc(st->m, sizeof *f * (size_t)(n->nargs + 1));
    bool poison = false;
    for (int i = 0; i < n->nargs; i++) {
      n->args[i] = atomize(st, n->args[i]);
      f[i] = n->args[i]->sinfo;
      poison = poison || f[i] == st->nm->poison;
    }
    if (!poison) s = rx_sinfo_tuple(st->m, f, n->nargs);
    break;
  }
  case RX_NODE_GET_ITEM: {
    RX_ASSERT(n->nargs >= 1);
    n->args[0] = atomize(st, n->args[0]);
    const rx_sinfo *t = n->args[0]->sinfo;
    if (t == st->nm->poison) break;
    if (t->kind == RX_SINFO_OBJECT) {
      s = rx_sinfo_object(st->m);
    } else if (t->kind != RX_SINFO_TUPLE) {
      err(st, n->loc, "%s is not a tuple, so .%d cannot be taken", sstr(st, t), n->index);
    } else if (n->index < 0 || n->index >= t->nfields) {
      err(st, n->loc, "index %d is out of range for the tuple %s (%d field%s)", n->index,
          sstr(st, t), t->nfields, t->nfields == 1 ? "" : "s");
    } else {
      s = t->fields[n->index];
    }
    break;
  }
  case RX_NODE_CALL:
  case RX_NODE_CALL_TENSOR:
  case RX_NODE_CALL_EXTERN:
  case RX_NODE_CALL_GRAPH:
    for (int i = 0; i < n->nargs; i++) n->args[i] = atomize(st, n->args[i]);
    if (n->inplace) n->inplace = atomize(st, n->inplace);
    s = n->kind == RX_NODE_CALL         ? call_op(st, n)
        : n->kind == RX_NODE_CALL_GRAPH ? call_graph(st, n)
                                        : call_dps(st, n);
    break;
  case RX_NODE_IF:
    s = if_node(st, n);
    break;
  }
  n->sinfo = s;
  return s;
}

/* ------------------------------------------------------------------------------------------
 * bindings, blocks, functions
 * ------------------------------------------------------------------------------------------ */

/* match_cast: a provably impossible cast is an error; whole-dim variables of the target become
 * sizes (v >= 0). */
static rx_tribool cast_ok(norm *st, const rx_sinfo *have, const rx_sinfo *want) {
  if (!want || want->kind == RX_SINFO_OBJECT || !have || have->kind == RX_SINFO_OBJECT)
    return RX_TRUE;
  if (have->kind != want->kind) return RX_FALSE;
  if (have->kind == RX_SINFO_TUPLE) {
    if (have->nfields != want->nfields) return RX_FALSE;
    for (int i = 0; i < want->nfields; i++)
      if (cast_ok(st, have->fields[i], want->fields[i]) == RX_FALSE) return RX_FALSE;
    return RX_TRUE;
  }
  if (have->kind == RX_SINFO_PRIM) {
    if (have->dtype != RX_DTYPE_UNKNOWN && want->dtype != RX_DTYPE_UNKNOWN &&
        have->dtype != want->dtype)
      return RX_FALSE;
    if (have->value && want->value && dim_eq(st, have->value, want->value) == RX_FALSE)
      return RX_FALSE;
    return RX_TRUE;
  }
  if (have->kind == RX_SINFO_TENSOR || have->kind == RX_SINFO_SHAPE) {
    if (have->kind == RX_SINFO_TENSOR && have->dtype != RX_DTYPE_UNKNOWN &&
        want->dtype != RX_DTYPE_UNKNOWN && have->dtype != want->dtype)
      return RX_FALSE;
    if (have->ndim >= 0 && want->ndim >= 0 && have->ndim != want->ndim) return RX_FALSE;
    if (have->shape && want->shape)
      for (int i = 0; i < want->ndim; i++)
        if (dim_eq(st, have->shape[i], want->shape[i]) == RX_FALSE) return RX_FALSE;
    return RX_TRUE;
  }
  return ir_sinfo_equal(have, want) ? RX_TRUE : RX_UNKNOWN;
}

static void binding(norm *st, rx_binding *b) {
  if (b->cast) {
    b->value = atomize(st, b->value);
    const rx_sinfo *have = b->value->sinfo;
    if (have != st->nm->poison && cast_ok(st, have, b->cast) == RX_FALSE)
      err(st, b->value->loc.src ? b->value->loc : b->loc,
          "match_cast of %s to %s can never succeed", sstr(st, have), sstr(st, b->cast));
    assume_sizes(st, b->cast);
    b->var->sinfo = b->cast;
  } else {
    const rx_sinfo *s = value(st, b->value);
    b->var->sinfo = s;
    if (b->annot) {
      if (s != st->nm->poison) {
        rx_tribool c = compat(st, s, b->annot);
        if (c == RX_FALSE)
          err(st, b->loc, "annotation %s does not match deduced %s", sstr(st, b->annot),
              sstr(st, s));
        else if (c == RX_UNKNOWN)
          err(st, b->loc,
              "annotation %s cannot be proven to match deduced %s; use match_cast to check it "
              "at run time",
              sstr(st, b->annot), sstr(st, s));
      }
      b->var->sinfo = b->annot;
    }
  }
  RX_VEC_PUSH(st->out, b);
}

/* Moves the bindings gathered in v into blk (arena). */
static void finish_block(norm *st, rx_block *blk, bvec *v) {
  blk->bindings = ir_module_alloc(st->m, sizeof *blk->bindings * (v->len + 1));
  if (v->len) memcpy(blk->bindings, v->data, sizeof *blk->bindings * v->len);
  blk->nbindings = (int)v->len;
  free(v->data);
  v->data = NULL;
  v->len = v->cap = 0;
}

static void walk_seq(norm *st, rx_seq *seq) {
  bvec *saved = st->out;
  bvec v = {0};
  st->out = &v;
  for (int bi = 0; bi < seq->nblocks; bi++) {
    rx_block *blk = seq->blocks[bi];
    for (int i = 0; i < blk->nbindings; i++) binding(st, blk->bindings[i]);
    if (bi + 1 < seq->nblocks) finish_block(st, blk, &v);
  }
  if (seq->result) {
    rx_block *last = seq->nblocks ? seq->blocks[seq->nblocks - 1] : NULL;
    bool needs_block = !is_atom(seq->result) &&
                       (!last || (last->dataflow && (seq->result->kind == RX_NODE_CALL_EXTERN ||
                                                     seq->result->kind == RX_NODE_IF)));
    if (needs_block && last) {
      finish_block(st, last, &v);
      last = NULL;
    }
    seq->result = atomize(st, seq->result);
    if (!last && v.len) {
      last = ir_module_alloc(st->m, sizeof *last);
      last->loc = seq->result->loc;
      rx_block **blocks = ir_module_alloc(st->m, sizeof *blocks * (size_t)(seq->nblocks + 1));
      if (seq->nblocks) memcpy(blocks, seq->blocks, sizeof *blocks * (size_t)seq->nblocks);
      blocks[seq->nblocks++] = last;
      seq->blocks = blocks;
    }
    if (last) finish_block(st, last, &v);
  } else if (seq->nblocks) {
    finish_block(st, seq->blocks[seq->nblocks - 1], &v);
  }
  free(v.data);
  st->out = saved;
}

static void normalize_fn(nmod *nm, int idx) {
  if (nm->state[idx]) return;
  nm->state[idx] = 1;
  rx_graph_fn *fn = nm->fns[idx];
  norm st = {0};
  st.nm = nm;
  st.m = nm->m;
  st.fn = fn;
  st.an = sym_analyzer_new(nm->m->ctx);
  for (int i = 0; i < fn->nparams; i++) {
    pset_add(&st.names, fn->params[i]->name);
    assume_sizes(&st, fn->params[i]->sinfo);
    if (!fn->params[i]->sinfo) fn->params[i]->sinfo = rx_sinfo_object(nm->m);
  }
  for (int i = 0; i < fn->nfacts; i++) {
    if (!sym_analyzer_assume(st.an, fn->facts[i])) {
      rx_loc loc = fn->fact_locs ? fn->fact_locs[i] : fn->loc;
      err(&st, loc, "fact %s contradicts the earlier facts of %s", estr(&st, fn->facts[i]),
          fn->name);
    }
  }
  collect_names_seq(&st, &fn->body);
  walk_seq(&st, &fn->body);
  const rx_sinfo *r = fn->body.result ? fn->body.result->sinfo : NULL;
  if (!r) {
    err(&st, fn->loc, "%s has no return value", fn->name);
  } else if (fn->ret) {
    if (r != nm->poison) {
      rx_tribool c = compat(&st, r, fn->ret);
      rx_loc loc = fn->body.result->loc.src ? fn->body.result->loc : fn->loc;
      if (c == RX_FALSE)
        err(&st, loc, "declared result %s of %s does not match deduced %s", sstr(&st, fn->ret),
            fn->name, sstr(&st, r));
      else if (c == RX_UNKNOWN)
        err(&st, loc,
            "declared result %s of %s cannot be proven to match deduced %s; use match_cast",
            sstr(&st, fn->ret), fn->name, sstr(&st, r));
    }
  } else {
    fn->ret = r == nm->poison ? rx_sinfo_object(nm->m) : r;
  }
  free(st.names.slots);
  base_ptrmap_free(&st.next_suffix);
  sym_analyzer_free(st.an);
  nm->state[idx] = 2;
}

bool ops_module_normalize(rx_module *m, rx_diag *diag) {
  nmod nm = {0};
  nm.m = m;
  nm.diag = diag;
  nm.ok = true;
  nm.poison = rx_sinfo_object(m);
  int before = diag->errors;
  nm.fns = base_calloc(m->items.len + 1, sizeof *nm.fns);
  nm.state = base_calloc(m->items.len + 1, sizeof *nm.state);
  for (size_t i = 0; i < m->items.len; i++)
    if (m->items.data[i].kind == RX_ITEM_GRAPH) nm.fns[nm.nfns++] = m->items.data[i].fn;
  for (int i = 0; i < nm.nfns; i++) normalize_fn(&nm, i);
  free(nm.fns);
  free(nm.state);
  return nm.ok && diag->errors == before;
}
