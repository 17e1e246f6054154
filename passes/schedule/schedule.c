/* passes/schedule/schedule.c: the scheduling pass: the rule table and its driver (sched_schedule,
 * sched_schedule_module), the rule names, and the bounding of grids past the target's limits.
 *
 * The accepted forms, rule by rule (the first rule that accepts a program schedules it; each
 * rule's file says how it schedules):
 *   ELEMENTWISE    the body is one nest of serial loops `for i0.., i1.. { LET... STORE... }`
 *                  whose stores index exactly a permutation of the loop variables, and whose
 *                  loads of stored buffers use the same indices as the store. Loops are
 *                  reordered to follow the store (coalesced stores), fused, split by the block
 *                  size (256 or the target's limit), bound to blockIdx.x/threadIdx.x; the tail
 *                  is guarded unless the analyzer proves the total divisible. Vectorized by
 *                  vector_bytes (16 bytes: 8 f16 or 4 f32 lanes) when the innermost extent is
 *                  provably divisible and every access that uses the innermost variable has
 *                  it as its last index.
 *   GEMV / GEMM    `for batch..., i, j { reduce k { init { C = v0 } update { C = C + P * Q } } }`
 *                  with C = c[batch..., i, j], P using i and k but not j, Q using k and j but not
 *                  i (P and Q may be casts of loads: f16 inputs with f32 accumulation); or the
 *                  same with the accumulator an `alloc acc: T[1] local` of the (i, j) body, the
 *                  reduce into acc[0] and then one store c[batch..., i, j] = E(acc[0]); with the
 *                  statements fusion leaves around the reduce (matmul.h). A row count n (extent
 *                  of i) statically 1 gives GEMV, a larger constant one GEMM; a symbolic one the
 *                  run-time variants `n == 1` (gemv), `n <= 16` (gemv_mma, gemv_batch or the
 *                  small-tile gemm), `n <= mid` (gemm_mma's 64 x 64 tiles, where it applies) and
 *                  otherwise (gemm_mma, gemm_frag or gemm): matmul.c says which kernel when.
 *   ROW_REDUCTION  `for rows... { ITEM... }` where ITEM is `alloc NAME: T[consts] local`, a
 *                  `let`, a store (not using a row-local loop), a `reduce j in 0..m { init {
 *                  LET... acc = v0 } update { LET... acc = acc + X | max(acc, X) | min(acc, X) }
 *                  }` whose X uses j only as the last index of its loads (innermost axis), or a
 *                  `for j in 0..m { ... }` stage whose stores have j as their last index. Rows
 *                  fused; T threads per row, a power of two (enough for the row in one step of
 *                  V lanes, at most a block; more to keep its inputs in registers), rows
 *                  shorter than a block sharing one (RPB = block / T of them); each REDUCE
 *                  accumulates strided partials with the combiner's identity, reduces them
 *                  across the row's threads (subgroup + shared, or a shared tree) and applies
 *                  init exactly: acc = combine(v0, total). A reduced value that is not in a
 *                  local buffer is kept in a per-thread local (the broadcast) and written to
 *                  memory by the row's first thread. The plan in full: row_reduction.c.
 *   FALLBACK       every top-level statement becomes a kernel: its outer serial loops whose
 *                  iterations write disjoint elements are fused, split and bound; the rest runs
 *                  serially per thread (or in one thread when no loop is independent). */
#include "rules.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *sched_rule_name(rx_sched_rule r) {
  static const char *names[] = {
#define X(e, n) n,
      RX_SCHED_RULES(X)
#undef X
  };
  return (unsigned)r < RX_SCHED_RULE_COUNT ? names[r] : "?";
}

/* ------------------------------------------------------------------------------------------
 * grid limits
 *
 * A block loop `for b in 0..E blockIdx.A` whose extent the analyzer cannot prove within the
 * target's max_grid_dim[A] (L; Vulkan guarantees 65535 per axis, CUDA 65535 along y and z)
 * becomes a grid-stride loop: the grid takes min(E, L) blocks along A and each block runs
 *   for b_i in 0..ceil(E / L) { if b_o + b_i * L < E { BODY[b := b_o + b_i * L] } }
 * inside the innermost block loop of the kernel (the chain of block loops stays intact). The
 * condition depends only on block indices, so it is uniform across a block and a barrier inside
 * stays legal; a body with barriers gets one more at the end of each iteration, so shared memory
 * is not overwritten while another thread still reads the previous iteration's values; its
 * top-level allocations move in front of the loop. Axes whose limit is 2^31-1 (CUDA's x) are
 * left alone: the runtime's 32-bit grid arithmetic has the same bound.
 * ------------------------------------------------------------------------------------------ */
