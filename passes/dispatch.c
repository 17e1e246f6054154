/* dispatch: the Relax paper's cross-level dispatch. Large matmuls go to a library through
 * call_extern (on CUDA: cuBLASLt, the runtime's builtin rx_cublaslt_matmul, runtime/cuda/
 * cublaslt.c); small ones keep the generated kernels. "Large" is a row count that is often known
 * only at run time (a prefill's n), so the choice is a graph-level `if` on it:
 *
 *   dataflow {                                # x: f16[n, 4096], w: f16[11008, 4096]
 *     wt = permute(w, axes=[1, 0])
 *     y = matmul(x, wt)
 *     z = silu(y)
 *   }
 * becomes (the dataflow block split around the matmul)
 *   y = if 17 <= n {
 *     y_lib = call_extern(rx_cublaslt_matmul, x, w, 1, out=f16[n, 11008])   # 1: w transposed
 *     y_lib
 *   } else {
 *     dataflow { wt_gen = permute(w, axes=[1, 0]); y_gen = matmul(x, wt_gen) }
 *     y_gen
 *   }
 *   dataflow { z = silu(y) }
 *
 * Which matmuls: op `matmul` of f16, bf16 or f32 tensors of known shapes, A of rank >= 2; B of
 * rank 2 (broadcast over A's leading dims: one GEMM of all rows), or of A's rank with the same
 * leading dims (a strided batch). B written as permute(W) that swaps its last two axes (the
 * Hugging Face Linear layout, x @ W^T) is passed as W with the transpose flag: the library's op
 * flag transposes it, nothing copies it; the permute moves into the else branch when the matmul
 * is its only use, so that fusion still folds it into the generated kernel there. The rows are
 * the product of A's dims but the last; where the function's facts decide the comparison (a
 * constant row count, decode's `where b <= 16`), it is decided here, with no `if`. The run
 * time meaning of the extern is exactly the matmul (interp/graph_interp.c computes it on the
 * host). Epilogues (a bias add after the matmul) stay separate bindings after the `if`. */
#include "../ops/ops.h"
#include "passes.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The builtin's declaration: A, B (W when transposed), the transpose flag of B; it makes its
 * result (out= at each call gives the exact struct info). */
static const char extern_text[] = "extern_fn " RX_DISPATCH_CUBLASLT_MATMUL
                                  "(a: any[...], b: any[...], trans_b: Prim(i64)) -> any[...]\n";

typedef RX_VEC(rx_block *) blockvec;

typedef struct dctx {
  rx_module *m;
  rx_graph_fn *fn;
  const rx_dispatch_options *o;
  rx_varvec uses;  /* every variable read in fn, with repeats */
  int made;        /* fresh names made in fn */
  rx_analyzer *an; /* fn's facts and its shapes' dims >= 0: decides rows it can */
} dctx;

static bool is_op(const rx_node *n, rx_op_id id) {
  return n && n->kind == RX_NODE_CALL && n->op && n->op->id == id;
}

static bool lib_dtype(rx_dtype t) {
  return t == RX_DTYPE_F16 || t == RX_DTYPE_BF16 || t == RX_DTYPE_F32;
}

static bool known_tensor(const rx_sinfo *s) {
  return s && s->kind == RX_SINFO_TENSOR && s->shape && s->ndim >= 2 && lib_dtype(s->dtype);
}

/* Does permute call p swap the last two of nd axes and keep the others? */
static bool swaps_last_two(const rx_node *p, int nd) {
  for (int i = 0; i < p->nattrs; i++) {
    const rx_attr *a = &p->attrs[i];
    if (strcmp(a->name, "axes")) continue;
    if (a->n != nd) return false;
    for (int d = 0; d < nd - 2; d++)
      if (a->ints[d] != d) return false;
    return a->ints[nd - 2] == nd - 1 && a->ints[nd - 1] == nd - 2;
  }
  return nd == 2; /* no axes: reversed */
}

static int use_count(const dctx *c, const rx_var *v) {
  int k = 0;
  for (size_t i = 0; i < c->uses.len; i++) k += c->uses.data[i] == v;
  return k;
}

