/* Lowering: split a scheduled program into kernels and fix each kernel's ABI.
 *
 * Host level (passes/schedule.h): a SEQ of kernel roots (a FOR bound to a blockIdx axis,
 * directly nesting the FORs bound to the other block axes it uses) and IFs over symbolic values
 * (specializations). Each root becomes one kernel; the IFs on the path to it become its
 * condition (then: the IF's condition, else: its negation; joined with &&). A run of other
 * host statements (a program whose whole body is one block, e.g. only threadIdx loops) becomes
 * a kernel of one block.
 *
 * For each kernel this file computes: the buffers it uses (program parameter order), which of
 * them it writes, the symbolic values it uses (sorted by name), the grid (block-loop extents),
 * the block (largest extent bound to each threadIdx axis), the shared allocations (hoisted; the
 * total checked against the target), and the index width: 32-bit when the analyzer proves,
 * under the program's facts and the loop ranges, that every symbolic (index) expression of the
 * kernel, every subexpression of it, every flattened offset and every used buffer's size lies
 * in int32; 64-bit otherwise. */
#include "cg_int.h"

#include <stdlib.h>
#include <string.h>

#define I32_MIN (-2147483647LL - 1)
#define I32_MAX 2147483647LL

int cg_param_of(const rx_tensor_fn *f, const rx_buffer *b) {
  for (int i = 0; i < f->nparams; i++)
    if (f->params[i]->kind == RX_PARAM_BUFFER && f->params[i]->buf == b) return i;
  return -1;
}

rx_analyzer *cg_analyzer(rx_module *m, const rx_tensor_fn *f) {
  rx_analyzer *an = sym_analyzer_new(m->ctx);
  rx_expr_ctx *c = m->ctx;
  for (int i = 0; i < f->nparams; i++) {
    const rx_param *p = f->params[i];
    if (p->kind == RX_PARAM_SCALAR) {
      sym_analyzer_assume(an, sym_expr_cmp(c, RX_EXPR_LE, sym_expr_const(c, I32_MIN), p->var));
      sym_analyzer_assume(an, sym_expr_cmp(c, RX_EXPR_LE, p->var, sym_expr_const(c, I32_MAX)));
      continue;
    }
    for (int d = 0; d < p->buf->ndim; d++) {
      const rx_expr *e = p->buf->shape[d];
      if (e->kind != RX_EXPR_VAR) continue;
      sym_analyzer_assume(an, sym_expr_cmp(c, RX_EXPR_LE, sym_expr_const(c, 0), e));
      sym_analyzer_assume(an, sym_expr_cmp(c, RX_EXPR_LE, e, sym_expr_const(c, I32_MAX)));
    }
  }
  for (int i = 0; i < f->nfacts; i++) sym_analyzer_assume(an, f->facts[i]);
  return an;
}

const rx_expr *cg_flat_index(rx_module *m, rx_analyzer *an, const rx_buffer *buf, rx_tx **idx,
                             int n) {
  rx_expr_ctx *c = m->ctx;
  const rx_expr *flat = sym_expr_const(c, 0);
  for (int d = 0; d < n; d++) {
    const rx_expr *i;
    if (idx[d]->kind == RX_TX_SYM)
      i = idx[d]->sym;
    else if (idx[d]->kind == RX_TX_INT)
      i = sym_expr_const(c, idx[d]->ival);
    else
      return NULL;
    flat = sym_expr_add(c, sym_expr_mul(c, flat, buf->shape[d]), i);
  }
  return sym_analyzer_simplify(an, flat);
}

void cg_bind_loop(rx_analyzer *an, const rx_stmt *s) {
  sym_analyzer_bind_range(an, s->vars[0], s->lo[0], s->extent[0]);
}

/* ---- the walk over one kernel's body ------------------------------------------------------ */

typedef struct lw {
  cg_kernel *ck;
  rx_analyzer *an;
  rx_diag *diag;
  bool failed;
  bool fits32;
  bool *used, *written; /* per parameter */
  rx_ptrvec vars;       /* symbolic variables used (not loop variables) */
  rx_ptrvec loopvars;
  RX_VEC(cg_shared) shared;
  int64_t shared_bytes;
  int block[3];
  rx_ptrvec checks; /* messages of the run-time checks, each once */
} lw;

static void lerr(lw *w, rx_loc loc, const char *fmt, const char *arg) {
  w->failed = true;
  base_diag_report(w->diag, RX_DIAG_ERROR, loc, fmt, arg);
}

