/* Ragged (packed) tensors, CoRa-style (ops/ragged.c; docs/ops.md "Ragged tensors"): b sequences
 * of different lengths packed along a leading axis of `total` rows with offsets indptr i32[b + 1],
 * and loops whose bounds load from a buffer (`let sym`, docs/text-format.md).
 *
 * Each op is legalized from a one-op graph, then for every target (cuda sm_80 and sm_90,
 * vulkan-lavapipe, vulkan, metal-apple7, vulkan-nvidia) scheduled and generated (NVRTC with no
 * spills, shaderc + spirv-val where present: support_pipeline.c). Every case runs (a) in the
 * reference interpreter, (b) as CUDA C and as MSL in the SIMT emulator, (c) on Vulkan (lavapipe
 * here) through the runtime under the validation layer; every output is compared with the
 * interpreter's and with a padded reference computed here in double: each sequence padded to the
 * longest, padding masked (-inf scores), the plain softmax / causal attention math over the
 * padded [b, Lmax, ...] arrays, then the valid rows packed back.
 *
 * Cases: sequence lengths {1, 7, 16, 17, 100} (and shuffled {17, 1, 100, 7, 16}), one sequence of
 * 100, five sequences of length 1, and lengths {3, 0, 5} (an empty sequence); ragged_softmax of
 * x [total] and [total, 3] (f32, f16); ragged_attention f32 H=4 KVH=2 d=16 (GQA), f32 H=2 KVH=2
 * d=64, f16 H=2 KVH=1 d=8 with scale 0.3. Row-wise ops on the packed form (rms_norm, matmul by a
 * weight, add) keep `total` symbolic and run at the same totals against a C reference.
 * Hand-written programs with loaded loop bounds (rows reversed in place; row sums by a reduce
 * over loaded bounds) go through the schedules (the fallback rule takes them: loops whose
 * bounds load run serially inside a thread) and run at the same lengths.
 *
 * Tolerance, as normalized error max|got - want| / max(1, max|want|): f32 1e-5 (f32 math over at
 * most 100 keys against double), f16 outputs 2e-3 (one rounding to f16 of an f32 result; the
 * inputs are the same f16 values everywhere).
 *
 * Bad input: indptr of the wrong dtype or rank, q and k of different totals, heads not a
 * multiple: errors naming the op, the operand and the place. rx_rt_check_indptr (runtime.h), the
 * host check of an offsets table before it is uploaded: a last entry that is not total, a
 * decreasing entry, a first entry that is not 0, a wrong length: errors naming the entry.
 *
 * usage: test_ragged TESTS_DIR [FILTER] */
/* test-needs: runtime */
#include "support_oneop.h"

#include "interp/interp.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TOL_F32 1e-5 /* see the header comment */
#define TOL_F16 2e-3

static rxk_stats st;
static rxk_backend vk = {.kind = RX_RT_BACKEND_VULKAN};
static const char *filter;
static double worst[RX_DTYPE_COUNT]; /* the largest normalized error seen per output dtype */

#define NTARGETS RXK_ONEOP_TARGETS

/* The sets of sequence lengths every op runs at. */
typedef struct lens {
  int n;
  int len[8];
} lens;
static const lens cases[] = {
    {5, {1, 7, 16, 17, 100}}, {5, {17, 1, 100, 7, 16}}, {1, {100}},
    {5, {1, 1, 1, 1, 1}},     {3, {3, 0, 5}},
};

/* ------------------------------------------------------------------------------------------
 * programs: one op legalized, compiled for every target
 * ------------------------------------------------------------------------------------------ */

typedef rxk_oneop prog;

static bool prog_build(prog *p, const char *text, const char *what) {
  return rxk_oneop_build(p, text, what, "prog", filter, &st, &vk);
}

static rx_interp_arg *param(const prog *p, rxk_buffers *b, int k) {
  return rxk_oneop_param(p, b, k);
}

/* The index of the program's only output parameter. */
static int out_index(const prog *p) {
  for (int i = 0; i < p->f->nparams; i++)
    if (p->f->params[i]->kind == RX_PARAM_BUFFER && p->f->params[i]->is_output) return i;
  RX_ASSERT(!"no output");
  return -1;
}

