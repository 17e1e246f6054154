/* Data-dependent shapes end to end (Relax's tensor_to_shape + match_cast): a shape read from an
 * i64 tensor at run time, match_cast to Shape([a, b]) with fresh variables, a reshape to it
 * (rank-only, a host-level view) recovered by match_cast to f32[a, b], then kernels over a and b.
 *
 * Each program is compiled once (fused and unfused) and run at several shapes through the VM on
 * Vulkan (lavapipe, under the validation layer), and after legalization through the graph
 * interpreter (interp/graph_interp.c); both are compared with a reference computed here. Mismatches
 * (element counts that differ, a Shape match_cast against a known dim, a negative size) must fail
 * with a message naming the function and the reshape / match_cast.
 *
 * usage: test_dynshape TESTS_DIR */
/* test-needs: runtime */
#include "base/base.h"
#include "check.h"
#include "driver/driver.h"
#include "interp/graph_interp.h"
#include "ir/ir.h"
#include "ops/legalize.h"
#include "passes/passes.h"
#include "relaxc/compiler.h"
#include "relaxc/runtime.h"
#include "support_runtime.h"
#include "targets/target.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* y = r2 + 1 and z = row sums of y, with r2 = x viewed as [a, b], a and b read from s. */
static const char *const prog_rows = "graph_fn main(x: f32[n], s: i64[2]) {\n"
                                     "  t = tensor_to_shape(s)\n"
                                     "  u = match_cast(t, Shape([a, b]))\n"
                                     "  r = reshape(x, t)\n"
                                     "  r2 = match_cast(r, f32[a, b])\n"
                                     "  dataflow {\n"
                                     "    y = add(r2, full([a, b], 1.0))\n"
                                     "    z = sum(y, axes=[1])\n"
                                     "  }\n"
                                     "  return (y, z)\n"
                                     "}\n";

/* A Shape match_cast with a known dim (checked at run time), a reshape to the matched shape
 * value u (whose values [a, 3] are known: rank-only from the unknown x), a 0-d tensor as a
 * one-value shape giving m, and arange over m. */
static const char *const prog_known = "graph_fn main(x: f32[ndim=1], s: i64[2], k: i32[]) {\n"
                                      "  t = tensor_to_shape(s)\n"
                                      "  u = match_cast(t, Shape([a, 3]))\n"
                                      "  r = reshape(x, u)\n"
                                      "  q = tensor_to_shape(k)\n"
                                      "  q2 = match_cast(q, Shape([m]))\n"
                                      "  dataflow {\n"
                                      "    y = softmax(r, axis=1)\n"
                                      "    i = arange(prim(m), dtype=f32)\n"
                                      "    w = multiply(i, 2.0)\n"
                                      "  }\n"
                                      "  return (y, w)\n"
                                      "}\n";

/* ---- references ---- */
static void ref_rows(const float *x, int64_t a, int64_t b, float *y, float *z) {
  for (int64_t i = 0; i < a; i++) {
    z[i] = 0;
    for (int64_t j = 0; j < b; j++) {
      y[i * b + j] = x[i * b + j] + 1.0f;
      z[i] += y[i * b + j];
    }
  }
}
static void ref_known(const float *x, int64_t a, int64_t m, float *y, float *w) {
  for (int64_t i = 0; i < a; i++) {
    float mx = -INFINITY, s = 0;
    for (int j = 0; j < 3; j++) mx = fmaxf(mx, x[i * 3 + j]);
    for (int j = 0; j < 3; j++) s += expf(x[i * 3 + j] - mx);
    for (int j = 0; j < 3; j++) y[i * 3 + j] = expf(x[i * 3 + j] - mx) / s;
  }
  for (int64_t i = 0; i < m; i++) w[i] = 2.0f * (float)i;
}

static bool close_all(const float *got, const float *want, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (!(fabsf(got[i] - want[i]) <= 1e-4f * fmaxf(1.0f, fabsf(want[i])))) return false;
  return true;
}

/* One run: inputs x (n floats), s (2 i64), and k (a 0-d i32, prog_known only). */
typedef struct run_case {
  int64_t n, s0, s1, k;
  const char *error;  /* NULL: must succeed; else a substring of the error */
  const char *error2; /* a second substring (or NULL) */
} run_case;

static void fill_x(float *x, int64_t n) {
  for (int64_t i = 0; i < n; i++) x[i] = (float)((i * 7) % 11) * 0.25f - 1.0f;
}

