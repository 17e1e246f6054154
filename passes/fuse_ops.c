/* fuse_ops: groups call_tensor bindings of each dataflow block by the patterns of their tensor
 * programs (passes/annotate.c) and outlines each group of two or more bindings into a
 * primitive graph function, called in the group's place; passes/fuse_tensor.c then turns each
 * primitive function into one tensor program.
 *
 * Grouping rules (consumer c, producer p of one of c's arguments, in the same dataflow block;
 * p's value is used exactly once in the whole function, by c; both are call_tensor bindings of
 * one tensor output whose arguments are variables of tensors with known shapes):
 *   - p elementwise/broadcast/injective into c elementwise/broadcast/injective/reduction: p is
 *     inlined into c's loads (chains, injective producers into reductions), where c loads p
 *     at index expressions only (not at an index read from data, as take loads its x);
 *   - p injective into c output-fusable (data movement feeding a matmul, e.g. a transpose);
 *   - p output-fusable (matmul-like) into c elementwise/broadcast that loads p's value only at
 *     its loop point with the same output shape: c is an epilogue of p (matmul+bias+gelu);
 *     later elementwise consumers continue the epilogue chain the same way;
 *   - a group holds at most one reduction or output-fusable program (its anchor); nothing is
 *     fused after a reduction; values used more than once (or outside the block) stay
 *     materialized; blocks that are not dataflow are left alone (those inside if branches are
 *     fused as the function's own).
 * Each group is a tree whose root is its last binding; the call replaces the root binding.
 * The primitive function takes the group's outside inputs and, as Prim(i64, v) parameters,
 * every symbolic variable the group uses that no input defines as a whole dimension. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "passes.h"

typedef struct use_count {
  RX_VEC(const rx_var *) vars;
  RX_VEC(int) counts;
  rx_ptrmap index; /* var -> index into vars and counts */
  rx_ptrmap *sfx;  /* the pass's unique_fn_name counters */
} use_count;

static int *count_slot(use_count *u, const rx_var *v) {
  int i = base_ptrmap_get(&u->index, v);
  if (i >= 0) return &u->counts.data[i];
  base_ptrmap_put(&u->index, v, (int)u->vars.len);
  RX_VEC_PUSH(&u->vars, v);
  RX_VEC_PUSH(&u->counts, 0);
  return &u->counts.data[u->counts.len - 1];
}

static void count_seq(use_count *u, const rx_seq *s);
static void count_node(use_count *u, const rx_node *n) {
  if (!n) return;
  if (n->kind == RX_NODE_VAR) (*count_slot(u, n->var))++;
  for (int i = 0; i < n->nargs; i++) count_node(u, n->args[i]);
  count_node(u, n->cond);
  if (n->then_seq) count_seq(u, n->then_seq);
  if (n->else_seq) count_seq(u, n->else_seq);
}
static void count_seq(use_count *u, const rx_seq *s) {
  for (int b = 0; b < s->nblocks; b++)
    for (int i = 0; i < s->blocks[b]->nbindings; i++)
      count_node(u, s->blocks[b]->bindings[i]->value);
  count_node(u, s->result);
}

typedef struct member {
  rx_binding *b;
  rx_pattern pat;
  int group; /* index of the group's root binding */
  int next;  /* the next member of the same group (a list from group.first), -1: the last */
} member;

typedef struct group {
  int anchor;      /* binding index of the reduction/out-fusable member, or -1 */
  int first, last; /* its members' list (member.next) */
  int size;
  int depth;    /* members on the longest producer chain from the root (fuse_tensor inlines them
                   recursively, one level each) */
  int64_t cost; /* the members' copies in the fused expression: a producer that its consumer
                   uses k times (lets expanded) is inlined k times */
} group;

/* A group stops growing at these bounds and its producers stay separate kernels: a chain of
 * 512 elementwise ops becomes 512 / FUSE_MAX_DEPTH kernels, not one that fuse_tensor cannot
 * inline (its recursion limit is 64) or whose inlined expression grows exponentially. */
enum { FUSE_MAX_DEPTH = 32, FUSE_MAX_COST = 64 };

