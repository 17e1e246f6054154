/* passes/lower_host.c: graph functions -> the host program of runtime/vm_format.h.
 *
 * Per function: CHECK_TENSOR of every tensor parameter (in an order where each dimension
 * expression only uses variables bound before it: a variable is bound by its first whole-dim
 * occurrence in parameter order), ASSERT of every fact, ALLOC_STORAGE of the planned storages
 * (one sized at run time where its first tenant is allocated, its variables bound by then),
 * then the bindings in order, then RET. Registers: parameters 0..nparams-1, then storages, then
 * bindings and temporaries in order of appearance.
 *
 * FREE r is emitted right after the last read of r, where r is the output of a call_tensor or
 * call_extern of the same sequence (function body or if branch: freshly allocated, never a
 * parameter or a caller's value), and no value that may alias it (a move, tuple, get_item,
 * match_cast, if or graph call made from it) is read later or returned; so a VM may release the
 * value at FREE whether or not it counts references. */
#include "passes.h"

#include "../ops/ops.h"
#include "../runtime/vm_format.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NONE 0xffffffffu

/* ---- pointer -> int map ---- */

typedef RX_VEC(uint32_t) wordvec;

typedef struct lower {
  rx_module *m;
  rx_diag *diag;
  bool ok;
  /* the string table: interned texts (pointer identity) -> id */
  rx_arena arena;
  rx_strtab strtab;
  rx_ptrmap str_ids;
  RX_VEC(const char *) strs;
  /* the host functions */
  RX_VEC(const rx_graph_fn *) fns;
  /* the function being lowered */
  const rx_graph_fn *fn;
  const rx_fn_plan *plan;
  rx_ptrmap regs; /* rx_var* -> register */
  int nregs;
  wordvec reg_names;  /* per register: the string id of its name ("" for a temporary) */
  rx_ptrmap alloc_of; /* rx_var* -> index of its first allocation in plan (they are adjacent) */
  int *storage_regs;
  bool *storage_made; /* a storage sized at run time has its ALLOC_STORAGE emitted */
  wordvec code;
  RX_VEC(const rx_expr *) bound; /* symbolic variables bound so far */
  /* the binding being emitted is in tail position: its value is the function's result (the last
   * binding of the body, or of a branch of an if in tail position, whose result it is); a graph
   * call there is a TAIL_CALL_FN */
  bool tail;
} lower;

static void err(lower *L, rx_loc loc, const char *fmt, ...) RX_PRINTF(3, 4);
static void err(lower *L, rx_loc loc, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  rx_strbuf b = {0};
  base_strbuf_printf(&b, "lower_host: function %s: ", L->fn ? L->fn->name : "?");
  base_strbuf_vprintf(&b, fmt, ap);
  va_end(ap);
  base_diag_report(L->diag, RX_DIAG_ERROR, loc, "%s", b.data);
  base_strbuf_free(&b);
  L->ok = false;
}

static uint32_t str_id(lower *L, const char *s, size_t n) {
  const char *p = base_strtab_intern(&L->strtab, s, n);
  int id = base_ptrmap_get(&L->str_ids, p);
  if (id >= 0) return (uint32_t)id;
  id = (int)L->strs.len;
  RX_VEC_PUSH(&L->strs, p);
  base_ptrmap_put(&L->str_ids, p, id);
  return (uint32_t)id;
}
static uint32_t str(lower *L, const char *s) { return str_id(L, s, strlen(s)); }
static uint32_t expr_str(lower *L, const rx_expr *e) {
  rx_strbuf b = {0};
  sym_expr_print(&b, e);
  uint32_t id = str_id(L, b.data ? b.data : "", b.len);
  base_strbuf_free(&b);
  return id;
}
static uint32_t sinfo_str(lower *L, const rx_sinfo *s) {
  rx_strbuf b = {0};
  ir_sinfo_print(&b, s);
  uint32_t id = str_id(L, b.data ? b.data : "", b.len);
  base_strbuf_free(&b);
  return id;
}

static void w(lower *L, uint32_t x) { RX_VEC_PUSH(&L->code, x); }
static uint32_t sw(int x) { return (uint32_t)x; } /* -1 -> 0xffffffff */

static bool is_bound(lower *L, const rx_expr *v) {
  for (size_t i = 0; i < L->bound.len; i++)
    if (L->bound.data[i] == v) return true;
  return false;
}
static void set_bound(lower *L, const rx_expr *v) {
  if (!is_bound(L, v)) RX_VEC_PUSH(&L->bound, v);
}
static bool all_bound(lower *L, const rx_expr *e) {
  rx_ptrvec vars = {0};
  sym_expr_collect_vars(e, &vars);
  bool ok = true;
  for (size_t i = 0; i < vars.len; i++) ok = ok && is_bound(L, vars.data[i]);
  base_ptrvec_free(&vars);
  return ok;
}

/* A new register named name (messages of the VM say which binding a value is): "" for a
 * temporary. */
