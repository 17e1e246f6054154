/* Graph passes: constant folding, CSE, DCE, pattern annotation of every program in
 * tests/kernels, and fusion of the models in tests/models: exact call_tensor counts
 * before and after fusion, and the fused modules (after fuse_ops, after fuse_tensor and after
 * dedup) give the same numbers as the unfused ones under the graph interpreter at several values
 * of every symbolic dimension. Every pass is followed by normalize + verify, and the fused module
 * prints and parses back.
 *
 * usage: test_passes TESTS_DIR */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "interp/graph_interp.h"
#include "ops/legalize.h"
#include "passes/passes.h"

static const char *tests_dir = "tests";

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static float frand(void) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return (float)((double)(rng >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

static bool check_module(rx_module *m, const char *what) {
  rx_diag d;
  base_diag_init(&d);
  bool ok = ops_module_normalize(m, &d) && ir_module_verify(m, &d);
  CHECK_MSG(ok, "%s: module invalid:\n%s", what, rx_diag_text(&d));
  base_diag_free(&d);
  return ok;
}

static rx_module *parse_text(const char *name, const char *text) {
  rx_module *m = rx_module_new();
  rx_diag d;
  base_diag_init(&d);
  bool ok = ir_parse_module(m, name, text, strlen(text), &d) && ops_module_normalize(m, &d) &&
            ir_module_verify(m, &d);
  CHECK_MSG(ok, "%s rejected:\n%s", name, rx_diag_text(&d));
  base_diag_free(&d);
  if (!ok) {
    rx_module_free(m);
    return NULL;
  }
  return m;
}

static char *read_test(const char *rel) {
  char path[1024];
  snprintf(path, sizeof path, "%s/%s", tests_dir, rel);
  char *text = NULL;
  size_t len = 0;
  rx_status s = base_read_file(path, &text, &len);
  CHECK_MSG(!s, "read %s: %s", path, rx_status_message(s));
  rx_status_free(s);
  return text;
}

static bool run_pass(rx_module *m, bool (*pass)(rx_module *, rx_diag *), const char *name) {
  rx_diag d;
  base_diag_init(&d);
  bool ok = pass(m, &d);
  CHECK_MSG(ok, "pass %s failed:\n%s", name, rx_diag_text(&d));
  base_diag_free(&d);
  return ok && check_module(m, name);
}

/* ---- counting ---- */
static int count_seq(const rx_seq *s, rx_node_kind kind) {
  int c = 0;
  for (int b = 0; b < s->nblocks; b++)
    for (int i = 0; i < s->blocks[b]->nbindings; i++) {
      const rx_node *n = s->blocks[b]->bindings[i]->value;
      if (n->kind == kind) c++;
      if (n->kind == RX_NODE_IF) c += count_seq(n->then_seq, kind) + count_seq(n->else_seq, kind);
    }
  return c;
}
static int count_calls(rx_module *m, const char *fn, rx_node_kind kind) {
  rx_graph_fn *g = ir_module_graph_fn(m, fn);
  return g ? count_seq(&g->body, kind) : -1;
}
static int count_items(rx_module *m, rx_item_kind k) {
  int c = 0;
  for (size_t i = 0; i < m->items.len; i++) c += m->items.data[i].kind == k;
  return c;
}

static char *print_module(rx_module *m) {
  rx_strbuf b = {0};
  ir_module_print(&b, m);
  return base_strbuf_take(&b);
}

/* ---- annotation of tests/kernels ---- */
static void test_annotate_kernels(void) {
  static const struct {
    const char *file, *fn;
    rx_pattern p;
  } want[] = {
      {"kernels/broadcast_add.rx", "broadcast_add", RX_PATTERN_BROADCAST},
      {"kernels/elementwise.rx", "ew_chain", RX_PATTERN_ELEMWISE},
      {"kernels/elementwise.rx", "ew_chain_dyn", RX_PATTERN_ELEMWISE},
      {"kernels/elementwise.rx", "ew_inverse_trig", RX_PATTERN_ELEMWISE},
      {"kernels/gemm.rx", "gemm", RX_PATTERN_OUT_FUSABLE},
      {"kernels/gemm.rx", "gemm_dyn", RX_PATTERN_OUT_FUSABLE},
      {"kernels/gemm_f16.rx", "gemm_f16_f32", RX_PATTERN_OUT_FUSABLE},
      {"kernels/gemm_f16.rx", "gemm_f16", RX_PATTERN_OUT_FUSABLE},
      {"kernels/gemm_f16.rx", "gemm_kn_bias", RX_PATTERN_REDUCTION},     /* a bias in the init */
      {"kernels/gemm_f16.rx", "gemm_nt_bias_m", RX_PATTERN_OUT_FUSABLE}, /* the bias after */
      {"kernels/gemv.rx", "gemv", RX_PATTERN_OUT_FUSABLE},
      {"kernels/layer_norm.rx", "layer_norm", RX_PATTERN_REDUCTION},
      {"kernels/rms_norm.rx", "rms_norm", RX_PATTERN_REDUCTION},
      {"kernels/row_sum_scale.rx", "row_sum_scale", RX_PATTERN_REDUCTION},
      {"kernels/softmax.rx", "softmax", RX_PATTERN_REDUCTION},
      {"kernels/transpose.rx", "transpose", RX_PATTERN_INJECTIVE},
  };
  for (size_t i = 0; i < RX_ARRAY_LEN(want); i++) {
    char *text = read_test(want[i].file);
    if (!text) continue;
    rx_module *m = parse_text(want[i].file, text);
    free(text);
    if (!m) continue;
    rx_diag d;
    base_diag_init(&d);
    pass_annotate(m, &d);
    base_diag_free(&d);
    rx_tensor_fn *t = ir_module_tensor_fn(m, want[i].fn);
    CHECK_MSG(t && t->pattern == want[i].p, "%s: pattern %s, expected %s", want[i].fn,
              t ? ir_pattern_name(t->pattern) : "(missing)", ir_pattern_name(want[i].p));
    rx_module_free(m);
  }
  /* every program of tests/kernels is covered above */
  static const char *files[] = {"kernels/broadcast_add.rx", "kernels/elementwise.rx",
                                "kernels/gemm.rx",          "kernels/gemm_f16.rx",
                                "kernels/gemv.rx",          "kernels/layer_norm.rx",
                                "kernels/rms_norm.rx",      "kernels/row_sum_scale.rx",
                                "kernels/softmax.rx",       "kernels/transpose.rx"};
  int total = 0;
  for (size_t i = 0; i < RX_ARRAY_LEN(files); i++) {
    char *text = read_test(files[i]);
    if (!text) continue;
    rx_module *m = parse_text(files[i], text);
    free(text);
    if (m) total += count_items(m, RX_ITEM_TENSOR);
    rx_module_free(m);
  }
  CHECK_MSG(total == (int)RX_ARRAY_LEN(want), "tests/kernels has %d programs, %d expected", total,
            (int)RX_ARRAY_LEN(want));

  /* hand-written programs of the other kinds */
  const char *src = "tensor_fn bcast_row(a: f32[n, m], b: f32[n], out y: f32[n, m]) {\n"
                    "  for i in 0..n, j in 0..m {\n    y[i, j] = a[i, j] * b[i]\n  }\n}\n"
                    "tensor_fn shift(a: f32[n], out y: f32[n]) {\n"
                    "  for i in 0..n {\n    y[i] = a[(i + 1) % n]\n  }\n}\n"
                    "tensor_fn guarded(a: f32[n], out y: f32[n]) {\n"
                    "  for i in 0..n {\n    if i < 3 {\n      y[i] = a[i]\n    }\n  }\n}\n"
                    "tensor_fn bound(a: f32[n], out y: f32[n]) {\n"
                    "  for i in 0..n bind(blockIdx.x) {\n    y[i] = a[i]\n  }\n}\n"
                    "tensor_fn colsum(a: f32[n, m], out y: f32[m]) {\n"
                    "  for j in 0..m {\n    reduce i in 0..n {\n      init { y[j] = 0.0 }\n"
                    "      update { y[j] = y[j] + a[i, j] }\n    }\n  }\n}\n";
  rx_module *m = parse_text("<kinds>", src);
  if (m) {
    rx_diag d;
    base_diag_init(&d);
    pass_annotate(m, &d);
    base_diag_free(&d);
    static const struct {
      const char *fn;
      rx_pattern p;
    } k[] = {{"bcast_row", RX_PATTERN_BROADCAST},
             {"shift", RX_PATTERN_INJECTIVE},
             {"guarded", RX_PATTERN_OPAQUE},
             {"bound", RX_PATTERN_OPAQUE},
             {"colsum", RX_PATTERN_REDUCTION}};
    for (size_t i = 0; i < RX_ARRAY_LEN(k); i++) {
      rx_tensor_fn *t = ir_module_tensor_fn(m, k[i].fn);
      CHECK_MSG(t && t->pattern == k[i].p, "%s: pattern %s, expected %s", k[i].fn,
                t ? ir_pattern_name(t->pattern) : "?", ir_pattern_name(k[i].p));
    }
    rx_module_free(m);
  }
}

/* ---- fold / cse / dce ---- */
static const char *unit_src =
    "tensor_fn add(a: f32[n, 4], b: f32[n, 4], out y: f32[n, 4]) {\n"
    "  for i in 0..n, j in 0..4 {\n    y[i, j] = a[i, j] + b[i, j]\n  }\n}\n"
    "tensor_fn neg(a: f32[n, 4], out y: f32[n, 4]) {\n"
    "  for i in 0..n, j in 0..4 {\n    y[i, j] = -a[i, j]\n  }\n}\n"
    "tensor_fn unused(a: f32[n, 4], out y: f32[n, 4]) {\n"
    "  for i in 0..n, j in 0..4 {\n    y[i, j] = a[i, j]\n  }\n}\n"
    "graph_fn main(x: f32[n, 4], z: f32[n, 4]) -> f32[n, 4] where n <= 100 {\n"
    "  dataflow {\n"
    "    k = prim(min(n, 100) + 1)\n"
    "    sh = [max(n, 0), 2 * 2]\n"
    "    a = call_tensor(add, x, z, out=f32[min(n, 4096), 4])\n"
    "    b = call_tensor(add, x, z, out=f32[n, 4])\n"
    "    c = call_tensor(add, a, b, out=f32[n, 4])\n"
    "    dead1 = call_tensor(neg, c, out=f32[n, 4])\n"
    "    dead2 = call_tensor(neg, dead1, out=f32[n, 4])\n"
    "    t = (c, k, sh)\n"
    "    u = t.0\n"
    "  }\n"
    "  return u\n"
    "}\n";

static const rx_binding *find_binding(rx_graph_fn *g, const char *name) {
  for (int b = 0; b < g->body.nblocks; b++)
    for (int i = 0; i < g->body.blocks[b]->nbindings; i++)
      if (!strcmp(g->body.blocks[b]->bindings[i]->var->name, name))
        return g->body.blocks[b]->bindings[i];
  return NULL;
}

static double max_abs_diff(const rx_ginterp_value *a, const rx_ginterp_value *b, double *scale);

static void test_fold_cse_dce(void) {
  rx_module *m = parse_text("<unit>", unit_src);
  rx_module *ref = parse_text("<unit>", unit_src);
  if (!m || !ref) return;
  rx_expr_ctx *ctx = m->ctx;
  const rx_expr *n = sym_expr_var(ctx, "n");
  rx_graph_fn *g = ir_module_graph_fn(m, "main");
  /* fold */
  if (run_pass(m, pass_fold, "fold")) {
    const rx_binding *k = find_binding(g, "k"), *sh = find_binding(g, "sh"),
                     *a = find_binding(g, "a");
    CHECK_MSG(k && k->value->kind == RX_NODE_PRIM &&
                  k->value->prim == sym_expr_add(ctx, n, sym_expr_const(ctx, 1)),
              "fold: prim(min(n, 100) + 1) is not n + 1");
    CHECK_MSG(sh && sh->value->kind == RX_NODE_SHAPE && sh->value->dims[0] == n &&
                  rx_expr_is_const(sh->value->dims[1], 4),
              "fold: the shape literal is not [n, 4]");
    CHECK_MSG(a && a->value->out->shape[0] == n, "fold: out= of a is not f32[n, 4]");
    const rx_binding *t = find_binding(g, "t");
    CHECK_MSG(t && t->value->args[1]->kind == RX_NODE_PRIM &&
                  t->value->args[2]->kind == RX_NODE_SHAPE,
              "fold: the literals were not propagated into the tuple");
  }
  /* cse: a and b are the same call now (out= folded) */
  if (run_pass(m, pass_cse, "cse")) {
    CHECK_MSG(count_calls(m, "main", RX_NODE_CALL_TENSOR) == 4, "cse: %d calls, 4 expected",
              count_calls(m, "main", RX_NODE_CALL_TENSOR));
    const rx_binding *c = find_binding(g, "c");
    CHECK_MSG(!find_binding(g, "b") && c && c->value->args[0]->var == c->value->args[1]->var,
              "cse: b not replaced by a");
  }
  /* dce: dead2 then dead1, k and sh stay (used by t), unused program removed */
  if (run_pass(m, pass_dce, "dce")) {
    CHECK_MSG(!find_binding(g, "dead1") && !find_binding(g, "dead2"),
              "dce: dead chain not removed");
    CHECK_MSG(count_calls(m, "main", RX_NODE_CALL_TENSOR) == 2, "dce: %d calls, 2 expected",
              count_calls(m, "main", RX_NODE_CALL_TENSOR));
    CHECK_MSG(!ir_module_tensor_fn(m, "unused") && !ir_module_tensor_fn(m, "neg") &&
                  ir_module_tensor_fn(m, "add"),
              "dce: programs not removed");
    CHECK_MSG(find_binding(g, "t") && find_binding(g, "u"), "dce: live bindings removed");
    CHECK_MSG(!find_binding(g, "k") && !find_binding(g, "sh"), "dce: propagated literals kept");
  }
  /* same numbers */
  int64_t nv = 5;
  float xs[20], zs[20];
  for (int i = 0; i < 20; i++) xs[i] = frand(), zs[i] = frand();
  int64_t shp[2] = {nv, 4};
  rx_ginterp_value in[2] = {interp_graph_tensor(RX_DTYPE_F32, 2, shp, xs),
                            interp_graph_tensor(RX_DTYPE_F32, 2, shp, zs)};
  rx_ginterp_value r1, r2;
  rx_status s1 = interp_graph_run(ref, ir_module_graph_fn(ref, "main"), in, 2, &r1);
  rx_status s2 = interp_graph_run(m, g, in, 2, &r2);
  CHECK_MSG(!s1 && !s2, "run: %s / %s", rx_status_message(s1), rx_status_message(s2));
  if (!s1 && !s2) {
    double sc;
    CHECK_MSG(max_abs_diff(&r1, &r2, &sc) == 0, "fold/cse/dce changed the result");
    CHECK_MSG(r1.kind == RX_GV_TENSOR && fabsf(((float *)r1.data)[3] - 2 * (xs[3] + zs[3])) < 1e-6,
              "unit: wrong value");
  }
  rx_status_free(s1);
  rx_status_free(s2);
  interp_graph_value_free(&r1);
  interp_graph_value_free(&r2);
  rx_module_free(m);
  rx_module_free(ref);
}

/* ---- graph interpreter errors ---- */
static void test_graph_interp_errors(void) {
  const char *src = "tensor_fn neg(a: f32[n, 4], out y: f32[n, 4]) {\n"
                    "  for i in 0..n, j in 0..4 {\n    y[i, j] = -a[i, j]\n  }\n}\n"
                    "graph_fn main(x: f32[n, 4]) -> f32[n, 4] where n <= 8 {\n"
                    "  dataflow {\n    y = call_tensor(neg, x, out=f32[n, 4])\n  }\n  return y\n}\n"
                    "graph_fn op(x: f32[n, 4]) -> f32[n, 4] {\n"
                    "  dataflow {\n    y = add(x, x)\n  }\n  return y\n}\n"
                    "graph_fn mc(x: f32[ndim=2]) -> f32[m, 4] {\n"
                    "  y = match_cast(x, f32[m, 4])\n  return y\n}\n";
  rx_module *m = parse_text("<errors>", src);
  if (!m) return;
  float buf[64] = {0};
  struct {
    const char *fn;
    int64_t s0, s1;
    const char *want;
  } cases[] = {
      {"main", 3, 5, "parameter 'x': expected f32[3, 4], got f32[3, 5]"},
      {"main", 9, 4, "fact n <= 8 does not hold"},
      {"op", 2, 4, "op add must be legalized first"},
      {"mc", 2, 3, "match_cast of 'y': expected f32[2, 4], got f32[2, 3]"},
  };
  for (size_t i = 0; i < RX_ARRAY_LEN(cases); i++) {
    int64_t shp[2] = {cases[i].s0, cases[i].s1};
    rx_ginterp_value in = interp_graph_tensor(RX_DTYPE_F32, 2, shp, buf);
    rx_ginterp_value out;
    rx_status s = interp_graph_run(m, ir_module_graph_fn(m, cases[i].fn), &in, 1, &out);
    CHECK_MSG(s && strstr(rx_status_message(s), cases[i].want), "%s: got '%s', expected '%s'",
              cases[i].fn, s ? rx_status_message(s) : "OK", cases[i].want);
    rx_status_free(s);
    interp_graph_value_free(&out);
  }
  rx_module_free(m);
}

/* ---- models ---- */
static double max_abs_diff(const rx_ginterp_value *a, const rx_ginterp_value *b, double *scale) {
  *scale = 0;
  if (a->kind != b->kind) return INFINITY;
  if (a->kind == RX_GV_TUPLE) {
    if (a->nfields != b->nfields) return INFINITY;
    double w = 0;
    for (int i = 0; i < a->nfields; i++) {
      double s, d = max_abs_diff(&a->fields[i], &b->fields[i], &s);
      w = d > w ? d : w;
      *scale = s > *scale ? s : *scale;
    }
    return w;
  }
  if (a->kind != RX_GV_TENSOR || a->dtype != RX_DTYPE_F32 || a->ndim != b->ndim) return INFINITY;
  for (int i = 0; i < a->ndim; i++)
    if (a->shape[i] != b->shape[i]) return INFINITY;
  double w = 0;
  int64_t n = interp_graph_numel(a);
  for (int64_t i = 0; i < n; i++) {
    double x = ((float *)a->data)[i], y = ((float *)b->data)[i];
    if (isnan(x) || isnan(y)) return INFINITY;
    w = fabs(x - y) > w ? fabs(x - y) : w;
    *scale = fabs(x) > *scale ? fabs(x) : *scale;
  }
  return w;
}

typedef struct model {
  const char *file;
  const char *sym; /* the symbolic dimension */
  int64_t values[3];
  int before, after; /* call_tensor bindings of main */
  int groups;        /* primitive functions made by fuse_ops */
  bool legalize;     /* written with ops: legalize first */
  int programs;      /* tensor programs after dedup; 0: not checked */
} model;

/* Runs main of a and b on the same random inputs with sym = v; compares. */
static void compare_runs(rx_module *a, rx_module *b, const model *md, int64_t v,
                         const char *stage) {
  rx_graph_fn *ga = ir_module_graph_fn(a, "main"), *gb = ir_module_graph_fn(b, "main");
  if (!ga || !gb) {
    CHECK_MSG(0, "%s: no main", md->file);
    return;
  }
  const rx_expr *sv = sym_expr_var(a->ctx, md->sym);
  rx_expr_env env = {&sv, &v, 1};
  rx_ginterp_value *in = base_calloc((size_t)ga->nparams + 1, sizeof *in);
  for (int i = 0; i < ga->nparams; i++) {
    const rx_sinfo *s = ga->params[i]->sinfo;
    int64_t shp[RX_MAX_NDIM];
    int64_t numel = 1;
    for (int d = 0; d < s->ndim; d++) {
      bool ok = sym_expr_eval(s->shape[d], &env, &shp[d]);
      CHECK_MSG(ok, "%s: cannot evaluate a parameter shape", md->file);
      numel *= shp[d];
    }
    float *data = malloc(sizeof *data * (size_t)(numel ? numel : 1));
    for (int64_t k = 0; k < numel; k++) data[k] = frand();
    in[i] = interp_graph_tensor(RX_DTYPE_F32, s->ndim, shp, data);
  }
  rx_ginterp_value ra, rb;
  rx_status sa = interp_graph_run(a, ga, in, ga->nparams, &ra);
  rx_status sb = interp_graph_run(b, gb, in, gb->nparams, &rb);
  CHECK_MSG(!sa, "%s (%s = %lld): unfused run: %s", md->file, md->sym, (long long)v,
            rx_status_message(sa));
  CHECK_MSG(!sb, "%s (%s = %lld): %s run: %s", md->file, md->sym, (long long)v, stage,
            rx_status_message(sb));
  if (!sa && !sb) {
    double scale, d = max_abs_diff(&ra, &rb, &scale);
    double err = d / (scale > 1e-30 ? scale : 1e-30);
    CHECK_MSG(err <= 1e-5, "%s (%s = %lld): %s differs: normalized error %g", md->file, md->sym,
              (long long)v, stage, err);
  }
  rx_status_free(sa);
  rx_status_free(sb);
  interp_graph_value_free(&ra);
  interp_graph_value_free(&rb);
  for (int i = 0; i < ga->nparams; i++) free(in[i].data);
  free(in);
}

static void test_model(const model *md) {
  char *text = read_test(md->file);
  if (!text) return;
  rx_module *ref = parse_text(md->file, text);
  rx_module *m = parse_text(md->file, text);
  free(text);
  if (!ref || !m) {
    rx_module_free(ref);
    rx_module_free(m);
    return;
  }
  if (md->legalize) {
    bool lok = run_pass(ref, pass_legalize, "legalize") && run_pass(m, pass_legalize, "legalize");
    if (!lok) {
      rx_module_free(ref);
      rx_module_free(m);
      return;
    }
  }
  int before = count_calls(m, "main", RX_NODE_CALL_TENSOR);
  CHECK_MSG(before == md->before, "%s: %d calls before fusion, %d expected", md->file, before,
            md->before);
  bool ok = run_pass(m, pass_fold, "fold") && run_pass(m, pass_cse, "cse") &&
            run_pass(m, pass_dce, "dce") && run_pass(m, pass_fuse_ops, "fuse_ops");
  if (ok) {
    int groups = 0;
    for (size_t i = 0; i < m->items.len; i++)
      groups +=
          m->items.data[i].kind == RX_ITEM_GRAPH && ((rx_graph_fn *)m->items.data[i].fn)->primitive;
    CHECK_MSG(groups == md->groups, "%s: %d groups, %d expected", md->file, groups, md->groups);
    for (int k = 0; k < 3; k++) compare_runs(ref, m, md, md->values[k], "fuse_ops");
  }
  ok = ok && run_pass(m, pass_fuse_tensor, "fuse_tensor");
  if (ok) {
    int after = count_calls(m, "main", RX_NODE_CALL_TENSOR);
    CHECK_MSG(after == md->after, "%s: %d calls after fusion, %d expected", md->file, after,
              md->after);
    CHECK_MSG(count_calls(m, "main", RX_NODE_CALL_GRAPH) == 0, "%s: graph calls left", md->file);
    for (int k = 0; k < 3; k++) compare_runs(ref, m, md, md->values[k], "fuse_tensor");
    ok = run_pass(m, pass_dce, "dce after fusion");
    /* dedup: programs equal up to names merged, the same numbers */
    if (ok && run_pass(m, pass_dedup, "dedup")) {
      int programs = 0;
      for (size_t i = 0; i < m->items.len; i++) programs += m->items.data[i].kind == RX_ITEM_TENSOR;
      CHECK_MSG(!md->programs || programs == md->programs,
                "%s: %d programs after dedup, %d expected", md->file, programs, md->programs);
      for (int k = 0; k < 3; k++) compare_runs(ref, m, md, md->values[k], "dedup");
    }
    /* prints and parses back to the same text */
    char *p1 = print_module(m);
    rx_module *back = parse_text("<printed>", p1);
    if (back) {
      char *p2 = print_module(back);
      CHECK_MSG(!strcmp(p1, p2), "%s: the fused module does not print back the same", md->file);
      if (getenv("RX_PRINT_FUSED")) fputs(p1, stdout);
      for (int k = 0; k < 3; k++) compare_runs(ref, back, md, md->values[k], "reparsed fused");
      free(p2);
      rx_module_free(back);
    } else {
      fputs(p1, stderr);
    }
    free(p1);
  }
  rx_module_free(ref);
  rx_module_free(m);
}

int main(int argc, char **argv) {
  if (argc > 1) tests_dir = argv[1];
  test_annotate_kernels();
  test_fold_cse_dce();
  test_graph_interp_errors();
  static const model models[] = {
      {"models/mlp.rx", "n", {1, 7, 33}, 6, 2, 2, false, 2},
      {"models/transformer.rx", "s", {1, 5, 17}, 16, 11, 4, false, 7},
      {"models/small_net.rx", "b", {1, 3, 10}, 8, 4, 3, false, 4},
      {"models/extra_dims.rx", "n", {1, 2, 5}, 3, 2, 1, false, 2},
      {"models/mlp_ops.rx", "n", {1, 4, 19}, 5, 2, 2, true, 2},
      {"models/decoder2.rx", "s", {1, 5, 17}, 52, 24, 10, true, 9},
  };
  for (size_t i = 0; i < RX_ARRAY_LEN(models); i++) test_model(&models[i]);
  return check_finish("test_passes");
}
