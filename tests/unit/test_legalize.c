/* Tests of legalization (ops/legalize.c, passes/legalize.c), the new ops' deduction and pattern
 * kinds, and the .npy reader/writer (base/npy.c).
 *
 * The differential part reads tests/fixtures/ops/manifest.txt (written by
 * tests/fixtures/gen_ops.py from NumPy/PyTorch): for every case it parses
 *   graph_fn f(PARAMS) { y = EXPR  return y }
 * normalizes, runs pass_legalize, normalizes and verifies again, checks that no op call is
 * left and that the printed module parses back to the same text, then evaluates the function:
 * each call_tensor runs in the reference interpreter on the fixture inputs (outputs allocated
 * from out=, scalar parameters from dims= under the case's binding of the symbolic dims), and
 * the result is compared with the fixture outputs: |got - want| <= tol * (1 + |want|), exact
 * for integers and bools, NaN only where NaN is expected. */
#include "base/npy.h"
#include "check.h"
#include "interp/graph_interp.h"
#include "interp/interp.h"
#include "ops/legalize.h"
#include "passes/passes.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *tests_dir;

/* ------------------------------------------------------------------------------------------
 * a small evaluator of legalized graph functions
 * ------------------------------------------------------------------------------------------ */

typedef struct val {
  bool tuple;
  rx_npy t; /* tensor (t.data owned when owned) */
  bool owned;
  struct val **fields;
  int nfields;
} val;

typedef struct env {
  const char *names[256];
  val *vals[256];
  int n;
  const rx_expr *vars[32]; /* symbolic binding */
  int64_t values[32];
  int nvars;
} env;

static val *lookup(env *e, const char *name) {
  for (int i = e->n - 1; i >= 0; i--)
    if (e->names[i] == name) return e->vals[i];
  return NULL;
}

static void val_free(val *v) {
  if (!v) return;
  if (v->tuple) {
    for (int i = 0; i < v->nfields; i++) val_free(v->fields[i]);
    free(v->fields);
  } else if (v->owned) {
    free(v->t.data);
  }
  free(v);
}

static bool eval_dim(env *e, const rx_expr *d, int64_t *out) {
  rx_expr_env ee = {e->vars, e->values, (size_t)e->nvars};
  return sym_expr_eval(d, &ee, out);
}

static val *tensor_of(env *e, const rx_sinfo *s, char *err, size_t errn) {
  if (s->kind != RX_SINFO_TENSOR || s->ndim < 0 || !s->shape) {
    snprintf(err, errn, "output struct info without a shape");
    return NULL;
  }
  val *v = calloc(1, sizeof *v);
  v->owned = true;
  v->t.dtype = s->dtype;
  v->t.ndim = s->ndim;
  for (int i = 0; i < s->ndim; i++) {
    if (!eval_dim(e, s->shape[i], &v->t.shape[i]) || v->t.shape[i] < 0) {
      snprintf(err, errn, "cannot evaluate output dim %d", i);
      free(v);
      return NULL;
    }
  }
  v->t.nbytes = base_npy_count(&v->t) * base_npy_elem_size(s->dtype);
  v->t.data = calloc(1, v->t.nbytes ? v->t.nbytes : 1);
  return v;
}

/* The value of an atom (VAR, TUPLE of atoms, GET_ITEM). Borrowed unless *fresh. */
static val *eval_atom(env *e, const rx_node *n, char *err, size_t errn) {
  switch (n->kind) {
  case RX_NODE_VAR: {
    val *v = lookup(e, n->var->name);
    if (!v) snprintf(err, errn, "unbound variable %s", n->var->name);
    return v;
  }
  case RX_NODE_GET_ITEM: {
    val *t = eval_atom(e, n->args[0], err, errn);
    if (!t) return NULL;
    if (!t->tuple || n->index >= t->nfields) {
      snprintf(err, errn, "bad tuple access");
      return NULL;
    }
    return t->fields[n->index];
  }
  default:
    snprintf(err, errn, "unsupported node kind %d in the evaluator", (int)n->kind);
    return NULL;
  }
}

