/* Auto-batching of independent calls (issue 18, ACRoBat): the batched form of a graph function
 * (passes/batch_fn.c) and the runtime batcher (runtime/autobatch.c), on the two recursive models
 * ACRoBat evaluates (tests/autobatch/acrobat_models.h), run on Vulkan (lavapipe in CI, under the
 * validation layer).
 *
 *   1. The pass: ops.def's batch column (every elementwise op has the broadcast rule, only
 *      pointwise ops do); the batched signatures of the cells; a function that meets most batching
 * rules (broadcast of a batched vector, softmax, sum with keepdims, permute by default, matmul of
 *      two batched operands, of a shared 3-D operand by a batched vector and of a shared matrix by
 *      a batched matrix, reshape, max over all axes, strided_slice, expand_dims, squeeze by
 *      default, concat), its batched call over 3 inputs equal to 3 calls of the original, and
 *      its index-array form (rx_batch_function_gather) over the same rows reversed equal to the
 *      batched call's rows reversed; errors
 *      that name the op, the binding and the function.
 *   2. A TreeLSTM (hidden 64) over 16 random parse trees of 1..30 leaves (seeded): through the
 *      batcher (one launch per tree level: as many as the tallest tree's height + 1, the
 *      first over every leaf) equal to one call per node within 2e-5, and both to a double
 *      reference within 1e-4.
 *   3. An LSTM (hidden 64) over sequences of lengths 1, 7, 16, 17, 100, its batched form bounded
 *      to 4 calls (`batch <= 4`): one batched call per step but two for the first (5 sequences),
 *      101 launches (17 batched; a round of one call runs the unbatched cell), equal to the
 *      per-sequence runs and the reference.
 *   Both models run twice through the batcher: the gather path (the cells' index-array forms,
 *      rx_batch_function_gather: rows of earlier outputs passed as a pool and an index array) and
 *      the copy path (rx_rt_batcher_set_gather off): equal within 1e-6, the same batches, gathers
 *      only on the gather path and fewer copy bytes there; and an LSTM over lengths 2, 1, 3 with
 *      its copies, copy bytes, gathers and views counted exactly on both paths.
 *   4. The batcher's errors: an unknown function, a dependency on a call never submitted or on an
 *      output a call does not have, a cycle, a wrong dtype or rank at submit, a wrong shape at run.
 *
 * usage: test_autobatch TESTS_DIR */
/* test-needs: runtime */
#include "../autobatch/acrobat_models.h"
#include "base/base.h"
#include "check.h"
#include "driver/driver.h"
#include "ir/ir.h"
#include "ops/ops.h"
#include "relaxc/compiler.h"
#include "support_runtime.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A function that meets most batching rules; m and ms are shared. Result: 44 values. */
static const char *mix_text =
    "graph_fn mix(x: f32[3, 4], v: f32[4], m: f32[2, 3, 4], ms: f32[3, 3]) -> f32[44] {\n"
    "  dataflow {\n"
    "    a = add(x, v)\n"
    "    s = softmax(a, axis=1)\n"
    "    r = sum(s, axes=[0], keepdims=true)\n"
    "    t = permute(x)\n"
    "    p = matmul(t, a)\n"
    "    q = matmul(m, v)\n"
    "    k = matmul(ms, x)\n"
    "    mx = max(x)\n"
    "    sl = strided_slice(x, axes=[1], begin=[1], end=[3])\n"
    "    sq = squeeze(expand_dims(sl, axes=[0]))\n"
    "    y = concat((reshape(p, [16]), reshape(q, [6]), reshape(r, [4]), reshape(k, [12]),\n"
    "                reshape(sq, [6])))\n"
    "    z = multiply(y, mx)\n"
    "  }\n"
    "  return z\n"
    "}\n";

static char *read_model(const char *tests, const char *name) {
  char path[1024];
  snprintf(path, sizeof path, "%s/autobatch/%s", tests, name);
  size_t len = 0;
  char *text = NULL;
  rx_status st = base_read_file(path, &text, &len);
  CHECK_MSG(!st, "%s", rx_status_message(st));
  rx_status_free(st);
  return text;
}

