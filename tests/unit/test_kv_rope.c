/* kv_append_rope (ops/kv_rope.c), checked against a naive reference written here in plain C
 * (double precision, from docs/ops.md: kv_append of rope(reshape(k)) and reshape(v)): the new
 * keys rotated (rotate_half with cos and sin at each token) and the values written into a paged
 * KV cache at shuffled, non-contiguous slots, in place (every other slot keeps its value); the keys
 * and values read at column offsets of wider rows (k_offset, v_offset: the fused q/k/v
 * projection's rows, where q's heads come first). With q (argument 7, q_heads H): the queries
 * rotated as well, a second output [N, H, D] (not in place), read from column q_offset of q's
 * rows: the fused projection's layout (q first, then k, then v) or a separate q projection.
 *
 * The program is legalized from a one-op graph, then for every target (cuda sm_80 and sm_90,
 * vulkan-lavapipe, vulkan, metal-apple7, vulkan-nvidia) scheduled and generated (support_oneop.c:
 * NVRTC, shaderc and spirv-val where present); every case then runs in the reference
 * interpreter, as CUDA C and MSL in the SIMT emulator, and on Vulkan (lavapipe here) under the
 * validation layer, and the whole cache is compared with the reference. With q, the one-op graph
 * is also legalized whole (passes/legalize.c: an in-place call_tensor with out= for the roped
 * queries) and run by the graph interpreter, whose result is the tuple (pages, roped q).
 *
 * Cases: 1, 7, 33 and 100 tokens; (kv heads, head dim) (2, 64), (1, 16), (8, 128) (1024
 * elements a token: eight per thread) and (3, 96) (288: a partial last step); f16, f32, bf16;
 * rows of the keys' and values' width and rows of (H + 2 KVH) * D with the keys and values after
 * H = 2 KVH query heads (as the fused projection's rows) or in other places. With q: GQA groups
 * of 4 (H 8, KVH 2, D 64, fused rows), 8 (H 32, KVH 4, D 128: Llama 3's), 2 (H 6, KVH 3, D 96,
 * fused) and 3 (H 3, KVH 1, D 18: half a head odd, q from column 36 of rows of 90), and one query
 * head a kv head (H = KVH = 1, D 128).
 * Tolerance, as normalized error max|got - want| / max(1, max|want|): f32 1e-5, f16 2e-3 (the
 * value is the f32 math rounded once to f16: within 2^-11 relative), bf16 8e-3 (2^-9); the
 * values (v, and the slots not written) must come back exactly, which these bounds include; the
 * roped queries have the keys' tolerances.
 *
 * usage: test_kv_rope TESTS_DIR [FILTER] */
/* test-needs: runtime */
#include "support_oneop.h"

#include "interp/graph_interp.h"
#include "interp/interp.h"
#include "passes/passes.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PAGE        16 /* tokens per page of the KV cache (docs/llm.md) */
#define SPARE_PAGES 3  /* pages no token goes to: their contents must stay as they are */
#define TOL_F32     1e-5
#define TOL_F16     2e-3
#define TOL_BF16    8e-3

static rxk_stats st;
static rxk_backend vk = {.kind = RX_RT_BACKEND_VULKAN};
static const char *filter;

static uint64_t rng = 0x2545f4914f6cdd1dull; /* rxk_xorshift's state */

/* The normalized error of got (the pages, or the roped queries: what) against want; false with a
 * message past the tolerance of dtype t. */
static bool compare1(const rx_interp_arg *got, const char *what, rx_dtype t, const double *want,
                     char *msg, size_t n) {
  size_t cnt = rxk_numel(got), at = 0;
  double maxdiff = 0, maxref = 1;
  for (size_t k = 0; k < cnt; k++) {
    double d = fabs(rxk_load_elem(got->data, t, k) - want[k]);
    if (!(d <= maxdiff)) maxdiff = d, at = k;
    if (fabs(want[k]) > maxref) maxref = fabs(want[k]);
  }
  double tol = t == RX_DTYPE_F32 ? TOL_F32 : t == RX_DTYPE_BF16 ? TOL_BF16 : TOL_F16;
  if (maxdiff / maxref <= tol) return true;
  snprintf(msg, n, "%s: normalized error %.3g > %.0e (element %zu: got %.6g, want %.6g)", what,
           maxdiff / maxref, tol, at, rxk_load_elem(got->data, t, at), want[at]);
  return false;
}