/* Evaluates a binding's value into a new val. */
static val *eval_value(env *e, rx_module *m, const rx_node *n, char *err, size_t errn) {
  if (n->kind == RX_NODE_TUPLE) {
    val *v = calloc(1, sizeof *v);
    v->tuple = true;
    v->fields = calloc((size_t)n->nargs + 1, sizeof *v->fields);
    v->nfields = n->nargs;
    for (int i = 0; i < n->nargs; i++) {
      val *f = eval_atom(e, n->args[i], err, errn);
      if (!f) {
        val_free(v);
        return NULL;
      }
      v->fields[i] = calloc(1, sizeof(val));
      *v->fields[i] = *f;
      v->fields[i]->owned = false;
      v->fields[i]->tuple = false;
    }
    return v;
  }
  if (n->kind == RX_NODE_VAR || n->kind == RX_NODE_GET_ITEM) {
    val *f = eval_atom(e, n, err, errn);
    if (!f) return NULL;
    if (f->tuple) {
      snprintf(err, errn, "tuple aliasing is not supported by the test evaluator");
      return NULL;
    }
    val *v = calloc(1, sizeof *v);
    *v = *f;
    v->owned = false;
    return v;
  }
  if (n->kind != RX_NODE_CALL_TENSOR) {
    snprintf(err, errn, "binding of kind %d is not a call_tensor", (int)n->kind);
    return NULL;
  }
  const rx_tensor_fn *f = n->tfn;
  rx_interp_arg args[64];
  memset(args, 0, sizeof args);
  if (f->nparams > 64) {
    snprintf(err, errn, "too many parameters");
    return NULL;
  }
  const rx_sinfo *const *outs = &n->out;
  int nouts = 1;
  if (n->out->kind == RX_SINFO_TUPLE) {
    outs = n->out->fields;
    nouts = n->out->nfields;
  }
  val *res = calloc(1, sizeof *res);
  val *outv[64] = {0};
  if (n->out->kind == RX_SINFO_TUPLE) {
    res->tuple = true;
    res->fields = calloc((size_t)nouts + 1, sizeof *res->fields);
    res->nfields = nouts;
  }
  int ai = 0, oi = 0, si = 0;
  for (int i = 0; i < f->nparams; i++) {
    const rx_param *p = f->params[i];
    if (p->kind == RX_PARAM_SCALAR) {
      if (si >= n->nextra || !eval_dim(e, n->extra_dims[si++], &args[i].value)) {
        snprintf(err, errn, "cannot evaluate scalar argument %d", si);
        val_free(res);
        return NULL;
      }
      continue;
    }
    rx_npy *t;
    if (!p->is_output) {
      val *a = ai < n->nargs ? eval_atom(e, n->args[ai++], err, errn) : NULL;
      if (!a || a->tuple) {
        if (a) snprintf(err, errn, "tuple passed to a buffer");
        val_free(res);
        return NULL;
      }
      t = &a->t;
    } else {
      val *o = oi < nouts ? tensor_of(e, outs[oi], err, errn) : NULL;
      if (!o) {
        val_free(res);
        return NULL;
      }
      if (res->tuple)
        res->fields[oi] = o;
      else
        *res = *o, free(o), o = res;
      outv[oi++] = o;
      t = &o->t;
    }
    args[i].data = t->data;
    args[i].ndim = t->ndim;
    args[i].dtype = t->dtype;
    for (int d = 0; d < t->ndim && d < RX_MAX_NDIM; d++) args[i].shape[d] = t->shape[d];
  }
  rx_status st = interp_run(m, f, args, f->nparams, NULL);
  if (st) {
    snprintf(err, errn, "interpreter: %s", rx_status_message(st));
    rx_status_free(st);
    val_free(res);
    return NULL;
  }
  (void)outv;
  return res;
}

static double elem(const rx_npy *a, size_t i) {
  switch (a->dtype) {
  case RX_DTYPE_F32:
    return ((const float *)a->data)[i];
  case RX_DTYPE_F16:
    return base_f16_to_f32(((const uint16_t *)a->data)[i]);
  case RX_DTYPE_BF16:
    return base_bf16_to_f32(((const uint16_t *)a->data)[i]);
  case RX_DTYPE_I64:
    return (double)((const int64_t *)a->data)[i];
  case RX_DTYPE_I32:
    return ((const int32_t *)a->data)[i];
  case RX_DTYPE_I16:
    return ((const int16_t *)a->data)[i];
  case RX_DTYPE_I8:
    return ((const int8_t *)a->data)[i];
  default:
    return ((const uint8_t *)a->data)[i];
  }
}