/* The module of the three functions and their batched forms (NULL after a failed check). */
static rx_module *make_module(const char *tree, const char *lstm) {
  rx_strbuf all = {0};
  base_strbuf_printf(&all, "%s\n%s\n%s", tree, lstm, mix_text);
  rx_module *m = rx_module_new();
  rx_diag diag;
  base_diag_init(&diag);
  bool ok = ir_parse_module(m, "acrobat", all.data, all.len, &diag) && diag.errors == 0;
  CHECK_MSG(ok, "parse: %s", rx_diag_text(&diag));
  base_diag_free(&diag);
  base_strbuf_free(&all);
  const char *tree_shared[] = {"w", "ul", "ur", "b"}, *lstm_shared[] = {"wx", "wh", "b"};
  const char *mix_shared[] = {"m", "ms"};
  struct {
    const char *fn, *out;
    const char *const *shared;
    size_t n;
    int64_t max; /* the LSTM's bound 4 splits its first step (5 sequences) in two batches */
  } jobs[] = {{"tree_cell", "tree_cell_batched", tree_shared, 4, 1024},
              {"lstm_cell", "lstm_cell_batched", lstm_shared, 3, 4},
              {"mix", "mix_batched", mix_shared, 2, 0}};
  for (size_t i = 0; ok && i < RX_ARRAY_LEN(jobs); i++) {
    rx_status st =
        rx_batch_function(m, jobs[i].fn, jobs[i].shared, jobs[i].n, jobs[i].max, jobs[i].out);
    char gname[64]; /* the cells' index-array forms (the batcher's gather path) */
    snprintf(gname, sizeof gname, "%s_gather", jobs[i].out);
    if (!st)
      st = rx_batch_function_gather(m, jobs[i].fn, jobs[i].shared, jobs[i].n, jobs[i].max, gname);
    CHECK_MSG(!st, "batch %s: %s", jobs[i].fn, rx_status_message(st));
    ok = !st;
    rx_status_free(st);
  }
  if (!ok) {
    rx_module_free(m);
    return NULL;
  }
  return m;
}

static void check_signatures(rx_module *m) {
  char *text = rx_module_to_text(m);
  const char *want[] = {
      ("graph_fn lstm_cell_batched(x: f32[batch, 64], h: f32[batch, 64], c: f32[batch, 64], wx: "
       "f32[64, 256], wh: f32[64, 256], b: f32[256]) -> (f32[batch, 64], f32[batch, 64]) where 1 "
       "<= batch, batch <= 4 {"),
      ("graph_fn tree_cell_batched(x: f32[batch, 64], hl: f32[batch, 64], cl: f32[batch, 64], hr: "
       "f32[batch, 64], cr: f32[batch, 64], w: f32[64, 320], ul: f32[64, 320], ur: f32[64, 320], "
       "b: f32[320]) -> (f32[batch, 64], f32[batch, 64])"),
      ("graph_fn mix_batched(x: f32[batch, 3, 4], v: f32[batch, 4], m: f32[2, 3, 4], ms: f32[3, "
       "3]) -> f32[batch, 44] where 1 <= batch {"),
      "split(g, sections=4, axis=1)",
      ("graph_fn lstm_cell_batched_gather(pool_x: f32[rows_x, 64], idx_x: i32[batch], pool_h: "
       "f32[rows_h, 64], idx_h: i32[batch], pool_c: f32[rows_c, 64], idx_c: i32[batch], wx: "
       "f32[64, 256], wh: f32[64, 256], b: f32[256]) -> (f32[batch, 64], f32[batch, 64]) where 1 "
       "<= rows_x, 1 <= rows_h, 1 <= rows_c, 1 <= batch, batch <= 4 {"),
      "x: f32[batch, 64] = take(pool_x, idx_x, axis=0)",
  };
  for (size_t i = 0; i < RX_ARRAY_LEN(want); i++)
    CHECK_MSG(text && strstr(text, want[i]), "the module lacks '%s':\n%s", want[i],
              text ? text : "");
  rx_free(text);
}

/* rx_batch_function on text fails with a message holding every one of want[]. */
static void check_pass_error(const char *text, const char *fn, const char *const *shared,
                             size_t nshared, const char *const *want, size_t nwant) {
  rx_module *m = rx_module_new();
  rx_diag diag;
  base_diag_init(&diag);
  bool ok = ir_parse_module(m, "err", text, strlen(text), &diag) && diag.errors == 0;
  CHECK_MSG(ok, "parse: %s", rx_diag_text(&diag));
  base_diag_free(&diag);
  if (ok) {
    rx_status st = rx_batch_function(m, fn, shared, nshared, 0, "out");
    CHECK_MSG(st, "batching %s succeeded", fn);
    for (size_t i = 0; st && i < nwant; i++)
      CHECK_MSG(strstr(rx_status_message(st), want[i]), "'%s' lacks '%s'", rx_status_message(st),
                want[i]);
    if (st) printf("refused as expected: %s\n", rx_status_message(st));
    CHECK_MSG(!ir_module_graph_fn(m, "out"), "a failed batch left its function in the module");
    rx_status_free(st);
  }
  rx_module_free(m);
}

/* ops.def's batch column: every elementwise op batches by broadcasting, only pointwise ops do,
 * and the ops of docs/autobatch.md's table have their rules. */
