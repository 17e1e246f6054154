/* shard: lowers a module's global view (distributed struct info, ir.h's rx_sinfo.mesh) to the
 * local program every rank of a tensor-parallel group runs (SPMD: one program, each rank its own
 * shards of the parameters; docs/distributed.md).
 *
 * Every mesh must be one-dimensional with `world` devices (a 2-D mesh, data x tensor parallel, is
 * refused by name). Per graph function:
 *   - a parameter placed S[d] gets its local shape, dim d divided by world: a constant must
 *     divide, a symbolic dim must be provably divisible by the function's facts
 *     (`where n % 4 == 0`), otherwise the pass refuses naming the parameter and the dim; R and P
 *     parameters keep their shape;
 *   - before each op call, an operand whose placement differs from what the op's rule needs
 *     (ops_dist_rule: partial sums where the op needs the whole value, a dim the op reduces
 *     sharded) gets its collective: `allreduce(x)` for P, `allgather(x, axis=d, world=N)` for
 *     S[d]; one per value and kind, reused by later operands;
 *   - a reshape whose result is S[d] has dim d of its target shape divided (provably) by world;
 *   - the returned value is made whole: allreduce for P, allgather for S[d], so that every rank
 *     returns the global result (an LLM's logits are the same on every rank).
 * Struct info is then renormalized without placements (the meshes are dropped), which deduces the
 * local shapes. The collectives are ops until passes/legalize.c makes them call_externs of the
 * runtime's builtins (passes/legalize_dist.c). */
#include "../ops/ops.h"
#include "passes.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct sstate {
  rx_module *m;
  rx_diag *diag;
  int world;
  rx_graph_fn *g;
  rx_analyzer *an;
  RX_VEC(rx_binding *) out; /* the bindings of the block being rebuilt */
  /* collectives made so far in the function: var -> its allreduced / allgathered copy */
  rx_ptrmap reduced, gathered; /* var -> index in made */
  RX_VEC(rx_node *) made;
  int fresh;
  bool ok;
} sstate;

static void fail(sstate *st, rx_loc loc, const char *fmt, ...) RX_PRINTF(3, 4);
static void fail(sstate *st, rx_loc loc, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  base_diag_vreport(st->diag, RX_DIAG_ERROR, loc, fmt, ap);
  va_end(ap);
  st->ok = false;
}

static bool placed(const rx_sinfo *s) { return s && s->kind == RX_SINFO_TENSOR && s->mesh; }

/* e / world where provable (a constant that divides, or a fact), NULL otherwise. */
static const rx_expr *divide(sstate *st, const rx_expr *e) {
  rx_expr_ctx *c = st->m->ctx;
  const rx_expr *w = sym_expr_const(c, st->world);
  const rx_expr *rem = sym_expr_floormod(c, e, w);
  if (sym_analyzer_prove(st->an, sym_expr_cmp(c, RX_EXPR_EQ, rem, sym_expr_const(c, 0))) != RX_TRUE)
    return NULL;
  return sym_analyzer_simplify(st->an, sym_expr_floordiv(c, e, w));
}

static const char *expr_text(sstate *st, const rx_expr *e) {
  rx_strbuf b = {0};
  sym_expr_print(&b, e);
  const char *r = base_arena_strdup(&st->m->arena, b.data ? b.data : "");
  base_strbuf_free(&b);
  return r;
}

/* A parameter's local struct info. */
static const rx_sinfo *local_param(sstate *st, const rx_var *p) {
  const rx_sinfo *s = p->sinfo;
  if (!placed(s)) return s;
  const rx_sinfo *r = ir_sinfo_placed(st->m, s, NULL, NULL, 0);
  int d = s->place[0];
  if (d < 0) return r;
  if (!s->shape) {
    fail(st, p->loc, "%s: parameter '%s' is sharded along dim %d of an unknown shape", st->g->name,
         p->name, d);
    return r;
  }
  const rx_expr *q = divide(st, s->shape[d]);
  if (!q) {
    fail(st, p->loc,
         "%s: parameter '%s': dim %d (%s) cannot be proven divisible by the %d ranks (add a fact "
         "such as `where %s %% %d == 0`)",
         st->g->name, p->name, d, expr_text(st, s->shape[d]), st->world, expr_text(st, s->shape[d]),
         st->world);
    return r;
  }
  const rx_expr **dims = base_arena_dup(&st->m->arena, s->shape, sizeof *dims * (size_t)s->ndim);
  dims[d] = q;
  rx_sinfo *l = ir_module_alloc(st->m, sizeof *l);
  *l = *r;
  l->shape = dims;
  return l;
}