/* The expected outputs: the pages, and with q the roped queries (the program's last output). */
typedef struct want {
  int pages, qr;   /* their parameters' indices (qr -1 without q) */
  double *wp, *wq; /* their values */
} want_t;

static bool compare(const rxk_buffers *got, rx_dtype t, const want_t *w, char *msg, size_t n) {
  if (!compare1(&got->arg[w->pages], "pages", t, w->wp, msg, n)) return false;
  return w->qr < 0 || compare1(&got->arg[w->qr], "roped q", t, w->wq, msg, n);
}

/* Runs the program on `in` in the interpreter, the SIMT emulator and on Vulkan, and compares
 * the pages with want. */
static void run_case(rxk_oneop *p, const rxk_env *e, const rxk_buffers *in, const want_t *want,
                     rx_dtype t, const char *at) {
  char why[512];
  rxk_buffers got;
  rxk_copy_buffers(in, &got);
  rx_interp_opts o = {.fragments = false};
  rx_status s = interp_run(p->m, p->f, got.arg, got.n, &o);
  if (s)
    rxk_fail(&st, "%s at %s: interpreter: %s", p->what, at, rx_status_message(s));
  else if (!compare(&got, t, want, why, sizeof why))
    rxk_fail(&st, "%s at %s: interpreter: %s", p->what, at, why);
  else
    st.passed++;
  rx_status_free(s);
  rxk_free_buffers(&got);
  for (int i = 0; i < RXK_ONEOP_TARGETS; i++) {
    rxk_prepared *tp = &p->tp[i];
    if (!tp->ok || !tp->emulate) continue;
    rxk_copy_buffers(in, &got);
    if (!rxk_run_simt(tp, e, &got, why, sizeof why))
      rxk_fail(&st, "%s at %s: %s", tp->what, at, why);
    else if (!compare(&got, t, want, why, sizeof why))
      rxk_fail(&st, "%s at %s: emulated %s: %s", tp->what, at,
               tp->t->kind == RX_TARGET_CUDA ? "CUDA C" : "MSL", why);
    else
      st.passed++;
    rxk_free_buffers(&got);
  }
  if (!p->lib) {
    st.skipped++;
    return;
  }
  rxk_copy_buffers(in, &got);
  s = rxk_rt_run(&vk, p->lib, p->f, e, &got, 0, NULL);
  if (s)
    rxk_fail(&st, "%s at %s: Vulkan: %s", p->what, at, rx_status_message(s));
  else if (!compare(&got, t, want, why, sizeof why))
    rxk_fail(&st, "%s at %s: Vulkan (%s): %s", p->what, at, vk.target.name, why);
  else
    st.passed++;
  rx_status_free(s);
  rxk_free_buffers(&got);
}

/* rope's rotation of element j of a head whose elements are x[0 .. d) (rotate_half) */
static double rope1(const rx_interp_arg *x, rx_dtype t, size_t head, int64_t j, int64_t d, double c,
                    double s) {
  double partner = rxk_load_elem(x->data, t, head + (size_t)((j + d / 2) % d));
  return rxk_load_elem(x->data, t, head + (size_t)j) * c + (j < d / 2 ? -partner : partner) * s;
}

/* A case's layout: kv heads, head dim, the keys' and values' rows (width, offsets), the query
 * heads (0: no q) and the queries' rows (width, offset). */
typedef struct layout {
  int64_t kvh, d, width, koff, voff, h, qwidth, qoff;
} layout;

/* The cache after the call: the cache before, with each token's rotated keys and values at its
 * slot; with q, the roped queries [n, h, d]. */