/* Compares got with want; returns a message or NULL. */
static const char *compare(const rx_npy *got, const rx_npy *want, double tol, char *buf, size_t n) {
  if (got->dtype != want->dtype) {
    snprintf(buf, n, "dtype %d vs %d", (int)got->dtype, (int)want->dtype);
    return buf;
  }
  if (got->ndim != want->ndim) {
    snprintf(buf, n, "rank %d vs %d", got->ndim, want->ndim);
    return buf;
  }
  for (int i = 0; i < got->ndim; i++) {
    if (got->shape[i] != want->shape[i]) {
      snprintf(buf, n, "dim %d: %lld vs %lld", i, (long long)got->shape[i],
               (long long)want->shape[i]);
      return buf;
    }
  }
  size_t cnt = base_npy_count(got);
  bool fl = got->dtype == RX_DTYPE_F32 || got->dtype == RX_DTYPE_F16 || got->dtype == RX_DTYPE_BF16;
  for (size_t i = 0; i < cnt; i++) {
    double g = elem(got, i), w = elem(want, i);
    bool ok = fl ? (isnan(w) ? isnan(g) : (isinf(w) ? g == w : fabs(g - w) <= tol * (1 + fabs(w))))
                 : g == w;
    if (!ok) {
      snprintf(buf, n, "element %zu: got %.9g, want %.9g (tol %g)", i, g, w, tol);
      return buf;
    }
  }
  return NULL;
}

/* ------------------------------------------------------------------------------------------
 * manifest cases
 * ------------------------------------------------------------------------------------------ */

static char *field(char **p) {
  char *s = *p, *bar = strchr(s, '|');
  if (bar) {
    *bar = 0;
    *p = bar + 1;
  } else {
    *p = s + strlen(s);
  }
  return s;
}

static int split_ws(char *s, char **out, int max) {
  int n = 0;
  for (char *t = strtok(s, " "); t && n < max; t = strtok(NULL, " ")) out[n++] = t;
  return n;
}

static bool no_op_calls(const rx_seq *seq) {
  for (int i = 0; i < seq->nblocks; i++)
    for (int k = 0; k < seq->blocks[i]->nbindings; k++)
      if (seq->blocks[i]->bindings[k]->value->kind == RX_NODE_CALL) return false;
  return true;
}

static char *print_module(const rx_module *m) {
  rx_strbuf b = {0};
  ir_module_print(&b, m);
  return base_strbuf_take(&b);
}

static int ncases, ncase_fail;