/* A call_tensor binding that may take part in fusion. */
static bool fusable_call(const rx_binding *b) {
  const rx_node *n = b->value;
  if (b->cast || n->kind != RX_NODE_CALL_TENSOR || !n->tfn || !n->out) return false;
  if (n->out->kind != RX_SINFO_TENSOR || !n->out->shape) return false;
  if (n->tfn->pattern == RX_PATTERN_UNKNOWN || n->tfn->pattern == RX_PATTERN_OPAQUE) return false;
  for (int i = 0; i < n->nargs; i++) {
    const rx_node *a = n->args[i];
    if (a->kind != RX_NODE_VAR || !a->var->sinfo || a->var->sinfo->kind != RX_SINFO_TENSOR ||
        !a->var->sinfo->shape)
      return false;
  }
  return true;
}

/* The input buffer parameter of t that takes argument ai. */
static const rx_buffer *input_buf(const rx_tensor_fn *t, int ai) {
  int k = 0;
  for (int i = 0; i < t->nparams; i++) {
    const rx_param *p = t->params[i];
    if (p->kind != RX_PARAM_BUFFER || p->is_output) continue;
    if (k++ == ai) return p->buf;
  }
  return NULL;
}

/* Every load of buf in e is at the loop point vars[0..n). */
static bool loads_at_point(const rx_tx *e, const rx_buffer *buf, const rx_expr *const *vars,
                           int n) {
  if (!e) return true;
  if (e->kind == RX_TX_LOAD) {
    if (e->buf == buf) {
      if (e->nidx != n) return false;
      for (int i = 0; i < n; i++)
        if (e->idx[i]->kind != RX_TX_SYM || e->idx[i]->sym != vars[i]) return false;
    }
    for (int i = 0; i < e->nidx; i++)
      if (!loads_at_point(e->idx[i], buf, vars, n)) return false;
    return true;
  }
  return loads_at_point(e->a, buf, vars, n) && loads_at_point(e->b, buf, vars, n) &&
         loads_at_point(e->c, buf, vars, n);
}

/* c (elementwise/broadcast: a perfect nest whose stores are at the point) loads argument ai
 * only at its loop point. */
static bool consumer_loads_at_point(const rx_tensor_fn *t, int ai) {
  const rx_buffer *buf = input_buf(t, ai);
  if (!buf) return false;
  const rx_expr *vars[16];
  int n = 0;
  const rx_stmt *s = t->body;
  for (;;) {
    while (s->kind == RX_STMT_SEQ && s->n == 1) s = s->body[0];
    if (s->kind != RX_STMT_FOR || n >= 16) break;
    vars[n++] = s->vars[0];
    s = s->inner;
  }
  const rx_stmt *const *body = &s;
  int nb = 1;
  if (s->kind == RX_STMT_SEQ) {
    body = (const rx_stmt *const *)s->body;
    nb = s->n;
  }
  for (int i = 0; i < nb; i++)
    if (!loads_at_point(body[i]->value, buf, vars, n)) return false;
  return true;
}

/* Every load of buf in e has index expressions (symbolic, or literals) only. */
static bool loads_indexed(const rx_tx *e, const rx_buffer *buf) {
  if (!e) return true;
  if (e->kind == RX_TX_LOAD) {
    for (int i = 0; i < e->nidx; i++) {
      if (e->buf == buf && e->idx[i]->kind != RX_TX_SYM && e->idx[i]->kind != RX_TX_INT)
        return false;
      if (!loads_indexed(e->idx[i], buf)) return false;
    }
  }
  return loads_indexed(e->a, buf) && loads_indexed(e->b, buf) && loads_indexed(e->c, buf);
}

static bool stmt_loads_indexed(const rx_stmt *s, const rx_buffer *buf) {
  if (!s) return true;
  for (int i = 0; i < s->n; i++)
    if (!stmt_loads_indexed(s->body[i], buf)) return false;
  for (int i = 0; i < s->nidx; i++)
    if (!loads_indexed(s->idx[i], buf)) return false;
  return loads_indexed(s->value, buf) && loads_indexed(s->cond, buf) &&
         stmt_loads_indexed(s->inner, buf) && stmt_loads_indexed(s->init, buf) &&
         stmt_loads_indexed(s->otherwise, buf);
}

/* c's program loads argument ai only at index expressions of its loop variables, not at an
 * index read from data (take's x): fuse_tensor can inline a producer only there. */
static bool consumer_loads_indexed(const rx_tensor_fn *t, int ai) {
  const rx_buffer *buf = input_buf(t, ai);
  return buf && stmt_loads_indexed(t->body, buf);
}