static void batch_rules(void) {
  int n = 0;
  const rx_op *const *ops = ops_op_all(&n);
  for (int i = 0; i < n; i++) {
    const rx_op *op = ops[i];
    if (op->pattern == RX_PATTERN_ELEMWISE)
      CHECK_MSG(op->batch == RX_BATCH_BROADCAST, "elementwise op %s has no broadcast rule",
                op->name);
    if (op->batch == RX_BATCH_BROADCAST)
      CHECK_MSG(op->pattern == RX_PATTERN_ELEMWISE || op->pattern == RX_PATTERN_BROADCAST,
                "op %s batches by broadcasting but is not pointwise", op->name);
  }
  static const struct {
    rx_op_id id;
    rx_batch_rule rule;
  } want[] = {
      {RX_OP_add, RX_BATCH_BROADCAST},   {RX_OP_where, RX_BATCH_BROADCAST},
      {RX_OP_matmul, RX_BATCH_MATMUL},   {RX_OP_reshape, RX_BATCH_RESHAPE},
      {RX_OP_sum, RX_BATCH_AXES},        {RX_OP_softmax, RX_BATCH_AXIS},
      {RX_OP_concat, RX_BATCH_AXIS0},    {RX_OP_take, RX_BATCH_TAKE},
      {RX_OP_permute, RX_BATCH_PERMUTE}, {RX_OP_squeeze, RX_BATCH_SQUEEZE},
      {RX_OP_batch_norm, RX_BATCH_NONE}, {RX_OP_det, RX_BATCH_NONE},
  };
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
    CHECK_MSG(ops[want[i].id]->batch == want[i].rule, "op %s: batch rule %d, expected %d",
              ops[want[i].id]->name, (int)ops[want[i].id]->batch, (int)want[i].rule);
}

static void pass_errors(void) {
  const char *det = "graph_fn d(x: f32[4, 4]) -> f32[] {\n  dataflow {\n    y = det(x)\n  }\n"
                    "  return y\n}\n";
  const char *w1[] = {"'d'", "det", "binding 'y'"};
  check_pass_error(det, "d", NULL, 0, w1, 3);
  const char *mixcat = "graph_fn c(x: f32[4], w: f32[4]) -> f32[8] {\n  dataflow {\n"
                       "    y = concat((x, w))\n  }\n  return y\n}\n";
  const char *shared_w[] = {"w"}, *w2[] = {"'c'", "mixes batched values"};
  check_pass_error(mixcat, "c", shared_w, 1, w2, 2);
  const char *shared_all[] = {"x", "w"}, *w3[] = {"depends on no batched parameter"};
  check_pass_error(mixcat, "c", shared_all, 2, w3, 1);
  const char *shared_zz[] = {"zz"}, *w4[] = {"no parameter 'zz'"};
  check_pass_error(mixcat, "c", shared_zz, 1, w4, 1);
  const char *w5[] = {"no graph function 'nope'"};
  check_pass_error(mixcat, "nope", NULL, 0, w5, 1);
}

static unsigned char *compile(rx_module *m, const rxk_backend *vk, size_t *len) {
  char why[1024];
  unsigned char *bytes = rxk_compile_artifact(m, &vk->target, len, why, sizeof why);
  CHECK_MSG(bytes != NULL, "compile: %s", why);
  return bytes;
}

static bool ok_status(rx_status s, const char *what) {
  CHECK_MSG(!s, "%s: %s", what, rx_status_message(s));
  rx_status_free(s);
  return !s;
}

