/* The verifier: structural checks of a normalized module (see ir_module_verify in ir.h).
 *
 * Graph functions: variables defined before use (if-branch bindings do not escape their
 * branch), symbolic variables defined by a parameter's whole dimension or an earlier
 * match_cast before they are used, dataflow blocks pure, struct info present and consistent.
 * Tensor programs: buffers, locals, loop and symbolic variables in scope, index counts, the
 * dtypes of every operator, no stores into input buffers, bound loops starting at 0.
 *
 * Purity of a graph function (for calls inside dataflow): a graph function is impure when one
 * of its bindings, in any block or branch, calls an `impure` extern or an impure graph
 * function. Control flow alone (an `if` binding) does not make the callee impure. */
#include "ir.h"

#include <stdlib.h>
#include <string.h>

/* ---- a scoped pointer set: add, query, and undo back to a mark ---- */

typedef struct slot {
  const void *key;
  bool on; /* defined in the current scope chain */
} slot;

typedef struct scope {
  slot *slots;
  size_t cap, count;
  rx_ptrvec log; /* keys turned on, in order, for undo */
} scope;

static slot *find(scope *s, const void *key) {
  size_t h = (size_t)rx_hash_mix(0, (uint64_t)(uintptr_t)key) & (s->cap - 1);
  while (s->slots[h].key && s->slots[h].key != key) h = (h + 1) & (s->cap - 1);
  return &s->slots[h];
}

static void grow(scope *s) {
  slot *old = s->slots;
  size_t oldcap = s->cap;
  s->cap = s->cap ? s->cap * 2 : 64;
  s->slots = base_calloc(s->cap, sizeof *s->slots);
  for (size_t i = 0; i < oldcap; i++)
    if (old[i].key) *find(s, old[i].key) = old[i];
  free(old);
}

static bool has(scope *s, const void *key) {
  if (!s->cap || !key) return false;
  slot *e = find(s, key);
  return e->key && e->on;
}

static void add(scope *s, const void *key) {
  if ((s->count + 1) * 2 > s->cap) grow(s);
  slot *e = find(s, key);
  if (e->key && e->on) return;
  if (!e->key) s->count++;
  e->key = key;
  e->on = true;
  base_ptrvec_push(&s->log, (void *)key);
}

static size_t mark(scope *s) { return s->log.len; }
static void reset(scope *s, size_t m) {
  while (s->log.len > m) find(s, s->log.data[--s->log.len])->on = false;
}

static void scope_free(scope *s) {
  free(s->slots);
  base_ptrvec_free(&s->log);
}

/* ---- verifier state ---- */

typedef struct vctx {
  rx_module *m;
  rx_diag *diag;
  int errors;
  scope vars;  /* graph: rx_var*; tensor program: rx_buffer* and rx_local* */
  scope syms;  /* symbolic variables in scope (tensor programs: loop variables too) */
  scope loops; /* tensor programs: loop variables only */
  rx_ptrvec tmp;
  /* graph purity memo: fns[i] has state[i] (1 in progress, 2 pure, 3 impure) */
  RX_VEC(const rx_graph_fn *) pfns;
  RX_VEC(int) pstate;
  /* tensor program being checked */
  const rx_tensor_fn *tfn;
  /* checking a struct info as written: a parameter of a function that is not primitive, a
   * binding's annotation or match_cast target. Its ragged annotations are checked there; the
   * deduced ones (bindings, results, out=) come from those, and passes copy them into places
   * where the offsets are not in scope (the parameters of fusion's primitive functions) */
  bool written;
} vctx;

static void err(vctx *v, rx_loc loc, const char *fmt, ...) RX_PRINTF(3, 4);
static void err(vctx *v, rx_loc loc, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  base_diag_vreport(v->diag, RX_DIAG_ERROR, loc, fmt, ap);
  va_end(ap);
  v->errors++;
}

/* Prints a struct info into a small arena string (for messages). */
static const char *sinfo_str(vctx *v, const rx_sinfo *s) {
  rx_strbuf b = {0};
  ir_sinfo_print(&b, s);
  const char *r = base_arena_strdup(&v->m->arena, b.data ? b.data : "");
  base_strbuf_free(&b);
  return r;
}

/* ---- symbolic variables ---- */

/* Reports each variable of e that is not in scope (once: it is then treated as defined). */
static void check_syms(vctx *v, const rx_expr *e, rx_loc loc, const char *what) {
  if (!e) return;
  size_t base = v->tmp.len;
  sym_expr_collect_vars(e, &v->tmp);
  for (size_t i = base; i < v->tmp.len; i++) {
    const rx_expr *x = v->tmp.data[i];
    if (has(&v->syms, x)) continue;
    err(v, loc,
        "symbolic variable '%s' in %s is not defined; it must first appear as a whole "
        "dimension of a parameter or of a match_cast target",
        x->name, what);
    add(&v->syms, x);
  }
  v->tmp.len = base;
}

/* `ragged(indptr, b)` (ir.h, rx_sinfo.ragged_by): indptr is a graph variable in scope (a
 * parameter or an earlier binding) of struct info i32[b + 1]. */
static void check_ragged(vctx *v, const rx_sinfo *s, rx_loc loc, const char *what) {
  check_syms(v, s->ragged_rows, loc, what);
  const rx_var *by = NULL;
  for (size_t i = v->vars.log.len; i-- > 0 && !by;) {
    const rx_var *x = v->vars.log.data[i];
    if (x->name == s->ragged_by && find(&v->vars, x)->on) by = x;
  }
  if (!by) {
    err(v, loc, "%s is ragged by '%s', which is no parameter or earlier binding", what,
        s->ragged_by);
    return;
  }
  const rx_sinfo *is = by->sinfo;
  const rx_expr *want = sym_expr_add(v->m->ctx, s->ragged_rows, sym_expr_const(v->m->ctx, 1));
  if (!is || is->kind != RX_SINFO_TENSOR || is->dtype != RX_DTYPE_I32 || is->ndim != 1 ||
      (is->shape && is->shape[0] != want)) {
    rx_strbuf w = {0};
    sym_expr_print(&w, want);
    err(v, loc, "%s is ragged by '%s', which must be i32[%s] (the offsets of its rows), not %s",
        what, s->ragged_by, w.data, sinfo_str(v, is));
    base_strbuf_free(&w);
  }
}

/* `@ m[...]` (ir.h, rx_sinfo.mesh): the mesh is declared, one placement per mesh axis, S[d]
 * names a dim of the tensor, no two axes shard the same dim (a dim split over two axes is not
 * supported), and a static sharded dim divides evenly (symbolic ones are proven or refused when
 * the program is lowered to ranks: passes/shard.c). */
static void check_placement(vctx *v, const rx_sinfo *s, rx_loc loc, const char *what) {
  const rx_mesh *me = ir_module_mesh(v->m, s->mesh);
  if (!me) {
    err(v, loc, "%s is placed on mesh '%s', which is not declared (mesh %s = [devices, ...])", what,
        s->mesh, s->mesh);
    return;
  }
  if (s->nplace != me->ndim) {
    err(v, loc, "%s gives %d placement%s for mesh '%s', which has %d ax%s", what, s->nplace,
        s->nplace == 1 ? "" : "s", s->mesh, me->ndim, me->ndim == 1 ? "is" : "es");
    return;
  }
  for (int k = 0; k < s->nplace; k++) {
    int d = s->place[k];
    if (d < 0) continue;
    if (s->ndim < 0 || d >= s->ndim) {
      err(v, loc, "%s: S[%d] on mesh axis %d shards dim %d, but the tensor has %s %d", what, d, k,
          d, s->ndim < 0 ? "an unknown rank, not" : "rank", s->ndim);
      continue;
    }
    for (int j = 0; j < k; j++)
      if (s->place[j] == d)
        err(v, loc,
            "%s: mesh axes %d and %d both shard dim %d (a dim split over two mesh axes is not "
            "supported)",
            what, j, k, d);
    int64_t c;
    if (s->shape && s->shape[d]->kind == RX_EXPR_CONST &&
        (c = s->shape[d]->value) % me->shape[k] != 0)
      err(v, loc,
          "%s: dim %d of size %lld does not divide among the %lld devices of axis %d of "
          "mesh '%s'",
          what, d, (long long)c, (long long)me->shape[k], k, s->mesh);
  }
}