static int named_reg(lower *L, const char *name) {
  RX_VEC_PUSH(&L->reg_names, str(L, name));
  return L->nregs++;
}
static int new_reg(lower *L) { return named_reg(L, ""); }
static int var_reg(lower *L, const rx_var *v) {
  int r = base_ptrmap_get(&L->regs, v);
  if (r < 0) {
    r = named_reg(L, v->name);
    base_ptrmap_put(&L->regs, v, r);
  }
  return r;
}

/* Dimension descriptors of a tensor check (CHECK_TENSOR / MATCH_CAST): whole-dim variables not
 * bound yet are bound (BIND), constants compared (CONST), everything else evaluated (EXPR).
 * Unknown dims (rank-only struct info) bind a fresh name "<what>#<d>" that no expression uses. */
static void dims_desc(lower *L, const rx_sinfo *s, const char *what, rx_loc loc) {
  w(L, (uint32_t)s->dtype);
  w(L, sw(s->ndim));
  for (int d = 0; d < s->ndim; d++) {
    if (!s->shape) {
      char name[300];
      snprintf(name, sizeof name, "%s#%d", what, d);
      w(L, RXVM_DIM_BIND);
      w(L, str(L, name));
      continue;
    }
    const rx_expr *e = s->shape[d];
    if (e->kind == RX_EXPR_CONST) {
      w(L, RXVM_DIM_CONST);
      w(L, (uint32_t)((uint64_t)e->value & 0xffffffffu));
      w(L, (uint32_t)((uint64_t)e->value >> 32));
    } else if (e->kind == RX_EXPR_VAR && !is_bound(L, e)) {
      w(L, RXVM_DIM_BIND);
      w(L, str(L, e->name));
      set_bound(L, e);
    } else {
      if (!all_bound(L, e)) {
        rx_strbuf b = {0};
        sym_expr_print(&b, e);
        err(L, loc, "%s: dimension %s uses a variable that no whole dimension defines", what,
            b.data);
        base_strbuf_free(&b);
      }
      w(L, RXVM_DIM_EXPR);
      w(L, expr_str(L, e));
    }
  }
}

/* Does the tensor's check bind something or only use bound variables? Whether every EXPR dim's
 * variables are bound (counting the whole-dim variables this check binds itself). */
static bool check_ready(lower *L, const rx_sinfo *s) {
  if ((s->kind != RX_SINFO_TENSOR && s->kind != RX_SINFO_SHAPE) || !s->shape) return true;
  size_t mark = L->bound.len;
  bool ok = true;
  for (int d = 0; d < s->ndim; d++)
    if (s->shape[d]->kind == RX_EXPR_VAR) set_bound(L, s->shape[d]);
  for (int d = 0; d < s->ndim; d++)
    if (s->shape[d]->kind != RX_EXPR_VAR && s->shape[d]->kind != RX_EXPR_CONST)
      ok = ok && all_bound(L, s->shape[d]);
  L->bound.len = mark;
  return ok;
}

static bool sinfo_has_vars(const rx_sinfo *s) {
  if (!s) return false;
  if ((s->kind == RX_SINFO_TENSOR || s->kind == RX_SINFO_SHAPE) && s->shape)
    for (int i = 0; i < s->ndim; i++)
      if (s->shape[i]->kind != RX_EXPR_CONST) return true;
  if (s->kind == RX_SINFO_PRIM && s->value && s->value->kind != RX_EXPR_CONST) return true;
  if (s->kind == RX_SINFO_TUPLE || s->kind == RX_SINFO_FUNC)
    for (int i = 0; i < s->nfields; i++)
      if (sinfo_has_vars(s->fields[i])) return true;
  return false;
}

static void emit_params(lower *L) {
  const rx_graph_fn *f = L->fn;
  bool *done = base_calloc((size_t)f->nparams + 1, 1);
  for (int i = 0; i < f->nparams; i++) {
    const rx_sinfo *s = f->params[i]->sinfo;
    done[i] = s->kind != RX_SINFO_TENSOR && s->kind != RX_SINFO_SHAPE;
    if (done[i] && sinfo_has_vars(s))
      err(L, f->params[i]->loc,
          "parameter %s: only tensor and shape parameters may carry symbolic values in the host "
          "program (the VM checks them at entry)",
          f->params[i]->name);
  }
  for (;;) {
    int pick = -1, first = -1;
    for (int i = 0; i < f->nparams && pick < 0; i++) {
      if (done[i]) continue;
      if (first < 0) first = i;
      if (check_ready(L, f->params[i]->sinfo)) pick = i;
    }
    if (pick < 0) pick = first; /* reported by dims_desc */
    if (pick < 0) break;
    done[pick] = true;
    const rx_var *p = f->params[pick];
    if (p->sinfo->kind == RX_SINFO_SHAPE) { /* a shape value: checked (and bound) by match_cast */
      w(L, RXVM_OP_MATCH_CAST);
      w(L, (uint32_t)pick);
      w(L, (uint32_t)pick);
    } else {
      w(L, RXVM_OP_CHECK_TENSOR);
      w(L, (uint32_t)pick);
      w(L, (uint32_t)pick);
      w(L, str(L, p->source_name ? p->source_name : p->name)); /* the signature's name */
    }
    w(L, sinfo_str(L, p->sinfo));
    dims_desc(L, p->sinfo, p->source_name ? p->source_name : p->name, p->loc);
  }
  free(done);
  for (int i = 0; i < f->nfacts; i++) {
    rx_strbuf msg = {0};
    base_strbuf_printf(&msg, "function %s: fact ", f->name);
    sym_expr_print(&msg, f->facts[i]);
    base_strbuf_append(&msg, " violated");
    if (!all_bound(L, f->facts[i]))
      err(L, f->fact_locs ? f->fact_locs[i] : f->loc,
          "fact uses a variable that no parameter's whole dimension defines");
    w(L, RXVM_OP_ASSERT);
    w(L, expr_str(L, f->facts[i]));
    w(L, str_id(L, msg.data, msg.len));
    base_strbuf_free(&msg);
  }
}

