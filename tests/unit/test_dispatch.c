/* tests/unit/test_dispatch.c: library dispatch (passes/dispatch.c). Which matmuls it sends to
 * the library (the HF Linear layout x @ W^T with its transpose as a flag, a plain B, a batch of
 * B, a row count that constants or facts put on either side of the threshold; not integer matmuls,
 * not a B whose batch differs), the module it makes (an `if` on the rows, the permute moved into
 * the generated branch, which fusion then folds), and its numbers: the dispatched module, legalized
 * and fused, run by the graph interpreter (which computes the library call on the host) at rows
 * 1, 7, 16, 17 (the threshold's two sides), 33, 100 and 1000 against a reference computed here,
 * for f16 and f32, and against the module compiled without dispatch. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "interp/graph_interp.h"
#include "passes/passes.h"
#include "relaxc/compiler.h"

/* x @ W^T (HF Linear), then an epilogue; q = x @ v (plain B); f32 and f16 variants by text */
static const char *const model_fmt =
    "graph_fn main(x: %1$s[n, 40], w: %1$s[24, 40], v: %1$s[40, 13]) -> (%1$s[n, 24], %1$s[n, "
    "13]) where n <= 4096 {\n"
    "  dataflow {\n"
    "    wt = permute(w, axes=[1, 0])\n"
    "    y = matmul(x, wt)\n"
    "    z = silu(y)\n"
    "    q = matmul(x, v)\n"
    "    r = (z, q)\n"
    "  }\n"
    "  return r\n"
    "}\n";

static rx_module *parse(const char *text) {
  rx_module *m = rx_module_new();
  rx_diag d;
  base_diag_init(&d);
  bool ok = ir_parse_module(m, "<dispatch>", text, strlen(text), &d) &&
            ops_module_normalize(m, &d) && ir_module_verify(m, &d);
  CHECK_MSG(ok, "rejected:\n%s", rx_diag_text(&d));
  base_diag_free(&d);
  if (!ok) {
    rx_module_free(m);
    return NULL;
  }
  return m;
}

static bool dispatch(rx_module *m, int64_t min_rows) {
  rx_dispatch_options o = {RX_DISPATCH_CUBLAS, min_rows};
  rx_diag d;
  base_diag_init(&d);
  bool ok = pass_dispatch(m, &o, &d) && ops_module_normalize(m, &d) && ir_module_verify(m, &d);
  CHECK_MSG(ok, "dispatch: %s", rx_diag_text(&d));
  base_diag_free(&d);
  return ok;
}

static bool lower(rx_module *m) {
  bool (*passes[])(rx_module *, rx_diag *) = {pass_legalize, pass_fuse_ops, pass_fuse_tensor,
                                              pass_dce};
  bool ok = true;
  for (size_t i = 0; i < sizeof passes / sizeof passes[0] && ok; i++) {
    rx_diag d;
    base_diag_init(&d);
    ok = passes[i](m, &d) && ops_module_normalize(m, &d) && ir_module_verify(m, &d);
    CHECK_MSG(ok, "pass %zu: %s", i, rx_diag_text(&d));
    base_diag_free(&d);
  }
  return ok;
}

static char *text_of(rx_module *m) {
  rx_strbuf b = {0};
  ir_module_print(&b, m);
  return base_strbuf_take(&b);
}

/* ---- which matmuls, and the module made ---- */
static void test_structure(void) {
  char src[2048];
  snprintf(src, sizeof src, model_fmt, "f16");
  rx_module *m = parse(src);
  if (!m || !dispatch(m, 17)) goto done;
  char *t = text_of(m);
  CHECK_MSG(strstr(t, "if prim(bool, 17 <= n)") != NULL, "an if on the rows:\n%s", t);
  CHECK_MSG(strstr(t, "call_extern(rx_cublaslt_matmul, x, w, prim(1), out=f16[n, 24])") != NULL,
            "x @ W^T passes W with trans_b = 1:\n%s", t);
  CHECK_MSG(strstr(t, "call_extern(rx_cublaslt_matmul, x, v, prim(0), out=f16[n, 13])") != NULL,
            "a plain B with trans_b = 0:\n%s", t);
  CHECK_MSG(strstr(t, "extern_fn rx_cublaslt_matmul(") != NULL, "the extern is declared");
  free(t);
  /* the permute went into the generated branch, and fusion folds it into the matmul there */
  if (lower(m)) {
    t = text_of(m);
    CHECK_MSG(strstr(t, "call_tensor(fused_permute_matmul, w, x") != NULL,
              "the generated branch is one fused kernel:\n%s", t);
    free(t);
  }
done:
  rx_module_free(m);
}