static void sinfo_syms(vctx *v, const rx_sinfo *s, rx_loc loc, const char *what) {
  if (!s) return;
  switch (s->kind) {
  case RX_SINFO_OBJECT:
    return;
  case RX_SINFO_TENSOR:
    if (s->ragged_by && !v->tfn && v->written) check_ragged(v, s, loc, what);
    if (s->mesh) check_placement(v, s, loc, what);
    /* fallthrough */
  case RX_SINFO_SHAPE:
    for (int i = 0; s->shape && i < s->ndim; i++) check_syms(v, s->shape[i], loc, what);
    return;
  case RX_SINFO_PRIM:
    check_syms(v, s->value, loc, what);
    return;
  case RX_SINFO_FUNC:
    sinfo_syms(v, s->ret, loc, what); /* fallthrough */
  case RX_SINFO_TUPLE:
    for (int i = 0; i < s->nfields; i++) sinfo_syms(v, s->fields[i], loc, what);
    return;
  }
}

/* Defines the variables that appear as whole dimensions (or whole prim values) of s. */
static void define_whole(vctx *v, const rx_sinfo *s) {
  if (!s) return;
  switch (s->kind) {
  case RX_SINFO_TENSOR:
  case RX_SINFO_SHAPE:
    for (int i = 0; s->shape && i < s->ndim; i++)
      if (s->shape[i]->kind == RX_EXPR_VAR) add(&v->syms, s->shape[i]);
    return;
  case RX_SINFO_PRIM:
    if (s->value && s->value->kind == RX_EXPR_VAR) add(&v->syms, s->value);
    return;
  case RX_SINFO_TUPLE:
    for (int i = 0; i < s->nfields; i++) define_whole(v, s->fields[i]);
    return;
  case RX_SINFO_OBJECT:
  case RX_SINFO_FUNC:
    return;
  }
}

static void check_facts(vctx *v, const rx_expr *const *facts, const rx_loc *locs, int n) {
  for (int i = 0; i < n; i++) {
    rx_loc loc = locs ? locs[i] : (rx_loc){0};
    check_syms(v, facts[i], loc, "a `where` fact");
    if (!sym_expr_is_bool(facts[i])) {
      char *s = sym_expr_to_string(facts[i]);
      err(v, loc,
          "a `where` fact must be a condition (a comparison or a logical expression), got '%s'", s);
      free(s);
    }
  }
}

/* ---- graph functions: purity ---- */

static bool gfn_impure(vctx *v, const rx_graph_fn *fn);

static bool node_impure(vctx *v, const rx_node *n);
static bool seq_impure(vctx *v, const rx_seq *s) {
  if (!s) return false;
  for (int b = 0; b < s->nblocks; b++)
    for (int i = 0; i < s->blocks[b]->nbindings; i++)
      if (node_impure(v, s->blocks[b]->bindings[i]->value)) return true;
  return s->result && node_impure(v, s->result);
}

static bool node_impure(vctx *v, const rx_node *n) {
  if (!n) return false;
  if (n->kind == RX_NODE_CALL_EXTERN && n->ext && n->ext->impure) return true;
  if (n->kind == RX_NODE_CALL_TENSOR && n->inplace) return true;
  if (n->kind == RX_NODE_CALL && n->op && v->m->ops && v->m->ops->inplace_arg(n->op) >= 0)
    return true;
  if (n->kind == RX_NODE_CALL_GRAPH && n->gfn && gfn_impure(v, n->gfn)) return true;
  if (n->kind == RX_NODE_IF)
    return node_impure(v, n->cond) || seq_impure(v, n->then_seq) || seq_impure(v, n->else_seq);
  for (int i = 0; i < n->nargs; i++)
    if (node_impure(v, n->args[i])) return true;
  return false;
}

static bool gfn_impure(vctx *v, const rx_graph_fn *fn) {
  for (size_t i = 0; i < v->pfns.len; i++)
    if (v->pfns.data[i] == fn) return v->pstate.data[i] == 3; /* in progress counts as pure */
  size_t k = v->pfns.len;
  RX_VEC_PUSH(&v->pfns, fn);
  RX_VEC_PUSH(&v->pstate, 1);
  bool r = seq_impure(v, &fn->body);
  v->pstate.data[k] = r ? 3 : 2;
  return r;
}

/* ---- graph functions: bindings and expressions ---- */

static void check_seq(vctx *v, const rx_seq *s);

static int count_outputs(const rx_param *const *params, int n, int *nscalars) {
  int outs = 0;
  *nscalars = 0;
  for (int i = 0; i < n; i++) {
    if (params[i]->kind == RX_PARAM_SCALAR)
      (*nscalars)++;
    else if (params[i]->is_output)
      outs++;
  }
  return outs;
}

/* out= of call_tensor/call_extern: one tensor or a tuple of tensors, as many as the callee's
 * output parameters. */
static void check_out(vctx *v, const rx_node *n, const char *callee, const rx_param *const *params,
                      int nparams) {
  int nscalars;
  int want = count_outputs(params, nparams, &nscalars);
  if (!n->out) {
    err(v, n->loc, "call of '%s' has no out= struct info", callee);
    return;
  }
  sinfo_syms(v, n->out, n->loc, "out=");
  int got;
  if (n->out->kind == RX_SINFO_TENSOR) {
    got = 1;
  } else if (n->out->kind == RX_SINFO_TUPLE) {
    got = n->out->nfields;
    for (int i = 0; i < got; i++)
      if (n->out->fields[i]->kind != RX_SINFO_TENSOR)
        err(v, n->loc, "out= of a call of '%s' must be a tensor or a tuple of tensors, got %s",
            callee, sinfo_str(v, n->out));
  } else {
    err(v, n->loc, "out= of a call of '%s' must be a tensor or a tuple of tensors, got %s", callee,
        sinfo_str(v, n->out));
    return;
  }
  if (got != want)
    err(v, n->loc, "'%s' has %d output parameter%s but out= gives %d", callee, want,
        want == 1 ? "" : "s", got);
}

static void check_node(vctx *v, const rx_node *n, bool df);

/* inplace=x or inplace=(x, y) of call_tensor: variables (their buffers are written), outside
 * dataflow blocks (the call changes a value other bindings may read). */
static void check_inplace(vctx *v, const rx_node *n, const char *callee, bool df) {
  const rx_node *t = n->inplace;
  bool vars = t->kind == RX_NODE_VAR;
  for (int i = 0; t->kind == RX_NODE_TUPLE && i < t->nargs; i++)
    vars = t->args[i]->kind == RX_NODE_VAR;
  if (t->kind == RX_NODE_TUPLE && !t->nargs) vars = false;
  if (!vars)
    err(v, n->loc, "inplace= of a call of '%s' must be a variable or a tuple of variables", callee);
  else
    check_node(v, t, df);
  if (df)
    err(v, n->loc,
        "call_tensor(%s, ..., inplace=...) writes its arguments in place: move it out of "
        "`dataflow { }`",
        callee);
}

