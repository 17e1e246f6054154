/* inline: calls of graph functions replaced by the callee's body (issue 36, grain size).
 *
 * The runtime batcher batches the calls of one function; a unit of several cells (a stacked
 * LSTM's step that runs layer 1's cell then layer 2's, two steps of one cell) is one function that
 * calls the cells, and passes/batch_fn.c batches only functions without calls. Inlining makes the
 * unit one body of ops, which batch_fn then batches as it batches one cell.
 *
 * A binding `y = g(a, b)` becomes g's bindings, each renamed `y_NAME` (made unique in the
 * caller), g's parameters read as the call's arguments, then `y = R` where R is g's result over
 * the renamed values. Calls inside g are inlined the same way (transitively); a function that
 * reaches itself is an error naming the cycle (`f -> g -> f`). g's symbolic variables are the
 * caller's values: each bare-variable dim (or Prim value) of g's parameters is bound to the
 * argument's, as normalization binds them at the call, and substituted into every struct info,
 * shape, Prim, out= and dims= of the copied bindings; a variable of g that the call does not bind
 * (a dim written as `n + 1` only, or one g's match_cast defines) would meet the caller's variables
 * of the same name and is an error. g's facts are the caller's to state (not copied).
 * Dataflow: a dataflow binding of g joins the caller's block when that block is a dataflow one;
 * anything else goes into a plain block, which splits the caller's dataflow block around it.
 * Calls of primitive functions (fusion groups, passes/fuse_ops.c) are left alone. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "passes.h"

/* A value of the function being built: old (a callee's parameter or binding) is read as to. */
typedef struct imap {
  const rx_var *old;
  rx_node *to;
} imap;

/* One callee being copied at one call site (or the root function: no map, no prefix). */
typedef struct frame {
  const rx_graph_fn *g;
  const char *prefix; /* the call's binding name: g's values are named PREFIX_NAME */
  RX_VEC(imap) vars;
  RX_VEC(const rx_expr *) svars; /* g's symbolic variables ... */
  RX_VEC(const rx_expr *) srepl; /* ... and the caller's values */
} frame;

/* The blocks of one sequence being built; a binding goes to the last block when it is open and
 * of its kind. */
typedef struct seqb {
  RX_VEC(rx_block *) blocks;
  RX_VEC(rx_binding *) cur;
  bool cur_dataflow, open;
  rx_loc loc;
} seqb;

typedef struct ictx {
  rx_module *m;
  const rx_graph_fn *root;
  RX_VEC(const rx_graph_fn *) stack; /* the callees being inlined, outermost first */
  rx_ptrmap names;                   /* interned names the root function uses */
  int ncalls;                        /* calls inlined */
} ictx;

static rx_status emit_seq(ictx *c, frame *fr, const rx_seq *src, seqb *out, bool root_level,
                          bool outer_dataflow);

static void close_block(ictx *c, seqb *s) {
  if (!s->open) return;
  s->open = false;
  if (!s->cur.len) return;
  rx_block *b = ir_module_alloc(c->m, sizeof *b);
  b->dataflow = s->cur_dataflow;
  b->loc = s->loc;
  b->nbindings = (int)s->cur.len;
  b->bindings = ir_module_alloc(c->m, sizeof *b->bindings * s->cur.len);
  memcpy(b->bindings, s->cur.data, sizeof *b->bindings * s->cur.len);
  s->cur.len = 0;
  RX_VEC_PUSH(&s->blocks, b);
}

static void add_binding(ictx *c, seqb *s, rx_binding *bd, bool dataflow) {
  if (s->open && s->cur_dataflow != dataflow) close_block(c, s);
  if (!s->open) {
    s->open = true;
    s->cur_dataflow = dataflow;
  }
  RX_VEC_PUSH(&s->cur, bd);
}

/* The sequence's blocks into dst (its result is the caller's to set). */
static void finish_seq(ictx *c, seqb *s, rx_seq *dst) {
  close_block(c, s);
  dst->nblocks = (int)s->blocks.len;
  dst->blocks = ir_module_alloc(c->m, sizeof *dst->blocks * (s->blocks.len ? s->blocks.len : 1));
  if (s->blocks.len) memcpy(dst->blocks, s->blocks.data, sizeof *dst->blocks * s->blocks.len);
  free(s->blocks.data);
  free(s->cur.data);
  memset(s, 0, sizeof *s);
}

static const rx_expr *sub(ictx *c, const frame *fr, const rx_expr *e) {
  if (!e || !fr->svars.len) return e;
  return sym_expr_subst(c->m->ctx, e, fr->svars.data, fr->srepl.data, fr->svars.len);
}