/* What the library is given for matmul binding bi of blk: B's source (W under a transposing
 * permute of the same block, else the operand itself) and the permute binding's index (-1). */
typedef struct cand {
  rx_var *a, *b;
  bool trans;
  int perm; /* the permute binding in blk, or -1 */
  const rx_expr *rows;
} cand;

static bool candidate(const dctx *c, const rx_block *blk, int bi, cand *out) {
  const rx_node *mm = blk->bindings[bi]->value;
  if (!is_op(mm, RX_OP_matmul) || mm->nargs != 2 || mm->args[0]->kind != RX_NODE_VAR ||
      mm->args[1]->kind != RX_NODE_VAR)
    return false;
  memset(out, 0, sizeof *out);
  out->a = mm->args[0]->var;
  out->b = mm->args[1]->var;
  out->perm = -1;
  for (int i = 0; i < bi; i++) {
    const rx_binding *p = blk->bindings[i];
    if (p->var != out->b || !is_op(p->value, RX_OP_permute) ||
        p->value->args[0]->kind != RX_NODE_VAR)
      continue;
    rx_var *w = p->value->args[0]->var;
    if (known_tensor(w->sinfo) && swaps_last_two(p->value, w->sinfo->ndim)) {
      out->b = w;
      out->trans = true;
      out->perm = i;
    }
  }
  const rx_sinfo *sa = out->a->sinfo, *sb = out->b->sinfo;
  if (!known_tensor(sa) || !known_tensor(sb) || sa->dtype != sb->dtype) return false;
  if (sb->ndim != 2) { /* a strided batch: the same leading dims */
    if (sb->ndim != sa->ndim) return false;
    for (int d = 0; d < sa->ndim - 2; d++)
      if (sa->shape[d] != sb->shape[d]) return false;
  }
  const rx_sinfo *sy = blk->bindings[bi]->var->sinfo;
  if (!sy || sy->kind != RX_SINFO_TENSOR || !sy->shape || sy->dtype != sa->dtype) return false;
  out->rows = sym_expr_const(c->m->ctx, 1);
  for (int d = 0; d < sa->ndim - 1; d++)
    out->rows = sym_expr_mul(c->m->ctx, out->rows, sa->shape[d]);
  return true;
}

/* min_rows <= rows */
static const rx_expr *threshold(const dctx *c, const cand *k) {
  return sym_expr_cmp(c->m->ctx, RX_EXPR_LE, sym_expr_const(c->m->ctx, c->o->min_rows), k->rows);
}

static rx_var *fresh_var(dctx *c, const rx_var *like, const char *suffix) {
  char name[160];
  snprintf(name, sizeof name, "%.100s_%s%d", like->name, suffix, c->made++);
  return ir_var_new(c->m, name, NULL, like->loc);
}

static rx_binding *binding(dctx *c, rx_var *v, rx_node *value) {
  rx_binding *b = ir_module_alloc(c->m, sizeof *b);
  b->var = v;
  b->value = value;
  b->loc = value->loc;
  return b;
}

static rx_seq *branch(dctx *c, rx_binding **bs, int n, bool dataflow) {
  rx_seq *s = ir_module_alloc(c->m, sizeof *s);
  rx_block *blk = ir_module_alloc(c->m, sizeof *blk);
  blk->dataflow = dataflow;
  blk->bindings = ir_module_alloc(c->m, sizeof *bs * (size_t)(n + 1));
  for (int i = 0; i < n; i++) blk->bindings[blk->nbindings++] = bs[i];
  blk->loc = bs[0]->loc;
  s->blocks = ir_module_alloc(c->m, sizeof *s->blocks);
  s->blocks[0] = blk;
  s->nblocks = 1;
  s->result = ir_node_var(c->m, bs[n - 1]->var, bs[n - 1]->loc);
  return s;
}