/* mix_batched over 3 inputs against 3 calls of mix. */
static void run_mix(rx_rt_device *d, rx_rt_artifact *a) {
  enum { B = 3, NX = 12, NV = 4, NOUT = 44 };
  uint64_t seed = 7;
  float x[B * NX], v[B * NV], m[24], ms[9], got[B * NOUT], want[NOUT];
  ab_fill(&seed, x, B * NX, 1);
  ab_fill(&seed, v, B * NV, 1);
  ab_fill(&seed, m, 24, 1);
  ab_fill(&seed, ms, 9, 1);
  int64_t xs[3] = {B, 3, 4}, vs[2] = {B, 4}, mshape[3] = {2, 3, 4}, mss[2] = {3, 3};
  rx_rt_tensor *t[4] = {0};
  rx_rt_value *res = NULL;
  rx_status st = rx_rt_tensor_from_host(d, RX_DTYPE_F32, 3, xs, x, &t[0]);
  if (!st) st = rx_rt_tensor_from_host(d, RX_DTYPE_F32, 2, vs, v, &t[1]);
  if (!st) st = rx_rt_tensor_from_host(d, RX_DTYPE_F32, 3, mshape, m, &t[2]);
  if (!st) st = rx_rt_tensor_from_host(d, RX_DTYPE_F32, 2, mss, ms, &t[3]);
  if (!st) st = rx_rt_vm_call(a, "mix_batched", t, 4, &res);
  if (!st) st = rx_rt_tensor_read(rx_rt_value_tensor(res), got, sizeof got);
  rx_rt_value_release(res);
  /* the index-array form over the same pools, the rows reversed: row i is mix_batched's B-1-i */
  int32_t rev[B] = {2, 1, 0};
  int64_t bs[1] = {B};
  float ggot[B * NOUT];
  rx_rt_tensor *idx = NULL;
  res = NULL;
  if (!st) st = rx_rt_tensor_from_host(d, RX_DTYPE_I32, 1, bs, rev, &idx);
  rx_rt_tensor *g[6] = {t[0], idx, t[1], idx, t[2], t[3]};
  if (!st) st = rx_rt_vm_call(a, "mix_batched_gather", g, 6, &res);
  if (!st) st = rx_rt_tensor_read(rx_rt_value_tensor(res), ggot, sizeof ggot);
  rx_rt_value_release(res);
  rx_rt_tensor_release(idx);
  double gworst = 0;
  for (int i = 0; i < B && !st; i++)
    for (int j = 0; j < NOUT; j++) {
      double e = fabs((double)ggot[i * NOUT + j] - got[(B - 1 - i) * NOUT + j]);
      gworst = isnan(e) ? INFINITY : fmax(gworst, e);
    }
  if (!st) {
    printf("mix: the index-array form, rows reversed, vs the batched form: %.3g\n", gworst);
    CHECK_MSG(gworst <= 1e-6, "mix_batched_gather differs by %g", gworst);
  }
  double worst = 0;
  for (int i = 0; i < B && !st; i++) {
    rx_rt_tensor *one[4] = {0, 0, t[2], t[3]};
    st = rx_rt_tensor_from_host(d, RX_DTYPE_F32, 2, xs + 1, x + i * NX, &one[0]);
    if (!st) st = rx_rt_tensor_from_host(d, RX_DTYPE_F32, 1, vs + 1, v + i * NV, &one[1]);
    res = NULL;
    if (!st) st = rx_rt_vm_call(a, "mix", one, 4, &res);
    if (!st) st = rx_rt_tensor_read(rx_rt_value_tensor(res), want, sizeof want);
    for (int j = 0; j < NOUT && !st; j++) {
      double e = fabs((double)got[i * NOUT + j] - want[j]);
      worst = e > worst || isnan(e) ? (isnan(e) ? INFINITY : e) : worst;
    }
    rx_rt_value_release(res);
    rx_rt_tensor_release(one[0]);
    rx_rt_tensor_release(one[1]);
  }
  if (ok_status(st, "mix")) {
    printf("mix: batched over %d inputs vs one call each: max abs difference %.3g\n", B, worst);
    CHECK_MSG(worst <= 1e-5, "mix differs by %g", worst);
  }
  for (int i = 0; i < 4; i++) rx_rt_tensor_release(t[i]);
}

/* The largest |a - b| over n tensors of AB_H floats, and the largest |a - ref|. */
static bool compare(rx_rt_tensor **a, rx_rt_tensor **b, const double *ref, int n, double *out_ab,
                    double *out_ref) {
  *out_ab = *out_ref = 0;
  for (int i = 0; i < n; i++) {
    if (!a[i] || !b[i]) continue;
    float x[AB_H], y[AB_H];
    if (!ok_status(rx_rt_tensor_read(a[i], x, sizeof x), "read") ||
        !ok_status(rx_rt_tensor_read(b[i], y, sizeof y), "read"))
      return false;
    for (int k = 0; k < AB_H; k++) {
      double e1 = fabs((double)x[k] - y[k]), e2 = fabs((double)x[k] - ref[i * AB_H + k]);
      *out_ab = isnan(e1) ? INFINITY : fmax(*out_ab, e1);
      *out_ref = isnan(e2) ? INFINITY : fmax(*out_ref, e2);
    }
  }
  return true;
}

static void release_all(rx_rt_tensor **t, int n) {
  for (int i = 0; i < n; i++) rx_rt_tensor_release(t[i]);
  free(t);
}

/* The batcher's memory paths (acrobat_models.h's switches): neither (as before issue 36), the
 * gather path only, the planning only, both (the default). */
enum { MEM_NONE, MEM_GATHER, MEM_PLAN, MEM_BOTH };
static const char *const mem_names[] = {"neither", "gather only", "planning only", "both"};
static void set_paths(int k) {
  ab_no_gather = !(k & MEM_GATHER);
  ab_no_plan = !(k & MEM_PLAN);
}

/* The default paths (hb, stats) against the others (hc[MEM_NONE..MEM_PLAN], copied[...]) on one
 * model: the same results within 1e-6 and the same batches; by default fewer copy bytes than
 * with neither path and more operands passed without a copy (views and gathers). */
