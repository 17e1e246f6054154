/* Shape-aware scheduling (passes/schedule.h): every program of tests/kernels/ (every .rx file) is
 * scheduled for cuda -arch=sm_80, vulkan-lavapipe, vulkan (generic, no subgroups) and metal-apple7;
 * the result must satisfy sched_schedule_check, be scheduled by the expected rule, and compute what
 * the unscheduled program computes in the reference interpreter (subgroup size and thread limit
 * of the target) with random inputs. Each symbolic variable in turn takes the sizes 1, 7, 33,
 * 128, 1000 and 4099 while the others stay moderate (DEFAULT_DIM = 9), so the whole test stays
 * fast under ASan; the size 4099 runs for cuda only and for the first variable (n), 1000 for cuda
 * and generic vulkan; a size whose reference run needs more than REF_STEP_LIMIT statements is
 * skipped (reported).
 *
 * Tolerance: the scheduled reductions sum in another order (strided partials, tree or subgroup
 * combination), so results are compared with |sched - ref| <= tol * max(1, |ref|), where
 * tol = 1e-5 * sqrt(K) for f32 (K the longest extent in the program's shapes at that size: an
 * upper bound on every reduction length, at least 16) and tol = 1e-2 for f16 outputs (f16
 * rounding of the final value). Elementwise programs are bit-exact in practice; the bound is
 * the same for simplicity.
 *
 * Also: structural checks of the chosen schedules (guards removed when provable, variants of
 * the matmul), sched_schedule_check rejecting programs that break the contract, and an already
 * scheduled program returned unchanged.
 *
 * usage: test_schedule TESTS_DIR */
#include "check.h"
#include "interp/interp.h"
#include "passes/schedule.h"
#include "support_kernels.h"
#include "targets/target.h"

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DEFAULT_DIM 9
/* A size whose reference run needs more interpreted statements than this is skipped (counted
 * and printed, never passed), as in test_kernels: layer_norm_40000's rows of 40000 at n = 1000
 * and 4099 were half of this test's time, and its long rows are checked at n = 1..128. */
#define REF_STEP_LIMIT 40000000
/* the sizes of the kernel tests (support_kernels.h: 1, 7, 33, 128, 1000, 4099, or
 * RX_KERNEL_SIZES, which make asan narrows) */
#define NSIZES   ((int)rxk_size_count())
#define SIZES(i) rxk_size_at((size_t)(i))

static const char *TARGETS[] = {"cuda -arch=sm_80", "vulkan-lavapipe", "vulkan", "metal-apple7"};
#define NTARGETS 4

/* expected rule (of the last variant) per program, and the number of variants; on CUDA, where
 * gemm_mma applies, one more (its 64 x 64 tiles up to a row count: cuda_variants) */