static void run_case(char *lineb) {
  char *p = lineb;
  char *name = field(&p), *params = field(&p), *expr = field(&p), *dims = field(&p);
  char *inputs = field(&p), *outputs = field(&p), *tol_s = field(&p);
  double tol = atof(tol_s);
  ncases++;
  int before = check_failed;
  char text[4096];
  snprintf(text, sizeof text, "graph_fn f(%s) {\n  y = %s\n  return y\n}\n", params, expr);
  rx_module *m = rx_module_new();
  rx_diag d;
  base_diag_init(&d);
  env e = {0};
  val *owned_in[32] = {0};
  int nin = 0;
  char err[1024] = "";
  bool ok = ir_parse_module(m, name, text, strlen(text), &d) && ops_module_normalize(m, &d);
  CHECK_MSG(ok, "%s: parse/normalize: %s", name, rx_diag_text(&d));
  if (!ok) goto out;
  ok = pass_legalize(m, &d);
  CHECK_MSG(ok, "%s: legalize: %s", name, rx_diag_text(&d));
  if (!ok) goto out;
  ok = ops_module_normalize(m, &d) && ir_module_verify(m, &d);
  CHECK_MSG(ok, "%s: normalize+verify after legalize: %s", name, rx_diag_text(&d));
  if (!ok) {
    char *t = print_module(m);
    printf("%s\n", t);
    free(t);
    goto out;
  }
  rx_graph_fn *g = ir_module_graph_fn(m, "f");
  CHECK_MSG(g && no_op_calls(&g->body), "%s: op calls remain after legalization", name);
  if (!g) goto out;
  /* print -> parse -> print is stable */
  {
    char *t1 = print_module(m);
    rx_module *m2 = rx_module_new();
    rx_diag d2;
    base_diag_init(&d2);
    bool ok2 = ir_parse_module(m2, "reprint", t1, strlen(t1), &d2) && ops_module_normalize(m2, &d2);
    char *t2 = ok2 ? print_module(m2) : NULL;
    CHECK_MSG(ok2 && strcmp(t1, t2) == 0, "%s: the legalized module does not print/parse back: %s",
              name, rx_diag_text(&d2));
    free(t1);
    free(t2);
    base_diag_free(&d2);
    rx_module_free(m2);
  }
  /* symbolic binding */
  char dims_text[256];
  snprintf(dims_text, sizeof dims_text, "%s", dims);
  {
    char *ds[32];
    int nd = split_ws(dims_text, ds, 32);
    for (int i = 0; i < nd; i++) {
      char *eq = strchr(ds[i], '=');
      if (!eq) continue;
      *eq = 0;
      e.vars[e.nvars] = sym_expr_var(m->ctx, ds[i]);
      e.values[e.nvars++] = atoll(eq + 1);
    }
  }
  /* inputs */
  {
    char *fs[32];
    int nf = split_ws(inputs, fs, 32);
    CHECK_MSG(nf == g->nparams, "%s: %d input files for %d parameters", name, nf, g->nparams);
    if (nf != g->nparams) goto out;
    for (int i = 0; i < nf; i++) {
      char path[1024];
      snprintf(path, sizeof path, "%s/fixtures/ops/%s", tests_dir, fs[i]);
      val *v = calloc(1, sizeof *v);
      v->owned = true;
      rx_status st = base_npy_read(path, &v->t);
      CHECK_MSG(!st, "%s: %s", name, rx_status_message(st));
      if (st) {
        rx_status_free(st);
        free(v);
        goto out;
      }
      owned_in[nin++] = v;
      e.names[e.n] = g->params[i]->name;
      e.vals[e.n++] = v;
    }
  }
  /* run the bindings */
  for (int b = 0; b < g->body.nblocks; b++) {
    for (int k = 0; k < g->body.blocks[b]->nbindings; k++) {
      rx_binding *bd = g->body.blocks[b]->bindings[k];
      val *v = eval_value(&e, m, bd->value, err, sizeof err);
      CHECK_MSG(v != NULL, "%s: binding %s: %s", name, bd->var->name, err);
      if (!v || e.n == 256) {
        if (!v) {
          char *t = print_module(m);
          printf("%s\n", t);
          free(t);
        }
        val_free(v);
        goto out;
      }
      e.names[e.n] = bd->var->name;
      e.vals[e.n++] = v;
    }
  }
  {
    val *r = eval_atom(&e, g->body.result, err, sizeof err);
    CHECK_MSG(r != NULL, "%s: result: %s", name, err);
    if (!r) goto out;
    char *fs[32];
    int nf = split_ws(outputs, fs, 32);
    int nr = r->tuple ? r->nfields : 1;
    CHECK_MSG(nf == nr, "%s: %d output files for %d results", name, nf, nr);
    for (int i = 0; i < nf && i < nr; i++) {
      char path[1024];
      snprintf(path, sizeof path, "%s/fixtures/ops/%s", tests_dir, fs[i]);
      rx_npy want;
      rx_status st = base_npy_read(path, &want);
      CHECK_MSG(!st, "%s: %s", name, rx_status_message(st));
      if (st) {
        rx_status_free(st);
        continue;
      }
      char buf[256];
      const char *msg = compare(r->tuple ? &r->fields[i]->t : &r->t, &want, tol, buf, sizeof buf);
      CHECK_MSG(!msg, "%s (%s at %s): output %d: %s", name, expr, dims, i, msg);
      base_npy_free(&want);
    }
  }
out:
  /* inputs are owned by owned_in; bindings' vals own their outputs */
  for (int i = nin; i < e.n; i++) val_free(e.vals[i]);
  for (int i = 0; i < nin; i++) val_free(owned_in[i]);
  base_diag_free(&d);
  rx_module_free(m);
  if (check_failed != before) ncase_fail++;
}

static void test_manifest(void) {
  char path[1024];
  snprintf(path, sizeof path, "%s/fixtures/ops/manifest.txt", tests_dir);
  char *text;
  size_t len;
  rx_status st = base_read_file(path, &text, &len);
  CHECK_MSG(!st, "manifest: %s", rx_status_message(st));
  if (st) {
    rx_status_free(st);
    return;
  }
  for (char *line = text; line < text + len;) {
    char *nl = strchr(line, '\n');
    if (nl) *nl = 0;
    if (line[0] && line[0] != '#') {
      char *copy = strdup(line);
      run_case(copy);
      free(copy);
    }
    if (!nl) break;
    line = nl + 1;
  }
  free(text);
  CHECK_MSG(ncases >= 100, "only %d manifest cases", ncases);
  printf("manifest: %d cases, %d failed\n", ncases, ncase_fail);
}

