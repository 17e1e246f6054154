#ifdef RX_SUPPORT_RUNTIME /* only the tests that link the runtime (tests/CMakeLists.txt) */
#include "support_oneop.h"

#include "ops/legalize.h"

#include <stdio.h>
#include <stdlib.h>
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

rx_interp_arg *rxk_oneop_named(const rxk_oneop *p, rxk_buffers *b, const char *name) {
  for (int i = 0; i < p->f->nparams; i++)
    if (p->f->params[i]->kind == RX_PARAM_BUFFER && !strcmp(p->f->params[i]->buf->name, name))
      return &b->arg[i];
  RX_ASSERT(!"no such parameter");
  return NULL;
}

uint64_t rxk_xorshift(uint64_t *state) {
  uint64_t x = *state;
  x ^= x << 13, x ^= x >> 7, x ^= x << 17;
  return *state = x;
}

void rxk_shuffle_slots(int32_t *slot, int64_t n, int64_t nslots, uint64_t *rng) {
  int32_t *perm = base_malloc(sizeof(int32_t) * (size_t)nslots);
  for (int64_t x = 0; x < nslots; x++) perm[x] = (int32_t)x;
  for (int64_t x = nslots - 1; x > 0; x--) {
    int64_t y = (int64_t)(rxk_xorshift(rng) % (uint64_t)(x + 1));
    int32_t tmp = perm[x];
    perm[x] = perm[y];
    perm[y] = tmp;
  }
  for (int64_t x = 0; x < n; x++) slot[x] = perm[x];
  free(perm);
}

void rxk_oneop_main_begin(int argc, char **argv, const char **out_filter, rxk_backend *vk) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  *out_filter = argc > 2 ? argv[2] : getenv("RX_KERNEL_FILTER");
  unsetenv("LD_PRELOAD");
  rxk_rt_open(vk, "vulkan:0");
}

int rxk_oneop_main_end(rxk_stats *st, rxk_backend *vk, const char *name) {
  char why[600];
  if (!rxk_rt_close(vk, why, sizeof why)) rxk_fail(st, "Vulkan: %s", why);
  printf("%s: %d passed, %d failed, %d skipped\n", name, st->passed, st->failed, st->skipped);
  return st->failed ? 1 : 0;
}
#endif