/* Let-bound locals of a program's innermost body with the loads of one buffer in their values
 * (let values expanded): fuse_tensor inlines a let's value at every use of the local. */
typedef struct let_loads {
  const rx_local *local[16];
  int64_t n[16];
  int count;
} let_loads;

/* The loads of buf in e with every local expanded to its value (saturating). */
static int64_t count_loads(const rx_tx *e, const rx_buffer *buf, const let_loads *ll) {
  if (!e) return 0;
  int64_t n = 0;
  if (e->kind == RX_TX_LOAD) {
    n = e->buf == buf;
    for (int i = 0; i < e->nidx; i++) n += count_loads(e->idx[i], buf, ll);
  } else if (e->kind == RX_TX_LOCAL) {
    for (int i = 0; i < ll->count; i++)
      if (ll->local[i] == e->local) n = ll->n[i];
  }
  n += count_loads(e->a, buf, ll) + count_loads(e->b, buf, ll) + count_loads(e->c, buf, ll);
  return n < FUSE_MAX_COST ? n : FUSE_MAX_COST;
}

/* How many copies of its argument ai c's program makes when fuse_tensor inlines it: the loads
 * of ai's buffer in the store of its innermost body, lets expanded (at least 1). */
static int64_t arg_uses(const rx_tensor_fn *t, int ai) {
  const rx_buffer *buf = input_buf(t, ai);
  if (!buf) return 1;
  const rx_stmt *s = t->body;
  for (;;) {
    while (s->kind == RX_STMT_SEQ && s->n == 1) s = s->body[0];
    if (s->kind != RX_STMT_FOR) break;
    s = s->inner;
  }
  const rx_stmt *const *body = &s;
  int nb = 1;
  if (s->kind == RX_STMT_SEQ) {
    body = (const rx_stmt *const *)s->body;
    nb = s->n;
  }
  let_loads ll = {.count = 0};
  int64_t n = 0;
  for (int i = 0; i < nb; i++) {
    const rx_stmt *st = body[i];
    int64_t k = count_loads(st->value, buf, &ll);
    if (st->kind == RX_STMT_LET) {
      if (ll.count == 16) return FUSE_MAX_COST; /* too many lets to follow: do not inline */
      ll.local[ll.count] = st->local;
      ll.n[ll.count++] = k;
    } else if (st->kind == RX_STMT_STORE) {
      n += k;
    }
  }
  return n > 0 ? n : 1;
}

/* Two tensors of the same shape, whatever their dtypes (shapes are hash-consed). */
static bool same_shape(const rx_sinfo *a, const rx_sinfo *b) {
  if (a->ndim != b->ndim || !a->shape || !b->shape) return false;
  for (int i = 0; i < a->ndim; i++)
    if (a->shape[i] != b->shape[i]) return false;
  return true;
}

static bool inlinable(rx_pattern p) {
  return p == RX_PATTERN_ELEMWISE || p == RX_PATTERN_BROADCAST || p == RX_PATTERN_INJECTIVE;
}

/* base if free in the module, else base_1, base_2, ...; sfx holds per base the suffix it got
 * last (0: base itself), where the search resumes: the functions outlined before are still in
 * the module, so a layer's fusions in a model of n layers take O(n) tries in all, not O(n^2). */
static const char *unique_fn_name(rx_module *m, const char *base, rx_ptrmap *sfx) {
  const char *key = ir_module_intern(m, base, strlen(base));
  int k = base_ptrmap_get(sfx, key);
  k = k < 0 ? 0 : k;
  char buf[200];
  for (;; k++) {
    if (k)
      snprintf(buf, sizeof buf, "%s_%d", base, k);
    else
      snprintf(buf, sizeof buf, "%s", base);
    if (!ir_module_graph_fn(m, buf) && !ir_module_tensor_fn(m, buf) && !ir_module_extern_fn(m, buf))
      break;
  }
  base_ptrmap_put(sfx, key, k);
  return ir_module_intern(m, buf, strlen(buf));
}

static void collect_sinfo_vars(const rx_sinfo *s, rx_ptrvec *out) {
  if (!s) return;
  if ((s->kind == RX_SINFO_TENSOR || s->kind == RX_SINFO_SHAPE) && s->shape)
    for (int i = 0; i < s->ndim; i++) sym_expr_collect_vars(s->shape[i], out);
  if (s->kind == RX_SINFO_PRIM && s->value) sym_expr_collect_vars(s->value, out);
  if (s->kind == RX_SINFO_TUPLE)
    for (int i = 0; i < s->nfields; i++) collect_sinfo_vars(s->fields[i], out);
}

