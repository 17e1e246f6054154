/* Run-time checks of indices read from data (ir.h, RX_INTRIN_CHECK; docs/kernel-abi.md,
 * "Run-time checks"): take (ONNX Gather, the embedding of an LLM), take_along_axis
 * (GatherElements) and scatter_elements (ScatterElements) check each index against [-d, d) of
 * its axis (negative ones count from the end, as ONNX says) and read or write at the index
 * wrapped and clamped into [0, d), so a kernel never leaves its buffers.
 *
 * Each op is legalized from a one-op graph (named as the legalize pass names the call:
 * "main: binding `y` (take)"), then for every target (cuda sm_80 and sm_90, vulkan-lavapipe,
 * vulkan, metal-apple7, vulkan-nvidia) scheduled and generated (NVRTC, shaderc + spirv-val where
 * present). Every case runs in the reference interpreter, as CUDA C and MSL in the SIMT emulator
 * and on Vulkan (lavapipe) through the runtime under the validation layer:
 *   - indices in range, negative ones included: the output equals a reference computed here;
 *   - one index past the end (d) and one before the start (-d - 1): every backend fails with
 *     the op's message naming the binding, the value, the range and the axis;
 *   - in range again after a failure (the error buffer was cleared): passes.
 * TopK with k bound at run time (k = 3 and 5 of an axis of 5: the values against a reference;
 * k = 7: ONNX Runtime's "k argument [7] should not be greater than specified axis dim value
 * [5]"), and check_nonzero (ONNX Range's delta from data): a 0 fails with its message.
 *
 * usage: test_index_check TESTS_DIR [FILTER] */
/* test-needs: runtime */
#include "support_oneop.h"

#include "interp/interp.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static rxk_stats st;
static rxk_backend vk = {.kind = RX_RT_BACKEND_VULKAN};
static const char *filter;

typedef struct icase {
  const char *what, *text;
  int64_t m;          /* the symbolic length of the indices (0: none) */
  int64_t ok[12];     /* indices in range */
  int nidx;           /* indices in the index buffer */
  int64_t bad_at;     /* the index set out of range in the failing cases */
  int64_t extent;     /* d: the range is [-d, d) */
  const char *prefix; /* the message up to the value */
  const char *suffix; /* after the value */
} icase;

static const icase cases[] = {
    {"take axis 0 (i64 indices)",
     "graph_fn main(x: f32[10, 4], idx: i64[m]) -> f32[m, 4] {\n"
     "  dataflow {\n    y = take(x, idx, axis=0)\n  }\n  return y\n}\n",
     5,
     {0, 9, -1, -10, 3},
     5,
     1,
     10,
     "main: binding `y` (take): index ",
     " out of range [-10, 10) on axis 0"},
    {"take axis 1 (i32 indices)",
     "graph_fn main(x: f32[3, 7], idx: i32[m]) -> f32[3, m] {\n"
     "  dataflow {\n    g = take(x, idx, axis=1)\n  }\n  return g\n}\n",
     4,
     {6, -7, 0, -2},
     4,
     2,
     7,
     "main: binding `g` (take): index ",
     " out of range [-7, 7) on axis 1"},
    {"take_along_axis axis 1",
     "graph_fn main(x: f32[4, 6], idx: i64[4, 3]) -> f32[4, 3] {\n"
     "  dataflow {\n    y = take_along_axis(x, idx, axis=1)\n  }\n  return y\n}\n",
     0,
     {0, 5, -6, 1, 2, -1, 3, 4, 0, -3, 5, 2},
     12,
     7,
     6,
     "main: binding `y` (take_along_axis): index ",
     " out of range [-6, 6) on axis 1"},
    {"take axis 0 of one row",
     "graph_fn main(x: f32[1, 4], idx: i64[m]) -> f32[m, 4] {\n"
     "  dataflow {\n    y = take(x, idx, axis=0)\n  }\n  return y\n}\n",
     3,
     {0, -1, 0},
     3,
     2,
     1,
     "main: binding `y` (take): index ",
     " out of range [-1, 1) on axis 0"},
    {"scatter_elements axis 0",
     "graph_fn main(x: f32[8], idx: i64[3], u: f32[3]) -> f32[8] {\n"
     "  dataflow {\n    y = scatter_elements(x, idx, u, axis=0)\n  }\n  return y\n}\n",
     0,
     {7, -8, 2},
     3,
     0,
     8,
     "main: binding `y` (scatter_elements): index ",
     " out of range [-8, 8) on axis 0"},
};

