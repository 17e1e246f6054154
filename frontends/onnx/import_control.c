/* frontends/onnx/import_control.c: the ONNX importer's control flow (onnx-mlir's ControlFlow):
 * If, Loop and Scan, each subgraph a graph function and each loop a tail-recursive driver. */
#include "import_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- control flow: If, Loop, Scan ----
 * A subgraph becomes a graph function of its own (its body: the subgraph's inputs, then the
 * outer tensors it reads, as parameters; the tuple of its outputs as result). A small driver
 * function, written as text and parsed into the module, holds the graph-level `if` and, for
 * Loop and Scan, the recursion: under `if k < trip count` it calls the body for step k and then
 * itself for k + 1 as its last act, so the trip count stays symbolic (a loop is a recursive
 * graph function, as in Relax) and the recursion is a tail call: the host program's
 * TAIL_CALL_FN runs the next step in the place of this one, so a loop of any length runs in
 * constant frames and each step's values are released before the next. Scan outputs are
 * accumulators passed along: a [steps, dims..] tensor per output whose row k step k writes in
 * place (one small tensor program for all of them, `<driver>w`; Scan's inputs are read likewise
 * by `<driver>r`), so building them is linear in the steps: Scan's allocated at its length,
 * Loop's (whose length the condition may cut) grown by doubling from min(M, 16) rows and cut to
 * the steps run at the end. A driver writes in place, so it is called between dataflow blocks.
 * `main` calls the driver once. */

#define CF_MAXCAP 32 /* outer values one subgraph may read */

#define CF_MAXIO 16 /* inputs and outputs of one control-flow node */

static bool name_in(const char *const *names, int n, const char *s) {
  for (int i = 0; i < n; i++)
    if (!strcmp(names[i], s)) return true;
  return false;
}

/* Adds the names that g's nodes (and their subgraphs) read but g does not define; -1 when
 * there are more than max. */
static int captures(const Onnx__GraphProto *g, const char **out, int nout, int max) {
  const char *def_[512];
  int nd = 0;
  /* the weights of a subgraph are parameters of main (onnx_each_weight): read from outside */
  for (size_t i = 0; i < g->n_input && nd < 512; i++) def_[nd++] = g->input[i]->name;
  for (size_t i = 0; i < g->n_initializer && nd < 512; i++)
    if (!onnx_is_weight(g->initializer[i], false)) def_[nd++] = g->initializer[i]->name;
  for (size_t i = 0; i < g->n_node; i++) {
    const Onnx__NodeProto *nn = g->node[i];
    const Onnx__TensorProto *t;
    if (nn->op_type && !strcmp(nn->op_type, "Constant") && (t = onnx_const_tensor(nn)) &&
        onnx_is_weight(t, true))
      continue;
    for (size_t k = 0; k < nn->n_output && nd < 512; k++)
      if (nn->output[k]) def_[nd++] = nn->output[k];
  }
  if (nd >= 512) return -1;
  for (size_t i = 0; i < g->n_node; i++) {
    const Onnx__NodeProto *nn = g->node[i];
    const char *used[CF_MAXCAP];
    int nu = 0;
    for (size_t k = 0; k < nn->n_input && nu >= 0; k++)
      if (onnx_input(nn, k) && nu < CF_MAXCAP) used[nu++] = onnx_input(nn, k);
    for (size_t a = 0; a < nn->n_attribute && nu >= 0; a++)
      if (nn->attribute[a]->g) nu = captures(nn->attribute[a]->g, used, nu, CF_MAXCAP);
    if (nu < 0) return -1;
    for (int k = 0; k < nu; k++) {
      if (name_in(def_, nd, used[k]) || name_in(out, nout, used[k])) continue;
      if (nout == max) return -1;
      out[nout++] = used[k];
    }
  }
  for (size_t i = 0; i < g->n_output; i++)
    if (!name_in(def_, nd, g->output[i]->name) && !name_in(out, nout, g->output[i]->name)) {
      if (nout == max) return -1;
      out[nout++] = g->output[i]->name;
    }
  return nout;
}

/* A subgraph's body function: see import_body. */
typedef struct body {
  const char *fname;
  const rx_sinfo *const *in; /* the sinfo of each of g's inputs */
  const rx_expr *iter;       /* Loop: input 0 is the iteration number, Shape([iter]) */
  int ncaps;                 /* the captured outer tensors, passed after the inputs */
  rx_var *capv[CF_MAXCAP];   /* their variables in the calling function */
  const rx_sinfo *ret;       /* the result: the tuple of g's outputs */
  rx_var *tup;               /* body_fill: the tuple's variable in the body */
} body;

static rx_status body_nodes(imp *I, const Onnx__NodeProto *n, const Onnx__GraphProto *g, body *bd,
                            const char *const *caps, int nc, rx_var *const *outer,
                            rx_ptrvec *pvars);

/* The variables in the dims of si (a tensor or shape, or a tuple of them), added to vars. */
static void sinfo_vars(const rx_sinfo *si, rx_ptrvec *vars) {
  if (si->kind == RX_SINFO_TUPLE)
    for (int i = 0; i < si->nfields; i++) sinfo_vars(si->fields[i], vars);
  if ((si->kind == RX_SINFO_TENSOR || si->kind == RX_SINFO_SHAPE) && si->shape)
    for (int d = 0; d < si->ndim; d++) sym_expr_collect_vars(si->shape[d], vars);
}

/* The body function's result ret with each field whose dims use a variable that no parameter
 * (params: their variables) defines, one bound inside the body (an If branch's
 * NonMaxSuppression count), as its rank only: the caller cannot name it. */
static const rx_sinfo *result_defined(imp *I, const rx_sinfo *ret, rx_ptrvec *params) {
  const rx_sinfo *f[CF_MAXIO];
  bool changed = false;
  for (int i = 0; i < ret->nfields && i < CF_MAXIO; i++) {
    rx_ptrvec used = {0};
    f[i] = ret->fields[i];
    sinfo_vars(f[i], &used);
    bool known = true;
    for (size_t k = 0; k < used.len && known; k++) {
      known = false;
      for (size_t j = 0; j < params->len && !known; j++) known = params->data[j] == used.data[k];
    }
    base_ptrvec_free(&used);
    if (!known && f[i]->kind == RX_SINFO_TENSOR) {
      f[i] = rx_sinfo_tensor(I->m, f[i]->dtype, f[i]->ndim, NULL);
      changed = true;
    }
  }
  return changed ? rx_sinfo_tuple(I->m, f, ret->nfields) : ret;
}

static rx_status body_fill(imp *I, const Onnx__NodeProto *n, const Onnx__GraphProto *g, body *bd,
                           const char *const *caps, int nc, rx_var *const *outer) {
  rx_ptrvec pvars = {0};
  rx_status st = body_nodes(I, n, g, bd, caps, nc, outer, &pvars);
  if (!st) {
    bd->ret = result_defined(I, bd->ret, &pvars);
    rx_builder_set_result(I->b, bd->ret);
    rx_builder *b = I->b;
    I->b = NULL;
    st = onnx_at_node(I, n, rx_builder_finish(b, rx_arg_var(b, bd->tup), NULL));
  }
  base_ptrvec_free(&pvars);
  return st;
}

