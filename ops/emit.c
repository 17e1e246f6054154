/* The public entry points of include/relaxc/compiler.h that need the op library, on the ops
 * floor so that ir/ links alone: rx_module_new (a module holding the registry of ops/ops.def,
 * through which ir/'s parser, printer and verifier know the ops), rx_module_check
 * (normalization, ops/normalize.c, then the verifier) and rx_emit_op (an op call appended to a
 * graph builder with its struct info deduced). The rest of the builder is ir/builder.c. */
#include "relaxc/compiler.h"

#include "ops.h"

#include <string.h>

static const rx_loc noloc;

/* ---- modules ---- */

rx_module *rx_module_new(void) { return ir_module_new(&ops_registry); }

rx_status rx_module_check(rx_module *m, rx_diag *diag) {
  rx_diag local;
  base_diag_init(&local);
  bool ok = ops_module_normalize(m, &local) && ir_module_verify(m, &local);
  return ir_diag_status(&local, diag, ok);
}

/* ---- op calls ---- */

/* Copies the attributes into the op's schema order, checking names, kinds and required ones. */
static rx_status order_attrs(rx_builder *b, const rx_op *op, const rx_attr *const *attrs,
                             int nattrs, rx_attr **out, int *out_n) {
  *out = NULL;
  *out_n = 0;
  if (nattrs < 0 || (nattrs > 0 && !attrs))
    return base_status_make(RX_ERR_INVALID, "%s: bad attribute array", ops_op_name(op));
  for (int i = 0; i < nattrs; i++) {
    if (!attrs[i])
      return base_status_make(RX_ERR_INVALID, "%s: attribute %d is missing", ops_op_name(op), i);
    int k = 0;
    while (k < ops_op_nattrs(op) && strcmp(ops_op_attr(op, k)->name, attrs[i]->name) != 0) k++;
    if (k == ops_op_nattrs(op)) {
      rx_strbuf names = {0};
      for (int j = 0; j < ops_op_nattrs(op); j++)
        base_strbuf_printf(&names, "%s%s", j ? ", " : "", ops_op_attr(op, j)->name);
      rx_status st = base_status_make(
          RX_ERR_INVALID, "%s has no attribute '%s' (expected %s%s)", ops_op_name(op),
          attrs[i]->name, ops_op_nattrs(op) ? "one of: " : "none", names.data ? names.data : "");
      base_strbuf_free(&names);
      return st;
    }
    if (attrs[i]->kind != ops_op_attr(op, k)->kind)
      return base_status_make(RX_ERR_INVALID, "%s: attribute '%s' has the wrong kind",
                              ops_op_name(op), attrs[i]->name);
    for (int j = 0; j < i; j++)
      if (attrs[j]->name == attrs[i]->name)
        return base_status_make(RX_ERR_INVALID, "%s: attribute '%s' given twice", ops_op_name(op),
                                attrs[i]->name);
  }
  rx_attr *arr =
      nattrs ? ir_module_alloc(ir_builder_module(b), sizeof *arr * (size_t)nattrs) : NULL;
  int n = 0;
  for (int k = 0; k < ops_op_nattrs(op); k++) {
    bool found = false;
    for (int i = 0; i < nattrs; i++)
      if (strcmp(ops_op_attr(op, k)->name, attrs[i]->name) == 0) {
        arr[n++] = *attrs[i];
        found = true;
      }
    if (!found && ops_op_attr(op, k)->required)
      return base_status_make(RX_ERR_INVALID, "%s: missing required attribute '%s'",
                              ops_op_name(op), ops_op_attr(op, k)->name);
  }
  *out = arr;
  *out_n = n;
  return NULL;
}

rx_status rx_emit_op(rx_builder *b, const char *op_name, rx_node *const *args, int nargs,
                     const rx_attr *const *attrs, int nattrs, const char *name, rx_var **out_var) {
  if (out_var) *out_var = NULL;
  const rx_op *op = op_name ? ops_op_lookup(op_name, strlen(op_name)) : NULL;
  if (!op) return base_status_make(RX_ERR_INVALID, "unknown op '%s'", op_name ? op_name : "");
  RX_RETURN_IF_ERROR(ir_builder_check_args(b, ops_op_name(op), args, nargs));
  if (nargs < ops_op_min_args(op) || (ops_op_max_args(op) >= 0 && nargs > ops_op_max_args(op))) {
    if (ops_op_min_args(op) == ops_op_max_args(op))
      return base_status_make(RX_ERR_INVALID, "%s takes %d argument%s, got %d", ops_op_name(op),
                              ops_op_min_args(op), ops_op_min_args(op) == 1 ? "" : "s", nargs);
    return base_status_make(RX_ERR_INVALID, "%s takes %d to %d arguments, got %d", ops_op_name(op),
                            ops_op_min_args(op), ops_op_max_args(op), nargs);
  }
  const char *vname;
  RX_RETURN_IF_ERROR(ir_builder_pick_name(b, name, ops_op_name(op), &vname));
  rx_node *call = ir_builder_call_node(b, RX_NODE_CALL, args, nargs);
  call->op = op;
  RX_RETURN_IF_ERROR(order_attrs(b, op, attrs, nattrs, &call->attrs, &call->nattrs));

  rx_diag diag;
  base_diag_init(&diag);
  const rx_sinfo *s =
      ops_op_deduce_call(ir_builder_module(b), ir_builder_analyzer(b), &diag, noloc, call);
  if (!s || diag.errors) {
    const char *t = rx_diag_text(&diag);
    if (strncmp(t, "error: ", 7) == 0) t += 7;
    size_t n = strlen(t);
    while (n && t[n - 1] == '\n') n--;
    size_t on = strlen(ops_op_name(op));
    bool named = strncmp(t, ops_op_name(op), on) == 0 && (t[on] == ' ' || t[on] == ':');
    rx_status st = base_status_make(RX_ERR_INVALID, "%s%s%.*s", named ? "" : ops_op_name(op),
                                    named ? "" : ": ", (int)n, n ? t : "cannot deduce the result");
    base_diag_free(&diag);
    return st;
  }
  base_diag_free(&diag);
  call->sinfo = s;
  rx_var *v = ir_builder_bind(b, vname, call, s, NULL);
  if (out_var) *out_var = v;
  return NULL;
}