/* ------------------------------------------------------------------------------------------
 * targeted tests
 * ------------------------------------------------------------------------------------------ */

/* Parses, normalizes and legalizes text; returns the module (NULL and the diag text in err on
 * failure). */
static rx_module *legalize_text(const char *text, char *err, size_t errn) {
  rx_module *m = rx_module_new();
  rx_diag d;
  base_diag_init(&d);
  bool ok = ir_parse_module(m, "t", text, strlen(text), &d) && ops_module_normalize(m, &d) &&
            pass_legalize(m, &d) && ops_module_normalize(m, &d) && ir_module_verify(m, &d);
  snprintf(err, errn, "%s", rx_diag_text(&d));
  base_diag_free(&d);
  if (!ok) {
    rx_module_free(m);
    return NULL;
  }
  return m;
}

static int count_tensor_fns(const rx_module *m) {
  int n = 0;
  for (size_t i = 0; i < m->items.len; i++) n += m->items.data[i].kind == RX_ITEM_TENSOR;
  return n;
}

static void test_reuse(void) {
  char err[2048];
  rx_module *m =
      legalize_text("graph_fn f(x: f32[n, 4], z: f32[n, 4]) {\n"
                    "  a = exp(x)\n  b = exp(z)\n  c = softmax(a)\n  d = softmax(b, axis=0)\n"
                    "  e = add(c, 1.0)\n  g = add(d, 2.0)\n  h = add(e, 1.0)\n"
                    "  return (g, h)\n}\n",
                    err, sizeof err);
  CHECK_MSG(m, "reuse: %s", err);
  if (!m) return;
  /* exp shared; softmax axis -1 and axis 0 differ; add 1.0 shared, add 2.0 separate */
  CHECK_MSG(count_tensor_fns(m) == 5, "reuse: %d programs, expected 5", count_tensor_fns(m));
  rx_module_free(m);
}

static void test_scalar_param(void) {
  char err[2048];
  rx_module *m = legalize_text("graph_fn f(x: f32[n]) {\n  y = full([n * 2], 1.5)\n  return y\n}\n",
                               err, sizeof err);
  CHECK_MSG(m, "scalar param: %s", err);
  if (!m) return;
  rx_graph_fn *g = ir_module_graph_fn(m, "f");
  rx_node *v = g->body.blocks[0]->bindings[0]->value;
  CHECK_MSG(v->kind == RX_NODE_CALL_TENSOR && v->nextra == 1 &&
                v->extra_dims[0] == sym_expr_var(m->ctx, "n"),
            "full([n * 2]) should pass dims=[n]");
  const rx_tensor_fn *t = v->tfn;
  int nscal = 0;
  for (int i = 0; t && i < t->nparams; i++) nscal += t->params[i]->kind == RX_PARAM_SCALAR;
  CHECK_MSG(nscal == 1, "full([n * 2]) program has %d scalar params", nscal);
  rx_module_free(m);

  /* a symbolic variable named like a loop variable does not collide */
  m = legalize_text(
      "graph_fn f(x: f32[i0, r], w: f32[r, j]) {\n  y = matmul(x, w)\n  return y\n}\n", err,
      sizeof err);
  CHECK_MSG(m, "names: %s", err);
  if (m) rx_module_free(m);
}

/* i64 values a double cannot hold keep their exact value: full of each, legalized, run in the
 * interpreter; a const tensor of them as the interpreter and the host program's weights take
 * it (ir_const_bytes). */
