/* legalize: every op call binding of every graph function becomes a call_tensor of a generated
 * tensor program (ops/legalize.h). Identical calls (same op, attributes, argument struct info and
 * folded scalar values) share one program. The module stays normalizable and verifiable.
 * Host-level calls (ops_op_is_host_call: tensor_to_shape, a reshape to or from an unknown shape)
 * stay op calls: the host program executes them.
 *
 *   y = softmax(x, axis=-1)          # x: f32[n, m]
 * becomes
 *   y = call_tensor(softmax, x, out=f32[n, m])
 * with `tensor_fn softmax(x: f32[n, m], out y: f32[n, m]) { ... }` added to the module.
 *
 * A program carries the `where` facts of the graph function that calls it whose variables it
 * defines (a dim of a buffer parameter, or a scalar parameter): the function's `n <= 4096`
 * becomes the program's, so the code generators prove its indices fit 32 bits as they do for a
 * fused program. A call repeated in another function with other facts gets its own program. */
#include "../ops/legalize.h"
#include "passes.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct cached {
  const rx_node *call;
  rx_tensor_fn *tfn;
  const char *site; /* the program's run-time checks name this call (site_of): NULL: any call */
} cached;

typedef struct lstate {
  rx_module *m;
  rx_diag *diag;
  const rx_graph_fn *g; /* the function being walked: its facts go into its programs */
  RX_VEC(cached) cache;
  bool ok;
} lstate;

/* v is a variable the program defines: a dim of a buffer parameter or a scalar parameter. */
static bool defines(const rx_tensor_fn *f, const rx_expr *v) {
  for (int i = 0; i < f->nparams; i++) {
    const rx_param *p = f->params[i];
    if (p->kind == RX_PARAM_SCALAR && p->var == v) return true;
    if (p->kind != RX_PARAM_BUFFER) continue;
    for (int d = 0; d < p->buf->ndim; d++)
      if (p->buf->shape[d] == v) return true;
  }
  return false;
}

/* Whether f defines every variable of fact e. */
static bool fact_applies(const rx_tensor_fn *f, const rx_expr *e) {
  rx_ptrvec vs = {0};
  sym_expr_collect_vars(e, &vs);
  bool ok = vs.len > 0;
  for (size_t k = 0; k < vs.len && ok; k++) ok = defines(f, vs.data[k]);
  base_ptrvec_free(&vs);
  return ok;
}

/* The facts of the walked function that apply to f, in the function's order, into out (at most
 * g->nfacts); returns their count. */
static int facts_for(const lstate *st, const rx_tensor_fn *f, const rx_expr **out, rx_loc *locs) {
  int n = 0;
  for (int i = 0; i < st->g->nfacts; i++) {
    if (!fact_applies(f, st->g->facts[i])) continue;
    if (locs) locs[n] = st->g->fact_locs ? st->g->fact_locs[i] : f->loc;
    out[n++] = st->g->facts[i];
  }
  return n;
}

/* A cached program serves this function when it carries exactly the facts it would get here. */
static bool facts_match(const lstate *st, const rx_tensor_fn *f) {
  const rx_expr **want = base_calloc((size_t)st->g->nfacts + 1, sizeof *want);
  int n = facts_for(st, f, want, NULL);
  bool same = n == f->nfacts;
  for (int i = 0; i < n && same; i++) same = want[i] == f->facts[i];
  free(want);
  return same;
}

/* Gives a new program the facts of the walked function that apply to it. */
static void add_facts(lstate *st, rx_tensor_fn *f) {
  if (st->g->nfacts == 0) return;
  const rx_expr **facts = ir_module_alloc(st->m, sizeof *facts * (size_t)st->g->nfacts);
  rx_loc *locs = ir_module_alloc(st->m, sizeof *locs * (size_t)st->g->nfacts);
  f->nfacts = facts_for(st, f, facts, locs);
  f->facts = facts;
  f->fact_locs = locs;
}

static bool attr_eq(const rx_attr *a, const rx_attr *b) {
  if (a->name != b->name && strcmp(a->name, b->name) != 0) return false;
  if (a->kind != b->kind) return false;
  switch (a->kind) {
  case RX_ATTR_INT:
  case RX_ATTR_BOOL:
    return a->i == b->i;
  case RX_ATTR_FLOAT:
    return a->f == b->f || (a->f != a->f && b->f != b->f);
  case RX_ATTR_STR:
    return (!a->s && !b->s) || (a->s && b->s && strcmp(a->s, b->s) == 0);
  case RX_ATTR_DTYPE:
    return a->dtype == b->dtype;
  case RX_ATTR_INTS:
    return a->n == b->n &&
           (a->n == 0 || memcmp(a->ints, b->ints, sizeof(int64_t) * (size_t)a->n) == 0);
  case RX_ATTR_EXPRS:
    if (a->n != b->n) return false;
    for (int i = 0; i < a->n; i++)
      if (a->exprs[i] != b->exprs[i]) return false;
    return true;
  }
  return false;
}

/* Folded scalar literals are part of the program: compare their values too. */
static bool arg_eq(const rx_node *a, const rx_node *b) {
  if (!ir_sinfo_equal(a->sinfo, b->sinfo)) return false;
  bool pa = a->kind == RX_NODE_PRIM, pb = b->kind == RX_NODE_PRIM;
  if (pa != pb)
    return !(pa && ir_dtype_is_float(a->prim_dtype)) && !(pb && ir_dtype_is_float(b->prim_dtype));
  if (pa && ir_dtype_is_float(a->prim_dtype))
    return a->prim_dtype == b->prim_dtype && (a->fvalue == b->fvalue);
  return true;
}