static bool stmt_has_barrier(const rx_stmt *s) {
  if (!s) return false;
  if (s->kind == RX_STMT_BARRIER) return true;
  for (int i = 0; i < s->n; i++)
    if (stmt_has_barrier(s->body[i])) return true;
  return stmt_has_barrier(s->inner) || stmt_has_barrier(s->init) || stmt_has_barrier(s->otherwise);
}

static void bound_kernel(rx_sctx *s, rx_stmt *root) {
  rx_stmt *chain[3];
  int nc = 0;
  for (rx_stmt *k = root;;) {
    chain[nc++] = k;
    rx_stmt *in = (rx_stmt *)sched_unwrap(k->inner);
    if (nc < 3 && in && in->kind == RX_STMT_FOR &&
        (in->loop_kind == RX_LOOP_BLOCK_Y || in->loop_kind == RX_LOOP_BLOCK_Z)) {
      k = in;
      continue;
    }
    break;
  }
  const rx_expr *vars[3], *repl[3], *ext[3], *inner_vars[3];
  int64_t lim[3];
  int n = 0;
  for (int i = 0; i < nc; i++) {
    rx_stmt *k = chain[i];
    int ax = k->loop_kind - RX_LOOP_BLOCK_X;
    int64_t L = s->t->max_grid_dim[ax];
    const rx_expr *e = k->extent[0];
    if (L <= 0 || L >= 2147483647) continue;
    if (sched_proves(s, sym_expr_cmp(s->cx, RX_EXPR_LE, e, sx_const(s->cx, L)))) continue;
    const rx_expr *outer = sched_fresh_var(s, "bo"), *inner = sched_fresh_var(s, "bi");
    vars[n] = k->vars[0];
    repl[n] = sx_add(s->cx, outer, sx_mul_c(s->cx, inner, L));
    ext[n] = e;
    inner_vars[n] = inner;
    lim[n] = L;
    n++;
    const rx_expr **nv = ir_module_alloc(s->m, sizeof *nv),
                  **ne = ir_module_alloc(s->m, sizeof *ne);
    nv[0] = outer;
    ne[0] = sym_expr_min(s->cx, e, sx_const(s->cx, L));
    k->vars = nv;
    k->extent = ne;
  }
  if (!n) return;
  rx_stmt *last = chain[nc - 1];
  rx_rewrite rw = {.s = s, .vars = vars, .repl = repl, .n = n};
  rx_stmt *body = sched_rewrite_stmt(&rw, last->inner);
  /* top-level allocations stay at the top of the kernel */
  rx_stmtvec top = {0}, rest = {0};
  for (int i = 0; i < sched_seq_len(body); i++) {
    rx_stmt *st = (rx_stmt *)sched_seq_at(body, i);
    if (st->kind == RX_STMT_ALLOC)
      RX_VEC_PUSH(&top, st);
    else
      RX_VEC_PUSH(&rest, st);
  }
  bool barrier = stmt_has_barrier(body);
  const rx_expr *cond = NULL;
  for (int i = 0; i < n; i++) {
    const rx_expr *c = sym_expr_cmp(s->cx, RX_EXPR_LT, repl[i], ext[i]);
    cond = cond ? sym_expr_and(s->cx, cond, c) : c;
  }
  rx_stmt *it = sched_if(s, sched_cond(s, cond), sched_seq(s, &rest), NULL);
  if (barrier) {
    rx_stmtvec v = {0};
    RX_VEC_PUSH(&v, it);
    RX_VEC_PUSH(&v, sched_barrier(s));
    it = sched_seq(s, &v);
  }
  for (int i = n - 1; i >= 0; i--) {
    const rx_expr *trips = sym_expr_floordiv(
        s->cx, sx_add(s->cx, ext[i], sx_const(s->cx, lim[i] - 1)), sx_const(s->cx, lim[i]));
    it = sched_for(s, inner_vars[i], trips, RX_LOOP_SERIAL, it);
  }
  RX_VEC_PUSH(&top, it);
  last->inner = sched_seq(s, &top);
}