static void check_paths(const char *model, rx_rt_tensor **hb, rx_rt_tensor ***hc, int n,
                        const rx_rt_batcher_stats *stats, const rx_rt_batcher_stats *copied) {
  double *zero = calloc((size_t)n * AB_H, sizeof *zero);
  printf("%s: both paths: %zu copies (%zu bytes), %zu views, %zu gathers\n", model, stats->copies,
         stats->copy_bytes, stats->views, stats->gathers);
  for (int k = MEM_NONE; k <= MEM_PLAN; k++) {
    double e = 0, unused = 0;
    const rx_rt_batcher_stats *c = &copied[k];
    if (compare(hb, hc[k], zero, n, &e, &unused)) {
      printf("%s: %s: %zu copies (%zu bytes), %zu views, %zu gathers; results differ by %.3g\n",
             model, mem_names[k], c->copies, c->copy_bytes, c->views, c->gathers, e);
      CHECK_MSG(e <= 1e-6, "%s: both paths vs %s: %g", model, mem_names[k], e);
    }
    CHECK_MSG(stats->batched_calls == c->batched_calls && stats->launches == c->launches &&
                  stats->calls == c->calls,
              "%s: %zu/%zu batches, %zu/%zu launches (%s)", model, stats->batched_calls,
              c->batched_calls, stats->launches, c->launches, mem_names[k]);
    CHECK_MSG(!(k & MEM_GATHER) ? c->gathers == 0 : true, "%s: %zu gathers without the gather path",
              model, c->gathers);
  }
  free(zero);
  const rx_rt_batcher_stats *none = &copied[MEM_NONE];
  CHECK_MSG(stats->copy_bytes < none->copy_bytes, "%s: copy bytes %zu, not below %zu", model,
            stats->copy_bytes, none->copy_bytes);
  CHECK_MSG(stats->views + stats->gathers > none->views + none->gathers,
            "%s: %zu views and gathers, not above %zu", model, stats->views + stats->gathers,
            none->views + none->gathers);
}

/* The exact counts of a known case: an LSTM over lengths 2, 1, 3 (calls 0-1, 2, 3-5), one round
 * per step: batches [0, 2, 3] and [1, 4], then call 5 alone, which runs the unbatched cell
 * (run_single: a round of fewer than min batch 2 calls); rows of 256 bytes; x's are tensors of
 * the caller's, one a step. 3 launches on every path.
 * Neither path: step 0 stacks 3 x's (3 copies) and the zero state 3 times for h and c (a copy and
 * 2 doublings each), splits (h, c) (2 copies): 11 copies of 15 rows; step 1: 2 x's, h and c are
 * rows 0 and 2 of step 0's outputs (2 copies each), split 2: 8 copies of 10 rows; step 2: call 5
 * takes x as is, h and c (row 1 of step 1's outputs) as tensors of their own (a copy each), and
 * its two outputs are copied out of the VM's storage (a copy each): 4 copies of 4 rows. 23
 * copies of 29 rows.
 * Gather only (steps 0 and 1 take the index-array form): step 0: 3 x's, the zero state a gather
 * for h and c, split 2: 5 copies of 9 rows, 2 gathers; step 1: 2 x's, 2 gathers, split 2: 4 of
 * 6 rows; step 2 as above, 4 of 4 rows. 13 copies of 19 rows, 4 gathers.
 * Planning only: the outputs in consumer order (step 0: calls 0, 3, then 2, which nobody reads:
 * 3 runs of a row per output; step 1: call 4, then 1), so step 1 takes h and c as views: 15 + 6
 * + 4 = 25 copies of 25 rows, 2 views (call 5 alone takes row 0 as a tensor of its own: a copy).
 * Both: step 0 gathers the zero state (3 x copies and 6 split runs: 9 copies of 9 rows), steps 1
 * and 2 as planning only: 9 + 6 + 4 = 19 copies of 19 rows, 2 views, 2 gathers.
 * (Before the batcher ran a lone call unbatched, step 2 was a batch of one: 5, 3, 3 and 3 copies
 * there, the last two with 2 views or 3 gathers: 24/30, 11/17 with 7 gathers, 24/24 with 4 views,
 * 18/18 with 4 views and 2 gathers.) */