static const rx_expr **sub_list(ictx *c, const frame *fr, const rx_expr *const *d, int n) {
  if (!d || !fr->svars.len) return (const rx_expr **)d;
  const rx_expr **out = ir_module_alloc(c->m, sizeof *out * (size_t)(n ? n : 1));
  for (int i = 0; i < n; i++) out[i] = sub(c, fr, d[i]);
  return out;
}

/* si with the frame's variables replaced (every other field kept: ragged, placement). */
static const rx_sinfo *sub_sinfo(ictx *c, const frame *fr, const rx_sinfo *si) {
  if (!si || !fr->svars.len) return si;
  rx_sinfo *n = ir_module_alloc(c->m, sizeof *n);
  *n = *si;
  n->shape = sub_list(c, fr, si->shape, si->ndim > 0 ? si->ndim : 0);
  n->value = sub(c, fr, si->value);
  n->ragged_rows = sub(c, fr, si->ragged_rows);
  if (si->nfields > 0) {
    const rx_sinfo **f = ir_module_alloc(c->m, sizeof *f * (size_t)si->nfields);
    for (int i = 0; i < si->nfields; i++) f[i] = sub_sinfo(c, fr, si->fields[i]);
    n->fields = f;
  }
  n->ret = sub_sinfo(c, fr, si->ret);
  return n;
}

/* "inline 'ROOT': " + the message. */
#define IFAIL(c, code, ...) inline_error((c), (code), __VA_ARGS__)
static rx_status inline_error(const ictx *c, rx_status_code code, const char *fmt, ...)
    RX_PRINTF(3, 4);
static rx_status inline_error(const ictx *c, rx_status_code code, const char *fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return base_status_make(code, "inline '%s': %s", c->root->name, msg);
}

/* name, or name_1, name_2, ... : the first the root function does not use yet (then taken). */
static const char *fresh(ictx *c, const char *base) {
  char buf[600];
  snprintf(buf, sizeof buf, "%.500s", base);
  for (int k = 1;; k++) {
    const char *s = ir_module_intern(c->m, buf, strlen(buf));
    if (base_ptrmap_get(&c->names, s) < 0) {
      base_ptrmap_put(&c->names, s, 1);
      return s;
    }
    snprintf(buf, sizeof buf, "%.500s_%d", base, k);
  }
}

static void collect_names(ictx *c, const rx_seq *s) {
  for (int bi = 0; bi < s->nblocks; bi++)
    for (int i = 0; i < s->blocks[bi]->nbindings; i++) {
      const rx_binding *bd = s->blocks[bi]->bindings[i];
      base_ptrmap_put(&c->names, bd->var->name, 1);
      if (bd->value->kind == RX_NODE_IF) {
        collect_names(c, bd->value->then_seq);
        collect_names(c, bd->value->else_seq);
      }
    }
}

static rx_node *lookup(const frame *fr, const rx_var *v) {
  for (size_t i = fr->vars.len; i-- > 0;)
    if (fr->vars.data[i].old == v) return fr->vars.data[i].to;
  return NULL;
}

static rx_status clone_node(ictx *c, frame *fr, const rx_node *n, rx_node **out);

static rx_status clone_args(ictx *c, frame *fr, rx_node **args, int nargs, rx_node ***out) {
  *out = NULL;
  if (!nargs) return NULL;
  *out = ir_module_alloc(c->m, sizeof **out * (size_t)nargs);
  for (int i = 0; i < nargs; i++) RX_RETURN_IF_ERROR(clone_node(c, fr, args[i], &(*out)[i]));
  return NULL;
}