static const struct {
  const char *fn;
  rx_sched_rule rule;
  int nvariants;
  int cuda_variants; /* 0: nvariants */
} EXPECT[] = {
    {"ew_chain", RX_SCHED_ELEMENTWISE, 1, 0},
    {"ew_chain_dyn", RX_SCHED_ELEMENTWISE, 1, 0},
    {"ew_inverse_trig", RX_SCHED_ELEMENTWISE, 1, 0},
    {"broadcast_add", RX_SCHED_ELEMENTWISE, 1, 0},
    {"transpose", RX_SCHED_ELEMENTWISE, 1, 0},
    {"softmax", RX_SCHED_ROW_REDUCTION, 1, 0},
    {"rms_norm", RX_SCHED_ROW_REDUCTION, 1, 0},
    {"layer_norm", RX_SCHED_ROW_REDUCTION, 1, 0},
    {"row_sum_scale", RX_SCHED_ROW_REDUCTION, 1, 0},
    {"sum_all", RX_SCHED_ROW_REDUCTION, 1, 0},
    {"gemv", RX_SCHED_GEMV, 1, 0},
    {"gemm", RX_SCHED_GEMM, 3, 0},
    {"gemm_dyn", RX_SCHED_GEMM, 3, 0},
    {"gemm_f16_f32", RX_SCHED_GEMM, 3, 4},
    {"gemm_f16", RX_SCHED_GEMM, 3, 0},
    {"gemm_kn_bias", RX_SCHED_GEMM, 3, 4},
    {"gemm_nt_bias_m", RX_SCHED_GEMM, 3, 4},
    {"cumsum", RX_SCHED_FALLBACK, 1, 0},
    /* argmax/argmin, cumsum and prod: a serial reduce or scan per output point (fallback) */
    {"argmax_rows", RX_SCHED_FALLBACK, 1, 0},
    {"argmin_cols_last", RX_SCHED_FALLBACK, 1, 0},
    {"argmax_int_last", RX_SCHED_FALLBACK, 1, 0},
    {"cumsum_rev_excl_f16", RX_SCHED_FALLBACK, 1, 0},
    {"cumsum_1d_i32", RX_SCHED_FALLBACK, 1, 0},
    {"prod_rows", RX_SCHED_FALLBACK, 1, 0},
    {"prod_cols_f16", RX_SCHED_FALLBACK, 1, 0},
    /* topk: K serial selection passes per line (fallback) */
    {"topk_rows_smallest_f16", RX_SCHED_FALLBACK, 1, 0},
    {"topk_1d_i32", RX_SCHED_FALLBACK, 1, 0},
    {"take_along_axis_f32", RX_SCHED_ELEMENTWISE, 1, 0},
    {"take_along_axis_f16_axis0", RX_SCHED_ELEMENTWISE, 1, 0},
    {"gemv_hf", RX_SCHED_GEMV, 1, 0},
    {"matmul_hf", RX_SCHED_GEMM, 3, 0},
    {"matmul_hf_f32", RX_SCHED_GEMM, 1, 0},
    {"gate_hf", RX_SCHED_GEMM, 1, 0},
    {"bias_residual_hf", RX_SCHED_GEMM, 1, 0},
    {"prologue_hf", RX_SCHED_GEMM, 3, 0},
    {"batched_hf", RX_SCHED_GEMM, 3, 0},
    {"broadcast_hf", RX_SCHED_GEMM, 3, 4},
    {"matvec_hf", RX_SCHED_GEMV, 1, 0},
    {"mma_hf", RX_SCHED_GEMM, 3, 4},
    {"heads_hf", RX_SCHED_GEMM, 3, 4},
    {"rows3_hf", RX_SCHED_GEMM, 1, 0},
    {"rows7_hf", RX_SCHED_GEMM, 1, 0},
    {"decode_hf", RX_SCHED_GEMM, 3, 4},
    {"layer_norm_40000", RX_SCHED_ROW_REDUCTION, 1, 0},
    {"softmax_online", RX_SCHED_ROW_REDUCTION, 1, 0},
    {"log_softmax_bounded", RX_SCHED_ROW_REDUCTION, 1, 0},
    {"rms_norm_rows", RX_SCHED_ROW_REDUCTION, 1, 0},
    {"add_rms_norm_rows", RX_SCHED_ROW_REDUCTION, 1, 0},
    {"softmax_100", RX_SCHED_ROW_REDUCTION, 1, 0},
    {"layer_norm_7", RX_SCHED_ROW_REDUCTION, 1, 0},
    {"head_stats", RX_SCHED_ROW_REDUCTION, 1, 0},
    {"vec_silu_mul", RX_SCHED_ELEMENTWISE, 1, 0},
    {"vec_mixed", RX_SCHED_ELEMENTWISE, 1, 0},
    {"vec_f32x8", RX_SCHED_FALLBACK, 1, 0},
    {"vec_unaligned", RX_SCHED_FALLBACK, 1, 0},
    {"vec_select", RX_SCHED_FALLBACK, 1, 0},
    {"vec_dot", RX_SCHED_FALLBACK, 1, 0},
    {"vec_gather", RX_SCHED_FALLBACK, 1, 0},
    {"softmax_cache_f16", RX_SCHED_ROW_REDUCTION, 1, 0},
    {"softmax_rows_f16", RX_SCHED_ROW_REDUCTION, 1, 0},
    {"softmax_rows_f16_f32", RX_SCHED_ROW_REDUCTION, 1, 0},
    {"softmax_cache_f32", RX_SCHED_ROW_REDUCTION, 1, 0},
    {"frag_proj", RX_SCHED_GEMM, 3, 0},
    {"frag_xw", RX_SCHED_GEMM, 3, 0},
    {"frag_batched", RX_SCHED_GEMM, 3, 0},
    /* rms_norm_matmul (tests/kernels/gemv_norm.rx): the matmul rule's GEMV forms with extra
     * reductions (matmul.h mm_extra) */
    {"nmm_gemv", RX_SCHED_GEMV, 1, 0},
    {"nmm_rows", RX_SCHED_GEMM, 2, 0},
    {"nmm_gated3", RX_SCHED_GEMM, 1, 0},
    {"nmm_gated16", RX_SCHED_GEMM, 1, 0},
    {"nmm_gated_f16", RX_SCHED_GEMM, 2, 0},
    {"nmm_gated_q4", RX_SCHED_GEMM, 2, 0},
    {"nmm_q8", RX_SCHED_GEMV, 1, 0},
    {"nmm_mma", RX_SCHED_GEMM, 2, 0},
    {"nmm_mma_slices", RX_SCHED_GEMM, 2, 0},
    {"nmm_passes", RX_SCHED_GEMM, 3, 0},
    {"nmm_slices", RX_SCHED_GEMM, 2, 0},
    {"nmm_slices3", RX_SCHED_GEMM, 1, 0},
};

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static float frand(void) { /* [-1, 1) */
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return (float)((double)(rng >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

static rx_module *parse_text(const char *name, const char *text, size_t len) {
  rx_module *m = rx_module_new();
  rx_diag d;
  base_diag_init(&d);
  bool ok = ir_parse_module(m, name, text, len, &d) && ops_module_normalize(m, &d) &&
            ir_module_verify(m, &d);
  if (!ok) {
    fprintf(stderr, "%s: rejected:\n%s\n", name, rx_diag_text(&d));
    rx_module_free(m);
    m = NULL;
  }
  base_diag_free(&d);
  return m;
}

/* The symbolic variables of f's buffer shapes, in first-seen order. */
static int fn_vars(const rx_tensor_fn *f, const rx_expr **vars, int max) {
  int n = 0;
  for (int p = 0; p < f->nparams; p++) {
    if (f->params[p]->kind != RX_PARAM_BUFFER) continue;
    const rx_buffer *b = f->params[p]->buf;
    for (int d = 0; d < b->ndim; d++) {
      rx_ptrvec vs = {0};
      sym_expr_collect_vars(b->shape[d], &vs);
      for (size_t i = 0; i < vs.len; i++) {
        bool seen = false;
        for (int k = 0; k < n; k++) seen |= vars[k] == vs.data[i];
        if (!seen && n < max) vars[n++] = vs.data[i];
      }
      base_ptrvec_free(&vs);
    }
  }
  return n;
}

typedef struct run_bufs {
  rx_interp_arg args[16];
  int64_t count[16];
  int nargs;
} run_bufs;

static size_t elem_size(rx_dtype t) { return (size_t)(ir_dtype_bits(t) + 7) / 8; }

/* Buffers for f at the given sizes: inputs random, outputs filled with a sentinel (the same in
 * every run, so an element the schedule forgets to write shows up). */
static bool make_bufs(const rx_tensor_fn *f, const rx_expr_env *env, run_bufs *rb, int64_t *kmax,
                      uint64_t seed) {
  rng = seed;
  rb->nargs = f->nparams;
  for (int p = 0; p < f->nparams; p++) /* all of them: free_bufs frees every one after a failure */
    memset(&rb->args[p], 0, sizeof rb->args[p]);
  for (int p = 0; p < f->nparams; p++) {
    rx_interp_arg *a = &rb->args[p];
    const rx_param *pp = f->params[p];
    if (pp->kind != RX_PARAM_BUFFER) return false; /* no scalar params in the kernels */
    const rx_buffer *b = pp->buf;
    a->ndim = b->ndim;
    a->dtype = b->dtype;
    int64_t cnt = 1;
    for (int d = 0; d < b->ndim; d++) {
      if (!sym_expr_eval(b->shape[d], env, &a->shape[d])) return false;
      if (a->shape[d] > *kmax) *kmax = a->shape[d];
      cnt *= a->shape[d];
    }
    rb->count[p] = cnt;
    a->data = calloc((size_t)(cnt ? cnt : 1), elem_size(b->dtype));
    for (int64_t i = 0; i < cnt; i++) {
      float v = pp->is_output ? 12345.0f : frand();
      if (b->dtype == RX_DTYPE_F32)
        ((float *)a->data)[i] = v;
      else if (b->dtype == RX_DTYPE_F16)
        ((uint16_t *)a->data)[i] = base_f32_to_f16(pp->is_output ? 1234.0f : v);
      else if (b->dtype == RX_DTYPE_I8)
        ((int8_t *)a->data)[i] = (int8_t)(v * 100.0f);
      else if (b->dtype == RX_DTYPE_U8) /* packed weights: any byte */
        ((uint8_t *)a->data)[i] = (uint8_t)(int)(v * 127.0f + 128.0f);
      else if (b->dtype == RX_DTYPE_I32)
        ((int32_t *)a->data)[i] = (int32_t)(v * 1000.0f);
      else if (b->dtype == RX_DTYPE_I64) /* argmax's result; take_along_axis's indices: 0, in
                                            range at every size (test_kernels varies them) */
        ((int64_t *)a->data)[i] = pp->is_output ? 12345 : 0;
      else
        return false;
    }
  }
  return true;
}
static void free_bufs(run_bufs *rb) {
  for (int p = 0; p < rb->nargs; p++) free(rb->args[p].data);
}
static double get(const rx_interp_arg *a, int64_t i) {
  switch (a->dtype) {
  case RX_DTYPE_F32:
    return ((float *)a->data)[i];
  case RX_DTYPE_I8:
    return ((int8_t *)a->data)[i];
  case RX_DTYPE_I32:
    return ((int32_t *)a->data)[i];
  case RX_DTYPE_I64:
    return (double)((int64_t *)a->data)[i];
  default:
    return base_f16_to_f32(((uint16_t *)a->data)[i]);
  }
}

/* Runs f (reference, already computed in ref) against g (scheduled) at one size assignment. */
static void compare_run(rx_module *m, const rx_tensor_fn *f, const rx_tensor_fn *g,
                        const rx_target *t, const rx_expr_env *env, run_bufs *ref, int64_t kmax,
                        const char *what) {
  run_bufs sb;
  int64_t km2 = 0;
  if (!make_bufs(f, env, &sb, &km2, 7)) {
    CHECK_MSG(false, "%s: cannot make buffers", what);
    free_bufs(&sb);
    return;
  }
  rx_interp_opts o = {.subgroup_size = t->subgroup_size > 0 ? t->subgroup_size : 32,
                      .max_threads_per_block = t->max_threads_per_block};
  rx_status st = interp_run(m, g, sb.args, sb.nargs, &o);
  CHECK_MSG(st == RX_OK, "%s: scheduled run failed: %s", what, rx_status_message(st));
  if (st) {
    rx_status_free(st);
    free_bufs(&sb);
    return;
  }
  double tol32 = 1e-5 * sqrt((double)(kmax > 16 ? kmax : 16));
  int bad = 0;
  for (int p = 0; p < f->nparams; p++) {
    if (!f->params[p]->is_output) continue;
    double tol = sb.args[p].dtype == RX_DTYPE_F16 ? 1e-2 : tol32;
    for (int64_t i = 0; i < sb.count[p] && bad < 3; i++) {
      double r = get(&ref->args[p], i), v = get(&sb.args[p], i);
      double lim = tol * (fabs(r) > 1 ? fabs(r) : 1);
      if (!(fabs(r - v) <= lim) && !(isnan(r) && isnan(v))) {
        bad++;
        CHECK_MSG(false, "%s: output %s[%lld]: scheduled %.9g, reference %.9g", what,
                  f->params[p]->buf->name, (long long)i, v, r);
      }
    }
  }
  if (!bad) check_passed++;
  free_bufs(&sb);
}

static int expected_index(const char *fn) {
  for (size_t i = 0; i < sizeof EXPECT / sizeof EXPECT[0]; i++)
    if (strcmp(EXPECT[i].fn, fn) == 0) return (int)i;
  return -1;
}

/* Whether a program body has a bound loop (written already scheduled, like the attention
 * kernels and tests/kernels/vector_access.rx). */
static bool is_prescheduled(const rx_stmt *s) {
  if (!s) return false;
  if (s->kind == RX_STMT_FOR && rx_loop_is_bound(s->loop_kind)) return true;
  for (int i = 0; s->kind == RX_STMT_SEQ && i < s->n; i++)
    if (is_prescheduled(s->body[i])) return true;
  return is_prescheduled(s->inner) || is_prescheduled(s->otherwise);
}

static void test_fn(rx_module *m, rx_tensor_fn *f) {
  int ei = expected_index(f->name);
  CHECK_MSG(ei >= 0, "%s: no expected rule in the test table", f->name);
  if (ei < 0) return;
  rx_tensor_fn *sched[NTARGETS] = {0};
  const rx_target *tg[NTARGETS];
  for (int t = 0; t < NTARGETS; t++) {
    rx_status st = tgt_target_parse(TARGETS[t], &tg[t]);
    CHECK_MSG(st == RX_OK, "target %s", TARGETS[t]);
    rx_status_free(st);
    rx_diag d;
    base_diag_init(&d);
    rx_sched_result r;
    bool ok = sched_schedule(m, f, tg[t], &d, &r);
    CHECK_MSG(ok, "%s on %s: not scheduled:\n%s", f->name, TARGETS[t], rx_diag_text(&d));
    if (ok) {
      CHECK_MSG(sched_schedule_check(r.fn, tg[t], &d), "%s on %s: check failed:\n%s", f->name,
                TARGETS[t], rx_diag_text(&d));
      int nv = EXPECT[ei].nvariants;
      if (EXPECT[ei].cuda_variants && tg[t]->kind == RX_TARGET_CUDA) nv = EXPECT[ei].cuda_variants;
      CHECK_MSG(r.nvariants == nv && r.variants[r.nvariants - 1].rule == EXPECT[ei].rule,
                "%s on %s: rule %s with %d variants, expected %s with %d", f->name, TARGETS[t],
                sched_rule_name(r.variants[r.nvariants - 1].rule), r.nvariants,
                sched_rule_name(EXPECT[ei].rule), nv);
      if (is_prescheduled(f->body)) /* a pre-scheduled program is returned as it is */
        CHECK_MSG(r.fn->body == f->body, "%s: a scheduled program must come back unchanged",
                  f->name);
      else
        CHECK_MSG(r.fn != f && r.fn->body != f->body, "%s: the original must stay as it was",
                  f->name);
      sched[t] = r.fn;
    }
    base_diag_free(&d);
  }
  const rx_expr *vars[8];
  int nv = fn_vars(f, vars, 8);
  int64_t vals[8];
  for (int v = 0; v < (nv ? nv : 1); v++) {
    for (int si = 0; si < (nv ? NSIZES : 1); si++) {
      for (int k = 0; k < nv; k++) vals[k] = k == v ? SIZES(si) : DEFAULT_DIM;
      if (!rxk_fit_facts(f, vars, vals, nv, v)) continue; /* the facts exclude the size */
      rx_expr_env env = {vars, vals, (size_t)nv};
      run_bufs ref;
      int64_t kmax = 0;
      if (!make_bufs(f, &env, &ref, &kmax, 7)) {
        CHECK_MSG(false, "%s: cannot make buffers", f->name);
        free_bufs(&ref);
        continue;
      }
      rx_interp_opts ref_opts = {.max_steps = REF_STEP_LIMIT};
      rx_status st = interp_run(m, f, ref.args, ref.nargs, &ref_opts);
      if (st && strstr(rx_status_message(st), "step limit"))
        CHECK_SKIP("%s with %s = %lld: the reference run needs more than %d statements", f->name,
                   vars[v]->name, (long long)SIZES(si), REF_STEP_LIMIT);
      else
        CHECK_MSG(st == RX_OK, "%s: reference run failed: %s", f->name, rx_status_message(st));
      rx_status_free(st);
      if (st == RX_OK) {
        for (int t = 0; t < NTARGETS; t++) {
          if (!sched[t]) continue;
          /* to bound the run time under ASan: the size above 4096 runs on cuda only and for
           * the first symbolic variable (the row count n of every kernel), 1000 on
           * cuda (subgroups of 32, 256 threads) and generic vulkan (shared-memory trees, 128
           * threads), the two extremes of the reduction paths; smaller sizes on every target */
          if (SIZES(si) > 1000 && (t != 0 || v != 0)) continue;
          if (SIZES(si) == 1000 && t != 0 && t != 2) continue;
          char what[256];
          snprintf(what, sizeof what, "%s on %s with %s = %lld", f->name, TARGETS[t],
                   nv ? vars[v]->name : "-", (long long)(nv ? SIZES(si) : 0));
          compare_run(m, f, sched[t], tg[t], &env, &ref, kmax, what);
        }
      }
      free_bufs(&ref);
    }
  }
}

static char *read_text(const char *path, size_t *len) {
  char *text = NULL;
  rx_status st = base_read_file(path, &text, len);
  if (st) {
    rx_status_free(st);
    return NULL;
  }
  return text;
}

static int cmpstr(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

static void test_kernels(const char *dir) {
  char kdir[1024];
  snprintf(kdir, sizeof kdir, "%s/kernels", dir);
  DIR *dd = opendir(kdir);
  CHECK_MSG(dd != NULL, "cannot open %s", kdir);
  if (!dd) return;
  char *names[64];
  int nn = 0;
  struct dirent *de;
  while ((de = readdir(dd)) && nn < 64) {
    size_t l = strlen(de->d_name);
    if (l > 3 && strcmp(de->d_name + l - 3, ".rx") == 0) names[nn++] = strdup(de->d_name);
  }
  closedir(dd);
  qsort(names, (size_t)nn, sizeof *names, cmpstr);
  CHECK_MSG(nn >= 10, "expected the kernel programs in %s, found %d files", kdir, nn);
  for (int i = 0; i < nn; i++) {
    char path[1100];
    snprintf(path, sizeof path, "%s/%s", kdir, names[i]);
    size_t len;
    char *text = read_text(path, &len);
    CHECK_MSG(text != NULL, "cannot read %s", path);
    rx_module *m = text ? parse_text(path, text, len) : NULL;
    CHECK_MSG(m != NULL, "%s does not parse", path);
    if (m) {
      size_t nitems = m->items.len;
      for (size_t k = 0; k < nitems; k++)
        if (m->items.data[k].kind == RX_ITEM_TENSOR) test_fn(m, m->items.data[k].fn);
      rx_module_free(m);
    }
    free(text);
    free(names[i]);
  }
}

/* ---- structure of chosen schedules ---- */
static bool contains(const char *hay, const char *needle) { return strstr(hay, needle) != NULL; }

static char *sched_text(const char *src, const char *target, const char *fn) {
  rx_module *m = parse_text("<inline>", src, strlen(src));
  if (!m) return NULL;
  const rx_target *t;
  rx_status st = tgt_target_parse(target, &t);
  rx_status_free(st);
  rx_diag d;
  base_diag_init(&d);
  bool ok = sched_schedule_module(m, t, &d);
  char *out = NULL;
  if (ok) {
    rx_strbuf b = {0};
    ir_module_print(&b, m);
    out = base_strbuf_take(&b);
  } else {
    fprintf(stderr, "%s: %s\n", fn, rx_diag_text(&d));
  }
  base_diag_free(&d);
  rx_module_free(m);
  return out;
}

static void test_structure(void) {
  /* the tail guard is removed when the analyzer proves the fused extent divisible */
  char *a = sched_text("tensor_fn f(a: f32[n, 256], out b: f32[n, 256]) {\n"
                       "  for i in 0..n, j in 0..256 { b[i, j] = a[i, j] * 2.0 }\n}\n",
                       "cuda", "f");
  CHECK_MSG(a && contains(a, "bind(blockIdx.x)") && contains(a, "bind(threadIdx.x)") &&
                contains(a, "vectorize"),
            "elementwise schedule:\n%s", a ? a : "(null)");
  free(a);
  a = sched_text("tensor_fn f(a: f32[n, 64], out b: f32[n, 64]) where n % 16 == 0 {\n"
                 "  for i in 0..n, j in 0..64 { b[i, j] = a[i, j] * 2.0 }\n}\n",
                 "cuda", "f");
  CHECK_MSG(a && !contains(a, "if "), "guard must be removed when n %% 16 == 0:\n%s", a ? a : "");
  free(a);
  a = sched_text("tensor_fn f(a: f32[n, m], out b: f32[n, m]) {\n"
                 "  for i in 0..n, j in 0..m { b[i, j] = a[i, j] * 2.0 }\n}\n",
                 "cuda", "f");
  CHECK_MSG(a && contains(a, "if bx * 256 + tx < m * n") && !contains(a, "vectorize"),
            "guard must stay for a symbolic extent:\n%s", a ? a : "");
  free(a);
  /* generic vulkan: no subgroup ops, a shared tree with barriers, 128 threads */
  a = sched_text("tensor_fn f(a: f32[n, m], out s: f32[n]) {\n"
                 "  for i in 0..n { reduce j in 0..m { init { s[i] = 0.0 }\n"
                 "    update { s[i] = s[i] + a[i, j] } } }\n}\n",
                 "vulkan", "f");
  CHECK_MSG(a && !contains(a, "subgroup_") && contains(a, "barrier") &&
                contains(a, "0..128 bind") && contains(a, "shared"),
            "tree reduction on generic vulkan:\n%s", a ? a : "");
  free(a);
  a = sched_text("tensor_fn f(a: f32[n, m], out s: f32[n]) {\n"
                 "  for i in 0..n { reduce j in 0..m { init { s[i] = 0.0 }\n"
                 "    update { s[i] = s[i] + a[i, j] } } }\n}\n",
                 "cuda", "f");
  CHECK_MSG(a && contains(a, "subgroup_sum") && contains(a, "barrier"),
            "subgroup reduction on cuda:\n%s", a ? a : "");
  free(a);
}

/* ---- the contract check ---- */
static void test_check(void) {
  const rx_target *t;
  rx_status st = tgt_target_parse("cuda", &t);
  rx_status_free(st);
  static const char *bad[] = {
      /* store at host level */
      "tensor_fn f(a: f32[n], out b: f32[n]) {\n"
      "  b[0] = 1.0\n"
      "  for i in 0..n bind(blockIdx.x) { b[i] = a[i] }\n}\n",
      /* symbolic thread extent */
      "tensor_fn f(a: f32[n], out b: f32[n]) {\n"
      "  for i in 0..1 bind(blockIdx.x) { for t in 0..n bind(threadIdx.x) { b[t] = a[t] } }\n}\n",
      /* too many threads */
      "tensor_fn f(a: f32[n], out b: f32[n]) {\n"
      "  for i in 0..1 bind(blockIdx.x) { for t in 0..2048 bind(threadIdx.x) {\n"
      "    if t < n { b[t] = a[t] } } }\n}\n",
      /* shared memory over the limit */
      "tensor_fn f(a: f32[n], out b: f32[n]) {\n"
      "  for i in 0..1 bind(blockIdx.x) { alloc s: f32[65536] shared\n"
      "    for t in 0..32 bind(threadIdx.x) { if t < n { b[t] = a[t] } } }\n}\n",
      /* host-level condition on a loop-independent but non-symbolic value */
      "tensor_fn f(a: f32[n], out b: f32[n]) {\n"
      "  if a[0] > 0.0 { for i in 0..n bind(blockIdx.x) { b[i] = a[i] } }\n}\n",
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    rx_module *m = parse_text("<bad>", bad[i], strlen(bad[i]));
    CHECK_MSG(m != NULL, "bad[%zu] must parse", i);
    if (!m) continue;
    rx_tensor_fn *f = ir_module_tensor_fn(m, "f");
    rx_diag d;
    base_diag_init(&d);
    CHECK_MSG(!sched_schedule_check(f, t, &d) && d.errors > 0, "bad[%zu] must be rejected", i);
    rx_sched_result r;
    CHECK_MSG(!sched_schedule(m, f, t, &d, &r), "bad[%zu]: rx_schedule must refuse it", i);
    base_diag_free(&d);
    rx_module_free(m);
  }
  /* an already scheduled program is returned unchanged */
  const char *good = "tensor_fn f(a: f32[n], out b: f32[n]) {\n"
                     "  if n <= 16 { for i in 0..1 bind(blockIdx.x) {\n"
                     "    for t in 0..16 bind(threadIdx.x) { if t < n { b[t] = a[t] } } } }\n"
                     "  else { for i in 0..n bind(blockIdx.x) { b[i] = a[i] } }\n}\n";
  rx_module *m = parse_text("<good>", good, strlen(good));
  CHECK_MSG(m != NULL, "good must parse");
  if (m) {
    rx_tensor_fn *f = ir_module_tensor_fn(m, "f");
    rx_diag d;
    base_diag_init(&d);
    rx_sched_result r;
    CHECK_MSG(sched_schedule(m, f, t, &d, &r) && r.fn == f,
              "scheduled program returned unchanged: %s", rx_diag_text(&d));
    base_diag_free(&d);
    rx_module_free(m);
  }
  /* a program no rule can place in kernels is reported, not crashed on */
  const char *glob = "tensor_fn f(a: f32[n], out b: f32[n]) {\n"
                     "  alloc t: f32[n]\n"
                     "  for i in 0..n { t[i] = a[i] }\n"
                     "  for i in 0..n { b[i] = t[i] }\n}\n";
  m = parse_text("<glob>", glob, strlen(glob));
  if (m) {
    rx_diag d;
    base_diag_init(&d);
    rx_sched_result r;
    CHECK_MSG(!sched_schedule(m, ir_module_tensor_fn(m, "f"), t, &d, &r) && d.errors > 0 &&
                  contains(rx_diag_text(&d), "<glob>:2:"),
              "top-level global alloc must be a located diagnostic: %s", rx_diag_text(&d));
    base_diag_free(&d);
    rx_module_free(m);
  }
}

int main(int argc, char **argv) {
  const char *dir = argc > 1 ? argv[1] : "tests";
  test_structure();
  test_check();
  test_kernels(dir);
  return check_finish("schedule");
}