static size_t count_of(const rx_interp_arg *a) {
  size_t n = 1;
  for (int d = 0; d < a->ndim; d++) n *= (size_t)a->shape[d];
  return n;
}

/* Normalized error of the output against want; false with a message. */
static bool compare(const prog *p, const rxk_buffers *got, const double *want, char *msg,
                    size_t n) {
  int i = out_index(p);
  rx_dtype t = p->f->params[i]->buf->dtype;
  size_t cnt = count_of(&got->arg[i]), at = 0;
  double maxdiff = 0, maxref = 1;
  for (size_t k = 0; k < cnt; k++) {
    double g = rxk_load_elem(got->arg[i].data, t, k);
    double d = isfinite(g) ? fabs(g - want[k]) : INFINITY;
    if (!(d <= maxdiff)) maxdiff = d, at = k;
    if (fabs(want[k]) > maxref) maxref = fabs(want[k]);
  }
  double tol = t == RX_DTYPE_F32 ? TOL_F32 : TOL_F16, err = maxdiff / maxref;
  if (!(err <= tol)) {
    snprintf(msg, n, "normalized error %.3g > %.0e (element %zu: got %.6g, want %.6g)", err, tol,
             at, rxk_load_elem(got->arg[i].data, t, at), want[at]);
    return false;
  }
  if (err > worst[t]) worst[t] = err;
  return true;
}

/* The output of b as doubles (heap). */
static double *output_doubles(const prog *p, const rxk_buffers *b) {
  int i = out_index(p);
  size_t cnt = count_of(&b->arg[i]);
  double *r = base_malloc(sizeof(double) * (cnt ? cnt : 1));
  for (size_t k = 0; k < cnt; k++)
    r[k] = rxk_load_elem(b->arg[i].data, p->f->params[i]->buf->dtype, k);
  return r;
}

/* Checks got (from `where`) against the padded reference and the interpreter's output. */
static void check(const prog *p, const rxk_buffers *got, const double *want, const double *oracle,
                  const char *where, const char *at) {
  char why[512];
  if (!compare(p, got, want, why, sizeof why))
    rxk_fail(&st, "%s at %s: %s against the padded reference: %s", p->what, at, where, why);
  else if (oracle && !compare(p, got, oracle, why, sizeof why))
    rxk_fail(&st, "%s at %s: %s against the interpreter: %s", p->what, at, where, why);
  else
    st.passed++;
}

/* Runs the program on `in` in the interpreter, the SIMT emulator and on Vulkan. */
static void run_case(prog *p, const rxk_env *e, const rxk_buffers *in, const double *want,
                     const char *at) {
  char why[512];
  rxk_buffers got;
  rxk_copy_buffers(in, &got);
  rx_status s = interp_run(p->m, p->f, got.arg, got.n, NULL);
  double *oracle = NULL;
  if (s) {
    rxk_fail(&st, "%s at %s: interpreter: %s", p->what, at, rx_status_message(s));
  } else {
    check(p, &got, want, NULL, "interpreter", at);
    oracle = output_doubles(p, &got);
  }
  rx_status_free(s);
  rxk_free_buffers(&got);
  for (int i = 0; i < NTARGETS; i++) {
    rxk_prepared *tp = &p->tp[i];
    if (!tp->ok || !tp->emulate) continue;
    rxk_copy_buffers(in, &got);
    if (!rxk_run_simt(tp, e, &got, why, sizeof why))
      rxk_fail(&st, "%s at %s: %s", tp->what, at, why);
    else
      check(p, &got, want, oracle,
            tp->t->kind == RX_TARGET_CUDA ? "emulated CUDA C" : "emulated MSL", at);
    rxk_free_buffers(&got);
  }
  if (p->lib) {
    rxk_copy_buffers(in, &got);
    s = rxk_rt_run(&vk, p->lib, p->f, e, &got, 0, NULL);
    if (s)
      rxk_fail(&st, "%s at %s: Vulkan: %s", p->what, at, rx_status_message(s));
    else
      check(p, &got, want, oracle, vk.target.name, at);
    rx_status_free(s);
    rxk_free_buffers(&got);
  } else {
    st.skipped++;
  }
  free(oracle);
}