/* out= of a call of a returning extern: any struct info that does not contradict what the
 * extern declares it returns. */
static void check_returned(vctx *v, const rx_node *n, const char *callee) {
  const rx_sinfo *ret = n->ext->ret, *out = n->out;
  if (!out) {
    err(v, n->loc, "call of '%s' has no out= struct info", callee);
    return;
  }
  sinfo_syms(v, out, n->loc, "out=");
  if (ret->kind == RX_SINFO_OBJECT) return;
  bool ok = out->kind == ret->kind;
  if (ok && ret->kind == RX_SINFO_TUPLE) ok = out->nfields == ret->nfields;
  if (ok && (ret->kind == RX_SINFO_TENSOR || ret->kind == RX_SINFO_PRIM))
    ok = ret->dtype == RX_DTYPE_UNKNOWN || out->dtype == ret->dtype;
  if (ok && (ret->kind == RX_SINFO_TENSOR || ret->kind == RX_SINFO_SHAPE))
    ok = ret->ndim < 0 || out->ndim == ret->ndim;
  if (!ok)
    err(v, n->loc, "out=%s of a call of '%s' contradicts its declared result %s", sinfo_str(v, out),
        callee, sinfo_str(v, ret));
}

static void check_node(vctx *v, const rx_node *n, bool df) {
  if (!n) return;
  if (!n->sinfo) err(v, n->loc, "expression has no struct info (was the module normalized?)");
  for (int i = 0; n->kind != RX_NODE_IF && i < n->nargs; i++) check_node(v, n->args[i], df);
  switch (n->kind) {
  case RX_NODE_VAR:
    if (!n->var) {
      err(v, n->loc, "variable reference without a variable");
    } else if (!has(&v->vars, n->var)) {
      err(v, n->loc, "use of undefined variable '%s'; expected a parameter or an earlier binding",
          n->var->name);
      add(&v->vars, n->var);
    }
    return;
  case RX_NODE_CONST:
    return;
  case RX_NODE_PRIM:
    check_syms(v, n->prim, n->loc, "a prim value");
    return;
  case RX_NODE_SHAPE:
    for (int i = 0; i < n->ndims; i++) check_syms(v, n->dims[i], n->loc, "a shape literal");
    return;
  case RX_NODE_TUPLE:
    return;
  case RX_NODE_GET_ITEM: {
    const rx_sinfo *t = n->nargs == 1 ? n->args[0]->sinfo : NULL;
    if (n->nargs != 1) {
      err(v, n->loc, "tuple item access needs one tuple operand");
    } else if (t && t->kind == RX_SINFO_TUPLE) {
      if (n->index < 0 || n->index >= t->nfields)
        err(v, n->loc, "tuple index %d out of range: expected 0..%d for %s", n->index,
            t->nfields - 1, sinfo_str(v, t));
    } else if (t && t->kind != RX_SINFO_OBJECT) {
      err(v, n->loc, "'.%d' needs a tuple, got %s", n->index, sinfo_str(v, t));
    }
    return;
  }
  case RX_NODE_CALL:
    if (!n->op)
      err(v, n->loc, "call of an unknown op");
    else if (!v->m->ops)
      err(v, n->loc, "call of an op in a module that knows no ops (made without an op registry)");
    else if (df && v->m->ops->inplace_arg(n->op) >= 0)
      err(v, n->loc, "%s writes its argument %d in place: move it out of `dataflow { }`",
          v->m->ops->name(n->op), v->m->ops->inplace_arg(n->op) + 1);
    return;
  case RX_NODE_CALL_TENSOR: {
    const char *name = n->callee ? n->callee : "?";
    for (int i = 0; i < n->nextra; i++) check_syms(v, n->extra_dims[i], n->loc, "dims=");
    if (!n->tfn) {
      err(v, n->loc, "call_tensor of unknown tensor program '%s'", name);
      if (n->out) sinfo_syms(v, n->out, n->loc, "out=");
      return;
    }
    check_out(v, n, name, (const rx_param *const *)n->tfn->params, n->tfn->nparams);
    if (n->inplace) check_inplace(v, n, name, df);
    int nscalars;
    count_outputs((const rx_param *const *)n->tfn->params, n->tfn->nparams, &nscalars);
    if (n->nextra != nscalars)
      err(v, n->loc, "'%s' has %d scalar parameter%s but dims= gives %d", name, nscalars,
          nscalars == 1 ? "" : "s", n->nextra);
    return;
  }
  case RX_NODE_CALL_EXTERN: {
    const char *name = n->callee ? n->callee : "?";
    if (!n->ext) {
      err(v, n->loc, "call_extern of undeclared function '%s'", name);
      if (n->out) sinfo_syms(v, n->out, n->loc, "out=");
      return;
    }
    if (n->ext->ret)
      check_returned(v, n, name);
    else
      check_out(v, n, name, (const rx_param *const *)n->ext->params, n->ext->nparams);
    if (df && n->ext->impure)
      err(v, n->loc,
          "call of impure extern '%s' inside a dataflow block; move it out of `dataflow { }`",
          name);
    return;
  }
  case RX_NODE_CALL_GRAPH:
    if (!n->gfn)
      err(v, n->loc, "call of unknown graph function '%s'", n->callee ? n->callee : "?");
    else if (df && gfn_impure(v, n->gfn))
      err(v, n->loc,
          "call of impure graph function '%s' inside a dataflow block (it calls an impure "
          "extern); move it out of `dataflow { }`",
          n->gfn->name);
    return;
  case RX_NODE_IF: {
    if (df)
      err(v, n->loc, "`if` is not allowed inside a dataflow block; move it out of `dataflow { }`");
    check_node(v, n->cond, df);
    const rx_sinfo *c = n->cond ? n->cond->sinfo : NULL;
    if (c && !(c->kind == RX_SINFO_PRIM && c->dtype == RX_DTYPE_BOOL) &&
        !(c->kind == RX_SINFO_TENSOR && c->dtype == RX_DTYPE_BOOL && c->ndim == 0))
      err(v, n->cond->loc, "if condition must be Prim(bool) or bool[], got %s", sinfo_str(v, c));
    const rx_seq *br[2] = {n->then_seq, n->else_seq};
    for (int i = 0; i < 2; i++) {
      if (!br[i]) {
        err(v, n->loc, "if without %s branch", i ? "an else" : "a then");
        continue;
      }
      size_t mv = mark(&v->vars), ms = mark(&v->syms);
      check_seq(v, br[i]);
      reset(&v->vars, mv);
      reset(&v->syms, ms);
    }
    return;
  }
  }
}

static void check_binding(vctx *v, const rx_binding *b, bool df) {
  rx_loc loc = b->loc.src ? b->loc : b->var ? b->var->loc : b->loc;
  if (!b->var || !b->value) {
    err(v, loc, "incomplete binding");
    return;
  }
  if (df && b->value->kind == RX_NODE_IF) {
    err(v, b->value->loc,
        "`if` is not allowed inside a dataflow block; move it out of `dataflow { }`");
    check_node(v, b->value, false);
  } else {
    check_node(v, b->value, df);
  }
  if (b->cast) {
    define_whole(v, b->cast);
    v->written = true;
    sinfo_syms(v, b->cast, loc, "the match_cast target");
    v->written = false;
  }
  v->written = true;
  if (b->annot) sinfo_syms(v, b->annot, loc, "the annotation");
  v->written = false;
  if (!b->var->sinfo)
    err(v, loc, "binding '%s' has no struct info (was the module normalized?)", b->var->name);
  else
    sinfo_syms(v, b->var->sinfo, loc, "the struct info of the binding");
  add(&v->vars, b->var);
}