/* A copy of node n of the frame's function with its values and symbols the caller's. */
static rx_status clone_node(ictx *c, frame *fr, const rx_node *n, rx_node **out) {
  *out = NULL;
  if (!n) return NULL;
  if (n->kind == RX_NODE_CONST) {
    *out = (rx_node *)n; /* immutable, static shape: shared */
    return NULL;
  }
  if (n->kind == RX_NODE_CALL_GRAPH && !(n->gfn && n->gfn->primitive))
    return IFAIL(c, RX_ERR_UNSUPPORTED,
                 "a call of '%s' inside an expression (not a binding's value): normalize first",
                 n->callee);
  rx_node *x = ir_module_alloc(c->m, sizeof *x);
  *x = *n;
  x->sinfo = sub_sinfo(c, fr, n->sinfo);
  switch (n->kind) {
  case RX_NODE_VAR: {
    rx_node *to = lookup(fr, n->var);
    if (to) {
      *x = *to; /* a parameter's argument, or a renamed binding */
      x->loc = n->loc;
    }
    break;
  }
  case RX_NODE_CONST:
    break;
  case RX_NODE_PRIM:
    x->prim = sub(c, fr, n->prim);
    break;
  case RX_NODE_SHAPE:
    x->dims = sub_list(c, fr, n->dims, n->ndims);
    break;
  case RX_NODE_CALL_GRAPH: /* a primitive function's call (others are inlined at the binding) */
  case RX_NODE_TUPLE:
  case RX_NODE_GET_ITEM:
  case RX_NODE_CALL:
  case RX_NODE_CALL_TENSOR:
  case RX_NODE_CALL_EXTERN:
    RX_RETURN_IF_ERROR(clone_args(c, fr, n->args, n->nargs, &x->args));
    x->out = sub_sinfo(c, fr, n->out);
    x->fresh_out = sub_sinfo(c, fr, n->fresh_out);
    x->extra_dims = sub_list(c, fr, n->extra_dims, n->nextra);
    RX_RETURN_IF_ERROR(clone_node(c, fr, n->inplace, &x->inplace));
    if (n->nattrs && fr->svars.len) {
      x->attrs = ir_module_alloc(c->m, sizeof *x->attrs * (size_t)n->nattrs);
      for (int i = 0; i < n->nattrs; i++) {
        x->attrs[i] = n->attrs[i];
        if (n->attrs[i].kind == RX_ATTR_EXPRS)
          x->attrs[i].exprs = sub_list(c, fr, n->attrs[i].exprs, n->attrs[i].n);
      }
    }
    break;
  case RX_NODE_IF: {
    RX_RETURN_IF_ERROR(clone_node(c, fr, n->cond, &x->cond));
    const rx_seq *br[2] = {n->then_seq, n->else_seq};
    rx_seq **dst[2] = {&x->then_seq, &x->else_seq};
    for (int k = 0; k < 2; k++) {
      if (!br[k]) continue;
      rx_seq *s = ir_module_alloc(c->m, sizeof *s);
      seqb sb = {0};
      rx_status st = emit_seq(c, fr, br[k], &sb, false, true);
      finish_seq(c, &sb, s);
      RX_RETURN_IF_ERROR(st);
      RX_RETURN_IF_ERROR(clone_node(c, fr, br[k]->result, &s->result));
      *dst[k] = s;
    }
    break;
  }
  }
  *out = x;
  return NULL;
}

/* The variables of s (a struct info) into vars. */
static void sinfo_vars(const rx_sinfo *s, rx_ptrvec *vars) {
  if (!s) return;
  for (int i = 0; s->shape && i < s->ndim; i++) sym_expr_collect_vars(s->shape[i], vars);
  if (s->value) sym_expr_collect_vars(s->value, vars);
  for (int i = 0; i < s->nfields; i++) sinfo_vars(s->fields[i], vars);
  sinfo_vars(s->ret, vars);
}

static bool bound(const frame *fr, const rx_expr *v) {
  for (size_t i = 0; i < fr->svars.len; i++)
    if (fr->svars.data[i] == v) return true;
  return false;
}

/* Binds g's bare-variable dims (and Prim values) of want to have's (as normalization binds a
 * call's arguments); a variable bound to itself needs no substitution. */
static void unify(frame *fr, const rx_sinfo *want, const rx_sinfo *have) {
  if (!want || !have) return;
  if ((want->kind == RX_SINFO_TENSOR || want->kind == RX_SINFO_SHAPE) && have->kind == want->kind &&
      want->shape && have->shape && want->ndim == have->ndim) {
    for (int i = 0; i < want->ndim; i++)
      if (want->shape[i]->kind == RX_EXPR_VAR && !bound(fr, want->shape[i]) &&
          want->shape[i] != have->shape[i]) {
        RX_VEC_PUSH(&fr->svars, want->shape[i]);
        RX_VEC_PUSH(&fr->srepl, have->shape[i]);
      }
  } else if (want->kind == RX_SINFO_PRIM && have->kind == RX_SINFO_PRIM && want->value &&
             have->value && want->value->kind == RX_EXPR_VAR && !bound(fr, want->value) &&
             want->value != have->value) {
    RX_VEC_PUSH(&fr->svars, want->value);
    RX_VEC_PUSH(&fr->srepl, have->value);
  } else if (want->kind == RX_SINFO_TUPLE && have->kind == RX_SINFO_TUPLE &&
             want->nfields == have->nfields) {
    for (int i = 0; i < want->nfields; i++) unify(fr, want->fields[i], have->fields[i]);
  }
}