static bool ptr_in(const rx_ptrvec *v, const void *p) {
  for (size_t i = 0; i < v->len; i++)
    if (v->data[i] == p) return true;
  return false;
}

/* Outlines the members idx[0..n) (binding order; idx[n-1] the root) of blk into a primitive
 * graph function; the root binding becomes its call, the others are dropped (marked in drop). */
static void outline(rx_module *m, rx_graph_fn *parent, rx_block *blk, const int *idx, int n,
                    bool *drop, rx_ptrmap *sfx) {
  /* outside inputs (variables not defined by a member), in first-use order */
  rx_ptrvec inputs = {0}, defined = {0}, syms = {0}, whole = {0};
  for (int k = 0; k < n; k++) base_ptrvec_push(&defined, blk->bindings[idx[k]]->var);
  for (int k = 0; k < n; k++) {
    const rx_node *c = blk->bindings[idx[k]]->value;
    for (int i = 0; i < c->nargs; i++) {
      rx_var *v = c->args[i]->var;
      if (!ptr_in(&defined, v) && !ptr_in(&inputs, v)) base_ptrvec_push(&inputs, v);
      collect_sinfo_vars(v->sinfo, &syms);
    }
    collect_sinfo_vars(c->out, &syms);
    for (int i = 0; i < c->nextra; i++) sym_expr_collect_vars(c->extra_dims[i], &syms);
  }
  for (size_t i = 0; i < inputs.len; i++) {
    const rx_sinfo *s = ((rx_var *)inputs.data[i])->sinfo;
    for (int d = 0; d < s->ndim; d++)
      if (s->shape[d]->kind == RX_EXPR_VAR) base_ptrvec_push(&whole, (void *)s->shape[d]);
  }
  rx_ptrvec extra = {0};
  for (size_t i = 0; i < syms.len; i++)
    if (!ptr_in(&whole, syms.data[i]) && !ptr_in(&extra, syms.data[i]))
      base_ptrvec_push(&extra, syms.data[i]);

  rx_graph_fn *g = ir_module_alloc(m, sizeof *g);
  rx_strbuf nb = {0};
  base_strbuf_append(&nb, "fused");
  for (int k = 0; k < n && nb.len < 120; k++)
    base_strbuf_printf(&nb, "_%s", blk->bindings[idx[k]]->value->callee);
  char *base = base_strbuf_take(&nb);
  g->name = unique_fn_name(m, base, sfx);
  free(base);
  g->loc = blk->bindings[idx[n - 1]]->loc;
  g->primitive = true;
  g->nparams = (int)(inputs.len + extra.len);
  g->params = ir_module_alloc(m, sizeof *g->params * (size_t)(g->nparams + 1));
  rx_node **cargs = ir_module_alloc(m, sizeof *cargs * (size_t)(g->nparams + 1));
  /* old var -> new param */
  for (size_t i = 0; i < inputs.len; i++) {
    rx_var *v = inputs.data[i];
    g->params[i] = ir_var_new(m, v->name, v->sinfo, v->loc);
    cargs[i] = ir_node_var(m, v, g->loc);
  }
  for (size_t i = 0; i < extra.len; i++) {
    const rx_expr *x = extra.data[i];
    char pn[160];
    snprintf(pn, sizeof pn, "%s_value", x->name);
    g->params[inputs.len + i] = ir_var_new(m, pn, rx_sinfo_prim(m, RX_DTYPE_I64, x), g->loc);
    cargs[inputs.len + i] = ir_node_int(m, RX_DTYPE_I64, x, g->loc);
  }
  /* facts whose variables the function defines */
  g->facts = ir_module_alloc(m, sizeof *g->facts * (size_t)(parent->nfacts + 1));
  for (int i = 0; i < parent->nfacts; i++) {
    rx_ptrvec fv = {0};
    sym_expr_collect_vars(parent->facts[i], &fv);
    bool ok = true;
    for (size_t k = 0; k < fv.len; k++)
      ok = ok && (ptr_in(&whole, fv.data[k]) || ptr_in(&extra, fv.data[k]));
    base_ptrvec_free(&fv);
    if (ok) g->facts[g->nfacts++] = parent->facts[i];
  }
  /* body: clones of the member bindings over the new variables */
  rx_block *body = ir_module_alloc(m, sizeof *body);
  body->dataflow = true;
  body->loc = g->loc;
  body->bindings = ir_module_alloc(m, sizeof *body->bindings * (size_t)(n + 1));
  rx_var **newv = ir_module_alloc(m, sizeof *newv * (size_t)(n + 1));
  for (int k = 0; k < n; k++) {
    const rx_binding *ob = blk->bindings[idx[k]];
    const rx_node *oc = ob->value;
    rx_node *c = ir_node_new(m, RX_NODE_CALL_TENSOR, oc->loc);
    *c = *oc;
    c->sinfo = NULL;
    c->args = ir_module_alloc(m, sizeof *c->args * (size_t)(oc->nargs + 1));
    for (int i = 0; i < oc->nargs; i++) {
      rx_var *v = oc->args[i]->var, *nv = NULL;
      for (int j = 0; j < k && !nv; j++)
        if (blk->bindings[idx[j]]->var == v) nv = newv[j];
      for (size_t j = 0; j < inputs.len && !nv; j++)
        if (inputs.data[j] == v) nv = g->params[j];
      RX_ASSERT(nv);
      c->args[i] = ir_node_var(m, nv, oc->args[i]->loc);
    }
    newv[k] = ir_var_new(m, ob->var->name, NULL, ob->var->loc);
    rx_binding *b = ir_module_alloc(m, sizeof *b);
    b->var = newv[k];
    b->value = c;
    b->loc = ob->loc;
    body->bindings[body->nbindings++] = b;
  }
  g->body.blocks = ir_module_alloc(m, sizeof *g->body.blocks);
  g->body.blocks[0] = body;
  g->body.nblocks = 1;
  g->body.result = ir_node_var(m, newv[n - 1], g->loc);
  g->ret = blk->bindings[idx[n - 1]]->var->sinfo;

  /* the call */
  rx_binding *root = blk->bindings[idx[n - 1]];
  rx_node *call = ir_node_new(m, RX_NODE_CALL_GRAPH, root->value->loc);
  call->callee = g->name;
  call->gfn = g;
  call->args = cargs;
  call->nargs = g->nparams;
  root->value = call;
  for (int k = 0; k + 1 < n; k++) drop[idx[k]] = true;

  rx_item it = {RX_ITEM_GRAPH, g};
  RX_VEC_PUSH(&m->items, it);
  base_ptrvec_free(&inputs);
  base_ptrvec_free(&defined);
  base_ptrvec_free(&syms);
  base_ptrvec_free(&whole);
  base_ptrvec_free(&extra);
}