static bool is_loopvar(lw *w, const rx_expr *v) {
  for (size_t i = 0; i < w->loopvars.len; i++)
    if (w->loopvars.data[i] == v) return true;
  return false;
}

/* Records the symbolic values of e and checks that e and its parts fit in int32. */
static void see_expr(lw *w, const rx_expr *e) {
  if (!e) return;
  if (e->kind == RX_EXPR_VAR) {
    if (!is_loopvar(w, e)) {
      bool have = false;
      for (size_t i = 0; i < w->vars.len; i++) have |= w->vars.data[i] == e;
      if (!have) base_ptrvec_push(&w->vars, (void *)e);
    }
  }
  if (w->fits32 && !sym_expr_is_bool(e)) {
    rx_interval r = sym_analyzer_bounds(w->an, e);
    if (r.lo < I32_MIN || r.hi > I32_MAX) w->fits32 = false;
  }
  see_expr(w, e->a);
  see_expr(w, e->b);
  see_expr(w, e->c);
}

static void see_access(lw *w, rx_buffer *b, rx_tx **idx, int n, bool store, rx_loc loc);

static void see_tx(lw *w, const rx_tx *e) {
  if (!e) return;
  switch (e->kind) {
  case RX_TX_SYM:
    see_expr(w, sym_analyzer_simplify(w->an, e->sym));
    break;
  case RX_TX_LOAD:
    for (int i = 0; i < e->nidx; i++) see_tx(w, e->idx[i]);
    see_access(w, e->buf, e->idx, e->nidx, false, e->loc);
    break;
  case RX_TX_CALL:
    if (ir_intrinsic_kind(e->intrin) == 'c') {
      bool have = false;
      for (size_t i = 0; i < w->checks.len; i++)
        have |= e->msg && !strcmp(w->checks.data[i], e->msg);
      if (!have && e->msg) base_ptrvec_push(&w->checks, (void *)e->msg);
      break;
    }
    if (ir_intrinsic_kind(e->intrin) != 's') break;
    w->ck->uses_subgroup = true;
    if (w->ck->t->subgroup_arithmetic && !tgt_target_subgroup_dtype(w->ck->t, e->dtype)) {
      w->failed = true;
      base_diag_report(w->diag, RX_DIAG_ERROR, e->loc,
                       "a subgroup operation on %s: target '%s' has subgroup arithmetic on 32-bit "
                       "types only here (Vulkan: shaderSubgroupExtendedTypes is optional; MSL: no "
                       "64-bit simd_sum)",
                       ir_dtype_name(e->dtype), w->ck->t->name);
    }
    break;
  case RX_TX_HAS_FRAG: /* sched_schedule decides it for the target: not in a kernel */
    w->failed = true;
    base_diag_report(w->diag, RX_DIAG_ERROR, e->loc,
                     "has_fragments(...) in a kernel: only rx_schedule decides it (schedule the "
                     "program for the target first)");
    break;
  default:
    break;
  }
  see_tx(w, e->a);
  see_tx(w, e->b);
  see_tx(w, e->c);
}

static void see_access(lw *w, rx_buffer *b, rx_tx **idx, int n, bool store, rx_loc loc) {
  int p = cg_param_of(w->ck->fn, b);
  if (p >= 0) {
    w->used[p] = true;
    if (store) w->written[p] = true;
    for (int d = 0; d < b->ndim; d++) see_expr(w, b->shape[d]);
  }
  const rx_expr *flat = cg_flat_index(w->ck->m, w->an, b, idx, n);
  if (flat) see_expr(w, flat);
}

static int64_t const_elems(const rx_buffer *b) {
  int64_t n = 1;
  for (int d = 0; d < b->ndim; d++) {
    if (b->shape[d]->kind != RX_EXPR_CONST || b->shape[d]->value < 0) return -1;
    if (b->shape[d]->value && n > INT64_MAX / 4 / b->shape[d]->value) return -1;
    n *= b->shape[d]->value;
  }
  return n;
}

static int dtype_bytes(rx_dtype t) {
  int b = ir_dtype_bits(t) / 8;
  return b ? b : 1;
}

/* Whether x is a matrix unit of subgroup fragments (RX_STMT_FRAG): Vulkan's cooperative
 * matrices, Metal's simdgroup_matrix, CUDA's 16x16x16 fragments over mma.sync. */
static bool frag_api(const rx_mma_shape *x) {
  return x->api == RX_MMA_COOP || x->api == RX_MMA_SIMDGROUP || x->api == RX_MMA_SYNC_FRAG;
}

/* The subgroup matrix-unit shape of t (frag_api) that a fragment of use u, dtype and rows x cols
 * can take part in; NULL: none. */
