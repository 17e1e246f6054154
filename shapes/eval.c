/* shapes/eval.c: evaluation under a binding, and simultaneous substitution.
 *
 * Evaluation is strict (every operand is evaluated, && and || included) except select, which
 * evaluates its condition and then only the chosen branch. The canonicalizer relies on this:
 * it may drop an operand that cannot affect the value (x * 0, 0 && y), so a simplified
 * expression can evaluate where the original failed, but never the reverse except through
 * int64 overflow of an intermediate value that the reassociated form computes (e.g. the
 * expansion of (a + b) * c). */
#include "shapes_int.h"

#include <stdlib.h>
#include <string.h>

static rx_eval_status ev(const rx_expr *e, const rx_expr_env *env, int64_t *out) {
  int64_t a, b, r = 0;
  rx_eval_status s;
  switch (e->kind) {
  case RX_EXPR_CONST:
    *out = e->value;
    return RX_EVAL_OK;
  case RX_EXPR_VAR:
    for (size_t i = 0; env && i < env->n; i++)
      if (env->vars[i] == e) {
        *out = env->values[i];
        return RX_EVAL_OK;
      }
    return RX_EVAL_UNBOUND;
  case RX_EXPR_NOT:
    if ((s = ev(e->a, env, &a))) return s;
    *out = a == 0;
    return RX_EVAL_OK;
  case RX_EXPR_SELECT:
    if ((s = ev(e->a, env, &a))) return s;
    return ev(a ? e->b : e->c, env, out);
  default:
    break;
  }
  if ((s = ev(e->a, env, &a))) return s;
  if ((s = ev(e->b, env, &b))) return s;
  switch (e->kind) {
  case RX_EXPR_ADD:
    if (!rx_i64_add(a, b, &r)) return RX_EVAL_OVERFLOW;
    break;
  case RX_EXPR_SUB:
    if (!rx_i64_sub(a, b, &r)) return RX_EVAL_OVERFLOW;
    break;
  case RX_EXPR_MUL:
    if (!rx_i64_mul(a, b, &r)) return RX_EVAL_OVERFLOW;
    break;
  case RX_EXPR_FLOORDIV:
    if (b == 0) return RX_EVAL_DIV_ZERO;
    if (!rx_i64_floordiv(a, b, &r)) return RX_EVAL_OVERFLOW;
    break;
  case RX_EXPR_FLOORMOD:
    if (!rx_i64_floormod(a, b, &r)) return RX_EVAL_DIV_ZERO;
    break;
  case RX_EXPR_MIN:
    r = a < b ? a : b;
    break;
  case RX_EXPR_MAX:
    r = a > b ? a : b;
    break;
  case RX_EXPR_EQ:
    r = a == b;
    break;
  case RX_EXPR_NE:
    r = a != b;
    break;
  case RX_EXPR_LT:
    r = a < b;
    break;
  case RX_EXPR_LE:
    r = a <= b;
    break;
  case RX_EXPR_GT:
    r = a > b;
    break;
  case RX_EXPR_GE:
    r = a >= b;
    break;
  case RX_EXPR_AND:
    r = a != 0 && b != 0;
    break;
  case RX_EXPR_OR:
    r = a != 0 || b != 0;
    break;
  default:
    RX_ASSERT(!"rx_expr_eval: bad kind");
  }
  *out = r;
  return RX_EVAL_OK;
}

rx_eval_status sym_expr_eval_status(const rx_expr *e, const rx_expr_env *env, int64_t *out) {
  int64_t v;
  rx_eval_status s = ev(e, env, &v);
  if (s == RX_EVAL_OK) *out = v;
  return s;
}

bool sym_expr_eval(const rx_expr *e, const rx_expr_env *env, int64_t *out) {
  return sym_expr_eval_status(e, env, out) == RX_EVAL_OK;
}

/* ---- substitution ---- */

/* node -> result, open addressing keyed by pointer (a DAG is rebuilt once per node) */
typedef struct submap {
  const rx_expr **keys, **vals;
  size_t cap, count;
} submap;

static size_t slot_of(const submap *m, const rx_expr *k) {
  size_t i = (size_t)(k->hash ^ k->id) & (m->cap - 1);
  while (m->keys[i] && m->keys[i] != k) i = (i + 1) & (m->cap - 1);
  return i;
}

static void map_put(submap *m, const rx_expr *k, const rx_expr *v) {
  if ((m->count + 1) * 2 > m->cap) {
    submap g = {base_calloc(m->cap * 2, sizeof *g.keys), base_calloc(m->cap * 2, sizeof *g.vals),
                m->cap * 2, 0};
    for (size_t i = 0; i < m->cap; i++)
      if (m->keys[i]) map_put(&g, m->keys[i], m->vals[i]);
    free(m->keys);
    free(m->vals);
    *m = g;
  }
  size_t i = slot_of(m, k);
  if (!m->keys[i]) m->count++;
  m->keys[i] = k;
  m->vals[i] = v;
}

typedef struct subst {
  rx_expr_ctx *ctx;
  const rx_expr *const *vars, *const *repl;
  size_t n;
  submap memo;
} subst;

static const rx_expr *sub(subst *s, const rx_expr *e) {
  if (e->kind == RX_EXPR_CONST) return e;
  if (e->kind == RX_EXPR_VAR) {
    for (size_t i = 0; i < s->n; i++)
      if (s->vars[i] == e) return sym_expr_simplify(s->ctx, s->repl[i]);
    return e;
  }
  size_t i = slot_of(&s->memo, e);
  if (s->memo.keys[i]) return s->memo.vals[i];
  const rx_expr *a = sub(s, e->a);
  const rx_expr *b = e->b ? sub(s, e->b) : NULL;
  const rx_expr *c = e->c ? sub(s, e->c) : NULL;
  const rx_expr *r = sym_expr_make(s->ctx, e->kind, a, b, c);
  map_put(&s->memo, e, r);
  return r;
}

const rx_expr *sym_expr_subst(rx_expr_ctx *ctx, const rx_expr *e, const rx_expr *const *vars,
                              const rx_expr *const *repl, size_t n) {
  bool used = false;
  for (size_t i = 0; i < n && !used; i++) used = sym_expr_uses_var(e, vars[i]);
  if (!used) return sym_expr_simplify(ctx, e);
  subst s = {ctx,
             vars,
             repl,
             n,
             {base_calloc(64, sizeof(void *)), base_calloc(64, sizeof(void *)), 64, 0}};
  const rx_expr *r = sub(&s, e);
  free(s.memo.keys);
  free(s.memo.vals);
  return r;
}