static const char *fresh_name(sstate *st, const char *base, const char *kind) {
  char buf[256];
  snprintf(buf, sizeof buf, "%.200s_%s%d", base, kind, st->fresh++);
  return ir_module_intern(st->m, buf, strlen(buf));
}

/* The binding `y = op(x, attrs)` appended to the block being rebuilt; returns y's node. */
static rx_node *emit(sstate *st, const char *opname, rx_node *x, rx_attr *attrs, int nattrs,
                     rx_loc loc, const char *kind) {
  rx_node *call = ir_node_new(st->m, RX_NODE_CALL, loc);
  call->op = ops_op_lookup(opname, strlen(opname));
  RX_ASSERT(call->op);
  call->callee = call->op->name;
  call->args = ir_module_alloc(st->m, sizeof *call->args);
  call->args[0] = x;
  call->nargs = 1;
  call->attrs = attrs;
  call->nattrs = nattrs;
  rx_binding *b = ir_module_alloc(st->m, sizeof *b);
  b->var = ir_var_new(st->m, fresh_name(st, x->var->name, kind), NULL, loc);
  b->value = call;
  b->loc = loc;
  RX_VEC_PUSH(&st->out, b);
  return ir_node_var(st->m, b->var, loc);
}

static rx_attr int_attr(sstate *st, const char *name, int64_t v) {
  return (rx_attr){
      .name = ir_module_intern(st->m, name, strlen(name)), .kind = RX_ATTR_INT, .i = v};
}

/* x (a variable placed `have`) made whole (replicated) on every rank. */
static rx_node *make_whole(sstate *st, rx_node *x, int have, rx_loc loc) {
  rx_ptrmap *memo = have == IR_PLACE_P ? &st->reduced : &st->gathered;
  int done = base_ptrmap_get(memo, x->var);
  if (done >= 0) return st->made.data[done];
  rx_node *y;
  if (have == IR_PLACE_P) {
    y = emit(st, "allreduce", x, NULL, 0, loc, "sum");
  } else {
    rx_attr *a = ir_module_alloc(st->m, sizeof *a * 2);
    a[0] = int_attr(st, "axis", have);
    a[1] = int_attr(st, "world", st->world);
    y = emit(st, "allgather", x, a, 2, loc, "all");
  }
  base_ptrmap_put(memo, x->var, (int)st->made.len);
  RX_VEC_PUSH(&st->made, y);
  return y;
}

/* reshape(x, [dims]) whose result is S[d]: dim d of the target divided by world. */
static void local_reshape(sstate *st, rx_node *call, int d) {
  rx_node *shape = call->nargs == 2 ? call->args[1] : NULL;
  if (!shape || shape->kind != RX_NODE_SHAPE || d >= shape->ndims) {
    fail(st, call->loc, "%s: a reshape to a sharded result needs a literal target shape",
         st->g->name);
    return;
  }
  const rx_expr *q = divide(st, shape->dims[d]);
  if (!q) {
    fail(st, call->loc,
         "%s: reshape: dim %d (%s) of the sharded result cannot be proven "
         "divisible by the %d ranks",
         st->g->name, d, expr_text(st, shape->dims[d]), st->world);
    return;
  }
  rx_node *n = ir_node_new(st->m, RX_NODE_SHAPE, shape->loc);
  n->dims = base_arena_dup(&st->m->arena, shape->dims, sizeof *n->dims * (size_t)shape->ndims);
  n->ndims = shape->ndims;
  n->dims[d] = q;
  call->args[1] = n;
}

static void lower_call(sstate *st, rx_binding *b) {
  rx_node *call = b->value;
  bool any = false;
  for (int i = 0; i < call->nargs; i++) any = any || placed(call->args[i]->sinfo);
  if (!any) return;
  int *need = base_calloc((size_t)call->nargs + 1, sizeof *need);
  rx_deduce_ctx dc = {st->m, st->an, st->diag, call->loc};
  int out;
  if (!ops_dist_rule(&dc, call, call->sinfo, 0, need, &out)) {
    st->ok = false;
  } else {
    for (int i = 0; i < call->nargs; i++) {
      rx_node *a = call->args[i];
      if (!placed(a->sinfo) || a->sinfo->place[0] == need[i]) continue;
      RX_ASSERT(need[i] == IR_PLACE_R && a->kind == RX_NODE_VAR);
      call->args[i] = make_whole(st, a, a->sinfo->place[0], call->loc);
    }
    if (call->op->id == RX_OP_reshape && out >= 0) local_reshape(st, call, out);
  }
  free(need);
}

