/* The public C API (include/relaxc/compiler.h): module entry points, symbolic expressions,
 * struct info, attributes, and the graph-function and tensor-program builders. The handles of
 * the public header are the internal structs of ir/ir.h. The entry points that need the op
 * library (rx_module_new, rx_module_check, rx_emit_op) are on the ops floor: ops/emit.c. */
#include "relaxc/compiler.h"

#include "ir.h"

#include <stdlib.h>
#include <string.h>

static const rx_loc noloc;

void rx_free(void *p) { free(p); }

/* ---- diagnostics ---- */

rx_diag *rx_diag_create(void) {
  rx_diag *d = base_malloc(sizeof *d);
  base_diag_init(d);
  return d;
}
void rx_diag_destroy(rx_diag *d) {
  if (!d) return;
  base_diag_free(d);
  free(d);
}
int rx_diag_error_count(const rx_diag *d) { return d->errors; }
int rx_diag_warning_count(const rx_diag *d) { return d->warnings; }

/* An RX_ERR_INVALID status carrying the rendered diagnostics of local (copied into user
 * when given). */
rx_status ir_diag_status(rx_diag *local, rx_diag *user, bool ok) {
  if (user) {
    base_strbuf_append(&user->text, rx_diag_text(local));
    user->errors += local->errors;
    user->warnings += local->warnings;
  }
  rx_status s = NULL;
  if (!ok || local->errors) {
    const char *t = rx_diag_text(local); /* no "error: ": the printer of the status adds it */
    s = base_diag_status(RX_ERR_INVALID, t, strlen(t), "invalid module");
  }
  base_diag_free(local);
  return s;
}

/* ---- modules ---- */

rx_status rx_module_parse(rx_module *m, const char *name, const char *text, size_t len,
                          rx_diag *diag) {
  rx_diag local;
  base_diag_init(&local);
  bool ok = ir_parse_module(m, name ? name : "<input>", text ? text : "", text ? len : 0, &local);
  return ir_diag_status(&local, diag, ok);
}

char *rx_module_to_text(const rx_module *m) {
  rx_strbuf b = {0};
  ir_module_print(&b, m);
  return base_strbuf_take(&b);
}

/* ---- symbolic expressions ---- */

const rx_expr *rx_sym_var(rx_module *m, const char *name) { return sym_expr_var(m->ctx, name); }
const rx_expr *rx_sym_const(rx_module *m, int64_t v) { return sym_expr_const(m->ctx, v); }
#define SYM2(fn, call)                                                                             \
  const rx_expr *fn(rx_module *m, const rx_expr *a, const rx_expr *b) { return call; }
SYM2(rx_sym_add, sym_expr_add(m->ctx, a, b))
SYM2(rx_sym_sub, sym_expr_sub(m->ctx, a, b))
SYM2(rx_sym_mul, sym_expr_mul(m->ctx, a, b))
SYM2(rx_sym_floordiv, sym_expr_floordiv(m->ctx, a, b))
SYM2(rx_sym_floormod, sym_expr_floormod(m->ctx, a, b))
SYM2(rx_sym_min, sym_expr_min(m->ctx, a, b))
SYM2(rx_sym_max, sym_expr_max(m->ctx, a, b))
SYM2(rx_sym_eq, sym_expr_cmp(m->ctx, RX_EXPR_EQ, a, b))
SYM2(rx_sym_lt, sym_expr_cmp(m->ctx, RX_EXPR_LT, a, b))
SYM2(rx_sym_le, sym_expr_cmp(m->ctx, RX_EXPR_LE, a, b))
SYM2(rx_sym_and, sym_expr_and(m->ctx, a, b))
#undef SYM2
char *rx_sym_to_string(const rx_expr *e) { return sym_expr_to_string(e); }

char *rx_sinfo_to_string(const rx_sinfo *s) {
  rx_strbuf b = {0};
  ir_sinfo_print(&b, s);
  return base_strbuf_take(&b);
}

/* ---- attributes ---- */

static rx_attr *attr_new(rx_module *m, const char *name, rx_attr_kind kind) {
  rx_attr *a = ir_module_alloc(m, sizeof *a);
  a->name = ir_module_intern(m, name ? name : "", name ? strlen(name) : 0);
  a->kind = kind;
  return a;
}
const rx_attr *rx_attr_int(rx_module *m, const char *name, int64_t v) {
  rx_attr *a = attr_new(m, name, RX_ATTR_INT);
  a->i = v;
  return a;
}
const rx_attr *rx_attr_float(rx_module *m, const char *name, double v) {
  rx_attr *a = attr_new(m, name, RX_ATTR_FLOAT);
  a->f = v;
  return a;
}
const rx_attr *rx_attr_bool(rx_module *m, const char *name, bool v) {
  rx_attr *a = attr_new(m, name, RX_ATTR_BOOL);
  a->i = v;
  return a;
}
const rx_attr *rx_attr_str(rx_module *m, const char *name, const char *v) {
  rx_attr *a = attr_new(m, name, RX_ATTR_STR);
  a->s = base_arena_strdup(&m->arena, v ? v : "");
  return a;
}
const rx_attr *rx_attr_dtype(rx_module *m, const char *name, rx_dtype v) {
  rx_attr *a = attr_new(m, name, RX_ATTR_DTYPE);
  a->dtype = v;
  return a;
}
const rx_attr *rx_attr_ints(rx_module *m, const char *name, const int64_t *v, int n) {
  rx_attr *a = attr_new(m, name, RX_ATTR_INTS);
  n = n < 0 ? 0 : n;
  a->ints = base_arena_dup(&m->arena, v, sizeof *v * (size_t)n);
  a->n = n;
  return a;
}
const rx_attr *rx_attr_exprs(rx_module *m, const char *name, const rx_expr *const *v, int n) {
  rx_attr *a = attr_new(m, name, RX_ATTR_EXPRS);
  n = n < 0 ? 0 : n;
  a->exprs = base_arena_dup(&m->arena, v, sizeof *v * (size_t)n);
  a->n = n;
  return a;
}

