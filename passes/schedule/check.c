/* passes/schedule/check.c: the contract check of a scheduled program (sched_schedule_check,
 * passes/schedule.h). */
#include "rules.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------------------------
 * the contract check
 * ------------------------------------------------------------------------------------------ */
typedef struct chk {
  const rx_tensor_fn *f;
  const rx_target *t;
  rx_diag *diag;
  bool ok;
  int64_t shared;
  bool wgmma; /* the kernel uses wgmma: its shared memory is dynamic, up to the opt-in limit */
  int64_t threads[3];
} chk;

#define CHK_FAIL(c, loc, ...)                                                                      \
  do {                                                                                             \
    base_diag_report((c)->diag, RX_DIAG_ERROR, loc, __VA_ARGS__);                                  \
    (c)->ok = false;                                                                               \
  } while (0)

static void chk_kernel(chk *c, const rx_stmt *s) {
  if (!s || !c->ok) return;
  switch (s->kind) {
  case RX_STMT_FOR:
    if (s->loop_kind >= RX_LOOP_BLOCK_X && s->loop_kind <= RX_LOOP_BLOCK_Z) {
      CHK_FAIL(c, s->loc, "'%s': a blockIdx loop inside a kernel", c->f->name);
      return;
    }
    if (s->loop_kind >= RX_LOOP_THREAD_X) {
      int ax = s->loop_kind - RX_LOOP_THREAD_X;
      if (!rx_expr_is_const(s->lo[0], 0) || s->extent[0]->kind != RX_EXPR_CONST) {
        CHK_FAIL(c, s->loc, "'%s': a thread loop must start at 0 and have a constant extent",
                 c->f->name);
        return;
      }
      if (s->extent[0]->value > c->threads[ax]) c->threads[ax] = s->extent[0]->value;
      if (c->t->max_block_dim[ax] > 0 && s->extent[0]->value > c->t->max_block_dim[ax])
        CHK_FAIL(c, s->loc, "'%s': %lld threads along %s exceed the target's %d", c->f->name,
                 (long long)s->extent[0]->value, ir_loop_kind_name(s->loop_kind),
                 c->t->max_block_dim[ax]);
    }
    break;
  case RX_STMT_ALLOC: {
    if (s->buf->scope == RX_SCOPE_GLOBAL) {
      CHK_FAIL(c, s->loc, "'%s': a global allocation inside a kernel", c->f->name);
      return;
    }
    int64_t count = 1;
    for (int d = 0; d < s->buf->ndim; d++) {
      if (s->buf->shape[d]->kind != RX_EXPR_CONST) {
        CHK_FAIL(c, s->loc, "'%s': allocation '%s' needs a constant shape", c->f->name,
                 s->buf->name);
        return;
      }
      count *= s->buf->shape[d]->value;
    }
    int64_t bytes = count * (ir_dtype_bits(s->buf->dtype) / 8);
    if (s->buf->scope == RX_SCOPE_SHARED && s->buf->reuse && c->t->kind == RX_TARGET_CUDA)
      c->shared = c->shared > bytes ? c->shared : bytes; /* over the storage before it (lower.c) */
    else if (s->buf->scope == RX_SCOPE_SHARED)
      c->shared += bytes;
    break;
  }
  case RX_STMT_WGMMA:
    c->wgmma = true;
    break;
  default:
    break;
  }
  if ((s->kind == RX_STMT_LET || s->kind == RX_STMT_STORE) && sched_tx_has_subgroup(s->value) &&
      (c->t->subgroup_size <= 0 || !c->t->subgroup_arithmetic))
    CHK_FAIL(c, s->loc, "'%s': subgroup operation on a target without a fixed subgroup size",
             c->f->name);
  for (int i = 0; i < s->n; i++) chk_kernel(c, s->body[i]);
  chk_kernel(c, s->inner);
  chk_kernel(c, s->init);
  chk_kernel(c, s->otherwise);
}