/* body_fill's parameters (their dims' variables added to pvars) and nodes, to the tuple of
 * outputs bd->tup (struct info bd->ret) */
static rx_status body_nodes(imp *I, const Onnx__NodeProto *n, const Onnx__GraphProto *g, body *bd,
                            const char *const *caps, int nc, rx_var *const *outer,
                            rx_ptrvec *pvars) {
  for (size_t i = 0; i < g->n_input; i++) {
    const char *nm = g->input[i]->name;
    char *id = onnx_ident(nm);
    const rx_sinfo *si = bd->iter && i == 0 ? rx_sinfo_shape(I->m, 1, &bd->iter) : bd->in[i];
    rx_var *pv;
    rx_status s = rx_builder_param(I->b, id, si, &pv);
    free(id);
    RX_RETURN_IF_ERROR(onnx_at_node(I, n, s));
    sinfo_vars(si, pvars);
    if (bd->iter && i == 0) {
      val *v = onnx_def(I, nm);
      v->kind = V_SYM;
      v->slen = 1;
      v->s[0] = bd->iter;
    } else {
      onnx_def_named(I, nm, pv);
    }
  }
  for (int k = 0; k < nc; k++) {
    if (outer[k]) {
      rx_var *pv;
      char nm[32];
      snprintf(nm, sizeof nm, "outer%d", k);
      RX_RETURN_IF_ERROR(
          onnx_at_node(I, n, rx_builder_param(I->b, nm, rx_var_sinfo(outer[k]), &pv)));
      sinfo_vars(rx_var_sinfo(pv), pvars);
      onnx_def_named(I, caps[k], pv);
      bd->capv[bd->ncaps++] = outer[k];
    }
  }
  for (size_t i = 0; i < g->n_initializer; i++) /* weights: captured parameters */
    if (!onnx_is_weight(g->initializer[i], false))
      RX_RETURN_IF_ERROR(onnx_def_constant(I, n, g->initializer[i]->name, g->initializer[i]));
  RX_RETURN_IF_ERROR(rx_builder_begin_dataflow(I->b));
  for (size_t i = 0; i < g->n_node; i++) RX_RETURN_IF_ERROR(onnx_do_node(I, g->node[i]));
  if (g->n_output == 0 || g->n_output > CF_MAXIO)
    return onnx_node_err(I, n, "a subgraph needs 1 to %d outputs", CF_MAXIO);
  rx_node *outs[CF_MAXIO];
  for (size_t i = 0; i < g->n_output; i++) {
    rx_var *t;
    RX_RETURN_IF_ERROR(onnx_out_tensor(I, n, g->output[i]->name, &t));
    outs[i] = rx_arg_var(I->b, t);
  }
  rx_var *tup;
  RX_RETURN_IF_ERROR(onnx_at_node(I, n, rx_emit_tuple(I->b, outs, (int)g->n_output, NULL, &tup)));
  RX_RETURN_IF_ERROR(rx_builder_end_dataflow(I->b));
  bd->ret = rx_var_sinfo(tup);
  bd->tup = tup;
  return NULL;
}

/* Imports subgraph g as graph function bd->fname in a scope of its own: the values it defines
 * are forgotten after; the outer tensors it reads become parameters (bd->capv). */
static rx_status import_body(imp *I, const Onnx__NodeProto *n, const Onnx__GraphProto *g,
                             body *bd) {
  const char *caps[CF_MAXCAP];
  int nc = captures(g, caps, 0, CF_MAXCAP);
  if (nc < 0) return onnx_node_err(I, n, "a subgraph reads over %d outer values", CF_MAXCAP);
  rx_var *outer[CF_MAXCAP];
  for (int k = 0; k < nc; k++) {
    val *v = onnx_get(I, caps[k]);
    if (!v || v->kind == V_FAILED)
      return onnx_node_err(I, n, "the subgraph reads '%s', which is not defined", caps[k]);
    outer[k] = v->kind == V_TENSOR ? v->var : NULL;
  }
  int mark = I->nvals;
  for (int k = 0; k < nc; k++) /* shape values and constants are seen as they are */
    if (!outer[k]) {
      val copy = *onnx_get(I, caps[k]);
      copy.tvar = NULL; /* its tensor belongs to the outer function */
      *onnx_def(I, caps[k]) = copy;
    }
  rx_builder *ob = I->b;
  I->b = rx_builder_new(I->m, bd->fname);
  bd->ncaps = 0;
  rx_status s = body_fill(I, n, g, bd, caps, nc, outer);
  if (I->b) rx_builder_free(I->b);
  I->b = ob;
  I->nvals = mark;
  return s;
}

/* A free function name: prefix and a number not given before in this import (I->ncf) nor used;
 * suffixes b, e and t are free too. */
static void cf_name(imp *I, const char *prefix, char *out, size_t size) {
  for (int k = I->ncf++;; k = I->ncf++) {
    char t[64], e[64], b2[64];
    snprintf(out, size, "%s%d", prefix, k);
    snprintf(t, sizeof t, "%sb", out);
    snprintf(e, sizeof e, "%se", out);
    snprintf(b2, sizeof b2, "%st", out);
    if (!ir_module_graph_fn(I->m, out) && !ir_module_graph_fn(I->m, t) &&
        !ir_module_graph_fn(I->m, e) && !ir_module_graph_fn(I->m, b2))
      return;
  }
}

static void put_sinfo(rx_strbuf *sb, const rx_sinfo *si) {
  char *s = rx_sinfo_to_string(si);
  base_strbuf_printf(sb, "%s", s);
  rx_free(s);
}

static void put_expr(rx_strbuf *sb, const rx_expr *e) {
  char *s = rx_sym_to_string(e);
  base_strbuf_printf(sb, "%s", s);
  rx_free(s);
}

/* the driver's parameters for the outer tensors a body reads: ", PFX0: SINFO, ..." */
static void put_caps(rx_strbuf *sb, const char *pfx, const body *bd) {
  for (int k = 0; k < bd->ncaps; k++) {
    base_strbuf_printf(sb, ", %s%d: ", pfx, k);
    put_sinfo(sb, rx_var_sinfo(bd->capv[k]));
  }
}

/* the dims of si from dim `from` on, comma-separated (each after ", " when lead) */
static void put_dims(rx_strbuf *sb, const rx_sinfo *si, int from, bool lead) {
  for (int d = from; d < si->ndim; d++) {
    if (lead || d > from) base_strbuf_printf(sb, ", ");
    put_expr(sb, si->shape[d]);
  }
}

static bool known_tensor(const rx_sinfo *si) {
  return si && si->kind == RX_SINFO_TENSOR && si->shape && si->ndim >= 0;
}