/* ---- graph builder ---- */

struct rx_builder {
  rx_module *m;
  const char *name;
  RX_VEC(rx_var *) vars; /* parameters and bindings so far (names unique) */
  int nparams;           /* the first nparams of vars */
  RX_VEC(const rx_expr *) facts;
  RX_VEC(rx_block *) blocks; /* closed blocks */
  RX_VEC(rx_binding *) cur;  /* bindings of the open block */
  bool cur_dataflow;         /* the open block is a dataflow block */
  const rx_sinfo *ret;
  rx_analyzer *an; /* facts and n >= 0 for every symbolic variable in scope */
  rx_ptrvec syms;  /* symbolic variables in scope */
  /* Lookups in constant time, so that building n bindings takes O(n) (a list scan per name made
   * a 4,000-node ONNX import take 30 s): */
  rx_ptrmap names;    /* interned name of every var -> 1 */
  rx_ptrmap var_set;  /* every var of vars -> 1 */
  rx_ptrmap sym_set;  /* every symbolic variable of syms -> 1 */
  rx_ptrmap next_sfx; /* interned hint -> the suffix fresh_name tries first */
};

rx_builder *rx_builder_new(rx_module *m, const char *fn_name) {
  rx_builder *b = base_calloc(1, sizeof *b);
  b->m = m;
  b->name = ir_module_intern(m, fn_name ? fn_name : "", fn_name ? strlen(fn_name) : 0);
  b->an = sym_analyzer_new(m->ctx);
  return b;
}

void rx_builder_free(rx_builder *b) {
  if (!b) return;
  free(b->vars.data);
  free(b->facts.data);
  free(b->blocks.data);
  free(b->cur.data);
  base_ptrvec_free(&b->syms);
  base_ptrmap_free(&b->names);
  base_ptrmap_free(&b->var_set);
  base_ptrmap_free(&b->sym_set);
  base_ptrmap_free(&b->next_sfx);
  sym_analyzer_free(b->an);
  free(b);
}

rx_module *ir_builder_module(const rx_builder *b) { return b->m; }
rx_analyzer *ir_builder_analyzer(const rx_builder *b) { return b->an; }

static bool name_taken(rx_builder *b, const char *interned) {
  return base_ptrmap_get(&b->names, interned) >= 0;
}

static bool owns_var(rx_builder *b, const rx_var *v) {
  return base_ptrmap_get(&b->var_set, v) >= 0;
}

/* Appends v (its name interned and free) to the function's variables. */
static void add_var(rx_builder *b, rx_var *v) {
  RX_VEC_PUSH(&b->vars, v);
  base_ptrmap_put(&b->names, v->name, 1);
  base_ptrmap_put(&b->var_set, v, 1);
}

/* The variables that appear as whole dimensions of s join the scope (assumed >= 0). */
static void define_syms(rx_builder *b, const rx_sinfo *s) {
  if (!s) return;
  if (s->kind == RX_SINFO_TUPLE) {
    for (int i = 0; i < s->nfields; i++) define_syms(b, s->fields[i]);
    return;
  }
  const rx_expr *one = s->kind == RX_SINFO_PRIM ? s->value : NULL;
  int n = (s->kind == RX_SINFO_TENSOR || s->kind == RX_SINFO_SHAPE) && s->shape ? s->ndim : 0;
  for (int i = -1; i < n; i++) {
    const rx_expr *d = i < 0 ? one : s->shape[i];
    if (!d || d->kind != RX_EXPR_VAR) continue;
    if (base_ptrmap_get(&b->sym_set, d) >= 0) continue;
    base_ptrvec_push(&b->syms, (void *)d);
    base_ptrmap_put(&b->sym_set, d, 1);
    sym_analyzer_assume(b->an,
                        sym_expr_cmp(b->m->ctx, RX_EXPR_LE, sym_expr_const(b->m->ctx, 0), d));
  }
}

static rx_status check_name(rx_builder *b, const char *name, const char **out) {
  *out = NULL;
  if (!name || !*name)
    return base_status_make(RX_ERR_INVALID, "in '%s': a name is required", b->name);
  if (ir_text_is_reserved(name, strlen(name)))
    return base_status_make(RX_ERR_INVALID,
                            "in '%s': '%s' is a keyword of the text format, not a "
                            "name",
                            b->name, name);
  const char *s = ir_module_intern(b->m, name, strlen(name));
  if (name_taken(b, s))
    return base_status_make(RX_ERR_INVALID, "in '%s': '%s' is already defined", b->name, name);
  *out = s;
  return NULL;
}

/* A fresh binding name: `hint` if free, else hint1, hint2, ... (a keyword hint, as the op
 * `where`, starts at hint1). Names are never removed, so every suffix below the one a hint last
 * got is still taken: the search resumes at that one (next_sfx), and n names from one hint cost
 * O(n) in all, not O(n^2) tries. */
static const char *fresh_name(rx_builder *b, const char *hint) {
  const char *h = ir_module_intern(b->m, hint, strlen(hint));
  int i = base_ptrmap_get(&b->next_sfx, h);
  const char *s = h;
  if (i < 0) {
    if (!ir_text_is_reserved(hint, strlen(hint)) && !name_taken(b, h)) return h;
    i = 1;
  }
  for (;; i++) {
    char *t = base_arena_printf(&b->m->arena, "%s%d", hint, i);
    s = ir_module_intern(b->m, t, strlen(t));
    if (!name_taken(b, s)) break;
  }
  base_ptrmap_put(&b->next_sfx, h, i); /* i itself is taken only once bound */
  return s;
}