static void check_seq(vctx *v, const rx_seq *s) {
  for (int i = 0; i < s->nblocks; i++) {
    const rx_block *blk = s->blocks[i];
    for (int j = 0; j < blk->nbindings; j++) check_binding(v, blk->bindings[j], blk->dataflow);
  }
  if (!s->result)
    err(v, (rx_loc){0}, "a function body or if-branch has no result value");
  else
    check_node(v, s->result, false);
}

static void check_graph(vctx *v, const rx_graph_fn *fn) {
  size_t mv = mark(&v->vars), ms = mark(&v->syms);
  for (int i = 0; i < fn->nparams; i++) {
    add(&v->vars, fn->params[i]);
    define_whole(v, fn->params[i]->sinfo);
  }
  for (int i = 0; i < fn->nparams; i++) {
    if (!fn->params[i]->sinfo)
      err(v, fn->params[i]->loc, "parameter '%s' has no struct info", fn->params[i]->name);
    v->written = !fn->primitive;
    sinfo_syms(v, fn->params[i]->sinfo, fn->params[i]->loc, "a parameter's struct info");
    v->written = false;
  }
  check_facts(v, fn->facts, fn->fact_locs, fn->nfacts);
  check_seq(v, &fn->body);
  if (fn->ret) sinfo_syms(v, fn->ret, fn->loc, "the result struct info");
  reset(&v->vars, mv);
  reset(&v->syms, ms);
}

/* ---- tensor programs ---- */

static bool weak_lit(const rx_tx *e) {
  return e->weak || (e->kind == RX_TX_SYM && e->sym->kind == RX_EXPR_CONST);
}
static bool numeric(rx_dtype t) { return ir_dtype_is_float(t) || ir_dtype_is_int(t); }

/* Can a (weak) literal e take dtype t? */
static bool adapts(const rx_tx *e, rx_dtype t) {
  if (!weak_lit(e)) return false;
  if (e->kind == RX_TX_FLOAT) return ir_dtype_is_float(t);
  if (e->dtype == RX_DTYPE_BOOL) return t == RX_DTYPE_BOOL; /* `true`, `false` */
  return numeric(t);
}

/* The dtype two operands agree on, or UNKNOWN when they do not. */
static rx_dtype unify(const rx_tx *a, const rx_tx *b) {
  if (a->dtype == b->dtype) return a->dtype;
  if (adapts(a, b->dtype) && !weak_lit(b)) return b->dtype;
  if (adapts(b, a->dtype) && !weak_lit(a)) return a->dtype;
  if (weak_lit(a) && weak_lit(b)) /* two literals: a float one wins */
    return a->kind == RX_TX_FLOAT ? a->dtype : b->dtype;
  return RX_DTYPE_UNKNOWN;
}

static bool is_input_buffer(vctx *v, const rx_buffer *b) {
  for (int i = 0; i < v->tfn->nparams; i++) {
    const rx_param *p = v->tfn->params[i];
    if (p->kind == RX_PARAM_BUFFER && p->buf == b) return !p->is_output;
  }
  return false;
}

static void check_tx(vctx *v, const rx_tx *e);

/* Elements of a local allocation with a constant shape; -1 otherwise. */
static int64_t local_elems(const rx_buffer *b) {
  int64_t n = 1;
  for (int d = 0; d < b->ndim && n > 0; d++)
    n = b->shape && b->shape[d]->kind == RX_EXPR_CONST ? n * b->shape[d]->value : -1;
  return n;
}

/* The constant dimension d of b, or -1. */
static int64_t const_dim(const rx_buffer *b, int d) {
  return b->shape && d < b->ndim && b->shape[d]->kind == RX_EXPR_CONST ? b->shape[d]->value : -1;
}

/* A fragment operand of mma or ldmatrix (ir.h): a local allocation of `elems` elements, or in
 * the indexed form (row not NULL) a local [R, elems] whose row `row` (an integer) it names. */
static void frag_rows_operand(vctx *v, const rx_stmt *s, const rx_buffer *b, const rx_tx *row,
                              int64_t elems, const char *what) {
  if (!has(&v->vars, b))
    err(v, s->loc, "buffer '%s' is not defined here; expected an earlier local alloc", b->name);
  bool ok = b->scope == RX_SCOPE_LOCAL &&
            (row ? b->ndim == 2 && const_dim(b, 0) > 0 && const_dim(b, 1) == elems
                 : local_elems(b) == elems);
  if (!ok)
    err(v, s->loc,
        row ? "%s operand '%s' must be a local allocation [R, %lld] (R fragments of one lane)"
            : "%s operand '%s' must be a local allocation of %lld elements (one lane's fragment)",
        what, b->name, (long long)elems);
  if (row) {
    check_tx(v, row);
    if (!ir_dtype_is_int(row->dtype))
      err(v, row->loc, "the fragment row of '%s' must be an integer, got %s", b->name,
          ir_dtype_name(row->dtype));
  }
}

/* `mma m16n8k16 c, a, b` (ir.h): local buffers of 4 f32, 8 and 4 f16 (or bf16) elements, or
 * rows of such in the indexed form `c[i], a[j], b[k]`. */
static void check_mma(vctx *v, const rx_stmt *s) {
  const rx_buffer *ops[3] = {s->buf, s->mma_a, s->mma_b};
  static const char *const what[3] = {"mma's C", "mma's A", "mma's B"};
  static const int64_t elems[3] = {4, 8, 4};
  if (s->nidx != 0 && s->nidx != 3) {
    err(v, s->loc, "mma names the rows of all three fragments or of none (got %d)", s->nidx);
    return;
  }
  for (int i = 0; i < 3; i++) {
    const rx_buffer *b = ops[i];
    if (!b || (s->nidx && !s->idx[i])) {
      err(v, s->loc, "mma without its %s operand", what[i] + 6);
      return;
    }
    frag_rows_operand(v, s, b, s->nidx ? s->idx[i] : NULL, elems[i], what[i]);
  }
  if (s->buf->dtype != RX_DTYPE_F32)
    err(v, s->loc, "mma m16n8k16 accumulates in f32; '%s' is %s", s->buf->name,
        ir_dtype_name(s->buf->dtype));
  if ((s->mma_a->dtype != RX_DTYPE_F16 && s->mma_a->dtype != RX_DTYPE_BF16) ||
      s->mma_b->dtype != s->mma_a->dtype)
    err(v, s->loc, "mma m16n8k16 multiplies f16 or bf16 fragments of one dtype; got %s and %s",
        ir_dtype_name(s->mma_a->dtype), ir_dtype_name(s->mma_b->dtype));
}

static void check_indices(vctx *v, const rx_buffer *b, rx_tx *const *idx, int n, rx_loc loc);
static void check_assign(vctx *v, const rx_tx *value, rx_dtype t, const char *what,
                         const char *name);

/* `alloc f: T[M, N] fragment USE` (ir.h, RX_STMT_FRAG): two constant dims, a matrix dtype. */
static void check_frag_alloc(vctx *v, const rx_stmt *s) {
  const rx_buffer *b = s->buf;
  if (b->ndim != 2 || const_dim(b, 0) <= 0 || const_dim(b, 1) <= 0)
    err(v, s->loc, "fragment '%s' must have two constant positive dimensions (rows, columns)",
        b->name);
  if (b->dtype != RX_DTYPE_F16 && b->dtype != RX_DTYPE_BF16 && b->dtype != RX_DTYPE_F32 &&
      b->dtype != RX_DTYPE_I8 && b->dtype != RX_DTYPE_I32)
    err(v, s->loc, "fragment '%s' is %s; matrix units take f16, bf16, f32, i8 or i32", b->name,
        ir_dtype_name(b->dtype));
}