static const rx_mma_shape *frag_shape(const rx_target *t, rx_frag_use u, rx_dtype dt, int64_t rows,
                                      int64_t cols) {
  for (int i = 0; i < t->nmma; i++) {
    const rx_mma_shape *x = &t->mma[i];
    if (!frag_api(x)) continue;
    if ((u == RX_FRAG_A && x->ab == dt && x->m == rows && x->k == cols) ||
        (u == RX_FRAG_B && x->ab == dt && x->k == rows && x->n == cols) ||
        (u == RX_FRAG_ACC && x->acc == dt && x->m == rows && x->n == cols))
      return x;
  }
  return NULL;
}

/* A fragment's ALLOC or a frag statement (ir.h, RX_STMT_FRAG) against the target's matrix units
 * (target.h, `.mma`); load and store operands as memory accesses. */
static void see_frag(lw *w, rx_stmt *s) {
  const rx_target *t = w->ck->t;
  w->ck->uses_frag = true;
  w->ck->uses_subgroup = true; /* the fragment belongs to a subgroup: the runtime pins its size */
  if (s->kind == RX_STMT_ALLOC) {
    const rx_buffer *b = s->buf;
    if (!frag_shape(t, b->frag, b->dtype, b->shape[0]->value, b->shape[1]->value)) {
      w->failed = true;
      base_diag_report(
          w->diag, RX_DIAG_ERROR, s->loc,
          "fragment '%s' (%s %lldx%lld, use %s): target '%s' has no subgroup matrix unit of that "
          "shape and dtype (relaxc targets lists them)",
          b->name, ir_dtype_name(b->dtype), (long long)b->shape[0]->value,
          (long long)b->shape[1]->value, ir_frag_use_name(b->frag), t->name);
    }
    return;
  }
  if (s->frag_op == RX_FRAG_OP_MMA) {
    const rx_buffer *a = s->mma_a, *d = s->buf;
    bool ok = false;
    for (int i = 0; i < t->nmma; i++) {
      const rx_mma_shape *x = &t->mma[i];
      ok |= frag_api(x) && x->ab == a->dtype && x->acc == d->dtype && x->m == d->shape[0]->value &&
            x->n == d->shape[1]->value && x->k == a->shape[1]->value;
    }
    if (!ok) {
      w->failed = true;
      base_diag_report(w->diag, RX_DIAG_ERROR, s->loc,
                       "frag mma %lldx%lldx%lld %s -> %s: target '%s' has no such matrix unit",
                       (long long)d->shape[0]->value, (long long)d->shape[1]->value,
                       (long long)a->shape[1]->value, ir_dtype_name(a->dtype),
                       ir_dtype_name(d->dtype), t->name);
    }
    return;
  }
  see_tx(w, s->value);
  if (s->frag_op == RX_FRAG_OP_FILL) return;
  for (int i = 0; i < s->nidx; i++) see_tx(w, s->idx[i]);
  see_access(w, s->mem, s->idx, s->nidx, s->frag_op == RX_FRAG_OP_STORE, s->loc);
}