/* ---- liveness within one sequence ---- */
/* A binding whose value may be (part of) the values it reads. */
static bool aliasing(const rx_node *n) {
  switch (n->kind) {
  case RX_NODE_CALL_TENSOR: /* in place: its value is the target */
    return n->inplace != NULL;
  case RX_NODE_CALL_EXTERN: /* a returning extern may give a view of its arguments' buffers */
    return n->ext && n->ext->ret;
  case RX_NODE_CONST:
  case RX_NODE_PRIM:
  case RX_NODE_SHAPE:
    return false;
  case RX_NODE_CALL: /* host-level ops: reshape is a view of its input */
    return true;
  default:
    return true;
  }
}

/* A binding whose value is freshly allocated here (never a parameter or a caller's value). */
static bool owned(const rx_binding *b) {
  const rx_node *n = b->value;
  return !b->cast && ((n->kind == RX_NODE_CALL_TENSOR && !n->inplace) ||
                      (n->kind == RX_NODE_CALL_EXTERN && n->ext && !n->ext->ret));
}

/* ---- bindings ---- */
static void emit_seq(lower *L, const rx_seq *s, int dst, bool tail);

/* The register holding node n's value (emitting it into a temporary when it is not a var). */
static int emit_value(lower *L, const rx_node *n, int dst);
static int value_reg(lower *L, const rx_node *n) {
  if (n->kind == RX_NODE_VAR) {
    int r = base_ptrmap_get(&L->regs, n->var);
    if (r < 0) err(L, n->loc, "'%s' is used before it is defined", n->var->name);
    return r;
  }
  return emit_value(L, n, new_reg(L));
}

static void emit_alloc(lower *L, const rx_sinfo *s, const rx_var *v, int field, int dst,
                       rx_loc loc) {
  if (s->kind != RX_SINFO_TENSOR || !s->shape || s->dtype == RX_DTYPE_UNKNOWN) {
    rx_strbuf b = {0};
    ir_sinfo_print(&b, s);
    err(L, loc, "cannot allocate the output %s of '%s': it needs a dtype and a shape", b.data,
        v ? v->name : "?");
    base_strbuf_free(&b);
    return;
  }
  int st = -1;
  int first = v && L->plan ? base_ptrmap_get(&L->alloc_of, v) : -1;
  for (int i = first; i >= 0 && i < L->plan->nallocs && L->plan->allocs[i].var == v; i++)
    if (L->plan->allocs[i].field == field && L->plan->allocs[i].storage >= 0) {
      int ps = L->plan->allocs[i].storage;
      st = L->storage_regs[ps];
      if (L->plan->storage_bytes[ps] < 0 && !L->storage_made[ps]) { /* sized at run time */
        L->storage_made[ps] = true;
        w(L, RXVM_OP_ALLOC_STORAGE);
        w(L, sw(st));
        w(L, expr_str(L, L->plan->storage_exprs[ps]));
      }
    }
  w(L, RXVM_OP_ALLOC_TENSOR);
  w(L, sw(dst));
  w(L, sw(st));
  w(L, str(L, "0"));
  w(L, (uint32_t)s->dtype);
  w(L, sw(s->ndim));
  for (int d = 0; d < s->ndim; d++) {
    if (!all_bound(L, s->shape[d]))
      err(L, loc, "output dimension of '%s' uses an undefined variable", v ? v->name : "?");
    w(L, expr_str(L, s->shape[d]));
  }
}

/* The (program variable, caller expression) pairs of a call_tensor: scalars from dims=[...],
 * then whole dims of the inputs, then of the outputs (as normalization unifies them). */
typedef RX_VEC(const rx_expr *) exprvec;
static void sub_bind(exprvec *vars, exprvec *repl, const rx_expr *v, const rx_expr *e) {
  for (size_t i = 0; i < vars->len; i++)
    if (vars->data[i] == v) return;
  RX_VEC_PUSH(vars, v);
  RX_VEC_PUSH(repl, e);
}

/* The register of field i of a tuple output bound to v: named "v[i]". */
static int field_reg(lower *L, const rx_var *v, int i) {
  if (!v) return new_reg(L);
  char name[300];
  snprintf(name, sizeof name, "%.280s[%d]", v->name, i);
  return named_reg(L, name);
}