/* Whether s is or holds (a tuple field) a distributed tensor. */
static bool holds_placed(const rx_sinfo *s) {
  if (placed(s)) return true;
  for (int i = 0; s && s->kind == RX_SINFO_TUPLE && i < s->nfields; i++)
    if (holds_placed(s->fields[i])) return true;
  return false;
}

static void blk_out_swap(sstate *st, rx_block *blk) {
  blk->bindings = base_arena_dup(&st->m->arena, st->out.data, sizeof *st->out.data * st->out.len);
  blk->nbindings = (int)st->out.len;
}

static void lower_block(sstate *st, rx_block *blk) {
  st->out.len = 0;
  for (int k = 0; k < blk->nbindings; k++) {
    rx_binding *b = blk->bindings[k];
    if (b->value && b->value->kind == RX_NODE_CALL && b->value->op && !b->cast)
      lower_call(st, b);
    else if (b->value && (b->value->kind != RX_NODE_VAR || b->cast) &&
             (holds_placed(b->var->sinfo) || holds_placed(b->value->sinfo) ||
              (b->value->kind == RX_NODE_VAR && holds_placed(b->value->var->sinfo))))
      fail(st, b->loc,
           "%s: binding '%s': only op calls of distributed tensors are lowered to ranks (not "
           "tuples, if, match_cast or calls of functions)",
           st->g->name, b->var->name);
    if (placed(b->annot) || placed(b->cast)) {
      fail(st, b->loc,
           "%s: binding '%s': an annotation or match_cast of a distributed tensor "
           "is not lowered to ranks",
           st->g->name, b->var->name);
    }
    RX_VEC_PUSH(&st->out, b);
  }
}

/* ---- symbolic sharded dims: v becomes world * v_shard in the whole function ---- */

typedef struct substs {
  RX_VEC(const rx_expr *) vars;
  RX_VEC(const rx_expr *) repl;
} substs;

static const rx_expr *sub(sstate *st, const substs *s, const rx_expr *e) {
  return e && s->vars.len ? sym_expr_subst(st->m->ctx, e, s->vars.data, s->repl.data, s->vars.len)
                          : e;
}

static const rx_sinfo *sub_sinfo(sstate *st, const substs *s, const rx_sinfo *si) {
  if (!si) return si;
  rx_sinfo *r = ir_module_alloc(st->m, sizeof *r);
  *r = *si;
  if ((si->kind == RX_SINFO_TENSOR || si->kind == RX_SINFO_SHAPE) && si->shape) {
    const rx_expr **d = ir_module_alloc(st->m, sizeof *d * (size_t)(si->ndim + 1));
    for (int i = 0; i < si->ndim; i++) d[i] = sub(st, s, si->shape[i]);
    r->shape = d;
  } else if (si->kind == RX_SINFO_PRIM) {
    r->value = sub(st, s, si->value);
  } else if (si->kind == RX_SINFO_TUPLE || si->kind == RX_SINFO_FUNC) {
    const rx_sinfo **f = ir_module_alloc(st->m, sizeof *f * (size_t)(si->nfields + 1));
    for (int i = 0; i < si->nfields; i++) f[i] = sub_sinfo(st, s, si->fields[i]);
    r->fields = f;
    r->ret = sub_sinfo(st, s, si->ret);
  }
  return r;
}

static void sub_node(sstate *st, const substs *s, rx_node *n) {
  if (!n) return;
  if (n->kind == RX_NODE_SHAPE)
    for (int i = 0; i < n->ndims; i++) n->dims[i] = sub(st, s, n->dims[i]);
  if (n->kind == RX_NODE_PRIM) n->prim = sub(st, s, n->prim);
  for (int i = 0; i < n->nattrs; i++)
    for (int k = 0; n->attrs[i].kind == RX_ATTR_EXPRS && k < n->attrs[i].n; k++)
      n->attrs[i].exprs[k] = sub(st, s, n->attrs[i].exprs[k]);
  for (int i = 0; i < n->nextra; i++) n->extra_dims[i] = sub(st, s, n->extra_dims[i]);
  n->out = sub_sinfo(st, s, n->out);
  n->sinfo = NULL;
  for (int i = 0; i < n->nargs; i++) sub_node(st, s, n->args[i]);
}

/* Each sharded dim of a parameter that is a symbolic variable v (provably divisible by world)
 * becomes world * v_shard everywhere in f, so that the local dim is the whole variable v_shard
 * (it must appear whole to be defined); a sharded dim that is another expression is refused. */