static void see_stmt(lw *w, rx_stmt *s) {
  if (!s || w->failed) return;
  size_t mark = sym_analyzer_mark(w->an);
  switch (s->kind) {
  case RX_STMT_SEQ:
    for (int i = 0; i < s->n; i++) see_stmt(w, s->body[i]);
    break;
  case RX_STMT_FOR: {
    rx_loop_kind k = s->loop_kind;
    if (k >= RX_LOOP_BLOCK_X && k <= RX_LOOP_BLOCK_Z) {
      lerr(w, s->loc, "loop bound to %s inside a kernel (block loops must be at host level)",
           ir_loop_kind_name(k));
      break;
    }
    base_ptrvec_push(&w->loopvars, (void *)s->vars[0]);
    if (k >= RX_LOOP_THREAD_X) {
      int ax = k - RX_LOOP_THREAD_X;
      const rx_expr *ext = sym_analyzer_simplify(w->an, s->extent[0]);
      if (ext->kind != RX_EXPR_CONST || ext->value < 1) {
        lerr(w, s->loc, "a loop bound to %s needs a constant extent >= 1 (the block size)",
             ir_loop_kind_name(k));
        break;
      }
      if (ext->value > w->ck->t->max_block_dim[ax]) {
        w->failed = true;
        base_diag_report(w->diag, RX_DIAG_ERROR, s->loc,
                         "%s extent %lld exceeds the target's block limit %d on that axis",
                         ir_loop_kind_name(k), (long long)ext->value, w->ck->t->max_block_dim[ax]);
        break;
      }
      if (ext->value > w->block[ax]) w->block[ax] = (int)ext->value;
      if (s->count > w->ck->min_blocks) w->ck->min_blocks = s->count;
    }
    see_expr(w, sym_analyzer_simplify(w->an, s->lo[0]));
    see_expr(w, sym_analyzer_simplify(w->an, sym_expr_add(w->ck->m->ctx, s->lo[0], s->extent[0])));
    cg_bind_loop(w->an, s);
    see_stmt(w, s->inner);
    break;
  }
  case RX_STMT_REDUCE:
    see_stmt(w, s->init);
    for (int i = 0; i < s->nvars; i++) {
      base_ptrvec_push(&w->loopvars, (void *)s->vars[i]);
      see_expr(w, sym_analyzer_simplify(w->an, s->lo[i]));
      see_expr(w,
               sym_analyzer_simplify(w->an, sym_expr_add(w->ck->m->ctx, s->lo[i], s->extent[i])));
      sym_analyzer_bind_range(w->an, s->vars[i], s->lo[i], s->extent[i]);
    }
    see_stmt(w, s->inner);
    break;
  case RX_STMT_STORE:
    for (int i = 0; i < s->nidx; i++) see_tx(w, s->idx[i]);
    see_access(w, s->buf, s->idx, s->nidx, true, s->loc);
    see_tx(w, s->value);
    break;
  case RX_STMT_LET:
    see_tx(w, s->value);
    /* a symbolic let's variable is the kernel's own, like a loop variable (not an argument); an
     * i32 value bounds it (so that 32-bit indices may do), for the following statements of the
     * enclosing SEQ (whose reset drops it) */
    if (s->local->sym) {
      base_ptrvec_push(&w->loopvars, (void *)s->local->sym);
      if (s->value->dtype == RX_DTYPE_I32) {
        rx_expr_ctx *cx = w->ck->m->ctx;
        sym_analyzer_bind_range(w->an, s->local->sym, sym_expr_const(cx, I32_MIN),
                                sym_expr_const(cx, (int64_t)I32_MAX - I32_MIN + 1));
        return;
      }
    }
    break;
  case RX_STMT_ALLOC: {
    rx_buffer *b = s->buf;
    int64_t n = const_elems(b);
    if (b->scope == RX_SCOPE_GLOBAL) {
      lerr(w, s->loc,
           "global allocation '%s' inside a kernel is not supported (make it a "
           "parameter of the program)",
           b->name);
      break;
    }
    if (n < 0) {
      lerr(w, s->loc, "allocation '%s' needs a constant shape inside a kernel", b->name);
      break;
    }
    if (b->frag) see_frag(w, s);
    if (b->scope == RX_SCOPE_SHARED) {
      cg_shared sh = {.buf = b, .name = b->name, .elems = n};
      int same = 0;
      for (size_t i = 0; i < w->shared.len; i++)
        same += strcmp(w->shared.data[i].name, b->name) == 0;
      if (same) sh.name = base_arena_printf(&w->ck->m->arena, "%s_%d", b->name, same);
      RX_VEC_PUSH(&w->shared, sh);
      w->shared_bytes += n * dtype_bytes(b->dtype);
    }
    break;
  }
  case RX_STMT_IF:
    see_tx(w, s->value);
    if (s->value->kind == RX_TX_SYM) sym_analyzer_assume(w->an, s->value->sym);
    see_stmt(w, s->inner);
    sym_analyzer_reset(w->an, mark);
    if (s->otherwise) {
      if (s->value->kind == RX_TX_SYM)
        sym_analyzer_assume(w->an, sym_expr_not(w->ck->m->ctx, s->value->sym));
      see_stmt(w, s->otherwise);
    }
    break;
  case RX_STMT_BARRIER:
    break;
  case RX_STMT_MMA: /* its fragments are local buffers: nothing to check in memory */
    for (int i = 0; i < s->nidx; i++) see_tx(w, s->idx[i]);
    w->ck->uses_mma = true;
    if (s->mma_a) w->ck->mma_ab[s->mma_a->dtype] = true;
    w->ck->uses_subgroup = true; /* the warp's 32 lanes: the runtime checks the width */
    break;
  case RX_STMT_ASYNC_COPY:
    for (int i = 0; i < s->nidx; i++) see_tx(w, s->idx[i]);
    see_access(w, s->buf, s->idx, s->nidx, true, s->loc);
    see_tx(w, s->value);
    see_tx(w, s->cond);
    w->ck->uses_async = true;
    break;
  case RX_STMT_ASYNC_COMMIT:
  case RX_STMT_ASYNC_WAIT:
    w->ck->uses_async = true;
    break;
  case RX_STMT_LDMATRIX:
    for (int i = 0; i < s->nidx; i++) see_tx(w, s->idx[i]);
    see_tx(w, s->value);
    w->ck->uses_async = true;
    w->ck->uses_subgroup = true; /* the warp's 32 lanes together */
    break;
  case RX_STMT_FRAG:
    see_frag(w, s);
    break;
  case RX_STMT_WGMMA: /* its operands' placement is the interpreter's to check (ir.h) */
    see_tx(w, s->value);
    see_tx(w, s->wg_b);
    if (s->value && s->value->buf) w->ck->wgmma_ab[s->value->buf->dtype] = true;
    w->ck->uses_wgmma = true;
    break;
  case RX_STMT_WGMMA_FENCE:
  case RX_STMT_WGMMA_COMMIT:
  case RX_STMT_WGMMA_WAIT:
    w->ck->uses_wgmma = true;
    break;
  }
  sym_analyzer_reset(w->an, mark);
}