/* Parses the driver's text; a failure is a bug of this file, reported at the node. */
static rx_status parse_driver(imp *I, const Onnx__NodeProto *n, rx_strbuf *sb) {
  char *text = base_strbuf_take(sb);
  rx_status s = rx_module_parse(I->m, "<onnx control flow>", text, strlen(text), NULL);
  free(text);
  return onnx_at_node(I, n, s);
}

/* The driver's condition prelude: its tensor parameter c (of struct info si) as the symbol sym (0
 * or 1), read back from the device. */
static void put_cond(rx_strbuf *sb, const char *c, const rx_sinfo *si, const char *sym) {
  bool scalar = si->ndim == 0; /* read as it is; else made [1] first (a copy: a launch) */
  base_strbuf_printf(sb, "  cb = cast(%s, dtype=i64)\n%s  cs = tensor_to_shape(%s)\n", c,
                     scalar ? "" : "  cr = reshape(cb, [1])\n", scalar ? "cb" : "cr");
  base_strbuf_printf(sb, "  cm = match_cast(cs, Shape([%s]))\n", sym);
}

/* Calls driver fname from main with args; defines n's outputs from the tuple result (those of
 * rank-only struct info matched to fresh dims). inplace: the driver writes in place. */
static rx_status call_driver(imp *I, const Onnx__NodeProto *n, const char *fname,
                             rx_node *const *args, int nargs, const rx_sinfo *ret, bool inplace) {
  rx_var *tup;
  /* a driver whose scan outputs are written in place is impure to the verifier (the buffers are
   * its own): called between dataflow blocks */
  if (inplace) RX_RETURN_IF_ERROR(onnx_at_node(I, n, rx_builder_end_dataflow(I->b)));
  RX_RETURN_IF_ERROR(
      onnx_at_node(I, n, rx_emit_call_graph(I->b, fname, args, nargs, ret, NULL, &tup)));
  if (inplace) RX_RETURN_IF_ERROR(onnx_at_node(I, n, rx_builder_begin_dataflow(I->b)));
  for (size_t i = 0; i < n->n_output && (int)i < ret->nfields; i++) {
    if (!n->output[i] || !n->output[i][0]) continue;
    rx_var *v;
    RX_RETURN_IF_ERROR(
        onnx_at_node(I, n, rx_emit_get_item(I->b, rx_arg_var(I->b, tup), (int)i, NULL, &v)));
    const rx_sinfo *si = ret->fields[i];
    if (si->kind == RX_SINFO_TENSOR && !si->shape && si->ndim >= 0) {
      const rx_expr *dims[SYM_MAX];
      if (si->ndim > SYM_MAX) return onnx_node_err(I, n, "output %zu: rank over %d", i, SYM_MAX);
      for (int d = 0; d < si->ndim; d++) dims[d] = onnx_fresh_dim(I);
      if (!onnx_match_cast_to(I, v, si->dtype, si->ndim, dims, &v))
        return onnx_node_err(I, n, "output %zu: cannot bind its shape", i);
    }
    onnx_def_named(I, n->output[i], v);
  }
  return NULL;
}

static const Onnx__GraphProto *graph_attr(const Onnx__NodeProto *n, const char *name) {
  const Onnx__AttributeProto *a = onnx_attr(n, name);
  return a ? a->g : NULL;
}

/* the struct info of both branches' output: the same, or a tensor of the same dtype and rank
 * with its dims bound when the program runs; NULL when they differ more */
static const rx_sinfo *join_branches(imp *I, const rx_sinfo *a, const rx_sinfo *b) {
  char *sa = rx_sinfo_to_string(a), *sb = rx_sinfo_to_string(b);
  bool same = !strcmp(sa, sb);
  rx_free(sa);
  rx_free(sb);
  if (same) return a;
  if (a->kind == RX_SINFO_TENSOR && b->kind == RX_SINFO_TENSOR && a->dtype == b->dtype &&
      a->ndim == b->ndim && a->ndim >= 0)
    return rx_sinfo_tensor(I->m, a->dtype, a->ndim, NULL);
  return NULL;
}

static void put_call(rx_strbuf *sb, const char *fn, const char *first, const char *pfx, int n) {
  base_strbuf_printf(sb, "%s(%s", fn, first);
  for (int k = 0; k < n; k++) base_strbuf_printf(sb, "%s%s%d", k || first[0] ? ", " : "", pfx, k);
  base_strbuf_printf(sb, ")");
}

/* If of a condition known at import (a shape check of an export): the branch taken, its nodes
 * in the current function, its outputs the node's */
static rx_status inline_branch(imp *I, const Onnx__NodeProto *n, const Onnx__GraphProto *g) {
  for (size_t i = 0; i < g->n_initializer; i++)
    if (!onnx_is_weight(g->initializer[i], false))
      RX_RETURN_IF_ERROR(onnx_def_constant(I, n, g->initializer[i]->name, g->initializer[i]));
  for (size_t i = 0; i < g->n_node; i++) RX_RETURN_IF_ERROR(onnx_do_node(I, g->node[i]));
  for (size_t i = 0; i < n->n_output; i++) {
    val *v = onnx_get(I, g->output[i]->name);
    if (!v) return onnx_node_err(I, n, "branch output '%s' is not defined", g->output[i]->name);
    if (!n->output[i] || !n->output[i][0]) continue;
    val copy = *v;
    copy.name = n->output[i];
    *onnx_def(I, n->output[i]) = copy;
  }
  return NULL;
}