/* Random inputs at total rows and nb = b + 1 offsets, indptr written from the lengths. */
static bool make_inputs(const prog *p, const lens *c, rxk_env *e, rxk_buffers *in, int *indptr) {
  indptr[0] = 0;
  for (int s = 0; s < c->n; s++) indptr[s + 1] = indptr[s] + c->len[s];
  rxk_program_vars(p->f, e);
  for (int i = 0; i < e->n; i++) {
    if (!strcmp(e->vars[i]->name, "total")) e->values[i] = indptr[c->n];
    if (!strcmp(e->vars[i]->name, "nb")) e->values[i] = c->n + 1;
    if (!strcmp(e->vars[i]->name, "b")) e->values[i] = c->n;
  }
  char why[256];
  if (!rxk_make_buffers(p->f, e, in, why, sizeof why)) {
    rxk_fail(&st, "%s: %s", p->what, why);
    return false;
  }
  /* the offsets: the last input (row-wise programs have none) */
  rx_interp_arg *ip = param(p, in, p->f->nparams - 2);
  if (p->f->params[p->f->nparams - 2]->buf->dtype == RX_DTYPE_I32)
    memcpy(ip->data, indptr, sizeof(int) * (size_t)(c->n + 1));
  rx_status s = rx_rt_check_indptr(indptr, c->n + 1, indptr[c->n]);
  if (s) rxk_fail(&st, "%s: a valid indptr is refused: %s", p->what, rx_status_message(s));
  rx_status_free(s);
  return true;
}

static void lens_text(const lens *c, char *out, size_t n) {
  size_t k = (size_t)snprintf(out, n, "lengths {");
  for (int s = 0; s < c->n && k < n; s++)
    k += (size_t)snprintf(out + k, n - k, "%s%d", s ? ", " : "", c->len[s]);
  if (k < n) snprintf(out + k, n - k, "}");
}

static int max_len(const lens *c) {
  int m = 0;
  for (int s = 0; s < c->n; s++)
    if (c->len[s] > m) m = c->len[s];
  return m;
}

/* The reference of one case: the output of p on `in` (lengths c, offsets indptr) into want. */
typedef void ref_fn(const void *cfg, const lens *c, const int *indptr, const prog *p,
                    rxk_buffers *in, double *want);

/* Builds text's program and runs it at every set of lengths against ref. */
static void run_cases(const char *text, const char *what, ref_fn *ref, const void *cfg) {
  prog p;
  if (!prog_build(&p, text, what)) {
    rxk_oneop_free(&p);
    return;
  }
  for (size_t k = 0; k < RX_ARRAY_LEN(cases); k++) {
    rxk_env e;
    rxk_buffers in;
    int indptr[16];
    if (!make_inputs(&p, &cases[k], &e, &in, indptr)) continue;
    double *want = base_calloc(count_of(&in.arg[out_index(&p)]) + 1, sizeof(double));
    ref(cfg, &cases[k], indptr, &p, &in, want);
    char at[128];
    lens_text(&cases[k], at, sizeof at);
    run_case(&p, &e, &in, want, at);
    free(want);
    rxk_free_buffers(&in);
  }
  rxk_oneop_free(&p);
}

/* ------------------------------------------------------------------------------------------
 * ragged_softmax against a padded softmax
 * ------------------------------------------------------------------------------------------ */

/* Pads x [total, hh] to [b, L, hh] with -inf, softmax over axis 1 in double, packs back. */
static void ref_softmax(const lens *c, const int *indptr, const rx_interp_arg *x, rx_dtype t,
                        int hh, double *out) {
  int b = c->n, L = max_len(c);
  double *pad = base_malloc(sizeof(double) * (size_t)(b * (L ? L : 1) * hh));
  for (int s = 0; s < b; s++)
    for (int i = 0; i < L; i++)
      for (int h = 0; h < hh; h++)
        pad[((size_t)s * L + i) * hh + h] =
            i < c->len[s] ? rxk_load_elem(x->data, t, (size_t)(indptr[s] + i) * hh + h) : -INFINITY;
  for (int s = 0; s < b; s++)
    for (int h = 0; h < hh; h++) {
      double m = -INFINITY, sum = 0;
      for (int i = 0; i < L; i++) m = fmax(m, pad[((size_t)s * L + i) * hh + h]);
      for (int i = 0; i < L; i++) sum += exp(pad[((size_t)s * L + i) * hh + h] - m);
      for (int i = 0; i < c->len[s]; i++)
        out[(size_t)(indptr[s] + i) * hh + h] = exp(pad[((size_t)s * L + i) * hh + h] - m) / sum;
    }
  free(pad);
}