static int cmp_var_name(const void *a, const void *b) {
  const rx_expr *x = *(const rx_expr *const *)a, *y = *(const rx_expr *const *)b;
  return strcmp(x->name, y->name);
}

/* The offsets of the shared buffers in one pool, each at a multiple of align: a buffer marked
 * reuse (ir.h) at 0, over the storage of those before it; the others after everything before
 * them. w->shared_bytes becomes the pool's extent. */
static void layout_shared(lw *w, int64_t align) {
  int64_t end = 0;
  for (size_t i = 0; i < w->shared.len; i++) {
    cg_shared *sh = &w->shared.data[i];
    int64_t bytes = sh->elems * dtype_bytes(sh->buf->dtype);
    sh->offset = sh->buf->reuse ? 0 : (end + align - 1) / align * align;
    if (sh->offset + bytes > end) end = sh->offset + bytes;
  }
  w->shared_bytes = end;
}

/* Static shared memory with reused storage (a buffer marked reuse, CUDA): one 16-byte aligned
 * pool (cg_kernel.shared_pool, codegen/cuda.c). Returns the kernel's shared bytes. */
static int64_t pool_shared(lw *w, cg_kernel *ck, const rx_target *t) {
  for (size_t i = 0; !ck->uses_wgmma && t->kind == RX_TARGET_CUDA && i < w->shared.len; i++)
    ck->shared_pool |= w->shared.data[i].buf->reuse;
  if (ck->shared_pool) layout_shared(w, 16);
  return w->shared_bytes;
}

/* wgmma.mma_async (ir.h RX_STMT_WGMMA): the targets whose .mma table lists it for the operands'
 * dtypes into f32 (sm_90), blocks of whole warpgroups of 128. analyze checks it before the
 * shared memory, so that a smaller target names what it lacks first. Such a kernel's shared
 * buffers are laid out in dynamic shared memory (cg_kernel.dyn_shared), each at a 1024-byte
 * boundary (the 128-byte swizzle's atom): w->shared_bytes becomes their extent. */
static bool wgmma_target_ok(lw *w, const cg_kernel *ck, const rx_target *t, rx_diag *diag) {
  if (!ck->uses_wgmma) return true;
  layout_shared(w, 1024);
  bool ok = t->kind == RX_TARGET_CUDA && ck->nthreads % 128 == 0 &&
            tgt_target_mma(t, RX_DTYPE_F16, RX_DTYPE_F32, RX_MMA_WGMMA);
  for (int d = 0; d < RX_DTYPE_COUNT; d++)
    if (ck->wgmma_ab[d] && !tgt_target_mma(t, (rx_dtype)d, RX_DTYPE_F32, RX_MMA_WGMMA)) ok = false;
  if (!ok)
    base_diag_report(diag, RX_DIAG_ERROR, ck->loc,
                     "kernel '%s' uses wgmma (PTX wgmma.mma_async, warpgroups of 128 threads); "
                     "target '%s' has no such matrix unit, or the block (%d threads) is not whole "
                     "warpgroups",
                     ck->k->name, t->name, ck->nthreads);
  return ok;
}

/* The shared memory a kernel may use: with dynamic shared memory (wgmma kernels on CUDA) the
 * opt-in limit, which the runtime asks for (runtime/cuda/cuda.c: cuFuncSetAttribute above 48 KiB),
 * else the static one (analyze marks the kernel's shared_dynamic by the same condition). */