static void reference(rxk_buffers *in, const rxk_oneop *p, rx_dtype t, int64_t n, const layout *y,
                      want_t *w) {
  rx_interp_arg *pa = rxk_oneop_named(p, in, "pages"), *ka = rxk_oneop_named(p, in, "k"),
                *va = rxk_oneop_named(p, in, "v");
  rx_interp_arg *ca = rxk_oneop_named(p, in, "cs"), *sa = rxk_oneop_named(p, in, "sn");
  const int32_t *slot = rxk_oneop_named(p, in, "slot")->data;
  int64_t kvh = y->kvh, d = y->d;
  size_t cnt = rxk_numel(pa);
  for (size_t x = 0; x < cnt; x++) w->wp[x] = rxk_load_elem(pa->data, t, x);
  for (int64_t x = 0; x < n; x++)
    for (int64_t h = 0; h < kvh; h++)
      for (int64_t j = 0; j < d; j++) {
        size_t row = (size_t)(x * y->width), e = (size_t)(h * d + j);
        double c = rxk_load_elem(ca->data, t, (size_t)(x * d + j));
        double s = rxk_load_elem(sa->data, t, (size_t)(x * d + j));
        int64_t pg = slot[x] / PAGE, off = slot[x] % PAGE;
        for (int v = 0; v < 2; v++)
          w->wp[(((pg * 2 + v) * kvh + h) * PAGE + off) * d + j] =
              v ? rxk_load_elem(va->data, t, row + (size_t)y->voff + e)
                : rope1(ka, t, row + (size_t)(y->koff + h * d), j, d, c, s);
      }
  if (!y->h) return;
  rx_interp_arg *qa = rxk_oneop_named(p, in, "q");
  for (int64_t x = 0; x < n; x++)
    for (int64_t h = 0; h < y->h; h++)
      for (int64_t j = 0; j < d; j++) {
        double c = rxk_load_elem(ca->data, t, (size_t)(x * d + j));
        double s = rxk_load_elem(sa->data, t, (size_t)(x * d + j));
        w->wq[(x * y->h + h) * d + j] =
            rope1(qa, t, (size_t)(x * y->qwidth + y->qoff + h * d), j, d, c, s);
      }
}

/* The one-op graph of a case: kv_append_rope with k and v rows of y's width (and q's rows). */
static void graph_text(char *text, size_t size, const char *t, const layout *y) {
  long long kvh = y->kvh, d = y->d;
  int n = snprintf(text, size,
                   "graph_fn main(pages: %s[p, 2, %lld, %d, %lld], k: %s[n, %lld], v: %s[n, %lld], "
                   "slot: i32[n], cs: %s[n, %lld], sn: %s[n, %lld]",
                   t, kvh, PAGE, d, t, (long long)y->width, t, (long long)y->width, t, d, t, d);
  if (y->h) n += snprintf(text + n, size - (size_t)n, ", q: %s[n, %lld]", t, (long long)y->qwidth);
  n += snprintf(text + n, size - (size_t)n,
                ") {\n  y = kv_append_rope(pages, k, v, slot, cs, sn%s, k_offset=%lld, "
                "v_offset=%lld",
                y->h ? ", q" : "", (long long)y->koff, (long long)y->voff);
  if (y->h)
    n += snprintf(text + n, size - (size_t)n, ", q_offset=%lld, q_heads=%lld", (long long)y->qoff,
                  (long long)y->h);
  snprintf(text + n, size - (size_t)n, ")\n  return y\n}\n");
}

/* Whether the program's parameters are k, v, slot, cs, sn (, q), out pages (, out roped q). */
static bool params_ok(const rx_tensor_fn *f, bool q) {
  static const char *const names[] = {"k", "v", "slot", "cs", "sn", "q"};
  int nin = q ? 6 : 5;
  if (f->nparams != nin + (q ? 2 : 1)) return false;
  for (int i = 0; i < f->nparams; i++) {
    const rx_param *p = f->params[i];
    if (p->kind != RX_PARAM_BUFFER || p->is_output != (i >= nin)) return false;
    if (i < nin ? strcmp(p->buf->name, names[i]) : i == nin && strcmp(p->buf->name, "pages"))
      return false;
  }
  return true;
}