/* ---- the graph interpreter ---- */
static rx_module *parse_legalized(const char *text, const char *name) {
  rx_module *m = rx_module_new();
  rx_diag d;
  base_diag_init(&d);
  bool ok = ir_parse_module(m, name, text, strlen(text), &d) && ops_module_normalize(m, &d) &&
            ir_module_verify(m, &d) && pass_legalize(m, &d) && ops_module_normalize(m, &d) &&
            ir_module_verify(m, &d);
  CHECK_MSG(ok, "%s: does not legalize: %s", name, rx_diag_text(&d));
  base_diag_free(&d);
  if (!ok) {
    rx_module_free(m);
    return NULL;
  }
  return m;
}

static void interp_case(rx_module *m, bool known, const run_case *c) {
  float x[64];
  int64_t s[2] = {c->s0, c->s1};
  int32_t k = (int32_t)c->k;
  fill_x(x, c->n);
  rx_ginterp_value in[3] = {interp_graph_tensor(RX_DTYPE_F32, 1, (int64_t[]){c->n}, x),
                            interp_graph_tensor(RX_DTYPE_I64, 1, (int64_t[]){2}, s),
                            interp_graph_tensor(RX_DTYPE_I32, 0, NULL, &k)};
  rx_ginterp_value out;
  rx_status st = interp_graph_run(m, ir_module_graph_fn(m, "main"), in, known ? 3 : 2, &out);
  char label[128];
  snprintf(label, sizeof label, "interp %s n=%lld s=[%lld, %lld]", known ? "known" : "rows",
           (long long)c->n, (long long)c->s0, (long long)c->s1);
  if (c->error) {
    const char *msg = st ? rx_status_message(st) : "";
    CHECK_MSG(st && strstr(msg, c->error) && (!c->error2 || strstr(msg, c->error2)) &&
                  strstr(msg, "main: "),
              "%s: expected an error with '%s' / '%s', got: %s", label, c->error,
              c->error2 ? c->error2 : "", st ? msg : "success");
  } else if (st) {
    CHECK_MSG(false, "%s: %s", label, rx_status_message(st));
  } else {
    int64_t a = c->s0 == -1 ? c->n / c->s1 : c->s0, b = known ? 3 : c->s1;
    float y[64], z[64];
    if (known)
      ref_known(x, a, c->k, y, z);
    else
      ref_rows(x, a, b, y, z);
    const rx_ginterp_value *gy = &out.fields[0], *gz = &out.fields[1];
    int64_t zn = known ? c->k : a;
    CHECK_MSG(out.kind == RX_GV_TUPLE && out.nfields == 2 && gy->ndim == 2 && gy->shape[0] == a &&
                  gy->shape[1] == b && gz->ndim == 1 && gz->shape[0] == zn,
              "%s: result shapes", label);
    if (out.kind == RX_GV_TUPLE && gy->ndim == 2 && gy->shape[0] == a && gy->shape[1] == b &&
        gz->ndim == 1 && gz->shape[0] == zn)
      CHECK_MSG(close_all(gy->data, y, (size_t)(a * b)) && close_all(gz->data, z, (size_t)zn),
                "%s: numbers differ from the reference", label);
  }
  rx_status_free(st);
  interp_graph_value_free(&out);
}

/* ---- the VM on Vulkan ---- */
/* Compiles text for vk (the target of the Vulkan device it runs on), CUDA and Metal. */
static unsigned char *compile(const char *text, const char *name, bool fuse, const rx_target *vk,
                              size_t *len) {
  rx_module *m = rx_module_new();
  rx_diag d;
  base_diag_init(&d);
  rx_compile_options o = {.no_fuse = !fuse};
  o.targets[o.ntargets++] = vk;
  const char *names[] = {"cuda -arch=sm_80", "metal-apple7"};
  for (size_t i = 0; i < RX_ARRAY_LEN(names); i++) {
    rx_status ts = tgt_target_parse(names[i], &o.targets[o.ntargets++]);
    RX_ASSERT(!ts);
  }
  rx_compile_result r;
  unsigned char *bytes = NULL;
  bool ok = ir_parse_module(m, name, text, strlen(text), &d) && drv_compile(m, &o, &d, &r);
  CHECK_MSG(ok, "%s (fuse %d): does not compile:\n%s", name, fuse, rx_diag_text(&d));
  if (ok) {
    bytes = r.artifact;
    *len = r.artifact_len;
    r.artifact = NULL;
    drv_compile_result_free(&r);
  }
  base_diag_free(&d);
  rx_module_free(m);
  return bytes;
}

static bool read_f32(rx_rt_value *v, size_t i, int ndim, const int64_t *shape, float *out) {
  rx_rt_tensor *t = rx_rt_value_tensor(rx_rt_value_tuple_item(v, i));
  if (!t || rx_rt_tensor_ndim(t) != ndim ||
      memcmp(rx_rt_tensor_shape(t), shape, sizeof(int64_t) * (size_t)ndim))
    return false;
  size_t count = 1;
  for (int d = 0; d < ndim; d++) count *= (size_t)shape[d];
  rx_status st = rx_rt_tensor_read(t, out, count * sizeof(float));
  bool ok = !st;
  rx_status_free(st);
  return ok;
}