static int64_t wrap(int64_t i, int64_t d) { return i < 0 ? i + d : i; }

/* The reference output of case c (index k: the case) from the inputs in b. */
static void reference(int k, const rxk_oneop *p, rxk_buffers *b, float *out) {
  const float *x = rxk_oneop_param(p, b, 0)->data;
  const rx_interp_arg *ia = rxk_oneop_param(p, b, 1);
  int64_t idx[12];
  for (int i = 0; i < cases[k].nidx; i++)
    idx[i] = ia->dtype == RX_DTYPE_I32 ? ((int32_t *)ia->data)[i] : ((int64_t *)ia->data)[i];
  switch (k) {
  case 0:
    for (int i = 0; i < 5; i++)
      for (int j = 0; j < 4; j++) out[i * 4 + j] = x[wrap(idx[i], 10) * 4 + j];
    break;
  case 1:
    for (int r = 0; r < 3; r++)
      for (int i = 0; i < 4; i++) out[r * 4 + i] = x[r * 7 + wrap(idx[i], 7)];
    break;
  case 2:
    for (int r = 0; r < 4; r++)
      for (int c = 0; c < 3; c++) out[r * 3 + c] = x[r * 6 + wrap(idx[r * 3 + c], 6)];
    break;
  case 3:
    for (int i = 0; i < 3; i++)
      for (int j = 0; j < 4; j++) out[i * 4 + j] = x[wrap(idx[i], 1) * 4 + j];
    break;
  default: {
    const float *u = rxk_oneop_param(p, b, 2)->data;
    memcpy(out, x, sizeof(float) * 8);
    for (int j = 0; j < 3; j++) out[wrap(idx[j], 8)] = u[j];
  }
  }
}

static void set_indices(const rxk_oneop *p, rxk_buffers *b, const int64_t *v, int n) {
  rx_interp_arg *ia = rxk_oneop_param(p, b, 1);
  for (int i = 0; i < n; i++) {
    if (ia->dtype == RX_DTYPE_I32)
      ((int32_t *)ia->data)[i] = (int32_t)v[i];
    else
      ((int64_t *)ia->data)[i] = v[i];
  }
}

static int out_index(const rxk_oneop *p) {
  for (int i = 0; i < p->f->nparams; i++)
    if (p->f->params[i]->kind == RX_PARAM_BUFFER && p->f->params[i]->is_output) return i;
  return -1;
}

/* The outcome of one backend's run: s NULL (nothing failed) or its message. */
static void expect(const char *what, const char *backend, const char *err, const char *want,
                   const float *got, const float *ref, size_t n) {
  if (want) {
    if (!err)
      rxk_fail(&st, "%s on %s: an index out of range passed; want \"%s\"", what, backend, want);
    else if (!strstr(err, want))
      rxk_fail(&st, "%s on %s: got \"%s\"; want \"%s\"", what, backend, err, want);
    else
      st.passed++;
    return;
  }
  if (err) {
    rxk_fail(&st, "%s on %s: %s", what, backend, err);
    return;
  }
  for (size_t i = 0; i < n; i++)
    if (got[i] != ref[i]) {
      rxk_fail(&st, "%s on %s: element %zu is %g, want %g", what, backend, i, got[i], ref[i]);
      return;
    }
  st.passed++;
}

typedef void (*ref_fn)(int k, const rxk_oneop *p, rxk_buffers *b, float *out);

/* Runs case k's program on `in` everywhere (ref_of: its reference, by k); want: the message
 * expected (NULL: success). */