/* If: the branches as functions, the driver `if` on the condition tensor */
rx_status onnx_do_if(imp *I, const Onnx__NodeProto *n, const onnx_op *row) {
  (void)row;
  const Onnx__GraphProto *gt = graph_attr(n, "then_branch"), *ge = graph_attr(n, "else_branch");
  if (!gt || !ge) return onnx_node_err(I, n, "attributes then_branch and else_branch are required");
  if (gt->n_input || ge->n_input) return onnx_node_err(I, n, "a branch with inputs");
  if (gt->n_output != ge->n_output || gt->n_output != n->n_output || !n->n_output ||
      n->n_output > CF_MAXIO)
    return onnx_node_err(I, n, "the branches must give the node's 1 to %d outputs", CF_MAXIO);
  val *cv = onnx_input(n, 0) ? onnx_get(I, onnx_input(n, 0)) : NULL;
  if (cv && cv->kind == V_SYM && cv->slen == 1 && cv->s[0]->kind == RX_EXPR_CONST)
    return inline_branch(I, n, cv->s[0]->value ? gt : ge);
  rx_node *c;
  RX_RETURN_IF_ERROR(onnx_arg(I, n, onnx_input(n, 0), &c));
  if (c->sinfo->kind != RX_SINFO_TENSOR || c->sinfo->dtype != RX_DTYPE_BOOL)
    return onnx_node_err(I, n, "input 0 (cond) must be a bool tensor");
  char F[48], tn[64], en[64];
  cf_name(I, "onnxif", F, sizeof F);
  snprintf(tn, sizeof tn, "%st", F);
  snprintf(en, sizeof en, "%se", F);
  body bt = {.fname = tn}, be = {.fname = en};
  RX_RETURN_IF_ERROR(import_body(I, n, gt, &bt));
  RX_RETURN_IF_ERROR(import_body(I, n, ge, &be));
  const rx_sinfo *f[CF_MAXIO];
  for (size_t i = 0; i < n->n_output; i++) {
    f[i] = join_branches(I, bt.ret->fields[i], be.ret->fields[i]);
    if (!f[i])
      return onnx_node_err(I, n, "output %zu: the branches give values of different types or ranks",
                           i);
  }
  const rx_sinfo *ret = rx_sinfo_tuple(I->m, f, (int)n->n_output);
  rx_strbuf sb = {0};
  base_strbuf_printf(&sb, "graph_fn %s(c: ", F);
  put_sinfo(&sb, c->sinfo);
  put_caps(&sb, "t", &bt);
  put_caps(&sb, "e", &be);
  base_strbuf_printf(&sb, ") -> ");
  put_sinfo(&sb, ret);
  base_strbuf_printf(&sb, " {\n");
  char sym[64];
  snprintf(sym, sizeof sym, "%s_c", F);
  put_cond(&sb, "c", c->sinfo, sym);
  base_strbuf_printf(&sb, "  r = if prim(bool, %s != 0) {\n    o = ", sym);
  put_call(&sb, tn, "", "t", bt.ncaps);
  base_strbuf_printf(&sb, "\n    o\n  } else {\n    o2 = ");
  put_call(&sb, en, "", "e", be.ncaps);
  base_strbuf_printf(&sb, "\n    o2\n  }\n  return r\n}\n");
  RX_RETURN_IF_ERROR(parse_driver(I, n, &sb));
  rx_node *a[1 + 2 * CF_MAXCAP];
  int na = 0;
  a[na++] = c;
  for (int k = 0; k < bt.ncaps; k++) a[na++] = rx_arg_var(I->b, bt.capv[k]);
  for (int k = 0; k < be.ncaps; k++) a[na++] = rx_arg_var(I->b, be.capv[k]);
  return call_driver(I, n, F, a, na, ret, false);
}

/* the driver's tuple of states st0.. (n of them) then the scan values sc0.. (k) */
static void put_tuple(rx_strbuf *sb, const char *st, int n, const char *sc, int k) {
  base_strbuf_printf(sb, "(");
  for (int i = 0; i < n; i++) base_strbuf_printf(sb, "%s%s%d", i ? ", " : "", st, i);
  for (int j = 0; j < k; j++) base_strbuf_printf(sb, "%s%s%d", n + j ? ", " : "", sc, j);
  base_strbuf_printf(sb, "%s)", n + k == 1 ? "," : "");
}

/* the carried values of the next step (the body's outputs first.. of struct info si), checked
 * to keep the struct info of the first step's (the VM checks the dims) */
static void put_carried(rx_strbuf *sb, const rx_sinfo *const *si, int n, int first) {
  for (int i = 0; i < n; i++) {
    base_strbuf_printf(sb, "    n%d = match_cast(o.%d, ", i, first + i);
    put_sinfo(sb, si[i]);
    base_strbuf_printf(sb, ")\n");
  }
}

/* "NAME_d<j>_<q>": dim q of tensor j of a row copy */
static void put_rdim(rx_strbuf *sb, const char *name, int j, int q) {
  base_strbuf_printf(sb, "%s_d%d_%d", name, j, q);
}

/* The elements of tensor j of a row copy: "(NAME_d<j>_<from> * ..)", "1" when none */
static void put_relems(rx_strbuf *sb, const char *name, int j, int ndim, int from) {
  if (from >= ndim) base_strbuf_printf(sb, "1");
  for (int q = from; q < ndim; q++) {
    base_strbuf_printf(sb, "%s", q > from ? " * " : "(");
    put_rdim(sb, name, j, q);
  }
  if (from < ndim) base_strbuf_printf(sb, ")");
}

/* "[row<j>, i0, ..]" (with_row) or "[i0, ..]" where i<q> is dim q's part of the flat element
 * number e */
static void put_rindex(rx_strbuf *sb, const char *name, int j, int ndim, bool with_row) {
  base_strbuf_printf(sb, "[");
  if (with_row) base_strbuf_printf(sb, "row%d", j);
  for (int q = 0; q < ndim; q++) {
    base_strbuf_printf(sb, "%se // ", with_row || q ? ", " : "");
    put_relems(sb, name, j, ndim, q + 1);
    if (q) {
      base_strbuf_printf(sb, " %% ");
      put_rdim(sb, name, j, q);
    }
  }
  base_strbuf_printf(sb, "]");
}

/* The tensor program NAME that writes each step value v<j> (of si[j]'s dtype and rank) as row
 * row<j> of its accumulator y<j>, in place (write), or reads row row<j> of each scan input x<j>
 * into v<j> (!write): one launch a step for all of them, a thread per element. */
static void put_row_copy(rx_strbuf *sb, const char *name, bool write, const rx_sinfo *const *si,
                         int n) {
  base_strbuf_printf(sb, "tensor_fn %s(", name);
  for (int pass = 0; pass < 2; pass++) /* the inputs, then the outputs */
    for (int j = 0; j < n; j++) {
      bool rows = (pass == 0) != write; /* the accumulator or scan input */
      base_strbuf_printf(sb, "%s%s%s%d: %s[", pass || j ? ", " : "", pass ? "out " : "",
                         rows ? (write ? "y" : "x") : "v", j, ir_dtype_name(si[j]->dtype));
      if (rows) base_strbuf_printf(sb, "%s_t%d%s", name, j, si[j]->ndim ? ", " : "");
      for (int q = 0; q < si[j]->ndim; q++) {
        if (q) base_strbuf_printf(sb, ", ");
        put_rdim(sb, name, j, q);
      }
      base_strbuf_printf(sb, "]");
    }
  for (int j = 0; j < n; j++) base_strbuf_printf(sb, ", row%d: i64", j);
  base_strbuf_printf(sb, ") {\n  for e in 0..");
  for (int j = 0; j < n - 1; j++) base_strbuf_printf(sb, "max(");
  for (int j = 0; j < n; j++) {
    put_relems(sb, name, j, si[j]->ndim, 0);
    if (j) base_strbuf_printf(sb, ")");
    if (j < n - 1) base_strbuf_printf(sb, ", ");
  }
  base_strbuf_printf(sb, " {\n");
  for (int j = 0; j < n; j++) {
    base_strbuf_printf(sb, "    if e < ");
    put_relems(sb, name, j, si[j]->ndim, 0);
    base_strbuf_printf(sb, " {\n      %s%d", write ? "y" : "v", j);
    put_rindex(sb, name, j, si[j]->ndim, write);
    base_strbuf_printf(sb, " = %s%d", write ? "v" : "x", j);
    put_rindex(sb, name, j, si[j]->ndim, !write);
    base_strbuf_printf(sb, "\n    }\n");
  }
  base_strbuf_printf(sb, "  }\n}\n");
}