static void exact_counts(rx_rt_device *d, rx_rt_artifact *a) {
  const int lens[] = {2, 1, 3};
  static const struct {
    size_t copies, rows, views, gathers;
  } want[4] = {{23, 29, 0, 0}, {13, 19, 0, 4}, {25, 25, 2, 0}, {19, 19, 2, 2}};
  ab_seqs q;
  ab_seqs_make(&q, 1804, lens, 3);
  ab_weights w;
  ab_inputs in;
  rx_status st = ab_weights_make(d, 1805, 2, AB_LSTM_GATES, &w);
  if (!st) st = ab_inputs_seqs(d, &q, &in);
  rx_rt_tensor **hs = calloc((size_t)q.n, sizeof *hs);
  if (!st) st = ab_seqs_single(a, &q, &w, &in, hs);
  double ref[3 * AB_H];
  if (!st) ab_ref_seqs(&w, &q, ref);
  for (int k = MEM_NONE; k <= MEM_BOTH && ok_status(st, "LSTM 2, 1, 3"); k++) {
    rx_rt_tensor **hb = calloc((size_t)q.n, sizeof *hb);
    rx_rt_batcher_stats c;
    set_paths(k);
    st = ab_seqs_batched(a, &q, &w, &in, hb, &c);
    double e = 0, r = 0;
    if (ok_status(st, "LSTM 2, 1, 3") && compare(hb, hs, ref, q.n, &e, &r)) {
      printf("LSTM 2, 1, 3, %s: vs one at a time %.3g, vs double %.3g; %zu copies (%zu bytes), "
             "%zu views, %zu gathers\n",
             mem_names[k], e, r, c.copies, c.copy_bytes, c.views, c.gathers);
      CHECK_MSG(e <= 2e-5 && r <= 1e-4, "LSTM 2, 1, 3, %s: %g, %g", mem_names[k], e, r);
      CHECK_MSG(c.launches == 3 && c.copies == want[k].copies &&
                    c.copy_bytes == want[k].rows * 256 && c.views == want[k].views &&
                    c.gathers == want[k].gathers,
                "LSTM 2, 1, 3, %s: %zu launches, %zu copies of %zu bytes, %zu views, %zu gathers",
                mem_names[k], c.launches, c.copies, c.copy_bytes, c.views, c.gathers);
    }
    release_all(hb, q.n);
  }
  set_paths(MEM_BOTH);
  release_all(hs, q.n);
  ab_inputs_free(&in);
  ab_weights_free(&w);
  ab_seqs_free(&q);
}

static void run_tree(rx_rt_device *d, rx_rt_artifact *a) {
  ab_forest *f = malloc(sizeof *f);
  bool made = ab_forest_make(f, 18, 16, 30);
  CHECK_MSG(made, "forest over %d nodes", AB_MAX_NODES);
  ab_weights w;
  ab_inputs in;
  rx_status st = ab_weights_make(d, 1801, 3, AB_TREE_GATES, &w);
  if (!st) st = ab_inputs_forest(d, f, &in);
  rx_rt_tensor **hb = calloc((size_t)f->n, sizeof *hb), **hs = calloc((size_t)f->n, sizeof *hs);
  rx_rt_tensor **hc[3] = {0};
  rx_rt_batcher_stats stats, copied[3];
  for (int k = 0; k < 3 && !st; k++) { /* neither path, gather only, planning only (MEM_*) */
    hc[k] = calloc((size_t)f->n, sizeof *hc[k]);
    set_paths(k);
    st = ab_forest_batched(a, f, &w, &in, hc[k], &copied[k]);
  }
  set_paths(MEM_BOTH);
  if (!st) st = ab_forest_batched(a, f, &w, &in, hb, &stats);
  if (!st) st = ab_forest_single(a, f, &w, &in, hs);
  if (ok_status(st, "TreeLSTM")) {
    check_paths("TreeLSTM", hb, hc, f->n, &stats, copied);
    int leaves = 0;
    for (int i = 0; i < f->n; i++) leaves += f->left[i] < 0;
    double *ref = malloc(sizeof *ref * (size_t)f->n * AB_H), e_ab = 0, e_ref = 0, e_sref = 0;
    ab_ref_forest(&w, f, ref);
    if (compare(hb, hs, ref, f->n, &e_ab, &e_ref) && compare(hs, hb, ref, f->n, &e_ab, &e_sref)) {
      printf("TreeLSTM: %d trees, %d nodes (%d leaves), height %d: %zu batched calls (largest "
             "%zu) for %zu cells; batched vs one at a time %.3g, vs double %.3g (one at a time vs "
             "double %.3g)\n",
             f->nroots, f->n, leaves, f->max_height, stats.batched_calls, stats.max_batch,
             stats.calls, e_ab, e_ref, e_sref);
      CHECK_MSG(e_ab <= 2e-5, "batched vs single: %g", e_ab);
      CHECK_MSG(e_ref <= 1e-4 && e_sref <= 1e-4, "vs double: %g, %g", e_ref, e_sref);
    }
    CHECK_MSG(stats.calls == (size_t)f->n, "%zu calls for %d nodes", stats.calls, f->n);
    CHECK_MSG(stats.launches == (size_t)f->max_height + 1, "%zu launches for height %d",
              stats.launches, f->max_height);
    CHECK_MSG(stats.max_batch == (size_t)leaves, "largest batch %zu, leaves %d", stats.max_batch,
              leaves);
    CHECK_MSG(f->max_height >= 5, "a forest this shallow (%d) tests little", f->max_height);
    free(ref);
  }
  release_all(hb, f->n);
  release_all(hs, f->n);
  for (int k = 0; k < 3; k++) release_all(hc[k], f->n);
  ab_inputs_free(&in);
  ab_weights_free(&w);
  free(f->x);
  free(f);
}