static void emit_call_tensor(lower *L, const rx_node *n, const rx_var *v, int dst) {
  const rx_tensor_fn *p = n->tfn;
  if (!p) {
    err(L, n->loc, "call_tensor of an unknown program '%s'", n->callee ? n->callee : "?");
    return;
  }
  const rx_sinfo *const *outs = &n->out;
  int nouts = 1;
  if (n->out->kind == RX_SINFO_TUPLE) {
    outs = n->out->fields;
    nouts = n->out->nfields;
  }
  int *out_regs = base_calloc((size_t)nouts + 1, sizeof(int));
  int ntargets = ir_inplace_targets(n); /* the first outputs; the rest (fresh_out) allocated */
  for (int i = 0; i < nouts; i++) {
    if (i < ntargets) { /* the outputs are the target's buffers: nothing to allocate */
      out_regs[i] =
          value_reg(L, n->inplace->kind == RX_NODE_TUPLE ? n->inplace->args[i] : n->inplace);
      continue;
    }
    out_regs[i] = n->out->kind == RX_SINFO_TUPLE ? field_reg(L, v, i) : dst;
    emit_alloc(L, outs[i], v, n->out->kind == RX_SINFO_TUPLE ? i : -1, out_regs[i], n->loc);
  }
  int *arg_regs = base_calloc((size_t)n->nargs + 1, sizeof(int));
  for (int i = 0; i < n->nargs; i++) arg_regs[i] = value_reg(L, n->args[i]);
  /* unify */
  exprvec vars = {0}, repl = {0};
  int k = 0;
  for (int i = 0; i < p->nparams; i++)
    if (p->params[i]->kind == RX_PARAM_SCALAR && k < n->nextra)
      sub_bind(&vars, &repl, p->params[i]->var, n->extra_dims[k++]);
  for (int pass = 0; pass < 2; pass++) {
    int ai = 0, oi = 0;
    for (int i = 0; i < p->nparams; i++) {
      const rx_param *q = p->params[i];
      if (q->kind != RX_PARAM_BUFFER || q->is_output != (pass == 1)) continue;
      const rx_sinfo *have = NULL;
      if (pass == 0 && ai < n->nargs) have = n->args[ai]->sinfo;
      if (pass == 1 && oi < nouts) have = outs[oi];
      pass == 0 ? ai++ : oi++;
      if (!have || have->kind != RX_SINFO_TENSOR || !have->shape || have->ndim != q->buf->ndim)
        continue;
      for (int d = 0; d < q->buf->ndim; d++)
        if (q->buf->shape[d]->kind == RX_EXPR_VAR)
          sub_bind(&vars, &repl, q->buf->shape[d], have->shape[d]);
    }
  }
  /* every variable of the program's parameters must be given */
  for (int i = 0; i < p->nparams; i++) {
    const rx_param *q = p->params[i];
    if (q->kind != RX_PARAM_BUFFER) continue;
    rx_ptrvec pv = {0};
    for (int d = 0; d < q->buf->ndim; d++) sym_expr_collect_vars(q->buf->shape[d], &pv);
    for (size_t j = 0; j < pv.len; j++) {
      bool found = false;
      for (size_t t = 0; t < vars.len; t++) found = found || vars.data[t] == pv.data[j];
      if (!found)
        err(L, n->loc, "call_tensor %s: the program's variable %s is not determined by the call",
            p->name, ((const rx_expr *)pv.data[j])->name);
    }
    base_ptrvec_free(&pv);
  }
  w(L, RXVM_OP_CALL_KERNELS);
  w(L, str(L, p->name));
  w(L, (uint32_t)p->nparams);
  int ai = 0, oi = 0;
  for (int i = 0; i < p->nparams; i++) {
    const rx_param *q = p->params[i];
    if (q->kind == RX_PARAM_SCALAR)
      w(L, NONE);
    else if (!q->is_output)
      w(L, sw(ai < n->nargs ? arg_regs[ai++] : -1));
    else
      w(L, sw(oi < nouts ? out_regs[oi++] : -1));
  }
  w(L, (uint32_t)vars.len);
  for (size_t i = 0; i < vars.len; i++) {
    w(L, str(L, vars.data[i]->name));
    if (!all_bound(L, repl.data[i]))
      err(L, n->loc, "call_tensor %s: an argument's shape uses an undefined variable", p->name);
    w(L, expr_str(L, repl.data[i]));
  }
  if (n->out->kind == RX_SINFO_TUPLE) {
    w(L, RXVM_OP_TUPLE);
    w(L, sw(dst));
    w(L, (uint32_t)nouts);
    for (int i = 0; i < nouts; i++) w(L, sw(out_regs[i]));
  } else if (n->inplace) {
    w(L, RXVM_OP_MOVE);
    w(L, sw(dst));
    w(L, sw(out_regs[0]));
  }
  free(vars.data);
  free(repl.data);
  free(out_regs);
  free(arg_regs);
}

/* CALL_EXTERN name, its arguments, then its outputs: the destinations it fills (allocated here
 * first), or for a returning extern one register, empty, that it sets to its result. */