static int cmp_int(const void *a, const void *b) {
  return (*(const int *)a > *(const int *)b) - (*(const int *)a < *(const int *)b);
}

static void fuse_block(rx_module *m, rx_graph_fn *fn, rx_block *blk, use_count *uc) {
  int nb = blk->nbindings;
  if (nb < 2) return;
  member *mem = base_calloc((size_t)nb, sizeof *mem);
  group *grp = base_calloc((size_t)nb, sizeof *grp);
  rx_ptrmap def = {0}; /* var -> index of its binding (found in O(1): blocks of 100k bindings) */
  for (int i = 0; i < nb; i++) {
    mem[i].b = blk->bindings[i];
    mem[i].group = -1;
    mem[i].next = -1;
    base_ptrmap_put(&def, mem[i].b->var, i);
    if (!fusable_call(mem[i].b)) continue;
    mem[i].pat = mem[i].b->value->tfn->pattern;
    mem[i].group = i;
    grp[i].first = grp[i].last = i;
    grp[i].anchor = inlinable(mem[i].pat) ? -1 : i;
    grp[i].size = 1;
    grp[i].depth = 1;
    grp[i].cost = 1;
  }
  for (int c = 0; c < nb; c++) {
    if (mem[c].group < 0) continue;
    const rx_node *cn = mem[c].b->value;
    for (int ai = 0; ai < cn->nargs; ai++) {
      rx_var *v = cn->args[ai]->var;
      int p = base_ptrmap_get(&def, v);
      if (p >= c) p = -1;
      if (p < 0 || mem[p].group != p) continue; /* not a member, or already inside a group */
      if (*count_slot(uc, v) != 1) continue;
      int ca = grp[c].anchor, pa = grp[p].anchor;
      rx_pattern pp = mem[p].pat, cp = mem[c].pat;
      bool ok = false;
      if (inlinable(pp) && pa < 0) {
        /* p's group is all inlinable: into anything but a matmul, or data movement into one */
        ok = (inlinable(cp) || cp == RX_PATTERN_REDUCTION ||
              (cp == RX_PATTERN_OUT_FUSABLE && pp == RX_PATTERN_INJECTIVE)) &&
             consumer_loads_indexed(cn->tfn, ai);
      } else if (pa >= 0 && mem[pa].pat == RX_PATTERN_OUT_FUSABLE && ca < 0 &&
                 (cp == RX_PATTERN_ELEMWISE || cp == RX_PATTERN_BROADCAST)) {
        /* epilogue: c loads p's value at its point with the same shape (any dtype: a cast of
         * the matmul's value, e.g. to the f32 residual stream, is an epilogue too) */
        ok = same_shape(cn->out, mem[p].b->value->out) && consumer_loads_at_point(cn->tfn, ai);
      }
      if (!ok) continue;
      int64_t cost = grp[c].cost + arg_uses(cn->tfn, ai) * grp[p].cost;
      int depth = grp[p].depth + 1 > grp[c].depth ? grp[p].depth + 1 : grp[c].depth;
      if (depth > FUSE_MAX_DEPTH || cost > FUSE_MAX_COST) continue;
      grp[c].cost = cost;
      grp[c].depth = depth;
      for (int j = grp[p].first; j >= 0; j = mem[j].next) mem[j].group = c;
      mem[grp[c].last].next = grp[p].first;
      grp[c].last = grp[p].last;
      grp[c].size += grp[p].size;
      if (pa >= 0) grp[c].anchor = pa;
    }
  }
  bool *drop = base_calloc((size_t)nb + 1, sizeof *drop);
  int *idx = base_calloc((size_t)nb + 1, sizeof *idx);
  for (int r = 0; r < nb; r++) {
    if (mem[r].group != r || grp[r].size < 2) continue;
    int n = 0;
    for (int j = grp[r].first; j >= 0; j = mem[j].next) idx[n++] = j;
    qsort(idx, (size_t)n, sizeof *idx, cmp_int); /* in binding order */
    outline(m, fn, blk, idx, n, drop, uc->sfx);
  }
  int k = 0;
  for (int i = 0; i < nb; i++)
    if (!drop[i]) blk->bindings[k++] = blk->bindings[i];
  blk->nbindings = k;
  free(drop);
  free(idx);
  free(mem);
  free(grp);
  base_ptrmap_free(&def);
}