static void test_int64_exact(void) {
  static const int64_t want[4] = {INT64_MAX, INT64_MIN, (INT64_C(1) << 53) + 1,
                                  -(INT64_C(1) << 53) - 1};
  char err[2048];
  rx_module *m = legalize_text(
      "graph_fn f() {\n  a = full([2], 9223372036854775807)\n  b = full([2], "
      "-9223372036854775808)\n"
      "  c = full([2], 9007199254740993)\n  d = full([2], -9007199254740993)\n"
      "  e = const(i64[4], [9223372036854775807, -9223372036854775808, 9007199254740993, "
      "-9007199254740993])\n  return (a, b, c, d, e)\n}\n",
      err, sizeof err);
  CHECK_MSG(m, "int64: %s", err);
  if (!m) return;
  rx_graph_fn *g = ir_module_graph_fn(m, "f");
  rx_block *bl = g->body.blocks[0];
  for (int k = 0; k < 5 && k < bl->nbindings; k++) {
    const rx_node *v = bl->bindings[k]->value;
    int64_t got[4] = {0, 0, 0, 0};
    if (k == 4) {
      CHECK_MSG(v->kind == RX_NODE_CONST, "int64: e is no const");
      if (v->kind != RX_NODE_CONST) break;
      ir_const_bytes(v, got, 4);
      for (int i = 0; i < 4; i++)
        CHECK_MSG(got[i] == want[i], "int64 const [%d]: %lld, expected %lld", i, (long long)got[i],
                  (long long)want[i]);
      break;
    }
    CHECK_MSG(v->kind == RX_NODE_CALL_TENSOR && v->tfn && v->tfn->nparams == 1,
              "int64: binding %d is no call_tensor of one parameter", k);
    if (v->kind != RX_NODE_CALL_TENSOR || !v->tfn || v->tfn->nparams != 1) continue;
    rx_interp_arg out = {.data = got, .shape = {2}, .ndim = 1, .dtype = RX_DTYPE_I64};
    rx_status st = interp_run(m, v->tfn, &out, 1, NULL);
    CHECK_MSG(!st, "int64 full %d: %s", k, st ? rx_status_message(st) : "");
    rx_status_free(st);
    CHECK_MSG(got[0] == want[k] && got[1] == want[k], "int64 full %d: %lld %lld, expected %lld", k,
              (long long)got[0], (long long)got[1], (long long)want[k]);
  }
  rx_module_free(m);
}

static void test_errors(void) {
  static const struct {
    const char *text, *want;
  } cases[] = {
      {"graph_fn f(x: f32[...]) {\n  y = exp(x)\n  return y\n}\n", "cannot legalize exp"},
      {"graph_fn f(x: f32[ndim=2]) {\n  y = softmax(x)\n  return y\n}\n", "f32[ndim=2]"},
      {"graph_fn f(x: any[n]) {\n  y = neg(x)\n  return y\n}\n", "unknown dtype"},
      {"graph_fn f(x: f32[2, s, 3, 7], c: f32[s, 7]) {\n  y = rope(x, c, c)\n  return y\n}\n",
       "even head dim"},
      {"graph_fn f(x: f32[1, 3, 8, 8], w: f32[4, 2, 3, 3]) {\n  y = conv2d(x, w)\n  return y\n}\n",
       "input channels"},
      {"graph_fn f(q: f32[1, 2, s, 8], k: f32[1, 2, t, 4]) {\n  y = attention(q, k, k)\n  return "
       "y\n}\n",
       "attention"},
      {"graph_fn f(x: f32[1, 3, 8, 8]) {\n  y = max_pool2d(x, kernel=[2, 2], padding=[2, 2])\n  "
       "return y\n}\n",
       "padding below the window extent"},
      {"graph_fn f(x: f32[n]) {\n  y = gelu(x, approximate=\"fast\")\n  return y\n}\n",
       "approximate"},
      {"graph_fn f(x: f32[n]) {\n  y = clip(x, min=2.0, max=1.0)\n  return y\n}\n", "min <= max"},
      {"graph_fn f(x: f32[n, 3], m: f32[3]) {\n  y = batch_norm(x, m, m, m, m, axis=0)\n  return "
       "y\n}\n",
       "batch_norm"},
  };
  for (size_t i = 0; i < RX_ARRAY_LEN(cases); i++) {
    rx_module *m = rx_module_new();
    rx_diag d;
    base_diag_init(&d);
    bool ok = ir_parse_module(m, "err", cases[i].text, strlen(cases[i].text), &d) &&
              ops_module_normalize(m, &d) && pass_legalize(m, &d);
    CHECK_MSG(!ok && strstr(rx_diag_text(&d), cases[i].want) && strstr(rx_diag_text(&d), "err:"),
              "error case %zu: expected an error with '%s' and a location, got: %s", i,
              cases[i].want, rx_diag_text(&d));
    base_diag_free(&d);
    rx_module_free(m);
  }
}