static void test_which(void) {
  static const struct {
    const char *src;
    const char *want; /* in the text after dispatch; NULL: unchanged (no extern call) */
  } cases[] = {
      /* constant rows: decided at compile time */
      {"graph_fn main(x: f32[32, 8], w: f32[8, 5]) -> f32[32, 5] {\n"
       "  dataflow {\n    y = matmul(x, w)\n  }\n  return y\n}\n",
       "y: f32[32, 5] = call_extern(rx_cublaslt_matmul, x, w, prim(0), out=f32[32, 5])"},
      {"graph_fn main(x: f32[4, 8], w: f32[8, 5]) -> f32[4, 5] {\n"
       "  dataflow {\n    y = matmul(x, w)\n  }\n  return y\n}\n",
       NULL},
      /* the facts decide: decode's `where b <= 16` keeps the generated kernel, no `if` */
      {"graph_fn main(x: f32[b, 8], w: f32[8, 5]) -> f32[b, 5] where b <= 16 {\n"
       "  dataflow {\n    y = matmul(x, w)\n  }\n  return y\n}\n",
       NULL},
      {"graph_fn main(x: f32[b, 8], w: f32[8, 5]) -> f32[b, 5] where 20 <= b {\n"
       "  dataflow {\n    y = matmul(x, w)\n  }\n  return y\n}\n",
       "y: f32[b, 5] = call_extern(rx_cublaslt_matmul, x, w, prim(0), out=f32[b, 5])"},
      /* rows of a rank-3 a with a shared b: the product */
      {"graph_fn main(x: bf16[b, s, 8], w: bf16[8, 5]) -> bf16[b, s, 5] {\n"
       "  dataflow {\n    y = matmul(x, w)\n  }\n  return y\n}\n",
       "if prim(bool, 17 <= b * s)"},
      /* a batch of b with the same leading dims, transposed */
      {"graph_fn main(x: f16[h, n, 8], k: f16[h, n, 8]) -> f16[h, n, n] {\n"
       "  dataflow {\n    kt = permute(k, axes=[0, 2, 1])\n    y = matmul(x, kt)\n  }\n"
       "  return y\n}\n",
       "call_extern(rx_cublaslt_matmul, x, k, prim(1)"},
      /* not for the library: integers, a batch of b that differs */
      {"graph_fn main(x: i32[n, 8], w: i32[8, 5]) -> i32[n, 5] {\n"
       "  dataflow {\n    y = matmul(x, w)\n  }\n  return y\n}\n",
       NULL},
      {"graph_fn main(x: f32[2, n, 8], w: f32[1, 8, 5]) -> f32[2, n, 5] {\n"
       "  dataflow {\n    y = matmul(x, w)\n  }\n  return y\n}\n",
       NULL},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    rx_module *m = parse(cases[i].src);
    if (!m) continue;
    if (dispatch(m, 17)) {
      char *t = text_of(m);
      if (cases[i].want)
        CHECK_MSG(strstr(t, cases[i].want) != NULL, "case %zu: '%s' expected in:\n%s", i,
                  cases[i].want, t);
      else
        CHECK_MSG(!strstr(t, "call_extern"), "case %zu: nothing dispatched expected:\n%s", i, t);
      free(t);
    }
    rx_module_free(m);
  }
  rx_module *m = parse("graph_fn main(x: f32[n, 8]) -> f32[n, 8] {\n  return x\n}\n");
  rx_dispatch_options o = {RX_DISPATCH_CUBLAS, 0};
  rx_diag d;
  base_diag_init(&d);
  CHECK_MSG(m && !pass_dispatch(m, &o, &d) && strstr(rx_diag_text(&d), "at least 1"),
            "a threshold of 0 is refused: %s", rx_diag_text(&d));
  base_diag_free(&d);
  rx_module_free(m);
}

/* ---- numbers ---- */
static float value(int64_t i, int seed) { return (float)((i * 5 + seed) % 11 - 5) / 8.0f; }

static void fill(void *p, rx_dtype t, int64_t n, int seed) {
  for (int64_t i = 0; i < n; i++) {
    if (t == RX_DTYPE_F32)
      ((float *)p)[i] = value(i, seed);
    else
      ((uint16_t *)p)[i] = base_f32_to_f16(value(i, seed));
  }
}

static double get(const rx_ginterp_value *v, int64_t i) {
  return v->dtype == RX_DTYPE_F32 ? ((float *)v->data)[i]
                                  : base_f16_to_f32(((uint16_t *)v->data)[i]);
}