/* call_extern(rx_cublaslt_matmul, A, B, trans, out=y's struct info) */
static rx_node *library_call(dctx *c, const cand *k, const rx_binding *mb) {
  rx_loc loc = mb->value->loc;
  rx_node *call = ir_node_new(c->m, RX_NODE_CALL_EXTERN, loc);
  call->callee =
      ir_module_intern(c->m, RX_DISPATCH_CUBLASLT_MATMUL, strlen(RX_DISPATCH_CUBLASLT_MATMUL));
  call->ext = ir_module_extern_fn(c->m, call->callee);
  call->nargs = 3;
  call->args = ir_module_alloc(c->m, sizeof *call->args * 4);
  call->args[0] = ir_node_var(c->m, k->a, loc);
  call->args[1] = ir_node_var(c->m, k->b, loc);
  call->args[2] = ir_node_int(c->m, RX_DTYPE_I64, sym_expr_const(c->m->ctx, k->trans), loc);
  call->out = mb->var->sinfo;
  return call;
}

/* The if of matmul binding mb (perm: the permute binding moved into its else branch, or NULL). */
static rx_node *dispatch_if(dctx *c, const cand *k, rx_binding *mb, const rx_binding *perm) {
  rx_loc loc = mb->value->loc;
  rx_binding *lib = binding(c, fresh_var(c, mb->var, "lib"), library_call(c, k, mb));
  rx_binding *gen[2];
  int ngen = 0;
  rx_node *mm = ir_node_new(c->m, RX_NODE_CALL, loc);
  *mm = *mb->value;
  mm->sinfo = NULL;
  if (perm) {
    rx_node *p = ir_node_new(c->m, RX_NODE_CALL, perm->value->loc);
    *p = *perm->value;
    p->sinfo = NULL;
    gen[ngen] = binding(c, fresh_var(c, perm->var, "gen"), p);
    mm->args = ir_module_alloc(c->m, sizeof *mm->args * 3);
    mm->args[0] = mb->value->args[0];
    mm->args[1] = ir_node_var(c->m, gen[ngen++]->var, loc);
  }
  gen[ngen] = binding(c, fresh_var(c, mb->var, "gen"), mm);
  ngen++;
  rx_node *n = ir_node_new(c->m, RX_NODE_IF, loc);
  n->cond = ir_node_int(
      c->m, RX_DTYPE_BOOL,
      sym_expr_cmp(c->m->ctx, RX_EXPR_LE, sym_expr_const(c->m->ctx, c->o->min_rows), k->rows), loc);
  n->then_seq = branch(c, &lib, 1, true);
  n->else_seq = branch(c, gen, ngen, true);
  return n;
}

static rx_block *sub_block(dctx *c, const rx_block *from, bool dataflow, int cap) {
  rx_block *b = ir_module_alloc(c->m, sizeof *b);
  b->dataflow = dataflow;
  b->loc = from->loc;
  b->bindings = ir_module_alloc(c->m, sizeof *b->bindings * (size_t)(cap + 1));
  return b;
}

/* Splits blk at each dispatched matmul with a symbolic row count, appending the pieces to out;
 * one the facts decide is decided in place. */
static void dispatch_block(dctx *c, rx_block *blk, blockvec *out) {
  rx_block *cur = sub_block(c, blk, blk->dataflow, blk->nbindings);
  for (int i = 0; i < blk->nbindings; i++) {
    rx_binding *b = blk->bindings[i];
    cand k;
    rx_tribool large =
        candidate(c, blk, i, &k) ? sym_analyzer_prove(c->an, threshold(c, &k)) : RX_FALSE;
    if (large == RX_FALSE) { /* never large enough (or not for the library) */
      cur->bindings[cur->nbindings++] = b;
      continue;
    }
    if (large == RX_TRUE) { /* large at every call */
      b->value = library_call(c, &k, b);
      cur->bindings[cur->nbindings++] = b;
      continue;
    }
    const rx_binding *perm = NULL;
    if (k.perm >= 0 && use_count(c, blk->bindings[k.perm]->var) == 1) {
      perm = blk->bindings[k.perm]; /* only the matmul reads it: into the else branch */
      for (int j = 0; j < cur->nbindings; j++)
        if (cur->bindings[j] == perm) {
          memmove(&cur->bindings[j], &cur->bindings[j + 1],
                  sizeof *cur->bindings * (size_t)(cur->nbindings - j - 1));
          cur->nbindings--;
          break;
        }
    }
    rx_node *n = dispatch_if(c, &k, b, perm);
    if (cur->nbindings) RX_VEC_PUSH(out, cur);
    rx_block *mid = sub_block(c, blk, false, 1);
    b->value = n;
    mid->bindings[mid->nbindings++] = b;
    RX_VEC_PUSH(out, mid);
    cur = sub_block(c, blk, blk->dataflow, blk->nbindings);
  }
  if (cur->nbindings || !out->len) RX_VEC_PUSH(out, cur);
}