/* ", dims=[row0, ..])\n": the rows of step k, T - 1 - k where dir[j] (reversed) */
static void put_rows(rx_strbuf *sb, const rx_expr *T, const char *k, const int64_t *dir, int n) {
  base_strbuf_printf(sb, ", dims=[");
  for (int j = 0; j < n; j++) {
    if (j) base_strbuf_printf(sb, ", ");
    if (dir && dir[j]) {
      put_expr(sb, T);
      base_strbuf_printf(sb, " - 1 - ");
    }
    base_strbuf_printf(sb, "%s", k);
  }
  base_strbuf_printf(sb, "])\n");
}

/* The write of step values v0.. into accumulators ACC0.. (n of them) in place by F's writer
 * <F>w, defining w0..; its dims=[..] follow (put_rows). */
static void put_write(rx_strbuf *sb, const char *F, const char *acc, int n, const char *ind) {
  base_strbuf_printf(sb, "%s%s = call_tensor(%sw", ind, n == 1 ? "w0" : "wr", F);
  for (int j = 0; j < n; j++) base_strbuf_printf(sb, ", v%d", j);
  base_strbuf_printf(sb, ", inplace=%s", n == 1 ? "" : "(");
  for (int j = 0; j < n; j++) base_strbuf_printf(sb, "%s%s%d", j ? ", " : "", acc, j);
  base_strbuf_printf(sb, "%s", n == 1 ? "" : ")");
}

/* After put_write and its rows: w0.. from the tuple of several. */
static void put_write_items(rx_strbuf *sb, int n, const char *ind) {
  for (int j = 0; n > 1 && j < n; j++) base_strbuf_printf(sb, "%sw%d = wr.%d\n", ind, j, j);
}

/* an int list attribute of n entries (default 0 each); false when present with another count */
static bool dir_list(const Onnx__NodeProto *n, const char *name, int cnt, int64_t *out) {
  const Onnx__AttributeProto *a = onnx_attr(n, name);
  for (int i = 0; i < cnt; i++) out[i] = a && (size_t)i < a->n_ints ? a->ints[i] : 0;
  return !a || a->n_ints == (size_t)cnt;
}

/* tensor a without (drop) or with (!drop) a leading dim of 1: Scan-8's batch of one */
static rx_status batch_one(imp *I, const Onnx__NodeProto *n, rx_node **a, bool drop) {
  const rx_sinfo *si = (*a)->sinfo;
  if (!known_tensor(si) || si->ndim > SYM_MAX - 1 ||
      (drop && (si->ndim < 1 || !rx_expr_is_const(si->shape[0], 1))))
    return onnx_node_err(I, n, "opset 8 Scan: only a batch of one is supported");
  const rx_expr *dims[SYM_MAX];
  int k = 0;
  if (!drop) dims[k++] = rx_sym_const(I->m, 1);
  for (int d = drop ? 1 : 0; d < si->ndim; d++) dims[k++] = si->shape[d];
  rx_var *r;
  return onnx_reshape_to(I, n, *a, dims, k, a, &r);
}