rx_status rx_builder_param(rx_builder *b, const char *name, const rx_sinfo *sinfo,
                           rx_var **out_var) {
  if (out_var) *out_var = NULL;
  if (b->vars.len != (size_t)b->nparams)
    return base_status_make(RX_ERR_INVALID, "in '%s': parameter '%s' added after the first binding",
                            b->name, name ? name : "");
  if (!sinfo)
    return base_status_make(RX_ERR_INVALID, "in '%s': parameter '%s' needs struct info", b->name,
                            name ? name : "");
  const char *s;
  RX_RETURN_IF_ERROR(check_name(b, name, &s));
  rx_var *v = ir_var_new(b->m, s, sinfo, noloc);
  add_var(b, v);
  b->nparams++;
  define_syms(b, sinfo);
  if (out_var) *out_var = v;
  return NULL;
}

rx_status rx_builder_fact(rx_builder *b, const rx_expr *fact) {
  if (!fact || !sym_expr_is_bool(fact))
    return base_status_make(RX_ERR_INVALID, "in '%s': a fact must be a condition", b->name);
  RX_VEC_PUSH(&b->facts, fact);
  if (!sym_analyzer_assume(b->an, fact)) {
    char *t = sym_expr_to_string(fact);
    rx_status st = base_status_make(RX_ERR_INVALID, "in '%s': fact '%s' contradicts earlier facts",
                                    b->name, t);
    free(t);
    return st;
  }
  return NULL;
}

void rx_builder_set_result(rx_builder *b, const rx_sinfo *sinfo) { b->ret = sinfo; }

static void close_block(rx_builder *b) {
  if (!b->cur.len && !b->cur_dataflow) return;
  rx_block *blk = ir_module_alloc(b->m, sizeof *blk);
  blk->dataflow = b->cur_dataflow;
  blk->nbindings = (int)b->cur.len;
  blk->bindings = base_arena_dup(&b->m->arena, b->cur.data, sizeof(rx_binding *) * b->cur.len);
  RX_VEC_PUSH(&b->blocks, blk);
  b->cur.len = 0;
  b->cur_dataflow = false;
}

rx_status rx_builder_begin_dataflow(rx_builder *b) {
  if (b->cur_dataflow)
    return base_status_make(RX_ERR_INVALID, "in '%s': dataflow blocks do not nest", b->name);
  close_block(b);
  b->cur_dataflow = true;
  return NULL;
}

rx_status rx_builder_end_dataflow(rx_builder *b) {
  if (!b->cur_dataflow)
    return base_status_make(RX_ERR_INVALID, "in '%s': no dataflow block is open", b->name);
  close_block(b);
  return NULL;
}

rx_node *rx_arg_var(rx_builder *b, rx_var *v) {
  rx_node *n = ir_node_var(b->m, v, noloc);
  n->sinfo = v ? v->sinfo : NULL;
  return n;
}
rx_node *rx_arg_shape(rx_builder *b, const rx_expr *const *dims, int n) {
  rx_node *s = ir_node_new(b->m, RX_NODE_SHAPE, noloc);
  n = n < 0 ? 0 : n;
  s->dims = base_arena_dup(&b->m->arena, dims, sizeof *dims * (size_t)n);
  s->ndims = n;
  s->sinfo = rx_sinfo_shape(b->m, n, dims);
  return s;
}
rx_node *rx_arg_int(rx_builder *b, int64_t v) {
  rx_node *n = ir_node_int(b->m, RX_DTYPE_I64, sym_expr_const(b->m->ctx, v), noloc);
  n->weak = true;
  n->sinfo = rx_sinfo_prim(b->m, RX_DTYPE_I64, n->prim);
  return n;
}
rx_node *rx_arg_float(rx_builder *b, double v) {
  rx_node *n = ir_node_float(b->m, RX_DTYPE_F32, v, noloc);
  n->weak = true;
  n->sinfo = rx_sinfo_prim(b->m, RX_DTYPE_F32, NULL);
  return n;
}
rx_node *rx_arg_prim(rx_builder *b, rx_dtype dtype, const rx_expr *value) {
  rx_node *n = ir_node_int(b->m, dtype, value, noloc);
  n->sinfo = rx_sinfo_prim(b->m, dtype, value);
  return n;
}

/* Arguments must be present, carry struct info, and use only this function's variables. */
rx_status ir_builder_check_args(rx_builder *b, const char *what, rx_node *const *args, int n) {
  if (n < 0 || (n > 0 && !args))
    return base_status_make(RX_ERR_INVALID, "in '%s': %s: bad argument array", b->name, what);
  for (int i = 0; i < n; i++) {
    const rx_node *a = args[i];
    if (!a || !a->sinfo)
      return base_status_make(RX_ERR_INVALID, "in '%s': %s: argument %d is missing", b->name, what,
                              i);
    if (a->kind == RX_NODE_VAR && (!a->var || !owns_var(b, a->var)))
      return base_status_make(RX_ERR_INVALID,
                              "in '%s': %s: argument %d ('%s') is not a variable of this function",
                              b->name, what, i, a->var ? a->var->name : "?");
  }
  return NULL;
}

/* Appends `name = value` with struct info sinfo. */
rx_var *ir_builder_bind(rx_builder *b, const char *name, rx_node *value, const rx_sinfo *sinfo,
                        const rx_sinfo *cast) {
  rx_var *v = ir_var_new(b->m, name, sinfo, noloc);
  rx_binding *bd = ir_module_alloc(b->m, sizeof *bd);
  bd->var = v;
  bd->value = value;
  bd->cast = cast;
  value->sinfo = value->sinfo ? value->sinfo : sinfo;
  RX_VEC_PUSH(&b->cur, bd);
  add_var(b, v);
  return v;
}

