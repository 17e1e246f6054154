/* passes/short_names.c: program names become kernel entry points and artifact section names
 * ("<backend>/<kernel>.<ext>", at most 63 bytes). A program whose name is long (fusion
 * concatenates the names of its parts) or clashes with another program's specialized kernels
 * (kernel P_1 of program P against a program named P_1) gets a short unique name
 * ("<first 20 characters, without trailing '_'>_p<counter>"), and every call_tensor follows it. */
#include "passes.h"

#include <stdio.h>
#include <string.h>

/* the longest program name kept as it is */
#define NAME_MAX_LEN 32

static bool suffixed(const char *name, const char *base) { /* name == base + "_" + digits */
  size_t n = strlen(base);
  if (strncmp(name, base, n) || name[n] != '_' || !name[n + 1]) return false;
  for (const char *c = name + n + 1; *c; c++)
    if (*c < '0' || *c > '9') return false;
  return true;
}
static bool name_clash(rx_module *m, const char *name, const rx_tensor_fn *self) {
  for (size_t i = 0; i < m->items.len; i++) {
    const rx_tensor_fn *q = m->items.data[i].fn;
    if (m->items.data[i].kind != RX_ITEM_TENSOR || q == self) continue;
    if (!strcmp(q->name, name) || suffixed(name, q->name) || suffixed(q->name, name)) return true;
  }
  return false;
}
static void rename_calls(rx_seq *s, const rx_tensor_fn *f) {
  for (int b = 0; s && b < s->nblocks; b++)
    for (int i = 0; i < s->blocks[b]->nbindings; i++) {
      rx_node *n = s->blocks[b]->bindings[i]->value;
      if (n->kind == RX_NODE_CALL_TENSOR && n->tfn == f) n->callee = f->name;
      if (n->kind == RX_NODE_IF) {
        rename_calls(n->then_seq, f);
        rename_calls(n->else_seq, f);
      }
    }
}
bool pass_short_names(rx_module *m, rx_diag *diag) {
  (void)diag;
  int counter = 0;
  for (size_t i = 0; i < m->items.len; i++) {
    if (m->items.data[i].kind != RX_ITEM_TENSOR) continue;
    rx_tensor_fn *f = m->items.data[i].fn;
    if (strlen(f->name) <= NAME_MAX_LEN && !name_clash(m, f->name, f)) continue;
    char buf[NAME_MAX_LEN + 16];
    int keep = (int)strlen(f->name) < 20 ? (int)strlen(f->name) : 20;
    /* no '_' before "_p": a "__" would make the printers escape the whole name (cprinter.c's
     * class C, every '_' as "_5f"), past the artifact's limit ("fused_take_rms_norm_" + "_p10") */
    while (keep > 1 && f->name[keep - 1] == '_') keep--;
    do snprintf(buf, sizeof buf, "%.*s_p%d", keep, f->name, counter++);
    while (name_clash(m, buf, f));
    f->name = ir_module_intern(m, buf, strlen(buf));
    ir_module_items_changed(m);
    for (size_t g = 0; g < m->items.len; g++)
      if (m->items.data[g].kind == RX_ITEM_GRAPH)
        rename_calls(&((rx_graph_fn *)m->items.data[g].fn)->body, f);
  }
  return true;
}