/* An operand of frag: defined here, a fragment of the use wanted (RX_FRAG_NONE: any). */
static bool frag_operand(vctx *v, const rx_stmt *s, const rx_buffer *b, rx_frag_use use,
                         const char *what) {
  if (!b) {
    err(v, s->loc, "frag %s without %s", ir_frag_op_name(s->frag_op), what);
    return false;
  }
  if (!has(&v->vars, b))
    err(v, s->loc, "buffer '%s' is not defined here; expected an earlier fragment alloc", b->name);
  if (!b->frag || (use && b->frag != use)) {
    err(v, s->loc, "%s of frag %s must be a fragment%s%s; '%s' is %s%s", what,
        ir_frag_op_name(s->frag_op), use ? " of use " : "", use ? ir_frag_use_name(use) : "",
        b->name, b->frag ? "a fragment of use " : "not a fragment",
        b->frag ? ir_frag_use_name(b->frag) : "");
    return false;
  }
  return true;
}

/* frag mma d, a, b, c: D (M x N) = A (M x K) B (K x N) + C (M x N) */
static void check_frag_mma(vctx *v, const rx_stmt *s) {
  bool ok = frag_operand(v, s, s->buf, RX_FRAG_ACC, "D");
  ok = frag_operand(v, s, s->mma_a, RX_FRAG_A, "A") && ok;
  ok = frag_operand(v, s, s->mma_b, RX_FRAG_B, "B") && ok;
  ok = frag_operand(v, s, s->mma_c, RX_FRAG_ACC, "C") && ok;
  if (!ok) return;
  int64_t m = const_dim(s->buf, 0), n = const_dim(s->buf, 1), k = const_dim(s->mma_a, 1);
  if (const_dim(s->mma_a, 0) != m || const_dim(s->mma_b, 0) != k || const_dim(s->mma_b, 1) != n ||
      const_dim(s->mma_c, 0) != m || const_dim(s->mma_c, 1) != n)
    err(v, s->loc,
        "frag mma: shapes do not agree: D %lldx%lld = A %lldx%lld B %lldx%lld + C %lldx%lld",
        (long long)m, (long long)n, (long long)const_dim(s->mma_a, 0), (long long)k,
        (long long)const_dim(s->mma_b, 0), (long long)const_dim(s->mma_b, 1),
        (long long)const_dim(s->mma_c, 0), (long long)const_dim(s->mma_c, 1));
  if (s->mma_a->dtype != s->mma_b->dtype || s->buf->dtype != s->mma_c->dtype)
    err(v, s->loc, "frag mma: A and B must share a dtype, and C and D (got A %s, B %s, C %s, D %s)",
        ir_dtype_name(s->mma_a->dtype), ir_dtype_name(s->mma_b->dtype),
        ir_dtype_name(s->mma_c->dtype), ir_dtype_name(s->buf->dtype));
}

/* frag load / store: the buffer in memory holds the fragment's dtype; stride an integer */
static void check_frag_mem(vctx *v, const rx_stmt *s) {
  if (!frag_operand(v, s, s->buf, RX_FRAG_NONE, "the fragment")) return;
  const rx_buffer *b = s->mem;
  if (!b || b->frag) {
    err(v, s->loc, "frag %s needs a buffer in global or shared memory, not %s",
        ir_frag_op_name(s->frag_op), b ? "a fragment" : "nothing");
    return;
  }
  check_indices(v, b, s->idx, s->nidx, s->loc);
  if (b->scope == RX_SCOPE_LOCAL)
    err(v, s->loc,
        "frag %s: '%s' is local; fragments load from and store to global or shared "
        "memory",
        ir_frag_op_name(s->frag_op), b->name);
  if (b->dtype != s->buf->dtype)
    err(v, s->loc, "frag %s: '%s' is %s but fragment '%s' is %s (no conversion on the way)",
        ir_frag_op_name(s->frag_op), b->name, ir_dtype_name(b->dtype), s->buf->name,
        ir_dtype_name(s->buf->dtype));
  if (s->frag_op == RX_FRAG_OP_STORE && is_input_buffer(v, b))
    err(v, s->loc, "frag store to input buffer '%s'; mark it `out`", b->name);
  if (!s->value) {
    err(v, s->loc, "frag %s without a stride", ir_frag_op_name(s->frag_op));
    return;
  }
  check_tx(v, s->value);
  if (!ir_dtype_is_int(s->value->dtype))
    err(v, s->value->loc, "the stride of frag %s must be an integer, got %s",
        ir_frag_op_name(s->frag_op), ir_dtype_name(s->value->dtype));
}

/* `frag OP ...` (ir.h, RX_STMT_FRAG) */
static void check_frag(vctx *v, const rx_stmt *s) {
  switch (s->frag_op) {
  case RX_FRAG_OP_FILL:
    if (!frag_operand(v, s, s->buf, RX_FRAG_NONE, "the fragment")) return;
    if (!s->value) {
      err(v, s->loc, "frag fill without a value");
      return;
    }
    check_tx(v, s->value);
    check_assign(v, s->value, s->buf->dtype, "fragment", s->buf->name);
    return;
  case RX_FRAG_OP_MMA:
    check_frag_mma(v, s);
    return;
  case RX_FRAG_OP_LOAD:
  case RX_FRAG_OP_STORE:
    check_frag_mem(v, s);
    return;
  case RX_FRAG_OP_COUNT:
    break;
  }
  err(v, s->loc, "malformed frag statement");
}

static void check_indices(vctx *v, const rx_buffer *b, rx_tx *const *idx, int n, rx_loc loc) {
  if (!b) {
    err(v, loc, "access of a missing buffer");
    return;
  }
  if (!has(&v->vars, b))
    err(v, loc, "buffer '%s' is not defined here; expected a parameter or an earlier alloc",
        b->name);
  if (b->frag)
    err(v, loc,
        "'%s' is a fragment: its elements are opaque, read and written only by frag fill, load, "
        "mma and store",
        b->name);
  if (n != b->ndim)
    err(v, loc, "buffer '%s' has %d dimension%s but is indexed with %d ind%s", b->name, b->ndim,
        b->ndim == 1 ? "" : "s", n, n == 1 ? "ex" : "ices");
  for (int i = 0; i < n; i++) {
    check_tx(v, idx[i]);
    if (!ir_dtype_is_int(idx[i]->dtype))
      err(v, idx[i]->loc, "index %d of buffer '%s' must be an integer, got %s", i, b->name,
          ir_dtype_name(idx[i]->dtype));
  }
}

static void want(vctx *v, const rx_tx *e, bool ok, const char *what) {
  if (!ok) err(v, e->loc, "expected %s, got %s", what, ir_dtype_name(e->dtype));
}