/* Every kernel root of a scheduled host-level body (sequences and ifs on symbolic values). */
static void bound_grids(rx_sctx *s, rx_stmt *st) {
  if (!st) return;
  if (st->kind == RX_STMT_SEQ) {
    for (int i = 0; i < st->n; i++) bound_grids(s, st->body[i]);
  } else if (st->kind == RX_STMT_IF) {
    size_t mk = sym_analyzer_mark(s->an);
    if (st->value && st->value->kind == RX_TX_SYM) sym_analyzer_assume(s->an, st->value->sym);
    bound_grids(s, st->inner);
    sym_analyzer_reset(s->an, mk);
    bound_grids(s, st->otherwise);
  } else if (st->kind == RX_STMT_FOR && st->loop_kind == RX_LOOP_BLOCK_X) {
    bound_kernel(s, st);
  }
}

/* ------------------------------------------------------------------------------------------
 * entry points
 * ------------------------------------------------------------------------------------------ */
static rx_tensor_fn *with_body(rx_sctx *s, rx_stmt *body) {
  rx_tensor_fn *g = ir_module_alloc(s->m, sizeof *g);
  *g = *s->f;
  g->body = sched_seq1(s, body);
  return g;
}

void sched_set_variants(rx_module *m, rx_sched_result *out, const rx_sched_variant *v, int n) {
  out->variants = ir_module_alloc(m, sizeof *out->variants * (size_t)n);
  memcpy(out->variants, v, sizeof *v * (size_t)n);
  for (int i = 0; i < n; i++)
    if (!out->variants[i].name) out->variants[i].name = sched_rule_name(v[i].rule);
  out->nvariants = n;
}

/* A reduction to a 0-d result (sum of every element) has its reduce at the top level, with no
 * output loop to give rows to blocks: it becomes one row, `for unit_row in 0..1 { body }`, which
 * the row-reduction rule schedules as one block reducing the whole extent. */
static const rx_tensor_fn *as_one_row(rx_module *m, const rx_tensor_fn *f) {
  const rx_stmt *b = sched_unwrap(f->body);
  bool top_reduce = false;
  for (int i = 0; i < sched_seq_len(b); i++)
    top_reduce |= sched_seq_at(b, i)->kind == RX_STMT_REDUCE;
  if (!top_reduce) return f;
  rx_stmt *loop = ir_stmt_new(m, RX_STMT_FOR, f->body->loc);
  loop->nvars = 1;
  loop->vars = ir_module_alloc(m, sizeof *loop->vars);
  loop->lo = ir_module_alloc(m, sizeof *loop->lo);
  loop->extent = ir_module_alloc(m, sizeof *loop->extent);
  loop->vars[0] = sym_expr_var(m->ctx, "unit_row");
  loop->lo[0] = sym_expr_const(m->ctx, 0);
  loop->extent[0] = sym_expr_const(m->ctx, 1);
  loop->loop_kind = RX_LOOP_SERIAL;
  loop->inner = f->body;
  rx_tensor_fn *g = ir_module_alloc(m, sizeof *g);
  *g = *f;
  g->body = loop;
  return g;
}

/* The rule table: tried in the order of RX_SCHED_RULES (GEMV and GEMM are one matmul rule with
 * its variants); the first that accepts a program schedules it. The fallback accepts all. A
 * matmul is tried before the row reduction, which accepts it too when the reduced operand is
 * contiguous along k (x @ W^T, the [out, in] layout of Hugging Face weights) and would give each
 * output element a block of its own. */
static bool (*const rules[])(rx_sctx *, const rx_tensor_fn *, sched_out *) = {
    sched_elementwise, sched_matmul, sched_row_reduction, sched_fallback};

/* ---- `if has_fragments(...)` (ir.h): the branch the target takes ---- */

static rx_stmt *pick_branches(rx_module *m, rx_stmt *s, const rx_target *t);

/* The statements of s's SEQ with every `if has_fragments` replaced by the statements of the
 * branch t takes (spliced in, so a host-level body stays a list of kernel roots); s itself
 * when none changed. */
static rx_stmt *pick_in_seq(rx_module *m, rx_stmt *s, const rx_target *t) {
  RX_VEC(rx_stmt *) out = {0};
  bool changed = false;
  for (int i = 0; i < s->n; i++) {
    rx_stmt *c = s->body[i], *r = pick_branches(m, c, t);
    changed |= r != c;
    if (r && r != c && r->kind == RX_STMT_SEQ && c->kind == RX_STMT_IF) {
      for (int k = 0; k < r->n; k++) RX_VEC_PUSH(&out, r->body[k]);
    } else if (r) {
      RX_VEC_PUSH(&out, r);
    }
  }
  rx_stmt *seq = s;
  if (changed) {
    seq = ir_stmt_new(m, RX_STMT_SEQ, s->loc);
    *seq = *s;
    seq->n = (int)out.len;
    seq->body = out.len ? base_arena_dup(&m->arena, out.data, sizeof(rx_stmt *) * out.len) : NULL;
  }
  free(out.data);
  return seq;
}