/* The graph with q legalized whole (call_tensor(..., inplace=pages, out=T[n, h, d])) and run by
 * the graph interpreter on a copy of in: its result, the tuple (pages, roped q), against want. */
static void run_graph(const char *text, const rxk_oneop *p, const rxk_buffers *in,
                      const want_t *want, rx_dtype t, const char *at) {
  static const char *const args[] = {"pages", "k", "v", "slot", "cs", "sn", "q"};
  rx_module *m = rx_module_new();
  rx_diag d;
  base_diag_init(&d);
  bool ok = ir_parse_module(m, p->what, text, strlen(text), &d) && pass_legalize(m, &d) &&
            ops_module_normalize(m, &d) && ir_module_verify(m, &d);
  const rx_graph_fn *g = ok ? ir_module_graph_fn(m, "main") : NULL;
  const rx_node *call = g ? g->body.blocks[0]->bindings[0]->value : NULL;
  if (!call || call->kind != RX_NODE_CALL_TENSOR || !call->inplace || !call->fresh_out) {
    rxk_fail(&st, "%s: graph: not one in-place call_tensor with out=:\n%s", p->what,
             rx_diag_text(&d));
    base_diag_free(&d);
    rx_module_free(m);
    return;
  }
  base_diag_free(&d);
  rxk_buffers got;
  rxk_copy_buffers(in, &got); /* the pages are written in place */
  rx_ginterp_value inputs[7], result;
  for (int i = 0; i < 7; i++) {
    rx_interp_arg *a = rxk_oneop_named(p, &got, args[i]);
    inputs[i] = interp_graph_tensor(a->dtype, a->ndim, a->shape, a->data);
  }
  char why[512];
  rx_status s = interp_graph_run(m, g, inputs, 7, &result);
  if (s) {
    rxk_fail(&st, "%s at %s: graph interpreter: %s", p->what, at, rx_status_message(s));
  } else if (result.kind != RX_GV_TUPLE || result.nfields != 2) {
    rxk_fail(&st, "%s at %s: graph interpreter: the result is not (pages, roped q)", p->what, at);
  } else {
    rxk_buffers r = got; /* the result's fields where want looks for the outputs */
    for (int f = 0; f < 2; f++) r.arg[f ? want->qr : want->pages].data = result.fields[f].data;
    if (!compare(&r, t, want, why, sizeof why))
      rxk_fail(&st, "%s at %s: graph interpreter: %s", p->what, at, why);
    else if (!compare1(rxk_oneop_named(p, &got, "pages"), "pages written in place", t, want->wp,
                       why, sizeof why))
      rxk_fail(&st, "%s at %s: graph interpreter: %s", p->what, at, why);
    else
      st.passed++;
  }
  if (!s) interp_graph_value_free(&result);
  rx_status_free(s);
  rxk_free_buffers(&got);
  rx_module_free(m);
}