static int shared_limit(const cg_kernel *ck, const rx_target *t) {
  return ck->uses_wgmma && t->kind == RX_TARGET_CUDA ? t->shared_bytes_optin : t->shared_bytes;
}

/* Fills the kernel's ABI and launch description. */
static bool analyze(cg_kernel *ck, rx_diag *diag) {
  rx_module *m = ck->m;
  const rx_tensor_fn *f = ck->fn;
  const rx_target *t = ck->t;
  lw w = {.ck = ck, .diag = diag, .fits32 = true, .block = {1, 1, 1}};
  w.an = cg_analyzer(m, f);
  w.used = base_calloc((size_t)f->nparams + 1, sizeof(bool));
  w.written = base_calloc((size_t)f->nparams + 1, sizeof(bool));
  for (int a = 0; a < 3; a++) {
    if (!ck->bvar[a]) continue;
    base_ptrvec_push(&w.loopvars, (void *)ck->bvar[a]);
    sym_analyzer_bind_range(w.an, ck->bvar[a], ck->blo[a], ck->k->grid[a]);
    see_expr(&w, sym_analyzer_simplify(w.an, ck->blo[a]));
    see_expr(&w, sym_analyzer_simplify(w.an, sym_expr_add(m->ctx, ck->blo[a], ck->k->grid[a])));
  }
  /* the grid's own variables are evaluated by the host: not kernel arguments */
  w.vars.len = 0;
  see_stmt(&w, ck->body);
  bool ok = !w.failed;
  rx_kernel *k = ck->k;
  for (int a = 0; a < 3; a++) k->block[a] = w.block[a];
  ck->nthreads = w.block[0] * w.block[1] * w.block[2];
  if (ok && ck->nthreads > t->max_threads_per_block) {
    base_diag_report(diag, RX_DIAG_ERROR, ck->loc,
                     "kernel '%s' has %d threads per block; target '%s' allows %d", k->name,
                     ck->nthreads, t->name, t->max_threads_per_block);
    ok = false;
  }
  if (ok && !wgmma_target_ok(&w, ck, t, diag)) ok = false;
  k->shared_bytes = pool_shared(&w, ck, t);
  k->shared_dynamic = ck->uses_wgmma && t->kind == RX_TARGET_CUDA && w.shared_bytes > 0;
  if (ok && w.shared_bytes > shared_limit(ck, t)) {
    base_diag_report(diag, RX_DIAG_ERROR, ck->loc,
                     "kernel '%s' needs %lld bytes of shared memory; target '%s' allows %d",
                     k->name, (long long)w.shared_bytes, t->name, shared_limit(ck, t));
    ok = false;
  }
  ck->nshared = (int)w.shared.len;
  ck->shared = ir_module_alloc(m, sizeof(cg_shared) * (w.shared.len + 1));
  if (w.shared.len) memcpy(ck->shared, w.shared.data, sizeof(cg_shared) * w.shared.len);

  /* buffers sizes must fit as well for 32-bit offsets */
  bool fits = w.fits32;
  for (int i = 0; i < f->nparams && fits; i++) {
    if (!w.used[i]) continue;
    const rx_buffer *b = f->params[i]->buf;
    const rx_expr *size = sym_expr_const(m->ctx, 1);
    for (int d = 0; d < b->ndim; d++) size = sym_expr_mul(m->ctx, size, b->shape[d]);
    rx_interval r = sym_analyzer_bounds(w.an, size);
    if (r.hi > I32_MAX) fits = false;
  }
  k->index64 = !fits;

  /* the ABI: buffers in parameter order, then symbolic values sorted by name */
  if (w.vars.len > 1) /* qsort takes no NULL, even for 0 elements */
    qsort(w.vars.data, w.vars.len, sizeof(void *), cmp_var_name);
  int nbuf = w.checks.len > 0;
  for (int i = 0; i < f->nparams; i++) nbuf += w.used[i];
  k->nargs = nbuf + (int)w.vars.len;
  k->args = ir_module_alloc(m, sizeof(rx_karg) * (size_t)(k->nargs + 1));
  int j = 0;
  for (int i = 0; i < f->nparams; i++) {
    if (!w.used[i]) continue;
    rx_karg *a = &k->args[j];
    a->kind = RX_KARG_BUFFER;
    a->name = f->params[i]->buf->name;
    a->dtype = f->params[i]->buf->dtype;
    a->param = i;
    a->written = w.written[i];
    a->binding = j;
    a->offset = -1;
    j++;
  }
  if (w.checks.len) { /* the error buffer, after the parameters' buffers */
    rx_karg *a = &k->args[j];
    a->kind = RX_KARG_BUFFER;
    a->name = RX_KARG_ERROR_NAME;
    a->dtype = RX_DTYPE_I32;
    a->param = -1;
    a->error = true;
    a->written = true;
    a->binding = j;
    a->offset = -1;
    j++;
    k->nchecks = (int)w.checks.len;
    k->checks = ir_module_alloc(m, sizeof(char *) * w.checks.len);
    memcpy(k->checks, w.checks.data, sizeof(char *) * w.checks.len);
  }
  for (size_t i = 0; i < w.vars.len; i++) {
    rx_karg *a = &k->args[j++];
    const rx_expr *v = w.vars.data[i];
    a->kind = RX_KARG_SCALAR;
    a->name = v->name;
    a->dtype = RX_DTYPE_I32;
    a->param = -1;
    a->var = v;
    a->binding = -1;
    a->offset = (int)i * 4;
    for (int q = 0; q < f->nparams; q++)
      if (f->params[q]->kind == RX_PARAM_SCALAR && f->params[q]->var == v) a->param = q;
  }
  k->scalar_bytes = (int)w.vars.len * 4;
  if (ok && k->scalar_bytes > t->push_constant_bytes && t->kind != RX_TARGET_VULKAN) {
    base_diag_report(diag, RX_DIAG_ERROR, ck->loc,
                     "kernel '%s' passes %d bytes of symbolic values; target '%s' allows %d",
                     k->name, k->scalar_bytes, t->name, t->push_constant_bytes);
    ok = false;
  }
  if (t->kind == RX_TARGET_VULKAN) {
    int limit = t->push_constant_bytes < 128 ? t->push_constant_bytes : 128;
    k->uses_ubo = k->scalar_bytes > limit;
    if (k->uses_ubo) k->scalar_bytes = (k->scalar_bytes + 15) / 16 * 16; /* ivec4 array */
  }
  bool mma_ok = t->kind == RX_TARGET_CUDA && t->subgroup_size == 32;
  for (int d = 0; d < RX_DTYPE_COUNT; d++)
    if (ck->mma_ab[d] && !tgt_target_mma(t, (rx_dtype)d, RX_DTYPE_F32, RX_MMA_SYNC)) mma_ok = false;
  if (ok && ck->uses_mma && !mma_ok) {
    base_diag_report(diag, RX_DIAG_ERROR, ck->loc,
                     "kernel '%s' uses mma m16n8k16 (PTX mma.sync); target '%s' has no such matrix "
                     "unit",
                     k->name, t->name);
    ok = false;
  }
  /* cp.async is sm_80's, ldmatrix sm_75's: the targets that list mma.sync m16n8k16 */
  if (ok && ck->uses_async &&
      (t->kind != RX_TARGET_CUDA || !tgt_target_mma(t, RX_DTYPE_F16, RX_DTYPE_F32, RX_MMA_SYNC))) {
    base_diag_report(diag, RX_DIAG_ERROR, ck->loc,
                     "kernel '%s' uses async_copy or ldmatrix (PTX cp.async, ldmatrix: CUDA sm_80 "
                     "and newer); target '%s' has neither",
                     k->name, t->name);
    ok = false;
  }
  if (ok && ck->uses_subgroup && !t->subgroup_arithmetic) {
    base_diag_report(diag, RX_DIAG_ERROR, ck->loc,
                     "kernel '%s' uses subgroup reductions; target '%s' has no subgroup arithmetic",
                     k->name, t->name);
    ok = false;
  }
  /* its subgroup operations group the threads by the target's size: the runtime pins it */
  k->subgroup_size = ck->uses_subgroup ? t->subgroup_size : 0;
  k->coop_matrix = ck->uses_frag && t->kind == RX_TARGET_VULKAN; /* the runtime checks the device */
  free(w.used);
  free(w.written);
  base_ptrvec_free(&w.vars);
  base_ptrvec_free(&w.loopvars);
  base_ptrvec_free(&w.checks);
  free(w.shared.data);
  sym_analyzer_free(w.an);
  return ok;
}