/* s with every `if has_fragments(...)` decided for t: the taken branch in its place (NULL when
 * that is an absent else); s itself when it holds none. */
static rx_stmt *pick_branches(rx_module *m, rx_stmt *s, const rx_target *t) {
  if (!s) return NULL;
  if (s->kind == RX_STMT_SEQ) return pick_in_seq(m, s, t);
  if (s->kind == RX_STMT_IF && s->value && s->value->kind == RX_TX_HAS_FRAG) {
    const rx_tx *c = s->value;
    bool has =
        c->test == RX_TEST_ASYNC_COPY ? tgt_target_has_async_copy(t)
        : c->test == RX_TEST_MMA
            ? tgt_target_has_mma_sync(t, c->frag_ab, c->frag_acc, c->frag_m, c->frag_n, c->frag_k)
        : c->test == RX_TEST_WGMMA
            ? tgt_target_has_wgmma(t, c->frag_ab, c->frag_acc, c->frag_m, c->frag_n, c->frag_k)
            : tgt_target_has_frag(t, c->frag_ab, c->frag_acc, c->frag_m, c->frag_n, c->frag_k);
    return pick_branches(m, has ? s->inner : s->otherwise, t);
  }
  if (s->kind != RX_STMT_FOR && s->kind != RX_STMT_REDUCE && s->kind != RX_STMT_IF) return s;
  rx_stmt *inner = pick_branches(m, s->inner, t), *init = pick_branches(m, s->init, t);
  rx_stmt *els = pick_branches(m, s->otherwise, t);
  if (inner == s->inner && init == s->init && els == s->otherwise) return s;
  rx_stmt *r = ir_stmt_new(m, s->kind, s->loc);
  *r = *s;
  r->inner = inner ? inner : ir_stmt_new(m, RX_STMT_SEQ, s->loc);
  r->init = init;
  r->otherwise = els;
  return r;
}

static const rx_tensor_fn *pick_for_target(rx_module *m, const rx_tensor_fn *f,
                                           const rx_target *t) {
  rx_stmt *b = pick_branches(m, f->body, t);
  if (b == f->body) return f;
  rx_tensor_fn *g = ir_module_alloc(m, sizeof *g);
  *g = *f;
  g->body = b ? b : ir_stmt_new(m, RX_STMT_SEQ, f->body->loc); /* f->body is a SEQ */
  return g;
}

bool sched_schedule(rx_module *m, const rx_tensor_fn *f, const rx_target *t, rx_diag *diag,
                    rx_sched_result *out) {
  memset(out, 0, sizeof *out);
  if (!f || !f->body || !t) return false;
  f = pick_for_target(m, f, t);
  f = as_one_row(m, f);
  if (sched_stmt_has_bound(f->body)) {
    if (!sched_schedule_check(f, t, diag)) return false;
    out->fn = (rx_tensor_fn *)f;
    rx_sched_variant v = {NULL, RX_SCHED_FALLBACK, NULL};
    sched_set_variants(m, out, &v, 1);
    return true;
  }
  rx_sctx s;
  sched_sctx_init(&s, m, f, t, diag);
  sched_out o = {m, out, NULL, true};
  for (size_t i = 0; i < RX_ARRAY_LEN(rules) && !rules[i](&s, f, &o); i++) {
  }
  bool ok = o.ok;
  if (ok) {
    bound_grids(&s, o.body);
    out->fn = with_body(&s, o.body);
    ok = sched_schedule_check(out->fn, t, diag);
  }
  sched_sctx_free(&s);
  if (!ok) memset(out, 0, sizeof *out);
  return ok;
}

bool sched_schedule_module(rx_module *m, const rx_target *t, rx_diag *diag) {
  bool ok = true;
  for (size_t i = 0; i < m->items.len; i++) {
    rx_item *it = &m->items.data[i];
    if (it->kind != RX_ITEM_TENSOR) continue;
    rx_sched_result r;
    if (sched_schedule(m, it->fn, t, diag, &r))
      it->fn = r.fn;
    else
      ok = false;
  }
  return ok;
}
