/* fold: constant folding over Prim values and shape expressions, per graph function, under
 * the function's facts (and v >= 0 for every symbolic variable: they are sizes).
 *   - prim(e) literals, shape literals [e, ...], call_tensor out= shapes and dims=[...] are
 *     re-simplified with the analyzer (e.g. `(n * 2) // 2` is `n`, `min(n, 8192)` is `n`
 *     under `n <= 8192`);
 *   - a variable bound to a Prim or Shape literal is replaced by that literal at its uses in
 *     call arguments, tuples and later literals (constant propagation; DCE removes the binding);
 *   - the struct info of bindings and of the function's result is re-simplified. */
#include <stdlib.h>

#include "passes.h"

typedef struct fold {
  rx_module *m;
  rx_analyzer *an;
  RX_VEC(const rx_var *) vars; /* variables bound to literals ... */
  RX_VEC(rx_node *) lits;      /* ... and the literals */
} fold;

static const rx_expr *simp(fold *f, const rx_expr *e) {
  return e ? sym_analyzer_simplify(f->an, e) : e;
}

static const rx_sinfo *simp_sinfo(fold *f, const rx_sinfo *s) {
  if (!s) return s;
  switch (s->kind) {
  case RX_SINFO_TENSOR:
  case RX_SINFO_SHAPE: {
    if (!s->shape) return s;
    const rx_expr **d = ir_module_alloc(f->m, sizeof *d * (size_t)(s->ndim + 1));
    bool changed = false;
    for (int i = 0; i < s->ndim; i++) {
      d[i] = simp(f, s->shape[i]);
      changed = changed || d[i] != s->shape[i];
    }
    if (!changed) return s;
    return s->kind == RX_SINFO_TENSOR ? rx_sinfo_tensor(f->m, s->dtype, s->ndim, d)
                                      : rx_sinfo_shape(f->m, s->ndim, d);
  }
  case RX_SINFO_PRIM: {
    const rx_expr *v = simp(f, s->value);
    return v == s->value ? s : rx_sinfo_prim(f->m, s->dtype, v);
  }
  case RX_SINFO_TUPLE: {
    const rx_sinfo **fl = ir_module_alloc(f->m, sizeof *fl * (size_t)(s->nfields + 1));
    bool changed = false;
    for (int i = 0; i < s->nfields; i++) {
      fl[i] = simp_sinfo(f, s->fields[i]);
      changed = changed || fl[i] != s->fields[i];
    }
    return changed ? rx_sinfo_tuple(f->m, fl, s->nfields) : s;
  }
  default:
    return s;
  }
}

static rx_node *lit_of(fold *f, const rx_var *v) {
  for (size_t i = 0; i < f->vars.len; i++)
    if (f->vars.data[i] == v) return f->lits.data[i];
  return NULL;
}

static void fold_seq(fold *f, rx_seq *s);

/* Folds n in place; returns the node to use in its place (a literal for a folded variable). */
static rx_node *fold_node(fold *f, rx_node *n, bool arg) {
  if (!n) return n;
  switch (n->kind) {
  case RX_NODE_VAR: {
    rx_node *l = arg ? lit_of(f, n->var) : NULL;
    return l ? l : n;
  }
  case RX_NODE_PRIM:
    if (n->prim) n->prim = simp(f, n->prim);
    return n;
  case RX_NODE_SHAPE:
    for (int i = 0; i < n->ndims; i++) n->dims[i] = simp(f, n->dims[i]);
    return n;
  case RX_NODE_IF:
    if (n->then_seq) fold_seq(f, n->then_seq);
    if (n->else_seq) fold_seq(f, n->else_seq);
    return n;
  case RX_NODE_CALL_TENSOR:
  case RX_NODE_CALL_EXTERN:
    n->out = simp_sinfo(f, n->out);
    for (int i = 0; i < n->nextra; i++) n->extra_dims[i] = simp(f, n->extra_dims[i]);
    /* fallthrough */
  default:
    for (int i = 0; i < n->nargs; i++) {
      /* call_tensor/extern arguments stay variables of tensors; Prim literals are fine too */
      n->args[i] = fold_node(f, n->args[i], n->kind != RX_NODE_GET_ITEM);
    }
    return n;
  }
}

static void fold_seq(fold *f, rx_seq *s) {
  for (int b = 0; b < s->nblocks; b++)
    for (int i = 0; i < s->blocks[b]->nbindings; i++) {
      rx_binding *bd = s->blocks[b]->bindings[i];
      bd->value = fold_node(f, bd->value, false);
      bd->var->sinfo = simp_sinfo(f, bd->var->sinfo);
      if (bd->cast) {
        bd->cast = simp_sinfo(f, bd->cast);
        continue;
      }
      if (bd->annot) continue;
      if (bd->value->kind == RX_NODE_PRIM || bd->value->kind == RX_NODE_SHAPE) {
        RX_VEC_PUSH(&f->vars, bd->var);
        RX_VEC_PUSH(&f->lits, bd->value);
      }
    }
  if (s->result) s->result = fold_node(f, s->result, false);
}

static void assume_sizes(fold *f, const rx_sinfo *s) {
  if (!s) return;
  rx_ptrvec v = {0};
  if ((s->kind == RX_SINFO_TENSOR || s->kind == RX_SINFO_SHAPE) && s->shape)
    for (int i = 0; i < s->ndim; i++) sym_expr_collect_vars(s->shape[i], &v);
  if (s->kind == RX_SINFO_PRIM && s->value) sym_expr_collect_vars(s->value, &v);
  for (size_t i = 0; i < v.len; i++)
    sym_analyzer_assume(
        f->an, sym_expr_cmp(f->m->ctx, RX_EXPR_LE, sym_expr_const(f->m->ctx, 0), v.data[i]));
  base_ptrvec_free(&v);
  if (s->kind == RX_SINFO_TUPLE)
    for (int i = 0; i < s->nfields; i++) assume_sizes(f, s->fields[i]);
}

bool pass_fold(rx_module *m, rx_diag *diag) {
  (void)diag;
  for (size_t i = 0; i < m->items.len; i++) {
    if (m->items.data[i].kind != RX_ITEM_GRAPH) continue;
    rx_graph_fn *fn = m->items.data[i].fn;
    fold f = {0};
    f.m = m;
    f.an = sym_analyzer_new(m->ctx);
    for (int p = 0; p < fn->nparams; p++) assume_sizes(&f, fn->params[p]->sinfo);
    for (int k = 0; k < fn->nfacts; k++) sym_analyzer_assume(f.an, fn->facts[k]);
    fold_seq(&f, &fn->body);
    if (fn->ret) fn->ret = simp_sinfo(&f, fn->ret);
    sym_analyzer_free(f.an);
    free(f.vars.data);
    free(f.lits.data);
  }
  return true;
}