/* Scan: states and scan inputs along axis 0, forward or reversed, over their symbolic length */
rx_status onnx_do_scan(imp *I, const Onnx__NodeProto *n, const onnx_op *row) {
  (void)row;
  const Onnx__GraphProto *g = graph_attr(n, "body");
  bool v8 = I->opset < 9;
  int first = v8 ? 1 : 0, M = (int)onnx_attr_i(n, "num_scan_inputs", 0);
  int nin = (int)n->n_input - first, N = nin - M, K = (int)n->n_output - N;
  if (!g || M < 1 || N < 0 || K < 0 || nin > CF_MAXIO || (int)g->n_input != nin ||
      (int)g->n_output != N + K)
    return onnx_node_err(I, n, "body, num_scan_inputs and the inputs and outputs do not agree");
  if (v8 && onnx_input(n, 0))
    return onnx_node_err(I, n, "input 0 (sequence_lens) is not supported");
  int64_t idir[CF_MAXIO], odir[CF_MAXIO], ax[CF_MAXIO];
  if (!dir_list(n, v8 ? "directions" : "scan_input_directions", M, idir) ||
      !dir_list(n, "scan_output_directions", K, odir))
    return onnx_node_err(I, n, "a directions attribute of the wrong length");
  if (!dir_list(n, "scan_input_axes", M, ax)) return onnx_node_err(I, n, "bad scan_input_axes");
  for (int j = 0; j < M; j++)
    if (ax[j]) return onnx_node_err(I, n, "attribute scan_input_axes: only axis 0 is supported");
  if (!dir_list(n, "scan_output_axes", K, ax)) return onnx_node_err(I, n, "bad scan_output_axes");
  for (int j = 0; j < K; j++)
    if (ax[j]) return onnx_node_err(I, n, "attribute scan_output_axes: only axis 0 is supported");
  rx_node *a[1 + CF_MAXIO + CF_MAXCAP];
  const rx_sinfo *in[CF_MAXIO];
  a[0] = NULL; /* the driver's arguments: a[1..] */
  for (int i = 0; i < nin; i++) {
    RX_RETURN_IF_ERROR(onnx_arg(I, n, onnx_input(n, (size_t)(first + i)), &a[1 + i]));
    if (v8) RX_RETURN_IF_ERROR(batch_one(I, n, &a[1 + i], true));
    const rx_sinfo *si = a[1 + i]->sinfo;
    if (!known_tensor(si) || (i >= N && si->ndim < 1))
      return onnx_node_err(I, n, "input %d must be a tensor of known shape", first + i);
    in[i] = i < N ? si : rx_sinfo_tensor(I->m, si->dtype, si->ndim - 1, si->shape + 1);
  }
  const rx_expr *T = a[1 + N]->sinfo->shape[0];
  char F[48], bn[64], ks[64];
  cf_name(I, "onnxscan", F, sizeof F);
  snprintf(bn, sizeof bn, "%sb", F);
  snprintf(ks, sizeof ks, "%s_k", F);
  body bd = {.fname = bn, .in = in};
  RX_RETURN_IF_ERROR(import_body(I, n, g, &bd));
  const rx_sinfo *f[CF_MAXIO];
  for (int i = 0; i < N; i++) f[i] = in[i];
  for (int j = 0; j < K; j++) {
    const rx_sinfo *so = bd.ret->fields[N + j];
    if (!known_tensor(so) || so->ndim > SYM_MAX - 1)
      return onnx_node_err(I, n, "scan output %d: its shape must be known", j);
    const rx_expr *dims[SYM_MAX];
    dims[0] = T;
    for (int d = 0; d < so->ndim; d++) dims[1 + d] = so->shape[d];
    f[N + j] = rx_sinfo_tensor(I->m, so->dtype, so->ndim + 1, dims);
  }
  const rx_sinfo *ret = rx_sinfo_tuple(I->m, f, N + K);
  rx_strbuf sb = {0};
  char st[64], rw[80];
  snprintf(st, sizeof st, "%st", F);
  snprintf(rw, sizeof rw, "%sr", F);
  put_row_copy(&sb, rw, false, in + N, M);
  snprintf(rw, sizeof rw, "%sw", F);
  if (K) put_row_copy(&sb, rw, true, bd.ret->fields + N, K);
  /* the entry: the scan outputs' accumulators, then the steps from 0 */
  base_strbuf_printf(&sb, "graph_fn %s(", F);
  for (int i = 0; i < nin; i++) {
    base_strbuf_printf(&sb, "%s%s%d: ", i ? ", " : "", i < N ? "s" : "x", i < N ? i : i - N);
    put_sinfo(&sb, a[1 + i]->sinfo);
  }
  put_caps(&sb, "c", &bd);
  base_strbuf_printf(&sb, ") -> ");
  put_sinfo(&sb, ret);
  base_strbuf_printf(&sb, " {\n");
  for (int j = 0; j < K; j++) {
    base_strbuf_printf(&sb, "  y%d = zeros([", j);
    put_dims(&sb, f[N + j], 0, false);
    base_strbuf_printf(&sb, "], dtype=%s)\n", ir_dtype_name(f[N + j]->dtype));
  }
  base_strbuf_printf(&sb, "  o = %s([0]", st);
  for (int i = 0; i < nin; i++)
    base_strbuf_printf(&sb, ", %s%d", i < N ? "s" : "x", i < N ? i : i - N);
  for (int j = 0; j < K; j++) base_strbuf_printf(&sb, ", y%d", j);
  for (int k = 0; k < bd.ncaps; k++) base_strbuf_printf(&sb, ", c%d", k);
  base_strbuf_printf(&sb, ")\n  return o\n}\n");
  /* the step k: its rows of the scan inputs (row T - 1 - k reversed), the body, its scan values
   * written likewise, then the steps after it: a tail call */
  base_strbuf_printf(&sb, "graph_fn %s(i: Shape([%s])", st, ks);
  for (int i = 0; i < nin; i++) {
    base_strbuf_printf(&sb, ", %s%d: ", i < N ? "s" : "x", i < N ? i : i - N);
    put_sinfo(&sb, a[1 + i]->sinfo);
  }
  for (int j = 0; j < K; j++) {
    base_strbuf_printf(&sb, ", y%d: ", j);
    put_sinfo(&sb, f[N + j]);
  }
  put_caps(&sb, "c", &bd);
  base_strbuf_printf(&sb, ") -> ");
  put_sinfo(&sb, ret);
  base_strbuf_printf(&sb, " {\n  r = if prim(bool, %s < ", ks);
  put_expr(&sb, T);
  base_strbuf_printf(&sb, ") {\n");
  base_strbuf_printf(&sb, "    %s = call_tensor(%sr", M == 1 ? "e0" : "rd", F);
  for (int j = 0; j < M; j++) base_strbuf_printf(&sb, ", x%d", j);
  base_strbuf_printf(&sb, ", out=");
  put_sinfo(&sb, M == 1 ? in[N] : rx_sinfo_tuple(I->m, in + N, M));
  put_rows(&sb, T, ks, idir, M);
  for (int j = 0; M > 1 && j < M; j++) base_strbuf_printf(&sb, "    e%d = rd.%d\n", j, j);
  base_strbuf_printf(&sb, "    o = %s(", bn);
  for (int i = 0; i < nin; i++)
    base_strbuf_printf(&sb, "%s%s%d", i ? ", " : "", i < N ? "s" : "e", i < N ? i : i - N);
  for (int k = 0; k < bd.ncaps; k++) base_strbuf_printf(&sb, "%sc%d", nin + k ? ", " : "", k);
  base_strbuf_printf(&sb, ")\n");
  put_carried(&sb, in, N, 0);
  for (int j = 0; j < K; j++) base_strbuf_printf(&sb, "    v%d = o.%d\n", j, N + j);
  if (K) {
    put_write(&sb, F, "y", K, "    ");
    put_rows(&sb, T, ks, odir, K);
    put_write_items(&sb, K, "    ");
  }
  base_strbuf_printf(&sb, "    rest = %s([%s + 1]", st, ks);
  for (int i = 0; i < N; i++) base_strbuf_printf(&sb, ", n%d", i);
  for (int j = 0; j < M; j++) base_strbuf_printf(&sb, ", x%d", j);
  for (int j = 0; j < K; j++) base_strbuf_printf(&sb, ", w%d", j);
  for (int k = 0; k < bd.ncaps; k++) base_strbuf_printf(&sb, ", c%d", k);
  base_strbuf_printf(&sb, ")\n    rest\n  } else {\n    res2 = ");
  put_tuple(&sb, "s", N, "y", K);
  base_strbuf_printf(&sb, "\n    res2\n  }\n  return r\n}\n");
  RX_RETURN_IF_ERROR(parse_driver(I, n, &sb));
  int na = 1 + nin;
  for (int k = 0; k < bd.ncaps; k++) a[na++] = rx_arg_var(I->b, bd.capv[k]);
  RX_RETURN_IF_ERROR(call_driver(I, n, F, a + 1, na - 1, ret, true));
  for (size_t i = 0; v8 && i < n->n_output; i++) { /* the batch of one back in front */
    if (!n->output[i] || !n->output[i][0]) continue;
    rx_node *o = rx_arg_var(I->b, onnx_get(I, n->output[i])->var);
    RX_RETURN_IF_ERROR(batch_one(I, n, &o, false));
    onnx_def_named(I, n->output[i], o->var);
  }
  return NULL;
}

/* the trip count when Loop has none (the condition ends it): large, and k + 1 stays in range */
#define LOOP_UNBOUNDED ((int64_t)1 << 62)

/* the rows a Loop's scan output accumulator starts with (fewer when M is smaller); doubled when
 * full, so the copies stay linear in the steps */
#define LOOP_FIRST_ROWS 16

/* What Loop's driver text is made of (onnx_do_loop). */
typedef struct loop_txt {
  const char *F, *bn, *ks, *cs, *ms; /* the driver, the body, the symbols k, cond and M */
  char st[64];                       /* the step function */
  int N, K;                          /* carried values, scan outputs */
  bool always;                       /* the condition is true at every step: never read back */
  const rx_sinfo *const *in;         /* the body's inputs: iteration number, cond, carried */
  const body *bd;
  const rx_sinfo *ret;          /* the driver's: carried values, then the scan outputs */
  const rx_sinfo *s0[CF_MAXIO]; /* a step's value of each scan output at step 0 */
  const rx_sinfo *sk[CF_MAXIO]; /* and at step k */
} loop_txt;

/* ", c: COND, s0: .., y0: DT[cap, elems].., c0: .." of the entry (!step: no accumulators) and
 * the step, then the result */