static void test_patterns(void) {
  int n;
  const rx_op *const *all = ops_op_all(&n);
  for (int i = 0; i < n; i++)
    CHECK_MSG(all[i]->pattern != RX_PATTERN_UNKNOWN, "op %s has no pattern kind", all[i]->name);
  static const struct {
    const char *op;
    rx_pattern p;
  } want[] = {{"exp", RX_PATTERN_ELEMWISE},       {"add", RX_PATTERN_BROADCAST},
              {"permute", RX_PATTERN_INJECTIVE},  {"sum", RX_PATTERN_REDUCTION},
              {"softmax", RX_PATTERN_REDUCTION},  {"matmul", RX_PATTERN_OUT_FUSABLE},
              {"conv2d", RX_PATTERN_OUT_FUSABLE}, {"attention", RX_PATTERN_OPAQUE},
              {"gelu", RX_PATTERN_ELEMWISE},      {"batch_norm", RX_PATTERN_BROADCAST}};
  for (size_t i = 0; i < RX_ARRAY_LEN(want); i++) {
    const rx_op *op = ops_op_lookup(want[i].op, strlen(want[i].op));
    CHECK_MSG(op && op->pattern == want[i].p, "pattern of %s: %s", want[i].op,
              op ? ir_pattern_name(op->pattern) : "missing");
  }
  CHECK_MSG(!strcmp(ir_pattern_name(RX_PATTERN_OUT_FUSABLE), "out_fusable"), "pattern name");
  CHECK_MSG(!strcmp(ir_pattern_name(RX_PATTERN_ELEMWISE), "elementwise"), "one name per pattern");
  /* ops.def's legalization column: every op has a generator but the host-level ones
   * (tensor_to_shape, and the collectives, which become call_externs of the runtime's builtins:
   * passes/legalize_dist.c), and the table's ids are its rows */
  for (int i = 0; i < n; i++) {
    bool host = all[i]->id == RX_OP_tensor_to_shape || ops_op_is_collective(all[i]);
    CHECK_MSG(all[i]->id == (rx_op_id)i, "op %s has id %d at row %d", all[i]->name, (int)all[i]->id,
              i);
    CHECK_MSG(ops_legalize_has_generator(all[i]) != host, "op %s: %s", all[i]->name,
              host ? "a host-level op has a generator" : "no legalization in ops.def");
  }
}

/* Every op has a legalization: a generic module exercising the ops without fixtures too. */
static void test_all_ops_legalize(void) {
  char err[4096];
  rx_module *m = legalize_text(
      "graph_fn f(x: f32[n, 8], b: bool[n, 8], i: i64[3]) {\n"
      "  a = not(b)\n  c = logical_and(a, b)\n  d = logical_or(a, b)\n  e = equal(x, x)\n"
      "  g = not_equal(x, 1.0)\n  h = less_equal(x, x)\n  k = greater(x, x)\n"
      "  l = greater_equal(x, 0.5)\n  p = pow(x, 2.0)\n  q = take(x, i, axis=1)\n"
      "  r = sum(x, axes=[0, 1], keepdims=true)\n"
      "  return (a, c, d, e, g, h, k, l, p, q, r)\n}\n",
      err, sizeof err);
  CHECK_MSG(m, "all ops: %s", err);
  if (m) rx_module_free(m);
  int n;
  const rx_op *const *all = ops_op_all(&n);
  /* every registered op name appears in the manifest, in the module above, or is an alias */
  char path[1024];
  snprintf(path, sizeof path, "%s/fixtures/ops/manifest.txt", tests_dir);
  char *text = NULL;
  size_t len;
  rx_status st = base_read_file(path, &text, &len);
  if (st) {
    rx_status_free(st);
    return;
  }
  static const char *const extra[] = {
      "not", "logical_and", "logical_or", "equal", "not_equal", "less_equal", "greater",
      "greater_equal", "pow", "sum",
      /* host-level (never legalized): tests/unit/test_dynshape.c */
      "tensor_to_shape",
      /* against a C reference: tests/unit/test_attention.c */
      "kv_append", "paged_attention", "paged_decode_attention", "attention_merge",
      /* against a C reference: tests/unit/test_kv_rope.c */
      "kv_append_rope",
      /* against a padded C reference: tests/unit/test_ragged.c */
      "ragged_softmax", "ragged_attention",
      /* against a C reference (a sort, a double product): tests/unit/test_moe.c */
      "moe_group", "moe_matmul", "moe_gemv",
      /* against a C reference: tests/unit/test_quant.c */
      "quant_matmul", "quant_take",
      /* its run-time check, in the interpreter, the emulator and on Vulkan:
         tests/unit/test_index_check.c */
      "check_nonzero",
      /* against the ONNX reference's outputs: the node suite
         (test_onnx_nodes) and tests/onnx/nodes' symbolic cases */
      "scatter_elements", "einsum", "grid_sample", "det", "max_pool2d_index", "dft",
      "non_max_suppression", "tfidf", "roi_align",
      /* collectives, call_externs of the runtime's builtins: their shapes and builtins in
         tests/lit/dist/collectives.rx; all but send and recv computed across ranks in
         tests/unit/test_shard.c; the builtins themselves: runtime/ccl's tests */
      "allreduce", "allgather", "reduce_scatter", "broadcast", "send", "recv"};
  for (int i = 0; i < n; i++) {
    char pat[64];
    snprintf(pat, sizeof pat, "|%s(", all[i]->name);
    bool found = strstr(text, pat) != NULL;
    for (size_t k = 0; k < RX_ARRAY_LEN(extra) && !found; k++)
      found = !strcmp(extra[k], all[i]->name);
    CHECK_MSG(found, "op %s is covered by no test", all[i]->name);
  }
  free(text);
}