/* ---- host level -------------------------------------------------------------------------- */

typedef struct hw {
  rx_module *m;
  const rx_tensor_fn *f;
  const rx_target *t;
  rx_diag *diag;
  RX_VEC(cg_kernel) ks;
  bool failed;
} hw;

static rx_kernel *new_kernel(hw *h, const rx_expr *cond, rx_loc loc) {
  rx_kernel *k = ir_module_alloc(h->m, sizeof *k);
  size_t n = h->ks.len;
  k->name = n == 0 ? h->f->name : base_arena_printf(&h->m->arena, "%s_%zu", h->f->name, n);
  k->cond = cond;
  rx_expr_ctx *c = h->m->ctx;
  for (int a = 0; a < 3; a++) k->grid[a] = sym_expr_const(c, 1);
  (void)loc;
  return k;
}

static bool is_block_for(const rx_stmt *s) {
  return s && s->kind == RX_STMT_FOR && s->loop_kind >= RX_LOOP_BLOCK_X &&
         s->loop_kind <= RX_LOOP_BLOCK_Z;
}

static void add_root(hw *h, rx_stmt *s, const rx_expr *cond) {
  cg_kernel ck = {.m = h->m, .fn = h->f, .t = h->t, .loc = s->loc};
  ck.k = new_kernel(h, cond, s->loc);
  while (is_block_for(s)) {
    int a = s->loop_kind - RX_LOOP_BLOCK_X;
    if (ck.bvar[a]) {
      base_diag_report(h->diag, RX_DIAG_ERROR, s->loc, "%s is bound twice in one kernel root",
                       ir_loop_kind_name(s->loop_kind));
      h->failed = true;
      return;
    }
    ck.bvar[a] = s->vars[0];
    ck.blo[a] = s->lo[0];
    ck.k->grid[a] = s->extent[0];
    s = s->inner;
    if (s && s->kind == RX_STMT_SEQ && s->n == 1 && is_block_for(s->body[0])) s = s->body[0];
  }
  ck.body = s;
  RX_VEC_PUSH(&h->ks, ck);
}