static void chk_host(chk *c, const rx_stmt *s) {
  if (!s || !c->ok) return;
  if (s->kind == RX_STMT_SEQ) {
    for (int i = 0; i < s->n; i++) chk_host(c, s->body[i]);
    return;
  }
  if (s->kind == RX_STMT_IF) {
    if (!s->value || s->value->kind != RX_TX_SYM) {
      CHK_FAIL(c, s->loc, "'%s': a host-level if needs a symbolic condition", c->f->name);
      return;
    }
    /* the condition may use only the program's symbolic variables */
    rx_ptrvec vs = {0};
    sym_expr_collect_vars(s->value->sym, &vs);
    for (size_t i = 0; i < vs.len && c->ok; i++) {
      const rx_expr *v = vs.data[i];
      bool found = false;
      for (int p = 0; p < c->f->nparams && !found; p++) {
        const rx_param *pp = c->f->params[p];
        if (pp->kind == RX_PARAM_SCALAR)
          found = pp->var == v;
        else
          for (int d = 0; d < pp->buf->ndim && !found; d++)
            found = sym_expr_uses_var(pp->buf->shape[d], v);
      }
      if (!found)
        CHK_FAIL(c, s->loc, "'%s': host-level condition uses '%s', not a symbolic variable",
                 c->f->name, v->name);
    }
    base_ptrvec_free(&vs);
    if (!s->inner || s->inner->kind != RX_STMT_SEQ ||
        (s->otherwise && s->otherwise->kind != RX_STMT_SEQ)) {
      CHK_FAIL(c, s->loc, "'%s': host-level if branches must be sequences", c->f->name);
      return;
    }
    chk_host(c, s->inner);
    chk_host(c, s->otherwise);
    return;
  }
  if (s->kind != RX_STMT_FOR || s->loop_kind != RX_LOOP_BLOCK_X) {
    CHK_FAIL(c, s->loc,
             "'%s': only kernel roots (loops bound to blockIdx.x) and ifs on symbolic values "
             "may appear at host level",
             c->f->name);
    return;
  }
  const rx_stmt *k = s;
  bool seen[3] = {false, false, false};
  for (;;) {
    int ax = k->loop_kind - RX_LOOP_BLOCK_X;
    if (seen[ax]) {
      CHK_FAIL(c, k->loc, "'%s': %s bound twice", c->f->name, ir_loop_kind_name(k->loop_kind));
      return;
    }
    seen[ax] = true;
    if (!rx_expr_is_const(k->lo[0], 0)) {
      CHK_FAIL(c, k->loc, "'%s': a block loop must start at 0", c->f->name);
      return;
    }
    const rx_stmt *in = sched_unwrap(k->inner);
    if (in && in->kind == RX_STMT_FOR &&
        (in->loop_kind == RX_LOOP_BLOCK_Y || in->loop_kind == RX_LOOP_BLOCK_Z)) {
      k = in;
      continue;
    }
    break;
  }
  c->shared = 0;
  c->wgmma = false;
  c->threads[0] = c->threads[1] = c->threads[2] = 1;
  chk_kernel(c, k->inner);
  if (!c->ok) return;
  int64_t nt = c->threads[0] * c->threads[1] * c->threads[2];
  if (nt > c->t->max_threads_per_block)
    CHK_FAIL(c, s->loc, "'%s': %lld threads per block exceed the target's %d", c->f->name,
             (long long)nt, c->t->max_threads_per_block);
  int limit = c->wgmma ? c->t->shared_bytes_optin : c->t->shared_bytes; /* codegen/lower.c */
  if (c->shared > limit)
    CHK_FAIL(c, s->loc, "'%s': %lld bytes of shared memory exceed the target's %d", c->f->name,
             (long long)c->shared, limit);
}

bool sched_schedule_check(const rx_tensor_fn *f, const rx_target *t, rx_diag *diag) {
  chk c = {.f = f, .t = t, .diag = diag, .ok = true};
  if (!f->body) return false;
  chk_host(&c, f->body);
  return c.ok;
}