/* z = silu(x @ w^T), q = x @ v, in double from the same values */
static void check_numbers(const rx_ginterp_value *r, int64_t n, rx_dtype t, const char *what) {
  if (r->kind != RX_GV_TUPLE || r->nfields != 2) {
    CHECK_MSG(0, "%s n %lld: not a pair", what, (long long)n);
    return;
  }
  double tol = t == RX_DTYPE_F32 ? 1e-5 : 4e-3;
  int64_t bad = 0;
  for (int64_t i = 0; i < n; i++) {
    for (int64_t j = 0; j < 24; j++) {
      double y = 0;
      for (int64_t k = 0; k < 40; k++) y += value(i * 40 + k, 1) * value(j * 40 + k, 2);
      double z = y / (1 + exp(-y));
      bad += fabs(get(&r->fields[0], i * 24 + j) - z) > tol * (1 + fabs(z));
    }
    for (int64_t j = 0; j < 13; j++) {
      double q = 0;
      for (int64_t k = 0; k < 40; k++) q += value(i * 40 + k, 1) * value(k * 13 + j, 3);
      bad += fabs(get(&r->fields[1], i * 13 + j) - q) > tol * (1 + fabs(q));
    }
  }
  CHECK_MSG(!bad, "%s n %lld: %lld values off", what, (long long)n, (long long)bad);
}

static void test_numbers(rx_dtype t) {
  char src[2048];
  snprintf(src, sizeof src, model_fmt, ir_dtype_name(t));
  rx_module *lib = parse(src), *gen = parse(src);
  if (!lib || !gen || !dispatch(lib, 17) || !lower(lib) || !lower(gen)) goto done;
  static const int64_t rows[] = {1, 7, 16, 17, 33, 100, 1000};
  size_t es = interp_graph_elem_size(t);
  void *w = calloc(24 * 40, es), *v = calloc(40 * 13, es);
  fill(w, t, 24 * 40, 2);
  fill(v, t, 40 * 13, 3);
  for (size_t ri = 0; ri < sizeof rows / sizeof rows[0]; ri++) {
    int64_t n = rows[ri];
    void *x = calloc((size_t)(n * 40), es);
    fill(x, t, n * 40, 1);
    rx_ginterp_value in[3] = {interp_graph_tensor(t, 2, (int64_t[]){n, 40}, x),
                              interp_graph_tensor(t, 2, (int64_t[]){24, 40}, w),
                              interp_graph_tensor(t, 2, (int64_t[]){40, 13}, v)};
    rx_ginterp_value r1, r2;
    rx_status s1 = interp_graph_run(lib, ir_module_graph_fn(lib, "main"), in, 3, &r1);
    rx_status s2 = interp_graph_run(gen, ir_module_graph_fn(gen, "main"), in, 3, &r2);
    CHECK_MSG(!s1 && !s2, "n %lld: %s / %s", (long long)n, rx_status_message(s1),
              rx_status_message(s2));
    if (!s1) check_numbers(&r1, n, t, "dispatched");
    if (!s2) check_numbers(&r2, n, t, "generated");
    rx_status_free(s1);
    rx_status_free(s2);
    interp_graph_value_free(&r1);
    interp_graph_value_free(&r2);
    free(x);
  }
  free(w);
  free(v);
done:
  rx_module_free(lib);
  rx_module_free(gen);
}

/* ---- the C API's option (rx_compile_request.dispatch) ---- */
static void test_api(void) {
  char src[2048];
  snprintf(src, sizeof src, model_fmt, "f16");
  static const struct {
    const char *targets, *dispatch;
    int64_t min_rows;
    const char *error; /* NULL: compiles, with the library call in the artifact */
  } cases[] = {
      {"cuda", "cublas", 0, NULL},
      {"cuda", "cublas", 64, NULL},
      {"cuda", "none", 0, NULL},
      {"vulkan", "cublas", 0, "add a cuda target or compile without --dispatch"},
      {"cuda", "mkl", 0, "dispatch library 'mkl': expected none or cublas"},
      {"cuda", "cublas", -1, "expected a row count >= 1"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    rx_module *m = parse(src);
    if (!m) continue;
    rx_compile_request req = {.targets = cases[i].targets,
                              .no_nvrtc = true,
                              .dispatch = cases[i].dispatch,
                              .dispatch_min_rows = cases[i].min_rows};
    unsigned char *bytes = NULL;
    size_t len = 0;
    rx_status s = rx_module_compile(m, &req, NULL, &bytes, &len);
    if (cases[i].error) {
      CHECK_MSG(s && strstr(rx_status_message(s), cases[i].error),
                "api case %zu: '%s' expected, got %s", i, cases[i].error,
                s ? rx_status_message(s) : "success");
    } else {
      CHECK_MSG(!s && bytes, "api case %zu: %s", i, rx_status_message(s));
      bool lib = strcmp(cases[i].dispatch, "none") != 0;
      bool found = false;
      for (size_t k = 0; bytes && k + 18 <= len && !found; k++)
        found = !memcmp(bytes + k, "rx_cublaslt_matmul", 18);
      CHECK_MSG(found == lib, "api case %zu: the artifact %s the library call", i,
                found ? "has" : "lacks");
    }
    rx_status_free(s);
    rx_free(bytes);
    rx_module_free(m);
  }
}

int main(void) {
  test_api();
  test_structure();
  test_which();
  test_numbers(RX_DTYPE_F32);
  test_numbers(RX_DTYPE_F16);
  return check_finish("test_dispatch");
}