typedef struct softmax_cfg {
  rx_dtype t;
  int hh; /* 0: x [total] */
} softmax_cfg;

static void softmax_want(const void *cfg, const lens *c, const int *indptr, const prog *p,
                         rxk_buffers *in, double *want) {
  const softmax_cfg *sc = cfg;
  ref_softmax(c, indptr, param(p, in, 0), sc->t, sc->hh ? sc->hh : 1, want);
}

static void test_softmax(void) {
  static const softmax_cfg cfgs[] = {{RX_DTYPE_F32, 0}, {RX_DTYPE_F32, 3}, {RX_DTYPE_F16, 3}};
  for (size_t ci = 0; ci < RX_ARRAY_LEN(cfgs); ci++) {
    const char *t = ir_dtype_name(cfgs[ci].t);
    char text[512], what[128], dims[32] = "total";
    if (cfgs[ci].hh) snprintf(dims, sizeof dims, "total, %d", cfgs[ci].hh);
    snprintf(text, sizeof text,
             "graph_fn main(x: %s[%s], indptr: i32[nb]) {\n  y = ragged_softmax(x, indptr)\n"
             "  return y\n}\n",
             t, dims);
    snprintf(what, sizeof what, "ragged_softmax %s[%s]", t, dims);
    run_cases(text, what, softmax_want, &cfgs[ci]);
  }
}

/* ------------------------------------------------------------------------------------------
 * ragged_attention against padded causal attention
 * ------------------------------------------------------------------------------------------ */

typedef struct attn_cfg {
  rx_dtype t;
  int h, kvh, d;
  double scale; /* 0: the default 1 / sqrt(d) */
} attn_cfg;

/* Element (row, head, dim) of a padded [b, L, heads, d] array, or 0 in the padding. */
static double padded(const double *a, int L, int heads, int d, int s, int i, int h, int x) {
  return a[(((size_t)s * L + i) * heads + h) * d + x];
}

/* Pads q, k, v to [b, L, heads, d] (zeros), computes causal attention per sequence with the
 * padding masked (score -inf for key j >= len or j > i), in double, packs the valid rows back. */
static void ref_attention(const attn_cfg *c, const lens *ln, const int *indptr,
                          const rx_interp_arg *q, const rx_interp_arg *k, const rx_interp_arg *v,
                          double *out) {
  int b = ln->n, L = max_len(ln);
  size_t nq = (size_t)b * (L ? L : 1) * c->h * c->d, nk = (size_t)b * (L ? L : 1) * c->kvh * c->d;
  double *pq = base_calloc(nq, sizeof(double)), *pk = base_calloc(nk, sizeof(double));
  double *pv = base_calloc(nk, sizeof(double)), *sc = base_malloc(sizeof(double) * (size_t)(L + 1));
  for (int s = 0; s < b; s++)
    for (int i = 0; i < ln->len[s]; i++) {
      size_t row = (size_t)(indptr[s] + i);
      for (size_t x = 0; x < (size_t)c->h * c->d; x++)
        pq[((size_t)s * L + i) * c->h * c->d + x] =
            rxk_load_elem(q->data, c->t, row * c->h * c->d + x);
      for (size_t x = 0; x < (size_t)c->kvh * c->d; x++) {
        pk[((size_t)s * L + i) * c->kvh * c->d + x] =
            rxk_load_elem(k->data, c->t, row * c->kvh * c->d + x);
        pv[((size_t)s * L + i) * c->kvh * c->d + x] =
            rxk_load_elem(v->data, c->t, row * c->kvh * c->d + x);
      }
    }
  double scale = c->scale ? c->scale : 1.0 / sqrt((double)c->d);
  for (int s = 0; s < b; s++)
    for (int i = 0; i < L; i++)
      for (int h = 0; h < c->h; h++) {
        int kh = h / (c->h / c->kvh);
        double m = -INFINITY, l = 0;
        for (int j = 0; j < L; j++) {
          double dot = 0;
          for (int x = 0; x < c->d; x++)
            dot += padded(pq, L, c->h, c->d, s, i, h, x) * padded(pk, L, c->kvh, c->d, s, j, kh, x);
          sc[j] = j < ln->len[s] && j <= i ? dot * scale : -INFINITY;
          m = fmax(m, sc[j]);
        }
        if (i >= ln->len[s]) continue; /* a padding row: not packed back */
        for (int j = 0; j < L; j++) l += exp(sc[j] - m);
        for (int x = 0; x < c->d; x++) {
          double acc = 0;
          for (int j = 0; j < L; j++)
            acc += exp(sc[j] - m) * padded(pv, L, c->kvh, c->d, s, j, kh, x);
          out[((size_t)(indptr[s] + i) * c->h + h) * c->d + x] = acc / l;
        }
      }
  free(pq);
  free(pk);
  free(pv);
  free(sc);
}