/* Every symbolic variable g's parameters and match_casts use must be bound by the call (or be
 * the caller's own variable of the same value, bound to itself): one that is not would be read
 * as the caller's variable of that name. */
static rx_status check_symbols(ictx *c, const frame *fr, const rx_graph_fn *g, rx_node *const *args,
                               const rx_seq *s, bool params) {
  rx_ptrvec vars = {0};
  if (params) {
    for (int i = 0; i < g->nparams; i++) {
      vars.len = 0;
      sinfo_vars(g->params[i]->sinfo, &vars);
      const rx_sinfo *have = args[i]->sinfo                 ? args[i]->sinfo
                             : args[i]->kind == RX_NODE_VAR ? args[i]->var->sinfo
                                                            : NULL;
      rx_ptrvec hv = {0};
      sinfo_vars(have, &hv);
      for (size_t k = 0; k < vars.len; k++) {
        bool same = false; /* the argument has the same variable: bound to itself */
        for (size_t j = 0; j < hv.len; j++) same = same || hv.data[j] == vars.data[k];
        if (!bound(fr, vars.data[k]) && !same) {
          rx_status st = IFAIL(c, RX_ERR_UNSUPPORTED,
                               "the call of '%s' does not bind its symbolic variable '%s' "
                               "(parameter '%s': a dim written as an expression only)",
                               g->name, ((const rx_expr *)vars.data[k])->name, g->params[i]->name);
          base_ptrvec_free(&hv);
          base_ptrvec_free(&vars);
          return st;
        }
      }
      base_ptrvec_free(&hv);
    }
  }
  for (int bi = 0; bi < s->nblocks; bi++)
    for (int i = 0; i < s->blocks[bi]->nbindings; i++) {
      const rx_binding *bd = s->blocks[bi]->bindings[i];
      rx_status st = NULL;
      if (bd->cast) {
        vars.len = 0;
        sinfo_vars(bd->cast, &vars);
        for (size_t k = 0; k < vars.len && !st; k++)
          if (!bound(fr, vars.data[k]))
            st = IFAIL(c, RX_ERR_UNSUPPORTED,
                       "'%s''s match_cast '%s' defines symbolic variable '%s': inlined, it would "
                       "meet the caller's variables",
                       g->name, bd->var->name, ((const rx_expr *)vars.data[k])->name);
      }
      if (!st && bd->value->kind == RX_NODE_IF) {
        st = check_symbols(c, fr, g, args, bd->value->then_seq, false);
        if (!st) st = check_symbols(c, fr, g, args, bd->value->else_seq, false);
      }
      if (st) {
        base_ptrvec_free(&vars);
        return st;
      }
    }
  base_ptrvec_free(&vars);
  return NULL;
}

/* A binding `y = g(args)` of the frame's function: g's bindings into out, then y = its result. */
static rx_status inline_call(ictx *c, frame *fr, const rx_binding *bd, rx_var *y, seqb *out,
                             bool dataflow) {
  const rx_node *call = bd->value;
  const rx_graph_fn *g = call->gfn ? call->gfn : ir_module_graph_fn(c->m, call->callee);
  if (!g)
    return IFAIL(c, RX_ERR_NOT_FOUND, "'%s' calls '%s', which is not a graph function",
                 fr->g ? fr->g->name : c->root->name, call->callee);
  bool cycle = g == c->root;
  for (size_t i = 0; i < c->stack.len; i++) cycle = cycle || c->stack.data[i] == g;
  if (cycle) {
    rx_strbuf path = {0};
    base_strbuf_printf(&path, "%s", c->root->name);
    for (size_t i = 0; i < c->stack.len; i++)
      base_strbuf_printf(&path, " -> %s", c->stack.data[i]->name);
    base_strbuf_printf(&path, " -> %s", g->name);
    rx_status st =
        IFAIL(c, RX_ERR_UNSUPPORTED, "'%s' is recursive (%s): a recursive call cannot be inlined",
              g->name, path.data);
    base_strbuf_free(&path);
    return st;
  }
  if (call->nargs != g->nparams)
    return IFAIL(c, RX_ERR_INVALID, "'%s' called with %d arguments, expected %d", g->name,
                 call->nargs, g->nparams);
  frame child = {.g = g, .prefix = y->name};
  rx_node **args = NULL;
  rx_status st = clone_args(c, fr, call->args, call->nargs, &args);
  for (int i = 0; !st && i < g->nparams; i++) {
    const rx_sinfo *have = args[i]->sinfo                 ? args[i]->sinfo
                           : args[i]->kind == RX_NODE_VAR ? args[i]->var->sinfo
                                                          : NULL;
    unify(&child, g->params[i]->sinfo, have);
    imap e = {g->params[i], args[i]};
    RX_VEC_PUSH(&child.vars, e);
  }
  if (!st) st = check_symbols(c, &child, g, args, &g->body, true);
  RX_VEC_PUSH(&c->stack, g);
  if (!st) st = emit_seq(c, &child, &g->body, out, false, dataflow);
  c->stack.len--;
  rx_node *res = NULL;
  if (!st) st = clone_node(c, &child, g->body.result, &res);
  if (!st) {
    rx_binding *nb = ir_module_alloc(c->m, sizeof *nb);
    nb->var = y;
    nb->value = res;
    nb->loc = bd->loc;
    nb->annot = sub_sinfo(c, fr, bd->annot);
    add_binding(c, out, nb, dataflow);
    c->ncalls++;
  }
  free(child.vars.data);
  free(child.svars.data);
  free(child.srepl.data);
  return st;
}