/* The dataflow blocks of seq and of the branches of its ifs (passes/dispatch.c puts the
 * generated matmul of a dispatched one in a branch's dataflow block). */
static void fuse_seq(rx_module *m, rx_graph_fn *fn, rx_seq *seq, use_count *uc) {
  for (int b = 0; b < seq->nblocks; b++) {
    rx_block *blk = seq->blocks[b];
    if (blk->dataflow) fuse_block(m, fn, blk, uc);
    for (int i = 0; i < blk->nbindings; i++) {
      rx_node *n = blk->bindings[i]->value;
      if (n->kind != RX_NODE_IF) continue;
      if (n->then_seq) fuse_seq(m, fn, n->then_seq, uc);
      if (n->else_seq) fuse_seq(m, fn, n->else_seq, uc);
    }
  }
}

bool pass_fuse_ops(rx_module *m, rx_diag *diag) {
  if (!pass_annotate(m, diag)) return false;
  size_t nitems = m->items.len; /* outlined functions are appended: not visited */
  rx_ptrmap sfx = {0};
  for (size_t i = 0; i < nitems; i++) {
    if (m->items.data[i].kind != RX_ITEM_GRAPH) continue;
    rx_graph_fn *fn = m->items.data[i].fn;
    if (fn->primitive) continue;
    use_count uc = {.sfx = &sfx};
    count_seq(&uc, &fn->body);
    fuse_seq(m, fn, &fn->body, &uc);
    free(uc.vars.data);
    free(uc.counts.data);
    base_ptrmap_free(&uc.index);
  }
  base_ptrmap_free(&sfx);
  return true;
}