static void attention_want(const void *cfg, const lens *c, const int *indptr, const prog *p,
                           rxk_buffers *in, double *want) {
  ref_attention(cfg, c, indptr, param(p, in, 0), param(p, in, 1), param(p, in, 2), want);
}

static void test_attention(void) {
  static const attn_cfg cfgs[] = {
      {RX_DTYPE_F32, 4, 2, 16, 0}, {RX_DTYPE_F32, 2, 2, 64, 0}, {RX_DTYPE_F16, 2, 1, 8, 0.3}};
  for (size_t ci = 0; ci < RX_ARRAY_LEN(cfgs); ci++) {
    const attn_cfg *c = &cfgs[ci];
    const char *t = ir_dtype_name(c->t);
    char text[768], what[160], scale[32] = "";
    if (c->scale) snprintf(scale, sizeof scale, ", scale=%g", c->scale);
    snprintf(text, sizeof text,
             "graph_fn main(q: %s[total, %d, %d], k: %s[total, %d, %d], v: %s[total, %d, %d], "
             "indptr: i32[nb]) {\n  y = ragged_attention(q, k, v, indptr%s)\n  return y\n}\n",
             t, c->h, c->d, t, c->kvh, c->d, t, c->kvh, c->d, scale);
    snprintf(what, sizeof what, "ragged_attention %s H=%d KVH=%d d=%d%s", t, c->h, c->kvh, c->d,
             scale);
    run_cases(text, what, attention_want, c);
  }
}

/* ------------------------------------------------------------------------------------------
 * row-wise ops on the packed form: nothing ragged about them
 * ------------------------------------------------------------------------------------------ */

enum { RW_DIM = 32, RW_OUT = 24 };

/* rms_norm(x, w) (eps 1e-5), matmul(x, w) and add(x, w) of x f32[total, 32] per row (the
 * program of add(x, x) takes x twice: two buffers, filled independently here). */
static void ref_rowwise(int op, const rx_interp_arg *x, const rx_interp_arg *w, int total,
                        double *out) {
  const float *xd = x->data, *wd = w->data;
  for (int r = 0; r < total; r++) {
    const float *row = xd + (size_t)r * RW_DIM;
    if (op == 0) {
      double ss = 0;
      for (int j = 0; j < RW_DIM; j++) ss += (double)row[j] * row[j];
      double inv = 1.0 / sqrt(ss / RW_DIM + 1e-5);
      for (int j = 0; j < RW_DIM; j++) out[(size_t)r * RW_DIM + j] = row[j] * inv * wd[j];
    } else if (op == 1) {
      for (int o = 0; o < RW_OUT; o++) {
        double acc = 0;
        for (int j = 0; j < RW_DIM; j++) acc += (double)row[j] * wd[j * RW_OUT + o];
        out[(size_t)r * RW_OUT + o] = acc;
      }
    } else {
      for (int j = 0; j < RW_DIM; j++)
        out[(size_t)r * RW_DIM + j] = (double)row[j] + wd[(size_t)r * RW_DIM + j];
    }
  }
}

static void rowwise_want(const void *cfg, const lens *c, const int *indptr, const prog *p,
                         rxk_buffers *in, double *want) {
  ref_rowwise(*(const int *)cfg, param(p, in, 0), param(p, in, 1), indptr[c->n], want);
}