static void put_loop_params(rx_strbuf *sb, const loop_txt *L, bool step) {
  put_sinfo(sb, L->in[1]);
  for (int i = 0; i < L->N; i++) {
    base_strbuf_printf(sb, ", s%d: ", i);
    put_sinfo(sb, L->in[2 + i]);
  }
  for (int j = 0; step && j < L->K; j++) {
    base_strbuf_printf(sb, ", y%d: %s[%s_cap", j, ir_dtype_name(L->sk[j]->dtype), L->F);
    put_dims(sb, L->sk[j], 0, true);
    base_strbuf_printf(sb, "]");
  }
  put_caps(sb, "c", L->bd);
  base_strbuf_printf(sb, ") -> ");
  put_sinfo(sb, L->ret);
  base_strbuf_printf(sb, " {\n");
}

/* the step's arguments after its step number: ", m, COND, CARRIED.., ACC.., c0.." */
static void put_step_args(rx_strbuf *sb, const loop_txt *L, const char *cond, const char *carried,
                          const char *acc) {
  base_strbuf_printf(sb, ", m, %s", cond);
  for (int i = 0; i < L->N; i++) base_strbuf_printf(sb, ", %s%d", carried, i);
  for (int j = 0; j < L->K; j++) base_strbuf_printf(sb, ", %s%d", acc, j);
  for (int k = 0; k < L->bd->ncaps; k++) base_strbuf_printf(sb, ", c%d", k);
  base_strbuf_printf(sb, ")\n");
}

/* The entry: the first step when 0 < M and cond, with accumulators of min(M, 16) rows; else
 * the carried values as given and empty scan outputs. */
static void put_loop_entry(rx_strbuf *sb, const loop_txt *L) {
  base_strbuf_printf(sb, "graph_fn %s(m: Shape([%s]), c: ", L->F, L->ms);
  put_loop_params(sb, L, false);
  if (!L->always) put_cond(sb, "c", L->in[1], L->cs);
  base_strbuf_printf(sb, "  r = if prim(bool, 0 < %s%s%s) {\n", L->ms, L->always ? "" : " && ",
                     L->always ? "" : L->cs);
  if (L->K) /* bound on the host: M may be past what a kernel's int32 takes */
    base_strbuf_printf(sb, "    yr = [min(%s, %d)]\n    yc = match_cast(yr, Shape([%s_f]))\n",
                       L->ms, LOOP_FIRST_ROWS, L->F);
  for (int j = 0; j < L->K; j++) {
    base_strbuf_printf(sb, "    y%d = zeros([%s_f", j, L->F);
    put_dims(sb, L->s0[j], 0, true);
    base_strbuf_printf(sb, "], dtype=%s)\n", ir_dtype_name(L->s0[j]->dtype));
  }
  base_strbuf_printf(sb, "    o = %s([0]", L->st);
  put_step_args(sb, L, "c", "s", "y");
  base_strbuf_printf(sb, "    o\n  } else {\n");
  for (int j = 0; j < L->K; j++) { /* no step: empty (dims of the iteration number 0) */
    base_strbuf_printf(sb, "    z%d = zeros([0", j);
    put_dims(sb, L->s0[j], 0, true);
    base_strbuf_printf(sb, "], dtype=%s)\n", ir_dtype_name(L->s0[j]->dtype));
  }
  base_strbuf_printf(sb, "    res2 = ");
  put_tuple(sb, "s", L->N, "z", L->K);
  base_strbuf_printf(sb, "\n    res2\n  }\n  return r\n}\n");
}

/* The step k: the body; its scan values written at row k of the accumulators (doubled first
 * when full); then, while k + 1 < M and the body's condition, the next step as a tail call,
 * else the carried values and the accumulators' first k + 1 rows in the scan outputs' shapes. */
static void put_loop_step(rx_strbuf *sb, const loop_txt *L) {
  const char *F = L->F, *ks = L->ks;
  base_strbuf_printf(sb, "graph_fn %s(i: Shape([%s]), m: Shape([%s]), c: ", L->st, ks, L->ms);
  put_loop_params(sb, L, true);
  base_strbuf_printf(sb, "  o = %s(i, c", L->bn);
  for (int i = 0; i < L->N; i++) base_strbuf_printf(sb, ", s%d", i);
  for (int k = 0; k < L->bd->ncaps; k++) base_strbuf_printf(sb, ", c%d", k);
  base_strbuf_printf(sb, ")\n  nc = match_cast(o.0, ");
  put_sinfo(sb, L->in[1]);
  base_strbuf_printf(sb, ")\n");
  put_carried(sb, L->in + 2, L->N, 1);
  for (int j = 0; j < L->K; j++) {
    const rx_sinfo *sk = L->sk[j];
    const char *dt = ir_dtype_name(sk->dtype);
    base_strbuf_printf(sb, "  v%d = match_cast(o.%d, ", j, 1 + L->N + j);
    put_sinfo(sb, sk);
    base_strbuf_printf(sb, ")\n  g%d = if prim(bool, %s < %s_cap) {\n    y%d\n  } else {\n", j, ks,
                       F, j);
    base_strbuf_printf(sb, "    z%d = zeros([%s_cap", j, F);
    put_dims(sb, sk, 0, true);
    base_strbuf_printf(sb, "], dtype=%s)\n    q%d = concat((y%d, z%d), axis=0)\n    q%d\n  }\n", dt,
                       j, j, j, j);
    base_strbuf_printf(sb, "  h%d = match_cast(g%d, %s[%s_g", j, j, dt, F);
    put_dims(sb, sk, 0, true);
    base_strbuf_printf(sb, "])\n");
  }
  if (L->K) {
    put_write(sb, F, "h", L->K, "  ");
    put_rows(sb, NULL, ks, NULL, L->K);
    put_write_items(sb, L->K, "  ");
  }
  if (!L->always) put_cond(sb, "nc", L->in[1], L->cs);
  base_strbuf_printf(sb, "  r = if prim(bool, %s + 1 < %s%s%s) {\n", ks, L->ms,
                     L->always ? "" : " && ", L->always ? "" : L->cs);
  base_strbuf_printf(sb, "    rest = %s([%s + 1]", L->st, ks);
  put_step_args(sb, L, "nc", "n", "w");
  base_strbuf_printf(sb, "    rest\n  } else {\n");
  for (int j = 0; j < L->K; j++) {
    base_strbuf_printf(sb,
                       "    t%d = strided_slice(w%d, axes=[0], begin=[0], end=[%s + 1])\n"
                       "    u%d = match_cast(t%d, %s[%s + 1",
                       j, j, ks, j, j, ir_dtype_name(L->sk[j]->dtype), ks);
    put_dims(sb, L->sk[j], 0, true);
    base_strbuf_printf(sb, "])\n");
  }
  base_strbuf_printf(sb, "    res2 = ");
  put_tuple(sb, "n", L->N, "u", L->K);
  base_strbuf_printf(sb, "\n    res2\n  }\n  return r\n}\n");
}

/* Is Loop n's condition true at every step: no input or a constant true, and the body gives
 * its condition input back (as exporters write a loop of M steps)? Then the steps do not read it
 * back from the device. */