static void vm_case(rx_rt_device *dev, rx_rt_artifact *art, bool known, const char *label0,
                    const run_case *c) {
  float x[64];
  int64_t s[2] = {c->s0, c->s1};
  int32_t k = (int32_t)c->k;
  fill_x(x, c->n);
  rx_rt_tensor *in[3] = {0};
  rx_status st = rx_rt_tensor_from_host(dev, RX_DTYPE_F32, 1, (int64_t[]){c->n}, x, &in[0]);
  if (!st) st = rx_rt_tensor_from_host(dev, RX_DTYPE_I64, 1, (int64_t[]){2}, s, &in[1]);
  if (!st && known) st = rx_rt_tensor_from_host(dev, RX_DTYPE_I32, 0, NULL, &k, &in[2]);
  rx_rt_value *out = NULL;
  if (!st) st = rx_rt_vm_call(art, "main", in, known ? 3 : 2, &out);
  char label[160];
  snprintf(label, sizeof label, "vm %s n=%lld s=[%lld, %lld]", label0, (long long)c->n,
           (long long)c->s0, (long long)c->s1);
  if (c->error) {
    const char *msg = st ? rx_status_message(st) : "";
    CHECK_MSG(st && strstr(msg, c->error) && (!c->error2 || strstr(msg, c->error2)) &&
                  strstr(msg, "main: "),
              "%s: expected an error with '%s' / '%s', got: %s", label, c->error,
              c->error2 ? c->error2 : "", st ? msg : "success");
  } else if (st) {
    CHECK_MSG(false, "%s: %s", label, rx_status_message(st));
  } else {
    int64_t a = c->s0 == -1 ? c->n / c->s1 : c->s0, b = known ? 3 : c->s1;
    int64_t zn = known ? c->k : a;
    float y[64], z[64], gy[64], gz[64];
    if (known)
      ref_known(x, a, c->k, y, z);
    else
      ref_rows(x, a, b, y, z);
    bool shapes = read_f32(out, 0, 2, (int64_t[]){a, b}, gy) && read_f32(out, 1, 1, &zn, gz);
    CHECK_MSG(shapes, "%s: result shapes or reading them", label);
    if (shapes)
      CHECK_MSG(close_all(gy, y, (size_t)(a * b)) && close_all(gz, z, (size_t)zn),
                "%s: numbers differ from the reference", label);
  }
  rx_status_free(st);
  rx_rt_value_release(out);
  for (int i = 0; i < 3; i++) rx_rt_tensor_release(in[i]);
}

static const run_case rows_cases[] = {
    {6, 2, 3, 0, NULL, NULL},
    {6, 3, 2, 0, NULL, NULL},
    {6, 6, 1, 0, NULL, NULL},
    {1, 1, 1, 0, NULL, NULL},
    {35, 5, 7, 0, NULL, NULL},
    {35, 7, 5, 0, NULL, NULL},
    {6, 4, 2, 0, "reshape(x, t)", "(6 elements) to Shape([4, 2]) (8 elements)"},
    {6, 1, 5, 0, "reshape(x, t)", "the element counts differ"},
    {6, -1, 2, 0, "match_cast", "cannot be negative"},
};
static const run_case known_cases[] = {
    {6, 2, 3, 4, NULL, NULL},
    {3, 1, 3, 1, NULL, NULL},
    {21, 7, 3, 0, NULL, NULL},
    {9, 3, 3, 5, NULL, NULL},
    {6, 3, 2, 4, "match_cast", "3]), got Shape([3, 2])"},
    {9, 2, 3, 4, "reshape(x, u)", "the element counts differ"},
};