static void emit_call_extern(lower *L, const rx_node *n, int dst) {
  if (n->ext && n->ext->ret) {
    int *arg_regs = base_calloc((size_t)n->nargs + 1, sizeof(int));
    for (int i = 0; i < n->nargs; i++) arg_regs[i] = value_reg(L, n->args[i]);
    w(L, RXVM_OP_CALL_EXTERN);
    w(L, str(L, n->ext->name));
    w(L, (uint32_t)(n->nargs + 1));
    for (int i = 0; i < n->nargs; i++) w(L, sw(arg_regs[i]));
    w(L, sw(dst));
    free(arg_regs);
    return;
  }
  const rx_sinfo *const *outs = &n->out;
  int nouts = 1;
  if (n->out->kind == RX_SINFO_TUPLE) {
    outs = n->out->fields;
    nouts = n->out->nfields;
  }
  int *out_regs = base_calloc((size_t)nouts + 1, sizeof(int));
  for (int i = 0; i < nouts; i++) {
    out_regs[i] = n->out->kind == RX_SINFO_TUPLE ? new_reg(L) : dst;
    emit_alloc(L, outs[i], NULL, -1, out_regs[i], n->loc);
  }
  int *arg_regs = base_calloc((size_t)n->nargs + 1, sizeof(int));
  for (int i = 0; i < n->nargs; i++) arg_regs[i] = value_reg(L, n->args[i]);
  w(L, RXVM_OP_CALL_EXTERN);
  w(L, str(L, n->ext ? n->ext->name : n->callee));
  w(L, (uint32_t)(n->nargs + nouts));
  for (int i = 0; i < n->nargs; i++) w(L, sw(arg_regs[i]));
  for (int i = 0; i < nouts; i++) w(L, sw(out_regs[i]));
  if (n->out->kind == RX_SINFO_TUPLE) {
    w(L, RXVM_OP_TUPLE);
    w(L, sw(dst));
    w(L, (uint32_t)nouts);
    for (int i = 0; i < nouts; i++) w(L, sw(out_regs[i]));
  }
  free(out_regs);
  free(arg_regs);
}

/* A host-level op call (ops_op_is_host_call): TENSOR_TO_SHAPE or RESHAPE. */
static void emit_host_op(lower *L, const rx_node *n, int dst, const rx_var *v) {
  if (!ops_op_is_host_call(n)) {
    err(L, n->loc, "op call %s left after legalization", n->op ? n->op->name : "?");
    return;
  }
  bool t2s = n->op->id == RX_OP_tensor_to_shape;
  rx_strbuf what = {0};
  base_strbuf_printf(&what, "%s(", n->op->name);
  for (int i = 0; i < n->nargs; i++) {
    if (i) base_strbuf_append(&what, ", ");
    if (n->args[i]->kind == RX_NODE_VAR)
      base_strbuf_append(&what, n->args[i]->var->name);
    else
      base_strbuf_append(&what, "...");
  }
  base_strbuf_append(&what, ")");
  if (v) base_strbuf_printf(&what, " for '%s'", v->name);
  int src = value_reg(L, n->args[0]);
  int shp = t2s ? -1 : value_reg(L, n->args[1]);
  w(L, t2s ? RXVM_OP_TENSOR_TO_SHAPE : RXVM_OP_RESHAPE);
  w(L, sw(dst));
  w(L, sw(src));
  if (!t2s) w(L, sw(shp));
  w(L, str_id(L, what.data, what.len));
  base_strbuf_free(&what);
}

/* Emits the value of node n into register dst (v: the binding's variable, or NULL); returns
 * dst. */
/* A tensor constant becomes a weight of its own, named after its function and binding
 * ("main.c", made unique with ".2", ".3", ...), read by WEIGHT. */
static void emit_const(lower *L, const rx_node *n, const rx_var *v, int dst) {
  const rx_sinfo *s = n->sinfo;
  int64_t shape[RX_WEIGHT_MAX_NDIM];
  bool ok = s && s->kind == RX_SINFO_TENSOR && s->shape && s->ndim <= RX_WEIGHT_MAX_NDIM &&
            s->dtype != RX_DTYPE_UNKNOWN;
  for (int d = 0; ok && d < s->ndim; d++) {
    ok = s->shape[d]->kind == RX_EXPR_CONST;
    shape[d] = ok ? s->shape[d]->value : 0;
  }
  if (!ok) {
    err(L, n->loc, "a tensor constant needs a dtype and a constant shape of at most %d dims",
        RX_WEIGHT_MAX_NDIM);
    return;
  }
  rx_strbuf name = {0};
  base_strbuf_printf(&name, "%s.%s", L->fn->name, v ? v->name : "const");
  size_t base = name.len;
  for (int k = 2; ir_module_weight(L->m, name.data); k++) {
    name.len = base;
    base_strbuf_printf(&name, ".%d", k);
  }
  int64_t count = 0;
  if (base_shape_count(s->ndim, shape, 1, &count) != RX_COUNT_OK) count = 0; /* the add reports */
  size_t bytes = (size_t)count * (size_t)ir_dtype_bits(s->dtype) / 8;
  void *data = ir_module_alloc(L->m, bytes ? bytes : 1); /* zeroed; lives with the module */
  ir_const_bytes(n, data, (size_t)count);
  rx_status st = rx_module_add_weight(L->m, name.data, s->dtype, s->ndim, shape, s->dtype, data);
  if (st) {
    err(L, n->loc, "%s", rx_status_message(st));
    rx_status_free(st);
  }
  w(L, RXVM_OP_WEIGHT);
  w(L, sw(dst));
  w(L, str(L, name.data));
  base_strbuf_free(&name);
}