static void check_tx(vctx *v, const rx_tx *e) {
  if (!e) return;
  switch (e->kind) {
  case RX_TX_INT:
    return;
  case RX_TX_FLOAT:
    want(v, e, ir_dtype_is_float(e->dtype), "a float dtype for a float literal");
    return;
  case RX_TX_SYM:
    check_syms(v, e->sym, e->loc, "an expression");
    return;
  case RX_TX_LOCAL:
    if (!e->local)
      err(v, e->loc, "reference to a missing local");
    else if (!has(&v->vars, e->local))
      err(v, e->loc, "local '%s' is used before its `let`", e->local->name);
    return;
  case RX_TX_LOAD:
    check_indices(v, e->buf, e->idx, e->nidx, e->loc);
    return;
  case RX_TX_BINARY: {
    check_tx(v, e->a);
    check_tx(v, e->b);
    const char *op = ir_binop_name(e->binop);
    rx_dtype t = unify(e->a, e->b);
    if (t == RX_DTYPE_UNKNOWN) {
      err(v, e->loc, "operands of '%s' have different dtypes: %s and %s (cast one of them)", op,
          ir_dtype_name(e->a->dtype), ir_dtype_name(e->b->dtype));
      return;
    }
    switch (e->binop) {
    case RX_BINOP_DIV:
      if (!ir_dtype_is_float(t))
        err(v, e->loc, "'/' needs float operands, got %s; use '//' for integers", ir_dtype_name(t));
      break;
    case RX_BINOP_FLOORDIV:
    case RX_BINOP_FLOORMOD:
      if (!ir_dtype_is_int(t))
        err(v, e->loc, "'%s' needs integer operands, got %s", op, ir_dtype_name(t));
      break;
    case RX_BINOP_AND:
    case RX_BINOP_OR:
      if (t != RX_DTYPE_BOOL)
        err(v, e->loc, "'%s' needs bool operands, got %s", op, ir_dtype_name(t));
      break;
    case RX_BINOP_EQ:
    case RX_BINOP_NE:
      break;
    default:
      if (!numeric(t)) err(v, e->loc, "'%s' needs numeric operands, got %s", op, ir_dtype_name(t));
      break;
    }
    return;
  }
  case RX_TX_NEG:
    check_tx(v, e->a);
    if (e->a) want(v, e->a, numeric(e->a->dtype), "a numeric operand of unary '-'");
    return;
  case RX_TX_NOT:
    check_tx(v, e->a);
    if (e->a) want(v, e->a, e->a->dtype == RX_DTYPE_BOOL, "a bool operand of '!'");
    return;
  case RX_TX_SELECT:
    check_tx(v, e->a);
    check_tx(v, e->b);
    check_tx(v, e->c);
    if (!e->a || !e->b || !e->c) {
      err(v, e->loc, "select needs three operands");
      return;
    }
    want(v, e->a, e->a->dtype == RX_DTYPE_BOOL, "a bool condition of select");
    if (unify(e->b, e->c) == RX_DTYPE_UNKNOWN)
      err(v, e->loc, "the values of select have different dtypes: %s and %s",
          ir_dtype_name(e->b->dtype), ir_dtype_name(e->c->dtype));
    return;
  case RX_TX_CAST:
    check_tx(v, e->a);
    if (e->dtype == RX_DTYPE_UNKNOWN) err(v, e->loc, "cast to an unknown dtype");
    return;
  case RX_TX_CALL: {
    const rx_tx *args[3] = {e->a, e->b, e->c};
    int n = e->c ? 3 : e->b ? 2 : e->a ? 1 : 0;
    const char *name = ir_intrinsic_name(e->intrin);
    int arity = ir_intrinsic_arity(e->intrin);
    if (n != arity) {
      err(v, e->loc, "'%s' takes %d argument%s, got %d", name, arity, arity == 1 ? "" : "s", n);
      return;
    }
    char kind = ir_intrinsic_kind(e->intrin);
    if (kind == 'c') {
      check_tx(v, e->a);
      check_tx(v, e->b);
      want(v, e->a, e->a->dtype == RX_DTYPE_BOOL, "a bool condition for 'check'");
      want(v, e->b, ir_dtype_is_int(e->b->dtype), "an integer value for 'check'");
      if (!e->msg) err(v, e->loc, "'check' needs a message");
      return;
    }
    if (e->intrin == RX_INTRIN_SHUFFLE_XOR) { /* shuffle_xor(x, mask): any numeric x */
      check_tx(v, e->a);
      check_tx(v, e->b);
      want(v, e->a, numeric(e->a->dtype), "a numeric value for 'shuffle_xor'");
      want(v, e->b, ir_dtype_is_int(e->b->dtype), "an integer lane mask for 'shuffle_xor'");
      return;
    }
    for (int i = 0; i < n; i++) {
      check_tx(v, args[i]);
      if (kind == 'f') {
        if (!ir_dtype_is_float(args[i]->dtype) && !adapts(args[i], RX_DTYPE_F32))
          err(v, args[i]->loc, "'%s' needs a float operand, got %s", name,
              ir_dtype_name(args[i]->dtype));
      } else if (!numeric(args[i]->dtype)) {
        err(v, args[i]->loc, "'%s' needs a numeric operand, got %s", name,
            ir_dtype_name(args[i]->dtype));
      }
    }
    for (int i = 1; i < n; i++)
      if (unify(args[0], args[i]) == RX_DTYPE_UNKNOWN)
        err(v, e->loc, "arguments of '%s' have different dtypes: %s and %s", name,
            ir_dtype_name(args[0]->dtype), ir_dtype_name(args[i]->dtype));
    return;
  }
  case RX_TX_HAS_FRAG: /* the whole condition of an if (check_stmt) */
    err(v, e->loc, "%s(%s) is allowed only as the whole condition of an 'if'",
        ir_target_test_name(e->test), e->test == RX_TEST_ASYNC_COPY ? "" : "...");
    return;
  }
}

/* value stored into / bound to something of dtype t */
static void check_assign(vctx *v, const rx_tx *value, rx_dtype t, const char *what,
                         const char *name) {
  if (value->dtype == t || adapts(value, t)) return;
  err(v, value->loc, "%s '%s' has dtype %s but the value has dtype %s", what, name,
      ir_dtype_name(t), ir_dtype_name(value->dtype));
}

static void check_cond(vctx *v, const rx_tx *c) {
  if (!c) return;
  check_tx(v, c);
  if (c->dtype != RX_DTYPE_BOOL)
    err(v, c->loc, "condition must be bool, got %s", ir_dtype_name(c->dtype));
}

static void check_stmt(vctx *v, const rx_stmt *s);

/* `async_copy dst[i...] = src[j...] [if cond]` (ir.h): shared <- parameter, one dtype whose size
 * divides 16 bytes. */
static void check_async_copy(vctx *v, const rx_stmt *s) {
  check_indices(v, s->buf, s->idx, s->nidx, s->loc);
  const rx_tx *src = s->value;
  if (!src || src->kind != RX_TX_LOAD) {
    err(v, s->loc, "async_copy copies from a buffer element 'src[j, ...]'");
    return;
  }
  check_tx(v, src);
  check_cond(v, s->cond);
  if (!s->buf || !src->buf) return;
  if (s->buf->scope != RX_SCOPE_SHARED)
    err(v, s->loc, "async_copy writes shared memory; '%s' is not a shared allocation",
        s->buf->name);
  bool param = false;
  for (int i = 0; i < v->tfn->nparams; i++)
    param |= v->tfn->params[i]->kind == RX_PARAM_BUFFER && v->tfn->params[i]->buf == src->buf;
  if (!param)
    err(v, s->loc, "async_copy reads global memory; '%s' is not a buffer parameter",
        src->buf->name);
  int bits = ir_dtype_bits(s->buf->dtype);
  if (src->buf->dtype != s->buf->dtype || bits < 8 || 128 % bits)
    err(v, s->loc,
        "async_copy moves 16 bytes between buffers of one dtype of 1, 2, 4 or 8 bytes; "
        "got %s <- %s",
        ir_dtype_name(s->buf->dtype), ir_dtype_name(src->buf->dtype));
}

/* `ldmatrix xN [trans] frag = buf[i...]` (ir.h): a local fragment of 2N 16-bit elements, rows of
 * a shared buffer of 16-bit elements. */