/* The dims of a parameter's tensors are sizes: >= 0 (so rows of several dims are bounded). */
static void assume_dims(rx_analyzer *an, const rx_sinfo *s) {
  if (!s) return;
  if (s->kind == RX_SINFO_TENSOR && s->shape)
    for (int d = 0; d < s->ndim; d++)
      if (s->shape[d]->kind == RX_EXPR_VAR)
        sym_analyzer_assume(an, sym_expr_cmp(sym_analyzer_ctx(an), RX_EXPR_LE,
                                             sym_expr_const(sym_analyzer_ctx(an), 0), s->shape[d]));
  if (s->kind == RX_SINFO_TUPLE)
    for (int i = 0; i < s->nfields; i++) assume_dims(an, s->fields[i]);
}

static void dispatch_fn(dctx *c, rx_graph_fn *fn) {
  c->fn = fn;
  c->made = 0;
  c->uses.len = 0;
  c->an = sym_analyzer_new(c->m->ctx);
  for (int p = 0; p < fn->nparams; p++) assume_dims(c->an, fn->params[p]->sinfo);
  for (int i = 0; i < fn->nfacts; i++) sym_analyzer_assume(c->an, fn->facts[i]);
  for (int bi = 0; bi < fn->body.nblocks; bi++)
    for (int i = 0; i < fn->body.blocks[bi]->nbindings; i++)
      ir_node_uses(fn->body.blocks[bi]->bindings[i]->value, &c->uses);
  if (fn->body.result) ir_node_uses(fn->body.result, &c->uses);
  blockvec blocks = {0};
  for (int bi = 0; bi < fn->body.nblocks; bi++) {
    rx_block *blk = fn->body.blocks[bi];
    if (blk->dataflow)
      dispatch_block(c, blk, &blocks);
    else
      RX_VEC_PUSH(&blocks, blk);
  }
  fn->body.blocks = ir_module_alloc(c->m, sizeof *fn->body.blocks * (blocks.len + 1));
  for (size_t i = 0; i < blocks.len; i++) fn->body.blocks[i] = blocks.data[i];
  fn->body.nblocks = (int)blocks.len;
  free(blocks.data);
  sym_analyzer_free(c->an);
}

bool pass_dispatch(rx_module *m, const rx_dispatch_options *o, rx_diag *diag) {
  if (!o || o->library == RX_DISPATCH_NONE) return true;
  if (o->min_rows < 1) {
    base_diag_report(diag, RX_DIAG_ERROR, (rx_loc){0},
                     "dispatch: the row threshold must be at least 1, got %lld",
                     (long long)o->min_rows);
    return false;
  }
  if (!ir_module_extern_fn(m, RX_DISPATCH_CUBLASLT_MATMUL) &&
      !ir_parse_module(m, "<library dispatch>", extern_text, strlen(extern_text), diag))
    return false;
  if (!ops_module_normalize(m, diag)) return false;
  dctx c = {.m = m, .o = o};
  size_t n = m->items.len;
  for (size_t i = 0; i < n; i++)
    if (m->items.data[i].kind == RX_ITEM_GRAPH && !((rx_graph_fn *)m->items.data[i].fn)->primitive)
      dispatch_fn(&c, m->items.data[i].fn);
  free(c.uses.data);
  return true;
}