static int emit_value_for(lower *L, const rx_node *n, int dst, const rx_var *v) {
  bool tail = L->tail; /* for a graph call or an if, not for what they read */
  L->tail = false;
  switch (n->kind) {
  case RX_NODE_VAR: {
    int src = value_reg(L, n);
    w(L, RXVM_OP_MOVE);
    w(L, sw(dst));
    w(L, sw(src));
    break;
  }
  case RX_NODE_PRIM:
    if (ir_dtype_is_float(n->prim_dtype) || !n->prim) {
      err(L, n->loc, "a float scalar value is not expressible in the host program (yet)");
      break;
    }
    w(L, RXVM_OP_PRIM);
    w(L, sw(dst));
    w(L, (uint32_t)n->prim_dtype);
    w(L, expr_str(L, n->prim));
    break;
  case RX_NODE_SHAPE:
    w(L, RXVM_OP_SHAPE);
    w(L, sw(dst));
    w(L, (uint32_t)n->ndims);
    for (int i = 0; i < n->ndims; i++) w(L, expr_str(L, n->dims[i]));
    break;
  case RX_NODE_TUPLE: {
    int *r = base_calloc((size_t)n->nargs + 1, sizeof(int));
    for (int i = 0; i < n->nargs; i++) r[i] = value_reg(L, n->args[i]);
    w(L, RXVM_OP_TUPLE);
    w(L, sw(dst));
    w(L, (uint32_t)n->nargs);
    for (int i = 0; i < n->nargs; i++) w(L, sw(r[i]));
    free(r);
    break;
  }
  case RX_NODE_GET_ITEM: {
    int src = value_reg(L, n->args[0]);
    w(L, RXVM_OP_GET_ITEM);
    w(L, sw(dst));
    w(L, sw(src));
    w(L, (uint32_t)n->index);
    break;
  }
  case RX_NODE_CALL_TENSOR:
    emit_call_tensor(L, n, v, dst);
    break;
  case RX_NODE_CALL_EXTERN:
    emit_call_extern(L, n, dst);
    break;
  case RX_NODE_CALL_GRAPH: {
    int idx = -1;
    for (size_t i = 0; i < L->fns.len; i++)
      if (L->fns.data[i] == n->gfn) idx = (int)i;
    if (idx < 0) {
      err(L, n->loc, "call of '%s', which is not a graph function of the host program",
          n->callee ? n->callee : "?");
      break;
    }
    int *r = base_calloc((size_t)n->nargs + 1, sizeof(int));
    for (int i = 0; i < n->nargs; i++) r[i] = value_reg(L, n->args[i]);
    w(L, tail ? RXVM_OP_TAIL_CALL_FN : RXVM_OP_CALL_FN); /* a tail call: the code after is dead */
    if (!tail) w(L, sw(dst));
    w(L, (uint32_t)idx);
    w(L, (uint32_t)n->nargs);
    for (int i = 0; i < n->nargs; i++) w(L, sw(r[i]));
    free(r);
    break;
  }
  case RX_NODE_IF: {
    int c = value_reg(L, n->cond);
    w(L, RXVM_OP_JUMP_IF_NOT);
    w(L, sw(c));
    size_t else_patch = L->code.len;
    w(L, 0);
    emit_seq(L, n->then_seq, dst, tail);
    w(L, RXVM_OP_JUMP);
    size_t end_patch = L->code.len;
    w(L, 0);
    L->code.data[else_patch] = (uint32_t)L->code.len;
    emit_seq(L, n->else_seq, dst, tail);
    L->code.data[end_patch] = (uint32_t)L->code.len;
    break;
  }
  case RX_NODE_CONST:
    emit_const(L, n, v, dst);
    break;
  case RX_NODE_CALL:
    emit_host_op(L, n, dst, v);
    break;
  }
  return dst;
}
static int emit_value(lower *L, const rx_node *n, int dst) {
  return emit_value_for(L, n, dst, NULL);
}

static void emit_binding(lower *L, const rx_binding *b) {
  if (b->cast) {
    int src = value_reg(L, b->value);
    int dst = var_reg(L, b->var);
    if (b->cast->kind == RX_SINFO_OBJECT) {
      w(L, RXVM_OP_MOVE);
      w(L, sw(dst));
      w(L, sw(src));
      return;
    }
    if (b->cast->kind != RX_SINFO_TENSOR && b->cast->kind != RX_SINFO_SHAPE) {
      err(L, b->loc,
          "match_cast to %s: only tensor and Shape targets are supported by the host program",
          b->cast->kind == RX_SINFO_PRIM    ? "a Prim"
          : b->cast->kind == RX_SINFO_TUPLE ? "a tuple"
                                            : "this struct info");
      return;
    }
    w(L, RXVM_OP_MATCH_CAST);
    w(L, sw(dst));
    w(L, sw(src));
    w(L, sinfo_str(L, b->cast));
    dims_desc(L, b->cast, b->var->name, b->loc);
    return;
  }
  int dst = var_reg(L, b->var);
  emit_value_for(L, b->value, dst, b->var);
}