static void check_ldmatrix(vctx *v, const rx_stmt *s) {
  const rx_tx *src = s->value;
  if (s->count != 1 && s->count != 2 && s->count != 4)
    err(v, s->loc, "ldmatrix loads 1, 2 or 4 matrices (x1, x2, x4), not %d", s->count);
  if (!s->buf || !src || src->kind != RX_TX_LOAD || !src->buf) {
    err(v, s->loc, "ldmatrix needs a fragment and a row address 'buf[i, ...]'");
    return;
  }
  check_tx(v, src);
  if (s->nidx > 1 || (s->nidx && !s->idx[0])) {
    err(v, s->loc, "ldmatrix names at most one row of its fragment");
    return;
  }
  frag_rows_operand(v, s, s->buf, s->nidx ? s->idx[0] : NULL, 2 * s->count, "ldmatrix's fragment");
  if (src->buf->scope != RX_SCOPE_SHARED)
    err(v, s->loc, "ldmatrix reads shared memory; '%s' is not a shared allocation", src->buf->name);
  if (ir_dtype_bits(s->buf->dtype) != 16 || ir_dtype_bits(src->buf->dtype) != 16)
    err(v, s->loc, "ldmatrix moves 16-bit elements; got %s <- %s", ir_dtype_name(s->buf->dtype),
        ir_dtype_name(src->buf->dtype));
}

/* `wgmma m64nNk16 [trans] acc, a[i...], b[j...]` (ir.h, RX_STMT_WGMMA): the accumulator a local
 * f32 buffer of N / 2 elements; b a shared buffer, and a a shared one or a local one (A from
 * registers: rows of 8 elements), of one 16-bit float dtype; shared operands with rows of 64 (the
 * 128-byte swizzle); trans (B MN-major) for N up to 64 (one swizzle atom wide). Where the
 * addresses fall (rows multiple of 8, columns of 16) depends on run-time values: the interpreter
 * checks it. */
static void check_wgmma(vctx *v, const rx_stmt *s) {
  if (s->count < 8 || s->count > 256 || s->count % 8)
    err(v, s->loc, "wgmma m64nNk16 needs N a multiple of 8 in 8..256, not %d", s->count);
  if (s->trans && s->count > 64)
    err(v, s->loc, "wgmma m64n%dk16 trans reads B MN-major: N at most 64 (one 128-byte row)",
        s->count);
  const rx_tx *ops[2] = {s->value, s->wg_b};
  if (!s->buf || !ops[0] || !ops[1] || ops[0]->kind != RX_TX_LOAD || ops[1]->kind != RX_TX_LOAD ||
      !ops[0]->buf || !ops[1]->buf) {
    err(v, s->loc, "wgmma needs an accumulator and the addresses 'a[i, ...]', 'b[j, ...]'");
    return;
  }
  if (s->buf->scope != RX_SCOPE_LOCAL || s->buf->dtype != RX_DTYPE_F32 || s->buf->ndim != 1 ||
      !rx_expr_is_const(s->buf->shape[0], s->count / 2))
    err(v, s->loc, "wgmma m64n%dk16's accumulator '%s' must be a local f32[%d]", s->count,
        s->buf->name, s->count / 2);
  for (int i = 0; i < 2; i++) {
    const rx_buffer *b = ops[i]->buf;
    bool regs = i == 0 && b->scope == RX_SCOPE_LOCAL; /* A from registers */
    int row = regs ? 8 : 64;
    check_tx(v, ops[i]);
    if (b->scope != RX_SCOPE_SHARED && !regs)
      err(v, s->loc, "wgmma reads %s from %s; '%s' is not a shared allocation", i ? "B" : "A",
          i ? "shared memory" : "shared memory or registers (a local buffer)", b->name);
    if (b->dtype != RX_DTYPE_F16 && b->dtype != RX_DTYPE_BF16)
      err(v, s->loc, "wgmma multiplies f16 or bf16; '%s' is %s", b->name, ir_dtype_name(b->dtype));
    if (b->ndim < 1 || !rx_expr_is_const(b->shape[b->ndim - 1], row))
      err(v, s->loc,
          regs ? "wgmma's A in registers '%s' needs rows of 8 elements (a thread's fragment): its "
                 "last dimension must be 8"
               : "wgmma's operand '%s' needs rows of 64 elements (the 128-byte swizzle): its last "
                 "dimension must be 64",
          b->name);
  }
  if (ops[0]->buf->dtype != ops[1]->buf->dtype)
    err(v, s->loc, "wgmma's A and B have one dtype; got %s and %s",
        ir_dtype_name(ops[0]->buf->dtype), ir_dtype_name(ops[1]->buf->dtype));
}

/* Defines a loop variable, rejecting redefinition of an enclosing loop or symbolic variable. */
static void define_loop_var(vctx *v, const rx_expr *x, rx_loc loc) {
  if (!x || x->kind != RX_EXPR_VAR) {
    err(v, loc, "loop variable must be a name");
    return;
  }
  if (has(&v->loops, x))
    err(v, loc, "loop variable '%s' redefines an enclosing loop variable; use another name",
        x->name);
  else if (has(&v->syms, x))
    err(v, loc, "loop variable '%s' shadows the symbolic variable '%s'; use another name", x->name,
        x->name);
  add(&v->syms, x);
  add(&v->loops, x);
}

static void check_ranges(vctx *v, const rx_stmt *s) {
  for (int i = 0; i < s->nvars; i++) {
    check_syms(v, s->lo[i], s->loc, "a loop bound");
    check_syms(v, s->extent[i], s->loc, "a loop extent");
  }
}