rx_status ir_builder_pick_name(rx_builder *b, const char *name, const char *hint,
                               const char **out) {
  if (name) return check_name(b, name, out);
  *out = fresh_name(b, hint);
  return NULL;
}

rx_node *ir_builder_call_node(rx_builder *b, rx_node_kind kind, rx_node *const *args, int nargs) {
  rx_node *n = ir_node_new(b->m, kind, noloc);
  n->args = base_arena_dup(&b->m->arena, args, sizeof *args * (size_t)nargs);
  n->nargs = nargs;
  return n;
}

/* out= must be a tensor or a tuple of tensors; returns how many. */
static int out_count(const rx_sinfo *out) {
  if (!out) return -1;
  if (out->kind == RX_SINFO_TENSOR) return 1;
  if (out->kind != RX_SINFO_TUPLE) return -1;
  for (int i = 0; i < out->nfields; i++)
    if (out->fields[i]->kind != RX_SINFO_TENSOR) return -1;
  return out->nfields;
}

/* Inputs, outputs and scalars of a destination-passing callee against the call. */
static rx_status check_dps(const char *callee, rx_param *const *params, int nparams, int nargs,
                           const rx_sinfo *out, int ndims, bool returning) {
  int ins = 0, outs = 0, scalars = 0;
  for (int i = 0; i < nparams; i++) {
    if (params[i]->kind == RX_PARAM_VALUE)
      ins++;
    else if (params[i]->kind == RX_PARAM_SCALAR)
      scalars++;
    else if (params[i]->is_output)
      outs++;
    else
      ins++;
  }
  if (nargs != ins)
    return base_status_make(RX_ERR_INVALID, "'%s' takes %d input%s, got %d", callee, ins,
                            ins == 1 ? "" : "s", nargs);
  if (returning)
    return out ? NULL : base_status_make(RX_ERR_INVALID, "call of '%s': no out=", callee);
  int got = out_count(out);
  if (got < 0)
    return base_status_make(
        RX_ERR_INVALID, "out= of a call of '%s' must be a tensor or a tuple of tensors", callee);
  if (got != outs)
    return base_status_make(RX_ERR_INVALID, "'%s' has %d output parameter%s but out= gives %d",
                            callee, outs, outs == 1 ? "" : "s", got);
  if (ndims >= 0 && ndims != scalars)
    return base_status_make(RX_ERR_INVALID, "'%s' has %d scalar parameter%s but dims= gives %d",
                            callee, scalars, scalars == 1 ? "" : "s", ndims);
  return NULL;
}

rx_status rx_emit_call_tensor(rx_builder *b, const char *prog, rx_node *const *args, int nargs,
                              const rx_sinfo *out, const rx_expr *const *dims, int ndims,
                              const char *name, rx_var **out_var) {
  if (out_var) *out_var = NULL;
  rx_tensor_fn *tfn = prog ? ir_module_tensor_fn(b->m, prog) : NULL;
  if (!tfn)
    return base_status_make(RX_ERR_NOT_FOUND, "call_tensor: no tensor program '%s' in the module",
                            prog ? prog : "");
  RX_RETURN_IF_ERROR(ir_builder_check_args(b, tfn->name, args, nargs));
  if (ndims < 0 || (ndims > 0 && !dims))
    return base_status_make(RX_ERR_INVALID, "call_tensor: bad dims array");
  RX_RETURN_IF_ERROR(check_dps(tfn->name, tfn->params, tfn->nparams, nargs, out, ndims, false));
  const char *vname;
  RX_RETURN_IF_ERROR(ir_builder_pick_name(b, name, tfn->name, &vname));
  rx_node *call = ir_builder_call_node(b, RX_NODE_CALL_TENSOR, args, nargs);
  call->callee = tfn->name;
  call->tfn = tfn;
  call->out = out;
  call->extra_dims = base_arena_dup(&b->m->arena, dims, sizeof *dims * (size_t)ndims);
  call->nextra = ndims;
  call->sinfo = out;
  rx_var *v = ir_builder_bind(b, vname, call, out, NULL);
  if (out_var) *out_var = v;
  return NULL;
}

rx_status rx_emit_call_tensor_inplace(rx_builder *b, const char *prog, rx_node *const *args,
                                      int nargs, rx_node *inplace, const rx_expr *const *dims,
                                      int ndims, const char *name, rx_var **out_var) {
  if (out_var) *out_var = NULL;
  if (b->cur_dataflow)
    return base_status_make(RX_ERR_INVALID,
                            "call_tensor(%s, ..., inplace=...) inside a dataflow block: it writes "
                            "its arguments in place",
                            prog ? prog : "");
  RX_RETURN_IF_ERROR(ir_builder_check_args(b, prog ? prog : "call_tensor", &inplace, 1));
  const rx_sinfo *out = inplace->sinfo;
  if (!out || out_count(out) < 0)
    return base_status_make(RX_ERR_INVALID,
                            "inplace= of a call of '%s' must be a tensor or a tuple of tensors",
                            prog ? prog : "");
  RX_RETURN_IF_ERROR(rx_emit_call_tensor(b, prog, args, nargs, out, dims, ndims, name, out_var));
  b->cur.data[b->cur.len - 1]->value->inplace = inplace;
  return NULL;
}

/* Binds `name = callee(args...)`, a call of kind with result out (name NULL: a fresh one after
 * the callee); *out_call is the call's node. */
static rx_status bind_call(rx_builder *b, rx_node_kind kind, const char *callee,
                           rx_node *const *args, int nargs, const rx_sinfo *out, const char *name,
                           rx_node **out_call, rx_var **out_var) {
  const char *vname;
  RX_RETURN_IF_ERROR(ir_builder_pick_name(b, name, callee, &vname));
  rx_node *call = ir_builder_call_node(b, kind, args, nargs);
  call->callee = callee;
  call->sinfo = out;
  rx_var *v = ir_builder_bind(b, vname, call, out, NULL);
  if (out_var) *out_var = v;
  *out_call = call;
  return NULL;
}