static void run_all(int k, const char *name, ref_fn ref_of, rxk_oneop *p, const rxk_env *e,
                    const rxk_buffers *in, const char *want, const char *label) {
  char what[300], why[512];
  snprintf(what, sizeof what, "%s, %s", name, label);
  int o = out_index(p);
  size_t n = 1;
  for (int d = 0; d < in->arg[o].ndim; d++) n *= (size_t)in->arg[o].shape[d];
  float ref[64] = {0};
  rxk_buffers got;
  rxk_copy_buffers(in, &got);
  if (!want) ref_of(k, p, &got, ref); /* out-of-range indices have no reference to read */
  rx_status s = interp_run(p->m, p->f, got.arg, got.n, NULL);
  expect(what, "the interpreter", s ? rx_status_message(s) : NULL, want, got.arg[o].data, ref, n);
  rx_status_free(s);
  rxk_free_buffers(&got);
  for (int i = 0; i < RXK_ONEOP_TARGETS; i++) {
    rxk_prepared *tp = &p->tp[i];
    if (!tp->ok || !tp->emulate) continue;
    rxk_copy_buffers(in, &got);
    bool ok = rxk_run_simt(tp, e, &got, why, sizeof why);
    expect(what, tp->what, ok ? NULL : why, want, got.arg[o].data, ref, n);
    rxk_free_buffers(&got);
  }
  if (!p->lib) {
    st.skipped++;
    return;
  }
  rxk_copy_buffers(in, &got);
  s = rxk_rt_run(&vk, p->lib, p->f, e, &got, 0, NULL);
  expect(what, vk.target.name, s ? rx_status_message(s) : NULL, want, got.arg[o].data, ref, n);
  rx_status_free(s);
  rxk_free_buffers(&got);
}

static void test_case(int k) {
  const icase *c = &cases[k];
  rxk_oneop p;
  if (!rxk_oneop_build(&p, c->text, c->what, "prog", filter, &st, &vk)) {
    rxk_oneop_free(&p);
    return;
  }
  rxk_env e;
  rxk_program_vars(p.f, &e);
  for (int i = 0; i < e.n; i++)
    if (!strcmp(e.vars[i]->name, "m")) e.values[i] = c->m;
  rxk_buffers in;
  char why[256];
  if (!rxk_make_buffers(p.f, &e, &in, why, sizeof why)) {
    rxk_fail(&st, "%s: %s", c->what, why);
    rxk_oneop_free(&p);
    return;
  }
  int64_t idx[12];
  memcpy(idx, c->ok, sizeof idx);
  set_indices(&p, &in, idx, c->nidx);
  run_all(k, c->what, reference, &p, &e, &in, NULL, "indices in range");
  const int64_t bad[2] = {c->extent, -c->extent - 1};
  for (int b = 0; b < 2; b++) {
    char want[200];
    snprintf(want, sizeof want, "%s%lld%s", c->prefix, (long long)bad[b], c->suffix);
    memcpy(idx, c->ok, sizeof idx);
    idx[c->bad_at] = bad[b];
    set_indices(&p, &in, idx, c->nidx);
    run_all(k, c->what, reference, &p, &e, &in, want,
            b ? "an index before the start" : "an index past the end");
  }
  memcpy(idx, c->ok, sizeof idx);
  set_indices(&p, &in, idx, c->nidx);
  run_all(k, c->what, reference, &p, &e, &in, NULL, "in range after a failure");
  rxk_free_buffers(&in);
  rxk_oneop_free(&p);
}

/* ---- TopK with k bound at run time, check_nonzero (Range's delta) ---- */

/* topk: the k largest of each row of x [2, 5], descending (the values output) */
static void topk_ref(int k, const rxk_oneop *p, rxk_buffers *b, float *out) {
  const float *x = rxk_oneop_param(p, b, 0)->data;
  for (int r = 0; r < 2; r++) {
    bool used[5] = {false};
    for (int s = 0; s < k && s < 5; s++) {
      int best = -1;
      for (int j = 0; j < 5; j++)
        if (!used[j] && (best < 0 || x[r * 5 + j] > x[r * 5 + best])) best = j;
      used[best] = true;
      out[r * k + s] = x[r * 5 + best];
    }
  }
}