static void test_rowwise(void) {
  static const struct {
    const char *params, *call, *want; /* want: the deduced struct info of y */
  } ops[] = {
      {"x: f32[total, 32] ragged(indptr, nb - 1), w: f32[32], indptr: i32[nb]", "rms_norm(x, w)",
       "f32[total, 32] ragged(indptr, nb - 1)"},
      {"x: f32[total, 32] ragged(indptr, nb - 1), w: f32[32, 24], indptr: i32[nb]", "matmul(x, w)",
       "f32[total, 24] ragged(indptr, nb - 1)"},
      {"x: f32[total, 32], indptr: i32[nb]", "add(x, x)", "f32[total, 32]"},
  };
  static const int ids[] = {0, 1, 2};
  for (int oi = 0; oi < (int)RX_ARRAY_LEN(ops); oi++) {
    char text[512], what[128];
    snprintf(text, sizeof text, "graph_fn main(%s) {\n  y = %s\n  return y\n}\n", ops[oi].params,
             ops[oi].call);
    snprintf(what, sizeof what, "packed %s", ops[oi].call);
    /* the deduced result keeps total symbolic (and the ragged annotation) */
    rx_module *m = NULL;
    char *msg = rxk_verify_text(what, text, &m);
    rx_strbuf sb = {0};
    if (m)
      ir_sinfo_print(&sb, ir_module_graph_fn(m, "main")->body.blocks[0]->bindings[0]->var->sinfo);
    if (!m || strcmp(sb.data, ops[oi].want))
      rxk_fail(&st, "%s: deduced %s, want %s (%s)", what, sb.data ? sb.data : "nothing",
               ops[oi].want, msg ? msg : "");
    else
      st.passed++;
    base_strbuf_free(&sb);
    free(msg);
    if (m) rx_module_free(m);
    run_cases(text, what, rowwise_want, &ids[oi]);
  }
}

/* ------------------------------------------------------------------------------------------
 * hand-written programs with loaded loop bounds, through every schedule rule that takes them
 * ------------------------------------------------------------------------------------------ */

static void programs_want(const void *cfg, const lens *c, const int *indptr, const prog *p,
                          rxk_buffers *in, double *want) {
  int pi = *(const int *)cfg;
  const float *x = param(p, in, 0)->data;
  for (int s = 0; s < c->n; s++)
    for (int j = indptr[s]; j < indptr[s + 1]; j++) {
      if (pi == 0)
        want[j] = 2.0 * x[indptr[s] + indptr[s + 1] - 1 - j];
      else
        want[s] += x[j];
    }
}

static void test_programs(void) {
  static const char *const texts[] = {
      /* each row reversed, times 2: loop bounds from indptr, an index from its entries */
      "tensor_fn prog(x: f32[total], indptr: i32[nb], out y: f32[total]) {\n"
      "  for s in 0..nb - 1 {\n"
      "    for j in indptr[s]..indptr[s + 1] {\n"
      "      y[j] = x[i64(indptr[s]) + i64(indptr[s + 1]) - 1 - j] * 2.0\n"
      "    }\n"
      "  }\n"
      "}\n",
      /* row sums: a reduce over loaded bounds */
      "tensor_fn prog(x: f32[total], indptr: i32[b + 1], out y: f32[b]) {\n"
      "  for s in 0..b {\n"
      "    alloc acc: f32[1] local\n"
      "    reduce j in indptr[s]..indptr[s + 1] {\n"
      "      init { acc[0] = 0.0 }\n"
      "      update { acc[0] = acc[0] + x[j] }\n"
      "    }\n"
      "    y[s] = acc[0]\n"
      "  }\n"
      "}\n",
  };
  static const char *const names[] = {"program: rows reversed", "program: row sums (reduce)"};
  static const int ids[] = {0, 1};
  for (int pi = 0; pi < 2; pi++) run_cases(texts[pi], names[pi], programs_want, &ids[pi]);
}

/* ------------------------------------------------------------------------------------------
 * bad input
 * ------------------------------------------------------------------------------------------ */