static void run_rnn(rx_rt_device *d, rx_rt_artifact *a) {
  const int lens[] = {1, 7, 16, 17, 100};
  ab_seqs q;
  ab_seqs_make(&q, 1802, lens, 5);
  ab_weights w;
  ab_inputs in;
  rx_status st = ab_weights_make(d, 1803, 2, AB_LSTM_GATES, &w);
  if (!st) st = ab_inputs_seqs(d, &q, &in);
  rx_rt_tensor **hb = calloc((size_t)q.n, sizeof *hb), **hs = calloc((size_t)q.n, sizeof *hs);
  rx_rt_tensor **hc[3] = {0};
  rx_rt_batcher_stats stats, copied[3];
  for (int k = 0; k < 3 && !st; k++) {
    hc[k] = calloc((size_t)q.n, sizeof *hc[k]);
    set_paths(k);
    st = ab_seqs_batched(a, &q, &w, &in, hc[k], &copied[k]);
  }
  set_paths(MEM_BOTH);
  if (!st) st = ab_seqs_batched(a, &q, &w, &in, hb, &stats);
  if (!st) st = ab_seqs_single(a, &q, &w, &in, hs);
  if (ok_status(st, "LSTM")) {
    check_paths("LSTM", hb, hc, q.n, &stats, copied);
    double ref[5 * AB_H], e_ab = 0, e_ref = 0, e_sref = 0;
    ab_ref_seqs(&w, &q, ref);
    if (compare(hb, hs, ref, q.n, &e_ab, &e_ref) && compare(hs, hb, ref, q.n, &e_ab, &e_sref)) {
      printf("LSTM: lengths 1, 7, 16, 17, 100: %zu batched calls (largest %zu) for %zu steps; "
             "batched vs one at a time %.3g, vs double %.3g (one at a time vs double %.3g)\n",
             stats.batched_calls, stats.max_batch, stats.calls, e_ab, e_ref, e_sref);
      CHECK_MSG(e_ab <= 2e-5, "batched vs single: %g", e_ab);
      CHECK_MSG(e_ref <= 1e-4 && e_sref <= 1e-4, "vs double: %g, %g", e_ref, e_sref);
    }
    /* 101 launches: 17 batched (the first step's 4 of 5, steps 2-17), 84 of the unbatched cell
     * alone (the first step's fifth sequence, steps 18-100 of the longest) */
    CHECK_MSG(stats.calls == 141 && stats.launches == 101 && stats.batched_calls == 17 &&
                  stats.max_batch == 4,
              "%zu calls in %zu launches (%zu batched) of at most %zu", stats.calls, stats.launches,
              stats.batched_calls, stats.max_batch);
  }
  release_all(hb, q.n);
  release_all(hs, q.n);
  for (int k = 0; k < 3; k++) release_all(hc[k], q.n);
  ab_inputs_free(&in);
  ab_weights_free(&w);
  ab_seqs_free(&q);
}

/* st is an error whose message holds want; frees st. */
static void want_error(rx_status st, const char *what, const char *want) {
  CHECK_MSG(st, "%s: no error", what);
  if (!st) return;
  CHECK_MSG(strstr(rx_status_message(st), want), "%s: '%s' lacks '%s'", what, rx_status_message(st),
            want);
  printf("%s: refused as expected: %s\n", what, rx_status_message(st));
  rx_status_free(st);
}