static void test_topk(void) {
  rxk_oneop p;
  const char *text = "graph_fn main(x: f32[2, 5], z: f32[d]) -> (f32[2, d], i64[2, d]) {\n"
                     "  dataflow {\n    t = topk(x, k=[d], axis=1)\n  }\n  return t\n}\n";
  if (!rxk_oneop_build(&p, text, "topk with k bound at run time", "prog", filter, &st, &vk)) {
    rxk_oneop_free(&p);
    return;
  }
  const int64_t ks[3] = {3, 7, 5};
  for (int c = 0; c < 3; c++) {
    rxk_env e;
    rxk_program_vars(p.f, &e);
    for (int i = 0; i < e.n; i++)
      if (!strcmp(e.vars[i]->name, "d")) e.values[i] = ks[c];
    rxk_buffers in;
    char why[256], label[64];
    if (!rxk_make_buffers(p.f, &e, &in, why, sizeof why)) {
      rxk_fail(&st, "topk: %s", why);
      break;
    }
    snprintf(label, sizeof label, "k = %lld", (long long)ks[c]);
    run_all((int)ks[c], p.what, topk_ref, &p, &e, &in,
            ks[c] > 5 ? "main: binding `t` (topk): k argument [7] should not be greater than "
                        "specified axis dim value [5] (axis 1)"
                      : NULL,
            label);
    rxk_free_buffers(&in);
  }
  rxk_oneop_free(&p);
}

/* check_nonzero of i64 x [4]: only its failure is compared through run_all (the values pass
 * through: checked in the interpreter by test_nonzero) */
static void nonzero_ref(int k, const rxk_oneop *p, rxk_buffers *b, float *out) {
  (void)k, (void)p, (void)b, (void)out;
}

static void test_nonzero(void) {
  rxk_oneop p;
  const char *text = "graph_fn main(x: i64[m]) -> i64[m] {\n  dataflow {\n"
                     "    y = check_nonzero(x, message=\"delta can not be zero!\")\n"
                     "  }\n  return y\n}\n";
  if (!rxk_oneop_build(&p, text, "check_nonzero", "prog", filter, &st, &vk)) {
    rxk_oneop_free(&p);
    return;
  }
  rxk_env e;
  rxk_program_vars(p.f, &e);
  for (int i = 0; i < e.n; i++)
    if (!strcmp(e.vars[i]->name, "m")) e.values[i] = 4;
  rxk_buffers in, got;
  char why[256];
  if (!rxk_make_buffers(p.f, &e, &in, why, sizeof why)) {
    rxk_fail(&st, "check_nonzero: %s", why);
    rxk_oneop_free(&p);
    return;
  }
  int64_t *x = rxk_oneop_param(&p, &in, 0)->data;
  const int64_t ok[4] = {3, -1, 7, 2}, bad[4] = {3, -1, 0, 2};
  memcpy(x, ok, sizeof ok);
  rxk_copy_buffers(&in, &got);
  rx_status s = interp_run(p.m, p.f, got.arg, got.n, NULL);
  if (s || memcmp(got.arg[out_index(&p)].data, ok, sizeof ok))
    rxk_fail(&st, "check_nonzero: the interpreter does not pass the values through%s%s",
             s ? ": " : "", s ? rx_status_message(s) : "");
  else
    st.passed++;
  rx_status_free(s);
  rxk_free_buffers(&got);
  memcpy(x, bad, sizeof bad);
  run_all(0, p.what, nonzero_ref, &p, &e, &in,
          "main: binding `y` (check_nonzero): delta can not be zero!", "an element 0");
  rxk_free_buffers(&in);
  rxk_oneop_free(&p);
}

int main(int argc, char **argv) {
  rxk_oneop_main_begin(argc, argv, &filter, &vk);
  for (int k = 0; k < (int)RX_ARRAY_LEN(cases); k++) test_case(k);
  test_topk();
  test_nonzero();
  return rxk_oneop_main_end(&st, &vk, "index checks");
}