/* The builder API (what the ONNX importer calls) makes the same module as the text. */
static void test_builder(void) {
  rx_module *m = rx_module_new();
  rx_builder *b = rx_builder_new(m, "main");
  const rx_expr *n = rx_sym_var(m, "n"), *two = rx_sym_const(m, 2);
  const rx_expr *ab[2] = {rx_sym_var(m, "a"), rx_sym_var(m, "b")};
  rx_var *x = NULL, *s = NULL, *t = NULL, *u = NULL, *r = NULL, *r2 = NULL, *y = NULL;
  rx_status st = rx_builder_param(b, "x", rx_sinfo_tensor(m, RX_DTYPE_F32, 1, &n), &x);
  if (!st) st = rx_builder_param(b, "s", rx_sinfo_tensor(m, RX_DTYPE_I64, 1, &two), &s);
  if (!st)
    st = rx_emit_op(b, "tensor_to_shape", (rx_node *[]){rx_arg_var(b, s)}, 1, NULL, 0, "t", &t);
  if (!st) st = rx_emit_match_cast(b, rx_arg_var(b, t), rx_sinfo_shape(m, 2, ab), "u", &u);
  if (!st)
    st = rx_emit_op(b, "reshape", (rx_node *[]){rx_arg_var(b, x), rx_arg_var(b, t)}, 2, NULL, 0,
                    "r", &r);
  if (!st)
    st =
        rx_emit_match_cast(b, rx_arg_var(b, r), rx_sinfo_tensor(m, RX_DTYPE_F32, 2, ab), "r2", &r2);
  if (!st)
    st = rx_emit_op(b, "add", (rx_node *[]){rx_arg_var(b, r2), rx_arg_var(b, r2)}, 2, NULL, 0, "y",
                    &y);
  if (!st) {
    st = rx_builder_finish(b, rx_arg_var(b, y), NULL);
    b = NULL;
  }
  if (b) rx_builder_free(b);
  if (!st) st = rx_module_check(m, NULL);
  char *text = st ? NULL : rx_module_to_text(m);
  CHECK_MSG(!st && strstr(text, "t: Shape(ndim=2) = tensor_to_shape(s)") &&
                strstr(text, "u: Shape([a, b]) = match_cast(t, Shape([a, b]))") &&
                strstr(text, "r: f32[ndim=2] = reshape(x, t)") &&
                strstr(text, "r2: f32[a, b] = match_cast(r, f32[a, b])") &&
                strstr(text, "y: f32[a, b] = add(r2, r2)"),
            "builder: %s", st ? rx_status_message(st) : text);
  rx_status_free(st);
  rx_free(text);
  rx_module_free(m);
}

int main(int argc, char **argv) {
  (void)argc;
  (void)argv;
  setvbuf(stdout, NULL, _IOLBF, 0);
  test_builder();
  /* the graph interpreter, after legalization (tensor_to_shape and the rank-only reshape stay
   * host-level op calls) */
  rx_module *mr = parse_legalized(prog_rows, "rows.rx");
  for (size_t i = 0; mr && i < RX_ARRAY_LEN(rows_cases); i++)
    interp_case(mr, false, &rows_cases[i]);
  rx_module *mk = parse_legalized(prog_known, "known.rx");
  for (size_t i = 0; mk && i < RX_ARRAY_LEN(known_cases); i++)
    interp_case(mk, true, &known_cases[i]);
  if (mr) rx_module_free(mr);
  if (mk) rx_module_free(mk);

  /* the VM on Vulkan */
  rx_rt_device *dev = NULL;
  rx_rt_device_options dopts = {.validation = 1};
  rx_status s = rx_rt_device_open("vulkan:0", &dopts, &dev);
  if (s) {
    printf("dynshape: Vulkan unavailable (%s): VM cases skipped\n", rx_status_message(s));
    rx_status_free(s);
  }
  rx_target vk;
  if (dev) rxk_rt_target(dev, &vk);
  for (int prog = 0; dev && prog < 2; prog++) {
    for (int fuse = 1; fuse >= 0; fuse--) {
      size_t len = 0;
      const char *name = prog ? "known.rx" : "rows.rx";
      unsigned char *bytes = compile(prog ? prog_known : prog_rows, name, fuse, &vk, &len);
      if (!bytes) continue;
      rx_rt_artifact *art = NULL;
      s = rx_rt_artifact_load_memory(dev, bytes, len, name, &art);
      CHECK_MSG(!s, "%s: loading: %s", name, s ? rx_status_message(s) : "");
      rx_status_free(s);
      char label[64];
      snprintf(label, sizeof label, "%s %s", prog ? "known" : "rows", fuse ? "fused" : "unfused");
      const run_case *cases = prog ? known_cases : rows_cases;
      size_t nc = prog ? RX_ARRAY_LEN(known_cases) : RX_ARRAY_LEN(rows_cases);
      for (size_t i = 0; art && i < nc; i++) vm_case(dev, art, prog == 1, label, &cases[i]);
      /* the artifact keeps working after a failed call */
      if (art) vm_case(dev, art, prog == 1, label, &cases[0]);
      rx_rt_artifact_release(art);
      free(bytes);
    }
  }
  if (dev) {
    const char *last = NULL;
    size_t nmsg = rx_rt_device_validation_messages(dev, &last);
    CHECK_MSG(nmsg == 0, "%zu Vulkan validation messages; the last: %s", nmsg, last ? last : "");
    rx_rt_device_release(dev);
  }
  return check_finish("dynshape");
}