/* Emits a sequence; its result goes to dst (when dst >= 0: an if branch) or is returned. tail:
 * its result is the function's (the body, a branch of an if in tail position). */
static void emit_seq(lower *L, const rx_seq *s, int dst, bool tail) {
  /* positions: bindings 0..k-1, result k */
  int k = 0;
  for (int b = 0; b < s->nblocks; b++) k += s->blocks[b]->nbindings;
  const rx_binding **bs = base_calloc((size_t)k + 1, sizeof *bs);
  k = 0;
  for (int b = 0; b < s->nblocks; b++)
    for (int i = 0; i < s->blocks[b]->nbindings; i++) bs[k++] = s->blocks[b]->bindings[i];
  /* last reads of the variables defined here, extended through aliases */
  rx_ptrmap local = {0};
  int *last = base_calloc((size_t)k + 1, sizeof(int));
  for (int i = 0; i < k; i++) {
    base_ptrmap_put(&local, bs[i]->var, i);
    last[i] = i;
  }
  for (int i = 0; i <= k; i++) {
    rx_varvec u = {0};
    ir_node_uses(i < k ? bs[i]->value : s->result, &u);
    for (size_t j = 0; j < u.len; j++) {
      int d = base_ptrmap_get(&local, u.data[j]);
      if (d >= 0 && i > last[d]) last[d] = i;
    }
    free(u.data);
  }
  for (int i = k - 1; i >= 0; i--) {
    if (!aliasing(bs[i]->value) && !bs[i]->cast) continue;
    rx_varvec u = {0};
    ir_node_uses(bs[i]->value, &u);
    for (size_t j = 0; j < u.len; j++) {
      int d = base_ptrmap_get(&local, u.data[j]);
      if (d >= 0 && last[i] > last[d]) last[d] = last[i];
    }
    free(u.data);
  }
  /* the last binding is in tail position when it is the result, a call or an if, not a cast */
  bool tail_last = tail && k && s->result && s->result->kind == RX_NODE_VAR &&
                   s->result->var == bs[k - 1]->var && !bs[k - 1]->cast;
  for (int i = 0; i < k; i++) {
    L->tail = tail_last && i == k - 1;
    emit_binding(L, bs[i]);
    L->tail = false;
    for (int d = 0; d <= i; d++)
      if (last[d] == i && owned(bs[d])) {
        w(L, RXVM_OP_FREE);
        w(L, sw(var_reg(L, bs[d]->var)));
      }
  }
  if (s->result) {
    int r = value_reg(L, s->result);
    if (dst >= 0) {
      w(L, RXVM_OP_MOVE);
      w(L, sw(dst));
      w(L, sw(r));
    } else {
      w(L, RXVM_OP_RET);
      w(L, sw(r));
    }
  } else {
    err(L, L->fn->loc, "a sequence without a result");
  }
  free(last);
  free(bs);
  base_ptrmap_free(&local);
}

static void lower_fn(lower *L, const rx_graph_fn *f, const rx_mem_plan *plan, wordvec *out) {
  L->fn = f;
  L->plan = pass_mem_plan_fn(plan, f);
  L->nregs = 0;
  L->reg_names.len = 0;
  L->code.len = 0;
  L->bound.len = 0;
  base_ptrmap_free(&L->regs);
  for (int i = 0; i < f->nparams; i++)
    base_ptrmap_put(&L->regs, f->params[i], named_reg(L, f->params[i]->name));
  emit_params(L);
  base_ptrmap_free(&L->alloc_of);
  for (int i = L->plan ? L->plan->nallocs - 1 : -1; i >= 0; i--)
    base_ptrmap_put(&L->alloc_of, L->plan->allocs[i].var, i);
  int ns = L->plan ? L->plan->nstorages : 0;
  L->storage_regs = base_calloc((size_t)ns + 1, sizeof(int));
  L->storage_made = base_calloc((size_t)ns + 1, sizeof(bool));
  for (int s = 0; s < ns; s++) {
    char bytes[32];
    snprintf(bytes, sizeof bytes, "storage %d", s);
    L->storage_regs[s] = named_reg(L, bytes);
    if (L->plan->storage_bytes[s] < 0) continue; /* where its first tenant is defined */
    snprintf(bytes, sizeof bytes, "%lld", (long long)L->plan->storage_bytes[s]);
    w(L, RXVM_OP_ALLOC_STORAGE);
    w(L, sw(L->storage_regs[s]));
    w(L, str(L, bytes));
  }
  emit_seq(L, &f->body, -1, true);
  free(L->storage_regs);
  free(L->storage_made);
  L->storage_regs = NULL;
  L->storage_made = NULL;
  RX_VEC_PUSH(out, str(L, f->name));
  RX_VEC_PUSH(out, (uint32_t)f->nparams);
  RX_VEC_PUSH(out, (uint32_t)L->nregs);
  RX_VEC_PUSH(out, (uint32_t)L->code.len);
  for (size_t i = 0; i < L->code.len; i++) RX_VEC_PUSH(out, L->code.data[i]);
  RX_ASSERT(L->reg_names.len == (size_t)L->nregs);
  for (size_t i = 0; i < L->reg_names.len; i++) RX_VEC_PUSH(out, L->reg_names.data[i]);
}

