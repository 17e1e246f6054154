/* Creation ops: full, zeros, ones (from a shape value) and arange (from scalar bounds, with a
 * symbolic length): their shape deduction, then their legalization (a loop nest that stores the
 * value or the index). */
#include "deduce.h"
#include "legalize_int.h"

#include <math.h>
#include <string.h>

static rx_dtype dtype_attr(const rx_node *call, rx_dtype dflt) {
  const rx_attr *a = ops_call_attr(call, "dtype");
  return a && a->kind == RX_ATTR_DTYPE ? a->dtype : dflt;
}

const rx_sinfo *ops_deduce_full(rx_deduce_ctx *dc, const rx_node *call) {
  const rx_sinfo *s = call->args[0]->sinfo;
  if (s->kind != RX_SINFO_SHAPE) {
    ops_deduce_error(dc, "%s expects a shape as argument 1 (e.g. [n, 4]), got %s", call->op->name,
                     ops_str(dc, s));
    return NULL;
  }
  rx_dtype dt = RX_DTYPE_F32;
  if (call->op->id == RX_OP_full) {
    const rx_sinfo *v = call->args[1]->sinfo;
    if (v->kind != RX_SINFO_PRIM && !(v->kind == RX_SINFO_TENSOR && v->ndim == 0)) {
      ops_deduce_error(dc, "full expects a scalar fill value as argument 2, got %s",
                       ops_str(dc, v));
      return NULL;
    }
    dt = v->dtype;
  }
  dt = dtype_attr(call, dt);
  return ops_tensor(dc, dt, s->ndim, s->shape);
}

/* The symbolic value of a scalar argument; *is_float set for float scalars. */
static bool scalar_arg(rx_deduce_ctx *dc, const rx_node *call, int i, const rx_expr **out,
                       bool *is_float) {
  const rx_sinfo *s = call->args[i]->sinfo;
  if (s->kind != RX_SINFO_PRIM) {
    ops_deduce_error(dc, "arange expects scalar arguments, got %s as argument %d", ops_str(dc, s),
                     i + 1);
    return false;
  }
  *out = s->value;
  *is_float = *is_float || ir_dtype_is_float(s->dtype);
  return true;
}

const rx_sinfo *ops_deduce_arange(rx_deduce_ctx *dc, const rx_node *call) {
  rx_expr_ctx *cx = ops_ctx(dc);
  const rx_expr *start = sym_expr_const(cx, 0), *end = NULL, *step = sym_expr_const(cx, 1);
  bool fl = false, known = true;
  const rx_expr **slots[3] = {&start, &end, &step};
  int first = call->nargs == 1 ? 1 : 0; /* arange(end) */
  for (int i = 0; i < call->nargs; i++) {
    if (!scalar_arg(dc, call, i, slots[first + i], &fl)) return NULL;
    if (!*slots[first + i] && !call->args[i]->sinfo->value &&
        !(call->args[i]->kind == RX_NODE_PRIM && ir_dtype_is_float(call->args[i]->prim_dtype)))
      known = false;
  }
  rx_dtype dt = dtype_attr(call, fl ? RX_DTYPE_F32 : RX_DTYPE_I64);
  if (step && rx_expr_is_const(step, 0)) {
    ops_deduce_error(dc, "arange expects a nonzero step");
    return NULL;
  }
  if (!start || !end || !step || step->kind != RX_EXPR_CONST) {
    if (!known) return ops_tensor(dc, dt, 1, NULL);
    return ops_fallback(dc, dt, 1, "the length needs integer bounds and a constant step");
  }
  int64_t st = step->value;
  const rx_expr *len, *lo = start, *hi = end;
  if (st < 0) {
    lo = end;
    hi = start;
  }
  int64_t mag = st < 0 ? -st : st;
  if (st == INT64_MIN) {
    ops_deduce_error(dc, "arange step out of range");
    return NULL;
  }
  len =
      sym_expr_floordiv(cx, sym_expr_add(cx, sym_expr_sub(cx, hi, lo), sym_expr_const(cx, mag - 1)),
                        sym_expr_const(cx, mag));
  if (ops_prove(dc, sym_expr_cmp(cx, RX_EXPR_LE, lo, hi)) != RX_TRUE)
    len = sym_expr_max(cx, len, sym_expr_const(cx, 0));
  len = ops_simplify(dc, len);
  return ops_tensor(dc, dt, 1, &len);
}

/* ------------------------------------------------------------------------------------------
 * legalization: the generators named in ops.def (the writer they use: ops/legalize.c)
 * ------------------------------------------------------------------------------------------ */

/* ---- creation ---- */

void lz_gen_full(lz_ctx *l) {
  rx_op_id op = l->call->op->id;
  lz_opnd *y = &l->outs[0];
  const char *v;
  if (op == RX_OP_zeros) {
    v = lz_lit(l, y->dtype, 0);
  } else if (op == RX_OP_ones) {
    v = lz_lit(l, y->dtype, 1);
  } else {
    lz_opnd *f = lz_arg(l, 1);
    if (f->scalar) {
      v = lz_scalar_as(l, f, y->dtype);
    } else {
      v = lz_load(l, f, NULL);
      if (f->dtype != y->dtype) v = lz_str(l, "%s(%s)", ir_dtype_name(y->dtype), v);
    }
  }
  const char *iv[LZ_MAXR];
  lz_nest_vars(l, "i", y->ndim, iv);
  lz_for_nest(l, iv, y->shape, y->ndim);
  lz_line(l, "%s = %s", lz_load(l, y, iv), v);
  lz_close_n(l, y->ndim);
}

void lz_gen_arange(lz_ctx *l) {
  lz_opnd *y = &l->outs[0];
  const rx_node *call = l->call;
  const char *val[3] = {"0", NULL, "1"};
  int first = call->nargs == 1 ? 1 : 0;
  bool fl = ir_dtype_is_float(y->dtype);
  for (int i = 0; i < call->nargs; i++) {
    lz_opnd *o = lz_arg(l, i);
    if (!o->scalar) {
      lz_fail(l, "arange expects scalar bounds of known value");
      return;
    }
    val[first + i] =
        o->literal ? (fl ? lz_flit(l, o->fval) : lz_olit(l, o, RX_DTYPE_I64)) : o->text;
    if (o->literal && !fl && o->fval != floor(o->fval)) {
      lz_fail(l, "arange with float bounds into an integer dtype");
      return;
    }
  }
  const char *iv[1];
  lz_nest_vars(l, "i", 1, iv);
  lz_for_nest(l, iv, y->shape, 1);
  const char *e = lz_str(l, "%s + %s * %s", val[0], iv[0], val[2]);
  if (fl) {
    /* float: start + i * step in f32 (integer-valued symbolic bounds are cast) */
    const char *s0 =
        strchr(val[0], '.') || strstr(val[0], "inf") ? val[0] : lz_str(l, "f32(%s)", val[0]);
    const char *s2 =
        strchr(val[2], '.') || strstr(val[2], "inf") ? val[2] : lz_str(l, "f32(%s)", val[2]);
    e = lz_down(l, y->dtype, lz_str(l, "%s + f32(%s) * %s", s0, iv[0], s2));
  } else if (y->dtype != RX_DTYPE_I64) {
    e = lz_str(l, "%s(%s)", ir_dtype_name(y->dtype), e);
  }
  lz_line(l, "%s = %s", lz_load(l, y, iv), e);
  lz_close(l);
}