static bool always_true(imp *I, const Onnx__NodeProto *n, const Onnx__GraphProto *g) {
  val *cv = onnx_input(n, 1) ? onnx_get(I, onnx_input(n, 1)) : NULL;
  if (onnx_input(n, 1) && !(cv && cv->kind == V_SYM && cv->slen == 1 &&
                            cv->s[0]->kind == RX_EXPR_CONST && cv->s[0]->value))
    return false;
  const char *cin = g->input[1]->name, *cout = g->output[0]->name;
  if (!strcmp(cin, cout)) return true;
  for (size_t i = 0; i < g->n_node; i++) {
    const Onnx__NodeProto *nn = g->node[i];
    if (nn->n_output && nn->output[0] && !strcmp(nn->output[0], cout))
      return nn->op_type && !strcmp(nn->op_type, "Identity") && onnx_input(nn, 0) &&
             !strcmp(onnx_input(nn, 0), cin);
  }
  return false;
}

/* Loop: the body while k < M and cond, its carried values threaded through the recursion; scan
 * outputs of a length known when the program runs (bound to fresh dims after the call) */
rx_status onnx_do_loop(imp *I, const Onnx__NodeProto *n, const onnx_op *row) {
  (void)row;
  const Onnx__GraphProto *g = graph_attr(n, "body");
  int N = (int)n->n_input - 2, K = g ? (int)g->n_output - 1 - N : -1;
  if (!g || N < 0 || K < 0 || N > CF_MAXIO || (int)g->n_input != N + 2 || (int)n->n_output != N + K)
    return onnx_node_err(I, n, "the body and the inputs and outputs do not agree");
  rx_node *a[3 + CF_MAXIO + CF_MAXCAP];
  const rx_sinfo *in[2 + CF_MAXIO];
  const rx_expr *zero = rx_sym_const(I->m, 0), *M = rx_sym_const(I->m, LOOP_UNBOUNDED);
  if (onnx_input(n, 0)) {
    val *mv;
    RX_RETURN_IF_ERROR(onnx_sym_input(I, n, 0, &mv));
    if (mv->slen != 1) return onnx_node_err(I, n, "input 0 (M) must be one integer");
    M = mv->s[0];
  }
  a[0] = rx_arg_shape(I->b, &zero, 1);
  a[1] = rx_arg_shape(I->b, &M, 1);
  if (onnx_input(n, 1)) {
    RX_RETURN_IF_ERROR(onnx_arg(I, n, onnx_input(n, 1), &a[2]));
  } else { /* no condition: true */
    rx_node *fa[2] = {rx_arg_shape(I->b, NULL, 0),
                      rx_arg_prim(I->b, RX_DTYPE_BOOL, rx_sym_const(I->m, 1))};
    const rx_attr *at = rx_attr_dtype(I->m, "dtype", RX_DTYPE_BOOL);
    rx_var *t;
    RX_RETURN_IF_ERROR(onnx_emit(I, n, RX_OP_full, fa, 2, &at, 1, &t));
    a[2] = rx_arg_var(I->b, t);
  }
  if (a[2]->sinfo->kind != RX_SINFO_TENSOR || a[2]->sinfo->dtype != RX_DTYPE_BOOL)
    return onnx_node_err(I, n, "input 1 (cond) must be a bool tensor");
  in[0] = NULL;
  in[1] = a[2]->sinfo;
  for (int i = 0; i < N; i++) {
    RX_RETURN_IF_ERROR(onnx_arg(I, n, onnx_input(n, (size_t)(2 + i)), &a[3 + i]));
    if (!known_tensor(a[3 + i]->sinfo))
      return onnx_node_err(I, n, "input %d must be a tensor of known shape", 2 + i);
    in[2 + i] = a[3 + i]->sinfo;
  }
  char F[48], bn[64], ks[64], cs[64], ms[64], is[80];
  cf_name(I, "onnxloop", F, sizeof F);
  snprintf(bn, sizeof bn, "%sb", F);
  snprintf(ks, sizeof ks, "%s_k", F);
  snprintf(cs, sizeof cs, "%s_c", F);
  snprintf(ms, sizeof ms, "%s_m", F);
  snprintf(is, sizeof is, "%s_i", bn);
  body bd = {.fname = bn, .in = in, .iter = rx_sym_var(I->m, is)};
  RX_RETURN_IF_ERROR(import_body(I, n, g, &bd));
  const rx_sinfo *f[CF_MAXIO];
  for (int i = 0; i < N; i++) f[i] = in[2 + i];
  for (int j = 0; j < K; j++) {
    const rx_sinfo *so = bd.ret->fields[1 + N + j];
    if (!known_tensor(so)) return onnx_node_err(I, n, "scan output %d: its shape must be known", j);
    f[N + j] = rx_sinfo_tensor(I->m, so->dtype, so->ndim + 1, NULL);
  }
  loop_txt L = {.F = F,
                .bn = bn,
                .ks = ks,
                .cs = cs,
                .ms = ms,
                .N = N,
                .K = K,
                .in = in,
                .bd = &bd,
                .ret = rx_sinfo_tuple(I->m, f, N + K),
                .always = always_true(I, n, g)};
  snprintf(L.st, sizeof L.st, "%st", F);
  rx_strbuf sb = {0};
  for (int j = 0; j < K; j++) {
    const rx_sinfo *so = bd.ret->fields[1 + N + j];
    const rx_expr *d0[SYM_MAX], *dk[SYM_MAX];
    if (so->ndim > SYM_MAX - 1)
      return onnx_node_err(I, n, "scan output %d: rank over %d", j, SYM_MAX - 1);
    for (int d = 0; d < so->ndim; d++) { /* a dim of the iteration number: step 0's, checked */
      char an[96];
      snprintf(an, sizeof an, "%s_a%d_%d", F, j, d);
      d0[d] = sym_expr_subst(I->m->ctx, so->shape[d], &bd.iter, &zero, 1);
      dk[d] = sym_expr_uses_var(so->shape[d], bd.iter) ? rx_sym_var(I->m, an) : so->shape[d];
    }
    L.s0[j] = rx_sinfo_tensor(I->m, so->dtype, so->ndim, d0);
    L.sk[j] = rx_sinfo_tensor(I->m, so->dtype, so->ndim, dk);
  }
  char wn[80];
  snprintf(wn, sizeof wn, "%sw", F);
  if (K) put_row_copy(&sb, wn, true, bd.ret->fields + 1 + N, K);
  put_loop_entry(&sb, &L);
  put_loop_step(&sb, &L);
  RX_RETURN_IF_ERROR(parse_driver(I, n, &sb));
  a[0] = a[1]; /* the entry takes no step number */
  a[1] = a[2];
  for (int i = 0; i < N; i++) a[2 + i] = a[3 + i];
  int na = 2 + N;
  for (int k = 0; k < bd.ncaps; k++) a[na++] = rx_arg_var(I->b, bd.capv[k]);
  return call_driver(I, n, F, a, na, L.ret, true);
}