rx_status rx_emit_call_extern(rx_builder *b, const char *ext_name, rx_node *const *args, int nargs,
                              const rx_sinfo *out, const char *name, rx_var **out_var) {
  if (out_var) *out_var = NULL;
  rx_extern_fn *ext = ext_name ? ir_module_extern_fn(b->m, ext_name) : NULL;
  if (!ext)
    return base_status_make(RX_ERR_NOT_FOUND, "call_extern: no extern_fn '%s' in the module",
                            ext_name ? ext_name : "");
  RX_RETURN_IF_ERROR(ir_builder_check_args(b, ext->name, args, nargs));
  if (!out) out = ext->ret;
  RX_RETURN_IF_ERROR(
      check_dps(ext->name, ext->params, ext->nparams, nargs, out, -1, ext->ret != NULL));
  if (b->cur_dataflow && ext->impure)
    return base_status_make(RX_ERR_INVALID, "call of impure extern '%s' inside a dataflow block",
                            ext->name);
  rx_node *call;
  RX_RETURN_IF_ERROR(
      bind_call(b, RX_NODE_CALL_EXTERN, ext->name, args, nargs, out, name, &call, out_var));
  call->ext = ext;
  call->out = out;
  return NULL;
}

rx_status rx_emit_call_graph(rx_builder *b, const char *fn, rx_node *const *args, int nargs,
                             const rx_sinfo *out, const char *name, rx_var **out_var) {
  if (out_var) *out_var = NULL;
  rx_graph_fn *g = fn ? ir_module_graph_fn(b->m, fn) : NULL;
  if (!g)
    return base_status_make(RX_ERR_NOT_FOUND, "call: no graph_fn '%s' in the module", fn ? fn : "");
  RX_RETURN_IF_ERROR(ir_builder_check_args(b, g->name, args, nargs));
  if (nargs != g->nparams)
    return base_status_make(RX_ERR_INVALID, "%s expects %d arguments, got %d", g->name, g->nparams,
                            nargs);
  if (!out) out = g->ret;
  if (!out)
    return base_status_make(RX_ERR_INVALID, "call of %s: its result's struct info is needed",
                            g->name);
  rx_node *call;
  RX_RETURN_IF_ERROR(
      bind_call(b, RX_NODE_CALL_GRAPH, g->name, args, nargs, out, name, &call, out_var));
  call->gfn = g;
  return NULL;
}

rx_status rx_emit_match_cast(rx_builder *b, rx_node *value, const rx_sinfo *target,
                             const char *name, rx_var **out_var) {
  if (out_var) *out_var = NULL;
  RX_RETURN_IF_ERROR(ir_builder_check_args(b, "match_cast", &value, 1));
  if (!target)
    return base_status_make(RX_ERR_INVALID, "match_cast: a target struct info is required");
  const char *vname;
  RX_RETURN_IF_ERROR(ir_builder_pick_name(b, name, "cast", &vname));
  define_syms(b, target);
  rx_var *v = ir_builder_bind(b, vname, value, target, target);
  if (out_var) *out_var = v;
  return NULL;
}

rx_status rx_emit_tuple(rx_builder *b, rx_node *const *fields, int n, const char *name,
                        rx_var **out_var) {
  if (out_var) *out_var = NULL;
  RX_RETURN_IF_ERROR(ir_builder_check_args(b, "tuple", fields, n));
  const char *vname;
  RX_RETURN_IF_ERROR(ir_builder_pick_name(b, name, "tuple", &vname));
  rx_node *t = ir_builder_call_node(b, RX_NODE_TUPLE, fields, n);
  const rx_sinfo **fs = ir_module_alloc(b->m, sizeof *fs * (size_t)(n ? n : 1));
  for (int i = 0; i < n; i++) fs[i] = fields[i]->sinfo;
  t->sinfo = rx_sinfo_tuple(b->m, fs, n);
  rx_var *v = ir_builder_bind(b, vname, t, t->sinfo, NULL);
  if (out_var) *out_var = v;
  return NULL;
}

rx_status rx_emit_get_item(rx_builder *b, rx_node *tuple, int index, const char *name,
                           rx_var **out_var) {
  if (out_var) *out_var = NULL;
  RX_RETURN_IF_ERROR(ir_builder_check_args(b, "tuple item", &tuple, 1));
  const rx_sinfo *s = tuple->sinfo;
  if (s->kind != RX_SINFO_TUPLE) {
    char *t = rx_sinfo_to_string(s);
    rx_status st = base_status_make(RX_ERR_INVALID, "'.%d' needs a tuple, got %s", index, t);
    free(t);
    return st;
  }
  if (index < 0 || index >= s->nfields)
    return base_status_make(RX_ERR_INVALID, "tuple index %d out of range (the tuple has %d fields)",
                            index, s->nfields);
  const char *vname;
  RX_RETURN_IF_ERROR(ir_builder_pick_name(b, name, "item", &vname));
  rx_node *g = ir_builder_call_node(b, RX_NODE_GET_ITEM, &tuple, 1);
  g->index = index;
  g->sinfo = s->fields[index];
  rx_var *v = ir_builder_bind(b, vname, g, g->sinfo, NULL);
  if (out_var) *out_var = v;
  return NULL;
}