typedef RX_VEC(rx_stmt *) stmtvec;

/* A run of plain host statements: one kernel of one block. */
static void flush_run(hw *h, stmtvec *run, const rx_expr *cond) {
  if (!run->len || h->failed) return;
  rx_stmt *seq = ir_stmt_new(h->m, RX_STMT_SEQ, run->data[0]->loc);
  seq->n = (int)run->len;
  seq->body = base_arena_dup(&h->m->arena, run->data, sizeof(rx_stmt *) * run->len);
  cg_kernel ck = {.m = h->m, .fn = h->f, .t = h->t, .loc = seq->loc, .body = seq};
  ck.k = new_kernel(h, cond, seq->loc);
  RX_VEC_PUSH(&h->ks, ck);
  run->len = 0;
}

static void host_seq(hw *h, rx_stmt *s, const rx_expr *cond);

static void host_stmt(hw *h, rx_stmt *s, const rx_expr *cond, stmtvec *run) {
  if (is_block_for(s) || s->kind == RX_STMT_IF) flush_run(h, run, cond);
  if (is_block_for(s)) {
    add_root(h, s, cond);
  } else if (s->kind == RX_STMT_IF) {
    if (s->value->kind != RX_TX_SYM) {
      base_diag_report(h->diag, RX_DIAG_ERROR, s->loc,
                       "a host-level 'if' must test symbolic values only (a specialization)");
      h->failed = true;
      return;
    }
    rx_expr_ctx *c = h->m->ctx;
    const rx_expr *yes = s->value->sym, *no = sym_expr_not(c, s->value->sym);
    host_seq(h, s->inner, cond ? sym_expr_and(c, cond, yes) : yes);
    if (s->otherwise) host_seq(h, s->otherwise, cond ? sym_expr_and(c, cond, no) : no);
  } else {
    RX_VEC_PUSH(run, s);
  }
}

static void host_seq(hw *h, rx_stmt *s, const rx_expr *cond) {
  stmtvec run = {0};
  if (s->kind == RX_STMT_SEQ) {
    for (int i = 0; i < s->n && !h->failed; i++) host_stmt(h, s->body[i], cond, &run);
  } else {
    host_stmt(h, s, cond, &run);
  }
  flush_run(h, &run, cond);
  free(run.data);
}

bool cg_lower(rx_module *m, const rx_tensor_fn *f, const rx_target *t, rx_diag *diag,
              cg_kernel **out, int *n) {
  *out = NULL;
  *n = 0;
  hw h = {.m = m, .f = f, .t = t, .diag = diag};
  if (f->body) host_seq(&h, f->body, NULL);
  bool ok = !h.failed;
  for (size_t i = 0; i < h.ks.len && ok; i++) ok = analyze(&h.ks.data[i], diag);
  if (ok) {
    *out = ir_module_alloc(m, sizeof(cg_kernel) * (h.ks.len + 1));
    if (h.ks.len) memcpy(*out, h.ks.data, sizeof(cg_kernel) * h.ks.len);
    *n = (int)h.ks.len;
  }
  free(h.ks.data);
  return ok;
}
