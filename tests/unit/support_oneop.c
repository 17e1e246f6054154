#ifdef RX_SUPPORT_RUNTIME /* only the tests that link the runtime (tests/CMakeLists.txt) */
#include "support_oneop.h"

#include "ops/legalize.h"

#include <stdio.h>
#include <string.h>

const char *const rxk_oneop_targets[RXK_ONEOP_TARGETS] = {"cuda -arch=sm_80", "cuda -arch=sm_90",
                                                          "vulkan-lavapipe",  "vulkan",
                                                          "metal-apple7",     "vulkan-nvidia"};

bool rxk_oneop_build(rxk_oneop *p, const char *text, const char *what, const char *name,
                     const char *filter, rxk_stats *st, rxk_backend *vk) {
  memset(p, 0, sizeof *p);
  snprintf(p->what, sizeof p->what, "%s", what);
  if (filter && !strstr(what, filter)) return false;
  printf("%s\n", what);
  p->m = rx_module_new();
  rx_diag d;
  base_diag_init(&d);
  bool ok = ir_parse_module(p->m, what, text, strlen(text), &d) && ops_module_normalize(p->m, &d);
  rx_graph_fn *g = ok ? ir_module_graph_fn(p->m, "main") : NULL;
  if (ok && !g) { /* a hand-written program */
    p->f = ir_module_tensor_fn(p->m, "prog");
    ok = p->f && ir_module_verify(p->m, &d);
  } else if (ok) {
    const rx_binding *b = g->body.blocks[0]->bindings[0];
    char site[256]; /* as passes/legalize.c names the call in its run-time checks */
    snprintf(site, sizeof site, "main: binding `%s` (%s)", b->var->name, b->value->op->name);
    p->f = ops_legalize_call_at(p->m, b->value, name, site, &d, NULL);
    ok = p->f && ir_module_verify(p->m, &d);
  }
  if (!ok) rxk_fail(st, "%s: does not legalize:\n%s", what, rx_diag_text(&d));
  base_diag_free(&d);
  if (!ok) return false;
  for (int i = 0; i < RXK_ONEOP_TARGETS; i++) {
    const rx_target *t;
    rx_status ts = tgt_target_parse(rxk_oneop_targets[i], &t);
    RX_ASSERT(!ts);
    rxk_prepare(p->m, p->f, t, st, &p->tp[i]);
  }
  if (vk->dev) {
    rx_strbuf msg = {0};
    if (!rxk_rt_load(p->m, p->f, vk, &p->lib, &msg))
      rxk_fail(st, "%s: compiling for %s: %s", what, vk->target.name, msg.data ? msg.data : "");
    base_strbuf_free(&msg);
  }
  return true;
}

void rxk_oneop_free(rxk_oneop *p) {
  for (int i = 0; i < RXK_ONEOP_TARGETS; i++) rxk_release(&p->tp[i]);
  rx_rt_library_release(p->lib);
  if (p->m) rx_module_free(p->m);
}

rx_interp_arg *rxk_oneop_param(const rxk_oneop *p, rxk_buffers *b, int k) {
  for (int i = 0; i < p->f->nparams; i++)
    if (p->f->params[i]->kind == RX_PARAM_BUFFER && k-- == 0) return &b->arg[i];
  RX_ASSERT(!"no such parameter");
  return NULL;
}
#endif