rx_status rx_builder_finish(rx_builder *b, rx_node *result, rx_graph_fn **out_fn) {
  if (out_fn) *out_fn = NULL;
  rx_status st = NULL;
  if (b->cur_dataflow)
    st = base_status_make(RX_ERR_INVALID, "in '%s': a dataflow block is still open", b->name);
  else if (!result)
    st = base_status_make(RX_ERR_INVALID, "in '%s': a result is required", b->name);
  else if (!*b->name)
    st = base_status_make(RX_ERR_INVALID, "a graph function needs a name");
  else if (ir_module_graph_fn(b->m, b->name) || ir_module_tensor_fn(b->m, b->name) ||
           ir_module_extern_fn(b->m, b->name))
    st = base_status_make(RX_ERR_INVALID, "'%s' is already defined in the module", b->name);
  else
    st = ir_builder_check_args(b, "result", &result, 1);
  if (st) {
    rx_builder_free(b);
    return st;
  }
  close_block(b);
  rx_module *m = b->m;
  rx_graph_fn *fn = ir_module_alloc(m, sizeof *fn);
  fn->name = b->name;
  fn->params = base_arena_dup(&m->arena, b->vars.data, sizeof(rx_var *) * (size_t)b->nparams);
  fn->nparams = b->nparams;
  fn->ret = b->ret;
  fn->nfacts = (int)b->facts.len;
  fn->facts = base_arena_dup(&m->arena, b->facts.data, sizeof(rx_expr *) * b->facts.len);
  fn->fact_locs = ir_module_alloc(m, sizeof(rx_loc) * (b->facts.len + 1));
  fn->body.nblocks = (int)b->blocks.len;
  fn->body.blocks = base_arena_dup(&m->arena, b->blocks.data, sizeof(rx_block *) * b->blocks.len);
  fn->body.result = result;
  rx_item it = {RX_ITEM_GRAPH, fn};
  RX_VEC_PUSH(&m->items, it);
  rx_builder_free(b);
  if (out_fn) *out_fn = fn;
  return NULL;
}

const char *rx_var_name(const rx_var *v) { return v ? v->name : ""; }
const rx_sinfo *rx_var_sinfo(const rx_var *v) { return v ? v->sinfo : NULL; }

/* ---- tensor-program builder ---- */

/* An open scope: the statement that owns it (NULL: the function body) and its statements. */
typedef struct tframe {
  rx_stmt *owner;
  bool in_else; /* IF: collecting the else branch */
  RX_VEC(rx_stmt *) body;
} tframe;

struct rx_tfn_builder {
  rx_module *m;
  const char *name;
  RX_VEC(rx_param *) params;
  RX_VEC(const rx_expr *) facts;
  RX_VEC(tframe) frames; /* frames.data[0]: the body */
  rx_status err;         /* first error (sticky) */
};

static void tfail(rx_tfn_builder *tb, const char *fmt, ...) RX_PRINTF(2, 3);
static void tfail(rx_tfn_builder *tb, const char *fmt, ...) {
  if (tb->err) return;
  va_list ap;
  va_start(ap, fmt);
  tb->err = base_status_vmake(RX_ERR_INVALID, fmt, ap);
  va_end(ap);
  tb->err = base_status_annotate(tb->err, "in tensor program '%s'", tb->name);
}

rx_tfn_builder *rx_tfn_builder_new(rx_module *m, const char *name) {
  rx_tfn_builder *tb = base_calloc(1, sizeof *tb);
  tb->m = m;
  tb->name = ir_module_intern(m, name ? name : "", name ? strlen(name) : 0);
  tframe f = {0};
  RX_VEC_PUSH(&tb->frames, f);
  return tb;
}

void rx_tfn_builder_free(rx_tfn_builder *tb) {
  if (!tb) return;
  for (size_t i = 0; i < tb->frames.len; i++) free(tb->frames.data[i].body.data);
  free(tb->frames.data);
  free(tb->params.data);
  free(tb->facts.data);
  rx_status_free(tb->err);
  free(tb);
}

static rx_buffer *buffer_new(rx_tfn_builder *tb, const char *name, rx_dtype dtype, int ndim,
                             const rx_expr *const *shape) {
  if (ndim < 0 || (ndim > 0 && !shape)) {
    tfail(tb, "buffer '%s' needs ndim >= 0 and a shape", name ? name : "");
    ndim = 0;
  }
  for (int i = 0; i < ndim; i++)
    if (!shape[i]) {
      tfail(tb, "dimension %d of buffer '%s' is missing", i, name ? name : "");
      ndim = 0;
    }
  rx_buffer *buf = ir_module_alloc(tb->m, sizeof *buf);
  buf->name = ir_module_intern(tb->m, name ? name : "", name ? strlen(name) : 0);
  buf->dtype = dtype;
  buf->ndim = ndim;
  buf->shape = base_arena_dup(&tb->m->arena, shape, sizeof *shape * (size_t)ndim);
  return buf;
}

rx_buffer *rx_tfn_buffer(rx_tfn_builder *tb, const char *name, rx_dtype dtype, int ndim,
                         const rx_expr *const *shape, bool is_output) {
  rx_param *p = ir_module_alloc(tb->m, sizeof *p);
  p->kind = RX_PARAM_BUFFER;
  p->is_output = is_output;
  p->buf = buffer_new(tb, name, dtype, ndim, shape);
  RX_VEC_PUSH(&tb->params, p);
  return p->buf;
}

const rx_expr *rx_tfn_scalar(rx_tfn_builder *tb, const char *name, rx_dtype dtype) {
  rx_param *p = ir_module_alloc(tb->m, sizeof *p);
  p->kind = RX_PARAM_SCALAR;
  p->dtype = dtype;
  p->var = sym_expr_var(tb->m->ctx, name ? name : "_");
  RX_VEC_PUSH(&tb->params, p);
  return p->var;
}

void rx_tfn_fact(rx_tfn_builder *tb, const rx_expr *fact) {
  if (!fact || !sym_expr_is_bool(fact)) {
    tfail(tb, "a fact must be a condition");
    return;
  }
  RX_VEC_PUSH(&tb->facts, fact);
}