/* The bindings of src (of the frame's function) into out, calls inlined. root_level: src is the
 * root function's body (its blocks stay blocks); outer_dataflow: the caller's block is a
 * dataflow one. */
static rx_status emit_seq(ictx *c, frame *fr, const rx_seq *src, seqb *out, bool root_level,
                          bool outer_dataflow) {
  for (int bi = 0; bi < src->nblocks; bi++) {
    const rx_block *blk = src->blocks[bi];
    bool df = blk->dataflow && outer_dataflow;
    if (root_level) close_block(c, out);
    if (!out->open) out->loc = blk->loc;
    for (int i = 0; i < blk->nbindings; i++) {
      const rx_binding *bd = blk->bindings[i];
      rx_var *y = bd->var;
      if (fr->g) { /* a callee's value: renamed PREFIX_NAME */
        char base[512];
        snprintf(base, sizeof base, "%s_%s", fr->prefix, bd->var->name);
        y = ir_var_new(c->m, fresh(c, base), sub_sinfo(c, fr, bd->var->sinfo), bd->var->loc);
        imap e = {bd->var, ir_node_var(c->m, y, bd->var->loc)};
        e.to->sinfo = y->sinfo;
        RX_VEC_PUSH(&fr->vars, e);
      }
      if (bd->value->kind == RX_NODE_CALL_GRAPH && !bd->cast && bd->value->gfn &&
          !bd->value->gfn->primitive) {
        RX_RETURN_IF_ERROR(inline_call(c, fr, bd, y, out, df));
        continue;
      }
      rx_binding *nb = ir_module_alloc(c->m, sizeof *nb);
      *nb = *bd;
      nb->var = y;
      nb->annot = sub_sinfo(c, fr, bd->annot);
      nb->cast = sub_sinfo(c, fr, bd->cast);
      RX_RETURN_IF_ERROR(clone_node(c, fr, bd->value, &nb->value));
      add_binding(c, out, nb, df);
    }
  }
  return NULL;
}

rx_status pass_inline_copy(rx_module *m, const rx_graph_fn *f, rx_graph_fn **out, int *out_calls) {
  *out = NULL;
  if (out_calls) *out_calls = 0;
  ictx c = {.m = m, .root = f};
  for (int i = 0; i < f->nparams; i++) base_ptrmap_put(&c.names, f->params[i]->name, 1);
  collect_names(&c, &f->body);
  frame root = {0};
  seqb sb = {0};
  rx_graph_fn *copy = ir_module_alloc(m, sizeof *copy);
  *copy = *f;
  rx_status st = emit_seq(&c, &root, &f->body, &sb, true, true);
  finish_seq(&c, &sb, &copy->body);
  if (!st) st = clone_node(&c, &root, f->body.result, &copy->body.result);
  base_ptrmap_free(&c.names);
  free(c.stack.data);
  free(root.vars.data);
  if (st) return st;
  if (out_calls) *out_calls = c.ncalls;
  *out = copy;
  return NULL;
}

bool pass_inline(rx_module *m, rx_diag *diag) {
  bool changed = false;
  for (size_t i = 0; i < m->items.len; i++) {
    if (m->items.data[i].kind != RX_ITEM_GRAPH) continue;
    rx_graph_fn *f = m->items.data[i].fn;
    if (f->primitive) continue;
    rx_graph_fn *copy = NULL;
    int calls = 0;
    rx_status st = pass_inline_copy(m, f, &copy, &calls);
    if (st) {
      base_diag_report(diag, RX_DIAG_ERROR, f->loc, "%s", rx_status_message(st));
      rx_status_free(st);
      return false;
    }
    if (calls) {
      f->body = copy->body;
      changed = true;
    }
  }
  return !changed || ops_module_normalize(m, diag);
}