static void split_vars(sstate *st, rx_graph_fn *f) {
  substs s = {0};
  rx_expr_ctx *c = st->m->ctx;
  for (int i = 0; i < f->nparams; i++) {
    const rx_sinfo *si = f->params[i]->sinfo;
    if (!placed(si) || si->place[0] < 0 || !si->shape) continue;
    const rx_expr *e = si->shape[si->place[0]];
    if (e->kind == RX_EXPR_CONST) continue;
    bool seen = false;
    for (size_t k = 0; k < s.vars.len; k++) seen = seen || s.vars.data[k] == e;
    if (seen) continue;
    if (e->kind != RX_EXPR_VAR) {
      fail(st, f->params[i]->loc,
           "%s: parameter '%s' is sharded along dim %d (%s): shard a constant or a symbolic "
           "variable",
           f->name, f->params[i]->name, si->place[0], expr_text(st, e));
      continue;
    }
    if (!divide(st, e)) continue; /* local_param names it */
    char buf[256];
    snprintf(buf, sizeof buf, "%.200s_shard", e->name);
    RX_VEC_PUSH(&s.vars, e);
    RX_VEC_PUSH(&s.repl, sym_expr_mul(c, sym_expr_const(c, st->world), sym_expr_var(c, buf)));
  }
  if (s.vars.len) {
    for (int i = 0; i < f->nparams; i++)
      f->params[i]->sinfo = sub_sinfo(st, &s, f->params[i]->sinfo);
    int nf = 0;
    for (int i = 0; i < f->nfacts; i++) {
      const rx_expr *e = sub(st, &s, f->facts[i]);
      if (rx_expr_is_const(e, 1)) continue; /* `n % 4 == 0` is now true by construction */
      if (f->fact_locs) f->fact_locs[nf] = f->fact_locs[i];
      f->facts[nf++] = e;
    }
    f->nfacts = nf;
    for (int i = 0; i < f->body.nblocks; i++)
      for (int k = 0; k < f->body.blocks[i]->nbindings; k++) {
        rx_binding *b = f->body.blocks[i]->bindings[k];
        sub_node(st, &s, b->value);
        b->annot = sub_sinfo(st, &s, b->annot);
        b->cast = sub_sinfo(st, &s, b->cast);
      }
  }
  free(s.vars.data);
  free(s.repl.data);
}

/* The returned value (a variable or a tuple of them) made whole. */
static rx_node *whole_result(sstate *st, rx_node *r) {
  if (r && r->kind == RX_NODE_VAR && placed(r->sinfo) && r->sinfo->place[0] != IR_PLACE_R)
    return make_whole(st, r, r->sinfo->place[0], r->loc);
  if (r && r->kind == RX_NODE_TUPLE)
    for (int i = 0; i < r->nargs; i++) r->args[i] = whole_result(st, r->args[i]);
  return r;
}

/* Rebuilds the blocks of f with the collectives inserted; the result made whole. */
static void lower_fn(sstate *st, rx_graph_fn *f) {
  st->g = f;
  st->an = sym_analyzer_new(st->m->ctx);
  st->fresh = 0;
  for (int i = 0; i < f->nparams; i++) {
    const rx_sinfo *s = f->params[i]->sinfo;
    for (int d = 0; s && s->kind == RX_SINFO_TENSOR && s->shape && d < s->ndim; d++)
      sym_analyzer_assume(
          st->an, sym_expr_cmp(st->m->ctx, RX_EXPR_GE, s->shape[d], sym_expr_const(st->m->ctx, 0)));
  }
  for (int i = 0; i < f->nfacts; i++) sym_analyzer_assume(st->an, f->facts[i]);
  rx_seq *seq = &f->body;
  for (int i = 0; i < seq->nblocks; i++) { /* the rules see the global struct info */
    lower_block(st, seq->blocks[i]);
    blk_out_swap(st, seq->blocks[i]);
  }
  split_vars(st, f);
  for (int i = 0; i < f->nparams; i++) f->params[i]->sinfo = local_param(st, f->params[i]);
  for (int i = 0; i < seq->nblocks; i++) {
    rx_block *blk = seq->blocks[i];
    st->out.len = 0;
    for (int k = 0; k < blk->nbindings; k++) RX_VEC_PUSH(&st->out, blk->bindings[k]);
    if (i == seq->nblocks - 1) seq->result = whole_result(st, seq->result);
    blk->bindings = base_arena_dup(&st->m->arena, st->out.data, sizeof *st->out.data * st->out.len);
    blk->nbindings = (int)st->out.len;
  }
  if (seq->nblocks == 0 && seq->result && placed(seq->result->sinfo))
    fail(st, f->loc, "%s: a function without bindings returns a distributed value", f->name);
  f->ret = NULL;
  base_ptrmap_free(&st->reduced);
  base_ptrmap_free(&st->gathered);
  sym_analyzer_free(st->an);
  st->an = NULL;
}