static void test_errors(void) {
  static const struct {
    const char *text, *want;
  } bad[] = {
      {"graph_fn main(x: f32[total], indptr: f32[nb]) {\n  y = ragged_softmax(x, indptr)\n"
       "  return y\n}\n",
       "ragged_softmax expects indptr (argument 1) as i32[b + 1], got f32[nb]"},
      {"graph_fn main(x: f32[total], indptr: i32[nb, 2]) {\n  y = ragged_softmax(x, indptr)\n"
       "  return y\n}\n",
       "ragged_softmax expects indptr (argument 1) as i32[b + 1], got i32[nb, 2]"},
      {"graph_fn main(x: i32[total], indptr: i32[nb]) {\n  y = ragged_softmax(x, indptr)\n"
       "  return y\n}\n",
       "ragged_softmax"},
      {"graph_fn main(q: f32[total, 4, 8], k: f32[total, 2, 8], indptr: i64[nb]) {\n"
       "  y = ragged_attention(q, k, k, indptr)\n  return y\n}\n",
       "ragged_attention expects indptr (argument 3) as i32[b + 1], got i64[nb]"},
      {"graph_fn main(q: f32[total, 4, 8], k: f32[7, 2, 8], indptr: i32[nb]) {\n"
       "  y = ragged_attention(q, k, k, indptr)\n  return y\n}\n",
       "ragged_attention expects k (argument 1) as f32[total, KVH, d]"},
      {"graph_fn main(q: f32[total, 4, 8], k: f32[total, 3, 8], indptr: i32[nb]) {\n"
       "  y = ragged_attention(q, k, k, indptr)\n  return y\n}\n",
       "a multiple of k's"},
      {"graph_fn main(x: f32[total] ragged(a, nb - 1), a: i32[nb], b: i32[nb]) {\n"
       "  y = ragged_softmax(x, b)\n  return y\n}\n",
       "ragged_softmax: argument 0 is ragged by 'a', but the offsets given are 'b'"},
      {"tensor_fn f(x: f32[n], out y: f32[n]) {\n  let sym m = x[0]\n  y[0] = 0.0\n}\n",
       "a symbolic let needs an integer value, found f32"},
      {"tensor_fn f(x: f32[n], out y: f32[n]) {\n  for j in 0..x[0] {\n    y[j] = 0.0\n  }\n}\n",
       "a loop bound that loads must be an integer, found f32"},
  };
  for (size_t i = 0; i < RX_ARRAY_LEN(bad); i++) {
    char *msg = rxk_verify_text("bad.rx", bad[i].text, NULL);
    if (msg && strstr(msg, bad[i].want) && strstr(msg, "bad.rx:"))
      st.passed++;
    else
      rxk_fail(&st, "bad input %zu: want an error with '%s' and its place, got: %s", i, bad[i].want,
               msg ? msg : "(none)");
    free(msg);
  }
  /* the host check of an offsets table */
  static const struct {
    int n, indptr[6];
    int64_t total;
    const char *want;
  } offs[] = {
      {4, {0, 3, 5, 9}, 10, "indptr[3] = 9, the last offset, is not total = 10"},
      {4, {0, 5, 3, 9}, 9, "indptr[2] = 3 is below indptr[1] = 5"},
      {3, {1, 3, 9}, 9, "indptr[0] = 1"},
      {0, {0}, 0, "at least one entry"},
  };
  for (size_t i = 0; i < RX_ARRAY_LEN(offs); i++) {
    rx_status s = rx_rt_check_indptr(offs[i].indptr, offs[i].n, offs[i].total);
    if (s && strstr(rx_status_message(s), offs[i].want))
      st.passed++;
    else
      rxk_fail(&st, "indptr check %zu: want '%s', got: %s", i, offs[i].want,
               s ? rx_status_message(s) : "(accepted)");
    rx_status_free(s);
  }
}

int main(int argc, char **argv) {
  (void)argv;
  setvbuf(stdout, NULL, _IOLBF, 0);
  filter = argc > 2 ? argv[2] : getenv("RX_KERNEL_FILTER");
  /* the compilers the SIMT emulator starts must not inherit a sanitizer preload */
  unsetenv("LD_PRELOAD");
  test_errors();
  rxk_rt_open(&vk, "vulkan:0");
  test_softmax();
  test_attention();
  test_rowwise();
  test_programs();
  char why[600];
  if (!rxk_rt_close(&vk, why, sizeof why)) rxk_fail(&st, "Vulkan: %s", why);
  printf("largest normalized errors: f32 %.2g, f16 %.2g\n", worst[RX_DTYPE_F32],
         worst[RX_DTYPE_F16]);
  printf("ragged: %d passed, %d failed, %d skipped\n", st.passed, st.failed, st.skipped);
  return st.failed ? 1 : 0;
}