static void append(rx_tfn_builder *tb, rx_stmt *s) {
  RX_VEC_PUSH(&tb->frames.data[tb->frames.len - 1].body, s);
}

static void push_frame(rx_tfn_builder *tb, rx_stmt *owner) {
  tframe f = {0};
  f.owner = owner;
  RX_VEC_PUSH(&tb->frames, f);
}

/* The statements of the innermost frame as a SEQ (the frame's list is emptied). */
static rx_stmt *take_seq(rx_tfn_builder *tb) {
  tframe *f = &tb->frames.data[tb->frames.len - 1];
  rx_stmt *s = ir_stmt_new(tb->m, RX_STMT_SEQ, noloc);
  s->n = (int)f->body.len;
  s->body = base_arena_dup(&tb->m->arena, f->body.data, sizeof(rx_stmt *) * f->body.len);
  f->body.len = 0;
  return s;
}

const rx_expr *rx_tfn_for(rx_tfn_builder *tb, const char *var, const rx_expr *lo,
                          const rx_expr *extent, const char *kind) {
  rx_loop_kind k = RX_LOOP_SERIAL;
  if (kind) {
    int i = 0;
    while (i < RX_LOOP_KIND_COUNT && strcmp(ir_loop_kind_name((rx_loop_kind)i), kind) != 0) i++;
    if (i == RX_LOOP_KIND_COUNT)
      tfail(tb,
            "unknown loop kind '%s' (expected serial, unroll, vectorize, blockIdx.x/y/z or "
            "threadIdx.x/y/z)",
            kind);
    else
      k = (rx_loop_kind)i;
  }
  if (!lo || !extent) tfail(tb, "loop '%s' needs bounds", var ? var : "");
  rx_module *m = tb->m;
  rx_stmt *s = ir_stmt_new(m, RX_STMT_FOR, noloc);
  const rx_expr *x = sym_expr_var(m->ctx, var ? var : "_");
  const rx_expr *zero = sym_expr_const(m->ctx, 0);
  s->vars = base_arena_dup(&m->arena, &x, sizeof x);
  s->lo = base_arena_dup(&m->arena, lo ? &lo : &zero, sizeof lo);
  s->extent = base_arena_dup(&m->arena, extent ? &extent : &zero, sizeof extent);
  s->nvars = 1;
  s->loop_kind = k;
  append(tb, s);
  push_frame(tb, s);
  return x;
}

void rx_tfn_if(rx_tfn_builder *tb, rx_tx *cond) {
  if (!cond) tfail(tb, "if needs a condition");
  rx_stmt *s = ir_stmt_new(tb->m, RX_STMT_IF, noloc);
  s->value = cond ? cond : ir_tx_sym(tb->m, sym_expr_const(tb->m->ctx, 1), noloc);
  append(tb, s);
  push_frame(tb, s);
}

void rx_tfn_else(rx_tfn_builder *tb) {
  tframe *f = &tb->frames.data[tb->frames.len - 1];
  if (!f->owner || f->owner->kind != RX_STMT_IF || f->in_else) {
    tfail(tb, "else without an open if");
    return;
  }
  f->owner->inner = take_seq(tb);
  f->in_else = true;
}

void rx_tfn_end(rx_tfn_builder *tb) {
  if (tb->frames.len <= 1) {
    tfail(tb, "end without an open for or if");
    return;
  }
  tframe *f = &tb->frames.data[tb->frames.len - 1];
  rx_stmt *seq = take_seq(tb);
  if (f->owner->kind == RX_STMT_IF && f->in_else)
    f->owner->otherwise = seq;
  else
    f->owner->inner = seq;
  free(f->body.data);
  tb->frames.len--;
}

static bool tx_ok(rx_tfn_builder *tb, rx_tx *const *xs, int n, const char *what) {
  if (n < 0 || (n > 0 && !xs)) {
    tfail(tb, "%s: bad operand array", what);
    return false;
  }
  for (int i = 0; i < n; i++)
    if (!xs[i]) {
      tfail(tb, "%s: operand %d is missing", what, i);
      return false;
    }
  return true;
}

void rx_tfn_store(rx_tfn_builder *tb, rx_buffer *buf, rx_tx *const *idx, int n, rx_tx *value) {
  if (!buf || !value || !tx_ok(tb, idx, n, "store")) {
    tfail(tb, "store needs a buffer, indices and a value");
    return;
  }
  rx_stmt *s = ir_stmt_new(tb->m, RX_STMT_STORE, noloc);
  s->buf = buf;
  s->idx = base_arena_dup(&tb->m->arena, idx, sizeof *idx * (size_t)n);
  s->nidx = n;
  s->value = value;
  append(tb, s);
}

rx_buffer *rx_tfn_alloc(rx_tfn_builder *tb, const char *name, rx_dtype dtype, int ndim,
                        const rx_expr *const *shape, const char *scope) {
  rx_buffer *buf = buffer_new(tb, name, dtype, ndim, shape);
  buf->scope = RX_SCOPE_GLOBAL;
  if (scope && strcmp(scope, "shared") == 0)
    buf->scope = RX_SCOPE_SHARED;
  else if (scope && strcmp(scope, "local") == 0)
    buf->scope = RX_SCOPE_LOCAL;
  else if (scope && strcmp(scope, "global") != 0)
    tfail(tb, "unknown memory scope '%s' (expected global, shared or local)", scope);
  rx_stmt *s = ir_stmt_new(tb->m, RX_STMT_ALLOC, noloc);
  s->buf = buf;
  append(tb, s);
  return buf;
}