static void check_stmt(vctx *v, const rx_stmt *s) {
  if (!s) return;
  size_t mv = mark(&v->vars), ms = mark(&v->syms), ml = mark(&v->loops);
  switch (s->kind) {
  case RX_STMT_SEQ:
    for (int i = 0; i < s->n; i++) check_stmt(v, s->body[i]);
    break;
  case RX_STMT_FOR:
    if (s->nvars != 1) {
      err(v, s->loc, "a for loop has exactly one variable");
      break;
    }
    check_ranges(v, s);
    if (rx_loop_is_bound(s->loop_kind) && !rx_expr_is_const(s->lo[0], 0))
      err(v, s->loc, "a loop bound to %s must start at 0", ir_loop_kind_name(s->loop_kind));
    define_loop_var(v, s->vars[0], s->loc);
    check_stmt(v, s->inner);
    break;
  case RX_STMT_REDUCE:
    check_ranges(v, s);
    check_stmt(v, s->init); /* runs once, before the reduction variables exist */
    for (int i = 0; i < s->nvars; i++) define_loop_var(v, s->vars[i], s->loc);
    check_stmt(v, s->inner);
    break;
  case RX_STMT_STORE:
    check_indices(v, s->buf, s->idx, s->nidx, s->loc);
    if (s->buf && is_input_buffer(v, s->buf))
      err(v, s->loc, "store to input buffer '%s'; mark it `out`", s->buf->name);
    if (!s->value)
      err(v, s->loc, "store without a value");
    else {
      check_tx(v, s->value);
      if (s->buf) check_assign(v, s->value, s->buf->dtype, "buffer", s->buf->name);
    }
    break;
  case RX_STMT_LET:
    if (!s->local || !s->value) {
      err(v, s->loc, "incomplete let");
      break;
    }
    check_tx(v, s->value);
    if (s->local->sym) {
      /* a symbolic let (ir.h, rx_local.sym): an integer, defining a symbolic variable */
      if (!ir_dtype_is_int(s->value->dtype))
        err(v, s->loc, "symbolic let '%s' needs an integer value, found %s", s->local->name,
            ir_dtype_name(s->value->dtype));
      reset(&v->vars, mv);
      reset(&v->syms, ms);
      reset(&v->loops, ml);
      define_loop_var(v, s->local->sym, s->loc);
      return;
    }
    check_assign(v, s->value, s->local->dtype, "local", s->local->name);
    reset(&v->vars, mv); /* the local is visible after this statement: not reset below */
    reset(&v->syms, ms);
    reset(&v->loops, ml);
    add(&v->vars, s->local);
    return;
  case RX_STMT_ALLOC:
    if (!s->buf) {
      err(v, s->loc, "alloc without a buffer");
      break;
    }
    for (int i = 0; s->buf->shape && i < s->buf->ndim; i++)
      check_syms(v, s->buf->shape[i], s->loc, "the shape of an alloc");
    if (s->buf->frag) check_frag_alloc(v, s);
    add(&v->vars, s->buf); /* visible to the following statements of the enclosing SEQ */
    return;
  case RX_STMT_IF:
    if (s->value && s->value->kind == RX_TX_HAS_FRAG) {
      const rx_tx *c = s->value;
      if (c->test != RX_TEST_ASYNC_COPY &&
          (!ir_dtype_is_float(c->frag_ab) || !ir_dtype_is_float(c->frag_acc)))
        err(v, c->loc, "%s takes float dtypes, got %s and %s", ir_target_test_name(c->test),
            ir_dtype_name(c->frag_ab), ir_dtype_name(c->frag_acc));
    } else {
      check_cond(v, s->value);
    }
    check_stmt(v, s->inner);
    check_stmt(v, s->otherwise);
    break;
  case RX_STMT_BARRIER:
    break;
  case RX_STMT_MMA:
    check_mma(v, s);
    break;
  case RX_STMT_ASYNC_COPY:
    check_async_copy(v, s);
    break;
  case RX_STMT_ASYNC_COMMIT:
    break;
  case RX_STMT_ASYNC_WAIT:
    if (s->count < 0) err(v, s->loc, "async_wait leaves a non-negative number of groups");
    break;
  case RX_STMT_LDMATRIX:
    check_ldmatrix(v, s);
    break;
  case RX_STMT_FRAG:
    check_frag(v, s);
    break;
  case RX_STMT_WGMMA:
    check_wgmma(v, s);
    break;
  case RX_STMT_WGMMA_FENCE:
  case RX_STMT_WGMMA_COMMIT:
    break;
  case RX_STMT_WGMMA_WAIT:
    if (s->count < 0 || s->count > 7) err(v, s->loc, "wgmma_wait leaves 0..7 groups pending");
    if (s->buf && (s->buf->scope != RX_SCOPE_LOCAL || s->buf->dtype != RX_DTYPE_F32))
      err(v, s->loc, "wgmma_wait's accumulator '%s' must be a local f32 buffer", s->buf->name);
    break;
  }
  reset(&v->vars, mv);
  reset(&v->syms, ms);
  reset(&v->loops, ml);
}

/* Parameters of a tensor program or extern: well-formed, names unique; defines their buffers
 * and the symbolic variables of whole dimensions and scalar parameters. */
static void check_params(vctx *v, rx_param *const *params, int n, const char *fname) {
  for (int i = 0; i < n; i++) {
    const rx_param *p = params[i];
    if (p->kind == RX_PARAM_SCALAR) {
      if (!p->var || p->var->kind != RX_EXPR_VAR) {
        err(v, p->loc, "scalar parameter %d of '%s' must be a name", i, fname);
        continue;
      }
      if (!ir_dtype_is_int(p->dtype))
        err(v, p->loc, "scalar parameter '%s' must be i64 or i32, got %s", p->var->name,
            ir_dtype_name(p->dtype));
      add(&v->syms, p->var);
    } else if (p->kind == RX_PARAM_VALUE) {
      if (!p->sinfo) err(v, p->loc, "parameter %d of '%s' has no struct info", i, fname);
    } else {
      if (!p->buf || p->buf->ndim < 0 || (p->buf->ndim > 0 && !p->buf->shape)) {
        err(v, p->loc, "buffer parameter %d of '%s' needs a dtype and a shape", i, fname);
        continue;
      }
      if (p->buf->dtype == RX_DTYPE_UNKNOWN)
        err(v, p->loc, "buffer parameter '%s' needs a known dtype", p->buf->name);
      add(&v->vars, p->buf);
      for (int d = 0; d < p->buf->ndim; d++)
        if (p->buf->shape[d]->kind == RX_EXPR_VAR) add(&v->syms, p->buf->shape[d]);
    }
  }
  for (int i = 0; i < n; i++) {
    const rx_param *p = params[i];
    bool named = p->kind == RX_PARAM_SCALAR   ? p->var != NULL
                 : p->kind == RX_PARAM_BUFFER ? p->buf != NULL
                                              : true;
    const char *pname = named ? ir_param_name(p) : NULL;
    for (int j = 0; pname && j < i; j++) {
      const rx_param *q = params[j];
      bool qnamed = q->kind == RX_PARAM_SCALAR   ? q->var != NULL
                    : q->kind == RX_PARAM_BUFFER ? q->buf != NULL
                                                 : true;
      const char *qname = qnamed ? ir_param_name(q) : NULL;
      if (qname && strcmp(pname, qname) == 0)
        err(v, p->loc, "parameter '%s' of '%s' is declared twice", pname, fname);
    }
    if (p->kind == RX_PARAM_BUFFER && p->buf && p->buf->shape)
      for (int d = 0; d < p->buf->ndim; d++)
        check_syms(v, p->buf->shape[d], p->loc, "a parameter's shape");
  }
}

static void check_tensor(vctx *v, const rx_tensor_fn *fn) {
  size_t mv = mark(&v->vars), ms = mark(&v->syms);
  v->tfn = fn;
  check_params(v, fn->params, fn->nparams, fn->name);
  check_facts(v, fn->facts, fn->fact_locs, fn->nfacts);
  if (!fn->body)
    err(v, fn->loc, "tensor program '%s' has no body", fn->name);
  else
    check_stmt(v, fn->body);
  v->tfn = NULL;
  reset(&v->vars, mv);
  reset(&v->syms, ms);
}

static void check_extern(vctx *v, const rx_extern_fn *fn) {
  size_t mv = mark(&v->vars), ms = mark(&v->syms);
  check_params(v, fn->params, fn->nparams, fn->name);
  reset(&v->vars, mv);
  reset(&v->syms, ms);
}

bool ir_module_verify(rx_module *m, rx_diag *diag) {
  vctx v = {0};
  v.m = m;
  v.diag = diag;
  for (size_t i = 0; i < m->items.len; i++) {
    rx_item *it = &m->items.data[i];
    switch (it->kind) {
    case RX_ITEM_GRAPH:
      check_graph(&v, it->fn);
      break;
    case RX_ITEM_TENSOR: {
      int before = v.errors;
      check_tensor(&v, it->fn);
      rx_tensor_fn *tf = it->fn;
      if (v.errors == before && !tf->bounds_checked) {
        int e = ir_tensor_fn_check_bounds(m, tf, diag);
        v.errors += e;
        tf->bounds_checked = e == 0;
      }
      break;
    }
    case RX_ITEM_EXTERN:
      check_extern(&v, it->fn);
      break;
    }
  }
  scope_free(&v.vars);
  scope_free(&v.syms);
  scope_free(&v.loops);
  base_ptrvec_free(&v.tmp);
  free(v.pfns.data);
  free(v.pstate.data);
  return v.errors == 0;
}