static void test_kv_append_rope(void) {
  /* rows of width (w times KVH * D), the keys from column ko, the values from vo (in KVH * D);
   * h query heads (0: none) in rows of qw * D from column qo * D */
  static const struct {
    int64_t kvh, d;
    rx_dtype t;
    int64_t w, ko, vo, h, qw, qo;
  } cfgs[] = {
      {2, 64, RX_DTYPE_F16, 1, 0, 0, 0, 0, 0},     {1, 16, RX_DTYPE_F32, 1, 0, 0, 0, 0, 0},
      {8, 128, RX_DTYPE_F32, 1, 0, 0, 0, 0, 0},    {3, 96, RX_DTYPE_BF16, 1, 0, 0, 0, 0, 0},
      {2, 64, RX_DTYPE_F16, 4, 2, 3, 0, 0, 0},     {3, 96, RX_DTYPE_F32, 4, 2, 3, 0, 0, 0},
      {1, 16, RX_DTYPE_BF16, 3, 1, 0, 0, 0, 0},    {2, 64, RX_DTYPE_F16, 6, 4, 5, 8, 12, 0},
      {4, 128, RX_DTYPE_BF16, 1, 0, 0, 32, 32, 0}, {3, 96, RX_DTYPE_F32, 4, 2, 3, 6, 12, 0},
      {1, 18, RX_DTYPE_F16, 1, 0, 0, 3, 5, 2},     {1, 128, RX_DTYPE_F32, 1, 0, 0, 1, 1, 0}};
  static const int64_t tokens[] = {1, 7, 33, 100};
  for (size_t i = 0; i < RX_ARRAY_LEN(cfgs); i++) {
    char text[800], what[160];
    const char *t = ir_dtype_name(cfgs[i].t);
    int64_t row = cfgs[i].kvh * cfgs[i].d;
    layout y = {cfgs[i].kvh,      cfgs[i].d, cfgs[i].w * row,        cfgs[i].ko * row,
                cfgs[i].vo * row, cfgs[i].h, cfgs[i].qw * cfgs[i].d, cfgs[i].qo * cfgs[i].d};
    graph_text(text, sizeof text, t, &y);
    int wn = snprintf(what, sizeof what, "kv_append_rope %s kvh=%lld d=%lld row=%lld k@%lld v@%lld",
                      t, (long long)y.kvh, (long long)y.d, (long long)y.width, (long long)y.koff,
                      (long long)y.voff);
    if (y.h)
      snprintf(what + wn, sizeof what - (size_t)wn, " q: h=%lld row=%lld @%lld", (long long)y.h,
               (long long)y.qwidth, (long long)y.qoff);
    rxk_oneop p;
    if (!rxk_oneop_build(&p, text, what, "kv_append_rope", filter, &st, &vk)) {
      rxk_oneop_free(&p);
      continue;
    }
    /* in place: the program's parameters are k, v, slot, cs, sn (, q) and out pages (, out the
     * roped queries, a fresh output) */
    if (!params_ok(p.f, y.h > 0)) {
      rxk_fail(&st, "%s: parameters are not (k, v, slot, cs, sn%s, out pages%s)", what,
               y.h ? ", q" : "", y.h ? ", out roped q" : "");
      rxk_oneop_free(&p);
      continue;
    }
    for (size_t k = 0; k < RX_ARRAY_LEN(tokens); k++) {
      int64_t n = tokens[k], np = (n + PAGE - 1) / PAGE + SPARE_PAGES;
      rxk_env e;
      rxk_buffers in;
      rxk_program_vars(p.f, &e);
      for (int v = 0; v < e.n; v++) e.values[v] = !strcmp(e.vars[v]->name, "n") ? n : np;
      char why[256], at[64];
      if (!rxk_make_buffers(p.f, &e, &in, why, sizeof why)) {
        rxk_fail(&st, "%s: %s", what, why);
        continue;
      }
      rxk_shuffle_slots(rxk_oneop_named(&p, &in, "slot")->data, n, np * PAGE, &rng);
      want_t w = {.pages = y.h ? p.f->nparams - 2 : p.f->nparams - 1,
                  .qr = y.h ? p.f->nparams - 1 : -1};
      w.wp = base_malloc(sizeof(double) * rxk_numel(&in.arg[w.pages]));
      w.wq = y.h ? base_malloc(sizeof(double) * rxk_numel(&in.arg[w.qr])) : NULL;
      reference(&in, &p, cfgs[i].t, n, &y, &w);
      snprintf(at, sizeof at, "n=%lld, p=%lld", (long long)n, (long long)np);
      run_case(&p, &e, &in, &w, cfgs[i].t, at);
      if (y.h) run_graph(text, &p, &in, &w, cfgs[i].t, at);
      free(w.wp);
      free(w.wq);
      rxk_free_buffers(&in);
    }
    rxk_oneop_free(&p);
  }
}

int main(int argc, char **argv) {
  rxk_oneop_main_begin(argc, argv, &filter, &vk);
  test_kv_append_rope();
  return rxk_oneop_main_end(&st, &vk, "kv_append_rope");
}