rx_tx *rx_tfn_let(rx_tfn_builder *tb, const char *name, rx_dtype dtype, rx_tx *value) {
  rx_local *l = ir_module_alloc(tb->m, sizeof *l);
  l->name = ir_module_intern(tb->m, name ? name : "", name ? strlen(name) : 0);
  l->dtype = dtype;
  if (!value) tfail(tb, "let '%s' needs a value", l->name);
  rx_stmt *s = ir_stmt_new(tb->m, RX_STMT_LET, noloc);
  s->local = l;
  s->value = value ? value : ir_tx_int(tb->m, 0, dtype, true, noloc);
  append(tb, s);
  return ir_tx_local(tb->m, l, noloc);
}

void rx_tfn_barrier(rx_tfn_builder *tb) { append(tb, ir_stmt_new(tb->m, RX_STMT_BARRIER, noloc)); }

rx_tx *rx_tfn_sym(rx_tfn_builder *tb, const rx_expr *e) {
  if (!e) {
    tfail(tb, "missing symbolic expression");
    e = sym_expr_const(tb->m->ctx, 0);
  }
  return ir_tx_sym(tb->m, e, noloc);
}
rx_tx *rx_tfn_int(rx_tfn_builder *tb, int64_t v) {
  return ir_tx_int(tb->m, v, RX_DTYPE_I64, true, noloc);
}
rx_tx *rx_tfn_float(rx_tfn_builder *tb, double v) {
  return ir_tx_float(tb->m, v, RX_DTYPE_F32, true, noloc);
}

/* Stand-in operand after an error, so construction can continue. */
static rx_tx *dummy(rx_tfn_builder *tb) { return ir_tx_int(tb->m, 0, RX_DTYPE_I64, true, noloc); }

rx_tx *rx_tfn_load(rx_tfn_builder *tb, rx_buffer *buf, rx_tx *const *idx, int n) {
  if (!buf || !tx_ok(tb, idx, n, "load")) {
    tfail(tb, "load needs a buffer and indices");
    return dummy(tb);
  }
  return ir_tx_load(tb->m, buf, (rx_tx **)idx, n, noloc);
}

rx_tx *rx_tfn_binary(rx_tfn_builder *tb, const char *op, rx_tx *a, rx_tx *b) {
  rx_tx *ab[2] = {a, b};
  int i = 0;
  while (op && i < RX_BINOP_COUNT && strcmp(ir_binop_name((rx_binop)i), op) != 0) i++;
  if (!op || i == RX_BINOP_COUNT) {
    tfail(tb, "unknown operator '%s'", op ? op : "");
    return dummy(tb);
  }
  if (!tx_ok(tb, ab, 2, op)) return dummy(tb);
  return ir_tx_binary(tb->m, (rx_binop)i, a, b, noloc);
}

rx_tx *rx_tfn_select(rx_tfn_builder *tb, rx_tx *cond, rx_tx *a, rx_tx *b) {
  rx_tx *xs[3] = {cond, a, b};
  if (!tx_ok(tb, xs, 3, "select")) return dummy(tb);
  return ir_tx_select(tb->m, cond, a, b, noloc);
}

rx_tx *rx_tfn_cast(rx_tfn_builder *tb, rx_dtype to, rx_tx *a) {
  if (!tx_ok(tb, &a, 1, "cast")) return dummy(tb);
  return ir_tx_cast(tb->m, to, a, noloc);
}

rx_tx *rx_tfn_call(rx_tfn_builder *tb, const char *intrinsic, rx_tx *const *args, int n) {
  rx_intrinsic f;
  if (!intrinsic || !ir_intrinsic_lookup(intrinsic, strlen(intrinsic), &f)) {
    tfail(tb, "unknown intrinsic '%s'", intrinsic ? intrinsic : "");
    return dummy(tb);
  }
  if (!tx_ok(tb, args, n, intrinsic)) return dummy(tb);
  if (n != ir_intrinsic_arity(f)) {
    tfail(tb, "'%s' takes %d argument(s), got %d", intrinsic, ir_intrinsic_arity(f), n);
    return dummy(tb);
  }
  return ir_tx_call(tb->m, f, (rx_tx **)args, n, noloc);
}

rx_status rx_tfn_finish(rx_tfn_builder *tb, rx_tensor_fn **out_fn) {
  if (out_fn) *out_fn = NULL;
  rx_module *m = tb->m;
  if (!tb->err && tb->frames.len != 1)
    tfail(tb, "%d for/if scope(s) not closed with rx_tfn_end", (int)tb->frames.len - 1);
  if (!tb->err && !*tb->name) tfail(tb, "a tensor program needs a name");
  if (!tb->err && (ir_module_graph_fn(m, tb->name) || ir_module_tensor_fn(m, tb->name) ||
                   ir_module_extern_fn(m, tb->name)))
    tfail(tb, "'%s' is already defined in the module", tb->name);
  if (tb->err) {
    rx_status st = tb->err;
    tb->err = NULL;
    rx_tfn_builder_free(tb);
    return st;
  }
  rx_tensor_fn *fn = ir_module_alloc(m, sizeof *fn);
  fn->name = tb->name;
  fn->nparams = (int)tb->params.len;
  fn->params = base_arena_dup(&m->arena, tb->params.data, sizeof(rx_param *) * tb->params.len);
  fn->nfacts = (int)tb->facts.len;
  fn->facts = base_arena_dup(&m->arena, tb->facts.data, sizeof(rx_expr *) * tb->facts.len);
  fn->fact_locs = ir_module_alloc(m, sizeof(rx_loc) * (tb->facts.len + 1));
  fn->body = take_seq(tb);
  rx_item it = {RX_ITEM_TENSOR, fn};
  RX_VEC_PUSH(&m->items, it);
  rx_tfn_builder_free(tb);
  if (out_fn) *out_fn = fn;
  return NULL;
}