bool pass_shard(rx_module *m, int world, rx_diag *diag) {
  if (m->meshes.len == 0) return true; /* nothing distributed: every rank runs it whole */
  if (!ops_module_normalize(m, diag)) return false;
  sstate st = {.m = m, .diag = diag, .world = world, .ok = true};
  for (size_t i = 0; i < m->meshes.len; i++) {
    const rx_mesh *me = &m->meshes.data[i];
    if (me->ndim != 1 || me->shape[0] != world)
      fail(&st, me->loc,
           "mesh '%s' must be one axis of %d devices to be lowered to %d ranks "
           "(a multi-axis mesh is not supported yet)",
           me->name, world, world);
  }
  const bool mesh_bad = !st.ok; /* then nothing is lowered */
  bool bad = mesh_bad;
  for (size_t i = 0; !mesh_bad && i < m->items.len; i++) /* each function's errors reported */
    if (m->items.data[i].kind == RX_ITEM_GRAPH) {
      lower_fn(&st, m->items.data[i].fn);
      bad = bad || !st.ok;
      st.ok = true;
    }
  st.ok = !bad;
  free(st.out.data);
  free(st.made.data);
  if (!st.ok) return false;
  m->meshes.len = 0;
  return ops_module_normalize(m, diag);
}

bool pass_shard_module(rx_module *m, rx_diag *diag) {
  int world = m->meshes.len && m->meshes.data[0].ndim >= 1 ? (int)m->meshes.data[0].shape[0] : 1;
  return pass_shard(m, world, diag);
}

/* ---- the weights of one rank ---- */

/* Weight w (the module's entry) replaced by block rank of world along dim d. */
static bool slice_weight(rx_module *m, rx_weight *w, int d, int world, int rank, rx_diag *diag) {
  if (d >= w->ndim || w->shape[d] % world != 0) {
    base_diag_report(diag, RX_DIAG_ERROR, (rx_loc){0},
                     "weight '%s': dim %d does not divide among %d ranks", w->name, d, world);
    return false;
  }
  int64_t *shape = base_arena_dup(&m->arena, w->shape, sizeof *shape * (size_t)(w->ndim + 1));
  shape[d] /= world;
  int bits = ir_dtype_bits(w->src_dtype);
  if (w->src && bits % 8 != 0) {
    base_diag_report(diag, RX_DIAG_ERROR, (rx_loc){0},
                     "weight '%s': a %s weight cannot be sharded (not whole bytes per element)",
                     w->name, ir_dtype_name(w->src_dtype));
    return false;
  }
  int64_t outer = 1, inner = (int64_t)(bits / 8), blk;
  for (int k = 0; k < d; k++) outer *= w->shape[k];
  for (int k = d + 1; k < w->ndim; k++) inner *= w->shape[k];
  blk = shape[d] * inner;
  if (w->src) {
    uint8_t *dst = malloc((size_t)(outer * blk) + 1);
    for (int64_t o = 0; o < outer; o++)
      memcpy(dst + o * blk, (const uint8_t *)w->src + o * w->shape[d] * inner + rank * blk,
             (size_t)blk);
    rx_module_on_free(m, free, dst);
    w->src = dst;
  }
  w->bytes = w->bytes / (uint64_t)world;
  w->shape = shape;
  return true;
}

bool pass_shard_weights(rx_module *m, int world, int rank, rx_diag *diag) {
  rx_ptrmap done = {0};
  bool ok = true;
  for (size_t i = 0; ok && i < m->items.len; i++) {
    if (m->items.data[i].kind != RX_ITEM_GRAPH) continue;
    const rx_graph_fn *f = m->items.data[i].fn;
    for (int k = 0; ok && k < f->nparams; k++) {
      const rx_sinfo *s = f->params[k]->sinfo;
      const rx_weight *cw = ir_module_weight(m, f->params[k]->name);
      if (!cw || !placed(s) || s->place[0] < 0 || base_ptrmap_get(&done, cw->name) >= 0) continue;
      base_ptrmap_put(&done, cw->name, 1);
      ok = slice_weight(m, &m->weights.data[cw - m->weights.data], s->place[0], world, rank, diag);
    }
  }
  base_ptrmap_free(&done);
  return ok;
}