static void test_npy(void) {
  char path[] = "/tmp/rx_npy_testXXXXXX";
  int fd = mkstemp(path);
  CHECK_MSG(fd >= 0, "mkstemp");
  if (fd < 0) return;
  float v[6] = {1, 2, 3, 4, 5, -6.5f};
  rx_npy a = {.dtype = RX_DTYPE_F32, .ndim = 2, .shape = {2, 3}, .data = v, .nbytes = sizeof v};
  rx_status st = base_npy_write(path, &a);
  CHECK_MSG(!st, "npy write: %s", rx_status_message(st));
  rx_status_free(st);
  rx_npy b;
  st = base_npy_read(path, &b);
  CHECK_MSG(!st && b.dtype == RX_DTYPE_F32 && b.ndim == 2 && b.shape[0] == 2 && b.shape[1] == 3 &&
                memcmp(b.data, v, sizeof v) == 0,
            "npy round trip: %s", rx_status_message(st));
  rx_status_free(st);
  base_npy_free(&b);
  remove(path);
  (void)fd;
  /* malformed headers */
  static const struct {
    const char *hdr, *want;
  } bad[] = {
      {"{'descr': '<f4', 'fortran_order': True, 'shape': (2,), }", "Fortran"},
      {"{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }", "unsupported .npy dtype '>f4'"},
      {"{'descr': '<c8', 'fortran_order': False, 'shape': (2,), }", "unsupported .npy dtype"},
      {"{'descr': '<f4', 'shape': (2,), }", "lacks"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (4,), }", "truncated"},
  };
  for (size_t i = 0; i < RX_ARRAY_LEN(bad); i++) {
    unsigned char buf[256] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0};
    size_t hl = strlen(bad[i].hdr);
    buf[8] = (unsigned char)hl;
    memcpy(buf + 10, bad[i].hdr, hl);
    size_t len = 10 + hl + 8; /* 8 bytes of data: two f4 */
    rx_npy c;
    st = base_npy_parse(buf, len, "bad.npy", &c);
    CHECK_MSG(st && strstr(rx_status_message(st), bad[i].want) &&
                  strstr(rx_status_message(st), "bad.npy"),
              "npy error %zu: got '%s'", i, st ? rx_status_message(st) : "success");
    rx_status_free(st);
    base_npy_free(&c);
  }
  rx_npy c;
  st = base_npy_parse("\x93NUMPX", 6, "x.npy", &c);
  CHECK_MSG(st != NULL, "npy: bad magic accepted");
  rx_status_free(st);
  /* a committed fixture reads back with its dtype */
  snprintf(path, sizeof path, "/tmp/x");
  char fpath[1024];
  snprintf(fpath, sizeof fpath, "%s/fixtures/ops/take_1.idx.npy", tests_dir);
  st = base_npy_read(fpath, &c);
  CHECK_MSG(!st && c.dtype == RX_DTYPE_I64 && c.ndim == 1 && c.shape[0] == 7,
            "fixture take_1.idx.npy: %s", rx_status_message(st));
  rx_status_free(st);
  base_npy_free(&c);
}

int main(int argc, char **argv) {
  tests_dir = argc > 1 ? argv[1] : "tests";
  test_patterns();
  test_npy();
  test_reuse();
  test_scalar_param();
  test_int64_exact();
  test_errors();
  test_all_ops_legalize();
  test_manifest();
  return check_finish("legalize");
}