static bool same_call(const rx_node *a, const rx_node *b) {
  if (a->op != b->op || a->nargs != b->nargs || a->nattrs != b->nattrs) return false;
  if (!ir_sinfo_equal(a->sinfo, b->sinfo)) return false;
  for (int i = 0; i < a->nargs; i++)
    if (!arg_eq(a->args[i], b->args[i])) return false;
  for (int i = 0; i < a->nattrs; i++) {
    const rx_attr *o = NULL;
    for (int k = 0; k < b->nattrs && !o; k++)
      if (strcmp(a->attrs[i].name, b->attrs[k].name) == 0) o = &b->attrs[k];
    if (!o || !attr_eq(&a->attrs[i], o)) return false;
  }
  return true;
}

/* "main: binding `y` (take)": where the call is, for the messages of its program's run-time
 * checks (ops/legalize.h, ops_legalize_call_at); interned. */
static const char *site_of(lstate *st, const rx_binding *b) {
  char buf[512];
  snprintf(buf, sizeof buf, "%s: binding `%s` (%s)", st->g->name,
           b->var && b->var->name ? b->var->name : "?", b->value->op->name);
  return ir_module_intern(st->m, buf, strlen(buf));
}

/* The call_tensor replacing the call of binding b (NULL after an error). */
static rx_node *lower_call(lstate *st, rx_binding *b) {
  rx_node *call = b->value;
  const char *site = site_of(st, b);
  rx_tensor_fn *tfn = NULL;
  for (size_t i = 0; i < st->cache.len && !tfn; i++)
    if (same_call(st->cache.data[i].call, call) && facts_match(st, st->cache.data[i].tfn) &&
        (!st->cache.data[i].site || st->cache.data[i].site == site))
      tfn = st->cache.data[i].tfn;
  if (!tfn) {
    bool used = false;
    tfn = ops_legalize_call_at(st->m, call, call->op->name, site, st->diag, &used);
    if (!tfn) return NULL;
    add_facts(st, tfn);
    cached c = {call, tfn, used ? site : NULL};
    RX_VEC_PUSH(&st->cache, c);
  }
  rx_node *n = ir_node_new(st->m, RX_NODE_CALL_TENSOR, call->loc);
  n->callee = tfn->name;
  n->tfn = tfn;
  n->out = call->sinfo;
  int nin = 0, nscal = 0;
  for (int i = 0; i < tfn->nparams; i++) {
    if (tfn->params[i]->kind == RX_PARAM_SCALAR)
      nscal++;
    else if (!tfn->params[i]->is_output)
      nin++;
  }
  n->args = ir_module_alloc(st->m, sizeof(rx_node *) * (size_t)(nin + 1));
  n->nargs = ops_legalize_args(st->m, call, n->args, nin);
  RX_ASSERT(n->nargs == nin);
  /* an op that writes one of its arguments (kv_append's pages): the program's output is that
   * argument's buffer, so what it does not write keeps its value */
  int ip = ops_legalize_inplace_arg(call->op);
  if (ip >= 0) n->inplace = call->args[ip];
  /* an in-place op with a tuple result (kv_append_rope with q): the target, then the outputs
   * the program allocates (ir.h's fresh_out) */
  if (ip >= 0 && call->sinfo->kind == RX_SINFO_TUPLE) {
    const rx_sinfo *const *f = call->sinfo->fields + 1;
    int nf = call->sinfo->nfields - 1;
    n->fresh_out = nf == 1 ? f[0] : rx_sinfo_tuple(st->m, f, nf);
  }
  n->extra_dims = ir_module_alloc(st->m, sizeof(rx_expr *) * (size_t)(nscal + 1));
  for (int i = 0; i < tfn->nparams; i++)
    if (tfn->params[i]->kind == RX_PARAM_SCALAR) n->extra_dims[n->nextra++] = tfn->params[i]->var;
  return n;
}

static void walk_seq(lstate *st, rx_seq *seq);

static void walk_node(lstate *st, rx_binding *b) {
  rx_node *v = b->value;
  if (!v) return;
  if (v->kind == RX_NODE_IF) {
    if (v->then_seq) walk_seq(st, v->then_seq);
    if (v->else_seq) walk_seq(st, v->else_seq);
    return;
  }
  if (v->kind != RX_NODE_CALL || !v->op) return;
  if (ops_op_is_host_call(v)) return; /* executed by the host program itself (ops/ops.h) */
  rx_node *n =
      ops_op_is_collective(v->op) ? pass_collective_extern(st->m, v, st->diag) : lower_call(st, b);
  if (!n) {
    st->ok = false;
    return;
  }
  b->value = n;
}

static void walk_seq(lstate *st, rx_seq *seq) {
  for (int i = 0; i < seq->nblocks; i++)
    for (int k = 0; k < seq->blocks[i]->nbindings; k++) walk_node(st, seq->blocks[i]->bindings[k]);
}

bool pass_legalize(rx_module *m, rx_diag *diag) {
  if (!ops_module_normalize(m, diag)) return false;
  lstate st = {m, diag, NULL, {0}, true};
  size_t n = m->items.len; /* programs added while walking are not graph functions */
  for (size_t i = 0; i < n; i++) {
    if (m->items.data[i].kind != RX_ITEM_GRAPH) continue;
    rx_graph_fn *g = m->items.data[i].fn;
    st.g = g;
    walk_seq(&st, &g->body);
  }
  free(st.cache.data);
  return st.ok;
}