bool pass_lower_host(rx_module *m, const rx_mem_plan *plan, rx_diag *diag, rx_host_program *out) {
  memset(out, 0, sizeof *out);
  lower L = {.m = m, .diag = diag, .ok = true};
  base_arena_init(&L.arena);
  base_strtab_init(&L.strtab, &L.arena);
  for (size_t i = 0; i < m->items.len; i++)
    if (m->items.data[i].kind == RX_ITEM_GRAPH && !((rx_graph_fn *)m->items.data[i].fn)->primitive)
      RX_VEC_PUSH(&L.fns, m->items.data[i].fn);
  wordvec fnwords = {0};
  for (size_t i = 0; i < L.fns.len; i++) lower_fn(&L, L.fns.data[i], plan, &fnwords);
  wordvec all = {0};
  RX_VEC_PUSH(&all, RXVM_MAGIC);
  RX_VEC_PUSH(&all, RXVM_VERSION);
  RX_VEC_PUSH(&all, (uint32_t)L.strs.len);
  for (size_t i = 0; i < L.strs.len; i++) {
    size_t n = strlen(L.strs.data[i]);
    RX_VEC_PUSH(&all, (uint32_t)n);
    for (size_t j = 0; j < (n + 3) / 4; j++) {
      uint32_t x = 0;
      for (size_t b = 0; b < 4 && j * 4 + b < n; b++)
        x |= (uint32_t)(unsigned char)L.strs.data[i][j * 4 + b] << (8 * b);
      RX_VEC_PUSH(&all, x);
    }
  }
  RX_VEC_PUSH(&all, (uint32_t)L.fns.len);
  for (size_t i = 0; i < fnwords.len; i++) RX_VEC_PUSH(&all, fnwords.data[i]);
  out->words = all.data;
  out->nwords = all.len;
  free(fnwords.data);
  free(L.code.data);
  free(L.reg_names.data);
  free(L.bound.data);
  free(L.strs.data);
  free(L.fns.data);
  base_ptrmap_free(&L.regs);
  base_ptrmap_free(&L.alloc_of);
  base_ptrmap_free(&L.str_ids);
  base_strtab_free(&L.strtab);
  base_arena_free(&L.arena);
  return L.ok;
}

void pass_host_program_free(rx_host_program *h) {
  if (!h) return;
  free(h->words);
  memset(h, 0, sizeof *h);
}

/* ---- disassembler: the header and string table here, each function by rxvm_disasm_fn (the
 * runtime's, runtime/vm_walk.c) ---- */
typedef struct hp {
  const uint32_t *w;
  size_t n, pos;
  bool ok;
} hp;

static uint32_t take(hp *h) {
  if (h->pos >= h->n) {
    h->ok = false;
    return 0;
  }
  return h->w[h->pos++];
}

bool pass_host_disasm(rx_strbuf *out, const uint32_t *wds, size_t n) {
  if (n < 3 || wds[0] != RXVM_MAGIC || wds[1] != RXVM_VERSION) {
    base_strbuf_append(out, "not a host program (bad magic or version)\n");
    return false;
  }
  hp h = {wds, n, 2, true};
  uint32_t nstrs = take(&h);
  if (nstrs > n) h.ok = false;
  char **strs = base_calloc((size_t)(h.ok ? nstrs : 0) + 1, sizeof(char *));
  for (uint32_t i = 0; h.ok && i < nstrs; i++) {
    uint32_t len = take(&h);
    size_t nw = ((size_t)len + 3) / 4;
    if (!h.ok || nw > h.n - h.pos) {
      h.ok = false;
      break;
    }
    strs[i] = base_strndup((const char *)(wds + h.pos), len);
    h.pos += nw;
  }
  uint32_t nfns = h.ok ? take(&h) : 0;
  for (uint32_t f = 0; h.ok && f < nfns; f++) {
    uint32_t name = take(&h), np = take(&h), nr = take(&h), len = take(&h);
    if (!h.ok || name >= nstrs || len > h.n - h.pos || nr > h.n - h.pos - len) {
      h.ok = false;
      break;
    }
    h.ok = rxvm_disasm_fn(out, strs[name], np, wds + h.pos, len, wds + h.pos + len, nr,
                          (const char *const *)strs, nstrs);
    h.pos += (size_t)len + nr;
  }
  if (h.ok && h.pos != h.n) h.ok = false;
  if (!h.ok) base_strbuf_append(out, "<malformed host program>\n");
  for (uint32_t i = 0; i < nstrs && strs; i++) free(strs[i]);
  free(strs);
  return h.ok;
}