static void batcher_errors(rx_rt_device *d, rx_rt_artifact *a) {
  ab_weights w;
  rx_status st = ab_weights_make(d, 5, 2, AB_LSTM_GATES, &w);
  float zero[65] = {0};
  int64_t s64[1] = {AB_H}, s65[1] = {65}, s2[2] = {1, AB_H};
  rx_rt_tensor *v = NULL, *v65 = NULL, *m = NULL, *iv = NULL;
  if (!st) st = rx_rt_tensor_from_host(d, RX_DTYPE_F32, 1, s64, zero, &v);
  if (!st) st = rx_rt_tensor_from_host(d, RX_DTYPE_F32, 1, s65, zero, &v65);
  if (!st) st = rx_rt_tensor_from_host(d, RX_DTYPE_F32, 2, s2, zero, &m);
  if (!st) st = rx_rt_tensor_from_host(d, RX_DTYPE_I32, 1, s64, zero, &iv);
  const bool shared[6] = {false, false, false, true, true, true};
  for (int kase = 0; kase < 7 && ok_status(st, "error setup"); kase++) {
    rx_rt_batcher *b = NULL;
    st = rx_rt_batcher_create(a, &b);
    if (!st) st = rx_rt_batcher_add_function(b, "lstm_cell", "lstm_cell_batched", shared, 6);
    if (!st) st = rx_rt_batcher_set_min_batch(b, 2); /* the batched form's errors: no timing */
    if (!ok_status(st, "batcher")) break;
    rx_rt_batch_arg args[6] = {{v, 0, 0},      {v, 0, 0},      {v, 0, 0},
                               {w.t[0], 0, 0}, {w.t[1], 0, 0}, {w.t[2], 0, 0}};
    switch (kase) {
    case 0:
      want_error(rx_rt_batcher_submit(b, "gru_cell", args, 6, NULL), "unknown function",
                 "no function 'gru_cell' registered");
      break;
    case 1: /* call 0 waits on call 1 and call 1 on call 0 */
      args[1] = (rx_rt_batch_arg){NULL, 1, 0};
      st = rx_rt_batcher_submit(b, "lstm_cell", args, 6, NULL);
      args[1] = (rx_rt_batch_arg){NULL, 0, 0};
      if (!st) st = rx_rt_batcher_submit(b, "lstm_cell", args, 6, NULL);
      if (ok_status(st, "submit")) want_error(rx_rt_batcher_run(b), "cycle", "a cycle");
      break;
    case 2:
      args[2] = (rx_rt_batch_arg){NULL, 7, 0};
      st = rx_rt_batcher_submit(b, "lstm_cell", args, 6, NULL);
      if (ok_status(st, "submit"))
        want_error(rx_rt_batcher_run(b), "missing call", "call 7, which was never submitted");
      break;
    case 3:
      st = rx_rt_batcher_submit(b, "lstm_cell", args, 6, NULL);
      args[1] = (rx_rt_batch_arg){NULL, 0, 2};
      if (!st) st = rx_rt_batcher_submit(b, "lstm_cell", args, 6, NULL);
      if (ok_status(st, "submit"))
        want_error(rx_rt_batcher_run(b), "missing output", "output 2 of call 0, which has 2");
      break;
    case 4:
      args[0].tensor = m;
      want_error(rx_rt_batcher_submit(b, "lstm_cell", args, 6, NULL), "rank",
                 "argument 0 is f32 of rank 2, expected f32 of rank 1");
      break;
    case 5:
      args[0].tensor = iv;
      want_error(rx_rt_batcher_submit(b, "lstm_cell", args, 6, NULL), "dtype",
                 "argument 0 is i32 of rank 1, expected f32");
      break;
    case 6: /* two calls: a batch (one alone runs the unbatched cell) */
      args[0].tensor = v65;
      st = rx_rt_batcher_submit(b, "lstm_cell", args, 6, NULL);
      if (!st) st = rx_rt_batcher_submit(b, "lstm_cell", args, 6, NULL);
      if (ok_status(st, "submit")) want_error(rx_rt_batcher_run(b), "shape", "lstm_cell_batched");
      break;
    }
    rx_rt_batcher_release(b);
  }
  rx_rt_tensor_release(v);
  rx_rt_tensor_release(v65);
  rx_rt_tensor_release(m);
  rx_rt_tensor_release(iv);
  ab_weights_free(&w);
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  const char *tests = argc > 1 ? argv[1] : "tests";
  char *tree = read_model(tests, "tree_cell.rx"), *lstm = read_model(tests, "lstm_cell.rx");
  if (!tree || !lstm) return 1;
  ab_min_batch = 2; /* the launches are counted: every round of two calls or more batched */
  batch_rules();
  pass_errors();
  rx_module *m = make_module(tree, lstm);
  if (m) check_signatures(m);
  rxk_backend vk = {.kind = RX_RT_BACKEND_VULKAN};
  rxk_rt_open(&vk, "vulkan:0");
  if (!vk.dev) {
    printf("Vulkan unavailable (%s): the pass only\n", vk.why);
  } else if (m) {
    size_t len = 0;
    unsigned char *bytes = compile(m, &vk, &len);
    rx_rt_artifact *a = NULL;
    if (bytes &&
        ok_status(rx_rt_artifact_load_memory(vk.dev, bytes, len, "acrobat.rxm", &a), "load")) {
      run_mix(vk.dev, a);
      run_tree(vk.dev, a);
      run_rnn(vk.dev, a);
      exact_counts(vk.dev, a);
      batcher_errors(vk.dev, a);
    }
    rx_rt_artifact_release(a);
    free(bytes);
  }
  bool ran = vk.dev != NULL;
  char msg[1024];
  CHECK_MSG(rxk_rt_close(&vk, msg, sizeof msg), "%s", msg);
  rx_module_free(m);
  free(tree);
  free(lstm);
  if (!check_failed && !ran) {
    printf("SKIP: the batched runs need a Vulkan device (the pass's checks passed)\n");
    return 77; /* what ran is not the test's point: ctest reports it skipped, not passed */
  }
  return check_finish("test_autobatch");
}
